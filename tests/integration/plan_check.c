/*
 * plan_check: bucket plans (braid.h's braidPlan*) on real processes, through the public API.
 * Start it with braidrun (-n 2..8; HSDP needs an even count):
 *
 *   ddp       all-reduce into the gradients, wires fp32 / bf16 / fp16, mixed tensor types,
 *             two iterations with marks in different orders, avg with pre/post factors
 *             into fp32 out tensors that accumulate
 *   order     a bucket waits for its predecessors; flush launches the unmarked rest
 *   rebuild   buckets follow rank 0's order of marks after braidPlanRebuild
 *   fsdp      reduce-scatter into gradient shards, all-gather from parameter shards, even
 *             and uneven shards (braidReduceScatterV / braidAllGatherV underneath)
 *   hsdp      shard groups of 2 ranks, replicas across them
 *   errors    bad arguments and configs, marks twice and out of range, destroy in flight,
 *             plans that differ between ranks (named by rank and tensor)
 *
 * With -d (a CUDA driver on LD_LIBRARY_PATH: braid's emulated one in CI) the tensors and
 * shards are device memory: every value is copied to the device on a stream before the
 * tensor is marked ready on that stream, and every check reads the device's values back
 * (after braidPlanWait, or in order's check that a bucket has not run); -d runs ddp,
 * order, rebuild and fsdp, and the errors of device plans (mixed memory, two streams in one
 * bucket).
 *
 * Test values are small integers, so every sum is exact in every wire type and every
 * result is compared exactly; guard elements around every tensor must stay untouched.
 * Prints "plan_check: N passed, M failed" and exits 1 on any failure.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "braid.h"
#include "tests/common/cudrv.h"

#define GUARD 4
#define GUARD_BITS 0xa5u

static int g_rank, g_n, g_pass, g_fail;
static ncclComm_t g_comm;
static int g_dev;               /* -d: tensors in device memory */
static cudrv_t g_cu;
static CUstream g_stream;       /* where device values are copied; tensors are marked on it */

