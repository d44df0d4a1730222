/* vk/ internals: the object structs, shared by the files of the module only. */
#ifndef KILN_VK_INTERNAL_H
#define KILN_VK_INTERNAL_H

#include "vkd.h"

/* The instance-level functions of one instance. volk's globals serve the instance loaded
 * last; with several instances (two contexts, one with validation layers) each call must go
 * through its own instance's pointers. */
typedef struct vkd_instance_fns {
    PFN_vkDestroyInstance DestroyInstance;
    PFN_vkEnumeratePhysicalDevices EnumeratePhysicalDevices;
    PFN_vkGetPhysicalDeviceProperties GetPhysicalDeviceProperties;
    PFN_vkGetPhysicalDeviceFormatProperties GetPhysicalDeviceFormatProperties;
    PFN_vkGetPhysicalDeviceProperties2 GetPhysicalDeviceProperties2;
    PFN_vkGetPhysicalDeviceFeatures2 GetPhysicalDeviceFeatures2;
    PFN_vkGetPhysicalDeviceMemoryProperties GetPhysicalDeviceMemoryProperties;
    PFN_vkGetPhysicalDeviceMemoryProperties2 GetPhysicalDeviceMemoryProperties2;
    PFN_vkGetPhysicalDeviceQueueFamilyProperties GetPhysicalDeviceQueueFamilyProperties;
    PFN_vkEnumerateDeviceExtensionProperties EnumerateDeviceExtensionProperties;
    PFN_vkCreateDevice CreateDevice;
    PFN_vkGetDeviceProcAddr GetDeviceProcAddr;
    PFN_vkCreateDebugUtilsMessengerEXT CreateDebugUtilsMessengerEXT;
    PFN_vkDestroyDebugUtilsMessengerEXT DestroyDebugUtilsMessengerEXT;
} vkd_instance_fns;

struct vkd_instance {
    vkd_instance_fns fn;
    base_allocator alloc;
    VkInstance handle;
    bool owned; /* false: the application's (interop) */
    /* Kiln's own instances are shared by every vkd_instance_create with the same options
     * (instance.c): refs counts the holders; next links the process's list of them. */
    uint32_t refs;
    struct vkd_instance *next;
    bool sync_validation;
    char app_name[64];
    uint32_t api_version;    /* what Kiln asks for: min(loader, 1.3) */
    uint32_t loader_version; /* what the loader offers */
    bool validation;
    VkDebugUtilsMessengerEXT messenger;
    vkd_message_counts messages;
    uint32_t layer_count;
    VkLayerProperties *layers;
    uint32_t device_count;
    uint32_t device_capacity;
    vkd_device_info *devices;
};

/* A VkDevice Kiln created, shared by every vkd_device of one instance on one physical device
 * with the same features enabled (device.c): NVIDIA's driver fails when one VkDevice of the
 * process is created or destroyed while another works (docs/gpus.md), and one device per
 * physical device is what a process needs. The queue is shared too: submissions and waits for
 * idle take queue_lock (Vulkan requires a queue's calls to be externally synchronized). */
typedef struct vkd_core vkd_core;

struct vkd_device {
    base_allocator alloc;
    const vkd_instance *inst;
    const vkd_device_info *info;
    VkDevice handle;
    bool owned;     /* false: the application's (interop) */
    vkd_core *core; /* the shared device of an owned one; NULL: the application's */
    struct VolkDeviceTable vk;
    VkQueue queue;
    uint32_t queue_family;
    VkPipelineCache pipeline_cache;
    VkCommandPool command_pool; /* for one-shot transfers */
    VkCommandBuffer transfer_cmd;
    VkFence transfer_fence;
    vkd_caps caps;
    vkd_device_options options;
    uint32_t memory_type_device; /* type index for storage buffers */
    int32_t memory_type_staging; /* host-visible, coherent; -1 if none */
    vkd_stats stats;
    /* The staging buffer transfers through a device without host-visible device memory reuse
     * (vk/buffer.c): allocating one per transfer cost about 0.5 ms on an H200. */
    /* Blocks of device memory small buffers share (vk/memory.c); block_size 0: none. */
    struct vkd_block *blocks;
    uint64_t block_size;
    VkBuffer staging_buffer;
    VkDeviceMemory staging_memory;
    unsigned char *staging_mapped;
    uint64_t staging_size;
};

