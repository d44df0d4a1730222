/* Emission: kernel IR -> SPIR-V words through spirv/. One pass over the instructions; each IR
 * value becomes one SPIR-V id of its compute type (f16 computes in f32, i8/u8 in 32 bits,
 * rounded or wrapped after every instruction, as ir.h promises). */
#include "emit.h"

#include <math.h>
#include <string.h>

enum { ROW_TEXELS = 16, ROW_FETCHES = 128 };

typedef struct emitter {
    spv_builder *b;
    const ir_kernel *k;
    spv_id *ids;           /* IR value -> SPIR-V id (LOAD8: its elements 0..3) */
    spv_id *high;          /* LOAD8 -> its elements 4..7 */
    spv_id *loop_merge;    /* RANGE -> merge label; IF -> merge label */
    spv_id *loop_continue; /* RANGE -> continue label */
    spv_id *loop_header;   /* RANGE -> header label */
    spv_id *counter;       /* RANGE -> counter variable */
    spv_id buffers[IR_MAX_BUFFERS];
    spv_id vectors[IR_MAX_BUFFERS]; /* the same bindings as arrays of 4-vectors (LOAD4/STORE4),
                                       or of pairs of 64-bit integers (paired_vectors) */
    spv_id octets[IR_MAX_BUFFERS];  /* paired_vectors: of four 64-bit integers (LOAD8/STORE8) */
    spv_id pairs[IR_MAX_BUFFERS];   /* of 2-vectors (LOAD2), or of 64-bit integers (paired) */
    spv_id texels[IR_MAX_BUFFERS];  /* emit_options.texel_buffers: the texel buffer (else 0) */
    bool paired;                    /* emit_options.paired_vectors */
    const uint32_t *windows;        /* emit_options.windows: 0, a plain binding */
    uint32_t window_log2;           /* emit_options.window_log2 */
    spv_id push;                    /* push-constant block variable */
    spv_id param_buffer;            /* or the parameters' storage buffer */
    spv_id global_id;               /* linear invocation index, index type */
    bool params_in_buffer;
    spv_id wg_size_x;
    spv_id lane;      /* group kernels: LocalInvocationIndex; team kernels: the subgroup's (u32) */
    spv_id groups_z;  /* NumWorkgroups.z (u32): 1 in every dispatch */
    spv_id *stand_in; /* IR constant -> its opaque stand-in (0: none), see opaque_multipliers */
    bool *opaque_mul; /* IR MUL -> its constant operand is replaced by the stand-in (NULL: none) */
    bool *div;        /* IR value -> it may differ between invocations (divergent) */
    bool *loop;       /* IR value -> it is, or flows into, an instruction inside a RANGE */
    spv_id mul_pair;  /* struct {u32, u32}, OpUMulExtended's result (MULHI; 0: not made yet) */
    bool packed[IR_MAX_BUFFERS]; /* buffer i is an array of u32 words (emit_options.storage_8bit) */
    bool float16;                /* emit_options.float16: f16 rounds through OpFConvert */
    /* Row pairs (LOAD2R) of texel buffers: each buffer's last texel (i32, made at entry), and
     * in the current block each row's texel and half, and the texels fetched near it (by
     * their offset from the row's), which every pair of the row shares (load_row_pair). */
    spv_id texel_last[IR_MAX_BUFFERS];
    struct row_texel {
        uint32_t buffer;
        ir_value row;
        spv_id texel, high;
    } rows[ROW_TEXELS];
    struct row_fetch {
        uint32_t row; /* in rows */
        int64_t offset;
        spv_id value;
    } fetched[ROW_FETCHES];
    uint32_t row_count, fetch_count;
} emitter;

/* ---- types ------------------------------------------------------------------------------- */

/* The type values of t are computed in. */
static spv_id compute_type(spv_builder *b, ir_type t) {
    switch (t) {
    case IR_BOOL:
        return spv_type_bool(b);
    case IR_I8:
    case IR_I32:
        return spv_type_int(b, 32, true);
    case IR_U8:
    case IR_U32:
        return spv_type_int(b, 32, false);
    case IR_I64:
        return spv_type_int(b, 64, true);
    case IR_F16:
    case IR_F32:
    default:
        return spv_type_float(b, 32);
    }
}

/* The type values of t are stored as in buffers (bool is a byte). */
static spv_id storage_type(spv_builder *b, ir_type t) {
    switch (t) {
    case IR_BOOL:
    case IR_U8:
        return spv_type_int(b, 8, false);
    case IR_I8:
        return spv_type_int(b, 8, true);
    case IR_F16:
        return spv_type_float(b, 16);
    default:
        return compute_type(b, t);
    }
}

static spv_id zero_of(spv_builder *b, ir_type t) {
    spv_id type = compute_type(b, t);
    if (t == IR_BOOL)
        return spv_const_bool(b, false);
    return ir_type_is_float(t) ? spv_const_float(b, type, 0.0) : spv_const_int(b, type, 0);
}

static spv_id one_of(spv_builder *b, ir_type t) {
    spv_id type = compute_type(b, t);
    if (t == IR_BOOL)
        return spv_const_bool(b, true);
    return ir_type_is_float(t) ? spv_const_float(b, type, 1.0) : spv_const_int(b, type, 1);
}

/* ---- f16 without 16-bit types ----------------------------------------------------------- */

/* Without shaderFloat16 the module may hold no 16-bit float, so f16 values are converted with
 * integer operations on the bits, exactly as interp_f32_to_f16 and interp_f16_to_f32 do. Not
 * GLSL.std.450 PackHalf2x16/UnpackHalf2x16: Vulkan lets a conversion to a 16-bit float round to
 * nearest even or toward zero and a device flush f16 subnormals, while the interpreter rounds
 * to nearest even and keeps them. (lavapipe's PackHalf2x16 and UnpackHalf2x16 give the
 * interpreter's bits in every case of tests/engine/test_packed.c; a mobile GPU need not.) */

/* The f16 nearest to f32 value v (ties to even; overflow to infinity; NaN stays a quiet NaN
 * with the high bits of v's payload), as a u32 holding the 16 bits. */
static spv_id half_bits(spv_builder *b, spv_id v) {
    spv_id u32 = spv_type_int(b, 32, false), i32 = spv_type_int(b, 32, true);
#define U(c) spv_const_int(b, u32, c)
#define I(c) spv_const_int(b, i32, c)
#define OP(op, x, y) spv_binop(b, SpvOp##op, x, y)
    spv_id x = spv_convert(b, SpvOpBitcast, u32, v);
    spv_id sign = OP(BitwiseAnd, OP(ShiftRightLogical, x, U(16)), U(0x8000));
    spv_id exp = OP(BitwiseAnd, OP(ShiftRightLogical, x, U(23)), U(0xff));
    spv_id man = OP(BitwiseAnd, x, U(0x7fffff));
    /* e: the f16 exponent field the value would have; e <= 0 is a subnormal f16, whose
     * mantissa is the f32 one with its implicit bit, shifted right by 14 - e (14..24 for the
     * values that do not round to zero, e >= -10; the clamp keeps the shift defined for the
     * others, which are replaced below). */
    spv_id e = OP(ISub, spv_convert(b, SpvOpBitcast, i32, exp), I(112));
    spv_id normal = OP(SGreaterThan, e, I(0));
    spv_id clamped = spv_glsl(b, GLSLstd450SClamp, i32, 3, (const spv_id[]){e, I(-10), I(0)});
    spv_id shift =
        spv_select(b, normal, U(13), spv_convert(b, SpvOpBitcast, u32, OP(ISub, I(14), clamped)));
    spv_id m = spv_select(b, normal, man, OP(BitwiseOr, man, U(0x800000)));
    spv_id base = spv_select(
        b, normal, OP(ShiftLeftLogical, spv_convert(b, SpvOpBitcast, u32, e), U(10)), U(0));
    spv_id half = OP(BitwiseOr, base, OP(ShiftRightLogical, m, shift));
    spv_id rem = OP(BitwiseAnd, m, OP(ISub, OP(ShiftLeftLogical, U(1), shift), U(1)));
    spv_id mid = OP(ShiftLeftLogical, U(1), OP(ISub, shift, U(1)));
    spv_id odd = OP(INotEqual, OP(BitwiseAnd, half, U(1)), U(0));
    spv_id up =
        OP(LogicalOr, OP(UGreaterThan, rem, mid), OP(LogicalAnd, OP(IEqual, rem, mid), odd));
    /* a carry out of the mantissa raises the exponent, up to infinity: correct */
    half = OP(IAdd, half, spv_select(b, up, U(1), U(0)));
    half = spv_select(b, OP(SLessThan, e, I(-10)), U(0), half);
    half = spv_select(b, OP(SGreaterThanEqual, e, I(31)), U(0x7c00), half);
    spv_id nan_bits =
        spv_select(b, OP(INotEqual, man, U(0)),
                   OP(BitwiseOr, U(0x7e00), OP(ShiftRightLogical, man, U(13))), U(0x7c00));
    half = spv_select(b, OP(IEqual, exp, U(0xff)), nan_bits, half);
    return OP(BitwiseOr, sign, half);
}

/* The f32 value of the f16 whose bits are the low 16 of u32 h (exact). */
static spv_id half_value(spv_builder *b, spv_id h) {
    spv_id u32 = spv_type_int(b, 32, false), f32 = spv_type_float(b, 32);
    spv_id sign = OP(ShiftLeftLogical, OP(BitwiseAnd, h, U(0x8000)), U(16));
    spv_id exp = OP(BitwiseAnd, OP(ShiftRightLogical, h, U(10)), U(0x1f));
    spv_id man = OP(BitwiseAnd, h, U(0x3ff));
    spv_id bits = OP(BitwiseOr, OP(ShiftLeftLogical, OP(IAdd, exp, U(112)), U(23)),
                     OP(ShiftLeftLogical, man, U(13)));
    bits = spv_select(b, OP(IEqual, exp, U(0x1f)),
                      OP(BitwiseOr, U(0x7f800000), OP(ShiftLeftLogical, man, U(13))), bits);
    /* zero and subnormals: man 2^-24, exact and a normal f32 (no flush to zero) */
    spv_id small = OP(FMul, spv_convert(b, SpvOpConvertUToF, f32, man), spv_const_f32(b, 0x1p-24f));
    bits = spv_select(b, OP(IEqual, exp, U(0)), spv_convert(b, SpvOpBitcast, u32, small), bits);
    return spv_convert(b, SpvOpBitcast, f32, OP(BitwiseOr, bits, sign));
}
#undef U
#undef I
#undef OP

