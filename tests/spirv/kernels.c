#include "kernels.h"

static const uint32_t wg_spec_ids[3] = {KERN_SPEC_WG_X, KERN_SPEC_WG_Y, KERN_SPEC_WG_Z};
static const uint32_t wg_default[3] = {64, 1, 1};

/* x of a uvec3 built-in. */
static spv_id builtin_x(spv_builder *b, SpvBuiltIn builtin) {
    return spv_composite_extract(b, spv_load(b, spv_builtin(b, builtin)), 0);
}

static spv_id load_at(spv_builder *b, spv_id buffer, spv_id index) {
    return spv_load(b, spv_buffer_element(b, buffer, index));
}

/* if (cond) { ...then... } : begins the then block and returns the merge label. */
static spv_id begin_if(spv_builder *b, spv_id cond) {
    spv_id then = spv_label(b), merge = spv_label(b);
    spv_selection_merge(b, merge);
    spv_branch_cond(b, cond, then, merge);
    spv_block(b, then);
    return merge;
}

static void end_if(spv_builder *b, spv_id merge) {
    spv_branch(b, merge);
    spv_block(b, merge);
}

static void end_main(spv_builder *b) {
    spv_return(b);
    spv_function_end(b);
}

static void build_vadd(spv_builder *b) {
    spv_id f32 = spv_type_float(b, 32), u32 = spv_type_int(b, 32, false);
    spv_id a = spv_storage_buffer(b, f32, 0, 0, SPV_ACCESS_READ);
    spv_id bb = spv_storage_buffer(b, f32, 0, 1, SPV_ACCESS_READ);
    spv_id c = spv_storage_buffer(b, f32, 0, 2, SPV_ACCESS_WRITE);
    spv_id pc = spv_push_constants(b, 1, &u32, NULL);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size_spec(b, fn, wg_spec_ids, wg_default, NULL);
    spv_id i = builtin_x(b, SpvBuiltInGlobalInvocationId);
    spv_id n = spv_push_constant_load(b, pc, 0);
    spv_id merge = begin_if(b, spv_binop(b, SpvOpULessThan, i, n));
    spv_id sum = spv_binop(b, SpvOpFAdd, load_at(b, a, i), load_at(b, bb, i));
    spv_store(b, spv_buffer_element(b, c, i), sum);
    end_if(b, merge);
    end_main(b);
}

static void build_loop_phi(spv_builder *b) {
    spv_id f32 = spv_type_float(b, 32), u32 = spv_type_int(b, 32, false);
    spv_id a = spv_storage_buffer(b, f32, 0, 0, SPV_ACCESS_READ);
    spv_id out = spv_storage_buffer(b, f32, 0, 1, SPV_ACCESS_WRITE);
    spv_id members[2] = {u32, u32};
    spv_id pc = spv_push_constants(b, 2, members, NULL);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size_spec(b, fn, wg_spec_ids, wg_default, NULL);
    spv_id i = builtin_x(b, SpvBuiltInGlobalInvocationId);
    spv_id n = spv_push_constant_load(b, pc, 0), m = spv_push_constant_load(b, pc, 1);
    spv_id merge_if = begin_if(b, spv_binop(b, SpvOpULessThan, i, n));
    spv_id base = spv_binop(b, SpvOpIMul, i, m);
    spv_id pre = spv_current_label(b);
    spv_id header = spv_label(b), body = spv_label(b), cont = spv_label(b), merge = spv_label(b);
    spv_branch(b, header);

    spv_block(b, header);
    spv_id k = spv_phi(b, u32, 2), acc = spv_phi(b, f32, 2);
    spv_id more = spv_binop(b, SpvOpULessThan, k, m);
    spv_loop_merge(b, merge, cont); /* the merge instruction goes right before the branch */
    spv_branch_cond(b, more, body, merge);

    spv_block(b, body);
    spv_id x = load_at(b, a, spv_binop(b, SpvOpIAdd, base, k));
    spv_id acc_next = spv_binop(b, SpvOpFAdd, acc, x);
    spv_branch(b, cont);

    spv_block(b, cont);
    spv_id k_next = spv_binop(b, SpvOpIAdd, k, spv_const_u32(b, 1));
    spv_branch(b, header);

    spv_phi_set(b, k, 0, spv_const_u32(b, 0), pre);
    spv_phi_set(b, k, 1, k_next, cont);
    spv_phi_set(b, acc, 0, spv_const_f32(b, 0.0f), pre);
    spv_phi_set(b, acc, 1, acc_next, cont);

    spv_block(b, merge);
    spv_store(b, spv_buffer_element(b, out, i), acc);
    end_if(b, merge_if);
    end_main(b);
}

