/* kilninfo --selftest: every kernel reports pass (or skip), the measurements are printed, and
 * the exit status is 0. Runs the built binary with popen (KILNINFO_PATH). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

static char output[16384];

/* Runs kilninfo with args; returns its exit status and fills output. */
static int run_kilninfo(const char *args) {
    char cmd[1024];
    /* kilninfo unloads the Vulkan driver at exit and lavapipe leaks a few bytes when unloaded
     * (the test fixture keeps it loaded instead; kilninfo cannot), so LeakSanitizer is off in
     * the child; this process and every in-process test keep it on. */
    snprintf(cmd, sizeof cmd, "ASAN_OPTIONS=detect_leaks=0 '%s' %s 2>&1", KILNINFO_PATH, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(output, 1, sizeof output - 1, p);
    output[n] = '\0';
    int status = pclose(p);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void test_kilninfo_selftest_every_kernel_passes(void **state) {
    (void)state;
    int status = run_kilninfo("--selftest");
    if (status != 0)
        fail_msg("kilninfo --selftest exited with %d:\n%s", status, output);
    static const char *const kernels[] = {"vadd", "reduce", "subgroup_add", "copy", "fma"};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        char want_pass[64], want_skip[64];
        snprintf(want_pass, sizeof want_pass, "  %-14s pass", kernels[i]);
        snprintf(want_skip, sizeof want_skip, "  %-14s skip", kernels[i]);
        if (!strstr(output, want_pass) && !strstr(output, want_skip))
            fail_msg("kernel %s did not pass:\n%s", kernels[i], output);
    }
    assert_null(strstr(output, "FAIL"));
    assert_non_null(strstr(output, "SPIRV-Tools validation on"));
    assert_non_null(strstr(output, "GB/s copy bandwidth"));
    assert_non_null(strstr(output, "GFLOP/s f32 FMA"));
    assert_non_null(strstr(output, "dispatch latency: "));
    assert_non_null(strstr(output, " 0 failed"));
}

/* Under a device profile the selftest's kernels still pass (the subgroup kernel is skipped
 * where the profile grants no subgroup operations: lavapipe's 8 lanes are not mobile-low's 16),
 * the profile is named, and an unknown profile is a usage error listing the profiles. */
static void test_kilninfo_selftest_under_a_profile(void **state) {
    (void)state;
    int status = run_kilninfo("--selftest --profile mobile-low");
    if (status != 0)
        fail_msg("kilninfo --selftest --profile mobile-low exited with %d:\n%s", status, output);
    assert_non_null(strstr(output, "under the device profile mobile-low"));
    assert_null(strstr(output, "FAIL"));
    assert_non_null(strstr(output, " 0 failed"));
    status = run_kilninfo("--selftest --profile mobile-low --json");
    assert_int_equal(status, 0);
    assert_non_null(strstr(output, "\"profile\": \"mobile-low\""));
    assert_int_equal(run_kilninfo("--selftest --profile mobile-giant"), 2);
    assert_non_null(strstr(output, "no device profile \"mobile-giant\""));
    assert_non_null(strstr(output, "mobile-mid"));
}

static void test_kilninfo_selftest_rejects_missing_device(void **state) {
    (void)state;
    assert_int_equal(run_kilninfo("--selftest --device 99"), 1);
    assert_non_null(strstr(output, "device 99 does not exist"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kilninfo_selftest_every_kernel_passes),
        cmocka_unit_test(test_kilninfo_selftest_rejects_missing_device),
        cmocka_unit_test(test_kilninfo_selftest_under_a_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
