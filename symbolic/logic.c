/* Comparisons, logic, select, min and max. Bounds decide whatever they can; comparisons with a
 * constant keep the constant on the right, move a sum's constant across, and cancel a common
 * factor of the coefficients: x*4 + y < 512 -> x < 128 when 0 <= y < 4; x // k < c becomes
 * x < c*k. Two non-constant operands of <, min or max are also compared through the bounds
 * of their difference, where shared terms cancel. Logic treats any non-zero value as true and
 * produces 0 or 1. */
#include "sym_internal.h"

/* 1: always true, 0: always false, -1: unknown (from the bounds). */
static int truth(const sym_node *n) {
    if (n->vmin > 0 || n->vmax < 0)
        return 1;
    return n->vmin == 0 && n->vmax == 0 ? 0 : -1;
}

/* n as 0 or 1. */
static const sym_node *to_bool(sym_ctx *ctx, const sym_node *n) {
    if (n->vmin >= 0 && n->vmax <= 1)
        return n;
    return sym_ne(ctx, n, sym_make_const(ctx, 0));
}

static int64_t gcd64(int64_t a, int64_t b) {
    int64_t g;
    return base_gcd_i64(a, b, &g) ? g : 1;
}

/* A commutative node with its operands in canonical order: a constant on the right, else the
 * lower creation id first. */
static const sym_node *make_comm(sym_ctx *ctx, sym_kind kind, const sym_node *a,
                                 const sym_node *b) {
    bool swap = a->kind == SYM_CONST || (b->kind != SYM_CONST && a->id > b->id);
    return swap ? sym_make(ctx, kind, b, a, NULL, 0) : sym_make(ctx, kind, a, b, NULL, 0);
}

/* The bounds of a - b, in which shared terms cancel (x + 1 - x is 1); false when the
 * difference cannot be built (an overflow there only loses the decision). */
static bool difference_bounds(sym_ctx *ctx, const sym_node *a, const sym_node *b, int64_t *lo,
                              int64_t *hi) {
    const sym_node *d = sym_sub(ctx, a, b);
    if (!d)
        return false;
    *lo = d->vmin;
    *hi = d->vmax;
    return true;
}

/* ---- less than -------------------------------------------------------------------------- */

/* g*S + r < c with 0 <= r < g (r the terms of coefficient +-1) is S < c/g rounded: the
 * remainder cannot change the answer. NULL when the rule does not apply. */
static const sym_node *lt_gcd(sym_ctx *ctx, const sym_node *a, int64_t c) {
    sym_terms all, big, rest;
    sym_terms_init(&all, ctx);
    sym_terms_init(&big, ctx);
    sym_terms_init(&rest, ctx);
    sym_terms_add(&all, a, 1);
    int64_t g = 0, q, m;
    for (size_t i = 0; i < all.len; i++) {
        sym_term t = all.data[i];
        if (t.coeff == 1 || t.coeff == -1) {
            sym_terms_push(&rest, t.base, t.coeff);
        } else {
            sym_terms_push(&big, t.base, t.coeff);
            g = gcd64(g, t.coeff);
        }
    }
    const sym_node *r = g > 1 && all.ok ? sym_terms_build(&rest) : NULL, *out = NULL;
    if (r && r->vmin >= 0 && r->vmax < g && base_floordiv_i64(c, g, &q) &&
        base_floormod_i64(c, g, &m)) {
        bool down = m == 0 || r->vmin >= m, up = r->vmax < m;
        for (size_t i = 0; i < big.len; i++)
            big.data[i].coeff /= g;
        if (down || up)
            out = sym_lt_c(ctx, sym_terms_build(&big), down ? q : q + 1);
    }
    sym_terms_finish(&all);
    sym_terms_finish(&big);
    sym_terms_finish(&rest);
    return out;
}

static const sym_node *lt_const(sym_ctx *ctx, const sym_node *a, int64_t c) {
    int64_t d;
    const sym_node *r;
    if (a->kind == SYM_DIV && a->src[1]->kind == SYM_CONST && a->src[1]->value > 0 &&
        base_mul_i64(c, a->src[1]->value, &d)) /* x // k < c: x < c*k */
        return sym_lt_c(ctx, a->src[0], d);
    if (a->kind == SYM_ADD && a->src[1]->kind == SYM_CONST && /* x + k < c: x < c - k */
        base_sub_i64(c, a->src[1]->value, &d))
        return sym_lt_c(ctx, a->src[0], d);
    if ((a->kind == SYM_ADD || (a->kind == SYM_MUL && a->src[1]->kind == SYM_CONST)) &&
        (r = lt_gcd(ctx, a, c)) != NULL)
        return r;
    return sym_make(ctx, SYM_LT, a, sym_make_const(ctx, c), NULL, 0);
}

