/*
 * mlp_demo: a small MLP trained data-parallel with a bucket plan (braid.h), checked against
 * the same training done in one process without any communication.
 *
 *     braidrun -n 4 mlp_demo [--pattern ddp|fsdp] [--wire fp32|bf16] [--steps N]
 *                            [--bucket BYTES] [--rebuild] [--device]
 *
 * Model: 32-64-64-8, tanh on the hidden layers, loss 1/2 |f(x) - y|^2 averaged over the
 * batch, plain SGD, fp32 parameters and gradients; six tensors W1 b1 W2 b2 W3 b3, in that
 * order in the plan. Data: 1024 samples of a fixed random teacher network (32-16-8, tanh),
 * made from a fixed seed on every rank; the global batch of step t is 16 * nranks
 * consecutive samples, rank r trains on its 16.
 *
 * DDP (default): each rank runs backward, last layer first, and marks every gradient ready
 * as soon as it is computed (braidPlanReady: the bucket whose gradients are all in starts
 * its all-reduce while the earlier layers are still computed); braidPlanWait(-1); SGD with
 * the averaged gradients (op ncclAvg, written back into the gradients).
 * --rebuild: braidPlanRebuild after the first step, into the order of rank 0's marks (W
 * before b: with the default 4 KiB buckets, 4 buckets become 5).
 * FSDP (--pattern fsdp): each rank keeps an fp32 shard of the parameters; braidPlanGather
 * of every bucket fills the full parameters before forward, the marks reduce-scatter the
 * gradients into the gradient shard, and SGD updates the shard only. Where each parameter
 * lives in the shards follows braid.h's rule (shard_layout); braidAllGatherV brings every
 * rank's shard together for the final check.
 *
 * The check, on rank 0. Every step it also computes the exact mean gradient at the weights
 * the ranks used (every slice's gradient, by the same code, averaged in fp32) and requires
 * each averaged element it received to be within the wire's rounding bound of it:
 *     |got - mean| <= ((n+1) u_wire + 2 (n+2) u_fp32) * 1.125 * mean_r |g_r|
 * (n + 1 roundings of a partial sum bounded by mean_r |g_r|, whatever the order of the sum:
 * the first cast of each scaled contribution and one per hop of a ring; u = 2^-24 for fp32,
 * 2^-8 for bf16, whose 8 significant bits round to nearest within half an ulp). Beside it
 * runs the reference: the same init and data, the full global batch, no communication.
 * Since both take SGD steps, each final weight differs from the reference's by at most
 *     tol = sum_t lr (rounding bound above)            wire: bounded a priori, per step
 *         + sum_t lr |mean(w_t) - mean(w_ref,t)|       drift: the exact mean gradients at
 *                                                      the two runs' own weights, measured
 *         + sum_t u_fp32 (|w| + |w_ref| + 2 lr (|g| + |g_ref|))   rounding of the updates
 * element by element (w_T - w_ref,T is the sum of lr (g_ref,t - average_t) and the
 * updates' rounding; the triangle inequality through mean(w_t) splits it as above). The
 * summary prints the largest difference and the largest tol. Exit 0 when every step's
 * check and every final weight pass, 1 otherwise, 2 on a failed call or a bad flag.
 *
 * --device: the plan's buffers (gradients, FSDP parameters and shards) are device memory,
 * of CUDA's driver or HIP's runtime as the perf tools choose (perf_gpu.c: a GPU, or braid's
 * emulated driver or runtime on LD_LIBRARY_PATH). The model still computes
 * on the CPU, so each gradient is copied to the device before it is marked ready on the
 * demo's stream, and results are copied back after braidPlanWait.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "braid.h"
#include "perf_gpu.h"

#define MLP_NLAYERS 3
#define MLP_NTENSORS (2 * MLP_NLAYERS)
#define MLP_MAXDIM 64
#define MLP_SLICE 16        /* samples per rank per step */
#define MLP_NDATA 1024      /* samples in the data set; a multiple of MLP_SLICE */
#define MLP_TEACHER 16      /* hidden width of the teacher */
#define MLP_LR 0.1f
#define U_FP32 0x1p-24
#define U_BF16 0x1p-8

static const int mlp_dims[MLP_NLAYERS + 1] = { 32, 64, 64, 8 };
static const char *const mlp_names[MLP_NTENSORS] = { "W1", "b1", "W2", "b2", "W3", "b3" };
static size_t mlp_off[MLP_NTENSORS + 1];   /* tensor i: elements mlp_off[i] .. mlp_off[i+1] */
#define MLP_NPARAMS (mlp_off[MLP_NTENSORS])

