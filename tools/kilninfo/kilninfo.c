/* kilninfo: what a Vulkan device can do, for a compute user.
 *
 *   kilninfo [--json] [--device N] [--selftest]
 *   kilninfo --cache [--json] | --cache-clear
 *
 * Text by default; --json prints one JSON object whose keys are documented in
 * tools/kilninfo/README.md. --selftest builds, validates and runs a few kernels on the chosen
 * device (--device N, else the default) instead (selftest.c). --cache lists the kernel cache
 * and --cache-clear empties it (cache.c); neither needs a device. Exit status: 0 on success, 1 when
 * Vulkan or the device is missing or a selftest kernel failed, 2 on bad usage. */
#include "cache.h"
#include "report.h"
#include "selftest.h"
#include "vkd.h"

#include <stdlib.h>
#include <string.h>

static const char *device_type_name(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        return "cpu";
    default:
        return "other";
    }
}

static const report_flag stage_flags[] = {
    {VK_SHADER_STAGE_VERTEX_BIT, "vertex"},
    {VK_SHADER_STAGE_TESSELLATION_CONTROL_BIT, "tessellation_control"},
    {VK_SHADER_STAGE_TESSELLATION_EVALUATION_BIT, "tessellation_evaluation"},
    {VK_SHADER_STAGE_GEOMETRY_BIT, "geometry"},
    {VK_SHADER_STAGE_FRAGMENT_BIT, "fragment"},
    {VK_SHADER_STAGE_COMPUTE_BIT, "compute"},
};

static const report_flag subgroup_flags[] = {
    {VK_SUBGROUP_FEATURE_BASIC_BIT, "basic"},
    {VK_SUBGROUP_FEATURE_VOTE_BIT, "vote"},
    {VK_SUBGROUP_FEATURE_ARITHMETIC_BIT, "arithmetic"},
    {VK_SUBGROUP_FEATURE_BALLOT_BIT, "ballot"},
    {VK_SUBGROUP_FEATURE_SHUFFLE_BIT, "shuffle"},
    {VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT, "shuffle_relative"},
    {VK_SUBGROUP_FEATURE_CLUSTERED_BIT, "clustered"},
    {VK_SUBGROUP_FEATURE_QUAD_BIT, "quad"},
};

static const report_flag heap_flags[] = {
    {VK_MEMORY_HEAP_DEVICE_LOCAL_BIT, "device_local"},
    {VK_MEMORY_HEAP_MULTI_INSTANCE_BIT, "multi_instance"},
};

static const report_flag memory_flags[] = {
    {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, "device_local"},
    {VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, "host_visible"},
    {VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, "host_coherent"},
    {VK_MEMORY_PROPERTY_HOST_CACHED_BIT, "host_cached"},
    {VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT, "lazily_allocated"},
    {VK_MEMORY_PROPERTY_PROTECTED_BIT, "protected"},
};

static const report_flag queue_flags[] = {
    {VK_QUEUE_GRAPHICS_BIT, "graphics"},   {VK_QUEUE_COMPUTE_BIT, "compute"},
    {VK_QUEUE_TRANSFER_BIT, "transfer"},   {VK_QUEUE_SPARSE_BINDING_BIT, "sparse_binding"},
    {VK_QUEUE_PROTECTED_BIT, "protected"},
};

static void report_u32x3(report *r, const char *key, const uint32_t v[3]) {
    report_array_begin(r, key);
    for (int i = 0; i < 3; i++)
        report_u64(r, NULL, v[i]);
    report_array_end(r);
}

