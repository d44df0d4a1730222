/* shaders_cache/: put/get round trips, a second handle (and a second process) sees the
 * entries, where the directory comes from, KILN_CACHE=0, argument errors, and the
 * fail-the-Nth-allocation loop. */
#include "cache_helpers.h"
#include "test_alloc.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31 + seed * 7 + (i >> 8));
}

static void expect_hit(pcache *pc, const void *key, size_t key_size, const void *want,
                       size_t want_size) {
    void *got = NULL;
    size_t n = 99;
    base_error err = {0};
    assert_int_equal(pcache_get(pc, key, key_size, &got, &n, &err), KILN_OK);
    assert_non_null(got);
    assert_int_equal(n, want_size);
    if (want_size)
        assert_memory_equal(got, want, want_size);
    pcache_free(pc, got, n);
}

static void expect_miss(pcache *pc, const void *key, size_t key_size) {
    void *got = (void *)1;
    size_t n = 99;
    assert_int_equal(pcache_get(pc, key, key_size, &got, &n, NULL), KILN_ERROR_NOT_FOUND);
    assert_null(got);
    assert_int_equal(n, 0);
}

static void test_shaders_cache_store_round_trip(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(1);
    pcache *pc = helper_open(dir, &id, 0);
    assert_int_equal(pcache_mode_of(pc), PCACHE_MODE_READ_WRITE);
    assert_string_equal(pcache_directory(pc), dir);
    static unsigned char big[100000];
    fill(big, sizeof big, 3);
    const char k1[] = "kernel add f32", k2[] = "kernel sum f32";
    base_error err = {0};
    expect_miss(pc, k1, sizeof k1);
    assert_int_equal(pcache_put(pc, k1, sizeof k1, big, sizeof big, &err), KILN_OK);
    assert_int_equal(pcache_put(pc, k2, sizeof k2, "x", 1, &err), KILN_OK);
    assert_int_equal(pcache_put(pc, "", 0, "empty key", 9, &err), KILN_OK);
    assert_int_equal(pcache_put(pc, "zero", 4, NULL, 0, &err), KILN_OK);
    expect_hit(pc, k1, sizeof k1, big, sizeof big);
    expect_hit(pc, k2, sizeof k2, "x", 1);
    expect_hit(pc, "", 0, "empty key", 9);
    expect_hit(pc, "zero", 4, "", 0);
    /* A key that is a prefix of a stored one is another key. */
    expect_miss(pc, k1, sizeof k1 - 1);
    /* Replacing a payload. */
    assert_int_equal(pcache_put(pc, k2, sizeof k2, "yz", 2, &err), KILN_OK);
    expect_hit(pc, k2, sizeof k2, "yz", 2);
    pcache_stats s = pcache_stats_of(pc);
    assert_int_equal(s.hits, 5);
    assert_int_equal(s.misses, 2);
    assert_int_equal(s.writes, 5);
    assert_int_equal(s.corrupt, 0);
    assert_int_equal(s.foreign, 0);
    assert_int_equal(s.evictions, 0);
    assert_true(s.bytes_written > sizeof big);
    assert_int_equal(helper_count_files(dir, ".kc", NULL), 4);
    assert_int_equal(helper_count_files(dir, NULL, NULL), 4); /* no temporary file left */
    pcache_close(pc);
    helper_rmtree(dir);
}

