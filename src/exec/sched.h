/*
 * Schedules: what one rank does for one collective, as plain data (DESIGN.md section 2).
 *
 * An algorithm turns a call (braid_coll_t) into an ordered list of steps for one rank. A
 * step moves `bytes` bytes and is one of NCCL's primitives, chosen by which fields are set:
 *
 *     value = recv from recv_peer            (if recv_peer >= 0)
 *             combined with pre(src)         (if src is set and BRAID_STEP_REDUCE)
 *          or pre(src)                       (if src is set and there is no receive)
 *     value is written to dst                (if dst is set)
 *           and sent to send_peer            (if send_peer >= 0)
 *
 * where pre() pre-multiplies a rank's own contribution for ncclAvg/ncclPreMulSum (only on
 * BRAID_STEP_REDUCE steps, and not when BRAID_STEP_ACC says src is already a partial), and BRAID_STEP_FINAL divides the value for integer ncclAvg.
 * So "send", "recv", "recvReduceSend", "recvReduceCopySend", "recvCopySend" and "copy" are
 * all one step shape. A step with a receive and a source but without BRAID_STEP_REDUCE
 * copies the received data and ignores src (never useful; builders do not emit it).
 *
 * The executor (src/exec/exec.c) cuts every step into slices and runs the steps of a
 * *stage* slice by slice: slice i of every step of the stage, in step order, then slice
 * i+1. So within a stage a step may only depend on earlier steps at the same offsets
 * relative to their regions (true of ring and direct algorithms). A step with
 * BRAID_STEP_STAGE starts a new stage: every slice of the earlier stages is done first.
 *
 * Messages between two ranks are matched in order: the k-th send from a to b is the k-th
 * receive at b from a, and both sides must give it the same byte count. A receive with
 * neither a destination nor a send consumes the message and drops it, and a send with
 * neither a source nor a receive sends zeros: a token, whose use is its header.
 *
 * Pulls (single copy between ranks of one host): a step with pull_peer >= 0 reads region
 * `pull` of that rank's SEND or RECV buffer directly instead of receiving from a FIFO:
 *
 *     value = pulled region, times pull_peer's pre-multiplier if BRAID_STEP_PULL_PRE
 *             combined with pre(src)         (if src is set and BRAID_STEP_REDUCE)
 *     value is written to dst                (a pull step has a dst, and no send or receive)
 *
 * The peer's addresses come from its "hello": a BRAID_HELLO_BYTES record that the executor
 * writes for this rank at start into the op's hello table (BRAID_BUF_HELLO, one record per
 * rank, this rank's at rank * BRAID_HELLO_BYTES) and that the schedule sends to the peers it
 * is pulled by, and receives from the peers it pulls from, into their slots of the table,
 * in an earlier stage than the pulls. The schedule itself must make the pulled data final
 * before the pull (token messages) and keep the peer in the call until every pull from its
 * buffers is done (see algorithms/twoshot.c). The peer's pre-multiplier travels in its hello
 * because ncclPreMulSum scalars may differ between ranks: the puller applies the peer's own.
 */
#ifndef BRAID_ALGORITHMS_SCHED_H
#define BRAID_ALGORITHMS_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "kernels/kernels.h"
#include "transports/transport.h"   /* braid_pull_t */

typedef enum {
    BRAID_COLL_ALLREDUCE = 0,
    BRAID_COLL_BROADCAST,
    BRAID_COLL_REDUCE,
    BRAID_COLL_ALLGATHER,
    BRAID_COLL_REDUCESCATTER,
    BRAID_COLL_ALLTOALL,
    BRAID_COLL_ALLTOALLV,
    BRAID_COLL_GATHER,
    BRAID_COLL_SCATTER,
    BRAID_COLL_SEND,
    BRAID_COLL_RECV,
    BRAID_COLL_NUM
} braid_coll_kind_t;

const char *braid_coll_name(braid_coll_kind_t kind);  /* "AllReduce", ... */

/* The buffers a step can name. Offsets are in bytes from the start of that buffer. */
typedef enum {
    BRAID_BUF_NONE = 0,
    BRAID_BUF_SEND,     /* the user's send buffer */
    BRAID_BUF_RECV,     /* the user's receive buffer */
    BRAID_BUF_SCRATCH,  /* a per-call scratch buffer of sched->scratch_bytes */
    BRAID_BUF_HELLO,    /* the per-call hello table: nranks records of BRAID_HELLO_BYTES */
    BRAID_BUF_NUM
} braid_buf_t;

