/* View offsets, starts and mask bounds reach kernels as values (engine/schedule/kernel.c lifts them
 * into parameters; runtime.c picks a variant by their alignment): a new row index, start or pad
 * compiles nothing once a kernel for its alignment exists. Every case checks the values against
 * results computed here and the compile counts from kiln_context_stats, on the device and on
 * the interpreter, each in a context of its own (an empty memory cache). */
#include "engine_fixture.h"

#include <stdlib.h>
#include <string.h>

/* CPU devices (lavapipe) and the interpreter tile elementwise kernels and move aligned
 * elements as vectors; a GPU keeps one output per invocation. */
static bool cpu_tiles(kiln_context *ctx, const eng_fixture *f) {
    return !f->device || strstr(kiln_context_device_name(ctx), "llvmpipe") != NULL;
}

static uint64_t compiled(kiln_context *ctx) {
    return kiln_context_stats(ctx).kernels_compiled;
}

/* n exact floats (small integers and halves). */
static float *ramp(size_t n) {
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(i % 1009) * 0.5f - 250.0f;
    return v;
}

/* row i of a (1000, 64) table, 2 row + b and the row itself (read packed: a kernel of its
 * own), for rows 0..63 and some far ones: rows 4.. compile nothing (row 0, at offset 0, has
 * kernels of its own; every row after it has the same, its offset a pushed value). */
static void test_offsets_select_rows_compile_once(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    enum { ROWS = 1000, COLS = 64 };
    float *e = ramp((size_t)ROWS * COLS), *bias = ramp(COLS), want[COLS];
    kiln_tensor *table = fx_f32(ctx, 2, (const int64_t[]){ROWS, COLS}, e);
    kiln_tensor *b = fx_f32(ctx, 1, (const int64_t[]){COLS}, bias);
    uint64_t first_four = 0;
    for (int64_t n = 0; n < 64 + 7; n++) {
        static const int64_t far[] = {100, 255, 256, 511, 777, 998, 999};
        int64_t i = n < 64 ? n : far[n - 64];
        kiln_scope_begin(ctx);
        kiln_tensor *row = kiln_select(table, 0, i);
        for (int j = 0; j < COLS; j++)
            want[j] = 2 * e[i * COLS + j] + bias[j];
        fx_check_f32(kiln_add(kiln_mul_scalar(row, 2), b), want, COLS, 0, 0);
        fx_check_f32(row, e + i * COLS, COLS, 0, 0);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
        if (i == 3)
            first_four = compiled(ctx);
    }
    assert_int_equal(compiled(ctx), first_four);
    assert_int_equal(first_four, 4); /* rows 0 and 1.., each: the elementwise, the packing */
    free(e);
    free(bias);
    eng_fixture_context_destroy(ctx);
}

/* Rows of 16384 (an elementwise kernel of that many outputs is tiled, its rows aligned to 8):
 * the kernel compiled for row 1 moves octets and serves rows 2..7. */
static void test_offsets_wide_rows_keep_their_vectors(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    enum { ROWS = 8, COLS = 16384 };
    float *e = ramp((size_t)ROWS * COLS), *want = malloc(sizeof(float) * COLS);
    assert_non_null(want);
    kiln_tensor *table = fx_f32(ctx, 2, (const int64_t[]){ROWS, COLS}, e);
    kiln_stats before = kiln_context_stats(ctx);
    uint64_t after_row1 = 0;
    for (int64_t i = 0; i < ROWS; i++) {
        kiln_scope_begin(ctx);
        for (int j = 0; j < COLS; j++)
            want[j] = e[i * COLS + j] * 3;
        fx_check_f32(kiln_mul_scalar(kiln_select(table, 0, i), 3), want, COLS, 0, 0);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
        if (i == 1)
            after_row1 = compiled(ctx);
    }
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(after.kernels_compiled, after_row1);
    assert_int_equal(after.kernels_compiled - before.kernels_compiled, 2);
    if (cpu_tiles(ctx, f)) { /* row 0's kernel and the one of rows 1.. */
        assert_int_equal(after.kernels_vector - before.kernels_vector, 2);
        /* vectors of four only on a device without shaderInt64 (fx_octets) */
        assert_int_equal(after.kernels_octets - before.kernels_octets, fx_octets(ctx) ? 2 : 0);
    }
    free(e);
    free(want);
    eng_fixture_context_destroy(ctx);
}

