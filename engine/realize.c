/* Realization: the walk of ARCHITECTURE.md as one function, one call per stage. */
#include "eng.h"

#include <string.h>

typedef struct schedule {
    kiln_context *ctx;
    BASE_VEC(eng_kernel) kernels;  /* in dependency order */
    BASE_VEC(eng_node *) assigned; /* nodes given a storage by this realize */
} schedule;

/* Storage for node's result (its row-major elements under the bound sizes); a write's result
 * is the storage it writes. */
static kiln_status assign_storage(schedule *s, eng_node *node, eng_kernel *k) {
    kiln_context *ctx = s->ctx;
    if (node->kind == ENG_WRITE) {
        if (BASE_VEC_PUSH(&ctx->alloc, &s->assigned, node) != KILN_OK)
            return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory");
        node->storage = node->src[0].node->storage;
        eng_storage_ref(node->storage);
        k->buffers[0] = node->storage;
        return KILN_OK;
    }
    const sym_node *numel = eng_numel(ctx, node->ndim, node->shape);
    int64_t n = 0;
    base_error err = {0};
    kiln_status st = numel ? sym_eval(numel, NULL, &n, &err) : KILN_ERROR_OVERFLOW;
    if (st != KILN_OK)
        return base_error_set(&ctx->err, st, "result size: %s", base_error_message(&err));
    eng_storage *storage = eng_storage_new(ctx, node->type, (uint64_t)n);
    if (!storage)
        return ctx->err.status ? ctx->err.status : KILN_ERROR_OUT_OF_HOST_MEMORY;
    if (BASE_VEC_PUSH(&ctx->alloc, &s->assigned, node) != KILN_OK) {
        eng_storage_unref(ctx, storage);
        return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory to schedule");
    }
    node->storage = storage;
    k->buffers[0] = storage;
    return KILN_OK;
}

static kiln_status schedule_node(schedule *s, eng_node *node, uint32_t depth);

/* Marks the unrealized nodes w's value depends on. */
static void mark_dependencies(eng_node *n, uint64_t stamp) {
    if (n->storage || n->mark == stamp)
        return;
    n->mark = stamp;
    for (uint32_t i = 0; i < n->nsrc; i++)
        mark_dependencies(n->src[i].node, stamp);
}

/* Program order: readers of the storage w overwrites that were built before w, and that w's own
 * value does not consume element for element, must read the old values: they are realized
 * first. */
