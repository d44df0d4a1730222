/* Lowering: a kernel AST -> kernel IR (ir.h).
 *
 *     gid = GLOBAL_ID
 *     IF gid < numel
 *       [acc_i = VAR(identity_i); RANGE reduce_count -> r: acc_i = acc_i op_i value_i(gid, r);
 *        ENDRANGE]  (several reductions may share the range)
 *       STORE out[gid] = value(gid, acc)
 *     ENDIF
 *
 * A tiled kernel computes tile_m x tile_n outputs per invocation (the item): the outputs' gidx
 * are expressions of two tile Variables (the item's tile row and column), substituted into
 * every index expression, so that a load whose index is the same for several outputs (a row of
 * a matmul's left operand, a broadcast value) is made once and shared: register tiling.
 * Four loads (or stores) of consecutive elements whose lowest index is provably a multiple of
 * 4, by four outputs of a tile row or by a reduction's four unrolled steps, become one vector
 * access (LOAD4 + EXTRACT, STORE4); on a device that takes octets (ctx->octets: CPU drivers,
 * where a vector access costs per component, emit.c), eight aligned to 8 become one LOAD8 or
 * STORE8, and a reduction with one output per item unrolls eight steps. Whether a tiled
 * kernel was compiled, and whether it holds vectors, is deterministic from the AST, the tile
 * and the device's figures (part of the cache key). A view offset that reaches the kernel as
 * a parameter (kernel.c) proves its alignment only as the variant has it: V read as
 * align * W + residue (eng_program align; runtime.c chooses and pushes W).
 *
 * Row mode (kernel.c fused reductions read along rows): the item is a row; its reductions run
 * once, stage after stage, each over its own RANGE, then a RANGE over the row's tiles stores
 * the outputs (the tile column Variable is that loop's counter).
 *
 * All the loops of an invocation together stay below lavapipe's 65535 passes (the loop
 * budget, below): a reduction's steps and the row loop's passes take more work each where a
 * kernel's loops would reach it.
 *
 * Index expressions (symbolic) become integer arithmetic of the index type (i32 when every
 * bound fits, else i64); floor division and modulo whose operands are provably non-negative use
 * the unsigned (cheap) forms. Values are memoized per body. */
#include "eng.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { MAX_TILE = ENG_MAX_TILE, WINDOW_TILE = ENG_MAX_WINDOW_TILE };
/* A window tile's step, at most: a kernel row of taps (3, 5) or an image row of pixels (a
 * weight gradient's reduction over the windows: 14 for conv2 of the training example, 28 for
 * conv1; eng_kernel_tile) */
enum { WINDOW_UNROLL = 32 };

typedef struct lowering {
    kiln_context *ctx;
    const eng_kernel *k;
    ir_kernel *ir;
    base_map memo; /* (sym node | kast and output | load) -> IR value, per body */
    ir_value gid, ridx;
    ir_value lane; /* group and team kernels: the lane (IR_NONE otherwise) */
    /* Team kernels: the lane as a Variable, and the gidx of the output at column 0 of the
     * item's tile row `lane` (what lane_var's team-mate loads for its row). */
    const sym_node *lane_var, *lane_gidx;
    /* Tiling: the output being lowered, each output's gidx (NULL: untiled, gidx is the
     * invocation), and the tile Variables with their values. */
    uint32_t out, outputs, tile_n;
    const sym_node *out_gidx[WINDOW_TILE];
    const sym_node *tile_var[2];
    ir_value tile_value[2];
    ir_value results[WINDOW_TILE][ENG_MAX_REDUCTIONS]; /* each reduction's value after the range */
    /* Vector loads along a reduction (step_var set): in an unrolled range without bounds checks
     * (of a group of one lane), ridx at unroll step u is step_var * step_width + u (step_var:
     * the range's counter, step_value); consecutive aligned elements over u are loaded at the
     * first step they hold (four, or eight with octets) and kept in step_memo for the steps
     * after (a matmul's left operand along k; a row sum's row). */
    const sym_node *step_var;
    ir_value step_value;
    uint32_t step_u, step_width;
    base_map step_memo;
    /* Aligned offsets (eng_program align): each expression's lifted offset V replaced by
     * align * W + residue, W a Variable over the values that allow (pushed V's W), so that
     * a vector access can prove its alignment; used[p]: the widest such access relying on
     * parameter p's. */
    uint32_t aligned_count;
    const sym_node *aligned_from[ENG_MAX_PARAMS], *aligned_to[ENG_MAX_PARAMS];
    const sym_node *aligned_var[ENG_MAX_PARAMS]; /* W by parameter (NULL: not aligned) */
    uint8_t used[ENG_MAX_PARAMS];
    const struct loop_plan *plan; /* the loops' shapes (the loop budget, below) */
    uint32_t window_taps;         /* eng_program window_taps */
    bool vector_out; /* the outputs are stored as vectors: the output buffer is read so too */
    uint32_t read0;  /* the read-only binding of the output's storage its loads use (0: none) */
} lowering;

/* Memo keys: a sym node (slot 0); a kast for one output (slot 1 + output); a load of buffer b
 * at an index and validity (slot LOAD_SLOT + b), shared by every output that makes it. */
enum { LOAD_SLOT = 1u << 16, ROW_SLOT = LOAD_SLOT - 1 };
/* Rows of pairs (lower_step_pair): steps of at least ROW_PAIRS pairs; a pair at most ROW_SPAN
 * elements from its row's value. */
enum { ROW_PAIRS = 3, ROW_SPAN = 1 << 24 };

typedef struct memo_key {
    const void *a, *b;
    uint32_t slot;
} memo_key;

typedef struct memo_entry {
    memo_key key;
    ir_value value;
} memo_entry;

static bool memo_eq(const void *stored, const void *key, void *user) {
    (void)user;
    const memo_key *x = &((const memo_entry *)stored)->key, *y = key;
    return x->a == y->a && x->b == y->b && x->slot == y->slot;
}

static uint64_t key_hash(const memo_key *k) {
    uint64_t h = base_hash_u64(0, (uint64_t)(uintptr_t)k->a);
    return base_hash_u64(base_hash_u64(h, (uint64_t)(uintptr_t)k->b), k->slot);
}

static ir_value memo_get_in(base_map *m, memo_key key) {
    memo_entry *e = base_map_find(m, key_hash(&key), &key, memo_eq, NULL);
    return e ? e->value : IR_NONE;
}

static ir_value memo_get(lowering *l, memo_key key) {
    return memo_get_in(&l->memo, key);
}

static ir_value memo_put_in(lowering *l, base_map *m, memo_key key, ir_value v) {
    if (v == IR_NONE)
        return v;
    memo_entry *e = base_arena_alloc(&l->ctx->arena, sizeof *e, _Alignof(memo_entry));
    if (!e || base_map_insert(m, key_hash(&key), e) != KILN_OK) {
        l->ir->status = KILN_ERROR_OUT_OF_HOST_MEMORY;
        return IR_NONE;
    }
    e->key = key;
    e->value = v;
    return v;
}

static ir_value memo_put(lowering *l, memo_key key, ir_value v) {
    return memo_put_in(l, &l->memo, key, v);
}

/* ---- index expressions ---------------------------------------------------------------------- */

static ir_value lower_sym(lowering *l, const sym_node *s);

static ir_value sym_var_value(lowering *l, const sym_node *s) {
    const eng_kernel *k = l->k;
    if (s == k->gidx)
        return l->gid;
    if (s == k->ridx && l->ridx != IR_NONE)
        return l->ridx;
    for (int t = 0; t < 2; t++) {
        if (l->tile_var[t] && s == l->tile_var[t])
            return l->tile_value[t];
    }
    if (l->step_var && s == l->step_var)
        return l->step_value;
    if (l->lane_var && s == l->lane_var)
        return l->lane;
    for (uint32_t p = 0; p < k->param_count; p++) {
        if (l->aligned_var[p] == s)
            return ir_param(l->ir, p);
        if (k->params[p] != s)
            continue;
        for (uint32_t i = 0; i < l->aligned_count; i++) { /* (every use is replaced: safety) */
            if (l->aligned_from[i] == s)
                return lower_sym(l, l->aligned_to[i]);
        }
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
    memo_key key = {s, NULL, 0};
    ir_value v = memo_get(l, key);
    return v != IR_NONE ? v : memo_put(l, key, lower_sym_uncached(l, s));
}

/* An expression of the kernel as the code reads it: gidx replaced by gidx_to (unless NULL),
 * and the aligned offsets by their aligned forms. */
static const sym_node *read_as(lowering *l, const sym_node *s, const sym_node *gidx_to) {
    const sym_node *from[1 + ENG_MAX_PARAMS], *to[1 + ENG_MAX_PARAMS];
    uint32_t n = 0;
    if (gidx_to) {
        from[n] = l->k->gidx;
        to[n++] = gidx_to;
    }
    for (uint32_t i = 0; i < l->aligned_count; i++, n++) {
        from[n] = l->aligned_from[i];
        to[n] = l->aligned_to[i];
    }
    return s && n > 0 ? sym_substitute(l->ctx->sym, s, from, to, n) : s;
}

/* read_as, a failure recorded in the IR's status. */
static const sym_node *as_read(lowering *l, const sym_node *s, const sym_node *gidx_to) {
    const sym_node *t = read_as(l, s, gidx_to);
    if (s && !t && l->ir->status == KILN_OK)
        l->ir->status = sym_ctx_status(l->ctx->sym) != KILN_OK ? sym_ctx_status(l->ctx->sym)
                                                               : KILN_ERROR_INTERNAL;
    return t;
}

/* An index expression of the kernel (over gidx) as it reads for the output being lowered:
 * in a tiled kernel, gidx replaced by that output's expression of the tile Variables. */
static const sym_node *for_output_at(lowering *l, const sym_node *s, uint32_t out) {
    return as_read(l, s, l->out_gidx[0] ? l->out_gidx[out] : NULL);
}

/* Whether s mentions the Variable v. */
static bool mentions(const sym_node *s, const sym_node *v) {
    if (s == v)
        return true;
    for (uint32_t i = 0; i < sym_node_arity(s); i++) {
        if (mentions(sym_node_src(s, i), v))
            return true;
    }
    return false;
}

/* A vector access of width w to the elements at index (the kernel's expression): the
 * alignment of the offsets it adds is relied on. (Its aligned form may not mention W: a W of
 * one value folds.) */
static void note_vector(lowering *l, const sym_node *index, uint32_t w) {
    for (uint32_t p = 0; index && p < l->k->param_count; p++) {
        if (l->aligned_var[p] && l->used[p] < w && mentions(index, l->k->params[p]))
            l->used[p] = (uint8_t)w;
    }
}

static const sym_node *for_output(lowering *l, const sym_node *s) {
    return for_output_at(l, s, l->out);
}

/* Whether the w elements at[c] are consecutive and the first a multiple of w. */
static bool aligned_run(sym_ctx *sc, const sym_node *const *at, uint32_t w) {
    int64_t d, low;
    for (uint32_t c = 1; c < w; c++) {
        if (!at[c] || !sym_is_const(sym_sub(sc, at[c], at[0]), &d) || d != (int64_t)c)
            return false;
    }
    return at[0] && sym_is_const(sym_floormod_c(sc, at[0], w), &low) && low == 0;
}

/* Whether outputs out .. out + w - 1 (of one row of the tile; w: 4 or 8) access w elements
 * of a buffer that one vector access serves: index + c for output c (returns 1) or index - c
 * (a flipped view, returns -1), the lowest of them a multiple of w; else 0. at[c] receives
 * each output's index expression. */
static int vector_run(lowering *l, const sym_node *s, const sym_node *at[8], uint32_t w) {
    uint32_t tn = l->tile_n;
    if (l->outputs < w || tn % w != 0 || (l->out % tn) % w != 0)
        return 0;
    sym_ctx *sc = l->ctx->sym;
    int64_t step = 0, low;
    for (uint32_t c = 0; c < w; c++) {
        at[c] = for_output_at(l, s, l->out + c);
        int64_t d;
        if (!at[c] || !sym_is_const(sym_sub(sc, at[c], at[0]), &d))
            return 0;
        if (c == 1)
            step = d;
        if (c > 0 && ((step != 1 && step != -1) || d != step * (int64_t)c))
            return 0;
    }
    bool aligned = sym_is_const(sym_floormod_c(sc, at[step > 0 ? 0 : w - 1], w), &low) && low == 0;
    return aligned ? (int)step : 0;
}

/* Whether outputs out, out + tn, ..., out + (w - 1) tn (one column of the tile, from a row that
 * is a multiple of w) load w consecutive elements, the lowest a multiple of w: a matmul's
 * left operand read transposed (a^T @ g, a weight gradient's or an input gradient's left
 * operand), whose rows lie along the tile's column. Returns 1 (at[c]: row c's index) or 0. */
static int column_run(lowering *l, const sym_node *s, const sym_node *at[8], uint32_t w) {
    uint32_t tn = l->tile_n;
    if (tn == 0 || l->outputs < tn * w || (l->outputs / tn) % w != 0 || (l->out / tn) % w != 0)
        return 0;
    sym_ctx *sc = l->ctx->sym;
    for (uint32_t c = 0; c < w; c++)
        at[c] = for_output_at(l, s, l->out + c * tn);
    return aligned_run(sc, at, w) ? 1 : 0;
}

/* The widest run (8 where the device takes octets, else 4) that run (vector_run, column_run)
 * finds from output out; *w receives its width. */
static int widest_run(lowering *l, const sym_node *s, const sym_node *at[8], uint32_t *w,
                      int (*run)(lowering *, const sym_node *, const sym_node *[8], uint32_t)) {
    for (*w = l->ctx->octets ? 8 : 4; *w >= 4; *w /= 2) {
        int step = run(l, s, at, *w);
        if (step != 0)
            return step;
    }
    return 0;
}

static ir_value lower_index(lowering *l, const sym_node *s) {
    const sym_node *t = for_output(l, s);
    return t ? lower_sym(l, t) : IR_NONE;
}

/* ---- values ---------------------------------------------------------------------------------- */

static ir_value zero(ir_kernel *ir, ir_type t) {
    return ir_const_i(ir, t, 0);
}

/* ---- the generator: Philox4x32-10 ------------------------------------------------------------
 *
 * kiln_rand's numbers (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2,
 * 3", SC 2011; the generator of cuRAND, JAX and PyTorch's CUDA path): a block of four 32-bit
 * words from a 128-bit counter and a 64-bit key in ten rounds of
 *     (c0, c1, c2, c3) -> (hi(M1 c2) ^ c1 ^ k0, lo(M1 c2), hi(M0 c0) ^ c3 ^ k1, lo(M0 c0))
 * with M0 = 0xD2511F53, M1 = 0xCD9E8D57, the key bumped by (0x9E3779B9, 0xBB67AE85) after each
 * round but the last. The key is the seed (low word k0), the counter the element's flat index
 * (c0 its low 32 bits, c1 its high, c2 = c3 = 0); element i of kiln_rand is word 0 of its
 * block as (w >> 8) * 2^-24 (uniform on [0, 1) in steps of 2^-24, exact in f32); kiln_randn
 * takes words 0 and 1. 32-bit operations only (MUL and MULHI): no 64-bit integers on the
 * device. Identical on every device and in the interpreter. */
enum { RAND_SLOT = 1u << 17 }; /* memo slot of a block's word w: RAND_SLOT + w */

static ir_value u32_const(ir_kernel *ir, uint32_t v) {
    return ir_const_i(ir, IR_U32, v);
}

static ir_value u32_op(ir_kernel *ir, ir_op op, ir_value a, ir_value b) {
    return ir_alu(ir, op, IR_U32, a, b, IR_NONE);
}

/* The seed's half (0: low, 1: high) as u32: its parameter, or the constant. */
static ir_value rand_key(lowering *l, const kast *a, int half) {
    if (!a->key[half])
        return u32_const(l->ir, (uint32_t)(a->seed >> (32 * half)));
    return ir_cast(l->ir, IR_U32, lower_sym(l, a->key[half]));
}

/* The four words of Philox4x32-10 at counter (c[0], c[1], 0, 0) with key (k[0], k[1]). */
static void philox(ir_kernel *ir, const ir_value c_in[2], const ir_value k_in[2], ir_value out[4]) {
    static const uint32_t mul[2] = {0xD2511F53u, 0xCD9E8D57u}, bump[2] = {0x9E3779B9u, 0xBB67AE85u};
    ir_value c[4] = {c_in[0], c_in[1], u32_const(ir, 0), u32_const(ir, 0)};
    ir_value k[2] = {k_in[0], k_in[1]};
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k[0] = u32_op(ir, IR_ADD, k[0], u32_const(ir, bump[0]));
            k[1] = u32_op(ir, IR_ADD, k[1], u32_const(ir, bump[1]));
        }
        ir_value m0 = u32_const(ir, mul[0]), m1 = u32_const(ir, mul[1]);
        ir_value hi0 = u32_op(ir, IR_MULHI, m0, c[0]), lo0 = u32_op(ir, IR_MUL, m0, c[0]);
        ir_value hi1 = u32_op(ir, IR_MULHI, m1, c[2]), lo1 = u32_op(ir, IR_MUL, m1, c[2]);
        c[0] = u32_op(ir, IR_XOR, u32_op(ir, IR_XOR, hi1, c[1]), k[0]);
        c[1] = lo1;
        c[2] = u32_op(ir, IR_XOR, u32_op(ir, IR_XOR, hi0, c[3]), k[1]);
        c[3] = lo0;
    }
    memcpy(out, c, sizeof c);
}

