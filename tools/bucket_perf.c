/*
 * bucket_perf: a bucket plan (braid.h), which fuses the cast, scale and pack of gradients
 * into the collective's first step and the unpack into its last, against the way
 * frameworks do it without one: pack, collective, unpack, three separate passes per bucket.
 *
 *     braidrun -n 4 bucket_perf [-s BYTES] [--pattern ddp|fsdp|all] [--wire fp32|bf16|all]
 *                               [-n ITERS] [-w WARMUP] [--bucket BYTES]
 *
 * The model: 100 fp32 tensors, sizes log-uniform between 256 and 1M elements (fixed seed)
 * scaled to -s bytes in all (default 32 MiB). For each pattern and wire type:
 *   fused:   braidPlanReady on the 100 tensors, last first, then braidPlanWait(-1);
 *   unfused: with the plan's own buckets (braidPlanBucketInfo), for each bucket: pack (cast
 *            each tensor to the wire type, times 1/nranks, into a flat buffer), ncclAllReduce
 *            (ddp) or ncclReduceScatter (fsdp: the bucket padded to a multiple of nranks) of
 *            the flat buffer with ncclSum, unpack (cast back into the tensors, or into this
 *            rank's fp32 shard).
 * Both average (op ncclAvg in the plan) with sums in fp32. Each time is the slowest rank's,
 * the median over the iterations; "passes ms" is the part of the unfused time spent in pack
 * and unpack. "wire MB" is the size of the collectives' buffers in the
 * wire type, padding included (a ring sends 2(n-1)/n of it per rank for an all-reduce,
 * (n-1)/n for a reduce-scatter); "pack+unpack MB" the memory the unfused passes read and
 * write per rank (pack: 4 B read and the wire size written per element; unpack: the wire
 * size read and 4 B written per element it produces); the fused path has no such passes.
 *
 * Check, once per configuration, before the timing: both paths' results against the exact
 * average of every rank's inputs (known to every rank: a hash of rank, tensor and index),
 * each element within ((n+1) u_wire + (n+2) u_fp32) * 1.125 * mean_r |x_r| (u = 2^-24 for
 * fp32, 2^-8 for bf16: at most n + 1 roundings of a partial sum to the wire type), and for
 * ddp the largest difference between the two. With fsdp the two shards hold different
 * elements where a bucket's units of padMultiple (= nranks) do not split evenly (the plan
 * then gives the first ranks one unit more, where ncclReduceScatter pads), so each shard is
 * checked on its own elements. Exit 0 when every check passes, 1 when one fails, 2 on a bad
 * flag or a failed call.
 *
 * Host buffers only: plans take host memory in this version (device buffers give
 * ncclInvalidUsage), so both paths run on host memory even where a GPU is present.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L   /* clock_gettime; the build's config.h sets _GNU_SOURCE */
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "braid.h"

#define BP_NT 100           /* tensors */
#define BP_MIN_LOG2 8       /* sizes log-uniform in 2^8 .. 2^20 elements before scaling */
#define BP_MAX_LOG2 20
#define U_FP32 0x1p-24
#define U_BF16 0x1p-8

typedef struct bp_bucket {
    int nt;
    const int *t;           /* the plan's tensor indices, in the bucket's order */
    size_t elems, padded;   /* elements; with the padding to a multiple of padMultiple */
    size_t wire_bytes;      /* as the plan reports them */
    /* fsdp: this rank's part of the bucket (elements lo .. lo + n) and its offset in the
     * shard, unfused (ncclReduceScatter: 1/nranks of the padded bucket) and fused */
    size_t u_lo, u_n, u_off, f_lo, f_n, f_off;
} bp_bucket_t;

typedef struct bp_result {
    int fsdp, bf16, nbuckets;
    double wire_bytes, pass_bytes, fused_ms, unfused_ms, pass_ms, worst, maxdiff;
    size_t wrong;
} bp_result_t;

typedef struct bp {
    /* options */
    size_t bytes, bucket;
    int iters, warmup, patterns, wires;   /* masks: bit 0 ddp/fp32, bit 1 fsdp/bf16 */
    /* the job */
    int rank, nranks;
    ncclComm_t comm;
    size_t counts[BP_NT], off[BP_NT + 1];
    float *buf[BP_NT];      /* the tensors, each its own allocation */
    float *saved;           /* the fused results, for the check (ddp) */
    /* one configuration */
    int fsdp, bf16, nb;
    size_t ws, shard_count; /* wire element size; fsdp: elements of this rank's shard */
    braidPlan_t plan;
    bp_bucket_t *bk;
    void *flat;             /* unfused: one bucket in the wire type */
    double pass_ms;         /* unfused: time in pack and unpack, this iteration */
    float *gshard, *ushard; /* fsdp: this rank's shard, fused and unfused */
} bp_t;

