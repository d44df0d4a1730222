/* examples/gpt2_model.c: GPT-2 with Kiln's public API (see gpt2_model.h): a small reader of
 * safetensors files, the model's weights and KV cache, one step of prefill or decode, and
 * sampling on the host. */
#define _POSIX_C_SOURCE 200809L /* fseeko */
#define _FILE_OFFSET_BITS 64

#include "gpt2_model.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a safetensors reader ------------------------------------------------------------------ */
/* The format: a little-endian u64 header size n, n bytes of JSON {name: {"dtype": "F32",
 * "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {key: string}}, then the data
 * (offsets relative to its start). This reader parses that subset of JSON; unknown fields are
 * skipped. */

enum { ST_NAME_MAX = 256, ST_MAX_DIMS = 8 };
typedef enum st_dtype { ST_F32, ST_F16, ST_BF16, ST_OTHER } st_dtype;

typedef struct st_entry {
    char name[ST_NAME_MAX];
    st_dtype dtype;
    uint32_t ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin, end;
} st_entry;

typedef struct st_file {
    FILE *f;
    uint64_t data_start, file_size;
    st_entry *entries;
    size_t count, cap;
    char n_head[32]; /* the metadata's "n_head", or "" */
} st_file;

typedef struct st_cursor {
    const char *p, *end;
    bool bad;
} st_cursor;

static void st_ws(st_cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
        c->p++;
}

/* Consumes ch (after white space), else marks the cursor bad. */
static bool st_expect(st_cursor *c, char ch) {
    st_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    c->bad = true;
    return false;
}

static bool st_peek(st_cursor *c, char ch) {
    st_ws(c);
    return c->p < c->end && *c->p == ch;
}

/* A JSON string into out (escapes kept as their character; \u as '?'), truncated to cap - 1. */
static void st_string(st_cursor *c, char *out, size_t cap) {
    size_t n = 0;
    if (!st_expect(c, '"'))
        return;
    while (c->p < c->end && *c->p != '"') {
        char ch = *c->p++;
        if (ch == '\\' && c->p < c->end) {
            ch = *c->p++;
            if (ch == 'u') {
                c->p += c->end - c->p >= 4 ? 4 : c->end - c->p;
                ch = '?';
            }
        }
        if (n + 1 < cap)
            out[n++] = ch;
    }
    if (cap)
        out[n] = 0;
    if (!st_expect(c, '"'))
        c->bad = true;
}

static int64_t st_int(st_cursor *c) {
    st_ws(c);
    int64_t v = 0;
    const char *start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9' && v < INT64_MAX / 10)
        v = v * 10 + (*c->p++ - '0');
    if (c->p == start || (c->p < c->end && *c->p >= '0' && *c->p <= '9'))
        c->bad = true;
    return v;
}

/* Skips any JSON value (depth-limited). */
static void st_skip(st_cursor *c, int depth) {
    st_ws(c);
    if (c->p >= c->end || depth > 32) {
        c->bad = true;
        return;
    }
    char ch = *c->p;
    if (ch == '"') {
        char dummy[1];
        st_string(c, dummy, sizeof dummy);
    } else if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        c->p++;
        if (st_peek(c, close)) {
            c->p++;
            return;
        }
        do {
            if (ch == '{') {
                char dummy[1];
                st_string(c, dummy, sizeof dummy);
                st_expect(c, ':');
            }
            st_skip(c, depth + 1);
        } while (!c->bad && st_peek(c, ',') && c->p++);
        st_expect(c, close);
    } else {
        while (c->p < c->end && !strchr(",}] \n\r\t", *c->p))
            c->p++;
    }
}

static void st_metadata(st_cursor *c, st_file *st) {
    st_expect(c, '{');
    if (st_peek(c, '}')) {
        c->p++;
        return;
    }
    do {
        char key[64], value[32];
        st_string(c, key, sizeof key);
        st_expect(c, ':');
        if (st_peek(c, '"')) {
            st_string(c, value, sizeof value);
            if (strcmp(key, "n_head") == 0)
                snprintf(st->n_head, sizeof st->n_head, "%s", value);
        } else {
            st_skip(c, 1);
        }
    } while (!c->bad && st_peek(c, ',') && c->p++);
    st_expect(c, '}');
}

