/* Property tests: random expressions over random bounded Variables, each built through the
 * simplifying constructors and checked against a direct evaluation of the unsimplified tree
 * (floor semantics through base_floordiv_i64/base_floormod_i64) at random assignments inside
 * the bounds; the simplified node's bounds must contain every value. Seeded and reproducible:
 * KILN_SYM_SEED overrides the seed, KILN_SYM_COUNT the number of expressions. Also the
 * termination tests: adversarial nests of div/mod/min/max stay within the step budget, and a
 * tiny budget fails cleanly. */
#include "sym_test.h"

#include <stdlib.h>

enum { NVARS = 4, POOL = 256, ASSIGNMENTS = 6 };

typedef enum op {
    OP_CONST,
    OP_VAR,
    OP_BIND, /* a bound Variable: evaluates to its value k */
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_MULC,
    OP_DIVC,
    OP_MODC,
    OP_DIV,
    OP_MOD,
    OP_MIN,
    OP_MAX,
    OP_LT,
    OP_LE,
    OP_EQ,
    OP_NE,
    OP_AND,
    OP_OR,
    OP_NOT,
    OP_WHERE,
    OP_NEG,
    OP_COUNT
} op;

typedef struct rnode {
    op op;
    int64_t k;
    int var;
    const struct rnode *a, *b, *c;
} rnode;

typedef struct gen {
    uint64_t rng;
    rnode pool[POOL];
    int used;
    int64_t lo[NVARS], hi[NVARS];
    bool index_mode; /* non-negative Variables, larger constants: index arithmetic */
    bool has_bind;   /* the tree holds a bound Variable */
    bool deep;       /* adversarial: deep nests of div, mod, min, max only */
    bool extreme;    /* Variables and constants near the ends of int64 */
} gen;

