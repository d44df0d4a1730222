/* Types, constants, specialization constants and module-scope resources (storage buffers, push
 * constants, variables, built-ins). Types and scalar constants are interned through
 * spv_intern: "Two different type <id>s form, by definition, two different types. It is invalid
 * to declare multiple non-aggregate, non-pointer type <id>s having the same opcode and
 * operands" (SPIR-V 2.8). */
#include "spv_internal.h"

#include <string.h>

static spv_id spv_full(spv_builder *b, uint32_t raw) {
    return spv_ok(b) ? spv_make_id(b, raw) : 0;
}

/* The info of a type id, or NULL recording an error. */
static const spv_info *spv_lookup_type(spv_builder *b, spv_id id, const char *what) {
    const spv_info *t = spv_lookup(b, id, what);
    if (t && t->kind != SPV_K_TYPE) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: %s (id %u) is not a type", what,
                 spv_raw(id));
        return NULL;
    }
    return t;
}

/* ---- types ----------------------------------------------------------------------------- */

spv_id spv_type_void(spv_builder *b) {
    if (!spv_ok(b))
        return 0;
    return spv_full(b, spv_intern(b, SpvOpTypeVoid, 0, NULL, 0, 0,
                                  (spv_info){.kind = SPV_K_TYPE, .cls = SPV_T_VOID}));
}

spv_id spv_type_bool(spv_builder *b) {
    if (!spv_ok(b))
        return 0;
    return spv_full(b, spv_intern(b, SpvOpTypeBool, 0, NULL, 0, 0,
                                  (spv_info){.kind = SPV_K_TYPE, .cls = SPV_T_BOOL}));
}

spv_id spv_type_int(spv_builder *b, uint32_t width, bool is_signed) {
    if (!spv_ok(b))
        return 0;
    switch (width) {
    case 8:
        spv_capability(b, SpvCapabilityInt8);
        break;
    case 16:
        spv_capability(b, SpvCapabilityInt16);
        break;
    case 32:
        break;
    case 64:
        spv_capability(b, SpvCapabilityInt64);
        break;
    default:
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: no %u-bit integer type", width);
        return 0;
    }
    uint32_t ops[2] = {width, is_signed};
    spv_info info = {
        .kind = SPV_K_TYPE, .cls = SPV_T_INT, .width = (uint16_t)width, .a = is_signed};
    return spv_full(b, spv_intern(b, SpvOpTypeInt, 0, ops, 2, 0, info));
}

spv_id spv_type_float(spv_builder *b, uint32_t width) {
    if (!spv_ok(b))
        return 0;
    switch (width) {
    case 16:
        spv_capability(b, SpvCapabilityFloat16);
        break;
    case 32:
        break;
    case 64:
        spv_capability(b, SpvCapabilityFloat64);
        break;
    default:
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: no %u-bit float type", width);
        return 0;
    }
    spv_info info = {.kind = SPV_K_TYPE, .cls = SPV_T_FLOAT, .width = (uint16_t)width};
    return spv_full(b, spv_intern(b, SpvOpTypeFloat, 0, &width, 1, 0, info));
}

spv_id spv_type_vector(spv_builder *b, spv_id component, uint32_t count) {
    const spv_info *c = spv_lookup_type(b, component, "a vector's component type");
    if (!c)
        return 0;
    if (c->cls != SPV_T_BOOL && c->cls != SPV_T_INT && c->cls != SPV_T_FLOAT) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: a vector of a non-scalar type");
        return 0;
    }
    if (count < 2 || count > 4) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: a vector of %u components", count);
        return 0;
    }
    uint32_t ops[2] = {spv_raw(component), count};
    spv_info info = {.kind = SPV_K_TYPE,
                     .cls = SPV_T_VECTOR,
                     .width = c->width,
                     .type = spv_raw(component),
                     .a = count};
    return spv_full(b, spv_intern(b, SpvOpTypeVector, 0, ops, 2, 0, info));
}

static bool spv_is_data_type(const spv_info *t) {
    return t->cls != SPV_T_VOID && t->cls != SPV_T_FUNCTION && t->cls != SPV_T_RUNTIME_ARRAY;
}

