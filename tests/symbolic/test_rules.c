/* One test per simplification rule (symbolic/sum.c, divmod.c, logic.c): what each rewrites,
 * and where it must leave an expression alone. */
#include "sym_test.h"

#define VAR(name, lo, hi) sym_var(ctx, name, lo, hi)
#define K(v) sym_const(ctx, v)

static void test_symbolic_rules_constant_folding(void **state) {
    sym_ctx *ctx = *state;
    CHECK(sym_add(ctx, K(3), K(4)), 7, 7, "7");
    CHECK(sym_sub(ctx, K(3), K(4)), -1, -1, "-1");
    CHECK(sym_mul(ctx, K(-3), K(4)), -12, -12, "-12");
    CHECK(sym_floordiv(ctx, K(-7), K(2)), -4, -4, "-4");
    CHECK(sym_floormod(ctx, K(-7), K(2)), 1, 1, "1");
    CHECK(sym_floormod(ctx, K(7), K(-2)), -1, -1, "-1");
    CHECK(sym_min(ctx, K(3), K(-4)), -4, -4, "-4");
    CHECK(sym_max(ctx, K(3), K(-4)), 3, 3, "3");
    CHECK(sym_lt(ctx, K(3), K(4)), 1, 1, "1");
    CHECK(sym_eq(ctx, K(3), K(4)), 0, 0, "0");
    CHECK(sym_ne(ctx, K(3), K(4)), 1, 1, "1");
    CHECK(sym_and(ctx, K(3), K(0)), 0, 0, "0");
    CHECK(sym_or(ctx, K(0), K(-2)), 1, 1, "1");
    CHECK(sym_not(ctx, K(5)), 0, 0, "0");
    CHECK(sym_where(ctx, K(2), K(10), K(20)), 10, 10, "10");
}

static void test_symbolic_rules_sum_collects_like_terms(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 9), *y = VAR("y", 0, 9);
    CHECK(sym_add(ctx, sym_mul_c(ctx, x, 4), sym_mul_c(ctx, x, 2)), 0, 54, "(x*6)");
    CHECK(sym_sub(ctx, x, x), 0, 0, "0");
    CHECK(sym_add(ctx, sym_add_c(ctx, y, 3), sym_add_c(ctx, x, -3)), 0, 18, "(x+y)");
    CHECK(sym_add(ctx, sym_add_c(ctx, y, 3), sym_mul_c(ctx, x, 2)), 3, 30, "((x*2)+y+3)");
    CHECK(sym_sub(ctx, sym_add(ctx, x, y), y), 0, 9, "x");
}

static void test_symbolic_rules_mul_distributes_constants_and_orders_factors(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 9), *y = VAR("y", 1, 3), *z = VAR("z", 0, 2);
    CHECK(sym_mul_c(ctx, sym_add_c(ctx, x, 2), 3), 6, 33, "((x*3)+6)");
    CHECK(sym_mul(ctx, sym_mul_c(ctx, z, 2), sym_mul_c(ctx, y, 3)), 0, 36, "((y*z)*6)");
    CHECK(sym_mul(ctx, z, sym_mul(ctx, y, x)), 0, 54, "((x*y)*z)");
    CHECK(sym_mul(ctx, sym_add(ctx, x, y), z), 0, 24, "(z*(x+y))");
    CHECK(sym_mul_c(ctx, sym_mul(ctx, x, y), 0), 0, 0, "0");
    CHECK(sym_mul(ctx, VAR("one", 1, 1), x), 0, 9, "x"); /* a Variable of range [1, 1] */
    CHECK(sym_add(ctx, VAR("seven", 7, 7), x), 7, 16, "(x+7)");
}

static void test_symbolic_rules_div_removed_by_bounds(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 7), *w = VAR("w", 8, 15);
    CHECK(sym_floordiv_c(ctx, x, 8), 0, 0, "0");
    CHECK(sym_floordiv_c(ctx, w, 8), 1, 1, "1");
    CHECK(sym_floordiv_c(ctx, x, 1), 0, 7, "x");
    CHECK(sym_floordiv_c(ctx, x, 4), 0, 1, "(x//4)");
}

