/* The directory as a whole: scanning it, evicting least-recently-used entries to stay under
 * the cap, listing and clearing. Only files named like cache files are ever counted or
 * removed, so a cache directory pointed at a folder holding other files is safe.
 *
 * No lock is needed between processes: an entry removed by two evictors, or evicted while
 * another process reads it (its open descriptor still reads the whole file), or replaced while
 * being evicted, costs at most a recompile. */
#define _POSIX_C_SOURCE 200809L

#include "pcache_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum { TEMP_MAX_AGE_SEC = 600 };
static const uint64_t LIST_READ_MAX = 1ull << 30;

typedef struct scan_file {
    char name[PCACHE_NAME_CAP];
    uint64_t size;
    struct timespec mtime;
} scan_file;

typedef BASE_VEC(scan_file) scan_files;

/* The cache files of the directory (temporary files are removed when old, else skipped). */
static kiln_status scan(pcache *pc, scan_files *files, base_error *err) {
    int e = pcache_fault(pc, PCACHE_IO_OPENDIR, pc->dir);
    DIR *d = e ? NULL : opendir(pc->dir);
    if (!d)
        return base_error_set(err, KILN_ERROR_IO, "cannot list the cache directory %s: %s", pc->dir,
                              strerror(e ? e : errno));
    time_t now = time(NULL);
    kiln_status st = KILN_OK;
    struct dirent *ent;
    while (st == KILN_OK && (ent = readdir(d)) != NULL) {
        bool entry = pcache_is_entry_name(ent->d_name), temp = pcache_is_temp_name(ent->d_name);
        struct stat s;
        if ((!entry && !temp) || lstat(pcache_path(pc, ent->d_name), &s) != 0 ||
            !S_ISREG(s.st_mode))
            continue;
        if (temp) {
            if (now - s.st_mtime > TEMP_MAX_AGE_SEC)
                (void)pcache_unlink(pc, pc->path); /* left by a crashed writer */
            continue;
        }
        scan_file f = {.size = (uint64_t)s.st_size, .mtime = s.st_mtim};
        memcpy(f.name, ent->d_name, PCACHE_NAME_LEN + 1);
        if (BASE_VEC_PUSH(&pc->alloc, files, f) != KILN_OK)
            st = base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory to scan the cache");
    }
    closedir(d);
    return st;
}

/* Oldest last use first; the name breaks ties so every process agrees. */
static int by_last_use(const void *pa, const void *pb) {
    const scan_file *a = pa, *b = pb;
    if (a->mtime.tv_sec != b->mtime.tv_sec)
        return a->mtime.tv_sec < b->mtime.tv_sec ? -1 : 1;
    if (a->mtime.tv_nsec != b->mtime.tv_nsec)
        return a->mtime.tv_nsec < b->mtime.tv_nsec ? -1 : 1;
    return strcmp(a->name, b->name);
}

static uint64_t evict(pcache *pc, scan_files *files, uint64_t total) {
    uint64_t low_water = pc->max_bytes / 4 * 3;
    qsort(files->data, files->len, sizeof *files->data, by_last_use);
    for (size_t i = 0; i < files->len && total > low_water; i++) {
        int e = pcache_unlink(pc, pcache_path(pc, files->data[i].name));
        if (e && e != ENOENT) {
            base_log(BASE_LOG_DEBUG, "shaders_cache", "cannot evict %s: %s", pc->path, strerror(e));
            continue;
        }
        total -= files->data[i].size; /* gone, by us or by another process */
        pc->stats.evictions += e == 0;
    }
    return total;
}

/* Scans, evicts when over the cap and allowed, and records the total as the new estimate. */
static kiln_status scan_total(pcache *pc, bool may_evict, uint64_t *bytes, base_error *err) {
    scan_files files = {0};
    kiln_status st = scan(pc, &files, err);
    if (st == KILN_OK) {
        uint64_t total = 0;
        for (size_t i = 0; i < files.len; i++)
            total += files.data[i].size;
        if (may_evict && total > pc->max_bytes)
            total = evict(pc, &files, total);
        pc->estimate_bytes = total;
        pc->scanned = true;
        *bytes = total;
    }
    BASE_VEC_FREE(&pc->alloc, &files);
    return st;
}

kiln_status pcache_scan_and_evict(pcache *pc, bool may_evict, base_error *err) {
    base_error scan_err = {0};
    uint64_t total = 0;
    kiln_status st = scan_total(pc, may_evict, &total, &scan_err);
    if (st == KILN_ERROR_IO) {
        /* Listing is not needed to run: count this handle's writes only from now on. */
        base_log(BASE_LOG_DEBUG, "shaders_cache", "%s", base_error_message(&scan_err));
        pc->scanned = true;
        pc->estimate_bytes = 0;
        return KILN_OK;
    }
    if (st != KILN_OK)
        return base_error_set(err, st, "%s", base_error_message(&scan_err));
    return KILN_OK;
}

