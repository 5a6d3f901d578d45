/*
 * The HIP backend: libamdhip64 (ROCm 5.x, 6.x, 7.x) loaded with dlopen at init, every entry
 * found with dlsym, so one libbraid runs with whichever ROCm the process has, or none.
 *
 * A runtime the process already loaded (PyTorch's, say) is reused before any other is
 * loaded: two HIP runtimes in one process do not share devices, streams or memory.
 * Facts that changed between ROCm releases (pointer kinds, the IPC flag, where the arch
 * name sits in hipDeviceProp_t, where hiprtc lives) are chosen by the runtime's version;
 * hip_abi.h says which release each belongs to.
 *
 * Run-time compilation (compile) goes through hiprtc for the bound device's arch, after
 * asking comgr whether it can build that arch at all: Debian's ROCm 5.2 hiprtc, asked for
 * an arch its comgr does not know (gfx942), crashes the process instead of failing.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "device/device.h"
#include "device/hip_abi.h"

_Static_assert(HIP_IPC_HANDLE_SIZE <= BRAID_IPC_HANDLE_BYTES,
               "a HIP IPC handle must fit in braid's");

#define X(name, ret, params) ret (*name) params;
static struct {
    BRAID_HIP_ENTRIES(X)
    BRAID_HIP_OPTIONAL(X)
    BRAID_HIPRTC_ENTRIES(X)
} hip;
#undef X

typedef struct hip_entry {
    const char *name;
    void **fn;
} hip_entry_t;

#define X(name, ret, params) { #name, (void **)&hip.name },
static const hip_entry_t hip_required[] = { BRAID_HIP_ENTRIES(X) };
static const hip_entry_t hip_optional[] = { BRAID_HIP_OPTIONAL(X) };
static const hip_entry_t hip_rtc_entries[] = { BRAID_HIPRTC_ENTRIES(X) };
#undef X

#define HIP_NELEM(_a) (sizeof(_a) / sizeof((_a)[0]))

static const char *const hip_lib_names[] = {
    "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so",
};
static const char *const hip_comgr_r5[] = { "libamd_comgr.so.2", "libamd_comgr.so.3",
                                            "libamd_comgr.so" };
static const char *const hip_comgr_r7[] = { "libamd_comgr.so.3", "libamd_comgr.so.2",
                                            "libamd_comgr.so" };

static pthread_mutex_t hip_lock = PTHREAD_MUTEX_INITIALIZER;
static void *hip_lib;                /* the runtime, once init has loaded it */
static const char *hip_lib_name;
static int hip_version;              /* its HIP_VERSION */
static int hip_rtc_ready;            /* hiprtc's entries are resolved */
static char hip_test_arch[64];       /* braid_device_hip_test_arch's arch, or "" */

static int hip_major(void)
{
    return HIP_VERSION_MAJOR_OF(hip_version);
}

static braid_status_t hip_fail(hipError_t r, const char *call)
{
    const char *s = hip.hipGetErrorString != NULL ? hip.hipGetErrorString(r) : NULL;
    braid_status_t st = r == hipErrorOutOfMemory ? BRAID_ERR_NOMEM : BRAID_ERR_DEVICE;
    return braid_err(st, "HIP: %s failed: %s (%d)", call, s != NULL ? s : "unknown error", r);
}

#define HIP_CALL(_call)                                                                    \
    do {                                                                                   \
        hipError_t _r = hip._call;                                                         \
        if (_r != hipSuccess)                                                              \
            return hip_fail(_r, #_call);                                                   \
    } while (0)

/*
 * A call whose failure braid expects (a pointer HIP does not know, an image for another
 * GPU) must not leave that error for the application's next hipGetLastError, which from
 * ROCm 7 returns the last error, not the last call's result: hip_forget clears it, unless
 * the thread had an error of its own before (hip_peek).
 */
static hipError_t hip_peek(void)
{
    return hip.hipPeekAtLastError != NULL ? hip.hipPeekAtLastError() : hipSuccess;
}

static void hip_forget(hipError_t before)
{
    if (before == hipSuccess && hip.hipGetLastError != NULL)
        (void)hip.hipGetLastError();
}

/* ---- loading ---------------------------------------------------------------------------- */

/* The first of `names` the process already has, else the first that loads. */
static void *hip_dlopen_first(const char *const *names, size_t n, const char **name_p)
{
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            void *h = dlopen(names[i], RTLD_NOW | (pass == 0 ? RTLD_NOLOAD : RTLD_LOCAL));
            if (h != NULL) {
                *name_p = names[i];
                return h;
            }
        }
    }
    return NULL;
}

