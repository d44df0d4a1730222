/* symbolic/ internals shared by its files (hidden from other modules).
 *
 * Files by concept:
 *   node.c    the context, hash-consing, the kind table, inspection
 *   collect.c node storage (slabs and a free list) and collection: marking, sweeping
 *   bounds.c  [vmin, vmax] of every kind, overflow-checked
 *   sum.c     term lists, canonical sums of products: add, mul, neg, sub
 *   divmod.c  floor division and modulo rules (by constants and by expressions)
 *   logic.c   comparisons, logic, select, min and max
 *   eval.c    evaluation under an assignment
 *   render.c  the readable rendering
 *   subst.c   substitution and unbinding (rebuilding through the constructors)
 *   guard.c   guards
 *
 * Invariants of the canonical forms the constructors keep:
 *   - a sum is a left-deep chain of SYM_ADD: ((t1 + t2) + t3) + k, its terms ordered by the
 *     creation id of their base, the constant k (never 0) last; no term is itself a sum;
 *   - a term is base or MUL(base, CONST coeff) with coeff not 0 or 1; a base is never a
 *     constant, a sum, or a MUL by a constant;
 *   - a product of non-constants is a left-deep chain of MUL ordered by creation id;
 *   - division and modulo by a constant have a constant divisor > 1;
 *   - commutative operands are ordered by creation id, a constant operand on the right;
 *   - no node other than a Variable or bound node has vmin == vmax: it is a constant; and a
 *     single-valued Variable or bound node enters every operation as its constant.
 * Debug builds check the first four on every new node (check_canonical in node.c). */
#ifndef KILN_SYMBOLIC_SYM_INTERNAL_H
#define KILN_SYMBOLIC_SYM_INTERNAL_H

#include "sym.h"

enum { SYM_F_COMM = 1, SYM_F_BOOL = 2 };

/* The kind of a free slot in a slab (never a live node's). */
enum { SYM_FREE_SLOT = 0xff };
_Static_assert((int)SYM_KIND_COUNT_ < (int)SYM_FREE_SLOT, "SYM_FREE_SLOT must not be a kind");

struct sym_node {
    uint64_t id;   /* creation order; never reused, even after the node is collected */
    uint64_t hash; /* structural */
    int64_t vmin, vmax;
    int64_t value;          /* SYM_CONST: the value; SYM_BIND: the bound value */
    const char *name;       /* SYM_VAR: its name (owned); SYM_BIND: the Variable's name */
    uint64_t binds;         /* bit k: binds a Variable numbered k modulo 64 (sym_node_binds) */
    const sym_node *src[3]; /* a free slot: src[0] links the free list */
    uint8_t kind;           /* sym_kind, or SYM_FREE_SLOT */
    uint8_t arity;
    uint8_t visit;   /* sym_mark: the operand being visited (pointer reversal) */
    uint8_t var_bit; /* SYM_VAR: its number modulo 64, the bit of sym_node_binds it sets */
    uint32_t mark;   /* the collection epoch in which the node was last marked (0: never) */
};

typedef struct sym_slab sym_slab;

/* The constants SYM_SMALL_MIN..SYM_SMALL_MAX that sym_make_const finds without hashing: the
 * sizes, strides and offsets that every view and index is built of (2.8 of 4.5 million
 * sym_make calls in the training example's benchmark were constants, nearly all found). */
enum { SYM_SMALL_MIN = -64, SYM_SMALL_MAX = 1023 };

struct sym_ctx {
    base_allocator alloc;
    base_map nodes; /* hash-consing of every node but Variables */
    /* small[v - SYM_SMALL_MIN]: constant v's node while it lives (sym_collect clears it) */
    const sym_node *small[SYM_SMALL_MAX - SYM_SMALL_MIN + 1];
    base_map vars; /* Variables by name; each owns its name, freed at destroy */
    base_error err;
    sym_slab *slabs;    /* node storage, newest first (collect.c) */
    sym_node *free;     /* free slots of the slabs, linked through src[0] */
    size_t slab_count;  /* statistics (sym_ctx_bytes) */
    size_t name_bytes;  /* Variable names (sym_ctx_bytes) */
    uint32_t var_count; /* Variables declared: the next one's number */
    uint64_t live;      /* nodes not collected */
    uint32_t epoch;     /* the current collection cycle, never 0 */
    uint64_t next_id;
    uint64_t budget; /* steps per top-level constructor call */
    uint64_t steps;
    uint32_t depth;           /* nesting of constructor calls */
    kiln_status entry_status; /* the error status when the top-level call began */
};

