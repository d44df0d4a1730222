/* Kiln's smoke test: a small convolutional network's forward pass, batch 8 (see cnn_net.h):
 * channels-last input read through a permuted view, two biased convolutions (kiln_conv2d_ex)
 * with relu, 2x2 max pooling over as_strided windows, a linear layer and softmax. It runs on
 * the default device and on the reference interpreter; both must agree with each other and
 * with NumPy's output for the same inputs (cnn_data.h), within 1e-4 relative (plus 1e-6
 * absolute). */
#include "cnn_net.h"

#include <math.h>
#include <stdio.h>

static const double rel_tol = 1e-4, abs_tol = 1e-6;

/* The largest |a - b| / (abs_tol + rel_tol |b|): above 1 is a disagreement. */
static double worst_ratio(const float *a, const float *b, double *largest) {
    double worst = 0;
    *largest = 0;
    for (int i = 0; i < CNN_N * CNN_CLASSES; i++) {
        double diff = fabs((double)a[i] - (double)b[i]);
        double ratio = diff / (abs_tol + rel_tol * fabs((double)b[i]));
        *largest = diff > *largest ? diff : *largest;
        worst = ratio > worst ? ratio : worst;
    }
    return worst;
}

static int run(const char *device, float *out, kiln_context **ctx_out) {
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&(kiln_context_options){.device = device}, &ctx);
    if (st != KILN_OK) {
        fprintf(stderr, "cnn: no context: %s\n", kiln_status_string(st));
        return 1;
    }
    *ctx_out = ctx;
    st = cnn_forward(ctx, out);
    if (st != KILN_OK) {
        fprintf(stderr, "cnn on %s: %s\n", kiln_context_device_name(ctx),
                kiln_context_message(ctx));
        return 1;
    }
    return 0;
}

int main(void) {
    static float dev_out[CNN_N * CNN_CLASSES], ref_out[CNN_N * CNN_CLASSES];
    kiln_context *dev = NULL, *ref = NULL;
    int failed = run(NULL, dev_out, &dev) || run("interp", ref_out, &ref);
    if (!failed) {
        double diff_ref, diff_numpy;
        double r_ref = worst_ratio(dev_out, ref_out, &diff_ref);
        double r_numpy = worst_ratio(dev_out, cnn_expected, &diff_numpy);
        printf("cnn forward pass, batch %d, (%d, %d, %d) channels-last input, on %s\n", CNN_N,
               CNN_H, CNN_W, CNN_C, kiln_context_device_name(dev));
        for (int n = 0; n < 2; n++)
            printf("probs[%d][0..4] = %.6f %.6f %.6f %.6f %.6f\n", n, dev_out[n * CNN_CLASSES],
                   dev_out[n * CNN_CLASSES + 1], dev_out[n * CNN_CLASSES + 2],
                   dev_out[n * CNN_CLASSES + 3], dev_out[n * CNN_CLASSES + 4]);
        printf("largest difference from the interpreter: %.3g (%s)\n", diff_ref,
               r_ref <= 1 ? "agrees" : "DISAGREES");
        printf("largest difference from NumPy:           %.3g (%s)\n", diff_numpy,
               r_numpy <= 1 ? "agrees" : "DISAGREES");
        kiln_stats s = kiln_context_stats(dev);
        printf("%s: %llu kernels compiled, %llu dispatches\n", kiln_context_device_name(dev),
               (unsigned long long)s.kernels_compiled, (unsigned long long)s.dispatches);
        failed = r_ref > 1 || r_numpy > 1;
    }
    kiln_context_destroy(dev);
    kiln_context_destroy(ref);
    return failed;
}
