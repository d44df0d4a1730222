/* bench_spirv: the time to build and serialize a compute kernel of about 200 instructions with
 * spirv/, against glslc compiling the equivalent GLSL (a subprocess, as a user of GLSL would run
 * it; skipped with a message when glslc is absent).
 *
 * The kernel: t = x = a[i]; STEPS times { m = t * x + c_k; t = m > 0 ? m : -m; }; b[i] = t, for
 * i < n (a push constant), workgroup size from a specialization constant. */
#include "bench_util.h"
#include "spv.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { STEPS = 38, BUILD_RUNS = 2001, GLSLC_RUNS = 11 };

static float coef(int k) {
    return 0.25f + 0.125f * (float)(k % 7) - 0.0625f * (float)(k % 3);
}

/* Builds the kernel; returns the word count (0 on error). */
static size_t build(uint32_t version, const uint32_t **words, spv_builder **out) {
    spv_builder *b = NULL;
    if (spv_builder_create(&(spv_builder_options){.version = version}, &b, NULL) != KILN_OK)
        return 0;
    spv_id f32 = spv_type_float(b, 32), u32 = spv_type_int(b, 32, false);
    spv_id a = spv_storage_buffer(b, f32, 0, 0, SPV_ACCESS_READ);
    spv_id out_buf = spv_storage_buffer(b, f32, 0, 1, SPV_ACCESS_WRITE);
    spv_id pc = spv_push_constants(b, 1, &u32, NULL);
    spv_id fn = spv_function_begin(b, "main");
    spv_workgroup_size_spec(b, fn, (const uint32_t[]){0, 1, 2}, (const uint32_t[]){64, 1, 1}, NULL);
    spv_id i =
        spv_composite_extract(b, spv_load(b, spv_builtin(b, SpvBuiltInGlobalInvocationId)), 0);
    spv_id then = spv_label(b), merge = spv_label(b);
    spv_id in_range = spv_binop(b, SpvOpULessThan, i, spv_push_constant_load(b, pc, 0));
    spv_selection_merge(b, merge);
    spv_branch_cond(b, in_range, then, merge);
    spv_block(b, then);
    spv_id x = spv_load(b, spv_buffer_element(b, a, i)), t = x;
    spv_id zero = spv_const_f32(b, 0.0f);
    for (int k = 0; k < STEPS; k++) {
        spv_id m =
            spv_binop(b, SpvOpFAdd, spv_binop(b, SpvOpFMul, t, x), spv_const_f32(b, coef(k)));
        t = spv_select(b, spv_binop(b, SpvOpFOrdGreaterThan, m, zero), m,
                       spv_unop(b, SpvOpFNegate, m));
    }
    spv_store(b, spv_buffer_element(b, out_buf, i), t);
    spv_branch(b, merge);
    spv_block(b, merge);
    spv_return(b);
    spv_function_end(b);
    size_t count = 0;
    if (spv_builder_finish(b, words, &count, NULL) != KILN_OK) {
        spv_builder_destroy(b);
        return 0;
    }
    *out = b;
    return count;
}

static size_t count_instructions(const uint32_t *w, size_t n) {
    size_t count = 0;
    for (size_t i = 5; i < n; i += w[i] >> SpvWordCountShift)
        count++;
    return count;
}

static void write_glsl(FILE *f) {
    fprintf(f, "#version 450\n"
               "layout(local_size_x_id = 0) in;\n"
               "layout(std430, binding = 0) readonly buffer A { float a[]; };\n"
               "layout(std430, binding = 1) writeonly buffer B { float b[]; };\n"
               "layout(push_constant) uniform P { uint n; };\n"
               "void main() {\n"
               "    uint i = gl_GlobalInvocationID.x;\n"
               "    if (i < n) {\n"
               "        float x = a[i], t = x, m;\n");
    for (int k = 0; k < STEPS; k++)
        fprintf(f, "        m = t * x + %.9g; t = m > 0.0 ? m : -m;\n", (double)coef(k));
    fprintf(f, "        b[i] = t;\n    }\n}\n");
}

