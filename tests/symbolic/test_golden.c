/* Golden index expressions: views of small tensors (reshaped, permuted, padded, shrunk,
 * flipped, expanded, and chains of them) built by hand from index Variables, with the
 * expected renderings of their index and validity expressions. Every case is also evaluated
 * at every index and compared with the same view walked in plain integer arithmetic.
 *
 * A case is a stack of views, innermost first: view 0 addresses the storage; view k > 0
 * addresses the contiguous layout of view k-1's shape (its flat index is unravelled into
 * view k-1's indices, the outermost without a modulo, as a shape tracker does). */
#include "sym_test.h"

enum { MAXD = 4, MAXV = 3 };

typedef struct view {
    int ndim;
    int64_t shape[MAXD];
    int64_t strides[MAXD];
    int64_t offset;
    int64_t lo[MAXD], hi[MAXD]; /* valid region lo <= i < hi; hi == 0 means unmasked */
} view;

typedef struct golden {
    const char *what;
    int nviews;
    view v[MAXV];
    const char *index;
    const char *valid;
} golden;

#define V(n, shp, str, off)                                                                        \
    {                                                                                              \
        n, shp, str, off, {0}, {                                                                   \
            0                                                                                      \
        }                                                                                          \
    }
#define VM(n, shp, str, off, l, h)                                                                 \
    { n, shp, str, off, l, h }
#define A(...)                                                                                     \
    { __VA_ARGS__ }

