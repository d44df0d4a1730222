/* The context, hash-consing and inspection. Every node lives in the context's slabs
 * (collect.c) and is found again through a per-context hash table, so structurally equal
 * nodes are one pointer. */
#include "sym_internal.h"

#include <assert.h>
#include <string.h>

enum {
    SYM_DEFAULT_BUDGET = 200000, /* steps per top-level constructor call */
    SYM_MAX_DEPTH = 2000,        /* nesting of constructor calls (stack safety) */
};

const sym_kind_info sym_kinds[SYM_KIND_COUNT_] = {
#define X(kind, name, arity, flags, symbol) [kind] = {name, arity, flags, symbol},
#include "sym_ops.def"
#undef X
};

/* The table has exactly one entry per kind, in the enum's order. */
enum {
#define X(kind, name, arity, flags, symbol) SYM_OPS_INDEX_##kind,
#include "sym_ops.def"
#undef X
    SYM_OPS_COUNT
};
_Static_assert((int)SYM_OPS_COUNT == (int)SYM_KIND_COUNT_,
               "sym_ops.def and enum sym_kind disagree");
_Static_assert((int)SYM_OPS_INDEX_SYM_WHERE == (int)SYM_WHERE, "sym_ops.def is out of order");
_Static_assert((int)SYM_OPS_INDEX_SYM_ADD == (int)SYM_ADD, "sym_ops.def is out of order");

/* ---- context --------------------------------------------------------------------------- */

kiln_status sym_ctx_create(const base_allocator *alloc, sym_ctx **out) {
    if (!out)
        return KILN_ERROR_INVALID_ARGUMENT;
    *out = NULL;
    base_allocator a = alloc ? *alloc : base_allocator_make(NULL, NULL);
    sym_ctx *ctx = base_calloc(&a, 1, sizeof *ctx);
    if (!ctx)
        return KILN_ERROR_OUT_OF_HOST_MEMORY;
    ctx->alloc = a;
    base_map_init(&ctx->nodes, &ctx->alloc);
    base_map_init(&ctx->vars, &ctx->alloc);
    base_error_clear(&ctx->err);
    ctx->budget = SYM_DEFAULT_BUDGET;
    ctx->epoch = 1; /* new nodes have mark 0: unmarked */
    *out = ctx;
    return KILN_OK;
}

void sym_ctx_destroy(sym_ctx *ctx) {
    if (!ctx)
        return;
    void *v;
    for (size_t i = 0; base_map_next(&ctx->vars, &i, &v);) {
        const char *name = ((const sym_node *)v)->name;
        base_free(&ctx->alloc, (void *)(uintptr_t)name, strlen(name) + 1);
    }
    base_map_finish(&ctx->nodes);
    base_map_finish(&ctx->vars);
    sym_slabs_finish(ctx);
    base_allocator a = ctx->alloc;
    base_free(&a, ctx, sizeof *ctx);
}

kiln_status sym_ctx_status(const sym_ctx *ctx) {
    return ctx ? ctx->err.status : KILN_ERROR_INVALID_ARGUMENT;
}

const char *sym_ctx_message(const sym_ctx *ctx) {
    return ctx ? base_error_message(&ctx->err) : "no symbolic context";
}

void sym_ctx_clear_error(sym_ctx *ctx) {
    if (ctx)
        base_error_clear(&ctx->err);
}

void sym_ctx_set_budget(sym_ctx *ctx, uint64_t steps) {
    if (ctx)
        ctx->budget = steps;
}

uint64_t sym_ctx_node_count(const sym_ctx *ctx) {
    return ctx ? ctx->next_id : 0;
}

const sym_node *sym_fail(sym_ctx *ctx, kiln_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    base_error_setv(&ctx->err, status, fmt, ap);
    va_end(ap);
    return NULL;
}

/* A Variable or bound node of range [k, k] enters an operation as the constant k, so that
 * every rule (and hash-consing) sees one form. False when the constant cannot be made. */
