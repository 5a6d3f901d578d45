/*
 * The emulated HIP runtime's face: libamdhip64.so.5 (EMU_HIP_MAJOR 5, ROCm 5.2's ABI),
 * libamdhip64.so.6 (6: ROCm 6.2's) or libamdhip64.so.7 (7: ROCm 7.0's), over the same
 * engine as the emulated CUDA driver (emu_cuda.c): its devices, memory, streams, events,
 * IPC and kernels. What a HIP program and braid's HIP backend (src/device/hip.c) call is
 * here; nothing else.
 *
 * Where the releases differ, each library presents its own:
 *   - hipRuntimeGetVersion: 5.2, 6.2 or 7.0;
 *   - hipPointerGetAttributes' memory types (hipMemoryTypeDevice is 1 in 5.x, 2 from 6.0);
 *     memory the runtime does not know is hipErrorInvalidValue in 5.x and 6.x, success with
 *     hipMemoryTypeUnregistered (0) from 7.0;
 *   - hipDeviceProp_t: the 5.x layout from hipGetDeviceProperties (.so.5), the 6.x one from
 *     hipGetDevicePropertiesR0600 and the 5.x one from hipGetDevicePropertiesR0000 (.so.6,
 *     .so.7);
 *   - hipIpcOpenMemHandle's one flag: 0 in 5.x, 0x1 from 6.0; any other value is
 *     hipErrorInvalidValue, as each release answers;
 *   - hipGetLastError: the result of the thread's last call in 5.x and 6.x, its last error
 *     (a success does not clear it) from 7.0; either way reading it clears it.
 * In every release hipStreamWaitValue32 compares the word under its mask as a plain number,
 * not wrapping as CUDA does.
 *
 * Devices: BRAID_EMU_DEVICES of them (emu.c), each an AMD GPU whose gcnArchName is
 * BRAID_EMU_HIP_ARCH (default gfx90a:sramecc+:xnack-). HIP initialises on the first call;
 * a thread's current device is 0 until hipSetDevice (its primary context, emu.c).
 *
 * Code objects: hipModuleLoadData takes a clang offload bundle (hipcc --genco) with an
 * entry for the device's processor, or an AMDGPU code object (ELF, hiprtc's output) built
 * for it; then the module's kernels are the host build of kernels/gpu (emu_module.c),
 * whatever the code object holds, all loaded at once (HIP loads no function lazily). A bundle without the device's processor is
 * hipErrorNoBinaryForGpu; anything else hipErrorInvalidImage. So braid's choice of image,
 * and the error where none fits, are tested as on a GPU. hiprtc: emu_hiprtc.c (ROCm 5's
 * library only, as in ROCm).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/hip_abi.h"
#include "emu/emu_int.h"
#include "kernels/gpu/kargs.h"

#ifndef EMU_HIP_MAJOR
#error "EMU_HIP_MAJOR (5, 6 or 7) names the ROCm release this library presents"
#endif

/* 5.2.0, 6.2.0 or 7.0.0 */
#define EMU_HIP_VERSION (EMU_HIP_MAJOR * 10000000 + (EMU_HIP_MAJOR < 7 ? 2 : 0) * 100000)
#define EMU_HIP_ARCH_DEFAULT "gfx90a:sramecc+:xnack-"

/* hipError_t values the emulator answers beyond hip_abi.h's (the HIP headers' values, the
 * same numbers as the CUDA driver's errors: the engine's codes pass through). */
enum {
    emu_hipErrorNotInitialized = 3,
    emu_hipErrorInvalidContext = 201,
    emu_hipErrorInvalidResourceHandle = 400,
    emu_hipErrorNotSupported = 801,
};

/* HIP's flags, as its headers give them */
#define EMU_HIP_HOST_MALLOC_FLAGS 0xe000000fu    /* portable, mapped, write-combined,
                                                  * numa-user, coherent, non-coherent */
#define EMU_HIP_HOST_REGISTER_FLAGS 0xfu         /* portable, mapped, io, coarse-grained */
#define EMU_HIP_EVENT_FLAGS 0x7u                 /* blocking sync, no timing, interprocess */

static struct {
    pthread_once_t once;
    hipError_t status;               /* of the first cuInit */
    char arch[HIP_PROP_ARCH_BYTES];  /* gcnArchName */
    pthread_mutex_t lock;            /* retained */
    uint64_t retained;               /* bit d: device d's primary context is retained */
} hip = { .once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER };

static __thread hipError_t hip_last;   /* hipGetLastError's */

