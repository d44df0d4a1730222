/* Floor division and floor modulo. Rules, each moving toward a smaller expression or a smaller
 * divisor, so that no rule undoes another:
 *   - constants fold; a // 1 = a, a % 1 = 0; a negative divisor moves onto the dividend;
 *   - bounds decide: one quotient over all of a gives a // c = q and a % c = a - q*c;
 *   - (x // k) // c = x // (k*c); (x % k) % c = x % c when c divides k;
 *   - sums (and terms coeff*base): terms divisible by c leave the division, the constant is
 *     split into c*q + r; a common factor g of what remains and c cancels; a remainder whose
 *     bounds allow vanishes: (a*c + b) // c = a when 0 <= b < c, and (d*S + r) // c =
 *     S // (c/d) when d divides c and 0 <= r < d;
 *   - modulo makes the same split as division (multiples of c drop out, the constant goes into
 *     [0, c)), so that x % c + c*(x // c) folds back into x in sum.c; a common factor comes
 *     out, (d*S + r) % c = d*(S % (c/d)) + r when 0 <= r < d, and a sum whose coefficients
 *     reduced modulo c stay inside [0, c) is the remainder itself;
 *   - by an expression b > 0: terms that are structural multiples of b (x*(4*i+4) over i+1)
 *     leave the division; bounds decide the rest.
 * Rewrites that fail (overflow) fall back to the plain node. */
#include "sym_internal.h"

static const sym_node *make_div(sym_ctx *ctx, const sym_node *a, int64_t c) {
    return sym_make(ctx, SYM_DIV, a, sym_make_const(ctx, c), NULL, 0);
}

static const sym_node *make_mod(sym_ctx *ctx, const sym_node *a, int64_t c) {
    return sym_make(ctx, SYM_MOD, a, sym_make_const(ctx, c), NULL, 0);
}

/* *q = a / b when b divides a exactly (false for b == 0 and for INT64_MIN / -1). */
static bool exact_quot(int64_t a, int64_t b, int64_t *q) {
    if (b == 0 || (b == -1 && a == INT64_MIN) || a % b != 0)
        return false;
    *q = a / b;
    return true;
}

static bool is_mul_const(const sym_node *n) {
    return n->kind == SYM_MUL && n->src[1]->kind == SYM_CONST;
}

/* Visits the terms of a (a sum's chain, or a itself) in turn. */
#define FOR_EACH_TERM(term, a)                                                                     \
    for (const sym_node *n_ = (a), *term = n_->kind == SYM_ADD ? n_->src[1] : n_; n_;              \
         n_ = n_->kind == SYM_ADD ? n_->src[0] : NULL,                                             \
                        term = n_ ? (n_->kind == SYM_ADD ? n_->src[1] : n_) : NULL)

/* Both sides' quotients agree over a's bounds: *q is the one quotient. */
static bool one_quotient(const sym_node *a, int64_t c, int64_t *q) {
    int64_t q0, q1;
    return base_floordiv_i64(a->vmin, c, &q0) && base_floordiv_i64(a->vmax, c, &q1) && q0 == q1 &&
           (*q = q0, true);
}

static bool has_div_term(const sym_node *a) {
    FOR_EACH_TERM(t, a) {
        const sym_node *base;
        int64_t coeff;
        sym_term_split(t, &base, &coeff);
        if (base && base->kind == SYM_DIV)
            return true;
    }
    return false;
}

/* ---- by a positive constant ------------------------------------------------------------- */

/* Whether every value of n lies in [0, c). */
static bool in_mod_range(const sym_node *n, int64_t c) {
    return n && n->vmin >= 0 && n->vmax < c;
}

/* The split of p by a coefficient d of its own that divides c: p = d*S + r with 0 <= r < d
 * (the terms whose coefficients d divides make S, the rest and the constant r). Tries each
 * coefficient in turn; false when none gives such an r. */
