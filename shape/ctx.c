/* The shape context, proofs over symbolic values, and canonical form. */
#include "shape_internal.h"

#include <string.h>

kiln_status shape_ctx_create(const base_allocator *alloc, sym_ctx *sym, shape_ctx **out) {
    if (!out)
        return KILN_ERROR_INVALID_ARGUMENT;
    *out = NULL;
    if (!sym)
        return KILN_ERROR_INVALID_ARGUMENT;
    base_allocator a = alloc ? *alloc : base_allocator_make(NULL, NULL);
    shape_ctx *ctx = base_calloc(&a, 1, sizeof(*ctx));
    if (!ctx)
        return KILN_ERROR_OUT_OF_HOST_MEMORY;
    ctx->alloc = a;
    ctx->sym = sym;
    ctx->alias_enum_limit = 1u << 16;
    *out = ctx;
    return KILN_OK;
}

void shape_ctx_destroy(shape_ctx *ctx) {
    if (!ctx)
        return;
    base_allocator a = ctx->alloc;
    base_free(&a, ctx, sizeof(*ctx));
}

void shape_ctx_set_alias_enum_limit(shape_ctx *ctx, uint64_t elements) {
    ctx->alias_enum_limit = elements;
}

sym_ctx *shape_ctx_sym(shape_ctx *ctx) {
    return ctx ? ctx->sym : NULL;
}

const char *shape_ctx_message(const shape_ctx *ctx) {
    return ctx ? base_error_message(&ctx->err) : "no shape context";
}

void shape_ctx_clear_error(shape_ctx *ctx) {
    if (!ctx)
        return;
    base_error_clear(&ctx->err);
    sym_ctx_clear_error(ctx->sym);
}

kiln_status shape_fail(shape_ctx *ctx, kiln_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    base_error_clear(&ctx->err);
    base_error_setv(&ctx->err, status, fmt, ap);
    va_end(ap);
    return status;
}

kiln_status shape_null(shape_ctx *ctx, const char *fmt, ...) {
    if (sym_ctx_status(ctx->sym) != KILN_OK)
        return shape_sym_status(ctx);
    va_list ap;
    va_start(ap, fmt);
    base_error_clear(&ctx->err);
    base_error_setv(&ctx->err, KILN_ERROR_INVALID_ARGUMENT, fmt, ap);
    va_end(ap);
    return KILN_ERROR_INVALID_ARGUMENT;
}

kiln_status shape_sym_status(shape_ctx *ctx) {
    kiln_status s = sym_ctx_status(ctx->sym);
    if (s == KILN_OK)
        return KILN_OK;
    shape_fail(ctx, s, "symbolic: %s", sym_ctx_message(ctx->sym));
    sym_ctx_clear_error(ctx->sym); /* reported here; the next operation starts clean */
    return s;
}

const sym_node *shape_k(shape_ctx *ctx, int64_t v) {
    return sym_const(ctx->sym, v);
}

bool shape_is(const sym_node *n, int64_t v) {
    int64_t x;
    return n && sym_is_const(n, &x) && x == v;
}

bool shape_value(const sym_node *n, int64_t *v) {
    if (!n)
        return false;
    if (sym_is_const(n, v))
        return true;
    base_error err;
    base_error_clear(&err);
    return sym_eval(n, NULL, v, &err) == KILN_OK;
}

/* A proof whose arithmetic overflows proves nothing, and the error the symbolic context
 * recorded for it is dropped: it is no failure of the operation asking (which would otherwise
 * report it later, from an unrelated call). An error pending before stays. */
static bool unproven(shape_ctx *ctx, kiln_status before) {
    if (before == KILN_OK)
        sym_ctx_clear_error(ctx->sym);
    return false;
}

bool shape_prove_le(shape_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (!a || !b)
        return false;
    if (a == b || sym_vmax(a) <= sym_vmin(b))
        return true;
    if (sym_vmin(a) > sym_vmax(b)) /* a > b for every value: b - a's bounds say so too */
        return false;
    kiln_status before = sym_ctx_status(ctx->sym);
    const sym_node *d = sym_sub(ctx->sym, b, a);
    return d ? sym_vmin(d) >= 0 : unproven(ctx, before);
}

