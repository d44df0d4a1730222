/* The lazy graph: immutable, hash-consed nodes; tensors are (node, view) pairs; creation and
 * movement ops. Movement ops change only the view: no data moves. */
#include "eng.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const ir_type dtype_to_ir[] = {
    [KILN_F32] = IR_F32, [KILN_F16] = IR_F16, [KILN_I32] = IR_I32,   [KILN_U32] = IR_U32,
    [KILN_I8] = IR_I8,   [KILN_U8] = IR_U8,   [KILN_BOOL] = IR_BOOL, [KILN_I64] = IR_I64,
};
_Static_assert(BASE_COUNTOF(dtype_to_ir) == KILN_DTYPE_COUNT_, "one IR type per dtype");

bool eng_dtype_valid(kiln_dtype d) {
    return (unsigned)d < KILN_DTYPE_COUNT_;
}

ir_type eng_ir_type(kiln_dtype d) {
    return dtype_to_ir[d];
}

kiln_dtype eng_dtype(ir_type t) {
    for (int d = 0; d < KILN_DTYPE_COUNT_; d++) {
        if (dtype_to_ir[d] == t)
            return (kiln_dtype)d;
    }
    return KILN_F32;
}

uint32_t eng_type_size(ir_type t) {
    return ir_type_bits(t) / 8;
}

size_t kiln_dtype_size(kiln_dtype dtype) {
    return eng_dtype_valid(dtype) ? eng_type_size(dtype_to_ir[dtype]) : 0;
}

const char *kiln_dtype_name(kiln_dtype dtype) {
    return eng_dtype_valid(dtype) ? ir_type_name(dtype_to_ir[dtype]) : "?";
}

/* ---- nodes ---------------------------------------------------------------------------------- */

eng_node *eng_node_new(kiln_context *ctx, eng_kind kind, ir_op op, ir_type type, uint32_t ndim,
                       const sym_node *const *shape) {
    eng_node *n = base_calloc(&ctx->alloc, 1, sizeof *n);
    if (!n)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a graph node");
    n->kind = kind;
    n->op = op;
    n->type = type;
    n->ndim = ndim;
    for (uint32_t d = 0; d < ndim; d++)
        n->shape[d] = shape[d];
    n->id = ctx->next_id++;
    return n;
}

bool eng_tracker_equal(const shape_tracker *a, const shape_tracker *b) {
    if (a == b)
        return true;
    if (a->nviews != b->nviews)
        return false;
    for (uint32_t i = 0; i < a->nviews; i++) {
        if (!shape_view_equal(&a->views[i], &b->views[i]))
            return false;
    }
    return true;
}

/* s's hash; unbound, with each bound Variable's as the Variable's (its value left out). */
static uint64_t sym_hash(const sym_node *s, bool unbound) {
    if (!s)
        return 0;
    if (!unbound || !sym_node_binds(s))
        return sym_node_hash(s);
    const sym_node *var;
    int64_t value;
    if (sym_unbind(s, &var, &value))
        return sym_node_hash(var);
    uint64_t h = base_hash_u64(sym_node_kind(s), sym_node_arity(s));
    for (uint32_t i = 0; i < sym_node_arity(s); i++)
        h = base_hash_u64(h, sym_hash(sym_node_src(s, i), true));
    return h;
}

/* The structural hash of a tracker's canonical fields (what shape_view_equal compares). */
static uint64_t tracker_hash(const shape_tracker *st, bool unbound) {
    uint64_t h = st->nviews;
    for (uint32_t i = 0; i < st->nviews; i++) {
        const shape_view *v = &st->views[i];
        h = base_hash_u64(h, ((uint64_t)v->ndim << 1) | v->masked);
        h = base_hash_u64(h, sym_hash(v->offset, unbound));
        for (uint32_t d = 0; d < v->ndim; d++) {
            h = base_hash_u64(h, sym_hash(v->shape[d], unbound));
            h = base_hash_u64(h, sym_hash(v->strides[d], unbound));
            if (v->masked) {
                h = base_hash_u64(h, sym_hash(v->mask_begin[d], unbound));
                h = base_hash_u64(h, sym_hash(v->mask_end[d], unbound));
            }
        }
    }
    return h;
}

/* What n is and how it reads its sources: with ids, which nodes those are (the hash-consing
 * key); unbound, without the values its bound Variables have. */
static uint64_t fields_hash(const eng_node *n, bool ids, bool unbound) {
    uint64_t h = base_hash_u64((uint64_t)n->kind, ((uint64_t)n->op << 8) | n->type);
    h = base_hash_u64(h, n->ndim);
    for (uint32_t d = 0; d < n->ndim; d++)
        h = base_hash_u64(h, sym_hash(n->shape[d], unbound));
    for (uint32_t s = 0; s < n->nsrc; s++) {
        if (ids)
            h = base_hash_u64(h, n->src[s].id);
        h = base_hash_u64(h, tracker_hash(n->src[s].st, unbound));
    }
    uint64_t bits;
    memcpy(&bits, &n->value, sizeof bits);
    h = base_hash_u64(h, bits);
    h = base_hash_u64(h, sym_hash(n->value_expr, unbound));
    h = base_hash_u64(h, n->seed);
    h = base_hash_u64(h, n->dim);
    h = base_hash_u64(h, n->rand_word);
    return base_hash_u64(h, ((uint64_t)n->reduce_mask << 2) | n->arg);
}

static uint64_t node_hash(const eng_node *n) {
    return fields_hash(n, true, false);
}

