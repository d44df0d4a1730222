/* Lowering: a kernel AST -> kernel IR (ir.h).
 *
 *     gid = GLOBAL_ID
 *     IF gid < numel
 *       [acc_i = VAR(identity_i); RANGE reduce_count -> r: acc_i = acc_i op_i value_i(gid, r);
 *        ENDRANGE]  (several reductions may share the range)
 *       STORE out[gid] = value(gid, acc)
 *     ENDIF
 *
 * Index expressions (symbolic) become integer arithmetic of the index type (i32 when every
 * bound fits, else i64); floor division and modulo whose operands are provably non-negative use
 * the unsigned (cheap) forms. Values are memoized per body. */
#include "eng.h"

#include <math.h>
#include <string.h>

typedef struct lowering {
    kiln_context *ctx;
    const eng_kernel *k;
    ir_kernel *ir;
    base_map memo; /* (pointer of a sym node or kast) -> IR value, per body */
    ir_value gid, ridx;
    ir_value lane;                        /* group kernels: the lane (IR_NONE otherwise) */
    ir_value results[ENG_MAX_REDUCTIONS]; /* each reduction's value after the range */
} lowering;

typedef struct memo_entry {
    const void *key;
    ir_value value;
} memo_entry;

static bool memo_eq(const void *stored, const void *key, void *user) {
    (void)user;
    return ((const memo_entry *)stored)->key == key;
}

static uint64_t ptr_hash(const void *p) {
    return base_hash_u64(0, (uint64_t)(uintptr_t)p);
}

static ir_value memo_get(lowering *l, const void *key) {
    memo_entry *e = base_map_find(&l->memo, ptr_hash(key), key, memo_eq, NULL);
    return e ? e->value : IR_NONE;
}

static ir_value memo_put(lowering *l, const void *key, ir_value v) {
    if (v == IR_NONE)
        return v;
    memo_entry *e = base_arena_alloc(&l->ctx->arena, sizeof *e, _Alignof(memo_entry));
    if (!e || base_map_insert(&l->memo, ptr_hash(key), e) != KILN_OK) {
        l->ir->status = KILN_ERROR_OUT_OF_HOST_MEMORY;
        return IR_NONE;
    }
    e->key = key;
    e->value = v;
    return v;
}

/* ---- index expressions ---------------------------------------------------------------------- */

static ir_value lower_sym(lowering *l, const sym_node *s);

static ir_value sym_var_value(lowering *l, const sym_node *s) {
    const eng_kernel *k = l->k;
    if (s == k->gidx)
        return l->gid;
    if (s == k->ridx && l->ridx != IR_NONE)
        return l->ridx;
    for (uint32_t p = 0; p < k->param_count; p++) {
        if (k->params[p] == s)
            return ir_param(l->ir, p);
    }
    if (l->ir->status == KILN_OK)            /* else: ridx is IR_NONE after an earlier failure */
        l->ir->status = KILN_ERROR_INTERNAL; /* a Variable the kernel does not know */
    return IR_NONE;
}

/* Floor division or modulo; non-negative operands take the unsigned path when i32. */
static ir_value lower_divmod(lowering *l, ir_op op, const sym_node *s) {
    ir_kernel *ir = l->ir;
    const sym_node *x = sym_node_src(s, 0), *y = sym_node_src(s, 1);
    ir_value a = lower_sym(l, x), b = lower_sym(l, y);
    if (ir->index_type == IR_I32 && sym_vmin(x) >= 0 && sym_vmin(y) > 0) {
        ir_value ua = ir_cast(ir, IR_U32, a), ub = ir_cast(ir, IR_U32, b);
        return ir_cast(ir, IR_I32, ir_alu(ir, op, IR_U32, ua, ub, IR_NONE));
    }
    return ir_alu(ir, op, ir->index_type, a, b, IR_NONE);
}

