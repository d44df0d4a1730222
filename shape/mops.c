/* Movement ops: applying them to a tracker, and rebuilding any single view from a contiguous
 * base without as_strided.
 *
 * The rebuild of a view V (constant strides) from a 1-D base of V's highest element + 1:
 *   1. shrink the base to [lo, hi]: the span of elements V addresses inside its mask;
 *   2. for each dimension with a nonzero stride and more than one valid index, largest |stride|
 *      first, unfold the last axis with step |stride| and the window that the remaining
 *      dimensions still need: overlapping windows come out naturally, and each unfold stays one
 *      view (tinygrad reaches the same layouts with pad + reshape + shrink; unfold is the
 *      native op here);
 *   3. reshape to add the size-1 dimensions, permute into V's order, expand the zero-stride
 *      dimensions, flip the negative-stride dimensions, and pad back V's mask.
 * The result is checked against V. */
#include "shape_internal.h"

#include <string.h>

static kiln_status apply_view_op(shape_ctx *ctx, const shape_view *in, const shape_op *op,
                                 shape_view *out) {
    switch (op->kind) {
    case SHAPE_OP_PERMUTE:
        if (op->ndim != in->ndim)
            break;
        return shape_view_permute(ctx, in, op->axes, out);
    case SHAPE_OP_EXPAND:
        if (op->ndim != in->ndim)
            break;
        return shape_view_expand(ctx, in, op->a, out);
    case SHAPE_OP_PAD:
        if (op->ndim != in->ndim)
            break;
        return shape_view_pad(ctx, in, op->a, op->b, out);
    case SHAPE_OP_SHRINK:
        if (op->ndim != in->ndim)
            break;
        return shape_view_shrink(ctx, in, op->a, op->b, out);
    case SHAPE_OP_FLIP:
        return shape_view_flip(ctx, in, op->axes[0], out);
    case SHAPE_OP_UNFOLD:
        return shape_view_unfold(ctx, in, op->axes[0], op->a[0], op->b[0], out);
    case SHAPE_OP_RESHAPE:
        break;
    }
    return shape_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "movement op: wrong kind or rank");
}

kiln_status shape_tracker_apply(shape_ctx *ctx, const shape_tracker *in, const shape_op *op,
                                shape_tracker *out) {
    SHAPE_CHECK(shape_check_tracker(ctx, in));
    if (op->kind == SHAPE_OP_RESHAPE)
        return shape_tracker_reshape(ctx, in, op->ndim, op->a, out);
    shape_view v;
    kiln_status s = apply_view_op(ctx, shape_tracker_last(in), op, &v);
    if (s != KILN_OK)
        return s;
    return shape_tracker_replace_last(ctx, in, &v, out);
}

/* ---- building the op list -------------------------------------------------------------------- */

typedef struct opbuf {
    shape_op *ops;
    uint32_t cap, n;
    bool overflow;
} opbuf;

static shape_op *push(opbuf *b, shape_op_kind kind, uint32_t ndim) {
    if (b->n >= b->cap) {
        b->overflow = true;
        return NULL;
    }
    shape_op *op = &b->ops[b->n++];
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    op->ndim = ndim;
    return op;
}

typedef struct layout {
    uint32_t n;
    int64_t shape[SHAPE_MAX_DIMS], stride[SHAPE_MAX_DIMS], b[SHAPE_MAX_DIMS], e[SHAPE_MAX_DIMS];
    int64_t offset;
    int64_t real[SHAPE_MAX_DIMS]; /* e - b */
} layout;

static bool read_layout(const shape_view *v, layout *l) {
    l->n = v->ndim;
    if (!sym_is_const(v->offset, &l->offset))
        return false;
    for (uint32_t i = 0; i < v->ndim; i++) {
        if (!sym_is_const(v->shape[i], &l->shape[i]) || !sym_is_const(v->strides[i], &l->stride[i]))
            return false;
        l->b[i] = 0, l->e[i] = l->shape[i];
        if (v->masked &&
            (!sym_is_const(v->mask_begin[i], &l->b[i]) || !sym_is_const(v->mask_end[i], &l->e[i])))
            return false;
        l->real[i] = l->e[i] - l->b[i];
    }
    return true;
}

