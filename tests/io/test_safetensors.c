/* The safetensors reader (include/kiln/kiln_safetensors.h): good files written here and by
 * gen_safetensors.py (fixtures/small.safetensors), F16 and BF16 conversions over every bit
 * pattern, one upload per name, and every malformed file refused with a status and a message
 * naming the file and the field: each bad case, every truncated prefix, a FIFO, and a failing
 * allocator. Every test runs on the default device and on the interpreter. */
#include "engine_fixture.h"
#include "test_alloc.h"

#include <kiln/kiln_safetensors.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64]; /* the files the tests write */

static const char *path_of(const char *name) {
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* Writes bytes to dir/name; returns the path. */
static const char *write_bytes(const char *name, const void *bytes, size_t n) {
    const char *path = path_of(name);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(bytes, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
    return path;
}

/* A file of the header length `length`, then the header text, then `data_size` bytes of data. */
static size_t build(uint8_t *out, size_t cap, uint64_t length, const char *header, const void *data,
                    size_t data_size) {
    size_t h = strlen(header), n = 8 + h + data_size;
    assert_true(n <= cap);
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(length >> (8 * i));
    memcpy(out + 8, header, h);
    if (data_size)
        memcpy(out + 8 + h, data, data_size);
    return n;
}

/* A well-formed file: the header's own length, then data. */
static const char *write_file(const char *name, const char *header, const void *data,
                              size_t data_size) {
    static uint8_t buf[1 << 20];
    size_t n = build(buf, sizeof buf, strlen(header), header, data, data_size);
    return write_bytes(name, buf, n);
}

/* ---- good files ------------------------------------------------------------------------- */

static void test_io_safetensors_loads_python_fixture(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_safetensors *f = NULL;
    assert_int_equal(kiln_safetensors_open(ctx, KILN_IO_FIXTURES "/small.safetensors", &f),
                     KILN_OK);
    /* The header's order (gen_safetensors.py sorts keys, as the reference writer does). */
    const char *names[] = {"brain", "embed.weight", "empty", "half", "ids", "mask", "scalar"};
    assert_int_equal(kiln_safetensors_count(f), 7);
    for (uint32_t i = 0; i < 7; i++)
        assert_string_equal(kiln_safetensors_name(f, i), names[i]);
    assert_null(kiln_safetensors_name(f, 7));
    assert_string_equal(kiln_safetensors_metadata(f, "format"), "pt");
    assert_string_equal(kiln_safetensors_metadata(f, "source"), "gen_safetensors.py");
    assert_null(kiln_safetensors_metadata(f, "absent"));

    const char *dtype;
    uint32_t ndim;
    int64_t shape[KILN_MAX_DIMS];
    assert_int_equal(kiln_safetensors_info(f, "brain", &dtype, &ndim, shape), KILN_OK);
    assert_string_equal(dtype, "BF16");
    assert_int_equal(ndim, 2);
    assert_int_equal(shape[0], 3);
    assert_int_equal(shape[1], 2);
    assert_int_equal(kiln_safetensors_info(f, "scalar", NULL, &ndim, NULL), KILN_OK);
    assert_int_equal(ndim, 0);

    /* (i - 3) / 4: exact in F16 and BF16, so every form reads back the same floats. */
    const float ramp[6] = {-0.75f, -0.5f, -0.25f, 0.0f, 0.25f, 0.5f};
    kiln_tensor *w = kiln_safetensors_load(f, "embed.weight", KILN_F32);
    fx_assert_shape(w, 2, (const int64_t[]){2, 3});
    fx_check_f32(w, ramp, 6, 0, 0);
    kiln_tensor *b = kiln_safetensors_load(f, "brain", KILN_F32);
    fx_assert_shape(b, 2, (const int64_t[]){3, 2});
    fx_check_f32(b, ramp, 6, 0, 0);
    kiln_tensor *h32 = kiln_safetensors_load(f, "half", KILN_F32);
    fx_check_f32(h32, ramp, 6, 0, 0);
    kiln_tensor *h16 = kiln_safetensors_load(f, "half", KILN_F16);
    assert_int_equal(kiln_tensor_dtype(h16), KILN_F16);
    uint16_t halves[6];
    assert_int_equal(kiln_read(h16, halves, sizeof halves), KILN_OK);
    assert_int_equal(halves[0], 0xba00); /* -0.75 */
    assert_int_equal(halves[5], 0x3800); /* 0.5 */
    kiln_tensor *ids = kiln_safetensors_load(f, "ids", KILN_I64);
    fx_check_i64(ids, (const int64_t[]){1, -2, INT64_C(1) << 40}, 3);
    kiln_tensor *mask = kiln_safetensors_load(f, "mask", KILN_BOOL);
    fx_check_u8(mask, KILN_BOOL, (const uint8_t[]){1, 0}, 2);
    kiln_tensor *empty = kiln_safetensors_load(f, "empty", KILN_F32);
    fx_assert_shape(empty, 2, (const int64_t[]){0, 4});
    kiln_tensor *scalar = kiln_safetensors_load(f, "scalar", KILN_F32);
    fx_check_f32(scalar, (const float[]){2.5f}, 1, 0, 0);

    /* Loaded weights in a computation (w + brain reshaped to w's shape), realized and read. */
    kiln_tensor *sum = kiln_add(w, kiln_reshape(b, 2, (const int64_t[]){2, 3}));
    const float twice[6] = {-1.5f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f};
    assert_int_equal(kiln_realize(sum), KILN_OK);
    fx_check_f32(sum, twice, 6, 0, 0);
    kiln_safetensors_close(f);
    fx_check_f32(sum, twice, 6, 0, 0); /* the tensors outlive the file */
    fx_check_f32(w, ramp, 6, 0, 0);
}

static void test_io_safetensors_f16_every_value_exact(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { N = 65536 };
    static uint8_t data[2 * N];
    for (uint32_t i = 0; i < N; i++) {
        data[2 * i] = (uint8_t)i;
        data[2 * i + 1] = (uint8_t)(i >> 8);
    }
    const char *path =
        write_file("f16.safetensors",
                   "{\"h\":{\"dtype\":\"F16\",\"shape\":[65536],\"data_offsets\":[0,131072]}}",
                   data, sizeof data);
    kiln_safetensors *f = NULL;
    assert_int_equal(kiln_safetensors_open(ctx, path, &f), KILN_OK);
    static uint32_t got[N];
    static uint16_t same[N];
    assert_int_equal(kiln_read(kiln_safetensors_load(f, "h", KILN_F32), got, sizeof got), KILN_OK);
    assert_int_equal(kiln_read(kiln_safetensors_load(f, "h", KILN_F16), same, sizeof same),
                     KILN_OK);
    for (uint32_t i = 0; i < N; i++) {
        assert_int_equal(same[i], i); /* F16 as F16: bit for bit */
        /* The reference: the value by its definition, (-1)^s 2^(e-15) (1 + m/1024), or
         * 2^-14 m/1024 for subnormals; NaNs keep their payload in the high mantissa bits. */
        uint32_t s = i >> 15, e = (i >> 10) & 31, m = i & 1023, want;
        if (e == 31) {
            want = s << 31 | 0x7f800000u | m << 13;
        } else {
            double v = (e ? ldexp(1.0 + m / 1024.0, (int)e - 15) : ldexp(m / 1024.0, -14));
            float fv = (float)(s ? -v : v);
            memcpy(&want, &fv, sizeof want);
        }
        if (got[i] != want)
            fail_msg("F16 0x%04x: got 0x%08x, want 0x%08x", i, got[i], want);
    }
    kiln_safetensors_close(f);
}

static void test_io_safetensors_bf16_every_value_exact(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { N = 65536 };
    static uint8_t data[2 * N];
    for (uint32_t i = 0; i < N; i++) {
        data[2 * i] = (uint8_t)i;
        data[2 * i + 1] = (uint8_t)(i >> 8);
    }
    const char *path =
        write_file("bf16.safetensors",
                   "{\"b\":{\"dtype\":\"BF16\",\"shape\":[256,256],\"data_offsets\":[0,131072]}}",
                   data, sizeof data);
    kiln_safetensors *f = NULL;
    assert_int_equal(kiln_safetensors_open(ctx, path, &f), KILN_OK);
    static uint32_t got[N];
    kiln_tensor *t = kiln_safetensors_load(f, "b", KILN_F32);
    fx_assert_shape(t, 2, (const int64_t[]){256, 256});
    assert_int_equal(kiln_read(t, got, sizeof got), KILN_OK);
    for (uint32_t i = 0; i < N; i++) {
        if (got[i] != i << 16) /* the upper half of an F32, NaN payloads included */
            fail_msg("BF16 0x%04x: got 0x%08x", i, got[i]);
    }
    /* BF16 loads as F32 only. */
    assert_null(kiln_safetensors_load(f, "b", KILN_F16));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_safetensors_load", "'b' is BF16",
                      "loads as f32, not f16", NULL);
    kiln_safetensors_close(f);
}

static void test_io_safetensors_uploads_each_tensor_once(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_stats before = kiln_context_stats(ctx), after;
    const float v[4] = {1, 2, 3, 4};
    const char *path = write_file(
        "once.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", v,
        sizeof v);
    kiln_safetensors *f = NULL;
    assert_int_equal(kiln_safetensors_open(ctx, path, &f), KILN_OK);
    kiln_tensor *a = kiln_safetensors_load(f, "w", KILN_F32);
    kiln_tensor *b = kiln_safetensors_load(f, "w", KILN_F32);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b); /* two handles */
    after = kiln_context_stats(ctx);
    assert_int_equal(after.bytes_uploaded - before.bytes_uploaded, 16); /* one upload */
    assert_int_equal(kiln_fill_(a, 7.0), KILN_OK); /* one storage: b sees the write */
    fx_check_f32(b, (const float[]){7, 7, 7, 7}, 4, 0, 0);

    /* A load in a scope: the scope's end releases the caller's handle, not the file's. */
    kiln_scope_begin(ctx);
    kiln_tensor *c = kiln_safetensors_load(f, "w", KILN_F32);
    assert_non_null(c);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    kiln_tensor *d = kiln_safetensors_load(f, "w", KILN_F32);
    fx_check_f32(d, (const float[]){7, 7, 7, 7}, 4, 0, 0);
    after = kiln_context_stats(ctx);
    assert_int_equal(after.bytes_uploaded - before.bytes_uploaded, 16);

    kiln_safetensors_close(f);
    fx_check_f32(a, (const float[]){7, 7, 7, 7}, 4, 0, 0);
    assert_int_equal(kiln_release(a), KILN_OK);
    assert_int_equal(kiln_release(b), KILN_OK);
    assert_int_equal(kiln_release(d), KILN_OK);
    after = kiln_context_stats(ctx);
    assert_int_equal(after.live_tensors, before.live_tensors);
    assert_int_equal(after.live_storages, before.live_storages);
}