static bool enter_operand(sym_ctx *ctx, const sym_node **n) {
    if (n && (*n)->vmin == (*n)->vmax && (*n)->kind != SYM_CONST)
        *n = sym_make_const(ctx, (*n)->vmin);
    return !n || *n;
}

bool sym_enter(sym_ctx *ctx, const sym_node **a, const sym_node **b, const sym_node **c) {
    if (!ctx || !*a || (b && !*b) || (c && !*c))
        return false;
    if (ctx->depth == 0) {
        ctx->steps = 0; /* a top-level call gets the whole budget */
        ctx->entry_status = ctx->err.status;
    }
    if (++ctx->steps > ctx->budget || ctx->depth >= SYM_MAX_DEPTH) {
        sym_fail(ctx, KILN_ERROR_BUDGET_EXCEEDED,
                 "symbolic simplification exceeded its budget (%llu steps, depth %u)",
                 (unsigned long long)ctx->budget, (unsigned)ctx->depth);
        return false;
    }
    if (!enter_operand(ctx, a) || !enter_operand(ctx, b) || !enter_operand(ctx, c))
        return false;
    ctx->depth++;
    return true;
}

/* A rewrite that overflows is abandoned for another form, so a top-level call that still
 * produced its node forgets an overflow its attempts recorded (other errors stay). */
const sym_node *sym_leave(sym_ctx *ctx, const sym_node *r) {
    if (--ctx->depth == 0 && r && ctx->entry_status == KILN_OK &&
        ctx->err.status == KILN_ERROR_OVERFLOW)
        base_error_clear(&ctx->err);
    return r;
}

/* ---- hash-consing ---------------------------------------------------------------------- */

static uint64_t node_hash(const sym_node *k) {
    uint64_t h = base_hash_u64(0x6b696c6e73796dULL, k->kind);
    h = base_hash_u64(h, (uint64_t)k->value);
    for (uint32_t i = 0; i < k->arity; i++)
        h = base_hash_u64(h, k->src[i]->hash);
    return h;
}

static bool node_eq(const void *stored, const void *key, void *user) {
    (void)user;
    const sym_node *s = stored, *k = key;
    return s->kind == k->kind && s->value == k->value && s->src[0] == k->src[0] &&
           s->src[1] == k->src[1] && s->src[2] == k->src[2];
}

/* Copies the key into a free slot, numbers it and records it; NULL on allocation failure.
 * Ids only grow: a node rebuilt after a collection freed it gets a new one. */
static sym_node *node_intern(sym_ctx *ctx, const sym_node *key) {
    sym_node *n = sym_slot_alloc(ctx);
    if (!n)
        return NULL;
    *n = *key;
    n->id = ctx->next_id;
    if (base_map_insert(&ctx->nodes, n->hash, n) != KILN_OK) {
        sym_slot_release(ctx, n);
        return NULL;
    }
    ctx->next_id++;
    return n;
}

#ifndef NDEBUG
/* The id that orders a term in a sum: its base's. */
static uint64_t term_id(const sym_node *t) {
    return t->kind == SYM_MUL && t->src[1]->kind == SYM_CONST ? t->src[0]->id : t->id;
}

