/* shaders_cache/: injected I/O failures (tests run as root, so a read-only or full disk is
 * simulated through the fault hook). A failing write makes the handle read-only with ONE
 * warning and leaves no temporary file; a directory that cannot be created turns the cache
 * off; read failures are misses; nothing crashes. */
#include "cache_helpers.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

typedef struct fault {
    pcache_io_op op;
    int error;
    int calls[PCACHE_IO_OP_COUNT_];
} fault;

static int inject(void *user, pcache_io_op op, const char *path) {
    fault *f = user;
    assert_non_null(path);
    f->calls[op]++;
    return op == f->op ? f->error : 0;
}

static pcache *open_faulty(const char *dir, const pcache_identity *id, fault *f, bool durable) {
    pcache *pc = NULL;
    pcache_options o = {.directory = dir,
                        .identity = id,
                        .durable = durable,
                        .io_fault = inject,
                        .io_fault_user = f};
    assert_int_equal(pcache_open(&o, &pc, NULL), KILN_OK);
    return pc;
}

static bool hit(pcache *pc, const char *key) {
    void *p = NULL;
    size_t n = 0;
    kiln_status st = pcache_get(pc, key, strlen(key), &p, &n, NULL);
    pcache_free(pc, p, n);
    return st == KILN_OK;
}

/* One failing write step: the put fails with KILN_ERROR_IO, the handle becomes read-only with
 * one warning, entries written before are still read, later puts do nothing. */
static void check_write_failure(pcache_io_op op, int error, bool durable) {
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(1);
    fault f = {.op = PCACHE_IO_OP_COUNT_};
    pcache *pc = open_faulty(dir, &id, &f, durable);
    assert_int_equal(pcache_put(pc, "before", 6, "v", 1, NULL), KILN_OK);
    helper_capture_log();
    f.op = op;
    f.error = error;
    base_error err = {0};
    assert_int_equal(pcache_put(pc, "k", 1, "payload", 7, &err), KILN_ERROR_IO);
    assert_non_null(strstr(err.message, strerror(error)));
    assert_int_equal(pcache_mode_of(pc), PCACHE_MODE_READ_ONLY);
    assert_int_equal(helper_warnings(), 1);
    assert_non_null(strstr(helper_last_warning(), dir));
    assert_non_null(strstr(helper_last_warning(), strerror(error)));
    assert_int_equal(helper_count_files(dir, NULL, NULL), 1); /* no temporary file left */
    /* Degraded: no more write attempts, no more warnings, reads still work. */
    int creates = f.calls[PCACHE_IO_CREATE];
    for (int i = 0; i < 5; i++)
        assert_int_equal(pcache_put(pc, "k", 1, "payload", 7, NULL), KILN_OK);
    assert_int_equal(f.calls[PCACHE_IO_CREATE], creates);
    assert_int_equal(helper_warnings(), 1);
    assert_true(hit(pc, "before"));
    assert_false(hit(pc, "k"));
    pcache_stats s = pcache_stats_of(pc);
    assert_int_equal(s.write_failures, 1);
    assert_int_equal(s.writes, 1);
    helper_release_log();
    pcache_close(pc);
    helper_rmtree(dir);
}

static void test_shaders_cache_faults_write_fails_full_disk(void **state) {
    (void)state;
    check_write_failure(PCACHE_IO_WRITE, ENOSPC, false);
}

static void test_shaders_cache_faults_create_fails_read_only(void **state) {
    (void)state;
    check_write_failure(PCACHE_IO_CREATE, EROFS, false);
}

static void test_shaders_cache_faults_rename_fails(void **state) {
    (void)state;
    check_write_failure(PCACHE_IO_RENAME, EACCES, false);
}

static void test_shaders_cache_faults_fsync_fails(void **state) {
    (void)state;
    check_write_failure(PCACHE_IO_SYNC, EIO, true);
}

static void test_shaders_cache_faults_directory_not_creatable(void **state) {
    (void)state;
    const char *root = helper_tempdir(0);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/a/b/c", root);
    pcache_identity id = helper_identity(2);
    fault f = {.op = PCACHE_IO_MKDIR, .error = EACCES};
    helper_capture_log();
    pcache *pc = open_faulty(dir, &id, &f, false);
    assert_int_equal(pcache_mode_of(pc), PCACHE_MODE_OFF);
    assert_int_equal(helper_warnings(), 1);
    assert_non_null(strstr(helper_last_warning(), "creating the cache directory"));
    assert_int_equal(pcache_put(pc, "k", 1, "v", 1, NULL), KILN_OK);
    assert_false(hit(pc, "k"));
    void *blob = NULL;
    size_t n = 0;
    assert_int_equal(pcache_pipeline_load(pc, &blob, &n, NULL), KILN_ERROR_NOT_FOUND);
    uint64_t removed = 5;
    assert_int_equal(pcache_clear(pc, &removed, NULL), KILN_OK);
    assert_int_equal(removed, 0);
    assert_int_equal(f.calls[PCACHE_IO_CREATE] + f.calls[PCACHE_IO_OPEN], 0);
    assert_int_equal(helper_warnings(), 1);
    assert_int_equal(helper_count_files(root, NULL, NULL), 0);
    helper_release_log();
    pcache_close(pc);
    /* A file where the directory should be: off as well. */
    snprintf(dir, sizeof dir, "%s/file", root);
    helper_write(dir, "x", 1);
    helper_capture_log();
    pc = helper_open(dir, &id, 0);
    assert_int_equal(pcache_mode_of(pc), PCACHE_MODE_OFF);
    assert_int_equal(helper_warnings(), 1);
    helper_release_log();
    pcache_close(pc);
    helper_rmtree(root);
}