static void test_shaders_cache_store_second_handle_and_process_see_entries(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(2);
    pcache *a = helper_open(dir, &id, 0);
    assert_int_equal(pcache_put(a, "k", 1, "payload", 7, NULL), KILN_OK);
    pcache *b = helper_open(dir, &id, 0);
    expect_hit(b, "k", 1, "payload", 7);
    pcache_close(b);
    pcache_close(a);
    /* A child process writes, the parent reads after it exits. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        pcache *c = NULL;
        pcache_options o = {.directory = dir, .identity = &id};
        int ok = pcache_open(&o, &c, NULL) == KILN_OK &&
                 pcache_put(c, "child", 5, "from the child", 14, NULL) == KILN_OK;
        pcache_close(c);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    pcache *d = helper_open(dir, &id, 0);
    expect_hit(d, "child", 5, "from the child", 14);
    expect_hit(d, "k", 1, "payload", 7);
    pcache_close(d);
    helper_rmtree(dir);
}

static void test_shaders_cache_store_other_device_is_a_miss(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(3), other = helper_identity(4);
    pcache *a = helper_open(dir, &id, 0);
    pcache *b = helper_open(dir, &other, 0);
    assert_int_equal(pcache_put(a, "k", 1, "for a", 5, NULL), KILN_OK);
    expect_miss(b, "k", 1);
    assert_int_equal(pcache_put(b, "k", 1, "for b", 5, NULL), KILN_OK);
    /* Different devices keep their own files side by side. */
    expect_hit(a, "k", 1, "for a", 5);
    expect_hit(b, "k", 1, "for b", 5);
    assert_int_equal(helper_count_files(dir, ".kc", NULL), 2);
    pcache_close(a);
    pcache_close(b);
    helper_rmtree(dir);
}

static void test_shaders_cache_store_payload_version_separates_entries(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(5);
    pcache *v1 = NULL, *v2 = NULL;
    assert_int_equal(
        pcache_open(&(pcache_options){.directory = dir, .identity = &id, .payload_version = 1}, &v1,
                    NULL),
        KILN_OK);
    assert_int_equal(
        pcache_open(&(pcache_options){.directory = dir, .identity = &id, .payload_version = 2}, &v2,
                    NULL),
        KILN_OK);
    assert_int_equal(pcache_put(v1, "k", 1, "old", 3, NULL), KILN_OK);
    expect_miss(v2, "k", 1);
    assert_int_equal(pcache_stats_of(v2).foreign, 1);
    assert_int_equal(pcache_put(v2, "k", 1, "new", 3, NULL), KILN_OK);
    expect_hit(v2, "k", 1, "new", 3);
    expect_miss(v1, "k", 1); /* replaced in place */
    pcache_close(v1);
    pcache_close(v2);
    helper_rmtree(dir);
}

