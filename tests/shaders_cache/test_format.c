/* shaders_cache/: bad files are misses, counted, never handed out, and replaced by the next
 * put: every truncated prefix, a flipped bit in every region, foreign and stale headers,
 * files that are not cache files at all. pcache_list reports what each file is. */
#include "cache_helpers.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

enum { HEADER = 72, KEY_SIZE = 11, PAYLOAD_SIZE = 300 };
static const char key[KEY_SIZE + 1] = "kernel-0042";
static unsigned char payload[PAYLOAD_SIZE];

static void init_payload(void) {
    for (int i = 0; i < PAYLOAD_SIZE; i++)
        payload[i] = (unsigned char)(i * 13 + 1);
}

/* Writes the one entry of the test into a fresh directory and returns its bytes. */
static unsigned char *write_entry(pcache *pc, const char *dir, size_t *size) {
    assert_int_equal(pcache_put(pc, key, KEY_SIZE, payload, PAYLOAD_SIZE, NULL), KILN_OK);
    unsigned char *file = helper_read(helper_single_entry(dir), size);
    assert_int_equal(*size, HEADER + KEY_SIZE + PAYLOAD_SIZE + 8);
    return file;
}

static void expect_miss(pcache *pc) {
    void *got = (void *)1;
    size_t n = 5;
    assert_int_equal(pcache_get(pc, key, KEY_SIZE, &got, &n, NULL), KILN_ERROR_NOT_FOUND);
    assert_null(got);
    assert_int_equal(n, 0);
}

static void expect_hit(pcache *pc) {
    void *got = NULL;
    size_t n = 0;
    assert_int_equal(pcache_get(pc, key, KEY_SIZE, &got, &n, NULL), KILN_OK);
    assert_int_equal(n, PAYLOAD_SIZE);
    assert_memory_equal(got, payload, PAYLOAD_SIZE);
    pcache_free(pc, got, n);
}

static void test_shaders_cache_format_every_truncated_prefix_is_a_miss(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(1);
    pcache *pc = helper_open(dir, &id, 0);
    size_t size;
    unsigned char *file = write_entry(pc, dir, &size);
    char path[4096];
    snprintf(path, sizeof path, "%s", helper_single_entry(dir));
    for (size_t len = 0; len < size; len++) {
        helper_write(path, file, len);
        pcache_stats before = pcache_stats_of(pc);
        expect_miss(pc);
        pcache_stats after = pcache_stats_of(pc);
        assert_int_equal(after.corrupt, before.corrupt + 1);
        assert_int_equal(after.misses, before.misses + 1);
        /* The next put replaces it. */
        if (len % 16 == 0 || len >= size - 9) {
            assert_int_equal(pcache_put(pc, key, KEY_SIZE, payload, PAYLOAD_SIZE, NULL), KILN_OK);
            expect_hit(pc);
        }
    }
    assert_int_equal(pcache_stats_of(pc).corrupt, size);
    free(file);
    pcache_close(pc);
    helper_rmtree(dir);
}

static const char *region_of(size_t offset, size_t size) {
    if (offset < HEADER)
        return "header";
    if (offset < HEADER + KEY_SIZE)
        return "key";
    if (offset < size - 8)
        return "payload";
    return "checksum";
}

static void test_shaders_cache_format_flipped_bit_in_each_region_is_a_miss(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(2);
    pcache *pc = helper_open(dir, &id, 0);
    size_t size;
    unsigned char *file = write_entry(pc, dir, &size);
    char path[4096];
    snprintf(path, sizeof path, "%s", helper_single_entry(dir));
    int per_region[4] = {0};
    static const char *const regions[4] = {"header", "key", "payload", "checksum"};
    for (size_t off = 0; off < size; off++) {
        file[off] ^= (unsigned char)(1u << (off % 8));
        helper_write(path, file, size);
        pcache_stats before = pcache_stats_of(pc);
        expect_miss(pc);
        pcache_stats after = pcache_stats_of(pc);
        /* A flip in the format version reads as another format; anything else is corrupt. */
        bool format_field = off >= 8 && off < 12;
        assert_int_equal(after.corrupt, before.corrupt + (format_field ? 0 : 1));
        assert_int_equal(after.foreign, before.foreign + (format_field ? 1 : 0));
        file[off] ^= (unsigned char)(1u << (off % 8));
        for (int r = 0; r < 4; r++)
            per_region[r] += strcmp(region_of(off, size), regions[r]) == 0;
    }
    for (int r = 0; r < 4; r++)
        assert_true(per_region[r] >= 8);
    /* The restored bytes are a hit again; a put after corruption replaces the file. */
    helper_write(path, file, size);
    expect_hit(pc);
    file[HEADER + KEY_SIZE + 5] ^= 0x10;
    helper_write(path, file, size);
    expect_miss(pc);
    assert_int_equal(pcache_put(pc, key, KEY_SIZE, payload, PAYLOAD_SIZE, NULL), KILN_OK);
    expect_hit(pc);
    free(file);
    pcache_close(pc);
    helper_rmtree(dir);
}