static void st_tensor(st_cursor *c, st_entry *e) {
    e->dtype = ST_OTHER;
    st_expect(c, '{');
    do {
        char key[32];
        st_string(c, key, sizeof key);
        st_expect(c, ':');
        if (strcmp(key, "dtype") == 0) {
            char dt[16];
            st_string(c, dt, sizeof dt);
            e->dtype = strcmp(dt, "F32") == 0    ? ST_F32
                       : strcmp(dt, "F16") == 0  ? ST_F16
                       : strcmp(dt, "BF16") == 0 ? ST_BF16
                                                 : ST_OTHER;
        } else if (strcmp(key, "shape") == 0) {
            st_expect(c, '[');
            if (st_peek(c, ']')) {
                c->p++;
                continue;
            }
            do {
                int64_t v = st_int(c);
                if (e->ndim < ST_MAX_DIMS)
                    e->shape[e->ndim] = v;
                e->ndim++;
            } while (!c->bad && st_peek(c, ',') && c->p++);
            st_expect(c, ']');
        } else if (strcmp(key, "data_offsets") == 0) {
            st_expect(c, '[');
            e->begin = (uint64_t)st_int(c);
            st_expect(c, ',');
            e->end = (uint64_t)st_int(c);
            st_expect(c, ']');
        } else {
            st_skip(c, 1);
        }
    } while (!c->bad && st_peek(c, ',') && c->p++);
    st_expect(c, '}');
}

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static kiln_status
st_fail(char *msg, size_t size, kiln_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (size)
        vsnprintf(msg, size, fmt, ap);
    va_end(ap);
    return st;
}

static void st_close(st_file *st) {
    if (st->f)
        fclose(st->f);
    free(st->entries);
    memset(st, 0, sizeof *st);
}

static kiln_status st_parse(st_file *st, const char *json, size_t n, const char *path, char *msg,
                            size_t size) {
    st_cursor c = {json, json + n, false};
    st_expect(&c, '{');
    while (!c.bad && !st_peek(&c, '}')) {
        char name[ST_NAME_MAX];
        st_string(&c, name, sizeof name);
        st_expect(&c, ':');
        if (c.bad)
            break;
        if (strcmp(name, "__metadata__") == 0) {
            st_metadata(&c, st);
        } else {
            if (st->count == st->cap) {
                size_t cap = st->cap ? 2 * st->cap : 64;
                st_entry *e = realloc(st->entries, cap * sizeof *e);
                if (!e)
                    return st_fail(msg, size, KILN_ERROR_OUT_OF_HOST_MEMORY, "out of memory");
                st->entries = e, st->cap = cap;
            }
            st_entry *e = &st->entries[st->count++];
            memset(e, 0, sizeof *e);
            snprintf(e->name, sizeof e->name, "%s", name);
            st_tensor(&c, e);
            uint64_t esize = e->dtype == ST_F32 ? 4 : 2, numel = 1;
            for (uint32_t d = 0; d < e->ndim && d < ST_MAX_DIMS; d++)
                numel = e->shape[d] >= 0 && numel <= UINT64_MAX / ((uint64_t)e->shape[d] + 1)
                            ? numel * (uint64_t)e->shape[d]
                            : UINT64_MAX / 8;
            if (!c.bad && e->dtype != ST_OTHER &&
                (e->ndim > ST_MAX_DIMS || e->end < e->begin || e->end - e->begin != numel * esize ||
                 e->end > st->file_size - st->data_start))
                return st_fail(msg, size, KILN_ERROR_INVALID_ARGUMENT,
                               "%s: tensor %s: shape, dtype and data offsets disagree", path, name);
        }
        if (!st_peek(&c, ','))
            break;
        c.p++;
    }
    st_expect(&c, '}');
    if (c.bad)
        return st_fail(msg, size, KILN_ERROR_INVALID_ARGUMENT, "%s: malformed header at byte %zu",
                       path, (size_t)(c.p - json) + 8);
    return KILN_OK;
}

