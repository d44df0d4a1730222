/* Leveled logging. KILN_DEBUG sets the verbosity. A message goes to the route of the thread that
 * logs it (the context whose call is running), else to the process-wide callback, else to
 * stderr; a test can capture every line with a sink. */
#include "base.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* Read from any thread: the first readers may all parse KILN_DEBUG, and store the same value. */
static atomic_int log_verbosity = -1; /* -1: not read yet */
static base_log_sink log_sink;
static void *log_sink_user;

/* The process-wide callback, read and written under its lock (a pair of values). */
static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static base_log_route default_route;

/* The route of the calling thread: set while a context's call runs. */
static _Thread_local const base_log_route *thread_route;

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

void kiln_set_log_callback(kiln_log_fn fn, void *user) {
    pthread_mutex_lock(&default_lock);
    default_route = (base_log_route){fn, fn ? user : NULL};
    pthread_mutex_unlock(&default_lock);
}

const base_log_route *base_log_route_set(const base_log_route *route) {
    const base_log_route *prev = thread_route;
    thread_route = route;
    return prev;
}

static void log_message(base_log_level level, const char *module, const char *fmt, va_list ap)
    BASE_PRINTF(3, 0);

void base_log(base_log_level level, const char *module, const char *fmt, ...) {
    if (!base_log_enabled(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    log_message(level, module, fmt, ap);
    va_end(ap);
}

void base_log_progress(const char *module, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    log_message(BASE_LOG_INFO, module, fmt, ap);
    va_end(ap);
}

static void log_message(base_log_level level, const char *module, const char *fmt, va_list ap) {
    static const char *const names[] = {"error", "warning", "info", "debug", "trace"};
    char message[1024];
    vsnprintf(message, sizeof message, fmt, ap);
    base_log_route route = {0};
    if (thread_route && thread_route->fn) {
        route = *thread_route;
    } else if (!log_sink) {
        pthread_mutex_lock(&default_lock);
        route = default_route;
        pthread_mutex_unlock(&default_lock);
    }
    if (!log_sink && route.fn) {
        route.fn(route.user, (kiln_log_level)level, module, message);
        return;
    }
    char line[1200];
    snprintf(line, sizeof line, "kiln %s: %s: %s", module, names[level], message);
    if (log_sink)
        log_sink(log_sink_user, level, line);
    else
        fprintf(stderr, "%s\n", line);
}
