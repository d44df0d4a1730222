/* engine/ internals (prefix eng_): the context, the lazy graph, kernels and their realization,
 * in four rooms that data flows through one way.
 *
 * front/ (the public calls):
 *   graph.c      kiln_ ops build immutable nodes (computations hash-consed, creations not);
 *                ops.c, nn.c, transformer.c: compute ops and composites; movement.c: views;
 *                write.c: writes are nodes too
 *   lifetime.c   handles, cells (one storage's tensors), references: what nothing holds is
 *                freed at once; scope.c: scopes release handles (docs/lifetime.md)
 *   autograd.c   records of how each op differentiates itself, kiln_grad; optim.c: optimizers
 * schedule/:
 *   realize.c    cuts the graph into kernels (the schedule): one output, at most one
 *                reduction, elementwise chains inlined, every input read through its view's
 *                index; it also runs the whole walk as one function, one call per stage
 *   plan.c       what a realize keeps for the next realize of its graph: where its builds
 *                stopped (foresight) and the kernels it built (replay)
 *   kernel.c     each kernel becomes a kernel AST with bound values unbound; its hash is the key
 * codegen/:
 *   lower.c      AST -> kernel IR (ir.h); emit.c: IR -> SPIR-V (on a cache miss only)
 * run/:
 *   runtime.c    device buffers, the pipeline cache in memory, dispatch; interp.c: the
 *                reference interpreter; cache.c: compiled kernels on disk; trace.c: KILN_TRACE
 * (docs/architecture.md tells the same walk for a newcomer.) */
#ifndef KILN_ENGINE_ENG_H
#define KILN_ENGINE_ENG_H

#include "base.h"
#include "ir.h"
#include "kiln/kiln.h"
#include "pcache.h"
#include "shape.h"
#include "sym.h"
#include "vkd.h"

/* ---- graph --------------------------------------------------------------------------------- */

typedef enum eng_kind {
    ENG_BUFFER, /* storage (from host data, empty, or a realized result) */
    ENG_CONST,  /* every element = value */
    ENG_INDEX,  /* element = its row-major flat index (arange) */
    ENG_RAND,   /* element = uniform [0, 1): word rand_word of Philox4x32-10 (key seed, counter
                   the flat index), lower.c */
    ENG_EW,     /* elementwise ir op over the sources */
    ENG_REDUCE, /* combine (ADD, MUL, MAX, MIN) over the axes in reduce_mask (kept as size 1) */
    ENG_WRITE,  /* src[0]'s storage with the elements of dst_view replaced by src[1] (in place) */
    ENG_GATHER, /* src[0] with its index along dim read from src[1] (1-d, i32 or i64): element
                   i of dim is src[0]'s element src[1][i] (index_select) */
} eng_kind;

/* Lifetime (engine/front/lifetime.c). A tensor handle holds a cell; a cell (the tensors that view
 * one storage: a tensor and its views) holds the node of its current value; a node holds its
 * sources while it is not realized, and its storage once it is. Each holder counts a
 * reference; what nothing holds any more is freed at once, iteratively (no recursion on the
 * graph's depth). Readers lists are not references: they only order writes. */
typedef struct eng_storage {
    uint64_t elements;
    /* The most elements a storage of its node's shape holds for any values of the Variables in
     * it (elements for constant shapes): kernels reading it assume this bound, not elements,
     * so another bound value compiles nothing new (kernel.c lift_offset). */
    uint64_t bound;
    ir_type type;
    vkd_buffer *buffer; /* on a device */
    void *host;         /* with the interpreter (two elements at least: runtime.c) */
    /* The application's buffer (kiln_tensor_from_vulkan_buffer), of exactly its size: every
     * other storage holds at least two elements, so that a masked pair (lower.c) may read
     * elements 0 and 1 where it is invalid. */
    bool wrapped;
    uint32_t refs;            /* nodes holding it (a write holds its target's) */
    struct eng_storage *next; /* the context's live storages */
    struct eng_storage *prev;
} eng_storage;

/* Whether s is an application's buffer of fewer than two elements (eng_storage wrapped). */
static inline bool eng_storage_short(const eng_storage *s) {
    return s && s->wrapped && s->elements < 2;
}

struct eng_node;

/* A source read through a view: the tracker (owned by the reading node) maps the consumer's
 * logical index to an element of node's row-major output. node is NULL once the reader is
 * realized (its sources are let go); id stays, for hash-consing. */
typedef struct eng_src {
    struct eng_node *node;
    const shape_tracker *st;
    uint64_t id;
} eng_src;

/* A node's membership of its i-th source's readers list (doubly linked, so a reader leaves in
 * O(1) when it is realized or freed). */
typedef struct eng_reader {
    struct eng_node *node; /* the reader */
    struct eng_reader *next, *prev;
} eng_reader;

typedef struct eng_node {
    eng_kind kind;
    ir_op op;     /* ENG_EW: the op; ENG_REDUCE: the combiner */
    ir_type type; /* element type of the output */
    uint32_t ndim;
    const sym_node *shape[SHAPE_MAX_DIMS];
    uint32_t nsrc;
    eng_src src[3];
    eng_reader as_reader[3];       /* this node in src[i].node's readers list */
    double value;                  /* ENG_CONST */
    const sym_node *value_expr;    /* ENG_CONST: a symbolic value instead (NULL: value) */
    uint64_t seed;                 /* ENG_RAND */
    uint32_t rand_word;            /* ENG_RAND: which of the block's four words (0..3) */
    uint32_t reduce_mask;          /* ENG_REDUCE */
    uint32_t dim;                  /* ENG_GATHER: the dim indexed */
    uint8_t arg;                   /* ENG_REDUCE with IR_MAX: an index (i32), eng_arg_kind */
    bool unique;                   /* a creation (zeros, arange, ...): never hash-consed */
    bool boundary;                 /* kiln_contiguous: realized by a kernel of its own */
    bool interned;                 /* in the context's hash-consing table */
    bool written;                  /* a write targets it: its value is no longer the current
                                      value of any storage, so it is out of the table */
    eng_storage *storage;          /* ENG_BUFFER always; others once realized */
    const shape_tracker *dst_view; /* ENG_WRITE: the elements written (owned) */
    eng_reader *readers;           /* unrealized nodes that read this one directly */
    uint32_t refs;                 /* cells and reading nodes holding it */
    uint32_t cells;                /* of those, cells whose current value it is */
    uint64_t id;                   /* creation order, never reused */
    uint64_t mark;                 /* scratch for graph walks (a stamp per walk) */
    uint64_t mark2;                /* scratch for a walk inside another (schedule/) */
    uint64_t wanted;               /* a realize's mark: it needs this node (realize.c) */
    uint64_t deferred; /* a realize's mark: a write whose earlier readers are scheduled, its
                          kernel left to the write reading it (realize.c step_build) */
    uint64_t hash;
    uint64_t local_hash;          /* eng_node_local_hash's, once asked (0: not yet) */
    uint64_t values_hash;         /* eng_node_values_hash's, once asked (0: not yet) */
    uint64_t plan_mark;           /* the realize that numbered it (plan.c's foresight) */
    uint32_t plan_index;          /* its number there */
    struct eng_node *next, *prev; /* the context's live nodes */
} eng_node;

/* The tensors that view one storage (PyTorch's Storage): a write through any of them replaces
 * node, and every one of them then reads the new value. */