typedef struct demo {
    /* options */
    int fsdp, bf16, steps, rebuild, dev;
    size_t bucket;
    /* the job */
    int rank, nranks, nbuckets;
    ncclComm_t comm;
    braidPlan_t plan;
    float *x, *y;           /* the data set: MLP_NDATA inputs and targets */
    float *w;               /* DDP: this replica; FSDP: the gathered (full) parameters */
    float *g;               /* this rank's gradients, the plan's tensors (DDP: averaged) */
    /* --device: the plan's buffers, device twins of g, w, gshard, wshard; the stream */
    float *g_d, *w_d, *gshard_d, *wshard_d;
    void *stream;
    /* FSDP */
    float *wshard, *gshard;
    size_t *shard_counts;   /* every rank's */
    size_t *src_index;      /* where parameter element e lives: element src_index[e] of */
    int *src_rank;          /* rank src_rank[e]'s shard */
    /* the check, rank 0 */
    float *wref, *gref, *gmean, *absmean, *gtmp;
    double *tol_wire, *tol_drift, *tol_update;   /* per parameter element */
    double worst;
    int bad_steps;
} demo_t;

/* ---- errors ---- */

static void demo_fail(const demo_t *d, const char *what, ncclResult_t res)
{
    const char *last = ncclGetLastError(d->comm);
    fflush(stdout);
    fprintf(stderr, "mlp_demo: rank %d: %s failed: %s%s%s\n", d->rank, what,
            ncclGetErrorString(res), last != NULL && last[0] != '\0' ? ": " : "",
            last != NULL ? last : "");
    exit(2);
}

#define CHECK(d, call)                                                                    \
    do {                                                                                  \
        ncclResult_t res_ = (call);                                                       \
        if (res_ != ncclSuccess)                                                          \
            demo_fail((d), #call, res_);                                                  \
    } while (0)

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n > 0 ? n : 1, size);
    if (p == NULL) {
        fprintf(stderr, "mlp_demo: out of memory (%zu x %zu bytes)\n", n, size);
        exit(2);
    }
    return p;
}

/* ---- data and model ---- */

static uint64_t rng_next(uint64_t *s)   /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float rng_uniform(uint64_t *s)   /* [-1, 1), exact in fp32 */
{
    return (float)((double)(rng_next(s) >> 40) * 0x1p-23 - 1.0);
}

static void mlp_layout(void)
{
    size_t off = 0;
    for (int l = 0; l < MLP_NLAYERS; l++) {
        mlp_off[2 * l] = off;
        off += (size_t)mlp_dims[l + 1] * (size_t)mlp_dims[l];
        mlp_off[2 * l + 1] = off;
        off += (size_t)mlp_dims[l + 1];
    }
    mlp_off[MLP_NTENSORS] = off;
}

/* The student's initial weights: uniform in +-1/sqrt(fan-in), biases in +-0.1. */
static void mlp_init(float *w)
{
    uint64_t s = 1;
    for (int l = 0; l < MLP_NLAYERS; l++) {
        float scale = 1.0f / sqrtf((float)mlp_dims[l]);
        for (size_t i = mlp_off[2 * l]; i < mlp_off[2 * l + 1]; i++)
            w[i] = scale * rng_uniform(&s);
        for (size_t i = mlp_off[2 * l + 1]; i < mlp_off[2 * l + 2]; i++)
            w[i] = 0.1f * rng_uniform(&s);
    }
}

/* Inputs uniform in [-1, 1), targets from a fixed teacher 32-16-8 with tanh. */
static void data_make(demo_t *d)
{
    enum { IN = 32, HID = MLP_TEACHER, OUT = 8 };
    float w1[HID][IN], w2[OUT][HID], h[HID];
    uint64_t s = 2;
    for (int o = 0; o < HID; o++)
        for (int i = 0; i < IN; i++)
            w1[o][i] = 1.5f / sqrtf((float)IN) * rng_uniform(&s);
    for (int o = 0; o < OUT; o++)
        for (int i = 0; i < HID; i++)
            w2[o][i] = 1.5f / sqrtf((float)HID) * rng_uniform(&s);
    d->x = xcalloc((size_t)MLP_NDATA * IN, sizeof(float));
    d->y = xcalloc((size_t)MLP_NDATA * OUT, sizeof(float));
    for (int n = 0; n < MLP_NDATA; n++) {
        float *x = d->x + (size_t)n * IN, *y = d->y + (size_t)n * OUT;
        for (int i = 0; i < IN; i++)
            x[i] = rng_uniform(&s);
        for (int o = 0; o < HID; o++) {
            float z = 0;
            for (int i = 0; i < IN; i++)
                z += w1[o][i] * x[i];
            h[o] = tanhf(z);
        }
        for (int o = 0; o < OUT; o++) {
            y[o] = 0;
            for (int i = 0; i < HID; i++)
                y[o] += w2[o][i] * h[i];
        }
    }
}

