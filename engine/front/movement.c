/* Movement ops on tensors: each maps the tensor's last view through shape/ and returns a new
 * tensor over the same node. No data moves; the input tensor is never changed. */
#include "eng.h"

#include <string.h>

/* The tensor over t's node whose tracker is t's with its last view replaced by v. */
/* A copy of t's tracker (its views in use only). */
static void tracker_of(kiln_tensor *t, shape_tracker *st) {
    memcpy(st, ENG_ST(t), offsetof(shape_tracker, views) + ENG_ST(t)->nviews * sizeof(shape_view));
}

static kiln_tensor *with_last_view(kiln_tensor *t, const shape_view *v) {
    shape_tracker st;
    tracker_of(t, &st);
    st.views[st.nviews - 1] = *v;
    return eng_view_new(ENG_CTX(t), t, eng_tracker_keep(ENG_CTX(t), &st));
}

static const shape_view *view_of(kiln_tensor *t) {
    return shape_tracker_last(ENG_ST(t));
}

/* Wraps one shape_view_* call: NULL tensor in, NULL out; a failure recorded in the context. */
#define VIEW_OP(t, call)                                                                           \
    do {                                                                                           \
        if (!(t))                                                                                  \
            return NULL;                                                                           \
        shape_view out_;                                                                           \
        kiln_status st_ = (call);                                                                  \
        if (st_ != KILN_OK)                                                                        \
            return eng_fail_from_shape(ENG_CTX(t), st_);                                           \
        return with_last_view((t), &out_);                                                         \
    } while (0)

/* dim of a tensor of ndim dims, counted from the end when negative; false (and an error
 * naming call) when there is no such dim. */
static bool dim_index(kiln_context *ctx, const char *call, int32_t dim, uint32_t ndim,
                      uint32_t *out) {
    int64_t d = dim < 0 ? (int64_t)dim + ndim : dim;
    if (d < 0 || d >= (int64_t)ndim)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE, "%s: dim %d is out of range for %u dims",
                        call, dim, ndim) != NULL;
    *out = (uint32_t)d;
    return true;
}

static kiln_tensor *permute_impl(kiln_tensor *t, const int32_t *dims) {
    if (!t)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    uint32_t ndim = view_of(t)->ndim, seen = 0;
    if (!dims && ndim)
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_permute: no dims");
    for (uint32_t i = 0; i < ndim; i++) {
        uint32_t d = 0;
        if (!dim_index(ctx, "kiln_permute", dims[i], ndim, &d))
            return NULL;
        if (seen & (1u << d))
            return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                            "kiln_permute: dim %u appears twice (as %d at position %u)", d, dims[i],
                            i);
        seen |= 1u << d;
    }
    VIEW_OP(t, shape_view_permute(ctx->shape, view_of(t), dims, &out_));
}

static kiln_tensor *transpose_impl(kiln_tensor *t, int32_t dim0, int32_t dim1) {
    if (!t)
        return NULL;
    int32_t n = (int32_t)view_of(t)->ndim;
    int32_t a = dim0 < 0 ? dim0 + n : dim0, b = dim1 < 0 ? dim1 + n : dim1;
    if (a < 0 || a >= n || b < 0 || b >= n)
        return eng_fail(ENG_CTX(t), KILN_ERROR_OUT_OF_RANGE,
                        "kiln_transpose: dims %d and %d out of range for %d dims", dim0, dim1, n);
    int32_t perm[SHAPE_MAX_DIMS];
    for (int32_t d = 0; d < n; d++)
        perm[d] = d;
    perm[a] = b;
    perm[b] = a;
    return kiln_permute(t, perm);
}

/* dims: nodes the program holds (ndim <= SHAPE_MAX_DIMS, none negative). */
static kiln_tensor *expand_nodes_impl(kiln_tensor *t, uint32_t ndim, const sym_node *const *dims) {
    if (!t)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    for (uint32_t d = 0; d < ndim; d++) {
        if (!dims[d]) /* a constant that could not be made */
            return eng_fail_from_shape(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY);
    }
    /* torch.expand may add leading dims: unsqueeze first. */
    uint32_t have = view_of(t)->ndim;
    if (ndim < have)
        return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                        "kiln_expand: %u sizes for a tensor of %u dims", ndim, have);
    kiln_tensor *u = t;
    for (uint32_t i = have; i < ndim && u; i++)
        u = kiln_unsqueeze(u, 0);
    VIEW_OP(u, shape_view_expand(ctx->shape, view_of(u), dims, &out_));
}

