/* Reshape within one view, and PyTorch's rule for which reshapes are views.
 *
 * The view is cut into chunks of dimensions that address storage as one run (stride[i] ==
 * size[i+1] * stride[i+1]; a size-1 dimension or one whose mask admits one index joins its
 * right neighbour). Each chunk is then split into the new dimensions from the right, the way
 * ATen's computeStride does. A masked view also needs its mask to be a box in the new shape;
 * that part works on constants only (a symbolic mask gives "needs a second view"). */
#include "shape_internal.h"

#include <string.h>

typedef struct chunk {
    const sym_node *size;   /* product of the chunk's sizes */
    const sym_node *stride; /* stride of its innermost dimension */
    const sym_node *real;   /* the part of size the stride applies to (the rest is masked to 1) */
} chunk;

static bool mask_len1(shape_ctx *ctx, const shape_view *v, uint32_t i) {
    return v->masked && shape_is(sym_sub(ctx->sym, v->mask_end[i], v->mask_begin[i]), 1);
}

/* The chunks of v, outermost first; returns their count. */
static uint32_t merge_chunks(shape_ctx *ctx, const shape_view *v, chunk *ch) {
    sym_ctx *sc = ctx->sym;
    uint32_t n = 0;
    bool merging = false;
    for (uint32_t i = 0; i < v->ndim; i++) {
        const sym_node *s = v->shape[i], *st = v->strides[i];
        if (i > 0 && shape_is(s, 1))
            continue;
        if (n == 0) {
            ch[n++] = (chunk){s, st, shape_is(st, 0) ? shape_k(ctx, 0) : s};
        } else if (merging || ch[n - 1].stride == sym_mul(sc, s, st)) {
            chunk *c = &ch[n - 1];
            c->real = merging ? s : sym_mul(sc, c->real, s);
            c->size = sym_mul(sc, c->size, s);
            c->stride = st;
        } else {
            ch[n++] = (chunk){s, st, s};
        }
        merging = v->masked ? mask_len1(ctx, v, i) : shape_is(s, 1);
    }
    return n;
}

/* New strides from the chunks; false when the new shape cuts a chunk. */
static bool contract(shape_ctx *ctx, const chunk *ch, uint32_t nch, uint32_t ndim,
                     const sym_node *const *sizes, const sym_node **strides) {
    sym_ctx *sc = ctx->sym;
    uint32_t j = ndim;
    for (uint32_t c = nch; c-- > 0;) {
        const sym_node *acc = shape_k(ctx, 1), *st = ch[c].stride;
        while (acc != ch[c].size && !shape_prove_eq(ctx, acc, ch[c].size)) {
            if (j == 0 || shape_prove_lt(ctx, ch[c].size, acc))
                return false;
            j--;
            strides[j] = sym_mul(sc, st, acc);
            acc = sym_mul(sc, acc, sizes[j]);
            if (!acc)
                return false;
            if (ch[c].real != ch[c].size && shape_prove_le(ctx, ch[c].real, acc))
                st = shape_k(ctx, 0);
        }
    }
    for (; j > 0; j--) {
        if (!shape_is(sizes[j - 1], 1))
            return false;
        strides[j - 1] = shape_k(ctx, 0);
    }
    return true;
}

/* ---- the mask of a reshape (constants) --------------------------------------------------------
 */

typedef struct rcursor {
    const int64_t *v;
    uint32_t n;
    int64_t fill;
} rcursor;

static int64_t rnext(rcursor *c) {
    return c->n ? c->v[--c->n] : c->fill;
}

