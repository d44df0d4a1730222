/* A fuzz target of the public API (libFuzzer's LLVMFuzzerTestOneInput; docs/fuzzing.md).
 *
 * The input is a program: its first byte chooses the setup (a host allocator that fails one
 * allocation, the ordinal taken from the next two bytes), then every op reads an opcode byte and
 * its arguments from the bytes that follow (0 once they run out). An op is one public call:
 * creations, movement ops, elementwise ops, reductions, matmul, conv2d, writes, realize and
 * read, release, scopes with keep lists, Variables and expressions, queries, a second context
 * (made, used with the first context's tensors, destroyed with its tensors still in use) and
 * misuse: NULL and released handles, handles that were never made, huge, negative and extreme
 * sizes, dims, values and dtypes. Every op runs on the reference interpreter ("interp").
 *
 * Sizes are mostly small, so an input runs in milliseconds; a shape over FUZZ_CAP elements is
 * still built (its call must refuse it or make it lazily) but then nothing runs for the rest of
 * the input: no realize, read or write ("poisoned").
 *
 * What each input checks, besides what ASan, LSan and UBSan check:
 * - a call that returns NULL on valid-looking operands recorded an error in a context;
 * - a tensor returned belongs to a live context and has a sane ndim, dtype and shape;
 * - a read that succeeds reads the same bytes again;
 * - after the program every handle is released, and the context's live counts of tensors,
 *   nodes and storages are back to zero;
 * - the context still computes (a small sum) once its error is cleared;
 * - once destroyed, every block either context allocated was freed. */
#include "test_alloc.h"

#include <kiln/kiln.h>

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum {
    FUZZ_WORK = 1 << 15,           /* multiply-adds a matmul or convolution may cost */
    FUZZ_CAP = 1024,               /* elements (and any one size) a computed tensor may have */
    FUZZ_SLOTS = 16,               /* tensors the program names */
    FUZZ_EXPRS = 16,               /* expressions the program names */
    FUZZ_HANDLES = 4096,           /* handles of the first context, all released at the end */
    FUZZ_OPS = 400,                /* ops per input at most */
    FUZZ_DIMS = KILN_MAX_DIMS + 2, /* room for a shape one dim too long */
};

/* The largest block the allocator gives: a larger request fails as on a machine without that
 * much memory (ASan and libFuzzer would stop the run at a huge malloc instead). */
#define FUZZ_MAX_BLOCK ((size_t)64 << 20)

/* Where a slot's handle came from: its context's checks are trusted only while it lives. */
enum { FROM_NONE, FROM_CTX, FROM_CTX2, FROM_ORPHAN };

typedef struct fuzz {
    const uint8_t *p;
    size_t n;
    kiln_context *ctx, *ctx2;
    test_alloc ta, ta2;
    kiln_tensor *slot[FUZZ_SLOTS];
    uint8_t from[FUZZ_SLOTS];
    unsigned last; /* the slot of the last tensor returned */
    kiln_tensor *handles[FUZZ_HANDLES];
    size_t nhandles;
    struct {
        const kiln_expr *e;
        uint32_t depth; /* the scope it was made in (Variables: 0, they live with the context) */
    } expr[FUZZ_EXPRS];
    uint32_t depth;
    bool poisoned;
    bool trusted; /* every operand of the current call is a handle or expression of a live
                     context: a NULL result must come with a recorded error */
} fuzz;

static void *fuzz_alloc(void *user, void *ptr, size_t osize, size_t nsize) {
    if (nsize > FUZZ_MAX_BLOCK)
        return NULL;
    return test_alloc_fn(user, ptr, osize, nsize);
}

__attribute__((format(printf, 1, 2))) static void fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_api: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

/* ---- reading the input ---------------------------------------------------------------------- */

static uint8_t u8(fuzz *f) {
    if (f->n == 0)
        return 0;
    f->n--;
    return *f->p++;
}

static uint64_t u64(fuzz *f) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)u8(f) << (8 * i);
    return v;
}

static const int64_t HOSTILE[] = {
    -1,
    -2,
    INT64_MIN,
    INT64_MAX,
    INT64_MAX - 1,
    INT64_MIN + 1,
    INT32_MAX,
    INT32_MIN,
    (int64_t)1 << 31,
    (int64_t)1 << 32,
    (int64_t)1 << 40,
    (int64_t)1 << 62,
    65535,
    65536,
    1025,
    -1025,
};

/* A size: mostly 0..6, sometimes hostile. */
static int64_t pick_size(fuzz *f) {
    uint8_t b = u8(f);
    if (b < 200)
        return (int64_t)(b % 7);
    if (b < 240)
        return HOSTILE[b % (sizeof HOSTILE / sizeof HOSTILE[0])];
    return b < 250 ? (int64_t)(b - 240) * 7 : (int64_t)u64(f);
}

/* An index or offset: mostly -4..4, sometimes hostile. */
static int64_t pick_index(fuzz *f) {
    uint8_t b = u8(f);
    if (b < 200)
        return (int64_t)(b % 9) - 4;
    if (b < 250)
        return HOSTILE[b % (sizeof HOSTILE / sizeof HOSTILE[0])];
    return (int64_t)u64(f);
}

