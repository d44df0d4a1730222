/* engine/: small types (u8, i8, bool, f16) on devices without 8/16-bit storage (issue 24), whose
 * buffers are u32 words holding the same bytes (emit.h storage_8bit; docs/gpus.md). Every case
 * runs on six contexts: the interpreter (the oracle), the device as it is, the device seen
 * through the "mobile-mid" profile (16-bit storage and f16 arithmetic, no 8-bit storage: u8, i8
 * and bool are packed), through "mobile-low" (no 8/16-bit storage, no f16 arithmetic: every
 * small type is packed and f16 rounds with integer operations) and through "mobile-low" with a
 * 1 KiB storage-buffer range (packed buffers bound in windows), and the device with every
 * feature but 8/16-bit storage, shaderInt8 and shaderFloat16 (eng_testing.h no_small_storage:
 * packed, with shaderInt64, so integer sums of small types run). The devices run with the
 * validation layer, and every module passes spirv-val: a module that used an 8- or 16-bit type
 * where the profile lacks the feature fails there. Each result is compared byte for byte with
 * the interpreter's (NaN with NaN, whatever its payload) and with values worked out by hand
 * in the comments. */
#include "eng_testing.h"
#include "engine_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NCTX = 6, MAX_BYTES = 16384 };

static const char *const ctx_names[NCTX] = {"interpreter",
                                            "device",
                                            "mobile-mid",
                                            "mobile-low",
                                            "mobile-low, 1 KiB windows",
                                            "device without 8/16-bit storage"};
/* The contexts with shaderInt64 (the profiles have none). */
enum { WITH_INT64 = 1 << 0 | 1 << 1 | 1 << 5 };

typedef struct packed_state {
    kiln_context *ctx[NCTX];
} packed_state;

static kiln_context *device_context(const char *profile, uint64_t range, bool no_small_storage) {
    kiln_context_options opt = {.validation = true, .profile = profile};
    kiln_context *ctx = NULL;
    eng_testing t = {.max_storage_range = range, .no_small_storage = no_small_storage};
    kiln_status st = eng_testing_context_create(&opt, &t, &ctx);
    if (st != KILN_OK)
        fprintf(stderr, "packed: no context for profile %s: %s\n", profile, kiln_status_string(st));
    return ctx;
}

static int setup(void **state) {
    packed_state *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->ctx[0] = eng_context_new(false); /* first: it keeps the drivers loaded */
    /* "none": the device as it is, whatever $KILN_PROFILE says */
    s->ctx[1] = device_context("none", 0, false);
    s->ctx[2] = device_context("mobile-mid", 0, false);
    s->ctx[3] = device_context("mobile-low", 0, false);
    s->ctx[4] = device_context("mobile-low", 1024, false);
    /* every small type packed, with shaderInt64: integer sums of small types run */
    s->ctx[5] = device_context("none", 0, true);
    *state = s;
    for (int i = 0; i < NCTX; i++) {
        if (!s->ctx[i])
            return -1;
    }
    return 0;
}

static int teardown(void **state) {
    packed_state *s = *state;
    for (int i = 0; s && i < NCTX; i++)
        eng_fixture_context_destroy(s->ctx[i]);
    free(s);
    return 0;
}

/* After each test: no context holds an error, no validation message. */
static int check(void **state) {
    packed_state *s = *state;
    int failed = 0;
    for (int i = 0; i < NCTX; i++) {
        if (kiln_context_status(s->ctx[i]) != KILN_OK) {
            fprintf(stderr, "%s: the test left an error: %s\n", ctx_names[i],
                    kiln_context_message(s->ctx[i]));
            kiln_context_clear_error(s->ctx[i]);
            failed = -1;
        }
        eng_fixture_assert_no_messages(s->ctx[i]);
    }
    return failed;
}

/* ---- comparing ------------------------------------------------------------------------------ */

/* A case builds its tensor on a context from its argument. */
typedef kiln_tensor *(*build_fn)(kiln_context *ctx, const void *arg);

static bool f16_nan(uint16_t h) {
    return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}

static bool f32_nan(uint32_t x) {
    return (x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu) != 0;
}

/* Element i of a (dtype) equals element i of b: the same bits, or both NaN. */
static bool same(kiln_dtype dtype, const void *a, const void *b, size_t i) {
    size_t size = kiln_dtype_size(dtype);
    const unsigned char *x = (const unsigned char *)a + i * size,
                        *y = (const unsigned char *)b + i * size;
    if (dtype == KILN_F16) {
        uint16_t hx, hy;
        memcpy(&hx, x, 2);
        memcpy(&hy, y, 2);
        return hx == hy || (f16_nan(hx) && f16_nan(hy));
    }
    if (dtype == KILN_F32) {
        uint32_t fx, fy;
        memcpy(&fx, x, 4);
        memcpy(&fy, y, 4);
        return fx == fy || (f32_nan(fx) && f32_nan(fy));
    }
    return memcmp(x, y, size) == 0;
}

static unsigned long long element_bits(kiln_dtype dtype, const void *p, size_t i) {
    size_t size = kiln_dtype_size(dtype);
    unsigned long long v = 0;
    memcpy(&v, (const unsigned char *)p + i * size, size); /* little-endian hosts */
    return v;
}

/* Builds the case on the contexts of mask (bit c: ctx[c]; the interpreter's always) and reads
 * n elements of dtype: each must equal want, and each device's must equal the interpreter's. */
