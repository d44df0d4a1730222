/* The kernel IR: types, the op table, builders, the verifier, a listing and a hash. */
#include "ir.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    uint32_t bits;
    bool is_float, is_signed;
} type_info[] = {
    [IR_BOOL] = {"bool", 8, false, false}, [IR_I8] = {"i8", 8, false, true},
    [IR_U8] = {"u8", 8, false, false},     [IR_I32] = {"i32", 32, false, true},
    [IR_U32] = {"u32", 32, false, false},  [IR_I64] = {"i64", 64, false, true},
    [IR_F16] = {"f16", 16, true, true},    [IR_F32] = {"f32", 32, true, true},
};
_Static_assert(BASE_COUNTOF(type_info) == IR_TYPE_COUNT_, "one entry per IR type");

bool ir_type_is_float(ir_type t) {
    return type_info[t].is_float;
}

bool ir_type_is_signed(ir_type t) {
    return !type_info[t].is_float && type_info[t].is_signed;
}

uint32_t ir_type_bits(ir_type t) {
    return type_info[t].bits;
}

const char *ir_type_name(ir_type t) {
    return (unsigned)t < IR_TYPE_COUNT_ ? type_info[t].name : "?";
}

enum { KIND_LEAF, KIND_ALU, KIND_CONTROL, KIND_MEMORY };

static const struct {
    const char *name;
    uint32_t operands;
    int kind;
} op_info[] = {
#define X(name, n, kind) {#name, n, KIND_##kind},
    IR_OPS(X)
#undef X
};
_Static_assert(BASE_COUNTOF(op_info) == IR_OP_COUNT_, "one entry per IR op");

const char *ir_op_name(ir_op op) {
    return (unsigned)op < IR_OP_COUNT_ ? op_info[op].name : "?";
}

uint32_t ir_op_operands(ir_op op) {
    return op_info[op].operands;
}

void ir_kernel_init(ir_kernel *k, const base_allocator *alloc, ir_type index_type) {
    memset(k, 0, sizeof *k);
    k->alloc = *alloc;
    k->index_type = index_type;
}

void ir_kernel_finish(ir_kernel *k) {
    BASE_VEC_FREE(&k->alloc, &k->insts);
}

uint32_t ir_buffer_add(ir_kernel *k, ir_type type) {
    if (k->buffer_count == IR_MAX_BUFFERS) {
        if (k->status == KILN_OK)
            k->status = KILN_ERROR_LIMIT_EXCEEDED;
        return 0;
    }
    k->buffers[k->buffer_count].type = type;
    return k->buffer_count++;
}

/* Appends an instruction; every operand must be an earlier value. */
static ir_value emit(ir_kernel *k, ir_inst inst) {
    if (k->status != KILN_OK)
        return IR_NONE;
    for (uint32_t i = 0; i < ir_op_operands(inst.op); i++) {
        if (inst.src[i] >= k->insts.len) {
            k->status = KILN_ERROR_INTERNAL;
            return IR_NONE;
        }
    }
    if (BASE_VEC_PUSH(&k->alloc, &k->insts, inst) != KILN_OK) {
        k->status = KILN_ERROR_OUT_OF_HOST_MEMORY;
        return IR_NONE;
    }
    return (ir_value)(k->insts.len - 1);
}

static ir_inst inst_of(ir_op op, ir_type type, ir_value a, ir_value b, ir_value c) {
    ir_inst i;
    memset(&i, 0, sizeof i);
    i.op = op;
    i.type = type;
    i.src[0] = a;
    i.src[1] = b;
    i.src[2] = c;
    return i;
}

ir_value ir_const_i(ir_kernel *k, ir_type type, int64_t value) {
    ir_inst i = inst_of(IR_CONST, type, IR_NONE, IR_NONE, IR_NONE);
    if (ir_type_is_float(type))
        i.imm.f = (double)value;
    else
        i.imm.i = value;
    return emit(k, i);
}

ir_value ir_const_f(ir_kernel *k, ir_type type, double value) {
    ir_inst i = inst_of(IR_CONST, type, IR_NONE, IR_NONE, IR_NONE);
    if (ir_type_is_float(type))
        i.imm.f = value;
    else
        i.imm.i = (int64_t)value;
    return emit(k, i);
}