/* ---- errors, memory, time ---- */

static void bp_fail(const bp_t *b, const char *what, ncclResult_t res)
{
    const char *last = ncclGetLastError(b->comm);
    fflush(stdout);
    fprintf(stderr, "bucket_perf: rank %d: %s failed: %s%s%s\n", b->rank, what,
            ncclGetErrorString(res), last != NULL && last[0] != '\0' ? ": " : "",
            last != NULL ? last : "");
    exit(2);
}

#define CHECK(b, call)                                                                    \
    do {                                                                                  \
        ncclResult_t res_ = (call);                                                       \
        if (res_ != ncclSuccess)                                                          \
            bp_fail((b), #call, res_);                                                    \
    } while (0)

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n > 0 ? n : 1, size);
    if (p == NULL) {
        fprintf(stderr, "bucket_perf: out of memory (%zu x %zu bytes)\n", n, size);
        exit(2);
    }
    return p;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static double mib(double bytes)
{
    return bytes / (1 << 20);
}

/* ---- the tensors and their data ---- */

static uint64_t mix64(uint64_t z)   /* splitmix64's finaliser */
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Input element i of tensor t on rank r: uniform in [-1, 1), exact in fp32. */
static float bp_value(int r, int t, size_t i)
{
    uint64_t z = mix64(((uint64_t)r << 52) ^ ((uint64_t)t << 40) ^ (uint64_t)i);
    return (float)((double)(z >> 40) * 0x1p-23 - 1.0);
}

/* 100 sizes, log-uniform in 2^8 .. 2^20, scaled so that they add up to `total` elements. */
static void bp_sizes(bp_t *b, size_t total)
{
    double raw[BP_NT], sum = 0;
    size_t acc = 0, big = 0;
    uint64_t s = 11;
    for (int i = 0; i < BP_NT; i++) {
        s = mix64(s);
        raw[i] = exp2(BP_MIN_LOG2 + (BP_MAX_LOG2 - BP_MIN_LOG2) * (double)(s >> 11) * 0x1p-53);
        sum += raw[i];
    }
    for (int i = 0; i < BP_NT; i++) {
        b->counts[i] = (size_t)(raw[i] * (double)total / sum);
        b->counts[i] += b->counts[i] == 0;
        acc += b->counts[i];
        big = b->counts[i] > b->counts[big] ? (size_t)i : big;
    }
    b->counts[big] += total - acc;   /* the rounding, on the largest: total >= 2 * BP_NT */
    for (int i = 0; i < BP_NT; i++)
        b->off[i + 1] = b->off[i] + b->counts[i];
}

static void bp_print_sizes(const bp_t *b)
{
    size_t s[BP_NT];
    memcpy(s, b->counts, sizeof(s));
    qsort(s, BP_NT, sizeof(size_t), cmp_size);
    printf("# tensors: %d fp32, %zu elements (%.2f MiB): min %zu, p25 %zu, median %zu, "
           "p75 %zu, max %zu elements (log-uniform in 2^%d .. 2^%d, scaled)\n", BP_NT,
           b->off[BP_NT], mib(4.0 * (double)b->off[BP_NT]), s[0], s[BP_NT / 4], s[BP_NT / 2],
           s[3 * BP_NT / 4], s[BP_NT - 1], BP_MIN_LOG2, BP_MAX_LOG2);
}

static void bp_fill(bp_t *b)
{
    for (int t = 0; t < BP_NT; t++)
        for (size_t i = 0; i < b->counts[t]; i++)
            b->buf[t][i] = bp_value(b->rank, t, i);
}

/* ---- the unfused path: pack, collective, unpack ---- */

/* fp32 to bf16, rounded to nearest, ties to even; NaN stays NaN. */
static uint16_t bf16_from_fp32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float fp32_from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* n elements of src, times scale, into the wire buffer at element `at`. */
static void pack(const bp_t *b, size_t at, const float *src, size_t n, float scale)
{
    if (b->bf16) {
        uint16_t *dst = (uint16_t *)b->flat + at;
        for (size_t i = 0; i < n; i++)
            dst[i] = bf16_from_fp32(src[i] * scale);
    } else {
        float *dst = (float *)b->flat + at;
        for (size_t i = 0; i < n; i++)
            dst[i] = src[i] * scale;
    }
}

