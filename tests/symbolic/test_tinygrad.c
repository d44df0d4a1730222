/* The cases of tinygrad's test/unit/test_symbolic.py that apply to Kiln, rewritten in C.
 * Renderings follow Kiln's format (sym.h): a sum's constant comes last ("(a+1)", tinygrad
 * writes "(1+a)"), terms are ordered by creation id, and a // b is floor division throughout
 * (tinygrad's old test_div_neg_min_max expected truncation-like bounds; ours are exact).
 * Cases not applicable: Variables with symbolic bounds (Variable("idx0", 0, i*3-1)), pickling,
 * a Variable of range [2, 2] becoming a number (Kiln keeps Variables so that they can be bound). */
#include "sym_test.h"

#define VAR(name, lo, hi) sym_var(ctx, name, lo, hi)
#define K(v) sym_const(ctx, v)

static void test_symbolic_tinygrad_ge(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 3, 8);
    CHECK(sym_ge(ctx, a, K(77)), 0, 0, "0");
    CHECK(sym_ge(ctx, a, K(9)), 0, 0, "0");
    CHECK(sym_ge(ctx, a, K(8)), 0, 1, "((a*-1)<-7)");
    CHECK(sym_ge(ctx, a, K(4)), 0, 1, "((a*-1)<-3)");
    CHECK(sym_ge(ctx, a, K(3)), 1, 1, "1");
    CHECK(sym_ge(ctx, a, K(2)), 1, 1, "1");
}

static void test_symbolic_tinygrad_lt(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 3, 8);
    CHECK(sym_lt_c(ctx, a, 77), 1, 1, "1");
    CHECK(sym_lt_c(ctx, a, 9), 1, 1, "1");
    CHECK(sym_lt_c(ctx, a, 8), 0, 1, "(a<8)");
    CHECK(sym_lt_c(ctx, a, 4), 0, 1, "(a<4)");
    CHECK(sym_lt_c(ctx, a, 3), 0, 0, "0");
    CHECK(sym_lt_c(ctx, a, 2), 0, 0, "0");
}

static void test_symbolic_tinygrad_ge_divides(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *idx = VAR("idx", 0, 511), *f4 = VAR("FLOAT4_INDEX", 0, 3);
    CHECK(sym_lt_c(ctx, sym_add(ctx, sym_mul_c(ctx, idx, 4), f4), 512), 0, 1, "(idx<128)");
}

static void test_symbolic_tinygrad_ge_divides_and(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *i1 = VAR("idx1", 0, 511), *i2 = VAR("idx2", 0, 511);
    const sym_node *f4 = VAR("FLOAT4_INDEX", 0, 3);
    const sym_node *c1 = sym_lt_c(ctx, sym_add(ctx, sym_mul_c(ctx, i1, 4), f4), 512);
    const sym_node *c2 = sym_lt_c(ctx, sym_add(ctx, sym_mul_c(ctx, i2, 4), f4), 512);
    CHECK(sym_and(ctx, c1, c2), 0, 1, "((idx1<128) and (idx2<128))");
    CHECK(sym_and(ctx, c2, c1), 0, 1, "((idx1<128) and (idx2<128))");
}

static void test_symbolic_tinygrad_lt_factors(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *i1 = VAR("idx1", 0, 511), *f4 = VAR("FLOAT4_INDEX", 0, 256);
    CHECK(sym_lt_c(ctx, sym_add(ctx, sym_mul_c(ctx, i1, 4), f4), 512), 0, 1,
          "(((idx1*4)+FLOAT4_INDEX)<512)");
}

static void test_symbolic_tinygrad_div_becomes_num(void **state) {
    sym_ctx *ctx = *state;
    int64_t v = -1;
    assert_true(sym_is_const(sym_floordiv_c(ctx, VAR("a", 2, 3), 2), &v));
    assert_int_equal(v, 1);
}