static kiln_status st_open(st_file *st, const char *path, char *msg, size_t size) {
    memset(st, 0, sizeof *st);
    st->f = fopen(path, "rb");
    if (!st->f)
        return st_fail(msg, size, KILN_ERROR_NOT_FOUND, "%s: cannot open", path);
    unsigned char len[8];
    uint64_t n = 0;
    if (fseek(st->f, 0, SEEK_END) != 0)
        goto malformed;
    long end = ftell(st->f);
    if (end < 8 || fseek(st->f, 0, SEEK_SET) != 0 || fread(len, 1, 8, st->f) != 8)
        goto malformed;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | len[i];
    st->file_size = (uint64_t)end;
    if (n > st->file_size - 8 || n > (uint64_t)100 << 20)
        goto malformed;
    st->data_start = 8 + n;
    char *json = malloc(n ? n : 1);
    if (!json) {
        st_close(st);
        return st_fail(msg, size, KILN_ERROR_OUT_OF_HOST_MEMORY, "out of memory");
    }
    kiln_status status =
        fread(json, 1, n, st->f) == n
            ? st_parse(st, json, n, path, msg, size)
            : st_fail(msg, size, KILN_ERROR_INVALID_ARGUMENT, "%s: short read", path);
    free(json);
    if (status != KILN_OK)
        st_close(st);
    return status;
malformed:
    st_close(st);
    return st_fail(msg, size, KILN_ERROR_INVALID_ARGUMENT, "%s: not a safetensors file", path);
}

/* The entry named name, or "transformer." name. */
static const st_entry *st_find(const st_file *st, const char *name) {
    for (size_t i = 0; i < st->count; i++) {
        const char *n = st->entries[i].name;
        if (strncmp(n, "transformer.", 12) == 0)
            n += 12;
        if (strcmp(n, name) == 0)
            return &st->entries[i];
    }
    return NULL;
}

static float st_half(uint16_t h) {
    int e = h >> 10 & 31, m = h & 1023;
    float v = e == 0    ? ldexpf((float)m, -24)
              : e == 31 ? (m ? NAN : INFINITY)
                        : ldexpf((float)(m | 1024), e - 25);
    return h & 0x8000 ? -v : v;
}

/* ---- the model ----------------------------------------------------------------------------- */

/* Loads the F32 tensor name, which must have ndim dims of sizes shape (-1: any; the size found
 * is stored there). */
static kiln_status load_tensor(kiln_context *ctx, st_file *st, const char *name, uint32_t ndim,
                               int64_t *shape, kiln_tensor **out, uint64_t *bytes, char *msg,
                               size_t size) {
    *out = NULL;
    const st_entry *e = st_find(st, name);
    if (!e)
        return st_fail(msg, size, KILN_ERROR_INVALID_ARGUMENT, "no tensor %s", name);
    if (e->dtype == ST_OTHER)
        return st_fail(msg, size, KILN_ERROR_INVALID_ARGUMENT,
                       "tensor %s: dtype not F32, F16 or BF16", name);
    bool ok = e->ndim == ndim;
    for (uint32_t d = 0; ok && d < ndim; d++) {
        if (shape[d] < 0)
            shape[d] = e->shape[d];
        ok = e->shape[d] == shape[d];
    }
    if (!ok)
        return st_fail(msg, size, KILN_ERROR_INVALID_ARGUMENT, "tensor %s: unexpected shape", name);
    uint64_t n = e->end - e->begin, numel = n / (e->dtype == ST_F32 ? 4 : 2);
    float *data = malloc(numel ? numel * sizeof(float) : 1);
    if (!data)
        return st_fail(msg, size, KILN_ERROR_OUT_OF_HOST_MEMORY, "out of memory");
    /* The raw data at the end of the float buffer, widened in place from the front. */
    unsigned char *raw = (unsigned char *)data + (numel * sizeof(float) - n);
    if (fseeko(st->f, (off_t)(st->data_start + e->begin), SEEK_SET) != 0 ||
        fread(raw, 1, n, st->f) != n) {
        free(data);
        return st_fail(msg, size, KILN_ERROR_INVALID_ARGUMENT, "tensor %s: short read", name);
    }
    if (e->dtype != ST_F32) {
        for (uint64_t i = 0; i < numel; i++) {
            uint16_t h = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);
            uint32_t bits = (uint32_t)h << 16;
            float v;
            if (e->dtype == ST_BF16)
                memcpy(&v, &bits, sizeof v);
            else
                v = st_half(h);
            data[i] = v; /* bytes 4 i .. 4 i + 3: before the next read, at 2 numel + 2 i + 2 */
        }
    }
    *out = kiln_from_data(ctx, KILN_F32, ndim, shape, data);
    free(data);
    *bytes += numel * sizeof(float);
    return *out ? KILN_OK
                : st_fail(msg, size, kiln_context_status(ctx), "tensor %s: %s", name,
                          kiln_context_message(ctx));
}