static const golden cases[] = {
    {"contiguous (4,6)", 1, {V(2, A(4, 6), A(6, 1), 0)}, "((i0*6)+i1)", "1"},
    {"(4,6) reshaped to (24,)", 2, {V(2, A(4, 6), A(6, 1), 0), V(1, A(24), A(1), 0)}, "i0", "1"},
    {"(24,) reshaped to (4,6)",
     2,
     {V(1, A(24), A(1), 0), V(2, A(4, 6), A(6, 1), 0)},
     "((i0*6)+i1)",
     "1"},
    {"(4,6) to (24,) and back to (4,6)",
     3,
     {V(2, A(4, 6), A(6, 1), 0), V(1, A(24), A(1), 0), V(2, A(4, 6), A(6, 1), 0)},
     "((i0*6)+i1)",
     "1"},
    {"(4,6) reshaped to (2,12)",
     2,
     {V(2, A(4, 6), A(6, 1), 0), V(2, A(2, 12), A(12, 1), 0)},
     "((i0*12)+i1)",
     "1"},
    {"(4,6) reshaped to (3,8)",
     2,
     {V(2, A(4, 6), A(6, 1), 0), V(2, A(3, 8), A(8, 1), 0)},
     "((i0*8)+i1)",
     "1"},
    {"(4,6) reshaped to (2,2,6)",
     2,
     {V(2, A(4, 6), A(6, 1), 0), V(3, A(2, 2, 6), A(12, 6, 1), 0)},
     "((i0*12)+(i1*6)+i2)",
     "1"},
    {"(4,6) reshaped to (8,3)",
     2,
     {V(2, A(4, 6), A(6, 1), 0), V(2, A(8, 3), A(3, 1), 0)},
     "((i0*3)+i1)",
     "1"},
    {"(2,3,4) reshaped to (6,4)",
     2,
     {V(3, A(2, 3, 4), A(12, 4, 1), 0), V(2, A(6, 4), A(4, 1), 0)},
     "((i0*4)+i1)",
     "1"},
    {"(2,3,4) reshaped to (24,)",
     2,
     {V(3, A(2, 3, 4), A(12, 4, 1), 0), V(1, A(24), A(1), 0)},
     "i0",
     "1"},
    {"(2,3,4) reshaped to (2,12)",
     2,
     {V(3, A(2, 3, 4), A(12, 4, 1), 0), V(2, A(2, 12), A(12, 1), 0)},
     "((i0*12)+i1)",
     "1"},
    {"(4,6) permuted to (6,4)", 1, {V(2, A(6, 4), A(1, 6), 0)}, "(i0+(i1*6))", "1"},
    {"(2,3,4) permuted (2,0,1)", 1, {V(3, A(4, 2, 3), A(1, 12, 4), 0)}, "(i0+(i1*12)+(i2*4))", "1"},
    {"(2,3,4) permuted (1,2,0)", 1, {V(3, A(3, 4, 2), A(4, 1, 12), 0)}, "((i0*4)+i1+(i2*12))", "1"},
    {"(4,6) permuted, reshaped to (24,)",
     2,
     {V(2, A(6, 4), A(1, 6), 0), V(1, A(24), A(1), 0)},
     "(((i0%4)*6)+(i0//4))",
     "1"},
    {"(4,6) permuted, reshaped to (3,8)",
     2,
     {V(2, A(6, 4), A(1, 6), 0), V(2, A(3, 8), A(8, 1), 0)},
     "((i0*2)+((i1%4)*6)+(i1//4))",
     "1"},
    {"(4,6) permuted, reshaped to (2,12)",
     2,
     {V(2, A(6, 4), A(1, 6), 0), V(2, A(2, 12), A(12, 1), 0)},
     "((i0*3)+((i1%4)*6)+(i1//4))",
     "1"},
    {"(4,6) permuted, reshaped to (12,2)",
     2,
     {V(2, A(6, 4), A(1, 6), 0), V(2, A(12, 2), A(2, 1), 0)},
     "((i1*6)+((i0%2)*12)+(i0//2))",
     "1"},
    {"(2,3,4) permuted (2,0,1), reshaped to (4,6)",
     2,
     {V(3, A(4, 2, 3), A(1, 12, 4), 0), V(2, A(4, 6), A(6, 1), 0)},
     "(i0+(i1*4))",
     "1"},
    {"(4,6) padded ((1,1),(0,0))",
     1,
     {VM(2, A(6, 6), A(6, 1), -6, A(1, 0), A(5, 6))},
     "((i0*6)+i1-6)",
     "(((i0*-1)<0) and (i0<5))"},
    {"(4,6) padded ((0,0),(2,2))",
     1,
     {VM(2, A(4, 10), A(6, 1), -2, A(0, 2), A(4, 8))},
     "((i0*6)+i1-2)",
     "(((i1*-1)<-1) and (i1<8))"},
    {"(4,6) padded ((1,1),(2,2))",
     1,
     {VM(2, A(6, 10), A(6, 1), -8, A(1, 2), A(5, 8))},
     "((i0*6)+i1-8)",
     "(((((i0*-1)<0) and (i0<5)) and ((i1*-1)<-1)) and (i1<8))"},
    {"(24,) padded (3,5)",
     1,
     {VM(1, A(32), A(1), -3, A(3), A(27))},
     "(i0-3)",
     "(((i0*-1)<-2) and (i0<27))"},
    {"(4,6) shrunk ((1,3),(2,5))", 1, {V(2, A(2, 3), A(6, 1), 8)}, "((i0*6)+i1+8)", "1"},
    {"(4,6) shrunk ((1,3),(2,5)), reshaped to (6,)",
     2,
     {V(2, A(2, 3), A(6, 1), 8), V(1, A(6), A(1), 0)},
     "((i0%3)+((i0//3)*6)+8)",
     "1"},
    {"(4,6) flipped on dim 1", 1, {V(2, A(4, 6), A(6, -1), 5)}, "((i0*6)+(i1*-1)+5)", "1"},
    {"(4,6) flipped on both dims", 1, {V(2, A(4, 6), A(-6, -1), 23)}, "((i0*-6)+(i1*-1)+23)", "1"},
    {"(1,6) expanded to (4,6)", 1, {V(2, A(4, 6), A(0, 1), 0)}, "i1", "1"},
    {"(4,1) expanded to (4,6)", 1, {V(2, A(4, 6), A(1, 0), 0)}, "i0", "1"},
    {"(4,6) padded ((0,0),(0,2)), reshaped to (32,)",
     2,
     {VM(2, A(4, 8), A(6, 1), 0, A(0, 0), A(4, 6)), V(1, A(32), A(1), 0)},
     "((i0%8)+((i0//8)*6))",
     "((i0%8)<6)"},
    {"(4,6) reshaped (2,2,6), permuted (1,0,2)",
     1,
     {V(3, A(2, 2, 6), A(6, 12, 1), 0)},
     "((i0*6)+(i1*12)+i2)",
     "1"},
    {"(8,) sliced with step 2", 1, {V(1, A(4), A(2), 0)}, "(i0*2)", "1"},
    {"(8,) sliced with step 2, reshaped to (2,2)",
     2,
     {V(1, A(4), A(2), 0), V(2, A(2, 2), A(2, 1), 0)},
     "((i0*4)+(i1*2))",
     "1"},
    {"(8,) sliced [1::3]", 1, {V(1, A(3), A(3), 1)}, "((i0*3)+1)", "1"},
    {"(4,6) shrunk then padded back to (4,6)",
     1,
     {VM(2, A(4, 6), A(6, 1), 0, A(1, 2), A(3, 5))},
     "((i0*6)+i1)",
     "(((((i0*-1)<0) and (i0<3)) and ((i1*-1)<-1)) and (i1<5))"},
    {"(2,3,4) reshaped (6,4), permuted to (4,6)",
     2,
     {V(3, A(2, 3, 4), A(12, 4, 1), 0), V(2, A(4, 6), A(1, 4), 0)},
     "(i0+(i1*4))",
     "1"},
    {"(6,4) permuted view reshaped to (2,3,4)",
     2,
     {V(2, A(6, 4), A(1, 6), 0), V(3, A(2, 3, 4), A(12, 4, 1), 0)},
     "((i0*3)+i1+(i2*6))",
     "1"},
};