/* Word a->word of the element's block, made once per body for each (index, seed): randn's two
 * uniforms share one block. */
static ir_value rand_word(lowering *l, const kast *a) {
    ir_kernel *ir = l->ir;
    const sym_node *index = for_output(l, a->index);
    if (!index)
        return IR_NONE;
    memo_key key = {index, a->key[0], RAND_SLOT + a->word};
    ir_value v = a->key[0] ? memo_get(l, key) : IR_NONE;
    if (v != IR_NONE)
        return v;
    ir_value idx = lower_sym(l, index), c[2], k[2] = {rand_key(l, a, 0), rand_key(l, a, 1)};
    c[0] = ir_cast(ir, IR_U32, idx);
    c[1] = u32_const(ir, 0); /* the index's high half: only an i64 kernel has one */
    if (ir->index_type == IR_I64)
        c[1] = ir_cast(ir, IR_U32,
                       ir_alu(ir, IR_DIV, IR_I64, idx, ir_const_i(ir, IR_I64, 1ll << 32), IR_NONE));
    ir_value words[4];
    philox(ir, c, k, words);
    for (uint32_t w = 0; a->key[0] && w < 4; w++)
        memo_put(l, (memo_key){index, a->key[0], RAND_SLOT + w}, words[w]);
    return words[a->word & 3];
}

/* uniform [0, 1): the word's top 24 bits times 2^-24. */
static ir_value lower_rand(lowering *l, const kast *a) {
    ir_kernel *ir = l->ir;
    ir_value top = u32_op(ir, IR_DIV, rand_word(l, a), u32_const(ir, 256));
    ir_value u = ir_alu(ir, IR_MUL, IR_F32, ir_cast(ir, IR_F32, top),
                        ir_const_f(ir, IR_F32, 1.0 / 16777216.0), IR_NONE);
    return a->type == IR_F32 ? u : ir_cast(ir, a->type, u);
}

static ir_value lower_value(lowering *l, const kast *a);

/* The binding a load of buffer reads: the output's through its read-only alias where the
 * kernel has one (eng_kernel_lower), else the buffer's own. */
static uint32_t read_slot(const lowering *l, uint32_t buffer) {
    return buffer == 0 && l->read0 ? l->read0 : buffer;
}

static ir_value lower_load_uncached(lowering *l, const kast *a, const sym_node *index_expr,
                                    const sym_node *valid) {
    ir_kernel *ir = l->ir;
    if (valid && sym_is_const(valid, NULL) && sym_vmax(valid) == 0)
        return zero(ir, a->type); /* never valid (a window's padding) */
    ir_value index = lower_sym(l, index_expr);
    if (valid && !(sym_is_const(valid, NULL) && sym_vmin(valid) == 1)) {
        /* Masked: never touch memory outside the view; read 0 there. */
        ir_value ok = lower_sym(l, valid);
        if (!sym_is_bool(valid)) /* a mask simplified to the constant 0 (never valid) */
            ok = ir_cast(ir, IR_BOOL, ok);
        ir_value safe = ir_alu(ir, IR_WHERE, ir->index_type, ok, index, zero(ir, ir->index_type));
        ir_value v = ir_load(ir, read_slot(l, a->buffer), safe);
        return ir_alu(ir, IR_WHERE, a->type, ok, v, zero(ir, a->type));
    }
    return ir_load(ir, read_slot(l, a->buffer), index);
}

/* Whether a load may be one element of a vector load: of an input buffer of a 32-bit type, or
 * of the output buffer where the outputs are stored as vectors (an in-place write reads each
 * element before storing it), never masked (a masked element reads element 0 instead, and a
 * storage may hold fewer than four elements). */
static bool vector_load_ok(const lowering *l, const kast *a, const sym_node *valid) {
    return (a->buffer != 0 || l->vector_out || l->read0) &&
           ir_vector_type(l->k->buffer_types[a->buffer]) &&
           (!valid || (sym_is_const(valid, NULL) && sym_vmin(valid) == 1));
}

/* w loads (4 or 8) as one vector load (elements at[c] in direction step): each element's
 * value is kept in map for the output (or unroll step) that reads it. Returns the first's. */
static ir_value lower_load_vector(lowering *l, base_map *map, const kast *a,
                                  const sym_node *const *at, const sym_node *valid, int step,
                                  uint32_t w) {
    ir_kernel *ir = l->ir;
    note_vector(l, a->index, w);
    ir_value vec =
        ir_load_vector(ir, read_slot(l, a->buffer), lower_sym(l, at[step > 0 ? 0 : w - 1]), w);
    ir_value parts[8];
    for (uint32_t c = 0; c < w; c++)
        parts[c] = ir_extract(ir, vec, step > 0 ? c : w - 1 - c);
    for (uint32_t c = 0; c < w; c++)
        memo_put_in(l, map, (memo_key){at[c], valid, LOAD_SLOT + a->buffer}, parts[c]);
    return parts[0];
}

/* ridx at unroll step u of the current range step, in a range with vector steps. */
static const sym_node *at_step(lowering *l, const sym_node *s, uint32_t u) {
    sym_ctx *sc = l->ctx->sym;
    const sym_node *from[1] = {l->k->ridx};
    const sym_node *to[1] = {sym_add_c(sc, sym_mul_c(sc, l->step_var, l->step_width), u)};
    return s && to[0] ? sym_substitute(sc, s, from, to, 1) : s;
}

/* In a team kernel, a vector load at step 0 (four elements at[c] for the output being lowered)
 * whose elements depend on the output's tile row di but not on its column nor on the tile
 * column (a matmul's left operand): lane L of the team loads the vector of its tile's row L
 * once, and each row di takes the four elements from lane di (SHARE): one load per lane where
 * each lane loaded every row's (on lavapipe each is a loop over the SIMD lanes). Team-mates
 * are consecutive items of one tile row (eng_kernel_share). IR_NONE where it does not apply. */
static ir_value lower_shared_load(lowering *l, const kast *a, const sym_node *index,
                                  const sym_node *const at[4], const sym_node *valid) {
    if (!l->lane_gidx)
        return IR_NONE;
    sym_ctx *sc = l->ctx->sym;
    uint32_t di = l->out / l->tile_n;
    const sym_node *mine = read_as(l, a->index, l->lane_gidx);
    const sym_node *lane[1] = {l->lane_var}, *row[1] = {sym_const(sc, di)};
    const sym_node *col[1] = {l->tile_var[1]}, *col0[1] = {sym_const(sc, 0)};
    bool shared = mine && row[0] && col0[0] && sym_substitute(sc, mine, lane, row, 1) == index &&
                  sym_substitute(sc, mine, col, col0, 1) == mine;
    const sym_node *lane_at[4];
    for (uint32_t u = 0; shared && u < 4; u++)
        lane_at[u] = at_step(l, mine, u);
    if (!shared || !aligned_run(sc, lane_at, 4)) {
        sym_ctx_clear_error(sc);
        return IR_NONE;
    }
    ir_value parts[4];
    memo_key key = {lane_at[0], valid, LOAD_SLOT + a->buffer};
    if (memo_get_in(&l->step_memo, key) == IR_NONE)
        lower_load_vector(l, &l->step_memo, a, lane_at, valid, 1, 4);
    for (uint32_t c = 0; c < 4; c++) {
        key.a = lane_at[c];
        parts[c] = ir_share(l->ir, memo_get_in(&l->step_memo, key), di);
        memo_put_in(l, &l->step_memo, (memo_key){at[c], valid, LOAD_SLOT + a->buffer}, parts[c]);
    }
    return parts[0];
}

/* A load in a range with vector steps: looked up among the vectors loaded at earlier steps,
 * or, at a step u that is a multiple of 4, loaded as a vector when steps u .. u + w - 1 read
 * w consecutive elements aligned to w (8 first where the device takes octets, then 4).
 * IR_NONE: load it the plain way. */
static ir_value lower_step_load(lowering *l, const kast *a, const sym_node *index,
                                const sym_node *valid) {
    const sym_node *at[WINDOW_UNROLL], *ok[WINDOW_UNROLL];
    uint32_t n = l->step_width;
    for (uint32_t u = 0; u < n; u++) {
        at[u] = at_step(l, index, u);
        ok[u] = at_step(l, valid, u);
        if (!at[u] || (valid && !ok[u]))
            return IR_NONE;
    }
    uint32_t u = l->step_u;
    ir_value v = memo_get_in(&l->step_memo, (memo_key){at[u], ok[u], LOAD_SLOT + a->buffer});
    if (v != IR_NONE || u % 4 != 0 || !vector_load_ok(l, a, valid))
        return v;
    if (u == 0 && n == 4 && (v = lower_shared_load(l, a, index, at, ok[0])) != IR_NONE)
        return v;
    for (uint32_t w = l->ctx->octets ? 8 : 4; w >= 4; w /= 2) {
        bool same = u % w == 0 && u + w <= n;
        for (uint32_t c = u + 1; same && c < u + w; c++)
            same = ok[c] == ok[u];
        if (same && aligned_run(l->ctx->sym, at + u, w))
            return lower_load_vector(l, &l->step_memo, a, at + u, ok[u], 1, w);
    }
    return IR_NONE;
}

static ir_value lower_cond(lowering *l, const sym_node *s);

/* A row's value (lower_step_pair): made once for the whole step (kept in the step memo, which
 * every element of the step sees), so that the row's pairs name one value and share their
 * texel fetches (emit.c load_row_pair). */
static ir_value row_value(lowering *l, const sym_node *row) {
    memo_key key = {row, NULL, ROW_SLOT};
    ir_value v = memo_get_in(&l->step_memo, key);
    return v != IR_NONE ? v : memo_put_in(l, &l->step_memo, key, lower_sym(l, row));
}

/* Elements pair[0] and pair[1] of a load, of validity ok, where they are an aligned pair (two
 * consecutive elements, the first even) of a 32-bit type: one LOAD2, each element kept in map
 * (lavapipe moves a vector per component, each with its own bounds check: a 64-bit pair costs
 * about one element's load). A masked pair reads elements 0 and 1 where invalid: every storage
 * holds two but an application's short buffer (eng_storage_short, in the kernel's hash), whose
 * masked loads stay single. IR_NONE where it does not apply. */
