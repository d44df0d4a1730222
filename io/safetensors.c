/* The safetensors reader (include/kiln/kiln_safetensors.h, docs/safetensors.md): the file is
 * mapped, its JSON header parsed with cJSON and checked whole at open (every field, every
 * offset against the data, overlaps, duplicates), then copied into one block the context's
 * allocator owns and the cJSON tree freed. Tensors are made through the public API
 * (kiln_from_data, kiln_detach), each once per file handle and dtype. */
#define _POSIX_C_SOURCE 200809L
#include "eng.h"

#include <kiln/kiln_safetensors.h>

#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The stored dtypes safetensors defines, their sizes and the Kiln dtype each loads as bit for
 * bit (-1: none). */
#define IO_DTYPES(X)                                                                               \
    X(BOOL, 1, KILN_BOOL)                                                                          \
    X(U8, 1, KILN_U8)                                                                              \
    X(I8, 1, KILN_I8)                                                                              \
    X(F8_E5M2, 1, -1)                                                                              \
    X(F8_E4M3, 1, -1)                                                                              \
    X(I16, 2, -1)                                                                                  \
    X(U16, 2, -1)                                                                                  \
    X(F16, 2, KILN_F16)                                                                            \
    X(BF16, 2, -1)                                                                                 \
    X(I32, 4, KILN_I32)                                                                            \
    X(U32, 4, KILN_U32)                                                                            \
    X(F32, 4, KILN_F32)                                                                            \
    X(F64, 8, -1)                                                                                  \
    X(I64, 8, KILN_I64)                                                                            \
    X(U64, 8, -1)

typedef enum io_dtype {
#define X(name, size, kiln) IO_##name,
    IO_DTYPES(X)
#undef X
        IO_DTYPE_COUNT
} io_dtype;

static const struct {
    const char *name;
    uint32_t size;
    int kiln; /* kiln_dtype, or -1 */
} io_dtypes[] = {
#define X(name, size, kiln) {#name, size, kiln},
    IO_DTYPES(X)
#undef X
};
_Static_assert(sizeof io_dtypes / sizeof io_dtypes[0] == IO_DTYPE_COUNT, "io_dtypes");

typedef struct io_entry {
    const char *name; /* in the file's string block */
    io_dtype dtype;
    uint32_t ndim;
    int64_t shape[KILN_MAX_DIMS];
    uint64_t begin, end;                    /* in the data, after the header */
    kiln_tensor *loaded[KILN_DTYPE_COUNT_]; /* the file's handle per dtype loaded as */
} io_entry;

typedef struct io_meta {
    const char *key, *value;
} io_meta;

struct kiln_safetensors {
    kiln_context *ctx;
    const uint8_t *map; /* the whole file */
    size_t map_size;
    const uint8_t *data; /* the tensors' bytes: map + 8 + header length */
    uint64_t data_size;
    uint32_t count, meta_count;
    io_entry *entries;  /* count, header order */
    io_entry **by_name; /* count, sorted by name (lookups) */
    io_meta *meta;      /* meta_count, sorted by key */
    char *strings;      /* names, keys and values, each NUL-terminated */
    size_t strings_size;
};

/* ---- errors -------------------------------------------------------------------------------- */

/* What kiln_safetensors_open is reading: the messages name the file. */
typedef struct io_open {
    kiln_context *ctx;
    const char *path;
} io_open;

static kiln_status open_fail(const io_open *o, kiln_status status, const char *fmt, ...)
    BASE_PRINTF(3, 4);
