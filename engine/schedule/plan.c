/* What a realize keeps for the next realize of the same graph: foresight (where its kernel
 * builds stopped at dependencies) and replay (the kernels it built), in plans of eight graphs a
 * context. realize.c asks (schedule.h); docs/architecture.md has the design. */
#include "schedule.h"

#include <stdlib.h>
#include <string.h>

/* ---- foresight: the dependencies of a build known from the last realize of the graph --------
 *
 * A kernel build that meets an unrealized node its kernel must load (a reduction, a value
 * several kernels read) stops, the scheduler schedules those dependencies, and the build runs
 * again. A program that builds the same graph step after step (a training or decoding loop)
 * paid that twice for most of its kernels: of the training step's 48 builds, 22 stopped
 * (docs/lavapipe.md). So a realize numbers the nodes it may schedule (depth first from its
 * roots) and hashes the graph they make: each node's local hash (what it is, not which nodes:
 * eng_node_local_hash), the numbers of its sources, its unrealized readers (to four), whether a
 * tensor holds it, a realized one's storage size. A realize keeps, under that signature, which
 * node's build stopped at which nodes (by number); the next realize of the same signature
 * schedules those first and builds each once. Scheduling is a function of
 * what the signature covers, so the kernels and their order are the same as without it; what
 * it leaves out (the readers of a node beyond their count, the order the program made the
 * nodes in) can at worst schedule a node that would have been inlined: a kernel more, never
 * another value. */

typedef struct plan_stop {
    uint32_t x, count;
    uint32_t first; /* its needs: the plan's needs[first .. first + count) */
} plan_stop;

/* One allocation: the stops by node number (a node's in the order they came), then the
 * needs. */
struct eng_plan {
    uint64_t signature;
    uint32_t nodes; /* numbered by the walk */
    uint64_t used;  /* ctx->plan_clock when last used */
    uint32_t stop_count, need_count;
    plan_stop *stops;
    uint32_t *needs;
    struct replay **replays; /* the kernel built for each node, by number (NULL: none; below) */
};

static size_t plan_size(uint32_t stops, uint32_t needs) {
    return sizeof(eng_plan) + stops * sizeof(plan_stop) + needs * sizeof(uint32_t);
}

static void replays_free(kiln_context *ctx, struct replay **replays, uint32_t nodes);

static void plan_free(kiln_context *ctx, eng_plan *p) {
    replays_free(ctx, p->replays, p->nodes);
    base_free(&ctx->alloc, p, plan_size(p->stop_count, p->need_count));
}

/* The first stop of node x in p + 1 (0: none). */
static uint32_t first_stop(const eng_plan *p, uint32_t x) {
    uint32_t lo = 0, hi = p->stop_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->stops[mid].x < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->stop_count && p->stops[lo].x == x ? lo + 1 : 0;
}

void eng_foresight_finish(kiln_context *ctx) {
    for (uint32_t i = 0; i < ENG_PLANS_KEPT; i++) {
        if (ctx->plans[i])
            plan_free(ctx, ctx->plans[i]);
        ctx->plans[i] = NULL;
    }
}

/* The signature of the graph mark_wanted numbered (the roots' numbers, then each node's local
 * hash, unrealized readers up to four, whether a tensor holds it, and its sources' numbers or
 * its storage's size). */
static uint64_t graph_signature(const schedule *s, uint32_t count, eng_node *const *roots) {
    uint64_t h = base_hash_u64(count, s->order.len);
    for (uint32_t i = 0; i < count; i++)
        h = base_hash_u64(h, roots[i]->plan_index);
    for (size_t i = 0; i < s->order.len; i++) {
        eng_node *n = s->order.data[i];
        uint64_t readers = eng_node_live_readers(n, 4);
        h = base_hash_u64(h, eng_node_local_hash(n));
        h = base_hash_u64(h, readers | (uint64_t)(n->cells > 0) << 3 |
                                 (uint64_t)(n->storage != NULL) << 4 | (uint64_t)n->written << 5);
        if (n->storage)
            h = base_hash_u64(base_hash_u64(h, n->storage->elements), n->storage->bound);
        else
            for (uint32_t j = 0; j < n->nsrc; j++)
                h = base_hash_u64(h, n->src[j].node->plan_index);
    }
    return h;
}

