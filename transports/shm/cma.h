/*
 * Cross-memory attach: single-copy reads of another process's memory (process_vm_readv).
 *
 * The shared-memory transport decides at init whether every pair of local ranks may use it
 * (a trial read, agreed by all ranks); the executor then pulls large messages straight from
 * a peer's buffers with braid_cma_read instead of passing them through FIFO slots. Ranks
 * that are threads of one process read each other's buffers directly.
 */
#ifndef BRAID_TRANSPORTS_SHM_CMA_H
#define BRAID_TRANSPORTS_SHM_CMA_H

#include <stddef.h>
#include <stdint.h>

/* A random key of this process, the same in all its threads: with the pid it tells whether
 * a peer is this very process (a pid alone may repeat across pid namespaces). */
uint64_t braid_cma_proc_key(void);

/* Let other processes of this user read this one: on kernels with Yama (ptrace_scope 1),
 * process_vm_readv is otherwise refused to anything but an ancestor. Once per process;
 * does nothing where Yama is absent. */
void braid_cma_allow_peers(void);

/* Read `len` bytes at address `remote` of process `pid` into dst. Returns 0, or the errno of
 * the failure: ESRCH (the process is gone or a zombie), EPERM (not allowed: another user,
 * Yama, seccomp), ENOSYS (no CMA in this kernel), EFAULT (an address is not mapped). */
int braid_cma_read(int pid, void *dst, uint64_t remote, size_t len);

#endif
