/* Storage buffers: one allocation each, up to maxMemoryAllocationSize (one larger than
 * maxStorageBufferRange is bound in windows: vkd_binding, engine/run/runtime.c); mapped when the
 * memory is host-visible, otherwise every transfer goes through a temporary staging buffer and
 * the transfer queue path. */
#include "vkd_internal.h"

#include <string.h>

/* Staging transfers move at most this much per submission. */
static const uint64_t staging_chunk = 32ull << 20;

static kiln_status allocate(vkd_device *dev, uint64_t size, uint32_t type, VkBuffer *buffer,
                            VkDeviceMemory *memory, base_error *err) {
    const struct VolkDeviceTable *vk = &dev->vk;
    VkBufferCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    kiln_status st =
        vkd_check(vk->vkCreateBuffer(dev->handle, &info, NULL, buffer), "vkCreateBuffer", err);
    if (st != KILN_OK)
        return st;
    VkMemoryRequirements req;
    vk->vkGetBufferMemoryRequirements(dev->handle, *buffer, &req);
    if (!(req.memoryTypeBits & (1u << type)))
        return base_error_set(err, KILN_ERROR_UNSUPPORTED,
                              "memory type %u cannot hold storage buffers on this device", type);
    VkMemoryAllocateInfo alloc = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = type,
    };
    st =
        vkd_check(vk->vkAllocateMemory(dev->handle, &alloc, NULL, memory), "vkAllocateMemory", err);
    if (st == KILN_OK)
        st = vkd_check(vk->vkBindBufferMemory(dev->handle, *buffer, *memory, 0),
                       "vkBindBufferMemory", err);
    return st;
}

static void release(vkd_device *dev, VkBuffer buffer, VkDeviceMemory memory) {
    if (buffer)
        dev->vk.vkDestroyBuffer(dev->handle, buffer, NULL);
    if (memory)
        dev->vk.vkFreeMemory(dev->handle, memory, NULL);
}

kiln_status vkd_buffer_create(vkd_device *dev, uint64_t size, vkd_buffer **out, base_error *err) {
    *out = NULL;
    const vkd_caps *caps = &dev->caps;
    if (size > caps->max_memory_allocation_size)
        return base_error_set(err, KILN_ERROR_LIMIT_EXCEEDED,
                              "a storage buffer of %llu bytes exceeds the device's "
                              "maxMemoryAllocationSize (%llu)",
                              (unsigned long long)size,
                              (unsigned long long)caps->max_memory_allocation_size);
    vkd_buffer *buf = base_calloc(&dev->alloc, 1, sizeof *buf);
    if (!buf)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for buffer");
    buf->dev = dev;
    buf->size = size;
    buf->owned = true;
    /* Vulkan forbids empty buffers, fills work in whole words, and a texel view reads whole
     * 16-byte texels: round up to 16 bytes. */
    buf->alloc_size = size < 16 ? 16 : (size + 15) & ~(uint64_t)15;
    bool texels = caps->texel_fetch && buf->alloc_size / 16 <= caps->max_texel_buffer_elements;
    VkBufferCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = buf->alloc_size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                 (texels ? VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT : 0),
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    kiln_status st = vkd_check(dev->vk.vkCreateBuffer(dev->handle, &info, NULL, &buf->handle),
                               "vkCreateBuffer", err);
    if (st == KILN_OK) {
        VkMemoryRequirements req;
        dev->vk.vkGetBufferMemoryRequirements(dev->handle, buf->handle, &req);
        buf->memory_size = req.size;
        st = vkd_memory_bind(dev, buf->handle, &buf->block, &buf->block_offset, &buf->memory,
                             &buf->mapped, err);
    }
    if (st == KILN_OK && texels) {
        VkBufferViewCreateInfo view = {
            .sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
            .buffer = buf->handle,
            .format = VK_FORMAT_R32G32B32A32_UINT,
            .range = buf->alloc_size,
        };
        st = vkd_check(dev->vk.vkCreateBufferView(dev->handle, &view, NULL, &buf->texel_view),
                       "vkCreateBufferView", err);
    }
    if (st != KILN_OK) {
        vkd_buffer_destroy(buf);
        return st;
    }
    *out = buf;
    return KILN_OK;
}

