/*
 * User schedules: which calls a loaded schedule takes, and its hash for the ranks to
 * compare (what the tuner and the algorithm table ask of it, apart from loading it in
 * usched.c: so that the tuner links without the simulator, as in the fuzz build).
 */
#include <stdio.h>

#include "algorithms/usched_int.h"
#include "base/log.h"

int braid_usched_takes(const us_sched_t *u, const braid_coll_t *c)
{
    if (u->retired || c->kind != u->kind || c->nranks != u->nranks || c->count == 0 ||
        c->count % (size_t)u->chunks != 0)
        return 0;
    if (c->in_place && !u->in_place)
        return 0;
    return 1;
}

braid_status_t braid_usched_fits(const braid_algo_t *a, const braid_coll_t *c)
{
    const us_sched_t *u = a->user;
    const char *why = NULL;
    char buf[160];
    if (u == NULL || braid_usched_takes(u, c))
        return BRAID_OK;
    if (u->retired)
        why = "it was unloaded";
    else if (c->kind != u->kind)
        why = "it is a schedule of another collective";
    else if (c->nranks != u->nranks) {
        snprintf(buf, sizeof(buf), "it is written for %d ranks", u->nranks);
        why = buf;
    } else if (c->count == 0 || c->count % (size_t)u->chunks != 0) {
        snprintf(buf, sizeof(buf), "the count must be a multiple of its %d chunks", u->chunks);
        why = buf;
    } else {
        why = "the simulator at load found it wrong in place: use separate buffers";
    }
    return braid_err(BRAID_ERR_USAGE, "the schedule %s (%s: %s on %d ranks) cannot run %s of "
                     "count %zu on %d ranks%s: %s", u->name, u->path, braid_coll_name(u->kind),
                     u->nranks, braid_coll_name(c->kind), c->count, c->nranks,
                     c->in_place ? " in place" : "", why);
}

uint64_t braid_usched_hash(const braid_algo_t *a)
{
    return a->user != NULL ? ((const us_sched_t *)a->user)->hash : 0;
}
