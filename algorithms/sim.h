/*
 * One-process schedule simulator (DESIGN.md section 2), for the schedule tests and for
 * checking user schedules at load (algorithms/usched_prove.c): every rank of a call runs its
 * schedule through the real executor (src/exec/exec.c) over in-memory FIFOs, driven
 * round-robin by one thread. Deterministic: a full round in which no rank moves while some
 * are not done is a deadlock, reported with the stuck ranks and their steps.
 *
 * The transport has one FIFO of `nslots` slots of `slot_size` bytes per ordered pair of
 * ranks (a rank to itself included) and fails on protocol misuse: committing without a
 * slot, releasing without one, a commit longer than the slot, using the wrong end.
 *
 * Pull steps read the other simulated ranks' buffers: all ranks live in this process, so
 * the executor reads them in place, or, with cfg->cma, through process_vm_readv on this
 * process (the path taken between processes). Once a call has returned, its caller owns its
 * buffers again: the checking loop poisons them until the run ends (then puts the contents
 * back), so that a peer still reading them gets garbage and the test fails.
 *
 * A serial mode (below) checks instead the GPU engine's order of a job (src/exec/lower.h).
 */
#ifndef BRAID_CORE_SIM_H
#define BRAID_CORE_SIM_H

#include "algorithms/algo.h"
#include "exec/sched.h"
#include "exec/exec.h"
#include "exec/lower.h"

struct braid_sim_order;

typedef struct braid_sim_cfg {
    int nslots;             /* slots per FIFO, >= 2 */
    size_t slot_size;       /* bytes per slot; the slice is this rounded down to the element */
    int exec_run;           /* drive with braid_exec_run (hangs on a deadlock: only for
                             * calls known to complete) instead of the checking loop */
    int cma;                /* pulls through cross-memory attach instead of loads */
    int serial;             /* serial stream mode (below) instead of the executor */
    const struct braid_sim_order *order;    /* serial mode: the order of each rank's job;
                                             * NULL: braid_sim_order_lower */
} braid_sim_cfg_t;

/* One operation of one rank. Several calls may name the same rank (a group): they are
 * started in array order, so they take their turns on shared connections in that order. */
typedef struct braid_sim_call {
    int rank;
    braid_coll_t coll;              /* built with braid_algo_build unless sched is set */
    const braid_sched_t *sched;     /* optional: run (a copy of) this schedule instead */
    void *sendbuf, *recvbuf;
    size_t send_bytes, recv_bytes;  /* poisoned after the call returns (0: not) */
    braid_redop_spec_t redop;
    braid_msg_hdr_t hdr, expect;
} braid_sim_call_t;

typedef struct braid_sim_result {
    braid_status_t st;      /* the first error, BRAID_OK on success */
    int deadlock;           /* 1 when no rank could move */
    int rank;               /* the rank that failed, -1 if none or several */
    char msg[2048];         /* what went wrong, for the test's failure message */
} braid_sim_result_t;

/* Run the calls on `nranks` ranks to completion. Returns 0 when every call completed, the
 * transport was used correctly and every message sent was received; otherwise nonzero and
 * res->msg says why. */
int braid_sim_run(const braid_sim_cfg_t *cfg, int nranks, braid_sim_call_t *calls, int ncalls,
                  braid_sim_result_t *res);

/*
 * Serial stream mode (cfg->serial; algorithms/sim_serial.c): the GPU engine's way of running
 * a job (src/exec/lower.h). A rank's job is its calls, in array order. Each is built as
 * braid_sim_run builds it, without pulls (device calls have coll.pull NONE), into an op
 * whose slice is slot_size, as the engine sets it (src/core/proxy.c; a slot_size that is
 * not a multiple of the element size fails), and whose kind, which places it in the order,
 * is coll.kind. Every rank runs its job's slice-steps in cfg->order, one at a time: a
 * slice-step goes once its receive finds a message in the FIFO from recv_peer AND its send
 * finds a free slot in the FIFO to send_peer (root tokens are ordinary receives), then
 * consumes and produces at once; until then it holds back the rest of the rank's stream.
 * The FIFOs (nslots per ordered pair, a rank to itself included) hold each message's length
 * and its call's hdr only: no buffer is read or written, and exec_run and cma are ignored.
 *
 * Fails on: a deadlock (a pass in which no rank can go while some are not done; res->msg
 * names each stuck rank's call, op, step, slice and the peer it waits for); a message whose
 * length at the receiver is not the sender's, or whose hdr is not the receiving call's
 * expect (leave both zero to compare lengths only); a message never received; an order
 * that does not give each slice of each step exactly once and whole ([off, off + len) of
 * the step, off a multiple of the op's slice).
 */
typedef struct braid_sim_order {
    const char *name;
    /* One rank's order over its job (ops in call order); NULL when out of memory. */
    void *(*begin)(braid_op_t *const *ops, int nops);
    /* The next slice-step: 1 with *it filled, 0 once the job is done. */
    int (*next)(void *iter, braid_lower_item_t *it);
    void (*end)(void *iter);
} braid_sim_order_t;

/* The engine's order: braid_lower_begin / braid_lower_next themselves. */
extern const braid_sim_order_t braid_sim_order_lower;

/* Append to res->msg, cut at its size. */
void braid_sim_msg(braid_sim_result_t *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* braid_sim_run in serial mode, whatever cfg->serial says (the calls' buffers are unused). */
int braid_sim_serial_run(const braid_sim_cfg_t *cfg, int nranks, const braid_sim_call_t *calls,
                         int ncalls, braid_sim_result_t *res);

#endif
