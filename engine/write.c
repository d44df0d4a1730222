/* Writes through views: copy_ and the in-place ops. A write is a graph node like any other
 * (lazy); its kernel stores into the storage it overwrites, element by element of the
 * destination view. Program order: the written node forwards every later use of its storage
 * (eng_resolve), and readers built before it are realized before it runs (realize.c). */
#include "eng.h"

#include <string.h>

/* Why dst cannot be written, or NULL. */
static const char *unwritable(kiln_context *ctx, const kiln_tensor *dst) {
    const shape_view *v = shape_tracker_last(dst->st);
    if (dst->st->nviews != 1)
        return "it is not a view of one storage";
    if (v->masked)
        return "it is padded (padding has no storage to write)";
    switch (shape_view_self_alias(ctx->shape, v)) {
    case SHAPE_ALIAS_NONE:
        return NULL;
    case SHAPE_ALIAS_YES:
        return "two of its elements are one storage element (the writes would race)";
    default:
        return "two of its elements may be one storage element (not provably distinct)";
    }
}

kiln_status kiln_copy_(kiln_tensor *dst, kiln_tensor *src) {
    if (!dst || !src)
        return dst ? (dst->ctx->err.status ? dst->ctx->err.status : KILN_ERROR_INVALID_ARGUMENT)
                   : KILN_ERROR_INVALID_ARGUMENT;
    kiln_context *ctx = dst->ctx;
    kiln_status sticky = eng_call_begin(ctx);
    if (sticky != KILN_OK)
        return sticky;
    if (src->ctx != ctx)
        return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_copy_: tensors of different contexts");
    const char *why = unwritable(ctx, dst);
    if (why)
        return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_copy_: the destination cannot be written: %s", why);
    const shape_view *v = shape_tracker_last(dst->st);
    eng_node *target = eng_resolve(dst);
    /* src broadcast to dst's shape, in dst's dtype. */
    kiln_tensor *value = kiln_expand_sym(src, v->ndim, (const kiln_expr *const *)v->shape);
    if (!value)
        return ctx->err.status;
    if (value->base->type != target->type) {
        value = eng_elementwise(ctx, IR_CAST, target->type, 1, &value);
        if (!value)
            return ctx->err.status;
    }
    eng_node *w = eng_node_new(ctx, ENG_WRITE, IR_CONST, target->type, target->ndim, target->shape);
    const shape_tracker *whole = eng_tracker_contiguous(ctx, target->ndim, target->shape);
    if (!w || !whole)
        return ctx->err.status;
    w->nsrc = 2;
    w->src[0] = (eng_src){target, whole};
    w->src[1] = (eng_src){eng_resolve(value), value->st};
    w->dst_view = dst->st;
    kiln_status st = eng_register_readers(ctx, w);
    if (st != KILN_OK)
        return st;
    target->written_by = w; /* every later use of this storage reads the write's result */
    return KILN_OK;
}

kiln_status kiln_add_(kiln_tensor *dst, kiln_tensor *src) {
    if (!dst)
        return KILN_ERROR_INVALID_ARGUMENT;
    return kiln_copy_(dst, kiln_add(dst, src));
}

kiln_status kiln_mul_(kiln_tensor *dst, kiln_tensor *src) {
    if (!dst)
        return KILN_ERROR_INVALID_ARGUMENT;
    return kiln_copy_(dst, kiln_mul(dst, src));
}

kiln_status kiln_fill_(kiln_tensor *dst, double value) {
    if (!dst)
        return KILN_ERROR_INVALID_ARGUMENT;
    return kiln_copy_(dst, eng_full(dst->ctx, dst->base->type, 0, NULL, value, NULL));
}
