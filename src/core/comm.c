/*
 * Communicator lifecycle: registry of live handles, init (inline or on a thread), split,
 * shrink, finalize, revoke, destroy and abort.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "base/log.h"
#include "base/param.h"
#include "base/proc.h"
#include "device/device.h"
#include "algorithms/usched.h"
#include "core/calib.h"
#include "core/flight.h"
#include "core/proxy.h"
#include "exec/gpu.h"
#include "topo/host.h"

/* ---- registry of live communicators -------------------------------------------------- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static braid_comm_t **registry;
static int registry_len, registry_cap;

static braid_status_t registry_add(braid_comm_t *comm)
{
    pthread_mutex_lock(&registry_lock);
    if (registry_len == registry_cap) {
        int cap = registry_cap ? 2 * registry_cap : 16;
        braid_comm_t **r = realloc(registry, (size_t)cap * sizeof(*r));
        if (r == NULL) {
            pthread_mutex_unlock(&registry_lock);
            return braid_err(BRAID_ERR_NOMEM, "out of memory registering a communicator");
        }
        registry = r;
        registry_cap = cap;
    }
    registry[registry_len++] = comm;
    pthread_mutex_unlock(&registry_lock);
    return BRAID_OK;
}

static int registry_find(const braid_comm_t *comm)
{
    for (int i = 0; i < registry_len; i++)
        if (registry[i] == comm)
            return i;
    return -1;
}

braid_status_t braid_comm_unregister(braid_comm_t *comm, const char *what)
{
    pthread_mutex_lock(&registry_lock);
    int i = comm != NULL ? registry_find(comm) : -1;
    if (i >= 0)
        registry[i] = registry[--registry_len];
    pthread_mutex_unlock(&registry_lock);
    if (i >= 0)
        return BRAID_OK;
    if (comm == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: comm is NULL", what);
    return braid_err(BRAID_ERR_INVALID, "%s: comm %p is not a live communicator (never created, "
                     "or already destroyed or aborted)", what, (void *)comm);
}

int braid_comm_is_live(const braid_comm_t *comm)
{
    pthread_mutex_lock(&registry_lock);
    int live = comm != NULL && registry_find(comm) >= 0;
    pthread_mutex_unlock(&registry_lock);
    return live;
}

static const char *state_name(int st)
{
    switch (st) {
    case BRAID_COMM_INITIALIZING: return "still initializing";
    case BRAID_COMM_READY: return "ready";
    case BRAID_COMM_ERROR: return "in error after a failed call";
    case BRAID_COMM_REVOKED: return "revoked";
    case BRAID_COMM_FINALIZED: return "finalized";
    case BRAID_COMM_ABORTED: return "aborted";
    default: return "in an unknown state";
    }
}

braid_status_t braid_comm_enter(braid_comm_t *comm, const char *what, int need_ready)
{
    braid_status_t st = BRAID_OK;
    pthread_mutex_lock(&registry_lock);
    if (comm == NULL) {
        st = braid_err(BRAID_ERR_INVALID, "%s: comm is NULL", what);
    } else if (registry_find(comm) < 0) {
        st = braid_err(BRAID_ERR_INVALID, "%s: comm %p is not a live communicator (never "
                       "created, or already destroyed or aborted)", what, (void *)comm);
    } else {
        int s = atomic_load(&comm->state);
        if (need_ready && s != BRAID_COMM_READY) {
            braid_status_t bad = s == BRAID_COMM_ERROR ? atomic_load(&comm->async_status)
                                                       : BRAID_ERR_USAGE;
            st = braid_err(bad < 0 ? bad : BRAID_ERR_USAGE,
                           "%s: communicator (rank %d of %d) is %s; only destroy, abort, split "
                           "or shrink can be called on it", what, comm->rank, comm->nranks,
                           state_name(s));
        } else {
            atomic_fetch_add(&comm->busy, 1);
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return st;
}

void braid_comm_leave(braid_comm_t *comm)
{
    atomic_fetch_sub(&comm->busy, 1);
}

/* ---- init --------------------------------------------------------------------------- */

