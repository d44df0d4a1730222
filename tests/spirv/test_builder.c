/* The builder without a device: every test kernel validated for each target, the layout of what
 * it writes (capabilities, interfaces, workgroup size), interning, sticky errors, the
 * fail-the-Nth-allocation loop and the KILN_DEBUG=4 dump. */
#include "kernels.h"
#include "test_alloc.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

enum {
    VK11 = (1u << 22) | (1u << 12),
    VK12 = (1u << 22) | (2u << 12),
    VK13 = (1u << 22) | (3u << 12)
};

/* Validates words as the Vulkan environment api; fails the test with the validator's message. */
static void assert_valid(const uint32_t *words, size_t count, uint32_t api, const char *what) {
    base_error err = {0};
    kiln_status s = spv_validate(words, count, api, &err);
    if (s != KILN_OK)
        fail_msg("%s (Vulkan 1.%u): %s", what, api >> 12 & 0x3ff, base_error_message(&err));
}

/* The disassembly of words (caller frees with free()). */
static char *disassemble(const uint32_t *words, size_t count) {
    char *text = NULL;
    size_t len = 0;
    base_error err = {0};
    assert_int_equal(spv_disassemble(NULL, words, count, &text, &len, &err), KILN_OK);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    return text;
}

/* The number of instructions with opcode op. */
static size_t count_op(const uint32_t *words, size_t count, SpvOp op) {
    size_t n = 0;
    for (size_t i = 5; i < count;) {
        uint32_t wc = words[i] >> SpvWordCountShift;
        assert_true(wc > 0 && i + wc <= count);
        n += (words[i] & SpvOpCodeMask) == (uint32_t)op;
        i += wc;
    }
    return n;
}

/* The first instruction with opcode op (its first word), or NULL. */
static const uint32_t *find_op(const uint32_t *words, size_t count, SpvOp op) {
    for (size_t i = 5; i < count; i += words[i] >> SpvWordCountShift)
        if ((words[i] & SpvOpCodeMask) == (uint32_t)op)
            return words + i;
    return NULL;
}

static spv_builder *new_builder(uint32_t version) {
    spv_builder *b = NULL;
    base_error err = {0};
    assert_int_equal(spv_builder_create(&(spv_builder_options){.version = version}, &b, &err),
                     KILN_OK);
    return b;
}

/* ---- every kernel, every target ----------------------------------------------------------- */

static void test_spirv_kernels_validate_for_every_target(void **state) {
    (void)state;
    static const struct {
        uint32_t version, api;
    } targets[] = {{0x10300, VK11}, {0x10400, VK12}, {0x10500, VK12}, {0x10600, VK13}};
    for (int k = 0; k < KERN_COUNT_; k++) {
        for (size_t t = 0; t < BASE_COUNTOF(targets); t++) {
            const uint32_t *words;
            size_t count;
            base_error err = {0};
            spv_builder *b =
                kern_build((kern_id)k, targets[t].version, false, NULL, &words, &count, &err);
            if (!b)
                fail_msg("%s for 0x%x: %s", kern_defs[k].name, targets[t].version,
                         base_error_message(&err));
            assert_int_equal(words[0], SpvMagicNumber);
            assert_int_equal(words[1], targets[t].version);
            assert_true(words[3] > 1 && words[3] < 4096); /* the id bound */
            char what[64];
            snprintf(what, sizeof what, "%s for SPIR-V 0x%x", kern_defs[k].name,
                     targets[t].version);
            assert_valid(words, count, targets[t].api, what);
            spv_builder_destroy(b);
        }
    }
}

static void test_spirv_kernels_build_identical_words_every_time(void **state) {
    (void)state;
    for (int k = 0; k < KERN_COUNT_; k++) {
        const uint32_t *w1, *w2;
        size_t n1, n2;
        spv_builder *b1 = kern_build((kern_id)k, 0x10600, false, NULL, &w1, &n1, NULL);
        spv_builder *b2 = kern_build((kern_id)k, 0x10600, false, NULL, &w2, &n2, NULL);
        assert_non_null(b1);
        assert_non_null(b2);
        assert_int_equal(n1, n2);
        assert_memory_equal(w1, w2, n1 * sizeof *w1);
        spv_builder_destroy(b1);
        spv_builder_destroy(b2);
    }
}

/* ---- layout ------------------------------------------------------------------------------- */

