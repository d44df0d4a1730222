/* The device's VkPipelineCache blob: one entry of kind PCACHE_KIND_PIPELINE per identity. On
 * top of the checks every entry gets, the blob must begin with a VkPipelineCacheHeaderVersionOne
 * for the identity's device (Vulkan 1.0 spec, "Pipeline Cache": headerSize, headerVersion,
 * vendorID, deviceID, pipelineCacheUUID, all least significant byte first), so bytes written
 * for another device never reach a driver. */
#include "pcache_internal.h"

#include <string.h>

static const char blob_key[] = "vk.pipeline_cache";

enum { VK_HEADER_ONE_SIZE = 16 + VK_UUID_SIZE };

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static bool blob_matches(const pcache_identity *id, const unsigned char *blob, size_t size) {
    if (size < VK_HEADER_ONE_SIZE)
        return false;
    uint32_t header_size = le32(blob);
    return header_size >= VK_HEADER_ONE_SIZE && header_size <= size &&
           le32(blob + 4) == VK_PIPELINE_CACHE_HEADER_VERSION_ONE &&
           le32(blob + 8) == id->vendor_id && le32(blob + 12) == id->device_id &&
           memcmp(blob + 16, id->pipeline_cache_uuid, VK_UUID_SIZE) == 0;
}

/* The blob of the file on disk: KILN_OK with a copy, or a miss. Does not count statistics
 * twice: the caller decides whether this read was a use. */
static kiln_status read_blob(pcache *pc, void **data, size_t *size, base_error *err) {
    *data = NULL;
    *size = 0;
    unsigned char *file;
    size_t file_size;
    kiln_status st = pcache_lookup(pc, PCACHE_KIND_PIPELINE, blob_key, sizeof blob_key - 1, &file,
                                   &file_size, err);
    if (st != KILN_OK)
        return st;
    const unsigned char *blob = file + PCACHE_HEADER_SIZE + sizeof blob_key - 1;
    size_t n = file_size - PCACHE_HEADER_SIZE - PCACHE_CHECKSUM_SIZE - (sizeof blob_key - 1);
    if (!blob_matches(&pc->identity, blob, n)) {
        pcache_free(pc, file, file_size);
        pc->stats.foreign++;
        pc->stats.misses++;
        return KILN_ERROR_NOT_FOUND;
    }
    void *copy = base_malloc(&pc->alloc, n);
    if (copy)
        memcpy(copy, blob, n);
    pcache_free(pc, file, file_size);
    if (!copy)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a pipeline blob");
    *data = copy;
    *size = n;
    return KILN_OK;
}

kiln_status pcache_pipeline_load(pcache *pc, void **data, size_t *size, base_error *err) {
    if (!data || !size)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "pcache_pipeline_load: NULL argument");
    kiln_status st = read_blob(pc, data, size, err);
    if (st == KILN_OK) {
        pc->stats.hits++;
        pc->pipeline_known = true;
        pc->pipeline_hash = base_hash_bytes(*data, *size, 0);
    }
    return st;
}

kiln_status pcache_pipeline_save(pcache *pc, const void *data, size_t size, base_error *err) {
    if (!pc->has_identity)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "this cache handle was opened without a device identity");
    if (!data || !blob_matches(&pc->identity, data, size))
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "not a VkPipelineCache blob for this device (%zu bytes)", size);
    uint64_t hash = base_hash_bytes(data, size, 0);
    if (pc->pipeline_known && pc->pipeline_hash == hash)
        return KILN_OK; /* the file already holds these bytes */
    kiln_status st =
        pcache_store(pc, PCACHE_KIND_PIPELINE, blob_key, sizeof blob_key - 1, data, size, err);
    if (st == KILN_OK && pc->mode == PCACHE_MODE_READ_WRITE) {
        pc->pipeline_known = true;
        pc->pipeline_hash = hash;
    }
    return st;
}

/* Merges the blob on disk into the device's cache when it is not the one this handle last
 * loaded or saved (another process saved since). */
static kiln_status merge_from_disk(pcache *pc, vkd_device *dev, base_error *err) {
    void *disk;
    size_t disk_size;
    pcache_stats before = pc->stats;
    kiln_status st = read_blob(pc, &disk, &disk_size, err);
    pc->stats.misses = before.misses; /* a look at the file, not a lookup */
    if (st == KILN_ERROR_NOT_FOUND) {
        pc->pipeline_known = false; /* nothing usable on disk: the next save writes */
        return KILN_OK;
    }
    if (st != KILN_OK)
        return st;
    uint64_t hash = base_hash_bytes(disk, disk_size, 0);
    base_error merge_err = {0};
    if (!pc->pipeline_known || pc->pipeline_hash != hash)
        st = vkd_pipeline_cache_merge(dev, disk, disk_size, &merge_err);
    pcache_free(pc, disk, disk_size);
    if (st == KILN_ERROR_OUT_OF_HOST_MEMORY)
        return base_error_set(err, st, "%s", base_error_message(&merge_err));
    if (st != KILN_OK) { /* the driver refused the other blob: ours replaces it */
        base_log(BASE_LOG_DEBUG, "shaders_cache", "not merged: %s", base_error_message(&merge_err));
        pc->pipeline_known = false;
        return KILN_OK;
    }
    pc->pipeline_known = true; /* the file holds these bytes now */
    pc->pipeline_hash = hash;
    return KILN_OK;
}

kiln_status pcache_pipeline_save_device(pcache *pc, vkd_device *dev, base_error *err) {
    if (!dev || !pc->has_identity)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "pcache_pipeline_save_device needs a device and an identity");
    if (pc->mode != PCACHE_MODE_READ_WRITE)
        return KILN_OK;
    kiln_status st = merge_from_disk(pc, dev, err);
    size_t size = 0;
    if (st == KILN_OK)
        st = vkd_pipeline_cache_data(dev, NULL, &size, err);
    if (st != KILN_OK || size == 0)
        return st;
    void *data = base_malloc(&pc->alloc, size);
    if (!data)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a pipeline blob");
    size_t got = size;
    st = vkd_pipeline_cache_data(dev, data, &got, err);
    if (st == KILN_OK)
        st = pcache_pipeline_save(pc, data, got, err);
    base_free(&pc->alloc, data, size);
    return st;
}