typedef struct eng_cell {
    eng_node *node;
    uint32_t refs;    /* tensor handles, and the autograd records that saved it (autograd.c) */
    uint64_t version; /* writes so far (torch's version counter: autograd.c checks it) */
} eng_cell;

/* ---- autograd (autograd.c) ---- */

/* A value an op read, kept for its backward pass: a view of a cell, and the cell's version
 * when it was read. */
typedef struct eng_saved {
    eng_cell *cell; /* held (a reference), NULL: not kept */
    const shape_tracker *st;
    uint64_t version;
} eng_saved;

/* How one recorded op differentiates itself (torch's grad_fn). A tensor handle that needs a
 * gradient holds one: a leaf's (op ENG_AG_LEAF, kiln_requires_grad_) or the op's that made it.
 * A record holds its inputs' records and the values its rule reads; it is freed with the last
 * handle or record holding it. */
typedef struct eng_fn {
    uint32_t refs;
    uint32_t op; /* eng_ag_op (autograd.c) */
    uint32_t nin;
    struct eng_fn *in_fn[3]; /* held; NULL: that input needs no gradient */
    eng_saved in[3];         /* the inputs as read (always kept: shapes, dtypes, versions) */
    eng_saved out;           /* the output, kept when the rule reads it */
    uint64_t out_version;    /* the output's cell version when it was made */
    ir_type in_type[3];
    /* The op's arguments. */
    int64_t ints[2 * SHAPE_MAX_DIMS];
    uint32_t nints;
    const sym_node *syms[2 * SHAPE_MAX_DIMS]; /* marked while the record lives */
    uint32_t nsyms;
    double value, value2;
    bool flag;
    bool view;                  /* its output views its first input's storage (a movement op) */
    struct eng_fn *next, *prev; /* the context's records */
    uint64_t mark;              /* scratch for kiln_grad's walk */
    uint32_t order;
} eng_fn;

/* A tensor handle's slot. The public kiln_tensor * is not a pointer: it encodes the context's
 * registry index, the slot and the slot's generation (lifetime.c), so a released handle is
 * detected without touching freed memory. */
typedef struct eng_tensor {
    kiln_context *ctx;
    eng_cell *cell;
    /* The tensor's view of the cell's node's row-major output (owned, compact: only nviews
     * views are allocated; copy it into a whole shape_tracker before passing it to a shape/
     * call that takes the tracker by value). */
    const shape_tracker *st;
    kiln_tensor *handle;
    uint32_t gen;
    uint32_t scope;     /* the scope depth it belongs to (0: outside any scope) */
    eng_fn *fn;         /* autograd: how its value is differentiated (NULL: needs none) */
    uint32_t next_free; /* free slots: the next one */
    bool live;
} eng_tensor;

/* An expression handle's entry: a const kiln_expr * encodes the registry index, the entry's
 * index and its generation like a tensor handle (lifetime.c). One entry per symbolic node
 * handed out; it is freed (its generation moves on) when the node is collected. */
typedef struct eng_expr {
    const sym_node *node; /* NULL: a free entry */
    uint32_t gen;
    uint32_t next_free; /* free entries: the next one */
    uint32_t index;     /* its own index */
    uint32_t pin;       /* ENG_UNPINNED, or the depth of the scope that holds it (0: none) */
    bool bound;         /* a Variable's: bound outside any scope, last to value */
    int64_t value;
} eng_expr;

#define ENG_UNPINNED UINT32_MAX

/* ---- kernels ------------------------------------------------------------------------------- */

typedef enum kast_kind {
    KAST_LOAD,   /* buffer[index] where valid, else 0 */
    KAST_CONST,  /* value */
    KAST_INDEX,  /* the value of an index expression (index), cast to type */
    KAST_RAND,   /* uniform [0, 1): word `word` of Philox4x32-10, key seed, counter index */
    KAST_ALU,    /* op over src */
    KAST_REDUCE, /* the kernel's reduction result (only outside the reduction's body) */
    KAST_GATHER, /* buffer[index] where valid, else 0, index mentioning var, whose value is
                    src[0] (the index read) when 0 <= src[0] < bound; else invalid, and where
                    guard holds the flag buffer's words become 1, src[0], bound */
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
    uint32_t word; /* KAST_RAND: the word of the Philox block */
    /* KAST_RAND: the seed's low and high 32 bits as parameters (kernel.c lift_seed: Variables
     * of the kernel pushed like bound values), or NULL: the seed is code. */
    const sym_node *key[2];
    uint32_t reduction;                  /* KAST_REDUCE: which of the kernel's reductions */
    const sym_node *var, *bound, *guard; /* KAST_GATHER */
    uint32_t flag;                       /* KAST_GATHER: the flag buffer's slot */
    uint64_t hash;
} kast;

enum { ENG_MAX_BUFFERS = 16, ENG_MAX_PARAMS = 32, ENG_MAX_REDUCTIONS = 4 };
/* Outputs of one kernel: its node's, and its siblings' (sibling reductions, fused writes). */
enum { ENG_MAX_OUTPUTS = 4 };
enum { ENG_MAX_TILE = 64 }; /* outputs per invocation of a tile of shared loads */
/* outputs per invocation of a tile of windows in whole rows (lower.c eng_kernel_tile) */
enum { ENG_MAX_WINDOW_TILE = 256 };
enum { ENG_MAX_GATHERS = 32 }; /* gathers in one kernel (more are realized first) */
/* Nodes a kernel build's walk up a node's readers looks at, at most (kernel.c
 * read_by_several_kernels; plan.c's readers_print covers as many) */
enum { ENG_READERS_WALK = 32 };
/* The loop passes (a loop of n iterations makes n + 1) one invocation of a kernel may run in
 * all: below the 65535 after which lavapipe leaves loops silently (lower.c, the loop budget). */
enum { ENG_LOOP_PASSES = 65534 };
/* The most elements one kernel combines per output (ops.c splits larger reductions): lavapipe
 * ends every loop of an invocation after 65535 iterations in all (gallivm's
 * LP_MAX_TGSI_LOOP_ITERATIONS), silently; a kernel's stages, ENG_MAX_REDUCTIONS at most, then
 * stay within ENG_LOOP_PASSES (lower.c). */
enum { ENG_REDUCE_MAX_COUNT = 65535 };

/* Which maximum an arg reduction gives the index of (0: none, the maximum itself): the first
 * (a NaN is the maximum, the first NaN: torch.argmax), or a pool's (the first maximum, but of
 * NaNs the last: torch's max_pool2d, whose loop takes every NaN it meets). */
typedef enum eng_arg_kind { ENG_ARG_NONE, ENG_ARG_FIRST, ENG_ARG_POOL } eng_arg_kind;

/* One reduction of a kernel. Every reduction of a kernel combines over the same range. */
typedef struct eng_reduction {
    ir_op op;       /* ADD, MUL, MAX, MIN */
    ir_type type;   /* of the combined values */
    uint8_t arg;    /* MAX that yields an index (i32): eng_arg_kind (0: the maximum) */
    uint32_t stage; /* combined after the reductions of lower stages its value reads */
    kast *value;    /* the value combined, over ridx */
    eng_node *node;
    const sym_node *at; /* an unrolled window's instance: node's element (NULL: the kernel's) */
} eng_reduction;

/* A kernel's sibling output (below). */
typedef struct eng_sibling {
    eng_node *node;
    kast *value; /* a KAST_REDUCE of the kernel, or a fused write's value */
    uint32_t buffer;
} eng_sibling;

