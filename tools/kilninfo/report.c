/* Text and JSON output of kilninfo's report. */
#include "report.h"

#include <math.h>

void report_init(report *r, FILE *f, bool json) {
    *r = (report){.f = f, .json = json};
    if (json)
        fputc('{', f);
}

void report_finish(report *r) {
    if (r->json)
        fputs("\n}\n", r->f);
}

static void indent(report *r, int depth) {
    for (int i = 0; i < depth; i++)
        fputs("  ", r->f);
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* Writes what precedes an item: separator, newline and indentation, and the key. */
static void item_start(report *r, const char *key) {
    int d = r->depth;
    bool in_array = r->is_array[d];
    if (r->json) {
        if (r->has_items[d])
            fputc(',', r->f);
        if (!(in_array && r->inline_array[d])) {
            fputc('\n', r->f);
            indent(r, d + 1);
        } else if (r->has_items[d]) {
            fputc(' ', r->f);
        }
        if (!in_array) {
            json_string(r->f, key);
            fputs(": ", r->f);
        }
    } else if (in_array && r->inline_array[d]) {
        if (r->has_items[d])
            fputs(", ", r->f);
    } else if (in_array) {
        fputc('\n', r->f);
        indent(r, d);
        fputs("-", r->f);
    } else {
        if (d > 0 || r->has_items[d]) /* no blank first line */
            fputc('\n', r->f);
        indent(r, d);
        fprintf(r->f, "%s: ", key);
    }
    r->has_items[d] = true;
}

static void push(report *r, bool array) {
    if (r->depth + 1 >= REPORT_MAX_DEPTH)
        return;
    r->depth++;
    r->has_items[r->depth] = false;
    r->is_array[r->depth] = array;
    r->inline_array[r->depth] = array;
}

void report_object_begin(report *r, const char *key) {
    /* An object inside an array makes the array multi-line. */
    if (r->is_array[r->depth])
        r->inline_array[r->depth] = false;
    item_start(r, key);
    if (r->json)
        fputc('{', r->f);
    push(r, false);
}

void report_object_end(report *r) {
    if (r->json) {
        fputc('\n', r->f);
        indent(r, r->depth);
        fputc('}', r->f);
    }
    r->depth--;
}

void report_array_begin(report *r, const char *key) {
    item_start(r, key);
    if (r->json)
        fputc('[', r->f);
    push(r, true);
}

void report_array_end(report *r) {
    if (r->json) {
        if (!r->inline_array[r->depth] && r->has_items[r->depth]) {
            fputc('\n', r->f);
            indent(r, r->depth);
        }
        fputc(']', r->f);
    } else if (!r->has_items[r->depth]) {
        fputs("(none)", r->f);
    }
    r->depth--;
}

void report_str(report *r, const char *key, const char *value) {
    item_start(r, key);
    if (r->json)
        json_string(r->f, value);
    else
        fputs(value, r->f);
}

void report_u64(report *r, const char *key, uint64_t value) {
    item_start(r, key);
    fprintf(r->f, "%llu", (unsigned long long)value);
}

void report_f64(report *r, const char *key, double value) {
    item_start(r, key);
    if (isfinite(value))
        fprintf(r->f, "%.9g", value);
    else
        fputs(r->json ? "null" : "n/a", r->f);
}

void report_bool(report *r, const char *key, bool value) {
    item_start(r, key);
    fputs(value ? "true" : (r->json ? "false" : "false"), r->f);
}

void report_uuid(report *r, const char *key, const uint8_t uuid[16]) {
    char s[40];
    int n = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            s[n++] = '-';
        n += snprintf(s + n, sizeof s - (size_t)n, "%02x", uuid[i]);
    }
    report_str(r, key, s);
}

void report_version(report *r, const char *key, uint32_t v) {
    char s[48];
    snprintf(s, sizeof s, "%u.%u.%u", (v >> 22) & 0x7fu, (v >> 12) & 0x3ffu, v & 0xfffu);
    report_str(r, key, s);
}

void report_flags(report *r, const char *key, uint32_t flags, const report_flag *names,
                  size_t count) {
    report_array_begin(r, key);
    for (size_t i = 0; i < count; i++) {
        if (flags & names[i].bit)
            report_str(r, NULL, names[i].name);
    }
    report_array_end(r);
}
