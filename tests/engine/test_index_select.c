/* kiln_index_select, a gather (a load whose element along one dim is another tensor's value),
 * on the Vulkan device and on the interpreter: against torch (fixtures/index_select.h, from
 * fixtures/gen_index_select.py) and against values worked out here from views read back; dims
 * 0, 1 and last, i32 and i64 indices, strided/flipped/transposed tables, repeated indices,
 * lazy indices, a symbolic number of indices (one compile), fusion with an elementwise
 * consumer (one kernel), indices out of range (KILN_ERROR_OUT_OF_BOUNDS after the batch, rows
 * of zeros, nothing read outside the table; a later realize works) and the gradient of an
 * embedding lookup (repeated indices accumulate). Every module the device compiles is
 * validated (spvValidate) and the validation layer is on. */

#include "engine_fixture.h"
#include "fixtures/index_select.h"

#include <kiln/kiln.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define ATOL 1e-5
#define RTOL 1e-5

static kiln_tensor *i64_tensor(kiln_context *ctx, int64_t n, const int64_t *data) {
    return kiln_from_data(ctx, KILN_I64, 1, (const int64_t[]){n}, data);
}

static kiln_tensor *table(kiln_context *ctx) {
    return fx_f32(ctx, 2, (const int64_t[]){7, 5}, emb_table);
}

/* Rows of the embedding table, repeated, along dim 0 with an i32 index: torch's output. */
static void test_engine_index_select_dim0_i32_repeated(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *tok = fx_i32(ctx, 1, (const int64_t[]){9}, emb_tokens);
    kiln_tensor *y = kiln_index_select(table(ctx), 0, tok);
    fx_assert_shape(y, 2, (const int64_t[]){9, 5});
    fx_check_f32(y, emb_out, N(emb_out), 0, 0);
}

/* Columns of a transposed matrix (dim 1, a strided read) with an i64 index. */
static void test_engine_index_select_dim1_i64_transposed(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *m = fx_f32(ctx, 2, (const int64_t[]){6, 3}, cols_m);
    int64_t idx[N(cols_index)];
    for (size_t i = 0; i < N(idx); i++)
        idx[i] = cols_index[i];
    kiln_tensor *y = kiln_index_select(kiln_transpose(m, 0, 1), 1, i64_tensor(ctx, N(idx), idx));
    fx_assert_shape(y, 2, (const int64_t[]){3, 4});
    if (!fx_unsupported_i64(y)) /* an i64 index needs shaderInt64 */
        fx_check_f32(y, cols_out, N(cols_out), 0, 0);
}

/* The last dim and a middle dim of a permuted, flipped view (2, 4, 3) of 0..23, against the view
 * read back and gathered here. */
static void test_engine_index_select_last_dim_of_flipped_view(void **state) {
    kiln_context *ctx = fx_ctx(state);
    float data[24];
    for (int i = 0; i < 24; i++)
        data[i] = (float)i;
    kiln_tensor *base = fx_f32(ctx, 3, (const int64_t[]){2, 3, 4}, data);
    kiln_tensor *v = kiln_flip(kiln_permute(base, (const int32_t[]){0, 2, 1}), 2);
    float view[2][4][3];
    fx_read(v, KILN_F32, view, 24);
    const int32_t last[4] = {2, 2, 0, 1}, mid[2] = {3, 0};
    float want_last[2][4][4], want_mid[2][2][3];
    for (int a = 0; a < 2; a++) {
        for (int b = 0; b < 4; b++) {
            for (int c = 0; c < 4; c++)
                want_last[a][b][c] = view[a][b][last[c]];
        }
        for (int b = 0; b < 2; b++) {
            for (int c = 0; c < 3; c++)
                want_mid[a][b][c] = view[a][mid[b]][c];
        }
    }
    kiln_tensor *y = kiln_index_select(v, -1, fx_i32(ctx, 1, (const int64_t[]){4}, last));
    fx_assert_shape(y, 3, (const int64_t[]){2, 4, 4});
    fx_check_f32(y, &want_last[0][0][0], 32, 0, 0);
    y = kiln_index_select(v, 1, fx_i32(ctx, 1, (const int64_t[]){2}, mid));
    fx_assert_shape(y, 3, (const int64_t[]){2, 2, 3});
    fx_check_f32(y, &want_mid[0][0][0], 12, 0, 0);
}

