/* The disk cache of compiled kernels (shaders_cache/ stores opaque entries; this file decides
 * what a kernel's key and payload are). A kernel found on disk skips lowering and emission:
 * its SPIR-V words and everything needed to dispatch them come back from the payload. */
#include "cache_version.h"
#include "eng.h"

#include <string.h>

/* Version of the payload layout below and of the code it holds (7: tiled reductions add a
 * step's elements first; 8: matmul tile blocks; 9: loads shared in subgroups; 10: the step
 * order of multi-row tiles and the float max/min; 11: vectors moved as 64-bit integers,
 * octets, and one-output reductions in steps of eight; 12: view offsets and mask bounds as
 * parameters, their alignment in the key and the payload, redirects; 13: explicit
 * float-to-integer casts, pow's special values, tanh near 0, loops within lavapipe's 65535
 * passes; 15: the kernel's name; 16: pairs (LOAD2) and window tiles stepping by image rows;
 * 17: read-only operands as texel buffers, their bindings in the flags; 18: a row's pairs
 * share their texel fetches (LOAD2R); 19: a loop's texel fetches hoisted to its start; 20: an
 * in-place write's loads and stores of its target, and its siblings' stores, as vectors, its
 * target read through a read-only alias binding after the kernel's own; the number lives in
 * cache_version.h): another value makes every entry a miss.
 *
 * Payload: magic, version, flags (1: parameters in a buffer, 2: a redirect; bits 16-31: the
 * texel bindings, eng_program.texel_bindings), index type,
 * parameter count, binding count, push-constant size, workgroup size, word count, the
 * alignment the code relies on (ALIGN_WORDS words, a byte per parameter: 0, 2, 4 or 8), the
 * kernel's name (NAME_WORDS words, NUL-padded: kilninfo --cache lists it), then the SPIR-V
 * words. A redirect has no words: the variant asked for (the key's alignment) has
 * the code of the variant its alignment names, stored under that one's key. */
enum { CACHE_PAYLOAD_VERSION = ENG_CACHE_PAYLOAD_VERSION, ALIGN_WORDS = ENG_MAX_PARAMS / 4 };
/* The key: 40 bytes, an alignment byte per parameter, a window byte per buffer, S's log2. */
enum { NAME_WORDS = ENG_NAME_MAX / 4, CACHE_HEADER_WORDS = 9 + ALIGN_WORDS + NAME_WORDS };
_Static_assert(ENG_CACHE_NAME_OFFSET == 4 * (9 + ALIGN_WORDS) &&
                   ENG_CACHE_NAME_SIZE == 4 * NAME_WORDS,
               "cache_version.h places the name where the payload has it");
enum { CACHE_KEY_SIZE = 45 + ENG_MAX_PARAMS + ENG_MAX_BUFFERS };
enum { FLAG_PARAMS_IN_BUFFER = 1, FLAG_REDIRECT = 2 };
static const uint32_t payload_magic = ENG_CACHE_PAYLOAD_MAGIC;

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

/* Everything the compiled result depends on: the kernel's structure, the variant chosen
 * (with align: each lifted offset's alignment and its residue), and the code-generation inputs
 * read from the device. */
static size_t cache_key(const kiln_context *ctx, const eng_kernel *k, const eng_program *p,
                        const uint8_t *align, unsigned char key[CACHE_KEY_SIZE]) {
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
    for (uint32_t i = 0; i < ENG_MAX_PARAMS; i++) {
        uint32_t m = i < k->param_count && align[i] > 1 ? align[i] : 0;
        key[40 + i] = (unsigned char)(m ? m << 4 | p->residue[i] % m : 0);
    }
    /* Windows of large storages (powers of two: their log2 + 1; 0: none) and their size; bit
     * 7: the storage may be read as texels (eng_program.texel_storages). */
    for (uint32_t i = 0; i < ENG_MAX_BUFFERS; i++)
        key[40 + ENG_MAX_PARAMS + i] =
            (unsigned char)((p->windows[i] ? 1 + __builtin_ctz(p->windows[i]) : 0) |
                            (p->texel_storages >> i & 1) << 7);
    key[40 + ENG_MAX_PARAMS + ENG_MAX_BUFFERS] = (unsigned char)p->window_log2;
    /* The features the code may use (a device profile turns some off). */
    put_u32(key + 41 + ENG_MAX_PARAMS + ENG_MAX_BUFFERS,
            (uint32_t)caps->int64 | (uint32_t)caps->int16 << 1 | (uint32_t)caps->int8 << 2 |
                (uint32_t)caps->float16 << 3 | (uint32_t)caps->storage_buffer_8bit << 4 |
                (uint32_t)caps->storage_buffer_16bit << 5 | (uint32_t)caps->float64 << 6 |
                (uint32_t)caps->preserve_specials32 << 7);
    return CACHE_KEY_SIZE;
}

/* An alignment byte as stored: 0, 2 (pairs), 4 or 8. */
static bool alignment_ok(uint32_t a) {
    return a == 0 || a == 2 || a == 4 || a == 8;
}

/* The entry of key, parsed: KILN_OK and the payload (to free with pcache_free), or a miss
 * (KILN_ERROR_NOT_FOUND: none, or one that does not parse), or out of memory. */
