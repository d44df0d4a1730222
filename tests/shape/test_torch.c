/* PyTorch's rules, with the values PyTorch documents or computes (derived by hand from ATen's
 * code paths, named in each comment; there is no torch in this environment):
 *   - as_strided bounds (aten/src/ATen/native/Resize.h checkInBoundsForStorage);
 *   - empty_strided storage size (computeStorageNbytes: 1 + sum (size-1)*stride, 0 if numel 0);
 *   - which reshapes are views (aten/src/ATen/TensorUtils.cpp computeStride) and which need a
 *     second Kiln view;
 *   - the strides PyTorch reports after each op on an as_strided tensor. */
#include "shape_test.h"

#include <string.h>

static void test_shape_torch_as_strided_bounds(void **state) {
    ST_ENV(state);
    shape_view v;
    /* storage of 6: sizes (2,2) strides (1,2) offset 1 reaches 1 + 1 + 2 = 4 < 6: fine */
    assert_int_equal(shape_view_as_strided(C, 2, ST_A(0, 2, 2), ST_A(1, 1, 2), sym_const(S, 1),
                                           sym_const(S, 6), &v),
                     KILN_OK);
    st_assert_user(&v, ST_N(1, 2), 1);
    /* storage of 4: sizes (2,2) strides (2,1) offset 1 reaches 1 + 2 + 1 = 4: out of bounds */
    assert_int_equal(shape_view_as_strided(C, 2, ST_A(0, 2, 2), ST_A(1, 2, 1), sym_const(S, 1),
                                           sym_const(S, 4), &v),
                     KILN_ERROR_OUT_OF_BOUNDS);
    assert_non_null(strstr(shape_ctx_message(C), "past the end"));
    /* a negative storage offset is rejected even for an empty view */
    assert_int_equal(
        shape_view_as_strided(C, 1, ST_A(0, 0), ST_A(1, 1), sym_const(S, -1), sym_const(S, 4), &v),
        KILN_ERROR_OUT_OF_BOUNDS);
    assert_non_null(strstr(shape_ctx_message(C), "storage offset is negative"));
    /* numel 0 is always in bounds: sizes (0,5) strides (100,1) offset 10 over storage 0 */
    assert_int_equal(shape_view_as_strided(C, 2, ST_A(0, 0, 5), ST_A(1, 100, 1), sym_const(S, 10),
                                           sym_const(S, 0), &v),
                     KILN_OK);
    st_assert_user(&v, ST_N(100, 1), 10);
    /* NumPy-style negative stride: (3,) stride -1 from offset 2 reads 2,1,0 */
    assert_int_equal(
        shape_view_as_strided(C, 1, ST_A(0, 3), ST_A(1, -1), sym_const(S, 2), sym_const(S, 3), &v),
        KILN_OK);
    assert_int_equal(
        shape_view_as_strided(C, 1, ST_A(0, 3), ST_A(1, -1), sym_const(S, 1), sym_const(S, 3), &v),
        KILN_ERROR_OUT_OF_BOUNDS);
    assert_non_null(strstr(shape_ctx_message(C), "before the start"));
}

static void test_shape_torch_as_strided_keeps_requested_strides(void **state) {
    ST_ENV(state);
    shape_view v, t;
    /* torch.as_strided(x, (1,3), (7,1)).stride() == (7, 1): the size-1 stride is kept */
    assert_int_equal(shape_view_as_strided(C, 2, ST_A(0, 1, 3), ST_A(1, 7, 1), sym_const(S, 0),
                                           sym_const(S, 3), &v),
                     KILN_OK);
    st_assert_view(&v, 2, ST_N(1, 3), ST_N(0, 1), 0, NULL); /* canonical */
    st_assert_user(&v, ST_N(7, 1), 0);                      /* reported */
    /* equal canonical views compare equal whatever the user asked for */
    shape_view c = ST_CONTIG(1, 3);
    assert_true(shape_view_equal(&v, &c));
    /* permute keeps them: (3,1) strides (1,7) */
    assert_int_equal(shape_view_permute(C, &v, (int32_t[]){1, 0}, &t), KILN_OK);
    st_assert_user(&t, ST_N(1, 7), 0);
    /* expand of the size-1 dim: stride 0 */
    assert_int_equal(shape_view_expand(C, &v, ST_A(0, 4, 3), &t), KILN_OK);
    st_assert_user(&t, ST_N(0, 1), 0);
}

