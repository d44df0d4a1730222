/* Open addressing with linear probing; deletion shifts later entries back so that every
 * entry stays reachable from its home slot without tombstones. */
#include "base.h"

void base_map_init(base_map *map, const base_allocator *alloc) {
    map->alloc = *alloc;
    map->slots = NULL;
    map->cap = 0;
    map->len = 0;
}

void base_map_finish(base_map *map) {
    base_free(&map->alloc, map->slots, map->cap * sizeof(base_map_slot));
    map->slots = NULL;
    map->cap = 0;
    map->len = 0;
}

void *base_map_find(const base_map *map, uint64_t hash, const void *key, base_map_eq_fn eq,
                    void *user) {
    if (map->cap == 0)
        return NULL;
    size_t mask = map->cap - 1;
    for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
        const base_map_slot *s = &map->slots[i];
        if (!s->value)
            return NULL;
        if (s->hash == hash && eq(s->value, key, user))
            return s->value;
    }
}

static void map_place(base_map_slot *slots, size_t cap, uint64_t hash, void *value) {
    size_t mask = cap - 1;
    size_t i = (size_t)hash & mask;
    while (slots[i].value)
        i = (i + 1) & mask;
    slots[i].hash = hash;
    slots[i].value = value;
}

static kiln_status map_grow(base_map *map) {
    size_t new_cap = map->cap ? map->cap * 2 : 16;
    if (new_cap < map->cap)
        return KILN_ERROR_OUT_OF_HOST_MEMORY;
    base_map_slot *slots = base_calloc(&map->alloc, new_cap, sizeof(base_map_slot));
    if (!slots)
        return KILN_ERROR_OUT_OF_HOST_MEMORY;
    for (size_t i = 0; i < map->cap; i++) {
        if (map->slots[i].value)
            map_place(slots, new_cap, map->slots[i].hash, map->slots[i].value);
    }
    base_free(&map->alloc, map->slots, map->cap * sizeof(base_map_slot));
    map->slots = slots;
    map->cap = new_cap;
    return KILN_OK;
}

kiln_status base_map_insert(base_map *map, uint64_t hash, void *value) {
    if (!value)
        return KILN_ERROR_INVALID_ARGUMENT;
    if ((map->len + 1) * 2 > map->cap) {
        kiln_status st = map_grow(map);
        if (st != KILN_OK)
            return st;
    }
    map_place(map->slots, map->cap, hash, value);
    map->len++;
    return KILN_OK;
}

void *base_map_remove(base_map *map, uint64_t hash, const void *key, base_map_eq_fn eq,
                      void *user) {
    if (map->cap == 0)
        return NULL;
    size_t mask = map->cap - 1;
    size_t i = (size_t)hash & mask;
    for (;; i = (i + 1) & mask) {
        if (!map->slots[i].value)
            return NULL;
        if (map->slots[i].hash == hash && eq(map->slots[i].value, key, user))
            break;
    }
    void *found = map->slots[i].value;
    /* Backward shift: move each later entry of the cluster into the hole when the hole lies
     * between its home slot and its current slot (cyclically). */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; map->slots[j].value; j = (j + 1) & mask) {
        size_t home = (size_t)map->slots[j].hash & mask;
        bool movable = ((j - home) & mask) >= ((j - hole) & mask);
        if (movable) {
            map->slots[hole] = map->slots[j];
            hole = j;
        }
    }
    map->slots[hole].value = NULL;
    map->slots[hole].hash = 0;
    map->len--;
    return found;
}

bool base_map_next(const base_map *map, size_t *cursor, void **value) {
    while (*cursor < map->cap) {
        void *v = map->slots[(*cursor)++].value;
        if (v) {
            *value = v;
            return true;
        }
    }
    return false;
}
