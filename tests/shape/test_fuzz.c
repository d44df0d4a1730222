/* The brute-force checker: seeded random chains of movement ops on small shapes (negative and
 * zero strides from as_strided bases, masks from pad/shrink, symbolic sizes bound to several
 * values), each applied both to a shape_tracker and to an explicit array of storage indices
 * (-1 for padding). At every logical index the tracker's index and valid expressions are
 * evaluated and compared with the array; the extent, self-alias answer and to_movement_ops
 * rebuild are checked against it too. */
#include "shape_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

enum { CHAINS = 20000, MAX_OPS = 8 };

/* ---- the state: tracker + array ------------------------------------------------------------- */

typedef struct fz {
    shape_ctx *c;
    sym_ctx *s;
    shape_tracker t;
    sim a;
    bool dense_base;
    bool torch_view; /* every op so far is a view in PyTorch (NumPy for negative steps) */
    char log[2048];
    size_t loglen;
} fz;

static void logf_(fz *z, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(z->log + z->loglen, sizeof(z->log) - z->loglen, fmt, ap);
    va_end(ap);
    if (n > 0 && z->loglen + (size_t)n < sizeof(z->log))
        z->loglen += (size_t)n;
}

static const shape_view *last(fz *z) {
    return shape_tracker_last(&z->t);
}

static const sym_node *K(fz *z, int64_t v) {
    return sym_const(z->s, v);
}

/* Applies a view-level result to the tracker (the op replaced the last view). */
static bool commit_view(fz *z, kiln_status s, const shape_view *v) {
    if (s != KILN_OK)
        return false;
    shape_tracker t = z->t;
    if (shape_tracker_replace_last(z->c, &t, v, &z->t) != KILN_OK)
        fail_msg("simplify: %s (%s)", shape_ctx_message(z->c), z->log);
    return true;
}

/* ---- ops: each builds the tracker op and the array remap ----------------------------------- */

static void op_permute(fz *z) {
    uint32_t n = z->a.ndim;
    perm_arg p;
    for (uint32_t i = 0; i < SHAPE_MAX_DIMS; i++)
        p.p[i] = i < n ? (int32_t)i : -1;
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = rnd(i);
        int32_t t = p.p[i - 1];
        p.p[i - 1] = p.p[j];
        p.p[j] = t;
    }
    shape_view v;
    if (!commit_view(z, shape_view_permute(z->c, last(z), p.p, &v), &v))
        fail_msg("permute failed: %s", shape_ctx_message(z->c));
    int64_t ns[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < n; i++)
        ns[i] = z->a.shape[p.p[i]];
    /* map_perm writes oi[p[i]] = ni[i] for i < n only */
    perm_arg q = p;
    for (uint32_t i = n; i < SHAPE_MAX_DIMS; i++)
        q.p[i] = -1;
    sim_remap(&z->a, n, ns, map_perm, &q);
    logf_(z, "permute; ");
}

static void op_flip(fz *z) {
    if (z->a.ndim == 0)
        return;
    flip_arg f = {rnd(z->a.ndim), 0, z->a.ndim};
    f.n = z->a.shape[f.d];
    shape_view v;
    if (!commit_view(z, shape_view_flip(z->c, last(z), (int32_t)f.d, &v), &v))
        fail_msg("flip failed: %s", shape_ctx_message(z->c));
    sim_remap(&z->a, z->a.ndim, z->a.shape, map_flip, &f);
    logf_(z, "flip %u; ", f.d);
}

static void op_pad(fz *z) {
    uint32_t n = z->a.ndim;
    box_arg p = {.ndim = n};
    const sym_node *b[SHAPE_MAX_DIMS], *e[SHAPE_MAX_DIMS];
    int64_t ns[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < n; i++) {
        p.b[i] = rnd(3) == 0 ? rrange(0, 2) : 0;
        p.e[i] = rnd(3) == 0 ? rrange(0, 2) : 0;
        p.old[i] = z->a.shape[i];
        ns[i] = p.old[i] + p.b[i] + p.e[i];
        b[i] = K(z, p.b[i]), e[i] = K(z, p.e[i]);
    }
    if (numel(ns, n) > MAX_NUMEL)
        return;
    shape_view v;
    if (!commit_view(z, shape_view_pad(z->c, last(z), b, e, &v), &v))
        fail_msg("pad failed: %s", shape_ctx_message(z->c));
    sim_remap(&z->a, n, ns, map_pad, &p);
    z->torch_view = false; /* torch's pad copies */
    logf_(z, "pad; ");
}

/* An expression equal to x for the current sizes: constant, or size - (value - x). */
static const sym_node *rel(fz *z, uint32_t d, int64_t x) {
    const sym_node *sz = last(z)->shape[d];
    if (sym_is_const(sz, NULL))
        return K(z, x);
    return sym_add_c(z->s, sz, x - z->a.shape[d]);
}

