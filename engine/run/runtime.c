/* The runtime: where kernels run. A Vulkan device through vk/ (buffers, pipelines, batches of
 * dispatches) or the reference interpreter (host memory, interp_run). The memory cache of
 * compiled kernels is keyed by the AST hash. */
#include "emit.h"
#include "eng.h"
#include "eng_testing.h"
#include "interp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WORKGROUP_SIZE = 256 };

static bool wants_interpreter(const char *device) {
    return device && strcmp(device, "interp") == 0;
}

/* How wide the context's kernels go: invocations worth keeping busy (2048 on a CPU, lavapipe
 * and the interpreter, 512 for reductions of long loops, whose items each do much work; 65536
 * on a GPU) and the lanes of a group reduction: 64 on a GPU; on a
 * CPU its subgroup size (lavapipe's 8: one SIMD row, so the workgroup barriers switch
 * nothing); the test-only option's count if given; a power of two within the device's
 * workgroup limits. Output tiles (lower.c): on a CPU 8 elementwise outputs per invocation
 * (one octet of each operand), 16 for a kernel that reads one buffer, 32 when a load is
 * shared by a row's outputs (a broadcast operand: its load amortised). Measured as SPIR-V on
 * the same buffers, a*b+c took 0.96 of 16's time with 8, the broadcast add 0.90-0.96 with 32
 * and 1.01-1.04 with 8; the copy out of x[:,::-1] against its contiguous twin paired at
 * 0.97-1.17 with 16 and 1.06-1.33 with 8 (bench_ops, runs minutes apart);
 * 8 x 8 for reductions that share loads (measured on lavapipe: several outputs per invocation,
 * register blocking) and 16 columns for those whose tile only reads vectors (column reductions:
 * 10-15% faster than 8 on lavapipe, measured in one process against 8); on a GPU one elementwise
 * output (neighbouring invocations read neighbouring elements), 4 x 4 and 4 columns.
 * On a CPU the 8 x 8 tiles of a workgroup's invocations lie in a block of 32 x 8 tiles (one
 * 64-column panel of a matmul's right operand for the workgroup: on lavapipe 2048^3 ran
 * 1.1-1.6x faster than with row-major items in five of seven one-process runs, the same in
 * two), and a subgroup of 8 with ballot operations shares the left
 * operand's loads (share_lanes; the interpreter runs the same teams). On a CPU, an
 * invocation's index times a constant, where it flows into a loop, is emitted as a product by
 * a run-time value (emit.c opaque_multipliers); a GPU's compiler keeps its constants. The
 * test-only override gpu_tuning (eng_testing.h) chooses the GPU's figures on any device;
 * tile_* (block rows too) then set tiles, and unshared_loads turns sharing off. */
void eng_runtime_tune(kiln_context *ctx) {
    ctx->parallelism = 2048;
    ctx->parallelism_long = 512;
    ctx->min_workgroups = 8;
    ctx->group_rows = false;
    ctx->whole_short_rows = true;
    ctx->window_rows = true;
    ctx->tile_ew = 8;
    ctx->tile_ew_one = 16;
    ctx->tile_ew_shared = 32;
    ctx->tile_rows = ctx->tile_cols = 8;
    ctx->tile_vector_cols = 16;
    ctx->tile_block_rows = 32;
    ctx->tile_block_cols = 8;
    ctx->share_lanes = 8; /* the interpreter runs a CPU's kernels, teams included */
    uint32_t want = 8, limit = 1024;
    bool gpu = ctx->test_gpu_tuning;
    if (!ctx->interpreter) {
        const vkd_caps *caps = vkd_device_caps(ctx->dev);
        uint32_t sub = caps->subgroup_size;
        gpu = gpu || vkd_device_info_of(ctx->dev)->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU;
        if (!gpu && sub >= 2 && sub <= 64)
            want = sub;
        bool ballot = caps->subgroup_operations & VK_SUBGROUP_FEATURE_BALLOT_BIT;
        ctx->share_lanes = ballot && sub >= 2 && sub <= 64 && !(sub & (sub - 1)) ? sub : 0;
        limit = caps->max_workgroup_invocations < caps->max_workgroup_size[0]
                    ? caps->max_workgroup_invocations
                    : caps->max_workgroup_size[0];
    }
    ctx->opaque_multipliers = !gpu; /* llvmpipe's loads: emit.c */
    ctx->paired_vectors = !gpu && !ctx->interpreter && !ctx->test_unpaired_vectors &&
                          vkd_device_caps(ctx->dev)->int64;
    ctx->octets = !gpu && !ctx->test_unpaired_vectors && (ctx->paired_vectors || ctx->interpreter);
    /* A device profile stands for a GPU (a phone's limits): storage buffers, as there, so the
     * suite's profiled runs keep that path covered on lavapipe. */
    ctx->texel_reads = !gpu && !ctx->interpreter && !ctx->test_storage_reads && !ctx->profile &&
                       vkd_device_caps(ctx->dev)->texel_fetch;
    if (gpu || ctx->test_unshared_loads)
        ctx->share_lanes = 0;
    if (gpu) {
        ctx->parallelism = ctx->parallelism_long = 65536;
        ctx->min_workgroups = 0;
        ctx->group_rows = true;
        ctx->whole_short_rows = false;
        ctx->window_rows = false;
        ctx->tile_ew = ctx->tile_ew_one = ctx->tile_ew_shared = 1;
        ctx->tile_rows = ctx->tile_cols = ctx->tile_vector_cols = 4;
        ctx->tile_block_rows = ctx->tile_block_cols = 1;
        want = 64;
    }
    uint32_t *tiles[5] = {&ctx->tile_ew, &ctx->tile_rows, &ctx->tile_cols, &ctx->tile_vector_cols,
                          &ctx->tile_block_rows};
    for (int i = 0; i < 5; i++) {
        if (!ctx->test_tile[i])
            continue;
        uint32_t t = 1;
        while (t * 2 <= ctx->test_tile[i] && t * 2 <= ENG_MAX_TILE)
            t *= 2;
        *tiles[i] = t;
    }
    if (ctx->test_tile[0])
        ctx->tile_ew_one = ctx->tile_ew_shared = ctx->tile_ew;
    if (ctx->test_group_lanes)
        want = ctx->test_group_lanes;
    uint32_t lanes = 1;
    while (lanes * 2 <= want && lanes * 2 <= limit)
        lanes *= 2;
    ctx->group_lanes = lanes;
    /* Row groups narrow down to a subgroup (a narrower workgroup leaves lanes idle), or not
     * at all where the subgroup size is unknown or not a power of two. */
    uint32_t sub = ctx->interpreter ? 0 : vkd_device_caps(ctx->dev)->subgroup_size;
    ctx->group_rows_min_lanes = sub >= 2 && sub < lanes && !(sub & (sub - 1)) ? sub : lanes;
}

kiln_status eng_runtime_profile(kiln_context *ctx, const char *option, const vkd_profile **out) {
    const char *name = option ? option : getenv("KILN_PROFILE");
    *out = NULL;
    if (!name || !name[0] || strcmp(name, "none") == 0)
        return KILN_OK;
    *out = vkd_profile_find(name);
    if (*out)
        return KILN_OK;
    char known[256];
    vkd_profile_names(known, sizeof known);
    return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                          "kiln_context_create: no device profile \"%.64s\"%s (the profiles: %s, "
                          "or none)",
                          name, option ? "" : " ($KILN_PROFILE)", known);
}