static kiln_status open_fail(const io_open *o, kiln_status status, const char *fmt, ...) {
    char detail[BASE_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return base_error_set(&o->ctx->err, status, "kiln_safetensors_open: %.200s: %s", o->path,
                          detail);
}

/* ---- header checks ------------------------------------------------------------------------- */

/* A JSON number that is an integer in [0, 2^53] (cJSON keeps numbers as doubles: larger ones
 * would not be exact). */
static bool json_uint(const cJSON *item, uint64_t *out) {
    if (!cJSON_IsNumber(item))
        return false;
    double v = item->valuedouble;
    if (!(v >= 0 && v <= 9007199254740992.0) || v != (double)(uint64_t)v)
        return false;
    *out = (uint64_t)v;
    return true;
}

static bool dtype_from_name(const char *s, io_dtype *out) {
    for (int d = 0; d < IO_DTYPE_COUNT; d++) {
        if (strcmp(s, io_dtypes[d].name) == 0) {
            *out = (io_dtype)d;
            return true;
        }
    }
    return false;
}

/* Checks one tensor's object and fills e (its name set by the caller). */
static kiln_status parse_entry(const io_open *o, const cJSON *item, uint64_t data_size,
                               io_entry *e) {
    const char *n = item->string;
    if (!cJSON_IsObject(item))
        return open_fail(o, KILN_ERROR_CORRUPT_DATA, "tensor '%.100s' is not a JSON object", n);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dtype))
        return open_fail(o, KILN_ERROR_CORRUPT_DATA, "tensor '%.100s': %s", n,
                         dtype ? "\"dtype\" is not a string" : "no \"dtype\"");
    if (!dtype_from_name(dtype->valuestring, &e->dtype))
        return open_fail(o, KILN_ERROR_CORRUPT_DATA, "tensor '%.100s': unknown dtype '%.32s'", n,
                         dtype->valuestring);
    if (!cJSON_IsArray(shape))
        return open_fail(o, KILN_ERROR_CORRUPT_DATA, "tensor '%.100s': %s", n,
                         shape ? "\"shape\" is not an array" : "no \"shape\"");
    int rank = cJSON_GetArraySize(shape);
    if (rank > KILN_MAX_DIMS)
        return open_fail(o, KILN_ERROR_LIMIT_EXCEEDED,
                         "tensor '%.100s': \"shape\" has %d dims (Kiln's limit: %d)", n, rank,
                         KILN_MAX_DIMS);
    e->ndim = (uint32_t)rank;
    uint64_t bytes = io_dtypes[e->dtype].size;
    uint32_t d = 0;
    for (const cJSON *s = shape->child; s; s = s->next, d++) {
        uint64_t size;
        if (!json_uint(s, &size))
            return open_fail(o, KILN_ERROR_CORRUPT_DATA,
                             "tensor '%.100s': \"shape\"[%u] is not an integer in [0, 2^53]", n, d);
        if (__builtin_mul_overflow(bytes, size, &bytes) || bytes > INT64_MAX)
            return open_fail(o, KILN_ERROR_OVERFLOW,
                             "tensor '%.100s': the size of \"shape\" overflows (at dim %u)", n, d);
        e->shape[d] = (int64_t)size;
    }
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2)
        return open_fail(o, KILN_ERROR_CORRUPT_DATA, "tensor '%.100s': %s", n,
                         offsets ? "\"data_offsets\" is not an array of 2 integers"
                                 : "no \"data_offsets\"");
    if (!json_uint(offsets->child, &e->begin) || !json_uint(offsets->child->next, &e->end))
        return open_fail(o, KILN_ERROR_CORRUPT_DATA,
                         "tensor '%.100s': \"data_offsets\" are not integers in [0, 2^53]", n);
    if (e->end < e->begin)
        return open_fail(o, KILN_ERROR_CORRUPT_DATA,
                         "tensor '%.100s': \"data_offsets\" [%" PRIu64 ", %" PRIu64
                         "] end before they begin",
                         n, e->begin, e->end);
    if (e->end > data_size)
        return open_fail(o, KILN_ERROR_CORRUPT_DATA,
                         "tensor '%.100s': \"data_offsets\" [%" PRIu64 ", %" PRIu64
                         "] reach beyond the data (%" PRIu64 " bytes)",
                         n, e->begin, e->end, data_size);
    if (e->end - e->begin != bytes)
        return open_fail(o, KILN_ERROR_CORRUPT_DATA,
                         "tensor '%.100s': \"data_offsets\" [%" PRIu64 ", %" PRIu64
                         "] hold %" PRIu64 " bytes, but its \"shape\" of %s needs %" PRIu64,
                         n, e->begin, e->end, e->end - e->begin, io_dtypes[e->dtype].name, bytes);
    return KILN_OK;
}