static int32_t pick_dim(fuzz *f) {
    static const int32_t odd[] = {INT32_MIN, INT32_MAX, 16, -17, 17, 100, -100, INT32_MIN + 1};
    uint8_t b = u8(f);
    return b < 224 ? (int32_t)(b % 9) - 4 : odd[b % 8];
}

static uint32_t pick_ndim(fuzz *f) {
    static const uint32_t odd[] = {16, 17, 255, UINT32_MAX, 15, 5, 6, 0x80000000u};
    uint8_t b = u8(f);
    return b < 240 ? (uint32_t)(b % 5) : odd[b % 8];
}

static double pick_double(fuzz *f) {
    static const double table[] = {
        0,
        1,
        -1,
        0.5,
        2,
        3,
        -0.0,
        NAN,
        INFINITY,
        -INFINITY,
        1e300,
        -1e300,
        2147483648.0,
        -2147483649.0,
        4294967296.0,
        1e-40,
        255.5,
        127,
        128,
        -129,
        65504,
        1e6,
        0.1,
        -3.5,
        1e10,
        9007199254740993.0,
        -1e-300,
        2.5,
        7,
        1.5,
        -0.5,
        4,
    };
    uint8_t b = u8(f);
    if (b == 255) {
        uint64_t bits = u64(f);
        double d;
        memcpy(&d, &bits, sizeof d);
        return d;
    }
    return table[b % (sizeof table / sizeof table[0])];
}

static kiln_dtype pick_dtype(fuzz *f) {
    static const int odd[] = {KILN_DTYPE_COUNT_, 99, -1, INT32_MIN};
    uint8_t b = u8(f);
    return b < 248 ? (kiln_dtype)(b % KILN_DTYPE_COUNT_) : (kiln_dtype)odd[b % 4];
}

/* ---- what the program names ----------------------------------------------------------------- */

/* The first context mostly; the second (made on first use); sometimes NULL. */
static kiln_context *pick_ctx(fuzz *f) {
    uint8_t b = u8(f);
    if (b % 32 == 31) {
        f->trusted = false;
        return NULL;
    }
    if (b % 8 == 7) {
        if (!f->ctx2) {
            kiln_context_options opt = {
                .device = "interp", .alloc = fuzz_alloc, .alloc_user = &f->ta2};
            if (kiln_context_create(&opt, &f->ctx2) != KILN_OK)
                fuzz_fail("a second context could not be made");
        }
        return f->ctx2;
    }
    return f->ctx;
}

/* A tensor operand: a slot (possibly empty, released, or of a destroyed context), a handle
 * that was never made, or NULL. */
static kiln_tensor *pick_tensor(fuzz *f) {
    uint8_t b = u8(f);
    if (b == 255) {
        f->trusted = false;
        return (kiln_tensor *)(uintptr_t)u64(f);
    }
    unsigned i = b % FUZZ_SLOTS;
    if (!f->slot[i] && b < 240)
        i = f->last; /* an empty slot: the last result instead, so that calls chain */
    if (f->from[i] != FROM_CTX && f->from[i] != FROM_CTX2)
        f->trusted = false;
    return f->slot[i];
}

/* An expression of the first context (NULL when the named entry is empty), or a made-up
 * handle (refused with KILN_ERROR_INVALID_HANDLE, never followed). An expression made outside
 * any scope may be stale too (its Variable bound again): refused the same way. */
static const kiln_expr *pick_expr(fuzz *f) {
    uint8_t b = u8(f);
    if (b == 255) {
        f->trusted = false;
        return (const kiln_expr *)(uintptr_t)u64(f);
    }
    const kiln_expr *e = f->expr[b % FUZZ_EXPRS].e;
    if (!e)
        f->trusted = false;
    return e;
}

static void keep_expr(fuzz *f, const kiln_expr *e, uint32_t depth) {
    if (!e)
        return;
    unsigned i = u8(f) % FUZZ_EXPRS;
    f->expr[i].e = e;
    f->expr[i].depth = depth;
}

static bool any_error(const fuzz *f) {
    return kiln_context_status(f->ctx) != KILN_OK ||
           (f->ctx2 && kiln_context_status(f->ctx2) != KILN_OK);
}

/* Every size > 0 multiplied; false when the shape is no shape (a size < 0, an overflow). */
static bool shape_numel(uint32_t ndim, const int64_t *shape, int64_t *numel) {
    int64_t n = 1;
    if (ndim > KILN_MAX_DIMS)
        return false;
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] < 0 || __builtin_mul_overflow(n, shape[d], &n))
            return false;
    }
    *numel = n;
    return true;
}

static bool big_shape(uint32_t ndim, const int64_t *shape) {
    int64_t numel;
    if (!shape_numel(ndim, shape, &numel))
        return false;
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] > FUZZ_CAP)
            return true;
    }
    return numel > FUZZ_CAP;
}

/* KILN_FUZZ_TRACE=1 prints every call's result (to see what a failing input does). */
static bool trace(void) {
    static int on = -1;
    if (on < 0)
        on = getenv("KILN_FUZZ_TRACE") != NULL;
    return on;
}

