/*
 * An RCCL program as AMD's users write one: the HIP runtime API from ROCm's headers
 * (<hip/hip_runtime_api.h>, plain C with __HIP_PLATFORM_AMD__) and <rccl/rccl.h>, linked
 * with -lrccl -lamdhip64, so that it needs librccl.so.1 and libamdhip64.so.5.
 * tests/integration/test_rccl_client.sh runs it with braid's lib/braid and the emulated HIP
 * runtime first in LD_LIBRARY_PATH.
 *
 *   rccl_client -n N [-w seconds]
 *
 * The parent forks N ranks before any HIP or RCCL call: a HIP runtime does not survive a
 * fork, and ncclGetUniqueId starts the bootstrap root's thread, whose locks a child forked
 * after it could inherit held (under the sanitizers one in four runs hung so). Rank 0
 * takes the unique id and hands it to the others through a pipe, as MPI would. Each rank binds device rank % hipGetDeviceCount, makes a stream and
 * device buffers, and runs the case table: every collective (all-reduce, broadcast and
 * ncclBcast, reduce, all-gather, reduce-scatter, RCCL's ncclAllToAll, a send/recv ring
 * shift, two collectives in one group), eight types, every op, odd counts, in place and
 * not, inputs copied in with hipMemcpy or on the stream. Every element of every result is
 * checked against the value computed here: "rank R: CASE: FAIL at i: got X want Y".
 * It also checks ncclGetVersion, ncclCommCount, ncclCommUserRank, ncclCommCuDevice,
 * ncclGetErrorString, and that bad arguments give ncclInvalidArgument and leave the
 * communicator working.
 * Exit status: 0 when every rank passed; 1 when one failed, or did not finish within the
 * watchdog's time (the parent names it and kills it); 99 on a usage or setup error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hip/hip_runtime_api.h>
#include <rccl/rccl.h>

#define SENTINEL 0xa5   /* every receive buffer's bytes before a case: unwritten shows */
#define GRACE_S 10      /* how long the other ranks may go on once one has failed */

typedef enum {
    C_ALLREDUCE, C_BROADCAST, C_BCAST, C_REDUCE, C_ALLGATHER, C_REDUCESCATTER, C_ALLTOALL,
    C_SENDRECV,
} coll_t;

enum {
    F_INPLACE = 1,   /* recvbuff is sendbuff (all-gather, reduce-scatter: NCCL's offsets) */
    F_ASYNC = 2,     /* copies in and out on the stream, one synchronize at the end */
    F_GROUP = 4,     /* issued in one group with the next case */
};

typedef struct test_case {
    coll_t coll;
    ncclDataType_t type;
    ncclRedOp_t op;   /* reductions only */
    size_t count;     /* as the call takes it: per rank for all-gather, reduce-scatter and
                       * all-to-all */
    int flags;
} test_case_t;

#define NOP ncclSum   /* the op of a case that does not reduce: not used */

/* Counts: 1 (fewer elements than ranks), odd ones that no chunking divides, 2^16 + 1, a
 * million and three. Every rank runs the table in order; a case flagged F_GROUP and the
 * one after it are one ncclGroupStart/End (the send/recv pair's own group then nests). */