/* Old mask (constants) to new mask; false when the mask is not a box in the new shape. */
static bool reshape_mask(const int64_t *os, const int64_t *ob, const int64_t *oe, uint32_t on,
                         const int64_t *ns, uint32_t nn, int64_t *nb, int64_t *ne) {
    rcursor shp = {os, on, 1}, bs = {ob, on, 0}, es = {oe, on, 1}, nw = {ns, nn, 1};
    int64_t curr = 1, old = rnext(&shp), nd = rnext(&nw), l = rnext(&bs), r = rnext(&es);
    uint32_t out = nn;
    while (out > 0) {
        int64_t next;
        if (__builtin_mul_overflow(nd, curr, &next) || next <= 0 || l >= r)
            return false;
        if (old == next) {
            out--;
            nb[out] = l / curr;
            ne[out] = (r - 1) / curr + 1;
            curr = 1, old = rnext(&shp), nd = rnext(&nw), l = rnext(&bs), r = rnext(&es);
        } else if (old > next) {
            if (old % next != 0)
                return false;
            if ((l % next != 0 || r % next != 0) && l / next != (r - 1) / next)
                return false;
            out--;
            nb[out] = l % next / curr;
            ne[out] = (r - 1) % next / curr + 1;
            curr = next, nd = rnext(&nw);
        } else {
            int64_t b2 = rnext(&bs), e2 = rnext(&es), s2 = rnext(&shp);
            if (!(l == 0 && r == old) && e2 - b2 != 1)
                return false;
            int64_t nl, nr, no;
            if (__builtin_mul_overflow(b2, old, &nl) || __builtin_mul_overflow(e2 - 1, old, &nr) ||
                __builtin_mul_overflow(old, s2, &no))
                return false;
            l = nl + l, r = nr + r, old = no;
        }
    }
    return true;
}

static bool consts(const sym_node *const *in, uint32_t n, int64_t *out) {
    for (uint32_t i = 0; i < n; i++)
        if (!sym_is_const(in[i], &out[i]))
            return false;
    return true;
}

/* Fills the new mask and the offset correction of a masked reshape. */
static bool masked_reshape(shape_ctx *ctx, const shape_view *in, uint32_t ndim,
                           const sym_node *const *sizes, const sym_node *const *strides,
                           shape_view *v) {
    int64_t os[SHAPE_MAX_DIMS], ob[SHAPE_MAX_DIMS], oe[SHAPE_MAX_DIMS], ns[SHAPE_MAX_DIMS];
    int64_t nb[SHAPE_MAX_DIMS], ne[SHAPE_MAX_DIMS];
    if (!shape_all_const(in) || !consts(sizes, ndim, ns))
        return false;
    consts(in->shape, in->ndim, os);
    consts(in->mask_begin, in->ndim, ob);
    consts(in->mask_end, in->ndim, oe);
    if (!reshape_mask(os, ob, oe, in->ndim, ns, ndim, nb, ne))
        return false;
    sym_ctx *sc = ctx->sym;
    const sym_node *off = in->offset;
    for (uint32_t i = 0; i < in->ndim; i++)
        off = sym_add(sc, off, sym_mul(sc, in->mask_begin[i], in->strides[i]));
    v->masked = true;
    for (uint32_t i = 0; i < ndim; i++) {
        v->mask_begin[i] = shape_k(ctx, nb[i]);
        v->mask_end[i] = shape_k(ctx, ne[i]);
        off = sym_sub(sc, off, sym_mul_c(sc, strides[i], nb[i]));
    }
    v->offset = off;
    return true;
}

/* ---- PyTorch's view rule ------------------------------------------------------------------------
 */

/* ATen's computeStride over constants: false when torch.view would fail (or on overflow). */
static bool compute_stride(const int64_t *os, const int64_t *ost, uint32_t on, const int64_t *ns,
                           uint32_t nn, int64_t *nst) {
    int64_t numel = 1;
    for (uint32_t i = 0; i < on; i++)
        if (__builtin_mul_overflow(numel, os[i], &numel))
            return false;
    if (on == 0 || numel == 0) { /* 0-d: all 1; numel 0: contiguous with sizes clamped to >= 1 */
        int64_t acc = 1;
        for (uint32_t i = nn; i-- > 0;) {
            nst[i] = on == 0 ? 1 : acc;
            if (on && __builtin_mul_overflow(acc, ns[i] > 1 ? ns[i] : 1, &acc))
                return false;
        }
        return true;
    }
    int64_t view_d = (int64_t)nn - 1, base = ost[on - 1], tnumel = 1, vnumel = 1, t;
    for (int64_t td = (int64_t)on - 1; td >= 0; td--) {
        if (__builtin_mul_overflow(tnumel, os[td], &tnumel))
            return false;
        bool cut = td == 0 || (os[td - 1] != 1 &&
                               (__builtin_mul_overflow(tnumel, base, &t) || ost[td - 1] != t));
        if (!cut)
            continue;
        while (view_d >= 0 && (vnumel < tnumel || ns[view_d] == 1)) {
            if (__builtin_mul_overflow(vnumel, base, &nst[view_d]) ||
                __builtin_mul_overflow(vnumel, ns[view_d], &vnumel))
                return false;
            view_d--;
        }
        if (vnumel != tnumel)
            return false;
        if (td > 0) {
            base = ost[td - 1];
            tnumel = vnumel = 1;
        }
    }
    return view_d == -1;
}

