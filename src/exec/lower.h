/*
 * The order of a job's slice-steps on the GPU engine (src/exec/gpu.c).
 *
 * A job is the ops of one communicator that one call, or one group, hands the engine. The
 * engine lowers them onto the communicator's stream, a serial queue: a slice-step whose
 * peer has not sent yet (or whose send finds the peer's FIFO full) holds back everything
 * lowered after it. So this order alone decides whether ranks can block each other, and
 * the schedule simulator checks it (algorithms/sim_serial.c) for every algorithm:
 *
 *   1. the collectives, whole, one after another in call order; each op in the host
 *      executor's own order (src/exec/exec.c): stage by stage, and within a stage slice i
 *      of every step in step order, then slice i+1;
 *   2. then the sends and receives in rounds: in each, one slice-step of a send to every
 *      peer that has one left, then one slice-step of a receive from every such peer; the
 *      sends to one peer go whole one after another in call order, and so do the
 *      receives, as NCCL matches the k-th send of a pair with its k-th receive.
 *      A connection carries at most one message per round, so whatever a slice-step waits
 *      for is a peer's earlier round: grouped sends and receives never block each other,
 *      whatever their order in the group, their sizes or the FIFO's depth (a receive
 *      grouped before the send it waits for, more sends to one peer than the FIFO holds).
 *
 * Interleaving collectives slice by slice would not do: it deadlocks ring, tree and
 * rabenseifner pairs of a group (a collective's later step waits for a peer that is still
 * in the other collective's slices behind it on its own stream), and more often it mixes
 * two collectives' messages on a connection they share.
 *
 * Every op is cut into slices of its `slice` bytes (the caller sets it: the tuner's slice
 * on the device model, at most the FIFO slot). Both sides of every message cut it alike,
 * so message k of a connection has the same length at both ends.
 */
#ifndef BRAID_EXEC_LOWER_H
#define BRAID_EXEC_LOWER_H

#include <stddef.h>
#include <stdint.h>

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
    int phase;              /* 0: collectives, 1: sends, 2: receives (of a round), 3: done */
    int cur;                /* the op whose turn it is */
    int moved;              /* some send or receive gave a slice-step this round */
    uint32_t round;
    braid_lower_pos_t *pos; /* [nops] */
    uint32_t *served;       /* [2 * nranks]: the round in which each peer last got a send,
                             * then a receive (NULL with fewer than two sends and receives) */
} braid_lower_t;

/* Start a job's order; `pos` has room for nops positions. */
braid_status_t braid_lower_begin(braid_lower_t *l, braid_op_t *const *ops, int nops,
                                 braid_lower_pos_t *pos);
/* The next slice-step: 1 with *it filled, 0 once every op is done. */
int braid_lower_next(braid_lower_t *l, braid_lower_item_t *it);
void braid_lower_end(braid_lower_t *l);

/* A send or a receive (round-robin), not a collective (whole). */
int braid_lower_is_p2p(const braid_op_t *op);

#endif
