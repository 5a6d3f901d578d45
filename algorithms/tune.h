/*
 * A communicator's tuning: the cost model its tuner uses and what NCCL_ALGO / NCCL_PROTO
 * allow, for every collective.
 *
 * NCCL_ALGO takes NCCL's syntax, names compared without case:
 *
 *     ring,tree                  only these, for every collective they apply to
 *     ^tree                      all but these
 *     allreduce:tree,ring;allgather:^bruck     per collective (later sections win)
 *
 * Names are braid's algorithm names (braid-info -a lists them) and NCCL's: "ring" also
 * names the chain broadcast/reduce (NCCL's ring), "pairwise" the direct all-to-all, and
 * NCCL's collnet*, nvls* and pat are known but braid has no such algorithm. A section
 * without a collective restricts only the collectives that keep an algorithm under it (the
 * others keep every algorithm); a section naming a collective must leave it one, or the
 * communicator's creation fails. An unknown name fails it too, with the list of known ones.
 * A call that no allowed algorithm takes (hier on one host, twoshot between processes that
 * cannot read each other's memory) fails with a message naming NCCL_ALGO.
 *
 * NCCL_PROTO takes the same syntax over LL, LL128 and Simple; braid has one protocol,
 * Simple-like (slots of whole slices), so the setting is checked and otherwise has no
 * effect (a warning says so when it leaves Simple out).
 */
#ifndef BRAID_ALGORITHMS_TUNE_H
#define BRAID_ALGORITHMS_TUNE_H

#include <stdint.h>

#include "algorithms/model.h"
#include "algorithms/sched.h"

typedef struct braid_tune {
    braid_model_t model;
    uint32_t allow[BRAID_COLL_NUM];     /* bit i: braid_algos[i] may run (only bits of
                                         * algorithms that build the collective) */
    char algo_spec[96];                 /* NCCL_ALGO as given, for messages ("": unset) */
    int calibrate;                      /* measure the model at creation (src/core/calib.c) */
    uint32_t proto[BRAID_COLL_NUM];     /* bit per protocol NCCL_PROTO allows (LL, LL128,
                                         * Simple) */
    /* The last choice per collective: bytes << 8 | (index in braid_algos + 1), 0 none. The
     * choice depends on a call only through its collective and bytes (the rest is the
     * communicator's), so a call of the same size reuses it (algorithms/algo.c). */
    _Atomic uint64_t last[BRAID_COLL_NUM];
} braid_tune_t;

enum { BRAID_PROTO_LL, BRAID_PROTO_LL128, BRAID_PROTO_SIMPLE, BRAID_NPROTOS };

/* The default model, every algorithm and protocol allowed. */
void braid_tune_init(braid_tune_t *t);

/* Apply NCCL_ALGO's value (NULL or empty: nothing) / NCCL_PROTO's. On error `t` is left as
 * it was and the message names the setting, the bad part and the known names. */
braid_status_t braid_tune_algo(braid_tune_t *t, const char *spec);
braid_status_t braid_tune_proto(braid_tune_t *t, const char *spec);

/* A hash of what the tuning allows, for the ranks to compare at init. */
uint64_t braid_tune_hash(const braid_tune_t *t);

#endif
