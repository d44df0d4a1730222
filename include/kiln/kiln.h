/* kiln.h: Kiln's public C API, the only header a Kiln user includes.
 *
 * Kiln is a lazy tensor engine over Vulkan. Operations build a graph; nothing runs until a
 * result is needed (kiln_realize, kiln_read); then the graph is cut into kernels, each kernel is
 * written as SPIR-V by Kiln itself and run on the context's device, or on Kiln's reference
 * interpreter when there is none.
 *
 *     kiln_context *ctx;
 *     if (kiln_context_create(NULL, &ctx) != KILN_OK) return 1;
 *     float data[6] = {1, 2, 3, 4, 5, 6};
 *     kiln_tensor *a = kiln_from_data(ctx, KILN_F32, 2, (int64_t[]){2, 3}, data);
 *     kiln_tensor *s = kiln_sum(kiln_relu(kiln_mul(a, a)), 1, (int32_t[]){1}, false);
 *     float out[2];
 *     if (kiln_read(s, out, sizeof out) != KILN_OK)
 *         fprintf(stderr, "%s\n", kiln_context_message(ctx));
 *     kiln_context_destroy(ctx);
 *
 * Errors. Calls that build the graph return NULL on bad input (and for a NULL operand) and
 * record the first such error in the context; it is sticky: kiln_realize, kiln_read and the
 * other calls returning kiln_status report it (and do nothing) until kiln_context_clear_error.
 * A status-returning call that fails by itself returns its status, and kiln_context_message
 * gives its message, without blocking later calls. KILN_OK is 0; kiln_status_string gives the
 * generic message. Each class of caller error has its own status (kiln_base.h lists them:
 * KILN_ERROR_OUT_OF_RANGE, _OUT_OF_BOUNDS, _SHAPE_MISMATCH, _OVERLAP, _NOT_VIEWABLE,
 * _UNBOUND_VARIABLE, _DTYPE_MISMATCH, _INVALID_HANDLE; KILN_ERROR_INVALID_ARGUMENT for the
 * rest), and every message names the public call made and the values involved
 * ("kiln_matmul: a is (2, 3), b is (4, 5): 3 != 4"). No call aborts on caller input, and a
 * failed call leaves every existing tensor intact (a failed realize keeps the results of the
 * kernels that ran: see kiln_realize).
 *
 * Views and copies. Movement ops (reshape, permute, expand, pad, shrink, flip, slice with any
 * step, as_strided, ...) never move data, and kernels read every input through its view's
 * index expression: no input is made contiguous first. Kiln materialises data only where it
 * must: (1) kiln_read of a view that is not its storage in order runs one kernel that packs
 * the view's elements (the caller asked for them packed); (2) kiln_copy_ whose source reads
 * the destination's storage other than element for element materialises the source first,
 * because the kernel would otherwise read elements it has already overwritten; (3) a reshape
 * that PyTorch would copy is a new tensor that does not alias its input, but it is read
 * through a two-view index, not copied; (4) a write realizes first the readers of the
 * overwritten storage built before it (program order), which may run kernels that fusion
 * would otherwise have saved. (5) a write to a tensor whose value another tensor shares
 * (equal computations are one node until written) first copies that value, so that the other
 * tensor keeps it.
 *
 * Identity, as PyTorch's: every creation (from_data, empty, empty_strided, zeros, ones, full,
 * scalar, arange, rand, randn and their _sym forms) and every computation makes a tensor with a
 * storage of its own (lazily: a creation may stay a constant folded into kernels until it is
 * written). Views (movement ops) share their input's storage. Equal computations may share
 * work until one of them is written: a write reaches only the storage it targets, and nothing
 * built after it reads the old contents.
 *
 * Ownership and lifetime. A kiln_tensor * is a handle, not a pointer: kiln_release gives it
 * back, and so does the end of the scope it was made in (kiln_scope_end). A released handle
 * (or one of another or a destroyed context) is detected by every call, which returns NULL or
 * a status (KILN_ERROR_INVALID_HANDLE) with a message naming the call; nothing is freed that
 * anything still uses. A storage, and the computation that produces it, is freed as soon as no
 * live tensor can reach it (directly, through views, or through computations not yet run);
 * kiln_stats' live counts show what is alive. Expressions (kiln_int, kiln_bind, kiln_expr_add,
 * kiln_tensor_size_expr, ...) are handles too, valid: made in a scope, until it ends; made
 * outside any scope, for the context's life if they bind no Variable, else until a Variable
 * they bind is bound outside any scope to another value than its last such binding had (see
 * "integer expressions"); and in every case as long as a live tensor (or a compiled kernel)
 * uses them. Variables live as long as the context. A stale expression handle, or one of
 * another context, is refused like a tensor's. kiln_context_destroy frees everything.
 * Operands of one call must belong to one context (else KILN_ERROR_INVALID_HANDLE).
 *
 * Tensor sizes: a storage (a tensor's elements) is one device allocation, of up to the
 * device's maxMemoryAllocationSize (Vulkan's maintenance3 limit: at least 1 GiB; 2 GiB and more
 * on most devices). A storage larger than maxStorageBufferRange (128 MiB on lavapipe and many
 * mobile GPUs) works in every op: kernels bind it as several windows of one allocation
 * (docs/big_buffers.md). Refused at realize: a storage beyond maxMemoryAllocationSize
 * (KILN_ERROR_LIMIT_EXCEEDED), or beyond the range on a device without
 * shaderStorageBufferArrayDynamicIndexing, or on a device an application created and handed to
 * Kiln (KILN_ERROR_UNSUPPORTED), and one that needs more windows than the device's
 * maxPerStageDescriptorStorageBuffers (KILN_ERROR_LIMIT_EXCEEDED). The interpreter has no such
 * limits (host memory).
 *
 * Thread-safety: a context and everything made from it is used by one thread at a time;
 * distinct contexts are independent. kiln_status_string and kiln_set_log_callback are
 * thread-safe. Contexts of the process on one device with the same validation, allocator and
 * enabled features (a profile's) share one VkInstance and one VkDevice, created by the first
 * and destroyed by the last (docs/gpus.md: a driver that failed otherwise); each keeps its own
 * memory, pipelines and statistics, their submissions take turns on the device's queue, and a
 * context's destruction waits for the queue's work, its sharers' included.
 *
 * Log messages (warnings such as a cache directory that cannot be used, statistics with
 * KILN_DEBUG=1, validation-layer messages) go to the callback of the context whose call logs
 * them (kiln_context_options.log), else to the process-wide one (kiln_set_log_callback, in
 * kiln_base.h), else to stderr. KILN_DEBUG sets which levels are logged.
 *
 * kiln_status and kiln_alloc_fn are defined in kiln_base.h (owned by base/, copied next to
 * this header by the build): every host allocation Kiln makes goes through the allocator
 * given in kiln_context_options.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include "kiln_base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kiln is built with hidden visibility: what this header declares is the library's exported
 * API (docs/packaging.md). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0

/* The version of the library a program runs with, "MAJOR.MINOR.PATCH" (a static string). The
 * KILN_VERSION_* macros are those of the header it was compiled with; the shared library's
 * soname changes with every ABI change (libkiln.so.0.MINOR while MAJOR is 0). */
