/*
 * bad_args: every entry point, fed each class of bad argument, must return the code NCCL
 * 2.28 returns for it, set a last error (ncclGetLastError) that names the argument and its
 * value, leave output buffers and output parameters untouched, and leave the communicator
 * working (a correct all-reduce follows every bad collective call).
 *
 * The code of each call is pinned: ncclInvalidArgument where NCCL's argument checks refuse
 * the call (PtrCheck, CommCheck, ArgsCheck, the rank and config checks of init.cc),
 * ncclInvalidUsage where NCCL names misuse (ncclGroupEnd outside a group, a device listed
 * twice, a handle that was never registered), and where NCCL has no check of its own (it
 * would crash or fail later) braid refuses the call as a bad argument, as NCCL's nearest
 * check does; those lines say so. Calls NCCL accepts as no-ops are checked to succeed.
 *
 * One process: two ranks from ncclCommInitAll (driven by this thread with groups), a second
 * such pair, and communicators already destroyed or aborted.
 *
 * Classes: NULL where data is needed; datatype, op, root, peer out of range; a count whose
 * byte size overflows; braid.h's uneven collectives (a count that is not the rank's,
 * overlapping blocks); a PreMulSum op of another communicator or datatype; a destroyed or
 * aborted communicator; ncclGroupEnd without ncclGroupStart; bad config magic or fields;
 * nranks 0; rank out of range; a bad unique id; and a bad call inside a group.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "braid.h"
#include "fault_util.h"
#include "rccl/rccl.h"

#define NOUT 64
#define CANARY 0xcd

/* The codes, short: every BAD line names the one NCCL returns. */
#define IA ncclInvalidArgument
#define IU ncclInvalidUsage

static ncclComm_t A[2], B[2], dead, aborted;
static int32_t in[NOUT], out[NOUT];
static int checks;

static char primed[1024];

static const char *primer(void)
{
    /* a known last error, so that a stale text is not mistaken for the new one */
    ncclRedOpDestroy(ncclSum, NULL);
    snprintf(primed, sizeof(primed), "%s", ncclGetLastError(NULL));
    return primed;
}

static int out_intact(void)
{
    for (size_t i = 0; i < sizeof(out); i++)
        if (((unsigned char *)out)[i] != CANARY)
            return 0;
    return 1;
}

/* The comm pair A still works: a grouped all-reduce with a known result. */
static void comm_works(const char *after)
{
    int32_t x[2] = { 3, 4 }, y[2] = { 0, 0 };
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; i < 2 && r == ncclSuccess; i++)
        r = ncclAllReduce(&x[i], &y[i], 1, ncclInt32, ncclSum, A[i], NULL);
    ncclResult_t re = ncclGroupEnd();
    if (r != ncclSuccess || re != ncclSuccess || y[0] != 7 || y[1] != 7)
        ft_fail("after %s: the communicator no longer works (%d/%d, got %d %d): %s", after,
                (int)r, (int)re, y[0], y[1], ncclGetLastError(NULL));
    for (int i = 0; i < 2; i++) {
        ncclResult_t as = ncclInternalError;
        if (ncclCommGetAsyncError(A[i], &as) != ncclSuccess || as != ncclSuccess)
            ft_fail("after %s: comm %d reports async error %d", after, i, (int)as);
    }
}

static const char *result_name(ncclResult_t r)
{
    static const char *const names[] = { "ncclSuccess", "ncclUnhandledCudaError",
                                         "ncclSystemError", "ncclInternalError",
                                         "ncclInvalidArgument", "ncclInvalidUsage",
                                         "ncclRemoteError", "ncclInProgress", "ncclTimeout" };
    return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "an unknown code";
}

static void expect_bad(const char *what, ncclResult_t want, ncclResult_t r, const char *sub1,
                       const char *sub2, const char *prime)
{
    const char *err = ncclGetLastError(NULL);
    checks++;
    if (r != want)
        ft_fail("%s: returned %d (%s), NCCL returns %d (%s)", what, (int)r, result_name(r),
                (int)want, result_name(want));
    else if (strcmp(err, prime) == 0)
        ft_fail("%s: no last error was set", what);
    else if ((sub1 && strstr(err, sub1) == NULL) || (sub2 && strstr(err, sub2) == NULL))
        ft_fail("%s: last error '%s' does not name '%s'%s%s", what, err, sub1,
                sub2 ? " and " : "", sub2 ? sub2 : "");
    if (!out_intact())
        ft_fail("%s: the output buffer was written", what);
}

