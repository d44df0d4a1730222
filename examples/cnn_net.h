/* examples/cnn_net.h: the small convolutional network of examples/cnn.c, built with Kiln's
 * public API (also run by tests/engine/test_cnn.c against NumPy's output). Batch CNN_N = 8:
 *
 *     x    (N, H, W, C) channels-last data, read as (N, C, H, W) through kiln_permute (a view)
 *     h1   relu(conv2d(x, w1, b1, stride 1, padding 1))             (N, C1, H, W)
 *     h2   relu(conv2d(h1, w2, b2, stride 1, padding 1)), realized   (N, C2, H, W)
 *     p    2x2 max pooling: kiln_as_strided windows of h2's storage  (N, C2, H/2, W/2, 2, 2)
 *          reduced by kiln_max over the two window dims
 *     out  softmax(p.reshape(N, -1) @ w3 + b3, dim 1)                (N, CLASSES)
 *
 * The inputs and NumPy's output for them are in cnn_data.h (tests/engine/fixtures/gen_cnn.py). */
#ifndef KILN_EXAMPLES_CNN_NET_H
#define KILN_EXAMPLES_CNN_NET_H

#include "cnn_data.h"

#include <kiln/kiln.h>

enum { CNN_FEATURES = CNN_C2 * (CNN_H / 2) * (CNN_W / 2) };

/* Runs the network in ctx and reads the (CNN_N, CNN_CLASSES) probabilities into out. */
static kiln_status cnn_forward(kiln_context *ctx, float *out) {
    kiln_tensor *nhwc =
        kiln_from_data(ctx, KILN_F32, 4, (int64_t[]){CNN_N, CNN_H, CNN_W, CNN_C}, cnn_x);
    kiln_tensor *x = kiln_permute(nhwc, (int32_t[]){0, 3, 1, 2}); /* (N, C, H, W), strided */
    kiln_tensor *w1 =
        kiln_from_data(ctx, KILN_F32, 4, (int64_t[]){CNN_C1, CNN_C, CNN_K, CNN_K}, cnn_w1);
    kiln_tensor *b1 = kiln_from_data(ctx, KILN_F32, 1, (int64_t[]){CNN_C1}, cnn_b1);
    kiln_tensor *w2 =
        kiln_from_data(ctx, KILN_F32, 4, (int64_t[]){CNN_C2, CNN_C1, CNN_K, CNN_K}, cnn_w2);
    kiln_tensor *b2 = kiln_from_data(ctx, KILN_F32, 1, (int64_t[]){CNN_C2}, cnn_b2);
    kiln_tensor *w3 =
        kiln_from_data(ctx, KILN_F32, 2, (int64_t[]){CNN_FEATURES, CNN_CLASSES}, cnn_w3);
    kiln_tensor *b3 = kiln_from_data(ctx, KILN_F32, 1, (int64_t[]){CNN_CLASSES}, cnn_b3);
    /* torch.nn.Conv2d(padding=1): stride, dilation and groups keep their defaults (0 fields) */
    const kiln_conv2d_options same = {.padding = {1, 1}};
    kiln_tensor *h1 = kiln_relu(kiln_conv2d_ex(x, w1, b1, &same));
    kiln_tensor *h2 = kiln_relu(kiln_conv2d_ex(h1, w2, b2, &same));
    /* Pooling windows address h2's storage directly: realize it (row-major), then view it as
     * (N, C2, H/2, W/2, 2, 2) with the window dims stepping one row and one column. */
    kiln_status st = kiln_realize(h2);
    if (st != KILN_OK)
        return st;
    const int64_t sw = 1, sh = CNN_W, sc = CNN_H * CNN_W, sn = CNN_C2 * sc;
    kiln_tensor *win =
        kiln_as_strided(h2, 6, (int64_t[]){CNN_N, CNN_C2, CNN_H / 2, CNN_W / 2, 2, 2},
                        (int64_t[]){sn, sc, 2 * sh, 2 * sw, sh, sw}, 0);
    kiln_tensor *p = kiln_max(win, 2, (int32_t[]){4, 5}, false);
    kiln_tensor *flat = kiln_reshape(p, 2, (int64_t[]){CNN_N, -1});
    kiln_tensor *logits = kiln_add(kiln_matmul(flat, w3), b3);
    return kiln_read(kiln_softmax(logits, 1), out, sizeof(float) * CNN_N * CNN_CLASSES);
}

#endif
