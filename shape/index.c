/* Index and validity expressions, and the extent of a view in its storage. */
#include "shape_internal.h"

kiln_status shape_view_index(shape_ctx *ctx, const shape_view *v, const sym_node *const *idx,
                             const sym_node **index, const sym_node **valid) {
    SHAPE_CHECK(shape_check_view(ctx, v));
    sym_ctx *sc = ctx->sym;
    const sym_node *ix = v->offset, *ok = shape_k(ctx, 1);
    for (uint32_t i = 0; i < v->ndim; i++) {
        if (!idx[i])
            return shape_null(ctx, "index %u is NULL", i);
        if (!shape_is(v->strides[i], 0))
            ix = sym_add(sc, ix, sym_mul(sc, idx[i], v->strides[i]));
        if (!v->masked)
            continue;
        if (!shape_is(v->mask_begin[i], 0))
            ok = sym_and(sc, ok, sym_ge(sc, idx[i], v->mask_begin[i]));
        if (v->mask_end[i] != v->shape[i])
            ok = sym_and(sc, ok, sym_lt(sc, idx[i], v->mask_end[i]));
    }
    kiln_status s = shape_sym_status(ctx);
    if (s != KILN_OK)
        return s;
    *index = ix;
    *valid = ok;
    return KILN_OK;
}

static bool has_zero_dim(const shape_view *v) {
    for (uint32_t i = 0; i < v->ndim; i++)
        if (shape_is(v->shape[i], 0))
            return true;
    return false;
}

kiln_status shape_tracker_index(shape_ctx *ctx, const shape_tracker *t, const sym_node *const *idx,
                                const sym_node **index, const sym_node **valid) {
    SHAPE_CHECK(shape_check_tracker(ctx, t));
    sym_ctx *sc = ctx->sym;
    const sym_node *ix, *ok;
    kiln_status s = shape_view_index(ctx, shape_tracker_last(t), idx, &ix, &ok);
    for (uint32_t k = t->nviews - 1; s == KILN_OK && k-- > 0;) {
        const shape_view *v = &t->views[k];
        if (has_zero_dim(v)) {
            ix = shape_k(ctx, 0), ok = shape_k(ctx, 0);
            break;
        }
        /* The later view addresses v's elements 0 .. numel - 1 in row-major order (where it
         * is valid: elsewhere the mask is false and the index unused). A dim of size 1 has
         * coordinate 0, and the outermost dim longer than 1 takes the whole quotient: no
         * modulo by its size (a division by a symbolic size per element otherwise). */
        uint32_t outer = 0;
        while (outer + 1 < v->ndim && shape_is(v->shape[outer], 1))
            outer++;
        const sym_node *coord[SHAPE_MAX_DIMS], *acc = shape_k(ctx, 1);
        for (uint32_t i = v->ndim; i-- > 0;) {
            if (shape_is(v->shape[i], 1))
                coord[i] = shape_k(ctx, 0);
            else if (i == outer)
                coord[i] = sym_floordiv(sc, ix, acc);
            else
                coord[i] = sym_floormod(sc, sym_floordiv(sc, ix, acc), v->shape[i]);
            acc = sym_mul(sc, acc, v->shape[i]);
        }
        const sym_node *vok;
        s = shape_view_index(ctx, v, coord, &ix, &vok);
        ok = sym_and(sc, ok, vok);
    }
    if (s == KILN_OK)
        s = shape_sym_status(ctx);
    if (s != KILN_OK)
        return s;
    *index = ix;
    *valid = ok;
    return KILN_OK;
}

/* The indices in `shape` (the row-major layout t views) of the element that a one-view
 * tracker at offset 0 reads at idx, without going through the flat index: each view dim of nonzero
 * stride steps one dim j of the node by a constant m >= 1 (its stride m times j's row-major
 * stride), and the steps of the dims on j reach at most j's size - 1. Then flat = sum of idx[i]
 * strides[i] is exactly the row-major index of those indices, and they are the unravelled flat
 * index; found here, they skip a division and a modulo per dim, which by a symbolic size (a batch
 * Variable's rows, reshaped and permuted by a split reduction) the simplifier cannot undo
 * (engine/schedule/kernel.c reads a fused node through it).
 * false: not of that form (a reshape that merges dims, a flip or a pad's offset). */