bool shape_prove_lt(shape_ctx *ctx, const sym_node *a, const sym_node *b) {
    /* The bounds decide most questions without building a + 1 and b - (a + 1) (every view's
     * check that its sizes are not negative asks one) */
    if (a && b && sym_vmax(a) < sym_vmin(b))
        return true;
    if (a && b && sym_vmin(a) >= sym_vmax(b))
        return false;
    kiln_status before = sym_ctx_status(ctx->sym);
    const sym_node *a1 = a ? sym_add_c(ctx->sym, a, 1) : NULL;
    if (a && !a1)
        return unproven(ctx, before);
    return shape_prove_le(ctx, a1, b);
}

bool shape_refute_le(shape_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (!a || !b)
        return false;
    if (shape_prove_lt(ctx, b, a))
        return true;
    int64_t x, y;
    return shape_value(a, &x) && shape_value(b, &y) && x > y;
}

kiln_status shape_axis(shape_ctx *ctx, int32_t dim, uint32_t ndim, uint32_t *out) {
    int64_t d = dim;
    if (d < 0)
        d += (int64_t)ndim;
    if (d < 0 || d >= (int64_t)ndim)
        return shape_fail(ctx, KILN_ERROR_OUT_OF_RANGE, "dim %d is out of range for %u dims",
                          (int)dim, ndim);
    *out = (uint32_t)d;
    return KILN_OK;
}

void shape_contig_strides(shape_ctx *ctx, uint32_t ndim, const sym_node *const *shape, bool torch,
                          const sym_node **strides) {
    const sym_node *acc = shape_k(ctx, 1);
    for (uint32_t i = ndim; i-- > 0;) {
        strides[i] = (!torch && shape_is(shape[i], 1)) ? shape_k(ctx, 0) : acc;
        const sym_node *s = shape[i];
        if (torch && sym_vmin(s) < 1)
            s = sym_max(ctx->sym, s, shape_k(ctx, 1));
        acc = sym_mul(ctx->sym, acc, s);
    }
}

void shape_user_fresh(shape_ctx *ctx, shape_view *v) {
    shape_contig_strides(ctx, v->ndim, v->shape, true, v->user_strides);
    v->user_offset = shape_k(ctx, 0);
}

bool shape_all_const(const shape_view *v) {
    if (!sym_is_const(v->offset, NULL))
        return false;
    for (uint32_t i = 0; i < v->ndim; i++) {
        if (!sym_is_const(v->shape[i], NULL) || !sym_is_const(v->strides[i], NULL))
            return false;
        if (v->masked &&
            (!sym_is_const(v->mask_begin[i], NULL) || !sym_is_const(v->mask_end[i], NULL)))
            return false;
    }
    return true;
}

/* ---- equality by exhaustion ---------------------------------------------------------------- */

enum { EQ_MAX_VARS = 2, EQ_MAX_POINTS = 1024, EQ_MAX_NODES = 128 };

/* The free Variables of n (at most EQ_MAX_VARS); false when there are more or n is large. */
static bool collect_vars(const sym_node *n, const sym_node **vars, size_t *nv) {
    const sym_node *stack[EQ_MAX_NODES], *seen[EQ_MAX_NODES];
    size_t sp = 0, ns = 0;
    stack[sp++] = n;
    while (sp > 0) {
        const sym_node *x = stack[--sp];
        bool dup = false;
        for (size_t i = 0; i < ns && !dup; i++)
            dup = seen[i] == x;
        if (dup)
            continue;
        if (ns == EQ_MAX_NODES)
            return false;
        seen[ns++] = x;
        if (sym_node_kind(x) == SYM_VAR) {
            if (*nv == EQ_MAX_VARS)
                return false;
            vars[(*nv)++] = x;
        }
        for (uint32_t i = 0; i < sym_node_arity(x); i++) {
            if (sp == EQ_MAX_NODES)
                return false;
            stack[sp++] = sym_node_src(x, i);
        }
    }
    return true;
}

