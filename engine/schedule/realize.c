/* Realization: the walk of eng.h's top comment (docs/architecture.md) as one function, one
 * call per stage. */
#include "schedule.h"

#include <stdio.h>
#include <string.h>

static kiln_status no_memory(kiln_context *ctx) {
    return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory to schedule");
}

/* Fresh storage for node's result: its row-major elements under the bound sizes. */
static eng_storage *result_storage(kiln_context *ctx, eng_node *node, kiln_status *st) {
    const sym_node *numel = eng_numel(ctx, node->ndim, node->shape);
    int64_t n = 0;
    if (!numel) { /* eng_numel recorded why */
        *st = ctx->err.status ? ctx->err.status : KILN_ERROR_OVERFLOW;
        return NULL;
    }
    *st = eng_eval(ctx, "result size", numel, &n);
    if (*st != KILN_OK)
        return NULL;
    eng_storage *storage = eng_storage_new(ctx, node->type, (uint64_t)n);
    if (!storage) {
        *st = ctx->err.status ? ctx->err.status : KILN_ERROR_OUT_OF_HOST_MEMORY;
        return NULL;
    }
    int64_t most = sym_vmax(numel);
    if (most > n)
        storage->bound = (uint64_t)most;
    return storage;
}

/* Storage for the kernel's outputs: node's and its siblings' (a write's is the storage it
 * writes). On failure none is left assigned. */
static kiln_status assign_storage(kiln_context *ctx, eng_node *node, eng_kernel *k) {
    kiln_status st = KILN_OK;
    if (node->kind == ENG_WRITE) {
        node->storage = node->src[0].node->storage;
        eng_storage_ref(node->storage);
    } else {
        node->storage = result_storage(ctx, node, &st);
    }
    k->buffers[0] = node->storage;
    for (uint32_t j = 0; j < k->sibling_count && st == KILN_OK; j++) {
        eng_node *sib = k->siblings[j].node;
        if (sib->kind == ENG_WRITE) { /* a fused write (kernel.c fused_write): its target's */
            sib->storage = sib->src[0].node->storage;
            eng_storage_ref(sib->storage);
        } else {
            sib->storage = result_storage(ctx, sib, &st);
        }
        k->buffers[k->siblings[j].buffer] = sib->storage;
        if (st != KILN_OK) {
            for (uint32_t i = 0; i < j; i++) {
                eng_storage_unref(ctx, k->siblings[i].node->storage);
                k->siblings[i].node->storage = NULL;
            }
            eng_storage_unref(ctx, node->storage);
            node->storage = NULL;
        }
    }
    return st;
}

/* Appends node's kernel k to the schedule and gives node its storage: every kernel in the
 * schedule has its output's storage, and every storage this realize assigned has its kernel
 * (give_back relies on both). */
static kiln_status add_kernel(schedule *s, eng_node *node, const eng_kernel *k) {
    if (BASE_VEC_PUSH(&s->ctx->alloc, &s->kernels, *k) != KILN_OK)
        return no_memory(s->ctx);
    kiln_status st = assign_storage(s->ctx, node, &s->kernels.data[s->kernels.len - 1]);
    if (st != KILN_OK)
        s->kernels.len--;
    return st;
}

/* The outputs of the kernels from `from` on give back the storage add_kernel gave them. After a
 * failed realize (from the first that did not run): the kernels that ran keep their results (a
 * write that ran is never applied again); the nodes of the others stay unrealized and give back
 * the storage this realize made for them (a write's storage is its target's, not its own). No
 * kernel that ran reads or writes such a storage (its kernel comes after them), and a command
 * buffer that recorded one was never submitted. */
static void give_back(schedule *s, size_t from) {
    for (size_t i = from; i < s->kernels.len; i++) {
        const eng_kernel *k = &s->kernels.data[i];
        for (uint32_t j = 0; j <= k->sibling_count; j++) {
            eng_node *n = kernel_output(k, j);
            eng_storage_unref(s->ctx, n->storage);
            n->storage = NULL;
        }
    }
}

static kiln_status push_frame(schedule *s, eng_node *node) {
    /* Each frame waits for the one above it, a node made before it (a source, or a reader
     * built before a write) or a write's copy of its source: no node is on the stack twice,
     * unless the graph had a cycle (which recursion would have followed forever). */
    if (s->stack.len >= s->ctx->next_id)
        return base_error_set(&s->ctx->err, KILN_ERROR_INTERNAL,
                              "scheduling: the graph has a cycle (%zu nodes in progress)",
                              s->stack.len);
    frame f = {.node = node, .step = STEP_START};
    return BASE_VEC_PUSH(&s->ctx->alloc, &s->stack, f) == KILN_OK ? KILN_OK : no_memory(s->ctx);
}