static void expect_on(void **state, unsigned mask, const char *what, build_fn build,
                      const void *arg, kiln_dtype dtype, const void *want, size_t n) {
    packed_state *s = *state;
    static unsigned char oracle[MAX_BYTES], got[MAX_BYTES];
    size_t bytes = n * kiln_dtype_size(dtype);
    assert_true(bytes <= MAX_BYTES);
    for (int c = 0; c < NCTX; c++) {
        kiln_context *ctx = s->ctx[c];
        if (c > 0 && !(mask & 1u << c))
            continue;
        kiln_tensor *t = build(ctx, arg);
        if (!t)
            fail_msg("%s on %s: no tensor: %s", what, ctx_names[c], kiln_context_message(ctx));
        assert_int_equal(kiln_tensor_dtype(t), dtype);
        int64_t numel = 0;
        assert_int_equal(kiln_tensor_numel(t, &numel), KILN_OK);
        assert_int_equal(numel, (int64_t)n);
        kiln_status st = kiln_read(t, c == 0 ? oracle : got, bytes);
        if (st != KILN_OK)
            fail_msg("%s on %s: kiln_read: %s (%s)", what, ctx_names[c], kiln_status_string(st),
                     kiln_context_message(ctx));
        const unsigned char *mine = c == 0 ? oracle : got;
        for (size_t i = 0; i < n; i++) {
            if (!same(dtype, mine, want, i))
                fail_msg("%s on %s: element %zu is 0x%llx, expected 0x%llx", what, ctx_names[c], i,
                         element_bits(dtype, mine, i), element_bits(dtype, want, i));
            if (c > 0 && !same(dtype, mine, oracle, i))
                fail_msg("%s on %s: element %zu is 0x%llx, the interpreter's 0x%llx", what,
                         ctx_names[c], i, element_bits(dtype, mine, i),
                         element_bits(dtype, oracle, i));
        }
    }
}

static void expect(void **state, const char *what, build_fn build, const void *arg,
                   kiln_dtype dtype, const void *want, size_t n) {
    expect_on(state, ~0u, what, build, arg, dtype, want, n);
}

/* On the contexts without shaderInt64 the case is refused at the read, as KILN_I64 says. */
static void expect_no_int64(void **state, const char *what, build_fn build, const void *arg) {
    packed_state *s = *state;
    for (int c = 1; c < NCTX; c++) {
        if (WITH_INT64 & 1u << c)
            continue;
        kiln_tensor *t = build(s->ctx[c], arg);
        assert_non_null(t);
        static unsigned char out[MAX_BYTES];
        kiln_status st = kiln_read(t, out, sizeof out);
        if (st != KILN_ERROR_UNSUPPORTED || !strstr(kiln_context_message(s->ctx[c]), "shaderInt64"))
            fail_msg("%s on %s: %s (%s), expected no shaderInt64", what, ctx_names[c],
                     kiln_status_string(st), kiln_context_message(s->ctx[c]));
        kiln_context_clear_error(s->ctx[c]);
    }
}

static kiln_tensor *vector_of(kiln_context *ctx, kiln_dtype dtype, int64_t n, const void *data) {
    kiln_tensor *t = kiln_from_data(ctx, dtype, 1, &n, data);
    assert_non_null(t);
    return t;
}

/* ---- reads through views ------------------------------------------------------------------- */

/* Eleven elements (an odd count: the last word is partly past the end) of each small type. */
static const uint8_t base_u8[11] = {0, 1, 127, 128, 200, 255, 7, 64, 99, 250, 13};
static const uint8_t base_bool[11] = {0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0};
/* 1, -2, 2^-24 (the smallest subnormal), -0, 65504 (the largest finite), inf, -inf, NaN,
 * 1023 2^-24 (the largest subnormal), 2^-14 (the smallest normal), 3.140625 */
static const uint16_t base_f16[11] = {0x3c00, 0xc000, 0x0001, 0x8000, 0x7bff, 0x7c00,
                                      0xfc00, 0x7e00, 0x03ff, 0x0400, 0x4248};

typedef struct view_case {
    kiln_dtype dtype;
    int view; /* which view of the eleven elements */
    bool as_f32;
} view_case;

static const void *base_of(kiln_dtype dtype) {
    return dtype == KILN_F16    ? (const void *)base_f16
           : dtype == KILN_BOOL ? (const void *)base_bool
                                : (const void *)base_u8;
}

enum { VIEW_ALL, VIEW_ODD, VIEW_FLIP, VIEW_NARROW, VIEW_STRIDED, VIEW_BROADCAST, VIEWS };

static kiln_tensor *view_of(kiln_context *ctx, const void *arg) {
    const view_case *v = arg;
    kiln_tensor *x = vector_of(ctx, v->dtype, 11, base_of(v->dtype)), *r = NULL;
    switch (v->view) {
    case VIEW_ALL:
        r = kiln_maximum(x, x); /* through a kernel (x + 0 would turn -0 into +0) */
        break;
    case VIEW_ODD: /* x[1::2]: 1, 3, 5, 7, 9 */
        r = kiln_slice(x, 0, 1, 11, 2);
        break;
    case VIEW_FLIP: /* 10, 9, ..., 0 */
        r = kiln_flip(x, 0);
        break;
    case VIEW_NARROW: /* 3..7 */
        r = kiln_narrow(x, 0, 3, 5);
        break;
    case VIEW_STRIDED: /* (i, j) -> 5 + 4 i - j: 5, 4, 3, 9, 8, 7 */
        r = kiln_as_strided(x, 2, (int64_t[]){2, 3}, (int64_t[]){4, -1}, 5);
        break;
    default: /* x[2:5] as a column broadcast to (3, 4): 2 2 2 2 3 3 3 3 4 4 4 4 */
        r = kiln_expand(kiln_reshape(kiln_narrow(x, 0, 2, 3), 2, (int64_t[]){3, 1}), 2,
                        (int64_t[]){3, 4});
        break;
    }
    return v->as_f32 ? kiln_cast(r, KILN_F32) : kiln_contiguous(r);
}