typedef struct eng_kernel {
    kast *value; /* stored at the output element gidx */
    ir_type out_type;
    uint32_t ndim; /* gidx runs row-major over dims (unbound) */
    /* Row mode: reductions over the last dim read along each output row (softmax's max and
     * sum) are fused; one invocation owns a row, runs them once, then writes the row. */
    bool rows;
    const sym_node *dims[SHAPE_MAX_DIMS];
    const sym_node *numel;     /* output elements (unbound) */
    const sym_node *out_index; /* the storage element written (NULL: gidx, a fresh output) */
    const sym_node *gidx;      /* the invocation's Variable */
    uint32_t reduction_count;  /* 0: an elementwise kernel */
    eng_reduction reductions[ENG_MAX_REDUCTIONS];
    const sym_node *reduce_count; /* elements combined per output */
    const sym_node *ridx;
    uint32_t buffer_count; /* buffer 0 is the output */
    eng_storage *buffers[ENG_MAX_BUFFERS];
    ir_type buffer_types[ENG_MAX_BUFFERS];
    /* Bound Variables, and the values lifted out of the code (kernel.c: view offsets and mask
     * bounds), pushed as index values. */
    uint32_t param_count;
    const sym_node *params[ENG_MAX_PARAMS];
    int64_t param_values[ENG_MAX_PARAMS];
    uint32_t offset_params; /* bit p: params[p] is a lifted offset (its alignment may matter) */
    uint64_t hash;
    eng_node *output; /* the node this kernel realizes */
    /* Sibling outputs, each stored at the output's own element (gidx) in its own buffer: other
     * reductions of the same input over the same dims that this realize wants (kernel.c
     * add_siblings: a max pool's maximum and, for its backward, the index of the first
     * maximum), each computed in the same loop, their storage assigned by the scheduler as
     * buffer 0's; and writes this write kernel reads at its own element (kernel.c
     * fused_write: an optimizer's moments), stored into their targets. */
    uint32_t sibling_count;
    eng_sibling siblings[ENG_MAX_OUTPUTS - 1];
} eng_kernel;

/* A compiled kernel, kept in the context's memory cache by AST hash. */
enum { ENG_NAME_MAX = 96 }; /* a kernel's name (eng_kernel_name), with its hash suffix */

typedef struct eng_program {
    uint64_t hash;
    char name[ENG_NAME_MAX]; /* unique among the context's kernels (runtime.c name_program) */
    ir_kernel ir;
    vkd_pipeline *pipeline; /* NULL with the interpreter */
    /* Specialisation: a variant compiled under an assumption about the kernel's Variables is
     * reused only while its guard holds; variants of one hash are chained. */
    bool unchecked; /* no bounds check: numel is a multiple of the workgroup size */
    bool has_guard;
    sym_guard guard;
    /* Lifted offsets (eng_kernel offset_params): residue[p] is the offset's value modulo the
     * widest vector, the variant asked for; align[p] (4 or 8; 0: none) says the code reads the
     * offset as align[p] * W + residue[p] % align[p] and is pushed W (vector accesses need the
     * alignment), an alignment kept only where a vector access relies on it. */
    uint8_t residue[ENG_MAX_PARAMS];
    uint8_t align[ENG_MAX_PARAMS];
    /* Storages larger than the device's storage-buffer range: buffer i is bound as windows[i]
     * descriptors of 2^window_log2 bytes each (runtime.c storage_windows; 0: one binding of
     * the whole buffer). Part of the variant: other sizes compile again. */
    uint32_t windows[ENG_MAX_BUFFERS];
    uint32_t window_log2;
    /* Bit i: buffer i's storage can be read as texels (runtime.c texel_storages; part of the
     * variant: a storage without texels compiles again), and of those the buffers the code
     * reads as texels (read only, 32-bit: the pipeline's texel bindings). Bindings past the
     * kernel's buffers are buffer 0's storage again: the bit after them says the output's
     * storage may be read so, through a read-only binding that lowering adds for an in-place
     * write's loads of its target (lower.c eng_kernel_lower, runtime.c read_storage). */
    uint32_t texel_storages, texel_bindings;
    struct eng_program *same; /* non-NULL: this variant's code is same's (an alias) */
    /* The expressions its kernel was built from (runtime.c keep_expressions). */
    const sym_node **exprs;
    uint32_t expr_count;
    struct eng_program *variant;
    bool params_in_buffer; /* parameters exceed the push-constant limit: a small buffer */
    uint32_t workgroup_size;
    uint32_t group_lanes; /* nonzero: one workgroup of this many lanes per output */
    /* Output tiling: each invocation computes tile_m x tile_n outputs, tile_m consecutive rows
     * of tile_width outputs times tile_n consecutive columns (1 x 1: one output each). */
    uint32_t tile_m, tile_n;
    int64_t tile_width;
    /* Consecutive items in blocks of block_m tile rows x block_n tile columns (1 x 1: items in
     * row-major tile order), so that a workgroup's invocations share one panel of the operand
     * loaded along columns. */
    uint32_t block_m, block_n;
    uint32_t share_lanes; /* a team kernel (ir.h): loads shared in subgroups of this many */
    bool row_loop;        /* row mode: the tiles of a row run in a loop of one invocation */
    /* Windows read in place in tiles of whole rows (lower.c eng_kernel_tile): the elements
     * per step of the loop, loads shared between them: the taps of a kernel row (a forward, an
     * input gradient) or the pixels of an image row (a weight gradient); 0: not such a kernel. */
    uint32_t window_taps;
    uint64_t per_item; /* outputs per invocation (tile_m * tile_n, or a row's width) */
    /* The dispatch interface (from the IR, or from the disk cache when there is no IR). */
    ir_type index_type;
    uint32_t param_count;
    uint32_t binding_count;
    uint32_t push_constant_size;
    struct eng_program *next;
} eng_program;

/* ---- the context --------------------------------------------------------------------------- */

/* What a realize kept for the next realize of its graph: where its kernel builds stopped at
 * dependencies, the kernels it built (plan.c's foresight and replay). */
typedef struct eng_plan eng_plan;
enum { ENG_PLANS_KEPT = 8 }; /* graphs a context keeps them for */

