#include "cache_helpers.h"

#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

const char *helper_tempdir(int slot) {
    static char paths[8][256];
    const char *tmp = getenv("TMPDIR");
    snprintf(paths[slot], sizeof paths[slot], "%s/kiln-pcache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(paths[slot]));
    return paths[slot];
}

void helper_rmtree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
            helper_rmtree(path);
        else
            unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

pcache_identity helper_identity(uint32_t seed) {
    pcache_identity id;
    memset(&id, 0, sizeof id);
    id.vendor_id = 0x10005 + seed;
    id.device_id = 0x0000 + seed * 3;
    id.driver_id = 13;
    id.driver_version = 0x5806000 + seed;
    for (unsigned i = 0; i < VK_UUID_SIZE; i++)
        id.pipeline_cache_uuid[i] = (uint8_t)(i * 7 + seed);
    return id;
}

pcache *helper_open(const char *dir, const pcache_identity *id, uint64_t max_bytes) {
    pcache *pc = NULL;
    base_error err = {0};
    pcache_options o = {.directory = dir, .identity = id, .max_bytes = max_bytes};
    kiln_status st = pcache_open(&o, &pc, &err);
    if (st != KILN_OK)
        fail_msg("pcache_open: %s", base_error_message(&err));
    assert_non_null(pc);
    return pc;
}

static int warnings;
static char last_warning[1024];

static void sink(void *user, base_log_level level, const char *line) {
    (void)user;
    if (level == BASE_LOG_WARN) {
        warnings++;
        snprintf(last_warning, sizeof last_warning, "%s", line);
    }
}

void helper_capture_log(void) {
    warnings = 0;
    last_warning[0] = '\0';
    base_log_set_sink(sink, NULL);
}

int helper_warnings(void) {
    return warnings;
}

const char *helper_last_warning(void) {
    return last_warning;
}

void helper_release_log(void) {
    base_log_set_sink(NULL, NULL);
}

int helper_count_files(const char *dir, const char *suffix, uint64_t *bytes) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    uint64_t total = 0;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name), sl = suffix ? strlen(suffix) : 0;
        if (e->d_name[0] == '.' || (suffix && (len < sl || strcmp(e->d_name + len - sl, suffix))))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            n++;
            total += (uint64_t)st.st_size;
        }
    }
    closedir(d);
    if (bytes)
        *bytes = total;
    return n;
}

unsigned char *helper_read(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return buf;
}

void helper_write(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
}

const char *helper_single_entry(const char *dir) {
    static char path[4096];
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len > 3 && strcmp(e->d_name + len - 3, ".kc") == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            n++;
        }
    }
    closedir(d);
    assert_int_equal(n, 1);
    return path;
}

void helper_set_mtime(const char *path, int64_t sec) {
    struct timespec t[2] = {{.tv_sec = (time_t)sec}, {.tv_sec = (time_t)sec}};
    assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

int64_t helper_mtime_ns(const char *path) {
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

void helper_fix_checksum(unsigned char *file, size_t size) {
    /* Same chaining as format.c: the header (72 bytes), then the rest, seeded alike. */
    uint32_t key_size = (uint32_t)file[56] | (uint32_t)file[57] << 8 | (uint32_t)file[58] << 16 |
                        (uint32_t)file[59] << 24;
    uint64_t h = base_hash_bytes(file, 72, 0x6b696c6e70636631ull);
    h = base_hash_bytes(file + 72, key_size, h);
    h = base_hash_bytes(file + 72 + key_size, size - 80 - key_size, h);
    for (int i = 0; i < 8; i++)
        file[size - 8 + i] = (unsigned char)(h >> (8 * i));
}
