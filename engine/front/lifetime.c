/* Lifetime: tensor handles, cells and the references between them, nodes and storages.
 *
 * A kiln_tensor * is not a pointer. It encodes the context's registry index, a slot of the
 * context's handle table and the slot's generation, so a released handle (or one of another
 * or a destroyed context) is detected without touching freed memory:
 *
 *     bits 55..63  registry index (1..511)   bits 32..54  generation   bits 0..31  slot
 *
 * A handle holds a cell (the tensors that view one storage); the cell holds its current node;
 * an unrealized node holds its sources, a realized one its storage. What nothing holds any
 * more is freed at once: a node's sources are freed after it, iteratively (a node being freed
 * is off the live list, so its list link serves as the work stack: no recursion, no
 * allocation).
 *
 * A const kiln_expr * is encoded the same way, from a table of expression entries (one per
 * symbolic node handed out). An entry is pinned by the scope it was made in (outside any
 * scope: until a Variable it binds is bound to another value outside any scope; for ever
 * when it binds none); collection frees the nodes nothing pins or uses, and their entries
 * with them, so a stale expression handle is refused like a released tensor's. */
#include "eng.h"

#include <stdatomic.h>
#include <string.h>

_Static_assert(sizeof(uintptr_t) == 8, "tensor handles encode 64 bits");

enum { REGISTRY_SIZE = 512, GEN_BITS = 23 };
#define GEN_MASK ((UINT32_C(1) << GEN_BITS) - 1)

static _Atomic(kiln_context *) registry[REGISTRY_SIZE];
static atomic_uint next_registry;   /* where the next search for a free index starts */
static atomic_uint next_generation; /* first generation of a new slot chunk */

kiln_status eng_registry_add(kiln_context *ctx) {
    unsigned start = atomic_fetch_add(&next_registry, 1);
    for (unsigned k = 0; k < REGISTRY_SIZE; k++) {
        unsigned i = 1 + (start + k) % (REGISTRY_SIZE - 1);
        kiln_context *expected = NULL;
        if (atomic_compare_exchange_strong(&registry[i], &expected, ctx)) {
            ctx->registry_index = i;
            return KILN_OK;
        }
    }
    return base_error_set(&ctx->err, KILN_ERROR_LIMIT_EXCEEDED,
                          "kiln_context_create: %d contexts exist at once (the most)",
                          REGISTRY_SIZE - 1);
}

void eng_registry_remove(kiln_context *ctx) {
    if (ctx->registry_index)
        atomic_store(&registry[ctx->registry_index], NULL);
    ctx->registry_index = 0;
}

static kiln_tensor *encode(uint32_t reg, uint32_t slot, uint32_t gen) {
    return (kiln_tensor *)(uintptr_t)(((uint64_t)reg << 55) | ((uint64_t)(gen & GEN_MASK) << 32) |
                                      slot);
}

static eng_tensor *slot_at(const kiln_context *ctx, uint32_t slot) {
    return &ctx->slot_chunks[slot / ENG_SLOT_CHUNK][slot % ENG_SLOT_CHUNK];
}

/* The slot h names if it is live; *owner receives the context it names (NULL: none). */
static eng_tensor *decode(kiln_tensor *h, kiln_context **owner) {
    uint64_t v = (uint64_t)(uintptr_t)h;
    uint32_t reg = (uint32_t)(v >> 55), gen = (uint32_t)(v >> 32) & GEN_MASK, slot = (uint32_t)v;
    *owner = reg > 0 && reg < REGISTRY_SIZE ? atomic_load(&registry[reg]) : NULL;
    if (!*owner || slot >= (*owner)->slot_count)
        return NULL;
    eng_tensor *t = slot_at(*owner, slot);
    return t->live && t->gen == gen ? t : NULL;
}

eng_tensor *eng_t(kiln_tensor *h) {
    kiln_context *owner;
    return h ? decode(h, &owner) : NULL;
}

