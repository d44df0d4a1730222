/* Compute ops: elementwise with broadcasting and type promotion, reductions, and the
 * composites built from them (mean, var, std, softmax, matmul). Each is a short _impl over
 * eng_elementwise and reduce. */
#include "eng.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const shape_view *view_of(kiln_tensor *t) {
    return shape_tracker_last(ENG_ST(t));
}

static ir_type type_of(kiln_tensor *t) {
    return ENG_BASE(t)->type;
}

kiln_tensor *eng_elementwise_of(kiln_context *ctx, ir_op op, ir_type type, uint32_t ndim,
                                const sym_node *const *shape, uint32_t nsrc, eng_node *const *nodes,
                                const shape_tracker *const *views) {
    eng_node *n = eng_node_new(ctx, ENG_EW, op, type, ndim, shape);
    if (!n)
        return NULL;
    n->nsrc = nsrc;
    for (uint32_t i = 0; i < nsrc; i++) {
        n->src[i] = (eng_src){nodes[i], eng_tracker_keep(ctx, views[i]), 0};
        if (!n->src[i].st) {
            eng_node_discard(ctx, n);
            return NULL;
        }
    }
    n = eng_node_intern(ctx, n);
    if (!n)
        return NULL;
    return eng_tensor_new(ctx, n, eng_tracker_contiguous(ctx, n->ndim, n->shape));
}

kiln_tensor *eng_elementwise(kiln_context *ctx, ir_op op, ir_type type, uint32_t nsrc,
                             kiln_tensor *const *srcs) {
    const shape_view *v = view_of(srcs[0]);
    eng_node *nodes[3];
    const shape_tracker *views[3];
    for (uint32_t i = 0; i < nsrc; i++) {
        nodes[i] = eng_resolve(srcs[i]);
        views[i] = ENG_ST(srcs[i]);
    }
    return eng_elementwise_of(ctx, op, type, v->ndim, v->shape, nsrc, nodes, views);
}

/* ---- broadcasting and promotion ----------------------------------------------------------------
 */

static bool is_one(const sym_node *s) {
    int64_t v;
    return sym_is_const(s, &v) && v == 1;
}

/* Records that the n operands do not broadcast: dim `from_right` has sizes a and b. */
static bool broadcast_fail(kiln_context *ctx, const char *op, uint32_t n, kiln_tensor *const *ts,
                           uint32_t from_right, const sym_node *a, const sym_node *b) {
    char shapes[256], sa[64], sb[64];
    size_t len = 0;
    for (uint32_t j = 0; j < n && len < sizeof shapes; j++) {
        char one[128];
        const shape_view *v = view_of(ts[j]);
        len += (size_t)snprintf(shapes + len, sizeof shapes - len, "%s%s",
                                j ? (j + 1 < n ? ", " : " and ") : "",
                                eng_shape_render(v->ndim, v->shape, one, sizeof one));
    }
    sym_render(a, sa, sizeof sa);
    sym_render(b, sb, sizeof sb);
    return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                    "%s: shapes %s do not broadcast: dim %u from the right is %s and %s", op,
                    shapes, from_right, sa, sb) != NULL;
}

/* Expands every operand to the common broadcast shape (right-aligned, as NumPy). */
static bool broadcast(kiln_context *ctx, const char *op, uint32_t n, kiln_tensor **ts) {
    uint32_t ndim = 0;
    for (uint32_t i = 0; i < n; i++)
        ndim = view_of(ts[i])->ndim > ndim ? view_of(ts[i])->ndim : ndim;
    const sym_node *shape[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < ndim; d++) {
        const sym_node *size = NULL;
        for (uint32_t i = 0; i < n; i++) {
            const shape_view *v = view_of(ts[i]);
            if (d + v->ndim < ndim)
                continue;
            const sym_node *s = v->shape[d + v->ndim - ndim];
            if (!size || is_one(size))
                size = s;
            else if (s != size && !is_one(s))
                return broadcast_fail(ctx, op, n, ts, ndim - d, size, s);
        }
        shape[d] = size;
    }
    for (uint32_t i = 0; i < n; i++) {
        ts[i] = eng_expand(ts[i], ndim, shape);
        if (!ts[i])
            return false;
    }
    return true;
}

static int type_rank(ir_type t) {
    switch (t) {
    case IR_BOOL:
        return 0;
    case IR_U8:
        return 1;
    case IR_I8:
        return 2;
    case IR_U32:
        return 3;
    case IR_I32:
        return 4;
    case IR_I64:
        return 5;
    case IR_F16:
        return 6;
    default:
        return 7;
    }
}

/* PyTorch's promotion of two tensors (torch.result_type): the float type of higher rank wins
 * (f16 < f32); bool gives way to any other type; integers of one signedness give the wider.
 * Integers of mixed signedness give the narrowest signed type that holds both (PyTorch's rule
 * for u8 with i8..i64, NumPy's for u32, which PyTorch does not promote): u8 with i32 is i32,
 * with i64 i64; u32 with any signed integer i64; u8 with i8 is i32 (PyTorch's int16, which
 * Kiln lacks). */
static ir_type promote(ir_type a, ir_type b) {
    if (a == b)
        return a;
    if (ir_type_is_float(a) || ir_type_is_float(b))
        return type_rank(a) > type_rank(b) ? a : b;
    if (a == IR_BOOL)
        return b;
    if (b == IR_BOOL)
        return a;
    if (ir_type_is_signed(a) != ir_type_is_signed(b)) {
        ir_type u = ir_type_is_signed(a) ? b : a, s = ir_type_is_signed(a) ? a : b;
        uint32_t bits =
            2 * ir_type_bits(u) > ir_type_bits(s) ? 2 * ir_type_bits(u) : ir_type_bits(s);
        return bits > 32 ? IR_I64 : IR_I32;
    }
    return type_rank(a) > type_rank(b) ? a : b;
}

ir_type eng_promote(ir_type a, ir_type b) {
    return promote(a, b);
}

static kiln_tensor *cast_to(kiln_tensor *t, ir_type type) {
    if (!t || type_of(t) == type)
        return t;
    return eng_elementwise(ENG_CTX(t), IR_CAST, type, 1, &t);
}

/* A product's operand of a small integer type (bool, i8, u8) as i32, the type its sums give:
 * the products are then exact, not wrapped in the operands' type before the widened sum
 * (u8 [3] . [255] is 765, as the i32 result promises). */
static kiln_tensor *widen_small(kiln_tensor *t) {
    ir_type type = t ? type_of(t) : IR_F32;
    return type == IR_BOOL || type == IR_I8 || type == IR_U8 ? cast_to(t, IR_I32) : t;
}

static kiln_tensor *cast_impl(kiln_tensor *t, kiln_dtype dtype) {
    if (!t)
        return NULL;
    if (!eng_dtype_valid(dtype))
        return eng_fail(ENG_CTX(t), KILN_ERROR_INVALID_ARGUMENT, "kiln_cast: unknown dtype %d",
                        (int)dtype);
    return cast_to(t, eng_ir_type(dtype));
}

/* a op b with broadcasting, operands promoted to a common type (or to `operand` when not
 * IR_TYPE_COUNT_), result type `result` (IR_TYPE_COUNT_: the operand type). */
static kiln_tensor *binary(const char *name, ir_op op, kiln_tensor *a, kiln_tensor *b,
                           ir_type operand, ir_type result) {
    if (!a || !b)
        return NULL;
    kiln_context *ctx = ENG_CTX(a);
    if (ENG_CTX(b) != ctx)
        return eng_fail(ctx, KILN_ERROR_INVALID_HANDLE, "%s: tensors of different contexts", name);
    ir_type t = operand != IR_TYPE_COUNT_ ? operand : promote(type_of(a), type_of(b));
    kiln_tensor *ts[2] = {cast_to(a, t), cast_to(b, t)};
    if (!ts[0] || !ts[1] || !broadcast(ctx, name, 2, ts))
        return NULL;
    return eng_elementwise(ctx, op, result != IR_TYPE_COUNT_ ? result : t, 2, ts);
}

static ir_type float_of(ir_type t) {
    return ir_type_is_float(t) ? t : IR_F32;
}

static ir_type promoted(kiln_tensor *a, kiln_tensor *b) {
    return a && b ? promote(type_of(a), type_of(b)) : IR_F32;
}

static kiln_tensor *add_impl(kiln_tensor *a, kiln_tensor *b) {
    if (promoted(a, b) == IR_BOOL) /* True + True is True */
        return binary("kiln_add", IR_OR, a, b, IR_TYPE_COUNT_, IR_TYPE_COUNT_);
    return binary("kiln_add", IR_ADD, a, b, IR_TYPE_COUNT_, IR_TYPE_COUNT_);
}