/* Before the realize schedules: the plan of its graph, if an earlier realize left one. */
void plan_look_ahead(schedule *s, uint32_t count, eng_node *const *roots) {
    kiln_context *ctx = s->ctx;
    if (!s->numbered)
        return;
    s->signature = graph_signature(s, count, roots);
    for (uint32_t i = 0; i < ENG_PLANS_KEPT; i++) {
        eng_plan *p = ctx->plans[i];
        if (p && p->signature == s->signature && p->nodes == s->order.len) {
            p->used = ++ctx->plan_clock;
            s->plan = p;
            return;
        }
    }
}

/* The dependencies the frame's node's next build stopped at in the last realize of this graph,
 * those not realized yet, into f->needs (their count; 0: none known). */
uint32_t plan_foresee(schedule *s, frame *f) {
    const eng_plan *p = s->plan;
    if (!p)
        return 0;
    if (!f->looked_ahead) {
        f->looked_ahead = true;
        f->next_stop = f->node->plan_mark == s->numbered ? first_stop(p, f->node->plan_index) : 0;
    }
    uint32_t count = 0;
    while (count == 0 && f->next_stop) {
        const plan_stop *stop = &p->stops[f->next_stop - 1];
        f->next_stop = f->next_stop < p->stop_count && stop[1].x == stop->x ? f->next_stop + 1 : 0;
        for (uint32_t i = 0; i < stop->count; i++) {
            eng_node *n = s->order.data[p->needs[stop->first + i]];
            if (!n->storage)
                f->needs[count++] = n;
        }
    }
    return count;
}

/* A build of node stopped at needs: kept for the plan this realize leaves (nodes made while
 * scheduling, which have no number, are not). */
void plan_remember(schedule *s, const eng_node *node, eng_node *const *needs, uint32_t count) {
    if (s->plan || !s->numbered || node->plan_mark != s->numbered)
        return;
    learnt_stop stop = {.x = node->plan_index, .count = count};
    for (uint32_t i = 0; i < count; i++) {
        if (needs[i]->plan_mark != s->numbered)
            return;
        stop.needs[i] = needs[i]->plan_index;
    }
    if (BASE_VEC_PUSH(&s->ctx->alloc, &s->stops, stop) != KILN_OK)
        s->numbered = 0; /* no memory: nothing learnt this time */
}

/* Stops by node number, a node's in the order they came (first: the learnt stop's index). */
static int stop_cmp(const void *pa, const void *pb) {
    const plan_stop *a = pa, *b = pb;
    if (a->x != b->x)
        return a->x < b->x ? -1 : 1;
    return a->first < b->first ? -1 : a->first > b->first;
}

/* After a realize's schedule: the stops it learnt and the kernels it built become its graph's
 * plan (replacing the least recently used one). Nothing is kept where memory is short. */
void plan_keep(schedule *s) {
    kiln_context *ctx = s->ctx;
    if (s->plan || !s->numbered || (s->stops.len == 0 && s->kernels.len < 2))
        return; /* (a graph of one kernel gains little from a plan, and would take a slot) */
    const learnt_stop *learnt = s->stops.data;
    uint32_t n = (uint32_t)s->stops.len, needs = 0;
    for (uint32_t i = 0; i < n; i++)
        needs += learnt[i].count;
    eng_plan *p = base_malloc(&ctx->alloc, plan_size(n, needs));
    if (!p)
        return;
    *p = (eng_plan){.signature = s->signature,
                    .nodes = (uint32_t)s->order.len,
                    .used = ++ctx->plan_clock,
                    .stop_count = n,
                    .need_count = needs,
                    .stops = (plan_stop *)(p + 1)};
    p->needs = (uint32_t *)(p->stops + n);
    for (uint32_t i = 0; i < n; i++)
        p->stops[i] = (plan_stop){.x = learnt[i].x, .count = learnt[i].count, .first = i};
    qsort(p->stops, n, sizeof *p->stops, stop_cmp);
    for (uint32_t i = 0, at = 0; i < n; i++) {
        const learnt_stop *l = &learnt[p->stops[i].first];
        memcpy(p->needs + at, l->needs, l->count * sizeof *l->needs);
        p->stops[i].first = at;
        at += l->count;
    }
    uint32_t slot = 0;
    for (uint32_t i = 0; i < ENG_PLANS_KEPT; i++) {
        if (!ctx->plans[i]) {
            slot = i;
            break;
        }
        if (ctx->plans[i]->used < ctx->plans[slot]->used)
            slot = i;
    }
    if (ctx->plans[slot])
        plan_free(ctx, ctx->plans[slot]);
    ctx->plans[slot] = p;
}

