/* Kiln's demo (./kiln.sh run): one softmax-attention block, out = softmax(Q K^T / sqrt(d)) V,
 * computed lazily on the default Vulkan device with K^T and a strided V read as views (no
 * copies), checked against Kiln's reference interpreter, with the statistics of both runs. */
#include <kiln/kiln.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { T = 48, D = 32 };

/* Builds the block in ctx and reads the (T, D) result into out. */
static kiln_status attention(kiln_context *ctx, float *out) {
    kiln_tensor *q = kiln_randn(ctx, KILN_F32, 2, (int64_t[]){T, D}, 1);
    kiln_tensor *k = kiln_randn(ctx, KILN_F32, 2, (int64_t[]){T, D}, 2);
    /* V is every other row of a (2T, D) tensor, read backwards: a view with stride -2 D. */
    kiln_tensor *v_all = kiln_randn(ctx, KILN_F32, 2, (int64_t[]){2 * T, D}, 3);
    kiln_tensor *v = kiln_slice(v_all, 0, INT64_MAX, INT64_MIN, -2);
    kiln_tensor *scores =
        kiln_mul_scalar(kiln_matmul(q, kiln_transpose(k, 0, 1)), 1.0 / sqrt((double)D));
    kiln_tensor *o = kiln_matmul(kiln_softmax(scores, -1), v);
    return kiln_read(o, out, sizeof(float) * T * D);
}

static void print_stats(const char *name, const kiln_context *ctx) {
    kiln_stats s = kiln_context_stats(ctx);
    printf("%-12s kernels compiled %llu, dispatches %llu, realizes %llu, uploaded %llu B, "
           "downloaded %llu B, device time %.3f ms\n",
           name, (unsigned long long)s.kernels_compiled, (unsigned long long)s.dispatches,
           (unsigned long long)s.realizes, (unsigned long long)s.bytes_uploaded,
           (unsigned long long)s.bytes_downloaded, (double)s.device_time_ns / 1e6);
}

int main(void) {
    static float device_out[T * D], interp_out[T * D];
    kiln_context *dev = NULL, *ref = NULL;
    kiln_status st = kiln_context_create(&(kiln_context_options){.timing = true}, &dev);
    if (st == KILN_OK)
        st = kiln_context_create(&(kiln_context_options){.device = "interp"}, &ref);
    if (st != KILN_OK) {
        fprintf(stderr, "attention: no context: %s\n", kiln_status_string(st));
        return 1;
    }
    st = attention(dev, device_out);
    if (st != KILN_OK) {
        fprintf(stderr, "attention on %s: %s\n", kiln_context_device_name(dev),
                kiln_context_message(dev));
        return 1;
    }
    st = attention(ref, interp_out);
    if (st != KILN_OK) {
        fprintf(stderr, "attention on the interpreter: %s\n", kiln_context_message(ref));
        return 1;
    }
    double worst = 0;
    for (int i = 0; i < T * D; i++) {
        double diff = fabs((double)device_out[i] - (double)interp_out[i]);
        worst = diff > worst ? diff : worst;
    }
    printf("softmax attention, T=%d, d=%d, on %s\n", T, D, kiln_context_device_name(dev));
    printf("out[0][0..3]   = % .6f % .6f % .6f % .6f\n", device_out[0], device_out[1],
           device_out[2], device_out[3]);
    printf("out[T-1][0..3] = % .6f % .6f % .6f % .6f\n", device_out[(T - 1) * D],
           device_out[(T - 1) * D + 1], device_out[(T - 1) * D + 2], device_out[(T - 1) * D + 3]);
    printf("largest difference from the interpreter: %.3g (%s)\n", worst,
           worst < 1e-4 ? "agrees" : "DISAGREES");
    print_stats(kiln_context_device_name(dev), dev);
    print_stats("interpreter", ref);
    kiln_context_destroy(dev);
    kiln_context_destroy(ref);
    return worst < 1e-4 ? 0 : 1;
}
