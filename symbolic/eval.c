/* Evaluation under an assignment: exact int64 arithmetic with floor division and modulo;
 * an unassigned Variable, a value outside a Variable's range, division by zero and overflow
 * are errors, never undefined behaviour. Select, and, or evaluate lazily (like C). */
#include "sym_internal.h"

static kiln_status eval_var(const sym_node *n, const sym_assignment *a, int64_t *out,
                            base_error *err) {
    for (size_t i = 0; a && i < a->count; i++) {
        if (a->vars[i] != n)
            continue;
        if (a->values[i] < n->vmin || a->values[i] > n->vmax)
            return base_error_set(err, KILN_ERROR_OUT_OF_RANGE,
                                  "%s = %lld is outside its range [%lld, %lld]", n->name,
                                  (long long)a->values[i], (long long)n->vmin, (long long)n->vmax);
        *out = a->values[i];
        return KILN_OK;
    }
    return base_error_set(err, KILN_ERROR_NOT_FOUND, "Variable %s has no value", n->name);
}

static kiln_status eval_rec(const sym_node *n, const sym_assignment *a, int64_t *out,
                            base_error *err);

static kiln_status arith(sym_kind kind, int64_t x, int64_t y, int64_t *out, base_error *err) {
    bool ok = true;
    switch (kind) {
    case SYM_ADD:
        ok = base_add_i64(x, y, out);
        break;
    case SYM_MUL:
        ok = base_mul_i64(x, y, out);
        break;
    case SYM_DIV:
    case SYM_MOD:
        if (y == 0)
            return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                                  "division by zero evaluating a symbolic expression");
        ok = kind == SYM_DIV ? base_floordiv_i64(x, y, out) : base_floormod_i64(x, y, out);
        break;
    case SYM_MIN:
        *out = x < y ? x : y;
        break;
    case SYM_MAX:
        *out = x > y ? x : y;
        break;
    case SYM_LT:
        *out = x < y;
        break;
    case SYM_EQ:
        *out = x == y;
        break;
    default: /* SYM_NE */
        *out = x != y;
        break;
    }
    return ok ? KILN_OK
              : base_error_set(err, KILN_ERROR_OVERFLOW, "int64 overflow evaluating a symbolic %s",
                               sym_kinds[kind].name);
}

/* and, or, where: the operands that decide are evaluated first. */
static kiln_status eval_lazy(const sym_node *n, const sym_assignment *a, int64_t *out,
                             base_error *err) {
    int64_t x;
    kiln_status st = eval_rec(n->src[0], a, &x, err);
    if (st != KILN_OK)
        return st;
    if (n->kind == SYM_WHERE)
        return eval_rec(x ? n->src[1] : n->src[2], a, out, err);
    if ((n->kind == SYM_AND && !x) || (n->kind == SYM_OR && x)) {
        *out = n->kind == SYM_OR;
        return KILN_OK;
    }
    st = eval_rec(n->src[1], a, &x, err);
    *out = x != 0;
    return st;
}

static kiln_status eval_rec(const sym_node *n, const sym_assignment *a, int64_t *out,
                            base_error *err) {
    int64_t x, y;
    kiln_status st;
    switch ((sym_kind)n->kind) {
    case SYM_CONST:
    case SYM_BIND:
        *out = n->value;
        return KILN_OK;
    case SYM_VAR:
        return eval_var(n, a, out, err);
    case SYM_NOT:
        st = eval_rec(n->src[0], a, &x, err);
        *out = x == 0;
        return st;
    case SYM_AND:
    case SYM_OR:
    case SYM_WHERE:
        return eval_lazy(n, a, out, err);
    default:
        if ((st = eval_rec(n->src[0], a, &x, err)) != KILN_OK ||
            (st = eval_rec(n->src[1], a, &y, err)) != KILN_OK)
            return st;
        return arith((sym_kind)n->kind, x, y, out, err);
    }
}

kiln_status sym_eval(const sym_node *n, const sym_assignment *a, int64_t *out, base_error *err) {
    if (!n || !out)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "sym_eval needs a node and out");
    if (a && a->count && (!a->vars || !a->values))
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "malformed sym_assignment");
    return eval_rec(n, a, out, err);
}