/* Marks with stamp the unrealized nodes the value n depends on (n included). */
static kiln_status mark_dependencies(schedule *s, eng_node *n, uint64_t stamp) {
    kiln_context *ctx = s->ctx;
    s->walk.len = 0;
    if (BASE_VEC_PUSH(&ctx->alloc, &s->walk, n) != KILN_OK)
        return no_memory(ctx);
    while (s->walk.len > 0) {
        n = s->walk.data[--s->walk.len];
        if (n->storage || n->mark == stamp)
            continue;
        n->mark = stamp;
        for (uint32_t i = 0; i < n->nsrc; i++) {
            if (BASE_VEC_PUSH(&ctx->alloc, &s->walk, n->src[i].node) != KILN_OK)
                return no_memory(ctx);
        }
    }
    return KILN_OK;
}

/* Marks the unrealized nodes the roots depend on (eng_node wanted): a kernel's sibling
 * outputs are nodes the realize computes anyway (kernel.c add_siblings). For foresight (plan.c)
 * the same walk numbers the nodes it reaches, a realized one as a leaf, depth first in source
 * order, into s->order (s->numbered: the mark; 0 where memory ran short: no foresight). */
static kiln_status mark_wanted(schedule *s, uint32_t count, eng_node *const *roots) {
    kiln_context *ctx = s->ctx;
    s->wanted = ++ctx->next_mark;
    s->numbered = ctx->no_foresight ? 0 : s->wanted;
    s->order.len = 0;
    s->walk.len = 0;
    for (uint32_t i = count; i-- > 0;) {
        if (BASE_VEC_PUSH(&ctx->alloc, &s->walk, roots[i]) != KILN_OK)
            return no_memory(ctx);
    }
    while (s->walk.len > 0) {
        eng_node *n = s->walk.data[--s->walk.len];
        if (!n || (s->numbered ? n->plan_mark == s->numbered : n->wanted == s->wanted))
            continue;
        if (s->numbered) {
            n->plan_mark = s->numbered;
            n->plan_index = (uint32_t)s->order.len;
            if (s->order.len >= UINT32_MAX - 1 ||
                BASE_VEC_PUSH(&ctx->alloc, &s->order, n) != KILN_OK)
                s->numbered = 0; /* the wanted marks go on: visited nodes have theirs */
        }
        if (n->storage)
            continue;
        n->wanted = s->wanted;
        for (uint32_t i = n->nsrc; i-- > 0;) {
            if (BASE_VEC_PUSH(&ctx->alloc, &s->walk, n->src[i].node) != KILN_OK)
                return no_memory(ctx);
        }
    }
    return KILN_OK;
}

/* A node already realized is done; a write first schedules the readers of the storage it
 * overwrites (STEP_READERS); any other node builds its kernel. */
static kiln_status step_start(schedule *s, frame *f) {
    eng_node *node = f->node;
    if (node->storage) {
        s->stack.len--;
        return KILN_OK;
    }
    if (node->kind != ENG_WRITE) {
        f->step = STEP_BUILD;
        return KILN_OK;
    }
    f->step = STEP_READERS;
    f->reader = NULL;
    f->snapshot = NULL;
    f->stamp = ++s->ctx->next_mark;
    return mark_dependencies(s, node->src[1].node, f->stamp);
}

/* Readers readers_scheduled looks at, at most (beyond: counted as live). */
enum { DEAD_READER_WALK = 64 };

/* Whether every node reading n is scheduled already or dead (no tensor holds it, it is no
 * boundary, and every node reading it is scheduled or dead in turn), looking at *budget
 * readers at most: n's value is then needed by nothing that runs after the write, unless a
 * tensor holds it. A forward value that only the already realized reductions of the same step
 * read (a relu inlined into its pool's kernels) is such a dead reader. */
static bool readers_scheduled(const eng_node *n, uint32_t *budget) {
    for (const eng_reader *r = n->readers; r; r = r->next) {
        const eng_node *u = r->node;
        if (u->storage)
            continue;
        if (*budget == 0 || u->cells != 0 || u->boundary)
            return false;
        --*budget;
        if (!readers_scheduled(u, budget))
            return false;
    }
    return true;
}

/* What to realize so that reader (of the storage write w overwrites) reads the old values:
 * reader itself; or, when it is an elementwise node no tensor holds and only one node reads (a
 * matrix product's broadcast product, read by its sum), that reader, which computes it inside
 * its own kernel (realizing the product alone would materialise every term); or nothing (NULL)
 * when no tensor holds it and everything reading it is scheduled before the write already. */