/* ---- the symbolic walk ------------------------------------------------------------------ */

static const sym_node *view_expr(sym_ctx *ctx, const view *v, const sym_node *const *idx,
                                 const sym_node **valid) {
    const sym_node *e = sym_const(ctx, v->offset);
    for (int d = 0; d < v->ndim; d++) {
        e = sym_add(ctx, e, sym_mul_c(ctx, idx[d], v->strides[d]));
        if (v->hi[d] == 0)
            continue;
        if (v->lo[d] > 0)
            *valid = sym_and(ctx, *valid, sym_ge(ctx, idx[d], sym_const(ctx, v->lo[d])));
        if (v->hi[d] < v->shape[d])
            *valid = sym_and(ctx, *valid, sym_lt_c(ctx, idx[d], v->hi[d]));
    }
    return e;
}

/* flat over the contiguous layout of shape: the outermost index without a modulo. */
static void unravel(sym_ctx *ctx, const sym_node *flat, const view *v, const sym_node **idx) {
    int64_t inner = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        const sym_node *q = sym_floordiv_c(ctx, flat, inner);
        idx[d] = d == 0 ? q : sym_floormod_c(ctx, q, v->shape[d]);
        inner *= v->shape[d];
    }
}

static const sym_node *case_expr(sym_ctx *ctx, const golden *g, const sym_node *const *vars,
                                 const sym_node **valid) {
    const sym_node *idx[MAXD];
    for (int d = 0; d < g->v[g->nviews - 1].ndim; d++)
        idx[d] = vars[d];
    *valid = sym_const(ctx, 1);
    const sym_node *e = NULL;
    for (int k = g->nviews - 1; k >= 0; k--) {
        e = view_expr(ctx, &g->v[k], idx, valid);
        if (k > 0)
            unravel(ctx, e, &g->v[k - 1], idx);
    }
    return e;
}

/* ---- the same walk in integers ---------------------------------------------------------- */

static int64_t floordiv(int64_t a, int64_t b) {
    int64_t q = 0;
    assert_true(base_floordiv_i64(a, b, &q));
    return q;
}

static int64_t floormod(int64_t a, int64_t b) {
    int64_t r = 0;
    assert_true(base_floormod_i64(a, b, &r));
    return r;
}

static int64_t case_value(const golden *g, const int64_t *at, bool *valid) {
    int64_t idx[MAXD], e = 0;
    memcpy(idx, at, sizeof idx);
    *valid = true;
    for (int k = g->nviews - 1; k >= 0; k--) {
        const view *v = &g->v[k];
        e = v->offset;
        for (int d = 0; d < v->ndim; d++) {
            e += idx[d] * v->strides[d];
            if (v->hi[d] != 0 && (idx[d] < v->lo[d] || idx[d] >= v->hi[d]))
                *valid = false;
        }
        if (k == 0)
            break;
        int64_t inner = 1;
        for (int d = g->v[k - 1].ndim - 1; d >= 0; d--) {
            int64_t q = floordiv(e, inner);
            idx[d] = d == 0 ? q : floormod(q, g->v[k - 1].shape[d]);
            inner *= g->v[k - 1].shape[d];
        }
    }
    return e;
}

