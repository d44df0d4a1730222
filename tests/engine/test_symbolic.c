/* engine/: symbolic shapes end to end. Bound Variables size tensors; one kernel serves every
 * bound value (the statistics prove it); every reduction is one kernel; results match the
 * interpreter and values computed on the host. */
#include "eng_testing.h"
#include "vk_fixture.h"

#include <kiln/kiln.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

typedef struct fixture {
    kiln_context *dev;    /* the Vulkan device (validation on) */
    kiln_context *interp; /* the reference interpreter */
} fixture;

static int setup(void **state) {
    vk_fixture_keep_drivers_loaded();
    fixture *f = calloc(1, sizeof *f);
    if (!f || kiln_context_create(&(kiln_context_options){.validation = true}, &f->dev) ||
        kiln_context_create(&(kiln_context_options){.device = "interp"}, &f->interp))
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    kiln_context_destroy(f->dev);
    kiln_context_destroy(f->interp);
    free(f);
    return 0;
}

/* |got - want| <= tol, with both values in the failure message. */
#define expect_near(got, want, tol)                                                                \
    do {                                                                                           \
        double got_ = (double)(got), want_ = (double)(want);                                       \
        if (!(fabs(got_ - want_) <= (double)(tol)))                                                \
            fail_msg("%s = %.9g, expected %.9g (tolerance %g)", #got, got_, want_, (double)(tol)); \
    } while (0)

static uint64_t compiled(kiln_context *ctx) {
    return kiln_context_stats(ctx).kernels_compiled;
}

/* sum and mean of rand(n) for a bound n, read back. */
static void sum_mean(kiln_context *ctx, const kiln_expr *n, int64_t value, float *sum, float *mean,
                     float *data) {
    const kiln_expr *b = kiln_bind(ctx, n, value);
    kiln_tensor *x = kiln_rand_sym(ctx, KILN_F32, 1, &b, 7);
    assert_int_equal(kiln_read(kiln_sum(x, 0, NULL, false), sum, sizeof *sum), KILN_OK);
    assert_int_equal(kiln_read(kiln_mean(x, 0, NULL, false), mean, sizeof *mean), KILN_OK);
    assert_int_equal(kiln_read(x, data, sizeof(float) * (size_t)value), KILN_OK);
}

/* The seed's example: sum and mean of rand(n), n bound to 4 then 8: one kernel each. */
static void test_engine_symbolic_sum_and_mean_compile_once(void **state) {
    fixture *f = *state;
    kiln_context *ctx = f->dev;
    const kiln_expr *n = kiln_variable(ctx, "n", 1, 16);
    float sum, mean, data[16];
    sum_mean(ctx, n, 4, &sum, &mean, data);
    uint64_t after_first = compiled(ctx);
    double want = 0;
    for (int i = 0; i < 4; i++) {
        assert_true(data[i] >= 0 && data[i] < 1);
        want += data[i];
    }
    expect_near(sum, want, 1e-5);
    expect_near(mean, want / 4, 1e-6);
    sum_mean(ctx, n, 8, &sum, &mean, data);
    assert_int_equal(compiled(ctx), after_first); /* rebinding compiles nothing */
    want = 0;
    for (int i = 0; i < 8; i++)
        want += data[i];
    expect_near(sum, want, 1e-5);
    expect_near(mean, want / 8, 1e-6);
    /* The same numbers as a tensor of concrete size 8 with the same seed. */
    float concrete[8];
    assert_int_equal(
        kiln_read(kiln_rand(ctx, KILN_F32, 1, (int64_t[]){8}, 7), concrete, sizeof concrete),
        KILN_OK);
    assert_memory_equal(concrete, data, sizeof concrete);
    assert_int_equal(kiln_context_status(ctx), KILN_OK);
}

/* Every reduction over a symbolic dim is one kernel, correct at the min and max of the range,
 * and compiled once for all values. */
static void test_engine_symbolic_reductions_one_kernel_each(void **state) {
    fixture *f = *state;
    kiln_context *ctx = f->dev;
    const kiln_expr *m = kiln_variable(ctx, "m", 1, 40);
    int64_t values[3] = {1, 40, 17};
    uint64_t compiled_first = 0;
    for (int v = 0; v < 3; v++) {
        int64_t len = values[v];
        const kiln_expr *shape[2] = {kiln_int(ctx, 3), kiln_bind(ctx, m, len)};
        kiln_tensor *x = kiln_randn_sym(ctx, KILN_F32, 2, shape, 11);
        float host[3 * 40];
        assert_int_equal(kiln_read(x, host, sizeof(float) * 3 * (size_t)len), KILN_OK);
        int32_t axis = 1;
        kiln_tensor *outs[8] = {
            kiln_sum(x, 1, &axis, false),      kiln_prod(x, 1, &axis, false),
            kiln_max(x, 1, &axis, false),      kiln_min(x, 1, &axis, false),
            kiln_mean(x, 1, &axis, false),     kiln_var(x, 1, &axis, 1.0, false),
            kiln_std(x, 1, &axis, 0.0, false), kiln_argmax(x, 1, false),
        };
        for (int o = 0; o < 8; o++) {
            uint64_t before = kiln_context_stats(ctx).dispatches;
            union {
                float f[3];
                int64_t i[3]; /* argmax: i64 */
            } got;
            if (o == 7 && !kiln_dtype_supported(ctx, KILN_I64)) {
                /* argmax is i64: a device without shaderInt64 (mobile-low) refuses it */
                assert_int_equal(kiln_read(outs[o], &got, sizeof got), KILN_ERROR_UNSUPPORTED);
                assert_non_null(strstr(kiln_context_message(ctx), "shaderInt64"));
                kiln_context_clear_error(ctx);
                continue;
            }
            assert_int_equal(kiln_read(outs[o], &got, sizeof got), KILN_OK);
            assert_int_equal(kiln_context_stats(ctx).dispatches - before, 1); /* one kernel */
            for (int r = 0; r < 3; r++) {
                const float *row = host + r * len;
                double s = 0, p = 1, mx = -INFINITY, mn = INFINITY, ss = 0;
                int32_t arg = 0;
                for (int64_t i = 0; i < len; i++) {
                    s += row[i];
                    p *= row[i];
                    if (row[i] > mx) {
                        mx = row[i];
                        arg = (int32_t)i;
                    }
                    mn = row[i] < mn ? row[i] : mn;
                }
                double mean = s / (double)len;
                for (int64_t i = 0; i < len; i++)
                    ss += (row[i] - mean) * (row[i] - mean);
                double want[8] = {s,
                                  p,
                                  mx,
                                  mn,
                                  mean,
                                  len > 1 ? ss / (double)(len - 1) : NAN,
                                  sqrt(ss / (double)len),
                                  arg};
                if (o == 7)
                    assert_int_equal(got.i[r], arg);
                else if (isnan(want[o]))
                    assert_true(isnan(got.f[r])); /* unbiased var of one element */
                else
                    expect_near(got.f[r], want[o], 1e-4 * (1 + fabs(want[o])));
            }
        }
        /* Everything compiles once, a kernel the device refused too (the argmax without
         * shaderInt64: its refusal is remembered, runtime.c, not lowered again). */
        if (v == 0)
            compiled_first = compiled(ctx);
        else
            assert_int_equal(compiled(ctx), compiled_first);
    }
}

/* (n, 4) -> (4n,) and back, expand, pad and shrink by symbolic amounts, a symbolic slice. */
static void test_engine_symbolic_movement(void **state) {
    fixture *f = *state;
    kiln_context *ctx = f->dev;
    const kiln_expr *n = kiln_variable(ctx, "rows", 1, 10);
    uint64_t first = 0;
    for (int64_t rows = 2; rows <= 5; rows += 3) {
        const kiln_expr *b = kiln_bind(ctx, n, rows);
        const kiln_expr *four_n = kiln_expr_mul(ctx, kiln_int(ctx, 4), b);
        kiln_tensor *a = kiln_arange_sym(ctx, KILN_F32, four_n); /* 0 .. 4n-1 */
        kiln_tensor *m = kiln_reshape_sym(a, 2, (const kiln_expr *[]){b, kiln_int(ctx, 4)});
        kiln_tensor *t = kiln_transpose(m, 0, 1); /* (4, n) */
        kiln_tensor *back = kiln_reshape_sym(t, 1, &four_n);
        float out[40];
        assert_int_equal(kiln_read(back, out, sizeof(float) * 4 * (size_t)rows), KILN_OK);
        for (int64_t j = 0; j < 4; j++) {
            for (int64_t i = 0; i < rows; i++)
                expect_near(out[j * rows + i], (float)(i * 4 + j), 0);
        }
        /* pad by n on the left, then shrink back to the original: identity. */
        const kiln_expr *pad[2] = {b, kiln_int(ctx, 1)};
        kiln_tensor *p = kiln_pad_sym(a, pad);
        float padded[60];
        assert_int_equal(kiln_read(p, padded, sizeof(float) * (5 * (size_t)rows + 1)), KILN_OK);
        for (int64_t i = 0; i < 5 * rows + 1; i++)
            expect_near(padded[i], i < rows || i == 5 * rows ? 0.0f : (float)(i - rows), 0);
        /* a[1 : n+1 : 2] */
        kiln_tensor *s =
            kiln_slice_sym(a, 0, kiln_int(ctx, 1), kiln_expr_add(ctx, b, kiln_int(ctx, 1)), 1);
        float sl[10];
        assert_int_equal(kiln_read(s, sl, sizeof(float) * (size_t)rows), KILN_OK);
        for (int64_t i = 0; i < rows; i++)
            expect_near(sl[i], (float)(i + 1), 0);
        /* expand a (1, n) row to (3, n) and sum over the rows */
        kiln_tensor *row = kiln_unsqueeze(kiln_narrow_sym(a, 0, kiln_int(ctx, 0), b), 0);
        kiln_tensor *e = kiln_expand_sym(row, 2, (const kiln_expr *[]){kiln_int(ctx, 3), b});
        float es[10];
        assert_int_equal(
            kiln_read(kiln_sum(e, 1, (int32_t[]){0}, false), es, sizeof(float) * (size_t)rows),
            KILN_OK);
        for (int64_t i = 0; i < rows; i++)
            expect_near(es[i], 3.0f * (float)i, 0);
        if (rows == 2)
            first = compiled(ctx);
        else
            assert_int_equal(compiled(ctx), first);
    }
    assert_int_equal(kiln_context_status(ctx), KILN_OK);
}

/* A tensor divided by an expression of Variables, and a tensor filled from one. */
static void test_engine_symbolic_values_from_expressions(void **state) {
    fixture *f = *state;
    kiln_context *ctx = f->dev;
    const kiln_expr *n = kiln_variable(ctx, "k", 1, 100);
    const kiln_expr *b = kiln_bind(ctx, n, 6);
    const kiln_expr *twice = kiln_expr_mul(ctx, b, kiln_int(ctx, 2));
    kiln_tensor *x = kiln_full(ctx, KILN_F32, 1, (int64_t[]){3}, 3.0);
    float out[3];
    assert_int_equal(
        kiln_read(kiln_div(x, kiln_scalar_expr(ctx, KILN_F32, twice)), out, sizeof out), KILN_OK);
    for (int i = 0; i < 3; i++)
        expect_near(out[i], 0.25f, 1e-7);
    kiln_tensor *filled =
        kiln_expand_sym(kiln_scalar_expr(ctx, KILN_I32, twice), 1, (const kiln_expr *[]){b});
    int32_t ints[6];
    assert_int_equal(kiln_read(filled, ints, sizeof ints), KILN_OK);
    for (int i = 0; i < 6; i++)
        assert_int_equal(ints[i], 12);
}

static void test_engine_symbolic_binding_outside_range_is_rejected(void **state) {
    fixture *f = *state;
    kiln_context *ctx = f->interp;
    const kiln_expr *n = kiln_variable(ctx, "n", 2, 9);
    assert_null(kiln_bind(ctx, n, 10));
    assert_int_equal(kiln_context_status(ctx), KILN_ERROR_OUT_OF_RANGE);
    assert_non_null(strstr(kiln_context_message(ctx), "outside the range"));
    kiln_context_clear_error(ctx);
    assert_null(kiln_bind(ctx, n, 1));
    kiln_context_clear_error(ctx);
    assert_null(kiln_variable(ctx, "bad name", 0, 4));
    kiln_context_clear_error(ctx);
    assert_non_null(kiln_bind(ctx, n, 9));
    assert_int_equal(kiln_context_status(ctx), KILN_OK);
}

/* A 2-layer MLP whose batch size runs through 1..64 compiles what one batch size compiles, and
 * matches the interpreter at every size. */
static kiln_status mlp(kiln_context *ctx, const kiln_expr *batch_var, int64_t batch, float *out) {
    const kiln_expr *b = kiln_bind(ctx, batch_var, batch);
    kiln_tensor *x =
        kiln_randn_sym(ctx, KILN_F32, 2, (const kiln_expr *[]){b, kiln_int(ctx, 16)}, 5);
    kiln_tensor *w1 = kiln_randn(ctx, KILN_F32, 2, (int64_t[]){16, 24}, 6);
    kiln_tensor *w2 = kiln_randn(ctx, KILN_F32, 2, (int64_t[]){24, 8}, 7);
    kiln_tensor *h = kiln_relu(kiln_matmul(x, w1));
    kiln_tensor *y = kiln_softmax(kiln_matmul(h, w2), -1);
    return kiln_read(y, out, sizeof(float) * 8 * (size_t)batch);
}

static void test_engine_symbolic_mlp_batch_sizes(void **state) {
    fixture *f = *state;
    const kiln_expr *bd = kiln_variable(f->dev, "batch", 1, 64);
    const kiln_expr *bi = kiln_variable(f->interp, "batch", 1, 64);
    static float got[64 * 8], want[64 * 8];
    uint64_t start = compiled(f->dev);
    uint64_t one_size = 0;
    for (int64_t batch = 1; batch <= 64; batch++) {
        assert_int_equal(mlp(f->dev, bd, batch, got), KILN_OK);
        if (batch == 1)
            one_size = compiled(f->dev) - start;
        assert_int_equal(mlp(f->interp, bi, batch, want), KILN_OK);
        for (int64_t i = 0; i < batch * 8; i++)
            expect_near(got[i], want[i], 1e-5);
    }
    assert_true(one_size > 0);
    assert_int_equal(compiled(f->dev) - start, one_size);
}

/* With a push-constant limit too small for a kernel's Variables, their values travel in a small
 * buffer instead (pipeline creation would refuse 8 bytes of push constants under a limit of 4,
 * so a correct result proves the buffer path ran). */
static void test_engine_symbolic_push_constant_overflow_uses_a_buffer(void **state) {
    (void)state;
    kiln_context *ctx;
    assert_int_equal(eng_testing_context_create(&(kiln_context_options){.validation = true},
                                                &(eng_testing){.max_push_constants = 4}, &ctx),
                     KILN_OK);
    const kiln_expr *n = kiln_variable(ctx, "n", 1, 8), *m = kiln_variable(ctx, "m", 1, 8);
    uint64_t first = 0;
    for (int64_t rows = 2; rows <= 3; rows++) {
        int64_t cols = 7 - rows;
        const kiln_expr *shape[2] = {kiln_bind(ctx, n, rows), kiln_bind(ctx, m, cols)};
        kiln_tensor *x = kiln_arange_sym(ctx, KILN_F32, kiln_expr_mul(ctx, shape[0], shape[1]));
        kiln_tensor *s = kiln_sum(kiln_reshape_sym(x, 2, shape), 1, (int32_t[]){1}, false);
        float out[8];
        assert_int_equal(kiln_read(s, out, sizeof(float) * (size_t)rows), KILN_OK);
        for (int64_t r = 0; r < rows; r++) /* sum of r*cols .. r*cols + cols - 1 */
            expect_near(out[r], (double)(r * cols * cols + cols * (cols - 1) / 2), 0);
        if (rows == 2)
            first = compiled(ctx);
        else
            assert_int_equal(compiled(ctx), first);
    }
    assert_int_equal(kiln_context_status(ctx), KILN_OK);
    kiln_context_destroy(ctx);
}

/* A kernel specialised on a Variable (forced: no bounds check when n is a multiple of the
 * workgroup size) is reused only while its guard holds; otherwise a general variant is
 * compiled, and both stay correct. */
static void test_engine_symbolic_guard_controls_reuse(void **state) {
    (void)state;
    kiln_context *ctx;
    assert_int_equal(eng_testing_context_create(&(kiln_context_options){.validation = true},
                                                &(eng_testing){.force_specialization = true}, &ctx),
                     KILN_OK);
    const kiln_expr *n = kiln_variable(ctx, "n", 1, 2000);
    static const struct {
        int64_t value;
        uint64_t new_kernels, new_guard_failures;
    } steps[] = {
        {512, 1, 0},  /* specialised: 512 is a multiple of the workgroup size (256), guarded */
        {1024, 0, 0}, /* the guard holds: reused */
        {100, 1, 1},  /* the guard fails: a general variant */
        {77, 0, 1},   /* the specialised variant is tried first, then the general one serves */
        {256, 0, 0},  /* specialised again */
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        kiln_stats before = kiln_context_stats(ctx);
        const kiln_expr *b = kiln_bind(ctx, n, steps[i].value);
        kiln_tensor *y = kiln_mul_scalar(kiln_arange_sym(ctx, KILN_F32, b), 2.0);
        static float out[2000];
        assert_int_equal(kiln_read(y, out, sizeof(float) * (size_t)steps[i].value), KILN_OK);
        for (int64_t j = 0; j < steps[i].value; j++)
            expect_near(out[j], 2.0 * (double)j, 0);
        kiln_stats after = kiln_context_stats(ctx);
        assert_int_equal(after.kernels_compiled - before.kernels_compiled, steps[i].new_kernels);
        assert_int_equal(after.guard_failures - before.guard_failures, steps[i].new_guard_failures);
    }
    kiln_context_destroy(ctx);
}

/* PyTorch's edges over a symbolic size bound to 0: sum 0, mean NaN, max an error; and softmax
 * over a symbolic axis; var and std with both corrections. */
static void test_engine_symbolic_edges_and_softmax(void **state) {
    fixture *f = *state;
    kiln_context *ctx = f->dev;
    const kiln_expr *n = kiln_variable(ctx, "len", 0, 9);
    const kiln_expr *zero = kiln_bind(ctx, n, 0);
    kiln_tensor *big = kiln_arange(ctx, KILN_F32, 0, 9, 1);
    kiln_tensor *empty = kiln_narrow_sym(big, 0, kiln_int(ctx, 0), zero);
    float v = -1;
    assert_int_equal(kiln_read(kiln_sum(empty, 0, NULL, false), &v, sizeof v), KILN_OK);
    expect_near(v, 0, 0);
    assert_int_equal(kiln_read(kiln_mean(empty, 0, NULL, false), &v, sizeof v), KILN_OK);
    assert_true(isnan(v));
    assert_int_equal(kiln_read(kiln_max(empty, 0, NULL, false), &v, sizeof v),
                     KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_context_message(ctx), "0 elements"));
    kiln_context_clear_error(ctx);
    /* The same graph bound to 9 works, and the tensors made before stay usable. */
    const kiln_expr *nine = kiln_bind(ctx, n, 9);
    kiln_tensor *x = kiln_narrow_sym(big, 0, kiln_int(ctx, 0), nine);
    assert_int_equal(kiln_read(kiln_max(x, 0, NULL, false), &v, sizeof v), KILN_OK);
    expect_near(v, 8, 0);
    float sm[9];
    assert_int_equal(kiln_read(kiln_softmax(x, 0), sm, sizeof sm), KILN_OK);
    double z = 0;
    for (int i = 0; i < 9; i++)
        z += exp(i - 8.0);
    for (int i = 0; i < 9; i++)
        expect_near(sm[i], exp(i - 8.0) / z, 1e-6);
    /* var and std of 0..8 with corrections 0 and 1: population variance 60/9. */
    float var0, var1, std0, std1;
    assert_int_equal(kiln_read(kiln_var(x, 0, NULL, 0.0, false), &var0, sizeof var0), KILN_OK);
    assert_int_equal(kiln_read(kiln_var(x, 0, NULL, 1.0, false), &var1, sizeof var1), KILN_OK);
    assert_int_equal(kiln_read(kiln_std(x, 0, NULL, 0.0, false), &std0, sizeof std0), KILN_OK);
    assert_int_equal(kiln_read(kiln_std(x, 0, NULL, 1.0, false), &std1, sizeof std1), KILN_OK);
    expect_near(var0, 60.0 / 9, 1e-5);
    expect_near(var1, 60.0 / 8, 1e-5);
    expect_near(std0, sqrt(60.0 / 9), 1e-5);
    expect_near(std1, sqrt(60.0 / 8), 1e-5);
}