static void test_io_safetensors_allows_gaps_and_empty_tensors(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const float v[3] = {1, 2, 3};
    const char *path =
        write_file("gaps.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                   "\"y\":{\"dtype\":\"U8\",\"shape\":[2,0],\"data_offsets\":[0,0]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}   ",
                   v, sizeof v);
    kiln_safetensors *f = NULL;
    assert_int_equal(kiln_safetensors_open(ctx, path, &f), KILN_OK);
    assert_null(kiln_safetensors_metadata(f, "format")); /* no __metadata__ at all */
    fx_check_f32(kiln_safetensors_load(f, "b", KILN_F32), (const float[]){3}, 1, 0, 0);
    fx_assert_shape(kiln_safetensors_load(f, "y", KILN_U8), 2, (const int64_t[]){2, 0});
    kiln_safetensors_close(f);
}

/* ---- errors of load and info ------------------------------------------------------------ */

static void test_io_safetensors_load_rejects_bad_requests(void **state) {
    kiln_context *ctx = fx_ctx(state);
    uint8_t data[16] = {0};
    data[12] = 2; /* the BOOL byte */
    const char *path =
        write_file("req.safetensors",
                   "{\"f\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[4,12]},"
                   "\"m\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[12,13]}}",
                   data, 13);
    kiln_safetensors *f = NULL;
    assert_int_equal(kiln_safetensors_open(ctx, path, &f), KILN_OK);
    assert_null(kiln_safetensors_load(f, "nope", KILN_F32));
    fx_expect_message(ctx, KILN_ERROR_NOT_FOUND, "kiln_safetensors_load", "'nope'", NULL);
    assert_null(kiln_safetensors_load(f, "f", KILN_F16));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_safetensors_load", "'f' is F32",
                      "not f16", NULL);
    assert_null(kiln_safetensors_load(f, "d", KILN_F32));
    fx_expect_message(ctx, KILN_ERROR_UNSUPPORTED, "kiln_safetensors_load", "'d' is F64", NULL);
    assert_null(kiln_safetensors_load(f, "m", KILN_BOOL));
    fx_expect_message(ctx, KILN_ERROR_CORRUPT_DATA, "kiln_safetensors_load", "'m' (BOOL)", NULL);
    assert_null(kiln_safetensors_load(f, "f", (kiln_dtype)99));
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_safetensors_load", "99", NULL);
    assert_null(kiln_safetensors_load(f, NULL, KILN_F32));
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_safetensors_load", "name", NULL);
    assert_null(kiln_safetensors_load(NULL, "f", KILN_F32));
    /* info: not sticky */
    assert_int_equal(kiln_safetensors_info(f, "nope", NULL, NULL, NULL), KILN_ERROR_NOT_FOUND);
    fx_expect_message(ctx, KILN_ERROR_NOT_FOUND, "kiln_safetensors_info", "'nope'", NULL);
    assert_int_equal(kiln_safetensors_info(f, NULL, NULL, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_safetensors_info", "name", NULL);
    /* A query's failure leaves a sticky error as it was. */
    assert_null(kiln_safetensors_load(f, "nope", KILN_F32));
    assert_int_equal(kiln_safetensors_info(f, "f", NULL, NULL, NULL), KILN_OK);
    assert_int_equal(kiln_safetensors_info(f, "nope", NULL, NULL, NULL), KILN_ERROR_NOT_FOUND);
    fx_expect_message(ctx, KILN_ERROR_NOT_FOUND, "kiln_safetensors_load", "'nope'", NULL);
    assert_int_equal(kiln_safetensors_info(NULL, "f", NULL, NULL, NULL),
                     KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(kiln_safetensors_count(NULL), 0);
    assert_null(kiln_safetensors_name(NULL, 0));
    assert_null(kiln_safetensors_metadata(NULL, "k"));
    assert_null(kiln_safetensors_metadata(f, NULL));
    kiln_safetensors_close(f);
    kiln_safetensors_close(NULL);
}

/* ---- malformed files -------------------------------------------------------------------- */

typedef struct bad_case {
    const char *what;
    const char *header; /* NULL: the bytes are `raw` */
    size_t data_size;
    kiln_status status;
    const char *says; /* in the message */
} bad_case;

#define T(n, rest) "\"" n "\":{" rest "}"
#define F32_1 "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]"

static const bad_case bad_cases[] = {
    {"invalid JSON", "{\"a\":", 0, KILN_ERROR_CORRUPT_DATA, "not valid JSON"},
    {"empty header", "", 0, KILN_ERROR_CORRUPT_DATA, "not valid JSON"},
    {"trailing bytes", "{} x", 0, KILN_ERROR_CORRUPT_DATA, "after its JSON object"},
    {"not an object", "[1,2]", 0, KILN_ERROR_CORRUPT_DATA, "not a JSON object"},
    {"tensor not an object", "{\"a\":1}", 0, KILN_ERROR_CORRUPT_DATA, "'a' is not a JSON object"},
    {"no dtype", "{" T("a", "\"shape\":[1],\"data_offsets\":[0,4]") "}", 4, KILN_ERROR_CORRUPT_DATA,
     "'a': no \"dtype\""},
    {"dtype not a string", "{" T("a", "\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,4]") "}", 4,
     KILN_ERROR_CORRUPT_DATA, "\"dtype\" is not a string"},
    {"unknown dtype", "{" T("a", "\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]") "}", 4,
     KILN_ERROR_CORRUPT_DATA, "unknown dtype 'F33'"},
    {"no shape", "{" T("a", "\"dtype\":\"F32\",\"data_offsets\":[0,4]") "}", 4,
     KILN_ERROR_CORRUPT_DATA, "no \"shape\""},
    {"shape not an array", "{" T("a", "\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,4]") "}",
     4, KILN_ERROR_CORRUPT_DATA, "\"shape\" is not an array"},
    {"negative size", "{" T("a", "\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]") "}", 4,
     KILN_ERROR_CORRUPT_DATA, "\"shape\"[0] is not an integer"},
    {"fractional size",
     "{" T("a", "\"dtype\":\"F32\",\"shape\":[1,1.5],\"data_offsets\":[0,4]") "}", 4,
     KILN_ERROR_CORRUPT_DATA, "\"shape\"[1] is not an integer"},
    {"size a string", "{" T("a", "\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]") "}",
     4, KILN_ERROR_CORRUPT_DATA, "\"shape\"[0]"},
    {"huge size", "{" T("a", "\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,4]") "}", 4,
     KILN_ERROR_CORRUPT_DATA, "\"shape\"[0]"},
    {"17 dims",
     "{" T("a", "\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
                "\"data_offsets\":[0,4]") "}",
     4, KILN_ERROR_LIMIT_EXCEEDED, "17 dims"},
    {"shape product overflow",
     "{" T("a", "\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]") "}",
     4, KILN_ERROR_OVERFLOW, "overflows"},
    {"no data_offsets", "{" T("a", "\"dtype\":\"F32\",\"shape\":[1]") "}", 4,
     KILN_ERROR_CORRUPT_DATA, "no \"data_offsets\""},
    {"three offsets", "{" T("a", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]") "}", 8,
     KILN_ERROR_CORRUPT_DATA, "not an array of 2 integers"},
    {"offset not an integer",
     "{" T("a", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,null]") "}", 4,
     KILN_ERROR_CORRUPT_DATA, "are not integers"},
    {"end before begin", "{" T("a", "\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]") "}", 4,
     KILN_ERROR_CORRUPT_DATA, "end before they begin"},
    {"beyond the data", "{" T("a", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]") "}", 4,
     KILN_ERROR_CORRUPT_DATA, "reach beyond the data (4 bytes)"},
    {"size mismatch", "{" T("a", "\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]") "}", 8,
     KILN_ERROR_CORRUPT_DATA, "hold 4 bytes, but its \"shape\" of F32 needs 8"},
    {"overlap",
     "{" T("a", "\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]") "," T(
         "b", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]") "}",
     8, KILN_ERROR_CORRUPT_DATA, "overlap"},
    {"duplicate name", "{" T("a", F32_1) "," T("a", F32_1) "}", 4, KILN_ERROR_CORRUPT_DATA,
     "'a' appears twice"},
    {"metadata not an object", "{\"__metadata__\":[]}", 0, KILN_ERROR_CORRUPT_DATA,
     "\"__metadata__\" is not a JSON object"},
    {"metadata value not a string", "{\"__metadata__\":{\"k\":1}}", 0, KILN_ERROR_CORRUPT_DATA,
     "the value of 'k' is not a string"},
    {"metadata twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, KILN_ERROR_CORRUPT_DATA,
     "\"__metadata__\" appears twice"},
    {"metadata key twice", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0,
     KILN_ERROR_CORRUPT_DATA, "the key 'k' twice"},
};

