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

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_errors2_randn_sym_unknown_dtype),
    };
    return ENG_RUN_BOTH(tests);
}
