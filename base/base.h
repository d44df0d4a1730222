/* base/: the ground every Kiln module stands on (prefix base_).
 *
 *   allocator   base_allocator: every host allocation goes through a kiln_alloc_fn
 *   errors      base_error: a sticky first error (status + message) owned by a context
 *   arithmetic  checked int64/size_t arithmetic, floor division and modulo
 *   hashing     a stable 64-bit hash of bytes and integers (identical on every run)
 *   arena       bump allocation freed all at once
 *   vec         growable arrays of any element type
 *   map         an open-addressing hash table of pointers keyed by a caller hash + equality
 *   log         leveled logging, controlled by KILN_DEBUG, to a context's callback, the
 *               process-wide one, or stderr
 *
 * Nothing here aborts on bad input: allocation failure and overflow come back as statuses. */
#ifndef KILN_BASE_BASE_H
#define KILN_BASE_BASE_H

#include "kiln_base.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define BASE_HIDDEN __attribute__((visibility("hidden")))
#define BASE_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define BASE_HIDDEN
#define BASE_PRINTF(fmt, args)
#endif

#define BASE_COUNTOF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- allocator ------------------------------------------------------------------------- */

typedef struct base_allocator {
    kiln_alloc_fn fn; /* never NULL once initialised */
    void *user;
} base_allocator;

/* The default allocator: malloc/realloc/free. */
void *base_default_alloc(void *user, void *ptr, size_t osize, size_t nsize);
/* An allocator from a user's function; fn == NULL selects the default. */
base_allocator base_allocator_make(kiln_alloc_fn fn, void *user);

void *base_malloc(const base_allocator *a, size_t size);
void *base_calloc(const base_allocator *a, size_t count, size_t size); /* checked count*size */
/* On failure returns NULL and leaves ptr valid (the caller still owns it). */
void *base_realloc(const base_allocator *a, void *ptr, size_t osize, size_t nsize);
void base_free(const base_allocator *a, void *ptr, size_t size);
char *base_strdup(const base_allocator *a, const char *s); /* free with strlen(s) + 1 */

/* ---- sticky errors ---------------------------------------------------------------------- */

enum { BASE_ERROR_MESSAGE_MAX = 512 };

typedef struct base_error {
    kiln_status status; /* KILN_OK until the first error */
    char message[BASE_ERROR_MESSAGE_MAX];
} base_error;

/* Records status and a formatted message unless an error is already recorded (the first error
 * wins). Returns status, so `return base_error_set(err, ...)` reads naturally. err may be NULL. */
kiln_status base_error_set(base_error *err, kiln_status status, const char *fmt, ...)
    BASE_PRINTF(3, 4);
kiln_status base_error_setv(base_error *err, kiln_status status, const char *fmt, va_list ap)
    BASE_PRINTF(3, 0);
/* Overwrites any earlier error (for the last-call message of a handle). */
kiln_status base_error_reset(base_error *err, kiln_status status, const char *fmt, ...)
    BASE_PRINTF(3, 4);
void base_error_clear(base_error *err);
/* The message, or the generic status string when none was recorded. */
const char *base_error_message(const base_error *err);

/* ---- checked arithmetic ---------------------------------------------------------------- */
/* Each returns true on success and false on overflow (then *out is unspecified). */

