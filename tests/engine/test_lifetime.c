/* Tensor identity and lifetime, on the device and on the interpreter: every creation has a
 * storage of its own; a write never reaches another tensor's value nor a computation built
 * after it; released handles and tensors of other contexts are errors, never a use of freed
 * memory; loops run in constant memory (live counts and the allocator's bytes flat from the
 * third step on: a graph's second realize keeps its kernels for the next, engine/schedule/
 * plan.c). */
#include "engine_fixture.h"
#include "test_alloc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const int64_t S4[1] = {4};

/* ---- identity ------------------------------------------------------------------------------ */

/* Two creations with the same arguments are two storages: a write into one leaves the other. */
static void test_engine_lifetime_creations_are_distinct(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const float ones[4] = {1, 1, 1, 1}, zeros[4] = {0, 0, 0, 0};
    kiln_tensor *pairs[][2] = {
        {kiln_zeros(ctx, KILN_F32, 1, S4), kiln_zeros(ctx, KILN_F32, 1, S4)},
        {kiln_ones(ctx, KILN_F32, 1, S4), kiln_ones(ctx, KILN_F32, 1, S4)},
        {kiln_full(ctx, KILN_F32, 1, S4, 2), kiln_full(ctx, KILN_F32, 1, S4, 2)},
        {kiln_arange(ctx, KILN_F32, 0, 4, 1), kiln_arange(ctx, KILN_F32, 0, 4, 1)},
        {kiln_rand(ctx, KILN_F32, 1, S4, 7), kiln_rand(ctx, KILN_F32, 1, S4, 7)},
        {kiln_randn(ctx, KILN_F32, 1, S4, 7), kiln_randn(ctx, KILN_F32, 1, S4, 7)},
        {kiln_add_scalar(kiln_zeros(ctx, KILN_F32, 1, S4), 0),
         kiln_add_scalar(kiln_zeros(ctx, KILN_F32, 1, S4), 0)},
        {kiln_empty(ctx, KILN_F32, 1, S4), kiln_empty(ctx, KILN_F32, 1, S4)},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        kiln_tensor *a = pairs[i][0], *b = pairs[i][1];
        assert_non_null(a);
        assert_non_null(b);
        float before[4];
        if (i == 7) /* empty: give b known contents first */
            assert_int_equal(kiln_fill_(b, 1), KILN_OK);
        fx_read(b, KILN_F32, before, 4);
        assert_int_equal(kiln_fill_(a, 5), KILN_OK);
        fx_check_f32(a, (const float[]){5, 5, 5, 5}, 4, 0, 0);
        fx_check_f32(b, before, 4, 0, 0);
    }
    /* A KV cache made of two zeros: V's rows written, K still zeros. */
    kiln_tensor *k = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){2, 2});
    kiln_tensor *v = kiln_zeros(ctx, KILN_F32, 2, (const int64_t[]){2, 2});
    assert_int_equal(kiln_copy_(kiln_select(v, 0, 1), fx_f32(ctx, 1, (const int64_t[]){2}, ones)),
                     KILN_OK);
    fx_check_f32(k, zeros, 4, 0, 0);
    fx_check_f32(v, (const float[]){0, 0, 1, 1}, 4, 0, 0);
}

/* After a write, an expression built again reads the storage's old contents nowhere. */
static void test_engine_lifetime_write_then_rebuild(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const float xs[4] = {1, 2, 3, 4}, plus1[4] = {2, 3, 4, 5}, zeros[4] = {0};
    kiln_tensor *x = fx_f32(ctx, 1, S4, xs);
    for (int realized = 0; realized < 2; realized++) {
        kiln_tensor *a = kiln_add_scalar(x, 1);
        kiln_tensor *b = kiln_add_scalar(x, 1);     /* equal computation, another tensor */
        kiln_tensor *twice = kiln_mul_scalar(a, 2); /* built before the write: old values */
        if (realized)
            assert_int_equal(kiln_realize(a), KILN_OK);
        assert_int_equal(kiln_fill_(a, 0), KILN_OK);
        fx_check_f32(a, zeros, 4, 0, 0);
        fx_check_f32(b, plus1, 4, 0, 0);
        fx_check_f32(kiln_add_scalar(x, 1), plus1, 4, 0, 0);
        fx_check_f32(twice, (const float[]){4, 6, 8, 10}, 4, 0, 0);
    }
    /* A write to x itself: what was built before reads the old x, what is built after the
     * new one. */
    kiln_tensor *old = kiln_add_scalar(x, 1);
    assert_int_equal(kiln_add_(x, kiln_scalar(ctx, KILN_F32, 10)), KILN_OK);
    fx_check_f32(old, plus1, 4, 0, 0);
    fx_check_f32(kiln_add_scalar(x, 1), (const float[]){12, 13, 14, 15}, 4, 0, 0);
    /* A non-aliasing reshape is a tensor of its own. */
    kiln_tensor *m = fx_f32(ctx, 2, (const int64_t[]){2, 2}, xs);
    kiln_tensor *r = kiln_reshape(kiln_transpose(m, 0, 1), 1, S4);
    assert_int_equal(kiln_fill_(r, 0), KILN_OK);
    fx_check_f32(m, xs, 4, 0, 0);
    fx_check_f32(r, zeros, 4, 0, 0);
}

/* A tensor that the value written into x reads, itself computed from x, keeps its values:
 * the write realizes it first. keep = 2x and x = keep + 1, or x = 2x + 1 (whose 2x is keep's
 * computation, one node); the written value is a tensor too and keeps its values. */
static void test_engine_lifetime_write_of_a_value_a_tensor_reads(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const float xs[4] = {1, 2, 3, 4}, twice[4] = {2, 4, 6, 8}, next[4] = {3, 5, 7, 9};
    for (int equal = 0; equal < 2; equal++) {
        kiln_tensor *x = fx_f32(ctx, 1, S4, xs);
        kiln_tensor *keep = kiln_mul_scalar(x, 2);
        kiln_tensor *value = kiln_add_scalar(equal ? kiln_mul_scalar(x, 2) : keep, 1);
        assert_int_equal(kiln_copy_(x, value), KILN_OK);
        assert_int_equal(kiln_realize(x), KILN_OK);
        fx_check_f32(x, next, 4, 0, 0);
        fx_check_f32(keep, twice, 4, 0, 0);
        fx_check_f32(value, next, 4, 0, 0);
    }
}

