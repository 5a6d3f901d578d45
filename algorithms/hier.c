/*
 * Hierarchical algorithms: the work inside each host first, then one exchange between
 * hosts per local index, then inside each host again. For hosts with the same number L of
 * ranks (H hosts; a rank's "local index" is its place on its host, src/topo/topo.h):
 *
 *   all-reduce                          host 0: a0 a1         host 1: b0 b1      (L = 2)
 *     1. reduce-scatter inside hosts    a0 gets chunk 0 of a, a1 chunk 1 of a, ...
 *     2. all-reduce of chunk i across   a0 <-> b0 on chunk 0, a1 <-> b1 on chunk 1
 *        hosts, among local index i     (a ring of H ranks, or recursive doubling)
 *     3. all-gather inside hosts        every rank gets every chunk
 *
 *   all-gather:      1. across hosts among local index i: rank gets the H blocks of its
 *                       index;  2. inside hosts: each local rank passes its H blocks on
 *   reduce-scatter:  1. inside hosts: local rank i gets the host's sum of the H blocks of
 *                       index i (scratch);  2. across hosts among index i: each rank ends
 *                       with the sum of its own block
 *
 * Every phase is a ring over a group (the L ranks of a host or the H ranks of one local
 * index), run by the same two loops as algorithms/ring.c. A ring "chunk" may be several
 * separate blocks (all-gather and reduce-scatter inside a host: one per host): each block
 * is then a whole ring of its own, one after the other, so that a rank never has more
 * than one message of a ring waiting in a FIFO (two would fill a 2-slot FIFO, and every
 * rank would wait for room to pass a block on while its successor waits the same).
 * Phases read whole regions the previous phase wrote at other offsets, so each starts a
 * stage.
 *
 * The all-reduce across hosts may instead be recursive doubling where H is a power of two
 * (as algorithms/rd.c, on the chunk): log2(H) steps of the whole chunk against the ring's
 * 2(H-1) of an H-th of it. At H = 2 both move the chunk once each way and the doubling
 * saves a latency between hosts; for larger H it moves more. The model decides
 * (hier_across_rd), the same for the cost and the schedule.
 *
 * Each byte crosses between hosts 2(H-1)/H times per local rank carrying 1/L of the
 * buffer: a host sends 2(H-1)/H of the buffer in all, where the flat ring sends that much
 * through each of its links that leave the host, 2(n-1)/n of the buffer (2 x 2: 1 against
 * 1.5 buffers, a third less). Results are bit-identical on every rank: each element is
 * reduced by one rank of one group, then only copied, or, by doubling, the two sides of
 * each step combine the same two partials. Hosts of unequal rank counts, and one host,
 * are declined.
 */
#include <stdlib.h>

#include "algorithms/model.h"
#include "exec/sched.h"
#include "topo/topo.h"

/* A ring over a group: its ranks in ring order and this rank's place. */
typedef struct hier_group {
    int n, me;
    int first, stride;          /* member k is topo->host_ranks[first + k * stride] */
    const braid_topo_t *topo;
} hier_group_t;

static int group_rank(const hier_group_t *g, int k)
{
    return g->topo->host_ranks[g->first + braid_mod(k, g->n) * g->stride];
}

/* The ranks of this rank's host (stride 1) or of its local index on every host (stride L). */
static hier_group_t group_local(const braid_coll_t *c, int L)
{
    const braid_topo_t *t = c->topo;
    hier_group_t g = { L, t->local_rank[c->rank], t->host_first[t->host_of[c->rank]], 1, t };
    return g;
}

static hier_group_t group_across(const braid_coll_t *c, int L)
{
    const braid_topo_t *t = c->topo;
    hier_group_t g = { t->nhosts, t->host_of[c->rank], t->local_rank[c->rank], L, t };
    return g;
}

/*
 * Where the blocks of ring chunk k lie: `nseg` segments of `seg` (offset, bytes) pairs.
 * The callbacks are tiny, and every phase differs only in them.
 */
typedef struct hier_map {
    const braid_coll_t *c;
    int L;
    size_t base, len;           /* all-reduce: the region the ring splits (elements) */
    int nseg;                   /* segments per chunk */
    /* segment j of chunk k: byte offset, and its bytes */
    size_t (*seg)(const struct hier_map *m, int k, int j, size_t *bytes);
} hier_map_t;

/* All-reduce: chunk k of the elements [base, base + len), one segment. */
static size_t seg_split(const hier_map_t *m, int k, int j, size_t *bytes, int parts)
{
    size_t es = braid_dtype_size(m->c->dtype), first, len;
    (void)j;
    braid_chunk(m->len, parts, k, &first, &len);
    *bytes = len * es;
    return (m->base + first) * es;
}

