/* Reverse-mode automatic differentiation over the lazy graph (docs/autograd.md).
 *
 * Recording: a public op whose operand needs a gradient (ENG_OP, eng.h) leaves a record on its
 * result's handle (eng_fn: torch's grad_fn): the op, its arguments, its inputs' records, and
 * the values its rule reads (a view of a cell, and the cell's version then). Ops built from
 * other public ops (ENG_ENTRY composites) record nothing themselves: the ops they call do.
 *
 * kiln_grad walks the records reachable from the loss once (no recursion), keeps those on a
 * path to an input asked about, and builds each gradient with public ops, lazily: nothing is
 * realized, so the backward pass is scheduled with whatever the program realizes next (the
 * optimizer's update). Versions (torch's version counter): a rule that reads a value written
 * after its use, or an edge along which the value read was not the one its record made, is
 * KILN_ERROR_MODIFIED, never a wrong gradient. */
#include "eng.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const shape_view *view_of(kiln_tensor *t) {
    return shape_tracker_last(ENG_ST(t));
}

/* ---- records --------------------------------------------------------------------------------- */

void eng_fn_ref(eng_fn *f) {
    f->refs++;
}

static void saved_drop(kiln_context *ctx, eng_saved *s) {
    if (s->cell)
        eng_cell_drop(ctx, s->cell);
    eng_tracker_free(ctx, s->st);
    s->cell = NULL;
    s->st = NULL;
}

/* Frees f and whatever only it held, iteratively (a chain of records as long as a training
 * run's graph never recurses). */
void eng_fn_unref(kiln_context *ctx, eng_fn *f) {
    eng_fn *work = NULL;
    if (--f->refs == 0) {
        f->mark = 0;
        work = f;
    }
    while (work) {
        eng_fn *g = work;
        work = (eng_fn *)(uintptr_t)g->mark; /* the work list is threaded through mark */
        for (uint32_t i = 0; i < g->nin; i++) {
            eng_fn *in = g->in_fn[i];
            if (in && --in->refs == 0) {
                in->mark = (uint64_t)(uintptr_t)work;
                work = in;
            }
        }
        /* Unlink it (its list links are intact until now). */
        if (g->prev)
            g->prev->next = g->next;
        else
            ctx->fn_list = g->next;
        if (g->next)
            g->next->prev = g->prev;
        for (uint32_t i = 0; i < g->nin; i++)
            saved_drop(ctx, &g->in[i]);
        saved_drop(ctx, &g->out);
        base_free(&ctx->alloc, g, sizeof *g);
    }
}

static eng_fn *fn_new(kiln_context *ctx, uint32_t op) {
    eng_fn *f = base_calloc(&ctx->alloc, 1, sizeof *f);
    if (!f)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for an autograd record");
    f->refs = 1;
    f->op = op;
    f->next = ctx->fn_list;
    if (ctx->fn_list)
        ctx->fn_list->prev = f;
    ctx->fn_list = f;
    return f;
}

static bool save(kiln_context *ctx, eng_saved *s, kiln_tensor *t) {
    eng_tensor *e = eng_t(t);
    s->st = eng_tracker_keep(ctx, e->st);
    if (!s->st)
        return false;
    s->cell = e->cell;
    s->cell->refs++;
    s->version = e->cell->version;
    return true;
}

void eng_ag_written(eng_cell *cell) {
    cell->version++;
}

void eng_ag_mark(kiln_context *ctx) {
    for (const eng_fn *f = ctx->fn_list; f; f = f->next) {
        for (uint32_t i = 0; i < f->nin; i++)
            eng_mark_tracker(ctx->sym, f->in[i].st);
        eng_mark_tracker(ctx->sym, f->out.st);
        for (uint32_t i = 0; i < f->nsyms; i++)
            sym_mark(ctx->sym, f->syms[i]);
    }
}

void eng_ag_finish(kiln_context *ctx) {
    /* Handles are released first (they hold every record), so nothing is left but a record
     * another failed to free: drop them without their references. */
    while (ctx->fn_list) {
        eng_fn *f = ctx->fn_list;
        ctx->fn_list = f->next;
        for (uint32_t i = 0; i < f->nin; i++)
            eng_tracker_free(ctx, f->in[i].st);
        eng_tracker_free(ctx, f->out.st);
        base_free(&ctx->alloc, f, sizeof *f);
    }
}

bool eng_ag_begin(kiln_context *ctx, size_t count, kiln_tensor *const *ins) {
    if (ctx->ag_block > 0)
        return false;
    for (size_t i = 0; i < count; i++) {
        if (ins[i] && eng_t(ins[i])->fn) {
            ctx->ag_block++;
            return true;
        }
    }
    return false;
}

bool eng_ag_records(kiln_context *ctx, kiln_tensor *t) {
    return ctx->ag_block == 0 && t && eng_t(t)->fn;
}

/* Whether op's rule reads the op's output. */
static bool reads_output(uint32_t op) {
    switch (op) {
    case ENG_AG_EXP:
    case ENG_AG_SQRT:
    case ENG_AG_RSQRT:
    case ENG_AG_TANH:
    case ENG_AG_SIGMOID:
    case ENG_AG_RELU:
    case ENG_AG_MAX_FIRST: /* where its input is a relu's (relu_pools) */
    case ENG_AG_SOFTMAX:
    case ENG_AG_LOG_SOFTMAX:
    case ENG_AG_MAX:
    case ENG_AG_MIN:
    case ENG_AG_STD:
    case ENG_AG_PROD:
    case ENG_AG_POW:
        return true;
    default:
        return false;
    }
}

static const shape_view *in_view(const eng_fn *f, uint32_t i) {
    return shape_tracker_last(f->in[i].st);
}

static const sym_node *cnst(kiln_context *ctx, int64_t v) {
    return sym_const(ctx->sym, v);
}

static uint32_t norm_dim(int64_t d, uint32_t ndim) {
    return (uint32_t)(d < 0 ? d + ndim : d);
}

/* Python's slice bounds on a dim of constant size n: the first index and the count. */
static void py_slice(int64_t n, bool has_start, int64_t start, bool has_stop, int64_t stop,
                     int64_t step, int64_t *first, int64_t *count) {
    int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;
    int64_t a = !has_start  ? (step > 0 ? lower : upper)
                : start < 0 ? (start + n < lower ? lower : start + n)
                            : (start > upper ? upper : start);
    int64_t b = !has_stop  ? (step > 0 ? upper : lower)
                : stop < 0 ? (stop + n < lower ? lower : stop + n)
                           : (stop > upper ? upper : stop);
    if (step > 0)
        *count = b > a ? (b - a + step - 1) / step : 0;
    else
        *count = a > b ? (a - b - step - 1) / -step : 0;
    *first = a;
}

/* The op's arguments as its rule reads them (see the cases of rule()). */
static bool record_args(kiln_context *ctx, eng_fn *f, const eng_ag_args *a, const shape_view *v) {
    uint32_t nd = v ? v->ndim : 0;
    f->value = a->value;
    f->value2 = a->value2;
    f->flag = a->flag;
    for (uint32_t i = 0; i < a->nints && i < 2 * SHAPE_MAX_DIMS; i++)
        f->ints[f->nints++] = a->ints[i];
    for (uint32_t i = 0; i < a->nints && a->ints2 && f->nints < 2 * SHAPE_MAX_DIMS; i++)
        f->ints[f->nints++] = a->ints2[i];
    for (uint32_t i = 0; i < a->ndims && f->nints < 2 * SHAPE_MAX_DIMS; i++)
        f->ints[f->nints++] = a->dims[i];
    for (uint32_t k = 0; k < 2; k++) {
        const kiln_expr *const *e = k ? a->exprs2 : a->exprs;
        for (uint32_t i = 0; e && i < a->nexprs && f->nsyms < 2 * SHAPE_MAX_DIMS; i++) {
            f->syms[f->nsyms] = eng_expr_arg(ctx, e[i], "autograd");
            if (!f->syms[f->nsyms++])
                return false;
        }
    }
    switch (a->op) {
    case ENG_AG_TRANSPOSE: { /* ints: dim0, dim1 */
        uint32_t d0 = norm_dim(f->ints[0], nd), d1 = norm_dim(f->ints[1], nd);
        for (uint32_t d = 0; d < nd; d++)
            f->ints[d] = d == d0 ? d1 : d == d1 ? d0 : d;
        f->nints = nd;
        f->op = ENG_AG_PERMUTE;
        break;
    }
    case ENG_AG_PAD: /* ints (or syms): before, after per dim */
        if (f->nsyms == 0) {
            for (uint32_t i = 0; i < 2 * nd; i++)
                f->syms[i] = cnst(ctx, f->ints[i]);
            f->nsyms = 2 * nd;
        }
        break;
    case ENG_AG_SHRINK: /* ints (or syms): begin per dim, then end per dim */
        if (f->nsyms == 0) {
            for (uint32_t i = 0; i < 2 * nd; i++)
                f->syms[i] = cnst(ctx, f->ints[i]);
            f->nsyms = 2 * nd;
        }
        break;
    case ENG_AG_NARROW: { /* ints: dim[, start, length]; or syms: start, length */
        uint32_t dim = norm_dim(f->ints[0], nd);
        const sym_node *start = f->nsyms ? f->syms[0] : cnst(ctx, f->ints[1]);
        const sym_node *length = f->nsyms ? f->syms[1] : cnst(ctx, f->ints[2]);
        int64_t s;
        if (sym_is_const(start, &s) && s < 0)
            start = sym_add(ctx->sym, v->shape[dim], start);
        for (uint32_t d = 0; d < nd; d++) {
            f->syms[d] = d == dim ? start : cnst(ctx, 0);
            f->syms[nd + d] = d == dim ? sym_add(ctx->sym, start, length) : v->shape[d];
        }
        f->nsyms = 2 * nd;
        f->op = ENG_AG_SHRINK;
        break;
    }
    case ENG_AG_SLICE: { /* ints: dim, start, stop, step -> dim, step; syms: first */
        uint32_t dim = norm_dim(f->ints[0], nd);
        int64_t start = f->ints[1], stop = f->ints[2], step = f->ints[3], n, first, count;
        bool has_start = start != INT64_MIN && start != INT64_MAX;
        bool has_stop = stop != INT64_MIN && stop != INT64_MAX;
        f->ints[0] = dim;
        f->ints[1] = step;
        f->nints = 2;
        f->nsyms = 0;
        /* The forward counted the elements with the size's value (a bound Variable's too). */
        base_error err;
        base_error_clear(&err);
        if (sym_is_const(v->shape[dim], &n) || sym_eval(v->shape[dim], NULL, &n, &err) == KILN_OK) {
            py_slice(n, has_start, start, has_stop, stop, step, &first, &count);
            if (step < 0 && count > 0)
                first += (count - 1) * step; /* the lowest element taken */
            f->syms[f->nsyms++] = cnst(ctx, first);
        } else if (step > 0 && (!has_start || start == 0)) {
            f->syms[f->nsyms++] = cnst(ctx, 0);
        }
        break;
    }
    case ENG_AG_SELECT: { /* ints: dim, index -> dim; syms: the index */
        uint32_t dim = norm_dim(f->ints[0], nd);
        int64_t index = f->ints[1];
        f->ints[0] = dim;
        f->nints = 1;
        f->syms[0] = index < 0 ? sym_add_c(ctx->sym, v->shape[dim], index) : cnst(ctx, index);
        f->nsyms = 1;
        break;
    }
    case ENG_AG_FLIP:
        f->ints[0] = norm_dim(f->ints[0], nd);
        break;
    case ENG_AG_UNFOLD:
        f->ints[0] = norm_dim(f->ints[0], nd);
        break;
    case ENG_AG_DIAGONAL:
        f->ints[1] = norm_dim(f->ints[1], nd);
        f->ints[2] = norm_dim(f->ints[2], nd);
        break;
    default:
        break;
    }
    for (uint32_t i = 0; i < f->nsyms; i++)
        if (!f->syms[i])
            return eng_fail_from_shape(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY) != NULL;
    return true;
}

