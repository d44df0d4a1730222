/* The version of the disk cache's kernel payload (engine/cache.c describes the layout and its
 * history). A header of its own so that tools judging the cache (kilninfo --cache) open it
 * with the engine's version without linking the engine: entries the engine reads are "ok",
 * entries of another version "stale". */
#ifndef KILN_ENGINE_CACHE_VERSION_H
#define KILN_ENGINE_CACHE_VERSION_H

enum { ENG_CACHE_PAYLOAD_VERSION = 14 };

#endif