static void test_shape_torch_empty_strided_storage(void **state) {
    ST_ENV(state);
    shape_view v;
    const sym_node *n;
    /* (2,3) strides (1,2): 1 + 1*1 + 2*2 = 6 */
    assert_int_equal(shape_view_empty_strided(C, 2, ST_A(0, 2, 3), ST_A(1, 1, 2), &v, &n), KILN_OK);
    assert_int_equal(st_val(n), 6);
    st_assert_user(&v, ST_N(1, 2), 0);
    /* (2,3) strides (4,1): padded rows, 1 + 4 + 2 = 7 */
    assert_int_equal(shape_view_empty_strided(C, 2, ST_A(0, 2, 3), ST_A(1, 4, 1), &v, &n), KILN_OK);
    assert_int_equal(st_val(n), 7);
    /* (0,3): 0 */
    assert_int_equal(shape_view_empty_strided(C, 2, ST_A(0, 0, 3), ST_A(1, 3, 1), &v, &n), KILN_OK);
    assert_int_equal(st_val(n), 0);
    /* broadcast (2,2) strides (0,0): one element */
    assert_int_equal(shape_view_empty_strided(C, 2, ST_A(0, 2, 2), ST_A(1, 0, 0), &v, &n), KILN_OK);
    assert_int_equal(st_val(n), 1);
    /* (1,1,4) strides (100, 50, 1): size-1 strides do not count: 4 */
    assert_int_equal(shape_view_empty_strided(C, 3, ST_A(0, 1, 1, 4), ST_A(1, 100, 50, 1), &v, &n),
                     KILN_OK);
    assert_int_equal(st_val(n), 4);
    st_assert_user(&v, ST_N(100, 50, 1), 0);
    /* a negative stride at offset 0 would start before the storage */
    assert_int_equal(shape_view_empty_strided(C, 1, ST_A(0, 3), ST_A(1, -1), &v, &n),
                     KILN_ERROR_OUT_OF_BOUNDS);
}

/* Reshape t to sizes: one view (and torch.view works) or two views (torch.view fails). */
static void expect_reshape(st_env *env, const shape_view *in, uint32_t n, const int64_t *sizes,
                           bool torch_view, uint32_t kiln_views, const int64_t *torch_strides) {
    shape_ctx *C = env->ctx;
    const sym_node *const *sz = st_c(env->sym, 3, n, sizes);
    const sym_node *ts[SHAPE_MAX_DIMS];
    assert_int_equal(shape_view_torch_can_view(C, in, n, sz, ts), torch_view);
    if (torch_view)
        st_assert_ints(ts, n, torch_strides, "torch strides");
    shape_tracker t, r;
    shape_tracker_from_view(in, &t);
    assert_int_equal(shape_tracker_reshape(C, &t, n, sz, &r), KILN_OK);
    assert_int_equal(r.nviews, kiln_views);
    if (torch_view)
        st_assert_user(shape_tracker_last(&r), torch_strides, st_val(in->user_offset));
}

static void test_shape_torch_reshape_view_rule(void **state) {
    ST_ENV(state);
    shape_view c = ST_CONTIG(2, 3, 4), t;
    expect_reshape(env, &c, 2, ST_N(6, 4), true, 1, ST_N(4, 1));
    /* x.t() of (3,4): (4,3) strides (1,4). view(12) fails: a copy in torch, two views here */
    shape_view m = ST_CONTIG(3, 4);
    assert_int_equal(shape_view_permute(C, &m, (int32_t[]){1, 0}, &t), KILN_OK);
    expect_reshape(env, &t, 1, ST_N(12), false, 2, NULL);
    /* view(2,2,3) splits the stride-1 dim of size 4: strides (2,1,4) */
    expect_reshape(env, &t, 3, ST_N(2, 2, 3), true, 1, ST_N(2, 1, 4));
    /* expand (1,4) -> (3,4): strides (0,1). view(12) fails, view(3,2,2) gives (0,2,1) */
    shape_view r = ST_CONTIG(1, 4), e;
    assert_int_equal(shape_view_expand(C, &r, ST_A(0, 3, 4), &e), KILN_OK);
    expect_reshape(env, &e, 1, ST_N(12), false, 2, NULL);
    expect_reshape(env, &e, 3, ST_N(3, 2, 2), true, 1, ST_N(0, 2, 1));
    /* size-1 dims with any stride do not block a view: (2,1,3) strides (3,100,1) -> (6,) */
    shape_view a;
    assert_int_equal(shape_view_as_strided(C, 3, ST_A(0, 2, 1, 3), ST_A(1, 3, 100, 1),
                                           sym_const(S, 0), NULL, &a),
                     KILN_OK);
    expect_reshape(env, &a, 1, ST_N(6), true, 1, ST_N(1));
    /* numel 0: (0,3) strides (1,1) -> (3,0): ATen's numel-0 branch gives (max(0,1)*1, 1) */
    assert_int_equal(
        shape_view_as_strided(C, 2, ST_A(0, 0, 3), ST_A(1, 1, 1), sym_const(S, 0), NULL, &a),
        KILN_OK);
    expect_reshape(env, &a, 2, ST_N(3, 0), true, 1, ST_N(1, 1));
    /* x[:, ::2] of (4,6): (4,3) strides (6,2) is evenly spaced: view(12) has stride 2 */
    shape_view s6 = ST_CONTIG(4, 6), sl;
    shape_slice half = {0, 0, 2, false, false};
    assert_int_equal(shape_view_slice(C, &s6, 1, &half, &sl), KILN_OK);
    expect_reshape(env, &sl, 1, ST_N(12), true, 1, ST_N(2));
    /* x[:, :3] of (4,6): (4,3) strides (6,1): view(12) fails, view(2,2,3) gives (12,6,1) */
    shape_slice first3 = {0, 3, 1, false, true};
    assert_int_equal(shape_view_slice(C, &s6, 1, &first3, &sl), KILN_OK);
    expect_reshape(env, &sl, 1, ST_N(12), false, 2, NULL);
    expect_reshape(env, &sl, 3, ST_N(2, 2, 3), true, 1, ST_N(12, 6, 1));
}

