/* Neural-network ops: conv2d with bias, stride, padding, dilation and groups; max and average
 * pooling; clamp; gather and one_hot; the cross-entropy and mean-squared-error losses.
 *
 * Every op here is a composite: its _impl checks the arguments (reading the operands' views,
 * so that a bad argument is reported under the call's own name) and then builds the result
 * only from public kiln_ ops, so that whatever records public ops (autograd) sees each step.
 * No op adds a node kind or a kernel of its own. */
#include "eng.h"

#include <math.h>
#include <stdio.h>

static const shape_view *view_of(kiln_tensor *t) {
    return shape_tracker_last(ENG_ST(t));
}

static uint32_t ndim_of(kiln_tensor *t) {
    return view_of(t)->ndim;
}

static kiln_dtype dtype_of(kiln_tensor *t) {
    return eng_dtype(ENG_BASE(t)->type);
}

static bool is_float(kiln_dtype d) {
    return d == KILN_F32 || d == KILN_F16;
}

static bool is_integer(kiln_dtype d) {
    return !is_float(d) && d != KILN_BOOL;
}

/* t's shape for a message, "(2, n, 3)". */
static const char *shape_str(kiln_tensor *t, char *buf, size_t cap) {
    return eng_shape_render(view_of(t)->ndim, view_of(t)->shape, buf, cap);
}

/* Records "call: a is (..), b is (..): why" as KILN_ERROR_SHAPE_MISMATCH. */
static void *fail_shapes(const char *call, const char *na, kiln_tensor *a, const char *nb,
                         kiln_tensor *b, const char *why) {
    char sa[128], sb[128];
    return eng_fail(ENG_CTX(a), KILN_ERROR_SHAPE_MISMATCH, "%s: %s is %s, %s is %s: %s", call, na,
                    shape_str(a, sa, sizeof sa), nb, shape_str(b, sb, sizeof sb), why);
}

/* Whether dim d of t has the constant size *out. */
static bool const_size(kiln_tensor *t, uint32_t d, int64_t *out) {
    return sym_is_const(view_of(t)->shape[d], out);
}

/* t reshaped to its first `keep` sizes followed by the `extra` sizes given (a symbolic size
 * stays symbolic: the sizes are t's own expressions). */
static kiln_tensor *reshape_tail(kiln_tensor *t, uint32_t keep, uint32_t extra,
                                 const kiln_expr *const *tail) {
    if (!t)
        return NULL;
    const kiln_expr *shape[SHAPE_MAX_DIMS];
    for (uint32_t d = 0; d < keep; d++)
        shape[d] = kiln_tensor_size_expr(t, d);
    for (uint32_t d = 0; d < extra; d++)
        shape[keep + d] = tail[d];
    return kiln_reshape_sym(t, keep + extra, shape);
}

/* Whether a and b broadcast (right-aligned: equal sizes, or one of them 1). */
static bool broadcastable(kiln_tensor *a, kiln_tensor *b) {
    const shape_view *va = view_of(a), *vb = view_of(b);
    for (uint32_t i = 1; i <= va->ndim && i <= vb->ndim; i++) {
        const sym_node *x = va->shape[va->ndim - i], *y = vb->shape[vb->ndim - i];
        int64_t v;
        if (x != y && !(sym_is_const(x, &v) && v == 1) && !(sym_is_const(y, &v) && v == 1))
            return false;
    }
    return true;
}

/* ---- convolution ---- */

typedef struct conv_params {
    int64_t stride[2], padding[2], dilation[2], groups;
    int64_t kernel[2], extent[2]; /* KH, KW and the dilated window: dilation (K - 1) + 1 */
} conv_params;

/* Options with torch's defaults for zero fields; false (and an error) for a negative one. */
static bool conv_options(kiln_context *ctx, const kiln_conv2d_options *o, conv_params *p) {
    kiln_conv2d_options d = {{0, 0}, {0, 0}, {0, 0}, 0};
    if (o)
        d = *o;
    const char *names[3] = {"stride", "padding", "dilation"};
    const int64_t *in[3] = {d.stride, d.padding, d.dilation};
    int64_t *out[3] = {p->stride, p->padding, p->dilation};
    for (int f = 0; f < 3; f++) {
        for (int i = 0; i < 2; i++) {
            if (in[f][i] < 0)
                return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE,
                                "kiln_conv2d_ex: %s[%d] is %lld (needs >= 0; 0 takes torch's "
                                "default)",
                                names[f], i, (long long)in[f][i]) != NULL;
            out[f][i] = in[f][i] == 0 && f != 1 ? 1 : in[f][i]; /* padding's default is 0 */
        }
    }
    if (d.groups < 0)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE,
                        "kiln_conv2d_ex: groups is %lld (needs >= 0; 0 takes torch's default 1)",
                        (long long)d.groups) != NULL;
    p->groups = d.groups ? d.groups : 1;
    return true;
}

