/* vk/: the table-driven pipeline constructor and batches of dispatches. */
#include "spv.h"
#include "vk_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* The pattern kernel, written with spirv/'s builder (it replaced a checked-in spirv-as
 * fixture):
 *   out[i] = i * SCALE + push.bias for i < push.count, SCALE specialization constant 0;
 *   workgroup size 64; binding 0 is the output (NonReadable); push = {uint count, bias}. */
static spv_builder *pattern_builder;
static const uint32_t *pattern_spv;
static size_t pattern_words;

static int build_pattern(void) {
    base_error err = {0};
    if (spv_builder_create(&(spv_builder_options){.version = 0x10300}, &pattern_builder, &err) !=
        KILN_OK)
        return -1;
    spv_builder *b = pattern_builder;
    spv_id u32 = spv_type_int(b, 32, false);
    spv_id out = spv_storage_buffer(b, u32, 0, 0, SPV_ACCESS_WRITE);
    spv_id members[2] = {u32, u32};
    spv_id pc = spv_push_constants(b, 2, members, NULL);
    spv_id scale = spv_spec_int(b, u32, 0, 1);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size(b, fn, (const uint32_t[]){64, 1, 1});
    spv_id i =
        spv_composite_extract(b, spv_load(b, spv_builtin(b, SpvBuiltInGlobalInvocationId)), 0);
    spv_id count = spv_push_constant_load(b, pc, 0);
    spv_id body = spv_label(b), merge = spv_label(b);
    spv_id in_range = spv_binop(b, SpvOpULessThan, i, count);
    spv_selection_merge(b, merge);
    spv_branch_cond(b, in_range, body, merge);
    spv_block(b, body);
    spv_id bias = spv_push_constant_load(b, pc, 1);
    spv_id v = spv_binop(b, SpvOpIAdd, spv_binop(b, SpvOpIMul, i, scale), bias);
    spv_store(b, spv_buffer_element(b, out, i), v);
    spv_branch(b, merge);
    spv_block(b, merge);
    spv_return(b);
    spv_function_end(b);
    if (spv_builder_finish(b, &pattern_spv, &pattern_words, &err) != KILN_OK ||
        spv_validate(pattern_spv, pattern_words, VK_API_VERSION_1_1, &err) != KILN_OK) {
        fprintf(stderr, "pattern kernel: %s\n", base_error_message(&err));
        return -1;
    }
    return 0;
}

typedef struct push {
    uint32_t count;
    uint32_t bias;
} push;

static kiln_status make_pattern_pipeline(vkd_device *dev, uint32_t scale, vkd_pipeline **out,
                                         base_error *err) {
    VkSpecializationMapEntry entry = {.constantID = 0, .offset = 0, .size = 4};
    vkd_pipeline_desc desc = {
        .code = pattern_spv,
        .word_count = pattern_words,
        .binding_count = 1,
        .push_constant_size = sizeof(push),
        .spec_entries = &entry,
        .spec_entry_count = 1,
        .spec_data = &scale,
        .spec_data_size = sizeof scale,
        .debug_name = "pattern",
    };
    return vkd_pipeline_create(dev, &desc, out, err);
}

/* Runs the pattern kernel over n elements and checks out[i] = i * scale + bias. */
static void run_pattern(vkd_device *dev, uint32_t n, uint32_t scale, uint32_t bias) {
    base_error err = {0};
    vkd_pipeline *pipe = NULL;
    vkd_buffer *buf = NULL;
    vkd_batch *batch = NULL;
    assert_int_equal(make_pattern_pipeline(dev, scale, &pipe, &err), KILN_OK);
    assert_int_equal(vkd_buffer_create(dev, (uint64_t)n * 4 + 4, &buf, &err), KILN_OK);
    assert_int_equal(vkd_buffer_fill(buf, 0, (uint64_t)n * 4 + 4, 0xffffffffu, &err), KILN_OK);
    assert_int_equal(vkd_batch_create(dev, &batch, &err), KILN_OK);
    push pc = {n, bias};
    vkd_binding b = {.buffer = buf};
    uint32_t groups[3] = {(n + 63) / 64, 1, 1};
    assert_int_equal(vkd_batch_dispatch(batch, pipe, &b, 1, &pc, sizeof pc, groups, &err), KILN_OK);
    assert_int_equal(vkd_batch_submit(batch, &err), KILN_OK);
    uint32_t *out = malloc((size_t)n * 4 + 4);
    assert_int_equal(vkd_buffer_download(buf, 0, out, (uint64_t)n * 4 + 4, &err), KILN_OK);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(out[i], i * scale + bias);
    assert_int_equal(out[n], 0xffffffffu); /* the bounds check held */
    free(out);
    vkd_batch_destroy(batch);
    vkd_buffer_destroy(buf);
    vkd_pipeline_destroy(pipe);
}

