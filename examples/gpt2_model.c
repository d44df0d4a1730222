/* examples/gpt2_model.c: GPT-2 with Kiln's public API (see gpt2_model.h): the weights (read with
 * kiln_safetensors.h) and KV cache, one step of prefill or decode, and sampling on the host. */
#include "gpt2_model.h"

#include <kiln/kiln_safetensors.h>

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the weights --------------------------------------------------------------------------- */

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static kiln_status
fail(char *msg, size_t size, kiln_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (size)
        vsnprintf(msg, size, fmt, ap);
    va_end(ap);
    return st;
}

/* The file's name for name: name itself, or "transformer." name (the prefix of Hugging Face's
 * GPT2Model), else NULL. (A scan of the names: a query of a missing one would leave a message.) */
static const char *file_name(const kiln_safetensors *f, const char *name) {
    for (uint32_t i = 0; i < kiln_safetensors_count(f); i++) {
        const char *n = kiln_safetensors_name(f, i);
        if (strcmp(n, name) == 0 ||
            (strncmp(n, "transformer.", 12) == 0 && strcmp(n + 12, name) == 0))
            return n;
    }
    return NULL;
}

/* Loads tensor name as F32; it must have ndim dims of sizes shape (-1: any; the size found is
 * stored there). */
static kiln_status load_tensor(kiln_context *ctx, kiln_safetensors *f, const char *name,
                               uint32_t ndim, int64_t *shape, kiln_tensor **out, uint64_t *bytes,
                               char *msg, size_t size) {
    *out = NULL;
    const char *fname = file_name(f, name);
    uint32_t got = 0;
    int64_t dims[KILN_MAX_DIMS];
    if (!fname || kiln_safetensors_info(f, fname, NULL, &got, dims) != KILN_OK)
        return fail(msg, size, KILN_ERROR_INVALID_ARGUMENT, "no tensor %s", name);
    bool ok = got == ndim;
    for (uint32_t d = 0; ok && d < ndim; d++) {
        if (shape[d] < 0)
            shape[d] = dims[d];
        ok = dims[d] == shape[d];
    }
    if (!ok)
        return fail(msg, size, KILN_ERROR_INVALID_ARGUMENT, "tensor %s: unexpected shape", name);
    *out = kiln_safetensors_load(f, fname, KILN_F32);
    if (!*out) {
        kiln_status st = kiln_context_status(ctx);
        fail(msg, size, st, "tensor %s: %s", name, kiln_context_message(ctx));
        kiln_context_clear_error(ctx);
        return st;
    }
    int64_t numel = 1;
    for (uint32_t d = 0; d < ndim; d++)
        numel *= shape[d];
    *bytes += (uint64_t)numel * sizeof(float);
    return KILN_OK;
}

/* Layers: one more than the largest N of the names h.N.* (or transformer.h.N.*). */
static int64_t count_layers(const kiln_safetensors *f) {
    int64_t layers = 0;
    for (uint32_t i = 0; i < kiln_safetensors_count(f); i++) {
        const char *n = kiln_safetensors_name(f, i);
        if (strncmp(n, "transformer.", 12) == 0)
            n += 12;
        char *end;
        if (strncmp(n, "h.", 2) != 0)
            continue;
        long v = strtol(n + 2, &end, 10);
        if (end != n + 2 && *end == '.' && v >= 0 && v < 100000 && v + 1 > layers)
            layers = v + 1;
    }
    return layers;
}

