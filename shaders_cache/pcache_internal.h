/* shaders_cache/ internals: the handle, the file format and the I/O layer, shared by the
 * files of the module only. */
#ifndef KILN_SHADERS_CACHE_INTERNAL_H
#define KILN_SHADERS_CACHE_INTERNAL_H

#include "pcache.h"

/* ---- the file format (format.c) --------------------------------------------------------- */

enum {
    PCACHE_FORMAT_VERSION = 1,
    PCACHE_HEADER_SIZE = 72, /* fixed fields, then the key, the payload, the checksum */
    PCACHE_CHECKSUM_SIZE = 8,
    PCACHE_NAME_LEN = 35,      /* 32 hex digits + ".kc" */
    PCACHE_NAME_CAP = 64,      /* an entry name and its terminator, with room to spare */
    PCACHE_TEMP_NAME_MAX = 96, /* longer names are not ours: <entry>.tmp.<pid>.<sequence> */
};

/* The fixed fields of a file header, decoded. */
typedef struct pcache_header {
    uint32_t format_version;
    uint32_t engine_version;
    uint32_t payload_version;
    uint8_t pointer_size;
    uint8_t endianness; /* 1: little, 2: big */
    uint8_t kind;       /* pcache_entry_kind */
    pcache_identity identity;
    uint32_t key_size;
    uint64_t payload_size;
} pcache_header;

/* What a file turned out to be. */
typedef enum pcache_verdict {
    PCACHE_VERDICT_OK,
    PCACHE_VERDICT_CORRUPT, /* truncated, bad magic, sizes that disagree, checksum */
    PCACHE_VERDICT_STALE,   /* other format, engine or payload version, pointer size, endian */
    PCACHE_VERDICT_OTHER_DEVICE,
} pcache_verdict;

/* The header this build writes for kind, identity and the sizes. */
pcache_header pcache_header_make(const pcache *pc, pcache_entry_kind kind, size_t key_size,
                                 uint64_t payload_size);
void pcache_header_encode(const pcache_header *h, unsigned char out[PCACHE_HEADER_SIZE]);
/* The checksum of a file: header, key, then payload, chained. */
uint64_t pcache_checksum(const unsigned char *header, const void *key, size_t key_size,
                         const void *payload, size_t payload_size);
void pcache_put_u64(unsigned char *p, uint64_t v); /* little-endian */
/* Checks a whole file's bytes: structure and checksum first (CORRUPT), then the versions
 * (STALE), then identity when it is not NULL (OTHER_DEVICE). *h is filled when the structure
 * is sound (every verdict but CORRUPT). */
pcache_verdict pcache_verify(const pcache *pc, const unsigned char *file, size_t size,
                             const pcache_identity *identity, pcache_header *h);
/* "<32 hex>.kc": the file of (kind, key) for identity. out has PCACHE_NAME_CAP bytes. */
void pcache_entry_name(const pcache_identity *identity, pcache_entry_kind kind, const void *key,
                       size_t key_size, char *out);
bool pcache_is_entry_name(const char *name);
bool pcache_is_temp_name(const char *name);
uint32_t pcache_engine_version(void);

/* ---- the handle --------------------------------------------------------------------------- */

struct pcache {
    base_allocator alloc;
    pcache_mode mode;
    bool has_identity;
    bool warned;  /* the one warning has been logged */
    bool scanned; /* estimate_bytes comes from a scan */
    bool durable;
    pcache_identity identity;
    uint32_t engine_version;
    uint32_t payload_version;
    uint64_t max_bytes;
    uint64_t estimate_bytes; /* the directory's cache files as this handle counts them */
    char *dir;               /* NULL when turned off by KILN_CACHE */
    size_t dir_size;         /* bytes allocated for dir */
    char *path;              /* scratch: dir + "/" + a file name */
    size_t path_size;
    uint64_t temp_seq;
    bool pipeline_known; /* pipeline_hash is what the file held when last read or written */
    uint64_t pipeline_hash;
    pcache_stats stats;
    pcache_io_fault_fn io_fault;
    void *io_fault_user;
};

/* pc->path for a file name in the cache directory. */
const char *pcache_path(pcache *pc, const char *name);
/* Logs the one warning (if not yet logged) and sets mode. */
void pcache_degrade(pcache *pc, pcache_mode mode, const char *what, const char *path, int error);

/* The file of (kind, key) for pc's identity, read and verified (store.c). KILN_OK: a hit, *file
 * holds the whole file (free with pcache_free); KILN_ERROR_NOT_FOUND: a miss (counted). */
kiln_status pcache_lookup(pcache *pc, pcache_entry_kind kind, const void *key, size_t key_size,
                          unsigned char **file, size_t *size, base_error *err);
/* Writes (kind, key, payload) like pcache_put. */
kiln_status pcache_store(pcache *pc, pcache_entry_kind kind, const void *key, size_t key_size,
                         const void *payload, size_t payload_size, base_error *err);

/* ---- I/O (io.c): errno-style results, 0 on success, through the fault hook ---------------- */

/* Reads a whole regular file of at most max_size bytes into a block from pc's allocator.
 * Returns 0, ENOMEM, EFBIG (larger than max_size) or the I/O error. With touch, a file that
 * check() accepts gets its mtime set to now before it is closed. */
typedef bool (*pcache_check_fn)(void *user, const unsigned char *data, size_t size);
int pcache_read_file(pcache *pc, const char *path, uint64_t max_size, unsigned char **data,
                     size_t *size, pcache_check_fn check, void *check_user);
/* Writes header + key + payload + checksum to a temporary file beside name, then renames it
 * onto name. On failure nothing is left behind; *op says which step failed. */
int pcache_write_file(pcache *pc, const char *name, const unsigned char *header, const void *key,
                      size_t key_size, const void *payload, size_t payload_size, pcache_io_op *op);
int pcache_unlink(pcache *pc, const char *path);
/* mkdir -p with mode 0700. */
int pcache_mkdirs(pcache *pc, const char *dir);
int pcache_fault(pcache *pc, pcache_io_op op, const char *path);

/* ---- the directory (evict.c) -------------------------------------------------------------- */

/* Scans the directory, removes temporary files older than 10 minutes, and when the cache files
 * exceed the cap, removes the least recently used down to 3/4 of it. Sets estimate_bytes. */
kiln_status pcache_scan_and_evict(pcache *pc, bool evict, base_error *err);

#endif
