/* Realization itself, on both backends: graphs thousands of kernels deep realize in one call
 * (scheduling keeps its own stack), kiln_realize_many takes any count, and a write is applied
 * exactly once whatever fails around it: kernels that ran keep their results, the others are
 * undone, and the message says which were which. */
#include "eng_testing.h"
#include "engine_fixture.h"
#include "test_alloc.h"
#include "vk_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

static bool on_device(void **state) {
    return ((eng_fixture *)*state)->device;
}

/* A context of the fixture's backend whose host allocations go through ta. */
static kiln_context *counted_context(bool device, test_alloc *ta) {
    vk_fixture_keep_drivers_loaded();
    kiln_context_options opt = {.device = device ? NULL : "interp",
                                .validation = device,
                                .alloc = test_alloc_fn,
                                .alloc_user = ta};
    kiln_context *ctx = NULL;
    assert_int_equal(kiln_context_create(&opt, &ctx), KILN_OK);
    return ctx;
}

static float read_first(kiln_tensor *t) {
    float v[4];
    fx_read(t, KILN_F32, v, 4);
    return v[0];
}

static void assert_message_has(kiln_context *ctx, const char *part) {
    const char *msg = kiln_context_message(ctx);
    if (!strstr(msg, part))
        fail_msg("the message \"%s\" does not say \"%s\"", msg, part);
}

/* ---- depth -------------------------------------------------------------------------------- */

/* x <- x0 + sum(x) / 4, steps times: every step's kernel reads the reduction of the step
 * before, so the graph is about steps kernels deep (the last kernel fuses the last few sums as
 * stages of a row kernel): at least kernels deep. Every other sum reads x as 2 x 2, so that no
 * sum runs the one before as an earlier stage of its own loop (kernel.c stage_read: the same
 * dims reduced). sum(x) gains 6 per step and x0 = {0, 1, 2, 3} ends at x0 + 1.5 steps. */
static void reduction_chain(kiln_context *ctx, int kernels) {
    int steps = kernels + 10;
    kiln_tensor *x0 = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){0, 1, 2, 3});
    kiln_tensor *x = x0;
    for (int k = 0; k < steps; k++) {
        kiln_tensor *in = k % 2 ? kiln_reshape(x, 2, (const int64_t[]){2, 2}) : x;
        x = kiln_add(x0, kiln_mul_scalar(kiln_sum(in, 0, NULL, false), 0.25));
    }
    kiln_stats before = kiln_context_stats(ctx);
    kiln_status st = kiln_realize(x);
    if (st != KILN_OK)
        fail_msg("kiln_realize: %s", kiln_context_message(ctx));
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(after.realizes - before.realizes, 1);
    assert_true(after.dispatches - before.dispatches >= (uint64_t)kernels);
    float want[4];
    for (int i = 0; i < 4; i++)
        want[i] = (float)i + 1.5f * (float)steps;
    fx_check_f32(x, want, 4, 0, 0);
}

static void test_engine_realize_graph_1000_kernels_deep(void **state) {
    reduction_chain(fx_ctx(state), 1000);
}

static void test_engine_realize_graph_10000_kernels_deep(void **state) {
    if (on_device(state))
        skip(); /* the interpreter's run is the quick one */
    reduction_chain(fx_ctx(state), 10000);
}

/* x <- x + (max(x) - min(x)), 1000 times: each step reads reductions of the last, and the
 * steps in between are elementwise, unrealized, inlined into one another (a kernel build cuts
 * the chain). x0 = {0, 1, 2, 3} gains 3 per step. On the device it compiles some 40 kernels:
 * the interpreter only. */
static void test_engine_realize_deep_chain_of_inlined_steps(void **state) {
    if (on_device(state))
        skip();
    kiln_context *ctx = fx_ctx(state);
    enum { STEPS = 1000 };
    kiln_tensor *x = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){0, 1, 2, 3});
    for (int k = 0; k < STEPS; k++)
        x = kiln_add(x, kiln_sub(kiln_max(x, 0, NULL, false), kiln_min(x, 0, NULL, false)));
    assert_int_equal(kiln_realize(x), KILN_OK);
    fx_check_f32(x, (const float[]){3 * STEPS, 3 * STEPS + 1, 3 * STEPS + 2, 3 * STEPS + 3}, 4, 0,
                 0);
}

/* In-place adds (1000 on the interpreter, 300 on the device), each after a sum of the value
 * before it: realizing the last write first realizes every earlier sum (program order), one
 * write deeper each time. */
static void test_engine_realize_deep_writes_keep_program_order(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const int steps = on_device(state) ? 300 : 1000;
    kiln_tensor *s = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){0, 1, 2, 3});
    kiln_tensor **sums = malloc((size_t)steps * sizeof *sums);
    assert_non_null(sums);
    kiln_tensor *one = kiln_scalar(ctx, KILN_F32, 1);
    for (int k = 0; k < steps; k++) {
        sums[k] = kiln_sum(s, 0, NULL, false);
        assert_int_equal(kiln_add_(s, one), KILN_OK);
    }
    assert_int_equal(kiln_realize(s), KILN_OK);
    float n = (float)steps;
    fx_check_f32(s, (const float[]){n, n + 1, n + 2, n + 3}, 4, 0, 0);
    for (int k = 0; k < steps; k++) {
        float v = -1;
        assert_int_equal(kiln_read(sums[k], &v, sizeof v), KILN_OK);
        if (v != 6.0f + 4.0f * (float)k)
            fail_msg("sum %d: got %g, want %g", k, v, 6.0 + 4.0 * k);
    }
    free(sums);
}

/* Chained adds, 20,000 on the interpreter (nested in one kernel they overflowed the C stack
 * under ASan from about 15,000), 1,000 on the device: the chain is cut into kernels. */
static void test_engine_realize_long_elementwise_chain(void **state) {
    kiln_context *ctx = fx_ctx(state);
    int steps = on_device(state) ? 1000 : 20000;
    kiln_tensor *x = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){0, 1, 2, 3});
    for (int k = 0; k < steps; k++)
        x = kiln_add_scalar(x, 1);
    float n = (float)steps;
    fx_check_f32(x, (const float[]){n, n + 1, n + 2, n + 3}, 4, 0, 0);
}