const char *kiln_version(void);

typedef struct kiln_context kiln_context;
typedef struct kiln_tensor kiln_tensor;
typedef struct kiln_expr kiln_expr; /* an integer expression: a size, a Variable, ... */

/* ---- context ----------------------------------------------------------------------------- */

/* Options of kiln_context_create: zero-initialise the struct ({0}, or NULL for all defaults)
 * and set the fields you need; a zero field takes its default. */
typedef struct kiln_context_options {
    /* The device: NULL uses $KILN_DEVICE, else the default choice (discrete > integrated >
     * virtual > CPU). A decimal index or a case-insensitive name substring selects a Vulkan
     * device; "interp" selects the reference interpreter. Without any Vulkan device the
     * interpreter is used (kiln_context_device_name says so). */
    const char *device;
    /* Turn on the Khronos validation layer (also $KILN_VALIDATION=1): its errors and warnings
     * go to the log. Without the layer installed, kiln_context_create fails with
     * KILN_ERROR_UNSUPPORTED. Ignored by the interpreter. */
    bool validation;
    /* Where compiled kernels persist across runs: NULL uses $KILN_CACHE_DIR, else
     * $XDG_CACHE_HOME/kiln, else ~/.cache/kiln. KILN_CACHE=0 turns the disk cache off; so does
     * a directory that cannot be created or whose name is too long for a path (with a
     * warning in the log: the context is made all the same). */
    const char *cache_dir;
    /* Measure device time with timestamp queries (kiln_stats.device_time_ns). Off by default:
     * a timestamp costs a wait for idle on some drivers (about 0.1 ms per realize on
     * lavapipe). KILN_DEBUG=1 and above turn it on, and so does KILN_TRACE (a timestamp pair
     * per dispatch: docs/observability.md). */
    bool timing;
    /* The allocator of every host allocation the context makes (kiln_alloc_fn in kiln_base.h;
     * NULL: malloc/realloc/free); alloc_user is passed to it. */
    kiln_alloc_fn alloc;
    void *alloc_user;
    /* Receives the messages logged during this context's calls, its creation and destruction
     * included (kiln_log_fn in kiln_base.h: cache warnings, statistics with KILN_DEBUG,
     * validation-layer messages, a failed creation's message). NULL: the process-wide callback
     * (kiln_set_log_callback), else stderr. log_user is passed to it. */
    kiln_log_fn log;
    void *log_user;
    /* See the device through a stricter profile, exactly as if its driver reported the
     * profile's features and limits: NULL uses $KILN_PROFILE, else the device as it is.
     * "mobile-low" (no int64, no 8/16-bit storage, no f16 arithmetic, 128 invocations per
     * workgroup, 128-byte push constants, 128 MiB storage ranges, 4 storage buffers per kernel,
     * no timestamps) and "mobile-mid" (16-bit storage and f16, 256 invocations, 256 MiB
     * ranges); docs/gpus.md lists each profile's values. Every limit in force is
     * min(profile, device); a profile never raises one. An unknown name is
     * KILN_ERROR_INVALID_ARGUMENT (the message lists the profiles); "" or "none" is no profile.
     * Ignored by the interpreter. */
    const char *profile;
} kiln_context_options;

/* Statuses: KILN_ERROR_NOT_FOUND (no device matches: the message lists the Vulkan devices by
 * index and name, and "interp"), KILN_ERROR_INVALID_ARGUMENT (out NULL, an empty cache_dir),
 * KILN_ERROR_OUT_OF_HOST_MEMORY, Vulkan errors. *out is NULL on failure, and the message of a
 * failed creation goes to the log (options->log, else the process-wide callback, else
 * stderr). options may be NULL. */
kiln_status kiln_context_create(const kiln_context_options *options, kiln_context **out);
void kiln_context_destroy(kiln_context *ctx); /* NULL is a no-op */
/* The most recent failure (a sticky graph-building error, or the last failed call). */
kiln_status kiln_context_status(const kiln_context *ctx);
const char *kiln_context_message(const kiln_context *ctx);
void kiln_context_clear_error(kiln_context *ctx);
/* "llvmpipe (LLVM 15.0.6, 256 bits)" or "interpreter". */
const char *kiln_context_device_name(const kiln_context *ctx);
/* The device profile in force (kiln_context_options.profile, $KILN_PROFILE): "mobile-low", ...;
 * NULL for none (and for the interpreter, which profiles do not touch). */
const char *kiln_context_profile(const kiln_context *ctx);

typedef struct kiln_stats {
    uint64_t realizes;
    uint64_t kernels_compiled; /* code generated in this process */
    uint64_t kernels_cached;   /* found in the memory cache */
    uint64_t kernels_tiled;    /* of those generated: several outputs per invocation */
    uint64_t kernels_vector;   /* of those generated: 4-element vector loads or stores */
    uint64_t kernels_octets;   /* of those: 8-element ones too (CPU devices) */
    uint64_t kernels_shared;   /* of those generated: loads shared within a subgroup */
    uint64_t codegen_ns;       /* generating the kernels_compiled: lowering, checks, SPIR-V
                                  emission (not the driver's pipeline, nor the disk cache) */
    uint64_t disk_hits;        /* found in the disk cache (no code generated) */
    uint64_t disk_misses;      /* looked up on disk, then generated */
    uint64_t guard_failures;   /* cached variants skipped because their guard failed */
    uint64_t pipelines_created;
    uint64_t dispatches; /* kernels run (device or interpreter) */
    uint64_t items;      /* of those kernels: the items run (an item is an invocation, or a
                            workgroup of a reduction's lanes; a tiled item computes a tile) */
    uint64_t bytes_uploaded;
    uint64_t bytes_downloaded;
    uint64_t storages_freed; /* storages given back (nothing could read them any more) */
    uint64_t device_time_ns; /* device time of the dispatches, each counted once (with
                                options.timing, KILN_DEBUG or KILN_TRACE) */
    /* What is alive now (not totals): tensor handles, graph nodes, storages and their bytes
     * (device memory, or host memory with the interpreter), freed buffers kept for reuse, and
     * symbolic expression nodes. A loop that releases what it no longer needs keeps them flat. */
    uint64_t live_tensors;
    uint64_t live_nodes;
    uint64_t live_storages;
    uint64_t live_storage_bytes;
    uint64_t pool_bytes;
    uint64_t live_expressions;
    uint64_t kernels_texel;   /* of the kernels generated: operands read as texel buffers (CPU
                                 devices; docs/lavapipe.md) */
    uint64_t kernel_builds;   /* kernels the scheduler built (host work of every realize) */
    uint64_t builds_stopped;  /* of those, builds that stopped at a dependency not yet scheduled
                                 and ran again once it was (a graph realized again, step after
                                 step, schedules those dependencies first: known from the last
                                 time, they cost no build) */
    uint64_t live_plans;      /* graphs whose builds' dependencies the context keeps (now; at
                                 most 8, the least recently realized replaced) */
    uint64_t builds_replayed; /* kernels taken from the last realize of the same graph instead
                                 of built (kernel_builds does not count them) */
    uint64_t live_replays;    /* kernels those plans keep to be taken so (now) */
} kiln_stats;
kiln_stats kiln_context_stats(const kiln_context *ctx);

