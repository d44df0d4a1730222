/* base/: statuses, checked arithmetic, hashing, arena, vec, map, errors, logging. */
#include "test_alloc.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void test_base_status_every_value_has_a_message(void **state) {
    (void)state;
    assert_string_equal(kiln_status_string(KILN_OK), "success");
    for (int s = 0; s < KILN_STATUS_COUNT_; s++) {
        const char *m = kiln_status_string((kiln_status)s);
        assert_non_null(m);
        assert_true(strlen(m) > 3);
    }
    assert_string_equal(kiln_status_string((kiln_status)-1), "unknown status");
    assert_string_equal(kiln_status_string(KILN_STATUS_COUNT_), "unknown status");
}

static void test_base_arith_floor_division_matches_python(void **state) {
    (void)state;
    /* (a, b, a // b, a % b) as Python computes them. */
    static const int64_t cases[][4] = {
        {7, 2, 3, 1},
        {-7, 2, -4, 1},
        {7, -2, -4, -1},
        {-7, -2, 3, -1},
        {6, 3, 2, 0},
        {-6, 3, -2, 0},
        {0, 5, 0, 0},
        {1, 8, 0, 1},
        {-1, 8, -1, 7},
        {INT64_MAX, 1, INT64_MAX, 0},
        {INT64_MIN, 1, INT64_MIN, 0},
        {INT64_MIN, 2, INT64_MIN / 2, 0},
        {INT64_MIN + 1, -1, INT64_MAX, 0},
        {INT64_MIN, INT64_MAX, -2, INT64_MAX - 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t q, r;
        assert_true(base_floordiv_i64(cases[i][0], cases[i][1], &q));
        assert_true(base_floormod_i64(cases[i][0], cases[i][1], &r));
        assert_int_equal(q, cases[i][2]);
        assert_int_equal(r, cases[i][3]);
    }
    int64_t out;
    assert_false(base_floordiv_i64(1, 0, &out));
    assert_false(base_floormod_i64(1, 0, &out));
    assert_false(base_floordiv_i64(INT64_MIN, -1, &out)); /* the quotient overflows */
    assert_true(base_floormod_i64(INT64_MIN, -1, &out));
    assert_int_equal(out, 0);
}

static void test_base_arith_detects_overflow(void **state) {
    (void)state;
    int64_t r;
    size_t z;
    assert_true(base_add_i64(INT64_MAX - 1, 1, &r));
    assert_int_equal(r, INT64_MAX);
    assert_false(base_add_i64(INT64_MAX, 1, &r));
    assert_false(base_sub_i64(INT64_MIN, 1, &r));
    assert_false(base_mul_i64(INT64_MAX / 2 + 1, 2, &r));
    assert_true(base_mul_i64(-3, 4, &r));
    assert_int_equal(r, -12);
    assert_false(base_neg_i64(INT64_MIN, &r));
    assert_false(base_mul_size(SIZE_MAX / 2 + 1, 2, &z));
    assert_false(base_add_size(SIZE_MAX, 1, &z));
    assert_true(base_align_up_size(13, 8, &z));
    assert_int_equal(z, 16);
    assert_false(base_align_up_size(SIZE_MAX - 2, 8, &z));
    assert_true(base_gcd_i64(12, -18, &r));
    assert_int_equal(r, 6);
    assert_true(base_gcd_i64(0, 0, &r));
    assert_int_equal(r, 0);
    assert_true(base_gcd_i64(0, -7, &r));
    assert_int_equal(r, 7);
    assert_false(base_gcd_i64(INT64_MIN, 0, &r)); /* 2^63 does not fit */
    assert_true(base_gcd_i64(INT64_MIN, 6, &r));
    assert_int_equal(r, 2);
}

static void test_base_hash_is_stable_and_spreads(void **state) {
    (void)state;
    /* Golden values: a change here changes every cache key on disk. */
    assert_int_equal(base_hash_bytes("", 0, 0), base_hash_bytes("", 0, 0));
    uint64_t golden = base_hash_str("kiln", 0);
    assert_int_equal(golden, base_hash_bytes("kiln", 4, 0));
    assert_int_equal(golden, 0x6bfe356c3b82ba12ull);
    assert_int_not_equal(base_hash_str("kiln", 1), golden);
    assert_int_not_equal(base_hash_str("kilm", 0), golden);
    assert_int_not_equal(base_hash_bytes("ab\0", 3, 0), base_hash_bytes("ab", 2, 0));
    /* Low bits of consecutive integers differ (the map uses them). */
    unsigned seen = 0;
    for (uint64_t i = 0; i < 64; i++)
        seen |= 1u << (base_hash_u64(0, i) & 15);
    assert_int_equal(seen, 0xffffu);
}

static void test_base_arena_aligns_zeroes_and_frees(void **state) {
    (void)state;
    test_alloc t = {0};
    base_allocator a = test_allocator(&t);
    base_arena arena;
    base_arena_init(&arena, &a, 256);
    for (size_t i = 1; i < 200; i++) {
        size_t align = (size_t)1 << (i % 7);
        unsigned char *p = base_arena_alloc(&arena, i * 3, align);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % align, 0);
        for (size_t k = 0; k < i * 3; k++)
            assert_int_equal(p[k], 0);
        memset(p, 0xab, i * 3);
    }
    char *s = base_arena_strdup(&arena, "shape");
    assert_string_equal(s, "shape");
    assert_null(base_arena_alloc(&arena, 8, 3));   /* not a power of two */
    assert_null(base_arena_alloc(&arena, 8, 128)); /* beyond the supported alignment */
    assert_null(base_arena_alloc(&arena, SIZE_MAX - 8, 8));
    assert_true(t.live_blocks > 1);
    base_arena_finish(&arena);
    assert_int_equal(t.live_blocks, 0);
    assert_int_equal(t.size_mismatches, 0);
    /* A failed chunk allocation is a NULL, and the arena stays usable. */
    base_arena_init(&arena, &a, 64);
    t.fail_at = t.count + 1;
    assert_null(base_arena_alloc(&arena, 16, 8));
    assert_non_null(base_arena_alloc(&arena, 16, 8));
    base_arena_finish(&arena);
    assert_int_equal(t.live_blocks, 0);
}

