/* Reductions and the composites built on them, on both backends: sum, prod, max, min, mean,
 * var/std (correction 0 and 1), argmax over any set of axes with and without keepdim; softmax,
 * log_softmax; matmul (2-d, batched, broadcasting, 1-d operands); conv2d; empty reductions.
 *
 * Inputs are quarters in [-4, 4] (fixtures/gen_fixtures.py), so sums, maxima, matmul and conv2d
 * results are exact in f32 whatever the order of accumulation: tolerance 0.
 * Tolerances elsewhere: mean (one division) rtol 1e-6; prod rtol 1e-6; var/std rtol 1e-5;
 * softmax/log_softmax (exp, log, division) atol 1e-6 + rtol 1e-5. */
#include "engine_fixture.h"

#include <stdlib.h>
#include "fixtures/fixtures.h"

#include <math.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

static kiln_tensor *ra(kiln_context *ctx) {
    return fx_f32(ctx, 3, (const int64_t[]){2, 3, 4}, RA);
}

static void test_engine_sum_axis_sets(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = ra(ctx);
    kiln_tensor *r = kiln_sum(a, 0, NULL, false);
    assert_int_equal(kiln_tensor_ndim(r), 0);
    fx_check_f32(r, RA_SUM_ALL, 1, 0, 0);
    r = kiln_sum(a, 0, NULL, true);
    fx_assert_shape(r, 3, (const int64_t[]){1, 1, 1});
    fx_check_f32(r, RA_SUM_ALL, 1, 0, 0);
    r = kiln_sum(a, 1, (const int32_t[]){0}, false);
    fx_assert_shape(r, 2, (const int64_t[]){3, 4});
    fx_check_f32(r, RA_SUM_0, 12, 0, 0);
    r = kiln_sum(a, 1, (const int32_t[]){1}, true);
    fx_assert_shape(r, 3, (const int64_t[]){2, 1, 4});
    fx_check_f32(r, RA_SUM_1, 8, 0, 0);
    /* Axes in any order, negative axes counted from the end. */
    r = kiln_sum(a, 2, (const int32_t[]){-1, 0}, false);
    fx_assert_shape(r, 1, (const int64_t[]){3});
    fx_check_f32(r, RA_SUM_02, 3, 0, 0);
    r = kiln_sum(a, 2, (const int32_t[]){2, 1}, true);
    fx_assert_shape(r, 3, (const int64_t[]){2, 1, 1});
    fx_check_f32(r, RA_SUM_12, 2, 0, 0);
    /* Every axis listed is the same as none listed. */
    fx_check_f32(kiln_sum(a, 3, (const int32_t[]){0, 1, 2}, false), RA_SUM_ALL, 1, 0, 0);
}

static void test_engine_sum_of_views(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = ra(ctx);
    /* a permuted to (4, 3, 2) and summed over dims (1, 2) is a summed over its dims (1, 0): for
     * each k, the sum over j of RA_SUM_0[j][k] (RA_SUM_0 already summed over i). */
    kiln_tensor *p = kiln_permute(a, (const int32_t[]){2, 1, 0});
    kiln_tensor *r = kiln_sum(p, 2, (const int32_t[]){1, 2}, false);
    float want[4] = {0};
    for (int j = 0; j < 3; j++)
        for (int k = 0; k < 4; k++)
            want[k] += RA_SUM_0[j * 4 + k];
    fx_assert_shape(r, 1, (const int64_t[]){4});
    fx_check_f32(r, want, 4, 0, 0);
    /* The sum of a flipped view equals the sum of the original, reversed along the kept dim. */
    kiln_tensor *f = kiln_flip(a, 1);
    r = kiln_sum(f, 1, (const int32_t[]){2}, false);
    float want2[6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            want2[i * 3 + j] = 0;
            for (int k = 0; k < 4; k++)
                want2[i * 3 + j] += RA[(i * 3 + (2 - j)) * 4 + k];
        }
    fx_check_f32(r, want2, 6, 0, 0);
}

