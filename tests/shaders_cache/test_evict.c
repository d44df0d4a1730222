/* shaders_cache/: the size cap. Eviction keeps the directory under the cap, removes the least
 * recently used entries first, a hit records a use, old temporary files are cleaned up, and
 * files that are not the cache's are never counted or removed. */
#include "cache_helpers.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

enum { CAP = 20000, PAYLOAD = 1000, FILE_SIZE = 72 + 8 + PAYLOAD + 8 };

static unsigned char payload[PAYLOAD];

static void key_of(int i, char out[9]) {
    snprintf(out, 9, "key%05u", (unsigned)i % 100000u);
}

static void put(pcache *pc, int i) {
    char k[9];
    key_of(i, k);
    payload[0] = (unsigned char)i;
    assert_int_equal(pcache_put(pc, k, 8, payload, PAYLOAD, NULL), KILN_OK);
}

static bool has(pcache *pc, int i) {
    char k[9];
    key_of(i, k);
    void *p = NULL;
    size_t n = 0;
    kiln_status st = pcache_get(pc, k, 8, &p, &n, NULL);
    if (st == KILN_OK) {
        assert_int_equal(n, PAYLOAD);
        assert_int_equal(((unsigned char *)p)[0], (unsigned char)i);
    }
    pcache_free(pc, p, n);
    return st == KILN_OK;
}

/* The path of entry i, found through a listing (names are hashes). */
typedef struct find {
    char key[9];
    char name[64];
} find;

static bool find_fn(void *user, const pcache_entry *e) {
    find *f = user;
    if (e->key && e->key_size == 8 && memcmp(e->key, f->key, 8) == 0) {
        snprintf(f->name, sizeof f->name, "%s", e->file_name);
        return false;
    }
    return true;
}

static const char *path_of(pcache *pc, const char *dir, int i) {
    static char path[4096];
    find f = {0};
    key_of(i, f.key);
    assert_int_equal(pcache_list(pc, find_fn, &f, NULL), KILN_OK);
    assert_true(f.name[0] != '\0');
    snprintf(path, sizeof path, "%s/%s", dir, f.name);
    return path;
}

static void expect_under_cap(const char *dir) {
    uint64_t bytes = 0;
    helper_count_files(dir, ".kc", &bytes);
    assert_true(bytes <= CAP);
}

static void test_shaders_cache_evict_least_recently_used_first(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(1);
    pcache *pc = helper_open(dir, &id, CAP);
    for (int i = 0; i < 15; i++)
        put(pc, i);
    /* Entry i was last used at t0 + i; then entry 0 is used (a hit touches it). */
    int64_t t0 = (int64_t)time(NULL) - 10000;
    for (int i = 0; i < 15; i++)
        helper_set_mtime(path_of(pc, dir, i), t0 + i);
    assert_true(has(pc, 0));
    assert_true(helper_mtime_ns(path_of(pc, dir, 0)) > (t0 + 100) * 1000000000ll);
    assert_int_equal(helper_mtime_ns(path_of(pc, dir, 1)), (t0 + 1) * 1000000000ll);
    for (int i = 15; i < 19; i++) {
        put(pc, i);
        expect_under_cap(dir);
    }
    /* 19 files of FILE_SIZE exceeded the cap: the oldest went until 3/4 of the cap was left. */
    pcache_stats s = pcache_stats_of(pc);
    int evicted = (int)s.evictions;
    assert_int_equal(evicted, (19 * FILE_SIZE - CAP / 4 * 3 + FILE_SIZE - 1) / FILE_SIZE);
    assert_true(has(pc, 0)); /* recently used */
    for (int i = 1; i <= evicted; i++)
        assert_false(has(pc, i));
    for (int i = evicted + 1; i < 19; i++)
        assert_true(has(pc, i));
    pcache_close(pc);
    helper_rmtree(dir);
}

