/* engine/: the smoke network of examples/cnn.c (examples/cnn_net.h) against NumPy's output for
 * the same inputs (examples/cnn_data.h, from tests/engine/fixtures/gen_cnn.py), on the Vulkan
 * device and on the interpreter. Tolerance: 1e-4 relative plus 1e-6 absolute per probability
 * (Kiln computes in f32, NumPy in f64 from the same f32 inputs; the observed error is ~1e-7). */

#include "../../examples/cnn_net.h"

#include "engine_fixture.h"

#include <kiln/kiln.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static void test_engine_cnn_forward_matches_numpy(void **state) {
    kiln_context *ctx = fx_ctx(state);
    float out[CNN_N * CNN_CLASSES];
    if (cnn_forward(ctx, out) != KILN_OK)
        fail_msg("cnn_forward: %s", kiln_context_message(ctx));
    for (int i = 0; i < CNN_N * CNN_CLASSES; i++) {
        double want = cnn_expected[i], diff = fabs((double)out[i] - want);
        if (diff > 1e-6 + 1e-4 * fabs(want))
            fail_msg("probability %d is %.9g, NumPy's %.9g", i, (double)out[i], want);
    }
    /* each row is a distribution */
    for (int n = 0; n < CNN_N; n++) {
        double sum = 0;
        for (int k = 0; k < CNN_CLASSES; k++)
            sum += out[n * CNN_CLASSES + k];
        assert_true(fabs(sum - 1) < 1e-5);
    }
}

/* conv2d with padding (the padded input is unfolded into windows): ones(1, 1, 3, 3) with a
 * ones 3x3 kernel and padding 1 counts each pixel's in-image neighbours. */
static void test_engine_cnn_conv2d_padding(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = kiln_ones(ctx, KILN_F32, 4, (int64_t[]){1, 1, 3, 3});
    kiln_tensor *w = kiln_ones(ctx, KILN_F32, 4, (int64_t[]){1, 1, 3, 3});
    float got[9];
    if (kiln_read(kiln_conv2d(x, w, 1, 1), got, sizeof got) != KILN_OK)
        fail_msg("conv2d: %s", kiln_context_message(ctx));
    const float want[9] = {4, 6, 4, 6, 9, 6, 4, 6, 4};
    for (int i = 0; i < 9; i++)
        assert_true(got[i] == want[i]);
    /* stride 2, padding 1 on a 4x4 arange: windows at rows/cols -1 and 1 */
    float data[16];
    for (int i = 0; i < 16; i++)
        data[i] = (float)i;
    kiln_tensor *a = kiln_from_data(ctx, KILN_F32, 4, (int64_t[]){1, 1, 4, 4}, data);
    float s[4];
    if (kiln_read(kiln_conv2d(a, w, 2, 1), s, sizeof s) != KILN_OK)
        fail_msg("conv2d: %s", kiln_context_message(ctx));
    /* (0,0): rows 0-1, cols 0-1 = 0+1+4+5; (0,1): rows 0-1, cols 1-3 = 1+2+3+5+6+7;
     * (1,0): rows 1-3, cols 0-1 = 4+5+8+9+12+13; (1,1): rows 1-3, cols 1-3 */
    const float want_s[4] = {10, 24, 51, 90};
    for (int i = 0; i < 4; i++)
        assert_true(s[i] == want_s[i]);
}

/* A channels-last input read through a permute, padded and convolved: one kernel on every
 * device (the product reads the windows straight from the permuted input, the padding folded
 * into its loads, the one filter's weights as stored: docs/convolution.md); the input is
 * neither made contiguous nor padded in memory first. Channel 0 holds 1 and channel 1 holds 10
 * everywhere, so each output is 11 times the pixel's in-image neighbour count. */
static void test_engine_cnn_permuted_padded_input_is_not_copied(void **state) {
    kiln_context *ctx = fx_ctx(state);
    float nhwc[18];
    for (int i = 0; i < 18; i++)
        nhwc[i] = i % 2 ? 10.0f : 1.0f;
    kiln_tensor *x = kiln_from_data(ctx, KILN_F32, 4, (int64_t[]){1, 3, 3, 2}, nhwc);
    kiln_tensor *w = kiln_ones(ctx, KILN_F32, 4, (int64_t[]){1, 2, 3, 3});
    assert_int_equal(kiln_realize(x), KILN_OK);
    assert_int_equal(kiln_realize(w), KILN_OK);
    kiln_tensor *y = kiln_conv2d(kiln_permute(x, (int32_t[]){0, 3, 1, 2}), w, 1, 1);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(y), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(after.dispatches - before.dispatches, 1);
    float got[9];
    assert_int_equal(kiln_read(y, got, sizeof got), KILN_OK);
    const float want[9] = {44, 66, 44, 66, 99, 66, 44, 66, 44};
    for (int i = 0; i < 9; i++)
        assert_true(got[i] == want[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_cnn_forward_matches_numpy),
        ENG_TEST(test_engine_cnn_conv2d_padding),
        ENG_TEST(test_engine_cnn_permuted_padded_input_is_not_copied),
    };
    int failed = ENG_RUN_BOTH(tests);
    return failed;
}
