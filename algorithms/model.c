/*
 * The cost model's defaults and the helpers every cost function uses. See model.h.
 */
#include <stdint.h>

#include "algorithms/model.h"
#include "exec/sched.h"
#include "algorithms/tune.h"

/*
 * Defaults, measured on the project's 2-core machines: a shared-memory hop 0.2 us and
 * ~5 GB/s per copy; a hop between veth namespaces ~3 us over TCP and ~2 GB/s; a
 * reduction ~6 GB/s of output per core; 0.05 us of executor work per step; a slice's
 * hand-over 0.2-0.25 us in shared memory and 1-1.5 us over TCP (a pair alone); 1 MiB of
 * L2 per rank (the calibration takes the host's from hwloc).
 */
const braid_model_t braid_model_default = {
    .alpha = { [BRAID_LINK_SELF] = 0.05, [BRAID_LINK_NUMA] = 0.2, [BRAID_LINK_HOST] = 0.3,
               [BRAID_LINK_NET] = 3.0 },
    .beta = { [BRAID_LINK_SELF] = 1.0 / 10e3, [BRAID_LINK_NUMA] = 1.0 / 5e3,
              [BRAID_LINK_HOST] = 1.0 / 4e3, [BRAID_LINK_NET] = 1.0 / 2e3 },
    .gamma = 1.0 / 6e3,
    .step = 0.05,
    .cache = 1 << 20,
    .slice = 256 * 1024,
    .slice_cost = { [BRAID_LINK_SELF] = 0.05, [BRAID_LINK_NUMA] = 0.25,
                    [BRAID_LINK_HOST] = 0.25, [BRAID_LINK_NET] = 1.0 },
    .cpu_share = 1,
};

/*
 * The device's, documented: on the GPU engine a slice-step is a kernel launch and a batch
 * of stream memory operations (some 2-4 us and 1-2 us queued on a GPU: 4 us a step), a
 * hand-over is a peer's write seen by a wait (1 us), a hop's byte is copied by a kernel
 * from one GPU's memory into a peer's FIFO (NVLink or xGMI between GPUs, some 100-300
 * GB/s; the same memory, 1-3 TB/s, where ranks share a GPU: 200 GB/s here, the slower
 * side), combining two inputs costs a copy's time again; slices are the FIFO's slot (2
 * MiB, as BRAID_P2P_SLOT_SIZE). The network's figures stay the host's.
 */
const braid_model_t braid_model_device = {
    .alpha = { [BRAID_LINK_SELF] = 1.0, [BRAID_LINK_NUMA] = 1.0, [BRAID_LINK_HOST] = 1.0,
               [BRAID_LINK_NET] = 3.0 },
    .beta = { [BRAID_LINK_SELF] = 1.0 / 200e3, [BRAID_LINK_NUMA] = 1.0 / 200e3,
              [BRAID_LINK_HOST] = 1.0 / 200e3, [BRAID_LINK_NET] = 1.0 / 2e3 },
    .gamma = 1.0 / 200e3,
    .step = 4.0,
    .cache = 1 << 20,
    .slice = 2 << 20,
    .slice_cost = { [BRAID_LINK_SELF] = 4.0, [BRAID_LINK_NUMA] = 4.0,
                    [BRAID_LINK_HOST] = 4.0, [BRAID_LINK_NET] = 1.0 },
    .cpu_share = 1,
};

const braid_model_t *braid_coll_model(const braid_coll_t *c)
{
    if (c->tune == NULL)
        return &braid_model_default;
    return c->device && c->tune->device_on ? &c->tune->device : &c->tune->model;
}

braid_link_t braid_coll_link(const braid_coll_t *c, int a, int b)
{
    if (a == b)
        return BRAID_LINK_SELF;
    return c->topo != NULL ? braid_topo_link(c->topo, a, b) : BRAID_LINK_NUMA;
}

braid_link_t braid_coll_worst(const braid_coll_t *c)
{
    if (c->nranks == 1)
        return BRAID_LINK_SELF;
    return c->topo != NULL ? c->topo->worst : BRAID_LINK_NUMA;
}

int braid_coll_nhosts(const braid_coll_t *c)
{
    return c->topo != NULL ? c->topo->nhosts : 1;
}

int braid_coll_maxlocal(const braid_coll_t *c)
{
    return c->topo != NULL ? c->topo->maxlocal : c->nranks;
}

double braid_model_steps(const braid_model_t *m, braid_link_t l, int nsteps, double b,
                         double share, double reduced)
{
    return nsteps * (m->alpha[l] + m->step) + nsteps * b * braid_model_beta(m, l, share) +
           braid_model_cuts(m, l, b, nsteps) + reduced * m->gamma;
}

double braid_model_fill(const braid_model_t *m, braid_link_t l, double b, int depth,
                        double share)
{
    return depth > 1 ? (depth - 1) * braid_model_slice(m, b) * braid_model_beta(m, l, share) : 0;
}

double braid_model_cuts(const braid_model_t *m, braid_link_t l, double b, double msgs)
{
    double slices = b > m->slice ? (double)(uint64_t)((b - 1) / m->slice) + 1 : 1;
    return msgs * (slices - 1) * m->slice_cost[l];
}

double braid_model_passes(const braid_model_t *m, const braid_coll_t *c, double bytes)
{
    double b = (double)braid_coll_bytes(c), from = m->cache / 8, to = m->cache / 2;
    double part = b <= from ? 0 : b >= to ? 1 : (b - from) / (to - from);
    return part * bytes * m->beta[BRAID_LINK_SELF];
}

double braid_model_nic_share(const braid_coll_t *c)
{
    int n = c->nranks, l = braid_coll_maxlocal(c);
    if (braid_coll_nhosts(c) < 2 || n < 2)
        return 1.0;
    return (double)l * (n - l) / (n - 1);
}