static hipError_t ret(hipError_t r)
{
    if (EMU_HIP_MAJOR < 7 || r != hipSuccess)
        hip_last = r;
    return r;
}

static hipError_t ret_cu(CUresult r)
{
    return ret(r == CUDA_ERROR_NOT_PERMITTED ? emu_hipErrorNotSupported : (hipError_t)r);
}

/* BRAID_EMU_HIP_ARCH: "gfx" and a processor, then features ":sramecc+" and so on. */
static void arch_read(void)
{
    const char *v = getenv("BRAID_EMU_HIP_ARCH");
    snprintf(hip.arch, sizeof(hip.arch), "%s", EMU_HIP_ARCH_DEFAULT);
    if (v == NULL || *v == '\0')
        return;
    if (strncmp(v, "gfx", 3) != 0 || strlen(v) < 4 || strlen(v) >= sizeof(hip.arch)) {
        emu_warn("BRAID_EMU_HIP_ARCH=%s is not an arch name such as gfx90a: using %s", v,
                 EMU_HIP_ARCH_DEFAULT);
        return;
    }
    snprintf(hip.arch, sizeof(hip.arch), "%s", v);
}

static void hip_init_once(void)
{
    arch_read();
    hip.status = (hipError_t)emu_cuInit(0);
}

static hipError_t retain(int dev)
{
    CUcontext c;
    hipError_t r = hipSuccess;
    pthread_mutex_lock(&hip.lock);
    if (!(hip.retained >> dev & 1)) {
        r = (hipError_t)emu_cuDevicePrimaryCtxRetain(&c, dev);
        if (r == hipSuccess)
            hip.retained |= 1ull << dev;
    }
    pthread_mutex_unlock(&hip.lock);
    return r;
}

/* Every call: the runtime initialised, and the thread on a device (0 at first). */
static hipError_t enter(void)
{
    CUcontext c = NULL;
    pthread_once(&hip.once, hip_init_once);
    if (hip.status != hipSuccess)
        return hip.status;
    if (emu_cuCtxGetCurrent(&c) == CUDA_SUCCESS && c != NULL)
        return hipSuccess;
    hipError_t r = retain(0);
    return r != hipSuccess ? r : (hipError_t)emu_cuCtxSetCurrent(emu_device_ctx(0));
}

#define ENTER()                              \
    do {                                     \
        hipError_t _r = enter();             \
        if (_r != hipSuccess)                \
            return ret(_r);                  \
    } while (0)

static CUdevice current_device(void)
{
    CUdevice d = 0;
    (void)emu_cuCtxGetDevice(&d);
    return d;
}

/* ---- the runtime, devices ---------------------------------------------------------------- */

EMU_API hipError_t hipInit(unsigned int flags)
{
    if (flags != 0)
        return ret(hipErrorInvalidValue);
    ENTER();
    return ret(hipSuccess);
}

EMU_API hipError_t hipRuntimeGetVersion(int *version)
{
    if (version == NULL)
        return ret(hipErrorInvalidValue);
    *version = EMU_HIP_VERSION;
    return ret(hipSuccess);
}

EMU_API hipError_t hipDriverGetVersion(int *version)
{
    return hipRuntimeGetVersion(version);
}

EMU_API hipError_t hipGetDeviceCount(int *count)
{
    if (count == NULL)
        return ret(hipErrorInvalidValue);
    ENTER();
    return ret_cu(emu_cuDeviceGetCount(count));
}

EMU_API hipError_t hipSetDevice(int ordinal)
{
    ENTER();
    hipError_t r = (hipError_t)emu_device_check(ordinal);
    if (r == hipSuccess)
        r = retain(ordinal);
    if (r == hipSuccess)
        r = (hipError_t)emu_cuCtxSetCurrent(emu_device_ctx(ordinal));
    return ret(r);
}

EMU_API hipError_t hipGetDevice(int *ordinal)
{
    if (ordinal == NULL)
        return ret(hipErrorInvalidValue);
    ENTER();
    *ordinal = current_device();
    return ret(hipSuccess);
}

EMU_API hipError_t hipDeviceGet(hipDevice_t *dev, int ordinal)
{
    ENTER();
    return ret_cu(emu_cuDeviceGet(dev, ordinal));
}

EMU_API hipError_t hipDeviceGetName(char *name, int len, hipDevice_t dev)
{
    ENTER();
    return ret_cu(emu_cuDeviceGetName(name, len, dev));
}

