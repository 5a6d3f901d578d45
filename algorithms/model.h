/*
 * The cost model of the tuner: how long a message takes on each class of link, and how
 * long a reduction takes, so that every algorithm can predict its time for a call.
 *
 *   time of one message of b bytes on link class L  =  alpha[L] + b * beta[L]
 *   time to combine b bytes (one operand into another) =  b * gamma
 *   the executor's own cost per step                    =  step
 *   what each slice of a message costs beyond its bytes =  slice_cost[L]
 *
 * A NET link stands for the host's network interface: ranks of one host that send to
 * other hosts at the same time share it, and cost functions charge their combined bytes
 * (braid_model_nic_share, braid_model_beta). The defaults are measured on the project's
 * 2-core CI machines (shm) and veth namespaces (net); the calibration at communicator
 * creation replaces them with what the communicator measures (src/core/calib.c).
 *
 * Cost functions (braid_algo_t.cost) return microseconds, or BRAID_COST_NONE when the
 * algorithm declines the call, which it must do exactly when its builder would decline.
 */
#ifndef BRAID_ALGORITHMS_MODEL_H
#define BRAID_ALGORITHMS_MODEL_H

#include <stddef.h>

#include "algorithms/algo.h"
#include "topo/topo.h"

typedef struct braid_model {
    double alpha[BRAID_LINK_NCLASSES];  /* us: latency of one message */
    double beta[BRAID_LINK_NCLASSES];   /* us per byte through one link */
    double gamma;                       /* us per byte combined by a reduction */
    double step;                        /* us: the executor's cost per step */
    double cache;                       /* bytes of L2 cache per rank: braid_model_passes */
    double slice;                       /* bytes per slice: the communicator's slot, or the
                                         * fraction of it the tuner tries (braid_algo_rank) */
    double slice_cost[BRAID_LINK_NCLASSES];     /* us: a slice's hand-over beyond its bytes */
    double cpu_share;                   /* ranks per CPU where they outnumber them, else 1:
                                         * braid_model_beta */
} braid_model_t;

#define BRAID_COST_NONE (-1.0)

extern const braid_model_t braid_model_default;
/* For device calls on the GPU engine (src/exec/gpu.h) where BRAID_CALIBRATE=0 keeps the
 * communicator from timing its device (src/core/calib.c), documented figures: model.c. */
extern const braid_model_t braid_model_device;

struct braid_coll;

/* The call's communicator's model (the default without a tuning), its device model for
 * a device call where the communicator runs them on the GPU engine: a builder that picks
 * among variants of its schedule asks it, as its cost function does, so both agree. */
const braid_model_t *braid_coll_model(const struct braid_coll *c);

/* The link class between ranks a and b of the call's communicator (no topology: one
 * host, one NUMA node). */
braid_link_t braid_coll_link(const struct braid_coll *c, int a, int b);
/* The slowest link class between any two ranks of the call's communicator. */
braid_link_t braid_coll_worst(const struct braid_coll *c);
/* Hosts of the call's communicator, and ranks on the host with the most (1 and nranks
 * without a topology). */
int braid_coll_nhosts(const struct braid_coll *c);
int braid_coll_maxlocal(const struct braid_coll *c);

/*
 * What a byte costs a rank over link class l while `share` senders use the link at once
 * (a host's NIC; 1 elsewhere). The calibration measures the network with one pair alone,
 * and inside a host with every rank at work (src/core/calib.c); where ranks outnumber
 * CPUs, they also take turns moving bytes between hosts (TCP copies them), so a byte there
 * costs at least the ranks per CPU times a lone pair's. The larger of the two shares
 * bounds it: they are one bottleneck where the CPUs carry the network (namespaces on one
 * machine), and either one where they do not.
 */
static inline double braid_model_beta(const braid_model_t *m, braid_link_t l, double share)
{
    if (l == BRAID_LINK_NET && share < m->cpu_share)
        share = m->cpu_share;
    return m->beta[l] * share;
}

/* One message of b bytes over link class l. */
static inline double braid_model_msg(const braid_model_t *m, braid_link_t l, double b)
{
    return m->alpha[l] + b * braid_model_beta(m, l, 1);
}

/*
 * A sequence of `nsteps` dependent steps of `b` bytes each over link class l, pipelined
 * slice by slice (a ring, a chain): latency paid per step, bandwidth per byte once per
 * step, each step's slices (braid_model_cuts), plus `reduced` bytes combined along the
 * way. `share` senders use each link at once (a NIC shared by the ranks of a host; 1
 * elsewhere).
 */
double braid_model_steps(const braid_model_t *m, braid_link_t l, int nsteps, double b,
                         double share, double reduced);

/* The NIC share of an exchange in which every rank sends `per_peer` bytes to every other
 * rank at once: the bytes one host's ranks send off the host, over what one rank sends. */
double braid_model_nic_share(const struct braid_coll *c);

/* One rank: the call is a local copy of b bytes. */
static inline double braid_model_local(const braid_model_t *m, double b)
{
    return m->step + b * m->beta[BRAID_LINK_SELF];
}

/*
 * Extra passes over the user's buffers: an algorithm of several stages writes what it
 * receives into the buffer and reads it again in a later stage, where the ring's fused
 * steps go from slot to slot in cache. Measured on 4 ranks, 128 MiB: Rabenseifner moves
 * the ring's bytes and takes 1.4x its time. While a rank's buffers stay in its cache the
 * passes cost next to nothing (4 ranks, 32 KiB: Rabenseifner 0.88x the ring's time). A
 * rank's working set is several times the call's bytes (its two buffers, scratch, the
 * slots peers write into), so the passes are free up to m->cache / 8 of the call's bytes,
 * charged one copy's cost per byte from m->cache / 2 up, and linearly in between.
 */
double braid_model_passes(const braid_model_t *m, const struct braid_coll *c, double bytes);

/* Bytes of one slice for a message of b bytes: the pipeline's fill and drain unit. */
static inline double braid_model_slice(const braid_model_t *m, double b)
{
    return b < m->slice ? b : m->slice;
}

/*
 * What slicing costs, the two sides the tuner weighs when it picks the slice size:
 * - fill: a pipeline `depth` hops deep over link class l carries one slice of a b-byte
 *   message through depth-1 hops before the last hop starts (share: senders per link);
 * - cuts: a rank that moves `msgs` messages of b bytes, each in slices, pays every slice's
 *   hand-over beyond a message's first.
 * Smaller slices shorten the fill and add cuts.
 */
double braid_model_fill(const braid_model_t *m, braid_link_t l, double b, int depth,
                        double share);
double braid_model_cuts(const braid_model_t *m, braid_link_t l, double b, double msgs);

#endif
