/* The version of the disk cache's kernel payload (engine/run/cache.c describes the layout and its
 * history). A header of its own so that tools judging the cache (kilninfo --cache) open it
 * with the engine's version without linking the engine: entries the engine reads are "ok",
 * entries of another version "stale". */
#ifndef KILN_ENGINE_CACHE_VERSION_H
#define KILN_ENGINE_CACHE_VERSION_H

enum { ENG_CACHE_PAYLOAD_VERSION = 20 };

/* Where a kernel entry's payload holds the kernel's name (engine/eng.h eng_kernel_name): a
 * NUL-padded string of ENG_CACHE_NAME_SIZE bytes at byte ENG_CACHE_NAME_OFFSET, in entries of
 * this payload version whose first four bytes are ENG_CACHE_PAYLOAD_MAGIC (little-endian). */
enum { ENG_CACHE_NAME_OFFSET = 68, ENG_CACHE_NAME_SIZE = 96 };
#define ENG_CACHE_PAYLOAD_MAGIC 0x4e524b4bu /* "KKRN" */

#endif