/* Debug builds check the canonical forms of sym_internal.h on every new node. */
static void check_canonical(const sym_node *n) {
    const sym_node *a = n->src[0], *b = n->src[1];
    if (n->kind != SYM_CONST && n->kind != SYM_VAR && n->kind != SYM_BIND)
        assert(n->vmin < n->vmax);
    if (n->kind == SYM_ADD) {
        assert(a->kind != SYM_CONST && b->kind != SYM_ADD);
        const sym_node *last = a->kind == SYM_ADD ? a->src[1] : a;
        assert(last->kind != SYM_CONST); /* the constant only at the end */
        assert(b->kind == SYM_CONST || term_id(last) < term_id(b));
    } else if (n->kind == SYM_MUL && b->kind == SYM_CONST) {
        assert(b->value != 0 && b->value != 1);
        assert(a->kind != SYM_CONST && a->kind != SYM_ADD);
        assert(!(a->kind == SYM_MUL && a->src[1]->kind == SYM_CONST));
    } else if (n->kind == SYM_MUL) {
        assert(a->kind != SYM_CONST && b->kind != SYM_MUL);
        assert((a->kind == SYM_MUL ? a->src[1] : a)->id <= b->id);
    } else if ((n->kind == SYM_DIV || n->kind == SYM_MOD) && b->kind == SYM_CONST) {
        assert(b->value > 1 || b->value == INT64_MIN);
    }
}
#endif

const sym_node *sym_make(sym_ctx *ctx, sym_kind kind, const sym_node *a, const sym_node *b,
                         const sym_node *c, int64_t value) {
    sym_node key = {0};
    key.kind = (uint8_t)kind;
    key.arity = (uint8_t)sym_kinds[kind].arity;
    key.value = value;
    key.src[0] = a;
    key.src[1] = b;
    key.src[2] = c;
    for (uint32_t i = 0; i < key.arity; i++) {
        if (!key.src[i])
            return NULL;
    }
    if (kind == SYM_BIND) {
        key.name = a->name;
        key.binds = UINT64_C(1) << a->var_bit;
    } else {
        for (uint32_t i = 0; i < key.arity; i++)
            key.binds |= key.src[i]->binds;
    }
    key.hash = node_hash(&key);
    const sym_node *found = base_map_find(&ctx->nodes, key.hash, &key, node_eq, NULL);
    if (found)
        return found;
    if (!sym_bounds(ctx, &key))
        return NULL;
    /* A node that can take one value only is that constant (Variables stay Variables). */
    if (kind != SYM_CONST && kind != SYM_BIND && key.vmin == key.vmax)
        return sym_make_const(ctx, key.vmin);
#ifndef NDEBUG
    check_canonical(&key);
#endif
    const sym_node *n = node_intern(ctx, &key);
    if (!n)
        return sym_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "out of memory building a %s node",
                        sym_kinds[kind].name);
    return n;
}

const sym_node *sym_make_const(sym_ctx *ctx, int64_t value) {
    if (value < SYM_SMALL_MIN || value > SYM_SMALL_MAX)
        return sym_make(ctx, SYM_CONST, NULL, NULL, NULL, value);
    const sym_node **slot = &ctx->small[value - SYM_SMALL_MIN];
    if (!*slot)
        *slot = sym_make(ctx, SYM_CONST, NULL, NULL, NULL, value);
    return *slot;
}

bool sym_is_k(const sym_node *n, int64_t value) {
    return n && n->kind == SYM_CONST && n->value == value;
}

/* ---- leaves ---------------------------------------------------------------------------- */

const sym_node *sym_const(sym_ctx *ctx, int64_t value) {
    if (!ctx)
        return NULL;
    return sym_make_const(ctx, value);
}

static bool var_eq(const void *stored, const void *key, void *user) {
    (void)user;
    return strcmp(((const sym_node *)stored)->name, key) == 0;
}

static const sym_node *var_new(sym_ctx *ctx, const char *name, uint64_t h, int64_t min,
                               int64_t max) {
    sym_node key = {0};
    key.kind = SYM_VAR;
    key.var_bit = (uint8_t)(ctx->var_count % 64);
    key.vmin = min;
    key.vmax = max;
    key.hash =
        base_hash_u64(base_hash_u64(base_hash_u64(h, SYM_VAR), (uint64_t)min), (uint64_t)max);
    size_t size = strlen(name) + 1;
    char *copy = base_malloc(&ctx->alloc, size);
    sym_node *n = copy ? sym_slot_alloc(ctx) : NULL;
    if (n) {
        memcpy(copy, name, size);
        key.name = copy;
        *n = key;
        if (base_map_insert(&ctx->vars, h, n) == KILN_OK) {
            n->id = ctx->next_id++;
            ctx->var_count++;
            ctx->name_bytes += size;
            return n;
        }
        sym_slot_release(ctx, n);
    }
    base_free(&ctx->alloc, copy, size);
    return sym_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "out of memory creating Variable %s", name);
}

