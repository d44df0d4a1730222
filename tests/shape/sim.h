/* The explicit array the shape/ fuzzers compare with: storage indices (-1 for padding) laid
 * out row-major, changed op by op through remaps; and a small reproducible generator. */
#ifndef KILN_TESTS_SHAPE_SIM_H
#define KILN_TESTS_SHAPE_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "shape.h"

enum { MAX_NUMEL = 1024 };

/* ---- the explicit array ------------------------------------------------------------------- */

typedef struct sim {
    uint32_t ndim;
    int64_t shape[SHAPE_MAX_DIMS];
    int64_t data[MAX_NUMEL * 4];
    int64_t n;
} sim;

static inline int64_t numel(const int64_t *shape, uint32_t nd) {
    int64_t n = 1;
    for (uint32_t i = 0; i < nd; i++)
        n *= shape[i];
    return n;
}

static inline void unravel(const int64_t *shape, uint32_t nd, int64_t k, int64_t *idx) {
    for (uint32_t i = nd; i-- > 0;) {
        idx[i] = shape[i] ? k % shape[i] : 0;
        k = shape[i] ? k / shape[i] : 0;
    }
}

static inline int64_t ravel(const int64_t *shape, uint32_t nd, const int64_t *idx) {
    int64_t k = 0;
    for (uint32_t i = 0; i < nd; i++)
        k = k * shape[i] + idx[i];
    return k;
}

/* out[new index] = in[map(new index)] where map gives the old index or -1 (padding). */
typedef bool (*sim_map)(const int64_t *nidx, int64_t *oidx, const void *arg);

static inline void sim_remap(sim *s, uint32_t nd, const int64_t *nshape, sim_map f,
                             const void *arg) {
    static sim o; /* 33 KB: not on the stack */
    if (nd > SHAPE_MAX_DIMS)
        return;
    o.ndim = nd;
    memcpy(o.shape, nshape, nd * sizeof(int64_t));
    o.n = numel(nshape, nd);
    if (o.n > (int64_t)BASE_COUNTOF(o.data)) { /* too big to simulate: the caller skips it */
        s->n = INT64_MAX;
        return;
    }
    for (int64_t k = 0; k < o.n; k++) {
        int64_t ni[SHAPE_MAX_DIMS] = {0}, oi[SHAPE_MAX_DIMS] = {0}; /* (for GCC -O3) */
        unravel(nshape, nd, k, ni);
        o.data[k] = f(ni, oi, arg) ? s->data[ravel(s->shape, s->ndim, oi)] : -1;
    }
    *s = o;
}

/* ---- random numbers (reproducible) ---------------------------------------------------------- */

static uint64_t rng_state; /* one per test program */
static inline uint32_t rnd(uint32_t n) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return n ? (uint32_t)((rng_state >> 33) % n) : 0;
}
static inline int64_t rrange(int64_t lo, int64_t hi) { /* inclusive */
    return lo + (int64_t)rnd((uint32_t)(hi - lo + 1));
}

/* ---- index maps of the ops: new index -> old index (false: padding) ------------------------ */

typedef struct perm_arg {
    int32_t p[SHAPE_MAX_DIMS];
} perm_arg;
static inline bool map_perm(const int64_t *ni, int64_t *oi, const void *arg) {
    const perm_arg *p = arg;
    for (uint32_t i = 0; i < SHAPE_MAX_DIMS && p->p[i] >= 0; i++)
        oi[p->p[i]] = ni[i];
    return true;
}

typedef struct flip_arg {
    uint32_t d;
    int64_t n, ndim;
} flip_arg;
static inline bool map_flip(const int64_t *ni, int64_t *oi, const void *arg) {
    const flip_arg *f = arg;
    memcpy(oi, ni, (size_t)f->ndim * sizeof(int64_t));
    oi[f->d] = f->n - 1 - ni[f->d];
    return true;
}

typedef struct box_arg {
    int64_t b[SHAPE_MAX_DIMS], e[SHAPE_MAX_DIMS], old[SHAPE_MAX_DIMS];
    int64_t ndim;
} box_arg;
static inline bool map_pad(const int64_t *ni, int64_t *oi, const void *arg) {
    const box_arg *p = arg;
    for (int64_t i = 0; i < p->ndim; i++) {
        oi[i] = ni[i] - p->b[i];
        if (oi[i] < 0 || oi[i] >= p->old[i])
            return false;
    }
    return true;
}
static inline bool map_shrink(const int64_t *ni, int64_t *oi, const void *arg) {
    const box_arg *p = arg;
    for (int64_t i = 0; i < p->ndim; i++)
        oi[i] = ni[i] + p->b[i];
    return true;
}

typedef struct slice_arg {
    uint32_t d, ndim;
    int64_t first, step;
} slice_arg;
static inline bool map_slice(const int64_t *ni, int64_t *oi, const void *arg) {
    const slice_arg *s = arg;
    memcpy(oi, ni, s->ndim * sizeof(int64_t));
    oi[s->d] = s->first + ni[s->d] * s->step;
    return true;
}

typedef struct sel_arg {
    uint32_t d, ndim;
    int64_t index;
} sel_arg;
static inline bool map_select(const int64_t *ni, int64_t *oi, const void *arg) {
    const sel_arg *s = arg;
    for (uint32_t i = 0, j = 0; i < s->ndim; i++)
        oi[i] = i == s->d ? s->index : ni[j++];
    return true;
}

typedef struct diag_arg {
    uint32_t a, b, ndim;
    int64_t r0, c0;
} diag_arg;
static inline bool map_diag(const int64_t *ni, int64_t *oi, const void *arg) {
    const diag_arg *g = arg;
    int64_t j = ni[g->ndim - 2];
    for (uint32_t i = 0, k = 0; i < g->ndim; i++)
        if (i != g->a && i != g->b)
            oi[i] = ni[k++];
    oi[g->a] = j + g->r0;
    oi[g->b] = j + g->c0;
    return true;
}

typedef struct unfold_arg {
    uint32_t d, ndim;
    int64_t step;
} unfold_arg;
static inline bool map_unfold(const int64_t *ni, int64_t *oi, const void *arg) {
    const unfold_arg *u = arg;
    memcpy(oi, ni, u->ndim * sizeof(int64_t));
    oi[u->d] = ni[u->d] * u->step + ni[u->ndim];
    return true;
}

#endif
