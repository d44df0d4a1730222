/* examples/train_fashion.c's network and training step (examples/fashion_net.c) on the real
 * Fashion-MNIST files ($KILN_FASHION_DATA, else /usr/share/datasets/fashion-mnist: Debian's
 * dataset-fashion-mnist, which ./kiln.sh test installs).
 *
 * On the default Vulkan device (validation on), the example's step at its batch (64) on a
 * narrower model (4 and 8 channels, Adam lr 1e-2: lavapipe runs the full model's step in
 * seconds, too slow for a test), TRAIN_STEPS steps: the loss (the mean of the last five
 * steps) falls below half the first step's; no step after the first compiles a kernel, the
 * epoch's last, partial batch (60,000 mod 64 = 32 images) included, and every live count
 * (tensors, nodes, storages and their bytes, expressions) is the same after every step from the
 * second on; the test pass compiles only in its first batch; from the third step on, each kernel
 * is built once (the scheduler knows each build's dependencies from the step before), and from
 * the fourth every kernel is taken as the step before built it. On the
 * interpreter and on the device: two steps of a smaller model (2 and 2 channels, batch 2) from
 * the same parameters and data give the same losses and parameters; and on the device, four
 * such steps give the same losses, parameters and kernels a step whether builds learn from the
 * steps before or not, and the same losses and parameters, in fewer kernels, with the
 * convolutions computed inside their pools' windows or stored. */
#include "../../examples/fashion_net.h"

#include "engine_fixture.h"
#include "eng_testing.h"

#include <kiln/kiln.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* The device run's model and schedule: see the comment at the top. */
enum { C1 = 4, C2 = 8, BATCH = 64, TRAIN_STEPS = 25, PARTIAL = 60000 % 64, EVAL_BATCH = 100 };
static const double LR = 1e-2;

static idx_dataset train_set, test_set;

static bool load(const char *dir, const char *prefix, idx_dataset *set) {
    char images[1024], labels[1024], msg[IDX_MESSAGE_SIZE + 1024];
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    if (idx_dataset_load(images, labels, FNET_CLASSES, set, msg, sizeof msg) == IDX_OK)
        return true;
    fprintf(stderr,
            "test_train_fashion: %s\n(the Debian package dataset-fashion-mnist, which "
            "./kiln.sh test installs; $KILN_FASHION_DATA names another directory)\n",
            msg);
    return false;
}

static int setup(void **state) {
    (void)state;
    const char *dir = getenv("KILN_FASHION_DATA");
    dir = dir && *dir ? dir : "/usr/share/datasets/fashion-mnist";
    return load(dir, "train", &train_set) && load(dir, "t10k", &test_set) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    idx_dataset_finish(&train_set);
    idx_dataset_finish(&test_set);
    return 0;
}

static void expect_ok(kiln_context *ctx, kiln_status st, const char *what) {
    if (st != KILN_OK)
        fail_msg("%s: %s (%s)", what, kiln_status_string(st), kiln_context_message(ctx));
}

/* The live counts that must stay flat, as one comparable struct. */
typedef struct live {
    uint64_t tensors, nodes, storages, storage_bytes, expressions, compiled;
} live;

static live live_now(kiln_context *ctx) {
    kiln_stats s = kiln_context_stats(ctx);
    return (live){s.live_tensors,       s.live_nodes,       s.live_storages,
                  s.live_storage_bytes, s.live_expressions, s.kernels_compiled};
}

/* Fails unless got's counts are want's (the kernels compiled too, with compiled). */
static void expect_same(live want, live got, const char *when, bool compiled) {
    if (want.tensors != got.tensors || want.nodes != got.nodes || want.storages != got.storages ||
        want.storage_bytes != got.storage_bytes || want.expressions != got.expressions ||
        (compiled && want.compiled != got.compiled))
        fail_msg("%s: tensors %llu nodes %llu storages %llu (%llu bytes) expressions %llu "
                 "compiled %llu; after step 2: %llu %llu %llu (%llu) %llu %llu",
                 when, (unsigned long long)got.tensors, (unsigned long long)got.nodes,
                 (unsigned long long)got.storages, (unsigned long long)got.storage_bytes,
                 (unsigned long long)got.expressions, (unsigned long long)got.compiled,
                 (unsigned long long)want.tensors, (unsigned long long)want.nodes,
                 (unsigned long long)want.storages, (unsigned long long)want.storage_bytes,
                 (unsigned long long)want.expressions, (unsigned long long)want.compiled);
}

