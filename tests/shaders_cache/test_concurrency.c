/* shaders_cache/: processes filling one cache at the same moment. N children are released
 * together through a pipe and each runs ROUNDS rounds of puts (keys shared by all, keys of
 * its own, the device's pipeline blob) and gets; every hit must be a payload some child wrote,
 * whole. Afterwards every file parses and checksums, no temporary file is left, and a trim brings
 * the directory under its cap. Run with a roomy cap and with a cap small enough to evict
 * constantly. */
#include "cache_helpers.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

enum { CHILDREN = 6, ROUNDS = 40, MAX_PAYLOAD = 12000 };

/* A payload that proves itself: a length, a writer tag, then bytes derived from both. */
static size_t make_payload(unsigned char *p, unsigned child, unsigned round) {
    size_t n = 16 + (child * 7919u + round * 104729u) % (MAX_PAYLOAD - 16);
    uint32_t tag = child << 16 | round;
    memcpy(p, &n, sizeof n);
    memcpy(p + 8, &tag, sizeof tag);
    for (size_t i = 12; i < n; i++)
        p[i] = (unsigned char)(i * 131 + tag * 17);
    return n;
}

static bool payload_whole(const unsigned char *p, size_t n) {
    size_t want;
    uint32_t tag;
    if (n < 16)
        return false;
    memcpy(&want, p, sizeof want);
    memcpy(&tag, p + 8, sizeof tag);
    if (want != n)
        return false;
    for (size_t i = 12; i < n; i++)
        if (p[i] != (unsigned char)(i * 131 + tag * 17))
            return false;
    return true;
}

/* A pipeline-cache blob for id: its Vulkan header, then a body that proves itself. */
static size_t make_blob(const pcache_identity *id, unsigned char *p, unsigned child,
                        unsigned round) {
    size_t n = make_payload(p + 32, child, round) + 32;
    uint32_t words[4] = {32, VK_PIPELINE_CACHE_HEADER_VERSION_ONE, id->vendor_id, id->device_id};
    memcpy(p, words, sizeof words);
    memcpy(p + 16, id->pipeline_cache_uuid, VK_UUID_SIZE);
    return n;
}

/* The child's whole life; returns its exit status. */
static int child_main(const char *dir, unsigned child, uint64_t cap, int start_fd) {
    char go;
    if (read(start_fd, &go, 1) < 0)
        return 2;
    pcache_identity id = helper_identity(1);
    pcache *pc = NULL;
    pcache_options o = {.directory = dir, .identity = &id, .max_bytes = cap};
    if (pcache_open(&o, &pc, NULL) != KILN_OK)
        return 3;
    static unsigned char buf[MAX_PAYLOAD + 32];
    int bad = 0;
    for (unsigned r = 0; r < ROUNDS && !bad; r++) {
        char shared[16], own[24];
        snprintf(shared, sizeof shared, "shared-%u", r % 3);
        snprintf(own, sizeof own, "child-%u-%u", child, r % 4);
        size_t n = make_payload(buf, child, r);
        bad |= pcache_put(pc, shared, strlen(shared), buf, n, NULL) != KILN_OK;
        bad |= pcache_put(pc, own, strlen(own), buf, n, NULL) != KILN_OK;
        bad |= pcache_pipeline_save(pc, buf, make_blob(&id, buf, child, r), NULL) != KILN_OK;
        const char *look[2] = {shared, own};
        for (int i = 0; i < 2; i++) {
            void *p = NULL;
            size_t got = 0;
            kiln_status st = pcache_get(pc, look[i], strlen(look[i]), &p, &got, NULL);
            if (st == KILN_OK && !payload_whole(p, got))
                bad |= 4;
            if (st != KILN_OK && st != KILN_ERROR_NOT_FOUND)
                bad |= 8;
            pcache_free(pc, p, got);
        }
    }
    pcache_stats s = pcache_stats_of(pc);
    if (s.corrupt || s.write_failures)
        bad |= 16;
    pcache_close(pc);
    return bad;
}

typedef struct verify {
    int ok, bad, entries, blobs;
} verify;

static bool verify_fn(void *user, const pcache_entry *e) {
    verify *v = user;
    v->entries++;
    if (e->state == PCACHE_ENTRY_OK && e->kind == PCACHE_KIND_ENTRY)
        v->ok++;
    else if (e->state == PCACHE_ENTRY_OK && e->kind == PCACHE_KIND_PIPELINE)
        v->blobs++;
    else
        v->bad++;
    return true;
}

static void run_children(uint64_t cap) {
    const char *dir = helper_tempdir(0);
    int start[2];
    assert_int_equal(pipe(start), 0);
    pid_t pids[CHILDREN];
    for (unsigned c = 0; c < CHILDREN; c++) {
        pids[c] = fork();
        assert_true(pids[c] >= 0);
        if (pids[c] == 0) {
            close(start[1]);
            _exit(child_main(dir, c, cap, start[0]));
        }
    }
    close(start[0]);
    close(start[1]); /* every child's read returns now: they start together */
    for (unsigned c = 0; c < CHILDREN; c++) {
        int status = 0;
        assert_int_equal(waitpid(pids[c], &status, 0), pids[c]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    pcache_identity id = helper_identity(1);
    pcache *pc = helper_open(dir, &id, cap);
    verify v = {0};
    assert_int_equal(pcache_list(pc, verify_fn, &v, NULL), KILN_OK);
    assert_int_equal(v.bad, 0);
    assert_true(v.ok >= 1);
    assert_true(v.ok <= 3 + CHILDREN * 4);
    assert_true(v.blobs <= 1);
    if (cap > (1u << 20)) /* nothing evicted: the blob is there */
        assert_int_equal(v.blobs, 1);
    assert_int_equal(helper_count_files(dir, NULL, NULL), v.entries); /* no temporary files */
    /* The blob that won the race is whole. */
    void *blob = NULL;
    size_t blob_size = 0;
    if (v.blobs == 1) {
        assert_int_equal(pcache_pipeline_load(pc, &blob, &blob_size, NULL), KILN_OK);
        assert_true(payload_whole((unsigned char *)blob + 32, blob_size - 32));
        pcache_free(pc, blob, blob_size);
    }
    uint64_t bytes = 0;
    assert_int_equal(pcache_trim(pc, &bytes, NULL), KILN_OK);
    assert_true(bytes <= cap);
    uint64_t on_disk = 0;
    helper_count_files(dir, ".kc", &on_disk);
    assert_int_equal(on_disk, bytes);
    pcache_close(pc);
    helper_rmtree(dir);
}

static void test_shaders_cache_concurrency_children_fill_one_cache(void **state) {
    (void)state;
    run_children(64ull << 20);
}

static void test_shaders_cache_concurrency_children_evict_each_other(void **state) {
    (void)state;
    run_children(60000);
}

int main(void) {
    unsetenv("KILN_CACHE");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shaders_cache_concurrency_children_fill_one_cache),
        cmocka_unit_test(test_shaders_cache_concurrency_children_evict_each_other),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
