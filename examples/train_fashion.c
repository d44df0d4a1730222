/* examples/train_fashion.c: trains a small CNN on Fashion-MNIST from C (the job of ./kiln.sh run).
 *
 *     train_fashion [--epochs N] [--limit N] [--data DIR] [--seed N] [--quiet]
 *
 * The network, its initialisation and its training step are in fashion_net.c (conv3x3 1->16,
 * relu, maxpool 2, conv3x3 16->32, relu, maxpool 2, linear 1568->10; Adam with torch's
 * defaults, batch 64, reshuffled every epoch from the seed). The data set is Debian's
 * dataset-fashion-mnist (/usr/share/datasets/fashion-mnist, four .gz files), read with idx.c.
 * Every step is one realize of the parameters and the loss (forward, backward and update);
 * the batch size is a Variable, so the last, partial batch compiles nothing new, and the test
 * pass (batches of up to 1,000, a second Variable) compiles only in its first batch.
 *
 * stderr shows the progress: a bar on a terminal, a plain line every 100 steps otherwise
 * (--quiet: neither). stdout gets the test accuracy after each epoch and Kiln's statistics at
 * the end. --limit N trains only the first N batches of each epoch. KILN_DEVICE picks the
 * device ("interp": the reference interpreter; slow). Exit status: 0, 1 on an error (with its
 * message), 2 on a usage error. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, isatty */
#include "fashion_net.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

enum { PLAIN_EVERY = 100, BAR_WIDTH = 24, PATH_SIZE = 4096 };

typedef struct options {
    long epochs, limit;
    const char *data;
    uint64_t seed;
    bool quiet;
} options;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void usage(FILE *f) {
    fprintf(f, "usage: train_fashion [--epochs N] [--limit N] [--data DIR] [--seed N] [--quiet]\n"
               "  --epochs N  epochs to train (default 1)\n"
               "  --limit N   train only the first N batches of each epoch\n"
               "  --data DIR  the Fashion-MNIST *-ubyte.gz files (default " DEFAULT_DATA ")\n"
               "  --seed N    initialisation and shuffling (default 1)\n"
               "  --quiet     no progress on stderr\n");
}

