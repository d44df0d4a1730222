/* Bad input on both backends: every failing call returns NULL (or a status), the context holds
 * a status and a message, the error is sticky until cleared, and every existing tensor is still
 * readable and unchanged afterwards. Then a fail-the-Nth-allocation loop over a small graph
 * build + realize on the interpreter: no crash, no leak (ASan), a clean status. */
#include "engine_fixture.h"
#include "test_alloc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct inputs {
    kiln_tensor *a, *b;
} inputs;

static const float A_DATA[6] = {1, 2, 3, 4, 5, 6};
static const float B_DATA[4] = {-1, -2, -3, -4};

static inputs make_inputs(kiln_context *ctx) {
    inputs in = {fx_f32(ctx, 2, (const int64_t[]){2, 3}, A_DATA),
                 fx_f32(ctx, 1, (const int64_t[]){4}, B_DATA)};
    /* Realize something from them first so that a failure after it must not disturb it. */
    fx_check_f32(in.a, A_DATA, 6, 0, 0);
    return in;
}

/* After a failure: clear it, then the inputs read back unchanged and still compute. */
static void expect_intact(kiln_context *ctx, inputs in, kiln_status status) {
    fx_expect_error(ctx, status);
    fx_check_f32(in.a, A_DATA, 6, 0, 0);
    fx_check_f32(in.b, B_DATA, 4, 0, 0);
    fx_check_f32(kiln_add_scalar(in.b, 1), (const float[]){0, -1, -2, -3}, 4, 0, 0);
}

static void test_engine_errors_mismatched_shapes(void **state) {
    kiln_context *ctx = fx_ctx(state);
    inputs in = make_inputs(ctx);
    /* (2, 3) + (4,): the last dims 3 and 4 do not broadcast. */
    assert_null(kiln_add(in.a, in.b));
    expect_intact(ctx, in, KILN_ERROR_SHAPE_MISMATCH);
    assert_null(kiln_where(in.a, in.a, in.b));
    expect_intact(ctx, in, KILN_ERROR_SHAPE_MISMATCH);
    /* matmul inner dims: (2, 3) @ (4,). */
    assert_null(kiln_matmul(in.a, in.b));
    expect_intact(ctx, in, KILN_ERROR_SHAPE_MISMATCH);
    assert_null(kiln_matmul(kiln_scalar(ctx, KILN_F32, 1), in.b));
    expect_intact(ctx, in, KILN_ERROR_SHAPE_MISMATCH);
    /* conv2d needs 4-d operands with equal channels. */
    assert_null(kiln_conv2d(in.a, in.a, 1, 0));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    kiln_tensor *x = kiln_zeros(ctx, KILN_F32, 4, (const int64_t[]){1, 2, 4, 4});
    kiln_tensor *w = kiln_zeros(ctx, KILN_F32, 4, (const int64_t[]){1, 3, 2, 2});
    assert_null(kiln_conv2d(x, w, 1, 0));
    expect_intact(ctx, in, KILN_ERROR_SHAPE_MISMATCH);
    assert_null(kiln_conv2d(x, x, 0, 0)); /* stride 0 */
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
}