ir_value ir_param(ir_kernel *k, uint32_t number) {
    ir_inst i = inst_of(IR_PARAM, k->index_type, IR_NONE, IR_NONE, IR_NONE);
    i.arg = number;
    if (number >= k->param_count)
        k->param_count = number + 1;
    return emit(k, i);
}

ir_value ir_global_id(ir_kernel *k) {
    return emit(k, inst_of(IR_GLOBAL_ID, k->index_type, IR_NONE, IR_NONE, IR_NONE));
}

ir_value ir_lane(ir_kernel *k) {
    return emit(k, inst_of(IR_LANE, k->index_type, IR_NONE, IR_NONE, IR_NONE));
}

/* An instruction of value's type on value, with arg (GROUP's op, SHARE's lane). */
static ir_value emit_on(ir_kernel *k, ir_op op, ir_value value, uint32_t arg) {
    if (value >= k->insts.len) {
        if (k->status == KILN_OK)
            k->status = KILN_ERROR_INTERNAL;
        return IR_NONE;
    }
    ir_inst i = inst_of(op, k->insts.data[value].type, value, IR_NONE, IR_NONE);
    i.arg = arg;
    return emit(k, i);
}

ir_value ir_group(ir_kernel *k, ir_op op, ir_value value) {
    return emit_on(k, IR_GROUP, value, (uint32_t)op);
}

ir_value ir_share(ir_kernel *k, ir_value value, uint32_t lane) {
    return emit_on(k, IR_SHARE, value, lane);
}

ir_value ir_load(ir_kernel *k, uint32_t buffer, ir_value index) {
    if (buffer >= k->buffer_count) {
        if (k->status == KILN_OK)
            k->status = KILN_ERROR_INTERNAL;
        return IR_NONE;
    }
    k->buffers[buffer].read = true;
    ir_inst i = inst_of(IR_LOAD, k->buffers[buffer].type, index, IR_NONE, IR_NONE);
    i.arg = buffer;
    return emit(k, i);
}

void ir_store(ir_kernel *k, uint32_t buffer, ir_value index, ir_value value) {
    if (buffer >= k->buffer_count) {
        if (k->status == KILN_OK)
            k->status = KILN_ERROR_INTERNAL;
        return;
    }
    k->buffers[buffer].written = true;
    ir_inst i = inst_of(IR_STORE, k->buffers[buffer].type, index, value, IR_NONE);
    i.arg = buffer;
    emit(k, i);
}

bool ir_vector_type(ir_type t) {
    return t == IR_F32 || t == IR_I32 || t == IR_U32;
}

static bool vector_buffer(ir_kernel *k, uint32_t buffer) {
    if (buffer < k->buffer_count && ir_vector_type(k->buffers[buffer].type))
        return true;
    if (k->status == KILN_OK)
        k->status = KILN_ERROR_INTERNAL;
    return false;
}

uint32_t ir_vector_width(ir_op op) {
    return op == IR_LOAD4 || op == IR_STORE4   ? 4
           : op == IR_LOAD8 || op == IR_STORE8 ? 8
           : op == IR_LOAD2 || op == IR_LOAD2R ? 2
                                               : 0;
}

bool ir_is_vector_load(ir_op op) {
    return op == IR_LOAD4 || op == IR_LOAD8 || op == IR_LOAD2 || op == IR_LOAD2R;
}

ir_value ir_load_vector(ir_kernel *k, uint32_t buffer, ir_value index, uint32_t width) {
    if (!vector_buffer(k, buffer) || (width != 2 && width != 4 && width != 8)) {
        if (k->status == KILN_OK)
            k->status = KILN_ERROR_INTERNAL;
        return IR_NONE;
    }
    ir_buffer *b = &k->buffers[buffer];
    b->read = true;
    b->vector = b->vector || width > 2;
    b->octets = b->octets || width == 8;
    b->pairs = b->pairs || width == 2;
    ir_op op = width == 8 ? IR_LOAD8 : width == 4 ? IR_LOAD4 : IR_LOAD2;
    ir_inst i = inst_of(op, b->type, index, IR_NONE, IR_NONE);
    i.arg = buffer;
    return emit(k, i);
}

