/* engine/front/nn.c: the neural-network ops against torch's outputs (fixtures/nn.h, from
 * fixtures/gen_nn.py), on the Vulkan device and on the interpreter: conv2d_ex (every option,
 * torch's defaults, depthwise, a symbolic batch), max and average pooling, clamp, gather,
 * one_hot, cross_entropy (a symbolic batch too) and mse_loss, with strided inputs (permuted,
 * transposed and flipped views), then every error path (status and message). Tolerance:
 * |got - want| <= 1e-5 + 1e-4 |want| (Kiln computes in f32, torch in f64 from the same f32
 * inputs). */

#include "engine_fixture.h"
#include "fixtures/nn.h"

#include <kiln/kiln.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define ATOL 1e-5
#define RTOL 1e-4

/* Class indices as PyTorch gives them (i64); on a device without 64-bit integers (the
 * mobile-low profile), where i64 kernels are KILN_ERROR_UNSUPPORTED (test_int64.c), as i32,
 * which every op taking indices accepts: the values checked are the same. */
static kiln_tensor *i64_tensor(kiln_context *ctx, uint32_t ndim, const int64_t *shape,
                               const int64_t *data) {
    if (kiln_dtype_supported(ctx, KILN_I64))
        return kiln_from_data(ctx, KILN_I64, ndim, shape, data);
    int64_t n = 1;
    for (uint32_t d = 0; d < ndim; d++)
        n *= shape[d];
    int32_t *narrow = malloc((size_t)(n ? n : 1) * sizeof *narrow);
    assert_non_null(narrow);
    for (int64_t i = 0; i < n; i++)
        narrow[i] = (int32_t)data[i];
    kiln_tensor *t = kiln_from_data(ctx, KILN_I32, ndim, shape, narrow);
    free(narrow);
    return t;
}

static const kiln_conv2d_options conv_a_options = {
    .stride = {2, 1}, .padding = {1, 2}, .dilation = {2, 1}, .groups = 2};

/* Every option at once: groups 2, bias, stride (2, 1), padding (1, 2), dilation (2, 1). */
static void test_engine_nn_conv2d_ex_every_option(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 4, (const int64_t[]){2, 4, 7, 6}, conv_a_x);
    kiln_tensor *w = fx_f32(ctx, 4, (const int64_t[]){6, 2, 3, 2}, conv_a_w);
    kiln_tensor *b = fx_f32(ctx, 1, (const int64_t[]){6}, conv_a_b);
    kiln_tensor *y = kiln_conv2d_ex(x, w, b, &conv_a_options);
    fx_assert_shape(y, 4, (const int64_t[]){2, 6, 3, 9});
    fx_check_f32(y, conv_a_out, N(conv_a_out), ATOL, RTOL);
}

/* torch's defaults (options NULL, no bias) on a channels-last x read through a permute and a
 * flipped w; with stride and padding it is kiln_conv2d's result exactly (the same sum). */
static void test_engine_nn_conv2d_ex_defaults_strided_inputs(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *nhwc = fx_f32(ctx, 4, (const int64_t[]){2, 5, 5, 3}, conv_b_x_nhwc);
    kiln_tensor *x = kiln_permute(nhwc, (const int32_t[]){0, 3, 1, 2});
    kiln_tensor *w = kiln_flip(fx_f32(ctx, 4, (const int64_t[]){4, 3, 3, 3}, conv_b_w_flipped), 3);
    kiln_tensor *y = kiln_conv2d_ex(x, w, NULL, NULL);
    fx_assert_shape(y, 4, (const int64_t[]){2, 4, 3, 3});
    fx_check_f32(y, conv_b_out, N(conv_b_out), ATOL, RTOL);
    /* zero fields take the defaults: only stride and padding set */
    kiln_conv2d_options o = {.stride = {2, 2}, .padding = {1, 1}};
    y = kiln_conv2d_ex(x, w, NULL, &o);
    fx_check_f32(y, conv_b_s2p1, N(conv_b_s2p1), ATOL, RTOL);
    float got[N(conv_b_s2p1)], old[N(conv_b_s2p1)];
    fx_read(y, KILN_F32, got, N(got));
    fx_read(kiln_conv2d(x, w, 2, 1), KILN_F32, old, N(old));
    assert_memory_equal(got, old, sizeof got);
}

/* Depthwise: groups = C = 3, bias, padding 2, dilation 2 (a 5x5 extent of a 3x3 kernel). */
static void test_engine_nn_conv2d_ex_depthwise(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 4, (const int64_t[]){1, 3, 6, 6}, conv_c_x);
    kiln_tensor *w = fx_f32(ctx, 4, (const int64_t[]){3, 1, 3, 3}, conv_c_w);
    kiln_tensor *b = fx_f32(ctx, 1, (const int64_t[]){3}, conv_c_b);
    kiln_conv2d_options o = {.padding = {2, 2}, .dilation = {2, 2}, .groups = 3};
    kiln_tensor *y = kiln_conv2d_ex(x, w, b, &o);
    fx_assert_shape(y, 4, (const int64_t[]){1, 3, 6, 6});
    fx_check_f32(y, conv_c_out, N(conv_c_out), ATOL, RTOL);
}

/* A batch of Variable size: the first n samples of conv_a's input, n bound to 2 then 1. The
 * second binding compiles nothing new. */