/* The base indices each view reads, in order. */
static const int view_index[VIEWS][12] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
    {1, 3, 5, 7, 9},
    {10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0},
    {3, 4, 5, 6, 7},
    {5, 4, 3, 9, 8, 7},
    {2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4},
};
static const size_t view_count[VIEWS] = {11, 5, 11, 5, 6, 12};

static void test_packed_reads_through_views(void **state) {
    const kiln_dtype types[] = {KILN_U8, KILN_I8, KILN_BOOL, KILN_F16};
    /* the base elements as f32, by hand */
    static const float as_f32[4][11] = {
        {0, 1, 127, 128, 200, 255, 7, 64, 99, 250, 13},
        {0, 1, 127, -128, -56, -1, 7, 64, 99, -6, 13},
        {0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0},
        {1, -2, 0x1p-24f, -0.0f, 65504, INFINITY, -INFINITY, NAN, 0x3ffp-24f, 0x1p-14f, 3.140625f},
    };
    for (int t = 0; t < 4; t++) {
        size_t size = kiln_dtype_size(types[t]);
        for (int v = 0; v < VIEWS; v++) {
            unsigned char want[64];
            float want_f[12];
            for (size_t i = 0; i < view_count[v]; i++) {
                memcpy(want + i * size,
                       (const unsigned char *)base_of(types[t]) + (size_t)view_index[v][i] * size,
                       size);
                want_f[i] = as_f32[t][view_index[v][i]];
            }
            char what[64];
            snprintf(what, sizeof what, "dtype %d view %d", (int)types[t], v);
            expect(state, what, view_of, &(view_case){types[t], v, false}, types[t], want,
                   view_count[v]);
            snprintf(what, sizeof what, "dtype %d view %d as f32", (int)types[t], v);
            expect(state, what, view_of, &(view_case){types[t], v, true}, KILN_F32, want_f,
                   view_count[v]);
        }
    }
}

/* ---- arithmetic and casts ------------------------------------------------------------------ */

typedef struct binary_case {
    kiln_dtype dtype;
    const void *a, *b;
    int64_t n;
    kiln_tensor *(*op)(kiln_tensor *, kiln_tensor *);
} binary_case;

static kiln_tensor *binary(kiln_context *ctx, const void *arg) {
    const binary_case *c = arg;
    return c->op(vector_of(ctx, c->dtype, c->n, c->a), vector_of(ctx, c->dtype, c->n, c->b));
}

typedef struct cast_case {
    kiln_dtype from, to;
    const void *data;
    int64_t n;
} cast_case;

static kiln_tensor *cast(kiln_context *ctx, const void *arg) {
    const cast_case *c = arg;
    return kiln_cast(vector_of(ctx, c->from, c->n, c->data), c->to);
}

static void test_packed_integer_arithmetic_wraps(void **state) {
    static const uint8_t ua[5] = {250, 3, 128, 255, 0}, ub[5] = {10, 253, 128, 1, 0};
    /* 260 -> 4, 256 -> 0, 256 -> 0, 256 -> 0 */
    expect(state, "u8 add", binary, &(binary_case){KILN_U8, ua, ub, 5, kiln_add}, KILN_U8,
           (const uint8_t[]){4, 0, 0, 0, 0}, 5);
    /* 3 - 253 = -250 -> 6; 255 - 1 = 254 */
    expect(state, "u8 sub", binary, &(binary_case){KILN_U8, ua, ub, 5, kiln_sub}, KILN_U8,
           (const uint8_t[]){240, 6, 0, 254, 0}, 5);
    /* 2500 = 9 * 256 + 196; 759 = 2 * 256 + 247; 16384 = 64 * 256 */
    expect(state, "u8 mul", binary, &(binary_case){KILN_U8, ua, ub, 5, kiln_mul}, KILN_U8,
           (const uint8_t[]){196, 247, 0, 255, 0}, 5);
    expect(state, "u8 max", binary, &(binary_case){KILN_U8, ua, ub, 5, kiln_maximum}, KILN_U8,
           (const uint8_t[]){250, 253, 128, 255, 0}, 5);
    static const int8_t ia[5] = {127, -128, 100, -1, 50}, ib[5] = {1, -1, 100, -1, -50};
    /* 128 -> -128, -129 -> 127, 200 -> -56 */
    expect(state, "i8 add", binary, &(binary_case){KILN_I8, ia, ib, 5, kiln_add}, KILN_I8,
           (const int8_t[]){-128, 127, -56, -2, 0}, 5);
    /* 128 -> -128; 10000 = 39 * 256 + 16; -2500 = -10 * 256 + 60 */
    expect(state, "i8 mul", binary, &(binary_case){KILN_I8, ia, ib, 5, kiln_mul}, KILN_I8,
           (const int8_t[]){127, -128, 16, 1, 60}, 5);
    expect(state, "i8 lt", binary, &(binary_case){KILN_I8, ia, ib, 5, kiln_lt}, KILN_BOOL,
           (const uint8_t[]){0, 1, 0, 0, 0}, 5);
    expect(state, "u8 eq", binary, &(binary_case){KILN_U8, ua, ub, 5, kiln_eq}, KILN_BOOL,
           (const uint8_t[]){0, 0, 1, 0, 1}, 5);
    static const uint8_t ba[4] = {0, 1, 0, 1}, bb[4] = {0, 0, 1, 1};
    expect(state, "bool max", binary, &(binary_case){KILN_BOOL, ba, bb, 4, kiln_maximum}, KILN_BOOL,
           (const uint8_t[]){0, 1, 1, 1}, 4);
    expect(state, "bool min", binary, &(binary_case){KILN_BOOL, ba, bb, 4, kiln_minimum}, KILN_BOOL,
           (const uint8_t[]){0, 0, 0, 1}, 4);
}

