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
 * message (the ring about 3 times), which only pays while latency dominates: the algorithm
 * takes messages of up to BRAID_ONESHOT_PER_RANK bytes per rank and BRAID_ONESHOT_MAX bytes
 * in total (message x ranks). Measured on 2 cores, float sum, one-shot against the ring:
 * 2 ranks 0.6-0.9 vs 0.8-1.4 us at 8-256 B, even at 512 B-1 KiB, 2.4 vs 2.1 us at 2 KiB and
 * 8.6 vs 5.4 us at 8 KiB; 4 ranks 5-7 vs 11-13 us at 64 B-1 KiB, even at 2-4 KiB.
 */
#include "algorithms/sched.h"

#define BRAID_ONESHOT_PER_RANK 256      /* message bytes per rank of the communicator */
#define BRAID_ONESHOT_MAX (16 * 1024)   /* message bytes x ranks */

static braid_status_t oneshot_build(const braid_coll_t *coll, braid_sched_t *s)
{
    int n = coll->nranks;
    size_t bytes = coll->count * braid_dtype_size(coll->dtype);
    if (coll->kind != BRAID_COLL_ALLREDUCE || bytes > (size_t)BRAID_ONESHOT_PER_RANK * n ||
        bytes * (size_t)n > BRAID_ONESHOT_MAX)
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

const braid_algo_t braid_algo_oneshot = {
    .name = "oneshot",
    .colls = 1u << BRAID_COLL_ALLREDUCE,
    .build = oneshot_build,
};