/* Arrays with different strides are different types: the stride is part of the key. */
static spv_id spv_array(spv_builder *b, spv_id element, uint32_t length, uint32_t stride,
                        bool runtime) {
    const spv_info *e = spv_lookup_type(b, element, "an array's element type");
    if (!e)
        return 0;
    if (!spv_is_data_type(e) || (!runtime && length == 0)) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: an array of %s",
                 length == 0 && !runtime ? "length 0" : "a type that cannot be an element");
        return 0;
    }
    spv_info info = {.kind = SPV_K_TYPE,
                     .cls = runtime ? SPV_T_RUNTIME_ARRAY : SPV_T_ARRAY,
                     .type = spv_raw(element),
                     .a = length,
                     .b = stride};
    uint32_t ops[2] = {spv_raw(element), runtime ? 0 : spv_raw(spv_const_u32(b, length))};
    size_t before = b->ids.len;
    uint32_t raw = spv_intern(b, runtime ? SpvOpTypeRuntimeArray : SpvOpTypeArray, 0, ops,
                              runtime ? 1 : 2, stride, info);
    spv_id id = spv_full(b, raw);
    if (id && stride && b->ids.len > before) /* newly made: decorate it once */
        spv_decorate(b, id, SpvDecorationArrayStride, 1, stride, 0);
    return spv_ok(b) ? id : 0;
}

spv_id spv_type_array(spv_builder *b, spv_id element, uint32_t length, uint32_t stride) {
    return spv_array(b, element, length, stride, false);
}

spv_id spv_type_runtime_array(spv_builder *b, spv_id element, uint32_t stride) {
    return spv_array(b, element, 0, stride, true);
}

spv_id spv_type_pointer(spv_builder *b, SpvStorageClass storage, spv_id pointee) {
    const spv_info *p = spv_lookup_type(b, pointee, "a pointer's pointee type");
    if (!p)
        return 0;
    uint32_t ops[2] = {(uint32_t)storage, spv_raw(pointee)};
    spv_info info = {
        .kind = SPV_K_TYPE, .cls = SPV_T_POINTER, .type = spv_raw(pointee), .a = (uint32_t)storage};
    return spv_full(b, spv_intern(b, SpvOpTypePointer, 0, ops, 2, 0, info));
}

spv_id spv_type_struct(spv_builder *b, uint32_t count, const spv_id *members,
                       const uint32_t *offsets, bool block) {
    if (!spv_ok(b))
        return 0;
    if (count == 0 || !members) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: a struct without members");
        return 0;
    }
    size_t first = b->member_types.len;
    for (uint32_t i = 0; i < count; i++) {
        const spv_info *m = spv_lookup_type(b, members[i], "a struct member type");
        if (!m)
            return 0;
        if (m->cls == SPV_T_VOID || m->cls == SPV_T_FUNCTION ||
            (m->cls == SPV_T_RUNTIME_ARRAY && i + 1 != count)) {
            spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: struct member %u has a bad type", i);
            return 0;
        }
        if (BASE_VEC_PUSH(&b->alloc, &b->member_types, spv_raw(members[i])) != KILN_OK) {
            spv_fail(b, KILN_ERROR_OUT_OF_HOST_MEMORY, "spirv: out of host memory");
            return 0;
        }
    }
    uint32_t raw = spv_new_id(b, SPV_K_TYPE);
    if (!raw)
        return 0;
    b->ids.data[raw] =
        (spv_info){.kind = SPV_K_TYPE, .cls = SPV_T_STRUCT, .a = (uint32_t)first, .b = count};
    uint32_t *ops = base_malloc(&b->alloc, (count + 1) * sizeof *ops);
    if (!ops) {
        spv_fail(b, KILN_ERROR_OUT_OF_HOST_MEMORY, "spirv: out of host memory");
        return 0;
    }
    ops[0] = raw;
    memcpy(ops + 1, b->member_types.data + first, count * sizeof *ops);
    spv_emit(b, &b->sec[SPV_SEC_GLOBALS], SpvOpTypeStruct, ops, count + 1);
    base_free(&b->alloc, ops, (count + 1) * sizeof *ops);
    spv_id id = spv_full(b, raw);
    for (uint32_t i = 0; offsets && i < count; i++)
        spv_member_decorate(b, id, i, SpvDecorationOffset, 1, offsets[i]);
    if (block)
        spv_decorate(b, id, SpvDecorationBlock, 0, 0, 0);
    return spv_ok(b) ? id : 0;
}