static kiln_tensor *expand_sym_impl(kiln_tensor *t, uint32_t ndim, const kiln_expr *const *shape) {
    if (!t)
        return NULL;
    const sym_node *dims[SHAPE_MAX_DIMS];
    if (!eng_shape_from_exprs(ENG_CTX(t), "kiln_expand", ndim, shape, dims))
        return NULL;
    return expand_nodes_impl(t, ndim, dims);
}

static kiln_tensor *expand_impl(kiln_tensor *t, uint32_t ndim, const int64_t *shape) {
    if (!t)
        return NULL;
    const sym_node *dims[SHAPE_MAX_DIMS];
    uint32_t have = view_of(t)->ndim;
    if (ndim && !shape)
        return eng_fail(ENG_CTX(t), KILN_ERROR_INVALID_ARGUMENT, "kiln_expand: no shape");
    if (ndim > SHAPE_MAX_DIMS)
        return eng_fail(ENG_CTX(t), KILN_ERROR_LIMIT_EXCEEDED, "kiln_expand: %u sizes (at most %d)",
                        ndim, (int)SHAPE_MAX_DIMS);
    if (ndim < have)
        return eng_fail(ENG_CTX(t), KILN_ERROR_SHAPE_MISMATCH,
                        "kiln_expand: %u sizes for a tensor of %u dims", ndim, have);
    for (uint32_t d = 0; d < ndim; d++) {
        uint32_t lead = ndim - have;
        if (shape[d] == -1 && d >= lead) /* -1 keeps the size */
            dims[d] = view_of(t)->shape[d - lead];
        else if (shape[d] < 0)
            return eng_fail(ENG_CTX(t), KILN_ERROR_OUT_OF_RANGE,
                            "kiln_expand: size %lld of dim %u is negative (only -1 keeps a size)",
                            (long long)shape[d], d);
        else
            dims[d] = sym_const(ENG_CTX(t)->sym, shape[d]);
    }
    return eng_expand(t, ndim, dims);
}

static kiln_tensor *pad_impl(kiln_tensor *t, const int64_t *pad) {
    if (!t)
        return NULL;
    const shape_view *v = view_of(t);
    if (!pad && v->ndim)
        return eng_fail(ENG_CTX(t), KILN_ERROR_INVALID_ARGUMENT, "kiln_pad: no padding");
    const sym_node *before[SHAPE_MAX_DIMS], *after[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < v->ndim; d++) {
        if (pad[2 * d] < 0 || pad[2 * d + 1] < 0)
            return eng_fail(ENG_CTX(t), KILN_ERROR_OUT_OF_RANGE,
                            "kiln_pad: negative padding (%lld, %lld) on dim %u (use kiln_shrink)",
                            (long long)pad[2 * d], (long long)pad[2 * d + 1], d);
        before[d] = sym_const(ENG_CTX(t)->sym, pad[2 * d]);
        after[d] = sym_const(ENG_CTX(t)->sym, pad[2 * d + 1]);
    }
    VIEW_OP(t, shape_view_pad(ENG_CTX(t)->shape, v, before, after, &out_));
}

static kiln_tensor *shrink_impl(kiln_tensor *t, const int64_t *begin, const int64_t *end) {
    if (!t)
        return NULL;
    const shape_view *v = view_of(t);
    if ((!begin || !end) && v->ndim)
        return eng_fail(ENG_CTX(t), KILN_ERROR_INVALID_ARGUMENT, "kiln_shrink: no bounds");
    const sym_node *b[SHAPE_MAX_DIMS], *e[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < v->ndim; d++) {
        b[d] = sym_const(ENG_CTX(t)->sym, begin[d]);
        e[d] = sym_const(ENG_CTX(t)->sym, end[d]);
    }
    VIEW_OP(t, shape_view_shrink(ENG_CTX(t)->shape, v, b, e, &out_));
}

static kiln_tensor *flip_impl(kiln_tensor *t, int32_t dim) {
    VIEW_OP(t, shape_view_flip(ENG_CTX(t)->shape, view_of(t), dim, &out_));
}

