/*
 * braid's GPU kernels (kernels/gpu) as a device runs them: the embedded images, the one a
 * device loaded, and the launch of one slice's kernel. Both engines use them: the host
 * engine's device slices (src/exec/dev_slice.c) and the GPU engine (src/exec/gpu.c).
 *
 * Kernels are loaded once per device and forced (device.h's module_function), on the
 * thread that makes a communicator: a driver serialises loads behind a lock that a caller's
 * pageable copy may hold while its stream waits for braid, so nothing loads while braid's
 * work is in flight. A launch only queues work on a stream.
 */
#ifndef BRAID_EXEC_DEV_KERNELS_H
#define BRAID_EXEC_DEV_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct braid_dev_kernels {
    void *module;               /* loaded once per device, for the process's life */
    void *reduce, *copy, *cast;
    const char *image;          /* which image loaded: "cuda", "emu", "hip (compiled ...)" */
} braid_dev_kernels_t;

/* braid's kernels on device `ordinal` of the backend in use (bound on this thread),
 * loaded at the first call for that device. */
braid_status_t braid_dev_kernels_get(int ordinal, braid_dev_kernels_t **k_p);

/* One slice's value (src/exec/exec.c's slice_compute on device memory):
 *     value = in OP pre(src)   (in and src, reduce)     value = in       (in only)
 *     value = pre(src)         (src only, pre set)      value = src      (src only)
 *     value /= postdiv when postdiv > 1
 * stored to out[0] and, when set, out[1]; every pointer as the kernels reach it. */
typedef struct braid_dev_slice_kernel {
    const void *in, *src;
    void *out[2];
    size_t bytes, count;             /* count: elements of dtype */
    int dtype, op;                   /* braid_dtype_t, braid_opkind_t */
    int reduce;                      /* combine in with src (else in, or src alone) */
    const void *premul;              /* braid_scalar_t applied to src, or NULL */
    const void *premul_dev;          /* or the dtype value there, in device memory */
    uint64_t postdiv;
    const uint64_t *msg;             /* in's message record, to check (kargs.h), or NULL */
    uint64_t *msg_err;
    const uint64_t *msg_want;        /* BRAID_MSG_WORDS */
    uint64_t msg_mark;
} braid_dev_slice_kernel_t;

/* Queue the slice's kernel on stream (nothing when the value is src, already in place). */
braid_status_t braid_dev_kernels_slice(const braid_dev_kernels_t *k,
                                       const braid_dev_slice_kernel_t *s, void *stream);
/* Queue a check of a message's record alone (a received message nothing reads: a root
 * token, a drop): a braid_k_copy of no bytes. */
braid_status_t braid_dev_kernels_check(const braid_dev_kernels_t *k,
                                       const braid_dev_slice_kernel_t *s, void *stream);
/* Queue kernel fn over `units` work items (grid-stride: any size is done whole). */
braid_status_t braid_dev_kernels_launch(void *fn, void *kargs, size_t kargs_bytes,
                                        size_t units, void *stream);

/* The embedded kernel images, and which one each device loaded (braid-info). */
void braid_dev_kernels_report(void (*line)(void *arg, const char *text), void *arg);

#endif