/* d == 0 at every point of the Variables' ranges (at most EQ_MAX_POINTS of them). */
static bool zero_everywhere(const sym_node *d, const sym_node *const *vars, size_t nv) {
    int64_t lo[EQ_MAX_VARS], hi[EQ_MAX_VARS], val[EQ_MAX_VARS];
    uint64_t points = 1;
    for (size_t i = 0; i < nv; i++) {
        sym_var_info(vars[i], NULL, &lo[i], &hi[i]);
        if (hi[i] - lo[i] >= EQ_MAX_POINTS ||
            (points *= (uint64_t)(hi[i] - lo[i] + 1)) > EQ_MAX_POINTS)
            return false;
        val[i] = lo[i];
    }
    sym_assignment as = {vars, val, nv};
    for (uint64_t p = 0; p < points; p++) {
        uint64_t r = p;
        for (size_t i = 0; i < nv; i++) {
            uint64_t span = (uint64_t)(hi[i] - lo[i] + 1);
            val[i] = lo[i] + (int64_t)(r % span);
            r /= span;
        }
        int64_t x;
        base_error err;
        base_error_clear(&err);
        if (sym_eval(d, &as, &x, &err) != KILN_OK || x != 0)
            return false;
    }
    return true;
}

bool shape_prove_eq(shape_ctx *ctx, const sym_node *a, const sym_node *b) {
    if (!a || !b)
        return false;
    if (a == b)
        return true;
    const sym_node *d = sym_sub(ctx->sym, a, b);
    if (!d)
        return false;
    if (sym_vmin(d) == 0 && sym_vmax(d) == 0)
        return true;
    /* bound Variables count as Variables: the answer must hold for every binding */
    size_t found = 0;
    d = sym_unbind_all(ctx->sym, d, NULL, NULL, 0, &found);
    const sym_node *vars[EQ_MAX_VARS];
    size_t nv = 0;
    return d && collect_vars(d, vars, &nv) && zero_everywhere(d, vars, nv);
}

/* ---- canonical form ---------------------------------------------------------------------- */

static void canon_zero_all(shape_ctx *ctx, shape_view *v) {
    for (uint32_t i = 0; i < v->ndim; i++)
        v->strides[i] = shape_k(ctx, 0);
    v->offset = shape_k(ctx, 0);
}

/* A mask that admits nothing in some dimension admits nothing at all: (0,0) everywhere. */
static bool canon_empty_mask(shape_ctx *ctx, shape_view *v) {
    bool empty = false;
    for (uint32_t i = 0; i < v->ndim && !empty; i++)
        empty = shape_prove_le(ctx, v->mask_end[i], v->mask_begin[i]);
    if (!empty)
        return false;
    canon_zero_all(ctx, v);
    for (uint32_t i = 0; i < v->ndim; i++)
        v->mask_begin[i] = v->mask_end[i] = shape_k(ctx, 0);
    return true;
}

static void canon_mask(shape_ctx *ctx, shape_view *v) {
    if (canon_empty_mask(ctx, v))
        return;
    bool full = true;
    for (uint32_t i = 0; i < v->ndim; i++) {
        /* clamp the mask into [0, size] */
        if (!shape_prove_le(ctx, shape_k(ctx, 0), v->mask_begin[i]))
            v->mask_begin[i] = sym_max(ctx->sym, v->mask_begin[i], shape_k(ctx, 0));
        if (!shape_prove_le(ctx, v->mask_end[i], v->shape[i]))
            v->mask_end[i] = sym_min(ctx->sym, v->mask_end[i], v->shape[i]);
        bool dim_full = shape_is(v->mask_begin[i], 0) && v->mask_end[i] == v->shape[i];
        full = full && dim_full;
        /* exactly one valid index b: the stride moves into the offset */
        const sym_node *len = sym_sub(ctx->sym, v->mask_end[i], v->mask_begin[i]);
        if (!dim_full && shape_is(len, 1) && !shape_is(v->strides[i], 0)) {
            v->offset =
                sym_add(ctx->sym, v->offset, sym_mul(ctx->sym, v->strides[i], v->mask_begin[i]));
            v->strides[i] = shape_k(ctx, 0);
        }
    }
    if (full) {
        v->masked = false;
        memset(v->mask_begin, 0, sizeof(v->mask_begin));
        memset(v->mask_end, 0, sizeof(v->mask_end));
    }
}

