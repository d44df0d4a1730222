/* Nodes: the context, Variables, binding, hash-consing, bounds of every kind, overflow,
 * evaluation, rendering, substitution, unbinding and guards. */
#include "sym_test.h"

#define VAR(name, lo, hi) sym_var(ctx, name, lo, hi)
#define K(v) sym_const(ctx, v)

static void test_symbolic_ctx_create_destroy(void **state) {
    (void)state;
    sym_ctx *ctx = NULL;
    assert_int_equal(sym_ctx_create(NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(sym_ctx_create(NULL, &ctx), KILN_OK);
    assert_int_equal(sym_ctx_status(ctx), KILN_OK);
    assert_int_equal(sym_ctx_node_count(ctx), 0);
    K(3);
    K(3);
    assert_int_equal(sym_ctx_node_count(ctx), 1);
    sym_ctx_destroy(ctx);
    sym_ctx_destroy(NULL);
    assert_null(sym_const(NULL, 1));
    assert_null(sym_add(NULL, NULL, NULL));
}

/* The usage example at the top of sym.h does what it says. */
static void test_symbolic_header_example_simplifies_to_n(void **state) {
    (void)state;
    sym_ctx *c = NULL;
    assert_int_equal(sym_ctx_create(NULL, &c), KILN_OK);
    const sym_node *n = sym_var(c, "n", 1, 1024);
    const sym_node *i = sym_add(c, sym_mul_c(c, n, 4), sym_const(c, 3));
    const sym_node *q = sym_floordiv_c(c, i, 4);
    assert_ptr_equal(q, n);
    assert_int_equal(sym_ctx_status(c), KILN_OK);
    sym_ctx_destroy(c);
}

static void test_symbolic_var_same_name_same_node(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *a = VAR("a", 0, 9);
    const char *name = NULL;
    int64_t lo = -1, hi = -1;
    assert_ptr_equal(VAR("a", 0, 9), a);
    assert_int_equal(sym_node_kind(a), SYM_VAR);
    assert_true(sym_var_info(a, &name, &lo, &hi));
    assert_string_equal(name, "a");
    assert_int_equal(lo, 0);
    assert_int_equal(hi, 9);
    assert_false(sym_var_info(K(1), NULL, NULL, NULL));
    CHECK(a, 0, 9, "a");
}

static void test_symbolic_var_rejects_bad_declarations(void **state) {
    sym_ctx *ctx = *state;
    VAR("a", 0, 9);
    assert_null(VAR("a", 0, 10));
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(sym_ctx_message(ctx), "a"));
    sym_ctx_clear_error(ctx);
    assert_null(VAR("b", 5, 4));
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_INVALID_ARGUMENT);
    sym_ctx_clear_error(ctx);
    assert_null(VAR("", 0, 1));
    assert_null(VAR(NULL, 0, 1));
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_INVALID_ARGUMENT);
}

static void test_symbolic_bind_unbind_roundtrip(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *n = VAR("n", 1, 8), *v = NULL;
    const sym_node *b = sym_bind(ctx, n, 4);
    int64_t value = 0, lo = 0, hi = 0;
    CHECK(b, 1, 8, "(n:=4)"); /* a bound node simplifies like its Variable */
    assert_int_equal(sym_node_kind(b), SYM_BIND);
    assert_ptr_equal(sym_bind(ctx, n, 4), b);
    assert_ptr_not_equal(sym_bind(ctx, n, 5), b);
    assert_true(sym_unbind(b, &v, &value));
    assert_ptr_equal(v, n);
    assert_int_equal(value, 4);
    assert_false(sym_unbind(n, &v, &value));
    assert_true(sym_var_info(b, NULL, &lo, &hi));
    assert_int_equal(lo, 1);
    assert_int_equal(hi, 8);
    int64_t out = 0;
    base_error err = {0};
    assert_int_equal(sym_eval(sym_mul_c(ctx, b, 3), NULL, &out, &err), KILN_OK);
    assert_int_equal(out, 12);
}

