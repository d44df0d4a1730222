/* The IR's vector access (LOAD2, LOAD4, LOAD8, EXTRACT, STORE4, STORE8; engine/codegen/ir.h): the
 * verifier's rules, the interpreter's semantics and checks, and the emitted SPIR-V (validated by
 * SPIRV-Tools when the library has it). */
#include "emit.h"
#include "interp.h"
#include "ir.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static const base_allocator *alloc(void) {
    static base_allocator a;
    a = base_allocator_make(NULL, NULL);
    return &a;
}

/* How many instructions of opcode op the module has. */
static int count_op(const emit_result *r, uint32_t op) {
    int n = 0;
    for (size_t at = 5; at < r->word_count && r->words[at] >> 16; at += r->words[at] >> 16)
        n += (r->words[at] & 0xffffu) == op;
    return n;
}

/* Whether the module declares capability cap (OpCapability). */
static bool declares(const emit_result *r, uint32_t cap) {
    enum { OP_CAPABILITY = 17 };
    for (size_t at = 5; at < r->word_count && r->words[at] >> 16; at += r->words[at] >> 16) {
        if ((r->words[at] & 0xffffu) == OP_CAPABILITY && r->words[at + 1] == cap)
            return true;
    }
    return false;
}

/* k: an i32-indexed kernel of two f32 buffers, out (0) and in (1); returns the invocation. */
static ir_value out_in_kernel(ir_kernel *k) {
    ir_kernel_init(k, alloc(), IR_I32);
    ir_buffer_add(k, IR_F32);
    ir_buffer_add(k, IR_F32);
    return ir_global_id(k);
}

/* With width w (4: LOAD4/STORE4, 8: LOAD8/STORE8): out[wg .. wg+w-1] = in[wg+w-1] + 1, ...,
 * in[wg] + 1 (each group of w reversed), index offset by shift (0: aligned). */
static void reverse_kernel(ir_kernel *k, int64_t shift, uint32_t w) {
    ir_value g = out_in_kernel(k);
    ir_value at = ir_alu(k, IR_MUL, IR_I32, g, ir_const_i(k, IR_I32, w), IR_NONE);
    at = ir_alu(k, IR_ADD, IR_I32, at, ir_const_i(k, IR_I32, shift), IR_NONE);
    ir_value vec = ir_load_vector(k, 1, at, w), e[8], v[8];
    for (uint32_t c = 0; c < w; c++)
        e[c] = ir_extract(k, vec, c);
    ir_value one = ir_const_f(k, IR_F32, 1.0);
    for (uint32_t c = 0; c < w; c++)
        v[c] = ir_alu(k, IR_ADD, IR_F32, e[w - 1 - c], one, IR_NONE);
    ir_store_vector(k, 0, at, v, w);
}

static void emitted(const ir_kernel *k, uint32_t w);

/* out[2g] = in[2g + shift + 1] + 1, out[2g + 1] = in[2g + shift] + 1: each pair swapped, read as
 * one LOAD2 (shift 0: aligned), stored element by element (there is no STORE2). */
static void swap_pairs_kernel(ir_kernel *k, int64_t shift) {
    ir_value g = out_in_kernel(k);
    ir_value at = ir_alu(k, IR_MUL, IR_I32, g, ir_const_i(k, IR_I32, 2), IR_NONE);
    ir_value from = ir_alu(k, IR_ADD, IR_I32, at, ir_const_i(k, IR_I32, shift), IR_NONE);
    ir_value vec = ir_load_vector(k, 1, from, 2), e[2];
    for (uint32_t c = 0; c < 2; c++)
        e[c] = ir_extract(k, vec, c);
    ir_value one = ir_const_f(k, IR_F32, 1.0);
    for (uint32_t c = 0; c < 2; c++) {
        ir_value to = ir_alu(k, IR_ADD, IR_I32, at, ir_const_i(k, IR_I32, c), IR_NONE);
        ir_store(k, 0, to, ir_alu(k, IR_ADD, IR_F32, e[1 - c], one, IR_NONE));
    }
}

/* LOAD2: interpreted; emitted unpaired as a load of a 2-vector, paired (CPU drivers) as one
 * 64-bit integer bitcast to the two elements (the module declares Int64); the buffer is marked
 * as read in pairs, not as a vector buffer. Validated by SPIRV-Tools. */
