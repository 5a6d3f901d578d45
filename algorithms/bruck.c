/*
 * Bruck algorithms: all-gather and all-to-all in ceil(log2 n) rounds for any n.
 *
 *   round k (d = 2^k):   r - d  <--  r  <--  r + d        every rank sends to r - d and
 *                                                          receives from r + d
 *
 * Round k is a distance-d shift on the ring of ranks: each rank sends one message to r - d
 * and receives one from r + d, so a round costs one hop of latency however many blocks it
 * carries. That is the whole point: ceil(log2 n) hops instead of the ring's n - 1 (all-gather)
 * or direct's n - 1 messages (all-to-all), paid for in bandwidth (all-to-all) or nothing
 * (all-gather moves each block once per rank, as the ring does).
 *
 * Every round is its own stage (the pack and unpack copies of all-to-all are stages too), so
 * a step never reads what another step of its stage writes at other offsets.
 *
 * Deadlock freedom: order every (stage, slice, step) position. A message's send position at
 * its sender comes before its receive position at its receiver (a stage sends before it
 * receives, and both sides of a message are in the same round). A rank blocked at a receive
 * waits for a send at an earlier position; a rank blocked at a send waits for a slot that its
 * receiver frees by a receive at an earlier position (a FIFO holds >= 2 slots and a stage
 * sends at most two messages to one peer per slice). So the rank blocked at the earliest
 * position waits for no one, and the waits never form a cycle.
 */
#include "algorithms/model.h"
#include "exec/sched.h"

/*
 * Steps moving blocks slot .. slot+nb-1 (mod n) of `ring` (blk bytes each) to or from the
 * linear region `lin` (none for a message): lin -> ring when to_ring, else ring -> lin. A run
 * that wraps around n is two steps; both sides of a message wrap at the same block.
 */
static braid_status_t bruck_ring_run(braid_sched_t *s, int n, size_t blk, braid_buf_t ring,
                                     int slot, int nb, braid_ref_t lin, int to_ring,
                                     int recv_peer, int send_peer)
{
    for (int done = 0; done < nb;) {
        int first = (slot + done) % n;
        int len = nb - done < n - first ? nb - done : n - first;
        braid_ref_t r = braid_ref(ring, (size_t)first * blk);
        braid_ref_t l = lin.buf == BRAID_BUF_NONE
                            ? lin
                            : braid_ref((braid_buf_t)lin.buf, lin.off + (size_t)done * blk);
        BRAID_CHECK(braid_sched_add(s, recv_peer, send_peer, to_ring ? l : r, to_ring ? r : l,
                                    (size_t)len * blk, 0));
        done += len;
    }
    return BRAID_OK;
}

/*
 * All-gather: block b is rank b's `count` elements, at recvbuff + b * count. After round k
 * rank r holds blocks r .. r + 2^(k+1) - 1 (mod n); in round k it sends the 2^k it has (at
 * most n - 2^k in the last round) to r - 2^k and receives as many, the next ones, from
 * r + 2^k, straight into their final places (no final rotation):
 *
 *   n = 5      holds after round 0    after round 1          after round 2
 *   rank 0     0 1                    0 1 2 3                0 1 2 3 4
 *   rank 1     1 2                    1 2 3 4                1 2 3 4 0
 *   rank 4     4 0                    4 0 1 2                4 0 1 2 3
 *
 * Round 0 sends the send buffer (and copies it to block r unless in place); later rounds
 * send from the receive buffer only the blocks earlier rounds stored. A run of blocks that
 * wraps around n is two steps, at the same block on both sides.
 */
static braid_status_t bruck_allgather_build(const braid_coll_t *coll, braid_sched_t *s)
{
    int n = coll->nranks, r = coll->rank;
    size_t blk = coll->count * braid_dtype_size(coll->dtype);

    if (n > 1 || !coll->in_place)
        BRAID_CHECK(braid_sched_add(s, -1, n > 1 ? braid_mod(r - 1, n) : -1,
                                    braid_ref(BRAID_BUF_SEND, 0),
                                    coll->in_place ? braid_ref_none()
                                                   : braid_ref(BRAID_BUF_RECV, (size_t)r * blk),
                                    blk, 0));
    if (n > 1)
        BRAID_CHECK(bruck_ring_run(s, n, blk, BRAID_BUF_RECV, braid_mod(r + 1, n), 1,
                                   braid_ref_none(), 1, braid_mod(r + 1, n), -1));
    for (int d = 2; d < n; d *= 2) {
        int nb = d < n - d ? d : n - d;
        braid_sched_stage(s);
        BRAID_CHECK(bruck_ring_run(s, n, blk, BRAID_BUF_RECV, r, nb, braid_ref_none(), 0, -1,
                                   braid_mod(r - d, n)));
        BRAID_CHECK(bruck_ring_run(s, n, blk, BRAID_BUF_RECV, braid_mod(r + d, n), nb,
                                   braid_ref_none(), 1, braid_mod(r + d, n), -1));
    }
    return BRAID_OK;
}