static void test_spirv_workgroup_size_spec_uses_local_size_id_when_allowed(void **state) {
    (void)state;
    const struct {
        uint32_t version;
        bool m4;
        uint32_t api;
        bool local_size_id;
    } cases[] = {{0x10300, false, VK11, false},
                 {0x10500, false, VK12, false},
                 {0x10300, true, VK13, true},
                 {0x10600, false, VK13, true}};
    for (size_t i = 0; i < BASE_COUNTOF(cases); i++) {
        const uint32_t *w;
        size_t n;
        spv_builder *b =
            kern_build(KERN_SPEC_WG, cases[i].version, cases[i].m4, NULL, &w, &n, NULL);
        assert_non_null(b);
        assert_valid(w, n, cases[i].api, "spec_wg");
        char *text = disassemble(w, n);
        assert_int_equal(strstr(text, "LocalSizeId") != NULL, cases[i].local_size_id);
        assert_int_equal(strstr(text, "BuiltIn WorkgroupSize") != NULL, !cases[i].local_size_id);
        assert_int_equal(count_op(w, n, SpvOpSpecConstant), 3);
        assert_int_equal(count_op(w, n, SpvOpSpecConstantComposite), !cases[i].local_size_id);
        free(text);
        spv_builder_destroy(b);
    }
}

/* OpEntryPoint lists Input/Output variables before 1.4 and every global from 1.4 on. */
static void test_spirv_entry_point_interface_follows_version(void **state) {
    (void)state;
    const struct {
        uint32_t version;
        uint32_t interface;
    } cases[] = {{0x10300, 1}, {0x10400, 5}, {0x10600, 5}}; /* gid; + 3 buffers, push consts */
    for (size_t i = 0; i < BASE_COUNTOF(cases); i++) {
        const uint32_t *w;
        size_t n;
        spv_builder *b = kern_build(KERN_VADD, cases[i].version, false, NULL, &w, &n, NULL);
        assert_non_null(b);
        const uint32_t *ep = find_op(w, n, SpvOpEntryPoint);
        assert_non_null(ep);
        assert_int_equal(ep[1], SpvExecutionModelGLCompute);
        assert_string_equal((const char *)(ep + 3), "main");
        uint32_t wc = ep[0] >> SpvWordCountShift;
        assert_int_equal(wc - 3 - 2, cases[i].interface); /* "main" takes 2 words */
        spv_builder_destroy(b);
    }
}

static bool has_capability(const uint32_t *w, size_t n, SpvCapability cap) {
    for (size_t i = 5; i < n; i += w[i] >> SpvWordCountShift)
        if ((w[i] & SpvOpCodeMask) == SpvOpCapability && w[i + 1] == (uint32_t)cap)
            return true;
    return false;
}

static void test_spirv_capabilities_follow_types_and_instructions(void **state) {
    (void)state;
    const uint32_t *w;
    size_t n;
    spv_builder *b = kern_build(KERN_VADD, 0x10300, false, NULL, &w, &n, NULL);
    assert_true(has_capability(w, n, SpvCapabilityShader));
    assert_false(has_capability(w, n, SpvCapabilityInt8));
    assert_false(has_capability(w, n, SpvCapabilityFloat16));
    assert_false(has_capability(w, n, SpvCapabilityGroupNonUniformArithmetic));
    assert_int_equal(count_op(w, n, SpvOpExtension), 0);
    assert_int_equal(count_op(w, n, SpvOpExtInstImport), 0);
    spv_builder_destroy(b);

    b = kern_build(KERN_I8, 0x10300, false, NULL, &w, &n, NULL);
    assert_true(has_capability(w, n, SpvCapabilityInt8));
    assert_true(has_capability(w, n, SpvCapabilityStorageBuffer8BitAccess));
    const uint32_t *ext = find_op(w, n, SpvOpExtension);
    assert_non_null(ext);
    assert_string_equal((const char *)(ext + 1), "SPV_KHR_8bit_storage");
    spv_builder_destroy(b);

    b = kern_build(KERN_I8, 0x10500, false, NULL, &w, &n, NULL); /* core from 1.5 */
    assert_true(has_capability(w, n, SpvCapabilityStorageBuffer8BitAccess));
    assert_int_equal(count_op(w, n, SpvOpExtension), 0);
    spv_builder_destroy(b);

    b = kern_build(KERN_F16, 0x10300, false, NULL, &w, &n, NULL);
    assert_true(has_capability(w, n, SpvCapabilityFloat16));
    assert_true(has_capability(w, n, SpvCapabilityStorageBuffer16BitAccess));
    assert_int_equal(count_op(w, n, SpvOpExtension), 0); /* 16-bit storage is core in 1.3 */
    spv_builder_destroy(b);

    b = kern_build(KERN_SUBGROUP, 0x10300, false, NULL, &w, &n, NULL);
    assert_true(has_capability(w, n, SpvCapabilityGroupNonUniform));
    assert_true(has_capability(w, n, SpvCapabilityGroupNonUniformArithmetic));
    assert_true(has_capability(w, n, SpvCapabilityGroupNonUniformBallot));
    spv_builder_destroy(b);

    b = kern_build(KERN_MATH, 0x10300, false, NULL, &w, &n, NULL);
    const uint32_t *imp = find_op(w, n, SpvOpExtInstImport);
    assert_non_null(imp);
    assert_string_equal((const char *)(imp + 2), "GLSL.std.450");
    assert_int_equal(count_op(w, n, SpvOpExtInst), 5); /* sqrt exp2 fma fmax umin */
    spv_builder_destroy(b);

    b = new_builder(0x10300);
    spv_type_int(b, 64, false);
    spv_type_float(b, 64);
    spv_type_int(b, 16, true);
    spv_workgroup_size(b, spv_function_begin(b, "main"), (const uint32_t[]){1, 1, 1});
    spv_return(b);
    spv_function_end(b);
    assert_int_equal(spv_builder_finish(b, &w, &n, NULL), KILN_OK);
    assert_valid(w, n, VK11, "a hand-built module");
    assert_true(has_capability(w, n, SpvCapabilityInt64));
    assert_true(has_capability(w, n, SpvCapabilityFloat64));
    assert_true(has_capability(w, n, SpvCapabilityInt16));
    assert_int_equal(count_op(w, n, SpvOpCapability), 4);
    spv_builder_destroy(b);
}