static void test_engine_nn_conv2d_ex_symbolic_batch(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *flat = fx_f32(ctx, 1, (const int64_t[]){N(conv_a_x)}, conv_a_x);
    kiln_tensor *w = fx_f32(ctx, 4, (const int64_t[]){6, 2, 3, 2}, conv_a_w);
    kiln_tensor *b = fx_f32(ctx, 1, (const int64_t[]){6}, conv_a_b);
    const kiln_expr *batch = kiln_variable(ctx, "batch", 1, 2);
    uint64_t compiled = 0;
    for (int64_t n = 2; n >= 1; n--) {
        kiln_scope_begin(ctx);
        const kiln_expr *bn = kiln_bind(ctx, batch, n);
        const kiln_expr *sample = kiln_int(ctx, 4 * 7 * 6);
        kiln_tensor *part =
            kiln_narrow_sym(flat, 0, kiln_int(ctx, 0), kiln_expr_mul(ctx, bn, sample));
        const kiln_expr *shape[4] = {bn, kiln_int(ctx, 4), kiln_int(ctx, 7), kiln_int(ctx, 6)};
        kiln_tensor *y = kiln_conv2d_ex(kiln_reshape_sym(part, 4, shape), w, b, &conv_a_options);
        fx_assert_shape(y, 4, (const int64_t[]){n, 6, 3, 9});
        fx_check_f32(y, conv_a_out, (size_t)n * 6 * 3 * 9, ATOL, RTOL);
        if (n == 1)
            assert_int_equal(kiln_context_stats(ctx).kernels_compiled, compiled);
        compiled = kiln_context_stats(ctx).kernels_compiled;
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
}

/* A case of the symbolic-batch gradient test: the inputs of 3 images and torch's gradients for
 * batches of 3 and 2 (index 0 and 1). */
typedef struct conv_grad_case {
    const char *var; /* the batch Variable's name (one per case: a context keeps its ranges) */
    const float *x, *w, *b, *r;
    int64_t xs[3], ws[4], rs[3]; /* per image: x (C, H, W), w, r (O, OH, OW) */
    size_t nx, nw, nb, nr;
    kiln_conv2d_options o;
    const float *dx[2], *dw[2], *db[2];
} conv_grad_case;

/* The gradients of sum(conv2d(x, w, b) * r) with the batch a Variable bound to 3, then to 2 (each
 * image a product of its own: nn.c), against torch's for those batches: d/dx through the flat
 * tensor the batch is narrowed from (zeros past the batch), d/dw and d/db summed over the
 * batch. The second binding compiles nothing new. */
static void check_conv_grad_case(kiln_context *ctx, const conv_grad_case *c) {
    kiln_tensor *flat = fx_f32(ctx, 1, (const int64_t[]){(int64_t)c->nx}, c->x);
    kiln_tensor *rflat = fx_f32(ctx, 1, (const int64_t[]){(int64_t)c->nr}, c->r);
    kiln_tensor *w = fx_f32(ctx, 4, c->ws, c->w);
    kiln_tensor *b = c->b ? fx_f32(ctx, 1, (const int64_t[]){(int64_t)c->nb}, c->b) : NULL;
    kiln_tensor *leaves[3] = {flat, w, b};
    uint32_t nleaves = b ? 3 : 2;
    for (uint32_t i = 0; i < nleaves; i++)
        assert_int_equal(kiln_requires_grad_(leaves[i], true), KILN_OK);
    const kiln_expr *batch = kiln_variable(ctx, c->var, 1, 3);
    float *want = calloc(c->nx, sizeof(float));
    assert_non_null(want);
    int64_t per_x = c->xs[0] * c->xs[1] * c->xs[2], per_r = c->rs[0] * c->rs[1] * c->rs[2];
    uint64_t compiled = 0;
    for (int64_t n = 3; n >= 2; n--) {
        kiln_scope_begin(ctx);
        const kiln_expr *bn = kiln_bind(ctx, batch, n);
        const kiln_expr *xs[4] = {bn, kiln_int(ctx, c->xs[0]), kiln_int(ctx, c->xs[1]),
                                  kiln_int(ctx, c->xs[2])};
        const kiln_expr *rs[4] = {bn, kiln_int(ctx, c->rs[0]), kiln_int(ctx, c->rs[1]),
                                  kiln_int(ctx, c->rs[2])};
        kiln_tensor *x =
            kiln_reshape_sym(kiln_narrow_sym(flat, 0, kiln_int(ctx, 0),
                                             kiln_expr_mul(ctx, bn, kiln_int(ctx, per_x))),
                             4, xs);
        kiln_tensor *r =
            kiln_reshape_sym(kiln_narrow_sym(rflat, 0, kiln_int(ctx, 0),
                                             kiln_expr_mul(ctx, bn, kiln_int(ctx, per_r))),
                             4, rs);
        kiln_tensor *loss = kiln_sum(kiln_mul(kiln_conv2d_ex(x, w, b, &c->o), r), 0, NULL, false);
        kiln_tensor *grads[3];
        assert_int_equal(kiln_grad(loss, nleaves, leaves, grads), KILN_OK);
        memset(want, 0, c->nx * sizeof(float));
        memcpy(want, c->dx[3 - n], (size_t)(n * per_x) * sizeof(float));
        fx_check_f32(grads[0], want, c->nx, ATOL, RTOL);
        fx_check_f32(grads[1], c->dw[3 - n], c->nw, ATOL, RTOL);
        if (b)
            fx_check_f32(grads[2], c->db[3 - n], c->nb, ATOL, RTOL);
        if (n == 2)
            assert_int_equal(kiln_context_stats(ctx).kernels_compiled, compiled);
        compiled = kiln_context_stats(ctx).kernels_compiled;
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    free(want);
}

/* Padding 1 with a bias; stride (2, 1), padding (2, 1), dilation (2, 1) without one; stride 1,
 * padding (3, 0), dilation (1, 2) (the input gradient as a convolution of the output's
 * gradient, cropped by a row at each end and padded by two columns: autograd.c
 * conv_input_grad). */
static void test_engine_nn_conv2d_ex_symbolic_batch_gradients(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const conv_grad_case cases[3] = {
        {"images_s",
         conv_s_x,
         conv_s_w,
         conv_s_b,
         conv_s_r,
         {3, 6, 5},
         {4, 3, 3, 3},
         {4, 6, 5},
         N(conv_s_x),
         N(conv_s_w),
         N(conv_s_b),
         N(conv_s_r),
         {.padding = {1, 1}},
         {conv_s3_dx, conv_s2_dx},
         {conv_s3_dw, conv_s2_dw},
         {conv_s3_db, conv_s2_db}},
        {"images_t",
         conv_t_x,
         conv_t_w,
         NULL,
         conv_t_r,
         {3, 7, 5},
         {4, 3, 3, 2},
         {4, 4, 6},
         N(conv_t_x),
         N(conv_t_w),
         0,
         N(conv_t_r),
         {.stride = {2, 1}, .padding = {2, 1}, .dilation = {2, 1}},
         {conv_t3_dx, conv_t2_dx},
         {conv_t3_dw, conv_t2_dw},
         {NULL, NULL}},
        {"images_u",
         conv_u_x,
         conv_u_w,
         NULL,
         conv_u_r,
         {2, 6, 7},
         {3, 2, 3, 2},
         {3, 10, 5},
         N(conv_u_x),
         N(conv_u_w),
         0,
         N(conv_u_r),
         {.padding = {3, 0}, .dilation = {1, 2}},
         {conv_u3_dx, conv_u2_dx},
         {conv_u3_dw, conv_u2_dw},
         {NULL, NULL}},
    };
    for (int i = 0; i < 3; i++)
        check_conv_grad_case(ctx, &cases[i]);
}

/* A channels-last input read through a permute, padded, convolved and biased: three kernels
 * (the window matrix, read straight from the permuted input with the padding folded into its
 * loads; the product; the bias added as the product is laid out as (N, O, OH, OW)). The input is
 * neither made contiguous nor padded in memory first. */
static void test_engine_nn_conv2d_ex_kernels(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *nhwc = fx_f32(ctx, 4, (const int64_t[]){2, 5, 5, 3}, conv_b_x_nhwc);
    kiln_tensor *w = kiln_flip(fx_f32(ctx, 4, (const int64_t[]){4, 3, 3, 3}, conv_b_w_flipped), 3);
    kiln_tensor *b = kiln_ones(ctx, KILN_F32, 1, (const int64_t[]){4});
    assert_int_equal(kiln_realize(b), KILN_OK);
    kiln_conv2d_options o = {.stride = {2, 2}, .padding = {1, 1}};
    kiln_tensor *y = kiln_conv2d_ex(kiln_permute(nhwc, (const int32_t[]){0, 3, 1, 2}), w, b, &o);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(y), KILN_OK);
    assert_int_equal(kiln_context_stats(ctx).dispatches - before.dispatches, 3);
    fx_check_f32(kiln_add_scalar(y, -1), conv_b_s2p1, N(conv_b_s2p1), ATOL, RTOL);
}

static void test_engine_nn_max_pool2d(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 4, (const int64_t[]){2, 3, 7, 6}, pool_x);
    kiln_tensor *y = kiln_max_pool2d(x, 3, 2, 1);
    fx_assert_shape(y, 4, (const int64_t[]){2, 3, 4, 3});
    fx_check_f32(y, maxpool_k3s2p1, N(maxpool_k3s2p1), 0, 0);
    y = kiln_max_pool2d(kiln_flip(x, 3), 2, 1, 1);
    fx_assert_shape(y, 4, (const int64_t[]){2, 3, 8, 7});
    fx_check_f32(y, maxpool_flip_k2s1p1, N(maxpool_flip_k2s1p1), 0, 0);
    /* (C, H, W) through a transpose; stride 0 is the kernel */
    kiln_tensor *t = fx_f32(ctx, 3, (const int64_t[]){3, 4, 5}, pool_t);
    y = kiln_max_pool2d(kiln_transpose(t, 1, 2), 2, 0, 0);
    fx_assert_shape(y, 3, (const int64_t[]){3, 2, 2});
    fx_check_f32(y, maxpool3d_k2, N(maxpool3d_k2), 0, 0);
    /* a NaN is the maximum of its window; -inf is a value like any other */
    kiln_tensor *n = fx_f32(ctx, 4, (const int64_t[]){1, 1, 4, 4}, pool_nan);
    fx_check_f32(kiln_max_pool2d(n, 2, 2, 0), maxpool_nan, N(maxpool_nan), 0, 0);
}