ir_value ir_load_row_pair(ir_kernel *k, uint32_t buffer, ir_value index, ir_value row,
                          int64_t offset) {
    ir_value v = ir_load_vector(k, buffer, index, 2);
    if (v != IR_NONE) {
        k->insts.data[v].op = IR_LOAD2R;
        k->insts.data[v].src[1] = row;
        k->insts.data[v].imm.i = offset;
    }
    return v;
}

ir_value ir_extract(ir_kernel *k, ir_value vector, uint32_t element) {
    ir_type t = vector < k->insts.len ? k->insts.data[vector].type : IR_F32;
    ir_inst i = inst_of(IR_EXTRACT, t, vector, IR_NONE, IR_NONE);
    i.arg = element;
    return emit(k, i);
}

void ir_store_vector(ir_kernel *k, uint32_t buffer, ir_value index, const ir_value *values,
                     uint32_t width) {
    if (!vector_buffer(k, buffer) || (width != 4 && width != 8)) {
        if (k->status == KILN_OK)
            k->status = KILN_ERROR_INTERNAL;
        return;
    }
    ir_buffer *b = &k->buffers[buffer];
    b->written = b->vector = true;
    b->octets = b->octets || width == 8;
    ir_inst i = inst_of(width == 8 ? IR_STORE8 : IR_STORE4, b->type, index, IR_NONE, IR_NONE);
    for (uint32_t c = 0; c < width; c++)
        i.src[1 + c] = values[c];
    i.arg = buffer;
    emit(k, i);
}

ir_value ir_alu(ir_kernel *k, ir_op op, ir_type type, ir_value a, ir_value b, ir_value c) {
    return emit(k, inst_of(op, type, a, b, c));
}

ir_value ir_cast(ir_kernel *k, ir_type type, ir_value a) {
    return emit(k, inst_of(IR_CAST, type, a, IR_NONE, IR_NONE));
}

ir_value ir_if(ir_kernel *k, ir_value cond) {
    return emit(k, inst_of(IR_IF, IR_BOOL, cond, IR_NONE, IR_NONE));
}

void ir_endif(ir_kernel *k) {
    emit(k, inst_of(IR_ENDIF, IR_BOOL, IR_NONE, IR_NONE, IR_NONE));
}

ir_value ir_range(ir_kernel *k, ir_value end) {
    return emit(k, inst_of(IR_RANGE, k->index_type, end, IR_NONE, IR_NONE));
}

void ir_endrange(ir_kernel *k) {
    emit(k, inst_of(IR_ENDRANGE, k->index_type, IR_NONE, IR_NONE, IR_NONE));
}

ir_value ir_var(ir_kernel *k, ir_value init) {
    ir_type t = init < k->insts.len ? k->insts.data[init].type : IR_I32;
    return emit(k, inst_of(IR_VAR, t, init, IR_NONE, IR_NONE));
}

void ir_set(ir_kernel *k, ir_value var, ir_value value) {
    emit(k, inst_of(IR_SET, IR_BOOL, var, value, IR_NONE));
}

ir_value ir_get(ir_kernel *k, ir_value var) {
    ir_type t = var < k->insts.len ? k->insts.data[var].type : IR_I32;
    return emit(k, inst_of(IR_GET, t, var, IR_NONE, IR_NONE));
}

/* ---- verification ------------------------------------------------------------------------ */

enum { VERIFY_MAX_DEPTH = 32 };

typedef struct verifier {
    const ir_kernel *k;
    base_error *err;
    uint32_t depth;
    uint32_t open[VERIFY_MAX_DEPTH]; /* the IF/RANGE of each open body */
    uint32_t *scope;                 /* per value: the body it was defined in (0: top) */
} verifier;

static kiln_status bad(verifier *v, uint32_t at, const char *what) {
    const ir_inst *i = &v->k->insts.data[at];
    return base_error_set(v->err, KILN_ERROR_INTERNAL, "kernel IR invalid at %u (%s): %s", at,
                          ir_op_name(i->op), what);
}

/* An operand is visible when its body is still open. */
static bool visible(const verifier *v, ir_value operand) {
    uint32_t body = v->scope[operand];
    if (body == 0)
        return true;
    for (uint32_t d = 0; d < v->depth; d++) {
        if (v->open[d] + 1 == body)
            return true;
    }
    return false;
}

