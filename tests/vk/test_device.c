/* vk/: instance, device selection and device creation. */
#include "vk_fixture.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void test_vk_device_create_enables_what_it_reports(void **state) {
    vk_fixture *f = *state;
    const vkd_caps *caps = vkd_device_caps(f->dev);
    const vkd_device_info *info = vkd_device_info_of(f->dev);
    assert_true(caps->api_version >= VK_API_VERSION_1_1);
    assert_true(caps->spirv_version >= 0x10300u && caps->spirv_version <= 0x10600u);
    if (caps->api_version >= VK_API_VERSION_1_3)
        assert_int_equal(caps->spirv_version, 0x10600u);
    /* Only features the device has can be enabled. */
    assert_true(!caps->int64 || info->features.shaderInt64);
    assert_true(!caps->float16 || info->float16_int8.shaderFloat16);
    assert_true(!caps->storage_buffer_8bit || info->storage8.storageBuffer8BitAccess);
    assert_true(!caps->maintenance4 || info->maintenance4.maintenance4);
    assert_int_equal(caps->max_push_constants_size, info->props.limits.maxPushConstantsSize);
    assert_int_equal(caps->max_storage_buffer_range, info->props.limits.maxStorageBufferRange);
    assert_true(caps->max_push_constants_size >= 128);
    assert_true(caps->subgroup_size >= 1);
    assert_true(caps->min_subgroup_size <= caps->subgroup_size);
    assert_true(caps->subgroup_size <= caps->max_subgroup_size);
    assert_non_null(vkd_device_handle(f->dev));
    assert_non_null(vkd_device_table(f->dev)->vkCreateBuffer);
    vk_fixture_assert_no_messages(f);
}

static void test_vk_device_select_by_index_and_name(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    uint32_t index = 99;
    assert_int_equal(vkd_instance_select(f->inst, "0", &index, &err), KILN_OK);
    assert_int_equal(index, 0);
    /* A case-insensitive substring of the name selects the device. */
    const vkd_device_info *d = vkd_instance_device(f->inst, f->device_index);
    char part[8] = {0};
    memcpy(part, d->props.deviceName, 4);
    for (char *p = part; *p; p++)
        *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    index = 99;
    assert_int_equal(vkd_instance_select(f->inst, part, &index, &err), KILN_OK);
    uint32_t first = 0;
    while (!strcasestr(vkd_instance_device(f->inst, first)->props.deviceName, part))
        first++;
    assert_int_equal(index, first);
    assert_non_null(strcasestr(vkd_instance_device(f->inst, index)->props.deviceName, part));
}

static void test_vk_device_select_rejects_bad_index_and_name(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    uint32_t index = 7;
    assert_int_equal(vkd_instance_select(f->inst, "4000000", &index, &err), KILN_ERROR_NOT_FOUND);
    assert_non_null(strstr(err.message, "4000000"));
    assert_int_equal(index, 7); /* untouched on failure */
    base_error_clear(&err);
    assert_int_equal(vkd_instance_select(f->inst, "no such gpu", &index, &err),
                     KILN_ERROR_NOT_FOUND);
    assert_non_null(strstr(err.message, "no such gpu"));
    vkd_device *dev = NULL;
    base_error_clear(&err);
    assert_int_equal(vkd_device_create(f->inst, 4000000, NULL, &dev, &err), KILN_ERROR_NOT_FOUND);
    assert_null(dev);
}

/* The default choice on machines with several devices, driven with made-up infos. */
static vkd_device_info fake(VkPhysicalDeviceType type, const char *name, bool compute) {
    vkd_device_info d;
    memset(&d, 0, sizeof d);
    d.props.deviceType = type;
    strncpy(d.props.deviceName, name, sizeof d.props.deviceName - 1);
    d.compute_family = compute ? 0 : -1;
    return d;
}

