/* vk/: Kiln's device layer over volk (prefix vkd_).
 *
 *   instance  vkd_instance: the loader, optional validation with a counting messenger, and a
 *             snapshot (vkd_device_info) of every physical device
 *   device    vkd_device: one logical device with a compute queue, the features code generation
 *             may use (vkd_caps: only what was enabled), a VkPipelineCache, a command pool
 *   buffer    vkd_buffer: storage buffers; mapped directly on UMA devices, staged otherwise
 *   pipeline  vkd_pipeline: every compute pipeline comes from one table (vkd_pipeline_desc);
 *             the device's VkPipelineCache is created from saved data, merged and read back
 *   batch     vkd_batch: many dispatches in one command buffer, barriers between them,
 *             push constants per dispatch, grid splitting, timestamps, a fence
 *
 * Every call that can fail returns a kiln_status and records a message naming the Vulkan call
 * into the caller's base_error (may be NULL). Device-level calls go through the device's
 * struct VolkDeviceTable, never through global function pointers. Objects of one device are not
 * thread-safe: use a device from one thread at a time.
 *
 * Typical use:
 *     vkd_instance *inst; vkd_device *dev; uint32_t index;
 *     vkd_instance_create(&(vkd_instance_options){.validation = true}, &inst, &err);
 *     vkd_instance_select(inst, getenv("KILN_DEVICE"), &index, &err);
 *     vkd_device_create(inst, index, NULL, &dev, &err);
 *     ... vkd_buffer_create, vkd_pipeline_create, vkd_batch_dispatch, vkd_batch_submit ...
 */
#ifndef KILN_VK_VKD_H
#define KILN_VK_VKD_H

#include "base.h"

#include <volk.h>

typedef struct vkd_instance vkd_instance;
typedef struct vkd_device vkd_device;
typedef struct vkd_buffer vkd_buffer;
typedef struct vkd_pipeline vkd_pipeline;
typedef struct vkd_batch vkd_batch;

/* ---- errors ---------------------------------------------------------------------------- */

/* The name of a VkResult ("VK_ERROR_DEVICE_LOST"); never NULL. */
const char *vkd_result_name(VkResult result);
/* Maps result to a status and, when it is an error, records "<call> failed: <name>" in err.
 * VK_SUCCESS and the other non-negative results give KILN_OK. */
kiln_status vkd_check(VkResult result, const char *call, base_error *err);

/* ---- instance -------------------------------------------------------------------------- */

typedef struct vkd_instance_options {
    /* Enable the Khronos validation layer with a messenger that counts what it reports; the
     * layer missing is then an error. KILN_VALIDATION=1 in the environment also enables it. */
    bool validation;
    /* Also enable the layer's synchronization validation (tests use it). */
    bool sync_validation;
    const char *app_name;        /* NULL: "kiln" */
    const base_allocator *alloc; /* NULL: the default allocator */
} vkd_instance_options;

typedef struct vkd_message_counts {
    uint32_t errors;
    uint32_t warnings;
    uint32_t infos;
} vkd_message_counts;

enum { VKD_MAX_QUEUE_FAMILIES = 16 };

/* What a physical device is and can do, read once when the instance is created. Optional
 * structures are zero when the device cannot report them (has_* says which were read). */