/* Rounds (f16) or wraps (i8/u8) a freshly computed value to its IR type. */
static spv_id fit(const emitter *e, ir_type t, spv_id v) {
    spv_builder *b = e->b;
    switch (t) {
    case IR_F16:
        if (!e->float16)
            return half_value(b, half_bits(b, v));
        return spv_convert(b, SpvOpFConvert, spv_type_float(b, 32),
                           spv_convert(b, SpvOpFConvert, spv_type_float(b, 16), v));
    case IR_I8: {
        spv_id i32 = spv_type_int(b, 32, true), s = spv_const_int(b, i32, 24);
        return spv_binop(b, SpvOpShiftRightArithmetic, spv_binop(b, SpvOpShiftLeftLogical, v, s),
                         s);
    }
    case IR_U8:
        return spv_binop(b, SpvOpBitwiseAnd, v, spv_const_int(b, spv_type_int(b, 32, false), 255));
    default:
        return v;
    }
}

/* ---- conversions -------------------------------------------------------------------------- */

/* A float (in f32) to an integer type as ir.h defines CAST, never through an out-of-range
 * OpConvertFToS/FToU (undefined: lavapipe gives INT_MIN, or UINT_MAX for FToU): to i32 (and
 * i8, u8: its low bits), NaN, infinities and values outside [-2^31, 2^31) give INT32_MIN; to
 * u32, values in [2^31, 2^32) convert, larger ones give 0, smaller ones are the i32 cast's
 * bits; to i64, NaN and values outside [-2^63, 2^63) give INT64_MIN. */
static spv_id float_to_int(spv_builder *b, ir_type to, spv_id v) {
    spv_id zero = spv_const_f32(b, 0.0f);
    if (to == IR_I64) {
        spv_id i64 = spv_type_int(b, 64, true);
        spv_id in =
            spv_binop(b, SpvOpLogicalAnd,
                      spv_binop(b, SpvOpFOrdGreaterThanEqual, v, spv_const_f32(b, -0x1p63f)),
                      spv_binop(b, SpvOpFOrdLessThan, v, spv_const_f32(b, 0x1p63f)));
        spv_id r = spv_convert(b, SpvOpConvertFToS, i64, spv_select(b, in, v, zero));
        return spv_select(b, in, r, spv_const_int(b, i64, INT64_MIN));
    }
    spv_id i32 = spv_type_int(b, 32, true), u32 = spv_type_int(b, 32, false);
    spv_id in = spv_binop(b, SpvOpLogicalAnd,
                          spv_binop(b, SpvOpFOrdGreaterThanEqual, v, spv_const_f32(b, -0x1p31f)),
                          spv_binop(b, SpvOpFOrdLessThan, v, spv_const_f32(b, 0x1p31f)));
    spv_id r = spv_convert(b, SpvOpConvertFToS, i32, spv_select(b, in, v, zero));
    r = spv_select(b, in, r, spv_const_int(b, i32, INT32_MIN));
    if (to == IR_I32 || to == IR_I8)
        return r;
    r = spv_convert(b, SpvOpBitcast, u32, r);
    if (to != IR_U32)
        return r; /* u8: wrapped by the caller */
    spv_id high = spv_binop(b, SpvOpLogicalAnd,
                            spv_binop(b, SpvOpFOrdGreaterThanEqual, v, spv_const_f32(b, 0x1p31f)),
                            spv_binop(b, SpvOpFOrdLessThan, v, spv_const_f32(b, 0x1p32f)));
    spv_id u = spv_convert(b, SpvOpConvertFToU, u32, spv_select(b, high, v, zero));
    spv_id big = spv_binop(b, SpvOpFOrdGreaterThanEqual, v, spv_const_f32(b, 0x1p31f));
    return spv_select(b, big, spv_select(b, high, u, spv_const_int(b, u32, 0)), r);
}

/* Converts v of IR type from (in compute form) to IR type to (in compute form). */
static spv_id convert(const emitter *e, ir_type to, ir_type from, spv_id v) {
    spv_builder *b = e->b;
    spv_id type = compute_type(b, to);
    if (to == IR_BOOL) {
        if (from == IR_BOOL)
            return v;
        SpvOp ne = ir_type_is_float(from) ? SpvOpFUnordNotEqual : SpvOpINotEqual;
        return spv_binop(b, ne, v, zero_of(b, from));
    }
    if (from == IR_BOOL)
        return spv_select(b, v, one_of(b, to), zero_of(b, to));
    bool ff = ir_type_is_float(from), tf = ir_type_is_float(to);
    spv_id r;
    if (ff && tf) {
        r = v; /* both computed in f32 */
    } else if (ff) {
        r = float_to_int(b, to, v);
    } else if (tf) {
        r = spv_convert(b, ir_type_is_signed(from) ? SpvOpConvertSToF : SpvOpConvertUToF, type, v);
    } else {
        spv_id ft = compute_type(b, from);
        uint32_t fw = from == IR_I64 ? 64 : 32, tw = to == IR_I64 ? 64 : 32;
        if (fw != tw) { /* UConvert's result is unsigned: convert, then reinterpret */
            bool s = ir_type_is_signed(from);
            spv_id wide = spv_type_int(b, tw, s);
            r = spv_convert(b, s ? SpvOpSConvert : SpvOpUConvert, wide, v);
            r = wide == type ? r : spv_convert(b, SpvOpBitcast, type, r);
        } else
            r = ft == type ? v : spv_convert(b, SpvOpBitcast, type, v);
    }
    return fit(e, to, r);
}

/* ---- arithmetic ---------------------------------------------------------------------------- */

/* Floor division and modulo of integers; a zero divisor gives 0 (as the interpreter). */
static spv_id int_divmod(spv_builder *b, ir_type t, bool mod, spv_id x, spv_id y) {
    spv_id zero = zero_of(b, t), one = one_of(b, t);
    spv_id y_zero = spv_binop(b, SpvOpIEqual, y, zero);
    spv_id safe = spv_select(b, y_zero, one, y);
    spv_id r;
    if (!ir_type_is_signed(t)) {
        r = spv_binop(b, mod ? SpvOpUMod : SpvOpUDiv, x, safe);
    } else {
        /* Unsigned division of the magnitudes, then the quotient's sign and one step toward
         * -inf when the operands' signs differ and something remains; the modulo is
         * x - q y. No OpSRem or OpSDiv: NVIDIA's driver (580, H200) gave SRem(-1, 4) = 3, so
         * floor(-1 / 4) came out 0 and a view's index with it. */
        spv_id s = compute_type(b, t);
        spv_id u = spv_type_int(b, t == IR_I64 ? 64 : 32, false);
        spv_id x_neg = spv_binop(b, SpvOpSLessThan, x, zero);
        spv_id y_neg = spv_binop(b, SpvOpSLessThan, safe, zero);
        spv_id ax =
            spv_convert(b, SpvOpBitcast, u, spv_select(b, x_neg, spv_unop(b, SpvOpSNegate, x), x));
        spv_id ay = spv_convert(b, SpvOpBitcast, u,
                                spv_select(b, y_neg, spv_unop(b, SpvOpSNegate, safe), safe));
        spv_id q0 = spv_convert(b, SpvOpBitcast, s, spv_binop(b, SpvOpUDiv, ax, ay));
        spv_id r0 = spv_binop(b, SpvOpUMod, ax, ay);
        spv_id rest = spv_binop(b, SpvOpINotEqual, r0, spv_const_int(b, u, 0));
        spv_id up = spv_binop(b, SpvOpIAdd, q0, spv_select(b, rest, one, zero));
        spv_id q = spv_select(b, spv_binop(b, SpvOpLogicalNotEqual, x_neg, y_neg),
                              spv_unop(b, SpvOpSNegate, up), q0);
        r = mod ? spv_binop(b, SpvOpISub, x, spv_binop(b, SpvOpIMul, q, safe)) : q;
    }
    return spv_select(b, y_zero, zero, r);
}

/* From the bits (exponent all ones, mantissa not zero): x != x is folded to false by a driver
 * that assumes no NaN occurs (NVIDIA's, without SignedZeroInfNanPreserve), integer operations
 * never are. */
static spv_id is_nan(spv_builder *b, spv_id x) {
    spv_id u32 = spv_type_int(b, 32, false);
    spv_id bits = spv_convert(b, SpvOpBitcast, u32, x);
    spv_id mag = spv_binop(b, SpvOpBitwiseAnd, bits, spv_const_int(b, u32, 0x7fffffff));
    return spv_binop(b, SpvOpUGreaterThan, mag, spv_const_int(b, u32, 0x7f800000));
}

/* max/min that return NaN when either operand is NaN (torch.maximum), defined as the
 * interpreter defines them: x when x > y (x < y for min) or x is NaN, else y (NaN when y is;
 * of equal values y, so max(-0, +0) is +0 on every device, where FMax leaves the choice to
 * the driver). Four instructions where FMax and a NaN check took six; the column max of
 * (4096, 4096) measured the same either way on lavapipe. */
static spv_id float_minmax(spv_builder *b, bool is_max, spv_id x, spv_id y) {
    spv_id wins = spv_binop(b, is_max ? SpvOpFOrdGreaterThan : SpvOpFOrdLessThan, x, y);
    return spv_select(b, spv_binop(b, SpvOpLogicalOr, wins, is_nan(b, x)), x, y);
}

static spv_id glsl1(spv_builder *b, enum GLSLstd450 inst, spv_id x) {
    return spv_glsl(b, inst, spv_type_float(b, 32), 1, &x);
}

/* pow for floats as C's pow (C99 Annex F, which NumPy's float32 power and the interpreter
 * follow): exp2(y log2 |x|), then the special cases that formula gets wrong, or that a
 * driver's log2 and exp2 need not get right (lavapipe's log2(0) is not -inf): pow(x, +-0) and
 * pow(1, y) are 1 even for NaN; NaN otherwise gives NaN; |x| = 0 gives +inf for y < 0 and +0
 * for y > 0, |x| = inf the reverse; y = +-inf gives 1 for |x| = 1, else +inf when |x| < 1 and
 * y < 0 or |x| > 1 and y > 0, else +0; an odd integral y keeps the sign of x (-0 and -inf
 * included); a finite x < 0 with a finite fractional y gives NaN. */