kiln_status pcache_trim(pcache *pc, uint64_t *bytes, base_error *err) {
    uint64_t total = 0;
    kiln_status st = pc->mode == PCACHE_MODE_OFF ? KILN_OK : scan_total(pc, true, &total, err);
    if (bytes)
        *bytes = total;
    return st;
}

kiln_status pcache_clear(pcache *pc, uint64_t *removed, base_error *err) {
    if (removed)
        *removed = 0;
    if (pc->mode == PCACHE_MODE_OFF)
        return KILN_OK;
    int e = pcache_fault(pc, PCACHE_IO_OPENDIR, pc->dir);
    DIR *d = e ? NULL : opendir(pc->dir);
    if (!d)
        return base_error_set(err, KILN_ERROR_IO, "cannot list the cache directory %s: %s", pc->dir,
                              strerror(e ? e : errno));
    kiln_status st = KILN_OK;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (!pcache_is_entry_name(ent->d_name) && !pcache_is_temp_name(ent->d_name))
            continue;
        e = pcache_unlink(pc, pcache_path(pc, ent->d_name));
        if (e == 0 && removed)
            (*removed)++;
        else if (e && e != ENOENT && st == KILN_OK)
            st = base_error_set(err, KILN_ERROR_IO, "cannot remove %s: %s", pc->path, strerror(e));
    }
    closedir(d);
    pc->estimate_bytes = 0;
    pc->pipeline_known = false;
    return st;
}

/* ---- listing ------------------------------------------------------------------------------ */

static pcache_entry_state state_of(pcache_verdict v) {
    switch (v) {
    case PCACHE_VERDICT_OK:
        return PCACHE_ENTRY_OK;
    case PCACHE_VERDICT_STALE:
        return PCACHE_ENTRY_STALE;
    case PCACHE_VERDICT_OTHER_DEVICE:
        return PCACHE_ENTRY_OTHER_DEVICE;
    default:
        return PCACHE_ENTRY_CORRUPT;
    }
}

/* Reads and describes one file; false when fn asked to stop. */
static kiln_status list_one(pcache *pc, const scan_file *f, pcache_entry_fn fn, void *user,
                            bool *go_on, base_error *err) {
    unsigned char *data = NULL;
    size_t size = 0;
    /* Larger than any cap a handle would use: not read (reported as corrupt). */
    uint64_t max = pc->max_bytes > LIST_READ_MAX ? pc->max_bytes : LIST_READ_MAX;
    int e = pcache_read_file(pc, pcache_path(pc, f->name), max, &data, &size, NULL, NULL);
    if (e == ENOENT)
        return KILN_OK; /* evicted or replaced since the scan */
    if (e == ENOMEM)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory to read %s", pc->path);
    pcache_entry entry = {.file_name = f->name,
                          .state = PCACHE_ENTRY_CORRUPT,
                          .file_size = e ? f->size : size,
                          .last_use_sec = (int64_t)f->mtime.tv_sec,
                          .last_use_nsec = (int64_t)f->mtime.tv_nsec};
    pcache_header h;
    if (!e) {
        pcache_verdict v =
            pcache_verify(pc, data, size, pc->has_identity ? &pc->identity : NULL, &h);
        entry.state = state_of(v);
        if (v != PCACHE_VERDICT_CORRUPT && h.format_version == PCACHE_FORMAT_VERSION) {
            entry.kind = (pcache_entry_kind)h.kind;
            entry.key = data + PCACHE_HEADER_SIZE;
            entry.key_size = h.key_size;
            entry.payload_size = h.payload_size;
            entry.payload = data + PCACHE_HEADER_SIZE + h.key_size;
            entry.identity = h.identity;
        }
    }
    *go_on = fn(user, &entry);
    pcache_free(pc, data, size);
    return KILN_OK;
}

kiln_status pcache_list(pcache *pc, pcache_entry_fn fn, void *user, base_error *err) {
    if (!fn)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "pcache_list: fn is NULL");
    if (pc->mode == PCACHE_MODE_OFF)
        return KILN_OK;
    scan_files files = {0};
    kiln_status st = scan(pc, &files, err);
    bool go_on = true;
    for (size_t i = 0; st == KILN_OK && go_on && i < files.len; i++)
        st = list_one(pc, &files.data[i], fn, user, &go_on, err);
    BASE_VEC_FREE(&pc->alloc, &files);
    return st;
}
