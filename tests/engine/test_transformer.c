/* engine/front/transformer.c: the transformer ops against torch's outputs and gradients
 * (fixtures/transformer.h, from fixtures/gen_transformer.py) and values worked out here, on the
 * Vulkan device and on the interpreter: cat and stack (promotion, strided inputs, symbolic
 * sizes, gradients), layer_norm and rms_norm (gradients, symbolic batch), erf, gelu (both
 * forms), silu (gradients), triu, tril, the causal mask (a symbolic KV cache), cumsum (the
 * triangular sum and the doubling scan, integers, symbolic sizes), topk (ties), multinomial
 * (frequencies, zero weights, seeds), where_scalar and masked_fill (dtypes), view and
 * is_contiguous, then every error path. Tolerance: |got - want| <= 1e-5 + 1e-4 |want|;
 * erf and gelu 1e-6 + 1e-6 |want|. */

#include "engine_fixture.h"
#include "fixtures/transformer.h"

#include <kiln/kiln.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define ATOL 1e-5
#define RTOL 1e-4

static kiln_tensor *leaf(kiln_context *ctx, uint32_t ndim, const int64_t *shape,
                         const float *data) {
    kiln_tensor *t = fx_f32(ctx, ndim, shape, data);
    assert_int_equal(kiln_requires_grad_(t, true), KILN_OK);
    return t;
}

/* The gradients of sum(out * r) with respect to inputs[0..count), checked against want[i]
 * (n[i] elements each). */
static void check_grads(kiln_context *ctx, kiln_tensor *out, const float *r, uint32_t count,
                        kiln_tensor *const *inputs, const float *const *want, const size_t *n) {
    uint32_t nd = kiln_tensor_ndim(out);
    int64_t shape[KILN_MAX_DIMS];
    assert_int_equal(kiln_tensor_shape(out, shape), KILN_OK);
    kiln_tensor *w = fx_f32(ctx, nd, shape, r);
    kiln_tensor *loss = kiln_sum(kiln_mul(out, w), 0, NULL, false);
    kiln_tensor *g[4];
    assert_int_equal(kiln_grad(loss, count, inputs, g), KILN_OK);
    for (uint32_t i = 0; i < count; i++)
        fx_check_f32(g[i], want[i], n[i], ATOL, RTOL);
}

/* ---- cat and stack ---- */

static void test_engine_transformer_cat(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = leaf(ctx, 3, (const int64_t[]){2, 3, 4}, cat_a);
    kiln_tensor *b = leaf(ctx, 3, (const int64_t[]){2, 1, 4}, cat_b);
    kiln_tensor *cs = leaf(ctx, 3, (const int64_t[]){2, 4, 2}, cat_c_stored);
    kiln_tensor *c = kiln_transpose(cs, 1, 2);
    kiln_tensor *y = kiln_cat(3, (kiln_tensor *[]){a, b, c}, 1);
    fx_assert_shape(y, 3, (const int64_t[]){2, 6, 4});
    fx_check_f32(y, cat_out, N(cat_out), 0, 0); /* exact: a copy */
    /* cs's gradient is that of c, transposed back: torch's cat_gc is of c (2, 2, 4) */
    kiln_tensor *yc = kiln_cat(3, (kiln_tensor *[]){a, b, c}, -2);
    kiln_tensor *w = fx_f32(ctx, 3, (const int64_t[]){2, 6, 4}, cat_r);
    kiln_tensor *g[3];
    assert_int_equal(
        kiln_grad(kiln_sum(kiln_mul(yc, w), 0, NULL, false), 3, (kiln_tensor *[]){a, b, cs}, g),
        KILN_OK);
    fx_check_f32(g[0], cat_ga, N(cat_ga), ATOL, RTOL);
    fx_check_f32(g[1], cat_gb, N(cat_gb), ATOL, RTOL);
    fx_check_f32(kiln_transpose(g[2], 1, 2), cat_gc, N(cat_gc), ATOL, RTOL);
    /* one input: a new tensor with its values */
    fx_check_f32(kiln_cat(1, &b, 0), cat_b, N(cat_b), 0, 0);
}

/* torch.cat's promotion: i32 with u8 is i32, bool with f32 f32, i32 with f32 f32. */
static void test_engine_transformer_cat_promotion(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *i = fx_i32(ctx, 1, (const int64_t[]){2}, (const int32_t[]){-7, 1 << 20});
    kiln_tensor *u =
        kiln_from_data(ctx, KILN_U8, 1, (const int64_t[]){3}, (const uint8_t[]){0, 200, 255});
    kiln_tensor *iu = kiln_cat(2, (kiln_tensor *[]){i, u}, 0);
    assert_int_equal(kiln_tensor_dtype(iu), KILN_I32);
    fx_check_i32(iu, (const int32_t[]){-7, 1 << 20, 0, 200, 255}, 5);
    kiln_tensor *bo =
        kiln_from_data(ctx, KILN_BOOL, 1, (const int64_t[]){2}, (const uint8_t[]){1, 0});
    kiln_tensor *f = fx_f32(ctx, 1, (const int64_t[]){1}, (const float[]){-2.5f});
    kiln_tensor *bf = kiln_cat(3, (kiln_tensor *[]){bo, f, i}, 0);
    assert_int_equal(kiln_tensor_dtype(bf), KILN_F32);
    fx_check_f32(bf, (const float[]){1, 0, -2.5f, -7, 1 << 20}, 5, 0, 0);
    kiln_tensor *bb = kiln_cat(2, (kiln_tensor *[]){bo, bo}, 0);
    assert_int_equal(kiln_tensor_dtype(bb), KILN_BOOL);
    fx_check_u8(bb, KILN_BOOL, (const uint8_t[]){1, 0, 1, 0}, 4);
}

