/* Storages larger than the device's maxStorageBufferRange (issue 20): with the range forced
 * down to 64 KiB (eng_testing.h), tensors of 320 KiB (five windows, bound as eight) go through
 * elementwise kernels (in order and transposed), sums over all elements and over each axis, a
 * matmul whose left operand is windowed, and copy_ into a strided view of such a tensor, each
 * checked against values computed here. A small case compiles and runs the same kernels with
 * and without the override. On the interpreter the override changes nothing (host memory has
 * no range); the same values are checked.
 *
 * On lavapipe a storage that a kernel only reads is a texel buffer, bound whole whatever the
 * storage-buffer range (engine/codegen/emit.c); the windows remain for the storages written,
 * and for every storage in the @mobile-low pass (a profile keeps storage-buffer reads).
 *
 * A device whose kernels bind fewer than 24 descriptors (three such storages; mobile-low: 4)
 * gets a 256 KiB range instead: two windows each, so that a windowed input and a windowed
 * output (4) still fit; a kernel of three windowed storages (6) is KILN_ERROR_LIMIT_EXCEEDED
 * there, naming the limit, and leaves its inputs intact. */
#include "eng_testing.h"
#include "engine_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 320, COLS = 256, NUMEL = ROWS * COLS, RANGE = 64 << 10, NARROW_RANGE = 256 << 10 };

/* Whether fx's device binds too few descriptors per kernel for three storages of eight
 * windows: then the forced range is NARROW_RANGE (two windows a storage). */
static bool narrow(const eng_fixture *fx) {
    return fx->device && fx_kernel_buffers(fx->ctx) < 3 * 8;
}

/* A context whose device reports a 64 KiB storage-buffer range (256 KiB where narrow). */
static kiln_context *small_range_context(const eng_fixture *fx) {
    eng_testing_set(&(eng_testing){.max_storage_range = narrow(fx) ? NARROW_RANGE : RANGE});
    kiln_context *ctx = eng_context_new(fx->device);
    eng_testing_set(NULL);
    assert_non_null(ctx);
    return ctx;
}

/* Small integers (exact in f32 sums of this size): a pattern of period `period` around 0. */
static float *pattern(size_t n, int period, int shift) {
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((int)((i * 7 + (size_t)shift) % (size_t)period) - period / 2);
    return v;
}

static void test_engine_big_buffers_elementwise(void **state) {
    eng_fixture *fx = *state;
    kiln_context *ctx = small_range_context(fx);
    const int64_t shape[2] = {ROWS, COLS};
    float *a = pattern(NUMEL, 11, 0), *b = pattern(NUMEL, 5, 3), *want = malloc(NUMEL * 4);
    assert_non_null(want);
    kiln_tensor *ta = fx_f32(ctx, 2, shape, a), *tb = fx_f32(ctx, 2, shape, b);
    if (narrow(fx)) {
        /* a * b + a binds three windowed storages (6 descriptors): refused when scheduled,
         * nothing run, a and b intact; then b is -a, fused (one windowed input, 4). */
        assert_int_equal(kiln_realize(kiln_add(kiln_mul(ta, tb), ta)), KILN_ERROR_LIMIT_EXCEEDED);
        char limit[64];
        snprintf(limit, sizeof limit, "more buffers than the %u storage-buffer bindings",
                 fx_kernel_buffers(ctx));
        fx_expect_message(ctx, KILN_ERROR_LIMIT_EXCEEDED, "kiln_realize", limit, NULL);
        fx_check_f32(ta, a, NUMEL, 0, 0);
        fx_check_f32(tb, b, NUMEL, 0, 0);
        tb = kiln_neg(ta);
        for (size_t i = 0; i < NUMEL; i++)
            b[i] = -a[i];
    }
    for (size_t i = 0; i < NUMEL; i++)
        want[i] = a[i] * b[i] + a[i];
    fx_check_f32(kiln_add(kiln_mul(ta, tb), ta), want, NUMEL, 0, 0);
    /* Transposed: neighbouring outputs read elements COLS apart, across every window. */
    for (size_t r = 0; r < COLS; r++) {
        for (size_t c = 0; c < ROWS; c++)
            want[r * ROWS + c] = a[c * COLS + r] - b[c * COLS + r];
    }
    fx_check_f32(kiln_sub(kiln_transpose(ta, 0, 1), kiln_transpose(tb, 0, 1)), want, NUMEL, 0, 0);
    free(a);
    free(b);
    free(want);
    eng_fixture_context_destroy(ctx);
}

