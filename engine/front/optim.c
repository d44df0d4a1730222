/* Optimizers: torch.optim's SGD and Adam/AdamW as lazy in-place writes (kiln_add_,
 * kiln_copy_) of the parameters and of their state. The state and the learning rate live on
 * the device, made and realized once; the step count is a Variable bound to the step's number
 * (its value pushed to the kernels that read it, as a sequence length is), so every step
 * builds the same graph, compiles nothing the first did not, and spends no kernel counting. */
#include "eng.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { OPT_SGD, OPT_ADAM };

/* The step count's Variable: every optimizer of a context binds the same one (a kernel reads
 * one optimizer's count, and each binding carries its own value), so their updates share
 * kernels. */
#define STEP_VAR "optimizer_step"
enum { STEP_MAX = INT32_MAX };

struct kiln_optimizer {
    kiln_context *ctx;
    int kind;
    uint32_t count;
    kiln_tensor **params;  /* handles of its own (outside any scope) */
    kiln_tensor **m;       /* SGD: momentum buffers (momentum > 0); Adam: first moments */
    kiln_tensor **v;       /* Adam: second moments */
    const kiln_expr *step; /* the Variable STEP_VAR: bound to steps in each step's graph */
    int64_t steps;         /* steps built so far (kiln_optimizer_step) */
    kiln_tensor *lr;       /* 0-d f32 */
    kiln_sgd_options sgd;
    kiln_adam_options adam;
};

kiln_adam_options kiln_adam_defaults(void) {
    return (kiln_adam_options){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

kiln_adam_options kiln_adamw_defaults(void) {
    kiln_adam_options o = kiln_adam_defaults();
    o.weight_decay = 1e-2;
    o.decoupled_weight_decay = true;
    return o;
}

/* A handle of the optimizer's own: outside any scope, so no scope of the caller releases it. */
static kiln_tensor *own(kiln_tensor *t) {
    if (t)
        eng_t(t)->scope = 0;
    return t;
}

void kiln_optimizer_destroy(kiln_optimizer *opt) {
    if (!opt)
        return;
    kiln_context *ctx = opt->ctx;
    kiln_tensor **lists[3] = {opt->params, opt->m, opt->v};
    for (int l = 0; l < 3; l++) {
        if (!lists[l])
            continue;
        for (uint32_t i = 0; i < opt->count; i++)
            if (lists[l][i])
                kiln_release(lists[l][i]);
        base_free(&ctx->alloc, lists[l], (opt->count ? opt->count : 1) * sizeof *lists[l]);
    }
    kiln_release(opt->lr);
    base_free(&ctx->alloc, opt, sizeof *opt);
}

static kiln_optimizer *create(kiln_context *ctx, const char *call, int kind, uint32_t count,
                              kiln_tensor *const *params, double lr) {
    if (!ctx)
        return NULL;
    if (eng_call_begin(ctx) != KILN_OK)
        return NULL;
    if (count > 0 && !params) {
        base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT, "%s: params is NULL with count %u",
                       call, count);
        return NULL;
    }
    if (!(lr > 0) || !isfinite(lr)) {
        base_error_set(&ctx->err, KILN_ERROR_OUT_OF_RANGE,
                       "%s: the learning rate %g must be finite and > 0", call, lr);
        return NULL;
    }
    for (uint32_t i = 0; i < count; i++) {
        kiln_context *owner = ctx;
        kiln_status st;
        eng_tensor *p = eng_arg_status(params[i], &owner, call, &st);
        if (!p) {
            char why[256];
            snprintf(why, sizeof why, "%s", kiln_context_message(ctx));
            base_error_reset(&ctx->err, st, "%s (params[%u])", why, i);
            return NULL;
        }
        if (!ir_type_is_float(p->cell->node->type)) {
            base_error_set(&ctx->err, KILN_ERROR_DTYPE_MISMATCH,
                           "%s: params[%u] is %s: parameters must be floating tensors", call, i,
                           kiln_dtype_name(eng_dtype(p->cell->node->type)));
            return NULL;
        }
        if (p->st->nviews != 1 || shape_tracker_last(p->st)->masked) {
            base_error_set(&ctx->err, KILN_ERROR_NOT_VIEWABLE,
                           "%s: params[%u] is not a plain view of its storage: it cannot be "
                           "updated in place",
                           call, i);
            return NULL;
        }
    }
    kiln_optimizer *opt = base_calloc(&ctx->alloc, 1, sizeof *opt);
    if (!opt) {
        base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY, "%s: no memory", call);
        return NULL;
    }
    opt->ctx = ctx;
    opt->kind = kind;
    opt->count = count;
    bool ok = (opt->params = base_calloc(&ctx->alloc, count ? count : 1, sizeof(kiln_tensor *))) &&
              (opt->m = base_calloc(&ctx->alloc, count ? count : 1, sizeof(kiln_tensor *))) &&
              (opt->v = base_calloc(&ctx->alloc, count ? count : 1, sizeof(kiln_tensor *)));
    if (!ok) {
        base_error_set(&ctx->err, KILN_ERROR_OUT_OF_HOST_MEMORY, "%s: no memory", call);
        kiln_optimizer_destroy(opt);
        return NULL;
    }
    float rate = (float)lr;
    opt->step = kiln_variable(ctx, STEP_VAR, 1, STEP_MAX);
    opt->lr = own(kiln_from_data(ctx, KILN_F32, 0, NULL, &rate));
    for (uint32_t i = 0; i < count && ok; i++) {
        opt->params[i] = own(kiln_detach(params[i]));
        ok = opt->params[i] != NULL;
    }
    if (!ok || !opt->step || !opt->lr) {
        kiln_optimizer_destroy(opt);
        return NULL;
    }
    return opt;
}

