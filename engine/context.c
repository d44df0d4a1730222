/* The context: allocator, sticky first error, the symbolic and shape contexts, statistics, and
 * the public expression (Variable) API. */
#include "eng.h"
#include "eng_testing.h"

#include <stdio.h>
#include <string.h>

/* The length of the public call's name that message begins with ("kiln_max: ..."), or 0. */
static size_t call_prefix(const char *message) {
    if (strncmp(message, "kiln_", 5) != 0)
        return 0;
    size_t n = 5;
    while (message[n] == '_' || (message[n] >= 'a' && message[n] <= 'z') ||
           (message[n] >= '0' && message[n] <= '9'))
        n++;
    return message[n] == ':' ? n : 0;
}

void *eng_fail(kiln_context *ctx, kiln_status status, const char *fmt, ...) {
    if (!ctx->sticky)
        base_error_clear(&ctx->err);
    char message[BASE_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    /* An op built from others (softmax from kiln_max, narrow_sym from kiln_narrow) reports
     * the call the program made, not the one it was built from. */
    size_t n = call_prefix(message);
    if (n && ctx->call && (strlen(ctx->call) != n || strncmp(message, ctx->call, n) != 0))
        base_error_set(&ctx->err, status, "%s%s", ctx->call, message + n);
    else
        base_error_set(&ctx->err, status, "%s", message);
    ctx->sticky = true;
    return NULL;
}

kiln_status eng_call_begin(kiln_context *ctx) {
    if (ctx->sticky)
        return ctx->err.status;
    base_error_clear(&ctx->err);
    return KILN_OK;
}

void *eng_fail_from_shape_in(kiln_context *ctx, const char *call, kiln_status status) {
    bool sym = sym_ctx_status(ctx->sym) != KILN_OK;
    const char *message = sym ? sym_ctx_message(ctx->sym) : shape_ctx_message(ctx->shape);
    if (sym)
        status = sym_ctx_status(ctx->sym);
    if (call)
        eng_fail(ctx, status, "%s: %s", call, message);
    else
        eng_fail(ctx, status, "%s", message);
    if (sym)
        sym_ctx_clear_error(ctx->sym);
    return NULL;
}

void *eng_fail_from_shape(kiln_context *ctx, kiln_status status) {
    return eng_fail_from_shape_in(ctx, ctx->call, status);
}

void eng_log_enter(kiln_context *ctx) {
    if (ctx->log_depth++ == 0)
        ctx->log_prev = base_log_route_set(&ctx->log);
}

void eng_log_leave(kiln_context *ctx) {
    if (--ctx->log_depth == 0)
        base_log_route_set(ctx->log_prev);
}

/* Moves a symbolic error (a NULL from a sym_ constructor) into the context. */
static const kiln_expr *sym_checked(kiln_context *ctx, const sym_node *n) {
    if (!n && sym_ctx_status(ctx->sym) != KILN_OK) {
        eng_fail(ctx, sym_ctx_status(ctx->sym), "%s", sym_ctx_message(ctx->sym));
        sym_ctx_clear_error(ctx->sym);
    }
    return eng_pin_expr(ctx, n); /* the program holds it now */
}

kiln_status kiln_context_create(const kiln_context_options *options, kiln_context **out) {
    static const kiln_context_options defaults = {0};
    return eng_context_create(options ? options : &defaults, NULL, out);
}

kiln_status eng_context_create(const kiln_context_options *opt, const eng_external *external,
                               kiln_context **out) {
    if (!out)
        return KILN_ERROR_INVALID_ARGUMENT;
    *out = NULL;
    base_allocator alloc = base_allocator_make(opt->alloc, opt->alloc_user);
    kiln_context *ctx = base_calloc(&alloc, 1, sizeof *ctx);
    if (!ctx)
        return KILN_ERROR_OUT_OF_HOST_MEMORY;
    ctx->alloc = alloc;
    ctx->log = (base_log_route){opt->log, opt->log ? opt->log_user : NULL};
    eng_log_enter(ctx); /* creation's messages go to the context's callback too */
    ctx->free_slot = UINT32_MAX;
    /* A realize's compiles report progress once they take a second (tests: from the first). */
    ctx->progress_ns = eng_testing_options()->progress_always ? 0 : 1000000000;
    ctx->no_foresight = eng_testing_options()->no_foresight;
    ctx->no_unrolled_windows = eng_testing_options()->no_unrolled_windows;
    base_arena_init(&ctx->arena, &alloc, 64 * 1024);
    base_map_init(&ctx->nodes, &alloc);
    base_map_init(&ctx->programs, &alloc);
    base_map_init(&ctx->refused, &alloc);
    base_map_init(&ctx->exprs, &alloc);
    ctx->free_expr = UINT32_MAX;
    kiln_status st = eng_registry_add(ctx);
    if (st == KILN_OK)
        st = sym_ctx_create(&alloc, &ctx->sym);
    if (st == KILN_OK)
        st = shape_ctx_create(&alloc, ctx->sym, &ctx->shape);
    if (st == KILN_OK)
        st = external ? eng_runtime_init_external(ctx, external) : eng_runtime_init(ctx, opt);
    if (st != KILN_OK) {
        /* The message of a failed creation goes to the log: there is no context to hold it. */
        base_log(BASE_LOG_ERROR, "engine", "context creation failed: %s",
                 ctx->err.status ? base_error_message(&ctx->err) : kiln_status_string(st));
        kiln_context_destroy(ctx); /* gives the thread's route back */
        return st;
    }
    eng_trace_open(ctx);
    eng_log_leave(ctx);
    *out = ctx;
    return KILN_OK;
}

void kiln_context_destroy(kiln_context *ctx) {
    if (!ctx)
        return;
    eng_log_enter(ctx);       /* validation messages of the device's destruction, ... */
    eng_registry_remove(ctx); /* its handles name no context from now on */
    eng_lifetime_finish(ctx);
    eng_trace_close(ctx); /* the file is complete JSON from here */
    eng_runtime_finish(ctx);
    shape_ctx_destroy(ctx->shape);
    sym_ctx_destroy(ctx->sym);
    base_map_finish(&ctx->nodes);
    base_map_finish(&ctx->programs);
    base_map_finish(&ctx->refused);
    eng_foresight_finish(ctx);
    base_arena_finish(&ctx->arena);
    base_allocator alloc = ctx->alloc;
    base_log_route_set(ctx->log_prev); /* however deep: nothing of ctx runs after this */
    base_free(&alloc, ctx, sizeof *ctx);
}

/* The accessors accept NULL (a context whose creation failed). */
kiln_status kiln_context_status(const kiln_context *ctx) {
    if (!ctx)
        return KILN_ERROR_INVALID_ARGUMENT;
    return ctx->err.status;
}

const char *kiln_context_message(const kiln_context *ctx) {
    if (!ctx)
        return "no context";
    return base_error_message(&ctx->err);
}

void kiln_context_clear_error(kiln_context *ctx) {
    if (!ctx)
        return;
    base_error_clear(&ctx->err);
    ctx->sticky = false;
    /* An error the modules below recorded and nobody moved here (an allocation failing deep
     * in a symbolic computation) would fail the next call with no new cause. */
    shape_ctx_clear_error(ctx->shape); /* and the symbolic context's */
}

const char *kiln_context_device_name(const kiln_context *ctx) {
    if (!ctx)
        return "no context";
    return ctx->device_name;
}

const char *kiln_context_profile(const kiln_context *ctx) {
    return ctx && ctx->profile ? ctx->profile->name : NULL;
}

bool kiln_dtype_supported(const kiln_context *ctx, kiln_dtype dtype) {
    if (!ctx || (int)dtype < 0 || dtype >= KILN_DTYPE_COUNT_)
        return false;
    return dtype != KILN_I64 || ctx->interpreter || vkd_device_caps(ctx->dev)->int64;
}

kiln_stats kiln_context_stats(const kiln_context *ctx) {
    if (!ctx)
        return (kiln_stats){0};
    kiln_stats s = ctx->stats;
    s.live_tensors = ctx->live_tensors;
    s.live_nodes = ctx->live_nodes;
    s.live_storages = ctx->live_storages;
    s.live_storage_bytes = ctx->live_bytes;
    s.pool_bytes = ctx->pool_bytes;
    s.live_expressions = sym_ctx_live_nodes(ctx->sym);
    for (uint32_t i = 0; i < ENG_PLANS_KEPT; i++)
        s.live_plans += ctx->plans[i] != NULL;
    s.live_replays = eng_foresight_replays(ctx);
    return s;
}

/* ---- expressions --------------------------------------------------------------------------- */

/* The node of an operand handle (NULL: none, or a bad handle, recorded). */
static const sym_node *S(kiln_context *ctx, const kiln_expr *e, const char *call) {
    return eng_expr_arg(ctx, e, call);
}

const kiln_expr *kiln_int(kiln_context *ctx, int64_t value) {
    if (!ctx)
        return NULL;
    return sym_checked(ctx, sym_const(ctx->sym, value));
}

static bool is_identifier(const char *s) {
    if (!s || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return false;
    for (; *s; s++) {
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_' ||
              (*s >= '0' && *s <= '9')))
            return false;
    }
    return true;
}

