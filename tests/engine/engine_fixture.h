/* The fixture of the engine tests: every test runs twice, once in a cmocka group whose context
 * is the default Vulkan device with the validation layer on, once in a group whose context is
 * the reference interpreter. After each test the context must hold no error and the validation
 * layer must have reported nothing. Helpers build f32/i32 tensors and compare read-backs with a
 * tolerance. */
#ifndef KILN_TESTS_ENGINE_FIXTURE_H
#define KILN_TESTS_ENGINE_FIXTURE_H

#include "eng_testing.h"

#include <kiln/kiln.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

typedef struct eng_fixture {
    kiln_context *ctx;
    bool device; /* false: the interpreter */
} eng_fixture;

/* cmocka group setup/teardown: *state becomes an eng_fixture *. */
int eng_fixture_setup_device(void **state);
int eng_fixture_setup_interp(void **state);
int eng_fixture_teardown(void **state);
/* Per-test teardown: fails on a recorded error or on a validation message. */
int eng_fixture_check(void **state);
/* Asserts that ctx's validation layer (if any) reported nothing since the last check. */
void eng_fixture_assert_no_messages(kiln_context *ctx);
/* Destroys a context a test created itself, after checking it caused no validation message
 * (its tracked counts are dropped, so a later context at the same address starts afresh). */
void eng_fixture_context_destroy(kiln_context *ctx);

/* Whether the interpreter's group runs: not when KILN_TEST_DEVICE_ONLY=1 (the second pass of
 * the tests under a device profile, which profiles do not change for the interpreter). */
bool eng_fixture_interp_wanted(void);
/* Runs tests on the device and on the interpreter; returns the number of failures. */
#define ENG_RUN_BOTH(tests)                                                                        \
    (cmocka_run_group_tests_name("device", tests, eng_fixture_setup_device,                        \
                                 eng_fixture_teardown) +                                           \
     (eng_fixture_interp_wanted()                                                                  \
          ? cmocka_run_group_tests_name("interpreter", tests, eng_fixture_setup_interp,            \
                                        eng_fixture_teardown)                                      \
          : 0))
#define ENG_TEST(f) cmocka_unit_test_teardown(f, eng_fixture_check)

/* A context for one backend (validation on for the device); the test destroys it. */
kiln_context *eng_context_new(bool device);
/* Whether ctx's kernels are tuned as for a GPU (engine/run/runtime.c eng_runtime_tune: one output
 * per invocation, 64 lanes per group reduction; any device that is not a CPU, or
 * eng_testing.gpu_tuning): tests whose kernel counts or summation order follow the tuning expect
 * the GPU's figures then. */
bool fx_gpu_tuned(const kiln_context *ctx);
/* Whether a CPU-tuned ctx moves runs of eight elements (octets, kernels_octets) and takes its
 * offsets' variants modulo 8: the interpreter, or a CPU device with shaderInt64 (eng_runtime_tune:
 * octets move as paired vectors of four, through 64-bit integers). A CPU device without
 * shaderInt64 (mobile-low on lavapipe) moves vectors of four at most, its variants modulo 4. */
bool fx_octets(const kiln_context *ctx);
/* Whether ctx's device has subgroup ballots, which a CPU's kernels need to share loads across
 * a subgroup (kernels_shared; eng_runtime_tune share_lanes): the interpreter runs the teams
 * itself (true); mobile-low has no subgroup operations (false). */
bool fx_subgroup_ballot(const kiln_context *ctx);
/* The most storage buffers (descriptors, windows included) one kernel of ctx binds
 * (eng_kernel_max_descriptors): the device's per-stage limit, less one where the parameters
 * may outgrow the push constants (mobile-low: 4 - 1); the scheduler splits what needs more. */
uint32_t fx_kernel_buffers(const kiln_context *ctx);
/* Whether ctx's device times kernels (timestamps on its compute queue; mobile-low has none):
 * only then do traces hold the kernels' device times. False for the interpreter. */
bool fx_timestamps(const kiln_context *ctx);
/* Asserts that ctx holds status with a message that begins with "begins:" (NULL: anywhere)
 * and contains each of the NULL-ended strings after it, then clears the error. */
