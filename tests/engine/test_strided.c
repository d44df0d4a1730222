/* engine/: strided tensors end to end: as_strided, empty_strided, copies and in-place writes
 * through views, program order, aliasing destinations, and reported strides. Expected values
 * are PyTorch's (NumPy's for negative strides), worked out by hand in the comments. Every case
 * runs on the Vulkan device and on the interpreter. */

#include "engine_fixture.h"

#include <kiln/kiln.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* arange(n) as f32 in storage of its own (a buffer, so writes have a storage to land in). */
static kiln_tensor *iota(kiln_context *ctx, int64_t n) {
    float data[64];
    for (int64_t i = 0; i < n; i++)
        data[i] = (float)i;
    return kiln_from_data(ctx, KILN_F32, 1, &n, data);
}

static void expect_values(kiln_tensor *t, const float *want, size_t n) {
    float got[64];
    assert_true(n <= 64);
    kiln_status st = kiln_read(t, got, sizeof got);
    if (st != KILN_OK)
        fail_msg("kiln_read: %s", kiln_context_message(kiln_tensor_context(t)));
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i])
            fail_msg("element %zu is %g, expected %g", i, (double)got[i], (double)want[i]);
    }
}

static void expect_layout(kiln_tensor *t, uint32_t ndim, const int64_t *strides, int64_t offset) {
    int64_t s[16], o;
    assert_int_equal(kiln_tensor_ndim(t), ndim);
    assert_int_equal(kiln_tensor_strides(t, s), KILN_OK);
    assert_int_equal(kiln_tensor_offset(t, &o), KILN_OK);
    for (uint32_t d = 0; d < ndim; d++)
        assert_int_equal(s[d], strides[d]);
    assert_int_equal(o, offset);
}

/* torch.arange(12.).as_strided((3, 2), (2, 3), 1): element (i, j) is storage[1 + 2i + 3j]. */
static void test_engine_strided_as_strided_reads(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = iota(ctx, 12);
    kiln_tensor *a = kiln_as_strided(x, 2, (int64_t[]){3, 2}, (int64_t[]){2, 3}, 1);
    expect_values(a, (const float[]){1, 4, 3, 6, 5, 8}, 6);
    expect_layout(a, 2, (int64_t[]){2, 3}, 1);
    /* Overlapping windows: (4, 3) with strides (2, 1): rows start at 0, 2, 4, 6. */
    kiln_tensor *w = kiln_as_strided(x, 2, (int64_t[]){4, 3}, (int64_t[]){2, 1}, 0);
    expect_values(w, (const float[]){0, 1, 2, 2, 3, 4, 4, 5, 6, 6, 7, 8}, 12);
    /* NumPy's negative strides: (3,) with stride -2 from element 10: 10, 8, 6. */
    kiln_tensor *n = kiln_as_strided(x, 1, (int64_t[]){3}, (int64_t[]){-2}, 10);
    expect_values(n, (const float[]){10, 8, 6}, 3);
    expect_layout(n, 1, (int64_t[]){-2}, 10);
    /* A size-1 dim keeps the stride asked for (PyTorch reports it). */
    kiln_tensor *one = kiln_as_strided(x, 2, (int64_t[]){1, 3}, (int64_t[]){7, 1}, 2);
    expect_layout(one, 2, (int64_t[]){7, 1}, 2);
    expect_values(one, (const float[]){2, 3, 4}, 3);
    assert_int_equal(kiln_context_status(ctx), KILN_OK);
}