kiln_tensor *eng_ag_end(kiln_context *ctx, kiln_tensor *result, const eng_ag_args *args,
                        size_t count, kiln_tensor *const *ins) {
    ctx->ag_block--;
    if (!result || args->op == ENG_AG_NONE)
        return result;
    eng_tensor *r = eng_t(result);
    if (!ir_type_is_float(r->cell->node->type))
        return result; /* an integer or bool result carries no gradient */
    eng_fn *f = fn_new(ctx, args->op);
    if (!f) {
        eng_tensor_release(ctx, r);
        return NULL;
    }
    bool ok = true;
    f->nin = (uint32_t)count;
    for (uint32_t i = 0; i < count && ok; i++) {
        eng_tensor *in = eng_t(ins[i]);
        f->in_type[i] = in->cell->node->type;
        f->in_fn[i] = in->fn;
        if (in->fn)
            eng_fn_ref(in->fn);
        ok = save(ctx, &f->in[i], ins[i]);
    }
    f->out_version = r->cell->version;
    f->view = count >= 1 && r->cell == eng_t(ins[0])->cell;
    if (ok && reads_output(args->op))
        ok = save(ctx, &f->out, result);
    if (ok)
        ok = record_args(ctx, f, args, in_view(f, 0));
    if (!ok) {
        eng_fn_unref(ctx, f);
        eng_tensor_release(ctx, r);
        return NULL;
    }
    if (r->fn)
        eng_fn_unref(ctx, r->fn);
    r->fn = f;
    return result;
}

/* ---- marking leaves ----------------------------------------------------------------------------
 */

kiln_status kiln_requires_grad_(kiln_tensor *t, bool requires) {
    kiln_context *ctx = NULL;
    kiln_status st;
    eng_tensor *e = eng_arg_status(t, &ctx, "kiln_requires_grad_", &st);
    if (!e)
        return st;
    if (!requires) {
        if (e->fn)
            eng_fn_unref(ctx, e->fn);
        e->fn = NULL;
        return KILN_OK;
    }
    ir_type type = e->cell->node->type;
    if (!ir_type_is_float(type))
        return base_error_set(&ctx->err, KILN_ERROR_DTYPE_MISMATCH,
                              "kiln_requires_grad_: the tensor is %s: only floating tensors "
                              "have gradients",
                              kiln_dtype_name(eng_dtype(type)));
    if (e->fn) /* a leaf already, or a history of its own (torch's: a no-op) */
        return KILN_OK;
    eng_fn *f = fn_new(ctx, ENG_AG_LEAF);
    if (!f)
        return ctx->err.status;
    f->out_version = e->cell->version;
    if (e->fn)
        eng_fn_unref(ctx, e->fn);
    e->fn = f;
    return KILN_OK;
}

bool kiln_requires_grad(kiln_tensor *t) {
    kiln_context *ctx = NULL;
    kiln_status st;
    eng_tensor *e = t ? eng_arg_status(t, &ctx, "kiln_requires_grad", &st) : NULL;
    return e && e->fn;
}

kiln_tensor *kiln_detach(kiln_tensor *t) {
    kiln_context *ctx = NULL;
    eng_tensor *e = eng_arg(t, &ctx, "kiln_detach");
    if (!e)
        return NULL;
    eng_log_enter(ctx);
    kiln_tensor *h = eng_view_new(ctx, t, eng_tracker_keep(ctx, e->st));
    eng_log_leave(ctx);
    return h;
}

/* ---- building gradients ------------------------------------------------------------------------
 */

/* One kiln_grad call's state. */
/* What relu_pools finds about a record (by record order). */
typedef struct pool_note {
    uint32_t consumers; /* the differentiated records that read it */
    bool relu_masked;   /* a relu whose mask its max pool applies, or that max pool */
    uint32_t sums_from; /* its gradient is a max pool's, scattered: that pool's order + 1 */
    kiln_tensor *grad;  /* a max pool's masked gradient, laid out (its rule sets it) */
} pool_note;

typedef struct grad_run {
    kiln_context *ctx;
    const eng_fn *fn; /* the record whose rule runs (for messages) */
    bool failed;
    struct pool_note *notes; /* by record order (relu_pools) */
} grad_run;

static const char *op_name(uint32_t op) {
    static const char *const names[] = {
        "none",         "leaf",      "identity",  "add",         "sub",       "mul",
        "div",          "pow",       "maximum",   "minimum",     "where",     "neg",
        "abs",          "exp",       "log",       "sqrt",        "rsqrt",     "sin",
        "cos",          "tanh",      "sigmoid",   "relu",        "cast",      "add_scalar",
        "mul_scalar",   "sum",       "prod",      "max",         "min",       "mean",
        "var",          "std",       "softmax",   "log_softmax", "matmul",    "reshape",
        "permute",      "expand",    "pad",       "shrink",      "flip",      "slice",
        "select",       "diagonal",  "unfold",    "as_strided",  "transpose", "narrow",
        "index_select", "max_first", "conv_input"};
    return op < sizeof names / sizeof names[0] ? names[op] : "?";
}

/* A handle of saved value s, or NULL with KILN_ERROR_MODIFIED when it was written since. */
static kiln_tensor *saved(grad_run *g, const eng_saved *s, const char *what) {
    if (g->failed)
        return NULL;
    if (s->cell->version != s->version) {
        g->failed = true;
        return eng_fail(g->ctx, KILN_ERROR_MODIFIED,
                        "kiln_grad: the %s of a %s op was written in place after the op read it "
                        "(version %llu, now %llu): its gradient needs the value it read",
                        what, op_name(g->fn->op), (unsigned long long)s->version,
                        (unsigned long long)s->cell->version);
    }
    return eng_cell_handle(g->ctx, s->cell, s->st);
}

/* How many of f's inputs need a gradient (need: by record order); two or more: its gradient
 * fans out. */
static uint32_t needed_inputs(const eng_fn *f, const uint8_t *need) {
    uint32_t n = 0;
    for (uint32_t j = 0; j < f->nin; j++)
        n += f->in_fn[j] && need[f->in_fn[j]->order];
    return n;
}

/* Whether t is a fresh kiln_contiguous, read through its own row-major view. */
static bool laid_out(kiln_tensor *t) {
    const shape_tracker *st = ENG_ST(t);
    return ENG_BASE(t)->boundary && st->nviews == 1 && st->views[0].contiguous;
}

static kiln_tensor *in_value(grad_run *g, uint32_t i) {
    static const char *const what[] = {"first input", "second input", "third input"};
    return saved(g, &g->fn->in[i], what[i]);
}

static kiln_tensor *out_value(grad_run *g) {
    return saved(g, &g->fn->out, "output");
}

static kiln_tensor *scalar(kiln_context *ctx, ir_type type, double v) {
    return kiln_scalar(ctx, eng_dtype(type), v);
}

static kiln_tensor *zeros_of(kiln_context *ctx, ir_type type, uint32_t ndim,
                             const sym_node *const *shape) {
    return eng_full(ctx, type, ndim, shape, 0.0, NULL);
}

