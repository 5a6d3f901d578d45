/*
 * The algorithm table and the tuner's choice.
 *
 * The choice is a pure function of the call and of what every rank agreed at init (the
 * layout, the cost model, NCCL_ALGO), so that every rank of a communicator picks the same
 * algorithm and slice size and their schedules match message for message: among the
 * algorithms that NCCL_ALGO allows for the collective, the one whose cost function predicts
 * the shortest time at its best slice size; ties go to the earlier in the table, and to
 * the larger slice. An algorithm may decline a call (its cost function says
 * BRAID_COST_NONE, its builder BRAID_ERR_UNSUPPORTED) and the next is tried.
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

int braid_algo_index(const braid_algo_t *a)
{
    int n = braid_nalgos;
    for (int i = 0; i < n; i++)
        if (braid_algos[i] == a)
            return i;
    return -1;
}

static int algo_slice_fixed(const braid_coll_t *coll)
{
    return coll->tune != NULL && coll->tune->slice != 0;
}

/* The slice of `cuts` halvings of the model's (the slot), or BRAID_SLICE_SIZE's. */
static size_t algo_slice(const braid_coll_t *coll, int cuts)
{
    return algo_slice_fixed(coll) ? coll->tune->slice
                                  : (size_t)braid_coll_model(coll)->slice >> cuts;
}

/* An algorithm's cost at its best slice (*cuts_p: its halvings; a pipeline's fill shrinks
 * with the slice and its hand-overs grow); at BRAID_SLICE_SIZE's alone where it is set. */
static double algo_cost(const braid_coll_t *coll, const braid_algo_t *a, int *cuts_p)
{
    braid_model_t m = *braid_coll_model(coll);
    double best = BRAID_COST_NONE;
    *cuts_p = 0;
    for (int k = 0; k <= (algo_slice_fixed(coll) ? 0 : BRAID_SLICE_CUTS); k++) {
        size_t slice = algo_slice(coll, k);
        if (k > 0 && slice < BRAID_SLICE_MIN)
            break;
        m.slice = (double)slice;
        double c = a->cost(coll, &m);
        if (c < 0)
            return c;           /* it declines the call, whatever the slice */
        if (k == 0 || c < best) {
            best = c;
            *cuts_p = k;
        }
    }
    return best;
}

/* braid_algo_rank, with the slices as halvings of the model's (3 bits of tune->last). */
_Static_assert(BRAID_SLICE_CUTS < 8, "the halvings of a slice must fit 3 bits");
static int algo_rank_cuts(const braid_coll_t *coll, const braid_algo_t **algos, double *costs,
                          int *cuts, int max)
{
    uint32_t allow = coll->tune != NULL ? coll->tune->allow[coll->kind] : ~0u;
    int n = 0;
    for (int i = 0; i < braid_nalgos; i++) {
        const braid_algo_t *a = braid_algos[i];
        if (!(a->colls & (1u << coll->kind)) || !(allow & (1u << i)))
            continue;
        int k;
        double c = algo_cost(coll, a, &k);
        if (c < 0)
            continue;
        int j = n < max ? n++ : max;            /* insertion, stable for ties */
        while (j > 0 && costs[j - 1] > c) {
            if (j < max) {
                algos[j] = algos[j - 1];
                costs[j] = costs[j - 1];
                cuts[j] = cuts[j - 1];
            }
            j--;
        }
        if (j < max) {
            algos[j] = a;
            costs[j] = c;
            cuts[j] = k;
        }
    }
    return n;
}

int braid_algo_rank(const braid_coll_t *coll, const braid_algo_t **algos, double *costs,
                    size_t *slices, int max)
{
    int cuts[BRAID_ALGOS_MAX];
    int n = algo_rank_cuts(coll, algos, costs, cuts, max < BRAID_ALGOS_MAX ? max : BRAID_ALGOS_MAX);
    for (int i = 0; slices != NULL && i < n; i++)
        slices[i] = algo_slice(coll, cuts[i]);
    return n;
}

/* Whether choice `key` (as tune->last) is among the collective's last ones logged; if not,
 * it becomes one. */
static int algo_logged(braid_tune_t *t, braid_coll_kind_t kind, uint64_t key)
{
    for (int i = 0; i < BRAID_TUNE_LOGGED; i++)
        if (atomic_load_explicit(&t->logged[kind][i], memory_order_relaxed) == key)
            return 1;
    uint32_t i = atomic_fetch_add_explicit(&t->logged_next[kind], 1, memory_order_relaxed);
    atomic_store_explicit(&t->logged[kind][i % BRAID_TUNE_LOGGED], key, memory_order_relaxed);
    return 0;
}