/* A handle for an identity that shares vendor and device (so the same file name) but differs
 * in one driver field. */
static void check_foreign_identity(const char *dir, pcache_identity mine, pcache_identity theirs) {
    pcache *me = helper_open(dir, &mine, 0);
    pcache *them = helper_open(dir, &theirs, 0);
    assert_int_equal(pcache_put(them, key, KEY_SIZE, payload, PAYLOAD_SIZE, NULL), KILN_OK);
    assert_int_equal(helper_count_files(dir, ".kc", NULL), 1);
    expect_miss(me);
    pcache_stats s = pcache_stats_of(me);
    assert_int_equal(s.foreign, 1);
    assert_int_equal(s.corrupt, 0);
    assert_int_equal(pcache_put(me, key, KEY_SIZE, payload, PAYLOAD_SIZE, NULL), KILN_OK);
    assert_int_equal(helper_count_files(dir, ".kc", NULL), 1); /* replaced in place */
    expect_hit(me);
    expect_miss(them);
    pcache_close(me);
    pcache_close(them);
}

static void test_shaders_cache_format_other_driver_is_ignored(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity mine = helper_identity(3), theirs = mine;
    theirs.driver_version++;
    check_foreign_identity(dir, mine, theirs);
    theirs = mine;
    theirs.driver_id = 99;
    check_foreign_identity(dir, mine, theirs);
    theirs = mine;
    theirs.pipeline_cache_uuid[15] ^= 1;
    check_foreign_identity(dir, mine, theirs);
    helper_rmtree(dir);
}

static void test_shaders_cache_format_other_engine_version_is_stale(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(4);
    pcache *old = NULL;
    assert_int_equal(
        pcache_open(&(pcache_options){.directory = dir, .identity = &id, .engine_version = 1}, &old,
                    NULL),
        KILN_OK);
    assert_int_equal(pcache_put(old, key, KEY_SIZE, payload, PAYLOAD_SIZE, NULL), KILN_OK);
    pcache *now = helper_open(dir, &id, 0);
    expect_miss(now);
    assert_int_equal(pcache_stats_of(now).foreign, 1);
    pcache_close(old);
    pcache_close(now);
    helper_rmtree(dir);
}

/* Files with a valid checksum but a header this build must not trust. */
static void test_shaders_cache_format_crafted_headers_are_rejected(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(5);
    pcache *pc = helper_open(dir, &id, 0);
    size_t size;
    unsigned char *file = write_entry(pc, dir, &size);
    char path[4096];
    snprintf(path, sizeof path, "%s", helper_single_entry(dir));
    static const struct {
        size_t offset;
        unsigned char value;
        bool corrupt; /* else foreign */
    } cases[] = {
        {20, 4, false},  /* pointer size 4 */
        {21, 2, false},  /* big-endian writer */
        {22, 3, true},   /* unknown kind */
        {22, 2, false},  /* a pipeline blob where an entry is expected: another key */
        {23, 1, true},   /* reserved byte */
        {60, 1, true},   /* reserved word */
        {56, 200, true}, /* key size past the payload */
        {64, 1, true},   /* payload size that disagrees with the file size */
        {16, 7, false},  /* payload version */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char *copy = malloc(size);
        memcpy(copy, file, size);
        copy[cases[i].offset] = cases[i].value;
        helper_fix_checksum(copy, size);
        helper_write(path, copy, size);
        pcache_stats before = pcache_stats_of(pc);
        expect_miss(pc);
        pcache_stats after = pcache_stats_of(pc);
        if (cases[i].offset == 22 && cases[i].value == 2) {
            /* Sound and for this device: a different key behind the same name. */
            assert_int_equal(after.corrupt + after.foreign, before.corrupt + before.foreign);
        } else {
            assert_int_equal(after.corrupt, before.corrupt + cases[i].corrupt);
            assert_int_equal(after.foreign, before.foreign + !cases[i].corrupt);
        }
        free(copy);
    }
    /* The unmodified bytes with the checksum recomputed still hit. */
    helper_fix_checksum(file, size);
    helper_write(path, file, size);
    expect_hit(pc);
    free(file);
    pcache_close(pc);
    helper_rmtree(dir);
}