/* The index an expression (an argmax: i64; arange + 1: i32) and the table one too (lazy). */
static void test_engine_index_select_lazy_index(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const float x[3][4] = {{0, 5, 1, 2}, {9, 1, 1, 0}, {0, 1, 2, 7}}; /* argmax: 1, 0, 3 */
    kiln_tensor *am = kiln_argmax(fx_f32(ctx, 2, (const int64_t[]){3, 4}, &x[0][0]), 1, false);
    kiln_tensor *t = kiln_mul_scalar(table(ctx), 2);
    kiln_tensor *y = kiln_index_select(t, 0, am);
    float want[3 * 5];
    const int rows[3] = {1, 0, 3};
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 5; j++)
            want[i * 5 + j] = 2 * emb_table[rows[i] * 5 + j];
    }
    if (!fx_unsupported_i64(y)) /* argmax is i64: shaderInt64 */
        fx_check_f32(y, want, N(want), 0, 0);
    kiln_tensor *next = kiln_add_scalar(kiln_arange(ctx, KILN_I32, 0, 4, 1), 1);
    y = kiln_index_select(table(ctx), 0, next);
    fx_check_f32(y, emb_table + 5, 4 * 5, 0, 0);
}

/* A gather inside reductions: column sums of the looked-up rows (the gather in the reduction's
 * loop) and a softmax along them (row mode: its max and sum read the gather along each row). */
static void test_engine_index_select_in_reductions(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *tok = fx_i32(ctx, 1, (const int64_t[]){9}, emb_tokens);
    kiln_tensor *y = kiln_index_select(table(ctx), 0, tok);
    float sums[5] = {0}, soft[N(emb_out)];
    for (int i = 0; i < 9; i++) {
        float max = emb_out[i * 5], total = 0;
        for (int j = 0; j < 5; j++) {
            sums[j] += emb_out[i * 5 + j];
            max = emb_out[i * 5 + j] > max ? emb_out[i * 5 + j] : max;
        }
        for (int j = 0; j < 5; j++)
            total += (soft[i * 5 + j] = expf(emb_out[i * 5 + j] - max));
        for (int j = 0; j < 5; j++)
            soft[i * 5 + j] /= total;
    }
    fx_check_f32(kiln_sum(y, 1, (const int32_t[]){0}, false), sums, 5, ATOL, RTOL);
    fx_check_f32(kiln_softmax(y, -1), soft, N(soft), ATOL, 1e-4);
}

/* The first n tokens, n a Variable bound to 9 then 4: the second binding compiles nothing. */
static void test_engine_index_select_symbolic_count(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *t = table(ctx);
    kiln_tensor *tok = fx_i32(ctx, 1, (const int64_t[]){9}, emb_tokens);
    const kiln_expr *n = kiln_variable(ctx, "tokens", 1, 9);
    uint64_t compiled = 0;
    for (int64_t count = 9; count >= 4; count -= 5) {
        kiln_scope_begin(ctx);
        const kiln_expr *bn = kiln_bind(ctx, n, count);
        kiln_tensor *idx = kiln_narrow_sym(tok, 0, kiln_int(ctx, 0), bn);
        kiln_tensor *y = kiln_index_select(t, 0, idx);
        fx_assert_shape(y, 2, (const int64_t[]){count, 5});
        fx_check_f32(y, emb_out, (size_t)count * 5, 0, 0);
        if (count == 4)
            assert_int_equal(kiln_context_stats(ctx).kernels_compiled, compiled);
        compiled = kiln_context_stats(ctx).kernels_compiled;
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
}

/* A table of v rows (the first v of 7, v a Variable): the range check is against the view's
 * size, not the storage's: index 5 is out of range for v = 4 (though the storage has row 5)
 * and in range for v = 6, with the same kernel. */
static void test_engine_index_select_symbolic_table(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *t = table(ctx);
    const int32_t rows[2] = {3, 5};
    kiln_tensor *idx = fx_i32(ctx, 1, (const int64_t[]){2}, rows);
    const kiln_expr *v = kiln_variable(ctx, "vocab", 1, 7);
    float want[2 * 5];
    memcpy(want, emb_table + 15, 5 * sizeof(float));
    memcpy(want + 5, emb_table + 25, 5 * sizeof(float));
    kiln_scope_begin(ctx);
    kiln_tensor *y =
        kiln_index_select(kiln_narrow_sym(t, 0, kiln_int(ctx, 0), kiln_bind(ctx, v, 4)), 0, idx);
    assert_int_equal(kiln_realize(y), KILN_ERROR_OUT_OF_BOUNDS);
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_realize", "index 5", "size 4", NULL);
    memset(want + 5, 0, 5 * sizeof(float));
    fx_check_f32(y, want, N(want), 0, 0);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    uint64_t compiled = kiln_context_stats(ctx).kernels_compiled;
    kiln_scope_begin(ctx);
    y = kiln_index_select(kiln_narrow_sym(t, 0, kiln_int(ctx, 0), kiln_bind(ctx, v, 6)), 0, idx);
    memcpy(want + 5, emb_table + 25, 5 * sizeof(float));
    fx_check_f32(y, want, N(want), 0, 0);
    assert_int_equal(kiln_context_stats(ctx).kernels_compiled, compiled);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
}

/* Token embedding + position embedding: one kernel (the gather is a load of the add's), which
 * binds five buffers (table, tokens, positions, the bounds flag, the output): on a device whose
 * kernels bind fewer (mobile-low: 4) the gather is a kernel of its own before the add's. */
static void test_engine_index_select_fuses_with_add(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *t = table(ctx);
    kiln_tensor *tok = fx_i32(ctx, 1, (const int64_t[]){9}, emb_tokens);
    kiln_tensor *pos = fx_f32(ctx, 2, (const int64_t[]){9, 5}, emb_up);
    kiln_tensor *y = kiln_add(kiln_index_select(t, 0, tok), pos);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(y), KILN_OK);
    assert_int_equal(kiln_context_stats(ctx).dispatches - before.dispatches,
                     fx_kernel_buffers(ctx) >= 5 ? 1 : 2);
    float want[N(emb_out)];
    for (size_t i = 0; i < N(want); i++)
        want[i] = emb_out[i] + emb_up[i];
    fx_check_f32(y, want, N(want), ATOL, RTOL);
}

