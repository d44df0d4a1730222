/* Transformer ops: cat and stack, layer_norm and rms_norm, erf, gelu and silu, triu, tril and
 * the causal mask, cumsum, topk, multinomial, where with a scalar and masked_fill, view and
 * is_contiguous.
 *
 * Every op here is a composite, as those of nn.c: its _impl checks the arguments under the
 * call's own name and then builds the result only from public kiln_ ops, so that autograd,
 * which records public ops, differentiates it without a rule of its own. */
#include "eng.h"

#include <math.h>
#include <stdio.h>

static const shape_view *view_of(kiln_tensor *t) {
    return shape_tracker_last(ENG_ST(t));
}

static uint32_t ndim_of(kiln_tensor *t) {
    return view_of(t)->ndim;
}

static kiln_dtype dtype_of(kiln_tensor *t) {
    return eng_dtype(ENG_BASE(t)->type);
}

static bool is_float(kiln_dtype d) {
    return d == KILN_F32 || d == KILN_F16;
}

static const char *shape_str(kiln_tensor *t, char *buf, size_t cap) {
    return eng_shape_render(view_of(t)->ndim, view_of(t)->shape, buf, cap);
}

/* dim in [-ndim, ndim) as an index, else false and KILN_ERROR_OUT_OF_RANGE for call. */
static bool dim_index(kiln_context *ctx, const char *call, int32_t dim, uint32_t ndim,
                      uint32_t *out) {
    int64_t n = ndim;
    if (dim < -n || dim >= n || n == 0)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE,
                        "%s: dim %d is out of range for %u dims (needs -%u <= dim < %u)", call, dim,
                        ndim, ndim, ndim) != NULL;
    *out = (uint32_t)(dim < 0 ? dim + n : dim);
    return true;
}

/* A float dtype t may compute in: f16 computes in f32 (as torch's kernels accumulate). */
static kiln_tensor *as_compute(kiln_tensor *t) {
    return dtype_of(t) == KILN_F16 ? kiln_cast(t, KILN_F32) : t;
}

static bool need_float(kiln_tensor *t, const char *call, const char *name) {
    if (is_float(dtype_of(t)))
        return true;
    return eng_fail(ENG_CTX(t), KILN_ERROR_DTYPE_MISMATCH,
                    "%s: %s is %s: it must be a floating tensor (as torch)", call, name,
                    kiln_dtype_name(dtype_of(t))) != NULL;
}

static const kiln_expr *expr_sub(kiln_context *ctx, const kiln_expr *a, const kiln_expr *b) {
    return kiln_expr_add(ctx, a, kiln_expr_mul(ctx, b, kiln_int(ctx, -1)));
}

/* 0, 1, ..., size(t, dim) - 1 in dtype, shaped to broadcast along dim of t: (1, .., n, .., 1). */
static kiln_tensor *arange_along(kiln_tensor *t, uint32_t dim, kiln_dtype dtype) {
    kiln_context *ctx = ENG_CTX(t);
    const kiln_expr *n = kiln_tensor_size_expr(t, dim);
    const kiln_expr *shape[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < ndim_of(t); d++)
        shape[d] = d == dim ? n : kiln_int(ctx, 1);
    return kiln_reshape_sym(kiln_arange_sym(ctx, dtype, n), ndim_of(t), shape);
}

/* ---- cat and stack ---- */

/* The checks of cat: count >= 1 tensors of one number of dims (>= 1), equal sizes but along
 * dim (*d receives it normalized), and their promoted dtype. */
static bool cat_check(kiln_context *ctx, const char *call, uint32_t count, kiln_tensor *const *ts,
                      int32_t dim, uint32_t *d, ir_type *type) {
    uint32_t nd = ndim_of(ts[0]);
    if (nd == 0)
        return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                        "%s: tensors[0] is 0-d: zero-dimensional tensors cannot be concatenated "
                        "(as torch)",
                        call) != NULL;
    if (!dim_index(ctx, call, dim, nd, d))
        return false;
    *type = ENG_BASE(ts[0])->type;
    for (uint32_t i = 1; i < count; i++) {
        const shape_view *a = view_of(ts[0]), *b = view_of(ts[i]);
        bool same = a->ndim == b->ndim;
        for (uint32_t k = 0; same && k < nd; k++)
            same = k == *d || a->shape[k] == b->shape[k];
        if (!same) {
            char sa[128], sb[128];
            return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                            "%s: tensors[0] is %s, tensors[%u] is %s: sizes must match except "
                            "along dim %u",
                            call, shape_str(ts[0], sa, sizeof sa), i,
                            shape_str(ts[i], sb, sizeof sb), *d) != NULL;
        }
        *type = eng_promote(*type, ENG_BASE(ts[i])->type);
    }
    return true;
}

/* The sum of parts[lo, hi) as a balanced tree of adds (depth log2 of the count). */
static kiln_tensor *add_tree(kiln_tensor *const *parts, uint32_t lo, uint32_t hi) {
    if (hi - lo == 1)
        return parts[lo];
    uint32_t mid = lo + (hi - lo) / 2;
    return kiln_add(add_tree(parts, lo, mid), add_tree(parts, mid, hi));
}

/* Each input padded with zeros to the full size along dim, at its offset, and the padded
 * inputs added: one elementwise kernel that reads every input where it is (a padded element
 * reads nothing). Padding and adding are differentiable: the gradient of each input is a
 * shrink of the output's. */