static void test_symbolic_rules_div_of_terms(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 99), *b = VAR("b", 0, 3), *c = VAR("c", 0, 4);
    /* (a*c + b) // c = a when 0 <= b < c */
    CHECK(sym_floordiv_c(ctx, sym_add(ctx, sym_mul_c(ctx, a, 4), b), 4), 0, 99, "a");
    /* not when b can reach c */
    CHECK(sym_floordiv_c(ctx, sym_add(ctx, sym_mul_c(ctx, a, 4), c), 4), 0, 100, "(a+(c//4))");
    /* the constant splits: (a*4 + 9) // 4 = a + 2 */
    CHECK(sym_floordiv_c(ctx, sym_add_c(ctx, sym_mul_c(ctx, a, 4), 9), 4), 2, 101, "(a+2)");
    /* a common factor cancels: (a*6 + b*4) // 8 = (a*3 + b*2) // 4 */
    CHECK(sym_floordiv_c(ctx, sym_add(ctx, sym_mul_c(ctx, a, 6), sym_mul_c(ctx, b, 4)), 8), 0, 75,
          "(((a*3)+(b*2))//4)");
    /* (x // k) // c = x // (k*c) */
    CHECK(sym_floordiv_c(ctx, sym_floordiv_c(ctx, a, 3), 5), 0, 6, "(a//15)");
    /* (a*8) // 12 = (a*2) // 3 */
    CHECK(sym_floordiv_c(ctx, sym_mul_c(ctx, a, 8), 12), 0, 66, "((a*2)//3)");
    /* (d*S + r) // c = S // (c/d) for 0 <= r < d, S with a division of its own (an index
     * through a permuted, merged view): ((x//56)*56 + (x%28)*2 + b%2) // 784 = x // 784 */
    const sym_node *x = VAR("x", 0, 99999);
    const sym_node *s = sym_add(
        ctx, sym_mul_c(ctx, sym_floordiv_c(ctx, x, 56), 56),
        sym_add(ctx, sym_mul_c(ctx, sym_floormod_c(ctx, x, 28), 2), sym_floormod_c(ctx, b, 2)));
    CHECK(sym_floordiv_c(ctx, s, 784), 0, 127, "(x//784)");
}

/* sym_given: an index simplified where a mask holds (the masks bound y's range). */
static void test_symbolic_rules_given(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *y = VAR("y", 0, 15), *g = VAR("g", 0, 999);
    /* upper bound: y%14 and y//14 under y < 14 */
    const sym_node *n =
        sym_add(ctx, sym_floormod_c(ctx, y, 14), sym_mul_c(ctx, sym_floordiv_c(ctx, y, 14), 100));
    CHECK(n, 0, 113, "(((y//14)*100)+(y%14))");
    CHECK(sym_given(ctx, n, sym_lt_c(ctx, y, 14)), 0, 15, "y");
    /* lower and upper: 1 <= y < 15 (the lower bound as -y < 0) */
    const sym_node *both = sym_and(ctx, sym_lt_c(ctx, sym_neg(ctx, y), 0), sym_lt_c(ctx, y, 15));
    const sym_node *m = sym_add(ctx, sym_floordiv_c(ctx, sym_add_c(ctx, y, -1), 14), g);
    CHECK(sym_given(ctx, m, both), 0, 999, "g");
    /* one value: y < 1 makes y 0; the result has no y, and other constants stay constants */
    CHECK(sym_given(ctx, sym_add(ctx, sym_mul_c(ctx, y, 5), sym_add_c(ctx, g, 3)),
                    sym_lt_c(ctx, y, 1)),
          3, 1002, "(g+3)");
    /* the (x+k)*14 // 224 of a merged row, bounded by the mask */
    const sym_node *row = sym_add(ctx, sym_mul_c(ctx, g, 14), y);
    CHECK(sym_given(ctx, sym_floordiv_c(ctx, row, 14), sym_lt_c(ctx, y, 14)), 0, 999, "g");
    /* a condition that never holds, one that narrows nothing, a condition with no bounds */
    const sym_node *never = sym_and(ctx, sym_lt_c(ctx, sym_neg(ctx, y), -14), sym_lt_c(ctx, y, 14));
    assert_ptr_equal(sym_given(ctx, n, never), n);
    assert_ptr_equal(sym_given(ctx, n, sym_lt_c(ctx, g, 500)), n);
    assert_ptr_equal(sym_given(ctx, n, sym_eq(ctx, y, g)), n);
    assert_int_equal(sym_ctx_status(ctx), KILN_OK);
}