static ir_value lower_sym_uncached(lowering *l, const sym_node *s) {
    ir_kernel *ir = l->ir;
    ir_type t = ir->index_type;
    int64_t c;
    if (sym_is_const(s, &c))
        return sym_is_bool(s) ? ir_const_i(ir, IR_BOOL, c != 0) : ir_const_i(ir, t, c);
    static const ir_op ops[SYM_KIND_COUNT_] = {
        [SYM_ADD] = IR_ADD, [SYM_MUL] = IR_MUL, [SYM_MIN] = IR_MIN,
        [SYM_MAX] = IR_MAX, [SYM_LT] = IR_LT,   [SYM_EQ] = IR_EQ,
        [SYM_NE] = IR_NE,   [SYM_AND] = IR_AND, [SYM_OR] = IR_OR,
    };
    sym_kind kind = sym_node_kind(s);
    switch (kind) {
    case SYM_VAR:
        return sym_var_value(l, s);
    case SYM_DIV:
        return lower_divmod(l, IR_DIV, s);
    case SYM_MOD:
        return lower_divmod(l, IR_MOD, s);
    case SYM_NOT:
        return ir_alu(ir, IR_NOT, IR_BOOL, lower_sym(l, sym_node_src(s, 0)), IR_NONE, IR_NONE);
    case SYM_WHERE: {
        ir_value cond = lower_sym(l, sym_node_src(s, 0));
        ir_value a = lower_sym(l, sym_node_src(s, 1)), b = lower_sym(l, sym_node_src(s, 2));
        return ir_alu(ir, IR_WHERE, sym_is_bool(s) ? IR_BOOL : t, cond, a, b);
    }
    case SYM_ADD:
    case SYM_MUL:
    case SYM_MIN:
    case SYM_MAX:
    case SYM_LT:
    case SYM_EQ:
    case SYM_NE:
    case SYM_AND:
    case SYM_OR: {
        ir_value a = lower_sym(l, sym_node_src(s, 0)), b = lower_sym(l, sym_node_src(s, 1));
        bool boolean = kind >= SYM_LT;
        return ir_alu(ir, ops[kind], boolean ? IR_BOOL : t, a, b, IR_NONE);
    }
    default: /* bound nodes were unbound before lowering */
        if (ir->status == KILN_OK)
            ir->status = KILN_ERROR_INTERNAL;
        return IR_NONE;
    }
}

static ir_value lower_sym(lowering *l, const sym_node *s) {
    ir_value v = memo_get(l, s);
    return v != IR_NONE ? v : memo_put(l, s, lower_sym_uncached(l, s));
}

/* ---- values ---------------------------------------------------------------------------------- */

static ir_value zero(ir_kernel *ir, ir_type t) {
    return ir_const_i(ir, t, 0);
}

/* uniform [0, 1) from (seed, index): a counter-based integer hash (lowbias32 rounds) of the
 * index mixed with the seed, top 24 bits as the mantissa. Identical on device and host. */
static ir_value lower_rand(lowering *l, const kast *a) {
    ir_kernel *ir = l->ir;
    ir_value idx = ir_cast(ir, IR_U32, lower_sym(l, a->index));
    uint32_t s0 = (uint32_t)a->seed, s1 = (uint32_t)(a->seed >> 32);
    ir_value x = ir_alu(ir, IR_XOR, IR_U32, idx, ir_const_i(ir, IR_U32, s0), IR_NONE);
    for (int round = 0; round < 2; round++) {
        static const uint32_t mul[2] = {0x7feb352du, 0x846ca68bu};
        x = ir_alu(ir, IR_ADD, IR_U32, x, ir_const_i(ir, IR_U32, round ? s1 : 0x9e3779b9u),
                   IR_NONE);
        for (int k = 0; k < 2; k++) {
            ir_value sh = ir_alu(ir, IR_DIV, IR_U32, x,
                                 ir_const_i(ir, IR_U32, k ? 1 << 15 : 1 << 16), IR_NONE);
            x = ir_alu(ir, IR_XOR, IR_U32, x, sh, IR_NONE);
            x = ir_alu(ir, IR_MUL, IR_U32, x, ir_const_i(ir, IR_U32, mul[k]), IR_NONE);
        }
        ir_value sh = ir_alu(ir, IR_DIV, IR_U32, x, ir_const_i(ir, IR_U32, 1 << 16), IR_NONE);
        x = ir_alu(ir, IR_XOR, IR_U32, x, sh, IR_NONE);
    }
    ir_value top = ir_alu(ir, IR_DIV, IR_U32, x, ir_const_i(ir, IR_U32, 256), IR_NONE);
    ir_value f = ir_cast(ir, IR_F32, top);
    ir_value u = ir_alu(ir, IR_MUL, IR_F32, f, ir_const_f(ir, IR_F32, 1.0 / 16777216.0), IR_NONE);
    return a->type == IR_F32 ? u : ir_cast(ir, a->type, u);
}

static ir_value lower_value(lowering *l, const kast *a);