/* BAD(what, the code NCCL returns, call, "substring", "substring or NULL") */
#define BAD(_what, _want, _call, _s1, _s2)                                                  \
    do {                                                                                    \
        memset(out, CANARY, sizeof(out));                                                   \
        const char *_p = primer();                                                          \
        expect_bad((_what), (_want), (_call), (_s1), (_s2), _p);                            \
    } while (0)

/* The same, then the communicator must still work. */
#define BADC(_what, _want, _call, _s1, _s2)                                                 \
    do {                                                                                    \
        BAD(_what, _want, _call, _s1, _s2);                                                 \
        comm_works(_what);                                                                  \
    } while (0)

static void bad_init(void)
{
    ncclUniqueId id, zero, junk;
    ncclComm_t nc = (ncclComm_t)&nc, all[2] = { (ncclComm_t)&nc, (ncclComm_t)&nc };
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER, cfg2 = NCCL_CONFIG_INITIALIZER;
    int dup[2] = { 1, 1 };
    memset(&zero, 0, sizeof(zero));
    memset(&junk, 0x5a, sizeof(junk));
    if (ncclGetUniqueId(&id) != ncclSuccess)
        ft_fail("ncclGetUniqueId failed: %s", ncclGetLastError(NULL));
    BAD("ncclGetVersion(NULL)", IA, ncclGetVersion(NULL), "version", "NULL");
    BAD("ncclGetUniqueId(NULL)", IA, ncclGetUniqueId(NULL), "uniqueId", "NULL");
    BAD("ncclCommInitRank(newcomm NULL)", IA, ncclCommInitRank(NULL, 2, id, 0), "newcomm",
        "NULL");
    BAD("ncclCommInitRank(nranks 0)", IA, ncclCommInitRank(&nc, 0, id, 0), "nranks", " 0");
    BAD("ncclCommInitRank(nranks -3)", IA, ncclCommInitRank(&nc, -3, id, 0), "nranks", "-3");
    BAD("ncclCommInitRank(rank 2 of 2)", IA, ncclCommInitRank(&nc, 2, id, 2), "rank 2", NULL);
    BAD("ncclCommInitRank(rank -1)", IA, ncclCommInitRank(&nc, 2, id, -1), "rank -1", NULL);
    /* NCCL does not look into the id (its bootstrap fails later): braid refuses it */
    BAD("ncclCommInitRank(zero id)", IA, ncclCommInitRank(&nc, 2, zero, 0), "unique id",
        "magic");
    BAD("ncclCommInitRank(junk id)", IA, ncclCommInitRank(&nc, 2, junk, 0), "unique id",
        "0x5a5a5a5a");
    cfg.magic = 0x12345678;
    BAD("ncclCommInitRankConfig(bad magic)", IA, ncclCommInitRankConfig(&nc, 2, id, 0, &cfg),
        "magic", "0x12345678");
    cfg2.blocking = 7;
    BAD("ncclCommInitRankConfig(blocking 7)", IA,
        ncclCommInitRankConfig(&nc, 2, id, 0, &cfg2), "blocking", "7");
    /* NCCL copies the ids from the NULL (a crash): braid refuses it */
    BAD("ncclCommInitRankScalable(commIds NULL)", IA,
        ncclCommInitRankScalable(&nc, 2, 0, 1, NULL, NULL), "commIds", "NULL");
    BAD("ncclCommInitRankScalable(nId 0)", IA,
        ncclCommInitRankScalable(&nc, 2, 0, 0, &id, NULL), "nId", "0");
    BAD("ncclCommInitAll(comms NULL)", IA, ncclCommInitAll(NULL, 2, NULL), "comms", "NULL");
    /* NCCL refuses ndev < 0 (ncclInvalidArgument), then reads comms[0] of none: braid
     * refuses 0 with the same code */
    BAD("ncclCommInitAll(ndev 0)", IA, ncclCommInitAll(all, 0, NULL), "ndev", "0");
    BAD("ncclCommInitAll(devlist 1,1)", IU, ncclCommInitAll(all, 2, dup), "device 1", NULL);
    if (nc != (ncclComm_t)&nc || all[0] != (ncclComm_t)&nc || all[1] != (ncclComm_t)&nc)
        ft_fail("a failed init wrote its comm output parameter");
}

