/*
 * The algorithm table and the selector.
 *
 * The choice is a pure function of the call, so that every rank of a communicator picks the
 * same algorithm and their schedules match message for message: one-shot for small
 * all-reduces, two-shot (single copy) for large all-reduces, all-gathers and reduce-scatters
 * where the communicator agreed at init that ranks can read each other's memory, ring for
 * the others, chain for broadcast and reduce, direct for the rest. The
 * table is in preference order; an algorithm may decline a call (BRAID_ERR_UNSUPPORTED) and
 * the next one that offers the collective is tried.
 *
 * User arguments were checked by src/api/; what arrives here and makes no sense (an unknown
 * collective or datatype, a rank or root outside the communicator) is a braid bug.
 */
#include "algorithms/sched.h"

extern const braid_algo_t braid_algo_oneshot;
extern const braid_algo_t braid_algo_twoshot;
extern const braid_algo_t braid_algo_ring;
extern const braid_algo_t braid_algo_chain;
extern const braid_algo_t braid_algo_direct;

static const braid_algo_t *const algo_table[] = {
    &braid_algo_oneshot,
    &braid_algo_twoshot,
    &braid_algo_ring,
    &braid_algo_chain,
    &braid_algo_direct,
};

#define ALGO_NUM ((int)(sizeof(algo_table) / sizeof(algo_table[0])))

static int algo_rooted(braid_coll_kind_t kind)
{
    return kind == BRAID_COLL_BROADCAST || kind == BRAID_COLL_REDUCE ||
           kind == BRAID_COLL_GATHER || kind == BRAID_COLL_SCATTER ||
           kind == BRAID_COLL_SEND || kind == BRAID_COLL_RECV;
}

static braid_status_t algo_coll_check(const braid_coll_t *c)
{
    if ((unsigned)c->kind >= BRAID_COLL_NUM || braid_dtype_size(c->dtype) == 0)
        return braid_err(BRAID_ERR_INTERNAL, "cannot build a schedule for collective %d on "
                         "datatype %d: unknown to the algorithms (a braid bug, please report "
                         "it)", (int)c->kind, (int)c->dtype);
    if (c->nranks < 1 || c->rank < 0 || c->rank >= c->nranks)
        return braid_err(BRAID_ERR_INTERNAL, "cannot build %s for rank %d of %d ranks",
                         braid_coll_name(c->kind), c->rank, c->nranks);
    if (algo_rooted(c->kind) && (c->root < 0 || c->root >= c->nranks))
        return braid_err(BRAID_ERR_INTERNAL, "cannot build %s with root/peer %d on %d ranks",
                         braid_coll_name(c->kind), c->root, c->nranks);
    if (c->kind == BRAID_COLL_ALLTOALLV &&
        (!c->sendcounts || !c->sdispls || !c->recvcounts || !c->rdispls))
        return braid_err(BRAID_ERR_INTERNAL, "cannot build AllToAllv without its counts and "
                         "displacements");
    return BRAID_OK;
}

/*
 * `s` need not be initialised: it is (re)initialised for each algorithm tried. On error it
 * is left empty (freed), so the caller has nothing to release.
 */
braid_status_t braid_algo_build(const braid_coll_t *coll, braid_sched_t *s,
                                const braid_algo_t **algo_p)
{
    size_t es = braid_dtype_size(coll->dtype);
    braid_sched_init(s, es);
    BRAID_CHECK(algo_coll_check(coll));
    for (int i = 0; i < ALGO_NUM; i++) {
        const braid_algo_t *a = algo_table[i];
        if (!(a->colls & (1u << coll->kind)))
            continue;
        braid_sched_init(s, es);
        braid_status_t st = a->build(coll, s);
        if (st == BRAID_OK) {
            if (algo_p != NULL)
                *algo_p = a;
            return BRAID_OK;
        }
        braid_sched_free(s);
        if (st != BRAID_ERR_UNSUPPORTED)
            return st;
    }
    return braid_err(BRAID_ERR_INTERNAL, "no algorithm builds %s on %d ranks (count %zu, %s)",
                     braid_coll_name(coll->kind), coll->nranks, coll->count,
                     braid_dtype_name(coll->dtype));
}
