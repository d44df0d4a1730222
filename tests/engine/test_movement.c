/* Movement ops as views, read back on both backends, and their strides and storage offset
 * against the values PyTorch documents (NumPy's where PyTorch has no negative strides).
 * All values are exact (tolerance 0): views move no data. */
#include "engine_fixture.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* arange(n) as f32 of the given shape: element i is i. */
static kiln_tensor *iota(kiln_context *ctx, uint32_t ndim, const int64_t *shape) {
    int64_t n = 1;
    for (uint32_t d = 0; d < ndim; d++)
        n *= shape[d];
    kiln_tensor *t = kiln_reshape(kiln_arange(ctx, KILN_F32, 0, (double)n, 1), ndim, shape);
    assert_non_null(t);
    return t;
}

static void check_layout(kiln_tensor *t, uint32_t ndim, const int64_t *strides, int64_t offset) {
    int64_t got[KILN_MAX_DIMS], off = -1;
    assert_int_equal(kiln_tensor_strides(t, got), KILN_OK);
    for (uint32_t d = 0; d < ndim; d++) {
        if (got[d] != strides[d])
            fail_msg("stride %u: got %lld, want %lld", d, (long long)got[d], (long long)strides[d]);
    }
    assert_int_equal(kiln_tensor_offset(t, &off), KILN_OK);
    assert_int_equal(off, offset);
}

/* A view of a from_data tensor (a storage), so strides are those of the view itself. */
static kiln_tensor *data12(kiln_context *ctx) {
    float v[12];
    for (int i = 0; i < 12; i++)
        v[i] = (float)i;
    return fx_f32(ctx, 2, (const int64_t[]){3, 4}, v);
}

