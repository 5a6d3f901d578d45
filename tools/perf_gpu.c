/*
 * perf_gpu: CUDA's driver or HIP's runtime for the *_perf tools (see perf_gpu.h), one ops
 * table each. The types and values are device/cuda_abi.h's and device/hip_abi.h's; the
 * entries are found with dlsym under the names a program compiled against cuda.h or
 * hip_runtime.h links (cuMemAlloc_v2, hipMalloc, ...), so this is the runtime as
 * nccl-tests or rccl-tests would reach it, independent of the library under test.
 *
 * Which one: BRAID_DEVICE, as braid itself chooses its backend (src/device/device.c):
 * cuda or hip forces one, host means none; auto takes CUDA's driver where it loads and
 * sees a device, else HIP's runtime where the process has it already (a program linked
 * to it) or the AMD GPU driver is there (/dev/kfd) and it sees a device: braid's own rule,
 * so both pick the same runtime. ROCm's runtime is large and starts threads when loaded:
 * it is not loaded unasked on a machine without an AMD GPU (BRAID_DEVICE=hip asks).
 */
#include "perf_gpu.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/cuda_abi.h"
#include "device/hip_abi.h"

const char *const perf_mem_names[PERF_NMEMS] = { "coarse", "fine", "host", "managed" };

/* One runtime behind the public calls. The memory type is checked before alloc sees it. */
typedef struct perf_rt_ops {
    const char *name;   /* "CUDA driver": named in messages and the header */
    const char *tag;    /* "cuda": the device listing's */
    int (*mem_check)(int mem, char *why, size_t why_len);
    const char *(*mem_how)(int mem);
    int (*bind)(int ordinal);
    void (*dev_name)(int ordinal, char *name, size_t len);
    int (*alloc)(int mem, size_t bytes, void **p_p);
    int (*free)(int mem, void *p);
    int (*copy)(void *dst, const void *src, size_t bytes, int to_device);
    int (*stream_create)(int null, void **stream_p);
    int (*stream_sync)(void *stream);
    int (*stream_destroy)(void *stream);
} perf_rt_ops_t;

static const perf_rt_ops_t *perf_rt;   /* set by a successful perf_gpu_open */
static const char *perf_gpu_prog = "perf";

/* ---- CUDA's driver ---------------------------------------------------------------------- */

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

static const char *perf_cu_message(CUresult r)
{
    const char *s = NULL;
    if (cu.cuGetErrorString == NULL || cu.cuGetErrorString(r, &s) != CUDA_SUCCESS || s == NULL)
        s = "unknown error";
    return s;
}

/* "prog: CUDA driver: CALL failed: MESSAGE (CODE)" on stderr; returns -1. */
static int perf_cu_fail(CUresult r, const char *call)
{
    fprintf(stderr, "%s: CUDA driver: %s failed: %s (%d)\n", perf_gpu_prog, call,
            perf_cu_message(r), r);
    return -1;
}

#define PERF_CU(_call) \
    do { \
        CUresult _r = cu._call; \
        if (_r != CUDA_SUCCESS) \
            return perf_cu_fail(_r, #_call); \
    } while (0)

static int perf_cu_load(char *why, size_t why_len)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(why, why_len, "no CUDA driver (libcuda.so.1 does not load)");
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

static int perf_cu_open(int *ndev_p, char *why, size_t why_len)
{
    CUresult r;
    int n = 0;
    if (perf_cu_load(why, why_len) != 0)
        return -1;
    if ((r = cu.cuInit(0)) == CUDA_SUCCESS)
        r = cu.cuDeviceGetCount(&n);
    if (r == CUDA_SUCCESS && n > 0) {
        *ndev_p = n;
        return 0;
    }
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_NO_DEVICE)
        snprintf(why, why_len, "the CUDA driver sees no device");
    else
        snprintf(why, why_len, "the CUDA driver does not start: %s (%d)", perf_cu_message(r), r);
    return -1;
}

/* rccl-tests' other memory types are AMD's: the CUDA path gives device memory only. */
static int perf_cu_mem_check(int mem, char *why, size_t why_len)
{
    if (mem == PERF_MEM_COARSE)
        return 0;
    snprintf(why, why_len, "the tools give %s memory through HIP's runtime only; with the "
             "CUDA driver the buffers are device memory (-Y coarse)", perf_mem_names[mem]);
    return -1;
}

static const char *perf_cu_mem_how(int mem)
{
    (void)mem;
    return "cuMemAlloc";
}