/* n elements of the wire buffer from element `at` into dst, as fp32. */
static void unpack(const bp_t *b, size_t at, float *dst, size_t n)
{
    if (b->bf16) {
        const uint16_t *src = (const uint16_t *)b->flat + at;
        for (size_t i = 0; i < n; i++)
            dst[i] = fp32_from_bf16(src[i]);
    } else {
        memcpy(dst, (const float *)b->flat + at, n * sizeof(float));
    }
}

static void unfused_bucket(bp_t *b, const bp_bucket_t *k)
{
    ncclDataType_t wire = b->bf16 ? ncclBfloat16 : ncclFloat32;
    float scale = 1.0f / (float)b->nranks;
    size_t at = 0, chunk = k->padded / (size_t)b->nranks, mine = chunk * (size_t)b->rank;
    double t0 = now_ms();
    for (int j = 0; j < k->nt; j++) {
        pack(b, at, b->buf[k->t[j]], b->counts[k->t[j]], scale);
        at += b->counts[k->t[j]];
    }
    memset((char *)b->flat + at * b->ws, 0, (k->padded - at) * b->ws);
    double t1 = now_ms();
    if (!b->fsdp)
        CHECK(b, ncclAllReduce(b->flat, b->flat, k->elems, wire, ncclSum, b->comm, NULL));
    else
        CHECK(b, ncclReduceScatter(b->flat, (char *)b->flat + mine * b->ws, chunk, wire,
                                   ncclSum, b->comm, NULL));
    double t2 = now_ms();
    at = 0;
    for (int j = 0; !b->fsdp && j < k->nt; j++) {
        unpack(b, at, b->buf[k->t[j]], b->counts[k->t[j]]);
        at += b->counts[k->t[j]];
    }
    if (b->fsdp)
        unpack(b, mine, b->ushard + k->u_off, chunk);
    b->pass_ms += (t1 - t0) + (now_ms() - t2);
}

static void unfused_iter(bp_t *b)
{
    b->pass_ms = 0;
    for (int k = 0; k < b->nb; k++)
        unfused_bucket(b, &b->bk[k]);
}

static void fused_iter(bp_t *b)
{
    for (int t = BP_NT - 1; t >= 0; t--)
        CHECK(b, braidPlanReady(b->plan, t, NULL));
    CHECK(b, braidPlanWait(b->plan, -1));
}

/* ---- the check ---- */

typedef struct bp_check {
    double coef, worst, maxdiff;
    size_t wrong;
} bp_check_t;

static void check_report(const bp_t *b, bp_check_t *c, const char *what, int t, size_t i,
                         double got, double want, double bound)
{
    if (c->wrong++ < 5)
        fprintf(stderr, "bucket_perf: rank %d: %s tensor %d element %zu: %.9g, want %.9g "
                "(bound %.3g)\n", b->rank, what, t, i, got, want, bound);
}

/* Element i of tensor t as `ngot` results got[] (fused, then unfused): each against the
 * exact average of every rank's input, within c->coef * mean_r |x_r|. */
static void check_elem(const bp_t *b, bp_check_t *c, int t, size_t i, const float *got,
                       int ngot)
{
    static const char *const what[2] = { "fused", "unfused" };
    double sum = 0, abs = 0;
    for (int r = 0; r < b->nranks; r++) {
        double v = bp_value(r, t, i);
        sum += v;
        abs += fabs(v);
    }
    double want = sum / b->nranks, bound = c->coef * abs / b->nranks;
    for (int j = 0; j < ngot; j++) {
        double err = fabs(got[j] - want);
        if (err > bound)
            check_report(b, c, what[j], t, i, got[j], want, bound);
        if (bound > 0)
            c->worst = fmax(c->worst, err / bound);
    }
}