static kiln_tensor *slice_impl(kiln_tensor *t, int32_t dim, int64_t start, int64_t stop,
                               int64_t step) {
    shape_slice s = {.start = start,
                     .stop = stop,
                     .step = step,
                     .has_start = start != INT64_MIN && start != INT64_MAX,
                     .has_stop = stop != INT64_MIN && stop != INT64_MAX};
    VIEW_OP(t, shape_view_slice(ENG_CTX(t)->shape, view_of(t), dim, &s, &out_));
}

static kiln_tensor *unsqueeze_impl(kiln_tensor *t, int32_t dim) {
    VIEW_OP(t, shape_view_unsqueeze(ENG_CTX(t)->shape, view_of(t), dim, &out_));
}

static kiln_tensor *squeeze_impl(kiln_tensor *t, int32_t dim) {
    VIEW_OP(t, shape_view_squeeze(ENG_CTX(t)->shape, view_of(t), dim, &out_));
}

/* torch.narrow: length elements of dim from start (a negative start counts from the end). A
 * refusal names the call and the values in the caller's terms. */
static kiln_tensor *narrow_view(kiln_tensor *t, int32_t dim, const sym_node *start,
                                const sym_node *length) {
    kiln_context *ctx = ENG_CTX(t);
    const shape_view *v = view_of(t);
    uint32_t d = 0;
    if (!dim_index(ctx, "kiln_narrow", dim, v->ndim, &d))
        return NULL;
    shape_view out;
    kiln_status st = shape_view_narrow(ctx->shape, v, dim, start, length, &out);
    if (st == KILN_OK)
        return with_last_view(t, &out);
    if (sym_ctx_status(ctx->sym) != KILN_OK || st != KILN_ERROR_OUT_OF_BOUNDS)
        return eng_fail_from_shape(ctx, st);
    char s[64], l[64], n[64];
    sym_render(start, s, sizeof s);
    sym_render(length, l, sizeof l);
    sym_render(v->shape[d], n, sizeof n);
    return eng_fail(ctx, st,
                    "kiln_narrow: start %s, length %s do not fit dim %u of size %s (needs "
                    "-size <= start <= size, length >= 0 and start + length <= size)",
                    s, l, d, n);
}

static kiln_tensor *narrow_impl(kiln_tensor *t, int32_t dim, int64_t start, int64_t length) {
    if (!t)
        return NULL;
    return narrow_view(t, dim, sym_const(ENG_CTX(t)->sym, start),
                       sym_const(ENG_CTX(t)->sym, length));
}

static kiln_tensor *select_impl(kiln_tensor *t, int32_t dim, int64_t index) {
    VIEW_OP(t, shape_view_select(ENG_CTX(t)->shape, view_of(t), dim,
                                 sym_const(ENG_CTX(t)->sym, index), &out_));
}

static kiln_tensor *diagonal_impl(kiln_tensor *t, int64_t offset, int32_t dim1, int32_t dim2) {
    VIEW_OP(t, shape_view_diagonal(ENG_CTX(t)->shape, view_of(t), offset, dim1, dim2, &out_));
}

/* Whether step * stride fits int64 for every value the stride may take. */
static bool step_fits(const sym_node *stride, int64_t step) {
    int64_t p;
    return base_mul_i64(sym_vmin(stride), step, &p) && base_mul_i64(sym_vmax(stride), step, &p);
}

/* unfold over a padded dim: one view cannot say which window elements are padding (that
 * depends on the window and the position in it, a mask no box of per-dim ranges holds), so the
 * windows are a second view over the padded view's logical index, whose mask still decides
 * (the tracker's views compose: shape.h). Nothing is copied. */
static kiln_tensor *unfold_impl(kiln_tensor *t, int32_t dim, int64_t size, int64_t step);

