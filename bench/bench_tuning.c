/* bench_tuning: Kiln's own tile choices (engine/run/runtime.c eng_runtime_tune) against
 * alternatives, in one process. Each alternative runs in a context of its own
 * (eng_testing.tile_*, eng_testing.h: its own VkDevice and driver threads) next to a context with
 * the device's choice; the two realize the same graph on the same inputs in alternation, a
 * warm-up pair and then KILN_BENCH_PAIRS pairs (default 11), and the row gives the median of
 * the pairs' ratios alternative/default with its ~95% interval (order statistics): "faster" or
 * "slower" when the interval excludes 1, else "same". Separate processes differ by up to +-10%
 * on a shared machine, which hides the few percent a tile choice is worth; within one process
 * the alternation cancels the drift. Both outputs are read back and must agree exactly (inputs
 * are multiples of 1/4, so every order of the sums gives the same f32).
 *
 * KILN_BENCH_FILTER=substring runs the cases whose name contains it. */
#include "bench_util.h"
#include "eng_testing.h"

#include <kiln/kiln.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

enum { SIDE = 4096, MM = 1024, MAX_PAIRS = 41 };

typedef enum op {
    OP_SCALE,
    OP_MUL,
    OP_FMA,
    OP_BCAST,
    OP_MAX0,
    OP_SUM_ROWS,
    OP_SUM_T,
    OP_MATMUL,
    OP_MATMUL_BIG
} op;

/* A tile choice: 0 keeps the device's. */
typedef struct tiles {
    uint32_t ew, rows, cols, vector_cols, block_rows;
    bool unshared; /* eng_testing.unshared_loads */
    bool unpaired; /* eng_testing.unpaired_vectors */
} tiles;

typedef struct bench_case {
    const char *name;
    op op;
    const char *what; /* the tile the alternatives change */
    tiles alt[3];
    uint32_t alt_count;
} bench_case;

/* One side: a context and the case's inputs in it. */
typedef struct side {
    kiln_context *ctx;
    kiln_tensor *in[3];
} side;

static const bench_case cases[] = {
    {"relu(x) 16M f32", OP_SCALE, "elementwise outputs", {{.ew = 8}, {.ew = 32}}, 2},
    {"a*b 16M f32", OP_MUL, "elementwise outputs", {{.ew = 8}, {.ew = 32}}, 2},
    {"a*b+c 16M f32", OP_FMA, "elementwise outputs", {{.ew = 8}, {.ew = 32}}, 2},
    {"(4096,4096)+(4096,1)", OP_BCAST, "elementwise outputs", {{.ew = 8}, {.ew = 32}}, 2},
    {"max(x,0) (4096,4096)",
     OP_MAX0,
     "vector columns",
     {{.vector_cols = 8}, {.vector_cols = 32}},
     2},
    {"sum(x.T,-1) (4096,4096)",
     OP_SUM_T,
     "vector columns",
     {{.vector_cols = 8}, {.vector_cols = 32}},
     2},
    {"matmul 1024^3",
     OP_MATMUL,
     "rows x cols",
     {{.rows = 4, .cols = 16}, {.rows = 16, .cols = 4}},
     2},
    {"matmul 1024^3", OP_MATMUL, "tile blocks", {{.block_rows = 1}, {.block_rows = 8}}, 2},
    {"matmul 1024^3", OP_MATMUL, "subgroup loads", {{.unshared = true}}, 1},
    {"matmul 2048^3", OP_MATMUL_BIG, "tile blocks", {{.block_rows = 1}, {.block_rows = 8}}, 2},
    {"matmul 2048^3", OP_MATMUL_BIG, "subgroup loads", {{.unshared = true}}, 1},
    {"a*b+c 16M f32", OP_FMA, "paired vectors", {{.unpaired = true}}, 1},
    {"sum(x,-1) (4096,4096)", OP_SUM_ROWS, "paired vectors", {{.unpaired = true}}, 1},
    {"max(x,0) (4096,4096)", OP_MAX0, "paired vectors", {{.unpaired = true}}, 1},
    {"matmul 1024^3", OP_MATMUL, "paired vectors", {{.unpaired = true}}, 1},
};

