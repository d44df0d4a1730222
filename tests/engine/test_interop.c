/* engine/: Vulkan interop (kiln_vulkan.h). The "application" here is vk/ used directly: it owns
 * the instance, the device and a buffer; Kiln runs on them without copying the buffer. */
#include "vk_fixture.h"

#include <kiln/kiln_vulkan.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

typedef struct app {
    vk_fixture *vk; /* the application's instance and device (validation on) */
    kiln_context *ctx;
} app;

/* The fixture's device as the application hands it to Kiln: with its 8-bit features (as it
 * enabled them), or with none (an application that enabled no 8-bit storage). */
static kiln_vulkan_device app_device(const app *a, bool eight_bit) {
    const vkd_device_info *info = vkd_device_info_of(a->vk->dev);
    const vkd_caps *caps = vkd_device_caps(a->vk->dev);
    return (kiln_vulkan_device){
        .instance = vkd_instance_handle(a->vk->inst),
        .physical_device = info->physical,
        .device = vkd_device_handle(a->vk->dev),
        .queue_family = (uint32_t)info->compute_family,
        .api_version = info->api_version,
        .shader_int8 = eight_bit && caps->int8,
        .storage_buffer_8bit = eight_bit && caps->storage_buffer_8bit,
    };
}

static int setup(void **state) {
    app *a = calloc(1, sizeof *a);
    void *vk = NULL;
    if (!a || vk_fixture_setup(&vk) != 0)
        return -1;
    a->vk = vk;
    kiln_vulkan_device vd = app_device(a, true);
    if (kiln_context_create_vulkan(&vd, NULL, &a->ctx) != KILN_OK)
        return -1;
    *state = a;
    return 0;
}

static int teardown(void **state) {
    app *a = *state;
    kiln_context_destroy(a->ctx);
    void *vk = a->vk;
    int r = vk_fixture_teardown(&vk);
    free(a);
    return r;
}

/* The application's (4, 3) row-major matrix, wrapped as its transpose (3, 4) with strides
 * (1, 3): Kiln sums the rows of the transpose = the columns of the matrix. */