static ir_value lower_load(lowering *l, const kast *a) {
    ir_kernel *ir = l->ir;
    ir_value index = lower_sym(l, a->index);
    if (a->valid && !(sym_is_const(a->valid, NULL) && sym_vmin(a->valid) == 1)) {
        /* Masked: never touch memory outside the view; read 0 there. */
        ir_value ok = lower_sym(l, a->valid);
        if (!sym_is_bool(a->valid)) /* a mask simplified to the constant 0 (never valid) */
            ok = ir_cast(ir, IR_BOOL, ok);
        ir_value safe = ir_alu(ir, IR_WHERE, ir->index_type, ok, index, zero(ir, ir->index_type));
        ir_value v = ir_load(ir, a->buffer, safe);
        return ir_alu(ir, IR_WHERE, a->type, ok, v, zero(ir, a->type));
    }
    return ir_load(ir, a->buffer, index);
}

static ir_value lower_value_uncached(lowering *l, const kast *a) {
    ir_kernel *ir = l->ir;
    switch (a->kind) {
    case KAST_LOAD:
        return lower_load(l, a);
    case KAST_CONST:
        return ir_type_is_float(a->type) ? ir_const_f(ir, a->type, a->value)
                                         : ir_const_i(ir, a->type, (int64_t)a->value);
    case KAST_INDEX: {
        ir_value v = lower_sym(l, a->index);
        if (a->type == IR_BOOL)
            return sym_is_bool(a->index) ? v : ir_cast(ir, IR_BOOL, v);
        return ir_cast(ir, a->type, v);
    }
    case KAST_RAND:
        return lower_rand(l, a);
    case KAST_REDUCE:
        return l->results[a->reduction];
    case KAST_ALU: {
        ir_value s[3] = {IR_NONE, IR_NONE, IR_NONE};
        for (uint32_t i = 0; i < a->nsrc; i++)
            s[i] = lower_value(l, a->src[i]);
        if (a->op == IR_CAST)
            return ir_cast(ir, a->type, s[0]);
        return ir_alu(ir, a->op, a->type, s[0], s[1], s[2]);
    }
    }
    return IR_NONE;
}

static ir_value lower_value(lowering *l, const kast *a) {
    ir_value v = memo_get(l, a);
    return v != IR_NONE ? v : memo_put(l, a, lower_value_uncached(l, a));
}

/* The identity of a reduction's combiner in type t. */
static ir_value reduce_identity(ir_kernel *ir, ir_op op, ir_type t) {
    switch (op) {
    case IR_ADD:
        return zero(ir, t);
    case IR_MUL:
        return ir_const_i(ir, t, 1);
    case IR_MAX:
        if (ir_type_is_float(t))
            return ir_const_f(ir, t, -INFINITY);
        return ir_const_i(ir, t, t == IR_I32 ? INT32_MIN : t == IR_I8 ? INT8_MIN : 0);
    default: /* MIN */
        if (ir_type_is_float(t))
            return ir_const_f(ir, t, INFINITY);
        return ir_const_i(ir, t,
                          t == IR_I32   ? INT32_MAX
                          : t == IR_I8  ? INT8_MAX
                          : t == IR_U8  ? UINT8_MAX
                          : t == IR_U32 ? (int64_t)UINT32_MAX
                                        : 1);
    }
}

/* One combining step of reduction r with value v; arg reductions also keep the index of the
 * first maximum (NaN counts as the maximum, as torch.argmax). */
static void combine(lowering *l, const eng_reduction *r, ir_value acc, ir_value at, ir_value v) {
    ir_kernel *ir = l->ir;
    ir_value best = ir_get(ir, acc);
    if (!r->arg) {
        ir_set(ir, acc, ir_alu(ir, r->op, r->type, best, v, IR_NONE));
        return;
    }
    ir_value greater = ir_alu(ir, IR_LT, IR_BOOL, best, v, IR_NONE);
    ir_value v_nan = ir_alu(ir, IR_NE, IR_BOOL, v, v, IR_NONE);
    ir_value best_num = ir_alu(ir, IR_EQ, IR_BOOL, best, best, IR_NONE);
    ir_value nan_wins = ir_alu(ir, IR_AND, IR_BOOL, v_nan, best_num, IR_NONE);
    ir_value take = ir_alu(ir, IR_OR, IR_BOOL, greater, nan_wins, IR_NONE);
    ir_set(ir, acc, ir_alu(ir, IR_WHERE, r->type, take, v, best));
    ir_value index = ir_cast(ir, IR_I32, l->ridx);
    ir_set(ir, at, ir_alu(ir, IR_WHERE, IR_I32, take, index, ir_get(ir, at)));
}