static size_t input_count(op o) {
    return o == OP_FMA ? 3 : o == OP_MUL || o == OP_BCAST || o >= OP_MATMUL ? 2 : 1;
}

static bool side_open(side *s, const bench_case *c, const tiles *t, float *const host[3]) {
    eng_testing testing = {0};
    if (t) {
        testing.tile_ew = t->ew;
        testing.tile_rows = t->rows;
        testing.tile_cols = t->cols;
        testing.tile_vector_cols = t->vector_cols;
        testing.tile_block_rows = t->block_rows;
        testing.unshared_loads = t->unshared;
        testing.unpaired_vectors = t->unpaired;
    }
    memset(s, 0, sizeof *s);
    if (eng_testing_context_create(NULL, &testing, &s->ctx) != KILN_OK) {
        fprintf(stderr, "bench_tuning: no context\n");
        return false;
    }
    int64_t n = c->op == OP_MATMUL ? MM : c->op == OP_MATMUL_BIG ? 2 * MM : SIDE;
    for (size_t i = 0; i < input_count(c->op); i++) {
        int64_t cols = c->op == OP_BCAST && i == 1 ? 1 : n;
        s->in[i] = kiln_from_data(s->ctx, KILN_F32, 2, (int64_t[]){n, cols}, host[i]);
        if (kiln_realize(s->in[i]) != KILN_OK) {
            fprintf(stderr, "bench_tuning: %s\n", kiln_context_message(s->ctx));
            return false;
        }
    }
    return true;
}

static kiln_tensor *build(const side *s, op o) {
    switch (o) {
    case OP_SCALE:
        return kiln_relu(s->in[0]);
    case OP_MUL:
        return kiln_mul(s->in[0], s->in[1]);
    case OP_FMA:
        return kiln_add(kiln_mul(s->in[0], s->in[1]), s->in[2]);
    case OP_BCAST:
        return kiln_add(s->in[0], s->in[1]);
    case OP_MAX0:
        return kiln_max(s->in[0], 1, (const int32_t[]){0}, false);
    case OP_SUM_ROWS:
        return kiln_sum(s->in[0], 1, (const int32_t[]){-1}, false);
    case OP_SUM_T:
        return kiln_sum(kiln_transpose(s->in[0], 0, 1), 1, (const int32_t[]){-1}, false);
    case OP_MATMUL:
    case OP_MATMUL_BIG:
        return kiln_matmul(s->in[0], s->in[1]);
    }
    return NULL;
}

/* One realize of the case in a scope of its own (its result released after): milliseconds, or
 * NAN on failure. With out, the result is read into it. */
static double run_once(const side *s, op o, float *out, size_t n) {
    kiln_scope_begin(s->ctx);
    double t0 = bench_now_ms();
    kiln_tensor *t = build(s, o);
    kiln_status st = kiln_realize(t);
    double ms = bench_now_ms() - t0;
    if (st == KILN_OK && out)
        st = kiln_read(t, out, n * sizeof *out);
    if (st != KILN_OK)
        fprintf(stderr, "bench_tuning: %s\n", kiln_context_message(s->ctx));
    (void)kiln_scope_end(s->ctx, 0, NULL);
    return st == KILN_OK ? ms : NAN;
}

static size_t output_count(op o) {
    return o == OP_MAX0 || o == OP_SUM_T || o == OP_SUM_ROWS ? SIDE
           : o == OP_MATMUL                                  ? (size_t)MM * MM
           : o == OP_MATMUL_BIG                              ? (size_t)4 * MM * MM
                                                             : (size_t)SIDE * SIDE;
}

static void describe(char *buf, size_t size, const tiles *t) {
    if (t->unshared)
        snprintf(buf, size, "unshared");
    else if (t->unpaired)
        snprintf(buf, size, "vec4");
    else if (t->block_rows)
        snprintf(buf, size, t->block_rows > 1 ? "%u x 8" : "none", t->block_rows);
    else if (t->rows || t->cols)
        snprintf(buf, size, "%u x %u", t->rows, t->cols);
    else
        snprintf(buf, size, "%u", t->ew ? t->ew : t->vector_cols);
}

