/* The handle and its entries: opening (where the cache lives, or that it is off), get, put,
 * the one warning when the disk fails, statistics. */
#define _POSIX_C_SOURCE 200809L

#include "pcache_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { DEFAULT_MAX_BYTES = 256 << 20, MAX_DIR_LEN = 4000 };

static const char *const op_names[PCACHE_IO_OP_COUNT_] = {
    "mkdir", "open", "read", "create", "write", "fsync", "rename", "unlink", "utimens", "opendir",
};

pcache_identity pcache_identity_of(const vkd_device_info *info) {
    pcache_identity id;
    memset(&id, 0, sizeof id);
    id.vendor_id = info->props.vendorID;
    id.device_id = info->props.deviceID;
    id.driver_id = info->has_driver ? (uint32_t)info->driver.driverID : 0;
    id.driver_version = info->props.driverVersion;
    memcpy(id.pipeline_cache_uuid, info->props.pipelineCacheUUID, VK_UUID_SIZE);
    return id;
}

void pcache_degrade(pcache *pc, pcache_mode mode, const char *what, const char *path, int error) {
    if (mode > pc->mode)
        pc->mode = mode;
    if (pc->warned)
        return;
    pc->warned = true;
    base_log(BASE_LOG_WARN, "shaders_cache", "%s%s%s failed (%s): continuing %s", what,
             path ? " " : "", path ? path : "", strerror(error),
             mode == PCACHE_MODE_OFF ? "without the kernel cache"
                                     : "without saving compiled kernels to the cache");
}

const char *pcache_path(pcache *pc, const char *name) {
    snprintf(pc->path, pc->path_size, "%s/%s", pc->dir, name);
    return pc->path;
}

/* KILN_CACHE=0 (or off, false, no) turns the cache off. */
static bool env_turns_off(void) {
    const char *v = getenv("KILN_CACHE");
    return v && (strcmp(v, "0") == 0 || strcasecmp(v, "off") == 0 || strcasecmp(v, "false") == 0 ||
                 strcasecmp(v, "no") == 0);
}

static const char *nonempty_env(const char *name) {
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

/* The directory from the options or the environment, allocated into pc->dir (NULL when there
 * is no home to put it in, or its name is too long: then the cache is off, with a warning). */
static kiln_status resolve_directory(const pcache_options *o, pcache *pc, base_error *err) {
    const char *base = o->directory, *suffix = "";
    if (!base && (base = nonempty_env("KILN_CACHE_DIR")) == NULL) {
        if ((base = nonempty_env("XDG_CACHE_HOME")) != NULL && base[0] == '/')
            suffix = "/kiln";
        else if ((base = nonempty_env("HOME")) != NULL)
            suffix = "/.cache/kiln";
    }
    if (!base)
        return KILN_OK;
    size_t n = strlen(base) + strlen(suffix) + 1;
    if (n > MAX_DIR_LEN) { /* no file in it could be named: as a directory that cannot be made */
        pc->mode = PCACHE_MODE_OFF;
        pc->warned = true;
        base_log(BASE_LOG_WARN, "shaders_cache",
                 "the cache directory's name is %zu bytes long (at most %d): continuing without "
                 "the kernel cache",
                 n - 1, MAX_DIR_LEN - 1);
        return KILN_OK;
    }
    pc->dir = base_malloc(&pc->alloc, n);
    if (!pc->dir)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for the cache path");
    pc->dir_size = n;
    snprintf(pc->dir, n, "%s%s", base, suffix);
    for (size_t len = n - 1; len > 1 && pc->dir[len - 1] == '/'; len--)
        pc->dir[len - 1] = '\0'; /* "dir/" names the same directory as "dir" */
    return KILN_OK;
}

static kiln_status setup_directory(pcache *pc, const pcache_options *o, base_error *err) {
    if (env_turns_off()) {
        pc->mode = PCACHE_MODE_OFF;
        base_log(BASE_LOG_INFO, "shaders_cache", "KILN_CACHE turns the kernel cache off");
        return KILN_OK;
    }
    if (o->directory && !o->directory[0])
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "empty cache directory name");
    kiln_status st = resolve_directory(o, pc, err);
    if (st != KILN_OK)
        return st;
    if (!pc->dir) {
        if (pc->mode != PCACHE_MODE_OFF) /* (off already when the name was too long) */
            pcache_degrade(pc, PCACHE_MODE_OFF, "finding a cache directory (no HOME)", NULL,
                           ENOENT);
        return KILN_OK;
    }
    pc->path_size = strlen(pc->dir) + 2 + PCACHE_TEMP_NAME_MAX;
    pc->path = base_malloc(&pc->alloc, pc->path_size);
    if (!pc->path)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for the cache path");
    int e = pcache_mkdirs(pc, pc->dir);
    if (e)
        pcache_degrade(pc, PCACHE_MODE_OFF, "creating the cache directory", pc->dir, e);
    return KILN_OK;
}