static void test_packed_casts(void **state) {
    /* to u8 and i8: truncation, then the low byte of the i32 cast (NaN and 1e10: INT32_MIN,
     * whose low byte is 0); 300 -> 44, -1 -> 255, -2.7 -> -2 -> 254, 200 -> -56, -129 -> 127 */
    static const float f[7] = {300, -1, 2.7f, -2.7f, 255.9f, NAN, 1e10f};
    expect(state, "f32 to u8", cast, &(cast_case){KILN_F32, KILN_U8, f, 7}, KILN_U8,
           (const uint8_t[]){44, 255, 2, 254, 255, 0, 0}, 7);
    static const float g[6] = {200, -129, 127.9f, -128.5f, NAN, -5};
    expect(state, "f32 to i8", cast, &(cast_case){KILN_F32, KILN_I8, g, 6}, KILN_I8,
           (const int8_t[]){-56, 127, 127, -128, 0, -5}, 6);
    static const float h[5] = {0, -0.0f, 2, NAN, -INFINITY}; /* x != 0: NaN is true */
    expect(state, "f32 to bool", cast, &(cast_case){KILN_F32, KILN_BOOL, h, 5}, KILN_BOOL,
           (const uint8_t[]){0, 0, 1, 1, 1}, 5);
    static const uint8_t u[5] = {0, 1, 127, 128, 255};
    expect(state, "u8 to i8", cast, &(cast_case){KILN_U8, KILN_I8, u, 5}, KILN_I8,
           (const int8_t[]){0, 1, 127, -128, -1}, 5);
    expect(state, "u8 to bool", cast, &(cast_case){KILN_U8, KILN_BOOL, u, 5}, KILN_BOOL,
           (const uint8_t[]){0, 1, 1, 1, 1}, 5);
    expect(state, "u8 to f16", cast, &(cast_case){KILN_U8, KILN_F16, u, 5}, KILN_F16,
           (const uint16_t[]){0x0000, 0x3c00, 0x57f0, 0x5800, 0x5bf8}, 5);
    static const int8_t s[4] = {-128, -1, 0, 127};
    expect(state, "i8 to u8", cast, &(cast_case){KILN_I8, KILN_U8, s, 4}, KILN_U8,
           (const uint8_t[]){128, 255, 0, 127}, 4);
    expect(state, "i8 to f32", cast, &(cast_case){KILN_I8, KILN_F32, s, 4}, KILN_F32,
           (const float[]){-128, -1, 0, 127}, 4);
    /* f16 to integers: 65504 -> 65504 & 255 = 224 (65504 = 255 * 256 + 224); -2 -> 254 */
    static const uint16_t hf[4] = {0x7bff, 0xc000, 0x3e00, 0x0001}; /* 65504, -2, 1.5, 2^-24 */
    expect(state, "f16 to u8", cast, &(cast_case){KILN_F16, KILN_U8, hf, 4}, KILN_U8,
           (const uint8_t[]){224, 254, 1, 0}, 4);
    expect(state, "f16 to bool", cast, &(cast_case){KILN_F16, KILN_BOOL, hf, 4}, KILN_BOOL,
           (const uint8_t[]){1, 1, 1, 1}, 4);
}

/* f32 -> f16 rounds to nearest, ties to even, on every context (mobile-low with integer
 * operations on the bits). */
