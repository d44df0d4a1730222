/* Queries: density, the permutation that makes a view dense, and self-aliasing. */
#include "shape_internal.h"

#include <stdlib.h>
#include <string.h>

enum { ALIAS_ENUM_LIMIT = 1 << 30 };        /* hard cap on enumeration */
#define SPAN_LIMIT ((uint64_t)1 << 24)      /* bitset analysis up to this many offsets */
#define SPAN_WORK_LIMIT ((uint64_t)1 << 26) /* and this many word operations */

bool shape_view_is_dense(const shape_view *v) {
    if (v->contiguous)
        return true;
    if (v->masked)
        return false;
    /* canonical strides are row-major iff each equals size*stride of the next non-1 dim */
    int64_t acc = 1;
    for (uint32_t i = v->ndim; i-- > 0;) {
        int64_t s, st;
        if (shape_is(v->shape[i], 0))
            return true;
        if (shape_is(v->shape[i], 1))
            continue;
        if (!sym_is_const(v->shape[i], &s) || !sym_is_const(v->strides[i], &st) || st != acc)
            return false;
        if (__builtin_mul_overflow(acc, s, &acc))
            return false;
    }
    return true;
}

kiln_status shape_view_dense_permutation(shape_ctx *ctx, const shape_view *v, int32_t *perm) {
    SHAPE_CHECK(shape_check_view(ctx, v));
    int32_t p[SHAPE_MAX_DIMS];
    int64_t key[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < v->ndim; i++) {
        p[i] = (int32_t)i;
        key[i] = INT64_MAX; /* size-1 dims first: any place works */
        if (!shape_is(v->shape[i], 1) && !sym_is_const(v->strides[i], &key[i]))
            return shape_fail(ctx, KILN_ERROR_NOT_FOUND, "dense permutation: symbolic stride");
    }
    for (uint32_t i = 1; i < v->ndim; i++) { /* stable insertion sort, stride descending */
        for (uint32_t j = i; j > 0 && key[p[j - 1]] < key[p[j]]; j--) {
            int32_t t = p[j];
            p[j] = p[j - 1];
            p[j - 1] = t;
        }
    }
    shape_view t;
    kiln_status s = shape_view_permute(ctx, v, p, &t);
    if (s != KILN_OK)
        return s;
    if (!shape_view_is_dense(&t))
        return shape_fail(ctx, KILN_ERROR_NOT_FOUND, "no permutation makes this view dense");
    memcpy(perm, p, v->ndim * sizeof(*p));
    return KILN_OK;
}

/* ---- self-aliasing ----------------------------------------------------------------------------
 */

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts the addresses and looks for a repeat. */
static shape_alias alias_of_list(int64_t *addr, size_t n) {
    qsort(addr, n, sizeof(*addr), cmp_i64);
    for (size_t i = 1; i < n; i++)
        if (addr[i] == addr[i - 1])
            return SHAPE_ALIAS_YES;
    return SHAPE_ALIAS_NONE;
}

typedef struct dimset {
    uint32_t n;
    int64_t size[SHAPE_MAX_DIMS], stride[SHAPE_MAX_DIMS];
} dimset;

/* Effective (inside the mask) sizes > 1 and their strides; false when symbolic. */
static bool effective_dims(const shape_view *v, dimset *d) {
    d->n = 0;
    for (uint32_t i = 0; i < v->ndim; i++) {
        int64_t s, st, b = 0, e;
        if (!shape_value(v->shape[i], &s) || !shape_value(v->strides[i], &st))
            return false;
        e = s;
        if (v->masked && (!shape_value(v->mask_begin[i], &b) || !shape_value(v->mask_end[i], &e)))
            return false;
        if (e - b <= 0)
            return d->n = 0, true; /* nothing valid */
        if (e - b > 1) {
            d->size[d->n] = e - b;
            d->stride[d->n++] = st < 0 ? -st : st;
        }
    }
    return true;
}

/* Two dims i, j alias when a*|st_i| == b*|st_j| with 0 < a < n_i, 0 < b < n_j. */
static bool pair_witness(const dimset *d) {
    for (uint32_t i = 0; i < d->n; i++) {
        if (d->stride[i] == 0)
            return true;
        for (uint32_t j = i + 1; j < d->n; j++) {
            int64_t g;
            if (!base_gcd_i64(d->stride[i], d->stride[j], &g) || g == 0)
                continue;
            if (d->stride[j] / g < d->size[i] && d->stride[i] / g < d->size[j])
                return true;
        }
    }
    return false;
}

