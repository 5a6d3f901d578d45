/*
 * soak: the collectives of one iteration. Each is drawn from the shared generator (kind,
 * type, op, count, root, in place or not), its inputs written from (rank, index, salt),
 * issued alone or in a group of several, on host buffers or on device twins (copied on the
 * rank's stream), and its output compared byte for byte with a reference.
 *
 * The reference is exact: inputs are small integers (0..7; 1 or 2 for products; 0..2 for
 * fp8 sums; 0 or n for fp8 averages), so that every partial result is exact in every type
 * for up to 4 ranks and averages are multiples of 1/4. Float averages are drawn only when
 * the rank count is a power of two (x/n is exact then); integers average by truncation.
 * Every value the checks meet is a multiple of 1/8 below 32: its encoding in each type is
 * read from a table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rccl/rccl.h"
#include "soak.h"
#include "tests/common/cudrv.h"

#define NTYPES 12
#define ENC_STEPS 256        /* table entries: k/8 for k < 256 */
#define MAX_GROUP 4          /* collectives in one group */
#define ZERO_COUNT_ONE_IN 16 /* count 0 (a successful no-op) this often */

const char *const soak_kind_names[SK_NKINDS] = {
    "allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "ring",
};

typedef struct soak_type {
    const char *name;
    ncclDataType_t dt;
    int size;
    int ebits, mbits;        /* narrow floats: exponent and mantissa bits; 0 otherwise */
    int is_float;
} soak_type_t;

static const soak_type_t types[NTYPES] = {
    { "int8", ncclInt8, 1, 0, 0, 0 },          { "uint8", ncclUint8, 1, 0, 0, 0 },
    { "int32", ncclInt32, 4, 0, 0, 0 },        { "uint32", ncclUint32, 4, 0, 0, 0 },
    { "int64", ncclInt64, 8, 0, 0, 0 },        { "uint64", ncclUint64, 8, 0, 0, 0 },
    { "fp16", ncclFloat16, 2, 5, 10, 1 },      { "fp32", ncclFloat32, 4, 0, 0, 1 },
    { "fp64", ncclFloat64, 8, 0, 0, 1 },       { "bf16", ncclBfloat16, 2, 8, 7, 1 },
    { "fp8e4m3", ncclFloat8e4m3, 1, 4, 3, 1 }, { "fp8e5m2", ncclFloat8e5m2, 1, 5, 2, 1 },
};

static const char *const op_names[] = { "sum", "prod", "max", "min", "avg" };

/* enc[t][k]: the bytes of k/8 in type t */
static uint8_t enc[NTYPES][ENC_STEPS][8];

/* One collective of an iteration. */
typedef struct soak_op {
    soak_kind_t kind;
    int type, op, root, inplace;
    size_t count;            /* NCCL's count (per rank for allgather, reducescatter, ...) */
    uint32_t salt;
    int lo, span, mult;      /* inputs: lo + mult * (h % span) */
} soak_op_t;

/* Per-slot buffers, made once for the largest iteration: the send and receive buffers,
 * the expected output, and their device twins. */
typedef struct soak_slot {
    char *send, *recv, *expect;
    char *dsend, *drecv;
    size_t bytes;
} soak_slot_t;

static soak_slot_t slots[MAX_GROUP];
static cudrv_t cu;
static CUstream stream;
volatile int soak_in_call;

