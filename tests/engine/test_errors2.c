/* Errors a program can act on (issue 20): a bad argument is refused at the call that got it,
 * with a status that says whose mistake it was and a message naming the call and the values,
 * and no argument is read out of bounds on the way. */
#include "engine_fixture.h"

#include <stdio.h>
#include <string.h>

/* Asserts that the context holds status with a message containing each of the NULL-ended
 * strings, then clears the error. */
static void expect_message(kiln_context *ctx, kiln_status status, ...) {
    const char *msg = kiln_context_message(ctx);
    if (kiln_context_status(ctx) != status)
        fail_msg("status %s, expected %s (%s)", kiln_status_string(kiln_context_status(ctx)),
                 kiln_status_string(status), msg);
    va_list ap;
    va_start(ap, status);
    for (const char *want; (want = va_arg(ap, const char *)) != NULL;) {
        if (!strstr(msg, want))
            fail_msg("the message \"%s\" does not contain \"%s\"", msg, want);
    }
    va_end(ap);
    kiln_context_clear_error(ctx);
}

static const float A_DATA[6] = {1, 2, 3, 4, 5, 6};

static kiln_tensor *two_by_three(kiln_context *ctx) {
    return fx_f32(ctx, 2, (const int64_t[]){2, 3}, A_DATA);
}

/* An unknown dtype is refused before anything reads a table with it (ASan sees any read). */
static void test_engine_errors2_randn_sym_unknown_dtype(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const kiln_expr *shape[] = {kiln_int(ctx, 3)};
    assert_null(kiln_randn_sym(ctx, (kiln_dtype)99, 1, shape, 1));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_randn", "99", NULL);
    assert_null(kiln_randn_sym(ctx, (kiln_dtype)-7, 1, shape, 1));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_randn", "-7", NULL);
    assert_null(kiln_rand_sym(ctx, KILN_DTYPE_COUNT_, 1, shape, 1));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_rand", NULL);
    assert_null(kiln_randn_sym(ctx, KILN_I32, 1, shape, 1)); /* a known dtype, not a float */
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_randn", "float", NULL);
}

/* Each message names the public call and the values that make the arguments wrong. */
static void test_engine_errors2_messages_name_the_call_and_values(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = two_by_three(ctx);
    assert_null(kiln_permute(a, (const int32_t[]){1, 1}));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_permute", "dim 1 appears twice", NULL);
    assert_null(kiln_permute(a, (const int32_t[]){-1, 1})); /* -1 is dim 1 too */
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_permute", "appears twice", NULL);
    assert_null(kiln_permute(a, (const int32_t[]){0, 2}));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_permute", "2", NULL);
    /* unfold: a step past the end asks for one window (as torch), however large; one whose
     * windows' stride (step times the dim's, 3) overflows int64 is refused at the call. */
    fx_check_f32(kiln_unfold(a, 1, 2, INT64_MAX), (const float[]){1, 2, 4, 5}, 4, 0, 0);
    assert_null(kiln_unfold(a, 0, 1, INT64_MAX));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_unfold", "9223372036854775807",
                   "overflows", NULL);
    /* The huge step left nothing behind: the next refusal reports its own cause. */
    assert_null(kiln_permute(a, (const int32_t[]){0, 0}));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_permute: dim 0 appears twice", NULL);
    assert_null(kiln_unfold(a, 1, 4, 1));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_unfold", "4", "3", NULL);
    assert_null(kiln_unfold(a, 1, 2, 0));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_unfold", "step 0", NULL);
    assert_null(kiln_softmax(a, 2));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_softmax", "2", NULL);
    assert_null(kiln_log_softmax(a, -3));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_log_softmax", "-3", NULL);
    kiln_tensor *b = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){4, 5});
    assert_null(kiln_matmul(a, b));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT,
                   "kiln_matmul: a is (2, 3), b is (4, 5): 3 != 4", NULL);
    kiln_tensor *v = kiln_zeros(ctx, KILN_F32, 1, (const int64_t[]){4});
    assert_null(kiln_matmul(a, v));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_matmul: a is (2, 3), b is (4): 3 != 4",
                   NULL);
    assert_null(kiln_narrow(a, 1, 2, 3));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_narrow", "start 2", "length 3", NULL);
    assert_null(kiln_narrow(a, 1, -5, 1));
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_narrow", "-5", NULL);
    /* What is right still works after the refusals. */
    fx_check_f32(kiln_narrow(a, 1, 1, 2), (const float[]){2, 3, 5, 6}, 4, 0, 0);
    fx_check_f32(kiln_unfold(kiln_reshape(a, 1, (const int64_t[]){6}), 0, 2, 4),
                 (const float[]){1, 2, 5, 6}, 4, 0, 0);
}

/* A size or value whose Variable was never bound is the caller's mistake, named: a reduction
 * over it (which lowering used to report as a bug in Kiln), an elementwise result of that
 * size, an expression's value computed in a kernel, and the queries. */
static void test_engine_errors2_unbound_variable_is_a_caller_error(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const kiln_expr *n = kiln_variable(ctx, "rows", 1, 16);
    kiln_tensor *x = kiln_full_sym(ctx, KILN_F32, 1, &n, 2);
    float out[16];
    assert_int_equal(kiln_read(kiln_sum(x, 0, NULL, false), out, sizeof(float)),
                     KILN_ERROR_INVALID_ARGUMENT);
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "Variable rows", "never bound", NULL);
    assert_int_equal(kiln_read(kiln_exp(x), out, sizeof out), KILN_ERROR_INVALID_ARGUMENT);
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "Variable rows", NULL);
    assert_int_equal(kiln_realize(kiln_exp(x)), KILN_ERROR_INVALID_ARGUMENT);
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "Variable rows", NULL);
    assert_int_equal(kiln_read(kiln_scalar_expr(ctx, KILN_F32, n), out, sizeof(float)),
                     KILN_ERROR_INVALID_ARGUMENT);
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "Variable rows", NULL);
    int64_t size;
    assert_int_equal(kiln_tensor_shape(x, &size), KILN_ERROR_INVALID_ARGUMENT);
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_tensor_shape", "Variable rows", NULL);
    assert_int_equal(kiln_expr_value(ctx, n, &size), KILN_ERROR_INVALID_ARGUMENT);
    expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "Variable rows", NULL);
    /* Bound, the same computations run. */
    const kiln_expr *b = kiln_bind(ctx, n, 3);
    kiln_tensor *y = kiln_full_sym(ctx, KILN_F32, 1, &b, 2);
    fx_check_f32(kiln_sum(y, 0, NULL, false), (const float[]){6}, 1, 0, 0);
    fx_check_f32(kiln_scalar_expr(ctx, KILN_F32, b), (const float[]){3}, 1, 0, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_errors2_randn_sym_unknown_dtype),
        ENG_TEST(test_engine_errors2_messages_name_the_call_and_values),
        ENG_TEST(test_engine_errors2_unbound_variable_is_a_caller_error),
    };
    return ENG_RUN_BOTH(tests);
}
