/*
 * braid: the NCCL 2.28.9 C API.
 *
 * Every name, type, enum value, struct layout and macro below has the value NVIDIA's nccl.h
 * 2.28.9 gives it, so a program built against either header runs on either library.
 * Each entry point has a "p" twin (pncclAllReduce for ncclAllReduce) for profiling tools
 * that interpose on the plain name.
 *
 * GPU runtime headers.  NVIDIA's header always includes cuda_runtime.h; this one does not,
 * so that plain C programs (host-memory jobs, CI machines without CUDA or HIP) compile.
 * The only runtime type the API needs is the stream handle, and the rule is:
 *
 *   - CUDA runtime already seen (CUDART_VERSION is defined: the program included
 *     cuda_runtime.h or cuda_runtime_api.h, or nvcc, which pre-includes it, is compiling),
 *     or BRAID_USE_CUDA_HEADERS is defined (we include cuda_runtime.h then): cudaStream_t is
 *     CUDA's own, and the fp16/bf16 (and, for C++, fp8) headers are included as NCCL does.
 *   - otherwise, HIP on AMD (HIP_VERSION from hip_runtime.h, or hipcc's __HIP_PLATFORM_AMD__;
 *     BRAID_USE_HIP_HEADERS makes us include hip/hip_runtime.h): cudaStream_t is another
 *     name for hipStream_t, so hipified code passes its streams without casts, as with RCCL.
 *   - otherwise: cudaStream_t is `struct CUstream_st *`, and hipStream_t (declared only in
 *     HIP mode and by rccl/rccl.h) is `struct ihipStream_t *`.
 *
 * The fallbacks are the very typedefs that CUDA's driver_types.h and HIP's
 * hip_runtime_api.h contain (same struct tag, same pointer size), so a translation unit
 * that includes this header first and the real runtime header afterwards sees the same
 * typedef twice, which C11 and C++ accept.  Including the runtime ourselves whenever
 * __has_include finds it would instead make a plain C build depend on where CUDA happens
 * to be installed, and would pull C++-only code into C programs; NVIDIA-style code that
 * relies on nccl.h to bring in cuda_runtime.h defines BRAID_USE_CUDA_HEADERS or includes
 * cuda_runtime.h first.
 */
#ifndef NCCL_H_
#define NCCL_H_

/* ---- GPU runtime selection (see above) ---------------------------------------------- */

#if !defined(CUDART_VERSION) && defined(BRAID_USE_CUDA_HEADERS)
#include <cuda_runtime.h>
#endif
#if !defined(CUDART_VERSION) && !defined(HIP_VERSION) && defined(BRAID_USE_HIP_HEADERS)
#include <hip/hip_runtime.h>
#endif

#if defined(CUDART_VERSION)
#define BRAID_NCCL_H_RUNTIME_CUDA 1
#elif defined(HIP_VERSION) || defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__)
#define BRAID_NCCL_H_RUNTIME_HIP 1
#endif

#if defined(BRAID_NCCL_H_RUNTIME_CUDA)
/* Same extra headers as NVIDIA's nccl.h, so __half / __nv_bfloat16 come along. */
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#elif defined(BRAID_NCCL_H_RUNTIME_HIP)
#if !defined(HIP_VERSION) && !defined(BRAID_HIPSTREAM_T_DEFINED)
#define BRAID_HIPSTREAM_T_DEFINED 1
typedef struct ihipStream_t *hipStream_t;
#endif
#if !defined(cudaStream_t) /* some HIP porting layers #define cudaStream_t hipStream_t */
typedef hipStream_t cudaStream_t;
#endif
#else
#if !defined(cudaStream_t)
typedef struct CUstream_st *cudaStream_t;
#endif
#endif

#include <limits.h>
#include <stddef.h>

/* ---- Version ------------------------------------------------------------------------ */

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""