/* Indices 7 (the size) and -1 (torch refuses negatives too): the realize fails after the batch
 * with KILN_ERROR_OUT_OF_BOUNDS naming the call and the size; the kernel ran and its result is
 * kept, the offending rows zeros (the load is masked: the sanitizer, the interpreter's bounds
 * checks and the validation layer see nothing outside the table). A later realize works. */
static void test_engine_index_select_out_of_range(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *t = table(ctx);
    const int32_t bad[4] = {1, 7, -1, 2};
    kiln_tensor *y = kiln_index_select(t, 0, fx_i32(ctx, 1, (const int64_t[]){4}, bad));
    assert_int_equal(kiln_realize(y), KILN_ERROR_OUT_OF_BOUNDS);
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_realize", "kiln_index_select",
                      "dim of size 7", "result is kept", NULL);
    float want[4 * 5] = {0};
    memcpy(want, emb_table + 5, 5 * sizeof(float));
    memcpy(want + 15, emb_table + 10, 5 * sizeof(float));
    fx_check_f32(y, want, N(want), 0, 0); /* realized: nothing runs again */
    /* an i64 index far beyond i32, through kiln_read (i64 indices: UNSUPPORTED without
     * shaderInt64, before any bounds check) */
    const int64_t huge[2] = {0, (int64_t)1 << 40};
    float got[2 * 5];
    kiln_tensor *z = kiln_index_select(t, 0, i64_tensor(ctx, 2, huge));
    if (!fx_unsupported_i64(z)) {
        assert_int_equal(kiln_read(z, got, sizeof got), KILN_ERROR_OUT_OF_BOUNDS);
        fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_read", "kiln_index_select",
                          "index 2147483647", NULL);
    }
    /* an empty table: every index is out of range, and nothing is loaded (with i32 indices
     * too, which every device gathers with) */
    kiln_tensor *empty = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){0, 5});
    z = kiln_index_select(empty, 0, i64_tensor(ctx, 2, huge));
    if (!fx_unsupported_i64(z)) {
        assert_int_equal(kiln_read(z, got, sizeof got), KILN_ERROR_OUT_OF_BOUNDS);
        fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_read", "size 0", NULL);
    }
    z = kiln_index_select(empty, 0, fx_i32(ctx, 1, (const int64_t[]){2}, (const int32_t[]){0, 3}));
    assert_int_equal(kiln_read(z, got, sizeof got), KILN_ERROR_OUT_OF_BOUNDS);
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_read", "size 0", NULL);
    /* the flag was cleared: a good gather realizes */
    kiln_tensor *tok = fx_i32(ctx, 1, (const int64_t[]){9}, emb_tokens);
    fx_check_f32(kiln_index_select(t, 0, tok), emb_out, N(emb_out), 0, 0);
}

/* A device without shaderInt64 gathers with an i32 index: the range check and the load's
 * index stay 32-bit (nothing in the kernel needs Int64). */