/* fields_hash without ids, then what the node alone has (its sources' count, a write's view). */
static uint64_t own_hash(const eng_node *n, bool unbound) {
    uint64_t h = fields_hash(n, false, unbound);
    h = base_hash_u64(h, ((uint64_t)n->nsrc << 2) | ((uint64_t)n->boundary << 1) | n->unique);
    if (n->dst_view)
        h = base_hash_u64(h, tracker_hash(n->dst_view, unbound));
    return h ? h : 1;
}

uint64_t eng_node_local_hash(eng_node *n) {
    if (!n->local_hash)
        n->local_hash = own_hash(n, true);
    return n->local_hash;
}

uint64_t eng_node_values_hash(eng_node *n) {
    if (!n->values_hash)
        n->values_hash = own_hash(n, false);
    return n->values_hash;
}

/* Adds the bindings in e to b; false where a Variable bound before has another value here,
 * or where b is full. */
static bool collect_bindings(const sym_node *e, eng_bindings *b) {
    if (!sym_node_binds(e))
        return true;
    const sym_node *var;
    int64_t value;
    if (!sym_unbind(e, &var, &value)) {
        for (uint32_t i = 0; i < sym_node_arity(e); i++) {
            if (!collect_bindings(sym_node_src(e, i), b))
                return false;
        }
        return true;
    }
    for (uint32_t i = 0; i < b->count; i++) {
        if (b->vars[i] == var)
            return b->values[i] == value;
    }
    if (b->count == ENG_MAX_PARAMS)
        return false;
    b->vars[b->count] = var;
    b->values[b->count++] = value;
    return true;
}

static bool collect_tracker_bindings(const shape_tracker *st, eng_bindings *b) {
    bool ok = true;
    for (uint32_t i = 0; st && ok && i < st->nviews; i++) {
        const shape_view *v = &st->views[i];
        ok = collect_bindings(v->offset, b);
        for (uint32_t d = 0; ok && d < v->ndim; d++) {
            ok = collect_bindings(v->shape[d], b) && collect_bindings(v->strides[d], b) &&
                 (!v->masked ||
                  (collect_bindings(v->mask_begin[d], b) && collect_bindings(v->mask_end[d], b)));
        }
    }
    return ok;
}

bool eng_node_bindings(const eng_node *n, bool sizes_only, eng_bindings *b) {
    bool ok = true;
    for (uint32_t d = 0; ok && d < n->ndim; d++)
        ok = collect_bindings(n->shape[d], b);
    if (sizes_only)
        return ok;
    ok = ok && collect_bindings(n->value_expr, b) && collect_tracker_bindings(n->dst_view, b);
    for (uint32_t s = 0; ok && s < n->nsrc; s++)
        ok = collect_tracker_bindings(n->src[s].st, b);
    return ok;
}

uint64_t eng_node_frontier_hash(const eng_node *n, bool unbound) {
    const eng_storage *st = n->storage;
    uint64_t h = base_hash_u64(((uint64_t)n->type << 8) | (st ? st->type : 0xff), n->ndim);
    for (uint32_t d = 0; d < n->ndim; d++)
        h = base_hash_u64(h, sym_hash(n->shape[d], unbound));
    if (st) /* a build reads the larger of its size and bound (kernel.c buffer_slot) */
        h = base_hash_u64(h,
                          (st->bound > st->elements ? st->bound : st->elements) << 1 | st->wrapped);
    return h ? h : 1;
}

bool eng_node_same(const void *stored, const void *key, void *user) {
    (void)user;
    const eng_node *a = stored, *b = key;
    if (a->kind != b->kind || a->op != b->op || a->type != b->type || a->ndim != b->ndim ||
        a->nsrc != b->nsrc || memcmp(&a->value, &b->value, sizeof a->value) != 0 ||
        a->value_expr != b->value_expr || a->seed != b->seed || a->rand_word != b->rand_word ||
        a->reduce_mask != b->reduce_mask || a->arg != b->arg || a->dim != b->dim)
        return false;
    for (uint32_t d = 0; d < a->ndim; d++) {
        if (a->shape[d] != b->shape[d])
            return false;
    }
    for (uint32_t s = 0; s < a->nsrc; s++) {
        if (a->src[s].id != b->src[s].id || !eng_tracker_equal(a->src[s].st, b->src[s].st))
            return false;
    }
    return true;
}

/* Returns the live node equal to candidate (a fresh one, then discarded), or makes candidate
 * live and registers it. Buffers and creations are never shared: each holds its own storage. */
eng_node *eng_node_intern(kiln_context *ctx, eng_node *candidate) {
    if (!candidate)
        return NULL;
    if (candidate->kind == ENG_BUFFER || candidate->kind == ENG_WRITE || candidate->unique)
        return eng_node_adopt(ctx, candidate);
    for (uint32_t i = 0; i < candidate->nsrc; i++)
        candidate->src[i].id = candidate->src[i].node->id;
    candidate->hash = node_hash(candidate);
    eng_node *found = base_map_find(&ctx->nodes, candidate->hash, candidate, eng_node_same, NULL);
    if (found) {
        eng_node_discard(ctx, candidate);
        return found;
    }
    if (base_map_insert(&ctx->nodes, candidate->hash, candidate) != KILN_OK) {
        eng_node_discard(ctx, candidate);
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for the node table");
    }
    candidate->interned = true;
    return eng_node_adopt(ctx, candidate);
}

const shape_tracker *eng_tracker_keep(kiln_context *ctx, const shape_tracker *st) {
    if (!st)
        return NULL;
    size_t size = offsetof(shape_tracker, views) + st->nviews * sizeof(shape_view);
    shape_tracker *t = base_malloc(&ctx->alloc, size);
    if (!t)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a view");
    memcpy(t, st, size);
    return t;
}

