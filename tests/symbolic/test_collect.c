/* Collection: sym_mark and sym_collect free exactly the nodes no marked node is built from
 * (Variables excepted), marked nodes keep their values, renderings, hashes and hash-consed
 * identity, ids are never reused, a loop that rebinds a Variable every step runs in constant
 * memory, deep expressions are marked without a stack, and collection never allocates. The
 * random test (seeded; KILN_SYM_SEED overrides) marks random subsets of random expressions
 * and checks every survivor against values computed before the collection. */
#include "sym_test.h"

#include <stdlib.h>

#include "test_alloc.h"

/* ---- helpers ----------------------------------------------------------------------------- */

/* A set of node pointers (open addressing), for counting what marking must keep. */
typedef struct node_set {
    const sym_node **slots;
    size_t cap, len;
} node_set;

static bool set_add(node_set *s, const sym_node *n) {
    if ((s->len + 1) * 2 > s->cap) {
        node_set bigger = {calloc(s->cap ? s->cap * 2 : 64, sizeof(const sym_node *)),
                           s->cap ? s->cap * 2 : 64, 0};
        assert_non_null(bigger.slots);
        for (size_t i = 0; i < s->cap; i++) {
            if (s->slots[i])
                set_add(&bigger, s->slots[i]);
        }
        free(s->slots);
        *s = bigger;
    }
    size_t i = (size_t)((uintptr_t)n >> 4) & (s->cap - 1);
    for (; s->slots[i]; i = (i + 1) & (s->cap - 1)) {
        if (s->slots[i] == n)
            return false;
    }
    s->slots[i] = n;
    s->len++;
    return true;
}

/* Adds n and everything it is built from (an explicit stack: expressions may be deep). */
static void set_add_closure(node_set *s, const sym_node *n) {
    size_t cap = 64, len = 0;
    const sym_node **stack = malloc(cap * sizeof *stack);
    assert_non_null(stack);
    if (n)
        stack[len++] = n;
    while (len > 0) {
        const sym_node *x = stack[--len];
        if (!set_add(s, x))
            continue;
        for (uint32_t i = 0; i < sym_node_arity(x); i++) {
            if (len == cap) {
                stack = realloc(stack, (cap *= 2) * sizeof *stack);
                assert_non_null(stack);
            }
            stack[len++] = sym_node_src(x, i);
        }
    }
    free(stack);
}

static void set_free(node_set *s) {
    free(s->slots);
    *s = (node_set){0};
}

static int64_t eval1(const sym_node *n, const sym_node *var, int64_t value) {
    sym_assignment a = {&var, &value, var ? 1 : 0};
    base_error err = {0};
    int64_t out = 0;
    assert_int_equal(sym_eval(n, &a, &out, &err), KILN_OK);
    return out;
}

static void assert_renders(const sym_node *n, const char *want) {
    char buf[256];
    assert_string_equal(sym_str(n, buf, sizeof buf), want);
}

/* ---- basic behaviour --------------------------------------------------------------------- */

/* Marked nodes and their operands survive with their values, renderings and identity; every
 * other node but the Variables is freed, and the count says how many. */