static void test_ir_vector_pairs(void **state) {
    (void)state;
    enum { OP_LOAD = 61, OP_BITCAST = 124, CAP_INT64 = 11 };
    ir_kernel k;
    swap_pairs_kernel(&k, 0);
    base_error err = {0};
    assert_int_equal(ir_verify(&k, &err), KILN_OK);
    float in[8], out[8] = {0}, want[8];
    for (uint32_t x = 0; x < 8; x++)
        in[x] = (float)(x + 1);
    for (uint32_t x = 0; x < 8; x++)
        want[x] = in[x ^ 1u] + 1;
    interp_buffer b[2] = {{out, 8}, {in, 8}};
    assert_int_equal(interp_run(&k, b, NULL, 4, &err), KILN_OK);
    assert_memory_equal(out, want, sizeof want);
    assert_true(k.buffers[1].pairs && !k.buffers[1].vector && !k.buffers[1].octets);
    assert_false(k.buffers[0].pairs || k.buffers[0].vector);
    int loads[2], bitcasts[2];
    for (int paired = 0; paired < 2; paired++) {
        emit_options opt = {.spirv_version = 0x10300, .paired_vectors = paired};
        emit_result r;
        assert_int_equal(emit_spirv(&k, &opt, &r, &err), KILN_OK);
        if (spv_tools_available())
            assert_int_equal(spv_validate(r.words, r.word_count, (1u << 22) | (1u << 12), &err),
                             KILN_OK);
        loads[paired] = count_op(&r, OP_LOAD);
        bitcasts[paired] = count_op(&r, OP_BITCAST);
        assert_int_equal(declares(&r, CAP_INT64), paired);
        emit_result_free(alloc(), &r);
    }
    assert_int_equal(loads[0], loads[1]);
    assert_int_equal(bitcasts[1] - bitcasts[0], 1);
    ir_kernel_finish(&k);
    /* an odd first element, a pair past the end: the code-generation bug named */
    for (int past = 0; past < 2; past++) {
        swap_pairs_kernel(&k, past ? 0 : 1);
        err = (base_error){0};
        interp_buffer short_in[2] = {{out, 8}, {in, past ? 3 : 8}};
        assert_int_equal(interp_run(&k, short_in, NULL, 2, &err), KILN_ERROR_INTERNAL);
        assert_non_null(
            strstr(base_error_message(&err), past ? "code-generation bug" : "not a multiple of 2"));
        ir_kernel_finish(&k);
    }
}

/* Invocation g reads a row at r = 4 g + s0 (s0 in 0..3: the row's element may be odd) as six
 * pairs of it (LOAD2R) at r + q + 2 j (q = s0 % 2: each pair at an even element), j = 0..5:
 * out[12 g + 2 j + c] = in[r + q + 2 j + c]. */
static void row_pairs_kernel(ir_kernel *k, int64_t s0) {
    ir_value g = out_in_kernel(k);
    ir_value row = ir_alu(k, IR_MUL, IR_I32, g, ir_const_i(k, IR_I32, 4), IR_NONE);
    row = ir_alu(k, IR_ADD, IR_I32, row, ir_const_i(k, IR_I32, s0), IR_NONE);
    ir_value out = ir_alu(k, IR_MUL, IR_I32, g, ir_const_i(k, IR_I32, 12), IR_NONE);
    for (int64_t j = 0; j < 6; j++) {
        int64_t d = s0 % 2 + 2 * j;
        ir_value at = ir_alu(k, IR_ADD, IR_I32, row, ir_const_i(k, IR_I32, d), IR_NONE);
        ir_value vec = ir_load_row_pair(k, 1, at, row, d), e[2];
        for (uint32_t c = 0; c < 2; c++)
            e[c] = ir_extract(k, vec, c);
        for (uint32_t c = 0; c < 2; c++)
            ir_store(k, 0,
                     ir_alu(k, IR_ADD, IR_I32, out, ir_const_i(k, IR_I32, 2 * j + c), IR_NONE),
                     e[c]);
    }
}

/* LOAD2R, a row's pairs: interpreted as the pairs at their own index; emitted as LOAD2s for a
 * storage buffer; for a texel buffer the six pairs of a row (whatever its element's value mod
 * 4) share 4 fetches, whose texels are clamped to the buffer's (the module declares
 * ImageQuery), where LOAD2s take one fetch each. Validated by SPIRV-Tools. */