static void test_symbolic_tinygrad_equality(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *i1 = VAR("idx1", 0, 3), *i2 = VAR("idx2", 0, 3);
    assert_ptr_equal(i1, VAR("idx1", 0, 3));
    assert_ptr_not_equal(i1, i2);
    assert_ptr_equal(sym_mul_c(ctx, i1, 4), sym_mul_c(ctx, i1, 4));
    assert_ptr_not_equal(sym_mul_c(ctx, i1, 4), sym_mul_c(ctx, i1, 3));
    assert_ptr_not_equal(sym_mul_c(ctx, i1, 4), sym_add_c(ctx, i1, 4));
    assert_ptr_not_equal(sym_mul_c(ctx, i1, 4), sym_mul_c(ctx, i2, 4));
    assert_ptr_equal(sym_add(ctx, i1, i2), sym_add(ctx, i2, i1));
    assert_ptr_not_equal(sym_add(ctx, i1, i2), i2);
    assert_ptr_equal(sym_mul(ctx, i1, i2), sym_mul(ctx, i2, i1));
}

static void test_symbolic_tinygrad_factorize(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 8);
    CHECK(sym_add(ctx, sym_mul_c(ctx, a, 2), sym_mul_c(ctx, a, 3)), 0, 40, "(a*5)");
    CHECK(sym_add(ctx, a, sym_mul_c(ctx, a, 3)), 0, 32, "(a*4)");
}

static void test_symbolic_tinygrad_add_sub_mul(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 8);
    CHECK(sym_neg(ctx, a), -8, 0, "(a*-1)");
    CHECK(sym_add_c(ctx, a, 1), 1, 9, "(a+1)");
    CHECK(sym_add(ctx, a, K(1)), 1, 9, "(a+1)");
    CHECK(sym_add_c(ctx, a, -1), -1, 7, "(a-1)");
    CHECK(sym_sub(ctx, a, K(1)), -1, 7, "(a-1)");
    CHECK(sym_mul_c(ctx, a, 0), 0, 0, "0");
    CHECK(sym_mul_c(ctx, a, 1), 0, 8, "a");
    CHECK(sym_mul_c(ctx, a, 2), 0, 16, "(a*2)");
    CHECK(sym_add_c(ctx, sym_mul_c(ctx, a, 2), 12), 12, 28, "((a*2)+12)");
}

static void test_symbolic_tinygrad_mul_neg_1(void **state) {
    sym_ctx *ctx = *state;
    CHECK(sym_floordiv_c(ctx, sym_mul_c(ctx, VAR("a", 0, 2), -1), 3), -1, 0, "((a*-1)//3)");
}

static void test_symbolic_tinygrad_div_mod_1(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 8);
    CHECK(sym_floordiv_c(ctx, a, 1), 0, 8, "a");
    CHECK(sym_floormod_c(ctx, a, 1), 0, 0, "0");
}

static void test_symbolic_tinygrad_div_min_max(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 7);
    CHECK(sym_floordiv_c(ctx, a, 2), 0, 3, "(a//2)");
    CHECK(sym_floordiv_c(ctx, a, -2), -4, 0, "((a*-1)//2)"); /* floor(-7/2) = -4 */
}

static void test_symbolic_tinygrad_sum_div(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 7), *b = VAR("b", 0, 3);
    CHECK(sym_floordiv_c(ctx, sym_add(ctx, a, b), 2), 0, 5, "((a+b)//2)");
    CHECK(sym_floordiv_c(ctx, sym_add(ctx, sym_mul_c(ctx, a, 4), sym_mul_c(ctx, b, 4)), 2), 0, 20,
          "((a*2)+(b*2))");
    CHECK(sym_floordiv_c(ctx, sym_add(ctx, sym_mul_c(ctx, a, 5), sym_mul_c(ctx, b, 4)), 2), 0, 23,
          "((b*2)+((a*5)//2))");
    CHECK(sym_floordiv_c(ctx, sym_add(ctx, sym_mul_c(ctx, a, 5), sym_mul_c(ctx, b, 5)), 2), 0, 25,
          "(((a*5)+(b*5))//2)");
}

static void test_symbolic_tinygrad_sum_div_some_partial_factor(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 7), *b = VAR("b", 0, 7);
    const sym_node *s = sym_add(ctx, sym_mul_c(ctx, a, 6), sym_mul_c(ctx, b, 6));
    CHECK(sym_floordiv_c(ctx, s, 16), 0, 5, "(((a*3)+(b*3))//8)");
    CHECK(sym_floordiv_c(ctx, sym_add_c(ctx, s, 16), 16), 1, 6, "((((a*3)+(b*3))//8)+1)");
}