static kiln_tensor *sub_impl(kiln_tensor *a, kiln_tensor *b) {
    if (a && b && promoted(a, b) == IR_BOOL)
        return eng_fail(ENG_CTX(a), KILN_ERROR_DTYPE_MISMATCH,
                        "kiln_sub: subtraction of bool tensors is not supported (as PyTorch)");
    return binary("kiln_sub", IR_SUB, a, b, IR_TYPE_COUNT_, IR_TYPE_COUNT_);
}

static kiln_tensor *mul_impl(kiln_tensor *a, kiln_tensor *b) {
    if (promoted(a, b) == IR_BOOL)
        return binary("kiln_mul", IR_AND, a, b, IR_TYPE_COUNT_, IR_TYPE_COUNT_);
    return binary("kiln_mul", IR_MUL, a, b, IR_TYPE_COUNT_, IR_TYPE_COUNT_);
}

static kiln_tensor *div_impl(kiln_tensor *a, kiln_tensor *b) {
    ir_type t = float_of(promoted(a, b));
    return binary("kiln_div", IR_DIV, a, b, t, t);
}

static kiln_tensor *pow_impl(kiln_tensor *a, kiln_tensor *b) {
    ir_type t = float_of(promoted(a, b));
    return binary("kiln_pow", IR_POW, a, b, t, t);
}

static kiln_tensor *maximum_impl(kiln_tensor *a, kiln_tensor *b) {
    return binary("kiln_maximum", IR_MAX, a, b, IR_TYPE_COUNT_, IR_TYPE_COUNT_);
}

static kiln_tensor *minimum_impl(kiln_tensor *a, kiln_tensor *b) {
    return binary("kiln_minimum", IR_MIN, a, b, IR_TYPE_COUNT_, IR_TYPE_COUNT_);
}

static kiln_tensor *lt_impl(kiln_tensor *a, kiln_tensor *b) {
    return binary("kiln_lt", IR_LT, a, b, IR_TYPE_COUNT_, IR_BOOL);
}

static kiln_tensor *le_impl(kiln_tensor *a, kiln_tensor *b) {
    return binary("kiln_le", IR_LE, a, b, IR_TYPE_COUNT_, IR_BOOL);
}

static kiln_tensor *gt_impl(kiln_tensor *a, kiln_tensor *b) {
    return binary("kiln_gt", IR_LT, b, a, IR_TYPE_COUNT_, IR_BOOL);
}

static kiln_tensor *ge_impl(kiln_tensor *a, kiln_tensor *b) {
    return binary("kiln_ge", IR_LE, b, a, IR_TYPE_COUNT_, IR_BOOL);
}

static kiln_tensor *eq_impl(kiln_tensor *a, kiln_tensor *b) {
    return binary("kiln_eq", IR_EQ, a, b, IR_TYPE_COUNT_, IR_BOOL);
}

static kiln_tensor *ne_impl(kiln_tensor *a, kiln_tensor *b) {
    return binary("kiln_ne", IR_NE, a, b, IR_TYPE_COUNT_, IR_BOOL);
}

static kiln_tensor *where_impl(kiln_tensor *cond, kiln_tensor *a, kiln_tensor *b) {
    if (!cond || !a || !b)
        return NULL;
    kiln_context *ctx = ENG_CTX(cond);
    ir_type t = promote(type_of(a), type_of(b));
    kiln_tensor *ts[3] = {cast_to(cond, IR_BOOL), cast_to(a, t), cast_to(b, t)};
    if (!ts[0] || !ts[1] || !ts[2] || !broadcast(ctx, "kiln_where", 3, ts))
        return NULL;
    return eng_elementwise(ctx, IR_WHERE, t, 3, ts);
}

static kiln_tensor *unary(const char *name, ir_op op, kiln_tensor *t, bool to_float) {
    if (!t)
        return NULL;
    ir_type type = to_float ? float_of(type_of(t)) : type_of(t);
    if (type == IR_BOOL && (op == IR_NEG || op == IR_ABS))
        return eng_fail(ENG_CTX(t), KILN_ERROR_DTYPE_MISMATCH, "%s: not defined for bool", name);
    kiln_tensor *x = cast_to(t, type);
    return x ? eng_elementwise(ENG_CTX(t), op, type, 1, &x) : NULL;
}

static kiln_tensor *neg_impl(kiln_tensor *t) {
    return unary("kiln_neg", IR_NEG, t, false);
}
static kiln_tensor *abs_impl(kiln_tensor *t) {
    return unary("kiln_abs", IR_ABS, t, false);
}
static kiln_tensor *exp_impl(kiln_tensor *t) {
    return unary("kiln_exp", IR_EXP, t, true);
}
static kiln_tensor *log_impl(kiln_tensor *t) {
    return unary("kiln_log", IR_LOG, t, true);
}
static kiln_tensor *sqrt_impl(kiln_tensor *t) {
    return unary("kiln_sqrt", IR_SQRT, t, true);
}
static kiln_tensor *rsqrt_impl(kiln_tensor *t) {
    return unary("kiln_rsqrt", IR_RSQRT, t, true);
}
static kiln_tensor *sin_impl(kiln_tensor *t) {
    return unary("kiln_sin", IR_SIN, t, true);
}
static kiln_tensor *cos_impl(kiln_tensor *t) {
    return unary("kiln_cos", IR_COS, t, true);
}
static kiln_tensor *tanh_impl(kiln_tensor *t) {
    return unary("kiln_tanh", IR_TANH, t, true);
}

/* A 0-d constant of t's type (broadcasts against t). */
static kiln_tensor *scalar_like(kiln_tensor *t, double value) {
    if (!t || !eng_value_fits(ENG_CTX(t), "scalar operand", type_of(t), value))
        return NULL;
    return eng_full(ENG_CTX(t), type_of(t), 0, NULL, value, NULL);
}

/* The scalar operand of t op value, as PyTorch types a Python number: a value with a fraction
 * part, NaN or an infinity is a Python float (an integer or bool tensor gives f32, a float
 * tensor keeps its type); an integral value is a Python int (a bool tensor gives i64, any other
 * keeps its type, and the value must fit it). */
static kiln_tensor *scalar_operand(kiln_tensor *t, double value) {
    if (!t)
        return NULL;
    ir_type type = type_of(t);
    if (!isfinite(value) || value != trunc(value))
        type = float_of(type);
    else if (type == IR_BOOL)
        type = IR_I64;
    if (!eng_value_fits(ENG_CTX(t), "scalar operand", type, value))
        return NULL;
    return eng_full(ENG_CTX(t), type, 0, NULL, value, NULL);
}

static kiln_tensor *add_scalar_impl(kiln_tensor *t, double value) {
    return kiln_add(t, scalar_operand(t, value));
}

static kiln_tensor *mul_scalar_impl(kiln_tensor *t, double value) {
    return kiln_mul(t, scalar_operand(t, value));
}

static kiln_tensor *relu_impl(kiln_tensor *t) {
    return kiln_maximum(t, scalar_like(t, 0.0));
}

static kiln_tensor *sigmoid_impl(kiln_tensor *t) {
    kiln_tensor *x = t ? cast_to(t, float_of(type_of(t))) : NULL;
    kiln_tensor *one = scalar_like(x, 1.0);
    return kiln_div(one, kiln_add(one, kiln_exp(kiln_neg(x))));
}

/* Inverted dropout: where(u >= p, t / (1 - p), 0), u kiln_rand's numbers of t's shape and seed
 * (the seed a kernel parameter, kernel.c lift_seed), so that the gradient (autograd records
 * these public ops) is the mask / (1 - p). p = 0 is t itself (a handle of its own). */
static kiln_tensor *dropout_impl(kiln_tensor *t, double p, uint64_t seed) {
    if (!t)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    if (!ir_type_is_float(type_of(t)))
        return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_dropout: t is %s, not a float",
                        ir_type_name(type_of(t)));
    if (!(p >= 0 && p < 1))
        return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE,
                        "kiln_dropout: p = %.17g, outside [0, 1) (the probability of zeroing an "
                        "element)",
                        p);
    if (p == 0)
        return t;
    const shape_view *v = view_of(t);
    const kiln_expr *shape[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < v->ndim; d++) {
        if (!(shape[d] = eng_expr_handle(ctx, v->shape[d])))
            return NULL;
    }
    kiln_tensor *u = kiln_rand_sym(ctx, KILN_F32, v->ndim, shape, seed);
    kiln_tensor *keep = kiln_ge(u, eng_full(ctx, IR_F32, 0, NULL, (float)p, NULL));
    /* x * (1 / (1 - p)), the reciprocal rounded to f32 first, as torch (its mask divided by
     * 1 - p, then multiplied in): one rounding, so every device gives torch's bits (a
     * division is not correctly rounded on every GPU). */
    float scale = 1.0f / (float)(1 - p);
    return kiln_where(keep, kiln_mul(t, scalar_like(t, scale)), scalar_like(t, 0));
}

