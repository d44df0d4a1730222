/* engine/ kernel IR: the linear form every kernel is lowered to before it is emitted as SPIR-V
 * (emit.c) or executed by the reference interpreter (interp.c).
 *
 * A kernel is one list of instructions executed once per invocation, invocation g in
 * [0, global_size). Each instruction defines at most one value, named by its index in the
 * list. Values are typed with an IR type (below). Control flow is structured and nested:
 *
 *     IF cond ... ENDIF                 body runs when cond (bool) is true
 *     RANGE end ... ENDRANGE            counter value in [0, end), end an index-typed value
 *
 * A group kernel (group_lanes > 0) runs each item g in [0, global_size) on group_lanes lanes:
 * GLOBAL_ID is the item, LANE the lane, and GROUP combines a value over the item's lanes (a tree:
 * lane l takes op(x[l], x[l + s]) for s = lanes / 2, ..., 1) and gives the result to every lane.
 * GROUP stands outside every RANGE, and every IF around it must hold alike for all lanes.
 *
 * A team kernel (share_lanes > 0) runs its invocations in teams of share_lanes consecutive
 * items (a subgroup on the device: item g is lane g % share_lanes of team g / share_lanes, and
 * LANE is that lane); SHARE gives every lane the value src0 has in lane arg of its team, so
 * that one load serves the team (a tile row of matmul's left operand). A SHARE stands outside
 * every IF, and global_size is a whole number of teams.
 *
 * A value may be used only after its definition and, when defined inside a body, only inside
 * that body. Mutable state lives in variables: VAR defines one with an initial value, SET
 * assigns it, GET reads it (a reduction's accumulator). Arithmetic rounds to its type after
 * every instruction: f16 values are computed in f32 and rounded to f16, i8/u8 values are computed
 * in 32 bits and wrapped, so the interpreter and the device agree bit for bit on integers and on
 * rounding points for floats.
 */
#ifndef KILN_ENGINE_IR_H
#define KILN_ENGINE_IR_H

#include "base.h"

/* Value types of the IR. Storage buffers hold the same scalar types (bool is stored as u8). */
typedef enum ir_type {
    IR_BOOL,
    IR_I8,
    IR_U8,
    IR_I32,
    IR_U32,
    IR_I64,
    IR_F16,
    IR_F32,
    IR_TYPE_COUNT_
} ir_type;

bool ir_type_is_float(ir_type t);
bool ir_type_is_signed(ir_type t); /* signed integers (floats: false) */
uint32_t ir_type_bits(ir_type t);  /* storage width: bool 8 */
const char *ir_type_name(ir_type t);

/* The op table: X(name, operands, kind). kinds: LEAF (no operand), ALU (arithmetic on operand
 * values, result type given), CONTROL, MEMORY. */