static void test_engine_reduce_prod_max_min(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = ra(ctx);
    kiln_tensor *r = kiln_max(a, 1, (const int32_t[]){1}, false);
    fx_assert_shape(r, 2, (const int64_t[]){2, 4});
    fx_check_f32(r, RA_MAX_1, 8, 0, 0);
    r = kiln_min(a, 2, (const int32_t[]){0, 2}, true);
    fx_assert_shape(r, 3, (const int64_t[]){1, 3, 1});
    fx_check_f32(r, RA_MIN_02, 3, 0, 0);
    fx_check_f32(kiln_max(a, 0, NULL, false), RA_MAX_ALL, 1, 0, 0);
    kiln_tensor *p = fx_f32(ctx, 2, (const int64_t[]){3, 4}, RP);
    fx_check_f32(kiln_prod(p, 1, (const int32_t[]){1}, false), RP_PROD_1, 3, 0, 1e-6);
    fx_check_f32(kiln_prod(p, 0, NULL, false), RP_PROD_ALL, 1, 0, 1e-6);
    /* Integers: i32 sum/prod give i64 (as PyTorch), max/min stay i32; u8 max stays u8
     * (unsigned order). */
    kiln_tensor *i = fx_i32(ctx, 2, (const int64_t[]){2, 3}, (const int32_t[]){-5, 3, 7, 2, -2, 4});
    fx_check_i64(kiln_sum(i, 1, (const int32_t[]){1}, false), (const int64_t[]){5, 4}, 2);
    fx_check_i64(kiln_prod(i, 1, (const int32_t[]){0}, false), (const int64_t[]){-10, -6, 28}, 3);
    fx_check_i32(kiln_max(i, 0, NULL, false), (const int32_t[]){7}, 1);
    fx_check_i32(kiln_min(i, 1, (const int32_t[]){1}, false), (const int32_t[]){-5, -2}, 2);
    kiln_tensor *u =
        kiln_from_data(ctx, KILN_U8, 1, (const int64_t[]){4}, (const uint8_t[]){3, 250, 7, 128});
    fx_check_u8(kiln_max(u, 0, NULL, false), KILN_U8, (const uint8_t[]){250}, 1);
    fx_check_u8(kiln_min(u, 0, NULL, false), KILN_U8, (const uint8_t[]){3}, 1);
    /* The u8 sum accumulates in i64 (no wrap at 256): 3 + 250 + 7 + 128 = 388. */
    fx_check_i64(kiln_sum(u, 0, NULL, false), (const int64_t[]){388}, 1);
}

static void test_engine_reduce_mean_var_std(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = ra(ctx);
    kiln_tensor *r = kiln_mean(a, 2, (const int32_t[]){0, 2}, false);
    fx_assert_shape(r, 1, (const int64_t[]){3});
    fx_check_f32(r, RA_MEAN_02, 3, 0, 1e-6);
    fx_check_f32(kiln_mean(a, 0, NULL, false), RA_MEAN_ALL, 1, 0, 1e-6);
    r = kiln_var(a, 1, (const int32_t[]){1}, 0, false);
    fx_assert_shape(r, 2, (const int64_t[]){2, 4});
    fx_check_f32(r, RA_VAR_1_C0, 8, 1e-6, 1e-5);
    r = kiln_var(a, 1, (const int32_t[]){1}, 1, true);
    fx_assert_shape(r, 3, (const int64_t[]){2, 1, 4});
    fx_check_f32(r, RA_VAR_1_C1, 8, 1e-6, 1e-5);
    fx_check_f32(kiln_std(a, 0, NULL, 1, false), RA_STD_ALL_C1, 1, 1e-6, 1e-5);
    fx_check_f32(kiln_std(a, 2, (const int32_t[]){0, 2}, 0, false), RA_STD_02_C0, 3, 1e-6, 1e-5);
    /* One element with correction 1: 0 / 0 = NaN (as torch.var); correction 0: 0. */
    kiln_tensor *one = fx_f32(ctx, 1, (const int64_t[]){1}, (const float[]){5});
    fx_check_f32(kiln_var(one, 0, NULL, 1, false), (const float[]){NAN}, 1, 0, 0);
    fx_check_f32(kiln_var(one, 0, NULL, 0, false), (const float[]){0}, 1, 0, 0);
}