/* First sample of rank r's slice of the global batch of `step`. */
static size_t data_slice(const demo_t *d, int step, int r)
{
    size_t batch = (size_t)MLP_SLICE * (size_t)d->nranks;
    return ((size_t)step * batch + (size_t)r * MLP_SLICE) % MLP_NDATA;
}

static int mlp_tensor_of(size_t e)
{
    int i = 0;
    while (e >= mlp_off[i + 1])
        i++;
    return i;
}

typedef void (*mlp_ready_fn)(demo_t *d, int tensor);

/* y_l = act(W_l y_{l-1} + b_l) for every sample; tanh except on the last layer. */
static void mlp_forward(const float *w, const float *x, int n,
                        float act[MLP_NLAYERS + 1][MLP_SLICE][MLP_MAXDIM])
{
    for (int s = 0; s < n; s++)
        memcpy(act[0][s], x + (size_t)s * (size_t)mlp_dims[0], sizeof(float) * (size_t)mlp_dims[0]);
    for (int l = 0; l < MLP_NLAYERS; l++) {
        const float *W = w + mlp_off[2 * l], *b = w + mlp_off[2 * l + 1];
        int in = mlp_dims[l], out = mlp_dims[l + 1];
        for (int s = 0; s < n; s++)
            for (int o = 0; o < out; o++) {
                float z = b[o];
                for (int i = 0; i < in; i++)
                    z += W[o * in + i] * act[l][s][i];
                act[l + 1][s][o] = l < MLP_NLAYERS - 1 ? tanhf(z) : z;
            }
    }
}

/*
 * The mean over n samples (x, y) of the loss 1/2 |f(x) - y|^2, returned, and its gradient
 * in g. Backward goes from the last layer to the first; ready(d, i), unless NULL, is called
 * as soon as tensor i's gradient is complete (W before b: tensors 4 5 2 3 0 1).
 */
static double mlp_grad(demo_t *d, const float *w, const float *x, const float *y, int n,
                       float *g, mlp_ready_fn ready)
{
    float act[MLP_NLAYERS + 1][MLP_SLICE][MLP_MAXDIM], delta[2][MLP_SLICE][MLP_MAXDIM];
    double loss = 0;
    int out = mlp_dims[MLP_NLAYERS], cur = 0;
    mlp_forward(w, x, n, act);
    for (int s = 0; s < n; s++)
        for (int o = 0; o < out; o++) {
            float e = act[MLP_NLAYERS][s][o] - y[(size_t)s * (size_t)out + (size_t)o];
            loss += 0.5 * (double)e * e / n;
            delta[cur][s][o] = e / (float)n;
        }
    for (int l = MLP_NLAYERS - 1; l >= 0; l--) {
        const float *W = w + mlp_off[2 * l];
        float *gW = g + mlp_off[2 * l], *gb = g + mlp_off[2 * l + 1];
        int in = mlp_dims[l], o_n = mlp_dims[l + 1];
        for (int o = 0; o < o_n; o++) {
            for (int i = 0; i < in; i++) {
                float sum = 0;
                for (int s = 0; s < n; s++)
                    sum += delta[cur][s][o] * act[l][s][i];
                gW[o * in + i] = sum;
            }
            float sum = 0;
            for (int s = 0; s < n; s++)
                sum += delta[cur][s][o];
            gb[o] = sum;
        }
        if (ready != NULL) {
            ready(d, 2 * l);
            ready(d, 2 * l + 1);
        }
        for (int s = 0; l > 0 && s < n; s++)
            for (int i = 0; i < in; i++) {
                float sum = 0;
                for (int o = 0; o < o_n; o++)
                    sum += W[o * in + i] * delta[cur][s][o];
                delta[!cur][s][i] = sum * (1.0f - act[l][s][i] * act[l][s][i]);
            }
        cur = !cur;
    }
    return loss;
}

/* --device: copies between the host arrays the model works on and the plan's buffers. */
static float *dev_twin(const demo_t *d, float *host, size_t n)
{
    void *p = NULL;
    if (!d->dev)
        return host;
    if (perf_gpu_alloc(n * sizeof(float), &p) != 0)
        exit(2);
    return p;
}

