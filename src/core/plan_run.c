/*
 * Bucket plans, run: readiness, launches on the communicator's proxy, handles, rebuild
 * (src/core/plan.h).
 *
 *   caller: ready(t) ... bucket b complete and 0..b-1 launched -> launch b (queued on the
 *           comm's proxy, returns at once) ... wait(b)
 *   proxy:  runs the collectives in launch order -> bucket_done: status, inflight--, wake
 *
 * Launching in bucket order on every rank keeps the ranks' calls in the same order, as a
 * communicator needs. HSDP chains the replica all-reduce from the proxy thread when the
 * reduce-scatter ended, so it too is posted in bucket order.
 */
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"
#include "core/enqueue.h"
#include "core/plan_int.h"
#include "base/log.h"

/* ---- completion -------------------------------------------------------------------------- */

/* Waiters are woken only when what they wait for is done: a waiter woken at every bucket
 * would take a core from the proxies for each (2 cores, 4 ranks: ~15 us a bucket). */
static void bucket_finish(plan_bucket_t *k, braid_status_t st)
{
    braid_plan_t *plan = k->plan;
    pthread_mutex_lock(&plan->lock);
    if (st < 0 && k->status == BRAID_OK)
        k->status = st;
    k->inflight--;
    plan->inflight--;
    if ((k->waiters > 0 && k->inflight == 0) || (plan->waiters_all > 0 && plan->inflight == 0))
        pthread_cond_broadcast(&plan->cond);
    pthread_mutex_unlock(&plan->lock);
}

static void bucket_done(void *arg, braid_status_t st)
{
    bucket_finish(arg, st);
}

/* HSDP: the shard is reduced inside the shard group; now across the replicas. */
static void hsdp_rs_done(void *arg, braid_status_t st)
{
    plan_bucket_t *k = arg;
    braid_plan_t *plan = k->plan;
    braid_comm_t *rc = plan->spec.replica;
    braid_call_t c = {
        .kind = BRAID_COLL_ALLREDUCE, .count = k->vcounts[plan->comm->rank],
        .dtype = plan->spec.wire, .op = plan->spec.op, .root = -1, .algo = &braid_algo_ring,
        .send_view = &k->ar_view, .recv_view = &k->ar_view, .acc = plan->spec.acc,
        .redop = &plan->ar_redop, .on_device = plan->spec.ordinal >= 0,
        .ordinal = plan->spec.ordinal, .stream = k->stream,
    };
    if (st == BRAID_OK)
        st = braid_comm_enter(rc, "braidPlanReady (replicas)", 1);
    if (st == BRAID_OK) {
        st = braid_enqueue_post(rc, &c, bucket_done, k);
        braid_comm_leave(rc);
        if (st == BRAID_OK)
            return;
    }
    bucket_finish(k, st);
}

/* ---- launches ---------------------------------------------------------------------------- */

/* Post one collective of bucket k; under the plan's lock. */
static braid_status_t bucket_post(plan_bucket_t *k, braid_call_t *c, braid_proxy_done_fn done)
{
    braid_plan_t *plan = k->plan;
    c->dtype = plan->spec.wire;
    c->acc = plan->spec.acc;
    c->on_device = plan->spec.ordinal >= 0;
    c->ordinal = plan->spec.ordinal;
    c->root = -1;
    c->algo = &braid_algo_ring;
    if (c->kind != BRAID_COLL_ALLREDUCE && !k->even) {
        c->vcounts = k->vcounts;
        c->vdispls = k->vdispls;
        c->count = k->flat;                 /* a V call's count is the total */
    } else if (c->kind != BRAID_COLL_ALLREDUCE) {
        c->count = k->vcounts[0];
    } else {
        c->count = k->flat;
    }
    k->inflight++;
    plan->inflight++;
    braid_status_t st = braid_enqueue_post(plan->comm, c, done, k);
    if (st < 0) {
        k->inflight--;
        plan->inflight--;
        if (k->status == BRAID_OK)
            k->status = st;
    }
    return st;
}

static braid_status_t bucket_launch(braid_plan_t *plan, int b)
{
    plan_bucket_t *k = &plan->buckets[b];
    const braid_plan_spec_t *sp = &plan->spec;
    if (sp->pattern != BRAID_PLAN_DDP && plan->gshard == NULL && k->vcounts[plan->comm->rank])
        return braid_err(BRAID_ERR_USAGE, "bucket %d: the gradient shard is not set "
                         "(braidPlanSetShards)", b);
    braid_call_t c = {
        .kind = sp->pattern == BRAID_PLAN_DDP ? BRAID_COLL_ALLREDUCE : BRAID_COLL_REDUCESCATTER,
        .op = sp->op, .send_view = &k->rd_send, .recv_view = &k->rd_recv,
        .redop = &plan->redop, .stream = k->stream,
    };
    return bucket_post(k, &c, sp->pattern == BRAID_PLAN_HSDP ? hsdp_rs_done : bucket_done);
}

