/*
 * coll_check: the reducing collectives (AllReduce, Reduce, ReduceScatter) for every type,
 * every op, in and out of place, every count and root; and random float all-reduces whose
 * results must be bit-identical on every rank.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_check.h"

#define PMS_HOST_SCALAR 2.0
#define PMS_DEV_SCALAR 3.0
#define PMS_DEV_DECOY 5.0    /* in the scalar's memory when the op is created */

static const char *const red_names[] = { "ncclAllReduce", "ncclReduce", "ncclReduceScatter" };

cc_val_t cc_op_family(int op)
{
    switch (op) {
    case CC_SUM: return CC_VAL_SUM;
    case CC_PROD: return CC_VAL_PROD;
    case CC_AVG: return CC_VAL_AVG;
    case CC_PMS_HOST:
    case CC_PMS_DEV: return CC_VAL_PMS;
    default: return CC_VAL_ANY;
    }
}

double cc_op_scalar(int op)
{
    return op == CC_PMS_HOST ? PMS_HOST_SCALAR : op == CC_PMS_DEV ? PMS_DEV_SCALAR : 1.0;
}

/* The exact result of element idx over all ranks (every partial is exact by design). */
double cc_red_expect(int type, int op, int n, uint32_t salt, size_t idx)
{
    const cc_type_t *t = &cc_types[type];
    cc_val_t fam = cc_op_family(op);
    double s = cc_op_scalar(op), acc = cc_value(type, fam, n, 0, idx, salt, s);
    for (int r = 1; r < n; r++) {
        double v = cc_value(type, fam, n, r, idx, salt, s);
        switch (op) {
        case CC_PROD: acc *= v; break;
        case CC_MAX: acc = v > acc ? v : acc; break;
        case CC_MIN: acc = v < acc ? v : acc; break;
        default: acc += v; break;
        }
    }
    if (op == CC_AVG)
        acc = t->is_float ? acc / n : (double)((int64_t)acc / (int64_t)n);   /* truncates */
    else if (op == CC_PMS_HOST || op == CC_PMS_DEV)
        acc *= s;
    return acc;
}

static double *expect_range(int type, int op, int n, uint32_t salt, size_t idx0, size_t count)
{
    double *e = cc_xmalloc((count ? count : 1) * sizeof(double));
    if (idx0 % CC_PERIOD != 0 || count <= CC_PERIOD) {
        for (size_t i = 0; i < count; i++)
            e[i] = cc_red_expect(type, op, n, salt, idx0 + i);
        return e;
    }
    for (size_t i = 0; i < CC_PERIOD; i++)   /* values repeat: so do the results */
        e[i] = cc_red_expect(type, op, n, salt, idx0 + i);
    cc_repeat(e, CC_PERIOD * sizeof(double), count * sizeof(double));
    return e;
}

/* The ncclRedOp_t of each local rank (PreMulSum ones are created here). */
typedef struct red_ops {
    ncclRedOp_t op[CC_MAX_LOCAL];
    double scalar_mem[CC_MAX_LOCAL];   /* 8 bytes, aligned for any type */
    int created;
} red_ops_t;

static void ops_make(const cc_world_t *w, int type, int op, red_ops_t *ro)
{
    static const ncclRedOp_t builtin[] = { ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg };
    ro->created = op == CC_PMS_HOST || op == CC_PMS_DEV;
    for (int l = 0; l < w->nlocal; l++) {
        if (!ro->created) {
            ro->op[l] = builtin[op];
            continue;
        }
        int dev = op == CC_PMS_DEV;
        cc_encode(type, dev ? PMS_DEV_DECOY : PMS_HOST_SCALAR, &ro->scalar_mem[l]);
        CC_NCCL(w, "ncclRedOpCreatePreMulSum",
                ncclRedOpCreatePreMulSum(&ro->op[l], &ro->scalar_mem[l], cc_types[type].dt,
                                         dev ? ncclScalarDevice : ncclScalarHostImmediate,
                                         w->comms[l]));
        if (ro->op[l] < ncclNumOps) {
            cc_case_t c = { "ncclRedOpCreatePreMulSum", type, op, 0, -1, 0 };
            cc_fail(w, &c, w->ranks[l], 0, "op below ncclNumOps", "op >= 5");
        }
        /* device residence: the value at call time counts, not the one at creation */
        cc_encode(type, dev ? PMS_DEV_SCALAR : PMS_DEV_DECOY, &ro->scalar_mem[l]);
    }
}

static void ops_free(const cc_world_t *w, red_ops_t *ro)
{
    for (int l = 0; ro->created && l < w->nlocal; l++)
        CC_NCCL(w, "ncclRedOpDestroy", ncclRedOpDestroy(ro->op[l], w->comms[l]));
}