/* More elements than one row of workgroups covers (65535 x 64 on lavapipe): a 2-D grid whose
 * rows share the groups evenly; every element is computed exactly once. */
static void test_engine_symbolic_large_grid_covers_every_element(void **state) {
    fixture *f = *state;
    kiln_context *ctx = f->dev;
    enum { N = 4 * 1024 * 1024 + 4099 };
    kiln_tensor *x = kiln_add_scalar(kiln_mul_scalar(kiln_arange(ctx, KILN_F32, 0, N, 1), 2), 1);
    float *out = malloc(sizeof(float) * N);
    assert_non_null(out);
    assert_int_equal(kiln_read(x, out, sizeof(float) * N), KILN_OK);
    int64_t bad = -1;
    for (int64_t i = 0; i < N && bad < 0; i++) {
        if (out[i] != (float)(2 * i + 1))
            bad = i;
    }
    free(out);
    assert_int_equal(bad, -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_symbolic_sum_and_mean_compile_once),
        cmocka_unit_test(test_engine_symbolic_reductions_one_kernel_each),
        cmocka_unit_test(test_engine_symbolic_movement),
        cmocka_unit_test(test_engine_symbolic_values_from_expressions),
        cmocka_unit_test(test_engine_symbolic_binding_outside_range_is_rejected),
        cmocka_unit_test(test_engine_symbolic_edges_and_softmax),
        cmocka_unit_test(test_engine_symbolic_mlp_batch_sizes),
        cmocka_unit_test(test_engine_symbolic_large_grid_covers_every_element),
        cmocka_unit_test(test_engine_symbolic_push_constant_overflow_uses_a_buffer),
        cmocka_unit_test(test_engine_symbolic_guard_controls_reuse),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