/* ---- misuse ------------------------------------------------------------------------------- */

static void expect_message(kiln_context *ctx, const char *call) {
    assert_int_not_equal(kiln_context_status(ctx), KILN_OK);
    if (!strstr(kiln_context_message(ctx), call))
        fail_msg("message \"%s\" does not name %s", kiln_context_message(ctx), call);
    kiln_context_clear_error(ctx);
}

static void test_engine_lifetime_released_handles(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *x = fx_f32(ctx, 1, S4, (const float[]){1, 2, 3, 4});
    kiln_tensor *view = kiln_slice(x, 0, 1, 3, 1);
    kiln_tensor *y = kiln_add_scalar(x, 1);
    assert_int_equal(kiln_release(x), KILN_OK);
    /* The view and the computation keep what they need. */
    fx_check_f32(view, (const float[]){2, 3}, 2, 0, 0);
    fx_check_f32(y, (const float[]){2, 3, 4, 5}, 4, 0, 0);
    /* Every use of the released handle is an error naming the call. */
    assert_null(kiln_add(x, y));
    expect_message(ctx, "kiln_add");
    assert_null(kiln_add(y, x));
    expect_message(ctx, "kiln_add");
    assert_null(kiln_where(y, x, y));
    expect_message(ctx, "kiln_where");
    assert_null(kiln_slice(x, 0, 0, 1, 1));
    expect_message(ctx, "kiln_slice");
    float out[4];
    assert_int_not_equal(kiln_read(x, out, sizeof out), KILN_OK);
    expect_message(ctx, "kiln_read");
    assert_int_not_equal(kiln_realize(x), KILN_OK);
    expect_message(ctx, "kiln_realize");
    assert_int_not_equal(kiln_copy_(x, y), KILN_OK);
    expect_message(ctx, "kiln_copy_");
    assert_int_not_equal(kiln_copy_(y, x), KILN_OK);
    expect_message(ctx, "kiln_copy_");
    assert_int_not_equal(kiln_release(x), KILN_OK);
    expect_message(ctx, "kiln_release");
    int64_t n;
    assert_int_not_equal(kiln_tensor_numel(x, &n), KILN_OK);
    expect_message(ctx, "kiln_tensor_numel");
    assert_null(kiln_tensor_context(x));
    kiln_context_clear_error(ctx);
    assert_int_equal(kiln_release(NULL), KILN_OK);
    /* A call that returns its operand as it was still returns a handle of its own. */
    kiln_tensor *same = kiln_cast(y, KILN_F32);
    assert_non_null(same);
    assert_ptr_not_equal(same, y);
    assert_int_equal(kiln_release(same), KILN_OK);
    fx_check_f32(y, (const float[]){2, 3, 4, 5}, 4, 0, 0);
    /* A handle released by its scope's end. */
    kiln_scope_begin(ctx);
    kiln_tensor *inner = kiln_mul_scalar(y, 2);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    assert_null(kiln_neg(inner));
    expect_message(ctx, "kiln_neg");
    /* The keep list cannot revive it, and a count without a list is refused. */
    kiln_scope_begin(ctx);
    assert_int_not_equal(kiln_scope_end(ctx, 1, &inner), KILN_OK);
    expect_message(ctx, "kiln_scope_end");
    assert_int_not_equal(kiln_scope_end(ctx, 3, NULL), KILN_OK);
    expect_message(ctx, "kiln_scope_end");
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    assert_int_not_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK); /* none open */
    expect_message(ctx, "kiln_scope_end");
    fx_check_f32(y, (const float[]){2, 3, 4, 5}, 4, 0, 0);
}

/* A refused write is that call's failure: the message names it, and later calls run without
 * kiln_context_clear_error; the destination is unchanged. */
static void test_engine_lifetime_refused_writes(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_tensor *a = fx_f32(ctx, 2, (const int64_t[]){2, 2}, (const float[]){1, 2, 3, 4});
    kiln_tensor *b = fx_f32(ctx, 1, (const int64_t[]){3}, (const float[]){5, 6, 7});
    assert_int_not_equal(kiln_copy_(a, b), KILN_OK);
    assert_non_null(strstr(kiln_context_message(ctx), "kiln_copy_"));
    assert_non_null(strstr(kiln_context_message(ctx), "expand")); /* the cause */
    fx_check_f32(a, (const float[]){1, 2, 3, 4}, 4, 0, 0);
    kiln_tensor *n = fx_i32(ctx, 1, (const int64_t[]){2}, (const int32_t[]){1, 2});
    assert_int_not_equal(kiln_fill_(n, NAN), KILN_OK);
    assert_non_null(strstr(kiln_context_message(ctx), "kiln_fill_"));
    fx_check_i32(n, (const int32_t[]){1, 2}, 2);
    assert_int_not_equal(kiln_add_(a, b), KILN_OK);
    assert_non_null(strstr(kiln_context_message(ctx), "kiln_add_"));
    fx_check_f32(kiln_add_scalar(a, 1), (const float[]){2, 3, 4, 5}, 4, 0, 0);
    kiln_context_clear_error(ctx); /* the last failed call's message */
}

