/* Functions, entry points, blocks and structured control flow, and the instructions of a
 * function body, each checking its operands' types against the op tables below. */
#include "spv_internal.h"

#include <string.h>

/* Operand classes of the op tables. */
enum { C_INT = 1, C_FLOAT, C_BOOL, C_ANY };
/* Result kinds: the operands' type, or bool of the operands' component count. */
enum { R_SAME = 1, R_BOOL };

static spv_id spv_full(spv_builder *b, uint32_t raw) {
    return spv_ok(b) ? spv_make_id(b, raw) : 0;
}

/* The info of a value (constant, variable, result), or NULL recording an error. */
static const spv_info *spv_value(spv_builder *b, spv_id id, const char *what) {
    const spv_info *v = spv_lookup(b, id, what);
    if (v && v->kind != SPV_K_CONST && v->kind != SPV_K_VARIABLE && v->kind != SPV_K_VALUE) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: %s (id %u) is not a value", what,
                 spv_raw(id));
        return NULL;
    }
    return v;
}

static const char *spv_class_name(int c) {
    return c == C_INT ? "integer" : c == C_FLOAT ? "float" : c == C_BOOL ? "bool" : "scalar";
}

/* Checks that value v is a scalar or vector of class c; *count gets its component count. */
static const spv_info *spv_value_of_class(spv_builder *b, spv_id id, int c, const char *what,
                                          uint32_t *count) {
    const spv_info *v = spv_value(b, id, what), *s;
    if (!v)
        return NULL;
    if (!spv_scalar_of(b, v->type, &s, count) || (c == C_INT && s->cls != SPV_T_INT) ||
        (c == C_FLOAT && s->cls != SPV_T_FLOAT) || (c == C_BOOL && s->cls != SPV_T_BOOL)) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: %s (id %u) has the wrong type: expected a %s scalar or vector", what,
                 spv_raw(id), spv_class_name(c));
        return NULL;
    }
    return s;
}

/* The body of the current block, or NULL recording "<what> outside a block". */
static spv_words *spv_body(spv_builder *b, const char *what) {
    if (!spv_ok(b))
        return NULL;
    if (!b->in_block) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: %s outside a block%s", what,
                 b->in_function ? " (the previous block was terminated)" : " (no function)");
        return NULL;
    }
    if (b->merge_pending) {
        /* "OpLoopMerge must immediately precede either an OpBranch or OpBranchConditional" */
        spv_fail(b, KILN_ERROR_INVALID_SPIRV,
                 "spirv: %s between a merge instruction and its block's branch", what);
        return NULL;
    }
    return &b->fn_body;
}

/* Emits `op type <new id> operands` into the current block; returns the full id. */
static spv_id spv_result(spv_builder *b, SpvOp op, uint32_t type, const uint32_t *operands,
                         size_t count, const char *what) {
    spv_words *w = spv_body(b, what);
    uint32_t raw = w ? spv_new_id(b, SPV_K_VALUE) : 0;
    if (!raw)
        return 0;
    b->ids.data[raw].type = type;
    uint32_t ops[16];
    if (count + 2 > BASE_COUNTOF(ops)) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: %s with %zu operands", what, count);
        return 0;
    }
    ops[0] = type;
    ops[1] = raw;
    if (count)
        memcpy(ops + 2, operands, count * sizeof *operands);
    spv_emit(b, w, op, ops, count + 2);
    return spv_full(b, raw);
}

static void spv_plain(spv_builder *b, SpvOp op, const uint32_t *operands, size_t count,
                      const char *what) {
    spv_words *w = spv_body(b, what);
    if (w)
        spv_emit(b, w, op, operands, count);
}

static uint32_t spv_bool_like(spv_builder *b, uint32_t count) {
    spv_id t = spv_type_bool(b);
    return spv_raw(count > 1 ? spv_type_vector(b, t, count) : t);
}

/* ---- functions and entry points --------------------------------------------------------- */

spv_id spv_function_begin(spv_builder *b, const char *name) {
    if (!spv_ok(b))
        return 0;
    if (b->in_function) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: spv_function_begin inside a function (spv_function_end missing)");
        return 0;
    }
    uint32_t type = spv_raw(spv_type_function_void(b)), ret = spv_raw(spv_type_void(b));
    uint32_t fn = spv_new_id(b, SPV_K_FUNCTION), label = spv_new_id(b, SPV_K_LABEL);
    if (!fn || !label)
        return 0;
    b->ids.data[label].a = 1; /* placed */
    uint32_t ops[4] = {ret, fn, SpvFunctionControlMaskNone, type};
    spv_emit(b, &b->fn_head, SpvOpFunction, ops, 4);
    spv_emit(b, &b->fn_head, SpvOpLabel, &label, 1);
    b->in_function = b->in_block = true;
    b->label = label;
    b->pending_phis = 0;
    if (name) {
        char *copy = base_strdup(&b->alloc, name);
        if (!copy ||
            BASE_VEC_PUSH(&b->alloc, &b->entries, ((spv_entry){fn, copy, false})) != KILN_OK) {
            if (copy)
                base_free(&b->alloc, copy, strlen(copy) + 1);
            spv_fail(b, KILN_ERROR_OUT_OF_HOST_MEMORY, "spirv: out of host memory");
        }
        spv_name(b, spv_full(b, fn), name);
    }
    return spv_full(b, fn);
}

