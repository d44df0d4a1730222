/* Team kernels (engine/codegen/ir.h: share_lanes, LANE, SHARE): the interpreter runs a team's lanes
 * in lockstep to every SHARE, inside a loop too; the verifier's rules; the emitted SPIR-V (subgroup
 * built-ins and OpGroupNonUniformBroadcast, validated by SPIRV-Tools when the library has it). On
 * the device, matmul's shared loads are checked against the host and the interpreter in test_tiles.
 */
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

/* Teams of 8: for t < 2, out[2g + t] = (in[g] + t as lane `from` has it) * 100 + LANE. */
static void team_kernel(ir_kernel *k, uint32_t lanes, uint32_t from) {
    ir_kernel_init(k, alloc(), IR_I32);
    k->share_lanes = lanes;
    ir_buffer_add(k, IR_F32);
    ir_buffer_add(k, IR_F32);
    ir_value g = ir_global_id(k), lane = ir_lane(k);
    ir_value t = ir_range(k, ir_const_i(k, IR_I32, 2));
    ir_value x = ir_alu(k, IR_ADD, IR_F32, ir_load(k, 1, g), ir_cast(k, IR_F32, t), IR_NONE);
    ir_value shared = ir_share(k, x, from);
    ir_value v = ir_alu(k, IR_MUL, IR_F32, shared, ir_const_f(k, IR_F32, 100.0), IR_NONE);
    v = ir_alu(k, IR_ADD, IR_F32, v, ir_cast(k, IR_F32, lane), IR_NONE);
    ir_value at = ir_alu(k, IR_MUL, IR_I32, g, ir_const_i(k, IR_I32, 2), IR_NONE);
    ir_store(k, 0, ir_alu(k, IR_ADD, IR_I32, at, t, IR_NONE), v);
    ir_endrange(k);
}

static void test_ir_team_interpreted_and_emitted(void **state) {
    (void)state;
    ir_kernel k;
    team_kernel(&k, 8, 3);
    base_error err = {0};
    assert_int_equal(ir_verify(&k, &err), KILN_OK);
    float in[16], out[32] = {0};
    for (int i = 0; i < 16; i++)
        in[i] = (float)(i * i);
    interp_buffer b[2] = {{out, 32}, {in, 16}};
    assert_int_equal(interp_run(&k, b, NULL, 16, &err), KILN_OK);
    for (int g = 0; g < 16; g++) {
        float from = in[g / 8 * 8 + 3]; /* lane 3 of g's team */
        for (int t = 0; t < 2; t++)
            assert_true(out[2 * g + t] == (from + (float)t) * 100.0f + (float)(g % 8));
    }
    enum { OP_BROADCAST = 337 };
    emit_options opt = {.spirv_version = 0x10300, .workgroup_size = 64};
    emit_result r;
    assert_int_equal(emit_spirv(&k, &opt, &r, &err), KILN_OK);
    int broadcasts = 0;
    for (size_t at = 5; at < r.word_count && r.words[at] >> 16; at += r.words[at] >> 16)
        broadcasts += (r.words[at] & 0xffffu) == OP_BROADCAST;
    assert_int_equal(broadcasts, 1);
    if (spv_tools_available())
        assert_int_equal(spv_validate(r.words, r.word_count, (1u << 22) | (1u << 12), &err),
                         KILN_OK);
    emit_result_free(alloc(), &r);

    /* a dispatch of part of a team */
    err = (base_error){0};
    assert_int_equal(interp_run(&k, b, NULL, 12, &err), KILN_ERROR_INTERNAL);
    assert_non_null(strstr(base_error_message(&err), "whole teams"));
    ir_kernel_finish(&k);
}

static void expect_invalid(ir_kernel *k, const char *message) {
    base_error err = {0};
    assert_int_equal(ir_verify(k, &err), KILN_ERROR_INTERNAL);
    if (!strstr(base_error_message(&err), message))
        fail_msg("wanted \"%s\" in \"%s\"", message, base_error_message(&err));
    ir_kernel_finish(k);
}

/* out[g] = 1 as lane `from` of the team has it, of type t, inside an IF when guarded. */
static void share_kernel(ir_kernel *k, uint32_t lanes, uint32_t from, ir_type t, bool guarded) {
    ir_kernel_init(k, alloc(), IR_I32);
    k->share_lanes = lanes;
    ir_buffer_add(k, t);
    ir_value g = ir_global_id(k);
    if (guarded)
        ir_if(k, ir_alu(k, IR_LT, IR_BOOL, g, ir_const_i(k, IR_I32, 3), IR_NONE));
    ir_store(k, 0, g, ir_share(k, ir_const_i(k, t, 1), from));
    if (guarded)
        ir_endif(k);
}

static void test_ir_team_verifier_rules(void **state) {
    (void)state;
    ir_kernel k;
    share_kernel(&k, 8, 7, IR_F32, false);
    base_error err = {0};
    assert_int_equal(ir_verify(&k, &err), KILN_OK);
    ir_kernel_finish(&k);
    share_kernel(&k, 8, 8, IR_F32, false);
    expect_invalid(&k, "lane past its team");
    share_kernel(&k, 0, 0, IR_F32, false);
    expect_invalid(&k, "SHARE outside a team kernel");
    team_kernel(&k, 8, 1); /* LANE too */
    k.share_lanes = 0;
    expect_invalid(&k, "LANE outside a group or team kernel");
    share_kernel(&k, 6, 1, IR_F32, false);
    expect_invalid(&k, "teams of 6 lanes");
    share_kernel(&k, 8, 1, IR_F32, false);
    k.group_lanes = 8;
    expect_invalid(&k, "teams of 8 lanes (in a group kernel: 8)");
    share_kernel(&k, 4, 0, IR_F32, true); /* lanes that skip the IF would not reach it */
    expect_invalid(&k, "SHARE inside an IF");
    share_kernel(&k, 4, 0, IR_U8, false);
    expect_invalid(&k, "32 or 64 bits");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ir_team_interpreted_and_emitted),
        cmocka_unit_test(test_ir_team_verifier_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
