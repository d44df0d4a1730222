/* ir_hoist_loads (engine/codegen/ir.h): the loads of the buffers asked for, with the pure
 * instructions that address them, move to the start of each straight run of a loop's body.
 * Checked: where each instruction lands, the verifier's rules (a vector load's EXTRACTs right
 * after it, operands defined before use), the interpreter's results bit for bit against the
 * kernel before the pass, and the emitted SPIR-V (validated by SPIRV-Tools when the library
 * has it). The device runs hoisted kernels wherever it reads texels (every lavapipe test). */
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

enum { STEPS = 6, ITEMS = 5, IN = ITEMS * STEPS * 4 };

/* Buffers: out (0, f32, written), a (1, f32), w (2, f32), idx (3, i32), all read-only but out.
 * Item g sums over s < STEPS (a loop's body of one straight run):
 *     2 a[4 (g STEPS + s)] + w[s] + (w4[0] + w4[3]) (a LOAD4 of w at 4 s) + a[idx[s]] + a[v]
 * where v, a variable, is the previous step's idx read (a load addressed through GET, which
 * stays where it is). Each load comes after arithmetic that does not address it. */
static void sum_kernel(ir_kernel *k) {
    ir_kernel_init(k, alloc(), IR_I32);
    ir_buffer_add(k, IR_F32);
    ir_buffer_add(k, IR_F32);
    ir_buffer_add(k, IR_F32);
    ir_buffer_add(k, IR_I32);
    ir_value g = ir_global_id(k);
    ir_value acc = ir_var(k, ir_const_f(k, IR_F32, 0.0));
    ir_value prev = ir_var(k, ir_const_i(k, IR_I32, 0));
    ir_value s = ir_range(k, ir_const_i(k, IR_I32, STEPS));
    ir_value at = ir_alu(k, IR_MUL, IR_I32, g, ir_const_i(k, IR_I32, STEPS), IR_NONE);
    at = ir_alu(k, IR_ADD, IR_I32, at, s, IR_NONE);
    at = ir_alu(k, IR_MUL, IR_I32, at, ir_const_i(k, IR_I32, 4), IR_NONE);
    ir_value x = ir_load(k, 1, at);
    ir_value two = ir_alu(k, IR_MUL, IR_F32, x, ir_const_f(k, IR_F32, 2.0), IR_NONE);
    ir_value w = ir_load(k, 2, s); /* after arithmetic: hoisted above it */
    ir_value sum = ir_alu(k, IR_ADD, IR_F32, two, w, IR_NONE);
    ir_value four = ir_alu(k, IR_MUL, IR_I32, s, ir_const_i(k, IR_I32, 4), IR_NONE);
    ir_value vec = ir_load_vector(k, 2, four, 4);
    ir_value e0 = ir_extract(k, vec, 0), e3 = ir_extract(k, vec, 3);
    sum = ir_alu(k, IR_ADD, IR_F32, sum, ir_alu(k, IR_ADD, IR_F32, e0, e3, IR_NONE), IR_NONE);
    ir_value i = ir_load(k, 3, s);                                   /* idx: not asked for, stays */
    sum = ir_alu(k, IR_ADD, IR_F32, sum, ir_load(k, 1, i), IR_NONE); /* addressed by idx: stays */
    sum = ir_alu(k, IR_ADD, IR_F32, sum, ir_load(k, 1, ir_get(k, prev)), IR_NONE);
    ir_set(k, prev, i);
    ir_set(k, acc, ir_alu(k, IR_ADD, IR_F32, ir_get(k, acc), sum, IR_NONE));
    ir_endrange(k);
    ir_store(k, 0, g, ir_get(k, acc));
    assert_int_equal(k->status, KILN_OK);
}

static void run(const ir_kernel *k, float out[ITEMS]) {
    static float a[IN], w[4 * STEPS];
    static int32_t idx[STEPS];
    for (int j = 0; j < IN; j++)
        a[j] = (float)((j * 37) % 101) / 7.0f - 5.0f;
    for (int j = 0; j < 4 * STEPS; j++)
        w[j] = (float)((j * 13) % 17) / 3.0f;
    for (int j = 0; j < STEPS; j++)
        idx[j] = (j * 29) % IN;
    interp_buffer bufs[4] = {{out, ITEMS}, {a, IN}, {w, 4 * STEPS}, {idx, STEPS}};
    base_error err = {0};
    memset(out, 0, ITEMS * sizeof *out);
    assert_int_equal(interp_run(k, bufs, NULL, ITEMS, &err), KILN_OK);
}