/* The channel counts fit: C = groups * w's C / groups, O a multiple of groups, bias (O). */
static bool conv_check_channels(kiln_tensor *x, kiln_tensor *w, kiln_tensor *bias,
                                const conv_params *p) {
    const char *call = "kiln_conv2d_ex";
    const sym_node *c = view_of(x)->shape[1], *wc = view_of(w)->shape[1];
    if (p->groups == 1 && c != wc)
        return fail_shapes(call, "x", x, "w", w,
                           "x's channels differ from w's dim 1 (C / groups, groups 1)") != NULL;
    if (p->groups > 1) {
        int64_t nc, nwc, no;
        char why[160];
        if (!const_size(x, 1, &nc) || !const_size(w, 1, &nwc) || !const_size(w, 0, &no))
            return fail_shapes(call, "x", x, "w", w, "groups > 1 needs constant channel counts") !=
                   NULL;
        if (nc % p->groups != 0 || nc / p->groups != nwc || no % p->groups != 0) {
            snprintf(why, sizeof why,
                     "with groups %lld, x's %lld channels and w's %lld outputs must be multiples "
                     "of groups and w's dim 1 must be %lld / groups",
                     (long long)p->groups, (long long)nc, (long long)no, (long long)nc);
            return fail_shapes(call, "x", x, "w", w, why) != NULL;
        }
    }
    if (bias && (ndim_of(bias) != 1 || view_of(bias)->shape[0] != view_of(w)->shape[0]))
        return fail_shapes(call, "bias", bias, "w", w,
                           "bias needs one dim of w's output channels (O)") != NULL;
    return true;
}

/* The window extents fit the padded input: H + 2 padding >= dilation (KH - 1) + 1 for every
 * value H may take (likewise W). */
static bool conv_check_sizes(kiln_tensor *x, kiln_tensor *w, conv_params *p) {
    kiln_context *ctx = ENG_CTX(x);
    for (int i = 0; i < 2; i++) {
        if (!const_size(w, 2 + (uint32_t)i, &p->kernel[i]))
            return fail_shapes("kiln_conv2d_ex", "x", x, "w", w,
                               "the kernel sizes (KH, KW) must be constant") != NULL;
        int64_t span, padded;
        if (!base_mul_i64(p->dilation[i], p->kernel[i] - 1, &span) ||
            !base_add_i64(span, 1, &p->extent[i]) || !base_mul_i64(p->padding[i], 2, &padded) ||
            !base_add_i64(padded, sym_vmin(view_of(x)->shape[2 + i]), &padded))
            return eng_fail(ctx, KILN_ERROR_OVERFLOW,
                            "kiln_conv2d_ex: dilation[%d] %lld or padding[%d] %lld overflows", i,
                            (long long)p->dilation[i], i, (long long)p->padding[i]) != NULL;
        if (p->kernel[i] == 0 || padded < p->extent[i]) {
            char why[160];
            snprintf(why, sizeof why,
                     "the padded input (%lld along dim %d at least) is smaller than the dilated "
                     "kernel (%lld), or the kernel is empty",
                     (long long)padded, 2 + i, (long long)p->extent[i]);
            return fail_shapes("kiln_conv2d_ex", "x", x, "w", w, why) != NULL;
        }
    }
    return true;
}

/* x (N, C, H, W) padded by (ph, pw) on both sides of its last two dims: a view (kiln_unfold
 * takes the windows of a padded dim as a second view over it, nothing copied). */
static kiln_tensor *pad_spatial(kiln_tensor *x, int64_t ph, int64_t pw) {
    if (!ph && !pw)
        return x;
    int64_t pad[2 * SHAPE_MAX_DIMS] = {0};
    uint32_t nd = ndim_of(x);
    pad[2 * (nd - 2)] = pad[2 * (nd - 2) + 1] = ph;
    pad[2 * (nd - 1)] = pad[2 * (nd - 1) + 1] = pw;
    return kiln_pad(x, pad);
}

/* The windows (..., OH, OW, KH, KW) of the last two dims of p: unfolds of the dilated extent,
 * every dilation-th element of each kept (a strided slice: still a view). */
static kiln_tensor *windows(kiln_tensor *p, const int64_t *extent, const int64_t *stride,
                            const int64_t *dilation) {
    if (!p)
        return NULL;
    int32_t nd = (int32_t)ndim_of(p);
    kiln_tensor *win = kiln_unfold(p, nd - 2, extent[0], stride[0]);
    if (dilation[0] > 1)
        win = kiln_slice(win, nd, 0, INT64_MAX, dilation[0]);
    win = kiln_unfold(win, nd - 1, extent[1], stride[1]);
    if (dilation[1] > 1)
        win = kiln_slice(win, nd + 1, 0, INT64_MAX, dilation[1]);
    return win;
}

/* t reshaped to sizes that are products of t's own size expressions: dims[i] lists the dims of
 * t (ndims[i] of them) whose product is size i of the result. */