static void op_shrink(fz *z) {
    uint32_t n = z->a.ndim;
    box_arg p = {.ndim = n};
    const sym_node *b[SHAPE_MAX_DIMS], *e[SHAPE_MAX_DIMS];
    int64_t ns[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < n; i++) {
        int64_t s = z->a.shape[i];
        p.b[i] = rnd(2) ? rrange(0, s) : 0;
        p.e[i] = rnd(2) ? rrange(p.b[i], s) : s;
        ns[i] = p.e[i] - p.b[i];
        b[i] = K(z, p.b[i]);
        e[i] = rel(z, i, p.e[i]);
    }
    shape_view v;
    if (!commit_view(z, shape_view_shrink(z->c, last(z), b, e, &v), &v))
        fail_msg("shrink failed: %s", shape_ctx_message(z->c));
    sim_remap(&z->a, n, ns, map_shrink, &p);
    logf_(z, "shrink; ");
}

static void op_slice(fz *z) {
    if (z->a.ndim == 0)
        return;
    uint32_t d = rnd(z->a.ndim);
    int64_t n = z->a.shape[d];
    shape_slice sl = {rrange(-n - 1, n + 1), rrange(-n - 1, n + 1), rrange(-3, 3), rnd(3) != 0,
                      rnd(3) != 0};
    if (sl.step == 0)
        sl.step = -1;
    shape_view v;
    if (!commit_view(z, shape_view_slice(z->c, last(z), (int32_t)d, &sl, &v), &v))
        fail_msg("slice failed: %s", shape_ctx_message(z->c));
    /* Python's semantics, written out independently of the library */
    int64_t lo = sl.step < 0 ? -1 : 0, hi = sl.step < 0 ? n - 1 : n;
    int64_t start = sl.step < 0 ? hi : lo, stop = sl.step < 0 ? lo : hi;
    if (sl.has_start)
        start = sl.start < 0 ? (sl.start + n < lo ? lo : sl.start + n)
                             : (sl.start > hi ? hi : sl.start);
    if (sl.has_stop)
        stop = sl.stop < 0 ? (sl.stop + n < lo ? lo : sl.stop + n) : (sl.stop > hi ? hi : sl.stop);
    int64_t cnt = 0;
    for (int64_t i = start; sl.step > 0 ? i < stop : i > stop; i += sl.step)
        cnt++;
    int64_t ns[SHAPE_MAX_DIMS];
    memcpy(ns, z->a.shape, sizeof(ns));
    ns[d] = cnt;
    slice_arg a = {d, z->a.ndim, start, sl.step};
    sim_remap(&z->a, z->a.ndim, ns, map_slice, &a);
    logf_(z, "slice d%u %lld:%lld:%lld; ", d, (long long)sl.start, (long long)sl.stop,
          (long long)sl.step);
}

/* reshape: the array keeps its row-major data. */
/* New sizes for a reshape, in ns (expressions) and nv (values); the count, or -1 to skip. */
typedef struct newsizes {
    const sym_node *ns[SHAPE_MAX_DIMS];
    int64_t nv[SHAPE_MAX_DIMS];
    uint32_t m;
} newsizes;

static void push_size(newsizes *o, const sym_node *n, int64_t v) {
    o->ns[o->m] = n, o->nv[o->m++] = v;
}

static bool sizes_merge(fz *z, newsizes *o) { /* two adjacent dims into one */
    uint32_t n = z->a.ndim, d = rnd(n > 1 ? n - 1 : 1);
    const shape_view *l = last(z);
    if (n < 2)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        if (i == d) {
            push_size(o, sym_mul(z->s, l->shape[i], l->shape[i + 1]),
                      z->a.shape[i] * z->a.shape[i + 1]);
            i++;
        } else {
            push_size(o, l->shape[i], z->a.shape[i]);
        }
    }
    return true;
}

static bool sizes_split(fz *z, newsizes *o) { /* a constant dim into two factors */
    uint32_t n = z->a.ndim, d = rnd(n ? n : 1);
    const shape_view *l = last(z);
    if (n == 0 || n >= SHAPE_MAX_DIMS - 1 || !sym_is_const(l->shape[d], NULL))
        return false;
    int64_t s = z->a.shape[d], f = 1;
    for (int64_t c = 2; c <= s; c++)
        if (s % c == 0 && rnd(2)) {
            f = c;
            break;
        }
    for (uint32_t i = 0; i < n; i++) {
        if (i == d) {
            push_size(o, K(z, f), f);
            push_size(o, K(z, s / f), s / f);
        } else {
            push_size(o, l->shape[i], z->a.shape[i]);
        }
    }
    return true;
}

