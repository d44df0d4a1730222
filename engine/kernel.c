/* Kernel ASTs: the expression a kernel computes per output element, with every load's storage
 * index and validity as symbolic expressions over the kernel's index Variables (gidx: the
 * output element; ridx: the reduction's element). Bound Variables are unbound afterwards, so
 * the AST and its hash are the same for every bound value; the values become parameters.
 *
 * Fusion: elementwise nodes are inlined into their consumer; a reduction is fused into the
 * kernel when it is the kernel's own output or when the elementwise output reads it element for
 * element (mean = sum * 1/n), or, in row mode, when an elementwise kernel of constant sizes
 * reads a reduction over its last dim along each output row (softmax's max and sum, a row
 * mean): such reductions become stages of the kernel (a stage's value may read the results of
 * lower ones) and one invocation owns a row (lower.c). Any other unrealized reduction is a
 * dependency that must be realized by an earlier kernel. No input is made contiguous first:
 * every load reads through its view's index expression. */
#include "eng.h"

#include <stdio.h>
#include <string.h>

/* Unrealized nodes inlined into one another at most: a longer chain (10,000 adds, or the
 * chain of a loop's steps that each read a reduction of the last) is cut into kernels, so that
 * building, lowering and interpreting a kernel recurse at most this deep, and a kernel build
 * never walks further than this into nodes that later kernels realize. */
enum { MAX_INLINE_DEPTH = 256 };

typedef struct kbuild {
    kiln_context *ctx;
    sym_ctx *sym;
    eng_kernel *k;
    eng_node **needs;
    uint32_t need_cap, need_count;
    bool in_reduce;                            /* building a reduction's input */
    uint32_t reduce_mask;                      /* the reduced dims of the kernel's reductions */
    const sym_node *reduce_in[SHAPE_MAX_DIMS]; /* and their input shape */
    uint32_t reduce_ndim;
    const sym_node *rid[SHAPE_MAX_DIMS]; /* ridx unravelled over the reduced dims */
    const sym_node *valid; /* conjunction of the masks the current value is read through */
    bool at_output;        /* the current logical index is the output element's own */
    eng_node *inlined_top; /* the outermost unrealized node being inlined (NULL: none) */
    eng_node *last_top;    /* the last such node (its loads may fill the buffer table) */
    bool row_ok;           /* an elementwise kernel of constant sizes: row mode is possible */
    uint32_t depth;        /* unrealized nodes inlined around the current one */
    const sym_node *out_idx[SHAPE_MAX_DIMS]; /* the output element's indices */
    kiln_status status;
} kbuild;

static kiln_status build_fail(kbuild *b, kiln_status st, const char *what) {
    if (b->status == KILN_OK) {
        b->status = st;
        if (sym_ctx_status(b->sym) != KILN_OK) {
            /* The symbolic failure (out of memory, overflow) is the status returned too. */
            st = b->status = sym_ctx_status(b->sym);
            eng_fail(b->ctx, sym_ctx_status(b->sym), "%s: %s", what, sym_ctx_message(b->sym));
            sym_ctx_clear_error(b->sym);
        } else if (st != KILN_ERROR_NOT_FOUND) {
            eng_fail(b->ctx, st, "kernel construction: %s", what);
        }
    }
    return st;
}

/* ---- AST nodes ---------------------------------------------------------------------------------
 */

