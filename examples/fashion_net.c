/* examples/fashion_net.c: the Fashion-MNIST CNN and its training step (see fashion_net.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "fashion_net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

uint64_t fnet_random(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void fnet_shuffle(uint32_t *order, int64_t n, uint64_t *state) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(fnet_random(state) % (uint64_t)(i + 1));
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* A parameter of ndim dims drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (torch's default for
 * Conv2d and Linear, weights and biases), realized, with requires_grad. */
static kiln_tensor *parameter(kiln_context *ctx, uint32_t ndim, const int64_t *shape,
                              int64_t fan_in, uint64_t *rng) {
    int64_t numel = 1;
    for (uint32_t d = 0; d < ndim; d++)
        numel *= shape[d];
    float *v = malloc(sizeof(float) * (size_t)numel);
    if (!v)
        return NULL;
    double bound = 1.0 / sqrt((double)fan_in);
    for (int64_t i = 0; i < numel; i++) {
        double u = (double)(fnet_random(rng) >> 11) * 0x1.0p-53; /* [0, 1) */
        v[i] = (float)((2 * u - 1) * bound);
    }
    kiln_tensor *t = kiln_from_data(ctx, KILN_F32, ndim, shape, v);
    free(v);
    if (t && kiln_realize(t) == KILN_OK && kiln_requires_grad_(t, true) == KILN_OK)
        return t;
    return NULL;
}

static void options_with_defaults(fnet_options *o) {
    o->c1 = o->c1 ? o->c1 : 16;
    o->c2 = o->c2 ? o->c2 : 32;
    o->batch = o->batch ? o->batch : 64;
    o->eval_batch = o->eval_batch ? o->eval_batch : 1000;
    if (o->adam.lr == 0)
        o->adam = kiln_adam_defaults();
}

kiln_status fnet_init(fnet *net, kiln_context *ctx, const fnet_options *options) {
    memset(net, 0, sizeof *net);
    net->ctx = ctx;
    if (options)
        net->options = *options;
    fnet_options *o = &net->options;
    options_with_defaults(o);
    int64_t rows = o->batch > o->eval_batch ? o->batch : o->eval_batch;
    net->x = malloc(sizeof(float) * (size_t)(rows * FNET_PIXELS));
    net->y = malloc(sizeof(int32_t) * (size_t)rows);
    net->logits = malloc(sizeof(float) * (size_t)(o->eval_batch * FNET_CLASSES));
    if (!net->x || !net->y || !net->logits) {
        fnet_finish(net);
        return KILN_ERROR_OUT_OF_HOST_MEMORY;
    }
    memset(net->x, 0, sizeof(float) * (size_t)(rows * FNET_PIXELS));
    memset(net->y, 0, sizeof(int32_t) * (size_t)rows);
    uint64_t rng = o->seed;
    const int64_t c1 = o->c1, c2 = o->c2, features = c2 * (FNET_SIDE / 4) * (FNET_SIDE / 4);
    net->params[0] = parameter(ctx, 4, (int64_t[]){c1, 1, 3, 3}, 9, &rng);
    net->params[1] = parameter(ctx, 1, (int64_t[]){c1}, 9, &rng);
    net->params[2] = parameter(ctx, 4, (int64_t[]){c2, c1, 3, 3}, c1 * 9, &rng);
    net->params[3] = parameter(ctx, 1, (int64_t[]){c2}, c1 * 9, &rng);
    net->params[4] = parameter(ctx, 2, (int64_t[]){FNET_CLASSES, features}, features, &rng);
    net->params[5] = parameter(ctx, 1, (int64_t[]){FNET_CLASSES}, features, &rng);
    net->batch = kiln_variable(ctx, "batch", 1, o->batch);
    net->eval_batch = kiln_variable(ctx, "eval_batch", 1, o->eval_batch);
    for (int i = 0; i < FNET_PARAMS; i++) {
        if (!net->params[i])
            goto fail;
    }
    net->adam = kiln_adam(ctx, FNET_PARAMS, net->params, &o->adam);
    if (net->adam && net->batch && net->eval_batch)
        return KILN_OK;
fail:;
    kiln_status st = kiln_context_status(ctx);
    fnet_finish(net);
    return st != KILN_OK ? st : KILN_ERROR_OUT_OF_HOST_MEMORY;
}

void fnet_finish(fnet *net) {
    kiln_optimizer_destroy(net->adam);
    for (int i = 0; i < FNET_PARAMS; i++)
        kiln_release(net->params[i]);
    free(net->x);
    free(net->y);
    free(net->logits);
    kiln_context *ctx = net->ctx;
    memset(net, 0, sizeof *net);
    net->ctx = ctx;
}

/* The logits of the batch x ((n, 1, 28, 28), n an expression) with parameters p. */
static kiln_tensor *forward(fnet *net, kiln_tensor *x, const kiln_expr *n, kiln_tensor *const *p) {
    const kiln_conv2d_options same = {.padding = {1, 1}};
    kiln_tensor *h = kiln_relu(kiln_conv2d_ex(x, p[0], p[1], &same));
    h = kiln_max_pool2d(h, 2, 0, 0);
    h = kiln_relu(kiln_conv2d_ex(h, p[2], p[3], &same));
    h = kiln_max_pool2d(h, 2, 0, 0);
    const int64_t features = net->options.c2 * (FNET_SIDE / 4) * (FNET_SIDE / 4);
    kiln_tensor *flat =
        kiln_reshape_sym(h, 2, (const kiln_expr *const[]){n, kiln_int(net->ctx, features)});
    return kiln_add(kiln_matmul(flat, kiln_transpose(p[4], 0, 1)), p[5]);
}