/* The gradients of sum(pool(x) * r) against torch's: disjoint windows (kernel 2, stride 2;
 * the last row is in none), windows with gaps (stride 3), overlapping windows (kernel 3,
 * stride 2, padding 1), the mean over disjoint windows. x has ties: the first maximum takes
 * the gradient. And of a max pool over relu(x), whose mask Kiln applies to the pooled gradient
 * (autograd.c relu_pools): disjoint windows, overlapping ones over a -inf padding. And several
 * NaNs in one window (npool_x): torch's max_pool2d takes every NaN it meets as the maximum, so
 * the last NaN takes the window's gradient (where kiln_argmax's is the first), also after
 * +inf, over disjoint and overlapping padded windows and over a relu. */
static void test_engine_nn_pool_gradients(void **state) {
    kiln_context *ctx = fx_ctx(state);
    static const int64_t pgrad[4] = {2, 3, 7, 6}, npool[4] = {1, 2, 4, 6};
    const struct {
        bool max, relu;
        int64_t kernel, stride, padding;
        const int64_t *shape;
        const float *x, *r, *dx;
        size_t nr, ndx;
    } cases[] = {
        {true, false, 2, 2, 0, pgrad, pgrad_x, pgrad_max_k2s2_r, pgrad_max_k2s2_dx,
         N(pgrad_max_k2s2_r), N(pgrad_max_k2s2_dx)},
        {true, false, 2, 3, 0, pgrad, pgrad_x, pgrad_max_k2s3_r, pgrad_max_k2s3_dx,
         N(pgrad_max_k2s3_r), N(pgrad_max_k2s3_dx)},
        {true, false, 3, 2, 1, pgrad, pgrad_x, pgrad_max_k3s2p1_r, pgrad_max_k3s2p1_dx,
         N(pgrad_max_k3s2p1_r), N(pgrad_max_k3s2p1_dx)},
        {false, false, 2, 2, 0, pgrad, pgrad_x, pgrad_avg_k2s2_r, pgrad_avg_k2s2_dx,
         N(pgrad_avg_k2s2_r), N(pgrad_avg_k2s2_dx)},
        {true, true, 2, 2, 0, pgrad, rpool_x, rpool_k2s2_r, rpool_k2s2_dx, N(rpool_k2s2_r),
         N(rpool_k2s2_dx)},
        {true, true, 3, 2, 1, pgrad, rpool_x, rpool_k3s2p1_r, rpool_k3s2p1_dx, N(rpool_k3s2p1_r),
         N(rpool_k3s2p1_dx)},
        {true, false, 2, 2, 0, npool, npool_x, npool_k2s2_r, npool_k2s2_dx, N(npool_k2s2_r),
         N(npool_k2s2_dx)},
        {true, false, 3, 2, 1, npool, npool_x, npool_k3s2p1_r, npool_k3s2p1_dx, N(npool_k3s2p1_r),
         N(npool_k3s2p1_dx)},
        {true, true, 2, 2, 0, npool, npool_x, npool_relu_k2s2_r, npool_relu_k2s2_dx,
         N(npool_relu_k2s2_r), N(npool_relu_k2s2_dx)},
    };
    for (size_t i = 0; i < N(cases); i++) {
        kiln_tensor *x = fx_f32(ctx, 4, cases[i].shape, cases[i].x);
        assert_int_equal(kiln_requires_grad_(x, true), KILN_OK);
        kiln_tensor *in = cases[i].relu ? kiln_relu(x) : x;
        kiln_tensor *y =
            cases[i].max ? kiln_max_pool2d(in, cases[i].kernel, cases[i].stride, cases[i].padding)
                         : kiln_avg_pool2d(in, cases[i].kernel, cases[i].stride, cases[i].padding);
        assert_non_null(y);
        int64_t shape[4];
        assert_int_equal(kiln_tensor_shape(y, shape), KILN_OK);
        assert_int_equal((size_t)(shape[0] * shape[1] * shape[2] * shape[3]), cases[i].nr);
        kiln_tensor *loss =
            kiln_sum(kiln_mul(y, fx_f32(ctx, 4, shape, cases[i].r)), 0, NULL, false);
        kiln_tensor *dx = NULL;
        assert_int_equal(kiln_grad(loss, 1, &x, &dx), KILN_OK);
        fx_check_f32(dx, cases[i].dx, cases[i].ndx, ATOL, RTOL);
    }
}

