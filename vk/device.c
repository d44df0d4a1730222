/* The logical device: features enabled from what the device has, a compute queue, the
 * pipeline cache, memory-type choice, and the one-shot transfer submission. */
#include "vkd_internal.h"

#include <pthread.h>
#include <string.h>

/* ---- shared devices ------------------------------------------------------------------------ */

/* What makes two devices of one physical device interchangeable: the features enabled (the
 * extensions follow from the physical device). */
typedef struct feature_key {
    VkBool32 flags[12];
} feature_key;

struct vkd_core {
    struct vkd_core *next;
    uint32_t refs;
    const vkd_instance *inst;
    VkPhysicalDevice physical;
    feature_key key;
    VkDevice handle;
    VkQueue queue;
    struct VolkDeviceTable vk;
    pthread_mutex_t queue_lock;
};

/* Every shared device of the process (under the lifecycle lock). */
static vkd_core *cores;

/* The features Kiln enables when present, chained for vkCreateDevice. */
typedef struct feature_chain {
    VkPhysicalDeviceFeatures2 f2;
    VkPhysicalDevice16BitStorageFeatures storage16;
    VkPhysicalDevice8BitStorageFeatures storage8;
    VkPhysicalDeviceShaderFloat16Int8Features float16_int8;
    VkPhysicalDeviceMaintenance4Features maintenance4;
    VkPhysicalDeviceSubgroupSizeControlFeatures subgroup_size_control;
    const char *extensions[8];
    uint32_t extension_count;
} feature_chain;

static void push_struct(void *head, void *s) {
    VkBaseOutStructure *h = head, *x = s;
    x->pNext = h->pNext;
    h->pNext = x;
}

/* Fills the chain with the subset of the device's features that code generation uses and
 * records in caps exactly what was enabled. */
static void build_features(const vkd_device_info *d, feature_chain *c, vkd_caps *caps) {
    bool v12 = d->api_version >= VK_API_VERSION_1_2, v13 = d->api_version >= VK_API_VERSION_1_3;
    memset(c, 0, sizeof *c);
    c->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    c->f2.features.shaderInt64 = d->features.shaderInt64;
    c->f2.features.shaderInt16 = d->features.shaderInt16;
    c->f2.features.shaderFloat64 = d->features.shaderFloat64;
    caps->int64 = d->features.shaderInt64;
    caps->int16 = d->features.shaderInt16;
    caps->float64 = d->features.shaderFloat64;
    c->f2.features.shaderStorageBufferArrayDynamicIndexing =
        d->features.shaderStorageBufferArrayDynamicIndexing;
    caps->storage_buffer_array_dynamic_indexing =
        d->features.shaderStorageBufferArrayDynamicIndexing;

    c->storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
    c->storage16.storageBuffer16BitAccess = d->storage16.storageBuffer16BitAccess;
    caps->storage_buffer_16bit = d->storage16.storageBuffer16BitAccess;
    push_struct(&c->f2, &c->storage16);

    if (v12 || d->ext_8bit_storage) {
        c->storage8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
        c->storage8.storageBuffer8BitAccess = d->storage8.storageBuffer8BitAccess;
        caps->storage_buffer_8bit = d->storage8.storageBuffer8BitAccess;
        push_struct(&c->f2, &c->storage8);
        if (d->ext_8bit_storage)
            c->extensions[c->extension_count++] = "VK_KHR_8bit_storage";
    }
    if (v12 || d->ext_float16_int8) {
        c->float16_int8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
        c->float16_int8.shaderFloat16 = d->float16_int8.shaderFloat16;
        c->float16_int8.shaderInt8 = d->float16_int8.shaderInt8;
        caps->float16 = d->float16_int8.shaderFloat16;
        caps->int8 = d->float16_int8.shaderInt8;
        push_struct(&c->f2, &c->float16_int8);
        if (d->ext_float16_int8)
            c->extensions[c->extension_count++] = "VK_KHR_shader_float16_int8";
    }
    if (v13 || d->ext_maintenance4) {
        c->maintenance4.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES;
        c->maintenance4.maintenance4 = d->maintenance4.maintenance4;
        /* Vulkan allows the LocalSizeId execution mode only with this feature enabled. */
        caps->maintenance4 = d->maintenance4.maintenance4;
        push_struct(&c->f2, &c->maintenance4);
        if (d->ext_maintenance4)
            c->extensions[c->extension_count++] = "VK_KHR_maintenance4";
    }
    if (d->has_subgroup_size_control) {
        c->subgroup_size_control.sType =
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
        c->subgroup_size_control.subgroupSizeControl =
            d->subgroup_size_control_features.subgroupSizeControl;
        c->subgroup_size_control.computeFullSubgroups =
            d->subgroup_size_control_features.computeFullSubgroups;
        caps->subgroup_size_control = d->subgroup_size_control_features.subgroupSizeControl;
        caps->compute_full_subgroups = d->subgroup_size_control_features.computeFullSubgroups;
        push_struct(&c->f2, &c->subgroup_size_control);
        if (d->ext_subgroup_size_control)
            c->extensions[c->extension_count++] = "VK_EXT_subgroup_size_control";
    }
    if (d->ext_portability_subset) /* required when the device offers it */
        c->extensions[c->extension_count++] = "VK_KHR_portability_subset";
}

