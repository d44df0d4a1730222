/* The context, dtype helpers and integer expressions on both backends: device names,
 * statistics, kiln_dtype_size/name, floor division and modulo, Variables and their ranges,
 * symbolic sizes of tensors. All values exact. */
#include "engine_fixture.h"

#include <string.h>

static void test_engine_context_names_and_stats(void **state) {
    eng_fixture *f = *state;
    const char *name = kiln_context_device_name(f->ctx);
    assert_non_null(name);
    if (f->device)
        assert_true(strcmp(name, "interpreter") != 0 && name[0] != '\0');
    else
        assert_string_equal(name, "interpreter");
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    kiln_stats s = kiln_context_stats(ctx);
    assert_int_equal(s.realizes, 0);
    assert_int_equal(s.kernels_compiled, 0);
    assert_int_equal(s.dispatches, 0);
    /* 6 floats up, 2 floats down through one kernel. */
    kiln_tensor *x = fx_f32(ctx, 1, (const int64_t[]){6}, (const float[]){1, 2, 3, 4, 5, 6});
    fx_check_f32(
        kiln_sum(kiln_reshape(x, 2, (const int64_t[]){2, 3}), 1, (const int32_t[]){1}, false),
        (const float[]){6, 15}, 2, 0, 0);
    s = kiln_context_stats(ctx);
    assert_int_equal(s.bytes_uploaded, 24);
    assert_int_equal(s.bytes_downloaded, 8);
    assert_int_equal(s.realizes, 1);
    assert_int_equal(s.dispatches, 1);
    eng_fixture_context_destroy(ctx);
    kiln_context_destroy(NULL); /* a no-op */
    assert_int_equal(kiln_context_create(NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    /* (With validation like every other context here: vk/ keeps instance-level functions in
     * volk's globals, so an instance created without the layer and then another destroyed
     * with it calls a NULL vkDestroyDebugUtilsMessengerEXT.) */
    kiln_context *none = (kiln_context *)1;
    assert_int_equal(
        kiln_context_create(
            &(kiln_context_options){.device = "no such device 123", .validation = true}, &none),
        KILN_ERROR_NOT_FOUND);
    assert_null(none);
}

/* Device time is counted once per dispatch: reading a realized tensor again runs no kernel and
 * adds no time (the batch's time of the previous submission was counted again on each read). */
static void test_engine_context_device_time_counted_once(void **state) {
    eng_fixture *f = *state;
    kiln_context_options opt = {
        .device = f->device ? NULL : "interp", .validation = f->device, .timing = true};
    kiln_context *ctx = NULL;
    assert_int_equal(kiln_context_create(&opt, &ctx), KILN_OK);
    kiln_tensor *x = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){1, 2, 3, 4});
    kiln_tensor *y = kiln_exp(kiln_add(x, x));
    assert_int_equal(kiln_realize(y), KILN_OK);
    kiln_stats first = kiln_context_stats(ctx);
    assert_int_equal(first.dispatches, 1);
    if (!f->device)
        assert_int_equal(first.device_time_ns, 0); /* the interpreter has no timestamps */
    float out[4];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(kiln_read(y, out, sizeof out), KILN_OK);
        assert_int_equal(kiln_realize(y), KILN_OK);
    }
    kiln_stats s = kiln_context_stats(ctx);
    assert_int_equal(s.dispatches, 1);
    assert_int_equal(s.device_time_ns, first.device_time_ns);
    /* A new kernel adds its own time, once. */
    kiln_tensor *z = kiln_mul(y, y);
    assert_int_equal(kiln_realize(z), KILN_OK);
    kiln_stats t = kiln_context_stats(ctx);
    assert_int_equal(t.dispatches, 2);
    assert_true(t.device_time_ns >= s.device_time_ns);
    assert_int_equal(kiln_read(z, out, sizeof out), KILN_OK);
    assert_int_equal(kiln_context_stats(ctx).device_time_ns, t.device_time_ns);
    eng_fixture_context_destroy(ctx);
}