static bool sizes_ones(fz *z, newsizes *o) { /* insert or drop size-1 dims */
    const shape_view *l = last(z);
    if (z->a.ndim >= SHAPE_MAX_DIMS - 1)
        return false;
    for (uint32_t i = 0; i < z->a.ndim; i++) {
        if (rnd(4) == 0 && o->m < SHAPE_MAX_DIMS - 2)
            push_size(o, K(z, 1), 1);
        if (z->a.shape[i] == 1 && rnd(2) && sym_is_const(l->shape[i], NULL))
            continue;
        push_size(o, l->shape[i], z->a.shape[i]);
    }
    return true;
}

static bool sizes_factor(fz *z, newsizes *o) { /* any factorisation (constants only) */
    for (uint32_t i = 0; i < z->a.ndim; i++)
        if (!sym_is_const(last(z)->shape[i], NULL))
            return false;
    int64_t t = z->a.n;
    if (t == 0) {
        int64_t r = rrange(1, 3);
        push_size(o, K(z, 0), 0);
        push_size(o, K(z, r), r);
        return true;
    }
    while (t > 1 && o->m < 5) {
        int64_t f = t;
        for (int64_t c = 2; c < t; c++)
            if (t % c == 0 && rnd(3) == 0) {
                f = c;
                break;
            }
        push_size(o, K(z, f), f);
        t /= f;
    }
    if (t > 1)
        push_size(o, K(z, t), t);
    return true;
}

static void op_reshape(fz *z) {
    newsizes o = {.m = 0};
    bool (*const pick[4])(fz *, newsizes *) = {sizes_merge, sizes_split, sizes_ones, sizes_factor};
    if (!pick[rnd(4)](z, &o))
        return;
    shape_tracker t;
    bool view = z->t.nviews == 1 && shape_view_torch_can_view(z->c, last(z), o.m, o.ns, NULL);
    kiln_status s = shape_tracker_reshape(z->c, &z->t, o.m, o.ns, &t);
    if (s == KILN_ERROR_LIMIT_EXCEEDED)
        return;
    z->torch_view = z->torch_view && view; /* else torch.reshape copies */
    if (s != KILN_OK)
        fail_msg("reshape failed: %s (%s)", shape_ctx_message(z->c), z->log);
    z->t = t;
    z->a.ndim = o.m;
    memcpy(z->a.shape, o.nv, o.m * sizeof(int64_t));
    logf_(z, "reshape to %u dims; ", o.m);
}

static void op_expand(fz *z) {
    uint32_t n = z->a.ndim;
    int64_t ns[SHAPE_MAX_DIMS];
    const sym_node *sz[SHAPE_MAX_DIMS];
    bool any = false;
    for (uint32_t i = 0; i < n; i++) {
        ns[i] = z->a.shape[i];
        sz[i] = last(z)->shape[i];
        if (z->a.shape[i] == 1 && sym_is_const(sz[i], NULL) && rnd(2)) {
            ns[i] = rrange(0, 3);
            sz[i] = K(z, ns[i]);
            any = true;
        }
    }
    if (!any || numel(ns, n) > MAX_NUMEL)
        return;
    shape_view v;
    if (!commit_view(z, shape_view_expand(z->c, last(z), sz, &v), &v))
        fail_msg("expand failed: %s", shape_ctx_message(z->c));
    sim o = z->a;
    o.n = numel(ns, n);
    memcpy(o.shape, ns, sizeof(ns));
    for (int64_t k = 0; k < o.n; k++) {
        int64_t idx[SHAPE_MAX_DIMS];
        unravel(ns, n, k, idx);
        for (uint32_t i = 0; i < n; i++)
            if (z->a.shape[i] == 1)
                idx[i] = 0;
        o.data[k] = z->a.data[ravel(z->a.shape, n, idx)];
    }
    z->a = o;
    logf_(z, "expand; ");
}

static void op_unsqueeze_squeeze(fz *z) {
    uint32_t n = z->a.ndim;
    shape_view v;
    if (rnd(2) && n < SHAPE_MAX_DIMS - 1) {
        uint32_t d = rnd(n + 1);
        if (!commit_view(z, shape_view_unsqueeze(z->c, last(z), (int32_t)d, &v), &v))
            fail_msg("unsqueeze failed");
        memmove(&z->a.shape[d + 1], &z->a.shape[d], (n - d) * sizeof(int64_t));
        z->a.shape[d] = 1;
        z->a.ndim++;
        logf_(z, "unsqueeze %u; ", d);
        return;
    }
    for (uint32_t d = 0; d < n; d++) {
        if (z->a.shape[d] != 1 || !sym_is_const(last(z)->shape[d], NULL))
            continue;
        kiln_status s = shape_view_squeeze(z->c, last(z), (int32_t)d, &v);
        if (s == KILN_ERROR_UNSUPPORTED)
            return;
        if (!commit_view(z, s, &v))
            fail_msg("squeeze failed");
        memmove(&z->a.shape[d], &z->a.shape[d + 1], (n - d - 1) * sizeof(int64_t));
        z->a.ndim--;
        logf_(z, "squeeze %u; ", d);
        return;
    }
}