/* fsdp: elements lo .. lo + n of bucket k, at got[0 .. n); padding must be 0. */
static void check_part(const bp_t *b, bp_check_t *c, const bp_bucket_t *k, size_t lo,
                       size_t n, const float *got, const char *what)
{
    size_t start = 0, hi = lo + n;
    for (int j = 0; j < k->nt; j++) {
        size_t cnt = b->counts[k->t[j]], a = start > lo ? start : lo;
        size_t z = start + cnt < hi ? start + cnt : hi;
        for (size_t q = a; q < z; q++)
            check_elem(b, c, k->t[j], q - start, &got[q - lo], 1);
        start += cnt;
    }
    for (size_t q = start > lo ? start : lo; q < hi; q++)
        if (got[q - lo] != 0)
            check_report(b, c, what, -1, q, got[q - lo], 0, 0);
}

/* Each path once, on fresh inputs; both against the exact averages. */
static void bp_verify(bp_t *b, bp_result_t *res)
{
    bp_check_t c = { .coef = 1.125 * ((b->nranks + 1) * (b->bf16 ? U_BF16 : U_FP32) +
                                      (b->nranks + 2) * U_FP32) };
    bp_fill(b);
    fused_iter(b);
    if (!b->fsdp)
        for (int t = 0; t < BP_NT; t++)
            memcpy(b->saved + b->off[t], b->buf[t], b->counts[t] * sizeof(float));
    bp_fill(b);
    unfused_iter(b);
    for (int k = 0; b->fsdp && k < b->nb; k++) {
        const bp_bucket_t *bk = &b->bk[k];
        check_part(b, &c, bk, bk->f_lo, bk->f_n, b->gshard + bk->f_off, "fused (padding)");
        check_part(b, &c, bk, bk->u_lo, bk->u_n, b->ushard + bk->u_off, "unfused (padding)");
    }
    for (int t = 0; !b->fsdp && t < BP_NT; t++)
        for (size_t i = 0; i < b->counts[t]; i++) {
            float got[2] = { b->saved[b->off[t] + i], b->buf[t][i] };
            check_elem(b, &c, t, i, got, 2);
            c.maxdiff = fmax(c.maxdiff, fabs((double)got[0] - got[1]));
        }
    res->wrong = c.wrong;
    res->worst = c.worst;
    res->maxdiff = b->fsdp ? -1 : c.maxdiff;
}

/* ---- one configuration ---- */

static void bp_plan(bp_t *b)
{
    braidTensor_t t[BP_NT];
    braidPlanConfig_t cfg = BRAID_PLAN_CONFIG_INITIALIZER;
    for (int i = 0; i < BP_NT; i++)
        t[i] = (braidTensor_t){ .grad = b->buf[i], .out = NULL, .param = NULL,
                                .count = b->counts[i], .type = ncclFloat32 };
    cfg.pattern = b->fsdp ? braidPatternShard : braidPatternAllReduce;
    cfg.bucketBytes = b->bucket;
    cfg.padMultiple = b->fsdp ? (size_t)b->nranks : 1;
    cfg.wireType = b->bf16 ? ncclBfloat16 : ncclFloat32;
    cfg.accType = ncclFloat32;
    cfg.outType = ncclFloat32;
    cfg.op = ncclAvg;
    CHECK(b, braidPlanCreate(b->comm, t, BP_NT, &cfg, &b->plan));
    if (b->fsdp) {
        CHECK(b, braidPlanShardCount(b->plan, &b->shard_count));
        b->gshard = xcalloc(b->shard_count, sizeof(float));
        CHECK(b, braidPlanSetShards(b->plan, b->gshard, NULL));
    }
}

/*
 * fsdp: this rank's parts of bucket k. Unfused: the rank's 1/nranks of the padded bucket,
 * as ncclReduceScatter gives it. Fused: the header says only that shards split a bucket in
 * units of padMultiple; this is the split of this implementation (src/core/plan.c): the
 * units as evenly as possible, the first (units mod nranks) ranks one more, in rank order.
 */
static void bp_parts(const bp_t *b, bp_bucket_t *k, size_t *u_off_p, size_t *f_off_p)
{
    size_t n = (size_t)b->nranks, r = (size_t)b->rank, pad = n, units = k->padded / pad;
    size_t base = units / n, extra = units % n;
    k->u_n = k->padded / n;
    k->u_lo = r * k->u_n;
    k->u_off = *u_off_p;
    *u_off_p += k->u_n;
    k->f_lo = (r * base + (r < extra ? r : extra)) * pad;
    k->f_n = (base + (r < extra)) * pad;
    k->f_off = *f_off_p;
    *f_off_p += k->f_n;
}