static ir_type type_of(kiln_tensor *t) {
    return ENG_BASE(t)->type;
}

/* The gradient of a matrix a that multiplied each of a batch of N matrices b[n] (a
 * convolution's weights, by its per-image windows: (O, C KH KW) @ (C KH KW, OH OW)), on a CPU
 * (ctx->window_rows): g[n] @ b[n]^T summed over groups of 4 images in one reduction of
 * 4 OH OW, (ceil(N / 4), O, C KH KW), the batch padded with zero images to whole groups (a
 * symbolic one, or a constant one not a multiple of 4), the groups then summed (sum_to), where
 * a product per image wrote N partial products for a sum over N. Measured on lavapipe, conv2's
 * weight gradient: bench_ops' constant batch of 64 in process against the per-image products
 * alternately (30 pairs) 0.85 of their time (groups of 8: 0.85-0.91, their product split in
 * two, a kernel more); the training step's symbolic batch, product and sum, 2.98 -> 2.25 ms
 * (per-kernel medians, eight ABBA rounds). Only with outputs enough to keep the CPU busy:
 * conv1's 16 x 9 per image took 3x as long grouped. NULL: not such a product (the caller
 * multiplies as it is). */
static kiln_tensor *image_groups(kiln_tensor *g, kiln_tensor *b) {
    enum { GROUP = 4 };
    kiln_context *ctx = ENG_CTX(g);
    const shape_view *gv = view_of(g), *bv = view_of(b);
    if (!ctx->window_rows || gv->ndim != 3 || bv->ndim != 3)
        return NULL;
    int64_t groups = (sym_vmax(bv->shape[0]) + GROUP - 1) / GROUP, outputs;
    if (groups < 2 || !base_mul_i64(groups, sym_vmax(gv->shape[1]), &outputs) ||
        !base_mul_i64(outputs, sym_vmax(bv->shape[1]), &outputs) ||
        outputs < 16 * (int64_t)ctx->parallelism)
        return NULL;
    /* (N, R, K) padded to (4 P, R, K) -> (P, 4, R, K) -> (P, R, 4, K) -> (P, R, 4 K) */
    kiln_tensor *in[2] = {g, b}, *out[2];
    for (int t = 0; t < 2; t++) {
        const shape_view *v = view_of(in[t]);
        const sym_node *count;
        kiln_tensor *whole = eng_pad_to_blocks(in[t], 0, GROUP, &count);
        const sym_node *split[4] = {count, cnst(ctx, GROUP), v->shape[1], v->shape[2]};
        const sym_node *merged[3] = {count, v->shape[1], sym_mul_c(ctx->sym, v->shape[2], GROUP)};
        kiln_tensor *t4 = whole && merged[2] ? eng_reshape(whole, 4, split) : NULL;
        t4 = t4 ? kiln_permute(t4, (const int32_t[]){0, 2, 1, 3}) : NULL;
        out[t] = t4 ? eng_reshape(t4, 3, merged) : NULL;
    }
    return out[0] && out[1] ? kiln_matmul(out[0], kiln_transpose(out[1], -1, -2)) : NULL;
}

/* g summed down to the shape a broadcast made it from (leading dims, and dims of size 1). */
static kiln_tensor *sum_to(kiln_tensor *g, uint32_t ndim, const sym_node *const *shape) {
    if (!g)
        return NULL;
    const shape_view *v = view_of(g);
    uint32_t lead = v->ndim - ndim;
    int32_t axes[SHAPE_MAX_DIMS];
    uint32_t n = 0;
    /* The broadcast dims of size 1 first, then the leading dims: a bias's gradient sums each
     * image's rows (contiguous runs) before the images. */
    for (uint32_t d = 0; d < ndim; d++) {
        int64_t one;
        if (sym_is_const(shape[d], &one) && one == 1 && v->shape[lead + d] != shape[d])
            axes[n++] = (int32_t)(lead + d);
    }
    if (n)
        g = kiln_sum(g, n, axes, true);
    n = 0;
    for (uint32_t d = 0; d < lead; d++)
        axes[n++] = (int32_t)d;
    if (n && g)
        g = kiln_sum(g, n, axes, false);
    return g;
}

static kiln_tensor *sum_to_in(const eng_fn *f, uint32_t i, kiln_tensor *g) {
    const shape_view *v = in_view(f, i);
    return sum_to(g, v->ndim, v->shape);
}

static kiln_tensor *expand_to(kiln_tensor *g, uint32_t ndim, const sym_node *const *shape) {
    return g ? eng_expand(g, ndim, shape) : NULL;
}

/* The reduced axes of a reduction record (ints: the axes given; none: every dim). */
static uint32_t reduced_mask(const eng_fn *f) {
    uint32_t ndim = in_view(f, 0)->ndim, mask = 0;
    if (f->nints == 0)
        return ndim ? (1u << ndim) - 1 : 0;
    for (uint32_t i = 0; i < f->nints; i++) {
        int64_t a = f->ints[i] < 0 ? f->ints[i] + ndim : f->ints[i];
        mask |= 1u << a;
    }
    return mask;
}

/* g (the reduction's output) with the reduced dims back as size 1, then broadcast to the
 * input's shape. */
static kiln_tensor *unreduce(const eng_fn *f, kiln_tensor *g, bool expand) {
    const shape_view *v = in_view(f, 0);
    uint32_t mask = reduced_mask(f);
    const sym_node *kd[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < v->ndim; d++)
        kd[d] = mask & (1u << d) ? cnst(ENG_CTX(g), 1) : v->shape[d];
    g = g ? eng_reshape(g, v->ndim, kd) : NULL;
    return expand ? expand_to(g, v->ndim, v->shape) : g;
}

/* The number of elements each output of a reduction combines, as a tensor of type. */
static kiln_tensor *reduced_count(kiln_context *ctx, const eng_fn *f, ir_type type) {
    const shape_view *v = in_view(f, 0);
    return eng_count_tensor(ctx, v->ndim, v->shape, reduced_mask(f), type);
}

static kiln_tensor *ones_like_mask(kiln_tensor *m, ir_type type) {
    return m ? kiln_cast(m, eng_dtype(type)) : NULL;
}

/* Scatters blocks into a tensor of size n along dim: g is (.., count, size, ..) with a block
 * dim of size elements (size <= step) after dim, and element e of block k lands at first +
 * k * step + e; the other elements are 0. The blocks padded with zeros to step, merged with
 * dim, the zeros after the last block dropped, then padded to n. */
static kiln_tensor *scatter_blocks(kiln_context *ctx, kiln_tensor *g, uint32_t dim, int64_t size,
                                   const sym_node *first, int64_t step, const sym_node *n) {
    if (!g)
        return NULL;
    const shape_view *v = view_of(g);
    uint32_t ndim = v->ndim - 1; /* without the block dim */
    const sym_node *count = v->shape[dim], *shape[SHAPE_MAX_DIMS];
    for (uint32_t d = 0, o = 0; d <= ndim; d++) {
        if (d != dim + 1)
            shape[o++] = d == dim ? sym_mul_c(ctx->sym, count, step) : v->shape[d];
    }
    int64_t c;
    if (sym_is_const(count, &c) && c == 0) {
        shape[dim] = n;
        return zeros_of(ctx, type_of(g), ndim, shape);
    }
    if (step > size) {
        const sym_node *pads[2 * SHAPE_MAX_DIMS];
        for (uint32_t d = 0; d <= ndim; d++) {
            pads[2 * d] = cnst(ctx, 0);
            pads[2 * d + 1] = cnst(ctx, d == dim + 1 ? step - size : 0);
        }
        g = eng_pad(g, pads);
    }
    g = g ? eng_reshape(g, ndim, shape) : NULL;
    /* the elements the blocks cover: (count - 1) step + size */
    const sym_node *len =
        sym_add_c(ctx->sym, sym_mul_c(ctx->sym, sym_add_c(ctx->sym, count, -1), step), size);
    if (g && step > size)
        g = kiln_narrow_sym(g, (int32_t)dim, eng_expr_handle(ctx, cnst(ctx, 0)),
                            eng_expr_handle(ctx, len));
    if (!g || !len)
        return NULL;
    /* The amount after may be provably non-negative only at the bound values (a forward slice
     * of a dim of bound symbolic size counted its elements with them): eng_pad, not
     * kiln_pad_sym, which would refuse it. */
    const sym_node *pads[2 * SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < ndim; d++) {
        pads[2 * d] = d == dim ? first : cnst(ctx, 0);
        pads[2 * d + 1] =
            d == dim ? sym_sub(ctx->sym, sym_sub(ctx->sym, n, first), len) : cnst(ctx, 0);
    }
    return eng_pad(g, pads);
}

/* Scatters g (sizes: count along dim) into a tensor of size n along dim whose element
 * first + k * step is g's k-th (step >= 1); the other elements are 0: blocks of one. */
static kiln_tensor *scatter_strided(kiln_context *ctx, kiln_tensor *g, uint32_t dim,
                                    const sym_node *first, int64_t step, const sym_node *n) {
    return g ? scatter_blocks(ctx, kiln_unsqueeze(g, (int32_t)dim + 1), dim, 1, first, step, n)
             : NULL;
}

/* The gradient of an unfold whose windows do not overlap (step >= size): each input element
 * is in at most one window, so the windows' gradients are laid back by movement alone. g is
 * (.., W, .., size) with W windows at dim: the window elements' dim moved next to it and the
 * windows scattered as blocks. No masked sum over the window positions, which the general
 * rule needs where windows overlap. */