static void test_engine_lifetime_other_contexts(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_context *other = eng_context_new(false);
    assert_non_null(other);
    kiln_tensor *a = fx_f32(ctx, 1, S4, (const float[]){1, 2, 3, 4});
    kiln_tensor *b = fx_f32(other, 1, S4, (const float[]){5, 6, 7, 8});
    assert_null(kiln_add(a, b));
    expect_message(ctx, "kiln_add");
    assert_null(kiln_where(a, a, b));
    expect_message(ctx, "kiln_where");
    assert_null(kiln_where(b, a, a));
    expect_message(other, "kiln_where"); /* reported where the first operand lives */
    assert_int_not_equal(kiln_copy_(a, b), KILN_OK);
    expect_message(ctx, "kiln_copy_");
    assert_int_not_equal(kiln_realize_many(ctx, 2, (kiln_tensor *[]){a, b}), KILN_OK);
    expect_message(ctx, "kiln_realize_many");
    kiln_scope_begin(ctx);
    assert_int_not_equal(kiln_scope_end(ctx, 1, &b), KILN_OK);
    expect_message(ctx, "kiln_scope_end");
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    /* b still belongs to other and works there. */
    fx_check_f32(kiln_add(b, b), (const float[]){10, 12, 14, 16}, 4, 0, 0);
    /* A handle of a destroyed context names no context. */
    eng_fixture_context_destroy(other);
    assert_null(kiln_add(a, b));
    expect_message(ctx, "kiln_add");
    fx_check_f32(a, (const float[]){1, 2, 3, 4}, 4, 0, 0);
}

/* ---- expression handles ------------------------------------------------------------------ */

static void expect_stale(kiln_context *ctx, const char *call) {
    assert_int_equal(kiln_context_status(ctx), KILN_ERROR_INVALID_HANDLE);
    expect_message(ctx, call);
}

/* Outside any scope, an expression that binds a Variable lives until the Variable is bound
 * again, or longer while a tensor uses it; then its handle is refused, never followed. */
static void test_engine_lifetime_expressions_rebound(void **state) {
    kiln_context *ctx = fx_ctx(state);
    const kiln_expr *n = kiln_variable(ctx, "n", 1, 100);
    const kiln_expr *b3 = kiln_bind(ctx, n, 3);
    const kiln_expr *two = kiln_int(ctx, 2);
    const kiln_expr *six = kiln_expr_mul(ctx, b3, two);
    const kiln_expr *four = kiln_expr_add(ctx, b3, kiln_int(ctx, 1));
    assert_non_null(six);
    assert_non_null(four);
    /* Equal expressions are the same handle. */
    assert_ptr_equal(kiln_bind(ctx, n, 3), b3);
    assert_ptr_equal(kiln_int(ctx, 2), two);
    assert_ptr_equal(kiln_expr_mul(ctx, b3, kiln_int(ctx, 2)), six);
    assert_ptr_equal(kiln_variable(ctx, "n", 1, 100), n);
    kiln_tensor *t = kiln_arange_sym(ctx, KILN_F32, six); /* uses 2 * n=3 */
    assert_ptr_equal(kiln_tensor_size_expr(t, 0), six);

    const kiln_expr *b4 = kiln_bind(ctx, n, 4); /* supersedes n=3 */
    assert_non_null(b4);
    int64_t value = 0;
    /* four is used by nothing: its handle is stale, in every call that takes one. */
    assert_int_equal(kiln_expr_value(ctx, four, &value), KILN_ERROR_INVALID_HANDLE);
    expect_message(ctx, "kiln_expr_value");
    assert_null(kiln_expr_add(ctx, four, b4));
    expect_stale(ctx, "kiln_expr_add");
    assert_null(kiln_expr_mod(ctx, b4, four));
    expect_stale(ctx, "kiln_expr_mod");
    assert_null(kiln_arange_sym(ctx, KILN_F32, four));
    expect_stale(ctx, "kiln_arange");
    assert_null(kiln_scalar_expr(ctx, KILN_F32, four));
    expect_stale(ctx, "kiln_scalar_expr");
    assert_null(kiln_empty_sym(ctx, KILN_F32, 1, &four));
    expect_stale(ctx, "kiln_empty");
    assert_null(kiln_narrow_sym(t, 0, kiln_int(ctx, 0), four));
    expect_stale(ctx, "kiln_narrow_sym");
    assert_null(kiln_slice_sym(t, 0, four, six, 1));
    expect_stale(ctx, "kiln_slice_sym");
    assert_null(kiln_reshape_sym(t, 1, &four));
    expect_stale(ctx, "kiln_reshape_sym");
    /* six (and the binding in it) stay while t uses them; constants and Variables always. */
    assert_int_equal(kiln_expr_value(ctx, six, &value), KILN_OK);
    assert_int_equal(value, 6);
    assert_int_equal(kiln_expr_value(ctx, b3, &value), KILN_OK);
    assert_int_equal(value, 3);
    assert_int_equal(kiln_expr_value(ctx, two, &value), KILN_OK);
    assert_int_equal(value, 2);
    assert_ptr_equal(kiln_tensor_size_expr(t, 0), six);
    fx_check_f32(t, (const float[]){0, 1, 2, 3, 4, 5}, 6, 0, 0);
    assert_int_equal(kiln_release(t), KILN_OK);
    assert_ptr_equal(kiln_bind(ctx, n, 4), b4); /* the same value again: nothing superseded */
    assert_int_equal(kiln_expr_value(ctx, b4, &value), KILN_OK);
    assert_non_null(kiln_bind(ctx, n, 5));
    assert_int_equal(kiln_expr_value(ctx, six, &value), KILN_ERROR_INVALID_HANDLE);
    kiln_context_clear_error(ctx);
    assert_int_equal(kiln_expr_value(ctx, b4, &value), KILN_ERROR_INVALID_HANDLE);
    kiln_context_clear_error(ctx);
    assert_null(kiln_bind(ctx, b3, 7)); /* b3 is stale (t, which used it, is released) */
    expect_stale(ctx, "kiln_bind");
    /* n=3 built again is a new node with a new handle: the old one stays refused. */
    const kiln_expr *again = kiln_bind(ctx, n, 3);
    assert_non_null(again);
    assert_ptr_not_equal(again, b3);
    assert_int_equal(kiln_expr_value(ctx, b3, &value), KILN_ERROR_INVALID_HANDLE);
    kiln_context_clear_error(ctx);

    /* Another Variable's bindings are not superseded. */
    const kiln_expr *m = kiln_variable(ctx, "m", 0, 9);
    const kiln_expr *m2 = kiln_expr_mul(ctx, kiln_bind(ctx, m, 2), two);
    assert_non_null(kiln_bind(ctx, n, 9));
    assert_int_equal(kiln_expr_value(ctx, m2, &value), KILN_OK);
    assert_int_equal(value, 4);
    /* A binding made in a scope lives until the scope ends, whatever is bound outside. */
    kiln_scope_begin(ctx);
    const kiln_expr *inner = kiln_expr_add(ctx, kiln_bind(ctx, n, 8), two);
    assert_non_null(kiln_bind(ctx, n, 7));
    assert_int_equal(kiln_expr_value(ctx, inner, &value), KILN_OK);
    assert_int_equal(value, 10);
    assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
    assert_int_equal(kiln_expr_value(ctx, inner, &value), KILN_ERROR_INVALID_HANDLE);
    kiln_context_clear_error(ctx);
    assert_int_equal(kiln_expr_value(ctx, m2, &value), KILN_OK);
    assert_int_equal(kiln_context_status(ctx), KILN_OK);
}