/* Blocks an all-to-all round with distance d moves: indices i < n with bit d set. */
static int bruck_a2a_blocks(int n, int d)
{
    int nb = 0;
    for (int base = d; base < n; base += 2 * d)
        nb += d < n - base ? d : n - base;
    return nb;
}

/* Where one all-to-all call keeps things: scratch offsets and the source of originals. */
typedef struct bruck_a2a {
    int n, r;
    size_t blk;
    size_t pack, unpack;    /* scratch: the message out and the message in */
    braid_buf_t orig;       /* the original blocks after round 0 (scratch copy in place) */
} bruck_a2a_t;

/*
 * Round with distance d, run by run: the indices with bit d set come in runs base .. base +
 * d - 1 (base = d, 3d, 5d, ...). The run's first index has no lower bit set, so it has not
 * moved yet and is the original at slot r - base; the others moved in earlier rounds and lie
 * in the receive buffer at slots r + base + 1 ... Pack them (one stage), send and receive
 * the message (one stage), unpack it to slots r + base ... of the receive buffer (one stage).
 */
static braid_status_t bruck_a2a_round(const bruck_a2a_t *a, braid_sched_t *s, int d)
{
    int n = a->n, r = a->r, q = 0;
    size_t blk = a->blk, bytes = (size_t)bruck_a2a_blocks(n, d) * blk;
    braid_buf_t orig = d == 1 ? BRAID_BUF_SEND : a->orig;

    braid_sched_stage(s);
    for (int base = d; base < n; base += 2 * d, q += d) {
        int len = d < n - base ? d : n - base;
        size_t from = (size_t)braid_mod(r - base, n) * blk;
        BRAID_CHECK(braid_sched_add(s, -1, -1, braid_ref(orig, from),
                                    braid_ref(BRAID_BUF_SCRATCH, a->pack + (size_t)q * blk), blk,
                                    0));
        BRAID_CHECK(bruck_ring_run(s, n, blk, BRAID_BUF_RECV, (r + base + 1) % n, len - 1,
                                   braid_ref(BRAID_BUF_SCRATCH, a->pack + (size_t)(q + 1) * blk),
                                   0, -1, -1));
    }
    braid_sched_stage(s);
    BRAID_CHECK(braid_sched_add(s, -1, braid_mod(r - d, n), braid_ref(BRAID_BUF_SCRATCH, a->pack),
                                braid_ref_none(), bytes, 0));
    BRAID_CHECK(braid_sched_add(s, braid_mod(r + d, n), -1, braid_ref_none(),
                                braid_ref(BRAID_BUF_SCRATCH, a->unpack), bytes, 0));
    braid_sched_stage(s);
    q = 0;
    for (int base = d; base < n; base += 2 * d, q += d) {
        int len = d < n - base ? d : n - base;
        BRAID_CHECK(bruck_ring_run(s, n, blk, BRAID_BUF_RECV, (r + base) % n, len,
                                   braid_ref(BRAID_BUF_SCRATCH, a->unpack + (size_t)q * blk), 1,
                                   -1, -1));
    }
    return BRAID_OK;
}

/*
 * All-to-all for tiny blocks. Rank s's block for rank t has index i = s - t (mod n). Round
 * k moves every index with bit k set a distance 2^k down (r -> r - 2^k), so the block
 * travels from s to s - i = t in popcount(i) hops; its holder r keeps index i at recvbuff
 * slot r + i, which at the end (r = t) is slot s: the block from s, where it belongs. No
 * final rotation, and slot r + i is index i's alone on rank r.
 *
 *   n = 4, index i of s is (s -> s-i):      round 0 (bit 1)        round 1 (bit 2)
 *   rank 0: 0>0 0>3 0>2 0>1                 sends i = 1, 3 to 3    sends i = 2, 3 to 2
 *           recv slots 0 1 2 3              recv i = 1, 3 from 1   recv i = 2, 3 from 2
 *
 * In a round the moving indices are packed into scratch with local copies, sent to r - 2^k
 * as one message, received from r + 2^k into scratch and unpacked into the receive buffer:
 * ceil(log2 n) messages of about n/2 blocks each. An original (a send buffer block) is read
 * once, in the round of its index's lowest set bit; in place those after round 0 would be
 * overwritten by then, so the send buffer is first copied to scratch.
 */