static size_t seg_local_split(const hier_map_t *m, int k, int j, size_t *bytes)
{
    return seg_split(m, k, j, bytes, m->L);
}

static size_t seg_across_split(const hier_map_t *m, int k, int j, size_t *bytes)
{
    return seg_split(m, k, j, bytes, m->c->topo->nhosts);
}

/* All-gather / reduce-scatter blocks: chunk k of the local ring is the H blocks of local
 * index k (segment j: host j's); chunk k of the across ring is the block of host k's rank
 * of this rank's local index. */
static size_t block_of(const hier_map_t *m, int host, int local, size_t *bytes)
{
    const braid_topo_t *t = m->c->topo;
    *bytes = m->c->count * braid_dtype_size(m->c->dtype);
    return (size_t)t->host_ranks[t->host_first[host] + local] * *bytes;
}

static size_t seg_local_blocks(const hier_map_t *m, int k, int j, size_t *bytes)
{
    return block_of(m, j, k, bytes);
}

static size_t seg_across_blocks(const hier_map_t *m, int k, int j, size_t *bytes)
{
    (void)j;
    return block_of(m, k, m->c->topo->local_rank[m->c->rank], bytes);
}

/* Reduce-scatter's scratch: the H blocks of this rank's local index, host by host. */
static size_t seg_scratch(const hier_map_t *m, int k, int j, size_t *bytes)
{
    *bytes = m->c->count * braid_dtype_size(m->c->dtype);
    return (size_t)(m->nseg > 1 ? j : k) * *bytes;
}

/* Reduce-scatter's result: the whole receive buffer. */
static size_t seg_recv(const hier_map_t *m, int k, int j, size_t *bytes)
{
    (void)k;
    (void)j;
    *bytes = m->c->count * braid_dtype_size(m->c->dtype);
    return 0;
}

/* A reference into `buf` at the map's segment, or none. */
static braid_ref_t seg_ref(braid_buf_t buf, const hier_map_t *m, int k, int j, size_t *bytes)
{
    size_t off = m->seg(m, k, j, bytes);
    return buf == BRAID_BUF_NONE ? braid_ref_none() : braid_ref(buf, off);
}

/*
 * Ring reduce-scatter over group g: chunk k's partial starts at the rank after its owner
 * and ends, complete, on member k, which writes it to `dst` at `dmap`'s offsets. Sources
 * are `src` at `smap`'s offsets, with `sflags` (REDUCE, plus ACC when src is a partial).
 * One member: the copy into dst (with the pre-multiply unless ACC).
 */
static braid_status_t ring_rs(braid_sched_t *s, const hier_group_t *g, braid_buf_t src,
                              const hier_map_t *smap, uint32_t sflags, braid_buf_t dst,
                              const hier_map_t *dmap, uint32_t last_flags)
{
    int n = g->n;
    for (int j = 0; j < smap->nseg; j++)
        for (int t = 0; t < n; t++) {
            int k = braid_mod(g->me - t - 1, n), last = t == n - 1;
            size_t bytes, dbytes;
            braid_ref_t from = seg_ref(src, smap, k, j, &bytes);
            braid_ref_t to = last ? seg_ref(dst, dmap, k, j, &dbytes) : braid_ref_none();
            BRAID_CHECK(braid_sched_add(s, t > 0 ? group_rank(g, g->me - 1) : -1,
                                        last ? -1 : group_rank(g, g->me + 1), from, to, bytes,
                                        sflags | (last ? last_flags : 0)));
        }
    return BRAID_OK;
}

/*
 * Ring all-gather over group g: member k's chunk (in `buf` at map's offsets, already
 * there on member k) ends on every member, at the same offsets.
 */
static braid_status_t ring_ag(braid_sched_t *s, const hier_group_t *g, braid_buf_t buf,
                              const hier_map_t *map)
{
    int n = g->n;
    for (int j = 0; j < map->nseg; j++)
        for (int t = 0; t < n && n > 1; t++) {
            int k = braid_mod(g->me - t, n);
            size_t bytes;
            braid_ref_t at = seg_ref(buf, map, k, j, &bytes);
            BRAID_CHECK(braid_sched_add(s, t > 0 ? group_rank(g, g->me - 1) : -1,
                                        t < n - 1 ? group_rank(g, g->me + 1) : -1,
                                        t == 0 ? at : braid_ref_none(),
                                        t > 0 ? at : braid_ref_none(), bytes, 0));
        }
    return BRAID_OK;
}

