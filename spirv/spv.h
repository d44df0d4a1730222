/* spirv/: a SPIR-V module builder (prefix spv_). Calls in, words out; it knows nothing of
 * tensors or Vulkan handles.
 *
 * The shape follows Mesa zink's spirv_builder.c: one word buffer per section of the module's
 * logical layout (SPIR-V 1.6, section 2.4), ids allocated by the builder, types and scalar
 * constants interned (the spec forbids duplicate non-aggregate types), capabilities and
 * extensions added when a type or an instruction needs them.
 *
 * Usage (c[i] = a[i] + b[i] for i < n, n a push constant):
 *
 *     spv_builder *b;
 *     spv_builder_create(&(spv_builder_options){.version = caps->spirv_version}, &b, &err);
 *     spv_id f32 = spv_type_float(b, 32), u32 = spv_type_int(b, 32, false);
 *     spv_id a = spv_storage_buffer(b, f32, 0, 0, SPV_ACCESS_READ);
 *     ...
 *     spv_id pc = spv_push_constants(b, 1, &u32, NULL);
 *     spv_id fn = spv_function_begin(b, "main");
 *     spv_workgroup_size_spec(b, fn, (uint32_t[]){0, 1, 2}, (uint32_t[]){64, 1, 1}, NULL);
 *     spv_id gid = spv_load(b, spv_builtin(b, SpvBuiltInGlobalInvocationId));
 *     ...
 *     spv_return(b);
 *     spv_function_end(b);
 *     const uint32_t *words; size_t count;
 *     if (spv_builder_finish(b, &words, &count, &err) == KILN_OK) ... use words ...
 *     spv_builder_destroy(b);   // frees the words
 *
 * Errors are sticky (SQLite-style): the first misuse (an operand of the wrong type, an
 * instruction outside a block, an unterminated block, an id 0, out of range or from another
 * builder, running out of memory) is recorded; every later call returns 0 and does nothing, so a
 * caller checks once, at spv_builder_finish, which reports the first error's status and message.
 * No input aborts the process.
 *
 * Ids: a spv_id names one result of one builder. The builder's serial number is kept in the high
 * bits (the words carry only the low bits), so an id from another builder is caught (unless the
 * serials of the two builders are equal modulo 4095). 0 is never a valid id.
 *
 * Capabilities: Shader always; Int8/Int16/Int64/Float16/Float64 when such a type is created (so
 * the device needs shaderInt8 etc. to run a module that declares them); StorageBuffer8BitAccess
 * and StorageBuffer16BitAccess (with SPV_KHR_8bit_storage below SPIR-V 1.5) when a storage
 * buffer holds 8/16-bit values, StoragePushConstant8/16 likewise for push constants;
 * GroupNonUniform* for the subgroup instructions and built-ins.
 *
 * Thread-safety: a builder is used by one thread at a time; distinct builders are independent. */
#ifndef KILN_SPIRV_SPV_H
#define KILN_SPIRV_SPV_H

#include "base.h"

#include <spirv/unified1/GLSL.std.450.h>
#include <spirv/unified1/spirv.h>

typedef struct spv_builder spv_builder;
typedef uint32_t spv_id; /* 0: none (a failed call) */

/* ---- the builder ----------------------------------------------------------------------- */

typedef struct spv_builder_options {
    /* The SPIR-V version to write, 0x10300 (Vulkan 1.1) .. 0x10600 (Vulkan 1.3); 0: 0x10300.
     * Take it from vkd_caps.spirv_version. */
    uint32_t version;
    /* VK_KHR_maintenance4 (or Vulkan 1.3) is enabled: LocalSizeId may be used below 1.6. */
    bool maintenance4;
    const base_allocator *alloc; /* NULL: the default allocator */
} spv_builder_options;

/* Statuses: KILN_ERROR_INVALID_ARGUMENT (version out of range, out NULL),
 * KILN_ERROR_OUT_OF_HOST_MEMORY. *out is NULL on failure. */
kiln_status spv_builder_create(const spv_builder_options *options, spv_builder **out,
                               base_error *err);
void spv_builder_destroy(spv_builder *b); /* NULL is a no-op; frees the finished words too */

