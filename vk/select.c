/* Device selection: KILN_DEVICE=<index or name substring>, else by device type. */
#include "vkd_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

static int type_rank(VkPhysicalDeviceType type) {
    switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        return 1;
    default:
        return 0;
    }
}

static bool contains_nocase(const char *hay, const char *needle) {
    for (; *hay; hay++) {
        size_t i = 0;
        while (needle[i] && hay[i] &&
               tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (!needle[i])
            return true;
    }
    return false;
}

static bool parse_index(const char *s, uint32_t *out) {
    if (!isdigit((unsigned char)s[0]))
        return false;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*end != '\0' || v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

/* "0: llvmpipe (LLVM 15.0.6, 256 bits); 1: ..." into buf (truncated to cap): what a spec can
 * name, for the message of one that names nothing. A device without a compute queue says so. */
static const char *device_list(const vkd_device_info *infos, uint32_t count, char *buf,
                               size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < count && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%u: %s%s", i ? "; " : "", i,
                              infos[i].props.deviceName,
                              infos[i].compute_family < 0 ? " (no compute queue)" : "");
    return buf;
}

kiln_status vkd_select_device(const vkd_device_info *infos, uint32_t count, const char *spec,
                              uint32_t *index, base_error *err) {
    char list[BASE_ERROR_MESSAGE_MAX];
    if (count == 0)
        return base_error_set(err, KILN_ERROR_NO_DEVICE,
                              "no Vulkan device found (on a machine without a GPU install "
                              "lavapipe: apt-get install mesa-vulkan-drivers)");
    if (spec && spec[0]) {
        uint32_t want;
        if (parse_index(spec, &want)) {
            if (want >= count)
                return base_error_set(err, KILN_ERROR_NOT_FOUND,
                                      "device index %u does not exist; the Vulkan devices: %s",
                                      want, device_list(infos, count, list, sizeof list));
            if (infos[want].compute_family < 0)
                return base_error_set(err, KILN_ERROR_NO_DEVICE,
                                      "device %u (%s) has no compute queue", want,
                                      infos[want].props.deviceName);
            *index = want;
            return KILN_OK;
        }
        for (uint32_t i = 0; i < count; i++) {
            if (contains_nocase(infos[i].props.deviceName, spec) && infos[i].compute_family >= 0) {
                *index = i;
                return KILN_OK;
            }
        }
        return base_error_set(err, KILN_ERROR_NOT_FOUND,
                              "no device with a compute queue matches \"%s\"; the Vulkan "
                              "devices: %s",
                              spec, device_list(infos, count, list, sizeof list));
    }
    int best_rank = -1;
    for (uint32_t i = 0; i < count; i++) {
        int rank = type_rank(infos[i].props.deviceType);
        if (infos[i].compute_family >= 0 && rank > best_rank) {
            best_rank = rank;
            *index = i;
        }
    }
    if (best_rank < 0)
        return base_error_set(err, KILN_ERROR_NO_DEVICE, "no Vulkan device has a compute queue");
    return KILN_OK;
}

kiln_status vkd_instance_select(const vkd_instance *inst, const char *spec, uint32_t *index,
                                base_error *err) {
    return vkd_select_device(inst->devices, inst->device_count, spec, index, err);
}
