/* shape/: views over flat storage and the movement ops on them (prefix shape_).
 *
 * Every tensor in Kiln is a view over flat storage. A shape_view maps a logical index
 * (i_0, ..., i_{n-1}) to the storage element
 *
 *     offset + sum_d i_d * strides[d]
 *
 * and, when it has a mask, says the element is valid (not padding) only when
 * mask_begin[d] <= i_d < mask_end[d] for every d. Sizes, strides, offsets and mask bounds are
 * symbolic expressions (const sym_node *, owned by the sym_ctx the shape_ctx was made with);
 * strides may be negative or zero. Counts are elements, never bytes.
 *
 * A shape_tracker is a stack of views, views[0] nearest the storage: the logical index of
 * views[k+1] is unravelled (row-major) into the logical index of views[k]. One view is the rule;
 * a second view appears only when a reshape cannot be expressed by one view, and adjacent views
 * are merged back whenever the merge is exact.
 *
 *     sym_ctx *sc; sym_ctx_create(NULL, &sc);
 *     shape_ctx *c; shape_ctx_create(NULL, sc, &c);
 *     const sym_node *dims[2] = {sym_const(sc, 4), sym_const(sc, 6)};
 *     shape_view v, t;
 *     shape_view_contiguous(c, 2, dims, &v);
 *     int32_t perm[2] = {1, 0};
 *     if (shape_view_permute(c, &v, perm, &t) != KILN_OK) puts(shape_ctx_message(c));
 *     shape_ctx_destroy(c); sym_ctx_destroy(sc);
 *
 * Values, not handles: shape_view and shape_tracker are plain structs the caller owns and
 * copies; every operation reads its input and writes a new value through its out-parameter.
 * On failure the out-parameter is left untouched, the status says what failed and
 * shape_ctx_message() holds the message of the most recent failure. No operation aborts on
 * caller input. An error the sym_ctx records while an operation runs (overflow of a constant,
 * out of memory) is returned by that operation, its message copied, and cleared from the
 * sym_ctx. A shape_ctx (and its sym_ctx) is not thread-safe. Statuses are kiln_status's caller
 * classes (a dim out of range, bounds beyond a size, shapes that do not fit, ...); messages give
 * the values but name no operation: the engine prefixes the public call.
 *
 * Canonical form. Every view an operation returns is canonical, so equal views compare equal
 * with shape_view_equal:
 *   - a size-1 dimension has stride 0;
 *   - a dimension of size 0 makes every stride 0, the offset 0 and drops the mask;
 *   - a mask covering every index is no mask;
 *   - a dimension whose mask admits exactly one index b has stride 0 (offset moved by b*stride);
 *   - a mask that admits no index anywhere becomes (0,0) in every dimension, strides and offset 0.
 *
 * What the user asked for. Canonical strides are not what PyTorch reports. Each view also
 * carries "user" strides and offset: the strides and storage_offset PyTorch (NumPy for negative
 * strides, which PyTorch refuses) would report for the same sequence of calls. as_strided and
 * empty_strided record exactly the requested strides (size-1 dimensions included), and every
 * later op updates them with PyTorch's rule (unsqueeze inserts size*stride, expand gives 0,
 * reshape uses ATen's computeStride, a reshape that is not a view or a pad yields a new
 * contiguous tensor's strides). They never take part in equality or indexing.
 *
 * Symbolic values. A decision that shapes the result (is this size 1? do these strides merge?)
 * is taken only when it holds for every value of the Variables involved; when it cannot be
 * proved, the safe answer is taken (keep the stride, use a second view, "may alias"). Argument
 * checks (bounds of a shrink, an index) reject what is provably wrong, or wrong for the bound
 * value of bound Variables; a check that cannot be decided is accepted.
 */
#ifndef KILN_SHAPE_SHAPE_H
#define KILN_SHAPE_SHAPE_H

#include "base.h"
#include "sym.h"

enum {
    SHAPE_MAX_DIMS = 16, /* dimensions per view */
    SHAPE_MAX_VIEWS = 8, /* views per tracker */
};

typedef struct shape_ctx shape_ctx;

/* The view. Entries past ndim are NULL; mask_begin/mask_end are NULL when masked is false. */
typedef struct shape_view {
    uint32_t ndim;
    bool masked;
    bool contiguous; /* offset 0, no mask, row-major strides: the identity over storage */
    const sym_node *shape[SHAPE_MAX_DIMS];
    const sym_node *strides[SHAPE_MAX_DIMS];
    const sym_node *offset;
    const sym_node *mask_begin[SHAPE_MAX_DIMS];
    const sym_node *mask_end[SHAPE_MAX_DIMS];
    /* What PyTorch would report (see above); not part of the canonical value. */
    const sym_node *user_strides[SHAPE_MAX_DIMS];
    const sym_node *user_offset;
} shape_view;

