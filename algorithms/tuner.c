/*
 * The tuner's choice: which algorithm runs a call, and at which slice size.
 *
 * The choice is a pure function of the call and of what every rank agreed at init (the
 * layout, the cost model, NCCL_ALGO), so that every rank of a communicator picks the same
 * algorithm and slice size and their schedules match message for message: among the
 * algorithms that NCCL_ALGO allows for the collective, the one whose cost function predicts
 * the shortest time at its best slice size; ties go to the earlier in the table, and to
 * the larger slice. An algorithm may decline a call (its cost function says
 * BRAID_COST_NONE, its builder BRAID_ERR_UNSUPPORTED) and the next is tried
 * (braid_algo_build, algorithms/algo.c).
 *
 * The choice depends on a call only through its key (braid_tune_key_t: the collective and
 * its bytes), so each collective caches its last one: a call with the last call's key
 * reuses it without asking the cost functions. A tuner plugin is asked every time, as NCCL
 * does.
 */
#include <stdatomic.h>
#include <stdint.h>

#include "algorithms/model.h"
#include "algorithms/tune.h"
#include "base/log.h"

/* What the cache holds for a key: an algorithm and its slice. */
typedef struct tuner_choice {
    int algo;                           /* index in braid_algos */
    int cuts;                           /* the slice: halvings of the model's */
} tuner_choice_t;

_Static_assert(BRAID_SLICE_CUTS < 8, "the halvings of a slice must fit 3 bits");
_Static_assert(BRAID_ALGOS_MAX < 256, "an algorithm's index + 1 must fit 8 bits");

/* A key and its choice as one word of the cache (tune.h): the key's collective is the
 * word's index in tune->last. */
static uint64_t tuner_cache_word(const braid_tune_key_t *key, tuner_choice_t ch)
{
    return (uint64_t)key->bytes << 11 | (uint64_t)ch.cuts << 8 | (uint64_t)(ch.algo + 1);
}

/* The choice cached in `word` for `key`: 1 and *choice_p where it is the key's. */
static int tuner_cache_match(uint64_t word, const braid_tune_key_t *key,
                             tuner_choice_t *choice_p)
{
    if (word == 0 || word >> 11 != key->bytes)
        return 0;
    choice_p->cuts = (int)(word >> 8 & 7);
    choice_p->algo = (int)(word & 0xff) - 1;
    return 1;
}

/* Whether the call may use the cache: a tuning to hold it, and bytes that fit its word. */
/* Device calls are ranked every time: their choice also depends on the scratch each
 * algorithm's build asks for (algo.c), which the cache does not know. */
static int tuner_cached(const braid_coll_t *coll, const braid_tune_key_t *key)
{
    return coll->tune != NULL && !coll->device && key->bytes < (UINT64_C(1) << 53);
}

static int tuner_slice_fixed(const braid_coll_t *coll)
{
    return coll->tune != NULL && coll->tune->slice != 0;
}

/* The slice of `cuts` halvings of the model's (the slot), or BRAID_SLICE_SIZE's. */
static size_t tuner_slice(const braid_coll_t *coll, int cuts)
{
    return tuner_slice_fixed(coll) ? coll->tune->slice
                                   : (size_t)braid_coll_model(coll)->slice >> cuts;
}

/* An algorithm's cost at its best slice (*cuts_p: its halvings; a pipeline's fill shrinks
 * with the slice and its hand-overs grow); at BRAID_SLICE_SIZE's alone where it is set. */
