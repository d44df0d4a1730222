/* bench_train: one training step of examples/train_fashion.c (the CNN of examples/fashion_net.c
 * at batch 64: forward, backward and Adam's update in one realize) on the default device, against
 * the same model, batch and data in PyTorch on the CPU (bench/train_torch.py --serve, 2 threads,
 * a process of its own), in alternating rounds: each round runs a few steps on one side, then
 * as many on the other (Kiln first in even rounds), so that both see the machine in the same
 * state, and its ratio is the median of Kiln's steps over the median of PyTorch's.
 *
 * Both train on the batches of consecutive training images (0-63, 64-127, ...): WARMUP steps,
 * then ROUNDS rounds of PER_ROUND timed steps (5, then 10 of 5; KILN_BENCH_QUICK=1: 2, then 5
 * of 2). Printed: ms per step (median and mean) of each, the ratio of the medians and the
 * median of the rounds' ratios with its confidence interval, Kiln's per-step split (the host's
 * graph building: forward, kiln_grad and the optimizer's step; the realize with the loss's
 * read-back, of which device time from kiln_stats' timestamps), its code generation, and the
 * kernels compiled in the warm-up and in the timed steps (the disk cache is off: KILN_CACHE=0,
 * so every kernel the step needs is generated). A second set of rounds times the forward alone,
 * without gradients (examples/fashion_net.c fnet_evaluate, its evaluation batch BATCH: upload,
 * forward, the logits read back; PyTorch: the model under torch.no_grad()), on the same
 * batches, after the training steps. Data: $KILN_FASHION_DATA, else
 * /usr/share/datasets/fashion-mnist (dataset-fashion-mnist); without it, or without a python3 that
 * imports torch (python3-torch), the row says so and Kiln's side still runs. */
#include "../examples/fashion_net.h"
#include "bench_util.h"

#include <kiln/kiln.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef KILN_BENCH_TRAIN_TORCH
#define KILN_BENCH_TRAIN_TORCH "bench/train_torch.py"
#endif

enum { BATCH = 64, MAX_ROUNDS = 64, MAX_PER_ROUND = 16, SETTLE_MS = 50 };

/* The run's shape: warm-up steps, then rounds of steps per side, Kiln and PyTorch in turn. */
typedef struct plan {
    int warmup, rounds, per_round;
} plan;

/* Kiln's side: its context and network, and what each timed step took. */
typedef struct kiln_side {
    kiln_context *ctx;
    fnet net;
    bool have_net;
    double *build, *realize, *device; /* per timed step */
    uint64_t compiled_warmup, compiled_timed;
    double first_ms;
    float first_loss, last_loss;
} kiln_side;

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

static bool kiln_start(kiln_side *k, int timed) {
    if (kiln_context_create(&(kiln_context_options){.timing = true}, &k->ctx) != KILN_OK) {
        printf("bench_train: no Kiln context\n");
        return false;
    }
    k->build = calloc((size_t)timed, sizeof(double));
    k->realize = calloc((size_t)timed, sizeof(double));
    k->device = calloc((size_t)timed, sizeof(double));
    /* Evaluation batches as large as the training batch: the forward row's batches are of
     * BATCH images, and fnet_evaluate uploads eval_batch rows whatever n is (the default
     * 1,000 uploaded 3.1 MB a forward, 0.36 ms of its 5.1 on lavapipe). */
    kiln_status st = fnet_init(&k->net, k->ctx, &(fnet_options){.eval_batch = BATCH});
    k->have_net = st == KILN_OK;
    if (st != KILN_OK || !k->build || !k->realize || !k->device) {
        printf("bench_train: kiln: %s\n",
               st != KILN_OK ? kiln_context_message(k->ctx) : "out of memory");
        return false;
    }
    return true;
}

/* Kiln's training steps first .. first + count - 1 (step s trains on the batch of images
 * s * BATCH ..): ms[i] the time of each, or NULL for warm-up steps; timed steps fill k's
 * split at index slot + i. */