static kiln_tensor *unfold_grad_disjoint(kiln_context *ctx, kiln_tensor *g, uint32_t dim,
                                         int64_t size, int64_t step, const sym_node *n) {
    if (!g)
        return NULL;
    uint32_t nd = view_of(g)->ndim; /* the input's dims and the window's */
    int32_t perm[SHAPE_MAX_DIMS];
    for (uint32_t d = 0, o = 0; d + 1 < nd; d++) {
        perm[o++] = (int32_t)d;
        if (d == dim)
            perm[o++] = (int32_t)nd - 1;
    }
    return scatter_blocks(ctx, kiln_permute(g, perm), dim, size, cnst(ctx, 0), step, n);
}

/* The pad rule's shrink of g (the kept part [b, e) of each dim), moved into g's node where
 * that node is a fresh elementwise computation g alone holds (through its plain view) and
 * nothing reads yet: a node of the same op over the kept part, its sources read through their
 * views shrunk alike, so that what a kernel realizes is the kept part only. The gradient of a
 * convolution's padded input, the fold of its nine windows, is such a sum: conv2's 16 x 16
 * per channel of which the 14 x 14 inside are kept. Otherwise a plain shrink of g. */
static kiln_tensor *shrink_grad(kiln_context *ctx, kiln_tensor *g, const sym_node *const *b,
                                const sym_node *const *e) {
    if (!g)
        return NULL;
    eng_node *n = eng_resolve(g);
    const shape_tracker *gst = ENG_ST(g);
    const shape_view *gv = shape_tracker_last(gst);
    bool into = n->kind == ENG_EW && !n->storage && !n->readers && n->cells == 1 && !n->boundary &&
                !n->unique && !n->written && shape_tracker_contiguous(gst) && gv->ndim == n->ndim;
    for (uint32_t d = 0; into && d < n->ndim; d++)
        into = gv->shape[d] == n->shape[d];
    /* sources read through one view each: the shrink of a later view of several gave a
     * stride-2 convolution's fold (14 x 14 images of 16 channels) rows that ran into the next
     * plane (docs/convolution.md) */
    for (uint32_t i = 0; into && i < n->nsrc; i++)
        into = n->src[i].st->nviews == 1;
    const sym_node *kept[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; into && d < n->ndim; d++)
        into = (kept[d] = sym_sub(ctx->sym, e[d], b[d])) != NULL;
    if (into) {
        shape_tracker shrunk[3];
        eng_node *nodes[3];
        const shape_tracker *views[3];
        for (uint32_t i = 0; i < n->nsrc; i++) {
            const shape_tracker *from = n->src[i].st;
            memcpy(&shrunk[i], from,
                   offsetof(shape_tracker, views) + from->nviews * sizeof(shape_view));
            shape_view *last = &shrunk[i].views[shrunk[i].nviews - 1], out;
            kiln_status vs = shape_view_shrink(ctx->shape, last, b, e, &out);
            if (vs != KILN_OK)
                return eng_fail_from_shape(ctx, vs);
            *last = out;
            nodes[i] = n->src[i].node;
            views[i] = &shrunk[i];
        }
        return eng_elementwise_of(ctx, n->op, n->type, n->ndim, kept, n->nsrc, nodes, views);
    }
    sym_ctx_clear_error(ctx->sym);
    const kiln_expr *bh[SHAPE_MAX_DIMS], *eh[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < gv->ndim; d++) {
        bh[d] = eng_expr_handle(ctx, b[d]);
        eh[d] = eng_expr_handle(ctx, e[d]);
    }
    return kiln_shrink_sym(g, bh, eh);
}

static kiln_tensor *unsupported(grad_run *g, const char *why) {
    g->failed = true;
    return eng_fail(g->ctx, KILN_ERROR_UNSUPPORTED, "kiln_grad: the gradient of a %s op %s",
                    op_name(g->fn->op), why);
}

/* torch's as_strided backward on constant shapes: every element of the input gets the sum of
 * the gradients of the output elements on its storage element (divided by how many input
 * elements share it). A compare-and-sum over (input elements) x (output elements). */
static kiln_tensor *as_strided_grad(grad_run *r, kiln_tensor *g) {
    kiln_context *ctx = r->ctx;
    const eng_fn *f = r->fn;
    kiln_tensor *x = eng_cell_handle(ctx, f->in[0].cell, f->in[0].st);
    const shape_view *xv = in_view(f, 0);
    uint32_t ndim = (uint32_t)f->value; /* the output's dims */
    int64_t xs[SHAPE_MAX_DIMS], xoff = 0, nx = 1, ny = 1;
    if (!x || kiln_tensor_strides(x, xs) != KILN_OK || kiln_tensor_offset(x, &xoff) != KILN_OK)
        return unsupported(r, "needs an input of constant shape that is one strided view");
    int64_t xshape[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < xv->ndim; d++) {
        if (!sym_is_const(xv->shape[d], &xshape[d]))
            return unsupported(r, "needs an input of constant shape");
        nx *= xshape[d];
    }
    for (uint32_t d = 0; d < ndim; d++)
        ny *= f->ints[d];
    /* Storage indices (i32) of the elements of a geometry, as a flat tensor. */
    kiln_tensor *idx[2] = {NULL, NULL};
    for (int which = 0; which < 2; which++) {
        uint32_t n = which ? ndim : xv->ndim;
        const int64_t *shape = which ? f->ints : xshape;
        const int64_t *strides = which ? f->ints + ndim : xs;
        int64_t off = which ? (int64_t)f->value2 : xoff;
        kiln_tensor *acc = scalar(ctx, IR_I32, (double)off);
        for (uint32_t d = 0; d < n && acc; d++) {
            kiln_tensor *a = kiln_arange(ctx, KILN_I32, 0, (double)shape[d], 1);
            a = kiln_mul_scalar(a, (double)strides[d]);
            int64_t rs[SHAPE_MAX_DIMS];
            for (uint32_t e = 0; e < n; e++)
                rs[e] = e == d ? shape[d] : 1;
            acc = kiln_add(acc, kiln_reshape(a, n, rs));
        }
        if (acc && n) {
            int64_t full[SHAPE_MAX_DIMS];
            memcpy(full, shape, n * sizeof *full);
            acc = kiln_expand(acc, n, full);
        }
        idx[which] = kiln_reshape(acc, 1, (int64_t[]){which ? ny : nx});
    }
    kiln_tensor *ix = kiln_reshape(idx[0], 2, (int64_t[]){nx, 1});
    kiln_tensor *iy = kiln_reshape(idx[1], 2, (int64_t[]){1, ny});
    kiln_tensor *gy = kiln_reshape(g, 2, (int64_t[]){1, ny});
    kiln_tensor *hit = kiln_eq(ix, iy);
    kiln_tensor *gx =
        kiln_sum(kiln_where(hit, gy, scalar(ctx, type_of(g), 0)), 1, (int32_t[]){1}, false);
    /* Input elements that share a storage element split it. */
    kiln_tensor *ix2 = kiln_reshape(idx[0], 2, (int64_t[]){1, nx});
    kiln_tensor *share =
        kiln_sum(ones_like_mask(kiln_eq(ix, ix2), type_of(g)), 1, (int32_t[]){1}, false);
    gx = kiln_div(gx, share);
    return kiln_reshape(gx, xv->ndim, xshape);
}

/* index_select's gradient (ints: dim): each row's gradient added into the row it came from,
 * repeated indices accumulating, as (.., n) @ one_hot(index, size) (n, size) with dim moved
 * last and back (a weight gradient's scatter-add as a product). An index out of range matches
 * no row. */
static kiln_tensor *index_select_grad(grad_run *r, kiln_tensor *g) {
    kiln_context *ctx = r->ctx;
    const shape_view *iv = in_view(r->fn, 0);
    uint32_t nd = iv->ndim, dim = norm_dim(r->fn->ints[0], nd);
    kiln_tensor *index = in_value(r, 1);
    if (index && kiln_tensor_ndim(index) == 0)
        index = kiln_unsqueeze(index, 0);
    if (!index)
        return NULL;
    const kiln_expr *size = eng_expr_handle(ctx, iv->shape[dim]);
    kiln_tensor *hot = kiln_cast(
        kiln_eq(kiln_unsqueeze(index, -1), kiln_arange_sym(ctx, eng_dtype(type_of(index)), size)),
        eng_dtype(type_of(g)));
    int32_t perm[SHAPE_MAX_DIMS], back[SHAPE_MAX_DIMS];
    for (uint32_t d = 0, j = 0; d < nd; d++) {
        if (d != dim)
            perm[j++] = (int32_t)d;
    }
    perm[nd - 1] = (int32_t)dim;
    for (uint32_t j = 0; j < nd; j++)
        back[perm[j]] = (int32_t)j;
    return kiln_permute(kiln_matmul(kiln_permute(g, perm), hot), back);
}

/* The input gradient of a convolution of stride 1, one group (ENG_AG_CONV_INPUT): input
 * element i takes w[k] g[i + p - d k] summed over the taps k, a convolution (dilation d) of g
 * padded by d (K - 1) - p (cropped where that is negative) with w's channels swapped and its
 * taps flipped. Its product reads g's windows in place (nothing records inside kiln_grad):
 * no window matrix of the gradient and no fold of it (docs/convolution.md). */