/* ---- reductions
 * ---------------------------------------------------------------------------------- */

/* The reduced-axes mask of (naxes, axes) for t; naxes 0 means every dim. */
static bool axes_mask(kiln_tensor *t, const char *name, uint32_t naxes, const int32_t *axes,
                      uint32_t *mask) {
    uint32_t ndim = view_of(t)->ndim;
    *mask = 0;
    if (naxes == 0) {
        *mask = ndim ? (uint32_t)((1ull << ndim) - 1) : 0;
        return true;
    }
    if (!axes)
        return eng_fail(ENG_CTX(t), KILN_ERROR_INVALID_ARGUMENT, "%s: %u axes and no axes array",
                        name, naxes) != NULL;
    for (uint32_t i = 0; i < naxes; i++) {
        int32_t a = axes[i] < 0 ? axes[i] + (int32_t)ndim : axes[i];
        if (a < 0 || a >= (int32_t)ndim)
            return eng_fail(ENG_CTX(t), KILN_ERROR_OUT_OF_RANGE,
                            "%s: axis %d is out of range for %u dims", name, axes[i], ndim) != NULL;
        if (*mask & (1u << a))
            return eng_fail(ENG_CTX(t), KILN_ERROR_INVALID_ARGUMENT, "%s: axis %d appears twice",
                            name, axes[i]) != NULL;
        *mask |= 1u << a;
    }
    return true;
}

/* Drops the reduced (size-1) dims unless keepdim. */
static kiln_tensor *finish_keepdim(kiln_tensor *r, uint32_t mask, bool keepdim) {
    if (!r || keepdim)
        return r;
    const shape_view *v = view_of(r);
    const sym_node *shape[SHAPE_MAX_DIMS];
    uint32_t n = 0;
    for (uint32_t d = 0; d < v->ndim; d++) {
        if (!(mask & (1u << d)))
            shape[n++] = v->shape[d];
    }
    return eng_reshape(r, n, shape);
}

/* The number of elements combined per output, as an expression. */
static const sym_node *reduced_count(kiln_tensor *t, uint32_t mask) {
    const shape_view *v = view_of(t);
    const sym_node *dims[SHAPE_MAX_DIMS];
    uint32_t n = 0;
    for (uint32_t d = 0; d < v->ndim; d++) {
        if (mask & (1u << d))
            dims[n++] = v->shape[d];
    }
    return eng_numel(ENG_CTX(t), n, dims);
}

/* Whether a kept dim has size 0: the reduction has no output, nothing is combined. */
static bool no_outputs(kiln_tensor *t, uint32_t mask) {
    const shape_view *v = view_of(t);
    for (uint32_t d = 0; d < v->ndim; d++) {
        int64_t size;
        if (!(mask & (1u << d)) && sym_is_const(v->shape[d], &size) && size == 0)
            return true;
    }
    return false;
}

static kiln_tensor *reduce_node(kiln_tensor *t, ir_op op, uint32_t mask);

/* A reduction over count > ENG_REDUCE_MAX_COUNT elements in two stages: the reduced dims moved
 * last and flattened, filled up to outer * inner (count <= inner, outer <= ENG_REDUCE_MAX_COUNT)
 * with values that change nothing (0 for sums, 1 for products, the first element for max and
 * min), reduced over inner, then over outer. The result is shaped as reduce_node's. */
static kiln_tensor *reduce_split(kiln_tensor *t, ir_op op, uint32_t mask, int64_t count) {
    kiln_context *ctx = ENG_CTX(t);
    const shape_view *v = view_of(t);
    /* Rounded up without forming count + divisor - 1, which overflows near INT64_MAX. */
    int64_t outer = count / ENG_REDUCE_MAX_COUNT + (count % ENG_REDUCE_MAX_COUNT != 0);
    int64_t inner = count / outer + (count % outer != 0), filled;
    if (!base_mul_i64(outer, inner, &filled))
        return eng_fail(ctx, KILN_ERROR_LIMIT_EXCEEDED,
                        "a reduction of %lld elements per output (too many to split in stages)",
                        (long long)count);
    int32_t perm[SHAPE_MAX_DIMS];
    const sym_node *shape[SHAPE_MAX_DIMS + 1], *keep[SHAPE_MAX_DIMS];
    uint32_t nk = 0;
    for (uint32_t d = 0; d < v->ndim; d++) {
        keep[d] = mask & (1u << d) ? sym_const(ctx->sym, 1) : v->shape[d];
        if (!(mask & (1u << d))) {
            shape[nk] = v->shape[d];
            perm[nk++] = (int32_t)d;
        }
    }
    for (uint32_t d = 0, r = nk; d < v->ndim; d++) {
        if (mask & (1u << d))
            perm[r++] = (int32_t)d;
    }
    shape[nk] = sym_const(ctx->sym, count);
    kiln_tensor *flat = eng_reshape(kiln_permute(t, perm), nk + 1, shape);
    int64_t pad[2 * (SHAPE_MAX_DIMS + 1)] = {0};
    pad[2 * nk + 1] = filled - count;
    kiln_tensor *x = kiln_pad(flat, pad);
    if (x && op != IR_ADD) { /* where the padding is: 1 or the row's first element */
        kiln_tensor *in = kiln_pad(kiln_ones(ctx, KILN_BOOL, 1, &count), pad + 2 * nk);
        kiln_tensor *fill = op == IR_MUL ? eng_full(ctx, type_of(t), 0, NULL, 1.0, NULL)
                                         : kiln_narrow(flat, (int32_t)nk, 0, 1);
        x = kiln_where(in, x, fill);
    } else if (x) { /* a node of its own, so the reshape below is a plain view */
        x = eng_elementwise(ctx, IR_CAST, type_of(x), 1, &x);
    }
    shape[nk] = sym_const(ctx->sym, outer);
    shape[nk + 1] = sym_const(ctx->sym, inner);
    x = eng_reshape(x, nk + 2, shape);
    if (!x)
        return NULL;
    kiln_tensor *r = reduce_node(reduce_node(x, op, 1u << (nk + 1)), op, 1u << nk);
    return eng_reshape(r, v->ndim, keep);
}

/* The combining node over the axes in mask, reduced dims kept as size 1. */
static kiln_tensor *reduce_node(kiln_tensor *t, ir_op op, uint32_t mask) {
    if (!t)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    int64_t count;
    const sym_node *c = reduced_count(t, mask);
    const shape_view *v = view_of(t);
    const sym_node *shape[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < v->ndim; d++)
        shape[d] = mask & (1u << d) ? sym_const(ctx->sym, 1) : v->shape[d];
    if (no_outputs(t, mask)) /* an empty result, however many elements each would combine */
        return eng_full(ctx, type_of(t), v->ndim, shape, 0.0, NULL);
    if (c && sym_is_const(c, &count) && count > ENG_REDUCE_MAX_COUNT)
        return reduce_split(t, op, mask, count);
    eng_node *n = eng_node_new(ctx, ENG_REDUCE, op, type_of(t), v->ndim, shape);
    if (!n)
        return NULL;
    n->nsrc = 1;
    n->src[0] = (eng_src){eng_resolve(t), eng_tracker_keep(ctx, ENG_ST(t)), 0};
    n->reduce_mask = mask;
    if (!n->src[0].st) {
        eng_node_discard(ctx, n);
        return NULL;
    }
    n = eng_node_intern(ctx, n);
    return n ? eng_tensor_new(ctx, n, eng_tracker_contiguous(ctx, n->ndim, n->shape)) : NULL;
}

/* A reduction with few outputs and many elements each runs in two stages, so that enough
 * invocations share the work: kept dims first, the reduced elements as (P, R / P), each of
 * P * outputs invocations combines one contiguous block of R / P, then P partials per output.
 * P is the largest power of two dividing R that keeps both stages long enough, chosen from the
 * device's parallelism. Constant sizes only (a symbolic reduction stays one kernel, compiled
 * once for every bound value). Returns NULL when one stage is best. */
/* A sum over a symbolic number of elements R (a batch Variable's) with few outputs: the same
 * two stages as split_reduce, the reduced elements flattened and padded with zeros to P
 * chunks of ceil(R / P) (P from R's largest value), so that one kernel pair serves every bound
 * value. NULL: not worth it. */