static kiln_status schedule_earlier_readers(schedule *s, eng_node *w, uint32_t depth) {
    kiln_context *ctx = s->ctx;
    uint64_t stamp = ++ctx->next_mark;
    mark_dependencies(w->src[1].node, stamp);
    eng_node *target = w->src[0].node;
    for (eng_reader *r = target->readers; r; r = r->next) {
        eng_node *reader = r->node;
        if (reader == w || reader->storage || reader->mark == stamp)
            continue;
        kiln_status st = schedule_node(s, reader, depth + 1);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

/* Schedules the kernels that realize node, dependencies first. */
static kiln_status schedule_node(schedule *s, eng_node *node, uint32_t depth) {
    kiln_context *ctx = s->ctx;
    if (node->storage)
        return KILN_OK;
    if (depth > 256)
        return base_error_set(&ctx->err, KILN_ERROR_LIMIT_EXCEEDED,
                              "the graph nests more than 256 kernels deep");
    if (node->kind == ENG_WRITE) {
        kiln_status st = schedule_earlier_readers(s, node, depth);
        if (st != KILN_OK)
            return st;
    }
    enum { MAX_NEEDS = 16 };
    for (;;) {
        eng_kernel k;
        eng_node *needs[MAX_NEEDS];
        uint32_t count = 0;
        kiln_status st = eng_kernel_build(ctx, node, &k, needs, MAX_NEEDS, &count);
        if (st == KILN_ERROR_NOT_FOUND && count > 0) {
            for (uint32_t i = 0; i < count; i++) {
                kiln_status dep = schedule_node(s, needs[i], depth + 1);
                if (dep != KILN_OK)
                    return dep;
            }
            continue; /* rebuild: the dependencies are now loads */
        }
        if (st != KILN_OK)
            return st;
        st = assign_storage(s, node, &k);
        if (st == KILN_OK && BASE_VEC_PUSH(&ctx->alloc, &s->kernels, k) != KILN_OK)
            st = base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory to schedule");
        return st;
    }
}

/* Undoes the storage assignments of a realize that failed: those nodes stay unrealized. */
static void unassign(schedule *s) {
    for (size_t i = 0; i < s->assigned.len; i++) {
        eng_node *n = s->assigned.data[i];
        eng_storage_unref(s->ctx, n->storage);
        n->storage = NULL;
    }
}

/* The realized nodes let their sources go: what only they held is freed. */
static void let_go(schedule *s) {
    /* Held meanwhile: one realized node may be all that held another. */
    for (size_t i = 0; i < s->assigned.len; i++)
        eng_node_ref(s->assigned.data[i]);
    for (size_t i = 0; i < s->assigned.len; i++)
        eng_node_let_go(s->ctx, s->assigned.data[i]);
    for (size_t i = 0; i < s->assigned.len; i++)
        eng_node_unref(s->ctx, s->assigned.data[i]);
}

static kiln_status run_schedule(schedule *s) {
    kiln_context *ctx = s->ctx;
    eng_batch *batch;
    kiln_status st = eng_batch_begin(ctx, &batch);
    if (st != KILN_OK)
        return st;
    for (size_t i = 0; st == KILN_OK && i < s->kernels.len; i++) {
        eng_program *p;
        st = eng_program_get(ctx, &s->kernels.data[i], &p);
        if (st == KILN_OK)
            st = eng_batch_run(ctx, batch, p, &s->kernels.data[i]);
    }
    kiln_status fin = eng_batch_finish(ctx, batch);
    return st != KILN_OK ? st : fin;
}

kiln_status eng_realize(kiln_context *ctx, uint32_t count, eng_node *const *nodes) {
    kiln_status sticky = eng_call_begin(ctx); /* a graph-building error recorded earlier */
    if (sticky != KILN_OK)
        return sticky;
    schedule s = {.ctx = ctx};
    kiln_status st = KILN_OK;
    for (uint32_t i = 0; st == KILN_OK && i < count; i++)
        st = schedule_node(&s, nodes[i], 0);
    uint64_t pipelines = ctx->stats.pipelines_created;
    if (st == KILN_OK)
        st = run_schedule(&s);
    if (st == KILN_OK && !ctx->blob_saved && ctx->stats.pipelines_created > pipelines) {
        eng_cache_save_pipelines(ctx); /* after the program's first burst of compiles */
        ctx->blob_saved = true;
    }
    if (st != KILN_OK)
        unassign(&s);
    else
        let_go(&s);
    ctx->stats.realizes++;
    if (base_log_verbosity() >= 1)
        base_log(BASE_LOG_INFO, "engine",
                 "realize: %zu kernels; compiled %llu (%.3f ms), cached %llu, dispatches %llu, "
                 "device %.3f ms",
                 s.kernels.len, (unsigned long long)ctx->stats.kernels_compiled,
                 (double)ctx->stats.codegen_ns / 1e6, (unsigned long long)ctx->stats.kernels_cached,
                 (unsigned long long)ctx->stats.dispatches,
                 (double)ctx->stats.device_time_ns / 1e6);
    BASE_VEC_FREE(&ctx->alloc, &s.kernels);
    BASE_VEC_FREE(&ctx->alloc, &s.assigned);
    /* The kernels' ASTs and the lowering memo live for one realize. */
    base_arena_finish(&ctx->arena);
    base_arena_init(&ctx->arena, &ctx->alloc, 64 * 1024);
    return st;
}

kiln_status kiln_realize(kiln_tensor *t) {
    kiln_context *ctx = NULL;
    kiln_status st;
    if (!eng_arg_status(t, &ctx, "kiln_realize", &st))
        return st;
    eng_node *base = eng_resolve(t);
    return eng_realize(ctx, 1, &base);
}

kiln_status kiln_realize_many(kiln_context *ctx, uint32_t count, kiln_tensor *const *tensors) {
    if (!ctx)
        return KILN_ERROR_INVALID_ARGUMENT;
    eng_node *nodes[64];
    if (count && !tensors)
        return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_realize_many: no tensors");
    if (count > 64)
        return base_error_set(&ctx->err, KILN_ERROR_LIMIT_EXCEEDED,
                              "kiln_realize_many: at most 64 tensors at once");
    for (uint32_t i = 0; i < count; i++) {
        kiln_context *owner = ctx;
        kiln_status st;
        if (!eng_arg_status(tensors[i], &owner, "kiln_realize_many", &st))
            return st;
        nodes[i] = eng_resolve(tensors[i]);
    }
    return eng_realize(ctx, count, nodes);
}

/* The tensor's elements are its node's storage, in order, when its view is dense at offset 0
 * and covers the whole storage (a reshape of a contiguous result, for one). */
static bool reads_storage_directly(kiln_context *ctx, kiln_tensor *t) {
    if (!shape_tracker_contiguous(ENG_ST(t)))
        return false;
    const shape_view *v = shape_tracker_last(ENG_ST(t));
    const sym_node *a = shape_view_numel(ctx->shape, v);
    const sym_node *b = eng_numel(ctx, ENG_BASE(t)->ndim, ENG_BASE(t)->shape);
    return a && a == b;
}

static kiln_status read_impl(kiln_context *ctx, kiln_tensor *t, void *dst, size_t bytes) {
    int64_t numel;
    kiln_status st = kiln_tensor_numel(t, &numel);
    if (st != KILN_OK)
        return st;
    uint64_t need = (uint64_t)numel * eng_type_size(ENG_BASE(t)->type);
    if (bytes < need || (need && !dst))
        return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_read: the tensor holds %llu bytes; the buffer %zu",
                              (unsigned long long)need, bytes);
    /* A view that is not the storage itself is read through a copy in logical order. */
    kiln_tensor *src = t;
    if (!reads_storage_directly(ctx, t)) {
        src = eng_elementwise(ctx, IR_CAST, ENG_BASE(t)->type, 1, &t);
        if (!src)
            return ctx->err.status;
    }
    st = kiln_realize(src);
    if (st == KILN_OK)
        st = eng_storage_read(ctx, ENG_BASE(src)->storage, dst, need);
    return st;
}

kiln_status kiln_read(kiln_tensor *t, void *dst, size_t bytes) {
    kiln_context *ctx = NULL;
    kiln_status st;
    if (!eng_arg_status(t, &ctx, "kiln_read", &st))
        return st;
    st = eng_call_begin(ctx);
    if (st != KILN_OK)
        return st;
    size_t mark = eng_temps_begin(ctx);
    st = read_impl(ctx, t, dst, bytes);
    eng_temps_end(ctx, mark, NULL);
    return st;
}