static int perf_cu_bind(int ordinal)
{
    CUdevice dev;
    CUcontext ctx;
    PERF_CU(cuDeviceGet(&dev, ordinal));
    PERF_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    PERF_CU(cuCtxSetCurrent(ctx));
    return 0;
}

static void perf_cu_name(int ordinal, char *name, size_t len)
{
    CUdevice dev;
    int n = len > INT32_MAX ? INT32_MAX : (int)len;
    if (cu.cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
        cu.cuDeviceGetName(name, n, dev) != CUDA_SUCCESS)
        snprintf(name, len, "<unknown>");
}

static int perf_cu_alloc(int mem, size_t bytes, void **p_p)
{
    CUdeviceptr d = 0;
    CUresult r = cu.cuMemAlloc(&d, bytes);
    (void)mem;
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

static int perf_cu_free(int mem, void *p)
{
    (void)mem;
    PERF_CU(cuMemFree((CUdeviceptr)(uintptr_t)p));
    return 0;
}

static int perf_cu_copy(void *dst, const void *src, size_t bytes, int to_device)
{
    if (to_device)
        PERF_CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, bytes));
    else
        PERF_CU(cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, bytes));
    return 0;
}

static int perf_cu_stream_create(int null, void **stream_p)
{
    CUstream s = NULL;
    if (!null)
        PERF_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    *stream_p = s;
    return 0;
}

static int perf_cu_stream_sync(void *stream)
{
    PERF_CU(cuStreamSynchronize((CUstream)stream));
    return 0;
}

static int perf_cu_stream_destroy(void *stream)
{
    if (stream != NULL)
        PERF_CU(cuStreamDestroy((CUstream)stream));
    return 0;
}

static const perf_rt_ops_t perf_cu_ops = {
    .name = "CUDA driver", .tag = "cuda",
    .mem_check = perf_cu_mem_check, .mem_how = perf_cu_mem_how,
    .bind = perf_cu_bind, .dev_name = perf_cu_name,
    .alloc = perf_cu_alloc, .free = perf_cu_free, .copy = perf_cu_copy,
    .stream_create = perf_cu_stream_create, .stream_sync = perf_cu_stream_sync,
    .stream_destroy = perf_cu_stream_destroy,
};

/* ---- HIP's runtime ---------------------------------------------------------------------- */

#define X(name, ret, params) typedef ret (*perf_##name##_fn) params;
BRAID_HIP_ENTRIES(X)
#undef X
/* entries hip_abi.h does not list (braid's backend uses none of them) */
typedef hipError_t (*perf_hipMemcpy_fn)(void *dst, const void *src, size_t bytes, int kind);
typedef hipError_t (*perf_hipMemset_fn)(void *dst, int value, size_t bytes);
typedef hipError_t (*perf_hipExtMallocWithFlags_fn)(void **p, size_t bytes, unsigned int flags);
typedef hipError_t (*perf_hipMallocManaged_fn)(void **p, size_t bytes, unsigned int flags);

#define PERF_HIP_MALLOC_FINEGRAINED 0x1   /* hipExtMallocWithFlags: hipDeviceMallocFinegrained */
#define PERF_HIP_MALLOC_UNCACHED 0x3      /* hipDeviceMallocUncached (ROCm 5.7 and later) */
#define PERF_HIP_HOST_MALLOC_PORTABLE 0x1 /* hipHostMallocPortable */
#define PERF_HIP_ATTACH_GLOBAL 0x1        /* hipMallocManaged: hipMemAttachGlobal */

/* The entries the tools need, then the ones a memory type or a message needs. */
#define PERF_HIP_ENTRIES(Y) \
    Y(hipGetDeviceCount) Y(hipSetDevice) Y(hipDeviceGet) Y(hipDeviceGetName) Y(hipMalloc) \
    Y(hipFree) Y(hipMemcpy) Y(hipMemset) Y(hipStreamCreateWithFlags) \
    Y(hipStreamSynchronize) Y(hipStreamDestroy)
#define PERF_HIP_OPTIONAL(Y) \
    Y(hipGetErrorString) Y(hipRuntimeGetVersion) Y(hipExtMallocWithFlags) Y(hipHostMalloc) \
    Y(hipHostFree) Y(hipMallocManaged)

#define Y(name) perf_##name##_fn name;
static struct {
    PERF_HIP_ENTRIES(Y)
    PERF_HIP_OPTIONAL(Y)
} hip;
#undef Y

typedef struct {
    const char *sym;
    void **fn;
} perf_hip_sym_t;