/* Expressions of another context, made-up pointers and tensor handles are refused. */
static void test_engine_lifetime_expressions_foreign(void **state) {
    kiln_context *ctx = fx_ctx(state);
    kiln_context *other = eng_context_new(false);
    assert_non_null(other);
    const kiln_expr *mine = kiln_int(ctx, 3), *theirs = kiln_int(other, 3);
    assert_ptr_not_equal(mine, theirs);
    assert_null(kiln_expr_add(ctx, mine, theirs));
    expect_stale(ctx, "kiln_expr_add");
    const kiln_expr *v = kiln_variable(other, "n", 0, 4);
    assert_null(kiln_bind(ctx, v, 1));
    expect_stale(ctx, "kiln_bind");
    int64_t value = 0;
    assert_int_equal(kiln_expr_value(ctx, theirs, &value), KILN_ERROR_INVALID_HANDLE);
    assert_non_null(strstr(kiln_context_message(ctx), "another context"));
    kiln_context_clear_error(ctx);
    kiln_tensor *t = fx_f32(ctx, 1, S4, (const float[]){1, 2, 3, 4});
    assert_null(kiln_expand_sym(t, 1, &theirs));
    expect_stale(ctx, "kiln_expand_sym");
    const kiln_expr *made_up[] = {(const kiln_expr *)&value, (const kiln_expr *)(uintptr_t)1,
                                  (const kiln_expr *)(uintptr_t)UINT64_MAX, (const kiln_expr *)t};
    for (size_t i = 0; i < sizeof made_up / sizeof *made_up; i++) {
        assert_int_equal(kiln_expr_value(ctx, made_up[i], &value), KILN_ERROR_INVALID_HANDLE);
        kiln_context_clear_error(ctx);
        assert_null(kiln_expr_mul(ctx, mine, made_up[i]));
        expect_stale(ctx, "kiln_expr_mul");
        assert_null(kiln_scalar_expr(ctx, KILN_F32, made_up[i]));
        expect_stale(ctx, "kiln_scalar_expr");
    }
    /* A destroyed context's handles name no context. */
    kiln_context_destroy(other);
    assert_int_equal(kiln_expr_value(ctx, theirs, &value), KILN_ERROR_INVALID_HANDLE);
    kiln_context_clear_error(ctx);
    assert_int_equal(kiln_expr_value(ctx, mine, &value), KILN_OK);
    assert_int_equal(value, 3);
}

/* ---- loops in constant memory ---------------------------------------------------------------- */

/* A two-layer MLP trained by gradient descent with hand-written gradients:
 * h = relu(x W1), out = h W2, loss = mean((out - y)^2). */
enum { BATCH = 8, MAX_BATCH = 16, IN = 4, HID = 8, OUT = 2 };
static const float LR = 0.05f;

typedef struct mlp {
    kiln_tensor *x, *y, *w1, *w2;
} mlp;

static float init_value(int i, int salt) {
    return (float)(((i * 37 + salt * 11) % 17) - 8) / 16.0f;
}

static mlp mlp_new(kiln_context *ctx) {
    float x[BATCH * IN], y[BATCH * OUT], w1[IN * HID], w2[HID * OUT];
    for (int i = 0; i < BATCH * IN; i++)
        x[i] = init_value(i, 1);
    for (int i = 0; i < BATCH * OUT; i++)
        y[i] = init_value(i, 2);
    for (int i = 0; i < IN * HID; i++)
        w1[i] = init_value(i, 3);
    for (int i = 0; i < HID * OUT; i++)
        w2[i] = init_value(i, 4);
    return (mlp){fx_f32(ctx, 2, (const int64_t[]){BATCH, IN}, x),
                 fx_f32(ctx, 2, (const int64_t[]){BATCH, OUT}, y),
                 fx_f32(ctx, 2, (const int64_t[]){IN, HID}, w1),
                 fx_f32(ctx, 2, (const int64_t[]){HID, OUT}, w2)};
}

/* The gradients of the loss with respect to w1 and w2, lazily. */
static void mlp_grads(kiln_context *ctx, const mlp *m, kiln_tensor *w1, kiln_tensor *w2,
                      kiln_tensor **g1, kiln_tensor **g2) {
    kiln_tensor *pre = kiln_matmul(m->x, w1);
    kiln_tensor *h = kiln_relu(pre);
    kiln_tensor *out = kiln_matmul(h, w2);
    kiln_tensor *dout = kiln_mul_scalar(kiln_sub(out, m->y), 2.0 / (BATCH * OUT));
    *g2 = kiln_matmul(kiln_transpose(h, 0, 1), dout);
    kiln_tensor *positive = kiln_gt(pre, kiln_zeros(ctx, KILN_F32, 0, NULL));
    kiln_tensor *dh =
        kiln_mul(kiln_matmul(dout, kiln_transpose(w2, 0, 1)), kiln_cast(positive, KILN_F32));
    *g1 = kiln_matmul(kiln_transpose(m->x, 0, 1), dh);
}

