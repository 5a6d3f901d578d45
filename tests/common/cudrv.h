/*
 * Tests that use device buffers reach the CUDA driver as a CUDA program would: dlopen
 * libcuda.so.1 (NVIDIA's, or braid's emulated one on LD_LIBRARY_PATH) and the versioned
 * symbols that NVIDIA's cuda.h names. With BRAID_TEST_RUNTIME=hip they make the same calls
 * through the HIP runtime instead, as an RCCL program would (libamdhip64: braid's emulated
 * one, emu/rocm5 or emu/rocm6, on LD_LIBRARY_PATH), so that braid's HIP backend serves
 * them: a context is then a device (its ordinal + 1), set with hipSetDevice. Header-only:
 * each test includes it once.
 */
#ifndef BRAID_TESTS_CUDRV_H
#define BRAID_TESTS_CUDRV_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
    CUresult (*host_alloc)(void **, size_t, unsigned int);       /* mapped, portable */
    CUresult (*host_dptr)(CUdeviceptr *, void *, unsigned int);
    CUresult (*wait_value)(CUstream, CUdeviceptr, uint32_t, unsigned int);   /* GEQ: 0 */
    CUcontext ctx;
} cudrv_t;

static const char *const cudrv_hip_libs[] = { "libamdhip64.so.7", "libamdhip64.so.6",
                                              "libamdhip64.so.5" };

static int cudrv_hip(void)
{
    const char *v = getenv("BRAID_TEST_RUNTIME");
    return v != NULL && strcmp(v, "hip") == 0;
}

/* The runtime the tests use, loaded (NULL if there is none): a look, no initialisation. */
static void *cudrv_open(const char **name_p)
{
    *name_p = "libcuda.so.1";
    if (!cudrv_hip())
        return dlopen(*name_p, RTLD_NOW);
    for (size_t i = 0; i < sizeof(cudrv_hip_libs) / sizeof(cudrv_hip_libs[0]); i++) {
        void *lib = dlopen(cudrv_hip_libs[i], RTLD_NOW);
        *name_p = cudrv_hip_libs[i];
        if (lib != NULL)
            return lib;
    }
    return NULL;
}

/* ---- BRAID_TEST_RUNTIME=hip: the HIP runtime's calls behind the same entries ---------- */

static struct {
    int (*set_device)(int);
    int (*get_device_count)(int *);
    int (*malloc_)(void **, size_t);
    int (*free_)(void *);
    int (*memcpy_async)(void *, const void *, size_t, int, void *);
    int (*memset_async)(void *, int, size_t, void *);
    int (*memset_d32_async)(void *, int, size_t, void *);
    int (*stream_create)(void **, unsigned int);
    int (*stream_sync)(void *);
    int (*stream_query)(void *);
    int (*stream_destroy)(void *);
    int (*host_malloc)(void **, size_t, unsigned int);
    int (*host_dptr)(void **, void *, unsigned int);
    int (*wait_value)(void *, void *, uint32_t, unsigned int, uint32_t);
} cudrv_hipfn;

#define CUDRV_HIP_DEFAULT 4     /* hipMemcpyDefault */
static CUresult hipdrv_init(unsigned int f) { return f == 0 ? 0 : 1; }
static CUresult hipdrv_device_get(CUdevice *d, int ordinal) { *d = ordinal; return 0; }
static CUresult hipdrv_device_count(int *n) { return cudrv_hipfn.get_device_count(n); }
static CUresult hipdrv_ctx_retain(CUcontext *c, CUdevice d)
{
    *c = (CUcontext)(uintptr_t)(d + 1);
    return 0;
}
static CUresult hipdrv_ctx_set(CUcontext c)
{
    return c == NULL ? 0 : cudrv_hipfn.set_device((int)(uintptr_t)c - 1);
}
static CUresult hipdrv_alloc(CUdeviceptr *d, size_t n)
{
    void *p = NULL;
    int r = cudrv_hipfn.malloc_(&p, n);
    *d = (CUdeviceptr)(uintptr_t)p;
    return r;
}
static CUresult hipdrv_free(CUdeviceptr d) { return cudrv_hipfn.free_((void *)(uintptr_t)d); }
static CUresult hipdrv_h2d(CUdeviceptr d, const void *h, size_t n, CUstream s)
{
    return cudrv_hipfn.memcpy_async((void *)(uintptr_t)d, h, n, CUDRV_HIP_DEFAULT, s);
}
static CUresult hipdrv_d2h(void *h, CUdeviceptr d, size_t n, CUstream s)
{
    return cudrv_hipfn.memcpy_async(h, (void *)(uintptr_t)d, n, CUDRV_HIP_DEFAULT, s);
}
static CUresult hipdrv_memset8(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{
    return cudrv_hipfn.memset_async((void *)(uintptr_t)d, v, n, s);
}
static CUresult hipdrv_memset32(CUdeviceptr d, unsigned int v, size_t n, CUstream s)
{
    return cudrv_hipfn.memset_d32_async((void *)(uintptr_t)d, (int)v, n, s);
}
static CUresult hipdrv_stream_create(CUstream *s, unsigned int flags)
{
    return cudrv_hipfn.stream_create((void **)s, flags);
}
static CUresult hipdrv_stream_sync(CUstream s) { return cudrv_hipfn.stream_sync(s); }
static CUresult hipdrv_stream_query(CUstream s) { return cudrv_hipfn.stream_query(s); }
static CUresult hipdrv_stream_destroy(CUstream s) { return cudrv_hipfn.stream_destroy(s); }
static CUresult hipdrv_host_alloc(void **p, size_t n, unsigned int flags)
{
    (void)flags;
    return cudrv_hipfn.host_malloc(p, n, 0x2 /* hipHostMallocMapped */);
}
static CUresult hipdrv_host_dptr(CUdeviceptr *d, void *h, unsigned int flags)
{
    void *p = NULL;
    int r = cudrv_hipfn.host_dptr(&p, h, flags);
    *d = (CUdeviceptr)(uintptr_t)p;
    return r;
}
static CUresult hipdrv_wait_value(CUstream s, CUdeviceptr d, uint32_t v, unsigned int flags)
{
    return cudrv_hipfn.wait_value(s, (void *)(uintptr_t)d, v, flags /* Gte: 0 */, 0xffffffffu);
}

static void *cudrv_sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (p == NULL) {
        fprintf(stderr, "%s has no %s\n", cudrv_hip() ? "libamdhip64" : "libcuda.so.1", name);
        exit(99);
    }
    return p;
}

