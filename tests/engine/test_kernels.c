/* Exact kernel counts from kiln_context_stats, on both backends. Each test makes its own
 * context, so the memory cache starts empty whatever ran before (the engine keeps no disk
 * cache of kernels yet; when it does, these contexts must turn it off or use a private
 * folder). */
#include "eng.h"
#include "engine_fixture.h"

#include <stdio.h>
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
        ENG_TEST(test_engine_kernels_compiles_report_progress),
    };
    return ENG_RUN_BOTH(tests);
}