static void bad_comm_calls(void)
{
    ncclComm_t nc = (ncclComm_t)&nc;
    int excl_bad = 7, excl = 1, self = 0, cnt = -12345;
    ncclResult_t res = (ncclResult_t)-7;
    /* NCCL leaves colors other than NCCL_SPLIT_NOCOLOR below 0 to its async init: braid
     * refuses them at the call */
    BAD("ncclCommSplit(color -5)", IA, ncclCommSplit(A[0], -5, 0, &nc, NULL), "color -5",
        NULL);
    BAD("ncclCommSplit(newcomm NULL)", IA, ncclCommSplit(A[0], 0, 0, NULL, NULL), "newcomm",
        NULL);
    BAD("ncclCommSplit(dead comm)", IA, ncclCommSplit(dead, 0, 0, &nc, NULL), "not a live",
        NULL);
    /* NCCL checks neither the ranks of the list nor unknown flag bits: braid refuses them */
    BAD("ncclCommShrink(exclude 7)", IA, ncclCommShrink(A[0], &excl_bad, 1, &nc, NULL, 0),
        "excludeRanksList", "7");
    BAD("ncclCommShrink(flags 5)", IA, ncclCommShrink(A[0], &excl, 1, &nc, NULL, 5),
        "shrinkFlags", "5");
    BAD("ncclCommShrink(list NULL)", IA, ncclCommShrink(A[0], NULL, 1, &nc, NULL, 0),
        "excludeRanksList", NULL);
    BAD("ncclCommShrink(count 0)", IA, ncclCommShrink(A[0], &excl, 0, &nc, NULL, 0),
        "excludeRanksCount", "0");
    BAD("ncclCommShrink(excluding the caller)", IA, ncclCommShrink(A[0], &self, 1, &nc, NULL, 0),
        "rank 0", "excludeRanksList");
    BAD("ncclCommRevoke(flags 3)", IA, ncclCommRevoke(A[0], 3), "revokeFlags", "3");
    BAD("ncclCommCount(count NULL)", IA, ncclCommCount(A[0], NULL), "count", "NULL");
    BAD("ncclCommCount(comm NULL)", IA, ncclCommCount(NULL, &cnt), "comm", "NULL");
    BAD("ncclCommUserRank(rank NULL)", IA, ncclCommUserRank(A[0], NULL), "rank", "NULL");
    BAD("ncclCommUserRank(dead comm)", IA, ncclCommUserRank(dead, &cnt), "not a live", NULL);
    BAD("ncclCommCuDevice(device NULL)", IA, ncclCommCuDevice(A[0], NULL), "device", "NULL");
    BAD("ncclCommGetAsyncError(NULL)", IA, ncclCommGetAsyncError(A[0], NULL), "asyncError",
        "NULL");
    BAD("ncclCommGetAsyncError(aborted)", IA, ncclCommGetAsyncError(aborted, &res),
        "not a live", NULL);
    /* NCCL reads a freed communicator here; its CommCheck (ncclInvalidArgument) is the
     * nearest check, and braid's registry makes it always hold */
    BAD("ncclCommFinalize(dead comm)", IA, ncclCommFinalize(dead), "not a live", NULL);
    BAD("ncclCommDestroy(dead comm)", IA, ncclCommDestroy(dead), "not a live", NULL);
    BAD("ncclCommAbort(aborted comm)", IA, ncclCommAbort(aborted), "not a live", NULL);
    if (nc != (ncclComm_t)&nc || cnt != -12345 || res != (ncclResult_t)-7)
        ft_fail("a failed call wrote its output parameter");
    comm_works("bad communicator calls");
}