/* The state tensors: zeros of each parameter's shape and dtype, realized now (every step then
 * reads and writes storage: the same kernels from the first step on). */
static bool make_state(kiln_optimizer *opt, kiln_tensor **list) {
    kiln_context *ctx = opt->ctx;
    for (uint32_t i = 0; i < opt->count; i++) {
        eng_tensor *p = eng_t(opt->params[i]);
        const shape_view *v = shape_tracker_last(p->st);
        int64_t shape[SHAPE_MAX_DIMS];
        if (kiln_tensor_shape(opt->params[i], shape) != KILN_OK)
            return false;
        list[i] = own(kiln_zeros(ctx, eng_dtype(p->cell->node->type), v->ndim, shape));
        if (!list[i])
            return false;
    }
    return kiln_realize_many(ctx, opt->count, list) == KILN_OK;
}

kiln_optimizer *kiln_sgd(kiln_context *ctx, uint32_t count, kiln_tensor *const *params,
                         const kiln_sgd_options *options) {
    if (!ctx)
        return NULL;
    if (!options) {
        base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                       "kiln_sgd: options is NULL (the learning rate is required)");
        return NULL;
    }
    const kiln_sgd_options *o = options;
    if (!(o->momentum >= 0) || !(o->dampening >= 0) || !(o->weight_decay >= 0) ||
        !isfinite(o->momentum) || !isfinite(o->dampening) || !isfinite(o->weight_decay)) {
        base_error_set(&ctx->err, KILN_ERROR_OUT_OF_RANGE,
                       "kiln_sgd: momentum %g, dampening %g and weight decay %g must be finite "
                       "and >= 0",
                       o->momentum, o->dampening, o->weight_decay);
        return NULL;
    }
    if (o->nesterov && (o->momentum <= 0 || o->dampening != 0)) {
        base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                       "kiln_sgd: Nesterov momentum requires a momentum and zero dampening "
                       "(momentum %g, dampening %g)",
                       o->momentum, o->dampening);
        return NULL;
    }
    kiln_optimizer *opt = create(ctx, "kiln_sgd", OPT_SGD, count, params, o->lr);
    if (!opt)
        return NULL;
    opt->sgd = *o;
    if (o->momentum > 0 && !make_state(opt, opt->m)) {
        kiln_optimizer_destroy(opt);
        return NULL;
    }
    return opt;
}

