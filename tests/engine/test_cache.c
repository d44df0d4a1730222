/* engine/ + shaders_cache/: compiled kernels persist across runs. A second process running the
 * same program compiles nothing (every kernel is a disk hit) and computes the identical
 * result; corrupt entries are misses and are replaced; a symbolic kernel found on disk serves
 * a new bound value; the variants of a view offset's alignment come back from disk, those
 * that share another's code too. The test runs itself as the second process. */
#include "eng.h"
#include "vk_fixture.h"

#include <kiln/kiln.h>

#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char cache_dir[64];

/* The program both processes run: a small attention-shaped computation over a symbolic row
 * count. Returns its statistics and writes 4 * 8 results. */
static kiln_stats program(int64_t rows, float *out) {
    kiln_context *ctx = NULL;
    assert_int_equal(kiln_context_create(&(kiln_context_options){.cache_dir = cache_dir}, &ctx),
                     KILN_OK);
    const kiln_expr *n = kiln_variable(ctx, "rows", 1, 64);
    const kiln_expr *b = kiln_bind(ctx, n, rows);
    kiln_tensor *q =
        kiln_randn_sym(ctx, KILN_F32, 2, (const kiln_expr *[]){b, kiln_int(ctx, 8)}, 1);
    kiln_tensor *k = kiln_randn(ctx, KILN_F32, 2, (int64_t[]){8, 8}, 2);
    kiln_tensor *y = kiln_softmax(kiln_matmul(q, kiln_transpose(k, 0, 1)), -1);
    assert_int_equal(kiln_read(y, out, sizeof(float) * 8 * (size_t)rows), KILN_OK);
    kiln_stats s = kiln_context_stats(ctx);
    kiln_context_destroy(ctx);
    return s;
}

/* The second process: the same program must compile nothing and match the first's results. */
static int child(const char *dir, int64_t rows, const char *expected_path) {
    snprintf(cache_dir, sizeof cache_dir, "%s", dir);
    float got[64 * 8], want[64 * 8];
    kiln_stats s = program(rows, got);
    FILE *f = fopen(expected_path, "rb");
    size_t n = f ? fread(want, sizeof(float), 8 * (size_t)rows, f) : 0;
    if (f)
        fclose(f);
    if (n != 8 * (size_t)rows || memcmp(got, want, n * sizeof(float)) != 0) {
        fprintf(stderr, "child: results differ from the first process\n");
        return 2;
    }
    if (s.kernels_compiled != 0 || s.disk_misses != 0 || s.disk_hits == 0 || s.codegen_ns != 0) {
        fprintf(stderr, "child: compiled %llu (%llu ns), disk hits %llu, misses %llu\n",
                (unsigned long long)s.kernels_compiled, (unsigned long long)s.codegen_ns,
                (unsigned long long)s.disk_hits, (unsigned long long)s.disk_misses);
        return 3;
    }
    return 0;
}

/* Rows 1..10 of a (16, 37) table (their offsets of every residue modulo 8; no kernel of 37
 * outputs has vectors: one kernel, the other residues its aliases) and 16384 elements from
 * starts 8, 4, 1 and 2 (octets, fours, none, and an alias of none), each doubled and checked
 * here. Returns the statistics; *ok is false when a value is wrong. */
static bool gpu_tuned; /* the context's kernels are tuned as for a GPU (eng.h) */
static bool octets;    /* the context moves octets, its offsets' variants modulo 8 */

static kiln_stats offsets_program(bool *ok) {
    kiln_context *ctx = NULL;
    assert_int_equal(kiln_context_create(&(kiln_context_options){.cache_dir = cache_dir}, &ctx),
                     KILN_OK);
    enum { ROWS = 16, COLS = 37, N = 65536 + 64, LEN = 16384 };
    static float x[N], y[LEN];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i % 1009) - 500.0f;
    kiln_tensor *table = kiln_from_data(ctx, KILN_F32, 2, (int64_t[]){ROWS, COLS}, x);
    kiln_tensor *flat = kiln_from_data(ctx, KILN_F32, 1, (int64_t[]){N}, x);
    *ok = true;
    for (int64_t r = 1; r <= 10; r++) {
        kiln_tensor *row = kiln_mul_scalar(kiln_select(table, 0, r), 2);
        assert_int_equal(kiln_read(row, y, sizeof(float) * COLS), KILN_OK);
        for (int j = 0; j < COLS; j++)
            *ok = *ok && y[j] == 2 * x[r * COLS + j];
    }
    static const int64_t starts[] = {8, 4, 1, 2};
    for (int i = 0; i < 4; i++) {
        kiln_tensor *v = kiln_mul_scalar(kiln_narrow(flat, 0, starts[i], LEN), 2);
        assert_int_equal(kiln_read(v, y, sizeof y), KILN_OK);
        for (int j = 0; j < LEN; j++)
            *ok = *ok && y[j] == 2 * x[starts[i] + j];
    }
    kiln_stats s = kiln_context_stats(ctx);
    gpu_tuned = ctx->parallelism > 2048;
    /* eng_runtime_tune: a CPU device moves octets as paired vectors of four, through 64-bit
     * integers (the interpreter moves them too) */
    octets = ctx->interpreter || (!gpu_tuned && vkd_device_caps(ctx->dev)->int64);
    kiln_context_destroy(ctx);
    return s;
}