static void hipdrv_load(cudrv_t *cu, void *lib)
{
#define CUDRV_HIP(field, name) *(void **)&cudrv_hipfn.field = cudrv_sym(lib, name)
    CUDRV_HIP(set_device, "hipSetDevice");
    CUDRV_HIP(get_device_count, "hipGetDeviceCount");
    CUDRV_HIP(malloc_, "hipMalloc");
    CUDRV_HIP(free_, "hipFree");
    CUDRV_HIP(memcpy_async, "hipMemcpyAsync");
    CUDRV_HIP(memset_async, "hipMemsetAsync");
    CUDRV_HIP(memset_d32_async, "hipMemsetD32Async");
    CUDRV_HIP(stream_create, "hipStreamCreateWithFlags");
    CUDRV_HIP(stream_sync, "hipStreamSynchronize");
    CUDRV_HIP(stream_query, "hipStreamQuery");
    CUDRV_HIP(stream_destroy, "hipStreamDestroy");
    CUDRV_HIP(host_malloc, "hipHostMalloc");
    CUDRV_HIP(host_dptr, "hipHostGetDevicePointer");
    CUDRV_HIP(wait_value, "hipStreamWaitValue32");
#undef CUDRV_HIP
    *cu = (cudrv_t){ hipdrv_init, hipdrv_device_get, hipdrv_device_count, hipdrv_ctx_retain,
                     hipdrv_ctx_set, hipdrv_alloc, hipdrv_free, hipdrv_h2d, hipdrv_d2h,
                     hipdrv_memset8, hipdrv_memset32, hipdrv_stream_create, hipdrv_stream_sync,
                     hipdrv_stream_query, hipdrv_stream_destroy, hipdrv_host_alloc,
                     hipdrv_host_dptr, hipdrv_wait_value, NULL };
}

/* Load the driver and make device 0's primary context current on this thread. Exits 77
 * (automake: skipped) when there is no driver. */
static void cudrv_load(cudrv_t *cu)
{
    const char *name;
    void *lib = cudrv_open(&name);
    if (lib == NULL) {
        fprintf(stderr, "no %s (%s: %s); put braid's emulated one ($prefix/lib/braid/emu%s) "
                "on LD_LIBRARY_PATH\n", cudrv_hip() ? "HIP runtime" : "CUDA driver", name,
                dlerror(), cudrv_hip() ? "/rocm6" : "");
        exit(77);
    }
    if (cudrv_hip()) {
        hipdrv_load(cu, lib);
        if (hipdrv_ctx_retain(&cu->ctx, 0) != 0 || hipdrv_ctx_set(cu->ctx) != 0) {
            fprintf(stderr, "the HIP runtime has no usable device 0\n");
            exit(77);
        }
        return;
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
    *(void **)&cu->host_alloc = cudrv_sym(lib, "cuMemHostAlloc");
    *(void **)&cu->host_dptr = cudrv_sym(lib, "cuMemHostGetDevicePointer_v2");
    *(void **)&cu->wait_value = cudrv_sym(lib, "cuStreamWaitValue32_v2");
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