static void test_engine_errors_reshape_expand(void **state) {
    kiln_context *ctx = fx_ctx(state);
    inputs in = make_inputs(ctx);
    assert_null(kiln_reshape(in.a, 2, (const int64_t[]){4, 2}));
    expect_intact(ctx, in, KILN_ERROR_SHAPE_MISMATCH);
    assert_null(kiln_reshape(in.a, 2, (const int64_t[]){-1, -1}));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_reshape(in.a, 2, (const int64_t[]){-1, 4}));
    expect_intact(ctx, in, KILN_ERROR_SHAPE_MISMATCH);
    assert_null(kiln_expand(in.a, 2, (const int64_t[]){4, 3}));
    expect_intact(ctx, in, KILN_ERROR_SHAPE_MISMATCH);
    assert_null(kiln_expand(in.a, 1, (const int64_t[]){6}));
    expect_intact(ctx, in, KILN_ERROR_SHAPE_MISMATCH);
    assert_null(kiln_pad(in.a, (const int64_t[]){0, -1, 0, 0}));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_shrink(in.a, (const int64_t[]){1, 2}, (const int64_t[]){3, 3}));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_BOUNDS);
    assert_null(kiln_unfold(in.b, 0, 5, 1)); /* a window larger than the dim */
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_BOUNDS);
    assert_null(kiln_slice(in.b, 0, 0, 4, 0)); /* step 0 */
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_narrow(in.b, 0, 2, 3));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_BOUNDS);
    assert_null(kiln_select(in.b, 0, 4));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_BOUNDS);
    /* More than KILN_MAX_DIMS dims. */
    int64_t many[KILN_MAX_DIMS + 1];
    for (int i = 0; i <= KILN_MAX_DIMS; i++)
        many[i] = 1;
    assert_null(kiln_zeros(ctx, KILN_F32, KILN_MAX_DIMS + 1, many));
    assert_int_not_equal(kiln_context_status(ctx), KILN_OK);
    expect_intact(ctx, in, kiln_context_status(ctx));
    /* A negative size. */
    assert_null(kiln_zeros(ctx, KILN_F32, 1, (const int64_t[]){-2}));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
}

static void test_engine_errors_bad_axes(void **state) {
    kiln_context *ctx = fx_ctx(state);
    inputs in = make_inputs(ctx);
    assert_null(kiln_sum(in.a, 1, (const int32_t[]){2}, false));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_sum(in.a, 1, (const int32_t[]){-3}, false));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_max(in.a, 2, (const int32_t[]){1, -1}, true)); /* the same axis twice */
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_mean(in.a, 1, (const int32_t[]){5}, false));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_var(in.a, 1, (const int32_t[]){2}, 1, false));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_softmax(in.a, 2));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_log_softmax(in.a, -3));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_argmax(in.a, 2, false));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_transpose(in.a, 0, 2));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_permute(in.a, (const int32_t[]){0, 0}));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_flip(in.a, 2));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_unsqueeze(in.a, 4));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_diagonal(in.a, 0, 0, 0));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
}

static void test_engine_errors_bad_dtypes(void **state) {
    kiln_context *ctx = fx_ctx(state);
    inputs in = make_inputs(ctx);
    const int64_t s[] = {2};
    assert_null(kiln_from_data(ctx, KILN_DTYPE_COUNT_, 1, s, A_DATA));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_zeros(ctx, (kiln_dtype)-1, 1, s));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_full(ctx, (kiln_dtype)99, 1, s, 1));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_arange(ctx, (kiln_dtype)42, 0, 3, 1));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_cast(in.a, (kiln_dtype)42));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    /* Random integers and integer means are not defined (as PyTorch). */
    assert_null(kiln_rand(ctx, KILN_I32, 1, s, 1));
    expect_intact(ctx, in, KILN_ERROR_DTYPE_MISMATCH);
    assert_null(kiln_randn(ctx, KILN_U8, 1, s, 1));
    expect_intact(ctx, in, KILN_ERROR_DTYPE_MISMATCH);
    kiln_tensor *i = kiln_cast(in.a, KILN_I32);
    assert_null(kiln_mean(i, 0, NULL, false));
    expect_intact(ctx, in, KILN_ERROR_DTYPE_MISMATCH);
    assert_null(kiln_var(i, 0, NULL, 1, false));
    expect_intact(ctx, in, KILN_ERROR_DTYPE_MISMATCH);
    /* Bool subtraction and negation are not defined (as PyTorch). */
    kiln_tensor *b = kiln_cast(in.a, KILN_BOOL);
    assert_null(kiln_sub(b, b));
    expect_intact(ctx, in, KILN_ERROR_DTYPE_MISMATCH);
    assert_null(kiln_neg(b));
    expect_intact(ctx, in, KILN_ERROR_DTYPE_MISMATCH);
    /* A fill value the integer dtype cannot hold (as torch.full): NaN, 3e9 in i32, -1 in u8,
     * 128 in i8; the scalar shorthands likewise. A fractional value truncates. */
    assert_null(kiln_full(ctx, KILN_I32, 1, s, NAN));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_full(ctx, KILN_I32, 1, s, 3e9));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_scalar(ctx, KILN_U8, -1));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    const kiln_expr *two = kiln_int(ctx, 2);
    assert_null(kiln_full_sym(ctx, KILN_I8, 1, &two, 128));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_add_scalar(kiln_cast(in.a, KILN_U8), 300));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    assert_null(kiln_mul_scalar(kiln_cast(in.a, KILN_I32), 1e20));
    expect_intact(ctx, in, KILN_ERROR_OUT_OF_RANGE);
    fx_check_i32(kiln_full(ctx, KILN_I32, 1, s, -2.7), (const int32_t[]){-2, -2}, 2);
    fx_check_u8(kiln_full(ctx, KILN_U8, 1, s, 255), KILN_U8, (const uint8_t[]){255, 255}, 2);
    /* arange with step 0 or a non-finite bound. */
    assert_null(kiln_arange(ctx, KILN_F32, 0, 3, 0));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_arange(ctx, KILN_F32, 0, INFINITY, 1));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
}

