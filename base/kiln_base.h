/* kiln_base.h: the types every Kiln module and every Kiln user shares.
 *
 * This header is owned by base/ and re-exported by include/kiln/kiln.h (the build copies it
 * next to kiln.h), so there is one definition of the status enum and of the allocator.
 *
 * kiln_status: every fallible call returns one. KILN_OK is zero; every other value is an error
 * whose generic message kiln_status_string() returns (the object that failed holds the specific
 * message). */
#ifndef KILN_BASE_H
#define KILN_BASE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kiln_status {
#define X(name, message) name,
#include "status.def"
#undef X
    KILN_STATUS_COUNT_
} kiln_status;

/* The generic message of a status; never NULL (an unknown value gives "unknown status"). */
const char *kiln_status_string(kiln_status status);

/* The allocator every host allocation in Kiln goes through (Lua's lua_Alloc contract):
 * - nsize > 0: return a block of nsize bytes (aligned for any type) holding the first
 *   min(osize, nsize) bytes of ptr when ptr is not NULL, or NULL on failure (ptr unchanged);
 * - nsize == 0: free ptr (NULL is allowed) and return NULL.
 * osize is the size the block was allocated with (0 when ptr is NULL). */
typedef void *(*kiln_alloc_fn)(void *user, void *ptr, size_t osize, size_t nsize);

#ifdef __cplusplus
}
#endif

#endif