static void test_ir_vector_row_pairs(void **state) {
    (void)state;
    enum { OP_IMAGE_FETCH = 95, OP_IMAGE_QUERY_SIZE = 104, CAP_IMAGE_QUERY = 50 };
    for (int64_t s0 = 0; s0 < 4; s0++) {
        ir_kernel k;
        row_pairs_kernel(&k, s0);
        base_error err = {0};
        assert_int_equal(ir_verify(&k, &err), KILN_OK);
        float in[64], out[36] = {0}, want[36];
        for (uint32_t x = 0; x < 64; x++)
            in[x] = (float)x * 0.5f;
        for (int64_t g = 0; g < 3; g++)
            for (int64_t j = 0; j < 6; j++)
                for (int64_t c = 0; c < 2; c++)
                    want[12 * g + 2 * j + c] = in[4 * g + s0 + s0 % 2 + 2 * j + c];
        interp_buffer b[2] = {{out, 36}, {in, 64}};
        assert_int_equal(interp_run(&k, b, NULL, 3, &err), KILN_OK);
        assert_memory_equal(out, want, sizeof want);
        assert_true(k.buffers[1].pairs);
        for (int texels = 0; texels < 2; texels++) {
            emit_options opt = {.spirv_version = 0x10300,
                                .paired_vectors = true,
                                .texel_buffers = texels ? 2u : 0u};
            emit_result r;
            assert_int_equal(emit_spirv(&k, &opt, &r, &err), KILN_OK);
            if (spv_tools_available())
                assert_int_equal(spv_validate(r.words, r.word_count, (1u << 22) | (1u << 12), &err),
                                 KILN_OK);
            assert_int_equal(count_op(&r, OP_IMAGE_FETCH), texels ? 4 : 0);
            assert_int_equal(count_op(&r, OP_IMAGE_QUERY_SIZE), texels);
            assert_int_equal(declares(&r, CAP_IMAGE_QUERY), texels);
            emit_result_free(alloc(), &r);
        }
        ir_kernel_finish(&k);
    }
}

/* out[g] = in[g] * 2 as an integer kernel of type t (scalar loads). */
static void double_kernel(ir_kernel *k, ir_type t, ir_type index) {
    ir_kernel_init(k, alloc(), index);
    ir_buffer_add(k, t);
    ir_buffer_add(k, t);
    ir_value g = ir_global_id(k);
    ir_value v = ir_load(k, 1, g);
    ir_store(k, 0, g, ir_alu(k, IR_ADD, t, v, v, IR_NONE));
}

/* emit_options.texel_buffers: the read-only buffer is a uniform texel buffer (the module
 * declares SampledBuffer, no sampled image: SPIR-V 1.6 forbids one of a buffer), each scalar
 * load, pair, quad one OpImageFetch and an octet two; the
 * written buffer cannot be one (a code-generation bug, named). Validated by SPIRV-Tools for
 * SPIR-V 1.3 (Vulkan 1.1) and 1.6 (Vulkan 1.3), with 32- and 64-bit indices. */
static void test_ir_vector_texel_buffers(void **state) {
    (void)state;
    enum { OP_TYPE_SAMPLED_IMAGE = 27, OP_IMAGE_FETCH = 95 };
    enum { CAP_SAMPLED_BUFFER = 46 };
    for (int form = 0; form < 6; form++) {
        ir_kernel k;
        int fetches = 1;
        if (form == 0)
            double_kernel(&k, IR_F32, IR_I32);
        else if (form == 1)
            double_kernel(&k, IR_I32, IR_I64);
        else if (form == 2)
            swap_pairs_kernel(&k, 0);
        else
            reverse_kernel(&k, 0, form == 3 ? 4 : 8), fetches = form == 3 ? 1 : 2;
        if (form == 5) /* the written buffer marked: refused */
            fetches = -1;
        base_error err = {0};
        assert_int_equal(ir_verify(&k, &err), KILN_OK);
        for (int v = 0; v < 2; v++) {
            emit_options opt = {.spirv_version = v ? 0x10600 : 0x10300,
                                .paired_vectors = true,
                                .texel_buffers = fetches < 0 ? 1u : 2u};
            emit_result r;
            err = (base_error){0};
            if (fetches < 0) {
                assert_int_equal(emit_spirv(&k, &opt, &r, &err), KILN_ERROR_INTERNAL);
                assert_non_null(strstr(base_error_message(&err), "cannot be a texel buffer"));
                continue;
            }
            assert_int_equal(emit_spirv(&k, &opt, &r, &err), KILN_OK);
            if (spv_tools_available())
                assert_int_equal(spv_validate(r.words, r.word_count,
                                              v ? (1u << 22) | (3u << 12) : (1u << 22) | (1u << 12),
                                              &err),
                                 KILN_OK);
            assert_int_equal(r.texel_bindings, 2u);
            assert_int_equal(count_op(&r, OP_IMAGE_FETCH), fetches);
            assert_int_equal(count_op(&r, OP_TYPE_SAMPLED_IMAGE), 0);
            assert_true(declares(&r, CAP_SAMPLED_BUFFER));
            emit_result_free(alloc(), &r);
        }
        ir_kernel_finish(&k);
    }
}

