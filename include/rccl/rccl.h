/*
 * braid: RCCL's additions to the NCCL API.
 *
 * Programs written for AMD's RCCL include <rccl/rccl.h>. This header gives them the whole
 * NCCL API of ../nccl.h plus the entry points RCCL has and NCCL does not: the RCCL
 * spelling of all-to-all, the variable-size all-to-all, and the MSCCL algorithm API.
 * As everywhere in the API, each function has a "p" profiling twin.
 *
 * Streams are hipStream_t here. When HIP's headers are not in use, hipStream_t is the same
 * opaque pointer HIP declares (`struct ihipStream_t *`), so a later #include of
 * hip_runtime.h agrees with it (see ../nccl.h for how the runtime is detected).
 */
#ifndef RCCL_H_
#define RCCL_H_

#include "../nccl.h"

#if !defined(HIP_VERSION) && !defined(BRAID_HIPSTREAM_T_DEFINED)
#define BRAID_HIPSTREAM_T_DEFINED 1
typedef struct ihipStream_t *hipStream_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* RCCL's spelling of ncclAlltoAll: block j of sendbuff (count elements at
 * sendbuff + j*count) goes to rank j; the block from rank i lands at recvbuff + i*count. */
ncclResult_t ncclAllToAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclAllToAll(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, hipStream_t stream);

/* All-to-all with a size per peer: sendcounts[j] elements at sendbuff + sdispls[j] go to
 * rank j; recvcounts[i] elements from rank i land at recvbuff + rdispls[i]. Counts and
 * displacements are in elements; sendcounts[j] on this rank must equal recvcounts[me] on
 * rank j. */
ncclResult_t ncclAllToAllv(const void *sendbuff, const size_t sendcounts[], const size_t sdispls[],
                           void *recvbuff, const size_t recvcounts[], const size_t rdispls[],
                           ncclDataType_t datatype, ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclAllToAllv(const void *sendbuff, const size_t sendcounts[],
                            const size_t sdispls[], void *recvbuff, const size_t recvcounts[],
                            const size_t rdispls[], ncclDataType_t datatype, ncclComm_t comm,
                            hipStream_t stream);

/* ---- MSCCL: user-supplied collective algorithms ------------------------------------- */

/* Handle of a loaded MSCCL algorithm. */
typedef int mscclAlgoHandle_t;

/* Load the algorithm in mscclAlgoFilePath (for braid: a schedule file, docs/SCHEDULES.md)
 * and store its handle in *mscclAlgoHandle. */
ncclResult_t mscclLoadAlgo(const char *mscclAlgoFilePath, mscclAlgoHandle_t *mscclAlgoHandle,
                           int rank);
ncclResult_t pmscclLoadAlgo(const char *mscclAlgoFilePath, mscclAlgoHandle_t *mscclAlgoHandle,
                            int rank);

/* Run a loaded algorithm. Which arguments matter depends on the collective the algorithm
 * implements: `count` for the fixed-size ones, the count/displacement arrays (in elements)
 * for the v-variants, `root` for rooted ones, `peer` for point to point, `op` for
 * reductions. */
ncclResult_t mscclRunAlgo(const void *sendBuff, const size_t sendCounts[], const size_t sDisPls[],
                          void *recvBuff, const size_t recvCounts[], const size_t rDisPls[],
                          size_t count, ncclDataType_t dataType, int root, int peer,
                          ncclRedOp_t op, mscclAlgoHandle_t mscclAlgoHandle, ncclComm_t comm,
                          hipStream_t stream);
ncclResult_t pmscclRunAlgo(const void *sendBuff, const size_t sendCounts[], const size_t sDisPls[],
                           void *recvBuff, const size_t recvCounts[], const size_t rDisPls[],
                           size_t count, ncclDataType_t dataType, int root, int peer,
                           ncclRedOp_t op, mscclAlgoHandle_t mscclAlgoHandle, ncclComm_t comm,
                           hipStream_t stream);

/* Release an algorithm of mscclLoadAlgo. */
ncclResult_t mscclUnloadAlgo(mscclAlgoHandle_t mscclAlgoHandle);
ncclResult_t pmscclUnloadAlgo(mscclAlgoHandle_t mscclAlgoHandle);

#ifdef __cplusplus
}
#endif

#endif
