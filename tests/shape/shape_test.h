/* Helpers shared by the shape/ tests: a context per test, integer arrays turned into
 * expressions, and assertions on the fields of a view. */
#ifndef KILN_TESTS_SHAPE_TEST_H
#define KILN_TESTS_SHAPE_TEST_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "shape.h"

typedef struct st_env {
    sym_ctx *sym;
    shape_ctx *ctx;
} st_env;

static inline int st_setup(void **state) {
    st_env *e = calloc(1, sizeof(*e));
    if (!e || sym_ctx_create(NULL, &e->sym) != KILN_OK ||
        shape_ctx_create(NULL, e->sym, &e->ctx) != KILN_OK)
        return -1;
    *state = e;
    return 0;
}

static inline int st_teardown(void **state) {
    st_env *e = *state;
    shape_ctx_destroy(e->ctx);
    sym_ctx_destroy(e->sym);
    free(e);
    return 0;
}

#define ST_ENV(state)                                                                              \
    st_env *env = *(state);                                                                        \
    shape_ctx *C = env->ctx;                                                                       \
    sym_ctx *S = env->sym
#define ST_N(...) ((int64_t[]){__VA_ARGS__})
#define ST_COUNT(...) (uint32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* n constants as expressions (a static buffer per slot, enough for a few live arrays). */
static inline const sym_node *const *st_c(sym_ctx *s, int slot, uint32_t n, const int64_t *v) {
    static const sym_node *buf[8][SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < n; i++)
        buf[slot][i] = sym_const(s, v[i]);
    return buf[slot];
}
#define ST_A(slot, ...) st_c(S, slot, ST_COUNT(__VA_ARGS__), ST_N(__VA_ARGS__))

static inline int64_t st_val(const sym_node *n) {
    int64_t v = INT64_MIN;
    base_error err;
    base_error_clear(&err);
    if (!sym_is_const(n, &v) && sym_eval(n, NULL, &v, &err) != KILN_OK)
        return INT64_MIN;
    return v;
}

static inline void st_assert_ints(const sym_node *const *got, uint32_t n, const int64_t *want,
                                  const char *what) {
    for (uint32_t i = 0; i < n; i++) {
        if (st_val(got[i]) != want[i])
            print_error("%s[%u] = %lld, want %lld\n", what, i, (long long)st_val(got[i]),
                        (long long)want[i]);
        assert_int_equal(st_val(got[i]), want[i]);
    }
}

/* shape, strides, offset; mask NULL means unmasked. */
static inline void st_assert_view(const shape_view *v, uint32_t ndim, const int64_t *shape,
                                  const int64_t *strides, int64_t offset, const int64_t *mask) {
    assert_int_equal(v->ndim, ndim);
    st_assert_ints(v->shape, ndim, shape, "shape");
    st_assert_ints(v->strides, ndim, strides, "strides");
    assert_int_equal(st_val(v->offset), offset);
    assert_int_equal(v->masked, mask != NULL);
    for (uint32_t i = 0; mask && i < ndim; i++) {
        assert_int_equal(st_val(v->mask_begin[i]), mask[2 * i]);
        assert_int_equal(st_val(v->mask_end[i]), mask[2 * i + 1]);
    }
}

static inline void st_assert_user(const shape_view *v, const int64_t *strides, int64_t offset) {
    st_assert_ints(v->user_strides, v->ndim, strides, "user_strides");
    assert_int_equal(st_val(v->user_offset), offset);
}

static inline shape_view st_contig(shape_ctx *c, sym_ctx *s, uint32_t n, const int64_t *dims) {
    shape_view v;
    assert_int_equal(shape_view_contiguous(c, n, st_c(s, 7, n, dims), &v), KILN_OK);
    return v;
}
#define ST_CONTIG(...) st_contig(C, S, ST_COUNT(__VA_ARGS__), ST_N(__VA_ARGS__))

#endif