static void test_examples_train_fashion_loss_halves_with_flat_compiles_and_memory(void **state) {
    (void)state;
    kiln_context *ctx = eng_context_new(true);
    assert_non_null(ctx);
    fnet net;
    kiln_adam_options adam = kiln_adam_defaults();
    adam.lr = LR;
    const fnet_options o = {
        .c1 = C1, .c2 = C2, .batch = BATCH, .eval_batch = EVAL_BATCH, .seed = 1, .adam = adam};
    expect_ok(ctx, fnet_init(&net, ctx, &o), "fnet_init");
    uint32_t *order = malloc(sizeof(uint32_t) * (size_t)train_set.count);
    assert_non_null(order);
    for (int64_t i = 0; i < train_set.count; i++)
        order[i] = (uint32_t)i;
    uint64_t rng = 7;
    fnet_shuffle(order, train_set.count, &rng);
    float loss[TRAIN_STEPS + 1];
    uint64_t compiled_first = 0;
    live second = {0};
    for (int s = 0; s < TRAIN_STEPS; s++) {
        kiln_stats before = kiln_context_stats(ctx);
        expect_ok(ctx, fnet_train_step(&net, &train_set, order + BATCH * s, BATCH, &loss[s]),
                  "step");
        assert_true(isfinite(loss[s]));
        kiln_stats after = kiln_context_stats(ctx);
        uint64_t builds = after.kernel_builds - before.kernel_builds;
        uint64_t stopped = after.builds_stopped - before.builds_stopped;
        uint64_t replayed = after.builds_replayed - before.builds_replayed;
        uint64_t dispatches = after.dispatches - before.dispatches;
        /* From the third step each kernel is built once or taken from the last step; from the
         * fourth (the third keeps the kernels it builds) every kernel is taken, the optimizer's
         * updates too (they read its step count, a bound value that changes every step, as a
         * number: a parameter of the same kernels) */
        if (s >= 2 && (stopped != 0 || builds + replayed != dispatches || (s >= 3 && builds != 0)))
            fail_msg("step %d: %llu kernel builds (%llu stopped at a dependency) and %llu taken "
                     "from the last step for %llu kernels",
                     s + 1, (unsigned long long)builds, (unsigned long long)stopped,
                     (unsigned long long)replayed, (unsigned long long)dispatches);
        if (s == 0)
            compiled_first = kiln_context_stats(ctx).kernels_compiled;
        else if (s == 1) {
            second = live_now(ctx);
            assert_int_equal(second.compiled, compiled_first); /* the first step's kernels */
        } else
            expect_same(second, live_now(ctx), "a later step", true);
    }
    assert_true(compiled_first > 0);
    /* the first loss is about ln(10) (uniform predictions); the last five average below half */
    double last = 0;
    for (int s = TRAIN_STEPS - 5; s < TRAIN_STEPS; s++)
        last += loss[s] / 5.0;
    printf("loss: first %.4f, last five %.4f; kernels compiled: %llu in the first step, %llu in "
           "the second\n",
           loss[0], last, (unsigned long long)compiled_first,
           (unsigned long long)(second.compiled - compiled_first));
    assert_true(loss[0] > 1.9 && loss[0] < 2.8);
    if (!(last < loss[0] / 2))
        fail_msg("the loss went from %.4f to %.4f over %d steps", loss[0], last, TRAIN_STEPS);
    /* the test pass: compiles in its first batch only, and beats chance by far */
    int64_t right_a, right_b;
    expect_ok(ctx, fnet_evaluate(&net, &test_set, 0, EVAL_BATCH, &right_a), "evaluate");
    uint64_t after_first = kiln_context_stats(ctx).kernels_compiled;
    assert_true(after_first > second.compiled);
    expect_ok(ctx, fnet_evaluate(&net, &test_set, EVAL_BATCH, EVAL_BATCH, &right_b), "evaluate");
    assert_int_equal(kiln_context_stats(ctx).kernels_compiled, after_first);
    printf("test images right: %lld of %d\n", (long long)(right_a + right_b), 2 * EVAL_BATCH);
    assert_true(right_a + right_b > 2 * EVAL_BATCH * 4 / 10);
    /* the epoch's last, partial batch: the same live tensors, nodes and storages, no kernel
     * compiled (checked last, after the cleanup) */
    expect_ok(
        ctx,
        fnet_train_step(&net, &train_set, order + BATCH * TRAIN_STEPS, PARTIAL, &loss[TRAIN_STEPS]),
        "the partial step");
    live partial = live_now(ctx);
    partial.expressions = second.expressions; /* kernels compiled since hold expressions */
    expect_same(second, partial, "the partial batch", false);
    uint64_t partial_compiled = partial.compiled - after_first;
    free(order);
    fnet_finish(&net);
    eng_fixture_context_destroy(ctx);
    if (partial_compiled)
        fail_msg("the last, partial batch (%d of %d) compiled %llu kernels", PARTIAL, BATCH,
                 (unsigned long long)partial_compiled);
}

/* Two steps of the reduced model in ctx: the losses and the parameters after. */
enum {
    SMALL_C1 = 2,
    SMALL_C2 = 2,
    SMALL_BATCH = 2,
    SMALL_PARAMS = SMALL_C1 * 9 + SMALL_C1 + SMALL_C2 * SMALL_C1 * 9 + SMALL_C2 +
                   FNET_CLASSES * SMALL_C2 * 49 + FNET_CLASSES,
};

/* steps (at most 4) steps of the reduced model in a context (on the device, with the test-only
 * overrides testing where not NULL; else on the interpreter): the losses, the parameters after,
 * and the kernels each step ran (NULL: not wanted). */
