/*
 * perf_gpu: a GPU runtime as the *_perf tools use it, for device buffers and streams, as
 * nccl-tests and rccl-tests do (perf_gpu.c): CUDA's driver (libcuda.so.1) or HIP's runtime
 * (libamdhip64), chosen by braid's own rule (BRAID_DEVICE: auto, cuda, hip or host). Both
 * are dlopened, so the tools link no GPU library and run on hosts without one; every entry
 * is the symbol a cuda.h or hip_runtime.h program links.
 *
 * perf_gpu_open() once per process, before the rank threads start; then every rank
 * thread calls perf_gpu_bind() before its other calls (CUDA wants a current context per
 * thread: the device's primary context, as CUDA's runtime uses; HIP a current device). A
 * call that fails says so on stderr, naming the runtime, the call, its arguments and the
 * runtime's message, and returns -1; the callers end the process.
 */
#ifndef BRAID_TOOLS_PERF_GPU_H
#define BRAID_TOOLS_PERF_GPU_H

#include <stddef.h>

/* rccl-tests' memory types (-Y), in its order. */
enum {
    PERF_MEM_COARSE = 0,   /* device memory: cuMemAlloc, hipMalloc */
    PERF_MEM_FINE = 1,     /* fine-grained device memory: hipExtMallocWithFlags (HIP only) */
    PERF_MEM_HOST = 2,     /* pinned host memory: hipHostMalloc (HIP only) */
    PERF_MEM_MANAGED = 3,  /* managed memory: hipMallocManaged (HIP only) */
    PERF_NMEMS = 4
};

/* "coarse", "fine", "host", "managed" */
extern const char *const perf_mem_names[PERF_NMEMS];

/* Choose and load the runtime and count its devices. 0: usable, with *ndev_p >= 1; -1:
 * none, with the reason in why (BRAID_DEVICE=host, no runtime, no device, an init error),
 * for the tools' header. */
int perf_gpu_open(const char *prog, int *ndev_p, char *why, size_t why_len);

/* After a successful open: "CUDA driver" or "HIP runtime", and "cuda" or "hip". */
const char *perf_gpu_runtime(void);
const char *perf_gpu_tag(void);

/* After a successful open: 0 if the runtime gives memory type `mem`; otherwise -1 with the
 * reason in why. Says nothing on stderr. */
int perf_gpu_mem_check(int mem, char *why, size_t why_len);

/* How memory type `mem` is allocated, for the header ("hipMalloc", ...). */
const char *perf_gpu_mem_how(int mem);

/* Make device `ordinal` current on the calling thread (CUDA: its primary context). */
int perf_gpu_bind(int ordinal);

/* The device's name ("<unknown>" if the runtime does not say). */
void perf_gpu_name(int ordinal, char *name, size_t len);

/* Zeroed memory of type `mem` on the bound device, and its release. */
int perf_gpu_alloc_mem(int mem, size_t bytes, void **p_p);
int perf_gpu_free_mem(int mem, void *p);

/* Device memory (PERF_MEM_COARSE). */
int perf_gpu_alloc(size_t bytes, void **p_p);
int perf_gpu_free(void *p);

/* Synchronous copies between host memory and memory of perf_gpu_alloc*. */
int perf_gpu_to_device(void *dst, const void *src, size_t bytes);
int perf_gpu_to_host(void *dst, const void *src, size_t bytes);

/* A non-blocking stream of the bound device; with `null`, the NULL stream (-y 1). */
int perf_gpu_stream_create(int null, void **stream_p);
int perf_gpu_stream_sync(void *stream);
int perf_gpu_stream_destroy(void *stream);

#endif /* BRAID_TOOLS_PERF_GPU_H */