static void test_vk_device_select_prefers_discrete_then_integrated(void **state) {
    (void)state;
    base_error err = {0};
    uint32_t index = 99;
    vkd_device_info devs[4] = {
        fake(VK_PHYSICAL_DEVICE_TYPE_CPU, "llvmpipe", true),
        fake(VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU, "Intel UHD", true),
        fake(VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, "Radeon RX", true),
        fake(VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU, "virgl", true),
    };
    assert_int_equal(vkd_select_device(devs, 4, NULL, &index, &err), KILN_OK);
    assert_int_equal(index, 2);
    assert_int_equal(vkd_select_device(devs, 2, "", &index, &err), KILN_OK);
    assert_int_equal(index, 1);
    vkd_device_info two[2] = {devs[0], devs[3]};
    assert_int_equal(vkd_select_device(two, 2, NULL, &index, &err), KILN_OK);
    assert_int_equal(index, 1); /* virtual beats CPU */
    /* A discrete device without a compute queue is never chosen. */
    devs[2].compute_family = -1;
    assert_int_equal(vkd_select_device(devs, 4, NULL, &index, &err), KILN_OK);
    assert_int_equal(index, 1);
    assert_int_equal(vkd_select_device(devs, 4, "radeon", &index, &err), KILN_ERROR_NOT_FOUND);
    /* The message says what there is to choose from. */
    assert_non_null(strstr(err.message, "\"radeon\""));
    assert_non_null(strstr(err.message, "0: llvmpipe; 1: Intel UHD; 2: Radeon RX (no compute "
                                        "queue); 3: virgl"));
    base_error_clear(&err);
    assert_int_equal(vkd_select_device(devs, 4, "7", &index, &err), KILN_ERROR_NOT_FOUND);
    assert_non_null(strstr(err.message, "index 7"));
    assert_non_null(strstr(err.message, "0: llvmpipe; 1: Intel UHD"));
    base_error_clear(&err);
    assert_int_equal(vkd_select_device(devs, 4, "2", &index, &err), KILN_ERROR_NO_DEVICE);
    base_error_clear(&err);
    assert_int_equal(vkd_select_device(devs, 0, NULL, &index, &err), KILN_ERROR_NO_DEVICE);
    assert_non_null(strstr(err.message, "mesa-vulkan-drivers"));
}