static eng_tensor *check(kiln_tensor *h, kiln_context **ctx, const char *call, bool sticky) {
    if (!h)
        return NULL;
    kiln_context *owner;
    eng_tensor *t = decode(h, &owner);
    kiln_context *report = *ctx ? *ctx : owner;
    const char *why = NULL;
    if (*ctx && owner && owner != *ctx)
        why = "a tensor of another context";
    else if (!t)
        why = "a tensor used after it was released (kiln_release, or the end of its scope), or "
              "not a tensor";
    if (why) {
        *ctx = report;
        if (report && sticky)
            eng_fail(report, KILN_ERROR_INVALID_HANDLE, "%s: %s", call, why);
        else if (report)
            base_error_set(&report->err, KILN_ERROR_INVALID_HANDLE, "%s: %s", call, why);
        return NULL;
    }
    *ctx = owner;
    return t;
}

eng_tensor *eng_arg(kiln_tensor *h, kiln_context **ctx, const char *call) {
    return check(h, ctx, call, true);
}

eng_tensor *eng_arg_status(kiln_tensor *h, kiln_context **ctx, const char *call,
                           kiln_status *status) {
    kiln_context *known = *ctx;
    eng_tensor *t = check(h, ctx, call, false);
    if (!t) {
        if (!h && *ctx)
            base_error_set(&(*ctx)->err, KILN_ERROR_INVALID_ARGUMENT, "%s: no tensor", call);
        kiln_status fallback = h ? KILN_ERROR_INVALID_HANDLE : KILN_ERROR_INVALID_ARGUMENT;
        *status = *ctx ? (*ctx)->err.status : fallback;
        if (*status == KILN_OK)
            *status = fallback;
        if (!*ctx)
            *ctx = known;
    }
    return t;
}

/* ---- slots --------------------------------------------------------------------------------- */

static bool grow_slots(kiln_context *ctx) {
    if (ctx->slot_count > UINT32_MAX - 2 * ENG_SLOT_CHUNK)
        return false;
    size_t n = ctx->slot_chunk_count;
    eng_tensor *chunk = base_calloc(&ctx->alloc, ENG_SLOT_CHUNK, sizeof *chunk);
    if (!chunk)
        return false;
    eng_tensor **chunks =
        base_realloc(&ctx->alloc, ctx->slot_chunks, n * sizeof *chunks, (n + 1) * sizeof *chunks);
    if (!chunks) {
        base_free(&ctx->alloc, chunk, ENG_SLOT_CHUNK * sizeof *chunk);
        return false;
    }
    ctx->slot_chunks = chunks;
    chunks[n] = chunk;
    ctx->slot_chunk_count++;
    /* Generations start apart in every chunk of every context: a stale handle of another
     * context that got this registry index does not match by chance. */
    uint32_t gen = atomic_fetch_add(&next_generation, 7919u);
    for (uint32_t i = ENG_SLOT_CHUNK; i-- > 0;) {
        chunk[i].gen = gen & GEN_MASK;
        chunk[i].next_free = ctx->free_slot;
        ctx->free_slot = ctx->slot_count + i;
    }
    ctx->slot_count += ENG_SLOT_CHUNK;
    return true;
}

static eng_tensor *slot_take(kiln_context *ctx, uint32_t *index) {
    if (ctx->free_slot == UINT32_MAX && !grow_slots(ctx))
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a tensor handle");
    *index = ctx->free_slot;
    eng_tensor *t = slot_at(ctx, *index);
    ctx->free_slot = t->next_free;
    return t;
}

/* ---- nodes ----------------------------------------------------------------------------------- */

void eng_node_ref(eng_node *n) {
    n->refs++;
}

static void reader_leave(eng_node *src, eng_reader *r) {
    if (r->prev)
        r->prev->next = r->next;
    else if (src->readers == r)
        src->readers = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->next = r->prev = NULL;
}

static void reader_join(eng_node *src, eng_reader *r) {
    r->prev = NULL;
    r->next = src->readers;
    if (src->readers)
        src->readers->prev = r;
    src->readers = r;
}

static void list_unlink(kiln_context *ctx, eng_node *n) {
    if (n->prev)
        n->prev->next = n->next;
    else
        ctx->node_list = n->next;
    if (n->next)
        n->next->prev = n->prev;
    n->next = n->prev = NULL;
    ctx->live_nodes--;
}

