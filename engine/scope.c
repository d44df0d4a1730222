/* Scopes and the collector: what the program no longer reaches gives its storage back.
 *
 * Every tensor handle belongs to the innermost scope open when it was made (the context's
 * outermost scope lasts as long as the context). kiln_scope_end kills the scope's handles but
 * those kept, and then collects: the roots are the live handles; a node is reached from its
 * handle and, while it is not realized, through its sources. Storage no reached node holds is
 * freed, and unreached nodes leave the hash-consing table (a new, equal computation builds
 * fresh nodes rather than finding collected ones). */
#include "eng.h"

#include <string.h>

static void mark_node(eng_node *n, uint64_t stamp) {
    while (n && n->mark != stamp) {
        n->mark = stamp;
        if (n->storage)
            n->storage->mark = stamp;
        if (n->storage)
            return; /* realized: its sources are no longer needed (a write's storage is its
                       target's, marked here) */
        for (uint32_t i = 1; i < n->nsrc; i++)
            mark_node(n->src[i].node, stamp);
        n = n->nsrc ? n->src[0].node : NULL;
    }
}

/* Frees storage no live handle reaches; returns the number of storages freed. */
static size_t collect(kiln_context *ctx) {
    uint64_t stamp = ++ctx->next_mark;
    for (size_t i = 0; i < ctx->handles.len; i++)
        mark_node(eng_resolve(ctx->handles.data[i]), stamp);
    /* Unreached nodes leave the table. */
    BASE_VEC(eng_node *) gone = {0};
    void *v;
    for (size_t cursor = 0; base_map_next(&ctx->nodes, &cursor, &v);) {
        eng_node *n = v;
        if (n->mark != stamp && BASE_VEC_PUSH(&ctx->alloc, &gone, n) != KILN_OK)
            break; /* out of memory: collect less this time */
    }
    for (size_t i = 0; i < gone.len; i++) {
        eng_node *n = gone.data[i];
        base_map_remove(&ctx->nodes, n->hash, n, eng_node_same, NULL);
        n->released = true;
        n->storage = NULL;
    }
    BASE_VEC_FREE(&ctx->alloc, &gone);
    size_t freed = 0;
    for (eng_storage **link = &ctx->storage_list; *link;) {
        eng_storage *s = *link;
        if (s->mark == stamp) {
            link = &s->next;
            continue;
        }
        *link = s->next;
        eng_storage_release(ctx, s);
        base_free(&ctx->alloc, s, sizeof *s);
        freed++;
    }
    return freed;
}

void kiln_scope_begin(kiln_context *ctx) {
    if (!ctx)
        return;
    if (BASE_VEC_PUSH(&ctx->alloc, &ctx->scopes, ctx->handles.len) != KILN_OK)
        eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "kiln_scope_begin: no memory");
}

kiln_status kiln_scope_end(kiln_context *ctx, uint32_t keep_count, kiln_tensor *const *keep) {
    if (!ctx)
        return KILN_ERROR_INVALID_ARGUMENT;
    if (ctx->scopes.len == 0)
        return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_scope_end without kiln_scope_begin");
    size_t start = ctx->scopes.data[--ctx->scopes.len];
    for (uint32_t i = 0; i < keep_count; i++) {
        if (keep[i])
            keep[i]->dead = false, keep[i]->ctx = ctx;
    }
    /* The scope's handles die, except those kept: they move to the enclosing scope. */
    size_t out = start;
    for (size_t i = start; i < ctx->handles.len; i++) {
        kiln_tensor *t = ctx->handles.data[i];
        bool kept = false;
        for (uint32_t j = 0; j < keep_count && !kept; j++)
            kept = keep[j] == t;
        if (kept)
            ctx->handles.data[out++] = t;
        else
            t->dead = true;
    }
    ctx->handles.len = out;
    ctx->stats.storages_freed += collect(ctx);
    return KILN_OK;
}
