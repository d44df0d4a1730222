/* Creation ops on both backends: from_data for every dtype, empty, zeros/ones/full/scalar,
 * arange (negative and fractional steps), rand/randn (same seed: same numbers on the device and
 * in the interpreter; values in range; mean and std roughly right), and numel-0 tensors.
 * Tolerances: stored data and integer-valued results exact; fractional arange steps rtol 1e-6
 * (start + i * step in f32); uniform rand device vs interpreter exact (Philox: integer rounds,
 * one exact conversion; test_rand.c checks the generator itself); randn device vs interpreter atol
 * 2e-3 (its Box-Muller cos has the device's 2^-11 absolute error); sample statistics as commented.
 */
#include "engine_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_engine_from_data_every_dtype(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const int64_t s[] = {2, 2};
    fx_check_f32(fx_f32(ctx, 2, s, (const float[]){1.5f, -0.0f, INFINITY, -3e38f}),
                 (const float[]){1.5f, -0.0f, INFINITY, -3e38f}, 4, 0, 0);
    fx_check_i32(fx_i32(ctx, 2, s, (const int32_t[]){INT32_MIN, -1, 0, INT32_MAX}),
                 (const int32_t[]){INT32_MIN, -1, 0, INT32_MAX}, 4);
    uint32_t u32[4] = {0, 1, 0x80000000u, 0xffffffffu}, got32[4];
    fx_read(kiln_from_data(ctx, KILN_U32, 2, s, u32), KILN_U32, got32, 4);
    assert_memory_equal(got32, u32, sizeof u32);
    int8_t i8[4] = {-128, -1, 0, 127};
    fx_check_u8(kiln_from_data(ctx, KILN_I8, 2, s, i8), KILN_I8, (const uint8_t *)i8, 4);
    fx_check_u8(kiln_from_data(ctx, KILN_U8, 2, s, (const uint8_t[]){0, 1, 128, 255}), KILN_U8,
                (const uint8_t[]){0, 1, 128, 255}, 4);
    fx_check_u8(kiln_from_data(ctx, KILN_BOOL, 2, s, (const uint8_t[]){1, 0, 0, 1}), KILN_BOOL,
                (const uint8_t[]){1, 0, 0, 1}, 4);
    uint16_t h[4] = {0x3C00, 0xC000, 0x7C00, 0x0001}, goth[4]; /* 1, -2, inf, smallest subnormal */
    fx_read(kiln_from_data(ctx, KILN_F16, 2, s, h), KILN_F16, goth, 4);
    assert_memory_equal(goth, h, sizeof h);
    /* The data is copied: changing the caller's array afterwards changes nothing. */
    float data[3] = {1, 2, 3};
    kiln_tensor *t = fx_f32(ctx, 1, (const int64_t[]){3}, data);
    data[0] = 99;
    fx_check_f32(t, (const float[]){1, 2, 3}, 3, 0, 0);
    /* 0-d from data. */
    kiln_tensor *z = fx_f32(ctx, 0, NULL, (const float[]){4.25f});
    assert_int_equal(kiln_tensor_ndim(z), 0);
    fx_check_f32(z, (const float[]){4.25f}, 1, 0, 0);
}

static void test_engine_full_zeros_ones_scalar(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const int64_t s[] = {2, 3};
    fx_check_f32(kiln_zeros(ctx, KILN_F32, 2, s), (const float[]){0, 0, 0, 0, 0, 0}, 6, 0, 0);
    fx_check_f32(kiln_ones(ctx, KILN_F32, 2, s), (const float[]){1, 1, 1, 1, 1, 1}, 6, 0, 0);
    fx_check_f32(kiln_full(ctx, KILN_F32, 2, s, -2.5),
                 (const float[]){-2.5f, -2.5f, -2.5f, -2.5f, -2.5f, -2.5f}, 6, 0, 0);
    fx_check_i32(kiln_full(ctx, KILN_I32, 1, (const int64_t[]){3}, -7),
                 (const int32_t[]){-7, -7, -7}, 3);
    fx_check_i32(kiln_ones(ctx, KILN_I32, 1, (const int64_t[]){2}), (const int32_t[]){1, 1}, 2);
    fx_check_u8(kiln_ones(ctx, KILN_BOOL, 1, (const int64_t[]){2}), KILN_BOOL,
                (const uint8_t[]){1, 1}, 2);
    fx_check_u8(kiln_full(ctx, KILN_U8, 1, (const int64_t[]){2}, 200), KILN_U8,
                (const uint8_t[]){200, 200}, 2);
    kiln_tensor *sc = kiln_scalar(ctx, KILN_F32, 0.125);
    assert_int_equal(kiln_tensor_ndim(sc), 0);
    fx_check_f32(sc, (const float[]){0.125f}, 1, 0, 0);
    /* kiln_empty: the shape and dtype, contents unspecified but readable. */
    kiln_tensor *e = kiln_empty(ctx, KILN_I32, 2, s);
    fx_assert_shape(e, 2, s);
    int32_t junk[6];
    fx_read(e, KILN_I32, junk, 6);
}