static kiln_status entry_get(kiln_context *ctx, const unsigned char *key, size_t key_size,
                             unsigned char **out, size_t *out_size) {
    void *data;
    size_t size;
    base_error err = {0};
    kiln_status st = pcache_get(ctx->pcache, key, key_size, &data, &size, &err);
    if (st == KILN_ERROR_OUT_OF_HOST_MEMORY)
        return base_error_set(&ctx->err, st, "%s", base_error_message(&err));
    if (st != KILN_OK)
        return KILN_ERROR_NOT_FOUND;
    const unsigned char *b = data;
    bool ok = size >= 4 * CACHE_HEADER_WORDS && get_u32(b) == payload_magic &&
              get_u32(b + 4) == CACHE_PAYLOAD_VERSION && get_u32(b + 12) <= IR_TYPE_COUNT_;
    size_t count = ok ? get_u32(b + 32) : 0;
    bool redirect = ok && (get_u32(b + 8) & FLAG_REDIRECT);
    ok = ok && size == 4 * (CACHE_HEADER_WORDS + count) && (redirect ? count == 0 : count > 0);
    for (uint32_t i = 0; ok && i < ENG_MAX_PARAMS; i++)
        ok = alignment_ok(b[36 + i]);
    if (!ok) {
        pcache_free(ctx->pcache, data, size);
        return KILN_ERROR_NOT_FOUND;
    }
    *out = data;
    *out_size = size;
    return KILN_OK;
}

kiln_status eng_cache_load(kiln_context *ctx, const eng_kernel *k, eng_program *p, uint32_t **words,
                           size_t *word_count) {
    if (!ctx->pcache)
        return KILN_ERROR_NOT_FOUND;
    unsigned char key[CACHE_KEY_SIZE], *b = NULL;
    size_t size = 0;
    kiln_status st = entry_get(ctx, key, cache_key(ctx, k, p, p->align, key), &b, &size);
    if (st == KILN_OK && (get_u32(b + 8) & FLAG_REDIRECT)) { /* the code is another key's */
        uint8_t align[ENG_MAX_PARAMS];
        memcpy(align, b + 36, sizeof align);
        pcache_free(ctx->pcache, b, size);
        st = entry_get(ctx, key, cache_key(ctx, k, p, align, key), &b, &size);
        if (st == KILN_OK && (get_u32(b + 8) & FLAG_REDIRECT)) {
            pcache_free(ctx->pcache, b, size);
            st = KILN_ERROR_NOT_FOUND;
        }
    }
    if (st != KILN_OK)
        return st;
    size_t count = get_u32(b + 32);
    p->params_in_buffer = get_u32(b + 8) & FLAG_PARAMS_IN_BUFFER;
    p->texel_bindings = get_u32(b + 8) >> 16 & p->texel_storages;
    p->index_type = (ir_type)get_u32(b + 12);
    p->param_count = get_u32(b + 16);
    p->binding_count = get_u32(b + 20);
    p->push_constant_size = get_u32(b + 24);
    memcpy(p->align, b + 36, sizeof p->align);
    *words = base_malloc(&ctx->alloc, count * sizeof **words);
    st = *words ? KILN_OK : KILN_ERROR_OUT_OF_HOST_MEMORY;
    for (size_t i = 0; st == KILN_OK && i < count; i++)
        (*words)[i] = get_u32(b + 4 * (CACHE_HEADER_WORDS + i));
    *word_count = count;
    pcache_free(ctx->pcache, b, size);
    if (st == KILN_OK)
        ctx->stats.disk_hits++;
    return st;
}

/* Stores one entry: p's interface and alignment with words, or a redirect (words NULL). */
static void entry_put(kiln_context *ctx, const eng_kernel *k, const eng_program *p,
                      const uint8_t *key_align, const uint32_t *words, size_t word_count) {
    size_t size = 4 * (CACHE_HEADER_WORDS + word_count);
    unsigned char *b = base_malloc(&ctx->alloc, size);
    if (!b)
        return; /* the kernel still runs; only the disk copy is lost */
    put_u32(b, payload_magic);
    put_u32(b + 4, CACHE_PAYLOAD_VERSION);
    put_u32(b + 8, (p->params_in_buffer ? FLAG_PARAMS_IN_BUFFER : 0u) |
                       (words ? 0u : FLAG_REDIRECT) | p->texel_bindings << 16);
    put_u32(b + 12, p->index_type);
    put_u32(b + 16, p->param_count);
    put_u32(b + 20, p->binding_count);
    put_u32(b + 24, p->push_constant_size);
    put_u32(b + 28, p->workgroup_size);
    put_u32(b + 32, (uint32_t)word_count);
    memcpy(b + 36, p->align, ENG_MAX_PARAMS);
    size_t name_len = strlen(p->name); /* < ENG_NAME_MAX: the padding keeps a NUL */
    memset(b + ENG_CACHE_NAME_OFFSET, 0, ENG_CACHE_NAME_SIZE);
    memcpy(b + ENG_CACHE_NAME_OFFSET, p->name, name_len);
    for (size_t i = 0; i < word_count; i++)
        put_u32(b + 4 * (CACHE_HEADER_WORDS + i), words[i]);
    unsigned char key[CACHE_KEY_SIZE];
    size_t key_size = cache_key(ctx, k, p, key_align, key);
    base_error err = {0};
    (void)pcache_put(ctx->pcache, key, key_size, b, size, &err); /* a failing disk warns once */
    base_free(&ctx->alloc, b, size);
}

void eng_cache_store(kiln_context *ctx, const eng_kernel *k, const eng_program *p,
                     const uint8_t *asked, const uint32_t *words, size_t word_count) {
    if (!ctx->pcache)
        return;
    if (words)
        entry_put(ctx, k, p, p->align, words, word_count);
    unsigned char mine[CACHE_KEY_SIZE], theirs[CACHE_KEY_SIZE];
    cache_key(ctx, k, p, asked, mine);
    cache_key(ctx, k, p, p->align, theirs);
    if (memcmp(mine, theirs, sizeof mine) != 0) /* asked for more alignment than the code uses */
        entry_put(ctx, k, p, asked, NULL, 0);
}
