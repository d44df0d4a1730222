/* examples/gpt2_model.h: GPT-2 inference with Kiln's public API, shared by examples/gpt2.c,
 * tests/examples/test_gpt2.c and bench/bench_gpt2.c.
 *
 * The architecture is GPT-2's (Radford et al. 2019; Hugging Face's GPT2LMHeadModel): token and
 * learned position embeddings, pre-norm blocks (LayerNorm eps 1e-5, causal self-attention,
 * LayerNorm, an MLP of 4 d with GELU's tanh form), a final LayerNorm, and logits from the token
 * embedding (tied: no lm_head). Weights come from a safetensors file laid out and named as the
 * published GPT-2 files: wte.weight (V, d), wpe.weight (n_ctx, d), h.N.ln_1.weight/bias,
 * h.N.attn.c_attn.weight (d, 3 d: Conv1D, used as x @ W + b), h.N.attn.c_proj.*, h.N.ln_2.*,
 * h.N.mlp.c_fc.*, h.N.mlp.c_proj.*, ln_f.*; names may carry a "transformer." prefix, and the
 * h.N.attn.bias / masked_bias buffers are skipped. Every size comes from the shapes; the layer
 * count from the names; the head count from the caller, else the file's metadata "n_head",
 * else 12. F32, F16 and BF16 weights load as F32 (kiln_safetensors.h reads the file).
 *
 * Generation keeps a KV cache, per layer K and V of (heads, n_ctx, head_dim), made once. A step
 * of T tokens at position pos binds two Variables (pos and T), writes the step's keys and values
 * into the cache through kiln_narrow_sym views (kiln_copy_) and attends over a view of the cache
 * of symbolic length pos + T with a causal mask. Since every size that changes is a Variable,
 * the kernels of the first prompt serve every prompt length, and those of the first decode step
 * every later position: nothing else compiles. Each step runs inside a scope: memory is flat.
 *
 *     gpt2_model m;
 *     char msg[256];
 *     if (gpt2_load(ctx, "model.safetensors", 0, &m, msg, sizeof msg) != KILN_OK) ...
 *     float *logits = malloc(sizeof(float) * m.vocab);
 *     gpt2_step(&m, prompt, prompt_len, logits);     // prefill: pos 0 .. prompt_len - 1
 *     int32_t next = gpt2_argmax(logits, m.vocab);
 *     gpt2_step(&m, &next, 1, logits);                // decode: one position
 *     gpt2_finish(&m);
 */
#ifndef KILN_EXAMPLES_GPT2_MODEL_H
#define KILN_EXAMPLES_GPT2_MODEL_H

#include <kiln/kiln.h>

#include <stddef.h>
#include <stdint.h>

typedef struct gpt2_layer {
    kiln_tensor *ln1_w, *ln1_b;     /* (d) */
    kiln_tensor *attn_w, *attn_b;   /* (d, 3 d), (3 d) */
    kiln_tensor *proj_w, *proj_b;   /* (d, d), (d) */
    kiln_tensor *ln2_w, *ln2_b;     /* (d) */
    kiln_tensor *fc_w, *fc_b;       /* (d, 4 d), (4 d) */
    kiln_tensor *out_w, *out_b;     /* (4 d, d), (d) */
    kiln_tensor *k_cache, *v_cache; /* (heads, n_ctx, head_dim), written in place */
} gpt2_layer;

typedef struct gpt2_model {
    kiln_context *ctx;
    int64_t layers, d, heads, head_dim, vocab, n_ctx;
    kiln_tensor *wte, *wpe;     /* (vocab, d), (n_ctx, d) */
    kiln_tensor *lnf_w, *lnf_b; /* (d) */
    gpt2_layer *layer;          /* [layers] */
    const kiln_expr *pos_var;   /* the step's first position, 0 .. n_ctx - 1 */
    const kiln_expr *len_var;   /* the step's token count, 1 .. n_ctx */
    int64_t pos;                /* positions filled in the cache */
    uint64_t weight_bytes;      /* bytes of the weights as loaded (F32) */
} gpt2_model;

/* Loads the checkpoint at path into ctx (weights on the device) and makes the KV cache. heads 0:
 * the metadata's "n_head", else 12. On failure returns a status (kiln_safetensors_open's for a
 * file it refuses: KILN_ERROR_NOT_FOUND, KILN_ERROR_IO, KILN_ERROR_CORRUPT_DATA, ...;
 * KILN_ERROR_INVALID_ARGUMENT for a missing or mis-shaped tensor or sizes that are no GPT-2's; a
 * Kiln status otherwise) and writes a message into msg; the context keeps no error, and m is
 * empty (gpt2_finish of it is a no-op). */
kiln_status gpt2_load(kiln_context *ctx, const char *path, int64_t heads, gpt2_model *m, char *msg,
                      size_t msg_size);
/* Releases the weights and the cache (the context stays). */
void gpt2_finish(gpt2_model *m);
/* Forgets the cached positions: the next step starts at position 0. */
void gpt2_reset(gpt2_model *m);

/* Runs ids[0..count) at positions m->pos .. m->pos + count - 1 (count >= 1, m->pos + count <=
 * n_ctx: else KILN_ERROR_OUT_OF_RANGE), appends their keys and values to the cache and writes
 * the logits of the last position (vocab floats) into logits. An id outside [0, vocab) is
 * KILN_ERROR_OUT_OF_RANGE (checked on the host). On a Kiln failure the context's message says
 * why; m->pos advances only on success. */
kiln_status gpt2_step(gpt2_model *m, const int32_t *ids, int64_t count, float *logits);

/* The first index of the largest logit. */
int32_t gpt2_argmax(const float *logits, int64_t vocab);
/* A sample from softmax(logits / temperature) restricted to the top_k largest logits (top_k 0:
 * all), drawn with *rng (any seed; advanced); temperature <= 0 is gpt2_argmax. scratch holds
 * vocab floats and vocab int32s (gpt2_sample_scratch_bytes). */
size_t gpt2_sample_scratch_bytes(int64_t vocab);
int32_t gpt2_sample(const float *logits, int64_t vocab, double temperature, int64_t top_k,
                    uint64_t *rng, void *scratch);

#endif