static void test_symbolic_bind_outside_range_is_error(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *n = VAR("n", 1, 8);
    assert_null(sym_bind(ctx, n, 9));
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_OUT_OF_RANGE);
    sym_ctx_clear_error(ctx);
    assert_null(sym_bind(ctx, n, 0));
    sym_ctx_clear_error(ctx);
    assert_null(sym_bind(ctx, sym_add_c(ctx, n, 1), 3)); /* not a Variable */
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_INVALID_ARGUMENT);
}

static void test_symbolic_hashcons_commutative_order_by_id(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 9), *y = VAR("y", 0, 9), *z = VAR("z", 0, 9);
    const sym_node *s1 = sym_add(ctx, sym_add(ctx, z, x), y);
    const sym_node *s2 = sym_add(ctx, x, sym_add(ctx, y, z));
    assert_ptr_equal(s1, s2);
    CHECK(s1, 0, 27, "(x+y+z)");
    assert_ptr_equal(sym_mul(ctx, sym_mul(ctx, z, y), x), sym_mul(ctx, x, sym_mul(ctx, y, z)));
    assert_ptr_equal(sym_min(ctx, y, x), sym_min(ctx, x, y));
    assert_ptr_equal(sym_eq(ctx, y, x), sym_eq(ctx, x, y));
    assert_true(sym_node_id(x) < sym_node_id(y));
    assert_int_equal(sym_node_arity(s1), 2);
    assert_null(sym_node_src(s1, 2));
}

/* The structural hash depends on structure only: two contexts that create nodes in different
 * orders agree. */
static void test_symbolic_hash_stable_across_contexts(void **state) {
    (void)state;
    sym_ctx *c1 = NULL, *c2 = NULL;
    assert_int_equal(sym_ctx_create(NULL, &c1), KILN_OK);
    assert_int_equal(sym_ctx_create(NULL, &c2), KILN_OK);
    sym_var(c2, "unrelated", 0, 3);
    sym_const(c2, 77);
    const sym_node *a1 = sym_var(c1, "a", 0, 99), *b1 = sym_var(c1, "b", 0, 9);
    const sym_node *a2 = sym_var(c2, "a", 0, 99), *b2 = sym_var(c2, "b", 0, 9);
    const sym_node *e1 = sym_floordiv_c(c1, sym_add(c1, sym_mul_c(c1, a1, 10), b1), 3);
    const sym_node *e2 = sym_floordiv_c(c2, sym_add(c2, sym_mul_c(c2, a2, 10), b2), 3);
    assert_int_equal(sym_node_hash(e1), sym_node_hash(e2));
    assert_int_not_equal(sym_node_hash(e1), sym_node_hash(sym_add_c(c1, e1, 1)));
    assert_int_not_equal(sym_node_hash(a1), sym_node_hash(sym_var(c1, "a2", 0, 99)));
    sym_ctx_destroy(c1);
    sym_ctx_destroy(c2);
}

/* ---- bounds of every kind ---------------------------------------------------------------- */

/* sym_split_const: a sum less its constant term (canonical sums keep it last), the term. */
static void test_symbolic_split_const(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 13), *y = VAR("y", 0, 13);
    const sym_node *rest = sym_add(ctx, x, sym_mul_c(ctx, y, 14));
    int64_t term = 7;
    assert_ptr_equal(sym_split_const(ctx, sym_add_c(ctx, rest, -3), &term), rest);
    assert_int_equal(term, -3);
    assert_ptr_equal(sym_split_const(ctx, rest, &term), rest);
    assert_int_equal(term, 0);
    assert_ptr_equal(sym_split_const(ctx, K(5), &term), K(0));
    assert_int_equal(term, 5);
    assert_null(sym_split_const(ctx, NULL, &term));
}

