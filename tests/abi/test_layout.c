/*
 * ABI layout test of the public headers.
 *
 * Compiled against braid's include/nccl.h (no CUDA needed) it checks, at compile time,
 * every size, offset, enum value and macro value that NCCL 2.28.9 fixes, and the type of
 * every function (and of its p-twin). It then prints them all as a table. check_layout.sh
 * compiles the same file against NVIDIA's header as well (the same assertions must hold)
 * and diffs the two tables. The file is valid C11 and C++11; C++ makes the prototype
 * checks stricter (exact types, where C only asks for compatible ones).
 *
 * -DLAYOUT_WITH_DEVICE adds the device-API host part (nccl_device.h): struct layouts and
 * the prototypes of the entry points libnccl.so.2 exports. NVIDIA's nccl_device.h is
 * C++ only, so the scripts compile that variant as C++ for NVIDIA.
 *
 * Exit status: 0 when the runtime checks (initializer contents) pass, 1 otherwise.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <nccl.h>
#ifdef LAYOUT_WITH_DEVICE
#include <nccl_device.h>
#endif

#ifdef __cplusplus
#include <type_traits>
#define LAYOUT_ASSERT(_cond, _msg) static_assert(_cond, _msg)
/* Exact type of a (possibly overloaded) function: the cast only compiles on a match. */
#define LAYOUT_PROTO1(_fn, _type)                                                          \
    static_assert(sizeof(static_cast<_type>(&_fn)) != 0, #_fn " has the wrong type")
#define LAYOUT_SAME_TYPE(_a, _b) (std::is_same<_a, _b>::value)
#define LAYOUT_ALIGNOF(_t) alignof(_t)
#else
#define LAYOUT_ASSERT(_cond, _msg) _Static_assert(_cond, _msg)
#define LAYOUT_PROTO1(_fn, _type)                                                          \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&_fn), _type),                  \
                   #_fn " has the wrong type")
#define LAYOUT_SAME_TYPE(_a, _b) __builtin_types_compatible_p(_a, _b)
#define LAYOUT_ALIGNOF(_t) _Alignof(_t)
#endif

/* A function and its profiling twin both have type _type. */
#define LAYOUT_PROTO(_fn, _type)                                                           \
    LAYOUT_PROTO1(_fn, _type);                                                             \
    LAYOUT_PROTO1(p##_fn, _type)

#define LAYOUT_SIZE(_t, _n) LAYOUT_ASSERT(sizeof(_t) == (_n), "sizeof(" #_t ") != " #_n)
#define LAYOUT_OFF(_t, _f, _n)                                                             \
    LAYOUT_ASSERT(offsetof(_t, _f) == (_n), "offsetof(" #_t ", " #_f ") != " #_n)
#define LAYOUT_VAL(_e, _n) LAYOUT_ASSERT((long long)(_e) == (_n), #_e " != " #_n)

/* ---- compile-time checks: nccl.h ------------------------------------------------------ */

LAYOUT_VAL(NCCL_MAJOR, 2);
LAYOUT_VAL(NCCL_MINOR, 28);
LAYOUT_VAL(NCCL_PATCH, 9);
LAYOUT_VAL(NCCL_VERSION_CODE, 22809);
LAYOUT_VAL(NCCL_VERSION(2, 28, 9), 22809);
LAYOUT_VAL(NCCL_VERSION(2, 8, 4), 2804);
LAYOUT_VAL(NCCL_VERSION(3, 0, 1), 30001);
LAYOUT_VAL(NCCL_UNIQUE_ID_BYTES, 128);
LAYOUT_VAL(NCCL_SPLIT_NOCOLOR, -1);
LAYOUT_VAL(NCCL_CONFIG_UNDEF_INT, -2147483647LL - 1);
LAYOUT_VAL(NCCL_WIN_DEFAULT, 0);
LAYOUT_VAL(NCCL_WIN_COLL_SYMMETRIC, 1);
LAYOUT_VAL(NCCL_WIN_REQUIRED_ALIGNMENT, 4096);
LAYOUT_VAL(NCCL_CTA_POLICY_DEFAULT, 0);
LAYOUT_VAL(NCCL_CTA_POLICY_EFFICIENCY, 1);
LAYOUT_VAL(NCCL_CTA_POLICY_ZERO, 2);
LAYOUT_VAL(NCCL_SHRINK_DEFAULT, 0);
LAYOUT_VAL(NCCL_SHRINK_ABORT, 1);
LAYOUT_VAL(NCCL_REVOKE_DEFAULT, 0);

LAYOUT_SIZE(ncclUniqueId, 128);
LAYOUT_SIZE(ncclResult_t, 4);
LAYOUT_SIZE(ncclRedOp_t, 4);
LAYOUT_SIZE(ncclDataType_t, 4);
LAYOUT_SIZE(ncclScalarResidence_t, 4);
LAYOUT_SIZE(ncclComm_t, sizeof(void *));
LAYOUT_SIZE(ncclWindow_t, sizeof(void *));
LAYOUT_SIZE(cudaStream_t, sizeof(void *));

LAYOUT_VAL(ncclSuccess, 0);
LAYOUT_VAL(ncclUnhandledCudaError, 1);
LAYOUT_VAL(ncclSystemError, 2);
LAYOUT_VAL(ncclInternalError, 3);
LAYOUT_VAL(ncclInvalidArgument, 4);
LAYOUT_VAL(ncclInvalidUsage, 5);
LAYOUT_VAL(ncclRemoteError, 6);
LAYOUT_VAL(ncclInProgress, 7);
LAYOUT_VAL(ncclNumResults, 8);

LAYOUT_VAL(ncclSum, 0);
LAYOUT_VAL(ncclProd, 1);
LAYOUT_VAL(ncclMax, 2);
LAYOUT_VAL(ncclMin, 3);
LAYOUT_VAL(ncclAvg, 4);
LAYOUT_VAL(ncclNumOps, 5);
LAYOUT_VAL(ncclMaxRedOp, 0x7fffffff);

LAYOUT_VAL(ncclInt8, 0);
LAYOUT_VAL(ncclChar, 0);
LAYOUT_VAL(ncclUint8, 1);
LAYOUT_VAL(ncclInt32, 2);
LAYOUT_VAL(ncclInt, 2);
LAYOUT_VAL(ncclUint32, 3);
LAYOUT_VAL(ncclInt64, 4);
LAYOUT_VAL(ncclUint64, 5);
LAYOUT_VAL(ncclFloat16, 6);
LAYOUT_VAL(ncclHalf, 6);
LAYOUT_VAL(ncclFloat32, 7);
LAYOUT_VAL(ncclFloat, 7);
LAYOUT_VAL(ncclFloat64, 8);
LAYOUT_VAL(ncclDouble, 8);
LAYOUT_VAL(ncclBfloat16, 9);
LAYOUT_VAL(ncclFloat8e4m3, 10);
LAYOUT_VAL(ncclFloat8e5m2, 11);
LAYOUT_VAL(ncclNumTypes, 12);

LAYOUT_VAL(ncclScalarDevice, 0);
LAYOUT_VAL(ncclScalarHostImmediate, 1);

#if defined(__x86_64__) || defined(__aarch64__) || defined(__powerpc64__)
LAYOUT_SIZE(ncclConfig_t, 80);
LAYOUT_OFF(ncclConfig_t, size, 0);
LAYOUT_OFF(ncclConfig_t, magic, 8);
LAYOUT_OFF(ncclConfig_t, version, 12);
LAYOUT_OFF(ncclConfig_t, blocking, 16);
LAYOUT_OFF(ncclConfig_t, cgaClusterSize, 20);
LAYOUT_OFF(ncclConfig_t, minCTAs, 24);
LAYOUT_OFF(ncclConfig_t, maxCTAs, 28);
LAYOUT_OFF(ncclConfig_t, netName, 32);
LAYOUT_OFF(ncclConfig_t, splitShare, 40);
LAYOUT_OFF(ncclConfig_t, trafficClass, 44);
LAYOUT_OFF(ncclConfig_t, commName, 48);
LAYOUT_OFF(ncclConfig_t, collnetEnable, 56);
LAYOUT_OFF(ncclConfig_t, CTAPolicy, 60);
LAYOUT_OFF(ncclConfig_t, shrinkShare, 64);
LAYOUT_OFF(ncclConfig_t, nvlsCTAs, 68);
LAYOUT_OFF(ncclConfig_t, nChannelsPerNetPeer, 72);
LAYOUT_OFF(ncclConfig_t, nvlinkCentricSched, 76);

LAYOUT_SIZE(ncclSimInfo_t, 24);
LAYOUT_OFF(ncclSimInfo_t, size, 0);
LAYOUT_OFF(ncclSimInfo_t, magic, 8);
LAYOUT_OFF(ncclSimInfo_t, version, 12);
LAYOUT_OFF(ncclSimInfo_t, estimatedTime, 16);
#endif

/* Struct tags are part of the API (C code may name `struct ncclConfig_v22800`). */
LAYOUT_ASSERT(LAYOUT_SAME_TYPE(struct ncclConfig_v22800, ncclConfig_t), "ncclConfig_t tag");
LAYOUT_ASSERT(LAYOUT_SAME_TYPE(struct ncclSimInfo_v22200, ncclSimInfo_t), "ncclSimInfo_t tag");
LAYOUT_ASSERT(LAYOUT_SAME_TYPE(struct ncclComm *, ncclComm_t), "ncclComm_t tag");
LAYOUT_ASSERT(LAYOUT_SAME_TYPE(struct ncclWindow_vidmem *, ncclWindow_t), "ncclWindow_t tag");

/* ---- compile-time checks: prototypes ------------------------------------------------ */

typedef cudaStream_t strm_t;
typedef ncclResult_t res_t;

LAYOUT_PROTO(ncclMemAlloc, res_t (*)(void **, size_t));
LAYOUT_PROTO(ncclMemFree, res_t (*)(void *));
LAYOUT_PROTO(ncclGetVersion, res_t (*)(int *));
LAYOUT_PROTO(ncclGetUniqueId, res_t (*)(ncclUniqueId *));
LAYOUT_PROTO(ncclCommInitRankConfig, res_t (*)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *));
LAYOUT_PROTO(ncclCommInitRank, res_t (*)(ncclComm_t *, int, ncclUniqueId, int));
LAYOUT_PROTO(ncclCommInitAll, res_t (*)(ncclComm_t *, int, const int *));
LAYOUT_PROTO(ncclCommFinalize, res_t (*)(ncclComm_t));
LAYOUT_PROTO(ncclCommDestroy, res_t (*)(ncclComm_t));
LAYOUT_PROTO(ncclCommAbort, res_t (*)(ncclComm_t));
LAYOUT_PROTO(ncclCommRevoke, res_t (*)(ncclComm_t, int));
LAYOUT_PROTO(ncclCommSplit, res_t (*)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *));
LAYOUT_PROTO(ncclCommShrink, res_t (*)(ncclComm_t, int *, int, ncclComm_t *, ncclConfig_t *, int));
LAYOUT_PROTO(ncclCommInitRankScalable, res_t (*)(ncclComm_t *, int, int, int, ncclUniqueId *, ncclConfig_t *));
LAYOUT_PROTO(ncclGetErrorString, const char *(*)(ncclResult_t));
LAYOUT_PROTO(ncclGetLastError, const char *(*)(ncclComm_t));
LAYOUT_PROTO(ncclCommGetAsyncError, res_t (*)(ncclComm_t, ncclResult_t *));
LAYOUT_PROTO(ncclCommCount, res_t (*)(ncclComm_t, int *));
LAYOUT_PROTO(ncclCommCuDevice, res_t (*)(ncclComm_t, int *));
LAYOUT_PROTO(ncclCommUserRank, res_t (*)(ncclComm_t, int *));
LAYOUT_PROTO(ncclCommRegister, res_t (*)(ncclComm_t, void *, size_t, void **));
LAYOUT_PROTO(ncclCommDeregister, res_t (*)(ncclComm_t, void *));
LAYOUT_PROTO(ncclCommWindowRegister, res_t (*)(ncclComm_t, void *, size_t, ncclWindow_t *, int));
LAYOUT_PROTO(ncclCommWindowDeregister, res_t (*)(ncclComm_t, ncclWindow_t));
LAYOUT_PROTO(ncclRedOpCreatePreMulSum, res_t (*)(ncclRedOp_t *, void *, ncclDataType_t, ncclScalarResidence_t, ncclComm_t));
LAYOUT_PROTO(ncclRedOpDestroy, res_t (*)(ncclRedOp_t, ncclComm_t));
LAYOUT_PROTO(ncclReduce, res_t (*)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, strm_t));
LAYOUT_PROTO(ncclBcast, res_t (*)(void *, size_t, ncclDataType_t, int, ncclComm_t, strm_t));
LAYOUT_PROTO(ncclBroadcast, res_t (*)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, strm_t));
LAYOUT_PROTO(ncclAllReduce, res_t (*)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, strm_t));
LAYOUT_PROTO(ncclReduceScatter, res_t (*)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, strm_t));
LAYOUT_PROTO(ncclAllGather, res_t (*)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, strm_t));
LAYOUT_PROTO(ncclAlltoAll, res_t (*)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, strm_t));
LAYOUT_PROTO(ncclGather, res_t (*)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, strm_t));
LAYOUT_PROTO(ncclScatter, res_t (*)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, strm_t));
LAYOUT_PROTO(ncclSend, res_t (*)(const void *, size_t, ncclDataType_t, int, ncclComm_t, strm_t));
LAYOUT_PROTO(ncclRecv, res_t (*)(void *, size_t, ncclDataType_t, int, ncclComm_t, strm_t));
LAYOUT_PROTO(ncclGroupStart, res_t (*)(void));
LAYOUT_PROTO(ncclGroupEnd, res_t (*)(void));
LAYOUT_PROTO(ncclGroupSimulateEnd, res_t (*)(ncclSimInfo_t *));