/* Version code: X*10000 + Y*100 + Z since 2.9; X*1000 + Y*100 + Z before. */
#define NCCL_VERSION_CODE 22809
#define NCCL_VERSION(X, Y, Z)                                                              \
    (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#if defined(__GNUC__) || defined(__clang__)
#define BRAID_NCCL_DEPRECATED(_msg) __attribute__((deprecated(_msg)))
#else
#define BRAID_NCCL_DEPRECATED(_msg)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Handles and basic types -------------------------------------------------------- */

/* A communicator: one rank's view of a group of ranks. */
typedef struct ncclComm *ncclComm_t;
/* A registered memory window (ncclCommWindowRegister). */
typedef struct ncclWindow_vidmem *ncclWindow_t;
#define NCCL_COMM_NULL NULL

/* Opaque bootstrap id made by ncclGetUniqueId on one rank and handed to all the others. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* Result of every call. */
typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;

/* "Not set" markers for ncclConfig_t fields, and the no-color value of ncclCommSplit. */
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* winFlags of ncclCommWindowRegister. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* Values of ncclConfig_t.CTAPolicy. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* shrinkFlags of ncclCommShrink: DEFAULT shrinks a healthy communicator; ABORT first stops
 * whatever the parent still has in flight (use it after a rank failed). */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* revokeFlags of ncclCommRevoke; no other value is accepted. */
#define NCCL_REVOKE_DEFAULT 0x00

/*
 * Communicator options. Start from NCCL_CONFIG_INITIALIZER (which stamps size, magic and
 * version) and set only the fields you need; the library ignores fields newer than the
 * version the caller was built with. 80 bytes on LP64.
 */
typedef struct ncclConfig_v22800 {
    size_t size;              /* sizeof(ncclConfig_t) of the caller: set by the initializer */
    unsigned int magic;       /* 0xcafebeef: set by the initializer */
    unsigned int version;     /* NCCL_VERSION_CODE of the caller's header */
    int blocking;             /* 0: calls may return ncclInProgress (poll ncclCommGetAsyncError) */
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char *netName;      /* network provider to use, as NCCL_NET */
    int splitShare;           /* children of ncclCommSplit share the parent's resources */
    int trafficClass;
    const char *commName;     /* shown in logs */
    int collnetEnable;
    int CTAPolicy;            /* NCCL_CTA_POLICY_* */
    int shrinkShare;          /* children of ncclCommShrink share the parent's resources */
    int nvlsCTAs;
    int nChannelsPerNetPeer;
    int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                            \
    {                                                                                      \
        sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),\
        NCCL_CONFIG_UNDEF_INT,     /* blocking */                                          \
        NCCL_CONFIG_UNDEF_INT,     /* cgaClusterSize */                                    \
        NCCL_CONFIG_UNDEF_INT,     /* minCTAs */                                           \
        NCCL_CONFIG_UNDEF_INT,     /* maxCTAs */                                           \
        NCCL_CONFIG_UNDEF_PTR,     /* netName */                                           \
        NCCL_CONFIG_UNDEF_INT,     /* splitShare */                                        \
        NCCL_CONFIG_UNDEF_INT,     /* trafficClass */                                      \
        NCCL_CONFIG_UNDEF_PTR,     /* commName */                                          \
        NCCL_CONFIG_UNDEF_INT,     /* collnetEnable */                                     \
        NCCL_CONFIG_UNDEF_INT,     /* CTAPolicy */                                         \
        NCCL_CONFIG_UNDEF_INT,     /* shrinkShare */                                       \
        NCCL_CONFIG_UNDEF_INT,     /* nvlsCTAs */                                          \
        NCCL_CONFIG_UNDEF_INT,     /* nChannelsPerNetPeer */                               \
        NCCL_CONFIG_UNDEF_INT,     /* nvlinkCentricSched */                                \
    }

/* Output of ncclGroupSimulateEnd. Start from NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
    size_t size;              /* set by the initializer */
    unsigned int magic;       /* 0x74685283: set by the initializer */
    unsigned int version;     /* NCCL_VERSION_CODE of the caller's header */
    float estimatedTime;      /* filled in: predicted time of the group */
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER                                                          \
    {                                                                                      \
        sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),\
        NCCL_UNDEF_FLOAT                                                                   \
    }

