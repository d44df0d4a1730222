/* Unit tests of every movement op on one view: shape, strides, offset, mask, the strides the
 * user would see (PyTorch's), and the errors. Expected values are worked out by hand in the
 * comments (element e of storage sits at offset + sum idx*stride). */
#include "shape_test.h"

#include <string.h>

#include "test_alloc.h"

/* A view filled with a byte pattern: a failing op must leave it untouched. */
static shape_view poisoned(void) {
    shape_view v;
    memset(&v, 0x5a, sizeof(v));
    return v;
}

static void assert_untouched(const shape_view *v) {
    shape_view p = poisoned();
    assert_memory_equal(v, &p, sizeof(p));
}

static void test_shape_view_contiguous_strides(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(2, 3, 4);
    st_assert_view(&v, 3, ST_N(2, 3, 4), ST_N(12, 4, 1), 0, NULL);
    assert_true(v.contiguous);
    st_assert_user(&v, ST_N(12, 4, 1), 0);
    /* size-1 dims: canonical stride 0, PyTorch's stride is the product of what follows */
    v = ST_CONTIG(2, 1, 3);
    st_assert_view(&v, 3, ST_N(2, 1, 3), ST_N(3, 0, 1), 0, NULL);
    st_assert_user(&v, ST_N(3, 3, 1), 0);
    /* numel 0: canonical strides 0; torch.empty(2,0,3).stride() == (3, 3, 1) */
    v = ST_CONTIG(2, 0, 3);
    st_assert_view(&v, 3, ST_N(2, 0, 3), ST_N(0, 0, 0), 0, NULL);
    st_assert_user(&v, ST_N(3, 3, 1), 0);
    /* a negative size is rejected */
    shape_view out = poisoned();
    assert_int_equal(shape_view_contiguous(C, 2, ST_A(0, 2, -1), &out), KILN_ERROR_OUT_OF_RANGE);
    assert_untouched(&out);
}

static void test_shape_view_permute_moves_strides(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(2, 3, 4), t;
    assert_int_equal(shape_view_permute(C, &v, (int32_t[]){2, 0, 1}, &t), KILN_OK);
    st_assert_view(&t, 3, ST_N(4, 2, 3), ST_N(1, 12, 4), 0, NULL);
    assert_false(t.contiguous);
    st_assert_user(&t, ST_N(1, 12, 4), 0);
    /* negative axes count from the end */
    assert_int_equal(shape_view_permute(C, &v, (int32_t[]){-1, 0, 1}, &t), KILN_OK);
    st_assert_view(&t, 3, ST_N(4, 2, 3), ST_N(1, 12, 4), 0, NULL);
}

static void test_shape_view_permute_rejects_bad_axes(void **state) {
    ST_ENV(state);
    (void)S;
    shape_view v = ST_CONTIG(2, 3, 4), out = poisoned();
    assert_int_equal(shape_view_permute(C, &v, (int32_t[]){0, 0, 1}, &out),
                     KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(shape_ctx_message(C), "appears twice"));
    assert_int_equal(shape_view_permute(C, &v, (int32_t[]){0, 1, 3}, &out),
                     KILN_ERROR_OUT_OF_RANGE);
    assert_non_null(strstr(shape_ctx_message(C), "out of range"));
    assert_untouched(&out);
}

static void test_shape_view_expand_only_size_one(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(3, 1), t;
    assert_int_equal(shape_view_expand(C, &v, ST_A(0, 3, 4), &t), KILN_OK);
    st_assert_view(&t, 2, ST_N(3, 4), ST_N(1, 0), 0, NULL);
    st_assert_user(&t, ST_N(1, 0), 0); /* torch: expand gives stride 0 */
    shape_view w = ST_CONTIG(3, 2), out = poisoned();
    assert_int_equal(shape_view_expand(C, &w, ST_A(0, 3, 4), &out), KILN_ERROR_SHAPE_MISMATCH);
    assert_non_null(strstr(shape_ctx_message(C), "cannot be expanded"));
    assert_untouched(&out);
}

/* A view over a Variable's size checks its sizes by their bounds (none negative: the
 * Variable's range says so) without building the expressions of a proof: a contiguous (n, 1)
 * expanded to (n, 4), its constants built before, builds at most one node (nine before: n + 1,
 * 0 - (n + 1) and the like for each check); a size below zero is still refused. */