static void test_symbolic_tinygrad_mod_factor(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 7), *b = VAR("b", 0, 3);
    /* tinygrad keeps ((b*50)%100) in [0, 99]; the common factor 50 gives exact bounds. */
    CHECK(sym_floormod_c(ctx, sym_add(ctx, sym_mul_c(ctx, a, 100), sym_mul_c(ctx, b, 50)), 100), 0,
          50, "((b%2)*50)");
}

static void test_symbolic_tinygrad_mod_to_sub(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 1, 2);
    CHECK(sym_floormod_c(ctx, sym_add_c(ctx, a, 1), 2), 0, 1, "(a-1)");
}

static void test_symbolic_tinygrad_sum_div_const(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a4 = sym_add_c(ctx, sym_mul_c(ctx, VAR("a", 0, 7), 4), 3);
    CHECK(sym_floordiv_c(ctx, a4, 4), 0, 7, "a");
    CHECK(sym_floordiv_c(ctx, a4, 16), 0, 1, "(a//4)");
}

static void test_symbolic_tinygrad_sum_lt_fold(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 7), *b = VAR("b", 0, 3), *b4 = VAR("b4", 0, 4);
    const sym_node *u = VAR("uidx", 0, 3), *a2 = VAR("a2", 0, 1529);
    CHECK(sym_lt_c(ctx, sym_add(ctx, sym_mul_c(ctx, a, 4), b), 16), 0, 1, "(a<4)");
    CHECK(sym_lt_c(ctx, sym_add(ctx, sym_mul_c(ctx, a, 4), b4), 16), 0, 1, "(((a*4)+b4)<16)");
    CHECK(sym_lt_c(ctx, sym_add(ctx, u, sym_mul_c(ctx, a2, 12)), 4 * 67), 0, 1, "(a2<23)");
}

static void test_symbolic_tinygrad_mod_mul(void **state) {
    sym_ctx *ctx = *state;
    CHECK(sym_floormod_c(ctx, sym_mul_c(ctx, VAR("a", 0, 5), 10), 9), 0, 5, "a");
}

static void test_symbolic_tinygrad_mod_mod(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 31);
    CHECK(sym_floormod_c(ctx, sym_floormod_c(ctx, a, 12), 4), 0, 3, "(a%4)");
    CHECK(sym_floormod_c(ctx, sym_floormod_c(ctx, sym_mul_c(ctx, a, 4), 12), 4), 0, 0, "0");
    CHECK(sym_floormod_c(ctx, sym_floormod_c(ctx, a, 4), 12), 0, 3, "(a%4)");
}

static void test_symbolic_tinygrad_mul_mul(void **state) {
    sym_ctx *ctx = *state;
    CHECK(sym_mul_c(ctx, sym_mul_c(ctx, VAR("a", 0, 5), 10), 9), 0, 450, "(a*90)");
}

static void test_symbolic_tinygrad_mul_lt(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a4 = sym_mul_c(ctx, VAR("a", 0, 5), 4);
    CHECK(sym_lt_c(ctx, a4, 13), 0, 1, "(a<4)");
    CHECK(sym_lt_c(ctx, a4, 16), 0, 1, "(a<4)");
    CHECK(sym_gt(ctx, a4, K(11)), 0, 1, "((a*-1)<-2)");
    CHECK(sym_gt(ctx, a4, K(12)), 0, 1, "((a*-1)<-3)");
}

static void test_symbolic_tinygrad_div_div(void **state) {
    sym_ctx *ctx = *state;
    CHECK(sym_floordiv_c(ctx, sym_floordiv_c(ctx, VAR("a", 0, 1800), 10), 9), 0, 20, "(a//90)");
}

static void test_symbolic_tinygrad_distribute_mul(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 3), *b = VAR("b", 0, 5);
    const sym_node *s = sym_add(ctx, a, b);
    CHECK(sym_mul_c(ctx, s, 3), 0, 24, "((a*3)+(b*3))");
}

static void test_symbolic_tinygrad_mod_mul_sum(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *b = VAR("b", 0, 2), *a = VAR("a", 0, 5);
    CHECK(sym_floormod_c(ctx, sym_add(ctx, b, sym_mul_c(ctx, a, 10)), 9), 0, 7, "(b+a)");
}

