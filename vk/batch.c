/* Batches: many dispatches in one command buffer, with the barriers, descriptor sets, push
 * constants and timestamps each one needs, submitted once and waited on with a fence. */
#include "vkd_internal.h"

#include <string.h>

enum { SETS_PER_POOL = 64, TIMED_PER_POOL = 64 };

struct vkd_batch {
    vkd_device *dev;
    VkCommandBuffer cmd;
    VkFence fence;
    bool recording;
    bool submitted; /* submitted and not yet reset */
    BASE_VEC(VkDescriptorPool) pools;
    uint32_t sets_in_last_pool;
    uint32_t descriptors_left;                        /* in the last pool */
    uint32_t first_pool_sets, first_pool_descriptors; /* what the first pool holds */
    BASE_VEC(VkQueryPool) query_pools;
    uint32_t dispatches;
    BASE_VEC(uint64_t) times;  /* ns per dispatch after submit; UINT64_MAX: not timed */
    BASE_VEC(uint64_t) starts; /* when each began, ns after the first began (with times) */
    int64_t submit_host_ns;    /* base_now_ns() when vkQueueSubmit returned; 0: no submit */
    vkd_timing timing;         /* timestamps per dispatch, per batch, or none */
    bool timed_span;           /* the batch-wide pair was written this recording */
    uint64_t total_ns;         /* device time of the last submit; UINT64_MAX: not timed */
};

kiln_status vkd_batch_create(vkd_device *dev, vkd_batch **out, base_error *err) {
    *out = NULL;
    vkd_batch *b = base_calloc(&dev->alloc, 1, sizeof *b);
    if (!b)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for batch");
    b->dev = dev;
    b->timing = VKD_TIME_EACH;
    b->total_ns = UINT64_MAX;
    VkCommandBufferAllocateInfo cmd_info = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = dev->command_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    kiln_status st = vkd_check(dev->vk.vkAllocateCommandBuffers(dev->handle, &cmd_info, &b->cmd),
                               "vkAllocateCommandBuffers", err);
    if (st == KILN_OK)
        st = vkd_check(dev->vk.vkCreateFence(dev->handle, &fence_info, NULL, &b->fence),
                       "vkCreateFence", err);
    if (st != KILN_OK) {
        vkd_batch_destroy(b);
        return st;
    }
    *out = b;
    return KILN_OK;
}

void vkd_batch_destroy(vkd_batch *b) {
    if (!b)
        return;
    vkd_device *dev = b->dev;
    const struct VolkDeviceTable *vk = &dev->vk;
    if (b->submitted)
        vk->vkWaitForFences(dev->handle, 1, &b->fence, VK_TRUE, dev->options.fence_timeout_ns);
    for (size_t i = 0; i < b->pools.len; i++)
        vk->vkDestroyDescriptorPool(dev->handle, b->pools.data[i], NULL);
    for (size_t i = 0; i < b->query_pools.len; i++)
        vk->vkDestroyQueryPool(dev->handle, b->query_pools.data[i], NULL);
    if (b->fence)
        vk->vkDestroyFence(dev->handle, b->fence, NULL);
    if (b->cmd)
        vk->vkFreeCommandBuffers(dev->handle, dev->command_pool, 1, &b->cmd);
    BASE_VEC_FREE(&dev->alloc, &b->pools);
    BASE_VEC_FREE(&dev->alloc, &b->query_pools);
    BASE_VEC_FREE(&dev->alloc, &b->times);
    BASE_VEC_FREE(&dev->alloc, &b->starts);
    base_free(&dev->alloc, b, sizeof *b);
}

uint32_t vkd_batch_dispatch_count(const vkd_batch *b) {
    return b->dispatches;
}

static kiln_status timestamp_slot(vkd_batch *b, uint32_t i, VkQueryPool *pool, uint32_t *query,
                                  base_error *err);

static kiln_status begin_recording(vkd_batch *b, base_error *err) {
    vkd_device *dev = b->dev;
    VkCommandBufferBeginInfo begin = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    kiln_status st =
        vkd_check(dev->vk.vkBeginCommandBuffer(b->cmd, &begin), "vkBeginCommandBuffer", err);
    if (st != KILN_OK)
        return st;
    /* Query pools kept from an earlier use are reset before their queries are written again. */
    for (size_t i = 0; i < b->query_pools.len; i++)
        dev->vk.vkCmdResetQueryPool(b->cmd, b->query_pools.data[i], 0, 2 * TIMED_PER_POOL);
    b->recording = true;
    b->timed_span = false;
    if (b->timing == VKD_TIME_BATCH && dev->caps.timestamps) { /* one pair for the batch */
        VkQueryPool qp;
        uint32_t q;
        st = timestamp_slot(b, 0, &qp, &q, err);
        if (st != KILN_OK)
            return st;
        dev->vk.vkCmdWriteTimestamp(b->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qp, q);
        b->timed_span = true;
    }
    return KILN_OK;
}

