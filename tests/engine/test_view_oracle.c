/* engine/: the generated view oracle. Every case of fixtures/views.h (written by
 * fixtures/gen_views.py from PyTorch and NumPy) is replayed through the public API on the Vulkan
 * device and on the interpreter: the values must be identical, and the shape, strides, storage
 * offset and storage size those of PyTorch (NumPy's for negative strides). Reading a view of a
 * realized tensor must cost one kernel (none for the whole storage in order) and download only
 * the view's bytes; a write one kernel, plus a copy of its source only when the source reads the
 * destination's storage other than element for element. */

#include "fixtures/views.h"

#include "engine_fixture.h"

#include <kiln/kiln.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

enum { MAX_STACK = 8, MAX_VALUES = 1024 };

static kiln_dtype dtype_of(int32_t code) {
    static const kiln_dtype dtypes[] = {KILN_F32, KILN_I32, KILN_U8, KILN_I8, KILN_F16};
    return dtypes[code];
}

/* An IEEE half (finite) as a float. */
static float half_value(uint16_t h) {
    int exp = (h >> 10) & 31, man = h & 1023;
    float v = exp == 0 ? ldexpf((float)man, -24) : ldexpf((float)(man | 1024), exp - 25);
    return h >> 15 ? -v : v;
}

/* Element i of a buffer of dtype, as an integer (every oracle value is one). */
static int64_t element(kiln_dtype dtype, const void *buf, int64_t i) {
    switch (dtype) {
    case KILN_F32:
        return (int64_t)((const float *)buf)[i];
    case KILN_F16:
        return (int64_t)half_value(((const uint16_t *)buf)[i]);
    case KILN_I32:
        return ((const int32_t *)buf)[i];
    case KILN_I8:
        return ((const int8_t *)buf)[i];
    default:
        return ((const uint8_t *)buf)[i];
    }
}

/* start + arange(numel) in dtype (bytes wrap), shaped dims; f16 is cast from f32 (a computed
 * tensor). */
static kiln_tensor *arange_tensor(kiln_context *ctx, int32_t code, uint32_t ndim,
                                  const int32_t *dims, int64_t start) {
    static union {
        float f[MAX_VALUES];
        int32_t i[MAX_VALUES];
        uint8_t u[MAX_VALUES];
        int8_t s[MAX_VALUES];
    } buf;
    int64_t shape[KILN_MAX_DIMS], n = 1;
    for (uint32_t d = 0; d < ndim; d++)
        n *= shape[d] = dims[d];
    assert_true(n <= MAX_VALUES);
    for (int64_t i = 0; i < n; i++) {
        if (code == 0 || code == 4)
            buf.f[i] = (float)(start + i);
        else if (code == 1)
            buf.i[i] = (int32_t)(start + i);
        else if (code == 2)
            buf.u[i] = (uint8_t)((start + i) % 256);
        else
            buf.s[i] = (int8_t)((start + i + 128) % 256 - 128);
    }
    if (code == 4)
        return kiln_cast(kiln_from_data(ctx, KILN_F32, ndim, shape, &buf), KILN_F16);
    return kiln_from_data(ctx, dtype_of(code), ndim, shape, &buf);
}

static int64_t slice_bound(int32_t v, int64_t omitted) {
    return v == VO_NONE ? omitted : v;
}

/* The tensor one movement op makes of t. */
static kiln_tensor *movement(kiln_tensor *t, uint8_t kind, uint32_t n, const int32_t *a) {
    int64_t dims[2 * KILN_MAX_DIMS + 1];
    int32_t perm[KILN_MAX_DIMS];
    for (uint32_t i = 0; i < n; i++) {
        dims[i] = a[i];
        perm[i % KILN_MAX_DIMS] = a[i];
    }
    switch (kind) {
    case VO_RESHAPE:
        return kiln_reshape(t, n, dims);
    case VO_PERMUTE:
        return kiln_permute(t, perm);
    case VO_TRANSPOSE:
        return kiln_transpose(t, a[0], a[1]);
    case VO_EXPAND:
        return kiln_expand(t, n, dims);
    case VO_FLIP:
        return kiln_flip(t, a[0]);
    case VO_SLICE:
        return kiln_slice(t, a[0], slice_bound(a[1], INT64_MIN), slice_bound(a[2], INT64_MAX),
                          a[3]);
    case VO_UNSQUEEZE:
        return kiln_unsqueeze(t, a[0]);
    case VO_SQUEEZE:
        return kiln_squeeze(t, a[0]);
    case VO_NARROW:
        return kiln_narrow(t, a[0], a[1], a[2]);
    case VO_SELECT:
        return kiln_select(t, a[0], a[1]);
    case VO_DIAGONAL:
        return kiln_diagonal(t, a[0], a[1], a[2]);
    case VO_UNFOLD:
        return kiln_unfold(t, a[0], a[1], a[2]);
    case VO_AS_STRIDED: {
        uint32_t nd = (uint32_t)a[0];
        return kiln_as_strided(t, nd, dims + 1, dims + 1 + nd, a[1 + 2 * nd]);
    }
    default:
        fail_msg("op kind %u is not a movement op", kind);
        return NULL;
    }
}

