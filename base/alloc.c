/* The allocator interface and the sticky error record. */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *base_default_alloc(void *user, void *ptr, size_t osize, size_t nsize) {
    (void)user;
    (void)osize;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, nsize);
}

base_allocator base_allocator_make(kiln_alloc_fn fn, void *user) {
    base_allocator a = {fn ? fn : base_default_alloc, fn ? user : NULL};
    return a;
}

void *base_malloc(const base_allocator *a, size_t size) {
    if (size == 0)
        size = 1; /* a zero-byte request still gets a unique, freeable block */
    return a->fn(a->user, NULL, 0, size);
}

void *base_calloc(const base_allocator *a, size_t count, size_t size) {
    size_t total;
    if (!base_mul_size(count, size, &total))
        return NULL;
    void *p = base_malloc(a, total);
    if (p)
        memset(p, 0, total);
    return p;
}

void *base_realloc(const base_allocator *a, void *ptr, size_t osize, size_t nsize) {
    if (nsize == 0)
        nsize = 1; /* realloc never frees here: base_free does */
    if (!ptr)
        osize = 0;
    return a->fn(a->user, ptr, osize, nsize);
}

void base_free(const base_allocator *a, void *ptr, size_t size) {
    if (ptr)
        a->fn(a->user, ptr, size ? size : 1, 0);
}

char *base_strdup(const base_allocator *a, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = base_malloc(a, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

kiln_status base_error_setv(base_error *err, kiln_status status, const char *fmt, va_list ap) {
    if (!err || status == KILN_OK || err->status != KILN_OK)
        return status;
    err->status = status;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    return status;
}

kiln_status base_error_set(base_error *err, kiln_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    base_error_setv(err, status, fmt, ap);
    va_end(ap);
    return status;
}

kiln_status base_error_reset(base_error *err, kiln_status status, const char *fmt, ...) {
    base_error_clear(err);
    va_list ap;
    va_start(ap, fmt);
    base_error_setv(err, status, fmt, ap);
    va_end(ap);
    return status;
}

void base_error_clear(base_error *err) {
    if (!err)
        return;
    err->status = KILN_OK;
    err->message[0] = '\0';
}

const char *base_error_message(const base_error *err) {
    if (!err || err->status == KILN_OK)
        return kiln_status_string(KILN_OK);
    return err->message[0] ? err->message : kiln_status_string(err->status);
}