/* A descriptor set for pipe's layout, from the batch's pools (a new pool when full). */
static kiln_status allocate_set(vkd_batch *b, const vkd_pipeline *pipe, VkDescriptorSet *set,
                                base_error *err) {
    vkd_device *dev = b->dev;
    /* A pool holds SETS_PER_POOL sets of up to VKD_MAX_BINDINGS descriptors, or one set of a
     * pipeline with more (arrays of windows): such a set gets a pool sized for it. */
    uint32_t need = pipe->descriptor_count;
    if (b->pools.len == 0 || b->sets_in_last_pool == SETS_PER_POOL || b->descriptors_left < need) {
        uint32_t sets = need > VKD_MAX_BINDINGS ? 1 : SETS_PER_POOL;
        uint32_t count = need > VKD_MAX_BINDINGS ? need : SETS_PER_POOL * VKD_MAX_BINDINGS;
        /* as many texel buffers as storage buffers: a set may hold either kind */
        VkDescriptorPoolSize sizes[2] = {
            {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = count},
            {.type = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, .descriptorCount = count},
        };
        VkDescriptorPoolCreateInfo info = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
            .maxSets = sets,
            .poolSizeCount = dev->caps.texel_fetch ? 2u : 1u,
            .pPoolSizes = sizes,
        };
        VkDescriptorPool pool;
        kiln_status st = vkd_check(dev->vk.vkCreateDescriptorPool(dev->handle, &info, NULL, &pool),
                                   "vkCreateDescriptorPool", err);
        if (st != KILN_OK)
            return st;
        if (BASE_VEC_PUSH(&dev->alloc, &b->pools, pool) != KILN_OK) {
            dev->vk.vkDestroyDescriptorPool(dev->handle, pool, NULL);
            return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for pools");
        }
        b->sets_in_last_pool = SETS_PER_POOL - sets;
        b->descriptors_left = count;
        if (b->pools.len == 1) {
            b->first_pool_sets = sets;
            b->first_pool_descriptors = count;
        }
    }
    VkDescriptorSetAllocateInfo info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = b->pools.data[b->pools.len - 1],
        .descriptorSetCount = 1,
        .pSetLayouts = &pipe->set_layout,
    };
    b->sets_in_last_pool++;
    b->descriptors_left -= need;
    return vkd_check(dev->vk.vkAllocateDescriptorSets(dev->handle, &info, set),
                     "vkAllocateDescriptorSets", err);
}

/* Writes one descriptor per entry of bindings: binding by binding, an array's elements in
 * order (pipe's descriptor counts). */
