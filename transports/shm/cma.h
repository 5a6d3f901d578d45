/*
 * Cross-memory attach: single-copy reads of another process's memory (process_vm_readv);
 * transport.h declares the reads, which the executor's pulls make.
 *
 * The shared-memory transport decides at init whether every pair of local ranks may use it
 * (a trial read, agreed by all ranks); the executor then pulls large messages straight from
 * a peer's buffers with braid_cma_read instead of passing them through FIFO slots. Ranks
 * that are threads of one process read each other's buffers directly.
 */
#ifndef BRAID_TRANSPORTS_SHM_CMA_H
#define BRAID_TRANSPORTS_SHM_CMA_H

#include "transports/transport.h"

/* Let other processes of this user read this one: on kernels with Yama (ptrace_scope 1),
 * process_vm_readv is otherwise refused to anything but an ancestor. Once per process;
 * does nothing where Yama is absent. */
void braid_cma_allow_peers(void);

#endif
