/* Exact kernel counts from kiln_context_stats, on both backends. Each test makes its own
 * context, so the memory cache starts empty whatever ran before (the engine keeps no disk
 * cache of kernels yet; when it does, these contexts must turn it off or use a private
 * folder). */
#include "eng.h"
#include "engine_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct counts {
    uint64_t compiled, cached, dispatches, realizes;
} counts;

static counts delta(const kiln_stats *before, const kiln_stats *after) {
    return (counts){after->kernels_compiled - before->kernels_compiled,
                    after->kernels_cached - before->kernels_cached,
                    after->dispatches - before->dispatches, after->realizes - before->realizes};
}

/* relu(a * b + c).sum(axis=1) for (2, 3) inputs built from data (a realize of nothing else). */
static kiln_tensor *fused_graph(kiln_context *ctx, float scale) {
    const int64_t s[] = {2, 3};
    kiln_tensor *a = fx_f32(ctx, 2, s, (const float[]){1, -2, 3, -4, 5, -6});
    kiln_tensor *b = fx_f32(ctx, 2, s, (const float[]){scale, scale, scale, scale, scale, scale});
    kiln_tensor *c = fx_f32(ctx, 2, s, (const float[]){1, 1, 1, 1, 1, 1});
    return kiln_sum(kiln_relu(kiln_add(kiln_mul(a, b), c)), 1, (const int32_t[]){1}, false);
}

static void test_engine_kernels_fused_reduction_is_one_kernel(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    kiln_tensor *s = fused_graph(ctx, 2);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(s), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    counts d = delta(&before, &after);
    assert_int_equal(d.compiled, 1);
    assert_int_equal(d.dispatches, 1);
    assert_int_equal(d.realizes, 1);
    /* relu(2a + 1) = {3, 0, 7 | 0, 11, 0}: row sums 10 and 11. Reading the realized result runs
     * nothing. */
    fx_check_f32(s, (const float[]){10, 11}, 2, 0, 0);
    kiln_stats read = kiln_context_stats(ctx);
    assert_int_equal(read.dispatches, after.dispatches);
    assert_int_equal(read.kernels_compiled, after.kernels_compiled);
    /* Realizing it again runs nothing at all. */
    assert_int_equal(kiln_realize(s), KILN_OK);
    kiln_stats again = kiln_context_stats(ctx);
    assert_int_equal(again.kernels_compiled, after.kernels_compiled);
    assert_int_equal(again.dispatches, after.dispatches);
    /* The same graph over new data: one dispatch of the cached kernel, nothing compiled.
     * relu(3a + 1) = {4, 0, 10 | 0, 16, 0}. */
    kiln_tensor *s2 = fused_graph(ctx, 3);
    before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(s2), KILN_OK);
    after = kiln_context_stats(ctx);
    d = delta(&before, &after);
    assert_int_equal(d.compiled, 0);
    assert_int_equal(d.cached, 1);
    assert_int_equal(d.dispatches, 1);
    fx_check_f32(s2, (const float[]){14, 16}, 2, 0, 0);
    eng_fixture_context_destroy(ctx);
}

static void test_engine_kernels_mean_and_matmul_are_one_kernel(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    kiln_tensor *a =
        fx_f32(ctx, 2, (const int64_t[]){2, 4}, (const float[]){1, 2, 3, 4, 5, 6, 7, 9});
    kiln_tensor *m = kiln_mean(a, 1, (const int32_t[]){1}, false);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(m), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    counts d = delta(&before, &after);
    assert_int_equal(d.compiled, 1);
    assert_int_equal(d.dispatches, 1);
    fx_check_f32(m, (const float[]){2.5f, 6.75f}, 2, 0, 0);
    /* matmul is a broadcast multiply reduced over k: one kernel. (2, 4) @ (4, 1) of ones = row
     * sums {10, 27}. */
    kiln_tensor *mm = kiln_matmul(a, kiln_ones(ctx, KILN_F32, 2, (const int64_t[]){4, 1}));
    before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(mm), KILN_OK);
    after = kiln_context_stats(ctx);
    d = delta(&before, &after);
    assert_int_equal(d.compiled, 1);
    assert_int_equal(d.dispatches, 1);
    fx_check_f32(mm, (const float[]){10, 27}, 2, 0, 0);
    /* An elementwise chain over views (transpose, flip, expand) is one kernel too. */
    kiln_tensor *v =
        kiln_exp(kiln_add(kiln_flip(kiln_transpose(a, 0, 1), 0),
                          kiln_expand(kiln_scalar(ctx, KILN_F32, 1), 2, (const int64_t[]){4, 2})));
    before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(v), KILN_OK);
    after = kiln_context_stats(ctx);
    assert_int_equal(after.dispatches - before.dispatches, 1);
    eng_fixture_context_destroy(ctx);
}

static void test_engine_kernels_cache_tells_graphs_apart(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    /* Graphs of the same shape that differ only in a constant, a view, an op, a dtype or a
     * reduced axis must not share a compiled kernel: each value below comes from its own. */
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){2, 2}, (const float[]){1, 2, 3, 4});
    fx_check_f32(kiln_add_scalar(x, 1), (const float[]){2, 3, 4, 5}, 4, 0, 0);
    fx_check_f32(kiln_add_scalar(x, 2), (const float[]){3, 4, 5, 6}, 4, 0, 0);
    fx_check_f32(kiln_add_scalar(kiln_flip(x, 1), 2), (const float[]){4, 3, 6, 5}, 4, 0, 0);
    fx_check_f32(kiln_add_scalar(kiln_transpose(x, 0, 1), 2), (const float[]){3, 5, 4, 6}, 4, 0, 0);
    fx_check_f32(kiln_mul_scalar(x, 2), (const float[]){2, 4, 6, 8}, 4, 0, 0);
    fx_check_i32(kiln_add_scalar(kiln_cast(x, KILN_I32), 2), (const int32_t[]){3, 4, 5, 6}, 4);
    fx_check_f32(kiln_sum(x, 1, (const int32_t[]){0}, false), (const float[]){4, 6}, 2, 0, 0);
    fx_check_f32(kiln_sum(x, 1, (const int32_t[]){1}, false), (const float[]){3, 7}, 2, 0, 0);
    fx_check_f32(kiln_prod(x, 1, (const int32_t[]){1}, false), (const float[]){2, 12}, 2, 0, 0);
    fx_check_f32(kiln_max(x, 1, (const int32_t[]){1}, false), (const float[]){2, 4}, 2, 0, 0);
    kiln_tensor *r1 = kiln_rand(ctx, KILN_F32, 1, (const int64_t[]){4}, 1);
    kiln_tensor *r2 = kiln_rand(ctx, KILN_F32, 1, (const int64_t[]){4}, 2);
    float a[4], b[4];
    fx_read(r1, KILN_F32, a, 4);
    fx_read(r2, KILN_F32, b, 4);
    assert_memory_not_equal(a, b, sizeof a);
    /* The same computation on another input of the same shape reuses the kernel. */
    kiln_tensor *y = fx_f32(ctx, 2, (const int64_t[]){2, 2}, (const float[]){5, 6, 7, 8});
    kiln_stats before = kiln_context_stats(ctx);
    fx_check_f32(kiln_add_scalar(kiln_flip(y, 1), 2), (const float[]){8, 7, 10, 9}, 4, 0, 0);
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(after.kernels_compiled - before.kernels_compiled, 0);
    assert_int_equal(after.dispatches - before.dispatches, 1);
    eng_fixture_context_destroy(ctx);
}

/* The names of the context's kernels, newest first, joined by spaces. */
static void program_names(kiln_context *ctx, char *out, size_t cap) {
    size_t len = 0;
    out[0] = '\0';
    for (const eng_program *p = ctx->program_list; p && len < cap; p = p->next)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? " " : "", p->name);
}

/* Kernel names say what they compute: kind, ops in the order they run, output dims with
 * Variables by name; two different kernels of one name get a short hash each after the first. */
static void test_engine_kernels_names_say_what_they_compute(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    float data[32];
    for (int i = 0; i < 32; i++)
        data[i] = (float)i / 32;
    const int64_t s[] = {4, 8};
    kiln_tensor *a = fx_f32(ctx, 2, s, data), *b = fx_f32(ctx, 2, s, data);
    assert_int_equal(kiln_realize(kiln_exp(kiln_add(kiln_mul(a, b), a))), KILN_OK);
    char names[512];
    program_names(ctx, names, sizeof names);
    assert_string_equal(names, "E_mul_add_exp_4x8");
    /* Symbolic sizes by the Variable's name; a reduction's kind and op (its output dims keep
     * the reduced dim as 1). */
    const kiln_expr *batch = kiln_bind(ctx, kiln_variable(ctx, "batch", 1, 16), 3);
    const kiln_expr *shape[2] = {batch, kiln_int(ctx, 8)};
    kiln_tensor *x = kiln_expand_sym(
        kiln_reshape(kiln_sum(a, 1, (const int32_t[]){0}, false), 2, (const int64_t[]){1, 8}), 2,
        shape);
    kiln_tensor *r = kiln_sum(kiln_exp(x), 1, (const int32_t[]){1}, false);
    assert_int_equal(kiln_realize(r), KILN_OK);
    program_names(ctx, names, sizeof names);
    assert_string_equal(names, "R_exp_sum_batch_x_1 R_sum_1x8 E_mul_add_exp_4x8");
    /* Another kernel of a name already taken: the name and a short hash. */
    assert_int_equal(kiln_realize(kiln_exp(kiln_add(kiln_mul(a, b), b))), KILN_OK);
    program_names(ctx, names, sizeof names);
    assert_int_equal(strncmp(names, "E_mul_add_exp_4x8_", 18), 0);
    assert_int_equal(strlen(strtok(names, " ")), 22);
    eng_fixture_context_destroy(ctx);
}

/* x * exp(x) + x - 1: four operations, read through a repeating view (a matmul's operand is
 * broadcast over the other operand's columns). */
static kiln_tensor *four_ops(kiln_tensor *x) {
    kiln_context *ctx = kiln_tensor_context(x);
    return kiln_sub(kiln_add(kiln_mul(x, kiln_exp(x)), x), kiln_scalar(ctx, KILN_F32, 1));
}

static float four_ops_host(float x) {
    return x * expf(x) + x - 1;
}

/* The rule against recomputation (kernel.c): an elementwise node of four or more operations
 * that a reduction reads through a repeating view (a broadcast, overlapping windows) runs as a
 * kernel of its own first, then is loaded; read element for element it stays fused. */
static void test_engine_kernels_recomputed_operand_is_realized_first(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    float xs[8], ws[12];
    for (int i = 0; i < 8; i++)
        xs[i] = (float)(i - 3) / 4;
    for (int i = 0; i < 12; i++)
        ws[i] = (float)(i % 5) - 2;
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){2, 4}, xs);
    kiln_tensor *w = fx_f32(ctx, 2, (const int64_t[]){4, 3}, ws);
    float want[6];
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 3; j++) {
            float acc = 0;
            for (int k = 0; k < 4; k++)
                acc += four_ops_host(xs[i * 4 + k]) * ws[k * 3 + j];
            want[i * 3 + j] = acc;
        }
    }
    /* (2, 4) @ (4, 3): each element of the operand is read by 3 columns: two kernels. */
    kiln_tensor *mm = kiln_matmul(four_ops(x), w);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(mm), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    counts d = delta(&before, &after);
    assert_int_equal(d.compiled, 2);
    assert_int_equal(d.dispatches, 2);
    fx_check_f32(mm, want, 6, 1e-5, 1e-5);
    char names[512];
    program_names(ctx, names, sizeof names);
    assert_string_equal(names, "R_mul_sum_2x1x3 E_exp_mul_add_sub_2x4");
    /* The same operand read once per element (a row sum): one kernel. */
    kiln_tensor *s = kiln_sum(four_ops(x), 1, (const int32_t[]){1}, false);
    before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(s), KILN_OK);
    after = kiln_context_stats(ctx);
    assert_int_equal(after.dispatches - before.dispatches, 1);
    float rows[2] = {0, 0};
    for (int k = 0; k < 8; k++)
        rows[k / 4] += four_ops_host(xs[k]);
    fx_check_f32(s, rows, 2, 1e-5, 1e-5);
    /* Overlapping windows (kiln_unfold, size 3 step 1) summed: each element is read by up to
     * three windows: two kernels. Windows of row 0 over the 4 values: 2 windows. */
    kiln_tensor *win = kiln_sum(kiln_unfold(four_ops(x), 1, 3, 1), 1, (const int32_t[]){2}, false);
    before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(win), KILN_OK);
    after = kiln_context_stats(ctx);
    assert_int_equal(after.dispatches - before.dispatches, 2);
    float wins[4];
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 2; j++) {
            wins[i * 2 + j] = 0;
            for (int k = 0; k < 3; k++)
                wins[i * 2 + j] += four_ops_host(xs[i * 4 + j + k]);
        }
    }
    fx_check_f32(win, wins, 4, 1e-5, 1e-5);
    eng_fixture_context_destroy(ctx);
}

/* v (rows x cols) broadcast over a last dim of 4 and multiplied by 0..3, realized: the
 * dispatches it takes, and its values against host, v's values. */
static void check_broadcast_of_four(kiln_context *ctx, kiln_tensor *v, int64_t rows, int64_t cols,
                                    const float *host, uint64_t dispatches) {
    kiln_tensor *y = kiln_expand(kiln_unsqueeze(v, -1), 3, (const int64_t[]){rows, cols, 4});
    y = kiln_mul(y, kiln_arange(ctx, KILN_F32, 0, 4, 1));
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(y), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(delta(&before, &after).dispatches, dispatches);
    float *want = malloc(sizeof(float) * (size_t)(rows * cols * 4));
    assert_non_null(want);
    for (int64_t i = 0; i < rows * cols; i++)
        for (int k = 0; k < 4; k++)
            want[i * 4 + k] = host[i] * (float)k;
    fx_check_f32(y, want, (size_t)(rows * cols * 4), 1e-5, 1e-5);
    free(want);
}

/* n values in [-1, 1) in eighths, 17 distinct (the recompute tests' input); *host: n more
 * floats for the host's results. Both freed by the caller. */