/* A window of more elements than one loop may combine (256 x 256 = 65,536: its index is two
 * reductions, ops.c argmax_split): the first of two equal maxima takes the gradient, and of two
 * NaNs the last, as torch's max_pool2d. */
static void test_engine_nn_pool_gradient_of_a_huge_window(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { SIDE = 256 };
    static float x[SIDE * SIDE], want[SIDE * SIDE];
    for (int nans = 0; nans < 2; nans++) {
        for (int i = 0; i < SIDE * SIDE; i++)
            x[i] = (float)(i % 7) - 3, want[i] = 0;
        int first = 10 * SIDE + 10, last = 200 * SIDE + 7;
        x[first] = x[last] = nans ? NAN : 5;
        want[nans ? last : first] = 1;
        kiln_tensor *t = fx_f32(ctx, 4, (const int64_t[]){1, 1, SIDE, SIDE}, x);
        assert_int_equal(kiln_requires_grad_(t, true), KILN_OK);
        kiln_tensor *y = kiln_max_pool2d(t, SIDE, SIDE, 0), *dx = NULL;
        assert_int_equal(kiln_grad(kiln_sum(y, 0, NULL, false), 1, &t, &dx), KILN_OK);
        fx_check_f32(dx, want, SIDE * SIDE, 0, 0);
    }
}

/* max_pool2d(relu(conv2d(x, w, b))) whose convolution only the pool reads (computed inside
 * the pool's windows, never stored: engine/schedule/kernel.c), its values and its gradients
 * for x, w and b against torch's. */
static void test_engine_nn_conv_inside_its_pool(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *leaves[3] = {fx_f32(ctx, 4, (const int64_t[]){2, 1, 6, 8}, cpool_x),
                              fx_f32(ctx, 4, (const int64_t[]){3, 1, 3, 3}, cpool_w),
                              fx_f32(ctx, 1, (const int64_t[]){3}, cpool_b)};
    for (int i = 0; i < 3; i++)
        assert_int_equal(kiln_requires_grad_(leaves[i], true), KILN_OK);
    const kiln_conv2d_options same = {.padding = {1, 1}};
    kiln_tensor *y =
        kiln_max_pool2d(kiln_relu(kiln_conv2d_ex(leaves[0], leaves[1], leaves[2], &same)), 2, 0, 0);
    fx_check_f32(y, cpool_y, N(cpool_y), ATOL, RTOL);
    kiln_tensor *loss = kiln_sum(
        kiln_mul(y, fx_f32(ctx, 4, (const int64_t[]){2, 3, 3, 4}, cpool_r)), 0, NULL, false);
    kiln_tensor *grads[3] = {NULL, NULL, NULL};
    assert_int_equal(kiln_grad(loss, 3, leaves, grads), KILN_OK);
    fx_check_f32(grads[0], cpool_dx, N(cpool_dx), ATOL, RTOL);
    fx_check_f32(grads[1], cpool_dw, N(cpool_dw), ATOL, RTOL);
    fx_check_f32(grads[2], cpool_db, N(cpool_db), ATOL, RTOL);
}

/* More gradients of max_pool2d(relu(x)) against torch's (with the cases of
 * pool_gradients): a relu also read by another op (there the relu keeps its mask), NaNs
 * (torch's relu passes a NaN's gradient, and a NaN is its window's maximum) with the relu
 * alone beside them, and a bias added before the relu (its gradient summed from the pooled
 * gradient). */