/* One rank's buffers for one reducing call. */
typedef struct red_bufs {
    cc_buf_t send, recv;
    void *saved;
    const void *sp;
    void *rp;
} red_bufs_t;

typedef struct red_prep {
    cc_prep_t base;
    cc_world_t *w;
    cc_kind_t k;
    cc_case_t c;
    uint32_t salt;
    red_ops_t ro;
    red_bufs_t b[CC_MAX_LOCAL];
} red_prep_t;

static void bufs_setup(const cc_world_t *w, cc_kind_t k, const cc_case_t *c, int rank,
                       uint32_t salt, red_bufs_t *b)
{
    size_t es = cc_types[c->type].size, n = (size_t)w->nranks;
    size_t in = k == CC_K_REDUCESCATTER ? c->count * n : c->count;
    size_t out = c->count;
    int is_root = k != CC_K_REDUCE || rank == c->root;
    memset(b, 0, sizeof(*b));
    cc_buf_alloc(&b->send, in * es);
    cc_fill(c->type, cc_op_family(c->op), w->nranks, rank, salt, cc_op_scalar(c->op),
            b->send.data, in);
    b->saved = cc_xmalloc(in * es);
    memcpy(b->saved, b->send.data, in * es);
    b->sp = b->send.data;
    if (c->inplace)
        b->rp = k == CC_K_REDUCESCATTER ? b->send.data + (size_t)rank * out * es : b->send.data;
    else if (is_root) {
        cc_buf_alloc(&b->recv, out * es);
        b->rp = b->recv.data;
    } else {
        b->rp = NULL;   /* NCCL does not use a non-root's recvbuff */
    }
}

static void red_issue(cc_prep_t *base, int l)
{
    red_prep_t *p = (red_prep_t *)base;
    const cc_case_t *c = &p->c;
    const red_bufs_t *b = &p->b[l];
    ncclDataType_t dt = cc_types[c->type].dt;
    ncclComm_t comm = p->w->comms[l];
    ncclRedOp_t op = p->ro.op[l];
    ncclResult_t r;
    void *s = cc_dp(b->sp), *rp = cc_dp(b->rp), *st = cc_stream();
    switch (p->k) {
    case CC_K_ALLREDUCE: r = ncclAllReduce(s, rp, c->count, dt, op, comm, st); break;
    case CC_K_REDUCE: r = ncclReduce(s, rp, c->count, dt, op, c->root, comm, st); break;
    default: r = ncclReduceScatter(s, rp, c->count, dt, op, comm, st); break;
    }
    if (r != ncclSuccess)
        cc_nccl_fatal(p->w, c->what, r, __FILE__, __LINE__);
}

static void bufs_check(const cc_world_t *w, cc_kind_t k, const cc_case_t *c, int rank,
                       const red_bufs_t *b, const double *expect)
{
    size_t es = cc_types[c->type].size, n = (size_t)w->nranks;
    size_t in_bytes = (k == CC_K_REDUCESCATTER ? c->count * n : c->count) * es;
    int is_root = k != CC_K_REDUCE || rank == c->root;
    size_t off = k == CC_K_REDUCESCATTER ? (size_t)rank * c->count : 0;
    if (is_root)
        cc_check_values(w, c, rank, b->rp, expect + off, c->count, off);
    if (!c->inplace || !is_root)   /* a non-root's in-place buffer is its input */
        cc_check_unchanged(w, c, rank, b->sp, b->saved, in_bytes);
    cc_buf_guards_ok(&b->send, c, rank);
    if (b->recv.base != NULL)
        cc_buf_guards_ok(&b->recv, c, rank);
}

static void red_finish(cc_prep_t *base)
{
    red_prep_t *p = (red_prep_t *)base;
    cc_world_t *w = p->w;
    size_t total = p->k == CC_K_REDUCESCATTER ? p->c.count * (size_t)w->nranks : p->c.count;
    ops_free(w, &p->ro);
    double *expect = expect_range(p->c.type, p->c.op, w->nranks, p->salt, 0, total);
    for (int l = 0; l < w->nlocal; l++) {
        bufs_check(w, p->k, &p->c, w->ranks[l], &p->b[l], expect);
        cc_buf_free(&p->b[l].send);
        cc_buf_free(&p->b[l].recv);
        free(p->b[l].saved);
    }
    free(expect);
    free(p);
}