#define IR_OPS(X)                                                                                  \
    X(CONST, 0, LEAF)     /* imm.i or imm.f */                                                     \
    X(PARAM, 0, LEAF)     /* push-constant parameter number arg (an index value) */                \
    X(GLOBAL_ID, 0, LEAF) /* the invocation's linear index (index type) */                         \
    X(LOAD, 1, MEMORY)    /* buffer arg, element src0 */                                           \
    X(STORE, 2, MEMORY)   /* buffer arg, element src0, value src1 */                               \
    X(ADD, 2, ALU)                                                                                 \
    X(SUB, 2, ALU)                                                                                 \
    X(MUL, 2, ALU)                                                                                 \
    X(DIV, 2, ALU) /* floats: division; integers: floor division (0 divisor: 0) */                 \
    X(MOD, 2, ALU) /* integers: floor modulo (0 divisor: 0); floats: fmod-like C % */              \
    X(MAX, 2, ALU)                                                                                 \
    X(MIN, 2, ALU)                                                                                 \
    X(POW, 2, ALU) /* floats */                                                                    \
    X(LT, 2, ALU)  /* result bool */                                                               \
    X(LE, 2, ALU)                                                                                  \
    X(EQ, 2, ALU)                                                                                  \
    X(NE, 2, ALU)                                                                                  \
    X(AND, 2, ALU) /* bool and integers (bitwise) */                                               \
    X(OR, 2, ALU)                                                                                  \
    X(XOR, 2, ALU)                                                                                 \
    X(NOT, 1, ALU) /* bool */                                                                      \
    X(NEG, 1, ALU)                                                                                 \
    X(ABS, 1, ALU)                                                                                 \
    X(EXP, 1, ALU) /* floats from here to TANH */                                                  \
    X(LOG, 1, ALU)                                                                                 \
    X(SQRT, 1, ALU)                                                                                \
    X(RSQRT, 1, ALU)                                                                               \
    X(SIN, 1, ALU)                                                                                 \
    X(COS, 1, ALU)                                                                                 \
    X(TANH, 1, ALU)                                                                                \
    X(CAST, 1, ALU)  /* to the type: float->int truncates (out of range: kiln.h), ints wrap */     \
    X(WHERE, 3, ALU) /* src0 (bool) ? src1 : src2 */                                               \
    X(IF, 1, CONTROL)                                                                              \
    X(ENDIF, 0, CONTROL)                                                                           \
    X(RANGE, 1, CONTROL) /* counter in [0, src0) */                                                \
    X(ENDRANGE, 0, CONTROL)                                                                        \
    X(VAR, 1, MEMORY)    /* a variable initialised to src0 */                                      \
    X(SET, 2, MEMORY)    /* variable src0 = src1 */                                                \
    X(GET, 1, MEMORY)    /* the value of variable src0 */                                          \
    X(LANE, 0, LEAF)     /* group and team kernels: the lane in [0, group_lanes/share_lanes) */    \
    X(GROUP, 1, ALU)     /* group kernels: src0 combined with op arg over the item's lanes */      \
    X(LOAD4, 1, MEMORY)  /* buffer arg, elements src0 .. src0 + 3 (src0 % 4 == 0): a vector */     \
    X(EXTRACT, 1, ALU)   /* element arg of the LOAD4/LOAD8 src0 (a run of them follows it) */      \
    X(STORE4, 5, MEMORY) /* buffer arg, elements src0 .. src0 + 3 (src0 % 4 == 0) = src1..src4 */  \
    X(SHARE, 1, ALU)     /* team kernels: src0 as lane arg of the team computed it */              \
    X(LOAD8, 1, MEMORY)  /* as LOAD4, elements src0 .. src0 + 7 (src0 % 8 == 0) */                 \
    X(STORE8, 9, MEMORY) /* as STORE4, elements src0 .. src0 + 7 (src0 % 8 == 0) = src1..src8 */   \
    X(MULHI, 2, ALU)     /* u32: the high 32 bits of the 64-bit product (MUL gives the low) */     \
    X(LOAD2, 1, MEMORY)  /* as LOAD4, elements src0 and src0 + 1 (src0 % 2 == 0): a pair */        \
    X(LOAD2R, 2, MEMORY) /* as LOAD2, of a row: src1 (an index) + imm.i is src0 where the pair */  \
                         /* is valid; else (a masked pair, src0 its safe index) its value is */    \
                         /* unused. A texel buffer's pairs of one src1 share their fetches */

typedef enum ir_op {
#define X(name, n, kind) IR_##name,
    IR_OPS(X)
#undef X
        IR_OP_COUNT_
} ir_op;

const char *ir_op_name(ir_op op);
uint32_t ir_op_operands(ir_op op);

typedef uint32_t ir_value; /* an instruction index */
enum { IR_NONE = UINT32_MAX, IR_MAX_BUFFERS = 16, IR_MAX_OPERANDS = 9 };

typedef struct ir_inst {
    ir_op op;
    ir_type type; /* the result type (LOAD: the buffer's; STORE/control: unused) */
    ir_value src[IR_MAX_OPERANDS];
    uint32_t arg; /* buffer or parameter number */
    union {
        int64_t i;
        double f;
    } imm;
} ir_inst;

typedef struct ir_buffer {
    ir_type type;
    bool read, written;
    bool vector; /* accessed by LOAD4/STORE4 or LOAD8/STORE8 too (32-bit types only) */
    bool octets; /* accessed by LOAD8/STORE8 */
    bool pairs;  /* read by LOAD2 */
} ir_buffer;

/* A kernel: instructions plus its interface. */
typedef struct ir_kernel {
    base_allocator alloc;
    BASE_VEC(ir_inst) insts;
    ir_type index_type; /* I32 or I64: GLOBAL_ID, PARAM, RANGE counters */
    uint32_t buffer_count;
    ir_buffer buffers[IR_MAX_BUFFERS];
    uint32_t param_count; /* index-typed push-constant parameters */
    uint32_t group_lanes; /* 0: one invocation per item; else lanes per item (a power of two) */
    uint32_t share_lanes; /* 0: no teams; else items per team (a power of two; not with groups) */
    kiln_status status;   /* first builder error (sticky) */
} ir_kernel;