const kiln_expr *kiln_variable(kiln_context *ctx, const char *name, int64_t min, int64_t max) {
    if (!ctx)
        return NULL;
    if (!is_identifier(name))
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                        "kiln_variable: the name must be an identifier ([A-Za-z_][A-Za-z0-9_]*)");
    if (min < 0 || min > max)
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                        "kiln_variable %s: the range [%lld, %lld] must be non-empty and >= 0", name,
                        (long long)min, (long long)max);
    return sym_checked(ctx, sym_var(ctx->sym, name, min, max));
}

const kiln_expr *kiln_bind(kiln_context *ctx, const kiln_expr *variable, int64_t value) {
    if (!ctx || !variable)
        return NULL;
    const sym_node *var = S(ctx, variable, "kiln_bind");
    if (!var)
        return NULL;
    const char *name;
    int64_t min, max;
    if (sym_node_kind(var) != SYM_VAR || !sym_var_info(var, &name, &min, &max))
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_bind: not a Variable");
    if (value < min || value > max)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_RANGE,
                        "kiln_bind: %lld is outside the range [%lld, %lld] of Variable %s",
                        (long long)value, (long long)min, (long long)max, name);
    const sym_node *bound = sym_bind(ctx->sym, var, value);
    if (!bound || ctx->scope_depth > 0)
        return sym_checked(ctx, bound);
    /* Outside any scope a binding to a new value supersedes the Variable's previous one: the
     * expressions pinned with it go, but for what a tensor or kernel still uses (lifetime.c). */
    bool superseded = eng_unpin_bindings(ctx, var, value);
    const kiln_expr *h = sym_checked(ctx, bound);
    if (superseded)
        eng_collect_expressions(ctx, true);
    return h;
}