const sym_node *sym_var(sym_ctx *ctx, const char *name, int64_t min, int64_t max) {
    if (!ctx)
        return NULL;
    if (!name || !name[0])
        return sym_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "a Variable needs a non-empty name");
    if (min > max)
        return sym_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                        "Variable %s has an empty range [%lld, %lld]", name, (long long)min,
                        (long long)max);
    uint64_t h = base_hash_str(name, 0x76617273ULL);
    const sym_node *v = base_map_find(&ctx->vars, h, name, var_eq, NULL);
    if (!v)
        return var_new(ctx, name, h, min, max);
    if (v->vmin != min || v->vmax != max)
        return sym_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                        "Variable %s redeclared with range [%lld, %lld] (was [%lld, %lld])", name,
                        (long long)min, (long long)max, (long long)v->vmin, (long long)v->vmax);
    return v;
}

const sym_node *sym_bind(sym_ctx *ctx, const sym_node *var, int64_t value) {
    if (!ctx || !var)
        return NULL;
    if (var->kind != SYM_VAR)
        return sym_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "only a Variable can be bound");
    if (value < var->vmin || value > var->vmax)
        return sym_fail(ctx, KILN_ERROR_OUT_OF_RANGE,
                        "binding %s to %lld, outside its range [%lld, %lld]", var->name,
                        (long long)value, (long long)var->vmin, (long long)var->vmax);
    return sym_make(ctx, SYM_BIND, var, NULL, NULL, value);
}

/* ---- inspection ------------------------------------------------------------------------ */

sym_kind sym_node_kind(const sym_node *n) {
    return n ? (sym_kind)n->kind : SYM_KIND_COUNT_;
}

uint32_t sym_node_arity(const sym_node *n) {
    return n ? n->arity : 0;
}

const sym_node *sym_node_src(const sym_node *n, uint32_t i) {
    return n && i < n->arity ? n->src[i] : NULL;
}

uint64_t sym_node_id(const sym_node *n) {
    return n ? n->id : 0;
}

uint64_t sym_node_binds(const sym_node *n) {
    if (!n)
        return 0;
    return n->kind == SYM_VAR ? UINT64_C(1) << n->var_bit : n->binds;
}

uint64_t sym_node_hash(const sym_node *n) {
    return n ? n->hash : 0;
}

int64_t sym_vmin(const sym_node *n) {
    return n ? n->vmin : 0;
}

int64_t sym_vmax(const sym_node *n) {
    return n ? n->vmax : 0;
}

bool sym_is_const(const sym_node *n, int64_t *value) {
    if (!n || n->kind != SYM_CONST)
        return false;
    if (value)
        *value = n->value;
    return true;
}

bool sym_is_bool(const sym_node *n) {
    return n && (sym_kinds[n->kind].flags & SYM_F_BOOL) != 0;
}

bool sym_var_info(const sym_node *n, const char **name, int64_t *min, int64_t *max) {
    if (!n || (n->kind != SYM_VAR && n->kind != SYM_BIND))
        return false;
    const sym_node *v = n->kind == SYM_BIND ? n->src[0] : n;
    if (name)
        *name = v->name;
    if (min)
        *min = v->vmin;
    if (max)
        *max = v->vmax;
    return true;
}

bool sym_unbind(const sym_node *n, const sym_node **var, int64_t *value) {
    if (!n || n->kind != SYM_BIND)
        return false;
    if (var)
        *var = n->src[0];
    if (value)
        *value = n->value;
    return true;
}