struct kiln_context {
    base_allocator alloc;
    base_error err;   /* the most recent failure's status and message */
    bool sticky;      /* err is a graph-building error: realize and read refuse until cleared */
    base_arena arena; /* one realize's kernel ASTs and lowering memo (reset after it) */
    sym_ctx *sym;
    shape_ctx *shape;
    base_map nodes;    /* hash-consing of graph nodes */
    base_map programs; /* memory cache of compiled kernels */
    base_map refused;  /* kernels the device cannot run for their value types (runtime.c) */
    /* What realizes of a graph kept for its next realize: where its kernel builds stopped at
     * dependencies, the kernels it built (plan.c's foresight and replay), eight graphs, the
     * least recently used replaced. */
    eng_plan *plans[ENG_PLANS_KEPT];
    uint64_t plan_clock;
    bool no_foresight;        /* test-only (eng_testing): builds learn nothing from earlier ones */
    bool no_unrolled_windows; /* test-only (eng_testing): kernel.c unrolls no windows */
    eng_program *program_list;
    eng_storage *storage_list; /* live storages */
    eng_node *node_list;       /* live nodes */
    /* Tensor handles (lifetime.c): slots in chunks of ENG_SLOT_CHUNK (stable addresses). */
    eng_tensor **slot_chunks;
    uint32_t slot_chunk_count;
    uint32_t slot_count;
    uint32_t free_slot; /* head of the free slots (UINT32_MAX: none) */
    uint32_t registry_index;
    uint32_t scope_depth;     /* open scopes */
    uint32_t temp_depth;      /* open eng_temps_begin regions */
    BASE_VEC(uint32_t) temps; /* slots made inside them, innermost last */
    uint64_t live_tensors, live_nodes, live_storages, live_bytes;
    /* Autograd (autograd.c): the live records, and the depth of the ops being recorded or
     * differentiated (what they call inside is not recorded). */
    eng_fn *fn_list;
    uint32_t ag_block;
    /* Expression handles (kiln_int, kiln_bind, ...): one entry per node handed out, pinned by
     * the scope it was made in, or outside any scope (pin 0) until a Variable it binds is
     * bound to another value outside any scope (lifetime.c). */
    BASE_VEC(uint32_t) pins; /* entries pinned in a scope (depth >= 1), innermost last */
    eng_expr **expr_chunks;  /* expression handles: entries in chunks of ENG_EXPR_CHUNK */
    uint32_t expr_chunk_count;
    uint32_t expr_count;
    uint32_t free_expr;          /* head of the free entries (UINT32_MAX: none) */
    base_map exprs;              /* node -> its entry */
    uint64_t sym_built;          /* symbolic nodes ever built, at the last collection */
    BASE_VEC(vkd_buffer *) pool; /* buffers of freed storages, reused by size */
    uint64_t pool_bytes;
    uint64_t next_id;
    uint64_t next_mark;
    bool interpreter;
    bool force_specialization; /* test-only: specialise symbolic sizes too (guards) */
    bool timing;               /* timestamp queries around each realize's batch */
    struct eng_trace *trace;   /* KILN_TRACE's file (trace.c); NULL: not tracing */
    /* The out-of-range flag gathers set (words: 1, the index, the size; runtime.c), bound to
     * every kernel that gathers; realize checks it after the batch (NULL: none made yet). */
    eng_storage *bounds_flag;
    /* While tracing: the graph-building calls since the last realize (eng_temps_begin/end):
     * the first's start, the last's end, their own time, how many; the current call's start. */
    int64_t graph_first_ns, graph_last_ns, graph_own_ns, graph_call_ns;
    uint32_t graph_calls;
    int64_t progress_ns;       /* compiling longer than this reports progress (eng_testing: 0) */
    uint32_t parallelism;      /* invocations worth keeping busy (splits big reductions) */
    uint32_t parallelism_long; /* the same for reductions of long loops (lower.c LONG_LOOP) */
    /* Workgroups a kernel should have at least: narrower ones where it has fewer items (a
     * CPU's threads each run whole workgroups; 0: never narrowed, a GPU's) */
    uint32_t min_workgroups;
    bool whole_short_rows;         /* a short row the tile does not divide is one tile
                                    * (lower.c; a CPU's: a reduction's, and an elementwise
                                    * kernel's of several loads) */
    bool window_rows;              /* windows read in place tile whole rows (lower.c; a
                                    * CPU's: up to 256 accumulators an invocation) */
    uint32_t group_lanes;          /* lanes per output of a group reduction (a power of two) */
    bool group_rows;               /* many outputs' reductions along rows take lane groups too
                                    * (lower.c eng_kernel_group_lanes: a GPU's) */
    uint32_t group_rows_min_lanes; /* the narrowest such group: the device's subgroup size */
    uint32_t test_group_lanes;     /* eng_testing.group_lanes */
    bool test_gpu_tuning;          /* eng_testing.gpu_tuning */
    uint32_t test_tile[5];         /* eng_testing.tile_ew, _rows, _cols, _vector_cols,
                                    * _block_rows */
    uint32_t tile_ew;              /* outputs per invocation of an elementwise kernel */
    uint32_t tile_ew_one;          /* of one that reads a single buffer (lower.c) */
    uint32_t tile_ew_shared;       /* of one that reads an element for a whole row (lower.c) */
    bool opaque_multipliers;       /* emit_options.opaque_multipliers: CPU devices */
    bool paired_vectors;           /* emit_options.paired_vectors: CPU devices with int64 */
    bool octets;                   /* vector accesses of eight elements where they line up
                                      (LOAD8/STORE8, lower.c): with paired_vectors */
    uint32_t tile_rows, tile_cols; /* register tile of a reduction with a 2-D output */
    uint32_t tile_vector_cols;     /* columns of a reduction's tile that only reads vectors */
    uint32_t tile_block_rows, tile_block_cols; /* items of a load-sharing tiled kernel in blocks */
    uint32_t share_lanes;       /* subgroup width where team kernels share loads (0: none) */
    bool test_unshared_loads;   /* eng_testing.unshared_loads */
    bool test_unpaired_vectors; /* eng_testing.unpaired_vectors */
    bool test_storage_reads;    /* eng_testing.storage_reads */
    bool texel_reads; /* emit_options.texel_buffers for read-only operands: CPU devices with
                         caps.texel_fetch, without a device profile, unless
                         eng_testing.storage_reads */
    vkd_instance *inst;
    vkd_device *dev;
    vkd_batch *batch; /* the command buffer every realize records into (reset each time) */
    pcache *pcache;   /* the disk cache (NULL with the interpreter) */
    void *blob;       /* the VkPipelineCache data loaded from it */
    size_t blob_size;
    bool blob_saved; /* saved after the first burst of compiles */
    char device_name[256];
    const struct vkd_profile *profile; /* the device profile in force (NULL: none) */
    kiln_stats stats;
    /* The public call running (outermost), named by errors the modules below report. */
    const char *call;
    /* Where the messages logged during this context's calls go (kiln_context_options.log), the
     * thread's route before the outermost of them began, and how deep they are nested. */
    base_log_route log;
    const base_log_route *log_prev;
    uint32_t log_depth;
};

/* Records the first error (sticky) and returns NULL, for graph-building calls. */
/* Starts a status-returning public call: its own failure replaces an earlier non-sticky one.
 * Returns the sticky graph-building error, if any, which the call must report instead. */
kiln_status eng_call_begin(kiln_context *ctx);
void *eng_fail(kiln_context *ctx, kiln_status status, const char *fmt, ...) BASE_PRINTF(3, 4);
/* Records a sym/shape error after a failed call into those modules, its message prefixed
 * with the public call running (ctx->call). */
void *eng_fail_from_shape(kiln_context *ctx, kiln_status status);
/* The same, naming call (a public call that is not a tensor op, kiln_empty_strided). */
void *eng_fail_from_shape_in(kiln_context *ctx, const char *call, kiln_status status);
/* Brackets a public call: the messages logged on this thread in between go to the context's
 * callback (base_log_route_set). Nests; each enter has one leave. */
void eng_log_enter(kiln_context *ctx);
void eng_log_leave(kiln_context *ctx);

/* graph.c: nodes and creation. A node from eng_node_new is a candidate: fill its fields (its
 * sources with trackers it owns), then eng_node_intern (hash-consed) or eng_node_adopt (a
 * node of its own: buffers, creations, writes) makes it live, holding its sources; a candidate
 * that goes no further is given back with eng_node_discard. */
eng_node *eng_node_new(kiln_context *ctx, eng_kind kind, ir_op op, ir_type type, uint32_t ndim,
                       const sym_node *const *shape);
