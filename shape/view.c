/* Construction of views and the movement ops that keep one view: permute, expand, pad, shrink,
 * flip, slice, unsqueeze, squeeze, narrow, select, diagonal, unfold. Each op works on a copy and
 * ends with shape_canon + shape_finish, so the input is never changed and a failure writes nothing.
 */
#include "shape_internal.h"

#include <string.h>

static kiln_status check_ndim(shape_ctx *ctx, uint32_t ndim) {
    if (ndim > SHAPE_MAX_DIMS)
        return shape_fail(ctx, KILN_ERROR_LIMIT_EXCEEDED, "%u dimensions (at most %d)", ndim,
                          (int)SHAPE_MAX_DIMS);
    return KILN_OK;
}

static kiln_status check_sizes(shape_ctx *ctx, uint32_t ndim, const sym_node *const *sizes) {
    kiln_status s = check_ndim(ctx, ndim);
    if (s != KILN_OK)
        return s;
    if (ndim && !sizes)
        return shape_null(ctx, "sizes missing");
    for (uint32_t i = 0; i < ndim; i++) {
        if (!sizes[i])
            return shape_null(ctx, "size %u is NULL", i);
        if (shape_refute_le(ctx, shape_k(ctx, 0), sizes[i])) {
            char n[64];
            sym_render(sizes[i], n, sizeof n);
            return shape_fail(ctx, KILN_ERROR_OUT_OF_RANGE, "size %s of dim %u is negative", n, i);
        }
    }
    return KILN_OK;
}

static void view_init(shape_view *v, uint32_t ndim) {
    memset(v, 0, sizeof(*v));
    v->ndim = ndim;
}

kiln_status shape_view_contiguous(shape_ctx *ctx, uint32_t ndim, const sym_node *const *sizes,
                                  shape_view *out) {
    kiln_status s = check_sizes(ctx, ndim, sizes);
    if (s != KILN_OK)
        return s;
    shape_view v;
    view_init(&v, ndim);
    memcpy(v.shape, sizes, ndim * sizeof(*sizes));
    shape_contig_strides(ctx, ndim, v.shape, false, v.strides);
    v.offset = shape_k(ctx, 0);
    shape_user_fresh(ctx, &v);
    shape_canon(ctx, &v);
    return shape_finish(ctx, &v, out);
}

kiln_status shape_view_make(shape_ctx *ctx, uint32_t ndim, const sym_node *const *sizes,
                            const sym_node *const *strides, const sym_node *offset,
                            const sym_node *const *mask_begin, const sym_node *const *mask_end,
                            shape_view *out) {
    kiln_status s = check_sizes(ctx, ndim, sizes);
    if (s != KILN_OK)
        return s;
    if (!offset || (ndim && !strides))
        return shape_null(ctx, "strides or offset missing");
    shape_view v;
    view_init(&v, ndim);
    memcpy(v.shape, sizes, ndim * sizeof(*sizes));
    memcpy(v.strides, strides, ndim * sizeof(*strides));
    v.offset = offset;
    if (mask_begin && mask_end) {
        v.masked = true;
        memcpy(v.mask_begin, mask_begin, ndim * sizeof(*mask_begin));
        memcpy(v.mask_end, mask_end, ndim * sizeof(*mask_end));
    }
    shape_canon(ctx, &v);
    memcpy(v.user_strides, v.strides, sizeof(v.strides));
    v.user_offset = v.offset;
    return shape_finish(ctx, &v, out);
}

