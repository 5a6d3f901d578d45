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
 */
#ifndef BRAID_CORE_SIM_H
#define BRAID_CORE_SIM_H

#include "algorithms/algo.h"
#include "exec/sched.h"
#include "exec/exec.h"

typedef struct braid_sim_cfg {
    int nslots;             /* slots per FIFO, >= 2 */
    size_t slot_size;       /* bytes per slot; the slice is this rounded down to the element */
    int exec_run;           /* drive with braid_exec_run (hangs on a deadlock: only for
                             * calls known to complete) instead of the checking loop */
    int cma;                /* pulls through cross-memory attach instead of loads */
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
int braid_sim_run(const braid_sim_cfg_t *cfg, int nranks, braid_sim_call_t *calls, int ncalls, braid_sim_result_t *res);

#endif