/* A new choice for a collective (a new size, or another answer of the plugin), at TUNING,
 * unless logged lately (not for send and receive, which have one algorithm).
 * `own`: braid's own choice when the tuner plugin overrode it. */
static void algo_log_choice(const braid_coll_t *coll, uint64_t key, size_t bytes,
                            const braid_algo_t *a, size_t slice, const braid_algo_t *own)
{
    if (!BRAID_LOG_ENABLED(BRAID_LOG_INFO, BRAID_SUB_TUNING) || coll->kind == BRAID_COLL_SEND ||
        coll->kind == BRAID_COLL_RECV || algo_logged(coll->tune, coll->kind, key))
        return;
    if (own != NULL)
        BRAID_INFO(BRAID_SUB_TUNING, "tuner: %s of %zu bytes: %s, %zu-byte slices, chosen by "
                   "the tuner plugin %s (braid's model: %s)", braid_coll_name(coll->kind), bytes,
                   a->name, slice, braid_tune_plugin_name(), own->name);
    else
        BRAID_INFO(BRAID_SUB_TUNING, "tuner: %s of %zu bytes: %s, %zu-byte slices",
                   braid_coll_name(coll->kind), bytes, a->name, slice);
}

/*
 * `s` need not be initialised: it is (re)initialised for each algorithm tried. On error it
 * is left empty (freed), so the caller has nothing to release.
 */
braid_status_t braid_algo_build(const braid_coll_t *coll, braid_sched_t *s,
                                const braid_algo_t **algo_p)
{
    const braid_algo_t *order[BRAID_ALGOS_MAX];
    double costs[BRAID_ALGOS_MAX];
    int cuts[BRAID_ALGOS_MAX];
    size_t es = braid_dtype_size(coll->dtype), bytes = braid_coll_bytes(coll);
    braid_sched_init(s, es);
    BRAID_CHECK(algo_coll_check(coll));
    /* The last choice for this collective, when the size is the same: no cost functions
     * (a tuner plugin is asked every time, as NCCL does). */
    int tuned = coll->tune != NULL && bytes < (UINT64_C(1) << 53), n = 0, plugged = 0;
    int plugin = tuned && coll->tune->plugin_on;
    uint64_t last = tuned ? atomic_load_explicit(&coll->tune->last[coll->kind],
                                                 memory_order_relaxed) : 0;
    const braid_algo_t *own = NULL;     /* braid's choice, for the log */
    if (coll->force != NULL) {
        braid_status_t st = coll->force->build(coll, s);
        if (st == BRAID_OK && algo_p != NULL)
            *algo_p = coll->force;
        if (st == BRAID_ERR_UNSUPPORTED)
            st = braid_usched_fits(coll->force, coll);
        if (st != BRAID_OK)
            braid_sched_free(s);
        return st;
    }
    if (!plugin && last != 0 && last >> 11 == bytes) {
        cuts[n] = (int)(last >> 8 & 7);
        order[n++] = braid_algos[(last & 0xff) - 1];
    } else {
        n = algo_rank_cuts(coll, order, costs, cuts, BRAID_ALGOS_MAX);
        own = n > 0 ? order[0] : NULL;
        if (plugin)
            plugged = braid_tune_plugin_pick(coll, order, costs, cuts, n);
    }
    for (int i = 0; i < n; i++) {
        braid_sched_init(s, es);
        braid_status_t st = order[i]->build(coll, s);
        if (st == BRAID_OK) {
            if (algo_p != NULL)
                *algo_p = order[i];
            s->slice = algo_slice(coll, cuts[i]);
            uint64_t now = (uint64_t)bytes << 11 | (uint64_t)cuts[i] << 8 |
                           (uint64_t)(braid_algo_index(order[i]) + 1);
            if (tuned && now != last) {
                atomic_store_explicit(&coll->tune->last[coll->kind], now,
                                      memory_order_relaxed);
                algo_log_choice(coll, now, bytes, order[i], s->slice,
                                plugged && i == 0 ? own : NULL);
            }
            return BRAID_OK;
        }
        braid_sched_free(s);
        if (st != BRAID_ERR_UNSUPPORTED)
            return st;
    }
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
