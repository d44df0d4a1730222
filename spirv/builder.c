/* The builder itself: ids, the section buffers, interning, capabilities and extensions, and the
 * assembly of the sections into one module. */
#include "spv_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* Serial numbers of builders, the tag of their ids (1 .. SPV_TAG_COUNT). */
static atomic_uint spv_serial;

kiln_status spv_fail(spv_builder *b, kiln_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    base_error_setv(&b->error, status, fmt, ap);
    va_end(ap);
    return status;
}

static kiln_status spv_oom(spv_builder *b) {
    return spv_fail(b, KILN_ERROR_OUT_OF_HOST_MEMORY, "spirv: out of host memory");
}

kiln_status spv_builder_create(const spv_builder_options *options, spv_builder **out,
                               base_error *err) {
    if (!out)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "spv_builder_create: out is NULL");
    *out = NULL;
    spv_builder_options o = options ? *options : (spv_builder_options){0};
    if (o.version == 0)
        o.version = 0x10300;
    if (o.version < 0x10300 || o.version > 0x10600 || (o.version & 0xff))
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "spv_builder_create: SPIR-V version 0x%x is not 1.3 .. 1.6",
                              o.version);
    base_allocator alloc = o.alloc ? *o.alloc : base_allocator_make(NULL, NULL);
    spv_builder *b = base_calloc(&alloc, 1, sizeof *b);
    if (!b)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "spirv: out of host memory");
    b->alloc = alloc;
    b->version = o.version;
    b->maintenance4 = o.maintenance4 || o.version >= 0x10600;
    b->tag = atomic_fetch_add(&spv_serial, 1u) % SPV_TAG_COUNT + 1;
    base_map_init(&b->interned, &b->alloc);
    /* Raw id 0 is never used: reserve its slot so ids index the table directly. */
    if (BASE_VEC_PUSH(&b->alloc, &b->ids, (spv_info){0}) != KILN_OK) {
        spv_builder_destroy(b);
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "spirv: out of host memory");
    }
    spv_capability(b, SpvCapabilityShader);
    if (!spv_ok(b)) {
        spv_builder_destroy(b);
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "spirv: out of host memory");
    }
    *out = b;
    return KILN_OK;
}

static void spv_free_interned(spv_builder *b);

void spv_builder_destroy(spv_builder *b) {
    if (!b)
        return;
    const base_allocator *a = &b->alloc;
    for (size_t i = 0; i < b->exts.len; i++)
        base_free(a, b->exts.data[i], strlen(b->exts.data[i]) + 1);
    for (size_t i = 0; i < b->entries.len; i++)
        base_free(a, b->entries.data[i].name, strlen(b->entries.data[i].name) + 1);
    spv_free_interned(b);
    base_map_finish(&b->interned);
    BASE_VEC_FREE(a, &b->ids);
    for (int i = 0; i < SPV_SEC_COUNT_; i++)
        BASE_VEC_FREE(a, &b->sec[i]);
    BASE_VEC_FREE(a, &b->caps);
    BASE_VEC_FREE(a, &b->exts);
    BASE_VEC_FREE(a, &b->member_types);
    BASE_VEC_FREE(a, &b->globals);
    BASE_VEC_FREE(a, &b->entries);
    BASE_VEC_FREE(a, &b->builtins);
    BASE_VEC_FREE(a, &b->fn_head);
    BASE_VEC_FREE(a, &b->fn_vars);
    BASE_VEC_FREE(a, &b->fn_body);
    BASE_VEC_FREE(a, &b->fn_labels);
    BASE_VEC_FREE(a, &b->module);
    base_allocator alloc = b->alloc;
    base_free(&alloc, b, sizeof *b);
}

kiln_status spv_builder_status(const spv_builder *b) {
    return b ? b->error.status : KILN_ERROR_INVALID_ARGUMENT;
}

const char *spv_builder_message(const spv_builder *b) {
    return b ? base_error_message(&b->error) : "spirv: no builder";
}

