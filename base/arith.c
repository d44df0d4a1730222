/* Floor division, floor modulo and gcd on int64 without undefined behaviour. */
#include "base.h"

bool base_floordiv_i64(int64_t a, int64_t b, int64_t *out) {
    if (b == 0 || (a == INT64_MIN && b == -1))
        return false;
    int64_t q = a / b; /* truncates toward zero */
    /* Truncation rounds up for a negative exact quotient with a remainder: step down. */
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q -= 1;
    *out = q;
    return true;
}

bool base_floormod_i64(int64_t a, int64_t b, int64_t *out) {
    if (b == 0)
        return false;
    if (b == -1) { /* a % -1 is 0, but INT64_MIN % -1 is undefined in C */
        *out = 0;
        return true;
    }
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0)))
        r += b; /* cannot overflow: |r| < |b| and the signs differ */
    *out = r;
    return true;
}

bool base_gcd_i64(int64_t a, int64_t b, int64_t *out) {
    uint64_t x = a < 0 ? (uint64_t)0 - (uint64_t)a : (uint64_t)a;
    uint64_t y = b < 0 ? (uint64_t)0 - (uint64_t)b : (uint64_t)b;
    while (y != 0) {
        uint64_t t = x % y;
        x = y;
        y = t;
    }
    if (x > (uint64_t)INT64_MAX)
        return false;
    *out = (int64_t)x;
    return true;
}

bool base_align_up_size(size_t value, size_t align, size_t *out) {
    size_t sum;
    if (!base_add_size(value, align - 1, &sum))
        return false;
    *out = sum & ~(align - 1);
    return true;
}