/* ---- kiln_realize_many -------------------------------------------------------------------- */

static void test_engine_realize_many_takes_1000_tensors(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { COUNT = 1000 };
    kiln_tensor *a = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){1, 2, 3, 4});
    kiln_tensor **t = malloc(COUNT * sizeof *t);
    assert_non_null(t);
    for (int i = 0; i < COUNT; i++) { /* one kernel for all: a times a scalar buffer */
        float v = (float)i;
        t[i] = kiln_mul(a, kiln_from_data(ctx, KILN_F32, 0, NULL, &v));
    }
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize_many(ctx, COUNT, t), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(after.realizes - before.realizes, 1);
    assert_int_equal(after.dispatches - before.dispatches, COUNT);
    for (int i = 0; i < COUNT; i += 37) { /* a sample, and the last below */
        float f = (float)i;
        fx_check_f32(t[i], (const float[]){f, 2 * f, 3 * f, 4 * f}, 4, 0, 0);
    }
    fx_check_f32(t[COUNT - 1], (const float[]){999, 1998, 2997, 3996}, 4, 0, 0);
    /* Realized already: nothing runs again. */
    assert_int_equal(kiln_realize_many(ctx, COUNT, t), KILN_OK);
    assert_int_equal(kiln_context_stats(ctx).dispatches, after.dispatches);
    free(t);
    assert_int_equal(kiln_realize_many(ctx, 0, NULL), KILN_OK);
    kiln_tensor *with_null[2] = {a, NULL};
    assert_int_equal(kiln_realize_many(ctx, 2, with_null), KILN_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "tensor 1 of 2 is NULL");
    fx_expect_error(ctx, KILN_ERROR_INVALID_ARGUMENT);
}

/* ---- a write is applied once ------------------------------------------------------------- */

/* kiln_add_(s, 1), then a realize of s and of a kernel after it that fails at allocation n
 * (n = 1, 1 + step, ...): a failure before the write ran undoes it, one after it keeps it;
 * either way s ends exactly 1 higher once a read succeeds, also when the realize fails twice
 * in a row. Some failures must land after the write's kernel ran. */
static void write_once_loop(bool device, long step) {
    test_alloc ta = {0};
    kiln_context *ctx = counted_context(device, &ta);
    kiln_tensor *s = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){0, 10, 20, 30});
    kiln_tensor *a = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){1, 2, 3, 4});
    kiln_tensor *one = kiln_scalar(ctx, KILN_F32, 1);
    float want = read_first(s);
    long after_write = 0, twice = 0, runs = 0;
    for (long n = 1;; n += step, runs++) {
        assert_int_equal(kiln_add_(s, one), KILN_OK);
        want += 1;
        /* A kernel compiled fresh each time (its constant is new), run after the write's. */
        kiln_tensor *later = kiln_add_scalar(kiln_mul(a, a), (double)n);
        kiln_tensor *both[2] = {s, later};
        long failures = ta.failures;
        ta.fail_at = ta.count + n;
        kiln_status st = kiln_realize_many(ctx, 2, both);
        ta.fail_at = 0;
        bool failed = ta.failures > failures;
        if (st != KILN_OK) {
            assert_int_equal(st, KILN_ERROR_OUT_OF_HOST_MEMORY);
            assert_true(failed);
            assert_message_has(ctx, "kiln_realize_many: ");
            const char *msg = kiln_context_message(ctx);
            after_write += strstr(msg, "kernel 1 ran") || strstr(msg, "kernels 1-");
            kiln_context_clear_error(ctx);
            /* Fail the retry too, at the same distance. */
            ta.fail_at = ta.count + n;
            st = kiln_realize_many(ctx, 2, both);
            ta.fail_at = 0;
            if (st != KILN_OK) {
                twice++;
                kiln_context_clear_error(ctx);
            }
        }
        float got = read_first(s);
        if (got != want)
            fail_msg("allocation %ld failed: s = %g, want %g (%s)", n, got, want,
                     kiln_context_message(ctx));
        float m = (float)n;
        fx_check_f32(later, (const float[]){1 + m, 4 + m, 9 + m, 16 + m}, 4, 0, 0);
        if (!failed)
            break; /* the realize needed fewer than n allocations */
    }
    print_message("%ld runs by %ld; %ld failed after the write ran, %ld failed twice\n", runs, step,
                  after_write, twice);
    assert_true(after_write > 0);
    assert_true(twice > 0);
    eng_fixture_context_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
    assert_int_equal(ta.size_mismatches, 0);
}

static void test_engine_realize_write_once_under_allocation_failures(void **state) {
    /* Each device run compiles a kernel: every third allocation point there (a realize there
     * makes about 25; a build that stops at a dependency makes one more, which may fail
     * quietly: plan.c plan_remember). */
    write_once_loop(on_device(state), on_device(state) ? 3 : 1);
}

/* A later kernel of the same realize refused when it runs (max over a symbolic size bound to
 * 0): the write before it ran and stays applied, the kernels after it did not run and their
 * storage is given back; the message names both. */