static void test_ir_vector_interpreted_and_emitted(void **state) {
    (void)state;
    for (uint32_t w = 4; w <= 8; w += 4) {
        ir_kernel k;
        reverse_kernel(&k, 0, w);
        base_error err = {0};
        assert_int_equal(ir_verify(&k, &err), KILN_OK);
        float in[16], out[16] = {0}, want[16];
        for (uint32_t x = 0; x < 16; x++)
            in[x] = (float)(x + 1);
        for (uint32_t x = 0; x < 16; x++)
            want[x] = in[(x / w) * w + (w - 1 - x % w)] + 1;
        interp_buffer b[2] = {{out, 16}, {in, 16}};
        assert_int_equal(interp_run(&k, b, NULL, 16 / w, &err), KILN_OK);
        assert_memory_equal(out, want, sizeof want);
        assert_true(k.buffers[0].vector && k.buffers[1].vector);
        assert_int_equal(k.buffers[1].octets, w == 8);
        emitted(&k, w);
        ir_kernel_finish(&k);
    }
}

/* The kernel emitted unpaired and paired (CPU drivers: each four elements move as two 64-bit
 * integers, each bitcast to or from two elements: per four elements two bitcasts for the load,
 * two for the store, and the module declares Int64; otherwise neither). Unpaired, eight
 * elements are two vector accesses; paired, one (OpLoad/OpStore of a 64-bit vector). */
static void emitted(const ir_kernel *k, uint32_t w) {
    enum { OP_LOAD = 61, OP_STORE = 62, OP_BITCAST = 124, CAP_INT64 = 11 };
    int bitcasts[2], memory[2];
    base_error err = {0};
    for (int paired = 0; paired < 2; paired++) {
        emit_options opt = {.spirv_version = 0x10300, .paired_vectors = paired};
        emit_result r;
        assert_int_equal(emit_spirv(k, &opt, &r, &err), KILN_OK);
        assert_true(r.word_count > 5);
        if (spv_tools_available())
            assert_int_equal(spv_validate(r.words, r.word_count, (1u << 22) | (1u << 12), &err),
                             KILN_OK);
        bitcasts[paired] = count_op(&r, OP_BITCAST);
        memory[paired] = count_op(&r, OP_LOAD) + count_op(&r, OP_STORE);
        assert_int_equal(declares(&r, CAP_INT64), paired);
        emit_result_free(alloc(), &r);
    }
    assert_int_equal(bitcasts[1] - bitcasts[0], (int)w);
    assert_int_equal(memory[0] - memory[1], w == 8 ? 2 : 0);
}

/* An element index that is not a multiple of 4, or four elements past the end: an error that
 * names the code-generation bug, not a wild access. */
/* out[4g .. 4g+3] = in[i .. i+3] for i = g * 4096 + 8 (quarterable: the vector index is
 * g * 1024 + 2) or i = (g * 2) * 2 (not: the constants are not multiples of 4); looped: the
 * copy inside a loop of one iteration t, with t * 8 added to i. */