static void test_io_safetensors_rejects_malformed_headers(void **state) {
    kiln_context *ctx = fx_ctx(state);
    static const uint8_t zeros[16];
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        const char *path = write_file("bad.safetensors", c->header, zeros, c->data_size);
        kiln_safetensors *f = (kiln_safetensors *)1;
        kiln_status st = kiln_safetensors_open(ctx, path, &f);
        if (st != c->status)
            fail_msg("%s: status %s (%s)", c->what, kiln_status_string(st),
                     kiln_context_message(ctx));
        assert_null(f);
        fx_expect_message(ctx, c->status, "kiln_safetensors_open", path, c->says, NULL);
    }
}

static void test_io_safetensors_rejects_bad_lengths(void **state) {
    kiln_context *ctx = fx_ctx(state);
    uint8_t buf[64];
    kiln_safetensors *f = NULL;
    /* shorter than the length field */
    const char *path = write_bytes("short.safetensors", "\x02\0\0\0", 5);
    assert_int_equal(kiln_safetensors_open(ctx, path, &f), KILN_ERROR_CORRUPT_DATA);
    fx_expect_message(ctx, KILN_ERROR_CORRUPT_DATA, "kiln_safetensors_open", "5 bytes long", NULL);
    path = write_bytes("zero.safetensors", "", 0);
    assert_int_equal(kiln_safetensors_open(ctx, path, &f), KILN_ERROR_CORRUPT_DATA);
    fx_expect_message(ctx, KILN_ERROR_CORRUPT_DATA, "kiln_safetensors_open", "0 bytes long", NULL);
    /* over the limit: refused before any allocation (a 2^64 - 1 length too) */
    const uint64_t lengths[] = {KILN_SAFETENSORS_MAX_HEADER + 1ull, UINT64_MAX};
    for (int i = 0; i < 2; i++) {
        size_t n = build(buf, sizeof buf, lengths[i], "{}", NULL, 0);
        path = write_bytes("huge.safetensors", buf, n);
        assert_int_equal(kiln_safetensors_open(ctx, path, &f), KILN_ERROR_LIMIT_EXCEEDED);
        fx_expect_message(ctx, KILN_ERROR_LIMIT_EXCEEDED, "kiln_safetensors_open",
                          "the limit is 100000000", NULL);
    }
    /* beyond the file */
    size_t n = build(buf, sizeof buf, 100, "{}", NULL, 0);
    path = write_bytes("beyond.safetensors", buf, n);
    assert_int_equal(kiln_safetensors_open(ctx, path, &f), KILN_ERROR_CORRUPT_DATA);
    fx_expect_message(ctx, KILN_ERROR_CORRUPT_DATA, "kiln_safetensors_open",
                      "a header length of 100 bytes, but the file has 2 after it", NULL);
    assert_null(f);
}