void spv_function_end(spv_builder *b) {
    if (!spv_ok(b))
        return;
    if (!b->in_function) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: spv_function_end outside a function");
        return;
    }
    if (b->in_block) {
        spv_fail(b, KILN_ERROR_INVALID_SPIRV,
                 "spirv: unterminated block (label %u) at the end of a function", b->label);
        return;
    }
    if (b->pending_phis) {
        spv_fail(b, KILN_ERROR_INVALID_SPIRV, "spirv: %u OpPhi operands were never set",
                 b->pending_phis);
        return;
    }
    for (size_t i = 0; i < b->fn_labels.len; i++) {
        if (!b->ids.data[b->fn_labels.data[i]].a) {
            spv_fail(b, KILN_ERROR_INVALID_SPIRV,
                     "spirv: label %u is branched to but begins no block (spv_block missing)",
                     b->fn_labels.data[i]);
            return;
        }
    }
    /* Function variables go first in the first block: head, variables, the rest. */
    spv_words *out = &b->sec[SPV_SEC_FUNCTIONS];
    uint32_t *tmp[3] = {b->fn_head.data, b->fn_vars.data, b->fn_body.data};
    size_t len[3] = {b->fn_head.len, b->fn_vars.len, b->fn_body.len};
    for (int i = 0; i < 3; i++) {
        size_t need;
        if (!base_add_size(out->len, len[i], &need) ||
            (need > out->cap && BASE_VEC_RESERVE(&b->alloc, out, need) != KILN_OK)) {
            spv_fail(b, KILN_ERROR_OUT_OF_HOST_MEMORY, "spirv: out of host memory");
            return;
        }
        if (len[i])
            memcpy(out->data + out->len, tmp[i], len[i] * sizeof(uint32_t));
        out->len += len[i];
    }
    spv_emit(b, out, SpvOpFunctionEnd, NULL, 0);
    b->fn_head.len = b->fn_vars.len = b->fn_body.len = b->fn_labels.len = 0;
    b->in_function = false;
}

spv_id spv_local(spv_builder *b, spv_id type) {
    if (!spv_lookup(b, type, "a local variable's type"))
        return 0;
    if (!b->in_function) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: spv_local outside a function");
        return 0;
    }
    spv_id ptr = spv_type_pointer(b, SpvStorageClassFunction, type);
    uint32_t raw = ptr ? spv_new_id(b, SPV_K_VARIABLE) : 0;
    if (!raw)
        return 0;
    b->ids.data[raw].type = spv_raw(ptr);
    uint32_t ops[3] = {spv_raw(ptr), raw, SpvStorageClassFunction};
    spv_emit(b, &b->fn_vars, SpvOpVariable, ops, 3);
    return spv_full(b, raw);
}

/* Checks that function is an entry point and marks it sized (a size is being given). */
static bool spv_check_function(spv_builder *b, spv_id function) {
    const spv_info *f = spv_lookup(b, function, "the entry point function");
    if (!f)
        return false;
    for (size_t i = 0; f->kind == SPV_K_FUNCTION && i < b->entries.len; i++) {
        if (b->entries.data[i].function == spv_raw(function)) {
            if (b->entries.data[i].sized)
                break; /* a second size: an error */
            b->entries.data[i].sized = true;
            return true;
        }
    }
    spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
             "spirv: id %u is not an entry point without a workgroup size yet", spv_raw(function));
    return false;
}

static void spv_local_size(spv_builder *b, spv_id function, const uint32_t size[3]) {
    uint32_t ops[5] = {spv_raw(function), SpvExecutionModeLocalSize, size[0], size[1], size[2]};
    spv_emit(b, &b->sec[SPV_SEC_EXEC_MODES], SpvOpExecutionMode, ops, 5);
}

void spv_execution_mode(spv_builder *b, spv_id function, SpvExecutionMode mode,
                        uint32_t literal_count, const uint32_t *literals) {
    if (!spv_ok(b))
        return;
    if (literal_count > 3) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: execution mode %u with %u literals",
                 (unsigned)mode, literal_count);
        return;
    }
    uint32_t ops[5] = {spv_raw(function), (uint32_t)mode};
    for (uint32_t i = 0; i < literal_count; i++)
        ops[2 + i] = literals[i];
    spv_emit(b, &b->sec[SPV_SEC_EXEC_MODES], SpvOpExecutionMode, ops, 2 + literal_count);
}

void spv_workgroup_size(spv_builder *b, spv_id function, const uint32_t size[3]) {
    if (spv_check_function(b, function))
        spv_local_size(b, function, size);
}

void spv_workgroup_size_spec(spv_builder *b, spv_id function, const uint32_t spec_ids[3],
                             const uint32_t defaults[3], spv_id ids[3]) {
    if (ids)
        ids[0] = ids[1] = ids[2] = 0;
    if (!spv_check_function(b, function))
        return;
    spv_id u32 = spv_type_int(b, 32, false), c[3];
    for (int i = 0; i < 3; i++)
        c[i] = spv_spec_int(b, u32, spec_ids[i], defaults[i]);
    if (!spv_ok(b))
        return;
    if (b->maintenance4) {
        /* LocalSizeId (SPIR-V 1.2) takes the size as constant instructions. */
        uint32_t ops[5] = {spv_raw(function), SpvExecutionModeLocalSizeId, spv_raw(c[0]),
                           spv_raw(c[1]), spv_raw(c[2])};
        spv_emit(b, &b->sec[SPV_SEC_EXEC_MODES], SpvOpExecutionModeId, ops, 5);
    } else {
        /* "If an object is decorated with the WorkgroupSize decoration, this takes precedence
         * over any LocalSize or LocalSizeId execution mode." (BuiltIn WorkgroupSize) */
        spv_local_size(b, function, defaults);
        spv_id uvec3 = spv_type_vector(b, u32, 3);
        uint32_t raw = spv_new_id(b, SPV_K_CONST);
        if (!raw)
            return;
        b->ids.data[raw].type = spv_raw(uvec3);
        uint32_t ops[5] = {spv_raw(uvec3), raw, spv_raw(c[0]), spv_raw(c[1]), spv_raw(c[2])};
        spv_emit(b, &b->sec[SPV_SEC_GLOBALS], SpvOpSpecConstantComposite, ops, 5);
        spv_decorate(b, spv_full(b, raw), SpvDecorationBuiltIn, 1, SpvBuiltInWorkgroupSize, 0);
    }
    if (ids && spv_ok(b))
        memcpy(ids, c, sizeof c);
}

/* ---- blocks and control flow ------------------------------------------------------------ */

spv_id spv_label(spv_builder *b) {
    return spv_full(b, spv_new_id(b, SPV_K_LABEL));
}

static const spv_info *spv_check_label(spv_builder *b, spv_id label, const char *what) {
    const spv_info *l = spv_lookup(b, label, what);
    if (l && l->kind != SPV_K_LABEL) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: %s (id %u) is not a label", what,
                 spv_raw(label));
        return NULL;
    }
    return l;
}

