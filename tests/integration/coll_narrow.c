/*
 * coll_check: fp16, bf16 and fp8 (e4m3, e5m2) reductions of random inputs, checked byte for
 * byte against a reference written here.
 *
 * braid's rule (README, kernels/kernels.h): these types widen to fp32, combine in fp32 and
 * round back to nearest even at every combine of two values; fp16 and bf16 overflow to inf,
 * fp8 saturates to its largest finite value (CUDA's __NV_SATFINITE). ncclAvg on floats
 * multiplies each rank's input by (float)(1/n), PreMulSum by the scalar, the product rounded
 * to the type, and then sums. The reference decodes and rounds the formats with code of its
 * own (bit fields, frexp, ldexp; not braid's kernels/host/fp.h) and does the fp32 steps in C
 * float arithmetic.
 *
 * Order: with two ranks every combine is a OP b, which does not depend on the order; max and
 * min do not depend on it either. Sum, prod, avg and premulsum over 3+ ranks do, and only
 * NCCL_ALGO=allreduce:oneshot fixes it: every rank combines the contributions in rank order,
 * ((x0 OP x1) OP x2) ... (algorithms/oneshot.c). So this section checks
 *   the world      max and min of all-reduce, reduce and reduce-scatter, and, when
 *                  NCCL_ALGO is allreduce:oneshot, every op of all-reduce;
 *   ranks 0 and 1  (split off when the world is larger) every op of all three.
 *
 * Inputs are random bit patterns of finite values (never NaN or inf): for half the elements
 * across the whole range, subnormals included, for the other half with the ranks' exponents
 * within one of each other, so that sums round, tie and cancel. PreMulSum's scalar is -0.875
 * for fp16 and bf16 (no product overflows, so no inf - inf) and -1.75 for fp8 (it saturates);
 * prod never gets a zero (an overflowed inf times zero would be a NaN, whose bits the rule
 * leaves open).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_check.h"

#define NR_REPORT_MAX 3

typedef struct nf_fmt {
    int type;        /* ncclDataType_t, also the index into cc_types */
    int ebits, mbits, bias;
    int sat;         /* overflow saturates (fp8) instead of giving inf */
    int fn;          /* e4m3: no infinities; only S.1111.111 is NaN */
    double scalar;   /* PreMulSum's */
} nf_fmt_t;

static const nf_fmt_t nf_fmts[] = {
    { ncclFloat16, 5, 10, 15, 0, 0, -0.875 },
    { ncclBfloat16, 8, 7, 127, 0, 0, -0.875 },
    { ncclFloat8e4m3, 4, 3, 7, 1, 1, -1.75 },
    { ncclFloat8e5m2, 5, 2, 15, 1, 0, -1.75 },
};
#define NR_NFMTS (sizeof(nf_fmts) / sizeof(nf_fmts[0]))
#define NR_NFMTS_MAX 4
_Static_assert(NR_NFMTS == NR_NFMTS_MAX, "one decoding table per format");

/* ---- the formats ------------------------------------------------------------------------- */

static uint32_t nf_sign(const nf_fmt_t *f)
{
    return 1u << (f->ebits + f->mbits);
}

static uint32_t nf_exp_field(const nf_fmt_t *f, uint32_t bits)
{
    return (bits >> f->mbits) & ((1u << f->ebits) - 1);
}

static uint32_t nf_mant_mask(const nf_fmt_t *f)
{
    return (1u << f->mbits) - 1;
}

static int nf_finite(const nf_fmt_t *f, uint32_t bits)
{
    uint32_t all = (1u << f->ebits) - 1;
    if (f->fn)
        return !(nf_exp_field(f, bits) == all && (bits & nf_mant_mask(f)) == nf_mant_mask(f));
    return nf_exp_field(f, bits) != all;
}

static uint32_t nf_max_code(const nf_fmt_t *f)   /* largest finite, positive */
{
    if (f->fn)
        return nf_sign(f) - 2;
    return (((1u << f->ebits) - 2) << f->mbits) | nf_mant_mask(f);
}

static uint32_t nf_inf_code(const nf_fmt_t *f)
{
    return ((1u << f->ebits) - 1) << f->mbits;
}

