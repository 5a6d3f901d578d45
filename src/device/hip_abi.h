/*
 * The part of the HIP runtime (libamdhip64), of hiprtc and of comgr that braid's HIP backend
 * uses: types, values and entry-point signatures as their ABIs define them, so that braid
 * builds without ROCm's headers and loads whichever ROCm the process has (5.x, 6.x, 7.x).
 *
 * Where a fact changed between releases both forms are here, each marked with the releases
 * it belongs to; device/hip.c picks one by hipRuntimeGetVersion (HIP_VERSION = major *
 * 10000000 + minor * 100000 + patch).
 */
#ifndef BRAID_DEVICE_HIP_ABI_H
#define BRAID_DEVICE_HIP_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int hipError_t;                 /* an enum in HIP's headers: int-sized */
typedef int hipDevice_t;                /* the device ordinal */
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;
typedef struct ihipModule_t *hipModule_t;
typedef struct ihipModuleSymbol_t *hipFunction_t;

#define HIP_IPC_HANDLE_SIZE 64
typedef struct { char reserved[HIP_IPC_HANDLE_SIZE]; } hipIpcMemHandle_t;

enum {
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorInvalidDevicePointer = 17,
    hipErrorNoDevice = 100,
    hipErrorInvalidDevice = 101,
    hipErrorInvalidImage = 200,
    hipErrorNoBinaryForGpu = 209,
    hipErrorInvalidKernelFile = 218,
    hipErrorNotReady = 600,
    hipErrorPeerAccessAlreadyEnabled = 704,
};

#define HIP_VERSION_MAJOR_OF(_v) ((_v) / 10000000)

/*
 * hipPointerGetAttributes' struct. Same layout in every release; the first field is named
 * `memoryType` in ROCm 5.0 to 5.3, a union of `memoryType` and `type` in 5.5 to 5.7, `type`
 * from 6.0. Its values changed with 6.0 (aligned with CUDA's cudaMemoryType).
 */
typedef struct {
    int type;                    /* hipMemoryType: the values below */
    int device;
    void *devicePointer;
    void *hostPointer;
    int isManaged;
    unsigned allocationFlags;
} hipPointerAttribute_t;

enum {                           /* ROCm 5.x */
    hipMemoryTypeHost_r5 = 0,
    hipMemoryTypeDevice_r5 = 1,
    hipMemoryTypeArray_r5 = 2,
    hipMemoryTypeUnified_r5 = 3,
};
enum {                           /* ROCm 6.0 and later */
    hipMemoryTypeUnregistered_r6 = 0,
    hipMemoryTypeHost_r6 = 1,
    hipMemoryTypeDevice_r6 = 2,
    hipMemoryTypeManaged_r6 = 3,
    hipMemoryTypeArray_r6 = 10,
    hipMemoryTypeUnified_r6 = 11,
};

/*
 * hipDeviceProp_t is read only for gcnArchName (char[256]), which hipDeviceGetAttribute
 * cannot give. Its offset: 396 in the layout of ROCm 5.x (hipGetDeviceProperties), kept
 * as hipDeviceProp_tR0000 from 6.0 (hipGetDevicePropertiesR0000); 1160 in the layout of
 * 6.0 and later (hipGetDevicePropertiesR0600). Neither struct reaches 2 KiB.
 */
#define HIP_PROP_ARCH_OFFSET_R0000 396
#define HIP_PROP_ARCH_OFFSET_R0600 1160
#define HIP_PROP_ARCH_BYTES 256
#define HIP_PROP_BUFFER_BYTES 4096

enum { hipDeviceAttributeMultiprocessorCount = 63 };   /* same value in 5.x and 6.x */

#define hipStreamNonBlocking 0x1
#define hipEventDisableTiming 0x2
#define hipHostMallocMapped 0x2
#define hipHostRegisterPortable 0x1
#define hipHostRegisterMapped 0x2
#define hipMemcpyDefault 4
#define hipStreamWaitValueGte 0x0        /* waits until (*ptr & mask) >= value */
#define hipStreamWaitValueEq 0x1         /* waits until (*ptr & mask) == value */
#define hipStreamWaitMaskAll 0xffffffffu
enum { hipStreamCaptureStatusNone = 0 };
/* hipIpcOpenMemHandle's one flag: 0 in ROCm 5.x (whose runtime rejects any other value),
 * 0x1 (CUDA's value) in 6.x and later. */
#define hipIpcMemLazyEnablePeerAccess_r5 0x0
#define hipIpcMemLazyEnablePeerAccess_r6 0x1

/* hipModuleLaunchKernel's `extra`: the argument buffer and its size, then the end mark. */
#define HIP_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define HIP_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)
#define HIP_LAUNCH_PARAM_END ((void *)0x03)