braid_status_t braid_comm_alloc(const braid_comm_config_t *cfg, braid_comm_t **comm_p)
{
    braid_comm_t *comm = calloc(1, sizeof(*comm));
    if (comm == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory allocating a communicator");
    comm->magic = BRAID_COMM_MAGIC;
    comm->config = *cfg;
    comm->rank = -1;
    atomic_init(&comm->state, BRAID_COMM_INITIALIZING);
    atomic_init(&comm->async_status, BRAID_INPROGRESS);
    atomic_init(&comm->busy, 0);
    pthread_mutex_init(&comm->lock, NULL);
    braid_status_t st = registry_add(comm);  /* braid_comm_free expects it unregistered */
    if (st < 0) {
        pthread_mutex_destroy(&comm->lock);
        free(comm);
        return st;
    }
    *comm_p = comm;
    return BRAID_OK;
}

static void peer_info_fill(braid_peer_info_t *me, int cudev, uint64_t tune_hash)
{
    memset(me, 0, sizeof(*me));
    me->host_id = braid_host_id();
    me->machine_id = braid_machine_id();
    me->pid = (int32_t)getpid();
    me->starttime = braid_proc_self_starttime();
    me->cudev = cudev;
    me->slot_size = (uint64_t)braid_param_int(BRAID_P_SHM_SLOT_SIZE);
    me->nslots = (uint32_t)braid_param_int(BRAID_P_SHM_NSLOTS);
    me->numa = braid_numa_self();
    me->p2p = braid_device() != &braid_device_host && braid_param_int(BRAID_P_P2P) != 0;
    me->tune_hash = tune_hash;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && c < 64 * BRAID_CPU_WORDS; c++)
            if (CPU_ISSET(c, &set))
                me->cpus[c / 64] |= UINT64_C(1) << (c % 64);
    snprintf(me->hostname, sizeof(me->hostname), "%s", braid_host_name());
}

/* Create the bootstrap handle first and publish it, so that an abort from another thread
 * can interrupt the join (nonblocking and grouped inits run on their own thread). */
static braid_status_t comm_bootstrap(braid_comm_t *comm, const braid_comm_init_args_t *a)
{
    braid_peer_info_t me;
    braid_bootstrap_t *bs;
    if (a->parent != NULL) {
        BRAID_CHECK(braid_bootstrap_split_create(a->parent->bs, a->rank, a->nranks, a->members,
                                                 a->tag, &bs));
        if (a->watch_parent)
            braid_bootstrap_watch_parent(bs, a->parent->bs);
    } else {
        peer_info_fill(&me, a->cudev, braid_tune_hash(&comm->tune));
        BRAID_CHECK(braid_bootstrap_create(&a->uid, a->rank, a->nranks, &me, sizeof(me), &bs));
    }
    pthread_mutex_lock(&comm->lock);
    comm->bs = bs;
    int aborted = atomic_load(&comm->state) == BRAID_COMM_ABORTED;
    pthread_mutex_unlock(&comm->lock);
    if (aborted)
        return braid_err(BRAID_ERR_ABORTED, "init of rank %d aborted", a->rank);
    return braid_bootstrap_join(bs);
}