uint32_t spv_builder_version(const spv_builder *b) {
    return b ? b->version : 0;
}

/* ---- ids ------------------------------------------------------------------------------- */

spv_id spv_make_id(const spv_builder *b, uint32_t raw) {
    return raw ? b->tag << SPV_ID_BITS | raw : 0;
}

uint32_t spv_raw(spv_id id) {
    return id & (SPV_MAX_IDS - 1);
}

uint32_t spv_new_id(spv_builder *b, spv_kind kind) {
    if (!spv_ok(b))
        return 0;
    if (b->ids.len >= SPV_MAX_IDS) {
        spv_fail(b, KILN_ERROR_LIMIT_EXCEEDED, "spirv: more than %u ids in one module",
                 SPV_MAX_IDS - 1);
        return 0;
    }
    if (BASE_VEC_PUSH(&b->alloc, &b->ids, ((spv_info){.kind = (uint8_t)kind})) != KILN_OK) {
        spv_oom(b);
        return 0;
    }
    return (uint32_t)(b->ids.len - 1);
}

const spv_info *spv_peek(const spv_builder *b, spv_id id) {
    if (!b || id >> SPV_ID_BITS != b->tag || spv_raw(id) == 0 || spv_raw(id) >= b->ids.len)
        return NULL;
    return &b->ids.data[spv_raw(id)];
}

spv_info *spv_lookup(spv_builder *b, spv_id id, const char *what) {
    if (!spv_ok(b))
        return NULL;
    if (id == 0) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: %s is id 0 (no id)", what);
        return NULL;
    }
    if (id >> SPV_ID_BITS != b->tag) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: %s (id %u) belongs to another builder",
                 what, id);
        return NULL;
    }
    if (spv_raw(id) >= b->ids.len) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: %s (id %u) is out of range (bound %zu)",
                 what, spv_raw(id), b->ids.len);
        return NULL;
    }
    return &b->ids.data[spv_raw(id)];
}

/* ---- words ----------------------------------------------------------------------------- */

static void spv_push_words(spv_builder *b, spv_words *w, const uint32_t *words, size_t count) {
    if (!spv_ok(b))
        return;
    size_t need;
    if (!base_add_size(w->len, count, &need) ||
        (need > w->cap &&
         BASE_VEC_RESERVE(&b->alloc, w, need > 2 * w->cap ? need : 2 * w->cap) != KILN_OK)) {
        spv_oom(b);
        return;
    }
    if (count)
        memcpy(w->data + w->len, words, count * sizeof *words);
    w->len += count;
}

uint32_t *spv_reserve(spv_builder *b, spv_words *w, size_t count) {
    if (!spv_ok(b))
        return NULL;
    size_t need;
    if (!base_add_size(w->len, count, &need) ||
        (need > w->cap &&
         BASE_VEC_RESERVE(&b->alloc, w, need > 2 * w->cap ? need : 2 * w->cap) != KILN_OK)) {
        spv_oom(b);
        return NULL;
    }
    uint32_t *words = w->data + w->len;
    memset(words, 0, count * sizeof *words);
    w->len += count;
    return words;
}

void spv_emit(spv_builder *b, spv_words *w, SpvOp op, const uint32_t *operands, size_t count) {
    if (!spv_ok(b))
        return;
    if (count + 1 > 0xffff) {
        spv_fail(b, KILN_ERROR_LIMIT_EXCEEDED, "spirv: instruction with %zu operands", count);
        return;
    }
    uint32_t head = (uint32_t)(count + 1) << SpvWordCountShift | (uint32_t)op;
    spv_push_words(b, w, &head, 1);
    spv_push_words(b, w, operands, count);
}

/* A string literal: UTF-8 bytes, NUL-terminated, padded with NULs to a whole word. */
static size_t spv_str_words(const char *s) {
    return strlen(s) / 4 + 1;
}