static float *eighths(size_t n, float **host) {
    float *xs = malloc(sizeof(float) * n);
    *host = malloc(sizeof(float) * n);
    assert_true(xs && *host);
    for (size_t i = 0; i < n; i++)
        xs[i] = (float)((int)(i % 17) - 8) / 8;
    return xs;
}

/* The rule in an elementwise kernel: a node of four or more operations read through a
 * broadcast (each element by 4 outputs) runs first when it has at least the device's
 * parallelism of elements (65,536 here: a GPU's figure, a CPU's is smaller); a small one
 * (8 elements, a broadcast of few values over many) stays fused, costing no dispatch. */
static void test_engine_kernels_recompute_rule_elementwise(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    enum { N = 256 };
    float *host, *xs = eighths(N * N, &host);
    for (int i = 0; i < N * N; i++)
        host[i] = four_ops_host(xs[i]);
    for (int big = 0; big < 2; big++) {
        int64_t rows = big ? N : 2, cols = big ? N : 4;
        kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){rows, cols}, xs);
        check_broadcast_of_four(ctx, four_ops(x), rows, cols, host, big ? 2 : 1);
    }
    free(xs);
    free(host);
    eng_fixture_context_destroy(ctx);
}

/* A node of its own over a view (eng_identity: a fold's, a split reduction's copy) moves
 * elements and computes nothing: it counts no operation toward the rule. Three operations
 * behind two such copies, broadcast over 4 outputs each, stay fused (one dispatch), where
 * counted as five they ran first (two). */
static void test_engine_kernels_identity_copies_are_moves(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    enum { N = 256 };
    float *host, *xs = eighths(N * N, &host);
    for (int i = 0; i < N * N; i++)
        host[i] = xs[i] * expf(xs[i]) + xs[i];
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){N, N}, xs);
    kiln_tensor *moved = eng_identity(eng_identity(kiln_add(kiln_mul(x, kiln_exp(x)), x)));
    assert_int_equal(eng_node_inlined_ops(ENG_BASE(moved), 8), 3);
    check_broadcast_of_four(ctx, moved, N, N, host, 1);
    free(xs);
    free(host);
    eng_fixture_context_destroy(ctx);
}

/* The rule's other half: a node of four or more operations read by two kernels of their own (a
 * reduction and a kiln_contiguous copy, one through a negation it inlines) is realized once
 * and loaded by both when it has at least the device's parallelism of elements (three
 * dispatches); a small one stays inlined in both (two). Its inputs, read by it alone, are not
 * realized. */
static void test_engine_kernels_recompute_rule_several_kernels(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    enum { N = 256 };
    float *xs = malloc(sizeof(float) * N * N), *want = malloc(sizeof(float) * N * N);
    assert_true(xs && want);
    for (int i = 0; i < N * N; i++)
        xs[i] = (float)(i % 13 - 6) / 8;
    for (int big = 0; big < 2; big++) {
        int64_t rows = big ? N : 2, cols = big ? N : 4;
        kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){rows, cols}, xs);
        kiln_tensor *d = four_ops(x);
        kiln_tensor *copy = kiln_contiguous(kiln_transpose(kiln_neg(d), 0, 1));
        kiln_tensor *sum = kiln_sum(d, 1, (const int32_t[]){0}, false);
        kiln_stats before = kiln_context_stats(ctx);
        assert_int_equal(kiln_realize_many(ctx, 2, (kiln_tensor *const[]){copy, sum}), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        assert_int_equal(delta(&before, &after).dispatches, big ? 3 : 2);
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                want[j * rows + i] = -four_ops_host(xs[i * cols + j]);
        fx_check_f32(copy, want, (size_t)(rows * cols), 1e-5, 1e-5);
        for (int64_t j = 0; j < cols; j++) {
            float acc = 0;
            for (int64_t i = 0; i < rows; i++)
                acc += four_ops_host(xs[i * cols + j]);
            want[j] = acc;
        }
        fx_check_f32(sum, want, (size_t)cols, 1e-4, 1e-5);
    }
    free(xs);
    free(want);
    eng_fixture_context_destroy(ctx);
}

/* A cheap operand (a scale, a relu, both: two operations) stays fused into the matmul that
 * broadcasts it, and so does a kiln_contiguous boundary's reader (the boundary is its own
 * kernel either way). */
static void test_engine_kernels_cheap_operand_stays_fused(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    kiln_tensor *x =
        fx_f32(ctx, 2, (const int64_t[]){2, 4}, (const float[]){1, -2, 3, -4, 5, -6, 7, -8});
    kiln_tensor *w = kiln_ones(ctx, KILN_F32, 2, (const int64_t[]){4, 3});
    kiln_tensor *scaled = kiln_mul(x, kiln_scalar(ctx, KILN_F32, 0.5));
    kiln_tensor *mm = kiln_matmul(kiln_relu(scaled), w);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(mm), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    counts d = delta(&before, &after);
    assert_int_equal(d.compiled, 1);
    assert_int_equal(d.dispatches, 1);
    /* relu(x / 2) row sums: {0.5 + 1.5, 2.5 + 3.5} in every column. */
    fx_check_f32(mm, (const float[]){2, 2, 2, 6, 6, 6}, 6, 0, 0);
    eng_fixture_context_destroy(ctx);
}

/* The rule decides on sizes' ranges, never on bound values: a symbolic batch compiles its two
 * kernels once, and a second binding only dispatches them. */
static void test_engine_kernels_recompute_rule_symbolic_compiles_once(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    const float xs[4] = {-0.5f, 0.25f, 0.5f, 1};
    kiln_tensor *row = fx_f32(ctx, 2, (const int64_t[]){1, 4}, xs);
    kiln_tensor *w = kiln_ones(ctx, KILN_F32, 2, (const int64_t[]){4, 3});
    float sum = 0;
    for (int k = 0; k < 4; k++)
        sum += four_ops_host(xs[k]);
    const kiln_expr *var = kiln_variable(ctx, "batch", 1, 16);
    for (int64_t n = 3; n <= 5; n += 2) {
        const kiln_expr *shape[2] = {kiln_bind(ctx, var, n), kiln_int(ctx, 4)};
        kiln_tensor *mm = kiln_matmul(four_ops(kiln_expand_sym(row, 2, shape)), w);
        kiln_stats before = kiln_context_stats(ctx);
        assert_int_equal(kiln_realize(mm), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        counts d = delta(&before, &after);
        assert_int_equal(d.compiled, n == 3 ? 2 : 0);
        assert_int_equal(d.dispatches, 2);
        float want[15];
        for (int i = 0; i < 3 * n; i++)
            want[i] = sum;
        fx_check_f32(mm, want, (size_t)(3 * n), 1e-5, 1e-5);
    }
    eng_fixture_context_destroy(ctx);
}

typedef struct progress_log {
    int reports;
    char last[256];
} progress_log;

static void on_log(void *user, kiln_log_level level, const char *module, const char *msg) {
    progress_log *log = user;
    (void)module;
    if (strncmp(msg, "compiling kernels: ", 19) != 0)
        return;
    assert_int_equal(level, KILN_LOG_INFO);
    log->reports++;
    snprintf(log->last, sizeof log->last, "%s", msg);
}

/* A bias's gradient (a (4, 1, 1) bias broadcast over (3, 4, 8, 8)) sums each image's rows, 64
 * contiguous elements, first (a kernel whose output is (3, 4, 1, 1)), then the images; the sum
 * is exact (multiples of 1/4). */
static void test_engine_kernels_bias_gradient_sums_rows_first(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    float rs[3 * 4 * 64], want[4] = {0};
    for (int i = 0; i < 3 * 4 * 64; i++) {
        rs[i] = (float)(i % 9 - 4) / 4;
        want[(i / 64) % 4] += rs[i];
    }
    kiln_tensor *x = kiln_zeros(ctx, KILN_F32, 4, (const int64_t[]){3, 4, 8, 8});
    kiln_tensor *r = fx_f32(ctx, 4, (const int64_t[]){3, 4, 8, 8}, rs);
    kiln_tensor *b = kiln_zeros(ctx, KILN_F32, 3, (const int64_t[]){4, 1, 1});
    assert_int_equal(kiln_requires_grad_(b, true), KILN_OK);
    kiln_tensor *loss = kiln_sum(kiln_mul(kiln_add(x, b), r), 0, NULL, false);
    kiln_tensor *db = NULL;
    assert_int_equal(kiln_grad(loss, 1, &b, &db), KILN_OK);
    fx_check_f32(db, want, 4, 0, 0);
    char names[512];
    program_names(ctx, names, sizeof names);
    assert_non_null(strstr(names, "_3x4x1x1"));
    eng_fixture_context_destroy(ctx);
}

/* The float additions of a kernel's code. */
static uint32_t float_adds(const eng_program *p) {
    uint32_t n = 0;
    for (size_t i = 0; i < p->ir.insts.len; i++)
        n += p->ir.insts.data[i].op == IR_ADD && p->ir.insts.data[i].type == IR_F32;
    return n;
}

/* Windows that do not overlap (a 2 x 2 max pool with stride 2) give their gradient back by
 * movement alone (autograd.c unfold_grad_disjoint): the kernel writing d/dx adds nothing,
 * where overlapping windows (stride 1) sum each element's window positions. */
static void test_engine_kernels_disjoint_windows_gradient_adds_nothing(void **state) {
    eng_fixture *f = *state;
    for (int64_t stride = 2; stride >= 1; stride--) {
        kiln_context *ctx = eng_context_new(f->device);
        assert_non_null(ctx);
        const int64_t shape[4] = {2, 3, 8, 8};
        kiln_tensor *x = kiln_rand(ctx, KILN_F32, 4, shape, 7);
        assert_int_equal(kiln_requires_grad_(x, true), KILN_OK);
        kiln_tensor *y = kiln_max_pool2d(x, 2, stride, 0);
        kiln_tensor *dx = NULL;
        assert_int_equal(kiln_grad(kiln_sum(y, 0, NULL, false), 1, &x, &dx), KILN_OK);
        assert_int_equal(kiln_realize(dx), KILN_OK);
        const eng_program *grad = NULL;
        for (const eng_program *p = ctx->program_list; p; p = p->next) {
            if (p->name[0] == 'E' && strstr(p->name, "_2x3x8x8"))
                grad = p;
        }
        assert_non_null(grad);
        if (stride == 2)
            assert_int_equal(float_adds(grad), 0);
        else
            assert_true(float_adds(grad) > 0);
        eng_fixture_context_destroy(ctx);
    }
}

/* The first program ctx compiled whose name holds `part` (NULL: none). */
static const eng_program *program_named(const kiln_context *ctx, const char *part) {
    for (const eng_program *p = ctx->program_list; p; p = p->next) {
        if (strstr(p->name, part))
            return p;
    }
    return NULL;
}

/* A max pool's forward is one max reduction (nn.c eng_max_first): the first maximum's index,
 * an arg reduction, is made by the backward only. Before: an argmax and a one-hot sum, two
 * kernels, also for a forward that is never differentiated. */
static void test_engine_kernels_max_pool_forward_is_one_max(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    kiln_tensor *x = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){2, 3, 8, 8}, 7);
    assert_int_equal(kiln_realize(x), KILN_OK);
    kiln_stats before = kiln_context_stats(ctx);
    kiln_tensor *y = kiln_max_pool2d(x, 2, 2, 0);
    assert_int_equal(kiln_realize(y), KILN_OK);
    assert_int_equal(kiln_context_stats(ctx).dispatches - before.dispatches, 1);
    assert_null(program_named(ctx, "argmax"));
    assert_int_equal(kiln_requires_grad_(x, true), KILN_OK);
    kiln_tensor *dx = NULL;
    assert_int_equal(kiln_grad(kiln_sum(kiln_max_pool2d(x, 2, 2, 0), 0, NULL, false), 1, &x, &dx),
                     KILN_OK);
    assert_int_equal(kiln_realize(dx), KILN_OK);
    assert_non_null(program_named(ctx, "argmax"));
    eng_fixture_context_destroy(ctx);
}

/* The pooled values and dx of sum(max_pool2d(x) * c) for x (2, 3, 8, 8) read through a
 * transpose of its last two dims, its values i % 5 (ties in most windows: the first maximum
 * of each window, row-major, takes the gradient, as torch's does); symbolic: x's batch a
 * Variable bound to 2 (x narrowed from 4 images). */
static void realize_pool_and_gradient(kiln_context *ctx, bool together, bool symbolic, float *y_out,
                                      float *dx_out) {
    float xs[2 * 3 * 8 * 8], cs[2 * 3 * 4 * 4];
    for (int i = 0; i < 2 * 3 * 8 * 8; i++)
        xs[i] = (float)(i % 5);
    for (int i = 0; i < 2 * 3 * 4 * 4; i++)
        cs[i] = (float)(i % 7) - 3;
    float more_x[4 * 3 * 8 * 8] = {0}, more_c[4 * 3 * 4 * 4] = {0};
    memcpy(more_x, xs, sizeof xs);
    memcpy(more_c, cs, sizeof cs);
    const int64_t images = symbolic ? 4 : 2;
    kiln_tensor *base =
        kiln_from_data(ctx, KILN_F32, 4, (const int64_t[]){images, 3, 8, 8}, more_x);
    kiln_tensor *c = kiln_from_data(ctx, KILN_F32, 4, (const int64_t[]){images, 3, 4, 4}, more_c);
    if (symbolic) {
        const kiln_expr *n = kiln_bind(ctx, kiln_variable(ctx, "images", 1, 4), 2);
        base = kiln_narrow_sym(base, 0, kiln_int(ctx, 0), n);
        c = kiln_narrow_sym(c, 0, kiln_int(ctx, 0), n);
    }
    assert_int_equal(kiln_requires_grad_(base, true), KILN_OK);
    kiln_tensor *x = kiln_transpose(base, 2, 3);
    kiln_tensor *y = kiln_max_pool2d(x, 2, 2, 0), *dx = NULL;
    assert_int_equal(kiln_grad(kiln_sum(kiln_mul(y, c), 0, NULL, false), 1, &base, &dx), KILN_OK);
    if (together) {
        assert_int_equal(kiln_realize_many(ctx, 2, (kiln_tensor *[]){y, dx}), KILN_OK);
    } else {
        assert_int_equal(kiln_realize(y), KILN_OK);
        assert_int_equal(kiln_realize(dx), KILN_OK);
    }
    assert_int_equal(kiln_read(y, y_out, 2 * 3 * 4 * 4 * sizeof *y_out), KILN_OK);
    assert_int_equal(kiln_read(dx, dx_out, 2 * 3 * 8 * 8 * sizeof *dx_out), KILN_OK);
    for (int nc = 0; nc < 6; nc++) /* the host's: x[nc][i][j] = xs[nc][j][i] */
        for (int oi = 0; oi < 4; oi++)
            for (int oj = 0; oj < 4; oj++) {
                int first = -1;
                float best = 0;
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 2; b++) {
                        int i = 2 * oi + a, j = 2 * oj + b, at = nc * 64 + j * 8 + i;
                        if (first < 0 || xs[at] > best) {
                            first = at;
                            best = xs[at];
                        }
                    }
                int o = (nc * 4 + oi) * 4 + oj;
                assert_float_equal(y_out[o], best, 0);
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 2; b++) {
                        int at = nc * 64 + (2 * oj + b) * 8 + 2 * oi + a;
                        assert_float_equal(dx_out[at], at == first ? cs[o] : 0, 0);
                    }
            }
}