static kiln_tensor *conv_input_grad(grad_run *r, kiln_tensor *g) {
    const eng_fn *f = r->fn;
    kiln_tensor *w = in_value(r, 2);
    if (!w)
        return NULL;
    const shape_view *wv = in_view(f, 2), *gv = shape_tracker_last(ENG_ST(g));
    int64_t pad[8] = {0}, dilation[2], k, n;
    kiln_tensor *ext = g;
    for (uint32_t a = 0; a < 2 && ext; a++) {
        dilation[a] = f->ints[2 + a];
        if (!sym_is_const(wv->shape[2 + a], &k) || !sym_is_const(gv->shape[2 + a], &n))
            return eng_fail(r->ctx, KILN_ERROR_INTERNAL,
                            "kiln_grad: conv_input needs constant kernel and output sizes");
        int64_t margin = dilation[a] * (k - 1) - f->ints[a];
        if (margin >= 0)
            pad[2 * (2 + a)] = pad[2 * (2 + a) + 1] = margin;
        else
            ext = kiln_narrow(ext, (int32_t)(2 + a), -margin, n + 2 * margin);
    }
    ext = kiln_pad(ext, pad);
    /* the flipped weights (kiln_conv2d_ex lays them out for its product) */
    kiln_tensor *wt = kiln_flip(kiln_flip(kiln_transpose(w, 0, 1), 2), 3);
    const kiln_conv2d_options o = {.dilation = {dilation[0], dilation[1]}};
    return kiln_conv2d_ex(ext, wt, NULL, &o);
}

/* g * b, or b itself where g is all ones (the gradient a sum hands down) of b's shape and type:
 * a loss sum(y * t) gives y the gradient t, not a product by 1, whose node would stand between
 * t and a padded view of it (a convolution's input gradient reads the gradient's windows: a
 * load masked by the padding where the gradient is a stored tensor, the mask selected around
 * the fused product otherwise, its index then unsimplified). x * 1 is x for every float. */
static kiln_tensor *times(kiln_tensor *g, kiln_tensor *b) {
    eng_node *n = g && b ? eng_resolve(g) : NULL;
    const shape_view *gv = n ? shape_tracker_last(ENG_ST(g)) : NULL;
    const shape_view *bv = gv ? shape_tracker_last(ENG_ST(b)) : NULL;
    bool one = n && n->kind == ENG_CONST && !n->value_expr && n->value == 1.0 && bv &&
               type_of(b) == type_of(g) && bv->ndim == gv->ndim;
    for (uint32_t d = 0; one && d < gv->ndim; d++)
        one = bv->shape[d] == gv->shape[d];
    return one ? b : kiln_mul(g, b);
}

/* The gradient whose sum_to gives input i's: where fn's gradient g is a max pool's scattered
 * over the last two dims (relu_pools) and input i is summed over both (a bias's), the pool's
 * masked gradient, laid out, which has the same sums over a quarter of the elements for
 * 2 x 2 windows; else g. */
static kiln_tensor *pooled_sum(const grad_run *r, uint32_t i, kiln_tensor *g) {
    uint32_t from = r->notes[r->fn->order].sums_from;
    kiln_tensor *p = from ? r->notes[from - 1].grad : NULL;
    if (!p || type_of(p) != type_of(g))
        return g;
    const shape_view *v = in_view(r->fn, i), *gv = shape_tracker_last(ENG_ST(g));
    if (gv->ndim < 2 || v->ndim > gv->ndim)
        return g;
    uint32_t skip = gv->ndim - v->ndim; /* g's leading dims that input i lacks */
    for (uint32_t d = gv->ndim - 2; d < gv->ndim; d++) {
        int64_t size;
        if (d >= skip && (!sym_is_const(v->shape[d - skip], &size) || size != 1))
            return g;
    }
    return p;
}