static void bad_mem_and_ops(void)
{
    void *hb = NULL, *hc = (void *)&hc;
    ncclWindow_t win = (ncclWindow_t)&win;
    ncclRedOp_t op = (ncclRedOp_t)12345, opb;
    float s = 2;
    /* NCCL hands the pointer to cudaMalloc, whose cudaErrorInvalidValue it returns as
     * ncclUnhandledCudaError */
    BAD("ncclMemAlloc(ptr NULL)", ncclUnhandledCudaError, ncclMemAlloc(NULL, 64), "ptr",
        "NULL");
    BAD("ncclCommRegister(buff NULL)", IA, ncclCommRegister(A[0], NULL, 64, &hc), "buffer",
        "64");
    /* NCCL writes through the NULL: braid refuses it */
    BAD("ncclCommRegister(handle NULL)", IA, ncclCommRegister(A[0], out, 64, NULL), "handle",
        "NULL");
    if (ncclCommRegister(B[0], out, 64, &hb) != ncclSuccess)
        ft_fail("ncclCommRegister on comm B failed: %s", ncclGetLastError(NULL));
    BAD("ncclCommDeregister(handle of another comm)", IU, ncclCommDeregister(A[0], hb),
        "not registered", NULL);
    /* NCCL passes unknown flag bits on: braid refuses them */
    BAD("ncclCommWindowRegister(flags 0x100)", IA,
        ncclCommWindowRegister(A[0], out, 64, &win, 0x100), "winFlags", "0x100");
    /* NCCL checks none of these four (a NULL is dereferenced, the others taken as they
     * are): braid refuses them */
    BAD("ncclRedOpCreatePreMulSum(op NULL)", IA,
        ncclRedOpCreatePreMulSum(NULL, &s, ncclFloat32, ncclScalarHostImmediate, A[0]), "op",
        "NULL");
    BAD("ncclRedOpCreatePreMulSum(scalar NULL)", IA,
        ncclRedOpCreatePreMulSum(&op, NULL, ncclFloat32, ncclScalarHostImmediate, A[0]),
        "scalar", "NULL");
    BAD("ncclRedOpCreatePreMulSum(datatype 12)", IA,
        ncclRedOpCreatePreMulSum(&op, &s, (ncclDataType_t)12, ncclScalarHostImmediate, A[0]),
        "datatype", "12");
    BAD("ncclRedOpCreatePreMulSum(residence 9)", IA,
        ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, (ncclScalarResidence_t)9, A[0]),
        "residence", "9");
    BAD("ncclRedOpCreatePreMulSum(dead comm)", IA,
        ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, ncclScalarHostImmediate, dead),
        "not a live", NULL);
    BAD("ncclRedOpDestroy(ncclSum)", IA, ncclRedOpDestroy(ncclSum, A[0]), "op", "0");
    BAD("ncclRedOpDestroy(op 77)", IA, ncclRedOpDestroy((ncclRedOp_t)77, A[0]), "op", "77");
    if (ncclRedOpCreatePreMulSum(&opb, &s, ncclFloat32, ncclScalarHostImmediate, B[0]) ==
        ncclSuccess)
        BAD("ncclRedOpDestroy(op of another comm)", IA, ncclRedOpDestroy(opb, A[0]), "op",
            NULL);
    if (hc != (void *)&hc || win != (ncclWindow_t)&win || op != (ncclRedOp_t)12345)
        ft_fail("a failed call wrote its output parameter");
    ncclCommDeregister(B[0], hb);
    comm_works("bad memory and operator calls");
}

static void bad_group(void)
{
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    BAD("ncclGroupEnd without ncclGroupStart", IU, ncclGroupEnd(), "ncclGroupEnd", "no group");
    BAD("ncclGroupSimulateEnd without a group", IU, ncclGroupSimulateEnd(&sim), "no group",
        NULL);
    comm_works("bad group calls");
}

/* ---- collectives ----------------------------------------------------------------- */

/* NCCL checks buffers where NCCL_CHECK_POINTERS=1 asks (CudaPtrCheck: ncclInvalidArgument);
 * braid always does. */