/* The all-reduce across hosts of a chunk of b bytes per rank (L ranks of a host sending at
 * once): a ring, or recursive doubling (rd, H a power of two), every rank combining the
 * partner's partial into its own at each step. */
static double across_cost(const braid_model_t *m, int H, int L, double b, int rd)
{
    int k = braid_log2_ceil(H);
    if (rd)
        return braid_model_steps(m, BRAID_LINK_NET, k, b, L, k * b);
    return braid_model_steps(m, BRAID_LINK_NET, 2 * (H - 1), b / H, L, b * (H - 1) / H);
}

/* Whether the all-reduce's phase 2 is recursive doubling: by the communicator's model (not
 * the tuner's trial slices), so the cost function and the builder decide alike. */
static int hier_across_rd(const braid_coll_t *c, int L)
{
    const braid_model_t *m = braid_coll_model(c);
    int H = c->topo->nhosts;
    double b = (double)braid_coll_bytes(c) / L;
    return (H & (H - 1)) == 0 && across_cost(m, H, L, b, 1) <= across_cost(m, H, L, b, 0);
}

/*
 * Recursive doubling of the region `map` splits, over group g (a power of two): send this
 * rank's partial to the partner at distance 1; then at each distance d receive the partner's,
 * combine it into recvbuff and send the sum on to the partner at 2d. One stage, pipelined
 * slice by slice as algorithms/rd.c's.
 */
static braid_status_t rd_across(braid_sched_t *s, const hier_group_t *g, const hier_map_t *map)
{
    size_t es = braid_dtype_size(map->c->dtype), off = map->base * es, bytes = map->len * es;
    BRAID_CHECK(braid_sched_add(s, -1, group_rank(g, g->me ^ 1), braid_ref(BRAID_BUF_RECV, off),
                                braid_ref_none(), bytes, 0));
    for (int d = 1; d < g->n; d *= 2) {
        int last = 2 * d >= g->n;
        BRAID_CHECK(braid_sched_add(s, group_rank(g, g->me ^ d),
                                    last ? -1 : group_rank(g, g->me ^ (2 * d)),
                                    braid_ref(BRAID_BUF_RECV, off), braid_ref(BRAID_BUF_RECV, off),
                                    bytes, BRAID_STEP_REDUCE | BRAID_STEP_ACC |
                                               (last ? BRAID_STEP_FINAL : 0)));
    }
    return BRAID_OK;
}

static braid_status_t hier_allreduce(const braid_coll_t *c, braid_sched_t *s, int L)
{
    hier_group_t local = group_local(c, L), across = group_across(c, L);
    size_t first, len;
    braid_chunk(c->count, L, local.me, &first, &len);
    hier_map_t lmap = { c, L, 0, c->count, 1, seg_local_split };
    hier_map_t amap = { c, L, first, len, 1, seg_across_split };
    /* 1: this host's sum of chunk me, into recvbuff */
    BRAID_CHECK(ring_rs(s, &local, BRAID_BUF_SEND, &lmap, BRAID_STEP_REDUCE, BRAID_BUF_RECV,
                        &lmap, 0));
    /* 2: the all-reduce of chunk me across hosts, on recvbuff (partials: ACC) */
    braid_sched_stage(s);
    if (hier_across_rd(c, L)) {
        BRAID_CHECK(rd_across(s, &across, &amap));
    } else {
        BRAID_CHECK(ring_rs(s, &across, BRAID_BUF_RECV, &amap,
                            BRAID_STEP_REDUCE | BRAID_STEP_ACC, BRAID_BUF_RECV, &amap,
                            BRAID_STEP_FINAL));
        BRAID_CHECK(ring_ag(s, &across, BRAID_BUF_RECV, &amap));
    }
    /* 3: every chunk to every rank of the host */
    braid_sched_stage(s);
    return ring_ag(s, &local, BRAID_BUF_RECV, &lmap);
}

static braid_status_t hier_allgather(const braid_coll_t *c, braid_sched_t *s, int L)
{
    hier_group_t local = group_local(c, L), across = group_across(c, L);
    hier_map_t amap = { c, L, 0, 0, 1, seg_across_blocks };
    hier_map_t lmap = { c, L, 0, 0, c->topo->nhosts, seg_local_blocks };
    size_t bytes = c->count * braid_dtype_size(c->dtype);
    if (!c->in_place)
        BRAID_CHECK(braid_sched_add(s, -1, -1, braid_ref(BRAID_BUF_SEND, 0),
                                    braid_ref(BRAID_BUF_RECV, (size_t)c->rank * bytes), bytes, 0));
    BRAID_CHECK(ring_ag(s, &across, BRAID_BUF_RECV, &amap));
    braid_sched_stage(s);
    return ring_ag(s, &local, BRAID_BUF_RECV, &lmap);
}