/* The gradient of f's input i from g, the gradient of f's output. */
static kiln_tensor *rule(grad_run *r, uint32_t i, kiln_tensor *g) {
    kiln_context *ctx = r->ctx;
    const eng_fn *f = r->fn;
    ir_type gt = type_of(g);
    const shape_view *iv = in_view(f, i);
    switch ((eng_ag_op)f->op) {
    case ENG_AG_NONE:
    case ENG_AG_LEAF:
    case ENG_AG_TRANSPOSE: /* recorded as permutes and shrinks */
    case ENG_AG_NARROW:
        return NULL;
    case ENG_AG_IDENTITY:
    case ENG_AG_CAST:
    case ENG_AG_ADD_SCALAR:
        return g;
    case ENG_AG_RESHAPE:
        return eng_reshape(g, iv->ndim, iv->shape);
    case ENG_AG_ADD:
        return sum_to_in(f, i, pooled_sum(r, i, g));
    case ENG_AG_SUB:
        return sum_to_in(f, i, i == 0 ? g : kiln_neg(g));
    case ENG_AG_MUL:
        return sum_to_in(f, i, times(g, in_value(r, 1 - i)));
    case ENG_AG_DIV: {
        kiln_tensor *b = in_value(r, 1);
        if (i == 0)
            return sum_to_in(f, 0, kiln_div(g, b));
        kiln_tensor *a = in_value(r, 0);
        return sum_to_in(f, 1, kiln_neg(kiln_div(kiln_mul(g, a), kiln_mul(b, b))));
    }
    case ENG_AG_POW: {
        kiln_tensor *a = in_value(r, 0), *b = in_value(r, 1);
        kiln_tensor *zero = scalar(ctx, gt, 0);
        if (i == 0) {
            /* g b a^(b - 1), 0 where b == 0 (torch's) */
            kiln_tensor *d = kiln_mul(b, kiln_pow(a, kiln_add_scalar(b, -1.0)));
            return sum_to_in(f, 0, kiln_where(kiln_eq(b, zero), zero, kiln_mul(g, d)));
        }
        /* g a^b log a, 0 where a == 0 and b >= 0 (torch's) */
        kiln_tensor *y = out_value(r);
        kiln_tensor *mask =
            kiln_where(kiln_ge(b, zero), kiln_eq(a, zero), kiln_scalar(ctx, KILN_BOOL, 0));
        return sum_to_in(f, 1, kiln_where(mask, zero, kiln_mul(g, kiln_mul(y, kiln_log(a)))));
    }
    case ENG_AG_MAXIMUM:
    case ENG_AG_MINIMUM: {
        kiln_tensor *a = in_value(r, 0), *b = in_value(r, 1);
        kiln_tensor *zero = scalar(ctx, gt, 0);
        /* Ties split the gradient in halves (torch's); the loser gets 0. */
        bool max = f->op == ENG_AG_MAXIMUM;
        kiln_tensor *lose = (i == 0) == max ? kiln_lt(a, b) : kiln_gt(a, b);
        kiln_tensor *d =
            kiln_where(kiln_eq(a, b), kiln_mul_scalar(g, 0.5), kiln_where(lose, zero, g));
        return sum_to_in(f, i, d);
    }
    case ENG_AG_WHERE: {
        if (i == 0) /* a floating condition (nonzero is true): no gradient flows through it */
            return zeros_of(ctx, f->in_type[0], iv->ndim, iv->shape);
        kiln_tensor *c = in_value(r, 0), *zero = scalar(ctx, gt, 0);
        return sum_to_in(f, i, i == 1 ? kiln_where(c, g, zero) : kiln_where(c, zero, g));
    }
    case ENG_AG_NEG:
        return kiln_neg(g);
    case ENG_AG_ABS: {
        kiln_tensor *x = in_value(r, 0), *zero = scalar(ctx, gt, 0);
        kiln_tensor *sign = kiln_sub(kiln_cast(kiln_gt(x, zero), eng_dtype(gt)),
                                     kiln_cast(kiln_lt(x, zero), eng_dtype(gt)));
        return kiln_mul(g, sign);
    }
    case ENG_AG_EXP:
        return kiln_mul(g, out_value(r));
    case ENG_AG_LOG:
        return kiln_div(g, in_value(r, 0));
    case ENG_AG_SQRT:
        return kiln_div(g, kiln_mul_scalar(out_value(r), 2.0));
    case ENG_AG_RSQRT: {
        kiln_tensor *y = out_value(r);
        return kiln_mul(kiln_mul_scalar(g, -0.5), kiln_mul(y, kiln_mul(y, y)));
    }
    case ENG_AG_SIN:
        return kiln_mul(g, kiln_cos(in_value(r, 0)));
    case ENG_AG_COS:
        return kiln_neg(kiln_mul(g, kiln_sin(in_value(r, 0))));
    case ENG_AG_TANH: {
        kiln_tensor *y = out_value(r);
        return kiln_mul(g, kiln_sub(scalar(ctx, gt, 1), kiln_mul(y, y)));
    }
    case ENG_AG_SIGMOID: {
        kiln_tensor *y = out_value(r);
        return kiln_mul(g, kiln_mul(y, kiln_sub(scalar(ctx, gt, 1), y)));
    }
    case ENG_AG_RELU: {
        if (r->notes[f->order].relu_masked) /* by the max pool that reads it (relu_pools) */
            return g;
        /* torch's: the gradient passes where the output is not <= 0 (a NaN's passes) */
        kiln_tensor *zero = scalar(ctx, gt, 0);
        return kiln_where(kiln_le(out_value(r), zero), zero, g);
    }
    case ENG_AG_MUL_SCALAR:
        return kiln_mul_scalar(g, f->value);
    case ENG_AG_SUM:
        return unreduce(f, g, true);
    case ENG_AG_MEAN:
        return kiln_div(unreduce(f, g, true), reduced_count(ctx, f, gt));
    case ENG_AG_PROD: {
        /* Exact with zeros: an element's gradient is the product of the others. */
        kiln_tensor *x = in_value(r, 0), *zero = scalar(ctx, gt, 0), *one = scalar(ctx, gt, 1);
        kiln_tensor *is0 = kiln_eq(x, zero);
        uint32_t mask = reduced_mask(f), n = 0;
        int32_t axes[SHAPE_MAX_DIMS];
        for (uint32_t d = 0; d < iv->ndim; d++)
            if (mask & (1u << d))
                axes[n++] = (int32_t)d;
        kiln_tensor *nonzero = kiln_prod(kiln_where(is0, one, x), n, axes, true);
        kiln_tensor *zeros = kiln_sum(kiln_cast(is0, eng_dtype(gt)), n, axes, true);
        kiln_tensor *ge = unreduce(f, g, false);
        kiln_tensor *at0 = kiln_where(kiln_eq(zeros, one), nonzero, zero);
        kiln_tensor *else0 = kiln_where(kiln_eq(zeros, zero), kiln_div(nonzero, x), zero);
        return kiln_mul(expand_to(ge, iv->ndim, iv->shape), kiln_where(is0, at0, else0));
    }
    case ENG_AG_MAX:
    case ENG_AG_MIN: {
        /* torch's amax/amin: the gradient is shared evenly by the elements equal to the
         * result. */
        kiln_tensor *x = in_value(r, 0), *y = unreduce(f, out_value(r), true);
        kiln_tensor *hit = kiln_eq(x, y);
        uint32_t mask = reduced_mask(f), n = 0;
        int32_t axes[SHAPE_MAX_DIMS];
        for (uint32_t d = 0; d < iv->ndim; d++)
            if (mask & (1u << d))
                axes[n++] = (int32_t)d;
        kiln_tensor *count = kiln_sum(kiln_cast(hit, eng_dtype(gt)), n, axes, true);
        kiln_tensor *share = kiln_div(unreduce(f, g, false), count);
        return kiln_where(hit, expand_to(share, iv->ndim, iv->shape), scalar(ctx, gt, 0));
    }
    case ENG_AG_MAX_FIRST: {
        /* The row's first maximum (of NaNs, the last, as torch's max_pool2d) takes the
         * gradient: its index is an arg reduction of the saved input, made by the backward
         * only (a forward that is not differentiated never computes it). */
        kiln_tensor *first = eng_pool_argmax(in_value(r, 0));
        kiln_tensor *at =
            kiln_arange_sym(ctx, KILN_I32, eng_expr_handle(ctx, iv->shape[iv->ndim - 1]));
        if (r->notes[f->order].relu_masked) {
            /* the relu's mask, from the maximum (relu_pools), laid out: the backward then
             * reads two operands, and where g is a product's (the next layer's input
             * gradient) the mask is that product's epilogue (kernel.c epilogue_of) */
            kiln_tensor *zero = scalar(ctx, gt, 0);
            g = kiln_contiguous(kiln_where(kiln_le(out_value(r), zero), zero, g));
            r->notes[f->order].grad = g;
        }
        return kiln_where(kiln_eq(first, at), unreduce(f, g, true), scalar(ctx, gt, 0));
    }
    case ENG_AG_CONV_INPUT:
        return i == 0 ? g : conv_input_grad(r, g);
    case ENG_AG_VAR:
    case ENG_AG_STD: {
        kiln_tensor *x = in_value(r, 0);
        uint32_t mask = reduced_mask(f), n = 0;
        int32_t axes[SHAPE_MAX_DIMS];
        for (uint32_t d = 0; d < iv->ndim; d++)
            if (mask & (1u << d))
                axes[n++] = (int32_t)d;
        kiln_tensor *centered = kiln_sub(x, kiln_mean(x, n, axes, true));
        kiln_tensor *dof = kiln_add_scalar(reduced_count(ctx, f, gt), -f->value);
        kiln_tensor *ge = unreduce(f, g, true);
        if (f->op == ENG_AG_VAR)
            return kiln_div(kiln_mul(ge, kiln_mul_scalar(centered, 2.0)), dof);
        kiln_tensor *y = unreduce(f, out_value(r), true);
        return kiln_div(kiln_mul(ge, centered), kiln_mul(dof, y));
    }
    case ENG_AG_SOFTMAX: {
        int32_t dim = (int32_t)f->ints[0];
        kiln_tensor *y = out_value(r);
        kiln_tensor *dot = kiln_sum(kiln_mul(g, y), 1, &dim, true);
        return kiln_mul(y, kiln_sub(g, dot));
    }
    case ENG_AG_LOG_SOFTMAX: {
        int32_t dim = (int32_t)f->ints[0];
        kiln_tensor *y = out_value(r);
        return kiln_sub(g, kiln_mul(kiln_exp(y), kiln_sum(g, 1, &dim, true)));
    }
    case ENG_AG_MATMUL: {
        /* 1-d operands as torch.matmul treats them: a (K) as (1, K), b (K) as (K, 1). Only the
         * other operand's value is read (a write to this one does not matter). */
        const shape_view *av = in_view(f, 0), *bv = in_view(f, 1);
        uint32_t an = av->ndim, bn = bv->ndim;
        kiln_tensor *other = in_value(r, 1 - i);
        if (!other)
            return NULL;
        kiln_tensor *g2 = g; /* materialised (kiln_grad) */
        if (an == 1 && bn == 1)
            g2 = kiln_reshape(g2, 2, (int64_t[]){1, 1});
        else if (an == 1)
            g2 = kiln_unsqueeze(g2, -2);
        else if (bn == 1)
            g2 = kiln_unsqueeze(g2, -1);
        kiln_tensor *d;
        const sym_node *shape2[SHAPE_MAX_DIMS]; /* the operand as a matrix (or batch of them) */
        uint32_t n2;
        if (i == 0) {
            kiln_tensor *b2 = bn == 1 ? kiln_unsqueeze(other, 1) : other;
            d = an == 2 && bn == 3 ? image_groups(g2, b2) : NULL;
            d = d ? d : kiln_matmul(g2, kiln_transpose(b2, -1, -2));
            n2 = an == 1 ? 2 : an;
            if (an == 1) {
                shape2[0] = cnst(ctx, 1);
                shape2[1] = av->shape[0];
            } else {
                memcpy(shape2, av->shape, an * sizeof *shape2);
            }
        } else {
            kiln_tensor *a2 = an == 1 ? kiln_unsqueeze(other, 0) : other;
            d = kiln_matmul(kiln_transpose(a2, -1, -2), g2);
            n2 = bn == 1 ? 2 : bn;
            if (bn == 1) {
                shape2[0] = bv->shape[0];
                shape2[1] = cnst(ctx, 1);
            } else {
                memcpy(shape2, bv->shape, bn * sizeof *shape2);
            }
        }
        d = sum_to(d, n2, shape2);
        return d ? eng_reshape(d, iv->ndim, iv->shape) : NULL;
    }
    case ENG_AG_PERMUTE: {
        int32_t inv[SHAPE_MAX_DIMS];
        for (uint32_t d = 0; d < iv->ndim; d++) {
            int64_t p = f->ints[d] < 0 ? f->ints[d] + iv->ndim : f->ints[d];
            inv[p] = (int32_t)d;
        }
        return kiln_permute(g, inv);
    }
    case ENG_AG_EXPAND:
        return sum_to_in(f, 0, g);
    case ENG_AG_PAD: {
        /* syms: before, after per dim */
        const sym_node *b[SHAPE_MAX_DIMS], *e[SHAPE_MAX_DIMS];
        for (uint32_t d = 0; d < iv->ndim; d++) {
            b[d] = f->syms[2 * d];
            e[d] = sym_add(ctx->sym, f->syms[2 * d], iv->shape[d]);
        }
        return shrink_grad(ctx, g, b, e);
    }
    case ENG_AG_SHRINK: {
        /* syms: begin per dim, then end per dim */
        const kiln_expr *p[2 * SHAPE_MAX_DIMS];
        for (uint32_t d = 0; d < iv->ndim; d++) {
            p[2 * d] = eng_expr_handle(ctx, f->syms[d]);
            p[2 * d + 1] =
                eng_expr_handle(ctx, sym_sub(ctx->sym, iv->shape[d], f->syms[iv->ndim + d]));
        }
        return kiln_pad_sym(g, p);
    }
    case ENG_AG_FLIP:
        return kiln_flip(g, (int32_t)f->ints[0]);
    case ENG_AG_SLICE: {
        /* ints: dim, step; syms: the first element taken (negative steps: the last). */
        uint32_t dim = (uint32_t)f->ints[0];
        int64_t step = f->ints[1];
        if (f->nsyms == 0)
            return unsupported(r, "over a dim of symbolic size needs a start of 0 and a "
                                  "positive step");
        const sym_node *first = f->syms[0];
        if (step < 0) {
            g = kiln_flip(g, (int32_t)dim);
            step = -step;
        }
        return scatter_strided(ctx, g, dim, first, step, iv->shape[dim]);
    }
    case ENG_AG_SELECT: {
        /* ints: dim; syms: the index (normalized) */
        uint32_t dim = (uint32_t)f->ints[0];
        return scatter_strided(ctx, kiln_unsqueeze(g, (int32_t)dim), dim, f->syms[0], 1,
                               iv->shape[dim]);
    }
    case ENG_AG_UNFOLD: {
        /* ints: dim, size, step: window w's element k is element w * step + k. */
        uint32_t dim = (uint32_t)f->ints[0];
        int64_t size = f->ints[1], step = f->ints[2];
        kiln_tensor *sum = NULL;
        if (size == 0)
            return zeros_of(ctx, gt, iv->ndim, iv->shape);
        if (step >= size)
            return unfold_grad_disjoint(ctx, g, dim, size, step, iv->shape[dim]);
        for (int64_t k = 0; k < size; k++) {
            kiln_tensor *gk = kiln_select(g, -1, k);
            kiln_tensor *s = scatter_strided(ctx, gk, dim, cnst(ctx, k), step, iv->shape[dim]);
            sum = sum ? kiln_add(sum, s) : s;
        }
        return sum;
    }
    case ENG_AG_DIAGONAL: {
        /* ints: offset, dim1, dim2 (normalized). The output is the input without dim1 and
         * dim2, then the diagonal (L elements) last. */
        int64_t off = f->ints[0];
        uint32_t d1 = (uint32_t)f->ints[1], d2 = (uint32_t)f->ints[2], nd = iv->ndim;
        const sym_node *n1 = iv->shape[d1], *n2 = iv->shape[d2];
        const shape_view *gv = view_of(g);
        const sym_node *len = gv->shape[gv->ndim - 1];
        int64_t lc;
        if (sym_is_const(len, &lc) && lc == 0)
            return zeros_of(ctx, gt, nd, iv->shape);
        /* (.., L) -> (.., L, n2 + 1) zero-padded -> (.., L (n2 + 1)): element i at
         * i (n2 + 1), the flat index of (i, i) in an (n1, n2) matrix. */
        kiln_tensor *u = kiln_unsqueeze(g, -1);
        const sym_node *stride = sym_add_c(ctx->sym, n2, 1);
        const sym_node *first = off >= 0 ? cnst(ctx, off) : sym_mul_c(ctx->sym, n2, -off);
        const sym_node *flat = sym_mul(ctx->sym, n1, n2);
        int64_t st;
        kiln_tensor *m;
        if (sym_is_const(stride, &st)) {
            m = scatter_strided(ctx, kiln_squeeze(u, -1), gv->ndim - 1, first, st, flat);
        } else {
            return unsupported(r, "needs constant sizes");
        }
        const sym_node *shape[SHAPE_MAX_DIMS];
        for (uint32_t d = 0; d + 1 < gv->ndim; d++)
            shape[d] = gv->shape[d];
        shape[gv->ndim - 1] = n1;
        shape[gv->ndim] = n2;
        m = m ? eng_reshape(m, nd, shape) : NULL;
        /* Back to the input's dim order: the kept dims in order, dim1 and dim2 in place. */
        int32_t perm[SHAPE_MAX_DIMS];
        for (uint32_t d = 0, k = 0; d < nd; d++) {
            if (d == d1)
                perm[d] = (int32_t)nd - 2;
            else if (d == d2)
                perm[d] = (int32_t)nd - 1;
            else
                perm[d] = (int32_t)k++;
        }
        return kiln_permute(m, perm);
    }
    case ENG_AG_AS_STRIDED:
        return as_strided_grad(r, g);
    case ENG_AG_INDEX_SELECT:
        return i == 0 ? index_select_grad(r, g) : NULL;
    }
    return NULL;
}

