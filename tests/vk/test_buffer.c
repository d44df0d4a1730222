/* vk/: storage buffers: round trips (mapped and staged), fill, copy, limits. */
#include "test_alloc.h"
#include "vk_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const uint64_t sizes[] = {0, 1, 3, 4, 5, 7, 64, 1001, 4099, (1u << 20) + 3};

/* Uploads a pattern at several offsets and reads it back, on dev. */
static void round_trips(vkd_device *dev) {
    base_error err = {0};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint64_t n = sizes[i];
        vkd_buffer *buf = NULL;
        assert_int_equal(vkd_buffer_create(dev, n, &buf, &err), KILN_OK);
        assert_int_equal(vkd_buffer_size(buf), n);
        unsigned char *src = malloc(n + 1), *dst = malloc(n + 1);
        for (uint64_t k = 0; k < n; k++)
            src[k] = (unsigned char)(k * 7 + n);
        assert_int_equal(vkd_buffer_upload(buf, 0, src, n, &err), KILN_OK);
        memset(dst, 0xee, n + 1);
        assert_int_equal(vkd_buffer_download(buf, 0, dst, n, &err), KILN_OK);
        assert_memory_equal(src, dst, n);
        assert_int_equal(dst[n], 0xee); /* nothing written past the range */
        if (n >= 3) {                   /* an unaligned sub-range in the middle */
            unsigned char three[3] = {1, 2, 3}, back[3];
            assert_int_equal(vkd_buffer_upload(buf, n - 3, three, 3, &err), KILN_OK);
            assert_int_equal(vkd_buffer_download(buf, n - 3, back, 3, &err), KILN_OK);
            assert_memory_equal(three, back, 3);
            assert_int_equal(vkd_buffer_download(buf, 0, dst, n - 3, &err), KILN_OK);
            assert_memory_equal(src, dst, n - 3);
        }
        free(src);
        free(dst);
        vkd_buffer_destroy(buf);
    }
    assert_int_equal(err.status, KILN_OK);
}

static void test_vk_buffer_round_trip_mapped(void **state) {
    vk_fixture *f = *state;
    /* Mapped where device memory is host-visible (lavapipe, integrated GPUs), else staged
     * (a discrete GPU; test_vk_buffer_round_trip_staged forces staging anywhere). */
    bool uma = vkd_device_caps(f->dev)->host_visible_device_memory;
    base_error err = {0};
    vkd_buffer *buf = NULL;
    assert_int_equal(vkd_buffer_create(f->dev, 64, &buf, &err), KILN_OK);
    assert_int_equal(vkd_buffer_is_mapped(buf), uma);
    vkd_buffer_destroy(buf);
    round_trips(f->dev);
    vk_fixture_assert_no_messages(f);
}

/* Small buffers share blocks of device memory (vk/memory.c): 1,000 of them take a handful of
 * vkAllocateMemory calls, each keeps its own bytes, freed ranges are taken again, and a large
 * buffer gets an allocation of its own. Mapped and staged alike. */
static void sub_allocation(vkd_device *dev) {
    enum { N = 1000 };
    static vkd_buffer *bufs[N];
    base_error err = {0};
    uint64_t before = vkd_device_stats(dev).memory_allocations;
    for (uint32_t i = 0; i < N; i++) {
        uint64_t size = 4 + (i % 7) * 36; /* 4 .. 220 bytes: alignments differ */
        assert_int_equal(vkd_buffer_create(dev, size, &bufs[i], &err), KILN_OK);
        uint32_t word = 0x9e3779b9u * (i + 1);
        assert_int_equal(vkd_buffer_fill(bufs[i], 0, size / 4 * 4, word, &err), KILN_OK);
    }
    uint64_t used = vkd_device_stats(dev).memory_allocations - before;
    assert_true(used <= 2);            /* 0 where earlier buffers left a block with room */
    for (uint32_t i = 0; i < N; i++) { /* nothing overlaps: each holds its own pattern */
        uint32_t got[64];
        uint64_t size = 4 + (i % 7) * 36;
        assert_int_equal(vkd_buffer_download(bufs[i], 0, got, size / 4 * 4, &err), KILN_OK);
        for (uint64_t w = 0; w < size / 4; w++)
            assert_int_equal(got[w], 0x9e3779b9u * (i + 1));
    }
    for (uint32_t i = 0; i < N; i += 2) { /* holes, then buffers that fit in them */
        vkd_buffer_destroy(bufs[i]);
        assert_int_equal(vkd_buffer_create(dev, 8, &bufs[i], &err), KILN_OK);
    }
    assert_true(vkd_device_stats(dev).memory_allocations - before == used);
    vkd_buffer *big = NULL; /* 32 MiB: its own allocation */
    assert_int_equal(vkd_buffer_create(dev, 32u << 20, &big, &err), KILN_OK);
    assert_true(vkd_device_stats(dev).memory_allocations - before == used + 1);
    vkd_buffer_destroy(big);
    for (uint32_t i = 0; i < N; i++)
        vkd_buffer_destroy(bufs[i]);
    /* Every block empty: one is kept, so the next small buffer allocates nothing. */
    vkd_buffer *again = NULL;
    assert_int_equal(vkd_buffer_create(dev, 64, &again, &err), KILN_OK);
    assert_true(vkd_device_stats(dev).memory_allocations - before == used + 1);
    vkd_buffer_destroy(again);
}