static kiln_tensor *unfold_padded(kiln_tensor *t, uint32_t d, int64_t size, int64_t step) {
    kiln_context *ctx = ENG_CTX(t);
    const shape_tracker *in = ENG_ST(t);
    if (in->nviews >= SHAPE_MAX_VIEWS) /* no room for one more: a node of its own instead */
        return unfold_impl(eng_identity(t), (int32_t)d, size, step);
    const shape_view *v = shape_tracker_last(in);
    shape_tracker st;
    tracker_of(t, &st);
    shape_view plain;
    kiln_status s = shape_view_contiguous(ctx->shape, v->ndim, v->shape, &plain);
    if (s == KILN_OK)
        s = shape_view_unfold(ctx->shape, &plain, (int32_t)d, sym_const(ctx->sym, size),
                              sym_const(ctx->sym, step), &st.views[st.nviews]);
    if (s != KILN_OK)
        return eng_fail_from_shape(ctx, s);
    st.nviews++;
    return eng_view_new(ctx, t, eng_tracker_keep(ctx, &st));
}

/* torch.unfold: windows of size elements, step apart, along dim. Any step >= 1 is accepted as
 * long as the windows' stride (step times the dim's) is an int64: with one window it is never
 * used (a step past the end is torch's way of asking for one window). */
static kiln_tensor *unfold_impl(kiln_tensor *t, int32_t dim, int64_t size, int64_t step) {
    if (!t)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    const shape_view *v = view_of(t);
    uint32_t d = 0;
    if (!dim_index(ctx, "kiln_unfold", dim, v->ndim, &d))
        return NULL;
    int64_t n;
    if (size < 0 || step < 1 || (sym_is_const(v->shape[d], &n) && size > n)) {
        char len[64];
        sym_render(v->shape[d], len, sizeof len);
        return eng_fail(ctx,
                        size < 0 || step < 1 ? KILN_ERROR_OUT_OF_RANGE : KILN_ERROR_OUT_OF_BOUNDS,
                        "kiln_unfold: size %lld, step %lld on dim %u of size %s (needs 0 <= size "
                        "<= the dim's size and step >= 1)",
                        (long long)size, (long long)step, d, len);
    }
    if (!step_fits(v->strides[d], step) || !step_fits(v->user_strides[d], step))
        return eng_fail(ctx, KILN_ERROR_OVERFLOW,
                        "kiln_unfold: step %lld on dim %u: the windows' stride (step times the "
                        "dim's stride, %lld) overflows int64",
                        (long long)step, d, (long long)sym_vmax(v->user_strides[d]));
    if (v->masked &&
        !(sym_is_const(v->mask_begin[d], &n) && n == 0 && v->mask_end[d] == v->shape[d]))
        return unfold_padded(t, d, size, step);
    VIEW_OP(t, shape_view_unfold(ctx->shape, v, dim, sym_const(ctx->sym, size),
                                 sym_const(ctx->sym, step), &out_));
}

/* dims: nodes the program holds (ndim <= SHAPE_MAX_DIMS, none negative). */
static kiln_tensor *reshape_nodes_impl(kiln_tensor *t, uint32_t ndim, const sym_node *const *dims) {
    if (!t)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    for (uint32_t d = 0; d < ndim; d++) {
        if (!dims[d]) /* a constant that could not be made */
            return eng_fail_from_shape(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY);
    }
    /* Trackers are kept compact (only their views); shape/ takes whole values. */
    shape_tracker in, out;
    memcpy(&in, ENG_ST(t), offsetof(shape_tracker, views) + ENG_ST(t)->nviews * sizeof(shape_view));
    kiln_status st = shape_tracker_reshape(ctx->shape, &in, ndim, dims, &out);
    if (st != KILN_OK)
        return eng_fail_from_shape(ctx, st);
    kiln_tensor *r = eng_view_new(ctx, t, eng_tracker_keep(ctx, &out));
    /* torch.reshape is a view exactly when torch.view would succeed; otherwise it is a new
     * tensor that does not alias its input. That one is an identity node over the (possibly
     * two-view) reshape: still read lazily and fused into its consumers, never a copy kernel
     * of its own, but writes to it do not reach the input's storage. */
    bool view =
        ENG_ST(t)->nviews == 1 &&
        shape_view_torch_can_view(ctx->shape, shape_tracker_last(ENG_ST(t)), ndim, dims, NULL);
    if (!r || view)
        return r;
    return eng_elementwise(ctx, IR_CAST, ENG_BASE(r)->type, 1, &r);
}