static void test_vk_pipeline_fixture_writes_pattern(void **state) {
    vk_fixture *f = *state;
    run_pattern(f->dev, 1000, 3, 7);
    run_pattern(f->dev, 1, 5, 0); /* a different specialization, one element */
    vk_fixture_assert_no_messages(f);
}

static void test_vk_pipeline_staged_device_runs_pattern(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    vkd_device_options opt = {.force_staging = true};
    vkd_device *dev = NULL;
    assert_int_equal(vkd_device_create(f->inst, f->device_index, &opt, &dev, &err), KILN_OK);
    run_pattern(dev, 777, 2, 11);
    vkd_device_destroy(dev);
    vk_fixture_assert_no_messages(f);
}

/* A grid beyond the (test-lowered) workgroup-count limit is split, not truncated. */
static void test_vk_pipeline_large_grid_is_split(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    vkd_device_options opt = {.max_workgroup_count = 3};
    vkd_device *dev = NULL;
    assert_int_equal(vkd_device_create(f->inst, f->device_index, &opt, &dev, &err), KILN_OK);
    run_pattern(dev, 64 * 10 - 5, 1, 100); /* 10 groups: dispatched as 3 + 3 + 3 + 1 */
    vkd_device_destroy(dev);
    vk_fixture_assert_no_messages(f);
}

/* A fence wait polls for a while, then blocks: both ends give the same results. */
static void test_vk_pipeline_fence_wait_polls_then_blocks(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: one poll, then vkWaitForFences; pass 1: polls for up to 10 s */
        vkd_device_options opt = {.fence_spin_ns = pass == 0 ? 1 : 10ull * 1000 * 1000 * 1000};
        vkd_device *dev = NULL;
        assert_int_equal(vkd_device_create(f->inst, f->device_index, &opt, &dev, &err), KILN_OK);
        run_pattern(dev, 1 << 20, 3, 1); /* about a millisecond on lavapipe */
        run_pattern(dev, 5, 2, 9);
        vkd_stats s = vkd_device_stats(dev);
        assert_true(s.waits_polled + s.waits_blocked >= 2);
        if (pass == 1)
            assert_int_equal(s.waits_blocked, 0);
        else
            assert_true(s.waits_blocked >= 1); /* the large pattern outlasts one poll */
        vkd_device_destroy(dev);
    }
    vk_fixture_assert_no_messages(f);
}

