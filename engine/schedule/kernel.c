/* Kernel ASTs: the expression a kernel computes per output element, with every load's storage
 * index and validity as symbolic expressions over the kernel's index Variables (gidx: the
 * output element; ridx: the reduction's element). Bound Variables are unbound afterwards, so
 * the AST and its hash are the same for every bound value; the values become parameters. So
 * do view offsets and mask bounds (lifted below): row i of a table is one kernel for every i.
 *
 * Fusion: elementwise nodes are inlined into their consumer; a reduction is fused into the
 * kernel when it is the kernel's own output or when the elementwise output reads it element for
 * element (mean = sum * 1/n), or, in row mode, when an elementwise kernel of constant sizes
 * reads a reduction over its last dim along each output row (softmax's max and sum, a row
 * mean): such reductions become stages of the kernel (a stage's value may read the results of
 * lower ones) and one invocation owns a row (lower.c). So does, on any device, a reduction that
 * another's loop reads at the kernel's own element over the same dims (a softmax's max in the
 * sum of exp(x - max), a variance's mean: stage_read), stored beside the kernel's output. A max
 * over small windows of a short reduction (a pool of a convolution) is unrolled, the reduction
 * computed at each window element (build_window). Any other unrealized reduction is a
 * dependency that must be realized by an earlier kernel. No input
 * is made contiguous first: every load reads through its view's index expression.
 *
 * Against recomputation: an inlined node is computed again at every read, so inside a
 * reduction's input (where one output element reads many), or in an elementwise kernel
 * when the node has at least the device's parallelism of elements, an unrealized elementwise
 * node read through a repeating view (a broadcast: stride 0 over a dim of two or more indices; or
 * overlapping windows: kiln_unfold with size > step, two dims whose steps meet) is realized
 * first by a kernel of its own and then loaded, when inlining it costs at least
 * RECOMPUTE_MIN_OPS (4) operations per read (its op and those of the unrealized elementwise
 * nodes it inlines). Shorter chains stay fused (a matmul's scaled or relu-ed operand, x * s + b
 * then relu, a relu backward's compare and multiply): there a load saves little. The case that
 * set it: in the CNN training step (bench_train), a max-pool backward read the conv input
 * gradient's sum of nine shifted windows (8 adds) through the pool's 2x2 broadcast inside a
 * reduction over the batch, recomputing it four times per element; the other candidates there
 * had 1 or 2 ops, so any threshold from 3 to 8 builds the same kernels. Measured on lavapipe:
 * that reduction 23 -> 5 ms, the new kernel 4 ms, the step about 5% faster. The test is on
 * strides and sizes' ranges (view_repeats), never on bound values, so every binding builds the
 * same kernels. The rule's other half: such a node (four or more operations, at least the
 * device's parallelism of elements) where the reads of two or more kernels of their own part
 * (reductions, kiln_contiguous copies: read_by_several_kernels) is realized once too, read
 * through any view; in the training step, a relu and max-pool backward read by the bias
 * gradient's sum and by the copy the weight and input gradients' products read (the step about
 * 8-10% faster on lavapipe). kiln_contiguous is the boundary for what the rule does not see (a
 * small node's repeated reads in an elementwise kernel, a cheap node read very many times). */
#include "eng.h"

#include <stdio.h>
#include <stdlib.h>
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
    bool in_reduce;       /* building a reduction's input */
    bool unrolled;        /* building an unrolled window's elements (build_window): a reduction read
                             at any element joins the range as an instance of its own */
    uint32_t reduce_mask; /* the reduced dims of the kernel's reductions */
    const sym_node *reduce_in[SHAPE_MAX_DIMS]; /* and their input shape */
    uint32_t reduce_ndim;
    const sym_node *rid[SHAPE_MAX_DIMS]; /* ridx unravelled over the reduced dims */
    const sym_node *valid; /* conjunction of the masks the current value is read through */
    bool at_output;        /* the current logical index is the output element's own */
    eng_node *inlined_top; /* the outermost unrealized node being inlined (NULL: none) */
    eng_node *last_top;    /* the last such node (its loads may fill the buffer table) */
    bool row_ok;           /* an elementwise kernel of constant sizes: row mode is possible */
    uint32_t depth;        /* unrealized nodes inlined around the current one */
    uint32_t gathers;      /* gathers in the kernel (each names its Variable) */
    const sym_node *out_idx[SHAPE_MAX_DIMS]; /* the output element's indices (over k->dims) */
    eng_node *epilogue; /* the reduction whose dims the kernel runs over (epilogue_of), or NULL */
    /* Values lifted out of the code (finish_tree): each expression replaced, and by what. */
    struct lifted {
        const sym_node *from, *to;
        int64_t lo, hi; /* an offset's range (a bound's comes from its comparison) */
    } lifted[ENG_MAX_PARAMS];
    uint32_t lifted_count;
    /* Seeds made parameters (lift_seed): each seed's Variables (low, high 32 bits). */
    struct lifted_seed {
        uint64_t seed;
        const sym_node *key[2];
    } seeds[ENG_MAX_PARAMS / 2];
    uint32_t seed_count;
    uint32_t descriptors, max_descriptors; /* bound so far; the device's per-kernel limit */
    uint64_t wanted;  /* the realize's mark of the nodes it needs (0: no sibling outputs) */
    bool whole_write; /* a write kernel whose elements are its whole target's, in order */
    bool no_fusion;   /* other writes read are not fused (fused_write) */
    bool refuse;      /* a fused write's target is read elsewhere: build again without */
    const sym_node *fused_index[ENG_MAX_OUTPUTS - 1]; /* each fused write's element */
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
    uint64_t bytes = (s->bound > s->elements ? s->bound : s->elements) * eng_type_size(s->type);
    uint32_t descriptors = eng_storage_descriptors(b->ctx, bytes);
    if (k->buffer_count == ENG_MAX_BUFFERS || b->descriptors + descriptors > b->max_descriptors) {
        /* Too many inputs for one kernel (or for the device's storage-buffer bindings): an
         * earlier kernel realizes the outermost inlined node (one buffer afterwards), then this
         * kernel is built again. */
        if (b->inlined_top || b->last_top) {
            need(b, b->inlined_top ? b->inlined_top : b->last_top);
        } else {
            char what[128];
            snprintf(what, sizeof what,
                     "a kernel reads more buffers than the %u storage-buffer bindings a kernel "
                     "may have on this device",
                     b->max_descriptors);
            build_fail(b, KILN_ERROR_LIMIT_EXCEEDED, what);
        }
        return 0;
    }
    b->descriptors += descriptors;
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
static kast *reduction_instance(kbuild *b, eng_node *r, const sym_node *const *out_idx,
                                const sym_node *at);
static kast *reduction_beside(kbuild *b, eng_node *r, const sym_node *const *at);
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

/* Whether reduction n, read at index at inside a reduction's loop, is one of the kernel's
 * outputs' shape read at the kernel's own element, with no mask on the way (a softmax's sum of
 * exp(x - max) reading its row's max, a variance its mean): it then runs as an earlier stage of
 * the same loop (reduction_beside), instead of a kernel of its own before. Not over a symbolic
 * count that may exceed ENG_REDUCE_MAX_COUNT: each stage's loop counts against lavapipe's
 * budget, where two kernels would each have had their own. */