static void test_symbolic_bounds_arithmetic(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", -3, 5), *y = VAR("y", -2, 7);
    CHECK(K(-4), -4, -4, "-4");
    CHECK(sym_add(ctx, x, y), -5, 12, "(x+y)");
    CHECK(sym_mul(ctx, x, y), -21, 35, "(x*y)");
    CHECK(sym_mul_c(ctx, x, -2), -10, 6, "(x*-2)");
    CHECK(sym_min(ctx, x, y), -3, 5, "min(x, y)");
    CHECK(sym_max(ctx, x, y), -2, 7, "max(x, y)");
    CHECK(sym_max(ctx, x, K(0)), 0, 5, "max(x, 0)");
}

static void test_symbolic_bounds_division(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", -7, 7), *y = VAR("y", -2, 3), *p = VAR("p", 2, 5);
    CHECK(sym_floordiv_c(ctx, x, 2), -4, 3, "(x//2)");
    CHECK(sym_floordiv(ctx, x, y), -7, 7, "(x//y)"); /* the divisor spans 0 */
    CHECK(sym_floordiv(ctx, x, p), -4, 3, "(x//p)");
    CHECK(sym_floordiv(ctx, x, sym_neg(ctx, p)), -4, 3, "((x*-1)//p)");
}

static void test_symbolic_bounds_modulo(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", -7, 7), *a = VAR("a", 10, 13), *p = VAR("p", 2, 5);
    const sym_node *y = VAR("y", -2, 3);
    CHECK(sym_floormod_c(ctx, x, 4), 0, 3, "(x%4)");
    CHECK(sym_floormod_c(ctx, x, -4), -3, 0, "(((x*-1)%4)*-1)");
    CHECK(sym_floormod_c(ctx, a, 8), 2, 5, "(a-8)"); /* one quotient: shifted */
    CHECK(sym_floormod(ctx, x, p), 0, 4, "(x%p)");
    CHECK(sym_floormod(ctx, a, p), 0, 4, "(a%p)");
    CHECK(sym_floormod(ctx, x, y), -1, 2, "(x%y)");
}

static void test_symbolic_bounds_logic_and_where(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", -7, 7), *y = VAR("y", 0, 9), *b = VAR("b", 0, 1);
    CHECK(sym_lt(ctx, x, y), 0, 1, "(x<y)");
    CHECK(sym_eq(ctx, x, y), 0, 1, "(x==y)");
    CHECK(sym_ne(ctx, x, y), 0, 1, "(x!=y)");
    CHECK(sym_and(ctx, x, y), 0, 1, "(x and y)");
    CHECK(sym_or(ctx, x, y), 0, 1, "(x or y)");
    CHECK(sym_not(ctx, x), 0, 1, "(not x)");
    CHECK(sym_where(ctx, b, x, y), -7, 9, "(b ? x : y)");
    assert_true(sym_is_bool(sym_lt(ctx, x, y)));
    assert_false(sym_is_bool(x));
}

static void test_symbolic_bounds_overflow_is_error(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *big = VAR("big", 0, INT64_MAX), *neg = VAR("neg", INT64_MIN, 0);
    assert_null(sym_mul_c(ctx, big, 2));
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_OVERFLOW);
    sym_ctx_clear_error(ctx);
    assert_null(sym_add(ctx, big, VAR("one", 1, 1000)));
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_OVERFLOW);
    sym_ctx_clear_error(ctx);
    assert_null(sym_neg(ctx, neg));
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_OVERFLOW);
    sym_ctx_clear_error(ctx);
    assert_null(sym_mul(ctx, K(INT64_MAX), K(2)));
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_OVERFLOW);
    sym_ctx_clear_error(ctx);
    assert_null(sym_floordiv(ctx, K(INT64_MIN), K(-1)));
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_OVERFLOW);
    sym_ctx_clear_error(ctx);
    CHECK(sym_floordiv_c(ctx, big, 2), 0, INT64_MAX / 2, "(big//2)");
}

