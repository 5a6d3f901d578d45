/*
 * Watching the GPU engine's jobs (src/core/gpu_watch.c), on the proxy thread of their
 * communicator.
 */
#ifndef BRAID_CORE_GPU_WATCH_H
#define BRAID_CORE_GPU_WATCH_H

#include "core/comm.h"
#include "exec/gpu.h"

/* Wait until the job (ops: heap ops, entered) has ended on the device, bounded and
 * checked (st0 < 0: it failed already); on a failure the communicator fails and the
 * engine is released. Then finish, leave and free the ops. Returns how it ended. */
braid_status_t braid_comm_gpu_watch(braid_comm_t *comm, braid_op_t **ops, int n,
                                    const braid_gpu_job_t *job, braid_status_t st0);

#endif