eng_node *eng_node_adopt(kiln_context *ctx, eng_node *n) {
    if (!n)
        return NULL;
    for (uint32_t i = 0; i < n->nsrc; i++) {
        n->src[i].id = n->src[i].node->id;
        eng_node_ref(n->src[i].node);
        n->as_reader[i].node = n;
        reader_join(n->src[i].node, &n->as_reader[i]);
    }
    n->next = ctx->node_list;
    n->prev = NULL;
    if (ctx->node_list)
        ctx->node_list->prev = n;
    ctx->node_list = n;
    ctx->live_nodes++;
    return n;
}

void eng_node_discard(kiln_context *ctx, eng_node *n) {
    if (!n)
        return;
    for (uint32_t i = 0; i < n->nsrc; i++)
        eng_tracker_free(ctx, n->src[i].st);
    eng_tracker_free(ctx, n->dst_view);
    base_free(&ctx->alloc, n, sizeof *n);
}

/* n's sources (their reader links and references) go; pushes sources nothing holds any more
 * onto *work. */
static void drop_sources(kiln_context *ctx, eng_node *n, eng_node **work) {
    for (uint32_t i = 0; i < n->nsrc; i++) {
        eng_node *src = n->src[i].node;
        if (!src)
            continue;
        reader_leave(src, &n->as_reader[i]);
        n->src[i].node = NULL;
        if (--src->refs == 0) {
            list_unlink(ctx, src);
            src->next = *work;
            *work = src;
        }
    }
}

static void free_nodes(kiln_context *ctx, eng_node *work) {
    while (work) {
        eng_node *n = work;
        work = n->next;
        drop_sources(ctx, n, &work);
        if (n->interned)
            base_map_remove(&ctx->nodes, n->hash, n, eng_node_same, NULL);
        /* Readers hold references: a node still read by another is not freed. */
        if (n->storage)
            eng_storage_unref(ctx, n->storage);
        eng_node_discard(ctx, n);
    }
}

void eng_node_unref(kiln_context *ctx, eng_node *n) {
    if (!n || --n->refs > 0)
        return;
    list_unlink(ctx, n);
    n->next = NULL;
    free_nodes(ctx, n);
}

void eng_node_set_src(kiln_context *ctx, eng_node *n, uint32_t i, eng_node *src,
                      const shape_tracker *st) {
    eng_node *old = n->src[i].node;
    reader_leave(old, &n->as_reader[i]);
    eng_tracker_free(ctx, n->src[i].st);
    n->src[i] = (eng_src){src, st, src->id};
    eng_node_ref(src);
    reader_join(src, &n->as_reader[i]);
    eng_node_unref(ctx, old);
}

void eng_node_move_src(kiln_context *ctx, eng_node *n, eng_node *from, eng_node *to) {
    for (uint32_t i = 0; i < n->nsrc; i++) {
        if (n->src[i].node != from)
            continue;
        reader_leave(from, &n->as_reader[i]);
        n->src[i].node = to;
        eng_node_ref(to);
        reader_join(to, &n->as_reader[i]);
        eng_node_unref(ctx, from);
    }
}

void eng_node_let_go(kiln_context *ctx, eng_node *n) {
    eng_node *work = NULL;
    drop_sources(ctx, n, &work);
    free_nodes(ctx, work);
}

/* A node nothing holds yet (a fresh one whose tensor could not be made) is freed. */
static void drop_if_unheld(kiln_context *ctx, eng_node *n) {
    if (n && n->refs == 0) {
        n->refs = 1;
        eng_node_unref(ctx, n);
    }
}

/* ---- storages -------------------------------------------------------------------------------- */

void eng_storage_track(kiln_context *ctx, eng_storage *s) {
    s->refs = 1;
    s->prev = NULL;
    s->next = ctx->storage_list;
    if (s->next)
        s->next->prev = s;
    ctx->storage_list = s;
    ctx->live_storages++;
    ctx->live_bytes += s->elements * eng_type_size(s->type);
}

void eng_storage_ref(eng_storage *s) {
    s->refs++;
}

