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
    for (int step = 0; step < 8; step++) {
        kiln_tensor *a = pool[rnd(&r, np)], *b = pool[rnd(&r, np)];
        kiln_tensor *t = random_op(&r, a, b);
        int64_t numel = 0;
        if (t && kiln_tensor_numel(t, &numel) == KILN_OK && numel <= MAX_ELEMS)
            pool[np < 16 ? np++ : rnd(&r, 16)] = t;
        else
            kiln_context_clear_error(ctx);
    }
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

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_differential_device_matches_interpreter),
    };
    return ENG_RUN_BOTH(tests);
}
