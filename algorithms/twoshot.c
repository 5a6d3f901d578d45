/*
 * Two-shot algorithms for large messages between ranks of one host: every rank reads what
 * it needs straight from its peers' buffers (single copy: cross-memory attach between
 * processes, plain loads between threads), instead of passing it through FIFO slots.
 *
 * All-reduce, n ranks, chunk c of the vector ends on every rank, reduced by rank c:
 *
 *   stage 0   hello -> every peer, hello <- every peer        (buffer addresses, pid, premul)
 *   stage 1   recv[c_r] = x_r[c_r] (+) x_r+1[c_r] (+) ... (+) x_r-1[c_r]     pulled from the
 *             peers' send buffers, reduced in cache slice by slice ("reduce-scatter")
 *   stage 2   token -> every peer                             "my chunk is final"
 *   stage 3   for each peer p: token <- p, recv[c_p] = p's recv[c_p]   ("all-gather")
 *   stage 4   bye -> every peer, bye <- every peer            "I am done with your buffers"
 *
 *             chunk 0     chunk 1                      rank r reads its own chunk and the
 *   rank 0    a0+b0  <--- b1+a1   (pulled in stage 3)  peers' parts of it once, and writes
 *   rank 1    a0+b0 --->  b1+a1                        it once; then copies the others'
 *                                                      chunks once: about 2.5 passes over
 *                                                      the message per rank on 2 ranks
 *
 * Reduce-scatter is stages 0, 1 and 4 (block r instead of chunk r); all-gather is stages
 * 0 and 4 around pulls of every peer's send buffer. Each chunk is reduced by one rank in a
 * fixed order (its owner's contribution first, then r+1, r+2, ...), so every rank ends with
 * the same bits. A peer's raw contribution is pulled with BRAID_STEP_PULL_PRE: the puller
 * applies the peer's pre-multiplier (ncclAvg, ncclPreMulSum), as that peer would have.
 *
 * Why the messages make it safe, in place included (sendbuff == recvbuff):
 *   - stage 1 reads the peers' send buffers, which are final when the call starts, and only
 *     the part of them that their owners never write (in place, rank p writes chunk q of its
 *     buffer only in stage 3, after rank q's token, i.e. after rank q stopped reading it);
 *   - stage 3 reads chunk p only after rank p's token says it is final;
 *   - nobody returns (and lets its caller touch the buffers) before every peer's bye.
 * Every message is sent before the receives of its stage, each FIFO carries at most three
 * messages of a call and a rank sends the third only after the second was received, so
 * nothing waits on a cycle.
 *
 * Used only when the communicator agreed at init that ranks read each other's buffers
 * (coll->pull) and the call's largest buffer has at least coll->pull_min bytes; other calls
 * are declined and go to the ring. Where that pays is decided at init (transports/shm):
 * between threads of one process a pull is a plain load and saves the copy through a slot;
 * between processes it is a copy by the kernel, which a FIFO slot that stays in cache
 * matches, so there the ring stays the default.
 */
#include "algorithms/model.h"
#include "exec/sched.h"

static braid_ref_t hello_ref(int rank)
{
    return braid_ref(BRAID_BUF_HELLO, (size_t)rank * BRAID_HELLO_BYTES);
}

/* A small message of `bytes` (hello, token, bye) from this rank's own record to every peer,
 * then one from every peer (discarded, unless it is a hello: stored in its record). */
static braid_status_t twoshot_exchange(const braid_coll_t *c, braid_sched_t *s, size_t bytes,
                                       int recv_too)
{
    int n = c->nranks, r = c->rank;
    for (int k = 1; k < n; k++)
        BRAID_CHECK(braid_sched_add(s, -1, braid_mod(r + k, n), hello_ref(r), braid_ref_none(),
                                    bytes, 0));
    for (int k = 1; k < n && recv_too; k++) {
        int p = braid_mod(r - k, n);
        BRAID_CHECK(braid_sched_add(s, p, -1, braid_ref_none(),
                                    bytes == BRAID_HELLO_BYTES ? hello_ref(p) : braid_ref_none(),
                                    bytes, 0));
    }
    return BRAID_OK;
}

static braid_status_t twoshot_hello(const braid_coll_t *c, braid_sched_t *s)
{
    return twoshot_exchange(c, s, BRAID_HELLO_BYTES, 1);
}

static braid_status_t twoshot_bye(const braid_coll_t *c, braid_sched_t *s)
{
    braid_sched_stage(s);
    return twoshot_exchange(c, s, BRAID_TOKEN_BYTES, 1);
}

/*
 * Reduce `bytes` at offset `off` of every rank's send buffer into `out` on this rank: own
 * contribution (+) rank r+1's, then (+) r+2's, ... one pull step each, in one stage, so that
 * each slice of `out` stays in cache while every contribution is added to it.
 */
static braid_status_t twoshot_reduce(const braid_coll_t *c, braid_sched_t *s, size_t off,
                                     size_t bytes, braid_ref_t out)
{
    int n = c->nranks, r = c->rank;
    braid_sched_stage(s);
    for (int k = 1; k < n; k++) {
        uint32_t flags = BRAID_STEP_REDUCE | BRAID_STEP_PULL_PRE;
        if (k > 1)
            flags |= BRAID_STEP_ACC;                  /* src is the partial in `out` */
        if (k == n - 1)
            flags |= BRAID_STEP_FINAL;
        BRAID_CHECK(braid_sched_pull(s, braid_mod(r + k, n), braid_ref(BRAID_BUF_SEND, off),
                                     k > 1 ? out : braid_ref(BRAID_BUF_SEND, off), out, bytes,
                                     flags));
    }
    return BRAID_OK;
}