static void test_engine_argmax_first_index(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = ra(ctx);
    /* RA[1][2] = {.., 4, .., 4}: the first of the tied maxima (index 1) wins. */
    kiln_tensor *r = kiln_argmax(a, 2, false);
    assert_int_equal(kiln_tensor_dtype(r), KILN_I64); /* as PyTorch */
    fx_assert_shape(r, 2, (const int64_t[]){2, 3});
    /* argmax is i64 (even cast to i32 in the same kernel): a device without shaderInt64
     * (mobile-low) refuses it, fx_unsupported_i64 */
    if (!fx_unsupported_i64(kiln_cast(r, KILN_I32)))
        fx_check_i32(kiln_cast(r, KILN_I32), RA_ARGMAX_2, 6);
    r = kiln_argmax(a, -3, true);
    fx_assert_shape(r, 3, (const int64_t[]){1, 3, 4});
    if (!fx_unsupported_i64(kiln_cast(r, KILN_I32)))
        fx_check_i32(kiln_cast(r, KILN_I32), RA_ARGMAX_0, 12);
    /* Integers, ties and a negative maximum: {-3, -1, -1, -7} -> 1. */
    kiln_tensor *i = fx_i32(ctx, 1, (const int64_t[]){4}, (const int32_t[]){-3, -1, -1, -7});
    fx_check_i64(kiln_argmax(i, 0, false), (const int64_t[]){1}, 1);
    /* A NaN is the maximum, the first NaN wins (torch.argmax): {1, NaN, 0, NaN} -> 1; and max
     * propagates it. */
    kiln_tensor *n =
        fx_f32(ctx, 2, (const int64_t[]){2, 4}, (const float[]){1, NAN, 0, NAN, 3, 5, 4, -1});
    fx_check_i64(kiln_argmax(n, 1, false), (const int64_t[]){1, 1}, 2);
    fx_check_f32(kiln_max(n, 1, (const int32_t[]){1}, false), (const float[]){NAN, 5}, 2, 0, 0);
}

static void test_engine_softmax_matches_numpy(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *s = fx_f32(ctx, 2, (const int64_t[]){3, 5}, SM);
    fx_check_f32(kiln_softmax(s, 1), SM_SOFTMAX_1, 15, 1e-6, 1e-5);
    fx_check_f32(kiln_softmax(s, -1), SM_SOFTMAX_1, 15, 1e-6, 1e-5);
    fx_check_f32(kiln_softmax(s, 0), SM_SOFTMAX_0, 15, 1e-6, 1e-5);
    fx_check_f32(kiln_log_softmax(s, 1), SM_LOGSOFTMAX_1, 15, 1e-6, 1e-5);
    fx_check_f32(kiln_log_softmax(s, -2), SM_LOGSOFTMAX_0, 15, 1e-6, 1e-5);
    /* Large inputs do not overflow (the maximum is subtracted first): softmax(1000, 1001, 1002)
     * = (e^-2, e^-1, 1) / (1 + e^-1 + e^-2) = (0.09003057, 0.24472847, 0.66524096). */
    kiln_tensor *big = fx_f32(ctx, 1, (const int64_t[]){3}, (const float[]){1000, 1001, 1002});
    fx_check_f32(kiln_softmax(big, 0), (const float[]){0.09003057f, 0.24472847f, 0.66524096f}, 3,
                 1e-6, 1e-5);
    fx_check_f32(kiln_log_softmax(big, 0),
                 (const float[]){-2.40760596f, -1.40760596f, -0.40760596f}, 3, 1e-6, 1e-5);
}