#define Y(name) { #name, (void **)&hip.name },
static const perf_hip_sym_t perf_hip_required[] = { PERF_HIP_ENTRIES(Y) };
static const perf_hip_sym_t perf_hip_optional[] = { PERF_HIP_OPTIONAL(Y) };
#undef Y

/* As braid's backend (src/device/hip.c) tries them. */
static const char *const perf_hip_libs[] = {
    "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so",
};
#define PERF_HIP_NLIBS (sizeof(perf_hip_libs) / sizeof(perf_hip_libs[0]))

static const char *perf_hip_lib = "libamdhip64";   /* the one loaded */
static int perf_hip_version;                       /* its HIP_VERSION, 0 if unknown */

static const char *perf_hip_message(hipError_t r)
{
    const char *s = hip.hipGetErrorString != NULL ? hip.hipGetErrorString(r) : NULL;
    return s != NULL ? s : "unknown error";
}

/* "prog: HIP runtime: CALL failed: MESSAGE (CODE)" on stderr; returns -1. */
static int perf_hip_fail(hipError_t r, const char *call)
{
    fprintf(stderr, "%s: HIP runtime: %s failed: %s (%d)\n", perf_gpu_prog, call,
            perf_hip_message(r), r);
    return -1;
}

#define PERF_HIP(_call) \
    do { \
        hipError_t _r = hip._call; \
        if (_r != hipSuccess) \
            return perf_hip_fail(_r, #_call); \
    } while (0)

/* The first runtime the process already has, else the first that loads (braid's order,
 * so braid's backend and the tools share one runtime). */
static void *perf_hip_dlopen(void)
{
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < PERF_HIP_NLIBS; i++) {
            void *h = dlopen(perf_hip_libs[i], RTLD_NOW | (pass == 0 ? RTLD_NOLOAD : RTLD_LOCAL));
            if (h != NULL) {
                perf_hip_lib = perf_hip_libs[i];
                return h;
            }
        }
    }
    return NULL;
}

static int perf_hip_load(char *why, size_t why_len)
{
    void *lib = perf_hip_dlopen();
    if (lib == NULL) {
        snprintf(why, why_len, "no HIP runtime (libamdhip64.so.7, .so.6, .so.5 and .so do not "
                 "load)");
        return -1;
    }
    for (size_t i = 0; i < sizeof(perf_hip_required) / sizeof(perf_hip_required[0]); i++) {
        *perf_hip_required[i].fn = dlsym(lib, perf_hip_required[i].sym);
        if (*perf_hip_required[i].fn == NULL) {
            snprintf(why, why_len, "the HIP runtime (%s) has no %s", perf_hip_lib,
                     perf_hip_required[i].sym);
            dlclose(lib);
            return -1;
        }
    }
    for (size_t i = 0; i < sizeof(perf_hip_optional) / sizeof(perf_hip_optional[0]); i++)
        *perf_hip_optional[i].fn = dlsym(lib, perf_hip_optional[i].sym);
    if (hip.hipRuntimeGetVersion == NULL || hip.hipRuntimeGetVersion(&perf_hip_version) != 0)
        perf_hip_version = 0;
    return 0;   /* the library stays loaded for the life of the process */
}

static int perf_hip_open(int *ndev_p, char *why, size_t why_len)
{
    int n = 0;
    if (perf_hip_load(why, why_len) != 0)
        return -1;
    hipError_t r = hip.hipGetDeviceCount(&n);
    if (r == hipSuccess && n > 0) {
        *ndev_p = n;
        return 0;
    }
    if (r == hipSuccess || r == hipErrorNoDevice)
        snprintf(why, why_len, "the HIP runtime (%s) sees no device", perf_hip_lib);
    else
        snprintf(why, why_len, "the HIP runtime (%s) does not start: %s (%d)", perf_hip_lib,
                 perf_hip_message(r), r);
    return -1;
}

static int perf_hip_mem_check(int mem, char *why, size_t why_len)
{
    const char *need = NULL;
    if (mem == PERF_MEM_FINE && hip.hipExtMallocWithFlags == NULL)
        need = "hipExtMallocWithFlags";
    else if (mem == PERF_MEM_HOST && (hip.hipHostMalloc == NULL || hip.hipHostFree == NULL))
        need = hip.hipHostMalloc == NULL ? "hipHostMalloc" : "hipHostFree";
    else if (mem == PERF_MEM_MANAGED && hip.hipMallocManaged == NULL)
        need = "hipMallocManaged";
    if (need == NULL)
        return 0;
    snprintf(why, why_len, "the HIP runtime (%s) has no %s; use -Y coarse", perf_hip_lib, need);
    return -1;
}