static void hip_unresolve(const hip_entry_t *e, size_t n)
{
    for (size_t i = 0; i < n; i++)
        *e[i].fn = NULL;
}

static braid_status_t hip_resolve(void *lib, const char *libname, const hip_entry_t *e,
                                  size_t n, int required)
{
    for (size_t i = 0; i < n; i++) {
        *e[i].fn = dlsym(lib, e[i].name);
        if (*e[i].fn == NULL && required) {
            hip_unresolve(e, n);
            return braid_err(BRAID_ERR_UNSUPPORTED, "HIP: %s has no %s, which braid needs: "
                             "use ROCm 5.0 or later", libname, e[i].name);
        }
    }
    return BRAID_OK;
}

static braid_status_t hip_load(void)
{
    const char *name = NULL;
    braid_status_t st;
    if (hip_lib != NULL)
        return BRAID_OK;
    void *lib = hip_dlopen_first(hip_lib_names, HIP_NELEM(hip_lib_names), &name);
    if (lib == NULL)
        return braid_err(BRAID_ERR_UNSUPPORTED, "HIP: cannot load the HIP runtime "
                         "(libamdhip64.so.7, .so.6, .so.5 or .so): %s; install ROCm or add its "
                         "lib folder to LD_LIBRARY_PATH", dlerror());
    BRAID_CHECK_GOTO(st, hip_resolve(lib, name, hip_required, HIP_NELEM(hip_required), 1),
                     out_close);
    hip_resolve(lib, name, hip_optional, HIP_NELEM(hip_optional), 0);
    hipError_t r = hip.hipRuntimeGetVersion(&hip_version);
    if (r != hipSuccess) {
        st = hip_fail(r, "hipRuntimeGetVersion");
        goto out_unresolve;
    }
    hip_lib = lib;
    hip_lib_name = name;
    BRAID_INFO(BRAID_SUB_INIT, "HIP: %s, runtime %d.%d.%d", name, hip_major(),
               hip_version / 100000 % 100, hip_version % 100000);
    return BRAID_OK;
out_unresolve:
    hip_unresolve(hip_required, HIP_NELEM(hip_required));
    hip_unresolve(hip_optional, HIP_NELEM(hip_optional));
out_close:
    dlclose(lib);
    return st;
}

/* ROCm's runtime is large and starts threads when loaded: load it unasked only where the
 * AMD GPU driver is (/dev/kfd), or reuse the copy a framework already loaded. */
static int hip_present(void)
{
    for (size_t i = 0; i < HIP_NELEM(hip_lib_names); i++) {
        void *h = dlopen(hip_lib_names[i], RTLD_NOW | RTLD_NOLOAD);
        if (h != NULL) {
            dlclose(h);
            return 1;
        }
    }
    return access("/dev/kfd", F_OK) == 0;
}

static braid_status_t hip_init(int *ndev_p)
{
    int n = 0;
    *ndev_p = 0;
    pthread_mutex_lock(&hip_lock);
    braid_status_t st = hip_load();
    pthread_mutex_unlock(&hip_lock);
    if (st < 0)
        return st;
    hipError_t before = hip_peek();
    hipError_t r = hip.hipGetDeviceCount(&n);
    if (r == hipErrorNoDevice) {
        hip_forget(before);
        return BRAID_OK;
    }
    if (r != hipSuccess)
        return hip_fail(r, "hipGetDeviceCount");
    *ndev_p = n;
    return BRAID_OK;
}

/* ---- devices and pointers --------------------------------------------------------------- */

static braid_mem_kind_t hip_kind_r5(int type)
{
    switch (type) {
    case hipMemoryTypeHost_r5: return BRAID_MEM_PINNED;
    case hipMemoryTypeDevice_r5:
    case hipMemoryTypeArray_r5: return BRAID_MEM_DEVICE;
    case hipMemoryTypeUnified_r5: return BRAID_MEM_MANAGED;
    default: return BRAID_MEM_HOST;
    }
}