static void to_dev(const demo_t *d, float *dev, const float *host, size_t n)
{
    if (d->dev && n > 0 && perf_gpu_to_device(dev, host, n * sizeof(float)) != 0)
        exit(2);
}

static void to_host(const demo_t *d, float *host, const float *dev, size_t n)
{
    if (d->dev && n > 0 && perf_gpu_to_host(host, dev, n * sizeof(float)) != 0)
        exit(2);
}

static void demo_ready(demo_t *d, int tensor)
{
    size_t off = mlp_off[tensor], n = mlp_off[tensor + 1] - off;
    to_dev(d, d->g_d + off, d->g + off, n);
    CHECK(d, braidPlanReady(d->plan, tensor, d->stream));
}

static void sgd(float *w, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        w[i] -= MLP_LR * g[i];
}

/* ---- the plan ---- */

static void plan_print(demo_t *d, const char *when)
{
    CHECK(d, braidPlanBucketCount(d->plan, &d->nbuckets));
    if (d->rank != 0)
        return;
    printf("mlp_demo: %s: %d bucket%s:", when, d->nbuckets, d->nbuckets == 1 ? "" : "s");
    for (int b = 0; b < d->nbuckets; b++) {
        int nt;
        const int *t;
        size_t bytes;
        CHECK(d, braidPlanBucketInfo(d->plan, b, &nt, &t, &bytes));
        printf(" [");
        for (int i = 0; i < nt; i++)
            printf(i ? " %s" : "%s", mlp_names[t[i]]);
        printf("] %zu B%s", bytes, b + 1 < d->nbuckets ? "," : "\n");
    }
}

static void plan_make(demo_t *d)
{
    braidTensor_t t[MLP_NTENSORS];
    braidPlanConfig_t cfg = BRAID_PLAN_CONFIG_INITIALIZER;
    for (int i = 0; i < MLP_NTENSORS; i++)
        t[i] = (braidTensor_t){ .grad = d->g_d + mlp_off[i], .out = NULL,
                                .param = d->fsdp ? d->w_d + mlp_off[i] : NULL,
                                .count = mlp_off[i + 1] - mlp_off[i], .type = ncclFloat32 };
    cfg.pattern = d->fsdp ? braidPatternShard : braidPatternAllReduce;
    cfg.bucketBytes = d->bucket;
    cfg.padMultiple = d->fsdp ? (size_t)d->nranks : 1;   /* shards in units of n elements */
    cfg.wireType = d->bf16 ? ncclBfloat16 : ncclFloat32;
    cfg.accType = ncclFloat32;
    cfg.outType = ncclFloat32;
    cfg.op = ncclAvg;
    CHECK(d, braidPlanCreate(d->comm, t, MLP_NTENSORS, &cfg, &d->plan));
    plan_print(d, "plan");
}

/* FSDP: every rank's full parameters from the shards (exact: fp32 all the way). */
static void shard_assemble(demo_t *d, float *w_full)
{
    size_t *displs = xcalloc((size_t)d->nranks, sizeof(size_t)), total = 0;
    for (int r = 0; r < d->nranks; r++) {
        displs[r] = total;
        total += d->shard_counts[r];
    }
    float *all = xcalloc(total, sizeof(float));
    CHECK(d, braidAllGatherV(d->wshard, d->shard_counts[d->rank], all, d->shard_counts,
                             displs, ncclFloat32, d->comm, NULL));
    for (size_t e = 0; e < MLP_NPARAMS; e++)
        w_full[e] = all[displs[d->src_rank[e]] + d->src_index[e]];
    free(all);
    free(displs);
}

static void gather_all(demo_t *d)
{
    to_dev(d, d->wshard_d, d->wshard, d->shard_counts[d->rank]);
    for (int b = 0; b < d->nbuckets; b++)
        CHECK(d, braidPlanGather(d->plan, b, d->stream));
    CHECK(d, braidPlanWait(d->plan, -1));
    to_host(d, d->w, d->w_d, MLP_NPARAMS);
}

/*
 * Where every parameter element lives in the shards, by braid.h's rule (braidPlanShardCount):
 * bucket by bucket, the bucket's flat elements (its tensors in braidPlanBucketInfo's order,
 * then padding) are split in units of padMultiple, rank r taking units / n of them, plus
 * one when r < units % n.
 */
