/*
 * braid's own extensions to the NCCL API.
 *
 * Everything here is braid-only: programs that use it must be linked against braid and
 * should check BRAID_VERSION_* at build time. The NCCL API itself comes from nccl.h,
 * which this header includes.
 */
#ifndef BRAID_H
#define BRAID_H

#include "nccl.h"

#define BRAID_VERSION_MAJOR 0
#define BRAID_VERSION_MINOR 1
#define BRAID_VERSION_PATCH 0
#define BRAID_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The version of the braid library actually loaded, as "MAJOR.MINOR.PATCH" (compare with
 * BRAID_VERSION_STRING, the version of this header). Static storage; never NULL.
 * ncclGetVersion, by contrast, reports the NCCL version braid is compatible with.
 */
const char *braidGetVersionString(void);

/* ======================================================================================
 * Uneven collectives (per-rank counts), on host and device buffers like any NCCL call.
 * ====================================================================================== */

/*
 * All-gather with a count per rank: rank p's `sendcount` elements land at
 * recvbuff + displs[p] elements, where sendcount on rank p must equal recvcounts[p] (every
 * rank passes the same recvcounts and displs). In place when
 * sendbuff == recvbuff + displs[rank]. Blocks must not overlap. A count of 0 for a rank is
 * allowed; all counts 0 is a no-op.
 */
ncclResult_t braidAllGatherV(const void *sendbuff, size_t sendcount, void *recvbuff,
                             const size_t recvcounts[], const size_t displs[],
                             ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/*
 * Reduce-scatter with a count per rank: the blocks sendbuff + displs[p] of sendcounts[p]
 * elements are reduced over all ranks and rank p receives block p in recvbuff, where
 * recvcount on rank p must equal sendcounts[p] (every rank passes the same sendcounts and
 * displs). In place when recvbuff == sendbuff + displs[rank].
 */
ncclResult_t braidReduceScatterV(const void *sendbuff, const size_t sendcounts[],
                                 const size_t displs[], void *recvbuff, size_t recvcount,
                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                 cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