static void op_select(fz *z) {
    uint32_t n = z->a.ndim;
    if (n == 0)
        return;
    uint32_t d = rnd(n);
    if (z->a.shape[d] == 0)
        return;
    int64_t idx = rrange(-z->a.shape[d], z->a.shape[d] - 1);
    shape_view v;
    kiln_status s = shape_view_select(z->c, last(z), (int32_t)d, K(z, idx), &v);
    if (s == KILN_ERROR_UNSUPPORTED)
        return;
    if (!commit_view(z, s, &v))
        fail_msg("select failed: %s", shape_ctx_message(z->c));
    sel_arg a = {d, n, idx < 0 ? idx + z->a.shape[d] : idx};
    int64_t ns[SHAPE_MAX_DIMS];
    for (uint32_t i = 0, j = 0; i < n; i++)
        if (i != d)
            ns[j++] = z->a.shape[i];
    sim_remap(&z->a, n - 1, ns, map_select, &a);
    logf_(z, "select d%u %lld; ", d, (long long)idx);
}

static void op_diagonal(fz *z) {
    uint32_t n = z->a.ndim;
    if (n < 2)
        return;
    uint32_t a = rnd(n), b = rnd(n - 1);
    if (b >= a)
        b++;
    int64_t off = rrange(-2, 2);
    shape_view v;
    if (!commit_view(z, shape_view_diagonal(z->c, last(z), off, (int32_t)a, (int32_t)b, &v), &v))
        fail_msg("diagonal failed: %s", shape_ctx_message(z->c));
    diag_arg g = {a, b, n, off < 0 ? -off : 0, off > 0 ? off : 0};
    int64_t ns[SHAPE_MAX_DIMS], len;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (i != a && i != b)
            ns[k++] = z->a.shape[i];
    len = z->a.shape[a] - g.r0 < z->a.shape[b] - g.c0 ? z->a.shape[a] - g.r0 : z->a.shape[b] - g.c0;
    ns[k] = len < 0 ? 0 : len;
    sim_remap(&z->a, n - 1, ns, map_diag, &g);
    logf_(z, "diagonal %u %u %lld; ", a, b, (long long)off);
}

static void op_unfold(fz *z) {
    uint32_t n = z->a.ndim;
    if (n == 0 || n >= SHAPE_MAX_DIMS - 1)
        return;
    uint32_t d = rnd(n);
    int64_t s = z->a.shape[d], size = rrange(0, s), step = rrange(1, 3);
    int64_t ns[SHAPE_MAX_DIMS];
    memcpy(ns, z->a.shape, sizeof(ns));
    ns[d] = (s - size) / step + 1;
    ns[n] = size;
    if (numel(ns, n + 1) > MAX_NUMEL)
        return;
    shape_view v;
    kiln_status st = shape_view_unfold(z->c, last(z), (int32_t)d, K(z, size), K(z, step), &v);
    if (st == KILN_ERROR_UNSUPPORTED)
        return;
    if (!commit_view(z, st, &v))
        fail_msg("unfold failed: %s", shape_ctx_message(z->c));
    unfold_arg u = {d, n, step};
    sim_remap(&z->a, n + 1, ns, map_unfold, &u);
    logf_(z, "unfold d%u %lld %lld; ", d, (long long)size, (long long)step);
}

/* ---- bases -------------------------------------------------------------------------------- */

/* A contiguous or as_strided base; one dim may be a bound Variable. */
static void make_base(fz *z, bool symbolic) {
    uint32_t n = 1 + rnd(4);
    int64_t shape[SHAPE_MAX_DIMS], st[SHAPE_MAX_DIMS];
    const sym_node *sz[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < n; i++) {
        shape[i] = rrange(1, n <= 2 ? 6 : 4);
        sz[i] = K(z, shape[i]);
    }
    if (symbolic) {
        uint32_t d = rnd(n);
        const sym_node *var = sym_var(z->s, "n", 1, 6);
        shape[d] = rrange(1, 6);
        sz[d] = sym_bind(z->s, var, shape[d]);
    }
    shape_view v;
    bool strided = !symbolic && rnd(2);
    if (strided) {
        int64_t lo = 0;
        for (uint32_t i = 0; i < n; i++) {
            st[i] = rrange(-6, 6);
            lo += st[i] < 0 ? st[i] * (shape[i] - 1) : 0;
        }
        int64_t off = -lo + rrange(0, 3);
        assert_int_equal(
            shape_view_as_strided(z->c, n, sz, st_c(z->s, 0, n, st), K(z, off), NULL, &v), KILN_OK);
        z->a.n = numel(shape, n);
        for (int64_t k = 0; k < z->a.n; k++) {
            int64_t idx[SHAPE_MAX_DIMS], a = off;
            unravel(shape, n, k, idx);
            for (uint32_t i = 0; i < n; i++)
                a += idx[i] * st[i];
            z->a.data[k] = a;
        }
    } else {
        assert_int_equal(shape_view_contiguous(z->c, n, sz, &v), KILN_OK);
        z->a.n = numel(shape, n);
        for (int64_t k = 0; k < z->a.n; k++)
            z->a.data[k] = k;
    }
    z->a.ndim = n;
    z->dense_base = !strided;
    z->torch_view = true;
    memcpy(z->a.shape, shape, n * sizeof(int64_t));
    shape_tracker_from_view(&v, &z->t);
    logf_(z, "base %s%s n=%u; ", strided ? "strided" : "contig", symbolic ? " sym" : "", n);
}