void eng_tracker_free(kiln_context *ctx, const shape_tracker *st) {
    if (st)
        base_free(&ctx->alloc, (void *)(uintptr_t)st,
                  offsetof(shape_tracker, views) + st->nviews * sizeof(shape_view));
}

const shape_tracker *eng_tracker_contiguous(kiln_context *ctx, uint32_t ndim,
                                            const sym_node *const *shape) {
    shape_tracker st;
    shape_view v;
    kiln_status s = shape_view_contiguous(ctx->shape, ndim, shape, &v);
    if (s == KILN_OK)
        s = shape_tracker_from_view(&v, &st);
    if (s != KILN_OK)
        return eng_fail_from_shape(ctx, s);
    return eng_tracker_keep(ctx, &st);
}

/* A node of its own (never shared) whose value is src read through st (taken: freed on
 * failure), of ndim sizes shape: a storage's private copy before a write, or a write's source
 * read completely before the write. Live, held by nothing yet. */
eng_node *eng_node_copy(kiln_context *ctx, eng_node *src, const shape_tracker *st, uint32_t ndim,
                        const sym_node *const *shape) {
    eng_node *copy = st ? eng_node_new(ctx, ENG_EW, IR_CAST, src->type, ndim, shape) : NULL;
    if (!copy) {
        eng_tracker_free(ctx, st);
        return NULL;
    }
    copy->unique = true;
    copy->nsrc = 1;
    copy->src[0] = (eng_src){src, st, 0};
    return eng_node_adopt(ctx, copy);
}

/* ---- storage --------------------------------------------------------------------------------- */

/* A storage held once (by the caller, who hands the reference to a node). */
eng_storage *eng_storage_new(kiln_context *ctx, ir_type type, uint64_t elements) {
    eng_storage *s = base_calloc(&ctx->alloc, 1, sizeof *s);
    if (!s)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a storage");
    s->type = type;
    s->elements = elements;
    kiln_status st = eng_storage_allocate(ctx, s);
    if (st != KILN_OK) {
        base_free(&ctx->alloc, s, sizeof *s);
        return NULL;
    }
    eng_storage_track(ctx, s);
    return s;
}

/* ---- shapes ------------------------------------------------------------------------------------
 */

/* Checks ndim and converts int64 sizes to expressions. */
bool eng_shape_from_ints(kiln_context *ctx, const char *op, uint32_t ndim, const int64_t *shape,
                         const sym_node **out) {
    if (ndim > SHAPE_MAX_DIMS)
        return eng_fail(ctx, KILN_ERROR_LIMIT_EXCEEDED, "%s: %u dimensions (at most %d)", op, ndim,
                        SHAPE_MAX_DIMS) != NULL;
    if (ndim > 0 && !shape)
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "%s: no shape", op) != NULL;
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE, "%s: size %lld of dim %u is negative", op,
                            (long long)shape[d], d) != NULL;
        out[d] = sym_const(ctx->sym, shape[d]);
        if (!out[d])
            return eng_fail_from_shape_in(ctx, op, KILN_ERROR_OVERFLOW) != NULL;
    }
    /* The element count and the row-major strides are int64s: the product of the sizes, a 0
     * counted as 1 (torch.zeros(2, 0, 3).stride() is (3, 3, 1)), fits. */
    int64_t product = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        if (!base_mul_i64(product, shape[d] ? shape[d] : 1, &product)) {
            char s[512];
            return eng_fail(ctx, KILN_ERROR_OVERFLOW,
                            "%s: the sizes %s overflow int64 (the element count or a stride)", op,
                            eng_shape_render(ndim, out, s, sizeof s)) != NULL;
        }
    }
    return true;
}

bool eng_shape_from_exprs(kiln_context *ctx, const char *op, uint32_t ndim,
                          const kiln_expr *const *shape, const sym_node **out) {
    if (ndim > SHAPE_MAX_DIMS)
        return eng_fail(ctx, KILN_ERROR_LIMIT_EXCEEDED, "%s: %u dimensions (at most %d)", op, ndim,
                        SHAPE_MAX_DIMS) != NULL;
    for (uint32_t d = 0; d < ndim; d++) {
        const kiln_expr *h = shape ? shape[d] : NULL;
        out[d] = eng_expr_arg(ctx, h, op);
        if (h && !out[d]) /* a bad handle, recorded */
            return false;
        if (!out[d]) { /* a NULL expression: its error is recorded already, or it is missing */
            if (ctx->err.status == KILN_OK)
                eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "%s: size of dim %u missing", op, d);
            return false;
        }
        if (sym_vmin(out[d]) < 0)
            return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE, "%s: size of dim %u may be negative", op,
                            d) != NULL;
    }
    return true;
}

const sym_node *eng_numel(kiln_context *ctx, uint32_t ndim, const sym_node *const *shape) {
    const sym_node *n = sym_const(ctx->sym, 1);
    for (uint32_t d = 0; d < ndim; d++)
        n = sym_mul(ctx->sym, n, shape[d]);
    if (!n)
        eng_fail_from_shape(ctx, KILN_ERROR_OVERFLOW);
    return n;
}

kiln_status eng_eval(kiln_context *ctx, const char *what, const sym_node *e, int64_t *out) {
    base_error err = {0};
    kiln_status st = e ? sym_eval(e, NULL, out, &err) : KILN_ERROR_INTERNAL;
    if (st == KILN_ERROR_NOT_FOUND) /* sym_eval: a Variable without a value */
        return base_error_set(&ctx->err, KILN_ERROR_UNBOUND_VARIABLE,
                              "%s: %s: it was never bound (size tensors with the expression "
                              "kiln_bind returns)",
                              what, base_error_message(&err));
    if (st != KILN_OK)
        base_error_set(&ctx->err, st, "%s: %s", what, base_error_message(&err));
    return st;
}