enum { WG_REDUCE_SIZE = 64 };

static void build_wg_reduce(spv_builder *b) {
    spv_id f32 = spv_type_float(b, 32), u32 = spv_type_int(b, 32, false);
    spv_id in = spv_storage_buffer(b, f32, 0, 0, SPV_ACCESS_READ);
    spv_id out = spv_storage_buffer(b, f32, 0, 1, SPV_ACCESS_WRITE);
    spv_id shared =
        spv_variable(b, SpvStorageClassWorkgroup, spv_type_array(b, f32, WG_REDUCE_SIZE, 0));
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size(b, fn, (const uint32_t[]){WG_REDUCE_SIZE, 1, 1});
    spv_id gid = builtin_x(b, SpvBuiltInGlobalInvocationId);
    spv_id lid = builtin_x(b, SpvBuiltInLocalInvocationId);
    spv_id wid = builtin_x(b, SpvBuiltInWorkgroupId);
    spv_store(b, spv_access_chain(b, shared, 1, &lid), load_at(b, in, gid));
    spv_workgroup_barrier(b);
    spv_id pre = spv_current_label(b);
    spv_id header = spv_label(b), body = spv_label(b), cont = spv_label(b), merge = spv_label(b);
    spv_branch(b, header);

    spv_block(b, header);
    spv_id stride = spv_phi(b, u32, 2);
    spv_id more = spv_binop(b, SpvOpUGreaterThan, stride, spv_const_u32(b, 0));
    spv_loop_merge(b, merge, cont);
    spv_branch_cond(b, more, body, merge);

    spv_block(b, body);
    spv_id join = begin_if(b, spv_binop(b, SpvOpULessThan, lid, stride));
    spv_id other = spv_binop(b, SpvOpIAdd, lid, stride);
    spv_id mine = spv_access_chain(b, shared, 1, &lid);
    spv_id sum = spv_binop(b, SpvOpFAdd, spv_load(b, mine),
                           spv_load(b, spv_access_chain(b, shared, 1, &other)));
    spv_store(b, mine, sum);
    end_if(b, join);
    spv_workgroup_barrier(b);
    spv_branch(b, cont);

    spv_block(b, cont);
    spv_id next = spv_binop(b, SpvOpShiftRightLogical, stride, spv_const_u32(b, 1));
    spv_branch(b, header);
    spv_phi_set(b, stride, 0, spv_const_u32(b, WG_REDUCE_SIZE / 2), pre);
    spv_phi_set(b, stride, 1, next, cont);

    spv_block(b, merge);
    spv_id first = begin_if(b, spv_binop(b, SpvOpIEqual, lid, spv_const_u32(b, 0)));
    spv_id zero = spv_const_u32(b, 0);
    spv_store(b, spv_buffer_element(b, out, wid),
              spv_load(b, spv_access_chain(b, shared, 1, &zero)));
    end_if(b, first);
    end_main(b);
}