static kiln_tensor *reshape_groups(kiln_tensor *t, uint32_t n, const uint32_t *ndims,
                                   const uint32_t (*dims)[4]) {
    if (!t)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    const kiln_expr *shape[SHAPE_MAX_DIMS];
    for (uint32_t i = 0; i < n; i++) {
        const kiln_expr *e = kiln_int(ctx, 1);
        for (uint32_t k = 0; k < ndims[i]; k++)
            e = kiln_expr_mul(ctx, e, kiln_tensor_size_expr(t, dims[i][k]));
        shape[i] = e;
    }
    return kiln_reshape_sym(t, n, shape);
}

/* The per-image window matrices (C KH KW, OH OW) from windows permuted to (N, C, KH, KW, OH,
 * OW), read in place by every product over them on every device: the forward's (the padding a
 * select per load of the product's right operand; conv2's forward in the training example 2.0 +
 * 6.3 -> 6.6 ms on lavapipe against a window copy and a product over it) and the weight
 * gradient's (on a CPU in tiles whose loop steps by image rows, lower.c eng_kernel_tile: conv2's
 * window copy and weight gradient in the training step on lavapipe 3.6 + 8.4 -> 6.0-6.4 ms). A
 * GPU laid them out for the weight gradient until 2026-11-27: on an H200 that copy and its
 * product took 0.034 ms of the training step where the product in place takes 0.037, and for
 * bench_ops' constant batch of 64 (then merged rows, below) the weight gradient's split product
 * took 0.33 ms of device time where the per-image product in place takes 0.04. */
static kiln_tensor *window_matrix(kiln_tensor *win) {
    if (!win)
        return NULL;
    return reshape_groups(win, 3, (const uint32_t[]){1, 3, 2},
                          (const uint32_t[][4]){{0}, {1, 2, 3}, {4, 5}});
}

static kiln_tensor *tap_impl(kiln_tensor *out) {
    return out ? eng_view_new(ENG_CTX(out), out, eng_tracker_keep(ENG_CTX(out), ENG_ST(out)))
               : NULL;
}

/* out, the convolution of x (stride 1, one group) by w, recorded as the op that gives x its
 * gradient (autograd.c conv_input_grad: a convolution of out's gradient with the flipped
 * weights, its windows read in place) where the product's own rule would make the gradient's
 * window matrix and fold it back (conv2's input gradient in the training example: a product
 * of 144 x 196 per image and a fold of nine masked loads per element). The windows that made
 * it were x's value without its history; w's gradient comes from the rule of the product out,
 * which the op passes its gradient to. */
static kiln_tensor *conv_input_tap(kiln_tensor *out, kiln_tensor *x, kiln_tensor *w,
                                   const conv_params *p) {
    const int64_t ints[4] = {p->padding[0], p->padding[1], p->dilation[0], p->dilation[1]};
    ENG_OP("kiln_conv2d_ex", ENG_AG(.op = ENG_AG_CONV_INPUT, .ints = ints, .nints = 4),
           tap_impl(out), out, x, w);
}

/* The per-image products of windows permuted to (N, C, KH, KW, OH, OW) by w: (O, C KH KW) @
 * (C KH KW, OH OW) for each image, (N, O, OH OW), the windows read in place (window_matrix).
 * Where the windows' tiles are whole rows (a CPU's, ctx->window_rows), the weights are laid
 * out transposed, (C KH KW, O) (a copy of a few thousand floats): at each tap the product's
 * tile reads its column of output channels as vectors (lower.c column_run), where rows of
 * (O, C KH KW) gave one load per channel (a kernel row's taps per step, or nine taps, too few
 * for a step of eight). conv1 of the training example on lavapipe: forward 3.08 -> 2.18, 3.16
 * -> 2.06, 1.84 -> 1.44 ms (alternating runs), the inference forward alike, for a 0.08 ms
 * copy; conv2's input gradient in tiles of whole rows 6.2 -> 5.3 ms. Weights stored that way
 * already are read as they are. A GPU reads the weights as they are: its tiles of 4 x 4 gain
 * nothing from the copy, and each kernel costs its host more than its device (docs/gpus.md). */
static kiln_tensor *image_products(kiln_tensor *permuted, kiln_tensor *w) {
    kiln_tensor *cols = window_matrix(permuted);
    kiln_tensor *wm =
        reshape_groups(w, 2, (const uint32_t[]){1, 3}, (const uint32_t[][4]){{0}, {1, 2, 3}});
    kiln_tensor *wt = kiln_transpose(wm, 0, 1);
    if (wt && ENG_CTX(wt)->window_rows)
        wm = kiln_transpose(shape_tracker_contiguous(ENG_ST(wt)) ? wt : kiln_contiguous(wt), 0, 1);
    return kiln_matmul(wm, cols); /* (N, O, OH OW) */
}