/* A label the current block branches to (or names as a merge, continue or phi parent): it
 * must begin a block of this function before the function ends. */
static bool spv_ref_label(spv_builder *b, spv_id label, const char *what) {
    if (!spv_check_label(b, label, what))
        return false;
    if (BASE_VEC_PUSH(&b->alloc, &b->fn_labels, spv_raw(label)) != KILN_OK) {
        spv_fail(b, KILN_ERROR_OUT_OF_HOST_MEMORY, "spirv: out of host memory");
        return false;
    }
    return true;
}

void spv_block(spv_builder *b, spv_id label) {
    if (!spv_check_label(b, label, "a block's label"))
        return;
    spv_info *l = &b->ids.data[spv_raw(label)];
    if (!b->in_function || b->in_block) {
        spv_fail(b, KILN_ERROR_INVALID_SPIRV, "spirv: block %u begun %s", spv_raw(label),
                 b->in_function ? "before the previous block was terminated"
                                : "outside a function");
        return;
    }
    if (l->a) {
        spv_fail(b, KILN_ERROR_INVALID_SPIRV, "spirv: label %u begins two blocks", spv_raw(label));
        return;
    }
    l->a = 1;
    uint32_t raw = spv_raw(label);
    spv_emit(b, &b->fn_body, SpvOpLabel, &raw, 1);
    b->in_block = true;
    b->label = raw;
}

spv_id spv_current_label(const spv_builder *b) {
    return b && b->in_block ? spv_make_id(b, b->label) : 0;
}

static void spv_terminate(spv_builder *b, SpvOp op, const uint32_t *ops, size_t n,
                          const char *what) {
    spv_plain(b, op, ops, n, what);
    if (spv_ok(b))
        b->in_block = false;
}

void spv_branch(spv_builder *b, spv_id target) {
    if (!spv_ref_label(b, target, "a branch target"))
        return;
    uint32_t raw = spv_raw(target);
    b->merge_pending = false;
    spv_terminate(b, SpvOpBranch, &raw, 1, "OpBranch");
}

void spv_branch_cond(spv_builder *b, spv_id condition, spv_id if_true, spv_id if_false) {
    uint32_t n;
    if (!spv_value_of_class(b, condition, C_BOOL, "a branch condition", &n) ||
        !spv_ref_label(b, if_true, "a branch target") ||
        !spv_ref_label(b, if_false, "a branch target"))
        return;
    if (n != 1) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: a branch condition is a bool vector");
        return;
    }
    uint32_t ops[3] = {spv_raw(condition), spv_raw(if_true), spv_raw(if_false)};
    b->merge_pending = false;
    spv_terminate(b, SpvOpBranchConditional, ops, 3, "OpBranchConditional");
}

void spv_selection_merge(spv_builder *b, spv_id merge) {
    if (!spv_ref_label(b, merge, "a selection's merge block"))
        return;
    uint32_t ops[2] = {spv_raw(merge), SpvSelectionControlMaskNone};
    spv_plain(b, SpvOpSelectionMerge, ops, 2, "OpSelectionMerge");
    b->merge_pending = spv_ok(b);
}

void spv_loop_merge(spv_builder *b, spv_id merge, spv_id continue_target) {
    if (!spv_ref_label(b, merge, "a loop's merge block") ||
        !spv_ref_label(b, continue_target, "a loop's continue target"))
        return;
    uint32_t ops[3] = {spv_raw(merge), spv_raw(continue_target), SpvLoopControlMaskNone};
    spv_plain(b, SpvOpLoopMerge, ops, 3, "OpLoopMerge");
    b->merge_pending = spv_ok(b);
}

void spv_return(spv_builder *b) {
    spv_terminate(b, SpvOpReturn, NULL, 0, "OpReturn");
}

spv_id spv_phi(spv_builder *b, spv_id type, uint32_t incoming_count) {
    const spv_info *t = spv_lookup(b, type, "an OpPhi's type");
    spv_words *w = t ? spv_body(b, "OpPhi") : NULL;
    if (!w)
        return 0;
    if (t->kind != SPV_K_TYPE || incoming_count == 0 || incoming_count > 0x7000) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: OpPhi needs a type and 1.. operands");
        return 0;
    }
    uint32_t raw = spv_new_id(b, SPV_K_VALUE);
    if (!raw)
        return 0;
    /* The operand pairs stay 0 until spv_phi_set fills them (0 is never an id). */
    size_t at = w->len;
    uint32_t *inst = spv_reserve(b, w, 3 + 2 * (size_t)incoming_count);
    if (!inst)
        return 0;
    inst[0] = (2 * incoming_count + 3) << SpvWordCountShift | SpvOpPhi;
    inst[1] = spv_raw(type);
    inst[2] = raw;
    b->ids.data[raw] = (spv_info){.kind = SPV_K_VALUE,
                                  .cls = 1 /* phi */,
                                  .type = spv_raw(type),
                                  .a = (uint32_t)at,
                                  .b = incoming_count};
    b->pending_phis += incoming_count;
    return spv_full(b, raw);
}

void spv_phi_set(spv_builder *b, spv_id phi, uint32_t index, spv_id value, spv_id parent) {
    const spv_info *p = spv_lookup(b, phi, "an OpPhi");
    const spv_info *v = p ? spv_value(b, value, "an OpPhi operand") : NULL;
    if (!v || !spv_ref_label(b, parent, "an OpPhi parent block"))
        return;
    if (p->kind != SPV_K_VALUE || p->cls != 1 || index >= p->b || !b->in_function ||
        p->a + 3 + 2 * index + 1 >= b->fn_body.len ||
        (b->fn_body.data[p->a] & SpvOpCodeMask) != SpvOpPhi ||
        b->fn_body.data[p->a + 2] != spv_raw(phi)) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: spv_phi_set: id %u is not an OpPhi of the current function with "
                 "operand %u",
                 spv_raw(phi), index);
        return;
    }
    if (v->type != p->type) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: OpPhi operand %u (id %u) has the wrong type: not the OpPhi's type", index,
                 spv_raw(value));
        return;
    }
    uint32_t *slot = b->fn_body.data + p->a + 3 + 2 * index;
    if (slot[0] == 0)
        b->pending_phis--;
    slot[0] = spv_raw(value);
    slot[1] = spv_raw(parent);
}

