/* to_movement_ops: any single view (negative strides, overlapping windows, zero strides, masks)
 * is rebuilt from a contiguous base without as_strided, and the rebuild is the same view. */
#include "shape_test.h"

#include <string.h>

/* Rebuilds v, checks the base size and that no op is an as_strided (there is none in the op
 * set), then applies the ops independently of the library's own check. */
static uint32_t rebuild(st_env *env, const shape_view *v, int64_t want_base) {
    shape_op ops[SHAPE_MAX_OPS];
    uint32_t n;
    int64_t base;
    kiln_status s = shape_view_to_movement_ops(env->ctx, v, ops, SHAPE_MAX_OPS, &n, &base);
    if (s != KILN_OK)
        fail_msg("to_movement_ops: %s", shape_ctx_message(env->ctx));
    assert_int_equal(base, want_base);
    const sym_node *b = sym_const(env->sym, base);
    shape_view bv;
    shape_tracker t;
    assert_int_equal(shape_view_contiguous(env->ctx, 1, &b, &bv), KILN_OK);
    shape_tracker_from_view(&bv, &t);
    for (uint32_t i = 0; i < n; i++) {
        assert_true(ops[i].kind <= SHAPE_OP_UNFOLD);
        assert_int_equal(shape_tracker_apply(env->ctx, &t, &ops[i], &t), KILN_OK);
    }
    assert_int_equal(t.nviews, 1);
    assert_true(shape_view_equal(&t.views[0], v));
    return n;
}

static shape_view strided(st_env *env, uint32_t n, const int64_t *sizes, const int64_t *strides,
                          int64_t offset) {
    shape_view v;
    assert_int_equal(shape_view_as_strided(env->ctx, n, st_c(env->sym, 0, n, sizes),
                                           st_c(env->sym, 1, n, strides),
                                           sym_const(env->sym, offset), NULL, &v),
                     KILN_OK);
    return v;
}
#define STRIDED(n, sz, st, off) strided(env, n, sz, st, off)

static void test_shape_mops_contiguous_and_permuted(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(2, 3, 4), t;
    rebuild(env, &v, 24);
    assert_int_equal(shape_view_permute(C, &v, (int32_t[]){2, 0, 1}, &t), KILN_OK);
    rebuild(env, &t, 24);
}

static void test_shape_mops_negative_strides(void **state) {
    ST_ENV(state);
    (void)C;
    /* (3,4) strides (-4,-1) from offset 11: the full (3,4) reversed in both dims */
    shape_view v = STRIDED(2, ST_N(3, 4), ST_N(-4, -1), 11);
    rebuild(env, &v, 12);
    /* mixed signs and gaps: (2,3) strides (-7, 2) from offset 9: elements 9..13 and 2..6 */
    v = STRIDED(2, ST_N(2, 3), ST_N(-7, 2), 9);
    rebuild(env, &v, 14);
    (void)S;
}

static void test_shape_mops_overlapping_windows(void **state) {
    ST_ENV(state);
    (void)C;
    (void)S;
    /* sliding windows of 4 with step 1 over 10: (7,4) strides (1,1) */
    shape_view v = STRIDED(2, ST_N(7, 4), ST_N(1, 1), 0);
    rebuild(env, &v, 10);
    /* 2-D windows (im2col-like): (3,3,2,2) strides (5,1,5,1) over a 5x5 image */
    v = STRIDED(4, ST_N(3, 3, 2, 2), ST_N(5, 1, 5, 1), 0);
    rebuild(env, &v, 19); /* highest 2*5 + 2 + 5 + 1 = 18 */
    /* strides that interleave without nesting: (3,2) strides (2,3) */
    v = STRIDED(2, ST_N(3, 2), ST_N(2, 3), 1);
    rebuild(env, &v, 9); /* highest 1 + 4 + 3 */
    /* equal strides in three dims: (2,2,2) strides (3,3,3) */
    v = STRIDED(3, ST_N(2, 2, 2), ST_N(3, 3, 3), 0);
    rebuild(env, &v, 10);
}

static void test_shape_mops_zero_strides_and_size_one(void **state) {
    ST_ENV(state);
    (void)C;
    (void)S;
    /* (4,1,3) strides (0, 99, 2) at offset 5: a broadcast row of 3 elements 5, 7, 9 */
    shape_view v = STRIDED(3, ST_N(4, 1, 3), ST_N(0, 99, 2), 5);
    rebuild(env, &v, 10);
    /* everything stride 0: (2,3) reading element 7 */
    v = STRIDED(2, ST_N(2, 3), ST_N(0, 0), 7);
    rebuild(env, &v, 8);
    /* a scalar at offset 3 */
    v = STRIDED(0, NULL, NULL, 3);
    rebuild(env, &v, 4);
}