static bool split_by_coefficient(sym_ctx *ctx, const sym_terms *p, int64_t c, int64_t *d,
                                 const sym_node **s_out, const sym_node **r_out) {
    bool found = false;
    for (size_t i = 0; i < p->len && !found; i++) {
        *d = p->data[i].coeff;
        if (*d <= 1 || c % *d != 0)
            continue;
        sym_terms s, r;
        sym_terms_init(&s, ctx);
        sym_terms_init(&r, ctx);
        r.konst = p->konst;
        for (size_t j = 0; j < p->len; j++) {
            sym_term t = p->data[j];
            if (t.coeff % *d == 0)
                sym_terms_push(&s, t.base, t.coeff / *d);
            else
                sym_terms_push(&r, t.base, t.coeff);
        }
        *r_out = sym_terms_build(&r);
        found = in_mod_range(*r_out, *d);
        if (found)
            *s_out = sym_terms_build(&s);
        sym_terms_finish(&s);
        sym_terms_finish(&r);
    }
    return found;
}

/* (d*S + r) // c = S // (c/d) when d divides c and 0 <= r < d, for d one of the coefficients
 * ((x*56 + (y%28)*2 + z%2) // 784 = x // 14: an index through a permuted, merged view). NULL
 * when no d applies. The division's twin of mod_split. */
static const sym_node *div_split(sym_ctx *ctx, const sym_terms *p, int64_t c) {
    int64_t d;
    const sym_node *sn, *rn;
    return split_by_coefficient(ctx, p, c, &d, &sn, &rn) ? sym_floordiv_c(ctx, sn, c / d) : NULL;
}

/* rest // c for a rest whose coefficients c does not divide and whose constant is in
 * [0, c): bounds, then div_split, then a coefficient d dividing c when rest // d leaves no
 * division behind ((x*4 + y) // 16 = ((x*4 + y) // 4) // 4 = x // 4 when 0 <= y < 4). */
static const sym_node *div_rest(sym_ctx *ctx, const sym_node *rest, const sym_terms *r, int64_t c) {
    int64_t q;
    if (one_quotient(rest, c, &q))
        return sym_make_const(ctx, q);
    const sym_node *split = div_split(ctx, r, c);
    if (split)
        return split;
    for (size_t i = 0; i < r->len; i++) {
        int64_t d = r->data[i].coeff;
        if (d <= 1 || c % d != 0)
            continue;
        const sym_node *inner = sym_floordiv_c(ctx, rest, d);
        if (inner && inner->kind != SYM_DIV && !has_div_term(inner))
            return sym_floordiv_c(ctx, inner, c / d);
        break;
    }
    return make_div(ctx, rest, c);
}

/* Divides every coefficient and the constant of t by g (which divides them all). */
static void terms_divide(sym_terms *t, int64_t g) {
    for (size_t i = 0; i < t->len; i++)
        t->data[i].coeff /= g;
    t->konst /= g;
}

static int64_t gcd64(int64_t a, int64_t b) {
    int64_t g;
    return base_gcd_i64(a, b, &g) ? g : 1;
}

/* a // c for a sum or a term coeff*base. */
static const sym_node *div_terms(sym_ctx *ctx, const sym_node *a, int64_t c) {
    sym_terms all, q, r;
    sym_terms_init(&all, ctx);
    sym_terms_init(&q, ctx);
    sym_terms_init(&r, ctx);
    sym_terms_add(&all, a, 1);
    if (!all.ok) {
        sym_terms_finish(&all);
        return NULL;
    }
    int64_t g = c;
    for (size_t i = 0; i < all.len; i++) {
        sym_term t = all.data[i];
        if (t.coeff % c == 0) {
            sym_terms_push(&q, t.base, t.coeff / c);
        } else {
            sym_terms_push(&r, t.base, t.coeff);
            g = gcd64(g, t.coeff);
        }
    }
    base_floordiv_i64(all.konst, c, &q.konst);
    base_floormod_i64(all.konst, c, &r.konst);
    g = gcd64(g, r.konst);
    const sym_node *rest = sym_terms_build(&r), *inner = NULL;
    if (rest && g > 1) {
        terms_divide(&r, g);
        inner = sym_floordiv_c(ctx, sym_terms_build(&r), c / g);
    } else if (rest) {
        inner = div_rest(ctx, rest, &r, c);
    }
    const sym_node *out = sym_add(ctx, sym_terms_build(&q), inner);
    sym_terms_finish(&all);
    sym_terms_finish(&q);
    sym_terms_finish(&r);
    return out;
}