#define BRAID_HELLO_BYTES 64    /* one rank's hello record (layout private to the executor) */
#define BRAID_TOKEN_BYTES 8     /* a token: zeros, or the start of the sender's hello record */

typedef struct braid_ref {
    uint8_t buf;        /* braid_buf_t */
    size_t off;
} braid_ref_t;

#define BRAID_STEP_REDUCE 0x1u  /* combine the receive with pre(src) (reduction collectives) */
#define BRAID_STEP_FINAL 0x2u   /* apply the final division of integer ncclAvg to the value */
#define BRAID_STEP_STAGE 0x4u   /* this step starts a new stage */
#define BRAID_STEP_ACC 0x8u     /* with REDUCE: src is a partial result, not this rank's own
                                 * contribution, so it is not pre-multiplied */
#define BRAID_STEP_PULL_PRE 0x10u /* the pulled region is pull_peer's own contribution:
                                   * pre-multiply it by that rank's pre-multiplier */
#define BRAID_STEP_TOKEN 0x20u  /* a root token's receive: never waits (sched.h, exec.c) */

typedef struct braid_step {
    int32_t recv_peer;  /* -1: no receive */
    int32_t send_peer;  /* -1: no send */
    int32_t pull_peer;  /* -1: no pull; else read `pull` of that rank's buffers */
    uint32_t flags;
    braid_ref_t src;
    braid_ref_t dst;
    braid_ref_t pull;   /* BRAID_BUF_SEND or BRAID_BUF_RECV of pull_peer */
    size_t bytes;
} braid_step_t;

/* One call, as every algorithm sees it: sizes in elements of dtype. */
typedef struct braid_coll {
    braid_coll_kind_t kind;
    braid_dtype_t dtype;
    int rank, nranks;
    int root;                    /* broadcast, reduce, gather, scatter; peer for send/recv */
    size_t count;                /* per the NCCL call: allgather sendcount, reduce-scatter
                                  * recvcount, alltoall per-peer count, send/recv count;
                                  * AllGatherV / ReduceScatterV: the total of vcounts */
    int in_place;                /* the caller's buffers alias as NCCL defines in-place */
    /* Communicator facts agreed by every rank at init: whether and how ranks read each
     * other's buffers, and the size (bytes of the call's largest buffer) from which the
     * single-copy algorithms are used. */
    braid_pull_t pull;
    size_t pull_min;
    /* A call on device buffers: its scratch comes from device memory made at init, so the
     * tuner takes an algorithm that needs at most BRAID_DEVICE_SCRATCH of it where one
     * fits (the same on every rank: the parameter is the job's). */
    int device;
    /* alltoallv only: element counts and displacements, nranks each */
    const size_t *sendcounts, *sdispls, *recvcounts, *rdispls;
    const size_t *vcounts, *vdispls;   /* AllGatherV / ReduceScatterV: per-rank element
                                        * counts and displacements (nranks each); NULL
                                        * otherwise */
    /* The communicator's layout (NULL: every rank on one host) and its tuning (NULL: the
     * default cost model, every algorithm allowed; not const: the tuner remembers its last
     * choice there). */
    const struct braid_topo *topo;
    struct braid_tune *tune;
    /* Run this algorithm, no other (mscclRunAlgo; the ring for AllGatherV and
     * ReduceScatterV); NULL: the tuner chooses. */
    const struct braid_algo *force;
} braid_coll_t;

#define BRAID_SCHED_INLINE 16     /* steps stored in the struct: no allocation for most calls */

/* Never copy a braid_sched_t by assignment: `steps` may point into the struct itself. */
typedef struct braid_sched {
    braid_step_t *steps;
    int nsteps, cap;
    braid_step_t inline_steps[BRAID_SCHED_INLINE];
    size_t scratch_bytes;        /* scratch the executor must provide (0: none) */
    size_t align;                /* slice sizes are multiples of this (the element size) */
    uint32_t next_flags;         /* flags for the next step added (braid_sched_stage) */
    size_t slice;                /* bytes per slice the tuner chose (0: the slot size) */
} braid_sched_t;

void braid_sched_init(braid_sched_t *s, size_t elem_size);
void braid_sched_free(braid_sched_t *s);
/* Append a step; returns BRAID_ERR_NOMEM on allocation failure. Zero-byte steps are dropped
 * (both sides of a message drop them alike, so matching is preserved). */
braid_status_t braid_sched_add(braid_sched_t *s, int recv_peer, int send_peer, braid_ref_t src,
                               braid_ref_t dst, size_t bytes, uint32_t flags);
