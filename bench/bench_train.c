/* bench_train: one training step of examples/train_fashion.c (the CNN of examples/fashion_net.c
 * at batch 64: forward, backward and Adam's update in one realize) on the default device, against
 * the same model, batch and data in PyTorch on the CPU (bench/train_torch.py, 2 threads), in the
 * same run: Kiln's steps first, then PyTorch's (a process of its own).
 *
 * Both train on the batches of consecutive training images (0-63, 64-127, ...): WARMUP steps,
 * then STEPS timed ones (5 and 50; KILN_BENCH_QUICK=1: 2 and 10). Printed: ms per step (median
 * and mean) of each, the ratio Kiln/PyTorch of the medians, Kiln's per-step split (the host's
 * graph building: forward, kiln_grad and the optimizer's step; the realize with the loss's
 * read-back, of which device time from kiln_stats' timestamps), its code generation, and the
 * kernels compiled in the warm-up and in the timed steps (the disk cache is off: KILN_CACHE=0,
 * so every kernel the step needs is generated). A second row times the forward alone, without
 * gradients (examples/fashion_net.c fnet_evaluate: upload, forward, the logits read back;
 * PyTorch: the model under torch.no_grad()), on the same batches, after the training steps.
 * Data: $KILN_FASHION_DATA, else
 * /usr/share/datasets/fashion-mnist (dataset-fashion-mnist); without it, or without a python3
 * that imports torch (python3-torch), the row says so and the other side still runs. */
#include "../examples/fashion_net.h"
#include "bench_util.h"

#include <kiln/kiln.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KILN_BENCH_TRAIN_TORCH
#define KILN_BENCH_TRAIN_TORCH "bench/train_torch.py"
#endif

enum { BATCH = 64 };

typedef struct kiln_result {
    double median_ms, mean_ms, first_ms;
    double build_ms, realize_ms, device_ms;    /* medians per timed step */
    double codegen_ms;                         /* over the whole run */
    double forward_median_ms, forward_mean_ms; /* the forward alone (fnet_evaluate) */
    uint64_t compiled_warmup, compiled_timed;
    float first_loss, last_loss;
} kiln_result;

static bool load(const char *dir, const char *prefix, idx_dataset *set) {
    char images[1024], labels[1024], msg[IDX_MESSAGE_SIZE + 1024];
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    if (idx_dataset_load(images, labels, FNET_CLASSES, set, msg, sizeof msg) == IDX_OK)
        return true;
    printf("bench_train: no data set (%s): install dataset-fashion-mnist or set "
           "KILN_FASHION_DATA\n",
           msg);
    return false;
}

static bool run_kiln(const idx_dataset *data, int warmup, int steps, kiln_result *r) {
    kiln_context *ctx = NULL;
    if (kiln_context_create(&(kiln_context_options){.timing = true}, &ctx) != KILN_OK) {
        printf("bench_train: no Kiln context\n");
        return false;
    }
    fnet net;
    kiln_status st = fnet_init(&net, ctx, NULL);
    double *total = calloc((size_t)steps, sizeof(double));
    double *build = calloc((size_t)steps, sizeof(double));
    double *realize = calloc((size_t)steps, sizeof(double));
    double *device = calloc((size_t)steps, sizeof(double));
    uint32_t rows[BATCH];
    for (int s = 0; st == KILN_OK && s < warmup + steps && total && build && realize && device;
         s++) {
        for (int i = 0; i < BATCH; i++)
            rows[i] = (uint32_t)((s * BATCH + i) % data->count);
        kiln_stats before = kiln_context_stats(ctx);
        float loss;
        st = fnet_train_step(&net, data, rows, BATCH, &loss);
        kiln_stats after = kiln_context_stats(ctx);
        uint64_t compiled = after.kernels_compiled - before.kernels_compiled;
        if (s == 0) {
            r->first_ms = net.build_ms + net.realize_ms;
            r->first_loss = loss;
        }
        r->last_loss = loss;
        if (s < warmup) {
            r->compiled_warmup += compiled;
            continue;
        }
        r->compiled_timed += compiled;
        int t = s - warmup;
        total[t] = net.build_ms + net.realize_ms;
        build[t] = net.build_ms;
        realize[t] = net.realize_ms;
        device[t] = (double)(after.device_time_ns - before.device_time_ns) / 1e6;
    }
    /* The forward alone, on the same batches (its own kernels: warm-up first). */
    double *forward = calloc((size_t)steps, sizeof(double));
    for (int s = 0; st == KILN_OK && s < warmup + steps && forward; s++) {
        int64_t correct, first = ((int64_t)s * BATCH) % (data->count - BATCH + 1);
        double start = bench_now_ms();
        st = fnet_evaluate(&net, data, first, BATCH, &correct);
        if (s >= warmup)
            forward[s - warmup] = bench_now_ms() - start;
    }
    bool ok = st == KILN_OK && total && build && realize && device && forward;
    if (ok) {
        double sum = 0;
        for (int t = 0; t < steps; t++)
            sum += total[t];
        r->mean_ms = sum / steps;
        r->median_ms = bench_median(total, steps);
        r->build_ms = bench_median(build, steps);
        r->realize_ms = bench_median(realize, steps);
        r->device_ms = bench_median(device, steps);
        r->codegen_ms = (double)kiln_context_stats(ctx).codegen_ns / 1e6;
        sum = 0;
        for (int t = 0; t < steps; t++)
            sum += forward[t];
        r->forward_mean_ms = sum / steps;
        r->forward_median_ms = bench_median(forward, steps);
    } else {
        printf("bench_train: kiln: %s\n",
               st != KILN_OK ? kiln_context_message(ctx) : "out of memory");
    }
    free(total);
    free(build);
    free(realize);
    free(device);
    free(forward);
    fnet_finish(&net); /* a no-op after a failed fnet_init */
    kiln_context_destroy(ctx);
    return ok;
}