static kiln_status verify_types(verifier *v, uint32_t at) {
    const ir_inst *i = &v->k->insts.data[at];
    const ir_inst *s = v->k->insts.data;
    switch (i->op) {
    case IR_IF:
        return s[i->src[0]].type == IR_BOOL ? KILN_OK : bad(v, at, "condition is not bool");
    case IR_RANGE:
        return s[i->src[0]].type == v->k->index_type ? KILN_OK : bad(v, at, "end not an index");
    case IR_LOAD:
    case IR_STORE:
    case IR_LOAD4:
    case IR_STORE4:
    case IR_LOAD8:
    case IR_STORE8:
    case IR_LOAD2:
    case IR_LOAD2R:
        if (i->arg >= v->k->buffer_count)
            return bad(v, at, "no such buffer");
        if (i->op == IR_LOAD2R && s[i->src[1]].type != v->k->index_type)
            return bad(v, at, "a row pair's row is not an index");
        if (ir_type_is_float(s[i->src[0]].type) || s[i->src[0]].type == IR_BOOL)
            return bad(v, at, "element index is not an integer");
        if (ir_vector_width(i->op) && !ir_vector_type(v->k->buffers[i->arg].type))
            return bad(v, at, "vector access to a buffer of a type other than f32, i32, u32");
        for (uint32_t n = 1; i->op != IR_LOAD && i->op != IR_LOAD2R && n < ir_op_operands(i->op);
             n++) {
            if (s[i->src[n]].type != v->k->buffers[i->arg].type)
                return bad(v, at, "stored value has the wrong type");
        }
        return KILN_OK;
    case IR_EXTRACT: {
        /* a run of EXTRACTs right after the LOAD4 or LOAD8 (the interpreter reads the
         * elements then) */
        const ir_inst *vec = &s[i->src[0]];
        if (!ir_is_vector_load(vec->op) || i->arg >= ir_vector_width(vec->op) ||
            i->type != vec->type)
            return bad(v, at,
                       "EXTRACT needs a LOAD2, LOAD4 or LOAD8, an element in it and its "
                       "type");
        for (uint32_t j = i->src[0] + 1; j < at; j++) {
            if (s[j].op != IR_EXTRACT)
                return bad(v, at, "EXTRACT not in the run right after its vector load");
        }
        return KILN_OK;
    }
    case IR_SET:
        if (s[i->src[0]].op != IR_VAR || s[i->src[1]].type != s[i->src[0]].type)
            return bad(v, at, "SET needs a VAR and a value of its type");
        return KILN_OK;
    case IR_GET:
        return s[i->src[0]].op == IR_VAR ? KILN_OK : bad(v, at, "GET needs a VAR");
    case IR_WHERE:
        if (s[i->src[0]].type != IR_BOOL || s[i->src[1]].type != i->type ||
            s[i->src[2]].type != i->type)
            return bad(v, at, "WHERE needs a bool and two values of its type");
        return KILN_OK;
    case IR_LT:
    case IR_LE:
    case IR_EQ:
    case IR_NE:
        if (i->type != IR_BOOL || s[i->src[0]].type != s[i->src[1]].type)
            return bad(v, at, "comparison of unlike types or not bool");
        return KILN_OK;
    case IR_LANE:
        return v->k->group_lanes || v->k->share_lanes
                   ? KILN_OK
                   : bad(v, at, "LANE outside a group or team kernel");
    case IR_SHARE:
        if (!v->k->share_lanes || i->arg >= v->k->share_lanes)
            return bad(v, at, "SHARE outside a team kernel or of a lane past its team");
        if (s[i->src[0]].type != i->type || i->type == IR_F16 || i->type == IR_I8 ||
            i->type == IR_U8)
            return bad(v, at, "SHARE needs a value of its type (32 or 64 bits, or bool)");
        for (uint32_t d = 0; d < v->depth; d++) {
            if (s[v->open[d]].op == IR_IF)
                return bad(v, at, "SHARE inside an IF");
        }
        return KILN_OK;
    case IR_GROUP:
        if (!v->k->group_lanes)
            return bad(v, at, "GROUP outside a group kernel");
        if (i->arg != IR_ADD && i->arg != IR_MUL && i->arg != IR_MAX && i->arg != IR_MIN)
            return bad(v, at, "GROUP combines with ADD, MUL, MAX or MIN");
        if (s[i->src[0]].type != i->type ||
            (i->type != IR_F32 && i->type != IR_I32 && i->type != IR_U32))
            return bad(v, at, "GROUP needs an f32, i32 or u32 value of its type");
        for (uint32_t d = 0; d < v->depth; d++) {
            if (s[v->open[d]].op == IR_RANGE)
                return bad(v, at, "GROUP inside a RANGE");
        }
        return KILN_OK;
    case IR_CAST:
    case IR_CONST:
    case IR_PARAM:
    case IR_GLOBAL_ID:
    case IR_VAR:
    case IR_ENDIF:
    case IR_ENDRANGE:
        return KILN_OK;
    default:
        break;
    }
    /* The remaining ALU ops take operands of the result type. */
    for (uint32_t n = 0; n < ir_op_operands(i->op); n++) {
        if (s[i->src[n]].type != i->type)
            return bad(v, at, "operand type differs from the result type");
    }
    bool is_float = ir_type_is_float(i->type);
    if ((i->op >= IR_EXP && i->op <= IR_TANH) || i->op == IR_POW)
        return is_float ? KILN_OK : bad(v, at, "float op on integers");
    if (i->op == IR_AND || i->op == IR_OR || i->op == IR_XOR)
        return !is_float ? KILN_OK : bad(v, at, "bitwise op on floats");
    if (i->op == IR_NOT)
        return i->type == IR_BOOL ? KILN_OK : bad(v, at, "NOT needs bool");
    if (i->op == IR_MULHI)
        return i->type == IR_U32 ? KILN_OK : bad(v, at, "MULHI needs u32");
    return KILN_OK;
}