static kiln_status load_layer(gpt2_model *m, kiln_safetensors *f, int64_t i, char *msg,
                              size_t size) {
    gpt2_layer *l = &m->layer[i];
    int64_t d3 = 3 * m->d;
    int64_t ff = -1; /* the MLP's width, from c_fc */
    struct {
        const char *suffix;
        kiln_tensor **out;
        uint32_t ndim;
        int64_t *a, *b;
    } parts[] = {
        {"ln_1.weight", &l->ln1_w, 1, &m->d, NULL},
        {"ln_1.bias", &l->ln1_b, 1, &m->d, NULL},
        {"attn.c_attn.weight", &l->attn_w, 2, &m->d, &d3},
        {"attn.c_attn.bias", &l->attn_b, 1, &d3, NULL},
        {"attn.c_proj.weight", &l->proj_w, 2, &m->d, &m->d},
        {"attn.c_proj.bias", &l->proj_b, 1, &m->d, NULL},
        {"ln_2.weight", &l->ln2_w, 1, &m->d, NULL},
        {"ln_2.bias", &l->ln2_b, 1, &m->d, NULL},
        {"mlp.c_fc.weight", &l->fc_w, 2, &m->d, &ff},
        {"mlp.c_fc.bias", &l->fc_b, 1, &ff, NULL},
        {"mlp.c_proj.weight", &l->out_w, 2, &ff, &m->d},
        {"mlp.c_proj.bias", &l->out_b, 1, &m->d, NULL},
    };
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
        char name[96];
        snprintf(name, sizeof name, "h.%lld.%s", (long long)i, parts[p].suffix);
        int64_t shape[2] = {*parts[p].a, parts[p].b ? *parts[p].b : 0};
        kiln_status s = load_tensor(m->ctx, f, name, parts[p].ndim, shape, parts[p].out,
                                    &m->weight_bytes, msg, size);
        if (s != KILN_OK)
            return s;
        if (parts[p].b == &ff)
            ff = shape[1];
    }
    /* The products' weights stored transposed, (out, in): each output of a product then reads
     * a contiguous row (a decode step is matrix-vector products). */
    kiln_tensor **w[4] = {&l->attn_w, &l->proj_w, &l->fc_w, &l->out_w};
    for (int k = 0; k < 4; k++) {
        kiln_tensor *view = kiln_transpose(*w[k], 0, 1), *t = kiln_contiguous(view);
        kiln_status st = kiln_realize(t);
        kiln_release(view);
        kiln_release(*w[k]); /* the (in, out) storage goes */
        *w[k] = t;
        if (st != KILN_OK)
            return fail(msg, size, st, "%s", kiln_context_message(m->ctx));
    }
    const int64_t cache[3] = {m->heads, m->n_ctx, m->head_dim};
    l->k_cache = kiln_empty(m->ctx, KILN_F32, 3, cache);
    l->v_cache = kiln_empty(m->ctx, KILN_F32, 3, cache);
    if (!l->k_cache || !l->v_cache)
        return fail(msg, size, kiln_context_status(m->ctx), "KV cache: %s",
                    kiln_context_message(m->ctx));
    return KILN_OK;
}

kiln_status gpt2_load(kiln_context *ctx, const char *path, int64_t heads, gpt2_model *m, char *msg,
                      size_t size) {
    memset(m, 0, sizeof *m);
    m->ctx = ctx;
    kiln_safetensors *f = NULL;
    kiln_status s = kiln_safetensors_open(ctx, path, &f);
    if (s != KILN_OK) {
        fail(msg, size, s, "%s", kiln_context_message(ctx));
        kiln_context_clear_error(ctx);
        return s;
    }
    int64_t wte[2] = {-1, -1}, wpe[2] = {-1, -1};
    s = load_tensor(ctx, f, "wte.weight", 2, wte, &m->wte, &m->weight_bytes, msg, size);
    if (s == KILN_OK) {
        wpe[1] = wte[1];
        s = load_tensor(ctx, f, "wpe.weight", 2, wpe, &m->wpe, &m->weight_bytes, msg, size);
    }
    if (s != KILN_OK)
        goto undo_load;
    m->vocab = wte[0], m->d = wte[1], m->n_ctx = wpe[0];
    const char *n_head = kiln_safetensors_metadata(f, "n_head");
    m->heads = heads > 0 ? heads : n_head ? strtol(n_head, NULL, 10) : 12;
    m->layers = count_layers(f);
    if (m->heads <= 0 || m->d % m->heads != 0 || m->n_ctx < 1 || m->layers < 1) {
        s = fail(msg, size, KILN_ERROR_INVALID_ARGUMENT,
                 "%s: d = %lld, heads = %lld, n_ctx = %lld, layers = %lld: not a GPT-2", path,
                 (long long)m->d, (long long)m->heads, (long long)m->n_ctx, (long long)m->layers);
        goto undo_load;
    }
    m->head_dim = m->d / m->heads;
    m->layer = calloc((size_t)m->layers, sizeof *m->layer);
    if (!m->layer) {
        s = fail(msg, size, KILN_ERROR_OUT_OF_HOST_MEMORY, "out of memory");
        goto undo_load;
    }
    for (int64_t i = 0; i < m->layers && s == KILN_OK; i++)
        s = load_layer(m, f, i, msg, size);
    int64_t dshape[1] = {m->d};
    if (s == KILN_OK)
        s = load_tensor(ctx, f, "ln_f.weight", 1, dshape, &m->lnf_w, &m->weight_bytes, msg, size);
    if (s == KILN_OK)
        s = load_tensor(ctx, f, "ln_f.bias", 1, dshape, &m->lnf_b, &m->weight_bytes, msg, size);
    if (s != KILN_OK)
        goto undo_load;
    m->pos_var = kiln_variable(ctx, "gpt2_pos", 0, m->n_ctx - 1);
    m->len_var = kiln_variable(ctx, "gpt2_len", 1, m->n_ctx);
    if (!m->pos_var || !m->len_var) {
        s = fail(msg, size, kiln_context_status(ctx), "%s", kiln_context_message(ctx));
        goto undo_load;
    }
    kiln_safetensors_close(f);
    return KILN_OK;
undo_load:
    kiln_safetensors_close(f);
    gpt2_finish(m);
    return s;
}