static void test_symbolic_tinygrad_mod_remove(void **state) {
    sym_ctx *ctx = *state;
    CHECK(sym_floormod_c(ctx, VAR("a", 0, 6), 100), 0, 6, "a");
    CHECK(sym_floormod_c(ctx, VAR("b", 0, 20), 10), 0, 9, "(b%10)");
}

static void test_symbolic_tinygrad_lt_remove(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 6);
    CHECK(sym_ge(ctx, a, K(25)), 0, 0, "0");
    CHECK(sym_lt_c(ctx, a, -3), 0, 0, "0");
    CHECK(sym_lt_c(ctx, a, 3), 0, 1, "(a<3)");
    CHECK(sym_lt_c(ctx, a, 8), 1, 1, "1");
    CHECK(sym_lt_c(ctx, sym_add_c(ctx, a, 2), 3), 0, 1, "(a<1)");
}

static void test_symbolic_tinygrad_and_fold(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 1);
    CHECK(sym_and(ctx, K(0), a), 0, 0, "0");
    CHECK(sym_and(ctx, K(1), a), 0, 1, "a");
}

static void test_symbolic_tinygrad_mod_factor_negative(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 10), *a2 = VAR("a2", 0, 100), *b = VAR("b", 0, 10);
    const sym_node *b28 = sym_mul_c(ctx, b, 28);
    CHECK(sym_floormod_c(ctx, sym_add(ctx, sym_add_c(ctx, a, -29), b28), 28), 0, 27, "((a+27)%28)");
    CHECK(sym_floormod_c(ctx, sym_add(ctx, sym_add_c(ctx, a2, -29), b28), 28), 0, 27,
          "((a2+27)%28)");
}

static void test_symbolic_tinygrad_sum_combine_num(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 10);
    CHECK(sym_add(ctx, sym_add(ctx, K(29), a), K(-23)), 6, 16, "(a+6)");
    const sym_node *x = VAR("x", 0, 1);
    CHECK(sym_add(ctx, sym_add_c(ctx, sym_mul_c(ctx, x, -4), 1), sym_mul_c(ctx, x, 4)), 1, 1, "1");
}

static void test_symbolic_tinygrad_div_factor(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 10), *b = VAR("b", 0, 10);
    const sym_node *s = sym_add(ctx, sym_mul_c(ctx, a, 2), sym_mul_c(ctx, b, 40));
    CHECK(sym_floordiv_c(ctx, sym_add_c(ctx, s, -40), 40), -1, 9, "(b-1)");
}

static void test_symbolic_tinygrad_mul_div(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 10);
    CHECK(sym_floordiv_c(ctx, sym_mul_c(ctx, a, 4), 4), 0, 10, "a");
    CHECK(sym_floordiv_c(ctx, sym_mul_c(ctx, a, 8), 4), 0, 20, "(a*2)");
    CHECK(sym_floordiv_c(ctx, sym_mul_c(ctx, a, 4), 8), 0, 5, "(a//2)");
}

static void test_symbolic_tinygrad_div_remove(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *i0 = VAR("idx0", 0, 127), *i2 = VAR("idx2", 0, 3);
    CHECK(sym_floordiv_c(ctx, sym_add(ctx, sym_mul_c(ctx, i0, 4), i2), 4), 0, 127, "idx0");
}

static void test_symbolic_tinygrad_div_numerator_negative(void **state) {
    sym_ctx *ctx = *state;
    CHECK(sym_floordiv_c(ctx, sym_mul_c(ctx, VAR("idx", 0, 9), -10), 11), -9, 0, "((idx*-10)//11)");
}

static void test_symbolic_tinygrad_div_into_mod(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *m = sym_floormod_c(ctx, sym_mul_c(ctx, VAR("idx", 0, 16), 4), 8);
    CHECK(sym_floordiv_c(ctx, m, 4), 0, 1, "(idx%2)");
}

/* TestSymbolicNumeric: for every constant and every range inside [0, 10), the expression
 * built over the range has bounds containing f of every value, and f of a constant folds. */
typedef const sym_node *(*numeric_fn)(sym_ctx *ctx, const sym_node *x);
typedef int64_t (*numeric_ref)(int64_t x);