static void test_shape_torch_reshape_second_view_indexes(void **state) {
    ST_ENV(state);
    /* x.t().reshape(12): element k of the result is x[k % 3][k / 3] = storage 4*(k%3) + k/3 */
    shape_view m = ST_CONTIG(3, 4), t;
    assert_int_equal(shape_view_permute(C, &m, (int32_t[]){1, 0}, &t), KILN_OK);
    shape_tracker tr, r;
    shape_tracker_from_view(&t, &tr);
    assert_int_equal(shape_tracker_reshape(C, &tr, 1, ST_A(0, 12), &r), KILN_OK);
    assert_int_equal(r.nviews, 2);
    st_assert_user(shape_tracker_last(&r), ST_N(1), 0); /* a new contiguous tensor */
    const sym_node *k = sym_var(S, "k", 0, 11), *ix, *ok;
    assert_int_equal(shape_tracker_index(C, &r, &k, &ix, &ok), KILN_OK);
    for (int64_t x = 0; x < 12; x++) {
        int64_t got, valid;
        sym_assignment as = {&k, &x, 1};
        base_error err;
        base_error_clear(&err);
        assert_int_equal(sym_eval(ix, &as, &got, &err), KILN_OK);
        assert_int_equal(sym_eval(ok, &as, &valid, &err), KILN_OK);
        assert_int_equal(valid, 1);
        assert_int_equal(got, 4 * (x % 3) + x / 3);
    }
    /* the composite does not alias itself: a valid destination */
    assert_int_equal(shape_tracker_self_alias(C, &r), SHAPE_ALIAS_NONE);
}

static void test_shape_torch_strides_after_ops(void **state) {
    ST_ENV(state);
    /* y = torch.as_strided(x, (2,1,3), (3,7,1), 2) */
    shape_view v, t;
    assert_int_equal(shape_view_as_strided(C, 3, ST_A(0, 2, 1, 3), ST_A(1, 3, 7, 1),
                                           sym_const(S, 2), sym_const(S, 8), &v),
                     KILN_OK);
    /* y.squeeze(1): (2,3) strides (3,1) */
    assert_int_equal(shape_view_squeeze(C, &v, 1, &t), KILN_OK);
    st_assert_user(&t, ST_N(3, 1), 2);
    /* y.unsqueeze(0): new stride size[0]*stride[0] = 6 */
    assert_int_equal(shape_view_unsqueeze(C, &v, 0, &t), KILN_OK);
    st_assert_user(&t, ST_N(6, 3, 7, 1), 2);
    /* y.select(2, 1): offset 2 + 1 = 3, strides (3, 7) */
    assert_int_equal(shape_view_select(C, &v, 2, sym_const(S, 1), &t), KILN_OK);
    st_assert_user(&t, ST_N(3, 7), 3);
    /* y.narrow(2, 1, 2): offset 3, strides unchanged */
    assert_int_equal(shape_view_narrow(C, &v, 2, sym_const(S, 1), sym_const(S, 2), &t), KILN_OK);
    st_assert_user(&t, ST_N(3, 7, 1), 3);
    /* y.diagonal(0, 0, 2): dims 0 and 2 go, (1, 2) strides (7, 3+1), offset 2 */
    assert_int_equal(shape_view_diagonal(C, &v, 0, 0, 2, &t), KILN_OK);
    st_assert_view(&t, 2, ST_N(1, 2), ST_N(0, 4), 2, NULL);
    st_assert_user(&t, ST_N(7, 4), 2);
    /* y.unfold(2, 2, 1): (2,1,2,2) strides (3,7,1,1) */
    assert_int_equal(shape_view_unfold(C, &v, 2, sym_const(S, 2), sym_const(S, 1), &t), KILN_OK);
    st_assert_user(&t, ST_N(3, 7, 1, 1), 2);
    /* y.view(6): computeStride skips the size-1 dim: stride 1 */
    bool ok;
    assert_int_equal(shape_view_reshape(C, &v, 1, ST_A(0, 6), &t, &ok), KILN_OK);
    assert_true(ok);
    st_assert_user(&t, ST_N(1), 2);
}