static void test_engine_interop_wrapped_buffer_is_read_in_place(void **state) {
    app *a = *state;
    base_error err = {0};
    vkd_buffer *buf = NULL;
    float m[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    assert_int_equal(vkd_buffer_create(a->vk->dev, sizeof m, &buf, &err), KILN_OK);
    assert_int_equal(vkd_buffer_upload(buf, 0, m, sizeof m, &err), KILN_OK);
    kiln_tensor *t =
        kiln_tensor_from_vulkan_buffer(a->ctx, vkd_buffer_handle(buf), sizeof m, KILN_F32, 2,
                                       (int64_t[]){3, 4}, (int64_t[]){1, 3}, 0);
    assert_non_null(t);
    float sums[3];
    kiln_stats before = kiln_context_stats(a->ctx);
    assert_int_equal(kiln_read(kiln_sum(t, 1, (int32_t[]){1}, false), sums, sizeof sums), KILN_OK);
    assert_true(sums[0] == 1 + 4 + 7 + 10 && sums[1] == 2 + 5 + 8 + 11 &&
                sums[2] == 3 + 6 + 9 + 12);
    assert_int_equal(kiln_context_stats(a->ctx).bytes_uploaded - before.bytes_uploaded, 0);
    /* A write through the wrapped view lands in the application's buffer: column 0 = -1. */
    assert_int_equal(kiln_fill_(kiln_select(t, 0, 0), -1), KILN_OK);
    assert_int_equal(kiln_realize(t), KILN_OK);
    float back[12];
    assert_int_equal(vkd_buffer_download(buf, 0, back, sizeof back, &err), KILN_OK);
    for (int i = 0; i < 12; i++)
        assert_true(back[i] == (i % 3 == 0 ? -1.0f : m[i]));
    /* A view outside the buffer is refused. */
    assert_null(kiln_tensor_from_vulkan_buffer(a->ctx, vkd_buffer_handle(buf), sizeof m, KILN_F32,
                                               1, (int64_t[]){13}, (int64_t[]){1}, 0));
    kiln_context_clear_error(a->ctx);
    vkd_buffer_destroy(buf);
    vk_fixture_assert_no_messages(a->vk);
}

/* A Kiln result's VkBuffer, offset and strides address its elements for the application. */
static void test_engine_interop_result_buffer_is_addressable(void **state) {
    app *a = *state;
    kiln_tensor *x = kiln_arange(a->ctx, KILN_F32, 0, 12, 1);
    kiln_tensor *v = kiln_flip(kiln_reshape(kiln_mul_scalar(x, 3), 2, (int64_t[]){3, 4}), 1);
    VkBuffer handle;
    VkDeviceSize size;
    int64_t offset, strides[2];
    assert_int_equal(kiln_tensor_vulkan_buffer(v, &handle, &size, &offset, strides), KILN_OK);
    int64_t elements;
    assert_int_equal(kiln_tensor_storage_size(v, &elements), KILN_OK);
    assert_int_equal(elements, 12);
    assert_true(size >= 12 * sizeof(float)); /* a pooled buffer's size class */
    assert_int_equal(offset, 3);
    assert_int_equal(strides[0], 4);
    assert_int_equal(strides[1], -1);
    /* The application reads the buffer with those numbers. */
    base_error err = {0};
    vkd_buffer *mine = NULL;
    assert_int_equal(vkd_buffer_wrap(a->vk->dev, handle, size, &mine, &err), KILN_OK);
    float storage[12];
    assert_int_equal(vkd_buffer_download(mine, 0, storage, sizeof storage, &err), KILN_OK);
    for (int64_t i = 0; i < 3; i++) {
        for (int64_t j = 0; j < 4; j++) /* v[i][j] = 3 * (4i + 3 - j) */
            assert_true(storage[offset + i * strides[0] + j * strides[1]] ==
                        (float)(3 * (4 * i + 3 - j)));
    }
    vkd_buffer_destroy(mine); /* unwraps only: the buffer stays Kiln's */
    vk_fixture_assert_no_messages(a->vk);
}

/* An application that enabled no 8-bit storage: Kiln accesses its u8 buffers as 32-bit words
 * (docs/gpus.md), so a buffer must hold whole words; in one, the elements are the bytes. */
static void test_engine_interop_packed_u8_buffer(void **state) {
    app *a = *state;
    kiln_vulkan_device vd = app_device(a, false);
    kiln_context *ctx = NULL;
    assert_int_equal(kiln_context_create_vulkan(&vd, NULL, &ctx), KILN_OK);
    base_error err = {0};
    vkd_buffer *buf = NULL;
    uint8_t bytes[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 254, 0xaa};
    assert_int_equal(vkd_buffer_create(a->vk->dev, sizeof bytes, &buf, &err), KILN_OK);
    assert_int_equal(vkd_buffer_upload(buf, 0, bytes, sizeof bytes, &err), KILN_OK);
    assert_null(kiln_tensor_from_vulkan_buffer(ctx, vkd_buffer_handle(buf), 11, KILN_U8, 1,
                                               (int64_t[]){11}, (int64_t[]){1}, 0));
    assert_int_equal(kiln_context_status(ctx), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_context_message(ctx), "multiple of 4"));
    kiln_context_clear_error(ctx);
    /* 11 elements of a 12-byte buffer: x[1::2] += 1 in place (254 + 1 = 255; byte 11 kept) */
    kiln_tensor *x = kiln_tensor_from_vulkan_buffer(ctx, vkd_buffer_handle(buf), sizeof bytes,
                                                    KILN_U8, 1, (int64_t[]){11}, (int64_t[]){1}, 0);
    assert_non_null(x);
    kiln_tensor *one = kiln_full(ctx, KILN_U8, 1, (int64_t[]){1}, 1);
    assert_int_equal(kiln_add_(kiln_slice(x, 0, 1, 11, 2), one), KILN_OK);
    assert_int_equal(kiln_add_(kiln_slice(x, 0, 10, 11, 1), one), KILN_OK);
    assert_int_equal(kiln_realize(x), KILN_OK);
    uint8_t back[12];
    assert_int_equal(vkd_buffer_download(buf, 0, back, sizeof back, &err), KILN_OK);
    static const uint8_t want[12] = {1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 255, 0xaa};
    assert_memory_equal(back, want, sizeof want);
    kiln_context_destroy(ctx);
    vkd_buffer_destroy(buf);
    vk_fixture_assert_no_messages(a->vk);
}