const char *eng_shape_render(uint32_t ndim, const sym_node *const *shape, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (uint32_t d = 0; d < ndim && n < cap; d++) {
        if (d > 0)
            n += (size_t)snprintf(buf + n, cap - n, ", ");
        if (n < cap)
            n += sym_render(shape[d], buf + n, cap - n);
    }
    if (n < cap)
        snprintf(buf + n, cap - n, ")");
    return buf;
}

/* ---- creation -------------------------------------------------------------------------------- */

static kiln_tensor *contiguous_tensor(kiln_context *ctx, eng_node *n) {
    if (!n)
        return NULL;
    return eng_tensor_new(ctx, n, eng_tracker_contiguous(ctx, n->ndim, n->shape));
}

/* A live buffer node holding s (the caller's reference to s passes to it). */
static eng_node *buffer_node(kiln_context *ctx, eng_storage *s, ir_type type, uint32_t ndim,
                             const sym_node *const *dims) {
    if (!s)
        return NULL;
    eng_node *n = eng_node_new(ctx, ENG_BUFFER, IR_CONST, type, ndim, dims);
    if (!n) {
        eng_storage_unref(ctx, s);
        return NULL;
    }
    n->storage = s;
    return eng_node_adopt(ctx, n);
}

static bool check_dtype(kiln_context *ctx, const char *op, kiln_dtype dtype) {
    if (eng_dtype_valid(dtype))
        return true;
    eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "%s: unknown dtype %d", op, (int)dtype);
    return false;
}

kiln_tensor *kiln_from_data(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                            const int64_t *shape, const void *data) {
    const sym_node *dims[SHAPE_MAX_DIMS];
    if (!ctx || !check_dtype(ctx, "kiln_from_data", dtype) ||
        !eng_shape_from_ints(ctx, "kiln_from_data", ndim, shape, dims))
        return NULL;
    int64_t numel = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        if (!base_mul_i64(numel, shape[d], &numel))
            return eng_fail(ctx, KILN_ERROR_OVERFLOW,
                            "kiln_from_data: the element count overflows");
    }
    if (numel > 0 && !data)
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_from_data: no data");
    ir_type type = eng_ir_type(dtype);
    eng_storage *s = eng_storage_new(ctx, type, (uint64_t)numel);
    if (!s)
        return NULL;
    if (eng_storage_write(ctx, s, data, (uint64_t)numel * eng_type_size(type)) != KILN_OK) {
        eng_storage_unref(ctx, s);
        return NULL;
    }
    return contiguous_tensor(ctx, buffer_node(ctx, s, type, ndim, dims));
}

kiln_tensor *kiln_empty(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim, const int64_t *shape) {
    const sym_node *dims[SHAPE_MAX_DIMS];
    if (!ctx || !check_dtype(ctx, "kiln_empty", dtype) ||
        !eng_shape_from_ints(ctx, "kiln_empty", ndim, shape, dims))
        return NULL;
    int64_t numel = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        if (!base_mul_i64(numel, shape[d], &numel))
            return eng_fail(ctx, KILN_ERROR_OVERFLOW, "kiln_empty: the element count overflows");
    }
    eng_storage *s = eng_storage_new(ctx, eng_ir_type(dtype), (uint64_t)numel);
    return contiguous_tensor(ctx, buffer_node(ctx, s, eng_ir_type(dtype), ndim, dims));
}

/* A constant node of the given shape: every element is value (or the expression's value). */
kiln_tensor *eng_full(kiln_context *ctx, ir_type type, uint32_t ndim, const sym_node *const *dims,
                      double value, const sym_node *value_expr) {
    return eng_constant(ctx, type, ndim, dims, value, value_expr, false);
}

/* Whether value, truncated toward zero as a cast truncates it, is a value of the integer type
 * (NaN never is); floats and bool hold every value. */
static bool value_in_range(ir_type type, double value) {
    double t = trunc(value);
    switch (type) {
    case IR_I8:
        return t >= INT8_MIN && t <= INT8_MAX;
    case IR_U8:
        return t >= 0 && t <= UINT8_MAX;
    case IR_I32:
        return t >= INT32_MIN && t <= INT32_MAX;
    case IR_U32:
        return t >= 0 && t <= UINT32_MAX;
    case IR_I64:
        return t >= -0x1p63 && t < 0x1p63;
    default: /* floats (rounded, or +-inf), bool (nonzero is true) */
        return true;
    }
}

/* The value as type holds it, so that lowering's plain conversion of it is defined: an integer
 * truncated toward zero, a bool 0 or 1, true when nonzero and for NaN (Python's
 * bool(float('nan')) is True, and torch.full((1,), nan, dtype=torch.bool) holds True). */
static double held_value(ir_type type, double value) {
    if (type == IR_BOOL)
        return value != 0 ? 1.0 : 0.0; /* NaN != 0 */
    return ir_type_is_float(type) ? value : trunc(value);
}

/* unique: a creation (kiln_full and its forms), a storage of its own; else a constant that
 * computations share. An integer value must fit the type (the public calls check it with
 * eng_value_fits first). */