/* ---- checks ------------------------------------------------------------------------------- */

static int64_t check_index(fz *z) {
    const shape_view *l = last(z);
    uint32_t n = z->a.ndim;
    assert_int_equal(l->ndim, n);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(st_val(l->shape[i]), z->a.shape[i]);
    const sym_node *vars[SHAPE_MAX_DIMS], *ix, *ok;
    for (uint32_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "i%u_%lld", i, (long long)z->a.shape[i]);
        /* a Variable per dim, [0, size-1] (a size-1 dim gets a single-valued Variable); a
         * size-0 dim has no element to evaluate */
        vars[i] = z->a.shape[i] > 0 ? sym_var(z->s, name, 0, z->a.shape[i] - 1) : K(z, 0);
    }
    if (shape_tracker_index(z->c, &z->t, vars, &ix, &ok) != KILN_OK)
        fail_msg("index: %s / %s (%s) n=%u var0=%p shape0=%lld nviews=%u", shape_ctx_message(z->c),
                 sym_ctx_message(z->s), z->log, n, (const void *)vars[0], (long long)z->a.shape[0],
                 z->t.nviews);
    int64_t vals[SHAPE_MAX_DIMS];
    const sym_node *avars[SHAPE_MAX_DIMS + 4], *uix, *uok;
    int64_t avals[SHAPE_MAX_DIMS + 4];
    uint32_t na = 0;
    for (uint32_t i = 0; i < n; i++)
        if (z->a.shape[i] > 0)
            avars[na++] = vars[i];
    sym_assignment as = {avars, avals, na};
    /* the unbound tracker (a kernel's view) with the Variables assigned their bound values must
     * give the same elements */
    shape_tracker u;
    size_t nu = 0;
    assert_int_equal(shape_tracker_unbind(z->c, &z->t, &u, &avars[na], &avals[na], 4, &nu),
                     KILN_OK);
    assert_true(nu <= 4);
    assert_int_equal(shape_tracker_index(z->c, &u, vars, &uix, &uok), KILN_OK);
    sym_assignment asu = {avars, avals, na + nu};
    int64_t valid_count = 0;
    for (int64_t k = 0; k < z->a.n; k++) {
        unravel(z->a.shape, n, k, vals);
        for (uint32_t i = 0, j = 0; i < n; i++)
            if (z->a.shape[i] > 0)
                avals[j++] = vals[i];
        int64_t gi = 0, gv = 0;
        base_error err;
        base_error_clear(&err);
        assert_int_equal(sym_eval(ok, &as, &gv, &err), KILN_OK);
        if (gv)
            assert_int_equal(sym_eval(ix, &as, &gi, &err), KILN_OK);
        int64_t ui = 0, uv = 0;
        assert_int_equal(sym_eval(uok, &asu, &uv, &err), KILN_OK);
        if (uv)
            assert_int_equal(sym_eval(uix, &asu, &ui, &err), KILN_OK);
        if (uv != gv || ui != gi)
            fail_msg("unbound tracker differs at %lld: %s", (long long)k, z->log);
        int64_t want = z->a.data[k];
        if ((want >= 0) != (gv != 0) || (gv && gi != want)) {
            char b1[512], b2[512];
            sym_render(ix, b1, sizeof(b1));
            sym_render(ok, b2, sizeof(b2));
            fail_msg("mismatch at %lld: got (%lld, valid %lld) want %lld\nchain: %s\nidx %s\n"
                     "valid %s",
                     (long long)k, (long long)gi, (long long)gv, (long long)want, z->log, b1, b2);
        }
        valid_count += gv != 0;
    }
    return valid_count;
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

typedef struct stats {
    long chains, points, multiview, missed_merge, torch_checked, alias_yes, alias_none, alias_maybe,
        alias_exact, mops, sym;
} stats;

