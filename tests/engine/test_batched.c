/* Batched and broadcast matmul (issue 25): a batch dim is an outer dimension over the same
 * register-tiled product as a plain matmul's (engine/codegen/lower.c eng_kernel_tile: the loads
 * shared along the rows of one matrix of the batch). Every case is compared with products
 * computed here, on the device and on the interpreter: several batch shapes (one matrix, sizes
 * the tile does not divide, two batch dims), operands read through transposed, permuted and
 * flipped views, a broadcast batch (stride 0, and an operand with no batch dims), a symbolic
 * batch (one kernel for every bound value) and the sum over a batched product's batch axis.
 * The values are small multiples of 1/4, so every sum is exact in any order. On a CPU device
 * and on the interpreter the statistics must show the 8 x 8 register tile of a plain matmul. */
#include "engine_fixture.h"

#include <stdlib.h>
#include <string.h>

/* CPU devices (lavapipe) and the interpreter tile; a GPU keeps smaller tiles. */
static bool cpu_tiles(const eng_fixture *f) {
    return !f->device || strstr(kiln_context_device_name(f->ctx), "llvmpipe") != NULL;
}

static float *values(size_t n, uint32_t seed) {
    float *v = malloc((n ? n : 1) * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((i * 7 + seed * 13) % 23) / 4.0f - 2.75f;
    return v;
}

/* out[b] (m, n) = a[b] (m, k) @ w[b] (k, n) for b < batch, each row-major and packed. */
static void host_batched(const float *a, const float *w, size_t batch, size_t m, size_t k, size_t n,
                         float *out) {
    for (size_t b = 0; b < batch; b++) {
        for (size_t i = 0; i < m; i++) {
            for (size_t j = 0; j < n; j++) {
                float acc = 0;
                for (size_t q = 0; q < k; q++)
                    acc += a[(b * m + i) * k + q] * w[(b * k + q) * n + j];
                out[(b * m + i) * n + j] = acc;
            }
        }
    }
}

/* The same values as x (batch, rows, cols) stored another way, read back through a view:
 * 0: contiguous; 1: stored (batch, cols, rows), transposed; 2: stored (rows, batch, cols),
 * permuted; 3: stored with the batch and the rows reversed, flipped (negative strides). */
static kiln_tensor *viewed(kiln_context *ctx, const float *x, int64_t batch, int64_t rows,
                           int64_t cols, int how) {
    size_t n = (size_t)(batch * rows * cols);
    float *s = malloc(n * sizeof *s);
    assert_non_null(s);
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t i = 0; i < rows; i++) {
            for (int64_t j = 0; j < cols; j++) {
                float v = x[(b * rows + i) * cols + j];
                if (how == 1)
                    s[(b * cols + j) * rows + i] = v;
                else if (how == 2)
                    s[(i * batch + b) * cols + j] = v;
                else if (how == 3)
                    s[((batch - 1 - b) * rows + (rows - 1 - i)) * cols + j] = v;
                else
                    s[(b * rows + i) * cols + j] = v;
            }
        }
    }
    kiln_tensor *t = NULL;
    if (how == 1)
        t = kiln_transpose(fx_f32(ctx, 3, (const int64_t[]){batch, cols, rows}, s), 1, 2);
    else if (how == 2)
        t = kiln_permute(fx_f32(ctx, 3, (const int64_t[]){rows, batch, cols}, s),
                         (const int32_t[]){1, 0, 2});
    else if (how == 3)
        t = kiln_flip(kiln_flip(fx_f32(ctx, 3, (const int64_t[]){batch, rows, cols}, s), 0), 1);
    else
        t = fx_f32(ctx, 3, (const int64_t[]){batch, rows, cols}, s);
    free(s);
    assert_non_null(t);
    return t;
}

/* Batched products of several shapes, each operand read in each way of viewed(): one matrix,
 * sizes no tile divides (13 x 7 @ 7 x 19), a matrix of fewer rows than the tile (5), and
 * shapes whose tiles divide (32 x 8 @ 8 x 48). */
