/* examples/gpt2.c: text generation with a GPT-2 checkpoint in the published safetensors layout
 * (the 124M model's model.safetensors from Hugging Face works as is). Token ids in, ids out:
 * tokenize and detokenize with GPT-2's BPE elsewhere (tiktoken's "gpt2" encoding, say).
 *
 *     gpt2 MODEL.safetensors [--ids 464,2068,7586 | --ids-file FILE] [-n 20] [--heads H]
 *          [--temperature 0] [--top-k 0] [--seed 1] [--device NAME] [--logits K] [--stats]
 *
 * --ids: comma- or space-separated ids; --ids-file: ids separated by white space or commas.
 * -n: ids to generate after the prompt. --temperature 0 (the default) is greedy; above 0 samples
 * from the top-k logits (--top-k 0: all) with --seed. --logits K prints the K largest logits of
 * every step. --stats prints the kernels compiled by the prefill, the first decode step and the
 * later ones (the last figure is 0: every position reuses the first decode step's kernels), and
 * the times. The model code is examples/gpt2_model.c. */
#include "gpt2_model.h"

#include <kiln/kiln.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void usage(void) {
    fprintf(stderr, "usage: gpt2 MODEL.safetensors [--ids 1,2,3 | --ids-file FILE] [-n N] "
                    "[--heads H] [--temperature T] [--top-k K] [--seed S] [--device NAME] "
                    "[--logits K] [--stats]\n");
}