/* Assembles the module. On KILN_OK *words points to *word_count words owned by the builder,
 * valid until spv_builder_destroy. Otherwise returns the first recorded error (copied into err)
 * and sets *words = NULL, *word_count = 0:
 *   KILN_ERROR_INVALID_ARGUMENT   a misused call: an operand of the wrong type, an id 0, out of
 *                                 range or from another builder, an instruction outside a block
 *   KILN_ERROR_INVALID_SPIRV      a malformed module: an unterminated block, a label branched to
 *                                 that begins no block, an unset OpPhi operand, an instruction
 *                                 between a merge and its branch, a function not ended, no entry
 *                                 point, an entry point without a workgroup size
 *   KILN_ERROR_OVERFLOW           a constant that does not fit its type
 *   KILN_ERROR_LIMIT_EXCEEDED     more than 2^20 - 1 ids, an instruction of 65535+ words
 *   KILN_ERROR_OUT_OF_HOST_MEMORY the allocator failed
 * The builder is not checked against a device's features (see Capabilities above), and a module
 * it accepts can still be rejected by spirv-val for rules it does not check: validate in tests.
 * Finishing twice returns the same words; calls after finishing do not change them. */
kiln_status spv_builder_finish(spv_builder *b, const uint32_t **words, size_t *word_count,
                               base_error *err);

/* The first error recorded so far (KILN_OK when none) and its message. */
kiln_status spv_builder_status(const spv_builder *b);
const char *spv_builder_message(const spv_builder *b);
uint32_t spv_builder_version(const spv_builder *b);

/* Adds a capability or an extension explicitly (the builder adds the ones it knows are needed
 * by itself). */
void spv_capability(spv_builder *b, SpvCapability cap);
void spv_extension(spv_builder *b, const char *name);
/* OpName / OpMemberName (debug names). */
void spv_name(spv_builder *b, spv_id id, const char *name);
void spv_member_name(spv_builder *b, spv_id struct_type, uint32_t member, const char *name);
/* OpDecorate / OpMemberDecorate with up to 2 literal operands (count says how many). */
void spv_decorate(spv_builder *b, spv_id target, SpvDecoration decoration, uint32_t count,
                  uint32_t literal0, uint32_t literal1);
void spv_member_decorate(spv_builder *b, spv_id struct_type, uint32_t member,
                         SpvDecoration decoration, uint32_t count, uint32_t literal);

/* ---- types (interned: the same arguments give the same id) ------------------------------ */

spv_id spv_type_void(spv_builder *b);
spv_id spv_type_bool(spv_builder *b);
spv_id spv_type_int(spv_builder *b, uint32_t width, bool is_signed);      /* 8, 16, 32, 64 */
spv_id spv_type_float(spv_builder *b, uint32_t width);                    /* 16, 32, 64 */
spv_id spv_type_vector(spv_builder *b, spv_id component, uint32_t count); /* 2, 3, 4 */
/* A sized array; stride 0: no ArrayStride decoration (workgroup and function memory),
 * otherwise decorated ArrayStride stride (buffers). */
spv_id spv_type_array(spv_builder *b, spv_id element, uint32_t length, uint32_t stride);
spv_id spv_type_runtime_array(spv_builder *b, spv_id element, uint32_t stride);
spv_id spv_type_pointer(spv_builder *b, SpvStorageClass storage, spv_id pointee);
/* A struct (not interned: each call makes a new type). offsets != NULL: decorate each member
 * with Offset; block: decorate the struct Block. */
spv_id spv_type_struct(spv_builder *b, uint32_t count, const spv_id *members,
                       const uint32_t *offsets, bool block);

/* std430 size and alignment in bytes of a scalar or vector type (vec3 aligns to 16); 0 for
 * other types. */
uint32_t spv_type_size(const spv_builder *b, spv_id type);
uint32_t spv_type_align(const spv_builder *b, spv_id type);
/* The type of a value (constant, variable, instruction result); 0 for non-values. */
spv_id spv_type_of(const spv_builder *b, spv_id value);

/* ---- constants ------------------------------------------------------------------------- */

spv_id spv_const_bool(spv_builder *b, bool value);
/* type: an integer type; value must fit its width read as signed or as unsigned (-1 and 255
 * are both valid 8-bit values); a 64-bit unsigned value above INT64_MAX is passed as its bits. */