static kiln_tensor *cat_impl(const char *call, uint32_t count, kiln_tensor *const *ts,
                             int32_t dim) {
    for (uint32_t i = 0; i < count; i++) {
        if (!ts[i])
            return NULL;
    }
    kiln_context *ctx = ENG_CTX(ts[0]);
    uint32_t d = 0;
    ir_type type = IR_F32;
    if (!cat_check(ctx, call, count, ts, dim, &d, &type))
        return NULL;
    kiln_dtype dt = eng_dtype(type);
    if (count == 1) /* a new tensor, not a view */
        return kiln_contiguous(kiln_cast(ts[0], dt));
    const kiln_expr *total = kiln_int(ctx, 0);
    for (uint32_t i = 0; i < count; i++)
        total = kiln_expr_add(ctx, total, kiln_tensor_size_expr(ts[i], d));
    kiln_tensor **parts = base_calloc(&ctx->alloc, count, sizeof *parts);
    if (!parts)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", call);
    const kiln_expr *offset = kiln_int(ctx, 0), *zero = kiln_int(ctx, 0);
    for (uint32_t i = 0; i < count; i++) {
        const kiln_expr *pad[2 * SHAPE_MAX_DIMS];
        const kiln_expr *size = kiln_tensor_size_expr(ts[i], d);
        for (uint32_t k = 0; k < 2 * ndim_of(ts[i]); k++)
            pad[k] = zero;
        pad[2 * d] = offset;
        offset = kiln_expr_add(ctx, offset, size);
        pad[2 * d + 1] = expr_sub(ctx, total, offset);
        parts[i] = kiln_pad_sym(kiln_cast(ts[i], dt), pad);
    }
    kiln_tensor *out = add_tree(parts, 0, count);
    base_free(&ctx->alloc, parts, count * sizeof *parts);
    return out;
}

/* stack: every input unsqueezed at dim (in [-(ndim + 1), ndim]), then cat. */
static kiln_tensor *stack_impl(uint32_t count, kiln_tensor *const *ts, int32_t dim) {
    for (uint32_t i = 0; i < count; i++) {
        if (!ts[i])
            return NULL;
    }
    kiln_context *ctx = ENG_CTX(ts[0]);
    const char *call = "kiln_stack";
    uint32_t d = 0;
    if (!dim_index(ctx, call, dim, ndim_of(ts[0]) + 1, &d))
        return NULL;
    for (uint32_t i = 1; i < count; i++) {
        const shape_view *a = view_of(ts[0]), *b = view_of(ts[i]);
        bool same = a->ndim == b->ndim;
        for (uint32_t k = 0; same && k < a->ndim; k++)
            same = a->shape[k] == b->shape[k];
        if (!same) {
            char sa[128], sb[128];
            return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                            "%s: tensors[0] is %s, tensors[%u] is %s: stack needs equal shapes",
                            call, shape_str(ts[0], sa, sizeof sa), i,
                            shape_str(ts[i], sb, sizeof sb));
        }
    }
    kiln_tensor **parts = base_calloc(&ctx->alloc, count, sizeof *parts);
    if (!parts)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", call);
    for (uint32_t i = 0; i < count; i++)
        parts[i] = kiln_unsqueeze(ts[i], (int32_t)d);
    kiln_tensor *out = cat_impl(call, count, parts, (int32_t)d);
    base_free(&ctx->alloc, parts, count * sizeof *parts);
    return out;
}

/* ---- normalization ---- */

/* The checks of layer_norm and rms_norm: x floating, 1 <= ndims <= x's dims, weight and bias
 * of x's last ndims sizes and x's dtype (as torch), eps >= 0. */
static bool norm_check(const char *call, kiln_tensor *x, uint32_t ndims, kiln_tensor *weight,
                       kiln_tensor *bias, double eps) {
    kiln_context *ctx = ENG_CTX(x);
    if (!need_float(x, call, "x"))
        return false;
    if (ndims < 1 || ndims > ndim_of(x)) {
        char sx[128];
        return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE,
                        "%s: ndims is %u for x of shape %s (needs 1 <= ndims <= %u)", call, ndims,
                        shape_str(x, sx, sizeof sx), ndim_of(x)) != NULL;
    }
    if (!(eps >= 0) || isinf(eps))
        return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE, "%s: eps is %g (needs a finite eps >= 0)",
                        call, eps) != NULL;
    kiln_tensor *params[2] = {weight, bias};
    const char *names[2] = {"weight", "bias"};
    for (int p = 0; p < 2; p++) {
        kiln_tensor *w = params[p];
        if (!w)
            continue;
        bool same = ndim_of(w) == ndims;
        for (uint32_t k = 0; same && k < ndims; k++)
            same = view_of(w)->shape[k] == view_of(x)->shape[ndim_of(x) - ndims + k];
        if (!same) {
            char sx[128], sw[128];
            return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                            "%s: x is %s, %s is %s: %s needs the shape of x's last %u dims", call,
                            shape_str(x, sx, sizeof sx), names[p], shape_str(w, sw, sizeof sw),
                            names[p], ndims) != NULL;
        }
        if (dtype_of(w) != dtype_of(x))
            return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH,
                            "%s: x is %s, %s is %s: they must have one dtype (as torch)", call,
                            kiln_dtype_name(dtype_of(x)), names[p],
                            kiln_dtype_name(dtype_of(w))) != NULL;
    }
    return true;
}

/* The last ndims axes of x: -ndims, ..., -1. */
static void last_axes(uint32_t ndims, int32_t *axes) {
    for (uint32_t i = 0; i < ndims; i++)
        axes[i] = (int32_t)i - (int32_t)ndims;
}

/* torch's layer_norm: (x - mean) * rsqrt(var + eps) (biased variance over the last ndims
 * dims), then * weight + bias; f16 computes in f32. */
