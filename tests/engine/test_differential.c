/* Random graphs (elementwise ops, views, reductions, matmul, softmax) built the same way on the
 * device and on the interpreter, read back and compared. The expected values here are not
 * independent (the other test files have those): this test catches the two backends drifting
 * apart on combinations nobody wrote down. Tolerance: |device - interpreter| <= 1e-4 (1 +
 * |interpreter|) (exp, tanh and softmax on the device carry a few ULP; inputs are quarters in
 * [-2, 2], so every magnitude stays small); NaN must match NaN. Graphs avoid float-to-integer
 * casts of computed values (a one-ULP difference can truncate to another integer). */
#include "engine_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { SEEDS = 60, MAX_ELEMS = 4096 };

typedef struct rng {
    uint64_t s;
} rng;

static uint32_t rnd(rng *r, uint32_t n) {
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((r->s >> 33) % n);
}

/* One random op over the pool; NULL when it does not apply (the error is cleared). */
static kiln_tensor *random_op(rng *r, kiln_tensor *a, kiln_tensor *b) {
    int64_t sh[KILN_MAX_DIMS];
    uint32_t nd = kiln_tensor_ndim(a);
    kiln_tensor_shape(a, sh);
    int32_t d = nd ? (int32_t)rnd(r, nd) : 0;
    switch (rnd(r, 20)) {
    case 0:
        return kiln_add(a, b);
    case 1:
        return kiln_mul(a, b);
    case 2:
        return kiln_sub(a, kiln_maximum(a, b));
    case 3:
        return kiln_where(kiln_lt(a, b), a, kiln_neg(b));
    case 4:
        return nd ? kiln_flip(a, d) : NULL;
    case 5:
        return nd >= 2 ? kiln_transpose(a, 0, -1) : NULL;
    case 6:
        return nd ? kiln_sum(a, 1, &d, rnd(r, 2)) : NULL;
    case 7:
        return nd ? kiln_max(a, 1, &d, true) : NULL;
    case 8:
        return nd && sh[d] > 1 ? kiln_slice(a, d, INT64_MAX, INT64_MIN, -2) : NULL;
    case 9: {
        int64_t pad[2 * KILN_MAX_DIMS] = {0};
        pad[2 * d] = rnd(r, 2);
        pad[2 * d + 1] = 1;
        return nd ? kiln_pad(a, pad) : NULL;
    }
    case 10:
        return kiln_relu(kiln_add_scalar(a, -0.5));
    case 11:
        return nd ? kiln_mean(a, 1, &d, true) : NULL;
    case 12:
        return nd && sh[d] >= 2 ? kiln_unfold(a, d, 2, 1 + rnd(r, 2)) : NULL;
    case 13:
        return nd ? kiln_softmax(a, d) : NULL;
    case 14:
        return nd ? kiln_var(a, 1, &d, rnd(r, 2), rnd(r, 2)) : NULL;
    case 15: {
        if (nd < 1)
            return NULL;
        return kiln_matmul(a, kiln_transpose(kiln_unsqueeze(a, 0), -1, -2));
    }
    case 16:
        return nd >= 2 ? kiln_diagonal(a, (int64_t)rnd(r, 3) - 1, 0, (int32_t)nd - 1) : NULL;
    case 17:
        return nd ? kiln_select(a, d, 0) : NULL;
    case 18:
        return kiln_tanh(kiln_exp(kiln_mul_scalar(a, 0.5)));
    default: {
        int64_t n = 1;
        for (uint32_t i = 0; i < nd; i++)
            n *= sh[i];
        return kiln_reshape(a, 1, &n);
    }
    }
}

/* Eight random ops over pool (*np tensors, room for 16): each result joins it (in a random
 * slot once it is full), unless the op does not apply or makes more than MAX_ELEMS elements. */
static void random_ops(kiln_context *ctx, rng *r, kiln_tensor **pool, uint32_t *np) {
    for (int step = 0; step < 8; step++) {
        kiln_tensor *a = pool[rnd(r, *np)], *b = pool[rnd(r, *np)];
        kiln_tensor *t = random_op(r, a, b);
        int64_t numel = 0;
        if (t && kiln_tensor_numel(t, &numel) == KILN_OK && numel <= MAX_ELEMS)
            pool[*np < 16 ? (*np)++ : rnd(r, 16)] = t;
        else
            kiln_context_clear_error(ctx);
    }
}