/* In training a max pool's forward maximum and its backward's first-maximum index read the
 * same windows: realized together, one kernel computes both (kernel.c add_siblings: a sibling
 * output), one kernel fewer than realizing them apart, with the same values; so too over a
 * symbolic batch. */
static void test_engine_kernels_max_pool_maximum_and_index_in_one_kernel(void **state) {
    eng_fixture *f = *state;
    for (int symbolic = 0; symbolic < 2; symbolic++) {
        float y[2][2 * 3 * 4 * 4], dx[2][2 * 3 * 8 * 8];
        uint64_t dispatches[2];
        for (int together = 0; together < 2; together++) {
            kiln_context *ctx = eng_context_new(f->device);
            assert_non_null(ctx);
            kiln_stats before = kiln_context_stats(ctx);
            realize_pool_and_gradient(ctx, together, symbolic, y[together], dx[together]);
            dispatches[together] = kiln_context_stats(ctx).dispatches - before.dispatches;
            eng_fixture_context_destroy(ctx);
        }
        assert_int_equal(dispatches[1] + 1, dispatches[0]);
        assert_memory_equal(y[0], y[1], sizeof y[0]);
        assert_memory_equal(dx[0], dx[1], sizeof dx[0]);
    }
}

/* How many LOAD2s (pairs) the programs whose names start with prefix hold in all. */
static int pairs_in(const kiln_context *ctx, const char *prefix) {
    int pairs = 0;
    for (const eng_program *p = ctx->program_list; p; p = p->next) {
        for (uint32_t i = 0; strncmp(p->name, prefix, strlen(prefix)) == 0 && i < p->ir.insts.len;
             i++)
            pairs += p->ir.insts.data[i].op == IR_LOAD2 || p->ir.insts.data[i].op == IR_LOAD2R;
    }
    return pairs;
}

/* A 2 x 2 max pool over a symbolic batch (2 of at most 64) of S x S images (32, 28, 14),
 * stored as they are read: the forward's maximum and first-maximum index combine a window's
 * four elements in one step, in order, a window row read as a pair (lower.c stage_unroll,
 * lower_step_pair); on a CPU the outputs tile along the pooled rows, each with its own index,
 * in tiles of at most 8 (16 columns: 8; 14 and 7: 7; lower.c eng_kernel_tile); the backward,
 * tiled along rows on a CPU, reads each pooled gradient and index once for the two outputs
 * beside each other that take them, as pairs (lower_row_pair). Ties included (the first
 * maximum takes the gradient); values against the host. */
static void test_engine_kernels_max_pool_reads_pairs(void **state) {
    eng_fixture *f = *state;
    enum { N = 2, C = 3, SMAX = 32, PMAX = SMAX / 2 };
    static float xs[N * C * SMAX * SMAX], cs[N * C * PMAX * PMAX], y[N * C * PMAX * PMAX],
        dx[N * C * SMAX * SMAX];
    const int sizes[3] = {32, 28, 14}, tiles[3] = {8, 7, 7};
    for (int s = 0; s < 3; s++) {
        const int S = sizes[s], P = S / 2;
        kiln_context *ctx = eng_context_new(f->device);
        assert_non_null(ctx);
        for (int i = 0; i < N * C * S * S; i++)
            xs[i] = (float)(i * 7 % 5);
        for (int i = 0; i < N * C * P * P; i++)
            cs[i] = (float)(i % 7) - 3;
        kiln_tensor *x =
            fx_images(fx_f32(ctx, 1, (const int64_t[]){N * C * S * S}, xs), N, 64, C, S, S);
        kiln_tensor *c =
            fx_images(fx_f32(ctx, 1, (const int64_t[]){N * C * P * P}, cs), N, 64, C, P, P);
        assert_int_equal(kiln_requires_grad_(x, true), KILN_OK);
        kiln_tensor *pooled = kiln_max_pool2d(x, 2, 2, 0), *grad = NULL;
        assert_int_equal(kiln_grad(kiln_sum(kiln_mul(pooled, c), 0, NULL, false), 1, &x, &grad),
                         KILN_OK);
        assert_int_equal(kiln_realize_many(ctx, 2, (kiln_tensor *[]){pooled, grad}), KILN_OK);
        assert_int_equal(kiln_read(pooled, y, (size_t)N * C * P * P * sizeof *y), KILN_OK);
        assert_int_equal(kiln_read(grad, dx, (size_t)N * C * S * S * sizeof *dx), KILN_OK);
        for (int nc = 0; nc < N * C; nc++)
            for (int i = 0; i < P; i++)
                for (int j = 0; j < P; j++) {
                    int first = -1;
                    for (int t = 0; t < 4; t++) {
                        int at = (nc * S + 2 * i + t / 2) * S + 2 * j + t % 2;
                        first = first < 0 || xs[at] > xs[first] ? at : first;
                    }
                    assert_true(y[(nc * P + i) * P + j] == xs[first]);
                    for (int t = 0; t < 4; t++) {
                        int at = (nc * S + 2 * i + t / 2) * S + 2 * j + t % 2;
                        assert_true(dx[at] == (at == first ? cs[(nc * P + i) * P + j] : 0.0f));
                    }
                }
        assert_true(pairs_in(ctx, "R_") > 0);
        const eng_program *arg = program_named(ctx, "argmax");
        assert_non_null(arg);
        if (!fx_gpu_tuned(ctx)) { /* a GPU's elementwise kernels take one output per invocation */
            if (P % 2 == 0)       /* pairs of the pooled row's elements */
                assert_true(pairs_in(ctx, "E_") > 0);
            if (!f->device || strstr(kiln_context_device_name(ctx), "llvmpipe"))
                assert_int_equal(arg->tile_m * arg->tile_n, tiles[s]);
        }
        eng_fixture_context_destroy(ctx);
    }
}

/* Writes to a and b, b's value reading a's new value: realizing b alone dispatches
 * `dispatches` kernels and gives the host's values (a = 2a + 1, then b += 3a, elementwise;
 * flipped: a = a + flip(a), which reads a's old values at other elements). held: a tensor
 * holds 2a (the written value's own 2a, one node), computed before the write. */
static void check_written_twice(bool device, bool flipped, bool held, uint64_t dispatches) {
    kiln_context *ctx = eng_context_new(device);
    assert_non_null(ctx);
    float as[12], bs[12], old2[12], want_a[12], want_b[12];
    for (int i = 0; i < 12; i++) {
        as[i] = (float)i - 5;
        bs[i] = (float)(i % 4);
        old2[i] = 2 * as[i];
        want_a[i] = flipped ? as[i] + as[11 - i] : 2 * as[i] + 1;
        want_b[i] = bs[i] + 3 * want_a[i];
    }
    kiln_tensor *a = fx_f32(ctx, 1, (const int64_t[]){12}, as);
    kiln_tensor *b = fx_f32(ctx, 1, (const int64_t[]){12}, bs);
    kiln_tensor *keep = held ? kiln_mul_scalar(a, 2) : NULL;
    kiln_scope_begin(ctx); /* the values written are no tensors' once it ends */
    kiln_tensor *next =
        flipped ? kiln_add(a, kiln_flip(a, 0)) : kiln_add_scalar(kiln_mul_scalar(a, 2), 1);
    assert_int_equal(kiln_copy_(a, next), KILN_OK);
    assert_int_equal(kiln_add_(b, kiln_mul_scalar(a, 3)), KILN_OK);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(b), KILN_OK);
    uint64_t ran = kiln_context_stats(ctx).dispatches - before.dispatches;
    fx_check_f32(b, want_b, 12, 0, 0);
    fx_check_f32(a, want_a, 12, 0, 0);
    if (keep)
        fx_check_f32(keep, old2, 12, 0, 0);
    assert_int_equal(ran, dispatches);
    eng_fixture_context_destroy(ctx);
}

/* A write whose value reads another write at the element it writes stores both (kernel.c
 * fused_write: Adam's moments and update, one kernel per parameter): one kernel. Not where
 * the other write's value reads its target elsewhere (the kernel would read elements it has
 * overwritten: a copy of that value, then each write); a tensor that reads the old values is
 * realized first, and then the writes are one kernel. */
static void test_engine_kernels_write_reading_a_write_is_one_kernel(void **state) {
    eng_fixture *f = *state;
    check_written_twice(f->device, false, false, 1);
    check_written_twice(f->device, true, false, 3);
    check_written_twice(f->device, false, true, 2);
}

/* How program p accesses buffer: counts of scalar (LOAD, STORE) and vector (LOAD4/8,
 * STORE4/8) accesses, and of the loads among them. */
static void buffer_accesses(const eng_program *p, uint32_t buffer, int *scalar, int *vector,
                            int *loads) {
    *scalar = *vector = *loads = 0;
    for (uint32_t i = 0; i < p->ir.insts.len; i++) {
        const ir_inst *in = &p->ir.insts.data[i];
        bool load = in->op == IR_LOAD || in->op == IR_LOAD4 || in->op == IR_LOAD8;
        bool store = in->op == IR_STORE || in->op == IR_STORE4 || in->op == IR_STORE8;
        if ((!load && !store) || in->arg != buffer)
            continue;
        *scalar += in->op == IR_LOAD || in->op == IR_STORE;
        *vector += in->op != IR_LOAD && in->op != IR_STORE;
        *loads += load;
    }
}

/* An in-place write reads its target at the elements it stores, each before storing it: a
 * tiled kernel (a CPU's) moves them as vectors (lower.c lower_outputs), and the sibling
 * output a fused write stores beside it (kernel.c fused_write: a = 2 a + 1 stored by
 * b += 3 a's kernel) too; on a device that reads texels the target is read through a
 * read-only binding of its storage after the kernel's own (eng_kernel_lower), bound as texels.
 * Values against the host (integers: exact). */
static void test_engine_kernels_in_place_writes_move_vectors(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    enum { N = 1 << 16 }; /* enough items for tiles of 8 on a CPU */
    static float as[N], bs[N], want_a[N], want_b[N];
    for (int i = 0; i < N; i++) {
        as[i] = (float)(i % 13) - 6;
        bs[i] = (float)(i % 5);
        want_a[i] = 2 * as[i] + 1;
        want_b[i] = bs[i] + 3 * want_a[i];
    }
    kiln_tensor *a = fx_f32(ctx, 1, (const int64_t[]){N}, as);
    kiln_tensor *b = fx_f32(ctx, 1, (const int64_t[]){N}, bs);
    assert_int_equal(kiln_realize(a), KILN_OK);
    assert_int_equal(kiln_realize(b), KILN_OK);
    kiln_scope_begin(ctx);
    assert_int_equal(kiln_copy_(a, kiln_add_scalar(kiln_mul_scalar(a, 2), 1)), KILN_OK);
    assert_int_equal(kiln_add_(b, kiln_mul_scalar(a, 3)), KILN_OK);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    assert_int_equal(kiln_realize(b), KILN_OK);
    fx_check_f32(a, want_a, N, 0, 0);
    fx_check_f32(b, want_b, N, 0, 0);
    const eng_program *write = NULL;
    for (const eng_program *p = ctx->program_list; p; p = p->next)
        write = p->name[0] == 'W' ? p : write;
    assert_non_null(write);
    /* b, a beside it, and b's read-only alias where texels are read */
    assert_int_equal(write->ir.buffer_count, ctx->texel_reads ? 3 : 2);
    int scalar[3], vector[3], loads[3];
    for (uint32_t buffer = 0; buffer < write->ir.buffer_count; buffer++)
        buffer_accesses(write, buffer, &scalar[buffer], &vector[buffer], &loads[buffer]);
    if (ctx->texel_reads) {
        assert_int_equal(loads[0], 0);                                  /* b is read through ... */
        assert_true(loads[2] > 0 && loads[2] == scalar[2] + vector[2]); /* ... its alias */
        assert_true(write->texel_bindings >> 2 & 1);
    }
    if (write->per_item >= 4) { /* a CPU's tiles (a GPU's are one output) */
        for (uint32_t buffer = 0; buffer < write->ir.buffer_count; buffer++) {
            if (scalar[buffer] != 0 || vector[buffer] < 1)
                fail_msg("buffer %u: %d scalar and %d vector accesses", buffer, scalar[buffer],
                         vector[buffer]);
        }
    }
    eng_fixture_context_destroy(ctx);
}

/* p += sum(x, 0) / 2 for x (rows, 10) of quarters (exact sums), held by a tensor: the write's
 * kernel stores the sum too (one dispatch; realizing the sum then dispatches nothing), both
 * against the host. symbolic: x narrowed to a Variable bound to rows (of at most rows + 2). */
