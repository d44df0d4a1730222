/* bench_symbolic: how fast symbolic/ builds the index expressions of views.
 *
 * The case: a 6-d tensor of shape (n, 3, 4, m, 5, 2) with symbolic n in [3, 64] and m in
 * [1, 32], contiguous (symbolic strides), then permuted (0, 3, 1, 4, 2, 5), padded (1, 1) on
 * the size-3 dim and (0, 2) on the size-4 dim, shrunk to [1, n-1) on dim 0, and reshaped so
 * the last two dims merge. The index expression and the validity expression of the result are
 * built by hand with sym_ calls, as shape/ will build them. Each "view" varies the pad and
 * shrink amounts so the views are distinct expressions.
 *
 *   cold: a fresh context per view (every node is new: hash-consing inserts)
 *   warm: one context for all views (shared subexpressions are found, not rebuilt)
 *
 * Printed per case: median time per view over the repetitions, views (index expressions
 * with their validity) per second, and nodes built per second (distinct nodes the context
 * created, divided by the time). There is no external reference for this benchmark; the
 * reference columns read n/a. */
#include "bench_util.h"
#include "sym.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { DIMS = 6, REPS = 7 };

typedef struct view {
    const sym_node *shape[DIMS];
    const sym_node *strides[DIMS];
    const sym_node *offset;
    int64_t pad_lo[DIMS]; /* mask: pad_lo <= i < shape - pad_hi */
    int64_t pad_hi[DIMS];
    int ndim;
} view;

static void permute(view *v, const int *perm) {
    view t = *v;
    for (int d = 0; d < v->ndim; d++) {
        v->shape[d] = t.shape[perm[d]];
        v->strides[d] = t.strides[perm[d]];
        v->pad_lo[d] = t.pad_lo[perm[d]];
        v->pad_hi[d] = t.pad_hi[perm[d]];
    }
}

static void pad(sym_ctx *c, view *v, int d, int64_t lo, int64_t hi) {
    v->shape[d] = sym_add_c(c, v->shape[d], lo + hi);
    v->offset = sym_sub(c, v->offset, sym_mul_c(c, v->strides[d], lo));
    v->pad_lo[d] += lo;
    v->pad_hi[d] += hi;
}

static void shrink(sym_ctx *c, view *v, int d, int64_t lo, int64_t hi_from_end) {
    v->offset = sym_add(c, v->offset, sym_mul_c(c, v->strides[d], lo));
    v->shape[d] = sym_add_c(c, v->shape[d], -(lo + hi_from_end));
}

/* One view's index and validity, over index Variables i0..i4 (the last merged dim is i4). */
static const sym_node *build_view(sym_ctx *c, int variant, const sym_node **valid_out) {
    const sym_node *n = sym_var(c, "n", 3, 64), *m = sym_var(c, "m", 1, 32);
    const sym_node *k[] = {sym_const(c, 3), sym_const(c, 4), sym_const(c, 5), sym_const(c, 2)};
    view v = {.shape = {n, k[0], k[1], m, k[2], k[3]}, .ndim = DIMS};
    const sym_node *stride = sym_const(c, 1);
    for (int d = DIMS - 1; d >= 0; d--) { /* contiguous, symbolic */
        v.strides[d] = stride;
        stride = sym_mul(c, stride, v.shape[d]);
    }
    v.offset = sym_const(c, 0);
    static const int perm[DIMS] = {0, 3, 1, 4, 2, 5};
    permute(&v, perm);
    pad(c, &v, 2, 1 + variant % 3, 1);    /* the size-3 dim */
    pad(c, &v, 4, 0, 2 + variant % 5);    /* the size-4 dim */
    shrink(c, &v, 0, 1, 1 + variant % 2); /* [1, n-1-...) */
    /* index Variables: dims 0..3 as they are, dims 4 and 5 merged into i4 */
    static const int64_t hi[5] = {62, 32, 6, 5, 64};
    const sym_node *idx[DIMS];
    char name[8] = "i0";
    for (int d = 0; d < 5; d++) {
        name[1] = (char)('0' + d);
        idx[d] = sym_var(c, name, 0, hi[d] - 1 + (d == 2 ? 3 : 0));
    }
    idx[5] = sym_floormod_c(c, idx[4], 2); /* reshape: (x, 2) -> (2x,) */
    idx[4] = sym_floordiv_c(c, idx[4], 2);
    const sym_node *e = v.offset, *valid = sym_const(c, 1);
    for (int d = 0; d < DIMS; d++) {
        e = sym_add(c, e, sym_mul(c, idx[d], v.strides[d]));
        if (v.pad_lo[d] > 0)
            valid = sym_and(c, valid, sym_ge(c, idx[d], sym_const(c, v.pad_lo[d])));
        if (v.pad_hi[d] > 0)
            valid = sym_and(c, valid, sym_lt(c, idx[d], sym_add_c(c, v.shape[d], -v.pad_hi[d])));
    }
    *valid_out = valid;
    return e;
}

typedef struct result {
    double per_view_s;
    double nodes_per_view;
} result;

static result run(bool cold, int views) {
    double times[REPS];
    double nodes = 0;
    for (int r = 0; r < REPS; r++) {
        sym_ctx *c = NULL;
        uint64_t built = 0;
        double t0 = (bench_now_ms() * 1e-3);
        for (int i = 0; i < views; i++) {
            if (!c && sym_ctx_create(NULL, &c) != KILN_OK)
                exit(1);
            const sym_node *valid = NULL, *e = build_view(c, i, &valid);
            if (!e || !valid || sym_ctx_status(c) != KILN_OK) {
                fprintf(stderr, "bench_symbolic: %s\n", sym_ctx_message(c));
                exit(1);
            }
            if (cold) {
                built += sym_ctx_node_count(c);
                sym_ctx_destroy(c);
                c = NULL;
            }
        }
        if (c) {
            built += sym_ctx_node_count(c);
            sym_ctx_destroy(c);
        }
        times[r] = ((bench_now_ms() * 1e-3) - t0) / views;
        nodes = (double)built / views;
    }
    qsort(times, REPS, sizeof times[0], bench_cmp_double);
    return (result){times[REPS / 2], nodes};
}

static void print_example(void) {
    sym_ctx *c = NULL;
    char buf[1024];
    const sym_node *valid = NULL;
    if (sym_ctx_create(NULL, &c) != KILN_OK)
        return;
    const sym_node *e = build_view(c, 0, &valid);
    sym_render(e, buf, sizeof buf);
    printf("index: %s\n", buf);
    sym_render(valid, buf, sizeof buf);
    printf("valid: %s\n\n", buf);
    sym_ctx_destroy(c);
}

int main(void) {
    print_example();
    printf("%-34s %12s %12s %7s %16s %16s\n", "case", "kiln median", "reference", "ratio",
           "views/s", "nodes built/s");
    struct {
        const char *name;
        bool cold;
        int views;
    } cases[] = {
        {"6-d view, cold context per view", true, 2000},
        {"6-d view, 2000 views, one context", false, 2000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        result r = run(cases[i].cold, cases[i].views);
        printf("%-34s %9.2f us %12s %7s %16.0f %16.0f\n", cases[i].name, r.per_view_s * 1e6, "n/a",
               "n/a", 1.0 / r.per_view_s, r.nodes_per_view / r.per_view_s);
    }
    return 0;
}