static void check_alias_extent(fz *z, stats *st) {
    int64_t vals[MAX_NUMEL * 4];
    int64_t m = 0;
    for (int64_t k = 0; k < z->a.n; k++)
        if (z->a.data[k] >= 0)
            vals[m++] = z->a.data[k];
    qsort(vals, (size_t)m, sizeof(int64_t), cmp64);
    bool dup = false;
    for (int64_t k = 1; k < m; k++)
        dup = dup || vals[k] == vals[k - 1];
    shape_alias al = shape_tracker_self_alias(z->c, &z->t);
    if (al == SHAPE_ALIAS_NONE && dup)
        fail_msg("claimed no alias, but aliases: %s", z->log);
    if (al == SHAPE_ALIAS_YES && !dup)
        fail_msg("claimed alias, but none: %s", z->log);
    st->alias_yes += al == SHAPE_ALIAS_YES;
    st->alias_none += al == SHAPE_ALIAS_NONE;
    st->alias_maybe += al == SHAPE_ALIAS_MAYBE;
    if (z->t.nviews != 1)
        return;
    if (z->dense_base) { /* movement ops from a dense tensor: decided from strides alone */
        shape_ctx_set_alias_enum_limit(z->c, 0);
        shape_alias exact = shape_view_self_alias(z->c, last(z));
        shape_ctx_set_alias_enum_limit(z->c, 1u << 16);
        if (exact == SHAPE_ALIAS_MAYBE || (exact == SHAPE_ALIAS_YES) != dup)
            fail_msg("alias analysis not exact (%d, dup %d): %s", (int)exact, dup, z->log);
        st->alias_exact++;
    }
    const sym_node *lo, *hi;
    bool empty;
    assert_int_equal(shape_view_extent(z->c, last(z), &lo, &hi, &empty), KILN_OK);
    if (empty != (m == 0))
        fail_msg("extent empty %d, valid elements %lld: %s", empty, (long long)m, z->log);
    if (m) {
        assert_int_equal(st_val(lo), vals[0]);
        assert_int_equal(st_val(hi), vals[m - 1]);
    }
}

/* While every op was a view in PyTorch, the strides and offset PyTorch would report address
 * exactly the elements of the array. */
static void check_torch_strides(fz *z, stats *st) {
    if (!z->torch_view)
        return;
    const shape_view *l = last(z);
    int64_t us[SHAPE_MAX_DIMS], uo = st_val(l->user_offset), idx[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < l->ndim; i++)
        us[i] = st_val(l->user_strides[i]);
    for (int64_t k = 0; k < z->a.n; k++) {
        unravel(z->a.shape, z->a.ndim, k, idx);
        int64_t a = uo;
        for (uint32_t i = 0; i < l->ndim; i++)
            a += idx[i] * us[i];
        if (a != z->a.data[k])
            fail_msg("user strides address %lld, want %lld at %lld: %s", (long long)a,
                     (long long)z->a.data[k], (long long)k, z->log);
    }
    st->torch_checked++;
}

static void check_mops(fz *z, stats *st) {
    if (z->t.nviews != 1)
        return;
    shape_op ops[SHAPE_MAX_OPS];
    uint32_t n;
    int64_t base;
    kiln_status s = shape_view_to_movement_ops(z->c, last(z), ops, SHAPE_MAX_OPS, &n, &base);
    if (s == KILN_ERROR_UNSUPPORTED)
        return;
    if (s != KILN_OK)
        fail_msg("to_movement_ops: %s (%s)", shape_ctx_message(z->c), z->log);
    st->mops++;
}

/* Whether some single view gives the same elements as the array (valid set a box, addresses
 * affine in it): how often a second view was kept although one would do. */
static bool one_view_exists(const sim *a) {
    int64_t lo[SHAPE_MAX_DIMS], hi[SHAPE_MAX_DIMS], idx[SHAPE_MAX_DIMS], cnt = 0;
    for (uint32_t i = 0; i < a->ndim; i++)
        lo[i] = INT64_MAX, hi[i] = -1;
    for (int64_t k = 0; k < a->n; k++) {
        if (a->data[k] < 0)
            continue;
        cnt++;
        unravel(a->shape, a->ndim, k, idx);
        for (uint32_t i = 0; i < a->ndim; i++)
            lo[i] = idx[i] < lo[i] ? idx[i] : lo[i], hi[i] = idx[i] > hi[i] ? idx[i] : hi[i];
    }
    if (cnt == 0)
        return a->ndim > 0; /* all padding: masks (0,0), but not for a scalar */
    int64_t box = 1, st[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < a->ndim; i++)
        box *= hi[i] - lo[i] + 1;
    if (box != cnt)
        return false;
    int64_t base = a->data[ravel(a->shape, a->ndim, lo)];
    for (uint32_t i = 0; i < a->ndim; i++) {
        memcpy(idx, lo, sizeof(idx));
        idx[i] += hi[i] > lo[i];
        st[i] = a->data[ravel(a->shape, a->ndim, idx)] - base;
    }
    for (int64_t k = 0; k < a->n; k++) {
        if (a->data[k] < 0)
            continue;
        unravel(a->shape, a->ndim, k, idx);
        int64_t want = base;
        for (uint32_t i = 0; i < a->ndim; i++)
            want += (idx[i] - lo[i]) * st[i];
        if (want != a->data[k])
            return false;
    }
    return true;
}

