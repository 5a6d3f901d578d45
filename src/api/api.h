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
 * Write every API function as a plain definition under its own name (so that ctags, grep
 * '^ncclResult_t ncclGetVersion(' and debuggers find it), preceded by BRAID_API_TWIN:
 *
 *     BRAID_API_TWIN(ncclGetVersion);
 *     ncclResult_t ncclGetVersion(int *version)
 *     {
 *         ...
 *     }
 *
 * BRAID_API_TWIN takes only the name and uses the prototype nccl.h (nccl_device.h, rccl.h)
 * already declares, which must be in scope: it redeclares ncclFoo weak with default
 * visibility and declares pncclFoo as its alias with default visibility. A definition
 * that does not match the header's prototype is a compile error. The same macro serves
 * RCCL's msccl* names (twin pmscclFoo). braid's own API (braid*) has no twin: use
 * BRAID_EXPORT.
 */
#ifndef BRAID_API_API_H
#define BRAID_API_API_H

#include "nccl.h"
#include "base/status.h"

#define BRAID_EXPORT __attribute__((visibility("default")))

/*
 * The alias must be declared in the translation unit that defines _name (GCC needs the
 * target there). __typeof__ of a name the header marks deprecated (ncclResetDebugInit)
 * would warn, hence the diagnostic push/pop; the _Static_assert only ends the expansion
 * outside the pragmas, so that the caller's ';' closes a declaration.
 */
#define BRAID_API_TWIN(_name)                                                                \
    _Pragma("GCC diagnostic push")                                                           \
    _Pragma("GCC diagnostic ignored \"-Wdeprecated-declarations\"")                          \
    extern __typeof__(_name) _name __attribute__((weak, visibility("default")));             \
    extern __typeof__(_name) p##_name __attribute__((alias(#_name), visibility("default"))); \
    _Pragma("GCC diagnostic pop")                                                            \
    _Static_assert(1, "BRAID_API_TWIN(" #_name ")")

/*
 * The one mapping from braid's internal status to NCCL's result codes:
 *   OK -> ncclSuccess, INPROGRESS -> ncclInProgress, INVALID -> ncclInvalidArgument,
 *   USAGE, UNSUPPORTED, ABORTED -> ncclInvalidUsage, SYSTEM, NOMEM -> ncclSystemError,
 *   INTERNAL -> ncclInternalError, REMOTE, TIMEOUT -> ncclRemoteError,
 *   DEVICE -> ncclUnhandledCudaError; anything else -> ncclInternalError.
 */
ncclResult_t braid_api_result(braid_status_t st);

#endif