/* ---- integer expressions and Variables ---------------------------------------------------- */
/* Sizes may be expressions of Variables. A Variable has a name (an identifier) and an
 * inclusive range; bound to a value it can size tensors. Expressions are simplified and
 * hash-consed: equal expressions are the same handle. A NULL ctx gives NULL (kiln_expr_value:
 * KILN_ERROR_INVALID_ARGUMENT), as a NULL operand does.
 *
 * A const kiln_expr * is a handle, like a tensor's. How long one is valid:
 *   - made inside a scope (kiln_scope_begin): until that scope ends;
 *   - made outside any scope and binding no Variable (kiln_int(ctx, 5), arithmetic of unbound
 *     Variables): as long as the context;
 *   - made outside any scope and binding Variables: until one of them is bound outside any
 *     scope to another value than its last binding outside any scope had (binding it to the
 *     same value again changes nothing; bindings inside scopes change nothing outside them);
 *     with more than 64 Variables in a context, also when a Variable whose declaration number
 *     is the same modulo 64 is;
 *   - Variables (kiln_variable): as long as the context;
 *   - and in every case, for as long as a live tensor's shape or view, or a compiled kernel,
 *     uses it (kiln_tensor_size_expr returns the same handle while the tensor lives).
 * So a loop that binds a Variable to a new value every step outside any scope, and releases
 * the step's tensors, runs in constant memory. Every call that takes an expression refuses a
 * stale one, one of another or a destroyed context, or anything not an expression handle:
 * NULL (or the status) and KILN_ERROR_INVALID_HANDLE with a message naming the call; calls that
 * return a tensor or an expression record it as the context's sticky error, kiln_expr_value
 * returns it. */

const kiln_expr *kiln_int(kiln_context *ctx, int64_t value);
const kiln_expr *kiln_variable(kiln_context *ctx, const char *name, int64_t min, int64_t max);
/* The Variable bound to value (value outside the range: NULL and KILN_ERROR_OUT_OF_RANGE).
 * Outside any scope, a value other than the last one supersedes the previous binding: the
 * expressions of it that nothing uses are freed now (their handles stale, above). A kernel
 * pushes one value per Variable: a realize whose kernel would read one Variable bound to two
 * values fails with KILN_ERROR_INVALID_ARGUMENT naming it and both (use two Variables). */
const kiln_expr *kiln_bind(kiln_context *ctx, const kiln_expr *variable, int64_t value);
const kiln_expr *kiln_expr_add(kiln_context *ctx, const kiln_expr *a, const kiln_expr *b);
const kiln_expr *kiln_expr_mul(kiln_context *ctx, const kiln_expr *a, const kiln_expr *b);
/* Floor division and modulo. */
const kiln_expr *kiln_expr_div(kiln_context *ctx, const kiln_expr *a, const kiln_expr *b);
const kiln_expr *kiln_expr_mod(kiln_context *ctx, const kiln_expr *a, const kiln_expr *b);
/* The value of e with its bound Variables. A Variable never bound has no value: wherever one is
 * needed (this call, a query, a realize) that is KILN_ERROR_UNBOUND_VARIABLE, naming it. */
kiln_status kiln_expr_value(kiln_context *ctx, const kiln_expr *e, int64_t *value);

/* ---- tensors ------------------------------------------------------------------------------ */

typedef enum kiln_dtype {
    KILN_F32,
    /* f16, i8, u8 and bool run on every device: without 16-bit (8-bit) storage their buffers
     * are 32-bit words holding the same bytes (docs/gpus.md, "Small types without 8/16-bit
     * storage"). f16 computes in f32, rounded to nearest even after every op. */
    KILN_F16,
    KILN_I32,
    KILN_U32,
    KILN_I8,
    KILN_U8,
    KILN_BOOL, /* one byte per element, 0 or 1 */
    /* 64-bit integers. Kernels that compute with them (KILN_I64 tensors, and the integer sums
     * and products and argmax, which give KILN_I64) need the device's shaderInt64: without it
     * realizing them is KILN_ERROR_UNSUPPORTED, the message naming the call and "no
     * shaderInt64" (Kiln does not emulate 64-bit arithmetic with 32-bit pairs). The
     * interpreter runs them everywhere. */
    KILN_I64,
    KILN_DTYPE_COUNT_
} kiln_dtype;

/* Whether kernels of dtype run on the context's device: every dtype but KILN_I64 runs
 * everywhere (u8, i8, bool and f16 are stored packed in 32-bit words on devices without
 * 8/16-bit storage); KILN_I64 needs shaderInt64 (without it, realizing such a kernel is
 * KILN_ERROR_UNSUPPORTED). false for a NULL context or a dtype out of range. */
bool kiln_dtype_supported(const kiln_context *ctx, kiln_dtype dtype);

enum { KILN_MAX_DIMS = 16 };

size_t kiln_dtype_size(kiln_dtype dtype);
const char *kiln_dtype_name(kiln_dtype dtype);

/* Creation. Shapes are ndim sizes >= 0 whose product (a 0 counted as 1: the strides) is an
 * int64 (else KILN_ERROR_OVERFLOW); the _sym forms take expressions. data is copied
 * (row-major, numel * kiln_dtype_size bytes). A fill value (kiln_full, kiln_scalar,
 * kiln_fill_, the _scalar ops) converts as a cast: toward zero for an integer dtype, where
 * NaN, an infinity or a value outside the dtype's range is KILN_ERROR_OUT_OF_RANGE (as
 * torch.full); a negative size is KILN_ERROR_OUT_OF_RANGE; for bool, true when nonzero, NaN
 * included (as Python's bool(float('nan')) and torch.full(..., nan, dtype=torch.bool)). */