void ir_kernel_init(ir_kernel *k, const base_allocator *alloc, ir_type index_type);
void ir_kernel_finish(ir_kernel *k);
/* Declares buffer slot number k->buffer_count; returns it. */
uint32_t ir_buffer_add(ir_kernel *k, ir_type type);

/* Builders: append one instruction and return its value (IR_NONE after an error, which is
 * sticky in k->status). */
ir_value ir_const_i(ir_kernel *k, ir_type type, int64_t value);
ir_value ir_const_f(ir_kernel *k, ir_type type, double value);
ir_value ir_param(ir_kernel *k, uint32_t number);
ir_value ir_global_id(ir_kernel *k);
/* Group kernels (k->group_lanes set before): the lane, and value combined over the lanes with
 * op (ADD, MUL, MAX or MIN; f32, i32 or u32 values). Team kernels (k->share_lanes set before):
 * the lane, and value as lane `lane` of the team computed it. */
ir_value ir_lane(ir_kernel *k);
ir_value ir_group(ir_kernel *k, ir_op op, ir_value value);
ir_value ir_share(ir_kernel *k, ir_value value, uint32_t lane);
ir_value ir_load(ir_kernel *k, uint32_t buffer, ir_value index);
void ir_store(ir_kernel *k, uint32_t buffer, ir_value index, ir_value value);
/* Vector access to four (or eight) elements from index, a multiple of 4 (8), of a buffer of a
 * 32-bit type (ir_vector_type): a LOAD4 (LOAD8) followed at once by the EXTRACTs of the
 * elements wanted, or one STORE4 (STORE8); a pair of elements (LOAD2, from an even index) is
 * loaded only. Of a buffer both read and written, elements are accessed one way only.
 * ir_vector_width: 2, 4, 8, or 0 for other ops. */
bool ir_vector_type(ir_type t);
uint32_t ir_vector_width(ir_op op);
bool ir_is_vector_load(ir_op op);
ir_value ir_load_vector(ir_kernel *k, uint32_t buffer, ir_value index, uint32_t width);
/* A pair of a row (LOAD2R): the pair at index, which is row + offset wherever it is valid (a
 * masked pair's index is a safe one instead); the pairs of one row value may share a texel
 * buffer's fetches (emit.c load_row_pair). */
ir_value ir_load_row_pair(ir_kernel *k, uint32_t buffer, ir_value index, ir_value row,
                          int64_t offset);
ir_value ir_extract(ir_kernel *k, ir_value vector, uint32_t element);
void ir_store_vector(ir_kernel *k, uint32_t buffer, ir_value index, const ir_value *values,
                     uint32_t width);
/* ALU ops; type is the result type (comparisons: IR_BOOL). */
ir_value ir_alu(ir_kernel *k, ir_op op, ir_type type, ir_value a, ir_value b, ir_value c);
ir_value ir_cast(ir_kernel *k, ir_type type, ir_value a);
ir_value ir_if(ir_kernel *k, ir_value cond);
void ir_endif(ir_kernel *k);
ir_value ir_range(ir_kernel *k, ir_value end);
void ir_endrange(ir_kernel *k);
ir_value ir_var(ir_kernel *k, ir_value init);
void ir_set(ir_kernel *k, ir_value var, ir_value value);
ir_value ir_get(ir_kernel *k, ir_value var);

/* Moves the loads of the buffers in the mask `buffers` (read-only ones), with the pure
 * instructions computing their operands and the EXTRACTs of vector loads, to the start of each
 * straight run of a RANGE's body, keeping their order; nothing else moves. Values do not
 * change. For devices that read texels: lavapipe's fetches are calls (docs/lavapipe.md). */
kiln_status ir_hoist_loads(ir_kernel *k, uint32_t buffers);

/* Checks the structure (nesting, operand order and scope, types, buffer numbers). */
kiln_status ir_verify(const ir_kernel *k, base_error *err);
/* The loop passes one invocation runs (a RANGE of n iterations makes n + 1, each time its
 * body is reached; bodies of IFs counted as taken), when every RANGE's end is a constant
 * expression (integer CONST and arithmetic of such): lavapipe leaves loops after 65535 passes
 * in all (lower.c, the loop budget). false when some end is not constant (or no memory). */
bool ir_loop_passes(const ir_kernel *k, uint64_t *passes);
/* A readable listing, one instruction per line (KILN_DEBUG=3). snprintf contract. */
size_t ir_dump(const ir_kernel *k, char *buf, size_t cap);
/* A structural hash of the kernel (instructions and interface). */
uint64_t ir_hash(const ir_kernel *k);

#endif
