/* The test kernels executed on the device (lavapipe in CI) through vk/: each built for SPIR-V
 * 1.3 and for the device's version, validated in process, run, and its results checked against
 * the host. */
#include "kernels.h"
#include "vk_fixture.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

enum { MAX_BUFS = 4 };

/* The SPIR-V version the kernels are built for: the group runs twice, once for 1.3 without
 * LocalSizeId (the WorkgroupSize built-in path), once for the device's version. */
static uint32_t target_version;
static bool use_maintenance4;

/* A pipeline for kernel k with count specialization entries over data (may be 0/NULL). */
static vkd_pipeline *make_pipeline_spec(vk_fixture *f, kern_id k,
                                        const VkSpecializationMapEntry *entries, uint32_t n_entries,
                                        const void *data, size_t size) {
    const vkd_caps *caps = vkd_device_caps(f->dev);
    const uint32_t *words;
    size_t count;
    base_error err = {0};
    uint32_t version = target_version ? target_version : caps->spirv_version;
    bool m4 = use_maintenance4 && caps->maintenance4;
    spv_builder *b = kern_build(k, version, m4, NULL, &words, &count, &err);
    if (!b)
        fail_msg("%s: %s", kern_defs[k].name, base_error_message(&err));
    if (spv_validate(words, count, caps->api_version, &err) != KILN_OK)
        fail_msg("%s: %s", kern_defs[k].name, base_error_message(&err));
    spv_debug_dump(words, count, kern_defs[k].name);
    vkd_pipeline_desc desc = {.code = words,
                              .word_count = count,
                              .binding_count = kern_defs[k].bindings,
                              .push_constant_size = kern_defs[k].push_size,
                              .spec_entries = entries,
                              .spec_entry_count = n_entries,
                              .spec_data = data,
                              .spec_data_size = size,
                              .debug_name = kern_defs[k].name};
    vkd_pipeline *pipe = NULL;
    if (vkd_pipeline_create(f->dev, &desc, &pipe, &err) != KILN_OK)
        fail_msg("%s: %s", kern_defs[k].name, base_error_message(&err));
    spv_builder_destroy(b);
    return pipe;
}

/* A pipeline for kernel k; wg_x != 0 specializes the workgroup size (spec ids 0..2). */
static vkd_pipeline *make_pipeline(vk_fixture *f, kern_id k, uint32_t wg_x) {
    uint32_t spec[3] = {wg_x, 1, 1};
    VkSpecializationMapEntry entries[3] = {
        {KERN_SPEC_WG_X, 0, 4}, {KERN_SPEC_WG_Y, 4, 4}, {KERN_SPEC_WG_Z, 8, 4}};
    return wg_x ? make_pipeline_spec(f, k, entries, 3, spec, sizeof spec)
                : make_pipeline_spec(f, k, NULL, 0, NULL, 0);
}

typedef struct buf_spec {
    void *data; /* uploaded before, downloaded into after the dispatch */
    size_t size;
} buf_spec;

/* Runs pipe over groups_x workgroups with buffers bufs (bindings 0..n-1). */
static void run(vk_fixture *f, const vkd_pipeline *pipe, buf_spec *bufs, uint32_t n,
                const void *push, uint32_t push_size, uint32_t groups_x) {
    vkd_buffer *vb[MAX_BUFS] = {0};
    vkd_binding bind[MAX_BUFS] = {0};
    base_error *err = &f->err;
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(vkd_buffer_create(f->dev, bufs[i].size, &vb[i], err), KILN_OK);
        assert_int_equal(vkd_buffer_upload(vb[i], 0, bufs[i].data, bufs[i].size, err), KILN_OK);
        bind[i].buffer = vb[i];
    }
    vkd_batch *batch = NULL;
    assert_int_equal(vkd_batch_create(f->dev, &batch, err), KILN_OK);
    const uint32_t groups[3] = {groups_x, 1, 1};
    if (vkd_batch_dispatch(batch, pipe, bind, n, push, push_size, groups, err) != KILN_OK ||
        vkd_batch_submit(batch, err) != KILN_OK)
        fail_msg("dispatch: %s", base_error_message(err));
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(vkd_buffer_download(vb[i], 0, bufs[i].data, bufs[i].size, err), KILN_OK);
        vkd_buffer_destroy(vb[i]);
    }
    vkd_batch_destroy(batch);
    vk_fixture_assert_no_messages(f);
}