const kiln_expr *kiln_expr_add(kiln_context *ctx, const kiln_expr *a, const kiln_expr *b) {
    if (!ctx)
        return NULL;
    const sym_node *x = S(ctx, a, "kiln_expr_add"), *y = S(ctx, b, "kiln_expr_add");
    if ((a && !x) || (b && !y))
        return NULL;
    return sym_checked(ctx, sym_add(ctx->sym, x, y));
}

const kiln_expr *kiln_expr_mul(kiln_context *ctx, const kiln_expr *a, const kiln_expr *b) {
    if (!ctx)
        return NULL;
    const sym_node *x = S(ctx, a, "kiln_expr_mul"), *y = S(ctx, b, "kiln_expr_mul");
    if ((a && !x) || (b && !y))
        return NULL;
    return sym_checked(ctx, sym_mul(ctx->sym, x, y));
}

const kiln_expr *kiln_expr_div(kiln_context *ctx, const kiln_expr *a, const kiln_expr *b) {
    if (!ctx)
        return NULL;
    const sym_node *x = S(ctx, a, "kiln_expr_div"), *y = S(ctx, b, "kiln_expr_div");
    if ((a && !x) || (b && !y))
        return NULL;
    return sym_checked(ctx, sym_floordiv(ctx->sym, x, y));
}

const kiln_expr *kiln_expr_mod(kiln_context *ctx, const kiln_expr *a, const kiln_expr *b) {
    if (!ctx)
        return NULL;
    const sym_node *x = S(ctx, a, "kiln_expr_mod"), *y = S(ctx, b, "kiln_expr_mod");
    if ((a && !x) || (b && !y))
        return NULL;
    return sym_checked(ctx, sym_floormod(ctx->sym, x, y));
}

kiln_status kiln_expr_value(kiln_context *ctx, const kiln_expr *e, int64_t *value) {
    if (!ctx)
        return KILN_ERROR_INVALID_ARGUMENT;
    if (!e)
        return ctx->err.status ? ctx->err.status
                               : base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                                                "kiln_expr_value: no expression");
    if (!value)
        return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT, "kiln_expr_value: no output");
    kiln_status st;
    const sym_node *n = eng_expr_arg_status(ctx, e, "kiln_expr_value", &st);
    if (!n)
        return st;
    return eng_eval(ctx, "kiln_expr_value", n, value);
}
