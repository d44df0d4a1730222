/* engine/ internals (prefix eng_): the context, the lazy graph, kernels and their realization.
 *
 * The walk (shared/design/ARCHITECTURE.md):
 *   graph.c     kiln_ ops build immutable, hash-consed nodes; movement ops only change views
 *   schedule.c  realize cuts the graph into kernels: one output, at most one reduction,
 *               elementwise chains inlined, every input read through its view's index
 *   kernel.c    each kernel becomes a kernel AST with bound values unbound; its hash is the key
 *   lower.c     AST -> kernel IR (ir.h); emit.c: IR -> SPIR-V (on a cache miss only)
 *   runtime.c   device buffers, the pipeline cache in memory, dispatch, or the interpreter
 *   realize.c   the walk above as one function, one call per stage
 */
#ifndef KILN_ENGINE_ENG_H
#define KILN_ENGINE_ENG_H

#include "base.h"
#include "ir.h"
#include "kiln/kiln.h"
#include "shape.h"
#include "sym.h"
#include "vkd.h"

/* ---- graph --------------------------------------------------------------------------------- */

typedef enum eng_kind {
    ENG_BUFFER, /* storage (from host data, empty, or a realized result) */
    ENG_CONST,  /* every element = value */
    ENG_INDEX,  /* element = its row-major flat index (arange) */
    ENG_RAND,   /* element = uniform [0, 1) from (seed, flat index) */
    ENG_EW,     /* elementwise ir op over the sources */
    ENG_REDUCE, /* combine (ADD, MUL, MAX, MIN) over the axes in reduce_mask (kept as size 1) */
} eng_kind;

typedef struct eng_storage {
    uint64_t elements;
    ir_type type;
    vkd_buffer *buffer;       /* on a device */
    void *host;               /* with the interpreter */
    struct eng_storage *next; /* the context's list of storages */
} eng_storage;

struct eng_node;

/* A source read through a view: the tracker maps the consumer's logical index to an element
 * of node's row-major output. */
typedef struct eng_src {
    struct eng_node *node;
    const shape_tracker *st;
} eng_src;

typedef struct eng_node {
    eng_kind kind;
    ir_op op;     /* ENG_EW: the op; ENG_REDUCE: the combiner */
    ir_type type; /* element type of the output */
    uint32_t ndim;
    const sym_node *shape[SHAPE_MAX_DIMS];
    uint32_t nsrc;
    eng_src src[3];
    double value;               /* ENG_CONST */
    const sym_node *value_expr; /* ENG_CONST: a symbolic value instead (NULL: value) */
    uint64_t seed;              /* ENG_RAND */
    uint32_t reduce_mask;       /* ENG_REDUCE */
    eng_storage *storage;       /* ENG_BUFFER always; others once realized */
    uint64_t id;                /* creation order */
    uint64_t hash;
} eng_node;

struct kiln_tensor {
    kiln_context *ctx;
    eng_node *base;
    const shape_tracker *st; /* the tensor's view of base's row-major output */
};

/* ---- kernels ------------------------------------------------------------------------------- */

typedef enum kast_kind {
    KAST_LOAD,   /* buffer[index] where valid, else 0 */
    KAST_CONST,  /* value */
    KAST_INDEX,  /* the value of an index expression (index), cast to type */
    KAST_RAND,   /* uniform [0, 1) from seed and the index expression */
    KAST_ALU,    /* op over src */
    KAST_REDUCE, /* the kernel's reduction result (only outside the reduction's body) */
} kast_kind;

typedef struct kast {
    kast_kind kind;
    ir_op op;
    ir_type type;
    uint32_t nsrc;
    struct kast *src[3];
    uint32_t buffer;
    const sym_node *index, *valid;
    double value;
    uint64_t seed;
    uint64_t hash;
} kast;

enum { ENG_MAX_BUFFERS = 16, ENG_MAX_PARAMS = 32 };

typedef struct eng_kernel {
    kast *value; /* stored at the output element gidx */
    ir_type out_type;
    const sym_node *numel; /* invocations (unbound) */
    const sym_node *gidx;  /* the invocation's Variable */
    bool has_reduce;
    ir_op reduce_op;
    ir_type reduce_type;
    kast *reduce_value; /* combined over ridx */
    const sym_node *reduce_count;
    const sym_node *ridx;
    uint32_t buffer_count; /* buffer 0 is the output */
    eng_storage *buffers[ENG_MAX_BUFFERS];
    ir_type buffer_types[ENG_MAX_BUFFERS];
    uint32_t param_count; /* bound Variables, pushed as index values */
    const sym_node *params[ENG_MAX_PARAMS];
    int64_t param_values[ENG_MAX_PARAMS];
    uint64_t hash;
    eng_node *output; /* the node this kernel realizes */
} eng_kernel;