static void test_packed_f16_rounding(void **state) {
    static const float f[22] = {
        1.0f,
        1 + 0x1p-11f,            /* halfway between 1 and 1 + 2^-10: even, 1 */
        1 + 0x3p-11f,            /* halfway between 1 + 2^-10 and 1 + 2^-9: even, the latter */
        1 + 0x1p-11f + 0x1p-20f, /* above halfway: up */
        65504,
        65520, /* 65520: halfway between 65504 and 2^16: even, inf */
        65519,
        1e6f,
        -1e6f,               /* below halfway: 65504; overflow: +-inf */
        0x1p-24f,            /* the smallest subnormal */
        0x1p-25f,            /* halfway between 0 and 2^-24: even, 0 */
        0x3p-25f,            /* halfway between 1 and 2 ulps: 2 */
        0x1p-25f + 0x1p-40f, /* above halfway: 2^-24 */
        0x1p-14f,            /* the smallest normal */
        0x1p-14f - 0x1p-25f, /* halfway between 1023 and 1024 ulps: 1024, normal */
        -0.0f,
        INFINITY,
        NAN,
        1e-10f,
        -1e-10f, /* tiny: signed zeros */
        -(1 + 0x3p-11f),
        0.1f, /* 0.1: 1.6 2^-4, mantissa 614.4 -> 614 */
    };
    static const uint16_t want[22] = {
        0x3c00, 0x3c00, 0x3c02, 0x3c01, 0x7bff, 0x7c00, 0x7bff, 0x7c00, 0xfc00, 0x0001, 0x0000,
        0x0002, 0x0001, 0x0400, 0x0400, 0x8000, 0x7c00, 0x7e00, 0x0000, 0x8000, 0xbc02, 0x2e66};
    expect(state, "f32 to f16", cast, &(cast_case){KILN_F32, KILN_F16, f, 22}, KILN_F16, want, 22);
    /* and back: exact, subnormals included */
    expect(state, "f16 to f32", cast, &(cast_case){KILN_F16, KILN_F32, want, 22}, KILN_F32,
           (const float[]){1,
                           1,
                           1 + 0x1p-9f,
                           1 + 0x1p-10f,
                           65504,
                           INFINITY,
                           65504,
                           INFINITY,
                           -INFINITY,
                           0x1p-24f,
                           0,
                           0x1p-23f,
                           0x1p-24f,
                           0x1p-14f,
                           0x1p-14f,
                           -0.0f,
                           INFINITY,
                           NAN,
                           0,
                           -0.0f,
                           -(1 + 0x1p-9f),
                           0x266p-14f + 0x1p-4f},
           22);
}

/* f16 arithmetic computes in f32 and rounds every result. */
static void test_packed_f16_arithmetic(void **state) {
    /* 2048, 2048, 65504, 1, -65504, 2^-14, 1 */
    static const uint16_t a[7] = {0x6800, 0x6800, 0x7bff, 0x3c00, 0xfbff, 0x0400, 0x3c00};
    /* 1, 3, 65504, 2^-24, -65504, 0.5, 3 */
    static const uint16_t b[7] = {0x3c00, 0x4200, 0x7bff, 0x0001, 0xfbff, 0x3800, 0x4200};
    /* 2049: halfway (ulp 2), even 2048; 2051: halfway, even 2052 (0x6802); 131008: inf;
     * 1 + 2^-24: 1; -inf; 2^-14 + 0.5 = 0.5 + 2^-14: ulp of 0.5 is 2^-11, 2^-14 below half:
     * 0.5; 1 + 3 = 4 */
    expect(state, "f16 add", binary, &(binary_case){KILN_F16, a, b, 7, kiln_add}, KILN_F16,
           (const uint16_t[]){0x6800, 0x6802, 0x7c00, 0x3c00, 0xfc00, 0x3800, 0x4400}, 7);
    /* 2048; 6144 (0x6e00); inf; 2^-24; inf; 2^-15 (a subnormal, 0x0200); 3 */
    expect(state, "f16 mul", binary, &(binary_case){KILN_F16, a, b, 7, kiln_mul}, KILN_F16,
           (const uint16_t[]){0x6800, 0x6e00, 0x7c00, 0x0001, 0x7c00, 0x0200, 0x4200}, 7);
    /* 1 / 3 = 0.33333334 in f32: 0x3555 (0.33325195) is nearer than 0x3556 (0.33349609);
     * 2048 / 3 = 682.67: ulp 0.5, 682.5 (0x6155); 65504 / 2^-24 overflows; 2^-14 / 0.5 =
     * 2^-13 (0x0800) */
    static const uint16_t num[4] = {0x3c00, 0x6800, 0x7bff, 0x0400};
    static const uint16_t den[4] = {0x4200, 0x4200, 0x0001, 0x3800};
    expect(state, "f16 div", binary, &(binary_case){KILN_F16, num, den, 4, kiln_div}, KILN_F16,
           (const uint16_t[]){0x3555, 0x6155, 0x7c00, 0x0800}, 4);
}

/* ---- reductions ---------------------------------------------------------------------------- */

typedef struct reduce_case {
    kiln_dtype dtype;
    const void *data;
    int64_t rows, cols;
    int axis; /* -1: every element */
    kiln_tensor *(*op)(kiln_tensor *, uint32_t, const int32_t *, bool);
} reduce_case;

static kiln_tensor *reduce(kiln_context *ctx, const void *arg) {
    const reduce_case *c = arg;
    kiln_tensor *x = kiln_from_data(ctx, c->dtype, 2, (int64_t[]){c->rows, c->cols}, c->data);
    assert_non_null(x);
    return c->axis < 0 ? c->op(x, 0, NULL, false) : c->op(x, 1, (const int32_t[]){c->axis}, false);
}

typedef struct matmul_case {
    kiln_dtype dtype;
    const void *a, *b; /* (2, 3) @ (3, 3) */
} matmul_case;

static kiln_tensor *matmul(kiln_context *ctx, const void *arg) {
    const matmul_case *c = arg;
    kiln_tensor *a = kiln_from_data(ctx, c->dtype, 2, (int64_t[]){2, 3}, c->a);
    kiln_tensor *b = kiln_from_data(ctx, c->dtype, 2, (int64_t[]){3, 3}, c->b);
    return kiln_matmul(a, b);
}

