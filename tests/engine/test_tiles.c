/* Output tiles and vector access (engine/codegen/lower.c, ops.c): kernels of constant size compute
 * several outputs per invocation, reductions a register tile of them where loads are shared or
 * are vectors, and four aligned elements (along a tile row or a reduction's unrolled steps)
 * move as one vector. Each case compares with results computed here, on the device and on the
 * interpreter; the views are chosen to take each path: aligned rows (vector), an offset (scalar
 * loads in a tiled kernel), a flip (vectors in reverse), masked loads (scalar), a last dim the
 * tile does not divide (the flat index is tiled), column reductions (in strips), an in-place
 * write (scalar stores), types without vector access. On a CPU device and on the interpreter
 * the statistics must show the tiled and vector kernels. */
#include "eng.h"
#include "engine_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* CPU devices (lavapipe) and the interpreter tile; a GPU keeps one elementwise output each. */
static bool cpu_tiles(const eng_fixture *f) {
    return !f->device || strstr(kiln_context_device_name(f->ctx), "llvmpipe") != NULL;
}

static float *values(size_t n, uint32_t seed) {
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((i * 7 + seed * 13) % 23) - 11.0f + 0.25f * (float)seed;
    return v;
}

typedef struct delta {
    uint64_t tiled, vector, octets;
} delta;

static delta stats_delta(const kiln_stats *a, const kiln_stats *b) {
    return (delta){b->kernels_tiled - a->kernels_tiled, b->kernels_vector - a->kernels_vector,
                   b->kernels_octets - a->kernels_octets};
}

/* out (m, n) = a (m, k) @ b (k, n), in order along k. */
static void host_matmul(const float *a, const float *b, size_t m, size_t k, size_t n, float *out) {
    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < n; j++) {
            float acc = 0;
            for (size_t q = 0; q < k; q++)
                acc += a[i * k + q] * b[q * n + j];
            out[i * n + j] = acc;
        }
    }
}