eng_node *eng_node_intern(kiln_context *ctx, eng_node *candidate);
eng_node *eng_node_adopt(kiln_context *ctx, eng_node *candidate);
void eng_node_discard(kiln_context *ctx, eng_node *candidate);
/* A node of its own copying src read through st (taken), of the given sizes (graph.c). */
eng_node *eng_node_copy(kiln_context *ctx, eng_node *src, const shape_tracker *st, uint32_t ndim,
                        const sym_node *const *shape);
/* What the node is and how it reads its sources, not which nodes those are nor the values its
 * bound Variables have: equal for the nodes of every step that builds the same graph
 * (plan.c's foresight). Kept in the node. */
uint64_t eng_node_local_hash(eng_node *n);
/* eng_node_local_hash with the values of its bound Variables: equal where a kernel built
 * from the node is the same (plan.c's replay). Kept in the node. */
uint64_t eng_node_values_hash(eng_node *n);
/* What a kernel's build reads of a realized node it loads (kernel.c src_value, buffer_slot):
 * its type, its sizes (unbound: without the values of their bound Variables), and its
 * storage's type, size (the larger of its elements and bound) and whether it is an
 * application's; not how the node was computed, so equal for the result of a write at a bound
 * position from one step to the next (plan.c's replay). Not kept. */
uint64_t eng_node_frontier_hash(const eng_node *n, bool unbound);
/* Variables bound in some nodes' expressions and their values (eng_node_bindings). */
typedef struct eng_bindings {
    const sym_node *vars[ENG_MAX_PARAMS];
    int64_t values[ENG_MAX_PARAMS];
    uint32_t count;
} eng_bindings;
/* Adds the Variables bound in n's sizes (and unless sizes_only, its value, a write's view and
 * its sources' views) to b with their values; false where one bound in b already has another
 * value here, or b is full. */
bool eng_node_bindings(const eng_node *n, bool sizes_only, eng_bindings *b);
/* The hash-consing equality of two nodes (base_map_eq_fn). */
bool eng_node_same(const void *stored, const void *key, void *user);
/* A compact copy of st (only its views), owned by the caller (eng_tracker_free). */
const shape_tracker *eng_tracker_keep(kiln_context *ctx, const shape_tracker *st);
/* Whether two trackers view alike (their canonical fields). */
bool eng_tracker_equal(const shape_tracker *a, const shape_tracker *b);
const shape_tracker *eng_tracker_contiguous(kiln_context *ctx, uint32_t ndim,
                                            const sym_node *const *shape);
void eng_tracker_free(kiln_context *ctx, const shape_tracker *st);
eng_storage *eng_storage_new(kiln_context *ctx, ir_type type, uint64_t elements);

/* lifetime.c: handles, cells and references. */
enum { ENG_SLOT_CHUNK = 1024, ENG_EXPR_CHUNK = 256 };
/* Gives ctx a registry index (its handles name it); KILN_ERROR_LIMIT_EXCEEDED when full. */
kiln_status eng_registry_add(kiln_context *ctx);
void eng_registry_remove(kiln_context *ctx);
/* The slot of a handle this library made and checked (internal use). */
eng_tensor *eng_t(kiln_tensor *h);
/* The slot of handle h for public call `call`, or NULL: h NULL (an error recorded before,
 * passed through), or h not a live handle (released, of a destroyed context, or of another
 * context than *ctx when *ctx is set: an error naming call is recorded in the context known).
 * On success *ctx is h's context. */
eng_tensor *eng_arg(kiln_tensor *h, kiln_context **ctx, const char *call);
/* The same for a call returning a status: the error is not sticky, and *status receives it
 * (h NULL is an error too). */
eng_tensor *eng_arg_status(kiln_tensor *h, kiln_context **ctx, const char *call,
                           kiln_status *status);
/* A new tensor (a storage of its own) whose value is node base, read through st (taken: freed
 * on failure; base, when nothing else holds it, too). */
kiln_tensor *eng_tensor_new(kiln_context *ctx, eng_node *base, const shape_tracker *st);
/* A new view of t's storage through st (taken). */
kiln_tensor *eng_view_new(kiln_context *ctx, kiln_tensor *t, const shape_tracker *st);
/* Shorthands for a checked handle's slot: its context, view and current node. */
#define ENG_CTX(h) (eng_t(h)->ctx)
#define ENG_ST(h) (eng_t(h)->st)
#define ENG_BASE(h) (eng_resolve(h))
/* The node t reads now (its storage's current value). */
eng_node *eng_resolve(kiln_tensor *t);
/* Operations recomputed per read of unrealized elementwise node n: its op and those of the
 * unrealized elementwise nodes it inlines (counted per path, as a kernel inlines them),
 * stopping at limit. Stored values, reductions, writes and boundaries are loads, and a copy of
 * the same type (a node of its own over a view) a move: they count 0.
 * A value of RECOMPUTE_MIN_OPS or more is materialised rather than recomputed where it is read
 * many times (schedule/kernel.c, autograd.c). */
uint32_t eng_node_inlined_ops(const eng_node *n, uint32_t limit);
/* The unrealized nodes that read n, counted up to most (graph.c). */
uint32_t eng_node_live_readers(const eng_node *n, uint32_t most);
enum { RECOMPUTE_MIN_OPS = 4 };
/* Makes n the current value of t's storage (a write). */
void eng_cell_set(kiln_context *ctx, eng_tensor *t, eng_node *n);
void eng_tensor_release(kiln_context *ctx, eng_tensor *t);
/* Drops a reference to cell (a handle's or a saved value's); the last frees it. */
void eng_cell_drop(kiln_context *ctx, eng_cell *cell);
/* A new handle of cell through a copy of st (made in the current scope and temporaries). */
kiln_tensor *eng_cell_handle(kiln_context *ctx, eng_cell *cell, const shape_tracker *st);
/* Marks the expressions st reads (expression collection). */
void eng_mark_tracker(sym_ctx *sc, const shape_tracker *st);
void eng_node_ref(eng_node *n);
/* Drops a reference; frees n and then whatever only n held, iteratively. */
void eng_node_unref(kiln_context *ctx, eng_node *n);
/* n's i-th source becomes src read through st (taken), in place of the one it had. */
void eng_node_set_src(kiln_context *ctx, eng_node *n, uint32_t i, eng_node *src,
                      const shape_tracker *st);
/* n reads its sources that are `from` from `to` instead, through the same views: to holds
 * from's value (a copy of the same shape), so n stays the same computation (its sources' ids,
 * and so its hash, are kept). */
void eng_node_move_src(kiln_context *ctx, eng_node *n, eng_node *from, eng_node *to);
/* n is realized: it lets its sources go (and leaves their readers lists). */
void eng_node_let_go(kiln_context *ctx, eng_node *n);
/* A new storage joins the context's live storages, held once (by the caller). */
void eng_storage_track(kiln_context *ctx, eng_storage *s);
void eng_storage_ref(eng_storage *s);
void eng_storage_unref(kiln_context *ctx, eng_storage *s);
/* Handles made between begin and end are released at end, except result (composite ops
 * release their intermediate tensors). Returns result. */
size_t eng_temps_begin(kiln_context *ctx);
/* The context of a public call's tensor operands (all of one context), or NULL with the error
 * recorded (a NULL operand passes an earlier error through). */