/* A compiled kernel, kept in the context's memory cache by AST hash. */
typedef struct eng_program {
    uint64_t hash;
    ir_kernel ir;
    vkd_pipeline *pipeline; /* NULL with the interpreter */
    uint32_t workgroup_size;
    struct eng_program *next;
} eng_program;

/* ---- the context --------------------------------------------------------------------------- */

struct kiln_context {
    base_allocator alloc;
    base_error err;   /* the first recorded error (sticky until cleared) */
    base_arena arena; /* nodes, trackers, tensors, AST nodes */
    sym_ctx *sym;
    shape_ctx *shape;
    base_map nodes;    /* hash-consing of graph nodes */
    base_map programs; /* memory cache of compiled kernels */
    eng_program *program_list;
    eng_storage *storage_list;
    uint64_t next_id;
    bool interpreter;
    vkd_instance *inst;
    vkd_device *dev;
    char device_name[256];
    kiln_stats stats;
};

/* Records the first error (sticky) and returns NULL, for graph-building calls. */
void *eng_fail(kiln_context *ctx, kiln_status status, const char *fmt, ...) BASE_PRINTF(3, 4);
/* Records a sym/shape error after a failed call into those modules. */
void *eng_fail_from_shape(kiln_context *ctx, kiln_status status);

/* graph.c */
eng_node *eng_node_new(kiln_context *ctx, eng_kind kind, ir_op op, ir_type type, uint32_t ndim,
                       const sym_node *const *shape);
eng_node *eng_node_intern(kiln_context *ctx, eng_node *candidate);
kiln_tensor *eng_tensor_new(kiln_context *ctx, eng_node *base, const shape_tracker *st);
const shape_tracker *eng_tracker_keep(kiln_context *ctx, const shape_tracker *st);
const shape_tracker *eng_tracker_contiguous(kiln_context *ctx, uint32_t ndim,
                                            const sym_node *const *shape);
eng_storage *eng_storage_new(kiln_context *ctx, ir_type type, uint64_t elements);

/* kernel.c: the AST of the kernel realizing node (its unrealized inputs must be realized by
 * earlier kernels: needs[] receives them, and KILN_ERROR_NOT_FOUND says to schedule those
 * first). */
kiln_status eng_kernel_build(kiln_context *ctx, eng_node *node, eng_kernel *k, eng_node **needs,
                             uint32_t cap, uint32_t *need_count);

/* lower.c */
kiln_status eng_kernel_lower(kiln_context *ctx, const eng_kernel *k, ir_kernel *ir);

/* runtime.c */
kiln_status eng_runtime_init(kiln_context *ctx, const kiln_context_options *opt);
void eng_runtime_finish(kiln_context *ctx);
kiln_status eng_storage_allocate(kiln_context *ctx, eng_storage *s);
void eng_storage_free(kiln_context *ctx, eng_storage *s);
kiln_status eng_storage_write(kiln_context *ctx, eng_storage *s, const void *data, uint64_t bytes);
kiln_status eng_storage_read(kiln_context *ctx, eng_storage *s, void *data, uint64_t bytes);
kiln_status eng_program_get(kiln_context *ctx, const eng_kernel *k, eng_program **out);
typedef struct eng_batch eng_batch;
kiln_status eng_batch_begin(kiln_context *ctx, eng_batch **out);
kiln_status eng_batch_run(kiln_context *ctx, eng_batch *b, const eng_program *p,
                          const eng_kernel *k);
kiln_status eng_batch_finish(kiln_context *ctx, eng_batch *b);

/* schedule.c / realize.c */
kiln_status eng_realize(kiln_context *ctx, uint32_t count, eng_node *const *nodes);

uint32_t eng_type_size(ir_type t);
bool eng_dtype_valid(kiln_dtype d);
ir_type eng_ir_type(kiln_dtype d);
kiln_dtype eng_dtype(ir_type t);
bool eng_shape_from_ints(kiln_context *ctx, const char *op, uint32_t ndim, const int64_t *shape,
                         const sym_node **out);
bool eng_shape_from_exprs(kiln_context *ctx, const char *op, uint32_t ndim,
                          const kiln_expr *const *shape, const sym_node **out);
const sym_node *eng_numel(kiln_context *ctx, uint32_t ndim, const sym_node *const *shape);
kiln_tensor *eng_full(kiln_context *ctx, ir_type type, uint32_t ndim, const sym_node *const *dims,
                      double value, const sym_node *value_expr);
/* Whether value (truncated) is a value of the integer type; else false and an error for op. */
bool eng_value_fits(kiln_context *ctx, const char *op, ir_type type, double value);
/* ops.c: an elementwise node over already broadcast, already typed sources. */
kiln_tensor *eng_elementwise(kiln_context *ctx, ir_op op, ir_type type, uint32_t nsrc,
                             kiln_tensor *const *srcs);

#endif
