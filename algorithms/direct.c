/*
 * Direct algorithms: every message goes straight from its source to its destination.
 *
 *   gather / scatter:        all-to-all, step k:        send / recv:
 *        1   2                  r-k --> r --> r+k          r --> peer
 *         \ /
 *     0 -- root -- 3
 *
 * Gather and scatter (the root exchanges one block with every rank), all-to-all and
 * all-to-allv (pairwise exchange; in place, all-to-all swaps blocks pairwise), and
 * point-to-point send and recv. The steps of a schedule form one stage (in-place
 * all-to-allv adds a first one), so the executor
 * interleaves them slice by slice: the root of a gather drains every peer's FIFO in turn
 * instead of one peer at a time.
 *
 * Deadlock freedom of the pairwise exchange: order every (slice, k, send/recv) position.
 * A rank waits either for a message its source sends at an earlier position, or for a slot
 * its destination frees by a receive at an earlier position (a FIFO holds >= 2 slots), so
 * the waits never form a cycle.
 */
#include "algorithms/model.h"
#include "exec/sched.h"

/*
 * Gather: every rank sends its `count` elements to the root, which stores rank i's block
 * at recvbuff + i * count; its own block is a local copy, none in place (sendbuff ==
 * recvbuff + root * count). Non-roots never name recvbuff (NCCL lets it be NULL).
 *
 *   rank i != root:  [x_i] --send--> root
 *   root:            recv x_(root+1), x_(root+2), ... into [x_0 | x_1 | ... | x_(n-1)]
 *
 * The root first sends every other rank a token (sched.h: root tokens).
 */
static braid_status_t direct_gather_build(const braid_coll_t *coll, braid_sched_t *s)
{
    int n = coll->nranks, r = coll->rank;
    size_t bytes = coll->count * braid_dtype_size(coll->dtype);

    if (r != coll->root) {
        BRAID_CHECK(braid_sched_add(s, -1, coll->root, braid_ref(BRAID_BUF_SEND, 0),
                                    braid_ref_none(), bytes, 0));
        return braid_sched_token_recv(s, coll->root, bytes);
    }
    for (int k = 1; k < n; k++)
        BRAID_CHECK(braid_sched_token_send(s, braid_mod(r + k, n), bytes));
    if (!coll->in_place)
        BRAID_CHECK(braid_sched_add(s, -1, -1, braid_ref(BRAID_BUF_SEND, 0),
                                    braid_ref(BRAID_BUF_RECV, (size_t)r * bytes), bytes, 0));
    for (int k = 1; k < n; k++) {
        int peer = braid_mod(r + k, n);
        BRAID_CHECK(braid_sched_add(s, peer, -1, braid_ref_none(),
                                    braid_ref(BRAID_BUF_RECV, (size_t)peer * bytes), bytes, 0));
    }
    return BRAID_OK;
}

/*
 * Scatter: the root sends block i of sendbuff to rank i and copies its own block, none in
 * place (recvbuff == sendbuff + root * count). Non-roots never name sendbuff.
 *
 *   root:            [y_0 | y_1 | ... | y_(n-1)] --send y_i--> rank i
 *   rank i != root:  recv y_i into [recvbuff]
 *
 * Rank root-1 first sends the root a token (sched.h: root tokens).
 */
static braid_status_t direct_scatter_build(const braid_coll_t *coll, braid_sched_t *s)
{
    int n = coll->nranks, r = coll->rank;
    size_t bytes = coll->count * braid_dtype_size(coll->dtype);

    if (r != coll->root) {
        if (r == braid_mod(coll->root - 1, n))
            BRAID_CHECK(braid_sched_token_send(s, coll->root, bytes));
        return braid_sched_add(s, coll->root, -1, braid_ref_none(),
                               braid_ref(BRAID_BUF_RECV, 0), bytes, 0);
    }
    if (!coll->in_place)
        BRAID_CHECK(braid_sched_add(s, -1, -1, braid_ref(BRAID_BUF_SEND, (size_t)r * bytes),
                                    braid_ref(BRAID_BUF_RECV, 0), bytes, 0));
    for (int k = 1; k < n; k++) {
        int peer = braid_mod(r + k, n);
        BRAID_CHECK(braid_sched_add(s, -1, peer, braid_ref(BRAID_BUF_SEND, (size_t)peer * bytes),
                                    braid_ref_none(), bytes, 0));
    }
    return n > 1 ? braid_sched_token_recv(s, braid_mod(r - 1, n), bytes) : BRAID_OK;
}