static void test_symbolic_collect_frees_exactly_the_unmarked(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = sym_var(ctx, "x", 0, 100), *y = sym_var(ctx, "y", 1, 16);
    const sym_node *keep = sym_floordiv_c(ctx, sym_add_c(ctx, sym_mul_c(ctx, x, 4), 3), 2);
    const sym_node *drop = sym_add_c(ctx, sym_min(ctx, x, y), 5);
    const sym_node *bound = sym_bind(ctx, y, 7);
    const sym_node *keep2 = sym_floormod(ctx, x, bound);
    assert_non_null(drop);
    assert_int_equal(sym_ctx_status(ctx), KILN_OK);
    uint64_t built = sym_ctx_node_count(ctx), live = sym_ctx_live_nodes(ctx);
    assert_int_equal(live, built); /* nothing freed yet */
    uint64_t keep_hash = sym_node_hash(keep), keep_id = sym_node_id(keep);
    assert_renders(keep, "((x*2)+1)");
    assert_renders(keep2, "(x%(y:=7))");

    node_set reach = {0};
    set_add_closure(&reach, keep);
    set_add_closure(&reach, keep2);
    set_add(&reach, x);
    set_add(&reach, y);
    sym_mark(ctx, keep);
    sym_mark(ctx, keep2);
    sym_mark(ctx, keep); /* again: no effect */
    sym_mark(ctx, NULL);
    sym_mark(NULL, keep);
    size_t freed = sym_collect(ctx);
    assert_int_equal(freed, live - reach.len);
    assert_int_equal(sym_ctx_live_nodes(ctx), reach.len);
    assert_int_equal(sym_ctx_node_count(ctx), built); /* statistics of what was ever built */
    set_free(&reach);

    assert_renders(keep, "((x*2)+1)");
    assert_renders(keep2, "(x%(y:=7))");
    assert_int_equal(sym_node_hash(keep), keep_hash);
    assert_int_equal(sym_node_id(keep), keep_id);
    assert_int_equal(eval1(keep, x, 10), 21);
    assert_int_equal(eval1(keep2, x, 10), 3);
    /* Hash-consing finds the survivors again. */
    assert_ptr_equal(sym_floordiv_c(ctx, sym_add_c(ctx, sym_mul_c(ctx, x, 4), 3), 2), keep);
    assert_ptr_equal(sym_bind(ctx, y, 7), bound);
    assert_ptr_equal(sym_floormod(ctx, x, bound), keep2);
    assert_ptr_equal(sym_var(ctx, "x", 0, 100), x);
    /* A freed expression is simply built again, as a new node. */
    const sym_node *again = sym_add_c(ctx, sym_min(ctx, x, y), 5);
    assert_non_null(again);
    assert_true(sym_node_id(again) >= built);
    assert_renders(again, "(min(x, y)+5)");
    assert_int_equal(
        eval1(sym_substitute(ctx, again, &y, (const sym_node *[]){sym_const(ctx, 3)}, 1), x, 10),
        8);
    assert_int_equal(sym_ctx_status(ctx), KILN_OK);
}

/* Marks last one cycle: a node marked before one collection and not before the next goes. */
static void test_symbolic_collect_marks_last_one_cycle(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = sym_var(ctx, "x", 0, 100);
    const sym_node *e = sym_floordiv_c(ctx, sym_add_c(ctx, x, 7), 3);
    const sym_node *other = sym_floormod_c(ctx, sym_add_c(ctx, x, 2), 3);
    assert_non_null(other);
    uint64_t live = sym_ctx_live_nodes(ctx);
    node_set reach = {0};
    set_add_closure(&reach, e);
    sym_mark(ctx, e);
    assert_int_equal(sym_collect(ctx), live - reach.len);
    assert_int_equal(sym_ctx_live_nodes(ctx), reach.len);
    assert_int_equal(eval1(e, x, 8), 5);
    assert_int_equal(sym_collect(ctx), reach.len - 1); /* all but x */
    assert_int_equal(sym_ctx_live_nodes(ctx), 1);
    assert_int_equal(sym_collect(ctx), 0);
    set_free(&reach);
}

/* The small constants sym_make_const finds without hashing (SYM_SMALL_MIN..SYM_SMALL_MAX) are
 * nodes like any other: one a collection frees is built anew when asked for again (a live node,
 * never the freed slot, which AddressSanitizer poisons), a marked one stays the same node, and
 * large constants are found by hash as before. */
static void test_symbolic_collect_small_constants_are_rebuilt(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *five = sym_const(ctx, 5), *neg = sym_const(ctx, -64),
                   *big = sym_const(ctx, 1024);
    assert_ptr_equal(sym_const(ctx, 5), five);
    assert_ptr_equal(sym_const(ctx, 1024), big);
    uint64_t id = sym_node_id(five);
    sym_mark(ctx, neg);
    assert_int_equal(sym_collect(ctx), 2); /* 5 and 1024 */
    assert_int_equal(sym_ctx_live_nodes(ctx), 1);
    assert_ptr_equal(sym_const(ctx, -64), neg);
    const sym_node *again = sym_const(ctx, 5);
    int64_t v = 0;
    assert_true(sym_is_const(again, &v) && v == 5);
    assert_true(sym_node_id(again) > id);
    assert_int_equal(sym_ctx_live_nodes(ctx), 2);
    const sym_node *x = sym_var(ctx, "x", 0, 9);
    assert_int_equal(eval1(sym_add(ctx, x, again), x, 4), 9);
}

/* With nothing marked, everything but the Variables goes; Variables are still found by name,
 * and a bound node built afterwards still has its Variable's name. */
