/* bench_shaders_cache: latency of shaders_cache/'s put and get (a hit: open, read, verify the
 * checksum, record the use, copy) for kernel-sized payloads, against the bare floor of the
 * same I/O without a cache: write+close of a new file, and open+read+close of one. The cache
 * lives in a fresh directory under $TMPDIR (or /tmp), removed afterwards. */
#define _POSIX_C_SOURCE 200809L

#include "bench_util.h"
#include "pcache.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { RUNS = 301, KEYS = 64 };

static double time_put(pcache *pc, const unsigned char *payload, size_t size, int run) {
    char key[32];
    snprintf(key, sizeof key, "kernel-%d", run % KEYS);
    double t = (bench_now_ms() * 1e-3);
    kiln_status st = pcache_put(pc, key, strlen(key), payload, size, NULL);
    t = (bench_now_ms() * 1e-3) - t;
    return st == KILN_OK ? t : -1.0;
}

static double time_get(pcache *pc, size_t size, int run) {
    char key[32];
    snprintf(key, sizeof key, "kernel-%d", run % KEYS);
    void *p = NULL;
    size_t n = 0;
    double t = (bench_now_ms() * 1e-3);
    kiln_status st = pcache_get(pc, key, strlen(key), &p, &n, NULL);
    t = (bench_now_ms() * 1e-3) - t;
    pcache_free(pc, p, n);
    return st == KILN_OK && n == size ? t : -1.0;
}

/* The floor: a plain file written (write + close, then rename like the cache) and read. */
static double raw_write(const char *dir, const unsigned char *payload, size_t size, int run) {
    char tmp[512], path[512];
    snprintf(tmp, sizeof tmp, "%s/raw-%d.tmp", dir, run % KEYS);
    snprintf(path, sizeof path, "%s/raw-%d", dir, run % KEYS);
    double t = (bench_now_ms() * 1e-3);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, payload, size) != (ssize_t)size || close(fd) != 0 ||
        rename(tmp, path) != 0)
        return -1.0;
    return (bench_now_ms() * 1e-3) - t;
}

static double raw_read(const char *dir, unsigned char *buf, size_t size, int run) {
    char path[512];
    snprintf(path, sizeof path, "%s/raw-%d", dir, run % KEYS);
    double t = (bench_now_ms() * 1e-3);
    int fd = open(path, O_RDONLY);
    if (fd < 0 || read(fd, buf, size) != (ssize_t)size)
        return -1.0;
    close(fd);
    return (bench_now_ms() * 1e-3) - t;
}

static void row(const char *name, double kiln, double ref, size_t size) {
    printf("%-28s %9.2f us %9.2f us %8.2fx %9.1f MB/s\n", name, kiln * 1e6, ref * 1e6, kiln / ref,
           (double)size / kiln * 1e-6);
}

static int bench_size(const char *dir, size_t size, bool durable) {
    pcache_identity id = {.vendor_id = 0x10005, .driver_version = 1};
    pcache *pc = NULL;
    pcache_options o = {.directory = dir, .identity = &id, .durable = durable};
    unsigned char *payload = malloc(size), *buf = malloc(size);
    if (!payload || !buf || pcache_open(&o, &pc, NULL) != KILN_OK)
        return 1;
    for (size_t i = 0; i < size; i++)
        payload[i] = (unsigned char)(i * 31);
    static double put[RUNS], get[RUNS], wr[RUNS], rd[RUNS];
    int bad = 0;
    for (int r = 0; r < RUNS; r++) {
        bad |= (put[r] = time_put(pc, payload, size, r)) < 0;
        bad |= (wr[r] = raw_write(dir, payload, size, r)) < 0;
    }
    for (int r = 0; r < RUNS; r++) {
        bad |= (get[r] = time_get(pc, size, r)) < 0;
        bad |= (rd[r] = raw_read(dir, buf, size, r)) < 0;
    }
    pcache_close(pc);
    free(payload);
    free(buf);
    if (bad) {
        fprintf(stderr, "bench_shaders_cache: a put or get failed\n");
        return 1;
    }
    char name[64];
    snprintf(name, sizeof name, "put %zu KiB%s", size >> 10, durable ? " (durable)" : "");
    row(name, bench_median(put, RUNS), bench_median(wr, RUNS), size);
    snprintf(name, sizeof name, "get (hit) %zu KiB", size >> 10);
    if (!durable)
        row(name, bench_median(get, RUNS), bench_median(rd, RUNS), size);
    return 0;
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/kiln-bench-pcache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("bench_shaders_cache: mkdtemp");
        return 1;
    }
    printf("%-28s %12s %12s %9s %s\n", "case", "kiln", "raw file I/O", "ratio", "throughput");
    static const size_t sizes[] = {1 << 10, 16 << 10, 256 << 10};
    int status = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && !status; i++)
        status = bench_size(dir, sizes[i], false);
    if (!status)
        status = bench_size(dir, 16 << 10, true);
    printf("medians of %d runs over %d keys in %s\n", RUNS, KEYS, dir);
    remove_dir(dir);
    return status;
}