/* The lowest element addressed and the span up to the highest; false on overflow. */
static bool layout_span(const layout *l, int64_t *lo, int64_t *span) {
    int64_t q = l->offset, s = 1, t;
    for (uint32_t i = 0; i < l->n; i++) {
        int64_t a = l->stride[i], r = l->real[i] - 1;
        if (__builtin_mul_overflow(l->b[i], a, &t) || __builtin_add_overflow(q, t, &q) ||
            __builtin_mul_overflow(r, a, &t))
            return false;
        if (a < 0 && __builtin_add_overflow(q, t, &q))
            return false;
        if (__builtin_add_overflow(s, t < 0 ? -t : t, &s))
            return false;
    }
    *lo = q, *span = s;
    return __builtin_add_overflow(q, s, &t) == 0;
}

static void emit_unfolds(shape_ctx *ctx, opbuf *b, const layout *l, uint32_t *ord, uint32_t k,
                         int64_t span) {
    int64_t rest = span;
    for (uint32_t j = 0; j < k; j++) {
        uint32_t d = ord[j];
        int64_t a = l->stride[d] < 0 ? -l->stride[d] : l->stride[d];
        rest -= (l->real[d] - 1) * a;
        shape_op *op = push(b, SHAPE_OP_UNFOLD, 0);
        if (!op)
            return;
        op->axes[0] = (int32_t)j; /* the last axis so far */
        op->a[0] = shape_k(ctx, rest);
        op->b[0] = shape_k(ctx, a);
    }
}

/* Dims with a real stride and more than one valid index, |stride| descending. */
static uint32_t real_dims(const layout *l, uint32_t *ord) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < l->n; i++)
        if (l->stride[i] != 0 && l->real[i] > 1)
            ord[k++] = i;
    for (uint32_t i = 1; i < k; i++)
        for (uint32_t j = i; j > 0; j--) {
            int64_t x = l->stride[ord[j - 1]], y = l->stride[ord[j]];
            if ((x < 0 ? -x : x) >= (y < 0 ? -y : y))
                break;
            uint32_t t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    return k;
}

static void emit_arrange(shape_ctx *ctx, opbuf *b, const layout *l, const uint32_t *ord,
                         uint32_t k) {
    /* (r_ord..., 1) -> (r_ord..., 1 x (n-k)), then permute into place */
    int32_t pos[SHAPE_MAX_DIMS];
    bool used[SHAPE_MAX_DIMS] = {0};
    shape_op *r = push(b, SHAPE_OP_RESHAPE, l->n);
    if (!r)
        return;
    for (uint32_t j = 0; j < k; j++) {
        r->a[j] = shape_k(ctx, l->real[ord[j]]);
        pos[ord[j]] = (int32_t)j;
        used[ord[j]] = true;
    }
    uint32_t next = k;
    for (uint32_t i = 0; i < l->n; i++) {
        if (!used[i]) {
            r->a[next] = shape_k(ctx, 1);
            pos[i] = (int32_t)next++;
        }
    }
    shape_op *p = push(b, SHAPE_OP_PERMUTE, l->n);
    if (p)
        memcpy(p->axes, pos, l->n * sizeof(*pos));
}

static void emit_finish(shape_ctx *ctx, opbuf *b, const layout *l, const uint32_t *ord,
                        uint32_t k) {
    bool real[SHAPE_MAX_DIMS] = {0}, any_expand = false, any_mask = false;
    for (uint32_t j = 0; j < k; j++)
        real[ord[j]] = true;
    shape_op *e = push(b, SHAPE_OP_EXPAND, l->n);
    for (uint32_t i = 0; e && i < l->n; i++) {
        e->a[i] = shape_k(ctx, real[i] ? l->real[i] : (l->real[i] > 1 ? l->real[i] : 1));
        any_expand = any_expand || (!real[i] && l->real[i] > 1);
    }
    if (e && !any_expand)
        b->n--;
    for (uint32_t i = 0; i < l->n; i++) {
        if (real[i] && l->stride[i] < 0) {
            shape_op *f = push(b, SHAPE_OP_FLIP, 0);
            if (f)
                f->axes[0] = (int32_t)i;
        }
        any_mask = any_mask || l->real[i] != l->shape[i];
    }
    if (!any_mask)
        return;
    shape_op *p = push(b, SHAPE_OP_PAD, l->n);
    for (uint32_t i = 0; p && i < l->n; i++) {
        p->a[i] = shape_k(ctx, l->b[i]);
        p->b[i] = shape_k(ctx, l->shape[i] - l->e[i]);
    }
}

