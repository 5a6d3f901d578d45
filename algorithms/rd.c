/*
 * Recursive doubling (rd): all-reduce, all-gather and reduce-scatter in log2(p) rounds, for
 * small messages where the ring's 2(n-1) or n-1 latencies dominate.
 *
 * p = 2^k participants (folding of the extra ranks: algorithms/rd.h); in the round of
 * distance d participant v exchanges with v ^ d:
 *
 *   d = 1:   0 <-> 1   2 <-> 3   4 <-> 5   6 <-> 7
 *   d = 2:   0 <-> 2   1 <-> 3   4 <-> 6   5 <-> 7
 *   d = 4:   0 <-> 4   1 <-> 5   2 <-> 6   3 <-> 7
 *
 * All-reduce: every round exchanges the whole partial and combines it, so after the round
 * of distance d each participant holds the reduction over its group of 2d. The two sides of
 * a round combine the same two partials (a op b on one, b op a on the other), so every rank
 * ends with the same bits. A value at offset x depends only on values at offset x, so the
 * whole schedule is one stage: the executor pipelines it slice by slice, each rank passing
 * slice i through its rounds while slice i+1 is on the way (recvReduceCopySend steps).
 *
 * All-gather: recursive doubling of blocks. Before the round of distance d a participant
 * holds the blocks of its group of d, a contiguous range; it sends them and receives the
 * partner's group's. Reduce-scatter: recursive halving, the same exchanges in the opposite
 * order over halves of the range still to reduce; partials go to scratch, and the round of
 * distance 1 combines each block where it ends. Both take one stage per round: a round
 * sends what the previous one received, at other offsets.
 *
 * Folded ranks (the even rank of each of the first n - p pairs) send their data to the odd
 * rank first and receive their result from it last. Deadlock freedom: a rank's sends go to
 * its partner of the round, which receives them in the same round (in the pipelined
 * all-reduce: at the same slice), so every wait is on an earlier round or slice.
 */
#include "algorithms/model.h"
#include "algorithms/rd.h"
#include "exec/sched.h"

void braid_rd_init(braid_rd_t *rd, const braid_coll_t *c, int by_rank)
{
    rd->n = c->nranks;
    rd->p = 1;
    rd->rounds = 0;
    while (2 * rd->p <= rd->n) {
        rd->p *= 2;
        rd->rounds++;
    }
    rd->extra = rd->n - rd->p;
    rd->rank = c->rank;
    if (c->rank < 2 * rd->extra)
        rd->vrank = c->rank % 2 ? c->rank / 2 : -1;
    else
        rd->vrank = c->rank - rd->extra;
    rd->by_rank = by_rank;
    rd->count = c->count;
    rd->es = braid_dtype_size(c->dtype);
}

/* The first rank participant v stands for (participant v + 1's: one past its last). */
static int rd_block(const braid_rd_t *rd, int v)
{
    return v <= rd->extra ? 2 * v : v + rd->extra;
}

/* First element of participant v's data (v == p: one past the end). */
static size_t rd_first(const braid_rd_t *rd, int v)
{
    size_t first, len;
    if (rd->by_rank)
        return (size_t)rd_block(rd, v) * rd->count;
    braid_chunk(rd->count, rd->p, v, &first, &len);
    return first;
}

void braid_rd_span(const braid_rd_t *rd, int v0, int v1, size_t *off_p, size_t *bytes_p)
{
    size_t first = rd_first(rd, v0);
    *off_p = first * rd->es;
    *bytes_p = (rd_first(rd, v1) - first) * rd->es;
}

braid_status_t braid_rd_halve(const braid_rd_t *rd, braid_sched_t *s, braid_rd_part_t *part,
                              braid_buf_t acc, int dmin, int final)
{
    int v = rd->vrank;
    for (int d = rd->p / 2; d >= dmin; d /= 2) {
        int w = v ^ d, peer = braid_rd_real(rd, w);
        int keep = v & ~(d - 1), give = w & ~(d - 1);
        size_t koff, kbytes, goff, gbytes;
        braid_rd_span(rd, keep, keep + d, &koff, &kbytes);
        braid_rd_span(rd, give, give + d, &goff, &gbytes);
        braid_sched_stage(s);
        BRAID_CHECK(braid_sched_add(s, -1, peer, braid_ref(part->buf, goff), braid_ref_none(),
                                    gbytes, part->flags & BRAID_STEP_ACC ? 0 : BRAID_STEP_REDUCE));
        BRAID_CHECK(braid_sched_add(s, peer, -1, braid_ref(part->buf, koff), braid_ref(acc, koff),
                                    kbytes, part->flags |
                                        (final && d == 1 ? BRAID_STEP_FINAL : 0)));
        part->buf = acc;
        part->flags = BRAID_STEP_REDUCE | BRAID_STEP_ACC;
    }
    return BRAID_OK;
}