static void build_subgroup(spv_builder *b) {
    spv_id u32 = spv_type_int(b, 32, false);
    spv_id in = spv_storage_buffer(b, u32, 0, 0, SPV_ACCESS_READ);
    spv_id out = spv_storage_buffer(b, u32, 0, 1, SPV_ACCESS_WRITE);
    spv_id total = spv_storage_buffer(b, u32, 0, 2, SPV_ACCESS_READ_WRITE);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size_spec(b, fn, wg_spec_ids, wg_default, NULL);
    spv_id i = builtin_x(b, SpvBuiltInGlobalInvocationId);
    spv_id sum =
        spv_subgroup_op(b, SpvOpGroupNonUniformIAdd, SpvGroupOperationReduce, load_at(b, in, i));
    spv_store(b, spv_buffer_element(b, out, i), sum);
    spv_id merge = begin_if(b, spv_subgroup_elect(b));
    spv_atomic(b, SpvOpAtomicIAdd, spv_buffer_element(b, total, spv_const_u32(b, 0)),
               SpvScopeDevice, 0, spv_subgroup_broadcast_first(b, sum));
    end_if(b, merge);
    end_main(b);
}

static void build_spec_wg(spv_builder *b) {
    spv_id u32 = spv_type_int(b, 32, false);
    spv_id out = spv_storage_buffer(b, u32, 0, 0, SPV_ACCESS_WRITE);
    spv_id fn = spv_function_begin(b, "main");
    spv_id size[3];
    spv_workgroup_size_spec(b, fn, wg_spec_ids, wg_default, size);
    spv_id i = builtin_x(b, SpvBuiltInGlobalInvocationId);
    spv_id lid = builtin_x(b, SpvBuiltInLocalInvocationId);
    spv_id v =
        spv_binop(b, SpvOpIAdd, spv_binop(b, SpvOpIMul, size[0], spv_const_u32(b, 1000)), lid);
    spv_store(b, spv_buffer_element(b, out, i), v);
    end_main(b);
}

/* y = (x > 2 ? sqrt(x) : exp2(x)) + fma(x, x, 1) + max(x, 0.5) - float(int(x)) - x
 * v = (((u ^ 0x55) << 1) | (u & 3)) + u / 3 + u % 5 + min(u, 1000) - (u >> 2), via a local */
static void build_math(spv_builder *b) {
    spv_id f32 = spv_type_float(b, 32), u32 = spv_type_int(b, 32, false);
    spv_id i32 = spv_type_int(b, 32, true);
    spv_id xs = spv_storage_buffer(b, f32, 0, 0, SPV_ACCESS_READ);
    spv_id ys = spv_storage_buffer(b, f32, 0, 1, SPV_ACCESS_WRITE);
    spv_id us = spv_storage_buffer(b, u32, 0, 2, SPV_ACCESS_READ);
    spv_id vs = spv_storage_buffer(b, u32, 0, 3, SPV_ACCESS_WRITE);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size_spec(b, fn, wg_spec_ids, wg_default, NULL);
    spv_id acc = spv_local(b, u32);
    spv_id i = builtin_x(b, SpvBuiltInGlobalInvocationId);
    spv_id x = load_at(b, xs, i);
    spv_id sq = spv_glsl(b, GLSLstd450Sqrt, f32, 1, &x);
    spv_id ex = spv_glsl(b, GLSLstd450Exp2, f32, 1, &x);
    spv_id y = spv_select(b, spv_binop(b, SpvOpFOrdGreaterThan, x, spv_const_f32(b, 2.0f)), sq, ex);
    spv_id fma_args[3] = {x, x, spv_const_f32(b, 1.0f)};
    y = spv_binop(b, SpvOpFAdd, y, spv_glsl(b, GLSLstd450Fma, f32, 3, fma_args));
    spv_id max_args[2] = {x, spv_const_f32(b, 0.5f)};
    y = spv_binop(b, SpvOpFAdd, y, spv_glsl(b, GLSLstd450FMax, f32, 2, max_args));
    spv_id trunc = spv_convert(b, SpvOpConvertSToF, f32, spv_convert(b, SpvOpConvertFToS, i32, x));
    y = spv_binop(b, SpvOpFSub, y, trunc);
    y = spv_binop(b, SpvOpFAdd, y, spv_unop(b, SpvOpFNegate, x));
    spv_store(b, spv_buffer_element(b, ys, i), y);

    spv_id u = load_at(b, us, i);
    spv_id t = spv_binop(b, SpvOpBitwiseXor, u, spv_const_u32(b, 0x55));
    t = spv_binop(b, SpvOpShiftLeftLogical, t, spv_const_u32(b, 1));
    t = spv_binop(b, SpvOpBitwiseOr, t, spv_binop(b, SpvOpBitwiseAnd, u, spv_const_u32(b, 3)));
    spv_store(b, acc, t);
    t = spv_binop(b, SpvOpIAdd, spv_load(b, acc), spv_binop(b, SpvOpUDiv, u, spv_const_u32(b, 3)));
    t = spv_binop(b, SpvOpIAdd, t, spv_binop(b, SpvOpUMod, u, spv_const_u32(b, 5)));
    spv_id min_args[2] = {u, spv_const_u32(b, 1000)};
    t = spv_binop(b, SpvOpIAdd, t, spv_glsl(b, GLSLstd450UMin, u32, 2, min_args));
    t = spv_binop(b, SpvOpISub, t, spv_binop(b, SpvOpShiftRightLogical, u, spv_const_u32(b, 2)));
    spv_store(b, spv_buffer_element(b, vs, i), t);
    end_main(b);
}