static void test_spirv_types_and_constants_are_interned(void **state) {
    (void)state;
    spv_builder *b = new_builder(0x10300);
    spv_id u32 = spv_type_int(b, 32, false);
    assert_int_not_equal(u32, 0);
    assert_int_equal(spv_type_int(b, 32, false), u32);
    assert_int_not_equal(spv_type_int(b, 32, true), u32);
    spv_id f32 = spv_type_float(b, 32);
    assert_int_equal(spv_type_vector(b, f32, 4), spv_type_vector(b, f32, 4));
    assert_int_equal(spv_type_pointer(b, SpvStorageClassWorkgroup, f32),
                     spv_type_pointer(b, SpvStorageClassWorkgroup, f32));
    assert_int_equal(spv_type_runtime_array(b, f32, 4), spv_type_runtime_array(b, f32, 4));
    assert_int_not_equal(spv_type_runtime_array(b, f32, 4), spv_type_runtime_array(b, f32, 8));
    assert_int_equal(spv_const_u32(b, 7), spv_const_int(b, u32, 7));
    assert_int_not_equal(spv_const_u32(b, 7), spv_const_i32(b, 7));
    assert_int_equal(spv_const_f32(b, 1.5f), spv_const_float(b, f32, 1.5));
    assert_int_equal(spv_const_bool(b, true), spv_const_bool(b, true));
    assert_int_not_equal(spv_spec_int(b, u32, 3, 7), spv_spec_int(b, u32, 4, 7));
    assert_int_equal(spv_type_of(b, spv_const_u32(b, 7)), u32);
    spv_id vec3 = spv_type_vector(b, f32, 3);
    assert_int_equal(spv_type_size(b, vec3), 12);
    assert_int_equal(spv_type_align(b, vec3), 16);
    assert_int_equal(spv_type_size(b, spv_type_float(b, 16)), 2);
    assert_int_equal(spv_builder_status(b), KILN_OK);
    spv_builder_destroy(b);
}

/* The literal words of constants: f16 rounds to nearest even, small signed ints sign-extend. */
static void test_spirv_constants_encode_literals(void **state) {
    (void)state;
    spv_builder *b = new_builder(0x10300);
    spv_id f16 = spv_type_float(b, 16), i8 = spv_type_int(b, 8, true);
    spv_id u64 = spv_type_int(b, 64, false);
    spv_id c[4] = {spv_const_float(b, f16, 0.1), spv_const_float(b, f16, 65504.0),
                   spv_const_int(b, i8, -2), spv_const_int(b, u64, 0x123456789)};
    const uint32_t want[4][2] = {{0x2e66, 0}, {0x7bff, 0}, {0xfffffffe, 0}, {0x23456789, 1}};
    spv_workgroup_size(b, spv_function_begin(b, "main"), (const uint32_t[]){1, 1, 1});
    spv_return(b);
    spv_function_end(b);
    const uint32_t *w;
    size_t n;
    assert_int_equal(spv_builder_finish(b, &w, &n, NULL), KILN_OK);
    assert_valid(w, n, VK11, "a hand-built module");
    int found = 0;
    for (size_t i = 5; i < n; i += w[i] >> SpvWordCountShift) {
        if ((w[i] & SpvOpCodeMask) != SpvOpConstant)
            continue;
        for (int k = 0; k < 4; k++) {
            if (w[i + 2] == (c[k] & 0xfffff)) {
                assert_int_equal(w[i + 3], want[k][0]);
                if (k == 3)
                    assert_int_equal(w[i + 4], want[k][1]);
                found++;
            }
        }
    }
    assert_int_equal(found, 4);
    spv_builder_destroy(b);
}