static kiln_tensor *reshape_sym_impl(kiln_tensor *t, uint32_t ndim, const kiln_expr *const *shape) {
    if (!t)
        return NULL;
    const sym_node *dims[SHAPE_MAX_DIMS];
    if (!eng_shape_from_exprs(ENG_CTX(t), "kiln_reshape", ndim, shape, dims))
        return NULL;
    return reshape_nodes_impl(t, ndim, dims);
}

static kiln_tensor *reshape_impl(kiln_tensor *t, uint32_t ndim, const int64_t *shape) {
    if (!t)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    if (ndim > SHAPE_MAX_DIMS || (ndim && !shape))
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_reshape: bad shape");
    /* One -1 is inferred from the element count, which must then be known. */
    int infer = -1;
    int64_t known = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] == -1 && infer < 0)
            infer = (int)d;
        else if (shape[d] < 0)
            return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE,
                            "kiln_reshape: size %lld of dim %u is negative (only one -1 is "
                            "inferred)",
                            (long long)shape[d], d);
        else if (!base_mul_i64(known, shape[d], &known))
            return eng_fail(ctx, KILN_ERROR_OVERFLOW, "kiln_reshape: sizes overflow");
    }
    const sym_node *dims[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < ndim; d++)
        dims[d] = sym_const(ctx->sym, shape[d] < 0 ? 0 : shape[d]);
    if (infer >= 0) {
        const sym_node *numel = shape_view_numel(ctx->shape, view_of(t));
        int64_t n;
        if (!numel || !sym_is_const(numel, &n))
            return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                            "kiln_reshape: -1 needs a constant element count (use "
                            "kiln_reshape_sym)");
        if (known == 0 || n % known != 0)
            return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                            "kiln_reshape: %lld elements cannot be reshaped to %lld times -1",
                            (long long)n, (long long)known);
        dims[infer] = sym_const(ctx->sym, n / known);
    }
    return eng_reshape(t, ndim, dims);
}

static kiln_tensor *shrink_sym_impl(kiln_tensor *t, const kiln_expr *const *begin,
                                    const kiln_expr *const *end) {
    if (!t)
        return NULL;
    const shape_view *v = view_of(t);
    const sym_node *b[SHAPE_MAX_DIMS], *e[SHAPE_MAX_DIMS];
    if (!eng_shape_from_exprs(ENG_CTX(t), "kiln_shrink", v->ndim, begin, b) ||
        !eng_shape_from_exprs(ENG_CTX(t), "kiln_shrink", v->ndim, end, e))
        return NULL;
    VIEW_OP(t, shape_view_shrink(ENG_CTX(t)->shape, v, b, e, &out_));
}

static kiln_tensor *pad_sym_impl(kiln_tensor *t, const kiln_expr *const *pad) {
    if (!t)
        return NULL;
    const shape_view *v = view_of(t);
    const kiln_expr *before_e[SHAPE_MAX_DIMS], *after_e[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < v->ndim; d++) {
        before_e[d] = pad ? pad[2 * d] : NULL;
        after_e[d] = pad ? pad[2 * d + 1] : NULL;
    }
    const sym_node *before[SHAPE_MAX_DIMS], *after[SHAPE_MAX_DIMS];
    if (!eng_shape_from_exprs(ENG_CTX(t), "kiln_pad", v->ndim, before_e, before) ||
        !eng_shape_from_exprs(ENG_CTX(t), "kiln_pad", v->ndim, after_e, after))
        return NULL;
    VIEW_OP(t, shape_view_pad(ENG_CTX(t)->shape, v, before, after, &out_));
}

static kiln_tensor *narrow_sym_impl(kiln_tensor *t, int32_t dim, const kiln_expr *start,
                                    const kiln_expr *length) {
    if (!t)
        return NULL;
    if (!start || !length)
        return ENG_CTX(t)->err.status ? NULL
                                      : eng_fail(ENG_CTX(t), KILN_ERROR_INVALID_ARGUMENT,
                                                 "kiln_narrow: missing start or length");
    const sym_node *b = eng_expr_arg(ENG_CTX(t), start, "kiln_narrow_sym"),
                   *n = b ? eng_expr_arg(ENG_CTX(t), length, "kiln_narrow_sym") : NULL;
    if (!b || !n)
        return NULL;
    return narrow_view(t, dim, b, n);
}