static braid_mem_kind_t hip_kind_r6(int type)
{
    switch (type) {
    case hipMemoryTypeHost_r6: return BRAID_MEM_PINNED;
    case hipMemoryTypeDevice_r6:
    case hipMemoryTypeArray_r6: return BRAID_MEM_DEVICE;
    case hipMemoryTypeManaged_r6:
    case hipMemoryTypeUnified_r6: return BRAID_MEM_MANAGED;
    default: return BRAID_MEM_HOST;      /* hipMemoryTypeUnregistered (ROCm 7) */
    }
}

static braid_status_t hip_ptr_info(const void *p, braid_ptr_info_t *info_p)
{
    hipPointerAttribute_t a;
    memset(&a, 0, sizeof(a));
    hipError_t before = hip_peek();
    hipError_t r = hip.hipPointerGetAttributes(&a, p);
    info_p->kind = BRAID_MEM_HOST;
    info_p->ordinal = -1;
    info_p->dptr = NULL;
    if (r == hipErrorInvalidValue || r == hipErrorInvalidDevicePointer ||
        r == hipErrorInvalidDevice || r == hipErrorNoDevice) {
        hip_forget(before);
        return BRAID_OK;     /* memory the runtime does not know (5.x, 6.x): host memory */
    }
    if (r != hipSuccess)
        return hip_fail(r, "hipPointerGetAttributes");
    if (a.isManaged)
        info_p->kind = BRAID_MEM_MANAGED;
    else
        info_p->kind = hip_major() >= 6 ? hip_kind_r6(a.type) : hip_kind_r5(a.type);
    if (info_p->kind == BRAID_MEM_DEVICE || info_p->kind == BRAID_MEM_MANAGED)
        info_p->ordinal = a.device;
    if (info_p->kind == BRAID_MEM_PINNED)
        info_p->dptr = a.devicePointer;
    return BRAID_OK;
}

static braid_status_t hip_bind(int ordinal)
{
    int cur = -1;
    HIP_CALL(hipGetDevice(&cur));
    if (cur == ordinal)
        return BRAID_OK;
    hipError_t r = hip.hipSetDevice(ordinal);
    if (r != hipSuccess)
        return braid_err(BRAID_ERR_DEVICE, "HIP: hipSetDevice(%d) failed: %s (%d); check "
                         "HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES", ordinal,
                         hip.hipGetErrorString(r), r);
    return BRAID_OK;
}

/* HIP always has a current device (0 until hipSetDevice). */
static braid_status_t hip_current(int *ordinal_p)
{
    HIP_CALL(hipGetDevice(ordinal_p));
    return BRAID_OK;
}

/* A context is a device here: its ordinal + 1, so that NULL stays "none". */
static braid_status_t hip_ctx_get(void **ctx_p)
{
    int cur = 0;
    HIP_CALL(hipGetDevice(&cur));
    *ctx_p = (void *)(intptr_t)(cur + 1);
    return BRAID_OK;
}

static braid_status_t hip_ctx_set(void *ctx)
{
    return ctx != NULL ? hip_bind((int)(intptr_t)ctx - 1) : BRAID_OK;
}

typedef hipError_t (*hip_props_fn_t)(void *props, int ordinal);

/* The getter of hipDeviceProp_t and where gcnArchName sits in the layout it fills. */
static hip_props_fn_t hip_props_getter(size_t *offset_p)
{
    *offset_p = HIP_PROP_ARCH_OFFSET_R0600;
    if (hip.hipGetDevicePropertiesR0600 != NULL)
        return hip.hipGetDevicePropertiesR0600;
    *offset_p = HIP_PROP_ARCH_OFFSET_R0000;
    if (hip.hipGetDevicePropertiesR0000 != NULL)
        return hip.hipGetDevicePropertiesR0000;
    return hip_major() < 6 ? hip.hipGetDeviceProperties : NULL;
}

