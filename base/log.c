/* Leveled logging. KILN_DEBUG sets the verbosity; a test can capture lines with a sink. */
#include "base.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* Read from any thread: the first readers may all parse KILN_DEBUG, and store the same value. */
static atomic_int log_verbosity = -1; /* -1: not read yet */
static base_log_sink log_sink;
static void *log_sink_user;

int base_log_verbosity(void) {
    int level = atomic_load_explicit(&log_verbosity, memory_order_relaxed);
    if (level < 0) {
        const char *s = getenv("KILN_DEBUG");
        long v = s ? strtol(s, NULL, 10) : 0;
        level = v < 0 ? 0 : v > 9 ? 9 : (int)v;
        atomic_store_explicit(&log_verbosity, level, memory_order_relaxed);
    }
    return level;
}

bool base_log_enabled(base_log_level level) {
    return (int)level <= BASE_LOG_WARN + base_log_verbosity();
}

void base_log_set_sink(base_log_sink sink, void *user) {
    log_sink = sink;
    log_sink_user = user;
}

void base_log(base_log_level level, const char *module, const char *fmt, ...) {
    static const char *const names[] = {"error", "warning", "info", "debug", "trace"};
    if (!base_log_enabled(level))
        return;
    char line[1024];
    int n = snprintf(line, sizeof line, "kiln %s: %s: ", module, names[level]);
    if (n < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (log_sink)
        log_sink(log_sink_user, level, line);
    else
        fprintf(stderr, "%s\n", line);
}