static kiln_tensor *slice_sym_impl(kiln_tensor *t, int32_t dim, const kiln_expr *start,
                                   const kiln_expr *stop, int64_t step) {
    if (!t)
        return NULL;
    if (step < 1)
        return eng_fail(ENG_CTX(t), KILN_ERROR_INVALID_ARGUMENT,
                        "kiln_slice_sym: step must be >= 1 (use kiln_flip for reversed order)");
    if (!start || !stop)
        return ENG_CTX(t)->err.status ? NULL
                                      : eng_fail(ENG_CTX(t), KILN_ERROR_INVALID_ARGUMENT,
                                                 "kiln_slice_sym: missing start or stop");
    kiln_context *ctx = ENG_CTX(t);
    const sym_node *b = eng_expr_arg(ctx, start, "kiln_slice_sym"),
                   *e = b ? eng_expr_arg(ctx, stop, "kiln_slice_sym") : NULL;
    if (!b || !e)
        return NULL;
    const sym_node *length = sym_sub(ctx->sym, e, b);
    if (!length)
        return eng_fail_from_shape(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY);
    kiln_tensor *n = kiln_narrow_sym(t, dim, start, eng_expr_handle(ctx, length));
    return step == 1 ? n : kiln_slice(n, dim, 0, INT64_MAX, step);
}

static kiln_tensor *as_strided_impl(kiln_tensor *t, uint32_t ndim, const int64_t *shape,
                                    const int64_t *strides, int64_t offset) {
    if (!t)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    const sym_node *sizes[SHAPE_MAX_DIMS], *st[SHAPE_MAX_DIMS];
    if (!eng_shape_from_ints(ctx, "kiln_as_strided", ndim, shape, sizes))
        return NULL;
    if (ndim > 0 && !strides)
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_as_strided: no strides");
    for (uint32_t d = 0; d < ndim; d++)
        st[d] = sym_const(ctx->sym, strides[d]);
    eng_node *base = eng_resolve(t);
    const sym_node *storage = eng_numel(ctx, base->ndim, base->shape);
    shape_view v;
    shape_tracker tr;
    kiln_status s = shape_view_as_strided(ctx->shape, ndim, sizes, st, sym_const(ctx->sym, offset),
                                          storage, &v);
    if (s == KILN_OK)
        s = shape_tracker_from_view(&v, &tr);
    if (s != KILN_OK)
        return eng_fail_from_shape(ctx, s);
    (void)base;
    return eng_view_new(ctx, t, eng_tracker_keep(ctx, &tr));
}

/* ---- the public entry points: checked handles, intermediates released ---------------- */

kiln_tensor *kiln_permute(kiln_tensor *t, const int32_t *dims) {
    ENG_OP("kiln_permute",
           ENG_AG(.op = ENG_AG_PERMUTE, .dims = dims, .ndims = dims ? kiln_tensor_ndim(t) : 0),
           permute_impl(t, dims), t);
}

kiln_tensor *kiln_transpose(kiln_tensor *t, int32_t dim0, int32_t dim1) {
    ENG_OP("kiln_transpose",
           ENG_AG(.op = ENG_AG_TRANSPOSE, .ints = (int64_t[]){dim0, dim1}, .nints = 2),
           transpose_impl(t, dim0, dim1), t);
}

kiln_tensor *kiln_expand_sym(kiln_tensor *t, uint32_t ndim, const kiln_expr *const *shape) {
    ENG_OP("kiln_expand_sym", ENG_AG(.op = ENG_AG_EXPAND), expand_sym_impl(t, ndim, shape), t);
}

/* Padding by amounts the program holds (pad: before, after per dim), checked as shape/ checks
 * them (refused only when provably negative; bound Variables count with their values), not as
 * kiln_pad_sym checks a caller's (every value of the Variables' ranges). */
static kiln_tensor *pad_nodes_impl(kiln_tensor *t, const sym_node *const *pad) {
    if (!t)
        return NULL;
    const shape_view *v = view_of(t);
    const sym_node *before[SHAPE_MAX_DIMS], *after[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < v->ndim; d++) {
        before[d] = pad[2 * d];
        after[d] = pad[2 * d + 1];
        if (!before[d] || !after[d]) /* a node that could not be made */
            return eng_fail_from_shape(ENG_CTX(t), KILN_ERROR_OUT_OF_HOST_MEMORY);
    }
    VIEW_OP(t, shape_view_pad(ENG_CTX(t)->shape, v, before, after, &out_));
}

