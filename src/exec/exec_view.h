/*
 * Slices of operations whose SEND or RECV buffer is a view of the caller's tensors
 * (braid_view_t, src/exec/exec.h): the gather, cast and scale of a bucket plan fused into
 * the step that reads the tensors, the cast, scale and copy or accumulation into the step
 * that writes them (src/exec/exec_view.c).
 */
#ifndef BRAID_EXEC_EXEC_VIEW_H
#define BRAID_EXEC_EXEC_VIEW_H

#include "exec/exec.h"

/* Whether a step reads or writes a view. */
static inline int braid_exec_view_step(const braid_op_t *op, const braid_step_t *st)
{
    return op->views[st->src.buf] != NULL || op->views[st->dst.buf] != NULL;
}

/* Produce `len` bytes at offset `off` of step st: `in` the received slot (or NULL), `out`
 * the send slot (or NULL); with op->dev, the tensors are device memory. */
braid_status_t braid_exec_view_slice(const braid_op_t *op, const braid_step_t *st, char *out,
                                     const char *in, size_t off, size_t len);

#endif
