/* Guards: assumptions over Variables recorded by code that relies on them and checked
 * against an assignment before that code is reused. */
#include "sym_internal.h"

#include <stdio.h>

bool sym_guard_check(const sym_guard *g, const sym_assignment *a, base_error *err) {
    int64_t v, r;
    if (!g || !g->expr) {
        base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "sym_guard_check needs a guard");
        return false;
    }
    if (sym_eval(g->expr, a, &v, err) != KILN_OK)
        return false;
    switch (g->kind) {
    case SYM_GUARD_RANGE:
        return g->a <= v && v <= g->b;
    case SYM_GUARD_EQ:
        return v == g->a;
    case SYM_GUARD_DIVISIBLE:
        if (g->a == 0) {
            base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "a divisibility guard by 0");
            return false;
        }
        return base_floormod_i64(v, g->a, &r) && r == 0;
    case SYM_GUARD_TRUE:
        return v != 0;
    }
    base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "unknown guard kind %d", (int)g->kind);
    return false;
}

size_t sym_guard_render(const sym_guard *g, char *buf, size_t cap) {
    char tmp[64];
    size_t n = 0;
    int k = 0;
    if (!g)
        return (size_t)snprintf(buf, cap, "<null guard>");
    switch (g->kind) {
    case SYM_GUARD_RANGE:
        k = snprintf(buf, cap, "%lld <= ", (long long)g->a);
        break;
    default:
        break;
    }
    n = (size_t)k;
    n += sym_render(g->expr, n < cap ? buf + n : NULL, n < cap ? cap - n : 0);
    switch (g->kind) {
    case SYM_GUARD_RANGE:
        snprintf(tmp, sizeof tmp, " <= %lld", (long long)g->b);
        break;
    case SYM_GUARD_EQ:
        snprintf(tmp, sizeof tmp, " == %lld", (long long)g->a);
        break;
    case SYM_GUARD_DIVISIBLE:
        snprintf(tmp, sizeof tmp, " %% %lld == 0", (long long)g->a);
        break;
    default:
        tmp[0] = '\0';
        break;
    }
    k = snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, "%s", tmp);
    return n + (size_t)k;
}
