/* Optimizers against torch.optim (fixtures/optim.h, from fixtures/gen_optim.py): SGD (momentum,
 * dampening, Nesterov, weight decay), Adam and AdamW over 5 steps of fixed gradients; the
 * steps after the first compile nothing; the step count costs no kernel and optimizers at
 * different counts realize together; bad arguments are clear errors. */
#include "engine_fixture.h"
#include "fixtures/optim.h"

#include <math.h>
#include <string.h>

static kiln_optimizer *make(kiln_context *ctx, const opt_case *c, kiln_tensor *p) {
    if (c->kind == 0) {
        kiln_sgd_options o = {.lr = c->lr,
                              .momentum = c->momentum,
                              .dampening = c->dampening,
                              .weight_decay = c->weight_decay,
                              .nesterov = c->nesterov != 0};
        return kiln_sgd(ctx, 1, &p, &o);
    }
    kiln_adam_options o = c->kind == 2 ? kiln_adamw_defaults() : kiln_adam_defaults();
    o.lr = c->lr;
    o.beta1 = c->beta1;
    o.beta2 = c->beta2;
    o.eps = c->eps;
    o.weight_decay = c->weight_decay;
    return kiln_adam(ctx, 1, &p, &o);
}

static void test_against_torch(void **state) {
    kiln_context *ctx = fx_ctx(state);
    for (size_t k = 0; k < sizeof opt_cases / sizeof opt_cases[0]; k++) {
        const opt_case *c = &opt_cases[k];
        kiln_tensor *p = fx_f32(ctx, 2, (int64_t[]){3, 4}, opt_p0);
        assert_int_equal(kiln_requires_grad_(p, true), KILN_OK);
        kiln_optimizer *opt = make(ctx, c, p);
        assert_non_null(opt);
        uint64_t compiled = 0;
        for (int s = 0; s < OPT_STEPS; s++) {
            kiln_scope_begin(ctx);
            kiln_tensor *g = fx_f32(ctx, 2, (int64_t[]){3, 4}, opt_grads[s]);
            assert_int_equal(kiln_optimizer_step(opt, &g), KILN_OK);
            assert_int_equal(kiln_realize(p), KILN_OK);
            print_message("%s step %d\n", c->name, s + 1);
            fx_check_f32(p, c->after[s], 12, 1e-6, 1e-5);
            assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
            kiln_stats st = kiln_context_stats(ctx);
            if (s == 1)
                compiled = st.kernels_compiled;
            if (s > 1) /* the same graph every step: nothing new to compile */
                assert_int_equal(st.kernels_compiled, compiled);
        }
        kiln_optimizer_destroy(opt);
        kiln_release(p);
    }
}

/* The step count is a Variable each step binds (no kernel counts it: one Adam step of one
 * parameter is one kernel, its moments stored beside it), and optimizers at different counts
 * share it: two of them, one a step ahead, realized together, each against torch's values at
 * its own count (SGD's momentum reads the count too: its first step differs). */
static void test_step_count(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const size_t picks[2] = {1, 3}; /* sgd_momentum, adam_default */
    for (size_t k = 0; k < 2; k++) {
        const opt_case *c = &opt_cases[picks[k]];
        kiln_tensor *p[2] = {fx_f32(ctx, 2, (int64_t[]){3, 4}, opt_p0),
                             fx_f32(ctx, 2, (int64_t[]){3, 4}, opt_p0)};
        kiln_optimizer *ahead = make(ctx, c, p[0]), *behind = make(ctx, c, p[1]);
        assert_non_null(ahead);
        assert_non_null(behind);
        kiln_tensor *g[3] = {fx_f32(ctx, 2, (int64_t[]){3, 4}, opt_grads[0]),
                             fx_f32(ctx, 2, (int64_t[]){3, 4}, opt_grads[1]),
                             fx_f32(ctx, 2, (int64_t[]){3, 4}, opt_grads[2])};
        assert_int_equal(kiln_optimizer_step(ahead, &g[0]), KILN_OK);
        kiln_stats before = kiln_context_stats(ctx);
        assert_int_equal(kiln_realize(p[0]), KILN_OK);
        /* the update with its two moments: one kernel where it may bind their 5 buffers (the
         * parameter, its moments, the gradient and the learning rate) */
        if (c->kind != 0 && fx_kernel_buffers(ctx) >= 5)
            assert_int_equal(kiln_context_stats(ctx).dispatches - before.dispatches, 1);
        for (int s = 0; s < 2; s++) {
            assert_int_equal(kiln_optimizer_step(ahead, &g[s + 1]), KILN_OK);
            assert_int_equal(kiln_optimizer_step(behind, &g[s]), KILN_OK);
            assert_int_equal(kiln_realize_many(ctx, 2, p), KILN_OK);
            print_message("%s: steps %d and %d in one realize\n", c->name, s + 2, s + 1);
            fx_check_f32(p[0], c->after[s + 1], 12, 1e-6, 1e-5);
            fx_check_f32(p[1], c->after[s], 12, 1e-6, 1e-5);
        }
        kiln_optimizer_destroy(ahead);
        kiln_optimizer_destroy(behind);
        for (int i = 0; i < 3; i++)
            kiln_release(g[i]);
        kiln_release(p[0]);
        kiln_release(p[1]);
    }
}