static void test_symbolic_errors_first_wins_and_null_propagates(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 9);
    assert_null(sym_floordiv_c(ctx, x, 0));
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_INVALID_ARGUMENT);
    assert_null(sym_mul_c(ctx, VAR("h", 0, INT64_MAX), 4)); /* a second error */
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(sym_ctx_message(ctx), "zero"));
    assert_null(sym_add(ctx, NULL, x));
    assert_null(sym_where(ctx, x, NULL, x));
    assert_null(sym_not(ctx, NULL));
    assert_null(sym_floormod(ctx, x, sym_sub(ctx, x, x))); /* modulo by a zero expression */
}

/* ---- evaluation -------------------------------------------------------------------------- */

static void test_symbolic_eval_floor_semantics(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", -9, 9), *y = VAR("y", -4, 4);
    const sym_node *vars[] = {x, y};
    int64_t vals[] = {-7, 2}, out = 0;
    sym_assignment as = {vars, vals, 2};
    base_error err = {0};
    assert_int_equal(sym_eval(sym_floordiv(ctx, x, y), &as, &out, &err), KILN_OK);
    assert_int_equal(out, -4);
    assert_int_equal(sym_eval(sym_floormod(ctx, x, y), &as, &out, &err), KILN_OK);
    assert_int_equal(out, 1);
    vals[1] = -2;
    assert_int_equal(sym_eval(sym_floormod(ctx, x, y), &as, &out, &err), KILN_OK);
    assert_int_equal(out, -1);
    assert_int_equal(sym_eval(sym_where(ctx, sym_lt(ctx, x, y), x, y), &as, &out, &err), KILN_OK);
    assert_int_equal(out, -7);
}

static void test_symbolic_eval_errors(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 9), *y = VAR("y", -1, 1);
    const sym_node *vars[] = {x, y};
    int64_t vals[] = {3, 0}, out = 0;
    sym_assignment as = {vars, vals, 2}, only_x = {vars, vals, 1};
    base_error err = {0};
    assert_int_equal(sym_eval(sym_add(ctx, x, y), &only_x, &out, &err), KILN_ERROR_NOT_FOUND);
    assert_non_null(strstr(err.message, "y"));
    base_error_clear(&err);
    assert_int_equal(sym_eval(x, NULL, &out, &err), KILN_ERROR_NOT_FOUND);
    base_error_clear(&err);
    assert_int_equal(sym_eval(sym_floordiv(ctx, x, y), &as, &out, &err),
                     KILN_ERROR_INVALID_ARGUMENT);
    base_error_clear(&err);
    vals[0] = 10; /* outside [0, 9] */
    assert_int_equal(sym_eval(x, &as, &out, &err), KILN_ERROR_OUT_OF_RANGE);
    base_error_clear(&err);
    assert_int_equal(sym_eval(NULL, &as, &out, &err), KILN_ERROR_INVALID_ARGUMENT);
}

/* ---- rendering --------------------------------------------------------------------------- */

static void test_symbolic_render_format_and_truncation(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 99), *y = VAR("y", 0, 3), *c = VAR("c", 0, 1);
    const sym_node *e = sym_floordiv_c(ctx, sym_add(ctx, sym_mul_c(ctx, x, 4), y), 3);
    char buf[64];
    CHECK(e, 0, 133, "(((x*4)+y)//3)");
    CHECK(sym_floormod_c(ctx, x, 8), 0, 7, "(x%8)");
    CHECK(sym_max(ctx, x, K(3)), 3, 99, "max(x, 3)");
    CHECK(sym_lt_c(ctx, x, 5), 0, 1, "(x<5)");
    CHECK(sym_where(ctx, c, x, y), 0, 99, "(c ? x : y)");
    CHECK(sym_and(ctx, sym_lt_c(ctx, x, 5), sym_not(ctx, c)), 0, 1, "((x<5) and (not c))");
    CHECK(sym_sub(ctx, x, K(7)), -7, 92, "(x-7)");
    size_t need = sym_render(e, buf, 5);
    assert_int_equal(need, strlen("(((x*4)+y)//3)"));
    assert_string_equal(buf, "(((x");
    assert_int_equal(sym_render(e, NULL, 0), need);
    need = sym_render(sym_add(ctx, sym_add(ctx, x, y), K(9)), buf, 8);
    assert_int_equal(need, strlen("(x+y+9)"));
    assert_string_equal(buf, "(x+y+9)");
    need = sym_render(sym_add(ctx, sym_add(ctx, x, y), K(9)), buf, 7);
    assert_string_equal(buf, "(x+y+9");
}