/* Entries braid cannot work without: X(name, return type, parameters). */
#define BRAID_HIP_ENTRIES(X) \
    X(hipGetErrorString, const char *, (hipError_t err)) \
    X(hipRuntimeGetVersion, hipError_t, (int *version)) \
    X(hipGetDeviceCount, hipError_t, (int *count)) \
    X(hipSetDevice, hipError_t, (int ordinal)) \
    X(hipGetDevice, hipError_t, (int *ordinal)) \
    X(hipDeviceGet, hipError_t, (hipDevice_t *dev, int ordinal)) \
    X(hipDeviceGetName, hipError_t, (char *name, int len, hipDevice_t dev)) \
    X(hipDeviceGetAttribute, hipError_t, (int *value, int attr, int ordinal)) \
    X(hipPointerGetAttributes, hipError_t, (hipPointerAttribute_t *attr, const void *p)) \
    X(hipMalloc, hipError_t, (void **p, size_t bytes)) \
    X(hipFree, hipError_t, (void *p)) \
    X(hipHostMalloc, hipError_t, (void **p, size_t bytes, unsigned int flags)) \
    X(hipHostFree, hipError_t, (void *p)) \
    X(hipHostGetDevicePointer, hipError_t, (void **dev_p, void *host, unsigned int flags)) \
    X(hipHostRegister, hipError_t, (void *p, size_t bytes, unsigned int flags)) \
    X(hipHostUnregister, hipError_t, (void *p)) \
    X(hipMemcpyAsync, hipError_t, \
      (void *dst, const void *src, size_t bytes, int kind, hipStream_t stream)) \
    X(hipMemsetAsync, hipError_t, (void *dst, int value, size_t bytes, hipStream_t stream)) \
    X(hipStreamCreateWithFlags, hipError_t, (hipStream_t *stream, unsigned int flags)) \
    X(hipStreamDestroy, hipError_t, (hipStream_t stream)) \
    X(hipStreamSynchronize, hipError_t, (hipStream_t stream)) \
    X(hipStreamWaitEvent, hipError_t, (hipStream_t stream, hipEvent_t ev, unsigned int flags)) \
    X(hipStreamWaitValue32, hipError_t, \
      (hipStream_t stream, void *p, uint32_t value, unsigned int flags, uint32_t mask)) \
    X(hipStreamWriteValue32, hipError_t, \
      (hipStream_t stream, void *p, uint32_t value, unsigned int flags)) \
    X(hipStreamWriteValue64, hipError_t, \
      (hipStream_t stream, void *p, uint64_t value, unsigned int flags)) \
    X(hipEventCreateWithFlags, hipError_t, (hipEvent_t *ev, unsigned int flags)) \
    X(hipEventDestroy, hipError_t, (hipEvent_t ev)) \
    X(hipEventRecord, hipError_t, (hipEvent_t ev, hipStream_t stream)) \
    X(hipEventQuery, hipError_t, (hipEvent_t ev)) \
    X(hipDeviceCanAccessPeer, hipError_t, (int *can, int ordinal, int peer)) \
    X(hipDeviceEnablePeerAccess, hipError_t, (int peer, unsigned int flags)) \
    X(hipIpcGetMemHandle, hipError_t, (hipIpcMemHandle_t *h, void *p)) \
    X(hipIpcOpenMemHandle, hipError_t, (void **p, hipIpcMemHandle_t h, unsigned int flags)) \
    X(hipIpcCloseMemHandle, hipError_t, (void *p)) \
    X(hipModuleLoadData, hipError_t, (hipModule_t *mod, const void *image)) \
    X(hipModuleGetFunction, hipError_t, (hipFunction_t *fn, hipModule_t mod, const char *name)) \
    X(hipModuleLaunchKernel, hipError_t, \
      (hipFunction_t fn, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, \
       unsigned int by, unsigned int bz, unsigned int shmem, hipStream_t stream, \
       void **params, void **extra))

/* Entries braid does without: capture status (not capturing), the thread's last error (left
 * as it is), and the property getters of each layout (no arch name). */
#define BRAID_HIP_OPTIONAL(X) \
    X(hipStreamIsCapturing, hipError_t, (hipStream_t stream, int *status)) \
    X(hipGetLastError, hipError_t, (void)) \
    X(hipPeekAtLastError, hipError_t, (void)) \
    X(hipGetDevicePropertiesR0600, hipError_t, (void *props, int ordinal)) \
    X(hipGetDevicePropertiesR0000, hipError_t, (void *props, int ordinal)) \
    X(hipGetDeviceProperties, hipError_t, (void *props, int ordinal))

/* hiprtc: inside libamdhip64.so.5 (and .6), its own libhiprtc.so.6 / .7 from 6.0. */
typedef int hiprtcResult;
typedef struct _hiprtcProgram *hiprtcProgram;
enum { HIPRTC_SUCCESS = 0 };

#define BRAID_HIPRTC_ENTRIES(X) \
    X(hiprtcGetErrorString, const char *, (hiprtcResult r)) \
    X(hiprtcCreateProgram, hiprtcResult, \
      (hiprtcProgram *prog, const char *src, const char *name, int nheaders, \
       const char *const *headers, const char *const *include_names)) \
    X(hiprtcCompileProgram, hiprtcResult, \
      (hiprtcProgram prog, int nopts, const char *const *opts)) \
    X(hiprtcGetProgramLogSize, hiprtcResult, (hiprtcProgram prog, size_t *bytes)) \
    X(hiprtcGetProgramLog, hiprtcResult, (hiprtcProgram prog, char *log)) \
    X(hiprtcGetCodeSize, hiprtcResult, (hiprtcProgram prog, size_t *bytes)) \
    X(hiprtcGetCode, hiprtcResult, (hiprtcProgram prog, char *code)) \
    X(hiprtcDestroyProgram, hiprtcResult, (hiprtcProgram *prog))

/* comgr (libamd_comgr.so.2 in 5.x and 6.x, .so.3 in 7.x): the ISAs it can build, named
 * "amdgcn-amd-amdhsa--gfx90a" and so on. Status 0 is success. */
typedef int (*braid_comgr_get_isa_count_t)(size_t *count);
typedef int (*braid_comgr_get_isa_name_t)(size_t index, const char **name);

/*
 * For tests only (braid's own, not HIP's): compile() builds for `arch` (e.g. "gfx90a")
 * instead of the bound device's arch; NULL goes back to the device's. Lets a machine
 * without an AMD GPU test the hiprtc path.
 */
void braid_device_hip_test_arch(const char *arch);

#endif
