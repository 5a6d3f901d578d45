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

#ifdef __cplusplus
}
#endif

#endif
