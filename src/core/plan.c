/*
 * Bucket plans, built: buckets, their views of the tensors, shards, and the agreement of
 * every rank (src/core/plan.h).
 *
 * A bucket is a flat buffer of the wire type that exists only as views:
 *
 *   tensors    t9 (fp32)   t8 (fp32)        t7 (bf16)  pad       the bucket's flat
 *   flat       [0 ....... 1000) [1000 ... 5096) [5096 .. 5120)    elements, in the order
 *   shards     [ rank 0 ...... ) [ rank 1 ....... ) [ rank 2 ... ) the tensors joined it
 *
 * DDP all-reduces the flat buffer from the gradients into the out tensors (or back into
 * the gradients). FSDP reduce-scatters it from the gradients into each rank's gradient
 * shard and all-gathers it from the parameter shards into the parameters; the shards split
 * the bucket in units of the padding multiple, unevenly where they must (the V
 * collectives). HSDP adds an all-reduce of the gradient shard across the replicas.
 */
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"
#include "core/enqueue.h"
#include "core/plan_int.h"
#include "base/log.h"

/* ---- buckets ------------------------------------------------------------------------- */

static void buckets_free(braid_plan_t *plan)
{
    for (int b = 0; b < plan->nbuckets; b++) {
        plan_bucket_t *k = &plan->buckets[b];
        free(k->tensors);
        free(k->grads);
        free(k->outs);
        free(k->params);
        free(k->vcounts);
        free(k->vdispls);
    }
    free(plan->buckets);
    plan->buckets = NULL;
    plan->nbuckets = 0;
}

static void seg_set(braid_seg_t *s, void *ptr, size_t first, size_t count, braid_dtype_t dt)
{
    s->ptr = ptr;
    s->first = first;
    s->count = count;
    s->dtype = dt;
}

static braid_view_t view_of(const braid_seg_t *segs, int n, int accumulate, double scale)
{
    braid_view_t v = { segs, n, accumulate, scale != 1.0, scale };
    return v;
}

/* The shard views of bucket k, from the plan's shard buffers (set or not). */
static void bucket_shard_views(braid_plan_t *plan, plan_bucket_t *k)
{
    const braid_plan_spec_t *sp = &plan->spec;
    size_t os = braid_dtype_size(sp->out), mine = k->vcounts[plan->comm->rank];
    double post = 1.0 / sp->postdiv;
    char *g = plan->gshard, *p = (char *)plan->pshard;
    seg_set(&k->gshard, g != NULL ? g + k->shard_off * os : NULL, 0, mine, sp->out);
    seg_set(&k->pshard, p != NULL ? p + k->shard_off * os : NULL, 0, mine, sp->out);
    int hsdp = sp->pattern == BRAID_PLAN_HSDP;
    k->rd_recv = view_of(&k->gshard, 1, hsdp ? 0 : sp->accumulate, hsdp ? 1.0 : post);
    k->ag_send = view_of(&k->pshard, 1, 0, 1.0);
    k->ar_view = view_of(&k->gshard, 1, 0, post);
}

