/*
 * Watching the GPU engine's jobs (src/core/gpu_watch.c), on the proxy thread of their
 * communicator.
 */
#ifndef BRAID_CORE_GPU_WATCH_H
#define BRAID_CORE_GPU_WATCH_H

#include "core/comm.h"
#include "exec/gpu.h"

/* How the watcher paces its looks over a run of jobs (one per proxy): the pause between
 * looks grows with the looks since the queue was last empty, not since the job began, so
 * that a stream of small calls costs a wake-up of the proxy every 1.6 ms, not one per
 * call; the checks are due by the clock, whichever job is watched. */
typedef struct braid_gpu_pace {
    unsigned looks;
    double next_check, next_peers;
} braid_gpu_pace_t;

/* Wait until the job (ops: heap ops, entered) has ended on the device, bounded and
 * checked (st0 < 0: it failed already); on a failure the communicator fails and the
 * engine is released. Then finish, leave and free the ops. Returns how it ended. */
braid_status_t braid_comm_gpu_watch(braid_comm_t *comm, braid_gpu_pace_t *pace,
                                    braid_op_t **ops, int n, const braid_gpu_job_t *job,
                                    braid_status_t st0);

#endif