static void test_engine_nn_relu_pool_gradients(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const int64_t xs[4] = {2, 3, 7, 6}, ns[4] = {1, 2, 4, 4};
    kiln_tensor *x = fx_f32(ctx, 4, xs, rpool_x);
    assert_int_equal(kiln_requires_grad_(x, true), KILN_OK);
    kiln_tensor *h = kiln_relu(x);
    kiln_tensor *pooled =
        kiln_sum(kiln_mul(kiln_max_pool2d(h, 2, 0, 0),
                          fx_f32(ctx, 4, (const int64_t[]){2, 3, 3, 3}, rpool_shared_r)),
                 0, NULL, false);
    kiln_tensor *own = kiln_sum(kiln_mul(h, fx_f32(ctx, 4, xs, rpool_shared_r2)), 0, NULL, false);
    kiln_tensor *dx = NULL;
    assert_int_equal(kiln_grad(kiln_add(pooled, own), 1, &x, &dx), KILN_OK);
    fx_check_f32(dx, rpool_shared_dx, N(rpool_shared_dx), ATOL, RTOL);

    kiln_tensor *n = fx_f32(ctx, 4, ns, rpool_nan_x);
    assert_int_equal(kiln_requires_grad_(n, true), KILN_OK);
    kiln_tensor *loss =
        kiln_sum(kiln_mul(kiln_max_pool2d(kiln_relu(n), 2, 0, 0),
                          fx_f32(ctx, 4, (const int64_t[]){1, 2, 2, 2}, rpool_nan_r)),
                 0, NULL, false);
    assert_int_equal(kiln_grad(loss, 1, &n, &dx), KILN_OK);
    fx_check_f32(dx, rpool_nan_dx, N(rpool_nan_dx), 0, 0);
    kiln_tensor *r2 = kiln_shrink(fx_f32(ctx, 4, xs, rpool_shared_r2),
                                  (const int64_t[]){0, 0, 0, 0}, (const int64_t[]){1, 2, 4, 4});
    loss = kiln_sum(kiln_mul(kiln_relu(n), r2), 0, NULL, false);
    assert_int_equal(kiln_grad(loss, 1, &n, &dx), KILN_OK);
    fx_check_f32(dx, relu_nan_dx, N(relu_nan_dx), ATOL, RTOL);

    /* a bias before the relu, as conv2d_ex adds it: its gradient sums the pooled gradient */
    kiln_tensor *leaves[2] = {fx_f32(ctx, 4, xs, rpool_x),
                              fx_f32(ctx, 1, (const int64_t[]){3}, rpool_bias)};
    for (int i = 0; i < 2; i++)
        assert_int_equal(kiln_requires_grad_(leaves[i], true), KILN_OK);
    kiln_tensor *biased =
        kiln_add(leaves[0], kiln_reshape(leaves[1], 4, (const int64_t[]){1, 3, 1, 1}));
    loss = kiln_sum(kiln_mul(kiln_max_pool2d(kiln_relu(biased), 2, 0, 0),
                             fx_f32(ctx, 4, (const int64_t[]){2, 3, 3, 3}, rpool_bias_r)),
                    0, NULL, false);
    kiln_tensor *grads[2] = {NULL, NULL};
    assert_int_equal(kiln_grad(loss, 2, leaves, grads), KILN_OK);
    fx_check_f32(grads[0], rpool_bias_dx, N(rpool_bias_dx), ATOL, RTOL);
    fx_check_f32(grads[1], rpool_bias_db, N(rpool_bias_db), ATOL, RTOL);
}

/* A pooled relu's gradient (autograd.c relu_pools, pooled_sum) against the same graph's
 * gradient where the rewrite does not apply: there the relu's output is also read by a
 * product by 0, a second consumer, so the relu keeps its own mask and the bias sums the
 * scattered gradient. Windows disjoint, overlapping, strided past each other and padded;
 * inputs of halves with ties, zeros, NaNs and infinities. The gradients of x match exactly,
 * the bias's (summed in another order) to rounding. */
static void test_engine_nn_relu_pool_matches_unrewritten(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const int64_t shape[4] = {2, 3, 7, 6},
                  kernels[][3] = {{2, 2, 0}, {3, 2, 1}, {2, 1, 1}, {3, 3, 0}, {2, 3, 1}};
    enum { NX = 2 * 3 * 7 * 6 };
    float xs[NX], bs[3] = {0.5f, -1.0f, 0.0f};
    for (int i = 0; i < NX; i++)
        xs[i] = (float)((i * 7919) % 17 - 8) / 2;
    xs[5] = NAN;
    xs[40] = INFINITY;
    xs[77] = -INFINITY;
    xs[130] = NAN;
    for (size_t c = 0; c < N(kernels); c++) {
        float got[2][NX + 3];
        for (int rewritten = 0; rewritten < 2; rewritten++) {
            kiln_tensor *leaves[2] = {fx_f32(ctx, 4, shape, xs),
                                      fx_f32(ctx, 1, (const int64_t[]){3}, bs)};
            for (int i = 0; i < 2; i++)
                assert_int_equal(kiln_requires_grad_(leaves[i], true), KILN_OK);
            kiln_tensor *h = kiln_relu(
                kiln_add(leaves[0], kiln_reshape(leaves[1], 4, (const int64_t[]){1, 3, 1, 1})));
            kiln_tensor *y = kiln_max_pool2d(h, kernels[c][0], kernels[c][1], kernels[c][2]);
            int64_t ys[4];
            assert_int_equal(kiln_tensor_shape(y, ys), KILN_OK);
            kiln_tensor *r =
                kiln_cos(kiln_arange(ctx, KILN_F32, 0, (double)(ys[0] * ys[1] * ys[2] * ys[3]), 1));
            kiln_tensor *loss = kiln_sum(kiln_mul(y, kiln_reshape(r, 4, ys)), 0, NULL, false);
            if (!rewritten) /* h read twice: no rewrite */
                loss = kiln_add(loss, kiln_mul_scalar(kiln_sum(h, 0, NULL, false), 0));
            kiln_tensor *grads[2] = {NULL, NULL};
            assert_int_equal(kiln_grad(loss, 2, leaves, grads), KILN_OK);
            assert_int_equal(kiln_read(grads[0], got[rewritten], sizeof(float) * NX), KILN_OK);
            assert_int_equal(kiln_read(grads[1], got[rewritten] + NX, sizeof(float) * 3), KILN_OK);
        }
        for (int i = 0; i < NX + 3; i++) {
            bool same = memcmp(&got[0][i], &got[1][i], sizeof(float)) == 0 ||
                        (i >= NX && fabsf(got[0][i] - got[1][i]) <= 1e-5f * (1 + fabsf(got[0][i])));
            if (!same)
                fail_msg("kernel %lld, stride %lld, padding %lld, element %d: %g rewritten, %g not",
                         (long long)kernels[c][0], (long long)kernels[c][1],
                         (long long)kernels[c][2], i, got[1][i], got[0][i]);
        }
    }
}