/* FSDP, HSDP: rank r's shard is chunk r of the bucket's units of `pad` elements. */
static braid_status_t bucket_shards(braid_plan_t *plan, plan_bucket_t *k, size_t *off_p)
{
    int n = plan->comm->nranks;
    size_t pad = plan->spec.pad, units = k->flat / pad;
    k->vcounts = malloc((size_t)n * sizeof(size_t));
    k->vdispls = malloc((size_t)n * sizeof(size_t));
    if (k->vcounts == NULL || k->vdispls == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for a plan's shards");
    for (int r = 0; r < n; r++) {
        size_t first, len;
        braid_chunk(units, n, r, &first, &len);
        k->vcounts[r] = len * pad;
        k->vdispls[r] = first * pad;
    }
    k->even = units % (size_t)n == 0;
    k->shard_off = *off_p;
    *off_p += k->vcounts[plan->comm->rank];
    k->params = malloc((size_t)k->ntensors * sizeof(braid_seg_t));
    if (k->params == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for a plan's shards");
    for (int i = 0; i < k->ntensors; i++) {
        const braid_plan_tensor_t *t = &plan->tensors[k->tensors[i]];
        k->params[i] = k->grads[i];
        k->params[i].ptr = t->param;
    }
    k->ag_recv = view_of(k->params, k->ntensors, 0, 1.0);
    bucket_shard_views(plan, k);
    return BRAID_OK;
}

/* The views of bucket k, whose tensors are set. */
static braid_status_t bucket_views(braid_plan_t *plan, plan_bucket_t *k, size_t *shard_off_p)
{
    const braid_plan_spec_t *sp = &plan->spec;
    size_t first = 0;
    int has_out = sp->pattern == BRAID_PLAN_DDP && plan->tensors[k->tensors[0]].out != NULL;
    k->grads = malloc((size_t)k->ntensors * sizeof(braid_seg_t));
    k->outs = has_out ? malloc((size_t)k->ntensors * sizeof(braid_seg_t)) : NULL;
    if (k->grads == NULL || (has_out && k->outs == NULL))
        return braid_err(BRAID_ERR_NOMEM, "out of memory for a plan's buckets");
    for (int i = 0; i < k->ntensors; i++) {
        const braid_plan_tensor_t *t = &plan->tensors[k->tensors[i]];
        seg_set(&k->grads[i], t->grad, first, t->count, t->dtype);
        if (has_out)
            seg_set(&k->outs[i], t->out, first, t->count, sp->out);
        first += t->count;
    }
    k->flat = (first + sp->pad - 1) / sp->pad * sp->pad;
    k->rd_send = view_of(k->grads, k->ntensors, 0, 1.0);
    if (sp->pattern != BRAID_PLAN_DDP)
        return bucket_shards(plan, k, shard_off_p);
    k->rd_recv = view_of(has_out ? k->outs : k->grads, k->ntensors, sp->accumulate,
                         1.0 / sp->postdiv);
    return BRAID_OK;
}

/* Wire bytes of tensor t. */
static size_t tensor_wire(const braid_plan_t *plan, int t)
{
    return plan->tensors[t].count * braid_dtype_size(plan->spec.wire);
}

braid_status_t braid_plan_bucketize(braid_plan_t *plan, const int *order)
{
    int n = plan->ntensors, nb = 0;
    plan_bucket_t *bk = calloc((size_t)n, sizeof(*bk));   /* at most one per tensor */
    if (bk == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for a plan's buckets");
    buckets_free(plan);
    plan->buckets = bk;
    for (int i = 0; i < n;) {   /* each bucket takes tensors while they fit its cap */
        size_t cap = nb == 0 ? plan->spec.first_cap : plan->spec.cap, bytes = 0;
        int j = i;
        while (j < n && (j == i || bytes + tensor_wire(plan, order[j]) <= cap))
            bytes += tensor_wire(plan, order[j++]);
        plan_bucket_t *k = &bk[nb++];
        k->plan = plan;
        k->ntensors = j - i;
        k->tensors = malloc((size_t)k->ntensors * sizeof(int));
        plan->nbuckets = nb;
        if (k->tensors == NULL)
            return braid_err(BRAID_ERR_NOMEM, "out of memory for a plan's buckets");
        memcpy(k->tensors, order + i, (size_t)k->ntensors * sizeof(int));
        for (int m = i; m < j; m++)
            plan->bucket_of[order[m]] = nb - 1;
        i = j;
    }
    size_t shard_off = 0;
    for (int b = 0; b < nb; b++) {
        BRAID_CHECK(bucket_views(plan, &bk[b], &shard_off));
        bk[b].pending = bk[b].ntensors;
    }
    plan->shard_count = shard_off;
    return BRAID_OK;
}

/* ---- the automatic cap ----------------------------------------------------------------- */

/*
 * The smallest bucket at which the communicator's cost model predicts 90 % of the best bus
 * bandwidth it predicts for the ring (the plans' algorithm) at any size up to 1 GiB: bigger
 * buckets gain little, and they start later (a bucket waits for its last tensor) and
 * overlap less.
 */
#define PLAN_CAP_MIN (64 * 1024)
#define PLAN_CAP_MAX (1024 * 1024 * 1024)

static size_t plan_auto_cap(const braid_comm_t *comm, const braid_plan_spec_t *sp)
{
    int n = comm->nranks, kinds = 0;
    size_t ws = braid_dtype_size(sp->wire);
    double bw[32];
    size_t sizes[32];
    if (n == 1)
        return 25u << 20;   /* nothing moves; DDP's default */
    for (size_t bytes = PLAN_CAP_MIN; bytes <= PLAN_CAP_MAX && kinds < 32; bytes *= 2) {
        int ddp = sp->pattern == BRAID_PLAN_DDP;
        braid_coll_t c = {
            .kind = ddp ? BRAID_COLL_ALLREDUCE : BRAID_COLL_REDUCESCATTER,
            .dtype = sp->wire, .rank = comm->rank, .nranks = n,
            .count = ddp ? bytes / ws : bytes / ws / (size_t)n, .root = -1,
            .topo = &comm->topo, .tune = (struct braid_tune *)&comm->tune,
            .force = &braid_algo_ring,
        };
        size_t slice;
        double cost = braid_algo_cost(&c, &braid_algo_ring, &slice);
        if (cost <= 0)
            continue;
        sizes[kinds] = bytes;
        bw[kinds++] = (double)bytes * (ddp ? 2.0 : 1.0) * (n - 1) / n / cost;
    }
    double peak = 0;
    for (int i = 0; i < kinds; i++)
        peak = bw[i] > peak ? bw[i] : peak;
    for (int i = 0; i < kinds; i++)
        if (bw[i] >= 0.9 * peak)
            return sizes[i];
    return 25u << 20;
}

/* ---- every rank agrees ----------------------------------------------------------------- */

/* What every rank of a plan must give alike (addresses may differ). */
typedef struct plan_digest {
    uint64_t tensors_hash;
    int32_t ntensors, pattern, wire, acc, out, op, accumulate, nranks, shard_rank;
    int32_t has_replica;
    uint64_t cap, first_cap, pad;
    double premul, prediv, postdiv;
} plan_digest_t;

typedef struct plan_trec {
    uint64_t count;
    int32_t dtype, flags;   /* 1: out given, 2: param given */
} plan_trec_t;

static plan_trec_t trec_of(const braid_plan_tensor_t *t)
{
    plan_trec_t r = { t->count, (int32_t)t->dtype, (t->out != NULL) | (t->param != NULL) << 1 };
    return r;
}

static uint64_t tensors_hash(const braid_plan_tensor_t *t, int n)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a over the records */
    for (int i = 0; i < n; i++) {
        plan_trec_t r = trec_of(&t[i]);
        const unsigned char *p = (const unsigned char *)&r;
        for (size_t k = 0; k < sizeof(r); k++)
            h = (h ^ p[k]) * 1099511628211ull;
    }
    return h;
}

/* A blocking all-gather of `bytes` per rank on host memory, through the executor. */
static braid_status_t plan_allgather(braid_comm_t *comm, const void *mine, void *all,
                                     size_t bytes)
{
    braid_call_t c = { .kind = BRAID_COLL_ALLGATHER, .sendbuf = mine, .recvbuf = all,
                       .count = bytes, .dtype = BRAID_UINT8, .op = -1, .root = -1 };
    return braid_enqueue(comm, &c);
}

/* The first tensor whose record differs from rank 0's, on the rank that differs. */
static braid_status_t plan_tensor_mismatch(braid_comm_t *comm, const char *which,
                                           const braid_plan_tensor_t *t, int n, int peer)
{
    plan_trec_t *all = malloc((size_t)comm->nranks * (size_t)n * sizeof(*all));
    plan_trec_t *mine = malloc((size_t)n * sizeof(*mine));
    braid_status_t st = all != NULL && mine != NULL ? BRAID_OK : BRAID_ERR_NOMEM;
    for (int i = 0; st == BRAID_OK && i < n; i++)
        mine[i] = trec_of(&t[i]);
    if (st == BRAID_OK)
        st = plan_allgather(comm, mine, all, (size_t)n * sizeof(*mine));
    int i = 0;
    const plan_trec_t *a = all, *b = st == BRAID_OK ? all + (size_t)peer * (size_t)n : NULL;
    while (st == BRAID_OK && i < n && !memcmp(&a[i], &b[i], sizeof(a[i])))
        i++;
    if (st == BRAID_OK && i < n)
        st = braid_err(BRAID_ERR_USAGE, "braidPlanCreate: plans differ on %s: rank %d's tensor "
                       "%d is %llu x %s%s%s where rank 0's is %llu x %s%s%s; every rank must "
                       "list the same tensors", which, peer, i, (unsigned long long)b[i].count,
                       braid_dtype_name(b[i].dtype), b[i].flags & 1 ? " with out" : "",
                       b[i].flags & 2 ? " with param" : "", (unsigned long long)a[i].count,
                       braid_dtype_name(a[i].dtype), a[i].flags & 1 ? " with out" : "",
                       a[i].flags & 2 ? " with param" : "");
    else if (st == BRAID_ERR_NOMEM)
        st = braid_err(st, "out of memory comparing plans");
    free(all);
    free(mine);
    return st;
}

/* Every rank of comm gave the same plan; `which` names the comm in messages. */
static braid_status_t plan_agree(braid_comm_t *comm, const char *which, const plan_digest_t *d,
                                 const braid_plan_tensor_t *t, int n)
{
    plan_digest_t *all = malloc((size_t)comm->nranks * sizeof(*all));
    if (all == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory comparing plans");
    braid_status_t st = plan_allgather(comm, d, all, sizeof(*d));
    for (int r = 1; st == BRAID_OK && r < comm->nranks; r++) {
        if (!memcmp(&all[r], &all[0], sizeof(*all)))
            continue;
        if (all[r].ntensors != all[0].ntensors)
            st = braid_err(BRAID_ERR_USAGE, "braidPlanCreate: plans differ on %s: rank %d "
                           "lists %d tensors where rank 0 lists %d", which, r, all[r].ntensors,
                           all[0].ntensors);
        else if (all[r].tensors_hash != all[0].tensors_hash)
            st = plan_tensor_mismatch(comm, which, t, n, r);
        else if (all[r].shard_rank != all[0].shard_rank || all[r].nranks != all[0].nranks)
            st = braid_err(BRAID_ERR_USAGE, "braidPlanCreate: rank %d of %s is rank %d of %d "
                           "of its shard group where rank 0 is rank %d of %d: replicas must "
                           "hold the same shards", r, which, all[r].shard_rank, all[r].nranks,
                           all[0].shard_rank, all[0].nranks);
        else
            st = braid_err(BRAID_ERR_USAGE, "braidPlanCreate: plans differ on %s: rank %d's "
                           "config (pattern, caps, padding, types, op, factors) differs from "
                           "rank 0's", which, r);
    }
    free(all);
    return st;
}

static braid_status_t plan_check_peers(braid_plan_t *plan, const braid_plan_spec_t *given)
{
    const braid_plan_spec_t *sp = given;
    plan_digest_t d;
    memset(&d, 0, sizeof(d));   /* padding bytes too: digests are compared whole */
    d.tensors_hash = tensors_hash(plan->tensors, plan->ntensors);
    d.ntensors = plan->ntensors;
    d.pattern = sp->pattern;
    d.wire = sp->wire, d.acc = sp->acc, d.out = sp->out, d.op = sp->op;
    d.accumulate = sp->accumulate;
    d.has_replica = sp->replica != NULL;
    d.cap = sp->cap, d.first_cap = sp->first_cap, d.pad = sp->pad;
    d.premul = sp->premul, d.prediv = sp->prediv, d.postdiv = sp->postdiv;
    BRAID_CHECK(plan_agree(plan->comm, "the communicator", &d, plan->tensors, plan->ntensors));
    if (sp->replica == NULL)
        return BRAID_OK;
    d.nranks = plan->comm->nranks;
    d.shard_rank = plan->comm->rank;
    return plan_agree(sp->replica, "the replica communicator", &d, plan->tensors,
                      plan->ntensors);
}

/* ---- create and destroy ------------------------------------------------------------------ */

static void plan_lower(braid_plan_t *plan)
{
    const braid_plan_spec_t *sp = &plan->spec;
    int avg = sp->op == 4;
    double pre = sp->premul / sp->prediv / (avg ? plan->comm->nranks : 1);
    plan->redop.kind = avg ? BRAID_OP_SUM : (braid_opkind_t)sp->op;
    plan->redop.premul = pre != 1.0;
    plan->redop.scalar.f = pre;
    if (sp->replica == NULL)
        return;
    plan->ar_redop.kind = plan->redop.kind;
    plan->ar_redop.premul = avg && sp->replica->nranks > 1;
    plan->ar_redop.scalar.f = 1.0 / sp->replica->nranks;
}

static void plan_free(braid_plan_t *plan)
{
    buckets_free(plan);
    free(plan->tensors);
    free(plan->bucket_of);
    free(plan->marked);
    free(plan->order);
    free(plan->last_order);
    pthread_cond_destroy(&plan->cond);
    pthread_mutex_destroy(&plan->lock);
    free(plan);
}

braid_status_t braid_plan_create(braid_comm_t *comm, const braid_plan_tensor_t *tensors,
                                 int ntensors, const braid_plan_spec_t *spec,
                                 braid_plan_t **plan_p)
{
    size_t n = (size_t)ntensors;
    braid_plan_t *plan = calloc(1, sizeof(*plan));
    if (plan == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for a plan");
    pthread_mutex_init(&plan->lock, NULL);
    pthread_cond_init(&plan->cond, NULL);
    plan->comm = comm;
    plan->spec = *spec;
    plan->ntensors = ntensors;
    plan->last_norder = -1;
    plan->tensors = malloc(n * sizeof(*plan->tensors));
    plan->bucket_of = malloc(n * sizeof(int));
    plan->marked = calloc(n, 1);
    plan->order = malloc(n * sizeof(int));
    plan->last_order = malloc(n * sizeof(int));
    braid_status_t st = BRAID_OK;
    if (plan->tensors == NULL || plan->bucket_of == NULL || plan->marked == NULL ||
        plan->order == NULL || plan->last_order == NULL)
        st = braid_err(BRAID_ERR_NOMEM, "out of memory for a plan of %d tensors", ntensors);
    if (st == BRAID_OK) {
        memcpy(plan->tensors, tensors, n * sizeof(*tensors));
        st = plan_check_peers(plan, spec);
    }
    if (st == BRAID_OK) {
        if (plan->spec.cap == 0)
            plan->spec.cap = plan_auto_cap(comm, spec);
        if (plan->spec.first_cap == 0)
            plan->spec.first_cap = plan->spec.cap;
        plan_lower(plan);
        for (int i = 0; i < ntensors; i++)   /* backward order: the last layers first */
            plan->order[i] = ntensors - 1 - i;
        st = braid_plan_bucketize(plan, plan->order);
    }
    if (st < 0) {
        plan_free(plan);
        return st;
    }
    BRAID_INFO(BRAID_SUB_COLL, "plan of %d tensors: %d buckets, cap %zu bytes (first %zu), "
               "wire %s", ntensors, plan->nbuckets, plan->spec.cap, plan->spec.first_cap,
               braid_dtype_name(plan->spec.wire));
    *plan_p = plan;
    return BRAID_OK;
}

braid_status_t braid_plan_destroy(braid_plan_t *plan)
{
    pthread_mutex_lock(&plan->lock);
    int busy = -1;
    for (int b = 0; b < plan->nbuckets && busy < 0; b++)
        if (plan->buckets[b].inflight > 0)
            busy = b;
    pthread_mutex_unlock(&plan->lock);
    if (busy >= 0)
        return braid_err(BRAID_ERR_USAGE, "braidPlanDestroy: bucket %d is still in flight; "
                         "wait for it (braidPlanWait) before destroying the plan", busy);
    plan_free(plan);
    return BRAID_OK;
}

/* ---- what the caller may ask ------------------------------------------------------------- */

braid_comm_t *braid_plan_comm(const braid_plan_t *plan)
{
    return plan->comm;
}

int braid_plan_ordinal(const braid_plan_t *plan)
{
    return plan->spec.ordinal;
}

int braid_plan_ntensors(const braid_plan_t *plan)
{
    return plan->ntensors;
}

int braid_plan_nbuckets(const braid_plan_t *plan)
{
    return plan->nbuckets;
}

void braid_plan_bucket_info(const braid_plan_t *plan, int b, int *ntensors_p,
                            const int **tensors_p, size_t *wire_bytes_p)
{
    const plan_bucket_t *k = &plan->buckets[b];
    if (ntensors_p != NULL)
        *ntensors_p = k->ntensors;
    if (tensors_p != NULL)
        *tensors_p = k->tensors;
    if (wire_bytes_p != NULL)
        *wire_bytes_p = k->flat * braid_dtype_size(plan->spec.wire);
}

braid_status_t braid_plan_shard_count(const braid_plan_t *plan, size_t *count_p)
{
    if (plan->spec.pattern == BRAID_PLAN_DDP)
        return braid_err(BRAID_ERR_USAGE, "braidPlanShardCount: a DDP plan has no shards");
    *count_p = plan->shard_count;
    return BRAID_OK;
}

braid_status_t braid_plan_set_shards(braid_plan_t *plan, void *grad, const void *param)
{
    if (plan->spec.pattern == BRAID_PLAN_DDP)
        return braid_err(BRAID_ERR_USAGE, "braidPlanSetShards: a DDP plan has no shards");
    pthread_mutex_lock(&plan->lock);
    braid_status_t st = BRAID_OK;
    if (plan->inflight > 0 || plan->next > 0)
        st = braid_err(BRAID_ERR_USAGE, "braidPlanSetShards: buckets are launched or in "
                       "flight; set the shards between iterations, with nothing in flight");
    if (st == BRAID_OK) {
        plan->gshard = grad;
        plan->pshard = param;
        for (int b = 0; b < plan->nbuckets; b++)
            bucket_shard_views(plan, &plan->buckets[b]);
    }
    pthread_mutex_unlock(&plan->lock);
    return st;
}