/* The graph of seed in ctx: three (<=5, <=7, <=4) inputs of quarters, eight random ops. */
static kiln_tensor *random_graph(kiln_context *ctx, uint64_t seed) {
    rng r = {seed};
    int64_t sh[3] = {1 + rnd(&r, 5), 1 + rnd(&r, 7), 1 + rnd(&r, 4)};
    float data[140];
    kiln_tensor *pool[16];
    uint32_t np = 0;
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 140; i++)
            data[i] = (float)((int)rnd(&r, 17) - 8) / 4.0f;
        pool[np++] = fx_f32(ctx, 3, sh, data);
    }
    random_ops(ctx, &r, pool, &np);
    return pool[np - 1];
}

static void test_engine_differential_device_matches_interpreter(void **state) {
    eng_fixture *f = *state;
    if (!f->device) /* one run compares both */
        skip();
    kiln_context *ref = eng_context_new(false);
    assert_non_null(ref);
    static float got[MAX_ELEMS], want[MAX_ELEMS];
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        kiln_tensor *x = random_graph(f->ctx, seed), *y = random_graph(ref, seed);
        int64_t n;
        assert_int_equal(kiln_tensor_numel(x, &n), KILN_OK);
        kiln_status s1 = kiln_read(x, got, sizeof got), s2 = kiln_read(y, want, sizeof want);
        if (s1 != KILN_OK || s2 != KILN_OK)
            fail_msg("seed %llu: device %s, interpreter %s", (unsigned long long)seed,
                     kiln_context_message(f->ctx), kiln_context_message(ref));
        for (int64_t i = 0; i < n; i++) {
            double g = got[i], w = want[i];
            bool ok = isnan(w) ? isnan(g) : g == w || fabs(g - w) <= 1e-4 * (1 + fabs(w));
            if (!ok)
                fail_msg("seed %llu element %lld: device %.9g, interpreter %.9g",
                         (unsigned long long)seed, (long long)i, g, w);
        }
    }
    kiln_context_destroy(ref);
}

/* ---- the same graph realized again: replay ----------------------------------------------------
 *
 * A loop builds the same random graph every step with other values, as a training or decoding
 * loop does, and realizes it: from its third realize, schedule/plan.c takes the kernels the last
 * realize built where their regions are the same (replay). The loop runs in the fixture's context
 * and in one that keeps nothing (eng_testing no_foresight), which builds every kernel; both must
 * compute the same values at every step. Each step: x, new values of a fixed shape; part, a
 * narrow of a larger upload at a bound start (moving every step, or at step 3 only, or never);
 * x times a scale read as a number from a bound Variable (step + 1); acc, a tensor realized
 * before the loop and updated in place; a mix reading a cache that the step then writes a row of
 * at a bound position (as a decoder's KV cache). Eight random ops over those (random_op), then
 * acc += mean(result) / 4 and cache[step] = mean(result); in some loops a tensor outside the
 * realize reads one of the ops' values, through a reduction from step 3. Debug builds also build
 * every kernel they take and fail a realize whose taken kernel differs from its build. */
enum { LOOP_SEEDS = 24, LOOP_STEPS = 5 };

typedef struct loop_state {
    kiln_tensor *acc, *cache; /* realized before the loop, written in place every step */
    int64_t shape[3];
    uint64_t seed;
} loop_state;

static void loop_start(kiln_context *ctx, loop_state *ls, uint64_t seed) {
    rng r = {seed};
    ls->seed = seed;
    for (int d = 0; d < 3; d++)
        ls->shape[d] = 1 + rnd(&r, d == 1 ? 7 : 5);
    ls->acc = kiln_zeros(ctx, KILN_F32, 3, ls->shape);
    ls->cache = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){LOOP_STEPS, 1});
    kiln_tensor *both[2] = {ls->acc, ls->cache};
    assert_int_equal(kiln_realize_many(ctx, 2, both), KILN_OK);
}