/* ---- arithmetic, logic, comparisons ------------------------------------------------------ */

static const struct {
    SpvOp op;
    uint8_t operand, result;
} spv_binops[] = {
    {SpvOpIAdd, C_INT, R_SAME},
    {SpvOpISub, C_INT, R_SAME},
    {SpvOpIMul, C_INT, R_SAME},
    {SpvOpUDiv, C_INT, R_SAME},
    {SpvOpSDiv, C_INT, R_SAME},
    {SpvOpUMod, C_INT, R_SAME},
    {SpvOpSRem, C_INT, R_SAME},
    {SpvOpSMod, C_INT, R_SAME},
    {SpvOpFAdd, C_FLOAT, R_SAME},
    {SpvOpFSub, C_FLOAT, R_SAME},
    {SpvOpFMul, C_FLOAT, R_SAME},
    {SpvOpFDiv, C_FLOAT, R_SAME},
    {SpvOpFRem, C_FLOAT, R_SAME},
    {SpvOpFMod, C_FLOAT, R_SAME},
    {SpvOpShiftLeftLogical, C_INT, R_SAME},
    {SpvOpShiftRightLogical, C_INT, R_SAME},
    {SpvOpShiftRightArithmetic, C_INT, R_SAME},
    {SpvOpBitwiseAnd, C_INT, R_SAME},
    {SpvOpBitwiseOr, C_INT, R_SAME},
    {SpvOpBitwiseXor, C_INT, R_SAME},
    {SpvOpLogicalAnd, C_BOOL, R_SAME},
    {SpvOpLogicalOr, C_BOOL, R_SAME},
    {SpvOpLogicalEqual, C_BOOL, R_SAME},
    {SpvOpLogicalNotEqual, C_BOOL, R_SAME},
    {SpvOpIEqual, C_INT, R_BOOL},
    {SpvOpINotEqual, C_INT, R_BOOL},
    {SpvOpULessThan, C_INT, R_BOOL},
    {SpvOpSLessThan, C_INT, R_BOOL},
    {SpvOpULessThanEqual, C_INT, R_BOOL},
    {SpvOpSLessThanEqual, C_INT, R_BOOL},
    {SpvOpUGreaterThan, C_INT, R_BOOL},
    {SpvOpSGreaterThan, C_INT, R_BOOL},
    {SpvOpUGreaterThanEqual, C_INT, R_BOOL},
    {SpvOpSGreaterThanEqual, C_INT, R_BOOL},
    {SpvOpFOrdEqual, C_FLOAT, R_BOOL},
    {SpvOpFOrdNotEqual, C_FLOAT, R_BOOL},
    {SpvOpFOrdLessThan, C_FLOAT, R_BOOL},
    {SpvOpFOrdLessThanEqual, C_FLOAT, R_BOOL},
    {SpvOpFOrdGreaterThan, C_FLOAT, R_BOOL},
    {SpvOpFOrdGreaterThanEqual, C_FLOAT, R_BOOL},
    {SpvOpFUnordEqual, C_FLOAT, R_BOOL},
    {SpvOpFUnordNotEqual, C_FLOAT, R_BOOL},
    {SpvOpFUnordLessThan, C_FLOAT, R_BOOL},
    {SpvOpFUnordLessThanEqual, C_FLOAT, R_BOOL},
    {SpvOpFUnordGreaterThan, C_FLOAT, R_BOOL},
    {SpvOpFUnordGreaterThanEqual, C_FLOAT, R_BOOL},
};

static bool spv_is_shift(SpvOp op) {
    return op == SpvOpShiftLeftLogical || op == SpvOpShiftRightLogical ||
           op == SpvOpShiftRightArithmetic;
}

spv_id spv_binop(spv_builder *b, SpvOp op, spv_id x, spv_id y) {
    if (!spv_ok(b))
        return 0;
    size_t k = 0;
    while (k < BASE_COUNTOF(spv_binops) && spv_binops[k].op != op)
        k++;
    if (k == BASE_COUNTOF(spv_binops)) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: spv_binop: op %d is not a binary op",
                 (int)op);
        return 0;
    }
    uint32_t nx, ny;
    if (!spv_value_of_class(b, x, spv_binops[k].operand, "the first operand", &nx) ||
        !spv_value_of_class(b, y, spv_binops[k].operand, "the second operand", &ny))
        return 0;
    uint32_t tx = b->ids.data[spv_raw(x)].type, ty = b->ids.data[spv_raw(y)].type;
    /* A shift's Shift operand may be any integer type with the Base's component count. */
    if (spv_is_shift(op) ? nx != ny : tx != ty) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: the operands of op %d have the wrong type: their types differ (ids %u "
                 "and %u)",
                 (int)op, tx, ty);
        return 0;
    }
    uint32_t type = spv_binops[k].result == R_BOOL ? spv_bool_like(b, nx) : tx;
    uint32_t ops[2] = {spv_raw(x), spv_raw(y)};
    return spv_result(b, op, type, ops, 2, "a binary op");
}

spv_id spv_unop(spv_builder *b, SpvOp op, spv_id x) {
    if (!spv_ok(b))
        return 0;
    int c = op == SpvOpSNegate || op == SpvOpNot ? C_INT
            : op == SpvOpFNegate                 ? C_FLOAT
            : op == SpvOpLogicalNot              ? C_BOOL
                                                 : 0;
    if (!c) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: spv_unop: op %d is not a unary op",
                 (int)op);
        return 0;
    }
    uint32_t n;
    if (!spv_value_of_class(b, x, c, "the operand", &n))
        return 0;
    uint32_t raw = spv_raw(x);
    return spv_result(b, op, b->ids.data[raw].type, &raw, 1, "a unary op");
}

static const struct {
    SpvOp op;
    uint8_t from, to;
} spv_convs[] = {
    {SpvOpConvertFToU, C_FLOAT, C_INT}, {SpvOpConvertFToS, C_FLOAT, C_INT},
    {SpvOpConvertSToF, C_INT, C_FLOAT}, {SpvOpConvertUToF, C_INT, C_FLOAT},
    {SpvOpUConvert, C_INT, C_INT},      {SpvOpSConvert, C_INT, C_INT},
    {SpvOpFConvert, C_FLOAT, C_FLOAT},  {SpvOpBitcast, C_ANY, C_ANY},
};