kiln_tensor *kiln_from_data(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                            const int64_t *shape, const void *data);
kiln_tensor *kiln_empty(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim, const int64_t *shape);
kiln_tensor *kiln_full(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim, const int64_t *shape,
                       double value);
kiln_tensor *kiln_full_sym(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                           const kiln_expr *const *shape, double value);
kiln_tensor *kiln_zeros(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim, const int64_t *shape);
kiln_tensor *kiln_ones(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim, const int64_t *shape);
kiln_tensor *kiln_scalar(kiln_context *ctx, kiln_dtype dtype, double value); /* 0-d */
/* [start, stop) by step, as torch.arange (a 1-d tensor of ceil((stop - start) / step)).
 * Non-finite bounds and a zero step are KILN_ERROR_INVALID_ARGUMENT, for an integer dtype a
 * value it cannot hold KILN_ERROR_OUT_OF_RANGE, each naming the values. */
kiln_tensor *kiln_arange(kiln_context *ctx, kiln_dtype dtype, double start, double stop,
                         double step);
/* Symbolic forms: sizes (and values) are expressions of bound Variables. One kernel serves
 * every value a Variable is bound to. */
kiln_tensor *kiln_empty_sym(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                            const kiln_expr *const *shape);
kiln_tensor *kiln_rand_sym(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                           const kiln_expr *const *shape, uint64_t seed);
kiln_tensor *kiln_randn_sym(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                            const kiln_expr *const *shape, uint64_t seed);
/* 0, 1, ..., stop - 1. */
kiln_tensor *kiln_arange_sym(kiln_context *ctx, kiln_dtype dtype, const kiln_expr *stop);
/* A 0-d tensor holding the value of an expression (computed in the kernel, from the pushed
 * values of its Variables). */
kiln_tensor *kiln_scalar_expr(kiln_context *ctx, kiln_dtype dtype, const kiln_expr *value);
/* Uniform [0, 1) and standard normal floats from a seed: the same seed gives the same numbers
 * on every device and in the interpreter, bit for bit (randn: up to the device's log and cos).
 * The generator is Philox4x32-10 (Salmon et al., SC 2011; cuRAND's, JAX's), counter-based:
 * element i (row-major flat index) is word 0 of the block at counter (i mod 2^32, i / 2^32, 0,
 * 0) under the key (seed mod 2^32, seed / 2^32), as (word >> 8) * 2^-24 (24 random bits, a
 * multiple of 2^-24 below 1); randn is Box-Muller, sqrt(-2 ln(1 - u1)) cos(2 pi u2), of words
 * 0 and 1 (u1 is kiln_rand's number). A 16-bit dtype rounds the f32 value. The seed is a kernel
 * parameter, pushed like a bound Variable: a new seed every step compiles nothing new. Devices
 * need no 64-bit integers for it (32-bit multiplies, high and low halves). */
kiln_tensor *kiln_rand(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim, const int64_t *shape,
                       uint64_t seed);
kiln_tensor *kiln_randn(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim, const int64_t *shape,
                        uint64_t seed);

/* torch.empty_strided: uninitialised storage of exactly the elements the view needs (the
 * highest addressed element + 1; 0 when a size is 0), and the tensor reports these strides
 * back. Negative strides are accepted (NumPy's generality) when the lowest element is >= 0. */
kiln_tensor *kiln_empty_strided(kiln_context *ctx, kiln_dtype dtype, uint32_t ndim,
                                const int64_t *shape, const int64_t *strides);
/* torch.as_strided: a view of t's storage with exactly these sizes, strides (negative, zero
 * and overlapping allowed) and absolute storage offset. Rejected (NULL and
 * KILN_ERROR_OUT_OF_BOUNDS) when the offset is negative or, for numel > 0, the lowest or
 * highest addressed element lies outside the storage. */
kiln_tensor *kiln_as_strided(kiln_tensor *t, uint32_t ndim, const int64_t *shape,
                             const int64_t *strides, int64_t offset);

/* Writes through views. dst's storage is written in place (lazily, in program order: what was
 * built before reads the old values, what is built after the new ones). src broadcasts to
 * dst's shape and is converted to dst's dtype. When src reads the storage dst writes, the
 * result is as if src were read completely first (NumPy's rule); a src that reads dst's
 * storage other than element for element is then materialised first, the one case that costs
 * a temporary. Statuses (the call's own: a refused write blocks nothing later):
 * KILN_ERROR_OVERLAP for a dst in which two elements share (or may share) a storage element,
 * KILN_ERROR_NOT_VIEWABLE for a dst that is padded or no view of one storage (a reshape that
 * copies), KILN_ERROR_SHAPE_MISMATCH for a src that does not broadcast to dst,
 * KILN_ERROR_OUT_OF_RANGE for a kiln_fill_ value dst's dtype cannot hold,
 * KILN_ERROR_INVALID_HANDLE for a released handle or one of another context. */
kiln_status kiln_copy_(kiln_tensor *dst, kiln_tensor *src);
/* dst op= src, through dst's view (element for element: no temporary). */
kiln_status kiln_add_(kiln_tensor *dst, kiln_tensor *src);
kiln_status kiln_mul_(kiln_tensor *dst, kiln_tensor *src);
kiln_status kiln_fill_(kiln_tensor *dst, double value);

/* Queries (sizes, strides and offset evaluated with the bound Variables; counts in elements). */
kiln_context *kiln_tensor_context(const kiln_tensor *t);
uint32_t kiln_tensor_ndim(const kiln_tensor *t);
kiln_dtype kiln_tensor_dtype(const kiln_tensor *t);
kiln_status kiln_tensor_shape(const kiln_tensor *t, int64_t *shape);
kiln_status kiln_tensor_numel(const kiln_tensor *t, int64_t *numel);
const kiln_expr *kiln_tensor_size_expr(const kiln_tensor *t, uint32_t dim);
/* The strides and storage offset PyTorch would report for the same calls (NumPy's where
 * PyTorch refuses negative strides), in elements; a tensor that is not a view of its storage
 * (a reshape no single view expresses) reports the strides of a contiguous tensor. */
kiln_status kiln_tensor_strides(const kiln_tensor *t, int64_t *strides);
kiln_status kiln_tensor_offset(const kiln_tensor *t, int64_t *offset);
/* Elements of the storage the tensor views. */
kiln_status kiln_tensor_storage_size(const kiln_tensor *t, int64_t *elements);