static void numeric_helper(sym_ctx *ctx, numeric_fn f, numeric_ref ref) {
    char name[32];
    for (int64_t i = 0; i < 10; i++) {
        int64_t v = -1;
        assert_true(sym_is_const(f(ctx, sym_const(ctx, i)), &v));
        assert_int_equal(v, ref(i));
    }
    for (int64_t lo = 0; lo < 10; lo++) {
        for (int64_t hi = lo; hi < 10; hi++) {
            snprintf(name, sizeof name, "tmp_%lld_%lld", (long long)lo, (long long)hi);
            const sym_node *n = f(ctx, sym_var(ctx, name, lo, hi));
            assert_non_null(n);
            for (int64_t x = lo; x <= hi; x++) {
                assert_true(sym_vmin(n) <= ref(x));
                assert_true(sym_vmax(n) >= ref(x));
            }
        }
    }
}

static const sym_node *f_mod4(sym_ctx *c, const sym_node *x) {
    return sym_floormod_c(c, x, 4);
}
static int64_t r_mod4(int64_t x) {
    return x % 4;
}
static const sym_node *f_div4(sym_ctx *c, const sym_node *x) {
    return sym_floordiv_c(c, x, 4);
}
static int64_t r_div4(int64_t x) {
    return x / 4;
}
static const sym_node *f_p1_div2(sym_ctx *c, const sym_node *x) {
    return sym_floordiv_c(c, sym_add_c(c, x, 1), 2);
}
static int64_t r_p1_div2(int64_t x) {
    return (x + 1) / 2;
}
static const sym_node *f_p1_mod2(sym_ctx *c, const sym_node *x) {
    return sym_floormod_c(c, sym_add_c(c, x, 1), 2);
}
static int64_t r_p1_mod2(int64_t x) {
    return (x + 1) % 2;
}
static const sym_node *f_t2p3_mod4(sym_ctx *c, const sym_node *x) {
    return sym_floormod_c(c, sym_add_c(c, sym_mul_c(c, x, 2), 3), 4);
}
static int64_t r_t2p3_mod4(int64_t x) {
    return (x * 2 + 3) % 4;
}
static const sym_node *f_t2p3_div4(sym_ctx *c, const sym_node *x) {
    return sym_floordiv_c(c, sym_add_c(c, sym_mul_c(c, x, 2), 3), 4);
}
static int64_t r_t2p3_div4(int64_t x) {
    return (x * 2 + 3) / 4;
}
static const sym_node *f_t2p3_div4_mod4(sym_ctx *c, const sym_node *x) {
    return sym_floormod_c(c, f_t2p3_div4(c, x), 4);
}
static int64_t r_t2p3_div4_mod4(int64_t x) {
    return ((x * 2 + 3) / 4) % 4;
}

static void test_symbolic_tinygrad_numeric(void **state) {
    sym_ctx *ctx = *state;
    numeric_helper(ctx, f_mod4, r_mod4);
    numeric_helper(ctx, f_div4, r_div4);
    numeric_helper(ctx, f_p1_div2, r_p1_div2);
    numeric_helper(ctx, f_p1_mod2, r_p1_mod2);
    numeric_helper(ctx, f_t2p3_mod4, r_t2p3_mod4);
    numeric_helper(ctx, f_t2p3_div4, r_t2p3_div4);
    numeric_helper(ctx, f_t2p3_div4_mod4, r_t2p3_div4_mod4);
    assert_int_equal(sym_ctx_status(ctx), KILN_OK);
}

static void test_symbolic_tinygrad_min_max_known(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 1, 8);
    assert_ptr_equal(sym_max(ctx, K(1), a), a);
    assert_ptr_equal(sym_max(ctx, a, K(1)), a);
    assert_true(sym_is_k_test(sym_min(ctx, K(1), a), 1));
    assert_true(sym_is_k_test(sym_min(ctx, a, K(1)), 1));
}

static void test_symbolic_tinygrad_render(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 1, 8), *b = VAR("b", 1, 10);
    CHECK(a, 1, 8, "a");
    CHECK(K(1), 1, 1, "1");
    CHECK(sym_add_c(ctx, a, 1), 2, 9, "(a+1)");
    CHECK(sym_mul(ctx, a, b), 1, 80, "(a*b)");
}

