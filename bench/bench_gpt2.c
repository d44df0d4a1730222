/* bench_gpt2: GPT-2 inference (examples/gpt2_model.c) at GPT-2 small's shape (12 layers, d 768,
 * 12 heads, vocabulary 50,257, context 1,024: 124M parameters) against PyTorch on the CPU
 * (bench/gpt2_torch.py, torch.set_num_threads(2)) running the same architecture on the same
 * weights in the same run.
 *
 * The weights are random (nothing is downloaded): the benchmark writes them as a safetensors
 * file in the published layout into a temporary directory, which both sides load. Figures:
 * prefill tokens/s of a 128-id prompt (the median of later prefills, all kernels compiled) and
 * decode tokens/s over positions 1..256 after it (KILN_BENCH_QUICK=1: 16), with the ratio
 * Kiln/PyTorch of each (above 1: Kiln is faster); the kernels compiled by the first prefill,
 * the first decode step, the later decode steps and the later prefills (the last two are 0);
 * the first-token latency (the first prefill, kernels compiled) with an empty disk cache and
 * with the cache the first run filled (KILN_CACHE_DIR in the temporary directory; lavapipe's own
 * shader cache, MESA_SHADER_CACHE_DIR, too); the weight bytes a decode step reads against a
 * 2-thread memcpy's bandwidth measured in the same run; and the largest difference between
 * Kiln's and PyTorch's logits of the prompt. */
#include "../examples/gpt2_model.h"
#include "bench_util.h"

#include <kiln/kiln.h>

#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { LAYERS = 12, D = 768, HEADS = 12, VOCAB = 50257, CTX = 1024, PROMPT = 128 };
enum { DECODE = 256, QUICK_DECODE = 16, PREFILL_REPS = 3 };

/* ---- the weights file ------------------------------------------------------------------- */

typedef struct tensor_spec {
    char name[64];
    int64_t rows, cols;  /* cols 0: 1-d */
    float scale, offset; /* values offset + scale * uniform[-1, 1) */
} tensor_spec;

static int specs(tensor_spec *out) {
    int n = 0;
    const float w = 0.02f * 1.7320508f; /* uniform of std 0.02, GPT-2's initialisation */
    out[n++] = (tensor_spec){"wte.weight", VOCAB, D, w, 0};
    out[n++] = (tensor_spec){"wpe.weight", CTX, D, 0.01f * 1.7320508f, 0};
    for (int i = 0; i < LAYERS; i++) {
        const struct {
            const char *suffix;
            int64_t rows, cols;
            float scale, offset;
        } parts[] = {
            {"ln_1.weight", D, 0, 0.1f, 1},         {"ln_1.bias", D, 0, 0.01f, 0},
            {"attn.c_attn.weight", D, 3 * D, w, 0}, {"attn.c_attn.bias", 3 * D, 0, 0.01f, 0},
            {"attn.c_proj.weight", D, D, w, 0},     {"attn.c_proj.bias", D, 0, 0.01f, 0},
            {"ln_2.weight", D, 0, 0.1f, 1},         {"ln_2.bias", D, 0, 0.01f, 0},
            {"mlp.c_fc.weight", D, 4 * D, w, 0},    {"mlp.c_fc.bias", 4 * D, 0, 0.01f, 0},
            {"mlp.c_proj.weight", 4 * D, D, w, 0},  {"mlp.c_proj.bias", D, 0, 0.01f, 0}};
        for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
            tensor_spec *s = &out[n++];
            snprintf(s->name, sizeof s->name, "h.%d.%s", i, parts[p].suffix);
            s->rows = parts[p].rows, s->cols = parts[p].cols;
            s->scale = parts[p].scale, s->offset = parts[p].offset;
        }
    }
    out[n++] = (tensor_spec){"ln_f.weight", D, 0, 0.1f, 1};
    out[n++] = (tensor_spec){"ln_f.bias", D, 0, 0.01f, 0};
    return n;
}

static int64_t spec_numel(const tensor_spec *s) {
    return s->rows * (s->cols ? s->cols : 1);
}