/* Naming the deprecated function is the point here, not a use. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
LAYOUT_PROTO(ncclResetDebugInit, void (*)(void));
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/* ---- compile-time checks: nccl_device.h ------------------------------------------- */

#ifdef LAYOUT_WITH_DEVICE
LAYOUT_SIZE(ncclTeam_t, 12);
LAYOUT_OFF(ncclTeam_t, nRanks, 0);
LAYOUT_OFF(ncclTeam_t, rank, 4);
LAYOUT_OFF(ncclTeam_t, stride, 8);

LAYOUT_PROTO1(ncclDevCommCreate, res_t (*)(ncclComm_t, ncclDevCommRequirements_t const *, ncclDevComm_t *));
LAYOUT_PROTO1(ncclDevCommDestroy, res_t (*)(ncclComm_t, ncclDevComm_t const *));
LAYOUT_PROTO1(ncclTeamWorld, ncclTeam_t (*)(ncclComm_t));
LAYOUT_PROTO1(ncclTeamLsa, ncclTeam_t (*)(ncclComm_t));
LAYOUT_PROTO1(ncclTeamRail, ncclTeam_t (*)(ncclComm_t));
LAYOUT_PROTO1(ncclTeamRankToWorld, int (*)(ncclComm_t, ncclTeam_t, int));
LAYOUT_PROTO1(ncclTeamRankToLsa, int (*)(ncclComm_t, ncclTeam_t, int));
LAYOUT_PROTO1(ncclLsaBarrierCreateRequirement, res_t (*)(ncclTeam_t, int, ncclLsaBarrierHandle_t *, ncclDevResourceRequirements_t *));
LAYOUT_PROTO1(ncclGinBarrierCreateRequirement, res_t (*)(ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t *, ncclDevResourceRequirements_t *));
LAYOUT_PROTO1(ncclLLA2ACreateRequirement, res_t (*)(int, int, ncclLLA2AHandle_t *, ncclDevResourceRequirements_t *));
LAYOUT_PROTO1(ncclLLA2ACalcSlots, int (*)(int, int));
#endif