static void test_spirv_disassembly_names_the_entry_point(void **state) {
    (void)state;
    const uint32_t *w;
    size_t n;
    spv_builder *b = kern_build(KERN_VADD, 0x10300, false, NULL, &w, &n, NULL);
    assert_true(spv_tools_available());
    char *text = disassemble(w, n);
    assert_non_null(strstr(text, "OpEntryPoint GLCompute"));
    assert_non_null(strstr(text, "\"main\""));
    assert_non_null(strstr(text, "OpDecorate"));
    assert_non_null(strstr(text, "ArrayStride 4"));
    assert_non_null(strstr(text, "NonWritable"));
    assert_non_null(strstr(text, "NonReadable"));
    free(text);
    spv_builder_destroy(b);
}

static char dump_lines[8192];

static void capture_log(void *user, base_log_level level, const char *line) {
    (void)user, (void)level;
    size_t len = strlen(dump_lines);
    snprintf(dump_lines + len, sizeof dump_lines - len, "%s\n", line);
}

static void test_spirv_debug_dump_logs_disassembly_at_level_4(void **state) {
    (void)state;
    assert_int_equal(base_log_verbosity(), 4); /* main sets KILN_DEBUG=4 */
    const uint32_t *w;
    size_t n;
    spv_builder *b = kern_build(KERN_SPEC_WG, 0x10600, false, NULL, &w, &n, NULL);
    dump_lines[0] = '\0';
    base_log_set_sink(capture_log, NULL);
    spv_debug_dump(w, n, "spec_wg");
    base_log_set_sink(NULL, NULL);
    char head[64];
    snprintf(head, sizeof head, "spec_wg: %zu words", n);
    assert_non_null(strstr(dump_lines, head));
    assert_non_null(strstr(dump_lines, "OpCapability Shader"));
    assert_non_null(strstr(dump_lines, "LocalSizeId"));
    spv_builder_destroy(b);
}

/* ---- sticky errors ------------------------------------------------------------------------ */

/* Finishes b expecting status with a message containing needle. */
static void assert_finish_fails(spv_builder *b, kiln_status status, const char *needle) {
    const uint32_t *w = (const uint32_t *)1;
    size_t n = 1;
    base_error err = {0};
    assert_int_equal(spv_builder_finish(b, &w, &n, &err), status);
    assert_null(w);
    assert_int_equal(n, 0);
    assert_int_equal(err.status, status);
    if (!strstr(base_error_message(&err), needle))
        fail_msg("message \"%s\" lacks \"%s\"", base_error_message(&err), needle);
    assert_string_equal(base_error_message(&err), spv_builder_message(b));
}

/* A builder inside main's first block, with u32 and f32 made. */
static spv_builder *in_main(spv_id *u32, spv_id *f32) {
    spv_builder *b = new_builder(0x10300);
    *u32 = spv_type_int(b, 32, false);
    *f32 = spv_type_float(b, 32);
    spv_workgroup_size(b, spv_function_begin(b, "main"), (const uint32_t[]){1, 1, 1});
    return b;
}

static void test_spirv_errors_wrong_operand_type_is_reported_at_finish(void **state) {
    (void)state;
    spv_id u32, f32;
    spv_builder *b = in_main(&u32, &f32);
    spv_id x = spv_const_f32(b, 1.0f);
    assert_int_equal(spv_binop(b, SpvOpIAdd, x, x), 0); /* IAdd of floats */
    assert_int_equal(spv_builder_status(b), KILN_ERROR_INVALID_ARGUMENT);
    /* Everything after the first error passes through as 0. */
    assert_int_equal(spv_const_u32(b, 1), 0);
    assert_int_equal(spv_type_int(b, 32, false), 0);
    spv_return(b);
    spv_function_end(b);
    assert_finish_fails(b, KILN_ERROR_INVALID_ARGUMENT, "wrong type");
    assert_non_null(strstr(spv_builder_message(b), "integer"));
    spv_builder_destroy(b);
}

static void test_spirv_errors_operands_of_different_types_are_rejected(void **state) {
    (void)state;
    spv_id u32, f32;
    spv_builder *b = in_main(&u32, &f32);
    spv_id h = spv_const_float(b, spv_type_float(b, 16), 1.0);
    assert_int_equal(spv_binop(b, SpvOpFAdd, spv_const_f32(b, 1.0f), h), 0);
    assert_finish_fails(b, KILN_ERROR_INVALID_ARGUMENT, "types differ");
    spv_builder_destroy(b);
}

static void test_spirv_errors_store_of_wrong_type_is_rejected(void **state) {
    (void)state;
    spv_id u32, f32;
    spv_builder *b = in_main(&u32, &f32);
    spv_id v = spv_local(b, f32);
    spv_store(b, v, spv_const_u32(b, 3));
    assert_finish_fails(b, KILN_ERROR_INVALID_ARGUMENT, "wrong type");
    spv_builder_destroy(b);
}