static void test_shaders_cache_evict_keeps_directory_under_cap(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(2);
    pcache *pc = helper_open(dir, &id, CAP);
    /* Another file in the directory is neither counted nor removed. */
    char other[4096];
    snprintf(other, sizeof other, "%s/README", dir);
    static unsigned char big[50000];
    helper_write(other, big, sizeof big);
    for (int i = 0; i < 120; i++) {
        put(pc, i);
        expect_under_cap(dir);
        assert_true(has(pc, i)); /* what was just written survives its own eviction */
    }
    pcache_stats s = pcache_stats_of(pc);
    assert_true(s.evictions >= 120 - CAP / FILE_SIZE);
    assert_int_equal(s.writes, 120);
    assert_int_equal(helper_count_files(dir, "README", NULL), 1);
    pcache_close(pc);
    helper_rmtree(dir);
}

static void test_shaders_cache_evict_trim_catches_other_writers(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(3);
    pcache *a = helper_open(dir, &id, CAP);
    put(a, 0); /* a has scanned: it believes the directory holds one file */
    /* b writes with a larger cap: a's count does not know. */
    pcache *b = helper_open(dir, &id, 10 * CAP);
    for (int i = 1; i < 40; i++)
        put(b, i);
    uint64_t bytes = 0;
    helper_count_files(dir, ".kc", &bytes);
    assert_int_equal(bytes, 40 * FILE_SIZE);
    uint64_t after = 0;
    assert_int_equal(pcache_trim(a, &after, NULL), KILN_OK);
    expect_under_cap(dir);
    assert_true(after <= CAP / 4 * 3);
    helper_count_files(dir, ".kc", &bytes);
    assert_int_equal(after, bytes);
    pcache_close(a);
    pcache_close(b);
    helper_rmtree(dir);
}

static void test_shaders_cache_evict_removes_old_temporary_files(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(4);
    pcache *pc = helper_open(dir, &id, CAP);
    char old_tmp[4096], new_tmp[4096];
    snprintf(old_tmp, sizeof old_tmp, "%s/0123456789abcdef0123456789abcdef.kc.tmp.77.0", dir);
    snprintf(new_tmp, sizeof new_tmp, "%s/0123456789abcdef0123456789abcdef.kc.tmp.78.0", dir);
    helper_write(old_tmp, "partial", 7);
    helper_write(new_tmp, "writing", 7);
    helper_set_mtime(old_tmp, (int64_t)time(NULL) - 3600);
    assert_int_equal(pcache_trim(pc, NULL, NULL), KILN_OK);
    assert_int_equal(access(old_tmp, F_OK), -1); /* left by a crash: removed */
    assert_int_equal(access(new_tmp, F_OK), 0);  /* maybe another process's write: kept */
    /* A clear removes temporary files too. */
    uint64_t removed = 0;
    assert_int_equal(pcache_clear(pc, &removed, NULL), KILN_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(helper_count_files(dir, NULL, NULL), 0);
    pcache_close(pc);
    helper_rmtree(dir);
}

static void test_shaders_cache_evict_only_usable_hits_record_use(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(5), other = helper_identity(5);
    other.driver_version++;
    pcache *pc = helper_open(dir, &id, CAP);
    pcache *them = helper_open(dir, &other, CAP);
    put(pc, 1);
    char path[4096];
    snprintf(path, sizeof path, "%s", path_of(pc, dir, 1));
    int64_t old = (int64_t)time(NULL) - 5000;
    helper_set_mtime(path, old);
    assert_false(has(them, 1)); /* another driver's miss does not count as a use */
    assert_int_equal(helper_mtime_ns(path), old * 1000000000ll);
    assert_int_equal(pcache_list(pc, find_fn, &(find){.key = "key00001"}, NULL), KILN_OK);
    assert_int_equal(helper_mtime_ns(path), old * 1000000000ll); /* neither does a listing */
    assert_true(has(pc, 1));
    assert_true(helper_mtime_ns(path) > old * 1000000000ll);
    pcache_close(pc);
    pcache_close(them);
    helper_rmtree(dir);
}

int main(void) {
    unsetenv("KILN_CACHE");
    memset(payload, 0x5a, sizeof payload);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shaders_cache_evict_least_recently_used_first),
        cmocka_unit_test(test_shaders_cache_evict_keeps_directory_under_cap),
        cmocka_unit_test(test_shaders_cache_evict_trim_catches_other_writers),
        cmocka_unit_test(test_shaders_cache_evict_removes_old_temporary_files),
        cmocka_unit_test(test_shaders_cache_evict_only_usable_hits_record_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