static double nf_decode_bits(const nf_fmt_t *f, uint32_t bits)
{
    uint32_t ex = nf_exp_field(f, bits), man = bits & nf_mant_mask(f);
    double v;
    if (!nf_finite(f, bits))
        v = (!f->fn && man == 0) ? INFINITY : NAN;
    else if (ex == 0)
        v = ldexp((double)man, 1 - f->bias - f->mbits);
    else
        v = ldexp((double)(man | (1u << f->mbits)), (int)ex - f->bias - f->mbits);
    return (bits & nf_sign(f)) ? -v : v;
}

/* Decoding through a table per format, filled on first use (by each thread alike). */
static double nf_decode(const nf_fmt_t *f, uint32_t bits)
{
    static double *_Atomic tables[NR_NFMTS_MAX];
    size_t t = (size_t)(f - nf_fmts), n = (size_t)nf_sign(f) << 1;
    double *tab = atomic_load(&tables[t]);
    if (tab == NULL) {
        tab = cc_xmalloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++)
            tab[i] = nf_decode_bits(f, (uint32_t)i);
        double *expected = NULL;
        if (!atomic_compare_exchange_strong(&tables[t], &expected, tab)) {
            free(tab);
            tab = expected;
        }
    }
    return tab[bits & (n - 1)];
}

/* Round x (an fp32 value, or +-inf) to the format: nearest, ties to even; beyond the largest
 * finite value inf, or that value when the format saturates. */
static uint32_t nf_round(const nf_fmt_t *f, double x)
{
    uint32_t sign = signbit(x) ? nf_sign(f) : 0, one = 1u << f->mbits;
    uint32_t over = sign | (f->sat ? nf_max_code(f) : nf_inf_code(f));
    double a = fabs(x);
    int e, emin = 1 - f->bias;
    if (isinf(a))
        return over;
    if (a == 0)
        return sign;
    frexp(a, &e);
    e -= 1;   /* a = 1.m * 2^e */
    if (e < emin)
        e = emin;   /* below the normals the step is the subnormals' */
    double q = nearbyint(ldexp(a, f->mbits - e));   /* in steps of 2^(e - mbits), ties to even */
    if (q >= 2.0 * one) {   /* rounded up to the next binade */
        q /= 2;
        e++;
    }
    uint32_t code = q < one ? (uint32_t)q   /* subnormal (or zero) */
                            : ((uint32_t)(e + f->bias) << f->mbits) | ((uint32_t)q - one);
    return code > nf_max_code(f) ? over : sign | code;
}

static uint32_t nf_load(const nf_fmt_t *f, const void *p)
{
    if (cc_types[f->type].size == 1)
        return *(const uint8_t *)p;
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}

static void nf_store(const nf_fmt_t *f, void *p, uint32_t bits)
{
    if (cc_types[f->type].size == 1)
        *(uint8_t *)p = (uint8_t)bits;
    else
        memcpy(p, &(uint16_t){ (uint16_t)bits }, 2);
}

/* ---- the reference ------------------------------------------------------------------------ */

/* x OP y in fp32 (x, y fp32 values). Max and min: -0 below +0, as braid documents. */
static double nf_combine(int op, double x, double y)
{
    float fx = (float)x, fy = (float)y, r;
    switch (op) {
    case CC_PROD: r = fx * fy; return r;
    case CC_MAX: return x > y ? x : x < y ? y : signbit(x) ? y : x;
    case CC_MIN: return x < y ? x : x > y ? y : signbit(x) ? x : y;
    default: r = fx + fy; return r;   /* sum; avg and premulsum after the pre-multiply */
    }
}

/* The result's code for the contributions x[0..n) combined in rank order. */
static uint32_t nf_reference(const nf_fmt_t *f, int op, const uint32_t *x, int n, float scale)
{
    uint32_t acc = 0;
    for (int r = 0; r < n; r++) {
        uint32_t v = x[r];
        if (op == CC_AVG || op == CC_PMS_HOST) {
            float p = (float)nf_decode(f, v) * scale;
            v = nf_round(f, p);
        }
        acc = r == 0 ? v : nf_round(f, nf_combine(op, nf_decode(f, acc), nf_decode(f, v)));
    }
    return acc;
}

static uint64_t nr_hash(uint32_t salt, uint32_t who, size_t idx)
{
    uint64_t st = ((uint64_t)salt << 40) ^ ((uint64_t)who << 32) ^ (uint64_t)idx;
    return cc_rng(&st);
}