static kiln_status write_op(uint8_t kind, kiln_tensor *dst, kiln_tensor *src, const int32_t *a) {
    switch (kind) {
    case VO_COPY:
        return kiln_copy_(dst, src);
    case VO_ADD:
        return kiln_add_(dst, src);
    case VO_MUL:
        return kiln_mul_(dst, src);
    default:
        return kiln_fill_(dst, a[0]);
    }
}

/* Replays case c in ctx: the tensor on top of the stack at the end. The base is realized as
 * soon as it is made, so that reading a view of it costs only the view's kernel; *made holds
 * the statistics just after. */
static kiln_tensor *replay(kiln_context *ctx, const vo_case *c, kiln_dtype *base_dtype,
                           kiln_stats *made) {
    kiln_tensor *stack[MAX_STACK] = {0}, *base = NULL;
    int sp = 0;
    for (uint32_t i = 0; i < c->nops; i++) {
        const vo_op *op = &vo_ops[c->op + i];
        const int32_t *a = &vo_args[op->arg];
        if (op->kind == VO_BASE) {
            /* a buffer, realized; or (code | 8) the same values computed lazily */
            *base_dtype = dtype_of(a[0] & 7);
            base = arange_tensor(ctx, a[0] & 7, op->nargs - 1u, a + 1, 0);
            if (a[0] & 8)
                base = kiln_add_scalar(base, 0);
            else
                assert_int_equal(kiln_realize(base), KILN_OK);
            stack[(sp = 1) - 1] = base;
            *made = kiln_context_stats(ctx);
        } else if (op->kind == VO_EMPTY_STRIDED) {
            int64_t dims[2 * KILN_MAX_DIMS];
            uint32_t nd = (uint32_t)a[1];
            for (uint32_t d = 0; d < 2 * nd; d++)
                dims[d] = a[2 + d];
            *base_dtype = dtype_of(a[0]);
            base = kiln_empty_strided(ctx, *base_dtype, nd, dims, dims + nd);
            stack[(sp = 1) - 1] = base;
            *made = kiln_context_stats(ctx);
        } else if (op->kind == VO_SOURCE || op->kind == VO_PUSH_BASE) {
            assert_true(sp < MAX_STACK);
            stack[sp++] = op->kind == VO_PUSH_BASE
                              ? base
                              : arange_tensor(ctx, a[0], op->nargs - 1u, a + 1, 100);
        } else if (op->kind >= VO_COPY && op->kind <= VO_FILL) {
            kiln_tensor *src = op->kind == VO_FILL ? NULL : stack[--sp];
            kiln_tensor *dst = stack[--sp];
            kiln_status st = write_op(op->kind, dst, src, a);
            if (st != KILN_OK)
                fail_msg("case \"%s\": write %u: %s", c->name, i, kiln_context_message(ctx));
            stack[sp++] = base;
        } else if (op->kind == VO_SNAP) {
            stack[sp - 1] = kiln_add_scalar(stack[sp - 1], 0); /* computed: old values */
        } else if (op->kind == VO_SWAP) {
            kiln_tensor *top = stack[sp - 1];
            stack[sp - 1] = stack[sp - 2];
            stack[sp - 2] = top;
        } else {
            stack[sp - 1] = movement(stack[sp - 1], op->kind, op->nargs, a);
        }
        if (!stack[sp - 1])
            fail_msg("case \"%s\": op %u: %s", c->name, i, kiln_context_message(ctx));
    }
    return stack[sp - 1];
}

static void expect_layout(const vo_case *c, kiln_tensor *t) {
    const int32_t *want = &vo_args[c->layout];
    int64_t shape[KILN_MAX_DIMS], strides[KILN_MAX_DIMS], offset, storage;
    if (kiln_tensor_ndim(t) != c->ndim)
        fail_msg("case \"%s\": %u dims, expected %u", c->name, kiln_tensor_ndim(t), c->ndim);
    assert_int_equal(kiln_tensor_shape(t, shape), KILN_OK);
    assert_int_equal(kiln_tensor_strides(t, strides), KILN_OK);
    assert_int_equal(kiln_tensor_offset(t, &offset), KILN_OK);
    assert_int_equal(kiln_tensor_storage_size(t, &storage), KILN_OK);
    for (uint32_t d = 0; d < c->ndim; d++) {
        if (shape[d] != want[d])
            fail_msg("case \"%s\": size %lld of dim %u, expected %d", c->name, (long long)shape[d],
                     d, want[d]);
        if (strides[d] != want[c->ndim + d])
            fail_msg("case \"%s\": stride %lld of dim %u, expected %d", c->name,
                     (long long)strides[d], d, want[c->ndim + d]);
    }
    if (offset != want[2 * c->ndim])
        fail_msg("case \"%s\": offset %lld, expected %d", c->name, (long long)offset,
                 want[2 * c->ndim]);
    if (storage != c->storage)
        fail_msg("case \"%s\": storage of %lld elements, expected %u", c->name, (long long)storage,
                 c->storage);
}