EMU_API hipError_t hipDeviceTotalMem(size_t *bytes, hipDevice_t dev)
{
    ENTER();
    return ret_cu(emu_cuDeviceTotalMem(bytes, dev));
}

EMU_API hipError_t hipDeviceGetPCIBusId(char *bus_id, int len, int ordinal)
{
    ENTER();
    return ret_cu(emu_cuDeviceGetPCIBusId(bus_id, len, ordinal));
}

/* HIP's hipDeviceAttribute_t values (ROCm 5.2's headers; the same in 6.x for these) and
 * the CUDA driver attribute the engine answers them with. */
static const struct {
    int hip, cu;
} emu_hip_attrs[] = {
    { 3, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY },
    { 23, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR },
    { 56, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK },
    { 61, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR },
    { hipDeviceAttributeMultiprocessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT },
    { 67, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID },
    { 68, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID },
    { 69, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID },
    { 74, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK },
    { 85, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING },
};

/* An AMD GPU of gfx9: compute capability 9.0, wavefronts of 64. */
EMU_API hipError_t hipDeviceGetAttribute(int *value, int attr, int ordinal)
{
    ENTER();
    if (value == NULL)
        return ret(hipErrorInvalidValue);
    if (attr == 87) {                     /* hipDeviceAttributeWarpSize */
        *value = 64;
        return ret((hipError_t)emu_device_check(ordinal));
    }
    for (size_t i = 0; i < sizeof(emu_hip_attrs) / sizeof(emu_hip_attrs[0]); i++) {
        if (emu_hip_attrs[i].hip != attr)
            continue;
        hipError_t r = (hipError_t)emu_cuDeviceGetAttribute(value, emu_hip_attrs[i].cu, ordinal);
        if (r == hipSuccess && attr == 23)
            *value = 9;
        return ret(r);
    }
    return ret(hipErrorInvalidValue);
}

/* ---- hipDeviceProp_t --------------------------------------------------------------------- */

/* Where the fields the emulator fills sit in a layout (ROCm's headers: the 5.x struct, kept
 * as hipDeviceProp_tR0000, and 6.x's hipDeviceProp_tR0600), and how many bytes it has at
 * least (the end of gcnArchName): what is zeroed. */
typedef struct emu_prop_layout {
    size_t total_mem, warp_size, max_threads, major, minor, mps, arch, bytes;
} emu_prop_layout_t;

static const emu_prop_layout_t emu_props_r0000 = { 256, 276, 280, 328, 332, 336,
                                                   HIP_PROP_ARCH_OFFSET_R0000, 792 };
static void put_int(unsigned char *p, size_t off, int v)
{
    memcpy(p + off, &v, sizeof(v));
}

static hipError_t props_fill(void *props, int ordinal, const emu_prop_layout_t *l)
{
    unsigned char *p = props;
    size_t mem = 0;
    int mps = 0;
    ENTER();
    if (props == NULL)
        return ret(hipErrorInvalidValue);
    hipError_t r = (hipError_t)emu_cuDeviceTotalMem(&mem, ordinal);
    if (r == hipSuccess)
        r = (hipError_t)emu_cuDeviceGetAttribute(&mps, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                                 ordinal);
    if (r != hipSuccess)
        return ret(r);
    memset(p, 0, l->bytes);
    (void)emu_cuDeviceGetName((char *)p, 256, ordinal);
    memcpy(p + l->total_mem, &mem, sizeof(mem));
    put_int(p, l->warp_size, 64);
    put_int(p, l->max_threads, 1024);
    put_int(p, l->major, 9);
    put_int(p, l->minor, 0);
    put_int(p, l->mps, mps);
    snprintf((char *)p + l->arch, HIP_PROP_ARCH_BYTES, "%s", hip.arch);
    return ret(hipSuccess);
}

#if EMU_HIP_MAJOR < 6
EMU_API hipError_t hipGetDeviceProperties(void *props, int ordinal)
{
    return props_fill(props, ordinal, &emu_props_r0000);
}
#else
static const emu_prop_layout_t emu_props_r0600 = { 288, 308, 320, 360, 364, 388,
                                                   HIP_PROP_ARCH_OFFSET_R0600,
                                                   HIP_PROP_ARCH_OFFSET_R0600 +
                                                       HIP_PROP_ARCH_BYTES };

EMU_API hipError_t hipGetDevicePropertiesR0000(void *props, int ordinal)
{
    return props_fill(props, ordinal, &emu_props_r0000);
}

EMU_API hipError_t hipGetDevicePropertiesR0600(void *props, int ordinal)
{
    return props_fill(props, ordinal, &emu_props_r0600);
}
#endif

