/* A stable 64-bit hash: 8-byte blocks mixed with the splitmix64 finaliser. Endianness-stable
 * because blocks are read byte by byte. Not cryptographic; it keys tables and caches. */
#include "base.h"

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

uint64_t base_hash_u64(uint64_t h, uint64_t value) {
    return mix64(h ^ (value + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)));
}

uint64_t base_hash_bytes(const void *data, size_t size, uint64_t seed) {
    const unsigned char *p = data;
    uint64_t h = base_hash_u64(seed, size);
    while (size > 0) {
        uint64_t block = 0;
        size_t n = size < 8 ? size : 8;
        for (size_t i = 0; i < n; i++)
            block |= (uint64_t)p[i] << (8 * i);
        h = base_hash_u64(h, block);
        p += n;
        size -= n;
    }
    return h;
}

uint64_t base_hash_str(const char *s, uint64_t seed) {
    size_t n = 0;
    while (s[n])
        n++;
    return base_hash_bytes(s, n, seed);
}