/* Many inputs (a tree of adds), and a symbolic size along dim: one compile serves n = 3 and
 * n = 1. */
static void test_engine_transformer_cat_many_symbolic(void **state) {
    kiln_context *ctx = fx_ctx(state);
    float data[24];
    for (int k = 0; k < 24; k++)
        data[k] = (float)k;
    kiln_tensor *base = fx_f32(ctx, 2, (const int64_t[]){6, 4}, data);
    kiln_tensor *parts[6];
    for (int k = 0; k < 6; k++)
        parts[k] = kiln_narrow(base, 0, 5 - k, 1); /* the rows in reverse */
    float want[24];
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 4; c++)
            want[4 * r + c] = data[4 * (5 - r) + c];
    fx_check_f32(kiln_cat(6, parts, 0), want, 24, 0, 0);

    const kiln_expr *n = kiln_variable(ctx, "n", 1, 6);
    uint64_t compiled = 0;
    for (int64_t v = 3; v >= 1; v -= 2) {
        kiln_scope_begin(ctx);
        const kiln_expr *nb = kiln_bind(ctx, n, v);
        kiln_tensor *head = kiln_narrow_sym(base, 0, kiln_int(ctx, 0), nb);
        kiln_tensor *y = kiln_cat(2, (kiln_tensor *[]){head, kiln_narrow(base, 0, 4, 2)}, 0);
        fx_assert_shape(y, 2, (const int64_t[]){v + 2, 4});
        float w[24];
        memcpy(w, data, (size_t)v * 4 * sizeof(float));
        memcpy(w + v * 4, data + 16, 8 * sizeof(float));
        fx_check_f32(y, w, (size_t)(v + 2) * 4, 0, 0);
        if (v == 1)
            assert_int_equal(kiln_context_stats(ctx).kernels_compiled, compiled);
        compiled = kiln_context_stats(ctx).kernels_compiled;
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
}

static void test_engine_transformer_stack(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const int64_t s34[2] = {3, 4};
    kiln_tensor *s0 = leaf(ctx, 2, s34, stack_0), *s1 = fx_f32(ctx, 2, s34, stack_1);
    kiln_tensor *s2 = leaf(ctx, 2, s34, stack_2);
    kiln_tensor *s2f = kiln_flip(s2, 0);
    kiln_tensor *y = kiln_stack(3, (kiln_tensor *[]){s0, s1, s2f}, -1);
    fx_assert_shape(y, 3, (const int64_t[]){3, 4, 3});
    fx_check_f32(y, stack_out, N(stack_out), 0, 0);
    kiln_tensor *w = fx_f32(ctx, 3, (const int64_t[]){3, 4, 3}, stack_r);
    kiln_tensor *g[2];
    assert_int_equal(
        kiln_grad(kiln_sum(kiln_mul(y, w), 0, NULL, false), 2, (kiln_tensor *[]){s0, s2}, g),
        KILN_OK);
    fx_check_f32(g[0], stack_g0, N(stack_g0), ATOL, RTOL);
    fx_check_f32(kiln_flip(g[1], 0), stack_g2, N(stack_g2), ATOL, RTOL);
    /* dim 0 of i32 scalars' rows */
    kiln_tensor *a = fx_i32(ctx, 1, (const int64_t[]){2}, (const int32_t[]){1, 2});
    kiln_tensor *b = fx_i32(ctx, 1, (const int64_t[]){2}, (const int32_t[]){3, 4});
    kiln_tensor *st = kiln_stack(2, (kiln_tensor *[]){a, b}, 0);
    fx_assert_shape(st, 2, (const int64_t[]){2, 2});
    fx_check_i32(st, (const int32_t[]){1, 2, 3, 4}, 4);
}

/* ---- normalization ---- */

static void test_engine_transformer_layer_norm(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = leaf(ctx, 2, (const int64_t[]){4, 6}, ln_x);
    kiln_tensor *w = leaf(ctx, 1, (const int64_t[]){6}, ln_w);
    kiln_tensor *b = leaf(ctx, 1, (const int64_t[]){6}, ln_b);
    kiln_tensor *y = kiln_layer_norm(x, 1, w, b, 1e-5);
    fx_check_f32(y, ln_out, N(ln_out), ATOL, RTOL);
    check_grads(ctx, y, ln_r, 3, (kiln_tensor *[]){x, w, b},
                (const float *const[]){ln_gx, ln_gw, ln_gb},
                (const size_t[]){N(ln_gx), N(ln_gw), N(ln_gb)});
    /* f16 (computed in f32, rounded to f16): within f16's precision of torch's f32 result */
    kiln_tensor *yh = kiln_layer_norm(kiln_cast(x, KILN_F16), 1, kiln_cast(w, KILN_F16),
                                      kiln_cast(b, KILN_F16), 1e-5);
    assert_int_equal(kiln_tensor_dtype(yh), KILN_F16);
    fx_check_f32(kiln_cast(yh, KILN_F32), ln_out, N(ln_out), 2e-2, 1e-2);
    /* two dims of a transposed view, no weight or bias */
    kiln_tensor *x2 =
        kiln_transpose(fx_f32(ctx, 3, (const int64_t[]){2, 5, 3}, ln2_x_stored), 1, 2);
    fx_check_f32(kiln_layer_norm(x2, 2, NULL, NULL, 1e-3), ln2_out, N(ln2_out), ATOL, RTOL);
}