typedef BASE_VEC(int64_t) i64_vec;

static void test_base_vec_grows_and_survives_failure(void **state) {
    (void)state;
    test_alloc t = {0};
    base_allocator a = test_allocator(&t);
    i64_vec v = {0};
    for (int64_t i = 0; i < 1000; i++)
        assert_int_equal(BASE_VEC_PUSH(&a, &v, i * i), KILN_OK);
    assert_int_equal(v.len, 1000);
    for (int64_t i = 0; i < 1000; i++)
        assert_int_equal(v.data[i], i * i);
    /* Growth that fails keeps the contents and reports the status. */
    v.len = v.cap;
    t.fail_at = t.count + 1;
    assert_int_equal(BASE_VEC_PUSH(&a, &v, 5), KILN_ERROR_OUT_OF_HOST_MEMORY);
    assert_int_equal(v.len, v.cap);
    assert_int_equal(v.data[999], 999 * 999);
    assert_int_equal(BASE_VEC_PUSH(&a, &v, 5), KILN_OK);
    BASE_VEC_FREE(&a, &v);
    assert_null(v.data);
    assert_int_equal(t.live_blocks, 0);
    assert_int_equal(t.size_mismatches, 0);
}

typedef struct entry {
    uint64_t key;
    int value;
} entry;

static bool entry_eq(const void *stored, const void *key, void *user) {
    (void)user;
    return ((const entry *)stored)->key == *(const uint64_t *)key;
}

/* Keys whose hashes collide on purpose exercise probing and backward-shift deletion. */
static uint64_t weak_hash(uint64_t key) {
    return key % 7;
}

static void test_base_map_matches_a_reference_under_churn(void **state) {
    (void)state;
    test_alloc t = {0};
    base_allocator a = test_allocator(&t);
    base_map map;
    base_map_init(&map, &a);
    enum { N = 600 };
    static entry entries[N];
    bool present[N] = {0};
    size_t count = 0;
    uint64_t rng = 12345;
    for (int step = 0; step < 20000; step++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t k = (rng >> 33) % N;
        entries[k].key = k;
        entries[k].value = (int)k * 3;
        entry *found = base_map_find(&map, weak_hash(k), &k, entry_eq, NULL);
        assert_true((found != NULL) == present[k]);
        if (present[k]) {
            assert_ptr_equal(base_map_remove(&map, weak_hash(k), &k, entry_eq, NULL), &entries[k]);
            present[k] = false;
            count--;
        } else {
            assert_int_equal(base_map_insert(&map, weak_hash(k), &entries[k]), KILN_OK);
            present[k] = true;
            count++;
        }
        assert_int_equal(map.len, count);
    }
    for (uint64_t k = 0; k < N; k++) {
        entry *found = base_map_find(&map, weak_hash(k), &k, entry_eq, NULL);
        assert_true((found != NULL) == present[k]);
        if (found)
            assert_int_equal(found->value, (int)k * 3);
    }
    size_t visited = 0;
    void *v;
    for (size_t cursor = 0; base_map_next(&map, &cursor, &v);)
        visited++;
    assert_int_equal(visited, count);
    assert_int_equal(base_map_insert(&map, 1, NULL), KILN_ERROR_INVALID_ARGUMENT);
    base_map_finish(&map);
    assert_int_equal(t.live_blocks, 0);
}