static void test_engine_matmul_shapes(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = fx_f32(ctx, 2, (const int64_t[]){3, 4}, MM_A);
    kiln_tensor *b = fx_f32(ctx, 2, (const int64_t[]){4, 5}, MM_B);
    kiln_tensor *v = fx_f32(ctx, 1, (const int64_t[]){4}, MM_V);
    kiln_tensor *r = kiln_matmul(a, b);
    fx_assert_shape(r, 2, (const int64_t[]){3, 5});
    fx_check_f32(r, MM_AB, 15, 0, 0);
    /* 1-d operands: (4) @ (4, 5) -> (5); (3, 4) @ (4) -> (3); (4) @ (4) -> 0-d. */
    r = kiln_matmul(v, b);
    fx_assert_shape(r, 1, (const int64_t[]){5});
    fx_check_f32(r, MM_VB, 5, 0, 0);
    r = kiln_matmul(a, v);
    fx_assert_shape(r, 1, (const int64_t[]){3});
    fx_check_f32(r, MM_AV, 3, 0, 0);
    r = kiln_matmul(v, v);
    assert_int_equal(kiln_tensor_ndim(r), 0);
    fx_check_f32(r, MM_VV, 1, 0, 0);
    /* Batched: (2, 3, 4) @ (2, 4, 2) -> (2, 3, 2). */
    kiln_tensor *b1 = fx_f32(ctx, 3, (const int64_t[]){2, 3, 4}, MM_B1);
    kiln_tensor *b2 = fx_f32(ctx, 3, (const int64_t[]){2, 4, 2}, MM_B2);
    r = kiln_matmul(b1, b2);
    fx_assert_shape(r, 3, (const int64_t[]){2, 3, 2});
    fx_check_f32(r, MM_B1B2, 12, 0, 0);
    /* Broadcasting batch dims: (2, 1, 3, 4) @ (3, 4, 2) -> (2, 3, 3, 2). */
    kiln_tensor *c1 = fx_f32(ctx, 4, (const int64_t[]){2, 1, 3, 4}, MM_C1);
    kiln_tensor *c2 = fx_f32(ctx, 3, (const int64_t[]){3, 4, 2}, MM_C2);
    r = kiln_matmul(c1, c2);
    fx_assert_shape(r, 4, (const int64_t[]){2, 3, 3, 2});
    fx_check_f32(r, MM_C1C2, 36, 0, 0);
    /* A transposed operand is read through its view: (A^T)^T @ B = A @ B. */
    kiln_tensor *at = kiln_transpose(kiln_transpose(a, 0, 1), 0, 1);
    fx_check_f32(kiln_matmul(at, b), MM_AB, 15, 0, 0);
}

static void test_engine_conv2d_stride_padding(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 4, (const int64_t[]){2, 3, 7, 6}, CV_X);
    kiln_tensor *w = fx_f32(ctx, 4, (const int64_t[]){4, 3, 3, 2}, CV_W);
    /* OH = (7 + 2 - 3) / 2 + 1 = 4, OW = (6 + 2 - 2) / 2 + 1 = 4. */
    kiln_tensor *r = kiln_conv2d(x, w, 2, 1);
    fx_assert_shape(r, 4, (const int64_t[]){2, 4, 4, 4});
    fx_check_f32(r, CV_S2P1, N(CV_S2P1), 0, 0);
    /* OH = 7 - 3 + 1 = 5, OW = 6 - 2 + 1 = 5. */
    r = kiln_conv2d(x, w, 1, 0);
    fx_assert_shape(r, 4, (const int64_t[]){2, 4, 5, 5});
    fx_check_f32(r, CV_S1P0, N(CV_S1P0), 0, 0);
}