static void shard_layout(demo_t *d)
{
    size_t pad = (size_t)d->nranks, ws = d->bf16 ? 2 : 4, n = (size_t)d->nranks;
    size_t *off = xcalloc(n, sizeof(size_t));     /* each rank's shard so far */
    for (int b = 0; b < d->nbuckets; b++) {
        int nt;
        const int *t;
        size_t bytes, f = 0, r = 0, first = 0;
        CHECK(d, braidPlanBucketInfo(d->plan, b, &nt, &t, &bytes));
        size_t units = bytes / ws / pad, base = units / n, extra = units % n;
#define SHARD_LEN(_r) ((base + ((_r) < extra ? 1 : 0)) * pad)
        for (int k = 0; k < nt; k++)
            for (size_t e = mlp_off[t[k]]; e < mlp_off[t[k] + 1]; e++, f++) {
                while (f >= first + SHARD_LEN(r))  /* flat order: the owners come in order */
                    first += SHARD_LEN(r++);
                d->src_rank[e] = (int)r;
                d->src_index[e] = off[r] + f - first;
            }
        for (r = 0; r < n; r++)
            off[r] += SHARD_LEN(r);
#undef SHARD_LEN
    }
    free(off);
}

/*
 * FSDP: set up the shard buffers and fill the parameter shard from w_full (shard_layout
 * says where each parameter element goes).
 */
static void shard_setup(demo_t *d, const float *w_full)
{
    size_t n;
    uint64_t mine, *all = xcalloc((size_t)d->nranks, sizeof(uint64_t));
    CHECK(d, braidPlanShardCount(d->plan, &n));
    mine = n;
    CHECK(d, ncclAllGather(&mine, all, 1, ncclUint64, d->comm, NULL));
    d->wshard = xcalloc(n, sizeof(float));
    d->gshard = xcalloc(n, sizeof(float));
    d->wshard_d = dev_twin(d, d->wshard, n);
    d->gshard_d = dev_twin(d, d->gshard, n);
    for (int r = 0; r < d->nranks; r++)
        d->shard_counts[r] = (size_t)all[r];
    free(all);
    CHECK(d, braidPlanSetShards(d->plan, d->gshard_d, d->wshard_d));
    shard_layout(d);
    for (size_t e = 0; e < MLP_NPARAMS; e++)
        if (d->src_rank[e] == d->rank)
            d->wshard[d->src_index[e]] = w_full[e];
}

/* ---- the check (rank 0) ---- */

/*
 * The exact mean gradient over the global batch of `step` at weights w: every slice's mean
 * gradient by the ranks' own code, averaged in fp32; mean_r |g_r| into absmean unless NULL.
 * Returns the mean loss.
 */
static double ref_grad(demo_t *d, int step, const float *w, float *mean, float *absmean)
{
    size_t np = MLP_NPARAMS, in = (size_t)mlp_dims[0], out = (size_t)mlp_dims[MLP_NLAYERS];
    double loss = 0;
    memset(mean, 0, np * sizeof(float));
    if (absmean != NULL)
        memset(absmean, 0, np * sizeof(float));
    for (int r = 0; r < d->nranks; r++) {
        size_t s0 = data_slice(d, step, r);
        loss += mlp_grad(d, w, d->x + s0 * in, d->y + s0 * out, MLP_SLICE, d->gtmp, NULL);
        for (size_t e = 0; e < np; e++) {
            mean[e] += d->gtmp[e];
            if (absmean != NULL)
                absmean[e] += fabsf(d->gtmp[e]);
        }
    }
    for (size_t e = 0; e < np; e++) {
        mean[e] /= (float)d->nranks;
        if (absmean != NULL)
            absmean[e] /= (float)d->nranks;
    }
    return loss / d->nranks;
}

/* The average this rank received for parameter element e; 0 where another rank holds it. */
static int got_avg(const demo_t *d, size_t e, float *v_p)
{
    if (!d->fsdp) {
        *v_p = d->g[e];
        return 1;
    }
    if (d->src_rank[e] != d->rank)
        return 0;
    *v_p = d->gshard[d->src_index[e]];
    return 1;
}

/*
 * After the wait of `step`: every average received against the exact mean at the weights
 * the ranks used (w_used), within the rounding bound; then the reference's own step, and
 * the step's share of the final tolerance. Returns the loss at w_used.
 */
