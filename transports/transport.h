/*
 * Transports: how a communicator reaches its peers, and how bytes move between two ranks.
 *
 * A transport (braid_transport_t, the built-in ones listed in transports/transports.c)
 * connects this rank to the peers it reaches at init, through a narrow context
 * (braid_transport_ctx_t: rank, layout, peer table, the bootstrap's collectives), and
 * closes them at the end. Its peer health says what is known of each peer it reaches
 * (state, last collective started and finished, whether its process is gone), so that a
 * waiting rank can name the ranks it waits for on every host.
 *
 * Each connection moves bytes through a FIFO of slots (NCCL's connector idea).
 * The sender asks for a free slot, writes into it (a copy, or a reduction's output written
 * straight into it), and commits it with a length and a message header; the receiver waits
 * for a full slot, consumes it (reduces it into its buffer or forwards it) and releases it.
 * Both calls return BRAID_INPROGRESS instead of blocking: the executor decides how to wait.
 * A slot stays the same between calls until it is committed/released, so asking again is
 * free. Every slot carries a header (who sent it, for which call) so that a receiver can
 * detect mismatched calls.
 */
#ifndef BRAID_TRANSPORTS_TRANSPORT_H
#define BRAID_TRANSPORTS_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "topo/topo.h"

/* What a message is part of: compared by the receiver with its own call. */
typedef struct braid_msg_hdr {
    uint64_t seq;       /* collective sequence number, or send/recv sequence per peer pair */
    uint64_t count;     /* the call's count */
    uint8_t kind;       /* braid_coll_kind_t */
    uint8_t dtype;
    uint8_t op;         /* ncclRedOp_t as called (255: none) */
    uint8_t algo;       /* the algorithm: its index in braid_algos + 1 */
    int32_t root;       /* -1 when the call has none */
} braid_msg_hdr_t;

typedef struct braid_conn braid_conn_t;

typedef struct braid_conn_ops {
    const char *name;
    /* A free slot to write `len` bytes into: its address and capacity (a transport may
     * hand out a smaller place for a small len). INPROGRESS if none is free. */
    braid_status_t (*send_slot)(braid_conn_t *c, size_t len, void **ptr_p, size_t *cap_p);
    /* Hand the slot got from send_slot to the peer, holding `len` bytes. */
    braid_status_t (*send_commit)(braid_conn_t *c, size_t len, const braid_msg_hdr_t *hdr);
    /* The oldest full slot: data, length, header. INPROGRESS if none has arrived. */
    braid_status_t (*recv_slot)(braid_conn_t *c, const void **ptr_p, size_t *len_p,
                                braid_msg_hdr_t *hdr_p);
    /* Give the slot got from recv_slot back to the sender. */
    braid_status_t (*recv_release)(braid_conn_t *c);
    /* INPROGRESS until every committed slot has left this process (a network provider
     * moves data only while it is driven); NULL where a commit is delivery. */
    braid_status_t (*flush)(braid_conn_t *c);
    void (*close)(braid_conn_t *c);
} braid_conn_ops_t;

/* The common head of every transport's connection object. */
struct braid_conn {
    const braid_conn_ops_t *ops;
    int peer;                   /* the rank at the other end */
    size_t slot_size;           /* capacity of every slot */
    /* Order of use among the operations of one communicator: an operation may touch this
     * connection only while its ticket is being served (see src/exec/exec.c). */
    uint64_t ticket_next, ticket_serving;
    /* Root tokens (src/exec/sched.h) that an operation did not find here and did not wait
     * for: the next receive on this connection takes them first. */
    uint32_t tokens_owed;
};

static inline braid_status_t braid_conn_send_slot(braid_conn_t *c, size_t len, void **p,
                                                  size_t *cap)
{
    return c->ops->send_slot(c, len, p, cap);
}
static inline braid_status_t braid_conn_send_commit(braid_conn_t *c, size_t len,
                                                    const braid_msg_hdr_t *hdr)
{
    return c->ops->send_commit(c, len, hdr);
}
static inline braid_status_t braid_conn_recv_slot(braid_conn_t *c, const void **p, size_t *len,
                                                  braid_msg_hdr_t *hdr)
{
    return c->ops->recv_slot(c, p, len, hdr);
}
static inline braid_status_t braid_conn_recv_release(braid_conn_t *c)
{
    return c->ops->recv_release(c);
}
static inline void braid_conn_close(braid_conn_t *c)
{
    if (c != NULL)
        c->ops->close(c);
}

/* ---- device FIFOs: how the GPU engine reaches a local peer ------------------------------- */