static braid_status_t comm_tables(braid_comm_t *comm)
{
    int n = comm->nranks;
    comm->peers = calloc((size_t)n, sizeof(*comm->peers));
    comm->send_conns = calloc((size_t)n, sizeof(*comm->send_conns));
    comm->recv_conns = calloc((size_t)n, sizeof(*comm->recv_conns));
    comm->p2p_send_seq = calloc((size_t)n, sizeof(uint64_t));
    comm->p2p_recv_seq = calloc((size_t)n, sizeof(uint64_t));
    if (!comm->peers || !comm->send_conns || !comm->recv_conns || !comm->p2p_send_seq ||
        !comm->p2p_recv_seq)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for the tables of %d ranks", n);
    uint64_t *ids = malloc((size_t)n * sizeof(*ids));
    int *numa = malloc((size_t)n * sizeof(*numa));
    braid_status_t st = ids && numa ? BRAID_OK
                                    : braid_err(BRAID_ERR_NOMEM, "out of memory for %d ranks", n);
    for (int r = 0; r < n && st == BRAID_OK; r++) {
        memcpy(&comm->peers[r], braid_bootstrap_info(comm->bs, r), sizeof(braid_peer_info_t));
        comm->peers[r].hostname[sizeof(comm->peers[r].hostname) - 1] = '\0';   /* a peer's
                                                  * bytes: messages print it */
        ids[r] = comm->peers[r].host_id;
        numa[r] = comm->peers[r].numa;
    }
    if (st == BRAID_OK)
        st = braid_topo_build(&comm->topo, n, ids, numa);
    free(ids);
    free(numa);
    return st;
}

/* The communicator's ranks on this kernel, and whether they outnumber the CPUs those ranks
 * may run on together (ranks bound to a core each are not oversubscribed; hosts emulated
 * with NCCL_HOSTID in network namespaces share one machine's cores). Every rank on a
 * kernel comes to the same answer. */
static void comm_kernel_ranks(braid_comm_t *comm)
{
    uint64_t any[BRAID_CPU_WORDS] = { 0 };
    int cpus = 0;
    comm->kernel_ranks = 0;
    for (int r = 0; r < comm->nranks; r++) {
        if (comm->peers[r].machine_id != comm->peers[comm->rank].machine_id)
            continue;
        comm->kernel_ranks++;
        for (int w = 0; w < BRAID_CPU_WORDS; w++)
            any[w] |= comm->peers[r].cpus[w];
    }
    for (int w = 0; w < BRAID_CPU_WORDS; w++)
        cpus += __builtin_popcountll(any[w]);
    memcpy(comm->kernel_cpu_mask, any, sizeof(any));
    comm->kernel_cpus = cpus;
    comm->oversubscribed = cpus > 0 && comm->kernel_ranks > cpus;
    BRAID_INFO(BRAID_SUB_INIT, "%d ranks of the communicator on this machine, %d CPUs for "
               "them: %s", comm->kernel_ranks, cpus, comm->oversubscribed
               ? "oversubscribed, waiting ranks yield" : "waiting ranks spin first");
}

static braid_status_t comm_slots(braid_comm_t *comm)
{
    const braid_peer_info_t *r0 = &comm->peers[0];
    /* rank 0's settings win so that every rank slices alike */
    if (r0->nslots < 2 || r0->nslots > 1024)
        return braid_err(BRAID_ERR_INVALID, "BRAID_SHM_NSLOTS=%u on rank 0: use 2 to 1024",
                         r0->nslots);
    if (r0->slot_size < 64 || r0->slot_size > (1ull << 30))
        return braid_err(BRAID_ERR_INVALID, "BRAID_SHM_SLOT_SIZE=%llu on rank 0: use 64 bytes "
                         "to 1 GiB", (unsigned long long)r0->slot_size);
    comm->slot_size = (size_t)(r0->slot_size + 63) / 64 * 64;
    return BRAID_OK;
}

/* NCCL_ALGO, NCCL_PROTO and NCCL_TUNER_PLUGIN, before the bootstrap: a bad value fails at
 * once. */
static braid_status_t comm_tune_parse(braid_comm_t *comm)
{
    BRAID_CHECK(braid_usched_load_param(braid_param_str(BRAID_P_SCHEDULES)));
    braid_tune_init(&comm->tune);
    BRAID_CHECK(braid_tune_algo(&comm->tune, braid_param_str(BRAID_P_ALGO)));
    BRAID_CHECK(braid_tune_proto(&comm->tune, braid_param_str(BRAID_P_PROTO)));
    comm->tune.calibrate = (int)braid_param_int(BRAID_P_CALIBRATE);
    comm->tune.slice = (size_t)braid_param_int(BRAID_P_SLICE_SIZE);
    BRAID_CHECK(braid_tune_plugin_load(&comm->tune, braid_param_str(BRAID_P_TUNER_PLUGIN)));
    for (int k = 0; k < BRAID_COLL_NUM; k++)
        if (!(comm->tune.proto[k] & (1u << BRAID_PROTO_SIMPLE))) {
            BRAID_WARN("NCCL_PROTO=\"%s\" leaves out Simple for %s: braid has only its "
                       "Simple-like protocol and uses it", braid_param_str(BRAID_P_PROTO),
                       braid_coll_name(k));
            break;
        }
    return BRAID_OK;
}