/* A batch of Variable size: the first n rows of ln_x, one compile for n = 4 and n = 2. */
static void test_engine_transformer_layer_norm_symbolic(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){4, 6}, ln_x);
    kiln_tensor *w = fx_f32(ctx, 1, (const int64_t[]){6}, ln_w);
    kiln_tensor *b = fx_f32(ctx, 1, (const int64_t[]){6}, ln_b);
    const kiln_expr *rows = kiln_variable(ctx, "rows", 1, 4);
    uint64_t compiled = 0;
    for (int64_t n = 4; n >= 2; n -= 2) {
        kiln_scope_begin(ctx);
        const kiln_expr *nb = kiln_bind(ctx, rows, n);
        kiln_tensor *y =
            kiln_layer_norm(kiln_narrow_sym(x, 0, kiln_int(ctx, 0), nb), 1, w, b, 1e-5);
        fx_assert_shape(y, 2, (const int64_t[]){n, 6});
        fx_check_f32(y, ln_out, (size_t)n * 6, ATOL, RTOL);
        if (n == 2)
            assert_int_equal(kiln_context_stats(ctx).kernels_compiled, compiled);
        compiled = kiln_context_stats(ctx).kernels_compiled;
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
}

static void test_engine_transformer_rms_norm(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = leaf(ctx, 2, (const int64_t[]){3, 8}, rms_x);
    kiln_tensor *w = leaf(ctx, 1, (const int64_t[]){8}, rms_w);
    kiln_tensor *y = kiln_rms_norm(x, 1, w, 1e-6);
    fx_check_f32(y, rms_out, N(rms_out), ATOL, RTOL);
    check_grads(ctx, y, rms_r, 2, (kiln_tensor *[]){x, w}, (const float *const[]){rms_gx, rms_gw},
                (const size_t[]){N(rms_gx), N(rms_gw)});
}

/* ---- erf, gelu, silu ---- */

static void test_engine_transformer_erf(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const int64_t shape[1] = {N(act_x)};
    kiln_tensor *x = leaf(ctx, 1, shape, act_x);
    kiln_tensor *y = kiln_erf(x);
    fx_check_f32(y, erf_out, N(erf_out), 1e-6, 1e-6);
    check_grads(ctx, y, act_r, 1, &x, (const float *const[]){erf_gx}, (const size_t[]){N(erf_gx)});
    kiln_tensor *s =
        fx_f32(ctx, 1, (const int64_t[]){3}, (const float[]){INFINITY, -INFINITY, NAN});
    fx_check_f32(kiln_erf(s), erf_special, 3, 0, 0);
    /* integers give f32 (as torch) */
    kiln_tensor *e = kiln_erf(fx_i32(ctx, 1, (const int64_t[]){2}, (const int32_t[]){0, 1}));
    assert_int_equal(kiln_tensor_dtype(e), KILN_F32);
    fx_check_f32(e, (const float[]){0, 0.842700793f}, 2, 1e-6, 1e-6);
}

static void test_engine_transformer_gelu_silu(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const int64_t shape[1] = {N(act_x)};
    kiln_tensor *x = leaf(ctx, 1, shape, act_x);
    kiln_tensor *g = kiln_gelu(x, false), *gt = kiln_gelu(x, true), *si = kiln_silu(x);
    fx_check_f32(g, gelu_out, N(gelu_out), 1e-6, 1e-6);
    fx_check_f32(gt, gelut_out, N(gelut_out), 1e-6, 1e-5);
    fx_check_f32(si, silu_out, N(silu_out), ATOL, RTOL);
    kiln_tensor *gh = kiln_gelu(kiln_cast(x, KILN_F16), false);
    assert_int_equal(kiln_tensor_dtype(gh), KILN_F16);
    fx_check_f32(kiln_cast(gh, KILN_F32), gelu_out, N(gelu_out), 2e-2, 1e-2);
    const size_t n[1] = {N(act_x)};
    check_grads(ctx, g, act_r, 1, &x, (const float *const[]){gelu_gx}, n);
    check_grads(ctx, gt, act_r, 1, &x, (const float *const[]){gelut_gx}, n);
    check_grads(ctx, si, act_r, 1, &x, (const float *const[]){silu_gx}, n);
}

/* ---- triangles and the causal mask ---- */

static void test_engine_transformer_triu_tril(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 3, (const int64_t[]){3, 4, 5}, tri_x);
    fx_check_f32(kiln_triu(x, -1), triu_m1, 60, 0, 0);
    fx_check_f32(kiln_tril(x, -1), tril_m1, 60, 0, 0);
    fx_check_f32(kiln_triu(x, 0), triu_0, 60, 0, 0);
    fx_check_f32(kiln_tril(x, 0), tril_0, 60, 0, 0);
    fx_check_f32(kiln_triu(x, 2), triu_2, 60, 0, 0);
    fx_check_f32(kiln_tril(x, 2), tril_2, 60, 0, 0);
    /* diagonals beyond the sizes: all or nothing */
    fx_check_f32(kiln_tril(x, INT64_MAX), tri_x, 60, 0, 0);
    fx_check_f32(kiln_triu(x, INT64_MIN), tri_x, 60, 0, 0);
    /* a transposed view (3, 5, 4): tril(xt, 1)[b][i][j] = x[b][j][i] where j - i <= 1 */
    float want[60];
    for (int bb = 0; bb < 3; bb++)
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 4; j++)
                want[bb * 20 + i * 4 + j] = j - i <= 1 ? tri_x[bb * 20 + j * 5 + i] : 0.0f;
    fx_check_f32(kiln_tril(kiln_transpose(x, 1, 2), 1), want, 60, 0, 0);
    /* i32 and bool */
    kiln_tensor *ones = kiln_ones(ctx, KILN_I32, 2, (const int64_t[]){2, 3});
    fx_check_i32(kiln_triu(ones, 1), (const int32_t[]){0, 1, 1, 0, 0, 1}, 6);
    kiln_tensor *bt = kiln_full(ctx, KILN_BOOL, 2, (const int64_t[]){2, 2}, 1);
    fx_check_u8(kiln_tril(bt, 0), KILN_BOOL, (const uint8_t[]){1, 0, 1, 1}, 4);
    /* symbolic (n, n): sum(triu(ones)) = n (n + 1) / 2, one compile for n = 5 and n = 3 */
    const kiln_expr *n = kiln_variable(ctx, "side", 1, 8);
    uint64_t compiled = 0;
    for (int64_t v = 5; v >= 3; v -= 2) {
        kiln_scope_begin(ctx);
        const kiln_expr *nb = kiln_bind(ctx, n, v);
        kiln_tensor *sq = kiln_full_sym(ctx, KILN_F32, 2, (const kiln_expr *[]){nb, nb}, 1);
        float s = (float)(v * (v + 1) / 2);
        fx_check_f32(kiln_sum(kiln_triu(sq, 0), 0, NULL, false), &s, 1, 0, 0);
        if (v == 3)
            assert_int_equal(kiln_context_stats(ctx).kernels_compiled, compiled);
        compiled = kiln_context_stats(ctx).kernels_compiled;
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
}

