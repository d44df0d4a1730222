/* Reverse-mode autograd (kiln_requires_grad_, kiln_grad) on both backends.
 *
 * The cases of grad_fixtures.h (written by gen_grad_fixtures.py, PyTorch the oracle) cover
 * every differentiable op of kiln.h, leaves read through views (negative, zero and overlapping
 * strides), broadcasting, several paths and unused inputs: each is rebuilt from its table row
 * by build_op and compared with |got - want| <= 1e-4 |want| + 1e-5. Targeted tests follow: a
 * finite-difference check, the version rule (KILN_ERROR_MODIFIED), symbolic sizes, laziness,
 * argument errors and memory in a training-like loop. */
#include "engine_fixture.h"
#include "grad_fixtures.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* A fresh leaf of the given f32 values that requires a gradient. */
static kiln_tensor *leaf(kiln_context *ctx, uint32_t ndim, const int64_t *shape,
                         const float *data) {
    kiln_tensor *t = fx_f32(ctx, ndim, shape, data);
    assert_int_equal(kiln_requires_grad_(t, true), KILN_OK);
    assert_true(kiln_requires_grad(t));
    return t;
}

static kiln_tensor *view_of_input(kiln_tensor *t, const gc_input *in) {
    switch (in->view) {
    case GV_NONE:
        return t;
    case GV_FLIP:
        return kiln_flip(t, (int32_t)in->vp[0]);
    case GV_EXPAND:
        return kiln_expand(t, in->vndim, in->vp);
    case GV_AS_STRIDED:
        return kiln_as_strided(t, in->vndim, in->vp, in->vp + in->vndim, in->vp[2 * in->vndim]);
    case GV_T:
        return kiln_transpose(t, 0, 1);
    }
    return NULL;
}

static void axes_of(const int64_t *p, uint32_t *naxes, int32_t *axes, bool *keepdim) {
    *naxes = (uint32_t)p[0];
    for (uint32_t i = 0; i < *naxes; i++)
        axes[i] = (int32_t)p[1 + i];
    *keepdim = p[1 + *naxes] != 0;
}

/* The op of a case over its (viewed) inputs x[]; p and d as gen_grad_fixtures.py's forward. */
static kiln_tensor *build_op(kiln_context *ctx, const gc_case *c, kiln_tensor *const *x) {
    const int64_t *p = c->p;
    kiln_tensor *a = x[0], *b = c->nin > 1 ? x[1] : NULL;
    int32_t axes[8], dims[8];
    uint32_t naxes;
    bool keep;
    for (uint32_t i = 0; i < 8; i++)
        dims[i] = (int32_t)p[i];
    switch (c->op) {
    case GOP_ADD:
        return kiln_add(a, b);
    case GOP_SUB:
        return kiln_sub(a, b);
    case GOP_MUL:
        return kiln_mul(a, b);
    case GOP_DIV:
        return kiln_div(a, b);
    case GOP_POW:
        return kiln_pow(a, b);
    case GOP_MAXIMUM:
        return kiln_maximum(a, b);
    case GOP_MINIMUM:
        return kiln_minimum(a, b);
    case GOP_WHERE:
        return kiln_where(kiln_gt(x[2], kiln_scalar(ctx, KILN_F32, 0)), a, b);
    case GOP_NEG:
        return kiln_neg(a);
    case GOP_ABS:
        return kiln_abs(a);
    case GOP_EXP:
        return kiln_exp(a);
    case GOP_LOG:
        return kiln_log(a);
    case GOP_SQRT:
        return kiln_sqrt(a);
    case GOP_RSQRT:
        return kiln_rsqrt(a);
    case GOP_SIN:
        return kiln_sin(a);
    case GOP_COS:
        return kiln_cos(a);
    case GOP_TANH:
        return kiln_tanh(a);
    case GOP_SIGMOID:
        return kiln_sigmoid(a);
    case GOP_RELU:
        return kiln_relu(a);
    case GOP_CAST_F16:
        return kiln_cast(kiln_cast(a, KILN_F16), KILN_F32);
    case GOP_ADD_SCALAR:
        return kiln_add_scalar(a, c->d);
    case GOP_MUL_SCALAR:
        return kiln_mul_scalar(a, c->d);
    case GOP_SUM:
    case GOP_PROD:
    case GOP_MAX:
    case GOP_MIN:
    case GOP_MEAN:
    case GOP_VAR:
    case GOP_STD:
        axes_of(p, &naxes, axes, &keep);
        switch (c->op) {
        case GOP_SUM:
            return kiln_sum(a, naxes, axes, keep);
        case GOP_PROD:
            return kiln_prod(a, naxes, axes, keep);
        case GOP_MAX:
            return kiln_max(a, naxes, axes, keep);
        case GOP_MIN:
            return kiln_min(a, naxes, axes, keep);
        case GOP_MEAN:
            return kiln_mean(a, naxes, axes, keep);
        case GOP_VAR:
            return kiln_var(a, naxes, axes, c->d, keep);
        default:
            return kiln_std(a, naxes, axes, c->d, keep);
        }
    case GOP_SOFTMAX:
        return kiln_softmax(a, (int32_t)p[0]);
    case GOP_LOG_SOFTMAX:
        return kiln_log_softmax(a, (int32_t)p[0]);
    case GOP_MATMUL:
        return kiln_matmul(a, b);
    case GOP_CONV2D:
        return kiln_conv2d(a, b, p[0], p[1]);
    case GOP_RESHAPE:
        return kiln_reshape(a, (uint32_t)p[0], p + 1);
    case GOP_PERMUTE:
        return kiln_permute(a, dims);
    case GOP_TRANSPOSE:
        return kiln_transpose(a, (int32_t)p[0], (int32_t)p[1]);
    case GOP_EXPAND:
        return kiln_expand(a, (uint32_t)p[0], p + 1);
    case GOP_PAD:
        return kiln_pad(a, p);
    case GOP_SHRINK:
        return kiln_shrink(a, p, p + kiln_tensor_ndim(a));
    case GOP_FLIP:
        return kiln_flip(a, (int32_t)p[0]);
    case GOP_SLICE:
        return kiln_slice(a, (int32_t)p[0], p[1], p[2], p[3]);
    case GOP_SLICE_SYM:
        return kiln_slice_sym(a, (int32_t)p[0], kiln_int(ctx, p[1]), kiln_int(ctx, p[2]), p[3]);
    case GOP_UNSQUEEZE:
        return kiln_unsqueeze(a, (int32_t)p[0]);
    case GOP_SQUEEZE:
        return kiln_squeeze(a, (int32_t)p[0]);
    case GOP_NARROW:
        return kiln_narrow(a, (int32_t)p[0], p[1], p[2]);
    case GOP_SELECT:
        return kiln_select(a, (int32_t)p[0], p[1]);
    case GOP_DIAGONAL:
        return kiln_diagonal(a, p[0], (int32_t)p[1], (int32_t)p[2]);
    case GOP_UNFOLD:
        return kiln_unfold(a, (int32_t)p[0], p[1], p[2]);
    case GOP_AS_STRIDED:
        return kiln_as_strided(a, (uint32_t)p[0], p + 1, p + 1 + p[0], p[1 + 2 * p[0]]);
    case GOP_CHAIN_MLP:
        return kiln_log_softmax(kiln_tanh(kiln_add(kiln_matmul(a, b), x[2])), -1);
    case GOP_CHAIN_PATHS:
        return kiln_add(kiln_mul(a, a), kiln_mul(kiln_sin(a), kiln_exp(a)));
    case GOP_CHAIN_UNUSED:
        return kiln_mul_scalar(a, 3);
    case GOP_CHAIN_CONVLIKE:
        return kiln_softmax(kiln_matmul(kiln_unfold(a, 1, 3, 2), b), -1);
    case GOP_CHAIN_NORM: {
        const int32_t last[1] = {-1};
        kiln_tensor *centered = kiln_sub(a, kiln_mean(a, 1, last, true));
        kiln_tensor *sd = kiln_sqrt(kiln_add_scalar(kiln_var(a, 1, last, 0, true), 1e-5));
        return kiln_add(kiln_mul(kiln_div(centered, sd), b), x[2]);
    }
    case GOP_CHAIN_ATTN:
        return kiln_matmul(
            kiln_softmax(kiln_mul_scalar(kiln_matmul(a, kiln_transpose(b, 0, 1)), 0.5), -1), x[2]);
    case GOP_CHAIN_MAXPOOL: {
        /* windows of a padded view (a second view over it: movement.c unfold_padded) */
        kiln_tensor *pad = kiln_pad(a, (const int64_t[]){0, 0, 1, 1, 1, 1});
        kiln_tensor *win = kiln_unfold(kiln_unfold(pad, 1, 3, 2), 2, 3, 2);
        return kiln_max(win, 2, (const int32_t[]){-1, -2}, false);
    }
    case GOP_CHAIN_VIEWMIX: {
        kiln_tensor *v = kiln_transpose(kiln_slice(kiln_flip(a, 1), 0, 1, 4, 2), 0, 1);
        v = kiln_expand(kiln_unsqueeze(v, 0), 3, (const int64_t[]){3, 5, 2});
        v = kiln_sum(v, 1, (const int32_t[]){0}, false);
        return kiln_mul(v, kiln_transpose(kiln_narrow(a, 0, 0, 1), 0, 1));
    }
    case GOP_CHAIN_DIAG:
        return kiln_mul(kiln_diagonal(kiln_matmul(a, kiln_transpose(a, 0, 1)), 0, 0, 1),
                        kiln_prod(kiln_select(a, 1, 1), 0, NULL, false));
    case GOP_CHAIN_VIEWS:
        return kiln_add(kiln_add(kiln_mul(a, kiln_flip(a, 0)), kiln_transpose(a, 0, 1)),
                        kiln_sum(a, 1, (const int32_t[]){1}, true));
    }
    return NULL;
}