spv_id spv_convert(spv_builder *b, SpvOp op, spv_id type, spv_id x) {
    if (!spv_ok(b))
        return 0;
    size_t k = 0;
    while (k < BASE_COUNTOF(spv_convs) && spv_convs[k].op != op)
        k++;
    if (k == BASE_COUNTOF(spv_convs)) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: spv_convert: op %d is not a conversion",
                 (int)op);
        return 0;
    }
    const spv_info *ts, *xs;
    uint32_t nt, nx;
    const spv_info *t = spv_lookup(b, type, "a conversion's result type");
    if (!t)
        return 0;
    bool type_ok = t->kind == SPV_K_TYPE && spv_scalar_of(b, spv_raw(type), &ts, &nt) &&
                   ts->cls != SPV_T_BOOL &&
                   (spv_convs[k].to == C_ANY ||
                    ts->cls == (spv_convs[k].to == C_INT ? SPV_T_INT : SPV_T_FLOAT));
    if (!type_ok) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: a conversion's result type has the wrong type class for op %d", (int)op);
        return 0;
    }
    xs = spv_value_of_class(b, x, spv_convs[k].from, "a conversion's operand", &nx);
    if (!xs)
        return 0;
    bool ok =
        op == SpvOpBitcast ? xs->cls != SPV_T_BOOL && xs->width * nx == ts->width * nt : nx == nt;
    if ((op == SpvOpUConvert || op == SpvOpSConvert || op == SpvOpFConvert) &&
        xs->width == ts->width)
        ok = false; /* the spec requires a different width */
    if ((op == SpvOpUConvert || op == SpvOpConvertFToU) && ts->a)
        ok = false; /* Shader: an unsigned result type */
    if (!ok) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: conversion op %d from id %u has the wrong type for its result type",
                 (int)op, spv_raw(x));
        return 0;
    }
    uint32_t raw = spv_raw(x);
    return spv_result(b, op, spv_raw(type), &raw, 1, "a conversion");
}

spv_id spv_select(spv_builder *b, spv_id condition, spv_id if_true, spv_id if_false) {
    uint32_t nc, nt, nf;
    if (!spv_value_of_class(b, condition, C_BOOL, "a select's condition", &nc) ||
        !spv_value_of_class(b, if_true, C_ANY, "a select's first object", &nt) ||
        !spv_value_of_class(b, if_false, C_ANY, "a select's second object", &nf))
        return 0;
    uint32_t type = b->ids.data[spv_raw(if_true)].type;
    if (type != b->ids.data[spv_raw(if_false)].type ||
        (nc != nt && !(nc == 1 && b->version >= 0x10400))) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: a select's operands have the wrong type (objects of different types or a "
                 "condition of another size)");
        return 0;
    }
    uint32_t ops[3] = {spv_raw(condition), spv_raw(if_true), spv_raw(if_false)};
    return spv_result(b, SpvOpSelect, type, ops, 3, "OpSelect");
}

/* GLSL.std.450 instructions whose arguments all have the result type, with their class. */
static const struct {
    enum GLSLstd450 inst;
    uint8_t cls;
} spv_glsl_same[] = {
    {GLSLstd450Round, C_FLOAT},  {GLSLstd450RoundEven, C_FLOAT}, {GLSLstd450Trunc, C_FLOAT},
    {GLSLstd450FAbs, C_FLOAT},   {GLSLstd450SAbs, C_INT},        {GLSLstd450FSign, C_FLOAT},
    {GLSLstd450SSign, C_INT},    {GLSLstd450Floor, C_FLOAT},     {GLSLstd450Ceil, C_FLOAT},
    {GLSLstd450Fract, C_FLOAT},  {GLSLstd450Sin, C_FLOAT},       {GLSLstd450Cos, C_FLOAT},
    {GLSLstd450Tan, C_FLOAT},    {GLSLstd450Asin, C_FLOAT},      {GLSLstd450Acos, C_FLOAT},
    {GLSLstd450Atan, C_FLOAT},   {GLSLstd450Sinh, C_FLOAT},      {GLSLstd450Cosh, C_FLOAT},
    {GLSLstd450Tanh, C_FLOAT},   {GLSLstd450Atan2, C_FLOAT},     {GLSLstd450Pow, C_FLOAT},
    {GLSLstd450Exp, C_FLOAT},    {GLSLstd450Log, C_FLOAT},       {GLSLstd450Exp2, C_FLOAT},
    {GLSLstd450Log2, C_FLOAT},   {GLSLstd450Sqrt, C_FLOAT},      {GLSLstd450InverseSqrt, C_FLOAT},
    {GLSLstd450FMin, C_FLOAT},   {GLSLstd450UMin, C_INT},        {GLSLstd450SMin, C_INT},
    {GLSLstd450FMax, C_FLOAT},   {GLSLstd450UMax, C_INT},        {GLSLstd450SMax, C_INT},
    {GLSLstd450FClamp, C_FLOAT}, {GLSLstd450UClamp, C_INT},      {GLSLstd450SClamp, C_INT},
    {GLSLstd450FMix, C_FLOAT},   {GLSLstd450Fma, C_FLOAT},       {GLSLstd450NMin, C_FLOAT},
    {GLSLstd450NMax, C_FLOAT},   {GLSLstd450NClamp, C_FLOAT},
};