/* Where the block for/from `peer` lies, in bytes: all-to-all blocks are uniform,
 * all-to-allv ones come from the per-peer counts and displacements (in elements). */
typedef struct a2a_block {
    size_t soff, sbytes, roff, rbytes;
} a2a_block_t;

static void a2a_block(const braid_coll_t *coll, int peer, a2a_block_t *b)
{
    size_t es = braid_dtype_size(coll->dtype);
    if (coll->kind == BRAID_COLL_ALLTOALLV) {
        b->soff = coll->sdispls[peer] * es;
        b->sbytes = coll->sendcounts[peer] * es;
        b->roff = coll->rdispls[peer] * es;
        b->rbytes = coll->recvcounts[peer] * es;
    } else {
        b->soff = b->roff = (size_t)peer * coll->count * es;
        b->sbytes = b->rbytes = coll->count * es;
    }
}

/* In place the receives overwrite blocks not sent yet (all-to-allv: the blocks differ in
 * size and place): stage 1 copies the send side to scratch, stage 2 sends from there.
 * Returns the buffer the exchange reads from. */
static braid_status_t a2a_in_place_stage(const braid_coll_t *coll, braid_sched_t *s,
                                         braid_buf_t *from_p)
{
    size_t extent = 0;
    *from_p = BRAID_BUF_SEND;
    if (!coll->in_place)
        return BRAID_OK;
    for (int p = 0; p < coll->nranks; p++) {
        a2a_block_t b;
        a2a_block(coll, p, &b);
        if (b.sbytes && b.soff + b.sbytes > extent)
            extent = b.soff + b.sbytes;
    }
    s->scratch_bytes = extent;
    *from_p = BRAID_BUF_SCRATCH;
    BRAID_CHECK(braid_sched_add(s, -1, -1, braid_ref(BRAID_BUF_SEND, 0),
                                braid_ref(BRAID_BUF_SCRATCH, 0), extent, 0));
    braid_sched_stage(s);
    return BRAID_OK;
}

/*
 * In-place all-to-all of equal blocks, by swaps: in round k rank r and rank p = (k - r)
 * mod n (whose partner in that round is r again) each send the other its block for it and
 * receive the other's into the same place. The send is the earlier step, so each slice
 * leaves before the received slice overwrites it (a stage runs its steps in order, slice
 * by slice): no scratch. A rank that is its own partner keeps its block where it is.
 *
 *   n = 3:   k = 0: 1 <-> 2      k = 1: 0 <-> 1      k = 2: 0 <-> 2
 *
 * Deadlock freedom: as below, every wait is on a position that comes earlier, the swap's
 * receive on the partner's send of the same round and slice.
 */
static braid_status_t direct_alltoall_swap_build(const braid_coll_t *coll, braid_sched_t *s)
{
    int n = coll->nranks, r = coll->rank;
    size_t bytes = coll->count * braid_dtype_size(coll->dtype);
    for (int k = 0; k < n; k++) {
        int p = braid_mod(k - r, n);
        size_t off = (size_t)p * bytes;
        if (p == r)
            continue;
        BRAID_CHECK(braid_sched_add(s, -1, p, braid_ref(BRAID_BUF_SEND, off), braid_ref_none(),
                                    bytes, 0));
        BRAID_CHECK(braid_sched_add(s, p, -1, braid_ref_none(), braid_ref(BRAID_BUF_RECV, off),
                                    bytes, 0));
    }
    return BRAID_OK;
}

/*
 * All-to-all(v), pairwise: the local block is a copy, then for k = 1 .. n-1 rank r sends
 * its block for r+k and receives the block from r-k (two steps each):
 *
 *   k = 1:  r --> r+1,  r-1 --> r          rank 0  [00] [01] [02]      [00] [10] [20]
 *   k = 2:  r --> r+2,  r-2 --> r          rank 1  [10] [11] [12]  ->  [01] [11] [21]
 *   ...                                    rank 2  [20] [21] [22]      [02] [12] [22]
 */