/* Movement ops: views of the same storage, no data moves. dims may be negative (from the
 * end): a dim out of range is KILN_ERROR_OUT_OF_RANGE; an index, narrow, shrink or unfold
 * window beyond a size KILN_ERROR_OUT_OF_BOUNDS; sizes that do not fit (expand of a size other
 * than 1, a reshape to another element count, squeeze of a dim whose size is not 1)
 * KILN_ERROR_SHAPE_MISMATCH. */
kiln_tensor *kiln_reshape(kiln_tensor *t, uint32_t ndim, const int64_t *shape); /* one -1 ok */
kiln_tensor *kiln_reshape_sym(kiln_tensor *t, uint32_t ndim, const kiln_expr *const *shape);
kiln_tensor *kiln_permute(kiln_tensor *t, const int32_t *dims);
kiln_tensor *kiln_transpose(kiln_tensor *t, int32_t dim0, int32_t dim1);
kiln_tensor *kiln_expand(kiln_tensor *t, uint32_t ndim, const int64_t *shape); /* -1 keeps */
kiln_tensor *kiln_expand_sym(kiln_tensor *t, uint32_t ndim, const kiln_expr *const *shape);
/* pad[2d], pad[2d+1]: elements before and after along dim d (zeros). */
kiln_tensor *kiln_pad(kiln_tensor *t, const int64_t *pad);
/* Keep [begin[d], end[d]) of every dim. */
kiln_tensor *kiln_shrink(kiln_tensor *t, const int64_t *begin, const int64_t *end);
kiln_tensor *kiln_shrink_sym(kiln_tensor *t, const kiln_expr *const *begin,
                             const kiln_expr *const *end);
kiln_tensor *kiln_pad_sym(kiln_tensor *t, const kiln_expr *const *pad);
kiln_tensor *kiln_flip(kiln_tensor *t, int32_t dim);
/* t[start:stop:step] along dim with Python's rules (INT64_MIN/INT64_MAX for omitted bounds;
 * negative steps as NumPy). */
kiln_tensor *kiln_slice(kiln_tensor *t, int32_t dim, int64_t start, int64_t stop, int64_t step);
kiln_tensor *kiln_unsqueeze(kiln_tensor *t, int32_t dim);
kiln_tensor *kiln_squeeze(kiln_tensor *t, int32_t dim);
kiln_tensor *kiln_narrow(kiln_tensor *t, int32_t dim, int64_t start, int64_t length);
kiln_tensor *kiln_narrow_sym(kiln_tensor *t, int32_t dim, const kiln_expr *start,
                             const kiln_expr *length);
/* t[start:stop:step] along dim with expression bounds (0 <= start <= stop <= size, step >= 1). */
kiln_tensor *kiln_slice_sym(kiln_tensor *t, int32_t dim, const kiln_expr *start,
                            const kiln_expr *stop, int64_t step);
kiln_tensor *kiln_select(kiln_tensor *t, int32_t dim, int64_t index);
kiln_tensor *kiln_diagonal(kiln_tensor *t, int64_t offset, int32_t dim1, int32_t dim2);
kiln_tensor *kiln_unfold(kiln_tensor *t, int32_t dim, int64_t size, int64_t step);

/* Elementwise ops with broadcasting and PyTorch's type promotion (torch.result_type): bool <
 * integers < f16 < f32; a float operand's type wins (of two floats the wider); bool gives way to
 * any other type; integers of one signedness give the wider; integers of mixed signedness give
 * the narrowest signed type holding both: u8 with i32 is i32, u8 with i64 i64, u32 (which
 * PyTorch does not promote: NumPy's rule) with any signed integer i64, and u8 with i8 i32
 * (PyTorch's int16, which Kiln lacks). Shapes that do not broadcast
 * are KILN_ERROR_SHAPE_MISMATCH, naming both shapes; an op not defined for a dtype (kiln_sub
 * and kiln_neg of bools, ...) KILN_ERROR_DTYPE_MISMATCH. */
kiln_tensor *kiln_add(kiln_tensor *a, kiln_tensor *b);
kiln_tensor *kiln_sub(kiln_tensor *a, kiln_tensor *b);
kiln_tensor *kiln_mul(kiln_tensor *a, kiln_tensor *b);
kiln_tensor *kiln_div(kiln_tensor *a, kiln_tensor *b); /* true division: floats */
kiln_tensor *kiln_pow(kiln_tensor *a, kiln_tensor *b);
kiln_tensor *kiln_maximum(kiln_tensor *a, kiln_tensor *b);
kiln_tensor *kiln_minimum(kiln_tensor *a, kiln_tensor *b);
kiln_tensor *kiln_lt(kiln_tensor *a, kiln_tensor *b);
kiln_tensor *kiln_le(kiln_tensor *a, kiln_tensor *b);
kiln_tensor *kiln_gt(kiln_tensor *a, kiln_tensor *b);
kiln_tensor *kiln_ge(kiln_tensor *a, kiln_tensor *b);
kiln_tensor *kiln_eq(kiln_tensor *a, kiln_tensor *b);
kiln_tensor *kiln_ne(kiln_tensor *a, kiln_tensor *b);
kiln_tensor *kiln_where(kiln_tensor *cond, kiln_tensor *a, kiln_tensor *b);
kiln_tensor *kiln_neg(kiln_tensor *t);
kiln_tensor *kiln_abs(kiln_tensor *t);
/* Functions of floats (integers are cast to f32 first). Special values are C's and x86-64
 * NumPy's on every device: NaN gives NaN; exp(-inf) = 0, exp(inf) = inf; log(+-0) = -inf,
 * log(x < 0) = NaN; sqrt(-0) = -0; rsqrt(+-0) = +-inf, rsqrt(inf) = 0; sin and cos of +-inf
 * are NaN; tanh(+-inf) = +-1; sigmoid(-inf) = 0; zeros keep their sign where C's do.
 * pow follows C's pow: pow(x, +-0) and pow(1, y) are 1 even for NaN; pow(+-0, y < 0) = inf
 * (-inf for -0 and an odd integer y); pow(+-inf, y) = inf for y > 0, 0 for y < 0 (signed
 * for -inf and odd y); pow(x, +-inf) for |x| < 1 is 0 or inf, for x = -1 it is 1;
 * pow(x < 0, fractional y) = NaN. Division: x / +-0 is an infinity of the signs' product,
 * 0 / 0 NaN. Finite results may differ from NumPy's by rounding (a device's exp, log, pow, sin,
 * ... are not correctly rounded); lavapipe's sin and cos lose precision beyond |x| ~ 1e8. */