spv_id spv_const_int(spv_builder *b, spv_id type, int64_t value);
spv_id spv_const_u32(spv_builder *b, uint32_t value);              /* shorthand: 32-bit unsigned */
spv_id spv_const_i32(spv_builder *b, int32_t value);               /* shorthand: 32-bit signed */
spv_id spv_const_float(spv_builder *b, spv_id type, double value); /* f16 rounds to nearest */
spv_id spv_const_f32(spv_builder *b, float value);
spv_id spv_const_composite(spv_builder *b, spv_id type, uint32_t count, const spv_id *parts);
spv_id spv_const_null(spv_builder *b, spv_id type);

/* Specialization constants, decorated SpecId spec_id (not interned). */
spv_id spv_spec_bool(spv_builder *b, uint32_t spec_id, bool value);
spv_id spv_spec_int(spv_builder *b, spv_id type, uint32_t spec_id, int64_t value);
spv_id spv_spec_float(spv_builder *b, spv_id type, uint32_t spec_id, double value);

/* ---- global resources ------------------------------------------------------------------- */

typedef enum spv_access {
    SPV_ACCESS_READ = 1,  /* decorated NonWritable when not also written */
    SPV_ACCESS_WRITE = 2, /* decorated NonReadable when not also read */
    SPV_ACCESS_READ_WRITE = 3,
} spv_access;

/* A storage buffer `set, binding` holding a runtime array of element (a scalar or vector; the
 * ArrayStride is its std430 size): a Block struct with one member at offset 0. Returns the
 * variable (a StorageBuffer pointer); index it with spv_buffer_element. */
spv_id spv_storage_buffer(spv_builder *b, spv_id element, uint32_t set, uint32_t binding,
                          spv_access access);
/* An array of count such storage buffers on one binding (a descriptor array; the module
 * declares StorageBufferArrayDynamicIndexing). */
spv_id spv_storage_buffer_array(spv_builder *b, spv_id element, uint32_t set, uint32_t binding,
                                spv_access access, uint32_t count);
/* A uniform texel buffer `set, binding` of 32-bit unsigned texels (GLSL's usamplerBuffer; the
 * module declares SampledBuffer). Returns the variable; read it with spv_texel_fetch. */
spv_id spv_texel_buffer(spv_builder *b, uint32_t set, uint32_t binding);
/* Texel `index` (a 32-bit integer value) of texel buffer variable buffer: a 4-vector of u32
 * (the components the view's format does not have read as the format defines). */
spv_id spv_texel_fetch(spv_builder *b, spv_id buffer, spv_id index);
/* The texels of texel buffer `buffer` (OpImageQuerySize, an i32; declares ImageQuery). */
spv_id spv_texel_count(spv_builder *b, spv_id buffer);
/* Component index (an integer value) of vector: OpVectorExtractDynamic. */
spv_id spv_vector_extract_dynamic(spv_builder *b, spv_id vector, spv_id index);
/* A pointer to element index (an integer value) of a storage buffer made above. */
spv_id spv_buffer_element(spv_builder *b, spv_id buffer, spv_id index);
/* A pointer to element index of buffer `which` (an integer value) of an array made above. */
spv_id spv_buffer_array_element(spv_builder *b, spv_id buffers, spv_id which, spv_id index);

/* The push-constant block: count members of scalar/vector types at offsets (NULL: std430
 * offsets). Returns the variable; read member i with spv_push_constant_load. */
spv_id spv_push_constants(spv_builder *b, uint32_t count, const spv_id *members,
                          const uint32_t *offsets);
spv_id spv_push_constant_load(spv_builder *b, spv_id block, uint32_t member);

/* A module-scope variable (Workgroup, Private, ...; not Function: see spv_local). */
spv_id spv_variable(spv_builder *b, SpvStorageClass storage, spv_id type);

/* The Input variable of a compute built-in (one per module): GlobalInvocationId,
 * LocalInvocationId, WorkgroupId, NumWorkgroups (uvec3), LocalInvocationIndex,
 * SubgroupLocalInvocationId, SubgroupSize, NumSubgroups, SubgroupId (uint). Load it with
 * spv_load. */