/* The same step on the host, in float, over the first batch rows of the inputs. */
static void host_step(float *w1, float *w2, int batch) {
    float x[MAX_BATCH * IN], y[MAX_BATCH * OUT], pre[MAX_BATCH * HID], h[MAX_BATCH * HID];
    float dout[MAX_BATCH * OUT], dh[MAX_BATCH * HID], g1[IN * HID] = {0}, g2[HID * OUT] = {0};
    for (int i = 0; i < batch * IN; i++)
        x[i] = init_value(i, 1);
    for (int i = 0; i < batch * OUT; i++)
        y[i] = init_value(i, 2);
    for (int b = 0; b < batch; b++) {
        for (int j = 0; j < HID; j++) {
            float s = 0;
            for (int k = 0; k < IN; k++)
                s += x[b * IN + k] * w1[k * HID + j];
            pre[b * HID + j] = s;
            h[b * HID + j] = s > 0 ? s : 0;
        }
        for (int o = 0; o < OUT; o++) {
            float s = 0;
            for (int j = 0; j < HID; j++)
                s += h[b * HID + j] * w2[j * OUT + o];
            dout[b * OUT + o] = (s - y[b * OUT + o]) * (2.0f / (float)(batch * OUT));
        }
        for (int j = 0; j < HID; j++) {
            float s = 0;
            for (int o = 0; o < OUT; o++)
                s += dout[b * OUT + o] * w2[j * OUT + o];
            dh[b * HID + j] = pre[b * HID + j] > 0 ? s : 0;
        }
    }
    for (int b = 0; b < batch; b++) {
        for (int j = 0; j < HID; j++) {
            for (int o = 0; o < OUT; o++)
                g2[j * OUT + o] += h[b * HID + j] * dout[b * OUT + o];
            for (int k = 0; k < IN; k++)
                g1[k * HID + j] += x[b * IN + k] * dh[b * HID + j];
        }
    }
    for (int i = 0; i < IN * HID; i++)
        w1[i] -= LR * g1[i];
    for (int i = 0; i < HID * OUT; i++)
        w2[i] -= LR * g2[i];
}

typedef enum loop_kind {
    LOOP_IN_PLACE, /* kiln_add_ on the parameters, a scope per step */
    LOOP_RELEASE,  /* next = f(state), every handle of the step released by hand */
    LOOP_SCOPES,   /* next = f(state) in a scope that keeps next; the old state released */
} loop_kind;

/* One step; returns the status of its realize. */
static kiln_status loop_step(kiln_context *ctx, loop_kind kind, mlp *m) {
    if (kind == LOOP_IN_PLACE) {
        kiln_scope_begin(ctx);
        kiln_tensor *g1, *g2;
        mlp_grads(ctx, m, m->w1, m->w2, &g1, &g2);
        kiln_status st = kiln_add_(m->w1, kiln_mul_scalar(g1, -LR));
        if (st == KILN_OK)
            st = kiln_add_(m->w2, kiln_mul_scalar(g2, -LR));
        if (st == KILN_OK)
            st = kiln_realize_many(ctx, 2, (kiln_tensor *[]){m->w1, m->w2});
        kiln_status end = kiln_scope_end(ctx, 0, NULL);
        return st != KILN_OK ? st : end;
    }
    if (kind == LOOP_SCOPES) {
        kiln_scope_begin(ctx);
        kiln_tensor *g1, *g2;
        mlp_grads(ctx, m, m->w1, m->w2, &g1, &g2);
        kiln_tensor *next[2] = {kiln_sub(m->w1, kiln_mul_scalar(g1, LR)),
                                kiln_sub(m->w2, kiln_mul_scalar(g2, LR))};
        kiln_status st = kiln_realize_many(ctx, 2, next);
        if (st == KILN_OK) {
            kiln_release(m->w1);
            kiln_release(m->w2);
        }
        kiln_status end = kiln_scope_end(ctx, st == KILN_OK ? 2 : 0, next);
        if (st == KILN_OK)
            m->w1 = next[0], m->w2 = next[1];
        return st != KILN_OK ? st : end;
    }
    /* LOOP_RELEASE: the step's handles by hand. */
    kiln_tensor *pre = kiln_matmul(m->x, m->w1);
    kiln_tensor *h = kiln_relu(pre);
    kiln_tensor *out = kiln_matmul(h, m->w2);
    kiln_tensor *diff = kiln_sub(out, m->y);
    kiln_tensor *dout = kiln_mul_scalar(diff, 2.0 / (BATCH * OUT));
    kiln_tensor *ht = kiln_transpose(h, 0, 1);
    kiln_tensor *g2 = kiln_matmul(ht, dout);
    kiln_tensor *w2t = kiln_transpose(m->w2, 0, 1);
    kiln_tensor *back = kiln_matmul(dout, w2t);
    kiln_tensor *zero = kiln_zeros(ctx, KILN_F32, 0, NULL);
    kiln_tensor *pos = kiln_gt(pre, zero);
    kiln_tensor *mask = kiln_cast(pos, KILN_F32);
    kiln_tensor *dh = kiln_mul(back, mask);
    kiln_tensor *xt = kiln_transpose(m->x, 0, 1);
    kiln_tensor *g1 = kiln_matmul(xt, dh);
    kiln_tensor *s1 = kiln_mul_scalar(g1, LR), *s2 = kiln_mul_scalar(g2, LR);
    kiln_tensor *next[2] = {kiln_sub(m->w1, s1), kiln_sub(m->w2, s2)};
    kiln_tensor *made[] = {pre,  h,   out,  diff, dout, ht, g2, w2t, back,
                           zero, pos, mask, dh,   xt,   g1, s1, s2};
    kiln_status st = kiln_realize_many(ctx, 2, next);
    for (size_t i = 0; i < sizeof made / sizeof *made; i++)
        kiln_release(made[i]);
    if (st == KILN_OK) {
        kiln_release(m->w1);
        kiln_release(m->w2);
        m->w1 = next[0], m->w2 = next[1];
    } else {
        kiln_release(next[0]);
        kiln_release(next[1]);
    }
    return st;
}

typedef struct counts {
    kiln_stats stats;
    size_t bytes;
    long blocks;
} counts;