static void check_write_reading_a_sum(kiln_context *ctx, int rows, bool symbolic) {
    enum { C = 10 };
    int stored = symbolic ? rows + 2 : rows;
    float *xs = calloc((size_t)stored * C, sizeof *xs), ps[C], want_s[C], want_p[C];
    assert_non_null(xs);
    for (int i = 0; i < rows * C; i++)
        xs[i] = (float)(i * 7 % 11) * 0.25f - 1.0f;
    for (int c = 0; c < C; c++) {
        ps[c] = (float)c - 4.5f;
        want_s[c] = 0;
        for (int r = 0; r < rows; r++)
            want_s[c] += xs[r * C + c];
        want_p[c] = ps[c] + 0.5f * want_s[c];
    }
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){stored, C}, xs);
    kiln_tensor *p = fx_f32(ctx, 1, (const int64_t[]){C}, ps);
    assert_int_equal(kiln_realize(x), KILN_OK);
    assert_int_equal(kiln_realize(p), KILN_OK);
    if (symbolic) {
        const kiln_expr *n = kiln_bind(ctx, kiln_variable(ctx, "rows", 1, stored), rows);
        x = kiln_narrow_sym(x, 0, kiln_int(ctx, 0), n);
    }
    kiln_tensor *s = kiln_sum(x, 1, (const int32_t[]){0}, false);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_add_(p, kiln_mul_scalar(s, 0.5)), KILN_OK);
    assert_int_equal(kiln_realize(p), KILN_OK);
    kiln_stats mid = kiln_context_stats(ctx);
    assert_int_equal(mid.dispatches - before.dispatches, 1);
    assert_int_equal(kiln_realize(s), KILN_OK); /* stored by the write's kernel */
    assert_int_equal(kiln_context_stats(ctx).dispatches, mid.dispatches);
    fx_check_f32(s, want_s, C, 0, 0);
    fx_check_f32(p, want_p, C, 0, 0);
    free(xs);
}

/* A write whose value reads a reduction at the element it writes (an optimizer's update of a
 * parameter reading its gradient, a sum over the batch) is one kernel that stores the sum too
 * (kernel.c reduction_beside): the tensor that holds the sum then reads, with no kernel of its
 * own, the values the write used. Over 6 rows, constant and symbolic, and 4096 (a long loop
 * over few outputs), as this device tunes and as a GPU does. A sum that reads the target
 * elsewhere reads its old values. */
/* A context of the fixture's device tuned as this device is, or as a GPU (gpu_tuning). */
static kiln_context *tuned_context(const eng_fixture *f, bool gpu) {
    kiln_context *ctx = NULL;
    kiln_context_options opt = {.device = f->device ? NULL : "interp", .validation = f->device};
    if (gpu)
        assert_int_equal(eng_testing_context_create(&opt, &(eng_testing){.gpu_tuning = true}, &ctx),
                         KILN_OK);
    else
        ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    return ctx;
}

static void test_engine_kernels_write_reading_a_sum_is_one_kernel(void **state) {
    eng_fixture *f = *state;
    for (int tuned = 0; tuned < 2; tuned++) {
        for (int c = 0; c < 3; c++) {
            kiln_context *ctx = tuned_context(f, tuned);
            check_write_reading_a_sum(ctx, c == 2 ? 4096 : 6, c == 1);
            eng_fixture_context_destroy(ctx);
        }
    }
    /* A sum whose loop reads the target at other elements (p flipped, broadcast over R rows,
     * summed over them; a target of many workgroups): NumPy's rule, the value as if computed
     * before the write (p + R flip(p)). */
    enum { R = 6, FC = 4096 };
    float *fp = malloc(sizeof(float) * FC), *want = malloc(sizeof(float) * FC);
    assert_true(fp && want);
    for (int c = 0; c < FC; c++)
        fp[c] = (float)(c % 9) * 0.5f - 2.0f;
    for (int c = 0; c < FC; c++)
        want[c] = fp[c] + (float)R * fp[FC - 1 - c];
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    kiln_tensor *p = fx_f32(ctx, 1, (const int64_t[]){FC}, fp);
    assert_int_equal(kiln_realize(p), KILN_OK);
    kiln_tensor *rows = kiln_expand(kiln_flip(p, 0), 2, (const int64_t[]){R, FC});
    kiln_tensor *s = kiln_sum(rows, 1, (const int32_t[]){0}, false);
    assert_int_equal(kiln_add_(p, s), KILN_OK);
    kiln_release(s); /* held, it would be realized before the write (realize.c) */
    kiln_release(rows);
    fx_check_f32(p, want, FC, 0, 0);
    free(fp);
    free(want);
    eng_fixture_context_destroy(ctx);
}

/* A reduction that another reads at the kernel's own element inside its loop, over the same
 * dims, runs as an earlier stage of that loop and is stored beside it (kernel.c stage_read):
 * a variance and its mean in one kernel; a softmax's max and sum of exponentials in one, also
 * when a loss that reads both asks for the max first (realize.c order_needs). rows x cols,
 * the rows a Variable's bound value where symbolic; against the host. */
static void check_reduction_stages(kiln_context *ctx, int64_t rows, int64_t cols, bool symbolic,
                                   uint64_t loss_kernels) {
    size_t n = (size_t)(rows * cols);
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 7) % 23) * 0.125f - 1.0f;
    kiln_tensor *all = fx_f32(ctx, 2, (const int64_t[]){rows, cols}, x), *t = all;
    if (symbolic) {
        const kiln_expr *v = kiln_variable(ctx, "stage_rows", 1, rows + 8);
        t = kiln_narrow_sym(all, 0, kiln_int(ctx, 0), kiln_bind(ctx, v, rows));
    }
    const int32_t last[1] = {-1};
    /* a variance: its mean's sum computed and stored by the same kernel (the mean, that sum
     * times 1 / cols, is then one elementwise kernel reading it) */
    kiln_tensor *mean = kiln_mean(t, 1, last, true);
    kiln_tensor *centered = kiln_sub(t, mean);
    kiln_tensor *var = kiln_mean(kiln_mul(centered, centered), 1, last, true);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(var), KILN_OK);
    assert_int_equal(kiln_context_stats(ctx).dispatches - before.dispatches, 1);
    /* a loss reading a row's max and its sum of exponentials: their kernel, then the loss's */
    kiln_tensor *m = kiln_max(t, 1, last, true);
    kiln_tensor *se = kiln_sum(kiln_exp(kiln_sub(t, m)), 1, last, true);
    kiln_tensor *lp = kiln_sub(kiln_sub(t, m), kiln_log(se));
    kiln_tensor *loss = kiln_sum(lp, 0, NULL, false);
    before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(loss), KILN_OK);
    kiln_tensor *kept[2] = {m, se};
    assert_int_equal(kiln_realize_many(ctx, 2, kept), KILN_OK);
    assert_int_equal(kiln_context_stats(ctx).dispatches - before.dispatches, 1 + loss_kernels);
    float *got_mean = malloc((size_t)rows * sizeof(float) * 4), *got_var = got_mean + rows,
          *got_m = got_var + rows, *got_se = got_m + rows, got_loss;
    assert_non_null(got_mean);
    fx_read(mean, KILN_F32, got_mean, (size_t)rows);
    fx_read(var, KILN_F32, got_var, (size_t)rows);
    fx_read(m, KILN_F32, got_m, (size_t)rows);
    fx_read(se, KILN_F32, got_se, (size_t)rows);
    fx_read(loss, KILN_F32, &got_loss, 1);
    double want_loss = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * cols;
        double mu = 0, v = 0, mx = row[0], sum = 0;
        for (int64_t c = 0; c < cols; c++) {
            mu += row[c] / (double)cols;
            mx = row[c] > mx ? row[c] : mx;
        }
        for (int64_t c = 0; c < cols; c++) {
            v += (row[c] - mu) * (row[c] - mu) / (double)cols;
            sum += exp(row[c] - mx);
        }
        for (int64_t c = 0; c < cols; c++)
            want_loss += row[c] - mx - log(sum);
        assert_float_equal(got_mean[r], mu, 1e-5);
        assert_float_equal(got_var[r], v, 1e-4);
        assert_float_equal(got_m[r], mx, 0);
        assert_float_equal(got_se[r], sum, (float)(1e-4 * sum));
    }
    assert_float_equal(got_loss, want_loss, (float)(1e-4 * fabs(want_loss)));
    kiln_tensor *handles[] = {mean, centered, var, m, se, lp, loss};
    for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++)
        kiln_release(handles[i]);
    if (t != all)
        kiln_release(t);
    kiln_release(all);
    free(got_mean);
    free(x);
}

static void test_engine_kernels_reduction_stages(void **state) {
    eng_fixture *f = *state;
    for (int tuned = 0; tuned < 2; tuned++) {
        kiln_context *ctx = tuned_context(f, tuned); /* a GPU's long rows: groups of lanes */
        check_reduction_stages(ctx, 64, 10, false, 1);
        check_reduction_stages(ctx, 40, 10, true, 1);
        check_reduction_stages(ctx, 8, 4096, false, 2); /* the loss split in two (ops.c) */
        eng_fixture_context_destroy(ctx);
    }
}

/* A reduction over a symbolic count whose largest value exceeds what one kernel combines
 * (ENG_REDUCE_MAX_COUNT) does not take another as an earlier stage: on lavapipe the two loops
 * would together pass its loop budget where each kernel's alone stays within it. max(x -
 * max(x)) over rows of up to 400,000 elements, bound to 300,000: two kernels, right. */
static void test_engine_kernels_long_symbolic_stages_stay_apart(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { N = 300000 };
    float *x = malloc(sizeof(float) * 2 * N);
    assert_non_null(x);
    for (size_t i = 0; i < 2 * (size_t)N; i++)
        x[i] = (float)((i * 7919) % 1000) * 0.01f;
    kiln_tensor *all = fx_f32(ctx, 2, (const int64_t[]){2, N}, x);
    const kiln_expr *v = kiln_variable(ctx, "long_row", 1, 400000);
    kiln_tensor *t = kiln_narrow_sym(all, 1, kiln_int(ctx, 0), kiln_bind(ctx, v, N));
    const int32_t last[1] = {-1};
    kiln_tensor *m = kiln_max(t, 1, last, true);
    kiln_tensor *spread = kiln_max(kiln_sub(t, kiln_neg(m)), 1, last, true);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(spread), KILN_OK);
    assert_int_equal(kiln_context_stats(ctx).dispatches - before.dispatches, 2);
    float want[2];
    for (int r = 0; r < 2; r++) {
        float mx = x[r * N];
        for (int i = 1; i < N; i++)
            mx = x[r * N + i] > mx ? x[r * N + i] : mx;
        want[r] = mx + mx;
    }
    fx_check_f32(spread, want, 2, 0, 0);
    kiln_release(spread);
    kiln_release(m);
    kiln_release(t);
    kiln_release(all);
    free(x);
}

/* Checks s (count sums) against x's sums of len elements inner apart, the o-th from o * outer. */
static void check_strided_sums(kiln_tensor *s, const float *x, int count, int len, int outer,
                               int inner) {
    float *want = malloc(sizeof(float) * (size_t)count);
    assert_non_null(want);
    for (int o = 0; o < count; o++) {
        double a = 0;
        for (int i = 0; i < len; i++)
            a += x[o * outer + i * inner];
        want[o] = (float)a;
    }
    fx_check_f32(s, want, (size_t)count, 1e-5, 1e-6);
    free(want);
}

/* On a GPU, reductions of many long rows whose loads read along the row run a workgroup of
 * lanes per row (lower.c eng_kernel_group_lanes, group_rows): a row sum of 2,100 rows of
 * 1,024 (more rows than the few-outputs rule's 2,048) and a softmax's max and sum; rows of
 * 512 and of 784 (conv1's weight gradient's pixels: not a multiple of the lanes) in groups
 * narrowed to 32 lanes, 16 elements a lane, where the device's subgroup is no wider; a sum
 * over the first dim of 2,100 columns, whose loop reads elements a row apart, keeps an
 * invocation per output, as do rows of 64 (short even for a subgroup of 8). As a CPU tunes
 * (lavapipe's own), none of them. Values against the host either way. */
static void test_engine_kernels_gpu_rows_take_lane_groups(void **state) {
    eng_fixture *f = *state;
    enum { R = 2100, C = 1024 };
    float *x = malloc(sizeof(float) * R * C), *want = malloc(sizeof(float) * R * C);
    assert_true(x && want);
    for (size_t i = 0; i < (size_t)R * C; i++)
        x[i] = (float)((i * 13) % 29) * 0.125f - 1.5f;
    fx_host_softmax(x, R, C, want);
    for (int tuned = 0; tuned < 2; tuned++) {
        kiln_context *ctx = tuned_context(f, tuned);
        /* a GPU's tuning: the device's own on a GPU, or gpu_tuning */
        uint32_t lanes = ctx->group_rows ? ctx->group_lanes : 0;
        assert_true(!tuned || ctx->group_rows);
        /* rows: (R, C) summed along C */
        kiln_tensor *t = fx_f32(ctx, 2, (const int64_t[]){R, C}, x);
        kiln_tensor *rs = kiln_sum(t, 1, (const int32_t[]){1}, false);
        assert_int_equal(kiln_realize(rs), KILN_OK);
        assert_int_equal(ctx->program_list->group_lanes, lanes); /* the newest program */
        check_strided_sums(rs, x, R, C, C, 1);
        /* shorter rows: the first 512 or 784 elements of each, in groups of 32 lanes where
         * the device's subgroup allows */
        uint32_t narrow = ctx->group_rows && ctx->group_rows_min_lanes <= 32 ? 32 : 0;
        kiln_tensor *half = kiln_sum(kiln_narrow(t, 1, 0, C / 2), 1, (const int32_t[]){1}, false);
        assert_int_equal(kiln_realize(half), KILN_OK);
        assert_int_equal(ctx->program_list->group_lanes, narrow);
        check_strided_sums(half, x, R, C / 2, C, 1);
        kiln_tensor *part = kiln_sum(kiln_narrow(t, 1, 0, 784), 1, (const int32_t[]){1}, false);
        assert_int_equal(kiln_realize(part), KILN_OK);
        assert_int_equal(ctx->program_list->group_lanes, narrow);
        check_strided_sums(part, x, R, 784, C, 1);
        /* short rows: 64 elements */
        kiln_tensor *few = kiln_sum(kiln_narrow(t, 1, 0, 64), 1, (const int32_t[]){1}, false);
        assert_int_equal(kiln_realize(few), KILN_OK);
        assert_int_equal(ctx->program_list->group_lanes, 0);
        check_strided_sums(few, x, R, 64, C, 1);
        /* columns: the same data as (C, R) summed along C, elements R apart */
        kiln_tensor *u = fx_f32(ctx, 2, (const int64_t[]){C, R}, x);
        kiln_tensor *cs = kiln_sum(u, 1, (const int32_t[]){0}, false);
        assert_int_equal(kiln_realize(cs), KILN_OK);
        assert_int_equal(ctx->program_list->group_lanes, 0);
        check_strided_sums(cs, x, R, C, 1, R);
        /* a softmax: its max and sum's kernel (a CPU's: row mode, one kernel) */
        kiln_tensor *sm = kiln_softmax(t, -1);
        assert_int_equal(kiln_realize(sm), KILN_OK);
        if (ctx->group_rows) {
            const eng_program *stages = program_named(ctx, "max");
            assert_non_null(stages);
            assert_int_equal(stages->group_lanes, lanes);
        }
        fx_check_f32(sm, want, (size_t)R * C, 1e-6, 1e-5);
        kiln_tensor *handles[] = {t, rs, half, part, few, u, cs, sm};
        for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++)
            kiln_release(handles[i]);
        eng_fixture_context_destroy(ctx);
    }
    free(x);
    free(want);
}

