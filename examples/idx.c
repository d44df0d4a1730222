/* examples/idx.c: IDX files through zlib (see idx.h). */
#include "idx.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum {
    CHUNK = 1 << 20,          /* bytes per gzread call (its length is an unsigned int) */
    FIRST_CAPACITY = 1 << 16, /* the payload buffer starts here and doubles as bytes arrive */
};

/* One file being read: where its messages go. */
typedef struct reader {
    gzFile gz;
    const char *path;
    char *message;
    size_t message_size;
} reader;

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static idx_status
fail(reader *r, idx_status status, const char *field, const char *format, ...) {
    if (!r->message || r->message_size == 0)
        return status;
    int n = snprintf(r->message, r->message_size, "%s: %s: ", r->path, field);
    if (n >= 0 && (size_t)n < r->message_size) {
        va_list ap;
        va_start(ap, format);
        vsnprintf(r->message + n, r->message_size - (size_t)n, format, ap);
        va_end(ap);
    }
    return status;
}

/* The stream's state after a read: a corrupt stream or a read error is IDX_ERROR_READ, input
 * that ended inside a gzip stream IDX_ERROR_TRUNCATED; a clean end (or none yet) is IDX_OK.
 * zlib decompresses ahead of what was asked, so a broken stream may show while reading an
 * earlier field than the one it breaks: the field named is then the gzip stream itself. */
static idx_status stream_state(reader *r) {
    int errnum = Z_OK;
    const char *what = gzerror(r->gz, &errnum);
    if (errnum == Z_OK)
        return IDX_OK;
    size_t n = strlen(r->path); /* zlib's message begins with the path, which ours has */
    if (strncmp(what, r->path, n) == 0 && what[n] == ':' && what[n + 1] == ' ')
        what += n + 2;
    if (errnum == Z_BUF_ERROR)
        return fail(r, IDX_ERROR_TRUNCATED, "gzip stream", "ends early (%s)", what);
    if (errnum == Z_ERRNO)
        return fail(r, IDX_ERROR_READ, "read", "%s", strerror(errno));
    if (errnum == Z_MEM_ERROR)
        return fail(r, IDX_ERROR_NO_MEMORY, "gzip stream", "out of memory in zlib");
    return fail(r, IDX_ERROR_READ, "gzip stream", "corrupt (%s)", what);
}