static ir_value lower_pair(lowering *l, base_map *map, const kast *a, const sym_node *const pair[2],
                           const sym_node *ok, const sym_node *row) {
    sym_ctx *sc = l->ctx->sym;
    int64_t c;
    bool masked = ok && !(sym_is_const(ok, &c) && c == 1);
    if (a->buffer == 0 || a->buffer >= l->k->buffer_count ||
        !ir_vector_type(l->k->buffer_types[a->buffer]) || !pair[1] ||
        (ok && sym_is_const(ok, &c) && c == 0) ||
        (masked && eng_storage_short(l->k->buffers[a->buffer])) || !aligned_run(sc, pair, 2)) {
        sym_ctx_clear_error(sc);
        return IR_NONE;
    }
    ir_kernel *ir = l->ir;
    note_vector(l, a->index, 2);
    ir_value cond = masked ? lower_cond(l, ok) : IR_NONE, first = lower_sym(l, pair[0]);
    if (masked)
        first = ir_alu(ir, IR_WHERE, ir->index_type, cond, first, zero(ir, ir->index_type));
    int64_t d = 0;
    bool in_row =
        row && sym_is_const(sym_sub(sc, pair[0], row), &d) && d > -ROW_SPAN && d < ROW_SPAN;
    sym_ctx_clear_error(sc);
    ir_value vec = in_row ? ir_load_row_pair(ir, a->buffer, first, row_value(l, row), d)
                          : ir_load_vector(ir, a->buffer, first, 2),
             parts[2];
    for (uint32_t c2 = 0; c2 < 2; c2++)
        parts[c2] = ir_extract(ir, vec, c2);
    for (uint32_t c2 = 0; c2 < 2; c2++) {
        if (masked)
            parts[c2] = ir_alu(ir, IR_WHERE, a->type, cond, parts[c2], zero(ir, a->type));
        memo_put_in(l, map, (memo_key){pair[c2], ok, LOAD_SLOT + a->buffer}, parts[c2]);
    }
    return parts[0];
}

/* In a range with steps (step_var), the load's elements at step u (at, ok) and u + 1 as one
 * pair (lower_pair) where they have one validity, kept in the step memo. In the training step
 * on lavapipe, pairs against single loads: conv2's weight gradient 8.3 -> 6.0-6.6 ms, its
 * forward and input gradient 5.4-5.6 -> 4.2-4.8; masked ones (the rows of padding) 0.4-0.6 ms
 * of each. */
static ir_value lower_step_pair(lowering *l, const kast *a, const sym_node *at, const sym_node *ok,
                                const sym_node *index, const sym_node *valid) {
    uint32_t u = l->step_u;
    if (u + 1 >= l->step_width || at_step(l, valid, u + 1) != ok)
        return IR_NONE;
    const sym_node *pair[2] = {at, at_step(l, index, u + 1)};
    /* a step of at least ROW_PAIRS pairs (a weight gradient's image row of 14 pixels): its
     * pairs are rows, named by the load's element at step 0 less its constant term, which the
     * loads of neighbouring taps, channels and outputs share; a short step's (a kernel row of
     * 3 taps) would fetch two texels for its one pair */
    int64_t term;
    const sym_node *row = l->step_width >= 2 * ROW_PAIRS
                              ? sym_split_const(l->ctx->sym, at_step(l, index, 0), &term)
                              : NULL;
    return lower_pair(l, &l->step_memo, a, pair, ok, row);
}

/* In a tile, the load's element for this output (index, valid) and the next element, where one
 * of the next two outputs of the tile's row reads it with the same validity (a row of a 2 x 2
 * pool's backward reads each pooled element for two neighbouring outputs), as one pair
 * (lower_pair) kept in the memo. */
static ir_value lower_row_pair(lowering *l, const kast *a, const sym_node *index,
                               const sym_node *valid) {
    uint32_t tn = l->tile_n;
    if (l->outputs < 2 || tn < 2)
        return IR_NONE;
    sym_ctx *sc = l->ctx->sym;
    uint32_t end = (l->out / tn + 1) * tn;
    for (uint32_t o = l->out + 1; o < end && o < l->outputs && o <= l->out + 2; o++) {
        const sym_node *next = for_output_at(l, a->index, o);
        int64_t d;
        bool found = next && sym_is_const(sym_sub(sc, next, index), &d) && d == 1 &&
                     for_output_at(l, a->valid, o) == valid;
        sym_ctx_clear_error(sc);
        if (found) {
            const sym_node *pair[2] = {index, next};
            return lower_pair(l, &l->memo, a, pair, valid, NULL);
        }
    }
    return IR_NONE;
}

/* A load, made once per body for each (buffer, index, validity) whichever output needs it; at
 * the first output of a row of four that read four aligned elements, one vector load for the
 * four (never of the output buffer: a kernel that writes it accesses its elements one way
 * only); else, where the next element is read too (at the next step, or by an output beside
 * this one), one pair (lower_pair). */
static ir_value lower_load(lowering *l, const kast *a) {
    const sym_node *index = for_output(l, a->index), *valid = for_output(l, a->valid);
    if (!index || (a->valid && !valid))
        return IR_NONE;
    memo_key key = {index, valid, LOAD_SLOT + a->buffer};
    ir_value v = memo_get(l, key);
    if (v != IR_NONE)
        return v;
    if (l->step_var && (v = lower_step_load(l, a, index, valid)) != IR_NONE)
        return memo_put(l, key, v);
    const sym_node *at[8];
    uint32_t w;
    int step = 0;
    if (vector_load_ok(l, a, valid) && (step = widest_run(l, a->index, at, &w, vector_run)) == 0)
        step = widest_run(l, a->index, at, &w, column_run);
    if (step != 0)
        return lower_load_vector(l, &l->memo, a, at, valid, step, w);
    const sym_node *at_u = l->step_var ? at_step(l, index, l->step_u) : NULL;
    const sym_node *ok_u = l->step_var ? at_step(l, valid, l->step_u) : NULL;
    if (at_u && (!valid || ok_u)) {
        /* elements u and u + 1 of a step as one pair where they line up */
        if ((v = lower_step_pair(l, a, at_u, ok_u, index, valid)) != IR_NONE)
            return memo_put(l, key, v);
        if (l->window_taps) {
            /* windows in whole rows (eng_kernel_tile): the element at this step (its mask
             * folds where the step fixes the tap or pixel), kept for the steps after this one,
             * which read it for other outputs of the tile */
            v = lower_load_uncached(l, a, at_u, ok_u);
            memo_put_in(l, &l->step_memo, (memo_key){at_u, ok_u, LOAD_SLOT + a->buffer}, v);
            return memo_put(l, key, v);
        }
    }
    if ((v = lower_row_pair(l, a, index, valid)) != IR_NONE)
        return memo_put(l, key, v);
    v = lower_load_uncached(l, a, index, valid);
    return memo_put(l, key, v);
}

/* A condition (a validity mask, or a constant) as a bool value. */
static ir_value lower_cond(lowering *l, const sym_node *s) {
    int64_t c;
    if (sym_is_const(s, &c))
        return ir_const_i(l->ir, IR_BOOL, c != 0);
    ir_value v = lower_sym(l, s);
    return sym_is_bool(s) ? v : ir_cast(l->ir, IR_BOOL, v);
}

/* Where guard holds and the index x (in type wide) is outside [0, size): the flag's words
 * become 1, x (clamped to i32) and size. A plain store: every writer writes a 1. */
static void lower_flag(lowering *l, const kast *a, ir_value bad, ir_value x, ir_value size,
                       ir_type wide) {
    ir_kernel *ir = l->ir;
    ir_type it = ir->index_type;
    if (wide == IR_I64) {
        x = ir_alu(ir, IR_MIN, wide, x, ir_const_i(ir, wide, INT32_MAX), IR_NONE);
        x = ir_alu(ir, IR_MAX, wide, x, ir_const_i(ir, wide, INT32_MIN), IR_NONE);
        size = ir_alu(ir, IR_MIN, wide, size, ir_const_i(ir, wide, INT32_MAX), IR_NONE);
    }
    ir_if(ir, bad);
    ir_store(ir, a->flag, ir_const_i(ir, it, 0), ir_const_i(ir, IR_I32, 1));
    ir_store(ir, a->flag, ir_const_i(ir, it, 1), wide == IR_I32 ? x : ir_cast(ir, IR_I32, x));
    ir_store(ir, a->flag, ir_const_i(ir, it, 2), wide == IR_I32 ? size : ir_cast(ir, IR_I32, size));
    ir_endif(ir);
}

/* A gather (kernel.c gather_value): the index read, checked against the size in the wider of
 * its type and the index type (an i32 index on an i32 kernel needs no 64-bit arithmetic), then
 * the load with the gather's Variable bound to it (0 where out of range: the load is masked
 * and reads nothing outside the storage). The load's index is lowered in a memo of its own,
 * since the Variable's value is this gather's alone. */
static ir_value lower_gather(lowering *l, const kast *a) {
    ir_kernel *ir = l->ir;
    ir_type it = ir->index_type, vt = a->src[0]->type;
    ir_type wide = vt == IR_I64 || it == IR_I64 ? IR_I64 : IR_I32;
    ir_value v = lower_value(l, a->src[0]);
    const sym_node *bound = for_output(l, a->bound), *guard = for_output(l, a->guard);
    const sym_node *index = for_output(l, a->index), *valid = for_output(l, a->valid);
    if (v == IR_NONE || !bound || !guard || !index || !valid)
        return IR_NONE;
    ir_value x = vt == wide ? v : ir_cast(ir, wide, v);
    ir_value size = lower_sym(l, bound);
    size = it == wide ? size : ir_cast(ir, wide, size);
    ir_value in =
        ir_alu(ir, IR_AND, IR_BOOL, ir_alu(ir, IR_LE, IR_BOOL, ir_const_i(ir, wide, 0), x, IR_NONE),
               ir_alu(ir, IR_LT, IR_BOOL, x, size, IR_NONE), IR_NONE);
    ir_value bad = ir_alu(ir, IR_AND, IR_BOOL, lower_cond(l, guard),
                          ir_alu(ir, IR_NOT, IR_BOOL, in, IR_NONE, IR_NONE), IR_NONE);
    lower_flag(l, a, bad, x, size, wide);
    int64_t none;
    if (sym_is_const(bound, &none) && none == 0) /* an empty dim: its storage may be empty */
        return zero(ir, a->type);
    ir_value g = ir_alu(ir, IR_WHERE, wide, in, x, ir_const_i(ir, wide, 0));
    g = wide == it ? g : ir_cast(ir, it, g);
    base_map outer = l->memo;
    base_map_init(&l->memo, &l->ctx->alloc);
    memo_put(l, (memo_key){a->var, NULL, 0}, g);
    ir_value ok = ir_alu(ir, IR_AND, IR_BOOL, in, lower_cond(l, valid), IR_NONE);
    ir_value at = ir_alu(ir, IR_WHERE, it, ok, lower_sym(l, index), zero(ir, it));
    base_map_finish(&l->memo);
    l->memo = outer;
    ir_value loaded = ir_load(ir, a->buffer, at);
    return ir_alu(ir, IR_WHERE, a->type, ok, loaded, zero(ir, a->type));
}

static ir_value lower_value_uncached(lowering *l, const kast *a) {
    ir_kernel *ir = l->ir;
    switch (a->kind) {
    case KAST_GATHER:
        return lower_gather(l, a);
    case KAST_LOAD:
        return lower_load(l, a);
    case KAST_CONST:
        return ir_type_is_float(a->type) ? ir_const_f(ir, a->type, a->value)
                                         : ir_const_i(ir, a->type, (int64_t)a->value);
    case KAST_INDEX: {
        const sym_node *index = for_output(l, a->index);
        ir_value v = index ? lower_sym(l, index) : IR_NONE;
        if (a->type == IR_BOOL)
            return index && sym_is_bool(index) ? v : ir_cast(ir, IR_BOOL, v);
        return ir_cast(ir, a->type, v);
    }
    case KAST_RAND:
        return lower_rand(l, a);
    case KAST_REDUCE:
        return l->results[l->out][a->reduction];
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
    memo_key key = {a, NULL, 1 + l->out};
    ir_value v = memo_get(l, key);
    return v != IR_NONE ? v : memo_put(l, key, lower_value_uncached(l, a));
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
        return ir_const_i(ir, t,
                          t == IR_I64   ? INT64_MIN
                          : t == IR_I32 ? INT32_MIN
                          : t == IR_I8  ? INT8_MIN
                                        : 0);
    default: /* MIN */
        if (ir_type_is_float(t))
            return ir_const_f(ir, t, INFINITY);
        return ir_const_i(ir, t,
                          t == IR_I64   ? INT64_MAX
                          : t == IR_I32 ? INT32_MAX
                          : t == IR_I8  ? INT8_MAX
                          : t == IR_U8  ? UINT8_MAX
                          : t == IR_U32 ? (int64_t)UINT32_MAX
                                        : 1);
    }
}

/* One combining step of reduction r with value v; arg reductions also keep the index of the
 * first maximum (NaN counts as the maximum: the first NaN, as torch.argmax; a pool's the last,
 * as torch's max_pool2d, which takes every NaN it meets). */
static void combine(lowering *l, const eng_reduction *r, ir_value acc, ir_value at, ir_value v) {
    ir_kernel *ir = l->ir;
    ir_value best = ir_get(ir, acc);
    if (!r->arg) {
        ir_set(ir, acc, ir_alu(ir, r->op, r->type, best, v, IR_NONE));
        return;
    }
    ir_value greater = ir_alu(ir, IR_LT, IR_BOOL, best, v, IR_NONE);
    ir_value v_nan = ir_alu(ir, IR_NE, IR_BOOL, v, v, IR_NONE);
    ir_value nan_wins = v_nan;
    if (r->arg != ENG_ARG_POOL) {
        ir_value best_num = ir_alu(ir, IR_EQ, IR_BOOL, best, best, IR_NONE);
        nan_wins = ir_alu(ir, IR_AND, IR_BOOL, v_nan, best_num, IR_NONE);
    }
    ir_value take = ir_alu(ir, IR_OR, IR_BOOL, greater, nan_wins, IR_NONE);
    ir_set(ir, acc, ir_alu(ir, IR_WHERE, r->type, take, v, best));
    ir_value index = ir_cast(ir, IR_I32, l->ridx);
    ir_set(ir, at, ir_alu(ir, IR_WHERE, IR_I32, take, index, ir_get(ir, at)));
}

