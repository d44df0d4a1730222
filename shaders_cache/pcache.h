/* shaders_cache/: Kiln's persistent cache on disk (prefix pcache_).
 *
 * It stores OPAQUE entries: a key (any bytes) and a payload (any bytes), written for one device
 * identity. It knows nothing of kernels: engine/ serializes the SPIR-V words, bindings,
 * push-constant layout, specialization entries and guards into the payload, and chooses the
 * key. Per device it also keeps one VkPipelineCache blob (pcache_pipeline_*).
 *
 *   directory   $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln (created
 *               with mode 0700); KILN_CACHE=0 (or off/false/no) turns the cache off.
 *   files       one file per entry, named by a 128-bit hash of (kind, key, vendorID,
 *               deviceID): <32 hex digits>.kc. Every file carries a header (magic, format,
 *               engine and payload versions, pointer size, endianness, vendorID, deviceID,
 *               driverID, driverVersion, pipelineCacheUUID), the key, the payload and a 64-bit
 *               checksum of all of it (format.c has the layout). A file that is truncated,
 *               corrupt, written by another build or for another driver is a miss, is never
 *               handed to the caller, and is replaced by the next put of that key.
 *   writes      a temporary file in the same directory, then rename(): a reader sees the old
 *               file or the new one, never a mix, and any number of processes may share a
 *               directory. A crash mid-write leaves at most a temporary file (removed by a
 *               later scan once it is 10 minutes old) or, without `durable`, a torn file
 *               after a power loss, which its checksum rejects.
 *   last use    a hit sets the file's mtime (futimens): no payload is rewritten.
 *   size cap    after a put that takes the directory past max_bytes (as this handle counts
 *               it: a scan at its first put plus its own writes), the directory is scanned and
 *               least-recently-used entries are removed down to 3/4 of the cap.
 *   failures    a directory that cannot be created (or whose name is too long) turns the
 *               handle off; a write that fails (read-only or full disk) makes it read-only.
 *               Either logs ONE warning per handle (base_log) and the program runs on without
 *               the cache. Bad files never fail a call: they are misses, and so is anything
 *               but a regular file in an entry's place (a FIFO is never opened to block).
 *
 * A handle is used from one thread at a time; several handles and processes may share one
 * directory. Every allocation goes through options.alloc.
 *
 * Typical use (engine/): the identity is known before the device exists, so the saved
 * VkPipelineCache blob becomes the device's initial data.
 *     pcache_identity id = pcache_identity_of(vkd_instance_device(inst, index));
 *     pcache *pc;
 *     pcache_open(&(pcache_options){.identity = &id, .payload_version = 3}, &pc, &err);
 *     vkd_device_options dopt = {0};
 *     void *blob = NULL; size_t blob_size = 0;
 *     if (pcache_pipeline_load(pc, &blob, &blob_size, &err) == KILN_OK) {
 *         dopt.pipeline_cache_data = blob; dopt.pipeline_cache_size = blob_size; }
 *     vkd_device_create(inst, index, &dopt, &dev, &err);
 *     pcache_free(pc, blob, blob_size);
 *     ...
 *     void *p; size_t n;                       // per kernel, after the in-memory cache missed
 *     if (pcache_get(pc, key, key_size, &p, &n, &err) == KILN_OK) {
 *         deserialize p; pcache_free(pc, p, n);
 *     } else {
 *         lower, emit; serialize; pcache_put(pc, key, key_size, payload, payload_size, &err);
 *     }
 *     pcache_pipeline_save_device(pc, dev, &err); // after the first burst and at teardown
 *     pcache_close(pc);
 * A failing disk never stops the engine: a get misses, and the put that failed returns
 * KILN_ERROR_IO after the one warning was logged, so the engine may ignore every status of
 * get, put and the pipeline calls except KILN_ERROR_OUT_OF_HOST_MEMORY.
 */
#ifndef KILN_SHADERS_CACHE_PCACHE_H
#define KILN_SHADERS_CACHE_PCACHE_H

#include "vkd.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pcache pcache;

/* What a cache file is valid for: another identity makes the entry a miss. */
typedef struct pcache_identity {
    uint32_t vendor_id;      /* VkPhysicalDeviceProperties::vendorID */
    uint32_t device_id;      /* ::deviceID */
    uint32_t driver_id;      /* VkPhysicalDeviceDriverProperties::driverID (0 if unreported) */
    uint32_t driver_version; /* VkPhysicalDeviceProperties::driverVersion */
    uint8_t pipeline_cache_uuid[VK_UUID_SIZE];
} pcache_identity;