kiln_status shape_view_as_strided(shape_ctx *ctx, uint32_t ndim, const sym_node *const *sizes,
                                  const sym_node *const *strides, const sym_node *offset,
                                  const sym_node *storage_size, shape_view *out) {
    kiln_status s = check_sizes(ctx, ndim, sizes);
    if (s != KILN_OK)
        return s;
    if (!offset || (ndim && !strides))
        return shape_null(ctx, "as_strided: strides or offset missing");
    for (uint32_t i = 0; i < ndim; i++)
        if (!strides[i])
            return shape_null(ctx, "as_strided: stride %u is NULL", i);
    if (shape_refute_le(ctx, shape_k(ctx, 0), offset))
        return shape_fail(ctx, KILN_ERROR_OUT_OF_BOUNDS, "the storage offset is negative");
    shape_view v;
    view_init(&v, ndim);
    memcpy(v.shape, sizes, ndim * sizeof(*sizes));
    memcpy(v.strides, strides, ndim * sizeof(*strides));
    v.offset = offset;
    memcpy(v.user_strides, strides, ndim * sizeof(*strides));
    v.user_offset = offset;
    shape_canon(ctx, &v);
    s = shape_finish(ctx, &v, &v);
    if (s == KILN_OK && storage_size)
        s = shape_view_check_storage(ctx, &v, storage_size);
    else if (s == KILN_OK)
        s = shape_view_check_storage(ctx, &v, NULL);
    if (s != KILN_OK)
        return s;
    *out = v;
    return KILN_OK;
}

kiln_status shape_view_empty_strided(shape_ctx *ctx, uint32_t ndim, const sym_node *const *sizes,
                                     const sym_node *const *strides, shape_view *out,
                                     const sym_node **storage_size) {
    shape_view v;
    kiln_status s = shape_view_as_strided(ctx, ndim, sizes, strides, shape_k(ctx, 0), NULL, &v);
    if (s != KILN_OK)
        return s;
    const sym_node *lo, *hi;
    bool empty;
    s = shape_view_extent(ctx, &v, &lo, &hi, &empty);
    if (s != KILN_OK)
        return s;
    *out = v;
    *storage_size = empty ? shape_k(ctx, 0) : sym_add_c(ctx->sym, hi, 1);
    return shape_sym_status(ctx);
}

/* ---- permute, expand, pad, shrink, flip ---------------------------------------------------- */

kiln_status shape_view_permute(shape_ctx *ctx, const shape_view *in, const int32_t *perm,
                               shape_view *out) {
    SHAPE_CHECK(shape_check_view(ctx, in));
    bool seen[SHAPE_MAX_DIMS] = {0};
    uint32_t ax[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < in->ndim; i++) {
        kiln_status s = shape_axis(ctx, perm[i], in->ndim, &ax[i]);
        if (s != KILN_OK)
            return s;
        if (seen[ax[i]])
            return shape_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "dim %u appears twice", ax[i]);
        seen[ax[i]] = true;
    }
    shape_view v = *in;
    for (uint32_t i = 0; i < in->ndim; i++) {
        v.shape[i] = in->shape[ax[i]];
        v.strides[i] = in->strides[ax[i]];
        v.user_strides[i] = in->user_strides[ax[i]];
        if (in->masked) {
            v.mask_begin[i] = in->mask_begin[ax[i]];
            v.mask_end[i] = in->mask_end[ax[i]];
        }
    }
    shape_canon(ctx, &v);
    return shape_finish(ctx, &v, out);
}

kiln_status shape_view_expand(shape_ctx *ctx, const shape_view *in, const sym_node *const *sizes,
                              shape_view *out) {
    SHAPE_CHECK(shape_check_view(ctx, in));
    kiln_status s = check_sizes(ctx, in->ndim, sizes);
    if (s != KILN_OK)
        return s;
    shape_view v = *in;
    for (uint32_t i = 0; i < in->ndim; i++) {
        if (sizes[i] == in->shape[i])
            continue;
        if (!shape_is(in->shape[i], 1)) {
            char have[64], want[64];
            sym_render(in->shape[i], have, sizeof have);
            sym_render(sizes[i], want, sizeof want);
            return shape_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                              "dim %u of size %s cannot be expanded to %s (only a size 1 can)", i,
                              have, want);
        }
        v.shape[i] = sizes[i];
        v.strides[i] = v.user_strides[i] = shape_k(ctx, 0);
        if (v.masked) { /* b, e are 0 or 1: (0,1) -> (0,n), an empty mask stays empty */
            v.mask_begin[i] = sym_mul(ctx->sym, in->mask_begin[i], sizes[i]);
            v.mask_end[i] = sym_mul(ctx->sym, in->mask_end[i], sizes[i]);
        }
    }
    shape_canon(ctx, &v);
    return shape_finish(ctx, &v, out);
}