static void test_engine_nn_avg_pool2d(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 4, (const int64_t[]){2, 3, 7, 6}, pool_x);
    kiln_tensor *y = kiln_avg_pool2d(x, 3, 2, 1);
    fx_assert_shape(y, 4, (const int64_t[]){2, 3, 4, 3});
    fx_check_f32(y, avgpool_k3s2p1, N(avgpool_k3s2p1), ATOL, RTOL);
    kiln_tensor *t = fx_f32(ctx, 3, (const int64_t[]){3, 4, 5}, pool_t);
    y = kiln_avg_pool2d(kiln_transpose(t, 1, 2), 2, 0, 1);
    fx_assert_shape(y, 3, (const int64_t[]){3, 3, 3});
    fx_check_f32(y, avgpool3d_k2p1, N(avgpool3d_k2p1), ATOL, RTOL);
}

static void test_engine_nn_clamp(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = kiln_transpose(fx_f32(ctx, 2, (const int64_t[]){3, 5}, clamp_x), 0, 1);
    fx_check_f32(kiln_clamp(x, -0.5, 0.75), clamp_both, N(clamp_both), 0, 0);
    fx_check_f32(kiln_clamp(x, 0.2, NAN), clamp_min, N(clamp_min), 0, 0);
    fx_check_f32(kiln_clamp(x, NAN, -0.1), clamp_max, N(clamp_max), 0, 0);
    fx_check_f32(kiln_clamp(x, 1, -1), clamp_crossed, N(clamp_crossed), 0, 0);
    /* integers keep their dtype with integral bounds; a fractional bound gives f32 */
    kiln_tensor *i = fx_i32(ctx, 1, (const int64_t[]){12}, clamp_i);
    kiln_tensor *c = kiln_clamp(i, -2, 3);
    assert_int_equal(kiln_tensor_dtype(c), KILN_I32);
    fx_check_i32(c, clamp_i_out, N(clamp_i_out));
    c = kiln_clamp(i, 0.5, NAN);
    assert_int_equal(kiln_tensor_dtype(c), KILN_F32);
    fx_check_f32(c, clamp_i_half, N(clamp_i_half), 0, 0);
}

/* Negative indices count from the end, indices out of range give 0; index may be smaller than
 * t along the other dims (t is narrowed) and longer along dim. */
static void test_engine_nn_gather(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *t = fx_f32(ctx, 2, (const int64_t[]){4, 5}, gather_t);
    kiln_tensor *i0 = i64_tensor(ctx, 2, (const int64_t[]){2, 5}, gather_i0);
    kiln_tensor *g = kiln_gather(t, 0, i0);
    fx_assert_shape(g, 2, (const int64_t[]){2, 5});
    fx_check_f32(g, gather_d0, N(gather_d0), 0, 0);
    kiln_tensor *i1 = fx_i32(ctx, 2, (const int64_t[]){3, 3}, gather_i1);
    fx_check_f32(kiln_gather(t, -1, i1), gather_d1, N(gather_d1), 0, 0);
    fx_check_f32(kiln_gather(kiln_transpose(t, 0, 1), 1, i1), gather_t_d1, N(gather_t_d1), 0, 0);
    kiln_tensor *u = fx_f32(ctx, 3, (const int64_t[]){2, 3, 4}, gather_u);
    kiln_tensor *i2 = i64_tensor(ctx, 3, (const int64_t[]){2, 5, 4}, gather_i2);
    g = kiln_gather(u, 1, i2);
    fx_assert_shape(g, 3, (const int64_t[]){2, 5, 4});
    fx_check_f32(g, gather_u_d1, N(gather_u_d1), 0, 0);
    /* an integer tensor keeps its dtype */
    kiln_tensor *iv = fx_i32(ctx, 2, (const int64_t[]){3, 4}, gather_iv);
    kiln_tensor *ii = fx_i32(ctx, 2, (const int64_t[]){3, 2}, gather_ii);
    g = kiln_gather(iv, 1, ii);
    assert_int_equal(kiln_tensor_dtype(g), KILN_I32);
    fx_check_i32(g, gather_iv_out, N(gather_iv_out));
}

static void test_engine_nn_one_hot(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *idx = i64_tensor(ctx, 2, (const int64_t[]){2, 3}, onehot_i);
    kiln_tensor *h = kiln_one_hot(idx, 5, KILN_F32);
    fx_assert_shape(h, 3, (const int64_t[]){2, 3, 5});
    fx_check_f32(h, onehot_out, N(onehot_out), 0, 0);
    /* i32 indices, i32 output */
    int32_t narrow[6], want[N(onehot_out)];
    for (size_t i = 0; i < 6; i++)
        narrow[i] = (int32_t)onehot_i[i];
    for (size_t i = 0; i < N(onehot_out); i++)
        want[i] = (int32_t)onehot_out[i];
    h = kiln_one_hot(fx_i32(ctx, 2, (const int64_t[]){2, 3}, narrow), 5, KILN_I32);
    assert_int_equal(kiln_tensor_dtype(h), KILN_I32);
    fx_check_i32(h, want, N(want));
}