cc_prep_t *cc_red_prepare(cc_world_t *w, cc_kind_t k, const cc_case_t *c, uint32_t salt)
{
    red_prep_t *p = cc_xmalloc(sizeof(*p));
    memset(p, 0, sizeof(*p));
    p->base.issue = red_issue;
    p->base.finish = red_finish;
    p->w = w;
    p->k = k;
    p->c = *c;
    p->salt = salt;
    p->base.grouped = (int)(salt & 1);   /* alone or in a group of one: both paths */
    ops_make(w, c->type, c->op, &p->ro);
    for (int l = 0; l < w->nlocal; l++)
        bufs_setup(w, k, c, w->ranks[l], salt, &p->b[l]);
    return &p->base;
}

void cc_run(cc_world_t *w, cc_prep_t *p, const char *what)
{
    int grouped = w->nlocal > 1 || p->grouped;
    cc_dev_upload();
    if (grouped)
        cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++)
        p->issue(p, l);
    if (grouped)
        cc_group_end(w, what);
    cc_dev_download();
    p->finish(p);
}

/* Large counts: a selection (every type summed, fp32 with every op, a few others). */
static int large_wanted(cc_kind_t k, int type, int op, int inplace)
{
    int fp32 = cc_types[type].dt == ncclFloat32;
    switch (k) {
    case CC_K_ALLREDUCE:
        return (!inplace && (op == CC_SUM || fp32)) || (inplace && fp32 && op == CC_SUM);
    case CC_K_REDUCESCATTER:
        return op == CC_SUM && (fp32 || (!inplace && cc_types[type].dt == ncclBfloat16));
    default:
        return !inplace && ((fp32 && op == CC_SUM) || (cc_types[type].dt == ncclInt32 &&
                                                        op == CC_PROD));
    }
}

static void red_kind_all(cc_world_t *w, cc_kind_t k, uint32_t *salt)
{
    size_t counts[8];
    int ncounts = cc_counts(w, counts);
    for (int type = 0; type < CC_NTYPES; type++)
        for (int op = 0; op < CC_NOPS; op++)
            for (int ci = 0; ci < ncounts; ci++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    size_t count = counts[ci];
                    if (count == CC_LARGE_COUNT && !large_wanted(k, type, op, inplace))
                        continue;
                    if (count == CC_LARGE_COUNT && k == CC_K_REDUCESCATTER)
                        count /= (size_t)w->nranks;
                    int r0 = 0, r1 = 1;
                    if (k == CC_K_REDUCE && op == CC_SUM && count != CC_LARGE_COUNT)
                        r1 = w->nranks;   /* every root */
                    else if (k == CC_K_REDUCE)
                        r0 = (type + op + ci + inplace) % w->nranks, r1 = r0 + 1;
                    else
                        r0 = -1, r1 = 0;
                    for (int root = r0; root < r1; root++) {
                        cc_case_t c = { red_names[k], type, op, count, root, inplace };
                        cc_run(w, cc_red_prepare(w, k, &c, ++*salt), red_names[k]);
                    }
                }
}

void cc_test_reduce(cc_world_t *w)
{
    uint32_t salt = 1000;
    cc_set_phase("ncclAllReduce");
    red_kind_all(w, CC_K_ALLREDUCE, &salt);
    cc_set_phase("ncclReduce");
    red_kind_all(w, CC_K_REDUCE, &salt);
    cc_set_phase("ncclReduceScatter");
    red_kind_all(w, CC_K_REDUCESCATTER, &salt);
}

/* ---- random floats: bit-identical on every rank ------------------------------------- */

static double min_subnormal(int type)
{
    switch (cc_types[type].dt) {
    case ncclFloat16: return 0x1p-24;
    case ncclFloat8e4m3: return 0x1p-9;
    case ncclFloat8e5m2: return 0x1p-16;
    case ncclBfloat16: return 0x1p-133;
    case ncclFloat32: return 0x1p-149;
    default: return 0x1p-1074;
    }
}

static void random_fill(int type, int rank, uint32_t salt, void *buf, size_t count)
{
    uint64_t st = ((uint64_t)salt << 20) ^ (uint64_t)rank;
    size_t es = cc_types[type].size;
    for (size_t i = 0; i < count; i++) {
        double v = (double)(cc_rng(&st) >> 11) * 0x1p-52 - 1.0;   /* [-1, 1) */
        cc_encode(type, v, (char *)buf + i * es);
    }
}