kiln_tensor *kiln_exp(kiln_tensor *t);
kiln_tensor *kiln_log(kiln_tensor *t);
kiln_tensor *kiln_sqrt(kiln_tensor *t);
kiln_tensor *kiln_rsqrt(kiln_tensor *t);
kiln_tensor *kiln_sin(kiln_tensor *t);
kiln_tensor *kiln_cos(kiln_tensor *t);
kiln_tensor *kiln_tanh(kiln_tensor *t);
kiln_tensor *kiln_sigmoid(kiln_tensor *t);
kiln_tensor *kiln_relu(kiln_tensor *t);
/* Casts follow PyTorch: float to integer truncates toward zero, narrowing integers wrap.
 * Floats out of an integer type's range give x86-64 NumPy's results (of its vector loop; its
 * scalar loop differs for u32), on every device: to i32, NaN, infinities and values outside
 * [-2^31, 2^31) give INT32_MIN (0x80000000); to i8 and u8, the low 8 bits of that i32 (NaN,
 * infinities and values beyond 2^31 give 0, 300.0 gives 44); to u32, values in [2^31, 2^32)
 * convert, larger ones and +inf give 0, smaller ones the i32 cast's bits (-1.5 gives 2^32 - 1;
 * NaN, -inf and values below -2^31 give 2^31); to i64, NaN, infinities and values outside
 * [-2^63, 2^63) give INT64_MIN. i64 to f32 rounds to nearest once. To bool: x != 0, so NaN is
 * true. */
kiln_tensor *kiln_cast(kiln_tensor *t, kiln_dtype dtype);
/* Shorthands with a scalar operand typed as PyTorch types a Python number (Kiln takes a double:
 * its value decides): a value with a fraction part, NaN or an infinity is a Python float (an
 * integer or bool tensor gives f32, a float tensor keeps its dtype); an integral value is a
 * Python int (a bool tensor gives i64, any other keeps its dtype, and the value must fit it:
 * else KILN_ERROR_OUT_OF_RANGE). */
kiln_tensor *kiln_add_scalar(kiln_tensor *t, double value);
kiln_tensor *kiln_mul_scalar(kiln_tensor *t, double value);

/* Reductions over naxes dims (naxes 0: every dim), keepdim as PyTorch. kiln_sum and kiln_prod
 * of integers (bool included) accumulate in 64 bits and give KILN_I64, as PyTorch's (no
 * wrap-around at 2^31; a device without shaderInt64 refuses them: see KILN_I64); of floats the
 * dtype (f16 accumulates in f32). kiln_max and kiln_min keep the dtype. An axis out of range is
 * KILN_ERROR_OUT_OF_RANGE (softmax's dim too); kiln_mean, kiln_var and kiln_std of an integer
 * tensor KILN_ERROR_DTYPE_MISMATCH. */
kiln_tensor *kiln_sum(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim);
kiln_tensor *kiln_prod(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim);
kiln_tensor *kiln_max(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim);
kiln_tensor *kiln_min(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim);
kiln_tensor *kiln_mean(kiln_tensor *t, uint32_t naxes, const int32_t *axes, bool keepdim);
/* correction: 1 for the unbiased estimate (torch's default), 0 for the population. */
kiln_tensor *kiln_var(kiln_tensor *t, uint32_t naxes, const int32_t *axes, double correction,
                      bool keepdim);
kiln_tensor *kiln_std(kiln_tensor *t, uint32_t naxes, const int32_t *axes, double correction,
                      bool keepdim);
kiln_tensor *kiln_softmax(kiln_tensor *t, int32_t dim);
kiln_tensor *kiln_log_softmax(kiln_tensor *t, int32_t dim);
/* torch.argmax(dim, keepdim): the first index of the maximum (a NaN is the maximum), as
 * KILN_I64 (as PyTorch). */
kiln_tensor *kiln_argmax(kiln_tensor *t, int32_t dim, bool keepdim);
/* torch.matmul for ndim >= 1 operands, batched and broadcasting, in the operands' promoted
 * dtype (i32 @ i32 is i32, wrapping; bool, i8 and u8 give i32, their products and sums taken
 * in i32: u8 [3] @ [255] is 765). Inner dims that differ (or a 0-d operand) are
 * KILN_ERROR_SHAPE_MISMATCH, naming both shapes. */
kiln_tensor *kiln_matmul(kiln_tensor *a, kiln_tensor *b);
/* A lazy kernel boundary (tinygrad's .contiguous()): a new tensor with t's values in a
 * row-major storage of its own, computed by a kernel of its own when something that reads it is
 * realized; its readers load it rather than recompute t's expression (an expensive value read
 * many times, a view read inside a reduction). Nothing runs now. */
kiln_tensor *kiln_contiguous(kiln_tensor *t);
/* A 2-d convolution (no bias, one group): x (N, C, H, W), w (O, C, KH, KW) -> (N, O, OH, OW)
 * with OH = (H + 2 padding - KH) / stride + 1, built from movement ops and one reduction
 * (floats: kiln_conv2d_ex; integers in the dtype kiln_matmul gives them). */
kiln_tensor *kiln_conv2d(kiln_tensor *x, kiln_tensor *w, int64_t stride, int64_t padding);

/* ---- neural-network ops ----------------------------------------------------------------- */

/* kiln_conv2d_ex: torch.nn.functional.conv2d. x (N, C, H, W), w (O, C / groups, KH, KW), bias
 * (O) or NULL -> (N, O, OH, OW), OH = (H + 2 padding[0] - dilation[0] (KH - 1) - 1) / stride[0]
 * + 1 (OW likewise). options NULL, or zero fields, take torch's defaults (stride 1, padding 0,
 * dilation 1, groups 1). */
typedef struct kiln_conv2d_options {
    int64_t stride[2];
    int64_t padding[2];
    int64_t dilation[2];
    int64_t groups;
} kiln_conv2d_options;
kiln_tensor *kiln_conv2d_ex(kiln_tensor *x, kiln_tensor *w, kiln_tensor *bias,
                            const kiln_conv2d_options *options);
/* torch's max_pool2d and avg_pool2d (count_include_pad, as torch's default) over (N, C, H, W)
 * or (C, H, W): square windows of kernel, stride (0: kernel) and zero padding (max_pool2d pads
 * with -inf). max_pool2d's gradient goes to the first maximum of each window, as torch's. */
kiln_tensor *kiln_max_pool2d(kiln_tensor *x, int64_t kernel, int64_t stride, int64_t padding);
kiln_tensor *kiln_avg_pool2d(kiln_tensor *x, int64_t kernel, int64_t stride, int64_t padding);
/* torch.clamp: min and max bounds (NAN: no bound on that side); the gradient passes where
 * min <= x <= max. */