kiln_optimizer *kiln_adam(kiln_context *ctx, uint32_t count, kiln_tensor *const *params,
                          const kiln_adam_options *options) {
    if (!ctx)
        return NULL;
    kiln_adam_options o = options ? *options : kiln_adam_defaults();
    if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1) || !(o.eps >= 0) ||
        !isfinite(o.eps) || !(o.weight_decay >= 0) || !isfinite(o.weight_decay)) {
        base_error_set(&ctx->err, KILN_ERROR_OUT_OF_RANGE,
                       "kiln_adam: betas (%g, %g) must be in [0, 1), eps %g and weight decay %g "
                       "finite and >= 0",
                       o.beta1, o.beta2, o.eps, o.weight_decay);
        return NULL;
    }
    kiln_optimizer *opt = create(ctx, "kiln_adam", OPT_ADAM, count, params, o.lr);
    if (!opt)
        return NULL;
    opt->adam = o;
    if (!make_state(opt, opt->m) || !make_state(opt, opt->v)) {
        kiln_optimizer_destroy(opt);
        return NULL;
    }
    return opt;
}

static kiln_tensor *num(kiln_context *ctx, double v) {
    return kiln_scalar(ctx, KILN_F32, v);
}

/* One parameter's SGD update (torch.optim.SGD); step: this step's number (1 first), a 0-d
 * f32 tensor. */
static bool sgd_one(kiln_optimizer *opt, uint32_t i, kiln_tensor *grad, kiln_tensor *step) {
    kiln_context *ctx = opt->ctx;
    const kiln_sgd_options *o = &opt->sgd;
    kiln_tensor *p = opt->params[i], *d = grad;
    if (o->weight_decay != 0)
        d = kiln_add(d, kiln_mul_scalar(p, o->weight_decay));
    if (o->momentum > 0) {
        /* The first step's buffer is the gradient itself; later ones decay it. */
        kiln_tensor *buf = opt->m[i];
        kiln_tensor *later =
            kiln_add(kiln_mul_scalar(buf, o->momentum), kiln_mul_scalar(d, 1.0 - o->dampening));
        kiln_tensor *next = kiln_where(kiln_eq(step, num(ctx, 1)), d, later);
        if (!next || kiln_copy_(buf, next) != KILN_OK)
            return false;
        /* The buffer as written (see adam_one). */
        d = o->nesterov ? kiln_add(d, kiln_mul_scalar(buf, o->momentum)) : buf;
    }
    kiln_tensor *delta = kiln_neg(kiln_mul(opt->lr, d));
    return delta && kiln_add_(p, delta) == KILN_OK;
}

/* One parameter's Adam or AdamW update (torch.optim.Adam, AdamW; no amsgrad); step as for
 * sgd_one. */
static bool adam_one(kiln_optimizer *opt, uint32_t i, kiln_tensor *grad, kiln_tensor *step) {
    kiln_context *ctx = opt->ctx;
    const kiln_adam_options *o = &opt->adam;
    kiln_tensor *p = opt->params[i], *g = grad;
    if (o->weight_decay != 0) {
        if (o->decoupled_weight_decay) {
            /* p *= 1 - lr wd */
            kiln_tensor *keep = kiln_sub(num(ctx, 1), kiln_mul_scalar(opt->lr, o->weight_decay));
            if (!keep || kiln_mul_(p, keep) != KILN_OK)
                return false;
        } else {
            g = kiln_add(g, kiln_mul_scalar(p, o->weight_decay));
        }
    }
    kiln_tensor *m =
        kiln_add(kiln_mul_scalar(opt->m[i], o->beta1), kiln_mul_scalar(g, 1.0 - o->beta1));
    kiln_tensor *v = kiln_add(kiln_mul_scalar(opt->v[i], o->beta2),
                              kiln_mul_scalar(kiln_mul(g, g), 1.0 - o->beta2));
    if (!m || !v || kiln_copy_(opt->m[i], m) != KILN_OK || kiln_copy_(opt->v[i], v) != KILN_OK)
        return false;
    /* The update reads the moments as written: realizing the parameter runs the moments'
     * writes first (their kernels every step, the same from the first step on), rather than
     * recomputing them inside the update and leaving the writes for a later realize. */
    m = opt->m[i];
    v = opt->v[i];
    kiln_tensor *bc1 = kiln_sub(num(ctx, 1), kiln_pow(num(ctx, o->beta1), step));
    kiln_tensor *bc2 = kiln_sub(num(ctx, 1), kiln_pow(num(ctx, o->beta2), step));
    kiln_tensor *denom = kiln_add_scalar(kiln_div(kiln_sqrt(v), kiln_sqrt(bc2)), o->eps);
    kiln_tensor *delta = kiln_neg(kiln_div(kiln_mul(kiln_div(opt->lr, bc1), m), denom));
    return delta && kiln_add_(p, delta) == KILN_OK;
}