static kiln_status write_set(vkd_batch *b, const vkd_pipeline *pipe, VkDescriptorSet set,
                             const vkd_binding *bindings, base_error *err) {
    vkd_device *dev = b->dev;
    uint32_t count = pipe->descriptor_count;
    VkDescriptorBufferInfo small[VKD_MAX_BINDINGS], *infos = small;
    if (count > VKD_MAX_BINDINGS) {
        infos = base_malloc(&dev->alloc, count * sizeof *infos);
        if (!infos)
            return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for descriptors");
    }
    VkWriteDescriptorSet writes[VKD_MAX_BINDINGS];
    uint64_t align = dev->caps.min_storage_buffer_offset_alignment;
    uint64_t limit = dev->caps.max_storage_buffer_range;
    kiln_status st = KILN_OK;
    /* texel_descriptor[i]: descriptor i is a texel binding's (one descriptor each: vk/pipeline.c),
     * which the texel limit bounds (its buffer has a view), not maxStorageBufferRange */
    bool texel_descriptor[VKD_MAX_BINDINGS] = {false};
    for (uint32_t j = 0, first = 0; j < pipe->binding_count; first += pipe->descriptor_counts[j++])
        if (pipe->texel_bindings >> j & 1 && first < VKD_MAX_BINDINGS)
            texel_descriptor[first] = true;
    for (uint32_t i = 0; i < count && st == KILN_OK; i++) {
        const vkd_binding *bd = &bindings[i];
        if (!bd->buffer || bd->buffer->dev != dev || bd->offset > bd->buffer->alloc_size ||
            (align && bd->offset % align != 0) || bd->range > bd->buffer->alloc_size - bd->offset) {
            st = base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                                "descriptor %u: missing buffer, foreign buffer, or a range "
                                "outside the buffer or misaligned (offset alignment %llu)",
                                i, (unsigned long long)align);
            break;
        }
        uint64_t range = bd->range ? bd->range : bd->buffer->alloc_size - bd->offset;
        if (range > limit && !(i < VKD_MAX_BINDINGS && texel_descriptor[i]))
            st = base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                                "descriptor %u: a range of %llu bytes exceeds "
                                "maxStorageBufferRange (%llu): bind it in windows",
                                i, (unsigned long long)range, (unsigned long long)limit);
        infos[i] = (VkDescriptorBufferInfo){
            .buffer = bd->buffer->handle, .offset = bd->offset, .range = range};
    }
    VkBufferView views[VKD_MAX_BINDINGS];
    for (uint32_t i = 0, first = 0; st == KILN_OK && i < pipe->binding_count; i++) {
        bool texel = pipe->texel_bindings >> i & 1;
        writes[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = set,
            .dstBinding = i,
            .descriptorCount = pipe->descriptor_counts[i],
            .descriptorType =
                texel ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = texel ? NULL : &infos[first],
        };
        if (texel) { /* the whole buffer as texels (a texel binding has one descriptor) */
            const vkd_buffer *buf = bindings[first].buffer;
            if (!buf->texel_view || bindings[first].offset || bindings[first].range)
                st = base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                                    "descriptor %u: a texel binding takes a whole buffer made "
                                    "with texels (vkd_buffer_texels)",
                                    first);
            views[i] = buf->texel_view;
            writes[i].pTexelBufferView = &views[i];
        }
        first += pipe->descriptor_counts[i];
    }
    if (st == KILN_OK)
        dev->vk.vkUpdateDescriptorSets(dev->handle, pipe->binding_count, writes, 0, NULL);
    if (infos != small)
        base_free(&dev->alloc, infos, count * sizeof *infos);
    return st;
}

/* The query pool and first query of dispatch index i, creating the pool when needed. */
static kiln_status timestamp_slot(vkd_batch *b, uint32_t i, VkQueryPool *pool, uint32_t *query,
                                  base_error *err) {
    vkd_device *dev = b->dev;
    size_t p = i / TIMED_PER_POOL;
    if (p == b->query_pools.len) {
        VkQueryPoolCreateInfo info = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            .queryType = VK_QUERY_TYPE_TIMESTAMP,
            .queryCount = 2 * TIMED_PER_POOL,
        };
        VkQueryPool qp;
        kiln_status st = vkd_check(dev->vk.vkCreateQueryPool(dev->handle, &info, NULL, &qp),
                                   "vkCreateQueryPool", err);
        if (st != KILN_OK)
            return st;
        if (BASE_VEC_PUSH(&dev->alloc, &b->query_pools, qp) != KILN_OK) {
            dev->vk.vkDestroyQueryPool(dev->handle, qp, NULL);
            return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for queries");
        }
        dev->vk.vkCmdResetQueryPool(b->cmd, qp, 0, 2 * TIMED_PER_POOL);
    }
    *pool = b->query_pools.data[p];
    *query = 2 * (i % TIMED_PER_POOL);
    return KILN_OK;
}

/* Splits each grid dimension into pieces of at most the device's limit. */
static void record_grid(vkd_batch *b, const uint32_t groups[3]) {
    const uint32_t *max = b->dev->caps.max_workgroup_count;
    /* 64-bit counters: base + max may pass UINT32_MAX on the last step. */
    for (uint64_t z = 0; z < groups[2]; z += max[2]) {
        for (uint64_t y = 0; y < groups[1]; y += max[1]) {
            for (uint64_t x = 0; x < groups[0]; x += max[0]) {
                uint64_t nx = groups[0] - x < max[0] ? groups[0] - x : max[0];
                uint64_t ny = groups[1] - y < max[1] ? groups[1] - y : max[1];
                uint64_t nz = groups[2] - z < max[2] ? groups[2] - z : max[2];
                b->dev->vk.vkCmdDispatchBase(b->cmd, (uint32_t)x, (uint32_t)y, (uint32_t)z,
                                             (uint32_t)nx, (uint32_t)ny, (uint32_t)nz);
            }
        }
    }
}

