/* Fail-the-Nth-allocation: a workload that touches every allocating path (Variables, the
 * node table's growth, long sums that leave the term list's stack buffer, substitution's
 * memo, unbinding) runs with allocation N failing, for every N until a run needs no failure.
 * Each run must end cleanly: the error recorded as KILN_ERROR_OUT_OF_HOST_MEMORY, no block
 * leaked, no size mismatch, and any expression it did produce evaluating to the right value. */
#include "sym_test.h"

#include "test_alloc.h"

enum { NV = 40 };

typedef struct workload {
    const sym_node *vars[NV + 1];
    int64_t values[NV + 1];
    const sym_node *result;
} workload;

static void run_workload(sym_ctx *c, workload *w) {
    const sym_node *sum = sym_const(c, 0);
    for (int i = 0; i < NV; i++) {
        char name[16];
        snprintf(name, sizeof name, "v%d", i);
        w->vars[i] = sym_var(c, name, 0, i + 3);
        w->values[i] = i % (i + 4);
        sum = sym_add(c, sum, sym_mul_c(c, w->vars[i], i + 1)); /* > 16 terms */
    }
    const sym_node *n = sym_var(c, "n", 1, 64);
    w->vars[NV] = n;
    w->values[NV] = 9;
    const sym_node *idx =
        sym_floormod_c(c, sym_floordiv_c(c, sym_add(c, sym_mul_c(c, sum, 4), w->vars[0]), 4), 7);
    const sym_node *e =
        sym_where(c, sym_lt_c(c, idx, 3), sym_min(c, idx, w->vars[1]),
                  sym_max(c, sym_floordiv(c, sum, sym_add_c(c, w->vars[2], 1)), w->vars[3]));
    e = sym_add(c, e, sym_floormod(c, sym_mul(c, w->vars[4], n), n));
    e = sym_add(c, e, sym_mul(c, sym_bind(c, n, 9), sym_eq(c, w->vars[5], sym_const(c, 2))));
    size_t found = 0;
    const sym_node *bv[2];
    int64_t vals[2];
    e = sym_unbind_all(c, e, bv, vals, 2, &found);
    const sym_node *from[] = {w->vars[6]}, *to[] = {sym_add_c(c, w->vars[7], 1)};
    e = sym_substitute(c, e, from, to, 1);
    w->values[6] = w->values[7] + 1;
    w->result = e;
}

static bool eval_result(const workload *w, int64_t *out) {
    sym_assignment as = {w->vars, w->values, NV + 1};
    base_error err = {0};
    return sym_eval(w->result, &as, out, &err) == KILN_OK;
}

static void test_symbolic_alloc_fail_nth_allocation_cleanly(void **state) {
    (void)state;
    test_alloc clean = {0};
    base_allocator ca = test_allocator(&clean);
    sym_ctx *c = NULL;
    workload ref = {0};
    int64_t want = 0, got = 0;
    assert_int_equal(sym_ctx_create(&ca, &c), KILN_OK);
    run_workload(c, &ref);
    assert_non_null(ref.result);
    assert_int_equal(sym_ctx_status(c), KILN_OK);
    assert_true(eval_result(&ref, &want));
    sym_ctx_destroy(c);
    assert_int_equal(clean.live_blocks, 0);
    long total = clean.count;
    assert_true(total > 10);
    fprintf(stderr, "workload: %ld allocations\n", total);

    long failed_runs = 0;
    for (long n = 1; n <= total + 1; n++) {
        test_alloc st = {.fail_at = n};
        base_allocator a = test_allocator(&st);
        c = NULL;
        kiln_status cs = sym_ctx_create(&a, &c);
        if (cs == KILN_OK) {
            workload w = {0};
            run_workload(c, &w);
            if (st.failures > 0)
                assert_int_equal(sym_ctx_status(c), KILN_ERROR_OUT_OF_HOST_MEMORY);
            else
                assert_int_equal(sym_ctx_status(c), KILN_OK);
            if (w.result) { /* whatever was produced is still right */
                assert_true(eval_result(&w, &got));
                assert_int_equal(got, want);
            }
            sym_ctx_destroy(c);
        } else {
            assert_int_equal(cs, KILN_ERROR_OUT_OF_HOST_MEMORY);
            assert_null(c);
        }
        failed_runs += st.failures > 0;
        assert_int_equal(st.live_blocks, 0);
        assert_int_equal(st.live_bytes, 0);
        assert_int_equal(st.size_mismatches, 0);
    }
    assert_int_equal(failed_runs, total);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_symbolic_alloc_fail_nth_allocation_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