/* Every rank must choose algorithms alike: the same NCCL_ALGO/NCCL_PROTO masks, slice
 * size and tuner plugin. */
static braid_status_t comm_tune_agree(braid_comm_t *comm)
{
    for (int r = 1; r < comm->nranks; r++)
        if (comm->peers[r].tune_hash != comm->peers[0].tune_hash)
            return braid_err(BRAID_ERR_INVALID, "NCCL_ALGO/NCCL_PROTO/BRAID_CALIBRATE/"
                             "BRAID_SLICE_SIZE/NCCL_TUNER_PLUGIN differ between ranks: rank "
                             "%d's allow other algorithms or protocols, calibrate otherwise, "
                             "slice otherwise or name another tuner plugin than rank 0's (this "
                             "rank has NCCL_ALGO=\"%s\", BRAID_SLICE_SIZE=%zu, "
                             "NCCL_TUNER_PLUGIN=\"%s\"); set them alike on every rank", r,
                             braid_param_str(BRAID_P_ALGO), comm->tune.slice,
                             comm->tune.plugin_spec);
    comm->tune.model.slice = (double)comm->slot_size;
    if (comm->tune.slice > comm->slot_size) {
        BRAID_WARN("BRAID_SLICE_SIZE=%zu is more than a slot (BRAID_SHM_SLOT_SIZE=%zu): "
                   "slices are %zu bytes", comm->tune.slice, comm->slot_size, comm->slot_size);
        comm->tune.slice = comm->slot_size;
    }
    return BRAID_OK;
}

static braid_status_t comm_tune_plugin_init(braid_comm_t *comm)
{
    const braid_topo_t *t = &comm->topo;
    int minlocal = comm->nranks;
    for (int h = 0; h < t->nhosts; h++)
        if (braid_topo_nlocal(t, h) < minlocal)
            minlocal = braid_topo_nlocal(t, h);
    return braid_tune_plugin_init(&comm->tune, comm->nonce, comm->nranks, t->nhosts, minlocal,
                                  t->maxlocal);
}

int braid_comm_ordinal(const braid_comm_t *comm)
{
    return comm->cudev >= 0 && comm->cudev < braid_device_count() ? comm->cudev : 0;
}

/* The proxy with its device executor, and the GPU engine where the transports made device
 * FIFOs: made now, on this thread, so that device calls allocate nothing. Every rank with
 * FIFOs makes its engine, or fails its init: the ranks must all use it or none. */
static braid_status_t comm_device_prepare(braid_comm_t *comm)
{
    int ordinal = braid_comm_ordinal(comm);
    BRAID_CHECK(braid_proxy_prepare(comm, ordinal));
    if (comm->tctx.dev_send == NULL)
        return BRAID_OK;
    BRAID_CHECK(braid_gpu_create(ordinal, comm->rank, comm->nranks, comm->tctx.dev_send,
                                 comm->tctx.dev_recv,
                                 (size_t)braid_param_int(BRAID_P_DEVICE_SCRATCH), &comm->gpu));
    BRAID_INFO(BRAID_SUB_INIT, "rank %d runs device calls on the GPU engine, device %d",
               comm->rank, ordinal);
    return BRAID_OK;
}