static spv_id float_pow(spv_builder *b, spv_id x, spv_id y) {
    spv_id f32 = spv_type_float(b, 32), i32 = spv_type_int(b, 32, true);
    spv_id zero = spv_const_f32(b, 0.0f), one = spv_const_f32(b, 1.0f);
    spv_id inf = spv_const_f32(b, INFINITY), nan = spv_const_f32(b, NAN);
    spv_id ax = glsl1(b, GLSLstd450FAbs, x), ay = glsl1(b, GLSLstd450FAbs, y);
    spv_id prod = spv_binop(b, SpvOpFMul, y, glsl1(b, GLSLstd450Log2, ax));
    spv_id mag = spv_glsl(b, GLSLstd450Exp2, f32, 1, &prod);
    spv_id y_neg = spv_binop(b, SpvOpFOrdLessThan, y, zero);
    mag =
        spv_select(b, spv_binop(b, SpvOpFOrdEqual, ax, zero), spv_select(b, y_neg, inf, zero), mag);
    mag =
        spv_select(b, spv_binop(b, SpvOpFOrdEqual, ax, inf), spv_select(b, y_neg, zero, inf), mag);
    spv_id grows = spv_binop(b, SpvOpLogicalEqual, spv_binop(b, SpvOpFOrdLessThan, ax, one), y_neg);
    spv_id at_inf =
        spv_select(b, spv_binop(b, SpvOpFOrdEqual, ax, one), one, spv_select(b, grows, inf, zero));
    mag = spv_select(b, spv_binop(b, SpvOpFOrdEqual, ay, inf), at_inf, mag);
    /* the sign: odd integral y and x's sign bit set */
    spv_id integral = spv_binop(b, SpvOpFOrdEqual, glsl1(b, GLSLstd450Floor, y), y);
    spv_id half = spv_binop(b, SpvOpFMul, y, spv_const_f32(b, 0.5f));
    spv_id odd = spv_binop(b, SpvOpLogicalAnd, integral,
                           spv_binop(b, SpvOpFOrdNotEqual, glsl1(b, GLSLstd450Floor, half), half));
    spv_id sign = spv_binop(b, SpvOpSLessThan, spv_convert(b, SpvOpBitcast, i32, x),
                            spv_const_int(b, i32, 0));
    spv_id r = spv_select(b, spv_binop(b, SpvOpLogicalAnd, sign, odd),
                          spv_unop(b, SpvOpFNegate, mag), mag);
    spv_id neg_finite = spv_binop(b, SpvOpLogicalAnd, spv_binop(b, SpvOpFOrdLessThan, x, zero),
                                  spv_binop(b, SpvOpFOrdNotEqual, ax, inf));
    spv_id no_real = spv_binop(b, SpvOpLogicalAnd, neg_finite,
                               spv_unop(b, SpvOpLogicalNot, integral)); /* y NaN: NaN anyway */
    spv_id any_nan = spv_binop(b, SpvOpLogicalOr, is_nan(b, x), is_nan(b, y));
    r = spv_select(b, spv_binop(b, SpvOpLogicalOr, no_real, any_nan), nan, r);
    spv_id unit = spv_binop(b, SpvOpLogicalOr, spv_binop(b, SpvOpFOrdEqual, y, zero),
                            spv_binop(b, SpvOpFOrdEqual, x, one));
    return spv_select(b, unit, one, r);
}

/* tanh: the driver's, except for |x| < 0.1: x (1 - x^2 / 3 + 2 x^4 / 15) (relative error below
 * 6e-8 there). lavapipe's tanh, (e^2x - 1) / (e^2x + 1), cancels near 0: tanh(1e-30) came
 * back as 3e-8, tanh(1e-5) 0.14% high. The polynomial keeps -0 and tiny values as they are. */
static spv_id float_tanh(spv_builder *b, spv_id x) {
    spv_id x2 = spv_binop(b, SpvOpFMul, x, x);
    spv_id c = spv_binop(b, SpvOpFMul, x2, spv_const_f32(b, 2.0f / 15.0f));
    c = spv_binop(b, SpvOpFAdd, c, spv_const_f32(b, -1.0f / 3.0f));
    spv_id scale = spv_binop(b, SpvOpFAdd, spv_const_f32(b, 1.0f), spv_binop(b, SpvOpFMul, x2, c));
    spv_id poly = spv_binop(b, SpvOpFMul, x, scale);
    spv_id small =
        spv_binop(b, SpvOpFOrdLessThan, glsl1(b, GLSLstd450FAbs, x), spv_const_f32(b, 0.1f));
    return spv_select(b, small, poly, glsl1(b, GLSLstd450Tanh, x));
}

/* sin and cos without the driver's: Vulkan bounds their error on [-pi, pi] only (an H200 gave
 * sin(100) 1.4e-5 off and sin(1e-30) = 0). x = k pi/2 + r with k = round(x 2/pi) and r from
 * pi/2 in three parts (Cody and Waite: k times the first part, 8 significant bits, is exact
 * for |k| < 2^16, so r is right to a few ulp for |x| below about 1e5; beyond that the result
 * is still in [-1, 1] but loses accuracy, as lavapipe's does), then the minimax polynomials of
 * sin and cos on [-pi/4, pi/4] (Cephes' sinf and cosf coefficients, about 1 ulp), the
 * quadrant k mod 4 choosing which and its sign. k = 0 keeps r = x (tiny values stay as they
 * are, and sin(+-0) is x); inf and NaN give NaN through r. */
static spv_id float_sincos(spv_builder *b, bool is_cos, spv_id x) {
    spv_id f32 = spv_type_float(b, 32), i32 = spv_type_int(b, 32, true);
    spv_id zero = spv_const_f32(b, 0.0f);
#define MUL(p, q) spv_binop(b, SpvOpFMul, p, q)
#define ADD(p, q) spv_binop(b, SpvOpFAdd, p, q)
#define SUB(p, q) spv_binop(b, SpvOpFSub, p, q)
#define K(v) spv_const_f32(b, v)
    spv_id scaled = MUL(x, K(0.636619772367581f)); /* 2 / pi */
    spv_id k = spv_glsl(b, GLSLstd450RoundEven, f32, 1, &scaled);
    spv_id r = SUB(x, MUL(k, K(1.5703125f)));
    r = SUB(r, MUL(k, K(4.837512969970703125e-4f)));
    r = SUB(r, MUL(k, K(7.54978995489188216e-8f)));
    r = spv_select(b, spv_binop(b, SpvOpFOrdEqual, k, zero), x, r);
    spv_id r2 = MUL(r, r);
    spv_id ps = ADD(MUL(r2, K(-1.9515295891e-4f)), K(8.3321608736e-3f));
    ps = ADD(MUL(r2, ps), K(-1.6666654611e-1f));
    spv_id sin_r = ADD(r, MUL(MUL(r, r2), ps));
    spv_id pc = ADD(MUL(r2, K(2.443315711809948e-5f)), K(-1.388731625493765e-3f));
    pc = ADD(MUL(r2, pc), K(4.166664568298827e-2f));
    spv_id cos_r = ADD(SUB(K(1.0f), MUL(r2, K(0.5f))), MUL(MUL(r2, r2), pc));
#undef MUL
#undef ADD
#undef SUB
#undef K
    /* The quadrant from k's low bits (k is far below 2^31 wherever r means anything). */
    spv_id q = spv_convert(b, SpvOpConvertFToS, i32, k);
    if (is_cos)
        q = spv_binop(b, SpvOpIAdd, q, spv_const_int(b, i32, 1));
    spv_id odd =
        spv_binop(b, SpvOpINotEqual, spv_binop(b, SpvOpBitwiseAnd, q, spv_const_int(b, i32, 1)),
                  spv_const_int(b, i32, 0));
    spv_id neg =
        spv_binop(b, SpvOpINotEqual, spv_binop(b, SpvOpBitwiseAnd, q, spv_const_int(b, i32, 2)),
                  spv_const_int(b, i32, 0));
    spv_id v = spv_select(b, odd, cos_r, sin_r);
    v = spv_select(b, neg, spv_unop(b, SpvOpFNegate, v), v);
    /* sin(+-0) is x itself: -0 + (+0) above would round to +0 */
    return is_cos ? v : spv_select(b, spv_binop(b, SpvOpFOrdEqual, x, zero), x, v);
}

static spv_id compare(spv_builder *b, ir_op op, ir_type t, spv_id x, spv_id y) {
    static const SpvOp ops[4][4] = {
        /* LT, LE, EQ, NE */
        {SpvOpFOrdLessThan, SpvOpFOrdLessThanEqual, SpvOpFOrdEqual, SpvOpFUnordNotEqual},
        {SpvOpSLessThan, SpvOpSLessThanEqual, SpvOpIEqual, SpvOpINotEqual},
        {SpvOpULessThan, SpvOpULessThanEqual, SpvOpIEqual, SpvOpINotEqual},
        {SpvOpLogicalNotEqual, SpvOpLogicalNotEqual, SpvOpLogicalEqual, SpvOpLogicalNotEqual},
    };
    int row = ir_type_is_float(t) ? 0 : t == IR_BOOL ? 3 : ir_type_is_signed(t) ? 1 : 2;
    int col = op - IR_LT;
    if (row == 3 && (op == IR_LT || op == IR_LE)) { /* false < true: !x && y; x <= y: !x || y */
        spv_id nx = spv_unop(b, SpvOpLogicalNot, x);
        return spv_binop(b, op == IR_LT ? SpvOpLogicalAnd : SpvOpLogicalOr, nx, y);
    }
    return spv_binop(b, ops[row][col], x, y);
}