kiln_tensor *eng_pad(kiln_tensor *t, const sym_node *const *pad) {
    const kiln_expr *pe[2 * SHAPE_MAX_DIMS];
    uint32_t n = 0;
    if (eng_t(t)) { /* as a kiln_pad_sym record (the handles are pinned by the record) */
        n = 2 * view_of(t)->ndim;
        for (uint32_t i = 0; i < n; i++)
            pe[i] = eng_expr_handle(ENG_CTX(t), pad[i]);
    }
    ENG_OP("kiln_pad_sym", ENG_AG(.op = ENG_AG_PAD, .exprs = pe, .nexprs = n),
           pad_nodes_impl(t, pad), t);
}

kiln_tensor *eng_pad_to_blocks(kiln_tensor *t, uint32_t dim, int64_t m, const sym_node **blocks) {
    *blocks = NULL;
    if (!t)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    const shape_view *v = view_of(t);
    const sym_node *size = v->shape[dim];
    const sym_node *count = sym_floordiv_c(ctx->sym, sym_add_c(ctx->sym, size, m - 1), m);
    const sym_node *extra = count ? sym_sub(ctx->sym, sym_mul_c(ctx->sym, count, m), size) : NULL;
    if (!extra)
        return eng_fail_from_shape(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY);
    *blocks = count;
    int64_t none;
    if (sym_is_const(extra, &none) && none == 0)
        return t;
    const sym_node *pad[2 * SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < v->ndim; d++) {
        pad[2 * d] = sym_const(ctx->sym, 0);
        pad[2 * d + 1] = d == dim ? extra : pad[2 * d];
    }
    return eng_pad(t, pad);
}

kiln_tensor *eng_expand(kiln_tensor *t, uint32_t ndim, const sym_node *const *dims) {
    ENG_OP("kiln_expand_sym", ENG_AG(.op = ENG_AG_EXPAND), expand_nodes_impl(t, ndim, dims), t);
}

kiln_tensor *eng_reshape(kiln_tensor *t, uint32_t ndim, const sym_node *const *dims) {
    ENG_OP("kiln_reshape_sym", ENG_AG(.op = ENG_AG_RESHAPE), reshape_nodes_impl(t, ndim, dims), t);
}

kiln_tensor *kiln_expand(kiln_tensor *t, uint32_t ndim, const int64_t *shape) {
    ENG_OP("kiln_expand", ENG_AG(.op = ENG_AG_EXPAND), expand_impl(t, ndim, shape), t);
}

kiln_tensor *kiln_pad(kiln_tensor *t, const int64_t *pad) {
    ENG_OP("kiln_pad",
           ENG_AG(.op = ENG_AG_PAD, .ints = pad, .nints = pad ? 2 * kiln_tensor_ndim(t) : 0),
           pad_impl(t, pad), t);
}

kiln_tensor *kiln_shrink(kiln_tensor *t, const int64_t *begin, const int64_t *end) {
    ENG_OP("kiln_shrink",
           ENG_AG(.op = ENG_AG_SHRINK, .ints = begin, .ints2 = end,
                  .nints = begin && end ? kiln_tensor_ndim(t) : 0),
           shrink_impl(t, begin, end), t);
}

kiln_tensor *kiln_flip(kiln_tensor *t, int32_t dim) {
    ENG_OP("kiln_flip", ENG_AG(.op = ENG_AG_FLIP, .ints = (int64_t[]){dim}, .nints = 1),
           flip_impl(t, dim), t);
}

kiln_tensor *kiln_slice(kiln_tensor *t, int32_t dim, int64_t start, int64_t stop, int64_t step) {
    ENG_OP("kiln_slice",
           ENG_AG(.op = ENG_AG_SLICE, .ints = (int64_t[]){dim, start, stop, step}, .nints = 4),
           slice_impl(t, dim, start, stop, step), t);
}

kiln_tensor *kiln_unsqueeze(kiln_tensor *t, int32_t dim) {
    ENG_OP("kiln_unsqueeze", ENG_AG(.op = ENG_AG_RESHAPE), unsqueeze_impl(t, dim), t);
}