/* ---- errors ------------------------------------------------------------------------------ */

EMU_API hipError_t hipGetLastError(void)
{
    hipError_t r = hip_last;
    hip_last = hipSuccess;
    return r;
}

EMU_API hipError_t hipPeekAtLastError(void)
{
    return hip_last;
}

EMU_API const char *hipGetErrorString(hipError_t err)
{
    const char *s = NULL;
    if (emu_cuGetErrorString(err == emu_hipErrorNotSupported ? CUDA_ERROR_NOT_SUPPORTED : err,
                             &s) != CUDA_SUCCESS || s == NULL)
        return "unknown error";
    return s;
}

EMU_API const char *hipGetErrorName(hipError_t err)
{
    static const struct {
        hipError_t code;
        const char *name;
    } names[] = {
        { hipSuccess, "hipSuccess" },
        { hipErrorInvalidValue, "hipErrorInvalidValue" },
        { hipErrorOutOfMemory, "hipErrorOutOfMemory" },
        { emu_hipErrorNotInitialized, "hipErrorNotInitialized" },
        { hipErrorNoDevice, "hipErrorNoDevice" },
        { hipErrorInvalidDevice, "hipErrorInvalidDevice" },
        { hipErrorInvalidImage, "hipErrorInvalidImage" },
        { emu_hipErrorInvalidContext, "hipErrorInvalidContext" },
        { hipErrorNoBinaryForGpu, "hipErrorNoBinaryForGpu" },
        { emu_hipErrorInvalidResourceHandle, "hipErrorInvalidResourceHandle" },
        { hipErrorNotReady, "hipErrorNotReady" },
        { hipErrorPeerAccessAlreadyEnabled, "hipErrorPeerAccessAlreadyEnabled" },
        { emu_hipErrorNotSupported, "hipErrorNotSupported" },
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].code == err)
            return names[i].name;
    return "hipErrorUnknown";
}

/* ---- memory ------------------------------------------------------------------------------ */

EMU_API hipError_t hipMalloc(void **p, size_t bytes)
{
    CUdeviceptr d = 0;
    ENTER();
    if (p == NULL)
        return ret(hipErrorInvalidValue);
    if (bytes == 0) {                      /* HIP: success, and NULL */
        *p = NULL;
        return ret(hipSuccess);
    }
    CUresult r = emu_cuMemAlloc(&d, bytes);
    *p = r == CUDA_SUCCESS ? (void *)(uintptr_t)d : NULL;
    return ret_cu(r);
}

EMU_API hipError_t hipFree(void *p)
{
    ENTER();
    return ret_cu(p == NULL ? CUDA_SUCCESS : emu_cuMemFree((CUdeviceptr)(uintptr_t)p));
}

EMU_API hipError_t hipHostMalloc(void **p, size_t bytes, unsigned int flags)
{
    ENTER();
    if (p == NULL || (flags & ~EMU_HIP_HOST_MALLOC_FLAGS) != 0)
        return ret(hipErrorInvalidValue);
    /* HIP's host memory is always mapped and portable */
    return ret_cu(emu_cuMemHostAlloc(p, bytes, CU_MEMHOSTALLOC_PORTABLE |
                                                   CU_MEMHOSTALLOC_DEVICEMAP));
}

EMU_API hipError_t hipHostFree(void *p)
{
    ENTER();
    return ret_cu(p == NULL ? CUDA_SUCCESS : emu_cuMemFreeHost(p));
}

EMU_API hipError_t hipHostGetDevicePointer(void **dev_p, void *host, unsigned int flags)
{
    CUdeviceptr d = 0;
    ENTER();
    if (dev_p == NULL)
        return ret(hipErrorInvalidValue);
    CUresult r = emu_cuMemHostGetDevicePointer(&d, host, flags);
    *dev_p = (void *)(uintptr_t)d;
    return ret_cu(r);
}

EMU_API hipError_t hipHostRegister(void *p, size_t bytes, unsigned int flags)
{
    ENTER();
    if ((flags & ~EMU_HIP_HOST_REGISTER_FLAGS) != 0)
        return ret(hipErrorInvalidValue);
    return ret_cu(emu_cuMemHostRegister(p, bytes, CU_MEMHOSTREGISTER_PORTABLE |
                                                      CU_MEMHOSTREGISTER_DEVICEMAP));
}

EMU_API hipError_t hipHostUnregister(void *p)
{
    ENTER();
    return ret_cu(emu_cuMemHostUnregister(p));
}