static void bad_coll_buffers(void)
{
    ncclComm_t c = A[0];   /* rank 0 of 2 */
    BADC("ncclAllReduce(sendbuff NULL)", IA,
         ncclAllReduce(NULL, out, 4, ncclInt32, ncclSum, c, NULL), "sendbuff", "NULL");
    BADC("ncclAllReduce(recvbuff NULL)", IA,
         ncclAllReduce(in, NULL, 4, ncclInt32, ncclSum, c, NULL), "recvbuff", "NULL");
    BADC("ncclBroadcast(root's sendbuff NULL)", IA,
         ncclBroadcast(NULL, out, 4, ncclInt32, 0, c, NULL), "sendbuff", "NULL");
    BADC("ncclBroadcast(recvbuff NULL)", IA, ncclBroadcast(in, NULL, 4, ncclInt32, 1, c, NULL),
         "recvbuff", "NULL");
    BADC("ncclBcast(buff NULL)", IA, ncclBcast(NULL, 4, ncclInt32, 0, c, NULL), "NULL", NULL);
    BADC("ncclReduce(root's recvbuff NULL)", IA,
         ncclReduce(in, NULL, 4, ncclInt32, ncclSum, 0, c, NULL), "recvbuff", "NULL");
    BADC("ncclReduce(sendbuff NULL)", IA, ncclReduce(NULL, out, 4, ncclInt32, ncclSum, 1, c, NULL),
         "sendbuff", "NULL");
    BADC("ncclAllGather(sendbuff NULL)", IA, ncclAllGather(NULL, out, 4, ncclInt32, c, NULL),
         "sendbuff", "NULL");
    BADC("ncclReduceScatter(recvbuff NULL)", IA,
         ncclReduceScatter(in, NULL, 4, ncclInt32, ncclSum, c, NULL), "recvbuff", "NULL");
    BADC("ncclAlltoAll(recvbuff NULL)", IA, ncclAlltoAll(in, NULL, 4, ncclInt32, c, NULL),
         "recvbuff", "NULL");
    BADC("ncclAllToAll(sendbuff NULL)", IA, ncclAllToAll(NULL, out, 4, ncclInt32, c, NULL),
         "sendbuff", "NULL");
    BADC("ncclGather(root's recvbuff NULL)", IA, ncclGather(in, NULL, 4, ncclInt32, 0, c, NULL),
         "recvbuff", "NULL");
    BADC("ncclScatter(root's sendbuff NULL)", IA, ncclScatter(NULL, out, 4, ncclInt32, 0, c, NULL),
         "sendbuff", "NULL");
    BADC("ncclSend(sendbuff NULL)", IA, ncclSend(NULL, 4, ncclInt32, 1, c, NULL), "sendbuff",
         "NULL");
    BADC("ncclRecv(recvbuff NULL)", IA, ncclRecv(NULL, 4, ncclInt32, 1, c, NULL), "recvbuff",
         "NULL");
    size_t cnt[2] = { 2, 2 }, dsp[2] = { 0, 2 };
    BADC("ncclAllToAllv(sendcounts NULL)", IA,
         ncclAllToAllv(in, NULL, dsp, out, cnt, dsp, ncclInt32, c, NULL), "counts", "NULL");
    BADC("ncclAllToAllv(recvbuff NULL)", IA,
         ncclAllToAllv(in, cnt, dsp, NULL, cnt, dsp, ncclInt32, c, NULL), "recvbuff", "NULL");
}

static void bad_coll_ranges(void)
{
    ncclComm_t c = A[0];
    ncclDataType_t d12 = (ncclDataType_t)12, dm1 = (ncclDataType_t)-1;
    BADC("ncclAllReduce(datatype 12)", IA, ncclAllReduce(in, out, 4, d12, ncclSum, c, NULL),
         "datatype", "12");
    BADC("ncclAllReduce(datatype -1)", IA, ncclAllReduce(in, out, 4, dm1, ncclSum, c, NULL),
         "datatype", "-1");
    BADC("ncclBroadcast(datatype 99)", IA,
         ncclBroadcast(in, out, 4, (ncclDataType_t)99, 0, c, NULL), "datatype", "99");
    BADC("ncclAllGather(datatype 12)", IA, ncclAllGather(in, out, 4, d12, c, NULL), "datatype",
         "12");
    BADC("ncclSend(datatype 12)", IA, ncclSend(in, 4, d12, 1, c, NULL), "datatype", "12");
    BADC("ncclAllToAllv(datatype 12)", IA,
         ncclAllToAllv(in, (size_t[]){ 1, 1 }, (size_t[]){ 0, 1 }, out, (size_t[]){ 1, 1 },
                       (size_t[]){ 0, 1 }, d12, c, NULL), "datatype", "12");
    BADC("ncclAllReduce(op 5, none created)", IA,
         ncclAllReduce(in, out, 4, ncclInt32, (ncclRedOp_t)5, c, NULL), "op", "5");
    BADC("ncclAllReduce(op -1)", IA, ncclAllReduce(in, out, 4, ncclInt32, (ncclRedOp_t)-1, c, NULL),
         "op", "-1");
    BADC("ncclReduce(op 1000)", IA,
         ncclReduce(in, out, 4, ncclInt32, (ncclRedOp_t)1000, 0, c, NULL), "op", "1000");
    BADC("ncclReduceScatter(op ncclMaxRedOp)", IA,
         ncclReduceScatter(in, out, 4, ncclInt32, ncclMaxRedOp, c, NULL), "op", "2147483647");
    BADC("ncclBroadcast(root 2 of 2)", IA, ncclBroadcast(in, out, 4, ncclInt32, 2, c, NULL),
         "root", "2");
    BADC("ncclBcast(root -1)", IA, ncclBcast(out, 4, ncclInt32, -1, c, NULL), "root", "-1");
    BADC("ncclReduce(root -1)", IA, ncclReduce(in, out, 4, ncclInt32, ncclSum, -1, c, NULL),
         "root", "-1");
    BADC("ncclGather(root 5)", IA, ncclGather(in, out, 4, ncclInt32, 5, c, NULL), "root", "5");
    BADC("ncclScatter(root -3)", IA, ncclScatter(in, out, 4, ncclInt32, -3, c, NULL), "root", "-3");
    BADC("ncclSend(peer 2 of 2)", IA, ncclSend(in, 4, ncclInt32, 2, c, NULL), "peer", "2");
    BADC("ncclRecv(peer -1)", IA, ncclRecv(out, 4, ncclInt32, -1, c, NULL), "peer", "-1");
}