static void copy4_kernel(ir_kernel *k, bool quarterable, bool looped) {
    ir_value g = out_in_kernel(k);
    ir_value t = looped ? ir_range(k, ir_const_i(k, IR_I32, 1)) : IR_NONE;
    ir_value at;
    if (quarterable)
        at = ir_alu(k, IR_ADD, IR_I32,
                    ir_alu(k, IR_MUL, IR_I32, g, ir_const_i(k, IR_I32, 4096), IR_NONE),
                    ir_const_i(k, IR_I32, 8), IR_NONE);
    else
        at = ir_alu(k, IR_MUL, IR_I32,
                    ir_alu(k, IR_MUL, IR_I32, g, ir_const_i(k, IR_I32, 2), IR_NONE),
                    ir_const_i(k, IR_I32, 2), IR_NONE);
    if (looped)
        at = ir_alu(k, IR_ADD, IR_I32, at,
                    ir_alu(k, IR_MUL, IR_I32, t, ir_const_i(k, IR_I32, 8), IR_NONE), IR_NONE);
    ir_value vec = ir_load_vector(k, 1, at, 4), v[4];
    for (uint32_t c = 0; c < 4; c++)
        v[c] = ir_extract(k, vec, c);
    ir_store_vector(k, 0, ir_alu(k, IR_MUL, IR_I32, g, ir_const_i(k, IR_I32, 4), IR_NONE), v, 4);
    if (looped)
        ir_endrange(k);
}

/* With opaque_multipliers, an invocation's index that flows into a loop is multiplied by
 * constant * NumWorkgroups.z (one more multiplication per such constant), and a vector index
 * in the loop is the element index's terms divided by 4 when they are multiples of 4 (no
 * shift). Straight-line code, and every kernel without the option, keeps its constants and
 * shifts the element index. */
static void test_ir_vector_index_emission(void **state) {
    (void)state;
    enum { OP_IMUL = 132, OP_SHIFT_RIGHT_LOGICAL = 194 };
    for (int looped = 0; looped < 2; looped++) {
        for (int quarterable = 0; quarterable < 2; quarterable++) {
            int muls[2];
            for (int opaque = 0; opaque < 2; opaque++) {
                ir_kernel k;
                copy4_kernel(&k, quarterable, looped);
                base_error err = {0};
                assert_int_equal(ir_verify(&k, &err), KILN_OK);
                float in[8200], out[8] = {0};
                for (int x = 0; x < 8200; x++)
                    in[x] = (float)x;
                interp_buffer b[2] = {{out, 8}, {in, 8200}};
                assert_int_equal(interp_run(&k, b, NULL, 2, &err), KILN_OK);
                assert_true(out[4] == (quarterable ? 4104.0f : 4.0f)); /* g = 1 */
                emit_options opt = {.spirv_version = 0x10300, .opaque_multipliers = opaque};
                emit_result r;
                assert_int_equal(emit_spirv(&k, &opt, &r, &err), KILN_OK);
                if (spv_tools_available())
                    assert_int_equal(
                        spv_validate(r.words, r.word_count, (1u << 22) | (1u << 12), &err),
                        KILN_OK);
                /* Shifts: the load's and the store's, unless quartered (the store's index
                 * g * 4 is quarterable in both kernels). */
                int shifts = !(looped && opaque) ? 2 : quarterable ? 0 : 1;
                assert_int_equal(count_op(&r, OP_SHIFT_RIGHT_LOGICAL), shifts);
                muls[opaque] = count_op(&r, OP_IMUL);
                emit_result_free(alloc(), &r);
                ir_kernel_finish(&k);
            }
            if (looped)
                assert_true(muls[1] > muls[0]);
            else
                assert_int_equal(muls[1], muls[0]);
        }
    }
}

static void test_ir_vector_interpreter_checks(void **state) {
    (void)state;
    ir_kernel k;
    for (uint32_t w = 4; w <= 8; w += 4) {
        reverse_kernel(&k, w / 2, w); /* a multiple of 2 but not of w */
        base_error err = {0};
        float in[24] = {0}, out[24] = {0};
        interp_buffer b[2] = {{out, 24}, {in, 24}};
        assert_int_equal(interp_run(&k, b, NULL, 1, &err), KILN_ERROR_INTERNAL);
        assert_non_null(strstr(base_error_message(&err),
                               w == 4 ? "not a multiple of 4" : "not a multiple of 8"));
        ir_kernel_finish(&k);

        reverse_kernel(&k, 0, w);
        err = (base_error){0};
        interp_buffer short_in[2] = {{out, 24}, {in, 2 * w - 1}}; /* the second group's last */
        assert_int_equal(interp_run(&k, short_in, NULL, 2, &err), KILN_ERROR_INTERNAL);
        assert_non_null(strstr(base_error_message(&err), "code-generation bug"));
        ir_kernel_finish(&k);
    }
}