static void test_shape_view_size_checks_by_bounds(void **state) {
    ST_ENV(state);
    const sym_node *n = sym_var(S, "n", 1, 64), *one = sym_const(S, 1), *four = sym_const(S, 4);
    assert_non_null(sym_const(S, 0));
    shape_view v, t;
    uint64_t built = sym_ctx_node_count(S);
    assert_int_equal(shape_view_contiguous(C, 2, (const sym_node *[]){n, one}, &v), KILN_OK);
    assert_int_equal(shape_view_expand(C, &v, (const sym_node *[]){n, four}, &t), KILN_OK);
    assert_true(sym_ctx_node_count(S) - built <= 1);       /* was 9: n + 1, 0 - (n + 1), ... */
    const sym_node *neg = sym_sub(S, sym_const(S, -1), n); /* -1 - n: at most -2 */
    assert_int_equal(shape_view_contiguous(C, 2, (const sym_node *[]){neg, one}, &t),
                     KILN_ERROR_OUT_OF_RANGE);
    assert_non_null(strstr(shape_ctx_message(C), "negative"));
}

static void test_shape_view_pad_sets_mask_and_offset(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(2, 3), t;
    /* pad rows (1,0), cols (2,1): shape (3,6); element (i,j) of the source sits at (i+1, j+2),
     * so offset = -(1*3 + 2*1) = -5 and the mask is rows [1,3), cols [2,5) */
    assert_int_equal(shape_view_pad(C, &v, ST_A(0, 1, 2), ST_A(1, 0, 1), &t), KILN_OK);
    st_assert_view(&t, 2, ST_N(3, 6), ST_N(3, 1), -5, ST_N(1, 3, 2, 5));
    st_assert_user(&t, ST_N(6, 1), 0); /* torch's pad returns a new contiguous tensor */
    shape_view out = poisoned();
    assert_int_equal(shape_view_pad(C, &v, ST_A(0, -1, 0), ST_A(1, 0, 0), &out),
                     KILN_ERROR_OUT_OF_RANGE);
    assert_untouched(&out);
}

static void test_shape_view_shrink_moves_offset(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(4, 5), t;
    /* rows [1,3), cols [2,5): offset 1*5 + 2 = 7 */
    assert_int_equal(shape_view_shrink(C, &v, ST_A(0, 1, 2), ST_A(1, 3, 5), &t), KILN_OK);
    st_assert_view(&t, 2, ST_N(2, 3), ST_N(5, 1), 7, NULL);
    st_assert_user(&t, ST_N(5, 1), 7);
    shape_view out = poisoned();
    assert_int_equal(shape_view_shrink(C, &v, ST_A(0, 3, 0), ST_A(1, 2, 5), &out),
                     KILN_ERROR_OUT_OF_BOUNDS);
    assert_int_equal(shape_view_shrink(C, &v, ST_A(0, 0, 0), ST_A(1, 4, 6), &out),
                     KILN_ERROR_OUT_OF_BOUNDS);
    assert_untouched(&out);
}

static void test_shape_view_pad_then_shrink_drops_mask(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(4), p, s;
    assert_int_equal(shape_view_pad(C, &v, ST_A(0, 2), ST_A(1, 2), &p), KILN_OK);
    st_assert_view(&p, 1, ST_N(8), ST_N(1), -2, ST_N(2, 6));
    assert_int_equal(shape_view_shrink(C, &p, ST_A(0, 2), ST_A(1, 6), &s), KILN_OK);
    assert_true(shape_view_equal(&s, &v));
    assert_true(s.contiguous);
    /* shrinking into the padding keeps a mask: [1,5) covers one pad element */
    assert_int_equal(shape_view_shrink(C, &p, ST_A(0, 1), ST_A(1, 5), &s), KILN_OK);
    st_assert_view(&s, 1, ST_N(4), ST_N(1), -1, ST_N(1, 4));
}