static void report_identity(report *r, const vkd_device_info *d) {
    report_u64(r, "index", d->index);
    report_str(r, "name", d->props.deviceName);
    report_str(r, "type", device_type_name(d->props.deviceType));
    char id[16];
    snprintf(id, sizeof id, "0x%04x", d->props.vendorID);
    report_str(r, "vendor_id", id);
    snprintf(id, sizeof id, "0x%04x", d->props.deviceID);
    report_str(r, "device_id", id);
    report_u64(r, "driver_id", d->has_driver ? (uint64_t)d->driver.driverID : 0);
    report_str(r, "driver_name", d->has_driver ? d->driver.driverName : "");
    report_str(r, "driver_info", d->has_driver ? d->driver.driverInfo : "");
    report_u64(r, "driver_version", d->props.driverVersion);
    report_version(r, "api_version", d->props.apiVersion);
    report_version(r, "usable_api_version", d->api_version);
    report_uuid(r, "device_uuid", d->id.deviceUUID);
    report_uuid(r, "driver_uuid", d->id.driverUUID);
    report_uuid(r, "pipeline_cache_uuid", d->props.pipelineCacheUUID);
    /* vk/quirks.c: what this driver is known to get wrong, and what Kiln does about it */
    const vkd_driver_issue *issues[16];
    uint32_t n = vkd_driver_issues(d, issues, 16);
    report_array_begin(r, "known_driver_issues");
    for (uint32_t i = 0; i < n && i < 16; i++) {
        report_object_begin(r, NULL);
        report_str(r, "seen", issues[i]->seen);
        report_str(r, "what", issues[i]->what);
        report_str(r, "workaround", issues[i]->workaround);
        report_object_end(r);
    }
    report_array_end(r);
}

static void report_compute(report *r, const vkd_device_info *d) {
    const VkPhysicalDeviceLimits *l = &d->props.limits;
    report_object_begin(r, "compute");
    report_u32x3(r, "max_workgroup_size", l->maxComputeWorkGroupSize);
    report_u32x3(r, "max_workgroup_count", l->maxComputeWorkGroupCount);
    report_u64(r, "max_workgroup_invocations", l->maxComputeWorkGroupInvocations);
    report_u64(r, "max_shared_memory_size", l->maxComputeSharedMemorySize);
    report_u64(r, "max_push_constants_size", l->maxPushConstantsSize);
    report_u64(r, "max_storage_buffer_range", l->maxStorageBufferRange);
    report_u64(r, "max_memory_allocation_size", d->maintenance3.maxMemoryAllocationSize);
    report_u64(r, "max_storage_buffers_per_stage", l->maxPerStageDescriptorStorageBuffers);
    report_u64(r, "min_storage_buffer_offset_alignment", l->minStorageBufferOffsetAlignment);
    /* read-only operands as R32G32B32A32_UINT uniform texel buffers (on CPU devices) */
    report_bool(r, "texel_fetch_rgba32ui", d->texel_uint4);
    report_u64(r, "max_texel_buffer_elements", l->maxTexelBufferElements);
    report_f64(r, "timestamp_period_ns", l->timestampPeriod);
    bool ts = d->compute_family >= 0 && d->queue_families[d->compute_family].timestampValidBits > 0;
    report_bool(r, "compute_queue_timestamps", ts);
    report_object_end(r);
}

static void report_subgroup(report *r, const vkd_device_info *d) {
    report_object_begin(r, "subgroup");
    report_u64(r, "size", d->subgroup.subgroupSize);
    report_flags(r, "supported_stages", d->subgroup.supportedStages, stage_flags,
                 sizeof stage_flags / sizeof stage_flags[0]);
    report_flags(r, "supported_operations", d->subgroup.supportedOperations, subgroup_flags,
                 sizeof subgroup_flags / sizeof subgroup_flags[0]);
    bool control =
        d->has_subgroup_size_control && d->subgroup_size_control_features.subgroupSizeControl;
    report_bool(r, "size_control", control);
    report_u64(r, "min_size",
               control ? d->subgroup_size_control.minSubgroupSize : d->subgroup.subgroupSize);
    report_u64(r, "max_size",
               control ? d->subgroup_size_control.maxSubgroupSize : d->subgroup.subgroupSize);
    report_bool(r, "compute_full_subgroups",
                d->has_subgroup_size_control &&
                    d->subgroup_size_control_features.computeFullSubgroups);
    report_object_end(r);
}