spv_id spv_type_function_void(spv_builder *b) {
    uint32_t ret = spv_raw(spv_type_void(b));
    spv_info info = {.kind = SPV_K_TYPE, .cls = SPV_T_FUNCTION, .type = ret};
    return spv_full(b, spv_intern(b, SpvOpTypeFunction, 0, &ret, 1, 0, info));
}

bool spv_scalar_of(const spv_builder *b, uint32_t type_raw, const spv_info **scalar,
                   uint32_t *count) {
    if (type_raw == 0 || type_raw >= b->ids.len)
        return false;
    const spv_info *t = &b->ids.data[type_raw];
    if (t->kind != SPV_K_TYPE)
        return false;
    *count = 1;
    if (t->cls == SPV_T_VECTOR) {
        *count = t->a;
        t = &b->ids.data[t->type];
    }
    *scalar = t;
    return t->cls == SPV_T_BOOL || t->cls == SPV_T_INT || t->cls == SPV_T_FLOAT;
}

uint32_t spv_type_size(const spv_builder *b, spv_id type) {
    const spv_info *s, *t = spv_peek(b, type);
    uint32_t n;
    if (!t || !spv_scalar_of(b, spv_raw(type), &s, &n) || s->cls == SPV_T_BOOL)
        return 0;
    return s->width / 8 * n;
}

uint32_t spv_type_align(const spv_builder *b, spv_id type) {
    const spv_info *s, *t = spv_peek(b, type);
    uint32_t n;
    if (!t || !spv_scalar_of(b, spv_raw(type), &s, &n) || s->cls == SPV_T_BOOL)
        return 0;
    return s->width / 8 * (n == 3 ? 4 : n); /* std430: vec3 aligns like vec4 */
}

spv_id spv_type_of(const spv_builder *b, spv_id value) {
    const spv_info *v = spv_peek(b, value);
    if (!v || (v->kind != SPV_K_CONST && v->kind != SPV_K_VARIABLE && v->kind != SPV_K_VALUE))
        return 0;
    return spv_make_id(b, v->type);
}

/* ---- constants ------------------------------------------------------------------------- */

spv_id spv_const_bool(spv_builder *b, bool value) {
    uint32_t type = spv_raw(spv_type_bool(b));
    if (!type)
        return 0;
    spv_info info = {.kind = SPV_K_CONST, .type = type, .a = value};
    return spv_full(
        b, spv_intern(b, value ? SpvOpConstantTrue : SpvOpConstantFalse, type, NULL, 0, 0, info));
}

static bool spv_int_fits(int64_t value, uint32_t width, bool is_signed) {
    if (width == 64)
        return true;
    /* Accepted in either reading: -1 is a valid u8 constant (0xff), 255 a valid i8 one. */
    (void)is_signed;
    return value >= -((int64_t)1 << (width - 1)) && value <= ((int64_t)1 << width) - 1;
}

/* The literal words of an integer or float constant of type t. */
static size_t spv_literal(const spv_info *t, uint64_t bits, uint32_t words[2]) {
    if (t->width < 32)
        bits &= ((uint64_t)1 << t->width) - 1;
    if (t->width < 32 && t->cls == SPV_T_INT && t->a && (bits >> (t->width - 1) & 1))
        bits |= ~(((uint64_t)1 << t->width) - 1) & 0xffffffffu; /* sign-extend (2.2.1) */
    words[0] = (uint32_t)bits;
    words[1] = (uint32_t)(bits >> 32);
    return t->width == 64 ? 2 : 1;
}

static spv_id spv_const_bits(spv_builder *b, spv_id type, uint64_t bits, bool spec,
                             uint32_t spec_id) {
    const spv_info *t = spv_lookup_type(b, type, "a constant's type");
    if (!t)
        return 0;
    uint32_t lit[2];
    size_t n = spv_literal(t, bits, lit);
    spv_info info = {.kind = SPV_K_CONST, .type = spv_raw(type), .a = lit[0], .b = lit[1]};
    if (!spec)
        return spv_full(b, spv_intern(b, SpvOpConstant, spv_raw(type), lit, n, 0, info));
    uint32_t raw = spv_new_id(b, SPV_K_CONST);
    if (!raw)
        return 0;
    b->ids.data[raw] = info;
    uint32_t ops[4] = {spv_raw(type), raw, lit[0], lit[1]};
    spv_emit(b, &b->sec[SPV_SEC_GLOBALS], SpvOpSpecConstant, ops, 2 + n);
    spv_id id = spv_full(b, raw);
    spv_decorate(b, id, SpvDecorationSpecId, 1, spec_id, 0);
    return spv_ok(b) ? id : 0;
}