static bool kiln_steps(kiln_side *k, const idx_dataset *data, int first, int count, double *ms,
                       int slot) {
    uint32_t rows[BATCH];
    for (int s = first; s < first + count; s++) {
        for (int i = 0; i < BATCH; i++)
            rows[i] = (uint32_t)(((int64_t)s * BATCH + i) % data->count);
        kiln_stats before = kiln_context_stats(k->ctx);
        float loss;
        if (fnet_train_step(&k->net, data, rows, BATCH, &loss) != KILN_OK) {
            printf("bench_train: kiln: %s\n", kiln_context_message(k->ctx));
            return false;
        }
        kiln_stats after = kiln_context_stats(k->ctx);
        uint64_t compiled = after.kernels_compiled - before.kernels_compiled;
        if (s == 0) {
            k->first_ms = k->net.build_ms + k->net.realize_ms;
            k->first_loss = loss;
        }
        k->last_loss = loss;
        if (!ms) {
            k->compiled_warmup += compiled;
            continue;
        }
        int t = slot + s - first;
        k->compiled_timed += compiled;
        ms[s - first] = k->net.build_ms + k->net.realize_ms;
        k->build[t] = k->net.build_ms;
        k->realize[t] = k->net.realize_ms;
        k->device[t] = (double)(after.device_time_ns - before.device_time_ns) / 1e6;
    }
    return true;
}

/* Kiln's forward alone (fnet_evaluate: upload, forward, the logits read back) on the batches
 * first .. first + count - 1; ms as kiln_steps'. */
static bool kiln_forwards(kiln_side *k, const idx_dataset *data, int first, int count, double *ms) {
    for (int s = first; s < first + count; s++) {
        int64_t correct, at = ((int64_t)s * BATCH) % (data->count - BATCH + 1);
        double start = bench_now_ms();
        if (fnet_evaluate(&k->net, data, at, BATCH, &correct) != KILN_OK) {
            printf("bench_train: kiln: %s\n", kiln_context_message(k->ctx));
            return false;
        }
        if (ms)
            ms[s - first] = bench_now_ms() - start;
    }
    return true;
}

