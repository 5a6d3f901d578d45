/*
 * The host engine's slices on device buffers (src/exec/dev_slice.c): the executor's slice
 * computation as braid's kernels (src/exec/dev_kernels.h) on an internal stream, driven
 * by a communicator's proxy thread. Used for device calls that the GPU engine does not run
 * (src/exec/gpu.h): network peers, bucket plans' views, local peers without device FIFOs.
 */
#ifndef BRAID_EXEC_DEV_SLICE_H
#define BRAID_EXEC_DEV_SLICE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "device/device.h"
#include "exec/view.h"

/*
 * Running schedules on device buffers: the executor's slice computation as kernels on an
 * internal stream (src/exec/dev_slice.c). One braid_device_exec_t per communicator, made with
 * it: everything a real driver may serialise behind a lock (allocation, pinned memory,
 * module and kernel loads) happens at create, on the thread that makes the communicator,
 * or in braid_device_exec_reserve on a calling thread, never while the proxy runs device
 * work (docs/ARCHITECTURE.md, device buffers).
 */
typedef struct braid_device_exec braid_device_exec_t;

/* `slice_bytes`: the largest slice the executor moves through a slot (the slot size);
 * `scratch_bytes`: the scratch buffer made now (0: none until one is reserved). */
braid_status_t braid_device_exec_create(int ordinal, size_t slice_bytes, size_t scratch_bytes,
                                        braid_device_exec_t **dx_p);
int braid_device_exec_ordinal(const braid_device_exec_t *dx);
/* Some executor of the process has work that has not ended well. */
int braid_device_exec_busy(void);
/* Free it, once no executor of the process has work pending on the device (waiting up to
 * wait_s for the others'): freeing device memory would wait for that work. Returns 1 when
 * it left its stream and memory in place instead (its own work never finished, or the
 * others' did not within wait_s, or the device is stuck): then the caller unmaps no host
 * memory for the device either (braid_device_unmap_host would wait the same way). */
int braid_device_exec_destroy(braid_device_exec_t *dx, double wait_s);

/* One slice of a step (src/exec/exec.c's slice_compute with device buffers):
 *     value = in OP pre(src)   (in and src, reduce)     value = in       (in only)
 *     value = pre(src)         (src only, pre set)      value = src      (src only)
 *     value /= postdiv when postdiv > 1
 * stored to dst (device memory) and/or out (host memory: a transport slot). `in` is host
 * memory (a slot), src device memory. Returns once every output is written, or once w
 * ends the wait. */
typedef struct braid_device_slice {
    void *out, *dst;
    const void *in, *src;
    size_t bytes, count;             /* count: elements of dtype */
    int dtype, op;                   /* braid_dtype_t, braid_opkind_t */
    int reduce;                      /* combine in with src (else in, or src alone) */
    const void *premul;              /* braid_scalar_t applied to src, or NULL */
    uint64_t postdiv;
} braid_device_slice_t;

braid_status_t braid_device_exec_slice(braid_device_exec_t *dx, const braid_device_slice_t *s,
                                       const braid_device_wait_t *w);
/*
 * One slice of a bucket plan's step (src/exec/exec_view.c's view_block with device
 * tensors): `count` elements, from flat element esrc of src and edst of dst.
 *     a = gather(src) as acc, times *pre      (src set; padding reads 0)
 *     a = in OP a  (in the acc type)          (in set and reduce)
 *     out = a rounded to wire                 (out set)
 *     dst = out if out is set, else a         (dst set: cast to each segment's type, times
 *                                              dst->scale, added with dst->accumulate)
 *   without src:  out = in (a copy), dst = in.
 * in and out are host memory (transport slots, wire type), the views' segments device
 * memory. Returns once every output is written, or once w ends the wait.
 */
typedef struct braid_device_view_slice {
    const braid_view_t *src, *dst;   /* either may be NULL */
    size_t esrc, edst;
    const void *in;
    void *out;
    size_t count;
    int wire, acc, op;               /* braid_dtype_t, braid_dtype_t, braid_opkind_t */
    int reduce;
    const double *pre;
} braid_device_view_slice_t;

braid_status_t braid_device_exec_view_slice(braid_device_exec_t *dx,
                                            const braid_device_view_slice_t *s,
                                            const braid_device_wait_t *w);
/* Copy up to 8 bytes of device memory (a ncclPreMulSum scalar) to the host: an async copy
 * into the executor's pinned memory, then a bounded wait. */
braid_status_t braid_device_exec_read(braid_device_exec_t *dx, void *dst, const void *src,
                                      size_t bytes, const braid_device_wait_t *w);
/*
 * Scratch buffers (at most BRAID_DEVICE_SCRATCH_MAX). On the calling thread, before a job
 * is queued: make sure that the executor keeps a buffer of at least sizes[i] for each i
 * at once (allocating what it lacks, there and then). On the thread that runs the job:
 * take one (the smallest that fits; never allocates) and give it back. Buffers are kept: freeing device memory waits
 * for the whole device.
 */
#define BRAID_DEVICE_SCRATCH_MAX 16
braid_status_t braid_device_exec_reserve(braid_device_exec_t *dx, const size_t *sizes, int n);
braid_status_t braid_device_exec_alloc(braid_device_exec_t *dx, size_t bytes, void **p_p);
void braid_device_exec_free(braid_device_exec_t *dx, void *p);

#endif
