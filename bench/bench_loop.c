/* The training loop of issue 19: a small MLP's gradient step (hand-written gradients, the step
 * of tests/engine/test_lifetime.c, copied) run for thousands of steps on the default device
 * ($KILN_DEVICE picks another), in each way an application can give back what a step made:
 *   in place  kiln_add_ into the parameters, a scope per step;
 *   release   next = f(state), every handle of the step released by hand;
 *   scopes    next = f(state) in a scope that keeps next; the old state released;
 *   keep      next = f(state) with no release and no scope: everything accumulates (the
 *             reference for what the bookkeeping costs; 2,000 steps);
 *   symbolic  the in-place step with a symbolic batch (a Variable bound to 1, 2, ..., 64, 1,
 *             ... in turn; inputs narrowed from 64 rows), a scope per step;
 *   twin      keep again: the control of the pairing (its ratio to keep should be 1);
 *   crowded   scopes in a context that also holds 10,000 lazy tensors made before the loop
 *             (an application's other state): what a scope's end costs beyond the scope.
 * Every variant has a context of its own, with a counting allocator. The variants run in
 * rounds: each round runs a block of steps of every variant not yet done, in a shuffled order,
 * so that a variant's block and keep's block of the same round see the same load of the
 * machine. Printed: the time per step (median over blocks, the overall mean, and the first
 * step, which compiles), kernels and host allocations per step, the median over rounds of the
 * ratio of a variant's block time to keep's in the same round (with its ~95% interval), and the
 * live counts at steps 2, 100, 1,000 and 10,000 (and at a variant's last step). Keep and twin
 * run 2,000 steps, crowded 1,000, the others 10,000. The final parameters are checked against the
 * same steps computed on the host. KILN_BENCH_QUICK=1 runs a tenth of the steps;
 * KILN_BENCH_LOOP_BLOCK=n sets the steps per block (default 20); KILN_BENCH_FILTER=substring runs
 * only the variants whose name holds it (the others run no step; without keep, no ratios). */
#include "bench_util.h"
#include <kiln/kiln.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the model (tests/engine/test_lifetime.c) ---------------------------------------------- */

/* h = relu(x W1), out = h W2, loss = mean((out - y)^2); x and y are the first rows of ROWS. */
enum { BATCH = 8, ROWS = 64, IN = 4, HID = 8, OUT = 2 };
static const float LR = 0.05f;

typedef struct mlp {
    kiln_tensor *x, *y, *w1, *w2;
} mlp;

static float init_value(int i, int salt) {
    return (float)(((i * 37 + salt * 11) % 17) - 8) / 16.0f;
}

/* The parameters, and inputs of rows rows (BATCH, or ROWS to narrow from). */
static mlp mlp_new(kiln_context *ctx, int rows) {
    float x[ROWS * IN], y[ROWS * OUT], w1[IN * HID], w2[HID * OUT];
    for (int i = 0; i < ROWS * IN; i++)
        x[i] = init_value(i, 1);
    for (int i = 0; i < ROWS * OUT; i++)
        y[i] = init_value(i, 2);
    for (int i = 0; i < IN * HID; i++)
        w1[i] = init_value(i, 3);
    for (int i = 0; i < HID * OUT; i++)
        w2[i] = init_value(i, 4);
    return (mlp){kiln_from_data(ctx, KILN_F32, 2, (const int64_t[]){rows, IN}, x),
                 kiln_from_data(ctx, KILN_F32, 2, (const int64_t[]){rows, OUT}, y),
                 kiln_from_data(ctx, KILN_F32, 2, (const int64_t[]){IN, HID}, w1),
                 kiln_from_data(ctx, KILN_F32, 2, (const int64_t[]){HID, OUT}, w2)};
}

/* The gradients of the loss with respect to w1 and w2, lazily. rows: NULL for BATCH rows, else
 * a 0-d tensor holding the symbolic batch. */