kiln_status pcache_open(const pcache_options *options, pcache **out, base_error *err) {
    static const pcache_options defaults = {0};
    const pcache_options *o = options ? options : &defaults;
    if (!out)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "pcache_open: out is NULL");
    *out = NULL;
    base_allocator alloc = o->alloc ? *o->alloc : base_allocator_make(NULL, NULL);
    pcache *pc = base_calloc(&alloc, 1, sizeof *pc);
    if (!pc)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for the cache");
    pc->alloc = alloc;
    pc->has_identity = o->identity != NULL;
    if (o->identity)
        pc->identity = *o->identity;
    pc->engine_version = o->engine_version ? o->engine_version : pcache_engine_version();
    pc->payload_version = o->payload_version;
    pc->max_bytes = o->max_bytes ? o->max_bytes : (uint64_t)DEFAULT_MAX_BYTES;
    pc->durable = o->durable;
    pc->io_fault = o->io_fault;
    pc->io_fault_user = o->io_fault_user;
    kiln_status st = setup_directory(pc, o, err);
    if (st != KILN_OK) {
        pcache_close(pc);
        return st;
    }
    *out = pc;
    return KILN_OK;
}

void pcache_close(pcache *pc) {
    if (!pc)
        return;
    base_allocator alloc = pc->alloc;
    if (pc->dir)
        base_free(&alloc, pc->dir, pc->dir_size);
    if (pc->path)
        base_free(&alloc, pc->path, pc->path_size);
    base_free(&alloc, pc, sizeof *pc);
}

pcache_mode pcache_mode_of(const pcache *pc) {
    return pc->mode;
}

const char *pcache_directory(const pcache *pc) {
    return pc->dir;
}

pcache_stats pcache_stats_of(const pcache *pc) {
    return pc->stats;
}

void pcache_free(pcache *pc, void *data, size_t size) {
    if (data)
        base_free(&pc->alloc, data, size ? size : 1);
}

/* ---- get -------------------------------------------------------------------------------- */

typedef struct lookup {
    pcache *pc;
    pcache_entry_kind kind;
    const void *key;
    size_t key_size;
    pcache_verdict verdict;
    bool key_matches;
} lookup;

/* The check pcache_read_file runs before recording a use: only a usable file is touched. */
static bool lookup_check(void *user, const unsigned char *file, size_t size) {
    lookup *l = user;
    pcache_header h;
    l->verdict = pcache_verify(l->pc, file, size, &l->pc->identity, &h);
    l->key_matches =
        l->verdict == PCACHE_VERDICT_OK && h.kind == l->kind && h.key_size == l->key_size &&
        (l->key_size == 0 || memcmp(file + PCACHE_HEADER_SIZE, l->key, l->key_size) == 0);
    return l->key_matches;
}

static kiln_status miss(pcache *pc) {
    pc->stats.misses++;
    return KILN_ERROR_NOT_FOUND;
}