spv_id spv_glsl(spv_builder *b, enum GLSLstd450 inst, spv_id type, uint32_t count,
                const spv_id *args) {
    const spv_info *t = spv_lookup(b, type, "a GLSL.std.450 result type");
    if (!t)
        return 0;
    uint32_t ops[10];
    if (t->kind != SPV_K_TYPE || count == 0 || count > 8 || !args) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: GLSL.std.450 %d needs a result type and 1..8 arguments", (int)inst);
        return 0;
    }
    size_t k = 0;
    while (k < BASE_COUNTOF(spv_glsl_same) && spv_glsl_same[k].inst != inst)
        k++;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t n;
        const spv_info *v = k < BASE_COUNTOF(spv_glsl_same)
                                ? (spv_value_of_class(b, args[i], spv_glsl_same[k].cls,
                                                      "a GLSL.std.450 argument", &n)
                                       ? &b->ids.data[spv_raw(args[i])]
                                       : NULL)
                                : spv_value(b, args[i], "a GLSL.std.450 argument");
        if (!v)
            return 0;
        if (k < BASE_COUNTOF(spv_glsl_same) && v->type != spv_raw(type)) {
            spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                     "spirv: GLSL.std.450 %d argument %u has the wrong type: not the result type",
                     (int)inst, i);
            return 0;
        }
        ops[2 + i] = spv_raw(args[i]);
    }
    ops[0] = spv_glsl_import(b);
    ops[1] = (uint32_t)inst;
    return spv_result(b, SpvOpExtInst, spv_raw(type), ops, 2 + count, "OpExtInst");
}

/* The type of member/element index of composite type t (raw), or 0. */
static uint32_t spv_member_type(const spv_builder *b, uint32_t t, uint64_t index, bool known) {
    const spv_info *ti = &b->ids.data[t];
    switch (ti->cls) {
    case SPV_T_STRUCT:
        return known && index < ti->b ? b->member_types.data[ti->a + index] : 0;
    case SPV_T_VECTOR:
    case SPV_T_ARRAY:
        return !known || index < ti->a ? ti->type : 0;
    case SPV_T_RUNTIME_ARRAY:
        return ti->type;
    default:
        return 0;
    }
}

spv_id spv_composite_extract(spv_builder *b, spv_id composite, uint32_t index) {
    const spv_info *v = spv_value(b, composite, "a composite");
    if (!v)
        return 0;
    uint32_t type = spv_member_type(b, v->type, index, true);
    if (!type || b->ids.data[v->type].cls == SPV_T_RUNTIME_ARRAY) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: OpCompositeExtract: id %u has no element %u", spv_raw(composite), index);
        return 0;
    }
    uint32_t ops[2] = {spv_raw(composite), index};
    return spv_result(b, SpvOpCompositeExtract, type, ops, 2, "OpCompositeExtract");
}

/* OpUMulExtended / OpSMulExtended: "Result Type must be from OpTypeStruct. The struct must have
 * two members, and the two members must be the same type. Member 0 of the result gets the low-order
 * bits of the multiplication. Member 1 of the result gets the high-order bits" (SPIR-V 1.6,
 * 3.42.13); the operands have the members' type. */
spv_id spv_mul_extended(spv_builder *b, SpvOp op, spv_id struct_type, spv_id x, spv_id y) {
    uint32_t nx, ny;
    const spv_info *t = spv_lookup(b, struct_type, "a multiply's result type");
    if (!t || !spv_value_of_class(b, x, C_INT, "a multiply's first operand", &nx) ||
        !spv_value_of_class(b, y, C_INT, "a multiply's second operand", &ny))
        return 0;
    uint32_t tx = b->ids.data[spv_raw(x)].type, raw = spv_raw(struct_type);
    if ((op != SpvOpUMulExtended && op != SpvOpSMulExtended) || t->kind != SPV_K_TYPE ||
        t->cls != SPV_T_STRUCT || t->b != 2 || spv_member_type(b, raw, 0, true) != tx ||
        spv_member_type(b, raw, 1, true) != tx || b->ids.data[spv_raw(y)].type != tx) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: an extended multiply (op %d) needs a struct of two members of its "
                 "operands' type",
                 (int)op);
        return 0;
    }
    uint32_t ops[2] = {spv_raw(x), spv_raw(y)};
    return spv_result(b, op, raw, ops, 2, "an extended multiply");
}

spv_id spv_composite_construct(spv_builder *b, spv_id type, uint32_t count, const spv_id *parts) {
    const spv_info *t = spv_lookup(b, type, "a composite's type");
    if (!t)
        return 0;
    uint32_t ops[12];
    if (t->kind != SPV_K_TYPE || count == 0 || count > BASE_COUNTOF(ops) || !parts ||
        (t->cls != SPV_T_VECTOR && t->cls != SPV_T_ARRAY && t->cls != SPV_T_STRUCT)) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: OpCompositeConstruct of a non-composite");
        return 0;
    }
    for (uint32_t i = 0; i < count; i++) {
        if (!spv_value(b, parts[i], "a composite's part"))
            return 0;
        ops[i] = spv_raw(parts[i]);
    }
    return spv_result(b, SpvOpCompositeConstruct, spv_raw(type), ops, count,
                      "OpCompositeConstruct");
}

/* ---- memory ---------------------------------------------------------------------------- */

/* The pointer type info of a pointer value, or NULL recording an error. */
static const spv_info *spv_pointer(spv_builder *b, spv_id pointer, const char *what) {
    const spv_info *v = spv_value(b, pointer, what);
    if (!v)
        return NULL;
    const spv_info *t = &b->ids.data[v->type];
    if (t->cls != SPV_T_POINTER) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: %s (id %u) has the wrong type: not a "
                 "pointer",
                 what, spv_raw(pointer));
        return NULL;
    }
    return t;
}

spv_id spv_access_chain(spv_builder *b, spv_id base, uint32_t count, const spv_id *indices) {
    const spv_info *p = spv_pointer(b, base, "an access chain's base");
    if (!p)
        return 0;
    uint32_t ops[12];
    if (count == 0 || count + 1 > BASE_COUNTOF(ops) || !indices) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: an access chain of %u indices", count);
        return 0;
    }
    SpvStorageClass sc = (SpvStorageClass)p->a;
    uint32_t t = p->type;
    ops[0] = spv_raw(base);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t n;
        if (!spv_value_of_class(b, indices[i], C_INT, "an access chain index", &n))
            return 0;
        const spv_info *idx = &b->ids.data[spv_raw(indices[i])];
        bool known = idx->kind == SPV_K_CONST;
        uint64_t value = (uint64_t)idx->b << 32 | idx->a;
        uint32_t next = n == 1 ? spv_member_type(b, t, value, known) : 0;
        if (!next) {
            spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                     "spirv: access chain index %u (id %u) does not select a member (a struct "
                     "needs a constant index in range)",
                     i, spv_raw(indices[i]));
            return 0;
        }
        t = next;
        ops[1 + i] = spv_raw(indices[i]);
    }
    uint32_t type = spv_raw(spv_type_pointer(b, sc, spv_make_id(b, t)));
    if (!type)
        return 0;
    return spv_result(b, SpvOpAccessChain, type, ops, count + 1, "OpAccessChain");
}