/* Element idx of rank's input: finite, and not zero for prod. */
static uint32_t nr_input(const nf_fmt_t *f, int op, uint32_t salt, int rank, size_t idx)
{
    uint64_t band = nr_hash(salt, 0xffffu, idx), st = nr_hash(salt, (uint32_t)rank, idx);
    uint32_t nbits = (uint32_t)(f->ebits + f->mbits + 1), top = (1u << f->ebits) - 1;
    uint32_t emax = f->fn ? top : top - 1;   /* largest exponent field of a finite value */
    int center = (int)((band >> 8) % (emax + 1));
    for (;;) {
        uint64_t h = cc_rng(&st);
        uint32_t bits = (uint32_t)h & ((1u << nbits) - 1);
        if (band & 1) {   /* the ranks' exponents within one of the element's center */
            int ex = center + (int)((h >> 32) % 3) - 1;
            ex = ex < 0 ? 0 : ex > (int)emax ? (int)emax : ex;
            bits = (bits & (nf_sign(f) | nf_mant_mask(f))) | ((uint32_t)ex << f->mbits);
        }
        if (nf_finite(f, bits) && !(op == CC_PROD && (bits & ~nf_sign(f)) == 0))
            return bits;
    }
}

/* ---- one case ---------------------------------------------------------------------------- */

typedef struct nr_case {
    cc_kind_t kind;
    const nf_fmt_t *f;
    int op;
    size_t count;
    int root, inplace;
    uint32_t salt;
} nr_case_t;

static const char *const nr_kind_names[] = { "ncclAllReduce(random, exact)",
                                             "ncclReduce(random, exact)",
                                             "ncclReduceScatter(random, exact)" };

static float nr_scale(const cc_world_t *w, const nr_case_t *k)
{
    if (k->op == CC_AVG)
        return (float)(1.0 / w->nranks);
    return (float)nf_decode(k->f, nf_round(k->f, k->f->scalar));
}

/* The expected codes of elements [idx0, idx0 + m); in[i * nranks + r] is rank r's input. */
static uint32_t *nr_expect(const cc_world_t *w, const nr_case_t *k, const uint32_t *in,
                           size_t idx0, size_t m)
{
    size_t n = (size_t)w->nranks;
    uint32_t *exp = cc_xmalloc((m ? m : 1) * sizeof(uint32_t));
    float scale = nr_scale(w, k);
    for (size_t i = 0; i < m; i++)
        exp[i] = nf_reference(k->f, k->op, in + (idx0 + i) * n, w->nranks, scale);
    return exp;
}

static void nr_report(const cc_world_t *w, const nr_case_t *k, int rank, size_t idx,
                      uint32_t got, uint32_t want, const uint32_t *in)
{
    char g[64], e[256];
    int len = snprintf(e, sizeof(e), "0x%02x (%.9g) from", want, nf_decode(k->f, want));
    for (int r = 0; r < w->nranks && r < 8 && len < (int)sizeof(e) - 16; r++)
        len += snprintf(e + len, sizeof(e) - (size_t)len, " 0x%02x",
                        in[idx * (size_t)w->nranks + (size_t)r]);
    snprintf(g, sizeof(g), "0x%02x (%.9g)", got, nf_decode(k->f, got));
    cc_case_t c = { nr_kind_names[k->kind], k->f->type, k->op, k->count, k->root, k->inplace };
    cc_fail(w, &c, rank, idx, g, e);
}

/* Local rank l's output against the reference; `shared` holds the expected codes of
 * elements [0, count) (all-reduce and reduce: the same on every rank). */
static void nr_check(const cc_world_t *w, const nr_case_t *k, int l, const void *out,
                     const uint32_t *in, const uint32_t *shared)
{
    int rank = w->ranks[l];
    size_t es = cc_types[k->f->type].size, off = 0, bad = 0;
    if (k->kind == CC_K_REDUCE && rank != k->root)
        return;
    if (k->kind == CC_K_REDUCESCATTER)
        off = (size_t)rank * k->count;
    uint32_t *own = shared == NULL ? nr_expect(w, k, in, off, k->count) : NULL;
    const uint32_t *exp = shared != NULL ? shared : own;
    for (size_t j = 0; j < k->count; j++) {
        uint32_t got = nf_load(k->f, (const char *)out + j * es);
        if (got != exp[j] && bad++ < NR_REPORT_MAX)
            nr_report(w, k, rank, off + j, got, exp[j], in);
    }
    if (bad > NR_REPORT_MAX)
        fprintf(stderr, "FAIL mode=%s what=%s type=%s op=%s rank=%d: %zu more mismatches\n",
                w->mode, nr_kind_names[k->kind], cc_types[k->f->type].name, cc_op_names[k->op],
                rank, bad - NR_REPORT_MAX);
    free(own);
}

