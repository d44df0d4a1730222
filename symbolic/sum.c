/* Canonical sums of products. A sum is flattened into terms (coeff * base) plus a constant,
 * like terms are combined (x*4 + x*2 -> x*6), and the sum is rebuilt as a left-deep chain in
 * creation-id order of the bases with the constant last. Multiplication by a constant
 * distributes over a sum; a product of non-constants is a chain of factors in id order. */
#include "sym_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- term lists ------------------------------------------------------------------------ */

void sym_terms_init(sym_terms *t, sym_ctx *ctx) {
    t->ctx = ctx;
    t->data = t->local;
    t->len = 0;
    t->cap = SYM_TERMS_LOCAL;
    t->konst = 0;
    t->ok = true;
}

void sym_terms_finish(sym_terms *t) {
    if (t->data != t->local)
        base_free(&t->ctx->alloc, t->data, t->cap * sizeof(sym_term));
    t->data = t->local;
    t->len = 0;
    t->cap = SYM_TERMS_LOCAL;
}

static void terms_overflow(sym_terms *t) {
    if (t->ok)
        sym_fail(t->ctx, KILN_ERROR_OVERFLOW, "a symbolic sum's coefficient overflows int64");
    t->ok = false;
}

static bool terms_grow(sym_terms *t) {
    size_t cap;
    if (!base_mul_size(t->cap, 2, &cap))
        return false;
    sym_term *d = base_malloc(&t->ctx->alloc, cap * sizeof(sym_term));
    if (!d)
        return false;
    memcpy(d, t->data, t->len * sizeof(sym_term));
    sym_terms_finish(t);
    t->data = d;
    t->cap = cap;
    return true;
}

void sym_terms_push(sym_terms *t, const sym_node *base, int64_t coeff) {
    if (!t->ok)
        return;
    if (t->len == t->cap && !terms_grow(t)) {
        sym_fail(t->ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "out of memory collecting a sum's terms");
        t->ok = false;
        return;
    }
    t->data[t->len++] = (sym_term){base, coeff};
}

void sym_term_split(const sym_node *n, const sym_node **base, int64_t *coeff) {
    if (n->kind == SYM_CONST) {
        *base = NULL;
        *coeff = n->value;
    } else if (n->kind == SYM_MUL && n->src[1]->kind == SYM_CONST) {
        *base = n->src[0];
        *coeff = n->src[1]->value;
    } else {
        *base = n;
        *coeff = 1;
    }
}

static void terms_add_one(sym_terms *t, const sym_node *n, int64_t scale) {
    const sym_node *base;
    int64_t coeff;
    sym_term_split(n, &base, &coeff);
    if (base && base->vmin == base->vmax) { /* a Variable of range [k, k] is k */
        if (!base_mul_i64(coeff, base->vmin, &coeff))
            return terms_overflow(t);
        base = NULL;
    }
    if (!base_mul_i64(coeff, scale, &coeff))
        return terms_overflow(t);
    if (!base)
        return base_add_i64(t->konst, coeff, &t->konst) ? (void)0 : terms_overflow(t);
    sym_terms_push(t, base, coeff);
}

void sym_terms_add(sym_terms *t, const sym_node *n, int64_t scale) {
    while (n->kind == SYM_ADD) { /* left-deep: the right operand is a term */
        terms_add_one(t, n->src[1], scale);
        n = n->src[0];
    }
    terms_add_one(t, n, scale);
}

static int term_cmp(const void *a, const void *b) {
    uint64_t x = ((const sym_term *)a)->base->id, y = ((const sym_term *)b)->base->id;
    return (x > y) - (x < y);
}

/* Sorts by base id and adds the coefficients of equal bases; drops zero coefficients. */
static void terms_combine(sym_terms *t) {
    qsort(t->data, t->len, sizeof(sym_term), term_cmp);
    size_t out = 0;
    for (size_t i = 0; i < t->len; i++) {
        if (out > 0 && t->data[out - 1].base == t->data[i].base) {
            if (!base_add_i64(t->data[out - 1].coeff, t->data[i].coeff, &t->data[out - 1].coeff))
                return terms_overflow(t);
        } else {
            if (out > 0 && t->data[out - 1].coeff == 0)
                out--;
            t->data[out++] = t->data[i];
        }
    }
    if (out > 0 && t->data[out - 1].coeff == 0)
        out--;
    t->len = out;
}

static bool is_by_const(const sym_node *n, sym_kind kind) {
    return n->kind == kind && n->src[1]->kind == SYM_CONST;
}

