/*
 * The CUDA backend: the driver API only (libcuda.so.1, no cudart), every entry found with
 * cuGetProcAddress, so one libbraid runs on NVIDIA's driver, on braid's emulated driver
 * (emu/) and on a machine with neither.
 *
 * Each thread that calls into the driver needs a current context: braid uses the device's
 * primary context (the one CUDA's runtime, and so PyTorch, uses) and binds a thread to it
 * only when the thread has none, so a caller's own context is never replaced.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "device/cuda_abi.h"
#include "device/device.h"

#define CUDA_API_VERSION 12000      /* the entry versions braid is written for */
#define CUDA_MAX_DEVICES 64

#define X(name, sym, params) CUresult (*name) params;
static struct {
    BRAID_CUDA_ENTRIES(X)
} cu;
#undef X

#define X(name, sym, params) { #name, (void **)&cu.name },
static const struct {
    const char *name;
    void **fn;
} cu_entries[] = { BRAID_CUDA_ENTRIES(X) };
#undef X

static CUcontext cu_ctx[CUDA_MAX_DEVICES];
static pthread_mutex_t cu_lock = PTHREAD_MUTEX_INITIALIZER;

static braid_status_t cu_fail(CUresult r, const char *call)
{
    const char *s = NULL;
    if (cu.cuGetErrorString == NULL || cu.cuGetErrorString(r, &s) != CUDA_SUCCESS || s == NULL)
        s = "unknown error";
    braid_status_t st = r == CUDA_ERROR_OUT_OF_MEMORY ? BRAID_ERR_NOMEM : BRAID_ERR_DEVICE;
    return braid_err(st, "CUDA driver: %s failed: %s (%d)", call, s, r);
}

#define CU_CALL(_call)                                                                     \
    do {                                                                                   \
        CUresult _r = cu._call;                                                            \
        if (_r != CUDA_SUCCESS)                                                            \
            return cu_fail(_r, #_call);                                                    \
    } while (0)

static braid_status_t cu_load_entries(void *lib)
{
    braid_cuGetProcAddress_v2_t gpa2 =
        (braid_cuGetProcAddress_v2_t)dlsym(lib, "cuGetProcAddress_v2");
    braid_cuGetProcAddress_t gpa = (braid_cuGetProcAddress_t)dlsym(lib, "cuGetProcAddress");
    if (gpa2 == NULL && gpa == NULL)
        return braid_err(BRAID_ERR_SYSTEM, "CUDA driver: libcuda.so.1 has no cuGetProcAddress "
                         "(a driver older than CUDA 11.3?)");
    for (size_t i = 0; i < sizeof(cu_entries) / sizeof(cu_entries[0]); i++) {
        int found = 0;
        CUresult r = gpa2 != NULL ? gpa2(cu_entries[i].name, cu_entries[i].fn, CUDA_API_VERSION,
                                         CU_GET_PROC_ADDRESS_DEFAULT, &found)
                                  : gpa(cu_entries[i].name, cu_entries[i].fn, CUDA_API_VERSION,
                                        CU_GET_PROC_ADDRESS_DEFAULT);
        if (r != CUDA_SUCCESS || *cu_entries[i].fn == NULL)
            return braid_err(BRAID_ERR_SYSTEM, "CUDA driver: cuGetProcAddress(\"%s\") failed "
                             "(%d): the driver is too old for braid", cu_entries[i].name, r);
    }
    return BRAID_OK;
}

/* libcuda.so.1 is the driver itself (or braid's emulated one): where it is not, the
 * dlopen fails at once, so it is always worth trying. */
static int cuda_present(void)
{
    return 1;
}

static braid_status_t cuda_init(int *ndev_p)
{
    *ndev_p = 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)   /* no NVIDIA driver: not an error, and not recorded as one */
        return BRAID_ERR_UNSUPPORTED;
    braid_status_t st = cu_load_entries(lib);
    if (st < 0) {
        dlclose(lib);
        return st;
    }
    CUresult r = cu.cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE)
        return BRAID_OK;
    if (r != CUDA_SUCCESS)
        return cu_fail(r, "cuInit(0)");
    CU_CALL(cuDeviceGetCount(ndev_p));
    if (*ndev_p > CUDA_MAX_DEVICES)
        *ndev_p = CUDA_MAX_DEVICES;
    return BRAID_OK;
}