static void test_engine_context_dtype_helpers(void **state) {
    (void)state;
    assert_int_equal(kiln_dtype_size(KILN_F32), 4);
    assert_int_equal(kiln_dtype_size(KILN_F16), 2);
    assert_int_equal(kiln_dtype_size(KILN_I32), 4);
    assert_int_equal(kiln_dtype_size(KILN_U32), 4);
    assert_int_equal(kiln_dtype_size(KILN_I8), 1);
    assert_int_equal(kiln_dtype_size(KILN_U8), 1);
    assert_int_equal(kiln_dtype_size(KILN_BOOL), 1);
    for (int d = 0; d < KILN_DTYPE_COUNT_; d++) {
        assert_non_null(kiln_dtype_name((kiln_dtype)d));
        assert_true(kiln_dtype_name((kiln_dtype)d)[0] != '\0');
    }
    assert_string_not_equal(kiln_dtype_name(KILN_F32), kiln_dtype_name(KILN_F16));
    assert_non_null(kiln_status_string(KILN_ERROR_INVALID_ARGUMENT));
    assert_string_equal(kiln_status_string(KILN_OK), "success");
}

static void test_engine_context_expressions(void **state) {
    kiln_context *ctx = fx_ctx(state);
    int64_t v = 0;
    /* Floor division and modulo: -7 // 2 = -4, -7 % 2 = 1, 7 // -2 = -4, 7 % -2 = -1. */
    const kiln_expr *m7 = kiln_int(ctx, -7), *p7 = kiln_int(ctx, 7);
    const kiln_expr *two = kiln_int(ctx, 2), *m2 = kiln_int(ctx, -2);
    assert_int_equal(kiln_expr_value(ctx, kiln_expr_div(ctx, m7, two), &v), KILN_OK);
    assert_int_equal(v, -4);
    assert_int_equal(kiln_expr_value(ctx, kiln_expr_mod(ctx, m7, two), &v), KILN_OK);
    assert_int_equal(v, 1);
    assert_int_equal(kiln_expr_value(ctx, kiln_expr_div(ctx, p7, m2), &v), KILN_OK);
    assert_int_equal(v, -4);
    assert_int_equal(kiln_expr_value(ctx, kiln_expr_mod(ctx, p7, m2), &v), KILN_OK);
    assert_int_equal(v, -1);
    /* Hash-consed: equal expressions are the same pointer. */
    assert_ptr_equal(kiln_expr_add(ctx, two, p7), kiln_expr_add(ctx, p7, two));
    /* A Variable bound to 5: 3 n + 2 = 17; unbound, its value is an error. */
    const kiln_expr *n = kiln_variable(ctx, "n", 1, 10);
    assert_non_null(n);
    assert_int_not_equal(kiln_expr_value(ctx, n, &v), KILN_OK);
    assert_int_not_equal(kiln_context_status(ctx), KILN_OK);
    kiln_context_clear_error(ctx);
    const kiln_expr *n5 = kiln_bind(ctx, n, 5);
    assert_int_equal(
        kiln_expr_value(ctx, kiln_expr_add(ctx, kiln_expr_mul(ctx, kiln_int(ctx, 3), n5), two), &v),
        KILN_OK);
    assert_int_equal(v, 17);
    /* Outside the range, a bad name, an empty range: NULL and an error. */
    assert_null(kiln_bind(ctx, n, 11));
    fx_expect_error(ctx, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_variable(ctx, "2bad", 0, 1));
    fx_expect_error(ctx, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_variable(ctx, "m", 5, 4));
    fx_expect_error(ctx, KILN_ERROR_INVALID_ARGUMENT);
    /* A tensor of symbolic size: its shape query evaluates the bound value, the size expression
     * is the bound Variable; reshape_sym and expand_sym take expressions. */
    kiln_tensor *t = kiln_full_sym(ctx, KILN_F32, 1, &n5, 2.0);
    fx_assert_shape(t, 1, (const int64_t[]){5});
    assert_ptr_equal(kiln_tensor_size_expr(t, 0), n5);
    fx_check_f32(t, (const float[]){2, 2, 2, 2, 2}, 5, 0, 0);
    const kiln_expr *shape2[2] = {kiln_int(ctx, 1), n5};
    kiln_tensor *r = kiln_reshape_sym(t, 2, shape2);
    fx_assert_shape(r, 2, (const int64_t[]){1, 5});
    const kiln_expr *shape3[2] = {kiln_int(ctx, 3), n5};
    kiln_tensor *e = kiln_expand_sym(r, 2, shape3);
    fx_assert_shape(e, 2, (const int64_t[]){3, 5});
    fx_check_f32(kiln_sum(e, 0, NULL, false), (const float[]){30}, 1, 0, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_context_names_and_stats),
        ENG_TEST(test_engine_context_device_time_counted_once),
        ENG_TEST(test_engine_context_dtype_helpers),
        ENG_TEST(test_engine_context_expressions),
    };
    return ENG_RUN_BOTH(tests);
}