static void test_engine_index_select_i32_without_shader_int64(void **state) {
    eng_fixture *fx = *state;
    eng_testing_set(&(eng_testing){.no_int64 = true});
    kiln_context *ctx = eng_context_new(fx->device);
    eng_testing_set(NULL);
    assert_non_null(ctx);
    kiln_tensor *tok = fx_i32(ctx, 1, (const int64_t[]){9}, emb_tokens);
    kiln_tensor *pos = fx_f32(ctx, 2, (const int64_t[]){9, 5}, emb_up);
    kiln_tensor *y = kiln_add(kiln_index_select(table(ctx), 0, tok), pos);
    float want[N(emb_out)];
    for (size_t i = 0; i < N(want); i++)
        want[i] = emb_out[i] + emb_up[i];
    fx_check_f32(y, want, N(want), ATOL, RTOL);
    const int32_t bad[2] = {0, 9};
    y = kiln_index_select(table(ctx), 0, fx_i32(ctx, 1, (const int64_t[]){2}, bad));
    assert_int_equal(kiln_realize(y), KILN_ERROR_OUT_OF_BOUNDS);
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_BOUNDS, "kiln_realize", "index 9", "size 7", NULL);
    eng_fixture_context_destroy(ctx);
}

/* Bad arguments are refused when the graph is built. */
static void test_engine_index_select_errors(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *t = table(ctx);
    const float f[2] = {0, 1};
    assert_null(kiln_index_select(t, 0, fx_f32(ctx, 1, (const int64_t[]){2}, f)));
    fx_expect_message(ctx, KILN_ERROR_DTYPE_MISMATCH, "kiln_index_select", "i32 or i64", NULL);
    const int32_t two[2][2] = {{0, 1}, {1, 0}};
    assert_null(kiln_index_select(t, 0, fx_i32(ctx, 2, (const int64_t[]){2, 2}, &two[0][0])));
    fx_expect_message(ctx, KILN_ERROR_SHAPE_MISMATCH, "kiln_index_select", "2 dims", NULL);
    assert_null(kiln_index_select(t, 2, fx_i32(ctx, 1, (const int64_t[]){2}, two[0])));
    fx_expect_message(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_index_select", "dim 2", NULL);
}

/* The gradient of sum(embedding(tokens) * up) with respect to the table: torch's embedding
 * backward, repeated tokens accumulating; and of a dim-1 select of a transposed matrix (the
 * gradient reaches the matrix transposed back). */
static void test_engine_index_select_grad_embedding(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *t = table(ctx);
    assert_int_equal(kiln_requires_grad_(t, true), KILN_OK);
    kiln_tensor *tok = fx_i32(ctx, 1, (const int64_t[]){9}, emb_tokens);
    kiln_tensor *up = fx_f32(ctx, 2, (const int64_t[]){9, 5}, emb_up);
    kiln_tensor *loss = kiln_sum(kiln_mul(kiln_index_select(t, 0, tok), up), 0, NULL, false);
    kiln_tensor *g = NULL;
    assert_int_equal(kiln_grad(loss, 1, &t, &g), KILN_OK);
    fx_assert_shape(g, 2, (const int64_t[]){7, 5});
    fx_check_f32(g, emb_grad, N(emb_grad), ATOL, RTOL);

    kiln_tensor *m = fx_f32(ctx, 2, (const int64_t[]){6, 3}, cols_m);
    assert_int_equal(kiln_requires_grad_(m, true), KILN_OK);
    int64_t idx[N(cols_index)];
    for (size_t i = 0; i < N(idx); i++)
        idx[i] = cols_index[i];
    kiln_tensor *y = kiln_index_select(kiln_transpose(m, 0, 1), 1, i64_tensor(ctx, N(idx), idx));
    kiln_tensor *up2 = fx_f32(ctx, 2, (const int64_t[]){3, 4}, cols_up);
    loss = kiln_sum(kiln_mul(y, up2), 0, NULL, false);
    assert_int_equal(kiln_grad(loss, 1, &m, &g), KILN_OK);
    float want[6][3];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 6; j++)
            want[j][i] = cols_grad[i * 6 + j];
    }
    if (!fx_unsupported_i64(g)) /* scattered by an i64 index: shaderInt64 */
        fx_check_f32(g, &want[0][0], 18, ATOL, RTOL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_index_select_dim0_i32_repeated),
        ENG_TEST(test_engine_index_select_dim1_i64_transposed),
        ENG_TEST(test_engine_index_select_last_dim_of_flipped_view),
        ENG_TEST(test_engine_index_select_lazy_index),
        ENG_TEST(test_engine_index_select_in_reductions),
        ENG_TEST(test_engine_index_select_symbolic_count),
        ENG_TEST(test_engine_index_select_symbolic_table),
        ENG_TEST(test_engine_index_select_fuses_with_add),
        ENG_TEST(test_engine_index_select_out_of_range),
        ENG_TEST(test_engine_index_select_i32_without_shader_int64),
        ENG_TEST(test_engine_index_select_errors),
        ENG_TEST(test_engine_index_select_grad_embedding),
    };
    return ENG_RUN_BOTH(tests);
}