static spv_id float_alu(spv_builder *b, ir_op op, spv_id x, spv_id y) {
    switch (op) {
    case IR_ADD:
        return spv_binop(b, SpvOpFAdd, x, y);
    case IR_SUB:
        return spv_binop(b, SpvOpFSub, x, y);
    case IR_MUL:
        return spv_binop(b, SpvOpFMul, x, y);
    case IR_DIV:
        return spv_binop(b, SpvOpFDiv, x, y);
    case IR_MOD:
        return spv_binop(b, SpvOpFMod, x, y);
    case IR_MAX:
        return float_minmax(b, true, x, y);
    case IR_MIN:
        return float_minmax(b, false, x, y);
    case IR_POW:
        return float_pow(b, x, y);
    case IR_NEG:
        return spv_unop(b, SpvOpFNegate, x);
    case IR_ABS:
        return glsl1(b, GLSLstd450FAbs, x);
    case IR_EXP:
        return glsl1(b, GLSLstd450Exp, x);
    case IR_LOG:
        return glsl1(b, GLSLstd450Log, x);
    case IR_SQRT:
        return glsl1(b, GLSLstd450Sqrt, x);
    case IR_RSQRT:
        return glsl1(b, GLSLstd450InverseSqrt, x);
    case IR_SIN:
        return float_sincos(b, false, x);
    case IR_COS:
        return float_sincos(b, true, x);
    case IR_TANH:
        return float_tanh(b, x);
    default:
        return 0;
    }
}

static spv_id int_alu(spv_builder *b, ir_op op, ir_type t, spv_id x, spv_id y) {
    bool s = ir_type_is_signed(t);
    spv_id type = compute_type(b, t);
    spv_id args[2] = {x, y};
    switch (op) {
    case IR_ADD:
        return spv_binop(b, SpvOpIAdd, x, y);
    case IR_SUB:
        return spv_binop(b, SpvOpISub, x, y);
    case IR_MUL:
        return spv_binop(b, SpvOpIMul, x, y);
    case IR_DIV:
        return int_divmod(b, t, false, x, y);
    case IR_MOD:
        return int_divmod(b, t, true, x, y);
    case IR_MAX:
        return spv_glsl(b, s ? GLSLstd450SMax : GLSLstd450UMax, type, 2, args);
    case IR_MIN:
        return spv_glsl(b, s ? GLSLstd450SMin : GLSLstd450UMin, type, 2, args);
    case IR_AND:
        return spv_binop(b, SpvOpBitwiseAnd, x, y);
    case IR_OR:
        return spv_binop(b, SpvOpBitwiseOr, x, y);
    case IR_XOR:
        return spv_binop(b, SpvOpBitwiseXor, x, y);
    case IR_NEG:
        return spv_unop(b, SpvOpSNegate, x);
    case IR_ABS:
        return spv_glsl(b, GLSLstd450SAbs, type, 1, &x);
    default:
        return 0;
    }
}

static spv_id bool_alu(spv_builder *b, ir_op op, spv_id x, spv_id y) {
    switch (op) {
    case IR_AND:
        return spv_binop(b, SpvOpLogicalAnd, x, y);
    case IR_OR:
        return spv_binop(b, SpvOpLogicalOr, x, y);
    case IR_XOR:
        return spv_binop(b, SpvOpLogicalNotEqual, x, y);
    case IR_NOT:
        return spv_unop(b, SpvOpLogicalNot, x);
    case IR_MAX:
        return spv_binop(b, SpvOpLogicalOr, x, y);
    case IR_MIN:
        return spv_binop(b, SpvOpLogicalAnd, x, y);
    default:
        return 0;
    }
}

/* MULHI: member 1 (the high half) of OpUMulExtended's {low, high} (32-bit operations only: no
 * Int64 capability needed). */
static spv_id mul_high(emitter *e, spv_id x, spv_id y) {
    spv_builder *b = e->b;
    if (!e->mul_pair) {
        spv_id u32 = spv_type_int(b, 32, false);
        e->mul_pair = spv_type_struct(b, 2, (const spv_id[]){u32, u32}, NULL, false);
    }
    return spv_composite_extract(b, spv_mul_extended(b, SpvOpUMulExtended, e->mul_pair, x, y), 1);
}

static spv_id alu(emitter *e, const ir_inst *i) {
    spv_builder *b = e->b;
    const ir_inst *insts = e->k->insts.data;
    spv_id x = e->ids[i->src[0]];
    spv_id y = ir_op_operands(i->op) > 1 ? e->ids[i->src[1]] : 0;
    if (e->opaque_mul && e->opaque_mul[i - insts]) { /* opaque_multipliers */
        x = e->stand_in[i->src[0]] ? e->stand_in[i->src[0]] : x;
        y = e->stand_in[i->src[1]] ? e->stand_in[i->src[1]] : y;
    }
    ir_type st = insts[i->src[0]].type;
    if (i->op == IR_CAST)
        return convert(e, i->type, st, x);
    if (i->op == IR_WHERE)
        return spv_select(b, x, y, e->ids[i->src[2]]);
    if (i->op == IR_MULHI)
        return mul_high(e, x, y);
    if (i->op >= IR_LT && i->op <= IR_NE)
        return compare(b, i->op, st, x, y);
    if (i->type == IR_BOOL)
        return bool_alu(b, i->op, x, y);
    if (ir_type_is_float(i->type))
        return fit(e, i->type, float_alu(b, i->op, x, y));
    return fit(e, i->type, int_alu(b, i->op, i->type, x, y));
}

/* ---- groups -------------------------------------------------------------------------------- */

/* GROUP: each lane's value in a Workgroup array, then a tree (lane l < s takes op(x[l], x[l+s])
 * for s = lanes / 2, ..., 1, a barrier after each step), and every lane reads x[0]. */
static spv_id group(emitter *e, const ir_inst *i) {
    spv_builder *b = e->b;
    uint32_t lanes = e->k->group_lanes;
    spv_id u32 = spv_type_int(b, 32, false);
    spv_id type = compute_type(b, i->type);
    spv_id shared = spv_variable(b, SpvStorageClassWorkgroup, spv_type_array(b, type, lanes, 0));
    spv_id mine = spv_access_chain(b, shared, 1, &e->lane);
    spv_store(b, mine, e->ids[i->src[0]]);
    spv_workgroup_barrier(b);
    for (uint32_t width = lanes / 2; width >= 1; width /= 2) {
        spv_id w = spv_const_int(b, u32, width);
        spv_id then_label = spv_label(b), merge = spv_label(b);
        spv_id taker = spv_binop(b, SpvOpULessThan, e->lane, w);
        spv_selection_merge(b, merge);
        spv_branch_cond(b, taker, then_label, merge);
        spv_block(b, then_label);
        spv_id other = spv_binop(b, SpvOpIAdd, e->lane, w);
        spv_id x = spv_load(b, mine);
        spv_id y = spv_load(b, spv_access_chain(b, shared, 1, &other));
        ir_op op = (ir_op)i->arg;
        spv_id r = ir_type_is_float(i->type) ? fit(e, i->type, float_alu(b, op, x, y))
                                             : fit(e, i->type, int_alu(b, op, i->type, x, y));
        spv_store(b, mine, r);
        spv_branch(b, merge);
        spv_block(b, merge);
        spv_workgroup_barrier(b);
    }
    spv_id first = spv_const_int(b, u32, 0);
    return spv_load(b, spv_access_chain(b, shared, 1, &first));
}

/* ---- memory -------------------------------------------------------------------------------- */

/* Bytes of an element of t in a buffer. */
static uint32_t stored_size(ir_type t) {
    switch (t) {
    case IR_BOOL:
    case IR_U8:
    case IR_I8:
        return 1;
    case IR_F16:
        return 2;
    case IR_I64:
        return 8;
    default:
        return 4;
    }
}

/* A pointer to unit index of view var of buffer buf (units of unit bytes). A windowed buffer
 * (emit_options.windows) is an array of descriptors of 2^window_log2 bytes each: the index's
 * high bits select the descriptor, its low bits the unit within it (both powers of two). */
static spv_id buffer_pointer(emitter *e, uint32_t buf, spv_id var, uint32_t unit, spv_id index) {
    spv_builder *b = e->b;
    if (!e->windows || !e->windows[buf])
        return spv_buffer_element(b, var, index);
    uint32_t shift = e->window_log2 - (uint32_t)__builtin_ctz(unit);
    spv_id t = compute_type(b, e->k->index_type);
    spv_id which = spv_binop(b, SpvOpShiftRightLogical, index, spv_const_int(b, t, shift));
    spv_id local =
        spv_binop(b, SpvOpBitwiseAnd, index, spv_const_int(b, t, ((int64_t)1 << shift) - 1));
    return spv_buffer_array_element(b, var, which, local);
}

/* ---- packed buffers (emit_options.storage_8bit) --------------------------------------------
 *
 * A packed buffer is an array of u32 words; element index of a view of s-byte elements (s: 1
 * or 2) is bits [8 s (index % (4 / s)), 8 s (index % (4 / s) + 1)) of word index / (4 / s),
 * the bytes a device with 8/16-bit storage would hold (little-endian). Only LOAD and STORE
 * reach one: vector accesses are for 32-bit types (ir_vector_type). A windowed packed buffer
 * picks its window from the word index (buffer_pointer with 4-byte units: windows are whole
 * words). Several invocations may write elements of one word in one dispatch (an odd-length
 * u8 tensor written in place, x[1::2] beside x[0::2]), so a store clears and sets its own bits
 * with OpAtomicAnd and OpAtomicOr (Device scope, relaxed: each element has one writer, only the
 * word is shared; atomics on 32-bit storage-buffer integers need no device feature). Loads of
 * a buffer the kernel also writes are OpAtomicLoad: another invocation's atomic on the word
 * would race with a plain load (in the memory model's terms; its bits are never this load's). */

/* The pointer to the word of element index of packed buffer buf, and in *shift the element's
 * first bit within it (u32). */
static spv_id packed_word(emitter *e, uint32_t buf, ir_type t, spv_id index, spv_id *shift) {
    spv_builder *b = e->b;
    spv_id it = compute_type(b, e->k->index_type), u32 = spv_type_int(b, 32, false);
    uint32_t log2 = stored_size(t) == 1 ? 2 : 1; /* elements per word: 4 or 2 */
    spv_id word = spv_binop(b, SpvOpShiftRightLogical, index, spv_const_int(b, it, log2));
    spv_id slot = spv_binop(b, SpvOpBitwiseAnd, index, spv_const_int(b, it, (1 << log2) - 1));
    slot = e->k->index_type == IR_I64 ? spv_convert(b, SpvOpUConvert, u32, slot)
                                      : spv_convert(b, SpvOpBitcast, u32, slot);
    *shift = spv_binop(b, SpvOpShiftLeftLogical, slot, spv_const_int(b, u32, log2 == 2 ? 3 : 4));
    return buffer_pointer(e, buf, e->buffers[buf], 4, word);
}

