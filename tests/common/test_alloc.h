/* A test allocator: counts live blocks and bytes, checks osize on every free and resize, and
 * fails the Nth allocation on demand (the fail-the-Nth-allocation loops). */
#ifndef KILN_TESTS_TEST_ALLOC_H
#define KILN_TESTS_TEST_ALLOC_H

#include "base.h"

typedef struct test_alloc {
    long fail_at;         /* fail the allocation with this ordinal (1-based); 0: never */
    long count;           /* allocations attempted (including failed ones) */
    long failures;        /* allocations that were failed on purpose */
    long live_blocks;     /* allocated and not yet freed */
    size_t live_bytes;    /* sum of the osize of live blocks */
    long size_mismatches; /* frees or resizes whose osize did not match the block */
} test_alloc;

/* Use with base_allocator_make(test_alloc_fn, &state) or as a kiln_alloc_fn. */
void *test_alloc_fn(void *user, void *ptr, size_t osize, size_t nsize);
base_allocator test_allocator(test_alloc *state);

#endif