/* How many elements one step of a reduction loop combines, each into an accumulator of its
 * own: a quarter of the loop's overhead, and four independent dependency chains; eight (one
 * octet) for a one-output item on a device that takes octets (lower_stage). */
enum { REDUCE_UNROLL = 4, MAX_UNROLL = 8 };

/* ---- the loop budget ----------------------------------------------------------------------
 *
 * lavapipe (gallivm in Mesa 22.3) ends loops silently. An invocation has one counter of loop
 * passes, LP_MAX_TGSI_LOOP_ITERATIONS = 65535 (lp_exec_mask_function_init), decremented at the
 * end of every pass of every loop, nested or one after another, the pass that leaves a loop
 * included; the loop that brings it to 0 is left there. A loop of n iterations costs n + 1
 * passes of the invocation's 65535, and splitting a loop into an outer and an inner one saves
 * nothing (the inner loop's passes count once per outer iteration, the outer's on top).
 * Measured: the softmax of rows of 50001 (two reduction loops of 12501 steps, then a row loop
 * of 50001 one-output tiles) lost each row's outputs from 65535 - 2 * 12502 = 40531 on, and
 * of rows of 65533 from 32765 on: half of each row was 0.
 *
 * So on every device a kernel is lowered with all its loops' passes, for the largest counts
 * its Variables allow, at most LOOP_PASSES (below 65535). The loops are one per reduction
 * stage (steps of unroll[s] elements per lane) and, in row mode, the row loop (row_tiles
 * tiles per pass). Starting from the unrolling chosen for speed (stage_unroll) and one tile
 * per pass, the loop with the most passes takes twice the work per pass (a reduction up to
 * MAX_UNROLL, the row loop up to MAX_ROW_TILES) until the kernel fits: sizes far below the
 * limit keep their code. A reduction of constant size combines at most 65535 elements per
 * kernel (ENG_REDUCE_MAX_COUNT: ops.c splits longer ones), so every kernel of constant sizes fits
 * (at worst four stages of 8193 passes and a row loop of 16385); one of symbolic size may not for
 * its largest values, and those are refused on lavapipe (runtime.c, eng_kernel_loop_passes). */
enum { LOOP_PASSES = ENG_LOOP_PASSES, MAX_ROW_TILES = 16 };

typedef struct loop_plan {
    uint32_t stages;
    uint32_t unroll[ENG_MAX_REDUCTIONS]; /* elements per step of stage s's loop, per lane */
    uint32_t row_tiles;                  /* tiles per pass of the row loop */
    int64_t columns;                     /* the row loop's tiles (0: no row loop) */
} loop_plan;

/* The elements a stage's loop combines per step for speed: REDUCE_UNROLL; one for fewer than
 * two steps' worth and for an arg reduction (before the budget), except a count of 4 or 8 (a
 * pool's window; the chains' tree wants powers of two), combined in one step in order, whose
 * consecutive elements load as pairs (lower_step_pair: a 2 x 2 max pool with its argmax on
 * lavapipe, conv1's in the training step 2.09 -> 1.61 ms, its inference forward 1.71 -> 1.33,
 * conv2's 1.05 -> 0.88); three in a tile for a count that four does not divide and three does
 * (steps without a bounds check per element: conv1's product per image over 9 window elements 1.6
 * -> 1.36 ms on lavapipe); an octet on a device that takes octets when the count is a multiple of
 * 8, for a tile too (a matmul's left operand read as one LOAD8 per row every eight steps: 1024^3 on
 * lavapipe 0.97 -> 0.87 of its GLSL reference's time, three paired runs each). */
static uint32_t stage_unroll(const kiln_context *ctx, const eng_kernel *k, const eng_program *p,
                             uint32_t stage) {
    int64_t constant;
    bool known = sym_is_const(k->reduce_count, &constant);
    uint32_t unroll = REDUCE_UNROLL;
    if (p->window_taps && known && constant % p->window_taps == 0)
        unroll = p->window_taps; /* eng_kernel_tile: a kernel row of taps per step */
    else if (known && constant < 2 * REDUCE_UNROLL)
        unroll = 1;
    else if (known && constant % REDUCE_UNROLL != 0 && constant % 3 == 0 && p->per_item > 1 &&
             !p->row_loop && !p->group_lanes)
        unroll = 3; /* a tile's one chain per output: the chains' tree wants powers of two */
    else if (known && ctx->octets && !p->group_lanes && constant % 8 == 0)
        unroll = MAX_UNROLL; /* an octet per step: one LOAD8 where the elements line up */
    for (uint32_t i = 0; i < k->reduction_count; i++)
        unroll = k->reductions[i].arg && k->reductions[i].stage == stage ? 1 : unroll;
    if (unroll == 1 && known && (constant == 4 || constant == 8) && !p->group_lanes)
        unroll = (uint32_t)constant; /* a short window in one step, its elements as pairs */
    return unroll;
}

/* The passes of each loop of the plan for count elements per output (passes[plan->stages]:
 * the row loop's, 0 without one); returns their sum. */
static uint64_t plan_passes(const loop_plan *plan, const eng_program *p, int64_t count,
                            uint64_t *passes) {
    uint64_t lanes = p->group_lanes ? p->group_lanes : 1, total = 0;
    uint64_t n = count > 0 ? (uint64_t)count : 0;
    for (uint32_t s = 0; s < plan->stages; s++) {
        uint64_t per_step = plan->unroll[s] * lanes;
        passes[s] = (n + per_step - 1) / per_step + 1;
        total += passes[s];
    }
    uint64_t columns = (uint64_t)plan->columns;
    passes[plan->stages] = columns ? (columns + plan->row_tiles - 1) / plan->row_tiles + 1 : 0;
    return total + passes[plan->stages];
}

static void plan_loops(const kiln_context *ctx, const eng_kernel *k, const eng_program *p,
                       loop_plan *plan) {
    memset(plan, 0, sizeof *plan);
    plan->row_tiles = 1;
    if (p->row_loop)
        plan->columns = p->tile_width / (int64_t)p->tile_n;
    for (uint32_t i = 0; i < k->reduction_count; i++) {
        uint32_t s = k->reductions[i].stage + 1;
        plan->stages = s > plan->stages ? s : plan->stages;
    }
    for (uint32_t s = 0; s < plan->stages; s++)
        plan->unroll[s] = stage_unroll(ctx, k, p, s);
    int64_t count = k->reduction_count ? sym_vmax(k->reduce_count) : 0;
    uint64_t passes[ENG_MAX_REDUCTIONS + 1];
    while (plan_passes(plan, p, count, passes) > LOOP_PASSES) {
        uint32_t most = UINT32_MAX; /* the loop with the most passes that can take more work */
        for (uint32_t s = 0; s <= plan->stages; s++) {
            bool grows = s < plan->stages ? plan->unroll[s] * 2 <= MAX_UNROLL
                                          : plan->columns && plan->row_tiles < MAX_ROW_TILES;
            if (grows && (most == UINT32_MAX || passes[s] > passes[most]))
                most = s;
        }
        if (most == UINT32_MAX)
            return; /* a symbolic count too large for any plan: refused at run time */
        if (most < plan->stages)
            plan->unroll[most] *= 2;
        else
            plan->row_tiles *= 2;
    }
}

uint64_t eng_kernel_loop_passes(const kiln_context *ctx, const eng_kernel *k, const eng_program *p,
                                int64_t count) {
    loop_plan plan;
    uint64_t passes[ENG_MAX_REDUCTIONS + 1];
    plan_loops(ctx, k, p, &plan);
    return plan_passes(&plan, p, count, passes);
}

/* acc[u] = identity; RANGE ceil(reduce_count / (U * S)) as q: for u < U, element
 * (q * U + u) * S + lane (when it is below reduce_count) is combined into acc[u]; the results
 * are (acc0 op acc1) op (acc2 op acc3) after the range, in a group kernel then combined over
 * its S lanes (S = 1, lane = 0 otherwise). Arg reductions keep one accumulator (the first
 * maximum wins) and are never grouped. A tiled kernel keeps one accumulator per output and
 * reduction (its outputs are the independent chains); without bounds checks a step's U
 * elements are combined first, then into the accumulator (stepwise, below). */
static void lower_stage(lowering *l, uint32_t stage) {
    const eng_kernel *k = l->k;
    ir_kernel *ir = l->ir;
    ir_value acc[WINDOW_TILE][MAX_UNROLL][ENG_MAX_REDUCTIONS]; /* 32 KiB */
    ir_value at[WINDOW_TILE][ENG_MAX_REDUCTIONS];              /* an arg reduction's index */
    uint32_t unroll = l->plan->unroll[stage]; /* stage_unroll, or more (the loop budget) */
    int64_t constant = -1;
    int64_t stride = l->ir->group_lanes ? l->ir->group_lanes : 1;
    sym_is_const(k->reduce_count, &constant);
    /* accumulators per output and reduction */
    uint32_t chains = l->outputs > 1 || unroll > MAX_UNROLL ? 1 : unroll;
    /* no element needs a bounds check */
    bool exact = constant >= 0 && constant % ((int64_t)unroll * stride) == 0;
    bool arg = false; /* an arg reduction: one accumulator, its elements in order */
    for (uint32_t i = 0; i < k->reduction_count; i++) {
        const eng_reduction *r = &k->reductions[i];
        if (r->stage != stage)
            continue;
        arg = arg || r->arg;
        for (uint32_t o = 0; o < l->outputs; o++) {
            for (uint32_t u = 0; u < (r->arg ? 1 : chains); u++)
                acc[o][u][i] = ir_var(ir, reduce_identity(ir, r->op, r->type));
            at[o][i] = r->arg ? ir_var(ir, ir_const_i(ir, IR_I32, 0)) : IR_NONE;
        }
    }
    ir_type it = ir->index_type;
    ir_value count = lower_sym(l, k->reduce_count), steps = count;
    int64_t per_step = (int64_t)unroll * stride;
    if (per_step > 1) {
        ir_value up = ir_alu(ir, IR_ADD, it, count, ir_const_i(ir, it, per_step - 1), IR_NONE);
        steps = ir_alu(ir, IR_DIV, it, up, ir_const_i(ir, it, per_step), IR_NONE);
    }
    ir_value q = ir_range(ir, steps);
    /* Vector loads along the range: four or eight steps without bounds checks, lanes not
     * interleaved. */
    if (exact && (unroll >= 4 || (l->window_taps && unroll % l->window_taps == 0)) && stride == 1) {
        char name[48];
        snprintf(name, sizeof name, "rstep:%lld", (long long)(constant / unroll - 1));
        l->step_var = sym_var(l->ctx->sym, name, 0, constant / unroll - 1);
        l->step_value = q;
        l->step_width = unroll;
        base_map_init(&l->step_memo, &l->ctx->alloc);
    }
    /* A tiled kernel without bounds checks combines a step's elements first and the step's
     * value into the accumulator once: acc + (((v0 + v1) + v2) + v3), as a hand-written sgemm
     * does. One update of each accumulator per step instead of four (lavapipe keeps a matmul's
     * 64 in memory). Measured on lavapipe against the old order in one process: matmul
     * 1024^3 0.99-1.01, 2048^3 0.96. */
    bool stepwise = chains == 1 && unroll > 1 && exact && !arg;
    ir_value ridx[WINDOW_UNROLL];
    for (uint32_t u = 0; u < unroll; u++) { /* element u of the step (and of the lane) */
        ridx[u] = q;
        if (unroll > 1) {
            ir_value base = ir_alu(ir, IR_MUL, it, q, ir_const_i(ir, it, unroll), IR_NONE);
            ridx[u] = ir_alu(ir, IR_ADD, it, base, ir_const_i(ir, it, u), IR_NONE);
        }
        if (stride > 1) {
            ir_value base = ir_alu(ir, IR_MUL, it, ridx[u], ir_const_i(ir, it, stride), IR_NONE);
            ridx[u] = ir_alu(ir, IR_ADD, it, base, l->lane, IR_NONE);
        }
    }
    /* Each element has its own memo (its ridx differs; and values inside an IF are not
     * visible after it). A stepwise range goes tile row by tile row, element by element
     * within the row, so that one row's partial steps are live at a time: element by element
     * across a matmul's whole tile kept 64 of them live next to its 64 accumulators and
     * lavapipe spilled (1024^3: 116 ms instead of 108); with octets (a row's eight columns
     * from one load) a row at a time took 93.5-95.6 ms where output by output took 108 and two
     * rows 102 (the GLSL sgemm 97.5-99); a column reduction's strip, a tile of one row, reads
     * its loads in address order (output by output was 4-9% slower there). All measured as
     * SPIR-V on the same buffers (bench/README.md). The elements' memos live across the
     * outputs. Otherwise element by element, each under its bounds check. */
    base_map outer = l->memo, memo[WINDOW_UNROLL];
    for (uint32_t u = 0; u < unroll; u++)
        base_map_init(&memo[u], &l->ctx->alloc);
    for (uint32_t u = 0; !stepwise && u < unroll; u++) {
        l->memo = memo[u];
        l->step_u = u;
        l->ridx = ridx[u];
        bool checked = (u > 0 || stride > 1) && !exact;
        if (checked)
            ir_if(ir, ir_alu(ir, IR_LT, IR_BOOL, l->ridx, count, IR_NONE));
        for (l->out = 0; l->out < l->outputs; l->out++) {
            for (uint32_t i = 0; i < k->reduction_count; i++) {
                const eng_reduction *r = &k->reductions[i];
                if (r->stage == stage)
                    combine(l, r, acc[l->out][chains > 1 && !r->arg ? u : 0][i], at[l->out][i],
                            lower_value(l, r->value));
            }
        }
        if (checked)
            ir_endif(ir);
        memo[u] = l->memo;
    }
    /* outputs combined element by element together: a row of the tile */
    uint32_t together = l->tile_n ? l->tile_n : 1;
    for (uint32_t first = 0; stepwise && first < l->outputs; first += together) {
        ir_value sum[WINDOW_TILE][ENG_MAX_REDUCTIONS];
        for (uint32_t u = 0; u < unroll; u++) {
            l->memo = memo[u];
            l->step_u = u;
            l->ridx = ridx[u];
            for (l->out = first; l->out < first + together; l->out++) {
                for (uint32_t i = 0; i < k->reduction_count; i++) {
                    const eng_reduction *r = &k->reductions[i];
                    if (r->stage != stage)
                        continue;
                    ir_value v = lower_value(l, r->value), *p = &sum[l->out - first][i];
                    *p = u == 0 ? v : ir_alu(ir, r->op, r->type, *p, v, IR_NONE);
                }
            }
            memo[u] = l->memo;
        }
        for (l->out = first; l->out < first + together; l->out++) {
            for (uint32_t i = 0; i < k->reduction_count; i++) {
                const eng_reduction *r = &k->reductions[i];
                if (r->stage == stage)
                    combine(l, r, acc[l->out][0][i], at[l->out][i], sum[l->out - first][i]);
            }
        }
    }
    l->out = 0;
    for (uint32_t u = 0; u < unroll; u++)
        base_map_finish(&memo[u]);
    l->memo = outer;
    if (l->step_var)
        base_map_finish(&l->step_memo);
    l->step_var = NULL;
    ir_endrange(ir);
    l->ridx = IR_NONE;
    for (uint32_t o = 0; o < l->outputs; o++) {
        for (uint32_t i = 0; i < k->reduction_count; i++) {
            const eng_reduction *r = &k->reductions[i];
            if (r->stage != stage)
                continue;
            if (r->arg) {
                l->results[o][i] = ir_get(ir, at[o][i]);
                continue;
            }
            ir_value part[MAX_UNROLL];
            for (uint32_t u = 0; u < chains; u++)
                part[u] = ir_get(ir, acc[o][u][i]);
            for (uint32_t width = chains; width > 1; width /= 2) {
                for (uint32_t u = 0; u < width / 2; u++)
                    part[u] = ir_alu(ir, r->op, r->type, part[2 * u], part[2 * u + 1], IR_NONE);
            }
            l->results[o][i] = stride > 1 ? ir_group(ir, r->op, part[0]) : part[0];
        }
    }
}

