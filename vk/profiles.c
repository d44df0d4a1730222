/* Device profiles: stricter devices than the one at hand, as data. Each entry is what a class of
 * device reports (the Khronos Vulkan profiles and gpuinfo.org's reports of mobile GPUs); device.c
 * applies one as min(profile, device) and enables only the features both have. */
#include "vkd.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const vkd_profile profiles[] = {
    {.name = "mobile-low",
     .summary = "a low-end mobile GPU: no int64, no 8/16-bit storage, no f16, 128 invocations, "
                "subgroups of 16, 128-byte push constants, 128 MiB ranges, 4 storage buffers, "
                "no timestamps",
     .subgroup_size = 16,
     .max_workgroup_invocations = 128,
     .max_workgroup_size = {128, 128, 64},
     .max_workgroup_count = {65535, 65535, 65535},
     .max_push_constants_size = 128,
     .max_storage_buffer_range = 128ull << 20,
     .max_storage_buffers_per_stage = 4,
     .max_shared_memory_size = 16384},
    {.name = "mobile-mid",
     .summary = "a mid-range mobile GPU: 16-bit storage and f16 arithmetic (no int64, no 8-bit "
                "storage), 256 invocations, subgroups of 64, 128-byte push constants, 256 MiB "
                "ranges, 8 storage buffers, timestamps",
     .int16 = true,
     .float16 = true,
     .storage_buffer_16bit = true,
     .timestamps = true,
     .subgroup_size = 64,
     .max_workgroup_invocations = 256,
     .max_workgroup_size = {256, 256, 64},
     .max_workgroup_count = {65535, 65535, 65535},
     .max_push_constants_size = 128,
     .max_storage_buffer_range = 256ull << 20,
     .max_storage_buffers_per_stage = 8,
     .max_shared_memory_size = 32768},
};

uint32_t vkd_profile_count(void) {
    return (uint32_t)(sizeof profiles / sizeof profiles[0]);
}

const vkd_profile *vkd_profile_at(uint32_t index) {
    return index < vkd_profile_count() ? &profiles[index] : NULL;
}

const vkd_profile *vkd_profile_find(const char *name) {
    for (uint32_t i = 0; name && i < vkd_profile_count(); i++) {
        if (strcasecmp(profiles[i].name, name) == 0)
            return &profiles[i];
    }
    return NULL;
}

void vkd_profile_names(char *buf, size_t size) {
    if (!size)
        return;
    buf[0] = '\0';
    for (uint32_t i = 0; i < vkd_profile_count(); i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", i ? ", " : "", profiles[i].name);
    }
}