static void trace_tensor(const char *call, kiln_tensor *t) {
    int64_t shape[KILN_MAX_DIMS];
    kiln_context *ctx = kiln_tensor_context(t);
    fprintf(stderr, "%s -> %p", call, (void *)t);
    if (t && kiln_tensor_shape(t, shape) == KILN_OK) {
        fprintf(stderr, " %s (", kiln_dtype_name(kiln_tensor_dtype(t)));
        for (uint32_t d = 0; d < kiln_tensor_ndim(t); d++)
            fprintf(stderr, "%s%lld", d ? ", " : "", (long long)shape[d]);
        fprintf(stderr, ")");
    }
    fprintf(stderr, " [%s]\n", ctx ? kiln_context_message(ctx) : "");
}

/* The library's log lines (a failed context creation says so on stderr) are dropped unless
 * traced: libFuzzer's own output stays readable. */
static void quiet(void *user, base_log_level level, const char *line) {
    (void)user;
    (void)level;
    if (trace())
        fprintf(stderr, "%s\n", line);
}

/* Checks a tensor a call returned and stores it in a slot. */
static void result(fuzz *f, const char *call, kiln_tensor *t) {
    if (trace())
        trace_tensor(call, t);
    if (!t) {
        if (f->trusted && !any_error(f))
            fuzz_fail("%s returned NULL with no error recorded", call);
        return;
    }
    kiln_context *owner = kiln_tensor_context(t);
    if (owner != f->ctx && (owner != f->ctx2 || !owner))
        fuzz_fail("%s returned a tensor of no live context", call);
    uint32_t ndim = kiln_tensor_ndim(t);
    if (ndim > KILN_MAX_DIMS || (unsigned)kiln_tensor_dtype(t) >= KILN_DTYPE_COUNT_)
        fuzz_fail("%s returned ndim %u, dtype %d", call, ndim, (int)kiln_tensor_dtype(t));
    int64_t shape[KILN_MAX_DIMS];
    if (kiln_tensor_shape(t, shape) == KILN_OK) {
        int64_t numel;
        for (uint32_t d = 0; d < ndim; d++) {
            if (shape[d] < 0)
                fuzz_fail("%s returned a tensor with a negative size", call);
        }
        /* A view's element count may overflow int64 (kiln_tensor_numel says so). */
        if (!shape_numel(ndim, shape, &numel) || big_shape(ndim, shape))
            f->poisoned = true;
    } else if (kiln_context_status(owner) == KILN_OK) {
        fuzz_fail("%s: kiln_tensor_shape failed with no error recorded", call);
    }
    unsigned i = u8(f) % FUZZ_SLOTS;
    f->last = i;
    f->slot[i] = t;
    f->from[i] = owner == f->ctx ? FROM_CTX : FROM_CTX2;
    if (owner == f->ctx && f->nhandles < FUZZ_HANDLES)
        f->handles[f->nhandles++] = t;
}

/* A status call: a failure must leave a message. */
static kiln_status status(fuzz *f, const char *call, kiln_context *ctx, kiln_status st) {
    if (trace())
        fprintf(stderr, "%s -> %s [%s]\n", call, kiln_status_string(st),
                ctx ? kiln_context_message(ctx) : "");
    if (st != KILN_OK && ctx && f->trusted && !kiln_context_message(ctx)[0])
        fuzz_fail("%s failed (%s) with no message", call, kiln_status_string(st));
    return st;
}

/* ---- the ops -------------------------------------------------------------------------------- */

static uint32_t pick_shape(fuzz *f, int64_t *shape) {
    uint32_t ndim = pick_ndim(f);
    for (uint32_t d = 0; d < FUZZ_DIMS; d++)
        shape[d] = d < ndim ? pick_size(f) : 1;
    return ndim;
}

static void op_create(fuzz *f) {
    static _Alignas(8) unsigned char data[FUZZ_CAP * 8]; /* the widest dtype: KILN_I64 */
    int64_t shape[FUZZ_DIMS];
    uint8_t which = u8(f) % 10;
    kiln_context *ctx = pick_ctx(f);
    kiln_dtype dt = pick_dtype(f);
    uint32_t ndim = pick_shape(f, shape);
    double v = pick_double(f);
    uint64_t seed = u8(f);
    switch (which) {
    case 0:
        if (big_shape(ndim, shape))
            return; /* data would have to hold the elements */
        for (size_t i = 0; i < sizeof data; i++)
            data[i] = (unsigned char)(i * 37u + seed);
        if (dt == KILN_BOOL)
            for (size_t i = 0; i < sizeof data; i++)
                data[i] &= 1;
        result(f, "kiln_from_data", kiln_from_data(ctx, dt, ndim, shape, data));
        return;
    case 1:
        result(f, "kiln_empty", kiln_empty(ctx, dt, ndim, shape));
        return;
    case 2:
        result(f, "kiln_full", kiln_full(ctx, dt, ndim, shape, v));
        return;
    case 3:
        result(f, "kiln_zeros", kiln_zeros(ctx, dt, ndim, shape));
        return;
    case 4:
        result(f, "kiln_ones", kiln_ones(ctx, dt, ndim, shape));
        return;
    case 5:
        result(f, "kiln_scalar", kiln_scalar(ctx, dt, v));
        return;
    case 6: {
        double start = pick_double(f), stop = pick_double(f), step = pick_double(f);
        /* A range over FUZZ_CAP elements is not built: it would be computed. */
        double count = (stop - start) / step;
        if (count > FUZZ_CAP && isfinite(count))
            return;
        result(f, "kiln_arange", kiln_arange(ctx, dt, start, stop, step));
        return;
    }
    case 7:
        result(f, "kiln_rand", kiln_rand(ctx, dt, ndim, shape, seed));
        return;
    case 8:
        result(f, "kiln_randn", kiln_randn(ctx, dt, ndim, shape, seed));
        return;
    default: {
        int64_t strides[FUZZ_DIMS];
        for (uint32_t d = 0; d < FUZZ_DIMS; d++)
            strides[d] = pick_index(f);
        result(f, "kiln_empty_strided", kiln_empty_strided(ctx, dt, ndim, shape, strides));
        return;
    }
    }
}