/* Whether the value read along an edge (its version, observed) is the one the record made:
 * views pass the question to the record of the storage they view. */
static bool edge_current(const eng_fn *f, uint64_t observed) {
    while (f && f->view && f->op != ENG_AG_LEAF)
        f = f->in_fn[0];
    return !f || f->op == ENG_AG_LEAF || f->out_version == observed;
}

static bool numel_one(const shape_view *v) {
    for (uint32_t d = 0; d < v->ndim; d++) {
        int64_t n;
        if (!sym_is_const(v->shape[d], &n) || n != 1)
            return false;
    }
    return true;
}

/* Whether f only moves elements: each element of its output is one element of its one input
 * that takes a gradient (*in) or a constant, and that element's gradient is the output's,
 * scattered back (summed where it is read more than once). */
static bool moves_elements(const eng_fn *f, uint32_t *in) {
    uint32_t from = 0;
    switch ((eng_ag_op)f->op) {
    case ENG_AG_IDENTITY:
    case ENG_AG_RESHAPE:
    case ENG_AG_PERMUTE:
    case ENG_AG_EXPAND:
    case ENG_AG_PAD:
    case ENG_AG_SHRINK:
    case ENG_AG_FLIP:
    case ENG_AG_SLICE:
    case ENG_AG_SELECT:
    case ENG_AG_DIAGONAL:
    case ENG_AG_UNFOLD:
    case ENG_AG_AS_STRIDED:
        break;
    case ENG_AG_WHERE: /* a selection between its value and constants (a max pool's padding) */
        from = f->in_fn[1] ? 1 : 2;
        break;
    default:
        return false;
    }
    for (uint32_t j = 0; j < f->nin; j++)
        if ((j == from) != (f->in_fn[j] != NULL))
            return false;
    *in = from;
    return true;
}

/* Whether record f, between a relu's output of nd dims and a max pool's windows of it, keeps
 * the leading nd - 2 dims as they are (kiln_max_pool2d's records: a pad of the last two dims,
 * the select from that padding, windows over the last two dims, the merge of the windows'
 * dims). */
static bool keeps_leading_dims(const eng_fn *f, uint32_t nd) {
    switch ((eng_ag_op)f->op) {
    case ENG_AG_UNFOLD:
        return f->ints[0] + 2 >= (int64_t)nd;
    case ENG_AG_PAD:
        if (f->nsyms != 2 * nd)
            return false;
        for (uint32_t i = 0; i < 2 * (nd - 2); i++) {
            int64_t v;
            if (!sym_is_const(f->syms[i], &v) || v != 0)
                return false;
        }
        return true;
    case ENG_AG_WHERE:
    case ENG_AG_RESHAPE:
        return true;
    default:
        return false;
    }
}

/* max_pool2d(relu(x)): a max pool (eng_max_first) over windows of a relu's output, reached
 * through ops that only move elements. The element that takes a window's gradient is the
 * window's first maximum, where the relu's mask (the output not <= 0, as torch's: a NaN's
 * gradient passes) is the window's maximum not <= 0. So where the relu's output takes its
 * gradient from that pool alone (the relu and every op between have one consumer among the
 * records the walk differentiates), the pool applies the mask to its own gradient, a quarter
 * of the elements for 2 x 2 windows, and the relu passes its gradient on: the backward no
 * longer reads the relu's output nor what it was computed from (the training example's
 * pool-and-relu backwards stop reading the convolutions' outputs). A pool whose output was
 * written in place since keeps the relu's mask (its maximum is no longer the value it
 * computed). Both records are noted relu_masked.
 *
 * Where the pool's windows are over the relu output's last two dims only (each record between
 * keeps_leading_dims), the record that made the relu's input, read by the relu alone, is noted
 * too (sums_from: the pool's order + 1): each window's gradient lands on one element of the
 * window's own plane, so a sum of that gradient over the last two dims (a bias's: conv2d_ex adds
 * it) is the masked pooled gradient's over its own last two (pooled_sum). */
static void relu_pools(eng_fn *const *order, size_t n, const uint8_t *need, pool_note *notes) {
    for (size_t k = 0; k < n; k++) {
        const eng_fn *pool = order[k];
        if (pool->op != ENG_AG_MAX_FIRST || !need[k] || !pool->out.cell ||
            pool->out.cell->version != pool->out.version)
            continue;
        const shape_view *windows = in_view(pool, 0); /* (leading..., OH, OW, window) */
        uint32_t nd = windows->ndim - 1, in = 0;
        bool last_two = nd >= 2;
        const eng_fn *f = pool->in_fn[0];
        while (f && need[f->order] && notes[f->order].consumers == 1 && moves_elements(f, &in)) {
            last_two = last_two && keeps_leading_dims(f, nd);
            f = f->in_fn[in];
        }
        if (!f || f->op != ENG_AG_RELU || !need[f->order] || notes[f->order].consumers != 1)
            continue;
        notes[k].relu_masked = notes[f->order].relu_masked = true;
        const shape_view *out = shape_tracker_last(f->out.st);
        last_two = last_two && out->ndim == nd;
        for (uint32_t d = 0; last_two && d + 2 < nd; d++)
            last_two = windows->shape[d] == out->shape[d];
        const eng_fn *made = f->in_fn[0];
        if (last_two && made && need[made->order] && notes[made->order].consumers == 1)
            notes[made->order].sums_from = (uint32_t)k + 1;
    }
}