static void ensure_mask(shape_ctx *ctx, shape_view *v) {
    if (v->masked)
        return;
    v->masked = true;
    for (uint32_t i = 0; i < v->ndim; i++) {
        v->mask_begin[i] = shape_k(ctx, 0);
        v->mask_end[i] = v->shape[i];
    }
}

kiln_status shape_view_pad(shape_ctx *ctx, const shape_view *in, const sym_node *const *before,
                           const sym_node *const *after, shape_view *out) {
    SHAPE_CHECK(shape_check_view(ctx, in));
    for (uint32_t i = 0; i < in->ndim; i++) {
        if (!before[i] || !after[i])
            return shape_null(ctx, "pad: amount %u is NULL", i);
        if (shape_refute_le(ctx, shape_k(ctx, 0), before[i]) ||
            shape_refute_le(ctx, shape_k(ctx, 0), after[i]))
            return shape_fail(ctx, KILN_ERROR_OUT_OF_RANGE, "negative padding on dim %u", i);
    }
    shape_view v = *in;
    ensure_mask(ctx, &v);
    for (uint32_t i = 0; i < in->ndim; i++) {
        v.shape[i] = sym_add(ctx->sym, sym_add(ctx->sym, in->shape[i], before[i]), after[i]);
        v.offset = sym_sub(ctx->sym, v.offset, sym_mul(ctx->sym, before[i], in->strides[i]));
        v.mask_begin[i] = sym_add(ctx->sym, v.mask_begin[i], before[i]);
        v.mask_end[i] = sym_add(ctx->sym, v.mask_end[i], before[i]);
    }
    shape_user_fresh(ctx, &v); /* torch's pad makes a new contiguous tensor */
    shape_canon(ctx, &v);
    return shape_finish(ctx, &v, out);
}

/* clamp(x, 0, hi) */
static const sym_node *clamp0(shape_ctx *ctx, const sym_node *x, const sym_node *hi) {
    return sym_max(ctx->sym, shape_k(ctx, 0), sym_min(ctx->sym, x, hi));
}

kiln_status shape_view_shrink(shape_ctx *ctx, const shape_view *in, const sym_node *const *begin,
                              const sym_node *const *end, shape_view *out) {
    SHAPE_CHECK(shape_check_view(ctx, in));
    for (uint32_t i = 0; i < in->ndim; i++) {
        if (!begin[i] || !end[i])
            return shape_null(ctx, "shrink: bound %u is NULL", i);
        if (shape_refute_le(ctx, shape_k(ctx, 0), begin[i]) ||
            shape_refute_le(ctx, begin[i], end[i]) || shape_refute_le(ctx, end[i], in->shape[i])) {
            char b[64], e[64], n[64];
            sym_render(begin[i], b, sizeof b);
            sym_render(end[i], e, sizeof e);
            sym_render(in->shape[i], n, sizeof n);
            return shape_fail(ctx, KILN_ERROR_OUT_OF_BOUNDS,
                              "[%s, %s) on dim %u of size %s (needs 0 <= begin <= end <= size)", b,
                              e, i, n);
        }
    }
    shape_view v = *in;
    for (uint32_t i = 0; i < in->ndim; i++) {
        v.shape[i] = sym_sub(ctx->sym, end[i], begin[i]);
        v.offset = sym_add(ctx->sym, v.offset, sym_mul(ctx->sym, begin[i], in->strides[i]));
        v.user_offset =
            sym_add(ctx->sym, v.user_offset, sym_mul(ctx->sym, begin[i], in->user_strides[i]));
        if (in->masked) {
            v.mask_begin[i] =
                clamp0(ctx, sym_sub(ctx->sym, in->mask_begin[i], begin[i]), v.shape[i]);
            v.mask_end[i] = clamp0(ctx, sym_sub(ctx->sym, in->mask_end[i], begin[i]), v.shape[i]);
        }
    }
    shape_canon(ctx, &v);
    return shape_finish(ctx, &v, out);
}