kiln_context *eng_entry_context(const char *call, size_t count, kiln_tensor *const *tensors);
/* The body of a public tensor op: checks the tensor operands, then evaluates result (an
 * expression of them) in a temporaries region, so that the op's intermediates are released. */
#define ENG_ENTRY(call, result, ...)                                                               \
    kiln_context *eng_ctx_ =                                                                       \
        eng_entry_context(call, sizeof((kiln_tensor *[]){__VA_ARGS__}) / sizeof(kiln_tensor *),    \
                          (kiln_tensor *[]){__VA_ARGS__});                                         \
    if (!eng_ctx_)                                                                                 \
        return NULL;                                                                               \
    size_t eng_mark_ = eng_temps_begin(eng_ctx_);                                                  \
    return eng_temps_end(eng_ctx_, eng_mark_, result)
kiln_tensor *eng_temps_end(kiln_context *ctx, size_t mark, kiln_tensor *result);
/* The same keeping count results (NULL entries allowed). */
void eng_temps_end_many(kiln_context *ctx, size_t mark, uint32_t count, kiln_tensor *const *keep);

/* autograd.c. The ops that differentiate themselves (what their records' rules are). */
typedef enum eng_ag_op {
    ENG_AG_NONE, /* no gradient flows through (comparisons, argmax): nothing is recorded */
    ENG_AG_LEAF, /* kiln_requires_grad_ */
    ENG_AG_IDENTITY,
    ENG_AG_ADD,
    ENG_AG_SUB,
    ENG_AG_MUL,
    ENG_AG_DIV,
    ENG_AG_POW,
    ENG_AG_MAXIMUM,
    ENG_AG_MINIMUM,
    ENG_AG_WHERE,
    ENG_AG_NEG,
    ENG_AG_ABS,
    ENG_AG_EXP,
    ENG_AG_LOG,
    ENG_AG_SQRT,
    ENG_AG_RSQRT,
    ENG_AG_SIN,
    ENG_AG_COS,
    ENG_AG_TANH,
    ENG_AG_SIGMOID,
    ENG_AG_RELU,
    ENG_AG_CAST,
    ENG_AG_ADD_SCALAR,
    ENG_AG_MUL_SCALAR,
    ENG_AG_SUM,
    ENG_AG_PROD,
    ENG_AG_MAX,
    ENG_AG_MIN,
    ENG_AG_MEAN,
    ENG_AG_VAR,
    ENG_AG_STD,
    ENG_AG_SOFTMAX,
    ENG_AG_LOG_SOFTMAX,
    ENG_AG_MATMUL,
    ENG_AG_RESHAPE, /* reshape, squeeze, unsqueeze: the gradient takes the input's shape */
    ENG_AG_PERMUTE,
    ENG_AG_EXPAND,
    ENG_AG_PAD,
    ENG_AG_SHRINK,
    ENG_AG_FLIP,
    ENG_AG_SLICE,
    ENG_AG_SELECT,
    ENG_AG_DIAGONAL,
    ENG_AG_UNFOLD,
    ENG_AG_AS_STRIDED,
    /* Forms of the above the record normalizes: transpose (a permute), narrow (a shrink). */
    ENG_AG_TRANSPOSE,
    ENG_AG_NARROW,
    ENG_AG_INDEX_SELECT, /* ints: dim; the gradient scatters (adds) into the rows indexed */
    ENG_AG_MAX_FIRST,    /* a max over the last dim whose first maximum takes the gradient */
    /* conv2d's input gradient: the value is input 0's (the convolution), whose gradient passes
     * through; input 1 (x) takes a convolution of it with the flipped weights (input 2, read
     * only). ints: padding, dilation (2 each) of a convolution of stride 1, one group. */
    ENG_AG_CONV_INPUT,
} eng_ag_op;

/* The arguments of an op that records how to differentiate itself. */
typedef struct eng_ag_args {
    uint32_t op;
    const int64_t *ints, *ints2; /* nints of each */
    uint32_t nints;
    const int32_t *dims; /* ndims of them (axes, permutation) */
    uint32_t ndims;
    const kiln_expr *const *exprs, *const *exprs2; /* nexprs of each (symbolic bounds) */
    uint32_t nexprs;
    double value, value2;
    bool flag;
} eng_ag_args;
/* Whether the op about to run with these operands records: none is being recorded around it,
 * and an operand needs a gradient (then nested ops are blocked until eng_ag_end). */
bool eng_ag_begin(kiln_context *ctx, size_t count, kiln_tensor *const *ins);
/* Whether an op reading t now would be recorded: t has a history (or is a leaf that needs a
 * gradient) and no recording is under way around the call. */
bool eng_ag_records(kiln_context *ctx, kiln_tensor *t);
/* Records the op that made result (NULL: failed) from ins; returns result. */
kiln_tensor *eng_ag_end(kiln_context *ctx, kiln_tensor *result, const eng_ag_args *args,
                        size_t count, kiln_tensor *const *ins);
void eng_fn_ref(eng_fn *f);
void eng_fn_unref(kiln_context *ctx, eng_fn *f);
/* A write changed cell's values. */
void eng_ag_written(eng_cell *cell);
/* Marks the expressions the records hold (expression collection). */
void eng_ag_mark(kiln_context *ctx);
void eng_ag_finish(kiln_context *ctx);
/* The body of a public op that differentiates itself (args: ENG_AG(.op = ..., ...)): as
 * ENG_ENTRY, and the op is recorded when an operand needs a gradient. */
#define ENG_AG(...) ((eng_ag_args){__VA_ARGS__})
#define ENG_OP(call, args, result, ...)                                                            \
    kiln_tensor *const eng_ins_[] = {__VA_ARGS__};                                                 \
    size_t eng_n_ = sizeof eng_ins_ / sizeof eng_ins_[0];                                          \
    kiln_context *eng_ctx_ = eng_entry_context(call, eng_n_, eng_ins_);                            \
    if (!eng_ctx_)                                                                                 \
        return NULL;                                                                               \
    bool eng_rec_ = eng_ag_begin(eng_ctx_, eng_n_, eng_ins_);                                      \
    size_t eng_mark_ = eng_temps_begin(eng_ctx_);                                                  \
    kiln_tensor *eng_r_ = eng_temps_end(eng_ctx_, eng_mark_, result);                              \
    const eng_ag_args eng_args_ = args;                                                            \
    return eng_rec_ ? eng_ag_end(eng_ctx_, eng_r_, &eng_args_, eng_n_, eng_ins_) : eng_r_
/* kiln_expand_sym and kiln_reshape_sym of nodes the program holds (ndim <= SHAPE_MAX_DIMS,
 * no size negative): what the engine's own ops call (movement.c). */
kiln_tensor *eng_expand(kiln_tensor *t, uint32_t ndim, const sym_node *const *dims);
kiln_tensor *eng_reshape(kiln_tensor *t, uint32_t ndim, const sym_node *const *dims);
/* kiln_pad_sym of nodes the program holds (before, after per dim), refused only when an amount
 * is provably negative (bound Variables count with their values): autograd's scatters, whose
 * amounts are sizes of the forward's views. */
kiln_tensor *eng_pad(kiln_tensor *t, const sym_node *const *pad);
/* t padded with zeros after its end along dim to a whole number of blocks of m elements,
 * *blocks receiving their count, ceil(size / m); t itself where the size is a constant
 * multiple of m. NULL where a node could not be made (the failure recorded). */
