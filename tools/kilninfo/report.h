/* A report written once and printed either as indented text or as JSON: kilninfo calls the
 * same functions for both, so the two formats always carry the same fields. */
#ifndef KILN_TOOLS_REPORT_H
#define KILN_TOOLS_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum { REPORT_MAX_DEPTH = 16 };

typedef struct report {
    FILE *f;
    bool json;
    int depth;
    bool has_items[REPORT_MAX_DEPTH]; /* a comma is due before the next item */
    bool is_array[REPORT_MAX_DEPTH];
    bool inline_array[REPORT_MAX_DEPTH]; /* text: scalars on one line */
} report;

void report_init(report *r, FILE *f, bool json);
void report_finish(report *r); /* closes the root object (JSON) */

/* key is ignored inside arrays. */
void report_object_begin(report *r, const char *key);
void report_object_end(report *r);
void report_array_begin(report *r, const char *key);
void report_array_end(report *r);
void report_str(report *r, const char *key, const char *value);
void report_u64(report *r, const char *key, uint64_t value);
void report_f64(report *r, const char *key, double value);
void report_bool(report *r, const char *key, bool value);
void report_uuid(report *r, const char *key, const uint8_t uuid[16]);
/* "major.minor.patch" of a Vulkan version number. */
void report_version(report *r, const char *key, uint32_t version);
/* The names of the bits set in flags, as an array of strings. */
typedef struct report_flag {
    uint32_t bit;
    const char *name;
} report_flag;
void report_flags(report *r, const char *key, uint32_t flags, const report_flag *names,
                  size_t count);

#endif