/* ---- replay: a kernel built once, taken again by the next realizes of its graph ------------
 *
 * Foresight left each kernel of a graph realized again built once; that build is still host
 * work (about 20 us a kernel: the training step's 24 took 0.5 ms of its 1.4 ms of host time,
 * most of it the symbolic algebra of the views' indices, done again to the same result). So,
 * from the graph's second realize (a graph realized once keeps nothing), the plan keeps for
 * each numbered node the kernel last built for it (its ASTs left out: only lowering reads them,
 * and the program is compiled already) with the region it was built from: the node, its
 * siblings and the unrealized nodes they compute (a build inlines every unrealized node it
 * depends on, or stops), and the realized nodes where it stops (their storages are its
 * buffers). Each region node is kept with what a build reads of it, with and without bound
 * values: an unrealized node's values and local hashes (graph.c eng_node_values_hash,
 * eng_node_local_hash), a realized one's frontier hash (eng_node_frontier_hash: its type, sizes
 * and storage, not how it was computed, so that a kernel loading the result of a write at a
 * bound position is taken at the next position too); with a print of the readers above it
 * (readers_print) and, if realized, which buffer holds its storage. A later realize of the
 * graph takes the kernel instead of building it where the region is the same: every node's
 * hashes and readers, the same nodes realized, no source moved, the same buffers from their
 * storages (distinct storages where they were distinct), siblings and fused writes still to
 * compute, and a program compiled for it. Otherwise the node is built and that build is kept.
 * Where only bound values differ (a view's start that moves with a position, a number read
 * from a bound Variable: an optimizer's step count), the kernel is the same, its bound
 * Variables parameters (kernel.c unbind), and is taken with the values now bound (rebind).
 * Debug builds also build every kernel they take and compare the two: a difference is an
 * internal error. */

enum { NO_SLOT = UINT32_MAX, UNREALIZED = UINT32_MAX - 1, NO_NODE = UINT32_MAX };

typedef struct region_node {
    uint32_t node;    /* its number */
    uint32_t slot;    /* realized: the buffer holding its storage (NO_SLOT: none); UNREALIZED */
    uint64_t values;  /* eng_node_values_hash; realized, eng_node_frontier_hash */
    uint64_t local;   /* the same without the bound values: eng_node_local_hash, unbound */
    uint64_t readers; /* readers_print */
} region_node;

typedef BASE_VEC(region_node) region_vec;

typedef struct replay {
    eng_kernel k;                            /* without ASTs, nodes and storages */
    uint32_t siblings[ENG_MAX_OUTPUTS - 1];  /* their nodes' numbers */
    uint32_t reductions[ENG_MAX_REDUCTIONS]; /* their nodes' numbers (NO_NODE: none) */
    uint32_t flag_slots;                     /* bit i: buffer i is the bounds flag */
    uint32_t count;                          /* region nodes */
    region_node region[];
} replay;

static size_t replay_size(uint32_t count) {
    return sizeof(replay) + count * sizeof(region_node);
}

static void replays_free(kiln_context *ctx, replay **replays, uint32_t nodes) {
    if (!replays)
        return;
    for (uint32_t i = 0; i < nodes; i++) {
        if (replays[i])
            base_free(&ctx->alloc, replays[i], replay_size(replays[i]->count));
    }
    base_free(&ctx->alloc, replays, nodes * sizeof *replays);
}