static void test_symbolic_collect_keeps_variables_only(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *n = sym_var(ctx, "n", 1, 1024), *m = sym_var(ctx, "m", 0, 3);
    for (int64_t v = 1; v <= 50; v++)
        assert_non_null(sym_mul(ctx, sym_add_c(ctx, sym_bind(ctx, n, v), 1), m));
    assert_true(sym_ctx_live_nodes(ctx) > 100);
    assert_true(sym_collect(ctx) > 100);
    assert_int_equal(sym_ctx_live_nodes(ctx), 2);
    assert_ptr_equal(sym_var(ctx, "n", 1, 1024), n);
    assert_ptr_equal(sym_var(ctx, "m", 0, 3), m);
    const sym_node *b = sym_bind(ctx, n, 9);
    const char *name = NULL;
    assert_true(sym_var_info(b, &name, NULL, NULL));
    assert_string_equal(name, "n");
    assert_renders(sym_add(ctx, b, m), "(m+(n:=9))"); /* b is newer than m */
    assert_int_equal(sym_collect(ctx), 2);            /* the bound node and the sum */
}

/* Ids only grow: a node built again after its collection gets a new id, and the canonical
 * order of terms follows the new ids (the value is the same). Hashes are structural: they
 * follow the canonical form, never the ids. */
static void test_symbolic_collect_ids_never_reused_order_follows_ids(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = sym_var(ctx, "a", 0, 99), *b = sym_var(ctx, "b", 0, 99);
    const sym_node *vars[] = {a, b};
    const sym_node *fa = sym_floordiv_c(ctx, a, 4), *fb = sym_floordiv_c(ctx, b, 4);
    const sym_node *s = sym_add(ctx, fa, fb);
    assert_renders(s, "((a//4)+(b//4))");
    uint64_t hash = sym_node_hash(s), next = sym_ctx_node_count(ctx);
    assert_int_equal(sym_collect(ctx), 4);

    const sym_node *gb = sym_floordiv_c(ctx, b, 4), *ga = sym_floordiv_c(ctx, a, 4);
    assert_true(sym_node_id(gb) >= next && sym_node_id(ga) > sym_node_id(gb));
    const sym_node *t = sym_add(ctx, ga, gb);
    assert_renders(t, "((b//4)+(a//4))");
    assert_true(sym_node_hash(t) != hash);
    int64_t values[] = {13, 42};
    sym_assignment as = {vars, values, 2};
    int64_t v = 0;
    assert_int_equal(sym_eval(t, &as, &v, NULL), KILN_OK);
    assert_int_equal(v, 3 + 10);

    /* Built in the original order after the collection: the original form and hash. */
    assert_int_equal(sym_collect(ctx), 4);
    const sym_node *ha = sym_floordiv_c(ctx, a, 4);
    const sym_node *u = sym_add(ctx, ha, sym_floordiv_c(ctx, b, 4));
    assert_renders(u, "((a//4)+(b//4))");
    assert_int_equal(sym_node_hash(u), hash);
}

/* The same expressions in a fresh context and in one that built and collected many nodes
 * first (so every id differs) have the same hashes. */
static void test_symbolic_collect_hashes_do_not_depend_on_ids(void **state) {
    (void)state;
    sym_ctx *c1 = NULL, *c2 = NULL;
    assert_int_equal(sym_ctx_create(NULL, &c1), KILN_OK);
    assert_int_equal(sym_ctx_create(NULL, &c2), KILN_OK);
    const sym_node *n2 = sym_var(c2, "n", 1, 4096);
    for (int64_t i = 1; i <= 300; i++)
        sym_floormod_c(c2, sym_mul_c(c2, sym_bind(c2, n2, i), 3), 5);
    assert_true(sym_collect(c2) >= 300);
    sym_ctx *cs[] = {c1, c2};
    uint64_t h[2][3];
    for (int k = 0; k < 2; k++) {
        sym_ctx *c = cs[k];
        const sym_node *n = sym_var(c, "n", 1, 4096), *i = sym_var(c, "i", 0, 63);
        const sym_node *e1 = sym_floordiv_c(c, sym_add_c(c, sym_mul_c(c, n, 4), 3), 2);
        const sym_node *ni = sym_mul(c, n, i); /* one statement each: a fixed order */
        const sym_node *e2 = sym_add(c, ni, sym_floormod_c(c, i, 8));
        const sym_node *cond = sym_lt(c, i, sym_bind(c, n, 17));
        const sym_node *e3 = sym_where(c, cond, e2, sym_min(c, n, i));
        h[k][0] = sym_node_hash(e1);
        h[k][1] = sym_node_hash(e2);
        h[k][2] = sym_node_hash(e3);
        assert_int_equal(sym_ctx_status(c), KILN_OK);
    }
    assert_true(sym_ctx_node_count(c2) > sym_ctx_node_count(c1) + 300);
    for (int j = 0; j < 3; j++)
        assert_int_equal(h[0][j], h[1][j]);
    sym_ctx_destroy(c1);
    sym_ctx_destroy(c2);
}