static void mlp_grads(kiln_context *ctx, kiln_tensor *x, kiln_tensor *y, kiln_tensor *rows,
                      kiln_tensor *w1, kiln_tensor *w2, kiln_tensor **g1, kiln_tensor **g2) {
    kiln_tensor *pre = kiln_matmul(x, w1);
    kiln_tensor *h = kiln_relu(pre);
    kiln_tensor *out = kiln_matmul(h, w2);
    kiln_tensor *diff = kiln_sub(out, y);
    kiln_tensor *dout = rows ? kiln_mul_scalar(kiln_div(diff, rows), 2.0 / OUT)
                             : kiln_mul_scalar(diff, 2.0 / (BATCH * OUT));
    *g2 = kiln_matmul(kiln_transpose(h, 0, 1), dout);
    kiln_tensor *positive = kiln_gt(pre, kiln_zeros(ctx, KILN_F32, 0, NULL));
    kiln_tensor *dh =
        kiln_mul(kiln_matmul(dout, kiln_transpose(w2, 0, 1)), kiln_cast(positive, KILN_F32));
    *g1 = kiln_matmul(kiln_transpose(x, 0, 1), dh);
}

/* The same step on the host, in float, over the first batch rows. */
static void host_step(float *w1, float *w2, int batch) {
    float x[ROWS * IN], y[ROWS * OUT], pre[ROWS * HID], h[ROWS * HID];
    float dout[ROWS * OUT], dh[ROWS * HID], g1[IN * HID] = {0}, g2[HID * OUT] = {0};
    for (int i = 0; i < batch * IN; i++)
        x[i] = init_value(i, 1);
    for (int i = 0; i < batch * OUT; i++)
        y[i] = init_value(i, 2);
    for (int b = 0; b < batch; b++) {
        for (int j = 0; j < HID; j++) {
            float s = 0;
            for (int k = 0; k < IN; k++)
                s += x[b * IN + k] * w1[k * HID + j];
            pre[b * HID + j] = s;
            h[b * HID + j] = s > 0 ? s : 0;
        }
        for (int o = 0; o < OUT; o++) {
            float s = 0;
            for (int j = 0; j < HID; j++)
                s += h[b * HID + j] * w2[j * OUT + o];
            dout[b * OUT + o] = (s - y[b * OUT + o]) * (2.0f / (float)(batch * OUT));
        }
        for (int j = 0; j < HID; j++) {
            float s = 0;
            for (int o = 0; o < OUT; o++)
                s += dout[b * OUT + o] * w2[j * OUT + o];
            dh[b * HID + j] = pre[b * HID + j] > 0 ? s : 0;
        }
    }
    for (int b = 0; b < batch; b++) {
        for (int j = 0; j < HID; j++) {
            for (int o = 0; o < OUT; o++)
                g2[j * OUT + o] += h[b * HID + j] * dout[b * OUT + o];
            for (int k = 0; k < IN; k++)
                g1[k * HID + j] += x[b * IN + k] * dh[b * HID + j];
        }
    }
    for (int i = 0; i < IN * HID; i++)
        w1[i] -= LR * g1[i];
    for (int i = 0; i < HID * OUT; i++)
        w2[i] -= LR * g2[i];
}

/* The batch of step (from 1) of the symbolic variant. */
static int symbolic_batch(int step) {
    return 1 + (step - 1) % ROWS;
}

/* ---- the steps ----------------------------------------------------------------------------- */

typedef enum loop_kind {
    LOOP_IN_PLACE,
    LOOP_RELEASE,
    LOOP_SCOPES,
    LOOP_KEEP,
    LOOP_SYMBOLIC,
    LOOP_KEEP_TWIN, /* keep again, in a context of its own: the control of the pairing */
    LOOP_CROWDED,   /* scopes in a context that also holds CROWD other tensors */
    LOOP_KINDS
} loop_kind;