kiln_status kiln_grad(kiln_tensor *loss, uint32_t count, kiln_tensor *const *inputs,
                      kiln_tensor **grads) {
    kiln_context *ctx = NULL;
    kiln_status st;
    if (grads)
        for (uint32_t i = 0; i < count; i++)
            grads[i] = NULL;
    eng_tensor *l = eng_arg_status(loss, &ctx, "kiln_grad", &st);
    if (!l)
        return st;
    /* A pending sticky error is reported; an earlier call's own error is cleared, so that the
     * messages below are this call's. */
    st = eng_call_begin(ctx);
    if (st != KILN_OK)
        return st;
    if (count > 0 && (!inputs || !grads))
        return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_grad: inputs or grads is NULL with count %u", count);
    for (uint32_t i = 0; i < count; i++) {
        if (!eng_arg_status(inputs[i], &ctx, "kiln_grad", &st)) {
            char why[256];
            snprintf(why, sizeof why, "%s", kiln_context_message(ctx));
            return base_error_reset(&ctx->err, st, "%s (inputs[%u])", why, i);
        }
    }
    ir_type lt = l->cell->node->type;
    if (!ir_type_is_float(lt))
        return base_error_set(&ctx->err, KILN_ERROR_DTYPE_MISMATCH,
                              "kiln_grad: the loss is %s: it must be a floating tensor",
                              kiln_dtype_name(eng_dtype(lt)));
    if (!numel_one(shape_tracker_last(l->st))) {
        char s[128];
        const shape_view *v = shape_tracker_last(l->st);
        return base_error_set(&ctx->err, KILN_ERROR_SHAPE_MISMATCH,
                              "kiln_grad: the loss has shape %s: it must have one element",
                              eng_shape_render(v->ndim, v->shape, s, sizeof s));
    }
    if (l->fn && !edge_current(l->fn, l->cell->version))
        return base_error_set(&ctx->err, KILN_ERROR_MODIFIED,
                              "kiln_grad: the loss was written in place after it was computed: "
                              "its value is not the one whose history is recorded");
    /* The records reachable from the loss, inputs before the records that read them (an
     * iterative depth-first walk). */
    BASE_VEC(eng_fn *) order = {0};
    BASE_VEC(eng_fn *) stack = {0};
    BASE_VEC(uint8_t) need = {0};
    BASE_VEC(kiln_tensor *) acc = {0};
    uint64_t stamp = ++ctx->next_mark;
    bool oom = false;
    if (l->fn) {
        l->fn->mark = stamp;
        l->fn->order = 0; /* children visited so far */
        oom |= BASE_VEC_PUSH(&ctx->alloc, &stack, l->fn) != KILN_OK;
    }
    while (stack.len && !oom) {
        eng_fn *f = stack.data[stack.len - 1];
        if (f->order < f->nin) {
            eng_fn *c = f->in_fn[f->order++];
            if (c && c->mark != stamp) {
                c->mark = stamp;
                c->order = 0;
                oom |= BASE_VEC_PUSH(&ctx->alloc, &stack, c) != KILN_OK;
            }
            continue;
        }
        stack.len--;
        oom |= BASE_VEC_PUSH(&ctx->alloc, &order, f) != KILN_OK;
    }
    for (size_t k = 0; k < order.len && !oom; k++)
        order.data[k]->order = (uint32_t)k;
    for (size_t k = 0; k < order.len && !oom; k++) {
        oom |= BASE_VEC_PUSH(&ctx->alloc, &need, 0) != KILN_OK;
        oom |= BASE_VEC_PUSH(&ctx->alloc, &acc, NULL) != KILN_OK;
    }
    BASE_VEC_FREE(&ctx->alloc, &stack);
    if (oom) {
        BASE_VEC_FREE(&ctx->alloc, &order);
        BASE_VEC_FREE(&ctx->alloc, &need);
        BASE_VEC_FREE(&ctx->alloc, &acc);
        return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY,
                              "kiln_grad: no memory for the walk");
    }
    /* Records on a path to an input asked about. */
    for (uint32_t i = 0; i < count; i++) {
        eng_fn *f = eng_t(inputs[i])->fn;
        if (f && f->mark == stamp)
            need.data[f->order] = 1;
    }
    for (size_t k = 0; k < order.len; k++) {
        eng_fn *f = order.data[k];
        for (uint32_t j = 0; j < f->nin; j++)
            if (f->in_fn[j] && need.data[f->in_fn[j]->order])
                need.data[k] = 1;
    }
    size_t slots = order.len + 1;
    pool_note *notes = base_calloc(&ctx->alloc, slots, sizeof *notes);
    if (!notes) {
        BASE_VEC_FREE(&ctx->alloc, &order);
        BASE_VEC_FREE(&ctx->alloc, &need);
        BASE_VEC_FREE(&ctx->alloc, &acc);
        return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY,
                              "kiln_grad: no memory for the walk");
    }
    for (size_t k = 0; k < order.len; k++)
        for (uint32_t j = 0; j < order.data[k]->nin && need.data[k]; j++)
            if (order.data[k]->in_fn[j])
                notes[order.data[k]->in_fn[j]->order].consumers++;
    relu_pools(order.data, order.len, need.data, notes);
    eng_log_enter(ctx);
    ctx->call = "kiln_grad";
    size_t mark = eng_temps_begin(ctx);
    ctx->ag_block++;
    grad_run run = {.ctx = ctx, .notes = notes};
    if (order.len) {
        const shape_view *v = shape_tracker_last(l->st);
        acc.data[order.len - 1] = eng_full(ctx, lt, v->ndim, v->shape, 1.0, NULL);
        run.failed = !acc.data[order.len - 1];
    }
    for (size_t k = order.len; k-- > 0 && !run.failed;) {
        eng_fn *f = order.data[k];
        kiln_tensor *g = acc.data[k];
        if (!g || !need.data[k] || f->op == ENG_AG_LEAF)
            continue;
        run.fn = f;
        bool costly = eng_node_inlined_ops(ENG_BASE(g), RECOMPUTE_MIN_OPS) >= RECOMPUTE_MIN_OPS;
        uint32_t readers = needed_inputs(f, need.data);
        /* a bias that sums the pool's gradient instead (pooled_sum) is not g's reader */
        for (uint32_t j = 0; j < f->nin && notes[k].sums_from && f->op == ENG_AG_ADD; j++)
            readers -= f->in_fn[j] && need.data[f->in_fn[j]->order] && pooled_sum(&run, j, g) != g;
        /* A costly gradient that a sum or difference passes to both its operands (a layer's
         * output and its bias) is read by two kernels at least: materialised here once, where
         * the scheduler would realize it and a product's rule then copy it again (conv1's
         * relu and pool backward in the training example: a 3.2 MB copy, 0.7 ms on lavapipe). */
        if ((f->op == ENG_AG_ADD || f->op == ENG_AG_SUB) && readers > 1 && costly && !laid_out(g)) {
            g = kiln_contiguous(g);
            run.failed = !g;
        }
        /* A product's gradient is read by the two products of its rule, each element many
         * times: materialised once rather than recomputed inside their loops (a convolution's,
         * read by the input gradient's product and passed on to the product that made the
         * convolution, once for both). Read by one of them, only where it is costly: a cheap
         * one (an output's gradient times a broadcast scalar) is inlined into that product's
         * loads (bench_ops' conv2d weight gradient: its 0.45 ms copy of the output's gradient
         * gone). */
        if ((f->op == ENG_AG_MATMUL || f->op == ENG_AG_CONV_INPUT) && (readers > 1 || costly) &&
            !laid_out(g)) {
            g = kiln_contiguous(g);
            run.failed = !g;
        }
        for (uint32_t j = 0; j < f->nin && !run.failed; j++) {
            eng_fn *in = f->in_fn[j];
            if (!in || !need.data[in->order])
                continue;
            if (!edge_current(in, f->in[j].version)) {
                run.failed = true;
                eng_fail(ctx, KILN_ERROR_MODIFIED,
                         "kiln_grad: input %u of a %s op was overwritten in place before the "
                         "op read it: the value read is not the one whose history is "
                         "recorded (Kiln does not differentiate through writes)",
                         j, op_name(f->op));
                break;
            }
            kiln_tensor *d = rule(&run, j, g);
            if (d && type_of(d) != f->in_type[j])
                d = kiln_cast(d, eng_dtype(f->in_type[j]));
            if (!d) {
                run.failed = true;
                if (ctx->err.status == KILN_OK) /* a rule that gave nothing, saying nothing */
                    eng_fail(ctx, KILN_ERROR_UNSUPPORTED,
                             "kiln_grad: no gradient for input %u of a %s op", j, op_name(f->op));
                break;
            }
            kiln_tensor **slot = &acc.data[in->order];
            *slot = *slot ? kiln_add(*slot, d) : d;
            run.failed = !*slot;
        }
    }
    kiln_tensor *out[64];
    kiln_tensor **result = count <= 64 ? out : base_calloc(&ctx->alloc, count, sizeof *result);
    if (!result) {
        run.failed = true;
        eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "kiln_grad: no memory");
    }
    for (uint32_t i = 0; i < count && !run.failed; i++) {
        eng_tensor *e = eng_t(inputs[i]);
        kiln_tensor *g = e->fn && e->fn->mark == stamp ? acc.data[e->fn->order] : NULL;
        ir_type type = e->cell->node->type;
        const shape_view *v = shape_tracker_last(e->st);
        if (!g)
            g = zeros_of(ctx, type, v->ndim, v->shape);
        else if (type_of(g) != type)
            g = kiln_cast(g, eng_dtype(type));
        /* A handle of its own per input (two inputs may share a record). */
        g = g ? eng_view_new(ctx, g, eng_tracker_keep(ctx, ENG_ST(g))) : NULL;
        result[i] = g;
        run.failed = !g;
    }
    ctx->ag_block--;
    if (run.failed) {
        st = ctx->err.status ? ctx->err.status : KILN_ERROR_OUT_OF_HOST_MEMORY;
        char msg[BASE_ERROR_MESSAGE_MAX];
        snprintf(msg, sizeof msg, "%s", base_error_message(&ctx->err));
        eng_temps_end_many(ctx, mark, 0, NULL);
        ctx->sticky = false;
        base_error_reset(&ctx->err, st, "%s%s", strncmp(msg, "kiln_grad", 9) ? "kiln_grad: " : "",
                         msg);
    } else {
        eng_temps_end_many(ctx, mark, count, result);
        for (uint32_t i = 0; i < count; i++)
            grads[i] = result[i];
        st = KILN_OK;
    }
    if (result && result != out)
        base_free(&ctx->alloc, result, count * sizeof *result);
    base_free(&ctx->alloc, notes, slots * sizeof *notes);
    BASE_VEC_FREE(&ctx->alloc, &order);
    BASE_VEC_FREE(&ctx->alloc, &need);
    BASE_VEC_FREE(&ctx->alloc, &acc);
    eng_log_leave(ctx);
    return st;
}