/* Every reduction, stage by stage: a stage's values may read the results of lower ones. */
static void lower_reductions(lowering *l) {
    uint32_t stages = 0;
    for (uint32_t i = 0; i < l->k->reduction_count; i++)
        stages = l->k->reductions[i].stage + 1 > stages ? l->k->reductions[i].stage + 1 : stages;
    for (uint32_t s = 0; s < stages; s++)
        lower_stage(l, s);
}

/* Whether s computes exactly in 32-bit integers. Its interval must fit, except where its value
 * only flows through sums and products into a result known to fit (wraps): two's-complement
 * sums and products are exact modulo 2^32, so an intermediate value that interval arithmetic
 * cannot bound may wrap and the result is still right. That matters for symbolic views: a
 * reshape's x % a + a * ((x // a) % b) + a * b * (x // (a * b)) is x, but its intervals
 * multiply a's maximum by x's, which made a GPT-2 attention kernel over a KV cache of 1,024
 * positions need 64-bit indices (devices without shaderInt64 could not run it). Operands of
 * division, modulo, comparisons, min, max and where must be exact, and so must every leaf (a
 * Variable's value travels as an i32 parameter). */
static bool fits_i32_wrapping(const sym_node *s, bool wraps) {
    if (!s)
        return true;
    bool in = sym_vmin(s) >= INT32_MIN && sym_vmax(s) <= INT32_MAX;
    sym_kind kind = sym_node_kind(s);
    bool ring = kind == SYM_ADD || kind == SYM_MUL;
    if (!in && !(wraps && ring))
        return false;
    for (uint32_t i = 0; i < sym_node_arity(s); i++) {
        if (!fits_i32_wrapping(sym_node_src(s, i), ring && (in || wraps)))
            return false;
    }
    return true;
}

static bool fits_i32(const sym_node *s) {
    return fits_i32_wrapping(s, false);
}

/* Whether a storage's element indices fit in i32: the index of a valid access to it does, so it
 * may be computed with wrapping sums and products (an invalid lane's index is replaced). */
static bool indices_fit(const eng_kernel *k, uint32_t buffer) {
    const eng_storage *st = buffer < k->buffer_count ? k->buffers[buffer] : NULL;
    return st && (st->bound > st->elements ? st->bound : st->elements) <= (uint64_t)INT32_MAX;
}

static bool tree_fits_i32(const eng_kernel *k, const kast *a) {
    if (!a)
        return true;
    bool access = a->kind == KAST_LOAD || a->kind == KAST_GATHER;
    if (!fits_i32_wrapping(a->index, access && indices_fit(k, a->buffer)) || !fits_i32(a->valid) ||
        !fits_i32(a->bound))
        return false;
    for (uint32_t i = 0; i < a->nsrc; i++) {
        if (!tree_fits_i32(k, a->src[i]))
            return false;
    }
    return true;
}

static bool in_loop(sym_ctx *sc, const eng_kernel *k, const kast *a);

/* Whether index, with var at there instead of at here, is exactly step elements further: what
 * an invocation, or the next step, reads after this one. */
static bool index_steps(sym_ctx *sc, const sym_node *index, const sym_node *var,
                        const sym_node *here, const sym_node *there, int64_t step) {
    const sym_node *from[1] = {var};
    const sym_node *a = here ? sym_substitute(sc, index, from, &here, 1) : NULL;
    const sym_node *b = there ? sym_substitute(sc, index, from, &there, 1) : NULL;
    int64_t d;
    bool ok = a && b && sym_is_const(sym_sub(sc, b, a), &d) && d == step;
    sym_ctx_clear_error(sc);
    return ok;
}

/* Whether every load in the reduction's loop reads the element after its last at the next
 * step (a row's consecutive elements): lanes striding the loop read neighbouring elements. */
static bool loads_along_loop(sym_ctx *sc, const eng_kernel *k, const kast *a) {
    if (!a)
        return true;
    if (a->kind == KAST_LOAD && in_loop(sc, k, a) &&
        !index_steps(sc, a->index, k->ridx, k->ridx, sym_add_c(sc, k->ridx, 1), 1))
        return false;
    for (uint32_t i = 0; i < a->nsrc; i++) {
        if (!loads_along_loop(sc, k, a->src[i]))
            return false;
    }
    return true;
}

/* Reductions with few outputs and many elements each run one workgroup of lanes per output
 * (an item), the lanes combined through workgroup memory at the end: lanes * items at most
 * twice the device's parallelism, at least four elements per lane at the largest size. On a
 * GPU (ctx->group_rows) so do up to GROUP_ROWS_MAX outputs of rows where every load of the
 * loop reads along the row, in groups narrowed (halving, down to the device's subgroup:
 * ctx->group_rows_min_lanes) until each lane has 16 elements at least: the lanes of a
 * workgroup read neighbouring elements, where an invocation per output reads elements a row
 * apart and walks its whole row alone (a softmax's rows of 1,024, a row sum: 1.7-2.7x and
 * 3.4-4.4x faster on an H100; conv1's weight gradient, 784 pixels for 9,216 outputs, in groups
 * of 32). Shorter rows keep an invocation per output. f32, i32 and u32 accumulators only
 * (workgroup memory of other widths needs more features). */
enum { GROUP_ROWS_MAX = 65536, GROUP_ROWS_LANE_STEPS = 16 };

uint32_t eng_kernel_group_lanes(const kiln_context *ctx, const eng_kernel *k) {
    uint32_t lanes = ctx->group_lanes;
    if (k->reduction_count == 0 || k->rows || lanes < 2)
        return 0;
    for (uint32_t i = 0; i < k->reduction_count; i++) {
        const eng_reduction *r = &k->reductions[i];
        if (r->arg || (r->type != IR_F32 && r->type != IR_I32 && r->type != IR_U32))
            return 0;
    }
    int64_t items = sym_vmax(k->numel), count = sym_vmax(k->reduce_count);
    if (count >= 4 * (int64_t)lanes && items <= 2 * (int64_t)ctx->parallelism / lanes)
        return lanes;
    if (!ctx->group_rows || items > GROUP_ROWS_MAX)
        return 0;
    while (lanes > ctx->group_rows_min_lanes && count < GROUP_ROWS_LANE_STEPS * (int64_t)lanes)
        lanes /= 2;
    if (count < GROUP_ROWS_LANE_STEPS * (int64_t)lanes)
        return 0;
    for (uint32_t i = 0; i < k->reduction_count; i++) {
        if (!loads_along_loop(ctx->sym, k, k->reductions[i].value))
            return 0;
    }
    return lanes;
}

static bool tree_reads_buffer0(const kast *a) {
    if (!a)
        return false;
    if (a->kind == KAST_LOAD && a->buffer == 0)
        return true;
    for (uint32_t i = 0; i < a->nsrc; i++) {
        if (tree_reads_buffer0(a->src[i]))
            return true;
    }
    return false;
}

/* Whether k reads its output buffer (an in-place write reads its target). */
static bool reads_buffer0(const eng_kernel *k) {
    bool reads = tree_reads_buffer0(k->value);
    for (uint32_t i = 0; i < k->reduction_count; i++)
        reads = reads || tree_reads_buffer0(k->reductions[i].value);
    for (uint32_t i = 0; i < k->sibling_count; i++)
        reads = reads || tree_reads_buffer0(k->siblings[i].value);
    return reads;
}

/* Whether a load's element changes along the reduction (a load in its loop; the others are
 * made once per output and matter little). */
static bool in_loop(sym_ctx *sc, const eng_kernel *k, const kast *a) {
    return eng_kernel_varies_in_loop(sc, k, a->index);
}

/* Whether some load in the reduction's loop reads the same element for output `at` and
 * `at` + shift, at an expression of gidx (a value the outputs of a tile can share). */
static bool shares_load(sym_ctx *sc, const eng_kernel *k, const kast *a, const sym_node *at,
                        int64_t shift) {
    if (!a)
        return false;
    if (a->kind == KAST_LOAD && in_loop(sc, k, a)) {
        const sym_node *from[1] = {k->gidx}, *to[2] = {at, sym_add_c(sc, at, shift)};
        const sym_node *here = to[0] ? sym_substitute(sc, a->index, from, &to[0], 1) : NULL;
        if (here && to[1] && sym_substitute(sc, a->index, from, &to[1], 1) == here)
            return true;
        sym_ctx_clear_error(sc);
    }
    for (uint32_t i = 0; i < a->nsrc; i++) {
        if (shares_load(sc, k, a->src[i], at, shift))
            return true;
    }
    return false;
}

/* Whether a is a masked load whose element varies along the reduction's loop (a window of a
 * padded input read in place by a product). */
static bool masked_loop_load(sym_ctx *sc, const eng_kernel *k, const kast *a) {
    int64_t v;
    return a->kind == KAST_LOAD && a->valid && !(sym_is_const(a->valid, &v) && v == 1) &&
           in_loop(sc, k, a);
}

/* Whether a masked load in a varies along the reduction's loop. */
static bool masked_in_loop(sym_ctx *sc, const eng_kernel *k, const kast *a) {
    if (!a)
        return false;
    if (masked_loop_load(sc, k, a))
        return true;
    for (uint32_t i = 0; i < a->nsrc; i++) {
        if (masked_in_loop(sc, k, a->src[i]))
            return true;
    }
    return false;
}

/* The smallest of best (0: none yet) and each m (1 < m < limit, m dividing limit) such that
 * `var % m` appears in s. */
static int64_t least_period(const sym_node *s, const sym_node *var, int64_t limit, int64_t best) {
    int64_t m;
    if (sym_node_kind(s) == SYM_MOD && sym_node_src(s, 0) == var &&
        sym_is_const(sym_node_src(s, 1), &m) && m > 1 && m < limit && limit % m == 0 &&
        (!best || m < best))
        best = m;
    for (uint32_t i = 0; i < sym_node_arity(s); i++)
        best = least_period(sym_node_src(s, i), var, limit, best);
    return best;
}

/* The periods of the windows a reduction reads in place (a convolution's product over a padded
 * input): period[0], the smallest period of the output index, period[1], of the reduction
 * index, in the index or mask of a masked load in the loop (an image row of the output; a
 * kernel row of taps, `ridx % KW`); left as they are where a load has none. */
static void window_periods(sym_ctx *sc, const eng_kernel *k, const kast *a, int64_t width,
                           int64_t count, int64_t period[2]) {
    if (masked_loop_load(sc, k, a)) {
        const sym_node *var[2] = {k->gidx, k->ridx};
        int64_t limit[2] = {width, count};
        for (int t = 0; t < 2; t++)
            period[t] = least_period(a->valid, var[t], limit[t],
                                     least_period(a->index, var[t], limit[t], period[t]));
    }
    for (uint32_t i = 0; i < a->nsrc; i++)
        window_periods(sc, k, a->src[i], width, count, period);
}

/* Whether a window tile's output period is a kernel row of taps (below a SIMD row of 8,
 * shorter than the loop's step: a weight gradient's, whose step is an image row). */
static bool tap_rows(int64_t period, int64_t step) {
    return period >= 2 && period < 8 && period < step;
}

/* The columns of a window tile whose output index has the given period along its rows of
 * width and whose loop steps by `step` elements: the period, or where that is a kernel row of
 * taps (tap_rows), its smallest multiple that divides the width and is at least 8 or the width
 * (a 3 x 3 kernel's taps of one channel: each element of the output's gradient then feeds that
 * many taps). Measured on lavapipe, conv2's weight gradient in bench_ops against its GLSL
 * reference: 8 x 9 tiles 13.5-14 ms against 9.2 for 8 x 18 before pairs; with pairs, texels
 * and the fetches hoisted (ir_hoist_loads), 8 x 9 1.04-1.09 against 1.14-1.15 for 8 x 18 (ABBA
 * pairs). A forward's period is an image row, its step a kernel row: a 7 x 7 image keeps rows
 * of 7. */