/* In place, a scope per step; batch > 0: symbolic, var bound to batch. */
static kiln_status step_in_place(kiln_context *ctx, mlp *m, const kiln_expr *var, int batch) {
    kiln_scope_begin(ctx);
    kiln_tensor *x = m->x, *y = m->y, *rows = NULL;
    if (var) {
        const kiln_expr *b = kiln_bind(ctx, var, batch), *zero = kiln_int(ctx, 0);
        x = kiln_narrow_sym(m->x, 0, zero, b);
        y = kiln_narrow_sym(m->y, 0, zero, b);
        rows = kiln_scalar_expr(ctx, KILN_F32, b);
    }
    kiln_tensor *g1, *g2;
    mlp_grads(ctx, x, y, rows, m->w1, m->w2, &g1, &g2);
    kiln_status st = kiln_add_(m->w1, kiln_mul_scalar(g1, -LR));
    if (st == KILN_OK)
        st = kiln_add_(m->w2, kiln_mul_scalar(g2, -LR));
    if (st == KILN_OK)
        st = kiln_realize_many(ctx, 2, (kiln_tensor *[]){m->w1, m->w2});
    kiln_status end = kiln_scope_end(ctx, 0, NULL);
    return st != KILN_OK ? st : end;
}

/* next = f(state) in a scope that keeps next; the old state released. */
static kiln_status step_scopes(kiln_context *ctx, mlp *m) {
    kiln_scope_begin(ctx);
    kiln_tensor *g1, *g2;
    mlp_grads(ctx, m->x, m->y, NULL, m->w1, m->w2, &g1, &g2);
    kiln_tensor *next[2] = {kiln_sub(m->w1, kiln_mul_scalar(g1, LR)),
                            kiln_sub(m->w2, kiln_mul_scalar(g2, LR))};
    kiln_status st = kiln_realize_many(ctx, 2, next);
    if (st == KILN_OK) {
        kiln_release(m->w1);
        kiln_release(m->w2);
    }
    kiln_status end = kiln_scope_end(ctx, st == KILN_OK ? 2 : 0, next);
    if (st == KILN_OK)
        m->w1 = next[0], m->w2 = next[1];
    return st != KILN_OK ? st : end;
}

/* next = f(state), the step's handles released by hand (release) or kept (not). */
static kiln_status step_next(kiln_context *ctx, mlp *m, bool release) {
    kiln_tensor *pre = kiln_matmul(m->x, m->w1);
    kiln_tensor *h = kiln_relu(pre);
    kiln_tensor *out = kiln_matmul(h, m->w2);
    kiln_tensor *diff = kiln_sub(out, m->y);
    kiln_tensor *dout = kiln_mul_scalar(diff, 2.0 / (BATCH * OUT));
    kiln_tensor *ht = kiln_transpose(h, 0, 1);
    kiln_tensor *g2 = kiln_matmul(ht, dout);
    kiln_tensor *w2t = kiln_transpose(m->w2, 0, 1);
    kiln_tensor *back = kiln_matmul(dout, w2t);
    kiln_tensor *zero = kiln_zeros(ctx, KILN_F32, 0, NULL);
    kiln_tensor *pos = kiln_gt(pre, zero);
    kiln_tensor *mask = kiln_cast(pos, KILN_F32);
    kiln_tensor *dh = kiln_mul(back, mask);
    kiln_tensor *xt = kiln_transpose(m->x, 0, 1);
    kiln_tensor *g1 = kiln_matmul(xt, dh);
    kiln_tensor *s1 = kiln_mul_scalar(g1, LR), *s2 = kiln_mul_scalar(g2, LR);
    kiln_tensor *next[2] = {kiln_sub(m->w1, s1), kiln_sub(m->w2, s2)};
    kiln_tensor *made[] = {pre,  h,   out,  diff, dout, ht, g2, w2t, back,
                           zero, pos, mask, dh,   xt,   g1, s1, s2};
    kiln_status st = kiln_realize_many(ctx, 2, next);
    if (st != KILN_OK)
        return st;
    if (release) {
        for (size_t i = 0; i < sizeof made / sizeof *made; i++)
            kiln_release(made[i]);
        kiln_release(m->w1);
        kiln_release(m->w2);
    }
    m->w1 = next[0], m->w2 = next[1];
    return KILN_OK;
}

/* ---- variants ------------------------------------------------------------------------------ */

/* Kiln's host allocations: live blocks and bytes, and every allocation or resize. */
typedef struct counting_alloc {
    size_t live_bytes;
    long live_blocks;
    uint64_t calls;
} counting_alloc;

