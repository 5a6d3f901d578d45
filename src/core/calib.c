/*
 * Calibration: see calib.h.
 *
 * Inside a host, on every host at the same time:
 *   local ranks 2k <-8 B-> 2k+1, round trips      x CALIB_REPS_SMALL: alpha = the median / 2
 *   every local rank sends 1 MiB to the next one  x CALIB_REPS_SWAP: beta from the mean, less
 *   and receives 1 MiB from the previous one        half a small round trip
 *   the same in BRAID_SLICE_MIN slices            x CALIB_REPS_SWAP: slice_cost from the
 *                                                   difference, per extra slice
 * The exchanges go around a ring of the host's ranks, which all send and receive at once,
 * as in a collective's step: where ranks outnumber cores, a message then pays for the other
 * ranks' turns on the cores, and every copy for the memory bandwidth they share. Between
 * hosts, rank 0 and the first rank of the next host alone, in round trips: 8 B x
 * CALIB_REPS_SMALL, 1 MiB x CALIB_REPS_LARGE and the same in slices, the medians (the model
 * charges a NIC's sharing itself, and so the ranks per CPU: braid_model_beta). Rank 0 also
 * times a reduction alone; where the ranks on its kernel outnumber their CPUs, it scales
 * that and the copy rate (beta of SELF) by the ranks per CPU (cpu_share).
 *
 * Then every rank takes rank 0's model from a bootstrap all-gather, which also tells
 * whether every rank had it cached (then nothing was measured). Two all-gathers at most,
 * and 15-120 ms of messages (on the 2-core CI machines: 2 processes 15-19 ms, 4 processes
 * 22-30 ms, 2 x 2 over TCP between namespaces 67-115 ms).
 *
 * A communicator on the GPU engine also times its device, every rank at once on its
 * engine's stream (braid_gpu_measure: launches, batches of stream memory operations, a
 * slice's copy and reduction into a peer's FIFO), for the model of its device calls; rank
 * 0's again, in two more all-gathers at most.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/calib.h"
#include "core/enqueue.h"
#include "exec/exec.h"
#include "exec/gpu.h"
#include "base/log.h"
#include "base/param.h"

#define CALIB_SMALL 8
#define CALIB_LARGE (1 << 20)
#define CALIB_REPS_SMALL 16
#define CALIB_REPS_LARGE 3     /* round trips; at most CALIB_REPS_SMALL */
#define CALIB_REPS_SWAP 7      /* exchanges; at most CALIB_REPS_SMALL */
#define CALIB_CACHE 8

typedef struct calib_entry {
    uint64_t sig;
    braid_model_t model;
} calib_entry_t;

static pthread_mutex_t calib_lock = PTHREAD_MUTEX_INITIALIZER;
static calib_entry_t calib_cache[CALIB_CACHE];
static int calib_ncached;

