/* A fuzz target of the safetensors reader (kiln_safetensors.h; docs/fuzzing.md): the input is
 * the file. It is written to a file of the process's own and opened on an interpreter context
 * whose allocator fails one allocation for a quarter of the inputs (which one, and whether, a
 * hash of the input decides, so that the bytes stay a file). A file that opens has every
 * tensor queried and loaded as every dtype, read back where that worked, and its metadata
 * looked up; a file that does not has a status, no handle and a message naming the call.
 * Checked besides what the sanitizers see: info succeeds for every listed name, a load either
 * returns a tensor of the stored shape or records an error, a read reads the same bytes twice,
 * and once the file is closed and the handles released no tensor, storage or allocated block
 * is left. A failed check prints "fuzz_safetensors: ..." and aborts. */
#define _POSIX_C_SOURCE 200809L
#include "test_alloc.h"

#include <kiln/kiln.h>
#include <kiln/kiln_safetensors.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum {
    FUZZ_TENSORS = 64,   /* tensors of a file queried and loaded at most */
    FUZZ_READ = 1 << 16, /* bytes of a tensor read back at most */
};

#define FUZZ_MAX_BLOCK ((size_t)64 << 20)

static void *fuzz_alloc(void *user, void *ptr, size_t osize, size_t nsize) {
    if (nsize > FUZZ_MAX_BLOCK)
        return NULL;
    return test_alloc_fn(user, ptr, osize, nsize);
}

__attribute__((format(printf, 1, 2))) static void fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_safetensors: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

static void quiet(void *user, kiln_log_level level, const char *module, const char *message) {
    (void)user, (void)level, (void)module, (void)message;
}

static char path[64];

static void remove_input(void) {
    remove(path);
}

/* The file inputs are written to (one per process, removed at exit). */
static const char *input_path(void) {
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/kiln-fuzz-safetensors-%ld", (long)getpid());
        atexit(remove_input);
    }
    return path;
}

static void write_input(const uint8_t *data, size_t size) {
    FILE *fp = fopen(input_path(), "wb");
    if (!fp || fwrite(data, 1, size, fp) != size || fclose(fp) != 0)
        fuzz_fail("cannot write %s", input_path());
}

/* FNV-1a: which allocation fails, the same for the same input on every run. */
static uint64_t hash(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3u;
    return h;
}

/* Loads tensor `name` as dtype, checks the result, reads it back twice. */
static void load_one(kiln_context *ctx, kiln_safetensors *f, const char *name, kiln_dtype dtype,
                     uint32_t ndim, const int64_t *shape, bool may_fail) {
    kiln_tensor *t = kiln_safetensors_load(f, name, dtype);
    if (!t) {
        if (kiln_context_status(ctx) == KILN_OK)
            fuzz_fail("kiln_safetensors_load('%s', %s) returned NULL without an error", name,
                      kiln_dtype_name(dtype));
        kiln_context_clear_error(ctx);
        return;
    }
    int64_t got[KILN_MAX_DIMS], numel = 1;
    if (kiln_tensor_ndim(t) != ndim || kiln_tensor_dtype(t) != dtype ||
        kiln_tensor_shape(t, got) != KILN_OK || memcmp(got, shape, ndim * sizeof *got) != 0)
        fuzz_fail("kiln_safetensors_load('%s'): not a tensor of the stored shape and dtype %s",
                  name, kiln_dtype_name(dtype));
    for (uint32_t d = 0; d < ndim; d++)
        numel *= shape[d];
    size_t bytes = (size_t)numel * kiln_dtype_size(dtype);
    if (bytes <= FUZZ_READ) {
        static uint8_t a[FUZZ_READ], b[FUZZ_READ];
        kiln_status s1 = kiln_read(t, a, bytes), s2 = kiln_read(t, b, bytes);
        if (s1 == KILN_OK && s2 == KILN_OK && memcmp(a, b, bytes) != 0)
            fuzz_fail("two reads of '%s' differ", name);
        if ((s1 != KILN_OK || s2 != KILN_OK) && !may_fail)
            fuzz_fail("a read of '%s' failed: %s", name, kiln_context_message(ctx));
        kiln_context_clear_error(ctx);
    }
    kiln_release(t);
}

static void explore(kiln_context *ctx, kiln_safetensors *f, bool may_fail) {
    uint32_t count = kiln_safetensors_count(f);
    for (uint32_t i = 0; i < count && i < FUZZ_TENSORS; i++) {
        const char *name = kiln_safetensors_name(f, i);
        const char *dtype = NULL;
        uint32_t ndim = 99;
        int64_t shape[KILN_MAX_DIMS];
        if (!name || kiln_safetensors_info(f, name, &dtype, &ndim, shape) != KILN_OK || !dtype ||
            ndim > KILN_MAX_DIMS)
            fuzz_fail("tensor %u ('%s') is listed but has no info: %s", i, name ? name : "",
                      kiln_context_message(ctx));
        for (int d = 0; d < KILN_DTYPE_COUNT_; d++)
            load_one(ctx, f, name, (kiln_dtype)d, ndim, shape, may_fail);
    }
    if (kiln_safetensors_name(f, count) != NULL)
        fuzz_fail("a name past the count");
    (void)kiln_safetensors_metadata(f, "format");
    (void)kiln_safetensors_metadata(f, "");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kiln_set_log_callback(quiet, NULL);
    write_input(data, size);
    test_alloc ta = {0};
    kiln_context_options opt = {.device = "interp", .alloc = fuzz_alloc, .alloc_user = &ta};
    kiln_context *ctx = NULL;
    if (kiln_context_create(&opt, &ctx) != KILN_OK)
        fuzz_fail("kiln_context_create failed");
    uint64_t h = hash(data, size);
    bool may_fail = h % 4 == 0;
    if (may_fail)
        ta.fail_at = ta.count + 1 + (long)(h >> 8) % 64;

    kiln_safetensors *f = (kiln_safetensors *)&ta;
    kiln_status st = kiln_safetensors_open(ctx, input_path(), &f);
    if (st != KILN_OK) {
        const char *msg = kiln_context_message(ctx);
        if (f || kiln_context_status(ctx) != st || strncmp(msg, "kiln_safetensors_open: ", 23) != 0)
            fuzz_fail("a failed open: handle %p, status %s, message '%s'", (void *)f,
                      kiln_status_string(st), msg);
        if (st == KILN_ERROR_OUT_OF_HOST_MEMORY && !ta.failures)
            fuzz_fail("out of memory without a failed allocation: %s", msg);
    } else {
        explore(ctx, f, may_fail);
        kiln_safetensors_close(f);
    }
    kiln_context_clear_error(ctx);
    kiln_stats s = kiln_context_stats(ctx);
    if (s.live_tensors != 0 || s.live_storages != 0)
        fuzz_fail("%llu tensors and %llu storages left after close",
                  (unsigned long long)s.live_tensors, (unsigned long long)s.live_storages);
    kiln_context_destroy(ctx);
    if (ta.live_blocks != 0 || ta.size_mismatches != 0)
        fuzz_fail("%ld blocks left, %ld frees of the wrong size", ta.live_blocks,
                  ta.size_mismatches);
    kiln_set_log_callback(NULL, NULL);
    return 0;
}