static kiln_tensor *split_reduce_sym(kiln_tensor *x, uint32_t mask, int64_t outputs) {
    kiln_context *ctx = ENG_CTX(x);
    const shape_view *v = view_of(x);
    const sym_node *count = sym_const(ctx->sym, 1);
    for (uint32_t d = 0; d < v->ndim && count; d++)
        if (mask & (1u << d))
            count = sym_mul(ctx->sym, count, v->shape[d]);
    int64_t most = count ? sym_vmax(count) : 0, want = (int64_t)ctx->parallelism;
    if (!count || most < 8192 || outputs * 4 >= want)
        return NULL;
    int64_t p = 1;
    while (outputs * 2 * p <= want && most / (2 * p) >= 256)
        p *= 2;
    if (p < 4)
        return NULL;
    int32_t perm[SHAPE_MAX_DIMS];
    const sym_node *shape[SHAPE_MAX_DIMS + 1], *final[SHAPE_MAX_DIMS], *chunk;
    uint32_t n = 0, nk = 0;
    for (uint32_t d = 0; d < v->ndim; d++) {
        final[d] = mask & (1u << d) ? sym_const(ctx->sym, 1) : v->shape[d];
        if (!(mask & (1u << d))) {
            perm[n++] = (int32_t)d;
            shape[nk++] = v->shape[d];
        }
    }
    for (uint32_t d = 0; d < v->ndim; d++)
        if (mask & (1u << d))
            perm[n++] = (int32_t)d;
    shape[nk] = count;
    kiln_tensor *y = eng_reshape(kiln_permute(x, perm), nk + 1, shape);
    y = eng_pad_to_blocks(y, nk, p, &chunk);
    shape[nk] = sym_const(ctx->sym, p);
    shape[nk + 1] = chunk;
    y = y ? eng_reshape(y, nk + 2, shape) : NULL;
    kiln_tensor *partial = y ? reduce_node(y, IR_ADD, 1u << (nk + 1)) : NULL;
    kiln_tensor *flat = partial ? eng_reshape(partial, nk + 1, shape) : NULL;
    kiln_tensor *total = flat ? reduce_node(flat, IR_ADD, 1u << nk) : NULL;
    return total ? eng_reshape(total, v->ndim, final) : NULL;
}

static kiln_tensor *split_reduce(kiln_tensor *x, ir_op op, uint32_t mask) {
    kiln_context *ctx = ENG_CTX(x);
    const shape_view *v = view_of(x);
    int64_t outputs = 1, count = 1, size;
    bool symbolic = false;
    for (uint32_t d = 0; d < v->ndim; d++) {
        if (!sym_is_const(v->shape[d], &size)) {
            if (!(mask & (1u << d)))
                return NULL; /* symbolic outputs: enough of them, or unknown */
            symbolic = true;
            continue;
        }
        if (!base_mul_i64(mask & (1u << d) ? count : outputs, size,
                          mask & (1u << d) ? &count : &outputs))
            return NULL; /* too large for any device anyway */
    }
    if (symbolic)
        return op == IR_ADD && outputs > 0 ? split_reduce_sym(x, mask, outputs) : NULL;
    int64_t want = (int64_t)ctx->parallelism;
    if (outputs <= 0 || outputs >= want || outputs * 4 >= want || count < 8192)
        return NULL;
    int64_t p = 1;
    while (count % (2 * p) == 0 && outputs * 2 * p <= want && count / (2 * p) >= 256)
        p *= 2;
    if (p < 4)
        return NULL;
    /* (kept..., P, R / P) through a permute and a reshape: views, no data moves. */
    int32_t perm[SHAPE_MAX_DIMS];
    const sym_node *shape[SHAPE_MAX_DIMS + 1], *final[SHAPE_MAX_DIMS];
    uint32_t n = 0, nk = 0;
    for (uint32_t d = 0; d < v->ndim; d++) {
        final[d] = mask & (1u << d) ? sym_const(ctx->sym, 1) : v->shape[d];
        if (!(mask & (1u << d))) {
            perm[n++] = (int32_t)d;
            shape[nk++] = v->shape[d];
        }
    }
    for (uint32_t d = 0; d < v->ndim; d++) {
        if (mask & (1u << d))
            perm[n++] = (int32_t)d;
    }
    shape[nk] = sym_const(ctx->sym, p);
    shape[nk + 1] = sym_const(ctx->sym, count / p);
    kiln_tensor *y = eng_reshape(kiln_permute(x, perm), nk + 2, shape);
    if (!y)
        return NULL;
    kiln_tensor *partial = reduce_node(y, op, 1u << (nk + 1));
    kiln_tensor *flat = partial ? eng_reshape(partial, nk + 1, shape) : NULL;
    kiln_tensor *total = flat ? reduce_node(flat, op, 1u << nk) : NULL;
    return total ? eng_reshape(total, v->ndim, final) : NULL;
}

/* out = lead[0 .. nlead) followed by y's dims after its first (the kept dims of a reduction
 * whose reduced dim, y's first, is split into the lead dims). */
static void with_kept_dims(kiln_tensor *y, const sym_node *const *lead, uint32_t nlead,
                           const sym_node **out) {
    const shape_view *v = view_of(y);
    for (uint32_t d = 0; d < nlead; d++)
        out[d] = lead[d];
    for (uint32_t d = 1; d < v->ndim; d++)
        out[nlead + d - 1] = v->shape[d];
}

/* A column reduction (the kept dims' last one contiguous in memory, constant sizes) on a
 * device that tiles reductions over columns (CPUs: lower.c): the reduced dims moved first, as
 * (P, R / P, C) reduced over its middle dim, then over P. The first stage's tiles are runs of
 * contiguous columns (read as vectors) of one strip of rows, P chosen so that up to 32 x
 * parallelism outputs keep the device busy with strips of at least 256 rows (max over axis 0
 * of (4096, 4096) on lavapipe: 16 strips 7-9% faster than 8); the second combines P partials
 * per column. NULL: one stage is best (or, whole_only, the rows are no whole blocks). */