static void nr_issue(const cc_world_t *w, const nr_case_t *k, int l, const void *s, void *r,
                     ncclRedOp_t op)
{
    ncclDataType_t dt = (ncclDataType_t)k->f->type;
    ncclComm_t comm = w->comms[l];
    const char *what = nr_kind_names[k->kind];
    switch (k->kind) {
    case CC_K_ALLREDUCE: CC_NCCL(w, what, ncclAllReduce(s, r, k->count, dt, op, comm, NULL)); break;
    case CC_K_REDUCE:
        CC_NCCL(w, what, ncclReduce(s, r, k->count, dt, op, k->root, comm, NULL));
        break;
    default: CC_NCCL(w, what, ncclReduceScatter(s, r, k->count, dt, op, comm, NULL)); break;
    }
}

static ncclRedOp_t nr_op(const cc_world_t *w, const nr_case_t *k, int l, uint64_t *scalar)
{
    static const ncclRedOp_t builtin[] = { ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg };
    ncclRedOp_t op;
    if (k->op != CC_PMS_HOST)
        return builtin[k->op];
    nf_store(k->f, scalar, nf_round(k->f, k->f->scalar));
    CC_NCCL(w, "ncclRedOpCreatePreMulSum",
            ncclRedOpCreatePreMulSum(&op, scalar, (ncclDataType_t)k->f->type,
                                     ncclScalarHostImmediate, w->comms[l]));
    return op;
}

/*
 * The inputs this process needs, in[i * nranks + r] (rank r's element i): its ranks' own,
 * and every rank's for the elements whose results it checks (a reduce-scatter's slices of
 * its ranks; all of them otherwise). The rest of the table is left unset.
 */
static uint32_t *nr_table(const cc_world_t *w, const nr_case_t *k, size_t in_n)
{
    size_t n = (size_t)w->nranks;
    uint32_t *in = cc_xmalloc((in_n ? in_n : 1) * n * sizeof(uint32_t));
    unsigned char *need = calloc(in_n ? in_n : 1, 1);
    if (need == NULL)
        cc_nccl_fatal(w, "calloc", ncclSystemError, __FILE__, __LINE__);
    for (int l = 0; l < w->nlocal; l++) {
        size_t lo = k->kind == CC_K_REDUCESCATTER ? (size_t)w->ranks[l] * k->count : 0;
        memset(need + lo, 1, k->count);
    }
    for (size_t i = 0; i < in_n; i++) {
        for (int r = 0; r < w->nranks && need[i]; r++)
            in[i * n + (size_t)r] = nr_input(k->f, k->op, k->salt, r, i);
        for (int l = 0; l < w->nlocal && !need[i]; l++)
            in[i * n + (size_t)w->ranks[l]] = nr_input(k->f, k->op, k->salt, w->ranks[l], i);
    }
    free(need);
    return in;
}

static void nr_run(const cc_world_t *w, const nr_case_t *k)
{
    size_t es = cc_types[k->f->type].size, n = (size_t)w->nranks;
    size_t in_n = k->kind == CC_K_REDUCESCATTER ? k->count * n : k->count;
    char *send[CC_MAX_LOCAL], *recv[CC_MAX_LOCAL], *out[CC_MAX_LOCAL];
    ncclRedOp_t ops[CC_MAX_LOCAL];
    uint64_t scalars[CC_MAX_LOCAL];
    uint32_t *in = nr_table(w, k, in_n);
    for (int l = 0; l < w->nlocal; l++) {
        int rank = w->ranks[l];
        send[l] = cc_xmalloc(in_n * es);
        recv[l] = cc_xmalloc(k->count * es);
        memset(recv[l], 0xa5, k->count * es);
        for (size_t i = 0; i < in_n; i++)
            nf_store(k->f, send[l] + i * es, in[i * n + (size_t)rank]);
        out[l] = recv[l];
        if (k->inplace)
            out[l] = k->kind == CC_K_REDUCESCATTER ? send[l] + (size_t)rank * k->count * es
                                                    : send[l];
        ops[l] = nr_op(w, k, l, &scalars[l]);
    }
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++)
        nr_issue(w, k, l, send[l], out[l], ops[l]);
    cc_group_end(w, nr_kind_names[k->kind]);
    uint32_t *shared = k->kind != CC_K_REDUCESCATTER ? nr_expect(w, k, in, 0, k->count) : NULL;
    for (int l = 0; l < w->nlocal; l++) {
        nr_check(w, k, l, out[l], in, shared);
        if (k->op == CC_PMS_HOST)
            CC_NCCL(w, "ncclRedOpDestroy", ncclRedOpDestroy(ops[l], w->comms[l]));
        free(send[l]);
        free(recv[l]);
    }
    free(shared);
    free(in);
}

