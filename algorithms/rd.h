/*
 * Recursive doubling and halving over a power of two of participants: the building blocks
 * that algorithms/rd.c and algorithms/rabenseifner.c share.
 *
 * n ranks fold onto p = 2^k participants (p the largest power of two <= n): the first
 * 2 * (n - p) ranks pair up, the even rank of each pair hands its data to the odd one and
 * sits out, and every other rank takes part alone:
 *
 *   rank         0    1    2    3    4    5        (n = 6, p = 4, 2 pairs)
 *   participant  -    0    -    1    2    3
 *   blocks       [0   1]   [2   3]   [4]  [5]     blocks of participant v: rank b's block
 *                                                  for each rank b it stands for
 *
 * A range of participants [v0, v1) then covers a contiguous range of bytes: the blocks of
 * the ranks it stands for (all-gather, reduce-scatter) or chunks v0 .. v1-1 of the vector
 * cut into p chunks by braid_chunk (Rabenseifner's all-reduce).
 */
#ifndef BRAID_ALGORITHMS_RD_H
#define BRAID_ALGORITHMS_RD_H

#include "algorithms/model.h"
#include "exec/sched.h"

typedef struct braid_rd {
    int n, p, extra;    /* ranks, participants (a power of two), folded pairs (n - p) */
    int rounds;         /* log2(p) */
    int rank, vrank;    /* this rank and its participant index (-1: folded out) */
    int by_rank;        /* 1: participant v covers its ranks' blocks of `count` elements;
                         * 0: chunk v of `count` elements cut into p chunks */
    size_t count, es;   /* elements (per block or in all), element size */
} braid_rd_t;

/* Where a rank's partial of the reduction lies: its own contribution (flags REDUCE: it is
 * pre-multiplied where it is used) or a partial result (flags REDUCE | ACC). Both kinds of
 * buffer are laid out like the whole vector. */
typedef struct braid_rd_part {
    braid_buf_t buf;
    uint32_t flags;
} braid_rd_part_t;

void braid_rd_init(braid_rd_t *rd, const braid_coll_t *c, int by_rank);

/* The rank that stands for participant v. */
static inline int braid_rd_real(const braid_rd_t *rd, int v)
{
    return v < rd->extra ? 2 * v + 1 : v + rd->extra;
}

/* For the cost functions: `nsteps` hops of `bytes` each (`reduced` combined) in the round at
 * distance `dist` (dist 0: the fold's pairs 2v, 2v+1), on the slowest link between that
 * round's partners; in a round between hosts every rank of a host sends off it at once,
 * sharing its NIC. */
double braid_rd_round_cost(const braid_rd_t *rd, const braid_coll_t *c, const braid_model_t *m,
                           int dist, int nsteps, double bytes, double reduced);

/* Byte offset and length of the data of participants [v0, v1). */
void braid_rd_span(const braid_rd_t *rd, int v0, int v1, size_t *off_p, size_t *bytes_p);

/*
 * Recursive halving, one stage per round, distances p/2, p/4, ... down to dmin: each round
 * sends the partner the half of the current range that it keeps and combines the other
 * half into `acc`. *part says where this rank's partial lies and is updated. With `final`
 * the round of distance 1 applies BRAID_STEP_FINAL.
 */
braid_status_t braid_rd_halve(const braid_rd_t *rd, braid_sched_t *s, braid_rd_part_t *part,
                              braid_buf_t acc, int dmin, int final);

/* Recursive doubling, one stage per round, distances 1, 2, ... p/2: each round sends the
 * partner every participant's data this rank holds in `buf` and receives the partner's. */
braid_status_t braid_rd_double(const braid_rd_t *rd, braid_sched_t *s, braid_buf_t buf);

#endif
