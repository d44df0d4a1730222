/* bench_ops: Kiln's operations against hand-written references measured in the same run.
 *
 * For each case: Kiln's median wall time of realize-and-wait over several repetitions after a
 * warm-up (the warm-up's time, which includes generating the kernel and lavapipe's LLVM compile
 * at the first dispatch, is reported separately as "first"), the reference's median, the ratio
 * kiln/ref (time: above 1 Kiln is slower), and throughputs. The kernel cases then run Kiln and
 * the fastest reference variant in alternation (pair_run): the ratio is the median of the pairs'
 * ratios, with its confidence interval, and is set against the performance issue's target for
 * the row ("met", "tie" when the interval reaches the target, "MISSED"). Kiln's output is checked
 * against the reference's output, and the reference against a host computation, for every case.
 *
 * References: GLSL compute shaders in bench/shaders (compiled at run time by glslc, a
 * benchmark-only dependency) run through vk/ on the Vulkan device of the case's Kiln context
 * (kiln_open); host figures: memcpy with 2 threads, numpy through a python3 subprocess. A
 * missing tool skips its references with a message.
 *
 * Repetitions reuse Kiln's compiled kernels but need a new graph: nodes are hash-consed, so an
 * identical graph would be the already realized node. Each repetition therefore reads one fresh
 * input (uploaded outside the timing) or writes in place through kiln_copy_.
 *
 * Input data are multiples of 1/4 in [-1, 1]: every sum, product and mean (over powers of 2)
 * below is exact in f32 in any order, so results are compared exactly except softmax.
 *
 * Environment: KILN_BENCH_FILTER=substring (case ids or names; several separated by commas),
 * KILN_BENCH_QUICK=1 (skips the 2048^3 matmul, fewer repetitions), KILN_BENCH_PAIRS=n (paired
 * repetitions, default 15), KILN_BENCH_JSON=path (default bench/results.json), KILN_DEVICE (as
 * Kiln), KILN_BENCH_SPV_DIR=folder (the GLSL references already compiled there as <name>.spv, as
 * tools/gpu-check.sh bundles them, "+texels" forms included, for a machine without glslc;
 * glslc's times are then NaN; a variant whose module is not there is skipped).
 * MESA_SHADER_CACHE_DIR
 * is pointed at a fresh temporary folder unless it is set: first-use (compile) figures are then
 * those of a cold cache on every run instead of depending on what earlier runs left in the user's
 * cache (Mesa's cache stays on; it is not disabled). */
#include <kiln/kiln.h>

#include "bench_util.h"
#include "eng.h" /* the context's Vulkan device, for the references */
#include "vkd.h"

#include <kiln/kiln_vulkan.h> /* after vkd.h: volk's declarations first */

#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef KILN_BENCH_SHADER_DIR
#error "KILN_BENCH_SHADER_DIR must name the folder of the GLSL references"
#endif
#ifndef KILN_BENCH_RESULTS
#define KILN_BENCH_RESULTS "results.json"
#endif

/* ---- timing and results ------------------------------------------------------------------- */

typedef enum unit {
    UNIT_GBS,    /* work is bytes read + written: GB/s */
    UNIT_GFLOPS, /* work is floating-point operations: GFLOP/s */
    UNIT_US,     /* work is a count (dispatches, kernels): microseconds each */
} unit;

static const char *const unit_names[] = {"GB/s", "GFLOP/s", "us/each"};

enum { MAX_ROWS = 48, MAX_REPS = 15, MAX_PAIRS = 41 };

enum { MAX_SPV = 4, MAX_INPUTS = 8 };

typedef struct row {
    char id[32];
    char name[56];
    char ref[32];         /* what the reference is */
    double kiln_ms;       /* median; NAN: not measured */
    double kiln_first_ms; /* the warm-up (kernel generation + first dispatch) */
    double kiln_dev_ms;   /* Kiln's device time (timestamps) of one repetition */
    double ref_ms;
    double ref_first_ms;
    double ref_dev_ms; /* the reference's device time (timestamps) of one repetition */
    double kiln_alone_ms, ref_alone_ms; /* medians measured separately, before pairing */
    double ratio;              /* kiln/ref: the median of the pairs' ratios, or of the medians */
    double ratio_lo, ratio_hi; /* the paired ratio's confidence interval (NAN: not paired) */
    int pairs;                 /* paired repetitions (0: not paired) */
    double target;             /* the issue's largest acceptable kiln/ref (NAN: none) */
    double work;
    unit unit;
    unsigned long long dispatches; /* Kiln's dispatches per realize */
    char status[160];              /* "ok", or what went wrong */
    char variants[1200];           /* every reference variant measured: name and median */
} row;

static struct {
    row rows[MAX_ROWS];
    int row_count;
    int reps;  /* timed repetitions after the warm-up */
    int pairs; /* paired repetitions (pair_run) */
    bool quick;
    const char *filter;
    /* Kiln storage the references use: Kiln's inputs (shared_input: host data -> the buffer)
     * and a result buffer (reserve_output: host NULL) */
    uint32_t input_count;
    const float *input_host[MAX_INPUTS];
    vkd_buffer *input_buffer[MAX_INPUTS];
    /* The same storage's own buffer (Kiln's: vk/ made it with its texel view), for texel
     * bindings (texel_buffer), or NULL; never destroyed here */
    const vkd_buffer *input_texels[MAX_INPUTS];
    vkd_buffer *output;  /* reserve_output's, until a reference takes it */
    size_t output_count; /* its floats */
    /* KILN_BENCH_SPV: modules run as more reference variants, each with its workgroups */
    uint32_t spv_count;
    char spv_path[MAX_SPV][256];
    uint32_t spv_groups[MAX_SPV][3];
    char tmp[64];
    bool have_glslc;
    const char *spv_dir; /* KILN_BENCH_SPV_DIR: references compiled ahead of time */
    const char *python;  /* with numpy; NULL: none */
    vkd_instance *inst;
    vkd_device *dev;     /* the references' device: own_dev, or a case's Kiln device */
    vkd_device *own_dev; /* the benchmark's own device */
    char device_name[256];
    bool have_subgroup_arith;
    bool have_int64;       /* the references may use 64-bit integers (vector_form) */
    double matmul_1024_ms; /* Kiln's, for predicting 2048^3 (NAN: not measured) */
} g;

static row *row_new(const char *id, const char *name, const char *ref, double work, unit u) {
    if (g.row_count == MAX_ROWS)
        return NULL;
    row *r = &g.rows[g.row_count++];
    memset(r, 0, sizeof *r);
    snprintf(r->id, sizeof r->id, "%s", id);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->ref, sizeof r->ref, "%s", ref);
    r->kiln_ms = r->kiln_first_ms = r->kiln_dev_ms = r->ref_ms = r->ref_first_ms = r->ref_dev_ms =
        r->kiln_alone_ms = r->ref_alone_ms = r->ratio = r->ratio_lo = r->ratio_hi = r->target = NAN;
    r->work = work;
    r->unit = u;
    snprintf(r->status, sizeof r->status, "ok");
    return r;
}

/* The issue's targets (kiln/ref time ratios): generated kernels at least as fast as the best
 * hand-written shader; strided reads within 1.3x of their contiguous twin; a small kernel's
 * overhead within 1.5x of raw batched dispatches; SPIR-V generation 500x faster than glslc. */
#define TARGET_REF 1.0
#define TARGET_STRIDED 1.3
#define TARGET_DISPATCH 1.5
#define TARGET_CODEGEN (1.0 / 500)
/* Issue 25: a batch of small matmuls within 10% of one product of the same total size. */
#define TARGET_BATCHED 1.1

static void row_target(row *r, double target) {
    if (r)
        r->target = target;
}

/* The row's kiln/ref: the paired median ratio, or the ratio of the medians. */
static double row_ratio(const row *r) {
    return isnan(r->ratio) ? r->kiln_ms / r->ref_ms : r->ratio;
}

/* Against the row's target: "met" (the ratio is at or below it), "tie" (above it, but the
 * paired interval reaches it: the run cannot tell them apart), "MISSED", or "" (no target, or
 * no figure). */
static const char *row_verdict(const row *r) {
    double q = row_ratio(r);
    if (isnan(r->target) || isnan(q))
        return "";
    if (q <= r->target)
        return "met";
    return !isnan(r->ratio_lo) && r->ratio_lo <= r->target ? "tie" : "MISSED";
}

/* Appends to a row's status (the first problem replaces "ok"). */
static void row_note(row *r, const char *text) {
    if (strcmp(r->status, "ok") == 0)
        r->status[0] = '\0';
    size_t len = strlen(r->status);
    snprintf(r->status + len, sizeof r->status - len, "%s%s", len ? "; " : "", text);
}

/* Whether the case passes KILN_BENCH_FILTER: a substring of its id or name, or of one of
 * several separated by commas ("conv,matmul_1024"). */
static bool selected(const char *id, const char *name) {
    bool yes = !g.filter;
    for (const char *f = g.filter; f && *f && !yes;) {
        const char *end = strchr(f, ',');
        size_t len = end ? (size_t)(end - f) : strlen(f);
        char one[128];
        snprintf(one, sizeof one, "%.*s", (int)(len < sizeof one ? len : sizeof one - 1), f);
        yes = one[0] && (strstr(id, one) || strstr(name, one));
        f = end ? end + 1 : f + len;
    }
    if (yes)
        fprintf(stderr, "bench_ops: %s\n", name);
    return yes;
}

static double throughput(double work, unit u, double ms) {
    if (isnan(ms) || ms <= 0)
        return NAN;
    switch (u) {
    case UNIT_GBS:
        return work / ms / 1e6;
    case UNIT_GFLOPS:
        return work / ms / 1e6;
    case UNIT_US:
        return ms * 1e3 / work;
    }
    return NAN;
}

/* ---- data ------------------------------------------------------------------------------------ */

static float *alloc_floats(size_t n) {
    float *p = malloc(n * sizeof *p);
    if (!p)
        fprintf(stderr, "bench_ops: out of host memory (%zu floats)\n", n);
    return p;
}

/* Compares got with want: |got - want| <= atol + rtol |want|. Returns true when all agree;
 * otherwise describes the worst element in msg. */
static bool compare(const float *got, const float *want, size_t n, double rtol, double atol,
                    const char *what, char *msg, size_t msg_size) {
    size_t bad = 0, worst = 0;
    double worst_err = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)want[i]);
        if (!(e <= atol + rtol * fabs((double)want[i]))) { /* NaN counts as bad */
            if (bad == 0 || e > worst_err || isnan(e)) {
                worst = i;
                worst_err = isnan(e) ? INFINITY : e;
            }
            bad++;
        }
    }
    if (bad == 0)
        return true;
    snprintf(msg, msg_size, "%s: %zu of %zu wrong, e.g. [%zu] %.9g vs %.9g", what, bad, n, worst,
             (double)got[worst], (double)want[worst]);
    return false;
}

/* ---- subprocesses and files ------------------------------------------------------------------ */

/* Runs argv (NULL-terminated, at most 15 words) quietly (stdout and stderr to /dev/null unless
 * keep_output); returns the exit status, -1 when it could not start. */