/*
 * Reduction operators. Values from ncclNumOps up are per-communicator operators made by
 * ncclRedOpCreatePreMulSum. ncclMaxRedOp is the largest value an enum of this size holds
 * (0x7fffffff when enums are 4 bytes); ncclRedOp_dummy_t exists only to measure that size.
 */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
    ncclSum = 0,
    ncclProd = 1,
    ncclMax = 2,
    ncclMin = 3,
    ncclAvg = 4,
    ncclNumOps = 5,
    ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/* Element types; several have two spellings with one value. */
typedef enum {
    ncclInt8 = 0,
    ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclHalf = 6,
    ncclFloat32 = 7,
    ncclFloat = 7,
    ncclFloat64 = 8,
    ncclDouble = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10,
    ncclFloat8e5m2 = 11,
    ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives: Device = read by the collective
 * while it runs; HostImmediate = read once, before ncclRedOpCreatePreMulSum returns. */
typedef enum {
    ncclScalarDevice = 0,
    ncclScalarHostImmediate = 1
} ncclScalarResidence_t;

/* ---- Memory ------------------------------------------------------------------------- */

/* Allocate `size` bytes suited to every optimisation of the library (registration,
 * windows); the block may be larger than asked. Free with ncclMemFree. */
ncclResult_t ncclMemAlloc(void **ptr, size_t size);
ncclResult_t pncclMemAlloc(void **ptr, size_t size);

/* Free a block from ncclMemAlloc. */
ncclResult_t ncclMemFree(void *ptr);
ncclResult_t pncclMemFree(void *ptr);

/* ---- Version and errors ------------------------------------------------------------- */

/* Store the library's version code (NCCL_VERSION_CODE of the NCCL it stands for) in
 * *version. */
ncclResult_t ncclGetVersion(int *version);
ncclResult_t pncclGetVersion(int *version);

/* A fixed English sentence for a result code; never NULL. */
const char *ncclGetErrorString(ncclResult_t result);
const char *pncclGetErrorString(ncclResult_t result);

/* The text of the last error the library recorded (comm may be NULL); never NULL. */
const char *ncclGetLastError(ncclComm_t comm);
const char *pncclGetLastError(ncclComm_t comm);

/* Re-read the logging settings (NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE). */
BRAID_NCCL_DEPRECATED("ncclResetDebugInit is not supported as part of the NCCL API and will be removed in the future")
void ncclResetDebugInit(void);
BRAID_NCCL_DEPRECATED("pncclResetDebugInit is not supported as part of the NCCL API and will be removed in the future")
void pncclResetDebugInit(void);

/* ---- Communicator life cycle -------------------------------------------------------- */

/* Make a new unique id. Call on one rank and give the id to every rank of the job. */
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId);

/* Create rank `rank` of an `nranks` communicator bootstrapped through `commId`, with the
 * options in `config` (NULL: defaults). Collective over the ranks: call it from one thread
 * or process per rank, or for several ranks inside ncclGroupStart/ncclGroupEnd. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t *config);

/* ncclCommInitRankConfig with the default options. */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);

/* Create all `ndev` ranks of a communicator in this process, comm[i] being rank i, on the
 * devices in devlist (NULL: devices 0..ndev-1). comm must hold ndev handles. */
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);
ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);

/* Like ncclCommInitRankConfig, bootstrapped through nId ids (the same ids, in the same
 * order, on every rank) to spread the start-up load. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId *commIds, ncclConfig_t *config);

/* Finish every operation issued on comm and release what the ranks share. A non-blocking
 * communicator reports ncclInProgress through ncclCommGetAsyncError until it is done;
 * ncclCommDestroy then frees the rest without waiting. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/* Free this rank's communicator (after ncclCommFinalize, or finalizing it first). */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/* Stop whatever comm has in flight and free it. May be called from another thread. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/* Stop comm's in-flight operations and keep the communicator for destroy, split or shrink;
 * the state reads ncclInProgress until comm is quiet. revokeFlags: NCCL_REVOKE_DEFAULT. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* Split comm into one new communicator per color, ranks ordered by key (ties: old rank).
 * Collective over comm. color NCCL_SPLIT_NOCOLOR gives *newcomm = NULL. config NULL:
 * inherit comm's options. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                            ncclConfig_t *config);

/* Make a communicator of comm's ranks minus the excludeRanksCount ranks listed, keeping
 * the survivors' order. shrinkFlags: NCCL_SHRINK_*. config NULL: inherit comm's options. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                             ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags);

/* ---- Communicator queries ----------------------------------------------------------- */

