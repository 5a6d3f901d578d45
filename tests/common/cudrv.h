/*
 * Tests that use device buffers reach the CUDA driver as a CUDA program would: dlopen
 * libcuda.so.1 (NVIDIA's, or braid's emulated one on LD_LIBRARY_PATH) and the versioned
 * symbols that NVIDIA's cuda.h names. Header-only: each test includes it once.
 */
#ifndef BRAID_TESTS_CUDRV_H
#define BRAID_TESTS_CUDRV_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "device/cuda_abi.h"

typedef struct cudrv {
    CUresult (*init)(unsigned int);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_count)(int *);
    CUresult (*ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*h2d)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*d2h)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*memset8)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*memset32)(CUdeviceptr, unsigned int, size_t, CUstream);
    CUresult (*stream_create)(CUstream *, unsigned int);
    CUresult (*stream_sync)(CUstream);
    CUresult (*stream_query)(CUstream);
    CUresult (*stream_destroy)(CUstream);
    CUcontext ctx;
} cudrv_t;

static void *cudrv_sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (p == NULL) {
        fprintf(stderr, "libcuda.so.1 has no %s\n", name);
        exit(99);
    }
    return p;
}

/* Load the driver and make device 0's primary context current on this thread. Exits 77
 * (automake: skipped) when there is no driver. */
static void cudrv_load(cudrv_t *cu)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == NULL) {
        fprintf(stderr, "no CUDA driver (libcuda.so.1: %s); put braid's emulated driver "
                "($prefix/lib/braid/emu) on LD_LIBRARY_PATH\n", dlerror());
        exit(77);
    }
    *(void **)&cu->init = cudrv_sym(lib, "cuInit");
    *(void **)&cu->device_get = cudrv_sym(lib, "cuDeviceGet");
    *(void **)&cu->device_count = cudrv_sym(lib, "cuDeviceGetCount");
    *(void **)&cu->ctx_retain = cudrv_sym(lib, "cuDevicePrimaryCtxRetain");
    *(void **)&cu->ctx_set = cudrv_sym(lib, "cuCtxSetCurrent");
    *(void **)&cu->alloc = cudrv_sym(lib, "cuMemAlloc_v2");
    *(void **)&cu->free = cudrv_sym(lib, "cuMemFree_v2");
    *(void **)&cu->h2d = cudrv_sym(lib, "cuMemcpyHtoDAsync_v2");
    *(void **)&cu->d2h = cudrv_sym(lib, "cuMemcpyDtoHAsync_v2");
    *(void **)&cu->memset8 = cudrv_sym(lib, "cuMemsetD8Async");
    *(void **)&cu->memset32 = cudrv_sym(lib, "cuMemsetD32Async");
    *(void **)&cu->stream_create = cudrv_sym(lib, "cuStreamCreate");
    *(void **)&cu->stream_sync = cudrv_sym(lib, "cuStreamSynchronize");
    *(void **)&cu->stream_query = cudrv_sym(lib, "cuStreamQuery");
    *(void **)&cu->stream_destroy = cudrv_sym(lib, "cuStreamDestroy_v2");
    CUdevice dev;
    if (cu->init(0) != CUDA_SUCCESS || cu->device_get(&dev, 0) != CUDA_SUCCESS ||
        cu->ctx_retain(&cu->ctx, dev) != CUDA_SUCCESS || cu->ctx_set(cu->ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "the CUDA driver has no usable device 0\n");
        exit(77);
    }
}

#define CUDRV(_call)                                                                      \
    do {                                                                                  \
        CUresult _r = (_call);                                                            \
        if (_r != CUDA_SUCCESS) {                                                         \
            fprintf(stderr, "%s:%d: %s failed: CUDA error %d\n", __FILE__, __LINE__,       \
                    #_call, _r);                                                          \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#endif
