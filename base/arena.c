/* Bump allocation in chunks; everything is freed at once by base_arena_finish. */
#include "base.h"

#include <string.h>

struct base_arena_chunk {
    base_arena_chunk *prev;
    size_t size; /* bytes of data[] */
    size_t used;
    unsigned char data[]; /* blocks are aligned by address, not by this offset */
};

void base_arena_init(base_arena *arena, const base_allocator *alloc, size_t chunk_size) {
    arena->alloc = *alloc;
    arena->head = NULL;
    arena->chunk_size = chunk_size ? chunk_size : 16 * 1024;
    arena->bytes_used = 0;
}

static base_arena_chunk *arena_new_chunk(base_arena *arena, size_t min_size) {
    size_t size = arena->chunk_size > min_size ? arena->chunk_size : min_size;
    size_t total;
    if (!base_add_size(sizeof(base_arena_chunk), size, &total))
        return NULL;
    base_arena_chunk *c = base_malloc(&arena->alloc, total);
    if (!c)
        return NULL;
    c->prev = arena->head;
    c->size = size;
    c->used = 0;
    arena->head = c;
    return c;
}

/* The offset in c->data at which an aligned block of size bytes starts, if it fits. */
static bool chunk_fit(const base_arena_chunk *c, size_t size, size_t align, size_t *start) {
    uintptr_t base = (uintptr_t)c->data;
    size_t pad = (size_t)((align - (base + c->used) % align) % align);
    size_t end;
    if (!base_add_size(c->used, pad, start) || !base_add_size(*start, size, &end))
        return false;
    return end <= c->size;
}

void *base_arena_alloc(base_arena *arena, size_t size, size_t align) {
    if (align == 0 || align > 64 || (align & (align - 1)) != 0)
        return NULL;
    if (size == 0)
        size = 1;
    base_arena_chunk *c = arena->head;
    size_t start = 0;
    if (!c || !chunk_fit(c, size, align, &start)) {
        size_t need;
        if (!base_add_size(size, align, &need) || !(c = arena_new_chunk(arena, need)) ||
            !chunk_fit(c, size, align, &start))
            return NULL;
    }
    c->used = start + size;
    arena->bytes_used += size;
    memset(c->data + start, 0, size);
    return c->data + start;
}

void *base_arena_memdup(base_arena *arena, const void *data, size_t size, size_t align) {
    void *p = base_arena_alloc(arena, size, align);
    if (p && size)
        memcpy(p, data, size);
    return p;
}

char *base_arena_strdup(base_arena *arena, const char *s) {
    return base_arena_memdup(arena, s, strlen(s) + 1, 1);
}

void base_arena_finish(base_arena *arena) {
    base_arena_chunk *c = arena->head;
    while (c) {
        base_arena_chunk *prev = c->prev;
        base_free(&arena->alloc, c, sizeof(base_arena_chunk) + c->size);
        c = prev;
    }
    arena->head = NULL;
    arena->bytes_used = 0;
}

void base_arena_reset(base_arena *arena) {
    base_arena_chunk *c = arena->head, *keep = NULL;
    while (c) {
        base_arena_chunk *prev = c->prev;
        if (!prev && c->size == arena->chunk_size)
            keep = c; /* the first chunk stays for the next round */
        else
            base_free(&arena->alloc, c, sizeof(base_arena_chunk) + c->size);
        c = prev;
    }
    if (keep) {
        keep->used = 0;
        keep->prev = NULL;
    }
    arena->head = keep;
    arena->bytes_used = 0;
}