/*
 * One direction between this rank and a local peer through device memory (the p2p
 * transport's, transports/p2p): message k of the connection lies in slot k % nslots of the
 * receiver's FIFO. The sender's stream waits until tail >= k + 1 - nslots (the slot is
 * free), its kernel writes the slot, and it posts head = k + 1; the receiver's stream waits
 * until head >= k + 1, its kernel reads the slot, and it posts tail = k + 1. Before head,
 * the sender writes the message's record (its call's header and its length) into slot
 * k % nslots's place in `recs`, which the receiver's kernel compares with its own call's
 * before it uses the slot: mismatched calls are seen at the message, as on the host's
 * slots. Each counter
 * lives in the memory of the rank that waits on it (head the receiver's, tail the
 * sender's), so a rank can always release its own stream's waits by writing its own
 * memory, whatever its peers do. Counters compare wrap-safe: (int32_t)(counter - k) >= 0.
 */
#define BRAID_DCONN_REC_WORDS 4     /* a message record: braid_msg_hdr_t, then the length */

typedef struct braid_dconn {
    int peer;
    char *slots;            /* the FIFO (the receiver's), as this rank's kernels reach it */
    uint32_t *wait;         /* send: tail; receive: head (this rank's memory) */
    uint32_t *post;         /* send: head; receive: tail (the peer's memory, as mapped here) */
    uint64_t *recs;         /* the FIFO's message records, BRAID_DCONN_REC_WORDS per slot
                             * (the receiver's memory) */
    uint32_t nslots;
    size_t slot_size;
    uint32_t msgs;          /* messages queued on the connection so far (the GPU engine's,
                             * under the communicator's lock) */
    int round;              /* send: msgs has gone past nslots once (the same lock) */
} braid_dconn_t;

/* ---- the communicator as a transport sees it -------------------------------------------- */

/* A rank's state as it publishes it to its peers. */
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
    int32_t p2p;               /* it would keep device FIFOs: a GPU backend, BRAID_P2P=1 */
    uint64_t tune_hash;        /* of what NCCL_ALGO/NCCL_PROTO allow: must match rank 0's */
    uint64_t cpus[BRAID_CPU_WORDS];    /* the CPUs it may run on (sched_getaffinity) */
    char hostname[64];
} braid_peer_info_t;

/* How the ranks of a communicator may read each other's buffers (agreed at init). */
typedef enum {
    BRAID_PULL_NONE = 0,    /* they may not: messages through FIFOs only */
    BRAID_PULL_CMA,         /* through the kernel: cross-memory attach between processes */
    BRAID_PULL_LOAD,        /* directly: every rank is a thread of one process */
} braid_pull_t;

/*
 * What a transport gets of the communicator. The core fills it before the first setup and
 * keeps it for the communicator's life (a transport may keep the pointer). The bootstrap's
 * collectives run over every rank of the communicator; `check` returns an error (naming
 * the rank) once a peer's setup has failed or it died, and `setup_failed` tells the others
 * that rank `rank` failed with `why`, for failures found outside the bootstrap.
 */
typedef struct braid_transport_ctx {
    int rank, nranks;
    uint64_t nonce;                     /* the job's (and child's) random id */
    const braid_topo_t *topo;           /* hosts, local ranks, link classes */
    const braid_peer_info_t *peers;     /* [nranks] */
    size_t slot_size;                   /* agreed by every rank */
    uint32_t nslots;                    /* slots per FIFO, agreed likewise */
    const char *net_name;               /* ncclConfig_t netName; "" when not set */
    void *bs;
    braid_status_t (*allgather)(void *bs, const void *mine, void *all, size_t len);
    braid_status_t (*barrier)(void *bs);
    braid_status_t (*check)(void *bs);
    void (*setup_failed)(void *bs, int rank, braid_status_t why);
    braid_conn_t **send_conns;          /* [nranks]: setup fills those of its peers */
    braid_conn_t **recv_conns;
    braid_pull_t pull;                  /* set by the transport that lets ranks read each */
    size_t pull_min;                    /* other's buffers, and from which size */
    /* Where a GPU backend is in use (else NULL): slot memory to map for its kernels after
     * the transport maps it, and to unmap before (device/device.h). */
    void (*device_map)(int ordinal, void *p, size_t bytes);
    void (*device_unmap)(void *p);
    int device;                         /* this rank's GPU (ncclCommInitRank's current one) */
    /* Device FIFOs to every rank of the communicator ([nranks], the rank itself included),
     * where a transport (p2p) made them for every rank, else NULL: then the GPU engine
     * does not run, and device calls go through the host slots on the proxy thread. */
    braid_dconn_t **dev_send, **dev_recv;
} braid_transport_ctx_t;

