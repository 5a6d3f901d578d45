/*
 * Helpers shared by the public entry points in src/api/.
 *
 * Export rule. The library is built with -fvisibility=hidden; only the API is exported,
 * with the binding NVIDIA's libnccl.so.2 uses (objdump -T shows nccl* 'w', pnccl* 'g'):
 *
 *   ncclFoo   weak, default visibility: a profiler or shim that defines its own ncclFoo
 *             wins over ours, and calls pncclFoo to reach the library;
 *   pncclFoo  a strong alias of ncclFoo (same address), default visibility.
 *
 * Write every API function as
 *
 *     BRAID_API(ncclResult_t, ncclGetVersion, int *version)
 *     {
 *         ...
 *     }
 *
 * and for a function without parameters pass `void`. The same macro serves RCCL's
 * msccl* names (twin pmscclFoo). braid's own API (braid*) has no twin: use BRAID_EXPORT.
 */
#ifndef BRAID_API_API_H
#define BRAID_API_API_H

#include "nccl.h"
#include "base/status.h"

#define BRAID_EXPORT __attribute__((visibility("default")))

#define BRAID_API(_ret, _name, ...)                                                        \
    BRAID_EXPORT _ret p##_name(__VA_ARGS__) __attribute__((alias(#_name)));                \
    BRAID_EXPORT __attribute__((weak)) _ret _name(__VA_ARGS__)

/*
 * The one mapping from braid's internal status to NCCL's result codes:
 *   OK -> ncclSuccess, INPROGRESS -> ncclInProgress, INVALID -> ncclInvalidArgument,
 *   USAGE, UNSUPPORTED, ABORTED -> ncclInvalidUsage, SYSTEM, NOMEM -> ncclSystemError,
 *   INTERNAL -> ncclInternalError, REMOTE, TIMEOUT -> ncclRemoteError,
 *   DEVICE -> ncclUnhandledCudaError; anything else -> ncclInternalError.
 */
ncclResult_t braid_api_result(braid_status_t st);

#endif