/* The mask of a KV cache: rows = new tokens, cols = cache + new tokens, both symbolic; one
 * compile for (2 new, 3 cached) and (1 new, 6 cached). */
static void test_engine_transformer_causal_mask(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *m = kiln_causal_mask(ctx, KILN_F32, kiln_int(ctx, 3), kiln_int(ctx, 3));
    const float inf = INFINITY;
    fx_check_f32(m, (const float[]){0, -inf, -inf, 0, 0, -inf, 0, 0, 0}, 9, 0, 0);
    const kiln_expr *fresh = kiln_variable(ctx, "fresh", 1, 4);
    const kiln_expr *cached = kiln_variable(ctx, "cached", 0, 8);
    uint64_t compiled = 0;
    for (int step = 0; step < 2; step++) {
        kiln_scope_begin(ctx);
        int64_t r = step ? 1 : 2, c = step ? 6 : 3;
        const kiln_expr *rows = kiln_bind(ctx, fresh, r);
        const kiln_expr *cols = kiln_expr_add(ctx, kiln_bind(ctx, cached, c), rows);
        kiln_tensor *mk = kiln_causal_mask(ctx, KILN_F16, rows, cols);
        assert_int_equal(kiln_tensor_dtype(mk), KILN_F16);
        float want[16];
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < r + c; j++)
                want[i * (r + c) + j] = j <= i + c ? 0.0f : -inf;
        fx_check_f32(kiln_cast(mk, KILN_F32), want, (size_t)(r * (r + c)), 0, 0);
        if (step == 1)
            assert_int_equal(kiln_context_stats(ctx).kernels_compiled, compiled);
        compiled = kiln_context_stats(ctx).kernels_compiled;
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
}

/* ---- cumsum ---- */

static void test_engine_transformer_cumsum(void **state) {
    kiln_context *ctx = fx_ctx(state);
    /* 100 along dim 1: the doubling scan */
    kiln_tensor *lg = fx_f32(ctx, 2, (const int64_t[]){3, 100}, cs_long);
    fx_check_f32(kiln_cumsum(lg, 1), cs_long_out, N(cs_long_out), 1e-4, RTOL);
    /* a transposed (4, 5) along dim 0: the triangular sum, and its gradient */
    kiln_tensor *st = leaf(ctx, 2, (const int64_t[]){5, 4}, cs_t_stored);
    kiln_tensor *x = kiln_transpose(st, 0, 1);
    kiln_tensor *y = kiln_cumsum(x, 0);
    fx_check_f32(y, cs_t_out, N(cs_t_out), ATOL, RTOL);
    kiln_tensor *w = fx_f32(ctx, 2, (const int64_t[]){4, 5}, cs_r);
    kiln_tensor *g;
    assert_int_equal(kiln_grad(kiln_sum(kiln_mul(y, w), 0, NULL, false), 1, &st, &g), KILN_OK);
    fx_check_f32(kiln_transpose(g, 0, 1), cs_t_gx, N(cs_t_gx), ATOL, RTOL);
    /* the scan's gradient: x's gradient is the reversed cumulative sum of the output's */
    kiln_tensor *row = leaf(ctx, 2, (const int64_t[]){1, 100}, cs_long);
    kiln_tensor *ys = kiln_cumsum(row, 1);
    kiln_tensor *rw = fx_f32(ctx, 2, (const int64_t[]){1, 100}, cs_long + 100);
    kiln_tensor *gs;
    assert_int_equal(kiln_grad(kiln_sum(kiln_mul(ys, rw), 0, NULL, false), 1, &row, &gs), KILN_OK);
    float rev[100];
    double tail = 0;
    for (int k = 99; k >= 0; k--) {
        tail += cs_long[100 + k];
        rev[k] = (float)tail;
    }
    fx_check_f32(gs, rev, 100, 1e-4, RTOL);
    /* integers accumulate in i64, also along the scan (70 > the triangle's limit) */
    int32_t big[70];
    int64_t want[70], acc = 0;
    for (int k = 0; k < 70; k++) {
        big[k] = k % 2 ? INT32_MAX : -5;
        acc += big[k];
        want[k] = acc;
    }
    kiln_tensor *ci = kiln_cumsum(fx_i32(ctx, 1, (const int64_t[]){70}, big), -1);
    assert_int_equal(kiln_tensor_dtype(ci), KILN_I64);
    fx_check_i64(ci, want, 70);
    kiln_tensor *bo =
        kiln_from_data(ctx, KILN_BOOL, 1, (const int64_t[]){4}, (const uint8_t[]){1, 0, 1, 1});
    fx_check_i64(kiln_cumsum(bo, 0), (const int64_t[]){1, 1, 2, 3}, 4);
    /* 0-d: itself */
    float one = 2.5f;
    fx_check_f32(kiln_cumsum(kiln_scalar(ctx, KILN_F32, 2.5), 0), &one, 1, 0, 0);
}