static bool canon_is_contiguous(shape_ctx *ctx, const shape_view *v) {
    if (v->masked || !shape_is(v->offset, 0))
        return false;
    const sym_node *want[SHAPE_MAX_DIMS];
    shape_contig_strides(ctx, v->ndim, v->shape, false, want);
    for (uint32_t i = 0; i < v->ndim; i++)
        if (want[i] != v->strides[i])
            return false;
    return true;
}

void shape_canon(shape_ctx *ctx, shape_view *v) {
    for (uint32_t i = 0; i < v->ndim; i++) {
        if (shape_is(v->shape[i], 0)) {
            canon_zero_all(ctx, v);
            v->masked = false;
            memset(v->mask_begin, 0, sizeof(v->mask_begin));
            memset(v->mask_end, 0, sizeof(v->mask_end));
            v->contiguous = true;
            return;
        }
    }
    for (uint32_t i = 0; i < v->ndim; i++)
        if (shape_is(v->shape[i], 1))
            v->strides[i] = shape_k(ctx, 0);
    if (v->masked)
        canon_mask(ctx, v);
    v->contiguous = canon_is_contiguous(ctx, v);
}

kiln_status shape_finish(shape_ctx *ctx, const shape_view *v, shape_view *out) {
    bool ok = v->offset && v->user_offset;
    for (uint32_t i = 0; i < v->ndim && ok; i++) {
        ok = v->shape[i] && v->strides[i] && v->user_strides[i];
        if (v->masked)
            ok = ok && v->mask_begin[i] && v->mask_end[i];
    }
    if (!ok) {
        kiln_status s = shape_sym_status(ctx);
        return s != KILN_OK ? s
                            : shape_fail(ctx, KILN_ERROR_INTERNAL, "a view field was not built");
    }
    *out = *v;
    return KILN_OK;
}

kiln_status shape_check_view(shape_ctx *ctx, const shape_view *v) {
    bool ok = v && v->ndim <= SHAPE_MAX_DIMS && v->offset && v->user_offset;
    for (uint32_t i = 0; ok && i < v->ndim; i++) {
        ok = v->shape[i] && v->strides[i] && v->user_strides[i];
        ok = ok && (!v->masked || (v->mask_begin[i] && v->mask_end[i]));
    }
    return ok ? KILN_OK
              : shape_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                           "not a view made by shape/ (NULL, rank or field missing)");
}

kiln_status shape_check_tracker(shape_ctx *ctx, const shape_tracker *t) {
    if (!t || t->nviews < 1 || t->nviews > SHAPE_MAX_VIEWS)
        return shape_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "not a tracker (view count)");
    for (uint32_t k = 0; k < t->nviews; k++)
        SHAPE_CHECK(shape_check_view(ctx, &t->views[k]));
    return KILN_OK;
}

bool shape_view_equal(const shape_view *a, const shape_view *b) {
    if (a->ndim != b->ndim || a->masked != b->masked || a->offset != b->offset)
        return false;
    for (uint32_t i = 0; i < a->ndim; i++) {
        if (a->shape[i] != b->shape[i] || a->strides[i] != b->strides[i])
            return false;
        if (a->masked && (a->mask_begin[i] != b->mask_begin[i] || a->mask_end[i] != b->mask_end[i]))
            return false;
    }
    return true;
}

const sym_node *shape_view_numel(shape_ctx *ctx, const shape_view *v) {
    const sym_node *n = shape_k(ctx, 1);
    for (uint32_t i = 0; i < v->ndim; i++)
        n = sym_mul(ctx->sym, n, v->shape[i]);
    return n;
}