/* Runs glslc once; returns its wall time, or -1 when it could not run or failed. */
static double run_glslc(char *src, char *dst) {
    /* posix_spawn takes char *const argv[]: mutable copies of the literals. */
    static char arg0[] = "glslc", arg1[] = "--target-env=vulkan1.1",
                arg2[] = "-fshader-stage=compute", arg3[] = "-o";
    char *argv[] = {arg0, arg1, arg2, arg3, dst, src, NULL};
    pid_t pid;
    double t0 = (bench_now_ms() * 1e-3);
    if (posix_spawnp(&pid, "glslc", NULL, NULL, argv, environ) != 0)
        return -1;
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    return (bench_now_ms() * 1e-3) - t0;
}

/* The median wall time of glslc compiling the GLSL kernel, or -1 when glslc is absent or fails;
 * *words gets the size of what glslc wrote. */
static double glslc_median(long *words) {
    *words = 0;
    char dir[] = "/tmp/kiln_bench_spirv_XXXXXX";
    if (!mkdtemp(dir))
        return -1;
    char src[64], dst[64];
    snprintf(src, sizeof src, "%s/k.comp", dir);
    snprintf(dst, sizeof dst, "%s/k.spv", dir);
    FILE *f = fopen(src, "w");
    if (f) {
        write_glsl(f);
        fclose(f);
    }
    double t[GLSLC_RUNS];
    int ok = 0;
    while (f && ok < GLSLC_RUNS && (t[ok] = run_glslc(src, dst)) >= 0)
        ok++;
    FILE *g = ok ? fopen(dst, "rb") : NULL;
    if (g) {
        fseek(g, 0, SEEK_END);
        *words = ftell(g) / 4;
        fclose(g);
    }
    remove(src);
    remove(dst);
    rmdir(dir);
    return ok == GLSLC_RUNS ? bench_median(t, GLSLC_RUNS) : -1;
}

int main(void) {
    const uint32_t *words = NULL;
    spv_builder *b = NULL;
    size_t n = build(0x10300, &words, &b);
    if (!n) {
        fprintf(stderr, "bench_spirv: building the kernel failed\n");
        return 1;
    }
    size_t insts = count_instructions(words, n);
    if (spv_tools_available() && spv_validate(words, n, (1u << 22) | (1u << 12), NULL) != KILN_OK) {
        fprintf(stderr, "bench_spirv: the kernel does not validate\n");
        return 1;
    }
    spv_builder_destroy(b);

    static double t_build[BUILD_RUNS];
    for (int r = 0; r < BUILD_RUNS; r++) {
        double t0 = (bench_now_ms() * 1e-3);
        n = build(0x10300, &words, &b);
        t_build[r] = (bench_now_ms() * 1e-3) - t0;
        spv_builder_destroy(b);
    }
    double kiln = bench_median(t_build, BUILD_RUNS);
    long glslc_words;
    double ref = glslc_median(&glslc_words);
    printf("%-30s %12s %12s %9s %s\n", "case", "kiln", "glslc", "ratio", "throughput");
    printf("%-30s %9.2f us", "build+serialize 1 kernel", kiln * 1e6);
    if (ref < 0)
        printf(" %12s %9s %.0f kernels/s\nbench_spirv: glslc absent or failing: reference "
               "skipped\n",
               "-", "-", 1.0 / kiln);
    else
        printf(" %9.2f ms %8.0fx %.0f kernels/s\n", ref * 1e3, ref / kiln, 1.0 / kiln);
    printf("kernel: %zu instructions, %zu words (glslc: %ld words); medians of %d builds and %d "
           "glslc runs\n",
           insts, n, glslc_words, BUILD_RUNS, GLSLC_RUNS);
    return 0;
}