static braid_status_t cuda_ptr_info(const void *p, braid_ptr_info_t *info_p)
{
    unsigned int type = 0;
    int ordinal = -1, managed = 0;
    CUdeviceptr dptr = 0;
    int attrs[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                    CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_DEVICE_POINTER };
    void *data[] = { &type, &ordinal, &managed, &dptr };
    CUresult r = cu.cuPointerGetAttributes(4, attrs, data, (CUdeviceptr)(uintptr_t)p);
    info_p->ordinal = -1;
    info_p->kind = BRAID_MEM_HOST;
    info_p->dptr = NULL;
    if (r != CUDA_SUCCESS)
        return BRAID_OK;          /* memory the driver does not know: plain host memory */
    if (managed) {
        info_p->kind = BRAID_MEM_MANAGED;
        info_p->ordinal = ordinal;
    } else if (type == CU_MEMORYTYPE_DEVICE) {
        info_p->kind = BRAID_MEM_DEVICE;
        info_p->ordinal = ordinal;
    } else if (type == CU_MEMORYTYPE_HOST) {
        info_p->kind = BRAID_MEM_PINNED;
        info_p->dptr = (void *)(uintptr_t)dptr;
    }
    return BRAID_OK;
}

static braid_status_t cuda_bind(int ordinal)
{
    CUcontext cur = NULL;
    CU_CALL(cuCtxGetCurrent(&cur));
    if (cur != NULL)
        return BRAID_OK;          /* the caller's own context (or ours, bound before) */
    if (ordinal < 0 || ordinal >= CUDA_MAX_DEVICES)
        return braid_err(BRAID_ERR_INVALID, "CUDA device %d is out of range", ordinal);
    pthread_mutex_lock(&cu_lock);
    CUresult r = CUDA_SUCCESS;
    if (cu_ctx[ordinal] == NULL) {
        CUdevice dev;
        r = cu.cuDeviceGet(&dev, ordinal);
        if (r == CUDA_SUCCESS)
            r = cu.cuDevicePrimaryCtxRetain(&cu_ctx[ordinal], dev);
    }
    pthread_mutex_unlock(&cu_lock);
    if (r != CUDA_SUCCESS)
        return cu_fail(r, "cuDevicePrimaryCtxRetain");
    CU_CALL(cuCtxSetCurrent(cu_ctx[ordinal]));
    return BRAID_OK;
}

static braid_status_t cuda_current(int *ordinal_p)
{
    CUcontext cur = NULL;
    CUdevice dev = -1;
    CU_CALL(cuCtxGetCurrent(&cur));
    if (cur != NULL)
        CU_CALL(cuCtxGetDevice(&dev));
    *ordinal_p = cur != NULL ? (int)dev : -1;
    return BRAID_OK;
}

static braid_status_t cuda_ctx_get(void **ctx_p)
{
    CUcontext cur = NULL;
    CU_CALL(cuCtxGetCurrent(&cur));
    *ctx_p = cur;
    return BRAID_OK;
}

static braid_status_t cuda_ctx_set(void *ctx)
{
    CU_CALL(cuCtxSetCurrent(ctx));
    return BRAID_OK;
}