kiln_tensor *eng_constant(kiln_context *ctx, ir_type type, uint32_t ndim,
                          const sym_node *const *dims, double value, const sym_node *value_expr,
                          bool unique) {
    if (!value_in_range(type, value))
        return eng_fail(ctx, KILN_ERROR_INTERNAL, "a constant %.15g of type %s", value,
                        ir_type_name(type));
    eng_node *n = eng_node_new(ctx, ENG_CONST, IR_CONST, type, ndim, dims);
    if (!n)
        return NULL;
    n->value = held_value(type, value);
    n->value_expr = value_expr;
    n->unique = unique;
    return contiguous_tensor(ctx, eng_node_intern(ctx, n));
}

bool eng_value_fits(kiln_context *ctx, const char *op, ir_type type, double value) {
    /* NaN and values out of range are errors (as torch.full); a fraction truncates. */
    if (!value_in_range(type, value))
        return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE, "%s: %.15g does not fit %s", op, value,
                        ir_type_name(type)) != NULL;
    return true;
}

kiln_tensor *kiln_full_sym(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                           const kiln_expr *const *shape, double value) {
    const sym_node *dims[SHAPE_MAX_DIMS];
    if (!ctx || !check_dtype(ctx, "kiln_full", dtype) ||
        !eng_shape_from_exprs(ctx, "kiln_full", ndim, shape, dims) ||
        !eng_value_fits(ctx, "kiln_full", eng_ir_type(dtype), value))
        return NULL;
    return eng_constant(ctx, eng_ir_type(dtype), ndim, dims, value, NULL, true);
}

/* kiln_full and the calls that are it with a fixed value, each error naming call. */
static kiln_tensor *full_named(kiln_context *ctx, const char *call, kiln_dtype dtype, uint32_t ndim,
                               const int64_t *shape, double value) {
    const sym_node *dims[SHAPE_MAX_DIMS];
    if (!ctx || !check_dtype(ctx, call, dtype) ||
        !eng_shape_from_ints(ctx, call, ndim, shape, dims) ||
        !eng_value_fits(ctx, call, eng_ir_type(dtype), value))
        return NULL;
    return eng_constant(ctx, eng_ir_type(dtype), ndim, dims, value, NULL, true);
}

kiln_tensor *kiln_full(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim, const int64_t *shape,
                       double value) {
    return full_named(ctx, "kiln_full", dtype, ndim, shape, value);
}

kiln_tensor *kiln_zeros(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim, const int64_t *shape) {
    return full_named(ctx, "kiln_zeros", dtype, ndim, shape, 0.0);
}

kiln_tensor *kiln_ones(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim, const int64_t *shape) {
    return full_named(ctx, "kiln_ones", dtype, ndim, shape, 1.0);
}

kiln_tensor *kiln_scalar(kiln_context *ctx, kiln_dtype dtype, double value) {
    return kiln_full(ctx, dtype, 0, NULL, value);
}

static kiln_tensor *leaf(kiln_context *ctx, eng_kind kind, ir_type type, uint32_t ndim,
                         const sym_node *const *dims, uint64_t seed, uint32_t rand_word) {
    eng_node *n = eng_node_new(ctx, kind, IR_CONST, type, ndim, dims);
    if (!n)
        return NULL;
    n->seed = seed;
    n->rand_word = rand_word;
    n->unique = true; /* a creation: a storage of its own */
    return contiguous_tensor(ctx, eng_node_intern(ctx, n));
}

/* x modulo 2^32 in the range of the 32-bit type (u32: [0, 2^32), i32: [-2^31, 2^31)); x is
 * an integer of magnitude below 2^53. */
static double wrap32(double x, ir_type type) {
    double m = fmod(x, 0x1p32);
    if (m < 0)
        m += 0x1p32;
    return type == IR_I32 && m >= 0x1p31 ? m - 0x1p32 : m;
}

/* start + i * step for i < count. Float dtypes compute in f32. An integer dtype computes in
 * i32 (u32 for u32, i64 for i64) when start and step are integers: exact, even where start +
 * i * step passes through values outside the work type (wrapping arithmetic, and the values
 * asked for fit), so the step is pushed modulo 2^32 (2^64); otherwise in f32, truncated by the cast
 * (as torch). Every value must fit the dtype: the first and the last are checked (f32-rounded when
 * the work is f32). */
static kiln_tensor *arange_impl(kiln_context *ctx, kiln_dtype dtype, double start, double stop,
                                double step) {
    if (!ctx || !check_dtype(ctx, "kiln_arange", dtype))
        return NULL;
    if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step))
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                        "kiln_arange: start %.15g, stop %.15g, step %.15g: the bounds must be "
                        "finite and the step nonzero",
                        start, stop, step);
    double count = ceil((stop - start) / step);
    if (!(count > 0))
        count = 0;
    if (count > 9.0e15)
        return eng_fail(ctx, KILN_ERROR_LIMIT_EXCEEDED,
                        "kiln_arange: start %.15g, stop %.15g, step %.15g: %.15g elements", start,
                        stop, step, count);
    if (count <= 1) /* the step does not matter, nor the start of an empty range */
        step = 0, start = count == 0 ? 0 : start;
    ir_type type = eng_ir_type(dtype);
    bool integral = start == floor(start) && step == floor(step);
    ir_type work = ir_type_is_float(type) || !integral ? IR_F32
                   : type == IR_U32 || type == IR_I64  ? type
                                                       : IR_I32;
    double ends[2] = {start, start + (count - 1) * step};
    for (int i = 0; i < 2 && count > 0 && !ir_type_is_float(type); i++) {
        double v = work == IR_F32 ? (double)(float)ends[i] : ends[i];
        if (!value_in_range(type, v))
            return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE,
                            "kiln_arange: start %.15g, stop %.15g, step %.15g: the value %.15g "
                            "does not fit %s",
                            start, stop, step, v, kiln_dtype_name(dtype));
    }
    if (work == IR_I32 || work == IR_U32)
        step = wrap32(step, work);
    else if (work == IR_I64 && (step >= 0x1p63 || step < -0x1p63)) /* the ends fit: < 2^64 */
        step += step > 0 ? -0x1p64 : 0x1p64;
    const sym_node *dim = sym_const(ctx->sym, (int64_t)count);
    kiln_tensor *idx = leaf(ctx, ENG_INDEX, work, 1, &dim, 0, 0);
    kiln_tensor *r = kiln_add(kiln_mul(idx, eng_full(ctx, work, 0, NULL, step, NULL)),
                              eng_full(ctx, work, 0, NULL, start, NULL));
    return work == type ? r : kiln_cast(r, dtype);
}