/* The position of the nth instruction (from 0) of op, type and arg. */
static uint32_t position_of(const ir_kernel *k, ir_op op, ir_type type, uint32_t arg,
                            uint32_t nth) {
    for (uint32_t i = 0, seen = 0; i < k->insts.len; i++) {
        const ir_inst *in = &k->insts.data[i];
        if (in->op == op && in->type == type && in->arg == arg && seen++ == nth)
            return i;
    }
    fail_msg("no %s number %u", ir_op_name(op), nth);
    return 0;
}

static void test_loads_move_to_the_body_start(void **state) {
    (void)state;
    ir_kernel k;
    sum_kernel(&k);
    float before[ITEMS], after[ITEMS];
    run(&k, before);
    uint32_t len = (uint32_t)k.insts.len;
    assert_int_equal(ir_hoist_loads(&k, 1u << 1 | 1u << 2), KILN_OK);
    assert_int_equal(k.insts.len, len);
    base_error err = {0};
    assert_int_equal(ir_verify(&k, &err), KILN_OK);
    run(&k, after);
    assert_memory_equal(before, after, sizeof before);
    /* The body: RANGE, then the hoisted part (the index arithmetic, a[..], w[s], the LOAD4 of
     * w and its two EXTRACTs), then the first float arithmetic. */
    uint32_t range = position_of(&k, IR_RANGE, IR_I32, 0, 0);
    uint32_t first_load = position_of(&k, IR_LOAD, IR_F32, 1, 0);
    uint32_t w_load = position_of(&k, IR_LOAD, IR_F32, 2, 0);
    uint32_t vec = position_of(&k, IR_LOAD4, IR_F32, 2, 0);
    uint32_t first_fmul = position_of(&k, IR_MUL, IR_F32, 0, 0);
    assert_true(range < first_load && first_load < w_load && w_load < vec);
    assert_true(vec + 2 < first_fmul);
    assert_int_equal(k.insts.data[vec + 1].op, IR_EXTRACT);
    assert_int_equal(k.insts.data[vec + 2].op, IR_EXTRACT);
    /* Not asked for or not addressable by pure values: after the arithmetic still. */
    uint32_t idx_load = position_of(&k, IR_LOAD, IR_I32, 3, 0);
    uint32_t gathered = position_of(&k, IR_LOAD, IR_F32, 1, 1);
    uint32_t through_get = position_of(&k, IR_LOAD, IR_F32, 1, 2);
    assert_true(first_fmul < idx_load && idx_load < gathered && gathered < through_get);
    assert_int_equal(k.insts.data[k.insts.data[through_get].src[0]].op, IR_GET);
    emit_options opt = {.spirv_version = 0x10300,
                        .workgroup_size = 64,
                        .texel_buffers = 1u << 1 | 1u << 2 | 1u << 3};
    emit_result r;
    assert_int_equal(emit_spirv(&k, &opt, &r, &err), KILN_OK);
    if (spv_tools_available())
        assert_int_equal(spv_validate(r.words, r.word_count, (1u << 22) | (1u << 12), &err),
                         KILN_OK);
    emit_result_free(alloc(), &r);
    ir_kernel_finish(&k);
}

/* Nothing moves without buffers asked for, nor outside a loop's body. */
static void test_other_code_is_untouched(void **state) {
    (void)state;
    ir_kernel k, copy;
    sum_kernel(&k);
    sum_kernel(&copy);
    assert_int_equal(ir_hoist_loads(&k, 0), KILN_OK);
    assert_memory_equal(k.insts.data, copy.insts.data, k.insts.len * sizeof *k.insts.data);
    ir_kernel_finish(&k);
    ir_kernel_finish(&copy);
    /* out[g] = 2 a[g] + w[g]: a load after arithmetic, no loop */
    for (int pass = 0; pass < 2; pass++) {
        ir_kernel *t = pass ? &copy : &k;
        ir_kernel_init(t, alloc(), IR_I32);
        for (int b = 0; b < 3; b++)
            ir_buffer_add(t, IR_F32);
        ir_value g = ir_global_id(t);
        ir_value two =
            ir_alu(t, IR_MUL, IR_F32, ir_load(t, 1, g), ir_const_f(t, IR_F32, 2.0), IR_NONE);
        ir_store(t, 0, g, ir_alu(t, IR_ADD, IR_F32, two, ir_load(t, 2, g), IR_NONE));
    }
    assert_int_equal(ir_hoist_loads(&k, 1u << 1 | 1u << 2), KILN_OK);
    assert_memory_equal(k.insts.data, copy.insts.data, k.insts.len * sizeof *k.insts.data);
    ir_kernel_finish(&k);
    ir_kernel_finish(&copy);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loads_move_to_the_body_start),
        cmocka_unit_test(test_other_code_is_untouched),
    };
    return cmocka_run_group_tests_name("ir_hoist", tests, NULL, NULL);
}
