/* MULHI (engine/codegen/ir.h): the high 32 bits of a u32 product, which Philox (kiln_rand, lower.c)
 * needs. The interpreter against 64-bit products of edge values; the verifier takes u32 only;
 * the emitted SPIR-V is one OpUMulExtended and declares no Int64 (devices without shaderInt64
 * run it), validated by SPIRV-Tools when the library has it. On the device, kiln_rand checks
 * it bit for bit (test_rand). */
#include "emit.h"
#include "interp.h"
#include "ir.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static const base_allocator *alloc(void) {
    static base_allocator a;
    a = base_allocator_make(NULL, NULL);
    return &a;
}

/* out[g] = MULHI(a[g], b[g]) of type t. */
static void mulhi_kernel(ir_kernel *k, ir_type t) {
    ir_kernel_init(k, alloc(), IR_I32);
    for (int i = 0; i < 3; i++)
        ir_buffer_add(k, t);
    ir_value g = ir_global_id(k);
    ir_store(k, 0, g, ir_alu(k, IR_MULHI, t, ir_load(k, 1, g), ir_load(k, 2, g), IR_NONE));
}

static void test_ir_mulhi_interpreted_and_emitted(void **state) {
    (void)state;
    enum { N = 6 };
    uint32_t a[N] = {0, 1, 0xffffffffu, 0xffffffffu, 0xD2511F53u, 0x80000000u};
    uint32_t b[N] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 2, 0x9E3779B9u, 0x80000000u};
    uint32_t out[N] = {0};
    ir_kernel k;
    mulhi_kernel(&k, IR_U32);
    base_error err = {0};
    interp_buffer bufs[3] = {{out, N}, {a, N}, {b, N}};
    assert_int_equal(interp_run(&k, bufs, NULL, N, &err), KILN_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(out[i], (uint32_t)(((uint64_t)a[i] * b[i]) >> 32));
    enum { OP_CAPABILITY = 17, CAP_INT64 = 11, OP_UMUL_EXTENDED = 151 };
    emit_options opt = {.spirv_version = 0x10300, .workgroup_size = 64};
    emit_result r;
    assert_int_equal(emit_spirv(&k, &opt, &r, &err), KILN_OK);
    int muls = 0, int64 = 0;
    for (size_t at = 5; at < r.word_count && r.words[at] >> 16; at += r.words[at] >> 16) {
        muls += (r.words[at] & 0xffffu) == OP_UMUL_EXTENDED;
        int64 += (r.words[at] & 0xffffu) == OP_CAPABILITY && r.words[at + 1] == CAP_INT64;
    }
    assert_int_equal(muls, 1);
    assert_int_equal(int64, 0);
    if (spv_tools_available())
        assert_int_equal(spv_validate(r.words, r.word_count, (1u << 22) | (1u << 12), &err),
                         KILN_OK);
    emit_result_free(alloc(), &r);
    ir_kernel_finish(&k);
}

static void test_ir_mulhi_verifier_takes_u32_only(void **state) {
    (void)state;
    const ir_type bad[] = {IR_I32, IR_I64, IR_F32, IR_U8};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ir_kernel k;
        mulhi_kernel(&k, bad[i]);
        base_error err = {0};
        assert_int_equal(ir_verify(&k, &err), KILN_ERROR_INTERNAL);
        if (!strstr(base_error_message(&err), "MULHI needs u32"))
            fail_msg("%s: \"%s\"", ir_type_name(bad[i]), base_error_message(&err));
        ir_kernel_finish(&k);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ir_mulhi_interpreted_and_emitted),
        cmocka_unit_test(test_ir_mulhi_verifier_takes_u32_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