static void test_batched_shapes_and_views(void **state) {
    kiln_context *ctx = fx_ctx(state);
    static const int64_t shapes[][4] = {
        {1, 16, 8, 32}, {3, 13, 7, 19}, {6, 5, 4, 24}, {4, 32, 8, 48}, {2, 24, 9, 40}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t bt = shapes[s][0], m = shapes[s][1], k = shapes[s][2], n = shapes[s][3];
        size_t na = (size_t)(bt * m * k), nb = (size_t)(bt * k * n), nc = (size_t)(bt * m * n);
        float *a = values(na, 1 + (uint32_t)s), *b = values(nb, 2 + (uint32_t)s),
              *want = malloc(nc * sizeof *want);
        assert_non_null(want);
        host_batched(a, b, (size_t)bt, (size_t)m, (size_t)k, (size_t)n, want);
        for (int ha = 0; ha < 4; ha++) {
            for (int hb = 0; hb < 4; hb++) {
                kiln_scope_begin(ctx);
                kiln_tensor *c =
                    kiln_matmul(viewed(ctx, a, bt, m, k, ha), viewed(ctx, b, bt, k, n, hb));
                fx_assert_shape(c, 3, (const int64_t[]){bt, m, n});
                fx_check_f32(c, want, nc, 0, 0);
                assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
            }
        }
        free(a);
        free(b);
        free(want);
    }
}

/* The matmul c = a @ b in one kernel, its result against want; on a CPU device and on the
 * interpreter with an item per 64 outputs (the 8 x 8 register tile). */
