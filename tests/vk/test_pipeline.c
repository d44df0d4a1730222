/* vk/: the table-driven pipeline constructor and batches of dispatches. */
#include "vk_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* A checked-in SPIR-V 1.3 fixture, assembled with spirv-as --target-env vulkan1.1 from:
 *
 *   ; out[i] = i * SCALE + push.bias for i < push.count; SCALE is specialization constant 0.
 *   ; Workgroup size 64; binding 0 is the output (NonReadable); push = {uint count, bias}.
 *         OpCapability Shader
 *         OpMemoryModel Logical GLSL450
 *         OpEntryPoint GLCompute %main "main" %gid
 *         OpExecutionMode %main LocalSize 64 1 1
 *         OpDecorate %gid BuiltIn GlobalInvocationId
 *         OpDecorate %scale SpecId 0
 *         OpDecorate %rta ArrayStride 4
 *         OpMemberDecorate %outs 0 Offset 0
 *         OpDecorate %outs Block
 *         OpDecorate %out DescriptorSet 0
 *         OpDecorate %out Binding 0
 *         OpDecorate %out NonReadable
 *         OpMemberDecorate %pcs 0 Offset 0
 *         OpMemberDecorate %pcs 1 Offset 4
 *         OpDecorate %pcs Block
 *   %void = OpTypeVoid             %fn = OpTypeFunction %void
 *   %uint = OpTypeInt 32 0         %v3u = OpTypeVector %uint 3
 *   %pv3u = OpTypePointer Input %v3u          %gid = OpVariable %pv3u Input
 *   %scale = OpSpecConstant %uint 1
 *   %uint0 = OpConstant %uint 0    %uint1 = OpConstant %uint 1
 *   %rta = OpTypeRuntimeArray %uint           %outs = OpTypeStruct %rta
 *   %pouts = OpTypePointer StorageBuffer %outs
 *   %out = OpVariable %pouts StorageBuffer    %psbu = OpTypePointer StorageBuffer %uint
 *   %pcs = OpTypeStruct %uint %uint           %ppcs = OpTypePointer PushConstant %pcs
 *   %pc = OpVariable %ppcs PushConstant       %ppcu = OpTypePointer PushConstant %uint
 *   %pin = OpTypePointer Input %uint          %bool = OpTypeBool
 *   %main = OpFunction %void None %fn
 *   %entry = OpLabel
 *   %gx_ptr = OpAccessChain %pin %gid %uint0  %i = OpLoad %uint %gx_ptr
 *   %count_ptr = OpAccessChain %ppcu %pc %uint0   %count = OpLoad %uint %count_ptr
 *   %inb = OpULessThan %bool %i %count
 *         OpSelectionMerge %merge None
 *         OpBranchConditional %inb %body %merge
 *   %body = OpLabel
 *   %bias_ptr = OpAccessChain %ppcu %pc %uint1    %bias = OpLoad %uint %bias_ptr
 *   %m = OpIMul %uint %i %scale    %v = OpIAdd %uint %m %bias
 *   %dst = OpAccessChain %psbu %out %uint0 %i
 *         OpStore %dst %v
 *         OpBranch %merge
 *   %merge = OpLabel
 *         OpReturn
 *         OpFunctionEnd
 */