static void test_shaders_cache_faults_read_failures_are_misses(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(3);
    fault f = {.op = PCACHE_IO_OP_COUNT_};
    pcache *pc = open_faulty(dir, &id, &f, false);
    assert_int_equal(pcache_put(pc, "k", 1, "v", 1, NULL), KILN_OK);
    helper_capture_log();
    static const pcache_io_op ops[] = {PCACHE_IO_OPEN, PCACHE_IO_READ};
    for (size_t i = 0; i < 2; i++) {
        f.op = ops[i];
        f.error = EIO;
        assert_false(hit(pc, "k"));
    }
    /* A failed touch only loses the LRU update: the hit stands. */
    f.op = PCACHE_IO_TOUCH;
    assert_true(hit(pc, "k"));
    f.op = PCACHE_IO_OP_COUNT_;
    assert_true(hit(pc, "k"));
    assert_int_equal(pcache_mode_of(pc), PCACHE_MODE_READ_WRITE);
    assert_int_equal(helper_warnings(), 0);
    pcache_stats s = pcache_stats_of(pc);
    assert_int_equal(s.misses, 2);
    assert_int_equal(s.hits, 2);
    assert_int_equal(s.corrupt, 0);
    helper_release_log();
    pcache_close(pc);
    helper_rmtree(dir);
}

static bool count_fn(void *user, const pcache_entry *e) {
    (void)e;
    ++*(int *)user;
    return true;
}

static void test_shaders_cache_faults_listing_and_unlink_failures(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(4);
    fault f = {.op = PCACHE_IO_OPENDIR, .error = EACCES};
    pcache *pc = NULL;
    assert_int_equal(pcache_open(&(pcache_options){.directory = dir,
                                                   .identity = &id,
                                                   .max_bytes = 1000,
                                                   .io_fault = inject,
                                                   .io_fault_user = &f},
                                 &pc, NULL),
                     KILN_OK);
    /* The first put cannot scan: it still writes. */
    static unsigned char payload[300];
    assert_int_equal(pcache_put(pc, "a", 1, payload, sizeof payload, NULL), KILN_OK);
    base_error err = {0};
    int n = 0;
    assert_int_equal(pcache_list(pc, count_fn, &n, &err), KILN_ERROR_IO);
    assert_non_null(strstr(err.message, dir));
    assert_int_equal(pcache_trim(pc, NULL, NULL), KILN_ERROR_IO);
    assert_int_equal(pcache_clear(pc, NULL, NULL), KILN_ERROR_IO);
    /* Eviction whose unlinks fail leaves the files and carries on. */
    f.op = PCACHE_IO_UNLINK;
    f.error = EPERM;
    for (int i = 0; i < 6; i++) {
        char k[2] = {(char)('b' + i), 0};
        assert_int_equal(pcache_put(pc, k, 1, payload, sizeof payload, NULL), KILN_OK);
    }
    assert_int_equal(pcache_stats_of(pc).evictions, 0);
    assert_int_equal(helper_count_files(dir, ".kc", NULL), 7);
    uint64_t removed = 9;
    assert_int_equal(pcache_clear(pc, &removed, &err), KILN_ERROR_IO);
    assert_int_equal(removed, 0);
    f.op = PCACHE_IO_OP_COUNT_;
    assert_int_equal(pcache_list(pc, count_fn, &n, NULL), KILN_OK);
    assert_int_equal(n, 7);
    assert_int_equal(pcache_mode_of(pc), PCACHE_MODE_READ_WRITE);
    pcache_close(pc);
    helper_rmtree(dir);
}

int main(void) {
    unsetenv("KILN_CACHE");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shaders_cache_faults_write_fails_full_disk),
        cmocka_unit_test(test_shaders_cache_faults_create_fails_read_only),
        cmocka_unit_test(test_shaders_cache_faults_rename_fails),
        cmocka_unit_test(test_shaders_cache_faults_fsync_fails),
        cmocka_unit_test(test_shaders_cache_faults_directory_not_creatable),
        cmocka_unit_test(test_shaders_cache_faults_read_failures_are_misses),
        cmocka_unit_test(test_shaders_cache_faults_listing_and_unlink_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