static void check_tiled(const eng_fixture *f, kiln_tensor *a, kiln_tensor *b, const float *want,
                        size_t n) {
    kiln_context *ctx = f->ctx;
    assert_int_equal(kiln_realize(a), KILN_OK);
    assert_int_equal(kiln_realize(b), KILN_OK);
    kiln_stats before = kiln_context_stats(ctx);
    kiln_tensor *c = kiln_matmul(a, b);
    assert_int_equal(kiln_realize(c), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(after.dispatches - before.dispatches, 1);
    if (cpu_tiles(f) && !fx_gpu_tuned(ctx))
        assert_int_equal(after.items - before.items, n / 64);
    fx_check_f32(c, want, n, 0, 0);
}

/* A batch of (32 x 8) @ (8 x 512) products gets a plain matmul's 8 x 8 register tile: one
 * kernel, an item per 64 outputs (the right operand's loads were not seen as shared along
 * rows before: its batch term changes at the last row of every matrix). Also with two batch
 * dims, and with the left operand transposed (the matrices' rows then are no flat index). */
static void test_batched_register_tile(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { B = 8, M = 32, K = 8, N = 512 };
    float *a = values(B * M * K, 3), *b = values(B * K * N, 4),
          *want = malloc(sizeof(float) * B * M * N);
    assert_non_null(want);
    host_batched(a, b, B, M, K, N, want);
    for (int how = 0; how < 3; how++) {
        kiln_scope_begin(ctx);
        kiln_tensor *ta = viewed(ctx, a, B, M, K, how == 2 ? 1 : 0);
        kiln_tensor *tb = fx_f32(ctx, 3, (const int64_t[]){B, K, N}, b);
        if (how == 1) { /* batch (2, 4) */
            ta = kiln_reshape(ta, 4, (const int64_t[]){2, 4, M, K});
            tb = kiln_reshape(tb, 4, (const int64_t[]){2, 4, K, N});
        }
        check_tiled(f, ta, tb, want, (size_t)B * M * N);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    free(a);
    free(b);
    free(want);
}

/* Broadcast batches: a right operand expanded along the batch (stride 0) and one with no batch
 * dims, under a transposed left operand (so that the batch cannot fold into the rows), and a
 * left operand with no batch dims (or expanded) against a batched right one; each the
 * register-tiled kernel of a plain matmul. */
static void test_batched_broadcast(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { B = 8, M = 32, K = 8, N = 512 };
    float *a3 = values(B * M * K, 5), *w2 = values(K * N, 6), *a2 = values(M * K, 7),
          *w3 = values(B * K * N, 8);
    float *w2rep = malloc(sizeof(float) * B * K * N), *a2rep = malloc(sizeof(float) * B * M * K),
          *want = malloc(sizeof(float) * B * M * N);
    assert_true(w2rep && a2rep && want);
    for (size_t b = 0; b < B; b++) { /* the broadcast operands, repeated for the host */
        memcpy(w2rep + b * K * N, w2, sizeof(float) * K * N);
        memcpy(a2rep + b * M * K, a2, sizeof(float) * M * K);
    }
    host_batched(a3, w2rep, B, M, K, N, want);
    for (int how = 0; how < 2; how++) {
        kiln_scope_begin(ctx);
        kiln_tensor *tw = fx_f32(ctx, 2, (const int64_t[]){K, N}, w2);
        if (how == 0)
            tw = kiln_expand(kiln_unsqueeze(tw, 0), 3, (const int64_t[]){B, K, N});
        check_tiled(f, viewed(ctx, a3, B, M, K, 1), tw, want, (size_t)B * M * N);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    host_batched(a2rep, w3, B, M, K, N, want);
    for (int how = 0; how < 2; how++) {
        kiln_scope_begin(ctx);
        kiln_tensor *ta = fx_f32(ctx, 2, (const int64_t[]){M, K}, a2);
        if (how == 0)
            ta = kiln_expand(kiln_unsqueeze(ta, 0), 3, (const int64_t[]){B, M, K});
        check_tiled(f, ta, fx_f32(ctx, 3, (const int64_t[]){B, K, N}, w3), want, (size_t)B * M * N);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    free(a3);
    free(w2);
    free(a2);
    free(w3);
    free(w2rep);
    free(a2rep);
    free(want);
}

/* (batch, 16, 8) @ (batch, 8, 48) for batch bound to each of values, a Variable over 1 .. 64,
 * against the host. With once, the values compile what the first compiles (one tiled matmul
 * kernel serves every value: its tile is chosen for the largest batch, its items are the bound
 * batch's tiles). The operands are arange(batch * rows * cols), materialised (kiln_contiguous)
 * so that the product loads them: exact integers while the batch is at most 6 (every sum
 * below 2^24), rounded past it. */
static void symbolic_batch(const eng_fixture *f, kiln_context *ctx, const int64_t *values,
                           size_t count, bool once, uint64_t *guard_failures) {
    enum { M = 16, K = 8, N = 48, MAX = 16 };
    const kiln_expr *var = kiln_variable(ctx, "mm_batch", 1, 64);
    assert_non_null(var);
    float *a = malloc(sizeof(float) * MAX * M * K), *b = malloc(sizeof(float) * MAX * K * N),
          *want = malloc(sizeof(float) * MAX * M * N);
    assert_true(a && b && want);
    for (size_t i = 0; i < (size_t)MAX * M * K; i++)
        a[i] = (float)i;
    for (size_t i = 0; i < (size_t)MAX * K * N; i++)
        b[i] = (float)i;
    for (size_t v = 0; v < count; v++) {
        int64_t batch = values[v];
        assert_true(batch <= MAX);
        kiln_scope_begin(ctx);
        const kiln_expr *bound = kiln_bind(ctx, var, batch);
        const kiln_expr *m = kiln_int(ctx, M), *k = kiln_int(ctx, K), *n = kiln_int(ctx, N);
        kiln_tensor *ta = kiln_contiguous(kiln_reshape_sym(
            kiln_arange_sym(ctx, KILN_F32, kiln_expr_mul(ctx, bound, kiln_int(ctx, M * K))), 3,
            (const kiln_expr *[]){bound, m, k}));
        kiln_tensor *tb = kiln_contiguous(kiln_reshape_sym(
            kiln_arange_sym(ctx, KILN_F32, kiln_expr_mul(ctx, bound, kiln_int(ctx, K * N))), 3,
            (const kiln_expr *[]){bound, k, n}));
        assert_int_equal(kiln_realize(ta), KILN_OK);
        assert_int_equal(kiln_realize(tb), KILN_OK);
        kiln_stats before = kiln_context_stats(ctx);
        kiln_tensor *c = kiln_matmul(ta, tb);
        assert_int_equal(kiln_realize(c), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        guard_failures[v] = after.guard_failures - before.guard_failures;
        if (once) {
            assert_int_equal(after.kernels_compiled - before.kernels_compiled, v == 0);
            if (v == 0 && cpu_tiles(f) && !fx_gpu_tuned(ctx))
                assert_int_equal(after.kernels_tiled - before.kernels_tiled, 1);
        }
        assert_int_equal(after.dispatches - before.dispatches, 1);
        /* tiles where the device's tuning has them (a GPU's one output per invocation: none) */
        if (cpu_tiles(f) && !fx_gpu_tuned(ctx))
            assert_true(after.items - before.items < (uint64_t)(batch * M * N));
        else
            assert_true(after.items - before.items <= (uint64_t)(batch * M * N));
        host_batched(a, b, (size_t)batch, M, K, N, want);
        fx_check_f32(c, want, (size_t)(batch * M * N), 0, batch <= 6 ? 0 : 1e-6);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    free(a);
    free(b);
    free(want);
}

/* A symbolic batch (issue 25: training with a varying batch): one kernel for batch 1 .. 6. */
static void test_batched_symbolic_batch(void **state) {
    eng_fixture *f = *state;
    static const int64_t values[] = {1, 2, 3, 4, 5, 6};
    uint64_t failures[6];
    symbolic_batch(f, f->ctx, values, 6, true, failures);
}

/* The same with kernels specialised on symbolic sizes (eng_testing.force_specialization): a
 * variant without bounds checks only where the bound batch's items (its tiles, not its
 * outputs) fill whole workgroups. On a CPU, 48 tiles of 4 x 4 per matrix: batch 16 has 768
 * items, three workgroups of 256, and its variant's guard fails for batch 1 (48 items, though
 * its 768 outputs fill three workgroups), which compiles the checked variant. Every product
 * is right on both backends. */
static void test_batched_symbolic_batch_specialised(void **state) {
    const eng_fixture *f = *state;
    kiln_context_options opt = {.device = f->device ? NULL : "interp", .validation = f->device};
    kiln_context *ctx = NULL;
    assert_int_equal(
        eng_testing_context_create(&opt, &(eng_testing){.force_specialization = true}, &ctx),
        KILN_OK);
    static const int64_t values[] = {16, 1, 3, 16, 6};
    uint64_t failures[5];
    symbolic_batch(f, ctx, values, 5, false, failures);
    if (f->device && cpu_tiles(f) && !fx_gpu_tuned(ctx)) /* the interpreter never specialises */
        assert_true(failures[1] >= 1);
    assert_int_equal(kiln_context_status(ctx), KILN_OK);
    eng_fixture_context_destroy(ctx);
}

/* The weight gradient's pattern, sum_b(a_b^T @ g_b): the sum over a batched product's batch
 * axis (the flat product a^T @ g of the stacked rows), as built and with the batched product
 * materialised first (kiln_contiguous), both exact. */
static void test_batched_sum_over_the_batch(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { B = 6, M = 12, K = 16, N = 40 };
    float *a = values(B * M * K, 9), *g = values(B * M * N, 10),
          *want = malloc(sizeof(float) * K * N);
    assert_non_null(want);
    for (size_t i = 0; i < K; i++) {
        for (size_t j = 0; j < N; j++) {
            float acc = 0;
            for (size_t r = 0; r < (size_t)B * M; r++)
                acc += a[r * K + i] * g[r * N + j];
            want[i * N + j] = acc;
        }
    }
    for (int materialise = 0; materialise < 2; materialise++) {
        kiln_scope_begin(ctx);
        kiln_tensor *ta = fx_f32(ctx, 3, (const int64_t[]){B, M, K}, a);
        kiln_tensor *tg = fx_f32(ctx, 3, (const int64_t[]){B, M, N}, g);
        kiln_tensor *prod = kiln_matmul(kiln_transpose(ta, 1, 2), tg);
        if (materialise)
            prod = kiln_contiguous(prod);
        kiln_tensor *sum = kiln_sum(prod, 1, (const int32_t[]){0}, false);
        fx_assert_shape(sum, 2, (const int64_t[]){K, N});
        fx_check_f32(sum, want, (size_t)K * N, 0, 0);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    free(a);
    free(g);
    free(want);
}

/* A convolution's products for a symbolic batch (issue 25: the training step's batch
 * Variable): rows batch x 196 (the output pixels of a batch of 14 x 14 images), the forward
 * (rows, 16) @ (16, 32) register-tiled (blocks of 4 rows: 196 is a multiple of 4 for every
 * batch, so the tile never straddles the end), and the weight gradient's pattern
 * a^T @ g summed over the rows (a long symbolic reduction split into strips, its index
 * arithmetic free of divisions by the symbolic row count: shape/index.c
 * shape_tracker_coords). One kernel set for batch 64, 5 and 1, and the same products for a constant
 * 64 x 196 rows (the strips keep the kept dims apart there too); every value exact. */
static void test_batched_symbolic_rows(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = f->ctx;
    enum { R = 196, K = 16, N = 32, MAX = 64 };
    const kiln_expr *var = kiln_variable(ctx, "conv_batch", 1, MAX);
    assert_non_null(var);
    float *a = values((size_t)MAX * R * K, 11), *g = values((size_t)MAX * R * N, 12),
          *w = values(K * N, 13), *want = malloc(sizeof(float) * MAX * R * N);
    assert_non_null(want);
    static const int64_t batches[] = {64, 5, 1, 64};
    for (size_t v = 0; v < 4; v++) { /* the last: rows a constant 64 x 196 */
        int64_t batch = batches[v], rows = batch * R;
        kiln_scope_begin(ctx);
        const kiln_expr *bound = v == 3 ? kiln_int(ctx, batch) : kiln_bind(ctx, var, batch);
        const kiln_expr *sym_rows = kiln_expr_mul(ctx, bound, kiln_int(ctx, R));
        kiln_tensor *ta = kiln_reshape_sym(fx_f32(ctx, 1, (const int64_t[]){rows * K}, a), 2,
                                           (const kiln_expr *[]){sym_rows, kiln_int(ctx, K)});
        kiln_tensor *tg = kiln_reshape_sym(fx_f32(ctx, 1, (const int64_t[]){rows * N}, g), 2,
                                           (const kiln_expr *[]){sym_rows, kiln_int(ctx, N)});
        kiln_tensor *tw = fx_f32(ctx, 2, (const int64_t[]){K, N}, w);
        assert_int_equal(kiln_realize(ta), KILN_OK);
        assert_int_equal(kiln_realize(tg), KILN_OK);
        assert_int_equal(kiln_realize(tw), KILN_OK);

        kiln_stats before = kiln_context_stats(ctx);
        kiln_tensor *c = kiln_matmul(ta, tw);
        assert_int_equal(kiln_realize(c), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        assert_int_equal(after.dispatches - before.dispatches, 1);
        assert_int_equal(after.kernels_compiled - before.kernels_compiled, v == 0 || v == 3);
        if (cpu_tiles(f) && !fx_gpu_tuned(ctx))
            assert_true(after.items - before.items <= (uint64_t)(rows * N / 16));
        host_batched(a, w, 1, (size_t)rows, K, N, want);
        fx_check_f32(c, want, (size_t)(rows * N), 0, 0);

        before = kiln_context_stats(ctx);
        kiln_tensor *dw = kiln_matmul(kiln_transpose(ta, 0, 1), tg);
        fx_assert_shape(dw, 2, (const int64_t[]){K, N});
        assert_int_equal(kiln_realize(dw), KILN_OK);
        after = kiln_context_stats(ctx);
        if (v == 1 || v == 2)
            assert_int_equal(after.kernels_compiled - before.kernels_compiled, 0);
        for (size_t i = 0; i < K; i++) {
            for (size_t j = 0; j < N; j++) {
                float acc = 0;
                for (size_t r = 0; r < (size_t)rows; r++)
                    acc += a[r * K + i] * g[r * N + j];
                want[i * N + j] = acc;
            }
        }
        fx_check_f32(dw, want, (size_t)K * N, 0, 0);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
    free(a);
    free(g);
    free(w);
    free(want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_batched_shapes_and_views),
        ENG_TEST(test_batched_register_tile),
        ENG_TEST(test_batched_broadcast),
        ENG_TEST(test_batched_symbolic_batch),
        ENG_TEST(test_batched_symbolic_batch_specialised),
        ENG_TEST(test_batched_sum_over_the_batch),
        ENG_TEST(test_batched_symbolic_rows),
    };
    return ENG_RUN_BOTH(tests);
}
