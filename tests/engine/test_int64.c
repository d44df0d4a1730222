/* KILN_I64 on both backends against PyTorch (fixtures/gen_int64.py writes fixtures/int64.h):
 * values beyond 32 bits through from_data, kernels and read; arithmetic, comparisons, where and
 * matmul of i64 (wrapping as PyTorch's); PyTorch's promotion of every pair of dtypes and of
 * Python-number scalars; integer sums and products that give i64 without wrapping; argmax as
 * i64; casts to and from i64 with the special values; and a device without shaderInt64 (the
 * eng_testing.h override), where such kernels are KILN_ERROR_UNSUPPORTED. */
#include "eng_testing.h"
#include "engine_fixture.h"
#include "fixtures/int64.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

static kiln_tensor *i64_tensor(kiln_context *ctx, uint32_t ndim, const int64_t *shape,
                               const int64_t *data) {
    kiln_tensor *t = kiln_from_data(ctx, KILN_I64, ndim, shape, data);
    assert_non_null(t);
    return t;
}

/* Reads an i64 tensor of n elements computed by a kernel and compares it with want; on a device
 * without shaderInt64 (mobile-low) the read is KILN_ERROR_UNSUPPORTED naming shaderInt64. */
static void check_i64(const char *what, kiln_tensor *t, const int64_t *want, size_t n) {
    int64_t got[128];
    assert_true(n <= N(got));
    assert_non_null(t);
    assert_int_equal(kiln_tensor_dtype(t), KILN_I64);
    if (fx_unsupported_i64(t))
        return;
    fx_read(t, KILN_I64, got, n);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i])
            print_message("%s[%zu]: %lld, want %lld\n", what, i, (long long)got[i],
                          (long long)want[i]);
        bad += got[i] != want[i];
    }
    assert_int_equal(bad, 0);
}

static void test_engine_int64_values_beyond_32_bits_round_trip(void **state) {
    kiln_context *ctx = fx_ctx(state);
    assert_int_equal(kiln_dtype_size(KILN_I64), 8);
    assert_string_equal(kiln_dtype_name(KILN_I64), "i64");
    int64_t n = (int64_t)N(I64_A);
    kiln_tensor *a = i64_tensor(ctx, 1, &n, I64_A);
    /* No kernel: the storage as written, read back on every device (shaderInt64 or not). */
    int64_t stored[N(I64_A)];
    fx_read(a, KILN_I64, stored, N(stored));
    assert_memory_equal(stored, I64_A, sizeof stored);
    kiln_tensor *b = i64_tensor(ctx, 1, &n, I64_B);
    /* Through a kernel: a view that read packs, and b + 0. */
    int64_t rev[N(I64_A)];
    for (size_t i = 0; i < N(I64_A); i++)
        rev[i] = I64_A[N(I64_A) - 1 - i];
    check_i64("flip", kiln_flip(a, 0), rev, N(rev));
    check_i64("add zero", kiln_add(b, kiln_zeros(ctx, KILN_I64, 1, &n)), I64_B, N(I64_B));
    int64_t big = (int64_t)1 << 40;
    check_i64("full", kiln_full(ctx, KILN_I64, 1, (int64_t[]){2}, (double)big),
              (int64_t[]){big, big}, 2);
    check_i64("arange", kiln_arange(ctx, KILN_I64, (double)big, (double)big + 3, 1),
              (int64_t[]){big, big + 1, big + 2}, 3);
    check_i64("ones", kiln_ones(ctx, KILN_I64, 1, (int64_t[]){2}), (int64_t[]){1, 1}, 2);
    /* 2^63 does not fit. */
    assert_null(kiln_full(ctx, KILN_I64, 1, (int64_t[]){2}, 0x1p63));
    fx_expect_error(ctx, KILN_ERROR_OUT_OF_RANGE);
}

static void test_engine_int64_arithmetic_compare_where_matmul(void **state) {
    kiln_context *ctx = fx_ctx(state);
    int64_t n = (int64_t)N(I64_A);
    kiln_tensor *a = i64_tensor(ctx, 1, &n, I64_A), *b = i64_tensor(ctx, 1, &n, I64_B);
    check_i64("add", kiln_add(a, b), I64_ADD, N(I64_ADD));
    check_i64("sub", kiln_sub(a, b), I64_SUB, N(I64_SUB));
    check_i64("mul", kiln_mul(a, b), I64_MUL, N(I64_MUL));
    check_i64("maximum", kiln_maximum(a, b), I64_MAXIMUM, N(I64_MAXIMUM));
    check_i64("where", kiln_where(kiln_lt(a, b), a, b), I64_WHERE_LT, N(I64_WHERE_LT));
    check_i64("neg", kiln_neg(a), I64_NEG, N(I64_NEG));
    /* Comparisons of i64 are kernels with 64-bit integers too (UNSUPPORTED without them). */
    kiln_tensor *lt = kiln_lt(a, b), *eq = kiln_eq(a, kiln_flip(a, 0));
    if (!fx_unsupported_i64(lt))
        fx_check_u8(lt, KILN_BOOL, I64_LT, N(I64_LT));
    if (!fx_unsupported_i64(eq))
        fx_check_u8(eq, KILN_BOOL, I64_EQ, N(I64_EQ));
    kiln_tensor *ma = i64_tensor(ctx, 2, (int64_t[]){2, 4}, I64_MA);
    kiln_tensor *mb = i64_tensor(ctx, 2, (int64_t[]){4, 2}, I64_MB);
    check_i64("matmul", kiln_matmul(ma, mb), I64_MATMUL, N(I64_MATMUL));
}