static braid_status_t direct_alltoall_build(const braid_coll_t *coll, braid_sched_t *s)
{
    int n = coll->nranks, r = coll->rank;
    braid_buf_t from;
    a2a_block_t b;

    if (coll->in_place && coll->kind == BRAID_COLL_ALLTOALL)
        return direct_alltoall_swap_build(coll, s);
    BRAID_CHECK(a2a_in_place_stage(coll, s, &from));
    a2a_block(coll, r, &b);
    if (!coll->in_place || b.soff != b.roff)          /* in place it may be there already */
        BRAID_CHECK(braid_sched_add(s, -1, -1, braid_ref(from, b.soff),
                                    braid_ref(BRAID_BUF_RECV, b.roff),
                                    b.sbytes < b.rbytes ? b.sbytes : b.rbytes, 0));
    for (int k = 1; k < n; k++) {
        int to = braid_mod(r + k, n), src = braid_mod(r - k, n);
        a2a_block(coll, to, &b);
        BRAID_CHECK(braid_sched_add(s, -1, to, braid_ref(from, b.soff), braid_ref_none(),
                                    b.sbytes, 0));
        a2a_block(coll, src, &b);
        BRAID_CHECK(braid_sched_add(s, src, -1, braid_ref_none(),
                                    braid_ref(BRAID_BUF_RECV, b.roff), b.rbytes, 0));
    }
    return BRAID_OK;
}

/* Send and recv: one step each; coll->root is the peer (it may be this rank). */
static braid_status_t direct_p2p_build(const braid_coll_t *coll, braid_sched_t *s)
{
    size_t bytes = coll->count * braid_dtype_size(coll->dtype);
    if (coll->kind == BRAID_COLL_SEND)
        return braid_sched_add(s, -1, coll->root, braid_ref(BRAID_BUF_SEND, 0),
                               braid_ref_none(), bytes, 0);
    return braid_sched_add(s, coll->root, -1, braid_ref_none(), braid_ref(BRAID_BUF_RECV, 0),
                           bytes, 0);
}

static braid_status_t direct_build(const braid_coll_t *coll, braid_sched_t *s)
{
    switch (coll->kind) {
    case BRAID_COLL_GATHER:
        return direct_gather_build(coll, s);
    case BRAID_COLL_SCATTER:
        return direct_scatter_build(coll, s);
    case BRAID_COLL_ALLTOALL:
    case BRAID_COLL_ALLTOALLV:
        return direct_alltoall_build(coll, s);
    case BRAID_COLL_SEND:
    case BRAID_COLL_RECV:
        return direct_p2p_build(coll, s);
    default:
        return BRAID_ERR_UNSUPPORTED;
    }
}

/* Every block in one hop: the root (gather, scatter) or every rank (all-to-all) moves n-1
 * blocks through its links; a host's ranks share its NIC in an all-to-all. */
static double direct_cost(const braid_coll_t *c, const braid_model_t *m)
{
    int n = c->nranks;
    double blk = (double)c->count * (double)braid_dtype_size(c->dtype);
    braid_link_t l = braid_coll_worst(c);
    switch (c->kind) {
    case BRAID_COLL_SEND:
    case BRAID_COLL_RECV:
        l = braid_coll_link(c, c->rank, c->root);
        return m->alpha[l] + m->step + blk * braid_model_beta(m, l, 1);
    case BRAID_COLL_ALLTOALL:
    case BRAID_COLL_ALLTOALLV:
        return m->alpha[l] + 2 * n * m->step +
               (n - 1) * blk * braid_model_beta(m, l, braid_model_nic_share(c));
    default:
        return m->alpha[l] + n * m->step + (n - 1) * blk * braid_model_beta(m, l, 1);
    }
}

const braid_algo_t braid_algo_direct = {
    .name = "direct",
    .colls = (1u << BRAID_COLL_GATHER) | (1u << BRAID_COLL_SCATTER) |
             (1u << BRAID_COLL_ALLTOALL) | (1u << BRAID_COLL_ALLTOALLV) |
             (1u << BRAID_COLL_SEND) | (1u << BRAID_COLL_RECV),
    .build = direct_build,
    .cost = direct_cost,
};
