/* examples/fashion_net.h: the network and the training step of examples/train_fashion.c,
 * shared with its test (tests/examples/test_train_fashion.c) and benchmark
 * (bench/bench_train.c). PyTorch's equivalent is bench/train_torch.py.
 *
 *     x       (B, 1, 28, 28) pixels / 255 (torchvision's ToTensor), B a Variable in [1, batch]
 *     h1      max_pool2d(relu(conv2d(x, w1, b1, padding 1)), 2)      (B, c1, 14, 14)
 *     h2      max_pool2d(relu(conv2d(h1, w2, b2, padding 1)), 2)     (B, c2, 7, 7)
 *     logits  h2.reshape(B, c2 * 49) @ w3^T + b3                      (B, 10)
 *     loss    cross_entropy(logits, labels)
 *
 * Parameters have torch's layouts and default initialisation (nn.Conv2d, nn.Linear:
 * kaiming_uniform with a = sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and
 * biases alike), drawn from a seeded host generator. One training step is one realize of the
 * parameters and the loss: forward, backward (kiln_grad) and Adam's update (kiln_adam) in one
 * schedule, inside a scope, with the batch uploaded as a full (batch, ...) tensor narrowed to the
 * bound Variable: a partial batch compiles nothing new. */
#ifndef KILN_EXAMPLES_FASHION_NET_H
#define KILN_EXAMPLES_FASHION_NET_H

#include "idx.h"

#include <kiln/kiln.h>

#include <stdint.h>

enum { FNET_SIDE = 28, FNET_PIXELS = FNET_SIDE * FNET_SIDE, FNET_CLASSES = 10, FNET_PARAMS = 6 };

typedef struct fnet_options {
    int64_t c1, c2;         /* channels of the two convolutions (0: 16 and 32) */
    int64_t batch;          /* the largest training batch (0: 64) */
    int64_t eval_batch;     /* the largest evaluation batch (0: 1,000) */
    uint64_t seed;          /* of the parameters' initialisation */
    kiln_adam_options adam; /* zero: kiln_adam_defaults() */
} fnet_options;

typedef struct fnet {
    kiln_context *ctx;
    fnet_options options;
    kiln_tensor *params[FNET_PARAMS]; /* w1, b1, w2, b2, w3, b3 */
    kiln_optimizer *adam;
    const kiln_expr *batch, *eval_batch; /* the Variables "batch" and "eval_batch" */
    float *x;                            /* host staging of one batch's pixels and labels */
    int32_t *y;
    float *logits; /* one evaluation batch's logits, read back */
    /* The last training step: building its graph (forward, kiln_grad, the optimizer's step) and
     * its realize (with the loss's read-back), in milliseconds of host time. */
    double build_ms, realize_ms;
} fnet;

/* Makes the parameters and the optimizer in ctx (outside any scope). On failure the message is
 * the context's (or "out of host memory" with KILN_ERROR_OUT_OF_HOST_MEMORY), and net is
 * finished. */
kiln_status fnet_init(fnet *net, kiln_context *ctx, const fnet_options *options);
void fnet_finish(fnet *net); /* releases what fnet_init made; the context stays */

/* One step on the n (1 to batch) images data->images[rows[i]]: *loss receives the batch's mean
 * loss before the update. */
kiln_status fnet_train_step(fnet *net, const idx_dataset *data, const uint32_t *rows, int64_t n,
                            float *loss);
/* The forward pass (no gradients) on images first .. first + n - 1 (n from 1 to eval_batch):
 * *correct receives how many are classified as labelled (argmax, the first maximum). */
kiln_status fnet_evaluate(fnet *net, const idx_dataset *data, int64_t first, int64_t n,
                          int64_t *correct);

/* The host generator (splitmix64) and a Fisher-Yates shuffle of order[0..n) with it. */
uint64_t fnet_random(uint64_t *state);
void fnet_shuffle(uint32_t *order, int64_t n, uint64_t *state);

#endif