/* Every pair of dtypes through kiln_add: the result's dtype is PyTorch's (PROMOTE), and its
 * values are the sum of 1 and 0, 1 and 1 (bool + bool is or). */
static void test_engine_int64_promotion_of_every_pair(void **state) {
    kiln_context *ctx = fx_ctx(state);
    int bad = 0;
    for (int x = 0; x < KILN_DTYPE_COUNT_; x++) {
        for (int y = 0; y < KILN_DTYPE_COUNT_; y++) {
            kiln_tensor *a =
                kiln_cast(fx_f32(ctx, 1, (int64_t[]){2}, (float[]){1, 1}), (kiln_dtype)x);
            kiln_tensor *b =
                kiln_cast(fx_f32(ctx, 1, (int64_t[]){2}, (float[]){0, 1}), (kiln_dtype)y);
            kiln_tensor *s = kiln_add(a, b);
            assert_non_null(s);
            kiln_dtype want = PROMOTE[x][y];
            /* A pair that computes in i64 needs shaderInt64: UNSUPPORTED without it. */
            if ((x == KILN_I64 || y == KILN_I64 || want == KILN_I64) &&
                fx_unsupported_i64(kiln_cast(s, KILN_F32))) {
                bad += kiln_tensor_dtype(s) != want;
                continue;
            }
            float got[2];
            fx_read(kiln_cast(s, KILN_F32), KILN_F32, got, 2);
            float second = want == KILN_BOOL ? 1.0f : 2.0f;
            if (kiln_tensor_dtype(s) != want || got[0] != 1.0f || got[1] != second) {
                print_message("%s + %s: %s (%g, %g), want %s\n", kiln_dtype_name((kiln_dtype)x),
                              kiln_dtype_name((kiln_dtype)y), kiln_dtype_name(kiln_tensor_dtype(s)),
                              got[0], got[1], kiln_dtype_name(want));
                bad++;
            }
        }
    }
    assert_int_equal(bad, 0);
}

/* A Python int keeps an integer tensor's dtype (a bool tensor's becomes i64); a Python float
 * makes an integer or bool tensor f32. */
static void test_engine_int64_scalar_promotion(void **state) {
    kiln_context *ctx = fx_ctx(state);
    int bad = 0;
    for (int x = 0; x < KILN_DTYPE_COUNT_; x++) {
        kiln_tensor *t = kiln_cast(fx_f32(ctx, 1, (int64_t[]){2}, (float[]){0, 1}), (kiln_dtype)x);
        kiln_tensor *r[4] = {kiln_add_scalar(t, 2), kiln_mul_scalar(t, 3), kiln_add_scalar(t, 0.5),
                             kiln_mul_scalar(t, 1.5)};
        const kiln_dtype want[4] = {SCALAR_INT[x], SCALAR_INT[x], SCALAR_FLOAT[x], SCALAR_FLOAT[x]};
        const float values[4][2] = {{2, 3}, {0, 3}, {0.5f, 1.5f}, {0, 1.5f}};
        for (int i = 0; i < 4; i++) {
            assert_non_null(r[i]);
            /* Computing in i64 needs shaderInt64: UNSUPPORTED without it (the dtype still
             * checked). */
            if ((x == KILN_I64 || want[i] == KILN_I64) &&
                fx_unsupported_i64(kiln_cast(r[i], KILN_F32))) {
                bad += kiln_tensor_dtype(r[i]) != want[i];
                continue;
            }
            float got[2];
            fx_read(kiln_cast(r[i], KILN_F32), KILN_F32, got, 2);
            if (kiln_tensor_dtype(r[i]) != want[i] || got[0] != values[i][0] ||
                got[1] != values[i][1]) {
                print_message("%s scalar op %d: %s (%g, %g), want %s\n",
                              kiln_dtype_name((kiln_dtype)x), i,
                              kiln_dtype_name(kiln_tensor_dtype(r[i])), got[0], got[1],
                              kiln_dtype_name(want[i]));
                bad++;
            }
        }
    }
    assert_int_equal(bad, 0);
    /* An integral scalar must fit the integer tensor's dtype (as PyTorch refuses it). */
    assert_null(kiln_add_scalar(kiln_zeros(ctx, KILN_I8, 1, (int64_t[]){2}), 1000));
    fx_expect_error(ctx, KILN_ERROR_OUT_OF_RANGE);
}