static void test_symbolic_rules_div_by_negative_constant(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 9);
    CHECK(sym_floordiv_c(ctx, a, -3), -3, 0, "((a*-1)//3)");
    CHECK(sym_floordiv_c(ctx, sym_mul_c(ctx, a, 6), -3), -18, 0, "(a*-2)");
}

static void test_symbolic_rules_mod_removed_or_shifted_by_bounds(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 7), *w = VAR("w", 16, 20);
    CHECK(sym_floormod_c(ctx, x, 8), 0, 7, "x");
    CHECK(sym_floormod_c(ctx, w, 8), 0, 4, "(w-16)");
    CHECK(sym_floormod_c(ctx, x, 1), 0, 0, "0");
}

static void test_symbolic_rules_mod_of_terms(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 99), *b = VAR("b", 0, 3), *c = VAR("c", 0, 9);
    /* multiples of c drop out, the constant reduces */
    CHECK(sym_floormod_c(ctx, sym_add_c(ctx, sym_add(ctx, sym_mul_c(ctx, a, 8), c), 10), 8), 0, 7,
          "((c+2)%8)");
    CHECK(sym_floormod_c(ctx, sym_add(ctx, sym_mul_c(ctx, a, 4), b), 4), 0, 3, "b");
    /* a common factor comes out: (a*6) % 8 = ((a*3) % 4) * 2 */
    CHECK(sym_floormod_c(ctx, sym_mul_c(ctx, a, 6), 8), 0, 6, "(((a*3)%4)*2)");
    /* (d*S + r) % c = d*(S % (c/d)) + r for 0 <= r < d */
    CHECK(sym_floormod_c(ctx, sym_add(ctx, sym_mul_c(ctx, a, 4), b), 12), 0, 11, "(b+((a%3)*4))");
    /* (x % k) % c = x % c when c divides k */
    CHECK(sym_floormod_c(ctx, sym_floormod_c(ctx, a, 12), 4), 0, 3, "(a%4)");
    /* reduced coefficients prove the range: (c*10) % 9 = c for c < 9 ... not here (c <= 9) */
    CHECK(sym_floormod_c(ctx, sym_mul_c(ctx, c, 10), 9), 0, 8, "((c*10)%9)");
}

static void test_symbolic_rules_mod_by_negative_constant(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 9);
    CHECK(sym_floormod_c(ctx, a, -4), -3, 0, "(((a*-1)%4)*-1)");
}

static void test_symbolic_rules_divmod_fold_back(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 999), *n = VAR("n", 1, 32);
    const sym_node *q = sym_floordiv_c(ctx, x, 6), *r = sym_floormod_c(ctx, x, 6);
    CHECK(sym_add(ctx, sym_mul_c(ctx, q, 6), r), 0, 999, "x");
    CHECK(sym_add(ctx, sym_mul_c(ctx, q, 12), sym_mul_c(ctx, r, 2)), 0, 1998, "(x*2)");
    CHECK(sym_add(ctx, sym_mul_c(ctx, q, 5), r), 0, 835, "(((x//6)*5)+(x%6))");
    /* through (x // 2) // 3 = x // 6 */
    const sym_node *h = sym_floordiv_c(ctx, x, 2);
    CHECK(sym_add(ctx, sym_mul_c(ctx, sym_floordiv_c(ctx, h, 3), 3), sym_floormod_c(ctx, h, 3)), 0,
          499, "(x//2)");
    /* by an expression */
    CHECK(sym_add(ctx, sym_mul(ctx, sym_floordiv(ctx, x, n), n), sym_floormod(ctx, x, n)), 0, 999,
          "x");
}

static void test_symbolic_rules_div_mod_by_expression(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *n = VAR("n", 1, 16), *i = VAR("i", 0, 7), *j = VAR("j", 0, 100);
    const sym_node *n4 = sym_mul_c(ctx, n, 4);
    CHECK(sym_floordiv(ctx, sym_mul(ctx, i, n4), n), 0, 28, "(i*4)");
    CHECK(sym_floormod(ctx, sym_mul(ctx, i, n4), n), 0, 0, "0");
    /* the multiple leaves the division, the rest stays */
    CHECK(sym_floordiv(ctx, sym_add(ctx, sym_mul(ctx, i, n), j), n), 0, 107, "(i+(j//n))");
    CHECK(sym_floormod(ctx, sym_add(ctx, sym_mul(ctx, i, n), j), n), 0, 15, "(j%n)");
    /* a divisor that may be 0 is left alone */
    const sym_node *z = VAR("z", 0, 3);
    CHECK(sym_floordiv(ctx, j, z), 0, 100, "(j//z)");
    /* a negative divisor moves its sign onto the dividend */
    CHECK(sym_floordiv(ctx, j, sym_neg(ctx, n)), -100, 0, "((j*-1)//n)");
}