/* A long-running program: every step binds a Variable to a new value and builds a few
 * expressions from it; each step collects, marking only a fixed set. The allocator's live
 * bytes and blocks are flat after the first steps, over 100,000 steps. */
static void test_symbolic_collect_rebinding_loop_runs_in_constant_memory(void **state) {
    (void)state;
    enum { STEPS = 100000, WARM = 100 };
    test_alloc st = {0};
    base_allocator al = test_allocator(&st);
    sym_ctx *c = NULL;
    assert_int_equal(sym_ctx_create(&al, &c), KILN_OK);
    const sym_node *n = sym_var(c, "n", 1, 1 << 20), *m = sym_var(c, "m", 0, 64);
    const sym_node *keep = sym_floordiv_c(c, sym_add_c(c, sym_mul_c(c, n, 4), 3), 2);
    size_t warm_bytes = 0, warm_ctx_bytes = 0;
    long warm_blocks = 0;
    uint64_t warm_live = 0;
    for (int64_t i = 0; i < STEPS; i++) {
        int64_t v = i % (1 << 20) + 1;
        const sym_node *b = sym_bind(c, n, v);
        const sym_node *e1 = sym_floordiv_c(c, sym_add_c(c, sym_mul_c(c, b, 4), 3), 2);
        const sym_node *e2 = sym_min(c, b, sym_const(c, 7));
        const sym_node *e3 = sym_floormod_c(c, sym_add(c, e1, sym_mul(c, m, e2)), 5);
        if (i % 4096 == 0) {
            assert_int_equal(eval1(e1, NULL, 0), (v * 4 + 3) / 2);
            assert_int_equal(eval1(e2, NULL, 0), v < 7 ? v : 7);
            assert_int_equal(eval1(e3, m, 3), ((v * 4 + 3) / 2 + 3 * (v < 7 ? v : 7)) % 5);
            const sym_node *bv[1];
            int64_t bval[1];
            size_t found = 0;
            assert_ptr_equal(sym_unbind_all(c, e1, bv, bval, 1, &found), keep);
            assert_int_equal(found, 1);
            assert_int_equal(bval[0], v);
        }
        sym_mark(c, keep);
        assert_true(sym_collect(c) >= 5);
        if (i == WARM) {
            warm_bytes = st.live_bytes;
            warm_blocks = st.live_blocks;
            warm_live = sym_ctx_live_nodes(c);
            warm_ctx_bytes = sym_ctx_bytes(c);
        } else if (i > WARM &&
                   (st.live_bytes != warm_bytes || st.live_blocks != warm_blocks ||
                    sym_ctx_live_nodes(c) != warm_live || sym_ctx_bytes(c) != warm_ctx_bytes)) {
            fail_msg("step %lld: %zu bytes in %ld blocks, %llu nodes (after %d steps: %zu bytes "
                     "in %ld blocks, %llu nodes)",
                     (long long)i, st.live_bytes, st.live_blocks,
                     (unsigned long long)sym_ctx_live_nodes(c), WARM, warm_bytes, warm_blocks,
                     (unsigned long long)warm_live);
        }
    }
    assert_int_equal(sym_ctx_status(c), KILN_OK);
    assert_true(sym_ctx_node_count(c) > 4 * (uint64_t)STEPS);
    assert_true(warm_ctx_bytes <= warm_bytes + 1024); /* sym_ctx_bytes is what is held */
    assert_true(warm_ctx_bytes * 2 > warm_bytes);
    sym_ctx_destroy(c);
    assert_int_equal(st.live_blocks, 0);
    assert_int_equal(st.size_mismatches, 0);
}

