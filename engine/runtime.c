/* The runtime: where kernels run. A Vulkan device through vk/ (buffers, pipelines, batches of
 * dispatches) or the reference interpreter (host memory, interp_run). The memory cache of
 * compiled kernels is keyed by the AST hash. */
#include "emit.h"
#include "eng.h"
#include "interp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WORKGROUP_SIZE = 64 };

static bool wants_interpreter(const char *device) {
    return device && strcmp(device, "interp") == 0;
}

kiln_status eng_runtime_init(kiln_context *ctx, const kiln_context_options *opt) {
    const char *device = opt->device ? opt->device : getenv("KILN_DEVICE");
    if (wants_interpreter(device)) {
        ctx->interpreter = true;
        snprintf(ctx->device_name, sizeof ctx->device_name, "interpreter");
        return KILN_OK;
    }
    vkd_instance_options io = {
        .validation = opt->validation, .alloc = &ctx->alloc, .app_name = "kiln"};
    base_error err = {0};
    kiln_status st = vkd_instance_create(&io, &ctx->inst, &err);
    uint32_t index = 0;
    if (st == KILN_OK)
        st = vkd_instance_select(ctx->inst, device, &index, &err);
    bool no_device = st == KILN_ERROR_NO_DEVICE || st == KILN_ERROR_VULKAN_UNAVAILABLE;
    if (no_device && !(device && device[0])) {
        /* No Vulkan device and none asked for: the interpreter runs everything. */
        base_log(BASE_LOG_WARN, "engine", "%s; using the reference interpreter",
                 base_error_message(&err));
        vkd_instance_destroy(ctx->inst);
        ctx->inst = NULL;
        ctx->interpreter = true;
        snprintf(ctx->device_name, sizeof ctx->device_name, "interpreter");
        return KILN_OK;
    }
    if (st == KILN_OK)
        st = vkd_device_create(ctx->inst, index, NULL, &ctx->dev, &err);
    if (st != KILN_OK)
        return base_error_set(&ctx->err, st, "%s", base_error_message(&err));
    snprintf(ctx->device_name, sizeof ctx->device_name, "%s",
             vkd_instance_device(ctx->inst, index)->props.deviceName);
    return KILN_OK;
}

void eng_runtime_finish(kiln_context *ctx) {
    for (eng_program *p = ctx->program_list; p;) {
        eng_program *next = p->next;
        vkd_pipeline_destroy(p->pipeline);
        ir_kernel_finish(&p->ir);
        base_free(&ctx->alloc, p, sizeof *p);
        p = next;
    }
    ctx->program_list = NULL;
    for (eng_storage *s = ctx->storage_list; s;) {
        eng_storage *next = s->next;
        eng_storage_free(ctx, s);
        base_free(&ctx->alloc, s, sizeof *s);
        s = next;
    }
    ctx->storage_list = NULL;
    vkd_device_destroy(ctx->dev);
    vkd_instance_destroy(ctx->inst);
    ctx->dev = NULL;
    ctx->inst = NULL;
}

/* ---- storage --------------------------------------------------------------------------------- */

static uint64_t storage_bytes(const eng_storage *s) {
    return s->elements * eng_type_size(s->type);
}

kiln_status eng_storage_allocate(kiln_context *ctx, eng_storage *s) {
    uint64_t bytes;
    if (__builtin_mul_overflow(s->elements, (uint64_t)eng_type_size(s->type), &bytes))
        return base_error_set(&ctx->err, KILN_ERROR_OVERFLOW, "a storage of %llu elements",
                              (unsigned long long)s->elements);
    if (ctx->interpreter) {
        if (bytes > SIZE_MAX / 2)
            return base_error_set(&ctx->err, KILN_ERROR_LIMIT_EXCEEDED, "storage too large");
        s->host = base_calloc(&ctx->alloc, 1, bytes ? (size_t)bytes : 1);
        if (!s->host)
            return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY,
                                  "no memory for a storage of %llu bytes",
                                  (unsigned long long)bytes);
        return KILN_OK;
    }
    base_error err = {0};
    /* One element at least: a masked load may read element 0 of an empty storage. */
    uint64_t size = bytes ? bytes : eng_type_size(s->type);
    kiln_status st = vkd_buffer_create(ctx->dev, size, &s->buffer, &err);
    if (st != KILN_OK)
        return base_error_set(&ctx->err, st, "%s", base_error_message(&err));
    return KILN_OK;
}

void eng_storage_free(kiln_context *ctx, eng_storage *s) {
    if (s->host) {
        uint64_t bytes = storage_bytes(s);
        base_free(&ctx->alloc, s->host, bytes ? (size_t)bytes : 1);
    }
    vkd_buffer_destroy(s->buffer);
    s->host = NULL;
    s->buffer = NULL;
}

