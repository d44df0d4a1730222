/* Symbolic soundness: random chains built once over an unbound Variable n in [2, 5] must give
 * the right element for every value of n. Each chain is recorded, replayed on an explicit
 * array for n = 2..5, and the tracker's index and valid expressions are evaluated with n
 * assigned. A decision the library took for one value only (a stride dropped, a merge) shows
 * up as a mismatch at another value. */
#include "shape_test.h"

#include <stdio.h>

#include "sim.h"

enum { SYM_CHAINS = 4000, SYM_OPS = 6, VMIN = 2, VMAX = 5, NVALS = VMAX - VMIN + 1 };

typedef enum rkind {
    R_PERMUTE,
    R_FLIP,
    R_PAD,
    R_SHRINK,
    R_MERGE,
    R_SPLIT,
    R_UNSQ,
    R_SQ,
    R_EXPAND,
    R_SELECT,
    R_UNFOLD,
    R_DIAG,
    R_COUNT
} rkind;

typedef struct rec {
    rkind k;
    uint32_t d, e;
    int64_t x, y;
    int64_t a[SHAPE_MAX_DIMS], b[SHAPE_MAX_DIMS];
    int32_t p[SHAPE_MAX_DIMS];
} rec;

typedef struct chain {
    uint32_t nrec, base_ndim, sym_dim;
    int64_t base[SHAPE_MAX_DIMS];
    rec r[SYM_OPS];
} chain;

/* ---- replay on an array ------------------------------------------------------------------- */

static bool map_expand(const int64_t *ni, int64_t *oi, const void *arg) {
    const sim *old = arg;
    for (uint32_t i = 0; i < old->ndim; i++)
        oi[i] = old->shape[i] == 1 ? 0 : ni[i];
    return true;
}

static void reshape_sim(sim *s, uint32_t m, const int64_t *ns) {
    s->ndim = m;
    memcpy(s->shape, ns, m * sizeof(int64_t));
}

static void replay_box(sim *s, const rec *r) {
    box_arg b = {.ndim = s->ndim};
    int64_t ns[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < s->ndim; i++) {
        b.old[i] = s->shape[i];
        b.b[i] = r->a[i];
        ns[i] = r->k == R_PAD ? s->shape[i] + r->a[i] + r->b[i] : s->shape[i] - r->b[i] - r->a[i];
    }
    sim_remap(s, s->ndim, ns, r->k == R_PAD ? map_pad : map_shrink, &b);
}

static void replay_reshape(sim *s, const rec *r) {
    int64_t ns[SHAPE_MAX_DIMS];
    uint32_t m = 0;
    for (uint32_t i = 0; i < s->ndim; i++) {
        if (r->k == R_MERGE && i == r->d) {
            ns[m++] = s->shape[i] * s->shape[i + 1];
            i++;
        } else if (r->k == R_SPLIT && i == r->d) {
            ns[m++] = r->x;
            ns[m++] = s->shape[i] / r->x;
        } else if (r->k == R_SQ && i == r->d) {
            continue;
        } else {
            if (r->k == R_UNSQ && i == r->d)
                ns[m++] = 1;
            ns[m++] = s->shape[i];
        }
    }
    if (r->k == R_UNSQ && r->d == s->ndim)
        ns[m++] = 1;
    reshape_sim(s, m, ns);
}

