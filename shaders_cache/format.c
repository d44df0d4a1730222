/* The cache file format. Every integer is little-endian, written byte by byte:
 *
 *   offset size  field
 *        0    8  magic "KILNPCF\0"
 *        8    4  format version (PCACHE_FORMAT_VERSION)
 *       12    4  engine version (Kiln's, major << 22 | minor << 12 | patch)
 *       16    4  payload version (engine/'s serialization version)
 *       20    1  pointer size of the writer (payloads may hold native data)
 *       21    1  endianness of the writer: 1 little, 2 big
 *       22    1  kind: 1 entry, 2 VkPipelineCache blob
 *       23    1  reserved, 0
 *       24    4  vendorID            28  4  deviceID
 *       32    4  driverID            36  4  driverVersion
 *       40   16  pipelineCacheUUID
 *       56    4  key size            60  4  reserved, 0
 *       64    8  payload size
 *       72       key, then payload
 *      end    8  checksum: base_hash_bytes chained over header, key and payload
 *
 * The file size must be exactly 72 + key size + payload size + 8. The format version is read
 * before anything else, so a later format may change every other field. */
#include "pcache_internal.h"

#include <string.h>

static const unsigned char magic[8] = {'K', 'I', 'L', 'N', 'P', 'C', 'F', 0};
static const uint64_t checksum_seed = 0x6b696c6e70636631ull; /* "kilnpcf1" */

uint32_t pcache_engine_version(void) {
    return (uint32_t)PCACHE_ENGINE_VERSION;
}

static uint8_t host_endianness(void) {
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first ? 1 : 2;
}

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

void pcache_put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

pcache_header pcache_header_make(const pcache *pc, pcache_entry_kind kind, size_t key_size,
                                 uint64_t payload_size) {
    pcache_header h = {
        .format_version = PCACHE_FORMAT_VERSION,
        .engine_version = pc->engine_version,
        .payload_version = pc->payload_version,
        .pointer_size = (uint8_t)sizeof(void *),
        .endianness = host_endianness(),
        .kind = (uint8_t)kind,
        .identity = pc->identity,
        .key_size = (uint32_t)key_size,
        .payload_size = payload_size,
    };
    return h;
}

void pcache_header_encode(const pcache_header *h, unsigned char out[PCACHE_HEADER_SIZE]) {
    memset(out, 0, PCACHE_HEADER_SIZE);
    memcpy(out, magic, sizeof magic);
    put_u32(out + 8, h->format_version);
    put_u32(out + 12, h->engine_version);
    put_u32(out + 16, h->payload_version);
    out[20] = h->pointer_size;
    out[21] = h->endianness;
    out[22] = h->kind;
    put_u32(out + 24, h->identity.vendor_id);
    put_u32(out + 28, h->identity.device_id);
    put_u32(out + 32, h->identity.driver_id);
    put_u32(out + 36, h->identity.driver_version);
    memcpy(out + 40, h->identity.pipeline_cache_uuid, VK_UUID_SIZE);
    put_u32(out + 56, h->key_size);
    pcache_put_u64(out + 64, h->payload_size);
}

static void header_decode(const unsigned char *in, pcache_header *h) {
    h->format_version = get_u32(in + 8);
    h->engine_version = get_u32(in + 12);
    h->payload_version = get_u32(in + 16);
    h->pointer_size = in[20];
    h->endianness = in[21];
    h->kind = in[22];
    h->identity.vendor_id = get_u32(in + 24);
    h->identity.device_id = get_u32(in + 28);
    h->identity.driver_id = get_u32(in + 32);
    h->identity.driver_version = get_u32(in + 36);
    memcpy(h->identity.pipeline_cache_uuid, in + 40, VK_UUID_SIZE);
    h->key_size = get_u32(in + 56);
    h->payload_size = get_u64(in + 64);
}

uint64_t pcache_checksum(const unsigned char *header, const void *key, size_t key_size,
                         const void *payload, size_t payload_size) {
    uint64_t h = base_hash_bytes(header, PCACHE_HEADER_SIZE, checksum_seed);
    h = base_hash_bytes(key, key_size, h);
    return base_hash_bytes(payload, payload_size, h);
}

/* Magic, sizes that add up to the file size, reserved bytes, a known kind, the checksum. */
static bool structure_sound(const unsigned char *file, size_t size, const pcache_header *h) {
    if (file[23] != 0 || get_u32(file + 60) != 0)
        return false;
    if (h->kind != PCACHE_KIND_ENTRY && h->kind != PCACHE_KIND_PIPELINE)
        return false;
    uint64_t body = size - PCACHE_HEADER_SIZE - PCACHE_CHECKSUM_SIZE;
    if (h->key_size > body || h->payload_size != body - h->key_size)
        return false;
    const unsigned char *key = file + PCACHE_HEADER_SIZE;
    uint64_t sum =
        pcache_checksum(file, key, h->key_size, key + h->key_size, (size_t)h->payload_size);
    return sum == get_u64(file + size - PCACHE_CHECKSUM_SIZE);
}

static bool same_identity(const pcache_identity *a, const pcache_identity *b) {
    return a->vendor_id == b->vendor_id && a->device_id == b->device_id &&
           a->driver_id == b->driver_id && a->driver_version == b->driver_version &&
           memcmp(a->pipeline_cache_uuid, b->pipeline_cache_uuid, VK_UUID_SIZE) == 0;
}

pcache_verdict pcache_verify(const pcache *pc, const unsigned char *file, size_t size,
                             const pcache_identity *identity, pcache_header *h) {
    if (size < PCACHE_HEADER_SIZE + PCACHE_CHECKSUM_SIZE || memcmp(file, magic, sizeof magic))
        return PCACHE_VERDICT_CORRUPT;
    memset(h, 0, sizeof *h);
    h->format_version = get_u32(file + 8);
    if (h->format_version != PCACHE_FORMAT_VERSION)
        return PCACHE_VERDICT_STALE; /* another layout: nothing else can be read */
    header_decode(file, h);
    if (!structure_sound(file, size, h))
        return PCACHE_VERDICT_CORRUPT;
    if (h->engine_version != pc->engine_version || h->payload_version != pc->payload_version ||
        h->pointer_size != sizeof(void *) || h->endianness != host_endianness())
        return PCACHE_VERDICT_STALE;
    if (identity && !same_identity(&h->identity, identity))
        return PCACHE_VERDICT_OTHER_DEVICE;
    return PCACHE_VERDICT_OK;
}

static void hex64(uint64_t v, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--, v >>= 4)
        out[i] = digits[v & 15];
}

void pcache_entry_name(const pcache_identity *identity, pcache_entry_kind kind, const void *key,
                       size_t key_size, char *out) {
    /* The driver version and UUID stay out of the name: after a driver update the old file
     * is found, rejected as another driver's, and replaced in place. */
    uint64_t seed =
        base_hash_u64(base_hash_u64((uint64_t)kind, identity->vendor_id), identity->device_id);
    hex64(base_hash_bytes(key, key_size, seed), out);
    hex64(base_hash_bytes(key, key_size, ~seed), out + 16);
    memcpy(out + 32, ".kc", 4);
}

static bool all_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return true;
}

bool pcache_is_entry_name(const char *name) {
    return strlen(name) == PCACHE_NAME_LEN && all_hex(name, 32) && strcmp(name + 32, ".kc") == 0;
}

bool pcache_is_temp_name(const char *name) {
    size_t n = strlen(name);
    return n > PCACHE_NAME_LEN && n < PCACHE_TEMP_NAME_MAX && all_hex(name, 32) &&
           strncmp(name + 32, ".kc.tmp.", 8) == 0;
}