static uint64_t next_u64(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int64_t rnd(gen *g, int64_t lo, int64_t hi) { /* inclusive, any int64 range */
    uint64_t span = (uint64_t)hi - (uint64_t)lo + 1, r = next_u64(&g->rng);
    return (int64_t)((uint64_t)lo + (span ? r % span : r));
}

static int64_t nonzero(gen *g) {
    int64_t k = g->extreme      ? rnd(g, -(INT64_C(1) << 40), INT64_C(1) << 40)
                : g->index_mode ? rnd(g, -2, 64)
                                : rnd(g, -9, 16);
    return k == 0 ? 4 : k;
}

static const rnode *gen_expr(gen *g, int depth) {
    rnode *n = &g->pool[g->used++];
    *n = (rnode){0};
    if (depth == 0 || g->used + 3 >= POOL || rnd(g, 0, 9) < 2) {
        int64_t pick = rnd(g, 0, 9);
        n->op = pick < 3 ? OP_CONST : pick == 3 ? OP_BIND : OP_VAR;
        n->k = g->extreme      ? rnd(g, INT64_MIN, INT64_MAX)
               : g->index_mode ? rnd(g, 0, 64)
                               : rnd(g, -8, 20);
        n->var = (int)rnd(g, 0, NVARS - 1);
        if (n->op == OP_BIND) {
            n->k = rnd(g, g->lo[n->var], g->hi[n->var]);
            g->has_bind = true;
        }
        return n;
    }
    static const op deep_ops[] = {OP_ADD, OP_MULC, OP_DIVC, OP_MODC, OP_DIV,  OP_MOD,
                                  OP_MIN, OP_MAX,  OP_DIVC, OP_MODC, OP_DIVC, OP_MODC};
    n->op = (op)rnd(g, OP_ADD, OP_COUNT - 1);
    /* index arithmetic dominates: add, mul by constants, div and mod by constants */
    if (rnd(g, 0, 2) == 0)
        n->op = (op)(OP_ADD + rnd(g, 0, 5));
    if (g->deep)
        n->op = deep_ops[rnd(g, 0, (int64_t)BASE_COUNTOF(deep_ops) - 1)];
    n->k = n->op == OP_MULC ? rnd(g, -6, 12) : nonzero(g);
    n->a = gen_expr(g, depth - 1);
    if (n->op != OP_NOT && n->op != OP_NEG && n->op != OP_MULC && n->op != OP_DIVC &&
        n->op != OP_MODC)
        n->b = gen_expr(g, depth - 1);
    if (n->op == OP_WHERE)
        n->c = gen_expr(g, depth - 1);
    return n;
}

/* Strict reference evaluation of the unsimplified tree: false on division by zero or
 * overflow (the sample is then skipped). */
static bool ref_eval(const rnode *n, const int64_t *v, int64_t *out) {
    int64_t x = 0, y = 0, z = 0;
    if (n->op == OP_CONST || n->op == OP_BIND) {
        *out = n->k;
        return true;
    }
    if (n->op == OP_VAR) {
        *out = v[n->var];
        return true;
    }
    if (!ref_eval(n->a, v, &x) || (n->b && !ref_eval(n->b, v, &y)) ||
        (n->c && !ref_eval(n->c, v, &z)))
        return false;
    switch (n->op) {
    case OP_ADD:
        return base_add_i64(x, y, out);
    case OP_SUB:
        return base_sub_i64(x, y, out);
    case OP_MUL:
        return base_mul_i64(x, y, out);
    case OP_MULC:
        return base_mul_i64(x, n->k, out);
    case OP_DIVC:
        return base_floordiv_i64(x, n->k, out);
    case OP_MODC:
        return base_floormod_i64(x, n->k, out);
    case OP_DIV:
        return base_floordiv_i64(x, y, out);
    case OP_MOD:
        return base_floormod_i64(x, y, out);
    case OP_MIN:
        *out = x < y ? x : y;
        return true;
    case OP_MAX:
        *out = x > y ? x : y;
        return true;
    case OP_LT:
        *out = x < y;
        return true;
    case OP_LE:
        *out = x <= y;
        return true;
    case OP_EQ:
        *out = x == y;
        return true;
    case OP_NE:
        *out = x != y;
        return true;
    case OP_AND:
        *out = x != 0 && y != 0;
        return true;
    case OP_OR:
        *out = x != 0 || y != 0;
        return true;
    case OP_NOT:
        *out = x == 0;
        return true;
    case OP_WHERE:
        *out = x != 0 ? y : z;
        return true;
    case OP_NEG:
        return base_neg_i64(x, out);
    default:
        return false;
    }
}

/* The tree through the constructors; mirror swaps the operands of every commutative
 * operation (the result must be the same node). */
static const sym_node *build_m(sym_ctx *c, const rnode *n, const sym_node *const *vars,
                               bool mirror) {
    if (n->op == OP_CONST)
        return sym_const(c, n->k);
    if (n->op == OP_VAR)
        return vars[n->var];
    if (n->op == OP_BIND)
        return sym_bind(c, vars[n->var], n->k);
    const sym_node *a = build_m(c, n->a, vars, mirror);
    const sym_node *b = n->b ? build_m(c, n->b, vars, mirror) : NULL;
    const sym_node *d = n->c ? build_m(c, n->c, vars, mirror) : NULL;
    bool comm = n->op == OP_ADD || n->op == OP_MUL || n->op == OP_MIN || n->op == OP_MAX ||
                n->op == OP_EQ || n->op == OP_NE || n->op == OP_AND || n->op == OP_OR;
    if (mirror && comm) {
        const sym_node *t = a;
        a = b;
        b = t;
    }
    switch (n->op) {
    case OP_ADD:
        return sym_add(c, a, b);
    case OP_SUB:
        return sym_sub(c, a, b);
    case OP_MUL:
        return sym_mul(c, a, b);
    case OP_MULC:
        return sym_mul_c(c, a, n->k);
    case OP_DIVC:
        return sym_floordiv_c(c, a, n->k);
    case OP_MODC:
        return sym_floormod_c(c, a, n->k);
    case OP_DIV:
        return sym_floordiv(c, a, b);
    case OP_MOD:
        return sym_floormod(c, a, b);
    case OP_MIN:
        return sym_min(c, a, b);
    case OP_MAX:
        return sym_max(c, a, b);
    case OP_LT:
        return sym_lt(c, a, b);
    case OP_LE:
        return sym_le(c, a, b);
    case OP_EQ:
        return sym_eq(c, a, b);
    case OP_NE:
        return sym_ne(c, a, b);
    case OP_AND:
        return sym_and(c, a, b);
    case OP_OR:
        return sym_or(c, a, b);
    case OP_NOT:
        return sym_not(c, a);
    case OP_WHERE:
        return sym_where(c, a, b, d);
    case OP_NEG:
        return sym_neg(c, a);
    default:
        return NULL;
    }
}

static const sym_node *build(sym_ctx *c, const rnode *n, const sym_node *const *vars) {
    return build_m(c, n, vars, false);
}

static const char *const op_names[OP_COUNT] = {
    "k",   "v",   "bind", "+",  "-",  "*",  "*",   "//", "%",   "//",    "%",
    "min", "max", "<",    "<=", "==", "!=", "and", "or", "not", "where", "neg"};

static void ref_print(const rnode *n, char *buf, size_t cap) {
    size_t len = strlen(buf);
    if (len + 40 >= cap)
        return;
    if (n->op == OP_CONST) {
        snprintf(buf + len, cap - len, "%lld", (long long)n->k);
        return;
    }
    if (n->op == OP_VAR || n->op == OP_BIND) {
        snprintf(buf + len, cap - len, n->op == OP_VAR ? "v%d" : "(v%d:=%lld)", n->var,
                 (long long)n->k);
        return;
    }
    snprintf(buf + len, cap - len, "(%s ", op_names[n->op]);
    ref_print(n->a, buf, cap);
    if (n->op == OP_MULC || n->op == OP_DIVC || n->op == OP_MODC) {
        len = strlen(buf);
        snprintf(buf + len, cap - len, " %lld", (long long)n->k);
    }
    if (n->b) {
        strncat(buf, " ", cap - strlen(buf) - 1);
        ref_print(n->b, buf, cap);
    }
    if (n->c) {
        strncat(buf, " ", cap - strlen(buf) - 1);
        ref_print(n->c, buf, cap);
    }
    strncat(buf, ")", cap - strlen(buf) - 1);
}

static void report(uint64_t seed, long iter, const rnode *r, const sym_node *s, const gen *g,
                   const int64_t *v, const char *what) {
    char a[2048] = "", b[2048];
    ref_print(r, a, sizeof a);
    sym_render(s, b, sizeof b);
    fprintf(stderr, "seed %llu expression %ld: %s\n  tree: %s\n  simplified: %s [%lld, %lld]\n",
            (unsigned long long)seed, iter, what, a, b, (long long)sym_vmin(s),
            (long long)sym_vmax(s));
    for (int i = 0; i < NVARS; i++)
        fprintf(stderr, "  v%d in [%lld, %lld] = %lld\n", i, (long long)g->lo[i],
                (long long)g->hi[i], (long long)v[i]);
}

typedef struct stats {
    long built, build_errors, samples, skipped;
} stats;

/* Checks one expression at ASSIGNMENTS random points; false on a mismatch (reported). */
static bool check_one(sym_ctx *c, gen *g, const sym_node *const *vars, const rnode *r,
                      const sym_node *s, uint64_t seed, long iter, stats *st) {
    for (int k = 0; k < ASSIGNMENTS; k++) {
        int64_t v[NVARS], want, got = 0;
        for (int i = 0; i < NVARS; i++)
            v[i] = k == 0 ? g->lo[i] : k == 1 ? g->hi[i] : rnd(g, g->lo[i], g->hi[i]);
        if (!ref_eval(r, v, &want)) {
            st->skipped++;
            continue;
        }
        st->samples++;
        sym_assignment as = {vars, v, NVARS};
        base_error err = {0};
        if (sym_eval(s, &as, &got, &err) != KILN_OK || got != want) {
            report(seed, iter, r, s, g, v, err.status ? err.message : "value differs");
            fprintf(stderr, "  reference %lld, simplified %lld\n", (long long)want, (long long)got);
            return false;
        }
        if (got < sym_vmin(s) || got > sym_vmax(s)) {
            report(seed, iter, r, s, g, v, "value outside bounds");
            return false;
        }
        if (k == 2 && !g->has_bind) { /* substitution by the values folds to the constant */
            const sym_node *to[NVARS];
            for (int i = 0; i < NVARS; i++)
                to[i] = sym_const(c, v[i]);
            int64_t sv;
            const sym_node *sub = sym_substitute(c, s, vars, to, NVARS);
            if (sub && !(sym_is_const(sub, &sv) && sv == want)) {
                report(seed, iter, r, sub, g, v, "substitution differs");
                return false;
            }
            sym_ctx_clear_error(c); /* a substitution may divide by a zero constant */
        }
    }
    return true;
}

static uint64_t env_u64(const char *name, uint64_t def) {
    const char *s = getenv(name);
    return s && *s ? strtoull(s, NULL, 10) : def;
}

typedef enum mode { MODE_MIXED, MODE_DEEP, MODE_EXTREME } mode;

static void pick_ranges(gen *g, long iter) {
    g->index_mode = iter % 2 == 1;
    for (int i = 0; i < NVARS; i++) {
        if (g->extreme) {
            g->lo[i] = rnd(g, -(INT64_C(1) << 62), INT64_C(1) << 62);
            g->hi[i] = g->lo[i] + rnd(g, 0, INT64_C(1) << (i * 20));
            continue;
        }
        g->lo[i] = g->index_mode ? 0 : rnd(g, -12, 12);
        g->hi[i] = g->lo[i] + rnd(g, 0, i == 0 ? 3 : g->index_mode ? 300 : 40);
    }
}

/* count random expressions from seed; deep: adversarial nests of depth 6 to 9; extreme:
 * values near the ends of int64 (overflow must be an error, never undefined behaviour). */
static void run_property(uint64_t seed, long count, mode which) {
    bool deep = which == MODE_DEEP;
    gen g = {.rng = seed, .deep = deep, .extreme = which == MODE_EXTREME};
    stats st = {0};
    sym_ctx *c = NULL;
    const sym_node *vars[NVARS];
    for (long iter = 0; iter < count; iter++) {
        if (iter % 500 == 0) { /* a fresh context now and then bounds the memory */
            sym_ctx_destroy(c);
            assert_int_equal(sym_ctx_create(NULL, &c), KILN_OK);
        }
        pick_ranges(&g, iter);
        for (int i = 0; i < NVARS; i++) {
            char name[32];
            snprintf(name, sizeof name, "v%d_%ld", i, iter);
            vars[i] = sym_var(c, name, g.lo[i], g.hi[i]);
        }
        g.used = 0;
        g.has_bind = false;
        const rnode *r = gen_expr(&g, deep ? (int)rnd(&g, 6, 9) : (int)rnd(&g, 1, 5));
        const sym_node *s = build(c, r, vars);
        if (!s) { /* division by a zero constant, or bounds beyond int64 */
            kiln_status why = sym_ctx_status(c);
            assert_true(why == KILN_ERROR_INVALID_ARGUMENT || why == KILN_ERROR_OVERFLOW);
            sym_ctx_clear_error(c);
            st.build_errors++;
            continue;
        }
        assert_int_equal(sym_ctx_status(c), KILN_OK);
        st.built++;
        if (iter % 16 == 0) /* hash-consing: the same tree gives the same node */
            assert_ptr_equal(build(c, r, vars), s);
        if (iter % 16 == 1) { /* commutative operands in either order: the same node */
            const sym_node *m = build_m(c, r, vars, true);
            if (m != s) {
                int64_t v[NVARS] = {0};
                report(seed, iter, r, m, &g, v, "mirrored tree gives another node");
                report(seed, iter, r, s, &g, v, "(the original)");
                fail_msg("hash-consing is order-dependent");
            }
        }
        if (!check_one(c, &g, vars, r, s, seed, iter, &st))
            fail_msg("property failed (seed %llu, expression %ld)", (unsigned long long)seed, iter);
    }
    sym_ctx_destroy(c);
    fprintf(stderr,
            "property%s: %ld expressions built, %ld build errors, %ld samples checked, "
            "%ld skipped\n",
            deep        ? " (deep)"
            : g.extreme ? " (extreme)"
                        : "",
            st.built, st.build_errors, st.samples, st.skipped);
    assert_true(st.built >= count * (g.extreme ? 2 : 8) / 10);
    assert_true(st.samples >= count * (g.extreme ? 1 : 3));
}

static void test_symbolic_property_random_expressions_match_reference(void **state) {
    (void)state;
    run_property(env_u64("KILN_SYM_SEED", 20261122), (long)env_u64("KILN_SYM_COUNT", 100000),
                 MODE_MIXED);
}

/* Budget errors are not among the allowed build errors: every nest builds within it. */
static void test_symbolic_property_deep_random_nests_within_budget(void **state) {
    (void)state;
    run_property(env_u64("KILN_SYM_SEED", 20261122) + 1,
                 (long)env_u64("KILN_SYM_COUNT", 100000) / 10, MODE_DEEP);
}

/* Near the ends of int64 every build either succeeds or reports KILN_ERROR_OVERFLOW (or a
 * division by a zero constant); run under UBSan this proves no signed overflow happens. */
static void test_symbolic_property_extreme_values_overflow_cleanly(void **state) {
    (void)state;
    run_property(env_u64("KILN_SYM_SEED", 20261122) + 2,
                 (long)env_u64("KILN_SYM_COUNT", 100000) / 5, MODE_EXTREME);
}

/* ---- termination ------------------------------------------------------------------------ */

static void test_symbolic_property_adversarial_nesting_terminates(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = sym_var(ctx, "x", 0, 1000), *y = sym_var(ctx, "y", -50, 50);
    const sym_node *z = sym_var(ctx, "z", 1, 97);
    const sym_node *e = x;
    for (int i = 0; i < 300; i++) {
        const sym_node *t = sym_add(ctx, sym_mul_c(ctx, e, 7 + i % 5), sym_mul_c(ctx, y, 3));
        t = sym_floormod_c(ctx, sym_floordiv_c(ctx, sym_add_c(ctx, t, i), 3 + i % 4), 11 + i);
        t = sym_min(ctx, sym_max(ctx, t, sym_floordiv_c(ctx, y, 2)), sym_add(ctx, x, z));
        t = sym_floordiv(ctx, sym_add(ctx, t, sym_floormod(ctx, x, z)), z);
        e = sym_add(ctx, sym_floormod_c(ctx, sym_mul_c(ctx, t, 12), 8), sym_floordiv_c(ctx, x, 4));
        assert_non_null(e);
    }
    assert_int_equal(sym_ctx_status(ctx), KILN_OK);
    /* The result still evaluates and respects its bounds. */
    const sym_node *vars[] = {x, y, z};
    const int64_t vals[] = {997, -13, 5};
    sym_assignment as = {vars, vals, 3};
    int64_t v = 0;
    base_error err = {0};
    assert_int_equal(sym_eval(e, &as, &v, &err), KILN_OK);
    assert_true(v >= sym_vmin(e) && v <= sym_vmax(e));
}

static void test_symbolic_property_deep_sums_of_divisions_terminate(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = sym_var(ctx, "a", 0, 1 << 20);
    const sym_node *s = a;
    for (int i = 1; i < 200; i++) /* ((((a//2)*2 + a%2)//3)*3 + ...) */
        s = sym_add(ctx, sym_mul_c(ctx, sym_floordiv_c(ctx, s, i + 1), i + 1),
                    sym_floormod_c(ctx, s, i + 1));
    CHECK(s, 0, 1 << 20, "a"); /* (s//k)*k + s%k is s */
}

static void test_symbolic_property_tiny_budget_fails_cleanly(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = sym_var(ctx, "a", 0, 100), *b = sym_var(ctx, "b", 0, 7);
    const sym_node *big = sym_add(ctx, sym_mul_c(ctx, a, 8), b);
    sym_ctx_set_budget(ctx, 1);
    const sym_node *r = sym_floordiv_c(ctx, big, 16); /* needs several steps */
    assert_null(r);
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_BUDGET_EXCEEDED);
    assert_null(sym_add_c(ctx, r, 1)); /* NULL propagates */
    sym_ctx_clear_error(ctx);
    sym_ctx_set_budget(ctx, 1000);
    CHECK(sym_floordiv_c(ctx, big, 16), 0, 50, "(a//2)");
}

#define T(name) cmocka_unit_test_setup_teardown(name, sym_test_setup, sym_test_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_symbolic_property_random_expressions_match_reference),
        T(test_symbolic_property_deep_random_nests_within_budget),
        T(test_symbolic_property_extreme_values_overflow_cleanly),
        T(test_symbolic_property_adversarial_nesting_terminates),
        T(test_symbolic_property_deep_sums_of_divisions_terminate),
        T(test_symbolic_property_tiny_budget_fails_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
