/* Merging two stacked views into one, and the tracker (a stack of views) built on it.
 *
 * The merge follows the idea of tinygrad's View.__add__ (read at commit f12e2a75db, rewritten):
 * each stride of the outer view is projected onto the inner view's coordinates by unravelling
 * offset + stride; the projection is exact when, for each group of inner dimensions, the
 * resulting linear form stays inside the group's range for every outer index (no carries).
 * The inner view's mask is then pulled back onto the outer view's dimensions, or the merge is
 * refused. The general case needs constant outer views and constant inner shapes; contiguous
 * and masked outer views are handled first with symbolic values too. */
#include "shape_internal.h"

#include <string.h>

enum { MERGE_DEPTH = 8 };

/* A linear form c + sum coef[d] * idx_d over the outer view's indices idx_d in [0, n_d - 1]. */
typedef struct linform {
    int64_t c;
    int64_t coef[SHAPE_MAX_DIMS];
} linform;

static bool lin_range(const linform *f, const int64_t *n, uint32_t nd, int64_t *lo, int64_t *hi) {
    int64_t a = f->c, b = f->c;
    for (uint32_t d = 0; d < nd; d++) {
        int64_t t;
        if (__builtin_mul_overflow(f->coef[d], n[d] - 1, &t))
            return false;
        if (__builtin_add_overflow(t < 0 ? a : b, t, t < 0 ? &a : &b))
            return false;
    }
    *lo = a, *hi = b;
    return true;
}

static bool unravel(const int64_t *shape, uint32_t nd, int64_t x, int64_t *out) {
    for (uint32_t i = nd; i-- > 0;) {
        if (shape[i] <= 0)
            return false;
        out[i] = x % shape[i];
        x /= shape[i];
    }
    return x == 0;
}

static int64_t fdiv(int64_t a, int64_t b) {
    int64_t q;
    base_floordiv_i64(a, b, &q);
    return q;
}

typedef struct projection {
    uint32_t n1, n2;
    int64_t s1[SHAPE_MAX_DIMS], st1[SHAPE_MAX_DIMS], s2[SHAPE_MAX_DIMS];
    int64_t origin[SHAPE_MAX_DIMS];
    int64_t delta[SHAPE_MAX_DIMS][SHAPE_MAX_DIMS]; /* [d2][d1] */
    uint32_t nterms[SHAPE_MAX_DIMS];               /* nonzero deltas per inner dim */
    linform group[SHAPE_MAX_DIMS];                 /* per inner dim when groups == dims */
    int64_t gsize[SHAPE_MAX_DIMS];
    uint32_t ngroups; /* groups are stored innermost first */
} projection;

static bool project(projection *p, int64_t off1) {
    if (!unravel(p->s2, p->n2, off1, p->origin))
        return false;
    memset(p->delta, 0, sizeof(p->delta));
    memset(p->nterms, 0, sizeof(p->nterms));
    for (uint32_t d1 = 0; d1 < p->n1; d1++) {
        if (p->st1[d1] == 0)
            continue;
        int64_t u[SHAPE_MAX_DIMS], x;
        if (__builtin_add_overflow(off1, p->st1[d1], &x) || !unravel(p->s2, p->n2, x, u))
            return false;
        for (uint32_t d2 = 0; d2 < p->n2; d2++) {
            p->delta[d2][d1] = u[d2] - p->origin[d2];
            p->nterms[d2] += p->delta[d2][d1] != 0;
        }
    }
    return true;
}

/* Groups inner dims (from the right) until each group's form stays in range. */
static bool group_dims(projection *p) {
    linform f = {0};
    int64_t size = 1;
    p->ngroups = 0;
    for (uint32_t k = p->n2; k-- > 0;) {
        int64_t t;
        if (__builtin_mul_overflow(p->origin[k], size, &t) || __builtin_add_overflow(f.c, t, &f.c))
            return false;
        for (uint32_t d1 = 0; d1 < p->n1; d1++) {
            if (__builtin_mul_overflow(p->delta[k][d1], size, &t) ||
                __builtin_add_overflow(f.coef[d1], t, &f.coef[d1]))
                return false;
        }
        if (__builtin_mul_overflow(size, p->s2[k], &size))
            return false;
        int64_t lo, hi;
        if (!lin_range(&f, p->s1, p->n1, &lo, &hi))
            return false;
        if (lo >= 0 && hi < size) {
            p->group[p->ngroups] = f;
            p->gsize[p->ngroups++] = size;
            memset(&f, 0, sizeof(f));
            size = 1;
        }
    }
    if (f.c != 0)
        return false;
    for (uint32_t d1 = 0; d1 < p->n1; d1++)
        if (f.coef[d1] != 0)
            return false;
    return true;
}