/* Reads the file of (kind, key); on a hit *file holds the whole file. */
kiln_status pcache_lookup(pcache *pc, pcache_entry_kind kind, const void *key, size_t key_size,
                          unsigned char **file, size_t *size, base_error *err) {
    if (!pc->has_identity)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "this cache handle was opened without a device identity");
    if (pc->mode == PCACHE_MODE_OFF)
        return miss(pc);
    char name[PCACHE_NAME_CAP];
    pcache_entry_name(&pc->identity, kind, key, key_size, name);
    lookup l = {.pc = pc, .kind = kind, .key = key, .key_size = key_size};
    const char *path = pcache_path(pc, name);
    int e = pcache_read_file(pc, path, pc->max_bytes, file, size, lookup_check, &l);
    if (e == ENOMEM)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory to read %s", path);
    if (e) {
        if (e != ENOENT)
            base_log(BASE_LOG_DEBUG, "shaders_cache", "cannot read %s: %s", path, strerror(e));
        pc->stats.corrupt += e == EFBIG || e == EINVAL;
        return miss(pc);
    }
    pc->stats.bytes_read += *size;
    if (l.key_matches)
        return KILN_OK;
    pc->stats.corrupt += l.verdict == PCACHE_VERDICT_CORRUPT;
    pc->stats.foreign +=
        l.verdict == PCACHE_VERDICT_STALE || l.verdict == PCACHE_VERDICT_OTHER_DEVICE;
    base_log(BASE_LOG_DEBUG, "shaders_cache", "%s: %s", path,
             l.verdict == PCACHE_VERDICT_CORRUPT ? "corrupt, ignored"
             : l.verdict == PCACHE_VERDICT_OK    ? "another key (hash collision)"
                                                 : "written for another build or device");
    pcache_free(pc, *file, *size);
    *file = NULL;
    *size = 0;
    return miss(pc);
}

kiln_status pcache_get(pcache *pc, const void *key, size_t key_size, void **payload,
                       size_t *payload_size, base_error *err) {
    if (!payload || !payload_size || (!key && key_size))
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "pcache_get: NULL argument");
    *payload = NULL;
    *payload_size = 0;
    unsigned char *file;
    size_t size;
    kiln_status st = pcache_lookup(pc, PCACHE_KIND_ENTRY, key, key_size, &file, &size, err);
    if (st != KILN_OK)
        return st;
    size_t n = size - PCACHE_HEADER_SIZE - PCACHE_CHECKSUM_SIZE - key_size;
    void *copy = base_malloc(&pc->alloc, n ? n : 1);
    if (copy)
        memcpy(copy, file + PCACHE_HEADER_SIZE + key_size, n);
    pcache_free(pc, file, size);
    if (!copy)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a payload");
    pc->stats.hits++;
    *payload = copy;
    *payload_size = n;
    return KILN_OK;
}

/* ---- put -------------------------------------------------------------------------------- */

kiln_status pcache_store(pcache *pc, pcache_entry_kind kind, const void *key, size_t key_size,
                         const void *payload, size_t payload_size, base_error *err) {
    if (!pc->has_identity)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "this cache handle was opened without a device identity");
    size_t file_size = 0;
    if (key_size > UINT32_MAX || !base_add_size(key_size, payload_size, &file_size) ||
        !base_add_size(file_size, PCACHE_HEADER_SIZE + PCACHE_CHECKSUM_SIZE, &file_size) ||
        file_size > pc->max_bytes)
        return base_error_set(err, KILN_ERROR_LIMIT_EXCEEDED,
                              "a cache entry of %zu + %zu bytes exceeds the cache size cap",
                              key_size, payload_size);
    if (pc->mode != PCACHE_MODE_READ_WRITE)
        return KILN_OK;
    if (!pc->scanned) {
        kiln_status st = pcache_scan_and_evict(pc, false, err);
        if (st != KILN_OK)
            return st;
    }
    unsigned char header[PCACHE_HEADER_SIZE];
    pcache_header h = pcache_header_make(pc, kind, key_size, payload_size);
    pcache_header_encode(&h, header);
    char name[PCACHE_NAME_CAP];
    pcache_entry_name(&pc->identity, kind, key, key_size, name);
    pcache_io_op op;
    int e = pcache_write_file(pc, name, header, key, key_size, payload, payload_size, &op);
    if (e) {
        pc->stats.write_failures++;
        pcache_degrade(pc, PCACHE_MODE_READ_ONLY, op_names[op], pcache_path(pc, name), e);
        return base_error_set(err, KILN_ERROR_IO, "cannot write the cache entry %s (%s: %s)", name,
                              op_names[op], strerror(e));
    }
    pc->stats.writes++;
    pc->stats.bytes_written += file_size;
    pc->estimate_bytes += file_size;
    if (pc->estimate_bytes > pc->max_bytes)
        return pcache_scan_and_evict(pc, true, err);
    return KILN_OK;
}

kiln_status pcache_put(pcache *pc, const void *key, size_t key_size, const void *payload,
                       size_t payload_size, base_error *err) {
    if ((!key && key_size) || (!payload && payload_size))
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "pcache_put: NULL argument");
    return pcache_store(pc, PCACHE_KIND_ENTRY, key, key_size, payload, payload_size, err);
}