/* Store in *asyncError the communicator's state: ncclSuccess, ncclInProgress while a
 * non-blocking call is still running, or the error that broke it. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);

/* Store the number of ranks of comm in *count. */
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int *count);

/* Store in *device the GPU that comm's rank uses. */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device);

/* Store this rank's number in comm in *rank. */
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank);

/* ---- Buffer registration ------------------------------------------------------------ */

/* Register [buff, buff+size) with comm for faster transfers; *handle is for
 * ncclCommDeregister. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);

/* Undo ncclCommRegister. */
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle);

/* Collectively register a window [buff, buff+size) on every rank of comm (NCCL_WIN_*). */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                     int winFlags);

/* Collectively undo ncclCommWindowRegister. */
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* ---- Custom reduction operators ----------------------------------------------------- */

/* Create an operator for comm and datatype that multiplies each local input by *scalar
 * and then sums across ranks; `residence` says when *scalar is read. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);

/* Destroy an operator of ncclRedOpCreatePreMulSum (allowed once the last call using it
 * has returned). */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/*
 * ---- Collectives ----------------------------------------------------------------------
 *
 * Every rank of comm makes the same call, in the same order. Counts are in elements.
 * The call is ordered on `stream` and returns once it is queued there; on host buffers
 * braid completes it before returning (or at the outermost ncclGroupEnd). One thread
 * driving several ranks must bracket their calls with ncclGroupStart/ncclGroupEnd.
 */

/* Combine `count` elements of every rank's sendbuff with op into recvbuff of rank `root`
 * (recvbuff is ignored elsewhere). sendbuff == recvbuff: in place. */
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream);

/* Older in-place broadcast: buff of `root` is copied into buff of every rank. */
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);

/* Copy `count` elements of sendbuff of `root` into recvbuff of every rank. */
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream);

/* Combine `count` elements of every rank's sendbuff with op; every rank gets the result
 * in recvbuff. sendbuff == recvbuff: in place. */
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream);

/* Combine nranks*recvcount elements of every rank's sendbuff with op; rank i gets block i
 * of the result in recvbuff. recvbuff == sendbuff + rank*recvcount: in place. */
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);

/* Every rank gets in recvbuff the sendcount elements of each rank i, at offset
 * i*sendcount. sendbuff == recvbuff + rank*sendcount: in place. */
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/* Block j (count elements at sendbuff + j*count) goes to rank j; the block from rank i
 * lands at recvbuff + i*count. */
ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/* Rank `root` gets the count elements of rank i at recvbuff + i*count (recvbuff is
 * ignored elsewhere). sendbuff == recvbuff + root*count: in place. */
ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

/* Rank i gets in recvbuff the count elements at sendbuff + i*count of rank `root`
 * (sendbuff is ignored elsewhere). recvbuff == sendbuff + root*count: in place. */
ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

/* ---- Point to point ----------------------------------------------------------------- */

/* Send `count` elements to rank `peer`, which posts a matching ncclRecv. Sends and
 * receives that must progress together go in one ncclGroupStart/ncclGroupEnd. */
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/* Receive `count` elements from rank `peer`, which posts a matching ncclSend. */
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/* ---- Groups ------------------------------------------------------------------------- */

/* Open a group: the calls of this thread up to the matching ncclGroupEnd are queued and
 * then issued together (one thread driving several ranks, fused operations, concurrent
 * send/recv). Groups nest; only the outermost end issues. */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);

/* Close a group; the outermost one issues everything queued since its ncclGroupStart. */
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/* Close a group without issuing it and report the predicted time in *simInfo. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo);

#ifdef __cplusplus
}
#endif

#endif