/* Writes the model as safetensors (F32, metadata n_head); false on an I/O error. */
static bool write_model(const char *path) {
    static tensor_spec s[2 + 12 * LAYERS + 2];
    int n = specs(s);
    size_t cap = 64 * 1024, len = 0;
    char *json = malloc(cap);
    if (!json)
        return false;
    len += (size_t)snprintf(json, cap, "{\"__metadata__\":{\"format\":\"pt\",\"n_head\":\"%d\"}",
                            HEADS);
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        uint64_t bytes = (uint64_t)spec_numel(&s[i]) * 4;
        char shape[64];
        if (s[i].cols)
            snprintf(shape, sizeof shape, "%lld,%lld", (long long)s[i].rows, (long long)s[i].cols);
        else
            snprintf(shape, sizeof shape, "%lld", (long long)s[i].rows);
        len += (size_t)snprintf(json + len, cap - len,
                                ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%s],\"data_offsets\":[%llu,"
                                "%llu]}",
                                s[i].name, shape, (unsigned long long)offset,
                                (unsigned long long)(offset + bytes));
        offset += bytes;
    }
    len += (size_t)snprintf(json + len, cap - len, "}");
    while (len % 8)
        json[len++] = ' ';
    FILE *f = fopen(path, "wb");
    bool ok = f != NULL;
    unsigned char size[8];
    for (int i = 0; i < 8; i++)
        size[i] = (unsigned char)((uint64_t)len >> (8 * i));
    ok = ok && fwrite(size, 1, 8, f) == 8 && fwrite(json, 1, len, f) == len;
    free(json);
    enum { CHUNK = 1 << 20 };
    float *buf = malloc(sizeof(float) * CHUNK);
    uint64_t rng = 0x243F6A8885A308D3ull;
    for (int i = 0; ok && buf && i < n; i++) {
        for (int64_t left = spec_numel(&s[i]); ok && left > 0; left -= CHUNK) {
            int64_t k = left < CHUNK ? left : CHUNK;
            for (int64_t j = 0; j < k; j++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                float u = (float)(int32_t)(rng >> 32) * 0x1p-31f; /* [-1, 1) */
                buf[j] = s[i].offset + s[i].scale * u;
            }
            ok = fwrite(buf, sizeof(float), (size_t)k, f) == (size_t)k;
        }
    }
    ok = ok && buf;
    free(buf);
    if (f && fclose(f) != 0)
        ok = false;
    return ok;
}

/* ---- memcpy bandwidth ------------------------------------------------------------------- */

typedef struct copy_job {
    char *dst;
    const char *src;
    size_t n;
} copy_job;

static void *copy_thread(void *arg) {
    copy_job *j = arg;
    memcpy(j->dst, j->src, j->n);
    return NULL;
}

/* Bytes copied per second by memcpy on 2 threads, 256 MiB, the median of 5. */
static double memcpy_bandwidth(void) {
    const size_t n = (size_t)256 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, n);
    memset(b, 2, n);
    double t[5];
    for (int r = 0; r < 5; r++) {
        copy_job jobs[2] = {{b, a, n / 2}, {b + n / 2, a + n / 2, n / 2}};
        pthread_t th;
        double t0 = bench_now_ms();
        pthread_create(&th, NULL, copy_thread, &jobs[1]);
        copy_thread(&jobs[0]);
        pthread_join(th, NULL);
        t[r] = bench_now_ms() - t0;
    }
    free(a);
    free(b);
    return (double)n / (bench_median(t, 5) / 1e3);
}

/* ---- Kiln's side -------------------------------------------------------------------------- */

typedef struct kiln_run {
    double load_ms, first_ms, prefill_ms, decode_ms, decode_tps;
    uint64_t compiled_prefill, compiled_first_decode, compiled_later_decode, compiled_later_prefill,
        disk_hits, weight_bytes;
    float *logits; /* the prompt's last logits (VOCAB) */
} kiln_run;

static int32_t prompt_id(int64_t i) {
    return (int32_t)((i * 7919) % VOCAB);
}
static int32_t decode_id(int64_t j) {
    return (int32_t)((j * 104729) % VOCAB);
}

static bool fail(kiln_context *ctx, const char *what) {
    fprintf(stderr, "bench_gpt2: %s: %s\n", what, kiln_context_message(ctx));
    return false;
}

/* Loads the model in a context with the disk cache in cache_dir, prefills the prompt (the first
 * token), then, with decode > 0, runs decode steps 1..decode and PREFILL_REPS more prefills. */