/* Device `ordinal`'s gcnArchName ("gfx90a:sramecc+:xnack-"). */
static braid_status_t hip_device_arch(int ordinal, char *arch, size_t len)
{
    _Alignas(16) unsigned char props[HIP_PROP_BUFFER_BYTES];
    size_t off;
    hip_props_fn_t get = hip_props_getter(&off);
    if (get == NULL)
        return braid_err(BRAID_ERR_UNSUPPORTED, "HIP: %s has no hipGetDeviceProperties "
                         "braid knows the layout of: cannot tell device %d's arch",
                         hip_lib_name, ordinal);
    memset(props, 0, sizeof(props));
    hipError_t r = get(props, ordinal);
    if (r != hipSuccess)
        return hip_fail(r, "hipGetDeviceProperties");
    const char *name = (const char *)props + off;
    size_t n = strnlen(name, HIP_PROP_ARCH_BYTES);
    if (n == HIP_PROP_ARCH_BYTES || strncmp(name, "gfx", 3) != 0)
        return braid_err(BRAID_ERR_INTERNAL, "HIP: device %d's gcnArchName (\"%.16s\") is not "
                         "an arch name: braid misreads this runtime's (%d) hipDeviceProp_t",
                         ordinal, name, hip_version);
    snprintf(arch, len, "%.*s", (int)n, name);
    return BRAID_OK;
}

static braid_status_t hip_describe(int ordinal, char *buf, size_t len)
{
    hipDevice_t dev;
    char name[128], arch[HIP_PROP_ARCH_BYTES];
    int cus = 0;
    HIP_CALL(hipDeviceGet(&dev, ordinal));
    HIP_CALL(hipDeviceGetName(name, (int)sizeof(name), dev));
    HIP_CALL(hipDeviceGetAttribute(&cus, hipDeviceAttributeMultiprocessorCount, ordinal));
    if (hip_device_arch(ordinal, arch, sizeof(arch)) < 0)
        snprintf(arch, sizeof(arch), "arch unknown");
    snprintf(buf, len, "%s, %s, %d CUs", name, arch, cus);
    return BRAID_OK;
}

/* ---- memory ----------------------------------------------------------------------------- */

static braid_status_t hip_mem_alloc(size_t bytes, void **p_p)
{
    void *p = NULL;
    hipError_t r = hip.hipMalloc(&p, bytes);
    if (r != hipSuccess)
        return braid_err(r == hipErrorOutOfMemory ? BRAID_ERR_NOMEM : BRAID_ERR_DEVICE,
                         "HIP: hipMalloc(%zu bytes) failed: %s (%d)", bytes,
                         hip.hipGetErrorString(r), r);
    *p_p = p;
    return BRAID_OK;
}

static braid_status_t hip_mem_free(void *p)
{
    HIP_CALL(hipFree(p));
    return BRAID_OK;
}

static braid_status_t hip_host_alloc(size_t bytes, void **p_p)
{
    void *p = NULL;
    hipError_t r = hip.hipHostMalloc(&p, bytes, hipHostMallocMapped);
    if (r != hipSuccess)
        return braid_err(r == hipErrorOutOfMemory ? BRAID_ERR_NOMEM : BRAID_ERR_DEVICE,
                         "HIP: hipHostMalloc(%zu bytes, mapped) failed: %s (%d)", bytes,
                         hip.hipGetErrorString(r), r);
    *p_p = p;
    return BRAID_OK;
}

static braid_status_t hip_host_free(void *p)
{
    HIP_CALL(hipHostFree(p));
    return BRAID_OK;
}

static braid_status_t hip_host_register(void *p, size_t bytes)
{
    HIP_CALL(hipHostRegister(p, bytes, hipHostRegisterPortable | hipHostRegisterMapped));
    return BRAID_OK;
}

static braid_status_t hip_host_unregister(void *p)
{
    HIP_CALL(hipHostUnregister(p));
    return BRAID_OK;
}

static braid_status_t hip_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    HIP_CALL(hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, stream));
    return BRAID_OK;
}

static braid_status_t hip_memset_async(void *dst, int byte, size_t bytes, void *stream)
{
    HIP_CALL(hipMemsetAsync(dst, byte, bytes, stream));
    return BRAID_OK;
}

/* ---- streams and events ----------------------------------------------------------------- */

static braid_status_t hip_stream_create(void **stream_p)
{
    HIP_CALL(hipStreamCreateWithFlags((hipStream_t *)stream_p, hipStreamNonBlocking));
    return BRAID_OK;
}

static braid_status_t hip_stream_destroy(void *stream)
{
    HIP_CALL(hipStreamDestroy(stream));
    return BRAID_OK;
}