void eng_foresight_mark(kiln_context *ctx) {
    sym_ctx *sc = ctx->sym;
    for (uint32_t i = 0; i < ENG_PLANS_KEPT; i++) {
        const eng_plan *p = ctx->plans[i];
        for (uint32_t j = 0; p && p->replays && j < p->nodes; j++) {
            const eng_kernel *k = p->replays[j] ? &p->replays[j]->k : NULL;
            if (!k)
                continue;
            for (uint32_t d = 0; d < k->ndim; d++)
                sym_mark(sc, k->dims[d]);
            const sym_node *fixed[] = {k->numel, k->out_index, k->gidx, k->reduce_count, k->ridx};
            for (size_t f = 0; f < BASE_COUNTOF(fixed); f++)
                sym_mark(sc, fixed[f]);
            for (uint32_t r = 0; r < k->reduction_count; r++)
                sym_mark(sc, k->reductions[r].at);
            for (uint32_t q = 0; q < k->param_count; q++)
                sym_mark(sc, k->params[q]);
        }
    }
}

uint64_t eng_foresight_replays(const kiln_context *ctx) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < ENG_PLANS_KEPT; i++) {
        const eng_plan *p = ctx->plans[i];
        for (uint32_t j = 0; p && p->replays && j < p->nodes; j++)
            n += p->replays[j] != NULL;
    }
    return n;
}

/* Whether buffer i of k is an output's: buffer 0 (a write's target is its region's), or a
 * sibling's. */
static bool output_buffer(const eng_kernel *k, uint32_t i) {
    if (i == 0)
        return k->output->kind != ENG_WRITE;
    for (uint32_t j = 0; j < k->sibling_count; j++) {
        if (k->siblings[j].buffer == i)
            return true;
    }
    return false;
}

/* The number of n in this realize (NO_NODE: n is NULL or has none). */
static uint32_t number_of(const schedule *s, const eng_node *n) {
    return s->numbered && n && n->plan_mark == s->numbered ? n->plan_index : NO_NODE;
}

/* Whether n is one of k's outputs (built unrealized; their storage comes with the kernel). */
static bool is_output(const eng_kernel *k, const eng_node *n) {
    for (uint32_t j = 0; j <= k->sibling_count; j++) {
        if (kernel_output(k, j) == n)
            return true;
    }
    return false;
}

typedef struct print {
    const schedule *s;
    const eng_kernel *k;
    uint64_t h;
} print;

/* readers_print's visit: the reader into the print; climbs where a build's walk would (k's
 * outputs, realized since, counted as they were). */
static int print_reader(const eng_node *u, void *user) {
    print *p = user;
    bool realized = u->storage && !is_output(p->k, u);
    p->h = base_hash_u64(p->h, number_of(p->s, u));
    p->h = base_hash_u64(p->h, (uint64_t)u->kind | (uint64_t)u->op << 8 | (uint64_t)realized << 24 |
                                   (uint64_t)(u->cells > 0) << 25 | (uint64_t)u->boundary << 26 |
                                   (uint64_t)(u->wanted == p->s->wanted) << 27);
    return !realized && u->kind == ENG_EW && !u->boundary;
}

/* What a build may look at of the readers above n (kernel.c read_by_several_kernels: whether
 * two kernels read it; add_siblings: other reductions of the same input; unrolled windows: a
 * chain's only reader): the build's walk up its readers (eng_readers_walk), climbing where it
 * climbs, each reader seen with its number (NO_NODE outside the graph), kind, op, and whether
 * it is realized (k's outputs not yet), held by a tensor, a boundary or wanted by this
 * realize. A reader made or dropped outside the graph (a tensor built and not realized)
 * changes it: the kernel is then built. */
static uint64_t readers_print(const schedule *s, const eng_kernel *k, const eng_node *n) {
    print p = {s, k, 0};
    eng_readers_walk(n, print_reader, &p);
    return p.h;
}