kiln_status kiln_optimizer_step(kiln_optimizer *opt, kiln_tensor *const *grads) {
    if (!opt)
        return KILN_ERROR_INVALID_ARGUMENT;
    kiln_context *ctx = opt->ctx;
    kiln_status st = eng_call_begin(ctx);
    if (st != KILN_OK)
        return st;
    if (opt->count > 0 && !grads)
        return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_optimizer_step: grads is NULL");
    /* Every gradient is checked before anything is written. */
    for (uint32_t i = 0; i < opt->count; i++) {
        kiln_context *owner = ctx;
        if (!eng_arg_status(grads[i], &owner, "kiln_optimizer_step", &st)) {
            char why[256];
            snprintf(why, sizeof why, "%s", kiln_context_message(ctx));
            return base_error_reset(&ctx->err, st, "%s (grads[%u])", why, i);
        }
        uint32_t gn = kiln_tensor_ndim(grads[i]), pn = kiln_tensor_ndim(opt->params[i]);
        const shape_view *gv = shape_tracker_last(ENG_ST(grads[i]));
        const shape_view *pv = shape_tracker_last(ENG_ST(opt->params[i]));
        bool same = gn == pn;
        for (uint32_t d = 0; d < gn && same; d++)
            same = gv->shape[d] == pv->shape[d];
        if (!same) {
            char a[128], b[128];
            return base_error_set(&ctx->err, KILN_ERROR_SHAPE_MISMATCH,
                                  "kiln_optimizer_step: grads[%u] has shape %s, its parameter %s",
                                  i, eng_shape_render(gn, gv->shape, a, sizeof a),
                                  eng_shape_render(pn, pv->shape, b, sizeof b));
        }
    }
    if (opt->steps == STEP_MAX)
        return base_error_set(&ctx->err, KILN_ERROR_OUT_OF_RANGE,
                              "kiln_optimizer_step: the optimizer has taken %d steps, its most",
                              STEP_MAX);
    eng_log_enter(ctx);
    size_t mark = eng_temps_begin(ctx);
    ctx->ag_block++;
    /* The count goes up whatever follows, as the updates built so far are this step's. */
    opt->steps++;
    kiln_tensor *step = kiln_scalar_expr(ctx, KILN_F32, kiln_bind(ctx, opt->step, opt->steps));
    bool ok = step != NULL;
    for (uint32_t i = 0; i < opt->count && ok; i++)
        ok = opt->kind == OPT_SGD ? sgd_one(opt, i, grads[i], step)
                                  : adam_one(opt, i, grads[i], step);
    ctx->ag_block--;
    if (!ok) {
        st = ctx->err.status ? ctx->err.status : KILN_ERROR_OUT_OF_HOST_MEMORY;
        ctx->sticky = false;
    }
    eng_temps_end(ctx, mark, NULL);
    eng_log_leave(ctx);
    return ok ? KILN_OK : st;
}

kiln_status kiln_optimizer_set_lr(kiln_optimizer *opt, double lr) {
    if (!opt)
        return KILN_ERROR_INVALID_ARGUMENT;
    if (!(lr > 0) || !isfinite(lr))
        return base_error_set(&opt->ctx->err, KILN_ERROR_OUT_OF_RANGE,
                              "kiln_optimizer_set_lr: the learning rate %g must be finite and "
                              "> 0",
                              lr);
    return kiln_fill_(opt->lr, lr);
}