static braid_status_t hip_stream_sync(void *stream)
{
    HIP_CALL(hipStreamSynchronize(stream));
    return BRAID_OK;
}

static braid_status_t hip_stream_capturing(void *stream, int *yes_p)
{
    int status = hipStreamCaptureStatusNone;
    if (hip.hipStreamIsCapturing != NULL)
        HIP_CALL(hipStreamIsCapturing(stream, &status));
    *yes_p = status != hipStreamCaptureStatusNone;
    return BRAID_OK;
}

static braid_status_t hip_event_create(void **ev_p)
{
    HIP_CALL(hipEventCreateWithFlags((hipEvent_t *)ev_p, hipEventDisableTiming));
    return BRAID_OK;
}

static braid_status_t hip_event_destroy(void *ev)
{
    HIP_CALL(hipEventDestroy(ev));
    return BRAID_OK;
}

static braid_status_t hip_event_record(void *ev, void *stream)
{
    HIP_CALL(hipEventRecord(ev, stream));
    return BRAID_OK;
}

static braid_status_t hip_event_query(void *ev)
{
    hipError_t r = hip.hipEventQuery(ev);
    if (r == hipErrorNotReady)
        return BRAID_INPROGRESS;
    return r == hipSuccess ? BRAID_OK : hip_fail(r, "hipEventQuery");
}

static braid_status_t hip_stream_wait_event(void *stream, void *ev)
{
    HIP_CALL(hipStreamWaitEvent(stream, ev, 0));
    return BRAID_OK;
}

/* The device's address of a word in host_alloc memory. */
static braid_status_t hip_word_ptr(uint32_t *word, void **d_p)
{
    HIP_CALL(hipHostGetDevicePointer(d_p, word, 0));
    return BRAID_OK;
}

/* HIP's GEQ compares (*word & mask) >= value, not CUDA's wrap-safe (int32_t)(*word - value)
 * >= 0: the same answer until the counter wraps (2^32 steps). */
static braid_status_t hip_stream_wait_word(void *stream, uint32_t *word, uint32_t value)
{
    void *d = NULL;
    BRAID_CHECK(hip_word_ptr(word, &d));
    HIP_CALL(hipStreamWaitValue32(stream, d, value, hipStreamWaitValueGte, hipStreamWaitMaskAll));
    return BRAID_OK;
}

static braid_status_t hip_stream_write_word(void *stream, uint32_t *word, uint32_t value)
{
    void *d = NULL;
    BRAID_CHECK(hip_word_ptr(word, &d));
    HIP_CALL(hipStreamWriteValue32(stream, d, value, 0));
    return BRAID_OK;
}

/* One call each: hipStreamBatchMemOp is not in every ROCm braid supports. The GEQ wait is
 * not wrap-safe here either (above). */
static braid_status_t hip_stream_mem_ops(void *stream, const braid_mem_op_t *ops, int n)
{
    for (int i = 0; i < n; i++) {
        void *a = ops[i].addr;
        uint32_t v = (uint32_t)ops[i].value;
        switch (ops[i].kind) {
        case BRAID_MEM_WAIT:
            HIP_CALL(hipStreamWaitValue32(stream, a, v, hipStreamWaitValueGte,
                                          hipStreamWaitMaskAll));
            break;
        case BRAID_MEM_WAIT_EQ:
            HIP_CALL(hipStreamWaitValue32(stream, a, v, hipStreamWaitValueEq,
                                          hipStreamWaitMaskAll));
            break;
        case BRAID_MEM_WRITE:
            HIP_CALL(hipStreamWriteValue32(stream, a, v, 0));
            break;
        default:
            HIP_CALL(hipStreamWriteValue64(stream, a, ops[i].value, 0));
        }
    }
    return BRAID_OK;
}

static braid_status_t hip_peer_access(int dev, int peer, int *yes_p)
{
    HIP_CALL(hipDeviceCanAccessPeer(yes_p, dev, peer));
    return BRAID_OK;
}

static braid_status_t hip_peer_enable(int peer)
{
    hipError_t r = hip.hipDeviceEnablePeerAccess(peer, 0);
    if (r == hipSuccess || r == hipErrorPeerAccessAlreadyEnabled)
        return BRAID_OK;
    return hip_fail(r, "hipDeviceEnablePeerAccess");
}