void eng_storage_unref(kiln_context *ctx, eng_storage *s) {
    if (!s || --s->refs > 0)
        return;
    if (s->prev)
        s->prev->next = s->next;
    else
        ctx->storage_list = s->next;
    if (s->next)
        s->next->prev = s->prev;
    ctx->live_storages--;
    ctx->live_bytes -= s->elements * eng_type_size(s->type);
    ctx->stats.storages_freed++;
    eng_storage_release(ctx, s);
    base_free(&ctx->alloc, s, sizeof *s);
}

/* ---- tensors --------------------------------------------------------------------------------- */

static kiln_tensor *handle_new(kiln_context *ctx, eng_cell *cell, const shape_tracker *st) {
    uint32_t index = 0;
    eng_tensor *t = slot_take(ctx, &index);
    if (!t)
        return NULL;
    if (ctx->temp_depth > 0 && BASE_VEC_PUSH(&ctx->alloc, &ctx->temps, index) != KILN_OK) {
        t->next_free = ctx->free_slot;
        ctx->free_slot = index;
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a tensor handle");
    }
    t->ctx = ctx;
    t->cell = cell;
    t->st = st;
    t->scope = ctx->scope_depth;
    t->fn = NULL;
    t->live = true;
    t->handle = encode(ctx->registry_index, index, t->gen);
    cell->refs++;
    ctx->live_tensors++;
    return t->handle;
}

kiln_tensor *eng_tensor_new(kiln_context *ctx, eng_node *base, const shape_tracker *st) {
    eng_cell *cell = base && st ? base_calloc(&ctx->alloc, 1, sizeof *cell) : NULL;
    if (!cell) {
        if (base && st)
            eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a tensor");
        eng_tracker_free(ctx, st);
        drop_if_unheld(ctx, base);
        return NULL;
    }
    cell->node = base;
    eng_node_ref(base);
    base->cells++;
    kiln_tensor *h = handle_new(ctx, cell, st);
    if (!h) {
        eng_tracker_free(ctx, st);
        base->cells--;
        base_free(&ctx->alloc, cell, sizeof *cell);
        eng_node_unref(ctx, base);
    }
    return h;
}

kiln_tensor *eng_view_new(kiln_context *ctx, kiln_tensor *t, const shape_tracker *st) {
    if (!st)
        return NULL;
    kiln_tensor *h = handle_new(ctx, eng_t(t)->cell, st);
    if (!h)
        eng_tracker_free(ctx, st);
    return h;
}

eng_node *eng_resolve(kiln_tensor *t) {
    return eng_t(t)->cell->node;
}

void eng_cell_set(kiln_context *ctx, eng_tensor *t, eng_node *n) {
    eng_cell *cell = t->cell;
    eng_node *old = cell->node;
    eng_node_ref(n);
    n->cells++;
    cell->node = n;
    old->cells--;
    eng_node_unref(ctx, old);
}

void eng_cell_drop(kiln_context *ctx, eng_cell *cell) {
    if (--cell->refs == 0) {
        eng_node *n = cell->node;
        n->cells--;
        base_free(&ctx->alloc, cell, sizeof *cell);
        eng_node_unref(ctx, n);
    }
}

kiln_tensor *eng_cell_handle(kiln_context *ctx, eng_cell *cell, const shape_tracker *st) {
    const shape_tracker *own = eng_tracker_keep(ctx, st);
    if (!own)
        return NULL;
    kiln_tensor *h = handle_new(ctx, cell, own);
    if (!h)
        eng_tracker_free(ctx, own);
    return h;
}

void eng_tensor_release(kiln_context *ctx, eng_tensor *t) {
    eng_cell *cell = t->cell;
    eng_fn *fn = t->fn;
    t->fn = NULL;
    eng_tracker_free(ctx, t->st);
    t->st = NULL;
    t->cell = NULL;
    t->live = false;
    t->gen = (t->gen + 1) & GEN_MASK;
    uint32_t index = (uint32_t)(uintptr_t)t->handle;
    t->next_free = ctx->free_slot;
    ctx->free_slot = index;
    ctx->live_tensors--;
    eng_cell_drop(ctx, cell);
    if (fn)
        eng_fn_unref(ctx, fn);
}

