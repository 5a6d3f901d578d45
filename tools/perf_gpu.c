/*
 * perf_gpu: the CUDA driver for the *_perf tools (see perf_gpu.h). The types and values
 * are device/cuda_abi.h's; the entries are found with dlsym under the versioned names a
 * program compiled against cuda.h links (cuMemAlloc_v2, ...), so this is the driver as
 * nccl-tests' CUDA runtime would reach it, independent of the library under test.
 */
#include "perf_gpu.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "device/cuda_abi.h"

/* One function-pointer type per entry of the ABI, perf_<name>_fn. */
#define X(name, sym, params) typedef CUresult (*perf_##name##_fn) params;
BRAID_CUDA_ENTRIES(X)
#undef X

/* The entries the tools use, as (name, versioned symbol). */
#define PERF_CU_ENTRIES(Y) \
    Y(cuInit, cuInit) Y(cuDeviceGet, cuDeviceGet) Y(cuDeviceGetCount, cuDeviceGetCount) \
    Y(cuDeviceGetName, cuDeviceGetName) \
    Y(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain) Y(cuCtxSetCurrent, cuCtxSetCurrent) \
    Y(cuMemAlloc, cuMemAlloc_v2) Y(cuMemFree, cuMemFree_v2) \
    Y(cuMemcpyHtoD, cuMemcpyHtoD_v2) Y(cuMemcpyDtoH, cuMemcpyDtoH_v2) \
    Y(cuMemsetD8, cuMemsetD8_v2) Y(cuStreamCreate, cuStreamCreate) \
    Y(cuStreamSynchronize, cuStreamSynchronize) Y(cuStreamDestroy, cuStreamDestroy_v2)

#define Y(name, sym) perf_##name##_fn name;
static struct {
    PERF_CU_ENTRIES(Y)
    perf_cuGetErrorString_fn cuGetErrorString;   /* optional: messages only */
} cu;
#undef Y

#define Y(name, sym) { #sym, (void **)&cu.name },
static const struct {
    const char *sym;
    void **fn;
} perf_cu_syms[] = { PERF_CU_ENTRIES(Y) };
#undef Y

static const char *perf_gpu_prog = "perf";

/* "prog: CUDA driver: CALL failed: MESSAGE (CODE)" on stderr; returns -1. */
static int perf_cu_fail(CUresult r, const char *call)
{
    const char *s = NULL;
    if (cu.cuGetErrorString == NULL || cu.cuGetErrorString(r, &s) != CUDA_SUCCESS || s == NULL)
        s = "unknown error";
    fprintf(stderr, "%s: CUDA driver: %s failed: %s (%d)\n", perf_gpu_prog, call, s, r);
    return -1;
}

#define PERF_CU(_call) \
    do { \
        CUresult _r = cu._call; \
        if (_r != CUDA_SUCCESS) \
            return perf_cu_fail(_r, #_call); \
    } while (0)

static int perf_gpu_load(char *why, size_t why_len)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(why, why_len, "no CUDA driver: libcuda.so.1 does not load");
        return -1;
    }
    for (size_t i = 0; i < sizeof(perf_cu_syms) / sizeof(perf_cu_syms[0]); i++) {
        *perf_cu_syms[i].fn = dlsym(lib, perf_cu_syms[i].sym);
        if (*perf_cu_syms[i].fn == NULL) {
            snprintf(why, why_len, "the CUDA driver has no %s", perf_cu_syms[i].sym);
            dlclose(lib);
            return -1;
        }
    }
    *(void **)&cu.cuGetErrorString = dlsym(lib, "cuGetErrorString");
    return 0;   /* the library stays loaded for the life of the process */
}

int perf_gpu_open(const char *prog, int *ndev_p, char *why, size_t why_len)
{
    const char *s = NULL;
    CUresult r;
    int n = 0;
    perf_gpu_prog = prog;
    if (perf_gpu_load(why, why_len) != 0)
        return -1;
    if ((r = cu.cuInit(0)) == CUDA_SUCCESS)
        r = cu.cuDeviceGetCount(&n);
    if (r == CUDA_SUCCESS && n > 0) {
        *ndev_p = n;
        return 0;
    }
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_NO_DEVICE) {
        snprintf(why, why_len, "the CUDA driver sees no device");
        return -1;
    }
    if (cu.cuGetErrorString == NULL || cu.cuGetErrorString(r, &s) != CUDA_SUCCESS || s == NULL)
        s = "unknown error";
    snprintf(why, why_len, "the CUDA driver does not start: %s (%d)", s, r);
    return -1;
}

int perf_gpu_bind(int ordinal)
{
    CUdevice dev;
    CUcontext ctx;
    PERF_CU(cuDeviceGet(&dev, ordinal));
    PERF_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    PERF_CU(cuCtxSetCurrent(ctx));
    return 0;
}

void perf_gpu_name(int ordinal, char *name, size_t len)
{
    CUdevice dev;
    int n = len > INT32_MAX ? INT32_MAX : (int)len;
    if (len == 0)
        return;
    if (cu.cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
        cu.cuDeviceGetName(name, n, dev) != CUDA_SUCCESS)
        snprintf(name, len, "<unknown>");
    name[len - 1] = '\0';
}

int perf_gpu_alloc(size_t bytes, void **p_p)
{
    CUdeviceptr d = 0;
    CUresult r = cu.cuMemAlloc(&d, bytes);
    if (r != CUDA_SUCCESS) {
        char call[64];
        snprintf(call, sizeof(call), "cuMemAlloc_v2(%zu bytes)", bytes);
        return perf_cu_fail(r, call);
    }
    if ((r = cu.cuMemsetD8(d, 0, bytes)) != CUDA_SUCCESS) {
        (void)cu.cuMemFree(d);
        return perf_cu_fail(r, "cuMemsetD8_v2");
    }
    *p_p = (void *)(uintptr_t)d;
    return 0;
}

int perf_gpu_free(void *p)
{
    PERF_CU(cuMemFree((CUdeviceptr)(uintptr_t)p));
    return 0;
}

int perf_gpu_to_device(void *dst, const void *src, size_t bytes)
{
    PERF_CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, bytes));
    return 0;
}

int perf_gpu_to_host(void *dst, const void *src, size_t bytes)
{
    PERF_CU(cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, bytes));
    return 0;
}

int perf_gpu_stream_create(int null, void **stream_p)
{
    CUstream s = NULL;
    if (!null)
        PERF_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    *stream_p = s;
    return 0;
}

int perf_gpu_stream_sync(void *stream)
{
    PERF_CU(cuStreamSynchronize((CUstream)stream));
    return 0;
}

int perf_gpu_stream_destroy(void *stream)
{
    if (stream != NULL)
        PERF_CU(cuStreamDestroy((CUstream)stream));
    return 0;
}