static void test_engine_arange_steps(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = kiln_arange(ctx, KILN_F32, 0, 5, 1);
    fx_assert_shape(a, 1, (const int64_t[]){5});
    fx_check_f32(a, (const float[]){0, 1, 2, 3, 4}, 5, 0, 0);
    /* Negative step: [5, 0) by -2 = {5, 3, 1} (ceil(-5 / -2) = 3 elements). */
    a = kiln_arange(ctx, KILN_F32, 5, 0, -2);
    fx_assert_shape(a, 1, (const int64_t[]){3});
    fx_check_f32(a, (const float[]){5, 3, 1}, 3, 0, 0);
    /* Fractional step: [0, 1) by 0.25 = 4 elements; [1, 2) by 0.3 = ceil(3.33) = 4. */
    fx_check_f32(kiln_arange(ctx, KILN_F32, 0, 1, 0.25), (const float[]){0, 0.25f, 0.5f, 0.75f}, 4,
                 0, 0);
    a = kiln_arange(ctx, KILN_F32, 1, 2, 0.3);
    fx_assert_shape(a, 1, (const int64_t[]){4});
    fx_check_f32(a, (const float[]){1, 1.3f, 1.6f, 1.9f}, 4, 0, 1e-6);
    /* Integers, negative start and step. */
    fx_check_i32(kiln_arange(ctx, KILN_I32, -3, 3, 2), (const int32_t[]){-3, -1, 1}, 3);
    fx_check_i32(kiln_arange(ctx, KILN_I32, 2, -7, -3), (const int32_t[]){2, -1, -4}, 3);
    /* An integer arange with a fractional step is computed in floating point and truncated
     * (as torch.arange(0, 5, 1.5, dtype=torch.int32)): 0, 1.5, 3, 4.5 -> {0, 1, 3, 4}. */
    fx_check_i32(kiln_arange(ctx, KILN_I32, 0, 5, 1.5), (const int32_t[]){0, 1, 3, 4}, 4);
    fx_check_u8(kiln_arange(ctx, KILN_U8, 0.5, 3, 1), KILN_U8, (const uint8_t[]){0, 1, 2}, 3);
    /* Empty ranges: start == stop, or a step of the wrong sign. */
    a = kiln_arange(ctx, KILN_F32, 3, 3, 1);
    fx_assert_shape(a, 1, (const int64_t[]){0});
    fx_check_f32(a, NULL, 0, 0, 0);
    a = kiln_arange(ctx, KILN_I32, 0, 5, -1);
    fx_assert_shape(a, 1, (const int64_t[]){0});
    fx_check_i32(a, NULL, 0);
}

enum { RN = 20000 };

/* Reads kiln_rand or kiln_randn (normal) of RN elements with seed in a context of backend. */
static void read_random(bool device, bool normal, uint64_t seed, float *out) {
    kiln_context *ctx = eng_context_new(device);
    assert_non_null(ctx);
    const int64_t s[] = {100, RN / 100};
    kiln_tensor *t =
        normal ? kiln_randn(ctx, KILN_F32, 2, s, seed) : kiln_rand(ctx, KILN_F32, 2, s, seed);
    fx_read(t, KILN_F32, out, RN);
    eng_fixture_context_destroy(ctx);
}