typedef struct sym_kind_info {
    const char *name;
    uint32_t arity;
    uint32_t flags;
    const char *symbol;
} sym_kind_info;

BASE_HIDDEN extern const sym_kind_info sym_kinds[SYM_KIND_COUNT_];

/* ---- node.c ---- */
/* Records the first error; returns NULL so `return sym_fail(...)` reads naturally. */
BASE_HIDDEN const sym_node *sym_fail(sym_ctx *ctx, kiln_status status, const char *fmt, ...)
    BASE_PRINTF(3, 4);
/* Enters a constructor with its operands (b, c NULL when absent): false (nothing to undo) on
 * a NULL operand or when the step budget or the nesting limit is exhausted (then the error is
 * recorded). A single-valued Variable or bound operand is replaced by its constant.
 * sym_leave returns r. */
BASE_HIDDEN bool sym_enter(sym_ctx *ctx, const sym_node **a, const sym_node **b,
                           const sym_node **c);
BASE_HIDDEN const sym_node *sym_leave(sym_ctx *ctx, const sym_node *r);
/* The hash-consed node of kind over srcs (arity from the kind table) without simplification
 * beyond bounds: a node whose bounds are one value comes back as that constant. */
BASE_HIDDEN const sym_node *sym_make(sym_ctx *ctx, sym_kind kind, const sym_node *a,
                                     const sym_node *b, const sym_node *c, int64_t value);
BASE_HIDDEN const sym_node *sym_make_const(sym_ctx *ctx, int64_t value);
BASE_HIDDEN bool sym_is_k(const sym_node *n, int64_t value); /* n is the constant value */

/* ---- collect.c ---- */
/* A slot for a new node (contents undefined), counted live; NULL when a slab cannot be
 * allocated (no error recorded). */
BASE_HIDDEN sym_node *sym_slot_alloc(sym_ctx *ctx);
/* Gives back a slot sym_slot_alloc returned whose node was never published (not in a map). */
BASE_HIDDEN void sym_slot_release(sym_ctx *ctx, sym_node *n);
/* Frees every slab (sym_ctx_destroy). */
BASE_HIDDEN void sym_slabs_finish(sym_ctx *ctx);

/* ---- bounds.c ---- */
/* Sets n->vmin and n->vmax from its kind and operands; false on overflow (error recorded). */
BASE_HIDDEN bool sym_bounds(sym_ctx *ctx, sym_node *n);

/* ---- sum.c ---- */
typedef struct sym_term {
    const sym_node *base;
    int64_t coeff;
} sym_term;

enum { SYM_TERMS_LOCAL = 16 };

/* A list of terms plus a constant, on the stack while short. Not copyable (data may point
 * into local). ok turns false on overflow or allocation failure (error recorded). */
typedef struct sym_terms {
    sym_ctx *ctx;
    sym_term *data;
    size_t len, cap;
    int64_t konst;
    bool ok;
    sym_term local[SYM_TERMS_LOCAL];
} sym_terms;

BASE_HIDDEN void sym_terms_init(sym_terms *t, sym_ctx *ctx);
BASE_HIDDEN void sym_terms_finish(sym_terms *t);
BASE_HIDDEN void sym_terms_push(sym_terms *t, const sym_node *base, int64_t coeff);
/* Appends the terms of n * scale (a sum is flattened). */
BASE_HIDDEN void sym_terms_add(sym_terms *t, const sym_node *n, int64_t scale);
/* The canonical sum of the terms (like terms combined); NULL when !t->ok. */
BASE_HIDDEN const sym_node *sym_terms_build(sym_terms *t);
/* n as coeff * base (n not a sum); base NULL for a constant. */
BASE_HIDDEN void sym_term_split(const sym_node *n, const sym_node **base, int64_t *coeff);

/* ---- divmod.c ---- */
BASE_HIDDEN const sym_node *sym_div_impl(sym_ctx *ctx, const sym_node *a, const sym_node *b);
BASE_HIDDEN const sym_node *sym_mod_impl(sym_ctx *ctx, const sym_node *a, const sym_node *b);

#endif
