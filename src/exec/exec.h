/*
 * The executor: runs schedules (src/exec/sched.h) over transport connections.
 *
 * An operation (braid_op_t) is one call of one rank: a schedule, the buffers it names, the
 * reduction, and the connections to its peers. braid_op_progress() is resumable: it does as
 * much as the transport allows without blocking and returns BRAID_INPROGRESS when it has to
 * wait, so one thread can drive many operations (a group, several ranks of one process, or
 * the one-process schedule simulator of the unit tests) by calling it round-robin.
 * braid_exec_run() is that loop, with back-off, peer checks and the collective timeout.
 *
 * Pull steps (src/exec/sched.h) read a peer's buffer directly: with plain loads when the
 * peer is a thread of this process, else with cross-memory attach (transport.h:
 * braid_cma_read), straight into the destination for a copy, or through a small per-op
 * bounce buffer that stays in cache for a reduction.
 */
#ifndef BRAID_CORE_EXEC_H
#define BRAID_CORE_EXEC_H

#include <stdint.h>

#include "exec/sched.h"
#include "base/time.h"
#include "exec/dev_slice.h"
#include "exec/view.h"
#include "kernels/kernels.h"
#include "transports/transport.h"

/* How a reduction combines, after ncclAvg / ncclPreMulSum were lowered. */
typedef struct braid_redop_spec {
    braid_opkind_t kind;
    int premul;                 /* pre-multiply this rank's contributions by scalar */
    braid_scalar_t scalar;
    uint64_t postdiv;           /* > 1: divide final values by it (integer ncclAvg) */
    const void *scalar_dev;     /* device memory: scalar is read from here when the op
                                 * starts (a device-resident ncclPreMulSum scalar) */
} braid_redop_spec_t;

struct braid_op;

typedef struct braid_exec_hooks {
    /* Called every BRAID_CHECK_PEERS_MS; `blocked`: no op of the run could move in the
     * last pass (then peers are checked too, else only local state). An error stops it. */
    braid_status_t (*check)(void *ctx, const struct braid_op *op, int blocked);
    /* Called once the operation made no progress for the timeout; returns the error. */
    braid_status_t (*stalled)(void *ctx, const struct braid_op *op, double waited_s);
    /* Called on every pass in which no op moved (may be NULL): drive transports that move
     * data only when driven, whatever connection the op waits on. */
    void (*drive)(void *ctx);
    /* Called now and then while the op waits (may be NULL): publish where this rank runs,
     * and say whether the peer the op waits on last ran on the same CPU. */
    int (*near)(void *ctx, const struct braid_op *op);
    /* Called every few milliseconds while the op waits for its device (braid's kernels of
     * a slice): an error stops it (an abort; after BRAID_TIMEOUT, one that says that the
     * GPU never finished them). */
    braid_status_t (*gpu_wait)(void *ctx, const struct braid_op *op, double waited_s);
} braid_exec_hooks_t;

#define BRAID_HDR_HISTORY 8

