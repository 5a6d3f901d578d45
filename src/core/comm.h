/*
 * Communicators: lifecycle (init, split, shrink, finalize, destroy, abort, revoke), the
 * state every call checks, and the health checks the executor runs while it waits.
 */
#ifndef BRAID_CORE_COMM_H
#define BRAID_CORE_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "exec/sched.h"
#include "core/bootstrap.h"
#include "exec/exec.h"
#include "base/status.h"
#include "algorithms/tune.h"
#include "topo/topo.h"
#include "transports/transport.h"

#define BRAID_COMM_MAGIC 0x6272636du /* "brcm" */

/* The communicator options braid keeps (from ncclConfig_t). */
typedef struct braid_comm_config {
    int blocking;
    int split_share;
    int shrink_share;
    char net_name[64];
    char comm_name[128];
} braid_comm_config_t;

/* A reduction operator created with ncclRedOpCreatePreMulSum. */
typedef struct braid_premul {
    int in_use;
    braid_dtype_t dtype;
    int residence;             /* ncclScalarResidence_t */
    braid_scalar_t value;      /* host-immediate scalar */
    const void *ptr;           /* device-residence scalar: read when the call starts */
} braid_premul_t;

struct ncclComm {
    uint32_t magic;
    int rank, nranks;
    int cudev;
    uint64_t nonce;
    braid_comm_config_t config;
    braid_bootstrap_t *bs;
    braid_peer_info_t *peers;          /* [nranks] */
    braid_topo_t topo;                 /* hosts, local ranks, link classes */
    braid_tune_t tune;                 /* cost model and NCCL_ALGO (algorithms/tune.h) */
    braid_transport_ctx_t tctx;        /* what the transports see of this comm */
    void *tp[BRAID_TRANSPORTS_MAX];    /* each transport's state, NULL where it reaches
                                        * no peer (transports/transports.c's order) */
    braid_conn_t **send_conns;         /* [nranks] */
    braid_conn_t **recv_conns;         /* [nranks] */
    size_t slot_size;                  /* agreed by all ranks at init */
    uint64_t coll_seq;                 /* collectives issued */
    braid_msg_hdr_t coll_hist[BRAID_HDR_HISTORY];   /* their headers, at [seq % that] */
    uint64_t *p2p_send_seq;            /* [nranks] sends issued to each peer */
    uint64_t *p2p_recv_seq;            /* [nranks] receives issued from each peer */
    uint64_t child_count;              /* splits that got past their all-gather */
    uint64_t shrink_count;             /* shrinks (their own count: a rank died in a
                                        * split's all-gather leaves child_count differing) */
    int check_host_ptrs;               /* check buffers are CPU-readable (device/device.h) */
    int kernel_ranks;                  /* ranks on this kernel (peers' machine_id), self included */
    int kernel_cpus;                   /* CPUs those ranks may run on together (0: unknown) */
    uint64_t kernel_cpu_mask[BRAID_CPU_WORDS];   /* which: the union of their affinities */
    int oversubscribed;                /* kernel_ranks outnumber kernel_cpus */
    size_t stream_min;                 /* BRAID_STREAM_MIN: stream outputs from this size */
    braid_premul_t *premuls;           /* ncclRedOpCreatePreMulSum handles */
    int npremuls;
    struct braid_proxy *proxy;         /* device calls: their thread (core/proxy.c) */
    struct braid_gpu *gpu;             /* the GPU engine (exec/gpu.h): device calls between
                                        * the ranks of one host run on it; NULL where the
                                        * transports made no device FIFOs */
    struct braid_flight *flight;       /* the last operations (core/flight.h); NULL: off */

    _Atomic int state;                 /* braid_comm_state_t */
    _Atomic int async_status;          /* braid_status_t of the last failure, or INPROGRESS */
    _Atomic int busy;                  /* threads inside a call on this comm */
    pthread_t init_thread;
    int init_thread_live;
    pthread_mutex_t lock;
};

typedef struct ncclComm braid_comm_t;
typedef struct braid_proxy braid_proxy_t;

/* Everything needed to join a job; init runs it inline or on a thread. */
typedef struct braid_comm_init_args {
    braid_uid_t uid;
    int rank, nranks, cudev;
    braid_comm_t *parent;              /* split/shrink: the parent; else NULL */
    const int *members;                /* split/shrink: parent rank of each child rank */
    uint64_t tag;                      /* split/shrink: child tag agreed by the members */
    int watch_parent;                  /* blocking split: the parent's failure notices end
                                        * the child's bootstrap (braid_bootstrap_watch_parent) */
} braid_comm_init_args_t;