static void op_create_sym(fuzz *f) {
    const kiln_expr *shape[FUZZ_DIMS];
    uint8_t which = u8(f) % 6;
    kiln_dtype dt = pick_dtype(f);
    uint32_t ndim = pick_ndim(f);
    for (uint32_t d = 0; d < FUZZ_DIMS; d++)
        shape[d] = d < ndim ? pick_expr(f) : NULL;
    uint64_t seed = u8(f);
    kiln_context *ctx = u8(f) == 255 ? (f->trusted = false, NULL) : f->ctx;
    switch (which) {
    case 0:
        result(f, "kiln_empty_sym", kiln_empty_sym(ctx, dt, ndim, shape));
        return;
    case 1:
        result(f, "kiln_full_sym", kiln_full_sym(ctx, dt, ndim, shape, pick_double(f)));
        return;
    case 2:
        result(f, "kiln_rand_sym", kiln_rand_sym(ctx, dt, ndim, shape, seed));
        return;
    case 3:
        result(f, "kiln_randn_sym", kiln_randn_sym(ctx, dt, ndim, shape, seed));
        return;
    case 4:
        result(f, "kiln_arange_sym", kiln_arange_sym(ctx, dt, pick_expr(f)));
        return;
    default:
        result(f, "kiln_scalar_expr", kiln_scalar_expr(ctx, dt, pick_expr(f)));
        return;
    }
}

/* A tensor for an op that takes expressions too: one of the first context (or a bad handle),
 * never one of the second (its expressions are the first context's). */
static kiln_tensor *pick_tensor_ctx1(fuzz *f) {
    kiln_tensor *t = pick_tensor(f);
    kiln_context *owner = kiln_tensor_context(t);
    if (owner && owner != f->ctx) {
        f->trusted = false;
        return NULL;
    }
    return t;
}

static void op_move(fuzz *f) {
    int64_t a[FUZZ_DIMS * 2], b[FUZZ_DIMS];
    uint8_t which = u8(f) % 20;
    kiln_tensor *t = pick_tensor(f);
    for (uint32_t d = 0; d < FUZZ_DIMS; d++)
        a[d] = pick_size(f);
    for (uint32_t d = FUZZ_DIMS; d < FUZZ_DIMS * 2; d++)
        a[d] = pick_index(f);
    uint32_t ndim = pick_ndim(f);
    int32_t d0 = pick_dim(f), d1 = pick_dim(f);
    int64_t i0 = pick_index(f), i1 = pick_index(f), i2 = pick_index(f);
    switch (which) {
    case 0:
        result(f, "kiln_reshape", kiln_reshape(t, ndim, a));
        return;
    case 1: {
        int32_t dims[FUZZ_DIMS];
        for (uint32_t d = 0; d < FUZZ_DIMS; d++)
            dims[d] = u8(f) < 240 ? (int32_t)(d ^ (u8(f) % 4u)) : pick_dim(f);
        result(f, "kiln_permute", kiln_permute(t, dims));
        return;
    }
    case 2:
        result(f, "kiln_transpose", kiln_transpose(t, d0, d1));
        return;
    case 3:
        for (uint32_t d = 0; d < FUZZ_DIMS; d++)
            a[d] = u8(f) < 64 ? -1 : a[d];
        result(f, "kiln_expand", kiln_expand(t, ndim, a));
        return;
    case 4:
        for (uint32_t d = 0; d < FUZZ_DIMS * 2; d++)
            a[d] = u8(f) < 200 ? (int64_t)(u8(f) % 3) : a[d];
        result(f, "kiln_pad", kiln_pad(t, a));
        return;
    case 5:
        for (uint32_t d = 0; d < FUZZ_DIMS; d++)
            b[d] = u8(f) < 200 ? (int64_t)((uint64_t)a[FUZZ_DIMS + d] + u8(f) % 4) : a[d];
        result(f, "kiln_shrink", kiln_shrink(t, a + FUZZ_DIMS, b));
        return;
    case 6:
        result(f, "kiln_flip", kiln_flip(t, d0));
        return;
    case 7: {
        int64_t step = u8(f) < 200 ? (int64_t)(u8(f) % 5) - 2 : pick_index(f);
        result(f, "kiln_slice", kiln_slice(t, d0, i0, i1, step));
        return;
    }
    case 8:
        result(f, "kiln_unsqueeze", kiln_unsqueeze(t, d0));
        return;
    case 9:
        result(f, "kiln_squeeze", kiln_squeeze(t, d0));
        return;
    case 10:
        result(f, "kiln_narrow", kiln_narrow(t, d0, i0, i1));
        return;
    case 11:
        result(f, "kiln_select", kiln_select(t, d0, i0));
        return;
    case 12:
        result(f, "kiln_diagonal", kiln_diagonal(t, i0, d0, d1));
        return;
    case 13:
        result(f, "kiln_unfold", kiln_unfold(t, d0, a[0], i2));
        return;
    case 14: {
        int64_t strides[FUZZ_DIMS];
        for (uint32_t d = 0; d < FUZZ_DIMS; d++)
            strides[d] = pick_index(f);
        if (big_shape(ndim, a))
            return;
        result(f, "kiln_as_strided", kiln_as_strided(t, ndim, a, strides, i0));
        return;
    }
    default: {
        /* The symbolic forms, with expressions. */
        const kiln_expr *e[FUZZ_DIMS * 2];
        t = pick_tensor_ctx1(f);
        for (uint32_t d = 0; d < FUZZ_DIMS * 2; d++)
            e[d] = d < 2 * ndim + 2 || d < 4 ? pick_expr(f) : NULL;
        switch (which) {
        case 15:
            result(f, "kiln_reshape_sym", kiln_reshape_sym(t, ndim, e));
            return;
        case 16:
            result(f, "kiln_expand_sym", kiln_expand_sym(t, ndim, e));
            return;
        case 17:
            result(f, "kiln_shrink_sym", kiln_shrink_sym(t, e, e + FUZZ_DIMS));
            return;
        case 18:
            result(f, "kiln_pad_sym", kiln_pad_sym(t, e));
            return;
        default:
            if (u8(f) & 1)
                result(f, "kiln_narrow_sym", kiln_narrow_sym(t, d0, e[0], e[1]));
            else
                result(f, "kiln_slice_sym", kiln_slice_sym(t, d0, e[0], e[1], i2));
            return;
        }
    }
    }
}