static void test_tiles_elementwise_rows_move_as_vectors(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { R = 64, C = 256, N = R * C };
    float *a = values(N, 1), *b = values(N, 2), *c = values(N, 3), *want = values(N, 0);
    for (size_t i = 0; i < N; i++)
        want[i] = a[i] * b[i] + c[i];
    const int64_t shape[2] = {R, C};
    kiln_tensor *ta = fx_f32(ctx, 2, shape, a), *tb = fx_f32(ctx, 2, shape, b),
                *tc = fx_f32(ctx, 2, shape, c);
    kiln_stats before = kiln_context_stats(ctx);
    kiln_tensor *out = kiln_add(kiln_mul(ta, tb), tc);
    assert_int_equal(kiln_realize(out), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    if (cpu_tiles(f)) {
        delta d = stats_delta(&before, &after);
        assert_int_equal(d.tiled, 1);
        assert_int_equal(d.vector, 1);
        /* tiles of 16 outputs: runs of eight, where octets move (not without shaderInt64) */
        assert_int_equal(d.octets, fx_octets(ctx) ? 1 : 0);
    }
    fx_check_f32(out, want, N, 0, 0);
    free(a);
    free(b);
    free(c);
    free(want);
}

/* Row sums (one output per invocation) read their rows in steps of eight elements on a CPU
 * (lower_stage): one octet per step where the rows are aligned to 8 (rows of 64), vectors of
 * four where they are aligned to 4 only (columns 4.. of rows of 68; rows of 60, a count that
 * is no multiple of 8), and every sum exact (integer values). */
static void test_tiles_row_sums_read_octets(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { R = 1024 };
    static const struct {
        int64_t width, from, cols;
        uint64_t octets;
    } cases[] = {{64, 0, 64, 1}, {68, 4, 64, 0}, {60, 0, 60, 0}};
    float *x = malloc(sizeof(float) * R * 68), *want = malloc(sizeof(float) * R);
    assert_true(x && want);
    for (size_t i = 0; i < (size_t)R * 68; i++)
        x[i] = (float)((i * 7) % 23) - 11.0f;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t w = cases[c].width;
        for (size_t r = 0; r < R; r++) {
            want[r] = 0;
            for (int64_t j = 0; j < cases[c].cols; j++)
                want[r] += x[r * w + cases[c].from + j];
        }
        kiln_tensor *tx = fx_f32(ctx, 2, (const int64_t[]){R, w}, x);
        kiln_tensor *view = kiln_narrow(tx, 1, cases[c].from, cases[c].cols);
        kiln_stats before = kiln_context_stats(ctx);
        kiln_tensor *sums = kiln_sum(view, 1, (const int32_t[]){1}, false);
        assert_int_equal(kiln_realize(sums), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        if (cpu_tiles(f)) {
            delta d = stats_delta(&before, &after);
            assert_int_equal(d.vector, 1);
            /* without shaderInt64 (mobile-low) the aligned rows read vectors of four only */
            assert_int_equal(d.octets, fx_octets(ctx) ? cases[c].octets : 0);
        }
        fx_check_f32(sums, want, R, 0, 0);
    }
    free(x);
    free(want);
}

/* Broadcast adds (lower.c: a load shared by a row's outputs widens an elementwise tile to
 * tile_ew_shared columns where they divide the row): a column vector over rows of 64 (shared:
 * 32 outputs per item on a CPU), over rows of 40 (shared, but 32 does not divide: 8), a row
 * vector (not shared along the row: 8), and a negation (one buffer read: 16; over rows of 40,
 * of the flat index); the same results on the device and the interpreter. */
static void test_tiles_broadcast_rows(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { R = 2048 };
    static const int64_t widths[] = {64, 40};
    float *x = values(R * 64, 13), *col = values(R, 14), *row = values(64, 15);
    float *want = values(R * 64, 0);
    for (size_t w = 0; w < 2; w++) {
        int64_t c = widths[w];
        kiln_tensor *tx = fx_f32(ctx, 2, (const int64_t[]){R, c}, x);
        kiln_tensor *tc = fx_f32(ctx, 2, (const int64_t[]){R, 1}, col);
        kiln_tensor *tr = fx_f32(ctx, 2, (const int64_t[]){1, c}, row);
        for (int by_row = 0; by_row < 2; by_row++) {
            for (size_t i = 0; i < (size_t)(R * c); i++)
                want[i] = x[i] + (by_row ? row[i % (size_t)c] : col[i / (size_t)c]);
            kiln_stats before = kiln_context_stats(ctx);
            kiln_tensor *sum = kiln_add(tx, by_row ? tr : tc);
            assert_int_equal(kiln_realize(sum), KILN_OK);
            kiln_stats after = kiln_context_stats(ctx);
            if (cpu_tiles(f)) {
                assert_int_equal(stats_delta(&before, &after).tiled, 1);
                uint64_t per_item = !by_row && c == 64 ? 32 : 8;
                assert_int_equal(after.items - before.items, (uint64_t)(R * c) / per_item);
            }
            fx_check_f32(sum, want, (size_t)(R * c), 0, 0);
        }
        /* one buffer read: 16 outputs per item on a CPU */
        for (size_t i = 0; i < (size_t)(R * c); i++)
            want[i] = -x[i];
        kiln_stats before = kiln_context_stats(ctx);
        kiln_tensor *neg = kiln_neg(tx);
        assert_int_equal(kiln_realize(neg), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        if (cpu_tiles(f))
            assert_int_equal(after.items - before.items, (uint64_t)(R * c) / 16);
        fx_check_f32(neg, want, (size_t)(R * c), 0, 0);
    }
    free(x);
    free(col);
    free(row);
    free(want);
}

/* x[1:] (offset 1: no aligned row), flip(x) (descending), against an aligned operand. */
static void test_tiles_unaligned_and_flipped_views(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { N = 16384 };
    float *x = values(N + 1, 4), *y = values(N, 5), *want = values(N, 0);
    kiln_tensor *tx = fx_f32(ctx, 1, (const int64_t[]){N + 1}, x);
    kiln_tensor *ty = fx_f32(ctx, 1, (const int64_t[]){N}, y);
    kiln_tensor *shifted = kiln_narrow(tx, 0, 1, N);
    for (size_t i = 0; i < N; i++)
        want[i] = x[i + 1] + y[i];
    fx_check_f32(kiln_add(shifted, ty), want, N, 0, 0);
    kiln_tensor *flipped = kiln_flip(kiln_narrow(tx, 0, 0, N), 0);
    for (size_t i = 0; i < N; i++)
        want[i] = x[N - 1 - i] * y[i];
    fx_check_f32(kiln_mul(flipped, ty), want, N, 0, 0);
    free(x);
    free(y);
    free(want);
}

/* A copy into a flipped view of the destination: rows of four stored in reverse. */
static void test_tiles_copy_into_a_flipped_view(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { R = 64, C = 256 };
    float *x = values(R * C, 14), *y = values(R * C, 15), *want = values(R * C, 0);
    for (size_t r = 0; r < R; r++) {
        for (size_t c = 0; c < C; c++)
            want[r * C + (C - 1 - c)] = y[r * C + c];
    }
    kiln_tensor *tx = fx_f32(ctx, 2, (const int64_t[]){R, C}, x);
    kiln_tensor *ty = fx_f32(ctx, 2, (const int64_t[]){R, C}, y);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_copy_(kiln_flip(tx, 1), ty), KILN_OK);
    assert_int_equal(kiln_realize(tx), KILN_OK); /* the write is lazy too */
    kiln_stats after = kiln_context_stats(ctx);
    if (cpu_tiles(f))
        assert_int_equal(stats_delta(&before, &after).vector, 1);
    fx_check_f32(tx, want, (size_t)R * C, 0, 0);
    free(x);
    free(y);
    free(want);
}

/* Padded views: masked loads stay scalar in a tiled kernel (along the last dim each column
 * has a mask of its own; along the first dim a row shares one). */
static void test_tiles_padded_views(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { R = 64, C = 256 };
    float *x = values(R * C, 6), *want = values(R * C, 0);
    kiln_tensor *cols = fx_f32(ctx, 2, (const int64_t[]){R, C - 4}, x);
    kiln_tensor *padded = kiln_pad(cols, (const int64_t[]){0, 0, 2, 2});
    for (size_t r = 0; r < R; r++) {
        for (size_t c = 0; c < C; c++)
            want[r * C + c] = c < 2 || c >= C - 2 ? 1.0f : x[r * (C - 4) + c - 2] + 1.0f;
    }
    fx_check_f32(kiln_add_scalar(padded, 1.0), want, R * C, 0, 0);
    kiln_tensor *rows = fx_f32(ctx, 2, (const int64_t[]){R - 4, C}, x);
    padded = kiln_pad(rows, (const int64_t[]){2, 2, 0, 0});
    for (size_t r = 0; r < R; r++) {
        for (size_t c = 0; c < C; c++)
            want[r * C + c] = r < 2 || r >= R - 2 ? 0.0f : 2.0f * x[(r - 2) * C + c];
    }
    fx_check_f32(kiln_mul_scalar(padded, 2.0), want, R * C, 0, 0);
    free(x);
    free(want);
}

/* A last dim of 3: the tile runs over the flat index; the broadcast operand's index is then
 * a division of it. */
static void test_tiles_flat_index_when_the_last_dim_does_not_divide(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { R = 8192, C = 3 };
    float *x = values(R * C, 7), *want = values(R * C, 0);
    const float w[C] = {0.5f, -2.0f, 4.0f};
    kiln_tensor *tx = fx_f32(ctx, 2, (const int64_t[]){R, C}, x);
    kiln_tensor *tw = fx_f32(ctx, 2, (const int64_t[]){1, C}, w);
    for (size_t i = 0; i < (size_t)R * C; i++)
        want[i] = x[i] * w[i % C];
    fx_check_f32(kiln_mul(tx, tw), want, (size_t)R * C, 0, 0);
    free(x);
    free(want);
}

/* Short rows that the tile does not divide (14 and 28 columns; tiles of 8 for two loads, 16 for
 * one): an elementwise kernel of two loads takes one row per item (lower.c: its indices
 * affine along the row), one of a single load (a copy) keeps tiles of the flat index. */
static void test_tiles_short_rows_one_per_item(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { R = 4096, CMAX = 28 };
    float *x = values(R * CMAX, 3), *y = values(R * CMAX, 4), *want = values(R * CMAX, 0);
    for (int64_t c = 14; c <= CMAX; c += 14) {
        kiln_tensor *tx = fx_f32(ctx, 2, (const int64_t[]){R, c}, x);
        kiln_tensor *ty = fx_f32(ctx, 2, (const int64_t[]){R, c}, y);
        for (int two = 1; two >= 0; two--) {
            for (size_t i = 0; i < (size_t)(R * c); i++)
                want[i] = two ? x[i] + y[i] : x[i] * 2.0f;
            kiln_tensor *out = two ? kiln_add(tx, ty) : kiln_mul_scalar(tx, 2.0);
            kiln_stats before = kiln_context_stats(ctx);
            assert_int_equal(kiln_realize(out), KILN_OK);
            kiln_stats after = kiln_context_stats(ctx);
            if (cpu_tiles(f))
                assert_int_equal(after.items - before.items, two ? R : R * c / 16);
            fx_check_f32(out, want, (size_t)(R * c), 0, 0);
            kiln_release(out);
        }
        kiln_release(tx);
        kiln_release(ty);
    }
    free(x);
    free(y);
    free(want);
}

/* Realizes product out (the tensors it reads realized before), then, on a CPU, checks that it
 * ran as one tiled kernel with vector loads; its values against want (n of them). */
static void check_one_tiled_vector_product(eng_fixture *f, kiln_tensor *out, const float *want,
                                           size_t n) {
    kiln_context *ctx = f->ctx;
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(out), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    if (cpu_tiles(f)) {
        assert_int_equal(stats_delta(&before, &after).tiled, 1);
        assert_int_equal(stats_delta(&before, &after).vector, 1);
    }
    fx_check_f32(out, want, n, 1e-3, 1e-5);
}

/* matmul: an 8 x 8 register tile on a CPU, loads of a's row and b's column shared, both read
 * as vectors (a's along the unrolled steps over k). */
static void test_tiles_matmul_register_tile(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { M = 256, K = 24, N = 512 };
    float *a = values(M * K, 8), *b = values(K * N, 9), *want = values(M * N, 0);
    host_matmul(a, b, M, K, N, want);
    kiln_tensor *ta = fx_f32(ctx, 2, (const int64_t[]){M, K}, a);
    kiln_tensor *tb = fx_f32(ctx, 2, (const int64_t[]){K, N}, b);
    /* a's rows read as vectors along k, b's along its columns */
    check_one_tiled_vector_product(f, kiln_matmul(ta, tb), want, (size_t)M * N);
    free(a);
    free(b);
    free(want);
}

/* a^T @ b (a weight or input gradient's product: the left operand stored transposed): a
 * tile's rows read consecutive elements of a at each step, one vector for a column of the tile
 * (lower.c column_run). b starts one element into its rows and has an odd number of columns
 * (a tile of one column: no vector stores), so the only vectors are a's. */
static void test_tiles_transposed_left_operand_reads_vectors(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { M = 128, K = 24, N = 1023 };
    float *a = values(K * M, 3), *b = values(K * (N + 1), 4), *want = malloc(sizeof(float) * M * N);
    float *at = malloc(sizeof(float) * M * K), *bn = malloc(sizeof(float) * K * N);
    assert_true(want && at && bn);
    for (size_t q = 0; q < K; q++) {
        for (size_t i = 0; i < M; i++)
            at[i * K + q] = a[q * M + i];
        for (size_t j = 0; j < N; j++)
            bn[q * N + j] = b[q * (N + 1) + 1 + j];
    }
    host_matmul(at, bn, M, K, N, want);
    kiln_tensor *ta = fx_f32(ctx, 2, (const int64_t[]){K, M}, a);
    kiln_tensor *tb = kiln_narrow(fx_f32(ctx, 2, (const int64_t[]){K, N + 1}, b), 1, 1, N);
    check_one_tiled_vector_product(f, kiln_matmul(kiln_transpose(ta, 0, 1), tb), want,
                                   (size_t)M * N);
    free(a);
    free(b);
    free(at);
    free(bn);
    free(want);
}

/* a (m, k) @ b (k, n) for k = ks[0], then ks[1] (a and b the first elements of values of
 * m * kmax and kmax * n), exact against the host; on a CPU (not GPU-tuned) each realize runs
 * m * n / per_item[pass] items (the tile's outputs). */
static void check_matmul_items(eng_fixture *f, int64_t m, int64_t n, const int64_t ks[2],
                               const uint64_t per_item[2]) {
    kiln_context *ctx = f->ctx;
    int64_t kmax = ks[0] > ks[1] ? ks[0] : ks[1];
    float *a = values((size_t)(m * kmax), 10), *b = values((size_t)(kmax * n), 11);
    float *want = values((size_t)(m * n), 0);
    for (int pass = 0; pass < 2; pass++) {
        int64_t k = ks[pass];
        host_matmul(a, b, (size_t)m, (size_t)k, (size_t)n, want);
        kiln_tensor *ta = fx_f32(ctx, 2, (const int64_t[]){m, k}, a);
        kiln_tensor *tb = fx_f32(ctx, 2, (const int64_t[]){k, n}, b);
        assert_int_equal(kiln_realize(ta), KILN_OK);
        assert_int_equal(kiln_realize(tb), KILN_OK);
        kiln_stats before = kiln_context_stats(ctx);
        kiln_tensor *out = kiln_matmul(ta, tb);
        assert_int_equal(kiln_realize(out), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        if (cpu_tiles(f) && !fx_gpu_tuned(ctx))
            assert_int_equal(after.items - before.items, (uint64_t)(m * n) / per_item[pass]);
        fx_check_f32(out, want, (size_t)(m * n), 1e-3, 1e-5);
    }
    free(a);
    free(b);
    free(want);
}

/* A product whose outputs each sum a long loop (k = 512 >= lower.c's LONG_LOOP) keeps its
 * 8 x 8 tile on a CPU with 512 items (32,768 outputs); with k = 24 the same outputs are
 * 2,048 items (16 outputs each: the device's parallelism of items). */
static void test_tiles_long_loops_keep_the_tile(void **state) {
    check_matmul_items(*state, 256, 128, (const int64_t[]){512, 24}, (const uint64_t[]){64, 16});
}

/* A row of 9 columns, which tiles of 8 (or 4, 2) do not divide, is one tile wide on a CPU
 * (lower.c whole_short_rows), its rows fewer to fit 64 outputs: 4 x 9 tiles, 1,024 items for
 * a short and a long loop (8 x 1 tiles before: 4,608 items). With 1,024 items the kernel runs
 * workgroups of 128 (runtime.c narrow_workgroups: at least 8 workgroups on a CPU). */
static void test_tiles_short_rows_are_one_tile(void **state) {
    eng_fixture *f = *state;
    check_matmul_items(f, 4096, 9, (const int64_t[]){64, 784}, (const uint64_t[]){36, 36});
    bool found = false;
    for (const eng_program *p = f->ctx->program_list; p; p = p->next) {
        if (p->name[0] != 'R' || !strstr(p->name, "_4096x1x9"))
            continue;
        found = true;
        if (cpu_tiles(f) && !fx_gpu_tuned(f->ctx))
            assert_int_equal(p->workgroup_size, 128);
    }
    assert_true(found);
}

/* A row of 196 columns takes tiles 4 wide; for a short loop (k = 24) the tile keeps its area in
 * rows, 16 x 4 (3,136 items of 64 outputs on a CPU), for a long one (k = 256) it stays 8 x 4
 * (6,272 items): a per-image convolution product of the training step. */
static void test_tiles_narrow_rows_take_taller_tiles(void **state) {
    check_matmul_items(*state, 1024, 196, (const int64_t[]){24, 256}, (const uint64_t[]){64, 32});
}

/* A long loop (k = 288) whose right operand is read through padding (a masked load at every
 * step: a convolution's windows read in place) takes the taller tile too, 16 x 4 (784 items on
 * a CPU), where the same product of a plain operand stays 8 x 4 (1,568). Exact against the
 * host (the padding zeros). */
static void test_tiles_masked_long_loops_take_taller_tiles(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { M = 256, N = 196, K = 288, PAD = 2 };
    float *a = values(M * K, 14), *b = values(K * N, 15), *want = values(M * N, 0);
    for (int i = 0; i < PAD * N; i++) /* the rows the padding supplies */
        b[i] = b[(K - PAD) * N + i] = 0;
    host_matmul(a, b, M, K, N, want);
    kiln_tensor *ta = fx_f32(ctx, 2, (const int64_t[]){M, K}, a);
    kiln_tensor *inner = fx_f32(ctx, 2, (const int64_t[]){K - 2 * PAD, N}, b + PAD * N);
    kiln_tensor *plain = fx_f32(ctx, 2, (const int64_t[]){K, N}, b);
    assert_int_equal(kiln_realize(ta), KILN_OK);
    assert_int_equal(kiln_realize(inner), KILN_OK);
    assert_int_equal(kiln_realize(plain), KILN_OK);
    for (int pass = 0; pass < 2; pass++) {
        kiln_tensor *tb = pass ? plain : kiln_pad(inner, (const int64_t[]){PAD, PAD, 0, 0});
        kiln_stats before = kiln_context_stats(ctx);
        kiln_tensor *out = kiln_matmul(ta, tb);
        assert_int_equal(kiln_realize(out), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        assert_int_equal(after.dispatches - before.dispatches, 1); /* the padding read in place */
        if (cpu_tiles(f) && !fx_gpu_tuned(ctx))
            assert_int_equal(after.items - before.items, pass ? M * N / 32 : M * N / 64);
        fx_check_f32(out, want, (size_t)M * N, 1e-3, 1e-5);
    }
    free(a);
    free(b);
    free(want);
}

/* A convolution's product over the windows of a padded input read in place (an inference
 * forward per image, the batch a Variable): tiles of whole output rows, a kernel row of taps per
 * step of the loop, each window element loaded once for the outputs of the row that read it
 * (engine/codegen/lower.c eng_kernel_tile). 3 x 3 and 5 x 5 kernels (taps of three and five per
 * step) over two 16 x 16 images of two channels, 32 filters given as (C KH KW, O) in memory
 * (the product's layout: no copy): one kernel, in tiles of 4 x 16 outputs on a CPU (the rows
 * that keep it busy at the batch's largest value, 4), against the host. */
static void test_tiles_windows_in_whole_rows(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { N = 2, C = 2, S = 16, O = 32 };
    float *xs = values(N * C * S * S, 16), *ws = values(C * 25 * O, 17);
    float *want = malloc(sizeof(float) * N * O * S * S);
    assert_non_null(want);
    kiln_tensor *flat = fx_f32(ctx, 1, (const int64_t[]){N * C * S * S}, xs);
    kiln_tensor *x = fx_images(flat, N, 4, C, S, S);
    for (int k = 3; k <= 5; k += 2) {
        int pad = k / 2;
        /* w[o][c][i][j] = ws[((c k + i) k + j) O + o] */
        kiln_tensor *laid = fx_f32(ctx, 4, (const int64_t[]){C, k, k, O}, ws);
        kiln_tensor *w = kiln_permute(laid, (const int32_t[]){3, 0, 1, 2});
        assert_int_equal(kiln_realize(laid), KILN_OK);
        fx_conv2d_host(xs, ws, (const int64_t[]){1, k * k * O, k * O, O}, N, C, S, O, k, pad, want);
        kiln_stats before = kiln_context_stats(ctx);
        kiln_tensor *y = kiln_conv2d_ex(x, w, NULL, &(kiln_conv2d_options){.padding = {pad, pad}});
        assert_int_equal(kiln_realize(y), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        assert_int_equal(after.dispatches - before.dispatches, 1);
        if (cpu_tiles(f) && !fx_gpu_tuned(ctx))
            assert_int_equal(after.items - before.items, N * O * S * S / (4 * S));
        fx_check_f32(y, want, (size_t)N * O * S * S, 1e-4, 1e-5);
    }
    free(xs);
    free(ws);
    free(want);
}

/* The forward over 7 x 7 images (a row shorter than a SIMD row of 8, longer than the kernel
 * row of taps each step takes) keeps tiles of one image row on a CPU, 16 channels x 7 pixels,
 * where a weight gradient's period of taps widens to channels' worth (lower.c window_columns:
 * its step is an image row; 4 x 49 tiles here before that rule). A symbolic batch (2 of at
 * most 64), 16 channels, 32 filters; against the host. */
static void test_tiles_windows_in_rows_of_seven(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device); /* its own "images" Variable */
    assert_non_null(ctx);
    enum { N = 2, C = 16, S = 7, O = 32 };
    float *xs = values(N * C * S * S, 18), *ws = values(O * C * 9, 19);
    float *want = malloc(sizeof(float) * N * O * S * S);
    assert_non_null(want);
    kiln_tensor *x =
        fx_images(fx_f32(ctx, 1, (const int64_t[]){N * C * S * S}, xs), N, 64, C, S, S);
    kiln_tensor *w = fx_f32(ctx, 4, (const int64_t[]){O, C, 3, 3}, ws);
    assert_int_equal(kiln_realize(w), KILN_OK);
    assert_int_equal(kiln_realize(x), KILN_OK);
    fx_conv2d_host(xs, ws, (const int64_t[]){C * 9, 9, 3, 1}, N, C, S, O, 3, 1, want);
    kiln_tensor *y = kiln_conv2d_ex(x, w, NULL, &(kiln_conv2d_options){.padding = {1, 1}});
    assert_int_equal(kiln_realize(y), KILN_OK);
    if (cpu_tiles(f) && !fx_gpu_tuned(ctx)) {
        const eng_program *rows = NULL;
        for (const eng_program *p = ctx->program_list; p; p = p->next)
            rows = p->window_taps ? p : rows;
        assert_non_null(rows);
        assert_int_equal(rows->tile_m, 16);
        assert_int_equal(rows->tile_n, S);
    }
    fx_check_f32(y, want, (size_t)N * O * S * S, 1e-3, 1e-5);
    free(xs);
    free(ws);
    free(want);
    eng_fixture_context_destroy(ctx);
}

/* A product over a symbolic row count with no rows to share (batch, 10) @ (10, 96) (a linear
 * layer's input gradient: the left operand is one row, its right operand read along the output
 * columns): tiles of consecutive columns reading the right operand as vectors, whole tiles in
 * every row whatever the batch (fewer items than outputs on a CPU: one output per invocation
 * before); one kernel for batches 5 and 3, exact (quarters in f32). */
static void test_tiles_symbolic_rows_tile_columns(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    const kiln_expr *var = kiln_variable(ctx, "col_batch", 1, 64);
    assert_non_null(var);
    float *a = values(64 * 10, 3), *w = values(10 * 96, 4), *want = values(64 * 96, 0);
    kiln_tensor *tw = fx_f32(ctx, 2, (const int64_t[]){10, 96}, w);
    kiln_tensor *flat = fx_f32(ctx, 1, (const int64_t[]){64 * 10}, a);
    for (int64_t batch = 5; batch >= 3; batch -= 2) {
        const kiln_expr *bound = kiln_bind(ctx, var, batch);
        const kiln_expr *dims[2] = {bound, kiln_int(ctx, 10)};
        kiln_tensor *ta =
            kiln_reshape_sym(kiln_narrow_sym(flat, 0, kiln_int(ctx, 0),
                                             kiln_expr_mul(ctx, bound, kiln_int(ctx, 10))),
                             2, dims);
        kiln_stats before = kiln_context_stats(ctx);
        kiln_tensor *out = kiln_matmul(ta, tw);
        assert_int_equal(kiln_realize(out), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        assert_int_equal(after.kernels_compiled - before.kernels_compiled, batch == 5);
        if (cpu_tiles(f) && !fx_gpu_tuned(ctx)) /* tiles of 2 or more (as many as keep the
                                                 * device busy at the largest batch) */
            assert_true((after.items - before.items) * 2 <= (uint64_t)(batch * 96));
        for (int64_t i = 0; i < batch; i++)
            for (int64_t j = 0; j < 96; j++) {
                float acc = 0;
                for (int64_t k = 0; k < 10; k++)
                    acc += a[i * 10 + k] * w[k * 96 + j];
                want[i * 96 + j] = acc;
            }
        fx_check_f32(out, want, (size_t)(batch * 96), 0, 0);
    }
    free(a);
    free(w);
    free(want);
}

/* Elementwise kernels over a symbolic batch (1 .. 64): tiled along constant rows
 * (batch, 64, 64), along the flat index where the tile divides every count (batch, 512, 3:
 * 1,536 x batch elements, tiles of 8), untiled where no tile does (batch, 3). One kernel each
 * for batch 5 and 1, exact. */
static void test_tiles_symbolic_elementwise(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    const kiln_expr *var = kiln_variable(ctx, "ew_batch", 1, 64);
    assert_non_null(var);
    static const int64_t shapes[3][2] = {{64, 64}, {512, 3}, {1, 3}};
    for (int s = 0; s < 3; s++) {
        for (int64_t batch = 5; batch >= 1; batch -= 4) {
            int64_t per = shapes[s][0] * shapes[s][1], n = batch * per;
            const kiln_expr *bound = kiln_bind(ctx, var, batch);
            const kiln_expr *dims[3] = {bound, kiln_int(ctx, shapes[s][0]),
                                        kiln_int(ctx, shapes[s][1])};
            float *a = values((size_t)n, 12), *b = values((size_t)n, 13),
                  *want = values((size_t)n, 0);
            for (int64_t i = 0; i < n; i++)
                want[i] = a[i] * b[i] + 0.5f;
            kiln_tensor *ta = kiln_reshape_sym(fx_f32(ctx, 1, (const int64_t[]){n}, a), 3, dims);
            kiln_tensor *tb = kiln_reshape_sym(fx_f32(ctx, 1, (const int64_t[]){n}, b), 3, dims);
            assert_int_equal(kiln_realize(ta), KILN_OK);
            assert_int_equal(kiln_realize(tb), KILN_OK);
            kiln_stats before = kiln_context_stats(ctx);
            kiln_tensor *out = kiln_add(kiln_mul(ta, tb), kiln_scalar(ctx, KILN_F32, 0.5));
            assert_int_equal(kiln_realize(out), KILN_OK);
            kiln_stats after = kiln_context_stats(ctx);
            assert_int_equal(after.kernels_compiled - before.kernels_compiled, batch == 5);
            if (cpu_tiles(f) && !fx_gpu_tuned(ctx)) {
                uint64_t items = after.items - before.items;
                if (s < 2)
                    assert_int_equal(items * 8, (uint64_t)n);
                else
                    assert_int_equal(items, (uint64_t)n);
            }
            fx_check_f32(out, want, (size_t)n, 0, 0);
            free(a);
            free(b);
            free(want);
        }
    }
}

/* matmul's items in blocks of tile rows x 8 tile columns (32 x 8 on a CPU; lower.c
 * lower_tile): blocks that shrink to divide the row tiles (12 row tiles: 4 x 8), several
 * blocks along a row (40 column tiles: 5), no blocks (9 row tiles, 229 column tiles), and the
 * test-only override tile_block_rows (eng_testing.h) (64, 3 -> 2, 1: none) on one shape. Where the
 * items are whole workgroups (no bounds check) and k is a multiple of 4, a CPU's subgroup loads the
 * left operand's vectors once per lane and shares them (SHARE), with blocks or without; the
 * override unshared_loads turns that off. Every output is computed once and in place, on
 * the device and on the interpreter (which runs the teams in lockstep). */
static void test_tiles_matmul_blocks(void **state) {
    const eng_fixture *f = *state;
    static const struct {
        int64_t m, k, n;
        uint32_t block_rows;
        bool unshared, shared; /* the option; whether a CPU shares the left operand's loads */
    } cases[] = {{96, 12, 1408, 0, false, false}, {512, 12, 320, 0, false, true},
                 {72, 5, 1832, 0, false, false},  {512, 12, 320, 64, false, true},
                 {512, 12, 320, 3, false, true},  {512, 12, 320, 1, false, true},
                 {512, 12, 320, 0, true, false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t m = (size_t)cases[i].m, k = (size_t)cases[i].k, n = (size_t)cases[i].n;
        kiln_context_options opt = {.device = f->device ? NULL : "interp", .validation = f->device};
        eng_testing t = {.tile_block_rows = cases[i].block_rows,
                         .unshared_loads = cases[i].unshared};
        kiln_context *ctx = NULL;
        assert_int_equal(eng_testing_context_create(&opt, &t, &ctx), KILN_OK);
        float *a = values(m * k, 8), *b = values(k * n, 9), *want = values(m * n, 0);
        host_matmul(a, b, m, k, n, want);
        kiln_tensor *ta = fx_f32(ctx, 2, (const int64_t[]){cases[i].m, cases[i].k}, a);
        kiln_tensor *tb = fx_f32(ctx, 2, (const int64_t[]){cases[i].k, cases[i].n}, b);
        kiln_stats before = kiln_context_stats(ctx);
        fx_check_f32(kiln_matmul(ta, tb), want, m * n, 0, 0);
        kiln_stats after = kiln_context_stats(ctx);
        if (cpu_tiles(f)) {
            assert_int_equal(stats_delta(&before, &after).tiled, 1);
            /* sharing needs subgroup ballots (mobile-low has no subgroup operations) */
            assert_int_equal(after.kernels_shared - before.kernels_shared,
                             cases[i].shared && fx_subgroup_ballot(ctx));
        }
        assert_int_equal(kiln_context_status(ctx), KILN_OK);
        eng_fixture_context_destroy(ctx);
        free(a);
        free(b);
        free(want);
    }
}

/* A reduction over the middle axis: a 2-D output (64 x 512) whose tile shrinks to keep enough
 * invocations; each output sums its own column of 33 (not a multiple of the unroll). */
static void test_tiles_reduction_with_a_2d_output(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { A = 64, B = 33, C = 512 };
    float *x = values(A * B * C, 10), *want = values(A * C, 0);
    for (size_t i = 0; i < A; i++) {
        for (size_t k = 0; k < C; k++) {
            float m = -1e30f;
            for (size_t j = 0; j < B; j++) {
                float v = x[(i * B + j) * C + k];
                m = v > m ? v : m;
            }
            want[i * C + k] = m;
        }
    }
    kiln_tensor *tx = fx_f32(ctx, 3, (const int64_t[]){A, B, C}, x);
    fx_check_f32(kiln_max(tx, 1, (const int32_t[]){1}, false), want, (size_t)A * C, 0, 0);
    free(x);
    free(want);
}

/* Sums along contiguous rows: the unrolled steps of the range read four consecutive aligned
 * elements (one vector load per four steps); a row offset by one element or padded per element
 * is read element by element. */
static void test_tiles_reduction_steps_load_vectors(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { R = 4096, C = 68 }; /* enough rows that each is one invocation (no group) */
    float *x = values(R * C, 16), *want = values(R, 0);
    kiln_tensor *tx = fx_f32(ctx, 2, (const int64_t[]){R, C}, x);
    const int32_t last[1] = {-1};
    for (int variant = 0; variant < 3; variant++) {
        /* 0: x[:, :64]; 1: x[:, 1:65]; 2: pad(x[:, :60], 2 each side) */
        kiln_tensor *v = variant == 0 ? kiln_narrow(tx, 1, 0, 64)
                         : variant == 1
                             ? kiln_narrow(tx, 1, 1, 64)
                             : kiln_pad(kiln_narrow(tx, 1, 0, 60), (const int64_t[]){0, 0, 2, 2});
        for (size_t r = 0; r < R; r++) {
            float acc = 0;
            for (size_t c = 0; c < 64; c++) {
                if (variant == 2 && (c < 2 || c >= 62))
                    continue;
                acc += x[r * C + c + (variant == 1) - (variant == 2 ? 2 : 0)];
            }
            want[r] = acc;
        }
        kiln_stats before = kiln_context_stats(ctx);
        kiln_tensor *sum = kiln_sum(v, 1, last, false);
        assert_int_equal(kiln_realize(sum), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        if (cpu_tiles(f))
            assert_int_equal(stats_delta(&before, &after).vector, variant == 0 ? 1 : 0);
        fx_check_f32(sum, want, R, 1e-3, 1e-5);
    }
    free(x);
    free(want);
}

/* The order a tiled reduction adds in (lower.c lower_stage), over column tiles of the widest
 * kind (vector loads only; 16 columns per invocation on a CPU): the elements of an unrolled
 * step first (eight on a device that takes octets, else four), then their sum into the
 * output's accumulator, acc + (((v0 + v1) + v2) + v3) as a hand-written kernel does; untiled,
 * four accumulators, (a0 + a1) + (a2 + a3). Column sums of 16 rows whose f32 rounding tells the
 * orders apart: 48 (steps of eight), 32 (of four), 40 (four accumulators); in element order it
 * would be 56. */
static void test_tiles_reduction_step_order(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { R = 16, C = 32768 }; /* wide enough for tiles of 16 columns on a CPU */
    static const float column[R] = {1e8f, 0, 0, 0, 5, 5, 5, 5, 5, 5, 5, -1e8f, 0, 0, 0, 0};
    float *x = values(R * C, 0), *want = values(C, 0);
    for (size_t r = 0; r < R; r++) {
        for (size_t c = 0; c < C; c++)
            x[r * C + c] = column[r];
    }
    kiln_tensor *tx = fx_f32(ctx, 2, (const int64_t[]){R, C}, x);
    kiln_stats before = kiln_context_stats(ctx);
    kiln_tensor *sum = kiln_sum(tx, 1, (const int32_t[]){0}, false);
    assert_int_equal(kiln_realize(sum), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    delta d = stats_delta(&before, &after);
    bool tiled = d.tiled == 1; /* a GPU tiles 4 columns */
    if (cpu_tiles(f))
        assert_true(tiled);
    for (size_t c = 0; c < C; c++)
        want[c] = !tiled ? 40.0f : d.octets ? 48.0f : 32.0f;
    fx_check_f32(sum, want, C, 0, 0);
    free(x);
    free(want);
}

/* Column reductions run in strips of rows (ops.c strip_split): a first kernel reduces each
 * strip over vectors of columns, a second the strips. Over axis 0 of x, and over the last axis
 * of x.T (the same columns through a permuted view); mean and var on top. */
static void test_tiles_column_reductions_in_strips(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { R = 2048, C = 64 };
    float *x = values(R * C, 17);
    float want_max[C], want_sum[C], want_var[C];
    for (size_t c = 0; c < C; c++) {
        double m = -1e30, sum = 0, sq = 0;
        for (size_t r = 0; r < R; r++) {
            double v = x[r * C + c];
            m = v > m ? v : m;
            sum += v;
        }
        for (size_t r = 0; r < R; r++)
            sq += (x[r * C + c] - sum / R) * (x[r * C + c] - sum / R);
        want_max[c] = (float)m;
        want_sum[c] = (float)sum;
        want_var[c] = (float)(sq / (R - 1));
    }
    kiln_tensor *tx = fx_f32(ctx, 2, (const int64_t[]){R, C}, x);
    const int32_t first[1] = {0}, last[1] = {-1};
    kiln_stats before = kiln_context_stats(ctx);
    kiln_tensor *m = kiln_max(tx, 1, first, false);
    assert_int_equal(kiln_realize(m), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    if (cpu_tiles(f))
        assert_int_equal(after.dispatches - before.dispatches, 2);
    fx_check_f32(m, want_max, C, 0, 0);
    fx_check_f32(kiln_sum(kiln_transpose(tx, 0, 1), 1, last, false), want_sum, C, 1e-2, 1e-5);
    fx_check_f32(kiln_var(tx, 1, first, 1, false), want_var, C, 1e-3, 1e-4);
    free(x);
}

/* Row mode: reductions over the last dim that an elementwise kernel reads along each row
 * (softmax's max and sum, a row mean) fuse into it; one invocation owns a row. A reduction over
 * another dim stays a kernel of its own. */
static void test_tiles_row_mode(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { R = 64, C = 256 };
    float *x = values(R * C, 18), *want = values(R * C, 0);
    for (size_t i = 0; i < (size_t)R * C; i++)
        x[i] *= 0.25f;
    kiln_tensor *tx = fx_f32(ctx, 2, (const int64_t[]){R, C}, x);
    const int32_t last[1] = {-1}, first[1] = {0};
    for (int kind = 0; kind < 4; kind++) {
        for (size_t r = 0; r < R; r++) {
            double m = -1e30, sum = 0, mean = 0;
            for (size_t c = 0; c < C; c++) {
                m = x[r * C + c] > m ? x[r * C + c] : m;
                mean += x[r * C + c] / C;
            }
            for (size_t c = 0; c < C; c++)
                sum += exp(x[r * C + c] - m);
            for (size_t c = 0; c < C; c++) {
                double v = x[r * C + c];
                double colmax = -1e30;
                for (size_t q = 0; q < R; q++)
                    colmax = x[q * C + c] > colmax ? x[q * C + c] : colmax;
                want[r * C + c] = (float)(kind == 0   ? exp(v - m) / sum
                                          : kind == 1 ? (v - m) - log(sum)
                                          : kind == 2 ? v - mean
                                                      : v - colmax);
            }
        }
        kiln_tensor *out = kind == 0   ? kiln_softmax(tx, -1)
                           : kind == 1 ? kiln_log_softmax(tx, -1)
                           : kind == 2 ? kiln_sub(tx, kiln_mean(tx, 1, last, true))
                                       : kiln_sub(tx, kiln_max(tx, 1, first, true));
        kiln_stats before = kiln_context_stats(ctx);
        assert_int_equal(kiln_realize(out), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        /* Row mode is a CPU's (a GPU-tuned context keeps its invocations on one output each
         * and splits the softmax: 2 kernels; the values are checked all the same). */
        if (!fx_gpu_tuned(ctx))
            assert_int_equal(after.dispatches - before.dispatches, kind == 3 ? 2 : 1);
        fx_check_f32(out, want, (size_t)R * C, 1e-5, 1e-4);
    }
    /* three dims: rows of the last dim under two leading dims */
    kiln_tensor *t3 = kiln_reshape(tx, 3, (const int64_t[]){4, 16, C});
    fx_host_softmax(x, R, C, want);
    kiln_stats before = kiln_context_stats(ctx);
    kiln_tensor *sm = kiln_softmax(t3, 2);
    assert_int_equal(kiln_realize(sm), KILN_OK);
    if (!fx_gpu_tuned(ctx))
        assert_int_equal(kiln_context_stats(ctx).dispatches - before.dispatches, 1);
    fx_check_f32(sm, want, (size_t)R * C, 1e-6, 1e-4);
    /* A symbolic count of rows (a Variable bound to 40 of at most 64, as a sequence length or
     * a batch): row mode too on a CPU (a layer norm's mean, variance and normalisation in one
     * kernel; a GPU-tuned context keeps its kernels per reduction), one kernel for two bound
     * values, against the host. */
    const kiln_expr *n = kiln_variable(ctx, "tile_rows", 1, R);
    for (int64_t bound = 40; bound <= 41; bound++) {
        kiln_tensor *rows = kiln_narrow_sym(tx, 0, kiln_int(ctx, 0), kiln_bind(ctx, n, bound));
        for (size_t r = 0; r < (size_t)bound; r++) {
            double mean = 0, var = 0;
            for (size_t c = 0; c < C; c++)
                mean += x[r * C + c] / C;
            for (size_t c = 0; c < C; c++)
                var += (x[r * C + c] - mean) * (x[r * C + c] - mean) / C;
            for (size_t c = 0; c < C; c++)
                want[r * C + c] = (float)((x[r * C + c] - mean) / sqrt(var + 1e-5));
        }
        kiln_tensor *mean = kiln_mean(rows, 1, last, true);
        kiln_tensor *centered = kiln_sub(rows, mean);
        kiln_tensor *var = kiln_mean(kiln_mul(centered, centered), 1, last, true);
        kiln_tensor *ln = kiln_div(centered, kiln_sqrt(kiln_add_scalar(var, 1e-5)));
        uint64_t compiled = kiln_context_stats(ctx).kernels_compiled;
        before = kiln_context_stats(ctx);
        assert_int_equal(kiln_realize(ln), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        if (!fx_gpu_tuned(ctx))
            assert_int_equal(after.dispatches - before.dispatches, 1);
        if (bound > 40) /* the kernel of the first bound value serves the second */
            assert_int_equal(after.kernels_compiled, compiled);
        fx_check_f32(ln, want, (size_t)bound * C, 1e-5, 1e-4);
        kiln_release(ln);
        kiln_release(var);
        kiln_release(centered);
        kiln_release(mean);
        kiln_release(rows);
    }
    free(x);
    free(want);
}

/* eng_testing.unpaired_vectors: on a CPU device, vectors of four elements only (no octets; on
 * lavapipe not moved as 64-bit integers either); the same results. */
static void test_tiles_unpaired_vectors(void **state) {
    const eng_fixture *f = *state;
    kiln_context_options opt = {.device = f->device ? NULL : "interp", .validation = f->device};
    kiln_context *ctx = NULL;
    assert_int_equal(
        eng_testing_context_create(&opt, &(eng_testing){.unpaired_vectors = true}, &ctx), KILN_OK);
    enum { R = 1024, C = 64, N = R * C };
    float *a = values(N, 11), *b = values(N, 12), *want = values(N, 0);
    for (size_t i = 0; i < N; i++)
        want[i] = a[i] * b[i];
    kiln_tensor *ta = fx_f32(ctx, 2, (const int64_t[]){R, C}, a);
    kiln_tensor *tb = fx_f32(ctx, 2, (const int64_t[]){R, C}, b);
    kiln_stats before = kiln_context_stats(ctx);
    kiln_tensor *prod = kiln_mul(ta, tb);
    assert_int_equal(kiln_realize(prod), KILN_OK);
    kiln_tensor *sums = kiln_sum(ta, 1, (const int32_t[]){1}, false);
    assert_int_equal(kiln_realize(sums), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    delta d = stats_delta(&before, &after);
    if (cpu_tiles(f)) {
        assert_int_equal(d.vector, 2);
    }
    assert_int_equal(d.octets, 0);
    fx_check_f32(prod, want, N, 0, 0);
    for (size_t r = 0; r < R; r++) {
        want[r] = 0;
        for (size_t j = 0; j < C; j++)
            want[r] += a[r * C + j];
    }
    fx_check_f32(sums, want, R, 1e-6, 1e-6);
    eng_fixture_context_destroy(ctx);
    free(a);
    free(b);
    free(want);
}

/* Read-only operands as texel buffers (on lavapipe; emit.c texel_buffers): a product of two
 * tensors (octets), row sums (vectors), a transposed copy (scalar loads at a view's offset),
 * a 2 x 2 max pool (pairs), integer arithmetic, and an in-place add (its target read and written:
 * a storage buffer). Each the same with every operand a storage buffer (eng_testing
 * storage_reads) and as the host computes it; on lavapipe the kernels read texels, with
 * storage_reads or under a device profile (a phone's GPU: the @mobile-low pass) none does. */
static void test_tiles_texel_reads(void **state) {
    const eng_fixture *f = *state;
    enum { R = 256, C = 64, N = R * C };
    float *a = values(N, 3), *b = values(N, 4), *want = values(N, 0);
    int32_t *ints = malloc(N * sizeof *ints), *isum = malloc(N * sizeof *isum);
    assert_non_null(ints);
    assert_non_null(isum);
    for (size_t i = 0; i < N; i++)
        ints[i] = (int32_t)(i % 1000) - 500;
    for (int reads = 0; reads < 2; reads++) {
        kiln_context_options opt = {.device = f->device ? NULL : "interp", .validation = f->device};
        kiln_context *ctx = NULL;
        assert_int_equal(
            eng_testing_context_create(&opt, &(eng_testing){.storage_reads = reads == 1}, &ctx),
            KILN_OK);
        kiln_stats before = kiln_context_stats(ctx);
        kiln_tensor *ta = fx_f32(ctx, 2, (const int64_t[]){R, C}, a);
        kiln_tensor *tb = fx_f32(ctx, 2, (const int64_t[]){R, C}, b);
        for (size_t i = 0; i < N; i++)
            want[i] = a[i] * b[i];
        fx_check_f32(kiln_mul(ta, tb), want, N, 0, 0);
        for (size_t r = 0; r < R; r++) {
            want[r] = 0;
            for (size_t j = 0; j < C; j++)
                want[r] += a[r * C + j];
        }
        fx_check_f32(kiln_sum(ta, 1, (const int32_t[]){1}, false), want, R, 1e-6, 1e-6);
        /* columns 1.. of the transpose: a view with an offset, read element by element */
        kiln_tensor *tt = kiln_narrow(kiln_transpose(ta, 0, 1), 0, 1, C - 1);
        for (size_t j = 1; j < C; j++)
            for (size_t r = 0; r < R; r++)
                want[(j - 1) * R + r] = a[r * C + j];
        fx_check_f32(kiln_contiguous(tt), want, (size_t)(C - 1) * R, 0, 0);
        kiln_tensor *img = kiln_reshape(ta, 4, (const int64_t[]){4, 1, R / 4, C});
        for (size_t n = 0; n < 4; n++)
            for (size_t y = 0; y < R / 8; y++)
                for (size_t x = 0; x < C / 2; x++) {
                    float m = -1e30f;
                    for (size_t dy = 0; dy < 2; dy++)
                        for (size_t dx = 0; dx < 2; dx++) {
                            float v = a[(n * (R / 4) + 2 * y + dy) * C + 2 * x + dx];
                            m = v > m ? v : m;
                        }
                    want[(n * (R / 8) + y) * (C / 2) + x] = m;
                }
        fx_check_f32(kiln_max_pool2d(img, 2, 2, 0), want, N / 4, 0, 0);
        kiln_tensor *ti = fx_i32(ctx, 2, (const int64_t[]){R, C}, ints);
        for (size_t i = 0; i < N; i++)
            isum[i] = 2 * ints[i] - 1;
        fx_check_i32(kiln_sub(kiln_add(ti, ti), kiln_scalar(ctx, KILN_I32, 1.0)), isum, N);
        assert_int_equal(kiln_add_(ta, tb), KILN_OK);
        for (size_t i = 0; i < N; i++)
            want[i] = a[i] + b[i];
        fx_check_f32(ta, want, N, 0, 0);
        kiln_stats after = kiln_context_stats(ctx);
        uint64_t texel = after.kernels_texel - before.kernels_texel;
        if (reads == 0 && f->device && cpu_tiles(f) && !kiln_context_profile(ctx))
            assert_true(texel >= 5);
        else
            assert_int_equal(texel, 0);
        eng_fixture_context_destroy(ctx);
    }
    free(a);
    free(b);
    free(want);
    free(ints);
    free(isum);
}

/* The test-only tile options (eng_testing.tile_*, which bench_tuning compares):
 * each is rounded down to a power of two and capped at 64 outputs, and every tile they choose
 * computes the same results: a matmul (16 x 16 is past the cap: untiled), a broadcast add, a
 * column max. Whether the column sums are tiled shows in their add order (tiled: each step's
 * four rows in order, then into the accumulator: 24; untiled, on a device that takes octets,
 * eight chains combined pairwise: 16): one vector column is no tile. */
static void test_tiles_tile_options(void **state) {
    const eng_fixture *f = *state;
    static const struct {
        uint32_t ew, rows, cols, vector_cols;
        float column_sum, column_sum4; /* with octets; with vectors of four only */
    } cases[] = {{1, 1, 1, 1, 16, 24},
                 {3, 4, 16, 100, 24, 24},
                 {32, 16, 16, 8, 24, 24},
                 {64, 2, 8, 2, 24, 24}};
    enum { M = 256, K = 24, N = 512, R = 8, C = 32768 };
    static const float column[R] = {1e8f, 5, 5, 5, 0, 0, 0, -1e8f};
    float *a = values(M * K, 8), *b = values(K * N, 9), *mm = values(M * N, 0);
    float *x = values(R * C, 0), *xs = values(R * C, 0), *sums = values(C, 0);
    float *bcast = values(R * C, 0), *maxes = values(C, 0), *col = values(R, 3);
    host_matmul(a, b, M, K, N, mm);
    for (size_t c = 0; c < C; c++) {
        maxes[c] = -INFINITY;
        for (size_t r = 0; r < R; r++) {
            xs[r * C + c] = column[r];
            x[r * C + c] = xs[r * C + c] * 1e-7f + (float)(c % 5);
            bcast[r * C + c] = x[r * C + c] + col[r];
            maxes[c] = x[r * C + c] > maxes[c] ? x[r * C + c] : maxes[c];
        }
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kiln_context_options opt = {.device = f->device ? NULL : "interp", .validation = f->device};
        eng_testing t = {.tile_ew = cases[i].ew,
                         .tile_rows = cases[i].rows,
                         .tile_cols = cases[i].cols,
                         .tile_vector_cols = cases[i].vector_cols};
        kiln_context *ctx = NULL;
        assert_int_equal(eng_testing_context_create(&opt, &t, &ctx), KILN_OK);
        kiln_tensor *ta = fx_f32(ctx, 2, (const int64_t[]){M, K}, a);
        kiln_tensor *tb = fx_f32(ctx, 2, (const int64_t[]){K, N}, b);
        fx_check_f32(kiln_matmul(ta, tb), mm, (size_t)M * N, 1e-3, 1e-5);
        kiln_tensor *tx = fx_f32(ctx, 2, (const int64_t[]){R, C}, x);
        kiln_tensor *tc = fx_f32(ctx, 2, (const int64_t[]){R, 1}, col);
        fx_check_f32(kiln_add(tx, tc), bcast, (size_t)R * C, 0, 0);
        fx_check_f32(kiln_max(tx, 1, (const int32_t[]){0}, false), maxes, C, 0, 0);
        kiln_tensor *ts = fx_f32(ctx, 2, (const int64_t[]){R, C}, xs);
        /* The column sum depends on the order of the additions (1e8 + 5 rounds in f32): the
         * tiles fix it on a CPU; on a GPU the subgroup's width does too (16 or 24). Untiled
         * (tiles of 1), a CPU's column unrolls by its widest vector: eight accumulators, 16,
         * where octets move; four, ((x0 + x4) + (x1 + x5)) + ((x2 + x6) + (x3 + x7)) = 24, on
         * a device without shaderInt64 (fx_octets). */
        float want_sum = fx_octets(ctx) ? cases[i].column_sum : cases[i].column_sum4;
        if (fx_gpu_tuned(ctx)) {
            float got[1];
            assert_int_equal(
                kiln_read(kiln_narrow(kiln_sum(ts, 1, (const int32_t[]){0}, false), 0, 0, 1), got,
                          sizeof got),
                KILN_OK);
            assert_true(got[0] == 16 || got[0] == 24);
            want_sum = got[0];
        }
        for (size_t c = 0; c < C; c++)
            sums[c] = want_sum;
        fx_check_f32(kiln_sum(ts, 1, (const int32_t[]){0}, false), sums, C, 0, 0);
        assert_int_equal(kiln_context_status(ctx), KILN_OK);
        eng_fixture_context_destroy(ctx);
    }
    free(a);
    free(b);
    free(mm);
    free(x);
    free(xs);
    free(sums);
    free(bcast);
    free(maxes);
    free(col);
}

/* The figures a GPU is tuned with (test-only option, on this device and the interpreter): one
 * elementwise output per invocation, 4 x 4 matmul tiles (vectors of four columns), softmax as
 * two kernels when there are few rows, column reductions in strips; the same results. */
static void test_tiles_gpu_tuning(void **state) {
    const eng_fixture *f = *state;
    kiln_context_options opt = {.device = f->device ? NULL : "interp", .validation = f->device};
    kiln_context *ctx = NULL;
    assert_int_equal(eng_testing_context_create(&opt, &(eng_testing){.gpu_tuning = true}, &ctx),
                     KILN_OK);
    enum { M = 256, K = 24, N = 512, R = 2048, C = 64 };
    float *a = values(M * K, 19), *b = values(K * N, 20), *want = values(M * N, 0);
    host_matmul(a, b, M, K, N, want);
    kiln_tensor *ta = fx_f32(ctx, 2, (const int64_t[]){M, K}, a);
    kiln_tensor *tb = fx_f32(ctx, 2, (const int64_t[]){K, N}, b);
    kiln_stats before = kiln_context_stats(ctx);
    kiln_tensor *mm = kiln_matmul(ta, tb);
    assert_int_equal(kiln_realize(mm), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(stats_delta(&before, &after).tiled, 1);
    assert_int_equal(stats_delta(&before, &after).vector, 1);
    fx_check_f32(mm, want, (size_t)M * N, 1e-3, 1e-5);

    /* elementwise: untiled */
    for (size_t i = 0; i < (size_t)M * K; i++)
        want[i] = a[i] * a[i] + 1.0f;
    before = kiln_context_stats(ctx);
    kiln_tensor *ew = kiln_add_scalar(kiln_mul(ta, ta), 1.0);
    assert_int_equal(kiln_realize(ew), KILN_OK);
    after = kiln_context_stats(ctx);
    assert_int_equal(stats_delta(&before, &after).tiled, 0);
    fx_check_f32(ew, want, (size_t)M * K, 0, 0);

    /* softmax over 256 rows of 512: two kernels (the max an earlier stage of the sum's, both
     * stored; then the quotients) */
    float *rows = values(M * N, 0);
    for (size_t r = 0; r < M; r++)
        memcpy(rows + r * N, b + (r % K) * N, N * sizeof *rows);
    fx_host_softmax(rows, M, N, want);
    kiln_tensor *tr = fx_f32(ctx, 2, (const int64_t[]){M, N}, rows);
    before = kiln_context_stats(ctx);
    kiln_tensor *sm = kiln_softmax(tr, -1);
    assert_int_equal(kiln_realize(sm), KILN_OK);
    after = kiln_context_stats(ctx);
    assert_int_equal(after.dispatches - before.dispatches, 2);
    fx_check_f32(sm, want, (size_t)M * N, 1e-6, 1e-4);

    /* a column reduction in strips */
    float *x = values(R * C, 21), colmax[C];
    for (size_t c = 0; c < C; c++) {
        colmax[c] = -1e30f;
        for (size_t r = 0; r < R; r++)
            colmax[c] = x[r * C + c] > colmax[c] ? x[r * C + c] : colmax[c];
    }
    kiln_tensor *tx = fx_f32(ctx, 2, (const int64_t[]){R, C}, x);
    fx_check_f32(kiln_max(tx, 1, (const int32_t[]){0}, false), colmax, C, 0, 0);
    assert_int_equal(kiln_context_status(ctx), KILN_OK);
    eng_fixture_context_destroy(ctx);
    free(a);
    free(b);
    free(want);
    free(rows);
    free(x);
}

/* dst += src through a view of dst's storage: the kernel reads the buffer it writes, so its
 * stores stay one element at a time (the loads of src may still be vectors). */
static void test_tiles_in_place_write(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { R = 64, C = 512, W = 256 };
    float *x = values(R * C, 11), *y = values(R * W, 12), *want = values(R * C, 0);
    memcpy(want, x, sizeof(float) * R * C);
    for (size_t r = 0; r < R; r++) {
        for (size_t c = 0; c < W; c++)
            want[r * C + 128 + c] += y[r * W + c];
    }
    kiln_tensor *tx = fx_f32(ctx, 2, (const int64_t[]){R, C}, x);
    kiln_tensor *ty = fx_f32(ctx, 2, (const int64_t[]){R, W}, y);
    assert_int_equal(kiln_add_(kiln_narrow(tx, 1, 128, W), ty), KILN_OK);
    fx_check_f32(tx, want, (size_t)R * C, 0, 0);
    free(x);
    free(y);
    free(want);
}

/* f16 and u8 have no vector access: tiled, element by element. i32 has. */
static void test_tiles_types_without_vectors(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { R = 64, C = 256, N = R * C };
    float *x = values(N, 13), *want = values(N, 0);
    kiln_tensor *tx = fx_f32(ctx, 2, (const int64_t[]){R, C}, x);
    kiln_tensor *half = kiln_cast(kiln_mul_scalar(kiln_cast(tx, KILN_F16), 2.0), KILN_F32);
    for (size_t i = 0; i < N; i++)
        want[i] = 2.0f * x[i]; /* exact in f16: quarters below 16 */
    fx_check_f32(half, want, N, 0, 0);
    int32_t *xi = malloc(N * sizeof *xi), *wi = malloc(N * sizeof *wi);
    uint8_t *wu = malloc(N);
    assert_true(xi && wi && wu);
    for (size_t i = 0; i < N; i++) {
        xi[i] = (int32_t)(i % 1000) - 500;
        wi[i] = xi[i] * 3;
        wu[i] = (uint8_t)(xi[i] + 7);
    }
    kiln_tensor *ti = fx_i32(ctx, 2, (const int64_t[]){R, C}, xi);
    fx_check_i32(kiln_mul_scalar(ti, 3), wi, N);
    fx_check_u8(kiln_add_scalar(kiln_cast(ti, KILN_U8), 7), KILN_U8, wu, N);
    free(x);
    free(want);
    free(xi);
    free(wi);
    free(wu);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_tiles_elementwise_rows_move_as_vectors),
        ENG_TEST(test_tiles_row_sums_read_octets),
        ENG_TEST(test_tiles_unpaired_vectors),
        ENG_TEST(test_tiles_texel_reads),
        ENG_TEST(test_tiles_broadcast_rows),
        ENG_TEST(test_tiles_unaligned_and_flipped_views),
        ENG_TEST(test_tiles_copy_into_a_flipped_view),
        ENG_TEST(test_tiles_padded_views),
        ENG_TEST(test_tiles_flat_index_when_the_last_dim_does_not_divide),
        ENG_TEST(test_tiles_short_rows_one_per_item),
        ENG_TEST(test_tiles_short_rows_are_one_tile),
        ENG_TEST(test_tiles_matmul_register_tile),
        ENG_TEST(test_tiles_transposed_left_operand_reads_vectors),
        ENG_TEST(test_tiles_long_loops_keep_the_tile),
        ENG_TEST(test_tiles_narrow_rows_take_taller_tiles),
        ENG_TEST(test_tiles_masked_long_loops_take_taller_tiles),
        ENG_TEST(test_tiles_windows_in_whole_rows),
        ENG_TEST(test_tiles_windows_in_rows_of_seven),
        ENG_TEST(test_tiles_symbolic_rows_tile_columns),
        ENG_TEST(test_tiles_symbolic_elementwise),
        ENG_TEST(test_tiles_matmul_blocks),
        ENG_TEST(test_tiles_reduction_with_a_2d_output),
        ENG_TEST(test_tiles_reduction_steps_load_vectors),
        ENG_TEST(test_tiles_reduction_step_order),
        ENG_TEST(test_tiles_column_reductions_in_strips),
        ENG_TEST(test_tiles_row_mode),
        ENG_TEST(test_tiles_gpu_tuning),
        ENG_TEST(test_tiles_tile_options),
        ENG_TEST(test_tiles_in_place_write),
        ENG_TEST(test_tiles_types_without_vectors),
    };
    return ENG_RUN_BOTH(tests);
}