/* The features a profile does not have, off in the chain that creates the device (chain NULL: a
 * wrapped device, whose caps alone are masked). */
static void profile_features(const vkd_profile *p, feature_chain *c, vkd_caps *caps) {
    caps->int64 &= p->int64;
    caps->int16 &= p->int16;
    caps->int8 &= p->int8;
    caps->float16 &= p->float16;
    caps->float64 &= p->float64;
    caps->storage_buffer_8bit &= p->storage_buffer_8bit;
    caps->storage_buffer_16bit &= p->storage_buffer_16bit;
    if (!c)
        return;
    c->f2.features.shaderInt64 &= (VkBool32)p->int64;
    c->f2.features.shaderInt16 &= (VkBool32)p->int16;
    c->f2.features.shaderFloat64 &= (VkBool32)p->float64;
    c->float16_int8.shaderInt8 &= (VkBool32)p->int8;
    c->float16_int8.shaderFloat16 &= (VkBool32)p->float16;
    c->storage8.storageBuffer8BitAccess &= (VkBool32)p->storage_buffer_8bit;
    c->storage16.storageBuffer16BitAccess &= (VkBool32)p->storage_buffer_16bit;
}

static feature_key chain_key(const feature_chain *c) {
    feature_key k = {{
        c->f2.features.shaderInt64,
        c->f2.features.shaderInt16,
        c->f2.features.shaderFloat64,
        c->f2.features.shaderStorageBufferArrayDynamicIndexing,
        c->storage16.storageBuffer16BitAccess,
        c->storage8.storageBuffer8BitAccess,
        c->float16_int8.shaderFloat16,
        c->float16_int8.shaderInt8,
        c->maintenance4.maintenance4,
        c->subgroup_size_control.subgroupSizeControl,
        c->subgroup_size_control.computeFullSubgroups,
        c->extension_count,
    }};
    return k;
}

/* The shared device of inst's physical device with the chain's features: an existing one,
 * counted, or a new one (vkCreateDevice). */