/* conv2d per image or as im2col and a matrix product (docs/convolution.md). Per image (a
 * symbolic batch, and a constant one of stride 1): w as (O, C KH KW) times each image's windows
 * as (C KH KW, OH OW) read in place (window_matrix), the output NCHW as stored (what the bias,
 * relu and pools then read contiguously), and x's gradient for stride 1 a convolution of the
 * output's gradient (conv_input_tap). Otherwise (a constant batch of another stride) the
 * windows (N, C, OH, OW, KH, KW) laid out as rows of a (N OH OW, C KH KW) matrix materialised
 * once (kiln_contiguous: a kernel of its own, so the product's register-tiled loop reads plain
 * loads; read in place as the left operand's rows, conv2's forward took 8.8 ms on lavapipe
 * against 2.1 + 4.2), multiplied by w as a (C KH KW, O) matrix; the backward pass is then
 * matrix products too (the weight gradient a long reduction over N OH OW, the input gradient a
 * product followed by folding the windows back). Groups: a batch of G products over (G, N OH
 * OW, C/G KH KW). */
static kiln_tensor *conv2d_ex_impl(kiln_tensor *x, kiln_tensor *w, kiln_tensor *bias,
                                   const kiln_conv2d_options *options) {
    if (!x || !w)
        return NULL;
    kiln_context *ctx = ENG_CTX(x);
    conv_params p;
    if (!conv_options(ctx, options, &p))
        return NULL;
    if (ndim_of(x) != 4 || ndim_of(w) != 4)
        return fail_shapes("kiln_conv2d_ex", "x", x, "w", w,
                           "x needs 4 dims (N, C, H, W), w 4 dims (O, C / groups, KH, KW)");
    if (!is_float(dtype_of(x)) || !is_float(dtype_of(w)) || (bias && !is_float(dtype_of(bias))))
        return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH,
                        "kiln_conv2d_ex: x (%s), w (%s) and bias must be floating tensors (as "
                        "torch)",
                        kiln_dtype_name(dtype_of(x)), kiln_dtype_name(dtype_of(w)));
    if (!conv_check_channels(x, w, bias, &p) || !conv_check_sizes(x, w, &p))
        return NULL;
    int64_t batch, h, wd;
    /* Per image: a symbolic batch, and a constant one of stride 1 (its windows read in place,
     * on a CPU in tiles of whole rows, lower.c: bench_ops' conv2d forward 1.67 -> 0.82 of its
     * GLSL reference's time on lavapipe, the input gradient as a convolution 2.20 -> 0.97, the
     * weight gradient 1.88 -> 1.70, then 0.83-0.87 with its windows read in place too and
     * pairs; on an H200 the input gradient 13.1 -> 5.9 and the weight gradient 7.2 -> 2.3 of
     * their references' times, the forward 3.2 -> 3.6, all three host-bound there). Other
     * strides keep the merged rows: their input gradient is a fold either way. */
    bool per_image =
        p.groups == 1 && (!const_size(x, 0, &batch) || (p.stride[0] == 1 && p.stride[1] == 1));
    /* conv_input_tap where it applies and something needs a gradient: x's gradient from it (the
     * windows then read x's value only) */
    bool tap = per_image && p.stride[0] == 1 && p.stride[1] == 1 && const_size(x, 2, &h) &&
               const_size(x, 3, &wd) && (eng_ag_records(ctx, x) || eng_ag_records(ctx, w));
    kiln_tensor *win = windows(pad_spatial(tap ? kiln_detach(x) : x, p.padding[0], p.padding[1]),
                               p.extent, p.stride, p.dilation); /* (N, C, OH, OW, KH, KW) */
    kiln_tensor *out;
    if (per_image) {
        /* per image, (O, C KH KW) @ (C KH KW, OH OW), products of constant sizes whatever the
         * batch (tiled as the constant case), the output NCHW as stored */
        out = image_products(kiln_permute(win, (const int32_t[]){0, 1, 4, 5, 2, 3}), w);
        const kiln_expr *dims[4] = {kiln_tensor_size_expr(win, 0), kiln_tensor_size_expr(w, 0),
                                    kiln_tensor_size_expr(win, 2), kiln_tensor_size_expr(win, 3)};
        out = kiln_reshape_sym(out, 4, dims);
        if (tap)
            out = conv_input_tap(out, x, kiln_detach(w), &p);
    } else if (p.groups == 1) {
        /* rows (N, OH, OW), columns (C, KH, KW) */
        kiln_tensor *cols = kiln_contiguous(kiln_permute(win, (const int32_t[]){0, 2, 3, 1, 4, 5}));
        cols = reshape_groups(cols, 2, (const uint32_t[]){3, 3},
                              (const uint32_t[][4]){{0, 1, 2}, {3, 4, 5}});
        kiln_tensor *wm =
            reshape_groups(w, 2, (const uint32_t[]){1, 3}, (const uint32_t[][4]){{0}, {1, 2, 3}});
        out = kiln_matmul(cols, kiln_transpose(wm, 0, 1)); /* (N OH OW, O) */
        const kiln_expr *dims[4] = {kiln_tensor_size_expr(win, 0), kiln_tensor_size_expr(win, 2),
                                    kiln_tensor_size_expr(win, 3), kiln_tensor_size_expr(w, 0)};
        out = kiln_permute(kiln_reshape_sym(out, 4, dims), (const int32_t[]){0, 3, 1, 2});
    } else {
        int64_t c, o;
        const_size(x, 1, &c);
        const_size(w, 0, &o);
        /* (N, G, OH, OW, KH, KW, C/G) -> (G, N, OH, OW, C/G, KH, KW) */
        win = kiln_unfold(win, 1, c / p.groups, c / p.groups);
        kiln_tensor *cols =
            kiln_contiguous(kiln_permute(win, (const int32_t[]){1, 0, 2, 3, 6, 4, 5}));
        cols = reshape_groups(cols, 3, (const uint32_t[]){1, 3, 3},
                              (const uint32_t[][4]){{0}, {1, 2, 3}, {4, 5, 6}});
        /* w (G, C/G, KH, KW, O/G) -> (G, C/G KH KW, O/G) */
        kiln_tensor *wk = kiln_unfold(w, 0, o / p.groups, o / p.groups);
        wk = reshape_groups(kiln_contiguous(wk), 3, (const uint32_t[]){1, 3, 1},
                            (const uint32_t[][4]){{0}, {1, 2, 3}, {4}});
        out = kiln_matmul(cols, wk); /* (G, N OH OW, O/G) */
        const kiln_expr *dims[5] = {kiln_int(ctx, p.groups), kiln_tensor_size_expr(win, 0),
                                    kiln_tensor_size_expr(win, 2), kiln_tensor_size_expr(win, 3),
                                    kiln_int(ctx, o / p.groups)};
        out = kiln_permute(kiln_reshape_sym(out, 5, dims), (const int32_t[]){1, 0, 4, 2, 3});
        const kiln_expr *nchw[4] = {dims[1], kiln_tensor_size_expr(w, 0), dims[2], dims[3]};
        out = kiln_reshape_sym(out, 4, nchw);
    }
    if (bias)
        out = kiln_add(out, kiln_unsqueeze(kiln_unsqueeze(bias, -1), -1));
    return out;
}