typedef struct shape_tracker {
    uint32_t nviews; /* >= 1 once initialised */
    shape_view views[SHAPE_MAX_VIEWS];
} shape_tracker;

/* ---- context ------------------------------------------------------------------------------ */

/* sym is borrowed and must outlive the shape context; alloc NULL: the default allocator. */
kiln_status shape_ctx_create(const base_allocator *alloc, sym_ctx *sym, shape_ctx **out);
void shape_ctx_destroy(shape_ctx *ctx); /* NULL is a no-op */
sym_ctx *shape_ctx_sym(shape_ctx *ctx);
const char *shape_ctx_message(const shape_ctx *ctx); /* the most recent failure's message */
/* Forgets the most recent failure, and any error pending in the symbolic context (after an
 * application clears the error it was told about, nothing of it stays behind). */
void shape_ctx_clear_error(shape_ctx *ctx);
/* Self-alias queries that the stride analysis cannot decide enumerate the addresses of views
 * with at most this many elements (default 65536; 0 turns enumeration off). */
void shape_ctx_set_alias_enum_limit(shape_ctx *ctx, uint64_t elements);

/* ---- construction ------------------------------------------------------------------------- */

/* A dense row-major view of the given sizes (sizes must be >= 0). */
kiln_status shape_view_contiguous(shape_ctx *ctx, uint32_t ndim, const sym_node *const *sizes,
                                  shape_view *out);
/* torch.as_strided over a storage of storage_size elements: sizes >= 0, offset >= 0, and when
 * the view has elements its lowest and highest addressed elements lie in [0, storage_size).
 * storage_size NULL skips the upper bound. User strides are exactly `strides`. */
kiln_status shape_view_as_strided(shape_ctx *ctx, uint32_t ndim, const sym_node *const *sizes,
                                  const sym_node *const *strides, const sym_node *offset,
                                  const sym_node *storage_size, shape_view *out);
/* torch.empty_strided: the view at offset 0 and the storage it needs (highest + 1, 0 when a
 * size is 0). A negative stride (which PyTorch refuses) would address an element before the
 * storage at offset 0 and is rejected like any view leaving its storage. */
kiln_status shape_view_empty_strided(shape_ctx *ctx, uint32_t ndim, const sym_node *const *sizes,
                                     const sym_node *const *strides, shape_view *out,
                                     const sym_node **storage_size);
/* A view with these exact fields, canonicalised (for tests and deserialisation). mask_begin
 * and mask_end may be NULL (no mask). The user strides become the canonical ones. */
kiln_status shape_view_make(shape_ctx *ctx, uint32_t ndim, const sym_node *const *sizes,
                            const sym_node *const *strides, const sym_node *offset,
                            const sym_node *const *mask_begin, const sym_node *const *mask_end,
                            shape_view *out);

bool shape_view_equal(const shape_view *a, const shape_view *b); /* canonical fields only */
/* numel as an expression (NULL on a sym error). */
const sym_node *shape_view_numel(shape_ctx *ctx, const shape_view *v);

/* ---- movement ops on one view (dims are 0-based; negative dims count from the end) -------- */

kiln_status shape_view_permute(shape_ctx *ctx, const shape_view *in, const int32_t *perm,
                               shape_view *out);
/* Each size equals the old one or the old one is 1 (then the stride becomes 0). */
kiln_status shape_view_expand(shape_ctx *ctx, const shape_view *in, const sym_node *const *sizes,
                              shape_view *out);
/* before[d] and after[d] >= 0 elements of padding on each side of dimension d. */
kiln_status shape_view_pad(shape_ctx *ctx, const shape_view *in, const sym_node *const *before,
                           const sym_node *const *after, shape_view *out);
/* Keep [begin[d], end[d]) of each dimension: 0 <= begin <= end <= size. */
kiln_status shape_view_shrink(shape_ctx *ctx, const shape_view *in, const sym_node *const *begin,
                              const sym_node *const *end, shape_view *out);
kiln_status shape_view_flip(shape_ctx *ctx, const shape_view *in, int32_t dim, shape_view *out);
/* Python's x[start:stop:step] on one dimension (NumPy semantics for negative steps): has_start
 * or has_stop false means the default; negative values count from the end and are clamped.
 * step != 0. The dimension's size must be a constant (or bound) value. A native strided op. */
typedef struct shape_slice {
    int64_t start, stop, step;
    bool has_start, has_stop;
} shape_slice;
kiln_status shape_view_slice(shape_ctx *ctx, const shape_view *in, int32_t dim,
                             const shape_slice *s, shape_view *out);
kiln_status shape_view_unsqueeze(shape_ctx *ctx, const shape_view *in, int32_t dim,
                                 shape_view *out);
/* Removes dimension dim, which must have size 1 (torch.squeeze(dim) leaves a dimension of
 * another size alone; this call reports it instead so the caller can decide). */
