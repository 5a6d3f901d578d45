/*
 * The algorithm table, and the build of a call's schedule: the algorithm that the call
 * names (mscclRunAlgo), or the tuner's plan (algorithms/tuner.c) tried in order until one
 * builds it.
 *
 * User arguments were checked by src/api/; what arrives here and makes no sense (an unknown
 * collective or datatype, a rank or root outside the communicator) is a braid bug.
 */
#include <stdatomic.h>
#include <stdint.h>

#include "algorithms/model.h"
#include "exec/sched.h"
#include "algorithms/tune.h"
#include "algorithms/usched.h"
#include "base/log.h"
#include "base/param.h"

extern const braid_algo_t braid_algo_oneshot;
extern const braid_algo_t braid_algo_twoshot;
extern const braid_algo_t braid_algo_ring;
extern const braid_algo_t braid_algo_chain;
extern const braid_algo_t braid_algo_direct;
extern const braid_algo_t braid_algo_tree;
extern const braid_algo_t braid_algo_rd;
extern const braid_algo_t braid_algo_rabenseifner;
extern const braid_algo_t braid_algo_bruck;
extern const braid_algo_t braid_algo_binomial;
extern const braid_algo_t braid_algo_hier;

const braid_algo_t *braid_algos[BRAID_ALGOS_MAX] = {
    &braid_algo_ring,
    &braid_algo_oneshot,
    &braid_algo_twoshot,
    &braid_algo_tree,
    &braid_algo_rd,
    &braid_algo_rabenseifner,
    &braid_algo_hier,
    &braid_algo_bruck,
    &braid_algo_chain,
    &braid_algo_binomial,
    &braid_algo_direct,
};

_Atomic int braid_nalgos = 11;     /* the entries above */

braid_coll_kind_t braid_algo_kind(const braid_algo_t *a)
{
    int k = 0;
    while (k < BRAID_COLL_NUM - 1 && !(a->colls & (1u << k)))
        k++;
    return (braid_coll_kind_t)k;
}

void braid_algo_register(const braid_algo_t *a)
{
    int n = atomic_load(&braid_nalgos);
    braid_algos[n] = a;
    atomic_store(&braid_nalgos, n + 1);     /* after the entry: readers see it whole */
}

size_t braid_coll_bytes(const braid_coll_t *c)
{
    size_t b = c->count * braid_dtype_size(c->dtype);
    if (c->vcounts != NULL)
        return b;                       /* count is the total of every rank's block */
    switch (c->kind) {
    case BRAID_COLL_ALLGATHER:
    case BRAID_COLL_REDUCESCATTER:
    case BRAID_COLL_ALLTOALL:
    case BRAID_COLL_GATHER:
    case BRAID_COLL_SCATTER:
        return b * (size_t)c->nranks;
    default:
        return b;
    }
}

static int algo_rooted(braid_coll_kind_t kind)
{
    return kind == BRAID_COLL_BROADCAST || kind == BRAID_COLL_REDUCE ||
           kind == BRAID_COLL_GATHER || kind == BRAID_COLL_SCATTER ||
           kind == BRAID_COLL_SEND || kind == BRAID_COLL_RECV;
}

/* AllGatherV and ReduceScatterV: only the ring knows their blocks, and it is forced (the
 * tuner and the other builders never see them). */
static braid_status_t algo_v_check(const braid_coll_t *c)
{
    if (c->vcounts == NULL && c->vdispls == NULL)
        return BRAID_OK;
    if (c->vcounts == NULL || c->vdispls == NULL ||
        (c->kind != BRAID_COLL_ALLGATHER && c->kind != BRAID_COLL_REDUCESCATTER) ||
        c->force != &braid_algo_ring)
        return braid_err(BRAID_ERR_INTERNAL, "cannot build %s with per-rank counts (%s, %s, "
                         "algorithm %s): only AllGatherV and ReduceScatterV have them, with "
                         "both arrays, on the ring (a braid bug, please report it)",
                         braid_coll_name(c->kind), c->vcounts ? "counts" : "no counts",
                         c->vdispls ? "displacements" : "no displacements",
                         c->force ? c->force->name : "the tuner's");
    return BRAID_OK;
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
    return algo_v_check(c);
}