static void test_engine_realize_write_once_when_a_later_kernel_is_refused(void **state) {
    bool device = on_device(state);
    test_alloc ta = {0};
    kiln_context *ctx = counted_context(device, &ta);
    kiln_tensor *s = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){1, 2, 3, 4});
    assert_int_equal(kiln_add_(s, kiln_scalar(ctx, KILN_F32, 1)), KILN_OK);
    const kiln_expr *zero = kiln_bind(ctx, kiln_variable(ctx, "len", 0, 9), 0);
    kiln_tensor *empty =
        kiln_narrow_sym(kiln_arange(ctx, KILN_F32, 0, 9, 1), 0, kiln_int(ctx, 0), zero);
    kiln_tensor *bad = kiln_max(empty, 0, NULL, false);
    enum { BIG = 1 << 18 };
    kiln_tensor *big = kiln_add_scalar(kiln_arange(ctx, KILN_F32, 0, BIG, 1), 1);
    kiln_tensor *all[3] = {s, bad, big};
    size_t live = ta.live_bytes;
    for (int attempt = 0; attempt < 2; attempt++) {
        assert_int_equal(kiln_realize_many(ctx, 3, all), KILN_ERROR_INVALID_ARGUMENT);
        assert_message_has(ctx, "0 elements");
        if (attempt == 0) {
            assert_message_has(ctx, "kiln_realize_many: kernel 2 of 3 failed (");
            assert_message_has(ctx, "): kernel 1 ran and its result is kept; 2-3 did not run");
        } else { /* the write is done: the refused kernel and the one after it remain */
            assert_message_has(ctx, "kiln_realize_many: kernel 1 of 2 failed (");
            assert_message_has(ctx, "): no kernel ran");
        }
        kiln_context_clear_error(ctx);
        if (!device) /* big's 1 MiB on the host: given back, not kept for the context */
            assert_true(ta.live_bytes < live + BIG);
        fx_check_f32(s, (const float[]){2, 3, 4, 5}, 4, 0, 0);
    }
    assert_int_equal(kiln_realize(big), KILN_OK);
    float *got = malloc(BIG * sizeof *got);
    assert_non_null(got);
    assert_int_equal(kiln_read(big, got, BIG * sizeof *got), KILN_OK);
    for (int i = 0; i < BIG; i += 4099)
        assert_true(got[i] == (float)i + 1);
    free(got);
    fx_check_f32(s, (const float[]){2, 3, 4, 5}, 4, 0, 0);
    eng_fixture_context_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
}

/* The write and ten kernels of one shape (compiled by the first, smaller realize), realized
 * on a fresh context; with fail set, its last allocation fails. Returns the allocations the
 * realize made. */
static long write_and_ten(test_alloc *ta, bool fail, long last) {
    kiln_context *ctx = counted_context(true, ta);
    kiln_tensor *s = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){1, 2, 3, 4});
    kiln_tensor *a = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){1, 2, 3, 4});
    kiln_tensor *one = kiln_scalar(ctx, KILN_F32, 1);
    kiln_tensor *t[11] = {s};
    for (int i = 0; i < 11; i++) {
        float v = (float)i;
        t[i == 0 ? 1 : i] = kiln_mul(a, kiln_from_data(ctx, KILN_F32, 0, NULL, &v));
        if (i == 0) { /* the first realize: the write's kernel and the product's, compiled */
            assert_int_equal(kiln_add_(s, one), KILN_OK);
            assert_int_equal(kiln_realize_many(ctx, 2, t), KILN_OK);
            assert_int_equal(kiln_add_(s, one), KILN_OK);
        }
    }
    long start = ta->count;
    ta->fail_at = fail ? start + last : 0;
    kiln_status st = kiln_realize_many(ctx, 11, t);
    ta->fail_at = 0;
    long made = ta->count - start;
    if (!fail) {
        assert_int_equal(st, KILN_OK);
    } else {
        assert_int_equal(st, KILN_ERROR_OUT_OF_HOST_MEMORY);
        assert_message_has(ctx, "kiln_realize_many: waiting for kernels 1-11 failed (");
        assert_message_has(ctx, "): kernels 1-11 ran and their results are kept");
        kiln_context_clear_error(ctx);
    }
    uint64_t dispatches = kiln_context_stats(ctx).dispatches;
    fx_check_f32(s, (const float[]){3, 4, 5, 6}, 4, 0, 0);
    fx_check_f32(t[10], (const float[]){10, 20, 30, 40}, 4, 0, 0);
    assert_int_equal(kiln_context_stats(ctx).dispatches, dispatches); /* nothing ran again */
    eng_fixture_context_destroy(ctx);
    assert_int_equal(ta->live_blocks, 0);
    return made;
}

/* On a device the kernels run when their batch is submitted; a failure after the submission
 * (here the batch's last allocation, for its timings: more dispatches than the batch held
 * before) leaves them run: the write is applied once. Twin contexts make the same allocations. */
static void test_engine_realize_write_once_when_waiting_fails(void **state) {
    if (!on_device(state))
        skip(); /* the interpreter has nothing to wait for */
    test_alloc counting = {0}, failing = {0};
    long last = write_and_ten(&counting, false, 0);
    write_and_ten(&failing, true, last);
    assert_int_equal(failing.failures, 1);
}

/* Two writes whose values are computed from one old value: realizing the second write (of
 * the storage both values read) must not leave the first reading the overwritten storage (an
 * optimizer's momentum buffer and its parameter, updated from one gradient). */
static void test_engine_realize_two_writes_from_one_old_value(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *p = fx_f32(ctx, 1, (int64_t[]){3}, (float[]){1, 2, 3});
    kiln_tensor *a = kiln_zeros(ctx, KILN_F32, 1, (int64_t[]){3});
    assert_int_equal(kiln_realize(a), KILN_OK);
    kiln_tensor *y = kiln_mul_scalar(p, 2.0), *y1 = kiln_add_scalar(y, 1.0);
    assert_int_equal(kiln_copy_(a, y1), KILN_OK);
    assert_int_equal(kiln_copy_(p, y), KILN_OK);
    assert_int_equal(kiln_realize(p), KILN_OK); /* only p: a's write stays lazy */
    fx_check_f32(p, (float[]){2, 4, 6}, 3, 0, 0);
    fx_check_f32(a, (float[]){3, 5, 7}, 3, 0, 0); /* from the old p, as program order says */
    kiln_release(p);
    kiln_release(a);
    kiln_release(y);
    kiln_release(y1);
}

/* A reader of a write's target whose only consumer was built after the write (and reads it):
 * the reader runs before the write, the consumer after it (b = 2a, a += 1, c = b + a). */
static void test_engine_realize_reader_consumed_after_the_write(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = fx_f32(ctx, 1, (int64_t[]){3}, (float[]){1, 2, 3});
    kiln_tensor *b = kiln_mul_scalar(a, 2.0), *one = kiln_scalar(ctx, KILN_F32, 1);
    assert_int_equal(kiln_add_(a, one), KILN_OK);
    kiln_tensor *c = kiln_add(b, a);
    kiln_release(b);
    fx_check_f32(c, (float[]){4, 7, 10}, 3, 0, 0);
    kiln_release(a);
    kiln_release(c);
    kiln_release(one);
}