static void test_engine_int64_integer_sums_do_not_wrap(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *s = fx_i32(ctx, 2, (int64_t[]){4, 96}, SUM_I32);
    check_i64("sum rows", kiln_sum(s, 1, (int32_t[]){1}, false), SUM_I32_ROWS, N(SUM_I32_ROWS));
    check_i64("sum cols", kiln_sum(s, 1, (int32_t[]){0}, false), SUM_I32_COLS, N(SUM_I32_COLS));
    check_i64("sum all", kiln_sum(s, 0, NULL, false), SUM_I32_ALL, 1);
    kiln_tensor *p = fx_i32(ctx, 2, (int64_t[]){2, 3}, PROD_I32);
    check_i64("prod rows", kiln_prod(p, 1, (int32_t[]){1}, false), PROD_I32_ROWS, N(PROD_I32_ROWS));
    kiln_tensor *u = kiln_from_data(ctx, KILN_U8, 1, (int64_t[]){(int64_t)N(SUM_U8)}, SUM_U8);
    check_i64("sum u8", kiln_sum(u, 0, NULL, false), SUM_U8_ALL, 1);
    check_i64("sum bool", kiln_sum(kiln_cast(u, KILN_BOOL), 0, NULL, false), (int64_t[]){5}, 1);
    /* Over more elements than one kernel combines (two stages, i64 partials): 70000 x 2^30. */
    kiln_tensor *big = kiln_full(ctx, KILN_I32, 1, (int64_t[]){70000}, 0x1p30);
    check_i64("sum split", kiln_sum(big, 0, NULL, false), (int64_t[]){70000 * ((int64_t)1 << 30)},
              1);
    /* matmul keeps PyTorch's dtype: i32 @ i32 is i32. */
    kiln_tensor *m = kiln_matmul(fx_i32(ctx, 2, (int64_t[]){1, 2}, (int32_t[]){2, 3}),
                                 fx_i32(ctx, 2, (int64_t[]){2, 1}, (int32_t[]){4, 5}));
    assert_int_equal(kiln_tensor_dtype(m), KILN_I32);
    fx_check_i32(m, (int32_t[]){23}, 1);
    /* mean of integers stays refused (as PyTorch). */
    assert_null(kiln_mean(s, 0, NULL, false));
    fx_expect_error(ctx, KILN_ERROR_DTYPE_MISMATCH);
}

static void test_engine_int64_argmax_is_i64(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 2, (int64_t[]){3, 5}, ARG_X);
    check_i64("argmax rows", kiln_argmax(x, 1, false), ARG_ROWS, N(ARG_ROWS));
    check_i64("argmax cols", kiln_argmax(x, 0, false), ARG_COLS, N(ARG_COLS));
    /* Over more elements than one kernel combines (the two-reduction form). */
    kiln_tensor *r = kiln_arange(ctx, KILN_F32, 0, 70000, 1);
    check_i64("argmax split", kiln_argmax(r, 0, false), (int64_t[]){69999}, 1);
}

static void test_engine_int64_casts_with_special_values(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *f = fx_f32(ctx, 1, (int64_t[]){(int64_t)N(CAST_F)}, CAST_F);
    check_i64("f32 -> i64", kiln_cast(f, KILN_I64), CAST_F_I64, N(CAST_F_I64));
    int64_t n = (int64_t)N(CAST_L);
    kiln_tensor *l = i64_tensor(ctx, 1, &n, CAST_L);
    /* Casts from i64 load 64-bit integers: UNSUPPORTED on a device without shaderInt64. */
    kiln_tensor *lf = kiln_cast(l, KILN_F32), *li = kiln_cast(l, KILN_I32);
    kiln_tensor *lu = kiln_cast(l, KILN_U8), *lb = kiln_cast(l, KILN_BOOL);
    if (!fx_unsupported_i64(lf)) {
        float got[N(CAST_L)];
        fx_read(lf, KILN_F32, got, N(got));
        assert_memory_equal(got, CAST_L_F32, sizeof got);
    }
    if (!fx_unsupported_i64(li))
        fx_check_i32(li, CAST_L_I32, N(CAST_L_I32));
    if (!fx_unsupported_i64(lu))
        fx_check_u8(lu, KILN_U8, CAST_L_U8, N(CAST_L_U8));
    if (!fx_unsupported_i64(lb))
        fx_check_u8(lb, KILN_BOOL, CAST_L_BOOL, N(CAST_L_BOOL));
    /* Widening: i32 sign-extends, u32 zero-extends. */
    check_i64("i32 -> i64",
              kiln_cast(fx_i32(ctx, 1, (int64_t[]){2}, (int32_t[]){-5, INT32_MIN}), KILN_I64),
              (int64_t[]){-5, INT32_MIN}, 2);
    uint32_t u[2] = {UINT32_MAX, 7};
    check_i64("u32 -> i64",
              kiln_cast(kiln_from_data(ctx, KILN_U32, 1, (int64_t[]){2}, u), KILN_I64),
              (int64_t[]){UINT32_MAX, 7}, 2);
}