void spv_emit_str(spv_builder *b, spv_words *w, SpvOp op, const uint32_t *operands, size_t count,
                  const char *str) {
    if (!spv_ok(b))
        return;
    size_t n = spv_str_words(str);
    if (count + n + 1 > 0xffff) {
        spv_fail(b, KILN_ERROR_LIMIT_EXCEEDED, "spirv: string literal of %zu bytes", strlen(str));
        return;
    }
    uint32_t head = (uint32_t)(count + n + 1) << SpvWordCountShift | (uint32_t)op;
    spv_push_words(b, w, &head, 1);
    spv_push_words(b, w, operands, count);
    size_t len = strlen(str);
    for (size_t i = 0; i < n; i++) {
        uint32_t word = 0;
        for (size_t j = 0; j < 4 && 4 * i + j < len; j++)
            word |= (uint32_t)(unsigned char)str[4 * i + j] << (8 * j);
        spv_push_words(b, w, &word, 1);
    }
}

/* ---- interning ------------------------------------------------------------------------- */

typedef struct spv_intern_entry {
    uint32_t id; /* raw */
    uint32_t count;
    uint32_t words[]; /* op, result type, operands..., extra */
} spv_intern_entry;

typedef struct spv_intern_key {
    const uint32_t *words;
    uint32_t count;
} spv_intern_key;

static size_t spv_intern_size(uint32_t count) {
    return sizeof(spv_intern_entry) + count * sizeof(uint32_t);
}

static void spv_free_interned(spv_builder *b) {
    void *v;
    for (size_t i = 0; base_map_next(&b->interned, &i, &v);)
        base_free(&b->alloc, v, spv_intern_size(((spv_intern_entry *)v)->count));
}

static bool spv_intern_eq(const void *stored, const void *key, void *user) {
    (void)user;
    const spv_intern_entry *e = stored;
    const spv_intern_key *k = key;
    return e->count == k->count && memcmp(e->words, k->words, k->count * sizeof *k->words) == 0;
}

uint32_t spv_intern(spv_builder *b, SpvOp op, uint32_t result_type, const uint32_t *operands,
                    size_t count, uint32_t extra, spv_info info) {
    if (!spv_ok(b))
        return 0;
    uint32_t key_words[16];
    if (count + 3 > BASE_COUNTOF(key_words)) {
        spv_fail(b, KILN_ERROR_INTERNAL, "spirv: interned instruction too long");
        return 0;
    }
    key_words[0] = (uint32_t)op;
    key_words[1] = result_type;
    if (count) /* operands may be NULL when count is 0 */
        memcpy(key_words + 2, operands, count * sizeof *operands);
    key_words[count + 2] = extra;
    spv_intern_key key = {key_words, (uint32_t)(count + 3)};
    uint64_t hash = base_hash_bytes(key_words, key.count * sizeof *key_words, 0x5350);
    spv_intern_entry *e = base_map_find(&b->interned, hash, &key, spv_intern_eq, NULL);
    if (e)
        return e->id;

    e = base_malloc(&b->alloc, spv_intern_size(key.count));
    if (!e) {
        spv_oom(b);
        return 0;
    }
    e->count = key.count;
    memcpy(e->words, key_words, key.count * sizeof *key_words);
    uint32_t id = e->id = spv_new_id(b, (spv_kind)info.kind);
    if (!id || base_map_insert(&b->interned, hash, e) != KILN_OK) {
        base_free(&b->alloc, e, spv_intern_size(key.count));
        spv_oom(b);
        return 0;
    }
    b->ids.data[id] = info;

    uint32_t inst[16];
    size_t n = 0;
    if (result_type)
        inst[n++] = result_type;
    inst[n++] = id;
    if (count)
        memcpy(inst + n, operands, count * sizeof *operands);
    spv_emit(b, &b->sec[SPV_SEC_GLOBALS], op, inst, n + count);
    return spv_ok(b) ? id : 0;
}

/* ---- capabilities, extensions, names, decorations --------------------------------------- */