kiln_status vkd_buffer_wrap(vkd_device *dev, VkBuffer handle, uint64_t size, vkd_buffer **out,
                            base_error *err) {
    *out = NULL;
    if (!handle)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "no VkBuffer to wrap");
    if (size > dev->caps.max_storage_buffer_range)
        return base_error_set(err, KILN_ERROR_LIMIT_EXCEEDED,
                              "a storage buffer of %llu bytes exceeds maxStorageBufferRange %llu",
                              (unsigned long long)size,
                              (unsigned long long)dev->caps.max_storage_buffer_range);
    vkd_buffer *buf = base_calloc(&dev->alloc, 1, sizeof *buf);
    if (!buf)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for buffer");
    buf->dev = dev;
    buf->size = size;
    buf->alloc_size = size; /* the application's: nothing beyond its size is Kiln's */
    buf->handle = handle;
    buf->owned = false;
    *out = buf;
    return KILN_OK;
}

void vkd_buffer_destroy(vkd_buffer *buf) {
    if (!buf)
        return;
    vkd_device *dev = buf->dev;
    if (buf->texel_view)
        dev->vk.vkDestroyBufferView(dev->handle, buf->texel_view, NULL);
    if (buf->owned) {
        if (buf->handle)
            dev->vk.vkDestroyBuffer(dev->handle, buf->handle, NULL);
        if (buf->block || buf->memory) /* unmapping is implicit in vkFreeMemory */
            vkd_memory_release(dev, buf->block, buf->block_offset, buf->memory_size, buf->memory);
    }
    base_free(&dev->alloc, buf, sizeof *buf);
}

uint64_t vkd_buffer_size(const vkd_buffer *buf) {
    return buf->size;
}

bool vkd_buffer_texels(const vkd_buffer *buf) {
    return buf->texel_view != VK_NULL_HANDLE;
}

VkBuffer vkd_buffer_handle(const vkd_buffer *buf) {
    return buf->handle;
}

bool vkd_buffer_is_mapped(const vkd_buffer *buf) {
    return buf->mapped != NULL;
}

bool vkd_buffer_is_owned(const vkd_buffer *buf) {
    return buf->owned;
}

static kiln_status check_range(const vkd_buffer *buf, uint64_t offset, uint64_t size,
                               const char *what, base_error *err) {
    if (offset > buf->size || size > buf->size - offset)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "%s of bytes [%llu, %llu + %llu) lies outside a buffer of %llu bytes",
                              what, (unsigned long long)offset, (unsigned long long)offset,
                              (unsigned long long)size, (unsigned long long)buf->size);
    return KILN_OK;
}

/* A host-visible staging buffer of size bytes, mapped. */
typedef struct staging {
    VkBuffer buffer;
    unsigned char *mapped;
} staging;

/* The device's staging buffer, at least size bytes (at most staging_chunk are asked for): kept
 * for the next transfer, grown to the next power of two (64 KiB at least) when too small. */
static kiln_status staging_create(vkd_device *dev, uint64_t size, staging *s, base_error *err) {
    memset(s, 0, sizeof *s);
    if (dev->memory_type_staging < 0)
        return base_error_set(err, KILN_ERROR_UNSUPPORTED,
                              "the device has no host-visible coherent memory for staging");
    if (dev->staging_size < size) {
        vkd_staging_release(dev);
        uint64_t want = 64u << 10;
        while (want < size)
            want *= 2;
        VkBuffer buffer = VK_NULL_HANDLE;
        VkDeviceMemory memory = VK_NULL_HANDLE;
        kiln_status st =
            allocate(dev, want, (uint32_t)dev->memory_type_staging, &buffer, &memory, err);
        void *p = NULL;
        if (st == KILN_OK)
            st = vkd_check(dev->vk.vkMapMemory(dev->handle, memory, 0, VK_WHOLE_SIZE, 0, &p),
                           "vkMapMemory", err);
        if (st != KILN_OK) {
            release(dev, buffer, memory);
            return st;
        }
        dev->staging_buffer = buffer;
        dev->staging_memory = memory;
        dev->staging_mapped = p;
        dev->staging_size = want;
    }
    s->buffer = dev->staging_buffer;
    s->mapped = dev->staging_mapped;
    return KILN_OK;
}

void vkd_staging_release(vkd_device *dev) {
    release(dev, dev->staging_buffer, dev->staging_memory);
    dev->staging_buffer = VK_NULL_HANDLE;
    dev->staging_memory = VK_NULL_HANDLE;
    dev->staging_mapped = NULL;
    dev->staging_size = 0;
}