/* ---- the cases --------------------------------------------------------------------------- */

static const int nr_ops[] = { CC_SUM, CC_PROD, CC_MAX, CC_MIN, CC_AVG, CC_PMS_HOST };

/* Whether the result of (kind, op) on w is fixed by the rule alone. */
static int nr_checkable(const cc_world_t *w, cc_kind_t kind, int op, int oneshot)
{
    return w->nranks <= 2 || op == CC_MAX || op == CC_MIN ||
           (oneshot && kind == CC_K_ALLREDUCE);
}

/* Counts: 1, a few of the kernels' 256-element blocks and a tail, and unless quick 32 of
 * them; pipelining over several slices is run_coll.sh's business (BRAID_SLICE_SIZE=4K). */
static void nr_all(const cc_world_t *w, int oneshot, uint32_t salt, long *cases)
{
    static const cc_kind_t kinds[] = { CC_K_ALLREDUCE, CC_K_REDUCE, CC_K_REDUCESCATTER };
    static const size_t counts[] = { 1, 1000, 8191 };
    int ncounts = w->quick ? 2 : 3, ci = 0;
    for (size_t t = 0; t < NR_NFMTS; t++)
        for (size_t o = 0; o < sizeof(nr_ops) / sizeof(nr_ops[0]); o++)
            for (size_t kk = 0; kk < 3; kk++)
                for (int c = 0; c < ncounts; c++, ci++) {
                    if (!nr_checkable(w, kinds[kk], nr_ops[o], oneshot))
                        continue;
                    nr_case_t k = { kinds[kk], &nf_fmts[t], nr_ops[o], counts[c],
                                    ci % w->nranks, ci & 1, ++salt };
                    nr_run(w, &k);
                    (*cases)++;
                }
}

/* Ranks 0 and 1 as a communicator of their own (the others get none). */
static void nr_pair(cc_world_t *w, uint32_t salt, long *cases)
{
    ncclComm_t child[CC_MAX_LOCAL];
    cc_world_t pair = *w;
    cc_set_phase("narrow: ncclCommSplit(ranks 0 and 1)");
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++)
        CC_NCCL(w, "ncclCommSplit", ncclCommSplit(w->comms[l], w->ranks[l] < 2 ? 0
                                                  : NCCL_SPLIT_NOCOLOR, w->ranks[l], &child[l],
                                                  NULL));
    cc_group_end(w, "ncclCommSplit");
    pair.nranks = 2;
    pair.nlocal = 0;
    for (int l = 0; l < w->nlocal; l++)
        if (w->ranks[l] < 2) {
            pair.ranks[pair.nlocal] = w->ranks[l];
            pair.comms[pair.nlocal++] = child[l];
        }
    if (pair.nlocal == 0)
        return;
    cc_set_phase("narrow: ranks 0 and 1");
    nr_all(&pair, 0, salt, cases);
    cc_comms_close(&pair, pair.comms, pair.nlocal, 0);
}

void cc_test_narrow(cc_world_t *w)
{
    const char *algo = getenv("NCCL_ALGO");
    int oneshot = algo != NULL && strcmp(algo, "allreduce:oneshot") == 0;
    long cases = 0;
    cc_set_phase("narrow");
    nr_all(w, oneshot, 96000, &cases);
    if (w->nranks > 2)
        nr_pair(w, 97000, &cases);
    cc_section_done(w, "narrow", cases);
}