static kiln_tensor *layer_norm_impl(kiln_tensor *x, uint32_t ndims, kiln_tensor *weight,
                                    kiln_tensor *bias, double eps) {
    if (!x || !norm_check("kiln_layer_norm", x, ndims, weight, bias, eps))
        return NULL;
    int32_t axes[SHAPE_MAX_DIMS];
    last_axes(ndims, axes);
    kiln_tensor *xc = as_compute(x);
    kiln_tensor *mean = kiln_mean(xc, ndims, axes, true);
    kiln_tensor *var = kiln_var(xc, ndims, axes, 0, true);
    kiln_tensor *y = kiln_mul(kiln_sub(xc, mean), kiln_rsqrt(kiln_add_scalar(var, eps)));
    if (weight)
        y = kiln_mul(y, as_compute(weight));
    if (bias)
        y = kiln_add(y, as_compute(bias));
    return kiln_cast(y, dtype_of(x));
}

/* torch's rms_norm: x * rsqrt(mean(x^2) + eps) over the last ndims dims, then * weight. */
static kiln_tensor *rms_norm_impl(kiln_tensor *x, uint32_t ndims, kiln_tensor *weight, double eps) {
    if (!x || !norm_check("kiln_rms_norm", x, ndims, weight, NULL, eps))
        return NULL;
    int32_t axes[SHAPE_MAX_DIMS];
    last_axes(ndims, axes);
    kiln_tensor *xc = as_compute(x);
    kiln_tensor *ms = kiln_mean(kiln_mul(xc, xc), ndims, axes, true);
    kiln_tensor *y = kiln_mul(xc, kiln_rsqrt(kiln_add_scalar(ms, eps)));
    if (weight)
        y = kiln_mul(y, as_compute(weight));
    return kiln_cast(y, dtype_of(x));
}

/* ---- erf, gelu, silu ---- */

/* c[0] + x (c[1] + x (c[2] + ...)) for n coefficients (Horner). */
static kiln_tensor *horner(kiln_tensor *x, const double *c, int n) {
    kiln_tensor *acc = kiln_mul_scalar(x, c[n - 1]);
    for (int i = n - 2; i >= 1; i--)
        acc = kiln_mul(x, kiln_add_scalar(acc, c[i]));
    return kiln_add_scalar(acc, c[0]);
}

/* erf in f32 (f16 computes in f32, integers give f32, as torch):
 *   |x| < 0.5: the Maclaurin series 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)) to x^17
 *     (truncation below 1e-10 there; relative error ~ f32 rounding);
 *   else: sign(x) (1 - erfc(|x|)) with Numerical Recipes' erfc (a Chebyshev fit: fractional
 *     error below 1.2e-7 everywhere), erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2).
 * So the absolute error stays below ~1.5e-7 everywhere and the relative error small near 0.
 * Each branch reads an input kept in its own range (a clamp), so that the branch not taken
 * stays finite and its gradient, which where discards, too. */
static kiln_tensor *erf_f32(kiln_tensor *x) {
    kiln_context *ctx = ENG_CTX(x);
    static const double series[9] = {1.0,         -1.0 / 3,   1.0 / 10,     -1.0 / 42,   1.0 / 216,
                                     -1.0 / 1320, 1.0 / 9360, -1.0 / 75600, 1.0 / 685440};
    static const double nr[10] = {-1.26551223, 1.00002368,  0.37409196, 0.09678418,  -0.18628806,
                                  0.27886807,  -1.13520398, 1.48851587, -0.82215223, 0.17087277};
    kiln_tensor *xs = kiln_clamp(x, -0.5, 0.5);
    kiln_tensor *small =
        kiln_mul_scalar(kiln_mul(xs, horner(kiln_mul(xs, xs), series, 9)), 1.1283791670955126);
    kiln_tensor *z = kiln_clamp(kiln_abs(x), 0.5, NAN);
    kiln_tensor *t =
        kiln_div(kiln_scalar(ctx, KILN_F32, 1), kiln_add_scalar(kiln_mul_scalar(z, 0.5), 1));
    kiln_tensor *arg = kiln_sub(horner(t, nr, 10), kiln_mul(z, z));
    kiln_tensor *erfc = kiln_mul(t, kiln_exp(arg));
    kiln_tensor *big = kiln_sub(kiln_scalar(ctx, KILN_F32, 1), erfc);
    kiln_tensor *zero = kiln_scalar(ctx, KILN_F32, 0);
    big = kiln_where(kiln_lt(x, zero), kiln_neg(big), big);
    return kiln_where(kiln_lt(kiln_abs(x), kiln_scalar(ctx, KILN_F32, 0.5)), small, big);
}

static kiln_tensor *erf_impl(kiln_tensor *t) {
    if (!t)
        return NULL;
    kiln_dtype d = dtype_of(t);
    kiln_tensor *y = erf_f32(kiln_cast(t, KILN_F32));
    return d == KILN_F16 ? kiln_cast(y, KILN_F16) : y;
}

/* Exact: 0.5 x (1 + erf(x / sqrt 2)); tanh: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). */
static kiln_tensor *gelu_impl(kiln_tensor *t, bool tanh_approximation) {
    if (!t || !need_float(t, "kiln_gelu", "t"))
        return NULL;
    kiln_tensor *x = as_compute(t), *inner;
    if (tanh_approximation) {
        kiln_tensor *x3 = kiln_mul(x, kiln_mul(x, x));
        kiln_tensor *u =
            kiln_mul_scalar(kiln_add(x, kiln_mul_scalar(x3, 0.044715)), 0.7978845608028654);
        inner = kiln_tanh(u);
    } else {
        inner = erf_f32(kiln_mul_scalar(x, 0.7071067811865476));
    }
    kiln_tensor *y = kiln_mul(kiln_mul_scalar(x, 0.5), kiln_add_scalar(inner, 1));
    return kiln_cast(y, dtype_of(t));
}

static kiln_tensor *silu_impl(kiln_tensor *t) {
    if (!t || !need_float(t, "kiln_silu", "t"))
        return NULL;
    kiln_tensor *x = as_compute(t);
    return kiln_cast(kiln_mul(x, kiln_sigmoid(x)), dtype_of(t));
}