static kiln_tensor *strip_split(kiln_tensor *x, ir_op op, uint32_t mask, bool whole_only) {
    kiln_context *ctx = ENG_CTX(x);
    const shape_view *v = view_of(x);
    int64_t rows = 1, cols = 1, size, stride = 0;
    int32_t perm[SHAPE_MAX_DIMS];
    uint32_t n = 0;
    /* A sum over a symbolic number of rows (a batch Variable's) splits too: the rows padded
     * with zeros to P strips of ceil(rows / P), P chosen from the rows' largest value. */
    const sym_node *sym_rows = sym_const(ctx->sym, 1);
    bool symbolic = false;
    for (uint32_t d = 0; d < v->ndim; d++) {
        if (mask & (1u << d) && op == IR_ADD && !sym_is_const(v->shape[d], NULL)) {
            symbolic = true;
            sym_rows = sym_rows ? sym_mul(ctx->sym, sym_rows, v->shape[d]) : NULL;
            perm[n++] = (int32_t)d;
            continue;
        }
        if (!sym_is_const(v->shape[d], &size) ||
            !base_mul_i64(mask & (1u << d) ? rows : cols, size, mask & (1u << d) ? &rows : &cols))
            return NULL; /* symbolic, or too large for any device anyway */
        if (mask & (1u << d)) {
            sym_rows = sym_rows ? sym_mul_c(ctx->sym, sym_rows, size) : NULL;
            perm[n++] = (int32_t)d;
        } else {
            if (!sym_is_const(v->strides[d], &stride))
                stride = 0;
        }
    }
    for (uint32_t d = 0; d < v->ndim; d++) {
        if (!(mask & (1u << d)))
            perm[n++] = (int32_t)d;
    }
    int64_t want = 32 * (int64_t)ctx->parallelism;
    if (symbolic) {
        if (!sym_rows)
            return eng_fail_from_shape(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY);
        rows = sym_vmax(sym_rows);
    }
    if (ctx->tile_vector_cols < 4 || stride != 1 || rows < 1024 || cols % 4 != 0 || cols >= want)
        return NULL;
    int64_t p = 1;
    while ((symbolic || rows % (2 * p) == 0) && p * cols < want && rows / (2 * p) >= 256)
        p *= 2;
    if (p < 2)
        return NULL;
    const sym_node *shape[3] = {sym_const(ctx->sym, p), sym_const(ctx->sym, rows / p),
                                sym_const(ctx->sym, cols)};
    const sym_node *final[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < v->ndim; d++)
        final[d] = mask & (1u << d) ? sym_const(ctx->sym, 1) : v->shape[d];
    kiln_tensor *y = kiln_permute(x, perm);
    int64_t c = 0, q = 0;
    const sym_node *rest = NULL;
    if (symbolic && sym_node_kind(sym_rows) == SYM_MUL) {
        /* rows = rest x c: strips of whole c-blocks need no padding (no index arithmetic
         * beyond a reshape): P the largest divisor of c that keeps P x cols under want. */
        for (uint32_t i = 0; i < 2 && !rest; i++)
            if (sym_is_const(sym_node_src(sym_rows, i), &c) && c >= 2)
                rest = sym_node_src(sym_rows, 1 - i);
        for (int64_t d = c; rest && d >= 2 && !q; d--)
            if (c % d == 0 && d * cols < want)
                q = d;
    }
    if (whole_only && !q)
        return NULL;
    uint32_t reduced = 0;
    for (uint32_t d = 0; d < v->ndim; d++)
        reduced += (mask >> d) & 1u;
    if (q && reduced == 1 && v->ndim + 2 <= SHAPE_MAX_DIMS) {
        /* One reduced dim: split it alone, (rest, q, c / q), the kept dims as they are. A
         * split of one dim stays one view; merging the kept dims into one would not (the
         * rows come first after the permute), and its index arithmetic would divide by the
         * symbolic row count for every element. */
        const sym_node *blocks[SHAPE_MAX_DIMS], *strips[SHAPE_MAX_DIMS];
        const sym_node *lead[3] = {rest, sym_const(ctx->sym, q), sym_const(ctx->sym, c / q)};
        int32_t order[SHAPE_MAX_DIMS];
        with_kept_dims(y, lead, 3, blocks);
        with_kept_dims(y, lead + 1, 1, strips);
        for (uint32_t d = 0; d < v->ndim + 2; d++)
            order[d] = d < 2 ? 1 - (int32_t)d : (int32_t)d;
        y = eng_reshape(y, v->ndim + 2, blocks);
        y = y ? kiln_permute(y, order) : NULL;
        kiln_tensor *part = y ? reduce_node(y, op, (1u << 1) | (1u << 2)) : NULL;
        part = part ? eng_reshape(part, v->ndim, strips) : NULL;
        kiln_tensor *sum = part ? reduce_node(part, op, 1u << 0) : NULL;
        return sum ? eng_reshape(sum, v->ndim, final) : NULL;
    }
    if (q) {
        const sym_node *flat[2] = {sym_rows, sym_const(ctx->sym, cols)};
        const sym_node *blocks[4] = {rest, sym_const(ctx->sym, q), sym_const(ctx->sym, c / q),
                                     sym_const(ctx->sym, cols)};
        const sym_node *strips[2] = {sym_const(ctx->sym, q), sym_const(ctx->sym, cols)};
        y = y ? eng_reshape(y, 2, flat) : NULL;
        y = y ? eng_reshape(y, 4, blocks) : NULL;
        y = y ? kiln_permute(y, (const int32_t[]){1, 0, 2, 3}) : NULL;
        kiln_tensor *part = y ? reduce_node(y, op, (1u << 1) | (1u << 2)) : NULL;
        part = part ? eng_reshape(part, 2, strips) : NULL;
        kiln_tensor *sum = part ? reduce_node(part, op, 1u << 0) : NULL;
        return sum ? eng_reshape(sum, v->ndim, final) : NULL;
    }
    if (symbolic) {
        /* (rows, cols) padded with zero rows to P ceil(rows / P) */
        const sym_node *flat[2] = {sym_rows, sym_const(ctx->sym, cols)};
        y = y ? eng_reshape(y, 2, flat) : NULL;
        y = eng_pad_to_blocks(y, 0, p, &shape[1]);
    }
    if (!symbolic && reduced == 1 && v->ndim + 1 <= SHAPE_MAX_DIMS) {
        /* (P, R / P, kept dims...): the kept dims as they are, one view (as above) */
        const sym_node *strips[SHAPE_MAX_DIMS + 1];
        if (y)
            with_kept_dims(y, shape, 2, strips);
        y = y ? eng_reshape(y, v->ndim + 1, strips) : NULL;
    } else {
        y = y ? eng_reshape(y, 3, shape) : NULL;
    }
    kiln_tensor *total = reduce_node(reduce_node(y, op, 1u << 1), op, 1u << 0);
    return total ? eng_reshape(total, v->ndim, final) : NULL;
}

/* widen: sums and products of integers (bool included) accumulate in i64 and give i64, as
 * PyTorch's do (kiln_sum, kiln_prod); else (matmul, conv2d) those of small integers accumulate
 * in i32 and give i32, the others their own type. f16 accumulates in f32 and is rounded once
 * (as PyTorch does). */
static kiln_tensor *reduce(const char *name, ir_op op, kiln_tensor *t, uint32_t naxes,
                           const int32_t *axes, bool keepdim, bool widen) {
    uint32_t mask;
    if (!t || !axes_mask(t, name, naxes, axes, &mask))
        return NULL;
    ir_type type = type_of(t);
    ir_type acc = type == IR_F16                                        ? IR_F32
                  : widen && !ir_type_is_float(type)                    ? IR_I64
                  : (type == IR_BOOL || type == IR_I8 || type == IR_U8) ? IR_I32
                                                                        : type;
    if (op == IR_MAX || op == IR_MIN) {
        acc = type == IR_F16 ? IR_F32 : type;
        int64_t count;
        const sym_node *c = reduced_count(t, mask);
        if (c && sym_is_const(c, &count) && count == 0)
            return eng_fail(ENG_CTX(t), KILN_ERROR_INVALID_ARGUMENT,
                            "%s: the reduction is over 0 elements, which has no identity", name);
    }
    kiln_tensor *x = cast_to(t, acc);
    /* Over a symbolic count, strips first: whole blocks of the count's constant factor need
     * no padding, where split_reduce_sym pads (a second view, a division per element). */
    const sym_node *count = x ? reduced_count(x, mask) : NULL;
    kiln_tensor *r = count && !sym_is_const(count, NULL) ? strip_split(x, op, mask, true) : NULL;
    if (!r && x)
        r = split_reduce(x, op, mask);
    if (!r && x)
        r = strip_split(x, op, mask, false);
    if (!r)
        r = reduce_node(x, op, mask);
    if (type == IR_F16 || ((op == IR_MAX || op == IR_MIN) && acc != type))
        r = cast_to(r, type);
    return finish_keepdim(r, mask, keepdim);
}

kiln_tensor *eng_sum_unwidened(kiln_tensor *t, int32_t axis) {
    return reduce("kiln_sum", IR_ADD, t, 1, &axis, false, false);
}

static kiln_tensor *sum_impl(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim) {
    return reduce("kiln_sum", IR_ADD, t, naxes, axes, keepdim, true);
}

static kiln_tensor *prod_impl(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim) {
    return reduce("kiln_prod", IR_MUL, t, naxes, axes, keepdim, true);
}

static kiln_tensor *max_impl(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim) {
    return reduce("kiln_max", IR_MAX, t, naxes, axes, keepdim, false);
}

static kiln_tensor *min_impl(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim) {
    return reduce("kiln_min", IR_MIN, t, naxes, axes, keepdim, false);
}

/* The reduced element count as a 0-d float tensor computed in the kernel (symbolic sizes travel
 * as push constants: never evaluated on the host). */
kiln_tensor *eng_count_tensor(kiln_context *ctx, uint32_t ndim, const sym_node *const *shape,
                              uint32_t mask, ir_type type) {
    const sym_node *dims[SHAPE_MAX_DIMS];
    uint32_t n = 0;
    for (uint32_t d = 0; d < ndim; d++)
        if (mask & (1u << d))
            dims[n++] = shape[d];
    const sym_node *c = eng_numel(ctx, n, dims);
    return c ? eng_full(ctx, type, 0, NULL, 0.0, c) : NULL;
}

static kiln_tensor *count_tensor(kiln_tensor *t, uint32_t mask, ir_type type) {
    return eng_count_tensor(ENG_CTX(t), view_of(t)->ndim, view_of(t)->shape, mask, type);
}

/* x / 0 as IEEE division gives it (NaN for x = 0, +inf for x > 0; x >= 0 here), written as a
 * select: a device may fold a division by a constant 0 to anything (the emitted SPIR-V does not
 * declare SignedZeroInfNanPreserve; lavapipe folds it to 0). */
static kiln_tensor *div_by_zero(kiln_tensor *x) {
    kiln_context *ctx = ENG_CTX(x);
    kiln_tensor *zero = eng_full(ctx, IR_F32, 0, NULL, 0.0, NULL);
    return kiln_where(kiln_gt(x, zero), eng_full(ctx, IR_F32, 0, NULL, INFINITY, NULL),
                      eng_full(ctx, IR_F32, 0, NULL, NAN, NULL));
}

/* The reduced element count is a constant at most limit (a divisor known to be 0). */
static bool count_at_most(kiln_tensor *t, uint32_t mask, double limit) {
    int64_t n;
    const sym_node *c = reduced_count(t, mask);
    return c && sym_is_const(c, &n) && (double)n <= limit;
}

static kiln_tensor *mean_impl(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim) {
    uint32_t mask;
    if (!t || !axes_mask(t, "kiln_mean", naxes, axes, &mask))
        return NULL;
    if (!ir_type_is_float(type_of(t)))
        return eng_fail(ENG_CTX(t), KILN_ERROR_DTYPE_MISMATCH,
                        "kiln_mean: the input must be a float tensor (as PyTorch)");
    ir_type type = type_of(t);
    kiln_tensor *s = reduce("kiln_mean", IR_ADD, cast_to(t, IR_F32), naxes, axes, keepdim, false);
    if (s && count_at_most(t, mask, 0)) /* 0 / 0 */
        return cast_to(div_by_zero(s), type);
    return cast_to(kiln_div(s, count_tensor(t, mask, IR_F32)), type);
}