static void test_spirv_errors_id_from_another_builder_is_rejected(void **state) {
    (void)state;
    spv_id u32, f32;
    spv_builder *b = in_main(&u32, &f32);
    spv_builder *other = new_builder(0x10300);
    spv_id foreign = spv_const_u32(other, 5);
    assert_int_not_equal(foreign, 0);
    assert_int_equal(spv_binop(b, SpvOpIAdd, spv_const_u32(b, 1), foreign), 0);
    assert_finish_fails(b, KILN_ERROR_INVALID_ARGUMENT, "another builder");
    assert_int_equal(spv_builder_status(other), KILN_OK);
    spv_builder_destroy(other);
    spv_builder_destroy(b);
}

static void test_spirv_errors_id_out_of_range_is_rejected(void **state) {
    (void)state;
    spv_id u32, f32;
    spv_builder *b = in_main(&u32, &f32);
    spv_id one = spv_const_u32(b, 1);
    spv_binop(b, SpvOpIAdd, one, one + 100000); /* same builder's tag, beyond the bound */
    assert_finish_fails(b, KILN_ERROR_INVALID_ARGUMENT, "out of range");
    spv_builder_destroy(b);
}

static void test_spirv_errors_zero_id_is_rejected(void **state) {
    (void)state;
    spv_builder *b = new_builder(0x10300);
    spv_type_vector(b, 0, 4);
    assert_finish_fails(b, KILN_ERROR_INVALID_ARGUMENT, "id 0");
    spv_builder_destroy(b);
}

static void test_spirv_errors_unterminated_block_is_reported(void **state) {
    (void)state;
    spv_id u32, f32;
    spv_builder *b = in_main(&u32, &f32);
    spv_const_u32(b, 1);
    spv_function_end(b); /* no OpReturn */
    assert_finish_fails(b, KILN_ERROR_INVALID_SPIRV, "unterminated block");
    spv_builder_destroy(b);
}

static void test_spirv_errors_unfinished_function_is_reported(void **state) {
    (void)state;
    spv_id u32, f32;
    spv_builder *b = in_main(&u32, &f32);
    spv_return(b);
    assert_finish_fails(b, KILN_ERROR_INVALID_SPIRV, "spv_function_end missing");
    spv_builder_destroy(b);
}

static void test_spirv_errors_instruction_outside_block_is_rejected(void **state) {
    (void)state;
    spv_id u32, f32;
    spv_builder *b = in_main(&u32, &f32);
    spv_return(b);
    spv_id one = spv_const_u32(b, 1);
    assert_int_equal(spv_binop(b, SpvOpIAdd, one, one), 0);
    assert_finish_fails(b, KILN_ERROR_INVALID_ARGUMENT, "outside a block");
    spv_builder_destroy(b);
}

static void test_spirv_errors_unset_phi_operand_is_reported(void **state) {
    (void)state;
    spv_id u32, f32;
    spv_builder *b = in_main(&u32, &f32);
    spv_id entry = spv_current_label(b), next = spv_label(b);
    spv_branch(b, next);
    spv_block(b, next);
    spv_id p = spv_phi(b, u32, 2);
    spv_phi_set(b, p, 0, spv_const_u32(b, 0), entry);
    spv_return(b);
    spv_function_end(b);
    assert_finish_fails(b, KILN_ERROR_INVALID_SPIRV, "OpPhi operands were never set");
    spv_builder_destroy(b);
}

static void test_spirv_errors_branch_on_non_bool_is_rejected(void **state) {
    (void)state;
    spv_id u32, f32;
    spv_builder *b = in_main(&u32, &f32);
    spv_id l = spv_label(b);
    spv_branch_cond(b, spv_const_u32(b, 1), l, l);
    assert_finish_fails(b, KILN_ERROR_INVALID_ARGUMENT, "bool");
    spv_builder_destroy(b);
}

static void test_spirv_errors_instruction_after_merge_is_rejected(void **state) {
    (void)state;
    spv_id u32, f32;
    spv_builder *b = in_main(&u32, &f32);
    spv_id merge = spv_label(b), cont = spv_label(b);
    spv_loop_merge(b, merge, cont);
    spv_const_u32(b, 1); /* a constant is global: fine */
    spv_binop(b, SpvOpIAdd, spv_const_u32(b, 1), spv_const_u32(b, 2));
    assert_finish_fails(b, KILN_ERROR_INVALID_SPIRV, "between a merge instruction");
    spv_builder_destroy(b);
}