/* Many dispatches in one batch, each with its own push constants, in order, timed. */
static void test_vk_pipeline_batch_orders_dispatches(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    vkd_pipeline *pipe = NULL;
    vkd_buffer *buf = NULL;
    vkd_batch *batch = NULL;
    assert_int_equal(make_pattern_pipeline(f->dev, 1, &pipe, &err), KILN_OK);
    assert_int_equal(vkd_buffer_create(f->dev, 4 * 256, &buf, &err), KILN_OK);
    assert_int_equal(vkd_batch_create(f->dev, &batch, &err), KILN_OK);
    vkd_binding b = {.buffer = buf};
    const uint32_t rounds = 70; /* more than one pool of descriptor sets and timestamps */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t k = 0; k < rounds; k++) {
            /* Later dispatches overwrite a shorter prefix: the last writer must win. */
            push pc = {256 - k, 1000 * k};
            uint32_t groups[3] = {4, 1, 1};
            assert_int_equal(vkd_batch_dispatch(batch, pipe, &b, 1, &pc, sizeof pc, groups, &err),
                             KILN_OK);
        }
        assert_int_equal(vkd_batch_dispatch_count(batch), rounds);
        assert_int_equal(vkd_batch_submit(batch, &err), KILN_OK);
        uint32_t out[256];
        assert_int_equal(vkd_buffer_download(buf, 0, out, sizeof out, &err), KILN_OK);
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t last = 256 - i <= rounds - 1 ? 256 - i - 1 : rounds - 1;
            if (i >= 256 - (rounds - 1))
                last = 256 - i - 1; /* dispatch k covers i < 256 - k */
            assert_int_equal(out[i], i + 1000 * last);
        }
        uint64_t ns;
        if (vkd_device_caps(f->dev)->timestamps) {
            /* pass 0 times every dispatch, pass 1 only the batch as a whole */
            assert_int_equal(vkd_batch_dispatch_time(batch, 0, &ns), pass == 0);
            assert_int_equal(vkd_batch_dispatch_time(batch, rounds - 1, &ns), pass == 0);
            assert_true(vkd_batch_total_time(batch, &ns));
        }
        assert_false(vkd_batch_dispatch_time(batch, rounds, &ns));
        /* A submitted batch must be reset before it records again. */
        uint32_t groups[3] = {1, 1, 1};
        push pc = {1, 0};
        assert_int_equal(vkd_batch_dispatch(batch, pipe, &b, 1, &pc, sizeof pc, groups, &err),
                         KILN_ERROR_INVALID_ARGUMENT);
        base_error_clear(&err);
        assert_int_equal(vkd_batch_reset(batch, &err), KILN_OK);
        vkd_batch_timing(batch, VKD_TIME_BATCH);
    }
    vkd_batch_destroy(batch);
    vkd_buffer_destroy(buf);
    vkd_pipeline_destroy(pipe);
    vk_fixture_assert_no_messages(f);
}

static void test_vk_pipeline_rejects_bad_descriptions(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    vkd_pipeline *pipe = NULL;
    uint32_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    vkd_pipeline_desc desc = {.code = junk, .word_count = 8, .binding_count = 1};
    assert_int_equal(vkd_pipeline_create(f->dev, &desc, &pipe, &err), KILN_ERROR_INVALID_SPIRV);
    assert_null(pipe);
    base_error_clear(&err);
    desc.code = pattern_spv;
    desc.word_count = pattern_words;
    desc.push_constant_size = vkd_device_caps(f->dev)->max_push_constants_size + 4;
    assert_int_equal(vkd_pipeline_create(f->dev, &desc, &pipe, &err), KILN_ERROR_LIMIT_EXCEEDED);
    assert_non_null(strstr(err.message, "push constants"));
    base_error_clear(&err);
    desc.push_constant_size = 6;
    assert_int_equal(vkd_pipeline_create(f->dev, &desc, &pipe, &err), KILN_ERROR_LIMIT_EXCEEDED);
    base_error_clear(&err);
    desc.push_constant_size = 8;
    desc.binding_count = VKD_MAX_BINDINGS + 1;
    assert_int_equal(vkd_pipeline_create(f->dev, &desc, &pipe, &err), KILN_ERROR_LIMIT_EXCEEDED);
    base_error_clear(&err);
    /* A dispatch whose push constants or bindings do not match is refused. */
    assert_int_equal(make_pattern_pipeline(f->dev, 1, &pipe, &err), KILN_OK);
    vkd_batch *batch = NULL;
    assert_int_equal(vkd_batch_create(f->dev, &batch, &err), KILN_OK);
    uint32_t groups[3] = {1, 1, 1};
    push pc = {1, 1};
    assert_int_equal(vkd_batch_dispatch(batch, pipe, NULL, 0, &pc, sizeof pc, groups, &err),
                     KILN_ERROR_INVALID_ARGUMENT);
    vkd_batch_destroy(batch);
    vkd_pipeline_destroy(pipe);
    vk_fixture_assert_no_messages(f);
}

/* Texel bindings (vkd_pipeline_desc.texel_bindings): out[i] = element i of binding 1 read as
 * a uniform texel buffer of R32G32B32A32_UINT texels (component i % 4 of texel i / 4), on a
 * buffer vkd_buffer_create made with its view; an application's buffer (no view) at that
 * binding, or a binding of two descriptors marked, is refused with a message. A device without
 * texel reads refuses the pipeline. */