/* Fine-grained memory as rccl-tests allocates it: uncached from ROCm 5.7, before that
 * (or where the runtime does not say its version) fine-grained. */
static unsigned int perf_hip_fine_flags(void)
{
    return perf_hip_version >= 50700000 ? PERF_HIP_MALLOC_UNCACHED : PERF_HIP_MALLOC_FINEGRAINED;
}

static const char *perf_hip_mem_how(int mem)
{
    switch (mem) {
    case PERF_MEM_FINE:
        return perf_hip_fine_flags() == PERF_HIP_MALLOC_UNCACHED
                   ? "hipExtMallocWithFlags, hipDeviceMallocUncached"
                   : "hipExtMallocWithFlags, hipDeviceMallocFinegrained";
    case PERF_MEM_HOST: return "hipHostMalloc, pinned host memory";
    case PERF_MEM_MANAGED: return "hipMallocManaged";
    default: return "hipMalloc";
    }
}

static int perf_hip_bind(int ordinal)
{
    PERF_HIP(hipSetDevice(ordinal));
    return 0;
}

static void perf_hip_name(int ordinal, char *name, size_t len)
{
    hipDevice_t dev;
    int n = len > INT32_MAX ? INT32_MAX : (int)len;
    if (hip.hipDeviceGet(&dev, ordinal) != hipSuccess ||
        hip.hipDeviceGetName(name, n, dev) != hipSuccess)
        snprintf(name, len, "<unknown>");
}

static const char *const perf_hip_alloc_calls[PERF_NMEMS] = {
    "hipMalloc", "hipExtMallocWithFlags", "hipHostMalloc", "hipMallocManaged",
};

static hipError_t perf_hip_malloc(int mem, size_t bytes, void **p_p)
{
    switch (mem) {
    case PERF_MEM_FINE: return hip.hipExtMallocWithFlags(p_p, bytes, perf_hip_fine_flags());
    case PERF_MEM_HOST:
        return hip.hipHostMalloc(p_p, bytes, PERF_HIP_HOST_MALLOC_PORTABLE | hipHostMallocMapped);
    case PERF_MEM_MANAGED: return hip.hipMallocManaged(p_p, bytes, PERF_HIP_ATTACH_GLOBAL);
    default: return hip.hipMalloc(p_p, bytes);
    }
}

static int perf_hip_free(int mem, void *p)
{
    if (mem == PERF_MEM_HOST)
        PERF_HIP(hipHostFree(p));
    else
        PERF_HIP(hipFree(p));
    return 0;
}

static int perf_hip_alloc(int mem, size_t bytes, void **p_p)
{
    void *p = NULL;
    hipError_t r = perf_hip_malloc(mem, bytes, &p);
    if (r != hipSuccess) {
        char call[96];
        snprintf(call, sizeof(call), "%s(%zu bytes)", perf_hip_alloc_calls[mem], bytes);
        return perf_hip_fail(r, call);
    }
    if (mem == PERF_MEM_HOST)
        memset(p, 0, bytes);
    else if ((r = hip.hipMemset(p, 0, bytes)) != hipSuccess) {
        (void)perf_hip_free(mem, p);
        return perf_hip_fail(r, "hipMemset");
    }
    *p_p = p;
    return 0;
}

static int perf_hip_copy(void *dst, const void *src, size_t bytes, int to_device)
{
    (void)to_device;   /* hipMemcpyDefault: the runtime knows both sides */
    PERF_HIP(hipMemcpy(dst, src, bytes, hipMemcpyDefault));
    return 0;
}