static void test_engine_movement_reshape(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = data12(ctx);
    check_layout(a, 2, (const int64_t[]){4, 1}, 0);
    kiln_tensor *r = kiln_reshape(a, 2, (const int64_t[]){2, -1});
    fx_assert_shape(r, 2, (const int64_t[]){2, 6});
    check_layout(r, 2, (const int64_t[]){6, 1}, 0);
    fx_check_f32(r, (const float[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 12, 0, 0);
    /* A reshape of a transpose is no single view: the values in logical order, contiguous
     * strides reported. a^T is {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11} row-major. */
    r = kiln_reshape(kiln_transpose(a, 0, 1), 2, (const int64_t[]){2, 6});
    check_layout(r, 2, (const int64_t[]){6, 1}, 0);
    fx_check_f32(r, (const float[]){0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}, 12, 0, 0);
    /* To 0-d and back: a one-element tensor. */
    kiln_tensor *one = fx_f32(ctx, 2, (const int64_t[]){1, 1}, (const float[]){7});
    r = kiln_reshape(one, 0, NULL);
    assert_int_equal(kiln_tensor_ndim(r), 0);
    fx_check_f32(r, (const float[]){7}, 1, 0, 0);
    int64_t storage;
    assert_int_equal(kiln_tensor_storage_size(kiln_transpose(a, 0, 1), &storage), KILN_OK);
    assert_int_equal(storage, 12);
}

static void test_engine_movement_permute_transpose(void **state) {
    kiln_context *ctx = fx_ctx(state);
    float v[24], want[24];
    for (int i = 0; i < 24; i++)
        v[i] = (float)i;
    kiln_tensor *a = fx_f32(ctx, 3, (const int64_t[]){2, 3, 4}, v);
    /* permute(2, 0, 1): shape (4, 2, 3), strides (1, 12, 4); out[k][i][j] = 12 i + 4 j + k. */
    kiln_tensor *p = kiln_permute(a, (const int32_t[]){2, 0, 1});
    fx_assert_shape(p, 3, (const int64_t[]){4, 2, 3});
    check_layout(p, 3, (const int64_t[]){1, 12, 4}, 0);
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                want[(k * 2 + i) * 3 + j] = (float)(12 * i + 4 * j + k);
    fx_check_f32(p, want, 24, 0, 0);
    /* transpose(-1, 0) of (3, 4): (4, 3), strides (1, 4); out[j][i] = 4 i + j. */
    kiln_tensor *t = kiln_transpose(data12(ctx), -1, 0);
    fx_assert_shape(t, 2, (const int64_t[]){4, 3});
    check_layout(t, 2, (const int64_t[]){1, 4}, 0);
    fx_check_f32(t, (const float[]){0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}, 12, 0, 0);
}

static void test_engine_movement_expand(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *c = fx_f32(ctx, 2, (const int64_t[]){3, 1}, (const float[]){1, 2, 3});
    /* (3, 1) -> (3, 4): strides (1, 0) (torch: an expanded dim has stride 0). */
    kiln_tensor *e = kiln_expand(c, 2, (const int64_t[]){-1, 4});
    fx_assert_shape(e, 2, (const int64_t[]){3, 4});
    check_layout(e, 2, (const int64_t[]){1, 0}, 0);
    fx_check_f32(e, (const float[]){1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}, 12, 0, 0);
    /* A new leading dim: (3,) -> (2, 3), strides (0, 1). */
    kiln_tensor *v = fx_f32(ctx, 1, (const int64_t[]){3}, (const float[]){4, 5, 6});
    e = kiln_expand(v, 2, (const int64_t[]){2, 3});
    check_layout(e, 2, (const int64_t[]){0, 1}, 0);
    fx_check_f32(e, (const float[]){4, 5, 6, 4, 5, 6}, 6, 0, 0);
}

static void test_engine_movement_pad_shrink(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = fx_f32(ctx, 2, (const int64_t[]){2, 3}, (const float[]){1, 2, 3, 4, 5, 6});
    /* One row before, two columns after: (3, 5). */
    kiln_tensor *p = kiln_pad(a, (const int64_t[]){1, 0, 0, 2});
    fx_assert_shape(p, 2, (const int64_t[]){3, 5});
    fx_check_f32(p, (const float[]){0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0, 0}, 15, 0, 0);
    /* shrink rows [1, 3), cols [1, 3) of (3, 4): {{5, 6}, {9, 10}}, offset 1 * 4 + 1 = 5. */
    kiln_tensor *s = kiln_shrink(data12(ctx), (const int64_t[]){1, 1}, (const int64_t[]){3, 3});
    fx_assert_shape(s, 2, (const int64_t[]){2, 2});
    check_layout(s, 2, (const int64_t[]){4, 1}, 5);
    fx_check_f32(s, (const float[]){5, 6, 9, 10}, 4, 0, 0);
    /* Shrinking the padded view back gives the original. */
    s = kiln_shrink(p, (const int64_t[]){1, 0}, (const int64_t[]){3, 3});
    fx_check_f32(s, (const float[]){1, 2, 3, 4, 5, 6}, 6, 0, 0);
    /* Views that lie wholly in the padding read zeros: a padded row, a shrink to the
     * padding, and through exp: exp(0) = 1. */
    fx_check_f32(kiln_select(p, 0, 0), (const float[]){0, 0, 0, 0, 0}, 5, 0, 0);
    fx_check_f32(kiln_shrink(p, (const int64_t[]){1, 3}, (const int64_t[]){3, 5}),
                 (const float[]){0, 0, 0, 0}, 4, 0, 0);
    fx_check_f32(kiln_exp(kiln_select(p, 1, 4)), (const float[]){1, 1, 1}, 3, 0, 0);
    /* A padded view used in arithmetic: the padding reads as 0. */
    fx_check_f32(kiln_add_scalar(p, 1),
                 (const float[]){1, 1, 1, 1, 1, 2, 3, 4, 1, 1, 5, 6, 7, 1, 1}, 15, 0, 0);
}

static void test_engine_movement_flip_and_negative_slices(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = data12(ctx);
    /* flip(1): strides (4, -1), offset 3 (NumPy's a[:, ::-1]). */
    kiln_tensor *f = kiln_flip(a, 1);
    check_layout(f, 2, (const int64_t[]){4, -1}, 3);
    fx_check_f32(f, (const float[]){3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8}, 12, 0, 0);
    float v[10];
    for (int i = 0; i < 10; i++)
        v[i] = (float)i;
    kiln_tensor *r = fx_f32(ctx, 1, (const int64_t[]){10}, v);
    /* r[8:1:-3] = {8, 5, 2}: stride -3, offset 8. */
    kiln_tensor *s = kiln_slice(r, 0, 8, 1, -3);
    fx_assert_shape(s, 1, (const int64_t[]){3});
    check_layout(s, 1, (const int64_t[]){-3}, 8);
    fx_check_f32(s, (const float[]){8, 5, 2}, 3, 0, 0);
    /* r[::-1]: 9 .. 0, stride -1, offset 9. */
    s = kiln_slice(r, 0, INT64_MAX, INT64_MIN, -1);
    check_layout(s, 1, (const int64_t[]){-1}, 9);
    fx_check_f32(s, (const float[]){9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, 10, 0, 0);
    /* r[-2::-4] = r[8], r[4], r[0]. */
    s = kiln_slice(r, 0, -2, INT64_MIN, -4);
    fx_check_f32(s, (const float[]){8, 4, 0}, 3, 0, 0);
    /* r[1:7:2] = {1, 3, 5}: stride 2, offset 1; stop past the end clamps: r[7:100] = 7, 8, 9. */
    s = kiln_slice(r, 0, 1, 7, 2);
    check_layout(s, 1, (const int64_t[]){2}, 1);
    fx_check_f32(s, (const float[]){1, 3, 5}, 3, 0, 0);
    fx_check_f32(kiln_slice(r, 0, 7, 100, 1), (const float[]){7, 8, 9}, 3, 0, 0);
    /* An empty slice r[5:2]: shape (0). */
    s = kiln_slice(r, 0, 5, 2, 1);
    fx_assert_shape(s, 1, (const int64_t[]){0});
    fx_check_f32(s, NULL, 0, 0, 0);
    /* a[:, ::-2] = columns 3 and 1: strides (4, -2), offset 3. */
    s = kiln_slice(a, 1, INT64_MAX, INT64_MIN, -2);
    check_layout(s, 2, (const int64_t[]){4, -2}, 3);
    fx_check_f32(s, (const float[]){3, 1, 7, 5, 11, 9}, 6, 0, 0);
}

static void test_engine_movement_unsqueeze_squeeze(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = data12(ctx);
    /* torch: the new dim's stride is size[d] * stride[d] of the dim it precedes, 1 at the end. */
    kiln_tensor *u = kiln_unsqueeze(a, 0);
    fx_assert_shape(u, 3, (const int64_t[]){1, 3, 4});
    check_layout(u, 3, (const int64_t[]){12, 4, 1}, 0);
    u = kiln_unsqueeze(a, 1);
    fx_assert_shape(u, 3, (const int64_t[]){3, 1, 4});
    check_layout(u, 3, (const int64_t[]){4, 4, 1}, 0);
    u = kiln_unsqueeze(a, -1);
    fx_assert_shape(u, 3, (const int64_t[]){3, 4, 1});
    check_layout(u, 3, (const int64_t[]){4, 1, 1}, 0);
    fx_check_f32(u, (const float[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 12, 0, 0);
    kiln_tensor *s = kiln_squeeze(kiln_unsqueeze(a, 1), 1);
    fx_assert_shape(s, 2, (const int64_t[]){3, 4});
    check_layout(s, 2, (const int64_t[]){4, 1}, 0);
    /* Squeezing a dim that is not 1 is an error in Kiln (torch.squeeze(dim) would return the
     * tensor unchanged; kiln.h does not say), and a leaves a intact. */
    assert_null(kiln_squeeze(a, 0));
    fx_expect_error(ctx, KILN_ERROR_SHAPE_MISMATCH);
    fx_check_f32(a, (const float[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 12, 0, 0);
}

static void test_engine_movement_narrow_select(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = data12(ctx);
    /* narrow(1, 1, 2): {{1, 2}, {5, 6}, {9, 10}}, strides (4, 1), offset 1. */
    kiln_tensor *n = kiln_narrow(a, 1, 1, 2);
    fx_assert_shape(n, 2, (const int64_t[]){3, 2});
    check_layout(n, 2, (const int64_t[]){4, 1}, 1);
    fx_check_f32(n, (const float[]){1, 2, 5, 6, 9, 10}, 6, 0, 0);
    /* select(0, 1): row 1 = {4, 5, 6, 7}, stride 1, offset 4. */
    kiln_tensor *s = kiln_select(a, 0, 1);
    fx_assert_shape(s, 1, (const int64_t[]){4});
    check_layout(s, 1, (const int64_t[]){1}, 4);
    fx_check_f32(s, (const float[]){4, 5, 6, 7}, 4, 0, 0);
    /* select(1, -1): the last column {3, 7, 11}, stride 4, offset 3. */
    s = kiln_select(a, 1, -1);
    check_layout(s, 1, (const int64_t[]){4}, 3);
    fx_check_f32(s, (const float[]){3, 7, 11}, 3, 0, 0);
    /* select down to 0-d: a[2][3] = 11, offset 11. */
    s = kiln_select(kiln_select(a, 0, 2), 0, 3);
    assert_int_equal(kiln_tensor_ndim(s), 0);
    check_layout(s, 0, NULL, 11);
    fx_check_f32(s, (const float[]){11}, 1, 0, 0);
}

static void test_engine_movement_diagonal(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = data12(ctx);
    /* The main diagonal of (3, 4): {0, 5, 10}, stride 4 + 1 = 5, offset 0. */
    kiln_tensor *d = kiln_diagonal(a, 0, 0, 1);
    fx_assert_shape(d, 1, (const int64_t[]){3});
    check_layout(d, 1, (const int64_t[]){5}, 0);
    fx_check_f32(d, (const float[]){0, 5, 10}, 3, 0, 0);
    /* offset 1 (above): {1, 6, 11}, offset 1; offset -1 (below): {4, 9}, offset 4. */
    d = kiln_diagonal(a, 1, 0, 1);
    check_layout(d, 1, (const int64_t[]){5}, 1);
    fx_check_f32(d, (const float[]){1, 6, 11}, 3, 0, 0);
    d = kiln_diagonal(a, -1, 0, 1);
    fx_assert_shape(d, 1, (const int64_t[]){2});
    check_layout(d, 1, (const int64_t[]){5}, 4);
    fx_check_f32(d, (const float[]){4, 9}, 2, 0, 0);
    /* Over dims (1, 2) of (2, 3, 4): shape (2, 3), strides (12, 5); out[i][j] = 12 i + 5 j. */
    float v[24];
    for (int i = 0; i < 24; i++)
        v[i] = (float)i;
    d = kiln_diagonal(fx_f32(ctx, 3, (const int64_t[]){2, 3, 4}, v), 0, 1, 2);
    fx_assert_shape(d, 2, (const int64_t[]){2, 3});
    check_layout(d, 2, (const int64_t[]){12, 5}, 0);
    fx_check_f32(d, (const float[]){0, 5, 10, 12, 17, 22}, 6, 0, 0);
}

static void test_engine_movement_unfold(void **state) {
    kiln_context *ctx = fx_ctx(state);
    float v[10];
    for (int i = 0; i < 10; i++)
        v[i] = (float)i;
    kiln_tensor *r = fx_f32(ctx, 1, (const int64_t[]){10}, v);
    /* unfold(0, 3, 2): (10 - 3) / 2 + 1 = 4 windows, strides (2, 1). */
    kiln_tensor *u = kiln_unfold(r, 0, 3, 2);
    fx_assert_shape(u, 2, (const int64_t[]){4, 3});
    check_layout(u, 2, (const int64_t[]){2, 1}, 0);
    fx_check_f32(u, (const float[]){0, 1, 2, 2, 3, 4, 4, 5, 6, 6, 7, 8}, 12, 0, 0);
    /* unfold(1, 2, 1) of (3, 4): (3, 3, 2), strides (4, 1, 1). */
    u = kiln_unfold(data12(ctx), 1, 2, 1);
    fx_assert_shape(u, 3, (const int64_t[]){3, 3, 2});
    check_layout(u, 3, (const int64_t[]){4, 1, 1}, 0);
    fx_check_f32(u, (const float[]){0, 1, 1, 2, 2, 3, 4, 5, 5, 6, 6, 7, 8, 9, 9, 10, 10, 11}, 18, 0,
                 0);
}

/* unfold over padded dims (torch: x.pad(...).unfold(...)): the windows see the padding's zeros,
 * nothing is copied first (the windows are a second view), and the gradient adds each
 * element's windows and drops the padding's. Expected values computed here. */
static void test_engine_movement_unfold_padded(void **state) {
    kiln_context *ctx = fx_ctx(state);
    float v[12];
    for (int i = 0; i < 12; i++)
        v[i] = (float)(i + 1);
    /* 1-d: [0 0 1 2 ... 10 0 0 0] (2 before, 3 after; 15 long), windows of 4, step 3: 4. */
    kiln_tensor *x = fx_f32(ctx, 1, (const int64_t[]){10}, v);
    assert_int_equal(kiln_requires_grad_(x, true), KILN_OK);
    kiln_tensor *p = kiln_pad(x, (const int64_t[]){2, 3});
    kiln_tensor *u = kiln_unfold(p, 0, 4, 3);
    fx_assert_shape(u, 2, (const int64_t[]){4, 4});
    float padded[15] = {0}, want[16];
    for (int i = 0; i < 10; i++)
        padded[2 + i] = v[i];
    for (int w = 0; w < 4; w++) {
        for (int j = 0; j < 4; j++)
            want[w * 4 + j] = padded[w * 3 + j];
    }
    fx_check_f32(u, want, 16, 0, 0);
    kiln_tensor *weights =
        kiln_reshape(kiln_arange(ctx, KILN_F32, 1, 17, 1), 2, (const int64_t[]){4, 4});
    kiln_tensor *loss = kiln_sum(kiln_mul(u, weights), 0, NULL, false);
    kiln_tensor *g = NULL;
    assert_int_equal(kiln_grad(loss, 1, &x, &g), KILN_OK);
    float grad[10] = {0};
    for (int w = 0; w < 4; w++) {
        for (int j = 0; j < 4; j++) {
            int at = w * 3 + j - 2; /* the element of x, or padding */
            if (at >= 0 && at < 10)
                grad[at] += (float)(w * 4 + j + 1);
        }
    }
    fx_check_f32(g, grad, 10, 0, 0);
    /* 2-d, padded on both dims and unfolded along both: (3, 4) padded (1, 1) and (2, 0) gives
     * (5, 6); unfold(0, 2, 2) then unfold(1, 3, 2): (2, 2, 2, 3). */
    kiln_tensor *q = kiln_pad(data12(ctx), (const int64_t[]){1, 1, 2, 0});
    kiln_tensor *w2 = kiln_unfold(kiln_unfold(q, 0, 2, 2), 1, 3, 2);
    fx_assert_shape(w2, 4, (const int64_t[]){2, 2, 2, 3});
    float want2[24];
    for (int a = 0; a < 2; a++) {
        for (int b = 0; b < 2; b++) {
            for (int i = 0; i < 2; i++) {
                for (int j = 0; j < 3; j++) {
                    int r = a * 2 + i - 1, c = b * 2 + j - 2; /* in data12's (3, 4) */
                    want2[((a * 2 + b) * 2 + i) * 3 + j] =
                        r >= 0 && r < 3 && c >= 0 && c < 4 ? (float)(r * 4 + c) : 0.0f;
                }
            }
        }
    }
    fx_check_f32(w2, want2, 24, 0, 0);
}

static void test_engine_movement_views_compose(void **state) {
    kiln_context *ctx = fx_ctx(state);
    /* Views of a computed (not stored) result: (iota + 100) transposed then flipped. */
    kiln_tensor *a = kiln_add_scalar(iota(ctx, 2, (const int64_t[]){3, 4}), 100);
    kiln_tensor *v = kiln_flip(kiln_transpose(a, 0, 1), 0);
    /* transpose: out[j][i] = 4 i + j + 100; flip rows: j -> 3 - j. */
    float want[12];
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 3; i++)
            want[j * 3 + i] = (float)(4 * i + (3 - j) + 100);
    fx_check_f32(v, want, 12, 0, 0);
    /* Arithmetic between two views of one storage: b + b flipped twice along dim 0 (= 2 b). */
    kiln_tensor *b = data12(ctx);
    kiln_tensor *c = kiln_add(b, kiln_flip(kiln_flip(b, 0), 0));
    fx_check_f32(c, (const float[]){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22}, 12, 0, 0);
    /* The base tensor is unchanged by every view taken of it. */
    fx_check_f32(b, (const float[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 12, 0, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_movement_reshape),
        ENG_TEST(test_engine_movement_permute_transpose),
        ENG_TEST(test_engine_movement_expand),
        ENG_TEST(test_engine_movement_pad_shrink),
        ENG_TEST(test_engine_movement_flip_and_negative_slices),
        ENG_TEST(test_engine_movement_unsqueeze_squeeze),
        ENG_TEST(test_engine_movement_narrow_select),
        ENG_TEST(test_engine_movement_diagonal),
        ENG_TEST(test_engine_movement_unfold),
        ENG_TEST(test_engine_movement_unfold_padded),
        ENG_TEST(test_engine_movement_views_compose),
    };
    return ENG_RUN_BOTH(tests);
}