#define CHECK(_c, ...)                                                                        \
    do {                                                                                      \
        if (_c) {                                                                             \
            g_pass++;                                                                         \
        } else {                                                                              \
            g_fail++;                                                                         \
            fprintf(stderr, "plan_check: rank %d: FAIL %s:%d: ", g_rank, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
        }                                                                                     \
    } while (0)

#define NCCL(_call)                                                                           \
    do {                                                                                      \
        ncclResult_t r_ = (_call);                                                            \
        if (r_ != ncclSuccess) {                                                              \
            fprintf(stderr, "plan_check: rank %d: %s failed: %s (%s)\n", g_rank, #_call,       \
                    ncclGetErrorString(r_), ncclGetLastError(NULL));                          \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

/* ---- values of any float type ------------------------------------------------------------ */

static size_t tsize(ncclDataType_t t)
{
    return t == ncclFloat64 ? 8 : t == ncclFloat32 ? 4 : 2;
}

static uint16_t to_half_bits(float f, int bf16)
{
    /* exact small values only (integers and quarters below 2^8): no rounding needed */
    uint32_t u;
    memcpy(&u, &f, 4);
    if (bf16)
        return (uint16_t)(u >> 16);
    if (f == 0.0f)
        return (uint16_t)((u >> 16) & 0x8000u);
    uint32_t s = (u >> 16) & 0x8000u, e = ((u >> 23) & 0xffu) - 127 + 15, m = (u >> 13) & 0x3ffu;
    return (uint16_t)(s | e << 10 | m);
}

static double from_half_bits(uint16_t h, int bf16)
{
    if (bf16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static void put(ncclDataType_t t, void *p, size_t i, double v)
{
    switch (t) {
    case ncclFloat64: ((double *)p)[i] = v; break;
    case ncclFloat32: ((float *)p)[i] = (float)v; break;
    default: ((uint16_t *)p)[i] = to_half_bits((float)v, t == ncclBfloat16); break;
    }
}

static double get(ncclDataType_t t, const void *p, size_t i)
{
    switch (t) {
    case ncclFloat64: return ((const double *)p)[i];
    case ncclFloat32: return ((const float *)p)[i];
    default: return from_half_bits(((const uint16_t *)p)[i], t == ncclBfloat16);
    }
}

/* Rank r's gradient value: a small integer (sums of 8 ranks stay below 2^7). */
static double val(int r, int t, size_t i, int salt)
{
    return (double)((int)(((size_t)(r + 1) * (size_t)(t + 3) + i * 5 + (size_t)salt) % 17) - 8);
}

static double val_sum(int t, size_t i, int salt)
{
    double s = 0;
    for (int r = 0; r < g_n; r++)
        s += val(r, t, i, salt);
    return s;
}

/* ---- tensors with guards ------------------------------------------------------------------ */

/* -d: a device copy of n bytes at host address h (NULL: none; the host address itself
 * without -d). Device memory is never freed while ranks run (freeing synchronises the
 * device); the process's exit releases it. */
static void *twin(const void *h, size_t n)
{
    CUdeviceptr d;
    if (!g_dev || h == NULL)
        return (void *)h;
    CUDRV(g_cu.alloc(&d, n));
    return (void *)(uintptr_t)d;
}

static void push(const void *h, void *d, size_t n)
{
    if (g_dev && h != NULL)
        CUDRV(g_cu.h2d((CUdeviceptr)(uintptr_t)d, h, n, g_stream));
}

static void pull(void *h, const void *d, size_t n)
{
    if (g_dev && h != NULL) {
        CUDRV(g_cu.d2h(h, (CUdeviceptr)(uintptr_t)d, n, g_stream));
        CUDRV(g_cu.stream_sync(g_stream));
    }
}

typedef struct {
    int n;
    braidTensor_t *t;       /* host memory: what the test fills and checks */
    braidTensor_t *d;       /* what the plan gets: t, or (-d) the device twins */
    char **mem[3];          /* grad, out, param: the allocations, guards included */
    char **dmem[3];         /* -d: their device twins */
} tset_t;

static size_t tsize(ncclDataType_t t);

/* Host allocation k of tensor i: its bytes with guards. */
static size_t tset_bytes(const tset_t *s, int k, int i)
{
    return (s->t[i].count + 2 * GUARD) * tsize(k == 1 ? ncclFloat32 : s->t[i].type);
}

/* Copy every buffer (guards included) to the device, on g_stream; back, and wait. */
static void tset_push(const tset_t *s)
{
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < s->n; i++)
            push(s->mem[k][i], s->dmem[k][i], tset_bytes(s, k, i));
}

static void tset_pull(const tset_t *s)
{
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < s->n; i++)
            pull(s->mem[k][i], s->dmem[k][i], tset_bytes(s, k, i));
}

static const ncclDataType_t mix[] = { ncclFloat32, ncclBfloat16, ncclFloat16, ncclFloat32,
                                      ncclFloat64 };

static void *guarded(ncclDataType_t t, size_t count, char **mem_p)
{
    size_t es = tsize(t);
    char *m = malloc((count + 2 * GUARD) * es);
    memset(m, GUARD_BITS, (count + 2 * GUARD) * es);
    *mem_p = m;
    return m + GUARD * es;
}

static int guards_ok(const void *p, ncclDataType_t t, size_t count)
{
    size_t es = tsize(t);
    const unsigned char *a = (const unsigned char *)p - GUARD * es;
    const unsigned char *b = (const unsigned char *)p + count * es;
    for (size_t k = 0; k < GUARD * es; k++)
        if (a[k] != GUARD_BITS || b[k] != GUARD_BITS)
            return 0;
    return 1;
}

/* n tensors of mixed types and sizes (one of 3000 elements in ten), counts rounded up to
 * a multiple of g_mult; out: fp32 outs, param: params of the tensor's type. */
static size_t g_mult = 1;

static void tset_make(tset_t *s, int n, int types, int out, int param)
{
    s->n = n;
    s->t = calloc((size_t)n, sizeof(braidTensor_t));
    s->d = calloc((size_t)n, sizeof(braidTensor_t));
    for (int k = 0; k < 3; k++) {
        s->mem[k] = calloc((size_t)n, sizeof(char *));
        s->dmem[k] = calloc((size_t)n, sizeof(char *));
    }
    for (int i = 0; i < n; i++) {
        braidTensor_t *t = &s->t[i];
        t->count = i % 10 == 3 ? 3000 : 1 + (size_t)(i * 37 % 211);
        t->count = (t->count + g_mult - 1) / g_mult * g_mult;
        t->type = types ? mix[i % 5] : ncclFloat32;
        t->grad = guarded(t->type, t->count, &s->mem[0][i]);
        if (out)
            t->out = guarded(ncclFloat32, t->count, &s->mem[1][i]);
        if (param)
            t->param = guarded(t->type, t->count, &s->mem[2][i]);
        s->d[i] = *t;
        void **dp[3] = { &s->d[i].grad, &s->d[i].out, &s->d[i].param };
        for (int k = 0; k < 3; k++) {
            s->dmem[k][i] = twin(s->mem[k][i], s->mem[k][i] ? tset_bytes(s, k, i) : 0);
            if (*dp[k] != NULL)
                *dp[k] = s->dmem[k][i] + GUARD * tsize(k == 1 ? ncclFloat32 : t->type);
        }
    }
    tset_push(s);
}

static void tset_free(tset_t *s)
{
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < s->n; i++)
            free(s->mem[k][i]);
        free(s->mem[k]);
        free(s->dmem[k]);
    }
    free(s->t);
    free(s->d);
}

static void fill_grads(tset_t *s, int salt)
{
    for (int i = 0; i < s->n; i++)
        for (size_t e = 0; e < s->t[i].count; e++)
            put(s->t[i].type, s->t[i].grad, e, val(g_rank, i, e, salt));
    tset_push(s);
}

/* Every element of the tensors' `which` buffer (0 grad, 1 out) against want(t, i). */
static int check_all(const tset_t *s, int which, double (*want)(int, size_t, void *),
                     void *arg, const char *what)
{
    int bad = 0;
    tset_pull(s);
    for (int t = 0; t < s->n && bad < 3; t++) {
        void *p = which == 0 ? s->t[t].grad : which == 1 ? s->t[t].out : s->t[t].param;
        ncclDataType_t ty = which == 1 ? ncclFloat32 : s->t[t].type;
        if (!guards_ok(p, ty, s->t[t].count)) {
            CHECK(0, "%s: tensor %d: a guard element was written", what, t);
            bad++;
        }
        for (size_t e = 0; e < s->t[t].count; e++) {
            double got = get(ty, p, e), exp = want(t, e, arg);
            if (got != exp) {
                CHECK(0, "%s: tensor %d element %zu: got %g, expected %g", what, t, e, got, exp);
                bad++;
                break;
            }
        }
    }
    return bad == 0;
}

static double want_sum(int t, size_t i, void *arg)
{
    return val_sum(t, i, *(int *)arg);
}

static void mark_backward(braidPlan_t plan, int n)
{
    for (int t = n - 1; t >= 0; t--)
        NCCL(braidPlanReady(plan, t, g_stream));
}

/* ---- ddp ---------------------------------------------------------------------------------- */

static void test_ddp_wire(ncclDataType_t wire, size_t cap)
{
    tset_t s;
    tset_make(&s, 40, 1, 0, 0);
    braidPlanConfig_t cfg = BRAID_PLAN_CONFIG_INITIALIZER;
    cfg.wireType = wire;
    cfg.bucketBytes = cap;
    cfg.firstBucketBytes = cap / 4;
    cfg.padMultiple = 8;
    braidPlan_t plan;
    NCCL(braidPlanCreate(g_comm, s.d, s.n, &cfg, &plan));
    int nb;
    NCCL(braidPlanBucketCount(plan, &nb));
    CHECK(nb >= 3, "wire %d cap %zu: only %d buckets", (int)wire, cap, nb);
    for (int it = 0; it < 2; it++) {
        int salt = it * 3 + (int)wire;
        fill_grads(&s, salt);
        if (it == 0) {
            mark_backward(plan, s.n);
        } else {    /* another order on every rank: launches still follow bucket order */
            for (int k = 0; k < s.n; k++)
                NCCL(braidPlanReady(plan, (k * 7 + g_rank) % s.n, g_stream));
        }
        NCCL(braidPlanWait(plan, -1));
        check_all(&s, 0, want_sum, &salt, "ddp sum");
    }
    NCCL(braidPlanDestroy(plan));
    tset_free(&s);
}

typedef struct { int salt; } avg_arg_t;

static double want_avg_acc(int t, size_t i, void *arg)
{
    return 1.0 + val_sum(t, i, ((avg_arg_t *)arg)->salt);
}

/* ncclAvg with preDivide 2 and postDivide 0.5 (a net 1/n), into fp32 outs that accumulate.
 * Gradients are n times the test values: each contribution becomes a half-integer within
 * an fp32 rounding (1/(2n) is inexact for n = 3), the bf16 wire rounds the sums back to
 * exact half-integers, and the post-divide doubles them. */
static void test_ddp_avg_out(void)
{
    tset_t s;
    tset_make(&s, 25, 1, 1, 0);
    braidPlanConfig_t cfg = BRAID_PLAN_CONFIG_INITIALIZER;
    cfg.wireType = ncclBfloat16;
    cfg.op = ncclAvg;
    cfg.preDivide = 2;
    cfg.postDivide = 0.5;
    cfg.unpack = braidUnpackAccumulate;
    cfg.bucketBytes = 4096;
    braidPlan_t plan;
    NCCL(braidPlanCreate(g_comm, s.d, s.n, &cfg, &plan));
    avg_arg_t a = { 11 };
    for (int i = 0; i < s.n; i++)
        for (size_t e = 0; e < s.t[i].count; e++)
            put(s.t[i].type, s.t[i].grad, e, g_n * val(g_rank, i, e, a.salt));
    for (int t = 0; t < s.n; t++)
        for (size_t e = 0; e < s.t[t].count; e++)
            ((float *)s.t[t].out)[e] = 1.0f;
    tset_push(&s);
    mark_backward(plan, s.n);
    NCCL(braidPlanWait(plan, -1));
    check_all(&s, 1, want_avg_acc, &a, "ddp avg into accumulating outs");
    int salt = a.salt;   /* the gradients are left as they were (check_all read them back) */
    for (int t = 0; t < s.n; t++)
        for (size_t e = 0; e < s.t[t].count; e++)
            if (get(s.t[t].type, s.t[t].grad, e) != g_n * val(g_rank, t, e, salt)) {
                CHECK(0, "ddp out: tensor %d's gradient changed", t);
                break;
            }
    NCCL(braidPlanDestroy(plan));
    tset_free(&s);
}

/* ---- order, flush, rebuild ------------------------------------------------------------------ */

/*
 * The gradients of bucket t[0..n) still hold this rank's own values: the bucket has not
 * run. They are read where the plan writes them (-d: the device, on g_stream, where a
 * launched bucket's result lands before the copy reads it). The host call just made on
 * the communicator ran after any bucket launched before it, so a launched bucket has its
 * sums in place by now.
 */
static int bucket_unreduced(const tset_t *s, int n, const int *t, int salt)
{
    for (int k = 0; k < n; k++) {
        pull(s->mem[0][t[k]], s->dmem[0][t[k]], tset_bytes(s, 0, t[k]));
        for (size_t e = 0; e < s->t[t[k]].count; e++)
            if (get(ncclFloat32, s->t[t[k]].grad, e) != val(g_rank, t[k], e, salt))
                return 0;
    }
    return 1;
}

static void test_order_flush(void)
{
    tset_t s;
    tset_make(&s, 30, 0, 0, 0);
    braidPlanConfig_t cfg = BRAID_PLAN_CONFIG_INITIALIZER;
    cfg.bucketBytes = 2048;
    braidPlan_t plan;
    NCCL(braidPlanCreate(g_comm, s.d, s.n, &cfg, &plan));
    int nb, n0, n1;
    const int *t0, *t1;
    NCCL(braidPlanBucketCount(plan, &nb));
    NCCL(braidPlanBucketInfo(plan, 0, &n0, &t0, NULL));
    NCCL(braidPlanBucketInfo(plan, 1, &n1, &t1, NULL));
    CHECK(nb >= 3 && t0[0] == s.n - 1, "buckets: %d, bucket 0 starts with tensor %d", nb, t0[0]);
    int salt = 5;
    fill_grads(&s, salt);
    for (int k = 0; k < n1; k++)     /* bucket 1 complete, bucket 0 not: nothing may run */
        NCCL(braidPlanReady(plan, t1[k], g_stream));
    NCCL(ncclAllReduce(&salt, &salt, 1, ncclInt32, ncclMax, g_comm, NULL)); /* all got here */
    if (g_n > 1)   /* one rank's sum is its own gradient: nothing to tell apart */
        CHECK(bucket_unreduced(&s, n1, t1, salt), "bucket 1 ran before bucket 0 was launched");
    for (int k = 0; k < n0; k++)
        NCCL(braidPlanReady(plan, t0[k], g_stream));
    NCCL(braidPlanFlush(plan));      /* the rest, never marked */
    NCCL(braidPlanWait(plan, -1));
    check_all(&s, 0, want_sum, &salt, "order and flush");
    for (int b = 0; b < nb; b++) {
        int done = 0;
        NCCL(braidPlanTest(plan, b, &done));
        CHECK(done, "bucket %d not done after braidPlanWait(-1)", b);
    }
    /* a new iteration starts after the flush; a flush once the marks launched every
     * bucket does nothing (the sums are not taken twice) */
    salt = 6;
    fill_grads(&s, salt);
    mark_backward(plan, s.n);
    NCCL(braidPlanFlush(plan));
    NCCL(braidPlanWait(plan, -1));
    check_all(&s, 0, want_sum, &salt, "iteration after flush, flushed again");
    NCCL(braidPlanDestroy(plan));
    tset_free(&s);
}

static void test_rebuild(void)
{
    tset_t s;
    tset_make(&s, 20, 1, 0, 0);
    braidPlanConfig_t cfg = BRAID_PLAN_CONFIG_INITIALIZER;
    cfg.bucketBytes = 1024;
    braidPlan_t plan;
    NCCL(braidPlanCreate(g_comm, s.d, s.n, &cfg, &plan));
    int salt = 9;
    fill_grads(&s, salt);
    for (int k = 0; k < s.n; k++)   /* forward order here; other ranks in backward order */
        NCCL(braidPlanReady(plan, g_rank == 0 ? k : s.n - 1 - k, g_stream));
    NCCL(braidPlanWait(plan, -1));
    check_all(&s, 0, want_sum, &salt, "before rebuild");
    NCCL(braidPlanRebuild(plan));
    int nt;
    const int *t;
    NCCL(braidPlanBucketInfo(plan, 0, &nt, &t, NULL));
    CHECK(t[0] == 0, "after rebuild bucket 0 starts with tensor %d, not rank 0's first mark 0",
          t[0]);
    salt = 10;
    fill_grads(&s, salt);
    for (int k = 0; k < s.n; k++)
        NCCL(braidPlanReady(plan, k, g_stream));
    NCCL(braidPlanWait(plan, -1));
    check_all(&s, 0, want_sum, &salt, "after rebuild");
    NCCL(braidPlanDestroy(plan));
    tset_free(&s);
}

/* ---- fsdp, hsdp ------------------------------------------------------------------------------ */

/* The flat element e of bucket b's rank-r shard: walk the bucket's tensors. */
typedef struct {
    braidPlan_t plan;
    const tset_t *s;
    size_t pad;
} flat_t;

/* Tensor and element at flat element e of bucket b, or -1 for padding. */
static int flat_at(const flat_t *f, int b, size_t e, size_t *elem_p)
{
    int nt;
    const int *t;
    braidPlanBucketInfo(f->plan, b, &nt, &t, NULL);
    for (int k = 0; k < nt; k++) {
        size_t c = f->s->t[t[k]].count;
        if (e < c) {
            *elem_p = e;
            return t[k];
        }
        e -= c;
    }
    return -1;
}

/* The shard of rank r of a bucket of `flat` elements in units of pad: [first, first+len). */
static void shard_of(size_t flat, size_t pad, int n, int r, size_t *first, size_t *len)
{
    size_t u = flat / pad, base = u / (size_t)n, extra = u % (size_t)n, ur = (size_t)r;
    *first = (ur * base + (ur < extra ? ur : extra)) * pad;
    *len = (base + (ur < extra ? 1 : 0)) * pad;
}

static double want_param(int t, size_t i, void *arg)
{
    (void)arg;
    return val(0, t, i, 77);
}

/* FSDP (replica NULL) or HSDP over g_comm's shard group `shard` and `replica`. */
static void run_sharded(ncclComm_t shard, ncclComm_t replica, size_t pad, const char *what)
{
    int sr, sn;
    NCCL(ncclCommUserRank(shard, &sr));
    NCCL(ncclCommCount(shard, &sn));
    tset_t s;
    tset_make(&s, 24, 1, 0, 1);
    braidPlanConfig_t cfg = BRAID_PLAN_CONFIG_INITIALIZER;
    cfg.pattern = replica != NULL ? braidPatternHybrid : braidPatternShard;
    cfg.replicaComm = replica;
    cfg.wireType = ncclBfloat16;
    cfg.outType = ncclFloat32;
    cfg.op = ncclSum;
    cfg.bucketBytes = 3000;
    cfg.padMultiple = pad;
    braidPlan_t plan;
    NCCL(braidPlanCreate(shard, s.d, s.n, &cfg, &plan));
    size_t count;
    NCCL(braidPlanShardCount(plan, &count));
    size_t sbytes = (count + 1) * sizeof(float);
    float *gs = malloc(sbytes), *ps = malloc(sbytes);
    void *gs_d = twin(gs, sbytes), *ps_d = twin(ps, sbytes);
    NCCL(braidPlanSetShards(plan, gs_d, ps_d));
    int salt = 3;
    fill_grads(&s, salt);
    mark_backward(plan, s.n);
    NCCL(braidPlanWait(plan, -1));
    pull(gs, gs_d, sbytes);
    /* gradient shard: the sum over every rank of every group (the same tensors everywhere) */
    flat_t f = { plan, &s, pad };
    int nb, bad = 0;
    size_t off = 0;
    NCCL(braidPlanBucketCount(plan, &nb));
    for (int b = 0; b < nb; b++) {
        size_t bytes, first, len;
        NCCL(braidPlanBucketInfo(plan, b, NULL, NULL, &bytes));
        shard_of(bytes / 2, pad, sn, sr, &first, &len);
        for (size_t e = 0; e < len && bad < 3; e++) {
            size_t el;
            int t = flat_at(&f, b, first + e, &el);
            double exp = t < 0 ? 0 : val_sum(t, el, salt);   /* over every rank */
            if (gs[off + e] != exp) {
                CHECK(0, "%s: bucket %d shard element %zu: got %g, expected %g", what, b, e,
                      gs[off + e], exp);
                bad++;
            }
            ps[off + e] = (float)(t < 0 ? 0 : val(0, t, el, 77));   /* params to gather */
        }
        off += len;
    }
    CHECK(off == count && bad == 0, "%s: shards hold %zu of %zu elements", what, off, count);
    push(ps, ps_d, sbytes);
    for (int b = 0; b < nb; b++)
        NCCL(braidPlanGather(plan, b, g_stream));
    NCCL(braidPlanWait(plan, -1));
    check_all(&s, 2, want_param, NULL, what);
    free(gs);
    free(ps);
    NCCL(braidPlanDestroy(plan));
    tset_free(&s);
}

static void test_sharded(void)
{
    run_sharded(g_comm, NULL, 1, "fsdp");              /* shards split at any element */
    run_sharded(g_comm, NULL, 4, "fsdp pad 4");
    g_mult = (size_t)g_n * 4;    /* every bucket a multiple of n units: even shards */
    run_sharded(g_comm, NULL, 4, "fsdp even");
    g_mult = 1;
    if (g_n % 2)
        return;
    ncclComm_t shard, replica;   /* shard groups {0,1}, {2,3}, ...; replicas across them */
    NCCL(ncclCommSplit(g_comm, g_rank / 2, g_rank, &shard, NULL));
    NCCL(ncclCommSplit(g_comm, g_rank % 2, g_rank, &replica, NULL));
    run_sharded(shard, replica, 1, "hsdp");
    NCCL(ncclCommDestroy(shard));
    NCCL(ncclCommDestroy(replica));
}

/* ---- errors ---------------------------------------------------------------------------------- */

static void expect(ncclResult_t got, ncclResult_t want, const char *needle, const char *what)
{
    const char *msg = ncclGetLastError(NULL);
    CHECK(got == want, "%s: got %s, expected %s (%s)", what, ncclGetErrorString(got),
          ncclGetErrorString(want), msg);
    if (got == want && needle != NULL)
        CHECK(strstr(msg, needle) != NULL, "%s: the message \"%s\" does not say \"%s\"", what,
              msg, needle);
}

static void test_bad_config(const tset_t *s)
{
    braidPlan_t plan = NULL;
    braidPlanConfig_t cfg = BRAID_PLAN_CONFIG_INITIALIZER;
    cfg.wireType = ncclInt32;
    expect(braidPlanCreate(g_comm, s->t, s->n, &cfg, &plan), ncclInvalidArgument, "wireType",
           "an integer wire type");
    cfg = (braidPlanConfig_t)BRAID_PLAN_CONFIG_INITIALIZER;
    cfg.accType = ncclBfloat16;
    expect(braidPlanCreate(g_comm, s->t, s->n, &cfg, &plan), ncclInvalidArgument, "accType",
           "a bf16 accumulation type");
    cfg = (braidPlanConfig_t)BRAID_PLAN_CONFIG_INITIALIZER;
    cfg.pattern = braidPatternHybrid;
    expect(braidPlanCreate(g_comm, s->t, s->n, &cfg, &plan), ncclInvalidArgument, "replicaComm",
           "HSDP without a replica communicator");
    cfg = (braidPlanConfig_t)BRAID_PLAN_CONFIG_INITIALIZER;
    cfg.postDivide = 0;
    expect(braidPlanCreate(g_comm, s->t, s->n, &cfg, &plan), ncclInvalidArgument, "postDivide",
           "postDivide 0");
    cfg = (braidPlanConfig_t)BRAID_PLAN_CONFIG_INITIALIZER;
    cfg.unpack = braidUnpackAccumulate;
    expect(braidPlanCreate(g_comm, s->t, s->n, &cfg, &plan), ncclInvalidArgument, "out",
           "accumulate in place");
    expect(braidPlanCreate(g_comm, NULL, 3, NULL, &plan), ncclInvalidArgument, "tensors",
           "NULL tensors");
    expect(braidPlanCreate(NULL, s->t, s->n, NULL, &plan), ncclInvalidArgument, NULL,
           "NULL communicator");
    CHECK(plan == NULL, "a failed braidPlanCreate set the plan");
}

static void test_bad_marks(void)
{
    tset_t s;
    tset_make(&s, 12, 0, 0, 0);
    test_bad_config(&s);
    braidPlanConfig_t cfg = BRAID_PLAN_CONFIG_INITIALIZER;
    cfg.bucketBytes = 1024;
    braidPlan_t plan;
    NCCL(braidPlanCreate(g_comm, s.d, s.n, &cfg, &plan));
    int salt = 21;
    fill_grads(&s, salt);
    NCCL(braidPlanReady(plan, 0, g_stream));
    expect(braidPlanReady(plan, 0, NULL), ncclInvalidArgument, "already marked", "mark twice");
    expect(braidPlanReady(plan, s.n, NULL), ncclInvalidArgument, "not in the plan",
           "a tensor past the end");
    expect(braidPlanReady(plan, -1, NULL), ncclInvalidArgument, "not in the plan",
           "tensor -1");
    expect(braidPlanReady(NULL, 1, NULL), ncclInvalidArgument, "plan is NULL", "NULL plan");
    expect(braidPlanWait(plan, 99), ncclInvalidArgument, "bucket 99", "wait on bucket 99");
    expect(braidPlanGather(plan, 0, NULL), ncclInvalidUsage, "DDP", "gather on a DDP plan");
    for (int t = s.n - 1; t > 0; t--)   /* the refused calls changed nothing */
        NCCL(braidPlanReady(plan, t, g_stream));
    NCCL(braidPlanWait(plan, -1));
    check_all(&s, 0, want_sum, &salt, "after refused marks");

    /* Destroy in flight: the other ranks mark only after an all-reduce on another
     * communicator that rank 0 joins once it has tried, so its bucket cannot have finished.
     * (One rank alone finishes at once: nothing to test.) */
    if (g_n == 1) {
        NCCL(braidPlanDestroy(plan));
        tset_free(&s);
        return;
    }
    int gate = 1;
    ncclComm_t other;
    NCCL(ncclCommSplit(g_comm, 0, g_rank, &other, NULL));
    fill_grads(&s, salt);
    if (g_rank == 0) {
        mark_backward(plan, s.n);
        expect(braidPlanDestroy(plan), ncclInvalidUsage, "in flight", "destroy in flight");
    }
    NCCL(ncclAllReduce(&gate, &gate, 1, ncclInt32, ncclSum, other, NULL));
    NCCL(ncclCommDestroy(other));
    if (g_rank != 0)
        mark_backward(plan, s.n);
    NCCL(braidPlanWait(plan, -1));
    check_all(&s, 0, want_sum, &salt, "after a refused destroy");
    NCCL(braidPlanDestroy(plan));
    tset_free(&s);
}

/* Rank 1 (the last rank with 2) lists tensor 3 with another count: every rank fails,
 * naming it. */
static void test_mismatch(void)
{
    tset_t s;
    tset_make(&s, 8, 1, 0, 0);
    int odd = g_n > 1 ? 1 : -1;
    if (g_rank == odd)
        s.d[3].count--;
    braidPlan_t plan = NULL;
    char needle[64];
    snprintf(needle, sizeof(needle), "rank %d's tensor 3", odd);
    if (g_n > 1)
        expect(braidPlanCreate(g_comm, s.d, s.n, NULL, &plan), ncclInvalidUsage, needle,
               "plans that differ");
    if (g_rank == odd)
        s.d[3].count++;
    tset_free(&s);
}

/* -d: a plan's buffers are all host or all device memory; a bucket's tensors are marked
 * on one stream. */
static void test_device_errors(void)
{
    tset_t s;
    tset_make(&s, 6, 0, 1, 0);
    braidPlan_t plan = NULL;
    void *keep = s.d[2].out;
    s.d[2].out = s.t[2].out;                    /* one host buffer among device ones */
    expect(braidPlanCreate(g_comm, s.d, s.n, NULL, &plan), ncclInvalidArgument, "host memory",
           "host and device buffers in one plan");
    s.d[2].out = keep;
    braidPlanConfig_t cfg = BRAID_PLAN_CONFIG_INITIALIZER;
    cfg.bucketBytes = 1 << 20;                  /* one bucket */
    cfg.outType = ncclFloat32;
    NCCL(braidPlanCreate(g_comm, s.d, s.n, &cfg, &plan));
    CUstream other;
    CUDRV(g_cu.stream_create(&other, 0));
    int salt = 4;
    fill_grads(&s, salt);
    NCCL(braidPlanReady(plan, 0, g_stream));
    expect(braidPlanReady(plan, 1, other), ncclInvalidArgument, "one stream",
           "two streams in one bucket");
    for (int t = 1; t < s.n; t++)
        NCCL(braidPlanReady(plan, t, g_stream));
    NCCL(braidPlanWait(plan, -1));
    check_all(&s, 1, want_sum, &salt, "after a refused stream");
    NCCL(braidPlanDestroy(plan));
    tset_free(&s);
}

int main(int argc, char **argv)
{
    const char *rs = getenv("RANK"), *ns = getenv("WORLD_SIZE");
    if (rs == NULL || ns == NULL) {
        fprintf(stderr, "plan_check: start me with braidrun -n N\n");
        return 2;
    }
    g_rank = atoi(rs);
    g_n = atoi(ns);
    if (argc > 1 && !strcmp(argv[1], "-d")) {
        g_dev = 1;
        argc--, argv++;
        cudrv_load(&g_cu);                      /* exits 77 without a driver */
        CUDRV(g_cu.stream_create(&g_stream, 0));
    }
    ncclUniqueId id;
    NCCL(ncclGetUniqueId(&id));   /* braidrun's NCCL_COMM_ID: the same id on every rank */
    NCCL(ncclCommInitRank(&g_comm, g_n, id, g_rank));
    const char *only = argc > 1 ? argv[1] : NULL;
#define RUN(_name, _fn) if (only == NULL || !strcmp(only, _name)) _fn
    RUN("ddp", test_ddp_wire(ncclFloat32, 16384));
    RUN("ddp", test_ddp_wire(ncclBfloat16, 8192));
    RUN("ddp", test_ddp_wire(ncclFloat16, 4096));
    RUN("ddp", test_ddp_avg_out());
    RUN("order", test_order_flush());
    RUN("rebuild", test_rebuild());
    RUN("fsdp", test_sharded());
    if (g_dev) {
        RUN("errors", test_device_errors());
    } else {
        RUN("errors", test_bad_marks());
        RUN("errors", test_mismatch());
    }
    NCCL(ncclCommDestroy(g_comm));
    printf("plan_check: rank %d of %d: %d passed, %d failed\n", g_rank, g_n, g_pass, g_fail);
    return g_fail ? 1 : 0;
}