static const sym_node *lt_impl(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    int64_t x, y;
    if (a->vmax < b->vmin)
        return sym_make_const(ctx, 1);
    if (a->vmin >= b->vmax || a == b)
        return sym_make_const(ctx, 0);
    if (sym_is_const(b, &y))
        return lt_const(ctx, a, y);
    if (sym_is_const(a, &x) && base_neg_i64(x, &x)) /* c < b: -b < -c */
        return sym_lt(ctx, sym_neg(ctx, b), sym_make_const(ctx, x));
    int64_t lo, hi; /* both operands non-constant here */
    if (difference_bounds(ctx, a, b, &lo, &hi) && (hi < 0 || lo >= 0))
        return sym_make_const(ctx, hi < 0);
    return sym_make(ctx, SYM_LT, a, b, NULL, 0);
}

const sym_node *sym_lt(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (!sym_enter(ctx, &a, &b, NULL))
        return NULL;
    return sym_leave(ctx, lt_impl(ctx, a, b));
}

const sym_node *sym_lt_c(sym_ctx *ctx, const sym_node *a, int64_t b) {
    return ctx ? sym_lt(ctx, a, sym_make_const(ctx, b)) : NULL;
}

const sym_node *sym_le(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    return sym_lt(ctx, a, sym_add_c(ctx, b, 1));
}

const sym_node *sym_gt(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    return sym_lt(ctx, b, a);
}

const sym_node *sym_ge(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    return sym_lt(ctx, b, sym_add_c(ctx, a, 1));
}

/* ---- equality --------------------------------------------------------------------------- */

/* a == c for a non-constant a: the sum's constant moves across; a common factor g of the
 * coefficients must divide c. */
static const sym_node *eq_const(sym_ctx *ctx, const sym_node *a, int64_t c) {
    int64_t d, g = 0;
    if (a->kind == SYM_ADD && a->src[1]->kind == SYM_CONST && base_sub_i64(c, a->src[1]->value, &d))
        return sym_eq(ctx, a->src[0], sym_make_const(ctx, d));
    if (a->kind != SYM_ADD && !(a->kind == SYM_MUL && a->src[1]->kind == SYM_CONST))
        return sym_make(ctx, SYM_EQ, a, sym_make_const(ctx, c), NULL, 0);
    sym_terms t;
    sym_terms_init(&t, ctx);
    sym_terms_add(&t, a, 1);
    for (size_t i = 0; i < t.len; i++)
        g = gcd64(g, t.data[i].coeff);
    const sym_node *out;
    if (!t.ok)
        out = NULL;
    else if (g > 1 && c % g != 0)
        out = sym_make_const(ctx, 0);
    else if (g > 1) {
        for (size_t i = 0; i < t.len; i++)
            t.data[i].coeff /= g;
        out = sym_eq(ctx, sym_terms_build(&t), sym_make_const(ctx, c / g));
    } else
        out = sym_make(ctx, SYM_EQ, a, sym_make_const(ctx, c), NULL, 0);
    sym_terms_finish(&t);
    return out;
}

static const sym_node *eq_impl(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    int64_t c;
    if (a == b)
        return sym_make_const(ctx, 1);
    if (a->vmax < b->vmin || b->vmax < a->vmin)
        return sym_make_const(ctx, 0);
    if (sym_is_const(a, &c))
        return eq_const(ctx, b, c);
    if (sym_is_const(b, &c))
        return eq_const(ctx, a, c);
    return make_comm(ctx, SYM_EQ, a, b);
}

const sym_node *sym_eq(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (!sym_enter(ctx, &a, &b, NULL))
        return NULL;
    return sym_leave(ctx, eq_impl(ctx, a, b));
}

/* a != b is the complement of a == b, which simplifies to a constant or an EQ node. */
static const sym_node *ne_from_eq(sym_ctx *ctx, const sym_node *e) {
    if (!e)
        return NULL;
    if (e->kind == SYM_CONST)
        return sym_make_const(ctx, e->value == 0);
    if (e->kind == SYM_EQ)
        return sym_make(ctx, SYM_NE, e->src[0], e->src[1], NULL, 0);
    return sym_make(ctx, SYM_NOT, e, NULL, NULL, 0);
}

const sym_node *sym_ne(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (!sym_enter(ctx, &a, &b, NULL))
        return NULL;
    return sym_leave(ctx, ne_from_eq(ctx, eq_impl(ctx, a, b)));
}