static kiln_status core_acquire(const vkd_instance *inst, const vkd_device_info *info,
                                const feature_chain *chain, vkd_core **out, base_error *err) {
    feature_key key = chain_key(chain);
    *out = NULL;
    vkd_lifecycle_lock();
    for (vkd_core *c = cores; c; c = c->next) {
        if (c->inst == inst && c->physical == info->physical &&
            memcmp(&c->key, &key, sizeof key) == 0) {
            c->refs++;
            vkd_lifecycle_unlock();
            *out = c;
            return KILN_OK;
        }
    }
    vkd_core *c = base_calloc(&inst->alloc, 1, sizeof *c);
    if (!c || pthread_mutex_init(&c->queue_lock, NULL) != 0) {
        vkd_lifecycle_unlock();
        base_allocator alloc = inst->alloc;
        base_free(&alloc, c, sizeof *c);
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for device");
    }
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = (uint32_t)info->compute_family,
        .queueCount = 1,
        .pQueuePriorities = &priority,
    };
    VkDeviceCreateInfo device_info = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &chain->f2,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &queue_info,
        .enabledExtensionCount = chain->extension_count,
        .ppEnabledExtensionNames = chain->extensions,
    };
    kiln_status st =
        vkd_check(inst->fn.CreateDevice(info->physical, &device_info, NULL, &c->handle),
                  "vkCreateDevice", err);
    if (st != KILN_OK) {
        vkd_lifecycle_unlock();
        pthread_mutex_destroy(&c->queue_lock);
        base_allocator alloc = inst->alloc;
        base_free(&alloc, c, sizeof *c);
        return st;
    }
    c->refs = 1;
    c->inst = inst;
    c->physical = info->physical;
    c->key = key;
    vkd_load_device_table(inst, c->handle, &c->vk);
    c->vk.vkGetDeviceQueue(c->handle, (uint32_t)info->compute_family, 0, &c->queue);
    c->next = cores;
    cores = c;
    vkd_lifecycle_unlock();
    *out = c;
    return KILN_OK;
}

