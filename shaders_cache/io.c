/* File I/O of the cache: whole-file reads, atomic writes (temporary file + rename), mkdir -p.
 * Every operation first asks the fault hook, so tests reach the read-only and full-disk paths
 * although they run as root. Results are errno values (0: success). */
#define _POSIX_C_SOURCE 200809L

#include "pcache_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int pcache_fault(pcache *pc, pcache_io_op op, const char *path) {
    return pc->io_fault ? pc->io_fault(pc->io_fault_user, op, path) : 0;
}

int pcache_unlink(pcache *pc, const char *path) {
    int e = pcache_fault(pc, PCACHE_IO_UNLINK, path);
    if (e)
        return e;
    return unlink(path) == 0 ? 0 : errno;
}

/* Reads exactly size bytes (or fewer when the file shrank: then EIO). */
static int read_all(pcache *pc, int fd, const char *path, unsigned char *buf, size_t size) {
    int e = pcache_fault(pc, PCACHE_IO_READ, path);
    if (e)
        return e;
    size_t done = 0;
    while (done < size) {
        ssize_t n = read(fd, buf + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return EIO; /* truncated under us */
        done += (size_t)n;
    }
    return 0;
}

static int read_open_file(pcache *pc, int fd, const char *path, uint64_t max_size,
                          unsigned char **data, size_t *size) {
    struct stat st;
    if (fstat(fd, &st) != 0)
        return errno;
    if (!S_ISREG(st.st_mode))
        return EINVAL;
    if ((uint64_t)st.st_size > max_size || (uint64_t)st.st_size > SIZE_MAX - 1)
        return EFBIG;
    size_t n = (size_t)st.st_size;
    unsigned char *buf = base_malloc(&pc->alloc, n ? n : 1);
    if (!buf)
        return ENOMEM;
    int e = read_all(pc, fd, path, buf, n);
    if (e) {
        base_free(&pc->alloc, buf, n ? n : 1);
        return e;
    }
    *data = buf;
    *size = n;
    return 0;
}

/* The last use of an entry is its mtime; a failure (read-only disk) only loses LRU order. */
static void touch(pcache *pc, int fd, const char *path) {
    if (pcache_fault(pc, PCACHE_IO_TOUCH, path))
        return;
    const struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_NOW}};
    if (futimens(fd, times) != 0)
        base_log(BASE_LOG_DEBUG, "shaders_cache", "cannot record the use of %s: %s", path,
                 strerror(errno));
}

int pcache_read_file(pcache *pc, const char *path, uint64_t max_size, unsigned char **data,
                     size_t *size, pcache_check_fn check, void *check_user) {
    *data = NULL;
    *size = 0;
    int e = pcache_fault(pc, PCACHE_IO_OPEN, path);
    if (e)
        return e;
    /* Only a regular file is an entry. Anything else in its place is never opened (a device
     * may act on an open), and what replaces the file between the look and the open cannot
     * block it: opening a FIFO for reading waits for a writer, for ever, unless O_NONBLOCK
     * (which regular files ignore). read_open_file checks the type of what was opened. */
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno;
    if (!S_ISREG(st.st_mode))
        return EINVAL;
    int fd;
    do
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return errno;
    e = read_open_file(pc, fd, path, max_size, data, size);
    if (!e && check && check(check_user, *data, *size))
        touch(pc, fd, path);
    close(fd);
    return e;
}

static int write_all(pcache *pc, int fd, const char *path, const void *data, size_t size) {
    int e = pcache_fault(pc, PCACHE_IO_WRITE, path);
    if (e)
        return e;
    const unsigned char *p = data;
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return ENOSPC;
        p += n;
        size -= (size_t)n;
    }
    return 0;
}

/* A temporary file beside the entry: <entry>.tmp.<pid>.<sequence>, created exclusively. */
static int create_temp(pcache *pc, const char *name, char *temp, size_t temp_size, int *fd) {
    for (int attempt = 0; attempt < 8; attempt++) {
        snprintf(temp, temp_size, "%s/%s.tmp.%ld.%llu", pc->dir, name, (long)getpid(),
                 (unsigned long long)pc->temp_seq++);
        int e = pcache_fault(pc, PCACHE_IO_CREATE, temp);
        if (e)
            return e;
        *fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (*fd >= 0)
            return 0;
        if (errno != EEXIST && errno != EINTR)
            return errno;
    }
    return EEXIST;
}

static int write_body(pcache *pc, int fd, const char *temp, const unsigned char *header,
                      const void *key, size_t key_size, const void *payload, size_t payload_size) {
    unsigned char sum[PCACHE_CHECKSUM_SIZE];
    pcache_put_u64(sum, pcache_checksum(header, key, key_size, payload, payload_size));
    int e = write_all(pc, fd, temp, header, PCACHE_HEADER_SIZE);
    if (!e)
        e = write_all(pc, fd, temp, key, key_size);
    if (!e)
        e = write_all(pc, fd, temp, payload, payload_size);
    if (!e)
        e = write_all(pc, fd, temp, sum, sizeof sum);
    return e;
}

static int sync_file(pcache *pc, int fd, const char *temp) {
    if (!pc->durable)
        return 0;
    int e = pcache_fault(pc, PCACHE_IO_SYNC, temp);
    if (e)
        return e;
    return fsync(fd) == 0 ? 0 : errno;
}

int pcache_write_file(pcache *pc, const char *name, const unsigned char *header, const void *key,
                      size_t key_size, const void *payload, size_t payload_size, pcache_io_op *op) {
    char temp[4096 + PCACHE_NAME_CAP];
    int fd = -1;
    *op = PCACHE_IO_CREATE;
    int e = create_temp(pc, name, temp, sizeof temp, &fd);
    if (e)
        return e;
    *op = PCACHE_IO_WRITE;
    e = write_body(pc, fd, temp, header, key, key_size, payload, payload_size);
    if (!e) {
        *op = PCACHE_IO_SYNC;
        e = sync_file(pc, fd, temp);
    }
    if (close(fd) != 0 && !e) { /* NFS and quotas may report a full disk only here */
        *op = PCACHE_IO_WRITE;
        e = errno;
    }
    if (!e) {
        *op = PCACHE_IO_RENAME;
        e = pcache_fault(pc, PCACHE_IO_RENAME, temp);
        if (!e && rename(temp, pcache_path(pc, name)) != 0)
            e = errno;
    }
    if (e)
        (void)unlink(temp); /* best effort: a leftover is removed by a later scan */
    return e;
}

/* One directory level; an existing directory (or a race creating it) is success. */
static int make_one(pcache *pc, const char *dir) {
    int e = pcache_fault(pc, PCACHE_IO_MKDIR, dir);
    if (e)
        return e;
    if (mkdir(dir, 0700) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(dir, &st) != 0)
            return errno;
        return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
    }
    return errno;
}

int pcache_mkdirs(pcache *pc, const char *dir) {
    /* Create each prefix ending at a '/', then dir itself, in pc->path (large enough). */
    size_t n = strlen(dir);
    if (n == 0 || n + 1 > pc->path_size)
        return ENAMETOOLONG;
    memcpy(pc->path, dir, n + 1);
    for (size_t i = 1; i < n; i++) {
        if (pc->path[i] != '/')
            continue;
        pc->path[i] = '\0';
        int e = make_one(pc, pc->path);
        pc->path[i] = '/';
        if (e)
            return e;
    }
    return make_one(pc, pc->path);
}