static spv_id load_packed(emitter *e, const ir_inst *i) {
    spv_builder *b = e->b;
    spv_id u32 = spv_type_int(b, 32, false), i32 = spv_type_int(b, 32, true), shift;
    spv_id p = packed_word(e, i->arg, i->type, e->ids[i->src[0]], &shift);
    spv_id word = e->k->buffers[i->arg].written
                      ? spv_atomic_load(b, p, SpvScopeDevice, SpvMemorySemanticsMaskNone)
                      : spv_load(b, p);
    spv_id bits = spv_binop(b, SpvOpShiftRightLogical, word, shift);
    switch (i->type) {
    case IR_I8: { /* the byte to the top, then an arithmetic shift extends its sign */
        spv_id up = spv_binop(b, SpvOpShiftLeftLogical, word,
                              spv_binop(b, SpvOpISub, spv_const_int(b, u32, 24), shift));
        return spv_binop(b, SpvOpShiftRightArithmetic, spv_convert(b, SpvOpBitcast, i32, up),
                         spv_const_int(b, i32, 24));
    }
    case IR_F16:
        return half_value(b, spv_binop(b, SpvOpBitwiseAnd, bits, spv_const_int(b, u32, 0xffff)));
    case IR_BOOL:
        return spv_binop(b, SpvOpINotEqual,
                         spv_binop(b, SpvOpBitwiseAnd, bits, spv_const_int(b, u32, 0xff)),
                         spv_const_int(b, u32, 0));
    default: /* IR_U8 */
        return spv_binop(b, SpvOpBitwiseAnd, bits, spv_const_int(b, u32, 0xff));
    }
}

static void store_packed(emitter *e, const ir_inst *i) {
    spv_builder *b = e->b;
    spv_id u32 = spv_type_int(b, 32, false), v = e->ids[i->src[1]], shift;
    spv_id p = packed_word(e, i->arg, i->type, e->ids[i->src[0]], &shift);
    uint32_t ones = stored_size(i->type) == 1 ? 0xffu : 0xffffu;
    switch (i->type) {
    case IR_BOOL:
        v = spv_select(b, v, spv_const_int(b, u32, 1), spv_const_int(b, u32, 0));
        break;
    case IR_F16:
        v = half_bits(b, v);
        break;
    default: /* u8 (u32, in range) or i8 (i32): the low byte */
        v = spv_binop(b, SpvOpBitwiseAnd, spv_convert(b, SpvOpBitcast, u32, v),
                      spv_const_int(b, u32, ones));
        break;
    }
    spv_id mask = spv_binop(b, SpvOpShiftLeftLogical, spv_const_int(b, u32, ones), shift);
    spv_atomic(b, SpvOpAtomicAnd, p, SpvScopeDevice, SpvMemorySemanticsMaskNone,
               spv_unop(b, SpvOpNot, mask));
    spv_atomic(b, SpvOpAtomicOr, p, SpvScopeDevice, SpvMemorySemanticsMaskNone,
               spv_binop(b, SpvOpShiftLeftLogical, v, shift));
}

/* ---- texel buffers (emit_options.texel_buffers) --------------------------------------------- */

/* The 32-bit texel index of element index >> shift (an index-type value). */
static spv_id texel_index(emitter *e, spv_id index, uint32_t shift) {
    spv_builder *b = e->b;
    spv_id t = compute_type(b, e->k->index_type), i32 = spv_type_int(b, 32, true);
    if (shift)
        index = spv_binop(b, SpvOpShiftRightLogical, index, spv_const_int(b, t, shift));
    return e->k->index_type == IR_I64 ? spv_convert(b, SpvOpSConvert, i32, index) : index;
}

/* Texel `texel` (32-bit) of buffer buf as a 4-vector of t's storage type. */
static spv_id fetch(emitter *e, uint32_t buf, ir_type t, spv_id texel) {
    spv_builder *b = e->b;
    spv_id v = spv_texel_fetch(b, e->texels[buf], texel);
    spv_id elem = storage_type(b, t);
    return t == IR_U32 ? v : spv_convert(b, SpvOpBitcast, spv_type_vector(b, elem, 4), v);
}

/* LOAD of a texel buffer: component index % 4 of texel index / 4. */
static spv_id load_texel(emitter *e, const ir_inst *i) {
    spv_builder *b = e->b;
    spv_id index = e->ids[i->src[0]], t = compute_type(b, e->k->index_type);
    spv_id v = fetch(e, i->arg, i->type, texel_index(e, index, 2));
    return spv_vector_extract_dynamic(b, v,
                                      spv_binop(b, SpvOpBitwiseAnd, index, spv_const_int(b, t, 3)));
}

/* LOAD2 of a texel buffer: components 0, 1 or 2, 3 of texel index / 4 (index is even). */
static spv_id load_texel_pair(emitter *e, const ir_inst *i) {
    spv_builder *b = e->b;
    spv_id index = e->ids[i->src[0]], t = compute_type(b, e->k->index_type);
    spv_id v = fetch(e, i->arg, i->type, texel_index(e, index, 2));
    spv_id high =
        spv_binop(b, SpvOpINotEqual, spv_binop(b, SpvOpBitwiseAnd, index, spv_const_int(b, t, 2)),
                  spv_const_int(b, t, 0));
    spv_id parts[2];
    for (uint32_t c = 0; c < 2; c++)
        parts[c] =
            spv_select(b, high, spv_composite_extract(b, v, c + 2), spv_composite_extract(b, v, c));
    return spv_composite_construct(b, spv_type_vector(b, storage_type(b, i->type), 2), 2, parts);
}

/* A row pair (LOAD2R) of a texel buffer: the pair at row + d (d = imm.i) where it is valid.
 * With r the row's value, its texel r >> 2 and h = r & 2 (r's parity is d's, since a valid
 * pair starts at an even element), the pair lies in texel (r >> 2) + ((r & 3) + d) >> 2 at
 * component ((r & 3) + d) & 3: two candidates known when compiling, one for each h, whose
 * fetches every pair of the row shares (a row of 14 elements at an even element: 4 fetches
 * instead of 7, as a hand-written kernel reads it). Each fetch's texel is clamped to the
 * buffer: a masked pair (its value unused) or the candidate h does not take may lie outside. */
static spv_id load_row_pair(emitter *e, const ir_inst *i) {
    spv_builder *b = e->b;
    spv_id t = compute_type(b, e->k->index_type), i32 = spv_type_int(b, 32, true);
    uint32_t r = 0;
    while (r < e->row_count && (e->rows[r].buffer != i->arg || e->rows[r].row != i->src[1]))
        r++;
    if (r == e->row_count) {
        if (r == ROW_TEXELS) /* a block of many rows: the plain pair (always in bounds) */
            return load_texel_pair(e, i);
        spv_id row = e->ids[i->src[1]];
        spv_id texel = spv_binop(b, SpvOpShiftRightArithmetic, row, spv_const_int(b, t, 2));
        if (e->k->index_type == IR_I64)
            texel = spv_convert(b, SpvOpSConvert, i32, texel);
        spv_id high =
            spv_binop(b, SpvOpINotEqual, spv_binop(b, SpvOpBitwiseAnd, row, spv_const_int(b, t, 2)),
                      spv_const_int(b, t, 0));
        e->rows[e->row_count++] = (struct row_texel){i->arg, i->src[1], texel, high};
    }
    int64_t d = i->imm.i;
    spv_id half[2][2];
    for (uint32_t h = 0; h < 2; h++) {
        int64_t at = (d & 1) + 2 * h + d; /* from the row's texel's first element */
        int64_t offset = at >= 0 ? at / 4 : -((3 - at) / 4), comp = at - 4 * offset;
        uint32_t f = 0;
        while (f < e->fetch_count && (e->fetched[f].row != r || e->fetched[f].offset != offset))
            f++;
        if (f == e->fetch_count) {
            if (f == ROW_FETCHES)
                return load_texel_pair(e, i);
            spv_id at_texel =
                spv_binop(b, SpvOpIAdd, e->rows[r].texel, spv_const_int(b, i32, (uint64_t)offset));
            spv_id clamped = spv_glsl(
                b, GLSLstd450SClamp, i32, 3,
                (const spv_id[]){at_texel, spv_const_int(b, i32, 0), e->texel_last[i->arg]});
            e->fetched[e->fetch_count++] =
                (struct row_fetch){r, offset, fetch(e, i->arg, i->type, clamped)};
        }
        for (uint32_t c = 0; c < 2; c++)
            half[h][c] = spv_composite_extract(b, e->fetched[f].value, (uint32_t)comp + c);
    }
    spv_id parts[2];
    for (uint32_t c = 0; c < 2; c++)
        parts[c] = spv_select(b, e->rows[r].high, half[1][c], half[0][c]);
    return spv_composite_construct(b, spv_type_vector(b, storage_type(b, i->type), 2), 2, parts);
}

static spv_id load(emitter *e, const ir_inst *i) {
    spv_builder *b = e->b;
    if (e->texels[i->arg])
        return load_texel(e, i);
    if (e->packed[i->arg])
        return load_packed(e, i);
    spv_id p =
        buffer_pointer(e, i->arg, e->buffers[i->arg], stored_size(i->type), e->ids[i->src[0]]);
    spv_id v = spv_load(b, p);
    switch (i->type) {
    case IR_BOOL:
        return spv_binop(b, SpvOpINotEqual, v, spv_const_int(b, spv_type_int(b, 8, false), 0));
    case IR_I8:
        return spv_convert(b, SpvOpSConvert, compute_type(b, i->type), v);
    case IR_U8:
        return spv_convert(b, SpvOpUConvert, compute_type(b, i->type), v);
    case IR_F16:
        return spv_convert(b, SpvOpFConvert, compute_type(b, i->type), v);
    default:
        return v;
    }
}