static int64_t count_layers(const st_file *st) {
    int64_t layers = 0;
    for (size_t i = 0; i < st->count; i++) {
        const char *n = st->entries[i].name;
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

static kiln_status load_layer(gpt2_model *m, st_file *st, int64_t i, char *msg, size_t size) {
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
        kiln_status s = load_tensor(m->ctx, st, name, parts[p].ndim, shape, parts[p].out,
                                    &m->weight_bytes, msg, size);
        if (s != KILN_OK)
            return s;
        if (parts[p].b == &ff)
            ff = shape[1];
    }
    const int64_t cache[3] = {m->heads, m->n_ctx, m->head_dim};
    l->k_cache = kiln_empty(m->ctx, KILN_F32, 3, cache);
    l->v_cache = kiln_empty(m->ctx, KILN_F32, 3, cache);
    if (!l->k_cache || !l->v_cache)
        return st_fail(msg, size, kiln_context_status(m->ctx), "KV cache: %s",
                       kiln_context_message(m->ctx));
    return KILN_OK;
}

kiln_status gpt2_load(kiln_context *ctx, const char *path, int64_t heads, gpt2_model *m, char *msg,
                      size_t size) {
    memset(m, 0, sizeof *m);
    m->ctx = ctx;
    st_file st;
    kiln_status s = st_open(&st, path, msg, size);
    if (s != KILN_OK)
        return s;
    int64_t wte[2] = {-1, -1}, wpe[2] = {-1, -1};
    s = load_tensor(ctx, &st, "wte.weight", 2, wte, &m->wte, &m->weight_bytes, msg, size);
    if (s == KILN_OK) {
        wpe[1] = wte[1];
        s = load_tensor(ctx, &st, "wpe.weight", 2, wpe, &m->wpe, &m->weight_bytes, msg, size);
    }
    if (s != KILN_OK)
        goto fail;
    m->vocab = wte[0], m->d = wte[1], m->n_ctx = wpe[0];
    m->heads = heads > 0 ? heads : st.n_head[0] ? strtol(st.n_head, NULL, 10) : 12;
    m->layers = count_layers(&st);
    if (m->heads <= 0 || m->d % m->heads != 0 || m->n_ctx < 1 || m->layers < 1) {
        s = st_fail(msg, size, KILN_ERROR_INVALID_ARGUMENT,
                    "%s: d = %lld, heads = %lld, n_ctx = %lld, layers = %lld: not a GPT-2", path,
                    (long long)m->d, (long long)m->heads, (long long)m->n_ctx,
                    (long long)m->layers);
        goto fail;
    }
    m->head_dim = m->d / m->heads;
    m->layer = calloc((size_t)m->layers, sizeof *m->layer);
    if (!m->layer) {
        s = st_fail(msg, size, KILN_ERROR_OUT_OF_HOST_MEMORY, "out of memory");
        goto fail;
    }
    for (int64_t i = 0; i < m->layers && s == KILN_OK; i++)
        s = load_layer(m, &st, i, msg, size);
    int64_t dshape[1] = {m->d};
    if (s == KILN_OK)
        s = load_tensor(ctx, &st, "ln_f.weight", 1, dshape, &m->lnf_w, &m->weight_bytes, msg, size);
    if (s == KILN_OK)
        s = load_tensor(ctx, &st, "ln_f.bias", 1, dshape, &m->lnf_b, &m->weight_bytes, msg, size);
    if (s != KILN_OK)
        goto fail;
    m->pos_var = kiln_variable(ctx, "gpt2_pos", 0, m->n_ctx - 1);
    m->len_var = kiln_variable(ctx, "gpt2_len", 1, m->n_ctx);
    if (!m->pos_var || !m->len_var) {
        s = st_fail(msg, size, kiln_context_status(ctx), "%s", kiln_context_message(ctx));
        goto fail;
    }
    st_close(&st);
    return KILN_OK;
fail:
    st_close(&st);
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

/* Rows idx (T) of table (V, d): (T, d); a composite of older public ops until the library's
 * kiln_index_select lands. */
static kiln_tensor *embed(kiln_tensor *table, kiln_tensor *idx, const kiln_expr *T,
                          const kiln_expr *d) {
    kiln_tensor *rows = kiln_expand_sym(kiln_unsqueeze(idx, 1), 2, (const kiln_expr *[]){T, d});
    return kiln_gather(table, 0, rows);
}

static kiln_tensor *linear(kiln_tensor *x, kiln_tensor *w, kiln_tensor *b) {
    return kiln_add(kiln_matmul(x, w), b); /* Conv1D: w is (in, out) */
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
    kiln_tensor *a = kiln_matmul(kiln_softmax(s, -1), v); /* (heads, T, head_dim) */
    a = kiln_permute(a, (int32_t[]){1, 0, 2});
    a = kiln_reshape_sym(a, 2, (const kiln_expr *[]){T, kiln_int(ctx, m->d)});
    return linear(a, l->proj_w, l->proj_b);
}

static kiln_tensor *block(const gpt2_model *m, const gpt2_layer *l, kiln_tensor *x,
                          const kiln_expr *P, const kiln_expr *T) {
    kiln_tensor *h = kiln_layer_norm(x, 1, l->ln1_w, l->ln1_b, 1e-5);
    x = kiln_add(x, attention(m, l, h, P, T));
    h = kiln_layer_norm(x, 1, l->ln2_w, l->ln2_b, 1e-5);
    h = kiln_gelu(linear(h, l->fc_w, l->fc_b), true);
    return kiln_add(x, linear(h, l->out_w, l->out_b));
}

/* The logits (1, vocab) of the last of ids' positions; NULL on an error (in the context). */
static kiln_tensor *forward(const gpt2_model *m, const int32_t *ids, int64_t count) {
    kiln_context *ctx = m->ctx;
    const kiln_expr *P = kiln_bind(ctx, m->pos_var, m->pos);
    const kiln_expr *T = kiln_bind(ctx, m->len_var, count);
    /* The ids' tensor is sized by the Variable, so that no kernel depends on the count. */
    kiln_tensor *idx = kiln_reshape_sym(kiln_from_data(ctx, KILN_I32, 1, &count, ids), 1, &T);
    kiln_tensor *x =
        kiln_add(embed(m->wte, idx, T, kiln_int(ctx, m->d)), kiln_narrow_sym(m->wpe, 0, P, T));
    for (int64_t i = 0; i < m->layers && x; i++)
        x = block(m, &m->layer[i], x, P, T);
    x = kiln_narrow_sym(x, 0, kiln_expr_add(ctx, T, kiln_int(ctx, -1)), kiln_int(ctx, 1));
    x = kiln_layer_norm(x, 1, m->lnf_w, m->lnf_b, 1e-5);
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