/* ---- the printed table -------------------------------------------------------------- */

static int layout_failures;

#define ROW_SIZE(_t) printf("sizeof %s %zu align %zu\n", #_t, sizeof(_t), LAYOUT_ALIGNOF(_t))
#define ROW_OFF(_t, _f) printf("offsetof %s.%s %zu size %zu\n", #_t, #_f, offsetof(_t, _f),    \
                               sizeof(((_t *)0)->_f))
#define ROW_VAL(_e) printf("value %s %lld\n", #_e, (long long)(_e))

/* A runtime check of an initializer field; failures are also printed as table rows. */
static void layout_expect(const char *what, long long got, long long want)
{
    printf("init %s %lld\n", what, got);
    if (got != want) {
        printf("FAIL %s is %lld, expected %lld\n", what, got, want);
        layout_failures++;
    }
}

static void layout_print_basic(void)
{
    ROW_SIZE(ncclUniqueId);
    ROW_SIZE(ncclResult_t);
    ROW_SIZE(ncclRedOp_t);
    ROW_SIZE(ncclDataType_t);
    ROW_SIZE(ncclScalarResidence_t);
    ROW_SIZE(ncclComm_t);
    ROW_SIZE(ncclWindow_t);
    ROW_SIZE(cudaStream_t);
    ROW_VAL(NCCL_MAJOR);
    ROW_VAL(NCCL_MINOR);
    ROW_VAL(NCCL_PATCH);
    printf("value NCCL_SUFFIX \"%s\"\n", NCCL_SUFFIX);
    ROW_VAL(NCCL_VERSION_CODE);
    ROW_VAL(NCCL_VERSION(2, 28, 9));
    ROW_VAL(NCCL_VERSION(2, 8, 4));
    ROW_VAL(NCCL_UNIQUE_ID_BYTES);
    ROW_VAL(NCCL_SPLIT_NOCOLOR);
    ROW_VAL(NCCL_CONFIG_UNDEF_INT);
    printf("value NCCL_CONFIG_UNDEF_PTR %s\n", NCCL_CONFIG_UNDEF_PTR == NULL ? "NULL" : "?");
    printf("value NCCL_COMM_NULL %s\n", NCCL_COMM_NULL == NULL ? "NULL" : "?");
    printf("value NCCL_UNDEF_FLOAT %g\n", (double)NCCL_UNDEF_FLOAT);
    ROW_VAL(NCCL_WIN_DEFAULT);
    ROW_VAL(NCCL_WIN_COLL_SYMMETRIC);
    ROW_VAL(NCCL_WIN_REQUIRED_ALIGNMENT);
    ROW_VAL(NCCL_CTA_POLICY_DEFAULT);
    ROW_VAL(NCCL_CTA_POLICY_EFFICIENCY);
    ROW_VAL(NCCL_CTA_POLICY_ZERO);
    ROW_VAL(NCCL_SHRINK_DEFAULT);
    ROW_VAL(NCCL_SHRINK_ABORT);
    ROW_VAL(NCCL_REVOKE_DEFAULT);
}

