/*
 * ncclGroupStart / ncclGroupEnd / ncclGroupSimulateEnd: per thread, nesting; the outermost
 * end runs everything queued since the outermost start.
 */
#include "api/api.h"
#include "core/enqueue.h"

#define SIM_INFO_MAGIC 0x74685283u

BRAID_API_TWIN(ncclGroupStart);
ncclResult_t ncclGroupStart(void)
{
    braid_group_start();
    return ncclSuccess;
}

BRAID_API_TWIN(ncclGroupEnd);
ncclResult_t ncclGroupEnd(void)
{
    if (braid_group_depth() == 0)
        return braid_api_result(braid_err(BRAID_ERR_USAGE, "ncclGroupEnd: no group is open on "
                                          "this thread (ncclGroupEnd without ncclGroupStart)"));
    return braid_api_result(braid_group_end());
}

BRAID_API_TWIN(ncclGroupSimulateEnd);
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    double seconds = 0;
    if (braid_group_depth() == 0)
        return braid_api_result(braid_err(BRAID_ERR_USAGE, "ncclGroupSimulateEnd: no group is "
                                          "open on this thread"));
    if (simInfo == NULL)   /* as NCCL: nothing to simulate into, a plain ncclGroupEnd */
        return braid_api_result(braid_group_end());
    if (simInfo->magic != SIM_INFO_MAGIC)
        return braid_api_result(braid_err(BRAID_ERR_INVALID, "ncclGroupSimulateEnd: "
                                          "simInfo->magic is 0x%x: initialise it with "
                                          "NCCL_SIM_INFO_INITIALIZER", simInfo->magic));
    braid_status_t st = braid_group_simulate_end(&seconds);
    /* NCCL reports microseconds */
    if (st >= 0 && simInfo->size >= sizeof(ncclSimInfo_t))
        simInfo->estimatedTime = (float)(seconds * 1e6);
    return braid_api_result(st);
}
