/* The test kernels of tests/spirv, each written once against the builder and built for any
 * target: test_builder validates every one for SPIR-V 1.3 (Vulkan 1.1) and 1.6 (Vulkan 1.3),
 * test_exec runs them on the device. */
#ifndef KILN_TESTS_SPIRV_KERNELS_H
#define KILN_TESTS_SPIRV_KERNELS_H

#include "spv.h"

/* Workgroup-size spec ids of the kernels that take their size from specialization. */
enum { KERN_SPEC_WG_X = 0, KERN_SPEC_WG_Y = 1, KERN_SPEC_WG_Z = 2 };
/* KERN_SPEC's constants: flag (bool, default false), scale (f32, 2.0), offset (i32, 7). */
enum { KERN_SPEC_FLAG = 3, KERN_SPEC_SCALE = 4, KERN_SPEC_OFFSET = 5 };

typedef enum kern_id {
    KERN_VADD,      /* c[i] = a[i] + b[i], i < n (push constant 0), wg size from spec (64) */
    KERN_LOOP_PHI,  /* out[i] = sum_k<m a[i*m+k] (pc: n, m), a loop whose counter and sum are
                       OpPhis */
    KERN_WG_REDUCE, /* out[w] = sum of in over workgroup w (64 invocations, shared memory) */
    KERN_SUBGROUP,  /* out[i] = subgroup sum of in; total[0] += each subgroup's sum (atomic) */
    KERN_SPEC_WG,   /* out[i] = wg_size_x * 1000 + local id, wg size from spec (64) */
    KERN_MATH,      /* float and integer arithmetic, GLSL.std.450, select, conversions, locals */
    KERN_F16,       /* out[i] = f16(f32(in[i] * 2) + 1) over f16 storage */
    KERN_I8,        /* out[i] = i8(i32(in[i]) * 3 - 1) over i8 storage */
    KERN_SPEC,      /* out[i] = (flag ? scale : -1) * i + offset; bool/float/int spec constants */
    KERN_ATOMICS,   /* counters: IAdd (out[i] = old), UMax, CompareExchange, Or, Load */
    KERN_VECTORS,   /* vec4: out[i] = v < c ? v * c + null : v, c a composite constant;
                       sums[i] = the components of out[i] added (extract, construct) */
    KERN_WIDE,      /* 64-bit: w[i] = u64(u[i]) * 0x100000001 + 7; d[i] = f64(u[i]) / 3 */
    KERN_COUNT_
} kern_id;

typedef struct kern_def {
    const char *name;
    void (*build)(spv_builder *b);
    uint32_t bindings;
    uint32_t push_size;
    bool needs_f16, needs_i8, needs_subgroup;
} kern_def;

extern const kern_def kern_defs[KERN_COUNT_];

/* Builds kernel k for version into a new builder and finishes it. Returns the builder (the
 * words live until spv_builder_destroy) or NULL with err set. */
spv_builder *kern_build(kern_id k, uint32_t version, bool maintenance4, const base_allocator *alloc,
                        const uint32_t **words, size_t *count, base_error *err);

#endif