static const sym_node *div_const(sym_ctx *ctx, const sym_node *a, int64_t c) {
    int64_t q, kc;
    if (c == 1)
        return a;
    if (one_quotient(a, c, &q))
        return sym_make_const(ctx, q);
    if (a->kind == SYM_DIV && a->src[1]->kind == SYM_CONST &&
        base_mul_i64(a->src[1]->value, c, &kc))
        return sym_floordiv_c(ctx, a->src[0], kc);
    if (a->kind == SYM_ADD || is_mul_const(a))
        return div_terms(ctx, a, c);
    return make_div(ctx, a, c);
}

/* (d*S + r) % c = d*(S % (c/d)) + r when d divides c and 0 <= r < d, for d one of the
 * coefficients: ((x*3 + y) % 6 = (x % 2)*3 + y when 0 <= y < 3). NULL when no d applies. */
static const sym_node *mod_split(sym_ctx *ctx, const sym_terms *p, int64_t c) {
    int64_t d;
    const sym_node *sn, *rn;
    if (!split_by_coefficient(ctx, p, c, &d, &sn, &rn))
        return NULL;
    return sym_add(ctx, sym_mul_c(ctx, sym_floormod_c(ctx, sn, c / d), d), rn);
}

/* a % c for a sum or a term. Terms that are multiples of c drop out and the constant is
 * reduced into [0, c) (the same split the division makes, so x % c and x // c keep the same
 * x and x%c + c*(x//c) folds back into x); a common factor g comes out: (g*x) % (g*c') is
 * g * (x % c'); and when every coefficient reduced modulo c gives a sum inside [0, c), that
 * sum is the answer ((a*10) % 9 = a for 0 <= a < 9). */
static const sym_node *mod_terms(sym_ctx *ctx, const sym_node *a, int64_t c) {
    sym_terms p;
    sym_terms_init(&p, ctx);
    sym_terms_add(&p, a, 1);
    int64_t g = c;
    size_t kept = 0;
    for (size_t i = 0; i < p.len; i++) {
        if (p.data[i].coeff % c != 0) {
            p.data[kept++] = p.data[i];
            g = gcd64(g, p.data[i].coeff);
        }
    }
    p.len = kept;
    base_floormod_i64(p.konst, c, &p.konst);
    g = gcd64(g, p.konst);
    const sym_node *rest = sym_terms_build(&p), *out = NULL;
    if (rest && g > 1) {
        terms_divide(&p, g);
        out = sym_mul_c(ctx, sym_floormod_c(ctx, sym_terms_build(&p), c / g), g);
    } else if (rest && (out = mod_split(ctx, &p, c)) != NULL) {
        /* done */
    } else if (rest) {
        for (size_t i = 0; i < p.len; i++)
            base_floormod_i64(p.data[i].coeff, c, &p.data[i].coeff);
        const sym_node *reduced = sym_terms_build(&p);
        out = in_mod_range(reduced, c) ? reduced
              : rest != a              ? sym_floormod_c(ctx, rest, c)
                                       : make_mod(ctx, a, c);
    }
    sym_terms_finish(&p);
    return out;
}

static const sym_node *mod_const(sym_ctx *ctx, const sym_node *a, int64_t c) {
    int64_t q, qc;
    if (c == 1)
        return sym_make_const(ctx, 0);
    if (one_quotient(a, c, &q) && base_mul_i64(q, c, &qc) && base_neg_i64(qc, &qc))
        return qc == 0 ? a : sym_add_c(ctx, a, qc);
    if (a->kind == SYM_MOD && a->src[1]->kind == SYM_CONST && a->src[1]->value > 0 &&
        a->src[1]->value % c == 0)
        return sym_floormod_c(ctx, a->src[0], c);
    if (a->kind == SYM_ADD || is_mul_const(a))
        return mod_terms(ctx, a, c);
    return make_mod(ctx, a, c);
}

/* ---- by an expression ------------------------------------------------------------------- */

static const sym_node *divide_exact(sym_ctx *ctx, const sym_node *t, const sym_node *b);