static void store(emitter *e, const ir_inst *i) {
    spv_builder *b = e->b;
    if (e->packed[i->arg]) {
        store_packed(e, i);
        return;
    }
    spv_id v = e->ids[i->src[1]];
    spv_id t = storage_type(b, i->type);
    switch (i->type) {
    case IR_BOOL:
        v = spv_select(b, v, spv_const_int(b, t, 1), spv_const_int(b, t, 0));
        break;
    case IR_I8:
        v = spv_convert(b, SpvOpSConvert, t, v);
        break;
    case IR_U8:
        v = spv_convert(b, SpvOpUConvert, t, v);
        break;
    case IR_F16:
        v = spv_convert(b, SpvOpFConvert, t, v);
        break;
    default:
        break;
    }
    spv_store(
        b, buffer_pointer(e, i->arg, e->buffers[i->arg], stored_size(i->type), e->ids[i->src[0]]),
        v);
}

/* A u32 value as i64: OpUConvert to u64 (in a Shader its result type must be unsigned), then
 * the same bits as i64. */
static spv_id u32_to_i64(spv_builder *b, spv_id v) {
    spv_id u64 = spv_convert(b, SpvOpUConvert, spv_type_int(b, 64, false), v);
    return spv_convert(b, SpvOpBitcast, spv_type_int(b, 64, true), u64);
}

/* The integer constant value (of type t, I32 or I64) times NumWorkgroups.z: the same value, which
 * the driver's compiler cannot fold (opaque_multipliers). */
static spv_id hidden(emitter *e, ir_type t, spv_id value) {
    spv_builder *b = e->b;
    spv_id z = t == IR_I64 ? u32_to_i64(b, e->groups_z)
                           : spv_convert(b, SpvOpBitcast, spv_type_int(b, 32, true), e->groups_z);
    return spv_binop(b, SpvOpIMul, value, z);
}

/* Index value v / d (d: 4 or 8) written as a sum of products whose constants are divided by d
 * (hidden, as opaque_multipliers hides them, where they multiply an invocation's value), or 0
 * when v is not such a sum of multiples of d (constants, products by constants): a row stride
 * then stays a multiplier, which llvmpipe's loads in a loop prefer to a shift of the element
 * index (sum over rows: 6.6 ms with the shift, 6.0 without; bench/README.md). Exact: every
 * term is a multiple of d. */
static spv_id divided(emitter *e, ir_value v, int64_t d, int depth) {
    spv_builder *b = e->b;
    const ir_inst *insts = e->k->insts.data, *i = &insts[v];
    ir_type t = e->k->index_type;
    if (depth > 8 || i->type != t)
        return 0;
    if (i->op == IR_CONST)
        return i->imm.i % d == 0 ? spv_const_int(b, compute_type(b, t), i->imm.i / d) : 0;
    if (i->op == IR_ADD || i->op == IR_SUB) {
        spv_id x = divided(e, i->src[0], d, depth + 1);
        spv_id y = x ? divided(e, i->src[1], d, depth + 1) : 0;
        return y ? spv_binop(b, i->op == IR_ADD ? SpvOpIAdd : SpvOpISub, x, y) : 0;
    }
    if (i->op != IR_MUL)
        return 0;
    for (int s = 0; s < 2; s++) {
        const ir_inst *c = &insts[i->src[s]];
        ir_value other = i->src[1 - s];
        if (c->op != IR_CONST || c->imm.i % d != 0)
            continue;
        spv_id q = spv_const_int(b, compute_type(b, t), c->imm.i / d);
        if (e->div[other] && c->imm.i / d != 1 && c->imm.i / d != -1)
            q = hidden(e, t, q);
        return c->imm.i / d == 0 ? q : spv_binop(b, SpvOpIMul, e->ids[other], q);
    }
    return 0;
}

/* The index of a vector access's first element (a multiple of width, 2, 4 or 8) in a view of
 * width-element vectors: in a loop on a CPU device (opaque_multipliers) the divided terms,
 * elsewhere the shifted element index (elementwise tiles measured no better divided). */
static spv_id vector_index(emitter *e, const ir_inst *i, uint32_t width) {
    spv_builder *b = e->b;
    bool opaque = e->opaque_mul && e->loop[i - e->k->insts.data];
    spv_id index = opaque ? divided(e, i->src[0], width, 0) : 0;
    if (!index) {
        uint32_t log2 = width == 8 ? 3 : width == 4 ? 2 : 1;
        spv_id shift = spv_const_int(b, compute_type(b, e->k->index_type), log2);
        index = spv_binop(b, SpvOpShiftRightLogical, e->ids[i->src[0]], shift);
    }
    return index;
}

/* emit_options.paired_vectors: llvmpipe moves a vector load's or store's components one
 * invocation at a time, each with its own bounds check and branch, so 32-bit elements moved
 * as 64-bit integers cost half as much (a row sum with vec4 loads: 6.4 ms, with u64vec2 loads
 * of the same bytes: 5.0; bench/README.md), and eight as one u64vec4 less again. The elements
 * are the same bits: each 64-bit component is bitcast to or from two 32-bit elements. */

/* Four elements of type t from the 64-bit components first and first + 1 of v. */
static spv_id unpair(emitter *e, ir_type t, spv_id v, uint32_t first) {
    spv_builder *b = e->b;
    spv_id elem = storage_type(b, t), two = spv_type_vector(b, elem, 2), halves[2];
    for (uint32_t h = 0; h < 2; h++)
        halves[h] = spv_convert(b, SpvOpBitcast, two, spv_composite_extract(b, v, first + h));
    return spv_composite_construct(b, spv_type_vector(b, elem, 4), 2, halves);
}

/* Four values of type t as two 64-bit integers out[0], out[1]. */
static void pair(emitter *e, ir_type t, const spv_id *parts, spv_id *out) {
    spv_builder *b = e->b;
    spv_id two = spv_type_vector(b, storage_type(b, t), 2), u64 = spv_type_int(b, 64, false);
    for (uint32_t h = 0; h < 2; h++)
        out[h] =
            spv_convert(b, SpvOpBitcast, u64, spv_composite_construct(b, two, 2, parts + 2 * h));
}

/* Vector access i moves in accesses of vector_index's view: one (LOAD2, LOAD4/STORE4, or
 * paired an octet as four 64-bit integers), or two (an unpaired LOAD8/STORE8: two vec4). */
static uint32_t vector_accesses(const emitter *e, const ir_inst *i) {
    return ir_vector_width(i->op) == 8 && !e->paired ? 2 : 1;
}

/* The pointer to access `part` of vector access i's accesses, from the first's index. */
static spv_id vector_pointer(emitter *e, const ir_inst *i, spv_id index, uint32_t part) {
    spv_builder *b = e->b;
    bool octet = e->paired && ir_vector_width(i->op) == 8;
    if (part > 0)
        index = spv_binop(b, SpvOpIAdd, index,
                          spv_const_int(b, compute_type(b, e->k->index_type), part));
    if (i->op == IR_LOAD2 || i->op == IR_LOAD2R) /* a unit: a pair */
        return buffer_pointer(e, i->arg, e->pairs[i->arg], stored_size(i->type) * 2, index);
    /* a unit: 4 elements, 8 as an octet of four 64-bit integers */
    uint32_t unit = stored_size(i->type) * (octet ? 8 : 4);
    return buffer_pointer(e, i->arg, (octet ? e->octets : e->vectors)[i->arg], unit, index);
}

/* LOAD2, LOAD4: the vector in ids; LOAD8: elements 0..3 in ids, 4..7 in high. */
static void load_vector(emitter *e, uint32_t at, const ir_inst *i) {
    spv_builder *b = e->b;
    if (e->texels[i->arg] && i->op == IR_LOAD2) {
        e->ids[at] = load_texel_pair(e, i);
        return;
    }
    if (e->texels[i->arg] && i->op == IR_LOAD2R) {
        e->ids[at] = load_row_pair(e, i);
        return;
    }
    if (e->texels[i->arg]) { /* one texel, or two for an octet */
        spv_id texel = texel_index(e, vector_index(e, i, 4), 0);
        e->ids[at] = fetch(e, i->arg, i->type, texel);
        if (i->op == IR_LOAD8)
            e->high[at] =
                fetch(e, i->arg, i->type, spv_binop(b, SpvOpIAdd, texel, spv_const_i32(b, 1)));
        return;
    }
    uint32_t n = vector_accesses(e, i), width = ir_vector_width(i->op);
    spv_id index = vector_index(e, i, n == 1 ? width : 4), v[2];
    if (width == 2) { /* paired: one 64-bit integer, the two elements' bits */
        spv_id pair = spv_load(b, vector_pointer(e, i, index, 0));
        e->ids[at] = e->paired ? spv_convert(b, SpvOpBitcast,
                                             spv_type_vector(b, storage_type(b, i->type), 2), pair)
                               : pair;
        return;
    }
    for (uint32_t p = 0; p < n; p++)
        v[p] = spv_load(b, vector_pointer(e, i, index, p));
    e->ids[at] = e->paired ? unpair(e, i->type, v[0], 0) : v[0];
    if (width == 8)
        e->high[at] = e->paired ? unpair(e, i->type, v[0], 2) : v[1];
}

static void store_vector(emitter *e, const ir_inst *i) {
    spv_builder *b = e->b;
    uint32_t n = vector_accesses(e, i), width = ir_vector_width(i->op);
    spv_id parts[8], index = vector_index(e, i, n == 1 ? width : 4);
    for (uint32_t c = 0; c < width; c++)
        parts[c] = e->ids[i->src[1 + c]];
    if (e->paired) { /* one store of width / 2 64-bit integers */
        spv_id words[4];
        for (uint32_t q = 0; q < width / 4; q++)
            pair(e, i->type, parts + 4 * q, words + 2 * q);
        spv_id type = spv_type_vector(b, spv_type_int(b, 64, false), width / 2);
        spv_store(b, vector_pointer(e, i, index, 0),
                  spv_composite_construct(b, type, width / 2, words));
        return;
    }
    spv_id type = spv_type_vector(b, storage_type(b, i->type), 4);
    for (uint32_t p = 0; p < n; p++)
        spv_store(b, vector_pointer(e, i, index, p),
                  spv_composite_construct(b, type, 4, parts + 4 * p));
}