static void build_f16(spv_builder *b) {
    spv_id f16 = spv_type_float(b, 16), f32 = spv_type_float(b, 32);
    spv_id in = spv_storage_buffer(b, f16, 0, 0, SPV_ACCESS_READ);
    spv_id out = spv_storage_buffer(b, f16, 0, 1, SPV_ACCESS_WRITE);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size_spec(b, fn, wg_spec_ids, wg_default, NULL);
    spv_id i = builtin_x(b, SpvBuiltInGlobalInvocationId);
    spv_id x = spv_binop(b, SpvOpFMul, load_at(b, in, i), spv_const_float(b, f16, 2.0));
    spv_id y =
        spv_binop(b, SpvOpFAdd, spv_convert(b, SpvOpFConvert, f32, x), spv_const_f32(b, 1.0f));
    spv_store(b, spv_buffer_element(b, out, i), spv_convert(b, SpvOpFConvert, f16, y));
    end_main(b);
}

static void build_i8(spv_builder *b) {
    spv_id i8 = spv_type_int(b, 8, true), i32 = spv_type_int(b, 32, true);
    spv_id in = spv_storage_buffer(b, i8, 0, 0, SPV_ACCESS_READ);
    spv_id out = spv_storage_buffer(b, i8, 0, 1, SPV_ACCESS_WRITE);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size_spec(b, fn, wg_spec_ids, wg_default, NULL);
    spv_id i = builtin_x(b, SpvBuiltInGlobalInvocationId);
    spv_id x = spv_convert(b, SpvOpSConvert, i32, load_at(b, in, i));
    x = spv_binop(b, SpvOpISub, spv_binop(b, SpvOpIMul, x, spv_const_i32(b, 3)),
                  spv_const_i32(b, 1));
    spv_store(b, spv_buffer_element(b, out, i), spv_convert(b, SpvOpSConvert, i8, x));
    end_main(b);
}