/* ---- triangles and the causal mask ---- */

/* Index arithmetic in i32 when every value fits, else i64. */
static kiln_dtype index_dtype(int64_t limit) {
    return limit < INT32_MAX / 2 ? KILN_I32 : KILN_I64;
}

/* t where (col - row >= diagonal) (upper) or (col - row <= diagonal) (lower), else zero, over
 * the last two dims; the diagonal is clamped to the sizes' range (beyond it, all or nothing). */
static kiln_tensor *triangle_impl(const char *call, kiln_tensor *t, int64_t diagonal, bool upper) {
    if (!t)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    uint32_t nd = ndim_of(t);
    if (nd < 2) {
        char st[128];
        return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                        "%s: t is %s: it needs at least 2 dims (as torch)", call,
                        shape_str(t, st, sizeof st));
    }
    int64_t rmax = sym_vmax(view_of(t)->shape[nd - 2]), cmax = sym_vmax(view_of(t)->shape[nd - 1]);
    const int64_t cap = (int64_t)1 << 52; /* a diagonal beyond the sizes: all or nothing */
    int64_t lo = rmax < cap ? -rmax - 1 : -cap, hi = cmax < cap ? cmax + 1 : cap;
    int64_t dg = diagonal < lo ? lo : diagonal > hi ? hi : diagonal;
    kiln_dtype it = index_dtype(rmax > cmax ? rmax : cmax);
    kiln_tensor *rows =
        kiln_unsqueeze(kiln_arange_sym(ctx, it, kiln_tensor_size_expr(t, nd - 2)), 1);
    kiln_tensor *cols = kiln_arange_sym(ctx, it, kiln_tensor_size_expr(t, nd - 1));
    kiln_tensor *diff = kiln_sub(cols, rows);
    kiln_tensor *dgt = kiln_scalar(ctx, it, (double)dg);
    kiln_tensor *keep = upper ? kiln_ge(diff, dgt) : kiln_le(diff, dgt);
    return kiln_where(keep, t, kiln_scalar(ctx, dtype_of(t), 0));
}

/* (rows, cols): 0 where j <= i + (cols - rows), else -inf. */
static kiln_tensor *causal_mask_impl(kiln_context *ctx, kiln_dtype dtype, const kiln_expr *rows,
                                     const kiln_expr *cols) {
    const char *call = "kiln_causal_mask";
    if (!eng_dtype_valid(dtype))
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "%s: unknown dtype %d", call, (int)dtype);
    if (!is_float(dtype))
        return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH,
                        "%s: dtype is %s: the mask holds -inf, so it must be floating", call,
                        kiln_dtype_name(dtype));
    const sym_node *r = eng_expr_arg(ctx, rows, call), *c = eng_expr_arg(ctx, cols, call);
    if (!r || !c) {
        if (!rows || !cols)
            return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "%s: rows or cols is NULL", call);
        return NULL;
    }
    if (sym_vmin(r) < 0 || sym_vmin(c) < 0)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE,
                        "%s: rows (at least %lld) and cols (at least %lld) must be >= 0", call,
                        (long long)sym_vmin(r), (long long)sym_vmin(c));
    int64_t rmax = sym_vmax(r), cmax = sym_vmax(c);
    kiln_dtype it = index_dtype(rmax > cmax ? rmax : cmax);
    kiln_tensor *i = kiln_unsqueeze(kiln_arange_sym(ctx, it, rows), 1);
    kiln_tensor *j = kiln_arange_sym(ctx, it, cols);
    kiln_tensor *offset = kiln_scalar_expr(ctx, it, expr_sub(ctx, cols, rows));
    kiln_tensor *visible = kiln_le(j, kiln_add(i, offset));
    return kiln_where(visible, kiln_scalar(ctx, dtype, 0), kiln_scalar(ctx, dtype, -INFINITY));
}

/* ---- cumsum ---- */

/* Prefix sums along dim of a small constant size n: out[i] = sum over j <= i of x[j], one
 * reduction over a triangular mask (n^2 work, one kernel). */
static kiln_tensor *cumsum_triangle(kiln_tensor *x, uint32_t d) {
    kiln_context *ctx = ENG_CTX(x);
    int32_t last = (int32_t)ndim_of(x) - 1;
    kiln_tensor *xt = kiln_transpose(x, (int32_t)d, last); /* (..., n) */
    const kiln_expr *n = kiln_tensor_size_expr(xt, (uint32_t)last);
    kiln_tensor *i = kiln_unsqueeze(kiln_arange_sym(ctx, KILN_I32, n), 1);
    kiln_tensor *mask = kiln_le(kiln_arange_sym(ctx, KILN_I32, n), i); /* (n, n): j <= i */
    kiln_tensor *rows = kiln_where(mask, kiln_unsqueeze(xt, -2), kiln_scalar(ctx, dtype_of(x), 0));
    kiln_tensor *s = kiln_sum(rows, 1, (const int32_t[]){-1}, false);
    return kiln_transpose(kiln_cast(s, dtype_of(x)), (int32_t)d, last);
}

/* Prefix sums by doubling (Hillis and Steele): x += x shifted by s along dim, for s = 1, 2,
 * 4, ... below the largest size n may take (a shift beyond n adds zeros). Each step is
 * materialised (kiln_contiguous): the next reads it twice, and unmaterialised steps would be
 * recomputed exponentially often. The shift pads s zeros in front and keeps the first n. */