kiln_tensor *kiln_squeeze(kiln_tensor *t, int32_t dim) {
    ENG_OP("kiln_squeeze", ENG_AG(.op = ENG_AG_RESHAPE), squeeze_impl(t, dim), t);
}

kiln_tensor *kiln_narrow(kiln_tensor *t, int32_t dim, int64_t start, int64_t length) {
    ENG_OP("kiln_narrow",
           ENG_AG(.op = ENG_AG_NARROW, .ints = (int64_t[]){dim, start, length}, .nints = 3),
           narrow_impl(t, dim, start, length), t);
}

kiln_tensor *kiln_select(kiln_tensor *t, int32_t dim, int64_t index) {
    ENG_OP("kiln_select", ENG_AG(.op = ENG_AG_SELECT, .ints = (int64_t[]){dim, index}, .nints = 2),
           select_impl(t, dim, index), t);
}

kiln_tensor *kiln_diagonal(kiln_tensor *t, int64_t offset, int32_t dim1, int32_t dim2) {
    ENG_OP("kiln_diagonal",
           ENG_AG(.op = ENG_AG_DIAGONAL, .ints = (int64_t[]){offset, dim1, dim2}, .nints = 3),
           diagonal_impl(t, offset, dim1, dim2), t);
}

kiln_tensor *kiln_unfold(kiln_tensor *t, int32_t dim, int64_t size, int64_t step) {
    ENG_OP("kiln_unfold",
           ENG_AG(.op = ENG_AG_UNFOLD, .ints = (int64_t[]){dim, size, step}, .nints = 3),
           unfold_impl(t, dim, size, step), t);
}

kiln_tensor *kiln_reshape_sym(kiln_tensor *t, uint32_t ndim, const kiln_expr *const *shape) {
    ENG_OP("kiln_reshape_sym", ENG_AG(.op = ENG_AG_RESHAPE), reshape_sym_impl(t, ndim, shape), t);
}

kiln_tensor *kiln_reshape(kiln_tensor *t, uint32_t ndim, const int64_t *shape) {
    ENG_OP("kiln_reshape", ENG_AG(.op = ENG_AG_RESHAPE), reshape_impl(t, ndim, shape), t);
}

kiln_tensor *kiln_shrink_sym(kiln_tensor *t, const kiln_expr *const *begin,
                             const kiln_expr *const *end) {
    ENG_OP("kiln_shrink_sym",
           ENG_AG(.op = ENG_AG_SHRINK, .exprs = begin, .exprs2 = end,
                  .nexprs = begin && end ? kiln_tensor_ndim(t) : 0),
           shrink_sym_impl(t, begin, end), t);
}

kiln_tensor *kiln_pad_sym(kiln_tensor *t, const kiln_expr *const *pad) {
    ENG_OP("kiln_pad_sym",
           ENG_AG(.op = ENG_AG_PAD, .exprs = pad, .nexprs = pad ? 2 * kiln_tensor_ndim(t) : 0),
           pad_sym_impl(t, pad), t);
}

kiln_tensor *kiln_narrow_sym(kiln_tensor *t, int32_t dim, const kiln_expr *start,
                             const kiln_expr *length) {
    ENG_OP("kiln_narrow_sym",
           ENG_AG(.op = ENG_AG_NARROW, .ints = (int64_t[]){dim}, .nints = 1,
                  .exprs = (const kiln_expr *const[]){start, length}, .nexprs = 2),
           narrow_sym_impl(t, dim, start, length), t);
}

kiln_tensor *kiln_slice_sym(kiln_tensor *t, int32_t dim, const kiln_expr *start,
                            const kiln_expr *stop, int64_t step) {
    ENG_ENTRY("kiln_slice_sym", slice_sym_impl(t, dim, start, stop, step), t);
}

kiln_tensor *kiln_as_strided(kiln_tensor *t, uint32_t ndim, const int64_t *shape,
                             const int64_t *strides, int64_t offset) {
    ENG_OP("kiln_as_strided",
           ENG_AG(.op = ENG_AG_AS_STRIDED, .ints = shape, .ints2 = strides,
                  .nints = shape && strides ? ndim : 0, .value = ndim, .value2 = (double)offset),
           as_strided_impl(t, ndim, shape, strides, offset), t);
}