/* ---- substitution and unbinding ---------------------------------------------------------- */

static void test_symbolic_substitute_resimplifies(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *x = VAR("x", 0, 99), *y = VAR("y", 0, 3), *z = VAR("z", 0, 0);
    const sym_node *e = sym_floordiv_c(ctx, sym_add(ctx, sym_mul_c(ctx, x, 4), y), 4);
    CHECK(e, 0, 99, "x");
    const sym_node *e2 = sym_floordiv_c(ctx, sym_add(ctx, x, y), 4);
    const sym_node *from[] = {x}, *to[] = {sym_mul_c(ctx, z, 1)};
    const sym_node *to2[] = {sym_mul_c(ctx, VAR("w", 0, 10), 8)};
    CHECK(sym_substitute(ctx, e2, from, to, 1), 0, 0, "0");
    CHECK(sym_substitute(ctx, e2, from, to2, 1), 0, 20, "(w*2)");
    assert_ptr_equal(sym_substitute(ctx, e2, NULL, NULL, 0), e2);
    const sym_node *bad[] = {sym_add_c(ctx, x, 1)};
    assert_null(sym_substitute(ctx, e2, bad, to, 1));
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_INVALID_ARGUMENT);
}

static void test_symbolic_substitute_variable_replaces_bound_nodes(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *n = VAR("n", 1, 64), *b = sym_bind(ctx, n, 7);
    const sym_node *e = sym_add(ctx, sym_mul_c(ctx, b, 4), K(1));
    const sym_node *from[] = {n}, *to[] = {K(3)};
    CHECK(sym_substitute(ctx, e, from, to, 1), 13, 13, "13");
}

static void test_symbolic_unbind_all_collects_in_order(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *n = VAR("n", 1, 64), *m = VAR("m", 1, 64);
    const sym_node *e =
        sym_add(ctx, sym_mul(ctx, sym_bind(ctx, n, 5), sym_bind(ctx, m, 3)), sym_bind(ctx, n, 5));
    const sym_node *vars[4] = {0};
    int64_t values[4] = {0};
    size_t found = 0;
    const sym_node *u = sym_unbind_all(ctx, e, vars, values, 4, &found);
    CHECK(u, 2, 4160, "(n+(n*m))");
    assert_int_equal(found, 2);
    int64_t vn = vars[0] == n ? values[0] : values[1], vm = vars[0] == m ? values[0] : values[1];
    assert_int_equal(vn, 5);
    assert_int_equal(vm, 3);
    assert_ptr_not_equal(vars[0], vars[1]);
    /* capacity smaller than needed: the count still says how many */
    assert_ptr_equal(sym_unbind_all(ctx, e, vars, values, 1, &found), u);
    assert_int_equal(found, 2);
    /* no binds: the same node back */
    assert_ptr_equal(sym_unbind_all(ctx, u, vars, values, 4, &found), u);
    assert_int_equal(found, 0);
}