/* Poisons the input when r, a matmul or a convolution, costs more than FUZZ_WORK
 * multiply-adds: each of its elements sums the product of the last `dims` sizes of operand. */
static void limit_work(fuzz *f, kiln_tensor *r, kiln_tensor *operand, uint32_t dims) {
    int64_t shape[KILN_MAX_DIMS], numel, k = 1;
    uint32_t ndim = kiln_tensor_ndim(operand);
    if (!r || kiln_tensor_numel(r, &numel) != KILN_OK ||
        kiln_tensor_shape(operand, shape) != KILN_OK || ndim < dims)
        return;
    for (uint32_t d = ndim - dims; d < ndim; d++)
        k *= shape[d] ? shape[d] : 1;
    if (numel > FUZZ_WORK / k)
        f->poisoned = true;
}

static void op_compute(fuzz *f) {
    typedef kiln_tensor *(*binary)(kiln_tensor *, kiln_tensor *);
    typedef kiln_tensor *(*unary)(kiln_tensor *);
    typedef kiln_tensor *(*reduce)(kiln_tensor *, uint32_t, const int32_t *, bool);
    static const struct {
        const char *name;
        binary fn;
    } bin[] = {
        {"kiln_add", kiln_add},         {"kiln_sub", kiln_sub},      {"kiln_mul", kiln_mul},
        {"kiln_div", kiln_div},         {"kiln_pow", kiln_pow},      {"kiln_maximum", kiln_maximum},
        {"kiln_minimum", kiln_minimum}, {"kiln_lt", kiln_lt},        {"kiln_le", kiln_le},
        {"kiln_gt", kiln_gt},           {"kiln_ge", kiln_ge},        {"kiln_eq", kiln_eq},
        {"kiln_ne", kiln_ne},           {"kiln_matmul", kiln_matmul}};
    static const struct {
        const char *name;
        unary fn;
    } un[] = {{"kiln_neg", kiln_neg},         {"kiln_abs", kiln_abs},   {"kiln_exp", kiln_exp},
              {"kiln_log", kiln_log},         {"kiln_sqrt", kiln_sqrt}, {"kiln_rsqrt", kiln_rsqrt},
              {"kiln_sin", kiln_sin},         {"kiln_cos", kiln_cos},   {"kiln_tanh", kiln_tanh},
              {"kiln_sigmoid", kiln_sigmoid}, {"kiln_relu", kiln_relu}};
    static const struct {
        const char *name;
        reduce fn;
    } red[] = {{"kiln_sum", kiln_sum},
               {"kiln_prod", kiln_prod},
               {"kiln_max", kiln_max},
               {"kiln_min", kiln_min},
               {"kiln_mean", kiln_mean}};
    uint8_t which = u8(f) % 12;
    uint8_t sub = u8(f);
    kiln_tensor *a = pick_tensor(f), *b = pick_tensor(f);
    int32_t axes[FUZZ_DIMS];
    uint32_t naxes = u8(f) % 4;
    if (naxes == 3 && u8(f) == 255)
        naxes = pick_ndim(f);
    for (uint32_t d = 0; d < FUZZ_DIMS; d++)
        axes[d] = pick_dim(f);
    bool keep = u8(f) & 1;
    double v = pick_double(f);
    switch (which) {
    case 0:
    case 1: {
        unsigned i = sub % (sizeof bin / sizeof bin[0]);
        kiln_tensor *r = bin[i].fn(a, b);
        if (bin[i].fn == kiln_matmul) /* each output sums a's last dim */
            limit_work(f, r, a, 1);
        result(f, bin[i].name, r);
        return;
    }
    case 2:
        result(f, "kiln_where", kiln_where(a, b, pick_tensor(f)));
        return;
    case 3:
    case 4: {
        unsigned i = sub % (sizeof un / sizeof un[0]);
        result(f, un[i].name, un[i].fn(a));
        return;
    }
    case 5:
        result(f, "kiln_cast", kiln_cast(a, pick_dtype(f)));
        return;
    case 6:
        if (sub % 4 == 3) /* p anything: outside [0, 1) is an error */
            result(f, "kiln_dropout", kiln_dropout(a, v, sub));
        else if (sub & 1)
            result(f, "kiln_add_scalar", kiln_add_scalar(a, v));
        else
            result(f, "kiln_mul_scalar", kiln_mul_scalar(a, v));
        return;
    case 7: {
        unsigned i = sub % (sizeof red / sizeof red[0]);
        const int32_t *ax = u8(f) == 255 ? (f->trusted = false, NULL) : axes;
        result(f, red[i].name, red[i].fn(a, naxes, ax, keep));
        return;
    }
    case 8:
        if (sub & 1)
            result(f, "kiln_var", kiln_var(a, naxes, axes, v, keep));
        else
            result(f, "kiln_std", kiln_std(a, naxes, axes, v, keep));
        return;
    case 9:
        if (sub & 1)
            result(f, "kiln_softmax", kiln_softmax(a, axes[0]));
        else
            result(f, "kiln_log_softmax", kiln_log_softmax(a, axes[0]));
        return;
    case 10:
        result(f, "kiln_argmax", kiln_argmax(a, axes[0], keep));
        return;
    default: {
        kiln_tensor *r = kiln_conv2d(a, b, pick_size(f), pick_index(f));
        limit_work(f, r, b, 3); /* each output sums C x KH x KW elements of w */
        result(f, "kiln_conv2d", r);
        return;
    }
    }
}