typedef struct vkd_device_info {
    VkPhysicalDevice physical;
    uint32_t index;
    uint32_t api_version; /* min(device, instance): the version Kiln may use */
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceIDProperties id;
    VkPhysicalDeviceMaintenance3Properties maintenance3;
    VkPhysicalDeviceSubgroupProperties subgroup;
    VkPhysicalDeviceDriverProperties driver;
    VkPhysicalDeviceSubgroupSizeControlProperties subgroup_size_control;
    VkPhysicalDeviceFloatControlsProperties float_controls;
    bool has_driver, has_subgroup_size_control, has_float_controls;
    /* VK_FORMAT_R32G32B32A32_UINT can be a uniform texel buffer's format (vkd_caps.texel_fetch) */
    bool texel_uint4;

    VkPhysicalDeviceFeatures features;
    VkPhysicalDevice16BitStorageFeatures storage16;
    VkPhysicalDevice8BitStorageFeatures storage8;
    VkPhysicalDeviceShaderFloat16Int8Features float16_int8;
    VkPhysicalDeviceBufferDeviceAddressFeatures buffer_device_address;
    VkPhysicalDeviceMaintenance4Features maintenance4;
    VkPhysicalDeviceSubgroupSizeControlFeatures subgroup_size_control_features;
    /* Where the feature structure comes from: core (api_version) or an extension to enable. */
    bool ext_8bit_storage, ext_float16_int8, ext_maintenance4, ext_subgroup_size_control,
        ext_portability_subset;

    /* Reported by kilninfo; Kiln's code generation does not use them yet. Each is zero where
     * the device lacks it (has_*: the structure was queried). */
    VkPhysicalDeviceShaderAtomicInt64Features atomic_int64;      /* core 1.2 or KHR */
    VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomic_float;   /* EXT_shader_atomic_float */
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot_product; /* core 1.3 or KHR */
    VkPhysicalDeviceShaderIntegerDotProductProperties dot_product_props;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cooperative_matrix; /* NV_cooperative_matrix */
    VkPhysicalDeviceCooperativeMatrixPropertiesNV cooperative_matrix_props;
    bool has_atomic_int64, has_atomic_float, has_dot_product, has_cooperative_matrix;
    /* VK_EXT_memory_budget: each heap's budget and this process's usage, when queried. */
    bool has_memory_budget;
    VkDeviceSize heap_budget[VK_MAX_MEMORY_HEAPS], heap_usage[VK_MAX_MEMORY_HEAPS];

    VkPhysicalDeviceMemoryProperties memory;
    uint32_t queue_family_count;
    VkQueueFamilyProperties queue_families[VKD_MAX_QUEUE_FAMILIES];
    int32_t compute_family; /* a family with compute (compute-only preferred); -1: none */
} vkd_device_info;

/* Instances are shared: a create with the options (validation, synchronization validation,
 * app_name, allocator) of an instance alive in the process returns that one, counted; destroy
 * drops the count and destroys the VkInstance with the last holder. Its message counts are
 * then every holder's. */
kiln_status vkd_instance_create(const vkd_instance_options *options, vkd_instance **out,
                                base_error *err);
/* An instance the application created (interop): used, never destroyed, by Kiln. api_version
 * is the version the application created it with. */
kiln_status vkd_instance_wrap(VkInstance handle, uint32_t api_version, const base_allocator *alloc,
                              vkd_instance **out, base_error *err);
void vkd_instance_destroy(vkd_instance *inst); /* NULL is a no-op */

VkInstance vkd_instance_handle(const vkd_instance *inst);
uint32_t vkd_instance_api_version(const vkd_instance *inst);    /* min(loader, 1.3) */
uint32_t vkd_instance_loader_version(const vkd_instance *inst); /* the loader's version */
bool vkd_instance_validation(const vkd_instance *inst);
/* What the validation messenger has reported so far (zero without validation). */
vkd_message_counts vkd_instance_messages(const vkd_instance *inst);
/* The instance layers the loader offers. */
uint32_t vkd_instance_layer_count(const vkd_instance *inst);
const VkLayerProperties *vkd_instance_layer(const vkd_instance *inst, uint32_t index);

uint32_t vkd_instance_device_count(const vkd_instance *inst);
const vkd_device_info *vkd_instance_device(const vkd_instance *inst, uint32_t index);
/* The device's extensions: at most max written to out (NULL: none); returns how many the device
 * has (0 when it cannot say). */
uint32_t vkd_instance_device_extensions(const vkd_instance *inst, uint32_t index,
                                        VkExtensionProperties *out, uint32_t max);

/* Chooses a device. spec NULL or "": the default preference discrete > integrated > virtual >
 * CPU > other, first index among equals, among devices with a compute queue. Otherwise spec is
 * a decimal index or a case-insensitive substring of the device name; one that names no device
 * is KILN_ERROR_NOT_FOUND, with a message listing the devices (index and name). Pure: tests
 * call it with made-up infos to drive the same choice as real hardware. */