static kiln_tensor *cumsum_scan(kiln_tensor *x, uint32_t d) {
    kiln_context *ctx = ENG_CTX(x);
    uint32_t nd = ndim_of(x);
    int64_t nmax = sym_vmax(view_of(x)->shape[d]);
    const kiln_expr *zero = kiln_int(ctx, 0);
    for (int64_t s = 1; s < nmax && x; s *= 2) {
        const kiln_expr *pad[2 * SHAPE_MAX_DIMS], *begin[SHAPE_MAX_DIMS], *end[SHAPE_MAX_DIMS];
        for (uint32_t k = 0; k < nd; k++) {
            pad[2 * k] = pad[2 * k + 1] = zero;
            begin[k] = zero;
            end[k] = kiln_tensor_size_expr(x, k);
        }
        pad[2 * d] = kiln_int(ctx, s);
        kiln_tensor *shifted = kiln_shrink_sym(kiln_pad_sym(x, pad), begin, end);
        x = kiln_add(x, shifted);
        if (s * 2 < nmax)
            x = kiln_contiguous(x);
    }
    return x;
}

enum { CUMSUM_TRIANGLE_MAX = 64 };

static kiln_tensor *cumsum_impl(kiln_tensor *t, int32_t dim) {
    if (!t)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    if (ndim_of(t) == 0) { /* dim 0 or -1 of a 0-d tensor: the tensor itself (as torch) */
        uint32_t d = 0;
        if (!dim_index(ctx, "kiln_cumsum", dim, 1, &d))
            return NULL;
        return kiln_squeeze(cumsum_impl(kiln_unsqueeze(t, 0), 0), 0);
    }
    uint32_t d = 0;
    if (!dim_index(ctx, "kiln_cumsum", dim, ndim_of(t), &d))
        return NULL;
    kiln_dtype dt = is_float(dtype_of(t)) ? dtype_of(t) : KILN_I64;
    kiln_tensor *x = kiln_cast(t, dt == KILN_F16 ? KILN_F32 : dt); /* f16 adds in f32 */
    int64_t n;
    if (sym_is_const(view_of(t)->shape[d], &n) && n <= CUMSUM_TRIANGLE_MAX)
        x = n <= 1 ? kiln_contiguous(x) : cumsum_triangle(x, d);
    else
        x = cumsum_scan(x, d);
    return kiln_cast(x, dt);
}

/* ---- topk ---- */

/* The lowest value of dtype d (what a taken element becomes, never above a real one). */
static double lowest_of(kiln_dtype d) {
    switch (d) {
    case KILN_I8:
        return INT8_MIN;
    case KILN_I32:
        return INT32_MIN;
    case KILN_I64:
        return (double)INT64_MIN;
    case KILN_U8:
    case KILN_U32:
        return 0;
    default:
        return -INFINITY;
    }
}

/* The key whose largest elements are t's smallest, without overflow: -x for floats, -1 - x
 * (~x) for signed integers, MAX - x for unsigned ones. */
static kiln_tensor *reversed_key(kiln_tensor *t) {
    kiln_context *ctx = ENG_CTX(t);
    kiln_dtype d = dtype_of(t);
    if (is_float(d))
        return kiln_neg(t);
    double top = d == KILN_U8 ? 255.0 : d == KILN_U32 ? 4294967295.0 : -1.0;
    return kiln_sub(kiln_scalar(ctx, d, top), t);
}

/* One round: the first untaken index of the largest untaken key (NaN is the largest, its
 * first occurrence taken first), as (.., 1, ..) I64. */
static kiln_tensor *topk_round(kiln_tensor *t, kiln_tensor *key, kiln_tensor *taken,
                               kiln_tensor *positions, uint32_t d) {
    kiln_context *ctx = ENG_CTX(t);
    const int32_t axis = (int32_t)d;
    kiln_dtype kd = dtype_of(key);
    kiln_tensor *low = kiln_scalar(ctx, kd, lowest_of(kd));
    kiln_tensor *open = kiln_where(taken, low, key);
    kiln_tensor *m = kiln_max(open, 1, &axis, true);
    kiln_tensor *hit = kiln_eq(open, m);
    if (is_float(kd)) /* NaN == NaN is false: a NaN maximum matches the NaNs */
        hit = kiln_add(hit, kiln_mul(kiln_ne(open, open), kiln_ne(m, m)));
    hit = kiln_mul(hit, kiln_eq(taken, kiln_scalar(ctx, KILN_BOOL, 0)));
    kiln_tensor *none = kiln_scalar_expr(ctx, KILN_I64, kiln_tensor_size_expr(t, d));
    return kiln_min(kiln_where(hit, positions, none), 1, &axis, true);
}

/* x > y in the order of keys where NaN is the largest (NaNs equal among themselves). */
static kiln_tensor *key_gt(kiln_tensor *x, kiln_tensor *y) {
    kiln_tensor *gt = kiln_gt(x, y);
    if (!is_float(dtype_of(x)))
        return gt;
    kiln_tensor *xnan = kiln_ne(x, x), *ynum = kiln_eq(y, y);
    return kiln_add(gt, kiln_mul(xnan, ynum));
}

static kiln_tensor *key_eq(kiln_tensor *x, kiln_tensor *y) {
    kiln_tensor *eq = kiln_eq(x, y);
    if (!is_float(dtype_of(x)))
        return eq;
    return kiln_add(eq, kiln_mul(kiln_ne(x, x), kiln_ne(y, y)));
}

/* For rows of at most TOPK_RANK_MAX: each element's rank (how many come before it: larger
 * keys, or equal ones at lower indices) in one n^2 reduction, then the index of rank r for
 * r < k in a second (n k) one: two kernels whatever k. key: (..., n) with the dim last. */
