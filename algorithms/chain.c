/*
 * Chain algorithms: broadcast and reduce along the ring order, pipelined.
 *
 *   broadcast:  root --> root+1 --> root+2 --> ... --> root-1
 *   reduce:     root+1 --> root+2 --> ... --> root-1 --> root
 *
 * Each rank does one step over the whole buffer; the executor cuts it into slices, so a
 * rank forwards slice i while its predecessor already sends slice i+1, and the chain costs
 * about one buffer transfer plus (n - 1) slice latencies, as NCCL's ring broadcast/reduce.
 *
 * NCCL lets a non-root rank pass NULL for a buffer it does not use (reduce's recvbuff,
 * broadcast's sendbuff): those are never named here. In place (sendbuff == recvbuff on the
 * root) works: the root's broadcast skips its local copy, the root's reduce reads and
 * writes the same offsets in its final step, which the kernels allow.
 */
#include "algorithms/model.h"
#include "exec/sched.h"

/*
 * Chain broadcast: root -> root+1 -> ... -> root-1, each forwarding slice by slice.
 *
 *   root          root+1             ...   root-1
 *   [x] --send--> recv, store [x] --send--> recv, store [x]
 *                 ("recvCopySend")          ("recv")
 *
 * The root also copies x into its recvbuff, unless in place. The last rank sends the root
 * a token first (sched.h: root tokens), which the root takes after its data has gone.
 */
static braid_status_t chain_broadcast_build(const braid_coll_t *coll, braid_sched_t *s)
{
    int n = coll->nranks, r = coll->rank, pos = braid_mod(r - coll->root, n);
    size_t bytes = coll->count * braid_dtype_size(coll->dtype);
    int next = pos < n - 1 ? braid_mod(r + 1, n) : -1;

    if (pos > 0) {
        if (next < 0)
            BRAID_CHECK(braid_sched_token_send(s, coll->root, bytes));
        return braid_sched_add(s, braid_mod(r - 1, n), next, braid_ref_none(),
                               braid_ref(BRAID_BUF_RECV, 0), bytes, 0);
    }
    if (coll->in_place && next < 0)
        return BRAID_OK;                        /* one rank, in place: nothing to move */
    BRAID_CHECK(braid_sched_add(s, -1, next, braid_ref(BRAID_BUF_SEND, 0),
                                coll->in_place ? braid_ref_none() : braid_ref(BRAID_BUF_RECV, 0),
                                bytes, 0));
    return next < 0 ? BRAID_OK : braid_sched_token_recv(s, braid_mod(r - 1, n), bytes);
}

/*
 * Chain reduce: the partial travels root+1 -> root+2 -> ... -> root, growing at each hop.
 *
 *   root+1           root+2                   ...   root
 *   pre(a) --send--> recv, + pre(b) --send-->       recv, + pre(z), FINAL, store
 *   ("send")         ("recvReduceSend")             ("recvReduce" into recvbuff)
 *
 * With one rank the root's step has no receive: a local REDUCE|FINAL copy. The root sends
 * root+1, which receives no data, a token first (sched.h: root tokens).
 */
static braid_status_t chain_reduce_build(const braid_coll_t *coll, braid_sched_t *s)
{
    int n = coll->nranks, r = coll->rank, pos = braid_mod(r - coll->root - 1, n);
    size_t bytes = coll->count * braid_dtype_size(coll->dtype);
    int root = pos == n - 1;

    if (root && n > 1)
        BRAID_CHECK(braid_sched_token_send(s, braid_mod(r + 1, n), bytes));
    BRAID_CHECK(braid_sched_add(s, pos > 0 ? braid_mod(r - 1, n) : -1,
                                root ? -1 : braid_mod(r + 1, n), braid_ref(BRAID_BUF_SEND, 0),
                                root ? braid_ref(BRAID_BUF_RECV, 0) : braid_ref_none(), bytes,
                                BRAID_STEP_REDUCE | (root ? BRAID_STEP_FINAL : 0)));
    return pos == 0 && !root ? braid_sched_token_recv(s, coll->root, bytes) : BRAID_OK;
}

static braid_status_t chain_build(const braid_coll_t *coll, braid_sched_t *s)
{
    switch (coll->kind) {
    case BRAID_COLL_BROADCAST:
        return chain_broadcast_build(coll, s);
    case BRAID_COLL_REDUCE:
        return chain_reduce_build(coll, s);
    default:
        return BRAID_ERR_UNSUPPORTED;
    }
}

/* One buffer transfer over the slowest link, its slices, plus n-2 slices to fill the
 * pipeline. */
static double chain_cost(const braid_coll_t *c, const braid_model_t *m)
{
    int n = c->nranks;
    double b = (double)braid_coll_bytes(c);
    braid_link_t l = braid_coll_worst(c);
    if (n == 1)
        return braid_model_local(m, b);
    double fill = (n - 2) * braid_model_slice(m, b);
    return (n - 1) * (m->alpha[l] + m->step) + b * braid_model_beta(m, l, 1) +
           braid_model_fill(m, l, b, n - 1, 1) + braid_model_cuts(m, l, b, 1) +
           (c->kind == BRAID_COLL_REDUCE ? b + fill : 0) * m->gamma;
}

const braid_algo_t braid_algo_chain = {
    .name = "chain",
    .nccl = "ring",
    .colls = (1u << BRAID_COLL_BROADCAST) | (1u << BRAID_COLL_REDUCE),
    .build = chain_build,
    .cost = chain_cost,
};
