/*
 * RCCL's MSCCL entry points. User-supplied schedules come with the algorithms work
 * (user schedule files, issue 5); until then these say so and change nothing.
 */
#include "api/api.h"
#include "rccl/rccl.h"

static ncclResult_t msccl_unsupported(const char *what)
{
    return braid_api_result(braid_err(BRAID_ERR_UNSUPPORTED, "%s: braid does not run MSCCL "
                                      "algorithm files yet; use the built-in collectives", what));
}

BRAID_API(ncclResult_t, mscclLoadAlgo, const char *mscclAlgoFilePath,
          mscclAlgoHandle_t *mscclAlgoHandle, int rank)
{
    (void)mscclAlgoFilePath;
    (void)mscclAlgoHandle;
    (void)rank;
    return msccl_unsupported("mscclLoadAlgo");
}

BRAID_API(ncclResult_t, mscclRunAlgo, const void *sendBuff, const size_t sendCounts[],
          const size_t sDisPls[], void *recvBuff, const size_t recvCounts[],
          const size_t rDisPls[], size_t count, ncclDataType_t dataType, int root, int peer,
          ncclRedOp_t op, mscclAlgoHandle_t mscclAlgoHandle, ncclComm_t comm, hipStream_t stream)
{
    (void)sendBuff, (void)sendCounts, (void)sDisPls, (void)recvBuff, (void)recvCounts;
    (void)rDisPls, (void)count, (void)dataType, (void)root, (void)peer, (void)op;
    (void)mscclAlgoHandle, (void)comm, (void)stream;
    return msccl_unsupported("mscclRunAlgo");
}

BRAID_API(ncclResult_t, mscclUnloadAlgo, mscclAlgoHandle_t mscclAlgoHandle)
{
    (void)mscclAlgoHandle;
    return msccl_unsupported("mscclUnloadAlgo");
}