kiln_status shape_view_squeeze(shape_ctx *ctx, const shape_view *in, int32_t dim, shape_view *out);
kiln_status shape_view_narrow(shape_ctx *ctx, const shape_view *in, int32_t dim,
                              const sym_node *start, const sym_node *length, shape_view *out);
/* torch.select: index in [-size, size). */
kiln_status shape_view_select(shape_ctx *ctx, const shape_view *in, int32_t dim,
                              const sym_node *index, shape_view *out);
/* torch.diagonal(offset, dim1, dim2): dims removed, the diagonal appended last. */
kiln_status shape_view_diagonal(shape_ctx *ctx, const shape_view *in, int64_t offset, int32_t dim1,
                                int32_t dim2, shape_view *out);
/* torch.Tensor.unfold(dim, size, step): dim becomes (n - size) / step + 1, a new last dim of
 * size `size` with dim's stride. size <= n, step >= 1. The dim must not be masked. */
kiln_status shape_view_unfold(shape_ctx *ctx, const shape_view *in, int32_t dim,
                              const sym_node *size, const sym_node *step, shape_view *out);
/* Reshape within one view. *ok false (status KILN_OK) when no single view expresses it. */
kiln_status shape_view_reshape(shape_ctx *ctx, const shape_view *in, uint32_t ndim,
                               const sym_node *const *sizes, shape_view *out, bool *ok);
/* PyTorch's view rule (ATen computeStride on the user strides): true when torch.view would
 * succeed, with the strides torch would report in strides_out (may be NULL). */
bool shape_view_torch_can_view(shape_ctx *ctx, const shape_view *in, uint32_t ndim,
                               const sym_node *const *sizes, const sym_node **strides_out);
/* Merge two stacked views (inner nearest the storage) into one; *ok false when not exact.
 * Contiguous views, masked outer views and broadcasts of one element merge with symbolic
 * values; the general projection needs constant outer views and constant inner sizes. */
kiln_status shape_view_merge(shape_ctx *ctx, const shape_view *inner, const shape_view *outer,
                             shape_view *out, bool *ok);

/* ---- index expressions and extent --------------------------------------------------------- */

/* The storage index and the validity predicate (1 where the element is not padding) of the
 * logical index idx[0..ndim-1] (any expressions, typically Variables in [0, size-1]). */
kiln_status shape_view_index(shape_ctx *ctx, const shape_view *v, const sym_node *const *idx,
                             const sym_node **index, const sym_node **valid);
/* Lowest and highest storage element any valid logical index addresses: offset plus, per
 * dim, the first or last valid index times the stride, whichever is lower (higher). *empty
 * true (and lo/hi NULL) when the view addresses nothing (a size or a mask range of 0, bound
 * Variables read at their values). */
kiln_status shape_view_extent(shape_ctx *ctx, const shape_view *v, const sym_node **lo,
                              const sym_node **hi, bool *empty);
/* KILN_OK when every addressed element lies in [0, storage_size) (an empty view always). */
kiln_status shape_view_check_storage(shape_ctx *ctx, const shape_view *v,
                                     const sym_node *storage_size);

/* ---- queries ------------------------------------------------------------------------------ */

/* Dense row-major and unmasked, at any offset (PyTorch's is_contiguous). Decided on constant
 * strides; a symbolic view answers through its contiguous flag (offset 0). */
bool shape_view_is_dense(const shape_view *v);
/* A permutation perm with permute(v, perm) dense: KILN_ERROR_NOT_FOUND when none exists
 * (negative or overlapping strides, a mask, a symbolic stride order that cannot be proved). */
kiln_status shape_view_dense_permutation(shape_ctx *ctx, const shape_view *v, int32_t *perm);

typedef enum shape_alias {
    SHAPE_ALIAS_NONE,  /* proved: distinct valid logical indices address distinct elements */
    SHAPE_ALIAS_YES,   /* proved: two distinct valid logical indices address one element */
    SHAPE_ALIAS_MAYBE, /* not provable either way: a writer must reject it */
} shape_alias;
/* Decided from the strides (a stride-0 dimension, two dimensions with a common multiple
 * inside their ranges, or strides that nest) and otherwise by enumeration (see
 * shape_ctx_set_alias_enum_limit). Bound Variables are read at their bound values. */
shape_alias shape_view_self_alias(shape_ctx *ctx, const shape_view *v);
shape_alias shape_tracker_self_alias(shape_ctx *ctx, const shape_tracker *t);

/* tinygrad's real_strides: out[d] is the stride of dimension d when the storage index moves by
 * exactly that much per step of d at every valid index, NULL when it does not (a padded dim)
 * or cannot be told (more than one view after merging). */
kiln_status shape_tracker_real_strides(shape_ctx *ctx, const shape_tracker *t,
                                       const sym_node **out);