static void test_spirv_exec_vadd_respects_push_constant_length(void **state) {
    vk_fixture *f = *state;
    enum { N = 1000, CAP = 1024 };
    static float a[CAP], b[CAP], c[CAP];
    for (int i = 0; i < CAP; i++) {
        a[i] = (float)i * 0.5f;
        b[i] = 1000.0f - (float)i;
        c[i] = -1.0f;
    }
    vkd_pipeline *pipe = make_pipeline(f, KERN_VADD, 64);
    buf_spec bufs[3] = {{a, sizeof a}, {b, sizeof b}, {c, sizeof c}};
    uint32_t n = N;
    run(f, pipe, bufs, 3, &n, sizeof n, CAP / 64);
    for (int i = 0; i < CAP; i++)
        assert_float_equal(c[i], i < N ? a[i] + b[i] : -1.0f, 0.0f);
    vkd_pipeline_destroy(pipe);
}

static void test_spirv_exec_loop_with_phi_sums_each_row(void **state) {
    vk_fixture *f = *state;
    enum { N = 100, M = 37 };
    static float a[N * M], out[128];
    for (int i = 0; i < N * M; i++)
        a[i] = (float)((i / M + i % M) % 7);
    vkd_pipeline *pipe = make_pipeline(f, KERN_LOOP_PHI, 64);
    buf_spec bufs[2] = {{a, sizeof a}, {out, sizeof out}};
    uint32_t push[2] = {N, M};
    run(f, pipe, bufs, 2, push, sizeof push, 2);
    for (int i = 0; i < N; i++) {
        float want = 0;
        for (int k = 0; k < M; k++)
            want += a[i * M + k];
        assert_float_equal(out[i], want, 0.0f);
    }
    vkd_pipeline_destroy(pipe);
}

static void test_spirv_exec_workgroup_reduction_sums_each_group(void **state) {
    vk_fixture *f = *state;
    enum { GROUPS = 16, WG = 64 };
    static float in[GROUPS * WG], out[GROUPS];
    for (int i = 0; i < GROUPS * WG; i++)
        in[i] = (float)(i % 13) - 3.0f;
    vkd_pipeline *pipe = make_pipeline(f, KERN_WG_REDUCE, 0);
    buf_spec bufs[2] = {{in, sizeof in}, {out, sizeof out}};
    run(f, pipe, bufs, 2, NULL, 0, GROUPS);
    for (int w = 0; w < GROUPS; w++) {
        float want = 0;
        for (int i = 0; i < WG; i++)
            want += in[w * WG + i];
        assert_float_equal(out[w], want, 0.0f);
    }
    vkd_pipeline_destroy(pipe);
}

static void test_spirv_exec_subgroup_reduction_and_atomic_total(void **state) {
    vk_fixture *f = *state;
    const vkd_caps *caps = vkd_device_caps(f->dev);
    VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT |
                                  VK_SUBGROUP_FEATURE_ARITHMETIC_BIT |
                                  VK_SUBGROUP_FEATURE_BALLOT_BIT;
    if ((caps->subgroup_operations & need) != need || caps->subgroup_size == 0) {
        skip();
        return;
    }
    enum { N = 256 };
    static uint32_t in[N], out[N], total[1];
    total[0] = 0;
    uint32_t all = 0;
    for (uint32_t i = 0; i < N; i++) {
        in[i] = i * 3 + 1;
        all += in[i];
    }
    vkd_pipeline *pipe = make_pipeline(f, KERN_SUBGROUP, 64);
    buf_spec bufs[3] = {{in, sizeof in}, {out, sizeof out}, {total, sizeof total}};
    run(f, pipe, bufs, 3, NULL, 0, N / 64);
    assert_int_equal(total[0], all);
    /* Subgroups of a 1-D workgroup are runs of consecutive invocations (true on lavapipe and on
     * the drivers we know; the sum over each run is what each invocation sees). */
    uint32_t s = caps->subgroup_size;
    for (uint32_t i = 0; i < N; i++) {
        uint32_t want = 0;
        for (uint32_t j = i / s * s; j < i / s * s + s; j++)
            want += in[j];
        assert_int_equal(out[i], want);
    }
    vkd_pipeline_destroy(pipe);
}

static void test_spirv_exec_spec_constant_chooses_workgroup_size(void **state) {
    vk_fixture *f = *state;
    enum { N = 256 };
    const uint32_t sizes[2] = {64, 16};
    for (int t = 0; t < 2; t++) {
        static uint32_t out[N];
        memset(out, 0xff, sizeof out);
        vkd_pipeline *pipe = make_pipeline(f, KERN_SPEC_WG, sizes[t]);
        buf_spec bufs[1] = {{out, sizeof out}};
        run(f, pipe, bufs, 1, NULL, 0, N / sizes[t]);
        for (uint32_t i = 0; i < N; i++)
            assert_int_equal(out[i], sizes[t] * 1000 + i % sizes[t]);
        vkd_pipeline_destroy(pipe);
    }
}