/* Appends the ids in text (separated by commas or white space) to ids[*count..cap). */
static bool parse_ids(const char *text, int32_t *ids, int64_t *count, int64_t cap) {
    const char *p = text;
    for (;;) {
        while (*p == ',' || *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
            p++;
        if (!*p)
            return true;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX || *count >= cap)
            return false;
        ids[(*count)++] = (int32_t)v;
        p = end;
    }
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t n = 0, cap = 4096;
    char *s = malloc(cap);
    size_t got;
    while (s && (got = fread(s + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *t = realloc(s, cap *= 2);
            if (!t)
                free(s);
            s = t;
        }
    }
    fclose(f);
    if (s)
        s[n] = 0;
    return s;
}

static void print_top(const float *logits, int64_t vocab, int64_t k) {
    bool *used = calloc((size_t)vocab, 1);
    if (!used)
        return;
    printf("  logits:");
    for (int64_t j = 0; j < k && j < vocab; j++) {
        int64_t best = -1;
        for (int64_t i = 0; i < vocab; i++)
            if (!used[i] && (best < 0 || logits[i] > logits[best]))
                best = i;
        used[best] = true;
        printf(" %lld:%.4f", (long long)best, (double)logits[best]);
    }
    printf("\n");
    free(used);
}

typedef struct options {
    const char *model, *ids, *ids_file, *device;
    int64_t generate, heads, top_k, show_logits;
    double temperature;
    uint64_t seed;
    bool stats;
} options;

static bool parse_args(int argc, char **argv, options *o) {
    *o = (options){.generate = 20, .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = true;
        if (strcmp(a, "--ids") == 0 && v)
            o->ids = v;
        else if (strcmp(a, "--ids-file") == 0 && v)
            o->ids_file = v;
        else if (strcmp(a, "--device") == 0 && v)
            o->device = v;
        else if (strcmp(a, "-n") == 0 && v)
            o->generate = strtoll(v, NULL, 10);
        else if (strcmp(a, "--heads") == 0 && v)
            o->heads = strtoll(v, NULL, 10);
        else if (strcmp(a, "--top-k") == 0 && v)
            o->top_k = strtoll(v, NULL, 10);
        else if (strcmp(a, "--logits") == 0 && v)
            o->show_logits = strtoll(v, NULL, 10);
        else if (strcmp(a, "--temperature") == 0 && v)
            o->temperature = strtod(v, NULL);
        else if (strcmp(a, "--seed") == 0 && v)
            o->seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--stats") == 0)
            o->stats = true, takes = false;
        else if (a[0] != '-' && !o->model)
            o->model = a, takes = false;
        else
            return false;
        i += takes;
    }
    return o->model && (o->ids || o->ids_file) && o->generate >= 0;
}

int main(int argc, char **argv) {
    options o;
    if (!parse_args(argc, argv, &o)) {
        usage();
        return 2;
    }
    kiln_context *ctx = NULL;
    if (kiln_context_create(&(kiln_context_options){.device = o.device}, &ctx) != KILN_OK)
        return 1;
    int rc = 1;
    gpt2_model m;
    char msg[512];
    int32_t *ids = NULL;
    float *logits = NULL;
    void *scratch = NULL;
    double t0 = now_ms();
    if (gpt2_load(ctx, o.model, o.heads, &m, msg, sizeof msg) != KILN_OK) {
        fprintf(stderr, "gpt2: %s\n", msg);
        goto done;
    }
    double t_load = now_ms() - t0;
    int64_t count = 0;
    ids = malloc(sizeof *ids * (size_t)m.n_ctx);
    logits = malloc(sizeof *logits * (size_t)m.vocab);
    scratch = malloc(gpt2_sample_scratch_bytes(m.vocab));
    if (!ids || !logits || !scratch)
        goto done;
    char *text = o.ids_file ? read_text(o.ids_file) : NULL;
    bool ok = o.ids_file ? text && parse_ids(text, ids, &count, m.n_ctx)
                         : parse_ids(o.ids, ids, &count, m.n_ctx);
    free(text);
    if (!ok || count == 0) {
        fprintf(stderr, "gpt2: no ids, an id that is not a number, or more than n_ctx = %lld\n",
                (long long)m.n_ctx);
        goto done;
    }
    if (count + o.generate > m.n_ctx)
        o.generate = m.n_ctx - count;
    printf("GPT-2: %lld layers, d %lld, %lld heads, vocabulary %lld, context %lld (%.1f MB of "
           "weights, loaded in %.0f ms) on %s\n",
           (long long)m.layers, (long long)m.d, (long long)m.heads, (long long)m.vocab,
           (long long)m.n_ctx, (double)m.weight_bytes / 1e6, t_load, kiln_context_device_name(ctx));
    uint64_t rng = o.seed, compiled[3] = {0};
    double t_prefill = 0, t_first = 0, t_rest = 0;
    for (int64_t step = 0; step <= o.generate; step++) {
        const int32_t *in = step == 0 ? ids : &ids[count - 1];
        int64_t n = step == 0 ? count : 1;
        uint64_t before = kiln_context_stats(ctx).kernels_compiled;
        double t = now_ms();
        if (gpt2_step(&m, in, n, logits) != KILN_OK) {
            fprintf(stderr, "gpt2: step %lld: %s\n", (long long)step, kiln_context_message(ctx));
            goto done;
        }
        t = now_ms() - t;
        int phase = step == 0 ? 0 : step == 1 ? 1 : 2;
        compiled[phase] += kiln_context_stats(ctx).kernels_compiled - before;
        *(phase == 0 ? &t_prefill : phase == 1 ? &t_first : &t_rest) += t;
        if (o.show_logits > 0)
            print_top(logits, m.vocab, o.show_logits);
        if (step == o.generate)
            break;
        ids[count++] = gpt2_sample(logits, m.vocab, o.temperature, o.top_k, &rng, scratch);
    }
    for (int64_t i = 0; i < count; i++)
        printf("%s%d", i ? " " : "", ids[i]);
    printf("\n");
    if (o.stats) {
        printf("prefill of %lld ids: %.1f ms, %llu kernels compiled\n",
               (long long)(count - o.generate), t_prefill, (unsigned long long)compiled[0]);
        if (o.generate > 0)
            printf("first decode step: %.1f ms, %llu kernels compiled\n", t_first,
                   (unsigned long long)compiled[1]);
        if (o.generate > 1)
            printf("decode steps 2..%lld: %.1f ms each (%.1f tokens/s), %llu kernels compiled\n",
                   (long long)o.generate, t_rest / (double)(o.generate - 1),
                   1e3 * (double)(o.generate - 1) / t_rest, (unsigned long long)compiled[2]);
        kiln_stats s = kiln_context_stats(ctx);
        printf("live: %llu tensors, %llu storages (%.1f MB)\n", (unsigned long long)s.live_tensors,
               (unsigned long long)s.live_storages, (double)s.live_storage_bytes / 1e6);
    }
    rc = 0;
done:
    free(ids);
    free(logits);
    free(scratch);
    gpt2_finish(&m);
    kiln_context_destroy(ctx);
    return rc;
}