EMU_API hipError_t hipPointerGetAttributes(hipPointerAttribute_t *attr, const void *p)
{
    emu_alloc_t a;
    ENTER();
    if (attr == NULL || p == NULL)
        return ret(hipErrorInvalidValue);
    if (!emu_mem_lookup((CUdeviceptr)(uintptr_t)p, &a)) {
        if (EMU_HIP_MAJOR < 7)
            return ret(hipErrorInvalidValue);
        memset(attr, 0, sizeof(*attr));      /* hipMemoryTypeUnregistered */
        attr->device = -1;
        return ret(hipSuccess);
    }
    int device = a.kind == EMU_MEM_DEVICE || a.kind == EMU_MEM_IPC;
    memset(attr, 0, sizeof(*attr));
    attr->device = a.dev;
    if (device) {
        attr->type = EMU_HIP_MAJOR >= 6 ? hipMemoryTypeDevice_r6 : hipMemoryTypeDevice_r5;
        attr->devicePointer = (void *)p;
        return ret(hipSuccess);
    }
    CUdeviceptr d = 0;
    attr->type = EMU_HIP_MAJOR >= 6 ? hipMemoryTypeHost_r6 : hipMemoryTypeHost_r5;
    attr->hostPointer = (void *)p;
    if (emu_cuMemHostGetDevicePointer(&d, (void *)p, 0) == CUDA_SUCCESS)
        attr->devicePointer = (void *)(uintptr_t)d;
    return ret(hipSuccess);
}

static int memcpy_kind_ok(int kind)
{
    return kind >= 0 && kind <= hipMemcpyDefault;   /* host to host ... default */
}

EMU_API hipError_t hipMemcpyAsync(void *dst, const void *src, size_t bytes, int kind,
                                  hipStream_t stream)
{
    ENTER();
    if (!memcpy_kind_ok(kind))
        return ret(hipErrorInvalidValue);
    return ret_cu(emu_cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src,
                                    bytes, (CUstream)stream));
}

EMU_API hipError_t hipMemcpy(void *dst, const void *src, size_t bytes, int kind)
{
    ENTER();
    if (!memcpy_kind_ok(kind))
        return ret(hipErrorInvalidValue);
    return ret_cu(emu_cuMemcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src,
                               bytes));
}

EMU_API hipError_t hipMemsetAsync(void *dst, int value, size_t bytes, hipStream_t stream)
{
    ENTER();
    return ret_cu(emu_cuMemsetD8Async((CUdeviceptr)(uintptr_t)dst, (unsigned char)value, bytes,
                                      (CUstream)stream));
}

EMU_API hipError_t hipMemset(void *dst, int value, size_t bytes)
{
    ENTER();
    return ret_cu(emu_cuMemsetD8((CUdeviceptr)(uintptr_t)dst, (unsigned char)value, bytes));
}

EMU_API hipError_t hipMemsetD32Async(void *dst, int value, size_t count, hipStream_t stream)
{
    ENTER();
    return ret_cu(emu_cuMemsetD32Async((CUdeviceptr)(uintptr_t)dst, (unsigned int)value, count,
                                       (CUstream)stream));
}

/* ---- streams and events ------------------------------------------------------------------ */

EMU_API hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags)
{
    ENTER();
    if (stream == NULL || (flags & ~(unsigned int)hipStreamNonBlocking) != 0)
        return ret(hipErrorInvalidValue);
    return ret_cu(emu_cuStreamCreate((CUstream *)stream, flags));
}

EMU_API hipError_t hipStreamCreate(hipStream_t *stream)
{
    return hipStreamCreateWithFlags(stream, 0);
}

EMU_API hipError_t hipStreamDestroy(hipStream_t stream)
{
    ENTER();
    if (stream == NULL)
        return ret(emu_hipErrorInvalidResourceHandle);
    return ret_cu(emu_cuStreamDestroy((CUstream)stream));
}

EMU_API hipError_t hipStreamSynchronize(hipStream_t stream)
{
    ENTER();
    return ret_cu(emu_cuStreamSynchronize((CUstream)stream));
}

EMU_API hipError_t hipStreamQuery(hipStream_t stream)
{
    ENTER();
    return ret_cu(emu_cuStreamQuery((CUstream)stream));
}

EMU_API hipError_t hipDeviceSynchronize(void)
{
    ENTER();
    return ret_cu(emu_cuCtxSynchronize());
}