/* ---- pooling ---- */

/* The checks of both pools: (N, C, H, W) or (C, H, W) floats, kernel >= 1, stride >= 0 (0 is
 * kernel), 0 <= padding <= kernel / 2 (torch's limit), windows that fit the padded input. */
static bool pool_check(kiln_tensor *x, const char *call, int64_t kernel, int64_t *stride,
                       int64_t padding) {
    kiln_context *ctx = ENG_CTX(x);
    char sx[128];
    if (ndim_of(x) != 3 && ndim_of(x) != 4)
        return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                        "%s: x is %s: it needs 4 dims (N, C, H, W) or 3 (C, H, W)", call,
                        shape_str(x, sx, sizeof sx)) != NULL;
    if (!is_float(dtype_of(x)))
        return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH,
                        "%s: x is %s: it must be a floating tensor (as torch)", call,
                        kiln_dtype_name(dtype_of(x))) != NULL;
    if (kernel < 1 || *stride < 0 || padding < 0 || padding > kernel / 2)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE,
                        "%s: kernel %lld, stride %lld, padding %lld (needs kernel >= 1, stride >= "
                        "0 (0: kernel), 0 <= padding <= kernel / 2)",
                        call, (long long)kernel, (long long)*stride, (long long)padding) != NULL;
    int64_t area;
    if (!base_mul_i64(kernel, kernel, &area))
        return eng_fail(ctx, KILN_ERROR_OVERFLOW, "%s: kernel %lld: kernel^2 overflows int64", call,
                        (long long)kernel) != NULL;
    if (*stride == 0)
        *stride = kernel;
    for (uint32_t d = ndim_of(x) - 2; d < ndim_of(x); d++) {
        int64_t padded; /* padding <= kernel / 2: 2 padding fits */
        if (base_add_i64(sym_vmin(view_of(x)->shape[d]), 2 * padding, &padded) && padded < kernel)
            return eng_fail(ctx, KILN_ERROR_SHAPE_MISMATCH,
                            "%s: x is %s: dim %u padded by %lld on each side is smaller than the "
                            "kernel %lld",
                            call, shape_str(x, sx, sizeof sx), d, (long long)padding,
                            (long long)kernel) != NULL;
    }
    return true;
}

