/* The device's VkPipelineCache: created empty or from initial data when the device is created,
 * merged with saved data, read back for saving. vk/ never judges the bytes: the caller
 * (shaders_cache/) checks them before they reach the driver. */
#include "vkd_internal.h"

kiln_status vkd_pipeline_cache_create(vkd_device *dev, base_error *err) {
    VkPipelineCacheCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
        .initialDataSize = dev->options.pipeline_cache_data ? dev->options.pipeline_cache_size : 0,
        .pInitialData = dev->options.pipeline_cache_data,
    };
    kiln_status st =
        vkd_check(dev->vk.vkCreatePipelineCache(dev->handle, &info, NULL, &dev->pipeline_cache),
                  "vkCreatePipelineCache", err);
    /* The caller's bytes are not kept: the pointer must not outlive vkd_device_create. */
    dev->options.pipeline_cache_data = NULL;
    dev->options.pipeline_cache_size = 0;
    return st;
}

kiln_status vkd_pipeline_cache_merge(vkd_device *dev, const void *data, size_t size,
                                     base_error *err) {
    if (!data || size == 0)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "vkd_pipeline_cache_merge: no data to merge");
    const struct VolkDeviceTable *vk = &dev->vk;
    VkPipelineCacheCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
        .initialDataSize = size,
        .pInitialData = data,
    };
    VkPipelineCache other = VK_NULL_HANDLE;
    kiln_status st = vkd_check(vk->vkCreatePipelineCache(dev->handle, &info, NULL, &other),
                               "vkCreatePipelineCache", err);
    if (st != KILN_OK)
        return st;
    st = vkd_check(vk->vkMergePipelineCaches(dev->handle, dev->pipeline_cache, 1, &other),
                   "vkMergePipelineCaches", err);
    vk->vkDestroyPipelineCache(dev->handle, other, NULL);
    return st;
}

kiln_status vkd_pipeline_cache_data(const vkd_device *dev, void *data, size_t *size,
                                    base_error *err) {
    if (!size)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "vkd_pipeline_cache_data: size is NULL");
    VkResult r = dev->vk.vkGetPipelineCacheData(dev->handle, dev->pipeline_cache, size, data);
    if (r == VK_INCOMPLETE)
        return base_error_set(err, KILN_ERROR_LIMIT_EXCEEDED,
                              "vkGetPipelineCacheData: the pipeline cache grew past %zu bytes",
                              *size);
    return vkd_check(r, "vkGetPipelineCacheData", err);
}