braid_status_t braid_rd_double(const braid_rd_t *rd, braid_sched_t *s, braid_buf_t buf)
{
    int v = rd->vrank;
    for (int d = 1; d < rd->p; d *= 2) {
        int w = v ^ d, peer = braid_rd_real(rd, w);
        int have = v & ~(d - 1), get = w & ~(d - 1);
        size_t hoff, hbytes, goff, gbytes;
        braid_rd_span(rd, have, have + d, &hoff, &hbytes);
        braid_rd_span(rd, get, get + d, &goff, &gbytes);
        braid_sched_stage(s);
        BRAID_CHECK(braid_sched_add(s, -1, peer, braid_ref(buf, hoff), braid_ref_none(), hbytes,
                                    0));
        BRAID_CHECK(braid_sched_add(s, peer, -1, braid_ref_none(), braid_ref(buf, goff), gbytes,
                                    0));
    }
    return BRAID_OK;
}

/*
 * All-reduce, one stage; participant v with partners q_k = v ^ 2^k, k < L = log2(p):
 *
 *   step 0        send pre(own) to q_0          (folded odd rank: recv the even rank's
 *                                                pre(x), add pre(own), store, send)
 *   step k+1      recv from q_k, add, store in recvbuff, send to q_k+1   (k < L-1)
 *   step L        recv from q_L-1, add, FINAL, store (folded odd rank: send to the even)
 *
 * A folded even rank sends pre(own) to the odd rank and receives the result, in the same
 * stage: the odd rank pipelines its slices, so the even one must take them as they come.
 */
static braid_status_t rd_allreduce_build(const braid_coll_t *c, braid_sched_t *s)
{
    braid_rd_t rd;
    size_t bytes = c->count * braid_dtype_size(c->dtype);
    braid_rd_part_t part = { BRAID_BUF_SEND, BRAID_STEP_REDUCE };
    braid_rd_init(&rd, c, 0);
    int v = rd.vrank, r = c->rank, folded = r < 2 * rd.extra;

    if (rd.n == 1)
        return braid_sched_add(s, -1, -1, braid_ref(BRAID_BUF_SEND, 0),
                               braid_ref(BRAID_BUF_RECV, 0), bytes,
                               BRAID_STEP_REDUCE | BRAID_STEP_FINAL);
    if (v < 0) {
        BRAID_CHECK(braid_sched_add(s, -1, r + 1, braid_ref(BRAID_BUF_SEND, 0), braid_ref_none(),
                                    bytes, BRAID_STEP_REDUCE));
        return braid_sched_add(s, r + 1, -1, braid_ref_none(), braid_ref(BRAID_BUF_RECV, 0), bytes,
                               0);
    }
    BRAID_CHECK(braid_sched_add(s, folded ? r - 1 : -1, braid_rd_real(&rd, v ^ 1),
                                braid_ref(BRAID_BUF_SEND, 0),
                                folded ? braid_ref(BRAID_BUF_RECV, 0) : braid_ref_none(), bytes,
                                BRAID_STEP_REDUCE));
    if (folded)
        part = (braid_rd_part_t){ BRAID_BUF_RECV, BRAID_STEP_REDUCE | BRAID_STEP_ACC };
    for (int k = 0; k < rd.rounds; k++) {
        int last = k == rd.rounds - 1;
        int next = last ? (folded ? r - 1 : -1) : braid_rd_real(&rd, v ^ (2 << k));
        BRAID_CHECK(braid_sched_add(s, braid_rd_real(&rd, v ^ (1 << k)), next,
                                    braid_ref(part.buf, 0), braid_ref(BRAID_BUF_RECV, 0), bytes,
                                    part.flags | (last ? BRAID_STEP_FINAL : 0)));
        part = (braid_rd_part_t){ BRAID_BUF_RECV, BRAID_STEP_REDUCE | BRAID_STEP_ACC };
    }
    return BRAID_OK;
}