uint64_t soak_rng(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- values ---------------------------------------------------------------------------- */

/* A non-negative value exact in a narrow float format (normal numbers only: the values
 * here are 0 or at least 1/8). */
static uint32_t narrow_bits(const soak_type_t *t, double v)
{
    if (v == 0)
        return 0;
    int e;
    double m = frexp(v, &e);   /* v = m * 2^e, m in [0.5, 1) */
    uint32_t mant = (uint32_t)ldexp(2 * m - 1, t->mbits);
    uint32_t bias = (1u << (t->ebits - 1)) - 1;
    return ((uint32_t)(e - 1 + (int)bias) << t->mbits) | mant;
}

static void encode(const soak_type_t *t, double v, uint8_t *dst)
{
    memset(dst, 0, 8);
    if (t->ebits != 0) {
        uint32_t b = narrow_bits(t, v);
        memcpy(dst, &b, (size_t)t->size);   /* little endian: the low bytes */
        return;
    }
    switch (t->dt) {
    case ncclInt8: case ncclUint8: dst[0] = (uint8_t)v; break;
    case ncclInt32: case ncclUint32: memcpy(dst, &(uint32_t){ (uint32_t)v }, 4); break;
    case ncclInt64: case ncclUint64: memcpy(dst, &(uint64_t){ (uint64_t)v }, 8); break;
    case ncclFloat32: memcpy(dst, &(float){ (float)v }, 4); break;
    default: memcpy(dst, &v, 8); break;
    }
}

static void enc_table(void)
{
    for (int t = 0; t < NTYPES; t++)
        for (int k = 0; k < ENC_STEPS; k++)
            encode(&types[t], k / 8.0, enc[t][k]);
}

/* Input of `rank` at element idx, a small integer. */
static inline int value(const soak_op_t *o, int rank, size_t idx)
{
    uint32_t h = (uint32_t)idx * 0x9e3779b1u + (uint32_t)rank * 0x85ebca77u + o->salt;
    return o->lo + o->mult * (int)((h >> 16) % (uint32_t)o->span);
}

static inline void put(const soak_op_t *o, char *buf, size_t i, int k8)
{
    int sz = types[o->type].size;
    memcpy(buf + i * (size_t)sz, enc[o->type][k8], (size_t)sz);
}

/* The reduction of element idx over n ranks, in eighths. */
static int reduce_k8(const soak_op_t *o, int n, size_t idx)
{
    int acc = value(o, 0, idx);
    for (int r = 1; r < n; r++) {
        int v = value(o, r, idx);
        switch (o->op) {
        case ncclProd: acc *= v; break;
        case ncclMax: acc = v > acc ? v : acc; break;
        case ncclMin: acc = v < acc ? v : acc; break;
        default: acc += v; break;
        }
    }
    if (o->op == ncclAvg)
        return types[o->type].is_float ? acc * 8 / n : acc / n * 8;
    return acc * 8;
}

/* The inputs' family for (type, op) on n ranks: see the top of the file. */
static void value_family(soak_op_t *o, int n)
{
    int fp8 = types[o->type].ebits == 4 || types[o->type].ebits == 5;
    o->lo = 0, o->span = 8, o->mult = 1;
    if (o->op == ncclProd)
        o->lo = 1, o->span = 2;
    else if (fp8 && o->op == ncclSum)
        o->span = 3;
    else if (fp8 && o->op == ncclAvg)
        o->span = 2, o->mult = n;
}

/* ---- drawing ------------------------------------------------------------------------- */

/* Elements of the send and receive buffers, for count and n ranks. */
static size_t send_elems(const soak_op_t *o, int n)
{
    int nfold = o->kind == SK_REDUCESCATTER || o->kind == SK_ALLTOALL;
    return nfold ? o->count * (size_t)n : o->count;
}

static size_t recv_elems(const soak_op_t *o, int n)
{
    int nfold = o->kind == SK_ALLGATHER || o->kind == SK_ALLTOALL;
    return nfold ? o->count * (size_t)n : o->count;
}

static int is_reduction(soak_kind_t k)
{
    return k == SK_ALLREDUCE || k == SK_REDUCE || k == SK_REDUCESCATTER;
}

/*
 * Draw one collective whose buffers fit `max_bytes`. Always 7 draws, whatever n is, so
 * that the ranks of different split children stay in step. Sizes are spread evenly over
 * powers of two (1 byte .. max_bytes), then made odd-sized by a random remainder.
 */
static void op_draw(soak_op_t *o, uint64_t *rng, int n, size_t max_bytes)
{
    uint64_t d[7];
    for (int i = 0; i < 7; i++)
        d[i] = soak_rng(rng);
    o->kind = (soak_kind_t)(d[0] % SK_NKINDS);
    o->type = (int)(d[1] % NTYPES);
    o->op = (int)(d[2] % 5);
    if (o->op == ncclAvg && types[o->type].is_float && (n & (n - 1)) != 0)
        o->op = ncclSum;   /* x/n is not exact */
    o->root = (int)(d[3] % (uint64_t)n);
    o->inplace = (int)(d[4] & 1) && o->kind != SK_ALLTOALL && o->kind != SK_RING;
    o->salt = (uint32_t)(d[4] >> 32);
    int maxlog = 0;
    while (((size_t)2 << maxlog) <= max_bytes)
        maxlog++;
    size_t bytes = (size_t)1 << (d[5] % (uint64_t)(maxlog + 1));
    bytes += (size_t)(d[5] >> 32) % bytes;
    int nfold = o->kind == SK_ALLGATHER || o->kind == SK_REDUCESCATTER || o->kind == SK_ALLTOALL;
    size_t per = (size_t)types[o->type].size * (size_t)(nfold ? n : 1);
    o->count = bytes / per;
    if (o->count * per > max_bytes)
        o->count = max_bytes / per;
    if (d[6] % ZERO_COUNT_ONE_IN == 0)
        o->count = 0;
    value_family(o, n);
}

/* ---- buffers ------------------------------------------------------------------------- */

int soak_coll_setup(const soak_opts_t *o)
{
    enc_table();
    if (o->device) {
        cudrv_load(&cu);
        CUDRV(cu.stream_create(&stream, CU_STREAM_NON_BLOCKING));
    }
    for (int s = 0; s < MAX_GROUP; s++) {
        soak_slot_t *sl = &slots[s];
        sl->bytes = s == 0 ? o->max_bytes : o->max_bytes / MAX_GROUP;
        sl->send = malloc(sl->bytes);
        sl->recv = malloc(sl->bytes);
        sl->expect = malloc(sl->bytes);
        if (sl->send == NULL || sl->recv == NULL || sl->expect == NULL)
            return -1;
        /* touched now (not with zeros, which the compiler may turn into calloc's untouched
         * pages), so that the resident size counts them from the start */
        memset(sl->send, 0xa5, sl->bytes);
        memset(sl->recv, 0xa5, sl->bytes);
        memset(sl->expect, 0xa5, sl->bytes);
        if (o->device) {
            CUdeviceptr a, b;
            CUDRV(cu.alloc(&a, sl->bytes));
            CUDRV(cu.alloc(&b, sl->bytes));
            sl->dsend = (char *)(uintptr_t)a;
            sl->drecv = (char *)(uintptr_t)b;
        }
    }
    return 0;
}

/* Where the call reads and writes, in the host buffers (in place: inside recv). */
static void op_ptrs(const soak_op_t *o, const soak_slot_t *sl, int rank, char **send_p,
                    char **recv_p)
{
    size_t sz = (size_t)types[o->type].size;
    *recv_p = sl->recv;
    *send_p = sl->send;
    if (!o->inplace)
        return;
    if (o->kind == SK_ALLGATHER)
        *send_p = sl->recv + (size_t)rank * o->count * sz;
    else if (o->kind == SK_REDUCESCATTER)
        *recv_p = sl->send + (size_t)rank * o->count * sz;
    else
        *send_p = sl->recv;
}

/* Inputs written, the rest of the receive buffer set to 0xff (a NaN in every float type)
 * so that an output the call never wrote cannot pass (a broadcast's too: in place, the
 * receivers' buffer is not an input). */
static void op_fill(const soak_op_t *o, const soak_slot_t *sl, int rank, int n)
{
    char *send, *recv;
    size_t sz = (size_t)types[o->type].size;
    op_ptrs(o, sl, rank, &send, &recv);
    if (recv != send || o->kind == SK_ALLGATHER || o->kind == SK_BROADCAST)
        memset(sl->recv, 0xff, recv_elems(o, n) * sz);
    if (o->kind == SK_BROADCAST && rank != o->root)
        return;   /* only the root's send buffer is read */
    for (size_t i = 0; i < send_elems(o, n); i++)
        put(o, send, i, value(o, rank, i) * 8);
}

/* ---- issuing --------------------------------------------------------------------------- */

/* The device twin of a host pointer into slot sl (p itself on host buffers). */
static void *twin(const soak_slot_t *sl, char *p, int device)
{
    if (!device)
        return p;
    if (p >= sl->send && p < sl->send + sl->bytes)
        return sl->dsend + (p - sl->send);
    return sl->drecv + (p - sl->recv);
}

static ncclResult_t op_issue(const soak_op_t *o, const soak_slot_t *sl, const soak_comm_t *c,
                             int device)
{
    char *hs, *hr;
    op_ptrs(o, sl, c->rank, &hs, &hr);
    void *s = twin(sl, hs, device), *r = twin(sl, hr, device);
    void *st = device ? (void *)stream : NULL;   /* cudaStream_t and hipStream_t alike */
    ncclDataType_t dt = types[o->type].dt;
    ncclRedOp_t op = (ncclRedOp_t)o->op;
    int n = c->nranks, next = (c->rank + 1) % n, prev = (c->rank + n - 1) % n;
    ncclResult_t res;
    switch (o->kind) {
    case SK_ALLREDUCE: return ncclAllReduce(s, r, o->count, dt, op, c->comm, st);
    case SK_ALLGATHER: return ncclAllGather(s, r, o->count, dt, c->comm, st);
    case SK_REDUCESCATTER: return ncclReduceScatter(s, r, o->count, dt, op, c->comm, st);
    case SK_BROADCAST: return ncclBroadcast(s, r, o->count, dt, o->root, c->comm, st);
    case SK_REDUCE: return ncclReduce(s, r, o->count, dt, op, o->root, c->comm, st);
    case SK_ALLTOALL: return ncclAllToAll(s, r, o->count, dt, c->comm, st);
    default:   /* a ring of send/recv: to the next rank, from the previous one */
        if ((res = ncclGroupStart()) != ncclSuccess)
            return res;
        ncclResult_t r1 = ncclSend(s, o->count, dt, next, c->comm, st);
        ncclResult_t r2 = ncclRecv(r, o->count, dt, prev, c->comm, st);
        res = ncclGroupEnd();
        return r1 != ncclSuccess ? r1 : r2 != ncclSuccess ? r2 : res;
    }
}

/* Host buffers to the device twins (dir 0) or back (1), on the rank's stream. */
static void twins_copy(const soak_op_t *ops, int nops, const soak_comm_t *c, int dir)
{
    for (int i = 0; i < nops; i++) {
        const soak_op_t *o = &ops[i];
        const soak_slot_t *sl = &slots[i];
        size_t sz = (size_t)types[o->type].size;
        size_t sb = send_elems(o, c->nranks) * sz, rb = recv_elems(o, c->nranks) * sz;
        if (dir == 0) {
            CUDRV(cu.h2d((CUdeviceptr)(uintptr_t)sl->dsend, sl->send, sb, stream));
            CUDRV(cu.h2d((CUdeviceptr)(uintptr_t)sl->drecv, sl->recv, rb, stream));
        } else {
            CUDRV(cu.d2h(sl->send, (CUdeviceptr)(uintptr_t)sl->dsend, sb, stream));
            CUDRV(cu.d2h(sl->recv, (CUdeviceptr)(uintptr_t)sl->drecv, rb, stream));
        }
    }
    if (dir == 1)
        CUDRV(cu.stream_sync(stream));
}

/* Issue every op (in a group when several); on device buffers wait for the stream and
 * read the communicator's asynchronous error. */
static ncclResult_t ops_issue(const soak_op_t *ops, int nops, const soak_comm_t *c, int device)
{
    ncclResult_t res = ncclSuccess, r;
    if (device)
        twins_copy(ops, nops, c, 0);
    soak_in_call = 1;
    if (nops > 1)
        res = ncclGroupStart();
    for (int i = 0; i < nops && res == ncclSuccess; i++)
        res = op_issue(&ops[i], &slots[i], c, device);
    if (nops > 1 && (r = ncclGroupEnd()) != ncclSuccess && res == ncclSuccess)
        res = r;
    if (device && res == ncclSuccess) {
        twins_copy(ops, nops, c, 1);
        if (ncclCommGetAsyncError(c->comm, &r) != ncclSuccess || r != ncclSuccess)
            res = r != ncclSuccess ? r : ncclInternalError;
    }
    soak_in_call = 0;
    return res;
}

/* ---- checking ------------------------------------------------------------------------ */

/* Expected output element i (of the receive buffer), in eighths. */
static int expect_k8(const soak_op_t *o, int rank, int n, size_t i)
{
    size_t blk = o->count ? i / o->count : 0, off = o->count ? i % o->count : 0;
    switch (o->kind) {
    case SK_ALLREDUCE: case SK_REDUCE: return reduce_k8(o, n, i);
    case SK_REDUCESCATTER: return reduce_k8(o, n, (size_t)rank * o->count + i);
    case SK_BROADCAST: return value(o, o->root, i) * 8;
    case SK_ALLGATHER: return value(o, (int)blk, off) * 8;
    case SK_ALLTOALL: return value(o, (int)blk, (size_t)rank * o->count + off) * 8;
    default: return value(o, (rank + n - 1) % n, i) * 8;
    }
}

static void op_describe(const soak_op_t *o, int device, char *buf, size_t len)
{
    snprintf(buf, len, "%s %s%s%s count %zu%s root %d salt %u on %s buffers",
             soak_kind_names[o->kind], types[o->type].name,
             is_reduction(o->kind) ? " " : "", is_reduction(o->kind) ? op_names[o->op] : "",
             o->count, o->inplace ? " in place" : "", o->root, o->salt,
             device ? "device" : "host");
}

static void op_check(const soak_op_t *o, const soak_slot_t *sl, const soak_comm_t *c,
                     int device)
{
    char *send, *recv, what[160];
    size_t sz = (size_t)types[o->type].size, n = recv_elems(o, c->nranks);
    if (o->kind == SK_REDUCE && c->rank != o->root)
        return;   /* its receive buffer is not written */
    op_ptrs(o, sl, c->rank, &send, &recv);
    for (size_t i = 0; i < n; i++)
        put(o, sl->expect, i, expect_k8(o, c->rank, c->nranks, i));
    if (memcmp(recv, sl->expect, n * sz) == 0)
        return;
    size_t bad = 0;
    while (memcmp(recv + bad * sz, sl->expect + bad * sz, sz) == 0)
        bad++;
    uint64_t got = 0, want = 0;
    memcpy(&got, recv + bad * sz, sz);
    memcpy(&want, sl->expect + bad * sz, sz);
    op_describe(o, device, what, sizeof(what));
    soak_fail("rank %d of %d: element %zu of %zu is 0x%llx, expected 0x%llx (%s)", c->rank,
              c->nranks, bad, n, (unsigned long long)got, (unsigned long long)want, what);
}

/* ---- one iteration ------------------------------------------------------------------- */

ncclResult_t soak_coll_iter(const soak_comm_t *c, uint64_t *rng, int device, soak_stats_t *st)
{
    soak_op_t ops[MAX_GROUP];
    uint64_t d = soak_rng(rng);
    int nops = d % 4 == 0 ? 2 + (int)((d >> 8) % (MAX_GROUP - 1)) : 1;
    for (int i = 0; i < MAX_GROUP; i++)   /* the same draws however many are used */
        op_draw(&ops[i], rng, c->nranks, slots[i < nops && nops > 1 ? i : 0].bytes);
    for (int i = 0; i < nops; i++)
        op_fill(&ops[i], &slots[i], c->rank, c->nranks);
    ncclResult_t res = ops_issue(ops, nops, c, device);
    if (res != ncclSuccess)
        return res;
    for (int i = 0; i < nops; i++) {
        size_t sz = (size_t)types[ops[i].type].size;
        op_check(&ops[i], &slots[i], c, device);
        st->by_kind[ops[i].kind]++;
        st->bytes += (double)((send_elems(&ops[i], c->nranks) +
                               recv_elems(&ops[i], c->nranks)) * sz);
    }
    st->ops += nops;
    st->groups += nops > 1;
    st->dev_iters += device;
    return ncclSuccess;
}

ncclResult_t soak_coll_agree(const soak_comm_t *c, int32_t *v, int nv)
{
    return ncclAllReduce(v, v, (size_t)nv, ncclInt32, ncclMax, c->comm, NULL);
}