/* The identity of a physical device, from the snapshot vk/ took of it. */
pcache_identity pcache_identity_of(const vkd_device_info *info);

/* ---- fault injection (tests) ----------------------------------------------------------- */

typedef enum pcache_io_op {
    PCACHE_IO_MKDIR,   /* creating the cache directory */
    PCACHE_IO_OPEN,    /* opening an entry to read it */
    PCACHE_IO_READ,    /* reading an entry */
    PCACHE_IO_CREATE,  /* creating a temporary file */
    PCACHE_IO_WRITE,   /* writing a temporary file */
    PCACHE_IO_SYNC,    /* fsync of a temporary file (options.durable) */
    PCACHE_IO_RENAME,  /* renaming a temporary file onto its entry */
    PCACHE_IO_UNLINK,  /* removing a file (eviction, clear, a failed write) */
    PCACHE_IO_TOUCH,   /* recording the last use of an entry */
    PCACHE_IO_OPENDIR, /* listing the directory */
    PCACHE_IO_OP_COUNT_
} pcache_io_op;

/* Called before every I/O operation: 0 lets it run, an errno value makes it fail with that
 * error without touching the disk. path is the file or directory concerned. */
typedef int (*pcache_io_fault_fn)(void *user, pcache_io_op op, const char *path);

/* ---- opening --------------------------------------------------------------------------- */

typedef struct pcache_options {
    /* The cache directory; NULL: from the environment (see the top of this header).
     * KILN_CACHE=0 turns the cache off even when a directory is given. */
    const char *directory;
    /* The size cap in bytes (whole files); 0: 256 MiB. */
    uint64_t max_bytes;
    /* The device entries are written for and read back by. NULL: a handle for management only
     * (pcache_list, pcache_clear, pcache_trim); get, put and the pipeline calls then fail with
     * KILN_ERROR_INVALID_ARGUMENT. */
    const pcache_identity *identity;
    /* engine/'s serialization version: entries written with another value are misses. */
    uint32_t payload_version;
    /* fsync each file before renaming it (slower; only power-loss durability depends on it,
     * never consistency). */
    bool durable;
    const base_allocator *alloc; /* NULL: the default allocator */

    /* Test hooks. */
    uint32_t engine_version; /* 0: this build's version */
    pcache_io_fault_fn io_fault;
    void *io_fault_user;
} pcache_options;

typedef enum pcache_mode {
    PCACHE_MODE_READ_WRITE, /* the normal state */
    PCACHE_MODE_READ_ONLY,  /* a write failed: entries are still read, puts do nothing */
    PCACHE_MODE_OFF,        /* KILN_CACHE=0 or no usable directory: every get misses */
} pcache_mode;

/* Opens the cache. Only KILN_ERROR_INVALID_ARGUMENT and KILN_ERROR_OUT_OF_HOST_MEMORY fail it
 * (*out is then NULL); a directory that cannot be created gives a handle in PCACHE_MODE_OFF
 * and one warning. */
kiln_status pcache_open(const pcache_options *options, pcache **out, base_error *err);
void pcache_close(pcache *pc); /* NULL is a no-op */

pcache_mode pcache_mode_of(const pcache *pc);
/* The directory in use; NULL when the cache was turned off by KILN_CACHE. Owned by pc. */
const char *pcache_directory(const pcache *pc);

/* ---- entries --------------------------------------------------------------------------- */

/* Looks key up. KILN_OK: a hit, *payload is a copy of payload_size bytes the caller frees with
 * pcache_free (a zero-byte payload gives a non-NULL pointer too). KILN_ERROR_NOT_FOUND: a miss
 * (absent, corrupt, foreign, or the cache is off); KILN_ERROR_OUT_OF_HOST_MEMORY. The outputs
 * are NULL/0 unless KILN_OK. A hit records the entry's last use. */
kiln_status pcache_get(pcache *pc, const void *key, size_t key_size, void **payload,
                       size_t *payload_size, base_error *err);
/* Stores payload under key, replacing any earlier file for it. KILN_OK: stored, or nothing to
 * do because the cache is off or read-only. KILN_ERROR_IO: this write failed; the handle is
 * now read-only and has logged its one warning. KILN_ERROR_LIMIT_EXCEEDED: the entry alone is
 * larger than the cap (not stored). May evict least-recently-used entries. */
kiln_status pcache_put(pcache *pc, const void *key, size_t key_size, const void *payload,
                       size_t payload_size, base_error *err);