kiln_tensor *kiln_clamp(kiln_tensor *t, double min, double max);
/* torch.gather(t, dim, index): index (I32 or I64) has t's number of dims; out[i][j] =
 * t[index[i][j]][j] for dim 0, and so on. An index outside [-size, size) gives 0 (it never
 * reads outside t). */
kiln_tensor *kiln_gather(kiln_tensor *t, int32_t dim, kiln_tensor *index);
/* torch.nn.functional.one_hot: index (integer) -> index's shape + (classes), in dtype. */
kiln_tensor *kiln_one_hot(kiln_tensor *index, int64_t classes, kiln_dtype dtype);
/* Losses with torch's mean reduction: cross_entropy of logits (N, C) and integer class labels
 * (N) (log_softmax based), mse_loss of two tensors that broadcast. */
kiln_tensor *kiln_cross_entropy(kiln_tensor *logits, kiln_tensor *labels);
kiln_tensor *kiln_mse_loss(kiln_tensor *a, kiln_tensor *b);
/* Inverted dropout (torch's training mode): each element is zeroed with probability p and the
 * others scaled by 1 / (1 - p); the mask comes from the counter-based generator (kiln_rand's)
 * with seed. The seed is a kernel parameter: a new seed every step compiles nothing new.
 * Exactly where(u >= p, t / (1 - p), 0) with u = kiln_rand(f32, t's shape, seed) and p and
 * 1 - p rounded to f32 and to t's dtype; built of those public ops, so autograd's gradient is
 * the mask / (1 - p). t keeps its (float) dtype; p must be in [0, 1) (else
 * KILN_ERROR_OUT_OF_RANGE naming it); p = 0 gives t's values in a handle of its own; an
 * integer or bool t is KILN_ERROR_DTYPE_MISMATCH. */
kiln_tensor *kiln_dropout(kiln_tensor *t, double p, uint64_t seed);

/* ---- transformer ops ---------------------------------------------------------------------- */

/* torch.index_select: the rows (along dim) of t that index (a 1-d I32 or I64 tensor) names, in
 * index's order (an embedding lookup). An index outside [0, size) never touches memory outside
 * t: its row reads as zeros and the realize that ran the kernel reports
 * KILN_ERROR_OUT_OF_BOUNDS naming the call (a flag the kernel sets, as torch's device asserts). */
kiln_tensor *kiln_index_select(kiln_tensor *t, int32_t dim, kiln_tensor *index);
/* torch.cat and torch.stack of count tensors (one dtype after promotion; sizes equal but along
 * dim for cat). The kernel reads every input where it is: nothing is copied first (each input
 * is padded to the full size and the padded inputs are added, so a float -0 comes back +0).
 * count 0 or tensors NULL: NULL with nothing recorded (no context to record it in). */
kiln_tensor *kiln_cat(uint32_t count, kiln_tensor *const *tensors, int32_t dim);
kiln_tensor *kiln_stack(uint32_t count, kiln_tensor *const *tensors, int32_t dim);
/* torch's layer_norm and rms_norm over the last ndims dims (biased variance), then weight and
 * bias (each may be NULL) of those dims' shape and x's dtype. x floating (f16 computes in
 * f32), 1 <= ndims <= x's dims, eps finite and >= 0 (else KILN_ERROR_OUT_OF_RANGE). */
kiln_tensor *kiln_layer_norm(kiln_tensor *x, uint32_t ndims, kiln_tensor *weight, kiln_tensor *bias,
                             double eps);
kiln_tensor *kiln_rms_norm(kiln_tensor *x, uint32_t ndims, kiln_tensor *weight, double eps);
/* erf (integers give f32; absolute error ~1.5e-7 in f32); torch's gelu (exact, or its tanh
 * approximation) and silu, of floating tensors (else KILN_ERROR_DTYPE_MISMATCH). */
kiln_tensor *kiln_erf(kiln_tensor *t);
kiln_tensor *kiln_gelu(kiln_tensor *t, bool tanh_approximation);
kiln_tensor *kiln_silu(kiln_tensor *t);
/* torch.triu/tril over the last two dims (elements below/above the diagonal-th diagonal zeroed). */
kiln_tensor *kiln_triu(kiln_tensor *t, int64_t diagonal);
kiln_tensor *kiln_tril(kiln_tensor *t, int64_t diagonal);
/* An additive causal attention mask of shape (rows, cols) in dtype: element (i, j) is 0 where j
 * <= i + cols - rows (a query sees the keys up to its own position, the first cols - rows keys
 * being a cache of earlier positions), else -inf. Sizes may be symbolic. */
kiln_tensor *kiln_causal_mask(kiln_context *ctx, kiln_dtype dtype, const kiln_expr *rows,
                              const kiln_expr *cols);
/* torch.cumsum along dim (integers accumulate in i64, as torch). */
kiln_tensor *kiln_cumsum(kiln_tensor *t, int32_t dim);
/* torch.topk along dim: the k largest (or smallest) values, sorted, and their indices (I64);
 * ties: the lower index first; NaN counts as the largest value in both modes. k outside [0,
 * size] (the dim's smallest size when symbolic) is KILN_ERROR_OUT_OF_RANGE, a bool t
 * KILN_ERROR_DTYPE_MISMATCH; on failure both results are NULL. */
kiln_status kiln_topk(kiln_tensor *t, int64_t k, int32_t dim, bool largest, kiln_tensor **values,
                      kiln_tensor **indices);
/* One sample per row of probs (..., V) (non-negative weights, not necessarily normalized) from
 * the counter-based generator with seed (a kernel parameter): (...) I64 indices. A zero weight
 * is never drawn; a row of zeros gives V - 1 (torch refuses it; Kiln does not look at the
 * values before the kernel runs), and negative or NaN weights give unspecified indices. */
kiln_tensor *kiln_multinomial(kiln_tensor *probs, uint64_t seed);
/* where with a scalar: kiln_where_scalar(cond, a, b) is where(cond, a, b) with b a number;
 * kiln_masked_fill(t, mask, value) is where(mask, value, t) (torch.masked_fill). */
kiln_tensor *kiln_where_scalar(kiln_tensor *cond, kiln_tensor *a, double b);
kiln_tensor *kiln_masked_fill(kiln_tensor *t, kiln_tensor *mask, double value);
/* torch.view: a reshape that never copies (KILN_ERROR_NOT_VIEWABLE when the strides do not
 * allow it, as torch's view refuses), and whether t is contiguous (row-major, dense, offset
 * free of gaps: torch.is_contiguous). */