/* Every index of the outer shape: the expressions agree with the integer walk. */
static void check_all_points(const golden *g, const sym_node *const *vars, const sym_node *e,
                             const sym_node *valid) {
    const view *outer = &g->v[g->nviews - 1];
    int64_t at[MAXD] = {0}, total = 1;
    for (int d = 0; d < outer->ndim; d++)
        total *= outer->shape[d];
    for (int64_t flat = 0; flat < total; flat++) {
        int64_t rest = flat, got = 0, ok = 0;
        for (int d = outer->ndim - 1; d >= 0; d--) {
            at[d] = rest % outer->shape[d];
            rest /= outer->shape[d];
        }
        bool want_valid;
        int64_t want = case_value(g, at, &want_valid);
        sym_assignment as = {vars, at, (size_t)outer->ndim};
        base_error err = {0};
        assert_int_equal(sym_eval(e, &as, &got, &err), KILN_OK);
        assert_int_equal(sym_eval(valid, &as, &ok, &err), KILN_OK);
        if (got != want || (ok != 0) != want_valid)
            fail_msg("%s at flat %lld: index %lld (want %lld), valid %lld (want %d)", g->what,
                     (long long)flat, (long long)got, (long long)want, (long long)ok, want_valid);
    }
}

static void test_symbolic_golden_view_index_expressions(void **state) {
    (void)state;
    assert_true(BASE_COUNTOF(cases) >= 30);
    int mismatches = 0;
    for (size_t i = 0; i < BASE_COUNTOF(cases); i++) {
        const golden *g = &cases[i];
        sym_ctx *ctx = NULL;
        assert_int_equal(sym_ctx_create(NULL, &ctx), KILN_OK);
        const view *outer = &g->v[g->nviews - 1];
        const sym_node *vars[MAXD];
        for (int d = 0; d < outer->ndim; d++) {
            char name[16];
            snprintf(name, sizeof name, "i%d", d);
            vars[d] = sym_var(ctx, name, 0, outer->shape[d] - 1);
        }
        const sym_node *valid = NULL, *e = case_expr(ctx, g, vars, &valid);
        char got[512], gotv[512];
        sym_render(e, got, sizeof got);
        sym_render(valid, gotv, sizeof gotv);
        if (strcmp(got, g->index) != 0 || strcmp(gotv, g->valid) != 0) {
            fprintf(stderr, "%s: index \"%s\" valid \"%s\", expected \"%s\" and \"%s\"\n", g->what,
                    got, gotv, g->index, g->valid);
            mismatches++;
        }
        assert_int_equal(sym_ctx_status(ctx), KILN_OK);
        check_all_points(g, vars, e, valid);
        sym_ctx_destroy(ctx);
    }
    assert_int_equal(mismatches, 0);
}

/* Symbolic sizes: n rows of 4, and 4 rows of n, flattened and unflattened. */
static void test_symbolic_golden_symbolic_sizes(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *n = sym_var(ctx, "n", 1, 64);
    const sym_node *i = sym_var(ctx, "i", 0, 255); /* i < 4*n at run time */
    /* (n,4) contiguous reshaped to (4n,): (i//4)*4 + i%4 */
    const sym_node *e =
        sym_add(ctx, sym_mul_c(ctx, sym_floordiv_c(ctx, i, 4), 4), sym_floormod_c(ctx, i, 4));
    CHECK(e, 0, 255, "i");
    /* (4,n) contiguous reshaped to (4n,): (i//n)*n + i%n */
    e = sym_add(ctx, sym_mul(ctx, sym_floordiv(ctx, i, n), n), sym_floormod(ctx, i, n));
    CHECK(e, 0, 255, "i");
    /* (n,4) permuted to (4,n): index r + c*4 for r < 4, c < n */
    const sym_node *r = sym_var(ctx, "r", 0, 3), *c = sym_var(ctx, "c", 0, 63);
    CHECK(sym_add(ctx, r, sym_mul_c(ctx, c, 4)), 0, 255, "(r+(c*4))");
    /* (4,n) row-major: r*n + c; the row of that flat index, when c < n, is r */
    const sym_node *flat = sym_add(ctx, sym_mul(ctx, r, n), c);
    CHECK(flat, 0, 255, "(c+(n*r))");
    CHECK(sym_floordiv(ctx, sym_mul(ctx, r, sym_mul_c(ctx, n, 4)), n), 0, 12, "(r*4)");
    CHECK(sym_floormod(ctx, sym_mul(ctx, r, sym_mul_c(ctx, n, 4)), n), 0, 0, "0");
    /* the size of a (n, 4) tensor shrunk by 1 on each side of dim 0, times 4 */
    CHECK(sym_mul_c(ctx, sym_add_c(ctx, n, -2), 4), -4, 248, "((n*4)-8)");
}

#define T(name) cmocka_unit_test_setup_teardown(name, sym_test_setup, sym_test_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_symbolic_golden_view_index_expressions),
        T(test_symbolic_golden_symbolic_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