static bool values(const sym_node *const *in, uint32_t n, int64_t *out) {
    for (uint32_t i = 0; i < n; i++)
        if (!shape_value(in[i], &out[i]))
            return false;
    return true;
}

bool shape_view_torch_can_view(shape_ctx *ctx, const shape_view *in, uint32_t ndim,
                               const sym_node *const *sizes, const sym_node **strides_out) {
    int64_t os[SHAPE_MAX_DIMS], ost[SHAPE_MAX_DIMS], ns[SHAPE_MAX_DIMS], nst[SHAPE_MAX_DIMS];
    if (ndim > SHAPE_MAX_DIMS || !values(in->shape, in->ndim, os) ||
        !values(in->user_strides, in->ndim, ost) || !values(sizes, ndim, ns))
        return false;
    if (!compute_stride(os, ost, in->ndim, ns, ndim, nst))
        return false;
    for (uint32_t i = 0; strides_out && i < ndim; i++)
        strides_out[i] = shape_k(ctx, nst[i]);
    return true;
}

/* ---- reshape ----------------------------------------------------------------------------------
 */

static kiln_status check_numel(shape_ctx *ctx, const shape_view *in, uint32_t ndim,
                               const sym_node *const *sizes) {
    const sym_node *a = shape_view_numel(ctx, in), *b = shape_k(ctx, 1);
    for (uint32_t i = 0; i < ndim; i++) {
        if (!sizes[i])
            return shape_null(ctx, "reshape: size %u is NULL", i);
        if (shape_refute_le(ctx, shape_k(ctx, 0), sizes[i]))
            return shape_fail(ctx, KILN_ERROR_OUT_OF_RANGE, "size %u is negative", i);
        b = sym_mul(ctx->sym, b, sizes[i]);
    }
    if (!a || !b)
        return shape_sym_status(ctx);
    int64_t x, y;
    if (shape_prove_eq(ctx, a, b) || (shape_value(a, &x) && shape_value(b, &y) && x == y))
        return KILN_OK;
    char have[64], want[64];
    sym_render(a, have, sizeof have);
    sym_render(b, want, sizeof want);
    return shape_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                      "%s elements cannot be reshaped to %s (or are not provably as many)", have,
                      want);
}

static bool same_shape(const shape_view *in, uint32_t ndim, const sym_node *const *sizes) {
    if (in->ndim != ndim)
        return false;
    for (uint32_t i = 0; i < ndim; i++)
        if (in->shape[i] != sizes[i])
            return false;
    return true;
}

static bool any_zero(const shape_view *v) {
    for (uint32_t i = 0; i < v->ndim; i++)
        if (shape_is(v->shape[i], 0))
            return true;
    return false;
}

static bool mask_empty(const shape_view *v) {
    return v->masked && v->ndim > 0 && shape_is(v->mask_end[0], 0);
}

/* A reshape that only inserts or removes size-1 dims keeps every other dim as it is (works
 * with symbolic sizes and masks). False when it is not such a reshape. */
static bool reshape_ones(shape_ctx *ctx, const shape_view *in, uint32_t ndim,
                         const sym_node *const *sizes, shape_view *v) {
    uint32_t j = 0;
    for (uint32_t i = 0; i < ndim; i++) {
        if (shape_is(sizes[i], 1)) {
            v->strides[i] = shape_k(ctx, 0);
            v->mask_begin[i] = shape_k(ctx, 0), v->mask_end[i] = shape_k(ctx, 1);
            continue;
        }
        for (; j < in->ndim && shape_is(in->shape[j], 1); j++)
            if (in->masked && !(shape_is(in->mask_begin[j], 0) && shape_is(in->mask_end[j], 1)))
                return false;
        if (j >= in->ndim || in->shape[j] != sizes[i])
            return false;
        v->strides[i] = in->strides[j];
        v->mask_begin[i] = in->mask_begin[j], v->mask_end[i] = in->mask_end[j];
        j++;
    }
    for (; j < in->ndim; j++)
        if (!shape_is(in->shape[j], 1) ||
            (in->masked && !(shape_is(in->mask_begin[j], 0) && shape_is(in->mask_end[j], 1))))
            return false;
    v->masked = in->masked;
    if (!v->masked)
        memset(v->mask_begin, 0, sizeof(v->mask_begin)),
            memset(v->mask_end, 0, sizeof(v->mask_end));
    v->offset = in->offset;
    return true;
}

