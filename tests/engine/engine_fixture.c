#include "engine_fixture.h"

#include "eng.h"
#include "vk_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The validation counts seen at the last check, per context (tests use few contexts). */
enum { MAX_TRACKED = 8 };
static struct {
    const kiln_context *ctx;
    vkd_message_counts counts;
} tracked[MAX_TRACKED];

static vkd_message_counts *last_counts(const kiln_context *ctx) {
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (tracked[i].ctx == ctx)
            return &tracked[i].counts;
    }
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (!tracked[i].ctx) {
            tracked[i].ctx = ctx;
            memset(&tracked[i].counts, 0, sizeof tracked[i].counts);
            return &tracked[i].counts;
        }
    }
    return NULL;
}

static void forget(const kiln_context *ctx) {
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (tracked[i].ctx == ctx)
            tracked[i].ctx = NULL;
    }
}

void eng_fixture_assert_no_messages(kiln_context *ctx) {
    if (!ctx->inst)
        return;
    vkd_message_counts c = vkd_instance_messages(ctx->inst);
    vkd_message_counts *last = last_counts(ctx);
    assert_non_null(last);
    uint32_t errors = c.errors - last->errors, warnings = c.warnings - last->warnings;
    *last = c;
    if (errors || warnings)
        fail_msg("the validation layer reported %u errors and %u warnings", errors, warnings);
}

void eng_fixture_context_destroy(kiln_context *ctx) {
    if (!ctx)
        return;
    eng_fixture_assert_no_messages(ctx);
    forget(ctx);
    kiln_context_destroy(ctx);
}

void fx_expect_message(kiln_context *ctx, kiln_status status, const char *begins, ...) {
    const char *msg = kiln_context_message(ctx);
    if (kiln_context_status(ctx) != status)
        fail_msg("status %s, expected %s (%s)", kiln_status_string(kiln_context_status(ctx)),
                 kiln_status_string(status), msg);
    size_t n = begins ? strlen(begins) : 0;
    if (begins && (strncmp(msg, begins, n) != 0 || msg[n] != ':'))
        fail_msg("the message \"%s\" does not begin with \"%s:\"", msg, begins);
    va_list ap;
    va_start(ap, begins);
    for (const char *want; (want = va_arg(ap, const char *)) != NULL;) {
        if (!strstr(msg, want))
            fail_msg("the message \"%s\" does not contain \"%s\"", msg, want);
    }
    va_end(ap);
    kiln_context_clear_error(ctx);
}

bool fx_gpu_tuned(const kiln_context *ctx) {
    return ctx->parallelism > 2048;
}

bool fx_octets(const kiln_context *ctx) {
    return ctx->interpreter || (!fx_gpu_tuned(ctx) && vkd_device_caps(ctx->dev)->int64);
}

bool fx_subgroup_ballot(const kiln_context *ctx) {
    return ctx->interpreter ||
           (vkd_device_caps(ctx->dev)->subgroup_operations & VK_SUBGROUP_FEATURE_BALLOT_BIT);
}

bool fx_timestamps(const kiln_context *ctx) {
    return !ctx->interpreter && vkd_device_caps(ctx->dev)->timestamps;
}

uint32_t fx_kernel_buffers(const kiln_context *ctx) {
    return eng_kernel_max_descriptors(ctx);
}

kiln_context *eng_context_new(bool device) {
    static bool loaded;
    if (!loaded) {
        vk_fixture_keep_drivers_loaded();
        loaded = true;
    }
    kiln_context_options opt = {.device = device ? NULL : "interp", .validation = device};
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&opt, &ctx);
    if (st != KILN_OK) {
        fprintf(stderr, "engine fixture: no context: %s\n", kiln_status_string(st));
        return NULL;
    }
    return ctx;
}

