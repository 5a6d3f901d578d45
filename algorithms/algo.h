/*
 * The algorithm table's functions: the build of a call's schedule (the algorithm the call
 * names, or the tuner's choice), the tuner's ranking, and the registration of user
 * schedules. The builder type and the table itself (braid_algo_t, braid_algos) are in
 * src/exec/sched.h with the schedule format, since message headers name algorithms by
 * their index.
 */
#ifndef BRAID_ALGORITHMS_ALGO_H
#define BRAID_ALGORITHMS_ALGO_H

#include <stddef.h>

#include "exec/sched.h"

/* The ring (algorithms/ring.c): the one algorithm that builds AllGatherV and
 * ReduceScatterV (braid_coll_t.vcounts set), which their calls force, and the one bucket
 * plans run: it reads each element of SEND once and writes each of RECV once, with its
 * final value, as views need (src/core/plan.c). */
extern const braid_algo_t braid_algo_ring;

/* An algorithm's index in braid_algos, or -1. */
int braid_algo_index(const braid_algo_t *a);

/* The collective an algorithm of one collective builds (user schedules). */
braid_coll_kind_t braid_algo_kind(const braid_algo_t *a);

/* Append a user schedule's algorithm (algorithms/usched.c, under its lock; the caller
 * checked that there is room). */
void braid_algo_register(const braid_algo_t *a);

/* Pick the algorithm and slice size for a call (the cheapest under coll->tune that builds
 * it: every rank picks the same) and build the schedule, with the slice in s->slice.
 * `algo_p` (may be NULL) receives the algorithm. */
braid_status_t braid_algo_build(const braid_coll_t *coll, braid_sched_t *s,
                                const braid_algo_t **algo_p);

/* The algorithms allowed for the call that take it, cheapest first, with their predicted
 * times (up to `max`) at their best slice size (`slices`, may be NULL: bytes); returns how
 * many. The slices tried are the model's (the communicator's slot) and its halves down to
 * BRAID_SLICE_MIN. */
#define BRAID_SLICE_MIN 4096
#define BRAID_SLICE_CUTS 6      /* halvings tried at most */
int braid_algo_rank(const braid_coll_t *coll, const braid_algo_t **algos, double *costs,
                    size_t *slices, int max);

/* One algorithm's predicted time for the call at its best slice (*slice_p; 0 and a
 * negative cost where it declines the call or has no cost function). */
double braid_algo_cost(const braid_coll_t *coll, const braid_algo_t *a, size_t *slice_p);

/* Bytes of the call's message per rank, as cost functions reason about it: the all-reduce,
 * broadcast and reduce buffer; the whole output of all-gather (nranks blocks) and the whole
 * input of reduce-scatter and all-to-all (for AllGatherV and ReduceScatterV: the blocks of
 * all ranks, count being their total). */
size_t braid_coll_bytes(const braid_coll_t *coll);

#endif