/* Drops a holder of c; the last destroys the VkDevice. */
static void core_release(vkd_core *c) {
    vkd_lifecycle_lock();
    if (--c->refs > 0) {
        vkd_lifecycle_unlock();
        return;
    }
    for (vkd_core **p = &cores; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    c->vk.vkDestroyDevice(c->handle, NULL);
    vkd_lifecycle_unlock();
    pthread_mutex_destroy(&c->queue_lock);
    base_allocator alloc = c->inst->alloc;
    base_free(&alloc, c, sizeof *c);
}

VkResult vkd_queue_submit(vkd_device *dev, const VkSubmitInfo *submit, VkFence fence) {
    if (dev->core)
        pthread_mutex_lock(&dev->core->queue_lock);
    VkResult r = dev->vk.vkQueueSubmit(dev->queue, 1, submit, fence);
    if (dev->core)
        pthread_mutex_unlock(&dev->core->queue_lock);
    return r;
}

static uint32_t min_u32(uint32_t a, uint32_t b) {
    return a < b ? a : b;
}

/* The limits in force under profile p: min(profile, device); subgroup operations only where the
 * device's subgroups are the profile's size (Kiln does not pin sizes, so the device's default
 * size must be it). */
static void profile_limits(const vkd_profile *p, vkd_caps *caps) {
    caps->timestamps &= p->timestamps;
    if (!p->subgroup_size || caps->subgroup_size != p->subgroup_size) {
        caps->subgroup_operations = 0;
        caps->subgroup_size = caps->min_subgroup_size = caps->max_subgroup_size = 0;
        caps->subgroup_size_control = caps->compute_full_subgroups = false;
    } else {
        caps->min_subgroup_size = caps->max_subgroup_size = p->subgroup_size;
        caps->subgroup_size_control = false; /* a fixed size: nothing to require */
    }
    caps->max_workgroup_invocations =
        min_u32(caps->max_workgroup_invocations, p->max_workgroup_invocations);
    for (int i = 0; i < 3; i++) {
        caps->max_workgroup_size[i] =
            min_u32(caps->max_workgroup_size[i], p->max_workgroup_size[i]);
        caps->max_workgroup_count[i] =
            min_u32(caps->max_workgroup_count[i], p->max_workgroup_count[i]);
    }
    caps->max_push_constants_size =
        min_u32(caps->max_push_constants_size, p->max_push_constants_size);
    if (p->max_storage_buffer_range < caps->max_storage_buffer_range)
        caps->max_storage_buffer_range = p->max_storage_buffer_range;
    caps->max_storage_buffers_per_stage =
        min_u32(caps->max_storage_buffers_per_stage, p->max_storage_buffers_per_stage);
    caps->max_shared_memory_size = min_u32(caps->max_shared_memory_size, p->max_shared_memory_size);
}

static void fill_caps(const vkd_device_info *d, const vkd_device_options *opt, vkd_caps *caps) {
    const VkPhysicalDeviceLimits *l = &d->props.limits;
    caps->api_version = d->api_version;
    caps->spirv_version = d->api_version >= VK_API_VERSION_1_3   ? 0x10600u
                          : d->api_version >= VK_API_VERSION_1_2 ? 0x10500u
                                                                 : 0x10300u;
    caps->subgroup_size = d->subgroup.subgroupSize;
    if (caps->subgroup_size_control) {
        caps->min_subgroup_size = d->subgroup_size_control.minSubgroupSize;
        caps->max_subgroup_size = d->subgroup_size_control.maxSubgroupSize;
    } else {
        caps->min_subgroup_size = caps->max_subgroup_size = caps->subgroup_size;
    }
    caps->subgroup_operations = (d->subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT)
                                    ? d->subgroup.supportedOperations
                                    : 0;
    /* Float controls are core in 1.2 (a property, no feature to enable). */
    caps->preserve_specials32 = caps->api_version >= VK_API_VERSION_1_2 && d->has_float_controls &&
                                d->float_controls.shaderSignedZeroInfNanPreserveFloat32;
    const VkQueueFamilyProperties *q = &d->queue_families[d->compute_family];
    caps->timestamps = q->timestampValidBits > 0 && l->timestampPeriod > 0.0f;
    caps->timestamp_period_ns = l->timestampPeriod;
    caps->max_push_constants_size = l->maxPushConstantsSize;
    if (opt->max_push_constants && opt->max_push_constants < caps->max_push_constants_size)
        caps->max_push_constants_size = opt->max_push_constants;
    caps->max_storage_buffer_range = l->maxStorageBufferRange;
    if (opt->max_storage_range && opt->max_storage_range < caps->max_storage_buffer_range)
        caps->max_storage_buffer_range = opt->max_storage_range;
    caps->max_memory_allocation_size = d->maintenance3.maxMemoryAllocationSize;
    for (int i = 0; i < 3; i++) {
        caps->max_workgroup_count[i] = l->maxComputeWorkGroupCount[i];
        if (opt->max_workgroup_count && opt->max_workgroup_count < caps->max_workgroup_count[i])
            caps->max_workgroup_count[i] = opt->max_workgroup_count;
        caps->max_workgroup_size[i] = l->maxComputeWorkGroupSize[i];
    }
    caps->max_workgroup_invocations = l->maxComputeWorkGroupInvocations;
    caps->max_shared_memory_size = l->maxComputeSharedMemorySize;
    caps->max_storage_buffers_per_stage = l->maxPerStageDescriptorStorageBuffers;
    caps->min_storage_buffer_offset_alignment = l->minStorageBufferOffsetAlignment;
    caps->texel_fetch = d->texel_uint4 && l->maxTexelBufferElements > 0;
    caps->max_texel_buffer_elements = l->maxTexelBufferElements;
    if (opt->profile)
        profile_limits(opt->profile, caps);
}

/* Storage buffers live in a device-local type when there is one; when that type is also
 * host-visible and coherent (UMA, lavapipe) buffers are mapped and need no staging. */
static void choose_memory(vkd_device *dev) {
    const VkPhysicalDeviceMemoryProperties *m = &dev->info->memory;
    const VkMemoryPropertyFlags host =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int32_t device_type = -1, staging = -1;
    for (uint32_t i = 0; i < m->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = m->memoryTypes[i].propertyFlags;
        if (device_type < 0 && (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT))
            device_type = (int32_t)i;
        if ((f & host) == host && (staging < 0 || (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT)))
            staging = (int32_t)i;
    }
    if (device_type < 0)
        device_type = staging >= 0 ? staging : 0;
    dev->memory_type_device = (uint32_t)device_type;
    /* Blocks of 64 MiB for buffers below 16 MiB (vk/memory.c), within the allocation limit. */
    dev->block_size = 64ull << 20;
    if (dev->info->maintenance3.maxMemoryAllocationSize &&
        dev->block_size > dev->info->maintenance3.maxMemoryAllocationSize)
        dev->block_size = dev->info->maintenance3.maxMemoryAllocationSize;
    dev->memory_type_staging = staging;
    VkMemoryPropertyFlags f = m->memoryTypes[device_type].propertyFlags;
    dev->caps.host_visible_device_memory = (f & host) == host && !dev->options.force_staging;
}

static kiln_status create_objects(vkd_device *dev, base_error *err) {
    const struct VolkDeviceTable *vk = &dev->vk;
    kiln_status st = vkd_pipeline_cache_create(dev, err);
    if (st != KILN_OK)
        return st;
    VkCommandPoolCreateInfo pool_info = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = dev->queue_family,
    };
    st = vkd_check(vk->vkCreateCommandPool(dev->handle, &pool_info, NULL, &dev->command_pool),
                   "vkCreateCommandPool", err);
    if (st != KILN_OK)
        return st;
    VkCommandBufferAllocateInfo cmd_info = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = dev->command_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    st = vkd_check(vk->vkAllocateCommandBuffers(dev->handle, &cmd_info, &dev->transfer_cmd),
                   "vkAllocateCommandBuffers", err);
    if (st != KILN_OK)
        return st;
    VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    return vkd_check(vk->vkCreateFence(dev->handle, &fence_info, NULL, &dev->transfer_fence),
                     "vkCreateFence", err);
}