static kiln_status verify_inst(verifier *v, uint32_t at) {
    const ir_inst *i = &v->k->insts.data[at];
    if ((unsigned)i->op >= IR_OP_COUNT_ || (unsigned)i->type >= IR_TYPE_COUNT_)
        return bad(v, at, "unknown op or type");
    for (uint32_t n = 0; n < ir_op_operands(i->op); n++) {
        if (i->src[n] >= at)
            return bad(v, at, "operand defined later");
        if (!visible(v, i->src[n]))
            return bad(v, at, "operand out of scope");
        ir_op sop = v->k->insts.data[i->src[n]].op;
        if (sop == IR_STORE || sop == IR_STORE4 || sop == IR_STORE8 || sop == IR_ENDIF ||
            sop == IR_ENDRANGE || sop == IR_SET)
            return bad(v, at, "operand defines no value");
        if (ir_is_vector_load(sop) && i->op != IR_EXTRACT)
            return bad(v, at, "a vector load's vector used other than by EXTRACT");
    }
    kiln_status st = verify_types(v, at);
    if (st != KILN_OK)
        return st;
    v->scope[at] = v->depth ? v->open[v->depth - 1] + 1 : 0;
    if (i->op == IR_IF || i->op == IR_RANGE) {
        if (v->depth == VERIFY_MAX_DEPTH)
            return bad(v, at, "nesting too deep");
        v->open[v->depth++] = at;
        v->scope[at] = v->depth > 1 ? v->open[v->depth - 2] + 1 : 0;
        if (i->op == IR_RANGE) /* the counter is visible inside the loop only */
            v->scope[at] = at + 1;
    } else if (i->op == IR_ENDIF || i->op == IR_ENDRANGE) {
        ir_op want = i->op == IR_ENDIF ? IR_IF : IR_RANGE;
        if (v->depth == 0 || v->k->insts.data[v->open[v->depth - 1]].op != want)
            return bad(v, at, "unmatched end of body");
        v->depth--;
    }
    return KILN_OK;
}