/* The iteration ended: keep its order for a rebuild, start the next one. */
static void iteration_end(braid_plan_t *plan)
{
    memcpy(plan->last_order, plan->order, (size_t)plan->norder * sizeof(int));
    plan->last_norder = plan->norder;
    plan->norder = 0;
    plan->next = 0;
    memset(plan->marked, 0, (size_t)plan->ntensors);
    for (int b = 0; b < plan->nbuckets; b++) {
        plan->buckets[b].pending = plan->buckets[b].ntensors;
        plan->buckets[b].has_stream = 0;
    }
}

/* Launch buckets in order from plan->next: all of them (flush) or while complete. */
static braid_status_t launch_from_next(braid_plan_t *plan, int all)
{
    braid_status_t st = BRAID_OK;
    while (st == BRAID_OK && plan->next < plan->nbuckets &&
           (all || plan->buckets[plan->next].pending == 0)) {
        st = bucket_launch(plan, plan->next);
        if (st == BRAID_OK)
            plan->next++;
    }
    if (st == BRAID_OK && plan->next == plan->nbuckets)
        iteration_end(plan);
    return st;
}

/* Device plans: a bucket's collective starts after the work queued so far on the stream
 * its tensors were marked on (recorded when it is launched), so they share one stream. */
static braid_status_t mark_stream(braid_plan_t *plan, plan_bucket_t *k, int tensor,
                                  void *stream)
{
    if (plan->spec.ordinal >= 0 && k->has_stream && k->stream != stream)
        return braid_err(BRAID_ERR_INVALID, "braidPlanReady: tensor %d is marked on stream "
                         "%p, its bucket's other tensors on stream %p: a bucket's tensors are "
                         "marked on one stream", tensor, stream, k->stream);
    k->has_stream = 1;
    k->stream = stream;
    return BRAID_OK;
}

braid_status_t braid_plan_ready(braid_plan_t *plan, int tensor, void *stream)
{
    braid_status_t st = BRAID_OK;
    pthread_mutex_lock(&plan->lock);
    if (tensor < 0 || tensor >= plan->ntensors)
        st = braid_err(BRAID_ERR_INVALID, "braidPlanReady: tensor %d is not in the plan "
                       "(it has tensors 0 to %d)", tensor, plan->ntensors - 1);
    else if (plan->spec.pattern != BRAID_PLAN_DDP && plan->gshard == NULL &&
             plan->shard_count > 0)
        st = braid_err(BRAID_ERR_USAGE, "braidPlanReady: the gradient shard is not set "
                       "(braidPlanSetShards)");
    else if (plan->marked[tensor])
        st = braid_err(BRAID_ERR_INVALID, "braidPlanReady: tensor %d was already marked "
                       "ready in this iteration (its bucket %d waits for %d more)", tensor,
                       plan->bucket_of[tensor], plan->buckets[plan->bucket_of[tensor]].pending);
    else
        st = mark_stream(plan, &plan->buckets[plan->bucket_of[tensor]], tensor, stream);
    if (st == BRAID_OK) {
        plan->marked[tensor] = 1;
        plan->order[plan->norder++] = tensor;
        plan->buckets[plan->bucket_of[tensor]].pending--;
        st = launch_from_next(plan, 0);
    }
    pthread_mutex_unlock(&plan->lock);
    return st;
}

/* An iteration not begun (no mark since the last one ended) has nothing to flush: a flush
 * after marks that completed it must not launch another. */
braid_status_t braid_plan_flush(braid_plan_t *plan)
{
    pthread_mutex_lock(&plan->lock);
    braid_status_t st = plan->norder > 0 ? launch_from_next(plan, 1) : BRAID_OK;
    pthread_mutex_unlock(&plan->lock);
    return st;
}

braid_status_t braid_plan_gather(braid_plan_t *plan, int bucket, void *stream)
{
    if (plan->spec.pattern == BRAID_PLAN_DDP)
        return braid_err(BRAID_ERR_USAGE, "braidPlanGather: a DDP plan has no shards to "
                         "gather");
    if (bucket < 0 || bucket >= plan->nbuckets)
        return braid_err(BRAID_ERR_INVALID, "braidPlanGather: bucket %d is not in the plan "
                         "(it has buckets 0 to %d)", bucket, plan->nbuckets - 1);
    plan_bucket_t *k = &plan->buckets[bucket];
    if (plan->tensors[0].param == NULL)
        return braid_err(BRAID_ERR_USAGE, "braidPlanGather: the plan's tensors have no param "
                         "buffers to gather into");
    if (plan->pshard == NULL && k->vcounts[plan->comm->rank] > 0)
        return braid_err(BRAID_ERR_USAGE, "braidPlanGather: the parameter shard is not set "
                         "(braidPlanSetShards)");
    braid_call_t c = { .kind = BRAID_COLL_ALLGATHER, .op = -1, .send_view = &k->ag_send,
                       .recv_view = &k->ag_recv, .stream = stream };
    pthread_mutex_lock(&plan->lock);
    braid_status_t st = bucket_post(k, &c, bucket_done);
    pthread_mutex_unlock(&plan->lock);
    return st;
}

