/*
 * Rabenseifner's all-reduce: a reduce-scatter by recursive halving, then an all-gather by
 * recursive doubling, over p = 2^k participants (the extra ranks folded in before and
 * served after: algorithms/rd.h). The vector is cut into p chunks (braid_chunk); chunk v
 * ends reduced on participant v. 2 log2(p) rounds, each moving (p-1)/p of the vector in
 * all each way: the bandwidth of the ring with the latency of recursive doubling.
 *
 *   p = 4, chunks A B C D        participant 0      1      2      3
 *   halving, distance 2: 0<->2, 1<->3, keep    [A B]  [A B]  [C D]  [C D]   (sum of 2)
 *   halving, distance 1: 0<->1, 2<->3, keep    [A]    [B]    [C]    [D]     (sum of 4)
 *   doubling, distance 1                       [A B]  [A B]  [C D]  [C D]
 *   doubling, distance 2                       [A B C D] everywhere
 *
 * Each chunk is reduced by one participant only (FINAL there, in its last halving round)
 * and copied after, so every rank ends with the same bits. Partials live in recvbuff at
 * their own offsets: in place (sendbuff == recvbuff) the first round reads sendbuff at the
 * offsets it writes, and the halves it sends are overwritten only by the doubling rounds,
 * in later stages. One stage per round (algorithms/rd.c says why that is deadlock-free).
 *
 *   folded even rank:  send pre(x) to the odd rank;  [stage]  recv the result
 *   folded odd rank:   recv, add pre(own) into recvbuff;  halving;  doubling;  send all
 */
#include "algorithms/model.h"
#include "algorithms/rd.h"
#include "exec/sched.h"

static braid_status_t rabenseifner_build(const braid_coll_t *c, braid_sched_t *s)
{
    braid_rd_t rd;
    size_t bytes = c->count * braid_dtype_size(c->dtype);
    braid_rd_part_t part = { BRAID_BUF_SEND, BRAID_STEP_REDUCE };
    braid_rd_init(&rd, c, 0);
    int r = c->rank, folded = r < 2 * rd.extra;

    if (c->kind != BRAID_COLL_ALLREDUCE)
        return BRAID_ERR_UNSUPPORTED;
    if (rd.n == 1)
        return braid_sched_add(s, -1, -1, braid_ref(BRAID_BUF_SEND, 0),
                               braid_ref(BRAID_BUF_RECV, 0), bytes,
                               BRAID_STEP_REDUCE | BRAID_STEP_FINAL);
    if (rd.vrank < 0) {
        BRAID_CHECK(braid_sched_add(s, -1, r + 1, braid_ref(BRAID_BUF_SEND, 0), braid_ref_none(),
                                    bytes, BRAID_STEP_REDUCE));
        braid_sched_stage(s);
        return braid_sched_add(s, r + 1, -1, braid_ref_none(), braid_ref(BRAID_BUF_RECV, 0), bytes,
                               0);
    }
    if (folded) {
        BRAID_CHECK(braid_sched_add(s, r - 1, -1, braid_ref(BRAID_BUF_SEND, 0),
                                    braid_ref(BRAID_BUF_RECV, 0), bytes, BRAID_STEP_REDUCE));
        part = (braid_rd_part_t){ BRAID_BUF_RECV, BRAID_STEP_REDUCE | BRAID_STEP_ACC };
    }
    BRAID_CHECK(braid_rd_halve(&rd, s, &part, BRAID_BUF_RECV, 1, 1));
    BRAID_CHECK(braid_rd_double(&rd, s, BRAID_BUF_RECV));
    if (!folded)
        return BRAID_OK;
    braid_sched_stage(s);
    return braid_sched_add(s, -1, r - 1, braid_ref(BRAID_BUF_RECV, 0), braid_ref_none(), bytes, 0);
}

/*
 * Round by round, as rd's cost: the halving round at distance d moves d/p of the buffer b
 * and combines it, the doubling round at d moves it back, both on the slowest link between
 * that round's partners (with ranks numbered host by host the short distances stay inside
 * hosts); in a round between hosts every rank of a host sends off it at once, sharing its
 * NIC. When n != p, 2 more hops of b and b combined (the fold). In all 2 (p-1)/p of b moved
 * and (p-1)/p combined, plus the passes over the buffers between rounds.
 */
static double rabenseifner_cost(const braid_coll_t *c, const braid_model_t *m)
{
    braid_rd_t rd;
    double b = (double)braid_coll_bytes(c), t = 0;
    if (c->kind != BRAID_COLL_ALLREDUCE)
        return BRAID_COST_NONE;
    if (c->nranks == 1)
        return braid_model_local(m, b);
    braid_rd_init(&rd, c, 0);
    for (int d = 1; d < rd.p; d *= 2)
        t += braid_rd_round_cost(&rd, c, m, d, 2, b * d / rd.p, b * d / rd.p);
    if (rd.extra > 0)
        t += braid_rd_round_cost(&rd, c, m, 0, 2, b, b);
    double moved = 2 * b * (rd.p - 1) / rd.p + (rd.extra > 0 ? 2 * b : 0);
    return t + braid_model_passes(m, c, 2 * moved);
}

const braid_algo_t braid_algo_rabenseifner = {
    .name = "rabenseifner",
    .colls = (1u << BRAID_COLL_ALLREDUCE),
    .build = rabenseifner_build,
    .cost = rabenseifner_cost,
};