bool shape_tracker_coords(shape_ctx *ctx, const shape_tracker *t, const sym_node *const *idx,
                          uint32_t ndim, const sym_node *const *shape, const sym_node **own) {
    const shape_view *v = shape_tracker_last(t);
    int64_t off;
    sym_ctx *sc = ctx->sym;
    if (!t || t->nviews != 1 || !sym_is_const(v->offset, &off) || off != 0 ||
        sym_ctx_status(sc) != KILN_OK)
        return false;
    const sym_node *step[SHAPE_MAX_DIMS], *reach[SHAPE_MAX_DIMS];
    const sym_node *acc = sym_const(sc, 1);
    for (uint32_t j = ndim; j-- > 0;) {
        int64_t size;
        if (sym_is_const(shape[j], &size) && size == 0)
            return false;
        step[j] = acc;
        own[j] = reach[j] = sym_const(sc, 0);
        acc = sym_mul(sc, acc, shape[j]);
    }
    bool ok = acc != NULL;
    for (uint32_t i = 0; i < v->ndim && ok; i++) {
        int64_t z;
        if (sym_is_const(v->strides[i], &z) && z == 0)
            continue;
        ok = false;
        for (uint32_t j = 0; j < ndim && !ok; j++) {
            int64_t m, one;
            if (sym_is_const(shape[j], &one) && one == 1)
                continue;
            const sym_node *q = sym_floordiv(sc, v->strides[i], step[j]);
            if (!q || !sym_is_const(q, &m) || m < 1 || sym_mul_c(sc, step[j], m) != v->strides[i])
                continue;
            own[j] = sym_add(sc, own[j], sym_mul_c(sc, idx[i], m));
            reach[j] = sym_add(sc, reach[j], sym_mul_c(sc, sym_add_c(sc, v->shape[i], -1), m));
            ok = true;
        }
    }
    for (uint32_t j = 0; j < ndim && ok; j++) {
        const sym_node *room = sym_sub(sc, sym_add_c(sc, shape[j], -1), reach[j]);
        ok = room && own[j] && sym_vmin(room) >= 0;
    }
    sym_ctx_clear_error(sc); /* a failed probe (an overflow) only means: unravel instead */
    return ok;
}

kiln_status shape_view_extent(shape_ctx *ctx, const shape_view *v, const sym_node **lo,
                              const sym_node **hi, bool *empty) {
    SHAPE_CHECK(shape_check_view(ctx, v));
    sym_ctx *sc = ctx->sym;
    *lo = *hi = NULL;
    *empty = false;
    for (uint32_t i = 0; i < v->ndim; i++) { /* bound values count: the extent is for now */
        int64_t n, b = 0, e = 1;
        if (shape_value(v->shape[i], &n) && n == 0)
            *empty = true;
        if (v->masked && shape_value(v->mask_begin[i], &b) && shape_value(v->mask_end[i], &e) &&
            e <= b)
            *empty = true;
    }
    if (*empty)
        return KILN_OK;
    const sym_node *a = v->offset, *b = v->offset;
    for (uint32_t i = 0; i < v->ndim; i++) {
        const sym_node *st = v->strides[i];
        if (shape_is(st, 0))
            continue;
        const sym_node *first = v->masked ? v->mask_begin[i] : shape_k(ctx, 0);
        const sym_node *last = sym_add_c(sc, v->masked ? v->mask_end[i] : v->shape[i], -1);
        const sym_node *x = sym_mul(sc, st, first), *y = sym_mul(sc, st, last);
        if (sym_vmin(st) >= 0) {
            a = sym_add(sc, a, x), b = sym_add(sc, b, y);
        } else if (sym_vmax(st) <= 0) {
            a = sym_add(sc, a, y), b = sym_add(sc, b, x);
        } else {
            a = sym_add(sc, a, sym_min(sc, x, y)), b = sym_add(sc, b, sym_max(sc, x, y));
        }
    }
    kiln_status s = shape_sym_status(ctx);
    if (s != KILN_OK)
        return s;
    *lo = a, *hi = b;
    return KILN_OK;
}