static void report_features(report *r, const vkd_device_info *d) {
    report_object_begin(r, "features");
    report_bool(r, "int64", d->features.shaderInt64);
    report_bool(r, "int16", d->features.shaderInt16);
    report_bool(r, "int8", d->float16_int8.shaderInt8);
    report_bool(r, "float16", d->float16_int8.shaderFloat16);
    report_bool(r, "float64", d->features.shaderFloat64);
    report_bool(r, "storage_buffer_16bit", d->storage16.storageBuffer16BitAccess);
    report_bool(r, "storage_buffer_8bit", d->storage8.storageBuffer8BitAccess);
    report_bool(r, "buffer_device_address", d->buffer_device_address.bufferDeviceAddress);
    report_bool(r, "maintenance4", d->maintenance4.maintenance4);
    const VkPhysicalDeviceFloatControlsProperties *fc = &d->float_controls;
    report_object_begin(r, "float_controls");
    report_bool(r, "available", d->has_float_controls);
    report_bool(r, "denorm_preserve_float16", fc->shaderDenormPreserveFloat16);
    report_bool(r, "denorm_preserve_float32", fc->shaderDenormPreserveFloat32);
    report_bool(r, "denorm_flush_to_zero_float32", fc->shaderDenormFlushToZeroFloat32);
    report_bool(r, "rounding_mode_rte_float16", fc->shaderRoundingModeRTEFloat16);
    report_bool(r, "rounding_mode_rte_float32", fc->shaderRoundingModeRTEFloat32);
    report_bool(r, "signed_zero_inf_nan_preserve_float32",
                fc->shaderSignedZeroInfNanPreserveFloat32);
    report_object_end(r);
    report_object_end(r);
}

/* Atomics: 32-bit integer atomics on storage buffers are core Vulkan; 64-bit ones need
 * shaderBufferInt64Atomics; float ones VK_EXT_shader_atomic_float. */
static void report_atomics(report *r, const vkd_device_info *d) {
    const VkPhysicalDeviceShaderAtomicFloatFeaturesEXT *f = &d->atomic_float;
    report_object_begin(r, "atomics");
    report_bool(r, "int32_buffer", true);
    report_bool(r, "int64_buffer", d->atomic_int64.shaderBufferInt64Atomics);
    report_bool(r, "int64_shared", d->atomic_int64.shaderSharedInt64Atomics);
    report_bool(r, "float_extension", d->has_atomic_float);
    report_bool(r, "float32_buffer", f->shaderBufferFloat32Atomics);
    report_bool(r, "float32_buffer_add", f->shaderBufferFloat32AtomicAdd);
    report_bool(r, "float32_shared_add", f->shaderSharedFloat32AtomicAdd);
    report_bool(r, "float64_buffer", f->shaderBufferFloat64Atomics);
    report_bool(r, "float64_buffer_add", f->shaderBufferFloat64AtomicAdd);
    report_object_end(r);
}

/* Integer dot product (core 1.3, VK_KHR_shader_integer_dot_product): supported, and which
 * forms the hardware accelerates. */
static void report_dot_product(report *r, const vkd_device_info *d) {
    const VkPhysicalDeviceShaderIntegerDotProductProperties *p = &d->dot_product_props;
    report_object_begin(r, "integer_dot_product");
    report_bool(r, "supported", d->dot_product.shaderIntegerDotProduct);
    report_bool(r, "accelerated_8bit_unsigned", p->integerDotProduct8BitUnsignedAccelerated);
    report_bool(r, "accelerated_8bit_signed", p->integerDotProduct8BitSignedAccelerated);
    report_bool(r, "accelerated_4x8bit_packed_unsigned",
                p->integerDotProduct4x8BitPackedUnsignedAccelerated);
    report_bool(r, "accelerated_4x8bit_packed_signed",
                p->integerDotProduct4x8BitPackedSignedAccelerated);
    report_bool(r, "accelerated_16bit_signed", p->integerDotProduct16BitSignedAccelerated);
    report_bool(r, "accelerated_32bit_signed", p->integerDotProduct32BitSignedAccelerated);
    report_bool(r, "accumulating_saturating_8bit_signed_accelerated",
                p->integerDotProductAccumulatingSaturating8BitSignedAccelerated);
    report_object_end(r);
}