spv_id spv_load(spv_builder *b, spv_id pointer) {
    const spv_info *p = spv_pointer(b, pointer, "a load's pointer");
    if (!p)
        return 0;
    uint32_t raw = spv_raw(pointer);
    return spv_result(b, SpvOpLoad, p->type, &raw, 1, "OpLoad");
}

void spv_store(spv_builder *b, spv_id pointer, spv_id value) {
    const spv_info *p = spv_pointer(b, pointer, "a store's pointer");
    const spv_info *v = p ? spv_value(b, value, "a stored value") : NULL;
    if (!v)
        return;
    if (v->type != p->type) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: a stored value (id %u) has the wrong type: not the pointer's pointee",
                 spv_raw(value));
        return;
    }
    uint32_t ops[2] = {spv_raw(pointer), spv_raw(value)};
    spv_plain(b, SpvOpStore, ops, 2, "OpStore");
}

spv_id spv_texel_fetch(spv_builder *b, spv_id buffer, spv_id index) {
    const spv_info *p = spv_pointer(b, buffer, "a texel buffer");
    if (!p)
        return 0;
    const spv_info *s = &b->ids.data[p->type];
    if (s->cls != SPV_T_IMAGE) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: id %u is not a texel buffer",
                 spv_raw(buffer));
        return 0;
    }
    spv_id vec = spv_type_vector(b, spv_full(b, s->type), 4);
    uint32_t image = spv_raw(spv_load(b, buffer));
    uint32_t ops[2] = {image, spv_raw(index)};
    return image && vec ? spv_result(b, SpvOpImageFetch, spv_raw(vec), ops, 2, "OpImageFetch") : 0;
}

spv_id spv_texel_count(spv_builder *b, spv_id buffer) {
    const spv_info *p = spv_pointer(b, buffer, "a texel buffer");
    if (!p)
        return 0;
    if (b->ids.data[p->type].cls != SPV_T_IMAGE) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: id %u is not a texel buffer",
                 spv_raw(buffer));
        return 0;
    }
    spv_capability(b, SpvCapabilityImageQuery);
    spv_id i32 = spv_type_int(b, 32, true);
    uint32_t image = spv_raw(spv_load(b, buffer));
    return image && i32
               ? spv_result(b, SpvOpImageQuerySize, spv_raw(i32), &image, 1, "OpImageQuerySize")
               : 0;
}

spv_id spv_vector_extract_dynamic(spv_builder *b, spv_id vector, spv_id index) {
    const spv_info *v = spv_value(b, vector, "a vector");
    if (!v)
        return 0;
    const spv_info *t = &b->ids.data[v->type];
    if (t->cls != SPV_T_VECTOR) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: OpVectorExtractDynamic of a non-vector");
        return 0;
    }
    uint32_t ops[2] = {spv_raw(vector), spv_raw(index)};
    return spv_result(b, SpvOpVectorExtractDynamic, t->type, ops, 2, "OpVectorExtractDynamic");
}

/* ---- barriers and atomics ---------------------------------------------------------------- */

static uint32_t spv_u32(spv_builder *b, uint32_t value) {
    return spv_raw(spv_const_u32(b, value));
}

void spv_control_barrier(spv_builder *b, SpvScope execution, SpvScope memory, uint32_t semantics) {
    if (!spv_ok(b))
        return;
    uint32_t ops[3] = {spv_u32(b, execution), spv_u32(b, memory), spv_u32(b, semantics)};
    spv_plain(b, SpvOpControlBarrier, ops, 3, "OpControlBarrier");
}

void spv_memory_barrier(spv_builder *b, SpvScope memory, uint32_t semantics) {
    if (!spv_ok(b))
        return;
    uint32_t ops[2] = {spv_u32(b, memory), spv_u32(b, semantics)};
    spv_plain(b, SpvOpMemoryBarrier, ops, 2, "OpMemoryBarrier");
}

void spv_workgroup_barrier(spv_builder *b) {
    spv_control_barrier(b, SpvScopeWorkgroup, SpvScopeWorkgroup,
                        SpvMemorySemanticsAcquireReleaseMask |
                            SpvMemorySemanticsWorkgroupMemoryMask);
}

/* The pointee of an atomic's pointer: a 32- or 64-bit integer. */
static const spv_info *spv_atomic_pointer(spv_builder *b, spv_id pointer) {
    const spv_info *p = spv_pointer(b, pointer, "an atomic's pointer");
    if (!p)
        return NULL;
    const spv_info *t = &b->ids.data[p->type];
    if (t->cls != SPV_T_INT || t->width < 32) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: an atomic's pointer (id %u) has the wrong type: not a 32/64-bit integer",
                 spv_raw(pointer));
        return NULL;
    }
    if (t->width == 64)
        spv_capability(b, SpvCapabilityInt64Atomics);
    return p;
}

spv_id spv_atomic(spv_builder *b, SpvOp op, spv_id pointer, SpvScope scope, uint32_t semantics,
                  spv_id value) {
    static const SpvOp ops_ok[] = {
        SpvOpAtomicIAdd, SpvOpAtomicISub, SpvOpAtomicSMin, SpvOpAtomicUMin, SpvOpAtomicSMax,
        SpvOpAtomicUMax, SpvOpAtomicAnd,  SpvOpAtomicOr,   SpvOpAtomicXor,  SpvOpAtomicExchange};
    size_t k = 0;
    while (k < BASE_COUNTOF(ops_ok) && ops_ok[k] != op)
        k++;
    if (spv_ok(b) && k == BASE_COUNTOF(ops_ok)) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: spv_atomic: op %d is not an atomic op",
                 (int)op);
        return 0;
    }
    const spv_info *p = spv_atomic_pointer(b, pointer);
    const spv_info *v = p ? spv_value(b, value, "an atomic's value") : NULL;
    if (!v)
        return 0;
    if (v->type != p->type) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: an atomic's value (id %u) has the wrong type: not the pointee",
                 spv_raw(value));
        return 0;
    }
    uint32_t type = p->type; /* p moves when the constants below grow the id table */
    uint32_t ops[4] = {spv_raw(pointer), spv_u32(b, scope), spv_u32(b, semantics), spv_raw(value)};
    return spv_result(b, op, type, ops, 4, "an atomic");
}