/* A write realizes only the earlier readers something can still reach: y = x + p feeds two
 * sums, through relu(y) and through (y > 0) * x, and no handle holds y or those two nodes.
 * With both sums realized before p is overwritten, y's readers are dead: y is computed inside
 * the sums' kernels only (three dispatches: the two sums and the write), not realized on its
 * own for readers that nothing can reach any more. */
static void test_engine_realize_write_skips_dead_readers(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *p = fx_f32(ctx, 1, (int64_t[]){4}, (float[]){1, -2, 3, -4});
    kiln_tensor *x = fx_f32(ctx, 1, (int64_t[]){4}, (float[]){0.5f, 1, -1, 2});
    kiln_tensor *zero = kiln_scalar(ctx, KILN_F32, 0), *one = kiln_scalar(ctx, KILN_F32, 1);
    kiln_tensor *y = kiln_add(x, p); /* {1.5, -1, 2, -2} */
    kiln_tensor *relu = kiln_relu(y), *gt = kiln_gt(y, zero), *mask = kiln_cast(gt, KILN_F32);
    kiln_tensor *masked = kiln_mul(mask, x);
    kiln_tensor *r1 = kiln_sum(relu, 0, NULL, false), *r2 = kiln_sum(masked, 0, NULL, false);
    assert_non_null(r1);
    assert_non_null(r2);
    kiln_release(y);
    kiln_release(relu);
    kiln_release(gt);
    kiln_release(mask);
    kiln_release(masked);
    assert_int_equal(kiln_add_(p, one), KILN_OK);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize_many(ctx, 3, (kiln_tensor *const[]){r1, r2, p}), KILN_OK);
    kiln_stats after = kiln_context_stats(ctx);
    assert_int_equal(after.dispatches - before.dispatches, 3);
    fx_check_f32(r1, (float[]){3.5f}, 1, 0, 0);
    fx_check_f32(r2, (float[]){-0.5f}, 1, 0, 0); /* x where y > 0: 0.5 - 1 */
    fx_check_f32(p, (float[]){2, -1, 4, -3}, 4, 0, 0);
    kiln_release(p);
    kiln_release(x);
    kiln_release(zero);
    kiln_release(one);
    kiln_release(r1);
    kiln_release(r2);
}

/* A write whose target is smaller than what its earlier readers would realize gives them a
 * copy of the old values instead (realize.c snapshot_pays): y = x + p and z = x * p (3 x 4)
 * read the bias p (4) that p += 1 overwrites; realizing p runs two kernels (the copy, shared
 * by both readers, and the write), not y and z, which keep the old values. A reader built
 * after the write reads the new ones; a second write makes a second copy. */