static const uint32_t pattern_spv[] = {
    0x07230203, 0x00010300, 0x00070000, 0x00000023, 0x00000000, 0x00020011, 0x00000001, 0x0003000e,
    0x00000000, 0x00000001, 0x0006000f, 0x00000005, 0x00000001, 0x6e69616d, 0x00000000, 0x00000002,
    0x00060010, 0x00000001, 0x00000011, 0x00000040, 0x00000001, 0x00000001, 0x00040047, 0x00000002,
    0x0000000b, 0x0000001c, 0x00040047, 0x00000003, 0x00000001, 0x00000000, 0x00040047, 0x00000004,
    0x00000006, 0x00000004, 0x00050048, 0x00000005, 0x00000000, 0x00000023, 0x00000000, 0x00030047,
    0x00000005, 0x00000002, 0x00040047, 0x00000006, 0x00000022, 0x00000000, 0x00040047, 0x00000006,
    0x00000021, 0x00000000, 0x00030047, 0x00000006, 0x00000019, 0x00050048, 0x00000007, 0x00000000,
    0x00000023, 0x00000000, 0x00050048, 0x00000007, 0x00000001, 0x00000023, 0x00000004, 0x00030047,
    0x00000007, 0x00000002, 0x00020013, 0x00000008, 0x00030021, 0x00000009, 0x00000008, 0x00040015,
    0x0000000a, 0x00000020, 0x00000000, 0x00040017, 0x0000000b, 0x0000000a, 0x00000003, 0x00040020,
    0x0000000c, 0x00000001, 0x0000000b, 0x0004003b, 0x0000000c, 0x00000002, 0x00000001, 0x00040032,
    0x0000000a, 0x00000003, 0x00000001, 0x0004002b, 0x0000000a, 0x0000000d, 0x00000000, 0x0004002b,
    0x0000000a, 0x0000000e, 0x00000001, 0x0003001d, 0x00000004, 0x0000000a, 0x0003001e, 0x00000005,
    0x00000004, 0x00040020, 0x0000000f, 0x0000000c, 0x00000005, 0x0004003b, 0x0000000f, 0x00000006,
    0x0000000c, 0x00040020, 0x00000010, 0x0000000c, 0x0000000a, 0x0004001e, 0x00000007, 0x0000000a,
    0x0000000a, 0x00040020, 0x00000011, 0x00000009, 0x00000007, 0x0004003b, 0x00000011, 0x00000012,
    0x00000009, 0x00040020, 0x00000013, 0x00000009, 0x0000000a, 0x00040020, 0x00000014, 0x00000001,
    0x0000000a, 0x00020014, 0x00000015, 0x00050036, 0x00000008, 0x00000001, 0x00000000, 0x00000009,
    0x000200f8, 0x00000016, 0x00050041, 0x00000014, 0x00000017, 0x00000002, 0x0000000d, 0x0004003d,
    0x0000000a, 0x00000018, 0x00000017, 0x00050041, 0x00000013, 0x00000019, 0x00000012, 0x0000000d,
    0x0004003d, 0x0000000a, 0x0000001a, 0x00000019, 0x000500b0, 0x00000015, 0x0000001b, 0x00000018,
    0x0000001a, 0x000300f7, 0x0000001c, 0x00000000, 0x000400fa, 0x0000001b, 0x0000001d, 0x0000001c,
    0x000200f8, 0x0000001d, 0x00050041, 0x00000013, 0x0000001e, 0x00000012, 0x0000000e, 0x0004003d,
    0x0000000a, 0x0000001f, 0x0000001e, 0x00050084, 0x0000000a, 0x00000020, 0x00000018, 0x00000003,
    0x00050080, 0x0000000a, 0x00000021, 0x00000020, 0x0000001f, 0x00060041, 0x00000010, 0x00000022,
    0x00000006, 0x0000000d, 0x00000018, 0x0003003e, 0x00000022, 0x00000021, 0x000200f9, 0x0000001c,
    0x000200f8, 0x0000001c, 0x000100fd, 0x00010038,
};

typedef struct push {
    uint32_t count;
    uint32_t bias;
} push;

static kiln_status make_pattern_pipeline(vkd_device *dev, uint32_t scale, vkd_pipeline **out,
                                         base_error *err) {
    VkSpecializationMapEntry entry = {.constantID = 0, .offset = 0, .size = 4};
    vkd_pipeline_desc desc = {
        .code = pattern_spv,
        .word_count = sizeof pattern_spv / sizeof pattern_spv[0],
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
            assert_true(vkd_batch_dispatch_time(batch, 0, &ns));
            assert_true(vkd_batch_dispatch_time(batch, rounds - 1, &ns));
        }
        assert_false(vkd_batch_dispatch_time(batch, rounds, &ns));
        /* A submitted batch must be reset before it records again. */
        uint32_t groups[3] = {1, 1, 1};
        push pc = {1, 0};
        assert_int_equal(vkd_batch_dispatch(batch, pipe, &b, 1, &pc, sizeof pc, groups, &err),
                         KILN_ERROR_INVALID_ARGUMENT);
        base_error_clear(&err);
        assert_int_equal(vkd_batch_reset(batch, &err), KILN_OK);
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
    desc.word_count = sizeof pattern_spv / sizeof pattern_spv[0];
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vk_pipeline_fixture_writes_pattern),
        cmocka_unit_test(test_vk_pipeline_staged_device_runs_pattern),
        cmocka_unit_test(test_vk_pipeline_large_grid_is_split),
        cmocka_unit_test(test_vk_pipeline_batch_orders_dispatches),
        cmocka_unit_test(test_vk_pipeline_rejects_bad_descriptions),
    };
    return cmocka_run_group_tests(tests, vk_fixture_setup, vk_fixture_teardown);
}