kiln_status eng_runtime_init(kiln_context *ctx, const kiln_context_options *opt) {
    const char *device = opt->device ? opt->device : getenv("KILN_DEVICE");
    const eng_testing *testing = eng_testing_options();
    ctx->test_group_lanes = testing->group_lanes;
    ctx->test_gpu_tuning = testing->gpu_tuning;
    ctx->test_tile[0] = testing->tile_ew;
    ctx->test_tile[1] = testing->tile_rows;
    ctx->test_tile[2] = testing->tile_cols;
    ctx->test_tile[3] = testing->tile_vector_cols;
    ctx->test_tile[4] = testing->tile_block_rows;
    ctx->test_unshared_loads = testing->unshared_loads;
    ctx->test_unpaired_vectors = testing->unpaired_vectors;
    ctx->test_storage_reads = testing->storage_reads;
    if (wants_interpreter(device)) {
        ctx->interpreter = true;
        snprintf(ctx->device_name, sizeof ctx->device_name, "interpreter");
        eng_runtime_tune(ctx);
        return KILN_OK;
    }
    ctx->force_specialization = testing->force_specialization;
    ctx->timing = opt->timing || base_log_verbosity() >= 1 || eng_trace_wanted();
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
        eng_runtime_tune(ctx);
        return KILN_OK;
    }
    vkd_device_options dopt = {.max_push_constants = testing->max_push_constants,
                               .no_int64 = testing->no_int64,
                               .no_small_storage = testing->no_small_storage,
                               .max_storage_range = testing->max_storage_range};
    if (st == KILN_OK)
        st = eng_runtime_profile(ctx, opt->profile, &dopt.profile);
    ctx->profile = dopt.profile;
    if (st == KILN_OK)
        st = eng_cache_open(ctx, opt, vkd_instance_device(ctx->inst, index), &dopt);
    if (st == KILN_OK)
        st = vkd_device_create(ctx->inst, index, &dopt, &ctx->dev, &err);
    if (ctx->blob) { /* the device's pipeline cache holds it now */
        pcache_free(ctx->pcache, ctx->blob, ctx->blob_size);
        ctx->blob = NULL;
    }
    if (st == KILN_ERROR_NOT_FOUND && !ctx->err.status) /* the device asked for: name the others */
        return base_error_set(&ctx->err, st, "%s; or \"interp\", the reference interpreter",
                              base_error_message(&err));
    if (st != KILN_OK)
        return ctx->err.status ? ctx->err.status
                               : base_error_set(&ctx->err, st, "%s", base_error_message(&err));
    const vkd_device_info *info = vkd_instance_device(ctx->inst, index);
    snprintf(ctx->device_name, sizeof ctx->device_name, "%s", info->props.deviceName);
    eng_runtime_tune(ctx);
    return KILN_OK;
}

/* A kernel the device refused for its value types (check_types: 64-bit integers without
 * shaderInt64), by its hash and storage windows: a later realize of it fails with the same
 * message without lowering it again. Index types are not remembered (they follow the sizes a
 * variant is compiled for). */
typedef struct refusal {
    uint64_t hash;
    uint32_t windows[ENG_MAX_BUFFERS], log2;
    char message[BASE_ERROR_MESSAGE_MAX];
} refusal;

static bool refusal_eq(const void *stored, const void *key, void *user) {
    (void)user;
    const refusal *a = stored, *b = key;
    return a->hash == b->hash && a->log2 == b->log2 &&
           memcmp(a->windows, b->windows, sizeof a->windows) == 0;
}

static uint64_t refusal_hash(const refusal *r) {
    return base_hash_bytes(r->windows, sizeof r->windows, base_hash_u64(r->hash, r->log2));
}

void eng_runtime_finish(kiln_context *ctx) {
    for (eng_program *p = ctx->program_list; p;) {
        eng_program *next = p->next;
        vkd_pipeline_destroy(p->pipeline);
        ir_kernel_finish(&p->ir);
        base_free(&ctx->alloc, p->exprs, p->expr_count * sizeof *p->exprs);
        base_free(&ctx->alloc, p, sizeof *p);
        p = next;
    }
    ctx->program_list = NULL;
    void *r;
    for (size_t i = 0; base_map_next(&ctx->refused, &i, &r);)
        base_free(&ctx->alloc, r, sizeof(refusal));
    if (ctx->bounds_flag) {
        eng_storage_free(ctx, ctx->bounds_flag);
        base_free(&ctx->alloc, ctx->bounds_flag, sizeof *ctx->bounds_flag);
        ctx->bounds_flag = NULL;
    }
    for (size_t i = 0; i < ctx->pool.len; i++)
        vkd_buffer_destroy(ctx->pool.data[i]);
    BASE_VEC_FREE(&ctx->alloc, &ctx->pool);
    eng_cache_save_pipelines(ctx); /* mobile programs may never get here: realize saves too */
    eng_cache_close(ctx);
    vkd_batch_destroy(ctx->batch);
    ctx->batch = NULL;
    vkd_device_destroy(ctx->dev);
    vkd_instance_destroy(ctx->inst);
    ctx->dev = NULL;
    ctx->inst = NULL;
}

/* ---- storage --------------------------------------------------------------------------------- */

/* The pool of freed device buffers (eng_storage_release) holds at most this much. */
enum { POOL_MAX_BUFFERS = 64 };
#define POOL_MAX_BYTES (64ull << 20)

/* The size of the device buffer a storage of size bytes gets: sizes up to the pool's bound
 * are rounded up to a class (256 bytes, then four classes between consecutive powers of two:
 * at most 25% more) so that a freed buffer serves the next storage of about its size; never
 * above the device's storage-buffer range when size is within it. */
static uint64_t pool_class(const kiln_context *ctx, uint64_t size) {
    if (size <= 256)
        return 256;
    if (size > POOL_MAX_BYTES)
        return size;
    uint64_t quarter = (1ull << (63 - __builtin_clzll(size - 1))) / 4;
    uint64_t c = (size + quarter - 1) / quarter * quarter;
    uint64_t range = vkd_device_caps(ctx->dev)->max_storage_buffer_range;
    return range && size <= range && c > range ? size : c;
}

/* The elements a storage's host memory holds with the interpreter: two at least, as a device
 * buffer does (a masked pair reads elements 0 and 1 where it is invalid, lower.c). */
static uint64_t host_elements(const eng_storage *s) {
    return s->elements < 2 ? 2 : s->elements;
}

kiln_status eng_storage_allocate(kiln_context *ctx, eng_storage *s) {
    uint64_t bytes;
    if (__builtin_mul_overflow(s->elements, (uint64_t)eng_type_size(s->type), &bytes))
        return base_error_set(&ctx->err, KILN_ERROR_OVERFLOW, "a storage of %llu elements",
                              (unsigned long long)s->elements);
    if (ctx->interpreter) {
        if (bytes > SIZE_MAX / 2)
            return base_error_set(&ctx->err, KILN_ERROR_LIMIT_EXCEEDED, "storage too large");
        s->host = base_calloc(&ctx->alloc, (size_t)host_elements(s), eng_type_size(s->type));
        if (!s->host)
            return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY,
                                  "no memory for a storage of %llu bytes",
                                  (unsigned long long)bytes);
        return KILN_OK;
    }
    base_error err = {0};
    /* Two elements at least: a masked load may read element 0 of an empty storage, a masked
     * pair elements 0 and 1 (pool_class gives 256 bytes at least anyway). */
    /* Whole 32-bit words: a u8/i8/bool or f16 storage may be packed into u32 words (emit.h
     * storage_8bit), and its last word is then read and written whole (atomically, for the
     * bytes past the end too, which nothing reads). */
    uint64_t size = pool_class(ctx, ((bytes ? bytes : eng_type_size(s->type)) + 3) & ~3ull);
    for (size_t i = 0; i < ctx->pool.len; i++) { /* a freed buffer of this class, if any */
        if (vkd_buffer_size(ctx->pool.data[i]) == size) {
            s->buffer = ctx->pool.data[i];
            ctx->pool.data[i] = ctx->pool.data[--ctx->pool.len];
            ctx->pool_bytes -= size;
            return KILN_OK;
        }
    }
    /* None fits: a freed buffer of another class makes room for this one, so that a loop
     * whose sizes change every step (a symbolic batch) holds as many buffers as its steps need
     * at once, not one per size it ever saw. */
    if (ctx->pool.len) {
        vkd_buffer *old = ctx->pool.data[--ctx->pool.len];
        ctx->pool_bytes -= vkd_buffer_size(old);
        vkd_buffer_destroy(old);
    }
    kiln_status st = vkd_buffer_create(ctx->dev, size, &s->buffer, &err);
    if (st != KILN_OK)
        return base_error_set(&ctx->err, st, "%s", base_error_message(&err));
    return KILN_OK;
}

/* Gives a storage back: its device buffer is kept for reuse (loops allocate the same sizes
 * again; allocating device memory is a system call on some drivers), up to a bound. */
void eng_storage_release(kiln_context *ctx, eng_storage *s) {
    if (s->buffer && ctx->pool.len < POOL_MAX_BUFFERS &&
        ctx->pool_bytes + vkd_buffer_size(s->buffer) <= POOL_MAX_BYTES &&
        vkd_buffer_is_owned(s->buffer) && /* Kiln's own (never an application's) */
        BASE_VEC_PUSH(&ctx->alloc, &ctx->pool, s->buffer) == KILN_OK) {
        ctx->pool_bytes += vkd_buffer_size(s->buffer);
        s->buffer = NULL;
    }
    eng_storage_free(ctx, s);
}