/*
 * All-gather: own block into place (a folded even rank sends it to the odd one, which
 * stores it), log2(p) doubling rounds over recvbuff, then the folded odd rank sends the
 * even one every block but the even one's own (two messages: before it and after it).
 */
static braid_status_t rd_allgather_build(const braid_coll_t *c, braid_sched_t *s)
{
    braid_rd_t rd;
    size_t blk = c->count * braid_dtype_size(c->dtype), own = (size_t)c->rank * blk;
    size_t all = (size_t)c->nranks * blk;
    braid_ref_t keep = c->in_place ? braid_ref_none() : braid_ref(BRAID_BUF_RECV, own);
    braid_rd_init(&rd, c, 1);
    int r = c->rank;

    if (rd.vrank < 0) {
        BRAID_CHECK(braid_sched_add(s, -1, r + 1, braid_ref(BRAID_BUF_SEND, 0), keep, blk, 0));
        braid_sched_stage(s);
        BRAID_CHECK(braid_sched_add(s, r + 1, -1, braid_ref_none(), braid_ref(BRAID_BUF_RECV, 0),
                                    own, 0));
        return braid_sched_add(s, r + 1, -1, braid_ref_none(),
                               braid_ref(BRAID_BUF_RECV, own + blk), all - own - blk, 0);
    }
    if (!c->in_place)
        BRAID_CHECK(braid_sched_add(s, -1, -1, braid_ref(BRAID_BUF_SEND, 0), keep, blk, 0));
    if (r < 2 * rd.extra)
        BRAID_CHECK(braid_sched_add(s, r - 1, -1, braid_ref_none(),
                                    braid_ref(BRAID_BUF_RECV, own - blk), blk, 0));
    BRAID_CHECK(braid_rd_double(&rd, s, BRAID_BUF_RECV));
    if (r >= 2 * rd.extra)
        return BRAID_OK;
    braid_sched_stage(s);
    BRAID_CHECK(braid_sched_add(s, -1, r - 1, braid_ref(BRAID_BUF_RECV, 0), braid_ref_none(),
                                own - blk, 0));
    return braid_sched_add(s, -1, r - 1, braid_ref(BRAID_BUF_RECV, own), braid_ref_none(),
                           all - own, 0);
}

/*
 * The round of distance 1 of the reduce-scatter: one message per block, so that each block
 * is combined where it ends: this rank's into recvbuff, a folded even rank's on its way to
 * that rank (recvReduceSend).
 */
static braid_status_t rd_reducescatter_last(const braid_rd_t *rd, braid_sched_t *s,
                                            braid_rd_part_t part)
{
    int v = rd->vrank, w = v ^ 1, peer = braid_rd_real(rd, w);
    size_t blk = rd->count * rd->es;

    braid_sched_stage(s);
    for (int b = rd_block(rd, w); b < rd_block(rd, w + 1); b++)
        BRAID_CHECK(braid_sched_add(s, -1, peer, braid_ref(part.buf, (size_t)b * blk),
                                    braid_ref_none(), blk,
                                    part.flags & BRAID_STEP_ACC ? 0 : BRAID_STEP_REDUCE));
    for (int b = rd_block(rd, v); b < rd_block(rd, v + 1); b++) {
        int mine = b == rd->rank;
        BRAID_CHECK(braid_sched_add(s, peer, mine ? -1 : b, braid_ref(part.buf, (size_t)b * blk),
                                    mine ? braid_ref(BRAID_BUF_RECV, 0) : braid_ref_none(), blk,
                                    part.flags | BRAID_STEP_FINAL));
    }
    return BRAID_OK;
}

/*
 * Reduce-scatter: a folded even rank sends pre(all its blocks) to the odd one, which adds
 * its own into scratch; halving rounds of distance p/2 .. 2 into scratch; the last round
 * per block (rd_reducescatter_last); the folded even rank receives its block last.
 */