/* dx, the gradient of sum(conv2d(x, w, padding 1, groups)) for x (2, c_all, 6, 6) (c_all at
 * most 4) and w (4, c_all / groups, 3, 3): each input element's gradient is the sum of w over
 * the taps whose window holds it, of the filters of its channel's group. */
static void check_input_gradient_of_sum(kiln_tensor *w, kiln_tensor *dx, int c_all, int groups) {
    enum { O = 4, K = 3, S = 6 };
    int cg = c_all / groups; /* channels per group */
    float ws[O * 4 * K * K], got[2 * 4 * S * S];
    assert_int_equal(kiln_read(w, ws, sizeof(float) * O * cg * K * K), KILN_OK);
    assert_int_equal(kiln_read(dx, got, sizeof(float) * 2 * c_all * S * S), KILN_OK);
    for (int n = 0; n < 2; n++)
        for (int c = 0; c < c_all; c++)
            for (int i = 0; i < S; i++)
                for (int j = 0; j < S; j++) {
                    double want = 0;
                    for (int o = c / cg * (O / groups); o < (c / cg + 1) * (O / groups); o++)
                        for (int kh = 0; kh < K; kh++)
                            for (int kw = 0; kw < K; kw++) {
                                int oi = i + 1 - kh, oj = j + 1 - kw; /* the output it feeds */
                                if (oi >= 0 && oi < S && oj >= 0 && oj < S)
                                    want += ws[((o * cg + c % cg) * K + kh) * K + kw];
                            }
                    assert_float_equal(got[((n * c_all + c) * S + i) * S + j], want, 1e-4);
                }
}

/* The gradient of a padded input is the fold of the windows shrunk to the input: the shrink
 * moves into the fold's node (autograd.c shrink_grad), so the kernel that realizes it computes
 * the input's 6 x 6 per channel, not the padded 8 x 8 it would then cut. A convolution of two
 * groups takes the product and the fold on every device (one group of stride 1 runs per
 * image, its input gradient a convolution: nn.c). */
static void test_engine_kernels_conv_input_gradient_skips_the_padding(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    kiln_tensor *x = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){2, 4, 6, 6}, 3);
    kiln_tensor *w = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){4, 2, 3, 3}, 4);
    assert_int_equal(kiln_requires_grad_(x, true), KILN_OK);
    kiln_tensor *dx = NULL;
    kiln_tensor *y =
        kiln_conv2d_ex(x, w, NULL, &(kiln_conv2d_options){.padding = {1, 1}, .groups = 2});
    assert_int_equal(kiln_grad(kiln_sum(y, 0, NULL, false), 1, &x, &dx), KILN_OK);
    assert_int_equal(kiln_realize(dx), KILN_OK);
    bool inside = false;
    for (const eng_program *p = ctx->program_list; p; p = p->next) {
        assert_null(strstr(p->name, "_2x4x8x8"));
        inside = inside || (p->name[0] == 'E' && strstr(p->name, "_2x4x6x6") &&
                            !strstr(p->name, "rand")); /* the fold, not x's random values */
    }
    assert_true(inside);
    check_input_gradient_of_sum(w, dx, 4, 2);
    eng_fixture_context_destroy(ctx);
}

/* Under a GPU's tuning a constant batch of stride 1 runs per image too (nn.c conv2d_ex_impl),
 * its windows read in place by the forward's and the weights' gradient's products and x's
 * gradient a convolution of the output's gradient: no window copy (_2x3x3x3x6x6), no fold (an
 * elementwise kernel over x's 2 x 3 x 6 x 6), where the merged rows' im2col copy, split
 * product and fold took 9x the device time of the weight gradient on an H200; and no copy of
 * the weights, transposed (27 x 4) or flipped (36 x 3), which a GPU's products read in place. The
 * forward and both gradients of sum(y * g) against the host. */
static void test_engine_kernels_gpu_tuned_conv_runs_per_image(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = NULL;
    kiln_context_options opt = {.device = f->device ? NULL : "interp", .validation = f->device};
    assert_int_equal(eng_testing_context_create(&opt, &(eng_testing){.gpu_tuning = true}, &ctx),
                     KILN_OK);
    enum { N = 2, C = 3, S = 6, O = 4 };
    float xs[N * C * S * S], ws[O * C * 9], gs[N * O * S * S], y[N * O * S * S], dw[O * C * 9];
    float want[N * O * S * S], want_dw[O * C * 9];
    kiln_tensor *x = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){N, C, S, S}, 31);
    kiln_tensor *w = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){O, C, 3, 3}, 32);
    kiln_tensor *g = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){N, O, S, S}, 33);
    assert_int_equal(kiln_read(x, xs, sizeof xs), KILN_OK);
    assert_int_equal(kiln_read(w, ws, sizeof ws), KILN_OK);
    assert_int_equal(kiln_read(g, gs, sizeof gs), KILN_OK);
    assert_int_equal(kiln_requires_grad_(x, true), KILN_OK);
    assert_int_equal(kiln_requires_grad_(w, true), KILN_OK);
    kiln_tensor *out = kiln_conv2d(x, w, 1, 1), *grads[2] = {NULL, NULL};
    kiln_tensor *wrt[2] = {x, w};
    assert_int_equal(kiln_grad(kiln_sum(kiln_mul(out, g), 0, NULL, false), 2, wrt, grads), KILN_OK);
    assert_int_equal(kiln_read(out, y, sizeof y), KILN_OK);
    assert_int_equal(kiln_read(grads[1], dw, sizeof dw), KILN_OK);
    fx_conv2d_host(xs, ws, (const int64_t[]){27, 9, 3, 1}, N, C, S, O, 3, 1, want);
    fx_conv2d_weight_grad_host(xs, gs, N, C, S, O, 3, 1, want_dw);
    for (int e = 0; e < N * O * S * S; e++)
        assert_float_equal(y[e], want[e], 1e-4);
    for (int e = 0; e < O * C * 9; e++)
        assert_float_equal(dw[e], want_dw[e], 1e-3);
    float dx[N * C * S * S], want_dx[N * C * S * S];
    assert_int_equal(kiln_read(grads[0], dx, sizeof dx), KILN_OK);
    fx_conv2d_input_grad_host(gs, ws, N, C, S, O, 3, 1, 1, want_dx);
    for (int e = 0; e < N * C * S * S; e++)
        assert_float_equal(dx[e], want_dx[e], 1e-4);
    char names[2048];
    program_names(ctx, names, sizeof names);
    for (const eng_program *p = ctx->program_list; p; p = p->next) {
        if (strstr(p->name, "_2x3x3x3x6x6") ||
            (p->name[0] == 'E' && strstr(p->name, "_2x3x6x6") && !strstr(p->name, "rand")) ||
            strstr(p->name, "_27x4") || strstr(p->name, "_36x3"))
            fail_msg("want no window copy, no fold and no weight copy: %s", names);
    }
    eng_fixture_context_destroy(ctx);
}

/* The input gradient of a stride-2 convolution (3 x 3, padding 1) over 14 x 14 images of 16
 * channels, their batch a Variable: the fold of its windows' gradient, shrunk to the 14 x 14
 * inside (autograd.c shrink_grad), read its last row from the next image's plane where the
 * shrink moved into a node read through several views (the interpreter stopped at an element
 * past the gradient's buffer). Each input element's gradient of sum(y) is the sum of w over the
 * taps whose window holds it, against the host. */
static void test_engine_kernels_strided_conv_input_gradient(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    enum { N = 2, C = 16, S = 14, O = 4 };
    kiln_tensor *flat = kiln_rand(ctx, KILN_F32, 1, (const int64_t[]){N * C * S * S}, 11);
    kiln_tensor *w = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){O, C, 3, 3}, 12);
    assert_int_equal(kiln_realize(w), KILN_OK);
    kiln_tensor *x = fx_images(flat, N, 4, C, S, S);
    assert_int_equal(kiln_requires_grad_(x, true), KILN_OK);
    kiln_tensor *y =
        kiln_conv2d_ex(x, w, NULL, &(kiln_conv2d_options){.stride = {2, 2}, .padding = {1, 1}});
    kiln_tensor *dx = NULL;
    assert_int_equal(kiln_grad(kiln_sum(y, 0, NULL, false), 1, &x, &dx), KILN_OK);
    float *ws = malloc(sizeof(float) * O * C * 9), *got = malloc(sizeof(float) * N * C * S * S);
    float *want = malloc(sizeof(float) * N * C * S * S);
    assert_true(ws && got && want);
    assert_int_equal(kiln_read(w, ws, sizeof(float) * O * C * 9), KILN_OK);
    assert_int_equal(kiln_read(dx, got, sizeof(float) * N * C * S * S), KILN_OK);
    fx_conv2d_input_grad_host(NULL, ws, N, C, S, O, 3, 2, 1, want);
    for (int e = 0; e < N * C * S * S; e++)
        assert_float_equal(got[e], want[e], 1e-4);
    free(want);
    free(ws);
    free(got);
    eng_fixture_context_destroy(ctx);
}

/* An elementwise kernel of several loads over rows of 49 with a symbolic row count (images of 16
 * channels of 7 x 7, their batch bound to 16 of up to 32): its tile, a whole row, narrowed to
 * keep a CPU busy to a divisor of the row (7), where halving made tiles of 12 that did not
 * divide it (outputs missed, elements past the input read). Against the host. */
static void test_engine_kernels_short_rows_narrow_to_a_divisor(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    enum { N = 16, R = 16 * 49 };
    float *xs = malloc(sizeof(float) * N * R), *got = malloc(sizeof(float) * N * R);
    assert_true(xs && got);
    for (int i = 0; i < N * R; i++)
        xs[i] = (float)(i % 13) - 6.0f;
    kiln_tensor *flat = kiln_from_data(ctx, KILN_F32, 1, (const int64_t[]){N * R}, xs);
    const kiln_expr *batch = kiln_bind(ctx, kiln_variable(ctx, "images", 1, 2 * N), N);
    const kiln_expr *shape[3] = {batch, kiln_int(ctx, 16), kiln_int(ctx, 49)};
    kiln_tensor *x = kiln_reshape_sym(flat, 3, shape);
    kiln_tensor *y = kiln_add(kiln_mul(x, x), x);
    assert_int_equal(kiln_read(y, got, sizeof(float) * N * R), KILN_OK);
    for (int i = 0; i < N * R; i++)
        assert_float_equal(got[i], xs[i] * xs[i] + xs[i], 0);
    free(xs);
    free(got);
    eng_fixture_context_destroy(ctx);
}

/* A product over a symbolic batch of short rows whose outputs share their left operand's row
 * (a linear layer's forward, batch x 10 over K) computes a whole row per item on a CPU (lower.c
 * whole_row): the row's element loaded once per step for its 10 outputs. 60 rows of at most
 * 64 (fewer outputs have lanes share each one instead: eng_kernel_group_lanes), values against
 * the host (integers: exact). */
static void test_engine_kernels_symbolic_short_rows_share_the_row(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    enum { N = 60, K = 40, O = 10 };
    static float xs[N * K], ws[O * K], bs[O], got[N * O];
    for (int i = 0; i < N * K; i++)
        xs[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < O * K; i++)
        ws[i] = (float)(i % 5) - 2.0f;
    for (int o = 0; o < O; o++)
        bs[o] = (float)o;
    kiln_tensor *flat = kiln_from_data(ctx, KILN_F32, 1, (const int64_t[]){N * K}, xs);
    const kiln_expr *batch = kiln_bind(ctx, kiln_variable(ctx, "rows", 1, 64), N);
    const kiln_expr *shape[2] = {batch, kiln_int(ctx, K)};
    kiln_tensor *x = kiln_reshape_sym(flat, 2, shape);
    kiln_tensor *w = kiln_from_data(ctx, KILN_F32, 2, (const int64_t[]){O, K}, ws);
    kiln_tensor *b = kiln_from_data(ctx, KILN_F32, 1, (const int64_t[]){O}, bs);
    kiln_tensor *y = kiln_add(kiln_matmul(x, kiln_transpose(w, 0, 1)), b);
    assert_int_equal(kiln_read(y, got, sizeof got), KILN_OK);
    for (int n = 0; n < N; n++) {
        for (int o = 0; o < O; o++) {
            float want = bs[o];
            for (int k = 0; k < K; k++)
                want += xs[n * K + k] * ws[o * K + k];
            assert_float_equal(got[n * O + o], want, 0);
        }
    }
    const eng_program *product = program_named(ctx, "R_mul_sum_add");
    assert_non_null(product);
    if (ctx->whole_short_rows)
        assert_true(product->tile_m == 1 && product->tile_n == O);
    eng_fixture_context_destroy(ctx);
}

/* The per-image window matrices of a symbolic batch (nn.c window_matrix): the forward reads
 * them in place (the product, the padding folded into its loads, after the weights' transposed
 * copy, which a CPU's tile reads as vectors; a GPU reads the weights as they are), in inference
 * and where the weights need a gradient (whose product reads them in place again): two kernels
 * either way on a CPU, one on a GPU. Values against the host. */
