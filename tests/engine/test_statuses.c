/* Each class of caller error has a status of its own (kiln_base.h), so that a program can act
 * on it without reading the message; the message names the public call that was made (not an
 * op it is built from) and the values involved. And the log: a context's messages reach the
 * callback in its options, the others the process-wide one, or stderr. */
#include "engine_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const float A_DATA[6] = {1, 2, 3, 4, 5, 6};

static kiln_tensor *two_by_three(kiln_context *ctx) {
    return fx_f32(ctx, 2, (const int64_t[]){2, 3}, A_DATA);
}

/* The new statuses come after every old one (their values are stable), each with a message of
 * its own. */
static void test_engine_statuses_each_has_its_message(void **state) {
    (void)state;
    const kiln_status added[] = {KILN_ERROR_OUT_OF_RANGE,   KILN_ERROR_OUT_OF_BOUNDS,
                                 KILN_ERROR_SHAPE_MISMATCH, KILN_ERROR_OVERLAP,
                                 KILN_ERROR_NOT_VIEWABLE,   KILN_ERROR_UNBOUND_VARIABLE,
                                 KILN_ERROR_DTYPE_MISMATCH, KILN_ERROR_INVALID_HANDLE};
    assert_int_equal(KILN_ERROR_INTERNAL, 17);
    for (size_t i = 0; i < sizeof added / sizeof added[0]; i++) {
        assert_true(added[i] > KILN_ERROR_INTERNAL);
        const char *m = kiln_status_string(added[i]);
        assert_string_not_equal(m, "unknown status");
        assert_string_not_equal(m, kiln_status_string(KILN_ERROR_INVALID_ARGUMENT));
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(m, kiln_status_string(added[j]));
    }
}

/* A dim, an axis or a value outside what is allowed: out of range. A composite (softmax is
 * built from kiln_max) names the call made. */
static void test_engine_statuses_out_of_range(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = two_by_three(ctx);
    assert_null(kiln_transpose(a, 0, 2));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_transpose", "2", "2 dims", NULL);
    assert_null(kiln_softmax(a, 2));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_softmax", "2", "2 dims", NULL);
    assert_null(kiln_sum(a, 1, (const int32_t[]){-3}, false));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_sum", "-3", NULL);
    assert_null(kiln_flip(a, 5));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_flip", "dim 5", "2 dims", NULL);
    assert_null(kiln_full(ctx, KILN_I32, 1, (const int64_t[]){2}, 3e9));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_full", "3000000000", "i32", NULL);
    assert_null(kiln_zeros(ctx, KILN_F32, 1, (const int64_t[]){-2}));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_zeros", "-2", NULL);
    const kiln_expr *n = kiln_variable(ctx, "n", 0, 10);
    assert_null(kiln_bind(ctx, n, 11));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_bind", "11", "[0, 10]", "n", NULL);
    /* a wrong argument of another kind keeps KILN_ERROR_INVALID_ARGUMENT */
    assert_null(kiln_permute(a, (const int32_t[]){1, 1}));
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_permute", "appears twice", NULL);
}

/* An index or extent beyond a size: out of bounds, with the index and the size. */
static void test_engine_statuses_out_of_bounds(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = two_by_three(ctx);
    assert_null(kiln_select(a, 1, 3));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_select", "index 3", "dim 1", "size 3",
                      NULL);
    assert_null(kiln_select(a, 0, -3));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_select", "index -3", "size 2", NULL);
    assert_null(kiln_narrow(a, 1, 2, 3));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_narrow", "start 2", "length 3", "size 3",
                      NULL);
    /* narrow_sym and slice_sym are built from narrow: they name themselves */
    assert_null(kiln_narrow_sym(a, 0, kiln_int(ctx, 1), kiln_int(ctx, 2)));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_narrow_sym", "start 1", "length 2",
                      NULL);
    assert_null(kiln_slice_sym(a, 1, kiln_int(ctx, 1), kiln_int(ctx, 5), 1));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_slice_sym", "size 3", NULL);
    assert_null(kiln_shrink(a, (const int64_t[]){0, 2}, (const int64_t[]){2, 4}));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_shrink", "[2, 4)", "dim 1", "size 3",
                      NULL);
    assert_null(kiln_unfold(a, 1, 4, 1));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_unfold", "size 4", "size 3", NULL);
    assert_null(kiln_as_strided(a, 1, (const int64_t[]){6}, (const int64_t[]){2}, 0));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_as_strided", "past the end", NULL);
    /* a creation that is no tensor op names itself too */
    assert_null(kiln_empty_strided(ctx, KILN_F32, 1, (const int64_t[]){3}, (const int64_t[]){-1}));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_empty_strided", "before the start",
                      NULL);
}