static void build_spec(spv_builder *b) {
    spv_id f32 = spv_type_float(b, 32), i32 = spv_type_int(b, 32, true);
    spv_id out = spv_storage_buffer(b, f32, 0, 0, SPV_ACCESS_WRITE);
    spv_id flag = spv_spec_bool(b, KERN_SPEC_FLAG, false);
    spv_id scale = spv_spec_float(b, f32, KERN_SPEC_SCALE, 2.0);
    spv_id offset = spv_spec_int(b, i32, KERN_SPEC_OFFSET, 7);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size_spec(b, fn, wg_spec_ids, wg_default, NULL);
    spv_id i = builtin_x(b, SpvBuiltInGlobalInvocationId);
    spv_id factor = spv_select(b, flag, scale, spv_const_f32(b, -1.0f));
    spv_id v = spv_binop(b, SpvOpFMul, factor, spv_convert(b, SpvOpConvertUToF, f32, i));
    v = spv_binop(b, SpvOpFAdd, v, spv_convert(b, SpvOpConvertSToF, f32, offset));
    spv_store(b, spv_buffer_element(b, out, i), v);
    end_main(b);
}

static void build_atomics(spv_builder *b) {
    spv_id u32 = spv_type_int(b, 32, false);
    spv_id counters = spv_storage_buffer(b, u32, 0, 0, SPV_ACCESS_READ_WRITE);
    spv_id out = spv_storage_buffer(b, u32, 0, 1, SPV_ACCESS_WRITE);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size_spec(b, fn, wg_spec_ids, wg_default, NULL);
    spv_id i = builtin_x(b, SpvBuiltInGlobalInvocationId);
    spv_id c[4];
    for (uint32_t k = 0; k < 4; k++)
        c[k] = spv_buffer_element(b, counters, spv_const_u32(b, k));
    spv_id one = spv_const_u32(b, 1);
    spv_id old = spv_atomic(b, SpvOpAtomicIAdd, c[0], SpvScopeDevice, 0, one);
    spv_atomic(b, SpvOpAtomicUMax, c[1], SpvScopeDevice, 0, i);
    spv_atomic_compare_exchange(b, c[2], SpvScopeDevice, 0, spv_binop(b, SpvOpIAdd, i, one),
                                spv_const_u32(b, 0));
    spv_id bit =
        spv_binop(b, SpvOpShiftLeftLogical, one, spv_binop(b, SpvOpUMod, i, spv_const_u32(b, 32)));
    spv_atomic(b, SpvOpAtomicOr, c[3], SpvScopeDevice, 0, bit);
    spv_memory_barrier(b, SpvScopeDevice,
                       SpvMemorySemanticsAcquireReleaseMask | SpvMemorySemanticsUniformMemoryMask);
    spv_id seen = spv_atomic_load(b, c[3], SpvScopeDevice, 0);
    spv_id v =
        spv_binop(b, SpvOpIAdd, old, spv_binop(b, SpvOpBitwiseAnd, seen, spv_const_u32(b, 0)));
    spv_store(b, spv_buffer_element(b, out, i), v);
    end_main(b);
}

static void build_vectors(spv_builder *b) {
    spv_id f32 = spv_type_float(b, 32), v4 = spv_type_vector(b, f32, 4);
    spv_id in = spv_storage_buffer(b, v4, 0, 0, SPV_ACCESS_READ);
    spv_id out = spv_storage_buffer(b, v4, 0, 1, SPV_ACCESS_WRITE);
    spv_id sums = spv_storage_buffer(b, f32, 0, 2, SPV_ACCESS_WRITE);
    spv_name(b, in, "in");
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size_spec(b, fn, wg_spec_ids, wg_default, NULL);
    spv_id i = builtin_x(b, SpvBuiltInGlobalInvocationId);
    spv_id parts[4] = {spv_const_f32(b, 1), spv_const_f32(b, 2), spv_const_f32(b, 3),
                       spv_const_f32(b, 4)};
    spv_id c = spv_const_composite(b, v4, 4, parts);
    spv_id v = load_at(b, in, i);
    spv_id w = spv_binop(b, SpvOpFAdd, spv_binop(b, SpvOpFMul, v, c), spv_const_null(b, v4));
    spv_id r = spv_select(b, spv_binop(b, SpvOpFOrdLessThan, v, c), w, v);
    spv_store(b, spv_buffer_element(b, out, i), r);
    spv_id e[4];
    for (uint32_t k = 0; k < 4; k++)
        e[k] = spv_composite_extract(b, r, k);
    spv_id swapped = spv_composite_construct(b, v4, 4, (spv_id[]){e[3], e[2], e[1], e[0]});
    spv_id s = spv_binop(b, SpvOpFAdd, spv_composite_extract(b, swapped, 0),
                         spv_composite_extract(b, swapped, 1));
    s = spv_binop(b, SpvOpFAdd, s, spv_composite_extract(b, swapped, 2));
    s = spv_binop(b, SpvOpFAdd, s, spv_composite_extract(b, swapped, 3));
    spv_store(b, spv_buffer_element(b, sums, i), s);
    end_main(b);
}

