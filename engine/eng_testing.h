/* Test-only overrides of engine/ (never in kiln_context_options, which is for programs). They
 * drive, on the device at hand, paths that other devices take. Process-wide and not
 * thread-safe: a test sets them, creates its contexts, then clears them; a context reads them
 * once, when it is created. Tests and benchmarks link the engine's module libraries (not the
 * installed libkiln, which exports kiln_ only) and include this header. Every field's zero is
 * "the device's own". */
#ifndef KILN_ENGINE_ENG_TESTING_H
#define KILN_ENGINE_ENG_TESTING_H

#include <kiln/kiln.h>

#include <stdbool.h>
#include <stdint.h>

typedef struct eng_testing {
    /* The Vulkan device neither enables nor reports shaderInt64: kernels that need 64-bit
     * integers are KILN_ERROR_UNSUPPORTED (runtime.c check_types), as on such devices. */
    bool no_int64;
    /* Nor storageBuffer8BitAccess, storageBuffer16BitAccess, shaderInt8 and shaderFloat16
     * (enabled or reported), the rest of the device as it is (shaderInt64 included, unlike the
     * "mobile-low" profile): small types are stored packed in 32-bit words (emit.h
     * storage_8bit), and integer sums of them (64-bit) run too. */
    bool no_small_storage;
    /* Nonzero: the device reports this maxStorageBufferRange (bytes; only a smaller one), so
     * that storages larger than it are bound as several windows (runtime.c storage_windows). */
    uint64_t max_storage_range;
    /* A smaller push-constant limit than the device's (0: the device's). */
    uint32_t max_push_constants;
    /* Specialise kernels on symbolic sizes too (guarded); off, one kernel serves every bound
     * value. */
    bool force_specialization;
    /* The lanes a reduction with few outputs shares its elements among (0: 64 on a GPU, the
     * subgroup size on a CPU; rounded down to a power of two the device allows). */
    uint32_t group_lanes;
    /* Tune kernels as for a discrete GPU whatever the device (its parallelism, group lanes,
     * one elementwise output per invocation, 4 x 4 reduction tiles, row mode only with enough
     * rows). */
    bool gpu_tuning;
    /* Output tiles (outputs per invocation) other than the device's (0: the device's; else
     * rounded down to a power of two, at most 64): of an elementwise kernel; of a reduction
     * whose loads are shared along rows and columns (rows x cols, a matmul's: over 64 outputs
     * it is not tiled); of a reduction whose tile only reads vectors (columns). tile_block_rows:
     * the tile rows of a block of such a matmul-like kernel's consecutive invocations (its
     * columns: 8 tiles on a CPU; 1: no blocks). Applied after gpu_tuning. bench_tuning compares
     * tiles in one process. */
    uint32_t tile_ew, tile_rows, tile_cols, tile_vector_cols;
    uint32_t tile_block_rows;
    /* No loads shared within a subgroup (on a CPU device a matmul's left operand is loaded
     * once per subgroup lane and broadcast to the others). */
    bool unshared_loads;
    /* Vector accesses as vectors of four elements only (on a CPU device with 64-bit integers
     * they move as 64-bit integers, eight at a time where they line up: engine/codegen/emit.c). */
    bool unpaired_vectors;
    /* Every buffer read as a storage buffer (on a CPU device whose driver reads uniform texel
     * buffers, read-only 32-bit operands are texel buffers: engine/codegen/emit.c). */
    bool storage_reads;
    /* Report the progress of a realize's compiles after every kernel compiled ("compiling
     * kernels: i of n"), not only once compiling has taken a second (realize.c). */
    bool progress_always;
    /* Kernel builds learn nothing from earlier realizes (realize.c's foresight): every build
     * that meets a dependency not yet scheduled stops and runs again once it is. */
    bool no_foresight;
    /* No reduction over small windows of another reduction is unrolled (kernel.c
     * build_window): a convolution that only its max pool reads is stored by a kernel of its
     * own and the pool's kernel loads it. */
    bool no_unrolled_windows;
} eng_testing;

/* Sets the overrides of the contexts created from now on (NULL: none). */
void eng_testing_set(const eng_testing *options);
/* The overrides in force (all off unless set). */
const eng_testing *eng_testing_options(void);
/* kiln_context_create with the overrides *testing (NULL: none), which are cleared again after. */
kiln_status eng_testing_context_create(const kiln_context_options *options,
                                       const eng_testing *testing, kiln_context **out);

#endif