/* Shapes that do not fit together: both shapes and the sizes that differ. */
static void test_engine_statuses_shape_mismatch(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = two_by_three(ctx);
    kiln_tensor *v = kiln_zeros(ctx, KILN_F32, 1, (const int64_t[]){4});
    assert_null(kiln_add(a, v));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_add", "(2, 3)", "(4)", "3 and 4", NULL);
    assert_null(kiln_where(kiln_gt(a, a), a, v));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_where", "(4)", NULL);
    kiln_tensor *b = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){4, 5});
    assert_null(kiln_matmul(a, b));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_matmul",
                      "kiln_matmul: a is (2, 3), b is (4, 5): 3 != 4", NULL);
    assert_null(kiln_expand(a, 2, (const int64_t[]){2, 6}));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_expand", "size 3", "6", NULL);
    assert_null(kiln_reshape(a, 2, (const int64_t[]){4, 2}));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_reshape", "6", "8", NULL);
    assert_null(kiln_squeeze(a, 0));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_squeeze", "size 2", NULL);
    /* a write whose source does not broadcast: its own status, not sticky, naming the write */
    assert_int_equal(kiln_add_(a, v), KILN_ERROR_SHAPE_MISMATCH);
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_add_", "(2, 3)", "(4)", NULL);
    assert_int_equal(kiln_copy_(a, v), KILN_ERROR_SHAPE_MISMATCH);
    assert_null(strstr(kiln_context_message(ctx), "kiln_expand"));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_copy_", "4", "3", NULL);
    fx_check_f32(a, A_DATA, 6, 0, 0);
}

/* A write into a destination whose elements share storage, or that is no view of a storage. */
static void test_engine_statuses_overlap_and_not_viewable(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = two_by_three(ctx);
    kiln_tensor *row = kiln_expand(kiln_narrow(a, 0, 0, 1), 2, (const int64_t[]){4, 3});
    assert_int_equal(kiln_copy_(row, kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){4, 3})),
                     KILN_ERROR_OVERLAP);
    fx_expect_message(ctx, KILN_ERROR_OVERLAP, "kiln_copy_", "one storage element", NULL);
    assert_int_equal(kiln_add_(row, row), KILN_ERROR_OVERLAP);
    fx_expect_message(ctx, KILN_ERROR_OVERLAP, "kiln_add_", NULL);
    /* a reshape of a transpose is a new tensor (a copy in torch): writable, a stays */
    kiln_tensor *flat = kiln_reshape(kiln_transpose(a, 0, 1), 1, (const int64_t[]){6});
    assert_int_equal(kiln_fill_(flat, 0), KILN_OK);
    fx_check_f32(flat, (const float[]){0, 0, 0, 0, 0, 0}, 6, 0, 0);
    /* padding has no storage to write */
    assert_int_equal(kiln_fill_(kiln_pad(a, (const int64_t[]){0, 0, 1, 1}), 0),
                     KILN_ERROR_NOT_VIEWABLE);
    fx_expect_message(ctx, KILN_ERROR_NOT_VIEWABLE, "kiln_fill_", "padded", NULL);
    fx_check_f32(a, A_DATA, 6, 0, 0); /* nothing was written */
}