static eng_node *consumer_of(eng_node *reader, const eng_node *w, uint64_t stamp) {
    eng_node *n = reader;
    for (;;) {
        uint32_t budget = DEAD_READER_WALK;
        if (n->cells == 0 && !n->boundary && readers_scheduled(n, &budget))
            return NULL;
        if (n->kind != ENG_EW || n->cells != 0 || n->boundary || !n->readers || n->readers->next)
            return n;
        eng_node *u = n->readers->node;
        /* u built after w may read w (it would wait for w while w waits for it): ids are
         * creation order, and nothing made before w depends on it. */
        if (u == w || u->storage || u->kind == ENG_WRITE || u->mark == stamp || u->id > w->id)
            return n;
        n = u;
    }
}

/* A node of w's value (marked with stamp) that reads target's old value, directly or through
 * other such nodes, and that a tensor holds or an unrealized node outside w's value reads too:
 * that tensor or reader would compute it after w overwrote target (two writes of values
 * computed from one old value), so it is realized before w. NULL: none; *st: a failure. */
static eng_node *shared_old_reader(schedule *s, eng_node *w, eng_node *target, uint64_t stamp,
                                   kiln_status *st) {
    kiln_context *ctx = s->ctx;
    uint64_t seen = ++ctx->next_mark;
    s->walk.len = 0;
    *st = KILN_OK;
    for (eng_reader *r = target->readers; r; r = r->next) {
        if (r->node != w && !r->node->storage && r->node->mark == stamp &&
            BASE_VEC_PUSH(&ctx->alloc, &s->walk, r->node) != KILN_OK) {
            *st = no_memory(ctx);
            return NULL;
        }
    }
    while (s->walk.len > 0) {
        eng_node *m = s->walk.data[--s->walk.len];
        if (m->mark2 == seen)
            continue;
        m->mark2 = seen;
        if (m->cells > 0) /* a tensor's value: it keeps the old values it was computed from */
            return m;
        for (eng_reader *r = m->readers; r; r = r->next) {
            eng_node *u = r->node;
            if (u == w || u->storage)
                continue;
            if (u->mark != stamp)
                return m;
            if (BASE_VEC_PUSH(&ctx->alloc, &s->walk, u) != KILN_OK) {
                *st = no_memory(ctx);
                return NULL;
            }
        }
    }
    return NULL;
}

/* The most elements n holds (its storage's, or its shape's under the largest bound values). */
static int64_t most_elements(kiln_context *ctx, const eng_node *n) {
    if (n->storage)
        return (int64_t)n->storage->elements;
    const sym_node *numel = eng_numel(ctx, n->ndim, n->shape);
    if (!numel) {
        sym_ctx_clear_error(ctx->sym);
        return INT64_MAX;
    }
    return sym_vmax(numel);
}

/* Whether the readers of target that must see its old values read a copy of it instead of
 * being realized (the write still overwrites target in place): when the copy is smaller than
 * what one of them would realize (a bias that an optimizer overwrites while the step's tensors
 * still hold its forward sum with a batch of activations: 16 floats copied where 64 x 16 x 28
 * x 28 were computed and stored). */
static bool snapshot_pays(kiln_context *ctx, const eng_node *target, const eng_node *run) {
    return most_elements(ctx, target) < most_elements(ctx, run);
}

/* Program order: readers of the storage write w overwrites that were built before w, and that
 * w's own value does not consume (the nodes marked with the frame's stamp), must read the old
 * values: they are realized first, one frame each, in the order of the target's reader list,
 * or, where that is cheaper (snapshot_pays), made to read a copy of the old values, realized
 * first (the frame's snapshot, one for all of them). So are the nodes of w's own value that
 * read the old values and are read outside it too. */
static kiln_status step_readers(schedule *s, frame *f) {
    eng_node *w = f->node;
    eng_node *target = w->src[0].node;
    kiln_context *ctx = s->ctx;
    eng_reader *next;
    for (eng_reader *r = f->reader ? f->reader->next : target->readers; r; r = next) {
        next = r->next;
        eng_node *reader = r->node;
        if (reader == w || reader->storage || reader->mark == f->stamp || reader == f->snapshot)
            continue;
        eng_node *run = consumer_of(reader, w, f->stamp);
        if (!run)
            continue;
        if (snapshot_pays(ctx, target, run)) {
            if (f->snapshot) {
                eng_node_move_src(ctx, reader, target, f->snapshot);
                continue;
            }
            eng_node *copy =
                eng_node_copy(ctx, target, eng_tracker_contiguous(ctx, target->ndim, target->shape),
                              target->ndim, target->shape);
            if (!copy)
                return ctx->err.status ? ctx->err.status : no_memory(ctx);
            eng_node_ref(copy); /* the frame's, until its readers hold it */
            f->snapshot = copy;
            return push_frame(s, copy); /* f is stale from here; this reader comes again */
        }
        f->reader = r;
        return push_frame(s, run); /* f is stale from here */
    }
    if (f->snapshot) {
        eng_node_unref(ctx, f->snapshot);
        f->snapshot = NULL;
    }
    kiln_status st;
    eng_node *shared = shared_old_reader(s, w, target, f->stamp, &st);
    if (st != KILN_OK)
        return st;
    if (shared)
        return push_frame(s, shared); /* f is stale; this step runs again after it */
    f->step = STEP_BUILD;
    return KILN_OK;
}