/* The plan's buckets; returns 0, or -1 where they are not what the unfused path expects. */
static int bp_buckets(bp_t *b, bp_result_t *res)
{
    size_t max = 0, u_shard = 0, f_shard = 0, pad = b->fsdp ? (size_t)b->nranks : 1;
    int ok = 1;
    CHECK(b, braidPlanBucketCount(b->plan, &b->nb));
    b->bk = xcalloc((size_t)b->nb, sizeof(bp_bucket_t));
    for (int k = 0; k < b->nb; k++) {
        bp_bucket_t *bk = &b->bk[k];
        CHECK(b, braidPlanBucketInfo(b->plan, k, &bk->nt, &bk->t, &bk->wire_bytes));
        for (int j = 0; j < bk->nt; j++)
            bk->elems += b->counts[bk->t[j]];
        bk->padded = (bk->elems + pad - 1) / pad * pad;
        if (b->fsdp)
            bp_parts(b, bk, &u_shard, &f_shard);
        max = bk->padded > max ? bk->padded : max;
        res->wire_bytes += (double)bk->wire_bytes;
        ok &= bk->wire_bytes == bk->padded * b->ws;
    }
    b->flat = xcalloc(max, b->ws);
    if (b->fsdp) {
        b->ushard = xcalloc(u_shard, sizeof(float));
        ok &= f_shard == b->shard_count;
    }
    if (!ok)
        fprintf(stderr, "bucket_perf: rank %d: the plan's buckets are not the padded "
                "concatenation of their tensors, or its shard (%zu elements) is not split as "
                "expected (%zu)\n", b->rank, b->shard_count, f_shard);
    return ok ? 0 : -1;
}

static void bp_print_buckets(const bp_t *b)
{
    double *w = xcalloc((size_t)b->nb, sizeof(double));
    for (int k = 0; k < b->nb; k++)
        w[k] = (double)b->bk[k].wire_bytes;
    qsort(w, (size_t)b->nb, sizeof(double), cmp_double);
    if (b->rank == 0)
        printf("# %-4s %s: %d bucket%s (bucketBytes %zu%s): wire KiB per bucket: first %.1f, "
               "min %.1f, median %.1f, max %.1f\n", b->fsdp ? "fsdp" : "ddp",
               b->bf16 ? "bf16" : "fp32", b->nb, b->nb == 1 ? "" : "s", b->bucket,
               b->bucket ? "" : ", automatic", (double)b->bk[0].wire_bytes / 1024, w[0] / 1024,
               w[b->nb / 2] / 1024, w[b->nb - 1] / 1024);
    free(w);
}

static void barrier(bp_t *b)
{
    static float one = 1;
    CHECK(b, ncclAllReduce(&one, &one, 1, ncclFloat32, ncclMax, b->comm, NULL));
}

/* Median over the iterations of the slowest rank's time, fused and unfused interleaved;
 * and of the unfused path's time in its pack and unpack passes. */
static void bp_time(bp_t *b, bp_result_t *res)
{
    size_t n = (size_t)b->iters;
    double *tf = xcalloc(n, sizeof(double)), *tu = xcalloc(n, sizeof(double));
    double *tp = xcalloc(n, sizeof(double));
    for (int it = 0; it < b->warmup + b->iters; it++) {
        barrier(b);
        double t0 = now_ms();
        fused_iter(b);
        double t1 = now_ms();
        barrier(b);
        double t2 = now_ms();
        unfused_iter(b);
        double t3 = now_ms();
        if (it >= b->warmup) {
            tf[it - b->warmup] = t1 - t0;
            tu[it - b->warmup] = t3 - t2;
            tp[it - b->warmup] = b->pass_ms;
        }
    }
    double *t[3] = { tf, tu, tp }, *out[3] = { &res->fused_ms, &res->unfused_ms, &res->pass_ms };
    for (int i = 0; i < 3; i++) {
        CHECK(b, ncclAllReduce(t[i], t[i], n, ncclFloat64, ncclMax, b->comm, NULL));
        qsort(t[i], n, sizeof(double), cmp_double);
        *out[i] = t[i][n / 2];
        free(t[i]);
    }
}

