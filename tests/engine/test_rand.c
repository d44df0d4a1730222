/* kiln_rand's generator, Philox4x32-10, on both backends: a reference written here (64-bit
 * multiplies, the paper's round function) checked against Random123's published known-answer
 * vectors, then kiln_rand element for element against it (bit-exact: integer rounds and one
 * exact conversion); the seed as a kernel parameter (a new seed compiles nothing; the same seed
 * gives the same numbers, its high 32 bits count); randn's statistics; kiln_dropout (the
 * zeroed fraction near p, the others scaled exactly, the mask kiln_rand's, its gradient the
 * mask over 1 - p through autograd, its errors).
 * Tolerances: rand exact; randn against the reference Box-Muller 2e-3 absolute (the device's
 * cos and log); sample statistics as commented. */
#include "engine_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the reference ----------------------------------------------------------------------------
 */

/* Philox4x32-10 (Salmon et al., SC 2011, and Random123's philox.h): ten rounds of
 * (c0, c1, c2, c3) -> (hi(M1 c2) ^ c1 ^ k0, lo(M1 c2), hi(M0 c0) ^ c3 ^ k1, lo(M0 c0)), the key
 * bumped by the Weyl constants between rounds. */
static void ref_philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]}, k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
        uint32_t n[4] = {(uint32_t)(p1 >> 32) ^ c[1] ^ k0, (uint32_t)p1,
                         (uint32_t)(p0 >> 32) ^ c[3] ^ k1, (uint32_t)p0};
        memcpy(c, n, sizeof c);
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    memcpy(out, c, sizeof c);
}

/* kiln_rand's element i with seed: word 0 of the block at counter (i, 0, 0, 0), key the seed. */
static uint32_t ref_word(uint64_t seed, uint64_t i, int word) {
    uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), 0, 0}, out[4];
    ref_philox(ctr, (const uint32_t[]){(uint32_t)seed, (uint32_t)(seed >> 32)}, out);
    return out[word];
}

static float ref_uniform(uint64_t seed, uint64_t i, int word) {
    return (float)(ref_word(seed, i, word) >> 8) * 0x1p-24f;
}