static int perf_hip_stream_create(int null, void **stream_p)
{
    hipStream_t s = NULL;
    if (!null)
        PERF_HIP(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    *stream_p = s;
    return 0;
}

static int perf_hip_stream_sync(void *stream)
{
    PERF_HIP(hipStreamSynchronize((hipStream_t)stream));
    return 0;
}

static int perf_hip_stream_destroy(void *stream)
{
    if (stream != NULL)
        PERF_HIP(hipStreamDestroy((hipStream_t)stream));
    return 0;
}

static const perf_rt_ops_t perf_hip_ops = {
    .name = "HIP runtime", .tag = "hip",
    .mem_check = perf_hip_mem_check, .mem_how = perf_hip_mem_how,
    .bind = perf_hip_bind, .dev_name = perf_hip_name,
    .alloc = perf_hip_alloc, .free = perf_hip_free, .copy = perf_hip_copy,
    .stream_create = perf_hip_stream_create, .stream_sync = perf_hip_stream_sync,
    .stream_destroy = perf_hip_stream_destroy,
};

/* ---- the choice, and the calls ---------------------------------------------------------- */

/* HIP's runtime already in the process, or an AMD GPU driver (braid's hip_present). */
static int perf_hip_present(void)
{
    for (size_t i = 0; i < PERF_HIP_NLIBS; i++) {
        void *h = dlopen(perf_hip_libs[i], RTLD_NOW | RTLD_NOLOAD);
        if (h != NULL) {
            dlclose(h);
            return 1;
        }
    }
    return access("/dev/kfd", F_OK) == 0;
}

int perf_gpu_open(const char *prog, int *ndev_p, char *why, size_t why_len)
{
    const char *want = getenv("BRAID_DEVICE");
    char cu_why[128] = "", hip_why[128] = "";
    perf_gpu_prog = prog;
    if (want == NULL || want[0] == '\0')
        want = "auto";
    int is_auto = strcmp(want, "auto") == 0;
    int try_cu = is_auto || strcmp(want, "cuda") == 0;
    int try_hip = (is_auto && perf_hip_present()) || strcmp(want, "hip") == 0;
    if (strcmp(want, "host") == 0) {
        snprintf(why, why_len, "BRAID_DEVICE=host");
        return -1;
    }
    if (!try_cu && !try_hip) {
        snprintf(why, why_len, "BRAID_DEVICE=%s: none of auto, cuda, hip, host", want);
        return -1;
    }
    if (try_cu && perf_cu_open(ndev_p, cu_why, sizeof(cu_why)) == 0) {
        perf_rt = &perf_cu_ops;
        return 0;
    }
    if (try_hip && perf_hip_open(ndev_p, hip_why, sizeof(hip_why)) == 0) {
        perf_rt = &perf_hip_ops;
        return 0;
    }
    if (is_auto && !try_hip)
        snprintf(why, why_len, "%s; no HIP runtime loaded and no /dev/kfd (BRAID_DEVICE=hip "
                 "loads it)", cu_why);
    else if (is_auto)
        snprintf(why, why_len, "%s, %s", cu_why, hip_why);
    else
        snprintf(why, why_len, "BRAID_DEVICE=%s: %s", want, try_cu ? cu_why : hip_why);
    return -1;
}

const char *perf_gpu_runtime(void)
{
    return perf_rt != NULL ? perf_rt->name : "no GPU runtime";
}

const char *perf_gpu_tag(void)
{
    return perf_rt != NULL ? perf_rt->tag : "host";
}

int perf_gpu_mem_check(int mem, char *why, size_t why_len)
{
    if (mem < 0 || mem >= PERF_NMEMS) {
        snprintf(why, why_len, "memory type %d is none of rccl-tests'", mem);
        return -1;
    }
    return perf_rt->mem_check(mem, why, why_len);
}

const char *perf_gpu_mem_how(int mem)
{
    return perf_rt->mem_how(mem);
}

int perf_gpu_bind(int ordinal)
{
    return perf_rt->bind(ordinal);
}

void perf_gpu_name(int ordinal, char *name, size_t len)
{
    if (len == 0)
        return;
    perf_rt->dev_name(ordinal, name, len);
    name[len - 1] = '\0';
}

int perf_gpu_alloc_mem(int mem, size_t bytes, void **p_p)
{
    return perf_rt->alloc(mem, bytes, p_p);
}

int perf_gpu_free_mem(int mem, void *p)
{
    return perf_rt->free(mem, p);
}

int perf_gpu_alloc(size_t bytes, void **p_p)
{
    return perf_rt->alloc(PERF_MEM_COARSE, bytes, p_p);
}

int perf_gpu_free(void *p)
{
    return perf_rt->free(PERF_MEM_COARSE, p);
}

int perf_gpu_to_device(void *dst, const void *src, size_t bytes)
{
    return perf_rt->copy(dst, src, bytes, 1);
}

int perf_gpu_to_host(void *dst, const void *src, size_t bytes)
{
    return perf_rt->copy(dst, src, bytes, 0);
}

int perf_gpu_stream_create(int null, void **stream_p)
{
    return perf_rt->stream_create(null, stream_p);
}

int perf_gpu_stream_sync(void *stream)
{
    return perf_rt->stream_sync(stream);
}

int perf_gpu_stream_destroy(void *stream)
{
    return perf_rt->stream_destroy(stream);
}