kiln_status shape_view_flip(shape_ctx *ctx, const shape_view *in, int32_t dim, shape_view *out) {
    SHAPE_CHECK(shape_check_view(ctx, in));
    uint32_t d;
    kiln_status s = shape_axis(ctx, dim, in->ndim, &d);
    if (s != KILN_OK)
        return s;
    shape_view v = *in;
    const sym_node *last = sym_add_c(ctx->sym, in->shape[d], -1);
    v.offset = sym_add(ctx->sym, v.offset, sym_mul(ctx->sym, last, in->strides[d]));
    v.strides[d] = sym_neg(ctx->sym, in->strides[d]);
    v.user_offset = sym_add(ctx->sym, v.user_offset, sym_mul(ctx->sym, last, in->user_strides[d]));
    v.user_strides[d] = sym_neg(ctx->sym, in->user_strides[d]);
    if (in->masked) {
        v.mask_begin[d] = sym_sub(ctx->sym, in->shape[d], in->mask_end[d]);
        v.mask_end[d] = sym_sub(ctx->sym, in->shape[d], in->mask_begin[d]);
    }
    shape_canon(ctx, &v);
    return shape_finish(ctx, &v, out);
}

/* ---- slice with any step ------------------------------------------------------------------- */

/* Python's slice.indices(n): the first index and the count. */
static void slice_indices(const shape_slice *s, int64_t n, int64_t *first, int64_t *count) {
    int64_t lo = s->step < 0 ? -1 : 0, hi = s->step < 0 ? n - 1 : n;
    int64_t start = s->step < 0 ? hi : lo, stop = s->step < 0 ? lo : hi;
    if (s->has_start) {
        start = s->start < 0 ? s->start + n : s->start;
        start = start < lo ? lo : (start > hi ? hi : start);
    }
    if (s->has_stop) {
        stop = s->stop < 0 ? s->stop + n : s->stop;
        stop = stop < lo ? lo : (stop > hi ? hi : stop);
    }
    int64_t c = 0;
    if (s->step > 0 && stop > start)
        c = (stop - start - 1) / s->step + 1;
    else if (s->step < 0 && start > stop)
        c = (start - stop - 1) / (-s->step) + 1;
    *first = start;
    *count = c;
}

/* ceil(a / k) for k > 0 */
static const sym_node *ceildiv(shape_ctx *ctx, const sym_node *a, int64_t k) {
    return sym_neg(ctx->sym, sym_floordiv_c(ctx->sym, sym_neg(ctx->sym, a), k));
}

/* The mask of dimension d after taking index first + j*step for j in [0, count). */
static void slice_mask(shape_ctx *ctx, shape_view *v, uint32_t d, int64_t first, int64_t step,
                       const sym_node *count) {
    const sym_node *mb = v->mask_begin[d], *me = v->mask_end[d];
    const sym_node *b, *e;
    if (step > 0) {
        b = ceildiv(ctx, sym_add_c(ctx->sym, mb, -first), step);
        e = ceildiv(ctx, sym_add_c(ctx->sym, me, -first), step);
    } else {
        const sym_node *f = shape_k(ctx, first);
        b = sym_add_c(ctx->sym, sym_floordiv_c(ctx->sym, sym_sub(ctx->sym, f, me), -step), 1);
        e = sym_add_c(ctx->sym, sym_floordiv_c(ctx->sym, sym_sub(ctx->sym, f, mb), -step), 1);
    }
    v->mask_begin[d] = clamp0(ctx, b, count);
    v->mask_end[d] = clamp0(ctx, e, count);
}

