/* The reference interpreter: executes kernel IR on the CPU, one invocation at a time, with the
 * semantics the SPIR-V emitter promises (ir.h). It is the oracle tests compare the device with,
 * and the fallback when there is no Vulkan device. Every element access is bounds-checked: a
 * code-generation bug becomes an error, not a wild write. */
#include "interp.h"

#include <math.h>
#include <string.h>

typedef union slot {
    int64_t i;
    double f;
} slot;

/* f32 <-> f16 with round-to-nearest-even, as the device's OpFConvert does. */
uint16_t interp_f32_to_f16(float value) {
    uint32_t x;
    memcpy(&x, &value, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xffu) /* inf or NaN (keep NaN quiet) */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal half or zero */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1)))
        half++; /* may carry into the exponent, up to infinity: correct */
    return (uint16_t)half;
}

float interp_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t x;
    if (exp == 0x1fu) {
        x = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        if (man == 0) {
            x = sign;
        } else { /* normalise the subnormal */
            int32_t e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400u));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else {
        x = sign | ((exp - 15 + 127) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* Rounds or wraps v to type t (the "after every instruction" rule). */
static slot fit(ir_type t, slot v) {
    switch (t) {
    case IR_BOOL:
        v.i = v.i != 0;
        break;
    case IR_I8:
        v.i = (int8_t)(uint8_t)(uint64_t)v.i;
        break;
    case IR_U8:
        v.i = (int64_t)((uint64_t)v.i & 0xffu);
        break;
    case IR_I32:
        v.i = (int32_t)(uint32_t)(uint64_t)v.i;
        break;
    case IR_U32:
        v.i = (int64_t)((uint64_t)v.i & 0xffffffffu);
        break;
    case IR_I64:
        break;
    case IR_F16:
        v.f = interp_f16_to_f32(interp_f32_to_f16((float)v.f));
        break;
    case IR_F32:
        v.f = (double)(float)v.f;
        break;
    default:
        break;
    }
    return v;
}

/* float -> integer conversion as ir.h defines CAST (x86-64's cvttss2si, as NumPy and PyTorch
 * get it there): truncation toward zero; to i32 (and i8, u8: its low bits, by fit), NaN,
 * infinities and values outside [-2^31, 2^31) give INT32_MIN; to u32, values in
 * [2^31, 2^32) convert, larger ones give 0, smaller ones are the i32 cast's bits; to i64,
 * NaN and values outside [-2^63, 2^63) give INT64_MIN. */
static int64_t float_to_int(ir_type to, double f) {
    if (to == IR_I64)
        return f >= -0x1p63 && f < 0x1p63 ? (int64_t)f : INT64_MIN;
    if (to == IR_U32 && f >= 0x1p31)
        return f < 0x1p32 ? (int64_t)f : 0;
    return f >= -0x1p31 && f < 0x1p31 ? (int64_t)f : INT32_MIN;
}

static slot cast(ir_type to, ir_type from, slot v) {
    slot r;
    if (to == IR_BOOL) {
        r.i = ir_type_is_float(from) ? v.f != 0.0 : v.i != 0;
    } else if (ir_type_is_float(to)) {
        /* i64 to f32 rounds once, as the device's conversion (not through a double). */
        r.f = ir_type_is_float(from) ? v.f : to == IR_F32 ? (double)(float)v.i : (double)v.i;
    } else {
        r.i = ir_type_is_float(from) ? float_to_int(to, v.f) : v.i;
    }
    return fit(to, r);
}

static int64_t int_floordiv(int64_t a, int64_t b) {
    int64_t q;
    return base_floordiv_i64(a, b, &q) ? q : (b == 0 ? 0 : a); /* MIN/-1 wraps to MIN */
}

static int64_t int_floormod(int64_t a, int64_t b) {
    int64_t r;
    return base_floormod_i64(a, b, &r) ? r : 0;
}

static slot float_alu(ir_op op, double a, double b) {
    slot r;
    switch (op) {
    case IR_ADD:
        r.f = a + b;
        break;
    case IR_SUB:
        r.f = a - b;
        break;
    case IR_MUL:
        r.f = a * b;
        break;
    case IR_DIV:
        r.f = a / b;
        break;
    case IR_MOD:
        r.f = a - b * floor(a / b);
        break;
    case IR_MAX:
        r.f = isnan(a) || isnan(b) ? NAN : (a > b ? a : b);
        break;
    case IR_MIN:
        r.f = isnan(a) || isnan(b) ? NAN : (a < b ? a : b);
        break;
    case IR_POW:
        r.f = pow(a, b);
        break;
    case IR_NEG:
        r.f = -a;
        break;
    case IR_ABS:
        r.f = fabs(a);
        break;
    case IR_EXP:
        r.f = exp(a);
        break;
    case IR_LOG:
        r.f = log(a);
        break;
    case IR_SQRT:
        r.f = sqrt(a);
        break;
    case IR_RSQRT:
        r.f = 1.0 / sqrt(a);
        break;
    case IR_SIN:
        r.f = sin(a);
        break;
    case IR_COS:
        r.f = cos(a);
        break;
    case IR_TANH:
        r.f = tanh(a);
        break;
    default:
        r.f = NAN;
        break;
    }
    return r;
}

static slot int_alu(ir_op op, ir_type t, int64_t a, int64_t b) {
    slot r;
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    bool is_signed = ir_type_is_signed(t);
    switch (op) {
    case IR_ADD:
        r.i = (int64_t)(ua + ub);
        break;
    case IR_SUB:
        r.i = (int64_t)(ua - ub);
        break;
    case IR_MUL:
        r.i = (int64_t)(ua * ub);
        break;
    case IR_DIV:
        r.i = is_signed ? int_floordiv(a, b) : (b ? (int64_t)(ua / ub) : 0);
        break;
    case IR_MOD:
        r.i = is_signed ? int_floormod(a, b) : (b ? (int64_t)(ua % ub) : 0);
        break;
    case IR_MAX:
        r.i = a > b ? a : b;
        break;
    case IR_MIN:
        r.i = a < b ? a : b;
        break;
    case IR_AND:
        r.i = a & b;
        break;
    case IR_OR:
        r.i = a | b;
        break;
    case IR_XOR:
        r.i = a ^ b;
        break;
    case IR_NOT:
        r.i = !a;
        break;
    case IR_MULHI: /* u32 only (ir_verify) */
        r.i = (int64_t)(((ua & 0xffffffffu) * (ub & 0xffffffffu)) >> 32);
        break;
    case IR_NEG:
        r.i = (int64_t)(0 - ua);
        break;
    case IR_ABS:
        r.i = a < 0 ? (int64_t)(0 - ua) : a;
        break;
    default:
        r.i = 0;
        break;
    }
    return r;
}

static bool compare(ir_op op, ir_type t, slot a, slot b) {
    if (ir_type_is_float(t)) {
        switch (op) {
        case IR_LT:
            return a.f < b.f;
        case IR_LE:
            return a.f <= b.f;
        case IR_EQ:
            return a.f == b.f;
        default:
            return a.f != b.f; /* NE is true for NaN, as OpFUnordNotEqual */
        }
    }
    switch (op) {
    case IR_LT:
        return a.i < b.i;
    case IR_LE:
        return a.i <= b.i;
    case IR_EQ:
        return a.i == b.i;
    default:
        return a.i != b.i;
    }
}

/* Buffer element access in the buffer's storage type. */
static slot read_element(const interp_buffer *b, ir_type t, uint64_t i) {
    slot v;
    const unsigned char *p = b->data;
    switch (t) {
    case IR_BOOL:
        v.i = p[i] != 0;
        break;
    case IR_I8:
        v.i = ((const int8_t *)b->data)[i];
        break;
    case IR_U8:
        v.i = p[i];
        break;
    case IR_I32:
        v.i = ((const int32_t *)b->data)[i];
        break;
    case IR_U32:
        v.i = ((const uint32_t *)b->data)[i];
        break;
    case IR_I64:
        v.i = ((const int64_t *)b->data)[i];
        break;
    case IR_F16:
        v.f = interp_f16_to_f32(((const uint16_t *)b->data)[i]);
        break;
    case IR_F32:
        v.f = ((const float *)b->data)[i];
        break;
    default:
        v.i = 0;
        break;
    }
    return v;
}

static void write_element(interp_buffer *b, ir_type t, uint64_t i, slot v) {
    unsigned char *p = b->data;
    switch (t) {
    case IR_BOOL:
        p[i] = v.i != 0;
        break;
    case IR_I8:
        ((int8_t *)b->data)[i] = (int8_t)v.i;
        break;
    case IR_U8:
        p[i] = (unsigned char)v.i;
        break;
    case IR_I32:
        ((int32_t *)b->data)[i] = (int32_t)v.i;
        break;
    case IR_U32:
        ((uint32_t *)b->data)[i] = (uint32_t)v.i;
        break;
    case IR_I64:
        ((int64_t *)b->data)[i] = v.i;
        break;
    case IR_F16:
        ((uint16_t *)b->data)[i] = interp_f32_to_f16((float)v.f);
        break;
    case IR_F32:
        ((float *)b->data)[i] = (float)v.f;
        break;
    default:
        break;
    }
}

typedef struct machine {
    const ir_kernel *k;
    interp_buffer *buffers;
    const int64_t *params;
    slot *values;
    uint32_t *match; /* IF -> ENDIF, RANGE -> ENDRANGE, ENDRANGE -> RANGE */
    base_error *err;
} machine;

static kiln_status check_element(machine *m, uint32_t at, uint32_t buffer, int64_t index) {
    if (index >= 0 && (uint64_t)index < m->buffers[buffer].count)
        return KILN_OK;
    return base_error_set(m->err, KILN_ERROR_INTERNAL,
                          "kernel instruction %u accessed element %lld of buffer %u, which has "
                          "%llu elements (a code-generation bug)",
                          at, (long long)index, buffer,
                          (unsigned long long)m->buffers[buffer].count);
}

/* width (2, 4 or 8) elements from index: in the buffer, and aligned as the device's vector
 * access needs. */
static kiln_status check_vector(machine *m, uint32_t at, uint32_t buffer, int64_t index,
                                uint32_t width) {
    if (index % width != 0)
        return base_error_set(m->err, KILN_ERROR_INTERNAL,
                              "kernel instruction %u accessed %u elements from %lld of buffer "
                              "%u, not a multiple of %u (a code-generation bug)",
                              at, width, (long long)index, buffer, width);
    kiln_status st = check_element(m, at, buffer, index);
    return st == KILN_OK ? check_element(m, at, buffer, index + width - 1) : st;
}

static slot alu(const machine *m, const ir_inst *i) {
    const slot *v = m->values;
    ir_type src_type = m->k->insts.data[i->src[0]].type;
    slot a = v[i->src[0]];
    slot b = ir_op_operands(i->op) > 1 ? v[i->src[1]] : a;
    slot r;
    if (i->op == IR_CAST)
        return cast(i->type, src_type, a);
    if (i->op == IR_WHERE)
        return a.i ? v[i->src[1]] : v[i->src[2]];
    if (i->op >= IR_LT && i->op <= IR_NE) {
        r.i = compare(i->op, src_type, a, b);
        return r;
    }
    if (ir_type_is_float(i->type))
        return fit(i->type, float_alu(i->op, a.f, b.f));
    return fit(i->type, int_alu(i->op, i->type, a.i, b.i));
}

/* Runs one invocation (item gid, lane) with the values v from instruction *pc to the end, or
 * to a GROUP, where it stops with *pc at the GROUP. */
static kiln_status invoke(machine *m, slot *v, int64_t gid, int64_t lane, uint32_t *pc) {
    const ir_kernel *k = m->k;
    m->values = v;
    for (uint32_t at = *pc; at < k->insts.len; at++) {
        const ir_inst *i = &k->insts.data[at];
        switch (i->op) {
        case IR_LANE:
            v[at].i = lane;
            break;
        case IR_GROUP:
        case IR_SHARE:
            *pc = at;
            return KILN_OK;
        case IR_CONST:
            memcpy(&v[at], &i->imm, sizeof v[at]);
            v[at] = fit(i->type, v[at]);
            break;
        case IR_PARAM:
            v[at].i = m->params[i->arg];
            break;
        case IR_GLOBAL_ID:
            v[at].i = gid;
            break;
        case IR_LOAD: {
            int64_t e = v[i->src[0]].i;
            kiln_status st = check_element(m, at, i->arg, e);
            if (st != KILN_OK)
                return st;
            v[at] = read_element(&m->buffers[i->arg], i->type, (uint64_t)e);
            break;
        }
        case IR_STORE: {
            int64_t e = v[i->src[0]].i;
            kiln_status st = check_element(m, at, i->arg, e);
            if (st != KILN_OK)
                return st;
            write_element(&m->buffers[i->arg], i->type, (uint64_t)e, v[i->src[1]]);
            break;
        }
        case IR_LOAD2:
        case IR_LOAD2R: /* the pair at src0 (a masked one's safe index) */
        case IR_LOAD4:
        case IR_LOAD8: { /* the vector's first element: its EXTRACTs follow at once */
            int64_t e = v[i->src[0]].i;
            kiln_status st = check_vector(m, at, i->arg, e, ir_vector_width(i->op));
            if (st != KILN_OK)
                return st;
            v[at].i = e;
            break;
        }
        case IR_EXTRACT: {
            const ir_inst *vec = &m->k->insts.data[i->src[0]];
            uint64_t e = (uint64_t)v[i->src[0]].i + i->arg;
            v[at] = read_element(&m->buffers[vec->arg], i->type, e);
            break;
        }
        case IR_STORE4:
        case IR_STORE8: {
            int64_t e = v[i->src[0]].i;
            uint32_t width = ir_vector_width(i->op);
            kiln_status st = check_vector(m, at, i->arg, e, width);
            if (st != KILN_OK)
                return st;
            for (uint32_t c = 0; c < width; c++)
                write_element(&m->buffers[i->arg], i->type, (uint64_t)e + c, v[i->src[1 + c]]);
            break;
        }
        case IR_IF:
            if (!v[i->src[0]].i)
                at = m->match[at]; /* continue after ENDIF */
            break;
        case IR_RANGE:
            v[at].i = 0;
            if (v[i->src[0]].i <= 0)
                at = m->match[at];
            break;
        case IR_ENDRANGE: {
            uint32_t r = m->match[at];
            if (++v[r].i < v[k->insts.data[r].src[0]].i)
                at = r; /* the loop body starts at r + 1 */
            break;
        }
        case IR_ENDIF:
            break;
        case IR_VAR:
            v[at] = v[i->src[0]];
            break;
        case IR_SET:
            v[i->src[0]] = v[i->src[1]];
            break;
        case IR_GET:
            v[at] = v[i->src[0]];
            break;
        default:
            v[at] = alu(m, i);
            break;
        }
    }
    *pc = (uint32_t)k->insts.len;
    return KILN_OK;
}

/* Runs the lanes of item g of a group kernel, or of team g of a team kernel (its items
 * g * lanes + l): every lane up to a GROUP or SHARE (all lanes reach the same one), there the
 * combination in the tree order the device uses or the shared lane's value, and on to the
 * next or the end. */
static kiln_status invoke_lanes(machine *m, slot *lanes, uint32_t *pcs, slot *tree, int64_t g) {
    const ir_kernel *k = m->k;
    bool team = k->share_lanes > 0;
    uint32_t count = team ? k->share_lanes : k->group_lanes;
    size_t n = k->insts.len;
    for (uint32_t l = 0; l < count; l++)
        pcs[l] = 0;
    for (;;) {
        for (uint32_t l = 0; l < count; l++) {
            kiln_status st =
                invoke(m, lanes + l * n, team ? g * (int64_t)count + l : g, l, &pcs[l]);
            if (st != KILN_OK)
                return st;
            if (pcs[l] != pcs[0])
                return base_error_set(m->err, KILN_ERROR_INTERNAL,
                                      "lanes of a kernel diverged at a GROUP or SHARE");
        }
        uint32_t at = pcs[0];
        if (at >= n)
            return KILN_OK;
        const ir_inst *i = &k->insts.data[at];
        if (i->op == IR_SHARE) {
            for (uint32_t l = 0; l < count; l++) {
                lanes[l * n + at] = lanes[i->arg * n + i->src[0]];
                pcs[l] = at + 1;
            }
            continue;
        }
        ir_inst op = {.op = (ir_op)i->arg, .type = i->type, .src = {0, 1, IR_NONE}};
        for (uint32_t l = 0; l < count; l++)
            tree[l] = lanes[l * n + i->src[0]];
        machine pair = *m;
        for (uint32_t width = count / 2; width >= 1; width /= 2) {
            for (uint32_t l = 0; l < width; l++) {
                slot ab[2] = {tree[l], tree[l + width]};
                pair.values = ab;
                tree[l] = alu(&pair, &op);
            }
        }
        for (uint32_t l = 0; l < count; l++) {
            lanes[l * n + at] = tree[0];
            pcs[l] = at + 1;
        }
    }
}

static kiln_status match_bodies(machine *m) {
    uint32_t stack[64], depth = 0;
    for (uint32_t at = 0; at < m->k->insts.len; at++) {
        ir_op op = m->k->insts.data[at].op;
        if (op == IR_IF || op == IR_RANGE) {
            if (depth == 64)
                return base_error_set(m->err, KILN_ERROR_LIMIT_EXCEEDED, "kernel nests too deep");
            stack[depth++] = at;
        } else if (op == IR_ENDIF || op == IR_ENDRANGE) {
            if (depth == 0)
                return base_error_set(m->err, KILN_ERROR_INTERNAL, "unmatched end in kernel IR");
            uint32_t open = stack[--depth];
            m->match[open] = at;
            m->match[at] = open;
        }
    }
    return KILN_OK;
}

kiln_status interp_run(const ir_kernel *k, interp_buffer *buffers, const int64_t *params,
                       uint64_t global_size, base_error *err) {
    kiln_status st = ir_verify(k, err);
    if (st != KILN_OK)
        return st;
    size_t n = k->insts.len ? k->insts.len : 1;
    machine m = {.k = k, .buffers = buffers, .params = params, .err = err};
    m.values = base_calloc(&k->alloc, n, sizeof *m.values);
    m.match = base_calloc(&k->alloc, n, sizeof *m.match);
    if (!m.values || !m.match)
        st = base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory to interpret a kernel");
    if (st == KILN_OK)
        st = match_bodies(&m);
    slot *values = m.values;
    uint32_t count = k->share_lanes ? k->share_lanes : k->group_lanes;
    if (st == KILN_OK && k->share_lanes && global_size % k->share_lanes != 0)
        st = base_error_set(err, KILN_ERROR_INTERNAL, "%llu invocations are not whole teams of %u",
                            (unsigned long long)global_size, k->share_lanes);
    if (st == KILN_OK && count) {
        slot *lanes = base_calloc(&k->alloc, (size_t)count * n + count, sizeof *lanes);
        uint32_t *pcs = base_calloc(&k->alloc, count, sizeof *pcs);
        if (!lanes || !pcs)
            st = base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY,
                                "no memory to interpret a group or team kernel");
        uint64_t items = k->share_lanes ? global_size / count : global_size;
        for (uint64_t g = 0; st == KILN_OK && g < items; g++)
            st = invoke_lanes(&m, lanes, pcs, lanes + (size_t)count * n, (int64_t)g);
        base_free(&k->alloc, lanes, ((size_t)count * n + count) * sizeof *lanes);
        base_free(&k->alloc, pcs, count * sizeof *pcs);
    }
    for (uint64_t g = 0; st == KILN_OK && !count && g < global_size; g++) {
        uint32_t pc = 0;
        st = invoke(&m, values, (int64_t)g, 0, &pc);
    }
    base_free(&k->alloc, values, n * sizeof *values);
    base_free(&k->alloc, m.match, n * sizeof *m.match);
    return st;
}