/* A decimal integer in [min, max] into *out. */
static bool parse_long(const char *s, long min, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

static int parse_options(int argc, char **argv, options *o) {
    *o = (options){.epochs = 1, .limit = 0, .data = DEFAULT_DATA, .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (!strcmp(a, "--quiet")) {
            o->quiet = true;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        bool ok = v != NULL;
        if (ok && !strcmp(a, "--epochs"))
            ok = parse_long(v, 1, 1000, &o->epochs);
        else if (ok && !strcmp(a, "--limit"))
            ok = parse_long(v, 1, LONG_MAX, &o->limit);
        else if (ok && !strcmp(a, "--seed") && parse_long(v, 0, LONG_MAX, &n))
            o->seed = (uint64_t)n;
        else if (ok && !strcmp(a, "--data"))
            o->data = v;
        else
            ok = false;
        if (!ok) {
            fprintf(stderr, "train_fashion: bad option or value: %s%s%s\n", a, v ? " " : "",
                    v ? v : "");
            usage(stderr);
            return 2;
        }
        i++;
    }
    return 0;
}

/* Loads dir's images and labels named prefix-images-idx3-ubyte.gz, prefix-labels-... */
static bool load_set(const char *dir, const char *prefix, idx_dataset *set) {
    char images[PATH_SIZE], labels[PATH_SIZE], msg[IDX_MESSAGE_SIZE + PATH_SIZE];
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    const char *missing = access(images, R_OK) ? images : access(labels, R_OK) ? labels : NULL;
    if (missing) {
        fprintf(stderr,
                "train_fashion: no Fashion-MNIST data set in %s (%s: %s).\n"
                "Install the Debian package dataset-fashion-mnist (apt-get install "
                "dataset-fashion-mnist),\nor run ./kiln.sh run, which installs it; --data DIR "
                "reads the *-ubyte.gz files from DIR.\n",
                dir, missing, strerror(errno));
        return false;
    }
    idx_status st = idx_dataset_load(images, labels, FNET_CLASSES, set, msg, sizeof msg);
    if (st != IDX_OK) {
        fprintf(stderr, "train_fashion: %s\n", msg);
        return false;
    }
    if (set->rows != FNET_SIDE || set->cols != FNET_SIDE || set->count < 1) {
        fprintf(stderr, "train_fashion: %s: dims: %lld x %lld x %lld, expected N x %d x %d\n",
                images, (long long)set->count, (long long)set->rows, (long long)set->cols,
                FNET_SIDE, FNET_SIDE);
        idx_dataset_finish(set);
        return false;
    }
    return true;
}

/* ---- progress ------------------------------------------------------------------------------ */

typedef struct progress {
    bool tty, quiet;
    long epoch, epochs;
    int64_t total;
    double start, first_done, last_draw;
    double loss_avg; /* exponential moving average of the step losses */
} progress;

static void format_eta(char *buf, size_t size, double seconds) {
    long s = (long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(buf, size, "%ld:%02ld", s / 60, s % 60);
}

/* After step done (1-based) of the epoch with the step's loss. */
static void progress_step(progress *p, int64_t done, float loss) {
    double t = now_s();
    p->loss_avg = done == 1 ? loss : 0.95 * p->loss_avg + 0.05 * loss;
    if (done == 1)
        p->first_done = t;
    if (p->quiet)
        return;
    bool last = done == p->total;
    if (p->tty ? !last && done > 1 && t - p->last_draw < 0.1 : !last && done % PLAIN_EVERY)
        return;
    p->last_draw = t;
    char rate[64] = "", eta[32];
    if (done > 1) {
        double r = (double)(done - 1) / (t - p->first_done);
        format_eta(eta, sizeof eta, (double)(p->total - done) / r);
        snprintf(rate, sizeof rate, "%.1f steps/s, ETA %s", r, eta);
    } else {
        snprintf(rate, sizeof rate, "first step (compiles) %.1f s", t - p->start);
    }
    if (!p->tty) {
        fprintf(stderr, "epoch %ld/%ld step %lld/%lld  loss %.4f  %s\n", p->epoch, p->epochs,
                (long long)done, (long long)p->total, p->loss_avg, rate);
        return;
    }
    char bar[BAR_WIDTH + 1];
    int filled = (int)(BAR_WIDTH * done / p->total);
    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    fprintf(stderr, "\repoch %ld/%ld [%s] %lld/%lld  loss %.4f  %s\033[K%s", p->epoch, p->epochs,
            bar, (long long)done, (long long)p->total, p->loss_avg, rate, last ? "\n" : "");
    fflush(stderr);
}

/* ---- training -------------------------------------------------------------------------------- */

/* Kernels new to this process: generated, or loaded from the disk cache. */
static uint64_t kernels_loaded(kiln_context *ctx) {
    kiln_stats s = kiln_context_stats(ctx);
    return s.kernels_compiled + s.disk_hits;
}

/* The test set's accuracy, in batches of eval_batch; *compiled_first gets the kernels the first
 * batch compiled (or loaded from the disk cache), *compiled_rest those of the others. */
static kiln_status test_accuracy(fnet *net, const idx_dataset *test, const progress *p,
                                 int64_t *correct, uint64_t *compiled_first,
                                 uint64_t *compiled_rest) {
    int64_t batch = net->options.eval_batch, batches = (test->count + batch - 1) / batch;
    uint64_t before = kernels_loaded(net->ctx), after_first = before;
    *correct = 0;
    for (int64_t i = 0; i < batches; i++) {
        int64_t first = i * batch, n = test->count - first < batch ? test->count - first : batch;
        int64_t right;
        kiln_status st = fnet_evaluate(net, test, first, n, &right);
        if (st != KILN_OK)
            return st;
        *correct += right;
        if (i == 0)
            after_first = kernels_loaded(net->ctx);
        if (p->tty && !p->quiet)
            fprintf(stderr, "\rtesting %lld/%lld\033[K", (long long)(i + 1), (long long)batches);
    }
    if (p->tty && !p->quiet)
        fprintf(stderr, "\r\033[K");
    *compiled_first = after_first - before;
    *compiled_rest = kernels_loaded(net->ctx) - after_first;
    return KILN_OK;
}

/* steps[0..4): the kernels compiled (or loaded) in the first training step, the second, the
 * later ones, and (of those) in the epochs' last, partial batches. */
static void print_stats(kiln_context *ctx, double seconds, const uint64_t *steps) {
    kiln_stats s = kiln_context_stats(ctx);
    printf("kiln on %s: %llu kernels compiled, %llu loaded from the disk cache; of these, %llu "
           "in the first training step, %llu in the second, %llu in the later ones (%llu in "
           "partial batches)\n",
           kiln_context_device_name(ctx), (unsigned long long)s.kernels_compiled,
           (unsigned long long)s.disk_hits, (unsigned long long)steps[0],
           (unsigned long long)steps[1], (unsigned long long)steps[2],
           (unsigned long long)steps[3]);
    printf("  %llu realizes, %llu dispatches, device time %.1f s of %.1f s, code generation "
           "%.2f s, %.1f MB uploaded\n",
           (unsigned long long)s.realizes, (unsigned long long)s.dispatches,
           (double)s.device_time_ns / 1e9, seconds, (double)s.codegen_ns / 1e9,
           (double)s.bytes_uploaded / 1e6);
    printf("  live at the end: %llu tensors, %llu nodes, %llu storages (%.2f MB), %llu "
           "expressions\n",
           (unsigned long long)s.live_tensors, (unsigned long long)s.live_nodes,
           (unsigned long long)s.live_storages, (double)s.live_storage_bytes / 1e6,
           (unsigned long long)s.live_expressions);
}

static int train(kiln_context *ctx, const options *o, const idx_dataset *train_set,
                 const idx_dataset *test_set) {
    fnet net;
    kiln_status st = fnet_init(&net, ctx, &(fnet_options){.seed = o->seed});
    if (st != KILN_OK) {
        fprintf(stderr, "train_fashion: %s\n", kiln_context_message(ctx));
        return 1;
    }
    uint32_t *order = malloc(sizeof(uint32_t) * (size_t)train_set->count);
    if (!order) {
        fnet_finish(&net);
        fprintf(stderr, "train_fashion: out of memory\n");
        return 1;
    }
    for (int64_t i = 0; i < train_set->count; i++)
        order[i] = (uint32_t)i;
    uint64_t rng = o->seed ^ 0x5DEECE66Dull;
    const int64_t batch = net.options.batch, batches = (train_set->count + batch - 1) / batch;
    const int64_t steps = o->limit && o->limit < batches ? o->limit : batches;
    printf("Fashion-MNIST: %lld training and %lld test images; CNN conv3x3 1->%lld, maxpool, "
           "conv3x3 %lld->%lld, maxpool, linear %lld->10; Adam lr %g, batch %lld, seed %llu; "
           "on %s\n",
           (long long)train_set->count, (long long)test_set->count, (long long)net.options.c1,
           (long long)net.options.c1, (long long)net.options.c2, (long long)(net.options.c2 * 49),
           net.options.adam.lr, (long long)batch, (unsigned long long)o->seed,
           kiln_context_device_name(ctx));
    fflush(stdout);
    progress p = {.tty = isatty(STDERR_FILENO), .quiet = o->quiet, .epochs = o->epochs};
    double start = now_s();
    uint64_t compiled_steps[4] = {0}; /* the first step, the second, the later ones, partial */
    int64_t step_count = 0;
    for (long epoch = 1; epoch <= o->epochs && st == KILN_OK; epoch++) {
        fnet_shuffle(order, train_set->count, &rng);
        p.epoch = epoch;
        p.total = steps;
        p.start = now_s();
        double loss_sum = 0;
        for (int64_t s = 0; s < steps && st == KILN_OK; s++) {
            int64_t n = train_set->count - s * batch < batch ? train_set->count - s * batch : batch;
            uint64_t before = kernels_loaded(ctx);
            float loss = 0;
            st = fnet_train_step(&net, train_set, order + s * batch, n, &loss);
            uint64_t loaded = kernels_loaded(ctx) - before;
            compiled_steps[step_count < 2 ? step_count : 2] += loaded;
            if (n < batch)
                compiled_steps[3] += loaded;
            step_count++;
            loss_sum += loss;
            if (st == KILN_OK)
                progress_step(&p, s + 1, loss);
        }
        double train_s = now_s() - p.start;
        int64_t correct = 0;
        uint64_t test_first = 0, test_rest = 0;
        if (st == KILN_OK)
            st = test_accuracy(&net, test_set, &p, &correct, &test_first, &test_rest);
        if (st != KILN_OK)
            break;
        printf("epoch %ld/%ld: test accuracy %.2f%% (%lld of %lld), mean training loss %.4f, "
               "%lld steps in %.1f s (%.2f steps/s); the test pass compiled or loaded %llu "
               "kernels in its first batch, %llu after\n",
               epoch, o->epochs, 100.0 * (double)correct / (double)test_set->count,
               (long long)correct, (long long)test_set->count, loss_sum / (double)steps,
               (long long)steps, train_s, (double)steps / train_s, (unsigned long long)test_first,
               (unsigned long long)test_rest);
        fflush(stdout);
    }
    if (st != KILN_OK)
        fprintf(stderr, "\ntrain_fashion: %s\n", kiln_context_message(ctx));
    else
        print_stats(ctx, now_s() - start, compiled_steps);
    free(order);
    fnet_finish(&net);
    return st == KILN_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    options o;
    int bad = parse_options(argc, argv, &o);
    if (bad)
        return bad;
    idx_dataset train_set, test_set;
    if (!load_set(o.data, "train", &train_set))
        return 1;
    if (!load_set(o.data, "t10k", &test_set)) {
        idx_dataset_finish(&train_set);
        return 1;
    }
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&(kiln_context_options){.timing = true}, &ctx);
    int rc = 1;
    if (st != KILN_OK)
        fprintf(stderr, "train_fashion: no Kiln context: %s\n", kiln_status_string(st));
    else
        rc = train(ctx, &o, &train_set, &test_set);
    kiln_context_destroy(ctx);
    idx_dataset_finish(&train_set);
    idx_dataset_finish(&test_set);
    return rc;
}