kiln_status ir_verify(const ir_kernel *k, base_error *err) {
    if (k->status != KILN_OK)
        return base_error_set(err, k->status, "kernel IR construction failed: %s",
                              kiln_status_string(k->status));
    if (k->group_lanes & (k->group_lanes - 1))
        return base_error_set(err, KILN_ERROR_INTERNAL, "kernel IR invalid: %u lanes per item",
                              k->group_lanes);
    if ((k->share_lanes & (k->share_lanes - 1)) || (k->share_lanes && k->group_lanes))
        return base_error_set(err, KILN_ERROR_INTERNAL,
                              "kernel IR invalid: teams of %u lanes (in a group kernel: %u)",
                              k->share_lanes, k->group_lanes);
    verifier v = {.k = k, .err = err};
    v.scope = base_calloc(&k->alloc, k->insts.len ? k->insts.len : 1, sizeof *v.scope);
    if (!v.scope)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory to verify IR");
    kiln_status st = KILN_OK;
    for (uint32_t at = 0; st == KILN_OK && at < k->insts.len; at++)
        st = verify_inst(&v, at);
    if (st == KILN_OK && v.depth != 0)
        st = base_error_set(err, KILN_ERROR_INTERNAL, "kernel IR invalid: %u unclosed bodies",
                            v.depth);
    base_free(&k->alloc, v.scope, (k->insts.len ? k->insts.len : 1) * sizeof *v.scope);
    return st;
}

/* ---- loop passes ------------------------------------------------------------------------- */

/* a + b and a * b of pass counts, saturating. */
static uint64_t sat_add(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t sat_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* The value of integer instruction i when its operands' are known (value[] of earlier
 * instructions, known[] whether they are): CONST, and ADD, SUB, MUL, DIV, MIN, MAX and CAST
 * between integers (the operands of a loop count are non-negative and small: no wrapping). */
static bool constant_of(const ir_kernel *k, const ir_inst *i, const int64_t *value,
                        const bool *known, int64_t *out) {
    if (ir_type_is_float(i->type) || i->type == IR_BOOL)
        return false;
    if (i->op == IR_CONST) {
        *out = i->imm.i;
        return true;
    }
    if (ir_op_operands(i->op) == 0 || ir_op_operands(i->op) > 2 || !known[i->src[0]])
        return false;
    int64_t a = value[i->src[0]], b = 0;
    if (i->op == IR_CAST) {
        *out = a;
        return !ir_type_is_float(k->insts.data[i->src[0]].type);
    }
    if (ir_op_operands(i->op) != 2 || !known[i->src[1]])
        return false;
    b = value[i->src[1]];
    bool small = a >= -(1ll << 31) && a < (1ll << 31) && b >= -(1ll << 31) && b < (1ll << 31);
    switch (small ? i->op : IR_OP_COUNT_) {
    case IR_ADD:
        *out = a + b;
        return true;
    case IR_SUB:
        *out = a - b;
        return true;
    case IR_MUL:
        *out = a * b;
        return true;
    case IR_DIV:
        *out = b > 0 && a >= 0 ? a / b : 0;
        return b > 0 && a >= 0;
    case IR_MIN:
        *out = a < b ? a : b;
        return true;
    case IR_MAX:
        *out = a > b ? a : b;
        return true;
    default:
        return false;
    }
}

bool ir_loop_passes(const ir_kernel *k, uint64_t *passes) {
    uint32_t n = (uint32_t)k->insts.len;
    int64_t *value = base_calloc(&k->alloc, n ? n : 1, sizeof *value);
    bool *known = base_calloc(&k->alloc, n ? n : 1, sizeof *known);
    uint64_t times[VERIFY_MAX_DEPTH + 1] = {1}; /* how often the body at each depth runs */
    uint32_t depth = 0;
    bool ok = value && known;
    *passes = 0;
    for (uint32_t at = 0; ok && at < n; at++) {
        const ir_inst *i = &k->insts.data[at];
        known[at] = constant_of(k, i, value, known, &value[at]);
        if (i->op == IR_RANGE) {
            ok = known[i->src[0]] && value[i->src[0]] >= 0 && depth < VERIFY_MAX_DEPTH;
            uint64_t count = ok ? (uint64_t)value[i->src[0]] : 0;
            *passes = sat_add(*passes, sat_mul(times[depth], count + 1));
            times[depth + 1] = sat_mul(times[depth], count);
            depth++;
        } else if (i->op == IR_IF && depth < VERIFY_MAX_DEPTH) {
            times[depth + 1] = times[depth]; /* as if taken */
            depth++;
        } else if (i->op == IR_IF) {
            ok = false; /* (ir_verify refuses it) */
        } else if (depth > 0 && (i->op == IR_ENDIF || i->op == IR_ENDRANGE)) {
            depth--;
        }
    }
    base_free(&k->alloc, value, (n ? n : 1) * sizeof *value);
    base_free(&k->alloc, known, (n ? n : 1) * sizeof *known);
    return ok;
}