static bool consts(const sym_node *const *in, uint32_t n, int64_t *out) {
    for (uint32_t i = 0; i < n; i++)
        if (!sym_is_const(in[i], &out[i]))
            return false;
    return true;
}

static kiln_status merge_rec(shape_ctx *ctx, const shape_view *vm2, const shape_view *vm1,
                             shape_view *out, bool *ok, int depth);

/* Pulls the inner mask back onto the outer dims: new outer mask in nb/ne; false: cannot. */
static bool pull_mask(const projection *p, const shape_view *vm2, int64_t *nb, int64_t *ne) {
    int64_t b2[SHAPE_MAX_DIMS], e2[SHAPE_MAX_DIMS];
    if (!consts(vm2->mask_begin, p->n2, b2) || !consts(vm2->mask_end, p->n2, e2))
        return false;
    for (uint32_t d = 0; d < p->n1; d++)
        nb[d] = 0, ne[d] = p->s1[d];
    for (uint32_t k = 0; k < p->n2; k++) {
        const linform *t = &p->group[p->n2 - 1 - k];
        int64_t lo, hi, o = p->origin[k];
        if (!lin_range(t, p->s1, p->n1, &lo, &hi))
            return false;
        if (b2[k] <= lo && hi < e2[k])
            continue;
        if (p->nterms[k] == 0) { /* constant coordinate outside the mask: nothing valid */
            if (p->n1 == 0)
                return false;
            ne[0] = 0;
            continue;
        }
        if (p->nterms[k] != 1)
            return false;
        uint32_t d1 = 0;
        while (p->delta[k][d1] == 0)
            d1++;
        int64_t s = p->delta[k][d1];
        int64_t lo_i = -fdiv(-(s > 0 ? b2[k] - o : e2[k] - o - 1), s);
        int64_t hi_i = fdiv(s < 0 ? b2[k] - o : e2[k] - o - 1, s) + 1;
        nb[d1] = nb[d1] > lo_i ? nb[d1] : lo_i;
        ne[d1] = ne[d1] < hi_i ? ne[d1] : hi_i;
    }
    return true;
}

static bool mask_is_full(const projection *p, const int64_t *nb, const int64_t *ne) {
    for (uint32_t d = 0; d < p->n1; d++)
        if (nb[d] != 0 || ne[d] != p->s1[d])
            return false;
    return true;
}

static kiln_status merge_general(shape_ctx *ctx, const shape_view *vm2, const shape_view *vm1,
                                 shape_view *out, bool *ok, int depth) {
    projection p;
    int64_t off1;
    p.n1 = vm1->ndim, p.n2 = vm2->ndim;
    if (!consts(vm1->shape, p.n1, p.s1) || !consts(vm1->strides, p.n1, p.st1) ||
        !sym_is_const(vm1->offset, &off1) || !consts(vm2->shape, p.n2, p.s2))
        return KILN_OK;
    if (!project(&p, off1) || !group_dims(&p))
        return KILN_OK;
    {
        bool same = p.ngroups == p.n2;
        const sym_node *gs[SHAPE_MAX_DIMS];
        for (uint32_t g = 0; g < p.ngroups; g++) {
            gs[g] = shape_k(ctx, p.gsize[p.ngroups - 1 - g]);
            same = same && gs[g] == vm2->shape[g];
        }
        if (!same) {
            shape_view r;
            bool rok;
            kiln_status s = shape_view_reshape(ctx, vm2, p.ngroups, gs, &r, &rok);
            if (s != KILN_OK || !rok)
                return s;
            return merge_rec(ctx, &r, vm1, out, ok, depth + 1);
        }
    }
    if (vm2->masked) {
        int64_t nb[SHAPE_MAX_DIMS], ne[SHAPE_MAX_DIMS];
        if (!pull_mask(&p, vm2, nb, ne))
            return KILN_OK;
        if (!mask_is_full(&p, nb, ne)) {
            const sym_node *b[SHAPE_MAX_DIMS], *e[SHAPE_MAX_DIMS];
            for (uint32_t d = 0; d < p.n1; d++)
                b[d] = shape_k(ctx, nb[d]), e[d] = shape_k(ctx, ne[d]);
            shape_view m;
            kiln_status s =
                shape_view_make(ctx, p.n1, vm1->shape, vm1->strides, vm1->offset, b, e, &m);
            if (s != KILN_OK)
                return s;
            return merge_rec(ctx, vm2, &m, out, ok, depth + 1);
        }
    }
    sym_ctx *sc = ctx->sym;
    const sym_node *st[SHAPE_MAX_DIMS], *off = vm2->offset;
    for (uint32_t d1 = 0; d1 < p.n1; d1++) {
        st[d1] = shape_k(ctx, 0);
        for (uint32_t k = 0; k < p.n2; k++)
            st[d1] = sym_add(sc, st[d1], sym_mul_c(sc, vm2->strides[k], p.delta[k][d1]));
    }
    for (uint32_t k = 0; k < p.n2; k++)
        off = sym_add(sc, off, sym_mul_c(sc, vm2->strides[k], p.origin[k]));
    kiln_status s = shape_view_make(ctx, p.n1, vm1->shape, st, off, NULL, NULL, out);
    *ok = s == KILN_OK;
    return s;
}

