#include "test_alloc.h"

#include <stdlib.h>
#include <string.h>

/* Each block carries a header with its size so mismatched osize values are caught. */
typedef struct header {
    size_t size;
    size_t magic;
    _Alignas(16) unsigned char data[];
} header;

static const size_t block_magic = 0x6b696c6e626c6b21u;

void *test_alloc_fn(void *user, void *ptr, size_t osize, size_t nsize) {
    test_alloc *t = user;
    header *h = ptr ? (header *)((unsigned char *)ptr - offsetof(header, data)) : NULL;
    if (h && (h->magic != block_magic || h->size != osize))
        t->size_mismatches++;
    if (nsize == 0) {
        if (h) {
            t->live_blocks--;
            t->live_bytes -= h->size;
            h->magic = 0;
            free(h);
        }
        return NULL;
    }
    t->count++;
    if (t->fail_at > 0 && t->count == t->fail_at) {
        t->failures++;
        return NULL;
    }
    header *n = malloc(sizeof(header) + nsize);
    if (!n)
        return NULL;
    n->size = nsize;
    n->magic = block_magic;
    if (h) {
        memcpy(n->data, h->data, h->size < nsize ? h->size : nsize);
        t->live_bytes -= h->size;
        h->magic = 0;
        free(h);
    } else {
        t->live_blocks++;
    }
    t->live_bytes += nsize;
    return n->data;
}

base_allocator test_allocator(test_alloc *state) {
    return base_allocator_make(test_alloc_fn, state);
}