/* The caller's options (NULL: none), with the defaults where a field is 0. */
static vkd_device_options options_with_defaults(const vkd_device_options *options) {
    vkd_device_options o = {0};
    if (options)
        o = *options;
    if (!o.fence_timeout_ns)
        o.fence_timeout_ns = 60ull * 1000 * 1000 * 1000;
    if (!o.fence_spin_ns)
        o.fence_spin_ns = VKD_FENCE_SPIN_NS;
    return o;
}

kiln_status vkd_device_create(const vkd_instance *inst, uint32_t index,
                              const vkd_device_options *options, vkd_device **out,
                              base_error *err) {
    *out = NULL;
    const vkd_device_info *info = vkd_instance_device(inst, index);
    if (!info)
        return base_error_set(err, KILN_ERROR_NOT_FOUND,
                              "device index %u does not exist (%u device%s)", index,
                              inst->device_count, inst->device_count == 1 ? "" : "s");
    if (info->compute_family < 0)
        return base_error_set(err, KILN_ERROR_NO_DEVICE, "device %u (%s) has no compute queue",
                              index, info->props.deviceName);
    if (info->api_version < VK_API_VERSION_1_1)
        return base_error_set(err, KILN_ERROR_UNSUPPORTED,
                              "device %u (%s) supports Vulkan %u.%u; Kiln needs 1.1", index,
                              info->props.deviceName, VK_API_VERSION_MAJOR(info->api_version),
                              VK_API_VERSION_MINOR(info->api_version));
    vkd_device *dev = base_calloc(&inst->alloc, 1, sizeof *dev);
    if (!dev)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for device");
    dev->alloc = inst->alloc;
    dev->inst = inst;
    dev->info = info;
    dev->options = options_with_defaults(options);
    dev->queue_family = (uint32_t)info->compute_family;

    feature_chain chain;
    build_features(info, &chain, &dev->caps);
    if (dev->options.no_int64) { /* not enabled either: the validation layer checks the code */
        chain.f2.features.shaderInt64 = VK_FALSE;
        dev->caps.int64 = false;
    }
    if (dev->options.no_small_storage) {
        chain.storage8.storageBuffer8BitAccess = VK_FALSE;
        chain.storage16.storageBuffer16BitAccess = VK_FALSE;
        chain.float16_int8.shaderInt8 = VK_FALSE;
        chain.float16_int8.shaderFloat16 = VK_FALSE;
        dev->caps.storage_buffer_8bit = dev->caps.storage_buffer_16bit = false;
        dev->caps.int8 = dev->caps.float16 = false;
    }
    if (dev->options.profile)
        profile_features(dev->options.profile, &chain, &dev->caps);
    fill_caps(info, &dev->options, &dev->caps);
    kiln_status st = core_acquire(inst, info, &chain, &dev->core, err);
    if (st != KILN_OK)
        goto fail;
    dev->owned = true;
    dev->handle = dev->core->handle;
    dev->queue = dev->core->queue;
    dev->vk = dev->core->vk;
    choose_memory(dev);
    if ((st = create_objects(dev, err)) != KILN_OK)
        goto fail;
    *out = dev;
    return KILN_OK;
fail:
    vkd_device_destroy(dev);
    return st;
}