static braid_status_t hier_reducescatter(const braid_coll_t *c, braid_sched_t *s, int L)
{
    int H = c->topo->nhosts;
    hier_group_t local = group_local(c, L), across = group_across(c, L);
    hier_map_t lmap = { c, L, 0, 0, H, seg_local_blocks };
    hier_map_t lscr = { c, L, 0, 0, H, seg_scratch };
    hier_map_t ascr = { c, L, 0, 0, 1, seg_scratch };
    hier_map_t out = { c, L, 0, 0, 1, seg_recv };
    s->scratch_bytes = (size_t)H * c->count * braid_dtype_size(c->dtype);
    /* 1: the host's sums of the H blocks of local index me, into scratch (host order) */
    BRAID_CHECK(ring_rs(s, &local, BRAID_BUF_SEND, &lmap, BRAID_STEP_REDUCE, BRAID_BUF_SCRATCH,
                        &lscr, 0));
    /* 2: across hosts, host k's partial of this index ends on host k's rank: this rank's
     * own block, in recvbuff */
    braid_sched_stage(s);
    return ring_rs(s, &across, BRAID_BUF_SCRATCH, &ascr, BRAID_STEP_REDUCE | BRAID_STEP_ACC,
                   BRAID_BUF_RECV, &out, BRAID_STEP_FINAL);
}

/* Ranks per host when the call has several hosts of equal size, else 0 (declined). */
static int hier_L(const braid_coll_t *c)
{
    if (c->topo == NULL || c->topo->nhosts < 2 || c->count == 0)
        return 0;
    return braid_topo_uniform(c->topo);
}

static braid_status_t hier_build(const braid_coll_t *c, braid_sched_t *s)
{
    int L = hier_L(c);
    if (L == 0)
        return BRAID_ERR_UNSUPPORTED;
    switch (c->kind) {
    case BRAID_COLL_ALLREDUCE:
        return hier_allreduce(c, s, L);
    case BRAID_COLL_ALLGATHER:
        return hier_allgather(c, s, L);
    case BRAID_COLL_REDUCESCATTER:
        return hier_reducescatter(c, s, L);
    default:
        return BRAID_ERR_UNSUPPORTED;
    }
}

/*
 * Rings of L inside hosts and of H across them. All-reduce: (L-1) + 2(H-1) + (L-1) steps;
 * inside a host 2(L-1)/L of the buffer; across, 2(H-1)/H of a 1/L share per rank with the
 * host's L ranks on one NIC (or log2(H) steps of the share: across_cost). All-gather and
 * reduce-scatter: the same halves, one way each.
 */
static double hier_cost(const braid_coll_t *c, const braid_model_t *m)
{
    int L = hier_L(c), H = braid_coll_nhosts(c);
    if (L == 0 || !(c->kind == BRAID_COLL_ALLREDUCE || c->kind == BRAID_COLL_ALLGATHER ||
                    c->kind == BRAID_COLL_REDUCESCATTER))
        return BRAID_COST_NONE;
    double b = (double)braid_coll_bytes(c), red = c->kind != BRAID_COLL_ALLGATHER;
    braid_link_t in = BRAID_LINK_NUMA;
    double ag = L > 1 ? braid_model_steps(m, in, L - 1, b / L, 1, 0) : 0;
    double rs = L > 1 ? braid_model_steps(m, in, L - 1, b / L, 1, b * (L - 1) / L) : 0;
    if (c->kind == BRAID_COLL_ALLREDUCE)
        return rs + ag + braid_model_passes(m, c, 2 * b) +
               across_cost(m, H, L, b / L, hier_across_rd(c, L));
    return (red ? rs : ag) + braid_model_passes(m, c, b) +
           braid_model_steps(m, BRAID_LINK_NET, H - 1, b / L / H, L, red * b / L * (H - 1) / H);
}

const braid_algo_t braid_algo_hier = {
    .name = "hier",
    .colls = (1u << BRAID_COLL_ALLREDUCE) | (1u << BRAID_COLL_ALLGATHER) |
             (1u << BRAID_COLL_REDUCESCATTER),
    .build = hier_build,
    .cost = hier_cost,
};