static void test_base_map_growth_failure_keeps_entries(void **state) {
    (void)state;
    test_alloc t = {0};
    base_allocator a = test_allocator(&t);
    base_map map;
    base_map_init(&map, &a);
    static entry entries[64];
    for (uint64_t k = 0; k < 8; k++) {
        entries[k].key = k;
        assert_int_equal(base_map_insert(&map, base_hash_u64(0, k), &entries[k]), KILN_OK);
    }
    t.fail_at = t.count + 1; /* the 9th insert must grow 16 -> 32 slots */
    entries[8].key = 8;
    assert_int_equal(base_map_insert(&map, base_hash_u64(0, 8), &entries[8]),
                     KILN_ERROR_OUT_OF_HOST_MEMORY);
    for (uint64_t k = 0; k < 8; k++)
        assert_ptr_equal(base_map_find(&map, base_hash_u64(0, k), &k, entry_eq, NULL), &entries[k]);
    base_map_finish(&map);
    assert_int_equal(t.live_blocks, 0);
}

static void test_base_error_keeps_the_first_error(void **state) {
    (void)state;
    base_error err = {0};
    assert_string_equal(base_error_message(&err), "success");
    assert_int_equal(base_error_set(&err, KILN_ERROR_OVERFLOW, "stride %d overflows", 7),
                     KILN_ERROR_OVERFLOW);
    assert_int_equal(base_error_set(&err, KILN_ERROR_IO, "later"), KILN_ERROR_IO);
    assert_int_equal(err.status, KILN_ERROR_OVERFLOW);
    assert_string_equal(base_error_message(&err), "stride 7 overflows");
    base_error_reset(&err, KILN_ERROR_IO, "now %s", "this");
    assert_string_equal(base_error_message(&err), "now this");
    base_error_clear(&err);
    assert_int_equal(err.status, KILN_OK);
    assert_int_equal(base_error_set(NULL, KILN_ERROR_IO, "no record"), KILN_ERROR_IO);
    /* A long message is truncated, not overflowed. */
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    base_error_set(&err, KILN_ERROR_INTERNAL, "%s", big);
    assert_int_equal(strlen(err.message), BASE_ERROR_MESSAGE_MAX - 1);
}

typedef struct captured {
    int lines;
    char last[256];
} captured;

static void capture(void *user, base_log_level level, const char *line) {
    (void)level;
    captured *c = user;
    c->lines++;
    snprintf(c->last, sizeof c->last, "%s", line);
}

static void test_base_log_reaches_the_sink(void **state) {
    (void)state;
    captured c = {0};
    base_log_set_sink(capture, &c);
    base_log(BASE_LOG_ERROR, "vk", "device %d lost", 3);
    base_log_set_sink(NULL, NULL);
    assert_int_equal(c.lines, 1);
    assert_string_equal(c.last, "kiln vk: error: device 3 lost");
    assert_true(base_log_enabled(BASE_LOG_WARN));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base_status_every_value_has_a_message),
        cmocka_unit_test(test_base_arith_floor_division_matches_python),
        cmocka_unit_test(test_base_arith_detects_overflow),
        cmocka_unit_test(test_base_hash_is_stable_and_spreads),
        cmocka_unit_test(test_base_arena_aligns_zeroes_and_frees),
        cmocka_unit_test(test_base_vec_grows_and_survives_failure),
        cmocka_unit_test(test_base_map_matches_a_reference_under_churn),
        cmocka_unit_test(test_base_map_growth_failure_keeps_entries),
        cmocka_unit_test(test_base_error_keeps_the_first_error),
        cmocka_unit_test(test_base_log_reaches_the_sink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