/* Writes, realize and read: nothing runs once a shape over FUZZ_CAP elements exists. */
static void op_run(fuzz *f) {
    static _Alignas(8) unsigned char buf[2][FUZZ_CAP * 4 + 16];
    uint8_t which = u8(f) % 8;
    kiln_tensor *a = pick_tensor(f), *b = pick_tensor(f);
    double v = pick_double(f);
    if (f->poisoned)
        return;
    kiln_context *ctx = kiln_tensor_context(a);
    switch (which) {
    case 0:
        status(f, "kiln_copy_", ctx, kiln_copy_(a, b));
        return;
    case 1:
        status(f, "kiln_add_", ctx, kiln_add_(a, b));
        return;
    case 2:
        status(f, "kiln_mul_", ctx, kiln_mul_(a, b));
        return;
    case 3:
        status(f, "kiln_fill_", ctx, kiln_fill_(a, v));
        return;
    case 4:
        status(f, "kiln_realize", ctx, kiln_realize(a));
        return;
    case 5: {
        kiln_tensor *list[4] = {a, b, pick_tensor(f), pick_tensor(f)};
        uint32_t count = u8(f) % 5;
        kiln_context *c = pick_ctx(f);
        if (u8(f) == 255) {
            f->trusted = false;
            status(f, "kiln_realize_many", c, kiln_realize_many(c, count, NULL));
        } else {
            status(f, "kiln_realize_many", c, kiln_realize_many(c, count, list));
        }
        return;
    }
    default: {
        int64_t numel = 0;
        size_t bytes = sizeof buf[0];
        uint8_t how = u8(f);
        if (kiln_tensor_numel(a, &numel) == KILN_OK && how < 128)
            bytes = (size_t)numel * kiln_dtype_size(kiln_tensor_dtype(a));
        if (how >= 128 && how < 160 && bytes > 0)
            bytes -= 1 + how % 4; /* too small by a little */
        if (bytes > sizeof buf[0])
            return;
        void *dst = how == 255 ? NULL : buf[0];
        if (trace())
            fprintf(stderr, "kiln_read of %p, %zu bytes:\n", (void *)a, bytes);
        kiln_status st = status(f, "kiln_read", ctx, kiln_read(a, dst, bytes));
        size_t got = (size_t)numel * kiln_dtype_size(kiln_tensor_dtype(a)); /* what was read */
        if (st == KILN_OK && dst) {
            if (got > bytes)
                fuzz_fail("kiln_read of %zu bytes into %zu succeeded", got, bytes);
            /* (The second read may fail: an allocation made to fail.) */
            kiln_status again = kiln_read(a, buf[1], bytes);
            if (again != KILN_OK && !f->ta.failures)
                fuzz_fail("kiln_read failed the second time: %s", kiln_context_message(ctx));
            if (again == KILN_OK && memcmp(buf[0], buf[1], got) != 0)
                fuzz_fail("kiln_read read other bytes the second time (%02x%02x%02x%02x, then "
                          "%02x%02x%02x%02x)",
                          buf[0][0], buf[0][1], buf[0][2], buf[0][3], buf[1][0], buf[1][1],
                          buf[1][2], buf[1][3]);
        }
        return;
    }
    }
}