void spv_capability(spv_builder *b, SpvCapability cap) {
    if (!spv_ok(b))
        return;
    for (size_t i = 0; i < b->caps.len; i++)
        if (b->caps.data[i] == (uint32_t)cap)
            return;
    if (BASE_VEC_PUSH(&b->alloc, &b->caps, (uint32_t)cap) != KILN_OK)
        spv_oom(b);
}

void spv_extension(spv_builder *b, const char *name) {
    if (!spv_ok(b))
        return;
    if (!name || !*name) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: empty extension name");
        return;
    }
    for (size_t i = 0; i < b->exts.len; i++)
        if (strcmp(b->exts.data[i], name) == 0)
            return;
    char *copy = base_strdup(&b->alloc, name);
    if (!copy || BASE_VEC_PUSH(&b->alloc, &b->exts, copy) != KILN_OK) {
        if (copy)
            base_free(&b->alloc, copy, strlen(copy) + 1);
        spv_oom(b);
    }
}

void spv_require_ext(spv_builder *b, const char *name) {
    spv_extension(b, name);
}

uint32_t spv_glsl_import(spv_builder *b) {
    if (!b->glsl_import)
        b->glsl_import = spv_new_id(b, SPV_K_EXT_IMPORT);
    return b->glsl_import;
}

void spv_name(spv_builder *b, spv_id id, const char *name) {
    if (!spv_lookup(b, id, "the named id"))
        return;
    if (!name) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: spv_name: name is NULL");
        return;
    }
    uint32_t target = spv_raw(id);
    spv_emit_str(b, &b->sec[SPV_SEC_DEBUG_NAMES], SpvOpName, &target, 1, name);
}

void spv_member_name(spv_builder *b, spv_id struct_type, uint32_t member, const char *name) {
    const spv_info *t = spv_lookup(b, struct_type, "the struct of a member name");
    if (!t)
        return;
    if (t->kind != SPV_K_TYPE || t->cls != SPV_T_STRUCT || member >= t->b || !name) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: spv_member_name: not a struct member");
        return;
    }
    uint32_t ops[2] = {spv_raw(struct_type), member};
    spv_emit_str(b, &b->sec[SPV_SEC_DEBUG_NAMES], SpvOpMemberName, ops, 2, name);
}

void spv_decorate(spv_builder *b, spv_id target, SpvDecoration decoration, uint32_t count,
                  uint32_t literal0, uint32_t literal1) {
    if (!spv_lookup(b, target, "the decorated id"))
        return;
    if (count > 2) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT, "spirv: spv_decorate: %u literals", count);
        return;
    }
    uint32_t ops[4] = {spv_raw(target), (uint32_t)decoration, literal0, literal1};
    spv_emit(b, &b->sec[SPV_SEC_ANNOTATIONS], SpvOpDecorate, ops, 2 + count);
}

void spv_member_decorate(spv_builder *b, spv_id struct_type, uint32_t member,
                         SpvDecoration decoration, uint32_t count, uint32_t literal) {
    const spv_info *t = spv_lookup(b, struct_type, "the struct of a member decoration");
    if (!t)
        return;
    if (t->kind != SPV_K_TYPE || t->cls != SPV_T_STRUCT || member >= t->b || count > 1) {
        spv_fail(b, KILN_ERROR_INVALID_ARGUMENT,
                 "spirv: spv_member_decorate: member %u of a non-struct or too many literals",
                 member);
        return;
    }
    uint32_t ops[4] = {spv_raw(struct_type), member, (uint32_t)decoration, literal};
    spv_emit(b, &b->sec[SPV_SEC_ANNOTATIONS], SpvOpMemberDecorate, ops, 3 + count);
}

/* ---- assembly -------------------------------------------------------------------------- */

/* The interface of an entry point: from SPIR-V 1.4 every module-scope variable it uses (we list
 * them all), before 1.4 only the Input and Output ones. */