/* Opens with directory NULL under a controlled environment and returns the directory used. */
static void expect_env_directory(const char *want) {
    pcache *pc = NULL;
    pcache_identity id = helper_identity(6);
    assert_int_equal(pcache_open(&(pcache_options){.identity = &id}, &pc, NULL), KILN_OK);
    assert_string_equal(pcache_directory(pc), want);
    assert_int_equal(pcache_mode_of(pc), PCACHE_MODE_READ_WRITE);
    struct stat st;
    assert_int_equal(stat(want, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(pcache_put(pc, "k", 1, "v", 1, NULL), KILN_OK);
    expect_hit(pc, "k", 1, "v", 1);
    pcache_close(pc);
}

static void test_shaders_cache_store_directory_from_environment(void **state) {
    (void)state;
    const char *root = helper_tempdir(0);
    char want[512], sub[512];
    char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    /* $KILN_CACHE_DIR first (created with its parents). */
    snprintf(sub, sizeof sub, "%s/explicit/deep", root);
    setenv("KILN_CACHE_DIR", sub, 1);
    setenv("XDG_CACHE_HOME", root, 1);
    expect_env_directory(sub);
    /* Then $XDG_CACHE_HOME/kiln. */
    unsetenv("KILN_CACHE_DIR");
    snprintf(want, sizeof want, "%s/kiln", root);
    expect_env_directory(want);
    /* Then ~/.cache/kiln (a relative XDG_CACHE_HOME is ignored, as the spec says). */
    setenv("XDG_CACHE_HOME", "relative", 1);
    snprintf(sub, sizeof sub, "%s/home", root);
    setenv("HOME", sub, 1);
    snprintf(want, sizeof want, "%s/home/.cache/kiln", root);
    expect_env_directory(want);
    /* No home at all: the cache is off, with one warning. */
    unsetenv("HOME");
    unsetenv("XDG_CACHE_HOME");
    helper_capture_log();
    pcache *pc = NULL;
    pcache_identity id = helper_identity(6);
    assert_int_equal(pcache_open(&(pcache_options){.identity = &id}, &pc, NULL), KILN_OK);
    assert_int_equal(pcache_mode_of(pc), PCACHE_MODE_OFF);
    assert_int_equal(pcache_put(pc, "k", 1, "v", 1, NULL), KILN_OK);
    expect_miss(pc, "k", 1);
    assert_int_equal(helper_warnings(), 1);
    helper_release_log();
    pcache_close(pc);
    if (old_home) {
        setenv("HOME", old_home, 1);
        free(old_home);
    }
    helper_rmtree(root);
}

static void test_shaders_cache_store_kiln_cache_0_disables(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(7);
    pcache *on = helper_open(dir, &id, 0);
    assert_int_equal(pcache_put(on, "k", 1, "v", 1, NULL), KILN_OK);
    static const char *const off_values[] = {"0", "off", "FALSE", "no"};
    helper_capture_log();
    for (size_t i = 0; i < 4; i++) {
        setenv("KILN_CACHE", off_values[i], 1);
        pcache *pc = helper_open(dir, &id, 0);
        assert_int_equal(pcache_mode_of(pc), PCACHE_MODE_OFF);
        assert_null(pcache_directory(pc));
        expect_miss(pc, "k", 1); /* the entry exists but the cache is off */
        assert_int_equal(pcache_put(pc, "k2", 2, "v", 1, NULL), KILN_OK);
        uint64_t removed = 7;
        assert_int_equal(pcache_clear(pc, &removed, NULL), KILN_OK);
        assert_int_equal(removed, 0);
        pcache_stats s = pcache_stats_of(pc);
        assert_int_equal(s.writes, 0);
        assert_int_equal(s.misses, 1);
        pcache_close(pc);
    }
    assert_int_equal(helper_warnings(), 0); /* turning it off is not a failure */
    helper_release_log();
    setenv("KILN_CACHE", "1", 1);
    pcache *again = helper_open(dir, &id, 0);
    assert_int_equal(pcache_mode_of(again), PCACHE_MODE_READ_WRITE);
    expect_hit(again, "k", 1, "v", 1);
    expect_miss(again, "k2", 2); /* nothing was written while off */
    pcache_close(again);
    pcache_close(on);
    unsetenv("KILN_CACHE");
    helper_rmtree(dir);
}

static void test_shaders_cache_store_rejects_bad_arguments(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(8);
    base_error err = {0};
    pcache *pc = (pcache *)1;
    assert_int_equal(pcache_open(&(pcache_options){.directory = ""}, &pc, &err),
                     KILN_ERROR_INVALID_ARGUMENT);
    assert_null(pc);
    assert_int_equal(pcache_open(NULL, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    pc = helper_open(dir, &id, 1000);
    void *out;
    size_t n;
    base_error_clear(&err);
    assert_int_equal(pcache_get(pc, NULL, 3, &out, &n, &err), KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(pcache_put(pc, "k", 1, NULL, 5, NULL), KILN_ERROR_INVALID_ARGUMENT);
    /* An entry larger than the cap is refused, not stored. */
    static unsigned char big[2000];
    base_error_clear(&err);
    assert_int_equal(pcache_put(pc, "k", 1, big, sizeof big, &err), KILN_ERROR_LIMIT_EXCEEDED);
    assert_non_null(strstr(err.message, "cap"));
    assert_int_equal(helper_count_files(dir, NULL, NULL), 0);
    pcache_close(pc);
    /* A handle without identity manages the directory but cannot read or write entries. */
    pcache *m = helper_open(dir, NULL, 0);
    base_error_clear(&err);
    assert_int_equal(pcache_put(m, "k", 1, "v", 1, &err), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "identity"));
    assert_int_equal(pcache_get(m, "k", 1, &out, &n, NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(pcache_list(m, NULL, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    pcache_close(m);
    pcache_close(NULL);
    helper_rmtree(dir);
}

static bool count_entry(void *user, const pcache_entry *e) {
    *(int *)user += e->state == PCACHE_ENTRY_OK;
    return true;
}

/* A pipeline blob (a header for id and a body) saved and loaded back. */
static kiln_status blob_round_trip(pcache *pc, const pcache_identity *id) {
    unsigned char blob[64] = {32, 0, 0, 0, VK_PIPELINE_CACHE_HEADER_VERSION_ONE};
    memcpy(blob + 8, &id->vendor_id, 4);
    memcpy(blob + 12, &id->device_id, 4);
    memcpy(blob + 16, id->pipeline_cache_uuid, VK_UUID_SIZE);
    kiln_status st = pcache_pipeline_save(pc, blob, sizeof blob, NULL);
    void *back = NULL;
    size_t n = 0;
    if (st == KILN_OK)
        st = pcache_pipeline_load(pc, &back, &n, NULL);
    if (st == KILN_OK && (n != sizeof blob || memcmp(back, blob, n) != 0))
        st = KILN_ERROR_INTERNAL;
    pcache_free(pc, back, n);
    return st;
}

/* Ends the test program with a failure when a cache call blocks, rather than hanging CI. */
static void hang_guard(int sig) {
    (void)sig;
    static const char msg[] = "a cache call blocked (on a FIFO?)\n";
    ssize_t n = write(2, msg, sizeof msg - 1);
    (void)n;
    _exit(3);
}

/* Something other than a regular file in an entry's place is a miss, never a hang: a FIFO
 * (opening it for reading would wait for a writer for ever), a directory. The pipeline blob's
 * file likewise. A put then replaces the FIFO with the entry. */
static void test_shaders_cache_store_special_files_are_misses(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(9);
    pcache *pc = helper_open(dir, &id, 0);
    assert_int_equal(pcache_put(pc, "k", 1, "v", 1, NULL), KILN_OK);
    char path[4096];
    snprintf(path, sizeof path, "%s", helper_single_entry(dir));
    void (*old)(int) = signal(SIGALRM, hang_guard);
    alarm(20);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkfifo(path, 0600), 0);
    expect_miss(pc, "k", 1);
    assert_int_equal(pcache_list(pc, count_entry, &(int){0}, NULL), KILN_OK);
    assert_int_equal(pcache_put(pc, "k", 1, "w", 1, NULL), KILN_OK); /* replaces it */
    expect_hit(pc, "k", 1, "w", 1);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0700), 0);
    expect_miss(pc, "k", 1);
    assert_int_equal(rmdir(path), 0);
    /* The pipeline blob. */
    unsigned char blob[64] = {32, 0, 0, 0, VK_PIPELINE_CACHE_HEADER_VERSION_ONE};
    memcpy(blob + 8, &id.vendor_id, 4);
    memcpy(blob + 12, &id.device_id, 4);
    memcpy(blob + 16, id.pipeline_cache_uuid, VK_UUID_SIZE);
    assert_int_equal(pcache_pipeline_save(pc, blob, sizeof blob, NULL), KILN_OK);
    snprintf(path, sizeof path, "%s", helper_single_entry(dir));
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkfifo(path, 0600), 0);
    void *back = NULL;
    size_t n = 0;
    assert_int_equal(pcache_pipeline_load(pc, &back, &n, NULL), KILN_ERROR_NOT_FOUND);
    alarm(0);
    signal(SIGALRM, old);
    pcache_close(pc);
    helper_rmtree(dir);
}

/* A directory name too long for a path turns the cache off with one warning (like a
 * directory that cannot be made); opening still succeeds and every call is a miss. */
static void test_shaders_cache_store_too_long_directory_turns_the_cache_off(void **state) {
    (void)state;
    static char dir[5000];
    memset(dir, 'd', sizeof dir - 1);
    dir[0] = '/';
    pcache_identity id = helper_identity(10);
    pcache *pc = NULL;
    helper_capture_log();
    assert_int_equal(pcache_open(&(pcache_options){.directory = dir, .identity = &id}, &pc, NULL),
                     KILN_OK);
    assert_int_equal(pcache_mode_of(pc), PCACHE_MODE_OFF);
    assert_int_equal(helper_warnings(), 1);
    assert_non_null(strstr(helper_last_warning(), "4999 bytes"));
    assert_int_equal(pcache_put(pc, "k", 1, "v", 1, NULL), KILN_OK);
    expect_miss(pc, "k", 1);
    assert_int_equal(helper_warnings(), 1);
    helper_release_log();
    pcache_close(pc);
}

/* Everything a run does, under an allocator that fails the Nth allocation. */
static kiln_status one_run(const base_allocator *a, const char *dir, const pcache_identity *id) {
    pcache *pc = NULL;
    kiln_status st =
        pcache_open(&(pcache_options){.directory = dir, .identity = id, .alloc = a}, &pc, NULL);
    if (st != KILN_OK)
        return st;
    static unsigned char payload[3000];
    void *out = NULL;
    size_t n = 0;
    st = pcache_put(pc, "alpha", 5, payload, sizeof payload, NULL);
    if (st == KILN_OK)
        st = pcache_get(pc, "alpha", 5, &out, &n, NULL);
    pcache_free(pc, out, n);
    if (st == KILN_OK) {
        uint64_t bytes;
        st = pcache_trim(pc, &bytes, NULL);
    }
    if (st == KILN_OK)
        st = blob_round_trip(pc, id);
    int listed = 0;
    if (st == KILN_OK)
        st = pcache_list(pc, count_entry, &listed, NULL);
    if (st == KILN_OK && listed != 2)
        st = KILN_ERROR_INTERNAL;
    if (st == KILN_OK)
        st = pcache_clear(pc, NULL, NULL);
    pcache_close(pc);
    return st;
}

static void test_shaders_cache_store_fail_nth_allocation(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(9);
    test_alloc ta = {0};
    base_allocator a = test_allocator(&ta);
    assert_int_equal(one_run(&a, dir, &id), KILN_OK);
    long total = ta.count;
    assert_true(total >= 4);
    for (long i = 1; i <= total; i++) {
        test_alloc t = {.fail_at = i};
        base_allocator fa = test_allocator(&t);
        kiln_status st = one_run(&fa, dir, &id);
        assert_int_equal(st, KILN_ERROR_OUT_OF_HOST_MEMORY);
        assert_int_equal(t.failures, 1);
        assert_int_equal(t.live_blocks, 0);
        assert_int_equal(t.size_mismatches, 0);
    }
    assert_int_equal(ta.live_blocks, 0);
    helper_rmtree(dir);
}

int main(void) {
    unsetenv("KILN_CACHE");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shaders_cache_store_round_trip),
        cmocka_unit_test(test_shaders_cache_store_second_handle_and_process_see_entries),
        cmocka_unit_test(test_shaders_cache_store_other_device_is_a_miss),
        cmocka_unit_test(test_shaders_cache_store_payload_version_separates_entries),
        cmocka_unit_test(test_shaders_cache_store_directory_from_environment),
        cmocka_unit_test(test_shaders_cache_store_kiln_cache_0_disables),
        cmocka_unit_test(test_shaders_cache_store_rejects_bad_arguments),
        cmocka_unit_test(test_shaders_cache_store_fail_nth_allocation),
        cmocka_unit_test(test_shaders_cache_store_special_files_are_misses),
        cmocka_unit_test(test_shaders_cache_store_too_long_directory_turns_the_cache_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