/* ---- IPC -------------------------------------------------------------------------------- */

static braid_status_t hip_ipc_get(void *p, braid_ipc_handle_t *h_p)
{
    hipIpcMemHandle_t h;
    HIP_CALL(hipIpcGetMemHandle(&h, p));
    memset(h_p->bytes, 0, sizeof(h_p->bytes));
    memcpy(h_p->bytes, h.reserved, sizeof(h.reserved));
    return BRAID_OK;
}

static braid_status_t hip_ipc_open(const braid_ipc_handle_t *h, void **p_p)
{
    hipIpcMemHandle_t hh;
    void *p = NULL;
    unsigned int flags = hip_major() >= 6 ? hipIpcMemLazyEnablePeerAccess_r6
                                          : hipIpcMemLazyEnablePeerAccess_r5;
    memcpy(hh.reserved, h->bytes, sizeof(hh.reserved));
    hipError_t before = hip_peek();
    hipError_t r = hip.hipIpcOpenMemHandle(&p, hh, flags);
    if (r == hipErrorInvalidValue) {
        /* the flag's value moved between releases: a runtime that rejects it takes the other */
        hip_forget(before);
        r = hip.hipIpcOpenMemHandle(&p, hh, flags ^ 1u);
    }
    if (r != hipSuccess)
        return braid_err(BRAID_ERR_DEVICE, "HIP: hipIpcOpenMemHandle failed: %s (%d); the "
                         "peer's buffer must be hipMalloc memory of a GPU this process sees",
                         hip.hipGetErrorString(r), r);
    *p_p = p;
    return BRAID_OK;
}

static braid_status_t hip_ipc_close(void *p)
{
    HIP_CALL(hipIpcCloseMemHandle(p));
    return BRAID_OK;
}

/* ---- kernels ---------------------------------------------------------------------------- */

static braid_status_t hip_module_load(const void *image, size_t size, void **mod_p)
{
    hipModule_t mod = NULL;
    hipError_t before = hip_peek();
    hipError_t r = hip.hipModuleLoadData(&mod, image);
    if (r == hipErrorInvalidImage || r == hipErrorNoBinaryForGpu ||
        r == hipErrorInvalidKernelFile) {
        hip_forget(before);
        BRAID_TRACE(BRAID_SUB_INIT, "HIP: image of %zu bytes is not for this GPU (%d)", size, r);
        return BRAID_ERR_UNSUPPORTED;   /* not for this device: the caller tries the next */
    }
    if (r != hipSuccess)
        return hip_fail(r, "hipModuleLoadData");
    *mod_p = mod;
    return BRAID_OK;
}

/* HIP loads a module's code object whole at hipModuleLoadData: no kernel is left to load
 * at its first launch. */
static braid_status_t hip_module_function(void *mod, const char *name, void **fn_p)
{
    hipFunction_t fn = NULL;
    hipError_t r = hip.hipModuleGetFunction(&fn, mod, name);
    if (r != hipSuccess)
        return braid_err(BRAID_ERR_DEVICE, "HIP: kernel %s not found in braid's module: %s "
                         "(%d)", name, hip.hipGetErrorString(r), r);
    *fn_p = fn;
    return BRAID_OK;
}

/* The kernel takes one struct by value: the argument buffer is that struct. */
static braid_status_t hip_launch(void *fn, unsigned grid, unsigned block, void *arg,
                                 size_t arg_bytes, void *stream)
{
    void *extra[] = { HIP_LAUNCH_PARAM_BUFFER_POINTER, arg, HIP_LAUNCH_PARAM_BUFFER_SIZE,
                      &arg_bytes, HIP_LAUNCH_PARAM_END };
    HIP_CALL(hipModuleLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, stream, NULL, extra));
    return BRAID_OK;
}

/* ---- run-time compilation --------------------------------------------------------------- */

/* hiprtc's entries: in the runtime itself (ROCm 5.x, 6.x), else libhiprtc of the runtime's
 * release (6.0 and later), else any libhiprtc. */
