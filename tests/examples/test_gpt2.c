/* examples/gpt2_model.c (the model of examples/gpt2.c) on a random 2-layer GPT-2 written by
 * gen_gpt2_tiny.py as a published-layout safetensors file, against PyTorch's float64 logits
 * (gpt2_tiny_ref.h).
 *
 * On the default Vulkan device (validation on): the prefill of the 7-id prompt and 32 greedy
 * decode steps give the reference logits within 1e-4 and the same ids; no decode step after the
 * first compiles a kernel, and every live count (tensors, storages, bytes, expressions) is the
 * same after each step from the second on; prompts of 10 and 20 ids (the prompt and the first
 * greedy ids: their last logits are rows 3 and 13 of the reference) compile nothing the first
 * prompt did not, nor does a chunk of 3 ids after the prompt (row 3 again). On the interpreter
 * (slow under ASan), the same checks over 3 decode steps, and the chunk without the longer
 * prompts. Loading: a missing
 * file, every truncated prefix of the header, a truncated data section, and a file without a
 * needed tensor are refused with a status and a message. */
#include "../../examples/gpt2_model.h"
#include "gpt2_tiny_ref.h"

#include "engine_fixture.h"

#include <kiln/kiln.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static const double TOL = 1e-4;
enum { INTERP_STEPS = 3 };

static void expect_ok(kiln_context *ctx, kiln_status st, const char *what) {
    if (st != KILN_OK)
        fail_msg("%s: %s (%s)", what, kiln_status_string(st), kiln_context_message(ctx));
}

static void load(kiln_context *ctx, gpt2_model *m) {
    char msg[512] = "";
    kiln_status st = gpt2_load(ctx, GPT2_TINY_PATH, 0, m, msg, sizeof msg);
    if (st != KILN_OK)
        fail_msg("gpt2_load: %s: %s", kiln_status_string(st), msg);
    assert_int_equal(m->layers, GPT2_TINY_LAYERS);
    assert_int_equal(m->d, GPT2_TINY_D);
    assert_int_equal(m->heads, GPT2_TINY_HEADS); /* from the metadata's n_head */
    assert_int_equal(m->vocab, GPT2_TINY_VOCAB);
    assert_int_equal(m->n_ctx, GPT2_TINY_CTX);
}

/* |got - want| <= TOL for every logit of reference row `row`. */
static void check_row(const float *got, int row) {
    double worst = 0;
    int at = 0;
    for (int i = 0; i < GPT2_TINY_VOCAB; i++) {
        double diff = fabs((double)got[i] - (double)gpt2_tiny_logits[row][i]);
        if (diff > worst || isnan(diff))
            worst = diff, at = i;
    }
    if (!(worst <= TOL))
        fail_msg("logits row %d: [%d] = %.7g, reference %.7g (|diff| %.3g > %.0e)", row, at,
                 (double)got[at], (double)gpt2_tiny_logits[row][at], worst, TOL);
}

typedef struct live {
    uint64_t tensors, nodes, storages, storage_bytes, expressions, compiled;
} live;

static live live_now(kiln_context *ctx) {
    kiln_stats s = kiln_context_stats(ctx);
    return (live){s.live_tensors,       s.live_nodes,       s.live_storages,
                  s.live_storage_bytes, s.live_expressions, s.kernels_compiled};
}

static void assert_live_equal(live a, live b, int step) {
    if (memcmp(&a, &b, sizeof a) != 0)
        fail_msg("step %d: live tensors %llu -> %llu, nodes %llu -> %llu, storages %llu -> %llu "
                 "(%llu -> %llu B), expressions %llu -> %llu, kernels compiled %llu -> %llu",
                 step, (unsigned long long)a.tensors, (unsigned long long)b.tensors,
                 (unsigned long long)a.nodes, (unsigned long long)b.nodes,
                 (unsigned long long)a.storages, (unsigned long long)b.storages,
                 (unsigned long long)a.storage_bytes, (unsigned long long)b.storage_bytes,
                 (unsigned long long)a.expressions, (unsigned long long)b.expressions,
                 (unsigned long long)a.compiled, (unsigned long long)b.compiled);
}

static void test_examples_gpt2_decode_matches_torch_and_compiles_once(void **state) {
    kiln_context *ctx = fx_ctx(state);
    bool device = ((eng_fixture *)*state)->device;
    int steps = device ? GPT2_TINY_STEPS : INTERP_STEPS;
    gpt2_model m;
    load(ctx, &m);
    float logits[GPT2_TINY_VOCAB];
    expect_ok(ctx, gpt2_step(&m, gpt2_tiny_prompt, GPT2_TINY_PROMPT, logits), "prefill");
    check_row(logits, 0);
    live after_second = {0};
    for (int step = 1; step <= steps; step++) {
        int32_t next = gpt2_argmax(logits, m.vocab);
        assert_int_equal(next, gpt2_tiny_ids[step - 1]);
        expect_ok(ctx, gpt2_step(&m, &next, 1, logits), "decode step");
        check_row(logits, step);
        if (step == 2)
            after_second = live_now(ctx);
        else if (step > 2)
            assert_live_equal(after_second, live_now(ctx), step);
    }
    assert_int_equal(m.pos, GPT2_TINY_PROMPT + steps);
    /* Past the context: refused on the host, nothing changes. */
    int32_t many[GPT2_TINY_CTX] = {0};
    assert_int_equal(gpt2_step(&m, many, GPT2_TINY_CTX, logits), KILN_ERROR_OUT_OF_RANGE);
    int32_t bad = GPT2_TINY_VOCAB;
    assert_int_equal(gpt2_step(&m, &bad, 1, logits), KILN_ERROR_OUT_OF_RANGE);
    assert_int_equal(m.pos, GPT2_TINY_PROMPT + steps);
    gpt2_finish(&m);
}