static kiln_tensor *rand_impl(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                              const int64_t *shape, uint64_t seed) {
    const sym_node *dims[SHAPE_MAX_DIMS];
    if (!ctx || !check_dtype(ctx, "kiln_rand", dtype) ||
        !eng_shape_from_ints(ctx, "kiln_rand", ndim, shape, dims))
        return NULL;
    if (!ir_type_is_float(eng_ir_type(dtype)))
        return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_rand: dtype must be a float");
    kiln_tensor *u = leaf(ctx, ENG_RAND, IR_F32, ndim, dims, seed, 0);
    return dtype == KILN_F32 ? u : kiln_cast(u, dtype);
}

/* Box-Muller: sqrt(-2 ln(1 - u1)) * cos(2 pi u2), u1 and u2 uniform: words 0 and 1 of the
 * element's Philox block (independent; u1 is kiln_rand's number with that seed). */
static kiln_tensor *box_muller(kiln_context *ctx, kiln_tensor *u1, kiln_tensor *u2,
                               kiln_dtype dtype) {
    kiln_tensor *one = eng_full(ctx, IR_F32, 0, NULL, 1.0, NULL);
    kiln_tensor *r = kiln_sqrt(
        kiln_mul(eng_full(ctx, IR_F32, 0, NULL, -2.0, NULL), kiln_log(kiln_sub(one, u1))));
    kiln_tensor *c =
        kiln_cos(kiln_mul(u2, eng_full(ctx, IR_F32, 0, NULL, 6.283185307179586, NULL)));
    kiln_tensor *n = kiln_mul(r, c);
    return dtype == KILN_F32 ? n : kiln_cast(n, dtype);
}

static kiln_tensor *randn_impl(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                               const int64_t *shape, uint64_t seed) {
    const sym_node *dims[SHAPE_MAX_DIMS];
    if (!ctx || !check_dtype(ctx, "kiln_randn", dtype) ||
        !eng_shape_from_ints(ctx, "kiln_randn", ndim, shape, dims))
        return NULL;
    if (!ir_type_is_float(eng_ir_type(dtype)))
        return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_randn: dtype must be a float");
    kiln_tensor *u1 = leaf(ctx, ENG_RAND, IR_F32, ndim, dims, seed, 0);
    kiln_tensor *u2 = leaf(ctx, ENG_RAND, IR_F32, ndim, dims, seed, 1);
    return box_muller(ctx, u1, u2, dtype);
}

/* ---- queries -----------------------------------------------------------------------------------
 */

/* The slot of a queried tensor: a released handle is an error (not sticky) naming call. */
static const eng_tensor *queried(const kiln_tensor *h, const char *call, kiln_status *st) {
    kiln_context *ctx = NULL;
    kiln_status ignored;
    return eng_arg_status((kiln_tensor *)(uintptr_t)h, &ctx, call, st ? st : &ignored);
}

static const shape_view *last_view(const eng_tensor *t) {
    return shape_tracker_last(t->st);
}

kiln_context *kiln_tensor_context(const kiln_tensor *t) {
    const eng_tensor *e = queried(t, "kiln_tensor_context", NULL);
    return e ? e->ctx : NULL;
}

uint32_t kiln_tensor_ndim(const kiln_tensor *t) {
    const eng_tensor *e = queried(t, "kiln_tensor_ndim", NULL);
    return e ? last_view(e)->ndim : 0;
}

kiln_dtype kiln_tensor_dtype(const kiln_tensor *t) {
    const eng_tensor *e = queried(t, "kiln_tensor_dtype", NULL);
    return e ? eng_dtype(e->cell->node->type) : KILN_F32;
}

const kiln_expr *kiln_tensor_size_expr(const kiln_tensor *t, uint32_t dim) {
    const eng_tensor *e = queried(t, "kiln_tensor_size_expr", NULL);
    if (!e || dim >= last_view(e)->ndim)
        return NULL;
    return eng_pin_expr(e->ctx, last_view(e)->shape[dim]);
}