/* Device memory for a buffer of Kiln's (vk/memory.c): a range of a shared block (*block set,
 * *offset in it) or an allocation of its own (*memory), mapped where device memory is
 * host-visible (*mapped, else NULL). Release with what bind gave (size: the buffer's memory
 * requirement, vkd_buffer.memory_size). finish frees the blocks (every buffer destroyed). */
typedef struct vkd_block vkd_block;
kiln_status vkd_memory_bind(vkd_device *dev, VkBuffer buffer, vkd_block **block, uint64_t *offset,
                            VkDeviceMemory *memory, unsigned char **mapped, base_error *err);
void vkd_memory_release(vkd_device *dev, vkd_block *block, uint64_t offset, uint64_t size,
                        VkDeviceMemory memory);
void vkd_memory_finish(vkd_device *dev);

/* Frees the device's staging buffer (vk/buffer.c; device destruction calls it). */
void vkd_staging_release(vkd_device *dev);

struct vkd_buffer {
    vkd_device *dev;
    uint64_t size;       /* what the caller asked for */
    uint64_t alloc_size; /* rounded up to a multiple of 4, at least 4 */
    VkBuffer handle;
    bool owned;            /* false: the application's (interop) */
    VkDeviceMemory memory; /* its own allocation, or VK_NULL_HANDLE in a block */
    vkd_block *block;      /* the block it lies in (vk/memory.c), or NULL */
    uint64_t block_offset, memory_size;
    unsigned char *mapped; /* NULL: not host-visible (staging) */
    /* Its bytes as 16-byte texels (R32G32B32A32_UINT, the whole buffer), where the device
     * reads uniform texel buffers and the buffer holds at most maxTexelBufferElements texels;
     * VK_NULL_HANDLE otherwise (and for the application's buffers). */
    VkBufferView texel_view;
};

struct vkd_pipeline {
    vkd_device *dev;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipeline handle;
    uint32_t binding_count;
    uint32_t descriptor_counts[VKD_MAX_BINDINGS]; /* per binding (arrays above 1) */
    uint32_t descriptor_count;                    /* their sum: what a dispatch binds */
    uint32_t push_constant_size;
    uint32_t texel_bindings; /* vkd_pipeline_desc.texel_bindings */
};

/* Creates dev->pipeline_cache from dev->options.pipeline_cache_data (pipeline_cache.c). */
kiln_status vkd_pipeline_cache_create(vkd_device *dev, base_error *err);

/* Records into the device's transfer command buffer, submits and waits: used by buffer
 * transfers. begin returns the command buffer ready for recording. */
kiln_status vkd_transfer_begin(vkd_device *dev, VkCommandBuffer *cmd, base_error *err);
kiln_status vkd_transfer_end(vkd_device *dev, base_error *err);
/* Instance and device creation and destruction run one thread at a time (instance.c). */
void vkd_lifecycle_lock(void);
void vkd_lifecycle_unlock(void);
/* Loads the device-level function table of a device of inst (through inst's own
 * vkGetDeviceProcAddr). */
void vkd_load_device_table(const vkd_instance *inst, VkDevice device,
                           struct VolkDeviceTable *table);
/* vkQueueSubmit of one submission on the device's queue (under the shared queue's lock). */
VkResult vkd_queue_submit(vkd_device *dev, const VkSubmitInfo *submit, VkFence fence);
/* Waits for fence with the device's timeout; device loss and timeouts become statuses. */
kiln_status vkd_wait_fence(vkd_device *dev, VkFence fence, const char *what, base_error *err);

#endif