kiln_status vkd_select_device(const vkd_device_info *infos, uint32_t count, const char *spec,
                              uint32_t *index, base_error *err);
kiln_status vkd_instance_select(const vkd_instance *inst, const char *spec, uint32_t *index,
                                base_error *err);

/* ---- known driver issues (quirks.c) ----------------------------------------------------- */

/* An issue a real driver showed, for the versions in [min_version, max_version] of the
 * driver's packed driverVersion (the last version seen with it, until a newer one is seen
 * without it). */
typedef struct vkd_driver_issue {
    uint32_t vendor_id, driver_id; /* VkPhysicalDeviceProperties.vendorID, VkDriverId */
    uint32_t min_version, max_version;
    const char *seen, *what, *workaround;
} vkd_driver_issue;

/* The entries matching device d: at most max of them in out; returns how many match. */
uint32_t vkd_driver_issues(const vkd_device_info *d, const vkd_driver_issue **out, uint32_t max);

/* ---- device ---------------------------------------------------------------------------- */

/* What code generation may use on a device: only features that were enabled. */
typedef struct vkd_caps {
    uint32_t api_version;   /* VK_API_VERSION_1_1 .. 1_3 */
    uint32_t spirv_version; /* highest SPIR-V version the API version guarantees (0x10300..) */
    bool int64, int16, float64;
    bool float16, int8; /* arithmetic */
    bool storage_buffer_16bit, storage_buffer_8bit;
    bool maintenance4; /* LocalSizeId */
    /* shaderStorageBufferArrayDynamicIndexing: arrays of storage buffers indexed by a run-time
     * value (a storage larger than maxStorageBufferRange is bound as such an array). */
    bool storage_buffer_array_dynamic_indexing;
    /* SignedZeroInfNanPreserve may be declared for 32-bit floats (Vulkan 1.2 and the device's
     * float controls property): NaN, inf and -0 then survive the driver's optimisations. */
    bool preserve_specials32;
    bool subgroup_size_control, compute_full_subgroups;
    uint32_t subgroup_size, min_subgroup_size, max_subgroup_size;
    VkSubgroupFeatureFlags subgroup_operations; /* in compute shaders; 0 if not supported */
    bool timestamps;
    float timestamp_period_ns;
    uint32_t max_push_constants_size;
    uint64_t max_storage_buffer_range;
    uint64_t max_memory_allocation_size;
    uint32_t max_workgroup_count[3];
    uint32_t max_workgroup_size[3];
    uint32_t max_workgroup_invocations;
    uint32_t max_shared_memory_size;
    uint32_t max_storage_buffers_per_stage;
    uint64_t min_storage_buffer_offset_alignment;
    bool host_visible_device_memory; /* buffers are mapped directly (UMA) */
    /* Buffers may be read as uniform texel buffers of 16-byte texels (R32G32B32A32_UINT, up to
     * max_texel_buffer_elements of them): vkd_pipeline_desc.texel_bindings. */
    bool texel_fetch;
    uint32_t max_texel_buffer_elements;
} vkd_caps;

/* ---- device profiles (profiles.c) -------------------------------------------------------- */

/* A stricter device than the one at hand: Kiln sees the device through it exactly as if the
 * driver reported it. A feature is enabled only where both the device and the profile have it
 * (the validation layer then catches a kernel that uses more); each limit in force is
 * min(profile, device); a subgroup size the device does not give means no subgroup operations.
 * Profiles never raise anything above the device's. */
typedef struct vkd_profile {
    const char *name;    /* "mobile-low" */
    const char *summary; /* one line, for kilninfo and messages */
    bool int64, int16, int8, float16, float64;
    bool storage_buffer_8bit, storage_buffer_16bit;
    bool timestamps;        /* on the compute queue */
    uint32_t subgroup_size; /* 0: unknown, so no subgroup operations */
    uint32_t max_workgroup_invocations;
    uint32_t max_workgroup_size[3];
    uint32_t max_workgroup_count[3];
    uint32_t max_push_constants_size;
    uint64_t max_storage_buffer_range;
    uint32_t max_storage_buffers_per_stage;
    uint32_t max_shared_memory_size;
} vkd_profile;

