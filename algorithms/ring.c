/*
 * Ring algorithms: all-reduce, all-gather and reduce-scatter over the ring r -> r+1.
 *
 *     +--> rank 0 --> rank 1 --> ... --> rank n-1 --+      one FIFO per neighbour pair;
 *     |                                              |      every step receives from the
 *     +----------------------------------------------+      left and/or sends right
 *
 * Every step receives from r-1 and/or sends to r+1, so each builder is one loop, and the
 * whole schedule is one stage: the executor pipelines it slice by slice, so that while a
 * rank works on slice i of step t its neighbour already works on slice i+1 (DESIGN.md 4).
 * Steps are NCCL's fused primitives: a received partial is combined with this rank's
 * contribution and written straight into the slot to the next rank.
 *
 * With one rank every builder degenerates to one local step (a copy, with REDUCE|FINAL for
 * reductions so that ncclAvg and ncclPreMulSum still scale the value).
 *
 * All-gather and reduce-scatter also build braidAllGatherV and braidReduceScatterV
 * (coll->vcounts set; no other algorithm does): the same steps over blocks of each rank's
 * own count and displacement. A block of 0 elements makes zero-byte steps, which
 * braid_sched_add drops on the sending and the receiving rank alike (both compute the
 * block's bytes from the same counts), so the messages still match in order.
 */
#include "algorithms/model.h"
#include "exec/sched.h"

/* Byte offset and length of chunk c when `count` elements are split into n chunks. */
static size_t ring_chunk(const braid_coll_t *coll, int c, size_t *bytes_p)
{
    size_t es = braid_dtype_size(coll->dtype), first, len;
    braid_chunk(coll->count, coll->nranks, c, &first, &len);
    *bytes_p = len * es;
    return first * es;
}

/*
 * Ring all-reduce: reduce-scatter then all-gather, 2n-1 steps in one stage.
 * Step t handles chunk (r - t) mod n (chunks from braid_chunk, so any count works):
 *
 *   t = 0         send pre(own)                          "send"
 *   0 < t < n-1   recv, add pre(own), send               "recvReduceSend"
 *   t = n-1       recv, add pre(own), FINAL, store, send "recvReduceCopySend"
 *   n-1 < t < 2n-2  recv, store, send                    "recvCopySend"
 *   t = 2n-2      recv, store                            "recv"
 *
 * After the reduce-scatter half rank r holds the full sum (*) of chunk (r + 1) mod n:
 *
 *              chunk 0         chunk 1         chunk 2        (n = 3, ranks hold a, b, c)
 *   rank 0     a0              a1+b1+c1 *      a2
 *   rank 1     b0              b1              a2+b2+c2 *
 *   rank 2     a0+b0+c0 *      c1              c2
 *
 * and the all-gather half passes each finished chunk once around the ring. Every rank ends
 * with the same bits: each chunk is reduced once, by its owner, and only copied after.
 */
static braid_status_t ring_allreduce_build(const braid_coll_t *coll, braid_sched_t *s)
{
    int n = coll->nranks, r = coll->rank, last = 2 * (n - 1);
    for (int t = 0; t <= last; t++) {
        size_t bytes, off = ring_chunk(coll, braid_mod(r - t, n), &bytes);
        uint32_t flags = t < n ? BRAID_STEP_REDUCE : 0;
        if (t == n - 1)
            flags |= BRAID_STEP_FINAL;
        BRAID_CHECK(braid_sched_add(s, t > 0 ? braid_mod(r - 1, n) : -1,
                                    t < last ? braid_mod(r + 1, n) : -1,
                                    t < n ? braid_ref(BRAID_BUF_SEND, off) : braid_ref_none(),
                                    t >= n - 1 ? braid_ref(BRAID_BUF_RECV, off) : braid_ref_none(),
                                    bytes, flags));
    }
    return BRAID_OK;
}

/*
 * Block b of an all-gather or reduce-scatter, in the buffer that holds all n blocks (the
 * all-gather's recvbuff, the reduce-scatter's sendbuff): `count` elements at b * count, or
 * for the V calls vcounts[b] elements at vdispls[b]. Returns the byte offset.
 */
static size_t ring_block(const braid_coll_t *coll, int b, size_t *bytes_p)
{
    size_t es = braid_dtype_size(coll->dtype);
    if (coll->vcounts != NULL) {
        *bytes_p = coll->vcounts[b] * es;
        return coll->vdispls[b] * es;
    }
    *bytes_p = coll->count * es;
    return (size_t)b * coll->count * es;
}