/* A need that may compute another as an earlier stage of its kernel (kernel.c
 * eng_kernel_stage_of) goes before it: realizing it realizes both, one kernel where the other
 * order makes two. */
static void order_needs(eng_node **needs, uint32_t count) {
    for (uint32_t j = 1; j < count; j++) {
        for (uint32_t i = 0; i < j; i++) {
            if (!eng_kernel_stage_of(needs[j], needs[i]))
                continue;
            eng_node *outer = needs[j];
            memmove(needs + i + 1, needs + i, (j - i) * sizeof *needs);
            needs[i] = outer;
            break;
        }
    }
}

/* The frame schedules the count dependencies in f->needs first (STEP_NEEDS), then builds
 * again. */
static kiln_status wait_for_needs(frame *f, uint32_t count) {
    order_needs(f->needs, count);
    f->step = STEP_NEEDS;
    f->need_count = count;
    f->next_need = 0;
    return KILN_OK;
}

/* Node x's kernel taken from the last realize of the graph (plan.c) and added to the schedule;
 * *taken false where there is none to take (x is then built). */
static kiln_status take_kernel(schedule *s, eng_node *x, bool *taken) {
    kiln_context *ctx = s->ctx;
    *taken = false;
    eng_kernel k;
    kiln_status st;
    if (!plan_take(s, x, &k, &st))
        return st;
    st = add_kernel(s, x, &k);
    if (st != KILN_OK)
        return st;
    if (!eng_program_ready(ctx, &s->kernels.data[s->kernels.len - 1])) {
        /* no program for it with these storages (a variant not compiled: another texel or
         * window binding): built, and compiled */
        give_back(s, s->kernels.len - 1);
        s->kernels.len--;
        return KILN_OK;
    }
    ctx->stats.builds_replayed++;
    *taken = true;
    return KILN_OK;
}

/* Builds the node's kernel: the dependencies it needs first (STEP_NEEDS, then built again), or
 * the kernel, added to the schedule (the frame is done). */
static kiln_status step_build(schedule *s, frame *f) {
    eng_node *w = f->node;
    if (w->kind == ENG_WRITE && w->deferred != s->wanted && s->stack.len >= 2) {
        /* A write that a write's kernel needs, its earlier readers now scheduled: the first
         * time, left for that kernel to store as well (kernel.c fused_write); if it does not,
         * it asks again and this builds the write's own kernel. */
        const frame *below = &s->stack.data[s->stack.len - 2];
        if (below->step == STEP_NEEDS && below->node->kind == ENG_WRITE) {
            w->deferred = s->wanted;
            s->stack.len--;
            return KILN_OK;
        }
    }
    uint32_t known = plan_foresee(s, f);
    if (known > 0)
        return wait_for_needs(f, known);
    bool taken;
    eng_node *node = f->node;
    kiln_status st = take_kernel(s, node, &taken);
    if (st != KILN_OK || taken) {
        s->stack.len -= st == KILN_OK;
        return st;
    }
    eng_kernel k;
    uint32_t count = 0;
    st = eng_kernel_build(s->ctx, f->node, &k, f->needs, MAX_NEEDS, &count, s->wanted);
    s->ctx->stats.kernel_builds++;
    if (st == KILN_ERROR_NOT_FOUND && count > 0) {
        s->ctx->stats.builds_stopped++;
        plan_remember(s, f->node, f->needs, count);
        return wait_for_needs(f, count);
    }
    if (st != KILN_OK)
        return st;
    s->stack.len--;
    st = add_kernel(s, node, &k);
    if (st == KILN_OK)
        plan_keep_replay(s, &s->kernels.data[s->kernels.len - 1]);
    return st;
}

static kiln_status step_needs(schedule *s, frame *f) {
    if (f->next_need < f->need_count)
        return push_frame(s, f->needs[f->next_need++]); /* f is stale from here */
    f->step = STEP_BUILD; /* rebuild: the dependencies are now loads */
    return KILN_OK;
}

/* Schedules the kernels that realize root, dependencies first: the order of a depth-first
 * recursion (a write's earlier readers, then the node's needs, each completely, in order). */