static void test_spirv_errors_branch_to_label_without_block_is_reported(void **state) {
    (void)state;
    spv_id u32, f32;
    spv_builder *b = in_main(&u32, &f32);
    spv_branch(b, spv_label(b)); /* the label never begins a block */
    spv_function_end(b);
    assert_finish_fails(b, KILN_ERROR_INVALID_SPIRV, "begins no block");
    spv_builder_destroy(b);
}

static void test_spirv_errors_entry_point_without_workgroup_size_is_reported(void **state) {
    (void)state;
    spv_builder *b = new_builder(0x10300);
    spv_function_begin(b, "main");
    spv_return(b);
    spv_function_end(b);
    assert_finish_fails(b, KILN_ERROR_INVALID_SPIRV, "has no workgroup size");
    spv_builder_destroy(b);

    b = new_builder(0x10300);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size(b, fn, (const uint32_t[]){1, 1, 1});
    spv_workgroup_size(b, fn, (const uint32_t[]){2, 1, 1}); /* twice */
    assert_finish_fails(b, KILN_ERROR_INVALID_ARGUMENT, "without a workgroup size yet");
    spv_builder_destroy(b);
}

static void test_spirv_errors_type_used_as_value_is_rejected(void **state) {
    (void)state;
    spv_id u32, f32;
    spv_builder *b = in_main(&u32, &f32);
    spv_binop(b, SpvOpIAdd, u32, u32);
    assert_finish_fails(b, KILN_ERROR_INVALID_ARGUMENT, "is not a value");
    spv_builder_destroy(b);
}

/* OpSelect with a scalar condition and vector objects is SPIR-V 1.4+. */
static void test_spirv_select_scalar_condition_on_vectors_needs_1_4(void **state) {
    (void)state;
    const uint32_t versions[2] = {0x10300, 0x10400};
    for (int k = 0; k < 2; k++) {
        spv_builder *b = new_builder(versions[k]);
        spv_id f32 = spv_type_float(b, 32), v2 = spv_type_vector(b, f32, 2);
        spv_id out = spv_storage_buffer(b, v2, 0, 0, SPV_ACCESS_WRITE);
        spv_member_name(b, spv_type_struct(b, 1, &f32, NULL, false), 0, "unused");
        spv_id fn = spv_function_begin(b, "main");
        spv_workgroup_size(b, fn, (const uint32_t[]){1, 1, 1});
        spv_id x =
            spv_const_composite(b, v2, 2, (spv_id[]){spv_const_f32(b, 1), spv_const_f32(b, 2)});
        spv_id r = spv_select(b, spv_const_bool(b, true), x, spv_const_null(b, v2));
        spv_store(b, spv_buffer_element(b, out, spv_const_u32(b, 0)), r);
        spv_return(b);
        spv_function_end(b);
        if (k == 0) {
            assert_int_equal(r, 0);
            assert_finish_fails(b, KILN_ERROR_INVALID_ARGUMENT, "condition of another size");
        } else {
            const uint32_t *w;
            size_t n;
            assert_int_not_equal(r, 0);
            assert_int_equal(spv_builder_finish(b, &w, &n, NULL), KILN_OK);
            assert_valid(w, n, VK12, "select with a scalar condition");
            char *text = disassemble(w, n);
            assert_non_null(strstr(text, "OpMemberName"));
            free(text);
        }
        spv_builder_destroy(b);
    }
}

/* OpUMulExtended into a struct {u32, u32}: valid, member 1 the high half; a result struct of
 * other members, or operands of another type, is refused. */
static void test_spirv_mul_extended_checks_its_struct(void **state) {
    (void)state;
    spv_builder *b = new_builder(0x10300);
    spv_id u32 = spv_type_int(b, 32, false);
    spv_id pair = spv_type_struct(b, 2, (spv_id[]){u32, u32}, NULL, false);
    spv_id out = spv_storage_buffer(b, u32, 0, 0, SPV_ACCESS_WRITE);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size(b, fn, (const uint32_t[]){1, 1, 1});
    spv_id m = spv_mul_extended(b, SpvOpUMulExtended, pair, spv_const_u32(b, 0xD2511F53u),
                                spv_const_u32(b, 0xffffffffu));
    assert_int_not_equal(m, 0);
    spv_store(b, spv_buffer_element(b, out, spv_const_u32(b, 0)), spv_composite_extract(b, m, 1));
    spv_return(b);
    spv_function_end(b);
    const uint32_t *w;
    size_t n;
    assert_int_equal(spv_builder_finish(b, &w, &n, NULL), KILN_OK);
    assert_valid(w, n, VK11, "OpUMulExtended");
    assert_int_equal(count_op(w, n, SpvOpUMulExtended), 1);
    spv_builder_destroy(b);
    for (int k = 0; k < 3; k++) {
        spv_id f32;
        b = in_main(&u32, &f32);
        spv_id i32 = spv_type_int(b, 32, true);
        spv_id bad = k == 0 ? spv_type_struct(b, 2, (spv_id[]){u32, f32}, NULL, false)
                            : spv_type_struct(b, 2, (spv_id[]){u32, u32}, NULL, false);
        spv_id y = k == 1 ? spv_const_int(b, i32, 3) : spv_const_u32(b, 3);
        SpvOp op = k == 2 ? SpvOpIMul : SpvOpUMulExtended;
        assert_int_equal(spv_mul_extended(b, op, bad, spv_const_u32(b, 2), y), 0);
        spv_return(b);
        spv_function_end(b);
        assert_finish_fails(b, KILN_ERROR_INVALID_ARGUMENT, "extended multiply");
        spv_builder_destroy(b);
    }
}