static void test_engine_kernels_inference_conv_reads_windows_in_place(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    kiln_tensor *flat = kiln_rand(ctx, KILN_F32, 1, (const int64_t[]){2 * 3 * 6 * 6}, 5);
    kiln_tensor *w = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){4, 3, 3, 3}, 6);
    assert_int_equal(kiln_realize(flat), KILN_OK);
    assert_int_equal(kiln_realize(w), KILN_OK);
    float xs[2 * 3 * 6 * 6], ws[4 * 3 * 3 * 3], got[2 * 4 * 6 * 6];
    assert_int_equal(kiln_read(flat, xs, sizeof xs), KILN_OK);
    assert_int_equal(kiln_read(w, ws, sizeof ws), KILN_OK);
    kiln_tensor *x = fx_images(flat, 2, 4, 3, 6, 6);
    const kiln_conv2d_options same = {.padding = {1, 1}};
    for (int train = 0; train < 2; train++) {
        kiln_tensor *wt = train ? kiln_detach(w) : w;
        if (train)
            assert_int_equal(kiln_requires_grad_(wt, true), KILN_OK);
        kiln_stats before = kiln_context_stats(ctx);
        kiln_tensor *y = kiln_conv2d_ex(x, wt, NULL, &same);
        assert_int_equal(kiln_realize(y), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        assert_int_equal(delta(&before, &after).dispatches, ctx->window_rows ? 2 : 1);
        assert_int_equal(kiln_read(y, got, sizeof got), KILN_OK);
        float want[2 * 4 * 6 * 6];
        fx_conv2d_host(xs, ws, (const int64_t[]){27, 9, 3, 1}, 2, 3, 6, 4, 3, 1, want);
        for (int e = 0; e < 2 * 4 * 6 * 6; e++)
            assert_float_equal(got[e], want[e], 1e-5);
    }
    eng_fixture_context_destroy(ctx);
}

/* The newest program named with prefix (a realize's new kernel), or NULL. */
static const eng_program *newest_program(kiln_context *ctx, const char *prefix) {
    for (const eng_program *p = ctx->program_list; p; p = p->next)
        if (strncmp(p->name, prefix, strlen(prefix)) == 0)
            return p;
    return NULL;
}

/* An elementwise op over a convolution's output, its only reader (relu(conv2d(x, w)), the
 * bias of conv2d_ex), runs in the product's kernel over the product's own dims (kernel.c
 * epilogue_of: the per-image product (N, O, 1, OH OW) read as (N, O, OH, OW)), so it keeps
 * the product's tiles; a constant batch and a Variable's. Values exactly those of the op
 * applied on the host to the product realized alone. */
static void test_engine_kernels_epilogue_keeps_the_product_tiles(void **state) {
    eng_fixture *f = *state;
    enum { N = 2, C = 8, O = 16, S = 14, OUT = N * O * S * S };
    for (int symbolic = 0; symbolic < 2; symbolic++) {
        kiln_context *ctx = eng_context_new(f->device);
        assert_non_null(ctx);
        kiln_tensor *flat = kiln_randn(ctx, KILN_F32, 1, (const int64_t[]){N * C * S * S}, 31);
        kiln_tensor *w = kiln_randn(ctx, KILN_F32, 4, (const int64_t[]){O, C, 3, 3}, 32);
        kiln_tensor *b = kiln_randn(ctx, KILN_F32, 1, (const int64_t[]){O}, 33);
        assert_int_equal(kiln_realize(flat), KILN_OK);
        assert_int_equal(kiln_realize(w), KILN_OK);
        assert_int_equal(kiln_realize(b), KILN_OK);
        kiln_tensor *x = symbolic ? fx_images(flat, N, N + 2, C, S, S)
                                  : kiln_reshape(flat, 4, (const int64_t[]){N, C, S, S});
        const kiln_conv2d_options same = {.padding = {1, 1}};
        kiln_tensor *y = kiln_conv2d_ex(x, w, NULL, &same);
        assert_int_equal(kiln_realize(y), KILN_OK);
        const eng_program *alone = newest_program(ctx, "R_");
        assert_non_null(alone);
        static float ys[OUT], bs[O], got[OUT];
        assert_int_equal(kiln_read(y, ys, sizeof ys), KILN_OK);
        assert_int_equal(kiln_read(b, bs, sizeof bs), KILN_OK);
        for (int op = 0; op < 2; op++) {
            kiln_tensor *e = op == 0 ? kiln_relu(kiln_conv2d_ex(x, w, NULL, &same))
                                     : kiln_conv2d_ex(x, w, b, &same);
            assert_int_equal(kiln_realize(e), KILN_OK);
            const eng_program *fused = newest_program(ctx, "R_");
            assert_non_null(fused);
            assert_true(fused != alone);
            if (fused->per_item != alone->per_item || fused->tile_m != alone->tile_m ||
                fused->tile_n != alone->tile_n || fused->window_taps != alone->window_taps)
                fail_msg("%s: tiles %ux%u (%llu per item) where %s has %ux%u (%llu)", fused->name,
                         fused->tile_m, fused->tile_n, (unsigned long long)fused->per_item,
                         alone->name, alone->tile_m, alone->tile_n,
                         (unsigned long long)alone->per_item);
            assert_int_equal(kiln_read(e, got, sizeof got), KILN_OK);
            for (int i = 0; i < OUT; i++) {
                float want = op == 0 ? fmaxf(ys[i], 0) : ys[i] + bs[i / (S * S) % O];
                if (got[i] != want)
                    fail_msg("op %d, element %d: %g, want %g", op, i, got[i], want);
            }
        }
        eng_fixture_context_destroy(ctx);
    }
}

/* y = conv2d (3 x 3, padding 1) of two size x size images of ch channels, their batch a
 * Variable, by four random filters *w that need a gradient; xs and ws receive the values. */
static kiln_tensor *conv_of_images(kiln_context *ctx, int ch, int size, float *xs, float *ws,
                                   kiln_tensor **w) {
    kiln_tensor *flat = kiln_rand(ctx, KILN_F32, 1, (const int64_t[]){2 * ch * size * size}, 9);
    *w = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){4, ch, 3, 3}, 10);
    assert_int_equal(kiln_requires_grad_(*w, true), KILN_OK);
    assert_int_equal(kiln_read(flat, xs, sizeof(float) * 2 * ch * size * size), KILN_OK);
    assert_int_equal(kiln_read(*w, ws, sizeof(float) * 4 * ch * 9), KILN_OK);
    return kiln_conv2d_ex(fx_images(flat, 2, 4, ch, size, size), *w, NULL,
                          &(kiln_conv2d_options){.padding = {1, 1}});
}

/* y (conv_of_images) and w's gradient of sum(y) against the host: each output, and for each
 * tap the sum of the inputs it reads (to within tol). */
static void check_conv_and_weight_gradient(kiln_tensor *y, kiln_tensor *w, const float *xs,
                                           const float *ws, int ch, int size, double tol) {
    kiln_tensor *gw = NULL;
    assert_int_equal(kiln_grad(kiln_sum(y, 0, NULL, false), 1, &w, &gw), KILN_OK);
    float *got = malloc(sizeof(float) * 2 * 4 * size * size),
          *want = malloc(sizeof(float) * 2 * 4 * size * size),
          *dw = malloc(sizeof(float) * 4 * ch * 9), *want_dw = malloc(sizeof(float) * 4 * ch * 9);
    assert_true(got && want && dw && want_dw);
    assert_int_equal(kiln_read(y, got, sizeof(float) * 2 * 4 * size * size), KILN_OK);
    assert_int_equal(kiln_read(gw, dw, sizeof(float) * 4 * ch * 9), KILN_OK);
    fx_conv2d_host(xs, ws, (const int64_t[]){ch * 9, 9, 3, 1}, 2, ch, size, 4, 3, 1, want);
    for (int e = 0; e < 2 * 4 * size * size; e++)
        assert_float_equal(got[e], want[e], 1e-5);
    fx_conv2d_weight_grad_host(xs, NULL, 2, ch, size, 4, 3, 1, want_dw); /* of sum(y) */
    for (int e = 0; e < 4 * ch * 9; e++)
        assert_float_equal(dw[e], want_dw[e], tol);
    free(got);
    free(want);
    free(dw);
    free(want_dw);
}

/* A convolution of one channel (nine taps) over a symbolic batch reads its windows in place
 * where the weights need a gradient: the forward is two dispatches on a CPU (the weights laid
 * out transposed, 9 x 4, and the product; no window copy), the product alone on a GPU, and the
 * weights' gradient reads the windows in place too. Values against the host. */
static void test_engine_kernels_short_windows_read_in_place(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    float xs[2 * 6 * 6], ws[4 * 9];
    kiln_tensor *w = NULL, *y = conv_of_images(ctx, 1, 6, xs, ws, &w);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(y), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(delta(&before, &after).dispatches, ctx->window_rows ? 2 : 1);
    char names[1024];
    program_names(ctx, names, sizeof names);
    if ((strstr(names, "E_cast_9x4") != NULL) != ctx->window_rows)
        fail_msg("want transposed weights on a CPU only: %s", names);
    check_conv_and_weight_gradient(y, w, xs, ws, 1, 6, 1e-4);
    eng_fixture_context_destroy(ctx);
}

/* A training convolution of stride 1 (14 x 14 = 196 pixels per image, 27 taps): the forward's
 * value is the product that reads the windows in place (nn.c conv_input_tap), with the weights
 * laid out transposed for it on a CPU (E_cast_27x4); rows are never padded to 200. The weights'
 * gradient reads the windows in place too (nn.c window_matrix: no copy of 3 x 3 x 3 x 14 x 14 per
 * image, on any device). Forward values and the weights' gradient against the host. */
static void test_engine_kernels_training_conv_reads_windows_in_place(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    float xs[2 * 3 * 14 * 14], ws[4 * 3 * 9];
    kiln_tensor *w = NULL, *y = conv_of_images(ctx, 3, 14, xs, ws, &w);
    check_conv_and_weight_gradient(y, w, xs, ws, 3, 14, 1e-3);
    char names[2048];
    program_names(ctx, names, sizeof names);
    if ((strstr(names, "E_cast_27x4") != NULL) != ctx->window_rows ||
        !strstr(names, "_images_x_4x1x196") || strstr(names, "x200"))
        fail_msg("want the forward over the windows in place, no rows of 200: %s", names);
    if (strstr(names, "_3x3x3x14x14"))
        fail_msg("want no window copy: %s", names);
    eng_fixture_context_destroy(ctx);
}

/* The gradient of sum(conv2d(x, w, padding 1) * dy) with respect to w (o filters of c channels,
 * 3 x 3) against the host's from xs and dys (n images, s x s), to tol. */
static void check_weight_grad(kiln_tensor *x, kiln_tensor *w, kiln_tensor *dy, const float *xs,
                              const float *dys, int n, int c, int s, int o, double tol) {
    float *dw = malloc(sizeof(float) * (size_t)(o * c * 9));
    float *want = malloc(sizeof(float) * (size_t)(o * c * 9));
    assert_true(dw && want);
    kiln_tensor *y = kiln_conv2d_ex(x, w, NULL, &(kiln_conv2d_options){.padding = {1, 1}});
    kiln_tensor *gw = NULL;
    assert_int_equal(kiln_grad(kiln_sum(kiln_mul(y, dy), 0, NULL, false), 1, &w, &gw), KILN_OK);
    assert_int_equal(kiln_read(gw, dw, sizeof(float) * (size_t)(o * c * 9)), KILN_OK);
    fx_conv2d_weight_grad_host(xs, dys, n, c, s, o, 3, 1, want);
    for (int e = 0; e < o * c * 9; e++)
        assert_float_equal(dw[e], want[e], tol);
    free(dw);
    free(want);
}

/* A convolution's weight gradient reads the windows in place (nn.c window_matrix; no window
 * copy), on a CPU in tiles whose loop steps by a row of the image (10 pixels here) and whose
 * row holds the taps of one channel (9 of 36: lower.c eng_kernel_tile, window_columns), the
 * output's gradient and the windows read as pairs of rows (LOAD2R; the rows of padding masked). A
 * symbolic batch (2 of at most 64), 4 channels, 8 filters; the gradient against the host. */
static void test_engine_kernels_weight_gradient_reads_windows_in_place(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    enum { N = 2, C = 4, S = 10, O = 8 };
    static float xs[N * C * S * S], dys[N * O * S * S];
    kiln_tensor *flat = kiln_rand(ctx, KILN_F32, 1, (const int64_t[]){N * C * S * S}, 21);
    kiln_tensor *w = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){O, C, 3, 3}, 22);
    kiln_tensor *dflat = kiln_rand(ctx, KILN_F32, 1, (const int64_t[]){N * O * S * S}, 23);
    assert_int_equal(kiln_requires_grad_(w, true), KILN_OK);
    assert_int_equal(kiln_read(flat, xs, sizeof xs), KILN_OK);
    assert_int_equal(kiln_read(dflat, dys, sizeof dys), KILN_OK);
    check_weight_grad(fx_images(flat, N, 64, C, S, S), w, fx_images(dflat, N, 64, O, S, S), xs, dys,
                      N, C, S, O, 1e-4);
    char names[2048];
    program_names(ctx, names, sizeof names);
    if (strstr(names, "_4x3x3x10x10"))
        fail_msg("want no window copy: %s", names);
    const eng_program *rows = NULL;
    for (const eng_program *p = ctx->program_list; p; p = p->next)
        rows = p->window_taps == S ? p : rows;
    if (ctx->window_rows) {
        if (!rows || rows->tile_m < 2 || rows->tile_n != 9)
            fail_msg("want the weight gradient in steps of an image row, tiles of rows of 9: %s",
                     names);
        /* the pairs of a step are rows (LOAD2R): those of a buffer share one row value, whose
         * texels they fetch once on a texel buffer (emit.c load_row_pair) */
        int pairs = 0, masked = 0, row_pairs = 0, row_values = 0;
        for (uint32_t i = 0; i < rows->ir.insts.len; i++) {
            const ir_inst *in = &rows->ir.insts.data[i];
            bool pair = in->op == IR_LOAD2 || in->op == IR_LOAD2R;
            pairs += pair;
            masked += pair && rows->ir.insts.data[in->src[0]].op == IR_WHERE;
            if (in->op != IR_LOAD2R)
                continue;
            row_pairs++;
            bool seen = false;
            for (uint32_t j = 0; j < i && !seen; j++) {
                const ir_inst *o = &rows->ir.insts.data[j];
                seen = o->op == IR_LOAD2R && o->arg == in->arg && o->src[1] == in->src[1];
            }
            row_values += !seen;
        }
        assert_true(pairs > 0 && masked > 0);
        assert_true(row_pairs > 0 && row_values <= 2 && row_values < row_pairs);
    } else {
        assert_null(rows);
    }
    eng_fixture_context_destroy(ctx);
}