static void test_shape_torch_symbolic_reshape(void **state) {
    ST_ENV(state);
    /* (n, 4) -> (4n,) and back, for a Variable n */
    const sym_node *n = sym_var(S, "n", 1, 64);
    const sym_node *d[2] = {n, sym_const(S, 4)}, *flat = sym_mul_c(S, n, 4);
    shape_view v, f, b;
    bool ok;
    assert_int_equal(shape_view_contiguous(C, 2, d, &v), KILN_OK);
    assert_int_equal(shape_view_reshape(C, &v, 1, &flat, &f, &ok), KILN_OK);
    assert_true(ok);
    assert_true(f.contiguous);
    assert_ptr_equal(f.shape[0], flat);
    assert_int_equal(shape_view_reshape(C, &f, 2, d, &b, &ok), KILN_OK);
    assert_true(ok);
    assert_true(shape_view_equal(&b, &v));
    /* a non-contiguous symbolic view: (n,4) with columns shrunk to [0,2): (n,2) strides (4,1);
     * (n,2) -> (2n,) needs a second view, (n,2) -> (n,2,1) does not */
    shape_view s;
    const sym_node *lo[2] = {sym_const(S, 0), sym_const(S, 0)}, *hi[2] = {n, sym_const(S, 2)};
    assert_int_equal(shape_view_shrink(C, &v, lo, hi, &s), KILN_OK);
    const sym_node *f2 = sym_mul_c(S, n, 2);
    assert_int_equal(shape_view_reshape(C, &s, 1, &f2, &f, &ok), KILN_OK);
    assert_false(ok);
    const sym_node *d3[3] = {n, sym_const(S, 2), sym_const(S, 1)};
    assert_int_equal(shape_view_reshape(C, &s, 3, d3, &f, &ok), KILN_OK);
    assert_true(ok);
    assert_ptr_equal(f.strides[0], sym_const(S, 4));
    /* (m, m+4, 2) -> (m, 2m+8): symbolic/ writes the sizes' products differently
     * ((m*(m+4))*2 against m*((m*2)+8)); equal at every m in [1, 64], so proved */
    const sym_node *m = sym_var(S, "m", 1, 64);
    const sym_node *d3m[3] = {m, sym_add_c(S, m, 4), sym_const(S, 2)};
    const sym_node *d2m[2] = {m, sym_mul_c(S, sym_add_c(S, m, 4), 2)};
    shape_view w;
    assert_int_equal(shape_view_contiguous(C, 3, d3m, &w), KILN_OK);
    assert_int_equal(shape_view_reshape(C, &w, 2, d2m, &f, &ok), KILN_OK);
    assert_true(ok);
    assert_true(f.contiguous);
    /* a size mismatch is an error */
    const sym_node *bad = sym_mul_c(S, n, 3);
    assert_int_equal(shape_view_reshape(C, &v, 1, &bad, &f, &ok), KILN_ERROR_SHAPE_MISMATCH);
    assert_non_null(strstr(shape_ctx_message(C), "cannot be reshaped"));
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, st_setup, st_teardown)
    const struct CMUnitTest tests[] = {
        T(test_shape_torch_as_strided_bounds),
        T(test_shape_torch_as_strided_keeps_requested_strides),
        T(test_shape_torch_empty_strided_storage),
        T(test_shape_torch_reshape_view_rule),
        T(test_shape_torch_reshape_second_view_indexes),
        T(test_shape_torch_strides_after_ops),
        T(test_shape_torch_symbolic_reshape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