static void test_shape_mops_masked_views(void **state) {
    ST_ENV(state);
    /* a flipped, padded, strided view: (6,) -> [::-2] -> pad (1,2) */
    shape_view v = ST_CONTIG(6), s, p;
    shape_slice sl = {0, 0, -2, false, false};
    assert_int_equal(shape_view_slice(C, &v, 0, &sl, &s), KILN_OK);
    assert_int_equal(shape_view_pad(C, &s, ST_A(0, 1), ST_A(1, 2), &p), KILN_OK);
    rebuild(env, &p, 6);
    /* a view with one valid index per dim (canonical stride 0 and a mask) */
    shape_view c = ST_CONTIG(2, 3), q, r;
    assert_int_equal(shape_view_pad(C, &c, ST_A(0, 1, 0), ST_A(1, 1, 2), &q), KILN_OK);
    assert_int_equal(shape_view_shrink(C, &q, ST_A(0, 0, 1), ST_A(1, 2, 5), &r), KILN_OK);
    rebuild(env, &r, 3); /* valid: row 0, columns 1..2 of the source: highest 2 */
    /* everything padding */
    shape_view e = ST_CONTIG(2, 2), ep, es;
    assert_int_equal(shape_view_pad(C, &e, ST_A(0, 0, 3), ST_A(1, 0, 0), &ep), KILN_OK);
    assert_int_equal(shape_view_shrink(C, &ep, ST_A(0, 0, 0), ST_A(1, 2, 3), &es), KILN_OK);
    assert_true(es.masked);
    rebuild(env, &es, 0);
    /* numel 0 */
    shape_view z = ST_CONTIG(3, 0);
    rebuild(env, &z, 0);
}

static void test_shape_mops_rejects_symbolic_and_small_buffers(void **state) {
    ST_ENV(state);
    const sym_node *n = sym_var(S, "n", 1, 8);
    shape_view v;
    assert_int_equal(shape_view_contiguous(C, 1, &n, &v), KILN_OK);
    shape_op ops[SHAPE_MAX_OPS];
    uint32_t count = 99;
    int64_t base = -1;
    assert_int_equal(shape_view_to_movement_ops(C, &v, ops, SHAPE_MAX_OPS, &count, &base),
                     KILN_ERROR_UNSUPPORTED);
    assert_int_equal(count, 99);
    shape_view w = ST_CONTIG(2, 3), t;
    assert_int_equal(shape_view_permute(C, &w, (int32_t[]){1, 0}, &t), KILN_OK);
    assert_int_equal(shape_view_to_movement_ops(C, &t, ops, 2, &count, &base),
                     KILN_ERROR_LIMIT_EXCEEDED);
    assert_int_equal(count, 99);
}

static void test_shape_mops_fifteen_real_dims_fit(void **state) {
    ST_ENV(state);
    /* 15 dims of 2 with negative strides -(2^i) and a size-1 dim, then padded: 1 shrink + 15
     * unfolds + reshape + permute + 16 flips + pad <= SHAPE_MAX_OPS. The unfold chain needs one
     * spare dimension, so 16 dims that all move are reported as a limit. */
    int64_t sz[SHAPE_MAX_DIMS], st[SHAPE_MAX_DIMS];
    for (int i = 0; i < SHAPE_MAX_DIMS; i++)
        sz[i] = 2, st[i] = -(INT64_C(1) << (SHAPE_MAX_DIMS - 1 - i));
    sz[7] = 1;
    shape_view v = STRIDED(SHAPE_MAX_DIMS, sz, st, 65535 - 256), p;
    const sym_node *b[SHAPE_MAX_DIMS], *e[SHAPE_MAX_DIMS];
    for (int i = 0; i < SHAPE_MAX_DIMS; i++)
        b[i] = sym_const(S, 1), e[i] = sym_const(S, i % 2);
    assert_int_equal(shape_view_pad(C, &v, b, e, &p), KILN_OK);
    assert_true(rebuild(env, &p, 65536 - 256) <= SHAPE_MAX_OPS);
    sz[7] = 2;
    v = STRIDED(SHAPE_MAX_DIMS, sz, st, 65535);
    shape_op ops[SHAPE_MAX_OPS];
    uint32_t n;
    int64_t base;
    assert_int_equal(shape_view_to_movement_ops(C, &v, ops, SHAPE_MAX_OPS, &n, &base),
                     KILN_ERROR_LIMIT_EXCEEDED);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, st_setup, st_teardown)
    const struct CMUnitTest tests[] = {
        T(test_shape_mops_contiguous_and_permuted),
        T(test_shape_mops_negative_strides),
        T(test_shape_mops_overlapping_windows),
        T(test_shape_mops_zero_strides_and_size_one),
        T(test_shape_mops_masked_views),
        T(test_shape_mops_rejects_symbolic_and_small_buffers),
        T(test_shape_mops_fifteen_real_dims_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