/* Allocate a communicator in INITIALIZING state and register it as live. */
braid_status_t braid_comm_alloc(const braid_comm_config_t *cfg, braid_comm_t **comm_p);
/* Run the init (bootstrap, peer table, transports). `async`: on a thread, returning at once;
 * the comm's async_status tells the outcome. */
braid_status_t braid_comm_init(braid_comm_t *comm, const braid_comm_init_args_t *args, int async);
/* Wait for a running init thread and return its outcome. */
braid_status_t braid_comm_wait_init(braid_comm_t *comm);

braid_status_t braid_comm_split(braid_comm_t *comm, int color, int key,
                                const braid_comm_config_t *cfg, braid_comm_t **newcomm_p);
braid_status_t braid_comm_shrink(braid_comm_t *comm, const int *exclude, int nexclude,
                                 const braid_comm_config_t *cfg, int abort_first,
                                 braid_comm_t **newcomm_p);
braid_status_t braid_comm_finalize(braid_comm_t *comm);
braid_status_t braid_comm_revoke(braid_comm_t *comm);
/* Take a live comm out of the registry, so no new call can enter it (destroy, abort). */
braid_status_t braid_comm_unregister(braid_comm_t *comm, const char *what);
/* Free an unregistered comm; `abort`: stop whatever another thread runs on it first, and
 * tell the peers. Waits for calls still inside it to leave. */
void braid_comm_free(braid_comm_t *comm, int abort);

/* The device its device work runs on: its cudev, or device 0 for a rank numbered past the
 * devices (ncclCommInitAll of more ranks than GPUs). */
int braid_comm_ordinal(const braid_comm_t *comm);

/* Is this pointer a live communicator? (Validates handles passed by users.) */
int braid_comm_is_live(const braid_comm_t *comm);

/*
 * Every API call on a comm brackets its work with enter/leave: enter checks that the handle
 * is live (and READY if need_ready), naming `what` in the error, and counts the caller in so
 * that an abort from another thread waits for it to leave before freeing anything.
 */
braid_status_t braid_comm_enter(braid_comm_t *comm, const char *what, int need_ready);
void braid_comm_leave(braid_comm_t *comm);

/* Mark the comm failed with status st (first failure wins) and tell the peers. */
void braid_comm_set_error(braid_comm_t *comm, braid_status_t st);

/* A device op waits for its GPU (what: BRAID_FLIGHT_WAITS_GPU, braid's kernels of a step)
 * or, before it starts, for its stream (BRAID_FLIGHT_WAITS_STREAM): called every few
 * milliseconds with the seconds waited. An abort or revoke stops it; after BRAID_TIMEOUT
 * it fails naming the call, the rank and what never finished (and the flight recorder
 * dumps). */
braid_status_t braid_comm_device_wait(braid_comm_t *comm, const braid_op_t *op, int what,
                                      double waited);

/* Hooks the executor calls for ops of a communicator (ctx = the comm). */
extern const braid_exec_hooks_t braid_comm_exec_hooks;

/* Publish progress for the peers' diagnostics (collective sequence started / done). */
void braid_comm_publish(braid_comm_t *comm, uint64_t started, uint64_t done);
/* Tell the peers this rank's state, through every transport. */
void braid_comm_publish_state(braid_comm_t *comm, braid_comm_state_t state);
/* Connect the peers through every transport (init); close them all (free). */
braid_status_t braid_comm_transports_setup(braid_comm_t *comm);
void braid_comm_transports_teardown(braid_comm_t *comm, braid_comm_state_t state);
/* What is known of peer r (its transport's peer health); ask it for its progress (its
 * answer shows in a later braid_comm_peer); move what the transports have in flight. */
void braid_comm_peer(braid_comm_t *comm, int r, braid_peer_health_t *h);
void braid_comm_peer_ask(braid_comm_t *comm, int r);
void braid_comm_drive(braid_comm_t *comm);
/* Publish the CPU this rank waits on; the CPU where rank r last waited (-1: unknown). */
void braid_comm_publish_cpu(braid_comm_t *comm, int cpu);
int braid_comm_peer_cpu(braid_comm_t *comm, int r);
/* Publish the collective this rank starts; the one rank r started last (0: not known). */
void braid_comm_publish_call(braid_comm_t *comm, const braid_msg_hdr_t *hdr);
int braid_comm_peer_call(braid_comm_t *comm, int r, braid_msg_hdr_t *hdr_p);

#endif