static void test_spirv_errors_first_error_wins(void **state) {
    (void)state;
    spv_id u32, f32;
    spv_builder *b = in_main(&u32, &f32);
    spv_type_int(b, 12, false);                      /* first: no 12-bit integers */
    spv_binop(b, SpvOpIAdd, spv_const_f32(b, 1), 0); /* ignored */
    spv_function_end(b);                             /* ignored */
    assert_finish_fails(b, KILN_ERROR_INVALID_ARGUMENT, "12-bit");
    spv_builder_destroy(b);
}

static void test_spirv_errors_constant_overflow_is_rejected(void **state) {
    (void)state;
    spv_builder *b = new_builder(0x10300);
    assert_int_not_equal(spv_const_int(b, spv_type_int(b, 8, false), 255), 0);
    assert_int_not_equal(spv_const_int(b, spv_type_int(b, 8, true), -128), 0);
    assert_int_equal(spv_const_int(b, spv_type_int(b, 8, true), 256), 0);
    assert_finish_fails(b, KILN_ERROR_OVERFLOW, "does not fit");
    spv_builder_destroy(b);
}

static void test_spirv_errors_module_without_entry_point_is_rejected(void **state) {
    (void)state;
    spv_builder *b = new_builder(0x10300);
    spv_type_void(b);
    assert_finish_fails(b, KILN_ERROR_INVALID_SPIRV, "no entry point");
    spv_builder_destroy(b);
}

static void test_spirv_builder_create_rejects_bad_versions(void **state) {
    (void)state;
    const uint32_t bad[] = {0x10000, 0x10200, 0x10700, 0x10301};
    for (size_t i = 0; i < BASE_COUNTOF(bad); i++) {
        spv_builder *b = (spv_builder *)1;
        base_error err = {0};
        assert_int_equal(spv_builder_create(&(spv_builder_options){.version = bad[i]}, &b, &err),
                         KILN_ERROR_INVALID_ARGUMENT);
        assert_null(b);
        assert_non_null(strstr(base_error_message(&err), "1.3 .. 1.6"));
    }
    spv_builder *b = NULL;
    assert_int_equal(spv_builder_create(NULL, &b, NULL), KILN_OK); /* defaults to 1.3 */
    assert_int_equal(spv_builder_version(b), 0x10300);
    spv_builder_destroy(b);
    spv_builder_destroy(NULL);
}

static void test_spirv_validate_rejects_invalid_module(void **state) {
    (void)state;
    const uint32_t *w;
    size_t n;
    spv_builder *b = kern_build(KERN_VADD, 0x10300, false, NULL, &w, &n, NULL);
    uint32_t *copy = malloc(n * sizeof *copy);
    memcpy(copy, w, n * sizeof *copy);
    copy[3] = 2; /* an id bound below the ids used */
    base_error err = {0};
    assert_int_equal(spv_validate(copy, n, VK11, &err), KILN_ERROR_INVALID_SPIRV);
    assert_non_null(strstr(base_error_message(&err), "spirv-val"));
    free(copy);
    spv_builder_destroy(b);
}

/* Every truncated prefix of a valid module is rejected by the validator and the disassembler,
 * never crashes them. */
static void test_spirv_validate_rejects_every_truncated_prefix(void **state) {
    (void)state;
    const uint32_t *w;
    size_t n;
    spv_builder *b = kern_build(KERN_LOOP_PHI, 0x10300, false, NULL, &w, &n, NULL);
    assert_non_null(b);
    for (size_t len = 1; len < n; len++) {
        base_error err = {0};
        assert_int_equal(spv_validate(w, len, VK11, &err), KILN_ERROR_INVALID_SPIRV);
        char *text = (char *)1;
        size_t tlen = 1;
        kiln_status s = spv_disassemble(NULL, w, len, &text, &tlen, NULL);
        if (len < 5) { /* no complete header */
            assert_int_equal(s, KILN_ERROR_INVALID_SPIRV);
            assert_null(text);
        } else if (s == KILN_OK) {
            free(text); /* an instruction boundary: a shorter module that still disassembles */
        }
    }
    assert_int_equal(spv_validate(w, n, VK11, NULL), KILN_OK);
    spv_builder_destroy(b);
}