kiln_status kiln_release(kiln_tensor *t) {
    if (!t)
        return KILN_OK; /* as free(NULL) */
    kiln_context *ctx = NULL;
    kiln_status st;
    eng_tensor *e = eng_arg_status(t, &ctx, "kiln_release", &st);
    if (!e)
        return st;
    eng_log_enter(ctx);
    eng_tensor_release(ctx, e);
    eng_log_leave(ctx);
    return KILN_OK;
}

/* ---- intermediate tensors of composite ops ----------------------------------------------------
 */

kiln_context *eng_entry_context(const char *call, size_t count, kiln_tensor *const *tensors) {
    kiln_context *ctx = NULL;
    for (size_t i = 0; i < count; i++) {
        if (!eng_arg(tensors[i], &ctx, call))
            return NULL;
    }
    if (ctx && ctx->temp_depth == 0)
        ctx->call = call; /* the outermost call: an op built from others names the one called */
    return ctx;
}

size_t eng_temps_begin(kiln_context *ctx) {
    if (ctx->temp_depth++ == 0) {
        eng_log_enter(ctx);
        if (ctx->trace) /* the trace's "graph build" span (realize.c) */
            ctx->graph_call_ns = base_now_ns();
    }
    return ctx->temps.len;
}

kiln_tensor *eng_temps_end(kiln_context *ctx, size_t mark, kiln_tensor *result) {
    eng_tensor *r = eng_t(result);
    bool made_here = false;
    for (size_t i = mark; i < ctx->temps.len; i++) {
        eng_tensor *t = slot_at(ctx, ctx->temps.data[i]);
        if (!t->live)
            continue;
        if (t == r)
            made_here = true;
        else
            eng_tensor_release(ctx, t);
    }
    ctx->temps.len = mark;
    if (--ctx->temp_depth == 0) {
        ctx->call = NULL; /* the call is over */
        eng_log_leave(ctx);
        if (ctx->trace) {
            int64_t now = base_now_ns();
            if (ctx->graph_calls++ == 0)
                ctx->graph_first_ns = ctx->graph_call_ns;
            ctx->graph_last_ns = now;
            ctx->graph_own_ns += now - ctx->graph_call_ns;
        }
    }
    /* The result is an intermediate of the enclosing region, if any (the push cannot fail:
     * the vector held at least one more element a moment ago). */
    if (made_here && ctx->temp_depth > 0)
        (void)BASE_VEC_PUSH(&ctx->alloc, &ctx->temps, (uint32_t)(uintptr_t)result);
    /* A call whose result is one of its operands as it was (a cast to the same dtype, say)
     * still returns a handle of its own: releasing one never releases the other. */
    if (r && !made_here) {
        result = eng_view_new(ctx, result, eng_tracker_keep(ctx, r->st));
        if (result && r->fn) { /* the same value: the same history */
            eng_t(result)->fn = r->fn;
            eng_fn_ref(r->fn);
        }
    }
    return result;
}

void eng_temps_end_many(kiln_context *ctx, size_t mark, uint32_t count, kiln_tensor *const *keep) {
    size_t out = mark;
    for (size_t i = mark; i < ctx->temps.len; i++) {
        uint32_t index = ctx->temps.data[i];
        eng_tensor *t = slot_at(ctx, index);
        if (!t->live)
            continue;
        bool kept = false;
        for (uint32_t k = 0; k < count && !kept; k++)
            kept = keep[k] && eng_t(keep[k]) == t;
        if (kept)
            ctx->temps.data[out++] = index; /* joins the enclosing region, if any */
        else
            eng_tensor_release(ctx, t);
    }
    ctx->temps.len = ctx->temp_depth > 1 ? out : mark;
    if (--ctx->temp_depth == 0) {
        ctx->call = NULL;
        eng_log_leave(ctx);
    }
}

/* ---- expressions ------------------------------------------------------------------------------
 */

/* Expression handles are encoded like tensor handles, from a table of their own: entries in
 * chunks (stable addresses), a free list, generations that move on when an entry is freed.
 * One entry per node (the map finds it), so equal expressions have equal handles. An entry
 * lives as long as its node: collection frees the entries of the nodes it frees. */