static counts counts_now(kiln_context *ctx, const test_alloc *ta) {
    return (counts){kiln_context_stats(ctx), ta->live_bytes, ta->live_blocks};
}

static void assert_flat(const counts *a, const counts *b, int step) {
    if (a->stats.live_tensors != b->stats.live_tensors ||
        a->stats.live_nodes != b->stats.live_nodes ||
        a->stats.live_storages != b->stats.live_storages ||
        a->stats.live_storage_bytes != b->stats.live_storage_bytes ||
        a->stats.live_expressions != b->stats.live_expressions || a->bytes != b->bytes ||
        a->blocks != b->blocks)
        fail_msg("step %d: tensors %llu -> %llu, nodes %llu -> %llu, storages %llu -> %llu, "
                 "storage bytes %llu -> %llu, expressions %llu -> %llu, host bytes %zu -> %zu, "
                 "blocks %ld -> %ld",
                 step, (unsigned long long)a->stats.live_tensors,
                 (unsigned long long)b->stats.live_tensors, (unsigned long long)a->stats.live_nodes,
                 (unsigned long long)b->stats.live_nodes,
                 (unsigned long long)a->stats.live_storages,
                 (unsigned long long)b->stats.live_storages,
                 (unsigned long long)a->stats.live_storage_bytes,
                 (unsigned long long)b->stats.live_storage_bytes,
                 (unsigned long long)a->stats.live_expressions,
                 (unsigned long long)b->stats.live_expressions, a->bytes, b->bytes, a->blocks,
                 b->blocks);
}

/* A symbolic loop's counts after step `step`: at the third, the baseline (*at3); after it, flat
 * against it and no kernel compiled (one compile serves every batch size). */
static void flat_from_third(int step, counts now, counts *at3) {
    if (step == 3) {
        *at3 = now;
    } else if (step > 3) {
        assert_flat(at3, &now, step);
        assert_int_equal(now.stats.kernels_compiled, at3->stats.kernels_compiled);
    }
}

/* Runs steps of kind, checking the counts flat after step 3 (a graph's second realize keeps
 * its kernels for the next: plan.c) and the parameters against the host's after the last
 * step. */
static void run_loop(bool device, bool validation, loop_kind kind, int steps) {
    test_alloc ta = {0};
    kiln_context_options opt = {.device = device ? NULL : "interp",
                                .validation = validation,
                                .alloc = test_alloc_fn,
                                .alloc_user = &ta};
    kiln_context *ctx = NULL;
    assert_int_equal(kiln_context_create(&opt, &ctx), KILN_OK);
    mlp m = mlp_new(ctx);
    counts at3 = {0};
    for (int step = 1; step <= steps; step++) {
        kiln_status st = loop_step(ctx, kind, &m);
        if (st != KILN_OK)
            fail_msg("step %d: %s", step, kiln_context_message(ctx));
        if (step == 3)
            at3 = counts_now(ctx, &ta);
        else if (step > 3 && (step % 50 == 0 || step == steps || step == 100 || step == 1000)) {
            counts now = counts_now(ctx, &ta);
            assert_flat(&at3, &now, step);
        }
    }
    float w1[IN * HID], w2[HID * OUT];
    for (int i = 0; i < IN * HID; i++)
        w1[i] = init_value(i, 3);
    for (int i = 0; i < HID * OUT; i++)
        w2[i] = init_value(i, 4);
    for (int step = 0; step < steps; step++)
        host_step(w1, w2, BATCH);
    fx_check_f32(m.w1, w1, IN * HID, 1e-5, 1e-4);
    fx_check_f32(m.w2, w2, HID * OUT, 1e-5, 1e-4);
    eng_fixture_context_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
    assert_int_equal(ta.size_mismatches, 0);
}

static bool on_device(void **state) {
    return ((eng_fixture *)*state)->device;
}

/* On the device: 200 steps with the validation layer, then 10,000 without it (the layer
 * costs most of a step's time; the kernels and calls are the same). */
static void test_engine_lifetime_loop_in_place(void **state) {
    run_loop(on_device(state), on_device(state), LOOP_IN_PLACE, 200);
    if (on_device(state))
        run_loop(true, false, LOOP_IN_PLACE, 10000);
}

static void test_engine_lifetime_loop_release(void **state) {
    run_loop(on_device(state), on_device(state), LOOP_RELEASE, 200);
}

static void test_engine_lifetime_loop_scopes(void **state) {
    run_loop(on_device(state), on_device(state), LOOP_SCOPES, 200);
}

/* The batch a Variable bound to a new value every step (1..16, round and round), the inputs
 * narrowed to it, the parameters updated in place, a scope per step: one compile for every
 * batch size, and the live counts (expressions included) and allocator bytes flat from the
 * third step on; the parameters as the host computes them. */