typedef struct braid_op {
    /* Filled by the caller before braid_op_start. */
    braid_sched_t sched;            /* owned by the op from braid_op_start on */
    void *bufs[BRAID_BUF_NUM];      /* by braid_buf_t; SCRATCH, HELLO are made by start */
    braid_dtype_t dtype;
    braid_redop_spec_t redop;
    const braid_view_t *views[BRAID_BUF_NUM];   /* a view replaces bufs[] there (SEND, RECV) */
    braid_dtype_t acc;              /* with views: the type sums are taken in */
    braid_msg_hdr_t hdr;            /* sent with every message of this op */
    braid_msg_hdr_t expect;         /* what every received message must carry */
    int rank, nranks;
    braid_conn_t **send_conns;      /* [nranks], NULL where unused */
    braid_conn_t **recv_conns;
    size_t slice;                   /* bytes per slice, at most every slot size */
    const braid_exec_hooks_t *hooks;
    void *hook_ctx;
    int p2p_peer;                   /* send/recv: the peer (the caller's bookkeeping) */
    const braid_msg_hdr_t *history; /* NULL, or the headers of the caller's last
                                     * BRAID_HDR_HISTORY collectives, at [seq % that]: a
                                     * message of one of them that arrives late says how
                                     * the ranks' calls differed */
    struct braid_flight_rec *flight_rec;    /* the caller's record of the op (its flight
                                             * recorder, core/flight.h), or NULL */
    uint64_t flight_id;             /* the record's id while it is this op's */
    int oversubscribed;             /* more ranks on this machine than cores: yield, don't spin */
    int stream_out;                 /* write destinations with non-temporal stores */
    int pull_cma;                   /* pull with cross-memory attach even from this process
                                     * (tests: exercises that path in one process) */
    int on_device;                  /* the buffers are device memory: the op runs on the
                                     * proxy (src/core/proxy.c), ordered on `stream` */
    void *stream;
    int ordinal;                    /* the device of the buffers */
    braid_device_exec_t *dev;       /* set by the proxy: slices run as kernels there */

    /* Executor state. */
    uint64_t *tickets;              /* [2 * nranks]: send tickets, then receive tickets */
    char *bounce;                   /* pulls that reduce: a block read from a peer (the
                                     * driving thread's, see exec.c) */
    int stage_begin, stage_end, step;
    size_t stage_slice;             /* this stage's slice: `slice`, or more for copies */
    size_t iter, niter;
    uint64_t slices_done;           /* grows with every slice moved: progress indicator */
    double last_progress;           /* braid_now() of the last slice moved; < 0: not
                                     * stamped yet (the executor reads the clock lazily) */
    double first_clock;             /* braid_now() of the first reading of the clock while
                                     * the op ran, 0 if none: when it started, give or take
                                     * the 16 idle passes between readings */
    int started, done;

    /* Last, so that braid_op_clear() can leave it alone. */
#define BRAID_OP_INLINE_TICKETS 64
    uint64_t tickets_inline[BRAID_OP_INLINE_TICKETS];   /* used up to 32 ranks */
} braid_op_t;

/* The pre-multiplier of a step's src: only this rank's own input of a reduction is
 * pre-multiplied (not a partial result that BRAID_STEP_ACC marks); NULL: none. */
static inline const braid_scalar_t *braid_step_pre(const braid_op_t *op,
                                                   const braid_step_t *st)
{
    int own = (st->flags & BRAID_STEP_REDUCE) && !(st->flags & BRAID_STEP_ACC);
    return own && op->redop.premul ? &op->redop.scalar : NULL;
}

/* How the op waits for its device: bounded by its hooks' gpu_wait. */
braid_status_t braid_op_gpu_check(void *op, double waited_s);
static inline braid_device_wait_t braid_op_device_wait(const braid_op_t *op)
{
    return (braid_device_wait_t){ .check = braid_op_gpu_check, .arg = (void *)op };
}

/* Zero every field of op but the inline arrays (sched's steps and the tickets, 1.5 KB that
 * are written before they are read): clearing them would cost a small call a third of its
 * time. Then braid_sched_init() the schedule. */
void braid_op_clear(braid_op_t *op);

/* The call a peer published for this op's sequence number (`theirs`) is not this op's:
 * the mismatch error naming both (BRAID_OK when they agree, or theirs is another call). */
braid_status_t braid_exec_call_differs(const braid_op_t *op, int peer,
                                       const braid_msg_hdr_t *theirs);

/* A message from peer (its sender's header, rlen bytes), received as slice `slice` of len
 * bytes of this op: BRAID_OK, or the mismatch error naming both sides. */
braid_status_t braid_exec_msg_check(const braid_op_t *op, int peer, const braid_msg_hdr_t *hdr,
                                    size_t rlen, size_t len, size_t slice);

/* Take this op's turn on each connection it uses (in call order), allocate scratch. */
braid_status_t braid_op_start(braid_op_t *op);
/* BRAID_OK once complete, BRAID_INPROGRESS while waiting, or an error. On completion the
 * connections pass to the next operation at once (a later op of the same group may be
 * waiting for them in the same braid_exec_run). */
braid_status_t braid_op_progress(braid_op_t *op);
/* Give the connections still held to the next operation and free what the op owns. Safe
 * after errors and on an op that was never started. */
void braid_op_finish(braid_op_t *op);

/*
 * Drive started ops to completion, round-robin, backing off (spin, yield, sleep) while none
 * moves; every check interval call each op's hooks->check, and fail an op that made no
 * progress for BRAID_TIMEOUT seconds through hooks->stalled. Returns the first error (the
 * other ops are left as they are; the caller finishes them all).
 */
braid_status_t braid_exec_run(braid_op_t **ops, int nops);

#endif
