/* Graphs that mix ops, views and dtypes, on both backends: integer wrap-around, unsigned
 * arithmetic, reductions of views (padded, expanded, flipped), reductions of reductions,
 * realize_many with shared inputs, f16 compute, reads of views of realized results.
 * Tolerances: integer results and sums of small integers exact; transcendental f32 rtol 1e-5;
 * f16 results within one f16 ulp of the value worked out (stated per check). */
#include "engine_fixture.h"

#include <math.h>
#include <string.h>

static void test_engine_compose_integer_wraparound(void **state) {
    kiln_context *ctx = fx_ctx(state);
    /* i32 wraps as two's complement (as PyTorch's int32): INT32_MAX + 1 = INT32_MIN,
     * INT32_MIN - 1 = INT32_MAX, 65536 * 65536 = 0, -INT32_MIN = INT32_MIN. */
    kiln_tensor *a = fx_i32(ctx, 1, (const int64_t[]){4},
                            (const int32_t[]){INT32_MAX, INT32_MIN, 65536, INT32_MIN});
    kiln_tensor *b = fx_i32(ctx, 1, (const int64_t[]){4}, (const int32_t[]){1, -1, 65536, 0});
    fx_check_i32(kiln_add(kiln_narrow(a, 0, 0, 1), kiln_narrow(b, 0, 0, 1)),
                 (const int32_t[]){INT32_MIN}, 1);
    fx_check_i32(kiln_add(kiln_narrow(a, 0, 1, 1), kiln_narrow(b, 0, 1, 1)),
                 (const int32_t[]){INT32_MAX}, 1);
    fx_check_i32(kiln_mul(kiln_narrow(a, 0, 2, 1), kiln_narrow(b, 0, 2, 1)), (const int32_t[]){0},
                 1);
    fx_check_i32(kiln_neg(kiln_narrow(a, 0, 3, 1)), (const int32_t[]){INT32_MIN}, 1);
    /* A sum that passes INT32_MAX does not wrap: it is an i64 (as PyTorch's), 3 * 1e9. */
    kiln_tensor *big = kiln_full(ctx, KILN_I32, 1, (const int64_t[]){3}, 1e9);
    fx_check_i64(kiln_sum(big, 0, NULL, false), (const int64_t[]){3000000000}, 1);
    /* i8: 127 + 1 = -128; u8: 0 - 1 = 255. */
    kiln_tensor *c = kiln_from_data(ctx, KILN_I8, 1, (const int64_t[]){1}, (const int8_t[]){127});
    int8_t want8 = -128;
    fx_check_u8(kiln_add_scalar(c, 1), KILN_I8, (const uint8_t *)&want8, 1);
    kiln_tensor *u = kiln_from_data(ctx, KILN_U8, 1, (const int64_t[]){1}, (const uint8_t[]){0});
    fx_check_u8(kiln_sub(u, kiln_full(ctx, KILN_U8, 0, NULL, 1)), KILN_U8, (const uint8_t[]){255},
                1);
}

static void test_engine_compose_unsigned32(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const uint32_t av[3] = {0, 3000000000u, 7}, bv[3] = {1, 2000000000u, 7};
    kiln_tensor *a = kiln_from_data(ctx, KILN_U32, 1, (const int64_t[]){3}, av);
    kiln_tensor *b = kiln_from_data(ctx, KILN_U32, 1, (const int64_t[]){3}, bv);
    uint32_t got[3];
    /* 0 - 1 wraps to 4294967295; 3e9 + 2e9 wraps to 5e9 - 2^32 = 705032704. */
    fx_read(kiln_sub(a, b), KILN_U32, got, 3);
    assert_int_equal(got[0], 4294967295u);
    assert_int_equal(got[1], 1000000000u);
    assert_int_equal(got[2], 0);
    fx_read(kiln_add(a, b), KILN_U32, got, 3);
    assert_int_equal(got[1], 705032704u);
    /* Comparisons and max are unsigned: 3e9 > 2e9. */
    fx_check_u8(kiln_gt(a, b), KILN_BOOL, (const uint8_t[]){0, 1, 0}, 3);
    fx_read(kiln_max(a, 0, NULL, false), KILN_U32, got, 1);
    assert_int_equal(got[0], 3000000000u);
    fx_check_i64(kiln_argmax(a, 0, false), (const int64_t[]){1}, 1);
    /* To f32: 3e9 exactly; true division 3e9 / 2e9 = 1.5. */
    fx_check_f32(kiln_cast(a, KILN_F32), (const float[]){0, 3e9f, 7}, 3, 0, 0);
    fx_check_f32(kiln_div(a, b), (const float[]){0, 1.5f, 1}, 3, 0, 1e-6);
}