/* x padded with -inf on its last two dims (a where over a padded mask: a node of its own). */
static kiln_tensor *pad_minus_inf(kiln_tensor *x, int64_t padding) {
    if (!padding)
        return x;
    kiln_context *ctx = ENG_CTX(x);
    uint32_t nd = ndim_of(x);
    const kiln_expr *hw[2] = {kiln_tensor_size_expr(x, nd - 2), kiln_tensor_size_expr(x, nd - 1)};
    int64_t pad[2 * SHAPE_MAX_DIMS] = {0};
    for (uint32_t i = 2 * (nd - 2); i < 2 * nd; i++)
        pad[i] = padding;
    kiln_tensor *inside = kiln_pad(kiln_full_sym(ctx, KILN_BOOL, 2, hw, 1), pad + 2 * (nd - 2));
    return kiln_where(inside, kiln_pad(x, pad), kiln_scalar(ctx, dtype_of(x), -(double)INFINITY));
}

/* Each window's elements flattened to a last dim of kernel^2; the output is each window's
 * maximum (a NaN is the maximum), whose gradient reaches the window's first maximum only, as
 * torch's does (eng_max_first: the forward is one max reduction; the backward finds the first
 * maximum's index, an arg reduction, from the saved windows). */
static kiln_tensor *max_pool2d_impl(kiln_tensor *x, int64_t kernel, int64_t stride,
                                    int64_t padding) {
    if (!x || !pool_check(x, "kiln_max_pool2d", kernel, &stride, padding))
        return NULL;
    kiln_context *ctx = ENG_CTX(x);
    uint32_t nd = ndim_of(x);
    const int64_t k[2] = {kernel, kernel}, s[2] = {stride, stride}, one[2] = {1, 1};
    kiln_tensor *win = windows(pad_minus_inf(x, padding), k, s, one); /* (..., OH, OW, K, K) */
    const kiln_expr *area = kiln_int(ctx, kernel * kernel);
    kiln_tensor *flat = reshape_tail(win, nd, 1, &area); /* (..., OH, OW, K * K) */
    return eng_max_first("kiln_max_pool2d", flat);
}

/* The mean of each window, zero padding counted (count_include_pad, torch's default). */
static kiln_tensor *avg_pool2d_impl(kiln_tensor *x, int64_t kernel, int64_t stride,
                                    int64_t padding) {
    if (!x || !pool_check(x, "kiln_avg_pool2d", kernel, &stride, padding))
        return NULL;
    const int64_t k[2] = {kernel, kernel}, s[2] = {stride, stride}, one[2] = {1, 1};
    kiln_tensor *win = windows(pad_spatial(x, padding, padding), k, s, one);
    return kiln_mean(win, 2, (const int32_t[]){-2, -1}, false);
}

/* ---- clamp ---- */

/* The dtype the bounds and the result take (torch's promotion of a tensor with a Python
 * number): a float tensor keeps its dtype; an integer one too when every bound is integral
 * (and fits it: else an error), f32 otherwise. */
static bool clamp_dtype(kiln_tensor *t, double lo, double hi, kiln_dtype *out) {
    kiln_dtype d = dtype_of(t);
    *out = d;
    if (is_float(d))
        return true;
    const double bounds[2] = {lo, hi};
    for (int i = 0; i < 2; i++) {
        if (!isnan(bounds[i]) && (!isfinite(bounds[i]) || bounds[i] != trunc(bounds[i])))
            *out = KILN_F32;
    }
    for (int i = 0; i < 2 && *out == d; i++) {
        if (!isnan(bounds[i]) &&
            !eng_value_fits(ENG_CTX(t), "kiln_clamp", eng_ir_type(d), bounds[i]))
            return false;
    }
    return true;
}

/* lo = where(x < min, min, x), then where(lo > max, max, lo): min(max(x, min), max) as torch
 * computes it (max wins when min > max), and the gradient passes exactly where min <= x <= max
 * (each where passes it on where it keeps x). */
static kiln_tensor *clamp_impl(kiln_tensor *t, double min, double max) {
    if (!t)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    if (dtype_of(t) == KILN_BOOL)
        return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH,
                        "kiln_clamp: not defined for bool (as torch)");
    if (isnan(min) && isnan(max))
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                        "kiln_clamp: min and max are both NaN (no bound): at least one is needed "
                        "(as torch.clamp)");
    kiln_dtype d;
    if (!clamp_dtype(t, min, max, &d))
        return NULL;
    kiln_tensor *x = kiln_cast(t, d);
    if (!isnan(min)) {
        kiln_tensor *lo = kiln_scalar(ctx, d, min);
        x = kiln_where(kiln_lt(x, lo), lo, x);
    }
    if (!isnan(max)) {
        kiln_tensor *hi = kiln_scalar(ctx, d, max);
        x = kiln_where(kiln_gt(x, hi), hi, x);
    }
    return x;
}

/* ---- gather and one_hot ---- */

/* The dtype class indices are compared in: i64 where the values need it, else i32 (no 64-bit
 * arithmetic on the device). */