static void test_engine_errors_null_operands_and_sticky_status(void **state) {
    kiln_context *ctx = fx_ctx(state);
    inputs in = make_inputs(ctx);
    /* A NULL operand passes through every builder. */
    assert_null(kiln_add(NULL, in.a));
    assert_null(kiln_add(in.a, NULL));
    assert_null(kiln_where(NULL, in.a, in.a));
    assert_null(kiln_exp(NULL));
    assert_null(kiln_sum(NULL, 0, NULL, false));
    assert_null(kiln_matmul(NULL, in.a));
    assert_null(kiln_reshape(NULL, 1, (const int64_t[]){6}));
    assert_null(kiln_transpose(NULL, 0, 1));
    assert_null(kiln_slice(NULL, 0, 0, 1, 1));
    assert_null(kiln_softmax(NULL, 0));
    assert_null(kiln_cast(NULL, KILN_F32));
    assert_int_not_equal(kiln_realize(NULL), KILN_OK);
    assert_int_not_equal(kiln_read(NULL, NULL, 0), KILN_OK);
    /* NULL arrays where the call needs one. */
    assert_null(kiln_pad(in.a, NULL));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_shrink(in.a, NULL, NULL));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_permute(in.a, NULL));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_sum(in.a, 1, NULL, false));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_var(in.a, 2, NULL, 1, true));
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(kiln_realize_many(ctx, 2, NULL), KILN_ERROR_INVALID_ARGUMENT);
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(kiln_tensor_numel(in.a, NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(kiln_tensor_shape(in.a, NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(kiln_tensor_strides(in.a, NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(kiln_tensor_offset(NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    /* The context accessors take a NULL context (one whose creation failed). */
    assert_int_equal(kiln_context_status(NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(kiln_context_message(NULL));
    assert_non_null(kiln_context_device_name(NULL));
    kiln_context_clear_error(NULL);
    assert_int_equal(kiln_context_stats(NULL).dispatches, 0);
    assert_null(kiln_from_data(ctx, KILN_F32, 1, (const int64_t[]){2}, NULL)); /* no data */
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_zeros(ctx, KILN_F32, 2, NULL)); /* no shape */
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    /* A chain after a failure stays NULL; the first error is the one reported, and it is sticky:
     * realize and read of any tensor report it until it is cleared. */
    kiln_tensor *bad = kiln_sum(kiln_exp(kiln_add(in.a, in.b)), 1, (const int32_t[]){0}, false);
    assert_null(bad);
    assert_null(kiln_sum(in.a, 1, (const int32_t[]){7}, false)); /* a second error */
    assert_int_equal(kiln_context_status(ctx), KILN_ERROR_SHAPE_MISMATCH);
    assert_non_null(strstr(kiln_context_message(ctx), "kiln_add"));
    float out[6];
    assert_int_equal(kiln_read(in.a, out, sizeof out), KILN_ERROR_SHAPE_MISMATCH);
    assert_int_equal(kiln_realize(kiln_exp(in.a)), KILN_ERROR_SHAPE_MISMATCH);
    expect_intact(ctx, in, KILN_ERROR_SHAPE_MISMATCH);
    /* A read into a buffer too small is an error and writes nothing. */
    memset(out, 0x7f, sizeof out);
    assert_int_equal(kiln_read(in.a, out, 5 * sizeof(float)), KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(((const unsigned char *)out)[0], 0x7f);
    expect_intact(ctx, in, KILN_ERROR_INVALID_ARGUMENT);
    /* Tensors of two contexts do not mix. */
    kiln_context *other = eng_context_new(false);
    assert_non_null(other);
    kiln_tensor *o = fx_f32(other, 1, (const int64_t[]){4}, B_DATA);
    assert_null(kiln_add(in.b, o));
    expect_intact(ctx, in, KILN_ERROR_INVALID_HANDLE);
    fx_check_f32(o, B_DATA, 4, 0, 0);
    assert_int_equal(kiln_context_status(other), KILN_OK);
    kiln_context_destroy(other);
}

/* {a, b} for two 1-element tensors: a padded after and b padded before, added. */
static kiln_tensor *kiln_cat_like_pair(kiln_tensor *a, kiln_tensor *b) {
    return kiln_add(kiln_pad(a, (const int64_t[]){0, 1}), kiln_pad(b, (const int64_t[]){1, 0}));
}

/* relu(a * b + 1).sum(1) then softmax over the result into out[0..1]; with split, also a
 * reduction split in two stages (70000 elements) and an argmax into out[2..3]. KILN_OK or an
 * error. */
static kiln_status graph(kiln_context *ctx, bool split, float *out) {
    const int64_t s[] = {2, 3};
    kiln_tensor *a = kiln_from_data(ctx, KILN_F32, 2, s, (const float[]){1, -2, 3, -4, 5, -6});
    kiln_tensor *b = kiln_full(ctx, KILN_F32, 2, s, 2);
    kiln_tensor *r =
        kiln_sum(kiln_relu(kiln_add_scalar(kiln_mul(a, b), 1)), 1, (const int32_t[]){1}, false);
    kiln_tensor *m = kiln_softmax(kiln_transpose(kiln_unsqueeze(r, 0), 0, 1), 0);
    if (!split)
        return kiln_read(m, out, 2 * sizeof(float));
    kiln_tensor *big = kiln_arange(ctx, KILN_F32, 0, 70000, 1);
    kiln_tensor *c = kiln_cat_like_pair(
        kiln_sum(kiln_ones(ctx, KILN_F32, 1, (const int64_t[]){70000}), 0, NULL, true),
        kiln_cast(kiln_argmax(big, 0, true), KILN_F32));
    kiln_tensor *outs[2] = {m, c};
    kiln_status st = kiln_realize_many(ctx, 2, outs);
    if (st == KILN_OK)
        st = kiln_read(m, out, 2 * sizeof(float));
    if (st == KILN_OK)
        st = kiln_read(c, out + 2, 2 * sizeof(float));
    return st;
}

/* Row sums 10 and 11 (see test_kernels.c), softmax = {1/(1+e), e/(1+e)}; then the split sum
 * and the argmax. */
static const float WANT[4] = {0.268941421f, 0.731058579f, 70000, 69999};

static bool right(const float *got, bool split) {
    for (int i = 0; i < (split ? 4 : 2); i++) {
        if (!(got[i] >= WANT[i] - 1e-6f && got[i] <= WANT[i] + 1e-6f))
            return false;
    }
    return true;
}

/* Fails allocation n = 1, 1 + step, 1 + 2 step, ... of a context creation, graph build,
 * realize, read and destroy, until a run needs fewer allocations than n. Each run: no crash, no
 * leak (the allocator's counts and ASan), an out-of-memory status; and afterwards the context
 * recovers: with memory back, the same graph built again gives the right answer. */
static void allocation_loop(bool split, long step) {
    long n, runs = 0;
    for (n = 1; n < 100000; n += step, runs++) {
        test_alloc ta = {.fail_at = n};
        kiln_context_options opt = {.device = "interp", .alloc = test_alloc_fn, .alloc_user = &ta};
        kiln_context *ctx = NULL;
        kiln_status st = kiln_context_create(&opt, &ctx);
        float out[4] = {0, 0, 0, 0};
        if (st == KILN_OK) {
            st = graph(ctx, split, out);
            /* A failure is recorded in the context as what it is. kiln_read itself returns the
             * same status, or KILN_ERROR_INVALID_ARGUMENT when a builder's NULL reached it (a
             * NULL tensor has no context to ask). */
            kiln_status cst = kiln_context_status(ctx);
            if (st != KILN_OK && (cst != KILN_ERROR_OUT_OF_HOST_MEMORY ||
                                  (st != cst && st != KILN_ERROR_INVALID_ARGUMENT))) {
                char msg[256];
                snprintf(msg, sizeof msg, "%s", kiln_context_message(ctx));
                kiln_context_destroy(ctx);
                fail_msg("allocation %ld failed: status %d (%s), context %s", n, (int)st,
                         kiln_status_string(st), msg);
            }
            if (st != KILN_OK) {
                ta.fail_at = 0;
                kiln_context_clear_error(ctx);
                float again[4] = {0, 0, 0, 0};
                kiln_status st2 = graph(ctx, split, again);
                if (st2 != KILN_OK || !right(again, split)) {
                    char msg[256];
                    snprintf(msg, sizeof msg, "%s", kiln_context_message(ctx));
                    kiln_context_destroy(ctx);
                    fail_msg("after failing allocation %ld: status %d (%s), %g %g %g %g", n,
                             (int)st2, msg, again[0], again[1], again[2], again[3]);
                }
            }
            kiln_context_destroy(ctx);
        } else {
            assert_int_equal(st, KILN_ERROR_OUT_OF_HOST_MEMORY);
            assert_null(ctx);
        }
        assert_int_equal(ta.live_blocks, 0);
        assert_int_equal(ta.live_bytes, 0);
        assert_int_equal(ta.size_mismatches, 0);
        if (ta.failures == 0) { /* the whole run needed fewer than n allocations */
            assert_int_equal(st, KILN_OK);
            assert_true(right(out, split));
            break;
        }
        /* Whatever failed, the run either reported it or recovered and got the right answer. */
        if (st == KILN_OK)
            assert_true(right(out, split));
    }
    print_message("%ld runs, allocation points 1..%ld by %ld\n", runs, n - 1, step);
    assert_true(runs > 1 && n < 100000);
}

static void test_engine_errors_allocation_failures(void **state) {
    (void)state;
    allocation_loop(false, 1);
}

static void test_engine_errors_allocation_failures_split_reduction(void **state) {
    (void)state;
    /* Every 13th allocation point: each run reduces 2 x 70000 elements on the interpreter. */
    allocation_loop(true, 13);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_errors_mismatched_shapes),
        ENG_TEST(test_engine_errors_reshape_expand),
        ENG_TEST(test_engine_errors_bad_axes),
        ENG_TEST(test_engine_errors_bad_dtypes),
        ENG_TEST(test_engine_errors_null_operands_and_sticky_status),
    };
    const struct CMUnitTest interp_only[] = {
        cmocka_unit_test(test_engine_errors_allocation_failures),
        cmocka_unit_test(test_engine_errors_allocation_failures_split_reduction),
    };
    return ENG_RUN_BOTH(tests) + cmocka_run_group_tests_name("allocation", interp_only, NULL, NULL);
}