/* ---- control flow -------------------------------------------------------------------------- */

static void begin_if(emitter *e, uint32_t at, const ir_inst *i) {
    spv_builder *b = e->b;
    spv_id then_label = spv_label(b), merge = spv_label(b);
    e->loop_merge[at] = merge;
    spv_selection_merge(b, merge);
    spv_branch_cond(b, e->ids[i->src[0]], then_label, merge);
    spv_block(b, then_label);
}

/* RANGE: header (OpLoopMerge) -> check (counter < end) -> body ... -> continue -> header. */
static void begin_range(emitter *e, uint32_t at, const ir_inst *i) {
    spv_builder *b = e->b;
    spv_id type = compute_type(b, i->type);
    spv_id var = spv_local(b, type);
    spv_store(b, var, zero_of(b, i->type));
    spv_id header = spv_label(b), check = spv_label(b), body = spv_label(b);
    spv_id cont = spv_label(b), merge = spv_label(b);
    spv_branch(b, header);
    spv_block(b, header);
    spv_loop_merge(b, merge, cont);
    spv_branch(b, check);
    spv_block(b, check);
    spv_id c = spv_load(b, var);
    spv_id more = spv_binop(b, SpvOpSLessThan, c, e->ids[i->src[0]]);
    spv_branch_cond(b, more, body, merge);
    spv_block(b, body);
    e->ids[at] = c;
    e->counter[at] = var;
    e->loop_merge[at] = merge;
    e->loop_continue[at] = cont;
    e->loop_header[at] = header;
}

static void end_range(emitter *e, uint32_t open) {
    spv_builder *b = e->b;
    const ir_inst *r = &e->k->insts.data[open];
    spv_branch(b, e->loop_continue[open]);
    spv_block(b, e->loop_continue[open]);
    spv_id next = spv_binop(b, SpvOpIAdd, e->ids[open], one_of(b, r->type));
    spv_store(b, e->counter[open], next);
    spv_branch(b, e->loop_header[open]);
    spv_block(b, e->loop_merge[open]);
}

/* ---- the module ---------------------------------------------------------------------------- */

/* Buffers, the push-constant block, and the linear invocation index
 * gid = GlobalInvocationId.x + GlobalInvocationId.y * (NumWorkgroups.x * WorkgroupSize.x),
 * which lets the host cover more than 65535 workgroups with a 2-D grid. */
static void declare_interface(emitter *e) {
    spv_builder *b = e->b;
    const ir_kernel *k = e->k;
    for (uint32_t i = 0; i < k->buffer_count; i++) {
        const ir_buffer *buf = &k->buffers[i];
        spv_access access = buf->read && buf->written ? SPV_ACCESS_READ_WRITE
                            : buf->written            ? SPV_ACCESS_WRITE
                                                      : SPV_ACCESS_READ;
        uint32_t windows = e->windows ? e->windows[i] : 0;
        if (e->texels[i]) {
            e->texels[i] = spv_texel_buffer(b, 0, i);
            continue;
        }
        if (e->packed[i]) { /* words only; its stores' atomics read them too */
            spv_id u32 = spv_type_int(b, 32, false);
            access = buf->written ? SPV_ACCESS_READ_WRITE : access;
            e->buffers[i] = windows ? spv_storage_buffer_array(b, u32, 0, i, access, windows)
                                    : spv_storage_buffer(b, u32, 0, i, access);
            continue;
        }
        /* Vector access goes through a second variable on the same binding (Vulkan allows
         * several; the lowering never mixes both kinds on elements a kernel writes). */
        spv_id u64 = e->paired && (buf->vector || buf->pairs) ? spv_type_int(b, 64, false) : 0;
        spv_id types[4] = {storage_type(b, buf->type), 0, 0, 0};
        if (buf->pairs)
            types[3] = e->paired ? u64 : spv_type_vector(b, storage_type(b, buf->type), 2);
        if (buf->octets && e->paired)
            types[2] = spv_type_vector(b, u64, 4);
        if (buf->vector && e->paired)
            types[1] = spv_type_vector(b, u64, 2);
        else if (buf->vector)
            types[1] = spv_type_vector(b, storage_type(b, buf->type), 4);
        spv_id *vars[4] = {&e->buffers[i], &e->vectors[i], &e->octets[i], &e->pairs[i]};
        for (int v = 0; v < 4; v++) {
            if (types[v])
                *vars[v] = windows ? spv_storage_buffer_array(b, types[v], 0, i, access, windows)
                                   : spv_storage_buffer(b, types[v], 0, i, access);
        }
    }
    if (k->param_count > 0 && e->params_in_buffer) {
        e->param_buffer = spv_storage_buffer(b, compute_type(b, k->index_type), 0, k->buffer_count,
                                             SPV_ACCESS_READ);
    } else if (k->param_count > 0) {
        spv_id members[EMIT_MAX_PARAMS];
        for (uint32_t i = 0; i < k->param_count && i < EMIT_MAX_PARAMS; i++)
            members[i] = compute_type(b, k->index_type);
        e->push = spv_push_constants(b, k->param_count, members, NULL);
    }
}

/* The SPIR-V constant of an IR_CONST (an integer in compute form: wrapped to the IR type's
 * width). */
static spv_id const_id(spv_builder *b, const ir_inst *i) {
    if (i->type == IR_BOOL)
        return spv_const_bool(b, i->imm.i != 0);
    if (ir_type_is_float(i->type))
        return spv_const_float(b, compute_type(b, i->type), i->imm.f);
    return spv_const_int(b, compute_type(b, i->type),
                         i->type == IR_I8    ? (int8_t)i->imm.i
                         : i->type == IR_U8  ? (uint8_t)i->imm.i
                         : i->type == IR_I32 ? (int32_t)i->imm.i
                         : i->type == IR_U32 ? (uint32_t)i->imm.i
                                             : i->imm.i);
}

/* Whether IR value at may differ between the invocations of a dispatch: it depends on the
 * invocation's index or lane, or on memory (a variable's value counts as memory). div holds
 * the answer for every earlier value. */
static bool divergent(const ir_inst *insts, const bool *div, uint32_t at) {
    const ir_inst *i = &insts[at];
    switch (i->op) {
    case IR_GLOBAL_ID:
    case IR_LANE:
    case IR_LOAD:
    case IR_LOAD2:
    case IR_LOAD2R:
    case IR_LOAD4:
    case IR_LOAD8:
    case IR_GET:
        return true;
    default:
        break;
    }
    for (uint32_t s = 0; s < ir_op_operands(i->op); s++) {
        if (div[i->src[s]])
            return true;
    }
    return false;
}

/* emit_options.opaque_multipliers: on llvmpipe, loads inside a loop whose index is an
 * invocation's value times a compile-time constant (a row stride) run slower than with the
 * same product by a value the driver's compiler cannot see (a row sum over (4096, 4096):
 * about 5%, bench/README.md); in straight-line code (an elementwise tile) the constant is
 * better. Such a multiplication (an integer value that differs between invocations, times a
 * constant other than 0 and +-1, flowing into a loop) therefore multiplies by constant *
 * NumWorkgroups.z, a product made once at the top of the function: NumWorkgroups.z is 1 in
 * every dispatch the host records (runtime.c), so the values are the same, only hidden from
 * constant folding. Products of values every invocation shares (a loop counter's) keep their
 * constants. */
static void opaque_multipliers(emitter *e) {
    const ir_inst *insts = e->k->insts.data;
    for (uint32_t at = 0; at < e->k->insts.len; at++) {
        const ir_inst *i = &insts[at];
        if (i->op != IR_MUL || (i->type != IR_I32 && i->type != IR_I64) || !e->loop[at])
            continue;
        for (int s = 0; s < 2; s++) {
            uint32_t c = i->src[s];
            const ir_inst *ci = &insts[c];
            if (ci->op != IR_CONST || !e->div[i->src[1 - s]] || ci->imm.i == 0 || ci->imm.i == 1 ||
                ci->imm.i == -1)
                continue;
            if (!e->stand_in[c])
                e->stand_in[c] = hidden(e, i->type, const_id(e->b, ci));
            e->opaque_mul[at] = true;
        }
    }
}

/* A team kernel's invocation index within its workgroup is SubgroupId * share_lanes +
 * SubgroupLocalInvocationId, so that a team is a subgroup: the host makes team kernels only
 * for devices whose subgroups are share_lanes wide and full (a CPU's SIMD row; workgroups of a
 * multiple of it). */
static void compute_global_id(emitter *e) {
    spv_builder *b = e->b;
    spv_id u32 = spv_type_int(b, 32, false);
    bool grouped = e->k->group_lanes > 0; /* the item: the linear workgroup index */
    bool team = e->k->share_lanes > 0;
    spv_id gid = spv_load(
        b, spv_builtin(b, grouped || team ? SpvBuiltInWorkgroupId : SpvBuiltInGlobalInvocationId));
    spv_id groups = spv_load(b, spv_builtin(b, SpvBuiltInNumWorkgroups));
    e->groups_z = spv_composite_extract(b, groups, 2);
    spv_id x = spv_composite_extract(b, gid, 0), y = spv_composite_extract(b, gid, 1);
    spv_id width = spv_composite_extract(b, groups, 0);
    if (team) { /* x: the workgroup's first invocation plus the index within it */
        e->lane = spv_load(b, spv_builtin(b, SpvBuiltInSubgroupLocalInvocationId));
        spv_id sub = spv_load(b, spv_builtin(b, SpvBuiltInSubgroupId));
        spv_id within =
            spv_binop(b, SpvOpIAdd, e->lane,
                      spv_binop(b, SpvOpIMul, sub, spv_const_int(b, u32, e->k->share_lanes)));
        x = spv_binop(b, SpvOpIAdd, spv_binop(b, SpvOpIMul, x, e->wg_size_x), within);
    }
    if (!grouped)
        width = spv_binop(b, SpvOpIMul, width, e->wg_size_x);
    else
        e->lane = spv_load(b, spv_builtin(b, SpvBuiltInLocalInvocationIndex));
    spv_id linear;
    if (e->k->index_type == IR_I64) {
        spv_id x64 = u32_to_i64(b, x), y64 = u32_to_i64(b, y), w64 = u32_to_i64(b, width);
        linear = spv_binop(b, SpvOpIAdd, x64, spv_binop(b, SpvOpIMul, y64, w64));
    } else {
        linear = spv_binop(b, SpvOpIAdd, x, spv_binop(b, SpvOpIMul, y, width));
        linear = spv_convert(b, SpvOpBitcast, spv_type_int(b, 32, true), linear);
    }
    (void)u32;
    e->global_id = linear;
}