static void bp_config(bp_t *b, int fsdp, int bf16, bp_result_t *res)
{
    *res = (bp_result_t){ .fsdp = fsdp, .bf16 = bf16 };
    b->fsdp = fsdp;
    b->bf16 = bf16;
    b->ws = bf16 ? 2 : 4;
    bp_plan(b);
    int layout_ok = bp_buckets(b, res) == 0;
    bp_print_buckets(b);
    res->nbuckets = b->nb;
    /* pack reads 4 B and writes ws per element; unpack reads ws and writes 4 B per output */
    double n = (double)b->off[BP_NT], p = res->wire_bytes / (double)b->ws;
    double out = fsdp ? p / b->nranks : n;
    res->pass_bytes = 4.0 * n + (double)b->ws * p + ((double)b->ws + 4.0) * out;
    bp_verify(b, res);
    uint64_t wrong = res->wrong + !layout_ok;
    double worst[2] = { res->worst, res->maxdiff };   /* maxdiff -1: fsdp */
    CHECK(b, ncclAllReduce(&wrong, &wrong, 1, ncclUint64, ncclSum, b->comm, NULL));
    CHECK(b, ncclAllReduce(worst, worst, 2, ncclFloat64, ncclMax, b->comm, NULL));
    res->wrong = (size_t)wrong;
    res->worst = worst[0];
    res->maxdiff = worst[1];
    bp_time(b, res);
    CHECK(b, braidPlanDestroy(b->plan));
    free(b->bk);
    free(b->flat);
    free(b->gshard);
    free(b->ushard);
    b->bk = NULL, b->flat = NULL, b->gshard = NULL, b->ushard = NULL;
}

/* ---- setup and the table ---- */

static void usage(FILE *f)
{
    fprintf(f, "usage: bucket_perf [-s BYTES] [--pattern ddp|fsdp|all] [--wire fp32|bf16|all] "
            "[-n ITERS] [-w WARMUP] [--bucket BYTES]\n"
            "  start it with braidrun: braidrun -n 4 bucket_perf -n 3\n"
            "  -s         fp32 bytes of the 100 tensors in all (K, M, G suffixes; default 32M)\n"
            "  --pattern  ddp (all-reduce), fsdp (reduce-scatter) or all (default)\n"
            "  --wire     what travels: fp32, bf16 or all (default); sums in fp32\n"
            "  -n, -w     timed and warm-up iterations (default 5 and 1)\n"
            "  --bucket   the plan's bucketBytes (default 0: automatic)\n");
}

static int parse_size(const char *s, size_t *v_p)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    if (end == s || s[0] == '-')
        return -1;
    if (*end == 'K' || *end == 'k')
        shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        shift = 20, end++;
    else if (*end == 'G' || *end == 'g')
        shift = 30, end++;
    if (*end != '\0' || v > (~0ull >> shift))
        return -1;
    *v_p = (size_t)(v << shift);
    return 0;
}

/* The mask of `val` among "A", "B" and "all" (bits 0 and 1); 0 if it is none of them. */
static int parse_pair(const char *val, const char *a, const char *bname)
{
    return strcmp(val, a) == 0 ? 1 : strcmp(val, bname) == 0 ? 2 : strcmp(val, "all") == 0 ? 3 : 0;
}

/* One flag and its value; returns 0 if it is good. */
static int bp_flag(bp_t *b, const char *a, const char *val)
{
    size_t v;
    if (strcmp(a, "-s") == 0)
        return parse_size(val, &b->bytes) != 0 || b->bytes < 8 * BP_NT;
    if (strcmp(a, "--bucket") == 0)
        return parse_size(val, &b->bucket);
    if (strcmp(a, "--pattern") == 0)
        return (b->patterns = parse_pair(val, "ddp", "fsdp")) == 0;
    if (strcmp(a, "--wire") == 0)
        return (b->wires = parse_pair(val, "fp32", "bf16")) == 0;
    if (strcmp(a, "-n") == 0 || strcmp(a, "-w") == 0) {
        if (parse_size(val, &v) != 0 || v > 100000 || (a[1] == 'n' && v < 1))
            return 1;
        *(a[1] == 'n' ? &b->iters : &b->warmup) = (int)v;
        return 0;
    }
    return 1;
}

/* 0: go on; otherwise the exit status (-1: 0 after -h). */
static int bp_args(bp_t *b, int argc, char **argv)
{
    b->bytes = 32u << 20;
    b->iters = 5;
    b->warmup = 1;
    b->patterns = b->wires = 3;
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            if (b->rank == 0)
                usage(stdout);
            return -1;
        }
        if (i + 1 >= argc || bp_flag(b, argv[i], argv[i + 1]) != 0) {
            if (b->rank == 0) {
                fprintf(stderr, "bucket_perf: bad argument: %s%s%s\n", argv[i],
                        i + 1 < argc ? " " : "", i + 1 < argc ? argv[i + 1] : "");
                usage(stderr);
            }
            return 2;
        }
    }
    return 0;
}