/* sum(out * r) over every element: a 0-d loss. */
static kiln_tensor *weighted_loss(kiln_context *ctx, kiln_tensor *out, uint32_t ndim,
                                  const int64_t *shape, const float *r) {
    kiln_tensor *w = fx_f32(ctx, ndim, shape, r);
    return kiln_sum(kiln_mul(out, w), 0, NULL, false);
}

static void run_case(kiln_context *ctx, const gc_case *c) {
    kiln_scope_begin(ctx);
    kiln_tensor *leaves[3] = {0}, *x[3] = {0}, *grads[3] = {0};
    for (uint32_t i = 0; i < c->nin; i++) {
        leaves[i] = leaf(ctx, c->in[i].ndim, c->in[i].shape, c->in[i].data);
        x[i] = view_of_input(leaves[i], &c->in[i]);
    }
    kiln_tensor *out = build_op(ctx, c, x);
    if (!out)
        fail_msg("case %s: the op failed: %s", c->name, kiln_context_message(ctx));
    fx_assert_shape(out, c->out_ndim, c->out_shape);
    kiln_tensor *loss = weighted_loss(ctx, out, c->out_ndim, c->out_shape, c->r);
    kiln_status st = kiln_grad(loss, c->nin, leaves, grads);
    if (st != KILN_OK)
        fail_msg("case %s: kiln_grad: %s", c->name, kiln_context_message(ctx));
    st = kiln_realize_many(ctx, c->nin, grads);
    if (st != KILN_OK)
        fail_msg("case %s: realize: %s", c->name, kiln_context_message(ctx));
    for (uint32_t i = 0; i < c->nin; i++) {
        int64_t n = 1;
        for (uint32_t d = 0; d < c->in[i].ndim; d++)
            n *= c->in[i].shape[d];
        fx_assert_shape(grads[i], c->in[i].ndim, c->in[i].shape);
        float got[256];
        assert_true(n <= (int64_t)N(got));
        fx_read(grads[i], KILN_F32, got, (size_t)n);
        for (int64_t k = 0; k < n; k++) {
            double g = got[k], w = c->in[i].grad[k];
            if (!(fabs(g - w) <= 1e-5 + 1e-4 * fabs(w)))
                fail_msg("case %s: the gradient of input %u, element %lld: got %.9g, want %.9g",
                         c->name, i, (long long)k, g, w);
        }
    }
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
}

static void test_grad_torch_cases(void **state) {
    kiln_context *ctx = fx_ctx(state);
    for (size_t k = 0; k < N(gc_cases); k++)
        run_case(ctx, &gc_cases[k]);
}

/* ---- (a) finite differences ------------------------------------------------------------- */

typedef kiln_tensor *(*chain_fn)(kiln_context *ctx, kiln_tensor *x, kiln_tensor *y);

/* loss = sum(tanh(x @ y) * sigmoid(x @ y)) */
static kiln_tensor *chain_a(kiln_context *ctx, kiln_tensor *x, kiln_tensor *y) {
    (void)ctx;
    kiln_tensor *h = kiln_matmul(x, y);
    return kiln_sum(kiln_mul(kiln_tanh(h), kiln_sigmoid(h)), 0, NULL, false);
}

/* loss = mean(log_softmax(x * exp(y[:, 0] / 2), 1)^2) + std(x) */
static kiln_tensor *chain_b(kiln_context *ctx, kiln_tensor *x, kiln_tensor *y) {
    (void)ctx;
    kiln_tensor *yy = kiln_reshape(kiln_select(y, 1, 0), 2, (const int64_t[]){1, 3});
    kiln_tensor *l = kiln_log_softmax(kiln_mul(x, kiln_exp(kiln_mul_scalar(yy, 0.5))), 1);
    return kiln_add(kiln_mean(kiln_mul(l, l), 0, NULL, false), kiln_std(x, 0, NULL, 1.0, false));
}

/* loss = sum(sqrt(x^2 + 1) * cos(flip(x)) / (2 + sin(y[0, :]))) */
static kiln_tensor *chain_c(kiln_context *ctx, kiln_tensor *x, kiln_tensor *y) {
    kiln_tensor *s = kiln_sqrt(kiln_add_scalar(kiln_mul(x, x), 1));
    kiln_tensor *num = kiln_mul(s, kiln_cos(kiln_flip(x, 1)));
    kiln_tensor *den = kiln_add(kiln_scalar(ctx, KILN_F32, 2), kiln_sin(kiln_select(y, 1, 0)));
    return kiln_sum(kiln_div(num, den), 0, NULL, false);
}

/* The loss of chain at x, y (no gradient recorded: plain tensors). */
static kiln_tensor *loss_at(kiln_context *ctx, chain_fn fn, const float *xv, const float *yv) {
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){2, 3}, xv);
    kiln_tensor *y = fx_f32(ctx, 2, (const int64_t[]){3, 2}, yv);
    return fn(ctx, x, y);
}