/* var in one kernel: the shifted-data algorithm, with the shift K the first element of each
 * reduced slice (a view, no extra pass): s1 = sum(x - K), s2 = sum((x - K)^2) share one range,
 * var = (s2 - s1^2 / n) / max(0, n - correction). */
static kiln_tensor *var_impl(kiln_tensor *t, uint32_t naxes, const int32_t *axes, double correction,
                             bool keepdim) {
    uint32_t mask;
    if (!t || !axes_mask(t, "kiln_var", naxes, axes, &mask))
        return NULL;
    if (!ir_type_is_float(type_of(t)))
        return eng_fail(ENG_CTX(t), KILN_ERROR_DTYPE_MISMATCH,
                        "kiln_var: the input must be a float tensor (as PyTorch)");
    kiln_context *ctx = ENG_CTX(t);
    ir_type type = type_of(t);
    kiln_tensor *x = cast_to(t, IR_F32);
    if (!x)
        return NULL;
    const shape_view *v = view_of(x);
    kiln_tensor *d = x;
    const sym_node *count = reduced_count(x, mask);
    if (count && sym_vmin(count) > 0) { /* shift only when no slice can be empty */
        const sym_node *full[SHAPE_MAX_DIMS];
        int64_t begin[SHAPE_MAX_DIMS] = {0};
        bool constant = true;
        int64_t end[SHAPE_MAX_DIMS];
        for (uint32_t i = 0; i < v->ndim; i++) {
            full[i] = v->shape[i];
            constant = constant && sym_is_const(v->shape[i], &end[i]);
            if (mask & (1u << i))
                end[i] = 1;
        }
        if (constant) {
            kiln_tensor *k = eng_expand(kiln_shrink(x, begin, end), v->ndim, full);
            d = kiln_sub(x, k);
        }
    }
    kiln_tensor *s1 = kiln_sum(d, naxes, axes, keepdim);
    kiln_tensor *s2 = kiln_sum(kiln_mul(d, d), naxes, axes, keepdim);
    kiln_tensor *n = count_tensor(x, mask, IR_F32);
    kiln_tensor *num = kiln_sub(s2, kiln_div(kiln_mul(s1, s1), n));
    if (num && count_at_most(x, mask, correction)) /* N - correction <= 0 */
        return cast_to(div_by_zero(kiln_maximum(num, eng_full(ctx, IR_F32, 0, NULL, 0.0, NULL))),
                       type);
    kiln_tensor *divisor =
        kiln_maximum(kiln_sub(n, eng_full(ctx, IR_F32, 0, NULL, correction, NULL)),
                     eng_full(ctx, IR_F32, 0, NULL, 0.0, NULL));
    return cast_to(kiln_div(num, divisor), type);
}

static kiln_tensor *std_impl(kiln_tensor *t, uint32_t naxes, const int32_t *axes, double correction,
                             bool keepdim) {
    return kiln_sqrt(kiln_var(t, naxes, axes, correction, keepdim));
}

static kiln_tensor *softmax_impl(kiln_tensor *t, int32_t dim) {
    uint32_t mask;
    if (!t || !axes_mask(t, "kiln_softmax", 1, &dim, &mask))
        return NULL;
    kiln_tensor *x = cast_to(t, float_of(type_of(t)));
    kiln_tensor *e = kiln_exp(kiln_sub(x, kiln_max(x, 1, &dim, true)));
    return kiln_div(e, kiln_sum(e, 1, &dim, true));
}

static kiln_tensor *log_softmax_impl(kiln_tensor *t, int32_t dim) {
    uint32_t mask;
    if (!t || !axes_mask(t, "kiln_log_softmax", 1, &dim, &mask))
        return NULL;
    kiln_tensor *x = cast_to(t, float_of(type_of(t)));
    kiln_tensor *shifted = kiln_sub(x, kiln_max(x, 1, &dim, true));
    return kiln_sub(shifted, kiln_log(kiln_sum(kiln_exp(shifted), 1, &dim, true)));
}

/* torch.matmul: (..., n, k) @ (..., k, m) as a broadcast multiply reduced over k; 1-d operands
 * gain a dim that the result drops again. */
static kiln_tensor *matmul_impl(kiln_tensor *a, kiln_tensor *b) {
    if (!a || !b)
        return NULL;
    kiln_context *ctx = ENG_CTX(a);
    uint32_t na = view_of(a)->ndim, nb = view_of(b)->ndim;
    if (na == 0 || nb == 0)
        return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                        "kiln_matmul: both operands need at least one dim (a has %u, b %u)", na,
                        nb);
    kiln_tensor *x = na == 1 ? kiln_unsqueeze(a, 0) : a;
    kiln_tensor *y = nb == 1 ? kiln_unsqueeze(b, 1) : b;
    if (!x || !y)
        return NULL;
    const shape_view *vx = view_of(x), *vy = view_of(y);
    const sym_node *ka = vx->shape[vx->ndim - 1], *kb = vy->shape[vy->ndim - 2];
    if (ka != kb) { /* the last dim of a, the second last of b (torch's names: a @ b) */
        char sa[128], sb[128], inner_a[64], inner_b[64];
        const shape_view *va = view_of(a), *vb = view_of(b);
        sym_render(ka, inner_a, sizeof inner_a);
        sym_render(kb, inner_b, sizeof inner_b);
        return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_matmul: a is %s, b is %s: %s != %s",
                        eng_shape_render(va->ndim, va->shape, sa, sizeof sa),
                        eng_shape_render(vb->ndim, vb->shape, sb, sizeof sb), inner_a, inner_b);
    }
    int32_t k_axis = -2;
    kiln_tensor *prod =
        kiln_mul(kiln_unsqueeze(widen_small(x), -1), kiln_unsqueeze(widen_small(y), -3));
    kiln_tensor *r = reduce("kiln_matmul", IR_ADD, prod, 1, &k_axis, false, false);
    if (r && na == 1)
        r = kiln_squeeze(r, -2);
    if (r && nb == 1)
        r = kiln_squeeze(r, -1);
    return r;
}

/* argmax over more elements than one loop may count (see ENG_REDUCE_MAX_COUNT): the maximum, then
 * the smallest index holding it, two reductions that split into stages like any other. A NaN
 * is the maximum (as torch.argmax): the maximum is NaN then, equal to nothing, and the NaNs
 * (x != x) are the candidates; bool + bool is or. A pool's (ENG_ARG_POOL) takes the largest
 * index of a NaN where there is one. */
static kiln_tensor *argmax_split(kiln_tensor *x, int32_t dim, bool keepdim, eng_arg_kind kind) {
    kiln_context *ctx = ENG_CTX(x);
    const shape_view *v = view_of(x);
    uint32_t d = (uint32_t)(dim < 0 ? dim + (int32_t)v->ndim : dim);
    const sym_node *len = v->shape[d];
    eng_node *n = eng_node_new(ctx, ENG_INDEX, IR_CONST, IR_I32, 1, &len);
    kiln_tensor *index =
        n ? eng_tensor_new(ctx, eng_node_intern(ctx, n), eng_tracker_contiguous(ctx, 1, &len))
          : NULL;
    for (uint32_t i = d + 1; i < v->ndim && index; i++)
        index = kiln_unsqueeze(index, -1);
    kiln_tensor *m = kiln_max(x, 1, &dim, true);
    kiln_tensor *big = eng_full(ctx, IR_I32, 0, NULL, (double)INT32_MAX, NULL);
    kiln_tensor *nan = kiln_ne(x, x);
    kiln_tensor *first =
        kiln_min(kiln_where(kiln_add(kiln_eq(x, m), nan), index, big), 1, &dim, keepdim);
    if (kind != ENG_ARG_POOL)
        return first;
    kiln_tensor *none = eng_full(ctx, IR_I32, 0, NULL, -1, NULL);
    kiln_tensor *last_nan = kiln_max(kiln_where(nan, index, none), 1, &dim, keepdim);
    return kiln_where(kiln_eq(last_nan, none), first, last_nan);
}

/* torch.argmax(dim): the first index of the maximum (NaN counts as the maximum), as i64 (as
 * PyTorch). One reduction that keeps the best value and its index (i32: it combines at most
 * ENG_REDUCE_MAX_COUNT elements) together, widened to i64 in the same kernel. */