/* The region of k (just added for its output node, every storage assigned) into s->walk's
 * scratch as region nodes; false where a node of it has no number. */
static bool region_of(schedule *s, const eng_kernel *k, region_vec *out) {
    kiln_context *ctx = s->ctx;
    uint64_t seen = ++ctx->next_mark;
    s->walk.len = 0;
    for (uint32_t j = k->sibling_count + 1; j-- > 0;) {
        if (BASE_VEC_PUSH(&ctx->alloc, &s->walk, kernel_output(k, j)) != KILN_OK)
            return false;
    }
    while (s->walk.len > 0) {
        eng_node *n = s->walk.data[--s->walk.len];
        if (n->mark2 == seen)
            continue;
        n->mark2 = seen;
        uint32_t number = number_of(s, n);
        if (number == NO_NODE)
            return false;
        region_node r = {.node = number, .slot = UNREALIZED, .readers = readers_print(s, k, n)};
        if (n->storage && !is_output(k, n)) { /* the outputs were unrealized when built */
            r.slot = NO_SLOT;
            for (uint32_t i = 0; i < k->buffer_count && r.slot == NO_SLOT; i++) {
                if (k->buffers[i] == n->storage)
                    r.slot = i;
            }
        }
        bool inlined = r.slot == UNREALIZED;
        r.values = inlined ? eng_node_values_hash(n) : eng_node_frontier_hash(n, false);
        r.local = inlined ? eng_node_local_hash(n) : eng_node_frontier_hash(n, true);
        if (BASE_VEC_PUSH(&ctx->alloc, out, r) != KILN_OK)
            return false;
        if (r.slot != UNREALIZED)
            continue;
        for (uint32_t i = n->nsrc; i-- > 0;) {
            if (BASE_VEC_PUSH(&ctx->alloc, &s->walk, n->src[i].node) != KILN_OK)
                return false;
        }
    }
    return true;
}

/* Keeps kernel k (just added) as its node's replay, in place of the one kept before, where the
 * graph has a plan (from its second realize on: a graph realized once keeps no kernels);
 * nothing where it cannot be taken again (a node without a number, a buffer no region node
 * holds). */
void plan_keep_replay(schedule *s, const eng_kernel *k) {
    kiln_context *ctx = s->ctx;
    uint32_t x = number_of(s, k->output);
    if (!s->plan || x == NO_NODE)
        return;
    replay ***replays = &s->plan->replays;
    if (!*replays) {
        *replays = base_calloc(&ctx->alloc, s->order.len, sizeof **replays);
        if (!*replays)
            return;
    }
    region_vec region = {0};
    uint32_t covered = 0, flags = 0;
    bool ok = region_of(s, k, &region);
    for (size_t i = 0; ok && i < region.len; i++) {
        if (region.data[i].slot < ENG_MAX_BUFFERS)
            covered |= 1u << region.data[i].slot;
    }
    for (uint32_t i = 0; ok && i < k->buffer_count; i++) {
        for (uint32_t j = 0; j < i; j++)
            ok = ok && k->buffers[j] != k->buffers[i];
        if (k->buffers[i] == ctx->bounds_flag)
            flags |= 1u << i;
        ok = ok && (covered >> i & 1u || flags >> i & 1u || output_buffer(k, i));
    }
    for (uint32_t j = 0; j < k->reduction_count; j++)
        ok = ok && (!k->reductions[j].node || number_of(s, k->reductions[j].node) != NO_NODE);
    replay *r = ok ? base_malloc(&ctx->alloc, replay_size((uint32_t)region.len)) : NULL;
    if (r) {
        r->k = *k;
        r->k.value = NULL;
        r->k.output = NULL;
        memset(r->k.buffers, 0, sizeof r->k.buffers);
        for (uint32_t j = 0; j < k->sibling_count; j++) {
            r->siblings[j] = number_of(s, k->siblings[j].node);
            r->k.siblings[j].node = NULL;
            r->k.siblings[j].value = NULL;
        }
        for (uint32_t j = 0; j < k->reduction_count; j++) {
            r->reductions[j] = number_of(s, k->reductions[j].node);
            r->k.reductions[j].node = NULL;
            r->k.reductions[j].value = NULL;
        }
        r->flag_slots = flags;
        r->count = (uint32_t)region.len;
        memcpy(r->region, region.data, region.len * sizeof *region.data);
    }
    BASE_VEC_FREE(&ctx->alloc, &region);
    replay **slot = &(*replays)[x];
    if (*slot)
        base_free(&ctx->alloc, *slot, replay_size((*slot)->count));
    *slot = r; /* NULL where it cannot be taken: built again */
}