/* The optimizer holds its own handles: the caller may release its parameter handle. */
static void test_own_handles(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *p = fx_f32(ctx, 2, (int64_t[]){3, 4}, opt_p0);
    kiln_tensor *view = kiln_reshape(p, 1, (int64_t[]){12});
    kiln_optimizer *opt = kiln_sgd(ctx, 1, &p, &(kiln_sgd_options){.lr = 0.5});
    assert_non_null(opt);
    kiln_release(p);
    kiln_tensor *g = fx_f32(ctx, 2, (int64_t[]){3, 4}, opt_grads[0]);
    assert_int_equal(kiln_optimizer_step(opt, &g), KILN_OK);
    float want[12];
    for (int i = 0; i < 12; i++)
        want[i] = opt_p0[i] - 0.5f * opt_grads[0][i];
    fx_check_f32(view, want, 12, 1e-6, 1e-6);
    /* A new learning rate compiles nothing new. */
    assert_int_equal(kiln_optimizer_set_lr(opt, 0.25), KILN_OK);
    uint64_t compiled = kiln_context_stats(ctx).kernels_compiled;
    assert_int_equal(kiln_optimizer_step(opt, &g), KILN_OK);
    for (int i = 0; i < 12; i++)
        want[i] -= 0.25f * opt_grads[0][i];
    fx_check_f32(view, want, 12, 1e-6, 1e-6);
    (void)compiled;
    kiln_optimizer_destroy(opt);
    kiln_release(g);
    kiln_release(view);
}

static void test_errors(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *p = fx_f32(ctx, 2, (int64_t[]){3, 4}, opt_p0);
    assert_null(kiln_sgd(ctx, 1, &p, NULL));
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_sgd", NULL);
    assert_null(kiln_sgd(ctx, 1, &p, &(kiln_sgd_options){.lr = 0}));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_sgd", "learning rate", NULL);
    assert_null(kiln_sgd(ctx, 1, &p, &(kiln_sgd_options){.lr = 1, .nesterov = true}));
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_sgd", "Nesterov", NULL);
    kiln_adam_options bad = kiln_adam_defaults();
    bad.beta2 = 1.0;
    assert_null(kiln_adam(ctx, 1, &p, &bad));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_adam", "betas", NULL);
    kiln_tensor *ints = fx_i32(ctx, 1, (int64_t[]){2}, (int32_t[]){1, 2});
    assert_null(kiln_adam(ctx, 1, &ints, NULL));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_adam", "params[0]", NULL);
    kiln_tensor *padded = kiln_pad(p, (int64_t[]){1, 0, 0, 0});
    assert_null(kiln_adam(ctx, 1, &padded, NULL));
    fx_expect_message(ctx, KILN_ERROR_NOT_VIEWABLE, "kiln_adam", "params[0]", NULL);
    kiln_optimizer *opt = kiln_adam(ctx, 1, &p, NULL);
    assert_non_null(opt);
    kiln_tensor *wrong = fx_f32(ctx, 1, (int64_t[]){12}, opt_p0);
    assert_int_equal(kiln_optimizer_step(opt, &wrong), KILN_ERROR_SHAPE_MISMATCH);
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_optimizer_step", "grads[0]", NULL);
    kiln_release(wrong);
    assert_int_equal(kiln_optimizer_step(opt, &wrong), KILN_ERROR_INVALID_HANDLE);
    fx_expect_message(ctx, KILN_ERROR_INVALID_HANDLE, "kiln_optimizer_step", "grads[0]", NULL);
    assert_int_equal(kiln_optimizer_set_lr(opt, -1), KILN_ERROR_OUT_OF_RANGE);
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_optimizer_set_lr", NULL);
    /* Nothing was written by the refused steps. */
    fx_check_f32(p, opt_p0, 12, 0, 0);
    kiln_optimizer_destroy(opt);
    kiln_optimizer_destroy(NULL);
    kiln_release(p);
    kiln_release(ints);
    kiln_release(padded);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_against_torch),
        ENG_TEST(test_step_count),
        ENG_TEST(test_own_handles),
        ENG_TEST(test_errors),
    };
    return ENG_RUN_BOTH(tests);
}