spv_id spv_atomic_compare_exchange(spv_builder *b, spv_id pointer, SpvScope scope,
                                   uint32_t semantics, spv_id value, spv_id comparator) {
    const spv_info *p = spv_atomic_pointer(b, pointer);
    const spv_info *v = p ? spv_value(b, value, "an atomic's value") : NULL;
    const spv_info *c = v ? spv_value(b, comparator, "an atomic's comparator") : NULL;
    if (!c)
        return 0;
    if (v->type != p->type || c->type != p->type) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: OpAtomicCompareExchange operands have the wrong type: not the pointee");
        return 0;
    }
    /* "Unequal must not be set to Release or Acquire and Release." */
    uint32_t order = SpvMemorySemanticsReleaseMask | SpvMemorySemanticsAcquireReleaseMask;
    uint32_t unequal = semantics & ~order;
    if (semantics & order)
        unequal |= SpvMemorySemanticsAcquireMask;
    uint32_t type = p->type;
    uint32_t ops[6] = {spv_raw(pointer),    spv_u32(b, scope), spv_u32(b, semantics),
                       spv_u32(b, unequal), spv_raw(value),    spv_raw(comparator)};
    return spv_result(b, SpvOpAtomicCompareExchange, type, ops, 6, "an atomic");
}

spv_id spv_atomic_load(spv_builder *b, spv_id pointer, SpvScope scope, uint32_t semantics) {
    const spv_info *p = spv_atomic_pointer(b, pointer);
    if (!p)
        return 0;
    uint32_t type = p->type;
    uint32_t ops[3] = {spv_raw(pointer), spv_u32(b, scope), spv_u32(b, semantics)};
    return spv_result(b, SpvOpAtomicLoad, type, ops, 3, "OpAtomicLoad");
}

/* ---- subgroups ------------------------------------------------------------------------- */

static const struct {
    SpvOp op;
    uint8_t cls;
} spv_subgroup_ops[] = {
    {SpvOpGroupNonUniformIAdd, C_INT},       {SpvOpGroupNonUniformFAdd, C_FLOAT},
    {SpvOpGroupNonUniformIMul, C_INT},       {SpvOpGroupNonUniformFMul, C_FLOAT},
    {SpvOpGroupNonUniformSMin, C_INT},       {SpvOpGroupNonUniformUMin, C_INT},
    {SpvOpGroupNonUniformFMin, C_FLOAT},     {SpvOpGroupNonUniformSMax, C_INT},
    {SpvOpGroupNonUniformUMax, C_INT},       {SpvOpGroupNonUniformFMax, C_FLOAT},
    {SpvOpGroupNonUniformBitwiseAnd, C_INT}, {SpvOpGroupNonUniformBitwiseOr, C_INT},
    {SpvOpGroupNonUniformBitwiseXor, C_INT},
};

spv_id spv_subgroup_op(spv_builder *b, SpvOp op, SpvGroupOperation group, spv_id value) {
    if (!spv_ok(b))
        return 0;
    size_t k = 0;
    while (k < BASE_COUNTOF(spv_subgroup_ops) && spv_subgroup_ops[k].op != op)
        k++;
    if (k == BASE_COUNTOF(spv_subgroup_ops) ||
        (group != SpvGroupOperationReduce && group != SpvGroupOperationInclusiveScan &&
         group != SpvGroupOperationExclusiveScan)) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: spv_subgroup_op: op %d / group operation %d is not supported", (int)op,
                 (int)group);
        return 0;
    }
    uint32_t n;
    if (!spv_value_of_class(b, value, spv_subgroup_ops[k].cls, "a subgroup op's value", &n))
        return 0;
    spv_capability(b, SpvCapabilityGroupNonUniform);
    spv_capability(b, SpvCapabilityGroupNonUniformArithmetic);
    uint32_t ops[3] = {spv_u32(b, SpvScopeSubgroup), (uint32_t)group, spv_raw(value)};
    return spv_result(b, op, b->ids.data[spv_raw(value)].type, ops, 3, "a subgroup op");
}

spv_id spv_subgroup_elect(spv_builder *b) {
    if (!spv_ok(b))
        return 0;
    spv_capability(b, SpvCapabilityGroupNonUniform);
    uint32_t scope = spv_u32(b, SpvScopeSubgroup);
    return spv_result(b, SpvOpGroupNonUniformElect, spv_raw(spv_type_bool(b)), &scope, 1,
                      "OpGroupNonUniformElect");
}

spv_id spv_subgroup_broadcast_first(spv_builder *b, spv_id value) {
    uint32_t n;
    if (!spv_value_of_class(b, value, C_ANY, "a broadcast value", &n))
        return 0;
    spv_capability(b, SpvCapabilityGroupNonUniform);
    spv_capability(b, SpvCapabilityGroupNonUniformBallot);
    uint32_t ops[2] = {spv_u32(b, SpvScopeSubgroup), spv_raw(value)};
    return spv_result(b, SpvOpGroupNonUniformBroadcastFirst, b->ids.data[spv_raw(value)].type, ops,
                      2, "OpGroupNonUniformBroadcastFirst");
}

spv_id spv_subgroup_broadcast(spv_builder *b, spv_id value, uint32_t lane) {
    uint32_t n;
    if (!spv_value_of_class(b, value, C_ANY, "a broadcast value", &n))
        return 0;
    spv_capability(b, SpvCapabilityGroupNonUniform);
    spv_capability(b, SpvCapabilityGroupNonUniformBallot);
    uint32_t ops[3] = {spv_u32(b, SpvScopeSubgroup), spv_raw(value), spv_u32(b, lane)};
    return spv_result(b, SpvOpGroupNonUniformBroadcast, b->ids.data[spv_raw(value)].type, ops, 3,
                      "OpGroupNonUniformBroadcast");
}