static void dump_tracker(const shape_tracker *t) {
    for (uint32_t k = 0; k < t->nviews; k++) {
        const shape_view *v = &t->views[k];
        char line[1024];
        size_t n = 0;
        n += (size_t)snprintf(line + n, sizeof(line) - n, "  view %u: shape (", k);
        for (uint32_t i = 0; i < v->ndim; i++)
            n += sym_render(v->shape[i], line + n, sizeof(line) - n),
                n += (size_t)snprintf(line + n, sizeof(line) - n, ",");
        n += (size_t)snprintf(line + n, sizeof(line) - n, ") strides (");
        for (uint32_t i = 0; i < v->ndim; i++)
            n += sym_render(v->strides[i], line + n, sizeof(line) - n),
                n += (size_t)snprintf(line + n, sizeof(line) - n, ",");
        n += (size_t)snprintf(line + n, sizeof(line) - n, ") offset ");
        n += sym_render(v->offset, line + n, sizeof(line) - n);
        if (v->masked) {
            n += (size_t)snprintf(line + n, sizeof(line) - n, " mask ");
            for (uint32_t i = 0; i < v->ndim && n < sizeof(line) - 64; i++) {
                n += (size_t)snprintf(line + n, sizeof(line) - n, "(");
                n += sym_render(v->mask_begin[i], line + n, sizeof(line) - n);
                n += (size_t)snprintf(line + n, sizeof(line) - n, ",");
                n += sym_render(v->mask_end[i], line + n, sizeof(line) - n);
                n += (size_t)snprintf(line + n, sizeof(line) - n, ")");
            }
        }
        print_message("%s\n", line);
    }
}

static void run_chain(fz *z, stats *st, bool symbolic) {
    z->loglen = 0;
    z->log[0] = 0;
    make_base(z, symbolic);
    uint32_t nops = 1 + rnd(MAX_OPS);
    for (uint32_t k = 0; k < nops; k++) {
        switch (rnd(12)) {
        case 0:
            op_permute(z);
            break;
        case 1:
            op_flip(z);
            break;
        case 2:
            op_pad(z);
            break;
        case 3:
            op_shrink(z);
            break;
        case 4:
            op_slice(z);
            break;
        case 5:
        case 6:
            op_reshape(z);
            break;
        case 7:
            op_expand(z);
            break;
        case 8:
            op_unsqueeze_squeeze(z);
            break;
        case 9:
            op_select(z);
            break;
        case 10:
            op_diagonal(z);
            break;
        default:
            op_unfold(z);
            break;
        }
    }
    st->points += z->a.n;
    st->multiview += z->t.nviews > 1;
    if (z->t.nviews > 1 && one_view_exists(&z->a)) {
        st->missed_merge++;
        if (getenv("KILN_SHAPE_FUZZ_VERBOSE"))
            print_message("one view would do: %s\n", z->log), dump_tracker(&z->t);
    }
    check_index(z);
    check_alias_extent(z, st);
    check_mops(z, st);
    check_torch_strides(z, st);
    st->chains++;
    st->sym += symbolic;
}

static void test_shape_fuzz_chains_match_explicit_arrays(void **state) {
    ST_ENV(state);
    (void)S;
    fz *z = calloc(1, sizeof(*z));
    assert_non_null(z);
    z->c = C;
    z->s = env->sym;
    stats st = {0};
    const char *env_seed = getenv("KILN_SHAPE_FUZZ_SEED");
    uint64_t seed = env_seed ? strtoull(env_seed, NULL, 10) : 20261122u;
    for (int i = 0; i < CHAINS; i++) {
        rng_state = seed * 1000003u + (uint64_t)i;
        run_chain(z, &st, i % 3 == 2);
    }
    print_message(
        "chains %ld (symbolic %ld), points %ld, multi-view %ld (one view would do: %ld), "
        "alias yes/none/maybe "
        "%ld/%ld/%ld (decided from strides alone %ld), rebuilt %ld, torch strides checked %ld\n",
        st.chains, st.sym, st.points, st.multiview, st.missed_merge, st.alias_yes, st.alias_none,
        st.alias_maybe, st.alias_exact, st.mops, st.torch_checked);
    assert_true(st.chains >= 10000);
    free(z);
}