/* This rank and the rank count, from braidrun (RANK, WORLD_SIZE); alone: 0 of 1. */
static int bp_env(bp_t *b)
{
    const char *r = getenv("RANK"), *n = getenv("WORLD_SIZE"), *id = getenv("NCCL_COMM_ID");
    b->rank = 0;
    b->nranks = 1;
    if (r != NULL && n != NULL) {
        b->rank = atoi(r);
        b->nranks = atoi(n);
    }
    if (b->nranks < 1 || b->rank < 0 || b->rank >= b->nranks) {
        fprintf(stderr, "bucket_perf: RANK=%s WORLD_SIZE=%s: not a rank of a job\n", r, n);
        return 2;
    }
    if (b->nranks > 1 && (id == NULL || id[0] == '\0')) {
        fprintf(stderr, "bucket_perf: rank %d of %d but NCCL_COMM_ID is not set: start it "
                "with braidrun (braidrun -n 4 bucket_perf)\n", b->rank, b->nranks);
        return 2;
    }
    return 0;
}

static void bp_print_intro(const bp_t *b, int argc, char **argv)
{
    printf("#");
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\n# braid %s, %d ranks, host buffers, op avg, sums in fp32, %d warm-up and %d "
           "timed iterations, times: the slowest rank's, median\n", braidGetVersionString(),
           b->nranks, b->warmup, b->iters);
    bp_print_sizes(b);
}

static void bp_print_table(const bp_result_t *res, int nres)
{
    printf("#\n# %-7s %-4s %7s %9s %14s %9s %10s %9s %7s  %s\n", "pattern", "wire", "buckets",
           "wire MB", "pack+unpack MB", "fused ms", "unfused ms", "passes ms", "speedup",
           "check");
    printf("# %-7s %-4s %7s %9s %14s %9s %10s %9s\n", "", "", "", "per iter", "(fused: 0)", "",
           "", "(unfused)");
    for (int i = 0; i < nres; i++) {
        const bp_result_t *r = &res[i];
        printf("  %-7s %-4s %7d %9.2f %14.2f %9.2f %10.2f %9.2f %6.2fx  %s (worst error %.2f "
               "of the bound", r->fsdp ? "fsdp" : "ddp", r->bf16 ? "bf16" : "fp32",
               r->nbuckets, r->wire_bytes / 1e6, r->pass_bytes / 1e6, r->fused_ms,
               r->unfused_ms, r->pass_ms, r->fused_ms > 0 ? r->unfused_ms / r->fused_ms : 0.0,
               r->wrong ? "FAIL" : "ok", r->worst);
        if (r->maxdiff >= 0)
            printf(", max|fused - unfused| %.2g", r->maxdiff);
        printf(")\n");
    }
}

int main(int argc, char **argv)
{
    bp_t bench = { 0 }, *b = &bench;
    bp_result_t res[4];
    ncclUniqueId id;
    int st, nres = 0, fails = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((st = bp_env(b)) != 0 || (st = bp_args(b, argc, argv)) != 0)
        return st < 0 ? 0 : st;
    bp_sizes(b, b->bytes / sizeof(float));
    for (int t = 0; t < BP_NT; t++)
        b->buf[t] = xcalloc(b->counts[t], sizeof(float));
    b->saved = xcalloc(b->off[BP_NT], sizeof(float));
    CHECK(b, ncclGetUniqueId(&id));   /* the same on every rank: braidrun sets NCCL_COMM_ID */
    CHECK(b, ncclCommInitRank(&b->comm, b->nranks, id, b->rank));
    if (b->rank == 0)
        bp_print_intro(b, argc, argv);
    for (int fsdp = 0; fsdp < 2; fsdp++)
        for (int bf16 = 0; bf16 < 2; bf16++)
            if ((b->patterns >> fsdp & 1) && (b->wires >> bf16 & 1)) {
                bp_config(b, fsdp, bf16, &res[nres]);
                fails += res[nres++].wrong != 0;
            }
    if (b->rank == 0)
        bp_print_table(res, nres);
    CHECK(b, ncclCommDestroy(b->comm));
    for (int t = 0; t < BP_NT; t++)
        free(b->buf[t]);
    free(b->saved);
    return fails ? 1 : 0;
}