static void test_engine_compose_reduce_views(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){2, 2}, (const float[]){-1, -2, -3, -4});
    /* Padding counts as zeros: max over a padded row of negatives is 0 (as F.pad then max). */
    kiln_tensor *p = kiln_pad(x, (const int64_t[]){0, 0, 1, 1});
    fx_check_f32(kiln_max(p, 1, (const int32_t[]){1}, false), (const float[]){0, 0}, 2, 0, 0);
    fx_check_f32(kiln_sum(p, 0, NULL, false), (const float[]){-10}, 1, 0, 0);
    fx_check_f32(kiln_min(p, 1, (const int32_t[]){0}, false), (const float[]){0, -3, -4, 0}, 4, 0,
                 0);
    /* A sum over an expanded scalar: 2 * 3 * 4 = 24 (nothing is materialised). */
    kiln_tensor *e = kiln_expand(kiln_scalar(ctx, KILN_F32, 2), 2, (const int64_t[]){3, 4});
    fx_check_f32(kiln_sum(e, 0, NULL, false), (const float[]){24}, 1, 0, 0);
    /* Softmax over dim 0 of a transposed, flipped view: each column of x^T flipped holds a row of
     * x reversed; softmax(-2, -1) = (1/(1+e), e/(1+e)) = (0.26894142, 0.73105858). */
    kiln_tensor *t = kiln_flip(kiln_transpose(x, 0, 1), 0);
    /* t = {{-2, -4}, {-1, -3}}: softmax over dim 0 per column = (e^-2, e^-1) normalised. */
    fx_check_f32(kiln_softmax(t, 0),
                 (const float[]){0.268941421f, 0.268941421f, 0.731058579f, 0.731058579f}, 4, 1e-6,
                 1e-5);
    /* Softmax over a dim of size 1 is 1. */
    fx_check_f32(kiln_softmax(kiln_unsqueeze(x, 2), 2), (const float[]){1, 1, 1, 1}, 4, 0, 0);
}

static void test_engine_compose_reduce_of_reduce(void **state) {
    kiln_context *ctx = fx_ctx(state);
    float v[12];
    for (int i = 0; i < 12; i++)
        v[i] = (float)((i * 7) % 12) - 5; /* 0 7 2 9 4 11 6 1 8 3 10 5, minus 5 */
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){3, 4}, v);
    /* Row maxima: {9, 11, 10} - 5 = {4, 6, 5}; their sum 15; the sum of the row minima
     * {0, 1, 3} - 5 = -11. */
    kiln_tensor *m = kiln_max(x, 1, (const int32_t[]){1}, false);
    fx_check_f32(kiln_sum(m, 0, NULL, false), (const float[]){15}, 1, 0, 0);
    fx_check_f32(kiln_sum(kiln_min(x, 1, (const int32_t[]){1}, true), 0, NULL, false),
                 (const float[]){-11}, 1, 0, 0);
    /* x - mean(x, 1) has row sums 0; centred values of row 0: {0,7,2,9} - 4.5. */
    kiln_tensor *c = kiln_sub(x, kiln_mean(x, 1, (const int32_t[]){1}, true));
    fx_check_f32(kiln_sum(c, 1, (const int32_t[]){1}, false), (const float[]){0, 0, 0}, 3, 1e-5, 0);
    fx_check_f32(kiln_narrow(kiln_select(c, 0, 0), 0, 0, 4),
                 (const float[]){-4.5f, 2.5f, -2.5f, 4.5f}, 4, 0, 1e-6);
}

static void test_engine_compose_realize_many_and_views_of_results(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){2, 3}, (const float[]){1, 2, 3, 4, 5, 6});
    kiln_tensor *y = kiln_mul_scalar(x, 2);
    kiln_tensor *s = kiln_sum(y, 1, (const int32_t[]){1}, false);
    kiln_tensor *outs[2] = {y, s};
    assert_int_equal(kiln_realize_many(ctx, 2, outs), KILN_OK);
    /* Views of the realized y read through a copy: y^T and y[:, ::-2]. */
    fx_check_f32(kiln_transpose(y, 0, 1), (const float[]){2, 8, 4, 10, 6, 12}, 6, 0, 0);
    fx_check_f32(kiln_slice(y, 1, INT64_MAX, INT64_MIN, -2), (const float[]){6, 2, 12, 8}, 4, 0, 0);
    fx_check_f32(s, (const float[]){12, 30}, 2, 0, 0);
    /* A result used after it was realized, in a new graph. */
    fx_check_f32(kiln_sub(s, kiln_narrow(kiln_select(y, 1, 0), 0, 0, 2)), (const float[]){10, 22},
                 2, 0, 0);
    assert_int_equal(kiln_realize_many(ctx, 0, NULL), KILN_OK);
}

