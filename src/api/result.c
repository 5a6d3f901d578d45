/*
 * braid_status_t -> ncclResult_t: the one place where internal statuses become the codes
 * the NCCL API returns (see the table in api.h).
 */
#include "api/api.h"

ncclResult_t braid_api_result(braid_status_t st)
{
    switch (st) {
    case BRAID_OK:
        return ncclSuccess;
    case BRAID_INPROGRESS:
        return ncclInProgress;
    case BRAID_ERR_INVALID:
        return ncclInvalidArgument;
    case BRAID_ERR_USAGE:
    case BRAID_ERR_UNSUPPORTED:
    case BRAID_ERR_ABORTED:
        return ncclInvalidUsage;
    case BRAID_ERR_SYSTEM:
    case BRAID_ERR_NOMEM:
        return ncclSystemError;
    case BRAID_ERR_INTERNAL:
        return ncclInternalError;
    case BRAID_ERR_REMOTE:
    case BRAID_ERR_TIMEOUT:
        return ncclRemoteError;
    case BRAID_ERR_DEVICE:
        return ncclUnhandledCudaError;
    }
    return ncclInternalError; /* a status this table does not know yet: a braid bug */
}