/* What the figures depend on: the layout, the provider and the slot size. */
static uint64_t calib_sig(const braid_comm_t *comm)
{
    uint64_t h = 1469598103934665603ull;
    const braid_topo_t *t = &comm->topo;
    for (int r = 0; r < t->nranks; r++)
        h = (h ^ (uint64_t)comm->peers[r].host_id ^ ((uint64_t)t->local_rank[r] << 48)) *
            1099511628211ull;
    for (const char *p = comm->config.net_name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return (h ^ comm->slot_size ^ ((uint64_t)t->nranks << 32)) * 1099511628211ull;
}

static int calib_lookup(uint64_t sig, braid_model_t *m)
{
    int hit = 0;
    pthread_mutex_lock(&calib_lock);
    for (int i = 0; i < calib_ncached && !hit; i++)
        if (calib_cache[i].sig == sig) {
            *m = calib_cache[i].model;
            hit = 1;
        }
    pthread_mutex_unlock(&calib_lock);
    return hit;
}

static void calib_store(uint64_t sig, const braid_model_t *m)
{
    pthread_mutex_lock(&calib_lock);
    calib_entry_t *e = &calib_cache[calib_ncached < CALIB_CACHE ? calib_ncached++
                                                                 : (int)(sig % CALIB_CACHE)];
    e->sig = sig;
    e->model = *m;
    pthread_mutex_unlock(&calib_lock);
}

static braid_status_t calib_p2p(braid_comm_t *comm, int send, int peer, void *buf, size_t n)
{
    braid_call_t call = { .kind = send ? BRAID_COLL_SEND : BRAID_COLL_RECV, .sendbuf = buf,
                          .recvbuf = buf, .count = n, .dtype = BRAID_UINT8, .op = -1,
                          .root = peer };
    return braid_enqueue(comm, &call);
}

/* This rank's partner in a ping-pong (-1: none) and whether it sends first; in exchanges,
 * the ranks it sends to and receives from. */
typedef struct calib_pair {
    int peer, lead, next, prev;
} calib_pair_t;

static int calib_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One exchange: send `bytes` to the next rank and receive as many from the previous one in
 * one group, as every rank sends and receives at once in a ring's step. */
static braid_status_t calib_swap(braid_comm_t *comm, calib_pair_t pair, unsigned char *buf,
                                 size_t bytes)
{
    braid_group_start();
    braid_status_t st = calib_p2p(comm, 1, pair.next, buf, bytes);
    if (st == BRAID_OK)
        st = calib_p2p(comm, 0, pair.prev, buf + CALIB_LARGE, bytes);
    braid_group_fail(st);
    return braid_group_end();
}

/* Rounds of `bytes` with the pair's peer, round trips: the median in us (a process that the
 * scheduler put to sleep once does not set the figure). Exchanges (swap): the mean, as a
 * ring's steps follow each other, a rank that ran ahead through its FIFO waiting later. */
static braid_status_t calib_rounds(braid_comm_t *comm, calib_pair_t pair, int swap,
                                   unsigned char *buf, size_t bytes, int reps, double *us_p)
{
    double t[CALIB_REPS_SMALL], sum = 0;
    int active = (swap ? pair.next : pair.peer) >= 0;
    for (int i = 0; i < reps && active; i++) {
        double t0 = braid_now();
        if (swap) {
            BRAID_CHECK(calib_swap(comm, pair, buf, bytes));
        } else {
            BRAID_CHECK(calib_p2p(comm, pair.lead, pair.peer, buf, bytes));
            BRAID_CHECK(calib_p2p(comm, !pair.lead, pair.peer, buf, bytes));
        }
        t[i] = (braid_now() - t0) * 1e6;
        sum += t[i];
    }
    if (active && swap) {
        *us_p = sum / reps;
    } else if (active) {
        qsort(t, (size_t)reps, sizeof(t[0]), calib_cmp);
        *us_p = t[reps / 2];
    }
    return BRAID_OK;
}

static double calib_slices(size_t slice)
{
    return (double)((CALIB_LARGE + slice - 1) / slice);
}

/* Measure the link class between rank 0 and its pair's peer into m (rank 0's figures
 * count); every rank runs it with its own pair. Latency from round trips of 8 bytes; the
 * per-byte and per-slice costs from exchanges (swap) or, one pair alone, round trips. */
static braid_status_t calib_link(braid_comm_t *comm, calib_pair_t pair, int swap,
                                 unsigned char *buf, braid_model_t *m)
{
    double small, large, cut = 0, ways = swap ? 1 : 2;
    int reps = swap ? CALIB_REPS_SWAP : CALIB_REPS_LARGE;
    size_t slot = comm->slot_size, slice = BRAID_SLICE_MIN;
    /* one warm-up of the large size first: connections, page faults */
    BRAID_CHECK(calib_rounds(comm, pair, swap, buf, CALIB_LARGE, 1, &large));
    BRAID_CHECK(calib_rounds(comm, pair, 0, buf, CALIB_SMALL, CALIB_REPS_SMALL, &small));
    BRAID_CHECK(calib_rounds(comm, pair, swap, buf, CALIB_LARGE, reps, &large));
    if (slice < slot) {             /* the small slices, set as BRAID_SLICE_SIZE would */
        size_t user = comm->tune.slice;
        comm->tune.slice = slice;
        braid_status_t st = calib_rounds(comm, pair, swap, buf, CALIB_LARGE, reps, &cut);
        comm->tune.slice = user;
        BRAID_CHECK(st);
    }
    if (comm->rank != 0)
        return BRAID_OK;
    braid_link_t l = braid_topo_link(&comm->topo, 0, pair.peer);
    double alpha = small / 2 - m->step;
    double beta = (large / ways - small / 2) / (CALIB_LARGE - CALIB_SMALL);
    m->alpha[l] = alpha > 0.01 ? alpha : 0.01;
    m->beta[l] = beta > 1e-7 ? beta : 1e-7;
    if (cut > 0) {
        double per = (cut - large) / ways / (calib_slices(slice) - calib_slices(slot));
        m->slice_cost[l] = per > 0.01 ? per : 0.01;
    }
    if (l == BRAID_LINK_NET)        /* the model adds the ranks per CPU: braid_model_beta */
        return BRAID_OK;
    /* Where ranks outnumber cores, a pipeline's ranks do not all run at once: a slice
     * handed on may wait for its receiver to be scheduled, which the pairs' alpha holds
     * (the exchanges miss most of it: a rank fills its FIFO before it yields). */
    if (comm->oversubscribed && m->slice_cost[l] < m->alpha[l])
        m->slice_cost[l] = m->alpha[l];
    /* one pair stands for every pair of the host */
    m->alpha[BRAID_LINK_NUMA] = m->alpha[BRAID_LINK_HOST] = m->alpha[l];
    m->beta[BRAID_LINK_NUMA] = m->beta[BRAID_LINK_HOST] = m->beta[l];
    m->slice_cost[BRAID_LINK_NUMA] = m->slice_cost[BRAID_LINK_HOST] = m->slice_cost[l];
    return BRAID_OK;
}

/* The combine rate of one core: a float sum of 1 MiB, best of three. */
static void calib_gamma(void *buf, braid_model_t *m)
{
    size_t count = CALIB_LARGE / 2 / sizeof(float);
    float *a = buf, *b = a + count;
    double best = 1e30;
    for (int i = 0; i < 3; i++) {
        double t0 = braid_now();
        braid_kern_reduce(BRAID_FP32, BRAID_OP_SUM, a, a, b, count, NULL);
        double t = (braid_now() - t0) * 1e6;
        best = t < best ? t : best;
    }
    m->gamma = best / (double)(count * sizeof(float));
}

static braid_status_t calib_measure(braid_comm_t *comm, braid_model_t *m)
{
    const braid_topo_t *t = &comm->topo;
    int me = comm->rank, h = t->host_of[me], li = t->local_rank[me];
    /* inside hosts, every host at once: local ranks 2k and 2k+1 ping-pong; all exchange
     * around a ring of the host's ranks */
    int nl = braid_topo_nlocal(t, h);
    const int *on = &t->host_ranks[t->host_first[h]];
    calib_pair_t local = { -1, !(li & 1), -1, -1 }, net = { -1, me == 0, -1, -1 };
    if ((li ^ 1) < nl)
        local.peer = on[li ^ 1];
    if (nl > 1) {
        local.next = on[(li + 1) % nl];
        local.prev = on[(li + nl - 1) % nl];
    }
    /* between hosts: rank 0 and the first rank of host 1 */
    int other = t->nhosts > 1 ? t->host_ranks[t->host_first[1]] : -1;
    net.peer = me == 0 ? other : me == other ? 0 : -1;
    unsigned char *buf = calloc(2, CALIB_LARGE);
    if (buf == NULL)
        return braid_err(BRAID_ERR_NOMEM, "calibration: out of memory");
    braid_status_t st = BRAID_OK;
    if (braid_topo_nlocal(t, 0) > 1)
        st = calib_link(comm, local, 1, buf, m);
    if (st == BRAID_OK && t->nhosts > 1)
        st = calib_link(comm, net, 0, buf, m);
    if (st == BRAID_OK && comm->rank == 0) {
        calib_gamma(buf, m);
        /* rank 0 combined alone; in a collective the ranks on this kernel combine and copy
         * at once, taking turns on its CPUs */
        m->cpu_share = comm->oversubscribed ? (double)comm->kernel_ranks / comm->kernel_cpus : 1;
        m->gamma *= m->cpu_share;
        m->beta[BRAID_LINK_SELF] = braid_model_default.beta[BRAID_LINK_SELF] * m->cpu_share;
        /* a core's L2, shared by the ranks on this kernel when they outnumber the cores
         * they may run on (no more than their CPUs) */
        braid_host_hw_t hw;
        int k = comm->kernel_ranks;
        if (braid_host_hw(&hw) == BRAID_OK && hw.l2 > 0 && hw.ncores > 0) {
            int cores = comm->kernel_cpus > 0 && comm->kernel_cpus < hw.ncores
                            ? comm->kernel_cpus : hw.ncores;
            m->cache = (double)hw.l2 / (k > cores ? (double)k / cores : 1);
        }
    }
    free(buf);
    return st;
}

typedef struct calib_msg {
    braid_model_t model;
    int32_t cached;
} calib_msg_t;

/* Every rank takes rank 0's model; returns whether every rank had its figures cached. */
static braid_status_t calib_share(braid_comm_t *comm, braid_model_t *m, int cached,
                                  int *all_cached_p)
{
    calib_msg_t mine = { *m, cached }, *all = calloc((size_t)comm->nranks, sizeof(mine));
    if (all == NULL)
        return braid_err(BRAID_ERR_NOMEM, "calibration: out of memory");
    braid_status_t st = braid_bootstrap_allgather(comm->bs, &mine, all, sizeof(mine));
    int every = 1;
    for (int r = 0; r < comm->nranks && st == BRAID_OK; r++)
        every &= all[r].cached != 0;
    if (st == BRAID_OK)
        *m = all[0].model;
    *all_cached_p = every;
    free(all);
    return st;
}

static braid_status_t calib_host(braid_comm_t *comm, braid_model_t *m)
{
    if (!comm->tune.calibrate || comm->nranks < 2)
        return BRAID_OK;
    uint64_t sig = calib_sig(comm);
    int cached = calib_lookup(sig, m), all_cached;
    double t0 = braid_now();
    BRAID_CHECK(calib_share(comm, m, cached, &all_cached));
    if (!all_cached) {
        BRAID_CHECK(calib_measure(comm, m));
        BRAID_CHECK(calib_share(comm, m, 0, &all_cached));
        calib_store(sig, m);
    }
    BRAID_INFO(BRAID_SUB_INIT, "calibration%s in %.1f ms: alpha numa %.2f net %.2f us, "
               "%.2f / %.2f GB/s, slice %.2f / %.2f us, reduce %.2f GB/s, cache %.0f KiB, "
               "%.2g ranks per CPU",
               all_cached ? " (cached)" : "", (braid_now() - t0) * 1e3,
               m->alpha[BRAID_LINK_NUMA], m->alpha[BRAID_LINK_NET],
               1e-3 / m->beta[BRAID_LINK_NUMA], 1e-3 / m->beta[BRAID_LINK_NET],
               m->slice_cost[BRAID_LINK_NUMA], m->slice_cost[BRAID_LINK_NET], 1e-3 / m->gamma,
               m->cache / 1024, m->cpu_share);
    return BRAID_OK;
}

/*
 * The device model of a communicator on the GPU engine, from its rates (gpu.h): a
 * slice-step costs a launch and a batch of memory operations, and each extra slice of a
 * message one more; a message's latency, a hand-over between ranks (a lap of their ring
 * over the engine's connections, per rank); a byte of a hop, the kernel's copy
 * into the peer's FIFO, also a local copy's; gamma, what a reduction takes beyond a copy.
 * A step, hand-over or copy timed as nothing (the clock could not tell twice the work from
 * once) keeps the documented figure. The network's figures stay the host model's (the
 * engine runs only between the ranks of a host).
 */
static void calib_device_model(const braid_gpu_rates_t *r, const braid_model_t *host,
                               size_t slice, braid_model_t *m)
{
    *m = braid_model_device;
    if (r->launch_us + r->batch_us > 0)
        m->step = r->launch_us + r->batch_us;
    for (int l = 0; l < BRAID_LINK_NCLASSES; l++) {
        if (l == BRAID_LINK_NET)
            continue;
        if (r->handover_us > 0)
            m->alpha[l] = r->handover_us;
        if (r->copy_us_per_byte > 0)
            m->beta[l] = r->copy_us_per_byte;
        m->slice_cost[l] = m->step;
    }
    m->alpha[BRAID_LINK_NET] = host->alpha[BRAID_LINK_NET];
    m->beta[BRAID_LINK_NET] = host->beta[BRAID_LINK_NET];
    m->slice_cost[BRAID_LINK_NET] = host->slice_cost[BRAID_LINK_NET];
    m->gamma = r->reduce_us_per_byte;
    m->slice = (double)slice;
}

static braid_status_t calib_barrier(void *comm)
{
    return braid_bootstrap_barrier(((braid_comm_t *)comm)->bs);
}

/* The device's timing waits for its stream at most BRAID_TIMEOUT (0: no limit), and no
 * longer than its peers live: its laps wait for the previous rank's messages, which a dead
 * or failed rank never sends (the engine is then released, so that its stream ends). A
 * dead rank is named before one that ended its part (most likely on seeing that death). */
static braid_status_t calib_device_check(void *arg, double waited_s)
{
    braid_comm_t *comm = arg;
    for (int pass = 0; pass < 2; pass++)
        for (int r = 0; r < comm->nranks; r++) {
            braid_peer_health_t h;
            if (r == comm->rank)
                continue;
            braid_comm_peer(comm, r, &h);
            const char *why = h.gone ? h.why : pass ? braid_peer_state_word(h.state) : NULL;
            if (why != NULL) {
                braid_gpu_release(comm->gpu);
                return braid_err(BRAID_ERR_REMOTE, "rank %d (pid %d on %s) %s while rank %d "
                                 "times its device at init", r, (int)comm->peers[r].pid,
                                 comm->peers[r].hostname, why, comm->rank);
            }
        }
    double limit = (double)braid_param_int(BRAID_P_TIMEOUT);
    if (limit > 0 && waited_s >= limit)
        return braid_err(BRAID_ERR_TIMEOUT, "rank %d: the device calibration's work on its "
                         "GPU engine's stream has not finished after %.0f s (BRAID_TIMEOUT): "
                         "braid's kernels or stream memory operations never end on device %d",
                         comm->rank, waited_s, braid_gpu_ordinal(comm->gpu));
    return BRAID_OK;
}

/* The device model: timed by every rank at once, rank 0's taken (cached as the host's,
 * by layout and the engine's slot); the documented one without calibration. */
static braid_status_t calib_device(braid_comm_t *comm)
{
    braid_model_t *m = &comm->tune.device;
    size_t slice = braid_gpu_slice(comm->gpu);
    *m = braid_model_device;
    m->slice = (double)slice;
    comm->tune.device_on = 1;
    if (!comm->tune.calibrate || comm->nranks < 2)
        return BRAID_OK;
    uint64_t sig = (calib_sig(comm) ^ slice ^ 0x6465766963650000ull) * 1099511628211ull;
    int cached = calib_lookup(sig, m), all_cached;
    double t0 = braid_now();
    BRAID_CHECK(calib_share(comm, m, cached, &all_cached));
    if (!all_cached) {
        braid_gpu_rates_t r;
        braid_device_wait_t w = { .check = calib_device_check, .arg = comm };
        BRAID_CHECK(braid_gpu_measure(comm->gpu, calib_barrier, &w, &r));
        calib_device_model(&r, &comm->tune.model, slice, m);
        BRAID_CHECK(calib_share(comm, m, 0, &all_cached));
        calib_store(sig, m);
    }
    BRAID_INFO(BRAID_SUB_INIT, "device calibration%s in %.1f ms: a slice-step %.2f us, a "
               "hand-over %.2f us, copies %.2f GB/s, reductions %.2f GB/s, %zu-byte slices",
               all_cached ? " (cached)" : "", (braid_now() - t0) * 1e3, m->step,
               m->alpha[BRAID_LINK_NUMA], 1e-3 / m->beta[BRAID_LINK_NUMA],
               1e-3 / (m->beta[BRAID_LINK_NUMA] + m->gamma), slice);
    return BRAID_OK;
}

braid_status_t braid_calibrate(braid_comm_t *comm)
{
    BRAID_CHECK(calib_host(comm, &comm->tune.model));   /* first: the device model takes
                                                          * the network's figures from it */
    return comm->gpu != NULL ? calib_device(comm) : BRAID_OK;
}