/* Alternative t of case c against def (the device's choice): prints a row. */
static void compare(const bench_case *c, const side *def, const tiles *t, float *const host[3],
                    int pairs, float *want, float *got) {
    char alt[32];
    describe(alt, sizeof alt, t);
    side s;
    if (!side_open(&s, c, t, host)) {
        printf("%-26s %-20s %-8s failed to set up\n", c->name, c->what, alt);
        kiln_context_destroy(s.ctx);
        return;
    }
    size_t n = output_count(c->op);
    bool ok = !isnan(run_once(def, c->op, want, n)) && !isnan(run_once(&s, c->op, got, n));
    size_t bad = 0;
    for (size_t i = 0; ok && i < n; i++)
        bad += got[i] != want[i];
    double dt[MAX_PAIRS], at[MAX_PAIRS], ratio[MAX_PAIRS];
    for (int i = 0; ok && !bad && i < pairs; i++) {
        if (i % 2 == 0) {
            dt[i] = run_once(def, c->op, NULL, 0);
            at[i] = run_once(&s, c->op, NULL, 0);
        } else {
            at[i] = run_once(&s, c->op, NULL, 0);
            dt[i] = run_once(def, c->op, NULL, 0);
        }
        ok = !isnan(dt[i]) && !isnan(at[i]) && dt[i] > 0;
        ratio[i] = ok ? at[i] / dt[i] : NAN;
    }
    if (!ok || bad) {
        printf("%-26s %-20s %-8s %s\n", c->name, c->what, alt,
               bad ? "RESULTS DIFFER from the device's tile" : "failed");
    } else {
        double r = bench_median(ratio, pairs);
        int lo = bench_median_ci_rank(pairs);
        const char *verdict = ratio[pairs - 1 - lo] < 1 ? "faster"
                              : ratio[lo] > 1           ? "slower"
                                                        : "same";
        printf("%-26s %-20s %-8s %10.3f %10.3f %8.3f %.3f-%.3f  %s\n", c->name, c->what, alt,
               bench_median(dt, pairs), bench_median(at, pairs), r, ratio[lo],
               ratio[pairs - 1 - lo], verdict);
    }
    fflush(stdout);
    kiln_context_destroy(s.ctx);
}

int main(void) {
    const char *filter = getenv("KILN_BENCH_FILTER");
    int pairs = getenv("KILN_BENCH_PAIRS") ? atoi(getenv("KILN_BENCH_PAIRS")) : 11;
    pairs = pairs < 3 ? 3 : pairs > MAX_PAIRS ? MAX_PAIRS : pairs;
    size_t big = (size_t)SIDE * SIDE;
    float *host[3], *want = malloc(big * sizeof *want), *got = malloc(big * sizeof *got);
    for (int i = 0; i < 3; i++) {
        host[i] = malloc(big * sizeof *host[i]);
        if (host[i])
            bench_fill_quarters(host[i], big, (uint64_t)i + 1);
    }
    if (!host[0] || !host[1] || !host[2] || !want || !got) {
        fprintf(stderr, "bench_tuning: out of host memory\n");
        return 1;
    }
    printf("bench_tuning: the device's tiles against alternatives, one process, %d pairs each\n",
           pairs);
    printf("%-26s %-20s %-8s %10s %10s %8s %-11s  %s\n", "case", "tile", "instead", "device ms",
           "alt ms", "alt/dev", "interval", "verdict");
    int status = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bench_case *c = &cases[i];
        if (filter && !strstr(c->name, filter))
            continue;
        side def;
        if (!side_open(&def, c, NULL, host)) {
            kiln_context_destroy(def.ctx);
            status = 1;
            continue;
        }
        (void)run_once(&def, c->op, NULL, 0); /* compiled before the first pair */
        for (uint32_t a = 0; a < c->alt_count; a++)
            compare(c, &def, &c->alt[a], host, pairs, want, got);
        kiln_context_destroy(def.ctx);
    }
    printf("alt/dev: the median of the pairs' time ratios, alternative over the device's choice, "
           "with its ~95%% interval; the device's tiles are engine/run/runtime.c's.\n");
    for (int i = 0; i < 3; i++)
        free(host[i]);
    free(want);
    free(got);
    return status;
}