static void test_io_safetensors_rejects_other_files(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_safetensors *f = NULL;
    assert_int_equal(kiln_safetensors_open(ctx, path_of("missing"), &f), KILN_ERROR_NOT_FOUND);
    fx_expect_message(ctx, KILN_ERROR_NOT_FOUND, "kiln_safetensors_open", "missing", NULL);
    assert_int_equal(kiln_safetensors_open(ctx, dir, &f), KILN_ERROR_IO);
    fx_expect_message(ctx, KILN_ERROR_IO, "kiln_safetensors_open", "a directory", NULL);
    /* A FIFO without a writer: opening it must not block. */
    const char *fifo = path_of("fifo");
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(kiln_safetensors_open(ctx, fifo, &f), KILN_ERROR_IO);
    fx_expect_message(ctx, KILN_ERROR_IO, "kiln_safetensors_open", "a FIFO", NULL);
    unlink(fifo);
    assert_int_equal(kiln_safetensors_open(ctx, "/dev/zero", &f), KILN_ERROR_IO);
    fx_expect_message(ctx, KILN_ERROR_IO, "kiln_safetensors_open", "a character device", NULL);
    assert_int_equal(kiln_safetensors_open(ctx, NULL, &f), KILN_ERROR_INVALID_ARGUMENT);
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_safetensors_open", "path", NULL);
    assert_int_equal(kiln_safetensors_open(ctx, dir, NULL), KILN_ERROR_INVALID_ARGUMENT);
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_safetensors_open", "out", NULL);
    assert_int_equal(kiln_safetensors_open(NULL, dir, &f), KILN_ERROR_INVALID_ARGUMENT);
    assert_null(f);
}