EMU_API hipError_t hipStreamIsCapturing(hipStream_t stream, int *status)
{
    ENTER();
    return ret_cu(emu_cuStreamIsCapturing((CUstream)stream, status));
}

EMU_API hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t ev, unsigned int flags)
{
    ENTER();
    return ret_cu(emu_cuStreamWaitEvent((CUstream)stream, (CUevent)ev, flags));
}

static hipError_t wait_value(hipStream_t stream, void *p, uint64_t value, unsigned int flags,
                             uint64_t mask, int wide, const char *call)
{
    ENTER();
    return ret_cu(emu_stream_wait_masked((CUstream)stream, (CUdeviceptr)(uintptr_t)p, value,
                                         mask, wide, flags, call));
}

EMU_API hipError_t hipStreamWaitValue32(hipStream_t stream, void *p, uint32_t value,
                                        unsigned int flags, uint32_t mask)
{
    return wait_value(stream, p, value, flags, mask, 0, "hipStreamWaitValue32");
}

EMU_API hipError_t hipStreamWaitValue64(hipStream_t stream, void *p, uint64_t value,
                                        unsigned int flags, uint64_t mask)
{
    return wait_value(stream, p, value, flags, mask, 1, "hipStreamWaitValue64");
}

EMU_API hipError_t hipStreamWriteValue32(hipStream_t stream, void *p, uint32_t value,
                                         unsigned int flags)
{
    ENTER();
    if (flags != 0)
        return ret(hipErrorInvalidValue);
    return ret_cu(emu_cuStreamWriteValue32((CUstream)stream, (CUdeviceptr)(uintptr_t)p, value,
                                           0));
}

EMU_API hipError_t hipStreamWriteValue64(hipStream_t stream, void *p, uint64_t value,
                                         unsigned int flags)
{
    ENTER();
    if (flags != 0)
        return ret(hipErrorInvalidValue);
    CUstreamBatchMemOpParams op = { .writeValue = {
                                        .operation = CU_STREAM_MEM_OP_WRITE_VALUE_64,
                                        .address = (CUdeviceptr)(uintptr_t)p,
                                        .value64 = value } };
    return ret_cu(emu_cuStreamBatchMemOp((CUstream)stream, 1, &op, 0));
}

EMU_API hipError_t hipEventCreateWithFlags(hipEvent_t *ev, unsigned int flags)
{
    ENTER();
    if ((flags & ~EMU_HIP_EVENT_FLAGS) != 0)
        return ret(hipErrorInvalidValue);
    return ret_cu(emu_cuEventCreate((CUevent *)ev, flags));   /* CUDA's values */
}

EMU_API hipError_t hipEventCreate(hipEvent_t *ev)
{
    return hipEventCreateWithFlags(ev, 0);
}

EMU_API hipError_t hipEventDestroy(hipEvent_t ev)
{
    ENTER();
    return ret_cu(emu_cuEventDestroy((CUevent)ev));
}

EMU_API hipError_t hipEventRecord(hipEvent_t ev, hipStream_t stream)
{
    ENTER();
    return ret_cu(emu_cuEventRecord((CUevent)ev, (CUstream)stream));
}

EMU_API hipError_t hipEventQuery(hipEvent_t ev)
{
    ENTER();
    return ret_cu(emu_cuEventQuery((CUevent)ev));
}

EMU_API hipError_t hipEventSynchronize(hipEvent_t ev)
{
    ENTER();
    return ret_cu(emu_cuEventSynchronize((CUevent)ev));
}

EMU_API hipError_t hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t end)
{
    ENTER();
    return ret_cu(emu_cuEventElapsedTime(ms, (CUevent)start, (CUevent)end));
}

/* ---- peers and IPC ----------------------------------------------------------------------- */

EMU_API hipError_t hipDeviceCanAccessPeer(int *can, int ordinal, int peer)
{
    ENTER();
    return ret_cu(emu_cuDeviceCanAccessPeer(can, ordinal, peer));
}

/* The current device's access to peer's memory: peer's primary context, retained. */
EMU_API hipError_t hipDeviceEnablePeerAccess(int peer, unsigned int flags)
{
    ENTER();
    hipError_t r = (hipError_t)emu_device_check(peer);
    if (r == hipSuccess)
        r = retain(peer);
    return r != hipSuccess ? ret(r) : ret_cu(emu_cuCtxEnablePeerAccess(emu_device_ctx(peer),
                                                                         flags));
}

EMU_API hipError_t hipDeviceDisablePeerAccess(int peer)
{
    ENTER();
    hipError_t r = (hipError_t)emu_device_check(peer);
    return r != hipSuccess ? ret(r) : ret_cu(emu_cuCtxDisablePeerAccess(emu_device_ctx(peer)));
}