static void test_spirv_exec_math_matches_host(void **state) {
    vk_fixture *f = *state;
    enum { N = 256 };
    static float x[N], y[N];
    static uint32_t u[N], v[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i / 16.0f - 5.3f;
        u[i] = (uint32_t)i * 2654435761u;
    }
    vkd_pipeline *pipe = make_pipeline(f, KERN_MATH, 64);
    buf_spec bufs[4] = {{x, sizeof x}, {y, sizeof y}, {u, sizeof u}, {v, sizeof v}};
    run(f, pipe, bufs, 4, NULL, 0, N / 64);
    for (int i = 0; i < N; i++) {
        float xi = x[i];
        float want = (xi > 2.0f ? sqrtf(xi) : exp2f(xi)) + fmaf(xi, xi, 1.0f) + fmaxf(xi, 0.5f) -
                     (float)(int32_t)xi - xi;
        assert_float_equal(y[i], want, 1e-4f * (1.0f + fabsf(want)));
        uint32_t ui = u[i];
        uint32_t wantu = (((ui ^ 0x55u) << 1) | (ui & 3u)) + ui / 3 + ui % 5 +
                         (ui < 1000 ? ui : 1000) - (ui >> 2);
        assert_int_equal(v[i], wantu);
    }
    vkd_pipeline_destroy(pipe);
}

/* binary16 <-> float for values that are exact in both. */
static uint16_t to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) == 0)
        return (uint16_t)(x >> 16);
    uint32_t sign = x >> 16 & 0x8000u;
    int e = (int)(x >> 23 & 0xff) - 127 + 15;
    assert_true(e > 0 && e < 31 && (x & 0x1fffu) == 0);
    return (uint16_t)(sign | (uint32_t)e << 10 | (x >> 13 & 0x3ffu));
}

static float from_half(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = h >> 10 & 0x1fu, m = h & 0x3ffu;
    uint32_t x = e == 0 && m == 0 ? sign : sign | (e - 15 + 127) << 23 | m << 13;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static void test_spirv_exec_bool_float_int_spec_constants_take_values(void **state) {
    vk_fixture *f = *state;
    enum { N = 128 };
    static float out[N];
    struct {
        VkBool32 flag;
        float scale;
        int32_t offset;
    } spec = {VK_TRUE, 0.5f, -3};
    VkSpecializationMapEntry entries[3] = {
        {KERN_SPEC_FLAG, 0, 4}, {KERN_SPEC_SCALE, 4, 4}, {KERN_SPEC_OFFSET, 8, 4}};
    for (int t = 0; t < 2; t++) { /* the defaults, then the values above */
        vkd_pipeline *pipe = t ? make_pipeline_spec(f, KERN_SPEC, entries, 3, &spec, sizeof spec)
                               : make_pipeline(f, KERN_SPEC, 0);
        buf_spec bufs[1] = {{out, sizeof out}};
        run(f, pipe, bufs, 1, NULL, 0, N / 64);
        for (int i = 0; i < N; i++)
            assert_float_equal(out[i], t ? 0.5f * (float)i - 3.0f : -1.0f * (float)i + 7.0f, 0.0f);
        vkd_pipeline_destroy(pipe);
    }
}

static void test_spirv_exec_atomics_count_and_combine(void **state) {
    vk_fixture *f = *state;
    enum { N = 512 };
    static uint32_t counters[4], out[N];
    memset(counters, 0, sizeof counters);
    vkd_pipeline *pipe = make_pipeline(f, KERN_ATOMICS, 64);
    buf_spec bufs[2] = {{counters, sizeof counters}, {out, sizeof out}};
    run(f, pipe, bufs, 2, NULL, 0, N / 64);
    assert_int_equal(counters[0], N);
    assert_int_equal(counters[1], N - 1);
    assert_true(counters[2] >= 1 && counters[2] <= N); /* exactly one exchange won */
    assert_int_equal(counters[3], 0xffffffffu);
    static bool seen[N];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < N; i++) { /* the old values of IAdd: a permutation of 0..N-1 */
        assert_true(out[i] < N);
        assert_false(seen[out[i]]);
        seen[out[i]] = true;
    }
    vkd_pipeline_destroy(pipe);
}

static void test_spirv_exec_vector_ops_match_host(void **state) {
    vk_fixture *f = *state;
    enum { N = 128 };
    static float in[N][4], out[N][4], sums[N];
    for (int i = 0; i < N; i++)
        for (int k = 0; k < 4; k++)
            in[i][k] = (float)((i * 4 + k) % 11) * 0.5f;
    vkd_pipeline *pipe = make_pipeline(f, KERN_VECTORS, 64);
    buf_spec bufs[3] = {{in, sizeof in}, {out, sizeof out}, {sums, sizeof sums}};
    run(f, pipe, bufs, 3, NULL, 0, N / 64);
    for (int i = 0; i < N; i++) {
        float s = 0;
        for (int k = 0; k < 4; k++) {
            float c = (float)(k + 1), v = in[i][k];
            float want = v < c ? v * c : v;
            assert_float_equal(out[i][k], want, 0.0f);
            s += want;
        }
        assert_float_equal(sums[i], s, 1e-5f);
    }
    vkd_pipeline_destroy(pipe);
}

