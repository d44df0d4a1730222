/* Shared helpers of the symbolic/ tests: a context per test and a check of an expression's
 * rendering and bounds that names the failing line. */
#ifndef KILN_TESTS_SYMBOLIC_SYM_TEST_H
#define KILN_TESTS_SYMBOLIC_SYM_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sym.h"

static inline int sym_test_setup(void **state) {
    sym_ctx *ctx = NULL;
    if (sym_ctx_create(NULL, &ctx) != KILN_OK)
        return -1;
    *state = ctx;
    return 0;
}

static inline int sym_test_teardown(void **state) {
    sym_ctx_destroy(*state);
    return 0;
}

static inline void sym_check_at(const char *file, int line, sym_ctx *ctx, const sym_node *n,
                                int64_t lo, int64_t hi, const char *want) {
    char got[1024];
    if (!n)
        fail_msg("%s:%d: NULL node (%s)", file, line, sym_ctx_message(ctx));
    sym_render(n, got, sizeof got);
    if (strcmp(got, want) != 0)
        fail_msg("%s:%d: rendered \"%s\", expected \"%s\"", file, line, got, want);
    if (sym_vmin(n) != lo || sym_vmax(n) != hi)
        fail_msg("%s:%d: %s has bounds [%lld, %lld], expected [%lld, %lld]", file, line, got,
                 (long long)sym_vmin(n), (long long)sym_vmax(n), (long long)lo, (long long)hi);
    assert_int_equal(sym_ctx_status(ctx), KILN_OK);
}

/* CHECK(node, vmin, vmax, "rendering") inside a test whose context is ctx. */
#define CHECK(n, lo, hi, s) sym_check_at(__FILE__, __LINE__, ctx, (n), (lo), (hi), (s))

static inline bool sym_is_k_test(const sym_node *n, int64_t want) {
    int64_t v;
    return sym_is_const(n, &v) && v == want;
}

static inline const char *sym_str(const sym_node *n, char *buf, size_t cap) {
    sym_render(n, buf, cap);
    return buf;
}

#endif