kiln_status shape_view_check_storage(shape_ctx *ctx, const shape_view *v,
                                     const sym_node *storage_size) {
    SHAPE_CHECK(shape_check_view(ctx, v));
    const sym_node *lo, *hi;
    bool empty;
    kiln_status s = shape_view_extent(ctx, v, &lo, &hi, &empty);
    if (s != KILN_OK || empty)
        return s;
    if (shape_refute_le(ctx, shape_k(ctx, 0), lo))
        return shape_fail(ctx, KILN_ERROR_OUT_OF_BOUNDS,
                          "the view addresses an element before the start of its storage");
    if (storage_size && shape_refute_le(ctx, sym_add_c(ctx->sym, hi, 1), storage_size))
        return shape_fail(ctx, KILN_ERROR_OUT_OF_BOUNDS,
                          "the view addresses an element past the end of its storage");
    return shape_sym_status(ctx);
}

/* ---- unbinding ---------------------------------------------------------------------------------
 */

typedef struct unbind_acc {
    const sym_node **vars;
    int64_t *values;
    size_t cap, found;
} unbind_acc;

/* n with its bound Variables replaced; new (Variable, value) pairs added to acc. */
static const sym_node *unbind_node(shape_ctx *ctx, const sym_node *n, unbind_acc *acc) {
    const sym_node *v[SHAPE_MAX_DIMS];
    int64_t x[SHAPE_MAX_DIMS];
    size_t f = 0;
    const sym_node *r = sym_unbind_all(ctx->sym, n, v, x, SHAPE_MAX_DIMS, &f);
    for (size_t i = 0; r && i < f && i < SHAPE_MAX_DIMS; i++) {
        bool seen = false;
        for (size_t j = 0; j < acc->found && j < acc->cap && !seen; j++)
            seen = acc->vars[j] == v[i];
        if (seen)
            continue;
        if (acc->found < acc->cap)
            acc->vars[acc->found] = v[i], acc->values[acc->found] = x[i];
        acc->found++;
    }
    return r;
}

static void unbind_view(shape_ctx *ctx, shape_view *v, unbind_acc *acc) {
    v->offset = unbind_node(ctx, v->offset, acc);
    v->user_offset = unbind_node(ctx, v->user_offset, acc);
    for (uint32_t i = 0; i < v->ndim; i++) {
        v->shape[i] = unbind_node(ctx, v->shape[i], acc);
        v->strides[i] = unbind_node(ctx, v->strides[i], acc);
        v->user_strides[i] = unbind_node(ctx, v->user_strides[i], acc);
        if (v->masked) {
            v->mask_begin[i] = unbind_node(ctx, v->mask_begin[i], acc);
            v->mask_end[i] = unbind_node(ctx, v->mask_end[i], acc);
        }
    }
    shape_canon(ctx, v);
}

kiln_status shape_tracker_unbind(shape_ctx *ctx, const shape_tracker *in, shape_tracker *out,
                                 const sym_node **vars, int64_t *values, size_t cap,
                                 size_t *found) {
    SHAPE_CHECK(shape_check_tracker(ctx, in));
    if (cap && (!vars || !values))
        return shape_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "unbind: vars/values missing");
    unbind_acc acc = {vars, values, cap, 0};
    shape_tracker t = *in;
    for (uint32_t k = 0; k < t.nviews; k++) {
        unbind_view(ctx, &t.views[k], &acc);
        SHAPE_CHECK(shape_finish(ctx, &t.views[k], &t.views[k]));
    }
    *out = t;
    if (found)
        *found = acc.found;
    return KILN_OK;
}