/* ---- allocation failures ------------------------------------------------------------------- */

static void test_spirv_alloc_failing_nth_allocation_reports_oom_without_leaks(void **state) {
    (void)state;
    const kern_id kernels[] = {KERN_VADD, KERN_LOOP_PHI, KERN_WG_REDUCE, KERN_MATH};
    for (size_t k = 0; k < BASE_COUNTOF(kernels); k++) {
        const uint32_t *ref;
        size_t ref_n;
        spv_builder *rb = kern_build(kernels[k], 0x10600, false, NULL, &ref, &ref_n, NULL);
        assert_non_null(rb);
        long failures = 0;
        for (long nth = 1;; nth++) {
            test_alloc ta = {.fail_at = nth};
            base_allocator alloc = test_allocator(&ta);
            const uint32_t *w;
            size_t n;
            base_error err = {0};
            spv_builder *b = kern_build(kernels[k], 0x10600, false, &alloc, &w, &n, &err);
            if (b) {
                /* Past the last allocation: the module is the one built without failures. */
                assert_int_equal(ta.failures, 0);
                assert_int_equal(n, ref_n);
                assert_memory_equal(w, ref, n * sizeof *w);
                spv_builder_destroy(b);
                assert_int_equal(ta.live_blocks, 0);
                break;
            }
            assert_int_equal(ta.failures, 1);
            assert_int_equal(err.status, KILN_ERROR_OUT_OF_HOST_MEMORY);
            assert_int_equal(ta.live_blocks, 0);
            assert_int_equal(ta.live_bytes, 0);
            assert_int_equal(ta.size_mismatches, 0);
            failures++;
            assert_true(nth < 10000);
        }
        assert_true(failures > 5);
        spv_builder_destroy(rb);
    }
}

int main(void) {
    setenv("KILN_DEBUG", "4", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spirv_kernels_validate_for_every_target),
        cmocka_unit_test(test_spirv_kernels_build_identical_words_every_time),
        cmocka_unit_test(test_spirv_workgroup_size_spec_uses_local_size_id_when_allowed),
        cmocka_unit_test(test_spirv_entry_point_interface_follows_version),
        cmocka_unit_test(test_spirv_capabilities_follow_types_and_instructions),
        cmocka_unit_test(test_spirv_types_and_constants_are_interned),
        cmocka_unit_test(test_spirv_constants_encode_literals),
        cmocka_unit_test(test_spirv_disassembly_names_the_entry_point),
        cmocka_unit_test(test_spirv_debug_dump_logs_disassembly_at_level_4),
        cmocka_unit_test(test_spirv_errors_wrong_operand_type_is_reported_at_finish),
        cmocka_unit_test(test_spirv_errors_operands_of_different_types_are_rejected),
        cmocka_unit_test(test_spirv_errors_store_of_wrong_type_is_rejected),
        cmocka_unit_test(test_spirv_errors_id_from_another_builder_is_rejected),
        cmocka_unit_test(test_spirv_errors_id_out_of_range_is_rejected),
        cmocka_unit_test(test_spirv_errors_zero_id_is_rejected),
        cmocka_unit_test(test_spirv_errors_unterminated_block_is_reported),
        cmocka_unit_test(test_spirv_errors_unfinished_function_is_reported),
        cmocka_unit_test(test_spirv_errors_instruction_outside_block_is_rejected),
        cmocka_unit_test(test_spirv_errors_unset_phi_operand_is_reported),
        cmocka_unit_test(test_spirv_errors_branch_on_non_bool_is_rejected),
        cmocka_unit_test(test_spirv_errors_instruction_after_merge_is_rejected),
        cmocka_unit_test(test_spirv_errors_branch_to_label_without_block_is_reported),
        cmocka_unit_test(test_spirv_errors_entry_point_without_workgroup_size_is_reported),
        cmocka_unit_test(test_spirv_errors_type_used_as_value_is_rejected),
        cmocka_unit_test(test_spirv_select_scalar_condition_on_vectors_needs_1_4),
        cmocka_unit_test(test_spirv_errors_first_error_wins),
        cmocka_unit_test(test_spirv_errors_constant_overflow_is_rejected),
        cmocka_unit_test(test_spirv_errors_module_without_entry_point_is_rejected),
        cmocka_unit_test(test_spirv_mul_extended_checks_its_struct),
        cmocka_unit_test(test_spirv_builder_create_rejects_bad_versions),
        cmocka_unit_test(test_spirv_validate_rejects_invalid_module),
        cmocka_unit_test(test_spirv_validate_rejects_every_truncated_prefix),
        cmocka_unit_test(test_spirv_alloc_failing_nth_allocation_reports_oom_without_leaks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