static kiln_dtype index_dtype(kiln_dtype d, int64_t limit) {
    return d == KILN_I64 || d == KILN_U32 || limit > INT32_MAX ? KILN_I64 : KILN_I32;
}

/* t narrowed to index's size along every dim but dim (torch lets index be smaller there). */
static kiln_tensor *gather_narrow(kiln_tensor *t, uint32_t dim, kiln_tensor *index) {
    kiln_context *ctx = ENG_CTX(t);
    for (uint32_t d = 0; d < ndim_of(t) && t; d++) {
        const sym_node *ts = view_of(t)->shape[d], *is = view_of(index)->shape[d];
        if (d == dim || ts == is)
            continue;
        if (sym_vmax(is) > sym_vmin(ts)) {
            char why[96];
            snprintf(why, sizeof why, "index's dim %u may be larger than t's", d);
            return fail_shapes("kiln_gather", "t", t, "index", index, why);
        }
        t = kiln_narrow_sym(t, (int32_t)d, kiln_int(ctx, 0), kiln_tensor_size_expr(index, d));
    }
    return t;
}

/* out[.., i, ..] = sum over s of where(index[.., i, ..] == s, t[.., s, ..], 0): the index
 * compared with an arange over dim, so nothing is ever read outside t; a negative index counts
 * from the end, one outside [-size, size) matches nothing and gives 0. */
static kiln_tensor *gather_impl(kiln_tensor *t, int32_t dim, kiln_tensor *index) {
    if (!t || !index)
        return NULL;
    kiln_context *ctx = ENG_CTX(t);
    kiln_dtype it = dtype_of(index);
    if (it != KILN_I32 && it != KILN_I64)
        return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH,
                        "kiln_gather: index is %s: it must be i32 or i64", kiln_dtype_name(it));
    if (ndim_of(t) != ndim_of(index))
        return fail_shapes("kiln_gather", "t", t, "index", index, "index needs t's number of dims");
    int32_t nd = (int32_t)ndim_of(t);
    if (nd == 0) /* a 0-d gather as a 1-d one */
        return kiln_squeeze(gather_impl(kiln_unsqueeze(t, 0), 0, kiln_unsqueeze(index, 0)), 0);
    if (dim < -nd || dim >= nd)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE,
                        "kiln_gather: dim %d is out of range for %d "
                        "dims",
                        dim, nd);
    uint32_t d = (uint32_t)(dim < 0 ? dim + nd : dim);
    kiln_tensor *src = gather_narrow(t, d, index);
    if (!src)
        return NULL;
    const kiln_expr *size = kiln_tensor_size_expr(t, d);
    kiln_tensor *at = kiln_add(index, kiln_scalar_expr(ctx, it, size));
    kiln_tensor *norm = kiln_where(kiln_lt(index, kiln_scalar(ctx, it, 0)), at, index);
    kiln_tensor *mask = kiln_eq(kiln_unsqueeze(norm, -1), kiln_arange_sym(ctx, it, size));
    /* src with dim moved last, and a size-1 dim in its place: (.., 1, .., size). */
    int32_t perm[SHAPE_MAX_DIMS];
    for (int32_t i = 0, j = 0; i < nd; i++) {
        if (i != (int32_t)d)
            perm[j++] = i;
    }
    perm[nd - 1] = (int32_t)d;
    kiln_tensor *moved = kiln_unsqueeze(kiln_permute(src, perm), (int32_t)d);
    kiln_tensor *picked = kiln_where(mask, moved, kiln_scalar(ctx, dtype_of(t), 0));
    /* One term at most is not zero: an integer sum needs no i64 (kiln_sum's widening), which
     * devices without 64-bit integers lack. */
    kiln_tensor *out = is_integer(dtype_of(t)) || dtype_of(t) == KILN_BOOL
                           ? eng_sum_unwidened(picked, -1)
                           : kiln_sum(picked, 1, (const int32_t[]){-1}, false);
    return kiln_cast(out, dtype_of(t));
}

static kiln_tensor *one_hot_impl(kiln_tensor *index, int64_t classes, kiln_dtype dtype) {
    if (!index)
        return NULL;
    kiln_context *ctx = ENG_CTX(index);
    if (!is_integer(dtype_of(index)))
        return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH,
                        "kiln_one_hot: index is %s: it must be an integer tensor",
                        kiln_dtype_name(dtype_of(index)));
    if (classes < 1)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE, "kiln_one_hot: classes is %lld (needs >= 1)",
                        (long long)classes);
    if (!eng_dtype_valid(dtype))
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_one_hot: unknown dtype %d",
                        (int)dtype);
    kiln_dtype wt = index_dtype(dtype_of(index), classes);
    kiln_tensor *hot = kiln_eq(kiln_unsqueeze(kiln_cast(index, wt), -1),
                               kiln_arange(ctx, wt, 0, (double)classes, 1));
    return kiln_cast(hot, dtype);
}

/* ---- losses ---- */