static void test_shape_view_flip_negates_stride(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(2, 3), t;
    /* flip cols: (i,j) -> 3i + (2-j): stride -1, offset 2 */
    assert_int_equal(shape_view_flip(C, &v, 1, &t), KILN_OK);
    st_assert_view(&t, 2, ST_N(2, 3), ST_N(3, -1), 2, NULL);
    st_assert_user(&t, ST_N(3, -1), 2); /* NumPy's x[:, ::-1] */
    /* a padded dim flips its mask: (2,) padded (1,0) is [pad, e0, e1]; flipped [e1, e0, pad] */
    shape_view w = ST_CONTIG(2), p;
    assert_int_equal(shape_view_pad(C, &w, ST_A(0, 1), ST_A(1, 0), &p), KILN_OK);
    assert_int_equal(shape_view_flip(C, &p, 0, &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(3), ST_N(-1), 1, ST_N(0, 2));
}

static void test_shape_view_slice_any_step(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(10), t;
    shape_slice s1 = {1, 8, 3, true, true}; /* 1, 4, 7 */
    assert_int_equal(shape_view_slice(C, &v, 0, &s1, &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(3), ST_N(3), 1, NULL);
    shape_slice s2 = {0, 0, -2, false, false}; /* 9, 7, 5, 3, 1 */
    assert_int_equal(shape_view_slice(C, &v, 0, &s2, &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(5), ST_N(-2), 9, NULL);
    st_assert_user(&t, ST_N(-2), 9);
    shape_slice s3 = {8, 2, -3, true, true}; /* 8, 5 */
    assert_int_equal(shape_view_slice(C, &v, 0, &s3, &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(2), ST_N(-3), 8, NULL);
    shape_slice s4 = {-3, 100, 1, true, true}; /* 7, 8, 9 (stop clamped) */
    assert_int_equal(shape_view_slice(C, &v, 0, &s4, &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(3), ST_N(1), 7, NULL);
    shape_slice s5 = {5, 2, 1, true, true}; /* empty */
    assert_int_equal(shape_view_slice(C, &v, 0, &s5, &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(0), ST_N(0), 0, NULL);
    shape_slice s6 = {0, 0, 0, false, false};
    shape_view out = poisoned();
    assert_int_equal(shape_view_slice(C, &v, 0, &s6, &out), KILN_ERROR_INVALID_ARGUMENT);
    assert_untouched(&out);
    /* 2-D: x[:, ::-1] of (4,5) */
    shape_view m = ST_CONTIG(4, 5);
    assert_int_equal(shape_view_slice(C, &m, 1, &s2, &t), KILN_OK);
    st_assert_view(&t, 2, ST_N(4, 3), ST_N(5, -2), 4, NULL);
}

static void test_shape_view_slice_of_padding(void **state) {
    ST_ENV(state);
    /* (4,) padded (2,2): positions 0..7 hold [p, p, e0, e1, e2, e3, p, p]; [1::3] takes
     * positions 1, 4, 7 = [p, e2, p]: one valid index (1) whose element is 2, so the canonical
     * form has stride 0, offset 2 and mask [1,2) */
    shape_view v = ST_CONTIG(4), p, t;
    assert_int_equal(shape_view_pad(C, &v, ST_A(0, 2), ST_A(1, 2), &p), KILN_OK);
    shape_slice s = {1, 0, 3, true, false};
    assert_int_equal(shape_view_slice(C, &p, 0, &s, &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(3), ST_N(0), 2, ST_N(1, 2));
    /* [::-1] of the padded view: [p, p, e3, e2, e1, e0, p, p] */
    shape_slice r = {0, 0, -1, false, false};
    assert_int_equal(shape_view_slice(C, &p, 0, &r, &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(8), ST_N(-1), 5, ST_N(2, 6));
}

static void test_shape_view_unsqueeze_squeeze_torch_strides(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(2, 3), t, u;
    /* torch: unsqueeze(d) inserts size 1 with stride size[d]*stride[d], or 1 at the end */
    assert_int_equal(shape_view_unsqueeze(C, &v, 0, &t), KILN_OK);
    st_assert_view(&t, 3, ST_N(1, 2, 3), ST_N(0, 3, 1), 0, NULL);
    st_assert_user(&t, ST_N(6, 3, 1), 0);
    assert_int_equal(shape_view_unsqueeze(C, &v, 1, &t), KILN_OK);
    st_assert_user(&t, ST_N(3, 3, 1), 0);
    assert_int_equal(shape_view_unsqueeze(C, &v, -1, &t), KILN_OK);
    st_assert_view(&t, 3, ST_N(2, 3, 1), ST_N(3, 1, 0), 0, NULL);
    st_assert_user(&t, ST_N(3, 1, 1), 0);
    assert_int_equal(shape_view_squeeze(C, &t, 2, &u), KILN_OK);
    assert_true(shape_view_equal(&u, &v));
    st_assert_user(&u, ST_N(3, 1), 0);
    shape_view out = poisoned();
    assert_int_equal(shape_view_squeeze(C, &v, 0, &out), KILN_ERROR_SHAPE_MISMATCH);
    assert_int_equal(shape_view_unsqueeze(C, &v, 3, &out), KILN_ERROR_OUT_OF_RANGE);
    assert_untouched(&out);
}

static void test_shape_view_narrow_and_select(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(5, 4), t;
    assert_int_equal(shape_view_narrow(C, &v, 0, sym_const(S, 1), sym_const(S, 3), &t), KILN_OK);
    st_assert_view(&t, 2, ST_N(3, 4), ST_N(4, 1), 4, NULL);
    /* torch.narrow with a negative start counts from the end: start -2 == 3 */
    assert_int_equal(shape_view_narrow(C, &v, 0, sym_const(S, -2), sym_const(S, 2), &t), KILN_OK);
    st_assert_view(&t, 2, ST_N(2, 4), ST_N(4, 1), 12, NULL);
    assert_int_equal(shape_view_select(C, &v, 1, sym_const(S, 2), &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(5), ST_N(4), 2, NULL);
    st_assert_user(&t, ST_N(4), 2);
    assert_int_equal(shape_view_select(C, &v, 1, sym_const(S, -1), &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(5), ST_N(4), 3, NULL);
    shape_view out = poisoned();
    assert_int_equal(shape_view_select(C, &v, 1, sym_const(S, 4), &out), KILN_ERROR_OUT_OF_BOUNDS);
    assert_int_equal(shape_view_narrow(C, &v, 0, sym_const(S, 3), sym_const(S, 3), &out),
                     KILN_ERROR_OUT_OF_BOUNDS);
    assert_untouched(&out);
}

static void test_shape_view_select_of_padding(void **state) {
    ST_ENV(state);
    /* (2,2) padded with one row below: selecting that row gives a row of padding only */
    shape_view v = ST_CONTIG(2, 2), p, t;
    assert_int_equal(shape_view_pad(C, &v, ST_A(0, 0, 0), ST_A(1, 1, 0), &p), KILN_OK);
    st_assert_view(&p, 2, ST_N(3, 2), ST_N(2, 1), 0, ST_N(0, 2, 0, 2));
    assert_int_equal(shape_view_select(C, &p, 0, sym_const(S, 2), &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(2), ST_N(0), 0, ST_N(0, 0));
    assert_int_equal(shape_view_select(C, &p, 0, sym_const(S, 1), &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(2), ST_N(1), 2, NULL);
    /* a padded scalar cannot be expressed: reported, not guessed */
    shape_view w = ST_CONTIG(2), q, out = poisoned();
    assert_int_equal(shape_view_pad(C, &w, ST_A(0, 0), ST_A(1, 1), &q), KILN_OK);
    assert_int_equal(shape_view_select(C, &q, 0, sym_const(S, 2), &out), KILN_ERROR_UNSUPPORTED);
    assert_untouched(&out);
}

static void test_shape_view_diagonal_torch_rules(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(3, 4), t;
    /* offset 0: (0,0),(1,1),(2,2): stride 4+1, length 3 */
    assert_int_equal(shape_view_diagonal(C, &v, 0, 0, 1, &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(3), ST_N(5), 0, NULL);
    /* offset 1: (0,1),(1,2),(2,3): storage offset 1*stride(dim2) */
    assert_int_equal(shape_view_diagonal(C, &v, 1, 0, 1, &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(3), ST_N(5), 1, NULL);
    /* offset -1: (1,0),(2,1): length min(3-1, 4) = 2, offset 1*stride(dim1) = 4 */
    assert_int_equal(shape_view_diagonal(C, &v, -1, 0, 1, &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(2), ST_N(5), 4, NULL);
    st_assert_user(&t, ST_N(5), 4);
    /* offset 5 is past the matrix: length 0, storage offset unchanged in torch */
    assert_int_equal(shape_view_diagonal(C, &v, 5, 0, 1, &t), KILN_OK);
    st_assert_view(&t, 1, ST_N(0), ST_N(0), 0, NULL);
    st_assert_user(&t, ST_N(5), 0);
    /* (2,3,4) diagonal over dims 0 and 2: dim 1 stays, diagonal of length 2 appended, stride
     * 12 + 1 */
    shape_view w = ST_CONTIG(2, 3, 4);
    assert_int_equal(shape_view_diagonal(C, &w, 0, 0, 2, &t), KILN_OK);
    st_assert_view(&t, 2, ST_N(3, 2), ST_N(4, 13), 0, NULL);
    shape_view out = poisoned();
    assert_int_equal(shape_view_diagonal(C, &w, 0, 1, 1, &out), KILN_ERROR_INVALID_ARGUMENT);
    assert_untouched(&out);
}

static void test_shape_view_unfold_torch_rules(void **state) {
    ST_ENV(state);
    /* torch.arange(7).unfold(0, 3, 2): shape (3, 3), strides (2, 1) */
    shape_view v = ST_CONTIG(7), t;
    assert_int_equal(shape_view_unfold(C, &v, 0, sym_const(S, 3), sym_const(S, 2), &t), KILN_OK);
    st_assert_view(&t, 2, ST_N(3, 3), ST_N(2, 1), 0, NULL);
    st_assert_user(&t, ST_N(2, 1), 0);
    assert_int_equal(shape_view_self_alias(C, &t), SHAPE_ALIAS_YES); /* windows overlap */
    /* (2,5).unfold(1, 2, 1): (2, 4, 2) strides (5, 1, 1) */
    shape_view w = ST_CONTIG(2, 5);
    assert_int_equal(shape_view_unfold(C, &w, 1, sym_const(S, 2), sym_const(S, 1), &t), KILN_OK);
    st_assert_view(&t, 3, ST_N(2, 4, 2), ST_N(5, 1, 1), 0, NULL);
    /* (6,).unfold(0, 2, 3): (2, 2) strides (3, 1): no overlap */
    shape_view x = ST_CONTIG(6);
    assert_int_equal(shape_view_unfold(C, &x, 0, sym_const(S, 2), sym_const(S, 3), &t), KILN_OK);
    st_assert_view(&t, 2, ST_N(2, 2), ST_N(3, 1), 0, NULL);
    assert_int_equal(shape_view_self_alias(C, &t), SHAPE_ALIAS_NONE);
    shape_view out = poisoned(), p;
    assert_int_equal(shape_view_unfold(C, &v, 0, sym_const(S, 8), sym_const(S, 1), &out),
                     KILN_ERROR_OUT_OF_BOUNDS);
    assert_int_equal(shape_view_unfold(C, &v, 0, sym_const(S, 2), sym_const(S, 0), &out),
                     KILN_ERROR_OUT_OF_BOUNDS);
    assert_int_equal(shape_view_pad(C, &v, ST_A(0, 1), ST_A(1, 0), &p), KILN_OK);
    assert_int_equal(shape_view_unfold(C, &p, 0, sym_const(S, 2), sym_const(S, 1), &out),
                     KILN_ERROR_UNSUPPORTED);
    assert_untouched(&out);
}

/* A step past the end gives one window however large it is (torch accepts any step >= 1).
 * Proving the bounds computes step + 1, which overflows: the proof fails, the view is made, and
 * no error stays behind in the symbolic context to be reported by a later, unrelated call. */
static void test_shape_view_unfold_huge_step_leaves_no_error(void **state) {
    ST_ENV(state);
    shape_view x = ST_CONTIG(6), t;
    assert_int_equal(shape_view_unfold(C, &x, 0, sym_const(S, 2), sym_const(S, INT64_MAX), &t),
                     KILN_OK);
    st_assert_view(&t, 2, ST_N(1, 2), ST_N(0, 1), 0, NULL);
    st_assert_user(&t, ST_N(INT64_MAX, 1), 0);
    assert_int_equal(sym_ctx_status(S), KILN_OK);
    /* An error pending before a proof is kept. */
    assert_null(sym_add(S, sym_const(S, INT64_MAX), sym_const(S, 1)));
    assert_int_equal(shape_view_unfold(C, &x, 0, sym_const(S, 2), sym_const(S, INT64_MAX), &t),
                     KILN_OK);
    assert_int_equal(sym_ctx_status(S), KILN_ERROR_OVERFLOW);
    sym_ctx_clear_error(S);
}

static void test_shape_view_index_and_valid_expressions(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(2, 3), p;
    assert_int_equal(shape_view_pad(C, &v, ST_A(0, 1, 0), ST_A(1, 0, 0), &p), KILN_OK);
    const sym_node *i = sym_var(S, "i", 0, 2), *j = sym_var(S, "j", 0, 2);
    const sym_node *idx[2] = {i, j}, *ix, *ok;
    assert_int_equal(shape_view_index(C, &p, idx, &ix, &ok), KILN_OK);
    char buf[128];
    /* (i,j) -> 3i + j - 3, valid when i >= 1 (i < 3 always holds) */
    sym_render(ix, buf, sizeof(buf));
    print_message("index %s\n", buf);
    for (int64_t a = 0; a < 3; a++) {
        for (int64_t b = 0; b < 3; b++) {
            int64_t vals[2] = {a, b}, x, y;
            sym_assignment as = {idx, vals, 2};
            base_error err;
            base_error_clear(&err);
            assert_int_equal(sym_eval(ok, &as, &y, &err), KILN_OK);
            assert_int_equal(y, a >= 1);
            assert_int_equal(sym_eval(ix, &as, &x, &err), KILN_OK);
            assert_int_equal(x, 3 * a + b - 3);
        }
    }
    /* an unpadded view's predicate is the constant 1 */
    assert_int_equal(shape_view_index(C, &v, idx, &ix, &ok), KILN_OK);
    assert_int_equal(st_val(ok), 1);
}

static void test_shape_view_extent_and_storage(void **state) {
    ST_ENV(state);
    /* strides (-3, 2) over (2, 4) at offset 3: lowest 3 - 3 = 0, highest 3 + 6 = 9 */
    shape_view v;
    assert_int_equal(shape_view_as_strided(C, 2, ST_A(0, 2, 4), ST_A(1, -3, 2), sym_const(S, 3),
                                           sym_const(S, 10), &v),
                     KILN_OK);
    const sym_node *lo, *hi;
    bool empty;
    assert_int_equal(shape_view_extent(C, &v, &lo, &hi, &empty), KILN_OK);
    assert_false(empty);
    assert_int_equal(st_val(lo), 0);
    assert_int_equal(st_val(hi), 9);
    assert_int_equal(shape_view_check_storage(C, &v, sym_const(S, 10)), KILN_OK);
    assert_int_equal(shape_view_check_storage(C, &v, sym_const(S, 9)), KILN_ERROR_OUT_OF_BOUNDS);
    /* padding is not addressed: a padded (4,) reaches 0..3 only */
    shape_view c = ST_CONTIG(4), p;
    assert_int_equal(shape_view_pad(C, &c, ST_A(0, 2), ST_A(1, 3), &p), KILN_OK);
    assert_int_equal(shape_view_extent(C, &p, &lo, &hi, &empty), KILN_OK);
    assert_int_equal(st_val(lo), 0);
    assert_int_equal(st_val(hi), 3);
    shape_view z = ST_CONTIG(3, 0);
    assert_int_equal(shape_view_extent(C, &z, &lo, &hi, &empty), KILN_OK);
    assert_true(empty);
    assert_int_equal(shape_view_check_storage(C, &z, sym_const(S, 0)), KILN_OK);
}

static void test_shape_view_dense_permutation_found(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(2, 3, 4), t, d;
    assert_int_equal(shape_view_permute(C, &v, (int32_t[]){1, 2, 0}, &t), KILN_OK);
    int32_t perm[3];
    /* t has strides (4, 1, 12): dims ordered by stride descending: 2, 0, 1 */
    assert_int_equal(shape_view_dense_permutation(C, &t, perm), KILN_OK);
    assert_int_equal(perm[0], 2);
    assert_int_equal(perm[1], 0);
    assert_int_equal(perm[2], 1);
    assert_int_equal(shape_view_permute(C, &t, perm, &d), KILN_OK);
    assert_true(shape_view_is_dense(&d));
    assert_false(shape_view_is_dense(&t));
    /* a flipped or strided view has none */
    assert_int_equal(shape_view_flip(C, &v, 0, &t), KILN_OK);
    assert_int_equal(shape_view_dense_permutation(C, &t, perm), KILN_ERROR_NOT_FOUND);
    shape_slice s = {0, 0, 2, false, false};
    assert_int_equal(shape_view_slice(C, &v, 2, &s, &t), KILN_OK);
    assert_int_equal(shape_view_dense_permutation(C, &t, perm), KILN_ERROR_NOT_FOUND);
}

static void test_shape_view_self_alias_cases(void **state) {
    ST_ENV(state);
    shape_view v = ST_CONTIG(3, 1), t;
    assert_int_equal(shape_view_self_alias(C, &v), SHAPE_ALIAS_NONE);
    assert_int_equal(shape_view_expand(C, &v, ST_A(0, 3, 2), &t), KILN_OK);
    assert_int_equal(shape_view_self_alias(C, &t), SHAPE_ALIAS_YES);
    /* strides (2, 3) over (3, 2): offsets 0,3,2,5,4,7: no repeat though the strides do not nest
     * (decided by the span bitset, enumeration off) */
    shape_ctx_set_alias_enum_limit(C, 0);
    assert_int_equal(
        shape_view_as_strided(C, 2, ST_A(0, 3, 2), ST_A(1, 2, 3), sym_const(S, 0), NULL, &t),
        KILN_OK);
    assert_int_equal(shape_view_self_alias(C, &t), SHAPE_ALIAS_NONE);
    /* strides (2, 3) over (4, 3): 2*3 == 3*2 inside the ranges: alias */
    assert_int_equal(
        shape_view_as_strided(C, 2, ST_A(0, 4, 3), ST_A(1, 2, 3), sym_const(S, 0), NULL, &t),
        KILN_OK);
    assert_int_equal(shape_view_self_alias(C, &t), SHAPE_ALIAS_YES);
    /* a huge span with non-nesting strides: not provable without enumeration */
    assert_int_equal(shape_view_as_strided(C, 3, ST_A(0, 3, 2, 2), ST_A(1, 2, 3, 1 << 30),
                                           sym_const(S, 0), NULL, &t),
                     KILN_OK);
    assert_int_equal(shape_view_self_alias(C, &t), SHAPE_ALIAS_MAYBE);
    shape_ctx_set_alias_enum_limit(C, 1 << 16);
    assert_int_equal(shape_view_self_alias(C, &t), SHAPE_ALIAS_NONE);
}

static void test_shape_view_symbolic_shape(void **state) {
    ST_ENV(state);
    const sym_node *n = sym_var(S, "n", 1, 100);
    const sym_node *dims[2] = {n, sym_const(S, 3)};
    shape_view v, t;
    assert_int_equal(shape_view_contiguous(C, 2, dims, &v), KILN_OK);
    assert_int_equal(st_val(v.strides[1]), 1);
    assert_int_equal(st_val(v.strides[0]), 3);
    /* shrink rows [x, x+1) with x bound to 3: offset x*3 (tinygrad's test_var_vals_offset) */
    const sym_node *x = sym_bind(S, sym_var(S, "x", 1, 100), 3);
    shape_view w = ST_CONTIG(4, 3);
    const sym_node *b[2] = {x, sym_const(S, 0)}, *e[2] = {sym_add_c(S, x, 1), sym_const(S, 3)};
    assert_int_equal(shape_view_shrink(C, &w, b, e, &t), KILN_OK);
    assert_ptr_equal(t.offset, sym_mul_c(S, x, 3));
    st_assert_view(&t, 2, ST_N(1, 3), ST_N(0, 1), 9, NULL);
    /* the bound value is checked: x = 3 with end x + 2 > 4 is rejected */
    const sym_node *e2[2] = {sym_add_c(S, x, 2), sym_const(S, 3)};
    assert_int_equal(shape_view_shrink(C, &w, b, e2, &t), KILN_ERROR_OUT_OF_BOUNDS);
}

static void test_shape_view_overflow_is_an_error(void **state) {
    ST_ENV(state);
    /* (4,) with stride 2^62: the highest element 3 * 2^62 does not fit in int64 */
    shape_view v, out = poisoned();
    kiln_status s = shape_view_as_strided(C, 1, ST_A(0, 4), ST_A(1, INT64_C(1) << 62),
                                          sym_const(S, 0), NULL, &out);
    assert_int_equal(s, KILN_ERROR_OVERFLOW);
    assert_untouched(&out);
    /* the context is usable again */
    assert_int_equal(sym_ctx_status(S), KILN_OK);
    v = ST_CONTIG(2, 2);
    assert_true(v.contiguous);
    /* a reshape whose size overflows */
    bool ok;
    assert_int_equal(shape_view_reshape(C, &v, 2, ST_A(0, INT64_C(1) << 62, 8), &out, &ok),
                     KILN_ERROR_OVERFLOW);
    assert_untouched(&out);
}

static void test_shape_view_rejects_malformed_arguments(void **state) {
    ST_ENV(state);
    (void)S;
    shape_view zero, out = poisoned();
    memset(&zero, 0, sizeof(zero)); /* offset NULL: not made by shape/ */
    assert_int_equal(shape_view_permute(C, &zero, NULL, &out), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(shape_ctx_message(C), "not a view"));
    assert_int_equal(shape_view_flip(C, NULL, 0, &out), KILN_ERROR_INVALID_ARGUMENT);
    assert_untouched(&out);
    shape_tracker t;
    memset(&t, 0, sizeof(t));
    shape_tracker r;
    assert_int_equal(shape_tracker_simplify(C, &t, &r), KILN_ERROR_INVALID_ARGUMENT);
    assert_null(shape_tracker_last(&t));
    assert_int_equal(shape_tracker_self_alias(C, &t), SHAPE_ALIAS_MAYBE);
    shape_view big = ST_CONTIG(2);
    big.ndim = SHAPE_MAX_DIMS + 1;
    assert_int_equal(shape_view_flip(C, &big, 0, &out), KILN_ERROR_INVALID_ARGUMENT);
}

static void test_shape_ctx_create_fails_cleanly(void **state) {
    (void)state;
    test_alloc ta = {0};
    ta.fail_at = 1;
    base_allocator a = test_allocator(&ta);
    sym_ctx *s;
    assert_int_equal(sym_ctx_create(NULL, &s), KILN_OK);
    shape_ctx *c = (shape_ctx *)&ta;
    assert_int_equal(shape_ctx_create(&a, s, &c), KILN_ERROR_OUT_OF_HOST_MEMORY);
    assert_null(c);
    assert_int_equal(ta.live_blocks, 0);
    ta.fail_at = 0;
    assert_int_equal(shape_ctx_create(&a, s, &c), KILN_OK);
    /* enumeration that cannot allocate answers "may alias", never a wrong "no" */
    const sym_node *d[2] = {sym_const(s, 3), sym_const(s, 2)};
    const sym_node *st[2] = {sym_const(s, 2), sym_const(s, 3 << 20)};
    shape_view v;
    assert_int_equal(shape_view_as_strided(c, 2, d, st, sym_const(s, 0), NULL, &v), KILN_OK);
    ta.fail_at = ta.count + 1;
    assert_int_equal(shape_view_self_alias(c, &v), SHAPE_ALIAS_NONE); /* nested: no allocation */
    shape_ctx_destroy(c);
    assert_int_equal(ta.live_blocks, 0);
    assert_int_equal(ta.size_mismatches, 0);
    sym_ctx_destroy(s);
}

/* One pass of a typical sequence; every status must be OK or out of memory. */
static int alloc_pass(const base_allocator *a) {
    sym_ctx *s = NULL;
    shape_ctx *c = NULL;
    int failures = 0;
#define STEP(call)                                                                                 \
    do {                                                                                           \
        kiln_status st_ = (call);                                                                  \
        if (st_ != KILN_OK) {                                                                      \
            assert_int_equal(st_, KILN_ERROR_OUT_OF_HOST_MEMORY);                                  \
            failures++;                                                                            \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)
    /* The sym context keeps the default allocator: base/arena.c's chunk header asks for 64-byte
     * alignment that test_alloc's 16-byte blocks do not give (UBSan reports it; a base/ issue,
     * reported, not changed here). */
    STEP(sym_ctx_create(NULL, &s));
    STEP(shape_ctx_create(a, s, &c));
    const sym_node *d[2] = {sym_const(s, 4), sym_const(s, 6)}, *pb[2], *pa[2], *f;
    shape_view v, t, p;
    STEP(shape_view_contiguous(c, 2, d, &v));
    STEP(shape_view_permute(c, &v, (int32_t[]){1, 0}, &t));
    pb[0] = pb[1] = pa[0] = pa[1] = sym_const(s, 1);
    STEP(shape_view_pad(c, &t, pb, pa, &p));
    shape_tracker tr, r;
    shape_tracker_from_view(&t, &tr);
    f = sym_const(s, 24);
    STEP(shape_tracker_reshape(c, &tr, 1, &f, &r));
    const sym_node *k = sym_var(s, "k", 0, 23), *ix, *ok;
    STEP(shape_tracker_index(c, &r, &k, &ix, &ok));
    shape_op ops[SHAPE_MAX_OPS];
    uint32_t n;
    int64_t base;
    STEP(shape_view_to_movement_ops(c, &p, ops, SHAPE_MAX_OPS, &n, &base));
    /* alias answers under allocation failure may be MAYBE, never wrong */
    shape_alias al = shape_tracker_self_alias(c, &r);
    assert_true(al == SHAPE_ALIAS_NONE || al == SHAPE_ALIAS_MAYBE);
    /* strides (2,3) over (3,2) do not nest: decided with an allocated bitset */
    const sym_node *sz[2] = {sym_const(s, 3), sym_const(s, 2)};
    const sym_node *st[2] = {sym_const(s, 2), sym_const(s, 3)};
    shape_view w;
    STEP(shape_view_as_strided(c, 2, sz, st, sym_const(s, 0), NULL, &w));
    shape_ctx_set_alias_enum_limit(c, 0);
    al = shape_view_self_alias(c, &w);
    assert_true(al == SHAPE_ALIAS_NONE || al == SHAPE_ALIAS_MAYBE);
    failures += al == SHAPE_ALIAS_MAYBE;
done:
#undef STEP
    shape_ctx_destroy(c);
    sym_ctx_destroy(s);
    return failures;
}

static void test_shape_view_fail_each_allocation(void **state) {
    (void)state;
    long n;
    for (n = 1; n < 10000; n++) {
        test_alloc ta = {0};
        ta.fail_at = n;
        base_allocator a = test_allocator(&ta);
        int failed = alloc_pass(&a);
        assert_int_equal(ta.live_blocks, 0);
        assert_int_equal(ta.size_mismatches, 0);
        if (ta.failures == 0) {
            assert_int_equal(failed, 0);
            break;
        }
    }
    print_message("allocations in the pass: %ld\n", n - 1);
    assert_true(n >= 3); /* the context and the bitset were each failed once */
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, st_setup, st_teardown)
    const struct CMUnitTest tests[] = {
        T(test_shape_view_contiguous_strides),
        T(test_shape_view_permute_moves_strides),
        T(test_shape_view_permute_rejects_bad_axes),
        T(test_shape_view_expand_only_size_one),
        T(test_shape_view_size_checks_by_bounds),
        T(test_shape_view_pad_sets_mask_and_offset),
        T(test_shape_view_shrink_moves_offset),
        T(test_shape_view_pad_then_shrink_drops_mask),
        T(test_shape_view_flip_negates_stride),
        T(test_shape_view_slice_any_step),
        T(test_shape_view_slice_of_padding),
        T(test_shape_view_unsqueeze_squeeze_torch_strides),
        T(test_shape_view_narrow_and_select),
        T(test_shape_view_select_of_padding),
        T(test_shape_view_diagonal_torch_rules),
        T(test_shape_view_unfold_torch_rules),
        T(test_shape_view_unfold_huge_step_leaves_no_error),
        T(test_shape_view_index_and_valid_expressions),
        T(test_shape_view_extent_and_storage),
        T(test_shape_view_dense_permutation_found),
        T(test_shape_view_self_alias_cases),
        T(test_shape_view_symbolic_shape),
        T(test_shape_view_overflow_is_an_error),
        T(test_shape_view_rejects_malformed_arguments),
        cmocka_unit_test(test_shape_ctx_create_fails_cleanly),
        cmocka_unit_test(test_shape_view_fail_each_allocation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