/* Forgets the expressions made in scopes deeper than depth (their scope has ended). */
static void drop_exprs(fuzz *f, uint32_t depth) {
    for (unsigned i = 0; i < FUZZ_EXPRS; i++) {
        if (f->expr[i].e && f->expr[i].depth > depth)
            f->expr[i].e = NULL;
    }
}

static void op_lifetime(fuzz *f) {
    uint8_t which = u8(f) % 6;
    switch (which) {
    case 0:
    case 1: {
        kiln_tensor *t = pick_tensor(f);
        status(f, "kiln_release", kiln_tensor_context(t), kiln_release(t));
        return;
    }
    case 2:
        if (u8(f) == 255) {
            kiln_scope_begin(NULL);
        } else {
            kiln_scope_begin(f->ctx);
            f->depth++;
        }
        return;
    default: {
        kiln_tensor *keep[4];
        uint32_t count = u8(f) % 5;
        for (uint32_t i = 0; i < 4; i++)
            keep[i] = pick_tensor(f);
        uint8_t how = u8(f);
        kiln_context *ctx = how == 255 ? NULL : f->ctx;
        kiln_tensor *const *list = how == 254 ? NULL : keep;
        kiln_status st = kiln_scope_end(ctx, count, list);
        if (st == KILN_OK) {
            if (f->depth == 0)
                fuzz_fail("kiln_scope_end succeeded with no scope open");
            f->depth--;
            drop_exprs(f, f->depth);
        } else if (ctx && f->depth > 0 && list && count == 0) {
            fuzz_fail("kiln_scope_end failed: %s", kiln_context_message(ctx));
        }
        return;
    }
    }
}

static void op_expr(fuzz *f) {
    static const char *names[] = {"n", "batch", "_x1", "", "1x", "a b", "x", "n"};
    uint8_t which = u8(f) % 9;
    kiln_context *ctx = u8(f) == 255 ? (f->trusted = false, NULL) : f->ctx;
    const kiln_expr *a = pick_expr(f), *b = pick_expr(f);
    int64_t v = u8(f) < 128 ? (int64_t)(u8(f) % 8) : pick_index(f);
    const kiln_expr *r = NULL;
    switch (which) {
    case 0:
    case 1:
        r = kiln_int(ctx, v);
        break;
    case 2: {
        int64_t lo = u8(f) < 200 ? (int64_t)(u8(f) % 3) : pick_index(f);
        int64_t hi = u8(f) < 200 ? (int64_t)((uint64_t)lo + u8(f) % 8) : pick_index(f);
        r = kiln_variable(ctx, names[u8(f) % 8], lo, hi);
        keep_expr(f, r, 0);
        return;
    }
    case 3:
        r = kiln_bind(ctx, a, v);
        if (r && v > FUZZ_CAP)
            f->poisoned = true; /* sizes of that Variable could be that large */
        break;
    case 4:
        r = kiln_expr_add(ctx, a, b);
        break;
    case 5:
        r = kiln_expr_mul(ctx, a, b);
        break;
    case 6:
        r = kiln_expr_div(ctx, a, b);
        break;
    case 7:
        r = kiln_expr_mod(ctx, a, b);
        break;
    default: {
        int64_t value;
        status(f, "kiln_expr_value", ctx, kiln_expr_value(ctx, a, v == 7 ? NULL : &value));
        return;
    }
    }
    if (!r && f->trusted && !any_error(f))
        fuzz_fail("an expression call (op %u) returned NULL with no error recorded", which);
    keep_expr(f, r, f->depth);
}

static void op_query(fuzz *f) {
    kiln_tensor *t = pick_tensor(f);
    kiln_context *ctx = kiln_tensor_context(t);
    int64_t buf[KILN_MAX_DIMS], *out = buf;
    if (u8(f) == 255) {
        out = NULL;
        f->trusted = false;
    }
    switch (u8(f) % 8) {
    case 0:
        status(f, "kiln_tensor_shape", ctx, kiln_tensor_shape(t, out));
        return;
    case 1:
        status(f, "kiln_tensor_numel", ctx, kiln_tensor_numel(t, out));
        return;
    case 2:
        status(f, "kiln_tensor_strides", ctx, kiln_tensor_strides(t, out));
        return;
    case 3:
        status(f, "kiln_tensor_offset", ctx, kiln_tensor_offset(t, out));
        return;
    case 4:
        status(f, "kiln_tensor_storage_size", ctx, kiln_tensor_storage_size(t, out));
        return;
    case 5: {
        const kiln_expr *e = kiln_tensor_size_expr(t, (uint32_t)pick_dim(f));
        if (e && ctx == f->ctx)
            keep_expr(f, e, f->depth);
        return;
    }
    case 6:
        (void)kiln_dtype_size(pick_dtype(f));
        (void)kiln_dtype_name(pick_dtype(f));
        (void)kiln_status_string((kiln_status)(int)pick_index(f));
        return;
    default: {
        kiln_stats s = kiln_context_stats(f->ctx);
        if (s.live_tensors > f->nhandles + 64)
            fuzz_fail("%llu live tensors, %zu made", (unsigned long long)s.live_tensors,
                      f->nhandles);
        (void)kiln_context_message(pick_ctx(f));
        (void)kiln_context_device_name(pick_ctx(f));
        return;
    }
    }
}