/* The second process of the offsets program: every variant, aliases included, from disk. */
static int child_offsets(const char *dir) {
    snprintf(cache_dir, sizeof cache_dir, "%s", dir);
    bool ok;
    kiln_stats s = offsets_program(&ok);
    if (!ok) {
        fprintf(stderr, "child: wrong values\n");
        return 2;
    }
    if (s.kernels_compiled != 0 || s.disk_misses != 0 || s.disk_hits == 0 || s.codegen_ns != 0) {
        fprintf(stderr, "child: compiled %llu (%llu ns), disk hits %llu, misses %llu\n",
                (unsigned long long)s.kernels_compiled, (unsigned long long)s.codegen_ns,
                (unsigned long long)s.disk_hits, (unsigned long long)s.disk_misses);
        return 3;
    }
    return 0;
}

static int run_child(int64_t rows, const char *expected_path) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/proc/%d/exe --child %s %lld %s", (int)getpid(), cache_dir,
             (long long)rows, expected_path);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void write_floats(const char *path, const float *v, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(v, sizeof(float), n, f), n);
    fclose(f);
}

static void test_engine_cache_second_process_compiles_nothing(void **state) {
    (void)state;
    float first[64 * 8];
    kiln_stats s = program(4, first);
    assert_true(s.kernels_compiled > 0);
    assert_true(s.codegen_ns > 0); /* generating them took time, and it was counted */
    assert_int_equal(s.disk_hits, 0);
    assert_int_equal(s.disk_misses, s.kernels_compiled);
    char expected[128];
    snprintf(expected, sizeof expected, "%s/expected-4.bin", cache_dir);
    write_floats(expected, first, 4 * 8);
    assert_int_equal(run_child(4, expected), 0);
    /* A new bound value: the kernels are the same (the key abstracts bound values). */
    float wider[64 * 8];
    kiln_stats w = program(9, wider);
    assert_int_equal(w.kernels_compiled, 0);
    assert_int_equal(w.codegen_ns, 0); /* a pipeline from stored words generates nothing */
    assert_int_equal(w.disk_hits, s.kernels_compiled);
}

/* Lifted offsets (engine/schedule/kernel.c) on disk: a variant asked for by an offset's residue
 * finds its code, or the way to the code it shares with another residue, and a second process
 * compiles nothing. */
static void test_engine_cache_offsets_of_every_alignment(void **state) {
    (void)state;
    bool ok;
    kiln_stats s = offsets_program(&ok);
    assert_true(ok);
    /* the rows; the starts: octets, fours, odd and even pairs (a GPU-tuned context loads no
     * vectors in elementwise kernels: the rows and the starts; a CPU device without shaderInt64
     * moves no octets, its variants are the starts modulo 4: 8 and 4 share the fours' kernel) */
    assert_int_equal(s.kernels_compiled, gpu_tuned ? 2 : octets ? 5 : 4);
    assert_int_equal(s.disk_misses, s.kernels_compiled);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/proc/%d/exe --child-offsets %s", (int)getpid(), cache_dir);
    int status = system(cmd);
    assert_int_equal(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
}

/* Flips one byte in the middle of every cache entry. */
static int corrupt_entries(void) {
    DIR *d = opendir(cache_dir);
    assert_non_null(d);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 3 || strcmp(e->d_name + len - 3, ".kc") != 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", cache_dir, e->d_name);
        FILE *f = fopen(path, "r+b");
        assert_non_null(f);
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fseek(f, size / 2, SEEK_SET);
        int c = fgetc(f);
        fseek(f, size / 2, SEEK_SET);
        fputc(c ^ 0x5a, f);
        fclose(f);
        count++;
    }
    closedir(d);
    return count;
}

static void test_engine_cache_corrupt_entries_are_misses_and_replaced(void **state) {
    (void)state;
    float a[64 * 8], b[64 * 8], c[64 * 8];
    kiln_stats s = program(5, a);
    assert_true(corrupt_entries() > 0);
    kiln_stats again = program(5, b);
    assert_int_equal(again.disk_hits, 0); /* every entry is corrupt: never handed to Vulkan */
    assert_int_equal(again.kernels_compiled, s.kernels_compiled + s.disk_hits);
    assert_memory_equal(a, b, sizeof(float) * 5 * 8);
    kiln_stats third = program(5, c); /* the entries were replaced */
    assert_int_equal(third.kernels_compiled, 0);
    assert_memory_equal(a, c, sizeof(float) * 5 * 8);
}