/* What is known of a peer. */
typedef struct braid_peer_health {
    int state;              /* braid_comm_state_t it published (READY until it says more) */
    int known;              /* seq_started and seq_done are known (a remote rank's are
                             * known once it answered a braid_transport_t.ask) */
    uint64_t seq_started;   /* last collective it started */
    uint64_t seq_done;      /* last collective it finished */
    int gone;               /* 0: its process (and host) are there; 1: gone without a word
                             * (killed, host or link lost); 2: gone after saying its state */
    const char *why;        /* how it is gone: the state it said (braid_peer_state_word),
                             * "exited or was killed", "is unreachable ..." */
} braid_peer_health_t;

/* The words for a state a peer published that ends its part, NULL for the others. */
static inline const char *braid_peer_state_word(int state)
{
    switch (state) {
    case BRAID_COMM_ERROR: return "failed";
    case BRAID_COMM_REVOKED: return "revoked its communicator";
    case BRAID_COMM_ABORTED: return "aborted its communicator";
    case BRAID_COMM_DESTROYED: return "destroyed its communicator";
    default: return NULL;
    }
}

typedef struct braid_transport {
    const char *name;
    /* Connect this rank to every peer this transport reaches and fill ctx->send_conns /
     * recv_conns for them; *tp_p = its state, NULL when it reaches no peer (the other calls
     * are then not made). A setup that fails may have set *tp_p: teardown undoes what it
     * did. Collective: every rank calls it, in the order of braid_transports. */
    braid_status_t (*setup)(braid_transport_ctx_t *ctx, void **tp_p);
    /* Publish `state` as final, close the connections, free. Local: no peer is waited for. */
    void (*teardown)(void *tp, braid_comm_state_t state);
    /* Publish this rank's state (and, for ERROR, the failure's status) to the peers. */
    void (*publish_state)(void *tp, braid_comm_state_t state, braid_status_t status);
    /* Publish progress: the collective started or finished (0: unchanged). On every call. */
    void (*publish_progress)(void *tp, uint64_t started, uint64_t done);
    /* What is known of rank r: 0 when this transport does not reach r. Reads what r said
     * since; never waits. */
    int (*peer)(void *tp, int r, braid_peer_health_t *h);
    /* Ask rank r for its progress now (remote ranks publish it only when asked); its
     * answer shows in a later peer(). A rank that is not inside a call on the communicator
     * does not answer. */
    void (*ask)(void *tp, int r);
    /* Move what is in flight (called on every idle pass while an operation waits, on any
     * transport); NULL where a commit is delivery, as for braid_conn_ops_t.flush. */
    void (*drive)(void *tp);
    /* Where a waiting rank runs: publish this rank's CPU (sched_getcpu) / the CPU rank r
     * published last, -1 if unknown. NULL where peers cannot share a core (other hosts):
     * the executor yields a waiting rank's core only to a peer that shares it. */
    void (*publish_cpu)(void *tp, int cpu);
    int (*peer_cpu)(void *tp, int r);
    /* The collective this rank started last, as its messages' header says / the one rank r
     * published (1: *hdr_p is it, 0: not known). A waiting rank compares them with its own
     * call, so that ranks whose calls differ but send nothing to each other still learn it
     * (ranks that disagree on a root). NULL where peers are not seen (other hosts). */
    void (*publish_call)(void *tp, const braid_msg_hdr_t *hdr);
    int (*peer_call)(void *tp, int r, braid_msg_hdr_t *hdr_p);
} braid_transport_t;

/*
 * A local peer's own memory, read in place (pull steps, src/exec/exec_pull.c): with plain
 * loads where the peer is a thread of this process, else by cross-memory attach
 * (process_vm_readv, the shared-memory transport's transports/shm/cma.c, where its setup
 * found that every pair of local ranks may: braid_transport_ctx_t.pull).
 */
/* A random key of this process, the same in all its threads: with the pid it tells whether
 * a peer is this very process (a pid alone may repeat across pid namespaces). */
uint64_t braid_cma_proc_key(void);

/* Read `len` bytes at address `remote` of process `pid` into dst. Returns 0, or the errno of
 * the failure: ESRCH (the process is gone or a zombie), EPERM (not allowed: another user,
 * Yama, seccomp), ENOSYS (no CMA in this kernel), EFAULT (an address is not mapped). */
int braid_cma_read(int pid, void *dst, uint64_t remote, size_t len);

/* The built-in transports in setup order (transports/transports.c), NULL-terminated. */
extern const braid_transport_t *const braid_transports[];
#define BRAID_TRANSPORTS_MAX 4

#endif