static void test_engine_realize_write_copies_a_small_target(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const float xs[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    kiln_tensor *x = fx_f32(ctx, 2, (int64_t[]){3, 4}, xs);
    kiln_tensor *p = fx_f32(ctx, 1, (int64_t[]){4}, (float[]){1, -2, 3, -4});
    kiln_tensor *one = kiln_scalar(ctx, KILN_F32, 1);
    kiln_tensor *y = kiln_add(x, p), *z = kiln_mul(x, p);
    assert_int_equal(kiln_add_(p, one), KILN_OK);
    kiln_tensor *after = kiln_add(x, p);
    kiln_stats before = kiln_context_stats(ctx);
    assert_int_equal(kiln_realize(p), KILN_OK);
    kiln_stats done = kiln_context_stats(ctx);
    assert_int_equal(done.dispatches - before.dispatches, 2);
    fx_check_f32(p, (float[]){2, -1, 4, -3}, 4, 0, 0);
    /* y and z read the first copy; after reads the first write's value: a copy for it */
    assert_int_equal(kiln_add_(p, one), KILN_OK);
    assert_int_equal(kiln_realize(p), KILN_OK);
    assert_int_equal(kiln_context_stats(ctx).dispatches - done.dispatches, 2);
    fx_check_f32(p, (float[]){3, 0, 5, -2}, 4, 0, 0);
    float want_y[12], want_z[12], want_after[12];
    const float old[4] = {1, -2, 3, -4}, new1[4] = {2, -1, 4, -3};
    for (int i = 0; i < 12; i++) {
        want_y[i] = xs[i] + old[i % 4];
        want_z[i] = xs[i] * old[i % 4];
        want_after[i] = xs[i] + new1[i % 4];
    }
    fx_check_f32(y, want_y, 12, 0, 0);
    fx_check_f32(z, want_z, 12, 0, 0);
    fx_check_f32(after, want_after, 12, 0, 0);
    kiln_release(x);
    kiln_release(p);
    kiln_release(one);
    kiln_release(y);
    kiln_release(z);
    kiln_release(after);
}

/* ---- foresight: builds that know their dependencies from earlier ones ---------------------- */

/* The graphs below, each realized once: its values (4 floats) and the kernels it ran. */
typedef struct ran {
    float values[4];
    uint64_t kernels;
} ran;

static ran realize_counted(kiln_context *ctx, kiln_tensor *x) {
    ran r = {{0}, 0};
    uint64_t before = kiln_context_stats(ctx).dispatches;
    if (kiln_read(x, r.values, sizeof r.values) != KILN_OK)
        fail_msg("kiln_read: %s", kiln_context_message(ctx));
    r.kernels = kiln_context_stats(ctx).dispatches - before;
    return r;
}

/* 0: x <- x0 + sum(x) / 4 as in reduction_chain, 40 times; 1: steps inlined into one another
 * as in test_engine_realize_deep_chain_of_inlined_steps, 60 times; 2: a value of four
 * operations read by two reductions (realized first), 3: the same value read by one (inlined;
 * the sum's node the same as 2's); 4: in-place adds after sums, as
 * test_engine_realize_deep_writes_keep_program_order, 30 times. */
static ran foresight_graph(kiln_context *ctx, int which) {
    kiln_scope_begin(ctx);
    const float x0v[4] = {0, 1, 2, 3};
    kiln_tensor *x0 = fx_f32(ctx, 1, (const int64_t[]){4}, x0v), *x = x0, *out = NULL;
    if (which == 0) {
        for (int k = 0; k < 40; k++) {
            kiln_tensor *in = k % 2 ? kiln_reshape(x, 2, (const int64_t[]){2, 2}) : x;
            x = kiln_add(x0, kiln_mul_scalar(kiln_sum(in, 0, NULL, false), 0.25));
        }
        out = x;
    } else if (which == 1) {
        for (int k = 0; k < 60; k++)
            x = kiln_add(x, kiln_sub(kiln_max(x, 0, NULL, false), kiln_min(x, 0, NULL, false)));
        out = x;
    } else if (which == 2 || which == 3) {
        kiln_tensor *e = kiln_add_scalar(kiln_mul(kiln_exp(kiln_neg(x)), kiln_add_scalar(x, 1)), 2);
        kiln_tensor *wide =
            kiln_expand(kiln_reshape(e, 2, (const int64_t[]){1, 4}), 2, (const int64_t[]){4, 4});
        kiln_tensor *sum = kiln_sum(wide, 1, (const int32_t[]){1}, false);
        out = which == 2 ? kiln_add(sum, kiln_max(wide, 1, (const int32_t[]){1}, false)) : sum;
    } else {
        kiln_tensor *one = kiln_scalar(ctx, KILN_F32, 1),
                    *total = kiln_zeros(ctx, KILN_F32, 1, (const int64_t[]){1});
        for (int k = 0; k < 30; k++) {
            total = kiln_add(total, kiln_sum(x, 0, NULL, false));
            assert_int_equal(kiln_add_(x, one), KILN_OK);
        }
        out = kiln_add(x, total);
    }
    ran r = realize_counted(ctx, out);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    return r;
}

/* What the scheduler learns from earlier realizes changes neither a graph's kernels nor its
 * values: each graph, realized after every graph before it (each twice) in one context (the
 * second time from what the first learnt), against the same graph in a context that learns
 * nothing (eng_testing no_foresight). */
static void test_engine_realize_foresight_changes_no_schedule(void **state) {
    kiln_context *with = fx_ctx(state), *without = fx_ctx_without_foresight(state);
    uint64_t stopped = kiln_context_stats(with).builds_stopped;
    for (int which = 0; which < 5; which++) {
        ran want = foresight_graph(without, which);
        for (int again = 0; again < 2; again++) {
            ran got = foresight_graph(with, which);
            if (got.kernels != want.kernels || memcmp(got.values, want.values, sizeof got.values))
                fail_msg("graph %d, run %d: %llu kernels, values %g %g %g %g; without foresight "
                         "%llu, %g %g %g %g",
                         which, again + 1, (unsigned long long)got.kernels, got.values[0],
                         got.values[1], got.values[2], got.values[3],
                         (unsigned long long)want.kernels, want.values[0], want.values[1],
                         want.values[2], want.values[3]);
        }
    }
    /* builds stopped in the first runs; a run of graph 0 once more stops at none */
    uint64_t before = kiln_context_stats(with).builds_stopped;
    assert_true(before > stopped);
    (void)foresight_graph(with, 0);
    assert_int_equal(kiln_context_stats(with).builds_stopped, before);
    kiln_context_destroy(without);
}

/* Step `step` of replay_follows_bound_values' program: acc += x[start : start + 4] * scale +
 * sum(relu(2x)), with scale = step + 1 read as a number (kiln_scalar_expr) and start =
 * step / 3 a bound Variable (a view's offset, changing at step 3 only): one graph each step,
 * other values; acc's values after it, and its kernels. */
static ran replay_graph(kiln_context *ctx, kiln_tensor *acc, int step) {
    kiln_scope_begin(ctx);
    const float xv[8] = {1, -2, 3, -4, 5, -6, 7, -8};
    kiln_tensor *x = fx_f32(ctx, 1, (const int64_t[]){8}, xv);
    const kiln_expr *scale = kiln_variable(ctx, "scale", 1, 100);
    const kiln_expr *start = kiln_variable(ctx, "start", 0, 4);
    kiln_tensor *s = kiln_scalar_expr(ctx, KILN_F32, kiln_bind(ctx, scale, step + 1));
    kiln_tensor *part = kiln_narrow_sym(x, 0, kiln_bind(ctx, start, step / 3), kiln_int(ctx, 4));
    kiln_tensor *steady = kiln_sum(kiln_relu(kiln_mul_scalar(x, 2)), 0, NULL, false);
    assert_int_equal(kiln_add_(acc, kiln_add(kiln_mul(part, s), steady)), KILN_OK);
    ran r = realize_counted(ctx, acc);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    return r;
}

/* Step `step` of a replayed loop: graph built and realized in with and in without (a context
 * that keeps nothing), on their own tensors t[0] and t[1]; into got and other. Both run the
 * same kernels, and from the fourth step with takes every kernel from the step before (the
 * first step's graph is another, its tensor not written yet; the second keeps its kernels). */
static void replayed_step(ran (*graph)(kiln_context *, kiln_tensor *, int), kiln_context *with,
                          kiln_context *without, kiln_tensor *const *t, int step, ran *got,
                          ran *other) {
    uint64_t replayed = kiln_context_stats(with).builds_replayed;
    *got = graph(with, t[0], step);
    *other = graph(without, t[1], step);
    uint64_t taken = kiln_context_stats(with).builds_replayed - replayed;
    assert_int_equal(got->kernels, other->kernels);
    if (step >= 3)
        assert_int_equal(taken, got->kernels);
}

/* A kernel taken from the last realize of its graph (plan.c's replay) computes what its
 * build would: six steps of replay_graph, against the host's values and against a context that
 * keeps nothing (eng_testing no_foresight): the same values and kernels. The first step's graph
 * is another (acc's first write), the second's is kept, its kernels by the third; from the
 * fourth every kernel is taken, the write's with the new scale (a number read from a bound
 * Variable) and, where the view's start moves (step 3), the new start: both are parameters of
 * the same kernel (plan.c rebind). Debug builds also build every kernel taken and compare. */
static void test_engine_realize_replay_follows_bound_values(void **state) {
    kiln_context *with = fx_ctx(state), *without = fx_ctx_without_foresight(state);
    kiln_tensor *acc[2];
    kiln_context *ctxs[2] = {with, without};
    for (int c = 0; c < 2; c++) {
        acc[c] = kiln_zeros(ctxs[c], KILN_F32, 1, (const int64_t[]){4});
        assert_int_equal(kiln_realize(acc[c]), KILN_OK);
    }
    const float xv[8] = {1, -2, 3, -4, 5, -6, 7, -8};
    float want[4] = {0};
    for (int step = 0; step < 6; step++) {
        for (int i = 0; i < 4; i++)
            want[i] += xv[step / 3 + i] * (float)(step + 1) + 2 * (1 + 3 + 5 + 7);
        ran got, other;
        replayed_step(replay_graph, with, without, acc, step, &got, &other);
        for (int i = 0; i < 4; i++) {
            if (got.values[i] != want[i] || other.values[i] != want[i])
                fail_msg("step %d, element %d: %g with replays, %g without; %g expected", step, i,
                         got.values[i], other.values[i], want[i]);
        }
    }
    assert_int_equal(kiln_context_stats(without).builds_replayed, 0);
    kiln_release(acc[0]);
    kiln_release(acc[1]);
    kiln_context_destroy(without);
}

/* Step `step` of a decoder's loop over cache (8 rows of 4, realized): row pos = step written
 * with x * (step + 1) (a number read from a bound Variable), then the rows seen so far, cache[0 :
 * pos + 1] (a view that grows with the bound position), summed over rows with a weight per row, and
 * the whole cache's sum broadcast to it: out (4). Every region differs from the step before only in
 * pos. */
static ran cache_graph(kiln_context *ctx, kiln_tensor *cache, int step) {
    kiln_scope_begin(ctx);
    const float xv[4] = {1, -2, 3, 0.5f};
    kiln_tensor *x = fx_f32(ctx, 2, (const int64_t[]){1, 4}, xv);
    const kiln_expr *pos = kiln_bind(ctx, kiln_variable(ctx, "cache_pos", 0, 7), step);
    const kiln_expr *seen = kiln_expr_add(ctx, pos, kiln_int(ctx, 1));
    kiln_tensor *row = kiln_narrow_sym(cache, 0, pos, kiln_int(ctx, 1));
    const kiln_expr *scale = kiln_bind(ctx, kiln_variable(ctx, "cache_scale", 1, 8), step + 1);
    assert_int_equal(kiln_copy_(row, kiln_mul(x, kiln_scalar_expr(ctx, KILN_F32, scale))), KILN_OK);
    kiln_tensor *rows = kiln_narrow_sym(cache, 0, kiln_int(ctx, 0), seen);
    kiln_tensor *w = kiln_add_scalar(kiln_arange(ctx, KILN_F32, 0, 8, 1), 1);
    kiln_tensor *weights = kiln_unsqueeze(kiln_narrow_sym(w, 0, kiln_int(ctx, 0), seen), 1);
    kiln_tensor *out = kiln_add(kiln_sum(kiln_mul(rows, weights), 1, (const int32_t[]){0}, false),
                                kiln_sum(cache, 0, NULL, false));
    ran r = realize_counted(ctx, out);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    return r;
}

/* A decoder's loop (cache_graph, eight steps): the cache row written at the bound position and
 * the views sized by it take their kernels from the step before with the new position as a
 * parameter (plan.c rebind), and the kernels that load the cache take it whatever wrote it
 * (a realized node is compared by its type, sizes and storage: graph.c
 * eng_node_frontier_hash): every kernel is taken from the fourth step (the first step's graph is
 * another, its cache not written yet; the second's keeps its kernels). Values: the host's, and
 * a context that keeps nothing (eng_testing no_foresight) gives the same. Debug builds also
 * build every kernel taken and compare. */
static void test_engine_realize_replay_follows_a_growing_cache(void **state) {
    kiln_context *with = fx_ctx(state), *without = fx_ctx_without_foresight(state);
    kiln_context *ctxs[2] = {with, without};
    kiln_tensor *cache[2];
    for (int c = 0; c < 2; c++) {
        cache[c] = kiln_zeros(ctxs[c], KILN_F32, 2, (const int64_t[]){8, 4});
        assert_int_equal(kiln_realize(cache[c]), KILN_OK);
    }
    const float xv[4] = {1, -2, 3, 0.5f};
    for (int step = 0; step < 8; step++) {
        ran got, other;
        replayed_step(cache_graph, with, without, cache, step, &got, &other);
        for (int i = 0; i < 4; i++) {
            /* row r holds x * (r + 1), weighted by r + 1 in the rows seen */
            float want = 0, total = 0;
            for (int r = 0; r <= step; r++) {
                want += xv[i] * (float)((r + 1) * (r + 1));
                for (int j = 0; j < 4; j++)
                    total += xv[j] * (float)(r + 1);
            }
            want += total;
            if (fabsf(got.values[i] - want) > 1e-4f * (1 + fabsf(want)) ||
                got.values[i] != other.values[i])
                fail_msg("step %d, element %d: %g with replays, %g without; %g expected", step, i,
                         got.values[i], other.values[i], want);
        }
    }
    kiln_release(cache[0]);
    kiln_release(cache[1]);
    kiln_context_destroy(without);
}

/* Unrolled windows (kernel.c build_window) over a bound length: the maximum over X's first dim
 * of relu(sum over its last) of X[:, 0 : L] (X (2, 8, 3), L = 2 + step % 3), transposed; and
 * sum(X), so that the graph has two kernels and keeps a plan. The windows' instances have keys
 * (eng_reduction.at) that once kept the length's value: a kernel taken with another length
 * then differed from its build (Debug builds: KILN_ERROR_INTERNAL). Against the host's values
 * and a context that keeps nothing; every kernel taken from the fourth step. */
static void test_engine_realize_replay_follows_windows_of_a_bound_length(void **state) {
    kiln_context *with = fx_ctx(state), *without = fx_ctx_without_foresight(state);
    float xv[2 * 8 * 3];
    for (int i = 0; i < 2 * 8 * 3; i++)
        xv[i] = (float)((i * 5) % 9) - 3.0f;
    kiln_context *ctxs[2] = {with, without};
    kiln_tensor *x[2];
    for (int c = 0; c < 2; c++) {
        x[c] = fx_f32(ctxs[c], 3, (const int64_t[]){2, 8, 3}, xv);
        assert_int_equal(kiln_realize(x[c]), KILN_OK);
    }
    for (int step = 0; step < 6; step++) {
        int len = 2 + step % 3;
        float got[2][8];
        uint64_t replayed = kiln_context_stats(with).builds_replayed, kernels = 0;
        for (int c = 0; c < 2; c++) {
            kiln_context *ctx = ctxs[c];
            uint64_t dispatched = kiln_context_stats(ctx).dispatches;
            kiln_scope_begin(ctx);
            const kiln_expr *l = kiln_bind(ctx, kiln_variable(ctx, "window_len", 1, 8), len);
            kiln_tensor *rows = kiln_narrow_sym(x[c], 1, kiln_int(ctx, 0), l);
            kiln_tensor *sums = kiln_relu(kiln_sum(rows, 1, (const int32_t[]){2}, false));
            kiln_tensor *outs[2] = {
                kiln_max(kiln_transpose(sums, 0, 1), 1, (const int32_t[]){1}, false),
                kiln_sum(x[c], 0, NULL, false)};
            if (kiln_realize_many(ctx, 2, outs) != KILN_OK)
                fail_msg("step %d: %s", step, kiln_context_message(ctx));
            assert_int_equal(kiln_read(outs[0], got[c], sizeof(float) * (size_t)len), KILN_OK);
            assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
            if (c == 0)
                kernels = kiln_context_stats(ctx).dispatches - dispatched;
        }
        if (step >= 3)
            assert_int_equal(kiln_context_stats(with).builds_replayed - replayed, kernels);
        for (int j = 0; j < len; j++) {
            float want = 0;
            for (int r = 0; r < 2; r++) {
                float sum = 0;
                for (int k = 0; k < 3; k++)
                    sum += xv[(r * 8 + j) * 3 + k];
                want = fmaxf(want, sum);
            }
            if (got[0][j] != want || got[1][j] != want)
                fail_msg("step %d, element %d: %g with replays, %g without; %g expected", step, j,
                         got[0][j], got[1][j], want);
        }
    }
    kiln_release(x[0]);
    kiln_release(x[1]);
    kiln_context_destroy(without);
}

/* One Variable bound to two values in one kernel (two narrows of x at two starts, added): a
 * kernel has one parameter per Variable, so the realize fails with KILN_ERROR_INVALID_ARGUMENT
 * naming the Variable and both values (it computed both narrows at the first start once), and
 * x is intact. The same Variable bound to one value twice, and two Variables, compute. */
static void test_engine_realize_one_variable_two_values_in_a_kernel(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_scope_begin(ctx);
    kiln_tensor *x = kiln_arange(ctx, KILN_F32, 0, 8, 1);
    assert_int_equal(kiln_realize(x), KILN_OK);
    const kiln_expr *v = kiln_variable(ctx, "two_starts", 0, 4);
    const kiln_expr *w = kiln_variable(ctx, "other_start", 0, 4);
    const kiln_expr *four = kiln_int(ctx, 4);
    float got[4];
    kiln_tensor *y =
        kiln_add(kiln_narrow_sym(x, 0, kiln_bind(ctx, v, 0), four),
                 kiln_mul_scalar(kiln_narrow_sym(x, 0, kiln_bind(ctx, v, 2), four), 10));
    assert_int_equal(kiln_read(y, got, sizeof got), KILN_ERROR_INVALID_ARGUMENT);
    fx_expect_message(ctx, KILN_ERROR_INVALID_ARGUMENT, "kiln_read", "two_starts", "bound to 0",
                      "to 2", NULL);
    float xs[8];
    assert_int_equal(kiln_read(x, xs, sizeof xs), KILN_OK);
    for (int i = 0; i < 8; i++)
        assert_true(xs[i] == (float)i);
    const kiln_expr *starts[3][2] = {{kiln_bind(ctx, v, 1), kiln_bind(ctx, v, 1)},
                                     {kiln_bind(ctx, v, 0), kiln_bind(ctx, w, 2)},
                                     {kiln_bind(ctx, w, 3), kiln_bind(ctx, v, 4)}};
    const int at[3][2] = {{1, 1}, {0, 2}, {3, 4}};
    for (int c = 0; c < 3; c++) {
        y = kiln_add(kiln_narrow_sym(x, 0, starts[c][0], four),
                     kiln_mul_scalar(kiln_narrow_sym(x, 0, starts[c][1], four), 10));
        assert_int_equal(kiln_read(y, got, sizeof got), KILN_OK);
        for (int i = 0; i < 4; i++) {
            if (got[i] != (float)(at[c][0] + i) + 10 * (float)(at[c][1] + i))
                fail_msg("case %d element %d: %g", c, i, got[i]);
        }
    }
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
}

/* A kernel is taken only where the readers above its nodes are what they were when it was
 * kept: sum(n) and sum(2y) realized together four times (two kernels each), n's four operations
 * inlined into its sum's first kernel, until a tensor built and not realized reads n through
 * another (b = n * 5, then c = sum(b)): n is then a value two kernels read, which a build realizes
 * first. That realize builds sum(n)'s first kernel (it stops at n: a kernel more, n's) instead of
 * taking it (Debug builds would find the taken kernel differs from its build). The sums: the
 * host's. */
static void test_engine_realize_replay_sees_readers_outside_the_graph(void **state) {
    kiln_context *ctx = fx_ctx(state);
    enum { N = 8192 };
    static float xv[N];
    double want = 0;
    for (int i = 0; i < N; i++) {
        xv[i] = (float)(i % 7) * 0.25f;
        want += (xv[i] * 2 + 1) * 3 + 1;
    }
    uint64_t kernels = 0;
    for (int step = 0; step < 4; step++) {
        kiln_scope_begin(ctx);
        kiln_tensor *x = fx_f32(ctx, 1, (const int64_t[]){N}, xv);
        kiln_tensor *y = fx_f32(ctx, 1, (const int64_t[]){N}, xv);
        kiln_tensor *n =
            kiln_add_scalar(kiln_mul_scalar(kiln_add_scalar(kiln_mul_scalar(x, 2), 1), 3), 1);
        kiln_tensor *b = kiln_mul_scalar(n, 5); /* outside the realize */
        if (step == 3)
            (void)kiln_sum(b, 0, NULL, false); /* a reduction reading n through b */
        kiln_tensor *sums[2] = {kiln_sum(n, 0, NULL, false),
                                kiln_sum(kiln_mul_scalar(y, 2), 0, NULL, false)};
        kiln_stats before = kiln_context_stats(ctx);
        assert_int_equal(kiln_realize_many(ctx, 2, sums), KILN_OK);
        kiln_stats after = kiln_context_stats(ctx);
        float v[2];
        assert_int_equal(kiln_read(sums[0], &v[0], sizeof v[0]), KILN_OK);
        assert_int_equal(kiln_read(sums[1], &v[1], sizeof v[1]), KILN_OK);
        double ysum = 0;
        for (int i = 0; i < N; i++)
            ysum += 2.0 * xv[i];
        assert_true(fabs(v[0] - want) <= 1e-5 * want && fabs(v[1] - ysum) <= 1e-5 * ysum);
        uint64_t dispatched = after.dispatches - before.dispatches;
        uint64_t taken = after.builds_replayed - before.builds_replayed;
        if (step == 2) /* kept by the second realize, all taken by the third */
            assert_int_equal(taken, dispatched);
        if (step == 3) { /* n realized first: sum(n)'s first kernel built (it stops at n) */
            assert_int_equal(dispatched, kernels + 1);
            assert_true(after.builds_stopped > before.builds_stopped);
            assert_true(taken < kernels);
        }
        kernels = dispatched;
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    }
}

/* A program of ever new graphs keeps at most 8 plans (kiln_stats live_plans; engine/eng.h
 * ENG_PLANS_KEPT), the least recently realized replaced: chains of 3 to 26 sums (other graphs
 * of the same few kernels), each realized three times (the second time from its plan: no build
 * stops; the third time every kernel is taken from the second), three times over, in a context
 * whose host blocks
 * are counted; from the second pass every graph's plan replaces another, and in the third the
 * blocks after each chain are those after the same chain in the second (the kernels compiled
 * and the batch's pools at their largest in the first; the same eight plans kept). */
static void test_engine_realize_plans_stay_bounded(void **state) {
    enum { PLANS = 8 };
    test_alloc ta = {0};
    kiln_context *ctx = counted_context(on_device(state), &ta);
    long blocks[27] = {0};
    for (int pass = 0; pass < 3; pass++) {
        for (int len = 3; len <= 26; len++) {
            for (int again = 0; again < 3; again++) {
                kiln_scope_begin(ctx);
                kiln_tensor *x0 = fx_f32(ctx, 1, (const int64_t[]){4}, (const float[]){0, 1, 2, 3});
                kiln_tensor *x = x0;
                for (int k = 0; k < len; k++) {
                    kiln_tensor *in = k % 2 ? kiln_reshape(x, 2, (const int64_t[]){2, 2}) : x;
                    x = kiln_add(x0, kiln_mul_scalar(kiln_sum(in, 0, NULL, false), 0.25));
                }
                kiln_stats before = kiln_context_stats(ctx);
                uint64_t stopped = before.builds_stopped;
                float v[4];
                assert_int_equal(kiln_read(x, v, sizeof v), KILN_OK);
                assert_true(v[0] == 1.5f * (float)len);
                kiln_stats after = kiln_context_stats(ctx);
                if (again == 0) {
                    assert_true(after.builds_stopped > stopped);
                } else {
                    assert_int_equal(after.builds_stopped, stopped);
                    assert_true(again == 1 || (after.kernel_builds == before.kernel_builds &&
                                               after.builds_replayed > before.builds_replayed));
                }
                assert_true(after.live_plans <= PLANS);
                assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
            }
            if (pass == 1)
                blocks[len] = ta.live_blocks;
            else if (pass == 2 && ta.live_blocks != blocks[len])
                fail_msg("chain %d, third pass: %ld host blocks live, %ld in the second", len,
                         ta.live_blocks, blocks[len]);
        }
    }
    assert_int_equal(kiln_context_stats(ctx).live_plans, PLANS);
    eng_fixture_context_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_realize_graph_1000_kernels_deep),
        ENG_TEST(test_engine_realize_graph_10000_kernels_deep),
        ENG_TEST(test_engine_realize_deep_chain_of_inlined_steps),
        ENG_TEST(test_engine_realize_deep_writes_keep_program_order),
        ENG_TEST(test_engine_realize_long_elementwise_chain),
        ENG_TEST(test_engine_realize_many_takes_1000_tensors),
        ENG_TEST(test_engine_realize_write_once_under_allocation_failures),
        ENG_TEST(test_engine_realize_write_once_when_a_later_kernel_is_refused),
        ENG_TEST(test_engine_realize_write_once_when_waiting_fails),
        ENG_TEST(test_engine_realize_two_writes_from_one_old_value),
        ENG_TEST(test_engine_realize_reader_consumed_after_the_write),
        ENG_TEST(test_engine_realize_write_skips_dead_readers),
        ENG_TEST(test_engine_realize_write_copies_a_small_target),
        ENG_TEST(test_engine_realize_foresight_changes_no_schedule),
        ENG_TEST(test_engine_realize_replay_follows_bound_values),
        ENG_TEST(test_engine_realize_replay_follows_a_growing_cache),
        ENG_TEST(test_engine_realize_replay_follows_windows_of_a_bound_length),
        ENG_TEST(test_engine_realize_replay_sees_readers_outside_the_graph),
        ENG_TEST(test_engine_realize_one_variable_two_values_in_a_kernel),
        ENG_TEST(test_engine_realize_plans_stay_bounded),
    };
    return ENG_RUN_BOTH(tests);
}
