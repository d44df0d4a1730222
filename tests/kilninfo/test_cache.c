/* kilninfo --cache and --cache-clear against a cache filled through shaders_cache/, run as a
 * subprocess with KILN_CACHE_DIR pointing at a private directory, and with no Vulkan driver. */
#define _POSIX_C_SOURCE 200809L

#include "cache_version.h"
#include "pcache.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[256];

static int run(const char *env_and_args, char *out, size_t cap) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ASAN_OPTIONS=detect_leaks=0 KILN_CACHE_DIR=%s %s %s 2>&1", dir,
             KILNINFO_PATH, env_and_args);
    /* env_and_args may start with more VAR=value settings: put them before the program. */
    if (strncmp(env_and_args, "ENV:", 4) == 0) {
        const char *args = strchr(env_and_args, ' ');
        snprintf(cmd, sizeof cmd, "ASAN_OPTIONS=detect_leaks=0 KILN_CACHE_DIR=%s %.*s %s %s 2>&1",
                 dir, (int)(args - env_and_args - 4), env_and_args + 4, KILNINFO_PATH, args + 1);
    }
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Two entries as the engine writes them (its payload version), one of another payload version
 * (stale), and a corrupt file. */
static void fill_cache(void) {
    pcache_identity id = {.vendor_id = 0x10005, .device_id = 0, .driver_version = 1};
    pcache *pc = NULL;
    pcache_options opt = {
        .directory = dir, .identity = &id, .payload_version = ENG_CACHE_PAYLOAD_VERSION};
    assert_int_equal(pcache_open(&opt, &pc, NULL), KILN_OK);
    assert_int_equal(pcache_put(pc, "\x01\x02\xab", 3, "payload", 7, NULL), KILN_OK);
    /* A kernel entry as the engine lays it out: its magic, then its name at the name offset. */
    unsigned char kernel[ENG_CACHE_NAME_OFFSET + ENG_CACHE_NAME_SIZE + 4] = {0};
    for (int i = 0; i < 4; i++)
        kernel[i] = (unsigned char)(ENG_CACHE_PAYLOAD_MAGIC >> (8 * i));
    memcpy(kernel + ENG_CACHE_NAME_OFFSET, "E_add_4x8", 9);
    assert_int_equal(pcache_put(pc, "second", 6, kernel, sizeof kernel, NULL), KILN_OK);
    pcache_close(pc);
    opt.payload_version = ENG_CACHE_PAYLOAD_VERSION - 1;
    assert_int_equal(pcache_open(&opt, &pc, NULL), KILN_OK);
    assert_int_equal(pcache_put(pc, "older", 5, "y", 1, NULL), KILN_OK);
    pcache_close(pc);
    char path[512];
    snprintf(path, sizeof path, "%s/00000000000000000000000000000000.kc", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("not a cache file", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/keep-me.txt", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

static void test_kilninfo_cache_lists_and_clears(void **state) {
    (void)state;
    static char out[1 << 16];
    fill_cache();
    assert_int_equal(run("--cache", out, sizeof out), 0);
    assert_non_null(strstr(out, dir));
    assert_non_null(strstr(out, "0102ab "));
    assert_non_null(strstr(out, "7365636f6e64")); /* "second" */
    assert_non_null(strstr(out, " E_add_4x8\n")); /* its kernel's name */
    assert_non_null(strstr(out, "corrupt"));
    assert_non_null(strstr(out, "10005:0000"));
    assert_non_null(strstr(out, "4 entries"));
    /* JSON, parsed by python3. */
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "ASAN_OPTIONS=detect_leaks=0 KILN_CACHE_DIR=%s %s --cache --json | %s -c "
             "\"import json,sys; d=json.load(sys.stdin)['cache']; "
             "print(d['count'], sorted(e['state'] for e in d['entries']), "
             "sum(e['size'] for e in d['entries']) == d['bytes'], "
             "sorted(e['name'] for e in d['entries']))\"",
             dir, KILNINFO_PATH, PYTHON_PATH);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    /* The engine's entries are ok (kilninfo judges them with the engine's payload version);
     * only the other version's is stale. */
    assert_string_equal(out, "4 ['corrupt', 'ok', 'ok', 'stale'] True ['', '', '', 'E_add_4x8']\n");
    /* Clearing removes the four cache files and nothing else. */
    assert_int_equal(run("--cache-clear", out, sizeof out), 0);
    assert_non_null(strstr(out, "removed 4 cache files"));
    assert_int_equal(run("--cache", out, sizeof out), 0);
    assert_non_null(strstr(out, "0 entries"));
    char keep[512];
    snprintf(keep, sizeof keep, "%s/keep-me.txt", dir);
    assert_int_equal(access(keep, F_OK), 0);
    unlink(keep);
}

static void test_kilninfo_cache_needs_no_device(void **state) {
    (void)state;
    static char out[1 << 16];
    fill_cache();
    assert_int_equal(run("ENV:VK_ICD_FILENAMES=/nonexistent.json --cache", out, sizeof out), 0);
    assert_non_null(strstr(out, "4 entries"));
    assert_int_equal(run("ENV:KILN_CACHE=0 --cache", out, sizeof out), 0);
    assert_non_null(strstr(out, "off (KILN_CACHE)"));
    assert_non_null(strstr(out, "0 entries"));
    assert_int_equal(run("--cache --cache-clear", out, sizeof out), 2);
    assert_int_equal(run("ENV:VK_ICD_FILENAMES=/nonexistent.json --cache-clear", out, sizeof out),
                     0);
    assert_non_null(strstr(out, "removed 4"));
    char keep[512];
    snprintf(keep, sizeof keep, "%s/keep-me.txt", dir);
    unlink(keep);
}

int main(void) {
    unsetenv("KILN_CACHE");
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/kiln-kilninfo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kilninfo_cache_lists_and_clears),
        cmocka_unit_test(test_kilninfo_cache_needs_no_device),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(dir);
    return failed;
}
