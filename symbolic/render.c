/* The readable rendering (documented in sym.h). Written through a small writer with
 * snprintf's contract: the length needed is counted even past the buffer's end. */
#include "sym_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct writer {
    char *buf;
    size_t cap;
    size_t len; /* needed so far */
} writer;

static void put(writer *w, const char *s) {
    size_t n = strlen(s);
    if (w->len < w->cap) {
        size_t room = w->cap - w->len - 1; /* keep one byte for the NUL */
        size_t k = n < room ? n : room;
        memcpy(w->buf + w->len, s, k);
        w->buf[w->len + k] = '\0';
    }
    w->len += n;
}

static void put_int(writer *w, int64_t v) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%lld", (long long)v);
    put(w, tmp);
}

static void render_rec(writer *w, const sym_node *n);

/* A sum renders flat: (t1+t2+t3-5); a negative constant term is written with '-'. The chain
 * is left-deep, so the part before the last term is rendered first and its ')' taken back. */
static void render_sum(writer *w, const sym_node *n) {
    const sym_node *last = n->src[1];
    if (n->src[0]->kind == SYM_ADD) {
        render_sum(w, n->src[0]);
        w->len -= 1; /* reopen: drop the ')' just counted (and written, if it fit) */
        if (w->len < w->cap)
            w->buf[w->len] = '\0';
    } else {
        put(w, "(");
        render_rec(w, n->src[0]);
    }
    if (last->kind == SYM_CONST && last->value < 0 && last->value != INT64_MIN) {
        put(w, "-");
        put_int(w, -last->value);
    } else {
        put(w, "+");
        render_rec(w, last);
    }
    put(w, ")");
}

static void render_binary(writer *w, const sym_node *n) {
    const char *sym = sym_kinds[n->kind].symbol;
    bool call = n->kind == SYM_MIN || n->kind == SYM_MAX;
    put(w, call ? sym : "");
    put(w, "(");
    render_rec(w, n->src[0]);
    put(w, call ? ", " : sym);
    render_rec(w, n->src[1]);
    put(w, ")");
}

static void render_rec(writer *w, const sym_node *n) {
    switch ((sym_kind)n->kind) {
    case SYM_CONST:
        put_int(w, n->value);
        break;
    case SYM_VAR:
        put(w, n->name);
        break;
    case SYM_BIND:
        put(w, "(");
        put(w, n->name);
        put(w, ":=");
        put_int(w, n->value);
        put(w, ")");
        break;
    case SYM_ADD:
        render_sum(w, n);
        break;
    case SYM_NOT:
        put(w, "(not ");
        render_rec(w, n->src[0]);
        put(w, ")");
        break;
    case SYM_WHERE:
        put(w, "(");
        render_rec(w, n->src[0]);
        put(w, " ? ");
        render_rec(w, n->src[1]);
        put(w, " : ");
        render_rec(w, n->src[2]);
        put(w, ")");
        break;
    default:
        render_binary(w, n);
        break;
    }
}

size_t sym_render(const sym_node *n, char *buf, size_t cap) {
    writer w = {buf, buf ? cap : 0, 0};
    if (w.cap > 0)
        buf[0] = '\0';
    if (!n)
        put(&w, "<null>");
    else
        render_rec(&w, n);
    return w.len;
}