static void test_engine_reduce_odd_sizes(void **state) {
    kiln_context *ctx = fx_ctx(state);
    /* (1, 1) @ (1, 1); the outer product (3, 1) @ (1, 3): out[i][j] = a[i] b[j]. */
    kiln_tensor *one = fx_f32(ctx, 2, (const int64_t[]){1, 1}, (const float[]){-3});
    fx_check_f32(kiln_matmul(one, one), (const float[]){9}, 1, 0, 0);
    kiln_tensor *a = fx_f32(ctx, 2, (const int64_t[]){3, 1}, (const float[]){1, 2, 3});
    kiln_tensor *b = fx_f32(ctx, 2, (const int64_t[]){1, 3}, (const float[]){-1, 0, 10});
    fx_check_f32(kiln_matmul(a, b), (const float[]){-1, 0, 10, -2, 0, 20, -3, 0, 30}, 9, 0, 0);
    /* (1, 3) @ (3, 1) = 1 * -1 + 2 * 0 + 3 * 10 = 29. */
    fx_check_f32(kiln_matmul(kiln_transpose(a, 0, 1), kiln_transpose(b, 0, 1)), (const float[]){29},
                 1, 0, 0);
    /* Reducing a size-1 dim copies it; keepdim keeps it. */
    kiln_tensor *r = kiln_sum(a, 1, (const int32_t[]){1}, false);
    fx_assert_shape(r, 1, (const int64_t[]){3});
    fx_check_f32(r, (const float[]){1, 2, 3}, 3, 0, 0);
    fx_check_f32(kiln_max(a, 1, (const int32_t[]){-1}, true), (const float[]){1, 2, 3}, 3, 0, 0);
    fx_check_f32(kiln_var(a, 1, (const int32_t[]){0}, 0, false), (const float[]){2.0f / 3.0f}, 1, 0,
                 1e-6);
    fx_check_f32(kiln_std(a, 1, (const int32_t[]){0}, 1, false), (const float[]){1}, 1, 0, 1e-6);
    /* A 1x1 convolution of a (1, 1, 3, 3) image by 2 with stride 2: the corners times 2; with
     * padding 1 and a 3x3 kernel of ones over a 1x1 image, the image itself. */
    float img[9];
    for (int i = 0; i < 9; i++)
        img[i] = (float)i;
    kiln_tensor *x = fx_f32(ctx, 4, (const int64_t[]){1, 1, 3, 3}, img);
    kiln_tensor *w = fx_f32(ctx, 4, (const int64_t[]){1, 1, 1, 1}, (const float[]){2});
    r = kiln_conv2d(x, w, 2, 0);
    fx_assert_shape(r, 4, (const int64_t[]){1, 1, 2, 2});
    fx_check_f32(r, (const float[]){0, 4, 12, 16}, 4, 0, 0);
    kiln_tensor *px = fx_f32(ctx, 4, (const int64_t[]){1, 1, 1, 1}, (const float[]){5});
    r = kiln_conv2d(px, kiln_ones(ctx, KILN_F32, 4, (const int64_t[]){1, 1, 3, 3}), 1, 1);
    fx_assert_shape(r, 4, (const int64_t[]){1, 1, 1, 1});
    fx_check_f32(r, (const float[]){5}, 1, 0, 0);
    /* Three outputs of three elements: row sums of a (3, 3) flipped both ways. */
    kiln_tensor *m = kiln_reshape(x, 2, (const int64_t[]){3, 3});
    fx_check_f32(kiln_sum(kiln_flip(kiln_flip(m, 0), 1), 1, (const int32_t[]){1}, false),
                 (const float[]){21, 12, 3}, 3, 0, 0);
}

static void test_engine_reduce_empty(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *e = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){2, 0});
    /* Over no elements: sum 0, prod 1, mean 0 / 0 = NaN (as torch). */
    fx_check_f32(kiln_sum(e, 0, NULL, false), (const float[]){0}, 1, 0, 0);
    fx_check_f32(kiln_sum(e, 1, (const int32_t[]){1}, false), (const float[]){0, 0}, 2, 0, 0);
    fx_check_f32(kiln_prod(e, 1, (const int32_t[]){1}, false), (const float[]){1, 1}, 2, 0, 0);
    fx_check_f32(kiln_mean(e, 0, NULL, false), (const float[]){NAN}, 1, 0, 0);
    fx_check_f32(kiln_mean(e, 1, (const int32_t[]){1}, true), (const float[]){NAN, NAN}, 2, 0, 0);
    /* Reducing the non-empty dim of an empty tensor gives an empty result. */
    kiln_tensor *r = kiln_sum(e, 1, (const int32_t[]){0}, false);
    fx_assert_shape(r, 1, (const int64_t[]){0});
    fx_check_f32(r, NULL, 0, 0, 0);
    r = kiln_max(e, 1, (const int32_t[]){0}, false);
    fx_assert_shape(r, 1, (const int64_t[]){0});
    fx_check_f32(r, NULL, 0, 0, 0);
    /* The maximum over 0 elements is an error (no identity), and so is argmax. */
    assert_null(kiln_max(e, 0, NULL, false));
    fx_expect_error(ctx, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_min(e, 1, (const int32_t[]){1}, false));
    fx_expect_error(ctx, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_argmax(e, 1, false));
    fx_expect_error(ctx, KILN_ERROR_INVALID_ARGUMENT);
}

