/* Device memory for Kiln's storage buffers: small buffers share large blocks (one
 * vkAllocateMemory per block, not per buffer), large ones get an allocation of their own.
 *
 * Why: a loop or a realize makes many small storages, and a driver's vkAllocateMemory can be a
 * system call (1,000 small kernels cost 105 us each on an H200 against 6.5 us for the same
 * dispatches on buffers made beforehand), and drivers limit how many allocations may live at
 * once (maxMemoryAllocationCount: 4,096 on many). A block is a list of free ranges, sorted by
 * offset and merged with their neighbours when freed; a buffer takes the first range it fits in
 * at its alignment. A block is mapped once, when device memory is host-visible. Of the blocks
 * that become empty, one is kept for the next buffer and the others are freed. */
#include "vkd_internal.h"

#include <string.h>

enum { BLOCK_RANGES = 16 }; /* free ranges a new block has room for (it grows if needed) */

typedef struct range {
    uint64_t offset, size;
} range;

struct vkd_block {
    VkDeviceMemory memory;
    uint64_t size;
    uint64_t used; /* bytes of live buffers, alignment padding included */
    unsigned char *mapped;
    range *free;
    uint32_t free_len, free_cap;
    vkd_block *next;
};

/* A buffer of this many bytes or more gets an allocation of its own. */
static uint64_t dedicated_from(const vkd_device *dev) {
    return dev->block_size / 4;
}

static void block_destroy(vkd_device *dev, vkd_block *b) {
    dev->vk.vkFreeMemory(dev->handle, b->memory, NULL); /* unmaps */
    base_free(&dev->alloc, b->free, b->free_cap * sizeof *b->free);
    base_free(&dev->alloc, b, sizeof *b);
}

static kiln_status block_create(vkd_device *dev, uint32_t type, vkd_block **out, base_error *err) {
    vkd_block *b = base_calloc(&dev->alloc, 1, sizeof *b);
    range *free_ranges = base_calloc(&dev->alloc, BLOCK_RANGES, sizeof *free_ranges);
    if (!b || !free_ranges) {
        base_free(&dev->alloc, b, b ? sizeof *b : 0);
        base_free(&dev->alloc, free_ranges, free_ranges ? BLOCK_RANGES * sizeof *free_ranges : 0);
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a memory block");
    }
    VkMemoryAllocateInfo info = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                 .allocationSize = dev->block_size,
                                 .memoryTypeIndex = type};
    kiln_status st = vkd_check(dev->vk.vkAllocateMemory(dev->handle, &info, NULL, &b->memory),
                               "vkAllocateMemory", err);
    if (st == KILN_OK && dev->caps.host_visible_device_memory) {
        void *p = NULL;
        st = vkd_check(dev->vk.vkMapMemory(dev->handle, b->memory, 0, VK_WHOLE_SIZE, 0, &p),
                       "vkMapMemory", err);
        b->mapped = p;
    }
    if (st != KILN_OK) {
        if (b->memory)
            dev->vk.vkFreeMemory(dev->handle, b->memory, NULL);
        base_free(&dev->alloc, free_ranges, BLOCK_RANGES * sizeof *free_ranges);
        base_free(&dev->alloc, b, sizeof *b);
        return st;
    }
    dev->stats.memory_allocations++;
    b->size = dev->block_size;
    b->free = free_ranges;
    b->free_cap = BLOCK_RANGES;
    b->free_len = 1;
    b->free[0] = (range){0, b->size};
    *out = b;
    return KILN_OK;
}

/* Room for one more free range (at index at, the ones after it moved up). */
static bool ranges_insert(vkd_device *dev, vkd_block *b, uint32_t at, range r) {
    if (b->free_len == b->free_cap) {
        uint32_t cap = b->free_cap * 2;
        range *grown =
            base_realloc(&dev->alloc, b->free, b->free_cap * sizeof *b->free, cap * sizeof *grown);
        if (!grown)
            return false;
        b->free = grown;
        b->free_cap = cap;
    }
    memmove(&b->free[at + 1], &b->free[at], (b->free_len - at) * sizeof *b->free);
    b->free[at] = r;
    b->free_len++;
    return true;
}

/* Takes size bytes at alignment align from b's first free range that holds them. */
static bool block_take(vkd_device *dev, vkd_block *b, uint64_t size, uint64_t align,
                       uint64_t *offset) {
    for (uint32_t i = 0; i < b->free_len; i++) {
        range r = b->free[i];
        uint64_t at = (r.offset + align - 1) / align * align;
        if (at < r.offset || at - r.offset > r.size || r.size - (at - r.offset) < size)
            continue;
        range before = {r.offset, at - r.offset};
        range after = {at + size, r.offset + r.size - (at + size)};
        if (before.size && after.size) {
            if (!ranges_insert(dev, b, i + 1, after))
                return false; /* no host memory: try another block, or a new one */
            b->free[i] = before;
        } else if (before.size) {
            b->free[i] = before;
        } else if (after.size) {
            b->free[i] = after;
        } else {
            memmove(&b->free[i], &b->free[i + 1], (b->free_len - i - 1) * sizeof *b->free);
            b->free_len--;
        }
        b->used += size;
        *offset = at;
        return true;
    }
    return false;
}