static const test_case_t cases[] = {
    { C_ALLREDUCE, ncclFloat32, ncclSum, 1, 0 },
    { C_ALLREDUCE, ncclFloat32, ncclSum, 1000003, F_ASYNC },
    { C_ALLREDUCE, ncclInt32, ncclMax, 65537, 0 },
    { C_ALLREDUCE, ncclFloat64, ncclMin, 1021, F_INPLACE },
    { C_ALLREDUCE, ncclInt64, ncclProd, 3, 0 },
    { C_ALLREDUCE, ncclFloat16, ncclSum, 4099, F_ASYNC },
    { C_ALLREDUCE, ncclBfloat16, ncclSum, 1021, 0 },
    { C_ALLREDUCE, ncclUint8, ncclSum, 65537, F_ASYNC | F_INPLACE },
    { C_ALLREDUCE, ncclFloat32, ncclAvg, 1021, 0 },
    { C_ALLREDUCE, ncclInt8, ncclMin, 7, 0 },
    { C_BROADCAST, ncclFloat32, NOP, 65537, 0 },
    { C_BROADCAST, ncclUint8, NOP, 262147, F_ASYNC },
    { C_BCAST, ncclInt32, NOP, 1, F_INPLACE },
    { C_BCAST, ncclFloat16, NOP, 1021, F_INPLACE | F_ASYNC },
    { C_REDUCE, ncclFloat32, ncclSum, 65537, 0 },
    { C_REDUCE, ncclInt32, ncclMax, 1021, F_INPLACE | F_ASYNC },
    { C_ALLGATHER, ncclFloat32, NOP, 1, 0 },
    { C_ALLGATHER, ncclInt32, NOP, 65537, F_ASYNC },
    { C_ALLGATHER, ncclFloat16, NOP, 1021, F_INPLACE },
    { C_REDUCESCATTER, ncclFloat32, ncclSum, 1, 0 },
    { C_REDUCESCATTER, ncclInt32, ncclMax, 65537, 0 },
    { C_REDUCESCATTER, ncclFloat64, ncclSum, 1021, F_INPLACE | F_ASYNC },
    { C_ALLTOALL, ncclFloat32, NOP, 1, 0 },
    { C_ALLTOALL, ncclInt32, NOP, 65537, 0 },
    { C_ALLTOALL, ncclUint8, NOP, 1021, F_ASYNC },
    { C_SENDRECV, ncclFloat32, NOP, 1, 0 },
    { C_SENDRECV, ncclInt64, NOP, 65537, F_ASYNC },
    { C_ALLREDUCE, ncclInt32, ncclSum, 4099, F_GROUP },
    { C_ALLGATHER, ncclFloat32, NOP, 1021, 0 },
    { C_SENDRECV, ncclBfloat16, NOP, 1021, F_GROUP | F_ASYNC },
    { C_REDUCESCATTER, ncclFloat32, ncclMin, 4099, F_ASYNC },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* limit: the largest magnitude a result may reach and still be exact in the type */
typedef struct type_info {
    ncclDataType_t type;
    const char *name;
    size_t size;
    long limit;
    int is_signed;
} type_info_t;

static const type_info_t types[] = {
    { ncclInt8, "int8", 1, 127, 1 },          { ncclUint8, "uint8", 1, 255, 0 },
    { ncclInt32, "int32", 4, 1L << 20, 1 },   { ncclInt64, "int64", 8, 1L << 20, 1 },
    { ncclFloat16, "half", 2, 2048, 1 },      { ncclFloat32, "float", 4, 1L << 20, 1 },
    { ncclFloat64, "double", 8, 1L << 20, 1 }, { ncclBfloat16, "bfloat16", 2, 256, 1 },
};

static const char *const coll_names[] = {
    [C_ALLREDUCE] = "allreduce", [C_BROADCAST] = "broadcast", [C_BCAST] = "bcast",
    [C_REDUCE] = "reduce", [C_ALLGATHER] = "allgather", [C_REDUCESCATTER] = "reducescatter",
    [C_ALLTOALL] = "alltoall", [C_SENDRECV] = "sendrecv",
};
static const char *const op_names[] = { "sum", "prod", "max", "min", "avg" };

typedef struct slot {
    void *dsend, *drecv;
    unsigned char *hsend, *hrecv;
} slot_t;

typedef struct rank_ctx {
    int rank, n, dev;
    ncclComm_t comm;
    hipStream_t stream;
    size_t bytes;        /* of each buffer in a slot */
    slot_t slot[2];      /* a group of two cases uses both */
    int failures;
} rank_ctx_t;

#define HIP_OK(_rk, _call)                                                                \
    do {                                                                                  \
        hipError_t _e = (_call);                                                          \
        if (_e != hipSuccess) {                                                           \
            printf("rank %d: FAIL: %s: %s\n", (_rk)->rank, #_call, hipGetErrorString(_e)); \
            return -1;                                                                    \
        }                                                                                 \
    } while (0)
#define NCCL_OK(_rk, _call)                                                               \
    do {                                                                                  \
        ncclResult_t _r = (_call);                                                        \
        if (_r != ncclSuccess) {                                                          \
            printf("rank %d: FAIL: %s: %s (%s)\n", (_rk)->rank, #_call,                   \
                   ncclGetErrorString(_r), ncclGetLastError((_rk)->comm));                \
            return -1;                                                                    \
        }                                                                                 \
    } while (0)

static const type_info_t *type_of(ncclDataType_t t)
{
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (types[i].type == t)
            return &types[i];
    abort();
}

static int reduces(const test_case_t *c)
{
    return c->coll == C_ALLREDUCE || c->coll == C_REDUCE || c->coll == C_REDUCESCATTER;
}

static int root_of(int n)
{
    return n - 1;   /* not rank 0 where there are two ranks or more */
}

static void case_name(size_t ci, char *buf, size_t len)
{
    const test_case_t *c = &cases[ci];
    int grouped = c->flags & F_GROUP || (ci > 0 && cases[ci - 1].flags & F_GROUP);
    snprintf(buf, len, "%s %s%s%s count %zu%s%s%s", coll_names[c->coll],
             type_of(c->type)->name, reduces(c) ? " " : "", reduces(c) ? op_names[c->op] : "",
             c->count, c->flags & F_INPLACE ? " in place" : "", c->flags & F_ASYNC ? " async" : "",
             grouped ? " (two collectives in one group)" : "");
}

/* ---- values: small integers, exact in every type whatever order the library takes ---- */

static uint16_t half_bits(double v)   /* an integer of magnitude <= 2048 */
{
    uint16_t sign = v < 0 ? 0x8000 : 0;
    unsigned m = (unsigned)(v < 0 ? -v : v), e = 0;
    if (m == 0)
        return sign;
    while ((m >> (e + 1)) != 0)
        e++;
    unsigned mant = e <= 10 ? (m << (10 - e)) & 0x3ff : (m >> (e - 10)) & 0x3ff;
    return (uint16_t)(sign | ((e + 15) << 10) | mant);
}

static double half_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f;
    unsigned mant = h & 0x3ffu;
    double v = e == 0 ? ldexp(mant, -24)
             : e == 31 ? (mant != 0 ? NAN : INFINITY)
                       : ldexp(mant | 0x400u, e - 25);
    return h & 0x8000 ? -v : v;
}

static void encode(ncclDataType_t t, double v, void *p)
{
    float f = (float)v;
    uint32_t bits;
    switch (t) {
    case ncclInt8: *(int8_t *)p = (int8_t)v; break;
    case ncclUint8: *(uint8_t *)p = (uint8_t)v; break;
    case ncclInt32: *(int32_t *)p = (int32_t)v; break;
    case ncclInt64: *(int64_t *)p = (int64_t)v; break;
    case ncclFloat16: *(uint16_t *)p = half_bits(v); break;
    case ncclFloat32: *(float *)p = f; break;
    case ncclFloat64: *(double *)p = v; break;
    case ncclBfloat16:
        memcpy(&bits, &f, sizeof(bits));
        *(uint16_t *)p = (uint16_t)(bits >> 16);
        break;
    default: abort();
    }
}

static double decode(ncclDataType_t t, const void *p)
{
    uint32_t bits;
    float f;
    switch (t) {
    case ncclInt8: return *(const int8_t *)p;
    case ncclUint8: return *(const uint8_t *)p;
    case ncclInt32: return *(const int32_t *)p;
    case ncclInt64: return (double)*(const int64_t *)p;
    case ncclFloat16: return half_value(*(const uint16_t *)p);
    case ncclFloat32: return *(const float *)p;
    case ncclFloat64: return *(const double *)p;
    case ncclBfloat16:
        bits = (uint32_t)*(const uint16_t *)p << 16;
        memcpy(&f, &bits, sizeof(f));
        return f;
    default: abort();
    }
}

/* Element idx of rank r's send buffer in case ci (of a job of n ranks). */
static double input(size_t ci, int r, int n, size_t idx)
{
    const test_case_t *c = &cases[ci];
    const type_info_t *t = type_of(c->type);
    size_t x = idx * 7 + (size_t)r * 13 + ci * 5;
    if (reduces(c) && c->op == ncclProd)
        return (double)(1 + (idx + (size_t)r) % 3);
    if (reduces(c) && (c->op == ncclSum || c->op == ncclAvg))
        return (double)(1 + x % (size_t)(t->limit / n));
    long v = (long)(x % (size_t)t->limit);
    return (double)(t->is_signed ? v - t->limit / 2 : v);
}

static double reduced(size_t ci, int n, size_t idx)
{
    ncclRedOp_t op = cases[ci].op;
    double acc = input(ci, 0, n, idx);
    for (int r = 1; r < n; r++) {
        double v = input(ci, r, n, idx);
        if (op == ncclSum || op == ncclAvg)
            acc += v;
        else if (op == ncclProd)
            acc *= v;
        else if (op == ncclMax)
            acc = v > acc ? v : acc;
        else
            acc = v < acc ? v : acc;
    }
    return op == ncclAvg ? acc / n : acc;
}

/* What element i of rank me's receive buffer holds after case ci; 0: nothing defined. */
static int expected(size_t ci, int me, int n, size_t i, double *want_p)
{
    size_t cnt = cases[ci].count;
    switch (cases[ci].coll) {
    case C_ALLREDUCE: *want_p = reduced(ci, n, i); return 1;
    case C_BROADCAST:
    case C_BCAST: *want_p = input(ci, root_of(n), n, i); return 1;
    case C_REDUCE:
        if (me != root_of(n))
            return 0;
        *want_p = reduced(ci, n, i);
        return 1;
    case C_ALLGATHER: *want_p = input(ci, (int)(i / cnt), n, i % cnt); return 1;
    case C_REDUCESCATTER: *want_p = reduced(ci, n, (size_t)me * cnt + i); return 1;
    case C_ALLTOALL: *want_p = input(ci, (int)(i / cnt), n, (size_t)me * cnt + i % cnt); return 1;
    case C_SENDRECV: *want_p = input(ci, (me + n - 1) % n, n, i); return 1;
    }
    return 0;
}

/* ---- one case: buffers, the call, the check ----------------------------------------- */

static size_t send_elems(const test_case_t *c, int n)
{
    int whole = c->coll == C_REDUCESCATTER || c->coll == C_ALLTOALL;
    return whole ? c->count * (size_t)n : c->count;
}

static size_t recv_elems(const test_case_t *c, int n)
{
    int whole = c->coll == C_ALLGATHER || c->coll == C_ALLTOALL;
    return whole ? c->count * (size_t)n : c->count;
}

/* In place, all-gather sends from its own block of recvbuff and reduce-scatter receives
 * into its own block of sendbuff, as NCCL defines it. */
static void pointers(const rank_ctx_t *rk, size_t ci, const slot_t *s, void **send_p,
                     void **recv_p)
{
    const test_case_t *c = &cases[ci];
    size_t block = c->count * type_of(c->type)->size * (size_t)rk->rank;
    *send_p = s->dsend;
    *recv_p = s->drecv;
    if (!(c->flags & F_INPLACE))
        return;
    *send_p = s->drecv;
    if (c->coll == C_ALLGATHER)
        *send_p = (char *)s->drecv + block;
    else if (c->coll == C_REDUCESCATTER)
        *recv_p = (char *)s->drecv + block;
}

static int prepare(rank_ctx_t *rk, size_t ci, const slot_t *s)
{
    const test_case_t *c = &cases[ci];
    size_t es = type_of(c->type)->size, ns = send_elems(c, rk->n);
    void *send, *recv;
    pointers(rk, ci, s, &send, &recv);
    for (size_t i = 0; i < ns; i++)
        encode(c->type, input(ci, rk->rank, rk->n, i), s->hsend + i * es);
    if (c->flags & F_ASYNC) {
        HIP_OK(rk, hipMemsetAsync(s->drecv, SENTINEL, rk->bytes, rk->stream));
        HIP_OK(rk, hipMemcpyAsync(send, s->hsend, ns * es, hipMemcpyHostToDevice, rk->stream));
    } else {
        HIP_OK(rk, hipMemset(s->drecv, SENTINEL, rk->bytes));
        HIP_OK(rk, hipMemcpy(send, s->hsend, ns * es, hipMemcpyHostToDevice));
    }
    return 0;
}

static int issue(rank_ctx_t *rk, size_t ci, const slot_t *s)
{
    const test_case_t *c = &cases[ci];
    int n = rk->n, root = root_of(n);
    void *send, *recv;
    pointers(rk, ci, s, &send, &recv);
    switch (c->coll) {
    case C_ALLREDUCE:
        NCCL_OK(rk, ncclAllReduce(send, recv, c->count, c->type, c->op, rk->comm, rk->stream));
        break;
    case C_BROADCAST:
        NCCL_OK(rk, ncclBroadcast(send, recv, c->count, c->type, root, rk->comm, rk->stream));
        break;
    case C_BCAST:
        NCCL_OK(rk, ncclBcast(recv, c->count, c->type, root, rk->comm, rk->stream));
        break;
    case C_REDUCE:
        NCCL_OK(rk, ncclReduce(send, recv, c->count, c->type, c->op, root, rk->comm, rk->stream));
        break;
    case C_ALLGATHER:
        NCCL_OK(rk, ncclAllGather(send, recv, c->count, c->type, rk->comm, rk->stream));
        break;
    case C_REDUCESCATTER:
        NCCL_OK(rk, ncclReduceScatter(send, recv, c->count, c->type, c->op, rk->comm,
                                      rk->stream));
        break;
    case C_ALLTOALL:
        NCCL_OK(rk, ncclAllToAll(send, recv, c->count, c->type, rk->comm, rk->stream));
        break;
    case C_SENDRECV:   /* ring shift: to the next rank, from the previous one */
        NCCL_OK(rk, ncclGroupStart());
        NCCL_OK(rk, ncclSend(send, c->count, c->type, (rk->rank + 1) % n, rk->comm, rk->stream));
        NCCL_OK(rk, ncclRecv(recv, c->count, c->type, (rk->rank + n - 1) % n, rk->comm,
                             rk->stream));
        NCCL_OK(rk, ncclGroupEnd());
        break;
    }
    return 0;
}

static void check(rank_ctx_t *rk, size_t ci, const slot_t *s)
{
    const test_case_t *c = &cases[ci];
    size_t es = type_of(c->type)->size, nr = recv_elems(c, rk->n), bad = 0, first = 0;
    double got = 0, want = 0, first_got = 0, first_want = 0;
    unsigned char tmp[8];
    for (size_t i = 0; i < nr; i++) {
        if (!expected(ci, rk->rank, rk->n, i, &want))
            continue;
        encode(c->type, want, tmp);   /* what the type holds of it */
        want = decode(c->type, tmp);
        got = decode(c->type, s->hrecv + i * es);
        int ok = c->op == ncclAvg && reduces(c) ? fabs(got - want) <= 1e-6 * fabs(want)
                                                : got == want;
        if (!ok && bad++ == 0) {
            first = i;
            first_got = got;
            first_want = want;
        }
    }
    if (bad == 0)
        return;
    char name[128];
    case_name(ci, name, sizeof(name));
    printf("rank %d: %s: FAIL at %zu: got %.17g want %.17g (%zu of %zu elements wrong)\n",
           rk->rank, name, first, first_got, first_want, bad, nr);
    rk->failures++;
}

/* Cases ci .. ci+k-1 (k is 2 for a group), their results checked. */
static int run_cases(rank_ctx_t *rk, size_t ci, size_t k)
{
    for (size_t j = 0; j < k; j++)
        if (prepare(rk, ci + j, &rk->slot[j]) != 0)
            return -1;
    if (k > 1)
        NCCL_OK(rk, ncclGroupStart());
    for (size_t j = 0; j < k; j++)
        if (issue(rk, ci + j, &rk->slot[j]) != 0)
            return -1;
    if (k > 1)
        NCCL_OK(rk, ncclGroupEnd());
    for (size_t j = 0; j < k; j++) {
        const test_case_t *c = &cases[ci + j];
        size_t nb = recv_elems(c, rk->n) * type_of(c->type)->size;
        void *send, *recv;
        pointers(rk, ci + j, &rk->slot[j], &send, &recv);
        if (c->flags & F_ASYNC)
            HIP_OK(rk, hipMemcpyAsync(rk->slot[j].hrecv, recv, nb, hipMemcpyDeviceToHost,
                                      rk->stream));
    }
    HIP_OK(rk, hipStreamSynchronize(rk->stream));
    for (size_t j = 0; j < k; j++) {
        const test_case_t *c = &cases[ci + j];
        size_t nb = recv_elems(c, rk->n) * type_of(c->type)->size;
        void *send, *recv;
        pointers(rk, ci + j, &rk->slot[j], &send, &recv);
        if (!(c->flags & F_ASYNC))
            HIP_OK(rk, hipMemcpy(rk->slot[j].hrecv, recv, nb, hipMemcpyDeviceToHost));
        check(rk, ci + j, &rk->slot[j]);
    }
    return 0;
}

/* ---- the API around the collectives ------------------------------------------------- */

#define EXPECT(_rk, _cond, ...)                                                           \
    do {                                                                                  \
        if (!(_cond)) {                                                                   \
            printf("rank %d: FAIL: ", (_rk)->rank);                                       \
            printf(__VA_ARGS__);                                                          \
            printf("\n");                                                                 \
            (_rk)->failures++;                                                            \
        }                                                                                 \
    } while (0)

static int check_queries(rank_ctx_t *rk)
{
    int v = 0, count = -1, rank = -1, dev = -1;
    NCCL_OK(rk, ncclGetVersion(&v));
    EXPECT(rk, v == NCCL_VERSION_CODE, "ncclGetVersion gives %d, rccl.h says %d", v,
           NCCL_VERSION_CODE);
    NCCL_OK(rk, ncclCommCount(rk->comm, &count));
    EXPECT(rk, count == rk->n, "ncclCommCount gives %d, want %d", count, rk->n);
    NCCL_OK(rk, ncclCommUserRank(rk->comm, &rank));
    EXPECT(rk, rank == rk->rank, "ncclCommUserRank gives %d, want %d", rank, rk->rank);
    NCCL_OK(rk, ncclCommCuDevice(rk->comm, &dev));
    EXPECT(rk, dev == rk->dev, "ncclCommCuDevice gives %d, want the HIP device %d", dev, rk->dev);
    const char *ok = ncclGetErrorString(ncclSuccess);
    const char *inval = ncclGetErrorString(ncclInvalidArgument);
    EXPECT(rk, ok != NULL && inval != NULL && inval[0] != '\0' && strcmp(ok, inval) != 0,
           "ncclGetErrorString: \"%s\" for ncclSuccess, \"%s\" for ncclInvalidArgument",
           ok ? ok : "(null)", inval ? inval : "(null)");
    return 0;
}

/* Each bad call is refused before anything is queued, on this rank alone: the
 * communicator stays usable (the cases run after it). */
static void check_bad_args(rank_ctx_t *rk)
{
    void *buf = rk->slot[0].dsend;
    struct {
        const char *what;
        ncclResult_t r;
    } bad[] = {
        { "ncclAllReduce with a NULL sendbuff",
          ncclAllReduce(NULL, buf, 16, ncclFloat32, ncclSum, rk->comm, rk->stream) },
        { "ncclAllReduce with datatype ncclNumTypes",
          ncclAllReduce(buf, buf, 16, (ncclDataType_t)ncclNumTypes, ncclSum, rk->comm,
                        rk->stream) },
        { "ncclBroadcast to root nranks",
          ncclBroadcast(buf, buf, 16, ncclFloat32, rk->n, rk->comm, rk->stream) },
        { "ncclSend to peer nranks", ncclSend(buf, 16, ncclFloat32, rk->n, rk->comm, rk->stream) },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        EXPECT(rk, bad[i].r == ncclInvalidArgument, "%s gives %d (%s), want ncclInvalidArgument",
               bad[i].what, (int)bad[i].r, ncclGetErrorString(bad[i].r));
    const char *last = ncclGetLastError(rk->comm);
    EXPECT(rk, last != NULL && last[0] != '\0', "ncclGetLastError is empty after a refused call");
}

/* ---- a rank ------------------------------------------------------------------------- */

static size_t bytes_needed(int n)
{
    size_t most = 0;
    for (size_t ci = 0; ci < NCASES; ci++) {
        const test_case_t *c = &cases[ci];
        size_t e = send_elems(c, n) > recv_elems(c, n) ? send_elems(c, n) : recv_elems(c, n);
        if (e * type_of(c->type)->size > most)
            most = e * type_of(c->type)->size;
    }
    return most;
}

static int rank_setup(rank_ctx_t *rk, ncclUniqueId id)
{
    int ndev = 0, version = 0;
    hipDeviceProp_t prop;
    HIP_OK(rk, hipGetDeviceCount(&ndev));
    if (ndev < 1) {
        printf("rank %d: FAIL: hipGetDeviceCount gives %d devices\n", rk->rank, ndev);
        return -1;
    }
    rk->dev = rk->rank % ndev;
    HIP_OK(rk, hipSetDevice(rk->dev));
    HIP_OK(rk, hipRuntimeGetVersion(&version));
    HIP_OK(rk, hipGetDeviceProperties(&prop, rk->dev));
    printf("rank %d: device %d of %d (%.64s), HIP runtime %d\n", rk->rank, rk->dev, ndev,
           prop.gcnArchName, version);
    HIP_OK(rk, hipStreamCreate(&rk->stream));
    rk->bytes = bytes_needed(rk->n);
    for (int j = 0; j < 2; j++) {
        slot_t *s = &rk->slot[j];
        HIP_OK(rk, hipMalloc(&s->dsend, rk->bytes));
        HIP_OK(rk, hipMalloc(&s->drecv, rk->bytes));
        s->hsend = malloc(rk->bytes);
        s->hrecv = malloc(rk->bytes);
        if (s->hsend == NULL || s->hrecv == NULL) {
            printf("rank %d: FAIL: cannot allocate %zu bytes of host memory\n", rk->rank,
                   rk->bytes);
            return -1;
        }
    }
    NCCL_OK(rk, ncclCommInitRank(&rk->comm, rk->n, id, rk->rank));
    return 0;
}

static int rank_teardown(rank_ctx_t *rk)
{
    ncclResult_t async = ncclSuccess;
    NCCL_OK(rk, ncclCommGetAsyncError(rk->comm, &async));
    EXPECT(rk, async == ncclSuccess, "ncclCommGetAsyncError gives %s",
           ncclGetErrorString(async));
    NCCL_OK(rk, ncclCommDestroy(rk->comm));
    for (int j = 0; j < 2; j++) {
        HIP_OK(rk, hipFree(rk->slot[j].dsend));
        HIP_OK(rk, hipFree(rk->slot[j].drecv));
        free(rk->slot[j].hsend);
        free(rk->slot[j].hrecv);
    }
    HIP_OK(rk, hipStreamDestroy(rk->stream));
    return 0;
}

/* Rank 0's unique id, handed to the others through the pipe fds (read end, write end). */
static int share_id(int rank, int n, const int fds[2], ncclUniqueId *id)
{
    if (rank == 0) {
        ncclResult_t r = ncclGetUniqueId(id);
        close(fds[0]);
        if (r != ncclSuccess) {
            printf("rank 0: FAIL: ncclGetUniqueId: %s\n", ncclGetErrorString(r));
            close(fds[1]);
            return 1;
        }
        for (int k = 1; k < n; k++)   /* 128 bytes: each write whole (PIPE_BUF) */
            if (write(fds[1], id, sizeof(*id)) != (ssize_t)sizeof(*id)) {
                printf("rank 0: FAIL: handing the unique id on: %s\n", strerror(errno));
                close(fds[1]);
                return 1;
            }
        close(fds[1]);
        return 0;
    }
    close(fds[1]);
    ssize_t got = read(fds[0], id, sizeof(*id));
    close(fds[0]);
    if (got != (ssize_t)sizeof(*id)) {
        printf("rank %d: FAIL: no unique id from rank 0 (%zd bytes)\n", rank, got);
        return 1;
    }
    return 0;
}

static int rank_main(int rank, int n, const int fds[2])
{
    rank_ctx_t rk = { .rank = rank, .n = n };
    ncclUniqueId id;
    if (share_id(rank, n, fds, &id) != 0)
        return 1;
    if (rank_setup(&rk, id) != 0)
        return 1;
    if (check_queries(&rk) != 0)
        return 1;
    check_bad_args(&rk);
    for (size_t ci = 0; ci < NCASES; ci++) {
        size_t k = cases[ci].flags & F_GROUP && ci + 1 < NCASES ? 2 : 1;
        if (run_cases(&rk, ci, k) != 0)
            return 1;   /* a call failed: the ranks no longer agree on what comes next */
        ci += k - 1;
    }
    if (rank_teardown(&rk) != 0)
        return 1;
    if (rk.failures != 0) {
        printf("rank %d: %d check%s failed\n", rank, rk.failures, rk.failures == 1 ? "" : "s");
        return 1;
    }
    printf("rank %d: %zu cases passed\n", rank, NCASES);
    return 0;
}

/* ---- the parent: the unique id, the ranks, a bounded wait --------------------------- */

/* a rank's code: RUNNING, its exit status, KILLED_BY + the signal that ended it, or
 * KILLED_HERE (by reap, named there) */
#define RUNNING (-1)
#define KILLED_HERE (-2)
#define KILLED_BY 1000

static volatile sig_atomic_t timed_out;

static void on_alarm(int sig)
{
    (void)sig;
    timed_out = 1;
}

/* Waits for the ranks, watchdog_s at most, and GRACE_S at most once one has failed (the
 * others may wait for it for ever); then kills those still running, naming them. */
static int reap(const pid_t *pids, int *code, int n, int watchdog_s)
{
    struct sigaction sa = { .sa_handler = on_alarm };   /* no SA_RESTART: waitpid returns */
    int left = n, first_failed = -1;
    unsigned grace = 0;
    sigaction(SIGALRM, &sa, NULL);
    alarm((unsigned)watchdog_s);
    while (left > 0 && !timed_out) {
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid < 0)
            break;
        for (int r = 0; r < n; r++) {
            if (pids[r] != pid)
                continue;
            code[r] = WIFEXITED(status) ? WEXITSTATUS(status) : KILLED_BY + WTERMSIG(status);
            left--;
            if (code[r] != 0 && first_failed < 0) {
                unsigned rest = alarm(0);
                grace = rest < GRACE_S ? rest : GRACE_S;
                alarm(grace);
                first_failed = r;
            }
        }
    }
    alarm(0);
    for (int r = 0; r < n; r++)
        if (code[r] == RUNNING)
            kill(pids[r], SIGKILL);
    for (int r = 0; r < n; r++) {
        if (code[r] != RUNNING)
            continue;
        waitpid(pids[r], NULL, 0);
        if (first_failed >= 0)
            printf("rccl_client: rank %d (pid %d) was still running %u s after rank %d "
                   "failed: killed\n", r, (int)pids[r], grace, first_failed);
        else
            printf("rccl_client: rank %d (pid %d) did not finish in %d s: killed\n", r,
                   (int)pids[r], watchdog_s);
        code[r] = KILLED_HERE;
    }
    for (int r = 0; r < n; r++)
        if (code[r] != 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    int n = 0, watchdog_s = 60, opt;
    while ((opt = getopt(argc, argv, "n:w:")) != -1) {
        if (opt == 'n')
            n = atoi(optarg);
        else if (opt == 'w')
            watchdog_s = atoi(optarg);
        else
            n = -1;
    }
    if (n < 1 || n > 64 || watchdog_s < 1 || optind != argc) {
        fprintf(stderr, "usage: rccl_client -n RANKS [-w SECONDS]\n");
        return 99;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);   /* the ranks' lines interleave whole */
    int fds[2];
    if (pipe(fds) != 0) {
        perror("rccl_client: pipe");
        return 99;
    }
    pid_t pids[64];
    int code[64];
    for (int rank = 0; rank < n; rank++) {
        code[rank] = RUNNING;
        pids[rank] = fork();
        if (pids[rank] == 0)
            exit(rank_main(rank, n, fds));
        if (pids[rank] < 0) {
            perror("rccl_client: fork");
            for (int k = 0; k < rank; k++)
                kill(pids[k], SIGKILL);
            return 99;
        }
    }
    close(fds[0]);
    close(fds[1]);
    int rc = reap(pids, code, n, watchdog_s);
    for (int rank = 0; rank < n; rank++) {
        if (code[rank] >= KILLED_BY)
            printf("rccl_client: rank %d (pid %d) ended by signal %d\n", rank, (int)pids[rank],
                   code[rank] - KILLED_BY);
        else if (code[rank] > 0)
            printf("rccl_client: rank %d exited with %d\n", rank, code[rank]);
    }
    printf("rccl_client: %d rank%s: %s\n", n, n == 1 ? "" : "s", rc == 0 ? "PASS" : "FAIL");
    return rc;
}