static spv_id spv_int_bits(spv_builder *b, spv_id type, int64_t value, bool spec,
                           uint32_t spec_id) {
    const spv_info *t = spv_lookup_type(b, type, "an integer constant's type");
    if (!t)
        return 0;
    if (t->cls != SPV_T_INT) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: an integer constant of a non-integer "
                 "type");
        return 0;
    }
    if (!spv_int_fits(value, t->width, t->a)) {
        spv_fail(b, KILN_ERROR_OVERFLOW, "spirv: %lld does not fit a %u-bit integer",
                 (long long)value, t->width);
        return 0;
    }
    return spv_const_bits(b, type, (uint64_t)value, spec, spec_id);
}

spv_id spv_const_int(spv_builder *b, spv_id type, int64_t value) {
    return spv_int_bits(b, type, value, false, 0);
}

spv_id spv_const_u32(spv_builder *b, uint32_t value) {
    return spv_const_int(b, spv_type_int(b, 32, false), value);
}

spv_id spv_const_i32(spv_builder *b, int32_t value) {
    return spv_const_int(b, spv_type_int(b, 32, true), value);
}

/* IEEE binary16 bits of a float, rounding to nearest even. */
static uint16_t spv_half_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = x >> 16 & 0x8000u, exp = x >> 23 & 0xffu, mant = x & 0x7fffffu;
    if (exp == 0xff) /* inf, nan */
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal or zero */
        if (e < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = (uint32_t)e << 10 | mant >> 13, rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
        half++; /* may carry into the exponent, which is right */
    return (uint16_t)(sign | half);
}

static uint64_t spv_float_bits(const spv_info *t, double value) {
    if (t->width == 64) {
        uint64_t bits;
        memcpy(&bits, &value, 8);
        return bits;
    }
    float f = (float)value;
    if (t->width == 16)
        return spv_half_bits(f);
    uint32_t bits;
    memcpy(&bits, &f, 4);
    return bits;
}

static spv_id spv_float_const(spv_builder *b, spv_id type, double value, bool spec,
                              uint32_t spec_id) {
    const spv_info *t = spv_lookup_type(b, type, "a float constant's type");
    if (!t)
        return 0;
    if (t->cls != SPV_T_FLOAT) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: a float constant of a non-float type");
        return 0;
    }
    return spv_const_bits(b, type, spv_float_bits(t, value), spec, spec_id);
}

spv_id spv_const_float(spv_builder *b, spv_id type, double value) {
    return spv_float_const(b, type, value, false, 0);
}

spv_id spv_const_f32(spv_builder *b, float value) {
    return spv_const_float(b, spv_type_float(b, 32), value);
}

spv_id spv_const_composite(spv_builder *b, spv_id type, uint32_t count, const spv_id *parts) {
    const spv_info *t = spv_lookup_type(b, type, "a composite constant's type");
    if (!t)
        return 0;
    uint32_t ops[12];
    if (count == 0 || count > BASE_COUNTOF(ops) ||
        (t->cls != SPV_T_VECTOR && t->cls != SPV_T_ARRAY && t->cls != SPV_T_STRUCT) ||
        ((t->cls == SPV_T_VECTOR || t->cls == SPV_T_ARRAY) && t->a != count) ||
        (t->cls == SPV_T_STRUCT && t->b != count)) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: a composite constant of %u parts does not match its type", count);
        return 0;
    }
    for (uint32_t i = 0; i < count; i++) {
        const spv_info *p = spv_lookup(b, parts[i], "a composite constant's part");
        if (!p)
            return 0;
        uint32_t want = t->cls == SPV_T_STRUCT ? b->member_types.data[t->a + i] : t->type;
        if (p->kind != SPV_K_CONST || p->type != want) {
            spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                     "spirv: part %u of a composite constant is not a constant of the part's "
                     "type",
                     i);
            return 0;
        }
        ops[i] = spv_raw(parts[i]);
    }
    spv_info info = {.kind = SPV_K_CONST, .type = spv_raw(type)};
    return spv_full(b, spv_intern(b, SpvOpConstantComposite, spv_raw(type), ops, count, 0, info));
}