/* A size whose Variable was never bound, where its value is needed. */
static void test_engine_statuses_unbound_variable(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const kiln_expr *rows = kiln_variable(ctx, "rows", 1, 16);
    kiln_tensor *x = kiln_full_sym(ctx, KILN_F32, 1, &rows, 2);
    assert_int_equal(kiln_realize(kiln_exp(x)), KILN_ERROR_UNBOUND_VARIABLE);
    fx_expect_message(ctx, KILN_ERROR_UNBOUND_VARIABLE, "kiln_realize", "Variable rows",
                      "never bound", NULL);
    float out[16];
    assert_int_equal(kiln_read(kiln_sum(x, 0, NULL, false), out, sizeof(float)),
                     KILN_ERROR_UNBOUND_VARIABLE);
    fx_expect_message(ctx, KILN_ERROR_UNBOUND_VARIABLE, "kiln_read", "Variable rows", NULL);
    int64_t size;
    assert_int_equal(kiln_tensor_shape(x, &size), KILN_ERROR_UNBOUND_VARIABLE);
    fx_expect_message(ctx, KILN_ERROR_UNBOUND_VARIABLE, "kiln_tensor_shape", "Variable rows", NULL);
    assert_int_equal(kiln_expr_value(ctx, rows, &size), KILN_ERROR_UNBOUND_VARIABLE);
    fx_expect_message(ctx, KILN_ERROR_UNBOUND_VARIABLE, "kiln_expr_value", "Variable rows", NULL);
}

/* A handle released, of an ended scope, or of another context. */
static void test_engine_statuses_invalid_handle(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = two_by_three(ctx);
    kiln_tensor *t = kiln_exp(a);
    assert_int_equal(kiln_release(t), KILN_OK);
    assert_null(kiln_neg(t));
    fx_expect_message(ctx, KILN_ERROR_INVALID_HANDLE, "kiln_neg", "released", NULL);
    float out[6];
    assert_int_equal(kiln_read(t, out, sizeof out), KILN_ERROR_INVALID_HANDLE);
    fx_expect_message(ctx, KILN_ERROR_INVALID_HANDLE, "kiln_read", "released", NULL);
    assert_int_equal(kiln_release(t), KILN_ERROR_INVALID_HANDLE);
    fx_expect_message(ctx, KILN_ERROR_INVALID_HANDLE, "kiln_release", NULL);
    kiln_context *other = eng_context_new(false);
    assert_non_null(other);
    kiln_tensor *o = fx_f32(other, 2, (const int64_t[]){2, 3}, A_DATA);
    assert_null(kiln_add(a, o));
    fx_expect_message(ctx, KILN_ERROR_INVALID_HANDLE, "kiln_add", "another context", NULL);
    assert_int_equal(kiln_copy_(a, o), KILN_ERROR_INVALID_HANDLE);
    fx_expect_message(ctx, KILN_ERROR_INVALID_HANDLE, "kiln_copy_", "another context", NULL);
    eng_fixture_context_destroy(other);
    /* a NULL handle is an invalid argument, not an invalid handle */
    assert_int_equal(kiln_release(NULL), KILN_OK);
    assert_int_equal(kiln_read(NULL, out, sizeof out), KILN_ERROR_INVALID_ARGUMENT);
    fx_check_f32(a, A_DATA, 6, 0, 0);
}

/* An operand of a dtype the call does not accept. */
static void test_engine_statuses_dtype_mismatch(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *i = kiln_cast(two_by_three(ctx), KILN_I32);
    assert_null(kiln_mean(i, 0, NULL, false));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_mean", "float", NULL);
    kiln_tensor *b = kiln_cast(i, KILN_BOOL);
    assert_null(kiln_sub(b, b));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_sub", "bool", NULL);
    assert_null(kiln_rand(ctx, KILN_I32, 1, (const int64_t[]){2}, 1));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_rand", "float", NULL);
    /* an unknown dtype value is an invalid argument */
    assert_null(kiln_cast(i, (kiln_dtype)42));
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_cast", "42", NULL);
}

/* ---- the log ------------------------------------------------------------------------------- */

typedef struct received {
    int count;
    kiln_log_level level;
    char module[32];
    char text[1024];
} received;