/* ---- the tracker ---------------------------------------------------------------------------- */

/* A tracker reports the user strides of its last view. */
kiln_status shape_tracker_from_view(const shape_view *v, shape_tracker *out);
const shape_view *shape_tracker_last(const shape_tracker *t); /* NULL for a malformed t */
/* The tracker with its last view replaced by last (the result of a view op on
 * shape_tracker_last(in): slice, select, diagonal, ...), merged wherever exact. */
kiln_status shape_tracker_replace_last(shape_ctx *ctx, const shape_tracker *in,
                                       const shape_view *last, shape_tracker *out);
/* Reshape: one view when possible, else a second view (then merged back when exact). */
kiln_status shape_tracker_reshape(shape_ctx *ctx, const shape_tracker *in, uint32_t ndim,
                                  const sym_node *const *sizes, shape_tracker *out);
/* Merges adjacent views wherever exact. */
kiln_status shape_tracker_simplify(shape_ctx *ctx, const shape_tracker *in, shape_tracker *out);
/* Index and validity of logical index idx (one entry per dim of the last view): the last
 * view's index is unravelled into each earlier view in turn; the predicates are and-ed. The
 * expressions are as simplified as symbolic/ makes them (e.g. (i*3)+j, i<2). */
kiln_status shape_tracker_index(shape_ctx *ctx, const shape_tracker *t, const sym_node *const *idx,
                                const sym_node **index, const sym_node **valid);
/* The indices in shape (ndim dims: the row-major layout t views) of the element t reads at
 * idx, straight from a one-view tracker's strides where each of its dims steps one dim of
 * shape without wrapping (permutes, splits, strided slices, broadcasts); false otherwise
 * (then unravel shape_tracker_index's flat index). */
bool shape_tracker_coords(shape_ctx *ctx, const shape_tracker *t, const sym_node *const *idx,
                          uint32_t ndim, const sym_node *const *shape, const sym_node **own);
/* t with every bound Variable replaced by its Variable (the form a kernel-cache key needs);
 * the bound values are appended to (vars, values) in order of first appearance, each Variable
 * once (capacity cap; *found is the number of Variables, which may exceed cap). */
kiln_status shape_tracker_unbind(shape_ctx *ctx, const shape_tracker *in, shape_tracker *out,
                                 const sym_node **vars, int64_t *values, size_t cap, size_t *found);
/* True when the tracker is one contiguous view (offset 0): the identity over storage. */
bool shape_tracker_contiguous(const shape_tracker *t);

/* ---- movement ops ---------------------------------------------------------------------------- */

typedef enum shape_op_kind {
    SHAPE_OP_RESHAPE, /* ndim, a = sizes */
    SHAPE_OP_PERMUTE, /* ndim, axes */
    SHAPE_OP_EXPAND,  /* ndim, a = sizes */
    SHAPE_OP_PAD,     /* ndim, a = before, b = after */
    SHAPE_OP_SHRINK,  /* ndim, a = begin, b = end */
    SHAPE_OP_FLIP,    /* axes[0] */
    SHAPE_OP_UNFOLD,  /* axes[0] = dim, a[0] = size, b[0] = step */
} shape_op_kind;

typedef struct shape_op {
    shape_op_kind kind;
    uint32_t ndim;
    int32_t axes[SHAPE_MAX_DIMS];
    const sym_node *a[SHAPE_MAX_DIMS];
    const sym_node *b[SHAPE_MAX_DIMS];
} shape_op;

enum { SHAPE_MAX_OPS = 2 * SHAPE_MAX_DIMS + 8 }; /* enough for any to_movement_ops result */

/* Movement ops (never as_strided) that rebuild v from a contiguous 1-D base of *base_size
 * elements (the view's highest element + 1): shrink the base to the span v addresses, one
 * unfold per dimension that moves (largest |stride| first; overlapping windows included),
 * reshape in the size-1 dims, permute, expand the stride-0 dims, flip the negative ones, pad
 * the mask. Written to ops[0..*count-1] (cap entries, SHAPE_MAX_OPS always suffices).
 * Needs constant values (KILN_ERROR_UNSUPPORTED otherwise) and at most SHAPE_MAX_DIMS - 1
 * dimensions with a nonzero stride and two or more valid indices (KILN_ERROR_LIMIT_EXCEEDED).
 * The result is checked: applying the ops gives a view equal to v, else KILN_ERROR_INTERNAL. */
kiln_status shape_view_to_movement_ops(shape_ctx *ctx, const shape_view *v, shape_op *ops,
                                       uint32_t cap, uint32_t *count, int64_t *base_size);
/* Applies one op to a tracker (reshape may add a view). */
kiln_status shape_tracker_apply(shape_ctx *ctx, const shape_tracker *in, const shape_op *op,
                                shape_tracker *out);

#endif