/* k's parameters for the values now bound in r's region, where a node differs from the
 * region's only in those (a view's start or size, a number read from a bound Variable): the
 * same kernel, built with every bound Variable as its Variable, each a parameter (kernel.c
 * unbind), takes the new values. False where a Variable is bound to two values in the region,
 * or one of k's Variables (its lifted offsets aside) is bound in none of its nodes. */
static bool rebind(const schedule *s, const replay *r, eng_kernel *k) {
    eng_bindings now = {0};
    for (uint32_t i = 0; i < r->count; i++) {
        const region_node *e = &r->region[i];
        if (!eng_node_bindings(s->order.data[e->node], e->slot != UNREALIZED, &now))
            return false;
    }
    for (uint32_t i = 0; i < k->param_count; i++) {
        if (k->offset_params >> i & 1u)
            continue;
        uint32_t j = 0;
        while (j < now.count && now.vars[j] != k->params[i])
            j++;
        if (j == now.count)
            return false;
        k->param_values[i] = now.values[j];
    }
    return true;
}

/* The kernel r keeps, for node x of this realize, into k: false where x's region differs from
 * r's (then x is built), but for bound values, which rebind gives its parameters. */
static bool take_replay(schedule *s, const replay *r, eng_node *x, eng_kernel *k) {
    kiln_context *ctx = s->ctx;
    const eng_node *const *order = (const eng_node *const *)s->order.data;
    *k = r->k;
    k->output = x;
    for (uint32_t j = 0; j < k->sibling_count; j++) {
        eng_node *sib = s->order.data[r->siblings[j]];
        if (sib->storage ||
            (sib->kind == ENG_WRITE ? sib->deferred != s->wanted : sib->wanted != s->wanted))
            return false;
        k->siblings[j].node = sib;
    }
    for (uint32_t j = 0; j < k->reduction_count; j++)
        k->reductions[j].node =
            r->reductions[j] == NO_NODE ? NULL : s->order.data[r->reductions[j]];
    bool rebinding = false;
    for (uint32_t i = 0; i < r->count; i++) {
        const region_node *e = &r->region[i];
        eng_node *n = s->order.data[e->node];
        bool inlined = e->slot == UNREALIZED;
        if (!inlined && !n->storage)
            return false;
        if ((inlined ? eng_node_values_hash(n) : eng_node_frontier_hash(n, false)) != e->values) {
            if ((inlined ? eng_node_local_hash(n) : eng_node_frontier_hash(n, true)) != e->local)
                return false;
            rebinding = true;
        }
        if (readers_print(s, k, n) != e->readers)
            return false;
        if (e->slot == UNREALIZED) { /* x and its siblings included: their storage comes later */
            if (n->storage)
                return false;
            /* a source moved to a copy of its old values since the graph was numbered (a
             * write's earlier reader, realize.c step_readers) has no number: not the region */
            for (uint32_t j = 0; j < n->nsrc; j++) {
                if (number_of(s, n->src[j].node) == NO_NODE)
                    return false;
            }
            continue;
        }
        if (e->slot == NO_SLOT)
            continue;
        if (k->buffers[e->slot] && k->buffers[e->slot] != n->storage)
            return false;
        k->buffers[e->slot] = n->storage;
    }
    for (uint32_t i = 0; i < k->buffer_count; i++) {
        if (r->flag_slots >> i & 1u) {
            k->buffers[i] = eng_bounds_flag(ctx);
            if (!k->buffers[i])
                return false;
        }
        if (!k->buffers[i] && !output_buffer(k, i))
            return false;
        for (uint32_t j = 0; k->buffers[i] && j < i; j++) {
            if (k->buffers[j] == k->buffers[i])
                return false;
        }
    }
    for (uint32_t i = 0; i < r->count; i++) { /* a storage loaded through no buffer: not one */
        const region_node *e = &r->region[i];
        for (uint32_t b = 0; e->slot == NO_SLOT && b < k->buffer_count; b++) {
            if (k->buffers[b] == order[e->node]->storage)
                return false;
        }
    }
    return !rebinding || rebind(s, r, k);
}