spv_id spv_builtin(spv_builder *b, SpvBuiltIn builtin);

/* ---- functions and entry points --------------------------------------------------------- */

/* Begins `void name()` and its first block, and declares it a GLCompute entry point named name
 * (NULL: a plain function, not an entry point). Returns the function id. */
spv_id spv_function_begin(spv_builder *b, const char *name);
/* Ends the current function; an unterminated block or an unset OpPhi operand is an error. */
void spv_function_end(spv_builder *b);
/* A Function-storage variable of the current function (placed in its first block). */
spv_id spv_local(spv_builder *b, spv_id type);

/* OpExecutionMode of an entry point with up to three literal operands (for example
 * SignedZeroInfNanPreserve 32, with its capability and, below SPIR-V 1.4, the extension
 * SPV_KHR_float_controls declared by the caller). */
void spv_execution_mode(spv_builder *b, spv_id function, SpvExecutionMode mode,
                        uint32_t literal_count, const uint32_t *literals);
/* Fixed workgroup size (ExecutionMode LocalSize). */
void spv_workgroup_size(spv_builder *b, spv_id function, const uint32_t size[3]);
/* Workgroup size from three 32-bit specialization constants with SpecIds spec_ids and default
 * sizes defaults: ExecutionModeId LocalSizeId when the target is 1.6 or maintenance4 was given,
 * otherwise a WorkgroupSize built-in composite of the spec constants (plus LocalSize with the
 * defaults). ids (may be NULL) receives the three spec constants, usable as u32 values. */
void spv_workgroup_size_spec(spv_builder *b, spv_id function, const uint32_t spec_ids[3],
                             const uint32_t defaults[3], spv_id ids[3]);

/* ---- blocks and structured control flow ------------------------------------------------- */

spv_id spv_label(spv_builder *b);               /* a new label id for a block to come */
void spv_block(spv_builder *b, spv_id label);   /* starts a block; the previous one must be ended */
spv_id spv_current_label(const spv_builder *b); /* 0 outside a block */
void spv_branch(spv_builder *b, spv_id target);
void spv_branch_cond(spv_builder *b, spv_id condition, spv_id if_true, spv_id if_false);
void spv_selection_merge(spv_builder *b, spv_id merge);
void spv_loop_merge(spv_builder *b, spv_id merge, spv_id continue_target);
void spv_return(spv_builder *b);
/* OpPhi with incoming_count operand pairs, set later with spv_phi_set (a loop's back edge is
 * known only after the body is built). */
spv_id spv_phi(spv_builder *b, spv_id type, uint32_t incoming_count);
void spv_phi_set(spv_builder *b, spv_id phi, uint32_t index, spv_id value, spv_id parent);

/* ---- instructions ----------------------------------------------------------------------- */
/* Each checks its operands' types and returns the result id (0 after an error). */

/* Binary ops: OpIAdd ISub IMul UDiv SDiv UMod SRem SMod FAdd FSub FMul FDiv FRem FMod,
 * ShiftLeftLogical ShiftRightLogical ShiftRightArithmetic BitwiseAnd/Or/Xor,
 * LogicalAnd/Or/Equal/NotEqual, and the comparisons IEqual INotEqual U/SLessThan(Equal)
 * U/SGreaterThan(Equal) FOrd*, FUnord* (their result type is bool, or a bool vector of the
 * operands' size). Operands of another type class, or of types unlike each other, are errors. */
spv_id spv_binop(spv_builder *b, SpvOp op, spv_id x, spv_id y);
/* Unary ops: OpSNegate FNegate Not LogicalNot. */
spv_id spv_unop(spv_builder *b, SpvOp op, spv_id x);
/* Conversions to type: OpConvertFToU ConvertFToS ConvertSToF ConvertUToF UConvert SConvert
 * FConvert Bitcast. */
spv_id spv_convert(spv_builder *b, SpvOp op, spv_id type, spv_id x);
spv_id spv_select(spv_builder *b, spv_id condition, spv_id if_true, spv_id if_false);
/* GLSL.std.450 instruction inst on count arguments; result type = type. For the arithmetic
 * instructions (FAbs .. FMix, Fma, Sqrt, Exp2, Log2, Sin, Cos, ...) every argument must have
 * the result type. */
