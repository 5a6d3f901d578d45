/*
 * One-shot all-reduce for small messages: one hop instead of the ring's 2(n-1).
 *
 *   rank r:  send pre(x_r) to every rank, itself included      (n sends, one stage)
 *            acc  = recv from rank 0
 *            acc  = recv from rank 1  (+) acc
 *            ...
 *            acc  = recv from rank n-1 (+) acc,  FINAL         -> recvbuff
 *
 * Every rank combines the same contributions in the same order (rank 0 first), so all get
 * the same bits; its own contribution comes back through its FIFO to itself so that it
 * takes its place in that order. The sends of a slice all precede its receives, and every
 * FIFO holds at least two slots, so nothing waits on a cycle. Each rank moves n times the
 * message (the ring about 3 times), which only pays while latency dominates; the tuner
 * weighs that (oneshot_cost). Measured on 2 cores, float sum, one-shot against the ring:
 * 2 ranks 0.6-0.9 vs 0.8-1.4 us at 8-256 B, even at 512 B-1 KiB, 2.4 vs 2.1 us at 2 KiB and
 * 8.6 vs 5.4 us at 8 KiB; 4 ranks 5-7 vs 11-13 us at 64 B-1 KiB, even at 2-4 KiB.
 */
#include "algorithms/model.h"
#include "exec/sched.h"

static braid_status_t oneshot_build(const braid_coll_t *coll, braid_sched_t *s)
{
    int n = coll->nranks;
    size_t bytes = coll->count * braid_dtype_size(coll->dtype);
    if (coll->kind != BRAID_COLL_ALLREDUCE)
        return BRAID_ERR_UNSUPPORTED;
    for (int p = 0; p < n; p++)
        BRAID_CHECK(braid_sched_add(s, -1, p, braid_ref(BRAID_BUF_SEND, 0), braid_ref_none(),
                                    bytes, BRAID_STEP_REDUCE));
    BRAID_CHECK(braid_sched_add(s, 0, -1, braid_ref_none(), braid_ref(BRAID_BUF_RECV, 0), bytes,
                                n == 1 ? BRAID_STEP_FINAL : 0));
    for (int q = 1; q < n; q++)
        BRAID_CHECK(braid_sched_add(s, q, -1, braid_ref(BRAID_BUF_RECV, 0),
                                    braid_ref(BRAID_BUF_RECV, 0), bytes,
                                    BRAID_STEP_REDUCE | BRAID_STEP_ACC |
                                        (q == n - 1 ? BRAID_STEP_FINAL : 0)));
    return BRAID_OK;
}

/*
 * One hop; each rank sends n-1 copies (a host's ranks share its NIC) and one to itself,
 * copies the first it receives and combines the other n-1. Over a network a rank's n-1
 * sends and n-1 receives are system calls made one after the other, and they are most of a
 * small message's latency (alpha: half a round trip, one send and one receive), so the hop
 * costs alpha per message, not once. Measured on 2 hosts x 2 ranks (2 cores), 8 B:
 * one-shot 65-77 us, rd (two hops of one message) 40-47 us.
 */
static double oneshot_cost(const braid_coll_t *c, const braid_model_t *m)
{
    int n = c->nranks;
    double b = (double)braid_coll_bytes(c);
    braid_link_t l = braid_coll_worst(c);
    double hop = l == BRAID_LINK_NET ? (n - 1) * m->alpha[l] : m->alpha[l];
    double out = (n - 1) * b * braid_model_beta(m, l, braid_model_nic_share(c));
    return hop + 2 * n * m->step + out + b * m->beta[BRAID_LINK_SELF] + (n - 1) * b * m->gamma;
}

const braid_algo_t braid_algo_oneshot = {
    .name = "oneshot",
    .colls = 1u << BRAID_COLL_ALLREDUCE,
    .build = oneshot_build,
    .cost = oneshot_cost,
};