/* Every rank's output hash, gathered to all ranks, must be the same. */
static void hashes_compare(cc_world_t *w, const cc_case_t *c, void *const *outs)
{
    int n = w->nranks;
    uint64_t mine[CC_MAX_LOCAL], *all = cc_xmalloc((size_t)w->nlocal * (size_t)n * 8);
    for (int l = 0; l < w->nlocal; l++)
        mine[l] = cc_hash(outs[l], c->count * cc_types[c->type].size);
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++)
        CC_NCCL(w, "ncclAllGather(hash)", ncclAllGather(&mine[l], all + (size_t)l * n, 1,
                                                        ncclUint64, w->comms[l], NULL));
    cc_group_end(w, "ncclAllGather(hash)");
    for (int l = 0; l < w->nlocal; l++)
        for (int r = 0; r < n; r++)
            if (all[(size_t)l * n + r] != all[(size_t)l * n]) {
                char g[64], e[64];
                snprintf(g, sizeof(g), "hash %016llx on rank %d",
                         (unsigned long long)all[(size_t)l * n + r], r);
                snprintf(e, sizeof(e), "hash %016llx of rank 0",
                         (unsigned long long)all[(size_t)l * n]);
                cc_fail(w, c, w->ranks[l], 0, g, e);
            }
    free(all);
}

/* A loose sanity check against a double reference, per element. */
static void random_sanity(cc_world_t *w, const cc_case_t *c, int rank, const void *out,
                          uint32_t salt, double factor)
{
    int n = w->nranks, type = c->type;
    size_t es = cc_types[type].size;
    double *ref = calloc(c->count, sizeof(double)), *mag = calloc(c->count, sizeof(double));
    void *in = cc_xmalloc(c->count * es);
    for (int r = 0; r < n; r++) {
        random_fill(type, r, salt, in, c->count);
        for (size_t i = 0; i < c->count; i++) {
            double x = cc_decode(type, (char *)in + i * es) * factor;
            ref[i] += x;
            mag[i] += fabs(x);
        }
    }
    size_t bad = 0;
    for (size_t i = 0; i < c->count; i++) {
        double got = cc_decode(type, (const char *)out + i * es);
        double tol = 2.0 * n * (cc_types[type].eps * mag[i] + min_subnormal(type));
        if (!(fabs(got - ref[i]) <= tol) && bad++ < 3) {
            char g[64], e[96];
            snprintf(g, sizeof(g), "%.9g", got);
            snprintf(e, sizeof(e), "%.9g+-%.3g", ref[i], tol);
            cc_fail(w, c, rank, i, g, e);
        }
    }
    free(ref);
    free(mag);
    free(in);
}

static void random_case(cc_world_t *w, int type, int op, size_t count, uint32_t salt)
{
    cc_case_t c = { "ncclAllReduce(random)", type, op, count, -1, 0 };
    ncclRedOp_t ops[CC_MAX_LOCAL];
    double scal[CC_MAX_LOCAL], factor = op == CC_AVG ? 1.0 / w->nranks : 1.0;
    void *in[CC_MAX_LOCAL], *out[CC_MAX_LOCAL];
    size_t es = cc_types[type].size;
    for (int l = 0; l < w->nlocal; l++) {
        ops[l] = op == CC_AVG ? ncclAvg : ncclSum;
        if (op == CC_PMS_HOST) {
            cc_encode(type, 0.75, &scal[l]);
            CC_NCCL(w, "ncclRedOpCreatePreMulSum", ncclRedOpCreatePreMulSum(
                        &ops[l], &scal[l], cc_types[type].dt, ncclScalarHostImmediate,
                        w->comms[l]));
            factor = 0.75;
        }
        in[l] = cc_xmalloc(count * es);
        out[l] = cc_xmalloc(count * es);
        random_fill(type, w->ranks[l], salt, in[l], count);
    }
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++)
        CC_NCCL(w, c.what, ncclAllReduce(in[l], out[l], count, cc_types[type].dt, ops[l],
                                         w->comms[l], NULL));
    cc_group_end(w, c.what);
    hashes_compare(w, &c, out);
    for (int l = 0; l < w->nlocal; l++) {
        if (l == 0 || count <= 100000)
            random_sanity(w, &c, w->ranks[l], out[l], salt, factor);
        if (op == CC_PMS_HOST)
            CC_NCCL(w, "ncclRedOpDestroy", ncclRedOpDestroy(ops[l], w->comms[l]));
        free(in[l]);
        free(out[l]);
    }
}

void cc_test_random(cc_world_t *w)
{
    static const ncclDataType_t floats[] = { ncclFloat16, ncclFloat32, ncclFloat64,
                                             ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2 };
    static const int ops[] = { CC_SUM, CC_AVG, CC_PMS_HOST };
    uint32_t salt = 5000;
    cc_set_phase("ncclAllReduce(random)");
    for (size_t t = 0; t < sizeof(floats) / sizeof(floats[0]); t++)
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            random_case(w, (int)floats[t], ops[o], 1001, ++salt);
            random_case(w, (int)floats[t], ops[o], 65539, ++salt);
        }
    if (!w->quick)
        random_case(w, ncclFloat32, CC_SUM, CC_LARGE_COUNT, ++salt);
}