static int setup(void **state, bool device) {
    eng_fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->device = device;
    f->ctx = eng_context_new(device);
    if (!f->ctx) {
        free(f);
        return -1;
    }
    if (device && (!f->ctx->inst || !vkd_instance_validation(f->ctx->inst))) {
        fprintf(stderr, "engine fixture: no Vulkan device with the validation layer\n");
        kiln_context_destroy(f->ctx);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

int eng_fixture_setup_device(void **state) {
    return setup(state, true);
}

bool eng_fixture_interp_wanted(void) {
    const char *only = getenv("KILN_TEST_DEVICE_ONLY");
    return !(only && strcmp(only, "1") == 0);
}

int eng_fixture_setup_interp(void **state) {
    return setup(state, false);
}

int eng_fixture_teardown(void **state) {
    eng_fixture *f = *state;
    if (!f)
        return 0;
    forget(f->ctx);
    kiln_context_destroy(f->ctx);
    free(f);
    return 0;
}

int eng_fixture_check(void **state) {
    eng_fixture *f = *state;
    kiln_status st = kiln_context_status(f->ctx);
    if (st != KILN_OK) {
        fprintf(stderr, "the test left an error: %s\n", kiln_context_message(f->ctx));
        kiln_context_clear_error(f->ctx);
        return -1;
    }
    eng_fixture_assert_no_messages(f->ctx);
    return 0;
}

kiln_context *fx_ctx(void **state) {
    return ((eng_fixture *)*state)->ctx;
}

kiln_context *fx_ctx_without_foresight(void **state) {
    bool device = ((eng_fixture *)*state)->device;
    kiln_context_options opt = {.device = device ? NULL : "interp", .validation = device};
    kiln_context *ctx = NULL;
    assert_int_equal(eng_testing_context_create(&opt, &(eng_testing){.no_foresight = true}, &ctx),
                     KILN_OK);
    return ctx;
}

kiln_tensor *fx_f32(kiln_context *ctx, uint32_t ndim, const int64_t *shape, const float *data) {
    kiln_tensor *t = kiln_from_data(ctx, KILN_F32, ndim, shape, data);
    assert_non_null(t);
    return t;
}

kiln_tensor *fx_i32(kiln_context *ctx, uint32_t ndim, const int64_t *shape, const int32_t *data) {
    kiln_tensor *t = kiln_from_data(ctx, KILN_I32, ndim, shape, data);
    assert_non_null(t);
    return t;
}

void fx_assert_shape(kiln_tensor *t, uint32_t ndim, const int64_t *shape) {
    assert_non_null(t);
    assert_int_equal(kiln_tensor_ndim(t), ndim);
    int64_t got[KILN_MAX_DIMS];
    assert_int_equal(kiln_tensor_shape(t, got), KILN_OK);
    for (uint32_t d = 0; d < ndim; d++)
        assert_int_equal(got[d], shape[d]);
}

void fx_read(kiln_tensor *t, kiln_dtype dtype, void *out, size_t n) {
    assert_non_null(t);
    assert_int_equal(kiln_tensor_dtype(t), dtype);
    int64_t numel;
    assert_int_equal(kiln_tensor_numel(t, &numel), KILN_OK);
    assert_int_equal(numel, (int64_t)n);
    kiln_status st = kiln_read(t, out, n * kiln_dtype_size(dtype));
    if (st != KILN_OK)
        fail_msg("kiln_read: %s (%s)", kiln_status_string(st),
                 kiln_context_message(kiln_tensor_context(t)));
}

void fx_check_f32(kiln_tensor *t, const float *want, size_t n, double atol, double rtol) {
    float *got = malloc((n ? n : 1) * sizeof *got);
    assert_non_null(got);
    fx_read(t, KILN_F32, got, n);
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        bool ok = isnan(w) ? isnan(g) : isinf(w) ? g == w : fabs(g - w) <= atol + rtol * fabs(w);
        if (!ok) {
            free(got);
            fail_msg("element %zu: got %.9g, want %.9g (atol %g, rtol %g)", i, g, w, atol, rtol);
        }
    }
    free(got);
}

void fx_check_i32(kiln_tensor *t, const int32_t *want, size_t n) {
    int32_t *got = malloc((n ? n : 1) * sizeof *got);
    assert_non_null(got);
    fx_read(t, KILN_I32, got, n);
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            int32_t g = got[i];
            free(got);
            fail_msg("element %zu: got %d, want %d", i, g, want[i]);
        }
    }
    free(got);
}

bool fx_unsupported_i64(kiln_tensor *t) {
    assert_non_null(t);
    kiln_context *ctx = kiln_tensor_context(t);
    if (kiln_dtype_supported(ctx, KILN_I64))
        return false;
    int64_t numel = 0;
    assert_int_equal(kiln_tensor_numel(t, &numel), KILN_OK);
    size_t bytes = (size_t)(numel ? numel : 1) * kiln_dtype_size(kiln_tensor_dtype(t));
    void *got = malloc(bytes);
    assert_non_null(got);
    kiln_status st = kiln_read(t, got, (size_t)numel * kiln_dtype_size(kiln_tensor_dtype(t)));
    free(got);
    if (st != KILN_ERROR_UNSUPPORTED)
        fail_msg("a read needing 64-bit integers on %s (no shaderInt64): %s, want "
                 "KILN_ERROR_UNSUPPORTED",
                 kiln_context_device_name(ctx), kiln_status_string(st));
    fx_expect_message(ctx, KILN_ERROR_UNSUPPORTED, "kiln_read", "shaderInt64", NULL);
    return true;
}

void fx_check_i64(kiln_tensor *t, const int64_t *want, size_t n) {
    if (fx_unsupported_i64(t))
        return;
    int64_t *got = malloc((n ? n : 1) * sizeof *got);
    assert_non_null(got);
    fx_read(t, KILN_I64, got, n);
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            long long g = got[i];
            free(got);
            fail_msg("element %zu: got %lld, want %lld", i, g, (long long)want[i]);
        }
    }
    free(got);
}