static void expect_values(const vo_case *c, kiln_tensor *t, kiln_dtype dtype) {
    static union {
        float f[MAX_VALUES];
        int32_t i[MAX_VALUES];
        uint8_t u[MAX_VALUES];
    } got;
    assert_true(c->nval <= MAX_VALUES);
    if (kiln_read(t, &got, c->nval * kiln_dtype_size(dtype)) != KILN_OK)
        fail_msg("case \"%s\": kiln_read: %s", c->name,
                 kiln_context_message(kiln_tensor_context(t)));
    for (uint32_t i = 0; i < c->nval; i++) {
        int64_t v = element(dtype, &got, i);
        if (v != vo_values[c->val + i])
            fail_msg("case \"%s\": element %u is %lld, expected %d", c->name, i, (long long)v,
                     vo_values[c->val + i]);
    }
}

/* Every read-only case: values, layout, and the cost of the read. */
static void test_engine_view_oracle_reads_match_and_cost_one_kernel(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_context_clear_error(ctx); /* a failed test before this one leaves no sticky error */
    size_t n = 0;
    for (size_t k = 0; k < sizeof vo_cases / sizeof vo_cases[0]; k++) {
        const vo_case *c = &vo_cases[k];
        if (c->wrote)
            continue;
        kiln_dtype dtype = KILN_F32;
        kiln_stats made;
        kiln_tensor *t = replay(ctx, c, &dtype, &made);
        expect_layout(c, t);
        kiln_stats before = kiln_context_stats(ctx);
        expect_values(c, t, dtype);
        kiln_stats after = kiln_context_stats(ctx);
        if (c->kernels != 255 && after.dispatches - before.dispatches != c->kernels)
            fail_msg("case \"%s\": reading took %llu kernels, expected %u", c->name,
                     (unsigned long long)(after.dispatches - before.dispatches), c->kernels);
        if (after.bytes_downloaded - before.bytes_downloaded != c->nval * kiln_dtype_size(dtype))
            fail_msg("case \"%s\": reading downloaded %llu bytes, expected %zu", c->name,
                     (unsigned long long)(after.bytes_downloaded - before.bytes_downloaded),
                     c->nval * kiln_dtype_size(dtype));
        assert_int_equal(after.bytes_uploaded, before.bytes_uploaded);
        assert_int_equal(kiln_context_status(ctx), KILN_OK);
        n++;
    }
    assert_true(n > 200);
}

/* Every case that writes through a view: the values read back after the writes, the layout of
 * what is read, and the kernels the whole case costs. */
static void test_engine_view_oracle_writes_match_numpy(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_context_clear_error(ctx); /* a failed test before this one leaves no sticky error */
    size_t n = 0;
    for (size_t k = 0; k < sizeof vo_cases / sizeof vo_cases[0]; k++) {
        const vo_case *c = &vo_cases[k];
        if (!c->wrote)
            continue;
        kiln_dtype dtype = KILN_F32;
        kiln_stats before;
        kiln_tensor *t = replay(ctx, c, &dtype, &before);
        expect_layout(c, t);
        expect_values(c, t, dtype);
        kiln_stats after = kiln_context_stats(ctx);
        /* one kernel per write (no temporary unless the source reads the destination's storage
         * other than element for element), and the read's */
        if (c->kernels != 255 && after.dispatches - before.dispatches != c->kernels)
            fail_msg("case \"%s\": the writes and the read took %llu kernels, expected %u", c->name,
                     (unsigned long long)(after.dispatches - before.dispatches), c->kernels);
        assert_int_equal(after.bytes_downloaded - before.bytes_downloaded,
                         c->nval * kiln_dtype_size(dtype));
        assert_int_equal(kiln_context_status(ctx), KILN_OK);
        n++;
    }
    assert_true(n > 100);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_view_oracle_reads_match_and_cost_one_kernel),
        ENG_TEST(test_engine_view_oracle_writes_match_numpy),
    };
    int failed = ENG_RUN_BOTH(tests);
    return failed;
}