/* 3 x over 16384 elements of a flat storage from start s: aligned to 8 (octet loads), to 4
 * only (loads of four), to 2 only (pairs: lower.c lower_row_pair), odd (pairs from the second
 * element on), each variant compiled once and reused by every start of its alignment (6 by
 * 2's, 3, 7 and 33 by 1's). (Every one of them stores octets: its output is aligned.) Without
 * octets (a CPU device without shaderInt64, fx_octets) the variants are the starts modulo 4:
 * 4 reuses the kernel compiled for 8, and no kernel moves octets. */
static void test_offsets_aligned_and_unaligned_starts(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    enum { N = 65536 + 64, LEN = 16384 };
    float *x = ramp(N), *want = malloc(sizeof(float) * LEN);
    assert_non_null(want);
    kiln_tensor *t = fx_f32(ctx, 1, (const int64_t[]){N}, x);
    static const struct {
        int64_t start;
        uint64_t compiled, compiled4; /* new kernels on a CPU device: octets, fours only */
    } steps[] = {
        {0, 1, 1},     {8, 1, 1},     {4, 1, 0},  {1, 1, 1},     {16, 0, 0},
        {49152, 0, 0}, {40000, 0, 0}, {12, 0, 0}, {49212, 0, 0}, {3, 0, 0},
        {2, 1, 1},     {6, 0, 0},     {7, 0, 0},  {33, 0, 0},    {49216, 0, 0},
    };
    uint64_t total = 0;
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        int64_t start = steps[s].start;
        kiln_scope_begin(ctx);
        for (int j = 0; j < LEN; j++)
            want[j] = 3 * x[start + j];
        kiln_stats before = kiln_context_stats(ctx);
        kiln_tensor *y = kiln_mul_scalar(kiln_narrow(t, 0, start, LEN), 3);
        assert_int_equal(kiln_realize(y), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        fx_check_f32(y, want, LEN, 0, 0);
        uint64_t d = after.kernels_compiled - before.kernels_compiled;
        total += d;
        if (cpu_tiles(ctx, f)) {
            bool octets = fx_octets(ctx);
            assert_int_equal(d, octets ? steps[s].compiled : steps[s].compiled4);
            assert_int_equal(after.kernels_octets - before.kernels_octets, octets ? d : 0);
        }
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    assert_true(total <= 5);
    free(x);
    free(want);
    eng_fixture_context_destroy(ctx);
}

/* Columns [s, s + 8) of a (16, 40) matrix, and rows s, s + 2, ... (16 of them) of a (64, 16)
 * one, for every start: once each residue of the start modulo 8 has been seen, nothing is
 * compiled. */
static void test_offsets_narrow_and_slice_starts(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    float *a = ramp(16 * 40), *b = ramp(64 * 16), want[16 * 16];
    kiln_tensor *ta = fx_f32(ctx, 2, (const int64_t[]){16, 40}, a);
    kiln_tensor *tb = fx_f32(ctx, 2, (const int64_t[]){64, 16}, b);
    uint64_t residues_seen = 0;
    for (int64_t s = 0; s <= 32; s++) {
        kiln_scope_begin(ctx);
        for (int r = 0; r < 16; r++) {
            for (int c = 0; c < 8; c++)
                want[r * 8 + c] = a[r * 40 + s + c] - 1;
        }
        fx_check_f32(kiln_add_scalar(kiln_narrow(ta, 1, s, 8), -1), want, 16 * 8, 0, 0);
        if (s < 32) {
            for (int r = 0; r < 16; r++) {
                for (int c = 0; c < 16; c++)
                    want[r * 16 + c] = b[(s + 2 * r) * 16 + c];
            }
            fx_check_f32(kiln_slice(tb, 0, s, s + 32, 2), want, 16 * 16, 0, 0);
        }
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
        if (s == 8)
            residues_seen = compiled(ctx);
    }
    assert_int_equal(compiled(ctx), residues_seen);
    assert_true(residues_seen <= 4); /* start 0 and the others, a kernel each view */
    free(a);
    free(b);
    eng_fixture_context_destroy(ctx);
}

/* pad(x, (p, 16 - p)) of 100 elements, 3 padded + 1 (1 in the padding): the offset and the
 * mask's bounds are values, so every p from 1 to 15 shares one kernel (p = 0 and p = 16 drop
 * a bound: kernels of their own). In 2-D, (p, 4 - p) x (q, 4 - q) for p, q in 1..3: one. */
static void test_offsets_varying_pad(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    float *x = ramp(100), want[116];
    kiln_tensor *t = fx_f32(ctx, 1, (const int64_t[]){100}, x);
    static const int64_t order[] = {0, 16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    uint64_t three = 0;
    for (size_t n = 0; n < sizeof order / sizeof order[0]; n++) {
        int64_t p = order[n];
        kiln_scope_begin(ctx);
        for (int64_t j = 0; j < 116; j++)
            want[j] = j >= p && j < p + 100 ? 3 * x[j - p] + 1 : 1;
        kiln_tensor *padded = kiln_pad(t, (const int64_t[]){p, 16 - p});
        fx_check_f32(kiln_add_scalar(kiln_mul_scalar(padded, 3), 1), want, 116, 0, 0);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
        if (p == 1)
            three = compiled(ctx);
    }
    assert_int_equal(compiled(ctx), three);
    assert_int_equal(three, 3);
    float *m = ramp(100), want2[14 * 14];
    kiln_tensor *tm = fx_f32(ctx, 2, (const int64_t[]){10, 10}, m);
    uint64_t before = compiled(ctx);
    for (int64_t p = 1; p <= 3; p++) {
        for (int64_t q = 1; q <= 3; q++) {
            kiln_scope_begin(ctx);
            for (int64_t r = 0; r < 14; r++) {
                for (int64_t c = 0; c < 14; c++) {
                    bool in = r >= p && r < p + 10 && c >= q && c < q + 10;
                    want2[r * 14 + c] = in ? m[(r - p) * 10 + c - q] - 2 : -2;
                }
            }
            kiln_tensor *padded = kiln_pad(tm, (const int64_t[]){p, 4 - p, q, 4 - q});
            fx_check_f32(kiln_add_scalar(padded, -2), want2, 14 * 14, 0, 0);
            assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
        }
    }
    assert_int_equal(compiled(ctx) - before, 1);
    free(x);
    free(m);
    eng_fixture_context_destroy(ctx);
}

/* Sums over windows of 5 of x padded by (p, 4 - p), p = 1, 2, 3 (a one-dimensional
 * convolution of ones): the mask of the padding changes along the sum's loop, so its bounds
 * stay code (kernel.c mask_in_loop: constant bounds fold into the comparisons made at every
 * step) and each padding compiles its own kernel, where an elementwise pad (above) compiles
 * one for every padding. Values against the host. */
static void test_offsets_mask_in_a_loop_keeps_its_bounds(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    float *x = ramp(100), want[100];
    kiln_tensor *t = fx_f32(ctx, 1, (const int64_t[]){100}, x);
    uint64_t before = compiled(ctx);
    for (int64_t p = 1; p <= 3; p++) {
        kiln_scope_begin(ctx);
        for (int64_t i = 0; i < 100; i++) {
            want[i] = 0;
            for (int64_t r = 0; r < 5; r++)
                want[i] += i + r - p >= 0 && i + r - p < 100 ? x[i + r - p] : 0;
        }
        kiln_tensor *windows = kiln_unfold(kiln_pad(t, (const int64_t[]){p, 4 - p}), 0, 5, 1);
        fx_check_f32(kiln_sum(windows, 1, (const int32_t[]){1}, false), want, 100, 0, 1e-4);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    assert_int_equal(compiled(ctx) - before, 3);
    free(x);
    eng_fixture_context_destroy(ctx);
}

/* The window [s, s + 100) of x padded by 8 on each side: a shrink of a pad, whose mask
 * bounds move with s. Starts 0..7 keep the lower bound only, 9..16 the upper one, 8 none:
 * three kernels for seventeen starts. */
static void test_offsets_window_of_a_padded_view(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    float *x = ramp(100), want[100];
    kiln_tensor *t = fx_f32(ctx, 1, (const int64_t[]){100}, x);
    kiln_tensor *padded = kiln_pad(t, (const int64_t[]){8, 8});
    for (int64_t s = 0; s <= 16; s++) {
        kiln_scope_begin(ctx);
        for (int64_t j = 0; j < 100; j++) {
            int64_t at = s + j - 8;
            want[j] = at >= 0 && at < 100 ? 2 * x[at] : 0;
        }
        kiln_tensor *window = kiln_narrow(padded, 0, s, 100);
        fx_check_f32(kiln_mul_scalar(window, 2), want, 100, 0, 0);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    assert_true(compiled(ctx) <= 3);
    free(x);
    eng_fixture_context_destroy(ctx);
}

/* A cache written one row at a time (a decoder's keys): copying into row i of a (64, 32)
 * tensor is a write at a pushed offset, compiled once for rows 1..63, and so is adding into
 * the row in place (the kernel loads the row it stores). Rows of 16384 (tiled) store octets
 * at their pushed offset. */
static void test_offsets_write_rows(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    enum { ROWS = 64, COLS = 32, WIDE = 16384 };
    kiln_tensor *cache = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){ROWS, COLS});
    float row[COLS], *want = calloc(ROWS * COLS, sizeof *want);
    assert_non_null(want);
    uint64_t first_four = 0;
    for (int64_t i = 0; i < ROWS; i++) {
        kiln_scope_begin(ctx);
        for (int j = 0; j < COLS; j++) {
            row[j] = (float)(i * 100 + j);
            want[i * COLS + j] = row[j] + (i % 3 == 0 ? 0.5f : 0.0f);
        }
        kiln_tensor *src = fx_f32(ctx, 1, (const int64_t[]){COLS}, row);
        assert_int_equal(kiln_copy_(kiln_select(cache, 0, i), src), KILN_OK);
        if (i % 3 == 0) {
            kiln_tensor *half = kiln_full(ctx, KILN_F32, 1, (const int64_t[]){COLS}, 0.5);
            assert_int_equal(kiln_add_(kiln_select(cache, 0, i), half), KILN_OK);
        }
        assert_int_equal(kiln_realize(cache), KILN_OK);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
        if (i == 3)
            first_four = compiled(ctx);
    }
    assert_int_equal(compiled(ctx), first_four);
    fx_check_f32(cache, want, ROWS * COLS, 0, 0);
    kiln_tensor *wide = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){4, WIDE});
    float *src = ramp(WIDE), *all = calloc(4 * WIDE, sizeof *all);
    assert_non_null(all);
    assert_int_equal(kiln_realize(wide), KILN_OK); /* its zeros first */
    kiln_stats before = kiln_context_stats(ctx);
    for (int64_t i = 1; i < 4; i++) {
        for (int j = 0; j < WIDE; j++)
            all[i * WIDE + j] = src[j] + (float)i;
        kiln_scope_begin(ctx);
        kiln_tensor *s = fx_f32(ctx, 1, (const int64_t[]){WIDE}, all + i * WIDE);
        assert_int_equal(kiln_copy_(kiln_select(wide, 0, i), s), KILN_OK);
        assert_int_equal(kiln_realize(wide), KILN_OK);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(after.kernels_compiled - before.kernels_compiled, 1);
    if (cpu_tiles(ctx, f)) /* octets where they move (fx_octets) */
        assert_int_equal(after.kernels_octets - before.kernels_octets, fx_octets(ctx) ? 1 : 0);
    fx_check_f32(wide, all, 4 * WIDE, 0, 0);
    free(want);
    free(src);
    free(all);
    eng_fixture_context_destroy(ctx);
}

/* Symbolic starts are unchanged: rows [n, n + 8) of a (64, 64) matrix for a bound n compile
 * once; after a select (row i, its offset a pushed value), [s, s + 8) of the row for a bound s
 * compiles once for row 0 and once for every other row. */
static void test_offsets_symbolic_starts_compile_once(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    float *x = ramp(64 * 64), want[8 * 64];
    kiln_tensor *t = fx_f32(ctx, 2, (const int64_t[]){64, 64}, x);
    const kiln_expr *n = kiln_variable(ctx, "n", 0, 56);
    const kiln_expr *eight = kiln_int(ctx, 8);
    for (int64_t v = 0; v <= 56; v += 7) {
        kiln_scope_begin(ctx);
        memcpy(want, x + v * 64, sizeof(float) * 8 * 64);
        fx_check_f32(kiln_narrow_sym(t, 0, kiln_bind(ctx, n, v), eight), want, 8 * 64, 0, 0);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    assert_int_equal(compiled(ctx), 1);
    const kiln_expr *s = kiln_variable(ctx, "s", 0, 56);
    for (int64_t i = 0; i < 8; i++) {
        for (int64_t v = 0; v <= 56; v += 8) {
            kiln_scope_begin(ctx);
            memcpy(want, x + i * 64 + v, sizeof(float) * 8);
            kiln_tensor *row = kiln_select(t, 0, i);
            fx_check_f32(kiln_narrow_sym(row, 0, kiln_bind(ctx, s, v), eight), want, 8, 0, 0);
            assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
        }
    }
    assert_int_equal(compiled(ctx), 3);
    free(x);
    eng_fixture_context_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_offsets_select_rows_compile_once),
        ENG_TEST(test_offsets_wide_rows_keep_their_vectors),
        ENG_TEST(test_offsets_aligned_and_unaligned_starts),
        ENG_TEST(test_offsets_narrow_and_slice_starts),
        ENG_TEST(test_offsets_varying_pad),
        ENG_TEST(test_offsets_mask_in_a_loop_keeps_its_bounds),
        ENG_TEST(test_offsets_window_of_a_padded_view),
        ENG_TEST(test_offsets_write_rows),
        ENG_TEST(test_offsets_symbolic_starts_compile_once),
    };
    return ENG_RUN_BOTH(tests);
}