spv_id spv_const_null(spv_builder *b, spv_id type) {
    const spv_info *t = spv_lookup_type(b, type, "a null constant's type");
    if (!t)
        return 0;
    spv_info info = {.kind = SPV_K_CONST, .type = spv_raw(type)};
    return spv_full(b, spv_intern(b, SpvOpConstantNull, spv_raw(type), NULL, 0, 0, info));
}

spv_id spv_spec_bool(spv_builder *b, uint32_t spec_id, bool value) {
    uint32_t type = spv_raw(spv_type_bool(b));
    uint32_t raw = type ? spv_new_id(b, SPV_K_CONST) : 0;
    if (!raw)
        return 0;
    b->ids.data[raw] = (spv_info){.kind = SPV_K_CONST, .type = type, .a = value};
    uint32_t ops[2] = {type, raw};
    spv_emit(b, &b->sec[SPV_SEC_GLOBALS], value ? SpvOpSpecConstantTrue : SpvOpSpecConstantFalse,
             ops, 2);
    spv_id id = spv_full(b, raw);
    spv_decorate(b, id, SpvDecorationSpecId, 1, spec_id, 0);
    return spv_ok(b) ? id : 0;
}

spv_id spv_spec_int(spv_builder *b, spv_id type, uint32_t spec_id, int64_t value) {
    return spv_int_bits(b, type, value, true, spec_id);
}

spv_id spv_spec_float(spv_builder *b, spv_id type, uint32_t spec_id, double value) {
    return spv_float_const(b, type, value, true, spec_id);
}

/* ---- storage capabilities ---------------------------------------------------------------- */

void spv_require_storage(spv_builder *b, uint32_t type_raw, SpvStorageClass sc) {
    if (!spv_ok(b) || type_raw == 0 || type_raw >= b->ids.len)
        return;
    const spv_info *t = &b->ids.data[type_raw];
    switch (t->cls) {
    case SPV_T_INT:
    case SPV_T_FLOAT:
        if (t->width == 8 && sc == SpvStorageClassStorageBuffer) {
            spv_capability(b, SpvCapabilityStorageBuffer8BitAccess);
            if (b->version < 0x10500)
                spv_require_ext(b, "SPV_KHR_8bit_storage");
        } else if (t->width == 8 && sc == SpvStorageClassPushConstant) {
            spv_capability(b, SpvCapabilityStoragePushConstant8);
            if (b->version < 0x10500)
                spv_require_ext(b, "SPV_KHR_8bit_storage");
        } else if (t->width == 16 && sc == SpvStorageClassStorageBuffer) {
            spv_capability(b, SpvCapabilityStorageBuffer16BitAccess); /* core in 1.3 */
        } else if (t->width == 16 && sc == SpvStorageClassPushConstant) {
            spv_capability(b, SpvCapabilityStoragePushConstant16);
        }
        return;
    case SPV_T_VECTOR:
    case SPV_T_ARRAY:
    case SPV_T_RUNTIME_ARRAY:
        spv_require_storage(b, t->type, sc);
        return;
    case SPV_T_STRUCT:
        for (uint32_t i = 0; i < t->b; i++)
            spv_require_storage(b, b->member_types.data[t->a + i], sc);
        return;
    default:
        return;
    }
}

/* ---- variables and resources ------------------------------------------------------------ */

static spv_id spv_global_variable(spv_builder *b, SpvStorageClass storage, spv_id type) {
    spv_id ptr = spv_type_pointer(b, storage, type);
    uint32_t raw = ptr ? spv_new_id(b, SPV_K_VARIABLE) : 0;
    if (!raw)
        return 0;
    b->ids.data[raw] = (spv_info){.kind = SPV_K_VARIABLE, .type = spv_raw(ptr)};
    uint32_t ops[3] = {spv_raw(ptr), raw, (uint32_t)storage};
    spv_emit(b, &b->sec[SPV_SEC_GLOBALS], SpvOpVariable, ops, 3);
    if (BASE_VEC_PUSH(&b->alloc, &b->globals, raw) != KILN_OK)
        spv_fail(b, KILN_ERROR_OUT_OF_HOST_MEMORY, "spirv: out of host memory");
    spv_require_storage(b, spv_raw(type), storage);
    return spv_full(b, raw);
}