static int entry_by_name(const void *a, const void *b) {
    return strcmp((*(io_entry *const *)a)->name, (*(io_entry *const *)b)->name);
}

static int entry_by_offset(const void *a, const void *b) {
    const io_entry *x = *(io_entry *const *)a, *y = *(io_entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int meta_by_key(const void *a, const void *b) {
    return strcmp(((const io_meta *)a)->key, ((const io_meta *)b)->key);
}

/* Copies s into the string block at *at. */
static const char *keep_string(kiln_safetensors *f, size_t *at, const char *s) {
    size_t n = strlen(s) + 1;
    char *out = f->strings + *at;
    memcpy(out, s, n);
    *at += n;
    return out;
}

/* Duplicates (names sorted) and overlaps (f->by_name reused, sorted by offset). */
static kiln_status check_layout(const io_open *o, kiln_safetensors *f) {
    for (uint32_t i = 1; i < f->count; i++) {
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0)
            return open_fail(o, KILN_ERROR_CORRUPT_DATA, "tensor '%.100s' appears twice",
                             f->by_name[i]->name);
    }
    for (uint32_t i = 1; i < f->meta_count; i++) {
        if (strcmp(f->meta[i - 1].key, f->meta[i].key) == 0)
            return open_fail(o, KILN_ERROR_CORRUPT_DATA,
                             "\"__metadata__\" has the key '%.100s' twice", f->meta[i].key);
    }
    io_entry **order = f->by_name;
    if (f->count > 1)
        qsort(order, f->count, sizeof *order, entry_by_offset);
    const io_entry *last = NULL; /* the nonempty tensor that ends last so far */
    for (uint32_t i = 0; i < f->count; i++) {
        const io_entry *e = order[i];
        if (e->begin == e->end)
            continue;
        if (last && e->begin < last->end)
            return open_fail(o, KILN_ERROR_CORRUPT_DATA,
                             "tensors '%.100s' [%" PRIu64 ", %" PRIu64 "] and '%.100s' [%" PRIu64
                             ", %" PRIu64 "] overlap",
                             last->name, last->begin, last->end, e->name, e->begin, e->end);
        last = e;
    }
    if (f->count > 1)
        qsort(order, f->count, sizeof *order, entry_by_name);
    return KILN_OK;
}

/* Fills f from the parsed header (a JSON object). */
static kiln_status read_header(const io_open *o, kiln_safetensors *f, const cJSON *root) {
    if (!cJSON_IsObject(root))
        return open_fail(o, KILN_ERROR_CORRUPT_DATA, "the header is not a JSON object");
    /* Counts and string sizes first: one block for the entries, one for the strings. */
    size_t strings = 0;
    uint32_t count = 0, meta_count = 0;
    const cJSON *metadata = NULL;
    for (const cJSON *item = root->child; item; item = item->next) {
        if (strcmp(item->string, "__metadata__") == 0) {
            if (metadata)
                return open_fail(o, KILN_ERROR_CORRUPT_DATA, "\"__metadata__\" appears twice");
            if (!cJSON_IsObject(item))
                return open_fail(o, KILN_ERROR_CORRUPT_DATA,
                                 "\"__metadata__\" is not a JSON object");
            metadata = item;
            for (const cJSON *m = item->child; m; m = m->next) {
                if (!cJSON_IsString(m))
                    return open_fail(o, KILN_ERROR_CORRUPT_DATA,
                                     "\"__metadata__\": the value of '%.100s' is not a string",
                                     m->string);
                strings += strlen(m->string) + strlen(m->valuestring) + 2;
                meta_count++;
            }
            continue;
        }
        if (count == UINT32_MAX)
            return open_fail(o, KILN_ERROR_LIMIT_EXCEEDED, "too many tensors");
        strings += strlen(item->string) + 1;
        count++;
    }
    kiln_context *ctx = o->ctx;
    /* The sizes first: free_file frees what was allocated by them. */
    f->count = count;
    f->meta_count = meta_count;
    f->strings_size = strings ? strings : 1;
    f->entries = base_calloc(&ctx->alloc, count ? count : 1, sizeof *f->entries);
    f->by_name = base_calloc(&ctx->alloc, count ? count : 1, sizeof *f->by_name);
    f->meta = base_calloc(&ctx->alloc, meta_count ? meta_count : 1, sizeof *f->meta);
    f->strings = base_malloc(&ctx->alloc, strings ? strings : 1);
    if (!f->entries || !f->by_name || !f->meta || !f->strings)
        return open_fail(o, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for the header");
    size_t at = 0;
    uint32_t i = 0;
    for (const cJSON *item = root->child; item; item = item->next) {
        if (item == metadata)
            continue;
        io_entry *e = &f->entries[i];
        kiln_status st = parse_entry(o, item, f->data_size, e);
        if (st != KILN_OK)
            return st;
        e->name = keep_string(f, &at, item->string);
        f->by_name[i++] = e;
    }
    i = 0;
    for (const cJSON *m = metadata ? metadata->child : NULL; m; m = m->next, i++) {
        f->meta[i].key = keep_string(f, &at, m->string);
        f->meta[i].value = keep_string(f, &at, m->valuestring);
    }
    if (count > 1)
        qsort(f->by_name, count, sizeof *f->by_name, entry_by_name);
    if (meta_count > 1)
        qsort(f->meta, meta_count, sizeof *f->meta, meta_by_key);
    return check_layout(o, f);
}

/* Parses the header's bytes (copied, NUL-terminated: cJSON reads a little past a string's
 * end on some malformed inputs) and reads it into f. */
static kiln_status parse_header(const io_open *o, kiln_safetensors *f, const uint8_t *bytes,
                                size_t n) {
    enum { PAD = 8 };
    char *text = base_calloc(&o->ctx->alloc, n + PAD, 1);
    if (!text)
        return open_fail(o, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a %zu-byte header", n);
    memcpy(text, bytes, n);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, n, &end, false);
    kiln_status st = KILN_OK;
    if (!root) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        st = open_fail(o, KILN_ERROR_CORRUPT_DATA,
                       "the header is not valid JSON (at byte %zu of %zu)", at, n);
        goto free_text;
    }
    /* Only spaces may follow the object (safetensors pads the header with them). */
    for (size_t k = (size_t)(end - text); k < n; k++) {
        if (text[k] != ' ' && text[k] != '\t' && text[k] != '\n' && text[k] != '\r') {
            st = open_fail(o, KILN_ERROR_CORRUPT_DATA,
                           "the header has bytes after its JSON object (at byte %zu of %zu)", k, n);
            goto free_tree;
        }
    }
    st = read_header(o, f, root);
free_tree:
    cJSON_Delete(root);
free_text:
    base_free(&o->ctx->alloc, text, n + PAD);
    return st;
}

/* ---- open and close ------------------------------------------------------------------------ */

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Opens and maps the file: f->map and f->map_size. */
static kiln_status map_file(const io_open *o, kiln_safetensors *f) {
    /* O_NONBLOCK: opening a FIFO without a writer would block; it is refused after fstat. */
    int fd = open(o->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        return open_fail(o, err == ENOENT ? KILN_ERROR_NOT_FOUND : KILN_ERROR_IO,
                         "cannot open it: %s", strerror(err));
    }
    kiln_status st = KILN_OK;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = open_fail(o, KILN_ERROR_IO, "cannot stat it: %s", strerror(errno));
        goto close_fd;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = open_fail(o, KILN_ERROR_IO, "not a regular file (%s)",
                       S_ISDIR(sb.st_mode)    ? "a directory"
                       : S_ISFIFO(sb.st_mode) ? "a FIFO"
                       : S_ISCHR(sb.st_mode)  ? "a character device"
                       : S_ISBLK(sb.st_mode)  ? "a block device"
                       : S_ISSOCK(sb.st_mode) ? "a socket"
                                              : "not a file");
        goto close_fd;
    }
    if (sb.st_size < 8) {
        st = open_fail(o, KILN_ERROR_CORRUPT_DATA,
                       "%lld bytes long: too short for the 8-byte header length",
                       (long long)sb.st_size);
        goto close_fd;
    }
#if SIZE_MAX < UINT64_MAX
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        st = open_fail(o, KILN_ERROR_LIMIT_EXCEEDED, "too large to map");
        goto close_fd;
    }
