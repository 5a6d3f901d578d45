/*
 * Binomial tree broadcast and reduce: ceil(log2 n) hops instead of the chain's n-1.
 *
 * Virtual ranks v = (rank - root) mod n. The parent of v > 0 is v with its lowest set bit
 * cleared; the children of v are v + 2^k for every 2^k below v's lowest set bit (every
 * 2^k < n for the root) with v + 2^k < n. Child v + 2^k heads a subtree of up to 2^k
 * ranks, k levels deep:
 *
 *   v:   0                       n = 8: 0 -> 4, 2, 1
 *       /|\                             4 -> 6, 5
 *      4 2 1                            2 -> 3
 *     /|  \                             6 -> 7
 *    6 5   3
 *    |
 *    7
 *
 * One stage, so the executor pipelines the whole tree slice by slice. Broadcast: a rank
 * receives slice i into recvbuff and forwards it to its deepest child in the same step,
 * then copies it to the others, deepest first (the slice reaches the deepest leaf soonest).
 * Reduce: a rank adds its children's partials into pre(own), shallowest first (a leaf's
 * slice is there first), and sends the sum to its parent; the root applies FINAL into
 * recvbuff. A non-root rank's partial lives in scratch (its recvbuff may be NULL, as a
 * non-root broadcast's sendbuff may be: neither is named). In place (the root's sendbuff ==
 * recvbuff) every step reads and writes its slice at the same offsets.
 *
 * Root tokens (sched.h): the ranks that receive no data get a token first, the broadcast's
 * root from virtual rank n-1 (a leaf), a reduce's leaves from their parents.
 *
 * Deadlock freedom: a receive of slice i waits for the neighbour one level nearer the
 * root (broadcast) or the leaves (reduce) at slice i, which waits only on ranks further
 * that way; a send of slice i waits for its receiver to free the slot of slice i-2
 * (FIFOs hold >= 2 slots), an earlier slice. Each link carries one message per slice.
 */
#include "algorithms/model.h"
#include "exec/sched.h"

/* Children of virtual rank v (as virtual ranks), deepest subtree first; returns how many. */
static int binomial_kids(int n, int v, int kids[32])
{
    int low = 1, m = 0;
    while (low < n && !(v & low))
        low <<= 1;
    for (int k = low >> 1; k > 0; k >>= 1)
        if (v + k < n)
            kids[m++] = v + k;
    return m;
}

/*
 * Broadcast: step 0 takes the value (recv from the parent, or the root's sendbuff) into
 * recvbuff and sends it to the first child; steps 1.. copy it to the other children.
 *
 *   root     sendbuff -> recvbuff, send kid 0; send kid 1..   "copySend", "send"
 *   other    recv -> recvbuff, send kid 0; send kid 1..       "recvCopySend", "send"
 */
static braid_status_t binomial_broadcast_build(const braid_coll_t *c, braid_sched_t *s)
{
    int n = c->nranks, v = braid_mod(c->rank - c->root, n), kids[32];
    int m = binomial_kids(n, v, kids);
    size_t bytes = c->count * braid_dtype_size(c->dtype);
    braid_ref_t val = braid_ref(v == 0 ? BRAID_BUF_SEND : BRAID_BUF_RECV, 0);
    int up = v > 0 ? braid_mod((v & (v - 1)) + c->root, n) : -1;
    int kid0 = m > 0 ? braid_mod(kids[0] + c->root, n) : -1;

    if (v == n - 1 && v > 0)
        BRAID_CHECK(braid_sched_token_send(s, c->root, bytes));
    if (v > 0 || !c->in_place || m > 0)
        BRAID_CHECK(braid_sched_add(s, up, kid0, v > 0 ? braid_ref_none() : val,
                                    v > 0 || !c->in_place ? braid_ref(BRAID_BUF_RECV, 0)
                                                          : braid_ref_none(),
                                    bytes, 0));
    for (int i = 1; i < m; i++)
        BRAID_CHECK(braid_sched_add(s, -1, braid_mod(kids[i] + c->root, n), val,
                                    braid_ref_none(), bytes, 0));
    if (v > 0 || n == 1)
        return BRAID_OK;
    return braid_sched_token_recv(s, braid_mod(c->root - 1, n), bytes);
}