/* A symbolic length: the first n columns of cs_long, n bound to 100 then 37 (the doubling scan
 * over a symbolic size; its steps beyond 37 add nothing), then 37 again, which compiles
 * nothing. (A new value may compile the scan's materialised steps anew: see docs/ops.md.). */
static void test_engine_transformer_cumsum_symbolic(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *lg = fx_f32(ctx, 2, (const int64_t[]){3, 100}, cs_long);
    const kiln_expr *n = kiln_variable(ctx, "len", 1, 100);
    uint64_t compiled = 0;
    for (int step = 0; step < 3; step++) {
        int64_t v = (int64_t[]){100, 37, 37}[step];
        kiln_scope_begin(ctx);
        const kiln_expr *nb = kiln_bind(ctx, n, v);
        kiln_tensor *y = kiln_cumsum(kiln_narrow_sym(lg, 1, kiln_int(ctx, 0), nb), 1);
        fx_assert_shape(y, 2, (const int64_t[]){3, v});
        float got[300];
        fx_read(y, KILN_F32, got, (size_t)(3 * v));
        for (int64_t r = 0; r < 3; r++)
            for (int64_t c = 0; c < v; c++) {
                double want = cs_long_out[r * 100 + c];
                if (!(fabs(got[r * v + c] - want) <= 1e-4 + RTOL * fabs(want)))
                    fail_msg("n %lld, (%lld, %lld): got %.9g, want %.9g", (long long)v,
                             (long long)r, (long long)c, (double)got[r * v + c], want);
            }
        if (step == 2) /* a value bound before: nothing new */
            assert_int_equal(kiln_context_stats(ctx).kernels_compiled, compiled);
        compiled = kiln_context_stats(ctx).kernels_compiled;
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
}

/* ---- topk ---- */

/* topk's indices are i64 and its values are read through them: on a device without shaderInt64
 * (mobile-low) both reads are KILN_ERROR_UNSUPPORTED naming shaderInt64 (returns true then). */
static bool topk_unsupported(kiln_tensor *v, kiln_tensor *i) {
    if (!fx_unsupported_i64(v))
        return false;
    assert_true(fx_unsupported_i64(i));
    return true;
}

static void test_engine_transformer_topk(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){4, 9}, tk_x);
    kiln_tensor *v, *i;
    assert_int_equal(kiln_topk(x, 4, 1, true, &v, &i), KILN_OK);
    fx_assert_shape(v, 2, (const int64_t[]){4, 4});
    assert_int_equal(kiln_tensor_dtype(i), KILN_I64);
    if (!topk_unsupported(v, i)) {
        fx_check_f32(v, tk_large_v, 16, 0, 0);
        fx_check_i64(i, tk_large_i, 16);
    }
    /* smallest, along dim 0 of the transpose */
    assert_int_equal(kiln_topk(kiln_transpose(x, 0, 1), 4, 0, false, &v, &i), KILN_OK);
    if (!topk_unsupported(v, i)) {
        fx_check_f32(kiln_transpose(v, 0, 1), tk_small_v, 16, 0, 0);
        fx_check_i64(kiln_transpose(i, 0, 1), tk_small_i, 16);
    }
    /* integers with the lowest value and ties; unsigned smallest */
    kiln_tensor *xi =
        fx_i32(ctx, 1, (const int64_t[]){5}, (const int32_t[]){INT32_MIN, 3, INT32_MIN, 3, 0});
    assert_int_equal(kiln_topk(xi, 5, 0, true, &v, &i), KILN_OK);
    if (!topk_unsupported(v, i)) {
        fx_check_i32(v, (const int32_t[]){3, 3, 0, INT32_MIN, INT32_MIN}, 5);
        fx_check_i64(i, (const int64_t[]){1, 3, 4, 0, 2}, 5);
    }
    kiln_tensor *xu =
        kiln_from_data(ctx, KILN_U8, 1, (const int64_t[]){4}, (const uint8_t[]){255, 0, 7, 0});
    assert_int_equal(kiln_topk(xu, 3, 0, false, &v, &i), KILN_OK);
    if (!topk_unsupported(v, i)) {
        fx_check_u8(v, KILN_U8, (const uint8_t[]){0, 0, 7}, 3);
        fx_check_i64(i, (const int64_t[]){1, 3, 2}, 3);
    }
    /* NaN is the largest */
    kiln_tensor *xn = fx_f32(ctx, 1, (const int64_t[]){3}, (const float[]){1, NAN, 2});
    assert_int_equal(kiln_topk(xn, 2, 0, true, &v, &i), KILN_OK);
    if (!topk_unsupported(v, i))
        fx_check_f32(v, (const float[]){NAN, 2}, 2, 0, 0);
    /* k = 0: empty results */
    assert_int_equal(kiln_topk(x, 0, 1, true, &v, &i), KILN_OK);
    fx_assert_shape(v, 2, (const int64_t[]){4, 0});
    fx_assert_shape(i, 2, (const int64_t[]){4, 0});
}

/* The C reference of topk on one row: k selections, ties the lower index first. */
static void topk_reference(const float *x, int n, int k, bool largest, float *v, int64_t *idx) {
    bool taken[1100] = {false};
    for (int r = 0; r < k; r++) {
        int best = -1;
        for (int j = 0; j < n; j++) {
            if (!taken[j] && (best < 0 || (largest ? x[j] > x[best] : x[j] < x[best])))
                best = j;
        }
        taken[best] = true;
        v[r] = x[best];
        idx[r] = best;
    }
}

