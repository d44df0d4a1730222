/* vk/: the device's VkPipelineCache: its data read back (size query, a buffer too small),
 * merged from saved bytes, and given as initial data to a new device. */
#include "vk_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void test_vk_pipeline_cache_data_reads_header(void **state) {
    vk_fixture *f = *state;
    size_t size = 0;
    base_error err = {0};
    assert_int_equal(vkd_pipeline_cache_data(f->dev, NULL, &size, &err), KILN_OK);
    assert_true(size >= 32); /* at least VkPipelineCacheHeaderVersionOne */
    unsigned char *data = calloc(1, size);
    size_t got = size;
    assert_int_equal(vkd_pipeline_cache_data(f->dev, data, &got, &err), KILN_OK);
    assert_int_equal(got, size);
    const vkd_device_info *info = vkd_device_info_of(f->dev);
    uint32_t words[4];
    memcpy(words, data, sizeof words);
    assert_int_equal(words[0], 32);
    assert_int_equal(words[1], VK_PIPELINE_CACHE_HEADER_VERSION_ONE);
    assert_int_equal(words[2], info->props.vendorID);
    assert_int_equal(words[3], info->props.deviceID);
    assert_memory_equal(data + 16, info->props.pipelineCacheUUID, VK_UUID_SIZE);
    /* Too small a buffer is an error, not a silently short blob. */
    got = 8;
    assert_int_equal(vkd_pipeline_cache_data(f->dev, data, &got, &err), KILN_ERROR_LIMIT_EXCEEDED);
    assert_non_null(strstr(err.message, "vkGetPipelineCacheData"));
    assert_int_equal(vkd_pipeline_cache_data(f->dev, data, NULL, NULL),
                     KILN_ERROR_INVALID_ARGUMENT);
    free(data);
    vk_fixture_assert_no_messages(f);
}

static void test_vk_pipeline_cache_merge_and_initial_data(void **state) {
    vk_fixture *f = *state;
    size_t size = 0;
    assert_int_equal(vkd_pipeline_cache_data(f->dev, NULL, &size, NULL), KILN_OK);
    unsigned char *data = malloc(size);
    assert_int_equal(vkd_pipeline_cache_data(f->dev, data, &size, NULL), KILN_OK);
    base_error err = {0};
    assert_int_equal(vkd_pipeline_cache_merge(f->dev, data, size, &err), KILN_OK);
    assert_int_equal(vkd_pipeline_cache_merge(f->dev, NULL, 0, &err), KILN_ERROR_INVALID_ARGUMENT);
    vkd_device_options opt = {.pipeline_cache_data = data, .pipeline_cache_size = size};
    vkd_device *dev = NULL;
    assert_int_equal(vkd_device_create(f->inst, f->device_index, &opt, &dev, &err), KILN_OK);
    free(data); /* the device keeps no pointer to the initial data */
    size_t size2 = 0;
    assert_int_equal(vkd_pipeline_cache_data(dev, NULL, &size2, NULL), KILN_OK);
    assert_true(size2 >= 32);
    vkd_device_destroy(dev);
    vk_fixture_assert_no_messages(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vk_pipeline_cache_data_reads_header),
        cmocka_unit_test(test_vk_pipeline_cache_merge_and_initial_data),
    };
    return cmocka_run_group_tests(tests, vk_fixture_setup, vk_fixture_teardown);
}
