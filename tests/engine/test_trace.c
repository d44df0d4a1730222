/* KILN_TRACE: a device context and an interpreter context alive at once write two files (the
 * first context of the process the path, the second path.2); after kiln_context_destroy each
 * is a complete JSON trace that tests/engine/check_trace.py checks: every dispatch present by
 * name, host phases, times in order; the interpreter's without a device track. */
#include "engine_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Realizes that compile, hit the memory cache, reduce, use a symbolic size, and re-read a
 * realized tensor (no dispatch). Returns the dispatches. */
static uint64_t work(kiln_context *ctx) {
    float data[32];
    for (int i = 0; i < 32; i++)
        data[i] = (float)i / 32;
    kiln_tensor *a = fx_f32(ctx, 2, (const int64_t[]){4, 8}, data);
    kiln_tensor *y = kiln_exp(kiln_add(kiln_mul(a, a), a));
    assert_int_equal(kiln_realize(y), KILN_OK);
    kiln_tensor *s = kiln_sum(kiln_mul(y, a), 1, (const int32_t[]){1}, false);
    float out[32];
    assert_int_equal(kiln_read(s, out, 4 * sizeof(float)), KILN_OK);
    assert_int_equal(kiln_read(y, out, sizeof out), KILN_OK); /* realized: no dispatch */
    const kiln_expr *n = kiln_bind(ctx, kiln_variable(ctx, "n", 1, 8), 3);
    kiln_tensor *z = kiln_mul(kiln_full_sym(ctx, KILN_F32, 1, &n, 2.0),
                              kiln_full_sym(ctx, KILN_F32, 1, &n, 3.0));
    assert_int_equal(kiln_realize(z), KILN_OK);
    kiln_tensor *b = fx_f32(ctx, 2, (const int64_t[]){4, 8}, data);
    kiln_tensor *w = kiln_exp(kiln_add(kiln_mul(b, b), b)); /* the memory cache's kernel */
    assert_int_equal(kiln_realize(w), KILN_OK);
    uint64_t dispatches = kiln_context_stats(ctx).dispatches;
    assert_int_equal(dispatches, 4);
    return dispatches;
}

static void check(const char *path, uint64_t dispatches, const char *mode) {
    char cmd[1024];
    /* A bundle run elsewhere (tools/gpu-check.sh) names its own interpreter and copy. */
    const char *python = getenv("KILN_TEST_PYTHON"), *script = getenv("KILN_TEST_CHECK_TRACE");
    snprintf(cmd, sizeof cmd, "%s %s %s %llu %s", python && *python ? python : PYTHON_PATH,
             script && *script ? script : CHECK_TRACE_PATH, path, (unsigned long long)dispatches,
             mode);
    int status = system(cmd);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_engine_trace_files_hold_every_dispatch(void **state) {
    (void)state;
    char dir[256], path[300], second[310];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/kiln-trace-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.json", dir);
    snprintf(second, sizeof second, "%s.2", path);
    setenv("KILN_TRACE", path, 1);
    kiln_context *dev = eng_context_new(true), *interp = eng_context_new(false);
    unsetenv("KILN_TRACE");
    assert_non_null(dev);
    assert_non_null(interp);
    uint64_t on_device = work(dev), on_interp = work(interp);
    assert_int_equal(on_device, on_interp);
    /* A device without timestamps (mobile-low) times no kernel: its trace holds the host's
     * phases and no kernel event (engine/run/trace.c). */
    bool timed = fx_timestamps(dev);
    eng_fixture_context_destroy(dev);
    eng_fixture_context_destroy(interp);
    check(path, timed ? on_device : 0, "device");
    check(second, on_interp, "interp");
    unlink(path);
    unlink(second);
    rmdir(dir);
}

/* A path that cannot be written: a warning, no trace, the context works. */
static void test_engine_trace_unwritable_path_only_warns(void **state) {
    (void)state;
    setenv("KILN_TRACE", "/nonexistent-dir/t.json", 1);
    kiln_context *ctx = eng_context_new(false);
    unsetenv("KILN_TRACE");
    assert_non_null(ctx);
    work(ctx);
    eng_fixture_context_destroy(ctx);
}

int main(void) {
    unsetenv("KILN_TRACE");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_trace_files_hold_every_dispatch),
        cmocka_unit_test(test_engine_trace_unwritable_path_only_warns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