/* A python3 that imports torch: python3, else /usr/bin/python3 (NULL: none). */
static const char *torch_python(void) {
    static const char *const candidates[] = {"python3", "/usr/bin/python3"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "%s -c 'import torch' >/dev/null 2>&1", candidates[i]);
        if (system(cmd) == 0)
            return candidates[i];
    }
    return NULL;
}

/* The value of "key": in the JSON line json, or -1. */
static double json_number(const char *json, const char *key) {
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\":", key);
    const char *p = strstr(json, quoted);
    return p ? strtod(p + strlen(quoted), NULL) : -1;
}

typedef struct torch_result {
    double median_ms, mean_ms, first_loss, last_loss;
    double forward_median_ms, forward_mean_ms;
} torch_result;

static bool run_torch(const char *data_dir, int warmup, int steps, torch_result *r) {
    const char *python = torch_python();
    if (!python) {
        printf("bench_train: no python3 with torch (python3-torch): no PyTorch reference\n");
        return false;
    }
    /* KILN_BENCH_TRAIN_SCRIPT: the script elsewhere than in the source tree (a GPU bundle). */
    const char *script = getenv("KILN_BENCH_TRAIN_SCRIPT");
    script = script && *script ? script : KILN_BENCH_TRAIN_TORCH;
    char cmd[2048], line[1024] = "";
    snprintf(cmd, sizeof cmd, "%s '%s' --data '%s' --steps %d --warmup %d --batch %d --threads 2",
             python, script, data_dir, steps, warmup, BATCH);
    FILE *p = popen(cmd, "r");
    if (!p)
        return false;
    while (fgets(line, sizeof line, p) && !strstr(line, "ms_per_step_median"))
        ;
    int rc = pclose(p);
    r->median_ms = json_number(line, "ms_per_step_median");
    r->mean_ms = json_number(line, "ms_per_step_mean");
    r->first_loss = json_number(line, "first_loss");
    r->last_loss = json_number(line, "last_loss");
    r->forward_median_ms = json_number(line, "forward_ms_median");
    r->forward_mean_ms = json_number(line, "forward_ms_mean");
    if (rc != 0 || r->median_ms <= 0) {
        printf("bench_train: %s failed (status %d)\n", cmd, rc);
        return false;
    }
    return true;
}

int main(void) {
    const char *quick = getenv("KILN_BENCH_QUICK");
    bool is_quick = quick && *quick && strcmp(quick, "0") != 0;
    const int warmup = is_quick ? 2 : 5, steps = is_quick ? 10 : 50;
    const char *dir = getenv("KILN_FASHION_DATA");
    dir = dir && *dir ? dir : "/usr/share/datasets/fashion-mnist";
    setenv("KILN_CACHE", "0", 1);
    idx_dataset data;
    if (!load(dir, "train", &data))
        return 0;
    kiln_result k = {0};
    bool have_kiln = run_kiln(&data, warmup, steps, &k);
    idx_dataset_finish(&data);
    torch_result t = {0};
    bool have_torch = run_torch(dir, warmup, steps, &t);

    printf("training step, CNN of examples/train_fashion.c, batch %d, Adam; %d timed steps "
           "after %d warm-up\n",
           BATCH, steps, warmup);
    printf("%-10s %12s %12s %12s %12s\n", "", "median ms", "mean ms", "first loss", "last loss");
    if (have_kiln)
        printf("%-10s %12.2f %12.2f %12.4f %12.4f\n", "kiln", k.median_ms, k.mean_ms,
               (double)k.first_loss, (double)k.last_loss);
    if (have_torch)
        printf("%-10s %12.2f %12.2f %12.4f %12.4f\n", "pytorch", t.median_ms, t.mean_ms,
               t.first_loss, t.last_loss);
    if (have_kiln && have_torch)
        printf("kiln/pytorch (medians): %.2f\n", k.median_ms / t.median_ms);
    printf("forward alone (no gradients, logits read back), batch %d\n", BATCH);
    if (have_kiln)
        printf("%-10s %12.2f %12.2f\n", "kiln", k.forward_median_ms, k.forward_mean_ms);
    if (have_torch && t.forward_median_ms > 0)
        printf("%-10s %12.2f %12.2f\n", "pytorch", t.forward_median_ms, t.forward_mean_ms);
    if (have_kiln && have_torch && t.forward_median_ms > 0)
        printf("forward kiln/pytorch (medians): %.2f\n", k.forward_median_ms / t.forward_median_ms);
    if (have_kiln) {
        printf("kiln per step (medians): graph build %.2f ms, realize + read %.2f ms (device "
               "time %.2f ms); first step %.0f ms\n",
               k.build_ms, k.realize_ms, k.device_ms, k.first_ms);
        printf("kiln kernels compiled: %llu in the warm-up, %llu in the timed steps; code "
               "generation %.1f ms in all\n",
               (unsigned long long)k.compiled_warmup, (unsigned long long)k.compiled_timed,
               k.codegen_ms);
    }
    return have_kiln ? 0 : 1;
}