#endif
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        st = open_fail(o, KILN_ERROR_IO, "cannot map it: %s", strerror(errno));
        goto close_fd;
    }
    f->map = map;
    f->map_size = (size_t)sb.st_size;
close_fd:
    close(fd); /* the mapping stays */
    return st;
}

/* Checks the header length against the file and the limit, then parses the header. */
static kiln_status read_file(const io_open *o, kiln_safetensors *f) {
    uint64_t n = le64(f->map);
    if (n > KILN_SAFETENSORS_MAX_HEADER)
        return open_fail(o, KILN_ERROR_LIMIT_EXCEEDED,
                         "a header length of %" PRIu64 " bytes (the limit is %d)", n,
                         KILN_SAFETENSORS_MAX_HEADER);
    if (n > f->map_size - 8)
        return open_fail(o, KILN_ERROR_CORRUPT_DATA,
                         "a header length of %" PRIu64 " bytes, but the file has %zu after it", n,
                         f->map_size - 8);
    f->data = f->map + 8 + n;
    f->data_size = f->map_size - 8 - n;
    return parse_header(o, f, f->map + 8, (size_t)n);
}

static void free_file(kiln_safetensors *f) {
    kiln_context *ctx = f->ctx;
    for (uint32_t i = 0; f->entries && i < f->count; i++) {
        for (int d = 0; d < KILN_DTYPE_COUNT_; d++)
            kiln_release(f->entries[i].loaded[d]);
    }
    size_t count = f->count ? f->count : 1, meta = f->meta_count ? f->meta_count : 1;
    base_free(&ctx->alloc, f->entries, count * sizeof *f->entries);
    base_free(&ctx->alloc, f->by_name, count * sizeof *f->by_name);
    base_free(&ctx->alloc, f->meta, meta * sizeof *f->meta);
    base_free(&ctx->alloc, f->strings, f->strings_size);
    if (f->map)
        munmap((void *)(uintptr_t)f->map, f->map_size);
    base_free(&ctx->alloc, f, sizeof *f);
}

