/* Time to first result of the demo (examples/attention), run as a fresh process: cold (an
 * empty Kiln cache, Mesa's shader cache off), Kiln's cache warm (Mesa's still off), and both
 * warm. Medians of several runs each. */
#define _POSIX_C_SOURCE 200809L
#include "bench_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Runs the demo with env prefix; returns the wall time in ms, or -1. */
static double run(const char *env) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "env %s '%s' > /dev/null 2>&1", env, ATTENTION_PATH);
    double t0 = bench_now_ms();
    int st = system(cmd);
    double t = bench_now_ms() - t0;
    return st == 0 ? t : -1;
}

enum { RUNS = 5 };

static double median_of(const char *env, const char *refill_kiln, const char *kiln_dir) {
    double t[RUNS];
    for (int i = 0; i < RUNS; i++) {
        if (refill_kiln) { /* a fresh, empty Kiln cache for every cold run */
            char cmd[256];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", kiln_dir);
            if (system(cmd) != 0)
                return -1;
        }
        t[i] = run(env);
        if (t[i] < 0)
            return -1;
    }
    qsort(t, RUNS, sizeof t[0], bench_cmp_double);
    return t[RUNS / 2];
}

int main(void) {
    char kiln[] = "/tmp/kiln-bench-cache-XXXXXX", mesa[] = "/tmp/kiln-bench-mesa-XXXXXX";
    if (!mkdtemp(kiln) || !mkdtemp(mesa))
        return 1;
    char cold[512], kiln_warm[512], both_warm[512];
    snprintf(cold, sizeof cold, "KILN_CACHE=1 KILN_CACHE_DIR=%s MESA_SHADER_CACHE_DISABLE=true",
             kiln);
    snprintf(kiln_warm, sizeof kiln_warm, "%s", cold);
    snprintf(both_warm, sizeof both_warm,
             "KILN_CACHE=1 KILN_CACHE_DIR=%s MESA_SHADER_CACHE_DISABLE=false "
             "MESA_SHADER_CACHE_DIR=%s",
             kiln, mesa);
    double c = median_of(cold, "refill", kiln);
    if (run(cold) < 0) /* fill Kiln's cache */
        return 1;
    double k = median_of(kiln_warm, NULL, kiln);
    if (run(both_warm) < 0) /* fill Mesa's cache too */
        return 1;
    double b = median_of(both_warm, NULL, kiln);
    char cleanup[256];
    snprintf(cleanup, sizeof cleanup, "rm -rf '%s' '%s'", kiln, mesa);
    if (system(cleanup) != 0)
        fprintf(stderr, "bench_first_result: could not remove %s and %s\n", kiln, mesa);
    if (c < 0 || k < 0 || b < 0) {
        fprintf(stderr, "bench_first_result: the demo failed\n");
        return 1;
    }
    printf("%-44s %10s %8s\n", "demo (examples/attention), fresh process", "median ms", "ratio");
    printf("%-44s %10.1f %8.2f\n", "cold (empty Kiln cache, Mesa cache off)", c, 1.0);
    printf("%-44s %10.1f %8.2f\n", "Kiln cache warm, Mesa cache off", k, k / c);
    printf("%-44s %10.1f %8.2f\n", "both warm", b, b / c);
    return 0;
}