static kiln_status schedule_node(schedule *s, eng_node *root) {
    s->stack.len = 0;
    kiln_status st = push_frame(s, root);
    while (st == KILN_OK && s->stack.len > 0) {
        frame *f = &s->stack.data[s->stack.len - 1];
        switch (f->step) {
        case STEP_START:
            st = step_start(s, f);
            break;
        case STEP_READERS:
            st = step_readers(s, f);
            break;
        case STEP_BUILD:
            st = step_build(s, f);
            break;
        case STEP_NEEDS:
            st = step_needs(s, f);
            break;
        }
    }
    for (size_t i = 0; st != KILN_OK && i < s->stack.len; i++) {
        frame *f = &s->stack.data[i]; /* a failure leaves frames: their snapshots go */
        if (f->step == STEP_READERS && f->snapshot)
            eng_node_unref(s->ctx, f->snapshot);
    }
    return st;
}

/* ---- running the schedule, and what ran --------------------------------------------------- */

/* "kernels 1-2 ran and their results are kept; 3-5 did not run" (kernels numbered from 1). */
static void describe_ran(char *buf, size_t cap, size_t ran, size_t total) {
    char done[96] = "no kernel ran", rest[64] = "";
    if (ran == 1)
        snprintf(done, sizeof done, "kernel 1 ran and its result is kept");
    else if (ran > 1)
        snprintf(done, sizeof done, "kernels 1-%zu ran and their results are kept", ran);
    if (ran > 0 && ran + 1 == total)
        snprintf(rest, sizeof rest, "; %zu did not run", total);
    else if (ran > 0 && ran + 1 < total)
        snprintf(rest, sizeof rest, "; %zu-%zu did not run", ran + 1, total);
    snprintf(buf, cap, "%s%s", done, rest);
}

/* The causes quoted in a realize's message are cut to leave room for the rest. */
enum { CAUSE_MAX = 320 };

/* Copies the context's error message into cause (BASE_ERROR_MESSAGE_MAX bytes) and clears the
 * error, for a message that quotes it. */
static void take_cause(kiln_context *ctx, char *cause) {
    snprintf(cause, BASE_ERROR_MESSAGE_MAX, "%s", base_error_message(&ctx->err));
    base_error_clear(&ctx->err);
}

/* Progress of a realize that compiles for long (a first run's many kernels): once compiling
 * has taken ctx->progress_ns, "compiling kernels: i of n (name)" after each kernel compiled
 * (generated, or made from the disk cache), at most once per progress_ns, through the log
 * whatever KILN_DEBUG says. */
typedef struct progress {
    int64_t began, reported;
    uint64_t compiles; /* kernels compiled before the lookup */
} progress;

static uint64_t compiles(const kiln_context *ctx) {
    return ctx->stats.kernels_compiled + ctx->stats.disk_hits;
}

static void report_progress(kiln_context *ctx, progress *pr, size_t i, size_t total,
                            const eng_program *p) {
    if (compiles(ctx) == pr->compiles)
        return; /* found in the memory cache */
    pr->compiles = compiles(ctx);
    int64_t now = base_now_ns();
    if (now - pr->began < ctx->progress_ns || now - pr->reported < ctx->progress_ns)
        return;
    pr->reported = now;
    base_log_progress("engine", "compiling kernels: %zu of %zu (%s)", i + 1, total,
                      p ? p->name : "?");
}

/* Runs the scheduled kernels in order and sets s->ran to the number that ran; on failure the
 * context's message names the call, the cause, and what did and did not run.
 *
 * Which kernels ran:
 * - The interpreter runs each kernel within eng_batch_run: a kernel ran when that call
 *   returned KILN_OK. (interp_run stops part-way only on an internal error, a load outside its
 *   buffer; such a kernel counts as not run, though it may have stored some elements.)
 * - On a device, eng_batch_run only records the kernel into the batch's command buffer, and
 *   eng_batch_finish submits that buffer and waits for it. A kernel refused by
 *   eng_program_get or eng_batch_run recorded nothing (vkd_batch_dispatch fails before its
 *   first vkCmd call) and the loop stops there, but eng_batch_finish still submits the kernels
 *   recorded before it. Those ran exactly when the submission happened, i.e. vkQueueSubmit
 *   succeeded (eng_batch_finish says so: the device's submit count rose): a failure before it
 * (vkEndCommandBuffer, vkResetFences, vkQueueSubmit) leaves the command buffer unexecuted (the next
 * realize resets it): nothing ran. A failure after it (the fence wait timed out or the device was
 *   lost, or reading the timestamps ran out of memory) comes after the kernels were handed to
 *   the queue, which cannot take them back: they ran (after a timeout they are still running,
 *   and the next batch waits for them before recording), and must not run again.
 * Kernels run in order, so those that ran are the first s->ran. */