static braid_status_t rd_reducescatter_build(const braid_coll_t *c, braid_sched_t *s)
{
    braid_rd_t rd;
    size_t blk = c->count * braid_dtype_size(c->dtype), all = (size_t)c->nranks * blk;
    braid_rd_part_t part = { BRAID_BUF_SEND, BRAID_STEP_REDUCE };
    braid_rd_init(&rd, c, 1);
    int r = c->rank;

    if (rd.n == 1)
        return braid_sched_add(s, -1, -1, braid_ref(BRAID_BUF_SEND, 0),
                               braid_ref(BRAID_BUF_RECV, 0), blk,
                               BRAID_STEP_REDUCE | BRAID_STEP_FINAL);
    if (rd.vrank < 0) {
        BRAID_CHECK(braid_sched_add(s, -1, r + 1, braid_ref(BRAID_BUF_SEND, 0), braid_ref_none(),
                                    all, BRAID_STEP_REDUCE));
        braid_sched_stage(s);
        return braid_sched_add(s, r + 1, -1, braid_ref_none(), braid_ref(BRAID_BUF_RECV, 0), blk,
                               0);
    }
    if (r < 2 * rd.extra || rd.p > 2)
        s->scratch_bytes = all;
    if (r < 2 * rd.extra) {
        BRAID_CHECK(braid_sched_add(s, r - 1, -1, braid_ref(BRAID_BUF_SEND, 0),
                                    braid_ref(BRAID_BUF_SCRATCH, 0), all, BRAID_STEP_REDUCE));
        part = (braid_rd_part_t){ BRAID_BUF_SCRATCH, BRAID_STEP_REDUCE | BRAID_STEP_ACC };
    }
    BRAID_CHECK(braid_rd_halve(&rd, s, &part, BRAID_BUF_SCRATCH, 2, 0));
    return rd_reducescatter_last(&rd, s, part);
}

static braid_status_t rd_build(const braid_coll_t *c, braid_sched_t *s)
{
    switch (c->kind) {
    case BRAID_COLL_ALLREDUCE:
        return rd_allreduce_build(c, s);
    case BRAID_COLL_ALLGATHER:
        return rd_allgather_build(c, s);
    case BRAID_COLL_REDUCESCATTER:
        return rd_reducescatter_build(c, s);
    default:
        return BRAID_ERR_UNSUPPORTED;
    }
}

double braid_rd_round_cost(const braid_rd_t *rd, const braid_coll_t *c, const braid_model_t *m,
                           int dist, int nsteps, double bytes, double reduced)
{
    braid_link_t worst = BRAID_LINK_SELF;
    for (int v = 0; v < (dist ? rd->p : rd->extra); v++) {
        int a = dist ? braid_rd_real(rd, v) : 2 * v;
        braid_link_t l = braid_coll_link(c, a, dist ? braid_rd_real(rd, v ^ dist) : a + 1);
        worst = l > worst ? l : worst;
    }
    double share = dist && worst == BRAID_LINK_NET ? braid_coll_maxlocal(c) : 1;
    return braid_model_steps(m, worst, nsteps, bytes, share, reduced);
}

/*
 * Round by round, each on the slowest link between its partners (with ranks numbered host
 * by host, the rounds of short distance stay inside hosts); in a round between hosts every
 * rank of a host sends off it at once, sharing its NIC. The fold adds 2 hops when n != p.
 *   all-reduce       L rounds of the whole buffer b, each combined; the fold 2 hops of b
 *   all-gather       the round at distance d moves d/p of b (the whole output); fold ~b
 *   reduce-scatter   the same, and as many bytes combined
 */
static double rd_cost(const braid_coll_t *c, const braid_model_t *m)
{
    braid_rd_t rd;
    double b = (double)braid_coll_bytes(c), t = 0;
    int ar = c->kind == BRAID_COLL_ALLREDUCE, red = c->kind != BRAID_COLL_ALLGATHER;
    if (c->nranks == 1)
        return braid_model_local(m, b);
    if (!ar && c->kind != BRAID_COLL_ALLGATHER && c->kind != BRAID_COLL_REDUCESCATTER)
        return BRAID_COST_NONE;
    braid_rd_init(&rd, c, 0);
    for (int d = 1; d < rd.p; d *= 2) {
        double bytes = ar ? b : b * d / rd.p;
        t += braid_rd_round_cost(&rd, c, m, d, 1, bytes, red ? bytes : 0);
    }
    if (rd.extra > 0)
        t += braid_rd_round_cost(&rd, c, m, 0, 2, ar ? b : b / 2, red ? b : 0);
    return t + braid_model_passes(m, c, ar ? 2 * rd.rounds * b : b * (rd.p - 1) / rd.p);
}

const braid_algo_t braid_algo_rd = {
    .name = "rd",
    .colls = (1u << BRAID_COLL_ALLREDUCE) | (1u << BRAID_COLL_ALLGATHER) |
             (1u << BRAID_COLL_REDUCESCATTER),
    .build = rd_build,
    .cost = rd_cost,
};