/* VK_NV_cooperative_matrix (Debian 12's headers predate VK_KHR_cooperative_matrix). */
static void report_cooperative_matrix(report *r, const vkd_device_info *d) {
    report_object_begin(r, "cooperative_matrix");
    report_bool(r, "extension", d->has_cooperative_matrix);
    report_bool(r, "supported", d->cooperative_matrix.cooperativeMatrix);
    report_bool(r, "robust_buffer_access",
                d->cooperative_matrix.cooperativeMatrixRobustBufferAccess);
    report_bool(r, "compute_stage",
                (d->cooperative_matrix_props.cooperativeMatrixSupportedStages &
                 VK_SHADER_STAGE_COMPUTE_BIT) != 0);
    report_object_end(r);
}

static void report_memory(report *r, const vkd_device_info *d) {
    const VkPhysicalDeviceMemoryProperties *m = &d->memory;
    report_object_begin(r, "memory");
    report_bool(r, "budget_extension", d->has_memory_budget);
    report_array_begin(r, "heaps");
    for (uint32_t i = 0; i < m->memoryHeapCount; i++) {
        report_object_begin(r, NULL);
        report_u64(r, "size", m->memoryHeaps[i].size);
        report_flags(r, "flags", m->memoryHeaps[i].flags, heap_flags,
                     sizeof heap_flags / sizeof heap_flags[0]);
        if (d->has_memory_budget) { /* VK_EXT_memory_budget */
            report_u64(r, "budget", d->heap_budget[i]);
            report_u64(r, "usage", d->heap_usage[i]);
        }
        report_object_end(r);
    }
    report_array_end(r);
    report_array_begin(r, "types");
    for (uint32_t i = 0; i < m->memoryTypeCount; i++) {
        report_object_begin(r, NULL);
        report_u64(r, "heap", m->memoryTypes[i].heapIndex);
        report_flags(r, "flags", m->memoryTypes[i].propertyFlags, memory_flags,
                     sizeof memory_flags / sizeof memory_flags[0]);
        report_object_end(r);
    }
    report_array_end(r);
    report_object_end(r);
}

static void report_queues(report *r, const vkd_device_info *d) {
    report_array_begin(r, "queue_families");
    for (uint32_t i = 0; i < d->queue_family_count; i++) {
        const VkQueueFamilyProperties *q = &d->queue_families[i];
        report_object_begin(r, NULL);
        report_u64(r, "index", i);
        report_u64(r, "count", q->queueCount);
        report_flags(r, "flags", q->queueFlags, queue_flags,
                     sizeof queue_flags / sizeof queue_flags[0]);
        report_u64(r, "timestamp_valid_bits", q->timestampValidBits);
        report_object_end(r);
    }
    report_array_end(r);
}

/* The device's extensions by name (text: one line, space-separated). */
static void report_extensions(report *r, const vkd_instance *inst, const vkd_device_info *d) {
    enum { MAX_EXTENSIONS = 512 };
    static VkExtensionProperties exts[MAX_EXTENSIONS];
    uint32_t n = vkd_instance_device_extensions(inst, d->index, exts, MAX_EXTENSIONS);
    report_array_begin(r, "extensions");
    for (uint32_t i = 0; i < n && i < MAX_EXTENSIONS; i++)
        report_str(r, NULL, exts[i].extensionName);
    report_array_end(r);
}

static void report_device(report *r, const vkd_instance *inst, const vkd_device_info *d,
                          bool is_default) {
    report_object_begin(r, NULL);
    report_identity(r, d);
    report_bool(r, "default", is_default);
    report_compute(r, d);
    report_subgroup(r, d);
    report_features(r, d);
    report_atomics(r, d);
    report_dot_product(r, d);
    report_cooperative_matrix(r, d);
    report_memory(r, d);
    report_queues(r, d);
    report_extensions(r, inst, d);
    report_object_end(r);
}

static void report_instance(report *r, const vkd_instance *inst) {
    report_object_begin(r, "instance");
    report_version(r, "loader_version", vkd_instance_loader_version(inst));
    report_version(r, "api_version", vkd_instance_api_version(inst));
    report_array_begin(r, "layers");
    for (uint32_t i = 0; i < vkd_instance_layer_count(inst); i++) {
        const VkLayerProperties *l = vkd_instance_layer(inst, i);
        report_object_begin(r, NULL);
        report_str(r, "name", l->layerName);
        report_version(r, "spec_version", l->specVersion);
        report_u64(r, "implementation_version", l->implementationVersion);
        report_str(r, "description", l->description);
        report_object_end(r);
    }
    report_array_end(r);
    report_object_end(r);
}