/* k when the sum t is k times the sum b term by term (and constant by constant), else 0. */
static int64_t proportional(sym_ctx *ctx, const sym_node *t, const sym_node *b) {
    sym_terms x, y;
    sym_terms_init(&x, ctx);
    sym_terms_init(&y, ctx);
    sym_terms_add(&x, t, 1);
    sym_terms_add(&y, b, 1);
    int64_t k = 0, p;
    bool ok = x.ok && y.ok && x.len == y.len && x.len > 0 &&
              exact_quot(x.data[0].coeff, y.data[0].coeff, &k);
    for (size_t i = 0; ok && i < x.len; i++)
        ok = x.data[i].base == y.data[i].base && base_mul_i64(k, y.data[i].coeff, &p) &&
             p == x.data[i].coeff;
    ok = ok && base_mul_i64(k, y.konst, &p) && p == x.konst;
    sym_terms_finish(&x);
    sym_terms_finish(&y);
    return ok ? k : 0;
}

/* t / b when every term of the sum t is a multiple of b. */
static const sym_node *divide_termwise(sym_ctx *ctx, const sym_node *t, const sym_node *b) {
    const sym_node *sum = sym_make_const(ctx, 0);
    FOR_EACH_TERM(term, t) {
        const sym_node *q = divide_exact(ctx, term, b);
        if (!q)
            return NULL;
        sum = sym_add(ctx, sum, q);
    }
    return sum;
}

/* t / b for a product of non-constants t: a factor that is b, or a multiple of b. */
static const sym_node *divide_product(sym_ctx *ctx, const sym_node *t, const sym_node *b) {
    const sym_node *rest = NULL; /* the factors passed over so far */
    for (const sym_node *n = t;; n = n->src[0]) {
        bool last = n->kind != SYM_MUL || n->src[1]->kind == SYM_CONST;
        const sym_node *f = last ? n : n->src[1];
        const sym_node *others = last ? NULL : n->src[0];
        const sym_node *q = divide_exact(ctx, f, b);
        if (q) {
            if (others)
                q = sym_mul(ctx, q, others);
            return rest ? sym_mul(ctx, q, rest) : q;
        }
        rest = rest ? sym_mul(ctx, rest, f) : f;
        if (last)
            return NULL;
    }
}

/* t / b when t is structurally a multiple of b (b not a constant), else NULL. */
static const sym_node *divide_exact(sym_ctx *ctx, const sym_node *t, const sym_node *b) {
    if (t == b)
        return sym_make_const(ctx, 1);
    if (t->kind == SYM_CONST)
        return t->value == 0 ? t : NULL;
    if (t->kind == SYM_ADD) {
        int64_t k = b->kind == SYM_ADD ? proportional(ctx, t, b) : 0;
        return k ? sym_make_const(ctx, k) : divide_termwise(ctx, t, b);
    }
    const sym_node *tb, *bb;
    int64_t tc, bc;
    sym_term_split(t, &tb, &tc);
    sym_term_split(b, &bb, &bc);
    int64_t k = 0;
    bool whole = exact_quot(tc, bc, &k);
    if (tb == bb && whole)
        return sym_make_const(ctx, k);
    if (tb->kind != SYM_MUL || is_mul_const(tb))
        return NULL;
    if (whole && bc != 1) { /* (x*B*tc) / (B*bc) */
        const sym_node *q = divide_product(ctx, tb, bb);
        return q ? sym_mul_c(ctx, q, k) : NULL;
    }
    const sym_node *q = divide_product(ctx, tb, b);
    return q ? sym_mul_c(ctx, q, tc) : NULL;
}

/* Splits the terms of a into multiples of b (their quotients summed into *q) and the rest
 * (*r); false when no term is a multiple. */
static bool split_multiples(sym_ctx *ctx, const sym_node *a, const sym_node *b, sym_terms *q,
                            sym_terms *r) {
    bool any = false;
    FOR_EACH_TERM(term, a) {
        const sym_node *d = divide_exact(ctx, term, b);
        if (d) {
            sym_terms_add(q, d, 1);
            any = true;
        } else {
            sym_terms_add(r, term, 1);
        }
    }
    return any;
}