static kiln_status run_schedule(schedule *s, const char *call) {
    kiln_context *ctx = s->ctx;
    size_t total = s->kernels.len, recorded = 0;
    progress pr = {.began = base_now_ns(), .reported = INT64_MIN / 2, .compiles = compiles(ctx)};
    s->ran = 0;
    eng_batch *batch;
    kiln_status st = eng_batch_begin(ctx, &batch);
    if (st != KILN_OK) {
        char cause[BASE_ERROR_MESSAGE_MAX];
        take_cause(ctx, cause);
        return base_error_set(&ctx->err, st,
                              "%s: starting a batch of %zu kernels failed (%.*s): "
                              "no kernel ran",
                              call, total, CAUSE_MAX, cause);
    }
    while (st == KILN_OK && recorded < total) {
        eng_program *p;
        st = eng_program_get(ctx, &s->kernels.data[recorded], &p);
        if (st == KILN_OK)
            report_progress(ctx, &pr, recorded, total, p);
        if (st == KILN_OK)
            st = eng_batch_run(ctx, batch, p, &s->kernels.data[recorded]);
        recorded += st == KILN_OK;
    }
    char cause[BASE_ERROR_MESSAGE_MAX] = "", fin_cause[BASE_ERROR_MESSAGE_MAX] = "";
    if (st != KILN_OK)
        take_cause(ctx, cause); /* eng_batch_finish may record its own failure */
    bool submitted;
    kiln_status fin = eng_batch_finish(ctx, batch, &submitted);
    s->ran = submitted ? recorded : 0;
    if (st == KILN_OK && fin == KILN_OK)
        return KILN_OK;
    if (fin != KILN_OK)
        take_cause(ctx, fin_cause);
    char ran[160], sent[48] = "the batch";
    describe_ran(ran, sizeof ran, s->ran, total);
    if (recorded == 1)
        snprintf(sent, sizeof sent, "kernel 1");
    else if (recorded > 1)
        snprintf(sent, sizeof sent, "kernels 1-%zu", recorded);
    const char *finishing = submitted ? "waiting for" : "submitting";
    if (st == KILN_OK)
        return base_error_set(&ctx->err, fin, "%s: %s %s failed (%.*s): %s", call, finishing, sent,
                              CAUSE_MAX, fin_cause, ran);
    if (fin == KILN_OK)
        return base_error_set(&ctx->err, st, "%s: kernel %zu of %zu failed (%.*s): %s", call,
                              recorded + 1, total, CAUSE_MAX, cause, ran);
    return base_error_set(
        &ctx->err, st, "%s: kernel %zu of %zu failed (%.*s), then %s %s failed (%.*s): %s", call,
        recorded + 1, total, CAUSE_MAX / 2, cause, finishing, sent, CAUSE_MAX / 2, fin_cause, ran);
}

/* After the batch: a gather that read an index outside its dim set the bounds flag (words 1,
 * the index, the size; any one of the offending reads). It is cleared for the next realize;
 * where the realize succeeded otherwise (report), it fails as torch's device-side assert does,
 * though every kernel ran and keeps its result (the rows read out of range are zeros). Where
 * it failed already, that failure is the one reported. */
static kiln_status check_bounds(schedule *s, const char *call, bool report) {
    kiln_context *ctx = s->ctx;
    bool gathered = false;
    for (size_t i = 0; i < s->ran && ctx->bounds_flag && !gathered; i++) {
        const eng_kernel *k = &s->kernels.data[i];
        for (uint32_t b = 1; b < k->buffer_count; b++)
            gathered = gathered || k->buffers[b] == ctx->bounds_flag;
    }
    if (!gathered)
        return KILN_OK;
    int32_t words[ENG_BOUNDS_WORDS];
    base_error kept = ctx->err; /* a failure reported already stays the context's */
    kiln_status st = eng_storage_read(ctx, ctx->bounds_flag, words, sizeof words);
    if (st == KILN_OK && words[0] != 0) {
        const int32_t zero[ENG_BOUNDS_WORDS] = {0};
        st = eng_storage_write(ctx, ctx->bounds_flag, zero, sizeof zero);
    }
    if (!report) {
        ctx->err = kept;
        return KILN_OK;
    }
    if (st != KILN_OK || words[0] == 0)
        return st;
    char ran[160];
    describe_ran(ran, sizeof ran, s->ran, s->kernels.len);
    return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_BOUNDS,
                          "%s: kiln_index_select: index %d is out of bounds for a dim of size "
                          "%d (indices must be in [0, size)); its rows read as zeros: %s",
                          call, words[1], words[2], ran);
}

/* The nodes whose kernels ran are realized: they let their sources go (what only they held is
 * freed). */