static void test_engine_reduce_more_than_65535_elements(void **state) {
    kiln_context *ctx = fx_ctx(state);
    /* Past lavapipe's 65535 loop iterations per invocation: the engine splits the reduction.
     * Every expected value is an exact small integer in f32. */
    enum { L = 70001 };
    kiln_tensor *r = kiln_arange(ctx, KILN_F32, 0, L, 1); /* 0 .. 70000 */
    fx_check_f32(kiln_max(r, 0, NULL, false), (const float[]){70000}, 1, 0, 0);
    fx_check_f32(kiln_min(kiln_flip(r, 0), 0, NULL, false), (const float[]){0}, 1, 0, 0);
    fx_check_f32(kiln_min(kiln_add_scalar(r, -35000), 0, NULL, false), (const float[]){-35000}, 1,
                 0, 0);
    fx_check_i64(kiln_argmax(kiln_flip(r, 0), 0, false), (const int64_t[]){0}, 1);
    fx_check_i64(kiln_argmax(r, 0, true), (const int64_t[]){70000}, 1);
    /* prod: ones except 2 at index 69999 and -3 at index 7 = -6. */
    kiln_tensor *i = kiln_arange(ctx, KILN_I32, 0, L, 1);
    kiln_tensor *one = kiln_scalar(ctx, KILN_F32, 1);
    kiln_tensor *x = kiln_mul(
        kiln_where(kiln_eq(i, kiln_scalar(ctx, KILN_I32, 69999)), kiln_scalar(ctx, KILN_F32, 2),
                   one),
        kiln_where(kiln_eq(i, kiln_scalar(ctx, KILN_I32, 7)), kiln_scalar(ctx, KILN_F32, -3), one));
    fx_check_f32(kiln_prod(x, 0, NULL, false), (const float[]){-6}, 1, 0, 0);
    /* Over dims (0, 2) of (2, 3, 40000) = 80000 elements per output, keepdim: row j holds j + 1,
     * so the sums are 80000 (j + 1); the mean is j + 1. */
    kiln_tensor *w = kiln_mul(kiln_ones(ctx, KILN_F32, 3, (const int64_t[]){2, 3, 40000}),
                              fx_f32(ctx, 2, (const int64_t[]){3, 1}, (const float[]){1, 2, 3}));
    kiln_tensor *s = kiln_sum(w, 2, (const int32_t[]){0, 2}, true);
    fx_assert_shape(s, 3, (const int64_t[]){1, 3, 1});
    fx_check_f32(s, (const float[]){80000, 160000, 240000}, 3, 0, 0);
    fx_check_f32(kiln_mean(w, 2, (const int32_t[]){2, 0}, false), (const float[]){1, 2, 3}, 3, 0,
                 1e-6);
    fx_check_f32(kiln_max(w, 2, (const int32_t[]){0, 2}, false), (const float[]){1, 2, 3}, 3, 0, 0);
}

static void test_engine_reduce_symbolic_size(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const kiln_expr *n = kiln_variable(ctx, "n", 1, 1000000);
    /* A sum over a symbolic size bound to 1000: exact. */
    const kiln_expr *small = kiln_bind(ctx, n, 1000);
    fx_check_f32(kiln_sum(kiln_full_sym(ctx, KILN_F32, 1, &small, 1.0), 0, NULL, false),
                 (const float[]){1000}, 1, 0, 0);
    /* Bound to 100000 (past lavapipe's 65535 loop iterations, and not split because the size is
     * not a constant): the right value, or KILN_ERROR_UNSUPPORTED, never a wrong value. */
    const kiln_expr *big = kiln_bind(ctx, n, 100000);
    kiln_tensor *x = fx_f32(ctx, 1, (const int64_t[]){3}, (const float[]){1, 2, 3});
    kiln_tensor *ok = kiln_mul(x, x);
    kiln_tensor *both[2] = {ok,
                            kiln_sum(kiln_full_sym(ctx, KILN_F32, 1, &big, 1.0), 0, NULL, false)};
    kiln_status st = kiln_realize_many(ctx, 2, both);
    float got = 0;
    if (st == KILN_OK) {
        fx_read(both[1], KILN_F32, &got, 1);
        assert_true(got == 100000.0f);
    } else {
        fx_expect_error(ctx, KILN_ERROR_UNSUPPORTED);
    }
    /* Either way the inputs and the other result read back right afterwards. */
    fx_check_f32(x, (const float[]){1, 2, 3}, 3, 0, 0);
    fx_check_f32(ok, (const float[]){1, 4, 9}, 3, 0, 0);
}