static kiln_tensor *argmax_typed(kiln_tensor *t, int32_t dim, bool keepdim, ir_type out_type,
                                 eng_arg_kind kind) {
    uint32_t mask;
    if (!t || !axes_mask(t, "kiln_argmax", 1, &dim, &mask))
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    const sym_node *count = reduced_count(t, mask);
    int64_t n;
    if (count && sym_is_const(count, &n) && n == 0)
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                        "kiln_argmax: the dim is empty, which has no maximum");
    kiln_tensor *x = cast_to(t, type_of(t) == IR_F16 ? IR_F32 : type_of(t));
    if (!x)
        return NULL;
    if (count && sym_is_const(count, &n) && n > ENG_REDUCE_MAX_COUNT)
        return cast_to(argmax_split(x, dim, keepdim, kind), out_type);
    const shape_view *v = view_of(x);
    const sym_node *shape[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < v->ndim; d++)
        shape[d] = mask & (1u << d) ? sym_const(ctx->sym, 1) : v->shape[d];
    eng_node *r = eng_node_new(ctx, ENG_REDUCE, IR_MAX, IR_I32, v->ndim, shape);
    if (!r)
        return NULL;
    r->nsrc = 1;
    r->src[0] = (eng_src){eng_resolve(x), eng_tracker_keep(ctx, ENG_ST(x)), 0};
    r->reduce_mask = mask;
    r->arg = (uint8_t)kind;
    if (!r->src[0].st) {
        eng_node_discard(ctx, r);
        return NULL;
    }
    r = eng_node_intern(ctx, r);
    kiln_tensor *out =
        r ? eng_tensor_new(ctx, r, eng_tracker_contiguous(ctx, r->ndim, r->shape)) : NULL;
    return finish_keepdim(cast_to(out, out_type), mask, keepdim);
}

static kiln_tensor *argmax_impl(kiln_tensor *t, int32_t dim, bool keepdim) {
    return argmax_typed(t, dim, keepdim, IR_I64, ENG_ARG_FIRST);
}

kiln_tensor *eng_pool_argmax(kiln_tensor *t) {
    return argmax_typed(t, -1, true, IR_I32, ENG_ARG_POOL);
}

/* torch.nn.functional.conv2d without bias or groups: x (N, C, H, W), w (O, C, KH, KW) ->
 * (N, O, OH, OW), from movement ops (pad, unfold, permute) and one reduction. */
static kiln_tensor *conv2d_impl(kiln_tensor *x, kiln_tensor *w, int64_t stride, int64_t padding) {
    if (!x || !w)
        return NULL;
    kiln_context *ctx = ENG_CTX(x);
    if (view_of(x)->ndim != 4 || view_of(w)->ndim != 4 || stride < 1 || padding < 0)
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                        "kiln_conv2d: x (N, C, H, W), w (O, C, KH, KW), stride >= 1, padding >= 0");
    if (view_of(x)->shape[1] != view_of(w)->shape[1]) {
        char sx[128], sw[128];
        return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                        "kiln_conv2d: x is %s, w is %s: they differ in their channel count",
                        eng_shape_render(4, view_of(x)->shape, sx, sizeof sx),
                        eng_shape_render(4, view_of(w)->shape, sw, sizeof sw));
    }
    int64_t kh, kw;
    if (!sym_is_const(view_of(w)->shape[2], &kh) || !sym_is_const(view_of(w)->shape[3], &kw))
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                        "kiln_conv2d: kernel sizes must be constant");
    if (ir_type_is_float(type_of(x)) && ir_type_is_float(type_of(w))) /* im2col (nn.c) */
        return kiln_conv2d_ex(
            x, w, NULL,
            &(kiln_conv2d_options){.stride = {stride, stride}, .padding = {padding, padding}});
    int64_t pad[8] = {0, 0, 0, 0, padding, padding, padding, padding};
    kiln_tensor *p = x;
    if (padding) {
        /* shape/ cannot unfold a padded dim: the padded input becomes an identity node (read
         * lazily, like a non-view reshape) whose own unmasked view unfold can take. */
        p = eng_identity(kiln_pad(x, pad));
    }
    /* (N, C, OH, OW, KH, KW) windows, then (N, 1, C, OH, OW, KH, KW). */
    kiln_tensor *win = kiln_unfold(kiln_unfold(p, 2, kh, stride), 3, kw, stride);
    win = kiln_unsqueeze(win, 1);
    /* w as (1, O, C, 1, 1, KH, KW). */
    kiln_tensor *wk = kiln_unsqueeze(kiln_unsqueeze(kiln_unsqueeze(w, 0), 3), 3);
    int32_t axes[3] = {2, 5, 6};
    kiln_tensor *prod = kiln_mul(widen_small(win), widen_small(wk));
    /* Floats through kiln_sum (recorded for autograd); integers accumulate in i32 as before. */
    if (prod && ir_type_is_float(type_of(prod)))
        return kiln_sum(prod, 3, axes, false);
    return reduce("kiln_conv2d", IR_ADD, prod, 3, axes, false, false);
}

/* A node of its own (never hash-consed) copying t, that kernels reading it load rather than
 * recompute. */
static kiln_tensor *contiguous_impl(kiln_tensor *t) {
    if (!t)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    const shape_view *v = view_of(t);
    eng_node *n = eng_node_new(ctx, ENG_EW, IR_CAST, type_of(t), v->ndim, v->shape);
    if (!n)
        return NULL;
    n->nsrc = 1;
    n->src[0] = (eng_src){eng_resolve(t), eng_tracker_keep(ctx, ENG_ST(t)), 0};
    if (!n->src[0].st) {
        eng_node_discard(ctx, n);
        return NULL;
    }
    n->boundary = true;
    n = eng_node_adopt(ctx, n);
    return eng_tensor_new(ctx, n, eng_tracker_contiguous(ctx, n->ndim, n->shape));
}

kiln_tensor *kiln_contiguous(kiln_tensor *t) {
    ENG_OP("kiln_contiguous", ENG_AG(.op = ENG_AG_IDENTITY), contiguous_impl(t), t);
}

static kiln_tensor *identity_impl(kiln_tensor *t) {
    return t ? eng_elementwise(ENG_CTX(t), IR_CAST, type_of(t), 1, &t) : NULL;
}

kiln_tensor *eng_identity(kiln_tensor *t) {
    ENG_OP("kiln_identity", ENG_AG(.op = ENG_AG_IDENTITY), identity_impl(t), t);
}

/* ---- the public entry points: checked handles, intermediates released ---------------- */

kiln_tensor *kiln_cast(kiln_tensor *t, kiln_dtype dtype) {
    ENG_OP("kiln_cast", ENG_AG(.op = ENG_AG_CAST), cast_impl(t, dtype), t);
}

kiln_tensor *kiln_add(kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_add", ENG_AG(.op = ENG_AG_ADD), add_impl(a, b), a, b);
}

kiln_tensor *kiln_sub(kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_sub", ENG_AG(.op = ENG_AG_SUB), sub_impl(a, b), a, b);
}

kiln_tensor *kiln_mul(kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_mul", ENG_AG(.op = ENG_AG_MUL), mul_impl(a, b), a, b);
}

kiln_tensor *kiln_div(kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_div", ENG_AG(.op = ENG_AG_DIV), div_impl(a, b), a, b);
}

kiln_tensor *kiln_pow(kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_pow", ENG_AG(.op = ENG_AG_POW), pow_impl(a, b), a, b);
}

kiln_tensor *kiln_maximum(kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_maximum", ENG_AG(.op = ENG_AG_MAXIMUM), maximum_impl(a, b), a, b);
}

kiln_tensor *kiln_minimum(kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_minimum", ENG_AG(.op = ENG_AG_MINIMUM), minimum_impl(a, b), a, b);
}

kiln_tensor *kiln_lt(kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_lt", ENG_AG(.op = ENG_AG_NONE), lt_impl(a, b), a, b);
}

kiln_tensor *kiln_le(kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_le", ENG_AG(.op = ENG_AG_NONE), le_impl(a, b), a, b);
}

kiln_tensor *kiln_gt(kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_gt", ENG_AG(.op = ENG_AG_NONE), gt_impl(a, b), a, b);
}

kiln_tensor *kiln_ge(kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_ge", ENG_AG(.op = ENG_AG_NONE), ge_impl(a, b), a, b);
}

kiln_tensor *kiln_eq(kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_eq", ENG_AG(.op = ENG_AG_NONE), eq_impl(a, b), a, b);
}

kiln_tensor *kiln_ne(kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_ne", ENG_AG(.op = ENG_AG_NONE), ne_impl(a, b), a, b);
}

kiln_tensor *kiln_where(kiln_tensor *cond, kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_where", ENG_AG(.op = ENG_AG_WHERE), where_impl(cond, a, b), cond, a, b);
}

kiln_tensor *kiln_neg(kiln_tensor *t) {
    ENG_OP("kiln_neg", ENG_AG(.op = ENG_AG_NEG), neg_impl(t), t);
}

