/* shaders_cache/: the VkPipelineCache blob. lavapipe's blob is only its 32-byte header, so the
 * byte-level calls (the test hook) carry synthetic blobs: a valid header for the device plus a
 * body. The device path (vkGetPipelineCacheData, merging, initial data at device creation)
 * runs for real under the validation layer. */
#include "cache_helpers.h"
#include "vk_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void le32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* A VkPipelineCacheHeaderVersionOne for id, then body_size bytes of a pattern. */
static unsigned char *synthetic_blob(const pcache_identity *id, size_t body_size, unsigned seed,
                                     size_t *size) {
    *size = 32 + body_size;
    unsigned char *b = malloc(*size);
    assert_non_null(b);
    le32(b, 32);
    le32(b + 4, VK_PIPELINE_CACHE_HEADER_VERSION_ONE);
    le32(b + 8, id->vendor_id);
    le32(b + 12, id->device_id);
    memcpy(b + 16, id->pipeline_cache_uuid, VK_UUID_SIZE);
    for (size_t i = 0; i < body_size; i++)
        b[32 + i] = (unsigned char)(i * 97 + seed);
    return b;
}

static void expect_load(pcache *pc, const void *want, size_t want_size) {
    void *got = NULL;
    size_t n = 0;
    assert_int_equal(pcache_pipeline_load(pc, &got, &n, NULL), KILN_OK);
    assert_int_equal(n, want_size);
    assert_memory_equal(got, want, want_size);
    pcache_free(pc, got, n);
}

static void expect_no_load(pcache *pc) {
    void *got = (void *)1;
    size_t n = 3;
    assert_int_equal(pcache_pipeline_load(pc, &got, &n, NULL), KILN_ERROR_NOT_FOUND);
    assert_null(got);
    assert_int_equal(n, 0);
}

static void test_shaders_cache_pipeline_identity_of_device(void **state) {
    vk_fixture *f = *state;
    const vkd_device_info *info = vkd_device_info_of(f->dev);
    pcache_identity id = pcache_identity_of(info);
    assert_int_equal(id.vendor_id, info->props.vendorID);
    assert_int_equal(id.device_id, info->props.deviceID);
    assert_int_equal(id.driver_version, info->props.driverVersion);
    assert_int_equal(id.driver_id, info->has_driver ? (uint32_t)info->driver.driverID : 0);
    assert_memory_equal(id.pipeline_cache_uuid, info->props.pipelineCacheUUID, VK_UUID_SIZE);
}

static void test_shaders_cache_pipeline_synthetic_blob_round_trip(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(1);
    pcache *pc = helper_open(dir, &id, 0);
    expect_no_load(pc);
    size_t size;
    unsigned char *blob = synthetic_blob(&id, 50000, 1, &size);
    assert_int_equal(pcache_pipeline_save(pc, blob, size, NULL), KILN_OK);
    assert_int_equal(pcache_stats_of(pc).writes, 1);
    /* The same bytes again are not rewritten. */
    assert_int_equal(pcache_pipeline_save(pc, blob, size, NULL), KILN_OK);
    assert_int_equal(pcache_stats_of(pc).writes, 1);
    pcache *other = helper_open(dir, &id, 0);
    expect_load(other, blob, size);
    /* A loaded blob saved back unchanged is not rewritten either; a changed one is. */
    assert_int_equal(pcache_pipeline_save(other, blob, size, NULL), KILN_OK);
    assert_int_equal(pcache_stats_of(other).writes, 0);
    blob[40] ^= 1;
    assert_int_equal(pcache_pipeline_save(other, blob, size, NULL), KILN_OK);
    assert_int_equal(pcache_stats_of(other).writes, 1);
    expect_load(pc, blob, size);
    /* Blobs and entries do not collide: an entry with the blob's key is another file. */
    assert_int_equal(pcache_put(pc, "vk.pipeline_cache", 17, "entry", 5, NULL), KILN_OK);
    expect_load(pc, blob, size);
    assert_int_equal(helper_count_files(dir, ".kc", NULL), 2);
    free(blob);
    pcache_close(pc);
    pcache_close(other);
    helper_rmtree(dir);
}