static double tuner_cost(const braid_coll_t *coll, const braid_algo_t *a, int *cuts_p)
{
    braid_model_t m = *braid_coll_model(coll);
    double best = BRAID_COST_NONE;
    *cuts_p = 0;
    for (int k = 0; k <= (tuner_slice_fixed(coll) ? 0 : BRAID_SLICE_CUTS); k++) {
        size_t slice = tuner_slice(coll, k);
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

/* braid_algo_rank, with the slices as halvings of the model's. */
static int tuner_rank_cuts(const braid_coll_t *coll, const braid_algo_t **algos, double *costs,
                           int *cuts, int max)
{
    uint32_t allow = coll->tune != NULL ? coll->tune->allow[coll->kind] : ~0u;
    int n = 0;
    for (int i = 0; i < braid_nalgos; i++) {
        const braid_algo_t *a = braid_algos[i];
        if (!(a->colls & (1u << coll->kind)) || !(allow & (1u << i)))
            continue;
        int k;
        double c = tuner_cost(coll, a, &k);
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

double braid_algo_cost(const braid_coll_t *coll, const braid_algo_t *a, size_t *slice_p)
{
    int k;
    double c = a->cost != NULL ? tuner_cost(coll, a, &k) : BRAID_COST_NONE;
    *slice_p = c < 0 ? 0 : tuner_slice(coll, k);
    return c;
}

int braid_algo_rank(const braid_coll_t *coll, const braid_algo_t **algos, double *costs,
                    size_t *slices, int max)
{
    int cuts[BRAID_ALGOS_MAX];
    int n = tuner_rank_cuts(coll, algos, costs, cuts,
                            max < BRAID_ALGOS_MAX ? max : BRAID_ALGOS_MAX);
    for (int i = 0; slices != NULL && i < n; i++)
        slices[i] = tuner_slice(coll, cuts[i]);
    return n;
}

void braid_tune_plan_make(const braid_coll_t *coll, braid_tune_plan_t *plan_p)
{
    double costs[BRAID_ALGOS_MAX];
    tuner_choice_t ch;
    plan_p->key = (braid_tune_key_t){ .coll = coll->kind, .bytes = braid_coll_bytes(coll) };
    int cached = tuner_cached(coll, &plan_p->key), plugin = cached && coll->tune->plugin_on;
    plan_p->last = cached ? atomic_load_explicit(&coll->tune->last[plan_p->key.coll],
                                                 memory_order_relaxed) : 0;
    plan_p->own = NULL;
    if (!plugin && tuner_cache_match(plan_p->last, &plan_p->key, &ch)) {
        plan_p->n = 1;
        plan_p->order[0] = braid_algos[ch.algo];
        plan_p->cuts[0] = ch.cuts;
        return;
    }
    plan_p->n = tuner_rank_cuts(coll, plan_p->order, costs, plan_p->cuts, BRAID_ALGOS_MAX);
    const braid_algo_t *own = plan_p->n > 0 ? plan_p->order[0] : NULL;
    if (plugin && braid_tune_plugin_pick(coll, plan_p->order, costs, plan_p->cuts, plan_p->n))
        plan_p->own = own;
}

/* Whether choice `word` (as tune->last) is among the collective's last ones logged; if
 * not, it becomes one. */
static int tuner_logged(braid_tune_t *t, braid_coll_kind_t kind, uint64_t word)
{
    for (int i = 0; i < BRAID_TUNE_LOGGED; i++)
        if (atomic_load_explicit(&t->logged[kind][i], memory_order_relaxed) == word)
            return 1;
    uint32_t i = atomic_fetch_add_explicit(&t->logged_next[kind], 1, memory_order_relaxed);
    atomic_store_explicit(&t->logged[kind][i % BRAID_TUNE_LOGGED], word, memory_order_relaxed);
    return 0;
}

/* A new choice for a collective (a new size, or another answer of the plugin), at TUNING,
 * unless logged lately (not for send and receive, which have one algorithm).
 * `own`: braid's own choice when the tuner plugin overrode it. */
static void tuner_choice_log(const braid_coll_t *coll, uint64_t word, size_t bytes,
                             const braid_algo_t *a, size_t slice, const braid_algo_t *own)
{
    if (!BRAID_LOG_ENABLED(BRAID_LOG_INFO, BRAID_SUB_TUNING) || coll->kind == BRAID_COLL_SEND ||
        coll->kind == BRAID_COLL_RECV || tuner_logged(coll->tune, coll->kind, word))
        return;
    if (own != NULL)
        BRAID_INFO(BRAID_SUB_TUNING, "tuner: %s of %zu bytes: %s, %zu-byte slices, chosen by "
                   "the tuner plugin %s (braid's model: %s)", braid_coll_name(coll->kind), bytes,
                   a->name, slice, braid_tune_plugin_name(), own->name);
    else
        BRAID_INFO(BRAID_SUB_TUNING, "tuner: %s of %zu bytes%s: %s, %zu-byte slices",
                   braid_coll_name(coll->kind), bytes,
                   coll->device && coll->tune->device_on ? " on the device" : "", a->name,
                   slice);
}

size_t braid_tune_plan_commit(const braid_coll_t *coll, const braid_tune_plan_t *plan, int i)
{
    size_t slice = tuner_slice(coll, plan->cuts[i]);
    tuner_choice_t ch = { .algo = braid_algo_index(plan->order[i]), .cuts = plan->cuts[i] };
    uint64_t word = tuner_cache_word(&plan->key, ch);
    int cached = tuner_cached(coll, &plan->key);
    if (cached && word != plan->last)
        atomic_store_explicit(&coll->tune->last[plan->key.coll], word, memory_order_relaxed);
    if (cached && word != plan->last)
        tuner_choice_log(coll, word, plan->key.bytes, plan->order[i], slice,
                         i == 0 ? plan->own : NULL);
    else if (coll->tune != NULL && coll->device)   /* never cached; logged apart */
        tuner_choice_log(coll, word | UINT64_C(1) << 63, plan->key.bytes, plan->order[i],
                         slice, i == 0 ? plan->own : NULL);
    return slice;
}