static braid_status_t comm_init_body(braid_comm_t *comm, const braid_comm_init_args_t *a)
{
    comm->rank = a->rank;
    comm->nranks = a->nranks;
    comm->cudev = a->cudev;
    comm->check_host_ptrs = braid_device_check_wanted();
    braid_log_set_rank(a->rank);
    braid_log_version_once();
    BRAID_CHECK(comm_tune_parse(comm));
    BRAID_CHECK(comm_bootstrap(comm, a));
    comm->nonce = braid_bootstrap_nonce(comm->bs);
    BRAID_CHECK(comm_tables(comm));
    BRAID_CHECK(comm_slots(comm));
    BRAID_CHECK(comm_tune_agree(comm));
    comm_kernel_ranks(comm);
    comm->stream_min = (size_t)braid_param_int(BRAID_P_STREAM_MIN);
    BRAID_CHECK(braid_comm_transports_setup(comm));
    if (braid_device() != &braid_device_host)   /* its calls then allocate nothing */
        BRAID_CHECK(comm_device_prepare(comm));
    BRAID_CHECK(braid_calibrate(comm));
    /* Setup's last exchange (calibration has one): no rank leaves it, or its process, while
     * another still waits in its setup, where a closed bootstrap link means a dead rank. */
    if (!comm->tune.calibrate)
        BRAID_CHECK(braid_bootstrap_barrier(comm->bs));
    BRAID_CHECK(comm_tune_plugin_init(comm));
    /* after calibration, whose sends and receives are not the program's */
    BRAID_CHECK(braid_flight_create(comm->rank, comm->nranks, comm->nonce,
                                    comm->config.comm_name, &comm->flight));
    braid_comm_publish_state(comm, BRAID_COMM_READY);
    BRAID_INFO(BRAID_SUB_INIT, "comm %p rank %d nranks %d nonce %016llx%s%s - init done",
               (void *)comm, comm->rank, comm->nranks, (unsigned long long)comm->nonce,
               comm->config.comm_name[0] ? " name " : "", comm->config.comm_name);
    return BRAID_OK;
}

static braid_status_t comm_init_run(braid_comm_t *comm, const braid_comm_init_args_t *a)
{
    braid_status_t st = comm_init_body(comm, a);
    int s = BRAID_COMM_INITIALIZING;   /* an abort meanwhile keeps ABORTED */
    if (st < 0)   /* the others stop waiting for this rank's part, and say why */
        braid_bootstrap_setup_failed(comm->bs, comm->rank, st);
    atomic_compare_exchange_strong(&comm->state, &s,
                                   st == BRAID_OK ? BRAID_COMM_READY : BRAID_COMM_ERROR);
    atomic_store(&comm->async_status, st);
    return st;
}

typedef struct init_job {
    braid_comm_t *comm;
    braid_comm_init_args_t args;
    int *members;
} init_job_t;

static void *init_thread_main(void *arg)
{
    init_job_t *job = arg;
    comm_init_run(job->comm, &job->args);
    free(job->members);
    free(job);
    return NULL;
}

braid_status_t braid_comm_init(braid_comm_t *comm, const braid_comm_init_args_t *args, int async)
{
    if (!async)
        return comm_init_run(comm, args);
    init_job_t *job = calloc(1, sizeof(*job));
    if (job == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory starting an init thread");
    job->comm = comm;
    job->args = *args;
    if (args->members != NULL) {
        job->members = malloc((size_t)args->nranks * sizeof(int));
        if (job->members == NULL) {
            free(job);
            return braid_err(BRAID_ERR_NOMEM, "out of memory starting an init thread");
        }
        memcpy(job->members, args->members, (size_t)args->nranks * sizeof(int));
        job->args.members = job->members;
    }
    int e = pthread_create(&comm->init_thread, NULL, init_thread_main, job);
    if (e != 0) {
        free(job->members);
        free(job);
        return braid_err(BRAID_ERR_SYSTEM, "cannot start an init thread: %s", strerror(e));
    }
    comm->init_thread_live = 1;
    return BRAID_INPROGRESS;
}

braid_status_t braid_comm_wait_init(braid_comm_t *comm)
{
    if (comm->init_thread_live) {
        pthread_join(comm->init_thread, NULL);
        comm->init_thread_live = 0;
    }
    return atomic_load(&comm->async_status);
}