/* A convolution's weight gradient over enough images sums groups of 4 of them in one product on
 * a CPU (autograd.c image_groups): a constant batch of 32 (8 groups), a symbolic one of 30 of
 * at most 32 and a constant one of 30 (8 groups, the last padded with 2 zero images), 16
 * channels, 32 filters (8 x 32 x 144 outputs grouped); elsewhere a product per image. The
 * gradient against the host. */
static void test_engine_kernels_weight_gradient_sums_image_groups(void **state) {
    eng_fixture *f = *state;
    enum { MAX = 32, C = 16, S = 6, O = 32 };
    static float xs[MAX * C * S * S], dys[MAX * O * S * S];
    for (int run = 0; run < 3; run++) {
        kiln_context *ctx = eng_context_new(f->device);
        assert_non_null(ctx);
        bool symbolic = run == 1;
        int n = run == 0 ? MAX : 30;
        kiln_tensor *flat = kiln_rand(ctx, KILN_F32, 1, (const int64_t[]){n * C * S * S}, 31);
        kiln_tensor *dflat = kiln_rand(ctx, KILN_F32, 1, (const int64_t[]){n * O * S * S}, 32);
        kiln_tensor *w = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){O, C, 3, 3}, 33);
        assert_int_equal(kiln_requires_grad_(w, true), KILN_OK);
        assert_int_equal(kiln_read(flat, xs, sizeof(float) * (size_t)(n * C * S * S)), KILN_OK);
        assert_int_equal(kiln_read(dflat, dys, sizeof(float) * (size_t)(n * O * S * S)), KILN_OK);
        kiln_tensor *x = symbolic ? fx_images(flat, n, MAX, C, S, S)
                                  : kiln_reshape(flat, 4, (const int64_t[]){n, C, S, S});
        kiln_tensor *dy = symbolic ? fx_images(dflat, n, MAX, O, S, S)
                                   : kiln_reshape(dflat, 4, (const int64_t[]){n, O, S, S});
        check_weight_grad(x, w, dy, xs, dys, n, C, S, O, 1e-3);
        char names[4096];
        program_names(ctx, names, sizeof names);
        const char *grouped =
            symbolic ? "mul_sum_((images+3)//4)_x_32x1x144" : "mul_sum_8x32x1x144";
        if ((strstr(names, grouped) != NULL) != ctx->window_rows)
            fail_msg("want the product over groups of 4 images exactly on a CPU: %s", names);
        eng_fixture_context_destroy(ctx);
    }
}

/* The input gradient of a convolution of stride 1 over a symbolic batch is a convolution of the
 * output's gradient with the flipped weights (autograd.c conv_input_grad): one product of 3
 * channels x 36 pixels per image reading the gradient's windows in place, where the product's
 * own rule made the gradient's window matrix (27 x 36 per image) and folded it back. Values
 * against the host. */
static void test_engine_kernels_conv_input_gradient_is_a_convolution(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    kiln_tensor *flat = kiln_rand(ctx, KILN_F32, 1, (const int64_t[]){2 * 3 * 6 * 6}, 7);
    kiln_tensor *w = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){4, 3, 3, 3}, 8);
    assert_int_equal(kiln_realize(flat), KILN_OK);
    assert_int_equal(kiln_realize(w), KILN_OK);
    assert_int_equal(kiln_requires_grad_(flat, true), KILN_OK);
    const kiln_conv2d_options same = {.padding = {1, 1}};
    kiln_tensor *y = kiln_conv2d_ex(fx_images(flat, 2, 4, 3, 6, 6), w, NULL, &same);
    kiln_tensor *dx = NULL;
    assert_int_equal(kiln_grad(kiln_sum(y, 0, NULL, false), 1, &flat, &dx), KILN_OK);
    assert_int_equal(kiln_realize(dx), KILN_OK);
    bool convolution = false;
    for (const eng_program *p = ctx->program_list; p; p = p->next) {
        assert_null(strstr(p->name, "_27x1x36"));
        convolution = convolution || (p->name[0] == 'R' && strstr(p->name, "_3x1x36"));
    }
    assert_true(convolution);
    check_input_gradient_of_sum(w, dx, 3, 1);
    eng_fixture_context_destroy(ctx);
}

/* A product's gradient that one operand's rule reads (x @ w, w alone needing a gradient) and
 * that is cheap (the loss's weights c times the broadcast 1 of a sum's gradient) is inlined
 * into that rule's product: one kernel, where laying it out first made two (autograd.c). Where
 * both operands need a gradient it is laid out once for their two products. Values against
 * the host (sums of quarters: exact). */
static void test_engine_kernels_cheap_product_gradient_is_inlined(void **state) {
    eng_fixture *f = *state;
    enum { M = 16, K = 24, N = 32 };
    static float xs[M * K], ws[K * N], cs[M * N], dw[K * N];
    for (int i = 0; i < M * K; i++)
        xs[i] = (float)(i % 9 - 4) / 4;
    for (int i = 0; i < K * N; i++)
        ws[i] = (float)(i % 5 - 2) / 4;
    for (int i = 0; i < M * N; i++)
        cs[i] = (float)(i % 7 - 3) / 4;
    for (int both = 0; both < 2; both++) {
        kiln_context *ctx = eng_context_new(f->device);
        assert_non_null(ctx);
        kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){M, K}, xs);
        kiln_tensor *w = fx_f32(ctx, 2, (const int64_t[]){K, N}, ws);
        kiln_tensor *c = fx_f32(ctx, 2, (const int64_t[]){M, N}, cs);
        kiln_tensor *leaves[2] = {w, x}, *grads[2] = {NULL, NULL};
        for (int i = 0; i <= both; i++)
            assert_int_equal(kiln_requires_grad_(leaves[i], true), KILN_OK);
        kiln_tensor *loss = kiln_sum(kiln_mul(kiln_matmul(x, w), c), 0, NULL, false);
        assert_int_equal(kiln_grad(loss, (uint32_t)both + 1, leaves, grads), KILN_OK);
        kiln_stats before = kiln_context_stats(ctx);
        assert_int_equal(kiln_realize_many(ctx, (uint32_t)both + 1, grads), KILN_OK);
        /* w's product alone; with x's too, the gradient laid out once for both */
        kiln_stats after = kiln_context_stats(ctx);
        assert_int_equal(delta(&before, &after).dispatches, both ? 3 : 1);
        assert_int_equal(kiln_read(grads[0], dw, sizeof dw), KILN_OK);
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++) {
                float want = 0;
                for (int m = 0; m < M; m++)
                    want += xs[m * K + k] * cs[m * N + n];
                assert_true(dw[k * N + n] == want);
            }
        eng_fixture_context_destroy(ctx);
    }
}

/* The gradient of max_pool2d(relu(z)) takes the relu's mask from the pooled value
 * (autograd.c relu_pools): the backward's elementwise kernels never recompute the relu (no
 * MAX instruction) nor read z's operand, and the gradient of the bias in z sums the masked
 * pooled gradient, not the scattered one. Values against the host (z = 2 x - 1 + bias, the
 * bias 0: half of z negative). */
/* max_pool2d(relu(conv2d(x, w, b)), 2, stride), and with extra (the relu's output also summed,
 * in the same realize: read twice, the convolution is stored and the pool loads it) or instead
 * a sum of x: the pooled values and the kernels run. */
static uint64_t conv_pool_form(kiln_context *ctx, bool extra, int64_t stride, float *out,
                               size_t n) {
    enum { B = 2, O = 4, H = 8, W = 12 };
    kiln_scope_begin(ctx);
    kiln_tensor *x = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){B, 1, H, W}, 31);
    kiln_tensor *w = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){O, 1, 3, 3}, 32);
    kiln_tensor *bias = kiln_rand(ctx, KILN_F32, 1, (const int64_t[]){O}, 33);
    kiln_tensor *inputs[3] = {x, w, bias};
    assert_int_equal(kiln_realize_many(ctx, 3, inputs), KILN_OK);
    const kiln_conv2d_options same = {.padding = {1, 1}};
    kiln_tensor *h = kiln_relu(kiln_conv2d_ex(x, w, bias, &same));
    kiln_tensor *outs[2] = {kiln_max_pool2d(h, 2, stride, 0),
                            kiln_sum(extra ? h : x, 0, NULL, false)};
    uint64_t before = kiln_context_stats(ctx).dispatches;
    assert_int_equal(kiln_realize_many(ctx, 2, outs), KILN_OK);
    uint64_t kernels = kiln_context_stats(ctx).dispatches - before;
    assert_true(n == (size_t)B * O * ((H - 2) / stride + 1) * ((W - 2) / stride + 1));
    assert_int_equal(kiln_read(outs[0], out, sizeof(float) * n), KILN_OK);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    return kernels;
}

/* A convolution that only its max pool reads is computed inside the pool's windows
 * (engine/schedule/kernel.c, unrolled windows): one kernel fewer than where the relu's output is
 * read twice, and the same values to the bit (the same sums in the same order). Overlapping
 * windows (stride 1) are not unrolled: each would compute the convolution's elements again.
 * The training step's form, the pool's index a sibling: test_train_fashion
 * `unrolled_windows_change_no_value`. */
static void test_engine_kernels_conv_inside_its_pool(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { N = 2 * 4 * 7 * 11 };
    static float fused[N], apart[N];
    for (int64_t stride = 2; stride >= 1; stride--) {
        size_t n = (size_t)2 * 4 * (6 / stride + 1) * (10 / stride + 1);
        uint64_t k_fused = conv_pool_form(ctx, false, stride, fused, n);
        uint64_t k_apart = conv_pool_form(ctx, true, stride, apart, n);
        if (k_fused + (stride == 2) != k_apart)
            fail_msg("stride %lld: %llu kernels, %llu with the convolution read twice",
                     (long long)stride, (unsigned long long)k_fused, (unsigned long long)k_apart);
        for (size_t i = 0; i < n; i++)
            if (memcmp(&fused[i], &apart[i], sizeof(float)) != 0)
                fail_msg("stride %lld: element %zu is %.9g, %.9g with the convolution read twice",
                         (long long)stride, i, fused[i], apart[i]);
    }
}

/* A maximum over windows of a short reduction read in place (no view between: the windows'
 * elements are the reduction's own, not the kernel's): max over rows of relu(sum over the
 * last dim), X (2, 4, 3), whose windows are unrolled (kernel.c build_window). Each window
 * element is a reduction of its own; every output must see both rows (it once saw the first
 * twice). Also with the rows' length a bound Variable. */
static void test_engine_kernels_windows_of_a_reduction_in_place(void **state) {
    kiln_context *ctx = fx_ctx(state);
    float xv[2 * 4 * 3], want[4];
    for (int i = 0; i < 2 * 4 * 3; i++)
        xv[i] = (float)((i * 7) % 11) - 4.0f + (i >= 12 ? 3.0f : 0.0f); /* row 1 the larger */
    for (int j = 0; j < 4; j++) {
        float m = 0;
        for (int r = 0; r < 2; r++) {
            float sum = 0;
            for (int c = 0; c < 3; c++)
                sum += xv[(r * 4 + j) * 3 + c];
            m = fmaxf(m, sum > 0 ? sum : 0);
        }
        want[j] = m;
    }
    for (int symbolic = 0; symbolic < 2; symbolic++) {
        kiln_scope_begin(ctx);
        kiln_tensor *x = fx_f32(ctx, 3, (const int64_t[]){2, 4, 3}, xv);
        if (symbolic) {
            const kiln_expr *len = kiln_bind(ctx, kiln_variable(ctx, "window_rows", 1, 4), 4);
            x = kiln_narrow_sym(x, 1, kiln_int(ctx, 0), len);
        }
        kiln_tensor *y = kiln_max(kiln_relu(kiln_sum(x, 1, (const int32_t[]){2}, false)), 1,
                                  (const int32_t[]){0}, false);
        float got[4];
        assert_int_equal(kiln_read(y, got, sizeof got), KILN_OK);
        for (int j = 0; j < 4; j++) {
            if (got[j] != want[j])
                fail_msg("%s: element %d is %g; %g expected", symbolic ? "symbolic" : "constant", j,
                         got[j], want[j]);
        }
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
}

static void test_engine_kernels_relu_mask_from_the_pool(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    enum { B = 2, C = 4, H = 8, W = 8, PH = H / 2, PW = W / 2 };
    kiln_tensor *x = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){B, C, H, W}, 21);
    kiln_tensor *r = kiln_rand(ctx, KILN_F32, 4, (const int64_t[]){B, C, PH, PW}, 22);
    assert_int_equal(kiln_realize(x), KILN_OK);
    assert_int_equal(kiln_realize(r), KILN_OK);
    assert_int_equal(kiln_requires_grad_(x, true), KILN_OK);
    kiln_tensor *bias = kiln_zeros(ctx, KILN_F32, 1, (const int64_t[]){C});
    assert_int_equal(kiln_realize(bias), KILN_OK);
    assert_int_equal(kiln_requires_grad_(bias, true), KILN_OK);
    kiln_tensor *z = kiln_add(kiln_add_scalar(kiln_mul_scalar(x, 2), -1),
                              kiln_reshape(bias, 4, (const int64_t[]){1, C, 1, 1}));
    kiln_tensor *y = kiln_max_pool2d(kiln_relu(z), 2, 0, 0);
    kiln_tensor *loss = kiln_sum(kiln_mul(y, r), 0, NULL, false);
    kiln_tensor *leaves[2] = {x, bias}, *grads[2] = {NULL, NULL};
    assert_int_equal(kiln_grad(loss, 2, leaves, grads), KILN_OK);
    kiln_tensor *dx = grads[0], *db = grads[1];
    /* the bias's gradient sums the masked pooled gradient (B C PH PW elements), laid out, not
     * the scattered one (B C H W): the largest node its kernels read, down to the laid-out
     * nodes and storages they load */
    int64_t most = 0;
    eng_node *pending[64] = {ENG_BASE(db)};
    for (uint32_t count = 1, seen = 0; count > 0 && seen < 64; seen++) {
        eng_node *n = pending[--count];
        int64_t numel = 1;
        for (uint32_t d = 0; d < n->ndim; d++)
            numel *= sym_vmax(n->shape[d]);
        most = numel > most ? numel : most;
        bool loaded = n->storage || (n->boundary && seen > 0);
        for (uint32_t i = 0; i < n->nsrc && !loaded && count < 64; i++)
            pending[count++] = n->src[i].node;
    }
    assert_int_equal(most, B * C * PH * PW);
    assert_int_equal(kiln_realize(dx), KILN_OK);
    assert_int_equal(kiln_realize(db), KILN_OK);
    int elementwise = 0;
    for (const eng_program *p = ctx->program_list; p; p = p->next) {
        if (p->name[0] != 'E')
            continue;
        elementwise++;
        for (uint32_t i = 0; i < p->ir.insts.len; i++)
            if (p->ir.insts.data[i].op == IR_MAX)
                fail_msg("%s recomputes the relu", p->name);
    }
    assert_true(elementwise > 0);
    static float xs[B * C * H * W], rs[B * C * PH * PW], got[B * C * H * W];
    double want_db[C] = {0};
    assert_int_equal(kiln_read(x, xs, sizeof xs), KILN_OK);
    assert_int_equal(kiln_read(r, rs, sizeof rs), KILN_OK);
    assert_int_equal(kiln_read(dx, got, sizeof got), KILN_OK);
    for (int p = 0; p < B * C; p++)
        for (int i = 0; i < PH; i++)
            for (int j = 0; j < PW; j++) {
                int first = -1;
                float best = 0;
                for (int di = 0; di < 2; di++)
                    for (int dj = 0; dj < 2; dj++) {
                        int e = p * H * W + (2 * i + di) * W + 2 * j + dj;
                        float v = fmaxf(2 * xs[e] - 1, 0);
                        if (first < 0 || v > best) {
                            first = e;
                            best = v;
                        }
                    }
                for (int di = 0; di < 2; di++)
                    for (int dj = 0; dj < 2; dj++) {
                        int e = p * H * W + (2 * i + di) * W + 2 * j + dj;
                        float want = e == first && best > 0 ? 2 * rs[(p * PH + i) * PW + j] : 0;
                        if (got[e] != want)
                            fail_msg("dx[%d] = %g, want %g", e, got[e], want);
                    }
                if (best > 0)
                    want_db[p % C] += rs[(p * PH + i) * PW + j];
            }
    float got_db[C];
    assert_int_equal(kiln_read(db, got_db, sizeof got_db), KILN_OK);
    for (int c = 0; c < C; c++)
        assert_float_equal(got_db[c], want_db[c], 1e-5);
    eng_fixture_context_destroy(ctx);
}