static bool stage_read(kbuild *b, const eng_node *n, const sym_node *const *at) {
    const eng_kernel *k = b->k;
    if (!b->in_reduce || k->rows || n->arg || n->ndim != k->ndim || !is_true(b->valid) ||
        !k->reduce_count || sym_vmax(k->reduce_count) > ENG_REDUCE_MAX_COUNT)
        return false;
    for (uint32_t d = 0; d < k->ndim; d++) {
        if (n->shape[d] != k->dims[d] || at[d] != b->out_idx[d])
            return false;
    }
    return true;
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

static bool same_shape(const eng_node *a, const eng_node *b) {
    if (a->ndim != b->ndim)
        return false;
    for (uint32_t d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

/* An epilogue: the unrealized reduction that elementwise root reads at its own element in
 * another shape, through dense reshapes of the whole result (relu(conv2d(x, w)) reads the
 * per-image product, (N, O, 1, OH OW), as (N, O, OH, OW)). The kernel then runs over the
 * reduction's dims, as the reduction's own kernel would, so that its tiles are the
 * reduction's (lower.c eng_kernel_tile reads the dims: over (N, O, OH, OW) conv2's forward
 * with a relu took 28 ms on lavapipe where the product alone took 4.3); its output element
 * is the same (a reshape keeps the order of elements). NULL where there is none, or two of
 * different shapes. */
static eng_node *epilogue_of(kbuild *b, eng_node *root) {
    enum { WALK = 32 };
    if (root->kind != ENG_EW)
        return NULL;
    eng_node *found = NULL;
    const eng_node *pending[WALK];
    uint32_t n = 0, seen = 0;
    pending[n++] = root;
    while (n > 0 && seen++ < WALK) {
        const eng_node *m = pending[--n];
        for (uint32_t i = 0; i < m->nsrc; i++) {
            const eng_src *src = &m->src[i];
            eng_node *c = src->node;
            if (c->storage || c->boundary || (!is_identity(src) && !flat_identity(b, src)))
                continue;
            if (c->kind == ENG_REDUCE) {
                if (found && !same_shape(found, c))
                    return NULL;
                found = c;
            } else if (c->kind == ENG_EW && n < WALK) {
                pending[n++] = c;
            }
        }
    }
    return found && !same_shape(found, root) ? found : NULL;
}

/* Whether view tracker t reads some element at two logical indices, by its strides alone
 * (no enumeration): a dim that may have two or more valid indices with stride 0 (a broadcast
 * over it), or two dims of constant strides and sizes whose steps meet inside both ranges
 * (overlapping windows: kiln_unfold with size > step). A view it cannot decide is taken as not
 * repeating. Decided on sizes' ranges, never on bound values: every binding builds the same
 * kernel. */
static bool view_repeats(const shape_tracker *t) {
    for (uint32_t v = 0; v < t->nviews; v++) {
        const shape_view *w = &t->views[v];
        int64_t size[SHAPE_MAX_DIMS], stride[SHAPE_MAX_DIMS];
        uint32_t n = 0;
        for (uint32_t d = 0; d < w->ndim; d++) {
            int64_t st, lo, hi;
            if (sym_vmax(w->shape[d]) < 2)
                continue;
            if (w->masked && sym_is_const(w->mask_begin[d], &lo) &&
                sym_is_const(w->mask_end[d], &hi) && hi - lo < 2)
                continue; /* one valid index: padding, not a repeat */
            if (!sym_is_const(w->strides[d], &st))
                continue;
            if (st == 0)
                return true;
            if (sym_is_const(w->shape[d], &size[n]))
                stride[n++] = st < 0 ? -st : st;
        }
        for (uint32_t i = 0; i < n; i++) {
            for (uint32_t j = i + 1; j < n; j++) {
                int64_t g;
                if (!base_gcd_i64(stride[i], stride[j], &g) || g == 0)
                    continue;
                if (stride[j] / g < size[i] && stride[i] / g < size[j])
                    return true; /* a*stride_i == b*stride_j with 0 < a < size_i, 0 < b < size_j */
            }
        }
    }
    return false;
}

/* Whether n is where reads of two or more kernels part: two distinct unrealized nodes read n
 * directly, and the nodes that always run as kernels of their own (reductions and
 * kiln_contiguous boundaries) reached from them, directly or through unrealized elementwise
 * nodes (which such a kernel inlines), are two or more. Inlined, n would be computed once in
 * each; the nodes below n, read by n alone, are not forks themselves. The walk up the readers
 * stops after ENG_READERS_WALK nodes (what it has not seen counts as no kernel). A reduction fused
 * into its reader's kernel (mean = sum * 1/n, a row mode) still counts: loading n there costs
 * one kernel more, never a wrong result. */

bool eng_readers_walk(const eng_node *n, eng_reader_visit visit, void *user) {
    const eng_node *pending[ENG_READERS_WALK];
    uint32_t count = 0, seen = 0;
    pending[count++] = n;
    while (count > 0 && seen < ENG_READERS_WALK) {
        const eng_node *m = pending[--count];
        seen++;
        for (const eng_reader *r = m->readers; r; r = r->next) {
            int step = visit(r->node, user);
            if (step < 0)
                return true;
            if (step > 0 && count < ENG_READERS_WALK)
                pending[count++] = r->node;
        }
    }
    return false;
}

/* read_by_several_kernels' visit: the first kernel of its own met in *user; stops at a second. */
static int kernel_reader(const eng_node *u, void *user) {
    const eng_node **first = user;
    if (u->storage)
        return 0;
    if (u->kind == ENG_REDUCE || u->boundary) {
        if (*first && u != *first)
            return -1;
        *first = u;
        return 0;
    }
    return u->kind == ENG_EW;
}

static bool read_by_several_kernels(const eng_node *n) {
    const eng_node *first = NULL, *direct = NULL;
    bool fork = false;
    for (const eng_reader *r = n->readers; r && !fork; r = r->next) {
        if (!r->node->storage) {
            fork = direct && r->node != direct;
            direct = r->node;
        }
    }
    return fork && eng_readers_walk(n, kernel_reader, &first);
}

/* The rule against recomputation: an unrealized elementwise node read through a repeating
 * view is realized first (by a kernel of its own, then loaded) when inlining it recomputes at
 * least this many operations per read, inside a reduction's input, or in an elementwise
 * kernel when the node has at least the device's parallelism of elements at its largest (a
 * kernel of its own that fills the device; a small one, a scalar broadcast over a tensor,
 * stays inlined rather than cost a dispatch). So is such a node of that many elements that
 * several kernels read (read_by_several_kernels), through any view (RECOMPUTE_MIN_OPS:
 * eng.h). */
static bool recomputed(kbuild *b, const eng_src *s) {
    if (s->node->kind != ENG_EW ||
        eng_node_inlined_ops(s->node, RECOMPUTE_MIN_OPS) < RECOMPUTE_MIN_OPS)
        return false;
    bool repeats = view_repeats(s->st);
    if (!repeats && !read_by_several_kernels(s->node))
        return false;
    if (repeats && b->in_reduce)
        return true;
    const sym_node *n = eng_numel(b->ctx, s->node->ndim, s->node->shape);
    return n && sym_vmax(n) >= (int64_t)b->ctx->parallelism;
}

static kast *src_value(kbuild *b, const eng_src *s, const sym_node *const *idx);

/* Whether write w's elements are its whole target's, in order (its view contiguous over the
 * target's shape). */
static bool writes_whole_target(const eng_node *w) {
    const shape_view *v = shape_tracker_last(w->dst_view);
    if (!shape_tracker_contiguous(w->dst_view) || v->ndim != w->ndim)
        return false;
    for (uint32_t d = 0; d < v->ndim; d++) {
        if (v->shape[d] != w->shape[d])
            return false;
    }
    return true;
}

/* Write w's value at the logical index idx of its view, in w's type. */
static kast *written_value(kbuild *b, eng_node *w, const sym_node *const *idx) {
    kast *value = src_value(b, &w->src[1], idx);
    if (value && value->type != w->type) {
        kast *src[1] = {value};
        value = kast_alu(b, IR_CAST, w->type, 1, src);
    }
    return value;
}

/* A write kernel's value reading another write w at the element the kernel writes (w
 * overwriting its whole target in order, its earlier readers scheduled and its own kernel left
 * to this one: realize.c step_build, w->deferred): w's value joins the kernel as a sibling
 * output stored to w's target at the same element, and is the value read (an optimizer's
 * moments and its update, one kernel per parameter). False: w runs as a kernel of its own;
 * true: *value is its value (NULL where the build failed). */
static bool fused_write(kbuild *b, const eng_src *s, const sym_node *const *idx, kast **value) {
    eng_kernel *k = b->k;
    eng_node *w = s->node, *target = w->src[0].node;
    if (!b->whole_write || b->no_fusion || !b->wanted || w->deferred != b->wanted || b->in_reduce ||
        !target->storage || target->storage == k->buffers[0] ||
        k->sibling_count == ENG_MAX_OUTPUTS - 1 || k->buffer_count == ENG_MAX_BUFFERS ||
        eng_type_size(w->type) != 4 || !is_identity(s) || w->ndim != k->ndim ||
        !writes_whole_target(w))
        return false;
    for (uint32_t d = 0; d < w->ndim; d++) {
        if (w->shape[d] != k->dims[d])
            return false;
    }
    for (uint32_t j = 0; j < k->sibling_count; j++) {
        if (k->siblings[j].node->src[0].node->storage == target->storage)
            return false;
    }
    *value = written_value(b, w, idx);
    uint32_t slot = *value && b->status == KILN_OK ? buffer_slot(b, target->storage) : 0;
    if (*value && b->status == KILN_OK) {
        b->fused_index[k->sibling_count] = ravel(b, w->ndim, w->shape, idx);
        k->siblings[k->sibling_count++] = (eng_sibling){w, *value, slot};
    }
    return true;
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
            /* Only where the masks hold is the index used: simplified under them. */
            load->index = is_true(b->valid) ? index : sym_given(b->sym, index, b->valid);
            load->valid = b->valid;
        }
        value = load;
    } else {
        /* A dense view at offset 0 of the whole result (identity or a reshape of it) keeps the
         * output's element: a reduction read that way fuses into this kernel. */
        bool same_element = b->at_output && (identity || flat_identity(b, s));
        const sym_node *own[SHAPE_MAX_DIMS];
        if (!identity && !shape_tracker_coords(b->ctx->shape, s->st, idx, n->ndim, n->shape, own))
            unravel(b, index, n->ndim, n->shape, own);
        /* the reduction the kernel runs over, at the kernel's element: at the kernel's own
         * indices (epilogue_of), which are the product's own kernel's */
        const sym_node *const *at = same_element && n == b->epilogue ? b->out_idx
                                    : identity                       ? idx
                                                                     : own;
        bool outer_at_output = b->at_output;
        b->at_output = same_element;
        b->depth++;
        if (n->kind == ENG_WRITE && fused_write(b, s, at, &value))
            ;                                         /* a sibling output of this kernel */
        else if (n->kind == ENG_WRITE || n->boundary) /* its own kernel, then read */
            need(b, n);
        else if (b->depth > MAX_INLINE_DEPTH) /* a chain this long is cut: n runs first */
            need(b, n);
        else if (recomputed(b, s)) /* read many times in a reduction: computed once, first */
            need(b, n);
        else if (n->kind != ENG_REDUCE) {
            bool top = !b->inlined_top;
            if (top)
                b->inlined_top = b->last_top = n;
            value = node_value(b, n, at);
            if (top)
                b->inlined_top = NULL;
        } else if (same_element && !b->in_reduce && joins_range(b, n)) {
            value = b->whole_write ? reduction_beside(b, n, at) : reduction_input(b, n, at);
        } else if (row_read(b, n, at) && joins_range(b, n)) {
            b->k->rows = true;
            value = reduction_input(b, n, b->out_idx);
        } else if (stage_read(b, n, at) && joins_range(b, n)) {
            value = reduction_beside(b, n, b->out_idx);
        } else if (b->unrolled && !b->in_reduce && !n->arg && joins_range(b, n)) {
            const sym_node *key = ravel(b, n->ndim, n->shape, at);
            value = key ? reduction_instance(b, n, at, key) : NULL;
        } else {
            need(b, n);
        }
        b->depth--;
        b->at_output = outer_at_output;
    }
    b->valid = outer;
    /* a storage's load reads 0 outside its mask, which holds this view's: no second select */
    return n->storage ? value : masked(b, valid, value);
}

/* A gather (ENG_GATHER n at idx): the index read at idx[dim] (any expression, fused), and a
 * load of src[0]'s storage through its view at idx with idx[dim] a Variable of [0, size) that
 * lowering binds to the index read (lower.c lower_gather). src[0] is read from its storage:
 * unrealized, it is realized first (the load's element is not a symbolic expression of the
 * output's index, so src[0] cannot be inlined). */
static kast *gather_value(kbuild *b, eng_node *n, const sym_node *const *idx) {
    eng_node *t = n->src[0].node;
    if (b->gathers == ENG_MAX_GATHERS) { /* (never the kernel's own output: its first) */
        need(b, n);
        return NULL;
    }
    bool outer_at_output = b->at_output;
    b->at_output = false;
    kast *at = src_value(b, &n->src[1], idx + n->dim);
    b->at_output = outer_at_output;
    if (!t->storage) {
        need(b, t);
        return NULL;
    }
    eng_storage *flag = eng_bounds_flag(b->ctx);
    if (!flag) {
        build_fail(b, b->ctx->err.status, "the bounds flag");
        return NULL;
    }
    const sym_node *size = shape_tracker_last(n->src[0].st)->shape[n->dim];
    int64_t max = sym_vmax(size) - 1;
    char name[48];
    snprintf(name, sizeof name, "gather%u:%lld", b->gathers++, (long long)(max < 0 ? 0 : max));
    const sym_node *var = sym_var(b->sym, name, 0, max < 0 ? 0 : max);
    const sym_node *own[SHAPE_MAX_DIMS], *index, *valid;
    for (uint32_t d = 0; d < n->ndim; d++)
        own[d] = d == n->dim ? var : idx[d];
    kiln_status st = shape_tracker_index(b->ctx->shape, n->src[0].st, own, &index, &valid);
    if (st != KILN_OK) {
        build_fail(b, st, shape_ctx_message(b->ctx->shape));
        return NULL;
    }
    kast *a = at ? kast_new(b, KAST_GATHER, IR_CONST, t->storage->type) : NULL;
    if (!a)
        return NULL;
    a->nsrc = 1;
    a->src[0] = at;
    a->buffer = buffer_slot(b, t->storage);
    a->flag = buffer_slot(b, flag);
    a->index = index;
    a->valid = is_true(valid) ? b->valid : sym_and(b->sym, b->valid, valid);
    a->var = var;
    a->bound = size;
    a->guard = b->valid;
    return a;
}

static kast *node_value(kbuild *b, eng_node *n, const sym_node *const *idx) {
    switch (n->kind) {
    case ENG_GATHER:
        return gather_value(b, n, idx);
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
            a->word = n->rand_word;
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
static kast *reduction_instance(kbuild *b, eng_node *r, const sym_node *const *out_idx,
                                const sym_node *at) {
    eng_kernel *k = b->k;
    uint32_t i = 0;
    while (i < k->reduction_count && (k->reductions[i].node != r || k->reductions[i].at != at))
        i++;
    if (i == k->reduction_count) {
        if (i == ENG_MAX_REDUCTIONS) {
            need(b, r);
            return NULL;
        }
        if (i == 0)
            open_range(b, r);
        if (!k->ridx)
            return NULL;
        const sym_node *idx[SHAPE_MAX_DIMS];
        for (uint32_t d = 0, j = 0; d < b->reduce_ndim; d++)
            idx[d] = r->reduce_mask & (1u << d) ? b->rid[j++] : out_idx[d];
        eng_reduction *red = &k->reductions[k->reduction_count++];
        red->node = r;
        red->at = at;
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

static kast *reduction_input(kbuild *b, eng_node *r, const sym_node *const *out_idx) {
    return reduction_instance(b, r, out_idx, NULL);
}

/* A binding for one more output of type t (a sibling, in storage the scheduler assigns:
 * realize.c assign_storage), taken before the output's value is built so that the value's
 * loads count beside it (buffer_slot). UINT32_MAX where the kernel has no room for it (its
 * outputs, its buffers, the device's storage bindings). */
static uint32_t output_slot(kbuild *b, ir_type t) {
    eng_kernel *k = b->k;
    uint64_t bytes = (uint64_t)sym_vmax(k->numel) * eng_type_size(t);
    uint32_t descriptors = eng_storage_descriptors(b->ctx, bytes);
    if (k->sibling_count == ENG_MAX_OUTPUTS - 1 || k->buffer_count == ENG_MAX_BUFFERS ||
        b->descriptors + descriptors > b->max_descriptors)
        return UINT32_MAX;
    b->descriptors += descriptors;
    uint32_t slot = k->buffer_count++;
    k->buffers[slot] = NULL;
    k->buffer_types[slot] = t;
    return slot;
}

/* A reduction that a write's kernel reads at the element it writes (an optimizer's update
 * reading its gradient's sum over the batch), or that a reduction's loop reads at the kernel's
 * element (stage_read), joins that kernel, one dispatch fewer, and is stored there too, as a
 * sibling output in storage of its own (realize.c assign_storage): a tensor that holds it, or
 * a later kernel, reads the values the kernel used, not a sum computed again. Without room
 * for one more output it runs first (a kernel of its own). */
static kast *reduction_beside(kbuild *b, eng_node *r, const sym_node *const *at) {
    eng_kernel *k = b->k;
    for (uint32_t i = 0; i < k->reduction_count; i++) {
        if (k->reductions[i].node == r)
            return reduction_input(b, r, at); /* joined already, stored once */
    }
    uint32_t slot = b->no_fusion || r->boundary || eng_type_size(r->type) != 4
                        ? UINT32_MAX
                        : output_slot(b, r->type);
    if (slot == UINT32_MAX) {
        need(b, r);
        return NULL;
    }
    eng_node *top = b->inlined_top;
    b->inlined_top = top ? top : r; /* loads past the bindings: r runs first (buffer_slot) */
    kast *value = reduction_input(b, r, at);
    b->inlined_top = top;
    if (!value || b->status != KILN_OK)
        return NULL;                            /* the kernel is built again */
    b->fused_index[k->sibling_count] = k->gidx; /* stored at the kernel's own element */
    k->siblings[k->sibling_count++] = (eng_sibling){r, value, slot};
    return value;
}

/* Sibling outputs: the unrealized reductions this realize wants (marked wanted) that read
 * r's input through the same view over the same dims (a max pool's maximum, and the first
 * maximum's index its backward asks for) join r's kernel: one loop reads the input for all of
 * them, each stores its own output. Outputs of four bytes only (a packed type's stores would
 * share words between outputs' lanes). */
static void add_siblings(kbuild *b, eng_node *r, uint64_t wanted) {
    eng_kernel *k = b->k;
    eng_node *in = r->src[0].node;
    if (!wanted || !in || r->boundary || eng_type_size(r->type) != 4)
        return;
    for (eng_reader *rd = in->readers; rd && b->status == KILN_OK; rd = rd->next) {
        eng_node *s = rd->node;
        if (k->sibling_count == ENG_MAX_OUTPUTS - 1 || k->buffer_count == ENG_MAX_BUFFERS)
            return;
        /* the same input view and reduced dims: the same output shape (kept dims of size 1) */
        if (s == r || s->kind != ENG_REDUCE || s->storage || s->wanted != wanted || s->boundary ||
            s->src[0].node != in || s->reduce_mask != r->reduce_mask ||
            eng_type_size(s->type) != 4 || !eng_tracker_equal(s->src[0].st, r->src[0].st) ||
            !joins_range(b, s))
            continue;
        uint32_t slot = output_slot(b, s->type);
        if (slot == UINT32_MAX)
            continue;
        kast *value = reduction_input(b, s, b->out_idx);
        if (!value)
            return;
        k->siblings[k->sibling_count++] = (eng_sibling){s, value, slot};
    }
}

/* ---- a reduction over small windows of another reduction ---------------------------------------
 *
 * max_pool2d(relu(conv2d(x, w, b))): the pool's windows read the convolution, a reduction, at
 * elements that are not the kernel's own, so built as a reduction the pool's kernel loads the
 * convolution's output, which a kernel of its own stores first. A window of constant count, at
 * most ENG_MAX_REDUCTIONS elements, is unrolled instead: the kernel runs over the pool's
 * outputs, each window element's value built at its own element, the convolution there as an
 * instance of its own over the one range of taps (reduction_instance), and the pool combines
 * them; the convolution's output is never stored (bench_ops conv1_pool measured a hand-written
 * kernel of that form 1.75-2.16x faster than the two kernels). An arg reduction of the same
 * windows that the realize wants (the pool's index, for its backward) is a sibling output
 * selected among the same values. Only where the convolution and the nodes between it and the
 * windows are read by nothing else (each would be computed again per reader). */
enum {
    WINDOW_WALK = 8,
    /* The longest reduction unrolled windows read: a short one's kernel stores much for little
     * arithmetic, which the unrolling saves (conv1's 9 taps: its convolution and pool 2.30 ->
     * 1.53 ms in the training step on lavapipe, ABBA rounds); a long one's product is better
     * tiled alone (conv2's 144 taps: 3.40 -> 3.58 ms fused) */
    WINDOW_READ_MAX = 32,
};

/* The elements reduction r combines per output when that count is a constant (0: symbolic),
 * its reduced dims' sizes into sizes (1 for the others). */
static int64_t constant_count(const eng_node *r, int64_t *sizes) {
    const shape_view *in = shape_tracker_last(r->src[0].st);
    int64_t count = 1, size;
    for (uint32_t d = 0; d < in->ndim; d++) {
        sizes[d] = 1;
        if (!(r->reduce_mask & (1u << d)))
            continue;
        if (!sym_is_const(in->shape[d], &size))
            return 0;
        sizes[d] = size;
        count *= size;
    }
    return count;
}

/* Reduction r's window count when it is a constant from 2 to ENG_MAX_REDUCTIONS (0 otherwise),
 * its reduced dims' sizes into sizes. */
static uint32_t window_count(const eng_node *r, int64_t *sizes) {
    int64_t count = constant_count(r, sizes);
    return count >= 2 && count <= ENG_MAX_REDUCTIONS ? (uint32_t)count : 0;
}

/* Whether reduction r is built as unrolled windows: a maximum over small windows of constant
 * count whose input reaches an unrealized reduction through elementwise nodes that only that
 * path reads, the input read only by reductions of the same windows. */
static bool unrolls(const kbuild *b, const eng_node *r) {
    int64_t sizes[SHAPE_MAX_DIMS];
    const eng_node *in = r->src[0].node;
    if (b->ctx->no_unrolled_windows || b->epilogue || r->op != IR_MAX || r->arg || r->boundary ||
        in->storage || in->kind != ENG_EW || !window_count(r, sizes) ||
        !ir_type_is_float(r->type) || view_repeats(r->src[0].st))
        return false; /* (overlapping windows would compute an element once per window) */
    for (const eng_reader *rd = in->readers; rd; rd = rd->next) {
        const eng_node *s = rd->node;
        if (!s->storage &&
            (s->kind != ENG_REDUCE || s->src[0].node != in || s->reduce_mask != r->reduce_mask ||
             !eng_tracker_equal(s->src[0].st, r->src[0].st)))
            return false;
    }
    const eng_node *n = in;
    for (uint32_t depth = 0; depth < WINDOW_WALK; depth++) {
        const eng_node *next = NULL;
        for (uint32_t i = 0; i < n->nsrc; i++) {
            const eng_node *s = n->src[i].node;
            if (s->storage || s->kind == ENG_CONST)
                continue;
            if (next || eng_node_live_readers(s, 2) != 1 || s->boundary ||
                view_repeats(n->src[i].st))
                return false; /* two unrealized sources, one read elsewhere or repeatedly */
            next = s;
        }
        if (!next)
            return false;
        if (next->kind == ENG_REDUCE) {
            int64_t taps = constant_count(next, sizes);
            return !next->arg && taps > 0 && taps <= WINDOW_READ_MAX;
        }
        if (next->kind != ENG_EW)
            return false;
        n = next;
    }
    return false;
}

/* The kernel's dims for unrolled windows: the last two of size above 1 (an image's rows and
 * columns) merged into one, so that a row of the kernel's tiles is a channel's image and its
 * rows are channels (the windows' input, shared by every channel, one load for the tile's
 * column), as a convolution's product runs (engine/codegen/lower.c window tiles). The elements
 * keep their order. */
static void window_dims(kbuild *b, eng_kernel *k) {
    uint32_t n = k->ndim;
    while (n > 0 && sym_is_const(k->dims[n - 1], NULL) && k->dims[n - 1] == sym_const(b->sym, 1))
        n--;
    if (n < 3)
        return;
    k->dims[n - 2] = sym_mul(b->sym, k->dims[n - 2], k->dims[n - 1]);
    k->ndim = n - 1;
}

/* The values of r's input at each element of the window of the kernel's output (out_idx), into
 * each (window_count of them). */
static bool window_values(kbuild *b, eng_node *r, const sym_node *const *out_idx, kast **each,
                          uint32_t *count) {
    int64_t sizes[SHAPE_MAX_DIMS];
    const shape_view *in = shape_tracker_last(r->src[0].st);
    *count = window_count(r, sizes);
    for (uint32_t j = 0; j < *count; j++) {
        const sym_node *idx[SHAPE_MAX_DIMS];
        uint32_t rest = j;
        for (uint32_t d = in->ndim; d-- > 0;) {
            if (r->reduce_mask & (1u << d)) {
                idx[d] = sym_const(b->sym, (int64_t)rest % sizes[d]);
                rest /= (uint32_t)sizes[d];
            } else {
                idx[d] = out_idx[d];
            }
        }
        /* a window's element is not the kernel's own: a reduction read in place there is an
         * instance of its own (reduction_instance), not the kernel's output's */
        bool outer_at_output = b->at_output;
        b->unrolled = true;
        b->at_output = false;
        each[j] = src_value(b, &r->src[0], idx);
        b->at_output = outer_at_output;
        b->unrolled = false;
        if (!each[j])
            return false;
    }
    return true;
}

/* The unrolled windows' maximum (unrolls said so), and the siblings of the same windows that
 * the realize wants: an arg reduction's index selected among the same values (the first
 * maximum, of NaNs the first or, a pool's, the last: lower.c combine's rule). */
static kast *build_window(kbuild *b, eng_node *r, const sym_node *const *out_idx, uint64_t wanted) {
    kast *each[ENG_MAX_REDUCTIONS];
    uint32_t count;
    if (!window_values(b, r, out_idx, each, &count))
        return NULL;
    kast *value = each[0];
    for (uint32_t j = 1; j < count; j++)
        value = kast_alu(b, IR_MAX, r->type, 2, (kast *[]){value, each[j]});
    eng_kernel *k = b->k;
    eng_node *in = r->src[0].node;
    for (eng_reader *rd = in->readers; rd && wanted && value && b->status == KILN_OK;
         rd = rd->next) {
        eng_node *s = rd->node;
        if (s == r || !s->arg || s->storage || s->wanted != wanted || s->type != IR_I32 ||
            k->sibling_count == ENG_MAX_OUTPUTS - 1)
            continue;
        uint32_t slot = output_slot(b, s->type);
        kast *v[ENG_MAX_REDUCTIONS];
        if (slot == UINT32_MAX || !window_values(b, r, out_idx, v, &count))
            continue;
        kast *best = v[0], *at = kast_const(b, IR_I32, 0);
        for (uint32_t j = 1; j < count && best && at; j++) {
            kast *greater = kast_alu(b, IR_LT, IR_BOOL, 2, (kast *[]){best, v[j]});
            kast *nan = kast_alu(b, IR_NE, IR_BOOL, 2, (kast *[]){v[j], v[j]});
            if (s->arg != ENG_ARG_POOL) {
                kast *number = kast_alu(b, IR_EQ, IR_BOOL, 2, (kast *[]){best, best});
                nan = kast_alu(b, IR_AND, IR_BOOL, 2, (kast *[]){nan, number});
            }
            kast *take = kast_alu(b, IR_OR, IR_BOOL, 2, (kast *[]){greater, nan});
            best = kast_alu(b, IR_WHERE, r->type, 3, (kast *[]){take, v[j], best});
            at = kast_alu(b, IR_WHERE, IR_I32, 3,
                          (kast *[]){take, kast_const(b, IR_I32, (double)j), at});
        }
        if (!at)
            return NULL;
        k->siblings[k->sibling_count++] = (eng_sibling){s, at, slot};
    }
    return value;
}

/* ---- parameters and hash -----------------------------------------------------------------------
 */

/* Replaces bound Variables in *e by Variables, adding them to the kernel's parameters. A
 * Variable bound to two values in one kernel has no one value to push: the build fails (it
 * took the first value for both once). */
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
        if (p < k->param_count && k->param_values[p] != values[i]) {
            const char *name = "?";
            int64_t lo, hi;
            sym_var_info(vars[i], &name, &lo, &hi);
            char what[256];
            snprintf(what, sizeof what,
                     "Variable %s is bound to %lld and to %lld in one kernel (bind it to one "
                     "value in a graph, or use two Variables)",
                     name, (long long)k->param_values[p], (long long)values[i]);
            build_fail(b, KILN_ERROR_INVALID_ARGUMENT, what);
            return;
        }
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

/* ---- values lifted out of the code -------------------------------------------------------------
 *
 * Row i of a table differs from row j only in a number: its view's offset. So do narrow's and a
 * slice's start, and the bounds of a pad's or a shrink's mask. Once a kernel's expressions are
 * built (and simplified with every value known), the constant term of each load's storage
 * index and of a write's destination index (the view's offset) and the constant bound of each
 * comparison in a validity mask become parameters: Variables whose values are pushed like
 * bound symbolic values, so that the AST and its hash are the same for every value. Strides
 * and sizes stay code. The substitution is exact (at its value the Variable gives back the
 * expression built), so the kernel is right for every value in the Variable's range; the
 * range is what the code may assume (lower.c: 32-bit indices, unsigned division) and comes
 * from what does not change with the value (the storage's size, the rest of the expression),
 * so it is part of the key. A value outside it, a constant 0 (whole tensors keep their code
 * exactly) and parameters past MAX_LIFTED stay code. Whether a lifted offset is aligned for a
 * vector access is decided per value by the runtime (eng_program residue and align). */

/* Parameters that make lifting stop: 16 fit 128 bytes of push constants with 64-bit indices. */
enum { MAX_LIFTED = 16 };

/* A Variable for a value lifted out of the code ("view.<what><n>:<lo>:<hi>": the name of a
 * Variable is its identity, so the range goes in it), added to the kernel's parameters. NULL
 * when the kernel has no room for it. */
static const sym_node *lift_param(kbuild *b, const char *what, int64_t value, int64_t lo,
                                  int64_t hi) {
    eng_kernel *k = b->k;
    if (k->param_count >= MAX_LIFTED || b->lifted_count == ENG_MAX_PARAMS || value < lo ||
        value > hi || lo == hi) /* (a range of one value: the value is the structure's) */
        return NULL;
    char name[80];
    snprintf(name, sizeof name, "view.%s%u:%lld:%lld", what, b->lifted_count, (long long)lo,
             (long long)hi);
    const sym_node *v = sym_var(b->sym, name, lo, hi);
    for (uint32_t p = 0; v && p < k->param_count; p++) {
        if (k->params[p] == v) /* an application's Variable of that name: leave the value be */
            return NULL;
    }
    if (!v)
        return NULL;
    k->params[k->param_count] = v;
    k->param_values[k->param_count++] = value;
    return v;
}

/* The lifted form of from (with the range lo..hi) made earlier in this kernel, or NULL. */
static const sym_node *lifted_before(const kbuild *b, const sym_node *from, int64_t lo,
                                     int64_t hi) {
    for (uint32_t i = 0; i < b->lifted_count; i++) {
        const struct lifted *l = &b->lifted[i];
        if (l->from == from && l->lo == lo && l->hi == hi)
            return l->to;
    }
    return NULL;
}

static void remember_lift(kbuild *b, const sym_node *from, const sym_node *to, int64_t lo,
                          int64_t hi) {
    if (b->lifted_count < ENG_MAX_PARAMS)
        b->lifted[b->lifted_count++] = (struct lifted){from, to, lo, hi};
}

/* *e (the storage index of a load or store in a storage of `elements`) with its constant term
 * c lifted. Its range: every element an unmasked access addresses is in the storage, so
 * c + rest lies in [0, elements - 1] for every value of rest (the rest's bounds); a masked one
 * addresses the storage somewhere, so c + rest does for some value of rest. */
static void lift_offset(kbuild *b, const sym_node **e, uint64_t elements, bool masked) {
    const sym_node *rest = NULL;
    int64_t c = 0, lo, hi, last = (int64_t)elements - 1;
    if (!*e || elements == 0 || elements > INT64_MAX / 4)
        return;
    if (!sym_is_const(*e, &c)) {
        if (sym_node_kind(*e) != SYM_ADD || !sym_is_const(sym_node_src(*e, 1), &c))
            return; /* a sum's constant is its last term */
        rest = sym_node_src(*e, 0);
    }
    int64_t rmin = rest ? sym_vmin(rest) : 0, rmax = rest ? sym_vmax(rest) : 0;
    if (c == 0 || __builtin_sub_overflow(0, masked ? rmax : rmin, &lo) ||
        __builtin_sub_overflow(last, masked ? rmin : rmax, &hi))
        return;
    const sym_node *to = lifted_before(b, *e, lo, hi);
    if (!to) {
        const sym_node *v = lift_param(b, "offset", c, lo, hi);
        if (!v)
            return;
        b->k->offset_params |= 1u << (b->k->param_count - 1);
        to = rest ? sym_add(b->sym, rest, v) : v;
        remember_lift(b, *e, to, lo, hi);
    }
    if (to)
        *e = to;
}

static const sym_node *lift_bounds(kbuild *b, const sym_node *s);

/* The conjuncts of s (a tree of ANDs), up to cap; false when there are more. */
static bool conjuncts(const sym_node *s, const sym_node **out, uint32_t *n, uint32_t cap) {
    if (sym_node_kind(s) == SYM_AND)
        return conjuncts(sym_node_src(s, 0), out, n, cap) &&
               conjuncts(sym_node_src(s, 1), out, n, cap);
    if (*n == cap)
        return false;
    out[(*n)++] = s;
    return true;
}

/* Conjuncts in an order that does not depend on their bounds' values: by the structural hash
 * of their left side, then their kind, then (alike otherwise) their hash. */
static int conjunct_cmp(const void *pa, const void *pb) {
    const sym_node *a = *(const sym_node *const *)pa, *b = *(const sym_node *const *)pb;
    uint64_t ka = sym_node_arity(a) ? sym_node_hash(sym_node_src(a, 0)) : 0;
    uint64_t kb = sym_node_arity(b) ? sym_node_hash(sym_node_src(b, 0)) : 0;
    if (ka != kb)
        return ka < kb ? -1 : 1;
    if (sym_node_kind(a) != sym_node_kind(b))
        return sym_node_kind(a) < sym_node_kind(b) ? -1 : 1;
    ka = sym_node_hash(a), kb = sym_node_hash(b);
    return ka < kb ? -1 : ka > kb;
}

/* A conjunction with its bounds lifted. The order in which simplification nested its
 * comparisons depends on when each was first made, so on the values: the conjuncts are
 * lifted (numbered) and joined again in an order that does not. */
static const sym_node *lift_conjunction(kbuild *b, const sym_node *s) {
    const sym_node *terms[4 * SHAPE_MAX_DIMS];
    uint32_t n = 0;
    if (!conjuncts(s, terms, &n, 4 * SHAPE_MAX_DIMS))
        return s;
    qsort(terms, n, sizeof *terms, conjunct_cmp);
    const sym_node *all = sym_const(b->sym, 1);
    for (uint32_t i = 0; i < n; i++)
        all = sym_and(b->sym, all, lift_bounds(b, terms[i]));
    return all;
}

/* s (a validity mask) with the constant bound of each comparison lifted: x < c, x == c and
 * x != c, which bounds did not decide (so c is in the range the Variable gets). */
static const sym_node *lift_bounds(kbuild *b, const sym_node *s) {
    sym_ctx *sc = b->sym;
    sym_kind kind = s ? sym_node_kind(s) : SYM_CONST;
    switch (kind) {
    case SYM_AND:
        return lift_conjunction(b, s);
    case SYM_OR:
        return sym_or(sc, lift_bounds(b, sym_node_src(s, 0)), lift_bounds(b, sym_node_src(s, 1)));
    case SYM_NOT:
        return sym_not(sc, lift_bounds(b, sym_node_src(s, 0)));
    case SYM_LT:
    case SYM_EQ:
    case SYM_NE: {
        const sym_node *x = sym_node_src(s, 0);
        int64_t c, lo = sym_vmin(x) + (kind == SYM_LT), hi = sym_vmax(x);
        if (sym_is_const(x, NULL) || !sym_is_const(sym_node_src(s, 1), &c))
            return s;
        const sym_node *to = lifted_before(b, s, 0, 0);
        if (to)
            return to;
        const sym_node *v = lift_param(b, "bound", c, lo, hi);
        if (!v)
            return s;
        to = kind == SYM_LT   ? sym_lt(sc, x, v)
             : kind == SYM_EQ ? sym_eq(sc, x, v)
                              : sym_ne(sc, x, v);
        remember_lift(b, s, to, 0, 0);
        return to;
    }
    default:
        return s;
    }
}

/* A rand's seed as two parameters, its low and high 32 bits ("rand.seed<n>.lo" and ".hi",
 * Variables over [0, 2^32), pushed like bound values; in an i32 kernel as the same bits), so
 * that the AST and its hash are the same for every seed: a training loop that takes a new seed
 * every step compiles nothing new. The rands of one seed in a kernel share them. Past
 * MAX_LIFTED parameters the seed stays code (a kernel of its own per seed, still right). */
static void lift_seed(kbuild *b, kast *a) {
    eng_kernel *k = b->k;
    for (uint32_t i = 0; i < b->seed_count; i++) {
        if (b->seeds[i].seed == a->seed) {
            memcpy(a->key, b->seeds[i].key, sizeof a->key);
            return;
        }
    }
    if (k->param_count + 2 > MAX_LIFTED || b->seed_count == BASE_COUNTOF(b->seeds))
        return;
    const sym_node *key[2];
    for (int half = 0; half < 2; half++) {
        char name[40];
        snprintf(name, sizeof name, "rand.seed%u.%s", b->seed_count, half ? "hi" : "lo");
        key[half] = sym_var(b->sym, name, 0, UINT32_MAX);
        for (uint32_t p = 0; key[half] && p < k->param_count; p++) {
            if (k->params[p] == key[half]) /* an application's Variable of that name */
                return;
        }
        if (!key[half])
            return;
    }
    for (int half = 0; half < 2; half++) {
        k->params[k->param_count] = key[half];
        k->param_values[k->param_count++] = (int64_t)(uint32_t)(a->seed >> (32 * half));
    }
    b->seeds[b->seed_count].seed = a->seed;
    memcpy(b->seeds[b->seed_count++].key, key, sizeof key);
    memcpy(a->key, key, sizeof key);
}

bool eng_kernel_varies_in_loop(sym_ctx *sc, const eng_kernel *k, const sym_node *e) {
    if (!e || k->reduction_count == 0 || !k->ridx)
        return false;
    const sym_node *from[1] = {k->ridx}, *to[1] = {sym_add_c(sc, k->ridx, 1)};
    bool varies = to[0] && sym_substitute(sc, e, from, to, 1) != e;
    sym_ctx_clear_error(sc);
    return varies;
}

/* Whether mask s changes along the kernel's reduction loop (the windows of a padded input read
 * in place: conv2's input gradient as a convolution, an inference convolution). Its bounds then
 * stay code: evaluated at every step of the loop, constant bounds fold into the comparisons,
 * where pushed ones are compared at run time (on lavapipe conv2's input gradient 6.83 -> 6.55
 * ms, the inference forward's product 6.98 -> 6.74). What a lifted bound buys, one kernel for
 * views that differ in it, matters for rows of tables and slices, not for a padding, which is
 * the layer's for good. */
static bool mask_in_loop(kbuild *b, const sym_node *s) {
    return eng_kernel_varies_in_loop(b->sym, b->k, s);
}

/* The values of a's expressions lifted out of the code. */
static void lift_values(kbuild *b, kast *a) {
    if (a->kind == KAST_RAND)
        lift_seed(b, a);
    if (a->kind == KAST_LOAD) {
        if (!mask_in_loop(b, a->valid))
            a->valid = lift_bounds(b, a->valid);
        const eng_storage *s = b->k->buffers[a->buffer];
        if (s)
            lift_offset(b, &a->index, s->bound > s->elements ? s->bound : s->elements,
                        !is_true(a->valid));
    } else if (a->kind == KAST_INDEX && a->index && sym_is_bool(a->index) &&
               !mask_in_loop(b, a->index)) {
        a->index = lift_bounds(b, a->index); /* a mask (masked) */
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
    unbind(b, &a->bound);
    unbind(b, &a->guard);
    lift_values(b, a);
    uint64_t h = base_hash_u64((uint64_t)a->kind, ((uint64_t)a->op << 8) | a->type);
    h = base_hash_u64(h, a->buffer);
    h = base_hash_u64(h, sym_hash_or_zero(a->index));
    h = base_hash_u64(h, sym_hash_or_zero(a->valid));
    uint64_t bits;
    memcpy(&bits, &a->value, sizeof bits);
    h = base_hash_u64(h, bits);
    h = base_hash_u64(h, a->key[0] ? sym_node_hash(a->key[0]) : a->seed); /* (lift_seed) */
    h = base_hash_u64(h, a->word);
    h = base_hash_u64(h, a->reduction);
    h = base_hash_u64(h, sym_hash_or_zero(a->var));
    h = base_hash_u64(h, sym_hash_or_zero(a->bound));
    h = base_hash_u64(h, sym_hash_or_zero(a->guard));
    h = base_hash_u64(h, a->flag);
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
    /* An unrolled window's instance keys (reduction_instance) told instances apart while
     * building; kept (programs and plans hold them), they are unbound as the rest, so that
     * the kernel is the same for every bound value (plan.c's replay compares them). They are
     * not code: no parameter is added for them. */
    for (uint32_t i = 0; i < k->reduction_count && b->status == KILN_OK; i++) {
        const sym_node *vars[ENG_MAX_PARAMS];
        int64_t values[ENG_MAX_PARAMS];
        size_t found = 0;
        const sym_node *at = k->reductions[i].at;
        if (at && sym_node_binds(at)) {
            at = sym_unbind_all(b->sym, at, vars, values, ENG_MAX_PARAMS, &found);
            if (!at)
                build_fail(b, KILN_ERROR_INTERNAL, "unbinding a window's instance");
            else
                k->reductions[i].at = at;
        }
    }
    if (k->out_index && k->buffers[0]) /* a write's destination */
        lift_offset(b, &k->out_index,
                    k->buffers[0]->bound > k->buffers[0]->elements ? k->buffers[0]->bound
                                                                   : k->buffers[0]->elements,
                    false);
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
    for (uint32_t j = 0; j < k->sibling_count; j++)
        h = base_hash_u64(h, (finish_tree(b, k->siblings[j].value) << 5) ^ k->siblings[j].buffer);
    h = base_hash_u64(h, sym_hash_or_zero(k->reduce_count));
    h = base_hash_u64(h, sym_hash_or_zero(k->ridx));
    h = base_hash_u64(h, k->rows);
    h = base_hash_u64(h, k->buffer_count);
    /* an application's buffer of one element or none, whose masked pairs lower.c leaves
     * unpaired (never another storage's: theirs hold two elements whatever the binding) */
    for (uint32_t i = 0; i < k->buffer_count; i++)
        h = base_hash_u64(h, k->buffer_types[i] | (uint64_t)eng_storage_short(k->buffers[i]) << 8);
    h = base_hash_u64(h, k->param_count);
    for (uint32_t i = 0; i < k->param_count; i++)
        h = base_hash_u64(h, sym_node_hash(k->params[i]));
    k->hash = h;
}

/* Whether the tree loads buffer (a storage written) anywhere but at the element out_index
 * written: then the kernel would read values it has already overwritten. */
static bool reads_written_elsewhere(const kast *a, uint32_t buffer, const sym_node *out_index) {
    if (!a)
        return false;
    if (a->kind == KAST_LOAD && a->buffer == buffer && a->index != out_index)
        return true;
    if (a->kind == KAST_GATHER && a->buffer == buffer) /* which element: known when it runs */
        return true;
    for (uint32_t i = 0; i < a->nsrc; i++) {
        if (reads_written_elsewhere(a->src[i], buffer, out_index))
            return true;
    }
    return false;
}

/* Whether the kernel's value, or a reduction joined into it, reads buffer at an element other
 * than out_index. */
static bool kernel_reads_elsewhere(const eng_kernel *k, uint32_t buffer,
                                   const sym_node *out_index) {
    for (uint32_t i = 0; i < k->reduction_count; i++) {
        if (reads_written_elsewhere(k->reductions[i].value, buffer, out_index))
            return true;
    }
    return reads_written_elsewhere(k->value, buffer, out_index);
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
    b->whole_write = writes_whole_target(w);
    b->at_output = b->whole_write; /* its element is the target's own */
    k->value = written_value(b, w, idx);
    for (uint32_t j = 0; j < k->sibling_count && b->status == KILN_OK; j++) {
        /* Each fused write's target read only at the element it writes. */
        if (kernel_reads_elsewhere(k, k->siblings[j].buffer, b->fused_index[j])) {
            b->refuse = true;
            return;
        }
    }
    if (b->status == KILN_OK && kernel_reads_elsewhere(k, 0, k->out_index)) {
        /* NumPy's rule: as if src were read completely first. Materialise it. */
        const shape_tracker *flat = eng_tracker_contiguous(b->ctx, v->ndim, v->shape);
        eng_node *copy =
            flat ? eng_node_copy(b->ctx, w->src[1].node, eng_tracker_keep(b->ctx, w->src[1].st),
                                 v->ndim, v->shape)
                 : NULL;
        if (!copy) {
            eng_tracker_free(b->ctx, flat);
            return (void)build_fail(b, KILN_ERROR_OUT_OF_HOST_MEMORY, "a copy of the source");
        }
        /* Same values: only where they are read from. */
        eng_node_set_src(b->ctx, w, 1, copy, flat);
        need(b, copy);
    }
}

static kiln_status build(kiln_context *ctx, eng_node *node, eng_kernel *k, eng_node **needs,
                         uint32_t cap, uint32_t *need_count, uint64_t wanted, bool no_fusion,
                         bool *refused) {
    memset(k, 0, sizeof *k);
    kbuild b = {.ctx = ctx, .sym = ctx->sym, .k = k, .needs = needs, .need_cap = cap};
    b.wanted = wanted;
    b.no_fusion = no_fusion;
    b.valid = sym_const(ctx->sym, 1);
    b.at_output = true;
    k->output = node;
    k->out_type = node->type;
    k->numel = eng_numel(ctx, node->ndim, node->shape);
    b.epilogue = epilogue_of(&b, node);
    const eng_node *over = b.epilogue ? b.epilogue : node; /* the kernel's dims */
    k->ndim = over->ndim;
    memcpy(k->dims, over->shape, over->ndim * sizeof *k->dims);
    bool window = node->kind == ENG_REDUCE && unrolls(&b, node);
    if (window)
        window_dims(&b, k);
    if (!k->numel)
        return build_fail(&b, KILN_ERROR_OVERFLOW, "the element count");
    k->gidx = index_var(&b, "gidx", k->numel);
    /* Buffer 0 is the output: its storage is assigned by the scheduler. */
    k->buffer_count = 1;
    b.max_descriptors = eng_kernel_max_descriptors(ctx);
    b.descriptors =
        eng_storage_descriptors(ctx, (uint64_t)sym_vmax(k->numel) * eng_type_size(node->type));
    k->buffer_types[0] = node->type;
    const sym_node *idx[SHAPE_MAX_DIMS];
    if (!k->gidx)
        return build_fail(&b, KILN_ERROR_OUT_OF_HOST_MEMORY, "the kernel's index");
    unravel(&b, k->gidx, node->ndim, node->shape, idx);
    memcpy(b.out_idx, idx, node->ndim * sizeof *idx);
    if (b.epilogue || window)
        unravel(&b, k->gidx, k->ndim, k->dims, b.out_idx);
    /* Row mode: rows of a constant size; on a GPU a constant count of rows, enough to keep it
     * busy (a CPU's lanes run a row's loops as vectors: any count of rows will do, a symbolic
     * one too, a sequence length or a batch: GPT-2's layer norm, mean, variance and
     * normalisation, one kernel instead of three, 219 -> 173 kernels a decode step). On an
     * H100, row mode for every row of at most 4,096 elements made a softmax 2.6x slower and
     * GPT-2's decode no faster (docs/gpus.md). */
    int64_t rows = 1, size = 0;
    bool symbolic_rows = false;
    b.row_ok = node->kind == ENG_EW && !b.epilogue && node->ndim > 0 &&
               sym_is_const(node->shape[node->ndim - 1], NULL);
    for (uint32_t d = 0; b.row_ok && d + 1 < node->ndim; d++) {
        if (sym_is_const(node->shape[d], &size))
            rows *= size;
        else
            symbolic_rows = true;
    }
    b.row_ok =
        b.row_ok && (ctx->tile_ew > 1 || (!symbolic_rows && rows >= (int64_t)ctx->parallelism));
    if (node->kind == ENG_WRITE)
        build_write(&b, node);
    else if (window) {
        k->value = build_window(&b, node, idx, wanted);
    } else if (node->kind == ENG_REDUCE) {
        k->value = reduction_input(&b, node, idx);
        if (k->value && b.status == KILN_OK)
            add_siblings(&b, node, wanted);
    } else
        k->value = node_value(&b, node, idx);
    *need_count = b.need_count;
    *refused = b.refuse;
    if (b.refuse)
        return KILN_OK;
    if (b.status == KILN_OK && (!k->value || sym_ctx_status(ctx->sym) != KILN_OK))
        build_fail(&b, KILN_ERROR_INTERNAL, "building the kernel");
    if (b.status == KILN_OK)
        finish_kernel(&b);
    /* Lifting gives up quietly where a symbolic constructor fails (the value stays code), but
     * the failure (out of memory) is the kernel's: reported now, not left to lowering. */
    if (b.status == KILN_OK && sym_ctx_status(ctx->sym) != KILN_OK)
        build_fail(&b, KILN_ERROR_INTERNAL, "finishing the kernel");
    return b.status;
}

/* Whether reduction outer's kernel may run reduction inner as an earlier stage (stage_read):
 * both of one shape over the same dims, outer's input reading inner through unrealized
 * elementwise nodes. A shape test only: the build decides. */
bool eng_kernel_stage_of(const eng_node *outer, const eng_node *inner) {
    enum { WALK = 32 };
    if (outer->kind != ENG_REDUCE || inner->kind != ENG_REDUCE || inner->arg ||
        outer->reduce_mask != inner->reduce_mask || !same_shape(outer, inner))
        return false;
    const eng_node *pending[WALK]; /* outer's input and the elementwise nodes under it */
    uint32_t n = 0, seen = 0;
    pending[n++] = outer->src[0].node;
    while (n > 0 && seen++ < WALK) {
        const eng_node *m = pending[--n];
        if (m == inner)
            return true;
        if (m->storage || m->kind != ENG_EW)
            continue;
        for (uint32_t i = 0; i < m->nsrc && n < WALK; i++)
            pending[n++] = m->src[i].node;
    }
    return false;
}

kiln_status eng_kernel_build(kiln_context *ctx, eng_node *node, eng_kernel *k, eng_node **needs,
                             uint32_t cap, uint32_t *need_count, uint64_t wanted) {
    bool refused = false;
    kiln_status st = build(ctx, node, k, needs, cap, need_count, wanted, false, &refused);
    if (st == KILN_OK && refused) /* a fused write's target is read elsewhere: none fused */
        st = build(ctx, node, k, needs, cap, need_count, wanted, true, &refused);
    return st;
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
        put(t, "rand%u(", a->word); /* the seed: its parameter (low half), or the value */
        if (a->key[0])
            put_sym(t, a->key[0]);
        else
            put(t, "%llu", (unsigned long long)a->seed);
        put(t, ", ");
        put_sym(t, a->index);
        put(t, ")");
        return;
    case KAST_REDUCE:
        put(t, "reduction%u", a->reduction);
        return;
    case KAST_GATHER:
        put(t, "gather(b%u[", a->buffer);
        put_sym(t, a->index);
        put(t, "] with ");
        put_sym(t, a->var);
        put(t, " = ");
        put_kast(t, a->src[0]);
        put(t, " < ");
        put_sym(t, a->bound);
        put(t, ", flag b%u)", a->flag);
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
    char name[ENG_NAME_MAX];
    eng_kernel_name(k, name, sizeof name);
    put(&t, "kernel %s (%016llx): for ", name, (unsigned long long)k->hash);
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
        put(&t, "  reduction%u = %s%s over ", i,
            r->arg == ENG_ARG_POOL ? "poolarg"
            : r->arg               ? "arg"
                                   : "",
            ir_op_name(r->op));
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
    for (uint32_t j = 0; j < k->sibling_count; j++) {
        put(&t, "  b%u[", k->siblings[j].buffer);
        put_sym(&t, k->gidx);
        put(&t, "] = ");
        put_kast(&t, k->siblings[j].value);
        put(&t, "\n");
    }
    return t.len;
}

/* ---- names ------------------------------------------------------------------------------------
 */

enum { NAME_OPS = 6, NAME_VISITS = 4096 };

/* The ops a kernel's name lists: distinct, in the order they first run, at most NAME_OPS; the
 * walk of a value stops after NAME_VISITS nodes (an AST is a DAG: shared subtrees are walked
 * again, which must not run away). */
typedef struct namer {
    const char *ops[NAME_OPS];
    uint32_t count, visits;
    char lower[NAME_OPS][16]; /* lowercase op names */
} namer;

static void name_op(namer *n, const char *op) {
    if (n->count == NAME_OPS)
        return;
    char *low = n->lower[n->count];
    snprintf(low, sizeof n->lower[0], "%s", op);
    for (char *c = low; *c; c++)
        *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
    for (uint32_t j = 0; j < n->count; j++) {
        if (strcmp(n->ops[j], low) == 0)
            return;
    }
    n->ops[n->count++] = low;
}

/* The value's ops, operands first (the order they run in). */
static void name_value(namer *n, const kast *a) {
    if (!a || ++n->visits > NAME_VISITS)
        return;
    for (uint32_t i = 0; i < a->nsrc; i++)
        name_value(n, a->src[i]);
    if (a->kind == KAST_ALU)
        name_op(n, ir_op_name(a->op));
    else if (a->kind == KAST_RAND)
        name_op(n, "rand");
    else if (a->kind == KAST_INDEX)
        name_op(n, "index");
    else if (a->kind == KAST_GATHER)
        name_op(n, "gather");
}

static const char *reduction_name(const eng_reduction *r) {
    switch (r->op) {
    case IR_ADD:
        return "sum";
    case IR_MUL:
        return "prod";
    case IR_MAX:
        return r->arg ? "argmax" : "max";
    default:
        return "min";
    }
}

/* A dim of the name: a constant or a Variable as it is ("64", "batch"), an expression without
 * spaces ("(batch*2)"). */
static void name_dim(text *t, const sym_node *d, bool *numeric) {
    char s[48];
    size_t len = sym_render(d, s, sizeof s), j = 0;
    if (len >= sizeof s)
        snprintf(s, sizeof s, "?");
    *numeric = true;
    for (size_t i = 0; s[i]; i++) {
        *numeric = *numeric && ((s[i] >= '0' && s[i] <= '9') || (i == 0 && s[i] == '-'));
        if (s[i] != ' ')
            s[j++] = s[i];
    }
    s[j] = '\0';
    put(t, "%s", s);
}

size_t eng_kernel_name(const eng_kernel *k, char *buf, size_t cap) {
    text t = {buf, cap, 0};
    if (buf && cap)
        buf[0] = '\0';
    namer n = {.count = 0};
    for (uint32_t i = 0; i < k->reduction_count; i++) {
        name_value(&n, k->reductions[i].value);
        name_op(&n, reduction_name(&k->reductions[i]));
    }
    name_value(&n, k->value);
    char kind = k->out_index ? 'W' : k->reduction_count ? 'R' : n.count ? 'E' : 'C';
    put(&t, "%c", kind);
    for (uint32_t i = 0; i < n.count; i++)
        put(&t, "_%s", n.ops[i]);
    bool prev_numeric = false;
    for (uint32_t d = 0; d < k->ndim; d++) {
        char dim[48];
        text dt = {dim, sizeof dim, 0};
        bool numeric;
        name_dim(&dt, k->dims[d], &numeric);
        put(&t, "%s%s", d == 0 ? "_" : numeric && prev_numeric ? "x" : "_x_", dim);
        prev_numeric = numeric;
    }
    return t.len;
}