kiln_status shape_view_slice(shape_ctx *ctx, const shape_view *in, int32_t dim,
                             const shape_slice *sl, shape_view *out) {
    SHAPE_CHECK(shape_check_view(ctx, in));
    uint32_t d;
    kiln_status s = shape_axis(ctx, dim, in->ndim, &d);
    if (s != KILN_OK)
        return s;
    int64_t n;
    if (sl->step == 0 || sl->step == INT64_MIN)
        return shape_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "the step must be nonzero");
    if (!shape_value(in->shape[d], &n))
        return shape_fail(ctx, KILN_ERROR_UNSUPPORTED,
                          "dim %u has a symbolic size (use kiln_slice_sym)", d);
    int64_t first, count;
    slice_indices(sl, n, &first, &count);
    shape_view v = *in;
    const sym_node *cnt = shape_k(ctx, count);
    if (in->masked)
        slice_mask(ctx, &v, d, first, sl->step, cnt);
    v.shape[d] = cnt;
    if (count > 0)
        v.offset = sym_add(ctx->sym, v.offset, sym_mul_c(ctx->sym, in->strides[d], first));
    /* PyTorch (and NumPy) move the reported offset to the first index even when the slice is
     * empty (x[5:2] has storage offset 5); the canonical offset of an empty view stays 0. */
    v.user_offset =
        sym_add(ctx->sym, v.user_offset, sym_mul_c(ctx->sym, in->user_strides[d], first));
    v.strides[d] = sym_mul_c(ctx->sym, in->strides[d], sl->step);
    v.user_strides[d] = sym_mul_c(ctx->sym, in->user_strides[d], sl->step);
    shape_canon(ctx, &v);
    return shape_finish(ctx, &v, out);
}

/* ---- unsqueeze, squeeze, narrow, select ------------------------------------------------------ */

static void remove_dim(shape_view *v, uint32_t d) {
    for (uint32_t i = d; i + 1 < v->ndim; i++) {
        v->shape[i] = v->shape[i + 1];
        v->strides[i] = v->strides[i + 1];
        v->user_strides[i] = v->user_strides[i + 1];
        v->mask_begin[i] = v->mask_begin[i + 1];
        v->mask_end[i] = v->mask_end[i + 1];
    }
    v->ndim--;
    v->shape[v->ndim] = v->strides[v->ndim] = v->user_strides[v->ndim] = NULL;
    v->mask_begin[v->ndim] = v->mask_end[v->ndim] = NULL;
}

static void insert_dim(shape_view *v, uint32_t d) {
    for (uint32_t i = v->ndim; i > d; i--) {
        v->shape[i] = v->shape[i - 1];
        v->strides[i] = v->strides[i - 1];
        v->user_strides[i] = v->user_strides[i - 1];
        v->mask_begin[i] = v->mask_begin[i - 1];
        v->mask_end[i] = v->mask_end[i - 1];
    }
    v->ndim++;
}

kiln_status shape_view_unsqueeze(shape_ctx *ctx, const shape_view *in, int32_t dim,
                                 shape_view *out) {
    SHAPE_CHECK(shape_check_view(ctx, in));
    uint32_t d;
    kiln_status s = check_ndim(ctx, in->ndim + 1);
    if (s == KILN_OK)
        s = shape_axis(ctx, dim, in->ndim + 1, &d);
    if (s != KILN_OK)
        return s;
    shape_view v = *in;
    insert_dim(&v, d);
    v.shape[d] = shape_k(ctx, 1);
    v.strides[d] = shape_k(ctx, 0);
    /* torch: the new stride is size*stride of the dim it lands before, 1 at the end */
    v.user_strides[d] =
        d >= in->ndim ? shape_k(ctx, 1) : sym_mul(ctx->sym, in->shape[d], in->user_strides[d]);
    if (v.masked) {
        v.mask_begin[d] = shape_k(ctx, 0);
        v.mask_end[d] = shape_k(ctx, 1);
    }
    shape_canon(ctx, &v);
    return shape_finish(ctx, &v, out);
}

/* Drops dimension d (size 1): its index is 0, and if the mask excludes 0 everything is padding,
 * which a view with no dimension left cannot say. */
static kiln_status drop_unit_dim(shape_ctx *ctx, shape_view *v, uint32_t d) {
    bool keeps = !v->masked || (shape_is(v->mask_begin[d], 0) && shape_is(v->mask_end[d], 1));
    bool all_empty = v->masked && shape_is(v->mask_end[d], 0) && v->ndim > 1; /* canonical (0,0) */
    if (!keeps && !all_empty)
        return shape_fail(ctx, KILN_ERROR_UNSUPPORTED,
                          "removing a dimension whose padding cannot be decided or would leave a "
                          "fully padded scalar");
    remove_dim(v, d);
    return KILN_OK;
}

