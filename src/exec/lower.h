/*
 * The order of a job's slice-steps on the GPU engine (src/exec/gpu.c).
 *
 * A job is the ops of one communicator that one call, or one group, hands the engine. The
 * engine lowers them onto the communicator's stream, a serial queue: a slice-step whose
 * peer has not sent yet (or whose send finds the peer's FIFO full) holds back everything
 * lowered after it. So this order alone decides whether ranks can block each other, and
 * the schedule simulator checks it (algorithms/sim.c, serial mode) for every algorithm:
 *
 *   1. the collectives, whole, one after another in call order; each op in the host
 *      executor's own order (src/exec/exec.c): stage by stage, and within a stage slice i
 *      of every step in step order, then slice i+1;
 *   2. then the sends and receives, round-robin: slice r of each in call order, then slice
 *      r + 1. Two ranks that each send the other more than a FIFO holds before they
 *      receive would otherwise wait for each other for ever (NCCL's grouped send/recv).
 *
 * Interleaving collectives round-robin too would not do: it deadlocks ring, tree and
 * rabenseifner pairs of a group (a collective's later step waits for a peer that is still
 * in the other collective's slices behind it on its own stream).
 *
 * Every op is cut into slices of its `slice` bytes (the caller sets it: the FIFO slot).
 * Both sides of every message cut it alike, so message k of a connection has the same
 * length at both ends.
 */
#ifndef BRAID_EXEC_LOWER_H
#define BRAID_EXEC_LOWER_H

#include <stddef.h>

#include "exec/exec.h"

typedef struct braid_lower_item {
    int op;                 /* index in the job's ops */
    int step;               /* step of that op's schedule */
    size_t off, len;        /* the slice: bytes [off, off + len) of the step */
} braid_lower_item_t;

/* Where one op stands in its own order. */
typedef struct braid_lower_pos {
    int stage_begin, stage_end, step;
    size_t iter, niter;
} braid_lower_pos_t;

typedef struct braid_lower {
    braid_op_t *const *ops;
    int nops;
    int phase;              /* 0: collectives, 1: sends and receives, 2: done */
    int cur;                /* the op whose turn it is */
    int moved;              /* phase 1: some op gave a slice-step this round */
    braid_lower_pos_t *pos; /* [nops] */
} braid_lower_t;

/* Start a job's order; `pos` has room for nops positions. */
void braid_lower_begin(braid_lower_t *l, braid_op_t *const *ops, int nops,
                       braid_lower_pos_t *pos);
/* The next slice-step: 1 with *it filled, 0 once every op is done. */
int braid_lower_next(braid_lower_t *l, braid_lower_item_t *it);

/* A send or a receive (round-robin), not a collective (whole). */
int braid_lower_is_p2p(const braid_op_t *op);

#endif