/* The operand of p that is not a leaf (NULL when there is none). */
static const sym_node *inner(const sym_node *p) {
    for (uint32_t i = 0; i < sym_node_arity(p); i++) {
        if (sym_node_arity(sym_node_src(p, i)) > 0)
            return sym_node_src(p, i);
    }
    return NULL;
}

/* An expression 100,000 nodes deep is marked without a stack, its operands intact after the
 * walk (marking reverses them on the way down and restores them on the way up). */
static void test_symbolic_collect_marks_deep_expression(void **state) {
    sym_ctx *ctx = *state;
    enum { DEPTH = 50000 };
    const sym_node *x = sym_var(ctx, "x", 0, 3), *y = sym_var(ctx, "y", 0, 2);
    const sym_node *e = x;
    for (int i = 0; i < DEPTH; i++) /* ((e + x) % 7 + y) % 5 ... */
        e = sym_floormod_c(ctx, sym_add(ctx, e, i % 2 ? y : x), i % 2 ? 5 : 7);
    assert_int_equal(sym_ctx_status(ctx), KILN_OK);
    const sym_node **chain = malloc(2 * DEPTH * sizeof *chain);
    assert_non_null(chain);
    size_t len = 0;
    for (const sym_node *p = e; p && len < 2 * DEPTH; p = inner(p))
        chain[len++] = p;
    assert_true(len > 2 * DEPTH - 8); /* (almost) nothing folded: mod, add, mod, add, ... */
    node_set reach = {0};
    set_add_closure(&reach, e);
    sym_mark(ctx, e);
    sym_collect(ctx);
    assert_int_equal(sym_ctx_live_nodes(ctx), reach.len);
    size_t i = 0;
    for (const sym_node *p = e; p && i < len; p = inner(p), i++)
        assert_ptr_equal(p, chain[i]);
    assert_int_equal(i, len);
    sym_mark(ctx, e); /* each node once per cycle; a second call is O(1) */
    sym_mark(ctx, e);
    assert_int_equal(sym_collect(ctx), 0);
    assert_int_equal(sym_collect(ctx), reach.len - 2); /* all but x and y */
    set_free(&reach);
    free(chain);
}

/* Marking and collecting never allocate, so they cannot fail: with the next allocation set to
 * fail, cycles over several slabs free what they should, keep what was marked and attempt no
 * allocation at all (the fail-the-Nth-allocation loop below covers building between cycles). */
static void test_symbolic_collect_never_allocates(void **state) {
    (void)state;
    test_alloc st = {0};
    base_allocator al = test_allocator(&st);
    sym_ctx *c = NULL;
    assert_int_equal(sym_ctx_create(&al, &c), KILN_OK);
    const sym_node *x = sym_var(c, "x", 0, 1000);
    const sym_node *keep = x;
    for (int i = 1; i < 2000; i++) /* several slabs, a grown table */
        keep = sym_add(c, keep, sym_floordiv_c(c, sym_mul_c(c, x, i), i + 1));
    for (int i = 0; i < 3000; i++)
        sym_floormod_c(c, sym_add_c(c, x, i), 7);
    assert_int_equal(sym_ctx_status(c), KILN_OK);
    int64_t want = eval1(keep, x, 321);
    long count = st.count;
    st.fail_at = count + 1;
    sym_mark(c, keep);
    assert_true(sym_collect(c) >= 3000);
    assert_true(sym_collect(c) > 0);
    sym_mark(c, x);
    assert_int_equal(sym_collect(c), 0);
    assert_int_equal(st.count, count);
    assert_int_equal(sym_ctx_status(c), KILN_OK);
    st.fail_at = 0;
    assert_int_equal(sym_ctx_live_nodes(c), 1);
    keep = x;
    for (int i = 1; i < 2000; i++)
        keep = sym_add(c, keep, sym_floordiv_c(c, sym_mul_c(c, x, i), i + 1));
    assert_int_equal(eval1(keep, x, 321), want);
    sym_ctx_destroy(c);
    assert_int_equal(st.live_blocks, 0);
}

/* ---- fail the Nth allocation ------------------------------------------------------------- */

typedef struct cworkload {
    const sym_node *x, *y;
    const sym_node *result;
} cworkload;

/* Rounds that each build a few hundred nodes (new slabs, a growing table, slots that a
 * collection freed), keep a running expression and collect. */