/* Destroys the second context: its tensors in the slots become handles of a destroyed
 * context. */
static void op_ctx2(fuzz *f) {
    if (!f->ctx2)
        return;
    kiln_context_destroy(f->ctx2);
    f->ctx2 = NULL;
    if (f->ta2.live_blocks != 0)
        fuzz_fail("the second context left %ld blocks", f->ta2.live_blocks);
    for (unsigned i = 0; i < FUZZ_SLOTS; i++) {
        if (f->from[i] == FROM_CTX2)
            f->from[i] = FROM_ORPHAN;
    }
}

/* Releases everything, checks the live counts and that the context still computes. */
static void finish(fuzz *f) {
    f->ta.fail_at = 0;
    kiln_context_clear_error(f->ctx);
    while (f->depth > 0) {
        if (kiln_scope_end(f->ctx, 0, NULL) != KILN_OK)
            fuzz_fail("closing scope %u: %s", f->depth, kiln_context_message(f->ctx));
        f->depth--;
    }
    for (size_t i = 0; i < f->nhandles; i++)
        (void)kiln_release(f->handles[i]);
    kiln_context_clear_error(f->ctx);
    if (f->nhandles < FUZZ_HANDLES) {
        kiln_stats s = kiln_context_stats(f->ctx);
        if (s.live_tensors || s.live_nodes || s.live_storages || s.live_storage_bytes)
            fuzz_fail("everything released, yet live: %llu tensors, %llu nodes, %llu storages "
                      "(%llu bytes)",
                      (unsigned long long)s.live_tensors, (unsigned long long)s.live_nodes,
                      (unsigned long long)s.live_storages,
                      (unsigned long long)s.live_storage_bytes);
    }
    float three[3] = {1, 2, 3}, sum = 0;
    kiln_tensor *t = kiln_from_data(f->ctx, KILN_F32, 1, (const int64_t[]){3}, three);
    kiln_status st = kiln_read(kiln_sum(t, 0, NULL, false), &sum, sizeof sum);
    if (st != KILN_OK || sum != 6)
        fuzz_fail("the context no longer computes: %s (%s), %g", kiln_status_string(st),
                  kiln_context_message(f->ctx), (double)sum);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static fuzz zero;
    base_log_set_sink(quiet, NULL);
    fuzz *f = malloc(sizeof *f);
    if (!f)
        return 0;
    *f = zero;
    f->p = data;
    f->n = size;
    uint8_t setup = u8(f);
    if (setup & 1) {
        f->ta.fail_at = 1 + (long)(u8(f) | (unsigned)u8(f) << 8);
    }
    kiln_context_options opt = {.device = "interp", .alloc = fuzz_alloc, .alloc_user = &f->ta};
    kiln_status st = kiln_context_create(&opt, &f->ctx);
    if (st != KILN_OK) {
        if (st != KILN_ERROR_OUT_OF_HOST_MEMORY || !f->ta.failures || f->ctx)
            fuzz_fail("kiln_context_create: %s", kiln_status_string(st));
        goto check_blocks;
    }
    for (int ops = 0; ops < FUZZ_OPS && f->n > 0; ops++) {
        uint8_t op = u8(f);
        if (op & 0x80) {
            kiln_context_clear_error(f->ctx);
            kiln_context_clear_error(f->ctx2);
        }
        f->trusted = true;
        switch ((op & 0x7f) % 16) {
        case 0:
        case 1:
            op_create(f);
            break;
        case 2:
            op_create_sym(f);
            break;
        case 3:
        case 4:
        case 5:
            op_move(f);
            break;
        case 6:
        case 7:
        case 8:
            op_compute(f);
            break;
        case 9:
        case 10:
            op_run(f);
            break;
        case 11:
        case 12:
            op_lifetime(f);
            break;
        case 13:
            op_expr(f);
            break;
        case 14:
            op_query(f);
            break;
        default:
            if (op & 0x40)
                op_ctx2(f);
            else
                kiln_context_clear_error(pick_ctx(f));
            break;
        }
    }
    finish(f);
    op_ctx2(f);
    kiln_context_destroy(f->ctx);
check_blocks:
    if (f->ta.live_blocks != 0 || f->ta.size_mismatches != 0)
        fuzz_fail("%ld blocks left, %ld frees of the wrong size", f->ta.live_blocks,
                  f->ta.size_mismatches);
    free(f);
    return 0;
}