kiln_status shape_view_squeeze(shape_ctx *ctx, const shape_view *in, int32_t dim, shape_view *out) {
    SHAPE_CHECK(shape_check_view(ctx, in));
    uint32_t d;
    kiln_status s = shape_axis(ctx, dim, in->ndim, &d);
    if (s != KILN_OK)
        return s;
    if (!shape_is(in->shape[d], 1)) {
        char n[64];
        sym_render(in->shape[d], n, sizeof n);
        return shape_fail(ctx, KILN_ERROR_SHAPE_MISMATCH, "dim %u has size %s, not 1", d, n);
    }
    shape_view v = *in;
    s = drop_unit_dim(ctx, &v, d);
    if (s != KILN_OK)
        return s;
    shape_canon(ctx, &v);
    return shape_finish(ctx, &v, out);
}

static kiln_status shrink_one(shape_ctx *ctx, const shape_view *in, uint32_t d, const sym_node *b,
                              const sym_node *e, shape_view *out) {
    const sym_node *lo[SHAPE_MAX_DIMS], *hi[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < in->ndim; i++) {
        lo[i] = shape_k(ctx, 0);
        hi[i] = in->shape[i];
    }
    lo[d] = b;
    hi[d] = e;
    return shape_view_shrink(ctx, in, lo, hi, out);
}

/* A negative constant (or bound) start counts from the end. */
static const sym_node *wrap_index(shape_ctx *ctx, const sym_node *i, const sym_node *size) {
    int64_t x;
    if (shape_value(i, &x) && x < 0)
        return sym_add(ctx->sym, i, size);
    return i;
}

kiln_status shape_view_narrow(shape_ctx *ctx, const shape_view *in, int32_t dim,
                              const sym_node *start, const sym_node *length, shape_view *out) {
    SHAPE_CHECK(shape_check_view(ctx, in));
    uint32_t d;
    kiln_status s = shape_axis(ctx, dim, in->ndim, &d);
    if (s != KILN_OK)
        return s;
    if (!start || !length)
        return shape_null(ctx, "narrow: start or length is NULL");
    start = wrap_index(ctx, start, in->shape[d]);
    return shrink_one(ctx, in, d, start, sym_add(ctx->sym, start, length), out);
}

kiln_status shape_view_select(shape_ctx *ctx, const shape_view *in, int32_t dim,
                              const sym_node *index, shape_view *out) {
    SHAPE_CHECK(shape_check_view(ctx, in));
    uint32_t d;
    kiln_status s = shape_axis(ctx, dim, in->ndim, &d);
    if (s != KILN_OK)
        return s;
    if (!index)
        return shape_null(ctx, "select: index is NULL");
    const sym_node *given = index;
    index = wrap_index(ctx, index, in->shape[d]);
    if (shape_refute_le(ctx, shape_k(ctx, 0), index) ||
        shape_refute_le(ctx, sym_add_c(ctx->sym, index, 1), in->shape[d])) {
        char i[64], n[64];
        sym_render(given, i, sizeof i);
        sym_render(in->shape[d], n, sizeof n);
        return shape_fail(ctx, KILN_ERROR_OUT_OF_BOUNDS,
                          "index %s is out of bounds for dim %u of size %s", i, d, n);
    }
    shape_view v;
    s = shrink_one(ctx, in, d, index, sym_add_c(ctx->sym, index, 1), &v);
    if (s == KILN_OK)
        s = drop_unit_dim(ctx, &v, d);
    if (s != KILN_OK)
        return s;
    shape_canon(ctx, &v);
    return shape_finish(ctx, &v, out);
}

/* ---- diagonal and unfold -------------------------------------------------------------------- */

