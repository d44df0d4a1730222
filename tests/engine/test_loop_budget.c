/* The loop budget (engine/codegen/lower.c): lavapipe leaves loops silently once an invocation has
 * run 65535 loop passes in all, whatever loops they belong to (nested or one after another), so
 * every kernel keeps the passes of all its loops below that on every device. Sum, argmax,
 * softmax, log_softmax and matmul's k at and around 65535 elements and at 200,000, on both
 * backends, against values computed here: inputs are small integers, so sums are exact in f32
 * (softmax and log_softmax: a tolerance). Before the budget, lavapipe returned KILN_OK with the
 * tail of each softmax row 0 for rows of 65533 to 65535 elements (and of 50001). */
#include "engine_fixture.h"

#include "ir.h"

#include <math.h>
#include <stdlib.h>

/* x[i] = (i * 7) % 5 - 2, in [-2, 2]. */
static float *inputs(size_t n) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 7) % 5) - 2.0f;
    return x;
}

/* softmax (or log_softmax) of the w elements of x, in double precision. */
static void host_softmax(const float *x, int64_t w, bool logarithm, float *out) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < w; j++)
        max = x[j] > max ? x[j] : max;
    for (int64_t j = 0; j < w; j++)
        sum += exp(x[j] - max);
    for (int64_t j = 0; j < w; j++)
        out[j] = (float)(logarithm ? (x[j] - max) - log(sum) : exp(x[j] - max) / sum);
}

/* softmax (and log_softmax) of one row of width w (the maximum last: the row's end matters). */
static void check_softmax(kiln_context *ctx, int64_t w, bool logarithm) {
    float *x = inputs((size_t)w), *want = malloc((size_t)w * sizeof *want);
    assert_non_null(want);
    x[w - 1] = 3;
    kiln_scope_begin(ctx);
    kiln_tensor *t = fx_f32(ctx, 2, (const int64_t[]){1, w}, x);
    host_softmax(x, w, false, want);
    fx_check_f32(kiln_softmax(t, 1), want, (size_t)w, 1e-9, 1e-4);
    if (logarithm) {
        host_softmax(x, w, true, want);
        fx_check_f32(kiln_log_softmax(t, -1), want, (size_t)w, 1e-6, 1e-5);
    }
    kiln_scope_end(ctx, 0, NULL);
    free(x);
    free(want);
}

static void test_engine_loop_budget_softmax_rows(void **state) {
    /* One invocation per row runs a loop for the max, one for the sum, then one over the row's
     * outputs (one per pass for an odd width): a row of 65533 came to 2 * 16385 + 65534
     * passes, one of 50001, whose loops are all far below 65535, to 2 * 12502 + 50002. From
     * 65536 on the reductions are split into kernels. */
    kiln_context *ctx = fx_ctx(state);
    check_softmax(ctx, 50001, false);
    check_softmax(ctx, 65533, true);
    check_softmax(ctx, 65535, true);
    check_softmax(ctx, 200000, true);
}

/* The softmax of a softmax: four reduction loops in one kernel (each stage reads the results
 * of the one before), then the row loop. */
static void test_engine_loop_budget_four_stages(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { W = 65533 };
    float *x = inputs(W), *once = malloc(W * sizeof *once), *want = malloc(W * sizeof *want);
    assert_non_null(once);
    assert_non_null(want);
    x[W - 1] = 3;
    kiln_tensor *t = fx_f32(ctx, 2, (const int64_t[]){1, W}, x);
    host_softmax(x, W, false, once);
    host_softmax(once, W, false, want);
    fx_check_f32(kiln_softmax(kiln_softmax(t, 1), 1), want, W, 1e-12, 1e-4);
    free(x);
    free(once);
    free(want);
}

/* On ctx: the sum of n elements (3 at the end) and the index of their maximum; then with ties
 * (3 also at 1001 and 1002, neighbours in different steps of an unrolled loop, and at 2000 and
 * 2001, in one step) the first wins. */
static void check_sum_argmax(kiln_context *ctx, int64_t n) {
    float *x = inputs((size_t)n);
    x[n - 1] = 3;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += x[i];
    kiln_scope_begin(ctx);
    kiln_tensor *t = fx_f32(ctx, 1, &n, x);
    fx_check_f32(kiln_sum(t, 0, NULL, false), (const float[]){(float)sum}, 1, 0, 0);
    fx_check_i64(kiln_argmax(t, 0, false), (const int64_t[]){n - 1}, 1);
    x[1001] = x[1002] = x[2000] = x[2001] = 3;
    fx_check_i64(kiln_argmax(fx_f32(ctx, 1, &n, x), 0, false), (const int64_t[]){1001}, 1);
    kiln_scope_end(ctx, 0, NULL);
    free(x);
}

/* A context like the fixture's that reduces with one invocation per output (a sum of few
 * outputs otherwise shares its elements among lanes: fewer steps per invocation). */
