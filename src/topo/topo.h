/*
 * Topology: the hardware of this host (hwloc), and the layout of a communicator's ranks on
 * hosts with the class of the link between any two of them.
 *
 * The layout is a pure function of every rank's (host id, NUMA node), which all ranks hold
 * after the bootstrap, so every rank computes the same table. Hosts are numbered in the
 * order of their lowest rank; the ranks of a host are listed in ascending order and a
 * rank's local rank is its place in that list.
 */
#ifndef BRAID_TOPO_TOPO_H
#define BRAID_TOPO_TOPO_H

#include <stdint.h>

#include "base/status.h"

/* How two ranks reach each other, cheapest first. */
typedef enum braid_link {
    BRAID_LINK_SELF = 0,   /* the same rank */
    BRAID_LINK_NUMA = 1,   /* the same host and NUMA node */
    BRAID_LINK_HOST = 2,   /* the same host, other NUMA nodes (or one of them unknown) */
    BRAID_LINK_NET = 3,    /* different hosts */
    BRAID_LINK_NCLASSES = 4
} braid_link_t;

const char *braid_link_name(braid_link_t l);

typedef struct braid_topo {
    int nranks, nhosts;
    int *host_of;       /* [nranks]: the rank's host, 0 .. nhosts-1 */
    int *local_rank;    /* [nranks]: its place among its host's ranks */
    int *host_first;    /* [nhosts + 1]: host h's ranks are host_ranks[host_first[h] ..] */
    int *host_ranks;    /* [nranks]: the ranks grouped by host, ascending in each */
    int *numa;          /* [nranks]: NUMA node, -1 when unknown */
    int maxlocal;       /* ranks on the host with the most */
    int ring_out;       /* most ring links r -> r+1 (mod nranks) leaving one host */
    braid_link_t worst; /* the slowest link class between two ranks */
} braid_topo_t;

/* Build the layout from each rank's host id and NUMA node (numa may be NULL: unknown).
 * Frees nothing on failure; braid_topo_free is safe on a zeroed or partly built table. */
braid_status_t braid_topo_build(braid_topo_t *t, int nranks, const uint64_t *host_ids,
                                const int *numa);
void braid_topo_free(braid_topo_t *t);

braid_link_t braid_topo_link(const braid_topo_t *t, int a, int b);

static inline int braid_topo_nlocal(const braid_topo_t *t, int host)
{
    return t->host_first[host + 1] - t->host_first[host];
}

/* Ranks per host when every host has the same number, else 0. */
int braid_topo_uniform(const braid_topo_t *t);

/* The NUMA node the calling thread runs on now (getcpu), -1 when unknown. */
int braid_numa_self(void);

/* This host's hardware, for braid-info and the tuner. */
#define BRAID_HW_MAXDEV 16
#define BRAID_HW_NAMELEN 48
typedef struct braid_host_hw {
    int npackages, ncores, npus, nnuma;
    size_t l2;          /* bytes of the first core's L2 cache; 0: unknown */
    int nnics, ngpus;   /* listed below up to BRAID_HW_MAXDEV each */
    char nics[BRAID_HW_MAXDEV][BRAID_HW_NAMELEN];  /* "eth0 (PCI 0000:3b:00.0)", "ib0" */
    char gpus[BRAID_HW_MAXDEV][BRAID_HW_NAMELEN];  /* "PCI 0000:65:00.0 NVIDIA 2330" */
    char source[48];    /* "hwloc API 2.8" */
} braid_host_hw_t;

/* Discover once per process (hwloc's I/O discovery takes milliseconds); later calls copy. */
braid_status_t braid_host_hw(braid_host_hw_t *hw);

#endif