/* A row longer than the rank method's limit (1024): k rounds of a masked argmax. */
static void test_engine_transformer_topk_long_row(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { LEN = 1100 };
    static float x[LEN];
    for (int j = 0; j < LEN; j++)
        x[j] = (float)(j * 37 % LEN) / 7.0f; /* a permutation: distinct values */
    x[5] = x[700] = 1000.0f;                 /* ties */
    x[9] = x[3] = -INFINITY;
    kiln_tensor *t = fx_f32(ctx, 1, (const int64_t[]){LEN}, x);
    for (int largest = 0; largest < 2; largest++) {
        float wv[3];
        int64_t wi[3];
        topk_reference(x, LEN, 3, largest, wv, wi);
        kiln_tensor *v, *i;
        assert_int_equal(kiln_topk(t, 3, 0, largest, &v, &i), KILN_OK);
        if (!topk_unsupported(v, i)) {
            fx_check_f32(v, wv, 3, 0, 0);
            fx_check_i64(i, wi, 3);
        }
    }
}

/* ---- multinomial ---- */

/* 4000 rows of weights (1, 0, 3, 4), read through an expand: frequencies within 0.03 of
 * (1/8, 0, 3/8, 1/2), the zero weight never drawn; the same seed gives the same draws, another
 * seed others; a row of zeros gives V - 1. */
static void test_engine_transformer_multinomial(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { ROWS = 4000 };
    kiln_tensor *wrow = fx_f32(ctx, 2, (const int64_t[]){1, 4}, (const float[]){1, 0, 3, 4});
    kiln_tensor *probs = kiln_expand(wrow, 2, (const int64_t[]){ROWS, 4});
    kiln_tensor *s = kiln_multinomial(probs, 1234);
    fx_assert_shape(s, 1, (const int64_t[]){ROWS});
    assert_int_equal(kiln_tensor_dtype(s), KILN_I64);
    kiln_tensor *z = kiln_zeros(ctx, KILN_F32, 1, (const int64_t[]){3});
    if (fx_unsupported_i64(s)) { /* the draws are i64 indices: no shaderInt64, no draws */
        assert_true(fx_unsupported_i64(kiln_multinomial(z, 1)));
        return;
    }
    static int64_t got[ROWS], again[ROWS], other[ROWS];
    fx_read(s, KILN_I64, got, ROWS);
    int counts[4] = {0};
    for (int k = 0; k < ROWS; k++) {
        assert_true(got[k] >= 0 && got[k] < 4);
        counts[got[k]]++;
    }
    assert_int_equal(counts[1], 0);
    const double want[4] = {0.125, 0, 0.375, 0.5};
    for (int c = 0; c < 4; c++)
        assert_true(fabs(counts[c] / (double)ROWS - want[c]) < 0.03);
    fx_read(kiln_multinomial(probs, 1234), KILN_I64, again, ROWS);
    assert_memory_equal(got, again, sizeof got);
    fx_read(kiln_multinomial(probs, 99), KILN_I64, other, ROWS);
    assert_memory_not_equal(got, other, sizeof got);
    fx_check_i64(kiln_multinomial(z, 1), (const int64_t[]){2}, 1);
}

/* ---- where with a scalar, masked_fill ---- */

static void test_engine_transformer_where_masked_fill(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *cond =
        kiln_from_data(ctx, KILN_BOOL, 2, (const int64_t[]){2, 1}, (const uint8_t[]){1, 0});
    kiln_tensor *a = fx_i32(ctx, 1, (const int64_t[]){3}, (const int32_t[]){1, 2, 3});
    kiln_tensor *w = kiln_where_scalar(cond, a, 2.5); /* a Python float: f32 */
    assert_int_equal(kiln_tensor_dtype(w), KILN_F32);
    fx_check_f32(w, (const float[]){1, 2, 3, 2.5f, 2.5f, 2.5f}, 6, 0, 0);
    kiln_tensor *wi = kiln_where_scalar(cond, a, -4); /* an int: a's dtype */
    assert_int_equal(kiln_tensor_dtype(wi), KILN_I32);
    fx_check_i32(wi, (const int32_t[]){1, 2, 3, -4, -4, -4}, 6);
    kiln_tensor *bt =
        kiln_from_data(ctx, KILN_BOOL, 1, (const int64_t[]){3}, (const uint8_t[]){1, 0, 1});
    kiln_tensor *wb = kiln_where_scalar(cond, bt, 7); /* bool with an int: i64 */
    assert_int_equal(kiln_tensor_dtype(wb), KILN_I64);
    fx_check_i64(wb, (const int64_t[]){1, 0, 1, 7, 7, 7}, 6);
    /* masked_fill: a broadcast mask, -inf into f32; a float value into i32 truncates */
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){2, 3}, (const float[]){1, 2, 3, 4, 5, 6});
    kiln_tensor *mrow =
        kiln_from_data(ctx, KILN_BOOL, 1, (const int64_t[]){3}, (const uint8_t[]){0, 1, 0});
    const float inf = INFINITY;
    fx_check_f32(kiln_masked_fill(x, mrow, -INFINITY), (const float[]){1, -inf, 3, 4, -inf, 6}, 6,
                 0, 0);
    kiln_tensor *mi = kiln_masked_fill(a, kiln_flip(mrow, 0), 7.9);
    assert_int_equal(kiln_tensor_dtype(mi), KILN_I32);
    fx_check_i32(mi, (const int32_t[]){1, 7, 3}, 3);
    /* the gradient passes where the mask is false */
    kiln_tensor *lx = leaf(ctx, 1, (const int64_t[]){3}, (const float[]){1, 2, 3});
    kiln_tensor *g;
    kiln_tensor *loss = kiln_sum(kiln_masked_fill(lx, mrow, 0), 0, NULL, false);
    assert_int_equal(kiln_grad(loss, 1, &lx, &g), KILN_OK);
    fx_check_f32(g, (const float[]){1, 0, 1}, 3, 0, 0);
}

