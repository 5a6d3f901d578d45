/*
 * perf_gpu: the CUDA driver as the *_perf tools use it, for device buffers and streams, as
 * nccl-tests does (perf_gpu.c). libcuda.so.1 is dlopened, so the tools link no CUDA and
 * run on hosts without it; every entry is the versioned symbol a cuda.h program links.
 *
 * perf_gpu_open() once per process, before the rank threads start; then every rank
 * thread calls perf_gpu_bind() before its other calls (the driver wants a current context
 * per thread: the device's primary context, as CUDA's runtime uses). A call that fails
 * says so on stderr, naming the call, its arguments and the driver's message, and returns
 * -1; the callers end the process.
 */
#ifndef BRAID_TOOLS_PERF_GPU_H
#define BRAID_TOOLS_PERF_GPU_H

#include <stddef.h>

/* Load the driver and count its devices. 0: usable, with *ndev_p >= 1; -1: not here, with
 * the reason in why (no driver, no device, an init error), for the tools' header. */
int perf_gpu_open(const char *prog, int *ndev_p, char *why, size_t why_len);

/* Retain device `ordinal`'s primary context and make it current on the calling thread. */
int perf_gpu_bind(int ordinal);

/* The device's name ("<unknown>" if the driver does not say). */
void perf_gpu_name(int ordinal, char *name, size_t len);

int perf_gpu_alloc(size_t bytes, void **p_p);   /* cuMemAlloc, zeroed */
int perf_gpu_free(void *p);
int perf_gpu_to_device(void *dst, const void *src, size_t bytes);
int perf_gpu_to_host(void *dst, const void *src, size_t bytes);

/* A non-blocking stream of the bound device; with `null`, the NULL stream (-y 1). */
int perf_gpu_stream_create(int null, void **stream_p);
int perf_gpu_stream_sync(void *stream);
int perf_gpu_stream_destroy(void *stream);

#endif /* BRAID_TOOLS_PERF_GPU_H */