static kiln_tensor *topk_by_rank(kiln_tensor *key, int64_t k) {
    kiln_context *ctx = ENG_CTX(key);
    const kiln_expr *n = kiln_tensor_size_expr(key, ndim_of(key) - 1);
    kiln_tensor *pos = kiln_arange_sym(ctx, KILN_I64, n);
    kiln_tensor *kj = kiln_unsqueeze(key, -1), *ki = kiln_unsqueeze(key, -2); /* (.., j, i) */
    kiln_tensor *lower = kiln_lt(pos, kiln_unsqueeze(pos, -1));               /* i < j */
    kiln_tensor *before = kiln_add(key_gt(ki, kj), kiln_mul(key_eq(ki, kj), lower));
    kiln_tensor *rank = kiln_sum(before, 1, (const int32_t[]){-1}, false); /* (..., n) i64 */
    kiln_tensor *r = kiln_unsqueeze(kiln_arange(ctx, KILN_I64, 0, (double)k, 1), -1);
    kiln_tensor *sel = kiln_eq(kiln_unsqueeze(rank, -2), r); /* (..., k, n) */
    kiln_tensor *picked = kiln_where(sel, pos, kiln_scalar(ctx, KILN_I64, 0));
    return kiln_sum(picked, 1, (const int32_t[]){-1}, false); /* (..., k) */
}

enum { TOPK_RANK_MAX = 1024 };

static kiln_status topk_check(kiln_context *ctx, kiln_tensor *t, int64_t k, int32_t dim,
                              uint32_t *d) {
    const char *call = "kiln_topk";
    kiln_dtype dt = dtype_of(t);
    if (dt == KILN_BOOL)
        return base_error_set(&ctx->err, KILN_ERROR_DTYPE_MISMATCH,
                              "%s: not defined for bool (as torch)", call);
    uint32_t nd = ndim_of(t) ? ndim_of(t) : 1;
    int64_t n = nd;
    if (dim < -n || dim >= n)
        return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_RANGE,
                              "%s: dim %d is out of range for %u dims", call, dim, nd);
    *d = (uint32_t)(dim < 0 ? dim + n : dim);
    int64_t size = ndim_of(t) ? sym_vmin(view_of(t)->shape[*d]) : 1;
    if (k < 0 || k > size) {
        char st[128];
        return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_RANGE,
                              "%s: k is %lld for t of shape %s along dim %u (needs 0 <= k <= the "
                              "dim's size, %lld at least)",
                              call, (long long)k, shape_str(t, st, sizeof st), *d, (long long)size);
    }
    return KILN_OK;
}

/* Rows of up to TOPK_RANK_MAX by rank; longer ones by k rounds of an argmax with the chosen
 * elements masked out, the rounds' indices concatenated along dim. The values are gathered
 * from the indices. */
static void topk_build(kiln_tensor *t, int64_t k, uint32_t d, bool largest, kiln_tensor **values,
                       kiln_tensor **indices) {
    kiln_context *ctx = ENG_CTX(t);
    if (ndim_of(t) == 0) { /* as a 1-d tensor of one element */
        topk_build(kiln_unsqueeze(t, 0), k, 0, largest, values, indices);
        *values = kiln_squeeze(*values, 0);
        *indices = kiln_squeeze(*indices, 0);
        return;
    }
    if (k == 0) {
        kiln_tensor *none = kiln_narrow(t, (int32_t)d, 0, 0);
        *values = kiln_contiguous(none);
        *indices = kiln_cast(none, KILN_I64);
        return;
    }
    kiln_tensor *key = largest ? t : reversed_key(t);
    if (sym_vmax(view_of(t)->shape[d]) <= TOPK_RANK_MAX) {
        int32_t last = (int32_t)ndim_of(t) - 1;
        kiln_tensor *idx = topk_by_rank(kiln_transpose(key, (int32_t)d, last), k);
        *indices = kiln_transpose(idx, (int32_t)d, last);
        *values = kiln_gather(t, (int32_t)d, *indices);
        return;
    }
    kiln_tensor *positions = arange_along(t, d, KILN_I64);
    kiln_tensor *taken = kiln_lt(positions, kiln_scalar(ctx, KILN_I64, 0)); /* all false */
    kiln_tensor **parts = base_calloc(&ctx->alloc, (size_t)k, sizeof *parts);
    if (!parts) {
        eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "kiln_topk: out of host memory");
        return;
    }
    for (int64_t r = 0; r < k; r++) {
        /* each round's index materialised (a kernel of its own): the rounds' reductions are
         * not fused into the concatenation, which the lowering refuses beyond four of them
         * (an engine bug, reported) */
        parts[r] = kiln_contiguous(topk_round(t, key, taken, positions, d));
        taken = kiln_add(taken, kiln_eq(positions, parts[r]));
    }
    *indices = cat_impl("kiln_topk", (uint32_t)k, parts, (int32_t)d);
    *values = kiln_gather(t, (int32_t)d, *indices); /* exact: one element picked per output */
    base_free(&ctx->alloc, parts, (size_t)k * sizeof *parts);
}

/* ---- multinomial ---- */

/* One draw per row: u = rand * the row's total, the index = the count of cumulative sums <= u
 * (the first element whose cumulative sum exceeds u: zero weights are never drawn), clamped to
 * V - 1 (a row of zeros gives V - 1, where torch refuses). */
static kiln_tensor *multinomial_impl(kiln_tensor *probs, uint64_t seed) {
    if (!probs)
        return NULL;
    const char *call = "kiln_multinomial";
    kiln_context *ctx = ENG_CTX(probs);
    if (!need_float(probs, call, "probs"))
        return NULL;
    uint32_t nd = ndim_of(probs);
    if (nd == 0 || sym_vmin(view_of(probs)->shape[nd - 1]) < 1) {
        char sp[128];
        return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                        "%s: probs is %s: it needs at least 1 dim and a last dim of size >= 1",
                        call, shape_str(probs, sp, sizeof sp));
    }
    kiln_tensor *p = kiln_cast(probs, KILN_F32);
    kiln_tensor *cs = cumsum_impl(p, -1);
    const kiln_expr *v = kiln_tensor_size_expr(probs, nd - 1);
    const kiln_expr *last = expr_sub(ctx, v, kiln_int(ctx, 1));
    kiln_tensor *total = kiln_narrow_sym(cs, -1, last, kiln_int(ctx, 1));
    const kiln_expr *shape[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d + 1 < nd; d++)
        shape[d] = kiln_tensor_size_expr(probs, d);
    shape[nd - 1] = kiln_int(ctx, 1);
    kiln_tensor *u = kiln_mul(kiln_rand_sym(ctx, KILN_F32, nd, shape, seed), total);
    kiln_tensor *count = kiln_sum(kiln_le(cs, u), 1, (const int32_t[]){-1}, false);
    return kiln_minimum(count, kiln_scalar_expr(ctx, KILN_I64, last));
}