static void let_go(schedule *s) {
    /* Held meanwhile: one realized node may be all that held another. */
    const eng_kernel *ks = s->kernels.data;
    for (size_t i = 0; i < s->ran; i++)
        for (uint32_t j = 0; j <= ks[i].sibling_count; j++)
            eng_node_ref(kernel_output(&ks[i], j));
    for (size_t i = 0; i < s->ran; i++)
        for (uint32_t j = 0; j <= ks[i].sibling_count; j++)
            eng_node_let_go(s->ctx, kernel_output(&ks[i], j));
    for (size_t i = 0; i < s->ran; i++)
        for (uint32_t j = 0; j <= ks[i].sibling_count; j++)
            eng_node_unref(s->ctx, kernel_output(&ks[i], j));
}

/* KILN_DEBUG=1: two lines per realize, this realize's figures (the difference from before)
 * and then the context's totals, each field named:
 *   realize: 3 kernels (2 compiled in 1.204 ms, 1 from the memory cache, 0 from disk; 4
 *            builds, 1 stopped), 3 dispatches, device 0.310 ms
 *   totals: 4 realizes, 9 kernels compiled in 3.1 ms, 4 memory-cache hits, 2 disk hits,
 *           1 disk miss, 11 dispatches, device 1.020 ms */
static void log_stats(kiln_context *ctx, size_t kernels, const kiln_stats *b) {
    const kiln_stats *t = &ctx->stats;
    base_log(BASE_LOG_INFO, "engine",
             "realize: %zu kernels (%llu compiled in %.3f ms, %llu from the memory cache, %llu "
             "from disk; %llu builds, %llu stopped, %llu replayed), %llu dispatches, device "
             "%.3f ms",
             kernels, (unsigned long long)(t->kernels_compiled - b->kernels_compiled),
             (double)(t->codegen_ns - b->codegen_ns) / 1e6,
             (unsigned long long)(t->kernels_cached - b->kernels_cached),
             (unsigned long long)(t->disk_hits - b->disk_hits),
             (unsigned long long)(t->kernel_builds - b->kernel_builds),
             (unsigned long long)(t->builds_stopped - b->builds_stopped),
             (unsigned long long)(t->builds_replayed - b->builds_replayed),
             (unsigned long long)(t->dispatches - b->dispatches),
             (double)(t->device_time_ns - b->device_time_ns) / 1e6);
    base_log(BASE_LOG_INFO, "engine",
             "totals: %llu realizes, %llu kernels compiled in %.3f ms, %llu memory-cache hits, "
             "%llu disk hits, %llu disk misses, %llu dispatches, device %.3f ms",
             (unsigned long long)t->realizes, (unsigned long long)t->kernels_compiled,
             (double)t->codegen_ns / 1e6, (unsigned long long)t->kernels_cached,
             (unsigned long long)t->disk_hits, (unsigned long long)t->disk_misses,
             (unsigned long long)t->dispatches, (double)t->device_time_ns / 1e6);
}

/* Realizes nodes for the public call named call: schedule, then run (kernels are built,
 * looked up or compiled, and dispatched as they run). */