/* -mean over N of log_softmax(logits)[i, labels[i]]: each row's log-probability picked by a
 * mask of labels against an arange over C (a label outside [0, C) picks nothing: 0), all of
 * them summed in one reduction and divided by N, a value computed in the kernel (a symbolic N
 * compiles once). */
static kiln_tensor *cross_entropy_impl(kiln_tensor *logits, kiln_tensor *labels) {
    if (!logits || !labels)
        return NULL;
    kiln_context *ctx = ENG_CTX(logits);
    if (ndim_of(logits) != 2 || ndim_of(labels) != 1 ||
        view_of(logits)->shape[0] != view_of(labels)->shape[0])
        return fail_shapes("kiln_cross_entropy", "logits", logits, "labels", labels,
                           "logits needs 2 dims (N, C) and labels 1 dim (N)");
    if (!is_float(dtype_of(logits)) || !is_integer(dtype_of(labels)))
        return eng_fail(ctx, KILN_ERROR_DTYPE_MISMATCH,
                        "kiln_cross_entropy: logits is %s, labels %s: logits must be floating, "
                        "labels integer",
                        kiln_dtype_name(dtype_of(logits)), kiln_dtype_name(dtype_of(labels)));
    kiln_tensor *logp = kiln_log_softmax(logits, 1);
    kiln_dtype wt = index_dtype(dtype_of(labels), sym_vmax(view_of(logits)->shape[1]));
    kiln_tensor *classes = kiln_arange_sym(ctx, wt, kiln_tensor_size_expr(logits, 1));
    kiln_tensor *mask = kiln_eq(kiln_unsqueeze(kiln_cast(labels, wt), 1), classes);
    kiln_tensor *picked = kiln_where(mask, logp, kiln_scalar(ctx, dtype_of(logits), 0));
    kiln_tensor *count = kiln_scalar_expr(ctx, dtype_of(logits), kiln_tensor_size_expr(logits, 0));
    return kiln_neg(kiln_div(kiln_sum(picked, 0, NULL, false), count));
}

static kiln_tensor *mse_loss_impl(kiln_tensor *a, kiln_tensor *b) {
    if (!a || !b)
        return NULL;
    if (!broadcastable(a, b))
        return fail_shapes("kiln_mse_loss", "a", a, "b", b, "they do not broadcast");
    if (!is_float(dtype_of(a)) && !is_float(dtype_of(b)))
        return eng_fail(ENG_CTX(a), KILN_ERROR_DTYPE_MISMATCH,
                        "kiln_mse_loss: a is %s, b %s: one must be floating (as torch)",
                        kiln_dtype_name(dtype_of(a)), kiln_dtype_name(dtype_of(b)));
    kiln_tensor *d = kiln_sub(a, b);
    return kiln_mean(kiln_mul(d, d), 0, NULL, false);
}

/* ---- the public entry points: checked handles, intermediates released ---------------- */

kiln_tensor *kiln_conv2d_ex(kiln_tensor *x, kiln_tensor *w, kiln_tensor *bias,
                            const kiln_conv2d_options *options) {
    if (bias) {
        ENG_ENTRY("kiln_conv2d_ex", conv2d_ex_impl(x, w, bias, options), x, w, bias);
    }
    ENG_ENTRY("kiln_conv2d_ex", conv2d_ex_impl(x, w, NULL, options), x, w);
}

kiln_tensor *kiln_max_pool2d(kiln_tensor *x, int64_t kernel, int64_t stride, int64_t padding) {
    ENG_ENTRY("kiln_max_pool2d", max_pool2d_impl(x, kernel, stride, padding), x);
}

kiln_tensor *kiln_avg_pool2d(kiln_tensor *x, int64_t kernel, int64_t stride, int64_t padding) {
    ENG_ENTRY("kiln_avg_pool2d", avg_pool2d_impl(x, kernel, stride, padding), x);
}

kiln_tensor *kiln_clamp(kiln_tensor *t, double min, double max) {
    ENG_ENTRY("kiln_clamp", clamp_impl(t, min, max), t);
}

kiln_tensor *kiln_gather(kiln_tensor *t, int32_t dim, kiln_tensor *index) {
    ENG_ENTRY("kiln_gather", gather_impl(t, dim, index), t, index);
}

kiln_tensor *kiln_one_hot(kiln_tensor *index, int64_t classes, kiln_dtype dtype) {
    ENG_ENTRY("kiln_one_hot", one_hot_impl(index, classes, dtype), index);
}

kiln_tensor *kiln_cross_entropy(kiln_tensor *logits, kiln_tensor *labels) {
    ENG_ENTRY("kiln_cross_entropy", cross_entropy_impl(logits, labels), logits, labels);
}

kiln_tensor *kiln_mse_loss(kiln_tensor *a, kiln_tensor *b) {
    ENG_ENTRY("kiln_mse_loss", mse_loss_impl(a, b), a, b);
}