/* NCCL does not check that the byte count fits: braid refuses it as a bad argument. */
static void bad_coll_sizes(void)
{
    ncclComm_t c = A[0];
    size_t huge = SIZE_MAX / 2, big = SIZE_MAX / 8 + 1;   /* bytes overflow (x4, x2 ranks) */
    BADC("ncclAllReduce(count SIZE_MAX/2 of int32)", IA,
         ncclAllReduce(in, out, huge, ncclInt32, ncclSum, c, NULL), "overflow", NULL);
    BADC("ncclAllGather(sendcount SIZE_MAX/8+1)", IA,
         ncclAllGather(in, out, big, ncclInt32, c, NULL), "overflow", NULL);
    BADC("ncclReduceScatter(recvcount SIZE_MAX/8+1)", IA,
         ncclReduceScatter(in, out, big, ncclInt32, ncclSum, c, NULL), "overflow", NULL);
    BADC("ncclAlltoAll(count SIZE_MAX/8+1)", IA, ncclAlltoAll(in, out, big, ncclInt32, c, NULL),
         "overflow", NULL);
    BADC("ncclSend(count SIZE_MAX/2 of fp64)", IA, ncclSend(in, huge, ncclFloat64, 1, c, NULL),
         "overflow", NULL);
    BADC("ncclAllToAllv(sendcounts[1] SIZE_MAX/2)", IA,
         ncclAllToAllv(in, (size_t[]){ 1, SIZE_MAX / 2 }, (size_t[]){ 0, 1 }, out,
                       (size_t[]){ 1, 1 }, (size_t[]){ 0, 1 }, ncclInt32, c, NULL),
         "overflow", NULL);
}

static void bad_coll_ops_and_comms(void)
{
    ncclRedOp_t opb, opa;
    float s = 2;
    /* an op of comm B (A has none at that value), then an op of A made for another type */
    if (ncclRedOpCreatePreMulSum(&opb, &s, ncclInt32, ncclScalarHostImmediate, B[0]) !=
        ncclSuccess || ncclRedOpCreatePreMulSum(&opa, &s, ncclFloat32, ncclScalarHostImmediate,
                                               A[0]) != ncclSuccess) {
        ft_fail("ncclRedOpCreatePreMulSum failed: %s", ncclGetLastError(NULL));
        return;
    }
    char opname[32];
    snprintf(opname, sizeof(opname), "op %d", (int)opb + 1);
    ncclRedOp_t other = (ncclRedOp_t)((int)opb + 1);   /* B's second: A has only one */
    ncclRedOp_t opb2;
    ncclRedOpCreatePreMulSum(&opb2, &s, ncclInt32, ncclScalarHostImmediate, B[0]);
    BADC("ncclAllReduce(PreMulSum op of another comm)", IA,
         ncclAllReduce(in, out, 4, ncclInt32, other, A[0], NULL), opname, NULL);
    snprintf(opname, sizeof(opname), "op %d", (int)opa);
    BADC("ncclAllReduce(PreMulSum op of float32 on int32)", IA,
         ncclAllReduce(in, out, 4, ncclInt32, opa, A[0], NULL), opname, "float32");
    ncclRedOpDestroy(opa, A[0]);
    BADC("ncclAllReduce(destroyed PreMulSum op)", IA,
         ncclAllReduce(in, out, 4, ncclFloat32, opa, A[0], NULL), opname, NULL);
    ncclRedOpDestroy(opb, B[0]);
    ncclRedOpDestroy(opb2, B[0]);
    BAD("ncclAllReduce(comm NULL)", IA, ncclAllReduce(in, out, 4, ncclInt32, ncclSum, NULL, NULL),
        "comm", "NULL");
    BAD("ncclAllReduce(destroyed comm)", IA,
        ncclAllReduce(in, out, 4, ncclInt32, ncclSum, dead, NULL), "not a live", NULL);
    BAD("ncclBroadcast(aborted comm)", IA, ncclBroadcast(in, out, 4, ncclInt32, 0, aborted, NULL),
        "not a live", NULL);
    BAD("ncclSend(destroyed comm)", IA, ncclSend(in, 4, ncclInt32, 0, dead, NULL), "not a live",
        NULL);
    BAD("ncclAllToAllv(aborted comm)", IA,
        ncclAllToAllv(in, (size_t[]){ 1 }, (size_t[]){ 0 }, out, (size_t[]){ 1 },
                      (size_t[]){ 0 }, ncclInt32, aborted, NULL), "not a live", NULL);
    comm_works("calls on dead communicators");
}