/* The profiles Kiln knows (a table in profiles.c; docs/gpus.md lists them). */
uint32_t vkd_profile_count(void);
const vkd_profile *vkd_profile_at(uint32_t index); /* NULL past the end */
/* The profile of that name (case-insensitive), or NULL. */
const vkd_profile *vkd_profile_find(const char *name);
/* The profiles' names, "mobile-low, mobile-mid", into buf (truncated to size), for messages. */
void vkd_profile_names(char *buf, size_t size);

/* How long a fence wait polls before it blocks (see vkd_wait_fence). */
enum { VKD_FENCE_SPIN_NS = 50000 };

typedef struct vkd_device_options {
    /* Test-only overrides that drive, on lavapipe, the paths real hardware takes. */
    bool force_staging;           /* treat device memory as not host-visible */
    uint32_t max_push_constants;  /* nonzero: report a smaller push-constant limit */
    uint64_t max_storage_range;   /* nonzero: report a smaller storage-buffer range */
    uint32_t max_workgroup_count; /* nonzero: split grids as if this were the limit */
    bool no_int64;                /* neither enable nor report shaderInt64 (vkd_device_create) */
    bool no_small_storage;        /* nor 8/16-bit storage, shaderInt8 and shaderFloat16 */
    /* The device as a profile sees it (NULL: as it is). For a wrapped device
     * (vkd_device_wrap), whose features the application enabled, Kiln uses only what both the
     * application and the profile allow. */
    const vkd_profile *profile;
    uint64_t fence_timeout_ns; /* 0: 60 seconds */
    uint64_t fence_spin_ns;    /* polling before a wait blocks; 0: VKD_FENCE_SPIN_NS */
    /* Initial data of the device's VkPipelineCache (vkGetPipelineCacheData bytes saved
     * earlier), or NULL. The driver validates its header; shaders_cache/ has checked it too.
     * Only read during vkd_device_create. */
    const void *pipeline_cache_data;
    size_t pipeline_cache_size;
} vkd_device_options;

/* Each vkd_device has its own objects (pipeline cache, command pool, memory blocks, staging,
 * caps and statistics), but devices of one instance on one physical device with the same
 * features enabled share the VkDevice and its queue (vkd_device_handle is the same): the
 * first creates it, the last destroys it. */
kiln_status vkd_device_create(const vkd_instance *inst, uint32_t index,
                              const vkd_device_options *options, vkd_device **out, base_error *err);
/* NULL is a no-op; waits for the device's queue to idle (the work of every device sharing it). */
void vkd_device_destroy(vkd_device *dev);

/* A device the application created (interop). Kiln uses queue (family, index) from one thread
 * at a time with the application, and only the features the application says it enabled. */
typedef struct vkd_external_device {
    VkPhysicalDevice physical;
    VkDevice device;
    uint32_t queue_family;
    uint32_t queue_index;
    bool int64, int16, float64, float16, int8;
    bool storage_buffer_16bit, storage_buffer_8bit, maintenance4;
} vkd_external_device;
kiln_status vkd_device_wrap(const vkd_instance *inst, const vkd_external_device *ext,
                            const vkd_device_options *options, vkd_device **out, base_error *err);

const vkd_caps *vkd_device_caps(const vkd_device *dev);
const vkd_device_info *vkd_device_info_of(const vkd_device *dev);
VkDevice vkd_device_handle(const vkd_device *dev);
const struct VolkDeviceTable *vkd_device_table(const vkd_device *dev);
VkPipelineCache vkd_device_pipeline_cache(const vkd_device *dev);

/* The device's VkPipelineCache (pipeline_cache.c). merge creates a temporary cache from data
 * (vkd_device_options.pipeline_cache_data's format) and merges it into the device's.
 * data: with data NULL, *size becomes the byte count of the cache's data; otherwise at most
 * *size bytes are written and *size becomes the count written (KILN_ERROR_LIMIT_EXCEEDED when
 * *size was too small). */
kiln_status vkd_pipeline_cache_merge(vkd_device *dev, const void *data, size_t size,
                                     base_error *err);