/* A device without shaderInt64 (forced on lavapipe): kernels that compute with 64-bit integers
 * are refused with KILN_ERROR_UNSUPPORTED at realize, the message naming the call and "no
 * shaderInt64" (a second realize of the kernel refused from memory, not lowered again); an i64
 * storage is still written and read (no kernel), and other kernels run. The interpreter runs
 * everything. */
static void test_engine_int64_device_without_shader_int64(void **state) {
    eng_fixture *fx = *state;
    eng_testing_set(&(eng_testing){.no_int64 = true});
    kiln_context *ctx = eng_context_new(fx->device);
    eng_testing_set(NULL);
    assert_non_null(ctx);
    kiln_tensor *s = kiln_sum(fx_i32(ctx, 1, (int64_t[]){3}, (int32_t[]){1, 2, 3}), 0, NULL, false);
    assert_int_equal(kiln_tensor_dtype(s), KILN_I64);
    int64_t total = 0;
    kiln_status st = kiln_read(s, &total, sizeof total);
    if (fx->device) {
        assert_int_equal(st, KILN_ERROR_UNSUPPORTED);
        const char *msg = kiln_context_message(ctx);
        print_message("no shaderInt64: %s\n", msg);
        assert_non_null(strstr(msg, "kiln_read"));
        assert_non_null(strstr(msg, "no shaderInt64"));
        char first[512];
        snprintf(first, sizeof first, "%s", msg);
        kiln_context_clear_error(ctx);
        /* the refusal is remembered: the same sum again fails alike without being lowered */
        uint64_t compiled = kiln_context_stats(ctx).kernels_compiled;
        kiln_tensor *again =
            kiln_sum(fx_i32(ctx, 1, (int64_t[]){3}, (int32_t[]){4, 5, 6}), 0, NULL, false);
        assert_int_equal(kiln_read(again, &total, sizeof total), KILN_ERROR_UNSUPPORTED);
        assert_string_equal(kiln_context_message(ctx), first);
        assert_int_equal(kiln_context_stats(ctx).kernels_compiled, compiled);
        kiln_context_clear_error(ctx);
    } else {
        assert_int_equal(st, KILN_OK);
        assert_int_equal(total, 6);
    }
    int64_t v[2] = {(int64_t)1 << 40, -3};
    kiln_tensor *l = kiln_from_data(ctx, KILN_I64, 1, (int64_t[]){2}, v);
    int64_t back[2];
    assert_int_equal(kiln_read(l, back, sizeof back), KILN_OK);
    assert_memory_equal(back, v, sizeof v);
    /* 32-bit work runs as before: f32, and i32 matmul (no i64 accumulator). */
    fx_check_f32(kiln_add(fx_f32(ctx, 1, (int64_t[]){2}, (float[]){1, 2}),
                          fx_f32(ctx, 1, (int64_t[]){2}, (float[]){3, 4})),
                 (float[]){4, 6}, 2, 0, 0);
    fx_check_i32(kiln_matmul(fx_i32(ctx, 2, (int64_t[]){1, 2}, (int32_t[]){2, 3}),
                             fx_i32(ctx, 2, (int64_t[]){2, 1}, (int32_t[]){4, 5})),
                 (int32_t[]){23}, 1);
    assert_int_equal(kiln_context_status(ctx), KILN_OK);
    eng_fixture_context_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_int64_values_beyond_32_bits_round_trip),
        ENG_TEST(test_engine_int64_arithmetic_compare_where_matmul),
        ENG_TEST(test_engine_int64_promotion_of_every_pair),
        ENG_TEST(test_engine_int64_scalar_promotion),
        ENG_TEST(test_engine_int64_integer_sums_do_not_wrap),
        ENG_TEST(test_engine_int64_argmax_is_i64),
        ENG_TEST(test_engine_int64_casts_with_special_values),
        ENG_TEST(test_engine_int64_device_without_shader_int64),
    };
    return ENG_RUN_BOTH(tests);
}