static void test_engine_rand_reference_matches_known_answers(void **state) {
    (void)state;
    /* Random123 1.14, examples/kat_vectors: "philox4x32 10" counter, key, expected. */
    static const struct {
        uint32_t ctr[4], key[2], want[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t t = 0; t < sizeof kat / sizeof kat[0]; t++) {
        uint32_t got[4];
        ref_philox(kat[t].ctr, kat[t].key, got);
        for (int w = 0; w < 4; w++) {
            if (got[w] != kat[t].want[w])
                fail_msg("vector %zu word %d: 0x%08x, want 0x%08x", t, w, got[w], kat[t].want[w]);
        }
    }
}

/* ---- kiln_rand against the reference ----------------------------------------------------------
 */

static void check_rand(kiln_context *ctx, uint64_t seed, uint32_t ndim, const int64_t *shape,
                       size_t n) {
    float *got = malloc(n * sizeof *got);
    assert_non_null(got);
    fx_read(kiln_rand(ctx, KILN_F32, ndim, shape, seed), KILN_F32, got, n);
    for (size_t i = 0; i < n; i++) {
        float want = ref_uniform(seed, i, 0);
        if (memcmp(&got[i], &want, sizeof want) != 0)
            fail_msg("seed 0x%llx element %zu: %.9g, Philox gives %.9g", (unsigned long long)seed,
                     i, got[i], want);
    }
    free(got);
}

static void test_engine_rand_is_philox_bit_for_bit(void **state) {
    kiln_context *ctx = fx_ctx(state);
    /* Element 0 of seed 0 is word 0 of the first known-answer vector: 0x6627e8d5 >> 8. */
    float first;
    fx_read(kiln_rand(ctx, KILN_F32, 1, (const int64_t[]){1}, 0), KILN_F32, &first, 1);
    assert_true(first == (float)(0x6627e8d5u >> 8) * 0x1p-24f);
    check_rand(ctx, 0, 1, (const int64_t[]){1000}, 1000);
    check_rand(ctx, 0x299f31d0a4093822ull, 2, (const int64_t[]){37, 129}, 37 * 129);
    check_rand(ctx, UINT64_MAX, 3, (const int64_t[]){4, 5, 6}, 120);
    /* A size Variable that may pass 2^31 makes an i64 kernel (the counter's high word computed,
     * 0 here): the same numbers. */
    const kiln_expr *n = kiln_bind(ctx, kiln_variable(ctx, "n", 1, 1ll << 40), 300);
    float wide[300];
    kiln_tensor *w = kiln_rand_sym(ctx, KILN_F32, 1, &n, 99);
    if (!fx_unsupported_i64(w)) { /* that kernel's 64-bit indices need shaderInt64 */
        fx_read(w, KILN_F32, wide, 300);
        for (int i = 0; i < 300; i++) {
            if (wide[i] != ref_uniform(99, (uint64_t)i, 0))
                fail_msg("i64 kernel element %d: %.9g, want %.9g", i, wide[i],
                         ref_uniform(99, i, 0));
        }
    }
    /* Fused with other ops and read through a view, each element keeps its flat index. */
    kiln_tensor *r = kiln_rand(ctx, KILN_F32, 2, (const int64_t[]){8, 16}, 42);
    float got[128];
    fx_read(kiln_add_scalar(kiln_transpose(r, 0, 1), 1.0), KILN_F32, got, 128);
    for (int i = 0; i < 16; i++) {
        for (int j = 0; j < 8; j++) {
            float want = ref_uniform(42, (uint64_t)j * 16 + (uint64_t)i, 0) + 1.0f;
            if (got[i * 8 + j] != want)
                fail_msg("transposed (%d, %d): %.9g, want %.9g", i, j, got[i * 8 + j], want);
        }
    }
}

/* randn: Box-Muller of words 0 and 1, sqrt(-2 ln(1 - u1)) cos(2 pi u2), as f32 on the device:
 * its log and cos are the device's, so agreement within 2e-3 absolute (times 1 + |x|). */
static void test_engine_randn_is_box_muller_of_philox(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { N = 4096 };
    float *got = malloc(N * sizeof *got);
    assert_non_null(got);
    fx_read(kiln_randn(ctx, KILN_F32, 2, (const int64_t[]){64, 64}, 1234), KILN_F32, got, N);
    double sum = 0, sq = 0;
    int within = 0;
    for (int i = 0; i < N; i++) {
        double u1 = ref_uniform(1234, (uint64_t)i, 0), u2 = ref_uniform(1234, (uint64_t)i, 1);
        double want = sqrt(-2 * log(1 - u1)) * cos(6.283185307179586 * u2);
        if (!(fabs(got[i] - want) <= 2e-3 * (1 + fabs(want))))
            fail_msg("randn element %d: %.9g, Box-Muller of Philox gives %.9g", i, got[i], want);
        sum += got[i];
        sq += (double)got[i] * got[i];
        within += fabs(got[i]) < 1;
    }
    /* N(0, 1) from 4096 samples: the mean's standard error 0.016, the variance's 0.022: allow
     * 0.06 and 0.09; P(|x| < 1) = 0.6827, its standard error 0.0073: allow 0.03. */
    double mean = sum / N, var = sq / N - mean * mean;
    assert_true(fabs(mean) < 0.06);
    assert_true(fabs(var - 1) < 0.09);
    assert_true(fabs((double)within / N - 0.6827) < 0.03);
    free(got);
}

/* ---- the seed as a parameter ------------------------------------------------------------------
 */

static uint64_t compiled(kiln_context *ctx) {
    kiln_stats s = kiln_context_stats(ctx);
    return s.kernels_compiled + s.disk_hits;
}

static void test_engine_rand_seed_is_a_kernel_parameter(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const int64_t shape[] = {32, 48};
    enum { N = 32 * 48 };
    static float a[N], b[N], c[N], d[N];
    uint64_t before = compiled(ctx);
    fx_read(kiln_randn(ctx, KILN_F32, 2, shape, 1), KILN_F32, a, N);
    uint64_t first = compiled(ctx) - before;
    assert_true(first >= 1);
    /* Another seed, and one differing only in its high 32 bits: the same kernel, no code. */
    kiln_stats s0 = kiln_context_stats(ctx);
    fx_read(kiln_randn(ctx, KILN_F32, 2, shape, 2), KILN_F32, b, N);
    fx_read(kiln_randn(ctx, KILN_F32, 2, shape, 1 + (1ull << 32)), KILN_F32, c, N);
    fx_read(kiln_randn(ctx, KILN_F32, 2, shape, 1), KILN_F32, d, N);
    kiln_stats s1 = kiln_context_stats(ctx);
    assert_int_equal(s1.kernels_compiled - s0.kernels_compiled, 0);
    assert_int_equal(s1.disk_hits - s0.disk_hits, 0);
    assert_int_equal(s1.kernels_cached - s0.kernels_cached, 3 * first);
    int same_b = 0, same_c = 0;
    for (int i = 0; i < N; i++) {
        same_b += a[i] == b[i];
        same_c += a[i] == c[i];
    }
    assert_true(same_b < N / 100);
    assert_true(same_c < N / 100);
    assert_memory_equal(a, d, sizeof a); /* the same seed, the same numbers */
    /* A training loop: dropout with a new seed each step compiles nothing after the first. */
    kiln_tensor *x = kiln_ones(ctx, KILN_F32, 2, shape);
    fx_read(kiln_dropout(x, 0.25, 100), KILN_F32, a, N);
    s0 = kiln_context_stats(ctx);
    for (uint64_t step = 101; step < 105; step++)
        fx_read(kiln_dropout(x, 0.25, step), KILN_F32, b, N);
    s1 = kiln_context_stats(ctx);
    assert_int_equal(s1.kernels_compiled - s0.kernels_compiled, 0);
    assert_int_equal(s1.disk_hits - s0.disk_hits, 0);
    assert_memory_not_equal(a, b, sizeof a);
}

/* Two seeds in one kernel: each its own parameters (rand(1) - rand(2) is not zero, and is the
 * difference of the two sequences). */
static void test_engine_rand_two_seeds_in_one_kernel(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const int64_t shape[] = {300};
    float got[300];
    kiln_tensor *d =
        kiln_sub(kiln_rand(ctx, KILN_F32, 1, shape, 1), kiln_rand(ctx, KILN_F32, 1, shape, 2));
    fx_read(d, KILN_F32, got, 300);
    for (int i = 0; i < 300; i++) {
        float want = ref_uniform(1, (uint64_t)i, 0) - ref_uniform(2, (uint64_t)i, 0);
        if (got[i] != want)
            fail_msg("element %d: %.9g, want %.9g", i, got[i], want);
    }
}

/* ---- dropout ----------------------------------------------------------------------------------
 */

static void test_engine_dropout_zeroes_p_and_scales_the_rest(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { N = 20000 };
    const int64_t shape[] = {100, 200};
    float *x = malloc(N * sizeof *x), *got = malloc(N * sizeof *got);
    assert_true(x && got);
    for (int i = 0; i < N; i++)
        x[i] = (float)(i % 97) * 0.25f - 11.0f + 0.125f; /* never 0 */
    kiln_tensor *t = fx_f32(ctx, 2, shape, x);
    const double ps[] = {0.1, 0.5, 0.8};
    for (size_t k = 0; k < 3; k++) {
        double p = ps[k];
        fx_read(kiln_dropout(t, p, 7 + k), KILN_F32, got, N);
        int zeros = 0;
        float scale = 1.0f / (float)(1 - p); /* torch's: the mask over 1 - p, then a product */
        for (int i = 0; i < N; i++) {
            /* The mask is kiln_rand's with that seed: u >= p keeps the element. */
            bool keep = ref_uniform(7 + k, (uint64_t)i, 0) >= (float)p;
            float want = keep ? x[i] * scale : 0.0f;
            if (got[i] != want)
                fail_msg("p %g element %d: %.9g, want %.9g", p, i, got[i], want);
            zeros += got[i] == 0;
        }
        /* The zeroed fraction's standard error is at most 0.0035 over 20000: allow 0.015. */
        assert_true(fabs((double)zeros / N - p) < 0.015);
    }
    /* p = 0: t's values, in a handle of its own. */
    kiln_tensor *same = kiln_dropout(t, 0, 3);
    assert_non_null(same);
    assert_true(same != t);
    fx_read(same, KILN_F32, got, N);
    assert_memory_equal(got, x, N * sizeof *x);
    assert_int_equal(kiln_release(same), KILN_OK);
    fx_read(t, KILN_F32, got, N); /* t lives on */
    assert_memory_equal(got, x, N * sizeof *x);
    /* f16 keeps its dtype; a 0-d tensor has one element. */
    kiln_tensor *h = kiln_dropout(kiln_cast(t, KILN_F16), 0.5, 9);
    assert_int_equal(kiln_tensor_dtype(h), KILN_F16);
    fx_check_f32(kiln_dropout(kiln_scalar(ctx, KILN_F32, 3), 0.5, 0),
                 (const float[]){ref_uniform(0, 0, 0) >= 0.5f ? 6.0f : 0.0f}, 1, 0, 0);
    free(x);
    free(got);
}

/* Autograd records dropout's public ops: d sum(dropout(x) * w) / dx = mask * w / (1 - p), the
 * mask kiln_rand's; p = 0 passes the gradient through (the handle keeps x's history). */
static void test_engine_dropout_gradient_is_the_mask_over_1_minus_p(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { N = 500 };
    const int64_t shape[] = {N};
    float xs[N], ws[N], got[N];
    for (int i = 0; i < N; i++) {
        xs[i] = (float)i * 0.01f - 2.0f;
        ws[i] = (float)(i % 7) + 0.5f;
    }
    kiln_tensor *x = fx_f32(ctx, 1, shape, xs), *w = fx_f32(ctx, 1, shape, ws);
    assert_int_equal(kiln_requires_grad_(x, true), KILN_OK);
    const double ps[] = {0.25, 0};
    for (int k = 0; k < 2; k++) {
        kiln_tensor *loss = kiln_sum(kiln_mul(kiln_dropout(x, ps[k], 77), w), 0, NULL, false);
        kiln_tensor *g = NULL;
        assert_int_equal(kiln_grad(loss, 1, &x, &g), KILN_OK);
        fx_read(g, KILN_F32, got, N);
        float scale = (float)(1 - ps[k]);
        for (int i = 0; i < N; i++) {
            bool keep = ref_uniform(77, (uint64_t)i, 0) >= (float)ps[k];
            float want = keep ? ws[i] / scale : 0.0f;
            if (fabsf(got[i] - want) > 1e-6f * fabsf(want))
                fail_msg("p %g element %d: gradient %.9g, want %.9g", ps[k], i, got[i], want);
        }
    }
}

static void test_engine_dropout_rejects_bad_p_and_integers(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *t = kiln_ones(ctx, KILN_F32, 1, (const int64_t[]){4});
    assert_null(kiln_dropout(t, 1.0, 1));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_dropout", "p = 1,", "[0, 1)", NULL);
    assert_null(kiln_dropout(t, -0.25, 1));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_dropout", "-0.25", NULL);
    assert_null(kiln_dropout(t, NAN, 1));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_dropout", "nan", NULL);
    assert_null(kiln_dropout(kiln_ones(ctx, KILN_I32, 1, (const int64_t[]){4}), 0.5, 1));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_dropout", "i32", "float", NULL);
    assert_null(kiln_dropout(kiln_ones(ctx, KILN_BOOL, 1, (const int64_t[]){4}), 0, 1));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_dropout", "bool", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_rand_reference_matches_known_answers),
        ENG_TEST(test_engine_rand_is_philox_bit_for_bit),
        ENG_TEST(test_engine_randn_is_box_muller_of_philox),
        ENG_TEST(test_engine_rand_seed_is_a_kernel_parameter),
        ENG_TEST(test_engine_rand_two_seeds_in_one_kernel),
        ENG_TEST(test_engine_dropout_zeroes_p_and_scales_the_rest),
        ENG_TEST(test_engine_dropout_gradient_is_the_mask_over_1_minus_p),
        ENG_TEST(test_engine_dropout_rejects_bad_p_and_integers),
    };
    return ENG_RUN_BOTH(tests);
}