/* ---- where with a scalar, masked_fill ---- */

/* The dtype of a tensor of dtype d with a Python number b (torch.result_type): a float tensor
 * keeps its dtype; a non-integral b (fraction, NaN, infinity) gives f32; an integral one gives
 * i64 with bool, else d (b must fit it). */
static bool scalar_dtype(kiln_context *ctx, const char *call, kiln_dtype d, double b,
                         kiln_dtype *out) {
    *out = d;
    if (is_float(d))
        return true;
    if (!isfinite(b) || b != trunc(b)) {
        *out = KILN_F32;
        return true;
    }
    if (d == KILN_BOOL)
        *out = KILN_I64;
    return eng_value_fits(ctx, call, eng_ir_type(*out), b);
}

static kiln_tensor *where_scalar_impl(kiln_tensor *cond, kiln_tensor *a, double b) {
    if (!cond || !a)
        return NULL;
    kiln_context *ctx = ENG_CTX(a);
    kiln_dtype d;
    if (!scalar_dtype(ctx, "kiln_where_scalar", dtype_of(a), b, &d))
        return NULL;
    return kiln_where(cond, kiln_cast(a, d), kiln_scalar(ctx, d, b));
}

/* where(mask, value, t): the mask must be bool (as torch) and broadcast with t; the value
 * converts to t's dtype (toward zero; one t's dtype cannot hold is KILN_ERROR_OUT_OF_RANGE). */
static kiln_tensor *masked_fill_impl(kiln_tensor *t, kiln_tensor *mask, double value) {
    if (!t || !mask)
        return NULL;
    const char *call = "kiln_masked_fill";
    kiln_context *ctx = ENG_CTX(t);
    if (dtype_of(mask) != KILN_BOOL)
        return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH,
                        "%s: mask is %s: it must be bool (as torch)", call,
                        kiln_dtype_name(dtype_of(mask)));
    kiln_dtype d = dtype_of(t);
    if (!is_float(d) && d != KILN_BOOL && !eng_value_fits(ctx, call, eng_ir_type(d), value))
        return NULL;
    return kiln_where(mask, kiln_scalar(ctx, d, value), t);
}

/* ---- view and is_contiguous ---- */

/* r (t reshaped) as torch.view: only when t's strides allow the reshape without a copy. */
static kiln_tensor *view_check(kiln_tensor *t, kiln_tensor *r) {
    if (!t || !r)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    const shape_view *v = view_of(r);
    if (ENG_ST(t)->nviews == 1 &&
        shape_view_torch_can_view(ctx->shape, view_of(t), v->ndim, v->shape, NULL))
        return r;
    char st[128], sr[128];
    int64_t strides[SHAPE_MAX_DIMS];
    char ss[192] = "";
    if (kiln_tensor_strides(t, strides) == KILN_OK) {
        size_t at = 0;
        for (uint32_t d = 0; d < ndim_of(t) && at < sizeof ss; d++)
            at += (size_t)snprintf(ss + at, sizeof ss - at, "%s%lld", d ? ", " : "",
                                   (long long)strides[d]);
    }
    return eng_fail(ctx, KILN_ERROR_NOT_VIEWABLE,
                    "kiln_view: t is %s with strides (%s), the view %s: the strides do not allow "
                    "it without a copy (use kiln_reshape, which copies)",
                    shape_str(t, st, sizeof st), ss, shape_str(r, sr, sizeof sr));
}

static kiln_tensor *view_impl(kiln_tensor *t, uint32_t ndim, const int64_t *shape) {
    return t ? view_check(t, kiln_reshape(t, ndim, shape)) : NULL;
}

static kiln_tensor *view_sym_impl(kiln_tensor *t, uint32_t ndim, const kiln_expr *const *shape) {
    return t ? view_check(t, kiln_reshape_sym(t, ndim, shape)) : NULL;
}

/* ---- the public entry points ---- */

kiln_tensor *kiln_cat(uint32_t count, kiln_tensor *const *tensors, int32_t dim) {
    if (count == 0 || !tensors)
        return NULL; /* no context to record it in */
    kiln_context *ctx = eng_entry_context("kiln_cat", count, tensors);
    if (!ctx)
        return NULL;
    size_t mark = eng_temps_begin(ctx);
    return eng_temps_end(ctx, mark, cat_impl("kiln_cat", count, tensors, dim));
}

kiln_tensor *kiln_stack(uint32_t count, kiln_tensor *const *tensors, int32_t dim) {
    if (count == 0 || !tensors)
        return NULL;
    kiln_context *ctx = eng_entry_context("kiln_stack", count, tensors);
    if (!ctx)
        return NULL;
    size_t mark = eng_temps_begin(ctx);
    return eng_temps_end(ctx, mark, stack_impl(count, tensors, dim));
}