static void small_steps(bool device, const eng_testing *testing, int steps, float *losses,
                        float *params, uint64_t *kernels) {
    kiln_context *ctx = NULL;
    if (device && testing) {
        kiln_context_options opt = {.validation = true};
        assert_int_equal(eng_testing_context_create(&opt, testing, &ctx), KILN_OK);
    } else {
        ctx = eng_context_new(device);
    }
    assert_non_null(ctx);
    fnet net;
    const fnet_options o = {
        .c1 = SMALL_C1, .c2 = SMALL_C2, .batch = SMALL_BATCH, .eval_batch = SMALL_BATCH, .seed = 3};
    expect_ok(ctx, fnet_init(&net, ctx, &o), "fnet_init");
    const uint32_t rows[4][SMALL_BATCH] = {{5, 40000}, {59999, 7}, {123, 4567}, {31000, 2}};
    live first = {0};
    for (int s = 0; s < steps; s++) {
        uint64_t before = kiln_context_stats(ctx).dispatches;
        expect_ok(ctx, fnet_train_step(&net, &train_set, rows[s], SMALL_BATCH, &losses[s]), "step");
        if (kernels)
            kernels[s] = kiln_context_stats(ctx).dispatches - before;
        if (s == 0)
            first = live_now(ctx);
    }
    expect_same(first, live_now(ctx), "a later step", false);
    float *p = params;
    for (int i = 0; i < FNET_PARAMS; i++) {
        int64_t n;
        expect_ok(ctx, kiln_tensor_numel(net.params[i], &n), "numel");
        expect_ok(ctx, kiln_read(net.params[i], p, sizeof(float) * (size_t)n), "read");
        p += n;
    }
    assert_int_equal(p - params, SMALL_PARAMS);
    fnet_finish(&net);
    eng_fixture_context_destroy(ctx);
}

static void test_examples_train_fashion_interpreter_agrees_with_device(void **state) {
    (void)state;
    static float p_interp[SMALL_PARAMS], p_device[SMALL_PARAMS];
    float l_interp[2], l_device[2];
    small_steps(false, NULL, 2, l_interp, p_interp, NULL);
    small_steps(true, NULL, 2, l_device, p_device, NULL);
    for (int s = 0; s < 2; s++) {
        if (fabs(l_interp[s] - l_device[s]) > 1e-5 + 1e-4 * fabs(l_interp[s]))
            fail_msg("step %d: loss %.7g on the interpreter, %.7g on the device", s + 1,
                     l_interp[s], l_device[s]);
    }
    /* Adam moves each parameter by about lr (1e-3) per step whatever its gradient's size: a
     * wrong gradient's sign shows as a difference of 2e-3 */
    for (int i = 0; i < SMALL_PARAMS; i++) {
        if (fabs(p_interp[i] - p_device[i]) > 1e-4)
            fail_msg("parameter element %d: %.7g on the interpreter, %.7g on the device", i,
                     p_interp[i], p_device[i]);
    }
}

/* Four steps with and without an override, on the device: the same losses and parameters to
 * the bit; the kernels a step the same (fewer: with fewer_kernels). */
static void same_steps(const eng_testing *without, const char *what, bool fewer_kernels) {
    static float p_with[SMALL_PARAMS], p_without[SMALL_PARAMS];
    float l_with[4], l_without[4];
    uint64_t k_with[4], k_without[4];
    small_steps(true, &(eng_testing){0}, 4, l_with, p_with, k_with);
    small_steps(true, without, 4, l_without, p_without, k_without);
    for (int s = 0; s < 4; s++) {
        bool kernels = fewer_kernels ? k_with[s] < k_without[s] : k_with[s] == k_without[s];
        if (memcmp(&l_with[s], &l_without[s], sizeof(float)) != 0 || !kernels)
            fail_msg("step %d: loss %.9g in %llu kernels, %.9g in %llu %s", s + 1, l_with[s],
                     (unsigned long long)k_with[s], l_without[s], (unsigned long long)k_without[s],
                     what);
    }
    for (int i = 0; i < SMALL_PARAMS; i++) {
        if (memcmp(&p_with[i], &p_without[i], sizeof(float)) != 0)
            fail_msg("parameter element %d: %.9g, %.9g %s", i, p_with[i], p_without[i], what);
    }
}

/* What the scheduler learns from a step's builds changes no value and no kernel. */
static void test_examples_train_fashion_foresight_changes_no_value(void **state) {
    (void)state;
    same_steps(&(eng_testing){.no_foresight = true}, "without foresight", false);
}

/* The convolutions computed inside their pools' windows (the pools' indices siblings of those
 * kernels; engine/schedule/kernel.c) change no value, in fewer kernels. */
static void test_examples_train_fashion_unrolled_windows_change_no_value(void **state) {
    (void)state;
    same_steps(&(eng_testing){.no_unrolled_windows = true}, "with the convolutions stored", true);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples_train_fashion_loss_halves_with_flat_compiles_and_memory),
        cmocka_unit_test(test_examples_train_fashion_interpreter_agrees_with_device),
        cmocka_unit_test(test_examples_train_fashion_foresight_changes_no_value),
        cmocka_unit_test(test_examples_train_fashion_unrolled_windows_change_no_value),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
