/* spirv/ internals shared by builder.c (ids, sections, interning, assembly), types.c (types,
 * constants, resources) and inst.c (functions, blocks, instructions). */
#ifndef KILN_SPIRV_SPV_INTERNAL_H
#define KILN_SPIRV_SPV_INTERNAL_H

#include "spv.h"

/* An id is tag << SPV_ID_BITS | raw; the words carry only raw. */
enum { SPV_ID_BITS = 20, SPV_MAX_IDS = 1u << SPV_ID_BITS, SPV_TAG_COUNT = 4095 };

/* The sections of a module's logical layout (SPIR-V 2.4), in order. Capabilities, extensions
 * and the GLSL import are kept as sets and written when the module is assembled. */
typedef enum spv_section {
    SPV_SEC_ENTRY_POINTS,
    SPV_SEC_EXEC_MODES,
    SPV_SEC_DEBUG_NAMES,
    SPV_SEC_ANNOTATIONS,
    SPV_SEC_GLOBALS, /* types, constants, module-scope variables */
    SPV_SEC_FUNCTIONS,
    SPV_SEC_COUNT_
} spv_section;

typedef enum spv_kind {
    SPV_K_NONE = 0, /* allocated, nothing defined yet */
    SPV_K_TYPE,
    SPV_K_CONST,    /* a constant or spec constant (a value) */
    SPV_K_VARIABLE, /* a value of pointer type */
    SPV_K_VALUE,    /* an instruction result */
    SPV_K_LABEL,
    SPV_K_FUNCTION,
    SPV_K_EXT_IMPORT,
} spv_kind;

/* Type classes (info.cls of a type). */
typedef enum spv_tcls {
    SPV_T_VOID = 1,
    SPV_T_BOOL,
    SPV_T_INT,
    SPV_T_FLOAT,
    SPV_T_VECTOR,
    SPV_T_ARRAY,
    SPV_T_RUNTIME_ARRAY,
    SPV_T_STRUCT,
    SPV_T_POINTER,
    SPV_T_FUNCTION,
    SPV_T_IMAGE, /* a texel buffer's image: type = its sampled type */
} spv_tcls;

/* What the builder knows of one id. */
typedef struct spv_info {
    uint8_t kind;   /* spv_kind */
    uint8_t cls;    /* types: spv_tcls */
    uint16_t width; /* int/float: bits */
    uint32_t type;  /* values: raw result type; vector/array/pointer types: the inner type */
    /* int: signedness; vector: count; array: length; pointer: storage class; struct: first
     * member in member_types; integer constants: low word; phi: word offset in the body */
    uint32_t a;
    /* struct: member count; arrays: stride; integer constants: high word; phi: 1 */
    uint32_t b;
} spv_info;

typedef BASE_VEC(uint32_t) spv_words;
typedef BASE_VEC(spv_info) spv_info_vec;

typedef struct spv_entry {
    uint32_t function; /* raw */
    char *name;        /* base_strdup */
    bool sized;        /* a workgroup size was given */
} spv_entry;

typedef struct spv_builtin_var {
    uint32_t builtin;
    uint32_t id; /* raw */
} spv_builtin_var;

typedef enum spv_ext_bit {
    SPV_EXT_8BIT_STORAGE = 1u << 0,
} spv_ext_bit;

struct spv_builder {
    base_allocator alloc;
    base_error error;
    uint32_t version;
    bool maintenance4;
    uint32_t tag;

    spv_info_vec ids; /* indexed by raw id; ids.data[0] unused */
    spv_words sec[SPV_SEC_COUNT_];
    BASE_VEC(uint32_t) caps;
    BASE_VEC(char *) exts;           /* base_strdup strings */
    BASE_VEC(uint32_t) member_types; /* raw ids of struct members */
    BASE_VEC(uint32_t) globals;      /* raw ids of module-scope variables */
    BASE_VEC(spv_entry) entries;
    BASE_VEC(spv_builtin_var) builtins;
    uint32_t glsl_import; /* raw; 0 until needed */

    base_map interned; /* spv_intern entries keyed by their words (each its own block) */

    /* The current function: its head (OpFunction, first OpLabel), its Function variables, its
     * body; concatenated into SPV_SEC_FUNCTIONS at spv_function_end. */
    bool in_function, in_block;
    bool merge_pending; /* a merge instruction waits for its block's branch */
    uint32_t label;     /* raw id of the current block's label */
    uint32_t pending_phis;
    spv_words fn_head, fn_vars, fn_body;
    spv_words fn_labels; /* raw labels the current function branches to (checked at its end) */

    spv_words module; /* the assembled words */
    bool finished;
};

/* builder.c */
kiln_status spv_fail(spv_builder *b, kiln_status status, const char *fmt, ...) BASE_PRINTF(3, 4);
static inline bool spv_ok(const spv_builder *b) {
    return b && b->error.status == KILN_OK;
}
spv_id spv_make_id(const spv_builder *b, uint32_t raw);
uint32_t spv_new_id(spv_builder *b, spv_kind kind); /* raw; 0 on failure */
/* The info of a valid id, or NULL (recording an error naming what) when id is 0, out of range
 * or from another builder. */
spv_info *spv_lookup(spv_builder *b, spv_id id, const char *what);
const spv_info *spv_peek(const spv_builder *b, spv_id id); /* no error; NULL when invalid */
uint32_t spv_raw(spv_id id);
void spv_emit(spv_builder *b, spv_words *w, SpvOp op, const uint32_t *operands, size_t count);
/* Appends count zero words to w and returns them (NULL on failure, recorded). */
uint32_t *spv_reserve(spv_builder *b, spv_words *w, size_t count);
/* Appends an instruction whose operands end with a string literal. */
void spv_emit_str(spv_builder *b, spv_words *w, SpvOp op, const uint32_t *operands, size_t count,
                  const char *str);
/* Interns `op [result type] <result> operands` keyed by (op, operands, extra): returns the
 * existing id or emits the instruction into the globals section with a new raw id whose info
 * is *info. result_type (raw) is 0 for types. */
uint32_t spv_intern(spv_builder *b, SpvOp op, uint32_t result_type, const uint32_t *operands,
                    size_t count, uint32_t extra, spv_info info);
void spv_require_ext(spv_builder *b, const char *name);
uint32_t spv_glsl_import(spv_builder *b);

/* types.c */
spv_id spv_type_function_void(spv_builder *b); /* void(), interned */
/* Adds the capabilities a type held in storage class sc needs (8/16-bit storage). */
void spv_require_storage(spv_builder *b, uint32_t type_raw, SpvStorageClass sc);
/* The scalar class (SPV_T_INT/FLOAT/BOOL) and component count of a scalar or vector type. */
bool spv_scalar_of(const spv_builder *b, uint32_t type_raw, const spv_info **scalar,
                   uint32_t *count);

#endif