/*
 * Ring all-gather: n steps in one stage; block b is rank b's `count` elements, stored at
 * recvbuff + b * count (V: vcounts[b] elements at recvbuff + vdispls[b]). Step t stores
 * block (r - t) mod n and passes it on, except the last:
 *
 *   step      0                 1            ..  n-1
 *   rank r    own -> [r], send  recv [r-1],  ..  recv [r+1]
 *                               store, send
 *
 * In place (sendbuff == recvbuff + r * count, V: + vdispls[r]) block r is already there:
 * step 0 only sends.
 */
static braid_status_t ring_allgather_build(const braid_coll_t *coll, braid_sched_t *s)
{
    int n = coll->nranks, r = coll->rank;
    for (int t = 0; t < n; t++) {
        size_t bytes, off = ring_block(coll, braid_mod(r - t, n), &bytes);
        int keep = t > 0 || !coll->in_place;
        if (!keep && n == 1)
            break;                              /* one rank, in place: nothing to move */
        BRAID_CHECK(braid_sched_add(s, t > 0 ? braid_mod(r - 1, n) : -1,
                                    t < n - 1 ? braid_mod(r + 1, n) : -1,
                                    t == 0 ? braid_ref(BRAID_BUF_SEND, 0) : braid_ref_none(),
                                    keep ? braid_ref(BRAID_BUF_RECV, off) : braid_ref_none(),
                                    bytes, 0));
    }
    return BRAID_OK;
}

/*
 * Ring reduce-scatter: n steps in one stage; block b is the `count` elements that end on
 * rank b, at sendbuff + b * count (V: vcounts[b] elements at sendbuff + vdispls[b]). Step t
 * handles block (r - t - 1) mod n, so the partial of block b starts at rank b+1 and, after
 * visiting every rank, ends complete on rank b:
 *
 *   step      0                 1 .. n-2                n-1
 *   rank r    send pre([r-1])   recv, add pre([r-t-1]),  recv, add pre([r]), FINAL,
 *                               send                     store at recvbuff + 0
 *
 * In place (recvbuff == sendbuff + r * count, V: + vdispls[r]) block r is read and written
 * only by the last step, at the same offsets, which the kernels allow.
 */
static braid_status_t ring_reducescatter_build(const braid_coll_t *coll, braid_sched_t *s)
{
    int n = coll->nranks, r = coll->rank;
    for (int t = 0; t < n; t++) {
        size_t bytes, off = ring_block(coll, braid_mod(r - t - 1, n), &bytes);
        int final = t == n - 1;
        BRAID_CHECK(braid_sched_add(s, t > 0 ? braid_mod(r - 1, n) : -1,
                                    final ? -1 : braid_mod(r + 1, n),
                                    braid_ref(BRAID_BUF_SEND, off),
                                    final ? braid_ref(BRAID_BUF_RECV, 0) : braid_ref_none(), bytes,
                                    BRAID_STEP_REDUCE | (final ? BRAID_STEP_FINAL : 0)));
    }
    return BRAID_OK;
}

static braid_status_t ring_build(const braid_coll_t *coll, braid_sched_t *s)
{
    switch (coll->kind) {
    case BRAID_COLL_ALLREDUCE:
        return ring_allreduce_build(coll, s);
    case BRAID_COLL_ALLGATHER:
        return ring_allgather_build(coll, s);
    case BRAID_COLL_REDUCESCATTER:
        return ring_reducescatter_build(coll, s);
    default:
        return BRAID_ERR_UNSUPPORTED;
    }
}

/*
 * 2(n-1) (all-reduce) or n-1 steps of a chunk each, pipelined, over the slowest link of
 * the ring; between hosts the ring's links that leave one host share its NIC. (The V calls
 * are forced to the ring and never priced; were they, their mean block stands for a chunk.)
 */
static double ring_cost(const braid_coll_t *c, const braid_model_t *m)
{
    int n = c->nranks;
    double b = (double)braid_coll_bytes(c);
    braid_link_t l = braid_coll_worst(c);
    double share = l == BRAID_LINK_NET && c->topo != NULL ? c->topo->ring_out : 1;
    if (n == 1)
        return braid_model_local(m, b);
    switch (c->kind) {
    case BRAID_COLL_ALLREDUCE:
        return braid_model_steps(m, l, 2 * (n - 1), b / n, share, b * (n - 1) / n);
    case BRAID_COLL_ALLGATHER:
        return braid_model_steps(m, l, n - 1, b / n, share, 0);
    case BRAID_COLL_REDUCESCATTER:
        return braid_model_steps(m, l, n - 1, b / n, share, b * (n - 1) / n);
    default:
        return BRAID_COST_NONE;
    }
}

const braid_algo_t braid_algo_ring = {
    .name = "ring",
    .colls = (1u << BRAID_COLL_ALLREDUCE) | (1u << BRAID_COLL_ALLGATHER) |
             (1u << BRAID_COLL_REDUCESCATTER),
    .build = ring_build,
    .cost = ring_cost,
};