static void layout_print_enums(void)
{
    ROW_VAL(ncclSuccess);
    ROW_VAL(ncclUnhandledCudaError);
    ROW_VAL(ncclSystemError);
    ROW_VAL(ncclInternalError);
    ROW_VAL(ncclInvalidArgument);
    ROW_VAL(ncclInvalidUsage);
    ROW_VAL(ncclRemoteError);
    ROW_VAL(ncclInProgress);
    ROW_VAL(ncclNumResults);
    ROW_VAL(ncclSum);
    ROW_VAL(ncclProd);
    ROW_VAL(ncclMax);
    ROW_VAL(ncclMin);
    ROW_VAL(ncclAvg);
    ROW_VAL(ncclNumOps);
    ROW_VAL(ncclMaxRedOp);
    ROW_VAL(ncclInt8);
    ROW_VAL(ncclChar);
    ROW_VAL(ncclUint8);
    ROW_VAL(ncclInt32);
    ROW_VAL(ncclInt);
    ROW_VAL(ncclUint32);
    ROW_VAL(ncclInt64);
    ROW_VAL(ncclUint64);
    ROW_VAL(ncclFloat16);
    ROW_VAL(ncclHalf);
    ROW_VAL(ncclFloat32);
    ROW_VAL(ncclFloat);
    ROW_VAL(ncclFloat64);
    ROW_VAL(ncclDouble);
    ROW_VAL(ncclBfloat16);
    ROW_VAL(ncclFloat8e4m3);
    ROW_VAL(ncclFloat8e5m2);
    ROW_VAL(ncclNumTypes);
    ROW_VAL(ncclScalarDevice);
    ROW_VAL(ncclScalarHostImmediate);
}