static void receive(void *user, kiln_log_level level, const char *module, const char *message) {
    received *r = user;
    r->count++;
    r->level = level;
    snprintf(r->module, sizeof r->module, "%s", module);
    size_t n = strlen(r->text);
    snprintf(r->text + n, sizeof r->text - n, "%s\n", message);
}

/* A cache directory whose name is too long for a path: the context is made, with a warning. */
static char long_dir[4200];

static kiln_status create_with_long_cache_dir(kiln_log_fn fn, void *user, kiln_context **ctx) {
    memset(long_dir, 'd', sizeof long_dir - 1);
    long_dir[0] = '/';
    long_dir[sizeof long_dir - 1] = '\0';
    /* ctest turns the disk cache off (KILN_CACHE=0): on again, for the directory to matter */
    char *saved = getenv("KILN_CACHE") ? strdup(getenv("KILN_CACHE")) : NULL;
    setenv("KILN_CACHE", "1", 1);
    kiln_context_options opt = {.cache_dir = long_dir, .log = fn, .log_user = user};
    kiln_status st = kiln_context_create(&opt, ctx);
    if (saved)
        setenv("KILN_CACHE", saved, 1);
    else
        unsetenv("KILN_CACHE");
    free(saved);
    return st;
}

/* Runs create_with_long_cache_dir with stderr into a file; returns what was written there. */
static kiln_status create_capturing_stderr(kiln_context **ctx, char *err, size_t cap) {
    fflush(stderr);
    FILE *f = tmpfile();
    assert_non_null(f);
    int saved = dup(2);
    assert_true(saved >= 0 && dup2(fileno(f), 2) >= 0);
    kiln_status st = create_with_long_cache_dir(NULL, NULL, ctx);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(f);
    size_t n = fread(err, 1, cap - 1, f);
    err[n] = '\0';
    fclose(f);
    return st;
}

/* A context's warning goes to its callback, with its module and level; a context without one
 * writes to stderr, or to the process-wide callback when there is one. */
static void test_engine_statuses_log_goes_to_the_contexts_callback(void **state) {
    (void)state;
    kiln_context *probe = eng_context_new(true);
    if (!probe)
        skip(); /* the disk cache (and its warning) is a device context's */
    eng_fixture_context_destroy(probe);
    received mine = {0};
    kiln_context *a = NULL;
    assert_int_equal(create_with_long_cache_dir(receive, &mine, &a), KILN_OK);
    assert_true(mine.count >= 1);
    assert_int_equal(mine.level, KILN_LOG_WARN);
    assert_string_equal(mine.module, "shaders_cache");
    assert_non_null(strstr(mine.text, "continuing without the kernel cache"));
    /* b has no callback: stderr, the first context's callback hears nothing of it */
    int before = mine.count;
    char err[2048];
    kiln_context *b = NULL;
    assert_int_equal(create_capturing_stderr(&b, err, sizeof err), KILN_OK);
    assert_non_null(strstr(err, "kiln shaders_cache: warning: the cache directory's name"));
    assert_int_equal(mine.count, before);
    kiln_context_destroy(b);
    /* with a process-wide callback, there (and a's messages still go to a's) */
    received all = {0};
    kiln_set_log_callback(receive, &all);
    assert_int_equal(create_with_long_cache_dir(NULL, NULL, &b), KILN_OK);
    kiln_set_log_callback(NULL, NULL);
    assert_true(all.count >= 1);
    assert_non_null(strstr(all.text, "continuing without the kernel cache"));
    assert_int_equal(mine.count, before);
    /* a computes as ever, and nothing it logs reaches stderr or the process-wide callback */
    fx_check_f32(kiln_sum(kiln_arange(a, KILN_F32, 0, 4, 1), 0, NULL, false), (const float[]){6}, 1,
                 0, 0);
    kiln_context_destroy(b);
    kiln_context_destroy(a);
    /* NULL restored stderr */
    assert_int_equal(create_capturing_stderr(&b, err, sizeof err), KILN_OK);
    assert_non_null(strstr(err, "the cache directory's name"));
    kiln_context_destroy(b);
}

/* Before a context exists: a failed creation's message goes to the process-wide callback,
 * or to the callback its options name. */
