/* symbolic/: integer expressions over bounded Variables (prefix sym_).
 *
 * Every size, stride, offset and index in Kiln is a sym_node: an immutable, hash-consed
 * expression owned by a sym_ctx. Structurally equal expressions are the same pointer, so
 * equality is pointer equality. Every node knows its bounds [vmin, vmax] (overflow-checked).
 * Constructors simplify as they build (constant folding, canonical sums of products, div/mod
 * folding, gcd reduction, bounds-decided comparisons) and always terminate: a step budget turns a
 * runaway into KILN_ERROR_BUDGET_EXCEEDED.
 *
 * Errors: constructors return NULL on error and record the first error in the context; a NULL
 * operand gives NULL without a new error, so a caller checks once (sym_ctx_status) at the end.
 * Division and modulo are floor division and floor modulo (Python's semantics) everywhere.
 *
 *     sym_ctx *c; sym_ctx_create(NULL, &c);
 *     const sym_node *n = sym_var(c, "n", 1, 1024);
 *     const sym_node *i = sym_add(c, sym_mul_c(c, n, 4), sym_const(c, 3));
 *     const sym_node *q = sym_floordiv_c(c, i, 4);            // simplifies to n
 *     if (sym_ctx_status(c) != KILN_OK) puts(sym_ctx_message(c));
 *     sym_ctx_destroy(c);
 *
 * A context is not thread-safe. All host memory comes from the context's allocator; nodes
 * belong to their context (never pass them to another) and live until a collection finds them
 * unmarked (sym_collect, below) or until sym_ctx_destroy.
 *
 * Statuses recorded by constructors: KILN_ERROR_INVALID_ARGUMENT (division or modulo by a
 * constant 0, a bad Variable declaration, a binding of what is not a Variable),
 * KILN_ERROR_OUT_OF_RANGE (a binding outside the Variable's range), KILN_ERROR_OVERFLOW (a constant
 * or a bound that does not fit int64), KILN_ERROR_BUDGET_EXCEEDED (the step budget, default 200000
 * steps per top-level call, or the nesting limit of constructor calls), and
 * KILN_ERROR_OUT_OF_HOST_MEMORY.
 *
 * Canonical forms (what the renderings show): a sum is flat with its terms in creation order of
 * their Variables/subexpressions and its constant last, "(x+(y*4)+3)"; a constant multiplier
 * is on the right, "(x*4)"; products of non-constants are ordered by creation id, "(n*i)";
 * comparisons with a constant keep the constant on the right, so x >= 3 reads "((x*-1)<-2)";
 * a division or modulo by a negative constant moves the sign onto the dividend. A Variable of
 * range [k, k] stays a Variable node but folds as k inside sums and products.
 *
 * Rendering (sym_render), one format everywhere:
 *   constant  -3            Variable  n              bound node  (n:=4)
 *   sum       (a+b-3)       product   (a*b)          floor div   (a//b)   floor mod  (a%b)
 *   min/max   min(a, b)     compare   (a<b) (a==b) (a!=b)
 *   logic     (a and b) (a or b) (not a)             select      (c ? a : b)
 * Every compound node is parenthesised.
 */
#ifndef KILN_SYMBOLIC_SYM_H
#define KILN_SYMBOLIC_SYM_H

#include "base.h"

typedef struct sym_ctx sym_ctx;
typedef struct sym_node sym_node;

/* Node kinds (expanded from sym_ops.def in the implementation):
 *   SYM_CONST  value
 *   SYM_VAR    name, [min, max]
 *   SYM_BIND   a Variable bound to a value: simplifies like the Variable, evaluates to value
 *   SYM_ADD SYM_MUL SYM_DIV SYM_MOD SYM_MIN SYM_MAX          integer, two operands
 *   SYM_LT SYM_EQ SYM_NE SYM_AND SYM_OR SYM_NOT              boolean (0 or 1)
 *   SYM_WHERE  cond ? a : b */
typedef enum sym_kind {
    SYM_CONST,
    SYM_VAR,
    SYM_BIND,
    SYM_ADD,
    SYM_MUL,
    SYM_DIV,
    SYM_MOD,
    SYM_MIN,
    SYM_MAX,
    SYM_LT,
    SYM_EQ,
    SYM_NE,
    SYM_AND,
    SYM_OR,
    SYM_NOT,
    SYM_WHERE,
    SYM_KIND_COUNT_
} sym_kind;

/* ---- context ---------------------------------------------------------------------------- */

kiln_status sym_ctx_create(const base_allocator *alloc, sym_ctx **out); /* alloc NULL: default */
void sym_ctx_destroy(sym_ctx *ctx);                                     /* NULL is a no-op */
kiln_status sym_ctx_status(const sym_ctx *ctx); /* the first recorded error, or KILN_OK */
const char *sym_ctx_message(const sym_ctx *ctx);
void sym_ctx_clear_error(sym_ctx *ctx);
/* Simplification steps allowed per top-level constructor call (a default is set). */
void sym_ctx_set_budget(sym_ctx *ctx, uint64_t steps);
uint64_t sym_ctx_node_count(const sym_ctx *ctx); /* nodes ever built, freed ones included */

