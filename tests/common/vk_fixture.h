/* The Vulkan fixture of every device test: an instance with the Khronos validation layer
 * (synchronization validation included) and the device KILN_DEVICE names (default choice
 * otherwise). Any validation message fails the test that produced it. */
#ifndef KILN_TESTS_VK_FIXTURE_H
#define KILN_TESTS_VK_FIXTURE_H

#include "vkd.h"

typedef struct vk_fixture {
    vkd_instance *inst;
    vkd_device *dev;
    uint32_t device_index;
    base_error err;
} vk_fixture;

/* Keeps the ICD and layer libraries loaded at exit (lavapipe leaks a few bytes when it is
 * unloaded, which would hide real leaks from LeakSanitizer). */
void vk_fixture_keep_drivers_loaded(void);

/* cmocka group setup/teardown: *state becomes a vk_fixture *. Teardown fails on validation
 * messages. */
int vk_fixture_setup(void **state);
int vk_fixture_teardown(void **state);
/* Fails the current test when the validation layer reported anything since the last check. */
void vk_fixture_assert_no_messages(vk_fixture *f);
/* The validation errors reported since the last check, which a test provoked on purpose: they
 * no longer fail the teardown. */
uint32_t vk_fixture_take_errors(vk_fixture *f);

#endif