/* The gradients of y = x @ w + b through a costly expression of y: the gradient reaching the
 * sum, read by the bias's sum and by the product's two rules, is materialised once by the copy
 * the product's rule asks for (autograd.c: a sum that passes a costly gradient to both of its
 * operands lays it out first), not realized and then copied. Values against the host. */
static void test_engine_kernels_fanned_out_gradient_is_laid_out_once(void **state) {
    eng_fixture *f = *state;
    kiln_context *ctx = eng_context_new(f->device);
    assert_non_null(ctx);
    enum { M = 8, K = 16, N = 12 };
    kiln_tensor *x = kiln_rand(ctx, KILN_F32, 2, (const int64_t[]){M, K}, 11);
    kiln_tensor *w = kiln_rand(ctx, KILN_F32, 2, (const int64_t[]){K, N}, 12);
    kiln_tensor *b = kiln_rand(ctx, KILN_F32, 1, (const int64_t[]){N}, 13);
    kiln_tensor *leaves[3] = {x, w, b};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(kiln_realize(leaves[i]), KILN_OK);
        assert_int_equal(kiln_requires_grad_(leaves[i], true), KILN_OK);
    }
    kiln_tensor *y = kiln_add(kiln_matmul(x, w), b);
    /* d/dy of sum(sin(y) * y) = cos(y) y + sin(y): four operations or more per element */
    kiln_tensor *loss = kiln_sum(kiln_mul(kiln_sin(y), y), 0, NULL, false);
    kiln_tensor *grads[3];
    assert_int_equal(kiln_grad(loss, 3, leaves, grads), KILN_OK);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize_many(ctx, 3, grads), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    counts c = delta(&before, &after);
    print_message("fanned-out gradient: %llu dispatches\n", (unsigned long long)c.dispatches);
    /* the gradient (the forward product fused into it), the bias's sum and the two products;
     * realized and then copied, the gradient took one kernel more */
    assert_int_equal(c.dispatches, 4);
    float xs[M * K], ws[K * N], bs[N], dx[M * K], dw[K * N], db[N], g[M * N];
    assert_int_equal(kiln_read(x, xs, sizeof xs), KILN_OK);
    assert_int_equal(kiln_read(w, ws, sizeof ws), KILN_OK);
    assert_int_equal(kiln_read(b, bs, sizeof bs), KILN_OK);
    assert_int_equal(kiln_read(grads[0], dx, sizeof dx), KILN_OK);
    assert_int_equal(kiln_read(grads[1], dw, sizeof dw), KILN_OK);
    assert_int_equal(kiln_read(grads[2], db, sizeof db), KILN_OK);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double v = bs[j];
            for (int k = 0; k < K; k++)
                v += (double)xs[i * K + k] * ws[k * N + j];
            g[i * N + j] = (float)(cos(v) * v + sin(v));
        }
    for (int j = 0; j < N; j++) {
        double want = 0;
        for (int i = 0; i < M; i++)
            want += g[i * N + j];
        assert_float_equal(db[j], want, 1e-3);
    }
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++) {
            double want = 0;
            for (int i = 0; i < M; i++)
                want += (double)xs[i * K + k] * g[i * N + j];
            assert_float_equal(dw[k * N + j], want, 1e-3);
        }
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            double want = 0;
            for (int j = 0; j < N; j++)
                want += (double)g[i * N + j] * ws[k * N + j];
            assert_float_equal(dx[i * K + k], want, 1e-3);
        }
    eng_fixture_context_destroy(ctx);
}

/* Whether p's kernel has an IF inside a RANGE (a bounds check inside a loop). */
static bool checks_in_loop(const eng_program *p) {
    uint32_t depth = 0;
    for (size_t i = 0; i < p->ir.insts.len; i++) {
        ir_op op = p->ir.insts.data[i].op;
        depth += op == IR_RANGE;
        depth -= op == IR_ENDRANGE;
        if (op == IR_IF && depth > 0)
            return true;
    }
    return false;
}

/* A tiled product over 9 elements (a 3 x 3 window of one channel) steps by three, exactly:
 * no bounds check inside its loop (lower.c stage_unroll); over 10 it steps by four, and the
 * last step's elements are checked. Both against the host's sums. */
static void test_engine_kernels_nine_elements_step_by_three(void **state) {
    eng_fixture *f = *state;
    for (int64_t k = 9; k <= 10; k++) {
        kiln_context *ctx = eng_context_new(f->device);
        assert_non_null(ctx);
        kiln_tensor *a = kiln_rand(ctx, KILN_F32, 2, (const int64_t[]){16, k}, 5);
        kiln_tensor *b = kiln_rand(ctx, KILN_F32, 2, (const int64_t[]){k, 256}, 6);
        assert_int_equal(kiln_realize_many(ctx, 2, (kiln_tensor *const[]){a, b}), KILN_OK);
        kiln_tensor *y = kiln_matmul(a, b);
        assert_int_equal(kiln_realize(y), KILN_OK);
        const eng_program *product = NULL;
        for (const eng_program *p = ctx->program_list; p; p = p->next) {
            if (p->name[0] == 'R')
                product = p;
        }
        assert_non_null(product);
        if (product->per_item > 1) /* a tile's rule; untiled, the values are checked alone */
            assert_int_equal(checks_in_loop(product), k == 10);
        float as[16 * 10], bs[10 * 256], got[16 * 256];
        assert_int_equal(kiln_read(a, as, sizeof(float) * (size_t)(16 * k)), KILN_OK);
        assert_int_equal(kiln_read(b, bs, sizeof(float) * (size_t)(k * 256)), KILN_OK);
        assert_int_equal(kiln_read(y, got, sizeof got), KILN_OK);
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 256; j++) {
                double want = 0;
                for (int e = 0; e < k; e++)
                    want += (double)as[i * k + e] * bs[e * 256 + j];
                assert_float_equal(got[i * 256 + j], want, 1e-4);
            }
        eng_fixture_context_destroy(ctx);
    }
}

/* A realize that compiles reports "compiling kernels: i of n" through the log callback once
 * compiling has taken a second; the test hook makes that from the first kernel. Kernels from
 * the memory cache report nothing, nor does a quick compile without the hook. */
static void test_engine_kernels_compiles_report_progress(void **state) {
    eng_fixture *f = *state;
    progress_log log = {0};
    kiln_context_options opt = {.device = f->device ? NULL : "interp",
                                .validation = f->device,
                                .log = on_log,
                                .log_user = &log};
    kiln_context *ctx = NULL;
    assert_int_equal(
        eng_testing_context_create(&opt, &(eng_testing){.progress_always = true}, &ctx), KILN_OK);
    float data[32] = {0};
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){4, 8}, data);
    /* A column sum, then x plus it broadcast over the rows: two kernels. */
    kiln_tensor *y = kiln_add(x, kiln_sum(x, 1, (const int32_t[]){0}, true));
    assert_int_equal(kiln_realize(y), KILN_OK);
    kiln_stats s = kiln_context_stats(ctx);
    assert_int_equal(s.dispatches, 2);
    assert_int_equal(log.reports, (int)(s.kernels_compiled + s.disk_hits));
    assert_true(log.reports >= 1);
    assert_non_null(strstr(log.last, "compiling kernels: 2 of 2 (E_add_4x8)"));
    kiln_tensor *x2 = fx_f32(ctx, 2, (const int64_t[]){4, 8}, data);
    int before = log.reports;
    assert_int_equal(kiln_realize(kiln_add(x2, kiln_sum(x2, 1, (const int32_t[]){0}, true))),
                     KILN_OK);
    assert_int_equal(log.reports, before); /* the memory cache's kernels */
    eng_fixture_context_destroy(ctx);
    /* Without the hook, compiles under a second say nothing (a realize that took longer, on a
     * loaded machine, may have reported). */
    log = (progress_log){0};
    assert_int_equal(kiln_context_create(&opt, &ctx), KILN_OK);
    x = fx_f32(ctx, 2, (const int64_t[]){4, 8}, data);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(kiln_realize(kiln_add(x, kiln_sum(x, 1, (const int32_t[]){0}, true))),
                     KILN_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (t1.tv_sec - t0.tv_sec < 1 || (t1.tv_sec - t0.tv_sec == 1 && t1.tv_nsec < t0.tv_nsec))
        assert_int_equal(log.reports, 0);
    eng_fixture_context_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_kernels_fused_reduction_is_one_kernel),
        ENG_TEST(test_engine_kernels_mean_and_matmul_are_one_kernel),
        ENG_TEST(test_engine_kernels_cache_tells_graphs_apart),
        ENG_TEST(test_engine_kernels_names_say_what_they_compute),
        ENG_TEST(test_engine_kernels_disjoint_windows_gradient_adds_nothing),
        ENG_TEST(test_engine_kernels_bias_gradient_sums_rows_first),
        ENG_TEST(test_engine_kernels_max_pool_forward_is_one_max),
        ENG_TEST(test_engine_kernels_max_pool_maximum_and_index_in_one_kernel),
        ENG_TEST(test_engine_kernels_max_pool_reads_pairs),
        ENG_TEST(test_engine_kernels_write_reading_a_write_is_one_kernel),
        ENG_TEST(test_engine_kernels_in_place_writes_move_vectors),
        ENG_TEST(test_engine_kernels_write_reading_a_sum_is_one_kernel),
        ENG_TEST(test_engine_kernels_reduction_stages),
        ENG_TEST(test_engine_kernels_gpu_rows_take_lane_groups),
        ENG_TEST(test_engine_kernels_long_symbolic_stages_stay_apart),
        ENG_TEST(test_engine_kernels_conv_input_gradient_skips_the_padding),
        ENG_TEST(test_engine_kernels_gpu_tuned_conv_runs_per_image),
        ENG_TEST(test_engine_kernels_strided_conv_input_gradient),
        ENG_TEST(test_engine_kernels_short_rows_narrow_to_a_divisor),
        ENG_TEST(test_engine_kernels_symbolic_short_rows_share_the_row),
        ENG_TEST(test_engine_kernels_nine_elements_step_by_three),
        ENG_TEST(test_engine_kernels_compiles_report_progress),
        ENG_TEST(test_engine_kernels_recomputed_operand_is_realized_first),
        ENG_TEST(test_engine_kernels_recompute_rule_elementwise),
        ENG_TEST(test_engine_kernels_recompute_rule_several_kernels),
        ENG_TEST(test_engine_kernels_identity_copies_are_moves),
        ENG_TEST(test_engine_kernels_cheap_operand_stays_fused),
        ENG_TEST(test_engine_kernels_recompute_rule_symbolic_compiles_once),
        ENG_TEST(test_engine_kernels_inference_conv_reads_windows_in_place),
        ENG_TEST(test_engine_kernels_conv_input_gradient_is_a_convolution),
        ENG_TEST(test_engine_kernels_training_conv_reads_windows_in_place),
        ENG_TEST(test_engine_kernels_weight_gradient_reads_windows_in_place),
        ENG_TEST(test_engine_kernels_weight_gradient_sums_image_groups),
        ENG_TEST(test_engine_kernels_short_windows_read_in_place),
        ENG_TEST(test_engine_kernels_fanned_out_gradient_is_laid_out_once),
        ENG_TEST(test_engine_kernels_windows_of_a_reduction_in_place),
        ENG_TEST(test_engine_kernels_relu_mask_from_the_pool),
        ENG_TEST(test_engine_kernels_conv_inside_its_pool),
        ENG_TEST(test_engine_kernels_epilogue_keeps_the_product_tiles),
        ENG_TEST(test_engine_kernels_cheap_product_gradient_is_inlined),
    };
    return ENG_RUN_BOTH(tests);
}