static bool run_kiln(const char *model, const char *cache_dir, int decode, kiln_run *r) {
    kiln_context *ctx = NULL;
    if (kiln_context_create(&(kiln_context_options){.cache_dir = cache_dir}, &ctx) != KILN_OK)
        return false;
    gpt2_model m;
    char msg[512];
    bool ok = false;
    int32_t ids[PROMPT];
    for (int i = 0; i < PROMPT; i++)
        ids[i] = prompt_id(i);
    double t0 = bench_now_ms();
    if (gpt2_load(ctx, model, 0, &m, msg, sizeof msg) != KILN_OK) {
        fprintf(stderr, "bench_gpt2: %s\n", msg);
        goto done;
    }
    r->load_ms = bench_now_ms() - t0;
    r->weight_bytes = m.weight_bytes;
    float *logits = r->logits;
    uint64_t c0 = kiln_context_stats(ctx).kernels_compiled;
    t0 = bench_now_ms();
    if (gpt2_step(&m, ids, PROMPT, logits) != KILN_OK && !fail(ctx, "prefill"))
        goto done;
    r->first_ms = bench_now_ms() - t0;
    uint64_t c1 = kiln_context_stats(ctx).kernels_compiled;
    r->compiled_prefill = c1 - c0;
    r->disk_hits = kiln_context_stats(ctx).disk_hits;
    if (decode > 0) {
        float *scratch = malloc(sizeof(float) * VOCAB);
        double *t = malloc(sizeof(double) * (size_t)decode), total = 0;
        uint64_t c2 = c1;
        for (int j = 1; scratch && t && j <= decode; j++) {
            int32_t id = decode_id(j);
            double s = bench_now_ms();
            if (gpt2_step(&m, &id, 1, scratch) != KILN_OK) {
                fail(ctx, "decode");
                free(scratch);
                free(t);
                goto done;
            }
            t[j - 1] = bench_now_ms() - s;
            if (j == 1)
                c2 = kiln_context_stats(ctx).kernels_compiled;
            else
                total += t[j - 1];
        }
        uint64_t c3 = kiln_context_stats(ctx).kernels_compiled;
        r->compiled_first_decode = c2 - c1;
        r->compiled_later_decode = c3 - c2;
        /* Decode tokens/s over positions 2..decode (the first compiled); with one step, it. */
        r->decode_tps = decode > 1 ? 1e3 * (decode - 1) / total : 1e3 / t[0];
        r->decode_ms = decode > 1 ? bench_median(t + 1, decode - 1) : t[0];
        double p[PREFILL_REPS];
        for (int k = 0; k < PREFILL_REPS; k++) {
            gpt2_reset(&m);
            double s = bench_now_ms();
            if (gpt2_step(&m, ids, PROMPT, scratch) != KILN_OK) {
                fail(ctx, "prefill");
                free(scratch);
                free(t);
                goto done;
            }
            p[k] = bench_now_ms() - s;
        }
        r->prefill_ms = bench_median(p, PREFILL_REPS);
        r->compiled_later_prefill = kiln_context_stats(ctx).kernels_compiled - c3;
        free(scratch);
        free(t);
    }
    ok = true;
done:
    gpt2_finish(&m);
    kiln_context_destroy(ctx);
    return ok;
}

/* ---- PyTorch's side ----------------------------------------------------------------------- */

typedef struct torch_run {
    double first_ms, prefill_ms, decode_ms, decode_tps;
    bool ok;
} torch_run;

static torch_run run_torch(const char *model, int decode, const char *logits_path) {
    torch_run t = {0};
    const char *python = getenv("KILN_BENCH_PYTHON");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s %s --prompt %d --decode %d --reps %d --logits %s",
             python && *python ? python : "/usr/bin/python3", GPT2_TORCH_SCRIPT, model, PROMPT,
             decode, PREFILL_REPS, logits_path);
    FILE *p = popen(cmd, "r");
    if (!p)
        return t;
    char line[256];
    int found = 0;
    while (fgets(line, sizeof line, p)) {
        found += sscanf(line, "first_token_ms %lf", &t.first_ms) == 1;
        found += sscanf(line, "prefill_ms %lf", &t.prefill_ms) == 1;
        found += sscanf(line, "decode_ms %lf", &t.decode_ms) == 1;
        found += sscanf(line, "decode_tokens_per_s %lf", &t.decode_tps) == 1;
    }
    t.ok = pclose(p) == 0 && found == 4;
    return t;
}