static braid_status_t cuda_describe(int ordinal, char *buf, size_t len)
{
    CUdevice dev;
    char name[128];
    int major = 0, minor = 0, sms = 0;
    CU_CALL(cuDeviceGet(&dev, ordinal));
    CU_CALL(cuDeviceGetName(name, (int)sizeof(name), dev));
    CU_CALL(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CU_CALL(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    CU_CALL(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    snprintf(buf, len, "%s, sm_%d%d, %d SMs", name, major, minor, sms);
    return BRAID_OK;
}

static braid_status_t cuda_mem_alloc(size_t bytes, void **p_p)
{
    CUdeviceptr d = 0;
    CU_CALL(cuMemAlloc(&d, bytes));
    *p_p = (void *)(uintptr_t)d;
    return BRAID_OK;
}

static braid_status_t cuda_mem_free(void *p)
{
    CU_CALL(cuMemFree((CUdeviceptr)(uintptr_t)p));
    return BRAID_OK;
}

static braid_status_t cuda_host_alloc(size_t bytes, void **p_p)
{
    CU_CALL(cuMemHostAlloc(p_p, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    return BRAID_OK;
}

static braid_status_t cuda_host_free(void *p)
{
    CU_CALL(cuMemFreeHost(p));
    return BRAID_OK;
}

static braid_status_t cuda_host_register(void *p, size_t bytes)
{
    CU_CALL(cuMemHostRegister(p, bytes, CU_MEMHOSTREGISTER_PORTABLE |
                                            CU_MEMHOSTREGISTER_DEVICEMAP));
    return BRAID_OK;
}

static braid_status_t cuda_host_unregister(void *p)
{
    CU_CALL(cuMemHostUnregister(p));
    return BRAID_OK;
}

static braid_status_t cuda_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    CU_CALL(cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes,
                          stream));
    return BRAID_OK;
}

static braid_status_t cuda_memset_async(void *dst, int byte, size_t bytes, void *stream)
{
    CU_CALL(cuMemsetD8Async((CUdeviceptr)(uintptr_t)dst, (unsigned char)byte, bytes, stream));
    return BRAID_OK;
}

static braid_status_t cuda_stream_create(void **stream_p)
{
    CU_CALL(cuStreamCreate((CUstream *)stream_p, CU_STREAM_NON_BLOCKING));
    return BRAID_OK;
}

static braid_status_t cuda_stream_destroy(void *stream)
{
    CU_CALL(cuStreamDestroy(stream));
    return BRAID_OK;
}

static braid_status_t cuda_stream_sync(void *stream)
{
    CU_CALL(cuStreamSynchronize(stream));
    return BRAID_OK;
}

static braid_status_t cuda_stream_capturing(void *stream, int *yes_p)
{
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    CU_CALL(cuStreamIsCapturing(stream, &status));
    *yes_p = status != CU_STREAM_CAPTURE_STATUS_NONE;
    return BRAID_OK;
}

static braid_status_t cuda_event_create(void **ev_p)
{
    CU_CALL(cuEventCreate((CUevent *)ev_p, CU_EVENT_DISABLE_TIMING));
    return BRAID_OK;
}

static braid_status_t cuda_event_destroy(void *ev)
{
    CU_CALL(cuEventDestroy(ev));
    return BRAID_OK;
}

static braid_status_t cuda_event_record(void *ev, void *stream)
{
    CU_CALL(cuEventRecord(ev, stream));
    return BRAID_OK;
}

static braid_status_t cuda_event_query(void *ev)
{
    CUresult r = cu.cuEventQuery(ev);
    if (r == CUDA_ERROR_NOT_READY)
        return BRAID_INPROGRESS;
    return r == CUDA_SUCCESS ? BRAID_OK : cu_fail(r, "cuEventQuery");
}

static braid_status_t cuda_stream_wait_event(void *stream, void *ev)
{
    CU_CALL(cuStreamWaitEvent(stream, ev, 0));
    return BRAID_OK;
}

static braid_status_t cuda_word_ptr(uint32_t *word, CUdeviceptr *d_p)
{
    CU_CALL(cuMemHostGetDevicePointer(d_p, word, 0));
    return BRAID_OK;
}

static braid_status_t cuda_stream_wait_word(void *stream, uint32_t *word, uint32_t value)
{
    CUdeviceptr d;
    BRAID_CHECK(cuda_word_ptr(word, &d));
    CU_CALL(cuStreamWaitValue32(stream, d, value, CU_STREAM_WAIT_VALUE_GEQ));
    return BRAID_OK;
}

static braid_status_t cuda_stream_write_word(void *stream, uint32_t *word, uint32_t value)
{
    CUdeviceptr d;
    BRAID_CHECK(cuda_word_ptr(word, &d));
    CU_CALL(cuStreamWriteValue32(stream, d, value, CU_STREAM_WRITE_VALUE_DEFAULT));
    return BRAID_OK;
}

/* One call into the driver for the whole batch. */
static braid_status_t cuda_stream_mem_ops(void *stream, const braid_mem_op_t *ops, int n)
{
    static const struct {
        int op;
        unsigned int flags;
    } kinds[] = {
        [BRAID_MEM_WAIT] = { CU_STREAM_MEM_OP_WAIT_VALUE_32, CU_STREAM_WAIT_VALUE_GEQ },
        [BRAID_MEM_WAIT_EQ] = { CU_STREAM_MEM_OP_WAIT_VALUE_32, CU_STREAM_WAIT_VALUE_EQ },
        [BRAID_MEM_WRITE] = { CU_STREAM_MEM_OP_WRITE_VALUE_32, CU_STREAM_WRITE_VALUE_DEFAULT },
        [BRAID_MEM_WRITE64] = { CU_STREAM_MEM_OP_WRITE_VALUE_64, CU_STREAM_WRITE_VALUE_DEFAULT },
    };
    CUstreamBatchMemOpParams p[BRAID_MEM_OPS_MAX];
    if (n < 1 || n > BRAID_MEM_OPS_MAX)
        return braid_err(BRAID_ERR_INTERNAL, "%d stream memory operations in one batch (1 "
                         "to %d)", n, BRAID_MEM_OPS_MAX);
    memset(p, 0, (size_t)n * sizeof(*p));
    for (int i = 0; i < n; i++) {
        p[i].operation = kinds[ops[i].kind].op;
        p[i].waitValue.address = (CUdeviceptr)(uintptr_t)ops[i].addr;   /* same layout */
        if (ops[i].kind == BRAID_MEM_WRITE64)
            p[i].waitValue.value64 = ops[i].value;
        else
            p[i].waitValue.value = (uint32_t)ops[i].value;
        p[i].waitValue.flags = kinds[ops[i].kind].flags;
    }
    CU_CALL(cuStreamBatchMemOp(stream, (unsigned int)n, p, 0));
    return BRAID_OK;
}

static braid_status_t cuda_peer_access(int dev, int peer, int *yes_p)
{
    int can = 0;
    CU_CALL(cuDeviceCanAccessPeer(&can, dev, peer));
    *yes_p = can;
    return BRAID_OK;
}

/* The bound context reaches the peer's primary context's memory (retained for good). */
static braid_status_t cuda_peer_enable(int peer)
{
    CUcontext cur = NULL, pctx = NULL;
    CUdevice dev;
    CU_CALL(cuCtxGetCurrent(&cur));
    CU_CALL(cuDeviceGet(&dev, peer));
    pthread_mutex_lock(&cu_lock);
    CUresult r = peer < CUDA_MAX_DEVICES && cu_ctx[peer] == NULL
                     ? cu.cuDevicePrimaryCtxRetain(&cu_ctx[peer], dev) : CUDA_SUCCESS;
    if (peer < CUDA_MAX_DEVICES)
        pctx = cu_ctx[peer];
    pthread_mutex_unlock(&cu_lock);
    if (r != CUDA_SUCCESS || pctx == NULL)
        return cu_fail(r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_DEVICE,
                       "cuDevicePrimaryCtxRetain (peer)");
    r = cu.cuCtxEnablePeerAccess(pctx, 0);
    if (r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
        return BRAID_OK;
    return r == CUDA_SUCCESS ? BRAID_OK : cu_fail(r, "cuCtxEnablePeerAccess");
}

static braid_status_t cuda_ipc_get(void *p, braid_ipc_handle_t *h_p)
{
    CUipcMemHandle h;
    CU_CALL(cuIpcGetMemHandle(&h, (CUdeviceptr)(uintptr_t)p));
    memcpy(h_p->bytes, h.reserved, sizeof(h_p->bytes));
    return BRAID_OK;
}

static braid_status_t cuda_ipc_open(const braid_ipc_handle_t *h, void **p_p)
{
    CUipcMemHandle ch;
    CUdeviceptr d = 0;
    memcpy(ch.reserved, h->bytes, sizeof(ch.reserved));
    CU_CALL(cuIpcOpenMemHandle(&d, ch, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    *p_p = (void *)(uintptr_t)d;
    return BRAID_OK;
}

static braid_status_t cuda_ipc_close(void *p)
{
    CU_CALL(cuIpcCloseMemHandle((CUdeviceptr)(uintptr_t)p));
    return BRAID_OK;
}

static braid_status_t cuda_module_load(const void *image, size_t size, void **mod_p)
{
    (void)size;   /* fatbins, cubins and PTX carry their own size */
    CUresult r = cu.cuModuleLoadData((CUmodule *)mod_p, image);
    if (r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
        r == CUDA_ERROR_INVALID_PTX)
        return BRAID_ERR_UNSUPPORTED;   /* not for this device: the caller tries the next */
    return r == CUDA_SUCCESS ? BRAID_OK : cu_fail(r, "cuModuleLoadData");
}

/* An attribute query loads the function (NCCL forces its kernels the same way), which
 * CUDA's lazy loading (the default from 12.2) would otherwise do at its first launch. */
static braid_status_t cuda_module_function(void *mod, const char *name, void **fn_p)
{
    int threads = 0;
    CUresult r = cu.cuModuleGetFunction((CUfunction *)fn_p, mod, name);
    if (r != CUDA_SUCCESS)
        return braid_err(BRAID_ERR_SYSTEM, "CUDA driver: kernel %s not found in braid's "
                         "module (%d)", name, r);
    r = cu.cuFuncGetAttribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, *fn_p);
    return r == CUDA_SUCCESS ? BRAID_OK : cu_fail(r, "cuFuncGetAttribute (loading a kernel)");
}

static braid_status_t cuda_launch(void *fn, unsigned grid, unsigned block, void *arg,
                                  size_t arg_bytes, void *stream)
{
    (void)arg_bytes;
    void *params[] = { arg };
    CU_CALL(cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, stream, params, NULL));
    return BRAID_OK;
}

const braid_device_ops_t braid_device_cuda = {
    .name = "cuda",
    .present = cuda_present,
    .init = cuda_init,
    .ptr_info = cuda_ptr_info,
    .bind = cuda_bind,
    .current = cuda_current,
    .ctx_get = cuda_ctx_get,
    .ctx_set = cuda_ctx_set,
    .describe = cuda_describe,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
    .copy_async = cuda_copy_async,
    .memset_async = cuda_memset_async,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_sync = cuda_stream_sync,
    .stream_capturing = cuda_stream_capturing,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .stream_wait_event = cuda_stream_wait_event,
    .stream_wait_word = cuda_stream_wait_word,
    .stream_write_word = cuda_stream_write_word,
    .stream_mem_ops = cuda_stream_mem_ops,
    .peer_access = cuda_peer_access,
    .peer_enable = cuda_peer_enable,
    .ipc_get = cuda_ipc_get,
    .ipc_open = cuda_ipc_open,
    .ipc_close = cuda_ipc_close,
    .module_load = cuda_module_load,
    .module_function = cuda_module_function,
    .launch = cuda_launch,
    .compile = NULL,
};