/* Each stride (ascending) exceeds the reach of all smaller ones: injective. */
static bool nested(const dimset *d) {
    uint32_t ord[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < d->n; i++)
        ord[i] = i;
    for (uint32_t i = 1; i < d->n; i++)
        for (uint32_t j = i; j > 0 && d->stride[ord[j - 1]] > d->stride[ord[j]]; j--) {
            uint32_t t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    int64_t reach = 0;
    for (uint32_t k = 0; k < d->n; k++) {
        int64_t st = d->stride[ord[k]], r;
        if (st <= reach)
            return false;
        if (__builtin_mul_overflow(st, d->size[ord[k]] - 1, &r) ||
            __builtin_add_overflow(reach, r, &reach))
            return false;
    }
    return true;
}

/* dst |= src << shift (bit 0 of word 0 is offset 0); bits past the end are dropped. */
static void bits_or_shifted(uint64_t *dst, const uint64_t *src, size_t words, uint64_t shift) {
    size_t ws = (size_t)(shift / 64);
    unsigned bs = (unsigned)(shift % 64);
    for (size_t w = words; w-- > ws;) {
        uint64_t x = src[w - ws] << bs;
        if (bs && w - ws > 0)
            x |= src[w - ws - 1] >> (64 - bs);
        dst[w] |= x;
    }
}

static size_t dims_count(const dimset *d) {
    size_t n = 1;
    for (uint32_t i = 0; i < d->n; i++) {
        if (d->size[i] > ALIAS_ENUM_LIMIT || (n *= (size_t)d->size[i]) > ALIAS_ENUM_LIMIT)
            return ALIAS_ENUM_LIMIT + 1;
    }
    return n;
}

static shape_alias enumerate_dims(shape_ctx *ctx, const dimset *d, size_t n) {
    int64_t *addr = base_malloc(&ctx->alloc, n * sizeof(*addr));
    if (!addr)
        return SHAPE_ALIAS_MAYBE;
    for (size_t k = 0; k < n; k++) {
        size_t r = k;
        int64_t a = 0;
        for (uint32_t i = d->n; i-- > 0;) {
            a += (int64_t)(r % (size_t)d->size[i]) * d->stride[i];
            r /= (size_t)d->size[i];
        }
        addr[k] = a;
    }
    shape_alias res = alias_of_list(addr, n);
    base_free(&ctx->alloc, addr, n * sizeof(*addr));
    return res;
}

/* Symbolic values are read at their bound values: the answer is for the current binding. */
/* Exact for any strides whose span is small: the set of reachable offsets, one dimension at a
 * time, as a bitset; a collision shows as fewer bits than the product of the counts. */
static shape_alias span_bitset(shape_ctx *ctx, const dimset *d) {
    uint64_t span = 1, work = 0;
    for (uint32_t i = 0; i < d->n; i++) {
        if (d->stride[i] > (int64_t)SPAN_LIMIT || d->size[i] > (int64_t)SPAN_LIMIT)
            return SHAPE_ALIAS_MAYBE;
        span += (uint64_t)d->stride[i] * (uint64_t)(d->size[i] - 1);
        work += (uint64_t)d->size[i];
        if (span > SPAN_LIMIT)
            return SHAPE_ALIAS_MAYBE;
    }
    size_t words = (size_t)(span + 63) / 64;
    if (work * words > SPAN_WORK_LIMIT)
        return SHAPE_ALIAS_MAYBE;
    uint64_t *a = base_calloc(&ctx->alloc, 2 * words, sizeof(uint64_t));
    if (!a)
        return SHAPE_ALIAS_MAYBE;
    uint64_t *cur = a, *nxt = a + words, count = 1;
    shape_alias res = SHAPE_ALIAS_NONE;
    cur[0] = 1;
    for (uint32_t i = 0; i < d->n && res == SHAPE_ALIAS_NONE; i++) {
        memset(nxt, 0, words * sizeof(uint64_t));
        for (int64_t j = 0; j < d->size[i]; j++)
            bits_or_shifted(nxt, cur, words, (uint64_t)(j * d->stride[i]));
        uint64_t got = 0;
        for (size_t w = 0; w < words; w++)
            got += (uint64_t)__builtin_popcountll(nxt[w]);
        count *= (uint64_t)d->size[i];
        if (got != count)
            res = SHAPE_ALIAS_YES;
        uint64_t *t = cur;
        cur = nxt, nxt = t;
    }
    base_free(&ctx->alloc, a, 2 * words * sizeof(uint64_t));
    return res;
}

shape_alias shape_view_self_alias(shape_ctx *ctx, const shape_view *v) {
    dimset d;
    if (shape_check_view(ctx, v) != KILN_OK)
        return SHAPE_ALIAS_MAYBE;
    if (!effective_dims(v, &d))
        return SHAPE_ALIAS_MAYBE;
    if (pair_witness(&d))
        return SHAPE_ALIAS_YES;
    if (nested(&d))
        return SHAPE_ALIAS_NONE;
    shape_alias b = span_bitset(ctx, &d);
    if (b != SHAPE_ALIAS_MAYBE)
        return b;
    size_t n = dims_count(&d);
    return n <= ctx->alias_enum_limit ? enumerate_dims(ctx, &d, n) : SHAPE_ALIAS_MAYBE;
}

/* ---- trackers: composition of injective views is injective; else enumerate ------------------ */

static bool eval_view(const shape_view *v, const int64_t *idx, int64_t *addr, bool *valid) {
    int64_t a, x, y;
    if (!shape_value(v->offset, &a))
        return false;
    *valid = true;
    for (uint32_t i = 0; i < v->ndim; i++) {
        if (!shape_value(v->strides[i], &x) || __builtin_mul_overflow(x, idx[i], &x) ||
            __builtin_add_overflow(a, x, &a))
            return false;
        if (v->masked) {
            if (!shape_value(v->mask_begin[i], &x) || !shape_value(v->mask_end[i], &y))
                return false;
            *valid = *valid && x <= idx[i] && idx[i] < y;
        }
    }
    *addr = a;
    return true;
}

/* The storage address of flat logical index k of t; false when symbolic. */
static bool eval_tracker(const shape_tracker *t, int64_t k, int64_t *addr, bool *valid) {
    int64_t flat = k;
    *valid = true;
    for (uint32_t j = t->nviews; j-- > 0;) {
        const shape_view *v = &t->views[j];
        int64_t idx[SHAPE_MAX_DIMS], s, r = flat;
        bool ok;
        for (uint32_t i = v->ndim; i-- > 0;) {
            if (!shape_value(v->shape[i], &s) || s <= 0)
                return false;
            idx[i] = r % s;
            r /= s;
        }
        if (!eval_view(v, idx, &flat, &ok))
            return false;
        *valid = *valid && ok;
    }
    *addr = flat;
    return true;
}

shape_alias shape_tracker_self_alias(shape_ctx *ctx, const shape_tracker *t) {
    if (shape_check_tracker(ctx, t) != KILN_OK)
        return SHAPE_ALIAS_MAYBE;
    if (t->nviews == 1)
        return shape_view_self_alias(ctx, &t->views[0]);
    bool all_none = true;
    for (uint32_t j = 0; j < t->nviews; j++)
        all_none = all_none && shape_view_self_alias(ctx, &t->views[j]) == SHAPE_ALIAS_NONE;
    if (all_none)
        return SHAPE_ALIAS_NONE;
    int64_t n;
    const sym_node *numel = shape_view_numel(ctx, shape_tracker_last(t));
    if (!numel || !shape_value(numel, &n) || (uint64_t)n > ctx->alias_enum_limit ||
        n > ALIAS_ENUM_LIMIT)
        return SHAPE_ALIAS_MAYBE;
    int64_t *addr = base_malloc(&ctx->alloc, (size_t)(n ? n : 1) * sizeof(*addr));
    if (!addr)
        return SHAPE_ALIAS_MAYBE;
    size_t m = 0;
    shape_alias res = SHAPE_ALIAS_NONE;
    for (int64_t k = 0; k < n; k++) {
        bool valid;
        if (!eval_tracker(t, k, &addr[m], &valid)) {
            res = SHAPE_ALIAS_MAYBE;
            break;
        }
        m += valid;
    }
    if (res == SHAPE_ALIAS_NONE)
        res = alias_of_list(addr, m);
    base_free(&ctx->alloc, addr, (size_t)(n ? n : 1) * sizeof(*addr));
    return res;
}

/* ---- real strides ---------------------------------------------------------------------------- */

kiln_status shape_tracker_real_strides(shape_ctx *ctx, const shape_tracker *t,
                                       const sym_node **out) {
    SHAPE_CHECK(shape_check_tracker(ctx, t));
    shape_tracker s;
    kiln_status st = shape_tracker_simplify(ctx, t, &s);
    if (st != KILN_OK)
        return st;
    const shape_view *v = shape_tracker_last(&s);
    for (uint32_t i = 0; i < v->ndim; i++) {
        bool full = !v->masked || (shape_is(v->mask_begin[i], 0) && v->mask_end[i] == v->shape[i]);
        out[i] = s.nviews == 1 && full ? v->strides[i] : NULL;
    }
    return KILN_OK;
}