static void test_shaders_cache_pipeline_rejects_foreign_and_corrupt_blobs(void **state) {
    (void)state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = helper_identity(2), other = helper_identity(3);
    pcache *pc = helper_open(dir, &id, 0);
    size_t size;
    /* Bytes whose Vulkan header names another device are refused at save. */
    unsigned char *foreign = synthetic_blob(&other, 100, 2, &size);
    base_error err = {0};
    assert_int_equal(pcache_pipeline_save(pc, foreign, size, &err), KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(pcache_pipeline_save(pc, foreign, 20, NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(helper_count_files(dir, NULL, NULL), 0);
    /* A file whose checksum is right but whose blob names another device never loads. */
    unsigned char *blob = synthetic_blob(&id, 100, 2, &size);
    assert_int_equal(pcache_pipeline_save(pc, blob, size, NULL), KILN_OK);
    char path[4096];
    snprintf(path, sizeof path, "%s", helper_single_entry(dir));
    size_t file_size;
    unsigned char *file = helper_read(path, &file_size);
    size_t blob_at = file_size - 8 - size;
    memcpy(file + blob_at, foreign, 32);
    helper_fix_checksum(file, file_size);
    helper_write(path, file, file_size);
    pcache *fresh = helper_open(dir, &id, 0);
    expect_no_load(fresh);
    assert_int_equal(pcache_stats_of(fresh).foreign, 1);
    /* A header that claims more bytes than the blob has. */
    memcpy(file + blob_at, blob, size);
    le32(file + blob_at, (uint32_t)size + 1);
    helper_fix_checksum(file, file_size);
    helper_write(path, file, file_size);
    expect_no_load(fresh);
    /* Every truncated prefix of the file. */
    memcpy(file + blob_at, blob, size);
    helper_fix_checksum(file, file_size);
    for (size_t len = 0; len < file_size; len++) {
        helper_write(path, file, len);
        expect_no_load(fresh);
    }
    helper_write(path, file, file_size);
    expect_load(fresh, blob, size);
    free(file);
    free(blob);
    free(foreign);
    pcache_close(fresh);
    pcache_close(pc);
    helper_rmtree(dir);
}

static void test_shaders_cache_pipeline_device_save_load_and_merge(void **state) {
    vk_fixture *f = *state;
    const char *dir = helper_tempdir(0);
    pcache_identity id = pcache_identity_of(vkd_device_info_of(f->dev));
    pcache *pc = helper_open(dir, &id, 0);
    base_error err = {0};
    kiln_status st = pcache_pipeline_save_device(pc, f->dev, &err);
    if (st != KILN_OK)
        fail_msg("%s", base_error_message(&err));
    assert_int_equal(pcache_stats_of(pc).writes, 1);
    size_t vk_size = 0;
    assert_int_equal(vkd_pipeline_cache_data(f->dev, NULL, &vk_size, NULL), KILN_OK);
    assert_true(vk_size >= 32);
    unsigned char *vk_data = malloc(vk_size);
    assert_int_equal(vkd_pipeline_cache_data(f->dev, vk_data, &vk_size, NULL), KILN_OK);
    /* Saving again with nothing new writes nothing. */
    assert_int_equal(pcache_pipeline_save_device(pc, f->dev, NULL), KILN_OK);
    assert_int_equal(pcache_stats_of(pc).writes, 1);
    /* A second "process" loads it and creates its device from it. */
    pcache *second = helper_open(dir, &id, 0);
    void *blob = NULL;
    size_t blob_size = 0;
    assert_int_equal(pcache_pipeline_load(second, &blob, &blob_size, NULL), KILN_OK);
    assert_int_equal(blob_size, vk_size);
    assert_memory_equal(blob, vk_data, vk_size);
    vkd_device_options opt = {.pipeline_cache_data = blob, .pipeline_cache_size = blob_size};
    vkd_device *dev2 = NULL;
    assert_int_equal(vkd_device_create(f->inst, f->device_index, &opt, &dev2, &err), KILN_OK);
    pcache_free(second, blob, blob_size);
    /* Another process saved a bigger blob meanwhile: saving merges it into the device first.
     * lavapipe keeps only its header, so the merged data is the header again, whatever the
     * body; a driver that keeps pipelines (NVIDIA's) parses the body, and the validation layer
     * warns about a synthetic one, so there the other process's blob is the device's own. */
    bool header_only = vk_size == 32;
    size_t syn_size = vk_size;
    unsigned char *syn = header_only ? synthetic_blob(&id, 4096, 5, &syn_size) : malloc(vk_size);
    assert_non_null(syn);
    if (!header_only)
        memcpy(syn, vk_data, vk_size);
    assert_int_equal(pcache_pipeline_save(pc, syn, syn_size, NULL), KILN_OK);
    assert_int_equal(pcache_pipeline_save_device(second, dev2, &err), KILN_OK);
    if (header_only) {
        assert_int_equal(pcache_stats_of(second).writes, 1);
        expect_load(pc, vk_data, vk_size);
    } else { /* the merged cache holds at least what was saved */
        void *got = NULL;
        size_t n = 0;
        assert_int_equal(pcache_pipeline_load(pc, &got, &n, NULL), KILN_OK);
        assert_true(n >= 32);
        pcache_free(pc, got, n);
    }
    vkd_device_destroy(dev2);
    free(syn);
    free(vk_data);
    pcache_close(second);
    pcache_close(pc);
    helper_rmtree(dir);
    vk_fixture_assert_no_messages(f);
}

static void test_shaders_cache_pipeline_save_device_when_off_or_read_only(void **state) {
    vk_fixture *f = *state;
    pcache_identity id = pcache_identity_of(vkd_device_info_of(f->dev));
    setenv("KILN_CACHE", "0", 1);
    pcache *off = helper_open("/nonexistent/never", &id, 0);
    assert_int_equal(pcache_pipeline_save_device(off, f->dev, NULL), KILN_OK);
    assert_int_equal(pcache_stats_of(off).writes, 0);
    pcache_close(off);
    unsetenv("KILN_CACHE");
    pcache *m = helper_open(helper_tempdir(1), NULL, 0);
    assert_int_equal(pcache_pipeline_save_device(m, f->dev, NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(pcache_pipeline_save_device(m, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    helper_rmtree(pcache_directory(m));
    pcache_close(m);
}

int main(void) {
    unsetenv("KILN_CACHE");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shaders_cache_pipeline_identity_of_device),
        cmocka_unit_test(test_shaders_cache_pipeline_synthetic_blob_round_trip),
        cmocka_unit_test(test_shaders_cache_pipeline_rejects_foreign_and_corrupt_blobs),
        cmocka_unit_test(test_shaders_cache_pipeline_device_save_load_and_merge),
        cmocka_unit_test(test_shaders_cache_pipeline_save_device_when_off_or_read_only),
    };
    return cmocka_run_group_tests(tests, vk_fixture_setup, vk_fixture_teardown);
}