static void test_shaders_cache_format_non_cache_files_are_misses(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(6);
    pcache *pc = helper_open(dir, &id, 0);
    size_t size;
    unsigned char *file = write_entry(pc, dir, &size);
    char path[4096], other[4096];
    snprintf(path, sizeof path, "%s", helper_single_entry(dir));
    /* A directory, a symbolic link and random bytes in the entry's place. */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0700), 0);
    expect_miss(pc);
    assert_int_equal(rmdir(path), 0);
    snprintf(other, sizeof other, "%s/elsewhere", dir);
    helper_write(other, file, size);
    assert_int_equal(symlink(other, path), 0);
    expect_miss(pc); /* a link is never followed */
    assert_int_equal(unlink(path), 0);
    helper_write(path, "#!/bin/sh\nrm -rf /\n", 19);
    expect_miss(pc);
    pcache_stats s = pcache_stats_of(pc);
    assert_int_equal(s.hits, 0);
    assert_int_equal(s.misses, 3);
    assert_int_equal(pcache_put(pc, key, KEY_SIZE, payload, PAYLOAD_SIZE, NULL), KILN_OK);
    expect_hit(pc);
    /* Clearing removes cache files only. */
    uint64_t removed = 0;
    assert_int_equal(pcache_clear(pc, &removed, NULL), KILN_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(helper_count_files(dir, NULL, NULL), 1); /* "elsewhere" stays */
    free(file);
    pcache_close(pc);
    helper_rmtree(dir);
}

typedef struct listing {
    int count[4];
    int total;
    uint64_t payload_of_ok;
    bool saw_key;
} listing;

static bool collect(void *user, const pcache_entry *e) {
    listing *l = user;
    l->count[e->state]++;
    l->total++;
    if (e->state == PCACHE_ENTRY_OK) {
        assert_int_equal(e->kind, PCACHE_KIND_ENTRY);
        assert_int_equal(e->file_size, HEADER + e->key_size + e->payload_size + 8);
        assert_true(e->last_use_sec > 1000000000);
        if (e->key_size == KEY_SIZE && memcmp(e->key, key, KEY_SIZE) == 0) {
            l->saw_key = true;
            l->payload_of_ok = e->payload_size;
        }
    }
    if (e->state == PCACHE_ENTRY_CORRUPT)
        assert_null(e->key);
    return true;
}

static void test_shaders_cache_format_list_reports_each_state(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(7), other = helper_identity(8);
    pcache *pc = helper_open(dir, &id, 0);
    pcache *them = helper_open(dir, &other, 0);
    pcache *old = NULL;
    assert_int_equal(
        pcache_open(&(pcache_options){.directory = dir, .identity = &id, .engine_version = 3}, &old,
                    NULL),
        KILN_OK);
    assert_int_equal(pcache_put(pc, key, KEY_SIZE, payload, PAYLOAD_SIZE, NULL), KILN_OK);
    assert_int_equal(pcache_put(them, "theirs", 6, "x", 1, NULL), KILN_OK);
    assert_int_equal(pcache_put(old, "old", 3, "y", 1, NULL), KILN_OK);
    char path[4096];
    snprintf(path, sizeof path, "%s/0123456789abcdef0123456789abcdef.kc", dir);
    helper_write(path, "garbage", 7);
    snprintf(path, sizeof path, "%s/not-a-cache-file.kc", dir);
    helper_write(path, "ignored", 7);
    listing l = {0};
    assert_int_equal(pcache_list(pc, collect, &l, NULL), KILN_OK);
    assert_int_equal(l.total, 4);
    assert_int_equal(l.count[PCACHE_ENTRY_OK], 1);
    assert_int_equal(l.count[PCACHE_ENTRY_OTHER_DEVICE], 1);
    assert_int_equal(l.count[PCACHE_ENTRY_STALE], 1);
    assert_int_equal(l.count[PCACHE_ENTRY_CORRUPT], 1);
    assert_int_equal(l.payload_of_ok, PAYLOAD_SIZE);
    assert_true(l.saw_key);
    /* A handle without identity sees both devices' entries as OK. */
    pcache *m = helper_open(dir, NULL, 0);
    listing lm = {0};
    assert_int_equal(pcache_list(m, collect, &lm, NULL), KILN_OK);
    assert_int_equal(lm.count[PCACHE_ENTRY_OK], 2);
    pcache_close(m);
    pcache_close(pc);
    pcache_close(them);
    pcache_close(old);
    helper_rmtree(dir);
}

int main(void) {
    unsetenv("KILN_CACHE");
    init_payload();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shaders_cache_format_every_truncated_prefix_is_a_miss),
        cmocka_unit_test(test_shaders_cache_format_flipped_bit_in_each_region_is_a_miss),
        cmocka_unit_test(test_shaders_cache_format_other_driver_is_ignored),
        cmocka_unit_test(test_shaders_cache_format_other_engine_version_is_stale),
        cmocka_unit_test(test_shaders_cache_format_crafted_headers_are_rejected),
        cmocka_unit_test(test_shaders_cache_format_non_cache_files_are_misses),
        cmocka_unit_test(test_shaders_cache_format_list_reports_each_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
