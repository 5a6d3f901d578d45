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
 *
 * NCCL_TUNER_PLUGIN loads an NCCL tuner plugin that may override the choice of broadcast,
 * reduce, all-gather, reduce-scatter and all-reduce (algorithms/tune_plugin.c).
 *
 * The tuner's choice of an algorithm and slice size for each call, and its cache, are in
 * algorithms/tuner.c.
 */
#ifndef BRAID_ALGORITHMS_TUNE_H
#define BRAID_ALGORITHMS_TUNE_H

#include <stdint.h>

#include "algorithms/model.h"
#include "exec/sched.h"

#define BRAID_TUNE_LOGGED 8

/* What the tuner's choice depends on in a call (the rest is the communicator's, the same
 * for every call): the key of its cache. */
typedef struct braid_tune_key {
    braid_coll_kind_t coll;
    size_t bytes;                       /* braid_coll_bytes; cached below 2^53 only */
} braid_tune_key_t;

typedef struct braid_tune {
    braid_model_t model;
    braid_model_t device;               /* device calls' where device_on: the communicator
                                         * runs them on the GPU engine (src/core/calib.c) */
    int device_on;
    uint32_t allow[BRAID_COLL_NUM];     /* bit i: braid_algos[i] may run (only bits of
                                         * algorithms that build the collective) */
    char algo_spec[96];                 /* NCCL_ALGO as given, for messages ("": unset) */
    int calibrate;                      /* measure the model at creation (src/core/calib.c) */
    size_t slice;                       /* BRAID_SLICE_SIZE: every call's slice (0: the
                                         * tuner's choice; at most model.slice) */
    uint32_t proto[BRAID_COLL_NUM];     /* bit per protocol NCCL_PROTO allows (LL, LL128,
                                         * Simple) */
    /* The choice cache: the last call's key and choice per collective (the key's coll is
     * the index), a call with the same key reuses it (algorithms/tuner.c). One word, so
     * that threads read and write an entry whole: key.bytes << 11 | halvings of the slice
     * (0-7) << 8 | (index in braid_algos + 1), 0 none. */
    _Atomic uint64_t last[BRAID_COLL_NUM];
    /* The last BRAID_TUNE_LOGGED choices (words as `last`) logged per collective, so that
     * sizes that alternate (a training step's buckets) log each choice once. */
    _Atomic uint64_t logged[BRAID_COLL_NUM][BRAID_TUNE_LOGGED];
    _Atomic uint32_t logged_next[BRAID_COLL_NUM];
    /* NCCL_TUNER_PLUGIN ("": none) and this communicator's context in it */
    char plugin_spec[128];
    int plugin_on;                      /* the plugin's init succeeded: ask it */
    void *plugin_ctx;
    _Atomic uint32_t plugin_warned;     /* bit per collective: a choice braid cannot run
                                         * was logged */
} braid_tune_t;

enum { BRAID_PROTO_LL, BRAID_PROTO_LL128, BRAID_PROTO_SIMPLE, BRAID_NPROTOS };

/* The default model, every algorithm and protocol allowed. */
void braid_tune_init(braid_tune_t *t);

/* Apply NCCL_ALGO's value (NULL or empty: nothing) / NCCL_PROTO's. On error `t` is left as
 * it was and the message names the setting, the bad part and the known names. */
braid_status_t braid_tune_algo(braid_tune_t *t, const char *spec);
braid_status_t braid_tune_proto(braid_tune_t *t, const char *spec);

/* Whether NCCL_ALGO knows the name (braid's, NCCL's, a loaded schedule's). */
int braid_tune_algo_known(const char *name);

/* A hash of what the tuning allows (and the tuner plugin's setting), for the ranks to
 * compare at init. */
uint64_t braid_tune_hash(const braid_tune_t *t);

/* NCCL_TUNER_PLUGIN's value (NULL, "" or "none": nothing): load the library once per
 * process; an error says why it cannot be used. Before the bootstrap. */
braid_status_t braid_tune_plugin_load(braid_tune_t *t, const char *value);
/* The plugin's init for this communicator (nothing without a plugin): `nhosts` hosts of
 * `minlocal` to `maxlocal` ranks each. */
braid_status_t braid_tune_plugin_init(braid_tune_t *t, uint64_t comm_id, int nranks,
                                      int nhosts, int minlocal, int maxlocal);
/* The plugin's finalize for this communicator (nothing when its init did not run). */
void braid_tune_plugin_fini(braid_tune_t *t);
/* Ask the plugin about the call, given braid's ranking (order/costs/cuts, n entries,
 * cheapest first; cuts: the slices' halvings): 1 when it chose one of them, which is then
 * moved to order[0] with its cuts; else 0. */
int braid_tune_plugin_pick(const braid_coll_t *coll, const braid_algo_t **order,
                           const double *costs, int *cuts, int n);
/* The loaded plugin's name, for messages. */
const char *braid_tune_plugin_name(void);

/* The tuner's answer for a call: the algorithms to try, in order, each with its slice. */
typedef struct braid_tune_plan {
    braid_tune_key_t key;
    int n;
    const braid_algo_t *order[BRAID_ALGOS_MAX];
    int cuts[BRAID_ALGOS_MAX];          /* each one's slice: halvings of the model's */
    const braid_algo_t *own;            /* braid's first where the tuner plugin put another
                                         * first, for the log; else NULL */
    uint64_t last;                      /* the cache's word for the collective when planned */
} braid_tune_plan_t;

/* Plan a call that names no algorithm (coll->force NULL): the cached choice where the
 * call's key is the collective's last one, else the algorithms that NCCL_ALGO allows and
 * that take the call, cheapest first (braid_algo_rank), then as the tuner plugin reorders
 * them. No tuning (coll->tune NULL): no cache, every algorithm allowed. */
void braid_tune_plan_make(const braid_coll_t *coll, braid_tune_plan_t *plan_p);
/* plan->order[i] built the call: its slice size in bytes. The choice becomes the cache's
 * for the collective, and where it is new, a line of the log at TUNING. */
size_t braid_tune_plan_commit(const braid_coll_t *coll, const braid_tune_plan_t *plan, int i);

#endif