/* ---- constructors (NULL on error; NULL operands propagate) --------------------------------- */

const sym_node *sym_const(sym_ctx *ctx, int64_t value);
/* A Variable; the same name with the same range gives the same node; the same name with a
 * different range, an empty range or an empty name is an error. */
const sym_node *sym_var(sym_ctx *ctx, const char *name, int64_t min, int64_t max);
/* var bound to value; value outside [min, max] is an error. */
const sym_node *sym_bind(sym_ctx *ctx, const sym_node *var, int64_t value);

const sym_node *sym_add(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_sub(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_mul(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_neg(sym_ctx *ctx, const sym_node *a);
const sym_node *sym_floordiv(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_floormod(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_min(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_max(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_lt(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_le(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_gt(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_ge(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_eq(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_ne(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_and(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_or(sym_ctx *ctx, const sym_node *a, const sym_node *b);
const sym_node *sym_not(sym_ctx *ctx, const sym_node *a);
const sym_node *sym_where(sym_ctx *ctx, const sym_node *cond, const sym_node *a, const sym_node *b);
/* Shorthands with a constant right operand. */
const sym_node *sym_add_c(sym_ctx *ctx, const sym_node *a, int64_t b);
const sym_node *sym_mul_c(sym_ctx *ctx, const sym_node *a, int64_t b);
const sym_node *sym_floordiv_c(sym_ctx *ctx, const sym_node *a, int64_t b);
const sym_node *sym_floormod_c(sym_ctx *ctx, const sym_node *a, int64_t b);
const sym_node *sym_lt_c(sym_ctx *ctx, const sym_node *a, int64_t b);

/* ---- inspection -------------------------------------------------------------------------- */

sym_kind sym_node_kind(const sym_node *n);
uint32_t sym_node_arity(const sym_node *n);
const sym_node *sym_node_src(const sym_node *n, uint32_t i);
uint64_t sym_node_id(const sym_node *n);   /* creation order within the context */
uint64_t sym_node_hash(const sym_node *n); /* structural; identical from run to run */
/* A summary of the bindings in n: bit k is set when n contains a binding (SYM_BIND) of a
 * Variable numbered k modulo 64 (Variables are numbered in declaration order). For a Variable:
 * its own bit. 0 for NULL. */
uint64_t sym_node_binds(const sym_node *n);
int64_t sym_vmin(const sym_node *n);
int64_t sym_vmax(const sym_node *n);
bool sym_is_const(const sym_node *n, int64_t *value); /* value may be NULL */
/* n without its constant term (a canonical sum's last), which *term receives (0 where n has
 * none; n itself then, and a constant n is its own term over 0): x + 14 y + 3 -> x + 14 y, 3. */
const sym_node *sym_split_const(sym_ctx *ctx, const sym_node *n, int64_t *term);
bool sym_is_bool(const sym_node *n); /* comparison/logic/not nodes */
/* For SYM_VAR and SYM_BIND: the Variable's name and range; false for other kinds. */
bool sym_var_info(const sym_node *n, const char **name, int64_t *min, int64_t *max);
/* For SYM_BIND: the Variable and its value. */
bool sym_unbind(const sym_node *n, const sym_node **var, int64_t *value);

/* ---- evaluation, substitution, rendering --------------------------------------------------- */

typedef struct sym_assignment {
    const sym_node *const *vars; /* SYM_VAR nodes */
    const int64_t *values;
    size_t count;
} sym_assignment;

/* Evaluates n: Variables take their value from a (NULL: none), bound nodes their bound value.
 * Errors, recorded in err (which may be NULL): an unassigned Variable KILN_ERROR_NOT_FOUND; a
 * value outside its Variable's range KILN_ERROR_OUT_OF_RANGE; division by zero
 * KILN_ERROR_INVALID_ARGUMENT; int64 overflow KILN_ERROR_OVERFLOW. Select, and, or evaluate only
 * the operand they need. */
kiln_status sym_eval(const sym_node *n, const sym_assignment *a, int64_t *out, base_error *err);
/* n with every from[i] (a Variable or bound node) replaced by to[i], simplified again. A
 * Variable in from also replaces the nodes that bind it. from[i] of another kind is
 * KILN_ERROR_INVALID_ARGUMENT; a NULL to[i] gives NULL. */
const sym_node *sym_substitute(sym_ctx *ctx, const sym_node *n, const sym_node *const *from,
                               const sym_node *const *to, size_t count);
/* n simplified where the condition cond holds: the ranges cond's comparisons give (x < k,
 * -x < k) narrow those expressions in n (tinygrad's uop_given_valid). Equal to n wherever cond
 * holds, not elsewhere: for the index of a load masked by cond. n when nothing narrows. */
const sym_node *sym_given(sym_ctx *ctx, const sym_node *n, const sym_node *cond);
/* n with every bound node replaced by its Variable; the bound values are appended to
 * (vars, values) in order of first appearance, each Variable once (capacity cap; the return is
 * the number found, which may exceed cap). Used for kernel-cache keys. One Variable
 * bound to two different values in n is KILN_ERROR_INVALID_ARGUMENT (NULL). */
const sym_node *sym_unbind_all(sym_ctx *ctx, const sym_node *n, const sym_node **vars,
                               int64_t *values, size_t cap, size_t *found);
/* Writes a readable rendering ("(((x*4)+y)//8)", Python-like, floor semantics; the format is
 * listed at the top of this header) into buf like snprintf: returns the length it needs,
 * always NUL-terminates when cap > 0; buf may be NULL when cap is 0. n NULL renders "<null>".
 * The rendering is a tree: a subexpression shared n times is written n times. */
size_t sym_render(const sym_node *n, char *buf, size_t cap);

/* ---- collection ---------------------------------------------------------------------------- */
/* The owner of a context frees the nodes it no longer uses in collection cycles: mark every
 * node still in use, then collect.
 *
 *     for (each node the program still holds) sym_mark(c, node);
 *     size_t freed = sym_collect(c);
 *
 * Contract: sym_collect frees every node not marked since the previous sym_collect (or since
 * sym_ctx_create), except Variables (SYM_VAR nodes: declared by the program and looked up by
 * name, they and their names live until sym_ctx_destroy). Constants, bound nodes and every
 * other kind are collectable. Before collecting, a caller must mark every node it will use
 * again: each node it holds, including nodes reachable only from its own data structures
 * (tables keyed by node pointers, caches, guards); marking a node marks its operands,
 * transitively. Using a node freed by a collection is undefined behaviour (its memory is
 * reused by later nodes; AddressSanitizer builds report the use). A node built between the
 * marking and sym_collect is freed unless it is marked too, so mark right before collecting.
 *
 * Marking is cumulative within a cycle and may be repeated; marking an already marked node is
 * O(1); the cost of a cycle is the nodes newly marked plus a sweep over the node storage.
 * Neither call allocates, so neither can fail or record an error: marking walks operands
 * without a stack, to any depth. The memory of freed nodes is reused by later nodes, and
 * storage left entirely free (beyond one spare block of 256 nodes) goes back to the allocator,
 * so a program whose live nodes stay bounded runs in bounded memory however many nodes it
 * builds.
 *
 * Ids and canonical forms: ids are never reused; a node built again after its collection gets
 * a new, larger id. Canonical forms order sum terms and commutative operands by id (see the
 * top of this header), so an expression rebuilt after a collection may come back with its
 * terms in another order than the freed one had: another rendering and another sym_node_hash,
 * the same value. Every live node still has one canonical form and equality stays pointer
 * equality: a marked node keeps its operands, so the constructors return it for its structure.
 * sym_node_hash is structural (kinds, values, a Variable's name and range, the operands'
 * hashes; never ids or addresses), so the same sequence of constructor calls and collections
 * gives the same hashes and renderings on every run; a cache keyed by the hashes of
 * expressions that get collected and rebuilt can miss (never wrongly hit) after a collection,
 * which marking the expressions the cache keeps avoids. */

/* Marks n and every node it is built from as in use for the current cycle. NULL n (or ctx)
 * is a no-op. n must be a live node of ctx. */
void sym_mark(sym_ctx *ctx, const sym_node *n);
/* Frees every node not marked since the previous sym_collect (Variables excepted), removes it
 * from hash-consing, makes its memory reusable and starts the next cycle (no node is marked).
 * Returns the number of nodes freed; 0 for NULL ctx. */
size_t sym_collect(sym_ctx *ctx);
/* Whether the next sym_collect keeps n: n is marked in the current cycle, or a Variable. */
bool sym_marked(const sym_ctx *ctx, const sym_node *n);
/* Nodes built and not freed, Variables included. */
uint64_t sym_ctx_live_nodes(const sym_ctx *ctx);
/* Host memory the context holds: the context, node storage (live and free slots), the
 * hash-consing tables and Variable names. Transient buffers of a call are not counted. */
size_t sym_ctx_bytes(const sym_ctx *ctx);

/* ---- guards -------------------------------------------------------------------------------- */
/* An assumption code relied on, recorded and checked against an assignment before reuse. */

typedef enum sym_guard_kind {
    SYM_GUARD_RANGE,     /* lo <= expr <= hi */
    SYM_GUARD_EQ,        /* expr == value */
    SYM_GUARD_DIVISIBLE, /* expr % value == 0 */
    SYM_GUARD_TRUE,      /* expr (a boolean expression, e.g. a comparison of two expressions) */
} sym_guard_kind;

typedef struct sym_guard {
    sym_guard_kind kind;
    const sym_node *expr;
    int64_t a; /* lo, value or divisor */
    int64_t b; /* hi */
} sym_guard;

/* True when the guard holds under a; false when it fails; an evaluation error is reported
 * through err and counts as failing. */
bool sym_guard_check(const sym_guard *g, const sym_assignment *a, base_error *err);
/* Renders "8 <= n <= 16", "n == 12", "n % 4 == 0", or the expression itself for
 * SYM_GUARD_TRUE (snprintf contract). */
size_t sym_guard_render(const sym_guard *g, char *buf, size_t cap);

#endif