spv_id spv_glsl(spv_builder *b, enum GLSLstd450 inst, spv_id type, uint32_t count,
                const spv_id *args);
spv_id spv_composite_extract(spv_builder *b, spv_id composite, uint32_t index);
spv_id spv_composite_construct(spv_builder *b, spv_id type, uint32_t count, const spv_id *parts);
/* OpUMulExtended or OpSMulExtended (op) of two integers of one type: a value of struct_type, a
 * struct of two members of that type (member 0: the product's low half, member 1: its high
 * half). */
spv_id spv_mul_extended(spv_builder *b, SpvOp op, spv_id struct_type, spv_id x, spv_id y);

/* Memory. The result type of a load and of an access chain is derived from the pointer. */
spv_id spv_access_chain(spv_builder *b, spv_id base, uint32_t count, const spv_id *indices);
spv_id spv_load(spv_builder *b, spv_id pointer);
void spv_store(spv_builder *b, spv_id pointer, spv_id value);

/* Barriers: scopes and semantics are given as enums, the builder makes the constants. */
void spv_control_barrier(spv_builder *b, SpvScope execution, SpvScope memory, uint32_t semantics);
void spv_memory_barrier(spv_builder *b, SpvScope memory, uint32_t semantics);
/* The usual workgroup barrier: Workgroup scopes, AcquireRelease | WorkgroupMemory. */
void spv_workgroup_barrier(spv_builder *b);

/* Atomics on an integer pointer: OpAtomicIAdd ISub SMin UMin SMax UMax And Or Xor Exchange
 * (scope Device, relaxed semantics unless given). Returns the old value. */
spv_id spv_atomic(spv_builder *b, SpvOp op, spv_id pointer, SpvScope scope, uint32_t semantics,
                  spv_id value);
spv_id spv_atomic_compare_exchange(spv_builder *b, spv_id pointer, SpvScope scope,
                                   uint32_t semantics, spv_id value, spv_id comparator);
spv_id spv_atomic_load(spv_builder *b, spv_id pointer, SpvScope scope, uint32_t semantics);

/* Subgroup arithmetic: OpGroupNonUniformIAdd FAdd IMul FMul SMin UMin FMin SMax UMax FMax
 * BitwiseAnd/Or/Xor, with group operation Reduce, InclusiveScan or ExclusiveScan (Subgroup
 * scope). Adds GroupNonUniformArithmetic. */
spv_id spv_subgroup_op(spv_builder *b, SpvOp op, SpvGroupOperation group, spv_id value);
spv_id spv_subgroup_elect(spv_builder *b);                         /* GroupNonUniform */
spv_id spv_subgroup_broadcast_first(spv_builder *b, spv_id value); /* GroupNonUniformBallot */
/* value as the invocation with SubgroupLocalInvocationId lane has it (a constant id: SPIR-V
 * before 1.5 requires one); that invocation must be active. GroupNonUniformBallot. */
spv_id spv_subgroup_broadcast(spv_builder *b, spv_id value, uint32_t lane);

/* ---- validation and debugging (SPIRV-Tools, when the build found it) --------------------- */

/* True when this build links SPIRV-Tools. */
bool spv_tools_available(void);
/* Validates words for the Vulkan environment of api_version (VK_API_VERSION_1_1 .. 1_3).
 * KILN_ERROR_INVALID_SPIRV with the validator's message; KILN_ERROR_UNSUPPORTED without
 * SPIRV-Tools. */
kiln_status spv_validate(const uint32_t *words, size_t word_count, uint32_t api_version,
                         base_error *err);
/* Disassembles words into a NUL-terminated text allocated with alloc (NULL: default); free it
 * with base_free(alloc, *text, *length + 1). KILN_ERROR_UNSUPPORTED without SPIRV-Tools. */
kiln_status spv_disassemble(const base_allocator *alloc, const uint32_t *words, size_t word_count,
                            char **text, size_t *length, base_error *err);
/* The KILN_DEBUG=4 hook: logs the disassembly of words under label (or, without SPIRV-Tools,
 * the word count and a note). Does nothing below KILN_DEBUG=4. */
void spv_debug_dump(const uint32_t *words, size_t word_count, const char *label);

#endif