static void run_collect_workload(sym_ctx *c, cworkload *w) {
    w->x = sym_var(c, "x", 0, 100);
    w->y = sym_var(c, "y", 1, 16);
    const sym_node *keep = sym_const(c, 1);
    for (int64_t round = 0; round < 4; round++) {
        const sym_node *b = sym_bind(c, w->y, round + 2), *acc = sym_const(c, round);
        for (int64_t i = 0; i < 40; i++)
            acc = sym_add(
                c, acc, sym_floordiv_c(c, sym_add(c, sym_mul_c(c, w->x, i + 1), b), i + 2 + round));
        keep = sym_add(c, sym_mul_c(c, keep, 3), sym_floormod_c(c, acc, 97));
        sym_mark(c, keep);
        sym_mark(c, w->result);
        sym_collect(c);
        w->result = keep;
    }
}

static void test_symbolic_collect_fail_nth_allocation_cleanly(void **state) {
    (void)state;
    test_alloc clean = {0};
    base_allocator ca = test_allocator(&clean);
    sym_ctx *c = NULL;
    cworkload ref = {0};
    assert_int_equal(sym_ctx_create(&ca, &c), KILN_OK);
    run_collect_workload(c, &ref);
    assert_non_null(ref.result);
    assert_int_equal(sym_ctx_status(c), KILN_OK);
    int64_t want = eval1(ref.result, ref.x, 37);
    sym_ctx_destroy(c);
    long total = clean.count;
    assert_true(total > 5);

    for (long n = 1; n <= total + 1; n++) {
        test_alloc st = {.fail_at = n};
        base_allocator a = test_allocator(&st);
        c = NULL;
        kiln_status cs = sym_ctx_create(&a, &c);
        if (cs == KILN_OK) {
            cworkload w = {0};
            run_collect_workload(c, &w);
            assert_int_equal(sym_ctx_status(c),
                             st.failures ? KILN_ERROR_OUT_OF_HOST_MEMORY : KILN_OK);
            if (w.result) /* whatever was produced is still right */
                assert_int_equal(eval1(w.result, w.x, 37), want);
            sym_collect(c); /* nothing marked: only the Variables that were made stay */
            assert_int_equal(sym_ctx_live_nodes(c), (w.x != NULL) + (w.y != NULL));
            sym_ctx_destroy(c);
        } else {
            assert_int_equal(cs, KILN_ERROR_OUT_OF_HOST_MEMORY);
        }
        assert_int_equal(st.failures, n <= total);
        assert_int_equal(st.live_blocks, 0);
        assert_int_equal(st.live_bytes, 0);
        assert_int_equal(st.size_mismatches, 0);
    }
}

/* ---- random expressions, random subsets marked -------------------------------------------- */

enum { FZ_VARS = 3, FZ_POOL = 160, FZ_ASSIGN = 6, FZ_ROUNDS = 60 };

typedef enum fz_op {
    FZ_CONST,
    FZ_VAR,
    FZ_BIND,
    FZ_ADD,
    FZ_SUB,
    FZ_MUL,
    FZ_MULC,
    FZ_DIVC,
    FZ_MODC,
    FZ_DIV,
    FZ_MOD,
    FZ_MIN,
    FZ_MAX,
    FZ_LT,
    FZ_EQ,
    FZ_AND,
    FZ_NOT,
    FZ_WHERE,
    FZ_OP_COUNT
} fz_op;

/* An expression of the pool: the constructor call that made it, and what it was before any
 * collection (values under each assignment, evaluation statuses, hash, rendering). */
typedef struct fz_entry {
    fz_op op;
    int64_t k;
    const sym_node *a, *b, *c; /* operands, held by the test (marked with the entry) */
    const sym_node *node;
    kiln_status status[FZ_ASSIGN];
    int64_t value[FZ_ASSIGN];
    uint64_t hash, text_hash;
} fz_entry;

typedef struct fuzz {
    sym_ctx *ctx;
    uint64_t rng;
    const sym_node *vars[FZ_VARS];
    int64_t lo[FZ_VARS], hi[FZ_VARS];
    int64_t values[FZ_ASSIGN][FZ_VARS];
    fz_entry pool[FZ_POOL];
    size_t len;
} fuzz;