static void test_engine_compose_f16_compute(void **state) {
    kiln_context *ctx = fx_ctx(state);
    /* Half bits: 0.5 = 0x3800, 1 = 0x3C00, 2 = 0x4000, 1024 = 0x6400. */
    kiln_tensor *h = kiln_from_data(ctx, KILN_F16, 1, (const int64_t[]){4},
                                    (const uint16_t[]){0x3800, 0x3C00, 0x4000, 0x6400});
    /* The sum accumulates in f32 and rounds once: 1027.5 is not an f16 (spacing 1 in
     * [1024, 2048)): 1027.5 rounds to even, 1028 = 0x6404. */
    uint16_t got[4];
    fx_read(kiln_sum(h, 0, NULL, false), KILN_F16, got, 1);
    assert_int_equal(got[0], 0x6404);
    /* The mean, in f32 then rounded to f16: 1027.5 / 4 = 256.875, halfway between the f16
     * neighbours 256.75 (0x5C03) and 257 (0x5C04) (spacing 0.25 in [256, 512)). Ties to even
     * gives 0x5C04; Vulkan leaves the f32 -> f16 rounding mode to the device: either is fine. */
    fx_read(kiln_mean(h, 0, NULL, false), KILN_F16, got, 1);
    assert_true(got[0] == 0x5C03 || got[0] == 0x5C04);
    /* exp of f16 stays f16: exp(0.5) = 1.6487 -> 0x3E98 (1.6484) or 0x3E99 (1.6494). */
    fx_read(kiln_exp(kiln_narrow(h, 0, 0, 1)), KILN_F16, got, 1);
    assert_true(got[0] == 0x3E98 || got[0] == 0x3E99);
    /* f16 max stays f16. */
    fx_read(kiln_max(h, 0, NULL, false), KILN_F16, got, 1);
    assert_int_equal(got[0], 0x6400);
}

static void test_engine_compose_scalar_ops_values(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 1, (const int64_t[]){3}, (const float[]){-1, 0, 2.5f});
    fx_check_f32(kiln_add_scalar(x, -0.5), (const float[]){-1.5f, -0.5f, 2}, 3, 0, 0);
    fx_check_f32(kiln_mul_scalar(x, -4), (const float[]){4, -0.0f, -10}, 3, 0, 0);
    /* pow with special exponents: x^0 = 1 (0^0 too), x^1 = x, 0^-1 = inf. */
    fx_check_f32(kiln_pow(x, kiln_scalar(ctx, KILN_F32, 0)), (const float[]){1, 1, 1}, 3, 0, 0);
    fx_check_f32(kiln_pow(x, kiln_scalar(ctx, KILN_F32, 2)), (const float[]){1, 0, 6.25f}, 3, 0,
                 1e-5);
    /* where with scalars on both sides and a comparison of a view. */
    fx_check_f32(kiln_where(kiln_gt(kiln_flip(x, 0), kiln_scalar(ctx, KILN_F32, 0)),
                            kiln_scalar(ctx, KILN_F32, 1), kiln_scalar(ctx, KILN_F32, -1)),
                 (const float[]){1, -1, -1}, 3, 0, 0);
}

static void test_engine_compose_more_inputs_than_a_kernel_binds(void **state) {
    kiln_context *ctx = fx_ctx(state);
    /* 20 and 40 distinct stored inputs added up (a kernel binds at most 15): element 0 sums
     * 0 .. n-1 = n (n - 1) / 2, element 1 counts the inputs. A sum of the 40 is reduced too. */
    kiln_tensor *acc = NULL, *acc20 = NULL;
    for (int i = 0; i < 40; i++) {
        kiln_tensor *t = fx_f32(ctx, 1, (const int64_t[]){2}, (const float[]){(float)i, 1});
        acc = acc ? kiln_add(acc, t) : t;
        if (i == 19)
            acc20 = acc;
    }
    fx_check_f32(acc20, (const float[]){190, 20}, 2, 0, 0);
    fx_check_f32(acc, (const float[]){780, 40}, 2, 0, 0);
    fx_check_f32(kiln_sum(kiln_mul(acc, acc), 0, NULL, false), (const float[]){780 * 780 + 1600}, 1,
                 0, 0);
}