/* The outer view reads only logical element 0 of the inner one (offset 0, every stride 0):
 * the result reads the inner view at (0, ..., 0), whatever the inner shape (symbolic too). */
static kiln_status merge_broadcast_first(shape_ctx *ctx, const shape_view *vm2,
                                         const shape_view *vm1, shape_view *out, bool *ok) {
    if (!shape_is(vm1->offset, 0) || vm1->masked)
        return KILN_OK;
    for (uint32_t i = 0; i < vm1->ndim; i++)
        if (!shape_is(vm1->strides[i], 0))
            return KILN_OK;
    bool inside = true;
    for (uint32_t i = 0; vm2->masked && i < vm2->ndim; i++)
        inside = inside && shape_is(vm2->mask_begin[i], 0) &&
                 shape_prove_le(ctx, shape_k(ctx, 1), vm2->mask_end[i]);
    if (!inside)
        return KILN_OK;
    kiln_status s =
        shape_view_make(ctx, vm1->ndim, vm1->shape, vm1->strides, vm2->offset, NULL, NULL, out);
    *ok = s == KILN_OK;
    return s;
}

/* The outer view has a mask: merge its unmasked box, then pad back. */
static kiln_status merge_masked(shape_ctx *ctx, const shape_view *vm2, const shape_view *vm1,
                                shape_view *out, bool *ok, int depth) {
    shape_view box, m;
    kiln_status s = shape_view_shrink(ctx, vm1, vm1->mask_begin, vm1->mask_end, &box);
    if (s != KILN_OK || shape_view_equal(&box, vm1))
        return s;
    bool mok = false;
    s = merge_rec(ctx, vm2, &box, &m, &mok, depth + 1);
    if (s != KILN_OK || !mok)
        return s;
    const sym_node *after[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < vm1->ndim; i++)
        after[i] = sym_sub(ctx->sym, vm1->shape[i], vm1->mask_end[i]);
    s = shape_view_pad(ctx, &m, vm1->mask_begin, after, out);
    *ok = s == KILN_OK;
    return s;
}

static kiln_status merge_rec(shape_ctx *ctx, const shape_view *vm2, const shape_view *vm1,
                             shape_view *out, bool *ok, int depth) {
    *ok = false;
    if (depth > MERGE_DEPTH)
        return KILN_OK;
    for (uint32_t i = 0; i < vm1->ndim; i++) {
        if (shape_is(vm1->shape[i], 0)) {
            *out = *vm1;
            *ok = true;
            return KILN_OK;
        }
    }
    if (vm2->contiguous) {
        *out = *vm1;
        *ok = true;
        return KILN_OK;
    }
    if (vm1->contiguous && shape_view_numel(ctx, vm1) == shape_view_numel(ctx, vm2))
        return shape_view_reshape(ctx, vm2, vm1->ndim, vm1->shape, out, ok);
    if (vm1->masked)
        return merge_masked(ctx, vm2, vm1, out, ok, depth);
    kiln_status s = merge_broadcast_first(ctx, vm2, vm1, out, ok);
    if (s != KILN_OK || *ok)
        return s;
    return merge_general(ctx, vm2, vm1, out, ok, depth);
}