/* Few outputs over many elements run one workgroup of lanes per output, combined through
 * workgroup memory: sizes around the lane counts (8 on lavapipe, 64 on GPUs), constant and
 * symbolic, give exact results on integer-valued data. */
enum { CAP = 4099 };

static void check_lanes(kiln_context *ctx, size_t count, const int64_t *sizes) {
    static float data[3 * CAP];
    static int32_t idata[CAP];
    for (int i = 0; i < 3 * CAP; i++)
        data[i] = (float)((i * 7) % 13 - 6);
    for (int i = 0; i < CAP; i++)
        idata[i] = (i * 5) % 11 - 5;
    kiln_tensor *rows = fx_f32(ctx, 2, (const int64_t[]){3, CAP}, data);
    kiln_tensor *ints = fx_i32(ctx, 1, (const int64_t[]){CAP}, idata);
    const kiln_expr *n = kiln_variable(ctx, "len", 1, CAP);
    for (size_t c = 0; c < count; c++) {
        int64_t size = sizes[c];
        for (int symbolic = 0; symbolic < 2; symbolic++) {
            kiln_scope_begin(ctx);
            const kiln_expr *len = symbolic ? kiln_bind(ctx, n, size) : kiln_int(ctx, size);
            kiln_tensor *x = kiln_narrow_sym(rows, 1, kiln_int(ctx, 0), len);
            kiln_tensor *xi = kiln_narrow_sym(ints, 0, kiln_int(ctx, 0), len);
            float sum[3], max[3], min[3], mean[3], sign[3];
            int64_t isum = 0;
            for (int r = 0; r < 3; r++) {
                sum[r] = 0, max[r] = -INFINITY, min[r] = INFINITY, sign[r] = 1;
                for (int64_t i = 0; i < size; i++) {
                    float v = data[r * CAP + i];
                    sum[r] += v;
                    max[r] = v > max[r] ? v : max[r];
                    min[r] = v < min[r] ? v : min[r];
                    sign[r] *= v < 0 ? -1.0f : 1.0f;
                }
                mean[r] = sum[r] / (float)size;
            }
            for (int64_t i = 0; i < size; i++)
                isum += idata[i];
            const int32_t last = 1;
            fx_check_f32(kiln_sum(x, 1, &last, false), sum, 3, 0, 0);
            fx_check_f32(kiln_max(x, 1, &last, false), max, 3, 0, 0);
            fx_check_f32(kiln_min(x, 1, &last, false), min, 3, 0, 0);
            fx_check_f32(kiln_mean(x, 1, &last, false), mean, 3, 0, 1e-6);
            kiln_tensor *signs =
                kiln_where(kiln_lt(x, kiln_scalar(ctx, KILN_F32, 0)),
                           kiln_scalar(ctx, KILN_F32, -1), kiln_scalar(ctx, KILN_F32, 1));
            fx_check_f32(kiln_prod(signs, 1, &last, false), sign, 3, 0, 0);
            fx_check_i64(kiln_sum(xi, 0, NULL, false), &isum, 1);
            fx_check_f32(kiln_sum(kiln_narrow(x, 0, 1, 1), 0, NULL, false), &sum[1], 1, 0, 0);
            kiln_scope_end(ctx, 0, NULL);
        }
    }
}

static void test_engine_reduce_lanes_share_the_elements(void **state) {
    static const int64_t sizes[] = {1, 7, 8, 9, 33, 64, 257, 1000, CAP};
    check_lanes(fx_ctx(state), sizeof sizes / sizeof sizes[0], sizes);
}

/* The same with the lane counts other devices use (a GPU's 64) and the smallest (2), forced
 * through the test-only option. */