static void replay(sim *s, const rec *r, int64_t nval) {
    int64_t ns[SHAPE_MAX_DIMS];
    uint32_t n = s->ndim;
    memcpy(ns, s->shape, sizeof(ns));
    switch (r->k) {
    case R_PERMUTE: {
        perm_arg q;
        for (uint32_t i = 0; i < SHAPE_MAX_DIMS; i++)
            q.p[i] = i < n ? r->p[i] : -1;
        for (uint32_t i = 0; i < n; i++)
            ns[i] = s->shape[r->p[i]];
        sim_remap(s, n, ns, map_perm, &q);
        break;
    }
    case R_FLIP: {
        flip_arg f = {r->d, s->shape[r->d], n};
        sim_remap(s, n, ns, map_flip, &f);
        break;
    }
    case R_PAD:
    case R_SHRINK:
        replay_box(s, r);
        break;
    case R_MERGE:
    case R_SPLIT:
    case R_UNSQ:
    case R_SQ:
        replay_reshape(s, r);
        break;
    case R_EXPAND: {
        sim old = *s;
        ns[r->d] = r->x < 0 ? nval : r->x;
        sim_remap(s, n, ns, map_expand, &old);
        break;
    }
    case R_SELECT: {
        sel_arg a = {r->d, n, r->x};
        for (uint32_t i = 0, j = 0; i < n; i++)
            if (i != r->d)
                ns[j++] = s->shape[i];
        sim_remap(s, n - 1, ns, map_select, &a);
        break;
    }
    case R_UNFOLD: {
        unfold_arg u = {r->d, n, r->y};
        ns[r->d] = (s->shape[r->d] - r->x) / r->y + 1;
        ns[n] = r->x;
        sim_remap(s, n + 1, ns, map_unfold, &u);
        break;
    }
    case R_DIAG: {
        diag_arg g = {r->d, r->e, n, r->x < 0 ? -r->x : 0, r->x > 0 ? r->x : 0};
        uint32_t k = 0;
        for (uint32_t i = 0; i < n; i++)
            if (i != r->d && i != r->e)
                ns[k++] = s->shape[i];
        int64_t l1 = s->shape[r->d] - g.r0, l2 = s->shape[r->e] - g.c0;
        int64_t len = l1 < l2 ? l1 : l2;
        ns[k] = len < 0 ? 0 : len;
        sim_remap(s, n - 1, ns, map_diag, &g);
        break;
    }
    case R_COUNT:
        break;
    }
}

static void base_sim(const chain *c, int64_t nval, sim *s) {
    s->ndim = c->base_ndim;
    memcpy(s->shape, c->base, sizeof(c->base));
    s->shape[c->sym_dim] = nval;
    s->n = numel(s->shape, s->ndim);
    for (int64_t k = 0; k < s->n; k++)
        s->data[k] = k;
}

/* ---- building on the tracker ----------------------------------------------------------------- */

typedef struct sb {
    shape_ctx *c;
    sym_ctx *s;
    const sym_node *n; /* the Variable */
    shape_tracker t;
    sim lo, hi; /* the arrays at n = VMIN and n = VMAX */
} sb;

static const shape_view *lastv(sb *b) {
    return shape_tracker_last(&b->t);
}

static bool is_const_dim(sb *b, uint32_t d) {
    return sym_is_const(lastv(b)->shape[d], NULL);
}

/* Applies r to the tracker; false (nothing changed) when the library declines. */
static bool apply(sb *b, const rec *r) {
    const shape_view *l = lastv(b);
    sym_ctx *S = b->s;
    shape_view v;
    kiln_status s = KILN_OK;
    const sym_node *x[SHAPE_MAX_DIMS], *y[SHAPE_MAX_DIMS];
    switch (r->k) {
    case R_PERMUTE:
        s = shape_view_permute(b->c, l, r->p, &v);
        break;
    case R_FLIP:
        s = shape_view_flip(b->c, l, (int32_t)r->d, &v);
        break;
    case R_PAD:
    case R_SHRINK:
        for (uint32_t i = 0; i < l->ndim; i++) {
            x[i] = sym_const(S, r->a[i]);
            y[i] = r->k == R_PAD ? sym_const(S, r->b[i]) : sym_add_c(S, l->shape[i], -r->b[i]);
        }
        s = r->k == R_PAD ? shape_view_pad(b->c, l, x, y, &v)
                          : shape_view_shrink(b->c, l, x, y, &v);
        break;
    case R_MERGE:
    case R_SPLIT:
    case R_UNSQ:
    case R_SQ: {
        uint32_t m = 0;
        for (uint32_t i = 0; i < l->ndim; i++) {
            if (r->k == R_MERGE && i == r->d) {
                x[m++] = sym_mul(S, l->shape[i], l->shape[i + 1]);
                i++;
            } else if (r->k == R_SPLIT && i == r->d) {
                x[m++] = sym_const(S, r->x);
                x[m++] = sym_floordiv_c(S, l->shape[i], r->x);
            } else if (r->k == R_SQ && i == r->d) {
                continue;
            } else {
                if (r->k == R_UNSQ && i == r->d)
                    x[m++] = sym_const(S, 1);
                x[m++] = l->shape[i];
            }
        }
        if (r->k == R_UNSQ && r->d == l->ndim)
            x[m++] = sym_const(S, 1);
        shape_tracker t;
        s = shape_tracker_reshape(b->c, &b->t, m, x, &t);
        if (s == KILN_ERROR_LIMIT_EXCEEDED)
            return false;
        if (s != KILN_OK)
            fail_msg("reshape failed: %s", shape_ctx_message(b->c));
        b->t = t;
        return true;
    }
    case R_EXPAND:
        for (uint32_t i = 0; i < l->ndim; i++)
            x[i] = l->shape[i];
        x[r->d] = r->x < 0 ? b->n : sym_const(S, r->x);
        s = shape_view_expand(b->c, l, x, &v);
        break;
    case R_SELECT:
        s = shape_view_select(b->c, l, (int32_t)r->d, sym_const(S, r->x), &v);
        break;
    case R_UNFOLD:
        s = shape_view_unfold(b->c, l, (int32_t)r->d, sym_const(S, r->x), sym_const(S, r->y), &v);
        break;
    case R_DIAG:
        s = shape_view_diagonal(b->c, l, r->x, (int32_t)r->d, (int32_t)r->e, &v);
        break;
    case R_COUNT:
        return false;
    }
    if (s == KILN_ERROR_UNSUPPORTED)
        return false;
    if (s != KILN_OK)
        fail_msg("op %d failed: %s", (int)r->k, shape_ctx_message(b->c));
    shape_tracker t;
    assert_int_equal(shape_tracker_replace_last(b->c, &b->t, &v, &t), KILN_OK);
    b->t = t;
    return true;
}

