/* VkResult -> kiln_status, with a message naming the call that failed. */
#include "vkd_internal.h"

const char *vkd_result_name(VkResult result) {
    switch (result) {
#define R(name)                                                                                    \
    case name:                                                                                     \
        return #name;
        R(VK_SUCCESS)
        R(VK_NOT_READY)
        R(VK_TIMEOUT)
        R(VK_EVENT_SET)
        R(VK_EVENT_RESET)
        R(VK_INCOMPLETE)
        R(VK_ERROR_OUT_OF_HOST_MEMORY)
        R(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        R(VK_ERROR_INITIALIZATION_FAILED)
        R(VK_ERROR_DEVICE_LOST)
        R(VK_ERROR_MEMORY_MAP_FAILED)
        R(VK_ERROR_LAYER_NOT_PRESENT)
        R(VK_ERROR_EXTENSION_NOT_PRESENT)
        R(VK_ERROR_FEATURE_NOT_PRESENT)
        R(VK_ERROR_INCOMPATIBLE_DRIVER)
        R(VK_ERROR_TOO_MANY_OBJECTS)
        R(VK_ERROR_FORMAT_NOT_SUPPORTED)
        R(VK_ERROR_FRAGMENTED_POOL)
        R(VK_ERROR_UNKNOWN)
        R(VK_ERROR_OUT_OF_POOL_MEMORY)
        R(VK_ERROR_INVALID_EXTERNAL_HANDLE)
        R(VK_ERROR_FRAGMENTATION)
        R(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
        R(VK_PIPELINE_COMPILE_REQUIRED)
        R(VK_ERROR_INVALID_SHADER_NV)
#undef R
    default:
        return "VK_ERROR_(unrecognised)";
    }
}

static kiln_status result_status(VkResult result) {
    switch (result) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
        return KILN_ERROR_OUT_OF_HOST_MEMORY;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTED_POOL:
    case VK_ERROR_FRAGMENTATION:
    case VK_ERROR_TOO_MANY_OBJECTS:
        return KILN_ERROR_OUT_OF_DEVICE_MEMORY;
    case VK_ERROR_DEVICE_LOST:
        return KILN_ERROR_DEVICE_LOST;
    case VK_ERROR_LAYER_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_FEATURE_NOT_PRESENT:
    case VK_ERROR_FORMAT_NOT_SUPPORTED:
        return KILN_ERROR_UNSUPPORTED;
    case VK_ERROR_INCOMPATIBLE_DRIVER:
        return KILN_ERROR_NO_DEVICE;
    case VK_ERROR_INVALID_SHADER_NV:
        return KILN_ERROR_INVALID_SPIRV;
    case VK_TIMEOUT:
        return KILN_ERROR_TIMEOUT;
    default:
        return KILN_ERROR_VULKAN;
    }
}

kiln_status vkd_check(VkResult result, const char *call, base_error *err) {
    if (result >= 0 && result != VK_TIMEOUT)
        return KILN_OK;
    return base_error_set(err, result_status(result), "%s failed: %s (%d)", call,
                          vkd_result_name(result), (int)result);
}
