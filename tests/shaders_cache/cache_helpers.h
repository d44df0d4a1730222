/* Shared by the shaders_cache tests: private temporary directories, fake device identities,
 * a log sink that counts warnings, and direct looks at the files on disk. */
#ifndef KILN_TESTS_CACHE_HELPERS_H
#define KILN_TESTS_CACHE_HELPERS_H

#include "pcache.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A fresh directory under $TMPDIR (or /tmp); the path lives in a static buffer per slot. */
const char *helper_tempdir(int slot);
/* rm -r of a directory made by helper_tempdir. */
void helper_rmtree(const char *dir);
/* An identity that looks like a real device; seed varies every field. */
pcache_identity helper_identity(uint32_t seed);
/* Opens a cache in dir for id with a cap (0: default); fails the test on error. */
pcache *helper_open(const char *dir, const pcache_identity *id, uint64_t max_bytes);

/* Counts the warnings base_log emits while installed. */
void helper_capture_log(void);
int helper_warnings(void);
const char *helper_last_warning(void);
void helper_release_log(void);

/* Files in dir whose name ends with suffix (NULL: every file); their total size. */
int helper_count_files(const char *dir, const char *suffix, uint64_t *bytes);
/* Reads/writes a whole file; read returns a malloc'd block. */
unsigned char *helper_read(const char *path, size_t *size);
void helper_write(const char *path, const void *data, size_t size);
/* The only *.kc file in dir (fails when there is not exactly one); path in a static buffer. */
const char *helper_single_entry(const char *dir);
/* Sets a file's mtime to sec seconds after the epoch. */
void helper_set_mtime(const char *path, int64_t sec);
int64_t helper_mtime_ns(const char *path);

/* Recomputes a cache file's trailing checksum (to craft valid files with chosen headers). */
void helper_fix_checksum(unsigned char *file, size_t size);

#endif