/* Copies between a staging buffer and buf through the transfer command buffer. */
static kiln_status staged_copy(vkd_device *dev, VkBuffer src, uint64_t src_offset, VkBuffer dst,
                               uint64_t dst_offset, uint64_t size, base_error *err) {
    VkCommandBuffer cmd;
    kiln_status st = vkd_transfer_begin(dev, &cmd, err);
    if (st != KILN_OK)
        return st;
    VkBufferCopy region = {.srcOffset = src_offset, .dstOffset = dst_offset, .size = size};
    dev->vk.vkCmdCopyBuffer(cmd, src, dst, 1, &region);
    return vkd_transfer_end(dev, err);
}

kiln_status vkd_buffer_upload(vkd_buffer *buf, uint64_t offset, const void *src, uint64_t size,
                              base_error *err) {
    kiln_status st = check_range(buf, offset, size, "upload", err);
    if (st != KILN_OK || size == 0)
        return st;
    vkd_device *dev = buf->dev;
    if (buf->mapped) {
        memcpy(buf->mapped + offset, src, size);
        dev->stats.bytes_uploaded += size;
        return KILN_OK;
    }
    staging s;
    uint64_t chunk = size < staging_chunk ? size : staging_chunk;
    st = staging_create(dev, chunk, &s, err);
    for (uint64_t done = 0; st == KILN_OK && done < size; done += chunk) {
        uint64_t n = size - done < chunk ? size - done : chunk;
        memcpy(s.mapped, (const unsigned char *)src + done, n);
        st = staged_copy(dev, s.buffer, 0, buf->handle, offset + done, n, err);
    }
    if (st == KILN_OK)
        dev->stats.bytes_uploaded += size;
    return st;
}

kiln_status vkd_buffer_download(const vkd_buffer *buf, uint64_t offset, void *dst, uint64_t size,
                                base_error *err) {
    kiln_status st = check_range(buf, offset, size, "download", err);
    if (st != KILN_OK || size == 0)
        return st;
    vkd_device *dev = buf->dev;
    if (buf->mapped) {
        memcpy(dst, buf->mapped + offset, size);
        dev->stats.bytes_downloaded += size;
        return KILN_OK;
    }
    staging s;
    uint64_t chunk = size < staging_chunk ? size : staging_chunk;
    st = staging_create(dev, chunk, &s, err);
    for (uint64_t done = 0; st == KILN_OK && done < size; done += chunk) {
        uint64_t n = size - done < chunk ? size - done : chunk;
        st = staged_copy(dev, buf->handle, offset + done, s.buffer, 0, n, err);
        if (st == KILN_OK)
            memcpy((unsigned char *)dst + done, s.mapped, n);
    }
    if (st == KILN_OK)
        dev->stats.bytes_downloaded += size;
    return st;
}

kiln_status vkd_buffer_fill(vkd_buffer *buf, uint64_t offset, uint64_t size, uint32_t pattern,
                            base_error *err) {
    kiln_status st = check_range(buf, offset, size, "fill", err);
    if (st != KILN_OK)
        return st;
    if (offset % 4 != 0 || size % 4 != 0)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "fill offset %llu and size %llu must be multiples of 4",
                              (unsigned long long)offset, (unsigned long long)size);
    if (size == 0)
        return KILN_OK;
    VkCommandBuffer cmd;
    st = vkd_transfer_begin(buf->dev, &cmd, err);
    if (st != KILN_OK)
        return st;
    buf->dev->vk.vkCmdFillBuffer(cmd, buf->handle, offset, size, pattern);
    return vkd_transfer_end(buf->dev, err);
}

kiln_status vkd_buffer_copy(const vkd_buffer *src, uint64_t src_offset, vkd_buffer *dst,
                            uint64_t dst_offset, uint64_t size, base_error *err) {
    kiln_status st = check_range(src, src_offset, size, "copy source", err);
    if (st == KILN_OK)
        st = check_range(dst, dst_offset, size, "copy destination", err);
    if (st == KILN_OK && src->dev != dst->dev)
        st = base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                            "cannot copy between buffers of different devices");
    if (st == KILN_OK && src == dst && src_offset < dst_offset + size &&
        dst_offset < src_offset + size)
        st = base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "copy regions of one buffer overlap");
    if (st != KILN_OK || size == 0)
        return st;
    return staged_copy(dst->dev, src->handle, src_offset, dst->handle, dst_offset, size, err);
}