/* Step `step` of ls's loop in ctx; acc's and the cache's values after it into out. */
static void loop_step(kiln_context *ctx, loop_state *ls, int step, float *out, int64_t *count) {
    rng r = {ls->seed}, data = {ls->seed * 7919 + (uint64_t)step};
    (void)rnd(&r, 5), (void)rnd(&r, 7), (void)rnd(&r, 5); /* loop_start's shape */
    uint32_t moves = rnd(&r, 3); /* part's start: every step, at step 3 only, never */
    int64_t numel = ls->shape[0] * ls->shape[1] * ls->shape[2];
    float xv[5 * 7 * 5], bigv[7 * 7 * 5];
    for (int64_t i = 0; i < numel; i++)
        xv[i] = (float)((int)rnd(&data, 17) - 8) / 4.0f;
    for (int64_t i = 0; i < numel + 2 * ls->shape[1] * ls->shape[2]; i++)
        bigv[i] = (float)((int)rnd(&data, 17) - 8) / 4.0f;
    kiln_scope_begin(ctx);
    const kiln_expr *start = kiln_variable(ctx, "start", 0, 2);
    const kiln_expr *scale = kiln_variable(ctx, "scale", 1, 100);
    const kiln_expr *pos = kiln_variable(ctx, "pos", 0, LOOP_STEPS - 1);
    int64_t at = moves == 0 ? step % 3 : moves == 1 ? step >= 3 : 0;
    kiln_tensor *x = fx_f32(ctx, 3, ls->shape, xv);
    kiln_tensor *big =
        fx_f32(ctx, 3, (const int64_t[]){ls->shape[0] + 2, ls->shape[1], ls->shape[2]}, bigv);
    kiln_tensor *pool[16] = {
        x,
        kiln_narrow_sym(big, 0, kiln_bind(ctx, start, at), kiln_int(ctx, ls->shape[0])),
        kiln_mul(x, kiln_scalar_expr(ctx, KILN_F32, kiln_bind(ctx, scale, step + 1))),
        ls->acc,
        kiln_add(x, kiln_mul_scalar(kiln_sum(ls->cache, 0, NULL, false), 0.125)),
    };
    uint32_t np = 5;
    random_ops(ctx, &r, pool, &np);
    /* In about half the loops, a tensor built and not realized reads one of the values every
     * step, and from step 3 a reduction reads that tensor: the graph realized is the same,
     * the readers above the value are not (where it is inlined and long enough, a build then
     * realizes it first: test_realize replay_sees_readers_outside_the_graph). */
    uint32_t outside = rnd(&r, 2 * np);
    if (outside < np) {
        kiln_tensor *b = kiln_mul_scalar(pool[outside], 5);
        if (step >= 3)
            (void)kiln_sum(b, 0, NULL, false);
    }
    kiln_tensor *mean = kiln_mean(pool[np - 1], 0, NULL, false);
    assert_int_equal(kiln_add_(ls->acc, kiln_mul_scalar(mean, 0.25)), KILN_OK);
    kiln_tensor *row = kiln_narrow_sym(ls->cache, 0, kiln_bind(ctx, pos, step), kiln_int(ctx, 1));
    assert_int_equal(kiln_copy_(row, mean), KILN_OK);
    kiln_tensor *both[2] = {ls->acc, ls->cache};
    kiln_status st = kiln_realize_many(ctx, 2, both);
    if (st == KILN_OK)
        st = kiln_read(ls->acc, out, (size_t)numel * sizeof *out);
    if (st == KILN_OK)
        st = kiln_read(ls->cache, out + numel, LOOP_STEPS * sizeof *out);
    if (st != KILN_OK)
        fail_msg("seed %llu step %d: %s", (unsigned long long)ls->seed, step,
                 kiln_context_message(ctx));
    *count = numel + LOOP_STEPS;
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
}

static void test_engine_differential_replayed_loops_match(void **state) {
    eng_fixture *f = *state;
    kiln_context *without = fx_ctx_without_foresight(state);
    static float got[MAX_ELEMS], want[MAX_ELEMS];
    uint32_t replaying = 0; /* seeds that took a kernel */
    for (uint64_t seed = 1; seed <= LOOP_SEEDS; seed++) {
        loop_state with_ls, without_ls;
        loop_start(f->ctx, &with_ls, seed);
        loop_start(without, &without_ls, seed);
        uint64_t replayed = kiln_context_stats(f->ctx).builds_replayed;
        for (int step = 0; step < LOOP_STEPS; step++) {
            int64_t n, m;
            loop_step(f->ctx, &with_ls, step, got, &n);
            loop_step(without, &without_ls, step, want, &m);
            assert_int_equal(n, m);
            for (int64_t i = 0; i < n; i++) {
                bool ok = isnan(want[i]) ? isnan(got[i]) : got[i] == want[i];
                if (!ok)
                    fail_msg("seed %llu step %d element %lld: %.9g with replay, %.9g without",
                             (unsigned long long)seed, step, (long long)i, got[i], want[i]);
            }
        }
        replaying += kiln_context_stats(f->ctx).builds_replayed > replayed;
        kiln_release(with_ls.acc);
        kiln_release(with_ls.cache);
        kiln_release(without_ls.acc);
        kiln_release(without_ls.cache);
    }
    assert_int_equal(kiln_context_stats(without).builds_replayed, 0);
    print_message("replay took kernels in %u of %d loops\n", replaying, LOOP_SEEDS);
    assert_true(replaying >= LOOP_SEEDS / 2);
    eng_fixture_context_destroy(without);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_differential_device_matches_interpreter),
        ENG_TEST(test_engine_differential_replayed_loops_match),
    };
    return ENG_RUN_BOTH(tests);
}