static void test_symbolic_tinygrad_infer(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 10), *b = VAR("b", 0, 10), *c = VAR("c", 0, 10);
    const sym_node *vars[] = {a, b, c};
    const int64_t vals[] = {2, 3, 4};
    sym_assignment as = {vars, vals, 3};
    struct {
        const sym_node *n;
        int64_t want;
    } cases[] = {
        {K(5), 5},
        {a, 2},
        {b, 3},
        {sym_add(ctx, a, b), 5},
        {sym_sub(ctx, a, b), -1},
        {sym_add(ctx, sym_add(ctx, a, b), c), 9},
        {sym_mul(ctx, a, b), 6},
        {sym_add(ctx, sym_mul(ctx, a, b), c), 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t v = 0;
        base_error err = {0};
        assert_int_equal(sym_eval(cases[i].n, &as, &v, &err), KILN_OK);
        assert_int_equal(v, cases[i].want);
    }
}

static void test_symbolic_tinygrad_node_divmod_node(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *i = VAR("i", 1, 10);
    const sym_node *i128 = sym_mul_c(ctx, i, 128), *i128p = sym_add_c(ctx, i128, 128);
    CHECK(sym_floordiv(ctx, K(0), i128), 0, 0, "0");
    CHECK(sym_floormod(ctx, K(0), i128), 0, 0, "0");
    CHECK(sym_floordiv(ctx, K(127), i128), 0, 0, "0");
    CHECK(sym_floormod(ctx, K(127), i128), 127, 127, "127");
    CHECK(sym_floordiv(ctx, K(128), i128p), 0, 0, "0");
    CHECK(sym_floormod(ctx, K(128), i128p), 128, 128, "128");
    CHECK(sym_floordiv(ctx, i, i), 1, 1, "1");
    CHECK(sym_floormod(ctx, i, i), 0, 0, "0");
    CHECK(sym_floordiv(ctx, K(128), K(4)), 32, 32, "32");
    CHECK(sym_floormod(ctx, K(128), K(4)), 0, 0, "0");
}

static void test_symbolic_tinygrad_mulnode_divmod_node(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *i = VAR("i", 1, 10), *idx0 = VAR("idx0", 0, 31);
    const sym_node *i4 = sym_add_c(ctx, sym_mul_c(ctx, i, 4), 4), *ip1 = sym_add_c(ctx, i, 1);
    const sym_node *t = sym_mul(ctx, idx0, i4);
    assert_ptr_equal(sym_floordiv(ctx, t, ip1), sym_mul_c(ctx, idx0, 4));
    CHECK(sym_floormod(ctx, t, ip1), 0, 0, "0");
    CHECK(sym_floormod(ctx, sym_mul(ctx, idx0, i), i), 0, 0, "0");
}

static void test_symbolic_tinygrad_sumnode_divmod_sumnode(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *i = VAR("i", 1, 10), *idx0 = VAR("idx0", 0, 7), *idx1 = VAR("idx1", 0, 3);
    const sym_node *ip1 = sym_add_c(ctx, i, 1), *i4 = sym_mul_c(ctx, ip1, 4);
    const sym_node *i128 = sym_mul_c(ctx, ip1, 128);
    const sym_node *s = sym_add(ctx, sym_mul(ctx, idx0, i4), sym_mul(ctx, idx1, ip1));
    assert_ptr_equal(sym_floordiv(ctx, s, ip1), sym_add(ctx, sym_mul_c(ctx, idx0, 4), idx1));
    CHECK(sym_floormod(ctx, s, ip1), 0, 0, "0");
    CHECK(sym_floordiv(ctx, ip1, i128), 0, 0, "0");
    assert_ptr_equal(sym_floormod(ctx, ip1, i128), ip1);
    CHECK(sym_floordiv(ctx, sym_mul_c(ctx, i128, 2), i128), 2, 2, "2");
    CHECK(sym_floormod(ctx, sym_mul_c(ctx, i128, 2), i128), 0, 0, "0");
}

static void test_symbolic_tinygrad_mod_node_max(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *g = VAR("gidx0", 0, 128);
    const sym_node *m = sym_floormod_c(ctx, g, 8);
    assert_int_equal(sym_node_kind(m), SYM_MOD);
    assert_ptr_equal(sym_node_src(m, 0), g);
    assert_true(sym_is_k_test(sym_node_src(m, 1), 8));
}