spv_id spv_variable(spv_builder *b, SpvStorageClass storage, spv_id type) {
    if (!spv_lookup_type(b, type, "a variable's type"))
        return 0;
    if (storage == SpvStorageClassFunction) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: spv_variable makes module-scope variables; use spv_local");
        return 0;
    }
    return spv_global_variable(b, storage, type);
}

/* The Block struct of a storage buffer of element: one runtime array member at offset 0. */
static spv_id spv_buffer_block(spv_builder *b, spv_id element, spv_access access) {
    if (!spv_lookup_type(b, element, "a storage buffer's element type"))
        return 0;
    uint32_t size = spv_type_size(b, element), align = spv_type_align(b, element);
    if (size == 0 || (access & SPV_ACCESS_READ_WRITE) == 0) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: a storage buffer of a non-scalar, non-vector type or without access");
        return 0;
    }
    uint32_t stride = (size + align - 1) / align * align;
    spv_id array = spv_type_runtime_array(b, element, stride);
    uint32_t offset = 0;
    spv_id block = spv_type_struct(b, 1, &array, &offset, true);
    if (access == SPV_ACCESS_READ)
        spv_member_decorate(b, block, 0, SpvDecorationNonWritable, 0, 0);
    if (access == SPV_ACCESS_WRITE)
        spv_member_decorate(b, block, 0, SpvDecorationNonReadable, 0, 0);
    return block;
}

static spv_id spv_buffer_variable(spv_builder *b, spv_id type, uint32_t set, uint32_t binding) {
    spv_id var = spv_global_variable(b, SpvStorageClassStorageBuffer, type);
    spv_decorate(b, var, SpvDecorationDescriptorSet, 1, set, 0);
    spv_decorate(b, var, SpvDecorationBinding, 1, binding, 0);
    return spv_ok(b) ? var : 0;
}

spv_id spv_storage_buffer(spv_builder *b, spv_id element, uint32_t set, uint32_t binding,
                          spv_access access) {
    spv_id block = spv_buffer_block(b, element, access);
    return block ? spv_buffer_variable(b, block, set, binding) : 0;
}

spv_id spv_storage_buffer_array(spv_builder *b, spv_id element, uint32_t set, uint32_t binding,
                                spv_access access, uint32_t count) {
    if (spv_ok(b) && count == 0) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: an array of 0 storage buffers");
        return 0;
    }
    spv_id block = spv_buffer_block(b, element, access);
    /* An array of Block structs is an array of descriptors: no ArrayStride (it has no layout
     * in memory). Indexed by a run-time value, it needs this capability (and the Vulkan
     * feature shaderStorageBufferArrayDynamicIndexing). */
    spv_id array = block ? spv_type_array(b, block, count, 0) : 0;
    spv_capability(b, SpvCapabilityStorageBufferArrayDynamicIndexing);
    return array ? spv_buffer_variable(b, array, set, binding) : 0;
}

spv_id spv_texel_buffer(spv_builder *b, uint32_t set, uint32_t binding) {
    spv_id u32 = spv_type_int(b, 32, false);
    if (!u32)
        return 0;
    /* OpTypeImage u32 Buffer, depth 0, arrayed 0, MS 0, sampled 1, format Unknown */
    uint32_t ops[7] = {spv_raw(u32), SpvDimBuffer, 0, 0, 0, 1, SpvImageFormatUnknown};
    spv_info info = {.kind = SPV_K_TYPE, .cls = SPV_T_IMAGE, .type = spv_raw(u32)};
    /* The variable is the image itself (no sampled image: SPIR-V 1.6 forbids one of a buffer),
     * read by OpImageFetch, which needs no sampler. */
    spv_id image = spv_full(b, spv_intern(b, SpvOpTypeImage, 0, ops, 7, 0, info));
    spv_capability(b, SpvCapabilitySampledBuffer);
    spv_id var = image ? spv_global_variable(b, SpvStorageClassUniformConstant, image) : 0;
    spv_decorate(b, var, SpvDecorationDescriptorSet, 1, set, 0);
    spv_decorate(b, var, SpvDecorationBinding, 1, binding, 0);
    return spv_ok(b) ? var : 0;
}