static void spv_emit_entry(spv_builder *b, const spv_entry *e, spv_words *out) {
    size_t cap = 2 + b->globals.len;
    uint32_t *ops = base_malloc(&b->alloc, cap * sizeof *ops);
    if (!ops) {
        spv_oom(b);
        return;
    }
    size_t n = 0;
    ops[n++] = SpvExecutionModelGLCompute;
    ops[n++] = e->function;
    size_t fixed = n;
    for (size_t i = 0; i < b->globals.len; i++) {
        const spv_info *v = &b->ids.data[b->globals.data[i]];
        uint32_t sc = b->ids.data[v->type].a;
        if (b->version >= 0x10400 || sc == SpvStorageClassInput || sc == SpvStorageClassOutput)
            ops[n++] = b->globals.data[i];
    }
    /* The name sits between the function and the interface ids. */
    uint32_t head =
        (uint32_t)(1 + n + spv_str_words(e->name)) << SpvWordCountShift | SpvOpEntryPoint;
    spv_push_words(b, out, &head, 1);
    spv_push_words(b, out, ops, fixed);
    size_t len = strlen(e->name);
    for (size_t i = 0; i < spv_str_words(e->name); i++) {
        uint32_t word = 0;
        for (size_t j = 0; j < 4 && 4 * i + j < len; j++)
            word |= (uint32_t)(unsigned char)e->name[4 * i + j] << (8 * j);
        spv_push_words(b, out, &word, 1);
    }
    spv_push_words(b, out, ops + fixed, n - fixed);
    base_free(&b->alloc, ops, cap * sizeof *ops);
}

static void spv_assemble(spv_builder *b) {
    spv_words *m = &b->module;
    uint32_t header[5] = {SpvMagicNumber, b->version, 0x4b494c4e /* generator: "KILN" */,
                          (uint32_t)b->ids.len, 0};
    spv_push_words(b, m, header, 5);
    for (size_t i = 0; i < b->caps.len; i++)
        spv_emit(b, m, SpvOpCapability, &b->caps.data[i], 1);
    for (size_t i = 0; i < b->exts.len; i++)
        spv_emit_str(b, m, SpvOpExtension, NULL, 0, b->exts.data[i]);
    if (b->glsl_import)
        spv_emit_str(b, m, SpvOpExtInstImport, &b->glsl_import, 1, "GLSL.std.450");
    uint32_t model[2] = {SpvAddressingModelLogical, SpvMemoryModelGLSL450};
    spv_emit(b, m, SpvOpMemoryModel, model, 2);
    for (size_t i = 0; i < b->entries.len; i++)
        spv_emit_entry(b, &b->entries.data[i], m);
    for (int s = SPV_SEC_EXEC_MODES; s < SPV_SEC_COUNT_; s++)
        spv_push_words(b, m, b->sec[s].data, b->sec[s].len);
}

kiln_status spv_builder_finish(spv_builder *b, const uint32_t **words, size_t *word_count,
                               base_error *err) {
    if (words)
        *words = NULL;
    if (word_count)
        *word_count = 0;
    if (!b || !words || !word_count)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "spv_builder_finish: a NULL argument");
    if (spv_ok(b) && !b->finished) {
        if (b->in_function)
            spv_fail(b, KILN_ERROR_INVALID_SPIRV,
                     "spirv: the module was finished inside a function (spv_function_end "
                     "missing)");
        else if (b->entries.len == 0)
            spv_fail(b, KILN_ERROR_INVALID_SPIRV, "spirv: the module has no entry point");
        for (size_t i = 0; i < b->entries.len && spv_ok(b); i++)
            if (!b->entries.data[i].sized)
                spv_fail(b, KILN_ERROR_INVALID_SPIRV,
                         "spirv: entry point \"%s\" has no workgroup size "
                         "(spv_workgroup_size or spv_workgroup_size_spec)",
                         b->entries.data[i].name);
        spv_assemble(b);
        b->finished = spv_ok(b);
    }
    if (!spv_ok(b)) {
        base_error_set(err, b->error.status, "%s", base_error_message(&b->error));
        return b->error.status;
    }
    *words = b->module.data;
    *word_count = b->module.len;
    return KILN_OK;
}
