/*
 * The device seam. This release runs on host memory only; what it needs from GPU runtimes
 * is to refuse, with a clear error, buffers the CPU cannot read (CUDA or HIP device memory)
 * instead of crashing on them. The HIP and CUDA backends of later releases plug in here.
 */
#ifndef BRAID_DEVICE_DEVICE_H
#define BRAID_DEVICE_DEVICE_H

#include <stddef.h>

#include "base/status.h"

/* Whether calls should check their buffers: BRAID_HOST_PTR_CHECK=1, or =auto (the default)
 * and a CUDA or HIP runtime is loaded in this process. Evaluated at communicator init. */
int braid_device_check_wanted(void);

/* BRAID_ERR_UNSUPPORTED naming `what` and `arg` unless the first byte at p can be read by
 * the CPU (one process_vm_readv of this process: device memory faults, host memory not). */
braid_status_t braid_device_check_host(const void *p, const char *what, const char *arg);

#endif