/* ---- the report --------------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int main(void) {
    const char *quick = getenv("KILN_BENCH_QUICK");
    int decode = quick && *quick && strcmp(quick, "0") != 0 ? QUICK_DECODE : DECODE;
    char dir[] = "/tmp/kiln_bench_gpt2_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("bench_gpt2: mkdtemp");
        return 1;
    }
    char model[256], cache[256], mesa[256], torch_logits[256];
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
    snprintf(cache, sizeof cache, "%s/kiln-cache", dir);
    snprintf(mesa, sizeof mesa, "%s/mesa-cache", dir);
    snprintf(torch_logits, sizeof torch_logits, "%s/torch_logits.bin", dir);
    setenv("MESA_SHADER_CACHE_DIR", mesa, 1); /* a cold driver cache too, before any instance */
    int rc = 1;
    static float kiln_logits[VOCAB], warm_logits[VOCAB], ref_logits[VOCAB];
    kiln_run cold = {.logits = kiln_logits}, warm = {.logits = warm_logits};
    double t0 = bench_now_ms();
    if (!write_model(model)) {
        fprintf(stderr, "bench_gpt2: cannot write %s\n", model);
        goto done;
    }
    printf("bench_gpt2: GPT-2 small's shape (%d layers, d %d, %d heads, vocabulary %d, context "
           "%d), random weights written in %.0f ms\n",
           LAYERS, D, HEADS, VOCAB, CTX, bench_now_ms() - t0);
    double bandwidth = memcpy_bandwidth();
    if (!run_kiln(model, cache, decode, &cold) || !run_kiln(model, cache, 0, &warm))
        goto done;
    torch_run torch = run_torch(model, decode, torch_logits);
    double diff = NAN;
    FILE *f = torch.ok ? fopen(torch_logits, "rb") : NULL;
    if (f && fread(ref_logits, sizeof(float), VOCAB, f) == VOCAB) {
        diff = 0;
        for (int i = 0; i < VOCAB; i++)
            diff = fmax(diff, fabs((double)kiln_logits[i] - (double)ref_logits[i]));
    }
    if (f)
        fclose(f);
    /* A decode step reads every weight but wpe (one row) once, and the cache up to its
     * position: K and V, layers x pos x d floats each (at the middle position of the run). */
    double wpe = (double)CTX * D * 4, weights = (double)cold.weight_bytes - wpe + D * 4;
    double kv = 2.0 * LAYERS * (PROMPT + decode / 2.0) * D * 4;
    double prefill_tps = 1e3 * PROMPT / cold.prefill_ms;
    printf("%-34s %12s %12s %12s\n", "", "Kiln", "PyTorch", "Kiln/PyTorch");
    if (torch.ok) {
        double torch_prefill = 1e3 * PROMPT / torch.prefill_ms;
        printf("%-34s %12.1f %12.1f %12.2f\n", "prefill of 128 ids, tokens/s", prefill_tps,
               torch_prefill, prefill_tps / torch_prefill);
        printf("%-34s %12.2f %12.2f %12.2f\n", "decode, tokens/s", cold.decode_tps,
               torch.decode_tps, cold.decode_tps / torch.decode_tps);
        printf("%-34s %12.1f %12.1f\n", "decode step, median ms", cold.decode_ms, torch.decode_ms);
        printf("%-34s %12.0f %12.0f\n", "first token, ms (cold)", cold.first_ms, torch.first_ms);
    } else {
        printf("PyTorch: not run (/usr/bin/python3 with torch, or $KILN_BENCH_PYTHON)\n");
        printf("%-34s %12.1f\n%-34s %12.2f\n", "prefill of 128 ids, tokens/s", prefill_tps,
               "decode, tokens/s", cold.decode_tps);
        printf("%-34s %12.0f\n", "first token, ms (cold)", cold.first_ms);
    }
    printf("%-34s %12.0f   (%llu kernels from the disk cache)\n",
           "first token, ms (disk cache warm)", warm.first_ms, (unsigned long long)warm.disk_hits);
    printf("positions 1..%d after the prompt; weights loaded in %.0f ms (cold), %.0f ms (warm)\n",
           decode, cold.load_ms, warm.load_ms);
    printf("kernels compiled: first prefill %llu, first decode step %llu, decode steps 2..%d "
           "%llu, later prefills %llu\n",
           (unsigned long long)cold.compiled_prefill,
           (unsigned long long)cold.compiled_first_decode, decode,
           (unsigned long long)cold.compiled_later_decode,
           (unsigned long long)cold.compiled_later_prefill);
    printf("a decode step reads %.1f MB of weights + %.1f MB of KV cache: at %.2f tokens/s, "
           "%.2f GB/s; memcpy (2 threads) copies %.2f GB/s in this run (%.0f%%)\n",
           weights / 1e6, kv / 1e6, cold.decode_tps, (weights + kv) * cold.decode_tps / 1e9,
           bandwidth / 1e9, 100 * (weights + kv) * cold.decode_tps / bandwidth);
    printf("prompt logits: max |Kiln - PyTorch| = %.3g; cold and warm runs %s\n", diff,
           memcmp(kiln_logits, warm_logits, sizeof kiln_logits) == 0 ? "identical" : "DIFFER");
    rc = cold.compiled_later_decode == 0 && cold.compiled_later_prefill == 0 ? 0 : 1;
done:
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