static void test_symbolic_tinygrad_node_lt_node(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 1, 5), *b = VAR("b", 6, 9), *c = VAR("c", 1, 10);
    const sym_node *d = VAR("d", 5, 10);
    CHECK(sym_lt(ctx, a, b), 1, 1, "1");
    CHECK(sym_lt(ctx, b, a), 0, 0, "0");
    CHECK(sym_lt(ctx, d, a), 0, 0, "0");
    CHECK(sym_lt(ctx, a, c), 0, 1, "(a<c)");
    CHECK(sym_gt(ctx, a, c), 0, 1, "(c<a)");
    CHECK(sym_lt_c(ctx, a, 3), 0, 1, "(a<3)");
    CHECK(sym_gt(ctx, a, K(3)), 0, 1, "((a*-1)<-3)");
}

static void test_symbolic_tinygrad_num_node_mul_node(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 1, 5);
    assert_ptr_equal(sym_mul(ctx, K(2), a), sym_mul_c(ctx, a, 2));
    assert_ptr_equal(sym_mul(ctx, K(1), a), a);
    CHECK(sym_mul(ctx, K(0), a), 0, 0, "0");
}

static void test_symbolic_tinygrad_substitute(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 1, 3);
    const sym_node *from[] = {a}, *to[] = {K(1)};
    CHECK(sym_substitute(ctx, sym_add_c(ctx, a, 1), from, to, 1), 2, 2, "2");
}

#define T(name) cmocka_unit_test_setup_teardown(name, sym_test_setup, sym_test_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_symbolic_tinygrad_ge),
        T(test_symbolic_tinygrad_lt),
        T(test_symbolic_tinygrad_ge_divides),
        T(test_symbolic_tinygrad_ge_divides_and),
        T(test_symbolic_tinygrad_lt_factors),
        T(test_symbolic_tinygrad_div_becomes_num),
        T(test_symbolic_tinygrad_equality),
        T(test_symbolic_tinygrad_factorize),
        T(test_symbolic_tinygrad_add_sub_mul),
        T(test_symbolic_tinygrad_mul_neg_1),
        T(test_symbolic_tinygrad_div_mod_1),
        T(test_symbolic_tinygrad_div_min_max),
        T(test_symbolic_tinygrad_sum_div),
        T(test_symbolic_tinygrad_sum_div_some_partial_factor),
        T(test_symbolic_tinygrad_mod_factor),
        T(test_symbolic_tinygrad_mod_to_sub),
        T(test_symbolic_tinygrad_sum_div_const),
        T(test_symbolic_tinygrad_sum_lt_fold),
        T(test_symbolic_tinygrad_mod_mul),
        T(test_symbolic_tinygrad_mod_mod),
        T(test_symbolic_tinygrad_mul_mul),
        T(test_symbolic_tinygrad_mul_lt),
        T(test_symbolic_tinygrad_div_div),
        T(test_symbolic_tinygrad_distribute_mul),
        T(test_symbolic_tinygrad_mod_mul_sum),
        T(test_symbolic_tinygrad_mod_remove),
        T(test_symbolic_tinygrad_lt_remove),
        T(test_symbolic_tinygrad_and_fold),
        T(test_symbolic_tinygrad_mod_factor_negative),
        T(test_symbolic_tinygrad_sum_combine_num),
        T(test_symbolic_tinygrad_div_factor),
        T(test_symbolic_tinygrad_mul_div),
        T(test_symbolic_tinygrad_div_remove),
        T(test_symbolic_tinygrad_div_numerator_negative),
        T(test_symbolic_tinygrad_div_into_mod),
        T(test_symbolic_tinygrad_numeric),
        T(test_symbolic_tinygrad_min_max_known),
        T(test_symbolic_tinygrad_render),
        T(test_symbolic_tinygrad_infer),
        T(test_symbolic_tinygrad_node_divmod_node),
        T(test_symbolic_tinygrad_mulnode_divmod_node),
        T(test_symbolic_tinygrad_sumnode_divmod_sumnode),
        T(test_symbolic_tinygrad_mod_node_max),
        T(test_symbolic_tinygrad_node_lt_node),
        T(test_symbolic_tinygrad_num_node_mul_node),
        T(test_symbolic_tinygrad_substitute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