static void test_engine_big_buffers_sum_all_and_each_axis(void **state) {
    eng_fixture *fx = *state;
    kiln_context *ctx = small_range_context(fx);
    const int64_t shape[2] = {ROWS, COLS};
    float *a = pattern(NUMEL, 9, 1);
    kiln_tensor *ta = fx_f32(ctx, 2, shape, a);
    double total = 0;
    float rows[ROWS] = {0}, cols[COLS] = {0};
    for (size_t i = 0; i < NUMEL; i++) {
        total += a[i];
        rows[i / COLS] += a[i];
        cols[i % COLS] += a[i];
    }
    float all = (float)total;
    fx_check_f32(kiln_sum(ta, 0, NULL, false), &all, 1, 0, 0);
    fx_check_f32(kiln_sum(ta, 1, (int32_t[]){1}, false), rows, ROWS, 0, 0);
    fx_check_f32(kiln_sum(ta, 1, (int32_t[]){0}, false), cols, COLS, 0, 0);
    /* On lavapipe (texel reads: engine/codegen/emit.c) the windowed storage, only read, is a
     * texel buffer bound whole: a texel view is bounded by maxTexelBufferElements, not by the
     * storage-buffer range (the @mobile-low pass, without texel reads, binds it in windows).
     * -a reads nothing else (its output, written, stays in windows). */
    kiln_stats before = kiln_context_stats(ctx);
    for (size_t i = 0; i < NUMEL; i++)
        a[i] = -a[i];
    fx_check_f32(kiln_neg(ta), a, NUMEL, 0, 0);
    bool texels = fx->device && strstr(kiln_context_device_name(ctx), "llvmpipe") &&
                  !kiln_context_profile(ctx);
    assert_int_equal(kiln_context_stats(ctx).kernels_texel - before.kernels_texel, texels);
    free(a);
    eng_fixture_context_destroy(ctx);
}

static void test_engine_big_buffers_matmul_of_a_windowed_operand(void **state) {
    eng_fixture *fx = *state;
    kiln_context *ctx = small_range_context(fx);
    enum { N = 16 };
    float *a = pattern(NUMEL, 5, 2), *b = pattern(COLS * N, 3, 0), want[ROWS * N];
    kiln_tensor *ta = fx_f32(ctx, 2, (int64_t[]){ROWS, COLS}, a);
    kiln_tensor *tb = fx_f32(ctx, 2, (int64_t[]){COLS, N}, b);
    for (size_t i = 0; i < ROWS; i++) {
        for (size_t j = 0; j < N; j++) {
            float s = 0;
            for (size_t k = 0; k < COLS; k++)
                s += a[i * COLS + k] * b[k * N + j];
            want[i * N + j] = s;
        }
    }
    fx_check_f32(kiln_matmul(ta, tb), want, ROWS * N, 0, 0);
    free(a);
    free(b);
    eng_fixture_context_destroy(ctx);
}

static void test_engine_big_buffers_copy_into_a_strided_view(void **state) {
    eng_fixture *fx = *state;
    kiln_context *ctx = small_range_context(fx);
    const int64_t shape[2] = {ROWS, COLS};
    /* Every third row from row 1, every second column from column 1: 107 x 128 elements. */
    const int64_t vshape[2] = {(ROWS - 1 + 2) / 3, COLS / 2};
    float *a = pattern(NUMEL, 13, 4), *src = pattern((size_t)(vshape[0] * vshape[1]), 7, 5);
    kiln_tensor *ta = fx_f32(ctx, 2, shape, a);
    kiln_tensor *view = kiln_slice(kiln_slice(ta, 0, 1, ROWS, 3), 1, 1, COLS, 2);
    fx_assert_shape(view, 2, vshape);
    kiln_tensor *ts = fx_f32(ctx, 2, vshape, src);
    assert_int_equal(kiln_copy_(view, ts), KILN_OK);
    for (int64_t r = 0; r < vshape[0]; r++) {
        for (int64_t c = 0; c < vshape[1]; c++)
            a[(1 + 3 * r) * COLS + 1 + 2 * c] = src[r * vshape[1] + c];
    }
    fx_check_f32(ta, a, NUMEL, 0, 0);
    free(a);
    free(src);
    eng_fixture_context_destroy(ctx);
}

/* Storages within the range bind as before: the same kernels (the same disk-cache keys),
 * run as often over as many items. */
static void test_engine_big_buffers_small_storages_unchanged(void **state) {
    eng_fixture *fx = *state;
    kiln_stats stats[2];
    for (int forced = 0; forced < 2; forced++) {
        kiln_context *ctx = forced ? small_range_context(fx) : eng_context_new(fx->device);
        assert_non_null(ctx);
        float *a = pattern(64 * 64, 7, 0);
        kiln_tensor *t = fx_f32(ctx, 2, (int64_t[]){64, 64}, a);
        float want[64] = {0};
        for (size_t i = 0; i < 64 * 64; i++)
            want[i % 64] += 2 * a[i];
        fx_check_f32(kiln_sum(kiln_add(t, t), 1, (int32_t[]){0}, false), want, 64, 0, 0);
        stats[forced] = kiln_context_stats(ctx);
        free(a);
        eng_fixture_context_destroy(ctx);
    }
    /* The second context may find the first one's kernels on disk: the same key. */
    assert_int_equal(stats[0].kernels_compiled + stats[0].disk_hits,
                     stats[1].kernels_compiled + stats[1].disk_hits);
    assert_int_equal(stats[0].dispatches, stats[1].dispatches);
    assert_int_equal(stats[0].items, stats[1].items);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_big_buffers_elementwise),
        ENG_TEST(test_engine_big_buffers_sum_all_and_each_axis),
        ENG_TEST(test_engine_big_buffers_matmul_of_a_windowed_operand),
        ENG_TEST(test_engine_big_buffers_copy_into_a_strided_view),
        ENG_TEST(test_engine_big_buffers_small_storages_unchanged),
    };
    return ENG_RUN_BOTH(tests);
}