static void test_symbolic_unbind_all_conflicting_values_is_error(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *n = VAR("n", 1, 64);
    const sym_node *e = sym_mul(ctx, sym_bind(ctx, n, 5), sym_bind(ctx, n, 6));
    size_t found = 0;
    assert_null(sym_unbind_all(ctx, e, NULL, NULL, 0, &found));
    assert_int_equal(sym_ctx_status(ctx), KILN_ERROR_INVALID_ARGUMENT);
}

/* ---- guards ------------------------------------------------------------------------------ */

static void test_symbolic_guard_check_and_render(void **state) {
    sym_ctx *ctx = *state;
    const sym_node *n = VAR("n", 1, 64), *m = VAR("m", 1, 64);
    const sym_node *vars[] = {n, m};
    int64_t vals[] = {12, 5};
    sym_assignment as = {vars, vals, 2};
    base_error err = {0};
    char buf[64];
    sym_guard range = {SYM_GUARD_RANGE, n, 8, 16}, eq = {SYM_GUARD_EQ, n, 12, 0};
    sym_guard div = {SYM_GUARD_DIVISIBLE, n, 4, 0}, div5 = {SYM_GUARD_DIVISIBLE, n, 5, 0};
    sym_guard lt = {SYM_GUARD_TRUE, sym_lt(ctx, m, n), 0, 0};
    assert_true(sym_guard_check(&range, &as, &err));
    assert_true(sym_guard_check(&eq, &as, &err));
    assert_true(sym_guard_check(&div, &as, &err));
    assert_false(sym_guard_check(&div5, &as, &err));
    assert_true(sym_guard_check(&lt, &as, &err));
    vals[0] = 3;
    assert_false(sym_guard_check(&range, &as, &err));
    assert_false(sym_guard_check(&lt, &as, &err));
    assert_int_equal(err.status, KILN_OK);
    sym_assignment none = {NULL, NULL, 0};
    assert_false(sym_guard_check(&eq, &none, &err));
    assert_int_equal(err.status, KILN_ERROR_NOT_FOUND);
    sym_guard_render(&range, buf, sizeof buf);
    assert_string_equal(buf, "8 <= n <= 16");
    sym_guard_render(&div, buf, sizeof buf);
    assert_string_equal(buf, "n % 4 == 0");
    sym_guard_render(&eq, buf, sizeof buf);
    assert_string_equal(buf, "n == 12");
    assert_int_equal(sym_guard_render(&lt, buf, sizeof buf), strlen("(m<n)"));
    assert_string_equal(buf, "(m<n)");
    assert_int_equal(sym_guard_render(&div, buf, 3), strlen("n % 4 == 0"));
    assert_string_equal(buf, "n ");
}

#define T(name) cmocka_unit_test_setup_teardown(name, sym_test_setup, sym_test_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_symbolic_ctx_create_destroy),
        T(test_symbolic_header_example_simplifies_to_n),
        T(test_symbolic_var_same_name_same_node),
        T(test_symbolic_var_rejects_bad_declarations),
        T(test_symbolic_bind_unbind_roundtrip),
        T(test_symbolic_bind_outside_range_is_error),
        T(test_symbolic_hashcons_commutative_order_by_id),
        T(test_symbolic_hash_stable_across_contexts),
        T(test_symbolic_split_const),
        T(test_symbolic_bounds_arithmetic),
        T(test_symbolic_bounds_division),
        T(test_symbolic_bounds_modulo),
        T(test_symbolic_bounds_logic_and_where),
        T(test_symbolic_bounds_overflow_is_error),
        T(test_symbolic_errors_first_wins_and_null_propagates),
        T(test_symbolic_eval_floor_semantics),
        T(test_symbolic_eval_errors),
        T(test_symbolic_render_format_and_truncation),
        T(test_symbolic_substitute_resimplifies),
        T(test_symbolic_substitute_variable_replaces_bound_nodes),
        T(test_symbolic_unbind_all_collects_in_order),
        T(test_symbolic_unbind_all_conflicting_values_is_error),
        T(test_symbolic_guard_check_and_render),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