/* The same sums realized on Kiln's buffers, then on the application's: sum(relu(2x)) and
 * sum(x + 1) of 12 elements, four times in a scope each; x is Kiln's (read as texels on a CPU
 * device) the first three times, the application's buffer (read as a storage buffer: other
 * variants of the kernels, compiled then) the fourth. The third realize takes its kernels as
 * the second built them (engine/schedule/plan.c); the fourth takes none that needed a variant
 * compiled: the sums right every time. */
static void test_engine_interop_kept_kernel_on_another_buffer(void **state) {
    app *a = *state;
    base_error err = {0};
    vkd_buffer *buf = NULL;
    float v[12];
    double relu2 = 0, plus1 = 0;
    for (int i = 0; i < 12; i++) {
        v[i] = (float)(i - 5);
        relu2 += v[i] > 0 ? 2.0 * v[i] : 0.0;
        plus1 += v[i] + 1.0;
    }
    assert_int_equal(vkd_buffer_create(a->vk->dev, sizeof v, &buf, &err), KILN_OK);
    assert_int_equal(vkd_buffer_upload(buf, 0, v, sizeof v, &err), KILN_OK);
    for (int step = 0; step < 4; step++) {
        kiln_scope_begin(a->ctx);
        kiln_tensor *x =
            step < 3
                ? kiln_from_data(a->ctx, KILN_F32, 1, (const int64_t[]){12}, v)
                : kiln_tensor_from_vulkan_buffer(a->ctx, vkd_buffer_handle(buf), sizeof v, KILN_F32,
                                                 1, (int64_t[]){12}, (int64_t[]){1}, 0);
        assert_non_null(x);
        assert_int_equal(kiln_realize(x), KILN_OK);
        kiln_tensor *sums[2] = {kiln_sum(kiln_relu(kiln_mul_scalar(x, 2)), 0, NULL, false),
                                kiln_sum(kiln_add_scalar(x, 1), 0, NULL, false)};
        kiln_stats before = kiln_context_stats(a->ctx);
        assert_int_equal(kiln_realize_many(a->ctx, 2, sums), KILN_OK);
        kiln_stats after = kiln_context_stats(a->ctx);
        float got[2];
        assert_int_equal(kiln_read(sums[0], &got[0], sizeof got[0]), KILN_OK);
        assert_int_equal(kiln_read(sums[1], &got[1], sizeof got[1]), KILN_OK);
        assert_true(got[0] == (float)relu2 && got[1] == (float)plus1);
        uint64_t kernels = after.dispatches - before.dispatches;
        uint64_t taken = after.builds_replayed - before.builds_replayed;
        if (step == 2)
            assert_int_equal(taken, kernels);
        /* a kernel compiled now (another variant) was built, never taken without its code */
        if (step == 3 && after.kernels_compiled > before.kernels_compiled)
            assert_true(taken < kernels);
        assert_int_equal(kiln_scope_end(a->ctx, 0, NULL), KILN_OK);
    }
    vkd_buffer_destroy(buf);
    vk_fixture_assert_no_messages(a->vk);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_interop_packed_u8_buffer),
        cmocka_unit_test(test_engine_interop_wrapped_buffer_is_read_in_place),
        cmocka_unit_test(test_engine_interop_result_buffer_is_addressable),
        cmocka_unit_test(test_engine_interop_kept_kernel_on_another_buffer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
