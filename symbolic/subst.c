/* Substitution and unbinding: rebuild an expression bottom-up through the simplifying
 * constructors, each distinct node once (a memo keyed by node), leaves mapped by a callback. */
#include "sym_internal.h"

/* Maps a Variable or bound node to its replacement. */
typedef const sym_node *(*sym_leaf_fn)(sym_ctx *ctx, const sym_node *leaf, void *user);

typedef struct memo_entry {
    const sym_node *key;
    const sym_node *value;
} memo_entry;

typedef struct rebuilder {
    sym_ctx *ctx;
    base_arena arena; /* memo entries */
    base_map memo;
    sym_leaf_fn leaf;
    void *user;
    const sym_node *const *from; /* nodes of any kind replaced whole (sym_given) */
    const sym_node *const *to;
    size_t count;
} rebuilder;

static bool memo_eq(const void *stored, const void *key, void *user) {
    (void)user;
    return ((const memo_entry *)stored)->key == key;
}

static uint64_t memo_hash(const sym_node *n) {
    return base_hash_u64(0, n->id);
}

/* A node of n's kind over new operands, through the simplifying constructors. */
static const sym_node *sym_rebuild(sym_ctx *ctx, const sym_node *n, const sym_node *const *s) {
    switch ((sym_kind)n->kind) {
    case SYM_ADD:
        return sym_add(ctx, s[0], s[1]);
    case SYM_MUL:
        return sym_mul(ctx, s[0], s[1]);
    case SYM_DIV:
        return sym_floordiv(ctx, s[0], s[1]);
    case SYM_MOD:
        return sym_floormod(ctx, s[0], s[1]);
    case SYM_MIN:
        return sym_min(ctx, s[0], s[1]);
    case SYM_MAX:
        return sym_max(ctx, s[0], s[1]);
    case SYM_LT:
        return sym_lt(ctx, s[0], s[1]);
    case SYM_EQ:
        return sym_eq(ctx, s[0], s[1]);
    case SYM_NE:
        return sym_ne(ctx, s[0], s[1]);
    case SYM_AND:
        return sym_and(ctx, s[0], s[1]);
    case SYM_OR:
        return sym_or(ctx, s[0], s[1]);
    case SYM_NOT:
        return sym_not(ctx, s[0]);
    case SYM_WHERE:
        return sym_where(ctx, s[0], s[1], s[2]);
    default:
        return n; /* leaves are mapped by the caller */
    }
}

static const sym_node *rebuild_rec(rebuilder *rb, const sym_node *n) {
    for (size_t i = 0; i < rb->count; i++) {
        if (rb->from[i] == n)
            return rb->to[i];
    }
    if (n->kind == SYM_CONST)
        return n;
    if (n->kind == SYM_VAR || n->kind == SYM_BIND)
        return rb->leaf(rb->ctx, n, rb->user);
    memo_entry *e = base_map_find(&rb->memo, memo_hash(n), n, memo_eq, NULL);
    if (e)
        return e->value;
    const sym_node *s[3] = {NULL, NULL, NULL};
    bool same = true;
    for (uint32_t i = 0; i < n->arity; i++) {
        if (!(s[i] = rebuild_rec(rb, n->src[i])))
            return NULL;
        same = same && s[i] == n->src[i];
    }
    const sym_node *r = same ? n : sym_rebuild(rb->ctx, n, s);
    e = r ? base_arena_alloc(&rb->arena, sizeof *e, _Alignof(memo_entry)) : NULL;
    if (r && (!e || base_map_insert(&rb->memo, memo_hash(n), e) != KILN_OK))
        return sym_fail(rb->ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "out of memory rebuilding");
    if (e)
        *e = (memo_entry){n, r};
    return r;
}

static const sym_node *rebuild_map(sym_ctx *ctx, const sym_node *n, sym_leaf_fn leaf, void *user,
                                   const sym_node *const *from, const sym_node *const *to,
                                   size_t count) {
    rebuilder rb = {.ctx = ctx, .leaf = leaf, .user = user, .from = from, .to = to, .count = count};
    base_arena_init(&rb.arena, &ctx->alloc, 4096);
    base_map_init(&rb.memo, &ctx->alloc);
    const sym_node *r = rebuild_rec(&rb, n);
    base_map_finish(&rb.memo);
    base_arena_finish(&rb.arena);
    return r;
}