static void layout_print_config(void)
{
    ROW_SIZE(ncclConfig_t);
    ROW_OFF(ncclConfig_t, size);
    ROW_OFF(ncclConfig_t, magic);
    ROW_OFF(ncclConfig_t, version);
    ROW_OFF(ncclConfig_t, blocking);
    ROW_OFF(ncclConfig_t, cgaClusterSize);
    ROW_OFF(ncclConfig_t, minCTAs);
    ROW_OFF(ncclConfig_t, maxCTAs);
    ROW_OFF(ncclConfig_t, netName);
    ROW_OFF(ncclConfig_t, splitShare);
    ROW_OFF(ncclConfig_t, trafficClass);
    ROW_OFF(ncclConfig_t, commName);
    ROW_OFF(ncclConfig_t, collnetEnable);
    ROW_OFF(ncclConfig_t, CTAPolicy);
    ROW_OFF(ncclConfig_t, shrinkShare);
    ROW_OFF(ncclConfig_t, nvlsCTAs);
    ROW_OFF(ncclConfig_t, nChannelsPerNetPeer);
    ROW_OFF(ncclConfig_t, nvlinkCentricSched);
    ROW_SIZE(ncclSimInfo_t);
    ROW_OFF(ncclSimInfo_t, size);
    ROW_OFF(ncclSimInfo_t, magic);
    ROW_OFF(ncclSimInfo_t, version);
    ROW_OFF(ncclSimInfo_t, estimatedTime);
}

