/*
 * The per-communicator proxy thread that runs calls on device buffers in the order of the
 * caller's streams, and the buckets of plans (src/core/proxy.c).
 */
#ifndef BRAID_CORE_PROXY_H
#define BRAID_CORE_PROXY_H

#include "core/comm.h"
#include "exec/gpu.h"

#define BRAID_PROXY_MAX_STREAMS 16

/* A queued job, for the second half of a submission: the caller's streams wait for it. */
typedef struct braid_proxy_ticket {
    braid_comm_t *comm;
    uint32_t target;
    void *streams[BRAID_PROXY_MAX_STREAMS];
    int nstreams;
    int alone;                      /* no other communicator's job in its submission */
    int gpu;                        /* the GPU engine's job: its streams wait for gjob */
    braid_gpu_job_t gjob;
} braid_proxy_ticket_t;

/* At init, where a GPU backend is in use: the comm's proxy with its completion word and
 * its device executor on `ordinal`, made now, on this thread, so that its calls allocate
 * nothing and load no kernel (src/exec/dev_slice.c). An executor that cannot be made is no
 * error here: host calls work, and device calls try again and fail with its reason. */
braid_status_t braid_proxy_prepare(braid_comm_t *comm, int ordinal);
/* Queue ops of one communicator (heap ops, entered; a call or a group's) for its proxy on
 * device `ordinal` (started at the first call), after an event recorded now on each of
 * their streams; or, with a GPU engine, for the engine, on their stream where `alone` (no
 * other communicator's ops in this submission: exec/gpu.h). The proxy runs, finishes and
 * frees the ops; on an error the ops are failed and freed here or by the proxy: the
 * caller must not touch them. */
braid_status_t braid_proxy_submit(braid_comm_t *comm, int ordinal, braid_op_t **ops, int n,
                                  int alone, braid_proxy_ticket_t *t);
/* Called on the proxy thread once a posted job ran, with its status. */
typedef void (*braid_proxy_done_fn)(void *arg, braid_status_t st);

/* Queue ops of one communicator (heap ops, entered) for its proxy (bucket plans: the
 * caller goes on while they run); ordinal >= 0: device ops, after an event recorded now on
 * their streams, as braid_proxy_submit, but no stream waits for them. done(arg, status) is
 * called on the proxy thread after they ran. On an error returned here the ops were failed
 * and freed and done is not called. */
braid_status_t braid_proxy_post(braid_comm_t *comm, int ordinal, braid_op_t **ops, int n,
                                braid_proxy_done_fn done, void *arg);
/* The ticket's streams wait until the proxy has run its job. Separate from the submission,
 * so that a group records the events of every communicator before any stream waits (one
 * thread driving several ranks on one stream would otherwise wait for itself). */
braid_status_t braid_proxy_join(const braid_proxy_ticket_t *t);
/* Wait until every job queued so far has run (ncclCommFinalize: device calls are done
 * before the peers are told this rank is finished). A job whose peers never come ends at
 * the collective timeout, or at an abort from another thread. */
void braid_proxy_drain(braid_comm_t *comm);
/* Run what is queued (or drop it, once the comm failed or was aborted) and end the
 * thread. The comm's busy count is 0, so nothing is queued any more. Returns 1 when the
 * device executor had to leave its memory in place (device/device.h): then no host memory
 * may be unmapped for the device either. `abort`: wait at most 0.2 s for that. */
int braid_proxy_stop(braid_comm_t *comm, int abort);

#endif
