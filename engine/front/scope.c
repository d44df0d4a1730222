/* Scopes: memory for loops. Every tensor handle belongs to the innermost scope open when it
 * was made (depth 0: outside any scope). kiln_scope_end releases the handles of the innermost
 * scope but those kept, which join the enclosing scope; what the released handles alone held
 * (nodes, storages) is freed with them (lifetime.c). */
#include "eng.h"

#include <stdio.h>

void kiln_scope_begin(kiln_context *ctx) {
    if (!ctx)
        return;
    if (ctx->scope_depth == UINT32_MAX)
        eng_fail(ctx, KILN_ERROR_LIMIT_EXCEEDED, "kiln_scope_begin: too many nested scopes");
    else
        ctx->scope_depth++;
}

kiln_status kiln_scope_end(kiln_context *ctx, uint32_t keep_count, kiln_tensor *const *keep) {
    if (!ctx)
        return KILN_ERROR_INVALID_ARGUMENT;
    if (ctx->scope_depth == 0)
        return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_scope_end: no scope is open (kiln_scope_begin)");
    if (keep_count > 0 && !keep)
        return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_scope_end: keep is NULL with keep_count %u", keep_count);
    /* Every kept handle is checked before anything changes: a bad one refuses the call. */
    for (uint32_t i = 0; i < keep_count; i++) {
        kiln_context *owner = ctx;
        kiln_status st;
        if (keep[i] && !eng_arg_status(keep[i], &owner, "kiln_scope_end", &st)) {
            char why[256];
            snprintf(why, sizeof why, "%s", kiln_context_message(ctx));
            return base_error_reset(&ctx->err, st, "%s (keep[%u])", why, i);
        }
    }
    eng_log_enter(ctx);
    uint32_t depth = ctx->scope_depth;
    for (uint32_t i = 0; i < keep_count; i++) {
        eng_tensor *t = keep[i] ? eng_t(keep[i]) : NULL;
        if (t && t->scope == depth)
            t->scope = depth - 1; /* joins the enclosing scope */
    }
    for (uint32_t c = 0; c < ctx->slot_chunk_count; c++) {
        eng_tensor *chunk = ctx->slot_chunks[c];
        for (uint32_t i = 0; i < ENG_SLOT_CHUNK; i++) {
            if (chunk[i].live && chunk[i].scope == depth)
                eng_tensor_release(ctx, &chunk[i]);
        }
    }
    ctx->scope_depth--;
    /* The scope's expressions go too, and every expression nothing uses any more. */
    eng_unpin_to(ctx, ctx->scope_depth);
    eng_collect_expressions(ctx, false);
    eng_log_leave(ctx);
    return KILN_OK;
}