/* Ends the test program with a failure when a context blocks, rather than hanging CI. */
static void hang_guard(int sig) {
    (void)sig;
    static const char msg[] = "a context blocked reading its cache (on a FIFO?)\n";
    ssize_t n = write(2, msg, sizeof msg - 1);
    (void)n;
    _exit(3);
}

/* A FIFO in place of every file a run of the program reads from its cache directory (its
 * entries, the pipeline blob): each is a miss, never a hang (opening a FIFO for reading waits
 * for a writer), and the program computes what it computes without a cache. */
static void test_engine_cache_fifo_entries_are_misses(void **state) {
    (void)state;
    char saved[sizeof cache_dir], fifos[sizeof cache_dir];
    snprintf(saved, sizeof saved, "%s", cache_dir);
    float want[64 * 8], got[64 * 8];
    kiln_stats s = program(3, want); /* the entries, in cache_dir */
    assert_true(s.kernels_compiled + s.disk_hits > 0);
    snprintf(fifos, sizeof fifos, "/tmp/kiln-cache-fifo-XXXXXX");
    assert_non_null(mkdtemp(fifos));
    DIR *d = opendir(cache_dir);
    assert_non_null(d);
    int made = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || strstr(e->d_name, ".bin"))
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", fifos, e->d_name);
        assert_int_equal(mkfifo(path, 0600), 0);
        made++;
    }
    closedir(d);
    assert_true(made > 0);
    snprintf(cache_dir, sizeof cache_dir, "%s", fifos);
    void (*old)(int) = signal(SIGALRM, hang_guard);
    alarm(120);
    kiln_stats f = program(3, got);
    alarm(0);
    signal(SIGALRM, old);
    assert_int_equal(f.disk_hits, 0);
    assert_int_equal(f.kernels_compiled, s.kernels_compiled + s.disk_hits);
    assert_memory_equal(want, got, sizeof(float) * 3 * 8);
    snprintf(cache_dir, sizeof cache_dir, "%s", saved);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fifos);
    assert_int_equal(system(cmd), 0);
}

/* A cache directory whose name is too long for any path (over 4 KB) turns the cache off
 * with a warning: the context is made and computes (its creation used to fail). */
static void test_engine_cache_too_long_directory_turns_the_cache_off(void **state) {
    (void)state;
    static char dir[5000];
    memset(dir, 'd', sizeof dir - 1);
    memcpy(dir, "/tmp/", 5);
    for (int from_env = 0; from_env < 2; from_env++) {
        kiln_context *ctx = NULL;
        kiln_context_options opt = {.cache_dir = from_env ? NULL : dir, .validation = true};
        if (from_env)
            setenv("KILN_CACHE_DIR", dir, 1);
        kiln_status st = kiln_context_create(&opt, &ctx);
        unsetenv("KILN_CACHE_DIR");
        assert_int_equal(st, KILN_OK);
        float y[3];
        assert_int_equal(
            kiln_read(kiln_exp(kiln_zeros(ctx, KILN_F32, 1, (int64_t[]){3})), y, sizeof y),
            KILN_OK);
        assert_true(y[0] == 1 && y[2] == 1);
        kiln_stats s = kiln_context_stats(ctx);
        assert_int_equal(s.disk_hits, 0);
        kiln_context_destroy(ctx);
    }
}

static int setup(void **state) {
    (void)state;
    vk_fixture_keep_drivers_loaded();
    snprintf(cache_dir, sizeof cache_dir, "/tmp/kiln-cache-test-XXXXXX");
    if (!mkdtemp(cache_dir))
        return -1;
    setenv("KILN_CACHE", "1", 1); /* the suite turns the disk cache off elsewhere */
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--child") == 0) {
        vk_fixture_keep_drivers_loaded();
        setenv("KILN_CACHE", "1", 1);
        return child(argv[2], strtoll(argv[3], NULL, 10), argv[4]);
    }
    if (argc == 3 && strcmp(argv[1], "--child-offsets") == 0) {
        vk_fixture_keep_drivers_loaded();
        setenv("KILN_CACHE", "1", 1);
        return child_offsets(argv[2]);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_cache_second_process_compiles_nothing),
        cmocka_unit_test(test_engine_cache_offsets_of_every_alignment),
        cmocka_unit_test(test_engine_cache_corrupt_entries_are_misses_and_replaced),
        cmocka_unit_test(test_engine_cache_fifo_entries_are_misses),
        cmocka_unit_test(test_engine_cache_too_long_directory_turns_the_cache_off),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
