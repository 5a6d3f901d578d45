/*
 * Version and error-string entry points: ncclGetVersion, ncclGetErrorString and braid's
 * braidGetVersionString.
 */
#include <stddef.h>

#include "api/api.h"
#include "braid.h"

/*
 * The sentences of NVIDIA's libnccl.so.2 (2.28.9), byte for byte: scripts and frameworks
 * match on them. Indexed by ncclResult_t.
 */
static const char *const api_result_str[ncclNumResults] = {
    [ncclSuccess] = "no error",
    [ncclUnhandledCudaError] = "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
    [ncclSystemError] = "unhandled system error (run with NCCL_DEBUG=INFO for details)",
    [ncclInternalError] = "internal error - please report this issue to the NCCL developers",
    [ncclInvalidArgument] = "invalid argument (run with NCCL_DEBUG=WARN for details)",
    [ncclInvalidUsage] = "invalid usage (run with NCCL_DEBUG=WARN for details)",
    [ncclRemoteError] = "remote process exited or there was a network error",
    [ncclInProgress] = "NCCL operation in progress",
};

BRAID_API_TWIN(ncclGetErrorString);
const char *ncclGetErrorString(ncclResult_t result)
{
    /* Compare as unsigned: an out-of-range value (negative included) is "unknown". */
    if ((unsigned int)result >= (unsigned int)ncclNumResults)
        return "unknown result code";
    return api_result_str[result];
}

BRAID_API_TWIN(ncclGetVersion);
ncclResult_t ncclGetVersion(int *version)
{
    if (version == NULL)
        return braid_api_result(braid_err(BRAID_ERR_INVALID,
                                          "ncclGetVersion: version is NULL; pass the address "
                                          "of an int to receive the version code"));
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

BRAID_EXPORT const char *braidGetVersionString(void)
{
    return BRAID_VERSION_STRING;
}