/* braid.h's uneven collectives (no NCCL twin: braid's own checks, with NCCL's code for a
 * bad argument). tests/integration/coll_v.c checks the rest of their arguments. */
static void bad_coll_v(void)
{
    ncclComm_t c = A[0];   /* rank 0 of 2 */
    size_t cnt[2] = { 2, 3 }, dsp[2] = { 0, 4 }, lap[2] = { 2, 0 };   /* [2, 4) and [0, 3) */
    BADC("braidAllGatherV(displs NULL)", IA,
         braidAllGatherV(in, 2, out, cnt, NULL, ncclInt32, c, NULL), "displs", "NULL");
    BADC("braidAllGatherV(sendcount 3, recvcounts[0] 2)", IA,
         braidAllGatherV(in, 3, out, cnt, dsp, ncclInt32, c, NULL), "sendcount 3",
         "recvcounts[0] = 2");
    BADC("braidReduceScatterV(blocks overlap)", IA,
         braidReduceScatterV(in, cnt, lap, out, 2, ncclInt32, ncclSum, c, NULL), "overlap",
         "rank 1");
    BADC("braidReduceScatterV(sendcounts[1] SIZE_MAX/2)", IA,
         braidReduceScatterV(in, (size_t[]){ 2, SIZE_MAX / 2 }, dsp, out, 2, ncclInt32, ncclSum,
                             c, NULL), "sendcounts[1]", "overflow");
    BADC("braidReduceScatterV(op 5, none created)", IA,
         braidReduceScatterV(in, cnt, dsp, out, 2, ncclInt32, (ncclRedOp_t)5, c, NULL), "op",
         "5");
    BAD("braidAllGatherV(destroyed comm)", IA,
        braidAllGatherV(in, 2, out, cnt, dsp, ncclInt32, dead, NULL), "not a live", NULL);
    BAD("braidReduceScatterV(aborted comm)", IA,
        braidReduceScatterV(in, cnt, dsp, out, 2, ncclInt32, ncclSum, aborted, NULL),
        "not a live", NULL);
}

static void bad_collectives(void)
{
    bad_coll_buffers();
    bad_coll_ranges();
    bad_coll_sizes();
    bad_coll_ops_and_comms();
    bad_coll_v();
}

/* One thread drives both ranks: a bad call inside the group must fail the group at
 * ncclGroupEnd (as NCCL does) instead of running the other rank's half alone. */
static void bad_in_group(void)
{
    double t0 = ft_now();
    memset(out, CANARY, sizeof(out));
    ncclGroupStart();
    ncclResult_t r0 = ncclAllReduce(NULL, out, 4, ncclInt32, ncclSum, A[0], NULL);
    ncclResult_t r1 = ncclAllReduce(in, out + 8, 4, ncclInt32, ncclSum, A[1], NULL);
    ncclResult_t re = ncclGroupEnd();
    double t = ft_now() - t0;
    checks++;
    if (r0 != ncclInvalidArgument)
        ft_fail("bad call in a group: returned %d (%s), NCCL returns ncclInvalidArgument",
                (int)r0, result_name(r0));
    if (r1 != ncclSuccess)
        ft_fail("good call in a group after a bad one: returned %d", (int)r1);
    /* NCCL keeps the group's first error (ncclGroupErrCheck) and ncclGroupEnd returns it */
    if (re != ncclInvalidArgument || t > 2.0)
        ft_fail("group with a bad call: ncclGroupEnd returned %d (%s) after %.1f s; expected "
                "the call's ncclInvalidArgument at once (the other rank's half cannot run "
                "alone); last error: %s", (int)re, result_name(re), t, ncclGetLastError(NULL));
    comm_works("a group holding a bad call");
}