static void test_engine_rand_same_seed_same_numbers(void **state) {
    eng_fixture *f = *state;
    float *a = malloc(RN * sizeof *a), *b = malloc(RN * sizeof *b), *c = malloc(RN * sizeof *c);
    assert_true(a && b && c);
    /* This backend and the other one, same seed: identical; another seed: different. */
    read_random(f->device, false, 42, a);
    read_random(!f->device, false, 42, b);
    read_random(f->device, false, 43, c);
    assert_memory_equal(a, b, RN * sizeof *a);
    int same = 0;
    double sum = 0, sq = 0;
    for (int i = 0; i < RN; i++) {
        same += a[i] == c[i];
        assert_true(a[i] >= 0.0f && a[i] < 1.0f);
        sum += a[i];
        sq += (double)a[i] * a[i];
    }
    assert_true(same < RN / 100);
    /* Uniform [0, 1): mean 1/2, std 1/sqrt(12) = 0.2887. With 20000 samples the mean's standard
     * error is 0.002: allow 0.01; the std within 0.01. */
    double mean = sum / RN, sd = sqrt(sq / RN - mean * mean);
    assert_true(fabs(mean - 0.5) < 0.01);
    assert_true(fabs(sd - 0.288675) < 0.01);
    /* randn: N(0, 1); device and interpreter agree within the device cos error. */
    read_random(f->device, true, 7, a);
    read_random(!f->device, true, 7, b);
    sum = sq = 0;
    for (int i = 0; i < RN; i++) {
        if (!(fabs((double)a[i] - (double)b[i]) <= 2e-3 * (1 + fabs((double)b[i]))))
            fail_msg("randn element %d: %.9g here, %.9g on the other backend", i, a[i], b[i]);
        assert_true(isfinite(a[i]));
        sum += a[i];
        sq += (double)a[i] * a[i];
    }
    mean = sum / RN;
    sd = sqrt(sq / RN - mean * mean);
    /* Standard error of the mean 0.007, of the std 0.005: allow 0.03 each. */
    assert_true(fabs(mean) < 0.03);
    assert_true(fabs(sd - 1.0) < 0.03);
    free(a);
    free(b);
    free(c);
}

static void test_engine_empty_tensors(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const int64_t s[] = {0, 4};
    kiln_tensor *e = kiln_from_data(ctx, KILN_F32, 2, s, NULL);
    /* No data is needed for no elements. */
    fx_assert_shape(e, 2, s);
    int64_t numel = -1;
    assert_int_equal(kiln_tensor_numel(e, &numel), KILN_OK);
    assert_int_equal(numel, 0);
    fx_check_f32(kiln_exp(e), NULL, 0, 0, 0);
    fx_check_f32(kiln_zeros(ctx, KILN_F32, 1, (const int64_t[]){0}), NULL, 0, 0, 0);
    fx_check_f32(kiln_rand(ctx, KILN_F32, 2, (const int64_t[]){3, 0}, 1), NULL, 0, 0, 0);
    /* A (0, 4) @ (4, 2) matmul is (0, 2); (2, 0) @ (0, 3) is zeros (2, 3). */
    kiln_tensor *m = kiln_matmul(e, kiln_ones(ctx, KILN_F32, 2, (const int64_t[]){4, 2}));
    fx_assert_shape(m, 2, (const int64_t[]){0, 2});
    fx_check_f32(m, NULL, 0, 0, 0);
    m = kiln_matmul(kiln_ones(ctx, KILN_F32, 2, (const int64_t[]){2, 0}),
                    kiln_ones(ctx, KILN_F32, 2, (const int64_t[]){0, 3}));
    fx_assert_shape(m, 2, (const int64_t[]){2, 3});
    fx_check_f32(m, (const float[]){0, 0, 0, 0, 0, 0}, 6, 0, 0);
    /* Reading 0 elements into a NULL buffer is fine. */
    assert_int_equal(kiln_read(e, NULL, 0), KILN_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_from_data_every_dtype),
        ENG_TEST(test_engine_full_zeros_ones_scalar),
        ENG_TEST(test_engine_arange_steps),
        ENG_TEST(test_engine_rand_same_seed_same_numbers),
        ENG_TEST(test_engine_empty_tensors),
    };
    return ENG_RUN_BOTH(tests);
}