/* ---- merges: random two-view trackers, simplified, give the same elements ---------------------
 */

static bool random_view(fz *z, int64_t storage, shape_view *v, bool pad) {
    uint32_t n = 1 + rnd(3);
    int64_t shape[SHAPE_MAX_DIMS], st[SHAPE_MAX_DIMS], lo = 0, hi = 0;
    for (uint32_t i = 0; i < n; i++) {
        shape[i] = rrange(1, 4);
        st[i] = rrange(-4, 4);
        lo += st[i] < 0 ? st[i] * (shape[i] - 1) : 0;
        hi += st[i] > 0 ? st[i] * (shape[i] - 1) : 0;
    }
    if (storage >= 0 && hi - lo >= storage)
        return false;
    int64_t off = -lo + (storage >= 0 ? rrange(0, storage - 1 - (hi - lo)) : rrange(0, 2));
    if (shape_view_as_strided(z->c, n, st_c(z->s, 0, n, shape), st_c(z->s, 1, n, st), K(z, off),
                              storage >= 0 ? K(z, storage) : NULL, v) != KILN_OK)
        return false;
    if (pad && rnd(2)) {
        const sym_node *b[SHAPE_MAX_DIMS], *e[SHAPE_MAX_DIMS];
        for (uint32_t i = 0; i < n; i++)
            b[i] = K(z, rnd(3) == 0 ? rrange(0, 2) : 0),
            e[i] = K(z, rnd(3) == 0 ? rrange(0, 2) : 0);
        assert_int_equal(shape_view_pad(z->c, v, b, e, v), KILN_OK);
    }
    return true;
}

static void eval_tracker_all(fz *z, const shape_tracker *t, int64_t *out, int64_t *n) {
    const shape_view *l = shape_tracker_last(t);
    int64_t shape[SHAPE_MAX_DIMS], vals[SHAPE_MAX_DIMS], avals[SHAPE_MAX_DIMS];
    const sym_node *vars[SHAPE_MAX_DIMS], *avars[SHAPE_MAX_DIMS], *ix, *ok;
    uint32_t na = 0;
    for (uint32_t i = 0; i < l->ndim; i++) {
        char name[32];
        shape[i] = st_val(l->shape[i]);
        snprintf(name, sizeof(name), "i%u_%lld", i, (long long)shape[i]);
        vars[i] = shape[i] > 0 ? sym_var(z->s, name, 0, shape[i] - 1) : K(z, 0);
        if (shape[i] > 0)
            avars[na++] = vars[i];
    }
    assert_int_equal(shape_tracker_index(z->c, t, vars, &ix, &ok), KILN_OK);
    *n = numel(shape, l->ndim);
    sym_assignment as = {avars, avals, na};
    for (int64_t k = 0; k < *n; k++) {
        unravel(shape, l->ndim, k, vals);
        for (uint32_t i = 0, j = 0; i < l->ndim; i++)
            if (shape[i] > 0)
                avals[j++] = vals[i];
        int64_t gv, gi = -1;
        base_error err;
        base_error_clear(&err);
        assert_int_equal(sym_eval(ok, &as, &gv, &err), KILN_OK);
        if (gv)
            assert_int_equal(sym_eval(ix, &as, &gi, &err), KILN_OK);
        out[k] = gi;
    }
}

static void test_shape_fuzz_merges_preserve_elements(void **state) {
    ST_ENV(state);
    fz *z = calloc(1, sizeof(*z));
    assert_non_null(z);
    z->c = C, z->s = S;
    long tried = 0, merged = 0;
    static int64_t a[MAX_NUMEL], b[MAX_NUMEL];
    for (int i = 0; tried < 10000; i++) {
        rng_state = 777u * 1000003u + (uint64_t)i;
        shape_tracker t = {.nviews = 2}, s;
        if (!random_view(z, -1, &t.views[0], true))
            continue;
        const sym_node *n0 = shape_view_numel(C, &t.views[0]);
        if (!random_view(z, st_val(n0), &t.views[1], true))
            continue;
        tried++;
        assert_int_equal(shape_tracker_simplify(C, &t, &s), KILN_OK);
        merged += s.nviews == 1;
        int64_t na, nb;
        eval_tracker_all(z, &t, a, &na);
        eval_tracker_all(z, &s, b, &nb);
        assert_int_equal(na, nb);
        if (memcmp(a, b, (size_t)na * sizeof(int64_t)) != 0)
            fail_msg("merge changed the elements (pair %d)", i);
    }
    print_message("pairs %ld, merged into one view %ld\n", tried, merged);
    assert_true(merged > tried / 4);
    free(z);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shape_fuzz_chains_match_explicit_arrays, st_setup,
                                        st_teardown),
        cmocka_unit_test_setup_teardown(test_shape_fuzz_merges_preserve_elements, st_setup,
                                        st_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