static void layout_check_initializers(void)
{
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
    const int *ints[] = { &c.blocking, &c.cgaClusterSize, &c.minCTAs, &c.maxCTAs,
                          &c.splitShare, &c.trafficClass, &c.collnetEnable, &c.CTAPolicy,
                          &c.shrinkShare, &c.nvlsCTAs, &c.nChannelsPerNetPeer,
                          &c.nvlinkCentricSched };
    char name[64];

    layout_expect("config.size", (long long)c.size, 80);
    layout_expect("config.magic", c.magic, 0xcafebeefLL);
    layout_expect("config.version", c.version, 22809);
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        snprintf(name, sizeof(name), "config.int[%zu]", i);
        layout_expect(name, *ints[i], NCCL_CONFIG_UNDEF_INT);
    }
    layout_expect("config.netName==NULL", c.netName == NULL, 1);
    layout_expect("config.commName==NULL", c.commName == NULL, 1);
    layout_expect("siminfo.size", (long long)s.size, 24);
    layout_expect("siminfo.magic", s.magic, 0x74685283LL);
    layout_expect("siminfo.version", s.version, 22809);
    layout_expect("siminfo.estimatedTime==-1", s.estimatedTime == -1.0f, 1);
}

#ifdef LAYOUT_WITH_DEVICE
static void layout_print_device(void)
{
    ROW_SIZE(ncclTeam_t);
    ROW_OFF(ncclTeam_t, nRanks);
    ROW_OFF(ncclTeam_t, rank);
    ROW_OFF(ncclTeam_t, stride);
    ROW_SIZE(ncclDevResourceHandle_t);
    ROW_SIZE(ncclGinSignal_t);
    ROW_SIZE(ncclGinCounter_t);
    ROW_SIZE(ncclMultimemHandle_t);
    ROW_SIZE(ncclLsaBarrierHandle_t);
    ROW_OFF(ncclLsaBarrierHandle_t, bufHandle);
    ROW_OFF(ncclLsaBarrierHandle_t, nBarriers);
    ROW_SIZE(ncclGinBarrierHandle_t);
    ROW_OFF(ncclGinBarrierHandle_t, signal0);
    ROW_OFF(ncclGinBarrierHandle_t, bufHandle);
    ROW_SIZE(ncclLLA2AHandle_t);
    ROW_OFF(ncclLLA2AHandle_t, bufHandle);
    ROW_OFF(ncclLLA2AHandle_t, nSlots);
    ROW_SIZE(ncclDevCommRequirements_t);
    ROW_OFF(ncclDevCommRequirements_t, resourceRequirementsList);
    ROW_OFF(ncclDevCommRequirements_t, teamRequirementsList);
    ROW_OFF(ncclDevCommRequirements_t, lsaMultimem);
    ROW_OFF(ncclDevCommRequirements_t, barrierCount);
    ROW_OFF(ncclDevCommRequirements_t, lsaBarrierCount);
    ROW_OFF(ncclDevCommRequirements_t, railGinBarrierCount);
    ROW_OFF(ncclDevCommRequirements_t, lsaLLA2ABlockCount);
    ROW_OFF(ncclDevCommRequirements_t, lsaLLA2ASlotCount);
    ROW_OFF(ncclDevCommRequirements_t, ginForceEnable);
    ROW_OFF(ncclDevCommRequirements_t, ginContextCount);
    ROW_OFF(ncclDevCommRequirements_t, ginSignalCount);
    ROW_OFF(ncclDevCommRequirements_t, ginCounterCount);
    ROW_SIZE(ncclDevResourceRequirements_t);
    ROW_OFF(ncclDevResourceRequirements_t, next);
    ROW_OFF(ncclDevResourceRequirements_t, bufferSize);
    ROW_OFF(ncclDevResourceRequirements_t, bufferAlign);
    ROW_OFF(ncclDevResourceRequirements_t, outBufferHandle);
    ROW_OFF(ncclDevResourceRequirements_t, ginSignalCount);
    ROW_OFF(ncclDevResourceRequirements_t, ginCounterCount);
    ROW_OFF(ncclDevResourceRequirements_t, outGinSignalStart);
    ROW_OFF(ncclDevResourceRequirements_t, outGinCounterStart);
    ROW_SIZE(ncclTeamRequirements_t);
    ROW_OFF(ncclTeamRequirements_t, next);
    ROW_OFF(ncclTeamRequirements_t, team);
    ROW_OFF(ncclTeamRequirements_t, multimem);
    ROW_OFF(ncclTeamRequirements_t, outMultimemHandle);
}
#endif

int main(void)
{
    layout_print_basic();
    layout_print_enums();
    layout_print_config();
    layout_check_initializers();
#ifdef LAYOUT_WITH_DEVICE
    layout_print_device();
#endif
    if (layout_failures != 0) {
        printf("test_layout: %d check(s) failed\n", layout_failures);
        return 1;
    }
    return 0;
}
