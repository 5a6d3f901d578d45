/*
 * RCCL's MSCCL entry points on braid's user schedules (algorithms/usched.h): mscclLoadAlgo
 * loads a braid schedule file (docs/SCHEDULES.md; MSCCL's XML is not read), mscclRunAlgo
 * (src/api/coll.c, beside the other collectives) runs it, mscclUnloadAlgo retires it.
 */
#include "algorithms/usched.h"
#include "api/api.h"
#include "rccl/rccl.h"

BRAID_API_TWIN(mscclLoadAlgo);
ncclResult_t mscclLoadAlgo(const char *mscclAlgoFilePath, mscclAlgoHandle_t *mscclAlgoHandle,
                           int rank)
{
    (void)rank;     /* the file describes every rank */
    if (mscclAlgoFilePath == NULL || mscclAlgoHandle == NULL)
        return braid_api_result(braid_err(BRAID_ERR_INVALID, "mscclLoadAlgo: %s is NULL",
                                          mscclAlgoFilePath == NULL ? "mscclAlgoFilePath"
                                                                    : "mscclAlgoHandle"));
    int h;
    braid_status_t st = braid_usched_load(mscclAlgoFilePath, &h);
    if (st == BRAID_OK)
        *mscclAlgoHandle = h;
    return braid_api_result(st);
}

BRAID_API_TWIN(mscclUnloadAlgo);
ncclResult_t mscclUnloadAlgo(mscclAlgoHandle_t mscclAlgoHandle)
{
    return braid_api_result(braid_usched_unload(mscclAlgoHandle));
}