static void test_engine_lifetime_loop_symbolic_batch(void **state) {
    bool device = on_device(state);
    test_alloc ta = {0};
    kiln_context_options opt = {.device = device ? NULL : "interp",
                                .validation = device,
                                .alloc = test_alloc_fn,
                                .alloc_user = &ta};
    kiln_context *ctx = NULL;
    assert_int_equal(kiln_context_create(&opt, &ctx), KILN_OK);
    float x[MAX_BATCH * IN], y[MAX_BATCH * OUT], w1[IN * HID], w2[HID * OUT];
    for (int i = 0; i < MAX_BATCH * IN; i++)
        x[i] = init_value(i, 1);
    for (int i = 0; i < MAX_BATCH * OUT; i++)
        y[i] = init_value(i, 2);
    for (int i = 0; i < IN * HID; i++)
        w1[i] = init_value(i, 3);
    for (int i = 0; i < HID * OUT; i++)
        w2[i] = init_value(i, 4);
    kiln_tensor *xs = fx_f32(ctx, 2, (const int64_t[]){MAX_BATCH, IN}, x);
    kiln_tensor *ys = fx_f32(ctx, 2, (const int64_t[]){MAX_BATCH, OUT}, y);
    mlp m = {NULL, NULL, fx_f32(ctx, 2, (const int64_t[]){IN, HID}, w1),
             fx_f32(ctx, 2, (const int64_t[]){HID, OUT}, w2)};
    const kiln_expr *batch = kiln_variable(ctx, "batch", 1, MAX_BATCH);
    enum { STEPS = 40 };
    counts at3 = {0};
    for (int step = 1; step <= STEPS; step++) {
        int b = step % MAX_BATCH + 1;
        kiln_scope_begin(ctx);
        const kiln_expr *bound = kiln_bind(ctx, batch, b);
        m.x = kiln_narrow_sym(xs, 0, kiln_int(ctx, 0), bound);
        m.y = kiln_narrow_sym(ys, 0, kiln_int(ctx, 0), bound);
        kiln_tensor *pre = kiln_matmul(m.x, m.w1);
        kiln_tensor *h = kiln_relu(pre);
        kiln_tensor *count =
            kiln_scalar_expr(ctx, KILN_F32, kiln_expr_mul(ctx, bound, kiln_int(ctx, OUT)));
        kiln_tensor *dout =
            kiln_div(kiln_mul_scalar(kiln_sub(kiln_matmul(h, m.w2), m.y), 2), count);
        kiln_tensor *g2 = kiln_matmul(kiln_transpose(h, 0, 1), dout);
        kiln_tensor *positive =
            kiln_cast(kiln_gt(pre, kiln_zeros(ctx, KILN_F32, 0, NULL)), KILN_F32);
        kiln_tensor *dh = kiln_mul(kiln_matmul(dout, kiln_transpose(m.w2, 0, 1)), positive);
        kiln_tensor *g1 = kiln_matmul(kiln_transpose(m.x, 0, 1), dh);
        assert_int_equal(kiln_add_(m.w1, kiln_mul_scalar(g1, -LR)), KILN_OK);
        assert_int_equal(kiln_add_(m.w2, kiln_mul_scalar(g2, -LR)), KILN_OK);
        assert_int_equal(kiln_realize_many(ctx, 2, (kiln_tensor *[]){m.w1, m.w2}), KILN_OK);
        assert_int_equal(kiln_scope_end(ctx, 0, NULL), KILN_OK);
        host_step(w1, w2, b);
        /* Live counts and host memory are flat from step 3, on a device too: a freed device
         * buffer of another size class makes room for a new one (engine/run/runtime.c). */
        flat_from_third(step, counts_now(ctx, &ta), &at3);
    }
    fx_check_f32(m.w1, w1, IN * HID, 1e-5, 1e-4);
    fx_check_f32(m.w2, w2, HID * OUT, 1e-5, 1e-4);
    eng_fixture_context_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
}

/* The symbolic batch loop with no scope: the batch Variable bound to a new value every step
 * outside any scope (1..16, round and round), next = f(state) and every handle of the step
 * released by hand. The expressions of a superseded binding go with the tensors that used
 * them: the live counts (expressions included) and allocator bytes flat from the third step
 * on, one compile for every batch size, the parameters as the host computes them. */
static void test_engine_lifetime_loop_rebind_released(void **state) {
    bool device = on_device(state);
    test_alloc ta = {0};
    kiln_context_options opt = {.device = device ? NULL : "interp",
                                .validation = device,
                                .alloc = test_alloc_fn,
                                .alloc_user = &ta};
    kiln_context *ctx = NULL;
    assert_int_equal(kiln_context_create(&opt, &ctx), KILN_OK);
    float x[MAX_BATCH * IN], y[MAX_BATCH * OUT], w1[IN * HID], w2[HID * OUT];
    for (int i = 0; i < MAX_BATCH * IN; i++)
        x[i] = init_value(i, 1);
    for (int i = 0; i < MAX_BATCH * OUT; i++)
        y[i] = init_value(i, 2);
    for (int i = 0; i < IN * HID; i++)
        w1[i] = init_value(i, 3);
    for (int i = 0; i < HID * OUT; i++)
        w2[i] = init_value(i, 4);
    kiln_tensor *xs = fx_f32(ctx, 2, (const int64_t[]){MAX_BATCH, IN}, x);
    kiln_tensor *ys = fx_f32(ctx, 2, (const int64_t[]){MAX_BATCH, OUT}, y);
    kiln_tensor *p1 = fx_f32(ctx, 2, (const int64_t[]){IN, HID}, w1);
    kiln_tensor *p2 = fx_f32(ctx, 2, (const int64_t[]){HID, OUT}, w2);
    const kiln_expr *batch = kiln_variable(ctx, "batch", 1, MAX_BATCH);
    enum { STEPS = 40 };
    counts at3 = {0};
    const kiln_expr *previous = NULL;
    for (int step = 1; step <= STEPS; step++) {
        int b = step % MAX_BATCH + 1;
        const kiln_expr *bound = kiln_bind(ctx, batch, b);
        assert_non_null(bound);
        if (previous) { /* the last step's binding: superseded, and no tensor uses it */
            int64_t value;
            assert_int_equal(kiln_expr_value(ctx, previous, &value), KILN_ERROR_INVALID_HANDLE);
            kiln_context_clear_error(ctx);
        }
        previous = bound;
        kiln_tensor *xb = kiln_narrow_sym(xs, 0, kiln_int(ctx, 0), bound);
        kiln_tensor *yb = kiln_narrow_sym(ys, 0, kiln_int(ctx, 0), bound);
        kiln_tensor *pre = kiln_matmul(xb, p1);
        kiln_tensor *h = kiln_relu(pre);
        kiln_tensor *out = kiln_matmul(h, p2);
        kiln_tensor *diff = kiln_sub(out, yb);
        kiln_tensor *twice = kiln_mul_scalar(diff, 2);
        kiln_tensor *count =
            kiln_scalar_expr(ctx, KILN_F32, kiln_expr_mul(ctx, bound, kiln_int(ctx, OUT)));
        kiln_tensor *dout = kiln_div(twice, count);
        kiln_tensor *ht = kiln_transpose(h, 0, 1);
        kiln_tensor *g2 = kiln_matmul(ht, dout);
        kiln_tensor *w2t = kiln_transpose(p2, 0, 1);
        kiln_tensor *back = kiln_matmul(dout, w2t);
        kiln_tensor *zero = kiln_zeros(ctx, KILN_F32, 0, NULL);
        kiln_tensor *pos = kiln_gt(pre, zero);
        kiln_tensor *mask = kiln_cast(pos, KILN_F32);
        kiln_tensor *dh = kiln_mul(back, mask);
        kiln_tensor *xt = kiln_transpose(xb, 0, 1);
        kiln_tensor *g1 = kiln_matmul(xt, dh);
        kiln_tensor *s1 = kiln_mul_scalar(g1, LR), *s2 = kiln_mul_scalar(g2, LR);
        kiln_tensor *next[2] = {kiln_sub(p1, s1), kiln_sub(p2, s2)};
        kiln_tensor *made[] = {xb,  yb,   pre,  h,   out,  diff, twice, count, dout, ht, g2,
                               w2t, back, zero, pos, mask, dh,   xt,    g1,    s1,   s2};
        assert_int_equal(kiln_realize_many(ctx, 2, next), KILN_OK);
        for (size_t i = 0; i < sizeof made / sizeof *made; i++)
            assert_int_equal(kiln_release(made[i]), KILN_OK);
        kiln_release(p1);
        kiln_release(p2);
        p1 = next[0], p2 = next[1];
        host_step(w1, w2, b);
        flat_from_third(step, counts_now(ctx, &ta), &at3);
    }
    fx_check_f32(p1, w1, IN * HID, 1e-5, 1e-4);
    fx_check_f32(p2, w2, HID * OUT, 1e-5, 1e-4);
    eng_fixture_context_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
    assert_int_equal(ta.size_mismatches, 0);
}

