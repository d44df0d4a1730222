/* Symbolic shapes benchmark (issue 8): the MLP forward at 64 batch sizes with a symbolic batch
 * against every size concrete (one compile each), and the per-call time of a small symbolic sum
 * (rebind n, realize, read the scalar back). Figures are medians of repeated runs in one
 * process, on the default device; the disk caches are off, so every compile is counted. */
#include "bench_util.h"
#include <kiln/kiln.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { IN = 64, HIDDEN = 128, OUT = 16, BATCHES = 64 };

/* One forward pass; batch is a bound Variable (symbolic) or a constant. */
static kiln_status forward(kiln_context *ctx, const kiln_expr *batch, kiln_tensor *w1,
                           kiln_tensor *w2, float *out, size_t rows) {
    kiln_tensor *x =
        kiln_randn_sym(ctx, KILN_F32, 2, (const kiln_expr *[]){batch, kiln_int(ctx, IN)}, 9);
    kiln_tensor *y = kiln_softmax(kiln_matmul(kiln_relu(kiln_matmul(x, w1)), w2), -1);
    return kiln_read(y, out, sizeof(float) * OUT * rows);
}

static int mlp(bool symbolic, double *ms, uint64_t *compiles) {
    kiln_context *ctx;
    if (kiln_context_create(NULL, &ctx) != KILN_OK)
        return 1;
    kiln_tensor *w1 = kiln_randn(ctx, KILN_F32, 2, (int64_t[]){IN, HIDDEN}, 1);
    kiln_tensor *w2 = kiln_randn(ctx, KILN_F32, 2, (int64_t[]){HIDDEN, OUT}, 2);
    const kiln_expr *var = kiln_variable(ctx, "batch", 1, BATCHES);
    static float out[BATCHES * OUT];
    double t0 = bench_now_ms();
    for (int64_t b = 1; b <= BATCHES; b++) {
        const kiln_expr *batch = symbolic ? kiln_bind(ctx, var, b) : kiln_int(ctx, b);
        if (forward(ctx, batch, w1, w2, out, (size_t)b) != KILN_OK) {
            fprintf(stderr, "mlp: %s\n", kiln_context_message(ctx));
            return 1;
        }
    }
    *ms = bench_now_ms() - t0;
    *compiles = kiln_context_stats(ctx).kernels_compiled;
    kiln_context_destroy(ctx);
    return 0;
}

static int per_call(double *median_ms) {
    kiln_context *ctx;
    if (kiln_context_create(NULL, &ctx) != KILN_OK)
        return 1;
    static float data[4096];
    for (int i = 0; i < 4096; i++)
        data[i] = (float)(i % 7);
    kiln_tensor *big = kiln_from_data(ctx, KILN_F32, 1, (int64_t[]){4096}, data);
    const kiln_expr *n = kiln_variable(ctx, "n", 1, 4096);
    enum { CALLS = 2000 };
    static double times[CALLS];
    for (int i = 0; i < CALLS; i++) {
        double t0 = bench_now_ms();
        kiln_scope_begin(ctx); /* each call's tensors and storage are given back */
        const kiln_expr *b = kiln_bind(ctx, n, 1 + (i * 37) % 4096);
        float s;
        if (kiln_read(kiln_sum(kiln_narrow_sym(big, 0, kiln_int(ctx, 0), b), 0, NULL, false), &s,
                      sizeof s) != KILN_OK) {
            fprintf(stderr, "per-call: %s\n", kiln_context_message(ctx));
            return 1;
        }
        kiln_scope_end(ctx, 0, NULL);
        times[i] = bench_now_ms() - t0;
    }
    qsort(times, CALLS, sizeof times[0], bench_cmp_double);
    *median_ms = times[CALLS / 2];
    printf("per-call compiles: %llu (for %d calls)\n",
           (unsigned long long)kiln_context_stats(ctx).kernels_compiled, CALLS);
    kiln_context_destroy(ctx);
    return 0;
}

int main(int argc, char **argv) {
    double sym_ms, con_ms, call_ms;
    if (argc > 1) { /* "per-call": only the per-call loop (for profiling) */
        (void)argv;
        return per_call(&call_ms) ? 1 : (printf("per call %.4f ms\n", call_ms), 0);
    }
    uint64_t sym_compiles, con_compiles;
    /* Every compile is a real one: neither Kiln's disk cache nor Mesa's serves earlier runs. */
    setenv("KILN_CACHE", "0", 1);
    setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
    if (mlp(true, &sym_ms, &sym_compiles) || mlp(false, &con_ms, &con_compiles) ||
        per_call(&call_ms))
        return 1;
    printf("%-40s %10s %10s\n", "case", "compiles", "wall ms");
    printf("%-40s %10llu %10.1f\n", "MLP, batch 1..64, symbolic batch",
           (unsigned long long)sym_compiles, sym_ms);
    printf("%-40s %10llu %10.1f\n", "MLP, batch 1..64, every size concrete",
           (unsigned long long)con_compiles, con_ms);
    printf("ratio (concrete / symbolic wall time): %.2f\n", con_ms / sym_ms);
    printf("small symbolic sum, per call (median of 2000): %.4f ms\n", call_ms);
    return 0;
}