spv_id spv_buffer_element(spv_builder *b, spv_id buffer, spv_id index) {
    spv_id idx[2] = {spv_const_u32(b, 0), index};
    return spv_access_chain(b, buffer, 2, idx);
}

spv_id spv_buffer_array_element(spv_builder *b, spv_id buffers, spv_id which, spv_id index) {
    spv_id idx[3] = {which, spv_const_u32(b, 0), index};
    return spv_access_chain(b, buffers, 3, idx);
}

spv_id spv_push_constants(spv_builder *b, uint32_t count, const spv_id *members,
                          const uint32_t *offsets) {
    if (!spv_ok(b))
        return 0;
    uint32_t computed[32];
    if (count == 0 || count > BASE_COUNTOF(computed) || !members) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: a push-constant block of %u members",
                 count);
        return 0;
    }
    uint32_t at = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (!spv_lookup_type(b, members[i], "a push-constant member type"))
            return 0;
        uint32_t size = spv_type_size(b, members[i]), align = spv_type_align(b, members[i]);
        if (size == 0) {
            spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                     "spirv: push-constant member %u is not a scalar or vector", i);
            return 0;
        }
        at = (at + align - 1) / align * align;
        computed[i] = offsets ? offsets[i] : at;
        at = computed[i] + size;
    }
    spv_id block = spv_type_struct(b, count, members, computed, true);
    return spv_global_variable(b, SpvStorageClassPushConstant, block);
}

spv_id spv_push_constant_load(spv_builder *b, spv_id block, uint32_t member) {
    spv_id idx = spv_const_u32(b, member);
    return spv_load(b, spv_access_chain(b, block, 1, &idx));
}

/* The compute built-ins: their type (uvec3 or uint) and what they need. */
static const struct {
    SpvBuiltIn builtin;
    bool vec3;
    SpvCapability cap; /* SpvCapabilityShader: nothing beyond it */
} spv_builtins[] = {
    {SpvBuiltInGlobalInvocationId, true, SpvCapabilityShader},
    {SpvBuiltInLocalInvocationId, true, SpvCapabilityShader},
    {SpvBuiltInWorkgroupId, true, SpvCapabilityShader},
    {SpvBuiltInNumWorkgroups, true, SpvCapabilityShader},
    {SpvBuiltInLocalInvocationIndex, false, SpvCapabilityShader},
    {SpvBuiltInSubgroupLocalInvocationId, false, SpvCapabilityGroupNonUniform},
    {SpvBuiltInSubgroupSize, false, SpvCapabilityGroupNonUniform},
    {SpvBuiltInNumSubgroups, false, SpvCapabilityGroupNonUniform},
    {SpvBuiltInSubgroupId, false, SpvCapabilityGroupNonUniform},
};

spv_id spv_builtin(spv_builder *b, SpvBuiltIn builtin) {
    if (!spv_ok(b))
        return 0;
    for (size_t i = 0; i < b->builtins.len; i++)
        if (b->builtins.data[i].builtin == (uint32_t)builtin)
            return spv_make_id(b, b->builtins.data[i].id);
    size_t k = 0;
    while (k < BASE_COUNTOF(spv_builtins) && spv_builtins[k].builtin != builtin)
        k++;
    if (k == BASE_COUNTOF(spv_builtins)) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: built-in %d is not a compute built-in",
                 (int)builtin);
        return 0;
    }
    spv_id type = spv_type_int(b, 32, false);
    if (spv_builtins[k].vec3)
        type = spv_type_vector(b, type, 3);
    spv_capability(b, spv_builtins[k].cap);
    spv_id var = spv_global_variable(b, SpvStorageClassInput, type);
    spv_decorate(b, var, SpvDecorationBuiltIn, 1, (uint32_t)builtin, 0);
    if (spv_ok(b) && BASE_VEC_PUSH(&b->alloc, &b->builtins,
                                   ((spv_builtin_var){(uint32_t)builtin, spv_raw(var)})) != KILN_OK)
        spv_fail(b, KILN_ERROR_OUT_OF_HOST_MEMORY, "spirv: out of host memory");
    return spv_ok(b) ? var : 0;
}
