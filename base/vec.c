/* Growth of BASE_VEC arrays: capacity doubles, starting at 8 elements. */
#include "base.h"

kiln_status base_vec_reserve(const base_allocator *a, void **data, size_t *cap, size_t elem_size,
                             size_t min_cap) {
    if (min_cap <= *cap)
        return KILN_OK;
    size_t new_cap = *cap ? *cap : 8;
    while (new_cap < min_cap) {
        if (!base_mul_size(new_cap, 2, &new_cap))
            return KILN_ERROR_OUT_OF_HOST_MEMORY;
    }
    size_t old_bytes, new_bytes;
    if (!base_mul_size(*cap, elem_size, &old_bytes) ||
        !base_mul_size(new_cap, elem_size, &new_bytes))
        return KILN_ERROR_OUT_OF_HOST_MEMORY;
    void *p = base_realloc(a, *data, old_bytes, new_bytes);
    if (!p)
        return KILN_ERROR_OUT_OF_HOST_MEMORY;
    *data = p;
    *cap = new_cap;
    return KILN_OK;
}