int braid_algo_index(const braid_algo_t *a)
{
    int n = braid_nalgos;
    for (int i = 0; i < n; i++)
        if (braid_algos[i] == a)
            return i;
    return -1;
}

/* The algorithm the call names, alone, at its best slice for braid's own algorithms (a
 * forced ring for plans and V calls pipelines as the tuner's would); where it declines, why
 * (a user schedule's reason). */
static braid_status_t algo_force_build(const braid_coll_t *coll, braid_sched_t *s,
                                       const braid_algo_t **algo_p)
{
    braid_status_t st = coll->force->build(coll, s);
    if (st == BRAID_OK && coll->force->user == NULL)
        braid_algo_cost(coll, coll->force, &s->slice);
    if (st == BRAID_OK && algo_p != NULL)
        *algo_p = coll->force;
    if (st == BRAID_ERR_UNSUPPORTED)
        st = braid_usched_fits(coll->force, coll);
    if (st != BRAID_OK)
        braid_sched_free(s);
    return st;
}

/* No algorithm of the plan built the call: NCCL_ALGO's doing, or a braid bug. */
static braid_status_t algo_none_err(const braid_coll_t *coll, size_t bytes)
{
    if (coll->tune != NULL && coll->tune->algo_spec[0] != '\0')
        return braid_err(BRAID_ERR_USAGE, "NCCL_ALGO=\"%s\" allows no algorithm that "
                         "can run %s of %zu bytes on this communicator (%d ranks, %d host%s)",
                         coll->tune->algo_spec, braid_coll_name(coll->kind), bytes,
                         coll->nranks, braid_coll_nhosts(coll),
                         braid_coll_nhosts(coll) > 1 ? "s" : "");
    return braid_err(BRAID_ERR_INTERNAL, "no algorithm builds %s on %d ranks (count %zu, %s)",
                     braid_coll_name(coll->kind), coll->nranks, coll->count,
                     braid_dtype_name(coll->dtype));
}

/*
 * `s` need not be initialised: it is (re)initialised for each algorithm tried. On error it
 * is left empty (freed), so the caller has nothing to release.
 */
/* A device call's schedule that needs more scratch than the communicator made at init:
 * the tuner takes the next algorithm if one fits. */
static int algo_scratch_over(const braid_coll_t *coll, const braid_sched_t *s)
{
    return coll->device && s->scratch_bytes > (size_t)braid_param_int(BRAID_P_DEVICE_SCRATCH);
}

braid_status_t braid_algo_build(const braid_coll_t *coll, braid_sched_t *s,
                                const braid_algo_t **algo_p)
{
    braid_tune_plan_t plan;
    size_t es = braid_dtype_size(coll->dtype);
    int over = -1;                  /* the first choice whose scratch is over the bound */
    braid_sched_init(s, es);
    BRAID_CHECK(algo_coll_check(coll));
    if (coll->force != NULL)
        return algo_force_build(coll, s, algo_p);
    braid_tune_plan_make(coll, &plan);
    for (int i = 0; i <= plan.n; i++) {
        int k = i < plan.n ? i : over;
        if (k < 0)
            break;
        braid_sched_init(s, es);
        braid_status_t st = plan.order[k]->build(coll, s);
        if (st == BRAID_OK && k == i && algo_scratch_over(coll, s)) {
            over = over < 0 ? i : over;
            st = BRAID_ERR_UNSUPPORTED;
        }
        if (st == BRAID_OK) {
            if (algo_p != NULL)
                *algo_p = plan.order[k];
            s->slice = braid_tune_plan_commit(coll, &plan, k);
            return BRAID_OK;
        }
        braid_sched_free(s);
        if (st != BRAID_ERR_UNSUPPORTED)
            return st;
    }
    return algo_none_err(coll, plan.key.bytes);
}