/* Whether the term t (j != i) is (x // b) * b times the coefficient of the term m*(x % b). */
static bool is_div_partner(const sym_term *mod, const sym_term *t) {
    const sym_node *m = mod->base, *d = t->base, *b = m->src[1];
    int64_t want;
    if (b->kind == SYM_CONST) { /* m*c*(x // c); with x = y // k, x // c is y // (k*c) */
        const sym_node *x = m->src[0];
        int64_t kc;
        if (!is_by_const(d, SYM_DIV) || !base_mul_i64(mod->coeff, b->value, &want) ||
            want != t->coeff)
            return false;
        if (d->src[0] == x && d->src[1] == b)
            return true;
        return is_by_const(x, SYM_DIV) && d->src[0] == x->src[0] &&
               base_mul_i64(x->src[1]->value, b->value, &kc) && d->src[1]->value == kc;
    }
    /* m*((x // b) * b) for an expression b: a product of two factors in id order */
    if (d->kind != SYM_MUL || t->coeff != mod->coeff)
        return false;
    const sym_node *q = d->src[0] == b ? d->src[1] : d->src[1] == b ? d->src[0] : NULL;
    return q && q->kind == SYM_DIV && q->src[0] == m->src[0] && q->src[1] == b;
}

/* m*(x % b) + m*(x // b)*b is m*x: finds such a pair, rewrites the first into x, drops the
 * second. Each fold removes a term, so the pass ends. */
static bool terms_fold_divmod(sym_terms *t) {
    for (size_t i = 0; i < t->len; i++) {
        if (t->data[i].base->kind != SYM_MOD)
            continue;
        for (size_t j = 0; j < t->len; j++) {
            if (j == i || !is_div_partner(&t->data[i], &t->data[j]))
                continue;
            sym_term mod = t->data[i];
            size_t hi = i > j ? i : j, lo = i > j ? j : i;
            t->data[hi] = t->data[--t->len]; /* remove both, the later one first */
            t->data[lo] = t->data[--t->len];
            sym_terms_add(t, mod.base->src[0], mod.coeff); /* x may itself be a sum */
            return true;
        }
    }
    return false;
}

static const sym_node *term_node(sym_ctx *ctx, sym_term term) {
    if (term.coeff == 1)
        return term.base;
    return sym_make(ctx, SYM_MUL, term.base, sym_make_const(ctx, term.coeff), NULL, 0);
}

const sym_node *sym_terms_build(sym_terms *t) {
    if (!t->ok)
        return NULL;
    terms_combine(t);
    while (t->ok && terms_fold_divmod(t))
        terms_combine(t);
    if (!t->ok)
        return NULL;
    sym_ctx *ctx = t->ctx;
    const sym_node *acc = t->len ? term_node(ctx, t->data[0]) : NULL;
    for (size_t i = 1; i < t->len && acc; i++)
        acc = sym_make(ctx, SYM_ADD, acc, term_node(ctx, t->data[i]), NULL, 0);
    if (!acc)
        return t->len ? NULL : sym_make_const(ctx, t->konst);
    if (t->konst != 0)
        acc = sym_make(ctx, SYM_ADD, acc, sym_make_const(ctx, t->konst), NULL, 0);
    return acc;
}

/* ---- add ------------------------------------------------------------------------------- */

static const sym_node *add_impl(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    int64_t x, y, r;
    if (sym_is_const(a, &x) && sym_is_const(b, &y))
        return base_add_i64(x, y, &r)
                   ? sym_make_const(ctx, r)
                   : sym_fail(ctx, KILN_ERROR_OVERFLOW, "%lld + %lld overflows int64", (long long)x,
                              (long long)y);
    if (sym_is_k(b, 0))
        return a;
    if (sym_is_k(a, 0))
        return b;
    sym_terms t;
    sym_terms_init(&t, ctx);
    sym_terms_add(&t, a, 1);
    sym_terms_add(&t, b, 1);
    const sym_node *r2 = sym_terms_build(&t);
    sym_terms_finish(&t);
    return r2;
}

const sym_node *sym_add(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (!sym_enter(ctx, &a, &b, NULL))
        return NULL;
    return sym_leave(ctx, add_impl(ctx, a, b));
}

const sym_node *sym_add_c(sym_ctx *ctx, const sym_node *a, int64_t b) {
    return ctx ? sym_add(ctx, a, sym_make_const(ctx, b)) : NULL;
}

const sym_node *sym_split_const(sym_ctx *ctx, const sym_node *n, int64_t *term) {
    *term = 0;
    if (!n)
        return NULL;
    if (n->kind == SYM_CONST) {
        *term = n->value;
        return sym_make_const(ctx, 0);
    }
    if (n->kind == SYM_ADD && n->src[1]->kind == SYM_CONST) { /* the constant last (sum.c) */
        *term = n->src[1]->value;
        return n->src[0];
    }
    return n;
}