/* ---- logic ------------------------------------------------------------------------------ */

static const sym_node *not_impl(sym_ctx *ctx, const sym_node *a) {
    int t = truth(a);
    if (t >= 0)
        return sym_make_const(ctx, 1 - t);
    switch ((sym_kind)a->kind) {
    case SYM_NOT:
        return to_bool(ctx, a->src[0]);
    case SYM_EQ:
        return sym_make(ctx, SYM_NE, a->src[0], a->src[1], NULL, 0);
    case SYM_NE:
        return sym_make(ctx, SYM_EQ, a->src[0], a->src[1], NULL, 0);
    case SYM_LT: /* !(x < y) is y <= x, y < x + 1 */
        if (a->src[0]->vmax < INT64_MAX)
            return sym_lt(ctx, a->src[1], sym_add_c(ctx, a->src[0], 1));
        break;
    default:
        break;
    }
    return sym_make(ctx, SYM_NOT, a, NULL, NULL, 0);
}

const sym_node *sym_not(sym_ctx *ctx, const sym_node *a) {
    if (!sym_enter(ctx, &a, NULL, NULL))
        return NULL;
    return sym_leave(ctx, not_impl(ctx, a));
}

static const sym_node *and_impl(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    int ta = truth(a), tb = truth(b);
    if (ta == 0 || tb == 0)
        return sym_make_const(ctx, 0);
    if (ta == 1 || a == b)
        return to_bool(ctx, b);
    if (tb == 1)
        return to_bool(ctx, a);
    return make_comm(ctx, SYM_AND, a, b);
}

const sym_node *sym_and(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (!sym_enter(ctx, &a, &b, NULL))
        return NULL;
    return sym_leave(ctx, and_impl(ctx, a, b));
}

static const sym_node *or_impl(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    int ta = truth(a), tb = truth(b);
    if (ta == 1 || tb == 1)
        return sym_make_const(ctx, 1);
    if (ta == 0 || a == b)
        return to_bool(ctx, b);
    if (tb == 0)
        return to_bool(ctx, a);
    return make_comm(ctx, SYM_OR, a, b);
}

const sym_node *sym_or(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (!sym_enter(ctx, &a, &b, NULL))
        return NULL;
    return sym_leave(ctx, or_impl(ctx, a, b));
}

/* ---- select, min, max ------------------------------------------------------------------- */

static const sym_node *where_impl(sym_ctx *ctx, const sym_node *c, const sym_node *a,
                                  const sym_node *b) {
    int t = truth(c);
    if (t == 1 || a == b)
        return a;
    if (t == 0)
        return b;
    if (c->kind == SYM_NOT)
        return sym_where(ctx, c->src[0], b, a);
    if (sym_is_k(a, 1) && sym_is_k(b, 0))
        return to_bool(ctx, c);
    if (sym_is_k(a, 0) && sym_is_k(b, 1))
        return sym_not(ctx, c);
    return sym_make(ctx, SYM_WHERE, c, a, b, 0);
}

const sym_node *sym_where(sym_ctx *ctx, const sym_node *cond, const sym_node *a,
                          const sym_node *b) {
    if (!sym_enter(ctx, &cond, &a, &b))
        return NULL;
    return sym_leave(ctx, where_impl(ctx, cond, a, b));
}

static const sym_node *minmax_impl(sym_ctx *ctx, sym_kind kind, const sym_node *a,
                                   const sym_node *b) {
    bool is_min = kind == SYM_MIN;
    if (a == b)
        return a;
    if (a->vmax <= b->vmin)
        return is_min ? a : b;
    if (b->vmax <= a->vmin)
        return is_min ? b : a;
    int64_t lo, hi; /* min(x, x + 1) is x */
    if (a->kind != SYM_CONST && b->kind != SYM_CONST && difference_bounds(ctx, a, b, &lo, &hi)) {
        if (lo == 0 && hi == 0) /* equal values: the lower id, whatever the operand order */
            return a->id < b->id ? a : b;
        if (hi <= 0 || lo >= 0)
            return (hi <= 0) == is_min ? a : b;
    }
    return make_comm(ctx, kind, a, b);
}

const sym_node *sym_min(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (!sym_enter(ctx, &a, &b, NULL))
        return NULL;
    return sym_leave(ctx, minmax_impl(ctx, SYM_MIN, a, b));
}

const sym_node *sym_max(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (!sym_enter(ctx, &a, &b, NULL))
        return NULL;
    return sym_leave(ctx, minmax_impl(ctx, SYM_MAX, a, b));
}