static braid_status_t bruck_alltoall_build(const braid_coll_t *coll, braid_sched_t *s)
{
    int n = coll->nranks, r = coll->rank, most = 0;
    bruck_a2a_t a = { .n = n, .r = r, .blk = coll->count * braid_dtype_size(coll->dtype),
                      .orig = BRAID_BUF_SEND };

    for (int d = 1; d < n; d *= 2)
        if (bruck_a2a_blocks(n, d) > most)
            most = bruck_a2a_blocks(n, d);
    if (coll->in_place && n > 2) {
        a.orig = BRAID_BUF_SCRATCH;
        a.pack = (size_t)n * a.blk;
        BRAID_CHECK(braid_sched_add(s, -1, -1, braid_ref(BRAID_BUF_SEND, 0),
                                    braid_ref(BRAID_BUF_SCRATCH, 0), a.pack, 0));
    }
    a.unpack = a.pack + (size_t)most * a.blk;
    s->scratch_bytes = n > 1 ? a.unpack + (size_t)most * a.blk : 0;
    if (!coll->in_place)
        BRAID_CHECK(braid_sched_add(s, -1, -1, braid_ref(BRAID_BUF_SEND, (size_t)r * a.blk),
                                    braid_ref(BRAID_BUF_RECV, (size_t)r * a.blk), a.blk, 0));
    for (int d = 1; d < n; d *= 2)
        BRAID_CHECK(bruck_a2a_round(&a, s, d));
    return BRAID_OK;
}

static braid_status_t bruck_build(const braid_coll_t *coll, braid_sched_t *s)
{
    switch (coll->kind) {
    case BRAID_COLL_ALLGATHER:
        return bruck_allgather_build(coll, s);
    case BRAID_COLL_ALLTOALL:
        return bruck_alltoall_build(coll, s);
    default:
        return BRAID_ERR_UNSUPPORTED;
    }
}

/*
 * R = ceil(log2 n) rounds of one hop each on the slowest link, a host's ranks sharing its
 * NIC (share):
 *   all-gather:  R (alpha + 2 step) + ((n-1) blk share + fill) beta + cuts
 *                (fill: each of the R-1 stage boundaries drains the pipeline, one slice;
 *                cuts: the R rounds' messages, of (n-1) blk / R bytes on average, sliced)
 *   all-to-all:  sum over rounds of  alpha + 2 step + m blk (beta share + 2 beta_self)
 *                                    + 3 runs step
 * where a round moves m blocks (about n/2) in `runs` runs, each packed and unpacked with
 * local copies; plus the own block's copy (all-to-all, or all-gather on one rank: elsewhere
 * the all-gather fuses it with round 0's send, as the ring does).
 */
static double bruck_cost(const braid_coll_t *c, const braid_model_t *m)
{
    int n = c->nranks;
    double blk = (double)c->count * (double)braid_dtype_size(c->dtype);
    double share = braid_model_nic_share(c), t = braid_model_local(m, blk);
    braid_link_t l = braid_coll_worst(c);
    int r = braid_log2_ceil(n);

    switch (c->kind) {
    case BRAID_COLL_ALLGATHER:
        if (n == 1)
            return t;
        return r * (m->alpha[l] + 2 * m->step) + (n - 1) * blk * braid_model_beta(m, l, share) +
               braid_model_fill(m, l, blk, r, 1) + braid_model_cuts(m, l, (n - 1) * blk / r, r) +
               braid_model_passes(m, c, (n - 1) * blk);
    case BRAID_COLL_ALLTOALL:
        for (int d = 1; d < n; d *= 2)
            t += m->alpha[l] + 2 * m->step + 3 * ((n - d + 2 * d - 1) / (2 * d)) * m->step +
                 bruck_a2a_blocks(n, d) * blk *
                     (braid_model_beta(m, l, share) + 2 * m->beta[BRAID_LINK_SELF]);
        return t;
    default:
        return BRAID_COST_NONE;
    }
}

const braid_algo_t braid_algo_bruck = {
    .name = "bruck",
    .colls = (1u << BRAID_COLL_ALLGATHER) | (1u << BRAID_COLL_ALLTOALL),
    .build = bruck_build,
    .cost = bruck_cost,
};
