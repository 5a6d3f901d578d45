/*
 * Pull steps of the executor (src/exec/sched.h): the per-call hello table, and reading a
 * peer's buffer, with plain loads when the peer is a thread of this process, else with
 * cross-memory attach (transport.h: braid_cma_read): straight into the destination for a
 * copy, or through a small bounce buffer that stays in cache for anything that computes.
 * Internal to src/exec/exec.c.
 */
#ifndef BRAID_CORE_EXEC_PULL_H
#define BRAID_CORE_EXEC_PULL_H

#include "exec/exec.h"

/* Check what the executor relies on for pulls and hellos; when the schedule uses them,
 * allocate the hello table with this rank's own record filled in. */
braid_status_t braid_exec_pull_prepare(braid_op_t *op);
/* Free what prepare allocated. */
void braid_exec_pull_release(braid_op_t *op);
/* Move bytes [off, off + len) of a pull step. Never waits. */
braid_status_t braid_exec_pull_slice(braid_op_t *op, const braid_step_t *st, size_t off,
                                     size_t len);

#endif