/* A random op valid for every n in [VMIN, VMAX] (sizes grow with n: the VMIN array bounds
 * the arguments). False when none fits. */
static bool gen(sb *b, rec *r) {
    const sim *lo = &b->lo;
    uint32_t n = lo->ndim;
    memset(r, 0, sizeof(*r));
    r->k = (rkind)rnd(R_COUNT);
    switch (r->k) {
    case R_PERMUTE:
        for (uint32_t i = 0; i < n; i++)
            r->p[i] = (int32_t)i;
        for (uint32_t i = n; i > 1; i--) {
            uint32_t j = rnd(i);
            int32_t t = r->p[i - 1];
            r->p[i - 1] = r->p[j], r->p[j] = t;
        }
        return true;
    case R_FLIP:
        r->d = rnd(n);
        return n > 0;
    case R_PAD:
        for (uint32_t i = 0; i < n; i++)
            r->a[i] = rnd(3) == 0 ? rrange(0, 2) : 0, r->b[i] = rnd(3) == 0 ? rrange(0, 2) : 0;
        return true;
    case R_SHRINK:
        for (uint32_t i = 0; i < n; i++) {
            r->a[i] = rnd(2) ? rrange(0, lo->shape[i]) : 0;
            r->b[i] = rnd(2) ? rrange(0, lo->shape[i] - r->a[i]) : 0;
        }
        return true;
    case R_MERGE:
        r->d = rnd(n > 1 ? n - 1 : 1);
        return n > 1;
    case R_SPLIT:
        r->d = rnd(n ? n : 1);
        if (n == 0 || !is_const_dim(b, r->d) || lo->shape[r->d] < 2)
            return false;
        for (int64_t f = 2; f <= lo->shape[r->d]; f++)
            if (lo->shape[r->d] % f == 0)
                return r->x = f, true;
        return false;
    case R_UNSQ:
        r->d = rnd(n + 1);
        return n + 1 < SHAPE_MAX_DIMS;
    case R_SQ:
        r->d = rnd(n ? n : 1);
        return n > 0 && sym_is_const(lastv(b)->shape[r->d], NULL) && lo->shape[r->d] == 1;
    case R_EXPAND:
        r->d = rnd(n ? n : 1);
        r->x = rnd(3) == 0 ? -1 : rrange(0, 3);
        return n > 0 && sym_is_const(lastv(b)->shape[r->d], NULL) && lo->shape[r->d] == 1;
    case R_SELECT:
        r->d = rnd(n ? n : 1);
        if (n == 0 || lo->shape[r->d] < 1)
            return false;
        r->x = rrange(0, lo->shape[r->d] - 1);
        return true;
    case R_UNFOLD:
        r->d = rnd(n ? n : 1);
        if (n == 0 || n + 1 >= SHAPE_MAX_DIMS)
            return false;
        r->x = rrange(0, lo->shape[r->d]);
        r->y = rrange(1, 3);
        return true;
    case R_DIAG:
        if (n < 2)
            return false;
        r->d = rnd(n), r->e = rnd(n - 1);
        r->e += r->e >= r->d;
        r->x = rrange(-2, 2);
        return true;
    case R_COUNT:
        break;
    }
    return false;
}