static void build_wide(spv_builder *b) {
    spv_id u32 = spv_type_int(b, 32, false), u64 = spv_type_int(b, 64, false);
    spv_id f64 = spv_type_float(b, 64);
    spv_id us = spv_storage_buffer(b, u32, 0, 0, SPV_ACCESS_READ);
    spv_id ws = spv_storage_buffer(b, u64, 0, 1, SPV_ACCESS_WRITE);
    spv_id ds = spv_storage_buffer(b, f64, 0, 2, SPV_ACCESS_WRITE);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size_spec(b, fn, wg_spec_ids, wg_default, NULL);
    spv_id i = builtin_x(b, SpvBuiltInGlobalInvocationId);
    spv_id u = load_at(b, us, i);
    spv_id w = spv_binop(b, SpvOpIMul, spv_convert(b, SpvOpUConvert, u64, u),
                         spv_const_int(b, u64, 0x100000001));
    spv_store(b, spv_buffer_element(b, ws, i),
              spv_binop(b, SpvOpIAdd, w, spv_const_int(b, u64, 7)));
    spv_id d = spv_binop(b, SpvOpFDiv, spv_convert(b, SpvOpConvertUToF, f64, u),
                         spv_const_float(b, f64, 3.0));
    spv_store(b, spv_buffer_element(b, ds, i), d);
    end_main(b);
}

const kern_def kern_defs[KERN_COUNT_] = {
    [KERN_VADD] = {"vadd", build_vadd, 3, 4, false, false, false},
    [KERN_LOOP_PHI] = {"loop_phi", build_loop_phi, 2, 8, false, false, false},
    [KERN_WG_REDUCE] = {"wg_reduce", build_wg_reduce, 2, 0, false, false, false},
    [KERN_SUBGROUP] = {"subgroup", build_subgroup, 3, 0, false, false, true},
    [KERN_SPEC_WG] = {"spec_wg", build_spec_wg, 1, 0, false, false, false},
    [KERN_MATH] = {"math", build_math, 4, 0, false, false, false},
    [KERN_F16] = {"f16", build_f16, 2, 0, true, false, false},
    [KERN_I8] = {"i8", build_i8, 2, 0, false, true, false},
    [KERN_SPEC] = {"spec", build_spec, 1, 0, false, false, false},
    [KERN_ATOMICS] = {"atomics", build_atomics, 2, 0, false, false, false},
    [KERN_VECTORS] = {"vectors", build_vectors, 3, 0, false, false, false},
    [KERN_WIDE] = {"wide", build_wide, 3, 0, false, false, false},
};

spv_builder *kern_build(kern_id k, uint32_t version, bool maintenance4, const base_allocator *alloc,
                        const uint32_t **words, size_t *count, base_error *err) {
    spv_builder *b = NULL;
    spv_builder_options o = {.version = version, .maintenance4 = maintenance4, .alloc = alloc};
    if (spv_builder_create(&o, &b, err) != KILN_OK)
        return NULL;
    kern_defs[k].build(b);
    if (spv_builder_finish(b, words, count, err) != KILN_OK) {
        spv_builder_destroy(b);
        return NULL;
    }
    return b;
}