static int run_quiet(const char *const *argv, bool keep_output) {
    char *args[16]; /* posix_spawnp takes char *const[]: copied, never written */
    size_t n = 0;
    while (argv[n] && n < 15)
        n++;
    memcpy(args, argv, n * sizeof *args);
    args[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (!keep_output) {
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    }
    pid_t pid;
    int rc = posix_spawnp(&pid, args[0], &fa, NULL, args, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return -1;
    int status;
    if (waitpid(pid, &status, 0) < 0)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_tmp(void) {
    if (g.tmp[0])
        nftw(g.tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The words of the SPIR-V module at path (malloc'ed), or false. */
static bool read_words(const char *path, uint32_t **words, size_t *count) {
    FILE *f = fopen(path, "rb");
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    *words = size > 20 && size % 4 == 0 ? malloc((size_t)size) : NULL;
    bool ok =
        *words && fseek(f, 0, SEEK_SET) == 0 && fread(*words, 1, (size_t)size, f) == (size_t)size;
    if (f)
        fclose(f);
    *count = ok ? (size_t)size / 4 : 0;
    if (!ok) {
        free(*words);
        *words = NULL;
    }
    return ok;
}

/* The name prefix of vector form pr (vector_form): "", "pairs ", "octets ". */
static const char *form_prefix(int pr) {
    return pr == 2 ? "octets " : pr == 1 ? "pairs " : "";
}

/* Whether plus, a name's options ("+paired+texels"; NULL: none), holds "+<word>". */
static bool has_option(const char *plus, const char *word) {
    size_t len = strlen(word);
    for (const char *o = plus; o; o = strchr(o + 1, '+')) {
        if (strncmp(o + 1, word, len) == 0 && (o[1 + len] == '\0' || o[1 + len] == '+'))
            return true;
    }
    return false;
}

/* Compiles shaders/<name>.comp with glslc into the temporary folder; *ms is glslc's wall
 * time. The words are malloc'ed. Options after the shader's name, in any combination:
 * "+paired" compiles the shader with PAIRED defined (vector buffers as pairs of 64-bit
 * integers, shaders/vec.glsl), "+octets" with PAIRED and OCTETS (eight elements per access),
 * "+texels" with TEXELS (read-only operands as uniform texel buffers of R32G32B32A32_UINT
 * texels: the pipeline's texel_bindings must name them, ref_pipeline_texels); "+paired+texels"
 * reads texels and writes pairs. */
static bool glslc_compile(const char *name, uint32_t **words, size_t *count, double *ms) {
    char src[512], out[1024];
    const char *plus = strchr(name, '+');
    bool octets = has_option(plus, "octets");
    bool paired = octets || has_option(plus, "paired");
    bool texels = has_option(plus, "texels");
    int len = plus ? (int)(plus - name) : (int)strlen(name);
    snprintf(src, sizeof src, "%s/%.*s.comp", KILN_BENCH_SHADER_DIR, len, name);
    if (g.spv_dir) { /* compiled ahead of time (tools/gpu-check.sh) */
        snprintf(out, sizeof out, "%s/%s.spv", g.spv_dir, name);
        *ms = NAN; /* glslc did not run here */
        return read_words(out, words, count);
    }
    snprintf(out, sizeof out, "%s/%s.spv", g.tmp, name);
    const char *argv[10] = {"glslc", "-O", "--target-env=vulkan1.1", src, "-o", out};
    size_t argc = 6;
    if (paired)
        argv[argc++] = "-DPAIRED";
    if (octets)
        argv[argc++] = "-DOCTETS";
    if (texels)
        argv[argc++] = "-DTEXELS";
    argv[argc] = NULL;
    double t0 = bench_now_ms();
    int rc = run_quiet(argv, true);
    *ms = bench_now_ms() - t0;
    if (rc != 0) {
        fprintf(stderr, "bench_ops: glslc failed on %s\n", src);
        return false;
    }
    return read_words(out, words, count);
}

/* ---- the references' device ------------------------------------------------------------------ */

static bool ref_device_open(void) {
    base_error err = {0};
    uint32_t index = 0;
    if (vkd_instance_create(&(vkd_instance_options){.app_name = "bench_ops"}, &g.inst, &err) !=
            KILN_OK ||
        vkd_instance_select(g.inst, getenv("KILN_DEVICE"), &index, &err) != KILN_OK ||
        vkd_device_create(g.inst, index, NULL, &g.own_dev, &err) != KILN_OK) {
        fprintf(stderr, "bench_ops: no device for the references: %s\n", base_error_message(&err));
        return false;
    }
    g.dev = g.own_dev;
    snprintf(g.device_name, sizeof g.device_name, "%s",
             vkd_instance_device(g.inst, index)->props.deviceName);
    VkSubgroupFeatureFlags ops = vkd_device_caps(g.dev)->subgroup_operations;
    g.have_subgroup_arith = (ops & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) != 0;
    g.have_int64 = vkd_device_caps(g.dev)->int64;
    return true;
}

/* Whether the references' device reads uniform texel buffers (vkd_caps.texel_fetch): only then
 * are texel variants ("+texels") built. */
static bool ref_texels(void) {
    return g.dev && vkd_device_caps(g.dev)->texel_fetch;
}

/* A pipeline from shaders/<name>.comp with spec_count uint specialization constants (ids 0..)
 * whose bindings in the mask texel_bindings are uniform texel buffers (vkd_pipeline_desc): a
 * "+texels" name (glslc_compile) with its read-only bindings, any other name with 0. */
static vkd_pipeline *ref_pipeline_texels(const char *name, uint32_t bindings, uint32_t push_size,
                                         const uint32_t *spec, uint32_t spec_count,
                                         uint32_t texel_bindings) {
    uint32_t *words;
    size_t count;
    double ms;
    if ((texel_bindings != 0) != has_option(strchr(name, '+'), "texels")) {
        fprintf(stderr, "bench_ops: %s: texel bindings 0x%x do not match the name\n", name,
                texel_bindings);
        return NULL;
    }
    if ((texel_bindings && !ref_texels()) || !g.have_glslc ||
        !glslc_compile(name, &words, &count, &ms))
        return NULL;
    VkSpecializationMapEntry entries[4];
    for (uint32_t i = 0; i < spec_count && i < 4; i++)
        entries[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    vkd_pipeline_desc desc = {
        .code = words,
        .word_count = count,
        .binding_count = bindings,
        .push_constant_size = push_size,
        .texel_bindings = texel_bindings,
        .spec_entries = spec_count ? entries : NULL,
        .spec_entry_count = spec_count,
        .spec_data = spec,
        .spec_data_size = 4 * spec_count,
        .debug_name = name,
    };
    vkd_pipeline *p = NULL;
    base_error err = {0};
    if (vkd_pipeline_create(g.dev, &desc, &p, &err) != KILN_OK)
        fprintf(stderr, "bench_ops: %s: %s\n", name, base_error_message(&err));
    free(words);
    return p;
}

/* A pipeline of storage buffers only (ref_pipeline_texels). */
static vkd_pipeline *ref_pipeline(const char *name, uint32_t bindings, uint32_t push_size,
                                  const uint32_t *spec, uint32_t spec_count) {
    return ref_pipeline_texels(name, bindings, push_size, spec, spec_count, 0);
}

/* A reference's buffer of n floats holding data (uploaded), or for its results (data NULL):
 * the buffer of Kiln's input of the same data (shared_input), else a buffer of its own. */
static vkd_buffer *ref_buffer(const float *data, size_t n) {
    for (uint32_t i = 0; data && i < g.input_count; i++) {
        if (g.input_host[i] == data)
            return g.input_buffer[i]; /* an input Kiln reads too */
    }
    if (!data && g.output && g.output_count == n) {
        vkd_buffer *b = g.output; /* Kiln storage reserved for the results */
        g.output = NULL;
        return b;
    }
    vkd_buffer *b = NULL;
    base_error err = {0};
    if (vkd_buffer_create(g.dev, n * sizeof(float), &b, &err) != KILN_OK ||
        (data && vkd_buffer_upload(b, 0, data, n * sizeof(float), &err) != KILN_OK)) {
        fprintf(stderr, "bench_ops: reference buffer: %s\n", base_error_message(&err));
        vkd_buffer_destroy(b);
        return NULL;
    }
    return b;
}

/* A reference buffer, unless it is a shared input (freed by kiln_close). */
static void ref_buffer_destroy(vkd_buffer *b) {
    for (uint32_t i = 0; b && i < g.input_count; i++) {
        if (g.input_buffer[i] == b)
            return;
    }
    vkd_buffer_destroy(b);
}

/* The buffer of t (realized, outside any scope: its storage must stay Kiln's until
 * kiln_close) for the references, or NULL; kept with its host data until kiln_close. */
static vkd_buffer *share_storage(kiln_tensor *t, const float *host) {
    VkBuffer handle = VK_NULL_HANDLE;
    VkDeviceSize size = 0;
    int64_t offset = -1, strides[4];
    vkd_buffer *b = NULL;
    base_error err = {0};
    if (!t || kiln_tensor_ndim(t) > 4 || g.input_count == MAX_INPUTS ||
        kiln_tensor_vulkan_buffer(t, &handle, &size, &offset, strides) != KILN_OK || offset != 0 ||
        vkd_buffer_wrap(g.dev, handle, size, &b, &err) != KILN_OK)
        return NULL;
    /* The storage's own buffer, for texel bindings: a wrapped handle has no texel view. */
    const eng_node *node = eng_resolve(t);
    const vkd_buffer *own = node && node->storage ? node->storage->buffer : NULL;
    bool texels = own && vkd_buffer_texels(own) && vkd_buffer_handle(own) == handle;
    g.input_host[g.input_count] = host;
    g.input_texels[g.input_count] = texels ? own : NULL;
    g.input_buffer[g.input_count++] = b;
    return b;
}

/* The buffer to bind for reference buffer b at a texel binding: b itself when it has a texel
 * view (a buffer of the references' own, vkd_buffer_create), for a shared input Kiln's own
 * buffer of the same storage (the same VkBuffer, with its view); NULL when neither has one
 * (the texel variant is then not built), or when the device reads no texel buffers. */
static const vkd_buffer *texel_buffer(const vkd_buffer *b) {
    if (!b || !ref_texels())
        return NULL;
    if (vkd_buffer_texels(b))
        return b;
    for (uint32_t i = 0; i < g.input_count; i++) {
        if (g.input_buffer[i] == b)
            return g.input_texels[i];
    }
    return NULL;
}

/* Kiln storage of n floats (allocated as Kiln's results are, before any of them: outside
 * every scope) for the first reference buffer of results of that size: with a buffer of
 * their own the references' results had lain elsewhere than Kiln's. */
static void reserve_output(kiln_context *ctx, size_t n) {
    g.output = share_storage(kiln_empty(ctx, KILN_F32, 1, (const int64_t[]){(int64_t)n}), NULL);
    g.output_count = n;
}

/* An input of the case (Kiln's tensor of the host data) whose buffer the references read too
 * (ref_buffer of the same host data): buffer placement moves a kernel by up to 10-15%
 * (bench/README.md), so both sides read the same memory. The references' handle on it is
 * released by kiln_close, before the context. */
static kiln_tensor *shared_input(kiln_context *ctx, const float *host, uint32_t ndim,
                                 const int64_t *shape) {
    kiln_tensor *t = kiln_from_data(ctx, KILN_F32, ndim, shape, host);
    (void)share_storage(t, host); /* else the references get buffers of their own */
    return t;
}

static bool ref_read(const vkd_buffer *b, float *out, size_t n) {
    base_error err = {0};
    if (vkd_buffer_download(b, 0, out, n * sizeof(float), &err) != KILN_OK) {
        fprintf(stderr, "bench_ops: reference download: %s\n", base_error_message(&err));
        return false;
    }
    return true;
}

enum { REF_MAX_BINDINGS = 4 };

typedef struct ref_dispatch {
    const vkd_pipeline *pipe;
    const vkd_buffer *buffers[REF_MAX_BINDINGS];
    uint32_t binding_count;
    uint32_t push[4];
    uint32_t push_size;
    uint32_t groups[3];
} ref_dispatch;

/* Records the dispatches in one command buffer, submits and waits: a warm-up, then g.reps
 * timed repetitions (wall time of record + submit + wait). */
static bool ref_measure(const ref_dispatch *d, uint32_t count, double *first, double *med,
                        double *dev_ms) {
    vkd_batch *batch = NULL;
    base_error err = {0};
    double times[MAX_REPS];
    kiln_status st = vkd_batch_create(g.dev, &batch, &err);
    for (int rep = 0; st == KILN_OK && rep <= g.reps; rep++) {
        double t0 = bench_now_ms();
        if (rep > 0)
            st = vkd_batch_reset(batch, &err);
        for (uint32_t i = 0; st == KILN_OK && i < count; i++) {
            vkd_binding b[REF_MAX_BINDINGS];
            for (uint32_t j = 0; j < d[i].binding_count; j++)
                b[j] = (vkd_binding){.buffer = d[i].buffers[j]};
            st = vkd_batch_dispatch(batch, d[i].pipe, b, d[i].binding_count,
                                    d[i].push_size ? d[i].push : NULL, d[i].push_size, d[i].groups,
                                    &err);
        }
        if (st == KILN_OK)
            st = vkd_batch_submit(batch, &err);
        double ms = bench_now_ms() - t0;
        if (rep == 0)
            *first = ms;
        else
            times[rep - 1] = ms;
    }
    uint64_t ns, total = 0;
    for (uint32_t i = 0; st == KILN_OK && i < vkd_batch_dispatch_count(batch); i++)
        total += vkd_batch_dispatch_time(batch, i, &ns) ? ns : 0;
    if (dev_ms)
        *dev_ms = (double)total / 1e6;
    vkd_batch_destroy(batch);
    if (st != KILN_OK) {
        fprintf(stderr, "bench_ops: reference run: %s\n", base_error_message(&err));
        return false;
    }
    *med = bench_median(times, g.reps);
    return true;
}

enum { MAX_VARIANTS = 24 + MAX_SPV }; /* a case's own variants and KILN_BENCH_SPV's modules */

/* The shader's name for vector form pr: 0 vec4, 1 pairs of 64-bit integers, 2 octets (the
 * shader <shader>_oct, or <shader> itself compiled with OCTETS when it has no such file;
 * forms 1 and 2 on devices with int64 only: NULL otherwise). */
static const char *vector_form(const char *shader, int pr, char *buf, size_t size) {
    if (pr && !g.have_int64)
        return NULL;
    char path[512];
    if (g.spv_dir)
        snprintf(path, sizeof path, "%s/%s_oct+octets.spv", g.spv_dir, shader);
    else
        snprintf(path, sizeof path, "%s/%s_oct.comp", KILN_BENCH_SHADER_DIR, shader);
    bool own = pr == 2 && access(path, R_OK) == 0;
    snprintf(buf, size, "%s%s%s", shader, own ? "_oct" : "",
             pr == 2 ? "+octets"
             : pr    ? "+paired"
                     : "");
    return buf;
}

/* One way of computing a case's reference (several are measured; the fastest counts). */
typedef struct ref_variant {
    char name[24];
    vkd_pipeline *pipes[2];
    ref_dispatch d[2];
    uint32_t count; /* dispatches; 0: the variant could not be built */
} ref_variant;

static void variant_finish(ref_variant *v) {
    vkd_pipeline_destroy(v->pipes[0]);
    vkd_pipeline_destroy(v->pipes[1]);
    v->pipes[0] = v->pipes[1] = NULL;
    v->count = 0;
}

/* A reference's side: its dispatches recorded in one command buffer, submitted and waited for. */
typedef struct ref_side {
    const ref_dispatch *d;
    uint32_t count;
    vkd_batch *batch;
    bool used;
} ref_side;

static double ref_once(void *state) {
    ref_side *s = state;
    base_error err = {0};
    double t0 = bench_now_ms();
    bool ok = !s->used || vkd_batch_reset(s->batch, &err) == KILN_OK;
    s->used = true;
    for (uint32_t j = 0; ok && j < s->count; j++) {
        const ref_dispatch *d = &s->d[j];
        vkd_binding b[REF_MAX_BINDINGS];
        for (uint32_t k = 0; k < d->binding_count; k++)
            b[k] = (vkd_binding){.buffer = d->buffers[k]};
        ok = vkd_batch_dispatch(s->batch, d->pipe, b, d->binding_count,
                                d->push_size ? d->push : NULL, d->push_size, d->groups,
                                &err) == KILN_OK;
    }
    ok = ok && vkd_batch_submit(s->batch, &err) == KILN_OK;
    double ms = bench_now_ms() - t0;
    if (!ok)
        fprintf(stderr, "bench_ops: reference run: %s\n", base_error_message(&err));
    return ok ? ms : NAN;
}

static ref_variant variant1(const char *name, vkd_pipeline *p, ref_dispatch d) {
    ref_variant v = {.pipes = {p}, .d = {d}, .count = p ? 1 : 0};
    snprintf(v.name, sizeof v.name, "%s", name);
    v.d[0].pipe = p;
    return v;
}

/* KILN_BENCH_SPV module m (a Kiln kernel written by bench/kiln_spv.sh, or any compute shader
 * with the same interface) as a variant on the buffers of the case's first reference variant
 * (output first, then the inputs: the order of Kiln's bindings for these cases), with its
 * workgroups and no push constants. Compared with the GLSL variants on the same buffers, it
 * is free of the buffer-placement effects that separate Kiln's and the references'
 * allocations (bench/README.md). */
static ref_variant spv_file_variant(const ref_variant *like, uint32_t m) {
    ref_variant v = {.count = 0};
    const char *path = g.spv_path[m];
    uint32_t *words = NULL;
    size_t count = 0;
    bool ok = read_words(path, &words, &count);
    vkd_pipeline *p = NULL;
    base_error err = {0};
    vkd_pipeline_desc desc = {.code = words,
                              .word_count = count,
                              .binding_count = like->d[0].binding_count,
                              .debug_name = "KILN_BENCH_SPV"};
    if (!ok || vkd_pipeline_create(g.dev, &desc, &p, &err) != KILN_OK) {
        fprintf(stderr, "bench_ops: KILN_BENCH_SPV %s: %s\n", path,
                ok ? base_error_message(&err) : "cannot read a SPIR-V module");
        free(words);
        return v;
    }
    free(words);
    const uint32_t *groups = g.spv_groups[m];
    const char *base = strrchr(path, '/');
    v = variant1("", p,
                 (ref_dispatch){.binding_count = like->d[0].binding_count,
                                .groups = {groups[0], groups[1], groups[2]}});
    memcpy(v.d[0].buffers, like->d[0].buffers, sizeof v.d[0].buffers);
    snprintf(v.name, sizeof v.name, "spv %.19s", base ? base + 1 : path);
    return v;
}

/* Measures every variant on its own (a warm-up, the repetitions: its first time and device
 * time), checks each one's output (read back from out) against the host's, then runs the
 * correct ones in interleaved rounds and keeps the fastest by the median of its rounds: its
 * name, times and output (refo) go to the row, and the variant itself to *best when best is
 * not NULL (the caller then finishes it). Finishes the other variants. */
static bool ref_best(row *r, ref_variant *v, int nv, const vkd_buffer *out, float *refo, size_t n,
                     const float *host, double rtol, double atol, ref_variant *best_out) {
    float *outs[MAX_VARIANTS] = {NULL};
    double med[MAX_VARIANTS], first[MAX_VARIANTS], dev[MAX_VARIANTS];
    nv = nv > MAX_VARIANTS ? MAX_VARIANTS : nv;
    ref_variant with_spv[MAX_VARIANTS];
    if (g.spv_count && nv > 0 && v[0].count) {
        memcpy(with_spv, v, (size_t)nv * sizeof *v);
        for (uint32_t m = 0; m < g.spv_count && nv < MAX_VARIANTS; m++) {
            with_spv[nv] = spv_file_variant(&v[0], m);
            nv += with_spv[nv].count > 0;
        }
        v = with_spv;
    }
    for (int i = 0; i < nv; i++) {
        float *tmp = out ? alloc_floats(n) : NULL;
        if (!tmp || !v[i].count || !ref_measure(v[i].d, v[i].count, &first[i], &med[i], &dev[i]) ||
            !ref_read(out, tmp, n)) {
            free(tmp);
            continue;
        }
        char msg[160];
        if (host &&
            !compare(tmp, host, n, rtol, atol, "REFERENCE WRONG vs host", msg, sizeof msg)) {
            row_note(r, msg);
            free(tmp);
            continue;
        }
        outs[i] = tmp;
    }
    /* The choice: rounds in which every correct variant runs once (in rotating order), each
     * variant's figure the median of its rounds, so that a variant measured alone in a quiet
     * moment cannot win over a faster one measured under load (a slow reference would flatter
     * Kiln). */
    ref_side sides[MAX_VARIANTS] = {{0}};
    double rounds[MAX_VARIANTS][MAX_REPS];
    for (int i = 0; i < nv; i++) {
        base_error err = {0};
        sides[i] = (ref_side){.d = v[i].d, .count = v[i].count};
        if (outs[i] && vkd_batch_create(g.dev, &sides[i].batch, &err) != KILN_OK) {
            free(outs[i]);
            outs[i] = NULL;
        }
    }
    for (int rep = 0; rep < g.reps; rep++) {
        for (int j = 0; j < nv; j++) {
            int i = (j + rep) % nv;
            rounds[i][rep] = outs[i] ? ref_once(&sides[i]) : NAN;
        }
    }
    int best = -1;
    for (int i = 0; i < nv; i++) {
        vkd_batch_destroy(sides[i].batch);
        if (!outs[i])
            continue;
        bool failed = false;
        for (int rep = 0; rep < g.reps; rep++)
            failed = failed || isnan(rounds[i][rep]);
        if (failed) {
            free(outs[i]);
            outs[i] = NULL;
            continue;
        }
        med[i] = bench_median(rounds[i], g.reps);
        size_t len = strlen(r->variants);
        snprintf(r->variants + len, sizeof r->variants - len, "%s%s %.3f ms", len ? ", " : "",
                 v[i].name, med[i]);
        if (best < 0 || med[i] < med[best])
            best = i;
    }
    if (best >= 0) {
        r->ref_ms = med[best];
        r->ref_first_ms = first[best];
        r->ref_dev_ms = dev[best];
        memcpy(refo, outs[best], n * sizeof *refo);
        snprintf(r->ref, sizeof r->ref, "glsl %s", v[best].name);
    }
    if (best_out)
        *best_out = best >= 0 ? v[best] : (ref_variant){.count = 0};
    for (int i = 0; i < nv; i++) {
        free(outs[i]);
        if (!best_out || i != best)
            variant_finish(&v[i]);
    }
    if (best < 0)
        row_note(r, "reference skipped (no glslc, device or feature)");
    return best >= 0;
}

/* A one-dispatch variant. */

/* ---- Kiln measurement -------------------------------------------------------------------- */

/* A Kiln case: prepare (untimed) makes the inputs (once: each repetition's results are
 * released at the end of its scope, so the same graph builds and runs again, on inputs that
 * stay in place as the reference's do); build (timed) makes the graph and returns the tensor
 * to realize. */
typedef struct kiln_case {
    kiln_context *ctx;
    bool (*prepare)(void *user, int rep);
    kiln_tensor *(*build)(void *user, int rep);
    void *user;
    uint32_t extra_count; /* more tensors realized in the same call (kiln_realize_many) */
    kiln_tensor **extra;  /* filled by build, may be NULL */
} kiln_case;

/* A Kiln context for a case. Until kiln_close, the case's references run on the context's own
 * Vulkan device (g.dev): measured on two devices of the same driver, the two sides ran on two
 * lavapipe thread pools, and one of them could be slower than the other for a whole run (paired
 * ratios as tight as +-2% moved by 5-25% from run to run). */
static kiln_context *kiln_open(row *r) {
    kiln_context *ctx = NULL;
    if (kiln_context_create(NULL, &ctx) != KILN_OK) {
        row_note(r, "Kiln context creation failed");
        return NULL;
    }
    if (!ctx->interpreter && ctx->dev)
        g.dev = ctx->dev;
    return ctx;
}

/* Ends a case's context; the references go back to the benchmark's own device. */
static void kiln_close(kiln_context *ctx) {
    for (uint32_t i = 0; i < g.input_count; i++)
        vkd_buffer_destroy(g.input_buffer[i]); /* the handles on Kiln's inputs */
    g.input_count = 0;
    g.output = NULL;
    kiln_context_destroy(ctx);
    g.dev = g.own_dev;
}

static void kiln_fail(row *r, kiln_context *ctx, const char *what) {
    char msg[160];
    snprintf(msg, sizeof msg, "KILN ERROR (%s): %s", what, kiln_context_message(ctx));
    row_note(r, msg);
}

/* The warm-up and g.reps timed repetitions of build + realize; the last repetition's tensor
 * comes back in *out for checking. */
/* The last repetition's result (*out) stays alive, in a scope of its own that paired ends:
 * until then the same graph built again is that realized result and runs nothing. */
static bool kiln_measure(row *r, const kiln_case *c, kiln_tensor **out) {
    double times[MAX_REPS];
    int reps = g.reps;
    if (c->prepare && !c->prepare(c->user, 0)) { /* the inputs: outside the result's scope */
        kiln_fail(r, c->ctx, "inputs");
        return false;
    }
    kiln_scope_begin(c->ctx);
    for (int rep = 0; rep <= reps; rep++) {
        if (c->prepare && !c->prepare(c->user, rep)) {
            kiln_fail(r, c->ctx, "inputs");
            return false;
        }
        kiln_stats before = kiln_context_stats(c->ctx);
        /* As a loop in an application would: each repetition's results are released (their
         * storage goes back to the context's pool) except the last one's. */
        kiln_scope_begin(c->ctx);
        kiln_tensor *all[64];
        if (c->extra_count >= 64)
            return false;
        double t0 = bench_now_ms();
        kiln_tensor *t = c->build(c->user, rep);
        kiln_status st;
        all[0] = t;
        for (uint32_t i = 0; i < c->extra_count; i++)
            all[i + 1] = c->extra[i];
        if (c->extra_count)
            st = kiln_realize_many(c->ctx, c->extra_count + 1, all);
        else
            st = t ? kiln_realize(t) : kiln_context_status(c->ctx);
        double ms = bench_now_ms() - t0;
        kiln_status end = kiln_scope_end(c->ctx, rep == reps ? c->extra_count + 1 : 0, all);
        if (st != KILN_OK || !t || end != KILN_OK) {
            kiln_fail(r, c->ctx, rep == 0 ? "first realize" : "realize");
            return false;
        }
        kiln_stats after = kiln_context_stats(c->ctx);
        if (rep == 0) {
            r->kiln_first_ms = ms;
            /* Cases of seconds per run (Kiln's matmul) get fewer repetitions. */
            reps = ms > 5000 ? (reps < 2 ? reps : 2) : ms > 1000 ? (reps < 3 ? reps : 3) : reps;
        } else {
            times[rep - 1] = ms;
            r->kiln_dev_ms = (double)(after.device_time_ns - before.device_time_ns) / 1e6;
            r->dispatches = (unsigned long long)(after.dispatches - before.dispatches);
            if (after.kernels_compiled != before.kernels_compiled)
                row_note(r, "Kiln recompiled on a repetition");
        }
        *out = t;
    }
    r->kiln_ms = bench_median(times, reps);
    if (r->dispatches == 0)
        row_note(r, "no Kiln dispatch ran on a repetition: the timing is not of a kernel");
    if (reps < g.reps) {
        char msg[64];
        snprintf(msg, sizeof msg, "%d Kiln repetitions (slow)", reps);
        row_note(r, msg);
    }
    return true;
}

static bool kiln_read_floats(row *r, kiln_context *ctx, kiln_tensor *t, float *out, size_t n) {
    if (kiln_read(t, out, n * sizeof(float)) != KILN_OK) {
        kiln_fail(r, ctx, "read");
        return false;
    }
    return true;
}

/* Checks Kiln's output against the reference's (when there is one) and the reference's (or,
 * without one, Kiln's) against the host's expectation. */
static void check_outputs(row *r, const float *kiln, const float *ref, const float *host, size_t n,
                          double rtol, double atol) {
    char msg[160];
    if (kiln && ref &&
        !compare(kiln, ref, n, rtol, atol, "KILN WRONG vs reference", msg, sizeof msg))
        row_note(r, msg);
    const float *checked = ref ? ref : kiln;
    const char *what = ref ? "REFERENCE WRONG vs host" : "KILN WRONG vs host";
    if (checked && host && !compare(checked, host, n, rtol, atol, what, msg, sizeof msg))
        row_note(r, msg);
}

/* ---- paired measurement -------------------------------------------------------------------
 *
 * After both sides were measured on their own (the *_alone_ms figures), Kiln and its reference
 * run in alternation, g.pairs times each, and the row's figures become the paired ones: on a
 * shared machine whose speed drifts by up to 2x within seconds, the two times of one pair see
 * the same load, so the ratio of a pair is far steadier than either time. The order inside a
 * pair alternates (Kiln first, then the reference first), so neither side always runs on the
 * other's leftovers. The row's ratio is the median of the pairs' ratios, with a distribution-free
 * confidence interval for that median (order statistics; about 95% when there are enough
 * pairs). */

/* One side of a pair: one timed run, its wall time in milliseconds (NAN: it failed). */
typedef struct side {
    double (*once)(void *state);
    void *state;
} side;

/* Kiln's side: one build + realize of the case in a scope of its own. A realize that ran
 * nothing is no measurement of a kernel: it fails. */
typedef struct kiln_side {
    const kiln_case *c;
    int rep; /* the next repetition number handed to prepare and build */
} kiln_side;

static double kiln_once(void *state) {
    kiln_side *k = state;
    const kiln_case *c = k->c;
    int rep = k->rep++;
    if (c->prepare && !c->prepare(c->user, rep))
        return NAN;
    uint64_t before = kiln_context_stats(c->ctx).dispatches;
    kiln_scope_begin(c->ctx);
    double t0 = bench_now_ms();
    kiln_tensor *t = c->build(c->user, rep);
    kiln_status st;
    if (c->extra_count) {
        kiln_tensor *all[64] = {t};
        for (uint32_t i = 0; i < c->extra_count && i + 1 < 64; i++)
            all[i + 1] = c->extra[i];
        st = t && c->extra_count < 64 ? kiln_realize_many(c->ctx, c->extra_count + 1, all)
                                      : KILN_ERROR_INVALID_ARGUMENT;
    } else {
        st = t ? kiln_realize(t) : kiln_context_status(c->ctx);
    }
    double ms = bench_now_ms() - t0;
    bool ok = st == KILN_OK && kiln_scope_end(c->ctx, 0, NULL) == KILN_OK;
    return ok && kiln_context_stats(c->ctx).dispatches > before ? ms : NAN;
}

/* Runs kiln and ref in alternation, pairs times each (after a warm-up pair that is not
 * counted), and makes the row's figures the paired ones: medians of each side, and the median
 * ratio kiln/ref of the pairs with its interval. The figures before pairing stay in
 * results.json as *_alone_ms. */
static void pair_run(row *r, side kiln, side ref, int pairs) {
    double kt[MAX_PAIRS], rt[MAX_PAIRS], ratio[MAX_PAIRS];
    pairs = pairs > MAX_PAIRS ? MAX_PAIRS : pairs;
    bool ok = !isnan(kiln.once(kiln.state)) && !isnan(ref.once(ref.state));
    for (int i = 0; ok && i < pairs; i++) {
        if (i % 2 == 0) {
            kt[i] = kiln.once(kiln.state);
            rt[i] = ref.once(ref.state);
        } else {
            rt[i] = ref.once(ref.state);
            kt[i] = kiln.once(kiln.state);
        }
        ok = !isnan(kt[i]) && !isnan(rt[i]) && rt[i] > 0;
        ratio[i] = ok ? kt[i] / rt[i] : NAN;
    }
    if (!ok) {
        row_note(r, "paired run failed");
        return;
    }
    r->kiln_alone_ms = r->kiln_ms;
    r->ref_alone_ms = r->ref_ms;
    r->kiln_ms = bench_median(kt, pairs);
    r->ref_ms = bench_median(rt, pairs);
    r->ratio = bench_median(ratio, pairs); /* sorts ratio: the interval's ends are ranks */
    int lo = bench_median_ci_rank(pairs);
    r->ratio_lo = ratio[lo];
    r->ratio_hi = ratio[pairs - 1 - lo];
    r->pairs = pairs;
}

/* The pairs for a case whose one run takes ms: fewer for runs of seconds. */
static int pairs_for(double ms) {
    return ms > 1000 && g.pairs > 5 ? 5 : g.pairs;
}

/* Kiln's case against count reference dispatches, paired (none when count is 0). Ends the scope
 * of Kiln's measured result (kiln_measure): it was read, and the same graph must run again. */
static void paired_ref(row *r, const kiln_case *c, const ref_dispatch *d, uint32_t count) {
    (void)kiln_scope_end(c->ctx, 0, NULL);
    kiln_side ks = {.c = c, .rep = g.reps + 1};
    ref_side rs = {.d = d, .count = count};
    base_error err = {0};
    if (count && !isnan(r->kiln_ms) && !isnan(r->ref_ms) &&
        vkd_batch_create(g.dev, &rs.batch, &err) == KILN_OK)
        pair_run(r, (side){kiln_once, &ks}, (side){ref_once, &rs}, pairs_for(r->kiln_ms));
    vkd_batch_destroy(rs.batch);
}

/* Kiln's case against the fastest reference variant, paired; finishes best. */
static void paired(row *r, const kiln_case *c, ref_variant *best) {
    paired_ref(r, c, best->d, best->count);
    variant_finish(best);
}

/* Kiln's twin (the same work another way, in the same context) as row r's reference: its
 * times, and its status in r's notes where it was not measured or did not pass. */
static void twin_reference(row *r, const row *twin, bool measured, const char *what) {
    if (!measured || strcmp(twin->status, "ok") != 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s: %s", what, twin->status);
        row_note(r, msg);
    }
    r->ref_ms = twin->kiln_ms;
    r->ref_first_ms = twin->kiln_first_ms;
}

/* Kiln's case against Kiln's contiguous twin (the same context), paired. The caller ended the
 * scopes of both measured results (kiln_measure) first. */
static void paired_twin(row *r, const kiln_case *c, const kiln_case *twin) {
    kiln_side ks = {.c = c, .rep = g.reps + 1}, ts = {.c = twin, .rep = g.reps + 1};
    if (!isnan(r->kiln_ms) && !isnan(r->ref_ms))
        pair_run(r, (side){kiln_once, &ks}, (side){kiln_once, &ts}, pairs_for(r->kiln_ms));
}

/* ---- elementwise -------------------------------------------------------------------------- */

enum { N16M = 1 << 24, SIDE = 4096 };

typedef struct ew_state {
    kiln_context *ctx;
    const float *host_c;
    kiln_tensor *a, *b, *c;
    uint32_t ndim;
    int64_t shape_c[2];
    bool broadcast;
} ew_state;

static bool ew_prepare(void *user, int rep) {
    ew_state *s = user;
    (void)rep;
    if (s->c)
        return true;
    s->c = shared_input(s->ctx, s->host_c, s->ndim, s->shape_c);
    return s->c != NULL;
}

static kiln_tensor *ew_build(void *user, int rep) {
    ew_state *s = user;
    (void)rep;
    if (s->broadcast)
        return kiln_add(s->a, s->c);
    return kiln_add(kiln_mul(s->a, s->b), s->c);
}

static void numpy_row(const char *id, const char *name, double kiln_ms, double work,
                      const char *expr_setup, const char *expr);

/* The vec4 and paired variants of an elementwise shader over N16M elements (spec constants
 * PER vec4 per invocation, INTERLEAVE: contiguous ones or one per step of the workgroup's
 * block), each dispatched as d with its workgroup count. Returns how many (at most 8). */
static int ew_variants(const char *shader, ref_dispatch d, ref_variant *v) {
    static const uint32_t shapes[][2] = {{2, 0}, {8, 0}, {2, 1}, {8, 1}};
    int nv = 0;
    for (uint32_t i = 0; i < 8; i++) {
        char vname[24], name[32];
        if (!vector_form(shader, i / 4, name, sizeof name))
            break;
        const uint32_t *sh = shapes[i % 4];
        snprintf(vname, sizeof vname, "%s x%u%s", i / 4 ? "pairs" : "vec4", sh[0],
                 sh[1] ? " il" : "");
        d.groups[0] = N16M / 4 / sh[0] / 64;
        d.groups[1] = d.groups[2] = 1;
        v[nv++] = variant1(vname, ref_pipeline(name, d.binding_count, d.push_size, sh, 2), d);
    }
    return nv;
}

static void case_ew_fma(void) {
    const char *id = "ew_fma", *name = "a*b+c 16M f32";
    if (!selected(id, name))
        return;
    row *r = row_new(id, name, "glsl vec4x4", 4.0 * 4 * N16M, UNIT_GBS);
    row_target(r, TARGET_REF);
    float *ha = alloc_floats(N16M), *hb = alloc_floats(N16M), *hc = alloc_floats(N16M);
    float *want = alloc_floats(N16M), *got = alloc_floats(N16M), *refo = alloc_floats(N16M);
    kiln_context *ctx = kiln_open(r);
    if (!ha || !hb || !hc || !want || !got || !refo || !ctx)
        goto done;
    bench_fill_quarters(ha, N16M, 1);
    bench_fill_quarters(hb, N16M, 2);
    bench_fill_quarters(hc, N16M, 3);
    for (size_t i = 0; i < N16M; i++)
        want[i] = ha[i] * hb[i] + hc[i];
    int64_t shape[1] = {N16M};
    ew_state s = {.ctx = ctx, .host_c = hc, .ndim = 1, .shape_c = {N16M}};
    s.a = shared_input(ctx, ha, 1, shape);
    s.b = shared_input(ctx, hb, 1, shape);
    kiln_case c = {.ctx = ctx, .prepare = ew_prepare, .build = ew_build, .user = &s};
    kiln_tensor *out = NULL;
    reserve_output(ctx, N16M); /* the references' results: Kiln storage */
    bool kiln_ok = kiln_measure(r, &c, &out) && kiln_read_floats(r, ctx, out, got, N16M);

    vkd_buffer *bo = ref_buffer(NULL, N16M), *ba = ref_buffer(ha, N16M), *bb = ref_buffer(hb, N16M),
               *bc = ref_buffer(hc, N16M);
    ref_variant v[MAX_VARIANTS];
    int nv = 0;
    if (bo && ba && bb && bc)
        nv = ew_variants("ew_fma",
                         (ref_dispatch){.buffers = {bo, ba, bb, bc},
                                        .binding_count = 4,
                                        .push = {N16M / 4},
                                        .push_size = 4},
                         v);
    /* octets, PER contiguous ones per invocation */
    char octets[32];
    for (uint32_t per = 1; bo && ba && bb && bc && per <= 2; per++) {
        char vname[24];
        if (!vector_form("ew_fma", 2, octets, sizeof octets))
            break;
        snprintf(vname, sizeof vname, "octets x%u", per);
        v[nv++] = variant1(vname, ref_pipeline(octets, 4, 4, &per, 1),
                           (ref_dispatch){.buffers = {bo, ba, bb, bc},
                                          .binding_count = 4,
                                          .push = {N16M / 8},
                                          .push_size = 4,
                                          .groups = {N16M / 8 / per / 64, 1, 1}});
    }
    /* scalar loads, several consecutive outputs per invocation */
    static const uint32_t pers[] = {8, 16};
    for (uint32_t i = 0; bo && ba && bb && bc && i < 2; i++) {
        char vname[24];
        snprintf(vname, sizeof vname, "scalar x%u", pers[i]);
        v[nv++] = variant1(vname, ref_pipeline("ew_fma_scalar", 4, 4, &pers[i], 1),
                           (ref_dispatch){.buffers = {bo, ba, bb, bc},
                                          .binding_count = 4,
                                          .push = {N16M},
                                          .push_size = 4,
                                          .groups = {N16M / pers[i] / 64, 1, 1}});
    }
    ref_variant best;
    bool ref_ok = ref_best(r, v, nv, bo, refo, N16M, want, 0, 0, &best);
    check_outputs(r, kiln_ok ? got : NULL, ref_ok ? refo : NULL, want, N16M, 0, 0);
    paired(r, &c, &best);
    ref_buffer_destroy(bo);
    ref_buffer_destroy(ba);
    ref_buffer_destroy(bb);
    ref_buffer_destroy(bc);
    numpy_row(id, "a*b+c 16M f32 vs numpy", r->kiln_ms, r->work,
              "a=np.random.rand(n).astype(np.float32);b=a.copy();c=a.copy();o=np.empty_like(a)",
              "np.multiply(a,b,out=o);np.add(o,c,out=o)");
done:
    kiln_close(ctx);
    free(ha);
    free(hb);
    free(hc);
    free(want);
    free(got);
    free(refo);
}

/* a += b in place (kiln_add_) against its out-of-place twin a + b (a new tensor of the same
 * size), both Kiln in one context, paired: the same bytes read and written (no target: no
 * issue sets one). Each repetition adds b once more; a's values are checked against the count
 * (quarters: exact). */
typedef struct inplace_state {
    kiln_tensor *a, *b;
    bool in_place;
    int adds; /* kiln_add_ calls made */
} inplace_state;

static kiln_tensor *inplace_build(void *user, int rep) {
    inplace_state *s = user;
    (void)rep;
    if (!s->in_place)
        return kiln_add(s->a, s->b);
    s->adds++;
    return kiln_add_(s->a, s->b) == KILN_OK ? s->a : NULL;
}

static void case_ew_inplace(void) {
    const char *id = "ew_inplace", *name = "a += b 16M f32 in place";
    if (!selected(id, name))
        return;
    row *r = row_new(id, name, "kiln a + b (a new tensor)", 3.0 * 4 * N16M, UNIT_GBS);
    row twin = *r;
    float *ha = alloc_floats(N16M), *hb = alloc_floats(N16M), *want = alloc_floats(N16M),
          *got = alloc_floats(N16M);
    kiln_context *ctx = kiln_open(r);
    if (!ha || !hb || !want || !got || !ctx)
        goto done;
    bench_fill_quarters(ha, N16M, 4);
    bench_fill_quarters(hb, N16M, 5);
    int64_t shape[1] = {N16M};
    inplace_state ts = {.a = kiln_from_data(ctx, KILN_F32, 1, shape, ha),
                        .b = kiln_from_data(ctx, KILN_F32, 1, shape, hb)};
    kiln_case tc = {.ctx = ctx, .build = inplace_build, .user = &ts};
    kiln_tensor *out = NULL;
    twin_reference(r, &twin, ts.a && ts.b && kiln_measure(&twin, &tc, &out), "out-of-place twin");
    inplace_state s = ts;
    s.in_place = true;
    kiln_case c = {.ctx = ctx, .build = inplace_build, .user = &s};
    /* The first a += b is the twin's a + b (hash-consed, realized): a copy of it. It runs
     * outside the timing, so that the repetitions are the loop's adds. */
    kiln_tensor *first = inplace_build(&s, 0);
    if (!first || kiln_realize(first) != KILN_OK)
        row_note(r, "the first in-place add failed");
    bool kiln_ok = kiln_measure(r, &c, &out) && kiln_read_floats(r, ctx, out, got, N16M);
    if (kiln_ok && strcmp(r->status, "ok") == 0) {
        for (size_t i = 0; i < N16M; i++)
            want[i] = ha[i] + (float)s.adds * hb[i];
        char msg[160];
        if (!compare(got, want, N16M, 0, 0, "KILN WRONG vs host", msg, sizeof msg))
            row_note(r, msg);
    }
    (void)kiln_scope_end(ctx, 0, NULL); /* the in-place side's (a itself is outside it) */
    (void)kiln_scope_end(ctx, 0, NULL); /* the twin's result */
    paired_twin(r, &c, &tc);
    numpy_row(id, "a += b 16M f32 in place vs numpy", r->kiln_ms, r->work,
              "a=np.random.rand(n).astype(np.float32);b=a.copy()", "np.add(a,b,out=a)");
done:
    kiln_close(ctx);
    free(ha);
    free(hb);
    free(want);
    free(got);
}

static void case_ew_bcast(void) {
    const char *id = "ew_bcast", *name = "(4096,4096)+(4096,1) f32";
    if (!selected(id, name))
        return;
    row *r = row_new(id, name, "glsl vec4x4", 2.0 * 4 * N16M + 4.0 * SIDE, UNIT_GBS);
    row_target(r, TARGET_REF);
    float *ha = alloc_floats(N16M), *hb = alloc_floats(SIDE);
    float *want = alloc_floats(N16M), *got = alloc_floats(N16M), *refo = alloc_floats(N16M);
    kiln_context *ctx = kiln_open(r);
    if (!ha || !hb || !want || !got || !refo || !ctx)
        goto done;
    bench_fill_quarters(ha, N16M, 4);
    bench_fill_quarters(hb, SIDE, 5);
    for (size_t i = 0; i < N16M; i++)
        want[i] = ha[i] + hb[i / SIDE];
    ew_state s = {.ctx = ctx, .host_c = hb, .ndim = 2, .shape_c = {SIDE, 1}, .broadcast = true};
    s.a = shared_input(ctx, ha, 2, (int64_t[]){SIDE, SIDE});
    kiln_case c = {.ctx = ctx, .prepare = ew_prepare, .build = ew_build, .user = &s};
    kiln_tensor *out = NULL;
    reserve_output(ctx, N16M); /* the references' results: Kiln storage */
    bool kiln_ok = kiln_measure(r, &c, &out) && kiln_read_floats(r, ctx, out, got, N16M);

    vkd_buffer *bo = ref_buffer(NULL, N16M), *ba = ref_buffer(ha, N16M), *bb = ref_buffer(hb, SIDE);
    ref_variant v[MAX_VARIANTS];
    int nv = 0;
    if (bo && ba && bb)
        nv = ew_variants("ew_bcast",
                         (ref_dispatch){.buffers = {bo, ba, bb},
                                        .binding_count = 3,
                                        .push = {N16M / 4, SIDE / 4},
                                        .push_size = 8},
                         v);
    char octets[32];
    static const uint32_t pers[] = {1, 4};
    for (uint32_t i = 0; bo && ba && bb && i < 2; i++) {
        char vname[24];
        if (!vector_form("ew_bcast", 2, octets, sizeof octets))
            break;
        snprintf(vname, sizeof vname, "octets x%u", pers[i]);
        v[nv++] = variant1(vname, ref_pipeline(octets, 3, 8, &pers[i], 1),
                           (ref_dispatch){.buffers = {bo, ba, bb},
                                          .binding_count = 3,
                                          .push = {N16M / 8, SIDE / 8},
                                          .push_size = 8,
                                          .groups = {N16M / 8 / pers[i] / 64, 1, 1}});
    }
    ref_variant best;
    bool ref_ok = ref_best(r, v, nv, bo, refo, N16M, want, 0, 0, &best);
    check_outputs(r, kiln_ok ? got : NULL, ref_ok ? refo : NULL, want, N16M, 0, 0);
    paired(r, &c, &best);
    ref_buffer_destroy(bo);
    ref_buffer_destroy(ba);
    ref_buffer_destroy(bb);
done:
    kiln_close(ctx);
    free(ha);
    free(hb);
    free(want);
    free(got);
    free(refo);
}

/* ---- reductions over the (4096, 4096) data --------------------------------------------- */

typedef enum red_kind {
    RED_SUM_ALL,  /* sum over 16M (a flat view) */
    RED_SUM_ROWS, /* sum over the last axis */
    RED_MAX_COLS, /* max over axis 0 */
    RED_MEAN_COLS,
    RED_SUM_T_ROWS, /* sum over the last axis of the transposed view */
} red_kind;

typedef struct red_state {
    kiln_context *ctx;
    const float *host;
    kiln_tensor *x;
    red_kind kind;
} red_state;

static bool red_prepare(void *user, int rep) {
    red_state *s = user;
    (void)rep;
    if (s->x)
        return true;
    s->x = shared_input(s->ctx, s->host, 2, (int64_t[]){SIDE, SIDE});
    return s->x != NULL;
}

static kiln_tensor *red_build(void *user, int rep) {
    red_state *s = user;
    (void)rep;
    switch (s->kind) {
    case RED_SUM_ALL:
        return kiln_sum(kiln_reshape(s->x, 1, (int64_t[]){N16M}), 0, NULL, false);
    case RED_SUM_ROWS:
        return kiln_sum(s->x, 1, (int32_t[]){-1}, false);
    case RED_MAX_COLS:
        return kiln_max(s->x, 1, (int32_t[]){0}, false);
    case RED_MEAN_COLS:
        return kiln_mean(s->x, 1, (int32_t[]){0}, false);
    case RED_SUM_T_ROWS:
        return kiln_sum(kiln_transpose(s->x, 0, 1), 1, (int32_t[]){-1}, false);
    }
    return NULL;
}

/* Host expectations (exact: the data are multiples of 1/4). */
static void red_host(red_kind kind, const float *x, float *out) {
    if (kind == RED_SUM_ALL) {
        double s = 0;
        for (size_t i = 0; i < N16M; i++)
            s += x[i];
        out[0] = (float)s;
        return;
    }
    if (kind == RED_SUM_ROWS) {
        for (size_t r = 0; r < SIDE; r++) {
            double s = 0;
            for (size_t j = 0; j < SIDE; j++)
                s += x[r * SIDE + j];
            out[r] = (float)s;
        }
        return;
    }
    for (size_t j = 0; j < SIDE; j++)
        out[j] = kind == RED_MAX_COLS ? x[j] : 0.0f;
    for (size_t r = kind == RED_MAX_COLS ? 1 : 0; r < SIDE; r++) {
        for (size_t j = 0; j < SIDE; j++)
            out[j] =
                kind == RED_MAX_COLS ? fmaxf(out[j], x[r * SIDE + j]) : out[j] + x[r * SIDE + j];
    }
    if (kind == RED_MEAN_COLS) {
        for (size_t j = 0; j < SIDE; j++)
            out[j] *= 1.0f / SIDE;
    }
}

enum { MAX_STRIPS = 32 };

/* Column reductions in two stages: col_strips (CV vec4 per invocation, strips of rows) into
 * partial, then col_reduce over the strips. */
static ref_variant col_strips_variant(uint32_t op, uint32_t cv, uint32_t strips, float scale,
                                      int pr, vkd_buffer *x, vkd_buffer *out, vkd_buffer *partial) {
    ref_variant v = {.count = 2};
    char strips_name[32], reduce_name[32];
    if (!vector_form("col_strips", pr, strips_name, sizeof strips_name) ||
        !vector_form("col_reduce", pr ? 1 : 0, reduce_name, sizeof reduce_name))
        return (ref_variant){.count = 0};
    snprintf(v.name, sizeof v.name, "%sstrips %ux%u", form_prefix(pr), strips, cv);
    v.pipes[0] = ref_pipeline(strips_name, 2, 8, (const uint32_t[]){op, cv}, 2);
    v.pipes[1] = ref_pipeline(reduce_name, 2, 12, &op, 1);
    if (!v.pipes[0] || !v.pipes[1])
        v.count = 0;
    v.d[0] = (ref_dispatch){.pipe = v.pipes[0],
                            .buffers = {partial, x},
                            .binding_count = 2,
                            .push = {SIDE / strips, SIDE / 4},
                            .push_size = 8,
                            .groups = {(SIDE / 4 / cv + 63) / 64, strips, 1}};
    v.d[1] = (ref_dispatch){.pipe = v.pipes[1],
                            .buffers = {out, partial},
                            .binding_count = 2,
                            .push = {strips, SIDE / 4},
                            .push_size = 12,
                            .groups = {SIDE / 4 / 64, 1, 1}};
    memcpy(&v.d[1].push[2], &scale, 4);
    return v;
}

/* The reference variants of a reduction; returns their count. partial holds
 * MAX_STRIPS * SIDE floats. */
static int red_ref_variants(red_kind kind, ref_variant *v, vkd_buffer *x, vkd_buffer *out,
                            vkd_buffer *partial) {
    int nv = 0;
    char shader[32];
    if (kind == RED_SUM_ALL) {
        /* vec4, pairs and octets (the second stage reads the partial sums as vec4) */
        for (uint32_t i = 0; i < 9 && vector_form("sum_blocks", i / 3, shader, sizeof shader);
             i++) {
            uint32_t groups = 16u << (i % 3), per = i / 3 == 2 ? 8 : 4;
            vkd_pipeline *p = ref_pipeline(shader, 2, 4, NULL, 0);
            vkd_pipeline *second = i / 3 == 2 ? ref_pipeline("sum_blocks", 2, 4, NULL, 0) : NULL;
            v[nv] = (ref_variant){.pipes = {p, second}, .count = p ? 2 : 0};
            snprintf(v[nv].name, sizeof v[nv].name, "%sblocks %u wg", form_prefix((int)(i / 3)),
                     groups);
            v[nv].d[0] = (ref_dispatch){.pipe = p,
                                        .buffers = {partial, x},
                                        .binding_count = 2,
                                        .push = {N16M / per},
                                        .push_size = 4,
                                        .groups = {groups, 1, 1}};
            v[nv].d[1] = (ref_dispatch){.pipe = second ? second : p,
                                        .buffers = {out, partial},
                                        .binding_count = 2,
                                        .push = {groups / 4},
                                        .push_size = 4,
                                        .groups = {1, 1, 1}};
            nv++;
        }
        return nv;
    }
    if (kind == RED_SUM_ROWS) {
        static const char *const names[3] = {"row/invocation", "pairs row/invocation",
                                             "octets row/invocation"};
        for (int pr = 0; pr < 3 && vector_form("sum_rows", pr, shader, sizeof shader); pr++)
            v[nv++] = variant1(names[pr], ref_pipeline(shader, 2, 8, NULL, 0),
                               (ref_dispatch){.buffers = {out, x},
                                              .binding_count = 2,
                                              .push = {SIDE, SIDE / (pr == 2 ? 8 : 4)},
                                              .push_size = 8,
                                              .groups = {SIDE / 64, 1, 1}});
        return nv;
    }
    /* Over axis 0 (RED_SUM_T_ROWS: the column sums of the contiguous data). */
    uint32_t op = kind == RED_MAX_COLS ? 1 : 0;
    float scale = kind == RED_MEAN_COLS ? 1.0f / SIDE : 1.0f;
    for (int pr = 0; pr < 2 && vector_form("col_reduce", pr, shader, sizeof shader); pr++) {
        v[nv] = variant1(pr ? "pairs column" : "vec4 column", ref_pipeline(shader, 2, 12, &op, 1),
                         (ref_dispatch){.buffers = {out, x},
                                        .binding_count = 2,
                                        .push = {SIDE, SIDE / 4},
                                        .push_size = 12,
                                        .groups = {SIDE / 4 / 64, 1, 1}});
        memcpy(&v[nv++].d[0].push[2], &scale, 4);
        v[nv++] = col_strips_variant(op, 4, 16, scale, pr, x, out, partial);
        v[nv++] = col_strips_variant(op, 16, 32, scale, pr, x, out, partial);
    }
    if (g.have_int64)
        v[nv++] = col_strips_variant(op, 4, 16, scale, 2, x, out, partial);
    return nv;
}

static void case_reduction(red_kind kind, const char *id, const char *name) {
    if (!selected(id, name))
        return;
    size_t n_out = kind == RED_SUM_ALL ? 1 : SIDE;
    row *r = row_new(id, name, "glsl blocked", 4.0 * N16M + 4.0 * (double)n_out, UNIT_GBS);
    row_target(r, TARGET_REF);
    float *hx = alloc_floats(N16M), *want = alloc_floats(SIDE), *got = alloc_floats(SIDE),
          *refo = alloc_floats(SIDE);
    kiln_context *ctx = kiln_open(r);
    if (!hx || !want || !got || !refo || !ctx)
        goto done;
    bench_fill_quarters(hx, N16M, 6);
    red_host(kind, hx, want);
    red_state s = {.ctx = ctx, .host = hx, .kind = kind};
    kiln_case c = {.ctx = ctx, .prepare = red_prepare, .build = red_build, .user = &s};
    kiln_tensor *out = NULL;
    bool kiln_ok = kiln_measure(r, &c, &out) && kiln_read_floats(r, ctx, out, got, n_out);

    vkd_buffer *bx = ref_buffer(hx, N16M), *bo = ref_buffer(NULL, SIDE),
               *bp = ref_buffer(NULL, MAX_STRIPS * SIDE);
    ref_variant v[MAX_VARIANTS];
    int nv = bx && bo && bp ? red_ref_variants(kind, v, bx, bo, bp) : 0;
    ref_variant best;
    bool ref_ok = ref_best(r, v, nv, bo, refo, n_out, want, 0, 0, &best);
    check_outputs(r, kiln_ok ? got : NULL, ref_ok ? refo : NULL, want, n_out, 0, 0);
    paired(r, &c, &best);
    ref_buffer_destroy(bx);
    ref_buffer_destroy(bo);
    ref_buffer_destroy(bp);
    if (kind == RED_SUM_ALL)
        numpy_row(id, "sum 16M f32 vs numpy", r->kiln_ms, r->work,
                  "a=np.random.rand(n).astype(np.float32)", "a.sum()");
done:
    kiln_close(ctx);
    free(hx);
    free(want);
    free(got);
    free(refo);
}

/* ---- softmax ----------------------------------------------------------------------------------
 */

enum { SM_ROWS = 4096, SM_COLS = 1024 };

static void softmax_host(const float *x, float *out) {
    for (size_t r = 0; r < SM_ROWS; r++) {
        const float *row_in = x + r * SM_COLS;
        float m = row_in[0];
        for (size_t j = 1; j < SM_COLS; j++)
            m = fmaxf(m, row_in[j]);
        double s = 0;
        for (size_t j = 0; j < SM_COLS; j++)
            s += exp((double)row_in[j] - m);
        for (size_t j = 0; j < SM_COLS; j++)
            out[r * SM_COLS + j] = (float)(exp((double)row_in[j] - m) / s);
    }
}

typedef struct sm_state {
    kiln_context *ctx;
    const float *host;
    kiln_tensor *x;
} sm_state;

static bool sm_prepare(void *user, int rep) {
    sm_state *s = user;
    (void)rep;
    if (s->x)
        return true;
    s->x = shared_input(s->ctx, s->host, 2, (int64_t[]){SM_ROWS, SM_COLS});
    return s->x != NULL;
}

static kiln_tensor *sm_build(void *user, int rep) {
    (void)rep;
    return kiln_softmax(((sm_state *)user)->x, -1);
}

static void case_softmax(void) {
    const char *id = "softmax", *name = "softmax(4096,1024) last axis";
    if (!selected(id, name))
        return;
    enum { N = SM_ROWS * SM_COLS };
    row *r = row_new(id, name, "glsl fused", 2.0 * 4 * N, UNIT_GBS);
    row_target(r, TARGET_REF);
    float *hx = alloc_floats(N), *want = alloc_floats(N), *got = alloc_floats(N),
          *refo = alloc_floats(N);
    kiln_context *ctx = kiln_open(r);
    if (!hx || !want || !got || !refo || !ctx)
        goto done;
    bench_fill_quarters(hx, N, 7);
    softmax_host(hx, want);
    sm_state s = {.ctx = ctx, .host = hx};
    kiln_case c = {.ctx = ctx, .prepare = sm_prepare, .build = sm_build, .user = &s};
    kiln_tensor *out = NULL;
    reserve_output(ctx, N); /* the references' results: Kiln storage */
    bool kiln_ok = kiln_measure(r, &c, &out) && kiln_read_floats(r, ctx, out, got, N);

    vkd_buffer *bo = ref_buffer(NULL, N), *bx = ref_buffer(hx, N);
    ref_variant v[5];
    int nv = 0;
    char shader[32];
    if (bo && bx && vector_form("softmax_rowinv", 2, shader, sizeof shader))
        v[nv++] = variant1("octets row/invocation", ref_pipeline(shader, 2, 8, NULL, 0),
                           (ref_dispatch){.buffers = {bo, bx},
                                          .binding_count = 2,
                                          .push = {SM_ROWS, SM_COLS / 8},
                                          .push_size = 8,
                                          .groups = {SM_ROWS / 64, 1, 1}});
    for (int pr = 0; pr < 2 && bo && bx; pr++) {
        if (!vector_form("softmax_rowinv", pr, shader, sizeof shader))
            break;
        v[nv++] = variant1(pr ? "pairs row/invocation" : "row/invocation",
                           ref_pipeline(shader, 2, 8, NULL, 0),
                           (ref_dispatch){.buffers = {bo, bx},
                                          .binding_count = 2,
                                          .push = {SM_ROWS, SM_COLS / 4},
                                          .push_size = 8,
                                          .groups = {SM_ROWS / 64, 1, 1}});
        vector_form("softmax_rows", pr, shader, sizeof shader);
        if (g.have_subgroup_arith) /* one workgroup per row, subgroup + shared reductions */
            v[nv++] = variant1(
                pr ? "pairs row/workgroup" : "row/workgroup",
                ref_pipeline(shader, 2, 0, (const uint32_t[]){SM_COLS / 256}, 1),
                (ref_dispatch){.buffers = {bo, bx}, .binding_count = 2, .groups = {SM_ROWS, 1, 1}});
    }
    ref_variant best;
    bool ref_ok = ref_best(r, v, nv, bo, refo, N, want, 1e-5, 1e-8, &best);
    check_outputs(r, kiln_ok ? got : NULL, ref_ok ? refo : NULL, want, N, 1e-5, 1e-8);
    paired(r, &c, &best);
    ref_buffer_destroy(bo);
    ref_buffer_destroy(bx);
done:
    kiln_close(ctx);
    free(hx);
    free(want);
    free(got);
    free(refo);
}

/* ---- matmul -----------------------------------------------------------------------------------
 */

typedef struct mm_state {
    kiln_context *ctx;
    const float *host_a;
    kiln_tensor *a, *b;
    int64_t n;
} mm_state;

static bool mm_prepare(void *user, int rep) {
    mm_state *s = user;
    (void)rep;
    if (s->a)
        return true;
    s->a = shared_input(s->ctx, s->host_a, 2, (int64_t[]){s->n, s->n});
    return s->a != NULL;
}

static kiln_tensor *mm_build(void *user, int rep) {
    mm_state *s = user;
    (void)rep;
    return kiln_matmul(s->a, s->b);
}

/* Checks 256 entries of c against the host (the full product is the device's job). */
static void mm_check_host(row *r, const float *c, const float *a, const float *b, size_t n) {
    for (size_t t = 0; t < 256; t++) {
        size_t i = (t * 2654435761u) % n, j = (t * 40503u + 17) % n;
        double s = 0;
        for (size_t k = 0; k < n; k++)
            s += (double)a[i * n + k] * b[k * n + j];
        if ((float)s != c[i * n + j]) {
            char msg[120];
            snprintf(msg, sizeof msg, "WRONG vs host: C[%zu,%zu] = %.9g, host %.9g", i, j,
                     (double)c[i * n + j], s);
            row_note(r, msg);
            return;
        }
    }
}

static void case_matmul(uint32_t n) {
    char id[32], name[56];
    snprintf(id, sizeof id, "matmul_%u", n);
    snprintf(name, sizeof name, "matmul %u^3 f32", n);
    if (!selected(id, name))
        return;
    row *r = row_new(id, name, "glsl 8/thread", 2.0 * n * n * n, UNIT_GFLOPS);
    row_target(r, TARGET_REF);
    if (n > 1024 && g.quick) {
        row_note(r, "skipped (KILN_BENCH_QUICK=1)");
        return;
    }
    size_t nn = (size_t)n * n;
    float *ha = alloc_floats(nn), *hb = alloc_floats(nn), *got = alloc_floats(nn),
          *refo = alloc_floats(nn);
    kiln_context *ctx = kiln_open(r);
    int saved_reps = g.reps;
    if (!ha || !hb || !got || !refo || !ctx)
        goto done;
    if (n > 1024 && g.reps > 2)
        g.reps = 2; /* seconds per repetition */
    bench_fill_quarters(ha, nn, 8);
    bench_fill_quarters(hb, nn, 9);
    mm_state s = {.ctx = ctx, .host_a = ha, .n = n};
    s.b = shared_input(ctx, hb, 2, (int64_t[]){n, n});
    kiln_case c = {.ctx = ctx, .prepare = mm_prepare, .build = mm_build, .user = &s};
    kiln_tensor *out = NULL;
    reserve_output(ctx, nn); /* the references' results: Kiln storage */
    /* Kiln's 2048^3 is one dispatch (about 1 s with register tiles; untiled code took 50 s,
     * near Kiln's 60 s fence timeout), so a run predicts it from 1024^3 (18x: 8x the flops and
     * worse cache behaviour) and skips it past 30 s, or when 1024^3 was not measured;
     * KILN_BENCH_FORCE_BIG=1 runs it. */
    double predicted_s = 18.0 * g.matmul_1024_ms / 1e3;
    bool kiln_ok = false;
    if (n > 1024 && !(predicted_s < 30) && !getenv("KILN_BENCH_FORCE_BIG")) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "Kiln not run: predicted %.0f s from 1024^3 (60 s is Kiln's fence timeout; "
                 "KILN_BENCH_FORCE_BIG=1 runs it)",
                 predicted_s);
        row_note(r, msg);
    } else {
        kiln_ok = kiln_measure(r, &c, &out) && kiln_read_floats(r, ctx, out, got, nn);
    }
    if (n == 1024)
        g.matmul_1024_ms = r->kiln_ms;

    vkd_buffer *bc = ref_buffer(NULL, nn), *ba = ref_buffer(ha, nn), *bb = ref_buffer(hb, nn);
    /* A and B as uniform texel buffers for the texel variants (NULL: none) */
    const vkd_buffer *ta = texel_buffer(ba), *tb = texel_buffer(bb);
    bool texels = ta && tb;
    int pr = g.have_int64 ? 1 : 0; /* the texel variants' stores: pairs where they can */
    ref_variant v[MAX_VARIANTS];
    int nv = 0;
    /* TM rows x 8 columns per invocation, workgroups of 64x1 or 8x8 invocations; i 8..11: the
     * texel variants (A and B read as texels, TEXELS in sgemm.comp). */
    static const uint32_t shapes[][3] = {{2, 64, 1}, {4, 64, 1}, {4, 8, 8}, {8, 8, 8}};
    char shader[40];
    for (uint32_t i = 0; bc && ba && bb && i < 12; i++) {
        const uint32_t *sh = shapes[i % 4];
        char vname[24];
        bool tx = i >= 8;
        if (tx && !texels)
            break;
        if (!vector_form("sgemm", tx ? pr : (int)(i / 4), shader, sizeof shader))
            continue;
        if (tx)
            snprintf(shader + strlen(shader), sizeof shader - strlen(shader), "+texels");
        snprintf(vname, sizeof vname, "%s%ux8/thr wg%ux%u",
                 tx ? "texels " : form_prefix((int)(i / 4)), sh[0], sh[1], sh[2]);
        /* bindings 1 (A) and 2 (B) are read */
        v[nv++] = variant1(vname, ref_pipeline_texels(shader, 3, 12, sh, 3, tx ? 6u : 0u),
                           (ref_dispatch){.buffers = {bc, tx ? ta : ba, tx ? tb : bb},
                                          .binding_count = 3,
                                          .push = {n, n, n},
                                          .push_size = 12,
                                          .groups = {n / 8 / sh[1], n / sh[0] / sh[2], 1}});
    }
    /* 8x8 per invocation, the row block's A shared within a subgroup of 8 (workgroup rows). */
    const vkd_caps *caps = g.dev ? vkd_device_caps(g.dev) : NULL;
    if (caps && caps->subgroup_size == 8 &&
        (caps->subgroup_operations & VK_SUBGROUP_FEATURE_BALLOT_BIT)) {
        static const uint32_t wgy[] = {8, 32};
        /* i 6, 7: the texel variants, C stored as octets where the device can */
        for (uint32_t i = 0; bc && ba && bb && i < 8; i++) {
            char vname[24];
            bool tx = i >= 6;
            if (tx && !texels)
                break;
            if (!vector_form("sgemm_bcast", tx ? 2 * pr : (int)(i / 2), shader, sizeof shader))
                continue;
            if (tx)
                snprintf(shader + strlen(shader), sizeof shader - strlen(shader), "+texels");
            snprintf(vname, sizeof vname, "%s8x8 bcast wg8x%u",
                     tx ? "texels " : form_prefix((int)(i / 2)), wgy[i % 2]);
            v[nv++] = variant1(vname,
                               ref_pipeline_texels(shader, 3, 12, (const uint32_t[]){0, wgy[i % 2]},
                                                   2, tx ? 6u : 0u),
                               (ref_dispatch){.buffers = {bc, tx ? ta : ba, tx ? tb : bb},
                                              .binding_count = 3,
                                              .push = {n, n, n},
                                              .push_size = 12,
                                              .groups = {n / 64, n / 8 / wgy[i % 2], 1}});
        }
    }
    ref_variant best;
    bool ref_ok = ref_best(r, v, nv, bc, refo, nn, NULL, 0, 0, &best);
    check_outputs(r, kiln_ok ? got : NULL, ref_ok ? refo : NULL, NULL, nn, 0, 0);
    if (ref_ok || kiln_ok)
        mm_check_host(r, ref_ok ? refo : got, ha, hb, n);
    if (kiln_ok)
        paired(r, &c, &best);
    else
        variant_finish(&best);
    ref_buffer_destroy(bc);
    ref_buffer_destroy(ba);
    ref_buffer_destroy(bb);
done:
    g.reps = saved_reps;
    kiln_close(ctx);
    free(ha);
    free(hb);
    free(got);
    free(refo);
}

/* ---- batched matmul -----------------------------------------------------------------------
 *
 * 98 products (32 x 128) @ (128 x 144), each with its own right operand, against the same work
 * as one product (3136 x 128) @ (128 x 144) (issue 25: a batch of small products no slower per
 * flop than one product of the same total size), both Kiln, paired in one context. A second
 * row runs the same batched kernel over 2 distinct right operands (a (49, 2) batch whose first
 * dim has stride 0): the code is the batched kernel's, the right operands' memory the flat
 * twin's (147 KB instead of 7.2 MB), which separates the cost of the code from that of reading
 * 98 right operands from memory. */

typedef struct bmm_state {
    kiln_tensor *a, *b;
} bmm_state;

static kiln_tensor *bmm_build(void *user, int rep) {
    bmm_state *s = user;
    (void)rep;
    return kiln_matmul(s->a, s->b);
}

/* Checks 256 entries of c (batch, m, n) = a (batch, m, k) @ b (batch % distinct, k, n) against
 * the host (every sum of multiples of 1/16 here is exact). */
static void bmm_check_host(row *r, const float *c, const float *a, const float *b, size_t batch,
                           size_t m, size_t k, size_t n, size_t distinct) {
    for (size_t t = 0; t < 256; t++) {
        size_t e = (t * 2654435761u) % (batch * m * n), bt = e / (m * n), i = e / n % m, j = e % n;
        const float *bb = b + bt % distinct * k * n;
        double s = 0;
        for (size_t q = 0; q < k; q++)
            s += (double)a[(bt * m + i) * k + q] * bb[q * n + j];
        if ((float)s != c[e]) {
            char msg[120];
            snprintf(msg, sizeof msg, "WRONG vs host: C[%zu,%zu,%zu] = %.9g, host %.9g", bt, i, j,
                     (double)c[e], s);
            row_note(r, msg);
            return;
        }
    }
}

/* distinct: the batch's right operands (98: each its own; 2: a (49, 2) batch over two). */
static void batched_matmul_row(const char *id, const char *name, size_t distinct) {
    enum { BATCH = 98, M = 32, K = 128, N = 144 };
    if (!selected(id, name))
        return;
    row *r =
        row_new(id, name, "kiln flat (3136x128)@(128x144)", 2.0 * BATCH * M * K * N, UNIT_GFLOPS);
    row_target(r, TARGET_BATCHED);
    row twin = *r;
    size_t na = (size_t)BATCH * M * K, nb = (size_t)BATCH * K * N, nc = (size_t)BATCH * M * N;
    float *ha = alloc_floats(na), *hb = alloc_floats(nb), *got = alloc_floats(nc);
    kiln_context *ctx = kiln_open(r);
    if (!ha || !hb || !got || !ctx)
        goto done;
    bench_fill_quarters(ha, na, 11);
    bench_fill_quarters(hb, nb, 12);
    /* The twin's right operand is the batch's first: the same values, read by every row. */
    bmm_state ts = {.a = kiln_from_data(ctx, KILN_F32, 2, (const int64_t[]){BATCH * M, K}, ha),
                    .b = kiln_from_data(ctx, KILN_F32, 2, (const int64_t[]){K, N}, hb)};
    bmm_state s;
    if (distinct == BATCH) {
        s.a = kiln_from_data(ctx, KILN_F32, 3, (const int64_t[]){BATCH, M, K}, ha);
        s.b = kiln_from_data(ctx, KILN_F32, 3, (const int64_t[]){BATCH, K, N}, hb);
    } else {
        int64_t outer = BATCH / (int64_t)distinct;
        s.a =
            kiln_from_data(ctx, KILN_F32, 4, (const int64_t[]){outer, (int64_t)distinct, M, K}, ha);
        kiln_tensor *two =
            kiln_from_data(ctx, KILN_F32, 3, (const int64_t[]){(int64_t)distinct, K, N}, hb);
        s.b = kiln_expand(kiln_unsqueeze(two, 0), 4,
                          (const int64_t[]){outer, (int64_t)distinct, K, N});
    }
    kiln_case tc = {.ctx = ctx, .build = bmm_build, .user = &ts};
    kiln_case c = {.ctx = ctx, .build = bmm_build, .user = &s};
    kiln_tensor *out = NULL;
    if (kiln_measure(&twin, &tc, &out) && kiln_read_floats(&twin, ctx, out, got, nc))
        bmm_check_host(&twin, got, ha, hb, 1, BATCH * M, K, N, 1);
    twin_reference(r, &twin, true, "flat twin");
    if (kiln_measure(r, &c, &out) && kiln_read_floats(r, ctx, out, got, nc))
        bmm_check_host(r, got, ha, hb, BATCH, M, K, N, distinct);
    (void)kiln_scope_end(ctx, 0, NULL); /* the batched result */
    (void)kiln_scope_end(ctx, 0, NULL); /* the twin's */
    paired_twin(r, &c, &tc);
done:
    kiln_close(ctx);
    free(ha);
    free(hb);
    free(got);
}

static void case_batched_matmul(void) {
    batched_matmul_row("batched_matmul", "batched matmul 98x(32x128)@(128x144)", 98);
    batched_matmul_row("batched_matmul_2", "batched matmul, 2 distinct right operands", 2);
}

/* ---- strided reads ----------------------------------------------------------------------------
 */

/* sum(x.T, -1) against sum(x, -1), both Kiln; the transposed result checked against the GLSL
 * column sum and the host. */
/* What a shader author gets for the strided read on this device: the best hand-written
 * column sum (col, measured for row rg) against the best hand-written row sum of the same
 * data, paired (the "kiln" column of this row holds the column sum's time). The performance
 * issue accepts a missed target that no hand-written variant reaches either. */
static void hand_written_twins(const char *id, const row *rg, const ref_variant *col,
                               const float *hx, vkd_buffer *bx, vkd_buffer *bo, vkd_buffer *bp) {
    row *rh = row_new(id, "glsl column sum vs glsl row sum", "glsl", rg->work, UNIT_GBS);
    float *rows = alloc_floats(SIDE), *refo = alloc_floats(SIDE);
    if (!rh || !rows || !refo) {
        free(rows);
        free(refo);
        return;
    }
    for (size_t i = 0; i < SIDE; i++) {
        double sum = 0;
        for (size_t j = 0; j < SIDE; j++)
            sum += hx[i * SIDE + j];
        rows[i] = (float)sum;
    }
    rh->kiln_ms = rg->ref_ms;
    rh->kiln_first_ms = rg->ref_first_ms;
    ref_variant v[MAX_VARIANTS], best;
    int nv = red_ref_variants(RED_SUM_ROWS, v, bx, bo, bp);
    if (ref_best(rh, v, nv, bo, refo, SIDE, rows, 0, 0, &best)) {
        ref_side cs = {.d = col->d, .count = col->count}, rs = {.d = best.d, .count = best.count};
        base_error err = {0};
        if (vkd_batch_create(g.dev, &cs.batch, &err) == KILN_OK &&
            vkd_batch_create(g.dev, &rs.batch, &err) == KILN_OK)
            pair_run(rh, (side){ref_once, &cs}, (side){ref_once, &rs}, pairs_for(rh->kiln_ms));
        vkd_batch_destroy(cs.batch);
        vkd_batch_destroy(rs.batch);
        variant_finish(&best);
    }
    free(rows);
    free(refo);
}

static void case_strided_sum(void) {
    const char *id = "strided_sum", *name = "sum(x.T,-1) (4096,4096)";
    if (!selected(id, name))
        return;
    row *r = row_new(id, name, "kiln contiguous", 4.0 * N16M + 4.0 * SIDE, UNIT_GBS);
    row_target(r, TARGET_STRIDED);
    row twin = *r;
    float *hx = alloc_floats(N16M), *want = alloc_floats(SIDE), *got = alloc_floats(SIDE),
          *refo = alloc_floats(SIDE);
    kiln_context *ctx = kiln_open(r);
    if (!hx || !want || !got || !refo || !ctx)
        goto done;
    bench_fill_quarters(hx, N16M, 10);
    /* The column sums (the rows of x.T). */
    for (size_t j = 0; j < SIDE; j++) {
        double sum = 0;
        for (size_t i = 0; i < SIDE; i++)
            sum += hx[i * SIDE + j];
        want[j] = (float)sum;
    }
    red_state ts = {.ctx = ctx, .host = hx, .kind = RED_SUM_ROWS};
    kiln_case tc = {.ctx = ctx, .prepare = red_prepare, .build = red_build, .user = &ts};
    kiln_tensor *out = NULL;
    twin_reference(r, &twin, kiln_measure(&twin, &tc, &out), "contiguous twin");
    red_state s = ts; /* the same input tensor x, read through x.T */
    s.kind = RED_SUM_T_ROWS;
    kiln_case c = {.ctx = ctx, .prepare = red_prepare, .build = red_build, .user = &s};
    bool kiln_ok = kiln_measure(r, &c, &out) && kiln_read_floats(r, ctx, out, got, SIDE);

    if (strcmp(r->status, "ok") == 0) {
        char msg[160];
        if (kiln_ok && !compare(got, want, SIDE, 0, 0, "KILN WRONG vs host", msg, sizeof msg))
            row_note(r, msg);
    }
    /* The same Kiln figure against the best hand-written column sum. */
    row *rg = row_new(id, "sum(x.T,-1) vs glsl column sum", "glsl", r->work, UNIT_GBS);
    vkd_buffer *bx = ref_buffer(hx, N16M), *bo = ref_buffer(NULL, SIDE),
               *bp = ref_buffer(NULL, MAX_STRIPS * SIDE);
    if (rg) {
        rg->kiln_ms = r->kiln_ms;
        rg->kiln_first_ms = r->kiln_first_ms;
        rg->kiln_dev_ms = r->kiln_dev_ms;
        rg->dispatches = r->dispatches;
        ref_variant v[MAX_VARIANTS];
        int nv = bx && bo && bp ? red_ref_variants(RED_SUM_T_ROWS, v, bx, bo, bp) : 0;
        ref_variant best;
        bool ref_ok = ref_best(rg, v, nv, bo, refo, SIDE, want, 0, 0, &best);
        check_outputs(rg, kiln_ok ? got : NULL, ref_ok ? refo : NULL, want, SIDE, 0, 0);
        paired_ref(rg, &c, best.d, best.count); /* ends the scope of x.T's result */
        if (ref_ok)
            hand_written_twins(id, rg, &best, hx, bx, bo, bp);
        variant_finish(&best);
    } else {
        (void)kiln_scope_end(ctx, 0, NULL);
    }
    (void)kiln_scope_end(ctx, 0, NULL); /* the twin's result */
    paired_twin(r, &c, &tc);
    ref_buffer_destroy(bx);
    ref_buffer_destroy(bo);
    ref_buffer_destroy(bp);
done:
    kiln_close(ctx);
    free(hx);
    free(want);
    free(got);
    free(refo);
}

typedef struct copy_state {
    kiln_tensor *dst, *src;
} copy_state;

static kiln_tensor *copy_build(void *user, int rep) {
    copy_state *s = user;
    (void)rep;
    return kiln_copy_(s->dst, s->src) == KILN_OK ? s->dst : NULL;
}

/* Two threads each copying half. */
typedef struct memcpy_job {
    char *dst;
    const char *src;
    size_t bytes;
} memcpy_job;

static void *memcpy_thread(void *p) {
    memcpy_job *j = p;
    memcpy(j->dst, j->src, j->bytes);
    return NULL;
}

static double memcpy_2threads(char *dst, const char *src, size_t bytes) {
    size_t half = bytes / 2;
    memcpy_job jobs[2] = {{dst, src, half}, {dst + half, src + half, bytes - half}};
    pthread_t t;
    double t0 = bench_now_ms();
    bool threaded = pthread_create(&t, NULL, memcpy_thread, &jobs[1]) == 0;
    memcpy_thread(&jobs[0]);
    if (threaded)
        pthread_join(t, NULL);
    else
        memcpy_thread(&jobs[1]);
    return bench_now_ms() - t0;
}

static void memcpy_row(const char *id, const char *name, double kiln_ms, const float *src,
                       float *dst) {
    row *r = row_new(id, name, "memcpy 2 threads", 2.0 * 4 * N16M, UNIT_GBS);
    if (!r)
        return;
    r->kiln_ms = kiln_ms;
    double times[MAX_REPS];
    memcpy_2threads((char *)dst, (const char *)src, 4 * (size_t)N16M); /* touch the pages */
    for (int i = 0; i < g.reps; i++)
        times[i] = memcpy_2threads((char *)dst, (const char *)src, 4 * (size_t)N16M);
    r->ref_ms = bench_median(times, g.reps);
    if (memcmp(src, dst, 4 * (size_t)N16M) != 0)
        row_note(r, "memcpy copied wrong bytes");
}

/* copy_(dst, x[:, ::-1]) against copy_(dst, x), both Kiln, (4096, 4096). */
static void case_strided_copy(void) {
    const char *id = "strided_copy", *name = "copy x[:,::-1] (4096,4096)";
    if (!selected(id, name))
        return;
    row *r = row_new(id, name, "kiln contiguous", 2.0 * 4 * N16M, UNIT_GBS);
    row_target(r, TARGET_STRIDED);
    row twin = *r;
    float *hx = alloc_floats(N16M), *got = alloc_floats(N16M), *want = alloc_floats(N16M);
    kiln_context *ctx = kiln_open(r);
    if (!hx || !got || !want || !ctx)
        goto done;
    bench_fill_quarters(hx, N16M, 11);
    for (size_t i = 0; i < SIDE; i++) {
        for (size_t j = 0; j < SIDE; j++)
            want[i * SIDE + j] = hx[i * SIDE + SIDE - 1 - j];
    }
    kiln_tensor *x = kiln_from_data(ctx, KILN_F32, 2, (int64_t[]){SIDE, SIDE}, hx);
    copy_state ts = {.dst = kiln_empty(ctx, KILN_F32, 2, (int64_t[]){SIDE, SIDE}), .src = x};
    kiln_case tc = {.ctx = ctx, .build = copy_build, .user = &ts};
    /* The flipped view outside every measurement's scope: it outlives them (paired_twin). */
    copy_state s = {.dst = ts.dst, .src = kiln_slice(x, 1, INT64_MAX, INT64_MIN, -1)};
    kiln_case c = {.ctx = ctx, .build = copy_build, .user = &s};
    kiln_tensor *out = NULL;
    char msg[200];
    if (kiln_measure(&twin, &tc, &out) && kiln_read_floats(&twin, ctx, out, got, N16M) &&
        !compare(got, hx, N16M, 0, 0, "KILN WRONG (contiguous copy)", msg, sizeof msg))
        row_note(r, msg);
    twin_reference(r, &twin, true, "contiguous twin");
    if (kiln_measure(r, &c, &out) && kiln_read_floats(r, ctx, out, got, N16M) &&
        !compare(got, want, N16M, 0, 0, "KILN WRONG vs host", msg, sizeof msg))
        row_note(r, msg);
    if (r->dispatches != 1 || twin.dispatches != 1) {
        snprintf(msg, sizeof msg, "%llu / %llu dispatches per copy (flipped / contiguous)",
                 r->dispatches, twin.dispatches);
        row_note(r, msg);
    }
    (void)kiln_scope_end(ctx, 0, NULL); /* the flipped copy's result, then the twin's */
    (void)kiln_scope_end(ctx, 0, NULL);
    paired_twin(r, &c, &tc);
    memcpy_row("strided_copy", "copy 16M f32 vs host memcpy", twin.kiln_ms, hx, got);
done:
    kiln_close(ctx);
    free(hx);
    free(got);
    free(want);
}

/* ---- convolution ------------------------------------------------------------------------------
 *
 * The second convolution of the training example's CNN (examples/fashion_net.c: x (64, 16, 14,
 * 14), w (32, 16, 3, 3), padding 1, stride 1 -> (64, 32, 14, 14)): Kiln's forward (kiln_conv2d_ex)
 * and its input and weight gradients (kiln_grad of sum(conv(x, w) * dY)) against hand-written
 * implicit-GEMM kernels (shaders/conv2d.glsl, conv2d_wgrad.glsl). Each side does
 * 2 N O C 3 3 H W flops. The data are multiples of 1/4, so every result is exact in f32 (the
 * largest weight gradient is a sum of 12544 multiples of 1/16, below 2^20) and is compared
 * within 1e-6. */

enum { CV_N = 64, CV_C = 16, CV_O = 32, CV_H = 14, CV_W = 14, CV_K = 3 };
enum {
    CV_X = CV_N * CV_C * CV_H * CV_W, /* x and dX */
    CV_Y = CV_N * CV_O * CV_H * CV_W, /* y and dY */
    CV_WN = CV_O * CV_C * CV_K * CV_K,
    CV_MAX_SLICES = 128, /* the weight gradient's first pass: slices of image rows */
};

typedef enum conv_kind { CONV_FWD, CONV_DX, CONV_DW } conv_kind;

typedef struct conv_state {
    conv_kind kind;
    kiln_tensor *x, *w, *dy;
    kiln_tensor *bias; /* CONV_FWD: relu(conv2d(x, w, bias)) where set */
} conv_state;

static kiln_tensor *conv_build(void *user, int rep) {
    conv_state *s = user;
    (void)rep;
    const kiln_conv2d_options same = {.padding = {1, 1}};
    kiln_tensor *y = kiln_conv2d_ex(s->x, s->w, s->bias, &same);
    if (s->kind == CONV_FWD || !y)
        return s->bias ? kiln_relu(y) : y;
    /* d/dx and d/dw of sum(y * dY): the gradients for the output gradient dY. */
    kiln_tensor *loss = kiln_sum(kiln_mul(y, s->dy), 0, NULL, false);
    kiln_tensor *wrt = s->kind == CONV_DX ? s->x : s->w, *grad = NULL;
    if (!loss || kiln_grad(loss, 1, &wrt, &grad) != KILN_OK)
        return NULL;
    return grad;
}

/* The host's result of the case (double sums: exact for these data). */
static void conv_host(conv_kind kind, const float *x, const float *w, const float *dy, float *out) {
    enum { HW = CV_H * CV_W };
    if (kind == CONV_DW) {
        for (int o = 0; o < CV_O; o++) {
            for (int c = 0; c < CV_C; c++) {
                for (int kh = 0; kh < CV_K; kh++) {
                    for (int kw = 0; kw < CV_K; kw++) {
                        double s = 0;
                        for (int n = 0; n < CV_N; n++) {
                            const float *gy = dy + ((size_t)n * CV_O + o) * HW;
                            const float *xi = x + ((size_t)n * CV_C + c) * HW;
                            for (int h = 0; h < CV_H; h++) {
                                int ih = h + kh - 1;
                                for (int ww = 0; ih >= 0 && ih < CV_H && ww < CV_W; ww++) {
                                    int iw = ww + kw - 1;
                                    if (iw >= 0 && iw < CV_W)
                                        s += (double)gy[h * CV_W + ww] * xi[ih * CV_W + iw];
                                }
                            }
                        }
                        out[((o * CV_C + c) * CV_K + kh) * CV_K + kw] = (float)s;
                    }
                }
            }
        }
        return;
    }
    /* Forward: out (N, O, H, W) from x; the input gradient: out (N, C, H, W) from dY, the
     * weight read flipped and transposed. */
    int cin = kind == CONV_FWD ? CV_C : CV_O, cout = kind == CONV_FWD ? CV_O : CV_C;
    const float *in = kind == CONV_FWD ? x : dy;
    for (int n = 0; n < CV_N; n++) {
        for (int co = 0; co < cout; co++) {
            for (int h = 0; h < CV_H; h++) {
                for (int ww = 0; ww < CV_W; ww++) {
                    double s = 0;
                    for (int ci = 0; ci < cin; ci++) {
                        const float *xi = in + ((size_t)n * cin + ci) * HW;
                        for (int kh = 0; kh < CV_K; kh++) {
                            int ih = h + kh - 1;
                            for (int kw = 0; ih >= 0 && ih < CV_H && kw < CV_K; kw++) {
                                int iw = ww + kw - 1;
                                if (iw < 0 || iw >= CV_W)
                                    continue;
                                float wv =
                                    kind == CONV_FWD
                                        ? w[((co * CV_C + ci) * CV_K + kh) * CV_K + kw]
                                        : w[((ci * CV_C + co) * CV_K + 2 - kh) * CV_K + 2 - kw];
                                s += (double)xi[ih * CV_W + iw] * wv;
                            }
                        }
                    }
                    out[(((size_t)n * cout + co) * CV_H + h) * CV_W + ww] = (float)s;
                }
            }
        }
    }
}

/* The largest absolute difference, and the largest relative one over nonzero wants. */
static void max_errors(const float *got, const float *want, size_t n, double *abs_err,
                       double *rel_err) {
    *abs_err = *rel_err = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)want[i]);
        if (isnan(e))
            e = INFINITY;
        *abs_err = e > *abs_err ? e : *abs_err;
        if (want[i] != 0 && e / fabs((double)want[i]) > *rel_err)
            *rel_err = e / fabs((double)want[i]);
    }
}

/* Whether the references may share loads across a subgroup of at least lanes lanes with
 * subgroupBroadcast (when every lane of a subgroup has the same share). */
static bool conv_can_share(uint32_t lanes) {
    const vkd_caps *caps = g.dev ? vkd_device_caps(g.dev) : NULL;
    return caps && caps->subgroup_size >= lanes &&
           (caps->subgroup_operations & VK_SUBGROUP_FEATURE_BALLOT_BIT);
}

/* The forward (flip 0) or input-gradient (flip 1) variants. Lanes over pixels: tiles of CT
 * channels x PT pixels (shaders/conv2d_<CT>x<PT>.comp), weights shared across the subgroup
 * where it can (and the widest tile also without: what sharing gains); lanes over channels:
 * tiles of RT whole rows, the input rows shared (conv2d_lanes_<RT>.comp: 7 or 14 rows). Whole rows
 * move as pairs where the device has 64-bit integers. Each pixel tile also has a texel twin
 * where the device reads texel buffers ("texels": the input and the weights as uniform texel
 * buffers, TEXELS in conv2d.glsl; stores as the twin's). cin, cout: the convolution's channels
 * (for the input gradient, dY's and dX's). */
static int conv_variants(uint32_t flip, uint32_t cin, uint32_t cout, vkd_buffer *out,
                         vkd_buffer *in, vkd_buffer *w, ref_variant *v) {
    /* CT, PT, and whether quick runs measure it (the full run measures every variant) */
    static const uint32_t tiles[][3] = {{8, 7, 0}, {4, 14, 1}, {8, 14, 1}};
    const char *pairs = g.have_int64 ? "+paired" : "";
    const vkd_buffer *tin = texel_buffer(in), *tw = texel_buffer(w);
    int nv = 0;
    for (uint32_t i = 0; i < 3; i++) {
        uint32_t ct = tiles[i][0], pt = tiles[i][1];
        uint32_t invocations = CV_N * CV_H * (CV_W / pt);
        if (CV_W % pt || invocations % 64 || cout % ct || (g.quick && !tiles[i][2]))
            continue;
        int share = conv_can_share(ct);
        bool whole = pt == CV_W;
        /* The widest tile, in full runs, also without sharing and without pairs: what each
         * saves. k 3 and 4: texel twins of k 0 and 1 for every tile (with texels, the weights
         * loaded by every lane measured faster than shared). */
        bool extra = whole && ct == 8 && !g.quick;
        for (int k = 0; k < 5; k++) {
            bool texels = k >= 3;
            int sh = k == 1 || k == 4 ? 0 : share;
            const char *form = whole && k != 2 ? pairs : "";
            if (((k == 1 || k == 2) && !extra) || (k % 3 == 1 && !share) || (k == 2 && !pairs[0]) ||
                (texels && (!tin || !tw)))
                continue; /* not measured, or the same as another */
            char shader[40], vname[24];
            snprintf(shader, sizeof shader, "conv2d_%ux%u%s%s", ct & 63, pt & 63, form,
                     texels ? "+texels" : "");
            snprintf(vname, sizeof vname, "%ux%u%s%s", ct & 63, pt & 63,
                     texels    ? " texels"
                     : form[0] ? " pairs"
                               : "",
                     sh ? " bcast" : "");
            uint32_t spec[2] = {flip, (uint32_t)sh};
            /* bindings 1 (the input) and 2 (the weights) are read */
            v[nv++] = variant1(vname, ref_pipeline_texels(shader, 3, 16, spec, 2, texels ? 6u : 0u),
                               (ref_dispatch){.buffers = {out, texels ? tin : in, texels ? tw : w},
                                              .binding_count = 3,
                                              .push = {cin, cout, CV_H, CV_W},
                                              .push_size = 16,
                                              .groups = {invocations / 64, cout / ct, 1}});
        }
    }
    const vkd_caps *caps = g.dev ? vkd_device_caps(g.dev) : NULL;
    static const uint32_t rts[] = {7, 14};
    for (uint32_t i = 0; i < (g.quick ? 1 : 2) && CV_W == 14 && conv_can_share(CV_W / 2) && caps &&
                         cout % caps->subgroup_size == 0;
         i++) {
        char shader[32], vname[24];
        snprintf(shader, sizeof shader, "conv2d_lanes_%u%s", rts[i], pairs);
        snprintf(vname, sizeof vname, "lane/chan %u rows%s", rts[i], pairs[0] ? " pairs" : "");
        v[nv++] = variant1(vname, ref_pipeline(shader, 3, 12, (const uint32_t[]){flip, cout}, 2),
                           (ref_dispatch){.buffers = {out, in, w},
                                          .binding_count = 3,
                                          .push = {cin, cout, CV_H},
                                          .push_size = 12,
                                          .groups = {CV_N * CV_H / rts[i], 1, 1}});
    }
    return nv;
}

/* The weight gradient's variants: conv2d_wgrad_<CT> over slices of rows image rows (S = N H /
 * rows slices into part), then col_reduce summing the S slices into out. Each also has texel
 * twins where the device reads texel buffers ("texels": x and dY, then the slices, as uniform
 * texel buffers; TEXELS in conv2d_wgrad.glsl and col_reduce.comp), with dY's rows shared across
 * the subgroup where it can and without. */
static int conv_dw_variants(vkd_buffer *out, vkd_buffer *x, vkd_buffer *dy, vkd_buffer *part,
                            ref_variant *v) {
    /* CT, rows per slice, and whether quick runs measure it */
    static const uint32_t shapes[][3] = {{8, 14, 1}, {8, 56, 1}, {8, 112, 0}, {4, 56, 0}};
    const vkd_buffer *tx = texel_buffer(x), *tdy = texel_buffer(dy), *tpart = texel_buffer(part);
    int nv = 0;
    /* i 0..3: the shapes, 4..7: their texel twins, 8..11: those without sharing */
    for (uint32_t i = 0; i < 12; i++) {
        uint32_t ct = shapes[i % 4][0], rows = shapes[i % 4][1], slices = CV_N * CV_H / rows;
        bool texels = i >= 4;
        const vkd_caps *caps = g.dev ? vkd_device_caps(g.dev) : NULL;
        /* a subgroup within one slice: the workgroup's rows of C lanes hold whole subgroups */
        bool share = conv_can_share(ct) && caps && CV_C % caps->subgroup_size == 0;
        if (slices % 4 || slices > CV_MAX_SLICES || CV_O % ct || (g.quick && !shapes[i % 4][2]) ||
            (texels && (!tx || !tdy || !tpart)) || (i >= 8 && !share))
            continue; /* not measured, or the same as another */
        share = share && i < 8;
        int pr = g.have_int64 ? 1 : 0;
        char first[40], second[40];
        /* the texel twin reads its rows as texels, so pairs would only change its stores: none */
        snprintf(first, sizeof first, "conv2d_wgrad_%u%s", ct,
                 texels ? "+texels"
                 : pr   ? "+paired"
                        : "");
        if (!vector_form("col_reduce", pr, second, sizeof second))
            continue;
        if (texels)
            snprintf(second + strlen(second), sizeof second - strlen(second), "+texels");
        ref_variant *r = &v[nv++];
        *r = (ref_variant){.count = 2};
        char vname[40]; /* at most 23 characters for these shapes: "8c 112rows texels bcast" */
        snprintf(vname, sizeof vname, "%uc %urows%s%s", ct, rows,
                 texels ? " texels"
                 : pr   ? " pairs"
                        : "",
                 share ? " bcast" : "");
        snprintf(r->name, sizeof r->name, "%.*s", (int)sizeof r->name - 1, vname);
        /* read: bindings 1 and 2 (x, dY) of the first pass, 1 (the slices) of the second */
        r->pipes[0] =
            ref_pipeline_texels(first, 3, 16, (const uint32_t[]){CV_C, share}, 2, texels ? 6u : 0u);
        r->pipes[1] =
            ref_pipeline_texels(second, 2, 12, (const uint32_t[]){0}, 1, texels ? 2u : 0u);
        if (!r->pipes[0] || !r->pipes[1])
            r->count = 0;
        r->d[0] = (ref_dispatch){.pipe = r->pipes[0],
                                 .buffers = {part, texels ? tx : x, texels ? tdy : dy},
                                 .binding_count = 3,
                                 .push = {CV_C, CV_O, CV_H, rows},
                                 .push_size = 16,
                                 .groups = {slices / 4, CV_O / ct, 1}};
        r->d[1] = (ref_dispatch){.pipe = r->pipes[1],
                                 .buffers = {out, texels ? tpart : part},
                                 .binding_count = 2,
                                 .push = {slices, CV_WN / 4},
                                 .push_size = 12,
                                 .groups = {CV_WN / 4 / 64, 1, 1}};
        float one = 1.0f;
        memcpy(&r->d[1].push[2], &one, 4);
    }
    return nv;
}

static void case_conv(conv_kind kind, const char *id, const char *name) {
    if (!selected(id, name))
        return;
    double flops = 2.0 * CV_N * CV_O * CV_C * CV_K * CV_K * CV_H * CV_W;
    static const char *const refs[] = {"glsl implicit gemm", "glsl transposed conv",
                                       "glsl split reduction"};
    row *r = row_new(id, name, refs[kind], flops, UNIT_GFLOPS);
    if (!r)
        return;
    row_target(r, TARGET_REF);
    size_t n_out = kind == CONV_FWD ? CV_Y : kind == CONV_DX ? CV_X : CV_WN;
    float *hx = alloc_floats(CV_X), *hw = alloc_floats(CV_WN), *hdy = alloc_floats(CV_Y);
    float *want = alloc_floats(n_out), *got = alloc_floats(n_out), *refo = alloc_floats(n_out);
    kiln_context *ctx = kiln_open(r);
    if (!hx || !hw || !hdy || !want || !got || !refo || !ctx)
        goto done;
    bench_fill_quarters(hx, CV_X, 21);
    bench_fill_quarters(hw, CV_WN, 22);
    bench_fill_quarters(hdy, CV_Y, 23);
    conv_host(kind, hx, hw, hdy, want);
    conv_state s = {.kind = kind};
    s.x = shared_input(ctx, hx, 4, (int64_t[]){CV_N, CV_C, CV_H, CV_W});
    s.w = shared_input(ctx, hw, 4, (int64_t[]){CV_O, CV_C, CV_K, CV_K});
    s.dy = kind == CONV_FWD ? NULL : shared_input(ctx, hdy, 4, (int64_t[]){CV_N, CV_O, CV_H, CV_W});
    if (kind != CONV_FWD && kiln_requires_grad_(kind == CONV_DX ? s.x : s.w, true) != KILN_OK) {
        kiln_fail(r, ctx, "requires_grad");
        goto done;
    }
    kiln_case c = {.ctx = ctx, .build = conv_build, .user = &s};
    kiln_tensor *out = NULL;
    reserve_output(ctx, n_out); /* the references' results: Kiln storage */
    bool kiln_ok = kiln_measure(r, &c, &out) && kiln_read_floats(r, ctx, out, got, n_out);

    vkd_buffer *bo = ref_buffer(NULL, n_out), *bx = ref_buffer(hx, CV_X),
               *bw = ref_buffer(hw, CV_WN), *bdy = ref_buffer(hdy, CV_Y),
               *bp = kind == CONV_DW ? ref_buffer(NULL, CV_MAX_SLICES * CV_WN) : NULL;
    ref_variant v[MAX_VARIANTS];
    int nv = 0;
    if (bo && bx && bw && bdy) {
        if (kind == CONV_FWD)
            nv = conv_variants(0, CV_C, CV_O, bo, bx, bw, v);
        else if (kind == CONV_DX)
            nv = conv_variants(1, CV_O, CV_C, bo, bdy, bw, v);
        else if (bp)
            nv = conv_dw_variants(bo, bx, bdy, bp, v);
    }
    const double tol = 1e-6;
    ref_variant best;
    bool ref_ok = ref_best(r, v, nv, bo, refo, n_out, want, tol, tol, &best);
    check_outputs(r, kiln_ok ? got : NULL, ref_ok ? refo : NULL, want, n_out, tol, tol);
    double ka = NAN, kr = NAN, ra = NAN, rr = NAN;
    if (kiln_ok)
        max_errors(got, ref_ok ? refo : want, n_out, &ka, &kr);
    if (ref_ok)
        max_errors(refo, want, n_out, &ra, &rr);
    printf("%s: max abs / rel error: kiln vs %s %.3g / %.3g, reference vs host %.3g / %.3g%s\n",
           name, ref_ok ? "reference" : "host", ka, kr, ra, rr,
           kiln_ok && ref_ok && !strstr(r->status, "WRONG") ? "" : " (FAILED)");
    if (kiln_ok)
        paired(r, &c, &best);
    else
        variant_finish(&best);
    ref_buffer_destroy(bo);
    ref_buffer_destroy(bx);
    ref_buffer_destroy(bw);
    ref_buffer_destroy(bdy);
    ref_buffer_destroy(bp);
done:
    kiln_close(ctx);
    free(hx);
    free(hw);
    free(hdy);
    free(want);
    free(got);
    free(refo);
}

/* relu(conv2d(x, w, b)) against the bare convolution, both Kiln, paired: the bias and the
 * relu are the product's epilogue (engine/schedule/kernel.c epilogue_of), computed in its
 * kernel with its tiles. No target: no issue sets one. */
static void case_conv_epilogue(void) {
    const char *id = "conv_fwd_relu", *name = "relu(conv2d fwd + bias), same shapes";
    if (!selected(id, name))
        return;
    double flops = 2.0 * CV_N * CV_O * CV_C * CV_K * CV_K * CV_H * CV_W;
    row *r = row_new(id, name, "kiln conv2d fwd alone", flops, UNIT_GFLOPS);
    if (!r)
        return;
    row twin = *r;
    float *hx = alloc_floats(CV_X), *hw = alloc_floats(CV_WN), *want = alloc_floats(CV_Y),
          *got = alloc_floats(CV_Y);
    float hb[CV_O];
    kiln_context *ctx = kiln_open(r);
    if (!hx || !hw || !want || !got || !ctx)
        goto done;
    bench_fill_quarters(hx, CV_X, 21);
    bench_fill_quarters(hw, CV_WN, 22);
    bench_fill_quarters(hb, CV_O, 25);
    conv_host(CONV_FWD, hx, hw, NULL, want);
    for (size_t i = 0; i < CV_Y; i++) {
        float v = want[i] + hb[i / (CV_H * CV_W) % CV_O];
        want[i] = v > 0 ? v : 0;
    }
    conv_state ts = {.kind = CONV_FWD};
    ts.x = shared_input(ctx, hx, 4, (int64_t[]){CV_N, CV_C, CV_H, CV_W});
    ts.w = shared_input(ctx, hw, 4, (int64_t[]){CV_O, CV_C, CV_K, CV_K});
    conv_state s = ts;
    s.bias = shared_input(ctx, hb, 1, (int64_t[]){CV_O});
    kiln_case tc = {.ctx = ctx, .build = conv_build, .user = &ts};
    kiln_case c = {.ctx = ctx, .build = conv_build, .user = &s};
    kiln_tensor *out = NULL;
    twin_reference(r, &twin, kiln_measure(&twin, &tc, &out), "bare convolution");
    bool kiln_ok = kiln_measure(r, &c, &out) && kiln_read_floats(r, ctx, out, got, CV_Y);
    if (kiln_ok && strcmp(r->status, "ok") == 0) {
        char msg[160];
        if (!compare(got, want, CV_Y, 1e-6, 1e-6, "KILN WRONG vs host", msg, sizeof msg))
            row_note(r, msg);
    }
    paired_twin(r, &c, &tc);
done:
    kiln_close(ctx);
    free(hx);
    free(hw);
    free(want);
    free(got);
}

/* The training example's conv1 and pool1: x (64, 1, 28, 28), w (16, 1, 3, 3), padding 1, a
 * bias and relu, then max_pool2d 2 (docs/convolution.md). */
enum { CP_N = 64, CP_O = 16, CP_H = 28, CP_W = 28 };
enum {
    CP_X = CP_N * CP_H * CP_W,
    CP_WN = CP_O * 9,
    CP_Y = CP_N * CP_O * (CP_H / 2) * (CP_W / 2),
    CP_PT = 7, /* conv_pool_*.comp's tiles: 8 or 16 channels x 7 pooled pixels */
};

static kiln_tensor *conv_pool_build(void *user, int rep) {
    conv_state *s = user;
    (void)rep;
    const kiln_conv2d_options same = {.padding = {1, 1}};
    return kiln_max_pool2d(kiln_relu(kiln_conv2d_ex(s->x, s->w, s->bias, &same)), 2, 2, 0);
}

/* max_pool2d(relu(conv2d(x, w, b))) with conv1's shapes: Kiln (the convolution's kernel, then
 * the pool's) against one hand-written kernel that computes the convolution inside the pool's
 * windows and never stores it (shaders/conv_pool.glsl): what such a fusion would save, which
 * Kiln's scheduler does not do (a reduction inside another reduction's windows). No target:
 * no issue sets one. */
static void case_conv_pool(void) {
    const char *id = "conv1_pool", *name = "maxpool2(relu(conv2d 64x1x28x28, 16x1x3x3 + b))";
    if (!selected(id, name))
        return;
    row *r =
        row_new(id, name, "glsl fused conv+pool", 2.0 * CP_N * CP_O * 9 * CP_H * CP_W, UNIT_GFLOPS);
    if (!r)
        return;
    float *hx = alloc_floats(CP_X), *hw = alloc_floats(CP_WN), *want = alloc_floats(CP_Y),
          *got = alloc_floats(CP_Y), *refo = alloc_floats(CP_Y);
    float hb[CP_O];
    kiln_context *ctx = kiln_open(r);
    if (!hx || !hw || !want || !got || !refo || !ctx)
        goto done;
    bench_fill_quarters(hx, CP_X, 31);
    bench_fill_quarters(hw, CP_WN, 32);
    bench_fill_quarters(hb, CP_O, 33);
    for (int n = 0; n < CP_N; n++) {
        for (int o = 0; o < CP_O; o++) {
            for (int ph = 0; ph < CP_H / 2; ph++) {
                for (int pw = 0; pw < CP_W / 2; pw++) {
                    double best = -INFINITY;
                    for (int a = 0; a < 4; a++) {
                        int oh = 2 * ph + a / 2, ow = 2 * pw + a % 2;
                        double v = hb[o];
                        for (int t = 0; t < 9; t++) {
                            int ih = oh + t / 3 - 1, iw = ow + t % 3 - 1;
                            if (ih >= 0 && ih < CP_H && iw >= 0 && iw < CP_W)
                                v += (double)hw[o * 9 + t] * hx[(n * CP_H + ih) * CP_W + iw];
                        }
                        best = v > best ? v : best;
                    }
                    want[((n * CP_O + o) * (CP_H / 2) + ph) * (CP_W / 2) + pw] =
                        (float)(best > 0 ? best : 0);
                }
            }
        }
    }
    conv_state s = {.kind = CONV_FWD};
    s.x = shared_input(ctx, hx, 4, (int64_t[]){CP_N, 1, CP_H, CP_W});
    s.w = shared_input(ctx, hw, 4, (int64_t[]){CP_O, 1, 3, 3});
    s.bias = shared_input(ctx, hb, 1, (int64_t[]){CP_O});
    kiln_case c = {.ctx = ctx, .build = conv_pool_build, .user = &s};
    kiln_tensor *out = NULL;
    reserve_output(ctx, CP_Y);
    bool kiln_ok = kiln_measure(r, &c, &out) && kiln_read_floats(r, ctx, out, got, CP_Y);
    vkd_buffer *bo = ref_buffer(NULL, CP_Y), *bx = ref_buffer(hx, CP_X),
               *bw = ref_buffer(hw, CP_WN), *bb = ref_buffer(hb, CP_O);
    const vkd_buffer *tx = texel_buffer(bx), *tw = texel_buffer(bw), *tb = texel_buffer(bb);
    ref_variant v[2];
    int nv = 0;
    static const uint32_t tiles[2] = {8, 16};
    for (int i = 0; i < 2 && bo && tx && tw && tb; i++) {
        char shader[40], vname[24];
        snprintf(shader, sizeof shader, "conv_pool_%ux7+texels", tiles[i] & 31);
        snprintf(vname, sizeof vname, "%ux7 texels", tiles[i] & 31);
        uint32_t items = CP_N * (CP_H / 2) * (CP_W / 2 / CP_PT);
        /* bindings 1-3 (x, w, b) are read as texels */
        v[nv++] = variant1(vname, ref_pipeline_texels(shader, 4, 12, NULL, 0, 14u),
                           (ref_dispatch){.buffers = {bo, tx, tw, tb},
                                          .binding_count = 4,
                                          .push = {CP_O, CP_H, CP_W},
                                          .push_size = 12,
                                          .groups = {items / 64, CP_O / tiles[i], 1}});
    }
    const double tol = 1e-6;
    ref_variant best;
    bool ref_ok = ref_best(r, v, nv, bo, refo, CP_Y, want, tol, tol, &best);
    check_outputs(r, kiln_ok ? got : NULL, ref_ok ? refo : NULL, want, CP_Y, tol, tol);
    if (kiln_ok && ref_ok)
        paired(r, &c, &best);
    else
        variant_finish(&best);
    ref_buffer_destroy(bo);
    ref_buffer_destroy(bx);
    ref_buffer_destroy(bw);
    ref_buffer_destroy(bb);
done:
    kiln_close(ctx);
    free(hx);
    free(hw);
    free(want);
    free(got);
    free(refo);
}

/* The host's memory bandwidth next to the convolution rows (the copy cases' memcpy row, when
 * they are filtered out). */
static void memcpy_bandwidth_row(void) {
    float *src = alloc_floats(N16M), *dst = alloc_floats(N16M);
    if (src && dst) {
        bench_fill_quarters(src, N16M, 24);
        memcpy_row("conv_memcpy", "host memcpy 16M f32 (no Kiln)", NAN, src, dst);
    }
    free(src);
    free(dst);
}

static void case_convs(void) {
    int before = g.row_count;
    case_conv(CONV_FWD, "conv_fwd", "conv2d fwd 64x16x14x14, 32x16x3x3");
    case_conv(CONV_DX, "conv_dx", "conv2d input grad, same shapes");
    case_conv(CONV_DW, "conv_dw", "conv2d weight grad, same shapes");
    case_conv_epilogue();
    case_conv_pool();
    if (g.row_count > before)
        memcpy_bandwidth_row();
}

/* ---- dispatch overhead ------------------------------------------------------------------------
 */

/* CHAINS chains of STEPS dependent matrix-vector products t <- t W over 64 elements (W a
 * permutation, so values stay exact): each step is one reduction reading the previous one, which
 * Kiln cannot fuse (a reduction inside a reduction's body), so 1,000 kernels really run, in one
 * realize (kiln_realize_many of the chains' ends). Kiln's graph depth limit is 256, hence
 * several chains. The reference records the same 1,000 dispatches of a trivial GLSL matvec. */
enum { CHAINS = 4, STEPS = 250, VEC = 64 };

typedef struct chain_state {
    kiln_context *ctx;
    const float *host_x; /* CHAINS x VEC */
    kiln_tensor *w, *x[CHAINS], *ends[CHAINS - 1];
} chain_state;

static bool chain_prepare(void *user, int rep) {
    chain_state *s = user;
    (void)rep;
    if (s->x[0])
        return true;
    for (int c = 0; c < CHAINS; c++) {
        s->x[c] = kiln_from_data(s->ctx, KILN_F32, 2, (int64_t[]){1, VEC}, s->host_x + c * VEC);
        if (!s->x[c])
            return false;
    }
    return true;
}

static kiln_tensor *chain_build(void *user, int rep) {
    chain_state *s = user;
    (void)rep;
    kiln_tensor *first = NULL;
    for (int c = 0; c < CHAINS; c++) {
        kiln_tensor *t = s->x[c];
        for (int i = 0; i < STEPS; i++)
            t = kiln_matmul(t, s->w);
        if (c == 0)
            first = t;
        else
            s->ends[c - 1] = t;
    }
    return first;
}

/* The same Kiln figure against 1,000 dispatches of an empty shader (pure per-dispatch cost);
 * d has room for CHAINS * STEPS dispatches. */
static void dispatch_empty_row(const char *id, const row *kiln_row, ref_dispatch *d) {
    row *r = row_new(id, "1000 small kernels vs empty disp.", "raw vk empty x1000", CHAINS * STEPS,
                     UNIT_US);
    if (!r)
        return;
    r->kiln_ms = kiln_row->kiln_ms;
    r->kiln_first_ms = kiln_row->kiln_first_ms;
    r->kiln_dev_ms = kiln_row->kiln_dev_ms;
    r->dispatches = kiln_row->dispatches;
    vkd_pipeline *p = d ? ref_pipeline("empty", 1, 0, NULL, 0) : NULL;
    vkd_buffer *b = ref_buffer(NULL, 64);
    if (p && b) {
        for (int i = 0; i < CHAINS * STEPS; i++)
            d[i] =
                (ref_dispatch){.pipe = p, .buffers = {b}, .binding_count = 1, .groups = {1, 1, 1}};
        if (!ref_measure(d, CHAINS * STEPS, &r->ref_first_ms, &r->ref_ms, &r->ref_dev_ms))
            row_note(r, "reference run failed");
    } else {
        row_note(r, "reference skipped (no glslc or no device)");
    }
    ref_buffer_destroy(b);
    vkd_pipeline_destroy(p);
}

/* Raw Vulkan objects for the barest batch: one pipeline, one descriptor set, one command
 * buffer. */
typedef struct raw_vk {
    const struct VolkDeviceTable *vk;
    VkDevice dev;
    VkShaderModule module;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipeline pipe;
    VkDescriptorPool pool;
    VkDescriptorSet set;
    VkCommandPool cmd_pool;
    VkCommandBuffer cmd;
    VkFence fence;
    VkQueue queue;
} raw_vk;

static void raw_destroy(raw_vk *r) {
    const struct VolkDeviceTable *vk = r->vk;
    vk->vkDestroyFence(r->dev, r->fence, NULL);
    vk->vkDestroyCommandPool(r->dev, r->cmd_pool, NULL);
    vk->vkDestroyDescriptorPool(r->dev, r->pool, NULL);
    vk->vkDestroyPipeline(r->dev, r->pipe, NULL);
    vk->vkDestroyPipelineLayout(r->dev, r->layout, NULL);
    vk->vkDestroyDescriptorSetLayout(r->dev, r->set_layout, NULL);
    vk->vkDestroyShaderModule(r->dev, r->module, NULL);
}

/* The objects for a shader with one storage buffer (binding 0) bound to buf. */
static bool raw_create(raw_vk *r, const uint32_t *words, size_t count, const vkd_buffer *buf) {
    const struct VolkDeviceTable *vk = r->vk = vkd_device_table(g.dev);
    VkDevice dev = r->dev = vkd_device_handle(g.dev);
    uint32_t family = (uint32_t)vkd_device_info_of(g.dev)->compute_family;
    vk->vkGetDeviceQueue(dev, family, 0, &r->queue);
    VkDescriptorSetLayoutBinding b = {.binding = 0,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .descriptorCount = 1,
                                      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
    bool ok =
        vk->vkCreateShaderModule(
            dev,
            &(VkShaderModuleCreateInfo){.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                        .codeSize = count * 4,
                                        .pCode = words},
            NULL, &r->module) == VK_SUCCESS &&
        vk->vkCreateDescriptorSetLayout(
            dev,
            &(VkDescriptorSetLayoutCreateInfo){
                .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                .bindingCount = 1,
                .pBindings = &b},
            NULL, &r->set_layout) == VK_SUCCESS &&
        vk->vkCreatePipelineLayout(
            dev,
            &(VkPipelineLayoutCreateInfo){.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                          .setLayoutCount = 1,
                                          .pSetLayouts = &r->set_layout},
            NULL, &r->layout) == VK_SUCCESS &&
        vk->vkCreateComputePipelines(
            dev, VK_NULL_HANDLE, 1,
            &(VkComputePipelineCreateInfo){
                .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                          .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                          .module = r->module,
                          .pName = "main"},
                .layout = r->layout},
            NULL, &r->pipe) == VK_SUCCESS &&
        vk->vkCreateDescriptorPool(
            dev,
            &(VkDescriptorPoolCreateInfo){.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                          .maxSets = 1,
                                          .poolSizeCount = 1,
                                          .pPoolSizes = &size},
            NULL, &r->pool) == VK_SUCCESS &&
        vk->vkAllocateDescriptorSets(
            dev,
            &(VkDescriptorSetAllocateInfo){.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                           .descriptorPool = r->pool,
                                           .descriptorSetCount = 1,
                                           .pSetLayouts = &r->set_layout},
            &r->set) == VK_SUCCESS &&
        vk->vkCreateCommandPool(
            dev,
            &(VkCommandPoolCreateInfo){.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                       .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                       .queueFamilyIndex = family},
            NULL, &r->cmd_pool) == VK_SUCCESS &&
        vk->vkAllocateCommandBuffers(
            dev,
            &(VkCommandBufferAllocateInfo){.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                           .commandPool = r->cmd_pool,
                                           .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                           .commandBufferCount = 1},
            &r->cmd) == VK_SUCCESS &&
        vk->vkCreateFence(dev, &(VkFenceCreateInfo){.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO},
                          NULL, &r->fence) == VK_SUCCESS;
    if (ok) {
        VkDescriptorBufferInfo info = {vkd_buffer_handle(buf), 0, VK_WHOLE_SIZE};
        vk->vkUpdateDescriptorSets(
            dev, 1,
            &(VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                    .dstSet = r->set,
                                    .descriptorCount = 1,
                                    .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                    .pBufferInfo = &info},
            0, NULL);
    }
    return ok;
}

/* Records count dispatches (each after a barrier on the one before, as vk/ and Kiln do), submits
 * and waits. */
static bool raw_poll(raw_vk *r) {
    VkResult res;
    while ((res = r->vk->vkGetFenceStatus(r->dev, r->fence)) == VK_NOT_READY)
        ;
    return res == VK_SUCCESS;
}

/* Records count dispatches, submits them and waits: blocking in vkWaitForFences, or (poll)
 * spinning on vkGetFenceStatus. */
static bool raw_run(raw_vk *r, uint32_t count, VkQueryPool timestamps, bool poll) {
    const struct VolkDeviceTable *vk = r->vk;
    VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                               .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                               .dstAccessMask =
                                   VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    if (vk->vkResetCommandBuffer(r->cmd, 0) != VK_SUCCESS ||
        vk->vkBeginCommandBuffer(
            r->cmd, &(VkCommandBufferBeginInfo){
                        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT}) != VK_SUCCESS)
        return false;
    if (timestamps)
        vk->vkCmdResetQueryPool(r->cmd, timestamps, 0, 2 * count);
    for (uint32_t i = 0; i < count; i++) {
        if (i > 0)
            vk->vkCmdPipelineBarrier(r->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, NULL,
                                     0, NULL);
        vk->vkCmdBindPipeline(r->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, r->pipe);
        vk->vkCmdBindDescriptorSets(r->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, r->layout, 0, 1,
                                    &r->set, 0, NULL);
        if (timestamps)
            vk->vkCmdWriteTimestamp(r->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, timestamps, 2 * i);
        vk->vkCmdDispatch(r->cmd, 1, 1, 1);
        if (timestamps)
            vk->vkCmdWriteTimestamp(r->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, timestamps,
                                    2 * i + 1);
    }
    return vk->vkEndCommandBuffer(r->cmd) == VK_SUCCESS &&
           vk->vkResetFences(r->dev, 1, &r->fence) == VK_SUCCESS &&
           vk->vkQueueSubmit(r->queue, 1,
                             &(VkSubmitInfo){.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                             .commandBufferCount = 1,
                                             .pCommandBuffers = &r->cmd},
                             r->fence) == VK_SUCCESS &&
           (poll ? raw_poll(r)
                 : vk->vkWaitForFences(r->dev, 1, &r->fence, VK_TRUE, UINT64_MAX) == VK_SUCCESS);
}

/* The same Kiln figure against 1,000 empty dispatches recorded with bare Vulkan calls (no vk/
 * batch: one descriptor set, no timestamps), which shows what vk/'s batch itself costs. */
static void dispatch_raw_row(const char *id, const row *kiln_row) {
    row *r = row_new(id, "1000 small kernels vs bare Vulkan", "bare vk empty x1000", CHAINS * STEPS,
                     UNIT_US);
    uint32_t *words = NULL;
    size_t count;
    double glslc_ms;
    vkd_buffer *b = ref_buffer(NULL, 64);
    if (!r || !b || !g.have_glslc || !glslc_compile("empty", &words, &count, &glslc_ms)) {
        if (r)
            row_note(r, "reference skipped (no glslc or no device)");
        ref_buffer_destroy(b);
        return;
    }
    r->kiln_ms = kiln_row->kiln_ms;
    r->kiln_first_ms = kiln_row->kiln_first_ms;
    r->kiln_dev_ms = kiln_row->kiln_dev_ms;
    r->dispatches = kiln_row->dispatches;
    raw_vk raw = {0};
    double times[MAX_REPS];
    bool ok = raw_create(&raw, words, count, b);
    /* Without timestamps (the figure), then with one pair per dispatch as vk/ writes them (in
     * results.json's variants: what the timestamps cost). */
    VkQueryPool qp = VK_NULL_HANDLE;
    ok = ok && raw.vk->vkCreateQueryPool(
                   raw.dev,
                   &(VkQueryPoolCreateInfo){.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                            .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                            .queryCount = 2 * CHAINS * STEPS},
                   NULL, &qp) == VK_SUCCESS;
    for (int timed = 0; ok && timed < 2; timed++) {
        for (int rep = 0; ok && rep <= g.reps; rep++) {
            double t0 = bench_now_ms();
            ok = raw_run(&raw, CHAINS * STEPS, timed ? qp : VK_NULL_HANDLE, false);
            if (rep == 0 && !timed)
                r->ref_first_ms = bench_now_ms() - t0;
            else if (rep > 0)
                times[rep - 1] = bench_now_ms() - t0;
        }
        double med = ok ? bench_median(times, g.reps) : NAN;
        if (!timed)
            r->ref_ms = med;
        size_t len = strlen(r->variants);
        snprintf(r->variants + len, sizeof r->variants - len, "%s%s %.3f ms", len ? ", " : "",
                 timed ? "with timestamps" : "no timestamps", med);
    }
    if (!ok)
        row_note(r, "bare Vulkan run failed");
    if (qp)
        raw.vk->vkDestroyQueryPool(raw.dev, qp, NULL);
    raw_destroy(&raw);
    ref_buffer_destroy(b);
    free(words);
}

/* The per-call time of a small symbolic computation (the symbolic-shapes issue): n rebound to
 * a new value in [1, 4096] on every call, sum(x[:n]) built, realized and read back (one
 * compiled kernel serves every call), against the floor of any Vulkan program for one result:
 * one empty dispatch recorded, submitted and waited for with bare Vulkan calls (blocking in
 * vkWaitForFences or polling the fence: the faster counts). Medians over PER_CALLS calls,
 * alternating Kiln and the references in blocks of 100. */
enum { PER_CALLS = 2000, PER_BLOCK = 100 };

static void case_per_call(void) {
    const char *id = "per_call", *name = "symbolic sum per call";
    if (!selected(id, name))
        return;
    row *r = row_new(id, name, "bare vk submit+wait", 1, UNIT_US);
    float *host = alloc_floats(4096);
    kiln_context *ctx = kiln_open(r);
    uint32_t *words = NULL;
    size_t count;
    double glslc_ms;
    vkd_buffer *b = ref_buffer(NULL, 64);
    if (!r || !host || !ctx || !b || !g.have_glslc ||
        !glslc_compile("empty", &words, &count, &glslc_ms)) {
        if (r)
            row_note(r, "skipped (no device, glslc or memory)");
        goto done;
    }
    for (int i = 0; i < 4096; i++)
        host[i] = (float)(i % 7);
    kiln_tensor *x = kiln_from_data(ctx, KILN_F32, 1, (int64_t[]){4096}, host);
    const kiln_expr *n = kiln_variable(ctx, "n", 1, 4096);
    raw_vk raw = {0};
    bool ok = x && n && raw_create(&raw, words, count, b);
    static double kt[PER_CALLS], rt[PER_CALLS], pt[PER_CALLS];
    uint64_t compiled = kiln_context_stats(ctx).kernels_compiled;
    for (int block = 0; ok && block < PER_CALLS / PER_BLOCK; block++) {
        for (int i = block * PER_BLOCK; ok && i < (block + 1) * PER_BLOCK; i++) {
            double t0 = bench_now_ms();
            kiln_scope_begin(ctx);
            const kiln_expr *v = kiln_bind(ctx, n, 1 + (i * 37) % 4096);
            float sum;
            ok = kiln_read(kiln_sum(kiln_narrow_sym(x, 0, kiln_int(ctx, 0), v), 0, NULL, false),
                           &sum, sizeof sum) == KILN_OK;
            ok = kiln_scope_end(ctx, 0, NULL) == KILN_OK && ok;
            kt[i] = bench_now_ms() - t0;
        }
        for (int i = block * PER_BLOCK; ok && i < (block + 1) * PER_BLOCK; i++) {
            double t0 = bench_now_ms();
            ok = raw_run(&raw, 1, VK_NULL_HANDLE, false);
            rt[i] = bench_now_ms() - t0;
            t0 = bench_now_ms();
            ok = ok && raw_run(&raw, 1, VK_NULL_HANDLE, true);
            pt[i] = bench_now_ms() - t0;
        }
    }
    if (ok) {
        r->kiln_ms = bench_median(kt, PER_CALLS);
        double wait = bench_median(rt, PER_CALLS), poll = bench_median(pt, PER_CALLS);
        r->ref_ms = wait < poll ? wait : poll; /* the better of the two waits is the floor */
        snprintf(r->ref, sizeof r->ref, "bare vk submit+%s", wait < poll ? "wait" : "poll");
        snprintf(r->variants, sizeof r->variants, "vkWaitForFences %.4f ms, polling %.4f ms", wait,
                 poll);
        r->dispatches = PER_CALLS;
        uint64_t more = kiln_context_stats(ctx).kernels_compiled - compiled;
        char msg[96];
        snprintf(msg, sizeof msg, "%llu kernels compiled for %d calls (1 expected)",
                 (unsigned long long)more, PER_CALLS);
        if (more != 1)
            row_note(r, msg);
    } else {
        row_note(r, kiln_context_status(ctx) != KILN_OK ? kiln_context_message(ctx)
                                                        : "bare Vulkan run failed");
    }
    if (raw.vk)
        raw_destroy(&raw);
done:
    free(words);
    ref_buffer_destroy(b);
    kiln_close(ctx);
    free(host);
}

static void case_dispatch(void) {
    const char *id = "dispatch", *name = "1000 small kernels, one realize";
    if (!selected(id, name))
        return;
    row *r = row_new(id, name, "raw vk 1000 disp.", CHAINS * STEPS, UNIT_US);
    row_target(r, TARGET_DISPATCH);
    float hw[VEC * VEC], hx[CHAINS * VEC], want[CHAINS * VEC], got[CHAINS * VEC],
        refo[CHAINS * VEC];
    for (int k = 0; k < VEC; k++) {
        for (int j = 0; j < VEC; j++)
            hw[k * VEC + j] = j == (k * 5 + 3) % VEC ? 1.0f : 0.0f;
    }
    bench_fill_quarters(hx, CHAINS * VEC, 12);
    for (int c = 0; c < CHAINS; c++) { /* t[j] <- t[k] where j = perm(k), STEPS times */
        float t[VEC], u[VEC];
        memcpy(t, hx + c * VEC, sizeof t);
        for (int i = 0; i < STEPS; i++) {
            for (int k = 0; k < VEC; k++)
                u[(k * 5 + 3) % VEC] = t[k];
            memcpy(t, u, sizeof t);
        }
        memcpy(want + c * VEC, t, sizeof t);
    }
    kiln_context *ctx = kiln_open(r);
    if (!ctx)
        return;
    chain_state s = {.ctx = ctx, .host_x = hx};
    s.w = kiln_from_data(ctx, KILN_F32, 2, (int64_t[]){VEC, VEC}, hw);
    kiln_case c = {.ctx = ctx,
                   .prepare = chain_prepare,
                   .build = chain_build,
                   .user = &s,
                   .extra_count = CHAINS - 1,
                   .extra = s.ends};
    kiln_tensor *out = NULL;
    bool kiln_ok = kiln_measure(r, &c, &out);
    for (int i = 0; kiln_ok && i < CHAINS; i++)
        kiln_ok = kiln_read_floats(r, ctx, i == 0 ? out : s.ends[i - 1], got + i * VEC, VEC);
    if (kiln_ok && r->dispatches != CHAINS * STEPS) {
        char msg[96];
        snprintf(msg, sizeof msg, "Kiln ran %llu dispatches, not %d", r->dispatches,
                 CHAINS * STEPS);
        row_note(r, msg);
    }

    bool ref_ok = false;
    vkd_pipeline *p = ref_pipeline("matvec_step", 3, 0, NULL, 0);
    vkd_buffer *bw = ref_buffer(hw, VEC * VEC), *bufs[CHAINS][3] = {{NULL}};
    bool have = p && bw;
    for (int ch = 0; ch < CHAINS; ch++) {
        bufs[ch][0] = ref_buffer(hx + ch * VEC, VEC);
        bufs[ch][1] = ref_buffer(NULL, VEC);
        bufs[ch][2] = ref_buffer(NULL, VEC);
        have = have && bufs[ch][0] && bufs[ch][1] && bufs[ch][2];
    }
    ref_dispatch *d = have ? calloc(CHAINS * STEPS, sizeof *d) : NULL;
    if (d) {
        for (int ch = 0; ch < CHAINS; ch++) { /* step i: in (input or ping-pong) -> out */
            for (int i = 0; i < STEPS; i++)
                d[ch * STEPS + i] = (ref_dispatch){
                    .pipe = p,
                    .buffers = {bufs[ch][1 + (i + 1) % 2], bufs[ch][i == 0 ? 0 : 1 + i % 2], bw},
                    .binding_count = 3,
                    .groups = {1, 1, 1}};
        }
        ref_ok = ref_measure(d, CHAINS * STEPS, &r->ref_first_ms, &r->ref_ms, &r->ref_dev_ms);
        for (int ch = 0; ref_ok && ch < CHAINS; ch++)
            ref_ok = ref_read(bufs[ch][1 + STEPS % 2], refo + ch * VEC, VEC);
    } else {
        row_note(r, "reference skipped (no glslc or no device)");
    }
    check_outputs(r, kiln_ok ? got : NULL, ref_ok ? refo : NULL, want, CHAINS * VEC, 0, 0);
    paired_ref(r, &c, d, ref_ok && kiln_ok ? CHAINS * STEPS : 0);
    dispatch_empty_row(id, r, d);
    dispatch_raw_row(id, r);
    free(d);
    for (int ch = 0; ch < CHAINS; ch++) {
        for (int k = 0; k < 3; k++)
            ref_buffer_destroy(bufs[ch][k]);
    }
    ref_buffer_destroy(bw);
    vkd_pipeline_destroy(p);
    kiln_close(ctx);
}

/* ---- compile cost -----------------------------------------------------------------------------
 */

enum { COMPILE_KERNELS = 256 };

/* Kernel i: an elementwise chain with constants depending on i (so every kernel is distinct),
 * every other one ending in a sum over the last axis. */
static kiln_tensor *distinct_kernel(kiln_tensor *x, int i) {
    kiln_tensor *t = kiln_add_scalar(kiln_mul_scalar(x, 1.0 + i * 0.001), (double)i);
    switch (i % 4) {
    case 0:
        t = kiln_exp(t);
        break;
    case 1:
        t = kiln_sigmoid(t);
        break;
    case 2:
        t = kiln_tanh(t);
        break;
    default:
        t = kiln_sqrt(kiln_abs(t));
        break;
    }
    t = kiln_mul(t, kiln_add_scalar(x, -0.5 * i));
    return i % 2 ? kiln_sum(t, 1, (int32_t[]){-1}, false) : t;
}

/* Wall time per kernel of generating COMPILE_KERNELS distinct kernels, realized in batches of
 * 64. Over a (0, 64) input no kernel is dispatched: on a device the time is Kiln's code
 * generation (lower, verify, SPIR-V) plus vkCreateComputePipelines, without lavapipe's LLVM
 * compile at the first dispatch; with the interpreter it is the code generation without SPIR-V.
 */
static bool compile_per_kernel(double *us, double *codegen_us, char *msg, size_t msg_size) {
    kiln_context *ctx = NULL;
    if (kiln_context_create(&(kiln_context_options){0}, &ctx) != KILN_OK) {
        snprintf(msg, msg_size, "context on the default device failed");
        return false;
    }
    kiln_tensor *x = kiln_empty(ctx, KILN_F32, 2, (int64_t[]){0, 64});
    kiln_stats before = kiln_context_stats(ctx);
    double t0 = bench_now_ms();
    kiln_status st = KILN_OK;
    for (int base = 0; st == KILN_OK && base < COMPILE_KERNELS; base += 64) {
        kiln_tensor *ts[64];
        for (int i = 0; i < 64; i++)
            ts[i] = distinct_kernel(x, base + i);
        st = kiln_realize_many(ctx, 64, ts);
    }
    double ms = bench_now_ms() - t0;
    kiln_stats after = kiln_context_stats(ctx);
    uint64_t compiled = after.kernels_compiled - before.kernels_compiled;
    bool ok = st == KILN_OK && compiled > 0;
    if (st != KILN_OK)
        snprintf(msg, msg_size, "KILN ERROR: %s", kiln_context_message(ctx));
    else if (compiled != COMPILE_KERNELS || after.dispatches != before.dispatches)
        snprintf(msg, msg_size, "%llu kernels compiled (expected %d), %llu dispatches",
                 (unsigned long long)compiled, COMPILE_KERNELS,
                 (unsigned long long)(after.dispatches - before.dispatches));
    if (ok) {
        *us = ms * 1e3 / (double)compiled;
        *codegen_us = (double)(after.codegen_ns - before.codegen_ns) / 1e3 / (double)compiled;
    }
    kiln_context_destroy(ctx);
    return ok;
}

/* vkCreateComputePipelines alone (through vk/, glslc's SPIR-V of ew_fma): the part of the
 * "codegen+pipeline" figure that is the driver's, not Kiln's. */
static void pipeline_create_row(const char *id) {
    row *r = row_new(id, "vkCreateComputePipelines alone", "per pipeline", 1, UNIT_US);
    uint32_t *words;
    size_t count;
    double glslc_ms;
    if (!r || !g.have_glslc || !glslc_compile("ew_fma", &words, &count, &glslc_ms)) {
        if (r)
            row_note(r, "skipped: no glslc");
        return;
    }
    enum { PIPES = 32 };
    double times[PIPES];
    int n = 0;
    for (uint32_t i = 0; i < PIPES; i++) {
        uint32_t per = i + 1; /* distinct specialisations: nothing cached */
        VkSpecializationMapEntry e = {.constantID = 0, .offset = 0, .size = 4};
        vkd_pipeline_desc desc = {.code = words,
                                  .word_count = count,
                                  .binding_count = 4,
                                  .push_constant_size = 4,
                                  .spec_entries = &e,
                                  .spec_entry_count = 1,
                                  .spec_data = &per,
                                  .spec_data_size = 4};
        vkd_pipeline *p = NULL;
        double t0 = bench_now_ms();
        if (vkd_pipeline_create(g.dev, &desc, &p, NULL) == KILN_OK)
            times[n++] = bench_now_ms() - t0;
        vkd_pipeline_destroy(p);
    }
    free(words);
    r->ref_ms = n ? bench_median(times, n) : NAN;
}

static void case_compile(void) {
    const char *id = "compile", *name = "kernel generation";
    if (!selected(id, name))
        return;
    /* glslc on a small elementwise shader, as a GLSL user would run it. */
    double glslc_ms = NAN;
    if (g.have_glslc) {
        double times[MAX_REPS];
        int n = 0;
        for (int i = 0; i < 5; i++) {
            uint32_t *words;
            size_t count;
            if (glslc_compile("ew_fma", &words, &count, &times[n])) {
                free(words);
                n++;
            }
        }
        if (n)
            glslc_ms = bench_median(times, n);
    }
    pipeline_create_row(id);
    /* One run of COMPILE_KERNELS kernels gives both: the wall time per kernel (generation, the
     * disk cache's file, vkCreateComputePipelines) and Kiln's generation alone (kiln_stats
     * codegen_ns: lowering, checks, SPIR-V emission), the figure the issue's target is for. */
    double us[2] = {NAN, NAN};
    char msg[160] = "";
    bool ok = compile_per_kernel(&us[0], &us[1], msg, sizeof msg);
    const char *names[2] = {"codegen+pipeline per kernel", "SPIR-V generation per kernel"};
    for (int k = 0; k < 2; k++) {
        row *r = row_new(id, names[k], "glslc per shader", 1, UNIT_US);
        if (!r)
            return;
        if (k == 1)
            row_target(r, TARGET_CODEGEN);
        if (ok)
            r->kiln_ms = us[k] / 1e3;
        if (msg[0])
            row_note(r, msg);
        r->ref_ms = glslc_ms;
        if (isnan(glslc_ms))
            row_note(r, "glslc missing: no reference");
    }
}

/* ---- numpy ------------------------------------------------------------------------------------
 */

static const char *find_python(void) {
    static const char *const candidates[] = {"python3", "/usr/bin/python3"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        const char *argv[] = {candidates[i], "-c", "import numpy", NULL};
        if (run_quiet(argv, false) == 0)
            return candidates[i];
    }
    return NULL;
}

/* A row comparing Kiln's median with numpy's median (one thread) of expr over n = 16M. */
static void numpy_row(const char *id, const char *name, double kiln_ms, double work,
                      const char *setup, const char *expr) {
    row *r = row_new(id, name, "numpy", work, UNIT_GBS);
    if (!r)
        return;
    r->kiln_ms = kiln_ms;
    if (!g.python) {
        row_note(r, "skipped: no python3 with numpy");
        return;
    }
    char script[1024], cmd[1400];
    snprintf(script, sizeof script,
             "import numpy as np,time\nn=%d\n%s\nts=[]\nfor i in range(%d):\n"
             " t=time.perf_counter();%s;ts.append(time.perf_counter()-t)\n"
             "ts=sorted(ts[1:]);print(ts[len(ts)//2]*1e3)\n",
             N16M, setup, g.reps + 1, expr);
    snprintf(cmd, sizeof cmd, "%s -c '%s'", g.python, script);
    FILE *p = popen(cmd, "r");
    double ms = NAN;
    if (!p || fscanf(p, "%lf", &ms) != 1)
        row_note(r, "numpy run failed");
    if (p)
        pclose(p);
    r->ref_ms = ms;
}

/* ---- output -----------------------------------------------------------------------------------
 */

static void fmt_num(char *buf, size_t size, double v) {
    if (isnan(v))
        snprintf(buf, size, "-");
    else if (v >= 100)
        snprintf(buf, size, "%.1f", v);
    else
        snprintf(buf, size, "%.3f", v);
}

static void print_table(void) {
    printf("\n%-34s %10s %10s %-18s %10s %8s %-13s %6s %-6s %10s %10s %-8s %s\n", "case", "kiln ms",
           "first ms", "reference", "ref ms", "kiln/ref", "interval", "target", "", "kiln thr.",
           "ref thr.", "unit", "status");
    for (int i = 0; i < g.row_count; i++) {
        const row *r = &g.rows[i];
        char k[24], f[24], rf[24], ratio[24], kt[24], rt[24], ci[40] = "-", tg[24];
        fmt_num(k, sizeof k, r->kiln_ms);
        fmt_num(f, sizeof f, r->kiln_first_ms);
        fmt_num(rf, sizeof rf, r->ref_ms);
        fmt_num(ratio, sizeof ratio, row_ratio(r));
        fmt_num(tg, sizeof tg, r->target);
        if (r->pairs)
            snprintf(ci, sizeof ci, "%.3f-%.3f", r->ratio_lo, r->ratio_hi);
        fmt_num(kt, sizeof kt, throughput(r->work, r->unit, r->kiln_ms));
        fmt_num(rt, sizeof rt, throughput(r->work, r->unit, r->ref_ms));
        printf("%-34s %10s %10s %-18s %10s %8s %-13s %6s %-6s %10s %10s %-8s %s\n", r->name, k, f,
               r->ref, rf, ratio, ci, tg, row_verdict(r), kt, rt, unit_names[r->unit], r->status);
    }
    printf("kiln/ref is a time ratio (above 1: Kiln slower); paired rows give the median of %d "
           "pairs' ratios (Kiln and reference run in alternation) and its confidence interval. "
           "target: the largest kiln/ref the performance issue accepts; \"tie\": above it, but "
           "the interval reaches it. Throughput counts bytes read + written (GB/s), flops "
           "(GFLOP/s), or microseconds per dispatch/kernel. \"first\" is Kiln's warm-up realize "
           "(kernel generation + first dispatch).\n",
           g.pairs);
}

static void json_num(FILE *f, const char *key, double v, bool comma) {
    if (isnan(v) || isinf(v))
        fprintf(f, "\"%s\": null%s", key, comma ? ", " : "");
    else
        fprintf(f, "\"%s\": %.6g%s", key, v, comma ? ", " : "");
}

static void write_json(void) {
    const char *path = getenv("KILN_BENCH_JSON") ? getenv("KILN_BENCH_JSON") : KILN_BENCH_RESULTS;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench_ops: cannot write %s\n", path);
        return;
    }
    fprintf(f,
            "{\"device\": \"%s\", \"repetitions\": %d, \"pairs\": %d, \"quick\": %s, "
            "\"rows\": [\n",
            g.device_name, g.reps, g.pairs, g.quick ? "true" : "false");
    for (int i = 0; i < g.row_count; i++) {
        const row *r = &g.rows[i];
        fprintf(f, "  {\"id\": \"%s\", \"case\": \"%s\", \"reference\": \"%s\", ", r->id, r->name,
                r->ref);
        json_num(f, "kiln_ms", r->kiln_ms, true);
        json_num(f, "kiln_first_ms", r->kiln_first_ms, true);
        /* The one-time cost of the first realize: kernel generation + lavapipe's compile. */
        json_num(f, "kiln_compile_ms",
                 r->kiln_first_ms - (isnan(r->kiln_alone_ms) ? r->kiln_ms : r->kiln_alone_ms),
                 true);
        json_num(f, "kiln_device_ms", r->kiln_dev_ms, true);
        json_num(f, "ref_ms", r->ref_ms, true);
        json_num(f, "ref_first_ms", r->ref_first_ms, true);
        json_num(f, "ref_device_ms", r->ref_dev_ms, true);
        json_num(f, "kiln_alone_ms", r->kiln_alone_ms, true);
        json_num(f, "ref_alone_ms", r->ref_alone_ms, true);
        json_num(f, "ratio", row_ratio(r), true);
        json_num(f, "ratio_lo", r->ratio_lo, true);
        json_num(f, "ratio_hi", r->ratio_hi, true);
        fprintf(f, "\"pairs\": %d, ", r->pairs);
        json_num(f, "target", r->target, true);
        fprintf(f, "\"verdict\": \"%s\", ", row_verdict(r));
        json_num(f, "kiln_throughput", throughput(r->work, r->unit, r->kiln_ms), true);
        json_num(f, "ref_throughput", throughput(r->work, r->unit, r->ref_ms), true);
        fprintf(f, "\"unit\": \"%s\", \"kiln_dispatches\": %llu, \"status\": \"",
                unit_names[r->unit], r->dispatches);
        for (const char *c = r->status; *c; c++) /* JSON string escaping */
            fprintf(f, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
        fprintf(f, "\", \"ref_variants\": \"%s\"}%s\n", r->variants,
                i + 1 < g.row_count ? "," : "");
    }
    fprintf(f, "]}\n");
    fclose(f);
    printf("wrote %s\n", path);
}

/* ---- main -------------------------------------------------------------------------------------
 */

static bool setup(void) {
    g.quick = getenv("KILN_BENCH_QUICK") && strcmp(getenv("KILN_BENCH_QUICK"), "0") != 0;
    g.filter = getenv("KILN_BENCH_FILTER");
    if (g.filter && !g.filter[0])
        g.filter = NULL;
    /* KILN_BENCH_SPV=path@x[,y[,z]][:path@...]: modules and their workgroups */
    for (const char *e = getenv("KILN_BENCH_SPV"); e && *e && g.spv_count < MAX_SPV;) {
        const char *end = strchr(e, ':'), *at = strchr(e, '@');
        size_t len = end ? (size_t)(end - e) : strlen(e);
        uint32_t *gr = g.spv_groups[g.spv_count];
        gr[0] = gr[1] = gr[2] = 1;
        if (!at || at >= e + len || at - e >= (long)sizeof g.spv_path[0] ||
            sscanf(at + 1, "%u,%u,%u", &gr[0], &gr[1], &gr[2]) < 1) {
            fprintf(stderr, "bench_ops: KILN_BENCH_SPV takes path@x[,y[,z]] (workgroups), "
                            "several separated by ':'\n");
            return false;
        }
        snprintf(g.spv_path[g.spv_count++], sizeof g.spv_path[0], "%.*s", (int)(at - e), e);
        e = end ? end + 1 : e + len;
    }
    g.reps = g.quick ? 3 : 5;
    g.pairs = g.quick ? 5 : 15;
    const char *pairs = getenv("KILN_BENCH_PAIRS");
    if (pairs && atoi(pairs) >= 3)
        g.pairs = atoi(pairs) > MAX_PAIRS ? MAX_PAIRS : atoi(pairs);
    g.matmul_1024_ms = NAN;
    snprintf(g.tmp, sizeof g.tmp, "/tmp/kiln-bench-XXXXXX");
    if (!mkdtemp(g.tmp)) {
        g.tmp[0] = '\0';
        fprintf(stderr, "bench_ops: mkdtemp failed\n");
        return false;
    }
    if (!getenv("MESA_SHADER_CACHE_DIR")) { /* a cold cache on every run, see the top */
        char dir[128];
        snprintf(dir, sizeof dir, "%s/mesa-cache", g.tmp);
        setenv("MESA_SHADER_CACHE_DIR", dir, 1);
    }
    if (!getenv("KILN_CACHE_DIR")) { /* Kiln's disk cache cold too: every kernel is generated */
        char dir[128];
        snprintf(dir, sizeof dir, "%s/kiln-cache", g.tmp);
        setenv("KILN_CACHE_DIR", dir, 1);
    }
    const char *argv[] = {"glslc", "--version", NULL};
    g.spv_dir = getenv("KILN_BENCH_SPV_DIR");
    g.have_glslc = g.spv_dir ? true : run_quiet(argv, false) == 0;
    if (!g.have_glslc)
        printf("glslc not found: GLSL references skipped (./kiln.sh bench installs it)\n");
    g.python = find_python();
    if (!g.python)
        printf("python3 with numpy not found: numpy references skipped\n");
    if (!ref_device_open())
        g.have_glslc = false; /* no device: no GLSL references either */
    printf("bench_ops on %s; %d repetitions after a warm-up, then %d pairs%s%s%s\n", g.device_name,
           g.reps, g.pairs, g.quick ? "; quick" : "", g.filter ? "; filter " : "",
           g.filter ? g.filter : "");
    return true;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* rows appear as they are measured, even in a pipe */
    if (!setup()) {
        remove_tmp();
        return 1;
    }
    case_ew_fma();
    case_ew_bcast();
    case_ew_inplace();
    case_reduction(RED_SUM_ALL, "sum_all", "sum 16M f32");
    case_reduction(RED_SUM_ROWS, "sum_rows", "sum(x,-1) (4096,4096)");
    case_reduction(RED_MAX_COLS, "max_axis0", "max(x,0) (4096,4096)");
    case_reduction(RED_MEAN_COLS, "mean_axis0", "mean(x,0) (4096,4096)");
    case_softmax();
    case_matmul(1024);
    case_matmul(2048);
    case_batched_matmul();
    case_convs();
    case_strided_sum();
    case_strided_copy();
    case_dispatch();
    case_per_call();
    case_compile();
    print_table();
    write_json();
    vkd_device_destroy(g.own_dev);
    vkd_instance_destroy(g.inst);
    remove_tmp();
    return 0;
}
