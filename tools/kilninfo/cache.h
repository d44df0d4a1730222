/* kilninfo --cache and --cache-clear (cache.c): the on-disk kernel cache, without a device. */
#ifndef KILN_TOOLS_KILNINFO_CACHE_H
#define KILN_TOOLS_KILNINFO_CACHE_H

#include <stdbool.h>
#include <stdio.h>

/* Lists every cache file (key, size, last use, kind, state, device) as a table, or as JSON
 * (keys in README.md). Returns the exit status: 0, or 1 when the directory cannot be read. */
int kilninfo_cache_list(FILE *out, bool json);
/* Removes every cache file; prints how many. Returns 0, or 1 on failure. */
int kilninfo_cache_clear(FILE *out);

#endif