/* ---- listing and hash -------------------------------------------------------------------- */

/* Appends to buf (snprintf contract over the whole listing: *n counts every byte). */
static void append(char *buf, size_t cap, size_t *n, const char *fmt, ...) BASE_PRINTF(4, 5);
static void append(char *buf, size_t cap, size_t *n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf ? buf + (*n < cap ? *n : cap) : NULL, *n < cap ? cap - *n : 0, fmt, ap);
    va_end(ap);
    if (w > 0)
        *n += (size_t)w;
}

size_t ir_dump(const ir_kernel *k, char *buf, size_t cap) {
    size_t n = 0;
    int depth = 0;
#define OUT(...) append(buf, cap, &n, __VA_ARGS__)
    if (cap > 0 && buf)
        buf[0] = '\0';
    OUT("kernel: index %s, %u buffers, %u params, %u lanes per item", ir_type_name(k->index_type),
        k->buffer_count, k->param_count, k->group_lanes ? k->group_lanes : 1);
    if (k->share_lanes)
        OUT(", teams of %u", k->share_lanes);
    OUT("\n");
    for (uint32_t at = 0; at < k->insts.len; at++) {
        const ir_inst *i = &k->insts.data[at];
        if (i->op == IR_ENDIF || i->op == IR_ENDRANGE)
            depth--;
        OUT("%*s%%%u = %s %s", 2 * depth + 2, "", at, ir_op_name(i->op), ir_type_name(i->type));
        for (uint32_t s = 0; s < ir_op_operands(i->op); s++)
            OUT(" %%%u", i->src[s]);
        if (i->op == IR_CONST) {
            if (ir_type_is_float(i->type))
                OUT(" %.9g", i->imm.f);
            else
                OUT(" %lld", (long long)i->imm.i);
        }
        if (i->op == IR_LOAD || i->op == IR_STORE || i->op == IR_PARAM || ir_vector_width(i->op) ||
            i->op == IR_EXTRACT)
            OUT(" [%u]", i->arg);
        if (i->op == IR_GROUP)
            OUT(" %s", ir_op_name((ir_op)i->arg));
        if (i->op == IR_SHARE)
            OUT(" lane %u", i->arg);
        OUT("\n");
        if (i->op == IR_IF || i->op == IR_RANGE)
            depth++;
    }
#undef OUT
    return n;
}

uint64_t ir_hash(const ir_kernel *k) {
    uint64_t h = base_hash_u64(0x6b69726eu, k->index_type);
    h = base_hash_u64(h, k->buffer_count);
    h = base_hash_u64(h, k->param_count);
    h = base_hash_u64(h, k->group_lanes);
    h = base_hash_u64(h, k->share_lanes);
    for (uint32_t b = 0; b < k->buffer_count; b++)
        h = base_hash_u64(h, k->buffers[b].type | (uint64_t)k->buffers[b].vector << 8 |
                                 (uint64_t)k->buffers[b].octets << 9 |
                                 (uint64_t)k->buffers[b].pairs << 10);
    for (uint32_t at = 0; at < k->insts.len; at++) {
        const ir_inst *i = &k->insts.data[at];
        h = base_hash_u64(h, ((uint64_t)i->op << 8) | (uint64_t)i->type);
        for (uint32_t s = 0; s < ir_op_operands(i->op); s++)
            h = base_hash_u64(h, i->src[s]);
        h = base_hash_u64(h, i->arg);
        uint64_t bits;
        memcpy(&bits, &i->imm, sizeof bits);
        h = base_hash_u64(h, bits);
    }
    return h;
}

/* ---- hoisting loads ---------------------------------------------------------------------------
 */

static bool pure(ir_op op) {
    return (op_info[op].kind == KIND_LEAF || op_info[op].kind == KIND_ALU) && op != IR_GROUP &&
           op != IR_SHARE;
}