/* Same rank, every size equal to the old one by value (bound Variables at their values): the
 * new sizes replace the old ones, strides and mask kept (tinygrad's rule for a symbolic
 * reshape of a view; the binding asserts the equality). */
static bool reshape_rename(const shape_view *in, uint32_t ndim, const sym_node *const *sizes,
                           shape_view *v) {
    if (in->ndim != ndim)
        return false;
    for (uint32_t i = 0; i < ndim; i++) {
        int64_t a, b;
        if (sizes[i] != in->shape[i] &&
            !(shape_value(sizes[i], &a) && shape_value(in->shape[i], &b) && a == b))
            return false;
    }
    memcpy(v->strides, in->strides, sizeof(v->strides));
    v->offset = in->offset;
    v->masked = in->masked;
    for (uint32_t i = 0; in->masked && i < ndim; i++) {
        v->mask_begin[i] = in->mask_begin[i];
        v->mask_end[i] = in->mask_end[i] == in->shape[i] ? sizes[i] : in->mask_end[i];
    }
    return true;
}

/* The view part of a reshape; false when one view cannot express it. */
static bool reshape_view(shape_ctx *ctx, const shape_view *in, uint32_t ndim,
                         const sym_node *const *sizes, shape_view *v) {
    memset(v, 0, sizeof(*v));
    v->ndim = ndim;
    memcpy(v->shape, sizes, ndim * sizeof(*sizes));
    if (any_zero(in) || in->contiguous) {
        shape_contig_strides(ctx, ndim, v->shape, false, v->strides);
        v->offset = shape_k(ctx, 0);
        return true;
    }
    if (mask_empty(in)) { /* all padding: any strides, every mask (0,0) */
        if (ndim == 0)
            return false;
        v->masked = true;
        for (uint32_t i = 0; i < ndim; i++) {
            v->strides[i] = v->mask_begin[i] = v->mask_end[i] = shape_k(ctx, 0);
        }
        v->offset = shape_k(ctx, 0);
        return true;
    }
    if (reshape_ones(ctx, in, ndim, sizes, v) || reshape_rename(in, ndim, sizes, v))
        return true;
    memset(v->mask_begin, 0, sizeof(v->mask_begin));
    memset(v->mask_end, 0, sizeof(v->mask_end));
    chunk ch[SHAPE_MAX_DIMS];
    uint32_t nch = merge_chunks(ctx, in, ch);
    if (!contract(ctx, ch, nch, ndim, sizes, v->strides))
        return false;
    v->offset = in->offset;
    return !in->masked || masked_reshape(ctx, in, ndim, sizes, v->strides, v);
}

void shape_reshape_user(shape_ctx *ctx, const shape_view *in, uint32_t ndim,
                        const sym_node *const *sizes, shape_view *v) {
    if (shape_view_torch_can_view(ctx, in, ndim, sizes, v->user_strides)) {
        v->user_offset = in->user_offset;
        return;
    }
    shape_user_fresh(ctx, v); /* torch.reshape copies: a new contiguous tensor */
}

kiln_status shape_view_reshape(shape_ctx *ctx, const shape_view *in, uint32_t ndim,
                               const sym_node *const *sizes, shape_view *out, bool *ok) {
    SHAPE_CHECK(shape_check_view(ctx, in));
    *ok = false;
    if (ndim > SHAPE_MAX_DIMS)
        return shape_fail(ctx, KILN_ERROR_LIMIT_EXCEEDED, "reshape: %u dimensions", ndim);
    kiln_status s = check_numel(ctx, in, ndim, sizes);
    if (s != KILN_OK)
        return s;
    if (same_shape(in, ndim, sizes)) {
        /* The view is unchanged, but PyTorch recomputes the strides it reports (computeStride
         * gives a size-1 dim the stride its neighbours imply). */
        shape_view v = *in;
        shape_reshape_user(ctx, in, ndim, sizes, &v);
        *out = v;
        *ok = true;
        return KILN_OK;
    }
    shape_view v;
    if (!reshape_view(ctx, in, ndim, sizes, &v))
        return shape_sym_status(ctx);
    shape_reshape_user(ctx, in, ndim, sizes, &v);
    shape_canon(ctx, &v);
    s = shape_finish(ctx, &v, out);
    *ok = s == KILN_OK;
    return s;
}
