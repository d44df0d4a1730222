/* Node storage and collection. Nodes live in slabs of SYM_SLAB_NODES slots; a free slot is
 * marked SYM_FREE_SLOT and linked into ctx->free, so memory a collection frees is reused by the
 * next nodes and a loop that builds and drops expressions runs in constant memory.
 *
 * Collection is mark and sweep. sym_mark sets each reachable node's mark to the current epoch;
 * sym_collect sweeps every slab, frees the nodes of other epochs (Variables excepted), rebuilds
 * the free list, releases all but one entirely free slab, and starts the next epoch. Neither
 * allocates, so neither can fail: marking reverses operand pointers on the way down instead of
 * keeping a stack (Deutsch-Schorr-Waite), and the sweep only removes entries from the table.
 *
 * Under AddressSanitizer a free slot is poisoned except for the fields the storage itself
 * uses (src[0], the free-list link, and kind/arity/visit/mark, which the sweep reads), so a
 * caller that keeps using a collected node is reported instead of reading a reused slot. */
#include "sym_internal.h"

#include <assert.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define SYM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SYM_ASAN 1
#endif
#endif
#ifdef SYM_ASAN
#include <sanitizer/asan_interface.h>
#endif

enum { SYM_SLAB_NODES = 256 };

struct sym_slab {
    sym_slab *next;
    sym_node nodes[SYM_SLAB_NODES];
};

/* Nodes are immutable to every caller; only marking writes to them (mark, visit, and the
 * operand it temporarily reverses). Every node was allocated non-const in a slab. */
static sym_node *node_mut(const sym_node *n) {
    return (sym_node *)(uintptr_t)n;
}

/* ---- poisoning of free slots ------------------------------------------------------------- */

enum {
    SLOT_LINK = offsetof(sym_node, src), /* src[0]: the free-list link */
    SLOT_LINK_END = offsetof(sym_node, src) + sizeof(const sym_node *),
    SLOT_TAIL = offsetof(sym_node, kind), /* kind .. mark: read by the sweep */
};
_Static_assert(SLOT_LINK % 8 == 0 && SLOT_LINK_END % 8 == 0 && SLOT_TAIL % 8 == 0 &&
                   sizeof(sym_node) % 8 == 0,
               "poisoned ranges must fall on AddressSanitizer's 8-byte granules");

static void slot_poison(sym_node *n, bool poison) {
#ifdef SYM_ASAN
    char *p = (char *)n;
    if (poison) {
        ASAN_POISON_MEMORY_REGION(p, SLOT_LINK);
        ASAN_POISON_MEMORY_REGION(p + SLOT_LINK_END, SLOT_TAIL - SLOT_LINK_END);
    } else {
        ASAN_UNPOISON_MEMORY_REGION(p, sizeof *n);
    }
#else
    (void)n;
    (void)poison;
#endif
}

/* ---- slots ------------------------------------------------------------------------------- */

/* Marks n free and poisons it; the caller links it (slot_push) or its slab goes. */
static void slot_clear(sym_node *n) {
    n->kind = SYM_FREE_SLOT;
    n->arity = 0;
    slot_poison(n, true);
}

static void slot_push(sym_ctx *ctx, sym_node *n) {
    n->src[0] = ctx->free;
    ctx->free = n;
}

static bool slab_new(sym_ctx *ctx) {
    sym_slab *s = base_malloc(&ctx->alloc, sizeof *s);
    if (!s)
        return false;
    s->next = ctx->slabs;
    ctx->slabs = s;
    ctx->slab_count++;
    for (size_t i = SYM_SLAB_NODES; i-- > 0;) { /* slot 0 is handed out first */
        slot_clear(&s->nodes[i]);
        slot_push(ctx, &s->nodes[i]);
    }
    return true;
}

static void slab_free(sym_ctx *ctx, sym_slab *s) {
#ifdef SYM_ASAN
    ASAN_UNPOISON_MEMORY_REGION(s->nodes, sizeof s->nodes);
#endif
    base_free(&ctx->alloc, s, sizeof *s);
    ctx->slab_count--;
}

sym_node *sym_slot_alloc(sym_ctx *ctx) {
    if (!ctx->free && !slab_new(ctx))
        return NULL;
    sym_node *n = ctx->free;
    assert(n->kind == SYM_FREE_SLOT);
    ctx->free = node_mut(n->src[0]);
    slot_poison(n, false);
    ctx->live++;
    return n;
}

void sym_slot_release(sym_ctx *ctx, sym_node *n) {
    slot_clear(n);
    slot_push(ctx, n);
    ctx->live--;
}

