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

typedef enum {
    BRAID_COMM_INITIALIZING = 0,  /* init still running (nonblocking or grouped) */
    BRAID_COMM_READY,
    BRAID_COMM_ERROR,             /* a call failed: only destroy/abort/split/shrink make sense */
    BRAID_COMM_REVOKED,
    BRAID_COMM_FINALIZED,
    BRAID_COMM_ABORTED,
    BRAID_COMM_DESTROYED,         /* only ever published to peers */
} braid_comm_state_t;

#define BRAID_CPU_WORDS 16     /* CPUs 0-1023 in a peer's affinity mask */

/* What each rank tells the others at init (the bootstrap info blob). */
typedef struct braid_peer_info {
    uint64_t host_id;
    uint64_t machine_id;       /* braid_machine_id: which ranks share this kernel's cores */
    uint64_t starttime;        /* /proc/<pid>/stat start time: tells a reused pid apart */
    int32_t pid;
    int32_t cudev;
    uint64_t slot_size;        /* shared-memory slot size and depth: rank 0's are used */
    uint32_t nslots;
    int32_t numa;              /* NUMA node it ran on at init, -1 unknown */
    uint64_t tune_hash;        /* of what NCCL_ALGO/NCCL_PROTO allow: must match rank 0's */
    uint64_t cpus[BRAID_CPU_WORDS];    /* the CPUs it may run on (sched_getaffinity) */
    char hostname[64];
} braid_peer_info_t;

/* The communicator options braid keeps (from ncclConfig_t). */
typedef struct braid_comm_config {
    int blocking;
    int split_share;
    int shrink_share;
    char net_name[64];
    char comm_name[128];
} braid_comm_config_t;

typedef struct braid_shm braid_shm_t;          /* transports/shm */
typedef struct braid_net braid_net_t;          /* transports/net */
typedef struct braid_shm_ctrl braid_shm_ctrl_t;

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
    braid_shm_t *shm;                  /* the ranks of this host */
    braid_net_t *net;                  /* the ranks of other hosts; NULL if none */
    braid_conn_t **send_conns;         /* [nranks] */
    braid_conn_t **recv_conns;         /* [nranks] */
    size_t slot_size;                  /* agreed by all ranks at init */
    uint64_t coll_seq;                 /* collectives issued */
    braid_msg_hdr_t coll_hist[BRAID_HDR_HISTORY];   /* their headers, at [seq % that] */
    uint64_t *p2p_send_seq;            /* [nranks] sends issued to each peer */
    uint64_t *p2p_recv_seq;            /* [nranks] receives issued from each peer */
    uint8_t *pid_visible;              /* [nranks] peer's pid can be watched via /proc */
    uint64_t child_count;              /* splits and shrinks made from this comm */
    int check_host_ptrs;               /* check buffers are CPU-readable (device/device.h) */
    int kernel_ranks;                  /* ranks on this kernel (peers' machine_id), self included */
    int kernel_cpus;                   /* CPUs those ranks may run on together (0: unknown) */
    int oversubscribed;                /* kernel_ranks outnumber kernel_cpus */
    size_t stream_min;                 /* BRAID_STREAM_MIN: stream outputs from this size */
    braid_premul_t *premuls;           /* ncclRedOpCreatePreMulSum handles */
    int npremuls;

    _Atomic int state;                 /* braid_comm_state_t */
    _Atomic int async_status;          /* braid_status_t of the last failure, or INPROGRESS */
    _Atomic int busy;                  /* threads inside a call on this comm */
    pthread_t init_thread;
    int init_thread_live;
    pthread_mutex_t lock;
};

typedef struct ncclComm braid_comm_t;

/* Everything needed to join a job; init runs it inline or on a thread. */
typedef struct braid_comm_init_args {
    braid_uid_t uid;
    int rank, nranks, cudev;
    braid_comm_t *parent;              /* split/shrink: the parent; else NULL */
    const int *members;                /* split/shrink: parent rank of each child rank */
    uint64_t tag;                      /* split/shrink: child tag agreed by the members */
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

/* Hooks the executor calls for ops of a communicator (ctx = the comm). */
extern const braid_exec_hooks_t braid_comm_exec_hooks;

/* Publish progress for the peers' diagnostics (collective sequence started / done). */
void braid_comm_publish(braid_comm_t *comm, uint64_t started, uint64_t done);
/* Tell the peers this rank's state (shared memory here, the health links across hosts). */
void braid_comm_publish_state(braid_comm_t *comm, braid_comm_state_t state);

#endif