/* (1, 2) @ (2, 2) */
static kiln_tensor *matmul_row(kiln_context *ctx, const void *arg) {
    const matmul_case *c = arg;
    kiln_tensor *a = kiln_from_data(ctx, c->dtype, 2, (int64_t[]){1, 2}, c->a);
    kiln_tensor *b = kiln_from_data(ctx, c->dtype, 2, (int64_t[]){2, 2}, c->b);
    return kiln_matmul(a, b);
}

/* kiln_conv2d of u8 (1, 1, 2, 2) by u8 (1, 1, 2, 2): one output */
static kiln_tensor *conv_u8(kiln_context *ctx, const void *arg) {
    (void)arg;
    kiln_tensor *x =
        kiln_from_data(ctx, KILN_U8, 4, (int64_t[]){1, 1, 2, 2}, (const uint8_t[]){200, 255, 3, 0});
    kiln_tensor *w =
        kiln_from_data(ctx, KILN_U8, 4, (int64_t[]){1, 1, 2, 2}, (const uint8_t[]){255, 2, 1, 1});
    return kiln_conv2d(x, w, 1, 0);
}

static void test_packed_reductions(void **state) {
    /* (3, 5) */
    static const uint8_t u[15] = {3, 250, 7, 0, 1, 255, 2, 2, 9, 128, 0, 0, 0, 0, 1};
    expect(state, "u8 max over rows", reduce, &(reduce_case){KILN_U8, u, 3, 5, 1, kiln_max},
           KILN_U8, (const uint8_t[]){250, 255, 1}, 3);
    expect(state, "u8 min over columns", reduce, &(reduce_case){KILN_U8, u, 3, 5, 0, kiln_min},
           KILN_U8, (const uint8_t[]){0, 0, 0, 0, 1}, 5);
    expect(state, "u8 max", reduce, &(reduce_case){KILN_U8, u, 3, 5, -1, kiln_max}, KILN_U8,
           (const uint8_t[]){255}, 1);
    /* the same bytes as i8: 250 -> -6, 255 -> -1, 128 -> -128 */
    expect(state, "i8 min over rows", reduce, &(reduce_case){KILN_I8, u, 3, 5, 1, kiln_min},
           KILN_I8, (const int8_t[]){-6, -128, 0}, 3);
    expect(state, "i8 max over columns", reduce, &(reduce_case){KILN_I8, u, 3, 5, 0, kiln_max},
           KILN_I8, (const int8_t[]){3, 2, 7, 9, 1}, 5);
    static const uint8_t bits[15] = {0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
    expect(state, "bool max over rows", reduce, &(reduce_case){KILN_BOOL, bits, 3, 5, 1, kiln_max},
           KILN_BOOL, (const uint8_t[]){1, 0, 1}, 3);
    expect(state, "bool min over rows", reduce, &(reduce_case){KILN_BOOL, bits, 3, 5, 1, kiln_min},
           KILN_BOOL, (const uint8_t[]){0, 0, 1}, 3);
    /* f16 sums accumulate in f32: 2048 + 1 + 1 = 2050 (0x6801; in f16 steps 2048); -2 + 0.5 +
     * 0.25 = -1.25 (0xbd00); 65504 + 65504 + 0 overflows to inf */
    static const uint16_t h[9] = {0x6800, 0x3c00, 0x3c00, 0xc000, 0x3800,
                                  0x3400, 0x7bff, 0x7bff, 0x0000};
    expect(state, "f16 sum over rows", reduce, &(reduce_case){KILN_F16, h, 3, 3, 1, kiln_sum},
           KILN_F16, (const uint16_t[]){0x6801, 0xbd00, 0x7c00}, 3);
    expect(state, "f16 max over columns", reduce, &(reduce_case){KILN_F16, h, 3, 3, 0, kiln_max},
           KILN_F16, (const uint16_t[]){0x7bff, 0x7bff, 0x3c00}, 3);
    /* matmuls of small integers give i32, their products exact in i32 (ops.c widen_small; they
     * once wrapped in the operands' type before the widened sum): [[1, 2, 3], [200, 255, 0]] @
     * [[1, 0, 2], [0, 1, 2], [1, 1, 255]] = [[4, 5, 2 + 4 + 765], [200, 255, 400 + 510]] */
    static const uint8_t ma[6] = {1, 2, 3, 200, 255, 0}, mb[9] = {1, 0, 2, 0, 1, 2, 1, 1, 255};
    expect(state, "u8 matmul", matmul, &(matmul_case){KILN_U8, ma, mb}, KILN_I32,
           (const int32_t[]){4, 5, 771, 200, 255, 910}, 6);
    /* i8: a = [[1, 2, 3], [-56, -1, 0]], b = [[1, 0, 2], [0, 1, 2], [1, 1, -1]]:
     * [[1 + 3, 2 + 3, 2 + 4 - 3], [-56, -1, -112 - 2]] */
    expect(state, "i8 matmul", matmul, &(matmul_case){KILN_I8, ma, mb}, KILN_I32,
           (const int32_t[]){4, 5, 3, -56, -1, -114}, 6);
    /* i8 products past i8's range: [[-128, 127]] @ [[-128, 1], [127, -128]] = [[16384 + 16129,
     * -128 - 16256]] */
    static const uint8_t na[2] = {128, 127}, nb[4] = {128, 1, 127, 128};
    /* an integer convolution's products likewise: 200 * 255 + 255 * 2 + 3 * 1 + 0 * 1 */
    expect(state, "u8 conv2d", conv_u8, NULL, KILN_I32, (const int32_t[]){51513}, 1);
    expect(state, "i8 matmul, wide products", matmul_row, &(matmul_case){KILN_I8, na, nb}, KILN_I32,
           (const int32_t[]){32513, -16384}, 2);
}

/* Integer sums and products of small types accumulate in 64 bits (KILN_I64): run where the
 * device has shaderInt64, packed loads included (the last context); refused on the profiles. */
static void test_packed_integer_sums(void **state) {
    static const uint8_t u[15] = {3, 250, 7, 0, 1, 255, 2, 2, 9, 128, 0, 0, 0, 0, 1};
    /* rows: 3 + 250 + 7 + 0 + 1 = 261 (no wrap at 256), 255 + 2 + 2 + 9 + 128 = 396, 1 */
    reduce_case rows = {KILN_U8, u, 3, 5, 1, kiln_sum};
    expect_on(state, WITH_INT64, "u8 sum over rows", reduce, &rows, KILN_I64,
              (const int64_t[]){261, 396, 1}, 3);
    expect_no_int64(state, "u8 sum over rows", reduce, &rows);
    /* as i8: 3 - 6 + 7 + 0 + 1 = 5, -1 + 2 + 2 + 9 - 128 = -116, 1; all: -110 */
    reduce_case signed_rows = {KILN_I8, u, 3, 5, 1, kiln_sum};
    expect_on(state, WITH_INT64, "i8 sum over rows", reduce, &signed_rows, KILN_I64,
              (const int64_t[]){5, -116, 1}, 3);
    reduce_case all = {KILN_I8, u, 3, 5, -1, kiln_sum};
    expect_on(state, WITH_INT64, "i8 sum", reduce, &all, KILN_I64, (const int64_t[]){-110}, 1);
    /* counting trues (a classifier's correct answers): columns of the bits below */
    static const uint8_t bits[15] = {0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
    reduce_case count = {KILN_BOOL, bits, 3, 5, 0, kiln_sum};
    expect_on(state, WITH_INT64, "bool sum over columns", reduce, &count, KILN_I64,
              (const int64_t[]){1, 1, 2, 1, 1}, 5);
    expect_no_int64(state, "bool sum over columns", reduce, &count);
    /* products: 3 * 250 * 7 * 0 * 1 = 0, 255 * 2 * 2 * 9 * 128 = 1175040, 0 */
    reduce_case prod = {KILN_U8, u, 3, 5, 1, kiln_prod};
    expect_on(state, WITH_INT64, "u8 prod over rows", reduce, &prod, KILN_I64,
              (const int64_t[]){0, 1175040, 0}, 3);
}

/* ---- writes through views ------------------------------------------------------------------ */

static kiln_tensor *u8_writes(kiln_context *ctx, const void *arg) {
    (void)arg;
    static const uint8_t x0[11] = {0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
    kiln_tensor *x = vector_of(ctx, KILN_U8, 11, x0);
    /* the odd elements, then the even ones from a tensor, each written beside elements of the
     * same word that another invocation writes, or that the kernel keeps */
    assert_int_equal(kiln_fill_(kiln_slice(x, 0, 1, 11, 2), 255), KILN_OK);
    kiln_tensor *src = vector_of(ctx, KILN_U8, 6, (const uint8_t[]){1, 2, 3, 4, 5, 6});
    assert_int_equal(kiln_copy_(kiln_slice(x, 0, 0, 11, 2), src), KILN_OK);
    /* then every element + 1 through the flipped view (255 wraps to 0) */
    kiln_tensor *one = kiln_full(ctx, KILN_U8, 1, (int64_t[]){1}, 1);
    assert_int_equal(kiln_add_(kiln_flip(x, 0), one), KILN_OK);
    return x;
}

static kiln_tensor *i8_writes(kiln_context *ctx, const void *arg) {
    (void)arg;
    kiln_tensor *x = kiln_full(ctx, KILN_I8, 1, (int64_t[]){11}, 0);
    x = kiln_contiguous(x);
    /* converted as casts: -1.5 -> -1, 200 -> -56, -129 -> 127 */
    kiln_tensor *src = vector_of(ctx, KILN_F32, 5, (const float[]){-1.5f, 200, -129, 3, 127});
    assert_int_equal(kiln_copy_(kiln_narrow(x, 0, 3, 5), src), KILN_OK);
    /* x[::3] *= -1: elements 0, 3, 6, 9 */
    kiln_tensor *minus = kiln_full(ctx, KILN_I8, 1, (int64_t[]){1}, -1);
    assert_int_equal(kiln_mul_(kiln_slice(x, 0, 0, 11, 3), minus), KILN_OK);
    return x;
}

static kiln_tensor *bool_writes(kiln_context *ctx, const void *arg) {
    (void)arg;
    kiln_tensor *x = kiln_contiguous(kiln_full(ctx, KILN_BOOL, 1, (int64_t[]){11}, 0));
    assert_int_equal(kiln_fill_(kiln_slice(x, 0, 1, 11, 3), 1), KILN_OK); /* 1, 4, 7, 10 */
    kiln_tensor *src = vector_of(ctx, KILN_BOOL, 2, (const uint8_t[]){1, 0});
    assert_int_equal(kiln_copy_(kiln_narrow(x, 0, 0, 2), src), KILN_OK);
    return x;
}

static kiln_tensor *f16_writes(kiln_context *ctx, const void *arg) {
    (void)arg;
    kiln_tensor *x = kiln_contiguous(kiln_full(ctx, KILN_F16, 1, (int64_t[]){7}, 0));
    assert_int_equal(kiln_fill_(kiln_slice(x, 0, 1, 7, 2), 1.5), KILN_OK);
    kiln_tensor *src =
        vector_of(ctx, KILN_F32, 4, (const float[]){0.1f, 65520, -1e-10f, 3}); /* rounded */
    assert_int_equal(kiln_copy_(kiln_slice(x, 0, 0, 7, 2), src), KILN_OK);
    return x;
}

static void test_packed_writes_through_views(void **state) {
    /* [1, 255, 2, 255, ..., 6] + 1 */
    expect(state, "u8 writes", u8_writes, NULL, KILN_U8,
           (const uint8_t[]){2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7}, 11);
    /* [0, 0, 0, -1, -56, 127, 3, 127, 0, 0, 0] with elements 0, 3, 6, 9 negated */
    expect(state, "i8 writes", i8_writes, NULL, KILN_I8,
           (const int8_t[]){0, 0, 0, 1, -56, 127, -3, 127, 0, 0, 0}, 11);
    expect(state, "bool writes", bool_writes, NULL, KILN_BOOL,
           (const uint8_t[]){1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 1}, 11);
    /* 0.1 -> 0x2e66, 65520 -> inf, -1e-10 -> -0, 3 -> 0x4200; 1.5 is 0x3e00 */
    expect(state, "f16 writes", f16_writes, NULL, KILN_F16,
           (const uint16_t[]){0x2e66, 0x3e00, 0x7c00, 0x3e00, 0x8000, 0x3e00, 0x4200}, 7);
}

/* Many invocations (several workgroups) writing neighbouring bytes of shared words at once: a
 * lost write shows as a wrong element. n is odd, and 2000 u8 bytes (1000 f16 elements) span two
 * windows of the 1 KiB context. */
enum { BIG = 2001 };

typedef struct big_case {
    kiln_dtype dtype;
    int step; /* written x[1::step], kept x[0::step] ... */
} big_case;

static kiln_tensor *big_writes(kiln_context *ctx, const void *arg) {
    const big_case *c = arg;
    int64_t n = c->dtype == KILN_F16 ? BIG / 2 : BIG;
    kiln_tensor *x =
        kiln_contiguous(kiln_cast(kiln_arange(ctx, KILN_F32, 0, (double)n, 1), c->dtype));
    kiln_tensor *one = kiln_full(ctx, c->dtype, 1, (int64_t[]){1}, 1);
    assert_int_equal(kiln_add_(kiln_slice(x, 0, 1, n, c->step), one), KILN_OK);
    /* then the whole odd-length tensor in place */
    assert_int_equal(kiln_add_(x, kiln_full(ctx, c->dtype, 1, (int64_t[]){1}, 3)), KILN_OK);
    return x;
}

static kiln_tensor *big_compare(kiln_context *ctx, const void *arg) {
    (void)arg;
    kiln_tensor *i = kiln_arange(ctx, KILN_F32, 0, BIG, 1);
    kiln_tensor *j = kiln_flip(i, 0); /* bool outputs: i < BIG - 1 - i */
    return kiln_lt(i, j);
}

static void test_packed_neighbouring_writes(void **state) {
    static uint8_t want8[BIG];
    static uint16_t want16[BIG / 2];
    for (int step = 2; step <= 3; step++) {
        for (int i = 0; i < BIG; i++) /* arange cast to u8 wraps mod 256 */
            want8[i] = (uint8_t)(i + (i % step == 1 ? 1 : 0) + 3);
        expect(state, "u8 neighbouring writes", big_writes, &(big_case){KILN_U8, step}, KILN_U8,
               want8, BIG);
        for (int i = 0; i < BIG; i++)
            want8[i] = (uint8_t)((int8_t)(uint8_t)i + (i % step == 1 ? 1 : 0) + 3);
        expect(state, "i8 neighbouring writes", big_writes, &(big_case){KILN_I8, step}, KILN_I8,
               want8, BIG);
        /* f16: integers below 2048 are exact */
        for (int i = 0; i < BIG / 2; i++) {
            /* the f16 bits of the integer v (3..1003): v = (1 + m / 1024) 2^p, exponent
             * field 15 + p */
            int v = i + (i % step == 1 ? 1 : 0) + 3, p = 0;
            while ((v >> (p + 1)) != 0)
                p++;
            want16[i] = (uint16_t)((15 + p) << 10 | (((v - (1 << p)) << 10) >> p));
        }
        expect(state, "f16 neighbouring writes", big_writes, &(big_case){KILN_F16, step}, KILN_F16,
               want16, BIG / 2);
    }
    for (int i = 0; i < BIG; i++)
        want8[i] = i < BIG - 1 - i;
    expect(state, "bool outputs", big_compare, NULL, KILN_BOOL, want8, BIG);
}

int main(void) {
#define T(f) cmocka_unit_test_teardown(f, check)
    const struct CMUnitTest tests[] = {
        T(test_packed_reads_through_views),
        T(test_packed_integer_arithmetic_wraps),
        T(test_packed_casts),
        T(test_packed_f16_rounding),
        T(test_packed_f16_arithmetic),
        T(test_packed_reductions),
        T(test_packed_integer_sums),
        T(test_packed_writes_through_views),
        T(test_packed_neighbouring_writes),
    };
#undef T
    return cmocka_run_group_tests_name("packed", tests, setup, teardown);
}