static void build(sb *b, chain *c) {
    c->base_ndim = 1 + rnd(3);
    c->sym_dim = rnd(c->base_ndim);
    const sym_node *sz[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < c->base_ndim; i++) {
        c->base[i] = rrange(1, 3);
        sz[i] = i == c->sym_dim ? b->n : sym_const(b->s, c->base[i]);
    }
    shape_view v;
    assert_int_equal(shape_view_contiguous(b->c, c->base_ndim, sz, &v), KILN_OK);
    shape_tracker_from_view(&v, &b->t);
    base_sim(c, VMIN, &b->lo);
    base_sim(c, VMAX, &b->hi);
    c->nrec = 0;
    for (uint32_t k = 0; k < SYM_OPS; k++) {
        rec r;
        if (!gen(b, &r))
            continue;
        sim hi = b->hi;
        replay(&hi, &r, VMAX);
        if (hi.n > MAX_NUMEL || !apply(b, &r))
            continue;
        replay(&b->lo, &r, VMIN);
        b->hi = hi;
        c->r[c->nrec++] = r;
    }
}

/* Every element at n = val against the replayed array. */
static void check_value(sb *b, const chain *c, int64_t val) {
    static sim s;
    base_sim(c, val, &s);
    for (uint32_t k = 0; k < c->nrec; k++)
        replay(&s, &c->r[k], val);
    const shape_view *l = lastv(b);
    const sym_node *vars[SHAPE_MAX_DIMS + 1], *ix, *ok;
    int64_t vals[SHAPE_MAX_DIMS + 1];
    for (uint32_t i = 0; i < s.ndim; i++) {
        char name[32];
        snprintf(name, sizeof(name), "u%u_%lld", i, (long long)b->hi.shape[i]);
        vars[i] = sym_var(b->s, name, 0, b->hi.shape[i] > 0 ? b->hi.shape[i] - 1 : 0);
    }
    assert_int_equal(shape_tracker_index(b->c, &b->t, vars, &ix, &ok), KILN_OK);
    vars[s.ndim] = b->n;
    vals[s.ndim] = val;
    sym_assignment as = {vars, vals, s.ndim + 1};
    base_error err;
    for (uint32_t i = 0; i < s.ndim; i++) {
        int64_t got;
        base_error_clear(&err);
        assert_int_equal(sym_eval(l->shape[i], &as, &got, &err), KILN_OK);
        assert_int_equal(got, s.shape[i]);
    }
    for (int64_t k = 0; k < s.n; k++) {
        unravel(s.shape, s.ndim, k, vals);
        int64_t gv, gi = -1;
        base_error_clear(&err);
        assert_int_equal(sym_eval(ok, &as, &gv, &err), KILN_OK);
        if (gv)
            assert_int_equal(sym_eval(ix, &as, &gi, &err), KILN_OK);
        if (gi != s.data[k])
            fail_msg("n=%lld element %lld: got %lld want %lld (chain of %u ops, views %u)",
                     (long long)val, (long long)k, (long long)gi, (long long)s.data[k], c->nrec,
                     b->t.nviews);
    }
}

static void test_shape_symfuzz_unbound_chains_hold_for_every_value(void **state) {
    ST_ENV(state);
    static sb b;
    static chain c;
    b.c = C, b.s = S;
    b.n = sym_var(S, "n", VMIN, VMAX);
    long ops = 0, multi = 0, points = 0;
    const char *env_seed = getenv("KILN_SHAPE_FUZZ_SEED");
    uint64_t seed = env_seed ? strtoull(env_seed, NULL, 10) : 99991u;
    for (int i = 0; i < SYM_CHAINS; i++) {
        rng_state = seed * 1000003u + (uint64_t)i;
        build(&b, &c);
        for (int64_t v = VMIN; v <= VMAX; v++)
            check_value(&b, &c, v);
        ops += c.nrec;
        multi += b.t.nviews > 1;
        points += b.lo.n + b.hi.n;
    }
    print_message("chains %d x %d values, ops %ld, multi-view %ld, elements (at n=%d and %d) %ld\n",
                  SYM_CHAINS, NVALS, ops, multi, VMIN, VMAX, points);
    assert_true(ops > SYM_CHAINS * 3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shape_symfuzz_unbound_chains_hold_for_every_value,
                                        st_setup, st_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