static void emit_inst(emitter *e, uint32_t at, uint32_t *open, uint32_t *depth) {
    spv_builder *b = e->b;
    const ir_inst *i = &e->k->insts.data[at];
    if (i->op == IR_IF || i->op == IR_ENDIF || i->op == IR_RANGE || i->op == IR_ENDRANGE)
        e->row_count = e->fetch_count = 0; /* a row's fetches serve its own block only */
    switch (i->op) {
    case IR_CONST:
        e->ids[at] = const_id(b, i);
        break;
    case IR_PARAM:
        if (e->params_in_buffer)
            e->ids[at] = spv_load(
                b, spv_buffer_element(b, e->param_buffer,
                                      spv_const_int(b, spv_type_int(b, 32, false), i->arg)));
        else
            e->ids[at] = spv_push_constant_load(b, e->push, i->arg);
        break;
    case IR_GLOBAL_ID:
        e->ids[at] = e->global_id;
        break;
    case IR_LANE:
        e->ids[at] = e->k->index_type == IR_I64
                         ? u32_to_i64(b, e->lane)
                         : spv_convert(b, SpvOpBitcast, spv_type_int(b, 32, true), e->lane);
        break;
    case IR_GROUP:
        e->ids[at] = group(e, i);
        break;
    case IR_SHARE:
        e->ids[at] = spv_subgroup_broadcast(b, e->ids[i->src[0]], i->arg);
        break;
    case IR_LOAD:
        e->ids[at] = load(e, i);
        break;
    case IR_STORE:
        store(e, i);
        break;
    case IR_LOAD2:
    case IR_LOAD2R:
    case IR_LOAD4:
    case IR_LOAD8:
        load_vector(e, at, i);
        break;
    case IR_EXTRACT: /* of a LOAD8, elements 4..7 from its high half */
        e->ids[at] = i->arg < 4 ? spv_composite_extract(b, e->ids[i->src[0]], i->arg)
                                : spv_composite_extract(b, e->high[i->src[0]], i->arg - 4);
        break;
    case IR_STORE4:
    case IR_STORE8:
        store_vector(e, i);
        break;
    case IR_IF:
        begin_if(e, at, i);
        open[(*depth)++] = at;
        break;
    case IR_RANGE:
        begin_range(e, at, i);
        open[(*depth)++] = at;
        break;
    case IR_ENDIF: {
        uint32_t o = open[--(*depth)];
        spv_branch(b, e->loop_merge[o]);
        spv_block(b, e->loop_merge[o]);
        break;
    }
    case IR_ENDRANGE:
        end_range(e, open[--(*depth)]);
        break;
    case IR_VAR:
        e->ids[at] = spv_local(b, compute_type(b, i->type));
        spv_store(b, e->ids[at], e->ids[i->src[0]]);
        break;
    case IR_SET:
        spv_store(b, e->ids[i->src[0]], e->ids[i->src[1]]);
        break;
    case IR_GET:
        e->ids[at] = spv_load(b, e->ids[i->src[0]]);
        break;
    default:
        e->ids[at] = alu(e, i);
        break;
    }
}

kiln_status emit_spirv(const ir_kernel *k, const emit_options *opt, emit_result *out,
                       base_error *err) {
    memset(out, 0, sizeof *out);
    kiln_status st = ir_verify(k, err);
    if (st != KILN_OK)
        return st;
    if (k->param_count > EMIT_MAX_PARAMS)
        return base_error_set(err, KILN_ERROR_LIMIT_EXCEEDED, "kernel has %u parameters (max %u)",
                              k->param_count, (unsigned)EMIT_MAX_PARAMS);
    for (uint32_t i = 0; i < k->buffer_count && i < IR_MAX_BUFFERS; i++) {
        if ((opt->texel_buffers >> i & 1) &&
            (ir_type_bits(k->buffers[i].type) != 32 || k->buffers[i].written || opt->windows[i]))
            return base_error_set(err, KILN_ERROR_INTERNAL,
                                  "buffer %u cannot be a texel buffer (written, windowed, or "
                                  "not of a 32-bit type)",
                                  i);
    }
    spv_builder_options bo = {
        .version = opt->spirv_version, .maintenance4 = opt->maintenance4, .alloc = &k->alloc};
    emitter e = {.k = k, .params_in_buffer = opt->params_in_buffer};
    st = spv_builder_create(&bo, &e.b, err);
    if (st != KILN_OK)
        return st;
    size_t n = k->insts.len ? k->insts.len : 1;
    spv_id *arrays = base_calloc(&k->alloc, 7 * n, sizeof *arrays);
    bool *div = base_calloc(&k->alloc, 3 * n, sizeof *div);
    if (!arrays || !div) {
        base_free(&k->alloc, arrays, arrays ? 7 * n * sizeof *arrays : 0);
        base_free(&k->alloc, div, div ? 3 * n * sizeof *div : 0);
        spv_builder_destroy(e.b);
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory to emit SPIR-V");
    }
    e.ids = arrays;
    e.loop_merge = arrays + n;
    e.loop_continue = arrays + 2 * n;
    e.loop_header = arrays + 3 * n;
    e.counter = arrays + 4 * n;
    e.stand_in = arrays + 5 * n;
    e.high = arrays + 6 * n;
    e.div = div;
    e.loop = div + n;
    e.opaque_mul = opt->opaque_multipliers ? div + 2 * n : NULL;
    e.paired = opt->paired_vectors;
    e.windows = opt->windows;
    e.window_log2 = opt->window_log2;
    e.float16 = opt->float16;
    /* 16-bit float storage only with Float16 as well: the spirv builder declares a 16-bit float
     * type with the Float16 capability, and the stores' OpFConvert needs the type. */
    for (uint32_t i = 0; i < k->buffer_count && i < IR_MAX_BUFFERS; i++) {
        ir_type t = k->buffers[i].type;
        e.texels[i] = opt->texel_buffers >> i & 1; /* the variable made by declare_interface */
        e.packed[i] = ((t == IR_U8 || t == IR_I8 || t == IR_BOOL) && !opt->storage_8bit) ||
                      (t == IR_F16 && !(opt->storage_16bit && opt->float16));
    }

    declare_interface(&e);
    spv_id fn = spv_function_begin(e.b, "main");
    if (opt->preserve_specials) {
        spv_capability(e.b, SpvCapabilitySignedZeroInfNanPreserve);
        if (opt->spirv_version < 0x10400)
            spv_extension(e.b, "SPV_KHR_float_controls");
        spv_execution_mode(e.b, fn, SpvExecutionModeSignedZeroInfNanPreserve, 1,
                           (const uint32_t[]){32});
    }
    spv_id wg[3];
    spv_workgroup_size_spec(e.b, fn, (const uint32_t[]){0, 1, 2},
                            (const uint32_t[]){k->group_lanes        ? k->group_lanes
                                               : opt->workgroup_size ? opt->workgroup_size
                                                                     : 64,
                                               1, 1},
                            wg);
    e.wg_size_x = wg[0];
    compute_global_id(&e);
    uint32_t open[64], depth = 0;
    for (uint32_t at = 0, d = 0; at < k->insts.len; at++) {
        const ir_inst *i = &k->insts.data[at];
        e.div[at] = divergent(k->insts.data, e.div, at);
        d -= i->op == IR_ENDRANGE && d > 0;
        e.loop[at] = d > 0;
        d += i->op == IR_RANGE;
    }
    for (uint32_t at = (uint32_t)k->insts.len; at-- > 0;) { /* what flows into a loop */
        const ir_inst *i = &k->insts.data[at];
        for (uint32_t s = 0; e.loop[at] && s < ir_op_operands(i->op); s++)
            e.loop[i->src[s]] = true;
    }
    if (e.opaque_mul)
        opaque_multipliers(&e);
    for (uint32_t at = 0; at < k->insts.len; at++) { /* row pairs' buffers: their last texel */
        const ir_inst *i = &k->insts.data[at];
        if (i->op == IR_LOAD2R && e.texels[i->arg] && !e.texel_last[i->arg])
            e.texel_last[i->arg] = spv_binop(e.b, SpvOpISub, spv_texel_count(e.b, e.texels[i->arg]),
                                             spv_const_int(e.b, spv_type_int(e.b, 32, true), 1));
    }
    for (uint32_t at = 0; at < k->insts.len && depth < 64; at++)
        emit_inst(&e, at, open, &depth);
    spv_return(e.b);
    spv_function_end(e.b);

    const uint32_t *words;
    size_t count;
    st = spv_builder_finish(e.b, &words, &count, err);
    if (st == KILN_OK) {
        out->words = base_malloc(&k->alloc, count * sizeof *words);
        if (!out->words) {
            st = base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for SPIR-V");
        } else {
            memcpy(out->words, words, count * sizeof *words);
            out->word_count = count;
            uint32_t param_bytes = k->param_count * (k->index_type == IR_I64 ? 8u : 4u);
            out->push_constant_size = opt->params_in_buffer ? 0 : param_bytes;
            out->binding_count =
                k->buffer_count + (opt->params_in_buffer && k->param_count > 0 ? 1u : 0u);
            for (uint32_t i = 0; i < out->binding_count; i++)
                out->descriptor_counts[i] =
                    i < k->buffer_count && opt->windows[i] ? opt->windows[i] : 1;
            out->texel_bindings = opt->texel_buffers & ((1u << k->buffer_count) - 1u);
        }
    }
    base_free(&k->alloc, arrays, 7 * n * sizeof *arrays);
    base_free(&k->alloc, div, 3 * n * sizeof *div);
    spv_builder_destroy(e.b);
    return st;
}

void emit_result_free(const base_allocator *alloc, emit_result *r) {
    base_free(alloc, r->words, r->word_count * sizeof *r->words);
    memset(r, 0, sizeof *r);
}