kiln_status kiln_safetensors_open(kiln_context *ctx, const char *path, kiln_safetensors **out) {
    if (out)
        *out = NULL;
    if (!ctx)
        return KILN_ERROR_INVALID_ARGUMENT;
    kiln_status st = eng_call_begin(ctx);
    if (st != KILN_OK)
        return st;
    if (!path || !out)
        return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_safetensors_open: %s is NULL", path ? "out" : "path");
    const io_open o = {ctx, path};
    uint16_t probe = 1;
    uint8_t low;
    memcpy(&low, &probe, 1);
    if (low != 1)
        return open_fail(&o, KILN_ERROR_UNSUPPORTED, "a big-endian host (the data is little)");
    kiln_safetensors *f = base_calloc(&ctx->alloc, 1, sizeof *f);
    if (!f)
        return open_fail(&o, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory");
    f->ctx = ctx;
    st = map_file(&o, f);
    if (st == KILN_OK)
        st = read_file(&o, f);
    if (st != KILN_OK) {
        free_file(f);
        return st;
    }
    *out = f;
    return KILN_OK;
}

void kiln_safetensors_close(kiln_safetensors *f) {
    if (f)
        free_file(f);
}

/* ---- queries ------------------------------------------------------------------------------- */

uint32_t kiln_safetensors_count(const kiln_safetensors *f) {
    return f ? f->count : 0;
}

const char *kiln_safetensors_name(const kiln_safetensors *f, uint32_t i) {
    return f && i < f->count ? f->entries[i].name : NULL;
}

static io_entry *find(const kiln_safetensors *f, const char *name) {
    io_entry key = {.name = name}, *k = &key;
    io_entry **hit = f->count ? bsearch(&k, f->by_name, f->count, sizeof k, entry_by_name) : NULL;
    return hit ? *hit : NULL;
}

/* A failed query's message: it replaces an earlier failure's, but never a sticky error. */
static kiln_status query_fail(kiln_context *ctx, kiln_status status, const char *fmt, ...)
    BASE_PRINTF(3, 4);
static kiln_status query_fail(kiln_context *ctx, kiln_status status, const char *fmt, ...) {
    if (ctx->sticky)
        return status;
    va_list ap;
    va_start(ap, fmt);
    base_error_clear(&ctx->err);
    base_error_setv(&ctx->err, status, fmt, ap);
    va_end(ap);
    return status;
}

kiln_status kiln_safetensors_info(const kiln_safetensors *f, const char *name, const char **dtype,
                                  uint32_t *ndim, int64_t *shape) {
    if (!f)
        return KILN_ERROR_INVALID_ARGUMENT;
    if (!name)
        return query_fail(f->ctx, KILN_ERROR_INVALID_ARGUMENT,
                          "kiln_safetensors_info: name is NULL");
    const io_entry *e = find(f, name);
    if (!e)
        return query_fail(f->ctx, KILN_ERROR_NOT_FOUND,
                          "kiln_safetensors_info: no tensor '%.100s' in the file", name);
    if (dtype)
        *dtype = io_dtypes[e->dtype].name;
    if (ndim)
        *ndim = e->ndim;
    if (shape)
        memcpy(shape, e->shape, e->ndim * sizeof *shape);
    return KILN_OK;
}

const char *kiln_safetensors_metadata(const kiln_safetensors *f, const char *key) {
    if (!f || !key || f->meta_count == 0)
        return NULL;
    io_meta k = {.key = key};
    const io_meta *hit = bsearch(&k, f->meta, f->meta_count, sizeof k, meta_by_key);
    return hit ? hit->value : NULL;
}

/* ---- load ---------------------------------------------------------------------------------- */

/* IEEE binary16 to binary32, exactly (NaN payloads kept, signalling ones too). */
static uint32_t f16_to_f32_bits(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f)
        return sign | 0x7f800000u | man << 13;
    if (exp != 0)
        return sign | (exp + 112) << 23 | man << 13;
    /* Zero or subnormal: man * 2^-24, exact in binary32. */
    float v = (float)man * 0x1p-24f;
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return sign | bits;
}