/* Uploads n images (rows[i], or first + i when rows is NULL) and their labels into tensors of
 * capacity rows narrowed to the Variable var bound to n: *x (n, 1, 28, 28), *labels (n) I32,
 * *bound the bound Variable (labels NULL: no labels tensor). Call inside the step's scope. */
static void upload(fnet *net, const idx_dataset *data, const uint32_t *rows, int64_t first,
                   int64_t n, int64_t capacity, const kiln_expr *var, kiln_tensor **x,
                   kiln_tensor **labels, const kiln_expr **bound) {
    for (int64_t i = 0; i < n; i++) {
        int64_t r = rows ? (int64_t)rows[i] : first + i;
        const uint8_t *pixels = data->images.data + r * FNET_PIXELS;
        float *dst = net->x + i * FNET_PIXELS;
        for (int j = 0; j < FNET_PIXELS; j++)
            dst[j] = (float)pixels[j] / 255.0f;
        net->y[i] = data->labels.data[r];
    }
    kiln_context *ctx = net->ctx;
    *bound = kiln_bind(ctx, var, n);
    const kiln_expr *zero = kiln_int(ctx, 0);
    kiln_tensor *all =
        kiln_from_data(ctx, KILN_F32, 4, (int64_t[]){capacity, 1, FNET_SIDE, FNET_SIDE}, net->x);
    *x = kiln_narrow_sym(all, 0, zero, *bound);
    if (labels)
        *labels = kiln_narrow_sym(kiln_from_data(ctx, KILN_I32, 1, (int64_t[]){capacity}, net->y),
                                  0, zero, *bound);
}

kiln_status fnet_train_step(fnet *net, const idx_dataset *data, const uint32_t *rows, int64_t n,
                            float *loss) {
    if (n < 1 || n > net->options.batch)
        return KILN_ERROR_OUT_OF_RANGE;
    kiln_context *ctx = net->ctx;
    double start = now_ms();
    kiln_scope_begin(ctx);
    kiln_tensor *x, *labels, *grads[FNET_PARAMS] = {NULL};
    const kiln_expr *b;
    upload(net, data, rows, 0, n, net->options.batch, net->batch, &x, &labels, &b);
    /* The forward's tensors (and through the loss's history, the values its backward saved)
     * in a scope of their own, ended before the optimizer writes the parameters they read:
     * held, they would keep the parameters' old values (a copy of each bias the forward
     * added, made before its update). The loss, detached, and the gradients stay. */
    kiln_scope_begin(ctx);
    kiln_tensor *l = kiln_cross_entropy(forward(net, x, b, net->params), labels);
    kiln_status st = kiln_grad(l, FNET_PARAMS, net->params, grads);
    kiln_tensor *kept[FNET_PARAMS + 1] = {kiln_detach(l)};
    memcpy(kept + 1, grads, sizeof grads);
    kiln_status end = kiln_scope_end(ctx, st == KILN_OK ? FNET_PARAMS + 1 : 0, kept);
    st = st != KILN_OK ? st : end;
    l = kept[0];
    if (st == KILN_OK)
        st = kiln_optimizer_step(net->adam, grads);
    double built = now_ms();
    if (st == KILN_OK) {
        kiln_tensor *out[FNET_PARAMS + 1] = {l};
        memcpy(out + 1, net->params, sizeof net->params);
        st = kiln_realize_many(ctx, FNET_PARAMS + 1, out);
    }
    if (st == KILN_OK)
        st = kiln_read(l, loss, sizeof *loss);
    kiln_scope_end(ctx, 0, NULL);
    net->build_ms = built - start;
    net->realize_ms = now_ms() - built;
    return st;
}

kiln_status fnet_evaluate(fnet *net, const idx_dataset *data, int64_t first, int64_t n,
                          int64_t *correct) {
    if (n < 1 || n > net->options.eval_batch || first < 0 || first + n > data->count)
        return KILN_ERROR_OUT_OF_RANGE;
    kiln_context *ctx = net->ctx;
    kiln_scope_begin(ctx);
    kiln_tensor *x, *p[FNET_PARAMS];
    const kiln_expr *b;
    upload(net, data, NULL, first, n, net->options.eval_batch, net->eval_batch, &x, NULL, &b);
    for (int i = 0; i < FNET_PARAMS; i++)
        p[i] = kiln_detach(net->params[i]); /* no history: nothing for a backward pass */
    kiln_status st =
        kiln_read(forward(net, x, b, p), net->logits, sizeof(float) * (size_t)(n * FNET_CLASSES));
    kiln_scope_end(ctx, 0, NULL);
    *correct = 0;
    for (int64_t i = 0; st == KILN_OK && i < n; i++) {
        const float *row = net->logits + i * FNET_CLASSES;
        int best = 0;
        for (int k = 1; k < FNET_CLASSES; k++)
            best = row[k] > row[best] ? k : best;
        *correct += best == net->y[i];
    }
    return st;
}