static braid_status_t hip_rtc_load(void)
{
    char own[32];
    const char *names[] = { own, "libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so" };
    const char *name = hip_lib_name;
    void *lib = hip_lib;
    if (hip_rtc_ready)
        return BRAID_OK;
    snprintf(own, sizeof(own), "libhiprtc.so.%d", hip_major());
    if (dlsym(lib, "hiprtcCreateProgram") == NULL) {
        lib = hip_dlopen_first(names, HIP_NELEM(names), &name);
        if (lib == NULL)
            return braid_err(BRAID_ERR_UNSUPPORTED, "HIP: compiling kernels needs hiprtc, "
                             "which neither %s nor libhiprtc.so.7/.so.6 provides (%s): install "
                             "ROCm's hiprtc", hip_lib_name, dlerror());
    }
    braid_status_t st = hip_resolve(lib, name, hip_rtc_entries, HIP_NELEM(hip_rtc_entries), 1);
    if (st < 0) {
        if (lib != hip_lib)
            dlclose(lib);
        return st;
    }
    hip_rtc_ready = 1;
    return BRAID_OK;
}

/* Whether comgr's ISA name ("amdgcn-amd-amdhsa--gfx90a[:...]") is arch's processor. */
static int hip_isa_is(const char *isa, const char *arch)
{
    const char *p = strstr(isa, "--");
    if (p == NULL)
        return 0;
    p += 2;
    size_t a = strcspn(arch, ":"), b = strcspn(p, ":");
    return a == b && strncmp(p, arch, a) == 0;
}

/* Refuse an arch the installed comgr cannot build (hiprtc may crash on one); when comgr
 * cannot be asked, let hiprtc answer. The library stays loaded: hiprtc uses it. */
static braid_status_t hip_comgr_check(const char *arch)
{
    const char *name = NULL;
    const char *const *names = hip_major() >= 7 ? hip_comgr_r7 : hip_comgr_r5;
    size_t count = 0;
    void *lib = hip_dlopen_first(names, HIP_NELEM(hip_comgr_r5), &name);
    if (lib == NULL)
        return BRAID_OK;
    braid_comgr_get_isa_count_t get_count =
        (braid_comgr_get_isa_count_t)dlsym(lib, "amd_comgr_get_isa_count");
    braid_comgr_get_isa_name_t get_name =
        (braid_comgr_get_isa_name_t)dlsym(lib, "amd_comgr_get_isa_name");
    if (get_count == NULL || get_name == NULL || get_count(&count) != 0)
        return BRAID_OK;
    for (size_t i = 0; i < count; i++) {
        const char *isa = NULL;
        if (get_name(i, &isa) == 0 && isa != NULL && hip_isa_is(isa, arch))
            return BRAID_OK;
    }
    return braid_err(BRAID_ERR_UNSUPPORTED, "HIP: the installed comgr (%s) cannot build code "
                     "for %s: update ROCm to one that knows this GPU", name, arch);
}

/* The arch to compile for: the test's, else the bound device's. */
static braid_status_t hip_compile_arch(char *arch, size_t len)
{
    int dev = -1;
    pthread_mutex_lock(&hip_lock);
    snprintf(arch, len, "%s", hip_test_arch);
    pthread_mutex_unlock(&hip_lock);
    if (arch[0] != '\0')
        return BRAID_OK;
    HIP_CALL(hipGetDevice(&dev));
    return hip_device_arch(dev, arch, len);
}

static braid_status_t hip_rtc_fail(hiprtcProgram prog, hiprtcResult r, const char *call,
                                   const char *arch)
{
    size_t n = 0;
    char *log = NULL;
    if (prog != NULL && hip.hiprtcGetProgramLogSize(prog, &n) == HIPRTC_SUCCESS && n > 0 &&
        (log = calloc(1, n + 1)) != NULL && hip.hiprtcGetProgramLog(prog, log) != HIPRTC_SUCCESS)
        log[0] = '\0';
    braid_status_t st = braid_err(BRAID_ERR_DEVICE, "HIP: %s for %s failed: %s (%d)%s%.600s",
                                  call, arch, hip.hiprtcGetErrorString(r), r,
                                  log != NULL && log[0] != '\0' ? "; hiprtc says: " : "",
                                  log != NULL ? log : "");
    free(log);
    return st;
}