/* A view with no valid element: shape (0,) reshaped, padded out. */
static void emit_empty(shape_ctx *ctx, opbuf *b, const layout *l, bool zero_size) {
    shape_op *r = push(b, SHAPE_OP_RESHAPE, l->n);
    for (uint32_t i = 0; r && i < l->n; i++)
        r->a[i] = shape_k(ctx, zero_size ? l->shape[i] : (i == 0 ? 0 : 1));
    if (zero_size)
        return;
    shape_op *p = push(b, SHAPE_OP_PAD, l->n);
    for (uint32_t i = 0; p && i < l->n; i++) {
        p->a[i] = shape_k(ctx, 0);
        p->b[i] = shape_k(ctx, i == 0 ? l->shape[i] : l->shape[i] - 1);
    }
}

static bool view_is_empty(const layout *l, bool *zero_size) {
    *zero_size = false;
    bool empty = false;
    for (uint32_t i = 0; i < l->n; i++) {
        *zero_size = *zero_size || l->shape[i] == 0;
        empty = empty || l->real[i] <= 0;
    }
    return empty || *zero_size;
}

static kiln_status verify(shape_ctx *ctx, const shape_view *v, const shape_op *ops, uint32_t n,
                          int64_t base) {
    const sym_node *bs = shape_k(ctx, base);
    shape_view b;
    shape_tracker t;
    kiln_status s = shape_view_contiguous(ctx, 1, &bs, &b);
    if (s == KILN_OK)
        s = shape_tracker_from_view(&b, &t);
    for (uint32_t i = 0; s == KILN_OK && i < n; i++)
        s = shape_tracker_apply(ctx, &t, &ops[i], &t);
    if (s != KILN_OK)
        return s;
    if (t.nviews != 1 || !shape_view_equal(&t.views[0], v))
        return shape_fail(ctx, KILN_ERROR_INTERNAL, "to_movement_ops: rebuilt view differs");
    return KILN_OK;
}

kiln_status shape_view_to_movement_ops(shape_ctx *ctx, const shape_view *v, shape_op *ops,
                                       uint32_t cap, uint32_t *count, int64_t *base_size) {
    SHAPE_CHECK(shape_check_view(ctx, v));
    layout l;
    if (!read_layout(v, &l))
        return shape_fail(ctx, KILN_ERROR_UNSUPPORTED, "to_movement_ops: symbolic view");
    opbuf b = {ops, cap, 0, false};
    bool zero_size;
    int64_t lo = 0, span = 0;
    if (view_is_empty(&l, &zero_size)) {
        emit_empty(ctx, &b, &l, zero_size);
    } else {
        if (!layout_span(&l, &lo, &span))
            return shape_fail(ctx, KILN_ERROR_OVERFLOW, "to_movement_ops: extent overflows");
        if (lo < 0)
            return shape_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                              "to_movement_ops: the view addresses a negative element");
        shape_op *sh = push(&b, SHAPE_OP_SHRINK, 1);
        if (sh)
            sh->a[0] = shape_k(ctx, lo), sh->b[0] = shape_k(ctx, lo + span);
        uint32_t ord[SHAPE_MAX_DIMS];
        uint32_t k = real_dims(&l, ord);
        if (k >= SHAPE_MAX_DIMS) /* the unfold chain carries one extra (window) dimension */
            return shape_fail(ctx, KILN_ERROR_LIMIT_EXCEEDED,
                              "to_movement_ops: %u moving dimensions (at most %d)", k,
                              (int)SHAPE_MAX_DIMS - 1);
        emit_unfolds(ctx, &b, &l, ord, k, span);
        emit_arrange(ctx, &b, &l, ord, k);
        emit_finish(ctx, &b, &l, ord, k);
    }
    if (b.overflow)
        return shape_fail(ctx, KILN_ERROR_LIMIT_EXCEEDED, "to_movement_ops: more than %u ops", cap);
    kiln_status s = shape_sym_status(ctx);
    if (s == KILN_OK)
        s = verify(ctx, v, ops, b.n, lo + span);
    if (s != KILN_OK)
        return s;
    *count = b.n;
    *base_size = lo + span;
    return KILN_OK;
}