static void test_engine_strided_as_strided_rejects_out_of_storage(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = iota(ctx, 12);
    /* highest element 2 + 2*5 = 12 is past the 12-element storage */
    assert_null(kiln_as_strided(x, 1, (int64_t[]){6}, (int64_t[]){2}, 2));
    assert_int_equal(kiln_context_status(ctx), KILN_ERROR_OUT_OF_BOUNDS);
    kiln_context_clear_error(ctx);
    assert_null(kiln_as_strided(x, 1, (int64_t[]){2}, (int64_t[]){1}, -1)); /* negative offset */
    assert_int_not_equal(kiln_context_status(ctx), KILN_OK);
    kiln_context_clear_error(ctx);
    assert_null(kiln_as_strided(x, 1, (int64_t[]){3}, (int64_t[]){-5}, 9)); /* lowest is -1 */
    kiln_context_clear_error(ctx);
    /* numel 0: any offset inside is fine, the view is empty */
    assert_non_null(kiln_as_strided(x, 2, (int64_t[]){0, 4}, (int64_t[]){100, 100}, 3));
    /* x is intact */
    expect_values(x, (const float[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 12);
}

/* torch.empty_strided((2, 3), (1, 2)): storage of 1 + 1*1 + 2*2 = 6 elements; written, read. */
static void test_engine_strided_empty_strided(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *e = kiln_empty_strided(ctx, KILN_F32, 2, (int64_t[]){2, 3}, (int64_t[]){1, 2});
    assert_non_null(e);
    expect_layout(e, 2, (int64_t[]){1, 2}, 0);
    int64_t storage;
    assert_int_equal(kiln_tensor_storage_size(e, &storage), KILN_OK);
    assert_int_equal(storage, 6);
    float rows[6] = {10, 11, 12, 13, 14, 15};
    kiln_tensor *src = kiln_from_data(ctx, KILN_F32, 2, (int64_t[]){2, 3}, rows);
    assert_int_equal(kiln_copy_(e, src), KILN_OK);
    expect_values(e, rows, 6);
    /* The storage holds element (i, j) at i + 2j: 10 13 11 14 12 15. */
    kiln_tensor *flat = kiln_as_strided(e, 1, (int64_t[]){6}, (int64_t[]){1}, 0);
    expect_values(flat, (const float[]){10, 13, 11, 14, 12, 15}, 6);
    /* A size 0 gives an empty storage. */
    kiln_tensor *z = kiln_empty_strided(ctx, KILN_F32, 2, (int64_t[]){0, 3}, (int64_t[]){3, 1});
    assert_int_equal(kiln_tensor_storage_size(z, &storage), KILN_OK);
    assert_int_equal(storage, 0);
}

/* Copies between layouts: contiguous -> transposed, strided -> contiguous, negative strides on
 * either side, and a dtype conversion. */
static void test_engine_strided_copies_between_layouts(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *dst =
        kiln_reshape(kiln_zeros(ctx, KILN_F32, 1, (int64_t[]){6}), 2, (int64_t[]){2, 3});
    dst = kiln_add_scalar(dst, 0); /* a computed tensor: copy_ realizes it first */
    kiln_tensor *src = kiln_reshape(iota(ctx, 6), 2, (int64_t[]){3, 2});
    /* dst.T (3, 2) = src: dst[j][i] = src[i][j] = 2i + j */
    assert_int_equal(kiln_copy_(kiln_transpose(dst, 0, 1), src), KILN_OK);
    expect_values(dst, (const float[]){0, 2, 4, 1, 3, 5}, 6);
    /* into a reversed view from a stride-2 view: d[::-1] = s[::2] */
    kiln_tensor *d = iota(ctx, 4);
    kiln_tensor *s = iota(ctx, 8);
    assert_int_equal(kiln_copy_(kiln_slice(d, 0, INT64_MAX, INT64_MIN, -1),
                                kiln_slice(s, 0, INT64_MIN, INT64_MAX, 2)),
                     KILN_OK);
    expect_values(d, (const float[]){6, 4, 2, 0}, 4);
    /* a conversion: int32 destination from floats (truncation toward zero) */
    int32_t zeros[3] = {0, 0, 0};
    kiln_tensor *ints = kiln_from_data(ctx, KILN_I32, 1, (int64_t[]){3}, zeros);
    float vals[3] = {1.9f, -1.9f, 7.5f};
    assert_int_equal(kiln_copy_(ints, kiln_from_data(ctx, KILN_F32, 1, (int64_t[]){3}, vals)),
                     KILN_OK);
    int32_t got[3];
    assert_int_equal(kiln_read(ints, got, sizeof got), KILN_OK);
    assert_int_equal(got[0], 1);
    assert_int_equal(got[1], -1);
    assert_int_equal(got[2], 7);
    /* broadcasting a scalar into a column */
    kiln_tensor *m = kiln_reshape(iota(ctx, 6), 2, (int64_t[]){2, 3});
    assert_int_equal(kiln_fill_(kiln_select(m, 1, 1), -1), KILN_OK);
    expect_values(m, (const float[]){0, -1, 2, 3, -1, 5}, 6);
}

/* NumPy's rule when source and destination share storage: as if src were read first.
 * x = [0 1 2 3 4 5]; x[1:] = x[:-1] gives [0 0 1 2 3 4]. */
static void test_engine_strided_overlapping_copy_reads_source_first(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = iota(ctx, 6);
    assert_int_equal(kiln_copy_(kiln_slice(x, 0, 1, INT64_MAX, 1), kiln_slice(x, 0, 0, 5, 1)),
                     KILN_OK);
    expect_values(x, (const float[]){0, 0, 1, 2, 3, 4}, 6);
    /* and reversed in place: x[:] = x[::-1] */
    kiln_tensor *y = iota(ctx, 5);
    assert_int_equal(kiln_copy_(y, kiln_flip(y, 0)), KILN_OK);
    expect_values(y, (const float[]){4, 3, 2, 1, 0}, 5);
}

/* In-place ops through slices with steps, transposes, diagonals and as_strided views write
 * the base storage; later readers of the base see it. */
static void test_engine_strided_in_place_through_views(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = iota(ctx, 9);
    kiln_tensor *m = kiln_reshape(x, 2, (int64_t[]){3, 3});
    assert_int_equal(kiln_add_(kiln_slice(x, 0, 1, INT64_MAX, 2), kiln_scalar(ctx, KILN_F32, 100)),
                     KILN_OK); /* x[1::2] += 100 */
    expect_values(x, (const float[]){0, 101, 2, 103, 4, 105, 6, 107, 8}, 9);
    assert_int_equal(kiln_add_(kiln_diagonal(m, 0, 0, 1), kiln_scalar(ctx, KILN_F32, 1000)),
                     KILN_OK); /* m.diagonal() += 1000 (m views x) */
    expect_values(x, (const float[]){1000, 101, 2, 103, 1004, 105, 6, 107, 1008}, 9);
    /* m.T *= 2 on its first row: m.T[0] is m's first column */
    assert_int_equal(
        kiln_mul_(kiln_select(kiln_transpose(m, 0, 1), 0, 0), kiln_scalar(ctx, KILN_F32, 2)),
        KILN_OK);
    expect_values(x, (const float[]){2000, 101, 2, 206, 1004, 105, 12, 107, 1008}, 9);
    /* as_strided of a view of a view: every third element, from element 2 */
    kiln_tensor *a = kiln_as_strided(m, 1, (int64_t[]){3}, (int64_t[]){3}, 2);
    assert_int_equal(kiln_fill_(a, -5), KILN_OK);
    expect_values(m, (const float[]){2000, 101, -5, 206, 1004, -5, 12, 107, -5}, 9);
}

/* Program order: what was built before a write reads the old values, what is built after the
 * new ones. */
static void test_engine_strided_program_order(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = iota(ctx, 4);
    kiln_tensor *before = kiln_mul_scalar(x, 2);
    kiln_tensor *view = kiln_flip(x, 0);
    assert_int_equal(kiln_add_(x, kiln_scalar(ctx, KILN_F32, 10)), KILN_OK);
    kiln_tensor *after = kiln_mul_scalar(x, 2);
    expect_values(after, (const float[]){20, 22, 24, 26}, 4);
    expect_values(before, (const float[]){0, 2, 4, 6}, 4);
    expect_values(view, (const float[]){13, 12, 11, 10}, 4); /* a view reads the storage now */
}

static void test_engine_strided_aliasing_destination_rejected(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = iota(ctx, 4);
    kiln_tensor *row = kiln_expand(kiln_slice(x, 0, 0, 1, 1), 1, (int64_t[]){3});
    assert_int_equal(kiln_copy_(row, iota(ctx, 3)), KILN_ERROR_OVERLAP);
    assert_non_null(strstr(kiln_context_message(ctx), "one storage element"));
    kiln_context_clear_error(ctx);
    kiln_tensor *win = kiln_as_strided(x, 2, (int64_t[]){2, 2}, (int64_t[]){1, 1}, 0);
    assert_int_equal(kiln_fill_(win, 1), KILN_ERROR_OVERLAP);
    kiln_context_clear_error(ctx);
    int64_t pad[2] = {1, 1};
    assert_int_equal(kiln_fill_(kiln_pad(x, pad), 1), KILN_ERROR_NOT_VIEWABLE);
    kiln_context_clear_error(ctx);
    /* reading through aliasing views is fine, and x is intact */
    expect_values(row, (const float[]){0, 0, 0}, 3);
    expect_values(x, (const float[]){0, 1, 2, 3}, 4);
    /* a failed status call does not block later ones */
    float tiny;
    assert_int_equal(kiln_read(x, &tiny, sizeof tiny), KILN_ERROR_INVALID_ARGUMENT);
    expect_values(x, (const float[]){0, 1, 2, 3}, 4);
}

/* Reading a strided view is one kernel and moves only the view's bytes. */
static void test_engine_strided_no_copy_where_none_is_needed(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *m = kiln_reshape(iota(ctx, 12), 2, (int64_t[]){3, 4});
    assert_int_equal(kiln_realize(m), KILN_OK);
    kiln_stats before = kiln_context_stats(ctx);
    kiln_tensor *v = kiln_slice(kiln_transpose(m, 0, 1), 0, INT64_MAX, INT64_MIN, -2); /* (2,3) */
    expect_values(v, (const float[]){3, 7, 11, 1, 5, 9}, 6);
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(after.dispatches - before.dispatches, 1);
    assert_int_equal(after.bytes_downloaded - before.bytes_downloaded, 6 * sizeof(float));
    assert_int_equal(after.bytes_uploaded - before.bytes_uploaded, 0);
    /* its layout is PyTorch's/NumPy's: m.T is (4, 3) strides (1, 4); [::-2] gives (-2, 4) from
     * element 3 */
    expect_layout(v, 2, (int64_t[]){-2, 4}, 3);
    expect_layout(kiln_transpose(m, 0, 1), 2, (int64_t[]){1, 4}, 0);
    expect_layout(kiln_slice(m, 1, 1, INT64_MAX, 2), 2, (int64_t[]){4, 2}, 1);
    expect_layout(kiln_flip(m, 1), 2, (int64_t[]){4, -1}, 3);
}

/* copy_ between two strided layouts is one kernel that reads the source through its view and
 * writes the destination through its view: one dispatch, no bytes moved to or from the host. */
static void test_engine_strided_copy_is_one_kernel(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *dst = kiln_reshape(iota(ctx, 12), 2, (int64_t[]){3, 4});
    kiln_tensor *src = kiln_reshape(iota(ctx, 12), 2, (int64_t[]){4, 3});
    assert_int_equal(kiln_realize(dst), KILN_OK);
    assert_int_equal(kiln_realize(src), KILN_OK);
    kiln_stats before = kiln_context_stats(ctx);
    /* dst[:, ::-1] (3, 4), strides (4, -1) = src.T (3, 4), strides (1, 3) */
    assert_int_equal(kiln_copy_(kiln_flip(dst, 1), kiln_transpose(src, 0, 1)), KILN_OK);
    assert_int_equal(kiln_realize(dst), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(after.dispatches - before.dispatches, 1);
    assert_int_equal(after.bytes_uploaded - before.bytes_uploaded, 0);
    assert_int_equal(after.bytes_downloaded - before.bytes_downloaded, 0);
    /* dst[i][3 - j] = src[j][i] = 3j + i */
    expect_values(dst, (const float[]){9, 6, 3, 0, 10, 7, 4, 1, 11, 8, 5, 2}, 12);
}

/* Scopes give storage back: a loop that makes and reads new tensors every step, and an update
 * loop that keeps one tensor per step, stay bounded, and the kept values stay right. */
static void test_engine_scope_loops_free_storage(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_stats before = kiln_context_stats(ctx);
    for (int step = 0; step < 50; step++) {
        kiln_scope_begin(ctx);
        kiln_tensor *x = iota(ctx, 16);
        float out[64];
        assert_int_equal(kiln_read(kiln_add_scalar(kiln_mul_scalar(x, 2), step), out, sizeof out),
                         KILN_OK);
        assert_true(out[3] == 6.0f + (float)step);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    kiln_stats after = kiln_context_stats(ctx);
    assert_true(after.storages_freed - before.storages_freed >= 100); /* x and the result */
    /* state = state + 1, keeping only the newest state */
    kiln_tensor *state_t = iota(ctx, 4);
    for (int step = 0; step < 20; step++) {
        kiln_scope_begin(ctx);
        kiln_tensor *next = kiln_add_scalar(state_t, 1);
        assert_int_equal(kiln_realize(next), KILN_OK);
        assert_int_equal(kiln_scope_end(ctx, 1, &next), KILN_OK);
        state_t = next;
    }
    expect_values(state_t, (const float[]){20, 21, 22, 23}, 4);
    /* a tensor of an ended scope cannot be used */
    kiln_scope_begin(ctx);
    kiln_tensor *gone = iota(ctx, 4);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    kiln_tensor *late = kiln_add(gone, gone);
    assert_int_equal(kiln_context_status(ctx), KILN_ERROR_INVALID_HANDLE);
    float v[4];
    assert_int_equal(kiln_read(late, v, sizeof v), KILN_ERROR_INVALID_ARGUMENT); /* sticky */
    kiln_context_clear_error(ctx);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_ERROR_INVALID_ARGUMENT); /* unbalanced */
    expect_values(state_t, (const float[]){20, 21, 22, 23}, 4);
}

#define BOTH(name) cmocka_unit_test(name)

int main(void) {
    const struct CMUnitTest tests[] = {
        BOTH(test_engine_strided_as_strided_reads),
        BOTH(test_engine_strided_as_strided_rejects_out_of_storage),
        BOTH(test_engine_strided_empty_strided),
        BOTH(test_engine_strided_copies_between_layouts),
        BOTH(test_engine_strided_overlapping_copy_reads_source_first),
        BOTH(test_engine_strided_in_place_through_views),
        BOTH(test_engine_strided_program_order),
        BOTH(test_engine_strided_aliasing_destination_rejected),
        BOTH(test_engine_strided_no_copy_where_none_is_needed),
        BOTH(test_engine_strided_copy_is_one_kernel),
        BOTH(test_engine_scope_loops_free_storage),
    };
    int failed = ENG_RUN_BOTH(tests);
    return failed;
}