/* Compile `source` into a code object for `arch`; *image_p is malloc'd (free() it). */
static braid_status_t hip_rtc_build(const char *source, const char *arch, void **image_p,
                                    size_t *size_p)
{
    hiprtcProgram prog = NULL;
    char opt_arch[sizeof("--offload-arch=") + HIP_PROP_ARCH_BYTES];
    const char *opts[] = { opt_arch, "-O3" };
    size_t size = 0;
    void *image = NULL;
    braid_status_t st = BRAID_OK;
    snprintf(opt_arch, sizeof(opt_arch), "--offload-arch=%s", arch);
    hiprtcResult r = hip.hiprtcCreateProgram(&prog, source, "braid_kernels.hip", 0, NULL, NULL);
    if (r != HIPRTC_SUCCESS)
        return hip_rtc_fail(NULL, r, "hiprtcCreateProgram", arch);
    if ((r = hip.hiprtcCompileProgram(prog, 2, opts)) != HIPRTC_SUCCESS) {
        st = hip_rtc_fail(prog, r, "hiprtcCompileProgram", arch);
        goto out_destroy;
    }
    if ((r = hip.hiprtcGetCodeSize(prog, &size)) != HIPRTC_SUCCESS || size == 0) {
        st = hip_rtc_fail(prog, r, "hiprtcGetCodeSize", arch);
        goto out_destroy;
    }
    if ((image = malloc(size)) == NULL) {
        st = braid_err(BRAID_ERR_NOMEM, "HIP: no memory for a %zu-byte code object", size);
        goto out_destroy;
    }
    if ((r = hip.hiprtcGetCode(prog, image)) != HIPRTC_SUCCESS) {
        st = hip_rtc_fail(prog, r, "hiprtcGetCode", arch);
        free(image);
        goto out_destroy;
    }
    *image_p = image;
    *size_p = size;
out_destroy:
    hip.hiprtcDestroyProgram(&prog);
    return st;
}

static braid_status_t hip_compile(const char *source, void **image_p, size_t *size_p)
{
    char arch[HIP_PROP_ARCH_BYTES];
    braid_status_t st;
    if (hip_lib == NULL)
        return braid_err(BRAID_ERR_USAGE, "HIP: compile before the backend's init");
    BRAID_CHECK(hip_compile_arch(arch, sizeof(arch)));
    pthread_mutex_lock(&hip_lock);
    st = hip_rtc_load();
    pthread_mutex_unlock(&hip_lock);
    BRAID_CHECK(st);
    BRAID_CHECK(hip_comgr_check(arch));
    return hip_rtc_build(source, arch, image_p, size_p);
}

void braid_device_hip_test_arch(const char *arch)
{
    pthread_mutex_lock(&hip_lock);
    snprintf(hip_test_arch, sizeof(hip_test_arch), "%s", arch != NULL ? arch : "");
    pthread_mutex_unlock(&hip_lock);
}

const braid_device_ops_t braid_device_hip = {
    .name = "hip",
    .present = hip_present,
    .init = hip_init,
    .ptr_info = hip_ptr_info,
    .bind = hip_bind,
    .current = hip_current,
    .ctx_get = hip_ctx_get,
    .ctx_set = hip_ctx_set,
    .describe = hip_describe,
    .mem_alloc = hip_mem_alloc,
    .mem_free = hip_mem_free,
    .host_alloc = hip_host_alloc,
    .host_free = hip_host_free,
    .host_register = hip_host_register,
    .host_unregister = hip_host_unregister,
    .copy_async = hip_copy_async,
    .memset_async = hip_memset_async,
    .stream_create = hip_stream_create,
    .stream_destroy = hip_stream_destroy,
    .stream_sync = hip_stream_sync,
    .stream_capturing = hip_stream_capturing,
    .event_create = hip_event_create,
    .event_destroy = hip_event_destroy,
    .event_record = hip_event_record,
    .event_query = hip_event_query,
    .stream_wait_event = hip_stream_wait_event,
    .stream_wait_word = hip_stream_wait_word,
    .stream_write_word = hip_stream_write_word,
    .stream_mem_ops = hip_stream_mem_ops,
    .peer_access = hip_peer_access,
    .peer_enable = hip_peer_enable,
    .ipc_get = hip_ipc_get,
    .ipc_open = hip_ipc_open,
    .ipc_close = hip_ipc_close,
    .module_load = hip_module_load,
    .module_function = hip_module_function,
    .launch = hip_launch,
    .compile = hip_compile,
};