static void test_engine_statuses_log_before_a_context(void **state) {
    (void)state;
    received all = {0}, mine = {0};
    kiln_set_log_callback(receive, &all);
    kiln_context *ctx = (kiln_context *)1;
    kiln_status st = kiln_context_create(&(kiln_context_options){.device = "nonexistent"}, &ctx);
    assert_int_equal(st, KILN_ERROR_NOT_FOUND);
    assert_null(ctx);
    assert_true(all.count >= 1);
    assert_int_equal(all.level, KILN_LOG_ERROR);
    assert_string_equal(all.module, "engine");
    assert_non_null(strstr(all.text, "context creation failed"));
    assert_non_null(strstr(all.text, "nonexistent"));
    /* its own callback takes precedence */
    int before = all.count;
    st = kiln_context_create(
        &(kiln_context_options){.device = "nonexistent", .log = receive, .log_user = &mine}, &ctx);
    assert_int_equal(st, KILN_ERROR_NOT_FOUND);
    assert_int_equal(all.count, before);
    assert_non_null(strstr(mine.text, "context creation failed"));
    kiln_set_log_callback(NULL, NULL);
}

/* A device profile by name (kiln_context_options.profile): in force and named, the device's
 * int64 gone; "none" is none; an unknown name is KILN_ERROR_INVALID_ARGUMENT whose message
 * names it and lists the profiles. The interpreter takes no profile. */
static void test_engine_statuses_device_profiles_by_name(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = NULL;
    const char *device = f->device ? NULL : "interp";
    kiln_context_options opt = {.device = device, .validation = f->device, .profile = "MOBILE-LOW"};
    assert_int_equal(kiln_context_create(&opt, &ctx), KILN_OK);
    if (f->device) {
        assert_string_equal(kiln_context_profile(ctx), "mobile-low");
        assert_false(kiln_dtype_supported(ctx, KILN_I64));
    } else {
        assert_null(kiln_context_profile(ctx));
        assert_true(kiln_dtype_supported(ctx, KILN_I64));
    }
    assert_true(kiln_dtype_supported(ctx, KILN_U8));
    assert_true(kiln_dtype_supported(ctx, KILN_F16));
    assert_false(kiln_dtype_supported(ctx, KILN_DTYPE_COUNT_));
    assert_false(kiln_dtype_supported(NULL, KILN_F32));
    eng_fixture_context_destroy(ctx);
    ctx = NULL;
    opt.profile = "none";
    assert_int_equal(kiln_context_create(&opt, &ctx), KILN_OK);
    assert_null(kiln_context_profile(ctx));
    eng_fixture_context_destroy(ctx);
    if (!f->device)
        return;
    received mine = {0};
    ctx = (kiln_context *)1;
    opt.profile = "mobile-giant";
    opt.log = receive;
    opt.log_user = &mine;
    assert_int_equal(kiln_context_create(&opt, &ctx), KILN_ERROR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_non_null(strstr(mine.text, "no device profile \"mobile-giant\""));
    assert_non_null(strstr(mine.text, "mobile-low, mobile-mid"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_statuses_out_of_range),
        ENG_TEST(test_engine_statuses_out_of_bounds),
        ENG_TEST(test_engine_statuses_shape_mismatch),
        ENG_TEST(test_engine_statuses_overlap_and_not_viewable),
        ENG_TEST(test_engine_statuses_unbound_variable),
        ENG_TEST(test_engine_statuses_invalid_handle),
        ENG_TEST(test_engine_statuses_dtype_mismatch),
        ENG_TEST(test_engine_statuses_device_profiles_by_name),
    };
    const struct CMUnitTest own_contexts[] = {
        cmocka_unit_test(test_engine_statuses_each_has_its_message),
        cmocka_unit_test(test_engine_statuses_log_goes_to_the_contexts_callback),
        cmocka_unit_test(test_engine_statuses_log_before_a_context),
    };
    return ENG_RUN_BOTH(tests) +
           cmocka_run_group_tests_name("own contexts", own_contexts, NULL, NULL);
}