kiln_status kiln_tensor_shape(const kiln_tensor *t, int64_t *shape) {
    kiln_status st;
    const eng_tensor *e = queried(t, "kiln_tensor_shape", &st);
    if (!e)
        return st;
    const shape_view *v = last_view(e);
    if (!shape && v->ndim)
        return base_error_set(&e->ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_tensor_shape: no array for %u sizes", v->ndim);
    for (uint32_t d = 0; d < v->ndim; d++) {
        st = eng_eval(e->ctx, "kiln_tensor_shape", v->shape[d], &shape[d]);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

kiln_status kiln_tensor_numel(const kiln_tensor *t, int64_t *numel) {
    kiln_status st;
    const eng_tensor *e = queried(t, "kiln_tensor_numel", &st);
    if (!e)
        return st;
    if (!numel)
        return base_error_set(&e->ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_tensor_numel: no output");
    const shape_view *v = last_view(e);
    int64_t n = 1, size;
    for (uint32_t d = 0; d < v->ndim; d++) {
        st = eng_eval(e->ctx, "kiln_tensor_numel", v->shape[d], &size);
        if (st != KILN_OK)
            return st;
        if (!base_mul_i64(n, size, &n))
            return base_error_set(&e->ctx->err, KILN_ERROR_OVERFLOW,
                                  "kiln_tensor_numel: the element count overflows");
    }
    *numel = n;
    return KILN_OK;
}

static kiln_status eval_into(const eng_tensor *t, const char *what, const sym_node *e,
                             int64_t *out) {
    return eng_eval(t->ctx, what, e, out);
}

kiln_status kiln_tensor_strides(const kiln_tensor *h, int64_t *strides) {
    kiln_status st;
    const eng_tensor *t = queried(h, "kiln_tensor_strides", &st);
    if (!t)
        return st;
    const shape_view *v = last_view(t);
    if (!strides && v->ndim)
        return base_error_set(&t->ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_tensor_strides: no array for %u strides", v->ndim);
    if (t->st->nviews == 1) {
        for (uint32_t d = 0; d < v->ndim; d++) {
            st = eval_into(t, "kiln_tensor_strides", v->user_strides[d], &strides[d]);
            if (st != KILN_OK)
                return st;
        }
        return KILN_OK;
    }
    int64_t acc = 1;
    for (uint32_t d = v->ndim; d-- > 0;) {
        int64_t size;
        st = eval_into(t, "kiln_tensor_strides", v->shape[d], &size);
        if (st != KILN_OK)
            return st;
        strides[d] = acc; /* row-major, as a new contiguous tensor */
        acc *= size > 0 ? size : 1;
    }
    return KILN_OK;
}

kiln_status kiln_tensor_offset(const kiln_tensor *h, int64_t *offset) {
    kiln_status st;
    const eng_tensor *t = queried(h, "kiln_tensor_offset", &st);
    if (!t)
        return st;
    if (!offset)
        return base_error_set(&t->ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_tensor_offset: no output");
    if (t->st->nviews != 1) {
        *offset = 0;
        return KILN_OK;
    }
    return eval_into(t, "kiln_tensor_offset", last_view(t)->user_offset, offset);
}

kiln_status kiln_tensor_storage_size(const kiln_tensor *h, int64_t *elements) {
    kiln_status st;
    const eng_tensor *t = queried(h, "kiln_tensor_storage_size", &st);
    if (!t)
        return st;
    if (!elements)
        return base_error_set(&t->ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_tensor_storage_size: no output");
    const eng_node *base = t->cell->node;
    const sym_node *n = eng_numel(t->ctx, base->ndim, base->shape);
    return eval_into(t, "kiln_tensor_storage_size", n, elements);
}

/* ---- symbolic creation --------------------------------------------------------------------------
 */

kiln_tensor *kiln_empty_sym(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                            const kiln_expr *const *shape) {
    const sym_node *dims[SHAPE_MAX_DIMS];
    if (!ctx || !check_dtype(ctx, "kiln_empty", dtype) ||
        !eng_shape_from_exprs(ctx, "kiln_empty", ndim, shape, dims))
        return NULL;
    /* The storage holds the elements of the bound sizes; the node keeps the expressions. */
    const sym_node *numel = eng_numel(ctx, ndim, dims);
    int64_t n;
    base_error err = {0};
    kiln_status es = numel ? sym_eval(numel, NULL, &n, &err) : KILN_ERROR_OVERFLOW;
    if (es != KILN_OK)
        return eng_fail(ctx, es == KILN_ERROR_NOT_FOUND ? KILN_ERROR_UNBOUND_VARIABLE : es,
                        "kiln_empty: %s",
                        numel ? base_error_message(&err) : "the element count overflows");
    eng_storage *s = eng_storage_new(ctx, eng_ir_type(dtype), (uint64_t)n);
    if (s && sym_vmax(numel) > n) /* kernels assume the largest size (eng_storage.bound) */
        s->bound = (uint64_t)sym_vmax(numel);
    return contiguous_tensor(ctx, buffer_node(ctx, s, eng_ir_type(dtype), ndim, dims));
}

static kiln_tensor *rand_sym_impl(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                                  const kiln_expr *const *shape, uint64_t seed) {
    const sym_node *dims[SHAPE_MAX_DIMS];
    if (!ctx || !check_dtype(ctx, "kiln_rand", dtype) ||
        !eng_shape_from_exprs(ctx, "kiln_rand", ndim, shape, dims))
        return NULL;
    if (!ir_type_is_float(eng_ir_type(dtype)))
        return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_rand: dtype must be a float");
    kiln_tensor *u = leaf(ctx, ENG_RAND, IR_F32, ndim, dims, seed, 0);
    return dtype == KILN_F32 ? u : kiln_cast(u, dtype);
}

static kiln_tensor *randn_sym_impl(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                                   const kiln_expr *const *shape, uint64_t seed) {
    const sym_node *dims[SHAPE_MAX_DIMS];
    if (!ctx || !check_dtype(ctx, "kiln_randn", dtype) ||
        !eng_shape_from_exprs(ctx, "kiln_randn", ndim, shape, dims))
        return NULL;
    if (!ir_type_is_float(eng_ir_type(dtype)))
        return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_randn: dtype must be a float");
    kiln_tensor *u1 = leaf(ctx, ENG_RAND, IR_F32, ndim, dims, seed, 0);
    kiln_tensor *u2 = leaf(ctx, ENG_RAND, IR_F32, ndim, dims, seed, 1);
    return box_muller(ctx, u1, u2, dtype);
}

kiln_tensor *kiln_arange_sym(kiln_context *ctx, kiln_dtype dtype, const kiln_expr *stop) {
    const sym_node *dim;
    if (!ctx || !check_dtype(ctx, "kiln_arange", dtype) ||
        !eng_shape_from_exprs(ctx, "kiln_arange", 1, &stop, &dim))
        return NULL;
    kiln_tensor *idx = leaf(ctx, ENG_INDEX, eng_ir_type(dtype), 1, &dim, 0, 0);
    return idx;
}

kiln_tensor *kiln_scalar_expr(kiln_context *ctx, kiln_dtype dtype, const kiln_expr *value) {
    if (!ctx || !check_dtype(ctx, "kiln_scalar_expr", dtype))
        return NULL;
    if (!value)
        return ctx->err.status
                   ? NULL
                   : eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_scalar_expr: no expression");
    const sym_node *n = eng_expr_arg(ctx, value, "kiln_scalar_expr");
    if (!n)
        return NULL;
    return eng_constant(ctx, eng_ir_type(dtype), 0, NULL, 0.0, n, true);
}

kiln_tensor *kiln_empty_strided(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                                const int64_t *shape, const int64_t *strides) {
    const sym_node *sizes[SHAPE_MAX_DIMS], *st[SHAPE_MAX_DIMS];
    if (!ctx || !check_dtype(ctx, "kiln_empty_strided", dtype) ||
        !eng_shape_from_ints(ctx, "kiln_empty_strided", ndim, shape, sizes))
        return NULL;
    if (ndim > 0 && !strides)
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_empty_strided: no strides");
    for (uint32_t d = 0; d < ndim; d++)
        st[d] = sym_const(ctx->sym, strides[d]);
    shape_view v;
    shape_tracker tr;
    const sym_node *size;
    kiln_status s = shape_view_empty_strided(ctx->shape, ndim, sizes, st, &v, &size);
    if (s == KILN_OK)
        s = shape_tracker_from_view(&v, &tr);
    if (s != KILN_OK)
        return eng_fail_from_shape_in(ctx, "kiln_empty_strided", s);
    int64_t n;
    if (!sym_is_const(size, &n))
        return eng_fail(ctx, KILN_ERROR_INTERNAL, "kiln_empty_strided: storage size unknown");
    eng_storage *storage = eng_storage_new(ctx, eng_ir_type(dtype), (uint64_t)n);
    eng_node *node = buffer_node(ctx, storage, eng_ir_type(dtype), 1, &size);
    if (!node)
        return NULL;
    return eng_tensor_new(ctx, node, eng_tracker_keep(ctx, &tr));
}

kiln_tensor *kiln_arange(kiln_context *ctx, kiln_dtype dtype, double start, double stop,
                         double step) {
    if (!ctx)
        return NULL;
    size_t mark = eng_temps_begin(ctx);
    return eng_temps_end(ctx, mark, arange_impl(ctx, dtype, start, stop, step));
}

kiln_tensor *kiln_rand(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim, const int64_t *shape,
                       uint64_t seed) {
    if (!ctx)
        return NULL;
    size_t mark = eng_temps_begin(ctx);
    return eng_temps_end(ctx, mark, rand_impl(ctx, dtype, ndim, shape, seed));
}

kiln_tensor *kiln_randn(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim, const int64_t *shape,
                        uint64_t seed) {
    if (!ctx)
        return NULL;
    size_t mark = eng_temps_begin(ctx);
    return eng_temps_end(ctx, mark, randn_impl(ctx, dtype, ndim, shape, seed));
}

kiln_tensor *kiln_rand_sym(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                           const kiln_expr *const *shape, uint64_t seed) {
    if (!ctx)
        return NULL;
    size_t mark = eng_temps_begin(ctx);
    return eng_temps_end(ctx, mark, rand_sym_impl(ctx, dtype, ndim, shape, seed));
}

kiln_tensor *kiln_randn_sym(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                            const kiln_expr *const *shape, uint64_t seed) {
    if (!ctx)
        return NULL;
    size_t mark = eng_temps_begin(ctx);
    return eng_temps_end(ctx, mark, randn_sym_impl(ctx, dtype, ndim, shape, seed));
}

static uint32_t inlined_ops(const eng_node *n, uint32_t limit, uint32_t depth) {
    if (!n || n->storage || n->kind != ENG_EW || n->boundary)
        return 0;
    if (depth == 0) /* a chain of moves this long: counted as costly */
        return limit;
    /* a node of its own over a view (eng_identity's: a fold's, a split reduction's): it moves
     * elements and computes nothing */
    bool moves = n->op == IR_CAST && n->nsrc == 1 && n->src[0].node->type == n->type;
    uint32_t ops = moves ? 0 : 1;
    for (uint32_t i = 0; i < n->nsrc && ops < limit; i++)
        ops += inlined_ops(n->src[i].node, limit - ops, depth - 1);
    return ops;
}

uint32_t eng_node_live_readers(const eng_node *n, uint32_t most) {
    uint32_t count = 0;
    for (const eng_reader *r = n->readers; r && count < most; r = r->next)
        count += !r->node->storage;
    return count;
}

uint32_t eng_node_inlined_ops(const eng_node *n, uint32_t limit) {
    enum { MOVES_DEPTH = 64 };
    return inlined_ops(n, limit, MOVES_DEPTH);
}