static const sym_node *div_expr(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    const sym_node *e = divide_exact(ctx, a, b);
    if (e || a->kind != SYM_ADD)
        return e ? e : sym_make(ctx, SYM_DIV, a, b, NULL, 0);
    sym_terms q, r;
    sym_terms_init(&q, ctx);
    sym_terms_init(&r, ctx);
    const sym_node *out =
        split_multiples(ctx, a, b, &q, &r)
            ? sym_add(ctx, sym_terms_build(&q), sym_floordiv(ctx, sym_terms_build(&r), b))
            : sym_make(ctx, SYM_DIV, a, b, NULL, 0);
    sym_terms_finish(&q);
    sym_terms_finish(&r);
    return out;
}

static const sym_node *mod_expr(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (a->vmin >= 0 && a->vmax < b->vmin)
        return a;
    if (divide_exact(ctx, a, b))
        return sym_make_const(ctx, 0);
    if (a->kind != SYM_ADD)
        return sym_make(ctx, SYM_MOD, a, b, NULL, 0);
    sym_terms q, r;
    sym_terms_init(&q, ctx);
    sym_terms_init(&r, ctx);
    const sym_node *out = split_multiples(ctx, a, b, &q, &r)
                              ? sym_floormod(ctx, sym_terms_build(&r), b)
                              : sym_make(ctx, SYM_MOD, a, b, NULL, 0);
    sym_terms_finish(&q);
    sym_terms_finish(&r);
    return out;
}

/* ---- entry points ----------------------------------------------------------------------- */

const sym_node *sym_div_impl(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    int64_t x, c;
    if (sym_is_const(b, &c)) {
        if (c == 0)
            return sym_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "symbolic division by zero");
        if (sym_is_const(a, &x))
            return base_floordiv_i64(x, c, &x)
                       ? sym_make_const(ctx, x)
                       : sym_fail(ctx, KILN_ERROR_OVERFLOW, "floor division overflows int64");
        if (c < 0 && c != INT64_MIN) /* a // -c = (-a) // c */
            return sym_floordiv_c(ctx, sym_neg(ctx, a), -c);
        return c > 0 ? div_const(ctx, a, c) : sym_make(ctx, SYM_DIV, a, b, NULL, 0);
    }
    if (b->vmax < 0)
        return sym_floordiv(ctx, sym_neg(ctx, a), sym_neg(ctx, b));
    if (b->vmin > 0)
        return div_expr(ctx, a, b);
    return sym_make(ctx, SYM_DIV, a, b, NULL, 0); /* the divisor may be 0 */
}

const sym_node *sym_mod_impl(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    int64_t x, c;
    if (sym_is_const(b, &c)) {
        if (c == 0)
            return sym_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "symbolic modulo by zero");
        if (sym_is_const(a, &x))
            return base_floormod_i64(x, c, &x) ? sym_make_const(ctx, x) : NULL;
        if (c < 0 && c != INT64_MIN) /* a % -c = -((-a) % c) */
            return sym_neg(ctx, sym_floormod_c(ctx, sym_neg(ctx, a), -c));
        return c > 0 ? mod_const(ctx, a, c) : sym_make(ctx, SYM_MOD, a, b, NULL, 0);
    }
    if (b->vmax < 0)
        return sym_neg(ctx, sym_floormod(ctx, sym_neg(ctx, a), sym_neg(ctx, b)));
    if (b->vmin > 0)
        return mod_expr(ctx, a, b);
    return sym_make(ctx, SYM_MOD, a, b, NULL, 0);
}

const sym_node *sym_floordiv(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (!sym_enter(ctx, &a, &b, NULL))
        return NULL;
    return sym_leave(ctx, sym_div_impl(ctx, a, b));
}

const sym_node *sym_floormod(sym_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (!sym_enter(ctx, &a, &b, NULL))
        return NULL;
    return sym_leave(ctx, sym_mod_impl(ctx, a, b));
}

const sym_node *sym_floordiv_c(sym_ctx *ctx, const sym_node *a, int64_t b) {
    return ctx ? sym_floordiv(ctx, a, sym_make_const(ctx, b)) : NULL;
}

const sym_node *sym_floormod_c(sym_ctx *ctx, const sym_node *a, int64_t b) {
    return ctx ? sym_floormod(ctx, a, sym_make_const(ctx, b)) : NULL;
}