static void test_engine_nn_cross_entropy(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *logits = fx_f32(ctx, 2, (const int64_t[]){6, 5}, ce_logits);
    kiln_tensor *labels = i64_tensor(ctx, 1, (const int64_t[]){6}, ce_labels);
    kiln_tensor *loss = kiln_cross_entropy(logits, labels);
    fx_assert_shape(loss, 0, NULL);
    fx_check_f32(loss, ce_out, 1, ATOL, RTOL);
    /* i32 labels; both inputs flipped (strided) */
    fx_check_f32(kiln_cross_entropy(logits, kiln_cast(labels, KILN_I32)), ce_out, 1, ATOL, RTOL);
    fx_check_f32(kiln_cross_entropy(kiln_flip(logits, 0), kiln_flip(labels, 0)), ce_out_t, 1, ATOL,
                 RTOL);
}

/* A batch of Variable size (6, then 3: the mean divides by the bound value in the kernel),
 * compiled once. */
static void test_engine_nn_cross_entropy_symbolic_batch(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *logits = fx_f32(ctx, 2, (const int64_t[]){6, 5}, ce_logits);
    kiln_tensor *labels = i64_tensor(ctx, 1, (const int64_t[]){6}, ce_labels);
    const kiln_expr *batch = kiln_variable(ctx, "rows", 1, 6);
    const float *want[2] = {ce_out, ce_out3};
    uint64_t compiled = 0;
    for (int step = 0; step < 2; step++) {
        kiln_scope_begin(ctx);
        const kiln_expr *n = kiln_bind(ctx, batch, step ? 3 : 6);
        kiln_tensor *l = kiln_narrow_sym(logits, 0, kiln_int(ctx, 0), n);
        kiln_tensor *y = kiln_narrow_sym(labels, 0, kiln_int(ctx, 0), n);
        fx_check_f32(kiln_cross_entropy(l, y), want[step], 1, ATOL, RTOL);
        if (step)
            assert_int_equal(kiln_context_stats(ctx).kernels_compiled, compiled);
        compiled = kiln_context_stats(ctx).kernels_compiled;
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
}

static void test_engine_nn_mse_loss(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = fx_f32(ctx, 3, (const int64_t[]){3, 1, 4}, mse_a);
    kiln_tensor *b = kiln_flip(fx_f32(ctx, 2, (const int64_t[]){5, 4}, mse_b), 1);
    kiln_tensor *loss = kiln_mse_loss(a, b);
    fx_assert_shape(loss, 0, NULL);
    fx_check_f32(loss, mse_out, 1, ATOL, RTOL);
}

/* ---- errors: the status and a message that begins with the call ---- */

static void test_engine_nn_conv2d_ex_errors(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = kiln_zeros(ctx, KILN_F32, 4, (const int64_t[]){1, 2, 4, 4});
    kiln_tensor *w = kiln_zeros(ctx, KILN_F32, 4, (const int64_t[]){1, 3, 2, 2});
    assert_null(kiln_conv2d_ex(x, w, NULL, NULL));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_conv2d_ex", "(1, 2, 4, 4)",
                      "(1, 3, 2, 2)", NULL);
    assert_null(kiln_conv2d_ex(kiln_squeeze(x, 0), w, NULL, NULL));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_conv2d_ex", "4 dims", NULL);
    /* groups: 4 channels in 3 groups; 3 outputs in 2 groups */
    kiln_tensor *x4 = kiln_zeros(ctx, KILN_F32, 4, (const int64_t[]){1, 4, 4, 4});
    kiln_tensor *w6 = kiln_zeros(ctx, KILN_F32, 4, (const int64_t[]){6, 2, 2, 2});
    kiln_tensor *w3 = kiln_zeros(ctx, KILN_F32, 4, (const int64_t[]){3, 2, 2, 2});
    assert_null(kiln_conv2d_ex(x4, w6, NULL, &(kiln_conv2d_options){.groups = 3}));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_conv2d_ex", "(1, 4, 4, 4)",
                      "(6, 2, 2, 2)", "groups 3", NULL);
    assert_null(kiln_conv2d_ex(x4, w3, NULL, &(kiln_conv2d_options){.groups = 2}));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_conv2d_ex", "(3, 2, 2, 2)", NULL);
    /* negative options */
    kiln_tensor *w1 = kiln_zeros(ctx, KILN_F32, 4, (const int64_t[]){1, 2, 2, 2});
    assert_null(kiln_conv2d_ex(x, w1, NULL, &(kiln_conv2d_options){.padding = {-1, 0}}));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_conv2d_ex", "padding[0]", "-1", NULL);
    assert_null(kiln_conv2d_ex(x, w1, NULL, &(kiln_conv2d_options){.stride = {1, -2}}));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_conv2d_ex", "stride[1]", NULL);
    assert_null(kiln_conv2d_ex(x, w1, NULL, &(kiln_conv2d_options){.dilation = {-1, 1}}));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_conv2d_ex", "dilation[0]", NULL);
    assert_null(kiln_conv2d_ex(x, w1, NULL, &(kiln_conv2d_options){.groups = -1}));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_conv2d_ex", "groups", NULL);
    /* the dilated kernel spans 4 (2 - 1) + 1 = 5 rows of the 4x4 input */
    assert_null(kiln_conv2d_ex(x, w1, NULL, &(kiln_conv2d_options){.dilation = {4, 1}}));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_conv2d_ex", "smaller", NULL);
    /* bias of the wrong length; integer operands */
    kiln_tensor *b2 = kiln_zeros(ctx, KILN_F32, 1, (const int64_t[]){2});
    assert_null(kiln_conv2d_ex(x, w1, b2, NULL));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_conv2d_ex", "bias", "(2)", NULL);
    assert_null(kiln_conv2d_ex(kiln_cast(x, KILN_I32), w1, NULL, NULL));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_conv2d_ex", "i32", NULL);
}