kiln_status vkd_batch_dispatch(vkd_batch *b, const vkd_pipeline *pipe, const vkd_binding *bindings,
                               uint32_t binding_count, const void *push, uint32_t push_size,
                               const uint32_t groups[3], base_error *err) {
    vkd_device *dev = b->dev;
    const struct VolkDeviceTable *vk = &dev->vk;
    if (b->submitted)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "the batch was submitted: reset it before recording again");
    if (pipe->dev != dev || binding_count != pipe->descriptor_count ||
        push_size != pipe->push_constant_size || (push_size && !push))
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "dispatch does not match its pipeline (%u descriptors and %u bytes "
                              "of push constants given; %u and %u expected)",
                              binding_count, push_size, pipe->descriptor_count,
                              pipe->push_constant_size);
    if (groups[0] == 0 || groups[1] == 0 || groups[2] == 0)
        return KILN_OK;
    kiln_status st = b->recording ? KILN_OK : begin_recording(b, err);
    VkDescriptorSet set = VK_NULL_HANDLE;
    if (st == KILN_OK && binding_count > 0) {
        st = allocate_set(b, pipe, &set, err);
        if (st == KILN_OK)
            st = write_set(b, pipe, set, bindings, err);
    }
    VkQueryPool qp = VK_NULL_HANDLE;
    uint32_t q = 0;
    if (st == KILN_OK && dev->caps.timestamps && b->timing == VKD_TIME_EACH)
        st = timestamp_slot(b, b->dispatches, &qp, &q, err);
    if (st != KILN_OK)
        return st;

    if (b->dispatches > 0) { /* read-after-write and write-after-write between dispatches */
        VkMemoryBarrier barrier = {
            .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
            .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
        };
        vk->vkCmdPipelineBarrier(b->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, NULL, 0,
                                 NULL);
    }
    if (qp)
        vk->vkCmdWriteTimestamp(b->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qp, q);
    vk->vkCmdBindPipeline(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe->handle);
    if (set)
        vk->vkCmdBindDescriptorSets(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe->layout, 0, 1,
                                    &set, 0, NULL);
    if (push_size)
        vk->vkCmdPushConstants(b->cmd, pipe->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size,
                               push);
    record_grid(b, groups);
    if (qp)
        vk->vkCmdWriteTimestamp(b->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, q + 1);
    b->dispatches++;
    dev->stats.dispatches++;
    return KILN_OK;
}

/* The device time between the two timestamps of a pair, and the first timestamp (ticks). */
static kiln_status pair_time(vkd_batch *b, uint32_t slot, uint64_t *ns, uint64_t *begin,
                             base_error *err) {
    vkd_device *dev = b->dev;
    uint32_t bits = dev->info->queue_families[dev->queue_family].timestampValidBits;
    uint64_t mask = bits >= 64 ? UINT64_MAX : (1ull << bits) - 1;
    uint64_t t[2] = {0, 0};
    VkResult r = dev->vk.vkGetQueryPoolResults(
        dev->handle, b->query_pools.data[slot / TIMED_PER_POOL], 2 * (slot % TIMED_PER_POOL), 2,
        sizeof t, t, sizeof t[0], VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    kiln_status st = vkd_check(r, "vkGetQueryPoolResults", err);
    uint64_t ticks = ((t[1] & mask) - (t[0] & mask)) & mask;
    *ns = (uint64_t)((double)ticks * (double)dev->caps.timestamp_period_ns);
    *begin = t[0] & mask;
    return st;
}

/* Reads the timestamps of the finished submission: per dispatch, or the batch's span. */
static kiln_status read_times(vkd_batch *b, base_error *err) {
    vkd_device *dev = b->dev;
    b->times.len = b->starts.len = 0;
    b->total_ns = UINT64_MAX;
    if (BASE_VEC_RESERVE(&dev->alloc, &b->times, b->dispatches) != KILN_OK ||
        BASE_VEC_RESERVE(&dev->alloc, &b->starts, b->dispatches) != KILN_OK)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for timings");
    bool each = dev->caps.timestamps && b->timing == VKD_TIME_EACH;
    uint32_t bits = dev->info->queue_families[dev->queue_family].timestampValidBits;
    uint64_t mask = bits >= 64 ? UINT64_MAX : (1ull << bits) - 1;
    uint64_t total = 0, first = 0, begin = 0;
    for (uint32_t i = 0; i < b->dispatches; i++) {
        uint64_t ns = UINT64_MAX, start = UINT64_MAX;
        if (each) {
            kiln_status st = pair_time(b, i, &ns, &begin, err);
            if (st != KILN_OK)
                return st;
            total += ns;
            first = i == 0 ? begin : first;
            start = (uint64_t)((double)((begin - first) & mask) *
                               (double)dev->caps.timestamp_period_ns);
        }
        b->times.data[b->times.len++] = ns;
        b->starts.data[b->starts.len++] = start;
    }
    if (b->timed_span) {
        kiln_status st = pair_time(b, 0, &total, &begin, err);
        if (st != KILN_OK)
            return st;
    }
    if (each || b->timed_span) {
        b->total_ns = total;
        dev->stats.device_time_ns += total;
    }
    return KILN_OK;
}

kiln_status vkd_batch_submit(vkd_batch *b, base_error *err) {
    vkd_device *dev = b->dev;
    const struct VolkDeviceTable *vk = &dev->vk;
    if (b->submitted)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "the batch was already submitted: reset it first");
    if (!b->recording)
        return KILN_OK; /* nothing recorded */
    /* Shader writes become visible to the host and to later transfers. */
    VkMemoryBarrier barrier = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
        .dstAccessMask =
            VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    vk->vkCmdPipelineBarrier(b->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                             &barrier, 0, NULL, 0, NULL);
    if (b->timed_span)
        vk->vkCmdWriteTimestamp(b->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
                                b->query_pools.data[0], 1);
    b->recording = false;
    kiln_status st = vkd_check(vk->vkEndCommandBuffer(b->cmd), "vkEndCommandBuffer", err);
    if (st == KILN_OK)
        st = vkd_check(vk->vkResetFences(dev->handle, 1, &b->fence), "vkResetFences", err);
    VkSubmitInfo submit = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &b->cmd,
    };
    if (st == KILN_OK)
        st = vkd_check(vkd_queue_submit(dev, &submit, b->fence), "vkQueueSubmit", err);
    if (st != KILN_OK)
        return st;
    b->submitted = true;
    b->submit_host_ns = base_now_ns();
    dev->stats.submits++;
    st = vkd_wait_fence(dev, b->fence, "a batch of dispatches", err);
    if (st == KILN_OK)
        st = read_times(b, err);
    return st;
}