static void test_vk_buffer_small_buffers_share_memory(void **state) {
    vk_fixture *f = *state;
    sub_allocation(f->dev);
    base_error err = {0};
    vkd_device_options opt = {.force_staging = true};
    vkd_device *dev = NULL;
    assert_int_equal(vkd_device_create(f->inst, f->device_index, &opt, &dev, &err), KILN_OK);
    sub_allocation(dev);
    vkd_device_destroy(dev);
    vk_fixture_assert_no_messages(f);
}

static void test_vk_buffer_round_trip_staged(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    vkd_device_options opt = {.force_staging = true};
    vkd_device *dev = NULL;
    assert_int_equal(vkd_device_create(f->inst, f->device_index, &opt, &dev, &err), KILN_OK);
    vkd_buffer *buf = NULL;
    assert_int_equal(vkd_buffer_create(dev, 16, &buf, &err), KILN_OK);
    assert_false(vkd_buffer_is_mapped(buf));
    vkd_buffer_destroy(buf);
    uint64_t submits = vkd_device_stats(dev).submits;
    round_trips(dev);
    assert_true(vkd_device_stats(dev).submits > submits); /* the staging path really ran */
    vkd_device_destroy(dev);
    vk_fixture_assert_no_messages(f);
}

static void test_vk_buffer_fill_and_copy(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    vkd_buffer *a = NULL, *b = NULL;
    assert_int_equal(vkd_buffer_create(f->dev, 40, &a, &err), KILN_OK);
    assert_int_equal(vkd_buffer_create(f->dev, 40, &b, &err), KILN_OK);
    assert_int_equal(vkd_buffer_fill(a, 0, 40, 0x01020304u, &err), KILN_OK);
    assert_int_equal(vkd_buffer_fill(a, 8, 8, 0xdeadbeefu, &err), KILN_OK);
    assert_int_equal(vkd_buffer_fill(b, 0, 40, 0, &err), KILN_OK);
    assert_int_equal(vkd_buffer_copy(a, 4, b, 13, 9, &err), KILN_OK);
    uint32_t wa[10];
    unsigned char bb[40];
    assert_int_equal(vkd_buffer_download(a, 0, wa, 40, &err), KILN_OK);
    assert_int_equal(vkd_buffer_download(b, 0, bb, 40, &err), KILN_OK);
    for (int i = 0; i < 10; i++)
        assert_int_equal(wa[i], i == 2 || i == 3 ? 0xdeadbeefu : 0x01020304u);
    unsigned char expect[40] = {0};
    memcpy(expect + 13, (unsigned char *)wa + 4, 9);
    assert_memory_equal(bb, expect, 40);
    /* Misaligned fills, out-of-range and overlapping requests are rejected. */
    assert_int_equal(vkd_buffer_fill(a, 2, 4, 0, &err), KILN_ERROR_INVALID_ARGUMENT);
    base_error_clear(&err);
    assert_int_equal(vkd_buffer_copy(a, 0, b, 36, 8, &err), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "outside"));
    base_error_clear(&err);
    assert_int_equal(vkd_buffer_copy(a, 0, a, 4, 8, &err), KILN_ERROR_INVALID_ARGUMENT);
    base_error_clear(&err);
    unsigned char x[8];
    assert_int_equal(vkd_buffer_download(a, 38, x, 4, &err), KILN_ERROR_INVALID_ARGUMENT);
    base_error_clear(&err);
    assert_int_equal(vkd_buffer_upload(a, UINT64_MAX, x, 2, &err), KILN_ERROR_INVALID_ARGUMENT);
    vkd_buffer_destroy(a);
    vkd_buffer_destroy(b);
    vkd_buffer_destroy(NULL);
    vk_fixture_assert_no_messages(f);
}

