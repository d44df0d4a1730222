/* Bounds: every node's [vmin, vmax] contains every value it can take, computed from its
 * operands' bounds with overflow-checked arithmetic. A bound that does not fit int64 is an
 * error (KILN_ERROR_OVERFLOW), never a wrapped value. */
#include "sym_internal.h"

typedef struct range {
    int64_t lo, hi;
} range;

static range range_of(const sym_node *n) {
    return (range){n->vmin, n->vmax};
}

static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b) {
    return a > b ? a : b;
}

static void range_include(range *r, int64_t v) {
    r->lo = min64(r->lo, v);
    r->hi = max64(r->hi, v);
}

static bool bounds_add(range a, range b, range *out) {
    return base_add_i64(a.lo, b.lo, &out->lo) && base_add_i64(a.hi, b.hi, &out->hi);
}

/* A product is extreme at a corner of the rectangle. */
static bool bounds_mul(range a, range b, range *out) {
    int64_t p[4];
    if (!base_mul_i64(a.lo, b.lo, &p[0]) || !base_mul_i64(a.lo, b.hi, &p[1]) ||
        !base_mul_i64(a.hi, b.lo, &p[2]) || !base_mul_i64(a.hi, b.hi, &p[3]))
        return false;
    *out = (range){p[0], p[0]};
    for (int i = 1; i < 4; i++)
        range_include(out, p[i]);
    return true;
}

/* floor(a / b) over a rectangle where b keeps one sign: monotone in a for fixed b and in b
 * for fixed a, so the extremes are at the corners. */
static bool div_corners(range a, int64_t b0, int64_t b1, range *out, bool *any) {
    int64_t q[4];
    if (!base_floordiv_i64(a.lo, b0, &q[0]) || !base_floordiv_i64(a.lo, b1, &q[1]) ||
        !base_floordiv_i64(a.hi, b0, &q[2]) || !base_floordiv_i64(a.hi, b1, &q[3]))
        return false;
    for (int i = 0; i < 4; i++) {
        if (!*any)
            *out = (range){q[i], q[i]};
        *any = true;
        range_include(out, q[i]);
    }
    return true;
}

/* A divisor range that contains 0 is split into its negative and positive parts: the
 * division by 0 itself is an evaluation error, not a value. */
static bool bounds_div(range a, range b, range *out) {
    bool any = false;
    if (b.lo <= -1 && !div_corners(a, b.lo, min64(b.hi, -1), out, &any))
        return false;
    if (b.hi >= 1 && !div_corners(a, max64(b.lo, 1), b.hi, out, &any))
        return false;
    if (!any)
        *out = (range){0, 0}; /* only division by zero: never evaluates */
    return true;
}

static bool bounds_mod(range a, range b, range *out) {
    if (b.lo > 0) {
        /* 0 <= a % b < b; with a >= 0 also a % b <= a. One constant b and one quotient over
         * all of a: the remainders are a shifted copy of a. */
        int64_t q0, q1, base;
        if (b.lo == b.hi && base_floordiv_i64(a.lo, b.lo, &q0) &&
            base_floordiv_i64(a.hi, b.lo, &q1) && q0 == q1 && base_mul_i64(q0, b.lo, &base)) {
            *out = (range){a.lo - base, a.hi - base};
            return true;
        }
        *out = (range){0, b.hi - 1};
        if (a.lo >= 0)
            out->hi = min64(out->hi, a.hi);
        return true;
    }
    if (b.hi < 0) {
        *out = (range){b.lo + 1, 0};
        if (a.hi <= 0)
            out->lo = max64(out->lo, a.lo);
        return true;
    }
    *out = (range){min64(0, b.lo + 1), max64(0, b.hi - 1)};
    return true;
}

/* The truth of a value range: 1 always true, 0 always false, -1 unknown. */
static int truth(range r) {
    if (r.lo > 0 || r.hi < 0)
        return 1;
    if (r.lo == 0 && r.hi == 0)
        return 0;
    return -1;
}

static range bool_range(int t) {
    return t < 0 ? (range){0, 1} : (range){t, t};
}

static range bounds_logic(sym_kind kind, range a, range b) {
    switch (kind) {
    case SYM_LT:
        return a.hi < b.lo ? (range){1, 1} : a.lo >= b.hi ? (range){0, 0} : (range){0, 1};
    case SYM_EQ:
    case SYM_NE: {
        int eq = (a.hi < b.lo || b.hi < a.lo)                     ? 0
                 : (a.lo == a.hi && b.lo == b.hi && a.lo == b.lo) ? 1
                                                                  : -1;
        return bool_range(eq < 0 ? -1 : kind == SYM_EQ ? eq : 1 - eq);
    }
    case SYM_AND: {
        int ta = truth(a), tb = truth(b);
        return bool_range(ta == 0 || tb == 0 ? 0 : ta == 1 && tb == 1 ? 1 : -1);
    }
    case SYM_OR: {
        int ta = truth(a), tb = truth(b);
        return bool_range(ta == 1 || tb == 1 ? 1 : ta == 0 && tb == 0 ? 0 : -1);
    }
    default: { /* SYM_NOT */
        int ta = truth(a);
        return bool_range(ta < 0 ? -1 : 1 - ta);
    }
    }
}

static range bounds_where(const sym_node *c, range a, range b) {
    int t = truth(range_of(c));
    if (t == 1)
        return a;
    if (t == 0)
        return b;
    return (range){min64(a.lo, b.lo), max64(a.hi, b.hi)};
}

bool sym_bounds(sym_ctx *ctx, sym_node *n) {
    range r = {n->value, n->value};
    range a = n->arity > 0 ? range_of(n->src[0]) : r;
    range b = n->arity > 1 ? range_of(n->src[1]) : a;
    bool ok = true;
    switch ((sym_kind)n->kind) {
    case SYM_CONST:
        break;
    case SYM_VAR:
    case SYM_BIND:
        r = a; /* a bound node simplifies like its Variable */
        break;
    case SYM_ADD:
        ok = bounds_add(a, b, &r);
        break;
    case SYM_MUL:
        ok = bounds_mul(a, b, &r);
        break;
    case SYM_DIV:
        ok = bounds_div(a, b, &r);
        break;
    case SYM_MOD:
        ok = bounds_mod(a, b, &r);
        break;
    case SYM_MIN:
        r = (range){min64(a.lo, b.lo), min64(a.hi, b.hi)};
        break;
    case SYM_MAX:
        r = (range){max64(a.lo, b.lo), max64(a.hi, b.hi)};
        break;
    case SYM_WHERE:
        r = bounds_where(n->src[0], b, range_of(n->src[2]));
        break;
    default:
        r = bounds_logic((sym_kind)n->kind, a, b);
        break;
    }
    if (!ok) {
        sym_fail(ctx, KILN_ERROR_OVERFLOW, "the bounds of a symbolic %s overflow int64",
                 sym_kinds[n->kind].name);
        return false;
    }
    n->vmin = r.lo;
    n->vmax = r.hi;
    return true;
}