/* The stored bytes of e as numel values of dtype `to` in a new block of the context (the
 * caller frees `*size` bytes), or NULL with the error recorded. */
static void *convert(kiln_safetensors *f, const io_entry *e, uint64_t numel, size_t *size) {
    kiln_context *ctx = f->ctx;
    const uint8_t *src = f->data + e->begin;
    if (numel > SIZE_MAX / 4)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY,
                        "kiln_safetensors_load: '%.100s' is too large to convert", e->name);
    *size = (size_t)numel * 4;
    uint32_t *dst = base_malloc(&ctx->alloc, *size ? *size : 1);
    if (!dst)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY,
                        "kiln_safetensors_load: no memory to convert '%.100s' (%zu bytes)", e->name,
                        *size);
    for (uint64_t i = 0; i < numel; i++) {
        uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
        dst[i] = e->dtype == IO_BF16 ? (uint32_t)h << 16 : f16_to_f32_bits(h);
    }
    return dst;
}

/* Whether a stored BOOL tensor holds only 0 and 1. */
static bool bools_valid(const uint8_t *p, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        if (p[i] > 1)
            return false;
    }
    return true;
}

/* Makes the file's own handle of e as dtype (the caller has checked the conversion). */
static kiln_tensor *upload(kiln_safetensors *f, const io_entry *e, kiln_dtype dtype) {
    kiln_context *ctx = f->ctx;
    uint64_t numel = 1;
    for (uint32_t d = 0; d < e->ndim; d++)
        numel *= (uint64_t)e->shape[d]; /* checked at open */
    const uint8_t *src = f->data + e->begin;
    if ((int)dtype == io_dtypes[e->dtype].kiln) {
        if (e->dtype == IO_BOOL && !bools_valid(src, numel))
            return eng_fail(ctx, KILN_ERROR_CORRUPT_DATA,
                            "kiln_safetensors_load: tensor '%.100s' (BOOL) holds a byte other "
                            "than 0 and 1",
                            e->name);
        return kiln_from_data(ctx, dtype, e->ndim, e->shape, src);
    }
    size_t size = 0;
    void *tmp = convert(f, e, numel, &size);
    if (!tmp)
        return NULL;
    kiln_tensor *t = kiln_from_data(ctx, dtype, e->ndim, e->shape, tmp);
    base_free(&ctx->alloc, tmp, size ? size : 1);
    return t;
}

