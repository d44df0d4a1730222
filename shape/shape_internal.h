/* shape/ internals: the context, proofs over symbolic values, and the canonicalisation every
 * operation ends with. Same prefix as the module, hidden from other modules. */
#ifndef KILN_SHAPE_INTERNAL_H
#define KILN_SHAPE_INTERNAL_H

#include "shape.h"

struct shape_ctx {
    base_allocator alloc;
    sym_ctx *sym;
    base_error err;
    uint64_t alias_enum_limit; /* exact self-alias enumeration up to this many elements */
};

/* Returns from the calling function when expr is not KILN_OK. */
#define SHAPE_CHECK(expr)                                                                          \
    do {                                                                                           \
        kiln_status check_ = (expr);                                                               \
        if (check_ != KILN_OK)                                                                     \
            return check_;                                                                         \
    } while (0)

/* A view or tracker argument is well formed (not NULL, ranks in range, fields built). */
BASE_HIDDEN kiln_status shape_check_view(shape_ctx *ctx, const shape_view *v);
BASE_HIDDEN kiln_status shape_check_tracker(shape_ctx *ctx, const shape_tracker *t);

/* Records a failure message (overwriting the previous one) and returns status. */
BASE_HIDDEN kiln_status shape_fail(shape_ctx *ctx, kiln_status status, const char *fmt, ...)
    BASE_PRINTF(3, 4);
/* A NULL input: the sym context's error when it has one (NULL propagation), else
 * KILN_ERROR_INVALID_ARGUMENT with the message. */
BASE_HIDDEN kiln_status shape_null(shape_ctx *ctx, const char *fmt, ...) BASE_PRINTF(2, 3);
/* The status after building expressions: KILN_OK, or the sym context's error copied in. */
BASE_HIDDEN kiln_status shape_sym_status(shape_ctx *ctx);

BASE_HIDDEN const sym_node *shape_k(shape_ctx *ctx, int64_t v);
/* n is the constant v. */
BASE_HIDDEN bool shape_is(const sym_node *n, int64_t v);
/* The value of n when it is a constant or only involves bound Variables. */
BASE_HIDDEN bool shape_value(const sym_node *n, int64_t *v);
/* a <= b (a < b) for every value of the Variables (false: not proved). */
BASE_HIDDEN bool shape_prove_le(shape_ctx *ctx, const sym_node *a, const sym_node *b);
BASE_HIDDEN bool shape_prove_lt(shape_ctx *ctx, const sym_node *a, const sym_node *b);
/* a == b for every value of the Variables (bound ones included): structurally, by bounds, or
 * by evaluation at every point when at most two Variables with small ranges are involved
 * (symbolic/ does not normalise every product of sums). */
BASE_HIDDEN bool shape_prove_eq(shape_ctx *ctx, const sym_node *a, const sym_node *b);
/* a <= b is known to be false: for every value, or for the bound values. */
BASE_HIDDEN bool shape_refute_le(shape_ctx *ctx, const sym_node *a, const sym_node *b);
/* Normalises a possibly negative dim against ndim (torch's maybe_wrap_dim). */
BASE_HIDDEN kiln_status shape_axis(shape_ctx *ctx, int32_t dim, uint32_t ndim, uint32_t *out);

/* Brings v into canonical form in place (see shape.h). */
BASE_HIDDEN void shape_canon(shape_ctx *ctx, shape_view *v);
/* Checks that every field of v was built (no sym error), then copies it to out. */
BASE_HIDDEN kiln_status shape_finish(shape_ctx *ctx, const shape_view *v, shape_view *out);
/* Row-major strides of a shape: canonical (size-1 dims 0) or PyTorch's (max(size, 1)). */
BASE_HIDDEN void shape_contig_strides(shape_ctx *ctx, uint32_t ndim, const sym_node *const *shape,
                                      bool torch, const sym_node **strides);
/* Sets the user strides to those of a new contiguous tensor of v's shape, offset 0. */
BASE_HIDDEN void shape_user_fresh(shape_ctx *ctx, shape_view *v);
/* The strides PyTorch reports after reshaping in to sizes: computeStride's when torch.view
 * works, else a new contiguous tensor's. Written to v's user fields. */
BASE_HIDDEN void shape_reshape_user(shape_ctx *ctx, const shape_view *in, uint32_t ndim,
                                    const sym_node *const *sizes, shape_view *v);
/* A view needs every size, stride, offset and mask bound of v to be constants. */
BASE_HIDDEN bool shape_all_const(const shape_view *v);

#endif