static kast *kast_new(kbuild *b, kast_kind kind, ir_op op, ir_type type) {
    kast *a = base_arena_alloc(&b->ctx->arena, sizeof *a, _Alignof(kast));
    if (!a) {
        build_fail(b, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a kernel AST");
        return NULL;
    }
    a->kind = kind;
    a->op = op;
    a->type = type;
    return a;
}

static kast *kast_const(kbuild *b, ir_type type, double value) {
    kast *a = kast_new(b, KAST_CONST, IR_CONST, type);
    if (a)
        a->value = value;
    return a;
}

static kast *kast_alu(kbuild *b, ir_op op, ir_type type, uint32_t n, kast *const *src) {
    for (uint32_t i = 0; i < n; i++) {
        if (!src[i])
            return NULL;
    }
    kast *a = kast_new(b, KAST_ALU, op, type);
    if (!a)
        return NULL;
    a->nsrc = n;
    for (uint32_t i = 0; i < n; i++)
        a->src[i] = src[i];
    return a;
}

static bool is_true(const sym_node *s) {
    int64_t v;
    return !s || (sym_is_const(s, &v) && v != 0);
}

/* value where the current mask holds, else 0 (padding reads as zero). */
static kast *masked(kbuild *b, const sym_node *valid, kast *value) {
    if (is_true(valid) || !value)
        return value;
    kast *cond = kast_new(b, KAST_INDEX, IR_CONST, IR_BOOL);
    if (!cond)
        return NULL;
    cond->index = valid;
    kast *src[3] = {cond, value, kast_const(b, value->type, 0.0)};
    return kast_alu(b, IR_WHERE, value->type, 3, src);
}

/* ---- index arithmetic --------------------------------------------------------------------------
 */

/* Row-major indices of flat in shape (the first one without the modulo: flat < numel). */
static void unravel(kbuild *b, const sym_node *flat, uint32_t ndim, const sym_node *const *shape,
                    const sym_node **idx) {
    /* An empty shape has no elements to index (and a modulo by its zero size is an error). */
    for (uint32_t d = 0; d < ndim; d++) {
        int64_t size;
        if (sym_is_const(shape[d], &size) && size == 0) {
            for (uint32_t e = 0; e < ndim; e++)
                idx[e] = sym_const(b->sym, 0);
            return;
        }
    }
    const sym_node *stride = sym_const(b->sym, 1);
    for (uint32_t d = ndim; d-- > 0;) {
        const sym_node *q = sym_floordiv(b->sym, flat, stride);
        idx[d] = d == 0 ? q : sym_floormod(b->sym, q, shape[d]);
        stride = sym_mul(b->sym, stride, shape[d]);
    }
}

static const sym_node *ravel(kbuild *b, uint32_t ndim, const sym_node *const *shape,
                             const sym_node *const *idx) {
    const sym_node *flat = sym_const(b->sym, 0);
    for (uint32_t d = 0; d < ndim; d++)
        flat = sym_add(b->sym, sym_mul(b->sym, flat, shape[d]), idx[d]);
    return flat;
}

/* An index Variable over [0, count - 1] (count's largest value), named for its range so that
 * kernels of different sizes never share a name with a different range. */
static const sym_node *index_var(kbuild *b, const char *prefix, const sym_node *count) {
    int64_t max = sym_vmax(count) - 1;
    char name[48];
    snprintf(name, sizeof name, "%s:%lld", prefix, (long long)(max < 0 ? 0 : max));
    return sym_var(b->sym, name, 0, max < 0 ? 0 : max);
}

/* ---- the value of a node -----------------------------------------------------------------------
 */

static kast *node_value(kbuild *b, eng_node *n, const sym_node *const *idx);

static void need(kbuild *b, eng_node *n);

static uint32_t buffer_slot(kbuild *b, eng_storage *s) {
    eng_kernel *k = b->k;
    for (uint32_t i = 0; i < k->buffer_count; i++) {
        if (k->buffers[i] == s)
            return i;
    }
    if (k->buffer_count == ENG_MAX_BUFFERS) {
        /* Too many inputs for one kernel: an earlier kernel realizes the outermost inlined node
         * (one buffer afterwards), then this kernel is built again. */
        if (b->inlined_top || b->last_top)
            need(b, b->inlined_top ? b->inlined_top : b->last_top);
        else
            build_fail(b, KILN_ERROR_LIMIT_EXCEEDED, "a kernel reads more than 15 buffers");
        return 0;
    }
    k->buffers[k->buffer_count] = s;
    k->buffer_types[k->buffer_count] = s->type;
    return k->buffer_count++;
}

static void need(kbuild *b, eng_node *n) {
    for (uint32_t i = 0; i < b->need_count; i++) {
        if (b->needs[i] == n)
            return;
    }
    if (b->need_count < b->need_cap)
        b->needs[b->need_count++] = n;
    build_fail(b, KILN_ERROR_NOT_FOUND, "dependency");
}

static bool is_identity(const eng_src *s) {
    const shape_view *v = shape_tracker_last(s->st);
    if (!shape_tracker_contiguous(s->st) || v->ndim != s->node->ndim)
        return false;
    for (uint32_t d = 0; d < v->ndim; d++) {
        if (v->shape[d] != s->node->shape[d])
            return false;
    }
    return true;
}

static kast *reduction_input(kbuild *b, eng_node *r, const sym_node *const *out_idx);
static bool joins_range(kbuild *b, eng_node *r);

/* Whether reduction n, read at index at, can run in row mode: the kernel is elementwise over
 * constant dims, n reduces the last dim of an input of the kernel's shape, and the element
 * read is the output row's (the output's indices but the last, which is 0). */
static bool row_read(kbuild *b, const eng_node *n, const sym_node *const *at) {
    const eng_kernel *k = b->k;
    uint32_t nd = k->ndim;
    if (!b->row_ok || nd == 0 || n->ndim != nd || n->arg || n->reduce_mask != 1u << (nd - 1))
        return false;
    const shape_view *in = shape_tracker_last(n->src[0].st);
    if (in->ndim != nd)
        return false;
    for (uint32_t d = 0; d < nd; d++) {
        if (in->shape[d] != k->dims[d] || (d + 1 < nd && at[d] != b->out_idx[d]))
            return false;
    }
    int64_t last;
    return sym_is_const(at[nd - 1], &last) && last == 0;
}

/* 1 + the highest stage of the reductions the tree reads (0: none). */
static uint32_t stage_after(const eng_kernel *k, const kast *a) {
    if (!a)
        return 0;
    uint32_t s = a->kind == KAST_REDUCE ? k->reductions[a->reduction].stage + 1 : 0;
    for (uint32_t i = 0; i < a->nsrc; i++) {
        uint32_t t = stage_after(k, a->src[i]);
        s = t > s ? t : s;
    }
    return s;
}

/* The view is dense at offset 0 and covers all of n's elements. */
static bool flat_identity(kbuild *b, const eng_src *s) {
    if (!shape_tracker_contiguous(s->st))
        return false;
    const sym_node *a = shape_view_numel(b->ctx->shape, shape_tracker_last(s->st));
    return a && a == eng_numel(b->ctx, s->node->ndim, s->node->shape);
}

/* The value of source s at the consumer's logical index idx. */
static kast *src_value(kbuild *b, const eng_src *s, const sym_node *const *idx) {
    eng_node *n = s->node;
    const sym_node *index, *valid;
    bool identity = is_identity(s);
    if (identity) {
        index = NULL;
        valid = sym_const(b->sym, 1);
    } else {
        kiln_status st = shape_tracker_index(b->ctx->shape, s->st, idx, &index, &valid);
        if (st != KILN_OK) {
            build_fail(b, st, shape_ctx_message(b->ctx->shape));
            return NULL;
        }
    }
    const sym_node *outer = b->valid;
    b->valid = is_true(valid) ? outer : sym_and(b->sym, outer, valid);
    kast *value = NULL;
    if (n->storage) {
        if (!index)
            index = ravel(b, n->ndim, n->shape, idx);
        kast *load = kast_new(b, KAST_LOAD, IR_CONST, n->storage->type);
        if (load) {
            load->buffer = buffer_slot(b, n->storage);
            load->index = index;
            load->valid = b->valid;
        }
        value = load;
    } else {
        /* A dense view at offset 0 of the whole result (identity or a reshape of it) keeps the
         * output's element: a reduction read that way fuses into this kernel. */
        bool same_element = b->at_output && (identity || flat_identity(b, s));
        const sym_node *own[SHAPE_MAX_DIMS];
        if (!identity)
            unravel(b, index, n->ndim, n->shape, own);
        const sym_node *const *at = identity ? idx : own;
        bool outer_at_output = b->at_output;
        b->at_output = same_element;
        b->depth++;
        if (n->kind == ENG_WRITE) /* a write runs as its own kernel, then is read */
            need(b, n);
        else if (b->depth > MAX_INLINE_DEPTH) /* a chain this long is cut: n runs first */
            need(b, n);
        else if (n->kind != ENG_REDUCE) {
            bool top = !b->inlined_top;
            if (top)
                b->inlined_top = b->last_top = n;
            value = node_value(b, n, at);
            if (top)
                b->inlined_top = NULL;
        } else if (same_element && !b->in_reduce && joins_range(b, n)) {
            value = reduction_input(b, n, at);
        } else if (row_read(b, n, at) && joins_range(b, n)) {
            b->k->rows = true;
            value = reduction_input(b, n, b->out_idx);
        } else {
            need(b, n);
        }
        b->depth--;
        b->at_output = outer_at_output;
    }
    b->valid = outer;
    return masked(b, valid, value);
}

static kast *node_value(kbuild *b, eng_node *n, const sym_node *const *idx) {
    switch (n->kind) {
    case ENG_CONST:
        if (n->value_expr) {
            kast *a = kast_new(b, KAST_INDEX, IR_CONST, n->type);
            if (a)
                a->index = n->value_expr;
            return a;
        }
        return kast_const(b, n->type, n->value);
    case ENG_INDEX:
    case ENG_RAND: {
        kast *a = kast_new(b, n->kind == ENG_INDEX ? KAST_INDEX : KAST_RAND, IR_CONST, n->type);
        if (a) {
            a->index = ravel(b, n->ndim, n->shape, idx);
            a->seed = n->seed;
        }
        return a;
    }
    case ENG_EW: {
        kast *src[3] = {NULL, NULL, NULL};
        for (uint32_t i = 0; i < n->nsrc; i++)
            src[i] = src_value(b, &n->src[i], idx);
        return kast_alu(b, n->op, n->type, n->nsrc, src);
    }
    default: /* buffers and reductions are reached through sources */
        build_fail(b, KILN_ERROR_INTERNAL, "unexpected node kind");
        return NULL;
    }
}

/* Whether reduction r can combine over the kernel's range: the first one defines it; later
 * ones must reduce the same dims of an input of the same shape (softmax's sums, var's two
 * sums). */
static bool joins_range(kbuild *b, eng_node *r) {
    const eng_kernel *k = b->k;
    for (uint32_t i = 0; i < k->reduction_count; i++) {
        if (k->reductions[i].node == r)
            return true;
    }
    if (k->reduction_count == 0)
        return true;
    if (k->reduction_count == ENG_MAX_REDUCTIONS || r->reduce_mask != b->reduce_mask)
        return false;
    const shape_view *in = shape_tracker_last(r->src[0].st);
    if (in->ndim != b->reduce_ndim)
        return false;
    for (uint32_t d = 0; d < in->ndim; d++) {
        if (in->shape[d] != b->reduce_in[d])
            return false;
    }
    return true;
}

/* The kernel's range: ridx over the reduced dims of r's input. */
static void open_range(kbuild *b, eng_node *r) {
    eng_kernel *k = b->k;
    const shape_view *in = shape_tracker_last(r->src[0].st);
    const sym_node *dims[SHAPE_MAX_DIMS];
    uint32_t nr = 0;
    for (uint32_t d = 0; d < in->ndim; d++) {
        b->reduce_in[d] = in->shape[d];
        if (r->reduce_mask & (1u << d))
            dims[nr++] = in->shape[d];
    }
    b->reduce_ndim = in->ndim;
    b->reduce_mask = r->reduce_mask;
    k->reduce_count = eng_numel(b->ctx, nr, dims);
    k->ridx = k->reduce_count ? index_var(b, "ridx", k->reduce_count) : NULL;
    if (!k->ridx) {
        build_fail(b, KILN_ERROR_OUT_OF_HOST_MEMORY, "the reduction index");
        return;
    }
    unravel(b, k->ridx, nr, dims, b->rid);
}

/* Fuses reduction r into the kernel (joins_range said it may): its input at (out_idx on kept
 * dims, ridx on reduced dims). Returns the value of the reduction's result. */
static kast *reduction_input(kbuild *b, eng_node *r, const sym_node *const *out_idx) {
    eng_kernel *k = b->k;
    uint32_t i = 0;
    while (i < k->reduction_count && k->reductions[i].node != r)
        i++;
    if (i == k->reduction_count) {
        if (i == 0)
            open_range(b, r);
        if (!k->ridx)
            return NULL;
        const sym_node *idx[SHAPE_MAX_DIMS];
        for (uint32_t d = 0, j = 0; d < b->reduce_ndim; d++)
            idx[d] = r->reduce_mask & (1u << d) ? b->rid[j++] : out_idx[d];
        eng_reduction *red = &k->reductions[k->reduction_count++];
        red->node = r;
        red->op = r->op;
        red->arg = r->arg;
        red->type = r->src[0].node->type;
        bool outer_at_output = b->at_output, outer_in_reduce = b->in_reduce;
        b->in_reduce = true;
        b->at_output = false;
        kast *value = src_value(b, &r->src[0], idx);
        b->in_reduce = outer_in_reduce;
        b->at_output = outer_at_output;
        k->reductions[i].value = value;
        k->reductions[i].stage = stage_after(k, value);
    }
    kast *a = kast_new(b, KAST_REDUCE, IR_CONST, r->type);
    if (a)
        a->reduction = i;
    return a;
}

/* ---- parameters and hash -----------------------------------------------------------------------
 */

/* Replaces bound Variables in *e by Variables, adding them to the kernel's parameters. */
static void unbind(kbuild *b, const sym_node **e) {
    if (!*e)
        return;
    const sym_node *vars[ENG_MAX_PARAMS];
    int64_t values[ENG_MAX_PARAMS];
    size_t found = 0;
    const sym_node *u = sym_unbind_all(b->sym, *e, vars, values, ENG_MAX_PARAMS, &found);
    if (!u) {
        build_fail(b, KILN_ERROR_INTERNAL, "unbinding an index expression");
        return;
    }
    *e = u;
    eng_kernel *k = b->k;
    for (size_t i = 0; i < found && i < ENG_MAX_PARAMS; i++) {
        uint32_t p = 0;
        while (p < k->param_count && k->params[p] != vars[i])
            p++;
        if (p == k->param_count) {
            if (k->param_count == ENG_MAX_PARAMS) {
                build_fail(b, KILN_ERROR_LIMIT_EXCEEDED, "a kernel uses more than 32 Variables");
                return;
            }
            k->params[k->param_count] = vars[i];
            k->param_values[k->param_count++] = values[i];
        }
    }
}

static uint64_t sym_hash_or_zero(const sym_node *s) {
    return s ? sym_node_hash(s) : 0;
}

/* Unbinds the tree's expressions and computes every node's structural hash. */
static uint64_t finish_tree(kbuild *b, kast *a) {
    if (!a)
        return 0;

    unbind(b, &a->index);
    unbind(b, &a->valid);
    uint64_t h = base_hash_u64((uint64_t)a->kind, ((uint64_t)a->op << 8) | a->type);
    h = base_hash_u64(h, a->buffer);
    h = base_hash_u64(h, sym_hash_or_zero(a->index));
    h = base_hash_u64(h, sym_hash_or_zero(a->valid));
    uint64_t bits;
    memcpy(&bits, &a->value, sizeof bits);
    h = base_hash_u64(h, bits);
    h = base_hash_u64(h, a->seed);
    h = base_hash_u64(h, a->reduction);
    for (uint32_t i = 0; i < a->nsrc; i++)
        h = base_hash_u64(h, finish_tree(b, a->src[i]));
    a->hash = h;
    return h;
}

static void finish_kernel(kbuild *b) {
    eng_kernel *k = b->k;
    for (uint32_t d = 0; d < k->ndim; d++)
        unbind(b, &k->dims[d]);
    unbind(b, &k->numel);
    unbind(b, &k->reduce_count);
    unbind(b, &k->out_index);
    uint64_t h = base_hash_u64(0x6b65726eu, k->out_type);
    h = base_hash_u64(h, finish_tree(b, k->value));
    h = base_hash_u64(h, sym_hash_or_zero(k->numel));
    h = base_hash_u64(h, sym_hash_or_zero(k->gidx));
    h = base_hash_u64(h, sym_hash_or_zero(k->out_index));
    for (uint32_t i = 0; i < k->reduction_count; i++) {
        const eng_reduction *r = &k->reductions[i];
        h = base_hash_u64(h, ((uint64_t)r->stage << 24) | ((uint64_t)r->op << 16) |
                                 ((uint64_t)r->type << 8) | r->arg);
        h = base_hash_u64(h, finish_tree(b, r->value));
    }
    h = base_hash_u64(h, sym_hash_or_zero(k->reduce_count));
    h = base_hash_u64(h, sym_hash_or_zero(k->ridx));
    h = base_hash_u64(h, k->rows);
    h = base_hash_u64(h, k->buffer_count);
    for (uint32_t i = 0; i < k->buffer_count; i++)
        h = base_hash_u64(h, k->buffer_types[i]);
    h = base_hash_u64(h, k->param_count);
    for (uint32_t i = 0; i < k->param_count; i++)
        h = base_hash_u64(h, sym_node_hash(k->params[i]));
    k->hash = h;
}

/* Whether the tree loads buffer 0 (the storage written) anywhere but at the element it
 * writes: then the kernel would read values it has already overwritten. */
static bool reads_written_elsewhere(const kast *a, const sym_node *out_index) {
    if (!a)
        return false;
    if (a->kind == KAST_LOAD && a->buffer == 0 && a->index != out_index)
        return true;
    for (uint32_t i = 0; i < a->nsrc; i++) {
        if (reads_written_elsewhere(a->src[i], out_index))
            return true;
    }
    return false;
}

/* A write kernel: for every element of the destination view, the value of src[1] stored at
 * the view's storage element, into the storage of src[0] itself. */
static void build_write(kbuild *b, eng_node *w) {
    eng_kernel *k = b->k;
    eng_node *target = w->src[0].node;
    if (!target->storage) {
        need(b, target);
        return;
    }
    const shape_view *v = shape_tracker_last(w->dst_view);
    k->numel = eng_numel(b->ctx, v->ndim, v->shape);
    k->ndim = v->ndim;
    memcpy(k->dims, v->shape, v->ndim * sizeof *k->dims);
    k->gidx = k->numel ? index_var(b, "gidx", k->numel) : NULL;
    if (!k->gidx)
        return (void)build_fail(b, KILN_ERROR_OVERFLOW, "the element count");
    const sym_node *idx[SHAPE_MAX_DIMS], *valid;
    unravel(b, k->gidx, v->ndim, v->shape, idx);
    kiln_status st = shape_tracker_index(b->ctx->shape, w->dst_view, idx, &k->out_index, &valid);
    if (st != KILN_OK)
        return (void)build_fail(b, st, shape_ctx_message(b->ctx->shape));
    k->buffers[0] = target->storage; /* loads of the target resolve to buffer 0 */
    b->at_output = false;
    k->value = src_value(b, &w->src[1], idx);
    if (k->value && k->value->type != w->type) {
        kast *src[1] = {k->value};
        k->value = kast_alu(b, IR_CAST, w->type, 1, src);
    }
    if (b->status == KILN_OK && reads_written_elsewhere(k->value, k->out_index)) {
        /* NumPy's rule: as if src were read completely first. Materialise it. */
        eng_node *copy =
            eng_node_new(b->ctx, ENG_EW, IR_CAST, w->src[1].node->type, v->ndim, v->shape);
        const shape_tracker *flat = eng_tracker_contiguous(b->ctx, v->ndim, v->shape);
        const shape_tracker *read = eng_tracker_keep(b->ctx, w->src[1].st);
        if (!copy || !flat || !read) {
            eng_node_discard(b->ctx, copy);
            eng_tracker_free(b->ctx, flat);
            eng_tracker_free(b->ctx, read);
            return (void)build_fail(b, KILN_ERROR_OUT_OF_HOST_MEMORY, "a copy of the source");
        }
        copy->unique = true;
        copy->nsrc = 1;
        copy->src[0] = (eng_src){w->src[1].node, read, 0};
        /* Same values: only where they are read from. */
        eng_node_set_src(b->ctx, w, 1, eng_node_adopt(b->ctx, copy), flat);
        need(b, copy);
    }
}

kiln_status eng_kernel_build(kiln_context *ctx, eng_node *node, eng_kernel *k, eng_node **needs,
                             uint32_t cap, uint32_t *need_count) {
    memset(k, 0, sizeof *k);
    kbuild b = {.ctx = ctx, .sym = ctx->sym, .k = k, .needs = needs, .need_cap = cap};
    b.valid = sym_const(ctx->sym, 1);
    b.at_output = true;
    k->output = node;
    k->out_type = node->type;
    k->numel = eng_numel(ctx, node->ndim, node->shape);
    k->ndim = node->ndim;
    memcpy(k->dims, node->shape, node->ndim * sizeof *k->dims);
    if (!k->numel)
        return build_fail(&b, KILN_ERROR_OVERFLOW, "the element count");
    k->gidx = index_var(&b, "gidx", k->numel);
    /* Buffer 0 is the output: its storage is assigned by the scheduler. */
    k->buffer_count = 1;
    k->buffer_types[0] = node->type;
    const sym_node *idx[SHAPE_MAX_DIMS];
    if (!k->gidx)
        return build_fail(&b, KILN_ERROR_OUT_OF_HOST_MEMORY, "the kernel's index");
    unravel(&b, k->gidx, node->ndim, node->shape, idx);
    memcpy(b.out_idx, idx, node->ndim * sizeof *idx);
    /* Row mode: constant sizes, and on a GPU enough rows to keep it busy (a CPU's lanes run
     * a row's loops as vectors: any count of rows will do). */
    int64_t rows = 1, size = 0;
    b.row_ok = node->kind == ENG_EW && node->ndim > 0;
    for (uint32_t d = 0; b.row_ok && d < node->ndim; d++) {
        b.row_ok = sym_is_const(node->shape[d], &size);
        rows *= d + 1 < node->ndim ? size : 1;
    }
    b.row_ok = b.row_ok && (ctx->tile_ew > 1 || rows >= (int64_t)ctx->parallelism);
    if (node->kind == ENG_WRITE)
        build_write(&b, node);
    else if (node->kind == ENG_REDUCE)
        k->value = reduction_input(&b, node, idx);
    else
        k->value = node_value(&b, node, idx);
    *need_count = b.need_count;
    if (b.status == KILN_OK && (!k->value || sym_ctx_status(ctx->sym) != KILN_OK))
        build_fail(&b, KILN_ERROR_INTERNAL, "building the kernel");
    if (b.status == KILN_OK)
        finish_kernel(&b);
    return b.status;
}

/* ---- debug rendering (KILN_DEBUG=3) ------------------------------------------------------------
 */

typedef struct text {
    char *buf;
    size_t cap, len;
} text;

static void put(text *t, const char *fmt, ...) BASE_PRINTF(2, 3);
static void put(text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf ? t->buf + (t->len < t->cap ? t->len : t->cap) : NULL,
                      t->len < t->cap ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n;
}

static void put_sym(text *t, const sym_node *s) {
    char small[256];
    size_t n = sym_render(s, small, sizeof small);
    put(t, "%s%s", small, n >= sizeof small ? "..." : "");
}

static void put_kast(text *t, const kast *a) {
    if (!a) {
        put(t, "?");
        return;
    }
    switch (a->kind) {
    case KAST_LOAD:
        put(t, "load(b%u[", a->buffer);
        put_sym(t, a->index);
        if (a->valid && !(sym_is_const(a->valid, NULL) && sym_vmin(a->valid) == 1)) {
            put(t, "] if ");
            put_sym(t, a->valid);
            put(t, ")");
        } else {
            put(t, "])");
        }
        return;
    case KAST_CONST:
        put(t, "%.9g", a->value);
        return;
    case KAST_INDEX:
        put(t, "%s(", ir_type_name(a->type));
        put_sym(t, a->index);
        put(t, ")");
        return;
    case KAST_RAND:
        put(t, "rand(%llu, ", (unsigned long long)a->seed);
        put_sym(t, a->index);
        put(t, ")");
        return;
    case KAST_REDUCE:
        put(t, "reduction%u", a->reduction);
        return;
    case KAST_ALU:
        put(t, "%s.%s(", ir_op_name(a->op), ir_type_name(a->type));
        for (uint32_t i = 0; i < a->nsrc; i++) {
            if (i)
                put(t, ", ");
            put_kast(t, a->src[i]);
        }
        put(t, ")");
        return;
    }
}

size_t eng_kernel_dump(const eng_kernel *k, char *buf, size_t cap) {
    text t = {buf, cap, 0};
    if (buf && cap)
        buf[0] = '\0';
    put(&t, "kernel %016llx: for ", (unsigned long long)k->hash);
    put_sym(&t, k->gidx);
    put(&t, " < ");
    put_sym(&t, k->numel);
    for (uint32_t i = 0; i < k->param_count; i++) {
        put(&t, i ? ", " : " (parameters ");
        put_sym(&t, k->params[i]);
        put(&t, i + 1 == k->param_count ? ")" : "");
    }
    put(&t, "\n");
    for (uint32_t i = 0; i < k->reduction_count; i++) {
        const eng_reduction *r = &k->reductions[i];
        put(&t, "  reduction%u = %s%s over ", i, r->arg ? "arg" : "", ir_op_name(r->op));
        put_sym(&t, k->ridx);
        put(&t, " < ");
        put_sym(&t, k->reduce_count);
        put(&t, " of ");
        put_kast(&t, r->value);
        put(&t, "\n");
    }
    put(&t, "  b0[");
    if (k->out_index)
        put_sym(&t, k->out_index);
    else
        put_sym(&t, k->gidx);
    put(&t, "] = ");
    put_kast(&t, k->value);
    put(&t, "\n");
    return t.len;
}
