/* kiln_base.h: the types every Kiln module and every Kiln user shares.
 *
 * This header is owned by base/ and re-exported by include/kiln/kiln.h (the build copies it
 * next to kiln.h), so there is one definition of the status enum and of the allocator.
 *
 * kiln_status: every fallible call returns one. KILN_OK is zero; every other value is an error
 * whose generic message kiln_status_string() returns (the object that failed holds the specific
 * message, which names the public call and the values involved). The values are stable: new
 * statuses are appended. The caller errors a program can act on each have their own status:
 *
 *   KILN_ERROR_INVALID_ARGUMENT  what no other class covers: a NULL pointer or array, an unknown
 *                                enum value, a zero step, a malformed name
 *   KILN_ERROR_OUT_OF_RANGE      a value outside its allowed range: a dim or axis index for the
 *                                tensor's rank, a fill or arange value the dtype cannot hold, a
 *                                value outside its Variable's [min, max]
 *   KILN_ERROR_OUT_OF_BOUNDS     an index or extent beyond a size: select's index, narrow's or
 *                                shrink's bounds, unfold's window, an as_strided view that
 *                                reaches outside its storage
 *   KILN_ERROR_SHAPE_MISMATCH    shapes that do not fit together: operands that do not
 *                                broadcast, matmul's inner dims, expand of a size other than 1,
 *                                a reshape to another element count, conv2d's channels, squeeze
 *                                of a dim whose size is not 1
 *   KILN_ERROR_OVERLAP           a write whose destination has two elements on one storage
 *                                element (or may have: not provably distinct)
 *   KILN_ERROR_NOT_VIEWABLE      a write whose destination is not a plain view of one storage
 *                                (a reshape that needed a copy, or padding)
 *   KILN_ERROR_UNBOUND_VARIABLE  a Variable never bound, where its value is needed (a query, a
 *                                realize, kiln_expr_value)
 *   KILN_ERROR_DTYPE_MISMATCH    an operand whose dtype the call does not accept (kiln_mean of
 *                                an integer tensor, kiln_sub of bools, kiln_rand of an integer
 *                                dtype, ...)
 *   KILN_ERROR_INVALID_HANDLE    a tensor handle released (kiln_release, or its scope's end),
 *                                of a destroyed context, or of another context than the call's
 *                                other operands
 *   KILN_ERROR_MODIFIED          kiln_grad: a value the backward pass needs was written in place
 *                                after the op that read it (torch's version-counter error)
 *
 * The others report the library's limits and the system: KILN_ERROR_OVERFLOW (an int64 size,
 * stride or offset would overflow), KILN_ERROR_LIMIT_EXCEEDED, KILN_ERROR_UNSUPPORTED,
 * KILN_ERROR_OUT_OF_HOST_MEMORY, KILN_ERROR_OUT_OF_DEVICE_MEMORY, the Vulkan ones,
 * KILN_ERROR_IO, KILN_ERROR_CORRUPT_DATA, KILN_ERROR_TIMEOUT, KILN_ERROR_BUDGET_EXCEEDED, and
 * KILN_ERROR_INTERNAL (a bug in Kiln: please report it).
 *
 * Log messages (warnings, statistics with KILN_DEBUG, validation-layer messages) go to a
 * callback: the context's (kiln_context_options.log) for messages logged during that context's
 * calls, else the process-wide one (kiln_set_log_callback), else stderr. */
#ifndef KILN_BASE_H
#define KILN_BASE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kiln is built with hidden visibility: what this header declares is the library's exported
 * API (docs/packaging.md). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
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

/* The levels of log messages. KILN_DEBUG sets which are logged (read once per process): unset or
 * 0 logs errors and warnings; 1 adds KILN_LOG_INFO (statistics per realize), 2 KILN_LOG_DEBUG,
 * 3 and more KILN_LOG_TRACE (kernel IR and SPIR-V). A callback receives only those, and the
 * progress of long work at any KILN_DEBUG (KILN_LOG_INFO, "compiling kernels: 3 of 40 (name)",
 * once a realize has compiled for a second). */
typedef enum kiln_log_level {
    KILN_LOG_ERROR = 0,
    KILN_LOG_WARN = 1,
    KILN_LOG_INFO = 2,
    KILN_LOG_DEBUG = 3,
    KILN_LOG_TRACE = 4,
} kiln_log_level;

/* Receives one log message: module is the part of Kiln that logged it ("engine",
 * "shaders_cache", "validation", ...), message one line without a trailing newline. Both
 * strings are valid during the call only. The default (no callback) writes
 * "kiln <module>: <level>: <message>" to stderr. A callback may be called from any thread that
 * runs a Kiln call; it must not call Kiln. */
typedef void (*kiln_log_fn)(void *user, kiln_log_level level, const char *module,
                            const char *message);

/* Sets the process-wide callback: it receives the messages logged outside any context's calls
 * (a failed kiln_context_create, for one) and those of contexts that set none. NULL restores
 * stderr. Thread-safe; a message being logged while it changes may still reach the previous
 * callback. */
void kiln_set_log_callback(kiln_log_fn fn, void *user);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
