/* Special values on both backends against x86-64 NumPy (fixtures/gen_special.py writes
 * fixtures/special.h): pow of every pair of {0, -0, 1, -1, 2, 0.5, inf, -inf, NaN}, division
 * by 0 and -0, exp, log, sqrt, rsqrt, sin, cos, tanh and sigmoid of those values and of finite
 * values that overflow, underflow or saturate, and f32 casts to i32, u32, i8, u8 and bool of
 * NaN, infinities and values out of each type's range (kiln.h states the rules).
 *
 * A result that is NaN, an infinity or a zero must match exactly (a zero's sign included);
 * other results within a relative tolerance (the device's exp, log, sin, ... round
 * differently from NumPy's), and a subnormal one may be flushed to zero. Casts match exactly. */
#include "engine_fixture.h"
#include "fixtures/special.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Relative tolerance of finite, nonzero results: the device's transcendental functions are
 * not correctly rounded (pow is exp2(y log2 |x|)). */
static const double RTOL = 1e-5;

static bool same_special(float got, float want) {
    if (isnan(want))
        return isnan(got);
    if (isinf(want) || want == 0.0f)
        return got == want && signbit(got) == signbit(want);
    if (fabsf(want) < 1.17549435e-38f) /* subnormal: flushing it is rounding */
        return fabsf(got - want) <= 1.17549435e-38f;
    return fabs((double)got - (double)want) <= RTOL * fabs((double)want);
}

/* Reads t (f32, n elements) and compares it with want element by element; what fails is
 * listed with its input (in: NULL, or n inputs; in2: a second operand, or NULL). */
static void check(const char *what, kiln_tensor *t, const float *in, const float *in2,
                  const float *want, size_t n) {
    float got[96];
    assert_true(n <= N(got));
    fx_read(t, KILN_F32, got, n);
    char msg[2048];
    size_t len = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (same_special(got[i], want[i]))
            continue;
        bad++;
        if (len < sizeof msg - 128) {
            int w = in2 ? snprintf(msg + len, sizeof msg - len, " %s(%g, %g) = %.9g, want %.9g;",
                                   what, in[i], in2[i], got[i], want[i])
                        : snprintf(msg + len, sizeof msg - len, " %s(%g) = %.9g, want %.9g;", what,
                                   in ? in[i] : 0.0f, got[i], want[i]);
            len += w > 0 ? (size_t)w : 0;
        }
    }
    if (bad)
        print_message("%d wrong:%s\n", bad, msg);
    assert_int_equal(bad, 0);
}

static void test_engine_special_pow_of_every_pair(void **state) {
    kiln_context *ctx = fx_ctx(state);
    /* x as a column, y as a row: pow(x[i], y[j]) at i * 9 + j. */
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){9, 1}, SP_S);
    kiln_tensor *y = fx_f32(ctx, 2, (const int64_t[]){1, 9}, SP_S);
    float xs[81], ys[81];
    for (int i = 0; i < 81; i++) {
        xs[i] = SP_S[i / 9];
        ys[i] = SP_S[i % 9];
    }
    check("pow", kiln_pow(x, y), xs, ys, SP_POW, 81);
}

static void test_engine_special_division_by_zero(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 1, (const int64_t[]){9}, SP_S);
    float zeros[9], negs[9];
    for (int i = 0; i < 9; i++) {
        zeros[i] = 0.0f;
        negs[i] = -0.0f;
    }
    kiln_tensor *z = fx_f32(ctx, 1, (const int64_t[]){9}, zeros);
    kiln_tensor *nz = fx_f32(ctx, 1, (const int64_t[]){9}, negs);
    check("div", kiln_div(x, z), SP_S, zeros, SP_DIV_ZERO, 9);
    check("div", kiln_div(x, nz), SP_S, negs, SP_DIV_NEG_ZERO, 9);
    /* The same with a broadcast scalar divisor (a constant in the kernel). */
    check("div", kiln_div(x, kiln_scalar(ctx, KILN_F32, -0.0)), SP_S, negs, SP_DIV_NEG_ZERO, 9);
}

static void test_engine_special_unary_functions(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *u = fx_f32(ctx, 1, (const int64_t[]){N(SP_U)}, SP_U);
    size_t n = N(SP_U);
    check("exp", kiln_exp(u), SP_U, NULL, SP_EXP, n);
    check("log", kiln_log(u), SP_U, NULL, SP_LOG, n);
    check("sqrt", kiln_sqrt(u), SP_U, NULL, SP_SQRT, n);
    check("rsqrt", kiln_rsqrt(u), SP_U, NULL, SP_RSQRT, n);
    /* sin and cos not of 1e30, the last value (see gen_special.py) */
    kiln_tensor *t = kiln_narrow(u, 0, 0, SP_U_TRIG);
    check("sin", kiln_sin(t), SP_U, NULL, SP_SIN, SP_U_TRIG);
    check("cos", kiln_cos(t), SP_U, NULL, SP_COS, SP_U_TRIG);
    check("tanh", kiln_tanh(u), SP_U, NULL, SP_TANH, n);
    check("sigmoid", kiln_sigmoid(u), SP_U, NULL, SP_SIGMOID, n);
}

/* Reads kiln_cast(c, dtype) as raw elements of size bytes into out. */
static void read_cast(kiln_tensor *c, kiln_dtype dtype, void *out, size_t n) {
    fx_read(kiln_cast(c, dtype), dtype, out, n);
}

static void test_engine_special_float_to_integer_casts(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { NC = N(SP_C) };
    kiln_tensor *c = fx_f32(ctx, 1, (const int64_t[]){NC}, SP_C);
    int32_t i32[NC];
    uint32_t u32[NC];
    int8_t i8[NC];
    uint8_t u8[NC], b[NC];
    read_cast(c, KILN_I32, i32, NC);
    read_cast(c, KILN_U32, u32, NC);
    read_cast(c, KILN_I8, i8, NC);
    read_cast(c, KILN_U8, u8, NC);
    read_cast(c, KILN_BOOL, b, NC);
    int bad = 0;
    for (size_t i = 0; i < NC; i++) {
        bool ok = i32[i] == SP_C_I32[i] && u32[i] == SP_C_U32[i] && i8[i] == SP_C_I8[i] &&
                  u8[i] == SP_C_U8[i] && b[i] == SP_C_BOOL[i];
        if (!ok)
            print_message("cast %.9g: i32 %d (%d) u32 %u (%u) i8 %d (%d) u8 %u (%u) bool %u (%u)\n",
                          SP_C[i], i32[i], SP_C_I32[i], u32[i], SP_C_U32[i], i8[i], SP_C_I8[i],
                          u8[i], SP_C_U8[i], b[i], SP_C_BOOL[i]);
        bad += !ok;
    }
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_special_pow_of_every_pair),
        ENG_TEST(test_engine_special_division_by_zero),
        ENG_TEST(test_engine_special_unary_functions),
        ENG_TEST(test_engine_special_float_to_integer_casts),
    };
    return ENG_RUN_BOTH(tests);
}