/* ---- handles ----------------------------------------------------------------------------- */

braid_status_t braid_plan_test(braid_plan_t *plan, int bucket, int *done_p)
{
    if (bucket < 0 || bucket >= plan->nbuckets)
        return braid_err(BRAID_ERR_INVALID, "braidPlanTest: bucket %d is not in the plan "
                         "(it has buckets 0 to %d)", bucket, plan->nbuckets - 1);
    pthread_mutex_lock(&plan->lock);
    const plan_bucket_t *k = &plan->buckets[bucket];
    *done_p = k->inflight == 0;
    braid_status_t st = *done_p ? k->status : BRAID_OK;
    pthread_mutex_unlock(&plan->lock);
    return st;
}

/* A collective ends on its own: it completes, fails, times out (the executor's timeout
 * names the ranks it waits for) or is aborted, and bucket_done is called every time. */
braid_status_t braid_plan_wait(braid_plan_t *plan, int bucket)
{
    if (bucket < -1 || bucket >= plan->nbuckets)
        return braid_err(BRAID_ERR_INVALID, "braidPlanWait: bucket %d is not in the plan "
                         "(it has buckets 0 to %d, or -1 for all)", bucket, plan->nbuckets - 1);
    braid_status_t st = BRAID_OK;
    pthread_mutex_lock(&plan->lock);
    int *waiters = bucket < 0 ? &plan->waiters_all : &plan->buckets[bucket].waiters;
    int *inflight = bucket < 0 ? &plan->inflight : &plan->buckets[bucket].inflight;
    (*waiters)++;
    while (*inflight > 0)
        pthread_cond_wait(&plan->cond, &plan->lock);
    (*waiters)--;
    for (int b = bucket < 0 ? 0 : bucket; b <= (bucket < 0 ? plan->nbuckets - 1 : bucket);
         b++)
        if (st == BRAID_OK)
            st = plan->buckets[b].status;
    pthread_mutex_unlock(&plan->lock);
    return st;
}

/* ---- rebuild ----------------------------------------------------------------------------- */

/* Rank 0's order of marks in its last complete iteration, then the tensors it did not
 * mark in backward order; order[0] = -1 if it has none. */
static void rebuild_order(const braid_plan_t *plan, int32_t *order)
{
    int n = plan->ntensors, k = 0;
    if (plan->last_norder < 0) {
        order[0] = -1;
        return;
    }
    char *seen = calloc((size_t)n, 1);
    for (int i = 0; i < plan->last_norder; i++) {
        order[k++] = plan->last_order[i];
        if (seen != NULL)
            seen[plan->last_order[i]] = 1;
    }
    for (int t = n - 1; t >= 0 && seen != NULL; t--)
        if (!seen[t])
            order[k++] = t;
    if (seen == NULL)
        order[0] = -1;   /* keep the buckets: nothing is lost */
    free(seen);
}

braid_status_t braid_plan_rebuild(braid_plan_t *plan)
{
    if (plan->spec.pattern != BRAID_PLAN_DDP)
        return braid_err(BRAID_ERR_USAGE, "braidPlanRebuild: only DDP plans are rebuilt "
                         "(a sharded plan's shards would move under the parameters)");
    BRAID_CHECK(braid_plan_wait(plan, -1));
    if (plan->next > 0)
        return braid_err(BRAID_ERR_USAGE, "braidPlanRebuild: an iteration is under way (%d "
                         "buckets launched); rebuild between iterations", plan->next);
    int n = plan->ntensors;
    int32_t *order = malloc((size_t)n * sizeof(*order));
    if (order == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory rebuilding a plan");
    pthread_mutex_lock(&plan->lock);
    rebuild_order(plan, order);
    pthread_mutex_unlock(&plan->lock);
    braid_call_t c = { .kind = BRAID_COLL_BROADCAST, .sendbuf = order, .recvbuf = order,
                       .count = (size_t)n, .dtype = BRAID_INT32, .op = -1, .root = 0 };
    braid_status_t st = braid_enqueue(plan->comm, &c);
    pthread_mutex_lock(&plan->lock);
    if (st == BRAID_OK && order[0] >= 0) {
        int *o = malloc((size_t)n * sizeof(int));
        st = o != NULL ? BRAID_OK : braid_err(BRAID_ERR_NOMEM, "out of memory rebuilding");
        for (int i = 0; st == BRAID_OK && i < n; i++)
            o[i] = order[i];
        if (st == BRAID_OK)
            st = braid_plan_bucketize(plan, o);
        free(o);
        plan->norder = 0;
        memset(plan->marked, 0, (size_t)n);
    }
    pthread_mutex_unlock(&plan->lock);
    free(order);
    return st;
}