/* Calls NCCL 2.28 accepts: NULL communicators of destroy, abort, finalize and revoke
 * (init.cc), NULL handles of the deregistrations (register.cc, dev_runtime.cc: what
 * ncclCommRegister hands out where it registers nothing), ncclMemAlloc of 0 bytes
 * (cudaMalloc's success and NULL), ncclGroupSimulateEnd(NULL) (a plain ncclGroupEnd). */
static void accepted(void)
{
    static const char *const names[] = {
        "ncclCommDestroy(NULL)", "ncclCommAbort(NULL)", "ncclCommFinalize(NULL)",
        "ncclCommRevoke(NULL, 0)", "ncclCommDeregister(comm, NULL)",
        "ncclCommWindowDeregister(comm, NULL)", "ncclMemAlloc(&p, 0)",
        "ncclGroupSimulateEnd(NULL) in a group",
    };
    void *p = (void *)&p;
    ncclResult_t r[8];
    r[0] = ncclCommDestroy(NULL);
    r[1] = ncclCommAbort(NULL);
    r[2] = ncclCommFinalize(NULL);
    r[3] = ncclCommRevoke(NULL, 0);
    r[4] = ncclCommDeregister(A[0], NULL);
    r[5] = ncclCommWindowDeregister(A[0], NULL);
    r[6] = ncclMemAlloc(&p, 0);
    r[7] = ncclGroupStart();
    if (r[7] == ncclSuccess)
        r[7] = ncclGroupSimulateEnd(NULL);
    for (int i = 0; i < 8; i++) {
        checks++;
        if (r[i] != ncclSuccess)
            ft_fail("%s returned %d (%s), NCCL returns ncclSuccess", names[i], (int)r[i],
                    result_name(r[i]));
    }
    if (p != NULL)
        ft_fail("ncclMemAlloc(&p, 0) left p at %p, NCCL sets it to NULL (as cudaMalloc)", p);
    /* it ended the group: another end has none to end */
    ncclResult_t re = ncclGroupEnd();
    checks++;
    if (re != ncclInvalidUsage)
        ft_fail("ncclGroupEnd after ncclGroupSimulateEnd(NULL) returned %d (%s): the group "
                "was not ended", (int)re, result_name(re));
    comm_works("calls NCCL accepts");
}

/* Finalize twice: the second is refused (NCCL: ncclInvalidArgument). Run last: it makes a
 * comm, which could take the address of the destroyed one. */
static void double_finalize(void)
{
    ncclComm_t c;
    if (ncclCommInitAll(&c, 1, NULL) != ncclSuccess || ncclCommFinalize(c) != ncclSuccess) {
        ft_fail("cannot make and finalize a 1-rank comm: %s", ncclGetLastError(NULL));
        return;
    }
    BAD("ncclCommFinalize twice", IA, ncclCommFinalize(c), "finalized", NULL);
    if (ncclCommDestroy(c) != ncclSuccess)
        ft_fail("ncclCommDestroy after a refused second finalize failed: %s",
                ncclGetLastError(NULL));
}

int main(void)
{
    ft_name = "bad_args";
    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("BRAID_TIMEOUT", "5", 1);   /* a bug that hangs a call turns into a failure */
    ft_watchdog(50);
    if (ncclCommInitAll(A, 2, NULL) != ncclSuccess || ncclCommInitAll(B, 2, NULL) !=
        ncclSuccess || ncclCommInitAll(&dead, 1, NULL) != ncclSuccess ||
        ncclCommInitAll(&aborted, 1, NULL) != ncclSuccess) {
        fprintf(stderr, "bad_args: cannot create communicators: %s\n", ncclGetLastError(NULL));
        return 99;
    }
    ncclCommDestroy(dead);      /* from here on no comm is created: no address reuse */
    ncclCommAbort(aborted);
    for (int i = 0; i < NOUT; i++)
        in[i] = i;
    bad_init();
    bad_comm_calls();
    bad_mem_and_ops();
    bad_group();
    bad_collectives();
    bad_in_group();
    accepted();
    double_finalize();
    for (int i = 0; i < 2; i++) {
        ncclCommDestroy(A[i]);
        ncclCommDestroy(B[i]);
    }
    printf("bad_args: %d calls checked, %d failures\n", checks, ft_failures());
    if (checks == 0)
        ft_fail("no call was checked");
    return ft_failures() ? 1 : 0;
}