static void test_vk_device_check_maps_results(void **state) {
    (void)state;
    base_error err = {0};
    assert_int_equal(vkd_check(VK_SUCCESS, "vkX", &err), KILN_OK);
    assert_int_equal(vkd_check(VK_INCOMPLETE, "vkX", &err), KILN_OK);
    assert_int_equal(vkd_check(VK_ERROR_DEVICE_LOST, "vkQueueSubmit", &err),
                     KILN_ERROR_DEVICE_LOST);
    assert_string_equal(err.message, "vkQueueSubmit failed: VK_ERROR_DEVICE_LOST (-4)");
    base_error_clear(&err);
    assert_int_equal(vkd_check(VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateMemory", &err),
                     KILN_ERROR_OUT_OF_DEVICE_MEMORY);
    assert_int_equal(vkd_check(VK_ERROR_OUT_OF_HOST_MEMORY, "x", NULL),
                     KILN_ERROR_OUT_OF_HOST_MEMORY);
    assert_int_equal(vkd_check(VK_TIMEOUT, "x", NULL), KILN_ERROR_TIMEOUT);
}

static void test_vk_device_second_device_with_overrides(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    vkd_device_options opt = {
        .force_staging = true, .max_push_constants = 64, .max_workgroup_count = 5};
    vkd_device *dev = NULL;
    assert_int_equal(vkd_device_create(f->inst, f->device_index, &opt, &dev, &err), KILN_OK);
    const vkd_caps *caps = vkd_device_caps(dev);
    assert_false(caps->host_visible_device_memory);
    assert_int_equal(caps->max_push_constants_size, 64);
    assert_int_equal(caps->max_workgroup_count[0], 5);
    vkd_device_destroy(dev);
    vkd_device_destroy(NULL);
    vk_fixture_assert_no_messages(f);
}

/* A device seen through each profile: every limit is min(profile, device), every feature both
 * have, subgroup operations only where the device's size is the profile's, and nothing above
 * what the same device reports without the profile. */
static void test_vk_device_profiles_never_raise_a_limit(void **state) {
    vk_fixture *f = *state;
    const vkd_caps *plain = vkd_device_caps(f->dev);
    assert_true(vkd_profile_count() >= 2);
    assert_non_null(vkd_profile_find("mobile-low"));
    assert_ptr_equal(vkd_profile_find("MOBILE-MID"), vkd_profile_find("mobile-mid"));
    assert_null(vkd_profile_find("mobile-ultra"));
    assert_null(vkd_profile_find(NULL));
    assert_null(vkd_profile_at(vkd_profile_count()));
    for (uint32_t i = 0; i < vkd_profile_count(); i++) {
        const vkd_profile *p = vkd_profile_at(i);
        base_error err = {0};
        vkd_device *dev = NULL;
        vkd_device_options opt = {.profile = p};
        assert_int_equal(vkd_device_create(f->inst, f->device_index, &opt, &dev, &err), KILN_OK);
        const vkd_caps *c = vkd_device_caps(dev);
#define MIN(a, b) ((a) < (b) ? (a) : (b))
        assert_int_equal(c->max_push_constants_size,
                         MIN(plain->max_push_constants_size, p->max_push_constants_size));
        assert_int_equal(c->max_storage_buffer_range,
                         MIN(plain->max_storage_buffer_range, p->max_storage_buffer_range));
        assert_int_equal(c->max_workgroup_invocations,
                         MIN(plain->max_workgroup_invocations, p->max_workgroup_invocations));
        assert_int_equal(c->max_storage_buffers_per_stage, MIN(plain->max_storage_buffers_per_stage,
                                                               p->max_storage_buffers_per_stage));
        assert_int_equal(c->max_shared_memory_size,
                         MIN(plain->max_shared_memory_size, p->max_shared_memory_size));
        for (int d = 0; d < 3; d++) {
            assert_int_equal(c->max_workgroup_size[d],
                             MIN(plain->max_workgroup_size[d], p->max_workgroup_size[d]));
            assert_int_equal(c->max_workgroup_count[d],
                             MIN(plain->max_workgroup_count[d], p->max_workgroup_count[d]));
        }
#undef MIN
        assert_int_equal(c->int64, plain->int64 && p->int64);
        assert_int_equal(c->int16, plain->int16 && p->int16);
        assert_int_equal(c->int8, plain->int8 && p->int8);
        assert_int_equal(c->float16, plain->float16 && p->float16);
        assert_int_equal(c->float64, plain->float64 && p->float64);
        assert_int_equal(c->storage_buffer_8bit,
                         plain->storage_buffer_8bit && p->storage_buffer_8bit);
        assert_int_equal(c->storage_buffer_16bit,
                         plain->storage_buffer_16bit && p->storage_buffer_16bit);
        assert_int_equal(c->timestamps, plain->timestamps && p->timestamps);
        if (plain->subgroup_size == p->subgroup_size && p->subgroup_size) {
            assert_int_equal(c->subgroup_size, p->subgroup_size);
            assert_int_equal(c->subgroup_operations, plain->subgroup_operations);
        } else { /* a size the device does not give: no subgroup operations at all */
            assert_int_equal(c->subgroup_size, 0);
            assert_int_equal(c->subgroup_operations, 0);
            assert_false(c->subgroup_size_control);
        }
        /* What a profile leaves alone stays the device's. */
        assert_int_equal(c->api_version, plain->api_version);
        assert_int_equal(c->min_storage_buffer_offset_alignment,
                         plain->min_storage_buffer_offset_alignment);
        vkd_device_destroy(dev);
    }
    vk_fixture_assert_no_messages(f);
}

/* A device whose own limits are below the profile's keeps its own: the profile lowers, never
 * raises (the test-only overrides play the smaller device). */
static void test_vk_device_profile_over_a_smaller_device_keeps_the_device_limits(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    vkd_device *dev = NULL;
    vkd_device_options opt = {.profile = vkd_profile_find("mobile-low"),
                              .max_push_constants = 64,
                              .max_storage_range = 64 << 10,
                              .max_workgroup_count = 100};
    assert_int_equal(vkd_device_create(f->inst, f->device_index, &opt, &dev, &err), KILN_OK);
    const vkd_caps *c = vkd_device_caps(dev);
    assert_int_equal(c->max_push_constants_size, 64);        /* the profile says 128 */
    assert_int_equal(c->max_storage_buffer_range, 64 << 10); /* the profile says 128 MiB */
    assert_int_equal(c->max_workgroup_count[0], 100);        /* the profile says 65535 */
    assert_int_equal(c->max_workgroup_invocations,
                     vkd_device_caps(f->dev)->max_workgroup_invocations < 128
                         ? vkd_device_caps(f->dev)->max_workgroup_invocations
                         : 128);
    vkd_device_destroy(dev);
    vk_fixture_assert_no_messages(f);
}

/* Two instances, one with the validation layer and one without: each call goes through its own
 * instance's functions, so destroying the first leaves the second working. */
/* The known-issues table (vk/quirks.c) matches by vendor, driver and version range. */
static void test_vk_device_known_driver_issues_match_by_version(void **state) {
    (void)state;
    vkd_device_info d;
    memset(&d, 0, sizeof d);
    d.has_driver = true;
    d.props.vendorID = 0x10de;
    d.driver.driverID = VK_DRIVER_ID_NVIDIA_PROPRIETARY;
    d.props.driverVersion = (580u << 22) | (159u << 14) | (4u << 6);
    const vkd_driver_issue *out[8];
    uint32_t seen = vkd_driver_issues(&d, out, 8);
    assert_true(seen >= 3);
    for (uint32_t i = 0; i < seen; i++)
        assert_true(out[i]->what && out[i]->workaround && out[i]->seen);
    d.props.driverVersion = 581u << 22; /* a newer driver: not known to have them */
    assert_int_equal(vkd_driver_issues(&d, out, 8), 0);
    d.props.driverVersion = (580u << 22) | (159u << 14) | (4u << 6);
    d.props.vendorID = 0x1002; /* another vendor */
    assert_int_equal(vkd_driver_issues(&d, out, 8), 0);
    d.props.vendorID = 0x10005;
    d.driver.driverID = VK_DRIVER_ID_MESA_LLVMPIPE;
    assert_int_equal(vkd_driver_issues(&d, out, 0), 1); /* counted even when none fit */
}

static void test_vk_device_instances_are_independent(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    vkd_instance *layered = NULL, *plain = NULL;
    vkd_device *dev = NULL;
    vkd_buffer *buf = NULL;
    assert_int_equal(
        vkd_instance_create(&(vkd_instance_options){.validation = true}, &layered, &err), KILN_OK);
    assert_int_equal(setenv("KILN_VALIDATION", "0", 1), 0);
    kiln_status st = vkd_instance_create(NULL, &plain, &err);
    assert_int_equal(setenv("KILN_VALIDATION", "1", 1), 0);
    assert_int_equal(st, KILN_OK);
    assert_false(vkd_instance_validation(plain));
    vkd_instance_destroy(layered); /* the plain one was created last */
    assert_int_equal(vkd_device_create(plain, f->device_index, NULL, &dev, &err), KILN_OK);
    assert_int_equal(vkd_buffer_create(dev, 64, &buf, &err), KILN_OK);
    assert_int_equal(vkd_buffer_fill(buf, 0, 64, 7, &err), KILN_OK);
    uint32_t v[16];
    assert_int_equal(vkd_buffer_download(buf, 0, v, sizeof v, &err), KILN_OK);
    assert_int_equal(v[15], 7);
    vkd_buffer_destroy(buf);
    vkd_device_destroy(dev);
    vkd_instance_destroy(plain);
    vk_fixture_assert_no_messages(f); /* the fixture's instance is untouched */
}

/* Fills a buffer of dev with value and reads it back; false on any failure. */
static bool fill_and_read(vkd_device *dev, uint32_t value) {
    base_error err = {0};
    vkd_buffer *buf = NULL;
    uint32_t v[64] = {0};
    bool ok = vkd_buffer_create(dev, sizeof v, &buf, &err) == KILN_OK &&
              vkd_buffer_fill(buf, 0, sizeof v, value, &err) == KILN_OK &&
              vkd_buffer_download(buf, 0, v, sizeof v, &err) == KILN_OK && v[0] == value &&
              v[63] == value;
    vkd_buffer_destroy(buf);
    return ok;
}

/* Devices with the same options share the VkDevice and its queue (NVIDIA's driver fails when
 * one VkDevice is created or destroyed while another works: docs/gpus.md); each keeps its own
 * objects, and the VkDevice lives until its last holder goes. */
static void test_vk_device_same_options_share_one_vkdevice(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    vkd_instance *same = NULL, *other = NULL;
    vkd_instance_options opt = {
        .validation = true, .sync_validation = true, .app_name = "kiln-tests"};
    assert_int_equal(vkd_instance_create(&opt, &same, &err), KILN_OK);
    assert_ptr_equal(same, f->inst);
    opt.app_name = "kiln-tests-other";
    assert_int_equal(vkd_instance_create(&opt, &other, &err), KILN_OK);
    assert_ptr_not_equal(vkd_instance_handle(other), vkd_instance_handle(f->inst));
    vkd_instance_destroy(same); /* the fixture's holds it still */
    assert_non_null(vkd_instance_handle(f->inst));

    vkd_device *a = NULL, *b = NULL, *narrow = NULL, *elsewhere = NULL;
    assert_int_equal(vkd_device_create(f->inst, f->device_index, NULL, &a, &err), KILN_OK);
    assert_int_equal(vkd_device_create(f->inst, f->device_index, NULL, &b, &err), KILN_OK);
    assert_ptr_not_equal(a, b);
    assert_ptr_equal(vkd_device_handle(a), vkd_device_handle(f->dev));
    assert_ptr_equal(vkd_device_handle(b), vkd_device_handle(f->dev));
    /* Other features enabled, or another instance: a VkDevice of its own. */
    vkd_device_options no_int64 = {.no_int64 = true};
    assert_int_equal(vkd_device_create(f->inst, f->device_index, &no_int64, &narrow, &err),
                     KILN_OK);
    if (vkd_device_info_of(f->dev)->features.shaderInt64)
        assert_ptr_not_equal(vkd_device_handle(narrow), vkd_device_handle(f->dev));
    assert_false(vkd_device_caps(narrow)->int64);
    assert_int_equal(vkd_device_create(other, f->device_index, NULL, &elsewhere, &err), KILN_OK);
    assert_ptr_not_equal(vkd_device_handle(elsewhere), vkd_device_handle(f->dev));
    /* Each works after the others sharing its VkDevice are gone. */
    assert_true(fill_and_read(a, 11));
    vkd_device_destroy(a);
    assert_true(fill_and_read(b, 12));
    vkd_device_destroy(b);
    assert_true(fill_and_read(f->dev, 13));
    assert_true(fill_and_read(narrow, 14));
    assert_true(fill_and_read(elsewhere, 15));
    vkd_device_destroy(narrow);
    vkd_device_destroy(elsewhere);
    vkd_instance_destroy(other);
    vk_fixture_assert_no_messages(f);
}

typedef struct sharer {
    const vk_fixture *f;
    uint32_t seed;
    int failures;
} sharer;

static void *share_rounds(void *arg) {
    sharer *s = arg;
    for (uint32_t r = 0; r < 8; r++) {
        base_error err = {0};
        vkd_device *dev = NULL;
        if (vkd_device_create(s->f->inst, s->f->device_index, NULL, &dev, &err) != KILN_OK ||
            !fill_and_read(dev, s->seed * 100 + r) || !fill_and_read(dev, s->seed * 100 + r + 50))
            s->failures++;
        vkd_device_destroy(dev);
    }
    return NULL;
}

/* Devices made, used (submissions on the shared queue) and destroyed on four threads at once. */
static void test_vk_device_shared_vkdevice_on_several_threads(void **state) {
    vk_fixture *f = *state;
    pthread_t threads[4];
    sharer s[4];
    for (uint32_t i = 0; i < 4; i++) {
        s[i] = (sharer){.f = f, .seed = i + 1};
        assert_int_equal(pthread_create(&threads[i], NULL, share_rounds, &s[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(s[i].failures, 0);
    assert_true(fill_and_read(f->dev, 99));
    vk_fixture_assert_no_messages(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vk_device_create_enables_what_it_reports),
        cmocka_unit_test(test_vk_device_select_by_index_and_name),
        cmocka_unit_test(test_vk_device_select_rejects_bad_index_and_name),
        cmocka_unit_test(test_vk_device_select_prefers_discrete_then_integrated),
        cmocka_unit_test(test_vk_device_check_maps_results),
        cmocka_unit_test(test_vk_device_second_device_with_overrides),
        cmocka_unit_test(test_vk_device_profiles_never_raise_a_limit),
        cmocka_unit_test(test_vk_device_profile_over_a_smaller_device_keeps_the_device_limits),
        cmocka_unit_test(test_vk_device_instances_are_independent),
        cmocka_unit_test(test_vk_device_same_options_share_one_vkdevice),
        cmocka_unit_test(test_vk_device_shared_vkdevice_on_several_threads),
        cmocka_unit_test(test_vk_device_known_driver_issues_match_by_version),
    };
    return cmocka_run_group_tests(tests, vk_fixture_setup, vk_fixture_teardown);
}