static kiln_context *one_lane_context(const eng_fixture *f) {
    kiln_context_options opt = {.device = f->device ? NULL : "interp", .validation = f->device};
    kiln_context *ctx = NULL;
    assert_int_equal(eng_testing_context_create(&opt, &(eng_testing){.group_lanes = 1}, &ctx),
                     KILN_OK);
    return ctx;
}

static void test_engine_loop_budget_sum_and_argmax(void **state) {
    /* argmax steps one element at a time: 65535 came to 65536 passes (lavapipe happened to
     * stop after the last); 200,000 is split into kernels. */
    check_sum_argmax(fx_ctx(state), 65535);
    check_sum_argmax(fx_ctx(state), 200000);
}

/* (1, k) @ (k, 2) of small integers: exact. */
static void check_matmul(kiln_context *ctx, int64_t k) {
    float *a = inputs((size_t)k), *b = inputs(2 * (size_t)k);
    float want[2];
    for (int64_t j = 0; j < 2; j++) {
        double s = 0;
        for (int64_t p = 0; p < k; p++)
            s += (double)a[p] * b[p * 2 + j];
        want[j] = (float)s;
    }
    kiln_scope_begin(ctx);
    kiln_tensor *ta = fx_f32(ctx, 2, (const int64_t[]){1, k}, a);
    kiln_tensor *tb = fx_f32(ctx, 2, (const int64_t[]){k, 2}, b);
    fx_check_f32(kiln_matmul(ta, tb), want, 2, 0, 0);
    kiln_scope_end(ctx, 0, NULL);
    free(a);
    free(b);
}

static void test_engine_loop_budget_matmul_k(void **state) {
    static const int64_t ks[] = {65535, 200000};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        check_matmul(fx_ctx(state), ks[i]);
}

/* A symbolic count is planned for its Variable's largest value (here eight elements a step,
 * the most): with one invocation per output, up to 524,264 elements (65533 steps and the pass
 * that leaves) are right; beyond, lavapipe refuses what it would cut short
 * (KILN_ERROR_UNSUPPORTED), other devices compute it. (200,000 was refused before.) */
static void test_engine_loop_budget_symbolic_count(void **state) {
    const eng_fixture *f = *state;
    kiln_context *ctx = one_lane_context(f);
    const kiln_expr *n = kiln_variable(ctx, "n", 1, 1000000);
    static const int64_t sizes[] = {65535, 200000, 500000, 600000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        kiln_scope_begin(ctx);
        const kiln_expr *len = kiln_bind(ctx, n, sizes[i]);
        kiln_tensor *ones = kiln_full_sym(ctx, KILN_F32, 1, &len, 1.0);
        kiln_tensor *s = kiln_sum(ones, 0, NULL, false);
        float got = 0;
        kiln_status st = kiln_read(s, &got, sizeof got);
        if (sizes[i] <= 500000 || st == KILN_OK) {
            assert_int_equal(st, KILN_OK);
            assert_true(got == (float)sizes[i]);
        } else {
            fx_expect_error(ctx, KILN_ERROR_UNSUPPORTED);
        }
        kiln_scope_end(ctx, 0, NULL);
    }
    eng_fixture_context_destroy(ctx);
}

/* ir_loop_passes counts a RANGE of n iterations as n + 1 passes each time its body is
 * reached: RANGE 3 { RANGE 5 {} } then RANGE (10 + 6) / 4 {} makes 4 + 3 * 6 + 5 = 27; a
 * RANGE whose end is a parameter has no constant count. */
static void test_engine_loop_budget_ir_passes(void **state) {
    (void)state;
    base_allocator alloc = base_allocator_make(NULL, NULL);
    ir_kernel k;
    ir_kernel_init(&k, &alloc, IR_I32);
    ir_range(&k, ir_const_i(&k, IR_I32, 3));
    ir_range(&k, ir_const_i(&k, IR_I32, 5));
    ir_endrange(&k);
    ir_endrange(&k);
    ir_value sum =
        ir_alu(&k, IR_ADD, IR_I32, ir_const_i(&k, IR_I32, 10), ir_const_i(&k, IR_I32, 6), IR_NONE);
    ir_range(&k, ir_alu(&k, IR_DIV, IR_I32, sum, ir_const_i(&k, IR_I32, 4), IR_NONE));
    ir_endrange(&k);
    uint64_t passes = 0;
    assert_true(ir_loop_passes(&k, &passes));
    assert_int_equal(passes, 27);
    ir_range(&k, ir_param(&k, 0));
    ir_endrange(&k);
    assert_false(ir_loop_passes(&k, &passes));
    ir_kernel_finish(&k);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_loop_budget_softmax_rows),
        ENG_TEST(test_engine_loop_budget_four_stages),
        ENG_TEST(test_engine_loop_budget_sum_and_argmax),
        ENG_TEST(test_engine_loop_budget_matmul_k),
        ENG_TEST(test_engine_loop_budget_symbolic_count),
        ENG_TEST(test_engine_loop_budget_ir_passes),
    };
    return ENG_RUN_BOTH(tests);
}