kiln_tensor *kiln_layer_norm(kiln_tensor *x, uint32_t ndims, kiln_tensor *weight, kiln_tensor *bias,
                             double eps) {
    kiln_tensor *ops[3] = {x, weight, bias};
    uint32_t n = 1;
    if (weight)
        ops[n++] = weight;
    if (bias)
        ops[n++] = bias;
    kiln_context *ctx = eng_entry_context("kiln_layer_norm", n, ops);
    if (!ctx)
        return NULL;
    size_t mark = eng_temps_begin(ctx);
    return eng_temps_end(ctx, mark, layer_norm_impl(x, ndims, weight, bias, eps));
}

kiln_tensor *kiln_rms_norm(kiln_tensor *x, uint32_t ndims, kiln_tensor *weight, double eps) {
    if (weight) {
        ENG_ENTRY("kiln_rms_norm", rms_norm_impl(x, ndims, weight, eps), x, weight);
    }
    ENG_ENTRY("kiln_rms_norm", rms_norm_impl(x, ndims, NULL, eps), x);
}

kiln_tensor *kiln_erf(kiln_tensor *t) {
    ENG_ENTRY("kiln_erf", erf_impl(t), t);
}

kiln_tensor *kiln_gelu(kiln_tensor *t, bool tanh_approximation) {
    ENG_ENTRY("kiln_gelu", gelu_impl(t, tanh_approximation), t);
}

kiln_tensor *kiln_silu(kiln_tensor *t) {
    ENG_ENTRY("kiln_silu", silu_impl(t), t);
}

kiln_tensor *kiln_triu(kiln_tensor *t, int64_t diagonal) {
    ENG_ENTRY("kiln_triu", triangle_impl("kiln_triu", t, diagonal, true), t);
}

kiln_tensor *kiln_tril(kiln_tensor *t, int64_t diagonal) {
    ENG_ENTRY("kiln_tril", triangle_impl("kiln_tril", t, diagonal, false), t);
}

kiln_tensor *kiln_causal_mask(kiln_context *ctx, kiln_dtype dtype, const kiln_expr *rows,
                              const kiln_expr *cols) {
    if (!ctx)
        return NULL;
    if (ctx->temp_depth == 0)
        ctx->call = "kiln_causal_mask";
    size_t mark = eng_temps_begin(ctx);
    return eng_temps_end(ctx, mark, causal_mask_impl(ctx, dtype, rows, cols));
}

kiln_tensor *kiln_cumsum(kiln_tensor *t, int32_t dim) {
    ENG_ENTRY("kiln_cumsum", cumsum_impl(t, dim), t);
}

kiln_status kiln_topk(kiln_tensor *t, int64_t k, int32_t dim, bool largest, kiln_tensor **values,
                      kiln_tensor **indices) {
    if (values)
        *values = NULL;
    if (indices)
        *indices = NULL;
    kiln_context *ctx = NULL;
    kiln_status st;
    if (!eng_arg_status(t, &ctx, "kiln_topk", &st))
        return st;
    st = eng_call_begin(ctx);
    if (st != KILN_OK)
        return st;
    if (!values || !indices)
        return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_topk: values or indices is NULL");
    uint32_t d = 0;
    st = topk_check(ctx, t, k, dim, &d);
    if (st != KILN_OK)
        return st;
    if (ctx->temp_depth == 0)
        ctx->call = "kiln_topk";
    size_t mark = eng_temps_begin(ctx);
    kiln_tensor *out[2] = {NULL, NULL};
    topk_build(t, k, d, largest, &out[0], &out[1]);
    eng_temps_end_many(ctx, mark, 2, out);
    if (!out[0] || !out[1]) {
        kiln_release(out[0]);
        kiln_release(out[1]);
        return ctx->err.status != KILN_OK ? ctx->err.status : KILN_ERROR_OUT_OF_HOST_MEMORY;
    }
    *values = out[0];
    *indices = out[1];
    return KILN_OK;
}

kiln_tensor *kiln_multinomial(kiln_tensor *probs, uint64_t seed) {
    ENG_ENTRY("kiln_multinomial", multinomial_impl(probs, seed), probs);
}

kiln_tensor *kiln_where_scalar(kiln_tensor *cond, kiln_tensor *a, double b) {
    ENG_ENTRY("kiln_where_scalar", where_scalar_impl(cond, a, b), cond, a);
}

kiln_tensor *kiln_masked_fill(kiln_tensor *t, kiln_tensor *mask, double value) {
    ENG_ENTRY("kiln_masked_fill", masked_fill_impl(t, mask, value), t, mask);
}

kiln_tensor *kiln_view(kiln_tensor *t, uint32_t ndim, const int64_t *shape) {
    ENG_ENTRY("kiln_view", view_impl(t, ndim, shape), t);
}

kiln_tensor *kiln_view_sym(kiln_tensor *t, uint32_t ndim, const kiln_expr *const *shape) {
    ENG_ENTRY("kiln_view_sym", view_sym_impl(t, ndim, shape), t);
}

/* Row-major and dense with the tracker's strides (size-1 dims and empty tensors impose
 * nothing, as torch); a padded view, or a tensor that is no single view of its storage, is
 * not. Refused handles and unbound sizes give false. */
bool kiln_is_contiguous(kiln_tensor *t) {
    kiln_context *ctx = NULL;
    kiln_status st;
    if (!eng_arg_status(t, &ctx, "kiln_is_contiguous", &st))
        return false;
    if (ENG_ST(t)->nviews != 1 || view_of(t)->masked)
        return false;
    uint32_t nd = ndim_of(t);
    int64_t shape[SHAPE_MAX_DIMS], strides[SHAPE_MAX_DIMS];
    if (kiln_tensor_shape(t, shape) != KILN_OK || kiln_tensor_strides(t, strides) != KILN_OK)
        return false;
    int64_t expected = 1;
    for (uint32_t d = nd; d-- > 0;) {
        if (shape[d] == 0)
            return true;
        if (shape[d] != 1 && strides[d] != expected)
            return false;
        expected *= shape[d];
    }
    return true;
}