static void test_spirv_exec_int64_and_float64_match_host(void **state) {
    vk_fixture *f = *state;
    const vkd_caps *caps = vkd_device_caps(f->dev);
    if (!caps->int64 || !caps->float64) {
        skip();
        return;
    }
    enum { N = 128 };
    static uint32_t u[N];
    static uint64_t w[N];
    static double d[N];
    for (uint32_t i = 0; i < N; i++)
        u[i] = 0xfffffff0u - i * 77777u;
    vkd_pipeline *pipe = make_pipeline(f, KERN_WIDE, 64);
    buf_spec bufs[3] = {{u, sizeof u}, {w, sizeof w}, {d, sizeof d}};
    run(f, pipe, bufs, 3, NULL, 0, N / 64);
    for (int i = 0; i < N; i++) {
        assert_int_equal(w[i], (uint64_t)u[i] * 0x100000001u + 7);
        double want = (double)u[i] / 3.0; /* Vulkan does not require a correctly rounded FDiv */
        assert_true(fabs(d[i] - want) <= 1e-12 * want);
    }
    vkd_pipeline_destroy(pipe);
}

static void test_spirv_exec_f16_storage_round_trips(void **state) {
    vk_fixture *f = *state;
    const vkd_caps *caps = vkd_device_caps(f->dev);
    if (!caps->storage_buffer_16bit || !caps->float16) {
        skip();
        return;
    }
    enum { N = 128 };
    static uint16_t in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = to_half((float)i * 0.25f - 8.0f);
    vkd_pipeline *pipe = make_pipeline(f, KERN_F16, 64);
    buf_spec bufs[2] = {{in, sizeof in}, {out, sizeof out}};
    run(f, pipe, bufs, 2, NULL, 0, N / 64);
    for (int i = 0; i < N; i++)
        assert_float_equal(from_half(out[i]), from_half(in[i]) * 2.0f + 1.0f, 0.0f);
    vkd_pipeline_destroy(pipe);
}

static void test_spirv_exec_i8_storage_wraps_like_c(void **state) {
    vk_fixture *f = *state;
    const vkd_caps *caps = vkd_device_caps(f->dev);
    if (!caps->storage_buffer_8bit || !caps->int8) {
        skip();
        return;
    }
    enum { N = 256 };
    static int8_t in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = (int8_t)(i - 128);
    vkd_pipeline *pipe = make_pipeline(f, KERN_I8, 64);
    buf_spec bufs[2] = {{in, sizeof in}, {out, sizeof out}};
    run(f, pipe, bufs, 2, NULL, 0, N / 64);
    for (int i = 0; i < N; i++)
        assert_int_equal(out[i], (int8_t)(uint8_t)(in[i] * 3 - 1));
    vkd_pipeline_destroy(pipe);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spirv_exec_vadd_respects_push_constant_length),
        cmocka_unit_test(test_spirv_exec_loop_with_phi_sums_each_row),
        cmocka_unit_test(test_spirv_exec_workgroup_reduction_sums_each_group),
        cmocka_unit_test(test_spirv_exec_subgroup_reduction_and_atomic_total),
        cmocka_unit_test(test_spirv_exec_spec_constant_chooses_workgroup_size),
        cmocka_unit_test(test_spirv_exec_math_matches_host),
        cmocka_unit_test(test_spirv_exec_bool_float_int_spec_constants_take_values),
        cmocka_unit_test(test_spirv_exec_atomics_count_and_combine),
        cmocka_unit_test(test_spirv_exec_vector_ops_match_host),
        cmocka_unit_test(test_spirv_exec_int64_and_float64_match_host),
        cmocka_unit_test(test_spirv_exec_f16_storage_round_trips),
        cmocka_unit_test(test_spirv_exec_i8_storage_wraps_like_c),
    };
    if (getenv("KILN_TEST_FILTER"))
        cmocka_set_test_filter(getenv("KILN_TEST_FILTER"));
    target_version = 0x10300;
    use_maintenance4 = false;
    int failed =
        cmocka_run_group_tests_name("spirv_exec_1_3", tests, vk_fixture_setup, vk_fixture_teardown);
    target_version = 0; /* the device's version */
    use_maintenance4 = true;
    failed += cmocka_run_group_tests_name("spirv_exec_device", tests, vk_fixture_setup,
                                          vk_fixture_teardown);
    return failed;
}