const sym_node *sym_sub(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    return sym_add(ctx, a, sym_neg(ctx, b));
}

const sym_node *sym_neg(sym_ctx *ctx, const sym_node *a) {
    return sym_mul_c(ctx, a, -1);
}

/* ---- mul ------------------------------------------------------------------------------- */

/* a * c for a non-constant a and a constant c. */
static const sym_node *mul_by_const(sym_ctx *ctx, const sym_node *a, int64_t c) {
    if (c == 0)
        return sym_make_const(ctx, 0);
    if (c == 1)
        return a;
    if (a->kind == SYM_ADD) { /* distribute: (x + y + k) * c = x*c + y*c + k*c */
        sym_terms t;
        sym_terms_init(&t, ctx);
        sym_terms_add(&t, a, c);
        const sym_node *r = sym_terms_build(&t);
        sym_terms_finish(&t);
        return r;
    }
    const sym_node *base;
    int64_t coeff;
    sym_term_split(a, &base, &coeff);
    if (!base_mul_i64(coeff, c, &coeff))
        return sym_fail(ctx, KILN_ERROR_OVERFLOW, "a symbolic coefficient overflows int64");
    return term_node(ctx, (sym_term){base, coeff});
}

enum { MUL_FACTORS_MAX = 64 };

/* Appends the factors of a product of non-constants; false when there are too many. */
static bool collect_factors(const sym_node *n, const sym_node **f, size_t *len) {
    while (n->kind == SYM_MUL && n->src[1]->kind != SYM_CONST) {
        if (*len == MUL_FACTORS_MAX)
            return false;
        f[(*len)++] = n->src[1];
        n = n->src[0];
    }
    if (*len == MUL_FACTORS_MAX)
        return false;
    f[(*len)++] = n;
    return true;
}

static int node_cmp(const void *a, const void *b) {
    uint64_t x = (*(const sym_node *const *)a)->id, y = (*(const sym_node *const *)b)->id;
    return (x > y) - (x < y);
}

/* (ca * A) * (cb * B) = (ca * cb) * (the factors of A and B in id order). */
static const sym_node *mul_nonconst(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    const sym_node *ba, *bb;
    int64_t ca, cb, c;
    sym_term_split(a, &ba, &ca);
    sym_term_split(b, &bb, &cb);
    if (!base_mul_i64(ca, cb, &c))
        return sym_fail(ctx, KILN_ERROR_OVERFLOW, "a symbolic coefficient overflows int64");
    const sym_node *f[MUL_FACTORS_MAX];
    size_t len = 0;
    const sym_node *p;
    if (collect_factors(ba, f, &len) && collect_factors(bb, f, &len)) {
        qsort(f, len, sizeof f[0], node_cmp);
        p = f[0];
        for (size_t i = 1; i < len && p; i++)
            p = sym_make(ctx, SYM_MUL, p, f[i], NULL, 0);
    } else { /* a very long product: keep the operands as they are, ordered by id */
        p = ba->id < bb->id ? sym_make(ctx, SYM_MUL, ba, bb, NULL, 0)
                            : sym_make(ctx, SYM_MUL, bb, ba, NULL, 0);
    }
    return p ? mul_by_const(ctx, p, c) : NULL;
}

static const sym_node *mul_impl(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    int64_t x, y, r;
    if (a->vmin == a->vmax) /* a Variable of range [k, k] multiplies as k */
        a = sym_make_const(ctx, a->vmin);
    if (b->vmin == b->vmax)
        b = sym_make_const(ctx, b->vmin);
    if (sym_is_const(a, &x) && sym_is_const(b, &y))
        return base_mul_i64(x, y, &r)
                   ? sym_make_const(ctx, r)
                   : sym_fail(ctx, KILN_ERROR_OVERFLOW, "%lld * %lld overflows int64", (long long)x,
                              (long long)y);
    if (sym_is_const(a, &x))
        return mul_by_const(ctx, b, x);
    if (sym_is_const(b, &y))
        return mul_by_const(ctx, a, y);
    return mul_nonconst(ctx, a, b);
}

const sym_node *sym_mul(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (!sym_enter(ctx, &a, &b, NULL))
        return NULL;
    return sym_leave(ctx, mul_impl(ctx, a, b));
}

const sym_node *sym_mul_c(sym_ctx *ctx, const sym_node *a, int64_t b) {
    return ctx ? sym_mul(ctx, a, sym_make_const(ctx, b)) : NULL;
}