kiln_status vkd_pipeline_cache_data(const vkd_device *dev, void *data, size_t *size,
                                    base_error *err);

/* Statistics of what the device layer did. */
typedef struct vkd_stats {
    uint64_t pipelines_created;
    uint64_t dispatches; /* logical dispatches (a split grid counts once) */
    uint64_t submits;
    uint64_t bytes_uploaded;
    uint64_t bytes_downloaded;
    uint64_t device_time_ns;     /* sum of timed dispatches */
    uint64_t waits_polled;       /* fence waits that ended while polling */
    uint64_t waits_blocked;      /* fence waits that blocked in vkWaitForFences */
    uint64_t memory_allocations; /* vkAllocateMemory calls for storage buffers (blocks and
                                    buffers of their own; vk/memory.c) */
} vkd_stats;
vkd_stats vkd_device_stats(const vkd_device *dev);

/* ---- buffers --------------------------------------------------------------------------- */

/* A storage buffer of size bytes (any size, 0 included), one VkBuffer on one allocation.
 * Larger than maxMemoryAllocationSize: KILN_ERROR_LIMIT_EXCEEDED. One larger than
 * maxStorageBufferRange is made, but a descriptor can only show a range of it (a window:
 * vkd_binding); transfers reach all of it. */
kiln_status vkd_buffer_create(vkd_device *dev, uint64_t size, vkd_buffer **out, base_error *err);
void vkd_buffer_destroy(vkd_buffer *buf); /* NULL is a no-op */
/* A buffer the application owns (interop): never destroyed by Kiln; transfers go through
 * staging, so it needs TRANSFER_SRC/DST usage besides STORAGE_BUFFER. Larger than
 * maxStorageBufferRange: KILN_ERROR_LIMIT_EXCEEDED. */
kiln_status vkd_buffer_wrap(vkd_device *dev, VkBuffer handle, uint64_t size, vkd_buffer **out,
                            base_error *err);
uint64_t vkd_buffer_size(const vkd_buffer *buf);
/* Whether buf may be bound to a texel binding (vkd_pipeline_desc.texel_bindings): a buffer
 * vkd_buffer_create made on a device with caps.texel_fetch, within its texel limit. */
bool vkd_buffer_texels(const vkd_buffer *buf);
VkBuffer vkd_buffer_handle(const vkd_buffer *buf);
bool vkd_buffer_is_mapped(const vkd_buffer *buf); /* false: transfers go through staging */
bool vkd_buffer_is_owned(const vkd_buffer *buf);  /* made by vkd_buffer_create (not wrapped) */

/* Host <-> buffer transfers of any byte range inside the buffer; they wait for completion. */
kiln_status vkd_buffer_upload(vkd_buffer *buf, uint64_t offset, const void *src, uint64_t size,
                              base_error *err);
kiln_status vkd_buffer_download(const vkd_buffer *buf, uint64_t offset, void *dst, uint64_t size,
                                base_error *err);
/* Fills [offset, offset + size) with a 32-bit pattern; offset and size multiples of 4. */
kiln_status vkd_buffer_fill(vkd_buffer *buf, uint64_t offset, uint64_t size, uint32_t pattern,
                            base_error *err);
kiln_status vkd_buffer_copy(const vkd_buffer *src, uint64_t src_offset, vkd_buffer *dst,
                            uint64_t dst_offset, uint64_t size, base_error *err);

/* ---- pipelines ------------------------------------------------------------------------- */

enum { VKD_MAX_BINDINGS = 16 };

/* The one table every compute pipeline is made from. Storage buffers (or uniform texel buffers:
 * texel_bindings) are set 0, bindings 0 .. binding_count - 1; the push-constant range starts at
 * offset 0. */