/* Frees what pcache_get and pcache_pipeline_load returned; NULL is a no-op. */
void pcache_free(pcache *pc, void *data, size_t size);

/* ---- the VkPipelineCache blob of the device ------------------------------------------- */

/* The saved blob for pc's identity, checked like every entry and also checked to begin with a
 * VkPipelineCacheHeaderVersionOne naming the identity's vendorID, deviceID and
 * pipelineCacheUUID, so it is safe to hand to vkCreatePipelineCache. Returns like pcache_get. */
kiln_status pcache_pipeline_load(pcache *pc, void **data, size_t *size, base_error *err);
/* Saves blob bytes (from vkGetPipelineCacheData). A blob identical to the one this handle last
 * loaded or saved is not written again. KILN_ERROR_INVALID_ARGUMENT: the bytes do not begin
 * with a pipeline-cache header for pc's identity. Otherwise returns like pcache_put. */
kiln_status pcache_pipeline_save(pcache *pc, const void *data, size_t size, base_error *err);
/* Saves the device's VkPipelineCache: when the file on disk changed since this handle last
 * loaded or saved it (another process saved), its blob is merged into the device's cache
 * first (vkd_pipeline_cache_merge; a blob the driver refuses to merge is simply replaced), then
 * the merged data is saved. Call it after the first burst of compiles and at teardown. A
 * failing vkGetPipelineCacheData comes back as vk/'s status. */
kiln_status pcache_pipeline_save_device(pcache *pc, vkd_device *dev, base_error *err);

/* ---- statistics and management -------------------------------------------------------- */

typedef struct pcache_stats {
    uint64_t hits;           /* gets (and pipeline loads) answered from disk */
    uint64_t misses;         /* gets that found nothing usable */
    uint64_t writes;         /* files written */
    uint64_t evictions;      /* files removed to keep under the cap */
    uint64_t corrupt;        /* files rejected as truncated or corrupt (a miss each) */
    uint64_t foreign;        /* files rejected as written by another build, device or driver */
    uint64_t write_failures; /* writes that failed (the first one made the handle read-only) */
    uint64_t bytes_read;
    uint64_t bytes_written;
} pcache_stats;

pcache_stats pcache_stats_of(const pcache *pc);

typedef enum pcache_entry_kind {
    PCACHE_KIND_ENTRY = 1,    /* pcache_put */
    PCACHE_KIND_PIPELINE = 2, /* a VkPipelineCache blob */
} pcache_entry_kind;

typedef enum pcache_entry_state {
    PCACHE_ENTRY_OK,           /* parses, checksums, and (when pc has one) matches its identity */
    PCACHE_ENTRY_OTHER_DEVICE, /* valid, for another device or driver than pc's identity */
    PCACHE_ENTRY_STALE,        /* valid, written by another format/engine/payload version */
    PCACHE_ENTRY_CORRUPT,      /* truncated, corrupt or not a cache file */
} pcache_entry_state;

/* One file, as pcache_list reports it. Pointers are valid during the callback only. */
typedef struct pcache_entry {
    const char *file_name;
    pcache_entry_state state;
    pcache_entry_kind kind; /* 0 when corrupt */
    const void *key;        /* NULL when corrupt */
    size_t key_size;
    uint64_t payload_size;
    const void *payload;  /* payload_size bytes, valid during the callback (NULL when corrupt) */
    uint64_t file_size;   /* bytes on disk (what the cap counts) */
    int64_t last_use_sec; /* mtime: seconds since the epoch */
    int64_t last_use_nsec;
    pcache_identity identity; /* zero when corrupt */
} pcache_entry;

/* Return false to stop the walk. */
typedef bool (*pcache_entry_fn)(void *user, const pcache_entry *entry);

/* Calls fn for every cache file in the directory (each read and verified; other files are
 * ignored), in no particular order. Reading does not count as a use. KILN_ERROR_IO when the
 * directory cannot be listed; KILN_OK with no calls when the cache is off. */
kiln_status pcache_list(pcache *pc, pcache_entry_fn fn, void *user, base_error *err);
/* Removes every cache file (entries, blobs, temporary files), never other files. *removed
 * (may be NULL) counts files removed. */
kiln_status pcache_clear(pcache *pc, uint64_t *removed, base_error *err);
/* Scans the directory now and evicts down to 3/4 of the cap if it is over the cap. *bytes
 * (may be NULL) is the size of the cache files afterwards. */
kiln_status pcache_trim(pcache *pc, uint64_t *bytes, base_error *err);

#endif