static kiln_status realize_impl(kiln_context *ctx, const char *call, uint32_t count,
                                eng_node *const *nodes) {
    kiln_status sticky = eng_call_begin(ctx); /* a graph-building error recorded earlier */
    if (sticky != KILN_OK)
        return sticky;
    schedule s = {.ctx = ctx};
    kiln_stats before = ctx->stats; /* this realize's figures are the difference */
    int64_t start = base_now_ns();
    if (ctx->trace && ctx->graph_calls) {
        /* The graph this realize runs was built by the program's calls since the last one:
         * from the first's start to the last's end, the program's own work in between
         * included; the args say how much of it was Kiln's. */
        char args[96];
        snprintf(args, sizeof args, "\"calls\": %u, \"kiln_us\": %.1f", ctx->graph_calls,
                 (double)ctx->graph_own_ns * 1e-3);
        eng_trace_span(ctx, ENG_TRACE_HOST, "graph", "graph build", ctx->graph_first_ns,
                       ctx->graph_last_ns, args);
        ctx->graph_calls = 0;
        ctx->graph_own_ns = 0;
    }
    kiln_status st = mark_wanted(&s, count, nodes);
    if (st == KILN_OK)
        plan_look_ahead(&s, count, nodes);
    for (uint32_t i = 0; st == KILN_OK && i < count; i++)
        st = schedule_node(&s, nodes[i]);
    eng_trace_span(ctx, ENG_TRACE_HOST, "schedule", "schedule", start, base_now_ns(), NULL);
    if (st != KILN_OK) {
        char cause[BASE_ERROR_MESSAGE_MAX];
        take_cause(ctx, cause);
        base_error_set(&ctx->err, st, "%s: scheduling failed (%.*s): no kernel ran", call,
                       CAUSE_MAX, cause);
    }
    if (st == KILN_OK) {
        plan_keep(&s); /* what scheduling learnt holds whether the kernels run or not */
        st = run_schedule(&s, call);
    }
    /* every kernel that ran keeps its result, a realize failing on the flag too */
    kiln_status bounds = check_bounds(&s, call, st == KILN_OK);
    st = st == KILN_OK ? bounds : st;
    if (st == KILN_OK && !ctx->blob_saved &&
        ctx->stats.pipelines_created > before.pipelines_created) {
        eng_cache_save_pipelines(ctx); /* after the program's first burst of compiles */
        ctx->blob_saved = true;
    }
    if (st != KILN_OK)
        give_back(&s, s.ran);
    let_go(&s);
    ctx->stats.realizes++;
    if (base_log_verbosity() >= 1)
        log_stats(ctx, s.kernels.len, &before);
    if (ctx->trace) {
        char args[64];
        snprintf(args, sizeof args, "\"kernels\": %zu", s.kernels.len);
        eng_trace_span(ctx, ENG_TRACE_HOST, "realize", call, start, base_now_ns(), args);
        eng_trace_flush(ctx);
    }
    BASE_VEC_FREE(&ctx->alloc, &s.kernels);
    BASE_VEC_FREE(&ctx->alloc, &s.stack);
    BASE_VEC_FREE(&ctx->alloc, &s.walk);
    BASE_VEC_FREE(&ctx->alloc, &s.order);
    BASE_VEC_FREE(&ctx->alloc, &s.stops);
    /* The kernels' ASTs and the lowering memo live for one realize. */
    base_arena_reset(&ctx->arena);
    return st;
}

/* A realize, its messages (statistics, cache warnings, validation) to the context's callback. */
static kiln_status realize(kiln_context *ctx, const char *call, uint32_t count,
                           eng_node *const *nodes) {
    eng_log_enter(ctx);
    kiln_status st = realize_impl(ctx, call, count, nodes);
    eng_log_leave(ctx);
    return st;
}

kiln_status eng_realize(kiln_context *ctx, uint32_t count, eng_node *const *nodes) {
    return realize(ctx, "kiln_realize", count, nodes);
}

kiln_status kiln_realize(kiln_tensor *t) {
    kiln_context *ctx = NULL;
    kiln_status st;
    if (!eng_arg_status(t, &ctx, "kiln_realize", &st))
        return st;
    eng_node *base = eng_resolve(t);
    return realize(ctx, "kiln_realize", 1, &base);
}

kiln_status kiln_realize_many(kiln_context *ctx, uint32_t count, kiln_tensor *const *tensors) {
    if (!ctx)
        return KILN_ERROR_INVALID_ARGUMENT;
    kiln_status sticky = eng_call_begin(ctx);
    if (sticky != KILN_OK)
        return sticky;
    if (count && !tensors)
        return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_realize_many: no tensors");
    for (uint32_t i = 0; i < count; i++) {
        kiln_context *owner = ctx;
        kiln_status st;
        if (!tensors[i])
            return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                                  "kiln_realize_many: tensor %u of %u is NULL", i, count);
        if (!eng_arg_status(tensors[i], &owner, "kiln_realize_many", &st)) {
            char why[BASE_ERROR_MESSAGE_MAX];
            snprintf(why, sizeof why, "%s", base_error_message(&ctx->err));
            return base_error_set(&ctx->err, st, "%s (tensor %u of %u)", why, i, count);
        }
    }
    eng_node **nodes = base_calloc(&ctx->alloc, count ? count : 1, sizeof *nodes);
    if (!nodes)
        return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY,
                              "kiln_realize_many: no memory for %u tensors", count);
    for (uint32_t i = 0; i < count; i++)
        nodes[i] = eng_resolve(tensors[i]);
    kiln_status st = realize(ctx, "kiln_realize_many", count, nodes);
    base_free(&ctx->alloc, nodes, (count ? count : 1) * sizeof *nodes);
    return st;
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
    uint64_t need;
    if (__builtin_mul_overflow((uint64_t)numel, (uint64_t)eng_type_size(ENG_BASE(t)->type), &need))
        return base_error_set(&ctx->err, KILN_ERROR_LIMIT_EXCEEDED,
                              "kiln_read: the tensor holds %lld elements of %u bytes, more bytes "
                              "than a size_t counts",
                              (long long)numel, eng_type_size(ENG_BASE(t)->type));
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
    eng_node *node = eng_resolve(src);
    st = realize(ctx, "kiln_read", 1, &node);
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