kiln_tensor *kiln_abs(kiln_tensor *t) {
    ENG_OP("kiln_abs", ENG_AG(.op = ENG_AG_ABS), abs_impl(t), t);
}

kiln_tensor *kiln_exp(kiln_tensor *t) {
    ENG_OP("kiln_exp", ENG_AG(.op = ENG_AG_EXP), exp_impl(t), t);
}

kiln_tensor *kiln_log(kiln_tensor *t) {
    ENG_OP("kiln_log", ENG_AG(.op = ENG_AG_LOG), log_impl(t), t);
}

kiln_tensor *kiln_sqrt(kiln_tensor *t) {
    ENG_OP("kiln_sqrt", ENG_AG(.op = ENG_AG_SQRT), sqrt_impl(t), t);
}

kiln_tensor *kiln_rsqrt(kiln_tensor *t) {
    ENG_OP("kiln_rsqrt", ENG_AG(.op = ENG_AG_RSQRT), rsqrt_impl(t), t);
}

kiln_tensor *kiln_sin(kiln_tensor *t) {
    ENG_OP("kiln_sin", ENG_AG(.op = ENG_AG_SIN), sin_impl(t), t);
}

kiln_tensor *kiln_cos(kiln_tensor *t) {
    ENG_OP("kiln_cos", ENG_AG(.op = ENG_AG_COS), cos_impl(t), t);
}

kiln_tensor *kiln_tanh(kiln_tensor *t) {
    ENG_OP("kiln_tanh", ENG_AG(.op = ENG_AG_TANH), tanh_impl(t), t);
}

kiln_tensor *kiln_add_scalar(kiln_tensor *t, double value) {
    ENG_OP("kiln_add_scalar", ENG_AG(.op = ENG_AG_ADD_SCALAR), add_scalar_impl(t, value), t);
}

kiln_tensor *kiln_mul_scalar(kiln_tensor *t, double value) {
    ENG_OP("kiln_mul_scalar", ENG_AG(.op = ENG_AG_MUL_SCALAR, .value = value),
           mul_scalar_impl(t, value), t);
}

kiln_tensor *kiln_relu(kiln_tensor *t) {
    ENG_OP("kiln_relu", ENG_AG(.op = ENG_AG_RELU), relu_impl(t), t);
}

kiln_tensor *kiln_sigmoid(kiln_tensor *t) {
    ENG_OP("kiln_sigmoid", ENG_AG(.op = ENG_AG_SIGMOID), sigmoid_impl(t), t);
}

kiln_tensor *kiln_dropout(kiln_tensor *t, double p, uint64_t seed) {
    ENG_ENTRY("kiln_dropout", dropout_impl(t, p, seed), t);
}

kiln_tensor *kiln_sum(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim) {
    ENG_OP("kiln_sum", ENG_AG(.op = ENG_AG_SUM, .dims = axes, .ndims = axes ? naxes : 0),
           sum_impl(t, naxes, axes, keepdim), t);
}

kiln_tensor *kiln_prod(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim) {
    ENG_OP("kiln_prod", ENG_AG(.op = ENG_AG_PROD, .dims = axes, .ndims = axes ? naxes : 0),
           prod_impl(t, naxes, axes, keepdim), t);
}

kiln_tensor *kiln_max(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim) {
    ENG_OP("kiln_max", ENG_AG(.op = ENG_AG_MAX, .dims = axes, .ndims = axes ? naxes : 0),
           max_impl(t, naxes, axes, keepdim), t);
}

kiln_tensor *eng_max_first(const char *call, kiln_tensor *t) {
    static const int32_t last[1] = {-1};
    ENG_OP(call, ENG_AG(.op = ENG_AG_MAX_FIRST, .dims = last, .ndims = 1),
           max_impl(t, 1, last, false), t);
}

kiln_tensor *kiln_min(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim) {
    ENG_OP("kiln_min", ENG_AG(.op = ENG_AG_MIN, .dims = axes, .ndims = axes ? naxes : 0),
           min_impl(t, naxes, axes, keepdim), t);
}

kiln_tensor *kiln_mean(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim) {
    ENG_OP("kiln_mean", ENG_AG(.op = ENG_AG_MEAN, .dims = axes, .ndims = axes ? naxes : 0),
           mean_impl(t, naxes, axes, keepdim), t);
}

/* torch.index_select: a gather node (ENG_GATHER) of t read through its view and index (1-d;
 * a 0-d index as one of size 1), whose dim takes index's size. Nothing is checked here: the
 * index's values are known when the kernel runs, which masks and flags one out of range. */
static kiln_tensor *index_select_impl(kiln_tensor *t, int32_t dim, kiln_tensor *index) {
    if (!t || !index)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    ir_type it = type_of(index);
    if (it != IR_I32 && it != IR_I64)
        return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH,
                        "kiln_index_select: index is %s: it must be i32 or i64", ir_type_name(it));
    if (view_of(index)->ndim == 0)
        index = kiln_unsqueeze(index, 0);
    if (!index)
        return NULL;
    const shape_view *iv = view_of(index), *v = view_of(t);
    if (iv->ndim != 1)
        return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                        "kiln_index_select: index has %u dims: it must have one", iv->ndim);
    int32_t nd = (int32_t)v->ndim;
    if (nd == 0 || dim < -nd || dim >= nd)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE,
                        "kiln_index_select: dim %d is out of range for %d dims", dim, nd);
    uint32_t d = (uint32_t)(dim < 0 ? dim + nd : dim);
    const sym_node *shape[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < v->ndim; i++)
        shape[i] = i == d ? iv->shape[0] : v->shape[i];
    eng_node *n = eng_node_new(ctx, ENG_GATHER, IR_CONST, type_of(t), v->ndim, shape);
    if (!n)
        return NULL;
    n->dim = d;
    n->nsrc = 2;
    n->src[0] = (eng_src){eng_resolve(t), eng_tracker_keep(ctx, ENG_ST(t)), 0};
    n->src[1] = (eng_src){eng_resolve(index), eng_tracker_keep(ctx, ENG_ST(index)), 0};
    if (!n->src[0].st || !n->src[1].st) {
        eng_node_discard(ctx, n);
        return NULL;
    }
    n = eng_node_intern(ctx, n);
    return n ? eng_tensor_new(ctx, n, eng_tracker_contiguous(ctx, n->ndim, n->shape)) : NULL;
}

kiln_tensor *kiln_var(kiln_tensor *t, uint32_t naxes, const int32_t *axes, double correction,
                      bool keepdim) {
    ENG_OP("kiln_var",
           ENG_AG(.op = ENG_AG_VAR, .dims = axes, .ndims = axes ? naxes : 0, .value = correction),
           var_impl(t, naxes, axes, correction, keepdim), t);
}

kiln_tensor *kiln_std(kiln_tensor *t, uint32_t naxes, const int32_t *axes, double correction,
                      bool keepdim) {
    ENG_OP("kiln_std",
           ENG_AG(.op = ENG_AG_STD, .dims = axes, .ndims = axes ? naxes : 0, .value = correction),
           std_impl(t, naxes, axes, correction, keepdim), t);
}

kiln_tensor *kiln_softmax(kiln_tensor *t, int32_t dim) {
    ENG_OP("kiln_softmax", ENG_AG(.op = ENG_AG_SOFTMAX, .ints = (int64_t[]){dim}, .nints = 1),
           softmax_impl(t, dim), t);
}

kiln_tensor *kiln_log_softmax(kiln_tensor *t, int32_t dim) {
    ENG_OP("kiln_log_softmax",
           ENG_AG(.op = ENG_AG_LOG_SOFTMAX, .ints = (int64_t[]){dim}, .nints = 1),
           log_softmax_impl(t, dim), t);
}

kiln_tensor *kiln_matmul(kiln_tensor *a, kiln_tensor *b) {
    ENG_OP("kiln_matmul", ENG_AG(.op = ENG_AG_MATMUL), matmul_impl(a, b), a, b);
}

kiln_tensor *kiln_argmax(kiln_tensor *t, int32_t dim, bool keepdim) {
    ENG_OP("kiln_argmax", ENG_AG(.op = ENG_AG_NONE), argmax_impl(t, dim, keepdim), t);
}

kiln_tensor *kiln_conv2d(kiln_tensor *x, kiln_tensor *w, int64_t stride, int64_t padding) {
    ENG_ENTRY("kiln_conv2d", conv2d_impl(x, w, stride, padding), x, w);
}

kiln_tensor *kiln_index_select(kiln_tensor *t, int32_t dim, kiln_tensor *index) {
    ENG_OP("kiln_index_select",
           ENG_AG(.op = ENG_AG_INDEX_SELECT, .ints = (int64_t[]){dim}, .nints = 1),
           index_select_impl(t, dim, index), t, index);
}