/* Append a pull step: read `bytes` at `from` (SEND or RECV) of rank `peer`, combine with
 * src as described above, write dst. Zero-byte pulls are dropped. */
braid_status_t braid_sched_pull(braid_sched_t *s, int peer, braid_ref_t from, braid_ref_t src,
                                braid_ref_t dst, size_t bytes, uint32_t flags);
/* Mark that the next step added starts a new stage. */
void braid_sched_stage(braid_sched_t *s);
/* `to` (not initialised) made a copy of `from`'s steps and scratch (the simulators run
 * the copy of a schedule several ranks share). */
braid_status_t braid_sched_copy(const braid_sched_t *from, braid_sched_t *to);

/*
 * Root tokens: in a rooted collective some ranks would receive nothing (a broadcast's or
 * scatter's root, a reduce's or gather's leaves), so ranks that disagree on the root could
 * each finish the call without seeing another's header, or each wait for data that no
 * rank sends. Such a rank is also sent one token, whose header says what its sender
 * called: the sender sends it as its first step (it waits for nothing), so a rank that
 * waits for data from a rank that disagrees gets the token's header instead. The
 * receiver looks for its token in a stage of its own after its data, without waiting
 * (BRAID_STEP_TOKEN): a token found there is checked at once, one not there yet is owed
 * on the connection and checked by its next receive (src/exec/exec.c): waiting for it
 * would stop a root from running ahead of the other ranks, which costs back-to-back small
 * broadcasts several times their time. Token and data never share a connection's
 * direction. A token carries BRAID_TOKEN_BYTES of zeros. A call of no bytes has none.
 */
braid_status_t braid_sched_token_send(braid_sched_t *s, int peer, size_t call_bytes);
braid_status_t braid_sched_token_recv(braid_sched_t *s, int peer, size_t call_bytes);

static inline braid_ref_t braid_ref(braid_buf_t buf, size_t off)
{
    braid_ref_t r = { (uint8_t)buf, off };
    return r;
}
static inline braid_ref_t braid_ref_none(void)
{
    braid_ref_t r = { BRAID_BUF_NONE, 0 };
    return r;
}
static inline int braid_mod(int a, int n)
{
    int m = a % n;
    return m < 0 ? m + n : m;
}
/* ceil(log2 n) for n >= 1: the rounds of a doubling, the depth of a binary tree. */
static inline int braid_log2_ceil(int n)
{
    int k = 0;
    while ((1 << k) < n)
        k++;
    return k;
}

/*
 * Algorithms. Each builds this rank's schedule for a call, or declines with
 * BRAID_ERR_UNSUPPORTED if it cannot handle the call; its cost function predicts the
 * call's time under a cost model (algorithms/model.h) and declines exactly the same calls.
 * Both are pure functions of the call: every rank decides alike.
 */
struct braid_model;
typedef struct braid_algo {
    const char *name;                       /* "ring", "direct", ... (NCCL_ALGO names) */
    const char *nccl;                       /* NCCL's name for it where NCCL has one and it
                                             * differs ("ring" for chain), else NULL */
    unsigned colls;                         /* bit mask of (1u << braid_coll_kind_t) it builds */
    braid_status_t (*build)(const braid_coll_t *coll, braid_sched_t *s);
    double (*cost)(const braid_coll_t *coll, const struct braid_model *m);
    const void *user;                       /* a user schedule (algorithms/usched.c); NULL
                                             * for braid's own */
} braid_algo_t;

/* The algorithms braid has, in a fixed order (their index is their bit in NCCL_ALGO's
 * masks, algorithms/tune.h), then the user schedules loaded so far, in load order. A
 * message header names its algorithm by index + 1 here. The table and what picks and runs
 * the algorithms are the algorithms layer's (algorithms/algo.h). */
#define BRAID_ALGOS_MAX 32
extern const braid_algo_t *braid_algos[BRAID_ALGOS_MAX];
extern _Atomic int braid_nalgos;

/* Chunk c of n equal-as-possible parts of `count` elements: first element and length. The
 * first (count % n) chunks get one element more. */
static inline void braid_chunk(size_t count, int n, int c, size_t *first_p, size_t *len_p)
{
    size_t base = count / (size_t)n, extra = count % (size_t)n, uc = (size_t)c;
    *first_p = uc * base + (uc < extra ? uc : extra);
    *len_p = base + (uc < extra ? 1 : 0);
}

#endif