#ifndef NDEBUG
/* The first field where a (taken) and b (built) differ, their outputs' buffers aside (NULL:
 * none). */
static const char *replay_differs(const eng_kernel *a, const eng_kernel *b) {
    if (a->hash != b->hash || a->out_type != b->out_type || a->ndim != b->ndim ||
        a->rows != b->rows || a->numel != b->numel || a->out_index != b->out_index ||
        a->gidx != b->gidx)
        return "the kernel's code or its output";
    for (uint32_t d = 0; d < a->ndim; d++) {
        if (a->dims[d] != b->dims[d])
            return "dims";
    }
    if (a->reduction_count != b->reduction_count || a->reduce_count != b->reduce_count ||
        a->ridx != b->ridx)
        return "reductions";
    for (uint32_t i = 0; i < a->reduction_count; i++) {
        const eng_reduction *x = &a->reductions[i], *y = &b->reductions[i];
        if (x->op != y->op || x->type != y->type || x->arg != y->arg || x->stage != y->stage ||
            x->node != y->node || x->at != y->at)
            return "a reduction";
    }
    if (a->output != b->output || a->sibling_count != b->sibling_count)
        return "outputs";
    for (uint32_t j = 0; j < a->sibling_count; j++) {
        if (a->siblings[j].node != b->siblings[j].node ||
            a->siblings[j].buffer != b->siblings[j].buffer)
            return "siblings";
    }
    if (a->buffer_count != b->buffer_count)
        return "buffer count";
    for (uint32_t i = 0; i < a->buffer_count; i++) {
        if (a->buffer_types[i] != b->buffer_types[i] ||
            (!output_buffer(a, i) && a->buffers[i] != b->buffers[i]))
            return "buffers";
    }
    if (a->param_count != b->param_count || a->offset_params != b->offset_params)
        return "parameters";
    for (uint32_t i = 0; i < a->param_count; i++) {
        if (a->params[i] != b->params[i] || a->param_values[i] != b->param_values[i])
            return "parameters";
    }
    return NULL;
}

/* Debug builds: x built as well, which must give the kernel taken (k). */
static kiln_status check_replay(schedule *s, eng_node *x, const eng_kernel *k) {
    eng_node *needs[MAX_NEEDS];
    uint32_t count = 0;
    eng_kernel built;
    kiln_status st = eng_kernel_build(s->ctx, x, &built, needs, MAX_NEEDS, &count, s->wanted);
    if (st != KILN_OK && !(st == KILN_ERROR_NOT_FOUND && count > 0))
        return st; /* out of memory: the realize fails as a build would have */
    const char *differs = st == KILN_OK ? replay_differs(k, &built) : "its build stopped";
    if (!differs)
        return KILN_OK;
    return base_error_set(&s->ctx->err, KILN_ERROR_INTERNAL,
                          "scheduling: the kernel kept for node %u of the graph differs from "
                          "its build (%s)",
                          x->plan_index, differs);
}
#endif

bool plan_take(schedule *s, eng_node *x, eng_kernel *k, kiln_status *st) {
    *st = KILN_OK;
    uint32_t number = number_of(s, x);
    const replay *r =
        s->plan && s->plan->replays && number != NO_NODE ? s->plan->replays[number] : NULL;
    if (!r || !take_replay(s, r, x, k))
        return false;
#ifndef NDEBUG
    *st = check_replay(s, x, k);
#endif
    return *st == KILN_OK;
}