static double check_step(demo_t *d, int step, const float *w_used, double *ref_loss_p)
{
    size_t np = MLP_NPARAMS;
    double c = 1.125 * ((d->nranks + 1) * (d->bf16 ? U_BF16 : U_FP32) +
                        2.0 * (d->nranks + 2) * U_FP32);
    double loss = ref_grad(d, step, w_used, d->gmean, d->absmean);
    *ref_loss_p = ref_grad(d, step, d->wref, d->gref, NULL);
    for (size_t e = 0; e < np; e++) {
        double bound = c * d->absmean[e], diff, gm = d->gmean[e], gr = d->gref[e];
        float got;
        d->tol_wire[e] += MLP_LR * bound;
        d->tol_drift[e] += MLP_LR * fabs(gm - gr);
        d->tol_update[e] += U_FP32 * (1.01 * fabs((double)w_used[e]) + fabs((double)d->wref[e]) +
                                      2 * MLP_LR * (fabs(gm) + bound + fabs(gr)));
        if (!got_avg(d, e, &got) || (diff = fabs((double)got - d->gmean[e])) == 0)
            continue;
        d->worst = fmax(d->worst, bound > 0 ? diff / bound : INFINITY);
        if (diff > bound && d->bad_steps++ < 5)
            fprintf(stderr, "mlp_demo: step %d: %s element %zu: average %.9g, exact mean "
                    "%.9g, bound %.3g\n", step + 1, mlp_names[mlp_tensor_of(e)],
                    e - mlp_off[mlp_tensor_of(e)], (double)got, (double)d->gmean[e], bound);
    }
    sgd(d->wref, d->gref, np);
    return loss;
}

/* Rank 0's verdict on the final weights, said in one line; returns 1 if they pass. */
static int check_final(demo_t *d, const float *w_final, double spread)
{
    double diff = 0, tol = 0;
    size_t at = 0, bad = 0;
    for (size_t e = 0; e < MLP_NPARAMS; e++) {
        double de = fabs((double)w_final[e] - d->wref[e]);
        double te = d->tol_wire[e] + d->tol_drift[e] + d->tol_update[e];
        if (de > te && bad++ < 5)
            fprintf(stderr, "mlp_demo: %s element %zu: %.9g, reference %.9g, tol %.3g\n",
                    mlp_names[mlp_tensor_of(e)], e - mlp_off[mlp_tensor_of(e)],
                    (double)w_final[e], (double)d->wref[e], te);
        diff = fmax(diff, de);
        if (te > tol)
            tol = te, at = e;
    }
    int ok = d->bad_steps == 0 && bad == 0 && spread <= tol;
    printf("mlp_demo: every step: max |average - exact mean| / bound = %.3g%s\n", d->worst,
           d->bad_steps ? " (FAIL)" : "");
    printf("mlp_demo: largest tol = wire rounding %.2e + drift %.2e + fp32 updates %.2e "
           "(%s element %zu)%s\n", d->tol_wire[at], d->tol_drift[at], d->tol_update[at],
           mlp_names[mlp_tensor_of(at)], at - mlp_off[mlp_tensor_of(at)],
           bad ? "; weights beyond their own tol (FAIL)" : "");
    if (!d->fsdp)
        printf("mlp_demo: replicas differ by %.2e at most\n", spread);
    printf("mlp_demo: %s wire=%s ranks=%d steps=%d buckets=%d max|w-ref|=%.1e tol=%.1e %s\n",
           d->fsdp ? "fsdp" : "ddp", d->bf16 ? "bf16" : "fp32", d->nranks, d->steps,
           d->nbuckets, diff, tol, ok ? "OK" : "FAIL");
    return ok;
}

/* ---- the run ---- */

static void demo_train(demo_t *d)
{
    size_t np = MLP_NPARAMS, in = (size_t)mlp_dims[0], out = (size_t)mlp_dims[MLP_NLAYERS];
    for (int t = 0; t < d->steps; t++) {
        size_t s0 = data_slice(d, t, d->rank);
        if (d->fsdp)
            gather_all(d);
        mlp_grad(d, d->w, d->x + s0 * in, d->y + s0 * out, MLP_SLICE, d->g, demo_ready);
        CHECK(d, braidPlanWait(d->plan, -1));
        if (d->fsdp)
            to_host(d, d->gshard, d->gshard_d, d->shard_counts[d->rank]);
        else
            to_host(d, d->g, d->g_d, np);
        if (d->rank == 0) {
            double ref_loss, loss = check_step(d, t, d->w, &ref_loss);
            if (t == 0 || (t + 1) % 10 == 0 || t + 1 == d->steps)
                printf("step %3d  loss %.6f  (reference %.6f)\n", t + 1, loss, ref_loss);
        }
        if (d->fsdp)
            sgd(d->wshard, d->gshard, d->shard_counts[d->rank]);
        else
            sgd(d->w, d->g, np);
        if (t == 0 && d->rebuild) {   /* DDP: buckets in rank 0's order of marks */
            CHECK(d, braidPlanRebuild(d->plan));
            plan_print(d, "rebuilt in rank 0's order of marks");
        }
    }
}