void gpt2_finish(gpt2_model *m) {
    if (m->layer) {
        for (int64_t i = 0; i < m->layers; i++) {
            kiln_tensor **t = &m->layer[i].ln1_w;
            for (size_t k = 0; k < sizeof(gpt2_layer) / sizeof(kiln_tensor *); k++)
                kiln_release(t[k]);
        }
    }
    kiln_release(m->wte);
    kiln_release(m->wpe);
    kiln_release(m->lnf_w);
    kiln_release(m->lnf_b);
    free(m->layer);
    memset(m, 0, sizeof *m);
}

void gpt2_reset(gpt2_model *m) {
    m->pos = 0;
}

/* ---- one step ------------------------------------------------------------------------------ */

static kiln_tensor *linear(kiln_tensor *x, kiln_tensor *w, kiln_tensor *b) {
    return kiln_add(kiln_matmul(x, kiln_transpose(w, 0, 1)), b); /* w: Conv1D's, transposed */
}

/* (T, d) -> (heads, T, head_dim): column block `part` (q, k, v) of qkv (T, 3 d). */
static kiln_tensor *split_heads(const gpt2_model *m, kiln_tensor *qkv, int64_t part,
                                const kiln_expr *T) {
    kiln_context *ctx = m->ctx;
    kiln_tensor *x = kiln_narrow(qkv, 1, part * m->d, m->d);
    const kiln_expr *shape[3] = {T, kiln_int(ctx, m->heads), kiln_int(ctx, m->head_dim)};
    return kiln_permute(kiln_reshape_sym(x, 3, shape), (int32_t[]){1, 0, 2});
}

/* Causal self-attention of h (T, d) at positions pos .. pos + T - 1, through layer l's cache. */
static kiln_tensor *attention(const gpt2_model *m, const gpt2_layer *l, kiln_tensor *h,
                              const kiln_expr *P, const kiln_expr *T) {
    kiln_context *ctx = m->ctx;
    const kiln_expr *PT = kiln_expr_add(ctx, P, T), *zero = kiln_int(ctx, 0);
    kiln_tensor *qkv = linear(h, l->attn_w, l->attn_b);
    kiln_tensor *q = split_heads(m, qkv, 0, T);
    /* This step's keys and values go into the cache in place, at pos .. pos + T - 1. */
    if (kiln_copy_(kiln_narrow_sym(l->k_cache, 1, P, T), split_heads(m, qkv, 1, T)) != KILN_OK ||
        kiln_copy_(kiln_narrow_sym(l->v_cache, 1, P, T), split_heads(m, qkv, 2, T)) != KILN_OK)
        return NULL;
    kiln_tensor *k = kiln_narrow_sym(l->k_cache, 1, zero, PT); /* (heads, pos + T, head_dim) */
    kiln_tensor *v = kiln_narrow_sym(l->v_cache, 1, zero, PT);
    kiln_tensor *s = kiln_mul_scalar(kiln_matmul(q, kiln_transpose(k, 1, 2)),
                                     1.0 / sqrt((double)m->head_dim)); /* (heads, T, pos + T) */
    s = kiln_add(s, kiln_causal_mask(ctx, KILN_F32, T, PT));
    /* The probabilities stored: fused, each of the head_dim outputs recomputed its row's exps. */
    kiln_tensor *a = kiln_matmul(kiln_contiguous(kiln_softmax(s, -1)), v); /* (heads, T, hd) */
    a = kiln_permute(a, (int32_t[]){1, 0, 2});
    a = kiln_reshape_sym(a, 2, (const kiln_expr *[]){T, kiln_int(ctx, m->d)});
    return linear(a, l->proj_w, l->proj_b);
}

/* The normalized rows are stored (kiln_contiguous) before the products read them: fused, each
 * of a product's outputs would recompute its whole row of the residual stream. */
static kiln_tensor *norm(kiln_tensor *x, kiln_tensor *w, kiln_tensor *b) {
    return kiln_contiguous(kiln_layer_norm(x, 1, w, b, 1e-5));
}