/* Only what the application enabled and the device supports. */
static void external_caps(const vkd_device_info *d, const vkd_external_device *e, vkd_caps *c) {
    c->int64 = e->int64 && d->features.shaderInt64;
    c->int16 = e->int16 && d->features.shaderInt16;
    c->float64 = e->float64 && d->features.shaderFloat64;
    c->float16 = e->float16 && d->float16_int8.shaderFloat16;
    c->int8 = e->int8 && d->float16_int8.shaderInt8;
    c->storage_buffer_16bit = e->storage_buffer_16bit && d->storage16.storageBuffer16BitAccess;
    c->storage_buffer_8bit = e->storage_buffer_8bit && d->storage8.storageBuffer8BitAccess;
    c->maintenance4 = e->maintenance4 && d->maintenance4.maintenance4;
}

kiln_status vkd_device_wrap(const vkd_instance *inst, const vkd_external_device *ext,
                            const vkd_device_options *options, vkd_device **out, base_error *err) {
    *out = NULL;
    const vkd_device_info *info = NULL;
    for (uint32_t i = 0; i < inst->device_count; i++) {
        if (inst->devices[i].physical == ext->physical)
            info = &inst->devices[i];
    }
    if (!info || !ext->device)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "the application's physical device is not one of its instance's");
    if (ext->queue_family >= info->queue_family_count ||
        !(info->queue_families[ext->queue_family].queueFlags & VK_QUEUE_COMPUTE_BIT) ||
        ext->queue_index >= info->queue_families[ext->queue_family].queueCount)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "queue %u of family %u is not a compute queue of %s",
                              ext->queue_index, ext->queue_family, info->props.deviceName);
    vkd_device *dev = base_calloc(&inst->alloc, 1, sizeof *dev);
    if (!dev)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for device");
    dev->alloc = inst->alloc;
    dev->inst = inst;
    dev->info = info;
    dev->owned = false;
    dev->handle = ext->device;
    dev->options = options_with_defaults(options);
    dev->queue_family = ext->queue_family;
    /* the family's timestamps and limits come from the snapshot */
    vkd_device_info adjusted = *info;
    adjusted.compute_family = (int32_t)ext->queue_family;
    external_caps(info, ext, &dev->caps);
    if (dev->options.profile)
        profile_features(dev->options.profile, NULL, &dev->caps);
    fill_caps(&adjusted, &dev->options, &dev->caps);
    if (info->has_subgroup_size_control) { /* not enabled by Kiln: no size control */
        dev->caps.subgroup_size_control = false;
        dev->caps.min_subgroup_size = dev->caps.max_subgroup_size = dev->caps.subgroup_size;
    }
    vkd_load_device_table(inst, dev->handle, &dev->vk);
    dev->vk.vkGetDeviceQueue(dev->handle, dev->queue_family, ext->queue_index, &dev->queue);
    choose_memory(dev);
    kiln_status st = create_objects(dev, err);
    if (st != KILN_OK) {
        vkd_device_destroy(dev);
        return st;
    }
    *out = dev;
    return KILN_OK;
}

void vkd_device_destroy(vkd_device *dev) {
    if (!dev)
        return;
    if (dev->handle) {
        const struct VolkDeviceTable *vk = &dev->vk;
        /* Only this device's objects go: its work, and the sharers' on the same queue, ends
         * first (the application's device: only Kiln's own work). */
        if (dev->core)
            pthread_mutex_lock(&dev->core->queue_lock);
        if (dev->queue)
            vk->vkQueueWaitIdle(dev->queue);
        if (dev->core)
            pthread_mutex_unlock(&dev->core->queue_lock);
        vkd_staging_release(dev);
        vkd_memory_finish(dev);
        if (dev->transfer_fence)
            vk->vkDestroyFence(dev->handle, dev->transfer_fence, NULL);
        if (dev->command_pool)
            vk->vkDestroyCommandPool(dev->handle, dev->command_pool, NULL);
        if (dev->pipeline_cache)
            vk->vkDestroyPipelineCache(dev->handle, dev->pipeline_cache, NULL);
    }
    if (dev->core)
        core_release(dev->core);
    base_allocator alloc = dev->alloc;
    base_free(&alloc, dev, sizeof *dev);
}

