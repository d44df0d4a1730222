/* kiln.h: Kiln's public C API, the only header a Kiln user includes.
 *
 * Kiln is a lazy tensor engine over Vulkan. This header grows with the engine (tensors, the
 * lazy graph, Variables for symbolic sizes: see shared/design/ARCHITECTURE.md). Today it carries
 * what every module and every user share:
 *
 * - kiln_status: every fallible call returns one. KILN_OK (0) is success; each other value is
 *   an error class whose generic message kiln_status_string() gives. The object a call was made
 *   on holds the specific message.
 * - kiln_alloc_fn: the allocator contract (Lua's lua_Alloc): every host allocation Kiln makes
 *   goes through the allocator the user passes, so a program can account for or limit Kiln's
 *   memory, and tests can fail the Nth allocation.
 *
 *     kiln_status st = ...;
 *     if (st != KILN_OK)
 *         fprintf(stderr, "kiln: %s\n", kiln_status_string(st));
 *
 * Thread-safety: kiln_status_string is thread-safe.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0

/* kiln_status, kiln_status_string and kiln_alloc_fn, owned by base/ (the build copies the
 * header next to this one). */
#include "kiln_base.h"

#endif