static void test_vk_pipeline_texel_binding(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    spv_builder *b = NULL;
    assert_int_equal(spv_builder_create(&(spv_builder_options){.version = 0x10300}, &b, &err),
                     KILN_OK);
    spv_id u32 = spv_type_int(b, 32, false);
    spv_id out = spv_storage_buffer(b, u32, 0, 0, SPV_ACCESS_WRITE);
    spv_id in = spv_texel_buffer(b, 0, 1);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size(b, fn, (const uint32_t[]){64, 1, 1});
    spv_id i =
        spv_composite_extract(b, spv_load(b, spv_builtin(b, SpvBuiltInGlobalInvocationId)), 0);
    spv_id texel =
        spv_texel_fetch(b, in, spv_binop(b, SpvOpShiftRightLogical, i, spv_const_u32(b, 2)));
    spv_id v =
        spv_vector_extract_dynamic(b, texel, spv_binop(b, SpvOpBitwiseAnd, i, spv_const_u32(b, 3)));
    spv_store(b, spv_buffer_element(b, out, i), v);
    spv_return(b);
    spv_function_end(b);
    const uint32_t *words;
    size_t count;
    assert_int_equal(spv_builder_finish(b, &words, &count, &err), KILN_OK);
    if (spv_tools_available())
        assert_int_equal(spv_validate(words, count, VK_API_VERSION_1_1, &err), KILN_OK);
    vkd_pipeline_desc desc = {.code = words,
                              .word_count = count,
                              .binding_count = 2,
                              .texel_bindings = 2,
                              .debug_name = "texels"};
    vkd_pipeline *pipe = NULL;
    if (!vkd_device_caps(f->dev)->texel_fetch) {
        assert_int_equal(vkd_pipeline_create(f->dev, &desc, &pipe, &err),
                         KILN_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(err.message, "cannot be a texel buffer"));
        spv_builder_destroy(b);
        return;
    }
    desc.descriptor_counts = (const uint32_t[]){1, 2};
    assert_int_equal(vkd_pipeline_create(f->dev, &desc, &pipe, &err), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "an array of descriptors"));
    base_error_clear(&err);
    desc.descriptor_counts = NULL;
    assert_int_equal(vkd_pipeline_create(f->dev, &desc, &pipe, &err), KILN_OK);
    enum { N = 100 };
    uint32_t data[N], got[N];
    for (uint32_t k = 0; k < N; k++)
        data[k] = k * 2654435761u;
    vkd_buffer *src = NULL, *dst = NULL, *wrapped = NULL;
    vkd_batch *batch = NULL;
    assert_int_equal(vkd_buffer_create(f->dev, sizeof data, &src, &err), KILN_OK);
    assert_true(vkd_buffer_texels(src));
    assert_int_equal(vkd_buffer_upload(src, 0, data, sizeof data, &err), KILN_OK);
    assert_int_equal(vkd_buffer_create(f->dev, sizeof got, &dst, &err), KILN_OK);
    assert_int_equal(vkd_buffer_wrap(f->dev, vkd_buffer_handle(src), sizeof data, &wrapped, &err),
                     KILN_OK);
    assert_false(vkd_buffer_texels(wrapped));
    assert_int_equal(vkd_batch_create(f->dev, &batch, &err), KILN_OK);
    uint32_t groups[3] = {(N + 63) / 64, 1, 1};
    vkd_binding bad[2] = {{.buffer = dst}, {.buffer = wrapped}};
    assert_int_equal(vkd_batch_dispatch(batch, pipe, bad, 2, NULL, 0, groups, &err),
                     KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "texel binding"));
    base_error_clear(&err);
    vkd_batch_destroy(batch);
    batch = NULL;
    assert_int_equal(vkd_batch_create(f->dev, &batch, &err), KILN_OK);
    vkd_binding good[2] = {{.buffer = dst}, {.buffer = src}};
    groups[0] = 1; /* 64 invocations: elements 0 .. 63, texels 0 .. 15 */
    assert_int_equal(vkd_batch_dispatch(batch, pipe, good, 2, NULL, 0, groups, &err), KILN_OK);
    assert_int_equal(vkd_batch_submit(batch, &err), KILN_OK);
    assert_int_equal(vkd_buffer_download(dst, 0, got, 64 * 4, &err), KILN_OK);
    for (uint32_t k = 0; k < 64; k++)
        assert_int_equal(got[k], data[k]);
    vkd_batch_destroy(batch);
    vkd_buffer_destroy(wrapped);
    vkd_buffer_destroy(dst);
    vkd_buffer_destroy(src);
    vkd_pipeline_destroy(pipe);
    spv_builder_destroy(b);
    vk_fixture_assert_no_messages(f);
}