static void *counting_alloc_fn(void *user, void *ptr, size_t osize, size_t nsize) {
    counting_alloc *a = user;
    if (nsize == 0) {
        if (ptr) {
            a->live_bytes -= osize;
            a->live_blocks--;
        }
        free(ptr);
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (!p)
        return NULL;
    a->calls++;
    if (ptr)
        a->live_bytes -= osize;
    else
        a->live_blocks++;
    a->live_bytes += nsize;
    return p;
}

enum { MAX_CHECKPOINTS = 5, MAX_BLOCKS = 10000, CROWD = 10000 };
static int g_block = 20; /* steps per block */

typedef struct checkpoint {
    int step;
    kiln_stats stats;
    counting_alloc host;
} checkpoint;

typedef struct variant {
    loop_kind kind;
    const char *name;
    int steps; /* to run */
    kiln_context *ctx;
    counting_alloc host;
    uint64_t setup_calls; /* host allocations before the first step */
    mlp m;
    const kiln_expr *var; /* the symbolic batch */
    int done;             /* steps run */
    double first_ms, total_ms;
    double block_ms[MAX_BLOCKS]; /* per step, in block b */
    int blocks;
    checkpoint cp[MAX_CHECKPOINTS];
    int checkpoints;
    bool failed;
} variant;

static const char *const NAMES[LOOP_KINDS] = {"in place (scope per step)",  "release by hand",
                                              "scopes (keep next)",         "keep every handle",
                                              "symbolic batch (scope)",     "keep (twin: control)",
                                              "scopes, 10,000 tensors live"};

static bool is_checkpoint(const variant *v, int step) {
    return step == 2 || step == 100 || step == 1000 || step == 10000 || step == v->steps;
}

static kiln_status run_step(variant *v, int step) {
    switch (v->kind) {
    case LOOP_IN_PLACE:
        return step_in_place(v->ctx, &v->m, NULL, 0);
    case LOOP_SYMBOLIC:
        return step_in_place(v->ctx, &v->m, v->var, symbolic_batch(step));
    case LOOP_SCOPES:
    case LOOP_CROWDED:
        return step_scopes(v->ctx, &v->m);
    case LOOP_RELEASE:
        return step_next(v->ctx, &v->m, true);
    default: /* keep and its twin */
        return step_next(v->ctx, &v->m, false);
    }
}

static int variant_open(variant *v, loop_kind kind, int steps) {
    *v = (variant){.kind = kind, .name = NAMES[kind], .steps = steps};
    kiln_context_options opt = {.alloc = counting_alloc_fn, .alloc_user = &v->host};
    if (kiln_context_create(&opt, &v->ctx) != KILN_OK) {
        fprintf(stderr, "bench_loop: no context\n");
        return 1;
    }
    v->m = mlp_new(v->ctx, kind == LOOP_SYMBOLIC ? ROWS : BATCH);
    if (kind == LOOP_SYMBOLIC)
        v->var = kiln_variable(v->ctx, "batch", 1, ROWS);
    for (int i = 0; kind == LOOP_CROWDED && i < CROWD; i++) /* lazy, unrealized */
        kiln_mul_scalar(v->m.x, (double)i);
    if (kiln_context_status(v->ctx) != KILN_OK) {
        fprintf(stderr, "bench_loop: %s\n", kiln_context_message(v->ctx));
        return 1;
    }
    v->setup_calls = v->host.calls;
    return 0;
}

/* Runs the next block of v's steps (none once v is done or failed). */
static void variant_block(variant *v) {
    int n = v->steps - v->done < g_block ? v->steps - v->done : g_block;
    if (n <= 0 || v->failed)
        return;
    double t0 = bench_now_ms();
    for (int i = 0; i < n; i++) {
        int step = ++v->done;
        if (run_step(v, step) != KILN_OK) {
            fprintf(stderr, "bench_loop: %s, step %d: %s\n", v->name, step,
                    kiln_context_message(v->ctx));
            v->failed = true;
            return;
        }
        if (step == 1)
            v->first_ms = bench_now_ms() - t0;
        if (is_checkpoint(v, step) && v->checkpoints < MAX_CHECKPOINTS)
            v->cp[v->checkpoints++] = (checkpoint){step, kiln_context_stats(v->ctx), v->host};
    }
    double ms = bench_now_ms() - t0;
    v->total_ms += ms;
    v->block_ms[v->blocks++] = ms / n;
}

/* Checks v's parameters against the host's after the same steps; returns the largest error
 * relative to 1 + |host| (or a negative value when they cannot be read). */
static double variant_error(const variant *v) {
    float w1[IN * HID], w2[HID * OUT], d1[IN * HID], d2[HID * OUT];
    for (int i = 0; i < IN * HID; i++)
        w1[i] = init_value(i, 3);
    for (int i = 0; i < HID * OUT; i++)
        w2[i] = init_value(i, 4);
    for (int step = 1; step <= v->done; step++)
        host_step(w1, w2, v->kind == LOOP_SYMBOLIC ? symbolic_batch(step) : BATCH);
    if (kiln_read(v->m.w1, d1, sizeof d1) != KILN_OK ||
        kiln_read(v->m.w2, d2, sizeof d2) != KILN_OK)
        return -1;
    double err = 0;
    for (int i = 0; i < IN * HID + HID * OUT; i++) {
        double d = i < IN * HID ? d1[i] : d2[i - IN * HID];
        double h = i < IN * HID ? w1[i] : w2[i - IN * HID];
        double e = fabs(d - h) / (1 + fabs(h));
        err = e > err || isnan(e) ? e : err;
    }
    return err;
}

/* ---- report -------------------------------------------------------------------------------- */

/* The median over the rounds both ran of v's block time over ref's, and its ~95% interval. */
static int paired_ratio(const variant *v, const variant *ref, double *mid, double *lo, double *hi) {
    double r[MAX_BLOCKS];
    int n = v->blocks < ref->blocks ? v->blocks : ref->blocks;
    for (int b = 0; b < n; b++)
        r[b] = v->block_ms[b] / ref->block_ms[b];
    if (n == 0)
        return 0;
    *mid = bench_median(r, n);
    int k = bench_median_ci_rank(n);
    *lo = r[k], *hi = r[n - 1 - k];
    return n;
}

static void print_times(variant *vs, int count, const variant *ref) {
    printf("%-27s %6s %9s %8s %8s %7s %7s  %-26s %s\n", "variant", "steps", "first ms", "med ms",
           "mean ms", "kernels", "allocs", "ratio to keep [95%] /pairs", "check");
    for (int i = 0; i < count; i++) {
        variant *v = &vs[i];
        if (v->steps == 0) /* not selected */
            continue;
        double blocks[MAX_BLOCKS];
        memcpy(blocks, v->block_ms, sizeof(double) * (size_t)v->blocks);
        double med = v->blocks ? bench_median(blocks, v->blocks) : 0;
        double n = v->done ? v->done : 1, kernels = (double)kiln_context_stats(v->ctx).dispatches;
        double mid = 0, lo = 0, hi = 0, err = v->failed ? -1 : variant_error(v);
        int pairs = v == ref ? 0 : paired_ratio(v, ref, &mid, &lo, &hi);
        char ratio[64] = "(reference)", check[64];
        if (v != ref && pairs == 0)
            snprintf(ratio, sizeof ratio, "-");
        else if (v != ref)
            snprintf(ratio, sizeof ratio, "%.3f [%.3f, %.3f] /%d", mid, lo, hi, pairs);
        if (err < 0)
            snprintf(check, sizeof check, "FAILED");
        else
            snprintf(check, sizeof check, "%s (err %.1e)", err <= 1e-4 ? "ok" : "WRONG", err);
        printf("%-27s %6d %9.3f %8.4f %8.4f %7.2f %7.1f  %-26s %s\n", v->name, v->done, v->first_ms,
               med, v->total_ms / n, kernels / n, (double)(v->host.calls - v->setup_calls) / n,
               ratio, check);
    }
}

/* Whether twin (the same work as keep, in a context of its own) paired with keep at 1: with
 * the median within 5%, the ratios of this run compare the variants; beyond, the contexts
 * themselves differ (seen on lavapipe under load: a context's device threads can run slower for a
 * whole run). */
static void print_control(const variant *twin, const variant *keep) {
    double mid, lo, hi;
    if (!paired_ratio(twin, keep, &mid, &lo, &hi))
        return;
    if (fabs(mid - 1) <= 0.05)
        printf("control: keep's twin / keep = %.3f [%.3f, %.3f]: the pairing holds (within 5%%)\n",
               mid, lo, hi);
    else
        printf("control: keep's twin / keep = %.3f [%.3f, %.3f]: NOT 1, the two contexts ran at "
               "different speeds; compare the ratios of another run\n",
               mid, lo, hi);
}

static void print_counts(const variant *v) {
    printf("\n%s (%d steps): live counts after a step\n", v->name, v->done);
    printf("%7s %8s %8s %9s %13s %10s %12s %12s %9s %9s\n", "step", "tensors", "nodes", "storages",
           "storage bytes", "pool bytes", "expressions", "host bytes", "blocks", "compiles");
    for (int i = 0; i < v->checkpoints; i++) {
        const checkpoint *c = &v->cp[i];
        printf("%7d %8llu %8llu %9llu %13llu %10llu %12llu %12zu %9ld %9llu\n", c->step,
               (unsigned long long)c->stats.live_tensors, (unsigned long long)c->stats.live_nodes,
               (unsigned long long)c->stats.live_storages,
               (unsigned long long)c->stats.live_storage_bytes,
               (unsigned long long)c->stats.pool_bytes,
               (unsigned long long)c->stats.live_expressions, c->host.live_bytes,
               c->host.live_blocks, (unsigned long long)c->stats.kernels_compiled);
    }
}

/* Whether $KILN_BENCH_FILTER (a substring of a variant's name) selects name. */
static bool selected(const char *name) {
    const char *filter = getenv("KILN_BENCH_FILTER");
    return !filter || strstr(name, filter);
}

/* order[0..n) = a random permutation of 0..n-1. */
static void shuffle(int *order, int n, uint64_t *seed) {
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        int j = (int)((*seed >> 33) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
}

int main(void) {
    /* Every kernel a step needs is compiled in the run and counted (no disk cache). */
    setenv("KILN_CACHE", "0", 1);
    const char *quick = getenv("KILN_BENCH_QUICK");
    int div = quick && strcmp(quick, "0") != 0 ? 10 : 1;
    const int steps[LOOP_KINDS] = {10000 / div, 10000 / div, 10000 / div, 2000 / div,
                                   10000 / div, 2000 / div,  1000 / div};
    const char *block = getenv("KILN_BENCH_LOOP_BLOCK");
    if (block && atoi(block) > 0)
        g_block = atoi(block);
    static variant vs[LOOP_KINDS];
    for (int k = 0; k < LOOP_KINDS; k++)
        if (variant_open(&vs[k], (loop_kind)k, selected(NAMES[k]) ? steps[k] : 0))
            return 1;
    printf("bench_loop on %s: an MLP step (batch %d, %d-%d-%d), blocks of %d steps in turn\n",
           kiln_context_device_name(vs[0].ctx), BATCH, IN, HID, OUT, g_block);
    double t0 = bench_now_ms();
    uint64_t seed = 1;
    for (int round = 0;; round++) {
        bool any = false;
        int order[LOOP_KINDS];
        shuffle(order, LOOP_KINDS, &seed);
        for (int i = 0; i < LOOP_KINDS; i++) {
            variant *v = &vs[order[i]];
            any |= v->done < v->steps && !v->failed;
            variant_block(v);
        }
        if (!any)
            break;
    }
    double wall = bench_now_ms() - t0;
    print_times(vs, LOOP_KINDS, &vs[LOOP_KEEP]);
    printf("(ms per step; med: median over blocks of %d steps; first: step 1, which compiles; "
           "kernels: dispatches per step; allocs: host allocations per step; ratio: median "
           "over the rounds both ran of the block's time over keep's block's)\n",
           g_block);
    print_control(&vs[LOOP_KEEP_TWIN], &vs[LOOP_KEEP]);
    int failed = 0;
    for (int k = 0; k < LOOP_KINDS; k++) {
        if (vs[k].steps)
            print_counts(&vs[k]);
        failed |= vs[k].failed;
    }
    printf("\nwall time of the loops: %.1f s\n", wall / 1e3);
    for (int k = 0; k < LOOP_KINDS; k++)
        kiln_context_destroy(vs[k].ctx);
    return failed;
}