/* DDP: the largest difference between the replicas (0: they agree bit for bit). */
static double replica_spread(demo_t *d)
{
    size_t np = MLP_NPARAMS;
    float *hi = xcalloc(np, sizeof(float)), *lo = xcalloc(np, sizeof(float));
    double spread = 0;
    CHECK(d, ncclAllReduce(d->w, hi, np, ncclFloat32, ncclMax, d->comm, NULL));
    CHECK(d, ncclAllReduce(d->w, lo, np, ncclFloat32, ncclMin, d->comm, NULL));
    for (size_t e = 0; e < np; e++)
        spread = fmax(spread, (double)hi[e] - lo[e]);
    free(hi);
    free(lo);
    return spread;
}

/* ---- setup ---- */

static void usage(FILE *f)
{
    fprintf(f, "usage: mlp_demo [--pattern ddp|fsdp] [--wire fp32|bf16] [--steps N] "
            "[--bucket BYTES] [--rebuild]\n"
            "                [--device]\n"
            "  start it with braidrun: braidrun -n 4 mlp_demo --wire bf16\n"
            "  --pattern   ddp: all-reduce of the gradients (default); fsdp: sharded\n"
            "  --wire      what travels: fp32 (default) or bf16; sums in fp32\n"
            "  --steps     SGD steps, 1 to 10000 (default 30)\n"
            "  --bucket    the plan's bucketBytes (K, M suffixes; default 4K; 0: automatic)\n"
            "  --rebuild   ddp: braidPlanRebuild after the first step\n"
            "  --device    the plan's buffers in device memory: CUDA's or HIP's, as\n"
            "              BRAID_DEVICE says (a GPU, or braid's emulated runtimes)\n");
}

static int parse_size(const char *s, size_t *v_p)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || s[0] == '-')
        return -1;
    if (*end == 'K' || *end == 'k')
        v <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        v <<= 20, end++;
    if (*end != '\0')
        return -1;
    *v_p = (size_t)v;
    return 0;
}

/* 0: go on; otherwise the exit status (usage printed). */
static int demo_args(demo_t *d, int argc, char **argv)
{
    size_t v;
    d->steps = 30;
    d->bucket = 4096;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            if (d->rank == 0)
                usage(stdout);
            return -1;
        } else if (strcmp(a, "--rebuild") == 0) {
            d->rebuild = 1;
            continue;
        } else if (strcmp(a, "--device") == 0) {
            d->dev = 1;
            continue;
        } else if (val == NULL) {
            bad = 1;
        } else if (strcmp(a, "--pattern") == 0) {
            bad = strcmp(val, "ddp") != 0 && strcmp(val, "fsdp") != 0;
            d->fsdp = strcmp(val, "fsdp") == 0;
        } else if (strcmp(a, "--wire") == 0) {
            bad = strcmp(val, "fp32") != 0 && strcmp(val, "bf16") != 0;
            d->bf16 = strcmp(val, "bf16") == 0;
        } else if (strcmp(a, "--steps") == 0) {
            bad = parse_size(val, &v) != 0 || v < 1 || v > 10000;
            d->steps = (int)v;
        } else if (strcmp(a, "--bucket") == 0) {
            bad = parse_size(val, &d->bucket) != 0;
        } else {
            bad = 1;
        }
        if (bad) {
            if (d->rank == 0) {
                fprintf(stderr, "mlp_demo: bad argument: %s%s%s\n", a, val ? " " : "",
                        val ? val : "");
                usage(stderr);
            }
            return 2;
        }
        i++;
    }
    return 0;
}

/* This rank and the rank count, from braidrun (RANK, WORLD_SIZE); alone: 0 of 1. */
static int demo_env(demo_t *d)
{
    const char *r = getenv("RANK"), *n = getenv("WORLD_SIZE"), *id = getenv("NCCL_COMM_ID");
    d->rank = 0;
    d->nranks = 1;
    if (r != NULL && n != NULL) {
        d->rank = atoi(r);
        d->nranks = atoi(n);
    }
    if (d->nranks < 1 || d->rank < 0 || d->rank >= d->nranks) {
        fprintf(stderr, "mlp_demo: RANK=%s WORLD_SIZE=%s: not a rank of a job\n", r, n);
        return 2;
    }
    if (d->nranks > 1 && (id == NULL || id[0] == '\0')) {
        fprintf(stderr, "mlp_demo: rank %d of %d but NCCL_COMM_ID is not set: start it with "
                "braidrun (braidrun -n 4 mlp_demo)\n", d->rank, d->nranks);
        return 2;
    }
    return 0;
}