static uint64_t fz_next(fuzz *f) { /* splitmix64 */
    uint64_t z = (f->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int64_t fz_rnd(fuzz *f, int64_t lo, int64_t hi) { /* inclusive, small ranges */
    return lo + (int64_t)(fz_next(f) % (uint64_t)(hi - lo + 1));
}

static const sym_node *fz_call(sym_ctx *c, const fz_entry *e) {
    switch (e->op) {
    case FZ_CONST:
        return sym_const(c, e->k);
    case FZ_VAR:
        return e->a;
    case FZ_BIND:
        return sym_bind(c, e->a, e->k);
    case FZ_ADD:
        return sym_add(c, e->a, e->b);
    case FZ_SUB:
        return sym_sub(c, e->a, e->b);
    case FZ_MUL:
        return sym_mul(c, e->a, e->b);
    case FZ_MULC:
        return sym_mul_c(c, e->a, e->k);
    case FZ_DIVC:
        return sym_floordiv_c(c, e->a, e->k);
    case FZ_MODC:
        return sym_floormod_c(c, e->a, e->k);
    case FZ_DIV:
        return sym_floordiv(c, e->a, e->b);
    case FZ_MOD:
        return sym_floormod(c, e->a, e->b);
    case FZ_MIN:
        return sym_min(c, e->a, e->b);
    case FZ_MAX:
        return sym_max(c, e->a, e->b);
    case FZ_LT:
        return sym_lt(c, e->a, e->b);
    case FZ_EQ:
        return sym_eq(c, e->a, e->b);
    case FZ_AND:
        return sym_and(c, e->a, e->b);
    case FZ_NOT:
        return sym_not(c, e->a);
    case FZ_WHERE:
        return sym_where(c, e->a, e->b, e->c);
    default:
        return NULL;
    }
}

static uint64_t fz_text_hash(const sym_node *n) {
    size_t len = sym_render(n, NULL, 0);
    char *buf = malloc(len + 1);
    assert_non_null(buf);
    sym_render(n, buf, len + 1);
    uint64_t h = base_hash_bytes(buf, len, 0);
    free(buf);
    return h;
}

static const sym_node *fz_operand(fuzz *f) {
    if (f->len == 0 || fz_rnd(f, 0, 4) == 0)
        return f->vars[fz_rnd(f, 0, FZ_VARS - 1)];
    return f->pool[fz_rnd(f, 0, (int64_t)f->len - 1)].node;
}

/* Adds one random expression built from the pool; false when its construction failed (an
 * overflowing bound: the error is cleared). */
static bool fz_add(fuzz *f) {
    fz_entry *e = &f->pool[f->len];
    *e = (fz_entry){.op = (fz_op)fz_rnd(f, 0, FZ_OP_COUNT - 1)};
    int v = (int)fz_rnd(f, 0, FZ_VARS - 1);
    e->k = e->op == FZ_CONST  ? fz_rnd(f, -20, 20)
           : e->op == FZ_BIND ? fz_rnd(f, f->lo[v], f->hi[v])
                              : fz_rnd(f, 2, 9) * (fz_rnd(f, 0, 3) ? 1 : -1);
    e->a = e->op == FZ_VAR || e->op == FZ_BIND ? f->vars[v] : fz_operand(f);
    e->b = fz_operand(f);
    e->c = fz_operand(f);
    e->node = fz_call(f->ctx, e);
    if (!e->node) {
        sym_ctx_clear_error(f->ctx);
        return false;
    }
    for (int i = 0; i < FZ_ASSIGN; i++) {
        sym_assignment as = {f->vars, f->values[i], FZ_VARS};
        e->status[i] = sym_eval(e->node, &as, &e->value[i], NULL);
    }
    e->hash = sym_node_hash(e->node);
    e->text_hash = fz_text_hash(e->node);
    f->len++;
    return true;
}

static void fz_check(fuzz *f, const fz_entry *e) {
    for (int i = 0; i < FZ_ASSIGN; i++) {
        sym_assignment as = {f->vars, f->values[i], FZ_VARS};
        int64_t v = 0;
        assert_int_equal(sym_eval(e->node, &as, &v, NULL), e->status[i]);
        if (e->status[i] == KILN_OK)
            assert_int_equal(v, e->value[i]);
    }
    assert_int_equal(sym_node_hash(e->node), e->hash);
    assert_int_equal(fz_text_hash(e->node), e->text_hash);
}

static void test_symbolic_collect_random_subsets_survive(void **state) {
    (void)state;
    fuzz *f = calloc(1, sizeof *f);
    assert_non_null(f);
    const char *seed = getenv("KILN_SYM_SEED");
    f->rng = seed ? strtoull(seed, NULL, 0) : 0x636f6c6c656374ULL;
    assert_int_equal(sym_ctx_create(NULL, &f->ctx), KILN_OK);
    static const char *const names[FZ_VARS] = {"x", "y", "z"};
    static const int64_t lo[FZ_VARS] = {0, -10, 1}, hi[FZ_VARS] = {50, 10, 8};
    for (int v = 0; v < FZ_VARS; v++) {
        f->vars[v] = sym_var(f->ctx, names[v], lo[v], hi[v]);
        f->lo[v] = lo[v];
        f->hi[v] = hi[v];
        for (int i = 0; i < FZ_ASSIGN; i++)
            f->values[i][v] = fz_rnd(f, lo[v], hi[v]);
    }
    size_t total_freed = 0, rebuilt_same = 0;
    for (int round = 0; round < FZ_ROUNDS; round++) {
        for (int tries = 0; f->len < FZ_POOL && tries < 4 * FZ_POOL; tries++)
            fz_add(f);
        assert_int_equal(sym_ctx_status(f->ctx), KILN_OK);
        /* Keep a random subset (none every tenth round); the test marks what it holds. */
        int64_t keep_in_4 = round % 10 == 9 ? 0 : fz_rnd(f, 1, 3);
        node_set reach = {0};
        size_t kept = 0;
        for (int v = 0; v < FZ_VARS; v++)
            set_add(&reach, f->vars[v]);
        for (size_t i = 0; i < f->len; i++) {
            if (fz_rnd(f, 0, 3) >= keep_in_4)
                continue;
            fz_entry *e = &f->pool[i];
            const sym_node *held[] = {e->node, e->a, e->b, e->c};
            for (int j = 0; j < 4; j++) {
                sym_mark(f->ctx, held[j]);
                set_add_closure(&reach, held[j]);
            }
            f->pool[kept++] = *e;
        }
        uint64_t live = sym_ctx_live_nodes(f->ctx);
        size_t freed = sym_collect(f->ctx);
        assert_int_equal(freed, live - reach.len);
        assert_int_equal(sym_ctx_live_nodes(f->ctx), reach.len);
        total_freed += freed;
        set_free(&reach);
        f->len = kept;
        for (size_t i = 0; i < f->len; i++) {
            fz_entry *e = &f->pool[i];
            fz_check(f, e);
            /* Built again from its operands: hash-consing returns the marked node. */
            const sym_node *again = fz_call(f->ctx, e);
            assert_ptr_equal(again, e->node);
            rebuilt_same++;
        }
        assert_int_equal(sym_ctx_status(f->ctx), KILN_OK);
    }
    assert_true(total_freed > FZ_POOL * FZ_ROUNDS / 2);
    assert_true(rebuilt_same > FZ_POOL * FZ_ROUNDS / 8);
    sym_ctx_destroy(f->ctx);
    free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_symbolic_collect_frees_exactly_the_unmarked,
                                        sym_test_setup, sym_test_teardown),
        cmocka_unit_test_setup_teardown(test_symbolic_collect_marks_last_one_cycle, sym_test_setup,
                                        sym_test_teardown),
        cmocka_unit_test_setup_teardown(test_symbolic_collect_small_constants_are_rebuilt,
                                        sym_test_setup, sym_test_teardown),
        cmocka_unit_test_setup_teardown(test_symbolic_collect_keeps_variables_only, sym_test_setup,
                                        sym_test_teardown),
        cmocka_unit_test_setup_teardown(test_symbolic_collect_ids_never_reused_order_follows_ids,
                                        sym_test_setup, sym_test_teardown),
        cmocka_unit_test(test_symbolic_collect_hashes_do_not_depend_on_ids),
        cmocka_unit_test(test_symbolic_collect_rebinding_loop_runs_in_constant_memory),
        cmocka_unit_test_setup_teardown(test_symbolic_collect_marks_deep_expression, sym_test_setup,
                                        sym_test_teardown),
        cmocka_unit_test(test_symbolic_collect_never_allocates),
        cmocka_unit_test(test_symbolic_collect_fail_nth_allocation_cleanly),
        cmocka_unit_test(test_symbolic_collect_random_subsets_survive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