typedef struct vkd_pipeline_desc {
    const uint32_t *code;
    size_t word_count;
    const char *entry_point; /* NULL: "main" */
    uint32_t binding_count;  /* <= VKD_MAX_BINDINGS */
    /* Descriptors of each binding (an array of storage buffers when above 1), NULL: one each.
     * Their sum stays within maxPerStageDescriptorStorageBuffers; an array indexed by a
     * run-time value needs caps.storage_buffer_array_dynamic_indexing. */
    const uint32_t *descriptor_counts;
    uint32_t push_constant_size; /* bytes, a multiple of 4, within the device's limit */
    /* Bit i: binding i is one uniform texel buffer (the whole buffer as R32G32B32A32_UINT
     * texels, caps.texel_fetch; its vkd_binding's buffer must have vkd_buffer_texels), not a
     * storage buffer. */
    uint32_t texel_bindings;
    const VkSpecializationMapEntry *spec_entries;
    uint32_t spec_entry_count;
    const void *spec_data;
    size_t spec_data_size;
    uint32_t required_subgroup_size; /* 0: the driver's choice */
    const char *debug_name;          /* for messages; NULL: "kernel" */
} vkd_pipeline_desc;

kiln_status vkd_pipeline_create(vkd_device *dev, const vkd_pipeline_desc *desc, vkd_pipeline **out,
                                base_error *err);
void vkd_pipeline_destroy(vkd_pipeline *pipe); /* NULL is a no-op */

/* ---- batches of dispatches ------------------------------------------------------------- */

/* One descriptor. A dispatch takes one per descriptor of its pipeline: binding by binding, an
 * array binding's elements in order. The range (given or to the end) must be within
 * maxStorageBufferRange (KILN_ERROR_INVALID_ARGUMENT otherwise). */
typedef struct vkd_binding {
    const vkd_buffer *buffer;
    uint64_t offset; /* bytes; a multiple of minStorageBufferOffsetAlignment */
    uint64_t range;  /* bytes; 0: to the end of the buffer */
} vkd_binding;

kiln_status vkd_batch_create(vkd_device *dev, vkd_batch **out, base_error *err);
void vkd_batch_destroy(vkd_batch *batch); /* NULL is a no-op; waits for a submitted batch */

/* Records one dispatch of groups[0] x groups[1] x groups[2] workgroups; binding_count counts
 * descriptors (vkd_binding). Every dispatch after
 * the first waits for the shader writes of the ones before it. A grid larger than
 * maxComputeWorkGroupCount is split into several dispatches with base offsets (WorkgroupId and
 * GlobalInvocationId are those of the whole grid). A zero-sized grid records nothing. */
kiln_status vkd_batch_dispatch(vkd_batch *batch, const vkd_pipeline *pipe,
                               const vkd_binding *bindings, uint32_t binding_count,
                               const void *push, uint32_t push_size, const uint32_t groups[3],
                               base_error *err);
uint32_t vkd_batch_dispatch_count(const vkd_batch *batch);
/* Submits what was recorded and waits for it; the batch is reusable after vkd_batch_reset. */
kiln_status vkd_batch_submit(vkd_batch *batch, base_error *err);
/* Device time of dispatch i of the last submit, in nanoseconds; false when not timed. */
bool vkd_batch_dispatch_time(const vkd_batch *batch, uint32_t i, uint64_t *ns);
/* When dispatch i of the last submit began on the device, in nanoseconds after dispatch 0
 * began (timed per dispatch only); false when not timed. */
bool vkd_batch_dispatch_start(const vkd_batch *batch, uint32_t i, uint64_t *ns);
/* base_now_ns() when the last submit's vkQueueSubmit returned (its wait began); 0: none. */
int64_t vkd_batch_submit_host_time(const vkd_batch *batch);
/* Timing of the batch: a timestamp pair around every dispatch (VKD_TIME_EACH, the default),
 * one pair around the whole batch, or none. Timestamps cost device time on some drivers
 * (lavapipe waits for idle at each). Takes effect from the next recording. */
typedef enum vkd_timing { VKD_TIME_EACH, VKD_TIME_BATCH, VKD_TIME_NONE } vkd_timing;
void vkd_batch_timing(vkd_batch *batch, vkd_timing timing);
/* Device time of the last submit (the sum over dispatches, or the batch's span); false when
 * not timed. */
bool vkd_batch_total_time(const vkd_batch *batch, uint64_t *ns);
kiln_status vkd_batch_reset(vkd_batch *batch, base_error *err);

#endif