kiln_status shape_view_merge(shape_ctx *ctx, const shape_view *inner, const shape_view *outer,
                             shape_view *out, bool *ok) {
    SHAPE_CHECK(shape_check_view(ctx, outer));
    SHAPE_CHECK(shape_check_view(ctx, inner));
    shape_view m;
    base_error saved = ctx->err;
    kiln_status s = merge_rec(ctx, inner, outer, &m, ok, 0);
    if (s == KILN_ERROR_INVALID_ARGUMENT || s == KILN_ERROR_OUT_OF_RANGE ||
        s == KILN_ERROR_OUT_OF_BOUNDS || s == KILN_ERROR_SHAPE_MISMATCH ||
        s == KILN_ERROR_UNSUPPORTED || s == KILN_ERROR_LIMIT_EXCEEDED) {
        /* a step inside declined (a mask empty only for the bound value, ...): no merge */
        ctx->err = saved;
        s = KILN_OK, *ok = false;
    }
    if (s != KILN_OK || !*ok) {
        *ok = false;
        return s;
    }
    /* the merged view stands for the outer tensor: it reports the outer view's strides */
    memcpy(m.user_strides, outer->user_strides, sizeof(m.user_strides));
    m.user_offset = outer->user_offset;
    *out = m;
    return KILN_OK;
}

/* ---- the tracker ---------------------------------------------------------------------------- */

kiln_status shape_tracker_from_view(const shape_view *v, shape_tracker *out) {
    out->nviews = 1;
    out->views[0] = *v;
    return KILN_OK;
}

const shape_view *shape_tracker_last(const shape_tracker *t) {
    return t && t->nviews >= 1 && t->nviews <= SHAPE_MAX_VIEWS ? &t->views[t->nviews - 1] : NULL;
}

bool shape_tracker_contiguous(const shape_tracker *t) {
    return t && t->nviews == 1 && t->views[0].contiguous;
}

/* Merges views[k] and views[k+1] of t into one when exact; *merged says whether it did. */
static kiln_status merge_pair(shape_ctx *ctx, shape_tracker *t, uint32_t k, bool *merged) {
    shape_view m;
    kiln_status s = shape_view_merge(ctx, &t->views[k], &t->views[k + 1], &m, merged);
    if (s != KILN_OK || !*merged)
        return s;
    t->views[k] = m;
    for (uint32_t j = k + 1; j + 1 < t->nviews; j++)
        t->views[j] = t->views[j + 1];
    t->nviews--;
    return KILN_OK;
}

kiln_status shape_tracker_simplify(shape_ctx *ctx, const shape_tracker *in, shape_tracker *out) {
    SHAPE_CHECK(shape_check_tracker(ctx, in));
    shape_tracker t = *in;
    bool merged = true;
    while (merged && t.nviews >= 2) { /* any adjacent pair, the outermost first */
        merged = false;
        for (uint32_t k = t.nviews - 1; k-- > 0 && !merged;) {
            kiln_status s = merge_pair(ctx, &t, k, &merged);
            if (s != KILN_OK)
                return s;
        }
    }
    *out = t;
    return KILN_OK;
}

kiln_status shape_tracker_replace_last(shape_ctx *ctx, const shape_tracker *in,
                                       const shape_view *last, shape_tracker *out) {
    SHAPE_CHECK(shape_check_view(ctx, last));
    SHAPE_CHECK(shape_check_tracker(ctx, in));
    shape_tracker t = *in;
    t.views[t.nviews - 1] = *last;
    return shape_tracker_simplify(ctx, &t, out);
}

kiln_status shape_tracker_reshape(shape_ctx *ctx, const shape_tracker *in, uint32_t ndim,
                                  const sym_node *const *sizes, shape_tracker *out) {
    SHAPE_CHECK(shape_check_tracker(ctx, in));
    shape_tracker t = *in;
    shape_view *last = &t.views[t.nviews - 1];
    bool ok;
    kiln_status s = shape_view_reshape(ctx, last, ndim, sizes, last, &ok);
    if (s != KILN_OK)
        return s;
    if (!ok) {
        if (t.nviews >= SHAPE_MAX_VIEWS)
            return shape_fail(ctx, KILN_ERROR_LIMIT_EXCEEDED, "reshape: more than %d views",
                              (int)SHAPE_MAX_VIEWS);
        shape_view *nv = &t.views[t.nviews];
        s = shape_view_contiguous(ctx, ndim, sizes, nv);
        if (s != KILN_OK)
            return s;
        shape_reshape_user(ctx, last, ndim, sizes, nv); /* what torch reports for the reshape */
        s = shape_finish(ctx, nv, nv);
        if (s != KILN_OK)
            return s;
        t.nviews++;
    }
    return shape_tracker_simplify(ctx, &t, out);
}