/* Reads up to n bytes into buf (fewer at the end of the input: *got says how many). */
static idx_status read_some(reader *r, uint8_t *buf, size_t n, size_t *got) {
    *got = 0;
    while (*got < n) {
        size_t want = n - *got < CHUNK ? n - *got : CHUNK;
        int k = gzread(r->gz, buf + *got, (unsigned)want);
        if (k <= 0)
            break;
        *got += (size_t)k;
    }
    return stream_state(r);
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static const char *type_name(uint8_t code) {
    switch (code) {
    case 0x08:
        return "unsigned byte";
    case 0x09:
        return "signed byte";
    case 0x0B:
        return "short";
    case 0x0C:
        return "int";
    case 0x0D:
        return "float";
    case 0x0E:
        return "double";
    default:
        return "no IDX type";
    }
}

/* The magic number and the dims; out->ndim, dims and bytes. */
static idx_status read_header(reader *r, uint32_t ndim, idx_array *out) {
    uint8_t head[4 * IDX_MAX_DIMS];
    size_t got;
    idx_status st = read_some(r, head, 4, &got);
    if (st != IDX_OK)
        return st;
    if (got == 0)
        return fail(r, IDX_ERROR_TRUNCATED, "magic", "the file is empty");
    if (got < 4)
        return fail(r, IDX_ERROR_TRUNCATED, "magic", "the file ends after %zu of 4 bytes", got);
    uint32_t magic = be32(head), want = IDX_TYPE_U8 << 8 | ndim;
    if (head[0] != 0 || head[1] != 0)
        return fail(r, IDX_ERROR_MAGIC, "magic",
                    "0x%08x is no IDX magic number (0x0000 then a type code and ndim); expected "
                    "0x%08x",
                    magic, want);
    if (head[2] != IDX_TYPE_U8)
        return fail(r, IDX_ERROR_TYPE, "type code", "0x%02x (%s), expected 0x08 (unsigned byte)",
                    head[2], type_name(head[2]));
    if (head[3] != ndim)
        return fail(r, IDX_ERROR_NDIM, "ndim", "%u (magic 0x%08x), expected %u (magic 0x%08x)",
                    head[3], magic, ndim, want);
    st = read_some(r, head, 4 * (size_t)ndim, &got);
    if (st != IDX_OK)
        return st;
    if (got < 4 * (size_t)ndim)
        return fail(r, IDX_ERROR_TRUNCATED, "dims", "the header ends after %zu of %u bytes", got,
                    4 * ndim);
    size_t bytes = 1;
    bool overflow = false;
    char shape[IDX_MAX_DIMS * 16];
    int n = 0;
    for (uint32_t i = 0; i < ndim; i++) {
        out->dims[i] = be32(head + 4 * i);
        overflow |= __builtin_mul_overflow(bytes, (size_t)out->dims[i], &bytes);
        n += snprintf(shape + n, sizeof shape - (size_t)n, i ? " x %u" : "%u", out->dims[i]);
    }
    if (overflow)
        return fail(r, IDX_ERROR_SIZE, "dims", "%s bytes overflows a size", shape);
    if (bytes > IDX_MAX_BYTES)
        return fail(r, IDX_ERROR_SIZE, "dims", "%s = %zu bytes, beyond the limit of %zu", shape,
                    bytes, IDX_MAX_BYTES);
    out->ndim = ndim;
    out->bytes = bytes;
    return IDX_OK;
}

/* The payload: out->bytes bytes into a buffer that grows as they arrive, then the end. */
static idx_status read_payload(reader *r, idx_array *out) {
    size_t have = 0, capacity = 0;
    uint8_t *data = NULL;
    idx_status st = IDX_OK;
    while (have < out->bytes) {
        if (have == capacity) {
            size_t next = capacity ? 2 * capacity : FIRST_CAPACITY;
            next = next < out->bytes ? next : out->bytes;
            uint8_t *grown = realloc(data, next);
            if (!grown) {
                st = fail(r, IDX_ERROR_NO_MEMORY, "payload", "out of memory for %zu bytes", next);
                goto free_data;
            }
            data = grown;
            capacity = next;
        }
        size_t got;
        st = read_some(r, data + have, capacity - have, &got);
        if (st != IDX_OK)
            goto free_data;
        have += got;
        if (have < capacity) {
            st = fail(r, IDX_ERROR_TRUNCATED, "payload", "%zu bytes, the dims (%u, ...) need %zu",
                      have, out->dims[0], out->bytes);
            goto free_data;
        }
    }
    uint8_t extra;
    size_t got;
    st = read_some(r, &extra, 1, &got);
    if (st == IDX_OK && got)
        st = fail(r, IDX_ERROR_TRAILING, "payload", "more than the %zu bytes the dims give",
                  out->bytes);
    if (st != IDX_OK)
        goto free_data;
    out->data = data;
    return IDX_OK;
free_data:
    free(data);
    return st;
}

idx_status idx_read(const char *path, uint32_t ndim, idx_array *out, char *message,
                    size_t message_size) {
    reader r = {NULL, path ? path : "(null)", message, message_size};
    if (message && message_size)
        message[0] = '\0';
    if (!out)
        return fail(&r, IDX_ERROR_OPEN, "arguments", "no output array");
    memset(out, 0, sizeof *out);
    if (ndim < 1 || ndim > IDX_MAX_DIMS)
        return fail(&r, IDX_ERROR_NDIM, "ndim", "%u asked for, this reader takes 1 to %d", ndim,
                    IDX_MAX_DIMS);
    if (!path)
        return fail(&r, IDX_ERROR_OPEN, "path", "no path");
    errno = 0;
    r.gz = gzopen(path, "rb");
    if (!r.gz)
        return fail(&r, IDX_ERROR_OPEN, "open", "%s", errno ? strerror(errno) : "out of memory");
    idx_status st = read_header(&r, ndim, out);
    if (st == IDX_OK)
        st = read_payload(&r, out);
    int closed = gzclose(r.gz);
    if (st == IDX_OK && closed != Z_OK) {
        free(out->data);
        st = fail(&r, closed == Z_BUF_ERROR ? IDX_ERROR_TRUNCATED : IDX_ERROR_READ, "close",
                  "zlib error %d", closed);
    }
    if (st != IDX_OK)
        memset(out, 0, sizeof *out);
    return st;
}

void idx_array_finish(idx_array *a) {
    if (!a)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

const char *idx_status_string(idx_status status) {
    switch (status) {
    case IDX_OK:
        return "success";
    case IDX_ERROR_OPEN:
        return "cannot open the file";
    case IDX_ERROR_READ:
        return "read error or corrupt gzip stream";
    case IDX_ERROR_TRUNCATED:
        return "truncated file";
    case IDX_ERROR_MAGIC:
        return "not an IDX file";
    case IDX_ERROR_TYPE:
        return "not an IDX file of unsigned bytes";
    case IDX_ERROR_NDIM:
        return "wrong number of dims";
    case IDX_ERROR_SIZE:
        return "dims too large";
    case IDX_ERROR_TRAILING:
        return "bytes after the payload";
    case IDX_ERROR_MISMATCH:
        return "images and labels disagree";
    case IDX_ERROR_NO_MEMORY:
        return "out of memory";
    }
    return "unknown status";
}

idx_status idx_dataset_load(const char *images_path, const char *labels_path, uint32_t classes,
                            idx_dataset *out, char *message, size_t message_size) {
    if (!out)
        return idx_read(NULL, 3, NULL, message, message_size);
    memset(out, 0, sizeof *out);
    idx_status st = idx_read(images_path, 3, &out->images, message, message_size);
    if (st == IDX_OK)
        st = idx_read(labels_path, 1, &out->labels, message, message_size);
    if (st != IDX_OK)
        goto finish;
    reader r = {NULL, labels_path, message, message_size};
    if (out->labels.dims[0] != out->images.dims[0]) {
        st = fail(&r, IDX_ERROR_MISMATCH, "dims[0]", "%u labels, but %s holds %u images",
                  out->labels.dims[0], images_path, out->images.dims[0]);
        goto finish;
    }
    for (size_t i = 0; i < out->labels.bytes; i++) {
        if (out->labels.data[i] >= classes) {
            st = fail(&r, IDX_ERROR_MISMATCH, "payload", "label %zu is %u, not a class (0 to %u)",
                      i, out->labels.data[i], classes - 1);
            goto finish;
        }
    }
    out->count = out->images.dims[0];
    out->rows = out->images.dims[1];
    out->cols = out->images.dims[2];
    return IDX_OK;
finish:
    idx_dataset_finish(out);
    return st;
}

void idx_dataset_finish(idx_dataset *d) {
    if (!d)
        return;
    idx_array_finish(&d->images);
    idx_array_finish(&d->labels);
    d->count = d->rows = d->cols = 0;
}