static inline bool base_add_i64(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool base_sub_i64(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_sub_overflow(a, b, out);
}
static inline bool base_mul_i64(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool base_neg_i64(int64_t a, int64_t *out) {
    return !__builtin_sub_overflow((int64_t)0, a, out);
}
static inline bool base_add_size(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool base_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
/* Floor division and floor modulo (Python's semantics). False when b == 0 or the quotient
 * overflows (INT64_MIN / -1). The remainder has the sign of b. */
bool base_floordiv_i64(int64_t a, int64_t b, int64_t *out);
bool base_floormod_i64(int64_t a, int64_t b, int64_t *out);
/* Greatest common divisor of |a| and |b| (gcd(0, 0) == 0); false only for INT64_MIN operands
 * whose gcd does not fit. */
bool base_gcd_i64(int64_t a, int64_t b, int64_t *out);
/* Round up to a multiple of align (a power of two); false on overflow. */
bool base_align_up_size(size_t value, size_t align, size_t *out);

/* ---- hashing --------------------------------------------------------------------------- */
/* A stable 64-bit hash: the same input gives the same value on every run and machine. */

uint64_t base_hash_bytes(const void *data, size_t size, uint64_t seed);
uint64_t base_hash_u64(uint64_t h, uint64_t value); /* combine a value into h */
uint64_t base_hash_str(const char *s, uint64_t seed);

/* ---- arena ----------------------------------------------------------------------------- */

typedef struct base_arena_chunk base_arena_chunk;

typedef struct base_arena {
    base_allocator alloc;
    base_arena_chunk *head; /* most recent chunk */
    size_t chunk_size;      /* default size of new chunks */
    size_t bytes_used;      /* statistics: bytes handed out */
} base_arena;

void base_arena_init(base_arena *arena, const base_allocator *alloc, size_t chunk_size);
/* Zeroed memory aligned to align (a power of two <= 64); NULL on allocation failure or when
 * size overflows. Freed only by base_arena_finish. */
void *base_arena_alloc(base_arena *arena, size_t size, size_t align);
void *base_arena_memdup(base_arena *arena, const void *data, size_t size, size_t align);
char *base_arena_strdup(base_arena *arena, const char *s);
/* Frees every block at once, keeping the first chunk for the next allocations. */
void base_arena_reset(base_arena *arena);
void base_arena_finish(base_arena *arena);

/* ---- growable arrays ------------------------------------------------------------------- */
/* BASE_VEC(T) is an anonymous struct; give it a name with typedef. Grow with base_vec_reserve
 * (or BASE_VEC_PUSH), free with BASE_VEC_FREE. A zero-initialised vec is empty and valid. */

#define BASE_VEC(T)                                                                                \
    struct {                                                                                       \
        T *data;                                                                                   \
        size_t len;                                                                                \
        size_t cap;                                                                                \
    }

/* Makes room for at least min_cap elements of elem_size bytes; keeps *data on failure. */
kiln_status base_vec_reserve(const base_allocator *a, void **data, size_t *cap, size_t elem_size,
                             size_t min_cap);

#define BASE_VEC_RESERVE(a, v, n)                                                                  \
    base_vec_reserve((a), (void **)&(v)->data, &(v)->cap, sizeof(*(v)->data), (n))
/* Evaluates to a kiln_status; the element is appended only on KILN_OK. */
#define BASE_VEC_PUSH(a, v, x)                                                                     \
    ((v)->len < (v)->cap || BASE_VEC_RESERVE((a), (v), (v)->len + 1) == KILN_OK                    \
         ? ((v)->data[(v)->len++] = (x), KILN_OK)                                                  \
         : KILN_ERROR_OUT_OF_HOST_MEMORY)
#define BASE_VEC_FREE(a, v)                                                                        \
    (base_free((a), (v)->data, (v)->cap * sizeof(*(v)->data)), (v)->data = NULL, (v)->len = 0,     \
     (v)->cap = 0)

/* ---- hash map -------------------------------------------------------------------------- */
/* Stores non-NULL pointers, each with the 64-bit hash the caller computed for it. Lookups take
 * the hash and an equality callback, so the map serves hash-consing (key == the stored node)
 * as well as key -> value tables (store a struct holding both). Linear probing, power-of-two
 * capacity, load factor <= 1/2, deletion by backward shift (no tombstones). */

typedef bool (*base_map_eq_fn)(const void *stored, const void *key, void *user);

typedef struct base_map_slot {
    uint64_t hash;
    void *value; /* NULL: empty */
} base_map_slot;

typedef struct base_map {
    base_allocator alloc;
    base_map_slot *slots;
    size_t cap; /* 0 or a power of two */
    size_t len;
} base_map;

void base_map_init(base_map *map, const base_allocator *alloc);
void base_map_finish(base_map *map);
/* The stored value equal to key (eq(stored, key, user) true), or NULL. */
void *base_map_find(const base_map *map, uint64_t hash, const void *key, base_map_eq_fn eq,
                    void *user);
/* Inserts value (which must not be equal to a stored one: find first). */
kiln_status base_map_insert(base_map *map, uint64_t hash, void *value);
/* Removes and returns the stored value equal to key, or NULL when absent. */
void *base_map_remove(base_map *map, uint64_t hash, const void *key, base_map_eq_fn eq, void *user);
/* Iteration: for (size_t i = 0; base_map_next(map, &i, &v);) visits every value once. */
bool base_map_next(const base_map *map, size_t *cursor, void **value);

/* ---- logging --------------------------------------------------------------------------- */

/* The levels are kiln_log_level's (kiln_base.h). */
typedef enum base_log_level {
    BASE_LOG_ERROR = KILN_LOG_ERROR,
    BASE_LOG_WARN = KILN_LOG_WARN,
    BASE_LOG_INFO = KILN_LOG_INFO,
    BASE_LOG_DEBUG = KILN_LOG_DEBUG,
    BASE_LOG_TRACE = KILN_LOG_TRACE,
} base_log_level;

/* The level KILN_DEBUG asks for (read once): unset or 0 prints errors and warnings only;
 * 1 adds information (statistics), 2 debug, 3 and more trace. */
int base_log_verbosity(void);
bool base_log_enabled(base_log_level level);
/* Logs one message of module. It goes to the first of: the test sink (base_log_set_sink), this
 * thread's route (base_log_route_set), the process-wide callback (kiln_set_log_callback),
 * stderr. */
void base_log(base_log_level level, const char *module, const char *fmt, ...) BASE_PRINTF(3, 4);
/* Progress of long work, at BASE_LOG_INFO whatever KILN_DEBUG says (a long compile is never
 * silent), by the same route. */
void base_log_progress(const char *module, const char *fmt, ...) BASE_PRINTF(2, 3);

/* Where a context's messages go: its callback (fn NULL: the process-wide default). */
typedef struct base_log_route {
    kiln_log_fn fn;
    void *user;
} base_log_route;
/* Routes the messages this thread logs to route (NULL: none, the process-wide default) until
 * the next call, and returns the route it replaces, for the caller to give back when its call
 * ends: a context routes its messages while its calls run. route must outlive its use. */
const base_log_route *base_log_route_set(const base_log_route *route);

/* ---- clock -------------------------------------------------------------------------------- */
/* Nanoseconds of C11's wall clock (TIME_UTC; 0 when it is unavailable). For durations: a step
 * of the clock shows as one wrong (possibly negative) duration, which callers clamp. */
int64_t base_now_ns(void);

/* Test hook: redirect every log line, whatever its route (NULL undoes it). The sink receives one
 * whole line ("kiln <module>: <level>: <message>"). Not synchronised: set it while no other
 * thread logs. (The verbosity may be read from any thread.) */
typedef void (*base_log_sink)(void *user, base_log_level level, const char *line);
void base_log_set_sink(base_log_sink sink, void *user);

#endif
