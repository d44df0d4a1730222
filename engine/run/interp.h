/* The reference interpreter of kernel IR (see ir.h for the semantics it implements). */
#ifndef KILN_ENGINE_INTERP_H
#define KILN_ENGINE_INTERP_H

#include "ir.h"

typedef struct interp_buffer {
    void *data;     /* elements of the kernel's buffer type, host memory */
    uint64_t count; /* elements */
} interp_buffer;

/* Runs invocations (group kernels: items, each on k->group_lanes lanes) 0 .. global_size-1 of k
 * (verified first) over buffers[0..buffer_count-1] with the given parameter values. An out-of-range
 * element access is KILN_ERROR_INTERNAL. */
kiln_status interp_run(const ir_kernel *k, interp_buffer *buffers, const int64_t *params,
                       uint64_t global_size, base_error *err);

/* IEEE half conversions with round-to-nearest-even (shared with the engine's host code). */
uint16_t interp_f32_to_f16(float value);
float interp_f16_to_f32(uint16_t half);

#endif