void fx_expect_message(kiln_context *ctx, kiln_status status, const char *begins, ...);
kiln_context *fx_ctx(void **state);
/* A context of the fixture's backend (validation on for the device) that learns nothing from
 * earlier realizes (eng_testing no_foresight: no plans, every kernel built): what replay and
 * foresight are checked against. The test destroys it. */
kiln_context *fx_ctx_without_foresight(void **state);

kiln_tensor *fx_f32(kiln_context *ctx, uint32_t ndim, const int64_t *shape, const float *data);
/* flat as images (images, c, h, w), its batch the Variable "images" in [1, max] bound to n. */
kiln_tensor *fx_images(kiln_tensor *flat, int64_t n, int64_t max, int64_t c, int64_t h, int64_t w);
/* The softmax of each of rows rows of cols elements of x into out, computed in double. */
void fx_host_softmax(const float *x, size_t rows, size_t cols, float *out);
/* The host's convolution (stride 1, sums in double) of n images of c channels, s x s, by o
 * filters of k x k taps, padded by pad: out (n, o, s + 2 pad - k + 1, same), NCHW. Weight
 * (o, c, kh, kw) is w[o wstride[0] + c wstride[1] + kh wstride[2] + kw wstride[3]] (any
 * layout: (O, C, KH, KW) is {C K K, K K, K, 1}). */
void fx_conv2d_host(const float *x, const float *w, const int64_t wstride[4], int n, int c, int s,
                    int o, int k, int pad, float *out);
/* The host's weight gradient of that convolution for the output's gradient g (n, o, s + 2 pad
 * - k + 1, same; NULL: all ones, the gradient of the output's sum): dw (o, c, k, k), sums in
 * double. */
void fx_conv2d_weight_grad_host(const float *x, const float *g, int n, int c, int s, int o, int k,
                                int pad, float *dw);
/* The host's input gradient of a convolution of stride `stride` (otherwise as above) for the
 * output's gradient g (n, o, (s + 2 pad - k) / stride + 1, same; NULL: all ones, the gradient of
 * the output's sum) and weights w (o, c, k, k): dx (n, c, s, s), sums in double. */
void fx_conv2d_input_grad_host(const float *g, const float *w, int n, int c, int s, int o, int k,
                               int stride, int pad, float *dx);
kiln_tensor *fx_i32(kiln_context *ctx, uint32_t ndim, const int64_t *shape, const int32_t *data);

/* Asserts t's shape. */
void fx_assert_shape(kiln_tensor *t, uint32_t ndim, const int64_t *shape);
/* Reads t (of dtype and n elements) into out, asserting the status and the element count. */
void fx_read(kiln_tensor *t, kiln_dtype dtype, void *out, size_t n);
/* Reads an f32 tensor of n elements and compares it with want: |got - want| <= atol + rtol
 * |want| for every element (NaN matches NaN, infinities must be equal). */
void fx_check_f32(kiln_tensor *t, const float *want, size_t n, double atol, double rtol);
void fx_check_i32(kiln_tensor *t, const int32_t *want, size_t n);
/* An i64 tensor (integer sums and products, argmax) of n elements against want; on a device
 * without shaderInt64 (a profile's, mobile-low), the read must be KILN_ERROR_UNSUPPORTED naming
 * shaderInt64 instead. */
void fx_check_i64(kiln_tensor *t, const int64_t *want, size_t n);
/* On a device without shaderInt64: asserts that reading t (whose kernels need 64-bit integers)
 * is KILN_ERROR_UNSUPPORTED naming shaderInt64, clears the error and returns true. Elsewhere
 * (the interpreter included) returns false, reading nothing. */
bool fx_unsupported_i64(kiln_tensor *t);
void fx_check_u8(kiln_tensor *t, kiln_dtype dtype, const uint8_t *want, size_t n);
/* Asserts that the context holds an error status (not KILN_OK) with a non-empty message,
 * then clears it. */
void fx_expect_error(kiln_context *ctx, kiln_status status);

#endif