static kiln_tensor *block(const gpt2_model *m, const gpt2_layer *l, kiln_tensor *x,
                          const kiln_expr *P, const kiln_expr *T) {
    kiln_tensor *h = norm(x, l->ln1_w, l->ln1_b);
    x = kiln_add(x, attention(m, l, h, P, T));
    h = norm(x, l->ln2_w, l->ln2_b);
    h = kiln_contiguous(kiln_gelu(linear(h, l->fc_w, l->fc_b), true)); /* not d times a tanh */
    return kiln_add(x, linear(h, l->out_w, l->out_b));
}

/* The logits (1, vocab) of the last of ids' positions; NULL on an error (in the context). */
static kiln_tensor *forward(const gpt2_model *m, const int32_t *ids, int64_t count) {
    kiln_context *ctx = m->ctx;
    const kiln_expr *P = kiln_bind(ctx, m->pos_var, m->pos);
    const kiln_expr *T = kiln_bind(ctx, m->len_var, count);
    /* The ids' tensor is sized by the Variable, so that no kernel depends on the count. */
    kiln_tensor *idx = kiln_reshape_sym(kiln_from_data(ctx, KILN_I32, 1, &count, ids), 1, &T);
    kiln_tensor *x = kiln_add(kiln_index_select(m->wte, 0, idx), kiln_narrow_sym(m->wpe, 0, P, T));
    for (int64_t i = 0; i < m->layers && x; i++)
        x = block(m, &m->layer[i], x, P, T);
    x = kiln_narrow_sym(x, 0, kiln_expr_add(ctx, T, kiln_int(ctx, -1)), kiln_int(ctx, 1));
    /* Stored, the row is read by each of the vocab outputs (with it fused in, the product of 2
     * layers or more materialised its vocab x d broadcast terms: 2.6 s a step). */
    x = norm(x, m->lnf_w, m->lnf_b);
    return kiln_matmul(x, kiln_transpose(m->wte, 0, 1)); /* tied: the token embedding */
}

kiln_status gpt2_step(gpt2_model *m, const int32_t *ids, int64_t count, float *logits) {
    if (count < 1 || count > m->n_ctx - m->pos)
        return KILN_ERROR_OUT_OF_RANGE;
    for (int64_t i = 0; i < count; i++)
        if (ids[i] < 0 || ids[i] >= m->vocab)
            return KILN_ERROR_OUT_OF_RANGE;
    kiln_scope_begin(m->ctx);
    kiln_tensor *out = forward(m, ids, count);
    kiln_status s = out ? kiln_read(out, logits, sizeof(float) * (size_t)m->vocab)
                        : kiln_context_status(m->ctx);
    kiln_scope_end(m->ctx, 0, NULL);
    if (s == KILN_OK)
        m->pos += count;
    return s;
}

/* ---- sampling ------------------------------------------------------------------------------ */

int32_t gpt2_argmax(const float *logits, int64_t vocab) {
    int64_t best = 0;
    for (int64_t i = 1; i < vocab; i++)
        if (logits[i] > logits[best])
            best = i;
    return (int32_t)best;
}

size_t gpt2_sample_scratch_bytes(int64_t vocab) {
    return (size_t)vocab * (sizeof(float) + sizeof(int32_t));
}

static const float *sort_keys;
static int by_logit_desc(const void *a, const void *b) {
    float x = sort_keys[*(const int32_t *)a], y = sort_keys[*(const int32_t *)b];
    return (x < y) - (x > y);
}

/* splitmix64: a uniform double in [0, 1). */
static double next_uniform(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

int32_t gpt2_sample(const float *logits, int64_t vocab, double temperature, int64_t top_k,
                    uint64_t *rng, void *scratch) {
    if (temperature <= 0)
        return gpt2_argmax(logits, vocab);
    int32_t *order = (int32_t *)scratch;
    float *p = (float *)(order + vocab);
    int64_t k = top_k > 0 && top_k < vocab ? top_k : vocab;
    for (int64_t i = 0; i < vocab; i++)
        order[i] = (int32_t)i;
    sort_keys = logits;
    qsort(order, (size_t)vocab, sizeof *order, by_logit_desc);
    double total = 0, top = logits[order[0]];
    for (int64_t i = 0; i < k; i++)
        total += p[i] = (float)exp((logits[order[i]] - top) / temperature);
    double u = next_uniform(rng) * total;
    for (int64_t i = 0; i < k; i++)
        if ((u -= p[i]) < 0)
            return order[i];
    return order[k - 1];
}