static int usage(const char *msg) {
    fprintf(stderr,
            "kilninfo: %s\n"
            "usage: kilninfo [--json] [--device N] [--selftest [--profile NAME]]\n"
            "       kilninfo --cache [--json] | --cache-clear\n"
            "  --json       print one JSON object (keys: tools/kilninfo/README.md)\n"
            "  --device N   report only device N (KILN_DEVICE does not filter the report)\n"
            "  --selftest   build, validate and run test kernels on the device (--device N or\n"
            "               the default); report pass/fail, latency, bandwidth, FMA throughput\n"
            "  --profile NAME  the selftest sees the device through a device profile\n"
            "               (mobile-low, mobile-mid; default $KILN_PROFILE; docs/gpus.md)\n"
            "  --cache      list the kernel cache: key, size, last use (no device needed)\n"
            "  --cache-clear  remove every file of the kernel cache\n",
            msg);
    return 2;
}

int main(int argc, char **argv) {
    bool json = false, selftest = false, cache = false, cache_clear = false;
    long only = -1;
    const char *profile_name = getenv("KILN_PROFILE");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--selftest") == 0) {
            selftest = true;
        } else if (strcmp(argv[i], "--cache") == 0) {
            cache = true;
        } else if (strcmp(argv[i], "--cache-clear") == 0) {
            cache_clear = true;
        } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            char *end;
            only = strtol(argv[++i], &end, 10);
            if (*end || only < 0)
                return usage("--device takes a device index (0, 1, ...)");
        } else if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc) {
            profile_name = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage("diagnostics of the Vulkan devices Kiln can use");
            return 0;
        } else {
            return usage("unknown argument");
        }
    }
    if (cache && cache_clear)
        return usage("--cache and --cache-clear cannot be combined");
    const vkd_profile *profile = NULL;
    if (profile_name && profile_name[0] && strcmp(profile_name, "none") != 0) {
        profile = vkd_profile_find(profile_name);
        if (!profile) {
            char known[256];
            vkd_profile_names(known, sizeof known);
            fprintf(stderr, "kilninfo: no device profile \"%s\" (the profiles: %s)\n", profile_name,
                    known);
            return 2;
        }
    }
    if (cache)
        return kilninfo_cache_list(stdout, json);
    if (cache_clear)
        return kilninfo_cache_clear(stdout);
    base_error err = {0};
    vkd_instance *inst = NULL;
    if (vkd_instance_create(NULL, &inst, &err) != KILN_OK) {
        fprintf(stderr, "kilninfo: %s\n", base_error_message(&err));
        return 1;
    }
    uint32_t count = vkd_instance_device_count(inst);
    uint32_t chosen = 0;
    if (vkd_instance_select(inst, NULL, &chosen, &err) != KILN_OK ||
        (only >= 0 && (uint64_t)only >= count)) {
        if (only >= 0 && (uint64_t)only >= count)
            fprintf(stderr, "kilninfo: device %ld does not exist (%u device%s)\n", only, count,
                    count == 1 ? "" : "s");
        else
            fprintf(stderr, "kilninfo: %s\n", base_error_message(&err));
        vkd_instance_destroy(inst);
        return 1;
    }
    if (selftest) {
        int status =
            kilninfo_selftest(inst, only >= 0 ? (uint32_t)only : chosen, profile, stdout, json);
        vkd_instance_destroy(inst);
        return status;
    }
    report r;
    report_init(&r, stdout, json);
    report_u64(&r, "kilninfo_format", 1);
    report_instance(&r, inst);
    report_u64(&r, "default_device", chosen);
    report_array_begin(&r, "devices");
    for (uint32_t i = 0; i < count; i++) {
        if (only < 0 || (uint32_t)only == i)
            report_device(&r, inst, vkd_instance_device(inst, i), i == chosen);
    }
    report_array_end(&r);
    report_finish(&r);
    if (!json)
        fputc('\n', stdout);
    vkd_instance_destroy(inst);
    return 0;
}