/* Every prefix of a good file (its last tensor not empty) is refused, and nothing leaks. */
static void test_io_safetensors_rejects_every_truncated_prefix(void **state) {
    kiln_context *ctx = fx_ctx(state);
    FILE *fp = fopen(KILN_IO_FIXTURES "/small.safetensors", "rb");
    assert_non_null(fp);
    static uint8_t whole[4096];
    size_t n = fread(whole, 1, sizeof whole, fp);
    fclose(fp);
    assert_true(n > 8 && n < sizeof whole);
    kiln_stats before = kiln_context_stats(ctx), after;
    for (size_t k = 0; k < n; k++) {
        const char *path = write_bytes("prefix.safetensors", whole, k);
        kiln_safetensors *f = (kiln_safetensors *)1;
        kiln_status st = kiln_safetensors_open(ctx, path, &f);
        if (st == KILN_OK)
            fail_msg("the prefix of %zu bytes of %zu opened", k, n);
        assert_null(f);
        assert_true(st == KILN_ERROR_CORRUPT_DATA);
        kiln_context_clear_error(ctx);
    }
    after = kiln_context_stats(ctx);
    assert_int_equal(after.live_tensors, before.live_tensors);
}

/* Fails each allocation of open, load and close in turn (the allocator of a context of its
 * own): each failure is a status, and nothing leaks. */