/* Five steps with every host allocation of them failed in turn, in one context warmed up by
 * steps of every kind (their kernels compiled): no crash; after kiln_context_clear_error the
 * loop goes on, and one good step brings every live count and the allocator's bytes back to
 * where they were (nothing leaked); the parameters stay finite. (Allocation failures while
 * compiling are test_errors' allocation loop.) */
static void test_engine_lifetime_loop_faults(void **state) {
    (void)state;
    test_alloc ta = {0};
    kiln_context_options opt = {.device = "interp", .alloc = test_alloc_fn, .alloc_user = &ta};
    kiln_context *ctx = NULL;
    assert_int_equal(kiln_context_create(&opt, &ctx), KILN_OK);
    mlp m = mlp_new(ctx);
    for (int warm = 0; warm < 6; warm++)
        assert_int_equal(loop_step(ctx, (loop_kind)(warm % 3), &m), KILN_OK);
    counts before = counts_now(ctx, &ta);
    long n;
    for (n = 1;; n++) {
        ta.fail_at = ta.count + n;
        long failures = ta.failures;
        int done = 0;
        for (int step = 0; step < 5; step++) {
            if (loop_step(ctx, (loop_kind)((n + step) % 3), &m) == KILN_OK)
                done++;
            else {
                assert_int_equal(kiln_context_status(ctx), KILN_ERROR_OUT_OF_HOST_MEMORY);
                kiln_context_clear_error(ctx);
            }
        }
        ta.fail_at = 0;
        kiln_context_clear_error(ctx);
        assert_int_equal(loop_step(ctx, LOOP_IN_PLACE, &m), KILN_OK);
        counts after = counts_now(ctx, &ta);
        /* A failure may compile a kernel the warm-up did not need (a step cut short realizes
         * another part of its graph first: a value a held tensor reads, alone): the memory
         * cache keeps it, and memory is flat from there on. A step cut short at another point
         * may hold more nodes at once than a whole one, so the node table's capacity (a
         * high-water mark) may grow: the bytes are not compared, every block and every live
         * count is. Such a part is a graph of its own too, whose builds' dependencies and
         * kernels the context may keep (at most 8 graphs: plan.c's foresight and replay). */
        if (n == 1 || after.stats.kernels_compiled != before.stats.kernels_compiled ||
            after.stats.live_plans != before.stats.live_plans ||
            after.stats.live_replays != before.stats.live_replays)
            before = after;
        after.bytes = before.bytes;
        assert_flat(&before, &after, (int)n);
        if (ta.failures == failures) { /* five steps need fewer than n allocations */
            assert_int_equal(done, 5);
            break;
        }
    }
    assert_true(n > 100);
    float w1[IN * HID];
    assert_int_equal(kiln_read(m.w1, w1, sizeof w1), KILN_OK);
    for (int i = 0; i < IN * HID; i++)
        assert_true(isfinite(w1[i]));
    kiln_context_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
    assert_int_equal(ta.size_mismatches, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ENG_TEST(test_engine_lifetime_creations_are_distinct),
        ENG_TEST(test_engine_lifetime_write_then_rebuild),
        ENG_TEST(test_engine_lifetime_write_of_a_value_a_tensor_reads),
        ENG_TEST(test_engine_lifetime_released_handles),
        ENG_TEST(test_engine_lifetime_refused_writes),
        ENG_TEST(test_engine_lifetime_other_contexts),
        ENG_TEST(test_engine_lifetime_expressions_rebound),
        ENG_TEST(test_engine_lifetime_expressions_foreign),
        ENG_TEST(test_engine_lifetime_loop_in_place),
        ENG_TEST(test_engine_lifetime_loop_release),
        ENG_TEST(test_engine_lifetime_loop_scopes),
        ENG_TEST(test_engine_lifetime_loop_symbolic_batch),
        ENG_TEST(test_engine_lifetime_loop_rebind_released),
    };
    /* On the interpreter only: a Vulkan context per failure point would take minutes, and the
     * paths under test (handles, nodes, storages) are the engine's, the same on both. */
    const struct CMUnitTest faults[] = {
        cmocka_unit_test(test_engine_lifetime_loop_faults),
    };
    return ENG_RUN_BOTH(tests) + cmocka_run_group_tests_name("faults", faults, NULL, NULL);
}