/* Up to maxMemoryAllocationSize a buffer is made, beyond the storage-buffer range too (it is
 * bound in windows); beyond the allocation limit it is refused. */
static void test_vk_buffer_over_allocation_limit_is_rejected(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    const vkd_caps *caps = vkd_device_caps(f->dev);
    vkd_buffer *buf = (vkd_buffer *)&err; /* must be reset to NULL */
    assert_int_equal(vkd_buffer_create(f->dev, caps->max_memory_allocation_size + 1, &buf, &err),
                     KILN_ERROR_LIMIT_EXCEEDED);
    assert_null(buf);
    assert_non_null(strstr(err.message, "maxMemoryAllocationSize"));
    /* Beyond the range (a smaller test-only one keeps memory low): made, and its bytes reach
     * the host. */
    vkd_device_options opt = {.max_storage_range = 1u << 16};
    vkd_device *dev = NULL;
    base_error_clear(&err);
    assert_int_equal(vkd_device_create(f->inst, f->device_index, &opt, &dev, &err), KILN_OK);
    assert_int_equal(vkd_buffer_create(dev, 1u << 16, &buf, &err), KILN_OK);
    vkd_buffer_destroy(buf);
    assert_int_equal(vkd_buffer_create(dev, (4u << 16) + 4, &buf, &err), KILN_OK);
    uint32_t word = 0x12345678, back = 0;
    assert_int_equal(vkd_buffer_upload(buf, 4u << 16, &word, 4, &err), KILN_OK);
    assert_int_equal(vkd_buffer_download(buf, 4u << 16, &back, 4, &err), KILN_OK);
    assert_int_equal(back, word);
    vkd_buffer_destroy(buf);
    vkd_device_destroy(dev);
    vk_fixture_assert_no_messages(f);
}

/* Every host allocation of buffer creation fails cleanly, one at a time. */
static void test_vk_buffer_create_survives_allocation_failure(void **state) {
    vk_fixture *f = *state;
    test_alloc t = {0};
    base_allocator alloc = test_allocator(&t);
    vkd_instance_options opt = {.alloc = &alloc};
    for (long n = 1;; n++) {
        t = (test_alloc){.fail_at = n};
        base_error err = {0};
        vkd_instance *inst = NULL;
        vkd_device *dev = NULL;
        vkd_buffer *buf = NULL;
        vkd_batch *batch = NULL;
        kiln_status st = vkd_instance_create(&opt, &inst, &err);
        if (st == KILN_OK)
            st = vkd_device_create(inst, f->device_index, NULL, &dev, &err);
        if (st == KILN_OK)
            st = vkd_buffer_create(dev, 64, &buf, &err);
        if (st == KILN_OK)
            st = vkd_batch_create(dev, &batch, &err);
        vkd_batch_destroy(batch);
        vkd_buffer_destroy(buf);
        vkd_device_destroy(dev);
        vkd_instance_destroy(inst);
        assert_int_equal(t.live_blocks, 0);
        assert_int_equal(t.size_mismatches, 0);
        if (t.failures == 0) {
            assert_int_equal(st, KILN_OK);
            assert_true(n > 3);
            break;
        }
        assert_int_equal(st, KILN_ERROR_OUT_OF_HOST_MEMORY);
        assert_non_null(strstr(err.message, "memory"));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vk_buffer_round_trip_mapped),
        cmocka_unit_test(test_vk_buffer_round_trip_staged),
        cmocka_unit_test(test_vk_buffer_small_buffers_share_memory),
        cmocka_unit_test(test_vk_buffer_fill_and_copy),
        cmocka_unit_test(test_vk_buffer_over_allocation_limit_is_rejected),
        cmocka_unit_test(test_vk_buffer_create_survives_allocation_failure),
    };
    return cmocka_run_group_tests(tests, vk_fixture_setup, vk_fixture_teardown);
}