static const kiln_expr *expr_encode(uint32_t reg, uint32_t index, uint32_t gen) {
    return (const kiln_expr *)encode(reg, index, gen);
}

static eng_expr *expr_at(const kiln_context *ctx, uint32_t index) {
    return &ctx->expr_chunks[index / ENG_EXPR_CHUNK][index % ENG_EXPR_CHUNK];
}

static bool same_expr(const void *stored, const void *key, void *user) {
    (void)user;
    return ((const eng_expr *)stored)->node == key;
}

static bool grow_exprs(kiln_context *ctx) {
    if (ctx->expr_count > UINT32_MAX - 2 * ENG_EXPR_CHUNK)
        return false;
    size_t n = ctx->expr_chunk_count;
    eng_expr *chunk = base_calloc(&ctx->alloc, ENG_EXPR_CHUNK, sizeof *chunk);
    if (!chunk)
        return false;
    eng_expr **chunks =
        base_realloc(&ctx->alloc, ctx->expr_chunks, n * sizeof *chunks, (n + 1) * sizeof *chunks);
    if (!chunks) {
        base_free(&ctx->alloc, chunk, ENG_EXPR_CHUNK * sizeof *chunk);
        return false;
    }
    ctx->expr_chunks = chunks;
    chunks[n] = chunk;
    ctx->expr_chunk_count++;
    uint32_t gen = atomic_fetch_add(&next_generation, 7919u); /* apart, as tensor slots */
    for (uint32_t i = ENG_EXPR_CHUNK; i-- > 0;) {
        chunk[i].gen = gen & GEN_MASK;
        chunk[i].pin = ENG_UNPINNED;
        chunk[i].index = ctx->expr_count + i;
        chunk[i].next_free = ctx->free_expr;
        ctx->free_expr = ctx->expr_count + i;
    }
    ctx->expr_count += ENG_EXPR_CHUNK;
    return true;
}

/* e's entry (made if it has none); NULL, recorded, when out of memory. */
static eng_expr *expr_entry(kiln_context *ctx, const sym_node *e, uint32_t *index) {
    uint64_t h = sym_node_id(e);
    eng_expr *x = base_map_find(&ctx->exprs, h, e, same_expr, NULL);
    if (x) {
        *index = x->index;
        return x;
    }
    if (ctx->free_expr == UINT32_MAX && !grow_exprs(ctx))
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for an expression");
    *index = ctx->free_expr;
    x = expr_at(ctx, *index);
    /* The map holds the entry; it compares the entries' nodes only. */
    if (base_map_insert(&ctx->exprs, h, x) != KILN_OK)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for an expression");
    ctx->free_expr = x->next_free;
    x->node = e;
    x->pin = ENG_UNPINNED;
    return x;
}

static void expr_free(kiln_context *ctx, uint32_t index) {
    eng_expr *x = expr_at(ctx, index);
    base_map_remove(&ctx->exprs, sym_node_id(x->node), x->node, same_expr, NULL);
    x->node = NULL;
    x->pin = ENG_UNPINNED;
    x->bound = false;
    x->gen = (x->gen + 1) & GEN_MASK;
    x->next_free = ctx->free_expr;
    ctx->free_expr = index;
}

const kiln_expr *eng_expr_handle(kiln_context *ctx, const sym_node *e) {
    uint32_t index;
    eng_expr *x = e ? expr_entry(ctx, e, &index) : NULL;
    return x ? expr_encode(ctx->registry_index, index, x->gen) : NULL;
}

const kiln_expr *eng_pin_expr(kiln_context *ctx, const sym_node *e) {
    uint32_t index;
    eng_expr *x = e ? expr_entry(ctx, e, &index) : NULL;
    if (!x)
        return NULL;
    /* Pinned already: by this scope or an enclosing one (deeper ones have ended). */
    if (x->pin == ENG_UNPINNED) {
        uint32_t depth = sym_node_kind(e) == SYM_VAR ? 0 : ctx->scope_depth;
        if (depth > 0 && BASE_VEC_PUSH(&ctx->alloc, &ctx->pins, index) != KILN_OK)
            return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for an expression");
        x->pin = depth;
    }
    return expr_encode(ctx->registry_index, index, x->gen);
}