static size_t twoshot_chunk(const braid_coll_t *c, int chunk, size_t *bytes_p)
{
    size_t es = braid_dtype_size(c->dtype), first, len;
    braid_chunk(c->count, c->nranks, chunk, &first, &len);
    *bytes_p = len * es;
    return first * es;
}

static braid_status_t twoshot_allreduce_build(const braid_coll_t *c, braid_sched_t *s)
{
    int n = c->nranks, r = c->rank;
    size_t bytes, off = twoshot_chunk(c, r, &bytes);

    BRAID_CHECK(twoshot_hello(c, s));
    BRAID_CHECK(twoshot_reduce(c, s, off, bytes, braid_ref(BRAID_BUF_RECV, off)));
    braid_sched_stage(s);
    BRAID_CHECK(twoshot_exchange(c, s, BRAID_TOKEN_BYTES, 0));
    braid_sched_stage(s);
    for (int k = 1; k < n; k++) {
        int p = braid_mod(r + k, n);
        off = twoshot_chunk(c, p, &bytes);
        BRAID_CHECK(braid_sched_add(s, p, -1, braid_ref_none(), braid_ref_none(),
                                    BRAID_TOKEN_BYTES, 0));
        BRAID_CHECK(braid_sched_pull(s, p, braid_ref(BRAID_BUF_RECV, off), braid_ref_none(),
                                     braid_ref(BRAID_BUF_RECV, off), bytes, 0));
    }
    return twoshot_bye(c, s);
}

/* Block b of the input is the `count` elements that end on rank b. In place (recvbuff ==
 * sendbuff + r * count) the first step reads and writes block r at the same offsets. */
static braid_status_t twoshot_reducescatter_build(const braid_coll_t *c, braid_sched_t *s)
{
    size_t bytes = c->count * braid_dtype_size(c->dtype);
    BRAID_CHECK(twoshot_hello(c, s));
    BRAID_CHECK(twoshot_reduce(c, s, (size_t)c->rank * bytes, bytes,
                               braid_ref(BRAID_BUF_RECV, 0)));
    return twoshot_bye(c, s);
}

/* Block p of the output is rank p's send buffer, pulled from there (in place it is block p
 * of p's receive buffer, which p never writes). */
static braid_status_t twoshot_allgather_build(const braid_coll_t *c, braid_sched_t *s)
{
    int n = c->nranks, r = c->rank;
    size_t bytes = c->count * braid_dtype_size(c->dtype);

    BRAID_CHECK(twoshot_hello(c, s));
    braid_sched_stage(s);
    if (!c->in_place)
        BRAID_CHECK(braid_sched_add(s, -1, -1, braid_ref(BRAID_BUF_SEND, 0),
                                    braid_ref(BRAID_BUF_RECV, (size_t)r * bytes), bytes, 0));
    for (int k = 1; k < n; k++) {
        int p = braid_mod(r + k, n);
        BRAID_CHECK(braid_sched_pull(s, p, braid_ref(BRAID_BUF_SEND, 0), braid_ref_none(),
                                     braid_ref(BRAID_BUF_RECV, (size_t)p * bytes), bytes, 0));
    }
    return twoshot_bye(c, s);
}

/* The largest buffer of the call, in bytes: what the threshold compares. */
static size_t twoshot_bytes(const braid_coll_t *c)
{
    size_t bytes = c->count * braid_dtype_size(c->dtype);
    return c->kind == BRAID_COLL_ALLREDUCE ? bytes : bytes * (size_t)c->nranks;
}

static int twoshot_takes(const braid_coll_t *c)
{
    return c->pull != BRAID_PULL_NONE && c->nranks >= 2 && c->count > 0 &&
           twoshot_bytes(c) >= c->pull_min;
}

static braid_status_t twoshot_build(const braid_coll_t *c, braid_sched_t *s)
{
    if (!twoshot_takes(c))
        return BRAID_ERR_UNSUPPORTED;
    switch (c->kind) {
    case BRAID_COLL_ALLREDUCE:
        return twoshot_allreduce_build(c, s);
    case BRAID_COLL_ALLGATHER:
        return twoshot_allgather_build(c, s);
    case BRAID_COLL_REDUCESCATTER:
        return twoshot_reducescatter_build(c, s);
    default:
        return BRAID_ERR_UNSUPPORTED;
    }
}

/*
 * Three or four stages of messages (hello, final, bye) and single copies: a pull is one
 * copy where a FIFO message is two (into the slot and out), so half a message's beta. The
 * all-reduce reads n chunks of b/n and combines them, then pulls n-1 chunks; the halves
 * do one of the two.
 */
static double twoshot_cost(const braid_coll_t *c, const braid_model_t *m)
{
    int n = c->nranks;
    double b = (double)braid_coll_bytes(c);
    braid_link_t l = braid_coll_worst(c);
    double lat = 3 * (m->alpha[l] + n * m->step), pull = m->beta[l] / 2;
    if (!twoshot_takes(c))
        return BRAID_COST_NONE;
    switch (c->kind) {
    case BRAID_COLL_ALLREDUCE:
        return lat + m->alpha[l] + (2 * b - b / n) * pull + b * m->gamma;
    case BRAID_COLL_REDUCESCATTER:
        return lat + b * pull + b * m->gamma;
    default:
        return lat + b * (n - 1) / n * pull;
    }
}

const braid_algo_t braid_algo_twoshot = {
    .name = "twoshot",
    .colls = (1u << BRAID_COLL_ALLREDUCE) | (1u << BRAID_COLL_ALLGATHER) |
             (1u << BRAID_COLL_REDUCESCATTER),
    .build = twoshot_build,
    .cost = twoshot_cost,
};