static void test_io_safetensors_fails_every_allocation(void **state) {
    bool device = ((eng_fixture *)*state)->device;
    test_alloc ta = {0};
    kiln_context_options opt = {.device = device ? NULL : "interp",
                                .validation = device,
                                .alloc = test_alloc_fn,
                                .alloc_user = &ta};
    kiln_context *ctx = NULL;
    assert_int_equal(kiln_context_create(&opt, &ctx), KILN_OK);
    bool finished = false;
    long n = 1;
    for (; !finished && n < 10000; n++) {
        ta.fail_at = ta.count + n;
        kiln_safetensors *f = NULL;
        kiln_status st = kiln_safetensors_open(ctx, KILN_IO_FIXTURES "/small.safetensors", &f);
        if (st != KILN_OK) {
            assert_int_equal(st, KILN_ERROR_OUT_OF_HOST_MEMORY);
            assert_null(f);
            kiln_context_clear_error(ctx);
            continue;
        }
        kiln_tensor *t = kiln_safetensors_load(f, "brain", KILN_F32);
        kiln_tensor *u = t ? kiln_safetensors_load(f, "half", KILN_F16) : NULL;
        finished = ta.failures == 0 || ta.count < ta.fail_at;
        if (!u)
            assert_int_not_equal(kiln_context_status(ctx), KILN_OK);
        kiln_safetensors_close(f);
        kiln_release(t);
        kiln_release(u);
        kiln_context_clear_error(ctx);
        ta.failures = 0;
    }
    assert_true(finished);
    assert_true(n > 10); /* open and the loads allocate: failures were injected */
    ta.fail_at = 0;
    kiln_stats s = kiln_context_stats(ctx);
    assert_int_equal(s.live_tensors, 0);
    assert_int_equal(s.live_storages, 0);
    eng_fixture_context_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
    assert_int_equal(ta.size_mismatches, 0);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/kiln-st-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_io_safetensors_loads_python_fixture),
        ENG_TEST(test_io_safetensors_f16_every_value_exact),
        ENG_TEST(test_io_safetensors_bf16_every_value_exact),
        ENG_TEST(test_io_safetensors_uploads_each_tensor_once),
        ENG_TEST(test_io_safetensors_allows_gaps_and_empty_tensors),
        ENG_TEST(test_io_safetensors_load_rejects_bad_requests),
        ENG_TEST(test_io_safetensors_rejects_malformed_headers),
        ENG_TEST(test_io_safetensors_rejects_bad_lengths),
        ENG_TEST(test_io_safetensors_rejects_other_files),
        ENG_TEST(test_io_safetensors_rejects_every_truncated_prefix),
        ENG_TEST(test_io_safetensors_fails_every_allocation),
    };
    int failed = ENG_RUN_BOTH(tests);
    /* The test's files, then its folder. */
    const char *files[] = {"f16.safetensors",    "bf16.safetensors",  "once.safetensors",
                           "gaps.safetensors",   "req.safetensors",   "bad.safetensors",
                           "short.safetensors",  "zero.safetensors",  "huge.safetensors",
                           "beyond.safetensors", "prefix.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        unlink(path_of(files[i]));
    rmdir(dir);
    return failed;
}