static void test_engine_reduce_other_lane_counts(void **state) {
    const eng_fixture *f = *state;
    for (uint32_t lanes = 2; lanes <= 64; lanes *= 32) {
        kiln_context_options opt = {.device = f->device ? NULL : "interp", .validation = f->device};
        kiln_context *ctx = NULL;
        assert_int_equal(
            eng_testing_context_create(&opt, &(eng_testing){.group_lanes = lanes}, &ctx), KILN_OK);
        static const int64_t sizes[] = {1, 3, 64, 129, CAP};
        check_lanes(ctx, sizeof sizes / sizeof sizes[0], sizes);
        assert_int_equal(kiln_context_status(ctx), KILN_OK);
        eng_fixture_context_destroy(ctx);
    }
}

/* A column sum over a symbolic number of rows (a batch Variable's, n x 4 of them) splits into
 * strips on CPU devices (ops.c strip_split: whole blocks of the constant factor, or rows padded
 * with zeros): right for every bound value, and one compile serves them all. */
static void test_engine_reduce_symbolic_rows_split(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const kiln_expr *n = kiln_variable(ctx, "strip_rows", 1, 512);
    const kiln_expr *m = kiln_variable(ctx, "strip_rows_flat", 1, 2048);
    uint64_t compiled = 0;
    const int64_t values[2] = {300, 7};
    for (int round = 0; round < 2; round++) {
        kiln_scope_begin(ctx);
        const kiln_expr *nb = kiln_bind(ctx, n, values[round]);
        const kiln_expr *shape[3] = {nb, kiln_int(ctx, 4), kiln_int(ctx, 64)};
        kiln_tensor *x = kiln_rand_sym(ctx, KILN_F32, 3, shape, 11);
        kiln_tensor *rows = kiln_reshape_sym(
            x, 2, (const kiln_expr *[]){kiln_expr_mul(ctx, nb, kiln_int(ctx, 4)), shape[2]});
        kiln_tensor *s = kiln_sum(rows, 1, (int32_t[]){0}, false);
        int64_t count = values[round] * 4 * 64;
        float *host = malloc((size_t)count * sizeof *host);
        assert_non_null(host);
        fx_read(x, KILN_F32, host, (size_t)count);
        float want[64];
        for (int j = 0; j < 64; j++) {
            double acc = 0;
            for (int64_t r = 0; r < values[round] * 4; r++)
                acc += host[r * 64 + j];
            want[j] = (float)acc;
        }
        fx_check_f32(s, want, 64, 1e-4, 1e-5);
        /* rows a Variable of their own (no constant factor): padded to P strips */
        const kiln_expr *mb = kiln_bind(ctx, m, values[round] * 4);
        kiln_tensor *y = kiln_rand_sym(ctx, KILN_F32, 2, (const kiln_expr *[]){mb, shape[2]}, 11);
        fx_check_f32(kiln_sum(y, 1, (int32_t[]){0}, false), want, 64, 1e-4, 1e-5);
        free(host);
        if (round == 0)
            compiled = kiln_context_stats(ctx).kernels_compiled;
        else
            assert_int_equal(kiln_context_stats(ctx).kernels_compiled, compiled);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_sum_axis_sets),
        ENG_TEST(test_engine_sum_of_views),
        ENG_TEST(test_engine_reduce_prod_max_min),
        ENG_TEST(test_engine_reduce_mean_var_std),
        ENG_TEST(test_engine_argmax_first_index),
        ENG_TEST(test_engine_softmax_matches_numpy),
        ENG_TEST(test_engine_matmul_shapes),
        ENG_TEST(test_engine_conv2d_stride_padding),
        ENG_TEST(test_engine_reduce_odd_sizes),
        ENG_TEST(test_engine_reduce_empty),
        ENG_TEST(test_engine_reduce_more_than_65535_elements),
        ENG_TEST(test_engine_reduce_symbolic_size),
        ENG_TEST(test_engine_reduce_lanes_share_the_elements),
        ENG_TEST(test_engine_reduce_other_lane_counts),
        ENG_TEST(test_engine_reduce_symbolic_rows_split),
    };
    return ENG_RUN_BOTH(tests);
}