static int64_t window_columns(int64_t width, int64_t period, int64_t step) {
    if (!tap_rows(period, step))
        return period;
    for (int64_t n = 2 * period; n <= width; n += period) {
        if (width % n == 0 && (n >= 8 || n == width))
            return n;
    }
    return period;
}

/* Whether m divides every value of e (the simplifier proves e % m == 0). */
static bool divides_every(sym_ctx *sc, const sym_node *e, int64_t m) {
    int64_t low;
    if (sym_ctx_status(sc) != KILN_OK)
        return false;
    bool whole = sym_is_const(sym_floormod_c(sc, e, m), &low) && low == 0;
    sym_ctx_clear_error(sc);
    return whole;
}

/* The rows of one matrix of a batch: the size of the output's last dim longer than 1 before
 * dim `last` (the row's, whose size is the width), when it is constant and the dims before it
 * are the batch (0: no such dim). A batched matmul's output (B..., M, 1, N) has M. */
static int64_t matrix_rows(sym_ctx *sc, const eng_kernel *k, uint32_t last) {
    for (uint32_t d = last; d-- > 0;) {
        int64_t size;
        if (!sym_is_const(k->dims[d], &size)) {
            /* A symbolic count of rows (batch x 196: a convolution's rows for a batch
             * Variable) divisible by a power of two m for every value: blocks of m rows, the
             * same right operand for all of them (batched_matmul probes it), tile whole. */
            for (int64_t m = 64; m >= 2; m /= 2) {
                if (divides_every(sc, k->dims[d], m))
                    return m;
            }
            return 0;
        }
        if (size != 1)
            return size;
    }
    return 0;
}

/* The loads of a reduction's loop, at output `at`, by what they share with the output a row
 * below (at + width) and the one a column right (at + 1): bit 0, some load is the same a row
 * below but not a column right (a matmul's right operand); bit 1, the converse (its left). */
static uint32_t matmul_loads(sym_ctx *sc, const eng_kernel *k, const kast *a, const sym_node *at,
                             int64_t width) {
    if (!a)
        return 0;
    uint32_t found = 0;
    if (a->kind == KAST_LOAD && in_loop(sc, k, a)) {
        const sym_node *from[1] = {k->gidx},
                       *to[3] = {at, sym_add_c(sc, at, width), sym_add_c(sc, at, 1)};
        const sym_node *index[3] = {NULL, NULL, NULL};
        for (int i = 0; i < 3 && to[i]; i++)
            index[i] = sym_substitute(sc, a->index, from, &to[i], 1);
        if (index[0] && index[1] && index[2]) {
            bool rows = index[1] == index[0], cols = index[2] == index[0];
            found |= (rows && !cols ? 1u : 0u) | (cols && !rows ? 2u : 0u);
        }
        sym_ctx_clear_error(sc);
    }
    for (uint32_t i = 0; i < a->nsrc; i++)
        found |= matmul_loads(sc, k, a->src[i], at, width);
    return found;
}

/* Whether the reduction is a batch of matmuls: output gidx = (batch R + row) W + col, the rows
 * of one matrix sharing a load (its right operand) and its columns another (its left), where
 * the flat probe gidx + W sees the right operand's batch term gidx // (R W) change at every
 * matrix's last row (a broadcast batch, stride 0, has no such term). A load that every output
 * of a matrix shares (a convolution's weights, whose other load no output shares) is not a
 * matmul's. batches: the largest batch count. */
static bool batched_matmul(sym_ctx *sc, const eng_kernel *k, int64_t batches, int64_t rows,
                           int64_t width) {
    if (rows < 2 || width < 2 || batches < 1)
        return false;
    char names[3][48]; /* a Variable's name is its identity: the bounds go in it */
    snprintf(names[0], sizeof names[0], "mm_probe_batch:%lld", (long long)(batches - 1));
    snprintf(names[1], sizeof names[1], "mm_probe_row:%lld", (long long)(rows - 2));
    snprintf(names[2], sizeof names[2], "mm_probe_col:%lld", (long long)(width - 2));
    const sym_node *batch = sym_var(sc, names[0], 0, batches - 1);
    const sym_node *row = sym_var(sc, names[1], 0, rows - 2);
    const sym_node *col = sym_var(sc, names[2], 0, width - 2);
    const sym_node *at =
        sym_add(sc, sym_mul_c(sc, sym_add(sc, sym_mul_c(sc, batch, rows), row), width), col);
    uint32_t found = 0;
    for (uint32_t i = 0; i < k->reduction_count && at; i++)
        found |= matmul_loads(sc, k, k->reductions[i].value, at, width);
    sym_ctx_clear_error(sc);
    return found == 3;
}

/* The buffers a's loads read, as bits of *mask. */
static void buffers_read(const kast *a, uint32_t *mask) {
    if (!a)
        return;
    if (a->kind == KAST_LOAD && a->buffer < 32)
        *mask |= 1u << a->buffer;
    for (uint32_t i = 0; i < a->nsrc; i++)
        buffers_read(a->src[i], mask);
}

/* The loads in a's tree (a shared subtree counted at each use), counting up to cap. */
static uint32_t loads_in(const kast *a, uint32_t cap) {
    uint32_t n = a && a->kind == KAST_LOAD;
    for (uint32_t i = 0; a && i < a->nsrc && n < cap; i++)
        n += loads_in(a->src[i], cap - n);
    return n;
}

/* Whether some load of an elementwise kernel reads one element for every output of a row of
 * width (a broadcast operand, probed with the row and column as Variables): then more outputs
 * per invocation share that load. */
static bool row_broadcast(sym_ctx *sc, const eng_kernel *k, const kast *a, int64_t rows,
                          int64_t width) {
    if (!a)
        return false;
    if (a->kind == KAST_LOAD) {
        char names[2][48]; /* a Variable's name is its identity: the bounds go in it */
        snprintf(names[0], sizeof names[0], "ew_probe_row:%lld", (long long)(rows - 1));
        snprintf(names[1], sizeof names[1], "ew_probe_col:%lld", (long long)(width - 1));
        const sym_node *row = sym_var(sc, names[0], 0, rows - 1);
        const sym_node *col = sym_var(sc, names[1], 0, width - 1);
        const sym_node *from[1] = {k->gidx}, *to[1] = {sym_add(sc, sym_mul_c(sc, row, width), col)};
        const sym_node *at = to[0] ? sym_substitute(sc, a->index, from, to, 1) : NULL;
        const sym_node *cols[1] = {col}, *zero[1] = {sym_const(sc, 0)};
        bool shared = at && zero[0] && sym_substitute(sc, at, cols, zero, 1) == at;
        sym_ctx_clear_error(sc);
        if (shared)
            return true;
    }
    for (uint32_t i = 0; i < a->nsrc; i++) {
        if (row_broadcast(sc, k, a->src[i], rows, width))
            return true;
    }
    return false;
}

/* Whether some load in the reduction's loop reads four consecutive elements for four
 * consecutive outputs 4 t .. 4 t + 3 (probe: a Variable t): then a tile along the outputs
 * reads vectors. */
static bool steps_by_one(sym_ctx *sc, const eng_kernel *k, const kast *a, const sym_node *probe) {
    if (!a)
        return false;
    if (a->kind == KAST_LOAD && in_loop(sc, k, a)) {
        const sym_node *first = sym_mul_c(sc, probe, 4);
        bool ok = true;
        for (int64_t c = 1; c < 4 && ok; c++)
            ok = index_steps(sc, a->index, k->gidx, first, sym_add_c(sc, first, c), c);
        if (ok)
            return true;
    }
    for (uint32_t i = 0; i < a->nsrc; i++) {
        if (steps_by_one(sc, k, a->src[i], probe))
            return true;
    }
    return false;
}

/* Output tiles (CPU devices: lavapipe vectorises across invocations, so work per invocation
 * amortises its per-invocation cost; GPUs keep one output per invocation for coalescing, and
 * a small register tile for reductions): with constant sizes, every output row of width W (the
 * last dim longer than 1) split into tile_n columns, and, for reductions with a 2-D output,
 * tile_m rows at a time, the loads that do not depend on the row (or column) shared. An
 * elementwise kernel whose last dim tile_n does not divide tiles its flat index instead; one
 * that reads a single buffer takes tile_ew_one columns, one with a load shared by a row's
 * outputs (a broadcast operand) tile_ew_shared. The
 * tile shrinks until the items keep the device busy (parallelism). */
enum { LONG_LOOP = 256 };  /* elements combined per output that make a reduction's loop long */
enum { SHORT_WINDOW = 8 }; /* at most this many: a window of a pool, tiled as elementwise */

/* Whether a row of width columns that a tile of tn does not divide is short enough to be one
 * tile on a CPU (ctx->whole_short_rows: rows of 14 or 28 for tiles of 8). */
static bool short_row(const kiln_context *ctx, int64_t width, int64_t tn) {
    return ctx->whole_short_rows && width % tn != 0 && 2 * width >= tn && width <= 4 * tn;
}

/* The largest divisor of width that is at most n (1 for n < 2). */
static int64_t divisor_at_most(int64_t width, int64_t n) {
    while (n > 1 && width % n != 0)
        n--;
    return n > 1 ? n : 1;
}