const vkd_caps *vkd_device_caps(const vkd_device *dev) {
    return &dev->caps;
}

const vkd_device_info *vkd_device_info_of(const vkd_device *dev) {
    return dev->info;
}

VkDevice vkd_device_handle(const vkd_device *dev) {
    return dev->handle;
}

const struct VolkDeviceTable *vkd_device_table(const vkd_device *dev) {
    return &dev->vk;
}

VkPipelineCache vkd_device_pipeline_cache(const vkd_device *dev) {
    return dev->pipeline_cache;
}

vkd_stats vkd_device_stats(const vkd_device *dev) {
    return dev->stats;
}

/* Polls the fence for up to options.fence_spin_ns before blocking in vkWaitForFences: a small
 * kernel finishes within the poll, and the caller is not put to sleep and woken again (two
 * context switches, about a third of a small realize on lavapipe). The clock is C11's wall
 * clock (base_now_ns): a step backwards or forwards only ends the poll early. */
kiln_status vkd_wait_fence(vkd_device *dev, VkFence fence, const char *what, base_error *err) {
    VkResult r = dev->vk.vkGetFenceStatus(dev->handle, fence);
    int64_t start = r == VK_NOT_READY ? base_now_ns() : 0;
    int64_t spin = (int64_t)dev->options.fence_spin_ns;
    while (r == VK_NOT_READY) {
        int64_t elapsed = base_now_ns() - start;
        if (elapsed < 0 || elapsed >= spin)
            break;
        r = dev->vk.vkGetFenceStatus(dev->handle, fence);
    }
    if (r == VK_NOT_READY) {
        dev->stats.waits_blocked++;
        r = dev->vk.vkWaitForFences(dev->handle, 1, &fence, VK_TRUE, dev->options.fence_timeout_ns);
    } else {
        dev->stats.waits_polled++;
    }
    if (r == VK_TIMEOUT)
        return base_error_set(err, KILN_ERROR_TIMEOUT,
                              "%s did not finish within %llu ms (vkWaitForFences)", what,
                              (unsigned long long)(dev->options.fence_timeout_ns / 1000000));
    return vkd_check(r, "vkWaitForFences", err);
}

kiln_status vkd_transfer_begin(vkd_device *dev, VkCommandBuffer *cmd, base_error *err) {
    VkCommandBufferBeginInfo begin = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    kiln_status st =
        vkd_check(dev->vk.vkResetCommandBuffer(dev->transfer_cmd, 0), "vkResetCommandBuffer", err);
    if (st == KILN_OK)
        st = vkd_check(dev->vk.vkBeginCommandBuffer(dev->transfer_cmd, &begin),
                       "vkBeginCommandBuffer", err);
    *cmd = dev->transfer_cmd;
    return st;
}

kiln_status vkd_transfer_end(vkd_device *dev, base_error *err) {
    const struct VolkDeviceTable *vk = &dev->vk;
    /* Make the transfer visible to later shader work and host reads. */
    VkMemoryBarrier barrier = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask =
            VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
    };
    vk->vkCmdPipelineBarrier(dev->transfer_cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0,
                             1, &barrier, 0, NULL, 0, NULL);
    kiln_status st =
        vkd_check(vk->vkEndCommandBuffer(dev->transfer_cmd), "vkEndCommandBuffer", err);
    if (st != KILN_OK)
        return st;
    VkSubmitInfo submit = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &dev->transfer_cmd,
    };
    st = vkd_check(vk->vkResetFences(dev->handle, 1, &dev->transfer_fence), "vkResetFences", err);
    if (st == KILN_OK)
        st = vkd_check(vkd_queue_submit(dev, &submit, dev->transfer_fence), "vkQueueSubmit", err);
    if (st == KILN_OK) {
        dev->stats.submits++;
        st = vkd_wait_fence(dev, dev->transfer_fence, "a buffer transfer", err);
    }
    return st;
}