/* Whether stored dtype s loads as d, or the error. */
static kiln_status loadable(io_dtype s, kiln_dtype d) {
    if (io_dtypes[s].kiln == (int)d)
        return KILN_OK;
    if (d == KILN_F32 && (s == IO_F16 || s == IO_BF16))
        return KILN_OK;
    if (io_dtypes[s].kiln < 0 && s != IO_BF16)
        return KILN_ERROR_UNSUPPORTED;
    return KILN_ERROR_DTYPE_MISMATCH;
}

/* The Kiln dtypes a loadable stored dtype loads as, in words. */
static const char *loads_as(io_dtype s) {
    if (s == IO_F16)
        return "f16 or f32";
    return kiln_dtype_name(s == IO_BF16 ? KILN_F32 : (kiln_dtype)io_dtypes[s].kiln);
}

static kiln_tensor *load_impl(kiln_safetensors *f, const char *name, kiln_dtype dtype,
                              kiln_tensor **made) {
    kiln_context *ctx = f->ctx;
    if (!name)
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_safetensors_load: name is NULL");
    if ((unsigned)dtype >= KILN_DTYPE_COUNT_)
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_safetensors_load: unknown dtype %d",
                        (int)dtype);
    io_entry *e = find(f, name);
    if (!e)
        return eng_fail(ctx, KILN_ERROR_NOT_FOUND,
                        "kiln_safetensors_load: no tensor '%.100s' in the file", name);
    kiln_status st = loadable(e->dtype, dtype);
    if (st == KILN_ERROR_UNSUPPORTED)
        return eng_fail(ctx, st,
                        "kiln_safetensors_load: tensor '%.100s' is %s, which Kiln cannot load",
                        name, io_dtypes[e->dtype].name);
    if (st != KILN_OK)
        return eng_fail(ctx, st,
                        "kiln_safetensors_load: tensor '%.100s' is %s: it loads as %s, not %s",
                        name, io_dtypes[e->dtype].name, loads_as(e->dtype), kiln_dtype_name(dtype));
    if (!e->loaded[dtype]) {
        kiln_tensor *t = upload(f, e, dtype);
        if (!t)
            return NULL;
        eng_t(t)->scope = 0; /* the file's own: no scope of the caller releases it */
        e->loaded[dtype] = *made = t;
    }
    return kiln_detach(e->loaded[dtype]);
}

kiln_tensor *kiln_safetensors_load(kiln_safetensors *f, const char *name, kiln_dtype dtype) {
    if (!f)
        return NULL;
    kiln_context *ctx = f->ctx;
    /* A region of temporaries, so that an error of the calls made inside names this one; the
     * file's new handle and the result leave it. */
    if (ctx->temp_depth == 0)
        ctx->call = "kiln_safetensors_load";
    size_t mark = eng_temps_begin(ctx);
    kiln_tensor *made = NULL, *t = load_impl(f, name, dtype, &made);
    kiln_tensor *keep[2] = {made, t};
    eng_temps_end_many(ctx, mark, 2, keep);
    return t;
}