void eng_kernel_tile(const kiln_context *ctx, const eng_kernel *k, eng_program *p) {
    p->tile_m = p->tile_n = 1;
    p->block_m = p->block_n = 1;
    p->tile_width = 0;
    p->row_loop = false;
    p->per_item = 1;
    p->window_taps = 0;
    int64_t numel, width = 1;
    if (k->rows && sym_is_const(k->dims[k->ndim - 1], &width) && width > 0) {
        /* row mode: an invocation per row, its tiles of tile_n in a loop */
        int64_t tn = ctx->tile_ew;
        while (tn > 1 && width % tn != 0)
            tn /= 2;
        p->tile_n = (uint32_t)tn;
        p->tile_width = width;
        p->row_loop = true;
        p->per_item = (uint64_t)width;
        return;
    }
    /* A symbolic size (a batch bound per call) tiles only in whole tiles for every value: an
     * elementwise kernel along constant rows (or its flat index, where the tile divides every
     * count), a reduction as a batch of constant matrices (or of blocks of rows: a power of
     * two dividing the rows). The tiles are chosen for its largest value, and every value's
     * items are its count over the tile, so one kernel serves them all. */
    bool constant = sym_is_const(k->numel, &numel);
    if (!constant)
        numel = sym_vmax(k->numel);
    if (p->group_lanes || numel <= 1)
        return;
    /* A short window per output (a pool's 2 x 2, up to SHORT_WINDOW elements, combined in one
     * step): its outputs tile as an elementwise kernel's do, an arg reduction's too (each
     * output keeps its own index, lower_stage); a longer arg reduction is not tiled. */
    int64_t window = 0;
    bool short_window =
        k->reduction_count > 0 && sym_is_const(k->reduce_count, &window) && window <= SHORT_WINDOW;
    bool arg = false;
    for (uint32_t i = 0; i < k->reduction_count; i++)
        arg = arg || k->reductions[i].arg;
    if (arg && !short_window)
        return;
    uint32_t last = k->ndim;
    while (last-- > 0) {
        int64_t size;
        if (!sym_is_const(k->dims[last], &size))
            return;
        if (size != 1) {
            width = size;
            break;
        }
    }
    if (!constant && last >= k->ndim)
        return;
    /* period: the rows that a tile (and a block of tiles) may span, those of a matrix of the
     * batch when the loads are shared only within one */
    int64_t rows = numel / width, period = rows, tm = 1, tn = ctx->tile_ew;
    uint32_t read = 0;
    buffers_read(k->value, &read);
    if (k->reduction_count == 0 && read != 0 && (read & (read - 1)) == 0)
        tn = ctx->tile_ew_one; /* one buffer read (a copy, a unary op) */
    if (k->reduction_count > 0) {
        /* rows of a tile only pay when a load is the same along a column (matmul's right
         * operand); then columns too (its left operand along a row). A batch (a matmul's batch
         * dims, the right operand's batch stride nonzero) shares within one matrix only. */
        bool share = false, vectors = false;
        for (uint32_t i = 0; i < k->reduction_count && rows > 1 && constant; i++)
            share = share || shares_load(ctx->sym, k, k->reductions[i].value, k->gidx, width);
        int64_t matrix = last < k->ndim ? matrix_rows(ctx->sym, k, last) : 0;
        if (!constant || !share) {
            share = matrix > 1 && rows % matrix == 0 &&
                    batched_matmul(ctx->sym, k, rows / matrix, matrix, width);
            if (share)
                period = matrix;
        }
        if (!share && width % 4 == 0) { /* else columns pay only when their loads are vectors
                                         * (then wider: nothing else is in registers; so too
                                         * along the constant rows of a symbolic count: a
                                         * linear layer's input gradient, batch x 1568 over 10) */
            char name[48];
            snprintf(name, sizeof name, "tile_probe:%lld", (long long)(numel / 4 - 1));
            const sym_node *probe = sym_var(ctx->sym, name, 0, numel / 4 - 1);
            for (uint32_t i = 0; i < k->reduction_count && probe; i++)
                vectors = vectors || steps_by_one(ctx->sym, k, k->reductions[i].value, probe);
        }
        bool as_ew = !share && !vectors && short_window;
        /* A symbolic count of short rows whose outputs share a load along the row (a linear
         * layer's forward, batch x 10 over 1568: its input's row read once per step for all 10
         * columns): one row per item, a tile that divides every count. */
        bool whole_row = false;
        bool short_rows = !constant && !share && !vectors && !as_ew && ctx->whole_short_rows &&
                          width > 1 && width <= 2 * (int64_t)ctx->tile_cols;
        for (uint32_t i = 0; i < k->reduction_count && short_rows && !whole_row; i++)
            whole_row = row_broadcast(ctx->sym, k, k->reductions[i].value, rows, width);
        if (!constant && !share && !vectors && !as_ew && !whole_row)
            return;
        tm = share ? ctx->tile_rows : 1;
        tn = share       ? ctx->tile_cols
             : vectors   ? ctx->tile_vector_cols
             : as_ew     ? tn
             : whole_row ? width
                         : 1;
        if (as_ew && short_row(ctx, width, tn))
            tn = width; /* as an elementwise kernel's, below */
        /* an arg reduction keeps an index per output too: a row of 14 in halves of 7 (conv1's
         * pool with its index on lavapipe: whole rows no faster than untiled) */
        if (as_ew && arg && tn > (int64_t)ctx->tile_ew)
            tn = divisor_at_most(width, ctx->tile_ew);
    } else if (short_row(ctx, width, tn) && loads_in(k->value, 2) >= 2) {
        /* a short row (14, 28 columns) that the tile does not divide, in a kernel of several
         * loads per output: one row per item, its indices affine along the row, where tiles of
         * the flat index redo every output's division into dims (the fold of conv2's input
         * gradient, nine masked loads per output: 2.7 -> 2.3 ms on lavapipe; conv2's pool
         * backward 0.87 -> 0.75 ms; conv1's, rows of 28, 1.58-1.61 -> 1.27 ms). A copy (one
         * load) keeps flat tiles and their aligned vector stores: conv2's im2col copy took 8%
         * longer in rows. */
        tn = width;
    } else if (width % tn != 0) {
        /* the flat index in tiles of tn: a symbolic count only where tn divides every value
         * (batch x 28,224 by 8: a convolution's windows for a batch Variable) */
        while (!constant && tn > 1 && !divides_every(ctx->sym, k->numel, tn))
            tn /= 2;
        width = numel;
        rows = period = 1;
    } else if (ctx->tile_ew_shared > tn && width % ctx->tile_ew_shared == 0 && rows > 1 &&
               row_broadcast(ctx->sym, k, k->value, rows, width)) {
        tn = ctx->tile_ew_shared;
    }
    while (tn > 1 && width % tn != 0)
        tn /= 2;
    /* Windows read in place (a convolution's product over a padded input, masked at every
     * step): tiles of whole output rows (the smallest period of the output index in the
     * windows' index or mask, an image row: 14 of conv2's 196 pixels) and about 16 rows,
     * whose loop takes a kernel row of taps per step (the reduction index's period,
     * stage_unroll): tap kw + 1 of output column j reads tap kw's element of column j + 1, so
     * one load serves up to KW outputs of the row (lower_load), the row's ends are padding
     * that the masks fold to zero, and the channels' weights along the tile's column are
     * vectors where laid out (C KH KW, O) (engine/front/nn.c). Rows as many as keep a CPU
     * busy. conv2's input gradient in the training step on lavapipe: 11.4 -> 5.2 ms in
     * alternating runs (16 x 4 tiles of one tap before; 8 x 14 tiles: 6.2), its inference
     * forward 12.8 -> 5.7. The weight gradient is the same pattern transposed: its output
     * (O, C KH KW) has the period of a kernel row (KW taps) and its loop over the pixels that
     * of an image row, so a step is an image row (up to WINDOW_UNROLL pixels) and the tile's
     * row the taps of a channel (window_columns): pixel j + 1 of tap kw reads pixel
     * j's element of tap kw + 1, and each of the output's gradient elements, loaded once per
     * step, feeds the whole row of taps; both read as pairs (lower_step_pair). conv2's weight
     * gradient in the training step: a window copy and a product over it, 3.6 + 8.4 ms, ->
     * 6.0-6.4 ms in tiles of 8 x 18 (8 x 9 since its fetches go first, below); conv1's, which
     * read its windows in place in tiles of 4 x 9 steps of 4 pixels, 2.6 -> 1.5 ms in steps of
     * 28 (alternating runs). */
    int64_t count = 0, wp[2] = {0, 0};
    bool windows =
        ctx->window_rows && tm > 1 && k->reduce_count && sym_is_const(k->reduce_count, &count);
    for (uint32_t i = 0; windows && i < k->reduction_count; i++)
        window_periods(ctx->sym, k, k->reductions[i].value, width, count, wp);
    int64_t wn = window_columns(width, wp[0], wp[1]);
    /* Tiles of taps at most half as large (8 x 9, not 16 x 9): conv2's weight gradient in
     * bench_ops 1.14 -> 1.09 of its reference's time (ABBA pairs; 4 x 9 as 8 x 9, 2 x 9 1.3) */
    int64_t most = tap_rows(wp[0], wp[1]) ? WINDOW_TILE / 2 : WINDOW_TILE;
    /* Unrolled windows (kernel.c build_window: several reductions, an accumulator each per
     * output) in tiles of half as many outputs: conv1's within its pool on lavapipe (four
     * reductions), 8 x 14 tiles ran 1.47-1.52x bench_ops' hand-written reference and took
     * 0.8-1.0 s to compile at the first dispatch; 16 x 14 1.21-1.29x but 2-3 s (the training
     * step's first step 0.3 -> 2.8 s); 4 x 14 1.52-1.56x, 0.4-0.5 s */
    most /= k->reduction_count > 1 ? 2 : 1;
    if (wn > 1 && wp[1] > 1 && wp[1] <= WINDOW_UNROLL && 2 * wn <= most) {
        int64_t wm = 2;
        while (wm * 2 * wn <= most)
            wm *= 2;
        while (wm > 1 && (period % wm != 0 || numel / (wm * wn) < (int64_t)ctx->parallelism_long))
            wm /= 2;
        if (wm > 1) {
            p->tile_m = (uint32_t)wm;
            p->tile_n = (uint32_t)wn;
            p->tile_width = width;
            p->per_item = (uint64_t)(wm * wn);
            p->window_taps = (uint32_t)wp[1];
            return;
        }
    }
    /* A tile of shared loads narrowed by its row's width (196 columns: 4 wide) takes twice the
     * rows for a short loop (the per-image convolution products of the training step, 16 x 4
     * instead of 8 x 4: forward 5%, input gradient 13% faster on lavapipe; a long loop's 16
     * rows spilled: 7x slower), and for a long one whose loads along a column are masked, each
     * then feeding twice the multiply-adds (conv2's input gradient as a convolution of the
     * output's gradient, 288 taps: 8.7-9.0 -> 6.8-7.0 ms on lavapipe) */
    bool masked = false;
    for (uint32_t i = 0; i < k->reduction_count && tm > 1 && tn > 1 && tn < ctx->tile_cols; i++)
        masked = masked || masked_in_loop(ctx->sym, k, k->reductions[i].value);
    if (tm > 1 && tn > 1 && tn < ctx->tile_cols && k->reduce_count &&
        (sym_vmax(k->reduce_count) < LONG_LOOP || masked) && tm * 2 * tn <= MAX_TILE)
        tm *= 2;
    while (tm > 1 && period % tm != 0)
        tm /= 2;
    /* Items enough to keep the device busy: fewer where each runs a long loop (a CPU's
     * figure; conv2's weight gradient in the training step, 8 x 8 tiles instead of 2 x 8:
     * 2.4x faster on lavapipe) */
    int64_t busy = (int64_t)ctx->parallelism;
    if (k->reduction_count > 0 && k->reduce_count && sym_vmax(k->reduce_count) >= LONG_LOOP)
        busy = (int64_t)ctx->parallelism_long;
    while (tm * tn > 1 && numel / (tm * tn) < busy) {
        if (tm >= tn) {
            tm /= 2;
        } else { /* to a divisor of the row: a whole short row of 49 as 7, never 24 or 12 */
            tn = divisor_at_most(width, tn / 2);
        }
    }
    /* A reduction's short row that the halving left in tiles under half the columns wanted
     * (9 in 9 tiles of 1, 10 in 5 of 2) is one tile wide, its rows fewer to fit: conv1's
     * weight gradient per image (16 x 9 over 784) in tiles of 4 x 9 instead of 8 x 1, with
     * runtime.c's narrower workgroups 1.7 -> 1.3 ms on lavapipe; the linear layer's weight
     * gradient (1568 x 10) 0.80 -> 0.66 ms. A CPU's rule (ctx->whole_short_rows): on an H100
     * bench_ops' conv2d weight gradient took 2x the time with it. */
    if (ctx->whole_short_rows && k->reduction_count > 0 && tn * 2 < (int64_t)ctx->tile_cols &&
        width > tn && width <= 2 * (int64_t)ctx->tile_cols) {
        tn = width;
        while (tm > 1 && tm * tn > MAX_TILE)
            tm /= 2;
    }
    if (tm * tn <= 1 || tm * tn > MAX_TILE)
        return;
    p->tile_m = (uint32_t)tm;
    p->tile_n = (uint32_t)tn;
    p->tile_width = width;
    p->per_item = (uint64_t)(tm * tn);
    /* A tile that shares loads along columns: items in blocks (lower_tile), for one right
     * operand shared by all rows. A batch's matrices each have their own, first read from
     * memory by their first tile row: there consecutive items along a row (no blocks) load
     * more distinct lines of it at once (98 x (32 x 128) @ (128 x 144) on lavapipe: 1.3x the
     * time of its flat twin without blocks, 1.5-1.9x in blocks of 2 or 4 tile rows x 2). */
    if (tm > 1 && period == rows) {
        int64_t bm = ctx->tile_block_rows, bn = ctx->tile_block_cols;
        while (bm > 1 && (rows / tm) % bm != 0)
            bm /= 2;
        while (bn > 1 && (width / tn) % bn != 0)
            bn /= 2;
        if (bm > 1 && bn > 1) {
            p->block_m = (uint32_t)bm;
            p->block_n = (uint32_t)bn;
        }
    }
}

/* q[0] = v / d, q[1] = v % d for v >= 0 (32-bit indices: the unsigned forms). */
static void div_mod(ir_kernel *ir, ir_value v, int64_t d, ir_value q[2]) {
    ir_type it = ir->index_type;
    if (it == IR_I32) {
        ir_value uv = ir_cast(ir, IR_U32, v), ud = ir_const_i(ir, IR_U32, d);
        q[0] = ir_cast(ir, IR_I32, ir_alu(ir, IR_DIV, IR_U32, uv, ud, IR_NONE));
        q[1] = ir_cast(ir, IR_I32, ir_alu(ir, IR_MOD, IR_U32, uv, ud, IR_NONE));
    } else {
        ir_value c = ir_const_i(ir, it, d);
        q[0] = ir_alu(ir, IR_DIV, it, v, c, IR_NONE);
        q[1] = ir_alu(ir, IR_MOD, it, v, c, IR_NONE);
    }
}

/* The tile Variables and their values from the item (gid): row gid / (W / tile_n), column
 * gid % (W / tile_n), or in blocks of block_m x block_n tiles (the blocks in row-major order,
 * and the tiles in each); output (di, dj) of the tile is gidx (row * tile_m + di) * W +
 * column * tile_n + dj. */
static void lower_tile(lowering *l, const eng_program *p, int64_t items) {
    ir_kernel *ir = l->ir;
    sym_ctx *sc = l->ctx->sym;
    int64_t columns = p->tile_width / p->tile_n;
    int64_t max[2] = {p->row_loop ? items - 1 : items / columns - 1, columns - 1};
    static const char *const names[2] = {"tile_row", "tile_col"};
    for (int t = 0; t < 2; t++) {
        char name[48];
        snprintf(name, sizeof name, "%s:%lld", names[t], (long long)max[t]);
        l->tile_var[t] = sym_var(sc, name, 0, max[t]);
    }
    ir_type it = ir->index_type;
    if (p->row_loop) { /* the row is the item; the column, the row loop's counter (later) */
        l->tile_value[0] = l->gid;
        l->tile_value[1] = IR_NONE;
    } else if (p->block_m > 1) {
        /* block gid / (bm bn) of the blocks in row-major order (columns / bn per row), item
         * w = gid % (bm bn) of its block at row w / bn, column w % bn */
        int64_t bm = p->block_m, bn = p->block_n;
        ir_value item[2], block[2], at[2];
        div_mod(ir, l->gid, bm * bn, item);
        div_mod(ir, item[0], columns / bn, block);
        div_mod(ir, item[1], bn, at);
        for (int t = 0; t < 2; t++) {
            ir_value corner =
                ir_alu(ir, IR_MUL, it, block[t], ir_const_i(ir, it, t ? bn : bm), IR_NONE);
            l->tile_value[t] = ir_alu(ir, IR_ADD, it, corner, at[t], IR_NONE);
        }
    } else {
        div_mod(ir, l->gid, columns, l->tile_value);
    }
    l->outputs = p->tile_m * p->tile_n;
    l->tile_n = p->tile_n;
    for (uint32_t di = 0; di < p->tile_m; di++) {
        for (uint32_t dj = 0; dj < p->tile_n; dj++) {
            const sym_node *row = sym_add_c(sc, sym_mul_c(sc, l->tile_var[0], p->tile_m), di);
            const sym_node *col = sym_add_c(sc, sym_mul_c(sc, l->tile_var[1], p->tile_n), dj);
            l->out_gidx[di * p->tile_n + dj] = sym_add(sc, sym_mul_c(sc, row, p->tile_width), col);
        }
    }
    if (p->share_lanes) { /* row `lane` of the tile, column 0 */
        char name[48];
        snprintf(name, sizeof name, "share_lane:%u", p->share_lanes - 1);
        l->lane_var = sym_var(sc, name, 0, p->share_lanes - 1);
        const sym_node *row = sym_add(sc, sym_mul_c(sc, l->tile_var[0], p->tile_m), l->lane_var);
        const sym_node *col = sym_mul_c(sc, l->tile_var[1], p->tile_n);
        l->lane_gidx = sym_add(sc, sym_mul_c(sc, row, p->tile_width), col);
        if (!l->lane_gidx && ir->status == KILN_OK)
            ir->status = KILN_ERROR_INTERNAL;
    }
    for (uint32_t o = 0; o < l->outputs; o++) {
        if (!l->out_gidx[o] && ir->status == KILN_OK)
            ir->status = sym_ctx_status(sc) != KILN_OK ? sym_ctx_status(sc) : KILN_ERROR_INTERNAL;
    }
}

