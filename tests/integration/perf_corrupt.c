/*
 * perf_corrupt: an LD_PRELOAD shim with which test_tools.sh proves that the *_perf tools
 * count wrong results, without any change to the library.
 *
 *     cc -shared -fPIC -I include -o perf_corrupt.so tests/integration/perf_corrupt.c -ldl
 *     BRAID_TEST_CORRUPT_TYPE=7 LD_PRELOAD=./perf_corrupt.so all_gather_perf -t 2 -d float
 *
 * It wraps every collective the tools measure (and ncclRecv, for sendrecv_perf) and, once
 * the real call has completed, flips the lowest bit of the first byte of its recvbuff when
 * the call's datatype is the ncclDataType_t number in BRAID_TEST_CORRUPT_TYPE. The tools'
 * own synchronisation calls use other types (int32, int64, double, uint8), so only the
 * measured call is corrupted: each rank's check then finds exactly one wrong element (a
 * rank whose recvbuff must stay untouched, such as a non-root of ncclReduce, too).
 *
 * Host calls complete when they return, or at the outermost ncclGroupEnd inside a group;
 * calls made in a group are flipped there.
 */
#include <dlfcn.h>
#include <stdlib.h>

#include "nccl.h"

#define CORRUPT_MAX_PENDING 64

static int corrupt_type = -1;
static __thread int corrupt_depth;
static __thread int corrupt_npending;
static __thread unsigned char *corrupt_pending[CORRUPT_MAX_PENDING];

static __typeof__(ncclAllReduce) *real_allreduce;
static __typeof__(ncclAllGather) *real_allgather;
static __typeof__(ncclReduceScatter) *real_reducescatter;
static __typeof__(ncclBroadcast) *real_broadcast;
static __typeof__(ncclReduce) *real_reduce;
static __typeof__(ncclAlltoAll) *real_alltoall;
static __typeof__(ncclGather) *real_gather;
static __typeof__(ncclScatter) *real_scatter;
static __typeof__(ncclRecv) *real_recv;
static __typeof__(ncclGroupStart) *real_groupstart;
static __typeof__(ncclGroupEnd) *real_groupend;

/* The real function; a program that does not link NCCL never calls the wrappers. */
static void *corrupt_next(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

__attribute__((constructor)) static void corrupt_init(void)
{
    const char *s = getenv("BRAID_TEST_CORRUPT_TYPE");
    corrupt_type = s != NULL && s[0] != '\0' ? atoi(s) : -1;
    real_allreduce = (__typeof__(real_allreduce))corrupt_next("ncclAllReduce");
    real_allgather = (__typeof__(real_allgather))corrupt_next("ncclAllGather");
    real_reducescatter = (__typeof__(real_reducescatter))corrupt_next("ncclReduceScatter");
    real_broadcast = (__typeof__(real_broadcast))corrupt_next("ncclBroadcast");
    real_reduce = (__typeof__(real_reduce))corrupt_next("ncclReduce");
    real_alltoall = (__typeof__(real_alltoall))corrupt_next("ncclAlltoAll");
    real_gather = (__typeof__(real_gather))corrupt_next("ncclGather");
    real_scatter = (__typeof__(real_scatter))corrupt_next("ncclScatter");
    real_recv = (__typeof__(real_recv))corrupt_next("ncclRecv");
    real_groupstart = (__typeof__(real_groupstart))corrupt_next("ncclGroupStart");
    real_groupend = (__typeof__(real_groupend))corrupt_next("ncclGroupEnd");
}

/* After a successful call: flip now, or at the outermost ncclGroupEnd. */
static ncclResult_t corrupt_after(ncclResult_t res, void *recv, size_t count,
                                  ncclDataType_t dt)
{
    if (res != ncclSuccess || (int)dt != corrupt_type || count == 0 || recv == NULL)
        return res;
    if (corrupt_depth == 0)
        *(unsigned char *)recv ^= 1;
    else if (corrupt_npending < CORRUPT_MAX_PENDING)
        corrupt_pending[corrupt_npending++] = recv;
    return res;
}

ncclResult_t ncclGroupStart(void)
{
    ncclResult_t res = real_groupstart();
    if (res == ncclSuccess)
        corrupt_depth++;
    return res;
}

ncclResult_t ncclGroupEnd(void)
{
    ncclResult_t res = real_groupend();
    if (corrupt_depth > 0 && --corrupt_depth > 0)
        return res;
    for (int i = 0; res == ncclSuccess && i < corrupt_npending; i++)
        *corrupt_pending[i] ^= 1;
    corrupt_npending = 0;
    return res;
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t dt, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t st)
{
    return corrupt_after(real_allreduce(s, r, n, dt, op, comm, st), r, n, dt);
}

ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t dt, ncclComm_t comm,
                           cudaStream_t st)
{
    return corrupt_after(real_allgather(s, r, n, dt, comm, st), r, n, dt);
}

ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t dt,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t st)
{
    return corrupt_after(real_reducescatter(s, r, n, dt, op, comm, st), r, n, dt);
}

ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t dt, int root,
                           ncclComm_t comm, cudaStream_t st)
{
    return corrupt_after(real_broadcast(s, r, n, dt, root, comm, st), r, n, dt);
}

ncclResult_t ncclReduce(const void *s, void *r, size_t n, ncclDataType_t dt, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t st)
{
    return corrupt_after(real_reduce(s, r, n, dt, op, root, comm, st), r, n, dt);
}

ncclResult_t ncclAlltoAll(const void *s, void *r, size_t n, ncclDataType_t dt, ncclComm_t comm,
                          cudaStream_t st)
{
    return corrupt_after(real_alltoall(s, r, n, dt, comm, st), r, n, dt);
}

ncclResult_t ncclGather(const void *s, void *r, size_t n, ncclDataType_t dt, int root,
                        ncclComm_t comm, cudaStream_t st)
{
    return corrupt_after(real_gather(s, r, n, dt, root, comm, st), r, n, dt);
}

ncclResult_t ncclScatter(const void *s, void *r, size_t n, ncclDataType_t dt, int root,
                         ncclComm_t comm, cudaStream_t st)
{
    return corrupt_after(real_scatter(s, r, n, dt, root, comm, st), r, n, dt);
}

ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t dt, int peer, ncclComm_t comm,
                      cudaStream_t st)
{
    return corrupt_after(real_recv(r, n, dt, peer, comm, st), r, n, dt);
}