static void test_grad_finite_differences(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const chain_fn chains[] = {chain_a, chain_b, chain_c};
    const float xv[6] = {0.3f, -0.7f, 0.5f, 0.9f, -0.2f, 0.1f};
    const float yv[6] = {0.4f, 0.25f, -0.6f, 0.8f, 0.15f, -0.35f};
    const float h = 1e-2f;
    for (size_t c = 0; c < N(chains); c++) {
        kiln_scope_begin(ctx);
        kiln_tensor *x = leaf(ctx, 2, (const int64_t[]){2, 3}, xv);
        kiln_tensor *y = leaf(ctx, 2, (const int64_t[]){3, 2}, yv);
        kiln_tensor *g[2];
        assert_int_equal(kiln_grad(chains[c](ctx, x, y), 2, (kiln_tensor *[]){x, y}, g), KILN_OK);
        /* Central differences of every element of x and y: 24 losses, realized together. */
        kiln_tensor *losses[24];
        for (int which = 0; which < 2; which++) {
            for (int k = 0; k < 6; k++) {
                for (int sign = 0; sign < 2; sign++) {
                    float xp[6], yp[6];
                    memcpy(xp, xv, sizeof xp);
                    memcpy(yp, yv, sizeof yp);
                    (which ? yp : xp)[k] += sign ? -h : h;
                    losses[(which * 6 + k) * 2 + sign] = loss_at(ctx, chains[c], xp, yp);
                }
            }
        }
        kiln_tensor *all[26];
        memcpy(all, losses, sizeof losses);
        all[24] = g[0];
        all[25] = g[1];
        assert_int_equal(kiln_realize_many(ctx, 26, all), KILN_OK);
        float gv[2][6];
        fx_read(g[0], KILN_F32, gv[0], 6);
        fx_read(g[1], KILN_F32, gv[1], 6);
        for (int which = 0; which < 2; which++) {
            for (int k = 0; k < 6; k++) {
                float lp, lm;
                fx_read(losses[(which * 6 + k) * 2], KILN_F32, &lp, 1);
                fx_read(losses[(which * 6 + k) * 2 + 1], KILN_F32, &lm, 1);
                double fd = ((double)lp - (double)lm) / (2.0 * (double)h);
                if (fabs(fd - gv[which][k]) > 2e-3 + 2e-2 * fabs(fd))
                    fail_msg("chain %zu, input %d, element %d: kiln_grad %.6g, finite "
                             "differences %.6g",
                             c, which, k, gv[which][k], fd);
            }
        }
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
}

/* ---- (b), (c) versions ------------------------------------------------------------------ */

static void expect_modified(kiln_context *ctx, kiln_status st, kiln_tensor *const *grads,
                            uint32_t n) {
    assert_int_equal(st, KILN_ERROR_MODIFIED);
    for (uint32_t i = 0; i < n; i++)
        assert_null(grads[i]);
    const char *msg = kiln_context_message(ctx);
    if (strncmp(msg, "kiln_grad:", 10) != 0 || !strstr(msg, "in place"))
        fail_msg("unexpected message: %s", msg);
    kiln_context_clear_error(ctx);
}

static void test_grad_written_after_use(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const float xv[4] = {1, 2, 3, 4}, wv[4] = {0.5f, -1, 2, 0.25f};
    const int64_t s[1] = {4};
    /* kiln_copy_ into x after y = x * w read it: w's gradient needs the old x. */
    for (int how = 0; how < 3; how++) {
        kiln_scope_begin(ctx);
        kiln_tensor *x = leaf(ctx, 1, s, xv), *w = leaf(ctx, 1, s, wv);
        kiln_tensor *loss = kiln_sum(kiln_mul(x, w), 0, NULL, false);
        kiln_tensor *src = fx_f32(ctx, 1, s, (const float[]){9, 9, 9, 9});
        if (how == 0)
            assert_int_equal(kiln_copy_(x, src), KILN_OK);
        else if (how == 1)
            assert_int_equal(kiln_add_(x, src), KILN_OK);
        else /* through a view of x's storage */
            assert_int_equal(kiln_fill_(kiln_narrow(x, 0, 1, 2), 0), KILN_OK);
        kiln_tensor *g[2] = {(kiln_tensor *)1, (kiln_tensor *)1};
        expect_modified(ctx, kiln_grad(loss, 2, (kiln_tensor *[]){x, w}, g), g, 2);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    /* Only the values a rule reads count: after a write to x, the gradient of x @ w (or x * w)
     * with respect to x reads w alone and is fine; with respect to w it needs the old x. */
    for (int op = 0; op < 2; op++) {
        kiln_scope_begin(ctx);
        kiln_tensor *x = leaf(ctx, 2, (const int64_t[]){2, 2}, xv);
        kiln_tensor *w = leaf(ctx, 2, (const int64_t[]){2, 2}, wv);
        kiln_tensor *y = op ? kiln_mul(x, w) : kiln_matmul(x, w);
        kiln_tensor *loss = kiln_sum(y, 0, NULL, false);
        assert_int_equal(kiln_add_(x, kiln_scalar(ctx, KILN_F32, 1)), KILN_OK);
        kiln_tensor *g = NULL;
        assert_int_equal(kiln_grad(loss, 1, &x, &g), KILN_OK);
        /* matmul: d/dx[i][k] = sum_j w[k][j]; mul: w */
        const float want_mm[4] = {wv[0] + wv[1], wv[2] + wv[3], wv[0] + wv[1], wv[2] + wv[3]};
        fx_check_f32(g, op ? wv : want_mm, 4, 0, 0);
        g = (kiln_tensor *)1;
        expect_modified(ctx, kiln_grad(loss, 1, &w, &g), &g, 1);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    /* An update after kiln_grad: the gradient is of the values used (the lazy graph reads the
     * old x), realized after the update. */
    kiln_tensor *x = leaf(ctx, 1, s, xv), *w = leaf(ctx, 1, s, wv);
    kiln_tensor *loss = kiln_sum(kiln_mul(kiln_mul(x, w), x), 0, NULL, false); /* sum x^2 w */
    kiln_tensor *g[2];
    assert_int_equal(kiln_grad(loss, 2, (kiln_tensor *[]){x, w}, g), KILN_OK);
    /* SGD-like: x -= 0.1 gx, w -= 0.1 gw, then read the gradients. */
    assert_int_equal(kiln_add_(x, kiln_mul_scalar(g[0], -0.1)), KILN_OK);
    assert_int_equal(kiln_add_(w, kiln_mul_scalar(g[1], -0.1)), KILN_OK);
    float gx[4], gw[4], want_x[4], want_w[4], newx[4];
    for (int i = 0; i < 4; i++) {
        want_x[i] = 2 * xv[i] * wv[i];
        want_w[i] = xv[i] * xv[i];
    }
    fx_read(g[0], KILN_F32, gx, 4);
    fx_read(g[1], KILN_F32, gw, 4);
    fx_read(x, KILN_F32, newx, 4);
    for (int i = 0; i < 4; i++) {
        assert_float_equal(gx[i], want_x[i], 1e-5);
        assert_float_equal(gw[i], want_w[i], 1e-5);
        assert_float_equal(newx[i], xv[i] - 0.1f * want_x[i], 1e-5);
    }
    kiln_release(x);
    kiln_release(w);
    kiln_release(loss);
    kiln_release(g[0]);
    kiln_release(g[1]);
}

static void test_grad_overwritten_before_use(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const float xv[3] = {1, 2, 3};
    kiln_scope_begin(ctx);
    kiln_tensor *x = leaf(ctx, 1, (const int64_t[]){3}, xv);
    kiln_tensor *y = kiln_mul_scalar(x, 2);
    assert_int_equal(kiln_fill_(y, 0), KILN_OK);
    kiln_tensor *loss = kiln_sum(y, 0, NULL, false);
    kiln_tensor *g = (kiln_tensor *)1;
    kiln_status st = kiln_grad(loss, 1, &x, &g);
    assert_int_equal(st, KILN_ERROR_MODIFIED);
    assert_null(g);
    const char *msg = kiln_context_message(ctx);
    if (strncmp(msg, "kiln_grad:", 10) != 0 || !strstr(msg, "overwritten"))
        fail_msg("unexpected message: %s", msg);
    kiln_context_clear_error(ctx);
    /* Writing before any op read y's history is the same question through a view. */
    kiln_tensor *y2 = kiln_mul_scalar(x, 2);
    assert_int_equal(kiln_fill_(kiln_select(y2, 0, 1), 5), KILN_OK);
    st = kiln_grad(kiln_sum(y2, 0, NULL, false), 1, &x, &g);
    assert_int_equal(st, KILN_ERROR_MODIFIED);
    assert_null(g);
    kiln_context_clear_error(ctx);
    /* An equal computation (one node until written) written in place is another tensor: y3's
     * history is intact, and its gradient is of the values it holds. */
    kiln_tensor *w = leaf(ctx, 1, (const int64_t[]){3}, (const float[]){4, 5, 6});
    kiln_tensor *y3 = kiln_mul(x, w), *y4 = kiln_mul(x, w);
    assert_int_equal(kiln_fill_(y4, 0), KILN_OK);
    kiln_tensor *gs[2];
    assert_int_equal(
        kiln_grad(kiln_sum(kiln_mul(y3, y3), 0, NULL, false), 2, (kiln_tensor *[]){x, w}, gs),
        KILN_OK);
    /* d/dx sum((x w)^2) = 2 x w^2, d/dw = 2 x^2 w */
    fx_check_f32(gs[0], (const float[]){32, 100, 216}, 3, 0, 1e-6);
    fx_check_f32(gs[1], (const float[]){8, 40, 108}, 3, 0, 1e-6);
    fx_check_f32(y4, (const float[]){0, 0, 0}, 3, 0, 0);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
}

/* ---- (d) symbolic sizes ------------------------------------------------------------------- */

static void test_grad_symbolic_batch(void **state) {
    kiln_context *ctx = fx_ctx(state);
    float xall[64 * 4], wv[4 * 3];
    for (int i = 0; i < 64 * 4; i++)
        xall[i] = (float)((i * 37) % 17 - 8) / 8;
    for (int i = 0; i < 12; i++)
        wv[i] = (float)((i * 5) % 7 - 3) / 4;
    const kiln_expr *n = kiln_variable(ctx, "n", 1, 64);
    const int64_t values[2] = {5, 11};
    uint64_t compiled_first = 0;
    for (int step = 0; step < 2; step++) {
        int64_t rows = values[step];
        kiln_scope_begin(ctx);
        const kiln_expr *b = kiln_bind(ctx, n, rows);
        assert_non_null(b);
        /* x (n, 4): the first n rows of a (64, 4) storage copied into an (n, 4) leaf. */
        kiln_tensor *src = fx_f32(ctx, 2, (const int64_t[]){64, 4}, xall);
        kiln_tensor *x =
            kiln_empty_sym(ctx, KILN_F32, 2, (const kiln_expr *[]){b, kiln_int(ctx, 4)});
        assert_int_equal(kiln_copy_(x, kiln_narrow_sym(src, 0, kiln_int(ctx, 0), b)), KILN_OK);
        assert_int_equal(kiln_requires_grad_(x, true), KILN_OK);
        kiln_tensor *w = leaf(ctx, 2, (const int64_t[]){4, 3}, wv);
        /* x through a symbolic reshape and back: (n, 4) -> (n * 4) -> (n, 4). */
        kiln_tensor *flat =
            kiln_reshape_sym(x, 1, (const kiln_expr *[]){kiln_expr_mul(ctx, b, kiln_int(ctx, 4))});
        kiln_tensor *x2 = kiln_reshape_sym(flat, 2, (const kiln_expr *[]){b, kiln_int(ctx, 4)});
        kiln_tensor *loss = kiln_mean(kiln_relu(kiln_matmul(x2, w)), 0, NULL, false);
        kiln_tensor *g[2];
        assert_int_equal(kiln_grad(loss, 2, (kiln_tensor *[]){x, w}, g), KILN_OK);
        uint64_t before = kiln_context_stats(ctx).kernels_compiled;
        assert_int_equal(kiln_realize_many(ctx, 2, g), KILN_OK);
        uint64_t compiled = kiln_context_stats(ctx).kernels_compiled - before;
        if (step == 0)
            compiled_first = compiled;
        else if (compiled != 0)
            fail_msg("n = %lld compiled %llu kernels (the first value %llu)", (long long)rows,
                     (unsigned long long)compiled, (unsigned long long)compiled_first);
        /* By hand: h = x w, loss = sum(relu(h)) / (3 n). */
        double gx[64 * 4] = {0}, gw[12] = {0};
        for (int64_t i = 0; i < rows; i++) {
            for (int j = 0; j < 3; j++) {
                double h = 0;
                for (int k = 0; k < 4; k++)
                    h += (double)xall[i * 4 + k] * wv[k * 3 + j];
                if (h <= 0)
                    continue;
                for (int k = 0; k < 4; k++) {
                    gw[k * 3 + j] += xall[i * 4 + k] / (3.0 * (double)rows);
                    gx[i * 4 + k] += wv[k * 3 + j] / (3.0 * (double)rows);
                }
            }
        }
        float got[64 * 4];
        fx_assert_shape(g[0], 2, (const int64_t[]){rows, 4});
        fx_read(g[0], KILN_F32, got, (size_t)rows * 4);
        for (int64_t i = 0; i < rows * 4; i++)
            assert_float_equal(got[i], gx[i], 1e-5);
        fx_read(g[1], KILN_F32, got, 12);
        for (int i = 0; i < 12; i++)
            assert_float_equal(got[i], gw[i], 1e-5);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    assert_true(compiled_first > 0);
}

/* Symbolic sizes through kiln_slice_sym (a narrow and a strided slice of a dim of symbolic
 * size), kiln_slice with a negative step over that dim, kiln_expand_sym (summed back over n rows)
 * and a mean over n * 3 elements. */
static void test_grad_symbolic_slice_expand(void **state) {
    kiln_context *ctx = fx_ctx(state);
    float xall[16 * 3];
    for (int i = 0; i < 16 * 3; i++)
        xall[i] = (float)(i % 7) / 4;
    const kiln_expr *n = kiln_variable(ctx, "rows", 2, 16);
    const int64_t values[2] = {6, 9};
    for (int step = 0; step < 2; step++) {
        int64_t rows = values[step];
        kiln_scope_begin(ctx);
        const kiln_expr *b = kiln_bind(ctx, n, rows);
        const kiln_expr *shape[2] = {b, kiln_int(ctx, 3)};
        kiln_tensor *src = fx_f32(ctx, 2, (const int64_t[]){16, 3}, xall);
        kiln_tensor *x = kiln_empty_sym(ctx, KILN_F32, 2, shape);
        assert_int_equal(kiln_copy_(x, kiln_narrow_sym(src, 0, kiln_int(ctx, 0), b)), KILN_OK);
        assert_int_equal(kiln_requires_grad_(x, true), KILN_OK);
        kiln_tensor *bias = leaf(ctx, 2, (const int64_t[]){1, 3}, (const float[]){1, 2, 3});
        /* rows 1, 3, 5, ... of x: slice_sym(x, 0, 1, n, 2) */
        kiln_tensor *odd = kiln_slice_sym(x, 0, kiln_int(ctx, 1), b, 2);
        /* rows n - 1, n - 3, ...: kiln_slice of the symbolic dim with a negative step */
        kiln_tensor *back = kiln_slice(x, 0, INT64_MAX, INT64_MIN, -2);
        kiln_tensor *loss =
            kiln_add(kiln_sum(kiln_mul_scalar(odd, 2), 0, NULL, false),
                     kiln_mean(kiln_add(x, kiln_expand_sym(bias, 2, shape)), 0, NULL, false));
        loss = kiln_add(loss, kiln_sum(back, 0, NULL, false));
        kiln_tensor *g[2];
        assert_int_equal(kiln_grad(loss, 2, (kiln_tensor *[]){x, bias}, g), KILN_OK);
        /* (A strided slice of a dim of symbolic size counts its elements with the bound value,
         * so each value has kernels of its own: no compile count is checked here.) */
        assert_int_equal(kiln_realize_many(ctx, 2, g), KILN_OK);
        float got[16 * 3];
        fx_read(g[0], KILN_F32, got, (size_t)rows * 3);
        for (int64_t i = 0; i < rows; i++)
            for (int j = 0; j < 3; j++)
                assert_float_equal(got[i * 3 + j],
                                   (float)((i % 2 ? 2.0 : 0.0) + ((rows - 1 - i) % 2 ? 0.0 : 1.0) +
                                           1.0 / (3.0 * (double)rows)),
                                   1e-5);
        fx_check_f32(g[1], (const float[]){1.0f / 3, 1.0f / 3, 1.0f / 3}, 3, 1e-6, 1e-5);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
}

/* The gradient of disjoint windows (unfold with step >= size: autograd.c unfold_grad_disjoint)
 * over a dim of symbolic size, bound to 9 then 8: windows of 2 every 3 (gaps, and elements past
 * the last window) and of 2 every 2, weighted by the window position. */
static void test_grad_symbolic_disjoint_windows(void **state) {
    kiln_context *ctx = fx_ctx(state);
    float xall[16];
    for (int i = 0; i < 16; i++)
        xall[i] = (float)(i % 5) / 4;
    const kiln_expr *n = kiln_variable(ctx, "win_len", 4, 16);
    for (int64_t len = 9; len >= 8; len--) {
        for (int64_t step = 3; step >= 2; step--) {
            kiln_scope_begin(ctx);
            const kiln_expr *b = kiln_bind(ctx, n, len);
            kiln_tensor *src = fx_f32(ctx, 1, (const int64_t[]){16}, xall);
            kiln_tensor *x = kiln_empty_sym(ctx, KILN_F32, 1, &b);
            assert_int_equal(kiln_copy_(x, kiln_narrow_sym(src, 0, kiln_int(ctx, 0), b)), KILN_OK);
            assert_int_equal(kiln_requires_grad_(x, true), KILN_OK);
            kiln_tensor *w = kiln_unfold(x, 0, 2, step); /* (windows, 2) */
            assert_non_null(w);
            /* loss = sum over windows of (first + 3 * second) */
            kiln_tensor *weights = fx_f32(ctx, 1, (const int64_t[]){2}, (const float[]){1, 3});
            kiln_tensor *loss = kiln_sum(kiln_mul(w, weights), 0, NULL, false);
            kiln_tensor *g = NULL;
            assert_int_equal(kiln_grad(loss, 1, &x, &g), KILN_OK);
            float got[16], want[16] = {0};
            for (int64_t k = 0; k + 2 <= len; k += step) {
                want[k] = 1;
                want[k + 1] = 3;
            }
            fx_read(g, KILN_F32, got, (size_t)len);
            for (int64_t i = 0; i < len; i++)
                assert_float_equal(got[i], want[i], 0);
            assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
        }
    }
}

/* Inputs other than plain f32 leaves: an f16 leaf (its gradient is f16), an intermediate
 * tensor, a view of a leaf, the same input twice; and kiln_grad twice on one graph. */
/* loss = sum(x * t): x's gradient is t itself, no product by the sum's ones (a kernel of its
 * own, and where t's windows are read, a select around the product instead of a masked load);
 * a t broadcast against x (its gradient summed back) and one of another type still multiply. */
static void test_grad_sum_of_product_hands_the_other_operand(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_scope_begin(ctx);
    const float xv[6] = {1, 2, -0.5f, 0.25f, 3, -4}, tv[6] = {0.5f, -1, 3, 2, -0.75f, 8};
    const int64_t s[2] = {2, 3};
    kiln_tensor *x = leaf(ctx, 2, s, xv), *t = fx_f32(ctx, 2, s, tv), *g = NULL;
    assert_int_equal(kiln_realize(t), KILN_OK);
    assert_int_equal(kiln_grad(kiln_sum(kiln_mul(x, t), 0, NULL, false), 1, &x, &g), KILN_OK);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(g), KILN_OK);
    assert_int_equal(kiln_context_stats(ctx).dispatches - before.dispatches, 0);
    fx_check_f32(g, tv, 6, 0, 0);
    /* t of shape (3,) broadcast over x's rows: x's gradient is t in each row */
    kiln_tensor *row = fx_f32(ctx, 1, (const int64_t[]){3}, tv);
    assert_int_equal(kiln_grad(kiln_sum(kiln_mul(x, row), 0, NULL, false), 1, &x, &g), KILN_OK);
    const float rows[6] = {tv[0], tv[1], tv[2], tv[0], tv[1], tv[2]};
    fx_check_f32(g, rows, 6, 0, 0);
    /* the row's gradient sums x's columns */
    kiln_tensor *r = leaf(ctx, 1, (const int64_t[]){3}, tv);
    assert_int_equal(
        kiln_grad(kiln_sum(kiln_mul(fx_f32(ctx, 2, s, xv), r), 0, NULL, false), 1, &r, &g),
        KILN_OK);
    const float cols[3] = {xv[0] + xv[3], xv[1] + xv[4], xv[2] + xv[5]};
    fx_check_f32(g, cols, 3, 0, 0);
    /* an i32 t: x * t is f32, its gradient t cast to f32 */
    const int32_t ti[6] = {1, -2, 3, 4, 0, 7};
    kiln_tensor *it = fx_i32(ctx, 2, s, ti);
    assert_int_equal(kiln_grad(kiln_sum(kiln_mul(x, it), 0, NULL, false), 1, &x, &g), KILN_OK);
    assert_int_equal(kiln_tensor_dtype(g), KILN_F32);
    const float tf[6] = {1, -2, 3, 4, 0, 7};
    fx_check_f32(g, tf, 6, 0, 0);
    kiln_scope_end(ctx, 0, NULL);
}

static void test_grad_inputs(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_scope_begin(ctx);
    const float xv[4] = {1, 2, -0.5f, 0.25f}, yv[4] = {0.5f, -1, 3, 2};
    const int64_t s[1] = {4};
    kiln_tensor *x16 = kiln_cast(fx_f32(ctx, 1, s, xv), KILN_F16);
    assert_int_equal(kiln_requires_grad_(x16, true), KILN_OK);
    kiln_tensor *y = leaf(ctx, 1, s, yv);
    /* loss = sum(3 x^2 (in f32)) + sum(x * y) (f16 * f32 is f32) */
    kiln_tensor *x32 = kiln_cast(x16, KILN_F32);
    kiln_tensor *loss = kiln_add(kiln_sum(kiln_mul_scalar(kiln_mul(x32, x32), 3), 0, NULL, false),
                                 kiln_sum(kiln_mul(x16, y), 0, NULL, false));
    assert_int_equal(kiln_tensor_dtype(loss), KILN_F32);
    kiln_tensor *g[2];
    assert_int_equal(kiln_grad(loss, 2, (kiln_tensor *[]){x16, y}, g), KILN_OK);
    assert_int_equal(kiln_tensor_dtype(g[0]), KILN_F16);
    assert_int_equal(kiln_tensor_dtype(g[1]), KILN_F32);
    float want[4];
    for (int i = 0; i < 4; i++)
        want[i] = 6 * xv[i] + yv[i];
    fx_check_f32(kiln_cast(g[0], KILN_F32), want, 4, 1e-3, 1e-3);
    fx_check_f32(g[1], xv, 4, 0, 0);

    /* An intermediate: y2 = exp(x), loss = sum(y2 * y2): d/dy2 = 2 y2, d/dx = 2 y2^2. The same
     * input twice gets two handles of equal values; a view of x that the loss does not read
     * gets zeros; asked again, the same graph gives the same gradients. */
    kiln_tensor *x = leaf(ctx, 1, s, xv);
    kiln_tensor *y2 = kiln_exp(x);
    kiln_tensor *unused = kiln_flip(x, 0);
    loss = kiln_sum(kiln_mul(y2, y2), 0, NULL, false);
    kiln_tensor *h[4];
    for (int round = 0; round < 2; round++) {
        assert_int_equal(kiln_grad(loss, 4, (kiln_tensor *[]){y2, x, x, unused}, h), KILN_OK);
        assert_true(h[1] != h[2]);
        float wy[4], wx[4];
        for (int i = 0; i < 4; i++) {
            double e = exp((double)xv[i]);
            wy[i] = (float)(2 * e);
            wx[i] = (float)(2 * e * e);
        }
        fx_check_f32(h[0], wy, 4, 1e-5, 1e-5);
        fx_check_f32(h[1], wx, 4, 1e-5, 1e-5);
        fx_check_f32(h[2], wx, 4, 1e-5, 1e-5);
        fx_check_f32(h[3], (const float[]){0, 0, 0, 0}, 4, 0, 0);
    }
    /* A floating condition of kiln_where (nonzero is true) that needs a gradient itself: none
     * flows through the condition, only through the branch taken. */
    kiln_tensor *c = leaf(ctx, 1, (const int64_t[]){3}, (const float[]){-1, 2, 0});
    loss = kiln_sum(kiln_where(c, kiln_mul_scalar(c, 2), kiln_scalar(ctx, KILN_F32, 3)), 0, NULL,
                    false);
    assert_int_equal(kiln_grad(loss, 1, &c, h), KILN_OK);
    fx_check_f32(h[0], (const float[]){2, 2, 0}, 3, 0, 0);
    /* A view of a leaf on the path: the gradient with respect to the view. */
    kiln_tensor *v = kiln_flip(x, 0);
    loss = kiln_sum(kiln_mul(v, fx_f32(ctx, 1, s, yv)), 0, NULL, false);
    assert_int_equal(kiln_grad(loss, 2, (kiln_tensor *[]){v, x}, h), KILN_OK);
    fx_check_f32(h[0], yv, 4, 0, 0);
    fx_check_f32(h[1], (const float[]){yv[3], yv[2], yv[1], yv[0]}, 4, 0, 0);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
}

/* A chain of 5000 records: kiln_grad's walk and the records' release recurse on nothing;
 * everything is freed with the handles. And records keep the expressions they use through a
 * rebinding outside any scope (which frees the expressions nothing uses). */
static void test_grad_deep_chain_and_rebind(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_stats s0 = kiln_context_stats(ctx);
    kiln_scope_begin(ctx);
    kiln_tensor *x = leaf(ctx, 1, (const int64_t[]){2}, (const float[]){1, 2});
    kiln_tensor *y = x;
    for (int i = 0; i < 5000; i++)
        y = kiln_add_scalar(y, 1e-3);
    kiln_tensor *g;
    assert_int_equal(kiln_grad(kiln_sum(y, 0, NULL, false), 1, &x, &g), KILN_OK);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    kiln_stats s1 = kiln_context_stats(ctx);
    assert_int_equal(s1.live_tensors, s0.live_tensors);
    assert_int_equal(s1.live_nodes, s0.live_nodes);

    float xv[18];
    for (int i = 0; i < 18; i++)
        xv[i] = (float)i;
    /* A loss kept out of the scope that bound its sizes: its records' expressions live on. */
    {
        kiln_tensor *x0 = leaf(ctx, 2, (const int64_t[]){6, 3}, xv);
        kiln_scope_begin(ctx);
        const kiln_expr *m = kiln_bind(ctx, kiln_variable(ctx, "scoped", 1, 6), 3);
        kiln_tensor *part = kiln_narrow_sym(x0, 0, kiln_int(ctx, 0), m);
        kiln_tensor *kept =
            kiln_sum(kiln_mul_scalar(kiln_pad_sym(part, (const kiln_expr *[]){kiln_int(ctx, 0), m,
                                                                              kiln_int(ctx, 1),
                                                                              kiln_int(ctx, 0)}),
                                     2),
                     0, NULL, false);
        assert_int_equal(kiln_scope_end(ctx, 1, &kept), KILN_OK);
        kiln_tensor *g0;
        assert_int_equal(kiln_grad(kept, 1, &x0, &g0), KILN_OK);
        float want0[18] = {0};
        for (int i = 0; i < 9; i++) /* rows 0..2 */
            want0[i] = 2;
        fx_check_f32(g0, want0, 18, 0, 0);
        kiln_release(g0);
        kiln_release(kept);
        kiln_release(x0);
    }
    const kiln_expr *n = kiln_variable(ctx, "rebound", 1, 6);
    x = leaf(ctx, 2, (const int64_t[]){6, 3}, xv);
    const kiln_expr *b = kiln_bind(ctx, n, 4); /* outside any scope */
    kiln_tensor *part =
        kiln_narrow_sym(x, 0, kiln_int(ctx, 1), kiln_expr_add(ctx, b, kiln_int(ctx, -2)));
    kiln_tensor *loss = kiln_sum(kiln_mul(part, part), 0, NULL, false);
    assert_non_null(kiln_bind(ctx, n, 5)); /* supersedes n = 4 */
    assert_int_equal(kiln_grad(loss, 1, &x, &g), KILN_OK);
    float want[18] = {0};
    for (int i = 3; i < 9; i++) /* rows 1 and 2: 2 x */
        want[i] = 2 * xv[i];
    fx_check_f32(g, want, 18, 0, 0);
    kiln_release(g);
    kiln_release(loss);
    kiln_release(part);
    kiln_release(x);
}

/* Sizes where the device's kernels tile, vectorize and reduce in several workgroups: the
 * gradients of sum(r * (a^T @ b)) (a read transposed) against loops in double, and of a
 * row softmax of 300 elements. */
static void test_grad_larger_sizes(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { K = 70, M = 37, P = 45, L = 300 };
    static float av[K * M], bv[K * P], rv[M * P], sv[4 * L], qv[4 * L];
    for (int i = 0; i < K * M; i++)
        av[i] = (float)((i * 7919) % 201 - 100) / 128;
    for (int i = 0; i < K * P; i++)
        bv[i] = (float)((i * 104729) % 199 - 99) / 128;
    for (int i = 0; i < M * P; i++)
        rv[i] = (float)((i * 31) % 97 - 48) / 64;
    for (int i = 0; i < 4 * L; i++) {
        sv[i] = (float)((i * 13) % 61 - 30) / 16;
        qv[i] = (float)((i * 17) % 53 - 26) / 32;
    }
    kiln_scope_begin(ctx);
    kiln_tensor *a = leaf(ctx, 2, (const int64_t[]){K, M}, av);
    kiln_tensor *b = leaf(ctx, 2, (const int64_t[]){K, P}, bv);
    kiln_tensor *r = fx_f32(ctx, 2, (const int64_t[]){M, P}, rv);
    kiln_tensor *s = leaf(ctx, 2, (const int64_t[]){4, L}, sv);
    kiln_tensor *q = fx_f32(ctx, 2, (const int64_t[]){4, L}, qv);
    kiln_tensor *mm =
        kiln_sum(kiln_mul(kiln_matmul(kiln_transpose(a, 0, 1), b), r), 0, NULL, false);
    kiln_tensor *sm = kiln_sum(kiln_mul(kiln_softmax(s, 1), q), 0, NULL, false);
    kiln_tensor *g[3];
    assert_int_equal(kiln_grad(kiln_add(mm, sm), 3, (kiln_tensor *[]){a, b, s}, g), KILN_OK);
    assert_int_equal(kiln_realize_many(ctx, 3, g), KILN_OK);
    static float ga[K * M], gb[K * P], gs[4 * L];
    fx_read(g[0], KILN_F32, ga, K * M);
    fx_read(g[1], KILN_F32, gb, K * P);
    fx_read(g[2], KILN_F32, gs, 4 * L);
    /* d/da[k][m] = sum_p b[k][p] r[m][p]; d/db[k][p] = sum_m a[k][m] r[m][p] */
    for (int k = 0; k < K; k++) {
        for (int m = 0; m < M; m++) {
            double w = 0;
            for (int p = 0; p < P; p++)
                w += (double)bv[k * P + p] * rv[m * P + p];
            if (fabs(ga[k * M + m] - w) > 1e-4 + 1e-4 * fabs(w))
                fail_msg("d/da[%d][%d]: got %.9g, want %.9g", k, m, ga[k * M + m], w);
        }
        for (int p = 0; p < P; p++) {
            double w = 0;
            for (int m = 0; m < M; m++)
                w += (double)av[k * M + m] * rv[m * P + p];
            if (fabs(gb[k * P + p] - w) > 1e-4 + 1e-4 * fabs(w))
                fail_msg("d/db[%d][%d]: got %.9g, want %.9g", k, p, gb[k * P + p], w);
        }
    }
    /* softmax y: d/ds = y (q - sum(q y)) per row */
    for (int row = 0; row < 4; row++) {
        double mx = -1e30, z = 0, dot = 0, y[L];
        for (int j = 0; j < L; j++)
            mx = fmax(mx, sv[row * L + j]);
        for (int j = 0; j < L; j++)
            z += exp(sv[row * L + j] - mx);
        for (int j = 0; j < L; j++) {
            y[j] = exp(sv[row * L + j] - mx) / z;
            dot += y[j] * qv[row * L + j];
        }
        for (int j = 0; j < L; j++) {
            double w = y[j] * (qv[row * L + j] - dot);
            if (fabs(gs[row * L + j] - w) > 1e-6 + 1e-4 * fabs(w))
                fail_msg("d/ds[%d][%d]: got %.9g, want %.9g", row, j, gs[row * L + j], w);
        }
    }
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
}

/* ---- (e) laziness --------------------------------------------------------------------------- */

static void test_grad_is_lazy(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_scope_begin(ctx);
    float av[12], bv[12];
    for (int i = 0; i < 12; i++) {
        av[i] = (float)(i - 6) / 4;
        bv[i] = (float)(i % 5) / 3;
    }
    kiln_tensor *a = leaf(ctx, 2, (const int64_t[]){3, 4}, av);
    kiln_tensor *b = leaf(ctx, 2, (const int64_t[]){4, 3}, bv);
    kiln_tensor *loss = kiln_mean(kiln_tanh(kiln_matmul(a, b)), 0, NULL, false);
    kiln_stats s0 = kiln_context_stats(ctx);
    kiln_tensor *g[2];
    assert_int_equal(kiln_grad(loss, 2, (kiln_tensor *[]){a, b}, g), KILN_OK);
    kiln_stats s1 = kiln_context_stats(ctx);
    assert_int_equal(s1.dispatches, s0.dispatches);
    assert_int_equal(s1.kernels_compiled, s0.kernels_compiled);
    assert_int_equal(s1.realizes, s0.realizes);
    assert_int_equal(s1.bytes_uploaded, s0.bytes_uploaded);
    /* Only the work needed: the gradient of a alone builds fewer nodes than of both. */
    uint64_t both = s1.live_nodes - s0.live_nodes;
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);

    kiln_scope_begin(ctx);
    a = leaf(ctx, 2, (const int64_t[]){3, 4}, av);
    b = leaf(ctx, 2, (const int64_t[]){4, 3}, bv);
    loss = kiln_mean(kiln_tanh(kiln_matmul(a, b)), 0, NULL, false);
    s0 = kiln_context_stats(ctx);
    kiln_tensor *ga;
    assert_int_equal(kiln_grad(loss, 1, &a, &ga), KILN_OK);
    s1 = kiln_context_stats(ctx);
    uint64_t one = s1.live_nodes - s0.live_nodes;
    assert_true(one > 0);
    if (one >= both)
        fail_msg("the gradient of a alone built %llu nodes, of a and b %llu",
                 (unsigned long long)one, (unsigned long long)both);
    /* The backward pass runs when the gradient is realized. */
    assert_int_equal(kiln_realize(ga), KILN_OK);
    assert_true(kiln_context_stats(ctx).dispatches > s1.dispatches);
    /* A loss that does not depend on an input marked as a leaf: zeros, built lazily. */
    kiln_tensor *c = leaf(ctx, 1, (const int64_t[]){2}, (const float[]){1, 2});
    kiln_tensor *gc;
    s0 = kiln_context_stats(ctx);
    assert_int_equal(kiln_grad(loss, 1, &c, &gc), KILN_OK);
    assert_int_equal(kiln_context_stats(ctx).dispatches, s0.dispatches);
    fx_check_f32(gc, (const float[]){0, 0}, 2, 0, 0);
    /* A tensor without any history (no requires_grad_): zeros too, as torch's allow_unused
     * with materialize_grads. */
    kiln_tensor *plain = fx_f32(ctx, 1, (const int64_t[]){3}, (const float[]){1, 2, 3});
    assert_int_equal(kiln_grad(loss, 1, &plain, &gc), KILN_OK);
    fx_check_f32(gc, (const float[]){0, 0, 0}, 3, 0, 0);
    /* The loss itself: 1. */
    assert_int_equal(kiln_grad(loss, 1, &loss, &gc), KILN_OK);
    fx_check_f32(gc, (const float[]){1}, 1, 0, 0);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
}

/* ---- (f) errors ------------------------------------------------------------------------------ */

static void test_grad_errors(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_scope_begin(ctx);
    kiln_tensor *x = leaf(ctx, 1, (const int64_t[]){3}, (const float[]){1, 2, 3});
    kiln_tensor *y = kiln_mul(x, x);
    kiln_tensor *g = (kiln_tensor *)1;
    /* A loss of more than one element. */
    assert_int_equal(kiln_grad(y, 1, &x, &g), KILN_ERROR_SHAPE_MISMATCH);
    assert_null(g);
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_grad", "(3)", NULL);
    /* A one-element loss of any shape is fine. */
    kiln_tensor *l11 = kiln_reshape(kiln_sum(y, 0, NULL, false), 2, (const int64_t[]){1, 1});
    assert_int_equal(kiln_grad(l11, 1, &x, &g), KILN_OK);
    fx_check_f32(g, (const float[]){2, 4, 6}, 3, 1e-6, 0);
    /* An integer loss. */
    kiln_tensor *il = kiln_sum(kiln_cast(y, KILN_I32), 0, NULL, false);
    g = (kiln_tensor *)1;
    assert_int_equal(kiln_grad(il, 1, &x, &g), KILN_ERROR_DTYPE_MISMATCH);
    assert_null(g);
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_grad", NULL);
    /* requires_grad_ of an integer tensor. */
    kiln_tensor *i = fx_i32(ctx, 1, (const int64_t[]){2}, (const int32_t[]){1, 2});
    assert_int_equal(kiln_requires_grad_(i, true), KILN_ERROR_DTYPE_MISMATCH);
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_requires_grad_", "i32", NULL);
    assert_false(kiln_requires_grad(i));
    assert_int_equal(kiln_requires_grad_(i, false), KILN_OK);
    /* A released input, a released loss. */
    kiln_tensor *loss = kiln_sum(y, 0, NULL, false);
    kiln_tensor *z = leaf(ctx, 1, (const int64_t[]){2}, (const float[]){1, 2});
    assert_int_equal(kiln_release(z), KILN_OK);
    kiln_tensor *ins[2] = {x, z}, *gs[2] = {(kiln_tensor *)1, (kiln_tensor *)1};
    assert_int_equal(kiln_grad(loss, 2, ins, gs), KILN_ERROR_INVALID_HANDLE);
    assert_null(gs[0]);
    assert_null(gs[1]);
    fx_expect_message(ctx, KILN_ERROR_INVALID_HANDLE, "kiln_grad", "inputs[1]", NULL);
    /* The same after an earlier call's own error left uncleared: the message is this call's. */
    assert_int_equal(
        kiln_requires_grad_(fx_i32(ctx, 1, (const int64_t[]){1}, (const int32_t[]){1}), true),
        KILN_ERROR_DTYPE_MISMATCH);
    assert_int_equal(kiln_grad(loss, 2, ins, gs), KILN_ERROR_INVALID_HANDLE);
    fx_expect_message(ctx, KILN_ERROR_INVALID_HANDLE, "kiln_grad", "released", "inputs[1]", NULL);
    kiln_tensor *dead = kiln_sum(y, 0, NULL, false);
    assert_int_equal(kiln_release(dead), KILN_OK);
    assert_int_equal(kiln_grad(dead, 1, &x, &g), KILN_ERROR_INVALID_HANDLE);
    fx_expect_message(ctx, KILN_ERROR_INVALID_HANDLE, "kiln_grad", NULL);
    /* A NULL loss. */
    g = (kiln_tensor *)1;
    assert_int_not_equal(kiln_grad(NULL, 1, &x, &g), KILN_OK);
    assert_null(g);
    kiln_context_clear_error(ctx);
    /* NULL arrays. */
    assert_int_equal(kiln_grad(loss, 1, NULL, &g), KILN_ERROR_INVALID_ARGUMENT);
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_grad", NULL);
    assert_int_equal(kiln_grad(loss, 1, &x, NULL), KILN_ERROR_INVALID_ARGUMENT);
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_grad", NULL);
    /* count 0 with NULL arrays: nothing asked, nothing done. */
    assert_int_equal(kiln_grad(loss, 0, NULL, NULL), KILN_OK);
    /* A NULL input handle. */
    kiln_tensor *nul = NULL;
    g = (kiln_tensor *)1;
    assert_int_not_equal(kiln_grad(loss, 1, &nul, &g), KILN_OK);
    assert_null(g);
    kiln_context_clear_error(ctx);
    /* requires_grad_(false) drops the mark: no gradient flows any more. */
    kiln_tensor *u = leaf(ctx, 1, (const int64_t[]){2}, (const float[]){3, 4});
    assert_int_equal(kiln_requires_grad_(u, false), KILN_OK);
    assert_false(kiln_requires_grad(u));
    kiln_tensor *lu = kiln_sum(kiln_mul(u, u), 0, NULL, false);
    assert_int_equal(kiln_grad(lu, 1, &u, &g), KILN_OK);
    fx_check_f32(g, (const float[]){0, 0}, 2, 0, 0);
    /* kiln_detach cuts the history. */
    kiln_tensor *d = kiln_detach(y);
    assert_false(kiln_requires_grad(d));
    assert_int_equal(kiln_grad(kiln_sum(kiln_mul(d, x), 0, NULL, false), 1, &x, &g), KILN_OK);
    fx_check_f32(g, (const float[]){1, 4, 9}, 3, 1e-6, 0);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
}

/* ---- (g) memory --------------------------------------------------------------------------- */

static void test_grad_training_loop_memory(void **state) {
    kiln_context *ctx = fx_ctx(state);
    float wv[12], xv[8];
    for (int i = 0; i < 12; i++)
        wv[i] = (float)(i % 5 - 2) / 8;
    for (int i = 0; i < 8; i++)
        xv[i] = (float)(i % 3 - 1) / 2;
    kiln_tensor *w = leaf(ctx, 2, (const int64_t[]){4, 3}, wv);
    kiln_tensor *b = leaf(ctx, 1, (const int64_t[]){3}, (const float[]){0.1f, -0.1f, 0.2f});
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){2, 4}, xv);
    kiln_stats at2 = {0};
    float first_loss = 0, last_loss = 0;
    for (int step = 0; step < 50; step++) {
        kiln_scope_begin(ctx);
        kiln_tensor *h = kiln_add(kiln_matmul(x, w), b);
        kiln_tensor *loss = kiln_mean(kiln_mul(h, h), 0, NULL, false);
        kiln_tensor *g[2];
        assert_int_equal(kiln_grad(loss, 2, (kiln_tensor *[]){w, b}, g), KILN_OK);
        assert_int_equal(kiln_add_(w, kiln_mul_scalar(g[0], -0.1)), KILN_OK);
        assert_int_equal(kiln_add_(b, kiln_mul_scalar(g[1], -0.1)), KILN_OK);
        /* One schedule: forward, backward and the update (the loss reads the old w and b). */
        assert_int_equal(kiln_realize_many(ctx, 3, (kiln_tensor *[]){loss, w, b}), KILN_OK);
        float lv;
        fx_read(loss, KILN_F32, &lv, 1);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
        if (step == 0)
            first_loss = lv;
        last_loss = lv;
        kiln_stats s = kiln_context_stats(ctx);
        if (step == 1) {
            at2 = s;
        } else if (step > 1) {
            if (s.live_tensors != at2.live_tensors || s.live_nodes != at2.live_nodes ||
                s.live_storages != at2.live_storages ||
                s.live_storage_bytes != at2.live_storage_bytes ||
                s.live_expressions != at2.live_expressions)
                fail_msg("step %d: live tensors %llu (%llu at step 2), nodes %llu (%llu), "
                         "storages %llu (%llu), bytes %llu (%llu), expressions %llu (%llu)",
                         step, (unsigned long long)s.live_tensors,
                         (unsigned long long)at2.live_tensors, (unsigned long long)s.live_nodes,
                         (unsigned long long)at2.live_nodes, (unsigned long long)s.live_storages,
                         (unsigned long long)at2.live_storages,
                         (unsigned long long)s.live_storage_bytes,
                         (unsigned long long)at2.live_storage_bytes,
                         (unsigned long long)s.live_expressions,
                         (unsigned long long)at2.live_expressions);
        }
    }
    assert_true(last_loss < first_loss);
    kiln_release(w);
    kiln_release(b);
    kiln_release(x);
}

/* A loss written in place after it was computed is refused (its value is not the one whose
 * history is recorded); kiln_requires_grad_ of a tensor with a history keeps that history
 * (torch's requires_grad_ of a non-leaf). */
static void test_grad_loss_written_and_nonleaf_mark(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 1, (int64_t[]){3}, (float[]){1, 2, 3});
    kiln_tensor *w = fx_f32(ctx, 1, (int64_t[]){3}, (float[]){4, 5, 6});
    assert_int_equal(kiln_requires_grad_(w, true), KILN_OK);
    kiln_tensor *loss = kiln_sum(kiln_mul(x, w), 0, NULL, false);
    assert_int_equal(kiln_mul_(loss, kiln_scalar(ctx, KILN_F32, 2)), KILN_OK);
    kiln_tensor *g = NULL;
    assert_int_equal(kiln_grad(loss, 1, &w, &g), KILN_ERROR_MODIFIED);
    assert_null(g);
    fx_expect_message(ctx, KILN_ERROR_MODIFIED, "kiln_grad", "loss", NULL);
    kiln_tensor *h = kiln_mul(x, w);
    assert_int_equal(kiln_requires_grad_(h, true), KILN_OK);
    assert_int_equal(kiln_grad(kiln_sum(h, 0, NULL, false), 1, &w, &g), KILN_OK);
    fx_check_f32(g, (float[]){1, 2, 3}, 3, 0, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_grad_torch_cases),
        ENG_TEST(test_grad_finite_differences),
        ENG_TEST(test_grad_written_after_use),
        ENG_TEST(test_grad_overwritten_before_use),
        ENG_TEST(test_grad_symbolic_batch),
        ENG_TEST(test_grad_symbolic_slice_expand),
        ENG_TEST(test_grad_symbolic_disjoint_windows),
        ENG_TEST(test_grad_inputs),
        ENG_TEST(test_grad_deep_chain_and_rebind),
        ENG_TEST(test_grad_larger_sizes),
        ENG_TEST(test_grad_sum_of_product_hands_the_other_operand),
        ENG_TEST(test_grad_is_lazy),
        ENG_TEST(test_grad_errors),
        ENG_TEST(test_grad_training_loop_memory),
        ENG_TEST(test_grad_loss_written_and_nonleaf_mark),
    };
    /* KILN_TEST_FILTER: a cmocka name pattern (test_grad_torch_cases, test_grad_*_use, ...). */
    if (getenv("KILN_TEST_FILTER"))
        cmocka_set_test_filter(getenv("KILN_TEST_FILTER"));
    return ENG_RUN_BOTH(tests);
}