/* Team kernels (ir.h: loads shared in a subgroup, lower_shared_load): on a device whose
 * subgroups are ctx->share_lanes wide, a tile of as many rows that shares loads along its
 * columns, without bounds checks (every lane reaches every SHARE), whose consecutive items
 * run along one tile row in whole teams (a block's width, or the row's tiles, a multiple of
 * the team) and whose workgroups are whole teams. */
void eng_kernel_share(const kiln_context *ctx, eng_program *p) {
    uint32_t s = ctx->share_lanes;
    p->share_lanes = 0;
    if (s < 2 || !p->unchecked || p->row_loop || p->group_lanes || p->tile_m != s ||
        p->tile_n < 2 || p->workgroup_size % s != 0)
        return;
    int64_t run = p->block_m > 1 ? (int64_t)p->block_n : p->tile_width / p->tile_n;
    if (run % s == 0)
        p->share_lanes = s;
}

/* The sibling outputs of outputs first .. first + n - 1 (one output, or a vector store's run
 * of the main output): each at its output's own element (the invocation's, untiled), one
 * vector store per sibling where a run's elements are consecutive from a multiple of n, else
 * one store each. */
static void store_siblings(lowering *l, uint32_t first, uint32_t n, bool tiled) {
    const eng_kernel *k = l->k;
    ir_kernel *ir = l->ir;
    const sym_node *own[8];
    for (uint32_t c = 0; c < n; c++)
        own[c] = tiled ? l->out_gidx[first + c] : NULL;
    bool vector = n > 1 && aligned_run(l->ctx->sym, own, n);
    for (uint32_t j = 0; j < k->sibling_count; j++) {
        const eng_sibling *sib = &k->siblings[j];
        ir_value sv[8];
        for (uint32_t c = 0; c < n; c++) {
            l->out = first + c;
            sv[c] = lower_value(l, sib->value);
            if (sv[c] != IR_NONE && ir->insts.data[sv[c]].type != k->buffer_types[sib->buffer])
                sv[c] = ir_cast(ir, k->buffer_types[sib->buffer], sv[c]);
        }
        if (vector) {
            ir_store_vector(ir, sib->buffer, lower_sym(l, own[0]), sv, n);
            continue;
        }
        for (uint32_t c = 0; c < n; c++)
            ir_store(ir, sib->buffer, own[c] ? lower_sym(l, own[c]) : l->gid, sv[c]);
    }
    l->out = first + n;
}

/* The stores of every output of the item (a tile), in runs of four (eight) as vectors where
 * they can, each run's siblings after it. */
static void lower_outputs(lowering *l, bool tiled) {
    const eng_kernel *k = l->k;
    ir_kernel *ir = l->ir;
    uint32_t group_lanes = ir->group_lanes;
    /* An in-place write reads its output buffer at the elements it stores, each before it is
     * stored: as vectors too (an in-place add on lavapipe, 4M floats: 5.5 -> 2.8 ms), and so
     * are the sibling outputs that sit at the same elements (an optimizer's moments). */
    bool vector_stores = tiled && ir_vector_type(k->buffer_types[0]);
    for (uint32_t j = 0; j < k->sibling_count && vector_stores; j++)
        vector_stores = ir_vector_type(k->buffer_types[k->siblings[j].buffer]);
    l->vector_out = vector_stores;
    for (l->out = 0; l->out < l->outputs;) {
        const sym_node *run[8];
        uint32_t w = 1;
        int step = vector_stores
                       ? widest_run(l, k->out_index ? k->out_index : k->gidx, run, &w, vector_run)
                       : 0;
        uint32_t n = step != 0 ? w : 1;
        ir_value v[8];
        for (uint32_t c = 0; c < n; c++, l->out++) {
            v[c] = lower_value(l, k->value);
            if (v[c] != IR_NONE && ir->insts.data[v[c]].type != k->out_type)
                v[c] = ir_cast(ir, k->out_type, v[c]);
        }
        if (n > 1) { /* a flipped destination stores the run in reverse */
            ir_value in_order[8];
            for (uint32_t c = 0; c < n; c++)
                in_order[c] = v[step > 0 ? c : n - 1 - c];
            note_vector(l, k->out_index, n);
            ir_store_vector(ir, 0, lower_sym(l, run[step > 0 ? 0 : n - 1]), in_order, n);
            store_siblings(l, l->out - n, n, tiled);
            continue;
        }
        l->out--;
        if (group_lanes) /* lane 0 stores the item's result */
            ir_if(ir, ir_alu(ir, IR_EQ, IR_BOOL, l->lane, zero(ir, ir->index_type), IR_NONE));
        ir_value at = k->out_index ? lower_index(l, k->out_index)
                      : tiled      ? lower_sym(l, l->out_gidx[l->out])
                                   : l->gid;
        ir_store(ir, 0, at, v[0]);
        store_siblings(l, l->out, 1, tiled); /* moves on to the next output */
        if (group_lanes)
            ir_endif(ir);
    }
    l->out = 0;
    l->vector_out = false;
}

/* Row mode's loop over the row's tiles (the tile column Variable is the tile's column),
 * per_pass tiles per pass (the loop budget): tile j * per_pass + t at step t of pass j,
 * checked against the row's end where per_pass does not divide the columns. Each tile has its
 * own memo (its column differs, and values inside a check are not visible after it). */
static void lower_row_loop(lowering *l, int64_t columns, uint32_t per_pass) {
    ir_kernel *ir = l->ir;
    ir_type it = ir->index_type;
    base_map outer = l->memo;
    ir_value j = ir_range(ir, ir_const_i(ir, it, (columns + per_pass - 1) / per_pass));
    for (uint32_t t = 0; t < per_pass; t++) {
        base_map_init(&l->memo, &l->ctx->alloc);
        ir_value column = j;
        if (per_pass > 1) {
            ir_value first = ir_alu(ir, IR_MUL, it, j, ir_const_i(ir, it, per_pass), IR_NONE);
            column = ir_alu(ir, IR_ADD, it, first, ir_const_i(ir, it, t), IR_NONE);
        }
        bool checked = t > 0 && columns % per_pass != 0;
        if (checked)
            ir_if(ir, ir_alu(ir, IR_LT, IR_BOOL, column, ir_const_i(ir, it, columns), IR_NONE));
        l->tile_value[1] = column;
        lower_outputs(l, true);
        if (checked)
            ir_endif(ir);
        base_map_finish(&l->memo);
    }
    l->memo = outer;
    ir_endrange(ir);
}

/* a / m rounded down (m > 0). */
static int64_t floor_div(int64_t a, int64_t m) {
    return a >= 0 ? a / m : -((-a + m - 1) / m);
}

/* The aligned forms of the lifted offsets p aligns: V = align * W + r, W over
 * [ceil((min - r) / align), floor((max - r) / align)] (named for V, its alignment and
 * residue, whose name holds V's range). */
static void align_offsets(lowering *l, const eng_program *p) {
    const eng_kernel *k = l->k;
    sym_ctx *sc = l->ctx->sym;
    for (uint32_t i = 0; i < k->param_count; i++) {
        int64_t m = p->align[i], r, lo, hi;
        const char *name;
        if (m < 2 || !(k->offset_params & (1u << i)) ||
            !sym_var_info(k->params[i], &name, &lo, &hi))
            continue;
        r = p->residue[i] % m;
        int64_t wlo = -floor_div(r - lo, m), whi = floor_div(hi - r, m);
        char wname[96];
        snprintf(wname, sizeof wname, "%s/%lld+%lld", name, (long long)m, (long long)r);
        const sym_node *w = wlo <= whi ? sym_var(sc, wname, wlo, whi) : NULL;
        const sym_node *to = sym_add_c(sc, sym_mul_c(sc, w, m), r);
        if (!to) { /* out of memory in the symbolic context, most likely: it says */
            if (l->ir->status == KILN_OK)
                l->ir->status =
                    sym_ctx_status(sc) != KILN_OK ? sym_ctx_status(sc) : KILN_ERROR_INTERNAL;
            continue;
        }
        l->aligned_var[i] = w;
        l->aligned_from[l->aligned_count] = k->params[i];
        l->aligned_to[l->aligned_count++] = to;
    }
}

kiln_status eng_kernel_lower(kiln_context *ctx, const eng_kernel *k, const eng_program *p,
                             ir_kernel *ir, uint8_t *used) {
    uint32_t group_lanes = p->group_lanes;
    bool narrow = fits_i32(k->numel) && fits_i32(k->reduce_count) &&
                  fits_i32_wrapping(k->out_index, indices_fit(k, 0)) && tree_fits_i32(k, k->value);
    for (uint32_t i = 0; i < k->reduction_count; i++)
        narrow = narrow && tree_fits_i32(k, k->reductions[i].value);
    /* the loop rounds the count up to whole steps of (at most) MAX_UNROLL * lanes elements */
    narrow = narrow && (!k->reduce_count ||
                        sym_vmax(k->reduce_count) <=
                            INT32_MAX - (int64_t)MAX_UNROLL * (group_lanes ? group_lanes : 1));
    ir_kernel_init(ir, &ctx->alloc, narrow ? IR_I32 : IR_I64);
    for (uint32_t i = 0; i < k->buffer_count; i++)
        ir_buffer_add(ir, k->buffer_types[i]);
    for (uint32_t i = 0; i < k->param_count; i++)
        ir_param(ir, i); /* declares every parameter, in order */
    ir->group_lanes = group_lanes;
    ir->share_lanes = p->share_lanes;
    loop_plan plan;
    plan_loops(ctx, k, p, &plan);
    lowering l = {.ctx = ctx,
                  .k = k,
                  .ir = ir,
                  .ridx = IR_NONE,
                  .lane = IR_NONE,
                  .outputs = 1,
                  .plan = &plan,
                  .window_taps = p->window_taps};
    /* An in-place write reads its target through a read-only binding of the same storage,
     * on a device that reads such bindings as texels (the alias's bit of texel_storages,
     * runtime.c): each element is read before it is stored, by the invocation that stores
     * it, and a texel fetch beats the per-lane load of a storage buffer on lavapipe. */
    if ((p->texel_storages >> k->buffer_count & 1) && k->buffer_count + 1 < IR_MAX_BUFFERS &&
        ir_type_bits(k->buffer_types[0]) == 32 && reads_buffer0(k))
        l.read0 = ir_buffer_add(ir, k->buffer_types[0]);
    align_offsets(&l, p);
    base_map_init(&l.memo, &ctx->alloc);
    l.gid = ir_global_id(ir);
    if (group_lanes || p->share_lanes)
        l.lane = ir_lane(ir);
    bool tiled = p->per_item > 1 || p->row_loop;
    int64_t numel = 0;
    /* Tiles are chosen for constant sizes, and for a symbolic batch of constant matrices or
     * rows (eng_kernel_tile; row mode's rows of a constant size, per_item), whose items are
     * numel / per_item for every bound value: the tile Variables then range over the
     * largest. */
    bool constant = sym_is_const(k->numel, &numel);
    if (!constant)
        numel = sym_vmax(k->numel);
    int64_t items = numel / (int64_t)(p->per_item ? p->per_item : 1);
    if (!p->unchecked) { /* in a group kernel, alike for the item's lanes */
        const sym_node *count = tiled && !constant
                                    ? sym_floordiv_c(ctx->sym, k->numel, (int64_t)p->per_item)
                                    : k->numel;
        if (!count && ir->status == KILN_OK)
            ir->status = KILN_ERROR_OUT_OF_HOST_MEMORY; /* the symbolic context says */
        ir_value n = tiled && constant ? ir_const_i(ir, ir->index_type, items)
                     : count           ? lower_sym(&l, count)
                                       : IR_NONE;
        ir_if(ir, ir_alu(ir, IR_LT, IR_BOOL, l.gid, n, IR_NONE));
    }
    if (tiled && ir->status == KILN_OK)
        lower_tile(&l, p, items);
    if (p->row_loop) { /* the row's reductions once (output 0's), then a loop over its tiles */
        l.outputs = 1;
        if (k->reduction_count > 0)
            lower_reductions(&l);
        l.outputs = p->tile_n;
        for (uint32_t o = 1; o < l.outputs; o++)
            memcpy(l.results[o], l.results[0], sizeof l.results[0]);
        lower_row_loop(&l, plan.columns, plan.row_tiles);
    } else {
        if (k->reduction_count > 0)
            lower_reductions(&l);
        lower_outputs(&l, tiled);
    }
    if (!p->unchecked)
        ir_endif(ir);
    base_map_finish(&l.memo);
    if (used)
        memcpy(used, l.used, sizeof l.used);
    if (ir->status != KILN_OK && sym_ctx_status(ctx->sym) != KILN_OK) {
        /* A symbolic constructor failed: its message is the cause, and it must not stay behind
         * for the next call. */
        kiln_status st = base_error_reset(
            &ctx->err, ir->status, "lowering a kernel to IR failed: %s", sym_ctx_message(ctx->sym));
        sym_ctx_clear_error(ctx->sym);
        return st;
    }
    if (ir->status != KILN_OK)
        return base_error_set(&ctx->err, ir->status, "lowering a kernel to IR failed: %s",
                              kiln_status_string(ir->status));
    /* The loops as made (constant counts) against the budget: a plan that does not fit. */
    uint64_t passes;
    if (ir_loop_passes(ir, &passes) && passes > LOOP_PASSES)
        return base_error_set(&ctx->err, KILN_ERROR_INTERNAL,
                              "lowering made loops of %llu passes per invocation (at most %d: "
                              "lavapipe leaves loops after 65535)",
                              (unsigned long long)passes, LOOP_PASSES);
    return KILN_OK;
}