static void demo_alloc(demo_t *d)
{
    size_t np = MLP_NPARAMS;
    d->w = xcalloc(np, sizeof(float));
    d->g = xcalloc(np, sizeof(float));
    d->w_d = dev_twin(d, d->w, np);
    d->g_d = dev_twin(d, d->g, np);
    d->shard_counts = xcalloc((size_t)d->nranks, sizeof(size_t));
    d->src_index = xcalloc(np, sizeof(size_t));
    d->src_rank = xcalloc(np, sizeof(int));
    d->wref = xcalloc(np, sizeof(float));
    d->gref = xcalloc(np, sizeof(float));
    d->gmean = xcalloc(np, sizeof(float));
    d->absmean = xcalloc(np, sizeof(float));
    d->gtmp = xcalloc(np, sizeof(float));
    d->tol_wire = xcalloc(np, sizeof(double));
    d->tol_drift = xcalloc(np, sizeof(double));
    d->tol_update = xcalloc(np, sizeof(double));
}

static void demo_free(demo_t *d)
{
    float *f[] = { d->x, d->y, d->w, d->g, d->wshard, d->gshard, d->wref, d->gref,
                   d->gmean, d->absmean, d->gtmp };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        free(f[i]);
    free(d->shard_counts);
    free(d->src_index);
    free(d->src_rank);
    free(d->tol_wire);
    free(d->tol_drift);
    free(d->tol_update);
}

int main(int argc, char **argv)
{
    demo_t demo = { 0 }, *d = &demo;
    ncclUniqueId id;
    int st, ok = 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((st = demo_env(d)) != 0 || (st = demo_args(d, argc, argv)) != 0)
        return st < 0 ? 0 : st;
    if (d->fsdp && d->rebuild) {
        if (d->rank == 0)
            fprintf(stderr, "mlp_demo: --pattern fsdp: --rebuild is for ddp (braidPlanRebuild "
                    "rebuilds DDP plans only: a sharded plan's shards would move under the "
                    "parameters)\n");
        return 2;
    }
    char why[256] = "cannot use device 0 (the driver said why above)";
    int ndev;
    if (d->dev && (perf_gpu_open("mlp_demo", &ndev, why, sizeof(why)) != 0 ||
                   perf_gpu_bind(0) != 0 || perf_gpu_stream_create(0, &d->stream) != 0)) {
        fprintf(stderr, "mlp_demo: --device: %s\n", why);
        return 2;
    }
    mlp_layout();
    data_make(d);
    demo_alloc(d);
    mlp_init(d->w);
    memcpy(d->wref, d->w, MLP_NPARAMS * sizeof(float));
    CHECK(d, ncclGetUniqueId(&id));   /* the same on every rank: braidrun sets NCCL_COMM_ID */
    CHECK(d, ncclCommInitRank(&d->comm, d->nranks, id, d->rank));
    if (d->rank == 0)
        printf("mlp_demo: MLP 32-64-64-8 (%zu parameters), tanh, SGD lr %g, %d steps, global "
               "batch %d = %d ranks x %d, %s, wire %s, bucketBytes %zu, %s buffers\n",
               MLP_NPARAMS, (double)MLP_LR, d->steps, MLP_SLICE * d->nranks, d->nranks,
               MLP_SLICE, d->fsdp ? "fsdp" : "ddp", d->bf16 ? "bf16" : "fp32", d->bucket,
               d->dev ? "device" : "host");
    plan_make(d);
    if (d->fsdp)
        shard_setup(d, d->wref);   /* the initial weights */
    demo_train(d);
    double spread = d->fsdp ? 0 : replica_spread(d);
    if (d->fsdp)
        shard_assemble(d, d->w);
    if (d->rank == 0)
        ok = check_final(d, d->w, spread);
    CHECK(d, ncclBroadcast(&ok, &ok, 1, ncclInt32, 0, d->comm, NULL));
    CHECK(d, braidPlanDestroy(d->plan));
    CHECK(d, ncclCommDestroy(d->comm));
    demo_free(d);
    return ok ? 0 : 1;
}