/* The entry h names if it is live; *owner receives the context it names (NULL: none). */
static eng_expr *expr_decode(const kiln_expr *h, kiln_context **owner) {
    uint64_t v = (uint64_t)(uintptr_t)h;
    uint32_t reg = (uint32_t)(v >> 55), gen = (uint32_t)(v >> 32) & GEN_MASK, index = (uint32_t)v;
    *owner = reg > 0 && reg < REGISTRY_SIZE ? atomic_load(&registry[reg]) : NULL;
    if (!*owner || index >= (*owner)->expr_count)
        return NULL;
    eng_expr *x = expr_at(*owner, index);
    return x->node && x->gen == gen ? x : NULL;
}

static const sym_node *expr_check(kiln_context *ctx, const kiln_expr *h, const char *call,
                                  bool sticky) {
    if (!h)
        return NULL;
    kiln_context *owner;
    eng_expr *x = expr_decode(h, &owner);
    if (x && owner == ctx)
        return x->node;
    const char *why = owner && owner != ctx
                          ? "an expression of another context"
                          : "an expression used after it was freed (its scope ended, or outside "
                            "any scope a Variable it binds was bound again and nothing uses it), "
                            "or not an expression";
    if (sticky)
        eng_fail(ctx, KILN_ERROR_INVALID_HANDLE, "%s: %s", call, why);
    else
        base_error_set(&ctx->err, KILN_ERROR_INVALID_HANDLE, "%s: %s", call, why);
    return NULL;
}

const sym_node *eng_expr_arg(kiln_context *ctx, const kiln_expr *h, const char *call) {
    return expr_check(ctx, h, call, true);
}

const sym_node *eng_expr_arg_status(kiln_context *ctx, const kiln_expr *h, const char *call,
                                    kiln_status *status) {
    const sym_node *n = expr_check(ctx, h, call, false);
    *status = n ? KILN_OK : ctx->err.status;
    return n;
}

/* Unpins the expressions of scopes deeper than depth. */
void eng_unpin_to(kiln_context *ctx, uint32_t depth) {
    while (ctx->pins.len > 0) {
        eng_expr *x = expr_at(ctx, ctx->pins.data[ctx->pins.len - 1]);
        if (x->pin <= depth)
            break;
        x->pin = ENG_UNPINNED;
        ctx->pins.len--;
    }
}

bool eng_unpin_bindings(kiln_context *ctx, const sym_node *var, int64_t value) {
    eng_expr *v = base_map_find(&ctx->exprs, sym_node_id(var), var, same_expr, NULL);
    if (!v || (v->bound && v->value == value))
        return false; /* (a Variable has an entry: the program passed its handle) */
    v->bound = true;
    v->value = value;
    uint64_t bit = sym_node_binds(var);
    for (uint32_t c = 0; c < ctx->expr_chunk_count; c++) {
        for (uint32_t i = 0; i < ENG_EXPR_CHUNK; i++) {
            eng_expr *x = &ctx->expr_chunks[c][i];
            if (x->node && x->pin == 0 && sym_node_kind(x->node) != SYM_VAR &&
                (sym_node_binds(x->node) & bit))
                x->pin = ENG_UNPINNED;
        }
    }
    return true;
}

void eng_mark_tracker(sym_ctx *sc, const shape_tracker *st) {
    if (!st)
        return;
    for (uint32_t i = 0; i < st->nviews; i++) {
        const shape_view *v = &st->views[i];
        sym_mark(sc, v->offset);
        sym_mark(sc, v->user_offset);
        for (uint32_t d = 0; d < v->ndim; d++) {
            sym_mark(sc, v->shape[d]);
            sym_mark(sc, v->strides[d]);
            sym_mark(sc, v->user_strides[d]);
            if (v->masked) {
                sym_mark(sc, v->mask_begin[d]);
                sym_mark(sc, v->mask_end[d]);
            }
        }
    }
}

