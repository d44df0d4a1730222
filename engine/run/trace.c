/* KILN_TRACE=path: a timeline of the context's work as a Chrome trace-event file (the JSON
 * array format, which Perfetto and chrome://tracing open). Two tracks: the host's phases
 * (realize, schedule, codegen, pipeline, submit, wait; with the interpreter each kernel's run)
 * and, on a device with timestamps, each kernel's device time, placed after the host time its
 * batch was submitted at (device clocks are not the host's: the offsets within a batch are the
 * device's, the batch's start is the submit's).
 *
 * Written incrementally: each event when it ends, flushed after every realize, so a long run's
 * file grows as it goes; kiln_context_destroy writes the closing "]" (the array format loads
 * without it too, so a crashed program's file still opens). The first context of the process
 * writes path, later ones path.2, path.3, ... (in creation order), so that contexts never share
 * a file. */
#include "eng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct eng_trace {
    FILE *file;
    char path[4096];
    int64_t start_ns; /* the trace's zero */
    bool any;         /* an event was written (the next one needs a comma) */
    long pid;
};

bool eng_trace_wanted(void) {
    const char *path = getenv("KILN_TRACE");
    return path && path[0];
}

static void event_begin(eng_trace *t) {
    fputs(t->any ? ",\n" : "\n", t->file);
    t->any = true;
}

/* A JSON string's characters (names are identifiers and expressions; anything else escaped). */
static void put_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void thread_name(eng_trace *t, uint32_t track, const char *name) {
    event_begin(t);
    fprintf(t->file,
            "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %ld, \"tid\": %u, "
            "\"args\": {\"name\": ",
            t->pid, track);
    put_string(t->file, name);
    fputs("}}", t->file);
}

void eng_trace_open(kiln_context *ctx) {
    if (!eng_trace_wanted())
        return;
    static unsigned contexts; /* of the process, for the file names */
    unsigned n = __atomic_add_fetch(&contexts, 1, __ATOMIC_RELAXED);
    eng_trace *t = base_calloc(&ctx->alloc, 1, sizeof *t);
    if (!t) {
        base_log(BASE_LOG_WARN, "engine", "KILN_TRACE: no memory for the trace: none written");
        return;
    }
    const char *path = getenv("KILN_TRACE");
    int len = n == 1 ? snprintf(t->path, sizeof t->path, "%s", path)
                     : snprintf(t->path, sizeof t->path, "%s.%u", path, n);
    t->file = len > 0 && (size_t)len < sizeof t->path ? fopen(t->path, "w") : NULL;
    if (!t->file) {
        base_log(BASE_LOG_WARN, "engine", "KILN_TRACE: cannot write %s: no trace", t->path);
        base_free(&ctx->alloc, t, sizeof *t);
        return;
    }
    t->start_ns = base_now_ns();
    t->pid = (long)getpid();
    fputc('[', t->file);
    event_begin(t);
    fprintf(t->file,
            "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %ld, \"tid\": %u, "
            "\"args\": {\"name\": \"kiln\"}}",
            t->pid, ENG_TRACE_HOST);
    thread_name(t, ENG_TRACE_HOST, "host");
    char device[sizeof ctx->device_name + 16];
    snprintf(device, sizeof device, "device: %s", ctx->device_name);
    if (!ctx->interpreter)
        thread_name(t, ENG_TRACE_DEVICE, device);
    ctx->trace = t;
    base_log(BASE_LOG_INFO, "engine", "KILN_TRACE: writing %s", t->path);
}

void eng_trace_span(kiln_context *ctx, uint32_t track, const char *cat, const char *name,
                    int64_t start_ns, int64_t end_ns, const char *args) {
    eng_trace *t = ctx->trace;
    if (!t)
        return;
    int64_t from = start_ns - t->start_ns, dur = end_ns - start_ns;
    event_begin(t);
    fputs("{\"name\": ", t->file);
    put_string(t->file, name);
    fprintf(t->file,
            ", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %ld, \"tid\": %u, \"ts\": %lld.%03d, "
            "\"dur\": %lld.%03d",
            cat, t->pid, track, (long long)(from / 1000), (int)(from % 1000 < 0 ? 0 : from % 1000),
            (long long)(dur > 0 ? dur / 1000 : 0), (int)(dur > 0 ? dur % 1000 : 0));
    if (args)
        fprintf(t->file, ", \"args\": {%s}", args);
    fputc('}', t->file);
}

void eng_trace_flush(kiln_context *ctx) {
    if (ctx->trace)
        fflush(ctx->trace->file);
}

void eng_trace_close(kiln_context *ctx) {
    eng_trace *t = ctx->trace;
    if (!t)
        return;
    fputs("\n]\n", t->file);
    bool failed = ferror(t->file) != 0;
    failed = fclose(t->file) != 0 || failed;
    if (failed)
        base_log(BASE_LOG_WARN, "engine", "KILN_TRACE: writing %s failed", t->path);
    base_free(&ctx->alloc, t, sizeof *t);
    ctx->trace = NULL;
}