void sym_slabs_finish(sym_ctx *ctx) {
    while (ctx->slabs) {
        sym_slab *s = ctx->slabs;
        ctx->slabs = s->next;
        slab_free(ctx, s);
    }
    ctx->free = NULL;
    ctx->live = 0;
}

/* ---- marking ----------------------------------------------------------------------------- */

/* Depth-first over the operands without a stack: when the walk descends from a node into its
 * operand src[visit], that slot holds the node it came from (the way back) until the walk
 * returns and restores it. Each node is entered once per epoch (a marked operand is skipped),
 * so the cost is the number of nodes newly marked, and an already-marked n costs O(1). */
void sym_mark(sym_ctx *ctx, const sym_node *n) {
    if (!ctx || !n)
        return;
    const uint32_t epoch = ctx->epoch;
    sym_node *cur = node_mut(n), *back = NULL;
    assert(cur->kind < SYM_KIND_COUNT_); /* a collected node (or another context's) */
    if (cur->mark == epoch)
        return;
    cur->mark = epoch;
    cur->visit = 0;
    for (;;) {
        if (cur->visit < cur->arity) {
            sym_node *op = node_mut(cur->src[cur->visit]);
            if (op->mark == epoch) {
                cur->visit++;
                continue;
            }
            cur->src[cur->visit] = back; /* descend, leaving the way back in the slot */
            back = cur;
            cur = op;
            cur->mark = epoch;
            cur->visit = 0;
        } else if (back) {
            sym_node *up = node_mut(back->src[back->visit]); /* ascend, restoring the slot */
            back->src[back->visit] = cur;
            back->visit++;
            cur = back;
            back = up;
        } else {
            return;
        }
    }
}

bool sym_marked(const sym_ctx *ctx, const sym_node *n) {
    return n && (n->kind == SYM_VAR || n->mark == ctx->epoch);
}

/* ---- sweeping ---------------------------------------------------------------------------- */

static bool same_node(const void *stored, const void *key, void *user) {
    (void)user;
    return stored == key;
}

/* Frees the unmarked nodes of s; returns how many, and the nodes kept in *kept. */
static size_t slab_sweep(sym_ctx *ctx, sym_slab *s, size_t *kept) {
    size_t freed = 0;
    *kept = 0;
    for (size_t i = 0; i < SYM_SLAB_NODES; i++) {
        sym_node *n = &s->nodes[i];
        if (n->kind == SYM_FREE_SLOT)
            continue;
        if (n->kind == SYM_VAR || n->mark == ctx->epoch) {
            (*kept)++;
            continue;
        }
        /* Removal compares pointers only: it never reads a node already freed. */
        void *removed = base_map_remove(&ctx->nodes, n->hash, n, same_node, NULL);
        assert(removed == n);
        (void)removed;
        if (n->kind == SYM_CONST && n->value >= SYM_SMALL_MIN && n->value <= SYM_SMALL_MAX)
            ctx->small[n->value - SYM_SMALL_MIN] = NULL;
        slot_clear(n);
        freed++;
    }
    return freed;
}

/* Links the free slots of s, so that lower slots of older slabs are handed out first. */
static void slab_push_free(sym_ctx *ctx, sym_slab *s) {
    for (size_t i = SYM_SLAB_NODES; i-- > 0;) {
        if (s->nodes[i].kind == SYM_FREE_SLOT)
            slot_push(ctx, &s->nodes[i]);
    }
}

size_t sym_collect(sym_ctx *ctx) {
    if (!ctx)
        return 0;
    size_t freed = 0;
    bool kept_empty = false; /* one free slab stays, so a small loop does not churn slabs */
    ctx->free = NULL;
    for (sym_slab **link = &ctx->slabs; *link;) {
        sym_slab *s = *link;
        size_t kept;
        freed += slab_sweep(ctx, s, &kept);
        if (kept == 0 && kept_empty) {
            *link = s->next;
            slab_free(ctx, s);
            continue;
        }
        kept_empty = kept_empty || kept == 0;
        slab_push_free(ctx, s);
        link = &s->next;
    }
    ctx->live -= freed;
    ctx->epoch = ctx->epoch == UINT32_MAX ? 1 : ctx->epoch + 1;
    return freed;
}

uint64_t sym_ctx_live_nodes(const sym_ctx *ctx) {
    return ctx ? ctx->live : 0;
}

size_t sym_ctx_bytes(const sym_ctx *ctx) {
    if (!ctx)
        return 0;
    return sizeof *ctx + ctx->slab_count * sizeof(sym_slab) +
           (ctx->nodes.cap + ctx->vars.cap) * sizeof(base_map_slot) + ctx->name_bytes;
}