/* ---- view and is_contiguous ---- */

static void test_engine_transformer_view(void **state) {
    kiln_context *ctx = fx_ctx(state);
    float data[12];
    for (int k = 0; k < 12; k++)
        data[k] = (float)k;
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){3, 4}, data);
    assert_true(kiln_is_contiguous(x));
    kiln_tensor *v = kiln_view(x, 3, (const int64_t[]){2, -1, 3});
    fx_assert_shape(v, 3, (const int64_t[]){2, 2, 3});
    assert_true(kiln_is_contiguous(v));
    /* a view shares the storage: a write through it is seen by x */
    assert_int_equal(kiln_fill_(kiln_select(v, 0, 1), -1), KILN_OK);
    float got[12];
    fx_read(x, KILN_F32, got, 12);
    assert_true(got[5] == 5 && got[6] == -1 && got[11] == -1);
    /* a transpose is not contiguous; splitting its dims is a view, merging them is not */
    kiln_tensor *t = kiln_transpose(x, 0, 1); /* (4, 3), strides (1, 4) */
    assert_false(kiln_is_contiguous(t));
    kiln_tensor *split = kiln_view(t, 3, (const int64_t[]){2, 2, 3});
    int64_t strides[3];
    assert_int_equal(kiln_tensor_strides(split, strides), KILN_OK);
    assert_true(strides[0] == 2 && strides[1] == 1 && strides[2] == 4);
    assert_null(kiln_view(t, 1, (const int64_t[]){12}));
    fx_expect_message(ctx, KILN_ERROR_NOT_VIEWABLE, "kiln_view", "(4, 3)", "(1, 4)", "(12)", NULL);
    /* narrow: rows keep contiguity, columns do not; size-1 dims and expands */
    assert_true(kiln_is_contiguous(kiln_narrow(x, 0, 1, 2)));
    assert_false(kiln_is_contiguous(kiln_narrow(x, 1, 1, 2)));
    assert_true(kiln_is_contiguous(kiln_narrow(x, 1, 1, 1)) == false);
    assert_true(kiln_is_contiguous(kiln_unsqueeze(x, 1)));
    assert_false(
        kiln_is_contiguous(kiln_expand(kiln_unsqueeze(x, 0), 3, (const int64_t[]){2, 3, 4})));
    assert_false(kiln_is_contiguous(kiln_flip(x, 1)));
    assert_false(kiln_is_contiguous(NULL));
    kiln_context_clear_error(ctx);
    /* symbolic: (n * 4) viewed as (n, 4) */
    const kiln_expr *n = kiln_variable(ctx, "chunks", 1, 3);
    kiln_scope_begin(ctx);
    const kiln_expr *nb = kiln_bind(ctx, n, 2);
    kiln_tensor *flat = kiln_narrow_sym(kiln_reshape(x, 1, (const int64_t[]){12}), 0,
                                        kiln_int(ctx, 0), kiln_expr_mul(ctx, nb, kiln_int(ctx, 4)));
    kiln_tensor *vs = kiln_view_sym(flat, 2, (const kiln_expr *[]){nb, kiln_int(ctx, 4)});
    fx_assert_shape(vs, 2, (const int64_t[]){2, 4});
    assert_true(kiln_is_contiguous(vs));
    fx_check_f32(vs, (const float[]){0, 1, 2, 3, 4, 5, -1, -1}, 8, 0, 0);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
}

/* ---- errors: the status and a message that begins with the call ---- */

static void test_engine_transformer_errors_shapes(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){2, 3});
    kiln_tensor *b = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){4, 5});
    kiln_tensor *s = kiln_scalar(ctx, KILN_F32, 1);
    assert_null(kiln_cat(2, (kiln_tensor *[]){a, b}, 0));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_cat", "(2, 3)", "(4, 5)", "tensors[1]",
                      NULL);
    assert_null(kiln_cat(2, (kiln_tensor *[]){a, a}, 2));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_cat", "dim 2", NULL);
    assert_null(kiln_cat(1, &s, 0));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_cat", "0-d", NULL);
    assert_null(kiln_cat(0, NULL, 0));
    assert_null(kiln_stack(2, (kiln_tensor *[]){a, kiln_transpose(a, 0, 1)}, 0));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_stack", "(2, 3)", "(3, 2)", NULL);
    assert_null(kiln_stack(2, (kiln_tensor *[]){a, a}, 3));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_stack", "dim 3", NULL);
    assert_null(kiln_triu(kiln_zeros(ctx, KILN_F32, 1, (const int64_t[]){3}), 0));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_triu", "(3)", "2 dims", NULL);
    assert_null(kiln_tril(s, 0));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_tril", NULL);
    assert_null(kiln_cumsum(a, -3));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_cumsum", "dim -3", NULL);
    assert_null(kiln_multinomial(s, 1));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_multinomial", NULL);
    assert_null(kiln_view(a, 2, (const int64_t[]){4, 2}));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_view", NULL);
    assert_null(kiln_masked_fill(a, kiln_zeros(ctx, KILN_BOOL, 1, (const int64_t[]){2}), 0));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_masked_fill", NULL);
    /* a NULL operand passes an earlier error through */
    assert_null(kiln_gelu(NULL, false));
    assert_int_equal(kiln_context_status(ctx), KILN_OK);
}