static bool hoisted_load(const ir_inst *i, uint32_t buffers) {
    return (i->op == IR_LOAD || ir_is_vector_load(i->op) || i->op == IR_LOAD2R) &&
           (buffers >> i->arg & 1);
}

/* One straight run [s, e) of a loop's body (no control instruction in it): first[i] for the
 * loads of `buffers` that pure instructions of the run can address (their operands computed
 * before s or by such instructions), those instructions, and the loads' EXTRACTs (which stay
 * right after their vector load). can[] is scratch. */
static void mark_run(const ir_kernel *k, uint32_t s, uint32_t e, uint32_t buffers, bool *can,
                     bool *first) {
    const ir_inst *in = k->insts.data;
    for (uint32_t i = s; i < e; i++) {
        bool ok = pure(in[i].op) || hoisted_load(&in[i], buffers);
        for (uint32_t n = 0; ok && n < ir_op_operands(in[i].op); n++)
            ok = in[i].src[n] < s || can[in[i].src[n]];
        can[i] = ok;
        first[i] = false;
    }
    for (uint32_t i = e; i-- > s;) { /* each load, then what it needs */
        if (!can[i] || !(first[i] || hoisted_load(&in[i], buffers)))
            continue;
        first[i] = true;
        for (uint32_t n = 0; n < ir_op_operands(in[i].op); n++) {
            if (in[i].src[n] >= s)
                first[in[i].src[n]] = true;
        }
    }
    for (uint32_t i = s; i < e; i++)
        first[i] = first[i] || (in[i].op == IR_EXTRACT && first[in[i].src[0]]);
}

kiln_status ir_hoist_loads(ir_kernel *k, uint32_t buffers) {
    uint32_t n = (uint32_t)k->insts.len;
    if (k->status != KILN_OK || n == 0 || buffers == 0)
        return k->status;
    ir_inst *old = k->insts.data;
    ir_inst *out = base_malloc(&k->alloc, n * sizeof *out);
    uint32_t *map = base_malloc(&k->alloc, n * sizeof *map); /* old value -> new */
    bool *can = base_malloc(&k->alloc, n * sizeof *can);
    bool *first = base_malloc(&k->alloc, n * sizeof *first);
    kiln_status st = out && map && can && first ? KILN_OK : KILN_ERROR_OUT_OF_HOST_MEMORY;
    uint32_t depth = 0;
    bool loop[VERIFY_MAX_DEPTH]; /* each open body: whether a RANGE's */
    for (uint32_t i = 0, put = 0; st == KILN_OK && i < n;) {
        ir_op op = old[i].op;
        if (op_info[op].kind == KIND_CONTROL) {
            if ((op == IR_IF || op == IR_RANGE) && depth == VERIFY_MAX_DEPTH)
                st = KILN_ERROR_INTERNAL;
            else if (op == IR_IF || op == IR_RANGE)
                loop[depth++] = op == IR_RANGE;
            else
                depth -= depth > 0;
            map[i] = put;
            out[put++] = old[i++];
            continue;
        }
        uint32_t e = i;
        while (e < n && op_info[old[e].op].kind != KIND_CONTROL)
            e++;
        if (depth > 0 && loop[depth - 1])
            mark_run(k, i, e, buffers, can, first);
        else
            memset(first + i, 0, (e - i) * sizeof *first);
        for (uint32_t pass = 0; pass < 2; pass++) { /* the hoisted part, then the rest */
            for (uint32_t j = i; j < e; j++) {
                if (first[j] == (pass == 0)) {
                    map[j] = put;
                    out[put++] = old[j];
                }
            }
        }
        i = e;
    }
    for (uint32_t i = 0; st == KILN_OK && i < n; i++) {
        for (uint32_t s = 0; s < ir_op_operands(out[i].op); s++)
            out[i].src[s] = map[out[i].src[s]];
    }
    if (st == KILN_OK)
        memcpy(old, out, n * sizeof *out);
    base_free(&k->alloc, out, n * sizeof *out);
    base_free(&k->alloc, map, n * sizeof *map);
    base_free(&k->alloc, can, n * sizeof *can);
    base_free(&k->alloc, first, n * sizeof *first);
    if (st != KILN_OK)
        k->status = st;
    return st;
}