static void test_engine_compose_small_types(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const int64_t s[] = {4};
    kiln_tensor *b = kiln_from_data(ctx, KILN_BOOL, 1, s, (const uint8_t[]){0, 1, 1, 0});
    kiln_tensor *u = kiln_from_data(ctx, KILN_U8, 1, s, (const uint8_t[]){0, 1, 200, 255});
    const int8_t iv[4] = {-128, -1, 5, 127};
    kiln_tensor *i8 = kiln_from_data(ctx, KILN_I8, 1, s, iv);
    /* Bool reductions: any / all, the first true, a product of bools is an i64 0 or 1. */
    fx_check_u8(kiln_max(b, 0, NULL, false), KILN_BOOL, (const uint8_t[]){1}, 1);
    fx_check_u8(kiln_min(b, 0, NULL, false), KILN_BOOL, (const uint8_t[]){0}, 1);
    fx_check_i64(kiln_argmax(b, 0, false), (const int64_t[]){1}, 1);
    fx_check_i64(kiln_prod(b, 0, NULL, false), (const int64_t[]){0}, 1);
    /* Negation wraps: -u8 = 256 - x; abs(-128) = -128 in i8 (as torch). */
    fx_check_u8(kiln_neg(u), KILN_U8, (const uint8_t[]){0, 255, 56, 1}, 4);
    const int8_t abs8[4] = {-128, 1, 5, 127};
    fx_check_u8(kiln_abs(i8), KILN_I8, (const uint8_t *)abs8, 4);
    /* Reductions of i8: the sum in i64 (-128 - 1 + 5 + 127 = 3), max and argmax in i8 order. */
    fx_check_i64(kiln_sum(i8, 0, NULL, false), (const int64_t[]){3}, 1);
    const int8_t max8 = 127;
    fx_check_u8(kiln_max(i8, 0, NULL, false), KILN_I8, (const uint8_t *)&max8, 1);
    fx_check_i64(kiln_argmax(i8, 0, false), (const int64_t[]){3}, 1);
    /* u8 * i8 is i32: {0, -1, 1000, 32385}; their dot product 33384 (an i32 matmul). */
    fx_check_i32(kiln_mul(u, i8), (const int32_t[]){0, -1, 1000, 32385}, 4);
    fx_check_i32(kiln_matmul(kiln_cast(u, KILN_I32), kiln_cast(i8, KILN_I32)),
                 (const int32_t[]){33384}, 1);
    /* A u8 condition is nonzero-is-true. */
    kiln_tensor *f = fx_f32(ctx, 1, s, (const float[]){1, 2.5f, -1, 0.5f});
    fx_check_f32(kiln_where(u, f, kiln_scalar(ctx, KILN_F32, 9)),
                 (const float[]){9, 2.5f, -1, 0.5f}, 4, 0, 0);
    /* f16 variance {1, 2, -1, 0.5}: mean 0.625, squared deviations 4.6875, / 3 = 1.5625 (0x3E40,
     * exact in f16); f16 == f32 compares values. */
    kiln_tensor *h =
        kiln_from_data(ctx, KILN_F16, 1, s, (const uint16_t[]){0x3C00, 0x4000, 0xBC00, 0x3800});
    uint16_t got;
    fx_read(kiln_var(h, 0, NULL, 1, false), KILN_F16, &got, 1);
    assert_int_equal(got, 0x3E40);
    fx_check_u8(kiln_eq(h, f), KILN_BOOL, (const uint8_t[]){1, 0, 1, 1}, 4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_compose_integer_wraparound),
        ENG_TEST(test_engine_compose_unsigned32),
        ENG_TEST(test_engine_compose_reduce_views),
        ENG_TEST(test_engine_compose_reduce_of_reduce),
        ENG_TEST(test_engine_compose_realize_many_and_views_of_results),
        ENG_TEST(test_engine_compose_f16_compute),
        ENG_TEST(test_engine_compose_scalar_ops_values),
        ENG_TEST(test_engine_compose_more_inputs_than_a_kernel_binds),
        ENG_TEST(test_engine_compose_small_types),
    };
    return ENG_RUN_BOTH(tests);
}
