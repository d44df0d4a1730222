/* kilninfo --selftest: builds a handful of kernels with spirv/, validates them (when SPIRV-Tools
 * was found), runs them on the chosen device through vk/, checks every result on the host, and
 * measures dispatch latency, copy bandwidth and f32 FMA throughput.
 *
 * Output: one line per kernel, "  <name> pass|FAIL|skip  <detail>", then the measurements and a
 * summary line "selftest: P passed, F failed, S skipped"; with --json the same as one object
 * (tools/kilninfo/README.md). */
#define _POSIX_C_SOURCE 200809L
#include "selftest.h"

#include "report.h"
#include "spv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_RESULTS = 16 };

/* One line of the report: a kernel's verdict or a measurement. */
typedef struct result {
    char name[24];
    const char *status; /* "pass", "FAIL", "skip", or "measured" */
    char detail[200];
} result;

typedef struct selftest {
    vkd_device *dev;
    const vkd_caps *caps;
    base_error err;
    int passed, failed, skipped;
    result results[MAX_RESULTS];
    uint32_t result_count;
} selftest;

static void record(selftest *t, const char *name, const char *status, const char *detail) {
    if (t->result_count == MAX_RESULTS)
        return;
    result *r = &t->results[t->result_count++];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->status = status;
    snprintf(r->detail, sizeof r->detail, "%s", detail);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the kernels ------------------------------------------------------------------------- */

static spv_id gid_x(spv_builder *b, SpvBuiltIn builtin) {
    return spv_composite_extract(b, spv_load(b, spv_builtin(b, builtin)), 0);
}

static spv_id elem(spv_builder *b, spv_id buffer, spv_id index) {
    return spv_buffer_element(b, buffer, index);
}

static spv_id begin_main(spv_builder *b, uint32_t wg) {
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size(b, fn, (const uint32_t[]){wg, 1, 1});
    return fn;
}

static void end_main(spv_builder *b) {
    spv_return(b);
    spv_function_end(b);
}

/* c[i] = a[i] + b[i] for i < n (push constant). */
static void k_vadd(spv_builder *b) {
    spv_id f32 = spv_type_float(b, 32), u32 = spv_type_int(b, 32, false);
    spv_id a = spv_storage_buffer(b, f32, 0, 0, SPV_ACCESS_READ);
    spv_id bb = spv_storage_buffer(b, f32, 0, 1, SPV_ACCESS_READ);
    spv_id c = spv_storage_buffer(b, f32, 0, 2, SPV_ACCESS_WRITE);
    spv_id pc = spv_push_constants(b, 1, &u32, NULL);
    begin_main(b, 64);
    spv_id i = gid_x(b, SpvBuiltInGlobalInvocationId);
    spv_id then = spv_label(b), merge = spv_label(b);
    spv_id in_range = spv_binop(b, SpvOpULessThan, i, spv_push_constant_load(b, pc, 0));
    spv_selection_merge(b, merge);
    spv_branch_cond(b, in_range, then, merge);
    spv_block(b, then);
    spv_id s = spv_binop(b, SpvOpFAdd, spv_load(b, elem(b, a, i)), spv_load(b, elem(b, bb, i)));
    spv_store(b, elem(b, c, i), s);
    spv_branch(b, merge);
    spv_block(b, merge);
    end_main(b);
}

/* out[w] = sum of the 64 values of workgroup w (shared memory, barriers, a loop with OpPhi). */
static void k_reduce(spv_builder *b) {
    spv_id f32 = spv_type_float(b, 32), u32 = spv_type_int(b, 32, false);
    spv_id in = spv_storage_buffer(b, f32, 0, 0, SPV_ACCESS_READ);
    spv_id out = spv_storage_buffer(b, f32, 0, 1, SPV_ACCESS_WRITE);
    spv_id sh = spv_variable(b, SpvStorageClassWorkgroup, spv_type_array(b, f32, 64, 0));
    begin_main(b, 64);
    spv_id gid = gid_x(b, SpvBuiltInGlobalInvocationId);
    spv_id lid = gid_x(b, SpvBuiltInLocalInvocationId);
    spv_store(b, spv_access_chain(b, sh, 1, &lid), spv_load(b, elem(b, in, gid)));
    spv_workgroup_barrier(b);
    spv_id pre = spv_current_label(b);
    spv_id head = spv_label(b), body = spv_label(b), add = spv_label(b), join = spv_label(b);
    spv_id cont = spv_label(b), done = spv_label(b);
    spv_branch(b, head);
    spv_block(b, head);
    spv_id stride = spv_phi(b, u32, 2);
    spv_id more = spv_binop(b, SpvOpUGreaterThan, stride, spv_const_u32(b, 0));
    spv_loop_merge(b, done, cont);
    spv_branch_cond(b, more, body, done);
    spv_block(b, body);
    spv_id active = spv_binop(b, SpvOpULessThan, lid, stride);
    spv_selection_merge(b, join);
    spv_branch_cond(b, active, add, join);
    spv_block(b, add);
    spv_id other = spv_binop(b, SpvOpIAdd, lid, stride);
    spv_id mine = spv_access_chain(b, sh, 1, &lid);
    spv_store(b, mine,
              spv_binop(b, SpvOpFAdd, spv_load(b, mine),
                        spv_load(b, spv_access_chain(b, sh, 1, &other))));
    spv_branch(b, join);
    spv_block(b, join);
    spv_workgroup_barrier(b);
    spv_branch(b, cont);
    spv_block(b, cont);
    spv_id next = spv_binop(b, SpvOpShiftRightLogical, stride, spv_const_u32(b, 1));
    spv_branch(b, head);
    spv_phi_set(b, stride, 0, spv_const_u32(b, 32), pre);
    spv_phi_set(b, stride, 1, next, cont);
    spv_block(b, done);
    spv_id write = spv_label(b), end = spv_label(b);
    spv_id first = spv_binop(b, SpvOpIEqual, lid, spv_const_u32(b, 0));
    spv_selection_merge(b, end);
    spv_branch_cond(b, first, write, end);
    spv_block(b, write);
    spv_id zero = spv_const_u32(b, 0);
    spv_store(b, elem(b, out, gid_x(b, SpvBuiltInWorkgroupId)),
              spv_load(b, spv_access_chain(b, sh, 1, &zero)));
    spv_branch(b, end);
    spv_block(b, end);
    end_main(b);
}

/* out[i] = the sum of in over i's subgroup. */
static void k_subgroup(spv_builder *b) {
    spv_id u32 = spv_type_int(b, 32, false);
    spv_id in = spv_storage_buffer(b, u32, 0, 0, SPV_ACCESS_READ);
    spv_id out = spv_storage_buffer(b, u32, 0, 1, SPV_ACCESS_WRITE);
    begin_main(b, 64);
    spv_id i = gid_x(b, SpvBuiltInGlobalInvocationId);
    spv_store(b, elem(b, out, i),
              spv_subgroup_op(b, SpvOpGroupNonUniformIAdd, SpvGroupOperationReduce,
                              spv_load(b, elem(b, in, i))));
    end_main(b);
}

/* out[i] = in[i], one vec4 per invocation. */
static void k_copy(spv_builder *b) {
    spv_id v4 = spv_type_vector(b, spv_type_float(b, 32), 4);
    spv_id in = spv_storage_buffer(b, v4, 0, 0, SPV_ACCESS_READ);
    spv_id out = spv_storage_buffer(b, v4, 0, 1, SPV_ACCESS_WRITE);
    begin_main(b, 64);
    spv_id i = gid_x(b, SpvBuiltInGlobalInvocationId);
    spv_store(b, elem(b, out, i), spv_load(b, elem(b, in, i)));
    end_main(b);
}

enum { FMA_ITERS = 1024 };

/* out[i] = the sum of 4 chains of FMA_ITERS fmas x = x * 0.999 + 0.001 from x0 = in[i] + j. */
static void k_fma(spv_builder *b) {
    spv_id f32 = spv_type_float(b, 32), v4 = spv_type_vector(b, f32, 4);
    spv_id u32 = spv_type_int(b, 32, false);
    spv_id in = spv_storage_buffer(b, f32, 0, 0, SPV_ACCESS_READ);
    spv_id out = spv_storage_buffer(b, f32, 0, 1, SPV_ACCESS_WRITE);
    begin_main(b, 64);
    spv_id i = gid_x(b, SpvBuiltInGlobalInvocationId);
    spv_id x0 = spv_load(b, elem(b, in, i));
    spv_id parts[4] = {x0, spv_binop(b, SpvOpFAdd, x0, spv_const_f32(b, 1)),
                       spv_binop(b, SpvOpFAdd, x0, spv_const_f32(b, 2)),
                       spv_binop(b, SpvOpFAdd, x0, spv_const_f32(b, 3))};
    spv_id start = spv_composite_construct(b, v4, 4, parts);
    spv_id mul_c[4], add_c[4];
    for (int k = 0; k < 4; k++) {
        mul_c[k] = spv_const_f32(b, 0.999f);
        add_c[k] = spv_const_f32(b, 0.001f);
    }
    spv_id mul = spv_const_composite(b, v4, 4, mul_c), add = spv_const_composite(b, v4, 4, add_c);
    spv_id pre = spv_current_label(b);
    spv_id head = spv_label(b), body = spv_label(b), done = spv_label(b);
    spv_branch(b, head);
    spv_block(b, head);
    spv_id k = spv_phi(b, u32, 2), x = spv_phi(b, v4, 2);
    spv_id more = spv_binop(b, SpvOpULessThan, k, spv_const_u32(b, FMA_ITERS));
    spv_loop_merge(b, done, body);
    spv_branch_cond(b, more, body, done);
    spv_block(b, body); /* the body is its own continue target */
    spv_id args[3] = {x, mul, add};
    spv_id xn = spv_glsl(b, GLSLstd450Fma, v4, 3, args);
    spv_id kn = spv_binop(b, SpvOpIAdd, k, spv_const_u32(b, 1));
    spv_branch(b, head);
    spv_phi_set(b, k, 0, spv_const_u32(b, 0), pre);
    spv_phi_set(b, k, 1, kn, body);
    spv_phi_set(b, x, 0, start, pre);
    spv_phi_set(b, x, 1, xn, body);
    spv_block(b, done);
    spv_id s = spv_binop(
        b, SpvOpFAdd,
        spv_binop(b, SpvOpFAdd, spv_composite_extract(b, x, 0), spv_composite_extract(b, x, 1)),
        spv_binop(b, SpvOpFAdd, spv_composite_extract(b, x, 2), spv_composite_extract(b, x, 3)));
    spv_store(b, elem(b, out, i), s);
    end_main(b);
}

/* ---- running ---------------------------------------------------------------------------- */

typedef struct pipe_spec {
    const char *name;
    void (*build)(spv_builder *b);
    uint32_t bindings, push_size;
} pipe_spec;

/* Builds, validates and creates a pipeline; on failure prints the kernel's FAIL line. */
static vkd_pipeline *make(selftest *t, const pipe_spec *p) {
    spv_builder *b = NULL;
    spv_builder_options o = {.version = t->caps->spirv_version,
                             .maintenance4 = t->caps->maintenance4};
    const uint32_t *words = NULL;
    size_t count = 0;
    vkd_pipeline *pipe = NULL;
    base_error err = {0};
    if (spv_builder_create(&o, &b, &err) == KILN_OK) {
        p->build(b);
        spv_builder_finish(b, &words, &count, &err);
    }
    if (words && spv_tools_available())
        spv_validate(words, count, t->caps->api_version, &err);
    if (words && err.status == KILN_OK) {
        spv_debug_dump(words, count, p->name);
        vkd_pipeline_desc desc = {.code = words,
                                  .word_count = count,
                                  .binding_count = p->bindings,
                                  .push_constant_size = p->push_size,
                                  .debug_name = p->name};
        vkd_pipeline_create(t->dev, &desc, &pipe, &err);
    }
    spv_builder_destroy(b);
    if (!pipe) {
        record(t, p->name, "FAIL", base_error_message(&err));
        t->failed++;
    }
    return pipe;
}

/* Uploads bufs, dispatches groups workgroups `repeat` times in one batch, downloads. Returns the
 * seconds per dispatch (device time when timed, else wall time / repeat), or -1 on failure. */
static double run(selftest *t, const vkd_pipeline *pipe, void **data, const size_t *sizes,
                  uint32_t n, const void *push, uint32_t push_size, uint32_t groups,
                  uint32_t repeat) {
    vkd_buffer *vb[4] = {0};
    vkd_binding bind[4] = {{0}};
    vkd_batch *batch = NULL;
    double seconds = -1;
    uint32_t made = 0;
    for (; made < n; made++) {
        if (vkd_buffer_create(t->dev, sizes[made], &vb[made], &t->err) != KILN_OK ||
            vkd_buffer_upload(vb[made], 0, data[made], sizes[made], &t->err) != KILN_OK) {
            made++;
            goto cleanup;
        }
        bind[made].buffer = vb[made];
    }
    if (vkd_batch_create(t->dev, &batch, &t->err) != KILN_OK)
        goto cleanup;
    const uint32_t g[3] = {groups, 1, 1};
    for (uint32_t r = 0; r < repeat; r++)
        if (vkd_batch_dispatch(batch, pipe, bind, n, push, push_size, g, &t->err) != KILN_OK)
            goto cleanup;
    double t0 = now_s();
    if (vkd_batch_submit(batch, &t->err) != KILN_OK)
        goto cleanup;
    seconds = (now_s() - t0) / repeat;
    uint64_t total = 0, ns;
    uint32_t timed = 0;
    for (uint32_t r = 0; r < repeat; r++)
        if (vkd_batch_dispatch_time(batch, r, &ns)) {
            total += ns;
            timed++;
        }
    if (timed == repeat && total > 0)
        seconds = (double)total * 1e-9 / repeat;
    for (uint32_t i = 0; i < n; i++)
        if (vkd_buffer_download(vb[i], 0, data[i], sizes[i], &t->err) != KILN_OK)
            seconds = -1;
cleanup:
    vkd_batch_destroy(batch);
    for (uint32_t i = 0; i < made; i++)
        vkd_buffer_destroy(vb[i]);
    return seconds;
}

/* run() for a measurement: without timestamps (a profile's device, or a queue that has none)
 * the wall time would include the driver's first-use work, so a first run warms up. */
static double run_measured(selftest *t, const vkd_pipeline *pipe, void **data, const size_t *sizes,
                           uint32_t n, uint32_t groups, uint32_t repeat) {
    if (!t->caps->timestamps && run(t, pipe, data, sizes, n, NULL, 0, groups, 1) < 0)
        return -1;
    return run(t, pipe, data, sizes, n, NULL, 0, groups, repeat);
}

static void verdict(selftest *t, const char *name, bool ok, const char *detail) {
    record(t, name, ok ? "pass" : "FAIL", detail);
    if (ok)
        t->passed++;
    else
        t->failed++;
}

static void test_vadd(selftest *t) {
    static const pipe_spec p = {"vadd", k_vadd, 3, 4};
    enum { N = 1000, CAP = 1024 };
    static float a[CAP], b[CAP], c[CAP];
    for (int i = 0; i < CAP; i++) {
        a[i] = (float)i;
        b[i] = 0.5f * (float)i;
        c[i] = -1;
    }
    vkd_pipeline *pipe = make(t, &p);
    if (!pipe)
        return;
    void *data[3] = {a, b, c};
    size_t sizes[3] = {sizeof a, sizeof b, sizeof c};
    uint32_t n = N;
    bool ok = run(t, pipe, data, sizes, 3, &n, 4, CAP / 64, 1) >= 0;
    for (int i = 0; ok && i < CAP; i++)
        ok = c[i] == (i < N ? a[i] + b[i] : -1.0f);
    verdict(t, p.name, ok, ok ? "" : base_error_message(&t->err));
    vkd_pipeline_destroy(pipe);
}

static void test_reduce(selftest *t) {
    static const pipe_spec p = {"reduce", k_reduce, 2, 0};
    enum { G = 32 };
    static float in[G * 64], out[G];
    for (int i = 0; i < G * 64; i++)
        in[i] = (float)(i % 17);
    vkd_pipeline *pipe = make(t, &p);
    if (!pipe)
        return;
    void *data[2] = {in, out};
    size_t sizes[2] = {sizeof in, sizeof out};
    bool ok = run(t, pipe, data, sizes, 2, NULL, 0, G, 1) >= 0;
    for (int w = 0; ok && w < G; w++) {
        float want = 0;
        for (int i = 0; i < 64; i++)
            want += in[w * 64 + i];
        ok = out[w] == want;
    }
    verdict(t, p.name, ok, ok ? "" : "wrong workgroup sums");
    vkd_pipeline_destroy(pipe);
}

static void test_subgroup(selftest *t) {
    static const pipe_spec p = {"subgroup_add", k_subgroup, 2, 0};
    VkSubgroupFeatureFlags need =
        VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    if ((t->caps->subgroup_operations & need) != need || t->caps->subgroup_size == 0) {
        record(t, p.name, "skip", "(no subgroup arithmetic in compute)");
        t->skipped++;
        return;
    }
    enum { N = 256 };
    static uint32_t in[N], out[N];
    for (uint32_t i = 0; i < N; i++)
        in[i] = 1;
    vkd_pipeline *pipe = make(t, &p);
    if (!pipe)
        return;
    void *data[2] = {in, out};
    size_t sizes[2] = {sizeof in, sizeof out};
    bool ok = run(t, pipe, data, sizes, 2, NULL, 0, N / 64, 1) >= 0;
    /* Every invocation sees its subgroup's size (all inputs are 1). */
    for (uint32_t i = 0; ok && i < N; i++)
        ok = out[i] >= t->caps->min_subgroup_size && out[i] <= t->caps->max_subgroup_size &&
             out[i] <= 64;
    char detail[64];
    snprintf(detail, sizeof detail, "subgroup size %u", ok ? out[0] : 0);
    verdict(t, p.name, ok, detail);
    vkd_pipeline_destroy(pipe);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_copy(selftest *t) {
    static const pipe_spec p = {"copy", k_copy, 2, 0};
    size_t count = (size_t)4 << 20; /* 16 MiB of floats */
    if (count * 4 > t->caps->max_storage_buffer_range)
        count = (size_t)(t->caps->max_storage_buffer_range / 4 / 256 * 256);
    float *in = malloc(count * 4), *out = calloc(count, 4);
    vkd_pipeline *pipe = in && out ? make(t, &p) : NULL;
    if (!pipe) {
        if (!in || !out)
            verdict(t, p.name, false, "out of host memory");
        free(in);
        free(out);
        return;
    }
    for (size_t i = 0; i < count; i++)
        in[i] = (float)(i % 1000003);
    void *data[2] = {in, out};
    size_t sizes[2] = {count * 4, count * 4};
    uint32_t groups = (uint32_t)(count / 4 / 64);
    double s = run_measured(t, pipe, data, sizes, 2, groups, 4);
    bool ok = s > 0 && memcmp(in, out, count * 4) == 0;
    char detail[64];
    snprintf(detail, sizeof detail, "%.2f GB/s copy bandwidth (%zu MiB read + written)",
             ok ? 2.0 * (double)count * 4 / s * 1e-9 : 0.0, count * 4 >> 20);
    verdict(t, p.name, ok, detail);
    vkd_pipeline_destroy(pipe);
    free(in);
    free(out);
}

static void test_fma(selftest *t) {
    static const pipe_spec p = {"fma", k_fma, 2, 0};
    enum { N = 64 * 256 };
    static float in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = (float)(i % 8);
    vkd_pipeline *pipe = make(t, &p);
    if (!pipe)
        return;
    void *data[2] = {in, out};
    size_t sizes[2] = {sizeof in, sizeof out};
    double s = run_measured(t, pipe, data, sizes, 2, N / 64, 3);
    bool ok = s > 0;
    for (int i = 0; ok && i < N; i++) {
        float want = 0;
        for (int j = 0; j < 4; j++) {
            float x = in[i] + (float)j;
            for (int k = 0; k < FMA_ITERS; k++)
                x = fmaf(x, 0.999f, 0.001f);
            want += x;
        }
        ok = fabsf(out[i] - want) <= 1e-3f * (1.0f + fabsf(want));
    }
    char detail[64];
    snprintf(detail, sizeof detail, "%.2f GFLOP/s f32 FMA",
             ok ? 2.0 * 4 * FMA_ITERS * N / s * 1e-9 : 0.0);
    verdict(t, p.name, ok, detail);
    vkd_pipeline_destroy(pipe);
}

/* The median wall time of one tiny dispatch, submitted and waited for alone. */
static void measure_latency(selftest *t) {
    static const pipe_spec p = {"latency", k_vadd, 3, 4};
    vkd_pipeline *pipe = make(t, &p);
    if (!pipe)
        return;
    vkd_buffer *buf = NULL;
    vkd_batch *batch = NULL;
    enum { RUNS = 31 };
    double times[RUNS];
    int done = 0;
    if (vkd_buffer_create(t->dev, 256, &buf, &t->err) == KILN_OK &&
        vkd_batch_create(t->dev, &batch, &t->err) == KILN_OK) {
        vkd_binding bind[3] = {{buf, 0, 0}, {buf, 0, 0}, {buf, 0, 0}};
        const uint32_t g[3] = {1, 1, 1};
        uint32_t n = 0; /* no element in range: the dispatch does nothing */
        for (; done < RUNS; done++) {
            double t0 = now_s();
            if (vkd_batch_dispatch(batch, pipe, bind, 3, &n, 4, g, &t->err) != KILN_OK ||
                vkd_batch_submit(batch, &t->err) != KILN_OK ||
                vkd_batch_reset(batch, &t->err) != KILN_OK)
                break;
            times[done] = now_s() - t0;
        }
    }
    if (done == RUNS) {
        qsort(times, RUNS, sizeof *times, cmp_double);
        char detail[128];
        snprintf(detail, sizeof detail, "%.1f us (median of %d dispatch+submit+wait)",
                 times[RUNS / 2] * 1e6, RUNS);
        record(t, "dispatch latency", "measured", detail);
    } else {
        record(t, "dispatch latency", "FAIL", base_error_message(&t->err));
        t->failed++;
    }
    vkd_batch_destroy(batch);
    vkd_buffer_destroy(buf);
    vkd_pipeline_destroy(pipe);
}

/* The text report: a header line, one line per result, the summary. */
static void print_text(const selftest *t, FILE *out, uint32_t index, const char *device,
                       const char *spirv, const vkd_message_counts *m, bool layer) {
    fprintf(out, "selftest: device %u: %s, SPIR-V %s, SPIRV-Tools validation %s\n", index, device,
            spirv, spv_tools_available() ? "on" : "off (built without SPIRV-Tools)");
    for (uint32_t i = 0; i < t->result_count; i++) {
        const result *r = &t->results[i];
        if (strcmp(r->status, "measured") == 0)
            fprintf(out, "  %s: %s\n", r->name, r->detail);
        else
            fprintf(out, "  %-14s %s%s%s\n", r->name, r->status, *r->detail ? "  " : "", r->detail);
    }
    if (layer && (m->errors || m->warnings))
        fprintf(out, "  validation layer: %u errors, %u warnings\n", m->errors, m->warnings);
    fprintf(out, "selftest: %d passed, %d failed, %d skipped\n", t->passed, t->failed, t->skipped);
}

int kilninfo_selftest(vkd_instance *inst, uint32_t index, const vkd_profile *profile, FILE *out,
                      bool json) {
    selftest t = {0};
    vkd_message_counts before = vkd_instance_messages(inst);
    vkd_device_options options = {.profile = profile};
    if (vkd_device_create(inst, index, &options, &t.dev, &t.err) != KILN_OK) {
        if (json) {
            report r;
            report_init(&r, out, true);
            report_u64(&r, "kilninfo_format", 1);
            report_object_begin(&r, "selftest");
            report_u64(&r, "device_index", index);
            report_str(&r, "error", base_error_message(&t.err));
            report_object_end(&r);
            report_finish(&r);
        } else {
            fprintf(out, "selftest: device %u: %s\n", index, base_error_message(&t.err));
        }
        return 1;
    }
    t.caps = vkd_device_caps(t.dev);
    const vkd_device_info *info = vkd_device_info_of(t.dev);
    char spirv[16], device[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
    snprintf(spirv, sizeof spirv, "%u.%u", t.caps->spirv_version >> 16,
             t.caps->spirv_version >> 8 & 0xff);
    snprintf(device, sizeof device, "%s", info->props.deviceName);
    test_vadd(&t);
    test_reduce(&t);
    test_subgroup(&t);
    test_copy(&t);
    test_fma(&t);
    measure_latency(&t);
    vkd_device_destroy(t.dev);
    vkd_message_counts m = vkd_instance_messages(inst);
    m.errors -= before.errors;
    m.warnings -= before.warnings;
    bool layer = vkd_instance_validation(inst);
    if (layer && (m.errors || m.warnings))
        t.failed++;
    if (!json) {
        if (profile)
            fprintf(out, "selftest: under the device profile %s (%s)\n", profile->name,
                    profile->summary);
        print_text(&t, out, index, device, spirv, &m, layer);
        return t.failed ? 1 : 0;
    }
    report r;
    report_init(&r, out, true);
    report_u64(&r, "kilninfo_format", 1);
    report_object_begin(&r, "selftest");
    report_u64(&r, "device_index", index);
    report_str(&r, "device_name", device);
    if (profile)
        report_str(&r, "profile", profile->name);
    report_str(&r, "spirv_version", spirv);
    report_bool(&r, "spirv_tools_validation", spv_tools_available());
    report_array_begin(&r, "results");
    for (uint32_t i = 0; i < t.result_count; i++) {
        report_object_begin(&r, NULL);
        report_str(&r, "name", t.results[i].name);
        report_str(&r, "status", t.results[i].status);
        report_str(&r, "detail", t.results[i].detail);
        report_object_end(&r);
    }
    report_array_end(&r);
    report_bool(&r, "validation_layer", layer);
    report_u64(&r, "validation_errors", layer ? m.errors : 0);
    report_u64(&r, "validation_warnings", layer ? m.warnings : 0);
    report_u64(&r, "passed", (uint64_t)t.passed);
    report_u64(&r, "failed", (uint64_t)t.failed);
    report_u64(&r, "skipped", (uint64_t)t.skipped);
    report_object_end(&r);
    report_finish(&r);
    return t.failed ? 1 : 0;
}
