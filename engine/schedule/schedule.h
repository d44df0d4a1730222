/* What the scheduler's two files share (engine/schedule/): realize.c's schedule, and what
 * plan.c keeps of it from one realize to the next of the same graph (foresight and replay). */
#ifndef KILN_SCHEDULE_H
#define KILN_SCHEDULE_H

#include "eng.h"

enum { MAX_NEEDS = 16 }; /* dependencies one kernel build reports at a time */

typedef struct learnt_stop { /* a build of node x stopped at needs (node numbers; foresight) */
    uint32_t x, count;
    uint32_t needs[MAX_NEEDS];
} learnt_stop;

/* Scheduling runs on an explicit stack (allocated with the context's allocator), not on the C
 * stack: a graph of any depth schedules. A frame is a node being scheduled and where it is. */
typedef enum frame_step {
    STEP_START,   /* not looked at yet */
    STEP_READERS, /* a write: scheduling the earlier readers of its target, one at a time */
    STEP_BUILD,   /* building its kernel (again, once the dependencies it needed are done) */
    STEP_NEEDS,   /* scheduling the dependencies its kernel build asked for, one at a time */
} frame_step;

typedef struct frame {
    eng_node *node;
    frame_step step;
    uint64_t stamp;     /* STEP_READERS: the mark of the nodes the write's value depends on */
    eng_reader *reader; /* STEP_READERS: the reader scheduled last (NULL: none yet) */
    eng_node *snapshot; /* STEP_READERS: the target's old value copied (NULL: none yet) */
    uint32_t need_count, next_need;
    eng_node *needs[MAX_NEEDS];
    bool looked_ahead;  /* plan_foresee found the node's first stop (next_stop) */
    uint32_t next_stop; /* the plan's stop of the node to take next + 1 (0: none left) */
} frame;

typedef struct schedule {
    kiln_context *ctx;
    BASE_VEC(eng_kernel) kernels; /* in dependency order; every output has its storage */
    BASE_VEC(frame) stack;
    BASE_VEC(eng_node *) walk; /* mark_dependencies' work list */
    size_t ran;                /* after run_schedule: the kernels that ran (the first ones) */
    uint64_t wanted;           /* the mark of the unrealized nodes the roots depend on */
    /* Foresight and replay (plan.c): the nodes numbered (0: none), in order; the graph's
     * signature; its plan from an earlier realize (NULL: none), or what this one learns. */
    uint64_t numbered;
    BASE_VEC(eng_node *) order;
    uint64_t signature;
    eng_plan *plan;
    BASE_VEC(learnt_stop) stops;
} schedule;

/* Output j of kernel k: 0 its node, then its siblings'. */
static inline eng_node *kernel_output(const eng_kernel *k, uint32_t j) {
    return j ? k->siblings[j - 1].node : k->output;
}

/* ---- plan.c: what a realize keeps for the next realize of its graph ---------------------- */

/* Before scheduling: the signature of the graph mark_wanted numbered, and its plan if an
 * earlier realize left one (s->plan). */
void plan_look_ahead(schedule *s, uint32_t count, eng_node *const *roots);
/* The dependencies the frame's node's next build stopped at in the last realize of this graph,
 * those not realized yet, into f->needs (their count; 0: none known). */
uint32_t plan_foresee(schedule *s, frame *f);
/* A build of node stopped at needs: kept for the plan this realize leaves. */
void plan_remember(schedule *s, const eng_node *node, eng_node *const *needs, uint32_t count);
/* After scheduling: what this realize learnt becomes its graph's plan. */
void plan_keep(schedule *s);
/* Kernel k, just added for its node, kept to be taken by the next realize of the graph. */
void plan_keep_replay(schedule *s, const eng_kernel *k);
/* Node x's kernel as the last realize of the graph built it, into k (its outputs' storage not
 * assigned): false where there is none to take, or on *st's failure (Debug builds build x too
 * and compare). */
bool plan_take(schedule *s, eng_node *x, eng_kernel *k, kiln_status *st);

#endif
