/* Realization itself, on both backends: graphs thousands of kernels deep realize in one call
 * (scheduling keeps its own stack), and kiln_realize_many takes any count. */
#include "engine_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool on_device(void **state) {
    return ((eng_fixture *)*state)->device;
}

static void assert_message_has(kiln_context *ctx, const char *part) {
    const char *msg = kiln_context_message(ctx);
    if (!strstr(msg, part))
        fail_msg("the message \"%s\" does not say \"%s\"", msg, part);
}

/* ---- depth -------------------------------------------------------------------------------- */

/* x <- x0 + sum(x) / 4, steps times: every step's kernel reads the reduction of the step
 * before, so the graph is about steps kernels deep (the last kernel fuses the last few sums as
 * stages of a row kernel): at least kernels deep. sum(x) gains 6 per step and x0 = {0, 1, 2, 3}
 * ends at x0 + 1.5 steps. */
static void reduction_chain(kiln_context *ctx, int kernels) {
    int steps = kernels + 10;
    kiln_tensor *x0 = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){0, 1, 2, 3});
    kiln_tensor *x = x0;
    for (int k = 0; k < steps; k++)
        x = kiln_add(x0, kiln_mul_scalar(kiln_sum(x, 0, NULL, false), 0.25));
    kiln_stats before = kiln_context_stats(ctx);
    kiln_status st = kiln_realize(x);
    if (st != KILN_OK)
        fail_msg("kiln_realize: %s", kiln_context_message(ctx));
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(after.realizes - before.realizes, 1);
    assert_true(after.dispatches - before.dispatches >= (uint64_t)kernels);
    float want[4];
    for (int i = 0; i < 4; i++)
        want[i] = (float)i + 1.5f * (float)steps;
    fx_check_f32(x, want, 4, 0, 0);
}

static void test_engine_realize_graph_1000_kernels_deep(void **state) {
    reduction_chain(fx_ctx(state), 1000);
}

static void test_engine_realize_graph_10000_kernels_deep(void **state) {
    if (on_device(state))
        skip(); /* the interpreter's run is the quick one */
    reduction_chain(fx_ctx(state), 10000);
}

/* x <- x + (max(x) - min(x)), 1000 times: each step reads reductions of the last, and the
 * steps in between are elementwise, unrealized, inlined into one another (a kernel build cuts
 * the chain). x0 = {0, 1, 2, 3} gains 3 per step. On the device it compiles some 40 kernels:
 * the interpreter only. */
static void test_engine_realize_deep_chain_of_inlined_steps(void **state) {
    if (on_device(state))
        skip();
    kiln_context *ctx = fx_ctx(state);
    enum { STEPS = 1000 };
    kiln_tensor *x = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){0, 1, 2, 3});
    for (int k = 0; k < STEPS; k++)
        x = kiln_add(x, kiln_sub(kiln_max(x, 0, NULL, false), kiln_min(x, 0, NULL, false)));
    assert_int_equal(kiln_realize(x), KILN_OK);
    fx_check_f32(x, (const float[]){3 * STEPS, 3 * STEPS + 1, 3 * STEPS + 2, 3 * STEPS + 3}, 4, 0,
                 0);
}

/* 1000 in-place adds, each after a sum of the value before it: realizing the last write first
 * realizes every earlier sum (program order), one write deeper each time. */
static void test_engine_realize_deep_writes_keep_program_order(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { STEPS = 1000 };
    kiln_tensor *s = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){0, 1, 2, 3});
    kiln_tensor **sums = malloc(STEPS * sizeof *sums);
    assert_non_null(sums);
    kiln_tensor *one = kiln_scalar(ctx, KILN_F32, 1);
    for (int k = 0; k < STEPS; k++) {
        sums[k] = kiln_sum(s, 0, NULL, false);
        assert_int_equal(kiln_add_(s, one), KILN_OK);
    }
    assert_int_equal(kiln_realize(s), KILN_OK);
    fx_check_f32(s, (const float[]){STEPS, STEPS + 1, STEPS + 2, STEPS + 3}, 4, 0, 0);
    for (int k = 0; k < STEPS; k++) {
        float v = -1;
        assert_int_equal(kiln_read(sums[k], &v, sizeof v), KILN_OK);
        if (v != 6.0f + 4.0f * (float)k)
            fail_msg("sum %d: got %g, want %g", k, v, 6.0 + 4.0 * k);
    }
    free(sums);
}

/* Chained adds, 20,000 on the interpreter (nested in one kernel they overflowed the C stack
 * under ASan from about 15,000), 1,000 on the device: the chain is cut into kernels. */
static void test_engine_realize_long_elementwise_chain(void **state) {
    kiln_context *ctx = fx_ctx(state);
    int steps = on_device(state) ? 1000 : 20000;
    kiln_tensor *x = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){0, 1, 2, 3});
    for (int k = 0; k < steps; k++)
        x = kiln_add_scalar(x, 1);
    float n = (float)steps;
    fx_check_f32(x, (const float[]){n, n + 1, n + 2, n + 3}, 4, 0, 0);
}

/* ---- kiln_realize_many -------------------------------------------------------------------- */

static void test_engine_realize_many_takes_1000_tensors(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { COUNT = 1000 };
    kiln_tensor *a = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){1, 2, 3, 4});
    kiln_tensor **t = malloc(COUNT * sizeof *t);
    assert_non_null(t);
    for (int i = 0; i < COUNT; i++) { /* one kernel for all: a times a scalar buffer */
        float v = (float)i;
        t[i] = kiln_mul(a, kiln_from_data(ctx, KILN_F32, 0, NULL, &v));
    }
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize_many(ctx, COUNT, t), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(after.realizes - before.realizes, 1);
    assert_int_equal(after.dispatches - before.dispatches, COUNT);
    for (int i = 0; i < COUNT; i++) {
        float f = (float)i;
        fx_check_f32(t[i], (const float[]){f, 2 * f, 3 * f, 4 * f}, 4, 0, 0);
    }
    /* Realized already: nothing runs again. */
    assert_int_equal(kiln_realize_many(ctx, COUNT, t), KILN_OK);
    assert_int_equal(kiln_context_stats(ctx).dispatches, after.dispatches);
    free(t);
    assert_int_equal(kiln_realize_many(ctx, 0, NULL), KILN_OK);
    kiln_tensor *with_null[2] = {a, NULL};
    assert_int_equal(kiln_realize_many(ctx, 2, with_null), KILN_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "tensor 1 of 2 is NULL");
    fx_expect_error(ctx, KILN_ERROR_INVALID_ARGUMENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_realize_graph_1000_kernels_deep),
        ENG_TEST(test_engine_realize_graph_10000_kernels_deep),
        ENG_TEST(test_engine_realize_deep_chain_of_inlined_steps),
        ENG_TEST(test_engine_realize_deep_writes_keep_program_order),
        ENG_TEST(test_engine_realize_long_elementwise_chain),
        ENG_TEST(test_engine_realize_many_takes_1000_tensors),
    };
    return ENG_RUN_BOTH(tests);
}