void eng_storage_free(kiln_context *ctx, eng_storage *s) {
    if (s->host)
        base_free(&ctx->alloc, s->host, (size_t)host_elements(s) * eng_type_size(s->type));
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

/* The flag is a storage of the context's own (no tensor's: not among the live storages),
 * bound to the kernels that gather like any input; a buffer from the pool may hold old words,
 * so it is zeroed once. */
eng_storage *eng_bounds_flag(kiln_context *ctx) {
    if (ctx->bounds_flag)
        return ctx->bounds_flag;
    eng_storage *s = base_calloc(&ctx->alloc, 1, sizeof *s);
    if (!s)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for the bounds flag");
    s->type = IR_I32;
    s->elements = ENG_BOUNDS_WORDS;
    const int32_t zero[ENG_BOUNDS_WORDS] = {0};
    kiln_status st = eng_storage_allocate(ctx, s);
    if (st == KILN_OK)
        st = eng_storage_write(ctx, s, zero, sizeof zero);
    if (st != KILN_OK) {
        eng_storage_free(ctx, s);
        base_free(&ctx->alloc, s, sizeof *s);
        return NULL;
    }
    ctx->bounds_flag = s;
    return s;
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

/* Debug output of a freshly compiled kernel (KILN_DEBUG=3: its AST and IR), a log line per
 * line of text (a log line holds at most 1 KiB). Debug text is allocated with malloc: it
 * never touches the context's allocator or its accounting. */
static void debug_dump(const eng_kernel *k, const eng_program *p) {
    if (base_log_verbosity() < 3)
        return;
    size_t a = eng_kernel_dump(k, NULL, 0), n = ir_dump(&p->ir, NULL, 0);
    char *text = malloc(a + n + 2);
    if (!text)
        return;
    eng_kernel_dump(k, text, a + 1);
    ir_dump(&p->ir, text + a, n + 1);
    for (char *line = text, *end; *line; line = end + (*end != '\0')) {
        end = strchr(line, '\n');
        end = end ? end : line + strlen(line);
        base_log(BASE_LOG_INFO, "engine", "%.*s", (int)(end - line), line);
    }
    free(text);
}

/* The device must have what the kernel's types need. Small types run everywhere: computed in
 * 32 bits, and stored packed into 32-bit words where the device lacks 8/16-bit storage (emit.h
 * storage_8bit); 64-bit integers need shaderInt64, which is not emulated. */
static kiln_status check_types(kiln_context *ctx, const ir_kernel *ir, const char *name) {
    const vkd_caps *caps = vkd_device_caps(ctx->dev);
    bool i64 = ir->index_type == IR_I64;
    for (uint32_t i = 0; i < ir->insts.len; i++)
        i64 |= ir->insts.data[i].type == IR_I64;
    if (i64 && !caps->int64)
        return base_error_set(&ctx->err, KILN_ERROR_UNSUPPORTED,
                              "%s has no shaderInt64: it cannot run kernels with 64-bit integers "
                              "(i64 tensors, integer sums and products, argmax, or indices "
                              "past 2^31; kernel %s: %s)",
                              ctx->device_name, name,
                              ir->index_type == IR_I64 ? "its indices need 64 bits"
                                                       : "its values are 64-bit integers");
    return KILN_OK;
}

/* The windows buffer i of p is bound in: its storage's (eng_program.windows), or none where
 * the code reads it as texels (a texel view spans the whole buffer: maxTexelBufferElements,
 * not maxStorageBufferRange, bounds it). */
static uint32_t bound_windows(const eng_program *p, uint32_t i) {
    return p->texel_bindings >> i & 1 ? 0 : p->windows[i];
}

/* The pipeline of p from its SPIR-V words (emitted now or read from the disk cache). */
static kiln_status pipeline_from_words(kiln_context *ctx, eng_program *p, const uint32_t *words,
                                       size_t word_count) {
    uint32_t wg[3] = {p->workgroup_size, 1, 1};
    VkSpecializationMapEntry entries[3];
    for (uint32_t i = 0; i < 3; i++)
        entries[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    uint32_t counts[VKD_MAX_BINDINGS];
    for (uint32_t i = 0; i < p->binding_count && i < VKD_MAX_BINDINGS; i++)
        counts[i] = i < ENG_MAX_BUFFERS && bound_windows(p, i) ? bound_windows(p, i) : 1;
    vkd_pipeline_desc desc = {
        .code = words,
        .word_count = word_count,
        .binding_count = p->binding_count,
        .descriptor_counts = counts,
        .push_constant_size = p->push_constant_size,
        .texel_bindings = p->texel_bindings,
        .spec_entries = entries,
        .spec_entry_count = 3,
        .spec_data = wg,
        .spec_data_size = sizeof wg,
        .debug_name = "kiln kernel",
    };
    base_error err = {0};
    kiln_status st = vkd_pipeline_create(ctx->dev, &desc, &p->pipeline, &err);
    if (st != KILN_OK)
        return base_error_set(&ctx->err, st, "%s", base_error_message(&err));
    ctx->stats.pipelines_created++;
    return KILN_OK;
}

/* The buffers of p's lowered kernel read as texels: storages that may be (texel_storages),
 * only read, of a 32-bit type. */
static uint32_t texel_reads(const eng_program *p) {
    uint32_t mask = 0;
    for (uint32_t i = 0; i < p->ir.buffer_count; i++) {
        const ir_buffer *b = &p->ir.buffers[i];
        if ((p->texel_storages >> i & 1) && b->read && !b->written && ir_type_bits(b->type) == 32)
            mask |= 1u << i;
    }
    return mask;
}

/* Adds the time since start (base_now_ns) to the code-generation statistic. */
static void count_codegen(kiln_context *ctx, int64_t start) {
    int64_t end = base_now_ns();
    ctx->stats.codegen_ns += end > start ? (uint64_t)(end - start) : 0;
}

/* Emits p's IR as SPIR-V, keeps the words on disk, and creates the pipeline. */
static kiln_status create_pipeline(kiln_context *ctx, const eng_kernel *k, eng_program *p,
                                   const uint8_t *asked) {
    const vkd_caps *caps = vkd_device_caps(ctx->dev);
    kiln_status tst = check_types(ctx, &p->ir, p->name);
    if (tst != KILN_OK)
        return tst;
    uint32_t param_bytes = p->ir.param_count * (p->ir.index_type == IR_I64 ? 8u : 4u);
    p->params_in_buffer = param_bytes > caps->max_push_constants_size;
    emit_options eo = {.spirv_version = caps->spirv_version,
                       .maintenance4 = caps->maintenance4,
                       .workgroup_size = p->workgroup_size,
                       .params_in_buffer = p->params_in_buffer,
                       .opaque_multipliers = ctx->opaque_multipliers,
                       .paired_vectors = ctx->paired_vectors,
                       .preserve_specials = caps->preserve_specials32,
                       /* the builder declares an 8-bit integer type with Int8, so 8-bit
                        * storage needs shaderInt8 as well (else packed words) */
                       .storage_8bit = caps->storage_buffer_8bit && caps->int8,
                       .storage_16bit = caps->storage_buffer_16bit,
                       .float16 = caps->float16,
                       .window_log2 = p->window_log2};
    eo.texel_buffers = p->texel_bindings; /* lower_variant */
    for (uint32_t i = 0; i < p->ir.buffer_count; i++)
        eo.windows[i] = bound_windows(p, i);
    emit_result r;
    base_error err = {0};
    int64_t start = base_now_ns();
    kiln_status st = emit_spirv(&p->ir, &eo, &r, &err);
    count_codegen(ctx, start);
    if (st != KILN_OK)
        return base_error_set(&ctx->err, st, "SPIR-V emission: %s", base_error_message(&err));
    char label[ENG_NAME_MAX + 64]; /* bench/kiln_spv.sh reads these */
    snprintf(label, sizeof label, "kernel %s (%016llx), workgroup %u", p->name,
             (unsigned long long)k->hash, p->workgroup_size);
    spv_debug_dump(r.words, r.word_count, label);
    /* Under the validation layer, every module also passes SPIRV-Tools' validator (when the
     * build has it): a code-generation bug shows as an error, not as a wrong result. */
    if (vkd_instance_validation(ctx->inst) && spv_tools_available()) {
        uint32_t api = vkd_device_info_of(ctx->dev)->api_version;
        st = spv_validate(r.words, r.word_count,
                          api < VK_API_VERSION_1_1   ? VK_API_VERSION_1_1
                          : api > VK_API_VERSION_1_3 ? VK_API_VERSION_1_3
                                                     : api,
                          &err);
        if (st != KILN_OK) {
            emit_result_free(&p->ir.alloc, &r);
            return base_error_set(&ctx->err, KILN_ERROR_INTERNAL, "emitted SPIR-V is invalid: %s",
                                  base_error_message(&err));
        }
    }
    p->binding_count = r.binding_count;
    p->push_constant_size = r.push_constant_size;
    ctx->stats.kernels_texel += p->texel_bindings != 0;
    eng_cache_store(ctx, k, p, asked, r.words, r.word_count);
    st = pipeline_from_words(ctx, p, r.words, r.word_count);
    emit_result_free(&p->ir.alloc, &r);
    return st;
}

/* The workgroup size: 256 invocations (fewer workgroups amortise lavapipe's per-workgroup
 * cost), within the device's limits (Vulkan guarantees 128). */
static uint32_t workgroup_size(const kiln_context *ctx) {
    uint32_t size = WORKGROUP_SIZE;
    if (!ctx->interpreter) {
        const vkd_caps *caps = vkd_device_caps(ctx->dev);
        if (caps->max_workgroup_invocations < size)
            size = caps->max_workgroup_invocations;
        if (caps->max_workgroup_size[0] < size)
            size = caps->max_workgroup_size[0];
    }
    return size;
}

/* The parameter values of k as an assignment of its Variables. */
static sym_assignment params_of(const eng_kernel *k) {
    sym_assignment a = {.vars = k->params, .values = k->param_values, .count = k->param_count};
    return a;
}

/* Specialisation on the element count: a multiple of the workgroup size that one row of
 * workgroups covers needs no bounds check. A constant count decides it once and for all (it is
 * part of the kernel's key); a symbolic count is specialised only when the context forces it
 * (a test-only option), under a guard checked before every reuse. */
static void choose_variant(kiln_context *ctx, const eng_kernel *k, eng_program *p) {
    uint64_t wg = p->group_lanes ? 1 : p->workgroup_size; /* items per workgroup */
    uint64_t max_x =
        ctx->interpreter ? UINT32_MAX : vkd_device_caps(ctx->dev)->max_workgroup_count[0];
    int64_t n;
    if (sym_is_const(k->numel, &n)) {
        n /= (int64_t)p->per_item; /* the items */
        p->unchecked = n > 0 && (uint64_t)n % wg == 0 && (uint64_t)n / wg <= max_x;
        return;
    }
    if (!ctx->force_specialization)
        return;
    sym_ctx *sc = ctx->sym;
    /* the items: numel / per_item exactly for a tiled batch (eng_kernel_tile) */
    const sym_node *items = sym_floordiv_c(sc, k->numel, (int64_t)p->per_item);
    const sym_node *divisible =
        sym_eq(sc, sym_floormod_c(sc, items, (int64_t)wg), sym_const(sc, 0));
    const sym_node *one_row = sym_le(sc, items, sym_const(sc, (int64_t)(wg * max_x)));
    const sym_node *holds = sym_and(sc, divisible, one_row);
    if (!holds) {
        sym_ctx_clear_error(sc);
        return;
    }
    sym_guard g = {.kind = SYM_GUARD_TRUE, .expr = holds};
    sym_assignment a = params_of(k);
    base_error err = {0};
    if (sym_guard_check(&g, &a, &err)) {
        p->unchecked = true;
        p->has_guard = true;
        p->guard = g;
    }
}

/* ---- storages beyond the storage-buffer range --------------------------------------------------
 *
 * A descriptor shows at most maxStorageBufferRange bytes of a buffer (128 MiB on lavapipe and
 * many mobile GPUs), while one allocation may hold up to maxMemoryAllocationSize. A storage
 * larger than the range is bound as an array of descriptors, windows of S bytes each (S: the
 * largest power of two within the range; window w shows bytes [w S, (w + 1) S), offsets that
 * are multiples of the offset alignment), and the kernel picks the window of every access from
 * the index's high bits (emit.c buffer_pointer). Reductions and matmuls read across windows
 * like any other index, so one kernel still does the whole job; vector accesses are aligned to
 * their width, which divides S, so none straddles two windows. The count is rounded up to a
 * power of two (the descriptors past the buffer's end show its last window) so that storages
 * of nearby sizes share code; it is part of the variant (eng_program.windows) and of the disk
 * cache's key. */

/* The log2 of the window size S of the context's device: 0 when there is none (the
 * interpreter, or a range that cannot hold an aligned power of two of at least 256 bytes). */
static uint32_t window_log2(const kiln_context *ctx) {
    if (ctx->interpreter)
        return 0;
    const vkd_caps *caps = vkd_device_caps(ctx->dev);
    uint64_t range = caps->max_storage_buffer_range,
             align = caps->min_storage_buffer_offset_alignment;
    if (range < 256)
        return 0;
    uint32_t log2 = 63 - (uint32_t)__builtin_clzll(range);
    if (log2 > 31) /* the shift of an i32 index: 2 GiB windows at most */
        log2 = 31;
    return align && ((1ull << log2) % align) != 0 ? 0 : log2;
}

/* The windows of 2^log2 bytes that bind a storage of `bytes` bytes: enough to cover it, rounded
 * up to a power of two (see storage_windows). */
static uint64_t windows_of(uint64_t bytes, uint32_t log2) {
    uint64_t need = (bytes + (1ull << log2) - 1) >> log2, count = 1;
    while (count < need)
        count *= 2;
    return count;
}

uint32_t eng_storage_descriptors(const kiln_context *ctx, uint64_t bytes) {
    if (ctx->interpreter)
        return 1;
    uint64_t range = vkd_device_caps(ctx->dev)->max_storage_buffer_range;
    uint32_t log2 = window_log2(ctx);
    if (bytes <= range || !log2)
        return 1; /* (a storage that cannot be windowed fails with its own message) */
    uint64_t count = windows_of(bytes, log2);
    return count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
}

uint32_t eng_kernel_max_descriptors(const kiln_context *ctx) {
    if (ctx->interpreter)
        return UINT32_MAX; /* (kernels still have at most ENG_MAX_BUFFERS storages) */
    const vkd_caps *caps = vkd_device_caps(ctx->dev);
    /* Parameters that may outgrow the push constants travel in a buffer of their own. */
    uint32_t param_bytes = ENG_MAX_PARAMS * (caps->int64 ? 8u : 4u);
    return caps->max_storage_buffers_per_stage -
           (param_bytes > caps->max_push_constants_size ? 1u : 0u);
}

/* The windows k's storages need (eng_program.windows), or an error for a device that cannot
 * bind them that way. */
static kiln_status storage_windows(kiln_context *ctx, const eng_kernel *k,
                                   uint32_t windows[ENG_MAX_BUFFERS], uint32_t *log2) {
    memset(windows, 0, ENG_MAX_BUFFERS * sizeof *windows);
    *log2 = 0;
    if (ctx->interpreter)
        return KILN_OK;
    const vkd_caps *caps = vkd_device_caps(ctx->dev);
    for (uint32_t i = 0; i < k->buffer_count; i++) {
        uint64_t size = vkd_buffer_size(k->buffers[i]->buffer);
        if (size <= caps->max_storage_buffer_range)
            continue;
        *log2 = window_log2(ctx);
        if (!caps->storage_buffer_array_dynamic_indexing || !*log2)
            return base_error_set(&ctx->err, KILN_ERROR_UNSUPPORTED,
                                  "%s cannot bind a storage of %llu bytes: it exceeds "
                                  "maxStorageBufferRange (%llu), and the device %s",
                                  ctx->device_name, (unsigned long long)size,
                                  (unsigned long long)caps->max_storage_buffer_range,
                                  *log2 ? "has no shaderStorageBufferArrayDynamicIndexing "
                                          "to bind it in windows"
                                        : "has no aligned window size within the range");
        uint64_t count = windows_of(size, *log2);
        if (count > caps->max_storage_buffers_per_stage)
            return base_error_set(&ctx->err, KILN_ERROR_LIMIT_EXCEEDED,
                                  "a storage of %llu bytes needs %llu windows of %llu bytes "
                                  "(maxStorageBufferRange %llu), more than the %u storage "
                                  "buffers a kernel may bind",
                                  (unsigned long long)size, (unsigned long long)count,
                                  1ull << *log2, (unsigned long long)caps->max_storage_buffer_range,
                                  caps->max_storage_buffers_per_stage);
        windows[i] = (uint32_t)count;
    }
    return KILN_OK;
}

/* The descriptors of storage buffer buf for a kernel that binds it in `windows` windows of
 * 2^log2 bytes (0: one descriptor of the whole buffer); returns the count written. */
static uint32_t window_bindings(const vkd_buffer *buf, uint32_t windows, uint32_t log2,
                                vkd_binding *out) {
    if (!windows) {
        out[0] = (vkd_binding){.buffer = buf};
        return 1;
    }
    uint64_t size = vkd_buffer_size(buf), step = 1ull << log2;
    uint64_t last = (size - 1) >> log2; /* the last window with bytes of the buffer */
    for (uint32_t w = 0; w < windows; w++) {
        uint64_t offset = (w < last ? w : last) * step;
        out[w] = (vkd_binding){
            .buffer = buf, .offset = offset, .range = size - offset < step ? size - offset : step};
    }
    return windows;
}

/* ---- variants of lifted offsets -----------------------------------------------------------------
 *
 * A view's offset reaches the kernel as a value (kernel.c), but a vector access needs it
 * aligned: its lowest element a multiple of the vector's width. A variant is asked for by the
 * offsets' residues modulo the widest vector (8 where the device takes octets, else 4) and is
 * lowered with every lifted offset V read as 8 W + r (pushed W): whatever alignment that
 * proves, lowering may use. What a vector access relied on is kept (as 4 W' + r % 4 where
 * only vectors of four did), the rest is dropped and the kernel lowered again. A variant that
 * comes out as the code of one compiled already (residues that allow no vector, say) is an
 * alias of it: the code compiled for an aligned offset serves every offset of that residue,
 * the code without alignment every residue that gets no vector from it, each compiled once. */

/* The modulus of a lifted offset's residue: the widest vector access. */
static int64_t vector_modulus(const kiln_context *ctx) {
    return ctx->octets ? 8 : 4;
}

/* The variant k's values ask for: each lifted offset's value modulo the widest vector. */
static void wanted_residues(const kiln_context *ctx, const eng_kernel *k, uint8_t *residue) {
    int64_t m = vector_modulus(ctx);
    memset(residue, 0, ENG_MAX_PARAMS);
    for (uint32_t i = 0; i < k->param_count; i++) {
        if (k->offset_params & (1u << i))
            residue[i] = (uint8_t)((k->param_values[i] % m + m) % m);
    }
}

/* The alignment p's code reads parameter i with (1: none). */
static int64_t alignment(const eng_program *p, uint32_t i) {
    return p->align[i] > 1 ? p->align[i] : 1;
}

/* Whether a and b (variants of one kernel of `params` parameters) have the same code: the
 * same alignment of each offset, the same bounds-check variant. */
static bool same_code(const eng_program *a, const eng_program *b, uint32_t params) {
    if (a->unchecked != b->unchecked || a->has_guard != b->has_guard ||
        a->window_log2 != b->window_log2 || a->texel_storages != b->texel_storages ||
        memcmp(a->windows, b->windows, sizeof a->windows))
        return false;
    if (a->has_guard && (a->guard.kind != b->guard.kind || a->guard.expr != b->guard.expr ||
                         a->guard.a != b->guard.a || a->guard.b != b->guard.b))
        return false;
    for (uint32_t i = 0; i < params; i++) {
        int64_t m = alignment(a, i);
        if (m != alignment(b, i) || a->residue[i] % m != b->residue[i] % m)
            return false;
    }
    return true;
}

/* A compiled variant of k's hash with p's code (not an alias), or NULL. */
static eng_program *twin_of(kiln_context *ctx, const eng_kernel *k, const eng_program *p) {
    eng_program *q = base_map_find(&ctx->programs, k->hash, &k->hash, program_eq, NULL);
    for (; q; q = q->variant) {
        if (!q->same && same_code(q, p, k->param_count))
            return q;
    }
    return NULL;
}

/* The values pushed for k's parameters to p's code: an aligned offset V = m W + r as W. */
static void pushed_values(const eng_program *p, const eng_kernel *k, int64_t *values) {
    for (uint32_t i = 0; i < k->param_count; i++) {
        int64_t v = k->param_values[i], m = alignment(p, i);
        values[i] = (v - (v % m + m) % m) / m;
    }
}

/* The buffers of k whose storages may be read as texels (eng_program.texel_storages): made
 * with a texel view (not an application's buffer, within the texel limit), a storage beyond
 * the storage-buffer range included (read as texels, it is bound whole: bound_windows). */
static uint32_t texel_storages(const kiln_context *ctx, const eng_kernel *k) {
    uint32_t mask = 0;
    for (uint32_t i = 0; ctx->texel_reads && i < k->buffer_count; i++) {
        if (k->buffers[i]->buffer && vkd_buffer_texels(k->buffers[i]->buffer))
            mask |= 1u << i;
    }
    /* the bit after k's buffers: the output's storage may be read through an alias binding
     * (lower.c eng_kernel_lower, an in-place write's target), where a binding stays free */
    if ((mask & 1u) && k->buffer_count + 1 < ENG_MAX_BUFFERS)
        mask |= 1u << k->buffer_count;
    return mask;
}

/* A compiled variant of k's hash whose guard holds for k's values, that was asked for by
 * their residues and binds k's storages in the same windows, or NULL. An alias answers with
 * the variant whose code it shares. With count, a guard that fails is counted in the stats. */
static eng_program *find_variant(kiln_context *ctx, const eng_kernel *k,
                                 const uint32_t windows[ENG_MAX_BUFFERS], bool count) {
    uint32_t texels = texel_storages(ctx, k);
    eng_program *p = base_map_find(&ctx->programs, k->hash, &k->hash, program_eq, NULL);
    sym_assignment a = params_of(k);
    uint8_t want[ENG_MAX_PARAMS];
    wanted_residues(ctx, k, want);
    for (; p; p = p->variant) {
        base_error err = {0};
        if (p->has_guard && !sym_guard_check(&p->guard, &a, &err)) {
            ctx->stats.guard_failures += count;
            continue;
        }
        if (memcmp(p->residue, want, k->param_count) == 0 && p->texel_storages == texels &&
            memcmp(p->windows, windows, ENG_MAX_BUFFERS * sizeof *windows) == 0)
            return p->same ? p->same : p;
    }
    return NULL;
}

/* Lowers k as p (asking for the widest alignment of each lifted offset), keeping only the
 * alignment its vector accesses rely on: the kernel is lowered again when some went unused. */
static kiln_status lower_variant(kiln_context *ctx, const eng_kernel *k, eng_program *p) {
    uint8_t used[ENG_MAX_PARAMS];
    kiln_status st = eng_kernel_lower(ctx, k, p, &p->ir, used);
    bool dropped = false;
    for (uint32_t i = 0; st == KILN_OK && i < k->param_count; i++) {
        uint8_t keep = used[i] >= 2 ? used[i] : 0;
        dropped = dropped || keep != p->align[i];
        p->align[i] = keep;
    }
    if (st == KILN_OK && dropped) {
        ir_kernel_finish(&p->ir);
        st = eng_kernel_lower(ctx, k, p, &p->ir, NULL);
    }
    /* A loop's texel fetches (on lavapipe gathers, each a call) go first, its arithmetic
     * after them without calls between: conv2's gradients 5% faster there (lavapipe.md) */
    p->texel_bindings = st == KILN_OK ? texel_reads(p) : 0;
    if (st == KILN_OK)
        st = ir_hoist_loads(&p->ir, p->texel_bindings);
    return st == KILN_OK ? ir_verify(&p->ir, &ctx->err) : st;
}

/* On a CPU (ctx->min_workgroups), a kernel of few items (its largest count) runs workgroups
 * narrowed down to 32 invocations while it has fewer than min_workgroups of them: lavapipe
 * runs each workgroup on one thread, so one workgroup of 256 kept a core idle (conv1's weight
 * gradient per image in tiles of 4 x 9: 256 items, 1.7 -> 1.3 ms in 8 workgroups of 32).
 * Whole teams still (32 is a multiple of every team). A CPU's rule: measured on lavapipe only
 * (on an H100 the weight gradient that slowed down with the CPU's two rules did so from the
 * short-row tiles, lower.c, and both are kept off a GPU). */
static void narrow_workgroups(const kiln_context *ctx, const eng_kernel *k, eng_program *p) {
    if (!ctx->min_workgroups || p->group_lanes || !p->per_item)
        return;
    int64_t items = sym_vmax(k->numel) / (int64_t)p->per_item;
    while (p->workgroup_size > 32 && p->workgroup_size % 2 == 0 &&
           items < (int64_t)p->workgroup_size * ctx->min_workgroups)
        p->workgroup_size /= 2;
}

/* A kernel found on disk skips lowering and emission (its pipeline is made from the stored
 * words); otherwise it is lowered, verified and (on a device) emitted and stored. A variant
 * whose code is compiled already becomes its alias (p->same). */
static kiln_status compile_variant(kiln_context *ctx, const eng_kernel *k, eng_program *p) {
    p->group_lanes = eng_kernel_group_lanes(ctx, k);
    if (p->group_lanes)
        p->workgroup_size = p->group_lanes;
    eng_kernel_tile(ctx, k, p);
    narrow_workgroups(ctx, k, p);
    choose_variant(ctx, k, p);
    eng_kernel_share(ctx, p);
    uint8_t asked[ENG_MAX_PARAMS] = {0};
    for (uint32_t i = 0; i < k->param_count; i++) {
        if (k->offset_params & (1u << i))
            asked[i] = p->align[i] = (uint8_t)vector_modulus(ctx);
    }
    uint32_t *words = NULL;
    size_t count = 0;
    kiln_status st =
        ctx->interpreter ? KILN_ERROR_NOT_FOUND : eng_cache_load(ctx, k, p, &words, &count);
    if (st == KILN_OK) {
        p->same = twin_of(ctx, k, p);
        int64_t start = base_now_ns();
        if (!p->same)
            st = pipeline_from_words(ctx, p, words, count);
        eng_trace_span(ctx, ENG_TRACE_HOST, "pipeline", p->name, start, base_now_ns(),
                       "\"from\": \"disk cache\"");
        base_free(&ctx->alloc, words, count * sizeof *words);
        return st;
    }
    if (st != KILN_ERROR_NOT_FOUND)
        return st;
    int64_t start = base_now_ns();
    st = lower_variant(ctx, k, p);
    count_codegen(ctx, start);
    eng_trace_span(ctx, ENG_TRACE_HOST, "codegen", p->name, start, base_now_ns(), NULL);
    if (st != KILN_OK)
        return st;
    p->same = twin_of(ctx, k, p);
    if (p->same) { /* no code of its own; on disk, the way to its twin's */
        ir_kernel_finish(&p->ir);
        if (!ctx->interpreter)
            eng_cache_store(ctx, k, p, asked, NULL, 0);
        return KILN_OK;
    }
    ctx->stats.kernels_compiled++; /* code generated in this process */
    ctx->stats.disk_misses += ctx->pcache != NULL;
    ctx->stats.kernels_tiled += p->per_item > 1;
    bool vector = false, octets = false;
    for (uint32_t i = 0; i < p->ir.buffer_count; i++) {
        vector = vector || p->ir.buffers[i].vector;
        octets = octets || p->ir.buffers[i].octets;
    }
    ctx->stats.kernels_vector += vector;
    ctx->stats.kernels_octets += octets;
    bool shared = false;
    for (uint32_t i = 0; i < p->ir.insts.len && !shared; i++)
        shared = p->ir.insts.data[i].op == IR_SHARE;
    ctx->stats.kernels_shared += shared;
    p->index_type = p->ir.index_type;
    p->param_count = p->ir.param_count;
    p->binding_count = p->ir.buffer_count;
    if (ctx->interpreter)
        return KILN_OK;
    start = base_now_ns(); /* SPIR-V emission, the driver's compile, the disk cache's copy */
    st = create_pipeline(ctx, k, p, asked);
    eng_trace_span(ctx, ENG_TRACE_HOST, "pipeline", p->name, start, base_now_ns(), NULL);
    return st;
}

static void gather_kast(const kast *a, const sym_node **out, uint32_t cap, uint32_t *n) {
    for (; a; a = a->nsrc ? a->src[0] : NULL) {
        const sym_node *e[7] = {a->index, a->valid,  a->var,   a->bound,
                                a->guard, a->key[0], a->key[1]};
        for (int i = 0; i < 7; i++) {
            if (e[i] && *n < cap)
                out[(*n)++] = e[i];
        }
        for (uint32_t i = 1; i < a->nsrc; i++)
            gather_kast(a->src[i], out, cap, n);
    }
}

enum { KEEP_MAX = 256 };

/* The expressions k was built from (unbound): the first KEEP_MAX. */
static uint32_t gather_expressions(const eng_kernel *k, const sym_node *found[KEEP_MAX]) {
    uint32_t n = 0;
    const sym_node *fixed[] = {k->numel, k->out_index, k->gidx, k->reduce_count, k->ridx};
    for (size_t i = 0; i < BASE_COUNTOF(fixed); i++) {
        if (fixed[i])
            found[n++] = fixed[i];
    }
    for (uint32_t d = 0; d < k->ndim; d++)
        found[n++] = k->dims[d];
    for (uint32_t r = 0; r < k->reduction_count; r++) {
        if (k->reductions[r].at && n < KEEP_MAX)
            found[n++] = k->reductions[r].at;
    }
    gather_kast(k->value, found, KEEP_MAX, &n);
    for (uint32_t r = 0; r < k->reduction_count; r++)
        gather_kast(k->reductions[r].value, found, KEEP_MAX, &n);
    return n;
}

/* A Variable of the program that was never bound has no value to push: the caller's mistake,
 * named, found before lowering (which could only call it a bug). Each expression is evaluated
 * with the parameters' values and the index Variables at 0; only a Variable without a value
 * fails that way. */
/* The Variables of k's gathers (bound to the index read when the kernel runs), up to cap. */
static void gather_vars(const kast *a, const sym_node **vars, size_t cap, size_t *count) {
    for (; a; a = a->nsrc ? a->src[0] : NULL) {
        if (a->kind == KAST_GATHER && *count < cap)
            vars[(*count)++] = a->var;
        for (uint32_t i = 1; i < a->nsrc; i++)
            gather_vars(a->src[i], vars, cap, count);
    }
}

static kiln_status check_bound(kiln_context *ctx, const eng_kernel *k) {
    enum { CAP = ENG_MAX_PARAMS + 2 + ENG_MAX_GATHERS };
    const sym_node *vars[CAP], *found[KEEP_MAX];
    int64_t values[CAP] = {0};
    size_t count = 0;
    for (uint32_t i = 0; i < k->param_count; i++) {
        vars[count] = k->params[i];
        values[count++] = k->param_values[i];
    }
    if (k->gidx)
        vars[count++] = k->gidx;
    if (k->ridx)
        vars[count++] = k->ridx;
    gather_vars(k->value, vars, CAP, &count);
    for (uint32_t r = 0; r < k->reduction_count; r++)
        gather_vars(k->reductions[r].value, vars, CAP, &count);
    sym_assignment a = {.vars = vars, .values = values, .count = count};
    uint32_t n = gather_expressions(k, found);
    for (uint32_t i = 0; i < n; i++) {
        int64_t v;
        base_error err = {0};
        if (sym_eval(found[i], &a, &v, &err) == KILN_ERROR_NOT_FOUND)
            return base_error_set(&ctx->err, KILN_ERROR_UNBOUND_VARIABLE,
                                  "%s: it sizes or indexes the computation, and was never bound "
                                  "(size tensors with the expression kiln_bind returns)",
                                  base_error_message(&err));
    }
    return KILN_OK;
}

/* The expressions k was built from (unbound), kept with p so that a collection of the
 * symbolic context leaves them: built again, an expression finds the same nodes and keeps its
 * canonical form (term order follows creation), so its kernel's hash stays the same. At most
 * a fixed number per program; if they do not fit, later builds may compile again, never run a
 * wrong kernel. */
static void keep_expressions(kiln_context *ctx, const eng_kernel *k, eng_program *p) {
    const sym_node *found[KEEP_MAX];
    uint32_t n = gather_expressions(k, found);
    p->exprs = base_malloc(&ctx->alloc, n * sizeof *p->exprs);
    if (p->exprs) {
        memcpy(p->exprs, found, n * sizeof *p->exprs);
        p->expr_count = n;
    }
}

/* Names p after its kernel (eng_kernel_name); where another kernel of the context has that
 * name, a short hash follows it ("E_add_64_3f2a"): a name tells kernels apart. Variants of one
 * kernel share its name. */
static void name_program(kiln_context *ctx, const eng_kernel *k, eng_program *p) {
    eng_kernel_name(k, p->name, sizeof p->name - 6);
    for (const eng_program *q = ctx->program_list; q; q = q->next) {
        if (q->hash == k->hash) { /* a variant: the name the kernel has */
            memcpy(p->name, q->name, sizeof p->name);
            return;
        }
    }
    for (const eng_program *q = ctx->program_list; q; q = q->next) {
        if (strcmp(q->name, p->name) == 0) {
            size_t len = strlen(p->name);
            snprintf(p->name + len, sizeof p->name - len, "_%04x", (unsigned)(k->hash & 0xffff));
            return;
        }
    }
}

bool eng_program_ready(kiln_context *ctx, const eng_kernel *k) {
    uint32_t windows[ENG_MAX_BUFFERS], log2;
    base_error kept = ctx->err;
    if (storage_windows(ctx, k, windows, &log2) != KILN_OK) {
        ctx->err = kept; /* eng_program_get will say why */
        return false;
    }
    return find_variant(ctx, k, windows, false) != NULL;
}

kiln_status eng_program_get(kiln_context *ctx, const eng_kernel *k, eng_program **out) {
    uint32_t windows[ENG_MAX_BUFFERS], log2;
    kiln_status wst = storage_windows(ctx, k, windows, &log2);
    if (wst != KILN_OK)
        return wst;
    eng_program *p = find_variant(ctx, k, windows, true);
    if (p) {
        ctx->stats.kernels_cached++;
        *out = p;
        return KILN_OK;
    }
    refusal key = {.hash = k->hash, .log2 = log2};
    memcpy(key.windows, windows, sizeof key.windows);
    const refusal *known = base_map_find(&ctx->refused, refusal_hash(&key), &key, refusal_eq, NULL);
    if (known)
        return base_error_set(&ctx->err, KILN_ERROR_UNSUPPORTED, "%s", known->message);
    kiln_status bound = check_bound(ctx, k);
    if (bound != KILN_OK)
        return bound;
    p = base_calloc(&ctx->alloc, 1, sizeof *p);
    if (!p)
        return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a kernel");
    p->hash = k->hash;
    name_program(ctx, k, p);
    p->workgroup_size = workgroup_size(ctx);
    memcpy(p->windows, windows, sizeof p->windows);
    p->window_log2 = log2;
    p->texel_storages = texel_storages(ctx, k);
    wanted_residues(ctx, k, p->residue);
    kiln_status st = compile_variant(ctx, k, p);
    eng_program *head = base_map_find(&ctx->programs, k->hash, &k->hash, program_eq, NULL);
    if (st == KILN_OK && !head && base_map_insert(&ctx->programs, p->hash, p) != KILN_OK)
        st = base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for the cache");
    if (st == KILN_ERROR_UNSUPPORTED && p->ir.index_type != IR_I64) {
        refusal *r = base_malloc(&ctx->alloc, sizeof *r);
        if (r) {
            *r = key;
            snprintf(r->message, sizeof r->message, "%s", base_error_message(&ctx->err));
            if (base_map_insert(&ctx->refused, refusal_hash(r), r) != KILN_OK)
                base_free(&ctx->alloc, r, sizeof *r); /* not remembered: lowered again */
        }
    }
    if (st != KILN_OK) {
        vkd_pipeline_destroy(p->pipeline);
        ir_kernel_finish(&p->ir);
        base_free(&ctx->alloc, p, sizeof *p);
        return st;
    }
    if (head) { /* another variant of the same kernel */
        p->variant = head->variant;
        head->variant = p;
    }
    if (p->same)
        ctx->stats.kernels_cached++;
    else
        debug_dump(k, p);
    keep_expressions(ctx, k, p);
    p->next = ctx->program_list;
    ctx->program_list = p;
    *out = p->same ? p->same : p;
    return KILN_OK;
}

/* ---- running kernels ----------------------------------------------------------------------------
 */

typedef struct dispatched {
    const eng_program *program;
    uint64_t hash;
    uint64_t size;
} dispatched;

struct eng_batch {
    vkd_batch *batch;                     /* NULL with the interpreter */
    BASE_VEC(dispatched) log;             /* what ran, for KILN_DEBUG=2 */
    BASE_VEC(vkd_buffer *) param_buffers; /* freed once the batch has run */
};

kiln_status eng_batch_begin(kiln_context *ctx, eng_batch **out) {
    eng_batch *b = base_calloc(&ctx->alloc, 1, sizeof *b);
    if (!b)
        return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a batch");
    if (!ctx->interpreter) {
        /* One command buffer (with its pools and fence) serves every realize: reset, not
         * recreated. */
        base_error err = {0};
        kiln_status st = ctx->batch ? vkd_batch_reset(ctx->batch, &err)
                                    : vkd_batch_create(ctx->dev, &ctx->batch, &err);
        if (st != KILN_OK) {
            base_free(&ctx->alloc, b, sizeof *b);
            return base_error_set(&ctx->err, st, "%s", base_error_message(&err));
        }
        b->batch = ctx->batch;
        /* A timestamp costs a wait for idle on lavapipe: none unless timing was asked for;
         * then the whole batch, and each kernel when KILN_DEBUG=2 prints one line each. */
        vkd_batch_timing(b->batch, !ctx->timing                              ? VKD_TIME_NONE
                                   : base_log_verbosity() >= 2 || ctx->trace ? VKD_TIME_EACH
                                                                             : VKD_TIME_BATCH);
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

/* The storage program binding i of k holds: its buffer's, or past k's buffers the output's
 * (a read-only alias of an in-place write's target, lower.c eng_kernel_lower). */
static const eng_storage *read_storage(const eng_kernel *k, uint32_t i) {
    return k->buffers[i < k->buffer_count ? i : 0];
}

/* p's bindings of storages: all but the parameters' buffer, which comes last. */
static uint32_t storage_bindings(const eng_program *p) {
    return p->binding_count - (p->params_in_buffer && p->param_count > 0 ? 1u : 0u);
}

static kiln_status run_interpreter(kiln_context *ctx, const eng_program *p, const eng_kernel *k,
                                   uint64_t n) {
    interp_buffer bufs[ENG_MAX_BUFFERS];
    for (uint32_t i = 0; i < p->ir.buffer_count && i < ENG_MAX_BUFFERS; i++)
        bufs[i] = (interp_buffer){read_storage(k, i)->host, host_elements(read_storage(k, i))};
    int64_t values[ENG_MAX_PARAMS];
    pushed_values(p, k, values);
    return interp_run(&p->ir, bufs, values, n, &ctx->err);
}

/* lavapipe leaves loops silently once an invocation has run 65535 loop passes in all (lower.c,
 * the loop budget). Lowering keeps every kernel of constant sizes within ENG_LOOP_PASSES, and
 * one of symbolic size for its largest values where it can; a reduction whose bound count
 * needs more passes is refused rather than cut short. */
static kiln_status check_loop_limit(kiln_context *ctx, const eng_program *p, const eng_kernel *k) {
    const vkd_device_info *info = vkd_device_info_of(ctx->dev);
    if (k->reduction_count == 0 || !info->has_driver ||
        info->driver.driverID != VK_DRIVER_ID_MESA_LLVMPIPE)
        return KILN_OK;
    sym_assignment a = params_of(k);
    int64_t count;
    base_error err = {0};
    if (sym_eval(k->reduce_count, &a, &count, &err) != KILN_OK)
        return KILN_OK;
    uint64_t passes = eng_kernel_loop_passes(ctx, k, p, count);
    if (passes <= ENG_LOOP_PASSES)
        return KILN_OK;
    return base_error_set(&ctx->err, KILN_ERROR_UNSUPPORTED,
                          "%s cannot reduce %lld elements in one kernel: its loops would run "
                          "%llu passes per invocation, and it leaves loops after 65535",
                          ctx->device_name, (long long)count, (unsigned long long)passes);
}

static kiln_status run_device(kiln_context *ctx, eng_batch *b, const eng_program *p,
                              const eng_kernel *k, uint64_t n) {
    kiln_status lst = check_loop_limit(ctx, p, k);
    if (lst != KILN_OK)
        return lst;
    /* One descriptor per buffer, or one per window of a storage beyond the range; a binding
     * after k's buffers is the output's storage again (read_storage). */
    uint32_t descriptors = 1;
    for (uint32_t i = 0; i < storage_bindings(p); i++)
        descriptors += bound_windows(p, i) ? bound_windows(p, i) : 1;
    vkd_binding small[ENG_MAX_BUFFERS + 1], *bindings = small;
    if (descriptors > BASE_COUNTOF(small)) {
        bindings = base_malloc(&ctx->alloc, descriptors * sizeof *bindings);
        if (!bindings)
            return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY,
                                  "no memory for %u descriptors", descriptors);
    }
    uint32_t binding_count = 0;
    for (uint32_t i = 0; i < storage_bindings(p); i++)
        binding_count += window_bindings(read_storage(k, i)->buffer, bound_windows(p, i),
                                         p->window_log2, bindings + binding_count);
    /* Parameters in the index type's width. */
    union {
        int32_t i32[ENG_MAX_PARAMS];
        int64_t i64[ENG_MAX_PARAMS];
    } push;
    bool wide = p->index_type == IR_I64;
    int64_t values[ENG_MAX_PARAMS];
    pushed_values(p, k, values);
    for (uint32_t i = 0; i < k->param_count; i++) {
        if (wide)
            push.i64[i] = values[i];
        else
            push.i32[i] = (int32_t)values[i];
    }
    uint32_t push_size = k->param_count * (wide ? 8u : 4u);
    base_error err = {0};
    kiln_status st = KILN_OK;
    if (p->params_in_buffer && push_size > 0) {
        /* Too many values for push constants: they travel in a small buffer. */
        vkd_buffer *pb = NULL;
        st = vkd_buffer_create(ctx->dev, push_size, &pb, &err);
        if (st == KILN_OK)
            st = vkd_buffer_upload(pb, 0, &push, push_size, &err);
        if (st == KILN_OK && BASE_VEC_PUSH(&ctx->alloc, &b->param_buffers, pb) != KILN_OK)
            st = base_error_set(&err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for parameters");
        if (st != KILN_OK)
            vkd_buffer_destroy(pb);
        else
            bindings[binding_count++] = (vkd_binding){.buffer = pb};
        push_size = 0;
    }
    /* Workgroups on a 2-D grid when one row cannot hold them (the kernel linearises x, y):
     * as few rows as needed, the groups spread evenly over them so that at most rows - 1
     * workgroups idle (a full row of max_x would idle up to a whole row). */
    uint64_t groups = p->group_lanes ? n : (n + p->workgroup_size - 1) / p->workgroup_size;
    uint64_t max_x = vkd_device_caps(ctx->dev)->max_workgroup_count[0];
    uint64_t rows = (groups + max_x - 1) / max_x;
    /* z stays 1: kernels read NumWorkgroups.z as a run-time 1 (emit.c, opaque_multipliers). */
    uint32_t grid[3] = {(uint32_t)((groups + rows - 1) / rows), (uint32_t)rows, 1};
    if (st == KILN_OK)
        st = vkd_batch_dispatch(b->batch, p->pipeline, bindings, binding_count,
                                push_size ? &push : NULL, push_size, grid, &err);
    if (bindings != small)
        base_free(&ctx->alloc, bindings, descriptors * sizeof *bindings);
    if (st != KILN_OK)
        return base_error_set(&ctx->err, st, "%s", base_error_message(&err));
    return KILN_OK;
}

/* max and min have no identity: over 0 elements (possible only for symbolic sizes, checked
 * with the bound values here) they are an error, as in PyTorch. */
static kiln_status check_empty_reductions(kiln_context *ctx, const eng_kernel *k) {
    if (k->reduction_count == 0)
        return KILN_OK;
    sym_assignment a = params_of(k);
    int64_t count;
    base_error err = {0};
    kiln_status st = sym_eval(k->reduce_count, &a, &count, &err);
    if (st != KILN_OK)
        return base_error_set(&ctx->err, st, "reduction size: %s", base_error_message(&err));
    for (uint32_t i = 0; count == 0 && i < k->reduction_count; i++) {
        ir_op op = k->reductions[i].op;
        if (op == IR_MAX || op == IR_MIN)
            return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                                  "%s over 0 elements has no identity (the reduced dims are "
                                  "empty for the bound values)",
                                  k->reductions[i].arg ? "argmax"
                                  : op == IR_MAX       ? "max"
                                                       : "min");
    }
    return KILN_OK;
}

kiln_status eng_batch_run(kiln_context *ctx, eng_batch *b, const eng_program *p,
                          const eng_kernel *k) {
    uint64_t n = 0; /* set by global_size (gcc -O3 cannot tell) */
    kiln_status st = check_empty_reductions(ctx, k);
    if (st == KILN_OK)
        st = global_size(ctx, k, &n);
    if (st != KILN_OK || n == 0) /* an empty result needs no dispatch */
        return st;
    n /= p->per_item; /* the items (tiles and rows divide constant sizes exactly) */
    ctx->stats.dispatches++;
    ctx->stats.items += n;
    if (base_log_verbosity() >= 2 || ctx->trace) {
        dispatched d = {p, k->hash, n};
        (void)BASE_VEC_PUSH(&ctx->alloc, &b->log, d); /* debug output only: a miss is harmless */
    }
    if (!ctx->interpreter)
        return run_device(ctx, b, p, k, n);
    int64_t start = ctx->trace ? base_now_ns() : 0;
    st = run_interpreter(ctx, p, k, n);
    if (ctx->trace) { /* the interpreter's kernels run on the host */
        char args[96];
        snprintf(args, sizeof args, "\"invocations\": %llu, \"hash\": \"%016llx\"",
                 (unsigned long long)n, (unsigned long long)k->hash);
        eng_trace_span(ctx, ENG_TRACE_HOST, "kernel", p->name, start, base_now_ns(), args);
    }
    return st;
}

/* KILN_TRACE: the batch's submit and wait on the host, and each kernel on the device. Device
 * clocks are not the host's: the kernels keep the device's offsets from the batch's first, and
 * the batch starts when vkQueueSubmit was called (the device cannot start earlier; lavapipe
 * starts before the call returns), moved earlier where it would end after the wait did. */
static void trace_batch(kiln_context *ctx, const eng_batch *b, int64_t start, int64_t end) {
    int64_t submitted = vkd_batch_submit_host_time(b->batch);
    if (!submitted)
        return; /* nothing was submitted */
    eng_trace_span(ctx, ENG_TRACE_HOST, "submit", "submit", start, submitted, NULL);
    eng_trace_span(ctx, ENG_TRACE_HOST, "wait", "wait", submitted, end, NULL);
    uint64_t at, ns, last = 0;
    for (uint32_t i = 0; i < b->log.len; i++) {
        if (vkd_batch_dispatch_start(b->batch, i, &at) && vkd_batch_dispatch_time(b->batch, i, &ns))
            last = at + ns > last ? at + ns : last;
    }
    int64_t anchor = start + (int64_t)last > end ? end - (int64_t)last : start;
    for (uint32_t i = 0; i < b->log.len; i++) {
        if (!vkd_batch_dispatch_start(b->batch, i, &at) ||
            !vkd_batch_dispatch_time(b->batch, i, &ns))
            continue;
        const dispatched *d = &b->log.data[i];
        char args[96];
        snprintf(args, sizeof args, "\"invocations\": %llu, \"hash\": \"%016llx\"",
                 (unsigned long long)d->size, (unsigned long long)d->hash);
        eng_trace_span(ctx, ENG_TRACE_DEVICE, "kernel", d->program->name, anchor + (int64_t)at,
                       anchor + (int64_t)(at + ns), args);
    }
}

kiln_status eng_batch_finish(kiln_context *ctx, eng_batch *b, bool *ran) {
    kiln_status st = KILN_OK;
    *ran = true; /* the interpreter ran each kernel in eng_batch_run */
    if (b->batch) {
        base_error err = {0};
        uint64_t submits = vkd_device_stats(ctx->dev).submits;
        int64_t start = base_now_ns();
        st = vkd_batch_submit(b->batch, &err);
        if (ctx->trace)
            trace_batch(ctx, b, start, base_now_ns());
        /* A failure after vkQueueSubmit (waiting for the fence, reading the timestamps) comes
         * after the queue took the kernels: they ran (or still run), and must not run again. */
        *ran = st == KILN_OK || vkd_device_stats(ctx->dev).submits > submits;
        if (st != KILN_OK) {
            base_error_set(&ctx->err, st, "%s", base_error_message(&err));
        } else {
            uint64_t ns;
            if (vkd_batch_total_time(b->batch, &ns))
                ctx->stats.device_time_ns += ns;
        }
    }
    for (uint32_t i = 0; base_log_verbosity() >= 2 && i < b->log.len; i++) { /* one line each */
        uint64_t ns = 0;
        bool timed = b->batch && vkd_batch_dispatch_time(b->batch, i, &ns);
        const dispatched *d = &b->log.data[i];
        base_log(BASE_LOG_DEBUG, "engine", "kernel %s (%016llx): %llu invocations, %s%.3f ms",
                 d->program->name, (unsigned long long)d->hash, (unsigned long long)d->size,
                 timed ? "" : "untimed ", (double)ns / 1e6);
    }
    for (size_t i = 0; i < b->param_buffers.len; i++)
        vkd_buffer_destroy(b->param_buffers.data[i]);
    BASE_VEC_FREE(&ctx->alloc, &b->param_buffers);
    BASE_VEC_FREE(&ctx->alloc, &b->log);
    base_free(&ctx->alloc, b, sizeof *b);
    return st;
}