EMU_API hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t *h, void *p)
{
    CUipcMemHandle ch;
    ENTER();
    if (h == NULL)
        return ret(hipErrorInvalidValue);
    CUresult r = emu_cuIpcGetMemHandle(&ch, (CUdeviceptr)(uintptr_t)p);
    if (r == CUDA_SUCCESS)
        memcpy(h->reserved, ch.reserved, sizeof(h->reserved));
    return ret_cu(r);
}

EMU_API hipError_t hipIpcOpenMemHandle(void **p, hipIpcMemHandle_t h, unsigned int flags)
{
    CUipcMemHandle ch;
    CUdeviceptr d = 0;
    const unsigned int lazy = EMU_HIP_MAJOR >= 6 ? hipIpcMemLazyEnablePeerAccess_r6
                                                 : hipIpcMemLazyEnablePeerAccess_r5;
    ENTER();
    if (p == NULL || flags != lazy)
        return ret(hipErrorInvalidValue);
    memcpy(ch.reserved, h.reserved, sizeof(ch.reserved));
    CUresult r = emu_cuIpcOpenMemHandle(&d, ch, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    *p = (void *)(uintptr_t)d;
    return ret_cu(r);
}

EMU_API hipError_t hipIpcCloseMemHandle(void *p)
{
    ENTER();
    return ret_cu(emu_cuIpcCloseMemHandle((CUdeviceptr)(uintptr_t)p));
}

/* ---- code objects, modules, launches ----------------------------------------------------- */

#define EMU_BUNDLE_MAGIC "__CLANG_OFFLOAD_BUNDLE__"
#define EMU_BUNDLE_MAX_ENTRIES 64
#define EMU_BUNDLE_MAX_TRIPLE 256
#define EMU_EM_AMDGPU 224
#define EMU_ELFOSABI_AMDGPU_HSA 64
#define EMU_EF_AMDGPU_MACH 0xffu

/* The processors the emulator can tell in a code object's ELF header (its e_flags' mach
 * field, as LLVM's AMDGPU ELF definitions give it). */
static const struct {
    const char *name;
    unsigned int mach;
} emu_machs[] = {
    { "gfx906", 0x2f }, { "gfx908", 0x30 }, { "gfx90a", 0x3f }, { "gfx940", 0x40 },
    { "gfx941", 0x4b }, { "gfx942", 0x4c }, { "gfx1030", 0x36 }, { "gfx1100", 0x41 },
};

/* Is ":feature" (n bytes) one of the device's arch's features? */
static int arch_has(const char *feature, size_t n)
{
    for (const char *a = strchr(hip.arch, ':'); a != NULL; a = strchr(a + 1, ':'))
        if (strncmp(a, feature, n) == 0 && (a[n] == ':' || a[n] == '\0'))
            return 1;
    return 0;
}

/* Does a bundle's target (len bytes: "gfx90a", "gfx90a:xnack-") run on the device's arch
 * ("gfx90a:sramecc+:xnack-")? The same processor, and each feature the target names set
 * the same way on the device. */
static int target_fits(const char *target, size_t len)
{
    size_t proc = strcspn(hip.arch, ":"), tproc = strcspn(target, ":");
    if (tproc > len)
        tproc = len;
    if (tproc != proc || strncmp(target, hip.arch, proc) != 0)
        return 0;
    for (size_t i = tproc; i < len;) {
        size_t n = 1 + strcspn(target + i + 1, ":");    /* ":feature" */
        if (i + n > len)
            n = len - i;
        if (!arch_has(target + i, n))
            return 0;
        i += n;
    }
    return 1;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static hipError_t bundle_check(const unsigned char *img)
{
    static const char *const kinds[] = { "hipv4-amdgcn-amd-amdhsa--", "hip-amdgcn-amd-amdhsa--" };
    uint64_t n = get64(img + strlen(EMU_BUNDLE_MAGIC));
    const unsigned char *e = img + strlen(EMU_BUNDLE_MAGIC) + 8;
    if (n == 0 || n > EMU_BUNDLE_MAX_ENTRIES)
        return hipErrorInvalidImage;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t size = get64(e + 8), len = get64(e + 16);
        const char *triple = (const char *)e + 24;
        if (len > EMU_BUNDLE_MAX_TRIPLE)
            return hipErrorInvalidImage;
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
            size_t kl = strlen(kinds[k]);
            if (size > 0 && len > kl && strncmp(triple, kinds[k], kl) == 0 &&
                target_fits(triple + kl, (size_t)len - kl))
                return hipSuccess;
        }
        e += 24 + len;
    }
    return hipErrorNoBinaryForGpu;
}