/* Prefills of 7, 10 and 20 ids: the later two compile nothing, and their last logits are the
 * reference's rows 3 and 13 (the prompt followed by the greedy ids is the same sequence). */
static void test_examples_gpt2_prompts_of_any_length_compile_once(void **state) {
    kiln_context *ctx = fx_ctx(state);
    bool device = ((eng_fixture *)*state)->device;
    gpt2_model m;
    load(ctx, &m);
    int32_t seq[GPT2_TINY_PROMPT + GPT2_TINY_STEPS];
    memcpy(seq, gpt2_tiny_prompt, sizeof gpt2_tiny_prompt);
    memcpy(seq + GPT2_TINY_PROMPT, gpt2_tiny_ids, sizeof gpt2_tiny_ids);
    float logits[GPT2_TINY_VOCAB];
    expect_ok(ctx, gpt2_step(&m, seq, GPT2_TINY_PROMPT, logits), "prefill of 7");
    check_row(logits, 0);
    uint64_t compiled = kiln_context_stats(ctx).kernels_compiled;
    const int rows[] = {3, 13};
    for (int i = 0; i < (device ? 2 : 0); i++) {
        gpt2_reset(&m);
        expect_ok(ctx, gpt2_step(&m, seq, GPT2_TINY_PROMPT + rows[i], logits), "prefill");
        check_row(logits, rows[i]);
        assert_int_equal(kiln_context_stats(ctx).kernels_compiled, compiled);
    }
    /* A chunk of 3 ids after the prompt (queries at positions 7..9 over keys 0..9: the mask's
     * diagonal shifted by the cache) continues the same sequence: row 3 again. */
    gpt2_reset(&m);
    expect_ok(ctx, gpt2_step(&m, seq, GPT2_TINY_PROMPT, logits), "prefill of 7");
    expect_ok(ctx, gpt2_step(&m, seq + GPT2_TINY_PROMPT, 3, logits), "chunk of 3");
    check_row(logits, 3);
    assert_int_equal(kiln_context_stats(ctx).kernels_compiled, compiled);
    gpt2_finish(&m);
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static unsigned char *read_fixture(size_t *n) {
    FILE *f = fopen(GPT2_TINY_PATH, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    *n = (size_t)ftell(f);
    rewind(f);
    unsigned char *data = malloc(*n);
    assert_non_null(data);
    assert_int_equal(fread(data, 1, *n, f), *n);
    fclose(f);
    return data;
}

/* Every truncated prefix of the header (and of the data) is refused with a message, without a
 * tensor made; a missing file is KILN_ERROR_NOT_FOUND; a file without ln_f.bias names it. */
static void test_examples_gpt2_load_refuses_truncated_and_missing(void **state) {
    kiln_context *ctx = fx_ctx(state);
    gpt2_model m;
    char msg[512], path[64];
    snprintf(path, sizeof path, "/tmp/kiln_test_gpt2_%d.safetensors", (int)getpid());
    assert_int_equal(gpt2_load(ctx, "/nonexistent/gpt2.safetensors", 0, &m, msg, sizeof msg),
                     KILN_ERROR_NOT_FOUND);
    assert_non_null(strstr(msg, "/nonexistent/gpt2.safetensors"));
    size_t n;
    unsigned char *data = read_fixture(&n);
    size_t header = 8;
    for (int i = 7; i >= 0; i--)
        header = header << 8 | data[i];
    header += 8;
    uint64_t tensors = kiln_context_stats(ctx).live_tensors;
    size_t cuts[] = {header + 1, header + 4096, n / 2, n - 1};
    for (size_t len = 0; len < header + 4; len++) {
        size_t cut = len < header ? len : cuts[len - header];
        msg[0] = 0;
        write_file(path, data, cut);
        kiln_status st = gpt2_load(ctx, path, 0, &m, msg, sizeof msg);
        if (st == KILN_OK)
            fail_msg("a file cut at %zu of %zu bytes loaded", cut, n);
        assert_true(st == KILN_ERROR_CORRUPT_DATA || st == KILN_ERROR_INVALID_ARGUMENT);
        assert_true(msg[0] != 0);
        assert_int_equal(kiln_context_status(ctx), KILN_OK);
        assert_int_equal(kiln_context_stats(ctx).live_tensors, tensors);
    }
    /* Rename ln_f.bias (same length): the load names the missing tensor. */
    unsigned char *at = memmem(data, header, "\"ln_f.bias\"", 11);
    assert_non_null(at);
    memcpy(at, "\"ln_f.bizs\"", 11);
    write_file(path, data, n);
    assert_int_equal(gpt2_load(ctx, path, 0, &m, msg, sizeof msg), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "ln_f.bias"));
    assert_int_equal(kiln_context_stats(ctx).live_tensors, tensors);
    remove(path);
    free(data);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_examples_gpt2_decode_matches_torch_and_compiles_once),
        ENG_TEST(test_examples_gpt2_prompts_of_any_length_compile_once),
        ENG_TEST(test_examples_gpt2_load_refuses_truncated_and_missing),
    };
    return ENG_RUN_BOTH(tests);
}