/*
 * Reduce: the partial starts as pre(own) and takes each child's partial in turn, the
 * shallowest first; the last step sends it up (root: FINAL into recvbuff).
 *
 *   leaf       send pre(own)                                 "send"
 *   kids 1..m  recv, + pre(own) or partial -> partial, ...   "recvReduceCopy"
 *              recv, + partial, send (root: FINAL, store)    "recvReduceSend"
 */
static braid_status_t binomial_reduce_build(const braid_coll_t *c, braid_sched_t *s)
{
    int n = c->nranks, v = braid_mod(c->rank - c->root, n), kids[32];
    int m = binomial_kids(n, v, kids), root = v == 0;
    size_t bytes = c->count * braid_dtype_size(c->dtype);
    int up = root ? -1 : braid_mod((v & (v - 1)) + c->root, n);
    braid_ref_t own = braid_ref(BRAID_BUF_SEND, 0);
    braid_ref_t acc = braid_ref(root ? BRAID_BUF_RECV : BRAID_BUF_SCRATCH, 0);

    if (m == 0) {
        BRAID_CHECK(braid_sched_add(s, -1, up, own, root ? acc : braid_ref_none(), bytes,
                                    BRAID_STEP_REDUCE | (root ? BRAID_STEP_FINAL : 0)));
        return root ? BRAID_OK : braid_sched_token_recv(s, up, bytes);
    }
    for (int i = 0; i < m; i++)
        if ((kids[i] & 1) || kids[i] + 1 >= n)     /* a leaf */
            BRAID_CHECK(braid_sched_token_send(s, braid_mod(kids[i] + c->root, n), bytes));
    if (!root && m > 1)
        s->scratch_bytes = bytes;
    for (int i = m - 1; i >= 0; i--) {
        int last = i == 0;
        uint32_t flags = BRAID_STEP_REDUCE | (i < m - 1 ? BRAID_STEP_ACC : 0) |
                         (last && root ? BRAID_STEP_FINAL : 0);
        BRAID_CHECK(braid_sched_add(s, braid_mod(kids[i] + c->root, n), last ? up : -1,
                                    i < m - 1 ? acc : own,
                                    !last || root ? acc : braid_ref_none(), bytes, flags));
    }
    return BRAID_OK;
}

static braid_status_t binomial_build(const braid_coll_t *c, braid_sched_t *s)
{
    switch (c->kind) {
    case BRAID_COLL_BROADCAST:
        return binomial_broadcast_build(c, s);
    case BRAID_COLL_REDUCE:
        return binomial_reduce_build(c, s);
    default:
        return BRAID_ERR_UNSUPPORTED;
    }
}

/*
 * D = ceil(log2 n) hops; the root moves the buffer to (or from) D children, pipelined, with
 * D-1 slices of fill down the deepest path, the D buffers in slices; a reduce's root
 * combines D buffers:
 *   D * (alpha + step) + (D * b + (D-1) * slice(b)) * beta + cuts(b, D)
 *   + [reduce] D * b * gamma
 */
static double binomial_cost(const braid_coll_t *c, const braid_model_t *m)
{
    int n = c->nranks, d = braid_log2_ceil(n);
    double b = (double)braid_coll_bytes(c);
    braid_link_t l = braid_coll_worst(c);
    if (c->kind != BRAID_COLL_BROADCAST && c->kind != BRAID_COLL_REDUCE)
        return BRAID_COST_NONE;
    if (n == 1)
        return braid_model_local(m, b);
    return d * (m->alpha[l] + m->step) + d * b * braid_model_beta(m, l, 1) +
           braid_model_fill(m, l, b, d, 1) + braid_model_cuts(m, l, b, d) +
           (c->kind == BRAID_COLL_REDUCE ? d * b * m->gamma : 0);
}

const braid_algo_t braid_algo_binomial = {
    .name = "binomial",
    .colls = (1u << BRAID_COLL_BROADCAST) | (1u << BRAID_COLL_REDUCE),
    .build = binomial_build,
    .cost = binomial_cost,
};