static void test_engine_transformer_errors_norms(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){2, 3});
    kiln_tensor *w3 = kiln_ones(ctx, KILN_F32, 1, (const int64_t[]){3});
    kiln_tensor *w2 = kiln_ones(ctx, KILN_F32, 1, (const int64_t[]){2});
    kiln_tensor *h3 = kiln_ones(ctx, KILN_F16, 1, (const int64_t[]){3});
    kiln_tensor *xi = kiln_zeros(ctx, KILN_I32, 2, (const int64_t[]){2, 3});
    assert_null(kiln_layer_norm(xi, 1, NULL, NULL, 1e-5));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_layer_norm", "i32", NULL);
    assert_null(kiln_layer_norm(x, 0, NULL, NULL, 1e-5));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_layer_norm", "ndims is 0", NULL);
    assert_null(kiln_layer_norm(x, 3, NULL, NULL, 1e-5));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_layer_norm", "ndims is 3", NULL);
    assert_null(kiln_layer_norm(x, 1, w2, NULL, 1e-5));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_layer_norm", "(2, 3)", "(2)", "weight",
                      NULL);
    assert_null(kiln_layer_norm(x, 1, w3, w2, 1e-5));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_layer_norm", "bias", NULL);
    assert_null(kiln_layer_norm(x, 1, h3, NULL, 1e-5));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_layer_norm", "f16", NULL);
    assert_null(kiln_layer_norm(x, 1, NULL, NULL, -1));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_layer_norm", "eps", NULL);
    assert_null(kiln_rms_norm(x, 1, w2, 1e-6));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_rms_norm", "weight", NULL);
    assert_null(kiln_rms_norm(xi, 1, NULL, 1e-6));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_rms_norm", NULL);
    assert_null(kiln_rms_norm(x, 1, NULL, NAN));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_rms_norm", "eps", NULL);
}

static void test_engine_transformer_errors_dtypes(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *xi = kiln_zeros(ctx, KILN_I32, 1, (const int64_t[]){3});
    kiln_tensor *xu = kiln_zeros(ctx, KILN_U8, 1, (const int64_t[]){3});
    kiln_tensor *m = kiln_zeros(ctx, KILN_BOOL, 1, (const int64_t[]){3});
    assert_null(kiln_gelu(xi, true));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_gelu", "i32", NULL);
    assert_null(kiln_silu(xi));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_silu", "i32", NULL);
    assert_null(kiln_multinomial(xi, 1));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_multinomial", NULL);
    assert_null(kiln_causal_mask(ctx, KILN_I32, kiln_int(ctx, 2), kiln_int(ctx, 2)));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_causal_mask", "i32", NULL);
    assert_null(kiln_causal_mask(ctx, KILN_F32, NULL, kiln_int(ctx, 2)));
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_causal_mask", NULL);
    assert_null(kiln_causal_mask(ctx, KILN_F32, kiln_int(ctx, -1), kiln_int(ctx, 2)));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_causal_mask", NULL);
    assert_null(kiln_masked_fill(xi, xi, 1));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_masked_fill", "bool", NULL);
    assert_null(kiln_masked_fill(xu, m, 300));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_masked_fill", "300", NULL);
    assert_null(kiln_where_scalar(m, xu, -1));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_where_scalar", NULL);
}

/* topk returns a status (not sticky) and NULL results on failure. */
static void test_engine_transformer_errors_topk(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){2, 3});
    kiln_tensor *v = x, *i = x;
    assert_int_equal(kiln_topk(x, 4, 1, true, &v, &i), KILN_ERROR_OUT_OF_RANGE);
    assert_null(v);
    assert_null(i);
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_topk", "k is 4", "(2, 3)", NULL);
    assert_int_equal(kiln_topk(x, -1, 1, true, &v, &i), KILN_ERROR_OUT_OF_RANGE);
    kiln_context_clear_error(ctx);
    assert_int_equal(kiln_topk(x, 1, 2, true, &v, &i), KILN_ERROR_OUT_OF_RANGE);
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_topk", "dim 2", NULL);
    kiln_tensor *b = kiln_zeros(ctx, KILN_BOOL, 1, (const int64_t[]){3});
    assert_int_equal(kiln_topk(b, 1, 0, true, &v, &i), KILN_ERROR_DTYPE_MISMATCH);
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_topk", "bool", NULL);
    assert_int_equal(kiln_topk(x, 1, 0, true, NULL, &i), KILN_ERROR_INVALID_ARGUMENT);
    assert_null(i);
    kiln_context_clear_error(ctx);
    assert_int_equal(kiln_topk(NULL, 1, 0, true, &v, &i), KILN_ERROR_INVALID_ARGUMENT);
    kiln_context_clear_error(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_transformer_cat),
        ENG_TEST(test_engine_transformer_cat_promotion),
        ENG_TEST(test_engine_transformer_cat_many_symbolic),
        ENG_TEST(test_engine_transformer_stack),
        ENG_TEST(test_engine_transformer_layer_norm),
        ENG_TEST(test_engine_transformer_layer_norm_symbolic),
        ENG_TEST(test_engine_transformer_rms_norm),
        ENG_TEST(test_engine_transformer_erf),
        ENG_TEST(test_engine_transformer_gelu_silu),
        ENG_TEST(test_engine_transformer_triu_tril),
        ENG_TEST(test_engine_transformer_causal_mask),
        ENG_TEST(test_engine_transformer_cumsum),
        ENG_TEST(test_engine_transformer_cumsum_symbolic),
        ENG_TEST(test_engine_transformer_topk),
        ENG_TEST(test_engine_transformer_topk_long_row),
        ENG_TEST(test_engine_transformer_multinomial),
        ENG_TEST(test_engine_transformer_where_masked_fill),
        ENG_TEST(test_engine_transformer_view),
        ENG_TEST(test_engine_transformer_errors_shapes),
        ENG_TEST(test_engine_transformer_errors_norms),
        ENG_TEST(test_engine_transformer_errors_dtypes),
        ENG_TEST(test_engine_transformer_errors_topk),
    };
    return ENG_RUN_BOTH(tests);
}