kiln_tensor *eng_pad_to_blocks(kiln_tensor *t, uint32_t dim, int64_t m, const sym_node **blocks);
/* e (may be NULL) was handed to the program: its handle, pinned until the current scope ends
 * (outside any scope: until a Variable it binds is bound again outside any scope; Variables
 * and expressions without bindings: the context's life). NULL (out of memory) for NULL e. */
const kiln_expr *eng_pin_expr(kiln_context *ctx, const sym_node *e);
/* e's handle, not pinned, for passing a node the program holds to a public call: valid until
 * the next collection that finds e unused. NULL for NULL e or out of memory (recorded). */
const kiln_expr *eng_expr_handle(kiln_context *ctx, const sym_node *e);
/* The node a handle names. NULL for NULL h (nothing recorded: the caller reports a missing
 * expression, or one whose error is recorded already) and for a stale, foreign or made-up
 * handle (KILN_ERROR_INVALID_HANDLE "call: ..." recorded as a sticky error). */
const sym_node *eng_expr_arg(kiln_context *ctx, const kiln_expr *h, const char *call);
/* As eng_expr_arg, the error recorded as the call's status only (not sticky). */
const sym_node *eng_expr_arg_status(kiln_context *ctx, const kiln_expr *h, const char *call,
                                    kiln_status *status);
/* Frees the expressions nothing uses any more: none pinned, none read by a live tensor, node
 * or compiled kernel (never during a realize); their handles become stale. force: even when
 * no node was built since the last collection (pins were dropped). */
void eng_collect_expressions(kiln_context *ctx, bool force);
void eng_unpin_to(kiln_context *ctx, uint32_t depth);
/* var is bound to value outside any scope. Unless its last binding outside any scope had that
 * value, the pins outside any scope of the expressions that bind var (or another Variable of
 * its number modulo 64: sym_node_binds) go; returns whether they did. */
bool eng_unpin_bindings(kiln_context *ctx, const sym_node *var, int64_t value);
/* Frees every handle, node and storage (context destruction). */
void eng_lifetime_finish(kiln_context *ctx);

/* kernel.c: the AST of the kernel realizing node (its unrealized inputs must be realized by
 * earlier kernels: needs[] receives them, and KILN_ERROR_NOT_FOUND says to schedule those
 * first). wanted: nonzero, the mark (eng_node wanted) of the unrealized nodes the realize
 * needs, of which a reduction's siblings and the writes a write reads join its kernel (0:
 * none join). */
kiln_status eng_kernel_build(kiln_context *ctx, eng_node *node, eng_kernel *k, eng_node **needs,
                             uint32_t cap, uint32_t *need_count, uint64_t wanted);
/* kernel.c: whether reduction outer's kernel may compute reduction inner as an earlier stage
 * of its loop and store it (a softmax's sum of exp(x - max) and its max): the scheduler then
 * realizes outer first when a kernel needs both. */
bool eng_kernel_stage_of(const eng_node *outer, const eng_node *inner);
/* The walk up n's readers a build takes (kernel.c read_by_several_kernels), which replay's
 * print follows (plan.c readers_print): visit(reader, user) for each reader of each node walked
 * (n, then the readers it climbs through, ENG_READERS_WALK nodes at most), which answers > 0 to
 * climb through that reader, 0 to pass it, < 0 to end the walk (true). */
typedef int (*eng_reader_visit)(const eng_node *reader, void *user);
bool eng_readers_walk(const eng_node *n, eng_reader_visit visit, void *user);

/* Whether expression e (an index, a mask) of kernel k changes along its reduction's loop:
 * e with ridx + 1 for ridx is another expression (kernel.c keeps such a mask's bounds as code,
 * lower.c shapes tiles around such loads). False without a reduction. */
bool eng_kernel_varies_in_loop(sym_ctx *sc, const eng_kernel *k, const sym_node *e);

/* The kernel's name, tinygrad style: its kind (R: reductions, W: a write into a view of an
 * existing storage, C: a copy, no arithmetic; E: elementwise), the ops it runs (reductions as
 * sum, prod, max, argmax, min; at most six, in the order they first run) and its output dims,
 * Variables by name: "E_add_mul_exp_64x128", "R_exp_sum_batch_x_10". Kernels that differ may
 * share a name (runtime.c adds a short hash where two do); snprintf contract. */
size_t eng_kernel_name(const eng_kernel *k, char *buf, size_t cap);

/* ---- trace.c: KILN_TRACE's timeline (Chrome trace events) ---- */

typedef struct eng_trace eng_trace;
enum { ENG_TRACE_HOST = 1, ENG_TRACE_DEVICE = 2 }; /* the tracks (trace "tid"s) */
/* KILN_TRACE names a file (contexts then time each dispatch). */
bool eng_trace_wanted(void);
/* Opens the context's trace file when KILN_TRACE is set (a warning and no trace when it cannot
 * be written); close writes its end. Both no-ops without a trace. */
void eng_trace_open(kiln_context *ctx);
void eng_trace_close(kiln_context *ctx);
/* One span of track from start_ns to end_ns (base_now_ns times); args: JSON object members
 * ("\"invocations\": 64") or NULL. A no-op unless tracing. */
void eng_trace_span(kiln_context *ctx, uint32_t track, const char *cat, const char *name,
                    int64_t start_ns, int64_t end_ns, const char *args);
void eng_trace_flush(kiln_context *ctx);

/* A readable rendering of the kernel AST (KILN_DEBUG=3); snprintf contract. */
size_t eng_kernel_dump(const eng_kernel *k, char *buf, size_t cap);

/* lower.c */
/* The lanes per output of k's kernel (0: one invocation per output); see lower.c. */
uint32_t eng_kernel_group_lanes(const kiln_context *ctx, const eng_kernel *k);
/* The output tile of k's kernel (p->tile_m, tile_n, tile_width; 1 x 1 when untiled). */
void eng_kernel_tile(const kiln_context *ctx, const eng_kernel *k, eng_program *p);
/* The loop passes one invocation of p's kernel runs when the reduction combines count
 * elements per output (the loop budget, lower.c). */
uint64_t eng_kernel_loop_passes(const kiln_context *ctx, const eng_kernel *k, const eng_program *p,
                                int64_t count);
/* Whether p's kernel runs in teams that share loads (p->share_lanes; after the tile and the
 * bounds-check variant are chosen). */
void eng_kernel_share(const kiln_context *ctx, eng_program *p);
/* Lowers k as the variant p describes: p->unchecked omits the bounds check (the dispatch covers
 * exactly the items: outputs / tile, or workgroups of group_lanes lanes), p->group_lanes and
 * the tile as chosen above, the lifted offsets aligned as p->align and p->residue say. used
 * (may be NULL) receives, per parameter, the widest vector access that relies on its
 * alignment (0: none). */
kiln_status eng_kernel_lower(kiln_context *ctx, const eng_kernel *k, const eng_program *p,
                             ir_kernel *ir, uint8_t *used);

/* runtime.c */
kiln_status eng_runtime_init(kiln_context *ctx, const kiln_context_options *opt);
/* Sets parallelism and group_lanes from the context's device (or the interpreter). */
void eng_runtime_tune(kiln_context *ctx);

/* cache.c: compiled kernels on disk. */
kiln_status eng_cache_open(kiln_context *ctx, const kiln_context_options *opt,
                           const vkd_device_info *info, vkd_device_options *dopt);