/* How many elements one step of a reduction loop combines, each into an accumulator of its
 * own: a quarter of the loop's overhead, and four independent dependency chains. */
enum { REDUCE_UNROLL = 4 };

/* acc[u] = identity; RANGE ceil(reduce_count / (U * S)) as q: for u < U, element
 * (q * U + u) * S + lane (when it is below reduce_count) is combined into acc[u]; the results
 * are (acc0 op acc1) op (acc2 op acc3) after the range, in a group kernel then combined over
 * its S lanes (S = 1, lane = 0 otherwise). Arg reductions keep one accumulator (the first
 * maximum wins) and are never grouped. */
static void lower_reductions(lowering *l) {
    const eng_kernel *k = l->k;
    ir_kernel *ir = l->ir;
    ir_value acc[REDUCE_UNROLL][ENG_MAX_REDUCTIONS], at[ENG_MAX_REDUCTIONS];
    uint32_t unroll = REDUCE_UNROLL;
    int64_t constant = -1;
    if (sym_is_const(k->reduce_count, &constant) && constant < 2 * REDUCE_UNROLL)
        unroll = 1;
    for (uint32_t i = 0; i < k->reduction_count; i++)
        unroll = k->reductions[i].arg ? 1 : unroll;
    int64_t stride = l->ir->group_lanes ? l->ir->group_lanes : 1;
    /* no element needs a bounds check */
    bool exact = constant >= 0 && constant % ((int64_t)unroll * stride) == 0;
    for (uint32_t i = 0; i < k->reduction_count; i++) {
        const eng_reduction *r = &k->reductions[i];
        for (uint32_t u = 0; u < unroll; u++)
            acc[u][i] = ir_var(ir, reduce_identity(ir, r->op, r->type));
        at[i] = r->arg ? ir_var(ir, ir_const_i(ir, IR_I32, 0)) : IR_NONE;
    }
    ir_type it = ir->index_type;
    ir_value count = lower_sym(l, k->reduce_count), steps = count;
    int64_t per_step = (int64_t)unroll * stride;
    if (per_step > 1) {
        ir_value up = ir_alu(ir, IR_ADD, it, count, ir_const_i(ir, it, per_step - 1), IR_NONE);
        steps = ir_alu(ir, IR_DIV, it, up, ir_const_i(ir, it, per_step), IR_NONE);
    }
    ir_value q = ir_range(ir, steps);
    /* Values inside a body are not visible after it: each element's body has its own memo. */
    base_map outer = l->memo;
    for (uint32_t u = 0; u < unroll; u++) {
        base_map_init(&l->memo, &l->ctx->alloc);
        l->ridx = q;
        if (unroll > 1) {
            ir_value base = ir_alu(ir, IR_MUL, it, q, ir_const_i(ir, it, unroll), IR_NONE);
            l->ridx = ir_alu(ir, IR_ADD, it, base, ir_const_i(ir, it, u), IR_NONE);
        }
        if (stride > 1) {
            ir_value base = ir_alu(ir, IR_MUL, it, l->ridx, ir_const_i(ir, it, stride), IR_NONE);
            l->ridx = ir_alu(ir, IR_ADD, it, base, l->lane, IR_NONE);
        }
        bool checked = (u > 0 || stride > 1) && !exact;
        if (checked)
            ir_if(ir, ir_alu(ir, IR_LT, IR_BOOL, l->ridx, count, IR_NONE));
        for (uint32_t i = 0; i < k->reduction_count; i++)
            combine(l, &k->reductions[i], acc[u][i], at[i], lower_value(l, k->reductions[i].value));
        if (checked)
            ir_endif(ir);
        base_map_finish(&l->memo);
    }
    l->memo = outer;
    ir_endrange(ir);
    l->ridx = IR_NONE;
    for (uint32_t i = 0; i < k->reduction_count; i++) {
        const eng_reduction *r = &k->reductions[i];
        if (r->arg) {
            l->results[i] = ir_get(ir, at[i]);
            continue;
        }
        ir_value part[REDUCE_UNROLL];
        for (uint32_t u = 0; u < unroll; u++)
            part[u] = ir_get(ir, acc[u][i]);
        for (uint32_t width = unroll; width > 1; width /= 2) {
            for (uint32_t u = 0; u < width / 2; u++)
                part[u] = ir_alu(ir, r->op, r->type, part[2 * u], part[2 * u + 1], IR_NONE);
        }
        l->results[i] = stride > 1 ? ir_group(ir, r->op, part[0]) : part[0];
    }
}