void eng_collect_expressions(kiln_context *ctx, bool force) {
    sym_ctx *sc = ctx->sym;
    /* Nothing built since the last collection: what it left was in use then, and what has
     * stopped being used since waits for the next collection that has new nodes to free (a
     * loop of fixed shapes builds none, and pays nothing here). */
    if (!force && sym_ctx_node_count(sc) == ctx->sym_built)
        return;
    for (uint32_t c = 0; c < ctx->expr_chunk_count; c++) {
        for (uint32_t i = 0; i < ENG_EXPR_CHUNK; i++) {
            const eng_expr *x = &ctx->expr_chunks[c][i];
            if (x->node && x->pin != ENG_UNPINNED)
                sym_mark(sc, x->node);
        }
    }
    for (eng_node *n = ctx->node_list; n; n = n->next) {
        for (uint32_t d = 0; d < n->ndim; d++)
            sym_mark(sc, n->shape[d]);
        sym_mark(sc, n->value_expr);
        for (uint32_t i = 0; i < n->nsrc; i++)
            eng_mark_tracker(sc, n->src[i].st);
        eng_mark_tracker(sc, n->dst_view);
    }
    for (uint32_t c = 0; c < ctx->slot_chunk_count; c++) {
        for (uint32_t i = 0; i < ENG_SLOT_CHUNK; i++) {
            const eng_tensor *t = &ctx->slot_chunks[c][i];
            if (t->live)
                eng_mark_tracker(sc, t->st);
        }
    }
    eng_ag_mark(ctx);
    eng_foresight_mark(ctx);
    for (const eng_program *p = ctx->program_list; p; p = p->next) {
        if (p->has_guard)
            sym_mark(sc, p->guard.expr);
        for (uint32_t i = 0; i < p->expr_count; i++)
            sym_mark(sc, p->exprs[i]);
    }
    /* The handles of the nodes the collection frees go first (they are read to be removed). */
    for (uint32_t index = 0; index < ctx->expr_count; index++) {
        const eng_expr *x = expr_at(ctx, index);
        if (x->node && !sym_marked(sc, x->node))
            expr_free(ctx, index);
    }
    sym_collect(sc);
    ctx->sym_built = sym_ctx_node_count(sc);
}

/* ---- the end ----------------------------------------------------------------------------------
 */

void eng_lifetime_finish(kiln_context *ctx) {
    for (uint32_t i = 0; i < ctx->slot_count; i++) {
        eng_tensor *t = slot_at(ctx, i);
        if (t->live)
            eng_tensor_release(ctx, t);
    }
    eng_ag_finish(ctx);
    /* Every node and storage is free now; anything left (a bug, or a failed creation) goes
     * without its references. */
    while (ctx->node_list) {
        eng_node *n = ctx->node_list;
        list_unlink(ctx, n);
        eng_node_discard(ctx, n);
    }
    while (ctx->storage_list) {
        eng_storage *s = ctx->storage_list;
        s->refs = 1;
        eng_storage_unref(ctx, s);
    }
    for (uint32_t c = 0; c < ctx->slot_chunk_count; c++)
        base_free(&ctx->alloc, ctx->slot_chunks[c], ENG_SLOT_CHUNK * sizeof(eng_tensor));
    base_free(&ctx->alloc, ctx->slot_chunks, ctx->slot_chunk_count * sizeof *ctx->slot_chunks);
    ctx->slot_chunks = NULL;
    ctx->slot_chunk_count = ctx->slot_count = 0;
    BASE_VEC_FREE(&ctx->alloc, &ctx->temps);
    BASE_VEC_FREE(&ctx->alloc, &ctx->pins);
    for (uint32_t c = 0; c < ctx->expr_chunk_count; c++)
        base_free(&ctx->alloc, ctx->expr_chunks[c], ENG_EXPR_CHUNK * sizeof(eng_expr));
    base_free(&ctx->alloc, ctx->expr_chunks, ctx->expr_chunk_count * sizeof *ctx->expr_chunks);
    ctx->expr_chunks = NULL;
    ctx->expr_chunk_count = ctx->expr_count = 0;
    base_map_finish(&ctx->exprs);
}
