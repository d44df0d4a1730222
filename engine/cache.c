/* The disk cache of compiled kernels (shaders_cache/ stores opaque entries; this file decides
 * what a kernel's key and payload are). A kernel found on disk skips lowering and emission:
 * its SPIR-V words and everything needed to dispatch them come back from the payload. */
#include "eng.h"

#include <string.h>

/* Version of the payload layout below and of the code it holds (7: tiled reductions add a
 * step's elements first; 8: matmul tile blocks; 9: loads shared in subgroups; 10: the step
 * order of multi-row tiles and the float max/min; 11: vectors moved as 64-bit integers,
 * octets, and one-output reductions in steps of eight): another value makes every entry a
 * miss. */
enum { CACHE_PAYLOAD_VERSION = 11, CACHE_HEADER_WORDS = 9 };
static const uint32_t payload_magic = 0x4e524b4bu; /* "KKRN" */

kiln_status eng_cache_open(kiln_context *ctx, const kiln_context_options *opt,
                           const vkd_device_info *info, vkd_device_options *dopt) {
    pcache_identity id = pcache_identity_of(info);
    pcache_options po = {.directory = opt->cache_dir,
                         .identity = &id,
                         .payload_version = CACHE_PAYLOAD_VERSION,
                         .alloc = &ctx->alloc};
    base_error err = {0};
    kiln_status st = pcache_open(&po, &ctx->pcache, &err);
    if (st != KILN_OK)
        return base_error_set(&ctx->err, st, "%s", base_error_message(&err));
    /* The device's VkPipelineCache starts from what an earlier run saved (a header only on
     * lavapipe, real driver binaries elsewhere). */
    if (pcache_pipeline_load(ctx->pcache, &ctx->blob, &ctx->blob_size, &err) == KILN_OK) {
        dopt->pipeline_cache_data = ctx->blob;
        dopt->pipeline_cache_size = ctx->blob_size;
    }
    return KILN_OK;
}

void eng_cache_save_pipelines(kiln_context *ctx) {
    if (!ctx->pcache || !ctx->dev)
        return;
    base_error err = {0};
    (void)pcache_pipeline_save_device(ctx->pcache, ctx->dev, &err); /* a failing disk warns */
}

void eng_cache_close(kiln_context *ctx) {
    if (ctx->blob)
        pcache_free(ctx->pcache, ctx->blob, ctx->blob_size);
    ctx->blob = NULL;
    pcache_close(ctx->pcache);
    ctx->pcache = NULL;
}

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Everything the compiled result depends on: the kernel's structure, the variant chosen, and
 * the code-generation inputs read from the device. */
static size_t cache_key(const kiln_context *ctx, const eng_kernel *k, const eng_program *p,
                        unsigned char key[40]) {
    const vkd_caps *caps = vkd_device_caps(ctx->dev);
    memcpy(key, "kilnkern", 8);
    put_u32(key + 8, (uint32_t)k->hash);
    put_u32(key + 12, (uint32_t)(k->hash >> 32));
    put_u32(key + 16, p->unchecked | p->group_lanes << 1 | p->tile_m << 12 | p->tile_n << 20 |
                          (uint32_t)p->row_loop << 28 | (uint32_t)ctx->opaque_multipliers << 29 |
                          (uint32_t)ctx->paired_vectors << 30);
    put_u32(key + 20, p->workgroup_size);
    put_u32(key + 24, caps->spirv_version);
    put_u32(key + 28,
            caps->maintenance4 | p->block_m << 8 | p->block_n << 16 | p->share_lanes << 24);
    put_u32(key + 32, caps->max_push_constants_size);
    put_u32(key + 36, CACHE_PAYLOAD_VERSION);
    return 40;
}

kiln_status eng_cache_load(kiln_context *ctx, const eng_kernel *k, eng_program *p, uint32_t **words,
                           size_t *word_count) {
    if (!ctx->pcache)
        return KILN_ERROR_NOT_FOUND;
    unsigned char key[40];
    size_t key_size = cache_key(ctx, k, p, key);
    void *data;
    size_t size;
    base_error err = {0};
    kiln_status st = pcache_get(ctx->pcache, key, key_size, &data, &size, &err);
    if (st == KILN_ERROR_OUT_OF_HOST_MEMORY)
        return base_error_set(&ctx->err, st, "%s", base_error_message(&err));
    if (st != KILN_OK) {
        ctx->stats.disk_misses++;
        return KILN_ERROR_NOT_FOUND;
    }
    const unsigned char *b = data;
    st = KILN_ERROR_NOT_FOUND; /* a payload that does not parse is a miss */
    if (size >= 4 * CACHE_HEADER_WORDS && get_u32(b) == payload_magic &&
        get_u32(b + 4) == CACHE_PAYLOAD_VERSION) {
        size_t count = get_u32(b + 32);
        if (size == 4 * (CACHE_HEADER_WORDS + count) && count > 0 &&
            get_u32(b + 12) <= IR_TYPE_COUNT_) {
            p->params_in_buffer = get_u32(b + 8) & 1u;
            p->index_type = (ir_type)get_u32(b + 12);
            p->param_count = get_u32(b + 16);
            p->binding_count = get_u32(b + 20);
            p->push_constant_size = get_u32(b + 24);
            *words = base_malloc(&ctx->alloc, count * sizeof **words);
            st = *words ? KILN_OK : KILN_ERROR_OUT_OF_HOST_MEMORY;
            for (size_t i = 0; st == KILN_OK && i < count; i++)
                (*words)[i] = get_u32(b + 4 * (CACHE_HEADER_WORDS + i));
            *word_count = count;
        }
    }
    pcache_free(ctx->pcache, data, size);
    if (st == KILN_OK)
        ctx->stats.disk_hits++;
    else if (st == KILN_ERROR_NOT_FOUND)
        ctx->stats.disk_misses++;
    return st;
}

void eng_cache_store(kiln_context *ctx, const eng_kernel *k, const eng_program *p,
                     const uint32_t *words, size_t word_count) {
    if (!ctx->pcache)
        return;
    size_t size = 4 * (CACHE_HEADER_WORDS + word_count);
    unsigned char *b = base_malloc(&ctx->alloc, size);
    if (!b)
        return; /* the kernel still runs; only the disk copy is lost */
    put_u32(b, payload_magic);
    put_u32(b + 4, CACHE_PAYLOAD_VERSION);
    put_u32(b + 8, p->params_in_buffer);
    put_u32(b + 12, p->index_type);
    put_u32(b + 16, p->param_count);
    put_u32(b + 20, p->binding_count);
    put_u32(b + 24, p->push_constant_size);
    put_u32(b + 28, p->workgroup_size);
    put_u32(b + 32, (uint32_t)word_count);
    for (size_t i = 0; i < word_count; i++)
        put_u32(b + 4 * (CACHE_HEADER_WORDS + i), words[i]);
    unsigned char key[40];
    size_t key_size = cache_key(ctx, k, p, key);
    base_error err = {0};
    (void)pcache_put(ctx->pcache, key, key_size, b, size, &err); /* a failing disk warns once */
    base_free(&ctx->alloc, b, size);
}