static hipError_t elf_check(const unsigned char *img)
{
    uint16_t machine;
    uint32_t flags;
    memcpy(&machine, img + 18, sizeof(machine));
    memcpy(&flags, img + 48, sizeof(flags));
    if (img[4] != 2 || machine != EMU_EM_AMDGPU || img[7] != EMU_ELFOSABI_AMDGPU_HSA)
        return hipErrorInvalidImage;      /* not a 64-bit AMDGPU HSA code object */
    size_t proc = strcspn(hip.arch, ":");
    for (size_t i = 0; i < sizeof(emu_machs) / sizeof(emu_machs[0]); i++)
        if (strlen(emu_machs[i].name) == proc && strncmp(emu_machs[i].name, hip.arch, proc) == 0)
            return (flags & EMU_EF_AMDGPU_MACH) == emu_machs[i].mach ? hipSuccess
                                                                    : hipErrorNoBinaryForGpu;
    return hipErrorNoBinaryForGpu;
}

/* Does the image start with magic? Reads no further than the first byte that differs (the
 * image's size is not given: a short one must not be read past its end). */
static int starts_with(const unsigned char *img, const char *magic)
{
    size_t i = 0;
    while (magic[i] != '\0' && img[i] == (unsigned char)magic[i])
        i++;
    return magic[i] == '\0';
}

EMU_API hipError_t hipModuleLoadData(hipModule_t *mod, const void *image)
{
    const unsigned char *img = image;
    hipError_t r;
    ENTER();
    if (mod == NULL || image == NULL)
        return ret(hipErrorInvalidValue);
    if (starts_with(img, EMU_BUNDLE_MAGIC))
        r = bundle_check(img);
    else if (starts_with(img, "\x7f" "ELF"))
        r = elf_check(img);
    else
        r = hipErrorInvalidImage;
    if (r != hipSuccess)
        return ret(r);
    return ret_cu(emu_module_load_whole((CUmodule *)mod, BRAID_EMU_IMAGE_MAGIC,
                                        "hipModuleLoadData"));
}

EMU_API hipError_t hipModuleUnload(hipModule_t mod)
{
    ENTER();
    return ret_cu(emu_cuModuleUnload((CUmodule)mod));
}

EMU_API hipError_t hipModuleGetFunction(hipFunction_t *fn, hipModule_t mod, const char *name)
{
    ENTER();
    return ret_cu(emu_cuModuleGetFunction((CUfunction *)fn, (CUmodule)mod, name));
}

/* The parameters as `extra` gives them: HIP_LAUNCH_PARAM_BUFFER_POINTER and _SIZE, each
 * followed by its value, up to HIP_LAUNCH_PARAM_END. */
static hipError_t extra_unpack(hipFunction_t fn, void **extra, void **params)
{
    void *buf = NULL;
    size_t *size = NULL;
    for (int i = 0; extra[i] != HIP_LAUNCH_PARAM_END; i += 2) {
        if (i >= 8)
            return hipErrorInvalidValue;
        if (extra[i] == HIP_LAUNCH_PARAM_BUFFER_POINTER)
            buf = extra[i + 1];
        else if (extra[i] == HIP_LAUNCH_PARAM_BUFFER_SIZE)
            size = extra[i + 1];
        else
            return hipErrorInvalidValue;
    }
    if (size == NULL)
        return hipErrorInvalidValue;
    return (hipError_t)emu_launch_unpack((CUfunction)fn, buf, *size, params);
}

EMU_API hipError_t hipModuleLaunchKernel(hipFunction_t fn, unsigned int gx, unsigned int gy,
                                         unsigned int gz, unsigned int bx, unsigned int by,
                                         unsigned int bz, unsigned int shmem,
                                         hipStream_t stream, void **params, void **extra)
{
    void *unpacked[BRAID_EMU_MAX_PARAMS];
    ENTER();
    if (extra != NULL) {
        hipError_t r = params == NULL ? extra_unpack(fn, extra, unpacked) : hipErrorInvalidValue;
        if (r != hipSuccess)
            return ret(r);
        params = unpacked;
    }
    return ret_cu(emu_cuLaunchKernel((CUfunction)fn, gx, gy, gz, bx, by, bz, shmem,
                                     (CUstream)stream, params, NULL));
}
