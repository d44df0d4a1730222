/* Test-only overrides of engine/ (issue 20: never in kiln_context_options, which is for
 * programs). They drive, on the device at hand, paths that other devices take. Process-wide and
 * not thread-safe: a test sets them, creates its contexts, then clears them; a context reads
 * them once, when it is created. Tests link the engine statically and include this header. */
#ifndef KILN_ENGINE_ENG_TESTING_H
#define KILN_ENGINE_ENG_TESTING_H

#include <stdbool.h>
#include <stdint.h>

typedef struct eng_testing {
    /* The Vulkan device neither enables nor reports shaderInt64: kernels that need 64-bit
     * integers are KILN_ERROR_UNSUPPORTED (runtime.c check_types), as on such devices. */
    bool no_int64;
    /* Nonzero: the device reports this maxStorageBufferRange (bytes; only a smaller one), so
     * that storages larger than it are bound as several windows (runtime.c storage_windows). */
    uint64_t max_storage_range;
} eng_testing;

/* Sets the overrides of the contexts created from now on (NULL: none). */
void eng_testing_set(const eng_testing *options);
/* The overrides in force (all off unless set). */
const eng_testing *eng_testing_options(void);

#endif
