/* kilninfo --cache, --cache-clear: the kernel cache of shaders_cache/, opened without a device
 * identity (management only), so both work on a machine without a Vulkan driver, and with the
 * engine's payload version (engine/run/cache_version.h), so that the entries this build's engine
 * reads are "ok" and only those of another version "stale". */
#define _POSIX_C_SOURCE 200809L

#include "cache.h"

#include "cache_version.h"

#include "pcache.h"
#include "report.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

enum { KEY_SHOWN = 24 }; /* key bytes printed before "..." */

static const char *state_name(pcache_entry_state s) {
    switch (s) {
    case PCACHE_ENTRY_OK:
        return "ok";
    case PCACHE_ENTRY_OTHER_DEVICE:
        return "other-device";
    case PCACHE_ENTRY_STALE:
        return "stale";
    default:
        return "corrupt";
    }
}

static const char *kind_name(pcache_entry_kind k) {
    return k == PCACHE_KIND_ENTRY ? "kernel" : k == PCACHE_KIND_PIPELINE ? "pipeline" : "-";
}

/* The key in hex, cut after KEY_SHOWN bytes. out holds 2 * KEY_SHOWN + 4 bytes. */
static void key_hex(const pcache_entry *e, char *out) {
    size_t n = e->key_size < KEY_SHOWN ? e->key_size : KEY_SHOWN;
    const unsigned char *k = e->key;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", k[i]);
    if (e->key_size > KEY_SHOWN)
        strcat(out, "...");
    if (!e->key)
        strcpy(out, "-");
}

/* "2026-11-22T01:30:00Z" */
static void time_utc(int64_t sec, char *out, size_t size) {
    time_t t = (time_t)sec;
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(out, size, "%lld", (long long)sec);
}

/* The kernel's name stored in an entry the engine reads (engine/run/cache_version.h), else "". */
static void entry_name(const pcache_entry *e, char out[ENG_CACHE_NAME_SIZE]) {
    out[0] = '\0';
    const unsigned char *p = e->payload;
    if (!p || e->kind != PCACHE_KIND_ENTRY || e->state != PCACHE_ENTRY_OK ||
        e->payload_size < ENG_CACHE_NAME_OFFSET + ENG_CACHE_NAME_SIZE)
        return;
    uint32_t magic =
        (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    if (magic != ENG_CACHE_PAYLOAD_MAGIC)
        return;
    size_t i = 0;
    for (; i + 1 < ENG_CACHE_NAME_SIZE; i++) {
        unsigned char c = p[ENG_CACHE_NAME_OFFSET + i];
        if (c == '\0')
            break;
        out[i] = c > ' ' && c < 0x7f ? (char)c : '?'; /* printable, no spaces */
    }
    out[i] = '\0';
}

typedef struct listing {
    report *r; /* NULL: text table */
    FILE *out;
    uint64_t count, bytes;
} listing;

static bool print_entry(void *user, const pcache_entry *e) {
    listing *l = user;
    char key[2 * KEY_SHOWN + 4], when[32], device[24], name[ENG_CACHE_NAME_SIZE];
    key_hex(e, key);
    entry_name(e, name);
    time_utc(e->last_use_sec, when, sizeof when);
    snprintf(device, sizeof device, "%04x:%04x", e->identity.vendor_id, e->identity.device_id);
    l->count++;
    l->bytes += e->file_size;
    if (!l->r) {
        fprintf(l->out, "%-51s %10llu  %s  %-8s %-12s %-11s %s\n", key,
                (unsigned long long)e->file_size, when, kind_name(e->kind), state_name(e->state),
                e->key ? device : "-", name[0] ? name : "-");
        return true;
    }
    report_object_begin(l->r, NULL);
    report_str(l->r, "file", e->file_name);
    report_str(l->r, "key", key);
    report_u64(l->r, "key_size", e->key_size);
    report_u64(l->r, "size", e->file_size);
    report_u64(l->r, "payload_size", e->payload_size);
    report_u64(l->r, "last_use", (uint64_t)(e->last_use_sec > 0 ? e->last_use_sec : 0));
    report_str(l->r, "last_use_utc", when);
    report_str(l->r, "kind", kind_name(e->kind));
    report_str(l->r, "state", state_name(e->state));
    report_str(l->r, "name", name);
    report_u64(l->r, "vendor_id", e->identity.vendor_id);
    report_u64(l->r, "device_id", e->identity.device_id);
    report_u64(l->r, "driver_version", e->identity.driver_version);
    report_object_end(l->r);
    return true;
}

static int open_cache(pcache **pc) {
    base_error err = {0};
    pcache_options opt = {.payload_version = ENG_CACHE_PAYLOAD_VERSION};
    if (pcache_open(&opt, pc, &err) != KILN_OK) {
        fprintf(stderr, "kilninfo: %s\n", base_error_message(&err));
        return 1;
    }
    return 0;
}

static const char *mode_name(const pcache *pc) {
    switch (pcache_mode_of(pc)) {
    case PCACHE_MODE_READ_WRITE:
        return "read-write";
    case PCACHE_MODE_READ_ONLY:
        return "read-only";
    default:
        return pcache_directory(pc) ? "off (no usable directory)" : "off (KILN_CACHE)";
    }
}

int kilninfo_cache_list(FILE *out, bool json) {
    pcache *pc;
    if (open_cache(&pc))
        return 1;
    const char *dir = pcache_directory(pc) ? pcache_directory(pc) : "";
    report r;
    listing l = {.r = json ? &r : NULL, .out = out};
    if (json) {
        report_init(&r, out, true);
        report_u64(&r, "kilninfo_format", 1);
        report_object_begin(&r, "cache");
        report_str(&r, "directory", dir);
        report_str(&r, "mode", mode_name(pc));
        report_array_begin(&r, "entries");
    } else {
        fprintf(out, "cache: %s%s%s%s\n%-51s %10s  %-20s  %-8s %-12s %-11s %s\n", dir,
                *dir ? " (" : "", mode_name(pc), *dir ? ")" : "", "key", "bytes", "last use",
                "kind", "state", "device", "kernel");
    }
    base_error err = {0};
    kiln_status st = pcache_list(pc, print_entry, &l, &err);
    if (json) {
        report_array_end(&r);
        report_u64(&r, "count", l.count);
        report_u64(&r, "bytes", l.bytes);
        report_object_end(&r);
        report_finish(&r);
    } else {
        fprintf(out, "%llu entries, %llu bytes\n", (unsigned long long)l.count,
                (unsigned long long)l.bytes);
    }
    if (st != KILN_OK)
        fprintf(stderr, "kilninfo: %s\n", base_error_message(&err));
    pcache_close(pc);
    return st == KILN_OK ? 0 : 1;
}

int kilninfo_cache_clear(FILE *out) {
    pcache *pc;
    if (open_cache(&pc))
        return 1;
    uint64_t removed = 0;
    base_error err = {0};
    kiln_status st = pcache_clear(pc, &removed, &err);
    fprintf(out, "removed %llu cache files from %s\n", (unsigned long long)removed,
            pcache_directory(pc) ? pcache_directory(pc) : "(cache off)");
    if (st != KILN_OK)
        fprintf(stderr, "kilninfo: %s\n", base_error_message(&err));
    pcache_close(pc);
    return st == KILN_OK ? 0 : 1;
}