static const sym_node *rebuild(sym_ctx *ctx, const sym_node *n, sym_leaf_fn leaf, void *user) {
    return rebuild_map(ctx, n, leaf, user, NULL, NULL, 0);
}

/* ---- substitution ----------------------------------------------------------------------- */

typedef struct subst_map {
    const sym_node *const *from;
    const sym_node *const *to;
    size_t count;
} subst_map;

static const sym_node *subst_leaf(sym_ctx *ctx, const sym_node *leaf, void *user) {
    (void)ctx;
    const subst_map *m = user;
    const sym_node *var = leaf->kind == SYM_BIND ? leaf->src[0] : leaf;
    for (size_t i = 0; i < m->count; i++) {
        if (m->from[i] == leaf || m->from[i] == var)
            return m->to[i];
    }
    return leaf;
}

const sym_node *sym_substitute(sym_ctx *ctx, const sym_node *n, const sym_node *const *from,
                               const sym_node *const *to, size_t count) {
    if (!ctx || !n)
        return NULL;
    if (count && (!from || !to))
        return sym_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "sym_substitute: from/to missing");
    for (size_t i = 0; i < count; i++) {
        if (!from[i] || !to[i])
            return NULL; /* a NULL operand propagates */
        if (from[i]->kind != SYM_VAR && from[i]->kind != SYM_BIND)
            return sym_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                            "sym_substitute replaces Variables and bound nodes only");
    }
    subst_map m = {from, to, count};
    return rebuild(ctx, n, subst_leaf, &m);
}

/* ---- unbinding -------------------------------------------------------------------------- */

typedef struct bound_value {
    const sym_node *var;
    int64_t value;
} bound_value;

typedef struct unbind_state {
    BASE_VEC(bound_value) seen; /* every Variable met, in order of first appearance */
} unbind_state;

static const sym_node *unbind_leaf(sym_ctx *ctx, const sym_node *leaf, void *user) {
    unbind_state *u = user;
    if (leaf->kind != SYM_BIND)
        return leaf;
    const sym_node *var = leaf->src[0];
    for (size_t i = 0; i < u->seen.len; i++) {
        if (u->seen.data[i].var != var)
            continue;
        if (u->seen.data[i].value != leaf->value)
            return sym_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                            "Variable %s is bound to both %lld and %lld", var->name,
                            (long long)u->seen.data[i].value, (long long)leaf->value);
        return var;
    }
    bound_value b = {var, leaf->value};
    if (BASE_VEC_PUSH(&ctx->alloc, &u->seen, b) != KILN_OK)
        return sym_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "out of memory unbinding");
    return var;
}

const sym_node *sym_unbind_all(sym_ctx *ctx, const sym_node *n, const sym_node **vars,
                               int64_t *values, size_t cap, size_t *found) {
    if (found)
        *found = 0;
    if (!ctx || !n)
        return NULL;
    if (cap && (!vars || !values))
        return sym_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "sym_unbind_all: vars/values missing");
    unbind_state u = {0};
    const sym_node *r = rebuild(ctx, n, unbind_leaf, &u);
    for (size_t i = 0; r && i < u.seen.len && i < cap; i++) {
        vars[i] = u.seen.data[i].var;
        values[i] = u.seen.data[i].value;
    }
    if (found && r)
        *found = u.seen.len;
    BASE_VEC_FREE(&ctx->alloc, &u.seen);
    return r;
}

/* ---- simplification under a condition --------------------------------------------------- */

static const sym_node *leaf_as_is(sym_ctx *ctx, const sym_node *leaf, void *user) {
    (void)ctx, (void)user;
    return leaf;
}

enum { GIVEN_MAX = 8 }; /* distinct bounded expressions one call looks at */

