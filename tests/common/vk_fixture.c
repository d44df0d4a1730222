#include "vk_fixture.h"

#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

static const char *const keep_loaded[] = {
    "libvulkan.so.1",
    "libvulkan_lvp.so",
    "libVkLayer_khronos_validation.so",
};

void vk_fixture_keep_drivers_loaded(void) {
    for (size_t i = 0; i < sizeof keep_loaded / sizeof keep_loaded[0]; i++) {
        /* A library that is absent is fine: the loader reports what is missing later. */
        (void)dlopen(keep_loaded[i], RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
    }
}

static vkd_message_counts last_counts;
static uint32_t expected_errors; /* errors a test provoked on purpose (vk_fixture_take_errors) */

int vk_fixture_setup(void **state) {
    vk_fixture_keep_drivers_loaded();
    vk_fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    vkd_instance_options opt = {
        .validation = true, .sync_validation = true, .app_name = "kiln-tests"};
    if (vkd_instance_create(&opt, &f->inst, &f->err) != KILN_OK ||
        vkd_instance_select(f->inst, getenv("KILN_DEVICE"), &f->device_index, &f->err) != KILN_OK ||
        vkd_device_create(f->inst, f->device_index, NULL, &f->dev, &f->err) != KILN_OK) {
        fprintf(stderr, "vk fixture: %s\n", base_error_message(&f->err));
        vkd_instance_destroy(f->inst);
        free(f);
        return -1;
    }
    last_counts = vkd_instance_messages(f->inst);
    *state = f;
    return 0;
}

uint32_t vk_fixture_take_errors(vk_fixture *f) {
    vkd_message_counts c = vkd_instance_messages(f->inst);
    uint32_t n = c.errors - last_counts.errors;
    expected_errors += n;
    last_counts.errors = c.errors;
    return n;
}

void vk_fixture_assert_no_messages(vk_fixture *f) {
    vkd_message_counts c = vkd_instance_messages(f->inst);
    assert_int_equal(c.errors, last_counts.errors);
    assert_int_equal(c.warnings, last_counts.warnings);
    last_counts = c;
}

int vk_fixture_teardown(void **state) {
    vk_fixture *f = *state;
    if (!f)
        return 0;
    vkd_device_destroy(f->dev);
    vkd_message_counts c = vkd_instance_messages(f->inst);
    vkd_instance_destroy(f->inst);
    free(f);
    if (c.errors != expected_errors || c.warnings) {
        fprintf(stderr, "validation reported %u errors (%u expected) and %u warnings\n", c.errors,
                expected_errors, c.warnings);
        return -1;
    }
    return 0;
}