void eng_cache_close(kiln_context *ctx);
void eng_cache_save_pipelines(kiln_context *ctx);
/* p's variant as asked for (p->align: the widest alignment for every lifted offset).
 * KILN_OK: words (allocated with the context's allocator), p's interface and the alignment
 * its code relies on (p->align) from disk; KILN_ERROR_NOT_FOUND: a miss. */
kiln_status eng_cache_load(kiln_context *ctx, const eng_kernel *k, eng_program *p, uint32_t **words,
                           size_t *word_count);
/* Stores p's code (words; NULL when it is an alias's, stored already) for the variant asked
 * for (asked: the alignment asked for) and for the one compiled (p->align). */
void eng_cache_store(kiln_context *ctx, const eng_kernel *k, const eng_program *p,
                     const uint8_t *asked, const uint32_t *words, size_t word_count);

/* interop.c: a context on the application's Vulkan objects. */
typedef struct eng_external {
    bool timing;
    VkInstance instance;
    uint32_t api_version;
    const vkd_external_device *device;
    const char *profile; /* kiln_context_options.profile */
} eng_external;
kiln_status eng_runtime_init_external(kiln_context *ctx, const eng_external *e);
/* The device profile named by option, else by $KILN_PROFILE (*out NULL: none; an unknown name
 * is KILN_ERROR_INVALID_ARGUMENT, recorded in ctx). */
kiln_status eng_runtime_profile(kiln_context *ctx, const char *option,
                                const struct vkd_profile **out);
/* context.c: creates a context on the default/optioned device, or on external (may be NULL). */
kiln_status eng_context_create(const kiln_context_options *opt, const eng_external *external,
                               kiln_context **out);
void eng_runtime_finish(kiln_context *ctx);
kiln_status eng_storage_allocate(kiln_context *ctx, eng_storage *s);
void eng_storage_free(kiln_context *ctx, eng_storage *s);
/* The storage-buffer descriptors a kernel binds for a storage of `bytes` bytes on the context's
 * device (more than one when it exceeds maxStorageBufferRange and is bound in windows), and
 * the descriptors one kernel may bind (maxPerStageDescriptorStorageBuffers, less one for the
 * parameters when they may not fit in push constants; no limit with the interpreter). A kernel
 * has at most ENG_MAX_BUFFERS storages besides. */
uint32_t eng_storage_descriptors(const kiln_context *ctx, uint64_t bytes);
uint32_t eng_kernel_max_descriptors(const kiln_context *ctx);
/* Frees s, keeping its device buffer in the context's pool for the next storage of its size. */
void eng_storage_release(kiln_context *ctx, eng_storage *s);
kiln_status eng_storage_write(kiln_context *ctx, eng_storage *s, const void *data, uint64_t bytes);
kiln_status eng_storage_read(kiln_context *ctx, eng_storage *s, void *data, uint64_t bytes);
/* The context's out-of-range flag (ctx->bounds_flag), made and zeroed on first use; NULL with
 * the error recorded. */
eng_storage *eng_bounds_flag(kiln_context *ctx);
enum { ENG_BOUNDS_WORDS = 4 };
/* Whether k has a program compiled for it already (eng_program_get would compile none). */
bool eng_program_ready(kiln_context *ctx, const eng_kernel *k);
kiln_status eng_program_get(kiln_context *ctx, const eng_kernel *k, eng_program **out);
typedef struct eng_batch eng_batch;
kiln_status eng_batch_begin(kiln_context *ctx, eng_batch **out);
kiln_status eng_batch_run(kiln_context *ctx, eng_batch *b, const eng_program *p,
                          const eng_kernel *k);
/* Submits and waits; *ran: whether the recorded kernels ran (even if waiting failed). */
kiln_status eng_batch_finish(kiln_context *ctx, eng_batch *b, bool *ran);

/* plan.c: what a realize keeps for the next realize of its graph */
/* Frees what the scheduler learnt about the context's kernel builds. */
void eng_foresight_finish(kiln_context *ctx);
/* Marks the expressions of the kernels it keeps (for eng_collect_expressions). */
void eng_foresight_mark(kiln_context *ctx);
/* The kernels it keeps (kiln_stats live_replays). */
uint64_t eng_foresight_replays(const kiln_context *ctx);
/* realize.c: the schedule and the walk */
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
/* e's value with its bound Variables, or a status recorded in ctx->err as "what: ...". A
 * Variable that was never bound is the caller's mistake: KILN_ERROR_INVALID_ARGUMENT, naming
 * it. Not sticky. */
kiln_status eng_eval(kiln_context *ctx, const char *what, const sym_node *e, int64_t *out);
/* A shape for a message, "(2, n, 3)", into buf (truncated to cap); returns buf. */
const char *eng_shape_render(uint32_t ndim, const sym_node *const *shape, char *buf, size_t cap);
kiln_tensor *eng_full(kiln_context *ctx, ir_type type, uint32_t ndim, const sym_node *const *dims,
                      double value, const sym_node *value_expr);
/* Whether value (truncated) is a value of the integer type; else false and an error for op. */
kiln_tensor *eng_constant(kiln_context *ctx, ir_type type, uint32_t ndim,
                          const sym_node *const *dims, double value, const sym_node *value_expr,
                          bool unique);
bool eng_value_fits(kiln_context *ctx, const char *op, ir_type type, double value);
/* ops.c: PyTorch's promotion of two dtypes (torch.result_type, kiln.h's elementwise rule). */
ir_type eng_promote(ir_type a, ir_type b);
/* ops.c: an elementwise node over already broadcast, already typed sources (at most 3); _of:
 * over nodes read through views (copied) of the given shape. */
kiln_tensor *eng_elementwise_of(kiln_context *ctx, ir_op op, ir_type type, uint32_t ndim,
                                const sym_node *const *shape, uint32_t nsrc, eng_node *const *nodes,
                                const shape_tracker *const *views);
kiln_tensor *eng_elementwise(kiln_context *ctx, ir_op op, ir_type type, uint32_t nsrc,
                             kiln_tensor *const *srcs);
/* A 0-d tensor of type holding the number of elements a reduction over the dims in mask of
 * shape combines (computed in the kernel when the shape is symbolic). */
kiln_tensor *eng_count_tensor(kiln_context *ctx, uint32_t ndim, const sym_node *const *shape,
                              uint32_t mask, ir_type type);
/* An identity node over t (t read lazily through its view, with a plain view of its own: what
 * unfold needs of a padded tensor); differentiable (autograd.c). */
kiln_tensor *eng_identity(kiln_tensor *t);
/* The maximum of t's last dim (removed), recorded so that each row's gradient reaches its
 * first maximum only (torch's max_pool2d; a NaN is the maximum), where kiln_max shares it
 * among the elements equal to the result. call names the public call for messages. */
kiln_tensor *eng_max_first(const char *call, kiln_tensor *t);
/* The index (i32: no 64-bit integers in its kernels) of the maximum of each row of t's last
 * dim (kept, of size 1) that torch's max_pool2d gives the gradient: the first maximum, of
 * NaNs the last (ENG_ARG_POOL; ops.c). */
kiln_tensor *eng_pool_argmax(kiln_tensor *t);
/* A sum over axis of an integer tensor accumulated in i32 (bool and 8-bit integers) or its own
 * dtype, not widened to i64 as kiln_sum's: for sums that cannot overflow (one non-zero term).
 * Records no gradient (integers have none). */
kiln_tensor *eng_sum_unwidened(kiln_tensor *t, int32_t axis);

#endif