/* A kernel computing in 64-bit integers (out[i] = low word of i * i in u64). */
static kiln_status make_int64_pipeline(vkd_device *dev, spv_builder **builder, vkd_pipeline **out,
                                       base_error *err) {
    kiln_status st = spv_builder_create(&(spv_builder_options){.version = 0x10300}, builder, err);
    if (st != KILN_OK)
        return st;
    spv_builder *b = *builder;
    spv_id u32 = spv_type_int(b, 32, false), u64 = spv_type_int(b, 64, false);
    spv_id out_buf = spv_storage_buffer(b, u32, 0, 0, SPV_ACCESS_WRITE);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size(b, fn, (const uint32_t[]){64, 1, 1});
    spv_id i =
        spv_composite_extract(b, spv_load(b, spv_builtin(b, SpvBuiltInGlobalInvocationId)), 0);
    spv_id wide = spv_convert(b, SpvOpUConvert, u64, i);
    spv_id square = spv_binop(b, SpvOpIMul, wide, wide);
    spv_store(b, spv_buffer_element(b, out_buf, i), spv_convert(b, SpvOpUConvert, u32, square));
    spv_return(b);
    spv_function_end(b);
    const uint32_t *words;
    size_t count;
    if ((st = spv_builder_finish(b, &words, &count, err)) != KILN_OK ||
        (st = spv_validate(words, count, VK_API_VERSION_1_1, err)) != KILN_OK)
        return st;
    vkd_pipeline_desc desc = {
        .code = words, .word_count = count, .binding_count = 1, .debug_name = "int64"};
    return vkd_pipeline_create(dev, &desc, out, err);
}

/* A profile's device is created without the features the profile lacks, so the validation layer
 * reports a module that uses one (Int64 under mobile-low) and says nothing on the device as it
 * is (lavapipe has shaderInt64). */
static void test_vk_pipeline_profile_features_are_not_enabled(void **state) {
    vk_fixture *f = *state;
    base_error err = {0};
    spv_builder *b = NULL;
    vkd_pipeline *pipe = NULL;
    if (vkd_device_caps(f->dev)->int64) {
        assert_int_equal(make_int64_pipeline(f->dev, &b, &pipe, &err), KILN_OK);
        vkd_pipeline_destroy(pipe);
        spv_builder_destroy(b);
        vk_fixture_assert_no_messages(f);
    }
    vkd_device *low = NULL;
    vkd_device_options opt = {.profile = vkd_profile_find("mobile-low")};
    assert_int_equal(vkd_device_create(f->inst, f->device_index, &opt, &low, &err), KILN_OK);
    assert_false(vkd_device_caps(low)->int64);
    pipe = NULL;
    b = NULL;
    (void)make_int64_pipeline(low, &b, &pipe, &err); /* the driver may still build it */
    vkd_pipeline_destroy(pipe);
    spv_builder_destroy(b);
    vkd_device_destroy(low);
    assert_true(vk_fixture_take_errors(f) > 0);
    vk_fixture_assert_no_messages(f);
}

static int setup(void **state) {
    return build_pattern() == 0 ? vk_fixture_setup(state) : -1;
}

static int teardown(void **state) {
    spv_builder_destroy(pattern_builder);
    return vk_fixture_teardown(state);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vk_pipeline_fixture_writes_pattern),
        cmocka_unit_test(test_vk_pipeline_staged_device_runs_pattern),
        cmocka_unit_test(test_vk_pipeline_large_grid_is_split),
        cmocka_unit_test(test_vk_pipeline_fence_wait_polls_then_blocks),
        cmocka_unit_test(test_vk_pipeline_batch_orders_dispatches),
        cmocka_unit_test(test_vk_pipeline_rejects_bad_descriptions),
        cmocka_unit_test(test_vk_pipeline_texel_binding),
        cmocka_unit_test(test_vk_pipeline_profile_features_are_not_enabled),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