kiln_status vkd_memory_bind(vkd_device *dev, VkBuffer buffer, vkd_block **block, uint64_t *offset,
                            VkDeviceMemory *memory, unsigned char **mapped, base_error *err) {
    const struct VolkDeviceTable *vk = &dev->vk;
    uint32_t type = dev->memory_type_device;
    VkMemoryRequirements req;
    vk->vkGetBufferMemoryRequirements(dev->handle, buffer, &req);
    *block = NULL;
    *offset = 0;
    *memory = VK_NULL_HANDLE;
    *mapped = NULL;
    if (!(req.memoryTypeBits & (1u << type)))
        return base_error_set(err, KILN_ERROR_UNSUPPORTED,
                              "memory type %u cannot hold storage buffers on this device", type);
    uint64_t align = req.alignment ? req.alignment : 1;
    if (req.size < dedicated_from(dev) && dev->block_size) {
        vkd_block *b = dev->blocks;
        uint64_t at = 0;
        while (b && !block_take(dev, b, req.size, align, &at))
            b = b->next;
        if (!b) {
            kiln_status st = block_create(dev, type, &b, err);
            if (st != KILN_OK)
                return st;
            if (!block_take(dev, b, req.size, align, &at)) { /* cannot happen: it is empty */
                block_destroy(dev, b);
                return base_error_set(err, KILN_ERROR_INTERNAL, "a new block took no buffer");
            }
            b->next = dev->blocks;
            dev->blocks = b;
        }
        kiln_status st = vkd_check(vk->vkBindBufferMemory(dev->handle, buffer, b->memory, at),
                                   "vkBindBufferMemory", err);
        if (st != KILN_OK) {
            vkd_memory_release(dev, b, at, req.size, VK_NULL_HANDLE);
            return st;
        }
        *block = b;
        *offset = at;
        *mapped = b->mapped ? b->mapped + at : NULL;
        return KILN_OK;
    }
    /* Its own allocation. */
    VkMemoryAllocateInfo info = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                 .allocationSize = req.size,
                                 .memoryTypeIndex = type};
    kiln_status st =
        vkd_check(vk->vkAllocateMemory(dev->handle, &info, NULL, memory), "vkAllocateMemory", err);
    if (st == KILN_OK) {
        dev->stats.memory_allocations++;
        st = vkd_check(vk->vkBindBufferMemory(dev->handle, buffer, *memory, 0),
                       "vkBindBufferMemory", err);
    }
    if (st == KILN_OK && dev->caps.host_visible_device_memory) {
        void *p = NULL;
        st = vkd_check(vk->vkMapMemory(dev->handle, *memory, 0, VK_WHOLE_SIZE, 0, &p),
                       "vkMapMemory", err);
        *mapped = p;
    }
    if (st != KILN_OK && *memory) {
        vk->vkFreeMemory(dev->handle, *memory, NULL);
        *memory = VK_NULL_HANDLE;
        *mapped = NULL;
    }
    return st;
}

void vkd_memory_release(vkd_device *dev, vkd_block *b, uint64_t offset, uint64_t size,
                        VkDeviceMemory memory) {
    if (!b) {
        if (memory)
            dev->vk.vkFreeMemory(dev->handle, memory, NULL);
        return;
    }
    /* size is the requirement's: what block_take took at offset. */
    uint32_t i = 0;
    while (i < b->free_len && b->free[i].offset < offset)
        i++;
    bool joins_before = i > 0 && b->free[i - 1].offset + b->free[i - 1].size == offset;
    bool joins_after = i < b->free_len && offset + size == b->free[i].offset;
    if (joins_before && joins_after) {
        b->free[i - 1].size += size + b->free[i].size;
        memmove(&b->free[i], &b->free[i + 1], (b->free_len - i - 1) * sizeof *b->free);
        b->free_len--;
    } else if (joins_before) {
        b->free[i - 1].size += size;
    } else if (joins_after) {
        b->free[i].offset = offset;
        b->free[i].size += size;
    } else if (!ranges_insert(dev, b, i, (range){offset, size})) {
        /* No host memory for the range: the bytes stay taken until the block is freed with
         * the device (a leak of device memory inside a block, never a wrong result). */
    }
    b->used -= size;
    if (b->used)
        return;
    /* Empty: keep it unless another empty block is kept already. */
    for (vkd_block *o = dev->blocks; o; o = o->next) {
        if (o != b && o->used == 0) {
            vkd_block **p = &dev->blocks;
            while (*p != b)
                p = &(*p)->next;
            *p = b->next;
            block_destroy(dev, b);
            return;
        }
    }
}

void vkd_memory_finish(vkd_device *dev) {
    while (dev->blocks) {
        vkd_block *b = dev->blocks;
        dev->blocks = b->next;
        block_destroy(dev, b);
    }
}