static void test_symbolic_rules_lt_moves_constants_and_cancels_factors(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 511), *y = VAR("y", 0, 3), *z = VAR("z", 0, 7);
    CHECK(sym_lt_c(ctx, sym_add(ctx, sym_mul_c(ctx, x, 4), y), 512), 0, 1, "(x<128)");
    CHECK(sym_lt_c(ctx, sym_add_c(ctx, x, 10), 20), 0, 1, "(x<10)");
    CHECK(sym_lt_c(ctx, sym_mul_c(ctx, x, 4), 510), 0, 1, "(x<128)");
    CHECK(sym_lt_c(ctx, sym_add(ctx, sym_mul_c(ctx, x, 4), z), 512), 0, 1, "(((x*4)+z)<512)");
    CHECK(sym_lt(ctx, K(5), x), 0, 1, "((x*-1)<-5)");
    CHECK(sym_lt(ctx, x, y), 0, 1, "(x<y)");
    CHECK(sym_lt(ctx, x, x), 0, 0, "0");
    CHECK(sym_lt_c(ctx, sym_floordiv_c(ctx, x, 2), 4), 0, 1, "(x<8)");
    CHECK(sym_lt_c(ctx, sym_floordiv_c(ctx, sym_add_c(ctx, x, -9), 4), 1), 0, 1, "(x<13)");
}

static void test_symbolic_rules_le_gt_ge(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 9);
    CHECK(sym_le(ctx, x, K(4)), 0, 1, "(x<5)");
    CHECK(sym_gt(ctx, x, K(4)), 0, 1, "((x*-1)<-4)");
    CHECK(sym_ge(ctx, x, K(4)), 0, 1, "((x*-1)<-3)");
    CHECK(sym_le(ctx, x, K(9)), 1, 1, "1");
    CHECK(sym_ge(ctx, x, K(0)), 1, 1, "1");
}

static void test_symbolic_rules_eq_ne(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 9), *y = VAR("y", 0, 9), *w = VAR("w", 20, 30);
    CHECK(sym_eq(ctx, x, x), 1, 1, "1");
    CHECK(sym_eq(ctx, x, w), 0, 0, "0");
    CHECK(sym_eq(ctx, sym_add_c(ctx, x, 3), K(5)), 0, 1, "(x==2)");
    CHECK(sym_eq(ctx, K(5), sym_add_c(ctx, x, 3)), 0, 1, "(x==2)");
    CHECK(sym_eq(ctx, sym_mul_c(ctx, x, 4), K(6)), 0, 0, "0");
    CHECK(sym_eq(ctx, sym_mul_c(ctx, x, 4), K(8)), 0, 1, "(x==2)");
    CHECK(sym_ne(ctx, sym_mul_c(ctx, x, 4), K(6)), 1, 1, "1");
    CHECK(sym_ne(ctx, y, x), 0, 1, "(x!=y)");
    CHECK(sym_ne(ctx, x, x), 0, 0, "0");
}

static void test_symbolic_rules_not(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 9), *b = VAR("b", 0, 1), *v = VAR("v", -2, 2);
    CHECK(sym_not(ctx, sym_not(ctx, b)), 0, 1, "b");
    CHECK(sym_not(ctx, sym_not(ctx, v)), 0, 1, "(v!=0)");
    CHECK(sym_not(ctx, sym_eq(ctx, x, K(3))), 0, 1, "(x!=3)");
    CHECK(sym_not(ctx, sym_ne(ctx, x, K(3))), 0, 1, "(x==3)");
    CHECK(sym_not(ctx, sym_lt_c(ctx, x, 3)), 0, 1, "((x*-1)<-2)");
    CHECK(sym_not(ctx, sym_not(ctx, sym_lt_c(ctx, x, 3))), 0, 1, "(x<3)");
    CHECK(sym_not(ctx, VAR("pos", 1, 5)), 0, 0, "0");
}