kiln_tensor *kiln_view(kiln_tensor *t, uint32_t ndim, const int64_t *shape);
kiln_tensor *kiln_view_sym(kiln_tensor *t, uint32_t ndim, const kiln_expr *const *shape);
bool kiln_is_contiguous(kiln_tensor *t);

/* ---- automatic differentiation ------------------------------------------------------------ */

/* Reverse mode over the lazy graph (docs/autograd.md). kiln_requires_grad_ marks t (a floating
 * dtype, else KILN_ERROR_DTYPE_MISMATCH) as a leaf whose gradient kiln_grad can compute, as
 * torch's requires_grad_: every op reading it, and what is computed from those, records how
 * to differentiate itself. requires false drops the mark, or a non-leaf's history (torch's
 * detach_). The mark belongs to the handle. */
kiln_status kiln_requires_grad_(kiln_tensor *t, bool requires);
bool kiln_requires_grad(kiln_tensor *t);
/* A new handle of t's storage and view without history (torch.detach). */
kiln_tensor *kiln_detach(kiln_tensor *t);
/* The gradients of loss (one element of a floating dtype) with respect to inputs[0..count):
 * grads[i] receives a new lazy tensor (of the current scope) of inputs[i]'s shape and dtype.
 * Nothing is realized: realizing the gradients (or an optimizer's update built on them) runs
 * the backward pass in the same schedule as anything else. Contributions along several paths
 * are summed; an input the loss does not depend on gets zeros; nothing is built for tensors
 * not asked about. KILN_ERROR_MODIFIED when a value the backward pass needs was written in
 * place (kiln_copy_, kiln_add_, ...) after the op that read it, or when a tensor with history
 * was overwritten before an op read it: Kiln never returns a gradient of other values than
 * the ones used. On failure every grads[i] is NULL. */
kiln_status kiln_grad(kiln_tensor *loss, uint32_t count, kiln_tensor *const *inputs,
                      kiln_tensor **grads);

/* ---- optimizers --------------------------------------------------------------------------- */

/* Optimizers update parameters in place (lazy writes, like kiln_copy_): one realize of the
 * parameters then runs forward, backward and update together. Their state (momentum buffers,
 * Adam's moments, the step count) is made once, on the device; the step count and the
 * learning rate are device values, so no step compiles anything the first did not. Formulas
 * and defaults are torch.optim's. */
typedef struct kiln_optimizer kiln_optimizer;
typedef struct kiln_sgd_options {
    double lr; /* required: > 0 */
    double momentum, dampening, weight_decay;
    bool nesterov; /* needs momentum > 0 and dampening 0 */
} kiln_sgd_options;
typedef struct kiln_adam_options {
    double lr, beta1, beta2, eps, weight_decay;
    bool decoupled_weight_decay; /* AdamW */
} kiln_adam_options;
/* torch's defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0 (AdamW's 1e-2). */
kiln_adam_options kiln_adam_defaults(void);
kiln_adam_options kiln_adamw_defaults(void);
/* params: floating tensors that are plain views of their storage (they are written); the
 * optimizer holds handles of its own (the caller may release its handles). */
kiln_optimizer *kiln_sgd(kiln_context *ctx, uint32_t count, kiln_tensor *const *params,
                         const kiln_sgd_options *options);
kiln_optimizer *kiln_adam(kiln_context *ctx, uint32_t count, kiln_tensor *const *params,
                          const kiln_adam_options *options);
/* One update from grads[0..count) (the gradients of the params in order, e.g. kiln_grad's).
 * Every gradient is checked (handle, shape) before anything is written: a refused step
 * changes nothing (so is a step past the 2^31 - 1th refused: KILN_ERROR_OUT_OF_RANGE).
 * Running out of host memory part-way may leave the first parameters' updates recorded and
 * the others not (the status says so). The step count is the Variable optimizer_step in
 * [1, 2^31 - 1] (a program's own Variable of that name must have that range). */
kiln_status kiln_optimizer_step(kiln_optimizer *opt, kiln_tensor *const *grads);
/* Changes the learning rate from the next step on (a device value: nothing recompiles). */
kiln_status kiln_optimizer_set_lr(kiln_optimizer *opt, double lr);
void kiln_optimizer_destroy(kiln_optimizer *opt); /* NULL is a no-op */

/* Scopes: memory for loops. Every tensor handle (and expression) belongs to the innermost scope
 * open when it was made. kiln_scope_end ends the innermost scope: it releases the scope's
 * handles except the keep_count tensors listed (they join the enclosing scope), frees its
 * expressions, and so frees whatever only they held. keep may list handles of outer scopes
 * (they stay where they are); a released handle, a handle of another context, or keep NULL
 * with keep_count > 0 refuses the call (nothing is released). A loop that replaces its state
 * releases the old state itself, inside or outside the scope:
 *
 *     for (int step = 0; step < steps; step++) {
 *         kiln_scope_begin(ctx);
 *         kiln_tensor *next = kiln_add(state, kiln_mul_scalar(grad(state), -lr));
 *         kiln_realize(next);
 *         kiln_release(state);             // state's storage is freed: nothing needs it
 *         kiln_scope_end(ctx, 1, &next);   // the step's other tensors and expressions too
 *         state = next;
 *     }
 *
 * A loop that updates parameters in place (kiln_add_ and the like) needs no keep list. Such
 * loops hold every live count and all memory flat from their second step on; a Variable bound
 * to a new value every step needs the scope (the bound expressions are freed at its end). */
void kiln_scope_begin(kiln_context *ctx);
/* Releases t: the handle may not be used again (a later use is an error, detected without
 * touching freed memory); its view's storage and computation are freed once no other tensor
 * needs them. NULL is a no-op; releasing a released handle is KILN_ERROR_INVALID_HANDLE. */
kiln_status kiln_release(kiln_tensor *t);
kiln_status kiln_scope_end(kiln_context *ctx, uint32_t keep_count, kiln_tensor *const *keep);

/* Realization and read-back. kiln_realize_many realizes any number of tensors in one
 * schedule. A graph of any depth realizes (scheduling uses no recursion on it). When a realize
 * fails part-way, the kernels that ran keep their results (a write that ran is applied once and
 * never again) and its message says which kernels ran and which did not; the others run at the
 * next realize that needs them. A size or index whose Variable was never bound is
 * KILN_ERROR_UNBOUND_VARIABLE, naming it. */
kiln_status kiln_realize(kiln_tensor *t);
kiln_status kiln_realize_many(kiln_context *ctx, uint32_t count, kiln_tensor *const *tensors);
/* Copies the tensor's elements in logical (row-major) order into dst, which holds bytes >=
 * numel * kiln_dtype_size. Realizes what is needed. */
kiln_status kiln_read(kiln_tensor *t, void *dst, size_t bytes);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