typedef struct given_bounds {
    const sym_node *x[GIVEN_MAX];
    int64_t lo[GIVEN_MAX], hi[GIVEN_MAX];
    uint32_t n;
} given_bounds;

/* Narrows x's range to [lo, hi] in g (a new entry, or the intersection with x's). */
static void given_narrow(given_bounds *g, const sym_node *x, int64_t lo, int64_t hi) {
    uint32_t i = 0;
    while (i < g->n && g->x[i] != x)
        i++;
    if (i == g->n) {
        if (g->n == GIVEN_MAX)
            return;
        g->x[g->n] = x, g->lo[g->n] = x->vmin, g->hi[g->n] = x->vmax;
        g->n++;
    }
    g->lo[i] = lo > g->lo[i] ? lo : g->lo[i];
    g->hi[i] = hi < g->hi[i] ? hi : g->hi[i];
}

/* The bounds conjunct c of a condition gives: x < k (x <= k - 1), and x*-1 < k (x >= 1 - k,
 * how a lower bound is written); conjuncts of an AND in turn. */
static void given_collect(given_bounds *g, const sym_node *c) {
    if (c->kind == SYM_AND) {
        given_collect(g, c->src[0]);
        given_collect(g, c->src[1]);
        return;
    }
    int64_t k = 0;
    if (c->kind != SYM_LT || !sym_is_const(c->src[1], &k) || k == INT64_MIN ||
        sym_is_const(c->src[0], NULL))
        return;
    const sym_node *x = c->src[0];
    if (x->kind == SYM_MUL && sym_is_const(x->src[1], NULL) && x->src[1]->value == -1 &&
        !sym_is_const(x->src[0], NULL) && k > INT64_MIN + 1)
        given_narrow(g, x->src[0], 1 - k, INT64_MAX);
    else
        given_narrow(g, x, INT64_MIN, k - 1);
}

/* n simplified where cond holds (tinygrad's uop_given_valid): each expression cond bounds
 * (x < k, -x < k) is replaced by x clamped to those bounds, min(max(x, lo), hi), equal to x
 * wherever cond holds and with the narrower range, which lets division and modulo simplify
 * (((y%16)%14) is y%16 where y%16 < 14); then each clamp still standing is x again. Where
 * cond does not hold the result may differ from n: for a masked load's index. n itself when
 * nothing narrows or cond can never hold. */
const sym_node *sym_given(sym_ctx *ctx, const sym_node *n, const sym_node *cond) {
    if (!ctx || !n || !cond || sym_ctx_status(ctx) != KILN_OK)
        return n;
    given_bounds g = {.n = 0};
    given_collect(&g, cond);
    const sym_node *from[GIVEN_MAX], *to[GIVEN_MAX];
    size_t count = 0;
    for (uint32_t i = 0; i < g.n; i++) {
        if (g.lo[i] > g.hi[i])
            return n; /* never true: any index does */
        if (g.lo[i] == g.x[i]->vmin && g.hi[i] == g.x[i]->vmax)
            continue;
        const sym_node *c = sym_min(ctx, sym_max(ctx, g.x[i], sym_make_const(ctx, g.lo[i])),
                                    sym_make_const(ctx, g.hi[i]));
        if (!c)
            return n;
        from[count] = g.x[i], to[count++] = c;
    }
    if (!count)
        return n;
    const sym_node *r = rebuild_map(ctx, n, leaf_as_is, NULL, from, to, count);
    /* Back: a clamp that folded to a constant (x has one value where cond holds) stays; any
     * other constant must not become x. */
    const sym_node *back_from[GIVEN_MAX], *back_to[GIVEN_MAX];
    size_t back = 0;
    for (size_t i = 0; i < count; i++) {
        if (to[i]->kind != SYM_CONST)
            back_from[back] = to[i], back_to[back++] = from[i];
    }
    r = r && back ? rebuild_map(ctx, r, leaf_as_is, NULL, back_from, back_to, back) : r;
    if (r && sym_ctx_status(ctx) == KILN_OK)
        return r;
    sym_ctx_clear_error(ctx); /* (OK on entry: a failed simplification leaves no error) */
    return n;
}