void fx_check_u8(kiln_tensor *t, kiln_dtype dtype, const uint8_t *want, size_t n) {
    uint8_t *got = malloc(n ? n : 1);
    assert_non_null(got);
    fx_read(t, dtype, got, n);
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            unsigned g = got[i];
            free(got);
            fail_msg("element %zu: got %u, want %u", i, g, (unsigned)want[i]);
        }
    }
    free(got);
}

void fx_expect_error(kiln_context *ctx, kiln_status status) {
    assert_int_equal(kiln_context_status(ctx), status);
    const char *msg = kiln_context_message(ctx);
    assert_non_null(msg);
    assert_true(msg[0] != '\0');
    kiln_context_clear_error(ctx);
    assert_int_equal(kiln_context_status(ctx), KILN_OK);
}

void fx_conv2d_host(const float *x, const float *w, const int64_t wstride[4], int n, int c, int s,
                    int o, int k, int pad, float *out) {
    int os = s + 2 * pad - k + 1;
    for (int b = 0; b < n; b++)
        for (int f = 0; f < o; f++)
            for (int i = 0; i < os; i++)
                for (int j = 0; j < os; j++) {
                    double acc = 0;
                    for (int ch = 0; ch < c; ch++)
                        for (int kh = 0; kh < k; kh++)
                            for (int kw = 0; kw < k; kw++) {
                                int y = i + kh - pad, z = j + kw - pad;
                                if (y >= 0 && y < s && z >= 0 && z < s)
                                    acc += (double)x[((b * c + ch) * s + y) * s + z] *
                                           w[f * wstride[0] + ch * wstride[1] + kh * wstride[2] +
                                             kw * wstride[3]];
                            }
                    out[((b * o + f) * os + i) * os + j] = (float)acc;
                }
}

void fx_conv2d_weight_grad_host(const float *x, const float *g, int n, int c, int s, int o, int k,
                                int pad, float *dw) {
    int os = s + 2 * pad - k + 1;
    for (int f = 0; f < o; f++)
        for (int ch = 0; ch < c; ch++)
            for (int t = 0; t < k * k; t++) {
                double acc = 0;
                for (int b = 0; b < n; b++)
                    for (int i = 0; i < os; i++)
                        for (int j = 0; j < os; j++) {
                            int y = i + t / k - pad, z = j + t % k - pad;
                            if (y >= 0 && y < s && z >= 0 && z < s)
                                acc += (double)x[((b * c + ch) * s + y) * s + z] *
                                       (g ? g[((b * o + f) * os + i) * os + j] : 1.0f);
                        }
                dw[(f * c + ch) * k * k + t] = (float)acc;
            }
}

void fx_conv2d_input_grad_host(const float *g, const float *w, int n, int c, int s, int o, int k,
                               int stride, int pad, float *dx) {
    int os = (s + 2 * pad - k) / stride + 1;
    for (int b = 0; b < n; b++)
        for (int ch = 0; ch < c; ch++)
            for (int y = 0; y < s; y++)
                for (int z = 0; z < s; z++) {
                    double acc = 0; /* the outputs whose windows hold (y, z), by their taps */
                    for (int f = 0; f < o; f++)
                        for (int t = 0; t < k * k; t++) {
                            int pi = y + pad - t / k, pj = z + pad - t % k; /* stride x output's */
                            int i = pi / stride, j = pj / stride;
                            if (pi < 0 || pj < 0 || pi % stride || pj % stride || i >= os ||
                                j >= os)
                                continue;
                            acc += (double)(g ? g[((b * o + f) * os + i) * os + j] : 1.0f) *
                                   w[(f * c + ch) * k * k + t];
                        }
                    dx[((b * c + ch) * s + y) * s + z] = (float)acc;
                }
}

kiln_tensor *fx_images(kiln_tensor *flat, int64_t n, int64_t max, int64_t c, int64_t h, int64_t w) {
    kiln_context *ctx = kiln_tensor_context(flat);
    const kiln_expr *batch = kiln_bind(ctx, kiln_variable(ctx, "images", 1, max), n);
    const kiln_expr *shape[4] = {batch, kiln_int(ctx, c), kiln_int(ctx, h), kiln_int(ctx, w)};
    return kiln_reshape_sym(flat, 4, shape);
}

void fx_host_softmax(const float *x, size_t rows, size_t cols, float *out) {
    for (size_t r = 0; r < rows; r++) {
        double m = -1e30, sum = 0;
        for (size_t c = 0; c < cols; c++)
            m = x[r * cols + c] > m ? x[r * cols + c] : m;
        for (size_t c = 0; c < cols; c++)
            sum += exp(x[r * cols + c] - m);
        for (size_t c = 0; c < cols; c++)
            out[r * cols + c] = (float)(exp(x[r * cols + c] - m) / sum);
    }
}