/* A kernel of one buffer of type t; returns the constant index 0. */
static ir_value one_buffer(ir_kernel *k, ir_type t) {
    ir_kernel_init(k, alloc(), IR_I32);
    ir_buffer_add(k, t);
    return ir_const_i(k, IR_I32, 0);
}

/* Verifies k, expecting status want (and, where says is not NULL, a message holding it), then
 * finishes it. */
static void verified(ir_kernel *k, kiln_status want, const char *says) {
    base_error err = {0};
    assert_int_equal(ir_verify(k, &err), want);
    if (says)
        assert_non_null(strstr(base_error_message(&err), says));
    ir_kernel_finish(k);
}

static void test_ir_vector_verifier_rules(void **state) {
    (void)state;
    ir_kernel k;
    /* an instruction between a LOAD4 and its EXTRACT */
    ir_value vec = ir_load_vector(&k, 0, one_buffer(&k, IR_F32), 4);
    ir_value c = ir_const_f(&k, IR_F32, 2.0);
    ir_value e = ir_extract(&k, vec, 1);
    (void)ir_alu(&k, IR_ADD, IR_F32, e, c, IR_NONE);
    verified(&k, KILN_ERROR_INTERNAL, "right after its vector load");
    /* the vector itself as an ALU operand */
    vec = ir_load_vector(&k, 0, one_buffer(&k, IR_F32), 4);
    (void)ir_alu(&k, IR_NEG, IR_F32, vec, IR_NONE, IR_NONE);
    verified(&k, KILN_ERROR_INTERNAL, "other than by EXTRACT");
    /* an element past 3 of a LOAD4, past 7 of a LOAD8; 7 of a LOAD8 is fine */
    for (uint32_t w = 4; w <= 12; w += 4) {
        ir_value index = one_buffer(&k, IR_F32);
        (void)ir_extract(&k, ir_load_vector(&k, 0, index, w == 4 ? 4 : 8), w == 12 ? 7 : w);
        verified(&k, w == 12 ? KILN_OK : KILN_ERROR_INTERNAL, NULL);
    }
    /* a row pair whose row is a float */
    ir_value fi = one_buffer(&k, IR_F32);
    (void)ir_load_row_pair(&k, 0, fi, ir_const_f(&k, IR_F32, 1.0), 0);
    verified(&k, KILN_ERROR_INTERNAL, "row is not an index");
    /* element 2 of a LOAD2 */
    (void)ir_extract(&k, ir_load_vector(&k, 0, one_buffer(&k, IR_F32), 2), 2);
    verified(&k, KILN_ERROR_INTERNAL, "EXTRACT needs");
    /* a vector width other than 2, 4 and 8 (a load), 4 and 8 (a store): refused when built */
    assert_int_equal(ir_load_vector(&k, 0, one_buffer(&k, IR_F32), 3), IR_NONE);
    verified(&k, KILN_ERROR_INTERNAL, NULL);
    ir_value at = one_buffer(&k, IR_F32);
    ir_value two[2] = {ir_const_f(&k, IR_F32, 1.0), ir_const_f(&k, IR_F32, 2.0)};
    ir_store_vector(&k, 0, at, two, 2);
    verified(&k, KILN_ERROR_INTERNAL, NULL);
    /* vectors of a type without vector access (u8): refused when built */
    assert_int_equal(ir_load_vector(&k, 0, one_buffer(&k, IR_U8), 4), IR_NONE);
    verified(&k, KILN_ERROR_INTERNAL, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ir_vector_interpreted_and_emitted),
        cmocka_unit_test(test_ir_vector_pairs),
        cmocka_unit_test(test_ir_vector_texel_buffers),
        cmocka_unit_test(test_ir_vector_row_pairs),
        cmocka_unit_test(test_ir_vector_index_emission),
        cmocka_unit_test(test_ir_vector_interpreter_checks),
        cmocka_unit_test(test_ir_vector_verifier_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