kiln_status shape_view_diagonal(shape_ctx *ctx, const shape_view *in, int64_t offset, int32_t dim1,
                                int32_t dim2, shape_view *out) {
    SHAPE_CHECK(shape_check_view(ctx, in));
    uint32_t a, b;
    kiln_status s = shape_axis(ctx, dim1, in->ndim, &a);
    if (s == KILN_OK)
        s = shape_axis(ctx, dim2, in->ndim, &b);
    if (s != KILN_OK)
        return s;
    if (a == b)
        return shape_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "dims %d and %d are the same dim",
                          (int)dim1, (int)dim2);
    if (offset == INT64_MIN)
        return shape_fail(ctx, KILN_ERROR_OVERFLOW, "the offset is INT64_MIN");
    sym_ctx *sc = ctx->sym;
    int64_t r0 = offset < 0 ? -offset : 0, c0 = offset > 0 ? offset : 0;
    const sym_node *len =
        sym_max(sc, shape_k(ctx, 0),
                sym_min(sc, sym_add_c(sc, in->shape[a], -r0), sym_add_c(sc, in->shape[b], -c0)));
    shape_view v = *in;
    const sym_node *st = sym_add(sc, in->strides[a], in->strides[b]);
    const sym_node *ust = sym_add(sc, in->user_strides[a], in->user_strides[b]);
    const sym_node *mb = NULL, *me = NULL;
    if (in->masked) {
        mb = sym_max(sc, sym_add_c(sc, in->mask_begin[a], -r0),
                     sym_add_c(sc, in->mask_begin[b], -c0));
        me = sym_min(sc, sym_add_c(sc, in->mask_end[a], -r0), sym_add_c(sc, in->mask_end[b], -c0));
    }
    /* torch moves the storage offset only when the diagonal is not empty */
    v.offset =
        sym_add(sc, v.offset,
                sym_add(sc, sym_mul_c(sc, in->strides[a], r0), sym_mul_c(sc, in->strides[b], c0)));
    if (!shape_is(len, 0))
        v.user_offset = sym_add(sc, v.user_offset,
                                sym_add(sc, sym_mul_c(sc, in->user_strides[a], r0),
                                        sym_mul_c(sc, in->user_strides[b], c0)));
    remove_dim(&v, a > b ? a : b);
    remove_dim(&v, a > b ? b : a);
    uint32_t n = v.ndim;
    v.ndim++;
    v.shape[n] = len;
    v.strides[n] = st;
    v.user_strides[n] = ust;
    if (in->masked) {
        v.mask_begin[n] = clamp0(ctx, mb, len);
        v.mask_end[n] = clamp0(ctx, me, len);
    }
    shape_canon(ctx, &v);
    return shape_finish(ctx, &v, out);
}

kiln_status shape_view_unfold(shape_ctx *ctx, const shape_view *in, int32_t dim,
                              const sym_node *size, const sym_node *step, shape_view *out) {
    SHAPE_CHECK(shape_check_view(ctx, in));
    uint32_t d;
    kiln_status s = check_ndim(ctx, in->ndim + 1);
    if (s == KILN_OK)
        s = shape_axis(ctx, dim, in->ndim, &d);
    if (s != KILN_OK)
        return s;
    if (!size || !step)
        return shape_null(ctx, "unfold: size or step is NULL");
    if (shape_refute_le(ctx, size, in->shape[d]) || shape_refute_le(ctx, shape_k(ctx, 0), size) ||
        shape_refute_le(ctx, shape_k(ctx, 1), step))
        return shape_fail(ctx, KILN_ERROR_OUT_OF_BOUNDS,
                          "the window does not fit dim %u (needs 0 <= size <= the dim's size and "
                          "step >= 1)",
                          d);
    if (in->masked && !(shape_is(in->mask_begin[d], 0) && in->mask_end[d] == in->shape[d]))
        return shape_fail(ctx, KILN_ERROR_UNSUPPORTED, "dim %u is padded", d);
    sym_ctx *sc = ctx->sym;
    shape_view v = *in;
    uint32_t n = v.ndim++;
    v.shape[d] = sym_add_c(sc, sym_floordiv(sc, sym_sub(sc, in->shape[d], size), step), 1);
    v.strides[d] = sym_mul(sc, in->strides[d], step);
    v.user_strides[d] = sym_mul(sc, in->user_strides[d], step);
    v.shape[n] = size;
    v.strides[n] = in->strides[d];
    v.user_strides[n] = in->user_strides[d];
    if (v.masked) {
        v.mask_begin[d] = shape_k(ctx, 0);
        v.mask_end[d] = v.shape[d];
        v.mask_begin[n] = shape_k(ctx, 0);
        v.mask_end[n] = size;
    }
    shape_canon(ctx, &v);
    return shape_finish(ctx, &v, out);
}