static void test_symbolic_rules_and_or(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *b = VAR("b", 0, 1), *c = VAR("c", 0, 1), *v = VAR("v", -2, 2);
    CHECK(sym_and(ctx, b, K(1)), 0, 1, "b");
    CHECK(sym_and(ctx, v, K(7)), 0, 1, "(v!=0)");
    CHECK(sym_and(ctx, c, b), 0, 1, "(b and c)");
    CHECK(sym_and(ctx, b, b), 0, 1, "b");
    CHECK(sym_or(ctx, b, K(0)), 0, 1, "b");
    CHECK(sym_or(ctx, b, K(3)), 1, 1, "1");
    CHECK(sym_or(ctx, c, b), 0, 1, "(b or c)");
    CHECK(sym_and(ctx, VAR("pos", 1, 5), b), 0, 1, "b");
}

static void test_symbolic_rules_where(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *b = VAR("b", 0, 1), *x = VAR("x", 0, 9), *y = VAR("y", 10, 19);
    CHECK(sym_where(ctx, b, x, x), 0, 9, "x");
    CHECK(sym_where(ctx, sym_lt_c(ctx, x, 20), x, y), 0, 9, "x");
    CHECK(sym_where(ctx, sym_not(ctx, b), x, y), 0, 19, "(b ? y : x)");
    CHECK(sym_where(ctx, b, K(1), K(0)), 0, 1, "b");
    CHECK(sym_where(ctx, b, K(0), K(1)), 0, 1, "(not b)");
    CHECK(sym_where(ctx, sym_lt_c(ctx, x, 5), x, y), 0, 19, "((x<5) ? x : y)");
}

static void test_symbolic_rules_min_max(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 9), *y = VAR("y", 10, 19), *z = VAR("z", 5, 15);
    CHECK(sym_min(ctx, x, y), 0, 9, "x");
    CHECK(sym_max(ctx, x, y), 10, 19, "y");
    CHECK(sym_min(ctx, x, x), 0, 9, "x");
    CHECK(sym_min(ctx, z, x), 0, 9, "min(x, z)");
    CHECK(sym_max(ctx, K(7), z), 7, 15, "max(z, 7)");
    CHECK(sym_min(ctx, x, K(9)), 0, 9, "x");
    /* decided by the difference when the bounds overlap */
    CHECK(sym_min(ctx, sym_add_c(ctx, z, 1), z), 5, 15, "z");
    CHECK(sym_max(ctx, sym_add(ctx, x, z), z), 5, 24, "(x+z)");
    CHECK(sym_lt(ctx, z, sym_add_c(ctx, z, 1)), 1, 1, "1");
    CHECK(sym_lt(ctx, sym_add(ctx, x, z), z), 0, 0, "0");
    CHECK(sym_lt(ctx, sym_add_c(ctx, x, 2), z), 0, 1, "((x+2)<z)");
}

static void test_symbolic_rules_budget_is_per_call(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 999), *e = x;
    sym_ctx_set_budget(ctx, 64);
    for (int i = 0; i < 2000; i++) /* many calls, each well within 64 steps */
        e = sym_add(ctx, sym_floormod_c(ctx, e, 1000), K(0));
    CHECK(e, 0, 999, "x");
}

#define T(name) cmocka_unit_test_setup_teardown(name, sym_test_setup, sym_test_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_symbolic_rules_constant_folding),
        T(test_symbolic_rules_sum_collects_like_terms),
        T(test_symbolic_rules_mul_distributes_constants_and_orders_factors),
        T(test_symbolic_rules_div_removed_by_bounds),
        T(test_symbolic_rules_div_of_terms),
        T(test_symbolic_rules_given),
        T(test_symbolic_rules_div_by_negative_constant),
        T(test_symbolic_rules_mod_removed_or_shifted_by_bounds),
        T(test_symbolic_rules_mod_of_terms),
        T(test_symbolic_rules_mod_by_negative_constant),
        T(test_symbolic_rules_divmod_fold_back),
        T(test_symbolic_rules_div_mod_by_expression),
        T(test_symbolic_rules_lt_moves_constants_and_cancels_factors),
        T(test_symbolic_rules_le_gt_ge),
        T(test_symbolic_rules_eq_ne),
        T(test_symbolic_rules_not),
        T(test_symbolic_rules_and_or),
        T(test_symbolic_rules_where),
        T(test_symbolic_rules_min_max),
        T(test_symbolic_rules_budget_is_per_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