kiln_status eng_storage_write(kiln_context *ctx, eng_storage *s, const void *data, uint64_t bytes) {
    if (bytes == 0)
        return KILN_OK;
    ctx->stats.bytes_uploaded += bytes;
    if (s->host) {
        memcpy(s->host, data, (size_t)bytes);
        return KILN_OK;
    }
    base_error err = {0};
    kiln_status st = vkd_buffer_upload(s->buffer, 0, data, bytes, &err);
    if (st != KILN_OK)
        base_error_set(&ctx->err, st, "%s", base_error_message(&err));
    return st;
}

kiln_status eng_storage_read(kiln_context *ctx, eng_storage *s, void *data, uint64_t bytes) {
    if (bytes == 0)
        return KILN_OK;
    ctx->stats.bytes_downloaded += bytes;
    if (s->host) {
        memcpy(data, s->host, (size_t)bytes);
        return KILN_OK;
    }
    base_error err = {0};
    kiln_status st = vkd_buffer_download(s->buffer, 0, data, bytes, &err);
    if (st != KILN_OK)
        base_error_set(&ctx->err, st, "%s", base_error_message(&err));
    return st;
}

/* ---- programs ---------------------------------------------------------------------------------
 */

static bool program_eq(const void *stored, const void *key, void *user) {
    (void)user;
    return ((const eng_program *)stored)->hash == *(const uint64_t *)key;
}

/* Debug output of a freshly compiled kernel (KILN_DEBUG=3: IR). */
static void debug_dump(const eng_program *p) {
    if (base_log_verbosity() < 3)
        return;
    size_t n = ir_dump(&p->ir, NULL, 0);
    char *text = malloc(n + 1);
    if (!text)
        return;
    ir_dump(&p->ir, text, n + 1);
    base_log(BASE_LOG_INFO, "engine", "kernel %016llx IR:\n%s", (unsigned long long)p->hash, text);
    free(text);
}

/* The device must have what the kernel's types need: the emitted module declares Float16 /
 * Int8 / Int64 with 16/8-bit storage for those types. */
static kiln_status check_types(kiln_context *ctx, const ir_kernel *ir) {
    const vkd_caps *caps = vkd_device_caps(ctx->dev);
    bool f16 = false, i8 = false, i64 = ir->index_type == IR_I64;
    for (uint32_t i = 0; i < ir->insts.len; i++) {
        ir_type t = ir->insts.data[i].type;
        f16 |= t == IR_F16;
        i8 |=
            t == IR_I8 || t == IR_U8 ||
            (t == IR_BOOL && (ir->insts.data[i].op == IR_LOAD || ir->insts.data[i].op == IR_STORE));
        i64 |= t == IR_I64;
    }
    if (f16 && !(caps->float16 && caps->storage_buffer_16bit))
        return base_error_set(&ctx->err, KILN_ERROR_UNSUPPORTED,
                              "%s cannot run f16 kernels (needs shaderFloat16 and "
                              "storageBuffer16BitAccess)",
                              ctx->device_name);
    if (i8 && !(caps->int8 && caps->storage_buffer_8bit))
        return base_error_set(&ctx->err, KILN_ERROR_UNSUPPORTED,
                              "%s cannot run i8, u8 or bool kernels (needs shaderInt8 and "
                              "storageBuffer8BitAccess)",
                              ctx->device_name);
    if (i64 && !caps->int64)
        return base_error_set(&ctx->err, KILN_ERROR_UNSUPPORTED,
                              "%s cannot run kernels with 64-bit indices (needs shaderInt64)",
                              ctx->device_name);
    return KILN_OK;
}

