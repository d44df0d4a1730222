/* Writes through views: copy_ and the in-place ops. A write is a graph node like any other
 * (lazy); its kernel stores into the storage it overwrites, element by element of the
 * destination view. Program order: the write node becomes the current value of the storage
 * (its cell), so every later use reads it, and readers built before it are realized before it
 * runs (realize.c). */
#include "eng.h"

#include <stdio.h>
#include <string.h>

/* Why dst cannot be written, or NULL; *status receives the class of the refusal. */
static const char *unwritable(kiln_context *ctx, kiln_tensor *dst, kiln_status *status) {
    const shape_view *v = shape_tracker_last(ENG_ST(dst));
    *status = KILN_ERROR_NOT_VIEWABLE;
    if (ENG_ST(dst)->nviews != 1)
        return "it is not a view of one storage (a reshape that needed a copy)";
    if (v->masked)
        return "it is padded (padding has no storage to write)";
    *status = KILN_ERROR_OVERLAP;
    switch (shape_view_self_alias(ctx->shape, v)) {
    case SHAPE_ALIAS_NONE:
        return NULL;
    case SHAPE_ALIAS_YES:
        return "two of its elements are one storage element (the writes would race)";
    default:
        return "two of its elements may be one storage element (not provably distinct)";
    }
}

/* The node a write to dst overwrites: dst's storage's current value, made private first when
 * another storage shares it (hash-consing made two equal computations one node: a write to
 * one of them must not reach the other). */
static eng_node *write_target(kiln_context *ctx, eng_tensor *dst) {
    eng_node *target = dst->cell->node;
    if (target->cells > 1) {
        eng_node *copy =
            eng_node_copy(ctx, target, eng_tracker_contiguous(ctx, target->ndim, target->shape),
                          target->ndim, target->shape);
        if (!copy)
            return NULL;
        eng_cell_set(ctx, dst, copy);
        target = copy;
    }
    /* Its value stops being the current value of a storage: no computation built from now on
     * may find it by hash-consing. */
    target->written = true;
    if (target->interned) {
        base_map_remove(&ctx->nodes, target->hash, target, eng_node_same, NULL);
        target->interned = false;
    }
    return target;
}

/* The write node storing value into dst's view; dst's storage then reads it. */
static kiln_status write_node(kiln_context *ctx, eng_tensor *dst, kiln_tensor *value) {
    eng_node *target = write_target(ctx, dst);
    if (!target)
        return ctx->err.status;
    eng_node *w = eng_node_new(ctx, ENG_WRITE, IR_CONST, target->type, target->ndim, target->shape);
    if (!w)
        return ctx->err.status;
    w->nsrc = 2;
    w->src[0] = (eng_src){target, eng_tracker_contiguous(ctx, target->ndim, target->shape), 0};
    w->src[1] = (eng_src){eng_resolve(value), eng_tracker_keep(ctx, ENG_ST(value)), 0};
    w->dst_view = eng_tracker_keep(ctx, dst->st);
    if (!w->src[0].st || !w->src[1].st || !w->dst_view) {
        eng_node_discard(ctx, w);
        return ctx->err.status;
    }
    /* Every later use of this storage reads the write's result. */
    eng_cell_set(ctx, dst, eng_node_adopt(ctx, w));
    eng_ag_written(dst->cell);
    return KILN_OK;
}

/* A graph-building error met inside a write call becomes that call's own failure (not sticky),
 * its message prefixed with what the call could not do. */
static kiln_status refused(kiln_context *ctx, const char *call, const char *what) {
    ctx->sticky = false;
    kiln_status st = ctx->err.status ? ctx->err.status : KILN_ERROR_OUT_OF_HOST_MEMORY;
    char cause[BASE_ERROR_MESSAGE_MAX];
    snprintf(cause, sizeof cause, "%s", base_error_message(&ctx->err));
    base_error_clear(&ctx->err);
    size_t n = strlen(call);
    if (strncmp(cause, call, n) == 0 && cause[n] == ':') /* it names the call already */
        memmove(cause, cause + n + 1 + (cause[n + 1] == ' '), strlen(cause + n + 1) + 1);
    if (what)
        return base_error_set(&ctx->err, st, "%s: %s: %s", call, what, cause);
    return base_error_set(&ctx->err, st, "%s: %s", call, cause);
}

static kiln_status copy_impl(kiln_context *ctx, const char *call, kiln_tensor *dst,
                             kiln_tensor *src) {
    kiln_status refusal;
    const char *why = unwritable(ctx, dst, &refusal);
    if (why)
        return base_error_set(&ctx->err, refusal, "%s: the destination cannot be written: %s", call,
                              why);
    const shape_view *v = shape_tracker_last(ENG_ST(dst));
    ir_type type = eng_resolve(dst)->type;
    /* src broadcast to dst's shape, in dst's dtype. */
    kiln_tensor *value = eng_expand(src, v->ndim, v->shape);
    if (value && ENG_BASE(value)->type != type)
        value = eng_elementwise(ctx, IR_CAST, type, 1, &value);
    if (!value)
        return refused(ctx, call, "the source cannot be written to the destination");
    return write_node(ctx, eng_t(dst), value);
}

/* Runs a write call: checked handles, the sticky error first, intermediates released. */
static kiln_status run_write(const char *call, kiln_tensor *dst, kiln_tensor *src, int kind,
                             double value) {
    kiln_context *ctx = NULL;
    kiln_status st;
    if (!eng_arg_status(dst, &ctx, call, &st))
        return st;
    if (kind != 3 && !eng_arg_status(src, &ctx, call, &st))
        return st;
    st = eng_call_begin(ctx);
    if (st != KILN_OK)
        return st;
    ctx->call = call; /* a shape error of the source names the write */
    size_t mark = eng_temps_begin(ctx);
    switch (kind) {
    case 0:
        st = copy_impl(ctx, call, dst, src);
        break;
    case 1:
    case 2: {
        kiln_tensor *r = kind == 1 ? kiln_add(dst, src) : kiln_mul(dst, src);
        if (!r)
            st = refused(ctx, call, NULL);
        else
            st = copy_impl(ctx, call, dst, r);
        break;
    }
    default: {
        ir_type type = eng_resolve(dst)->type;
        if (!eng_value_fits(ctx, call, type, value))
            st = refused(ctx, call, NULL);
        else
            st = copy_impl(ctx, call, dst, eng_full(ctx, type, 0, NULL, value, NULL));
        break;
    }
    }
    eng_temps_end(ctx, mark, NULL);
    return st;
}

kiln_status kiln_copy_(kiln_tensor *dst, kiln_tensor *src) {
    return run_write("kiln_copy_", dst, src, 0, 0.0);
}

kiln_status kiln_add_(kiln_tensor *dst, kiln_tensor *src) {
    return run_write("kiln_add_", dst, src, 1, 0.0);
}

kiln_status kiln_mul_(kiln_tensor *dst, kiln_tensor *src) {
    return run_write("kiln_mul_", dst, src, 2, 0.0);
}

kiln_status kiln_fill_(kiln_tensor *dst, double value) {
    return run_write("kiln_fill_", dst, NULL, 3, value);
}
