/* Emission of kernel IR as a SPIR-V compute module (engine/ -> spirv/). */
#ifndef KILN_ENGINE_EMIT_H
#define KILN_ENGINE_EMIT_H

#include "ir.h"
#include "spv.h"

enum { EMIT_MAX_PARAMS = 32 };

typedef struct emit_options {
    uint32_t spirv_version;  /* from vkd_caps.spirv_version */
    bool maintenance4;       /* LocalSizeId may be used below SPIR-V 1.6 */
    uint32_t workgroup_size; /* default x size of spec constant 0 (0: 64); a group kernel's
                                is its group_lanes, and the pipeline must keep it */
    bool params_in_buffer;   /* parameters in a storage buffer (binding buffer_count), not
                                push constants: for devices whose limit they exceed */
    bool opaque_multipliers; /* in loops, an invocation's index times a constant as a product
                                by a run-time value, vector indices as divided terms (CPU
                                drivers: faster loads on llvmpipe; emit.c) */
    bool paired_vectors;     /* vector accesses move 64-bit integers: LOAD4/STORE4 two,
                                LOAD8/STORE8 four (the device has shaderInt64; CPU drivers:
                                emit.c load_vector) */
    /* Small types in storage (docs/gpus.md "Small types without 8/16-bit storage"): with
     * storage_8bit, u8/i8/bool buffers are arrays of 8-bit integers (the module declares Int8
     * and StorageBuffer8BitAccess); with storage_16bit and float16, f16 buffers are arrays of
     * 16-bit floats (Float16, StorageBuffer16BitAccess). Otherwise such a buffer is packed: an
     * array of u32 words holding the same bytes (element i of a u8 buffer is byte i % 4 of word
     * i / 4, of an f16 buffer half i % 2 of word i / 2, little-endian), read with shifts and
     * written with atomics on the word, so no 8- or 16-bit type appears in the module. float16:
     * f16 values are rounded through a 16-bit float (OpFConvert); without it, with integer
     * operations on the f32 bits (round to nearest even, as the interpreter). */
    bool storage_8bit, storage_16bit, float16;
    bool preserve_specials; /* SignedZeroInfNanPreserve for 32-bit floats (the device's
                               float controls allow it): without it a driver may assume no
                               NaN, inf or signed zero occurs (NVIDIA folds x != x to false;
                               lavapipe x / 0 to 0), and NaN tests use the bits instead */
    /* Storages larger than maxStorageBufferRange: buffer i with windows[i] > 0 is bound as an
     * array of that many descriptors, descriptor w showing bytes [w S, (w + 1) S) with
     * S = 2^window_log2 (a power of two, at least 256 and a multiple of the offset alignment).
     * An access to element index of a view of u-byte units reads descriptor index / (S / u),
     * element index % (S / u): vector accesses are aligned to their width, so none straddles
     * two windows. The array needs caps.storage_buffer_array_dynamic_indexing. */
    uint32_t windows[IR_MAX_BUFFERS];
    uint32_t window_log2;
    /* Bit i: buffer i, read and never written by the kernel, of a 32-bit type and bound whole
     * (no windows), is a uniform texel buffer of 16-byte texels (R32G32B32A32_UINT) instead of
     * a storage buffer: element e is component e % 4 of texel e / 4. llvmpipe gathers a texel
     * fetch for all lanes at once, where it moves a storage-buffer load one lane at a time
     * (docs/lavapipe.md). */
    uint32_t texel_buffers;
} emit_options;

/* The module's interface: buffer i is set 0 binding i; push constants are the kernel's
 * parameters in order, each of the index type; specialization constants 0, 1, 2 are the
 * workgroup size (x, 1, 1). The invocation index is x + y * (NumWorkgroups.x * size x); a
 * group kernel's item is the workgroup's x + y * NumWorkgroups.x, its lane the local index. */
typedef struct emit_result {
    uint32_t *words; /* allocated with the kernel's allocator */
    size_t word_count;
    uint32_t push_constant_size;
    uint32_t binding_count; /* the kernel's buffers, plus the parameter buffer if any */
    /* descriptors per binding: windows[i] (or 1) for buffer i, 1 for the parameter buffer */
    uint32_t descriptor_counts[IR_MAX_BUFFERS + 1];
    uint32_t texel_bindings; /* emit_options.texel_buffers: those bindings are texel buffers */
} emit_result;

kiln_status emit_spirv(const ir_kernel *k, const emit_options *opt, emit_result *out,
                       base_error *err);
void emit_result_free(const base_allocator *alloc, emit_result *r);

#endif