static kiln_status create_pipeline(kiln_context *ctx, eng_program *p) {
    const vkd_caps *caps = vkd_device_caps(ctx->dev);
    kiln_status tst = check_types(ctx, &p->ir);
    if (tst != KILN_OK)
        return tst;
    emit_options eo = {.spirv_version = caps->spirv_version,
                       .maintenance4 = caps->maintenance4,
                       .workgroup_size = p->workgroup_size};
    emit_result r;
    base_error err = {0};
    kiln_status st = emit_spirv(&p->ir, &eo, &r, &err);
    if (st != KILN_OK)
        return base_error_set(&ctx->err, st, "SPIR-V emission: %s", base_error_message(&err));
    spv_debug_dump(r.words, r.word_count, "kernel");
    uint32_t wg[3] = {p->workgroup_size, 1, 1};
    VkSpecializationMapEntry entries[3];
    for (uint32_t i = 0; i < 3; i++)
        entries[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    vkd_pipeline_desc desc = {
        .code = r.words,
        .word_count = r.word_count,
        .binding_count = p->ir.buffer_count,
        .push_constant_size = r.push_constant_size,
        .spec_entries = entries,
        .spec_entry_count = 3,
        .spec_data = wg,
        .spec_data_size = sizeof wg,
        .debug_name = "kiln kernel",
    };
    st = vkd_pipeline_create(ctx->dev, &desc, &p->pipeline, &err);
    emit_result_free(&p->ir.alloc, &r);
    if (st != KILN_OK)
        return base_error_set(&ctx->err, st, "%s", base_error_message(&err));
    ctx->stats.pipelines_created++;
    return KILN_OK;
}

kiln_status eng_program_get(kiln_context *ctx, const eng_kernel *k, eng_program **out) {
    eng_program *p = base_map_find(&ctx->programs, k->hash, &k->hash, program_eq, NULL);
    if (p) {
        ctx->stats.kernels_cached++;
        *out = p;
        return KILN_OK;
    }
    p = base_calloc(&ctx->alloc, 1, sizeof *p);
    if (!p)
        return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a kernel");
    p->hash = k->hash;
    p->workgroup_size = WORKGROUP_SIZE;
    kiln_status st = eng_kernel_lower(ctx, k, &p->ir);
    if (st == KILN_OK)
        st = ir_verify(&p->ir, &ctx->err);
    if (st == KILN_OK && !ctx->interpreter)
        st = create_pipeline(ctx, p);
    if (st == KILN_OK && base_map_insert(&ctx->programs, p->hash, p) != KILN_OK)
        st = base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for the cache");
    if (st != KILN_OK) {
        vkd_pipeline_destroy(p->pipeline);
        ir_kernel_finish(&p->ir);
        base_free(&ctx->alloc, p, sizeof *p);
        return st;
    }
    debug_dump(p);
    p->next = ctx->program_list;
    ctx->program_list = p;
    ctx->stats.kernels_compiled++;
    *out = p;
    return KILN_OK;
}

/* ---- running kernels ----------------------------------------------------------------------------
 */

typedef struct dispatched {
    uint64_t hash;
    uint64_t size;
    bool reduce;
} dispatched;

struct eng_batch {
    vkd_batch *batch;         /* NULL with the interpreter */
    BASE_VEC(dispatched) log; /* what ran, for KILN_DEBUG=2 */
};

kiln_status eng_batch_begin(kiln_context *ctx, eng_batch **out) {
    eng_batch *b = base_calloc(&ctx->alloc, 1, sizeof *b);
    if (!b)
        return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a batch");
    if (!ctx->interpreter) {
        base_error err = {0};
        kiln_status st = vkd_batch_create(ctx->dev, &b->batch, &err);
        if (st != KILN_OK) {
            base_free(&ctx->alloc, b, sizeof *b);
            return base_error_set(&ctx->err, st, "%s", base_error_message(&err));
        }
    }
    *out = b;
    return KILN_OK;
}

/* The number of invocations: the kernel's element count under its parameter values. */
static kiln_status global_size(kiln_context *ctx, const eng_kernel *k, uint64_t *out) {
    sym_assignment a = {.vars = k->params, .values = k->param_values, .count = k->param_count};
    int64_t n;
    base_error err = {0};
    kiln_status st = sym_eval(k->numel, &a, &n, &err);
    if (st != KILN_OK)
        return base_error_set(&ctx->err, st, "kernel size: %s", base_error_message(&err));
    *out = n < 0 ? 0 : (uint64_t)n;
    return KILN_OK;
}

static kiln_status run_interpreter(kiln_context *ctx, const eng_program *p, const eng_kernel *k,
                                   uint64_t n) {
    interp_buffer bufs[ENG_MAX_BUFFERS];
    for (uint32_t i = 0; i < k->buffer_count; i++)
        bufs[i] = (interp_buffer){k->buffers[i]->host, k->buffers[i]->elements};
    return interp_run(&p->ir, bufs, k->param_values, n, &ctx->err);
}

/* lavapipe ends every loop of an invocation after 65535 iterations in all (gallivm's
 * LP_MAX_TGSI_LOOP_ITERATIONS), silently. Reductions of constant size are split into stages
 * below that (ops.c); one whose symbolic size is larger is refused rather than cut short. */
static kiln_status check_loop_limit(kiln_context *ctx, const eng_kernel *k) {
    const vkd_device_info *info = vkd_device_info_of(ctx->dev);
    if (!k->has_reduce || !info->has_driver || info->driver.driverID != VK_DRIVER_ID_MESA_LLVMPIPE)
        return KILN_OK;
    sym_assignment a = {.vars = k->params, .values = k->param_values, .count = k->param_count};
    int64_t count;
    base_error err = {0};
    if (sym_eval(k->reduce_count, &a, &count, &err) != KILN_OK || count <= 65535)
        return KILN_OK;
    return base_error_set(&ctx->err, KILN_ERROR_UNSUPPORTED,
                          "%s cannot reduce %lld elements in one kernel (at most 65535 loop "
                          "iterations per invocation)",
                          ctx->device_name, (long long)count);
}

static kiln_status run_device(kiln_context *ctx, eng_batch *b, const eng_program *p,
                              const eng_kernel *k, uint64_t n) {
    kiln_status lst = check_loop_limit(ctx, k);
    if (lst != KILN_OK)
        return lst;
    vkd_binding bindings[ENG_MAX_BUFFERS];
    for (uint32_t i = 0; i < k->buffer_count; i++)
        bindings[i] = (vkd_binding){.buffer = k->buffers[i]->buffer};
    /* Parameters in the index type's width. */
    union {
        int32_t i32[ENG_MAX_PARAMS];
        int64_t i64[ENG_MAX_PARAMS];
    } push;
    bool wide = p->ir.index_type == IR_I64;
    for (uint32_t i = 0; i < k->param_count; i++) {
        if (wide)
            push.i64[i] = k->param_values[i];
        else
            push.i32[i] = (int32_t)k->param_values[i];
    }
    uint32_t push_size = k->param_count * (wide ? 8u : 4u);
    /* Workgroups on a 2-D grid when one row cannot hold them (the kernel linearises x, y). */
    uint64_t groups = (n + p->workgroup_size - 1) / p->workgroup_size;
    uint32_t max_x = vkd_device_caps(ctx->dev)->max_workgroup_count[0];
    uint32_t grid[3] = {(uint32_t)(groups < max_x ? groups : max_x), 1, 1};
    grid[1] = (uint32_t)((groups + grid[0] - 1) / grid[0]);
    base_error err = {0};
    kiln_status st = vkd_batch_dispatch(b->batch, p->pipeline, bindings, k->buffer_count,
                                        push_size ? &push : NULL, push_size, grid, &err);
    if (st != KILN_OK)
        return base_error_set(&ctx->err, st, "%s", base_error_message(&err));
    return KILN_OK;
}

kiln_status eng_batch_run(kiln_context *ctx, eng_batch *b, const eng_program *p,
                          const eng_kernel *k) {
    uint64_t n;
    kiln_status st = global_size(ctx, k, &n);
    if (st != KILN_OK || n == 0) /* an empty result needs no dispatch */
        return st;
    ctx->stats.dispatches++;
    if (base_log_verbosity() >= 2) {
        dispatched d = {k->hash, n, k->has_reduce};
        (void)BASE_VEC_PUSH(&ctx->alloc, &b->log, d); /* debug output only: a miss is harmless */
    }
    if (ctx->interpreter)
        return run_interpreter(ctx, p, k, n);
    return run_device(ctx, b, p, k, n);
}

kiln_status eng_batch_finish(kiln_context *ctx, eng_batch *b) {
    kiln_status st = KILN_OK;
    if (b->batch) {
        base_error err = {0};
        st = vkd_batch_submit(b->batch, &err);
        if (st != KILN_OK) {
            base_error_set(&ctx->err, st, "%s", base_error_message(&err));
        } else {
            uint64_t ns;
            for (uint32_t i = 0; i < vkd_batch_dispatch_count(b->batch); i++) {
                if (vkd_batch_dispatch_time(b->batch, i, &ns))
                    ctx->stats.device_time_ns += ns;
            }
        }
    }
    for (uint32_t i = 0; i < b->log.len; i++) { /* KILN_DEBUG=2: one line per kernel */
        uint64_t ns = 0;
        bool timed = b->batch && vkd_batch_dispatch_time(b->batch, i, &ns);
        const dispatched *d = &b->log.data[i];
        base_log(BASE_LOG_DEBUG, "engine", "kernel %c_%016llx: %llu invocations, %s%.3f ms",
                 d->reduce ? 'r' : 'E', (unsigned long long)d->hash, (unsigned long long)d->size,
                 timed ? "" : "untimed ", (double)ns / 1e6);
    }
    vkd_batch_destroy(b->batch);
    BASE_VEC_FREE(&ctx->alloc, &b->log);
    base_free(&ctx->alloc, b, sizeof *b);
    return st;
}