static void kiln_finish(kiln_side *k) {
    free(k->build);
    free(k->realize);
    free(k->device);
    if (k->have_net)
        fnet_finish(&k->net);
    kiln_context_destroy(k->ctx);
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

/* PyTorch's side: bench/train_torch.py --serve in a process of its own, fed commands on its
 * standard input ("train FIRST COUNT", "forward FIRST COUNT") and answering each with one line
 * ("ms T1 .. Tn loss FIRST LAST"; a forward's without the losses). */
typedef struct torch_side {
    pid_t pid;
    FILE *to, *from;
    const char *script;
    float first_loss, last_loss;
} torch_side;

static bool torch_start(torch_side *t, const char *data_dir) {
    const char *python = torch_python();
    if (!python) {
        printf("bench_train: no python3 with torch (python3-torch): no PyTorch reference\n");
        return false;
    }
    /* KILN_BENCH_TRAIN_SCRIPT: the script elsewhere than in the source tree (a GPU bundle). */
    const char *script = getenv("KILN_BENCH_TRAIN_SCRIPT");
    script = script && *script ? script : KILN_BENCH_TRAIN_TORCH;
    t->script = script;
    char batch[16];
    snprintf(batch, sizeof batch, "%d", BATCH);
    int down[2], up[2];
    if (pipe(down) != 0)
        return false;
    if (pipe(up) != 0) {
        close(down[0]);
        close(down[1]);
        return false;
    }
    fflush(stdout);
    t->pid = fork();
    if (t->pid == 0) {
        dup2(down[0], 0);
        dup2(up[1], 1);
        close(down[0]);
        close(down[1]);
        close(up[0]);
        close(up[1]);
        execlp(python, python, script, "--serve", "--data", data_dir, "--batch", batch, "--threads",
               "2", (char *)NULL);
        _exit(127);
    }
    close(down[0]);
    close(up[1]);
    t->to = t->pid > 0 ? fdopen(down[1], "w") : NULL;
    t->from = t->pid > 0 ? fdopen(up[0], "r") : NULL;
    if (!t->to || !t->from) {
        printf("bench_train: could not start %s %s\n", python, script);
        if (t->to)
            fclose(t->to);
        else
            close(down[1]);
        if (t->from)
            fclose(t->from);
        else
            close(up[0]);
        t->to = t->from = NULL;
        return false;
    }
    return true;
}

/* PyTorch's training steps (what "train") or forward passes ("forward") first .. first +
 * count - 1: ms[i] each one's time (NULL: not kept). */
static bool torch_run(torch_side *t, const char *what, int first, int count, double *ms) {
    char line[4096];
    if (!t->to || fprintf(t->to, "%s %d %d\n", what, first, count) < 0 || fflush(t->to) != 0 ||
        !fgets(line, sizeof line, t->from) || strncmp(line, "ms ", 3) != 0) {
        printf("bench_train: %s --serve stopped answering (%s %d %d)\n", t->script, what, first,
               count);
        return false;
    }
    char *p = line + 3, *end;
    for (int i = 0; i < count; i++, p = end) {
        double v = strtod(p, &end);
        if (end == p)
            return false;
        if (ms)
            ms[i] = v;
    }
    char *loss = strstr(p, "loss ");
    if (loss) {
        float a = strtof(loss + 5, &end), b = strtof(end, NULL);
        if (first == 0)
            t->first_loss = a;
        t->last_loss = b;
    }
    return true;
}

static void torch_stop(torch_side *t) {
    if (t->to)
        fclose(t->to); /* end of input: the script exits */
    if (t->from)
        fclose(t->from);
    if (t->pid > 0)
        waitpid(t->pid, NULL, 0);
    t->to = t->from = NULL;
    t->pid = 0;
}

/* One side's rounds: step (or forward) times ms[round * per_round + i]. */
typedef struct rounds {
    double kiln[MAX_ROUNDS * MAX_PER_ROUND], torch[MAX_ROUNDS * MAX_PER_ROUND];
    double ratio[MAX_ROUNDS]; /* each round's median Kiln time over its median PyTorch time */
    int count;                /* rounds done */
} rounds;

/* Waits for the side that ran before to go idle. PyTorch's OpenMP threads keep spinning for a
 * while after their work (libgomp's default wait policy), and on a 2-core machine they took
 * the cores from Kiln's next steps: Kiln's step 23-28 ms with OMP_WAIT_POLICY=ACTIVE, 16-18 ms
 * with PASSIVE, in the same hour (lavapipe's threads sleep at once). */
static void settle(void) {
    struct timespec pause = {.tv_sec = 0, .tv_nsec = SETTLE_MS * 1000000L};
    nanosleep(&pause, NULL);
}

/* Warm-up on both sides, then p->rounds rounds of p->per_round steps (forward: passes) each,
 * Kiln first in even rounds and PyTorch first in odd ones, on the same batches, each side's
 * turn after the other has settled. */
static bool run_rounds(const plan *p, bool forward, kiln_side *k, torch_side *t, bool *have_torch,
                       const idx_dataset *data, rounds *r) {
    const char *what = forward ? "forward" : "train";
    bool ok = forward ? kiln_forwards(k, data, 0, p->warmup, NULL)
                      : kiln_steps(k, data, 0, p->warmup, NULL, 0);
    if (*have_torch && !torch_run(t, what, 0, p->warmup, NULL))
        *have_torch = false;
    for (int i = 0; ok && i < p->rounds; i++) {
        int first = p->warmup + i * p->per_round;
        double *km = &r->kiln[i * p->per_round], *tm = &r->torch[i * p->per_round];
        for (int turn = 0; ok && turn < 2; turn++) {
            settle();
            if ((turn == 0) == (i % 2 == 0)) {
                ok = forward ? kiln_forwards(k, data, first, p->per_round, km)
                             : kiln_steps(k, data, first, p->per_round, km, i * p->per_round);
            } else if (*have_torch && !torch_run(t, what, first, p->per_round, tm)) {
                *have_torch = false;
            }
        }
        if (ok && *have_torch) {
            double a[MAX_PER_ROUND], b[MAX_PER_ROUND];
            memcpy(a, km, (size_t)p->per_round * sizeof *a);
            memcpy(b, tm, (size_t)p->per_round * sizeof *b);
            r->ratio[i] = bench_median(a, p->per_round) / bench_median(b, p->per_round);
        }
        r->count = ok ? i + 1 : i;
    }
    return ok;
}

/* The median of n times (times kept as they are). */
static double median_of(const double *times, int n) {
    double v[MAX_ROUNDS * MAX_PER_ROUND];
    memcpy(v, times, (size_t)n * sizeof *v);
    return bench_median(v, n);
}

/* One side's row: median and mean ms of its n times, then its first and last loss (losses
 * NULL: none). */
static void print_side(const char *who, const double *times, int n, const float *losses) {
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += times[i];
    printf("%-10s %12.2f %12.2f", who, median_of(times, n), sum / n);
    if (losses)
        printf(" %12.4f %12.4f", (double)losses[0], (double)losses[1]);
    printf("\n");
}

/* "kiln/pytorch ...": the ratio of the medians, and the median of the rounds' ratios with
 * its confidence interval. */
static void print_ratios(const char *label, rounds *r, int timed) {
    printf("%skiln/pytorch (medians): %.2f\n", label,
           median_of(r->kiln, timed) / median_of(r->torch, timed));
    int lo = bench_median_ci_rank(r->count);
    double ratio = bench_median(r->ratio, r->count);
    printf("%skiln/pytorch (paired rounds): median %.2f, 95%% interval %.2f-%.2f over %d "
           "rounds\n",
           label, ratio, r->ratio[lo], r->ratio[r->count - 1 - lo], r->count);
}

int main(void) {
    const char *quick = getenv("KILN_BENCH_QUICK");
    bool is_quick = quick && *quick && strcmp(quick, "0") != 0;
    const plan p = is_quick ? (plan){.warmup = 2, .rounds = 5, .per_round = 2}
                            : (plan){.warmup = 5, .rounds = 10, .per_round = 5};
    const int timed = p.rounds * p.per_round;
    const char *dir = getenv("KILN_FASHION_DATA");
    dir = dir && *dir ? dir : "/usr/share/datasets/fashion-mnist";
    setenv("KILN_CACHE", "0", 1);
    signal(SIGPIPE, SIG_IGN); /* PyTorch's process gone: a failed write, not the end */
    idx_dataset data;
    if (!load(dir, "train", &data))
        return 0;
    static rounds steps, forwards;
    kiln_side k = {0};
    torch_side t = {0};
    bool have_torch = torch_start(&t, dir);
    bool ok = kiln_start(&k, timed) && run_rounds(&p, false, &k, &t, &have_torch, &data, &steps) &&
              run_rounds(&p, true, &k, &t, &have_torch, &data, &forwards);
    torch_stop(&t);
    idx_dataset_finish(&data);

    printf("training step, CNN of examples/train_fashion.c, batch %d, Adam; %d timed steps in "
           "%d alternating rounds of %d, after %d warm-up\n",
           BATCH, timed, p.rounds, p.per_round, p.warmup);
    printf("%-10s %12s %12s %12s %12s\n", "", "median ms", "mean ms", "first loss", "last loss");
    if (ok)
        print_side("kiln", steps.kiln, timed, (const float[]){k.first_loss, k.last_loss});
    if (ok && have_torch) {
        print_side("pytorch", steps.torch, timed, (const float[]){t.first_loss, t.last_loss});
        print_ratios("", &steps, timed);
    }
    printf("forward alone (no gradients, logits read back), batch %d\n", BATCH);
    if (ok)
        print_side("kiln", forwards.kiln, timed, NULL);
    if (ok && have_torch) {
        print_side("pytorch", forwards.torch, timed, NULL);
        print_ratios("forward ", &forwards, timed);
    }
    if (ok) {
        printf("kiln per step (medians): graph build %.2f ms, realize + read %.2f ms (device "
               "time %.2f ms); first step %.0f ms\n",
               bench_median(k.build, timed), bench_median(k.realize, timed),
               bench_median(k.device, timed), k.first_ms);
        printf("kiln kernels compiled: %llu in the warm-up, %llu in the timed steps; code "
               "generation %.1f ms in all\n",
               (unsigned long long)k.compiled_warmup, (unsigned long long)k.compiled_timed,
               (double)kiln_context_stats(k.ctx).codegen_ns / 1e6);
    }
    kiln_finish(&k);
    return ok ? 0 : 1;
}