bool vkd_batch_dispatch_time(const vkd_batch *b, uint32_t i, uint64_t *ns) {
    if (i >= b->times.len || b->times.data[i] == UINT64_MAX)
        return false;
    *ns = b->times.data[i];
    return true;
}

bool vkd_batch_dispatch_start(const vkd_batch *b, uint32_t i, uint64_t *ns) {
    if (i >= b->starts.len || b->starts.data[i] == UINT64_MAX)
        return false;
    *ns = b->starts.data[i];
    return true;
}

int64_t vkd_batch_submit_host_time(const vkd_batch *b) {
    return b->submit_host_ns;
}

kiln_status vkd_batch_reset(vkd_batch *b, base_error *err) {
    vkd_device *dev = b->dev;
    const struct VolkDeviceTable *vk = &dev->vk;
    if (b->submitted) {
        kiln_status st = vkd_wait_fence(dev, b->fence, "a batch of dispatches", err);
        if (st != KILN_OK)
            return st;
    }
    kiln_status st = vkd_check(vk->vkResetCommandBuffer(b->cmd, 0), "vkResetCommandBuffer", err);
    for (size_t i = 0; st == KILN_OK && i < b->pools.len; i++)
        st = vkd_check(vk->vkResetDescriptorPool(dev->handle, b->pools.data[i], 0),
                       "vkResetDescriptorPool", err);
    if (st != KILN_OK)
        return st;
    /* Keep only the first pool (the others are freed so a large batch does not pin them). */
    for (size_t i = 1; i < b->pools.len; i++)
        vk->vkDestroyDescriptorPool(dev->handle, b->pools.data[i], NULL);
    b->pools.len = b->pools.len ? 1 : 0;
    b->sets_in_last_pool = SETS_PER_POOL - b->first_pool_sets;
    b->descriptors_left = b->first_pool_descriptors;
    b->recording = false;
    b->submitted = false;
    b->dispatches = 0;
    /* The last submission's times go with it: a batch that records nothing (a realize of what
     * is already realized) reports no time, not the previous batch's again. */
    b->times.len = b->starts.len = 0;
    b->total_ns = UINT64_MAX;
    b->submit_host_ns = 0;
    return KILN_OK;
}

void vkd_batch_timing(vkd_batch *b, vkd_timing timing) {
    if (!b->recording)
        b->timing = timing;
}

bool vkd_batch_total_time(const vkd_batch *b, uint64_t *ns) {
    if (b->total_ns == UINT64_MAX)
        return false;
    *ns = b->total_ns;
    return true;
}