static void test_engine_nn_pool_errors(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = kiln_zeros(ctx, KILN_F32, 4, (const int64_t[]){1, 1, 4, 4});
    assert_null(kiln_max_pool2d(kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){4, 4}), 2, 0, 0));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_max_pool2d", "(4, 4)", NULL);
    assert_null(kiln_max_pool2d(x, 0, 0, 0));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_max_pool2d", "kernel 0", NULL);
    assert_null(kiln_max_pool2d(x, 2, -1, 0));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_max_pool2d", "stride -1", NULL);
    assert_null(kiln_avg_pool2d(x, 3, 1, 2)); /* padding > kernel / 2 */
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_avg_pool2d", "padding 2", NULL);
    assert_null(kiln_avg_pool2d(x, 2, 1, -1));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_avg_pool2d", "padding -1", NULL);
    assert_null(kiln_max_pool2d(x, 5, 1, 0)); /* a 5x5 window over 4x4 */
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_max_pool2d", "(1, 1, 4, 4)", "kernel 5",
                      NULL);
    assert_null(kiln_max_pool2d(x, INT64_C(1) << 40, 0, INT64_C(1) << 39));
    fx_expect_message(ctx, KILN_ERROR_OVERFLOW, "kiln_max_pool2d", "kernel^2", NULL);
    assert_null(kiln_avg_pool2d(kiln_cast(x, KILN_I32), 2, 0, 0));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_avg_pool2d", "i32", NULL);
}

static void test_engine_nn_clamp_gather_one_hot_errors(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *t = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){3, 4});
    assert_null(kiln_clamp(kiln_cast(t, KILN_BOOL), 0, 1));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_clamp", "bool", NULL);
    assert_null(kiln_clamp(t, NAN, NAN));
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_clamp", "NaN", NULL);
    assert_null(kiln_clamp(kiln_cast(t, KILN_U8), -5, 3));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_clamp", "-5", "u8", NULL);
    /* gather */
    kiln_tensor *idx = kiln_zeros(ctx, KILN_I64, 2, (const int64_t[]){2, 4});
    assert_null(kiln_gather(t, 0, kiln_cast(idx, KILN_F32)));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_gather", "f32", NULL);
    assert_null(kiln_gather(t, 0, kiln_zeros(ctx, KILN_I64, 1, (const int64_t[]){2})));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_gather", "(3, 4)", "(2)", NULL);
    assert_null(kiln_gather(t, 2, idx));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_gather", "dim 2", NULL);
    assert_null(kiln_gather(t, 1, kiln_zeros(ctx, KILN_I32, 2, (const int64_t[]){4, 1})));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_gather", "(3, 4)", "(4, 1)", NULL);
    /* one_hot */
    assert_null(kiln_one_hot(t, 3, KILN_F32));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_one_hot", "f32", NULL);
    assert_null(kiln_one_hot(idx, 0, KILN_F32));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_one_hot", "classes is 0", NULL);
    assert_null(kiln_one_hot(idx, 3, (kiln_dtype)99));
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_one_hot", "99", NULL);
    /* a NULL operand passes an earlier error through, recording none */
    assert_null(kiln_clamp(NULL, 0, 1));
    assert_null(kiln_gather(t, 0, NULL));
    assert_int_equal(kiln_context_status(ctx), KILN_OK);
}

static void test_engine_nn_loss_errors(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *logits = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){4, 3});
    kiln_tensor *labels = kiln_zeros(ctx, KILN_I64, 1, (const int64_t[]){4});
    assert_null(kiln_cross_entropy(kiln_squeeze(kiln_narrow(logits, 1, 0, 1), 1), labels));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_cross_entropy", "(4)", NULL);
    assert_null(kiln_cross_entropy(logits, kiln_narrow(labels, 0, 0, 3)));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_cross_entropy", "(4, 3)", "(3)", NULL);
    assert_null(kiln_cross_entropy(logits, kiln_cast(labels, KILN_F32)));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_cross_entropy", "f32", NULL);
    assert_null(kiln_cross_entropy(kiln_cast(logits, KILN_I32), labels));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_cross_entropy", "i32", NULL);
    assert_null(kiln_mse_loss(logits, kiln_zeros(ctx, KILN_F32, 1, (const int64_t[]){4})));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_mse_loss", "(4, 3)", "(4)", NULL);
    assert_null(kiln_mse_loss(labels, labels));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_mse_loss", "i64", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_nn_conv2d_ex_every_option),
        ENG_TEST(test_engine_nn_conv2d_ex_defaults_strided_inputs),
        ENG_TEST(test_engine_nn_conv2d_ex_depthwise),
        ENG_TEST(test_engine_nn_conv2d_ex_symbolic_batch),
        ENG_TEST(test_engine_nn_conv2d_ex_symbolic_batch_gradients),
        ENG_TEST(test_engine_nn_conv2d_ex_kernels),
        ENG_TEST(test_engine_nn_max_pool2d),
        ENG_TEST(test_engine_nn_pool_gradients),
        ENG_TEST(test_engine_nn_relu_pool_gradients),
        ENG_TEST(test_engine_nn_pool_gradient_of_a_huge_window),
        ENG_TEST(test_engine_nn_conv_inside_its_pool),
        ENG_TEST(test_engine_nn_relu_pool_matches_unrewritten),
        ENG_TEST(test_engine_nn_avg_pool2d),
        ENG_TEST(test_engine_nn_clamp),
        ENG_TEST(test_engine_nn_gather),
        ENG_TEST(test_engine_nn_one_hot),
        ENG_TEST(test_engine_nn_cross_entropy),
        ENG_TEST(test_engine_nn_cross_entropy_symbolic_batch),
        ENG_TEST(test_engine_nn_mse_loss),
        ENG_TEST(test_engine_nn_conv2d_ex_errors),
        ENG_TEST(test_engine_nn_pool_errors),
        ENG_TEST(test_engine_nn_clamp_gather_one_hot_errors),
        ENG_TEST(test_engine_nn_loss_errors),
    };
    return ENG_RUN_BOTH(tests);
}