/* Whether every index expression's bounds fit in int32. */
static bool fits_i32(const sym_node *s) {
    if (!s)
        return true;
    if (sym_vmin(s) < INT32_MIN || sym_vmax(s) > INT32_MAX)
        return false;
    for (uint32_t i = 0; i < sym_node_arity(s); i++) {
        if (!fits_i32(sym_node_src(s, i)))
            return false;
    }
    return true;
}

static bool tree_fits_i32(const kast *a) {
    if (!a)
        return true;
    if (!fits_i32(a->index) || !fits_i32(a->valid))
        return false;
    for (uint32_t i = 0; i < a->nsrc; i++) {
        if (!tree_fits_i32(a->src[i]))
            return false;
    }
    return true;
}

/* Reductions with few outputs and many elements each run one workgroup of lanes per output
 * (an item), the lanes combined through workgroup memory at the end: lanes * items at most
 * twice the device's parallelism, at least four elements per lane at the largest size. f32,
 * i32 and u32 accumulators only (workgroup memory of other widths needs more features). */
uint32_t eng_kernel_group_lanes(const kiln_context *ctx, const eng_kernel *k) {
    uint32_t lanes = ctx->group_lanes;
    if (k->reduction_count == 0 || lanes < 2)
        return 0;
    for (uint32_t i = 0; i < k->reduction_count; i++) {
        const eng_reduction *r = &k->reductions[i];
        if (r->arg || (r->type != IR_F32 && r->type != IR_I32 && r->type != IR_U32))
            return 0;
    }
    int64_t items = sym_vmax(k->numel), count = sym_vmax(k->reduce_count);
    if (items > 2 * (int64_t)ctx->parallelism / lanes || count < 4 * (int64_t)lanes)
        return 0;
    return lanes;
}

kiln_status eng_kernel_lower(kiln_context *ctx, const eng_kernel *k, bool unchecked,
                             uint32_t group_lanes, ir_kernel *ir) {
    bool narrow = fits_i32(k->numel) && fits_i32(k->reduce_count) && fits_i32(k->out_index) &&
                  tree_fits_i32(k->value);
    for (uint32_t i = 0; i < k->reduction_count; i++)
        narrow = narrow && tree_fits_i32(k->reductions[i].value);
    /* the loop rounds the count up to whole steps of REDUCE_UNROLL * lanes elements */
    narrow = narrow && (!k->reduce_count ||
                        sym_vmax(k->reduce_count) <=
                            INT32_MAX - (int64_t)REDUCE_UNROLL * (group_lanes ? group_lanes : 1));
    ir_kernel_init(ir, &ctx->alloc, narrow ? IR_I32 : IR_I64);
    for (uint32_t i = 0; i < k->buffer_count; i++)
        ir_buffer_add(ir, k->buffer_types[i]);
    for (uint32_t p = 0; p < k->param_count; p++)
        ir_param(ir, p); /* declares every parameter, in order */
    ir->group_lanes = group_lanes;
    lowering l = {.ctx = ctx, .k = k, .ir = ir, .ridx = IR_NONE, .lane = IR_NONE};
    base_map_init(&l.memo, &ctx->alloc);
    l.gid = ir_global_id(ir);
    if (group_lanes)
        l.lane = ir_lane(ir);
    if (!unchecked) { /* in a group kernel, alike for the item's lanes */
        ir_value in_range = ir_alu(ir, IR_LT, IR_BOOL, l.gid, lower_sym(&l, k->numel), IR_NONE);
        ir_if(ir, in_range);
    }
    if (k->reduction_count > 0)
        lower_reductions(&l);
    ir_value v = lower_value(&l, k->value);
    if (v != IR_NONE && ir->insts.data[v].type != k->out_type)
        v = ir_cast(ir, k->out_type, v);
    if (group_lanes) /* lane 0 stores the item's result */
        ir_if(ir, ir_alu(ir, IR_EQ, IR_BOOL, l.lane, zero(ir, ir->index_type), IR_NONE));
    ir_store(ir, 0, k->out_index ? lower_sym(&l, k->out_index) : l.gid, v);
    if (group_lanes)
        ir_endif(ir);
    if (!unchecked)
        ir_endif(ir);
    base_map_finish(&l.memo);
    if (ir->status != KILN_OK)
        return base_error_set(&ctx->err, ir->status, "lowering a kernel to IR failed: %s",
                              kiln_status_string(ir->status));
    return KILN_OK;
}
