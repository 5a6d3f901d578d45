/*
 * From a checked API call to running operations: lowering of the reduction, schedule
 * building, and groups (ncclGroupStart/End are per thread and nest; the outermost
 * ncclGroupEnd runs every queued operation together, so a ring of grouped send/recv and one
 * thread driving several ranks both work).
 */
#ifndef BRAID_CORE_ENQUEUE_H
#define BRAID_CORE_ENQUEUE_H

#include <stddef.h>

#include "core/comm.h"
#include "core/proxy.h"

typedef struct braid_call {
    braid_coll_kind_t kind;
    const void *sendbuf;
    void *recvbuf;
    size_t count;               /* elements, per the NCCL call; AllGatherV /
                                 * ReduceScatterV: the total of vcounts */
    braid_dtype_t dtype;
    int op;                     /* ncclRedOp_t value; -1 when the call has none */
    int root;                   /* root, or the peer of send/recv; -1 when none */
    const size_t *sendcounts, *sdispls, *recvcounts, *rdispls;   /* alltoallv */
    const size_t *vcounts, *vdispls;   /* AllGatherV / ReduceScatterV: per-rank element
                                        * counts and displacements (nranks each); NULL
                                        * otherwise */
    const braid_algo_t *algo;   /* run this algorithm (mscclRunAlgo); NULL: the tuner's */
    void *stream;               /* the caller's stream */
    int on_device;              /* device buffers (of device `ordinal`): the call runs on
                                 * the comm's proxy, ordered on `stream` */
    int ordinal;
    /* Bucket plans (src/core/plan.c): the buffers are views of the caller's tensors, sums
     * are taken in `acc`, and the reduction comes lowered already. */
    const braid_view_t *send_view, *recv_view;
    braid_dtype_t acc;
    const braid_redop_spec_t *redop;
} braid_call_t;

/* Build the operation of a call and run it now, or queue it in the thread's group.
 * The caller has checked every argument and entered the comm. */
braid_status_t braid_enqueue(braid_comm_t *comm, const braid_call_t *call);

/* Build the operation of a call on views (a bucket plan's) and queue it for the comm's
 * proxy (device views: after the work queued on call->stream so far); done(arg, status)
 * is called on the proxy thread once it ran. The caller has entered the comm. On an error
 * returned here done is not called. */
braid_status_t braid_enqueue_post(braid_comm_t *comm, const braid_call_t *call,
                                  braid_proxy_done_fn done, void *arg);

/* Run entered operations together (one call, or a group's ops of host buffers), then
 * finish and leave them (and free them when `heap`). st0 < 0: run nothing, fail them with
 * it (the proxy, for a comm that went away). */
braid_status_t braid_ops_run(braid_op_t **ops, int n, int heap, braid_status_t st0);

int braid_group_depth(void);
/* Inside a group: remember the first failure; the outermost end then runs nothing, undoes
 * the sequence numbers the queued calls took, and returns it. Outside a group: nothing. */
void braid_group_fail(braid_status_t st);
void braid_group_start(void);
/* Outermost end: run what was queued; wait for grouped inits of blocking comms.
 * Returns INPROGRESS when a nonblocking comm's init is still running. */
braid_status_t braid_group_end(void);
/* Like the outermost braid_group_end, but runs nothing: drops the queued operations and
 * estimates how long they would have taken (seconds). */
braid_status_t braid_group_simulate_end(double *seconds_p);
/* A comm whose init thread was started inside a group: waited for at the outermost end. */
braid_status_t braid_group_add_init(braid_comm_t *comm);
/* Run fn(arg) on a thread now; the outermost end joins it and reports its status. Used for
 * calls that talk to peers at once (split), so one thread can drive several ranks. */
typedef braid_status_t (*braid_group_job_fn)(void *arg);
braid_status_t braid_group_add_job(braid_group_job_fn fn, void *arg);

#endif
