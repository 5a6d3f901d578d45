/*
 * The part of the CUDA driver API that braid and its emulated driver use: types, enum
 * values and entry-point signatures, as the driver's ABI defines them (facts of that ABI,
 * so that neither braid nor the emulator needs NVIDIA's header to build).
 *
 * braid reaches the driver only through cuGetProcAddress (device/cuda.c); the emulator
 * (emu/) exports every name listed here under its versioned and plain names.
 */
#ifndef BRAID_DEVICE_CUDA_ABI_H
#define BRAID_DEVICE_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

#define CU_IPC_HANDLE_SIZE 64
typedef struct { char reserved[CU_IPC_HANDLE_SIZE]; } CUipcMemHandle;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_MAP_FAILED = 205,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
    CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705,
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CUDA_ERROR_UNKNOWN = 999,
};

/* cuPointerGetAttribute(s) */
enum {
    CU_POINTER_ATTRIBUTE_CONTEXT = 1,
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,        /* unsigned int: CU_MEMORYTYPE_* */
    CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,
    CU_POINTER_ATTRIBUTE_HOST_POINTER = 4,
    CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,         /* int (bool) */
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,     /* int */
    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
    CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
    CU_POINTER_ATTRIBUTE_MAPPED = 13,
};
enum { CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2, CU_MEMORYTYPE_ARRAY = 3,
       CU_MEMORYTYPE_UNIFIED = 4 };

/* cuDeviceGetAttribute */
enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
    CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
    CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
    CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91,
    CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 122,
};

/* cuDeviceGetP2PAttribute */
enum {
    CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK = 0x01,
    CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED = 0x02,
    CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED = 0x03,
    CU_DEVICE_P2P_ATTRIBUTE_ACCESS_ACCESS_SUPPORTED = 0x04,     /* the old name of 0x04 */
    CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED = 0x04,
    CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED = 0x05,
};

/* cuFuncGetAttribute */
enum {
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
    CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
    CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
    CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,          /* major * 10 + minor */
    CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,       /* major * 10 + minor */
};

enum { CU_STREAM_DEFAULT = 0, CU_STREAM_NON_BLOCKING = 1 };
#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)
enum { CU_EVENT_DEFAULT = 0, CU_EVENT_BLOCKING_SYNC = 1, CU_EVENT_DISABLE_TIMING = 2,
       CU_EVENT_INTERPROCESS = 4 };
/* cuStreamWaitValue32: GEQ waits until (int32_t)(*addr - value) >= 0 */
enum { CU_STREAM_WAIT_VALUE_GEQ = 0, CU_STREAM_WAIT_VALUE_EQ = 1, CU_STREAM_WAIT_VALUE_AND = 2,
       CU_STREAM_WAIT_VALUE_NOR = 3 };
enum { CU_STREAM_WRITE_VALUE_DEFAULT = 0 };
#define CU_STREAM_WAIT_VALUE_FLUSH (1 << 30)
#define CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER 0x1
/*
 * cuStreamBatchMemOp: count (at most 256) operations, queued in order. A write's flags are
 * 0 (fenced) in the _v2 API; a wait's are a CU_STREAM_WAIT_VALUE_* condition, with
 * CU_STREAM_WAIT_VALUE_FLUSH or not; a barrier's are its scope.
 */
typedef enum CUstreamBatchMemOpType_enum {
    CU_STREAM_MEM_OP_WAIT_VALUE_32 = 1,
    CU_STREAM_MEM_OP_WRITE_VALUE_32 = 2,
    CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES = 3,
    CU_STREAM_MEM_OP_WAIT_VALUE_64 = 4,
    CU_STREAM_MEM_OP_WRITE_VALUE_64 = 5,
    CU_STREAM_MEM_OP_BARRIER = 6,
} CUstreamBatchMemOpType;
enum { CU_STREAM_MEMORY_BARRIER_TYPE_SYS = 0x0, CU_STREAM_MEMORY_BARRIER_TYPE_GPU = 0x1 };
#define BRAID_CU_BATCH_MEM_OP_MAX 256

/* A wait's or a write's alias is the driver's: its value is unimportant. */
typedef union CUstreamBatchMemOpParams_union {
    CUstreamBatchMemOpType operation;           /* the tag: every member starts with it */
    struct CUstreamMemOpWaitValueParams_st {    /* WAIT_VALUE_32, WAIT_VALUE_64 */
        CUstreamBatchMemOpType operation;
        CUdeviceptr address;
        union {
            uint32_t value;
            uint64_t value64;
        };
        unsigned int flags;                     /* CU_STREAM_WAIT_VALUE_* */
        CUdeviceptr alias;
    } waitValue;
    struct CUstreamMemOpWriteValueParams_st {   /* WRITE_VALUE_32, WRITE_VALUE_64 */
        CUstreamBatchMemOpType operation;
        CUdeviceptr address;
        union {
            uint32_t value;
            uint64_t value64;
        };
        unsigned int flags;                     /* 0 */
        CUdeviceptr alias;
    } writeValue;
    struct CUstreamMemOpFlushRemoteWritesParams_st {
        CUstreamBatchMemOpType operation;
        unsigned int flags;                     /* 0 */
    } flushRemoteWrites;
    struct CUstreamMemOpMemoryBarrierParams_st {
        CUstreamBatchMemOpType operation;
        unsigned int flags;                     /* CU_STREAM_MEMORY_BARRIER_TYPE_* */
    } memoryBarrier;
    uint64_t pad[6];
} CUstreamBatchMemOpParams;

_Static_assert(sizeof(CUstreamBatchMemOpType) == 4, "CUstreamBatchMemOpType is an int");
_Static_assert(sizeof(CUstreamBatchMemOpParams) == 48, "CUstreamBatchMemOpParams: 48 bytes");
_Static_assert(offsetof(CUstreamBatchMemOpParams, waitValue.address) == 8 &&
               offsetof(CUstreamBatchMemOpParams, waitValue.value) == 16 &&
               offsetof(CUstreamBatchMemOpParams, waitValue.value64) == 16 &&
               offsetof(CUstreamBatchMemOpParams, waitValue.flags) == 24 &&
               offsetof(CUstreamBatchMemOpParams, waitValue.alias) == 32 &&
               offsetof(CUstreamBatchMemOpParams, writeValue.address) == 8 &&
               offsetof(CUstreamBatchMemOpParams, writeValue.value64) == 16 &&
               offsetof(CUstreamBatchMemOpParams, writeValue.flags) == 24 &&
               offsetof(CUstreamBatchMemOpParams, flushRemoteWrites.flags) == 4 &&
               offsetof(CUstreamBatchMemOpParams, memoryBarrier.flags) == 4,
               "CUstreamBatchMemOpParams: the driver's field offsets");

enum { CU_STREAM_CAPTURE_STATUS_NONE = 0, CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
       CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2 };
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define CU_MEMHOSTALLOC_WRITECOMBINED 0x04
#define CU_MEMHOSTREGISTER_PORTABLE 0x01
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02
#define CU_MEMHOSTREGISTER_IOMEMORY 0x04
#define CU_MEMHOSTREGISTER_READ_ONLY 0x08
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1
#define CU_GET_PROC_ADDRESS_DEFAULT 0
#define CU_GET_PROC_ADDRESS_LEGACY_STREAM 0x1
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 0x2
/* cuGetProcAddress_v2's *symbol_status */
enum { CU_GET_PROC_ADDRESS_SUCCESS = 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
       CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2 };

/*
 * The entry points, as X(name, versioned symbol, return, parameters): braid asks
 * cuGetProcAddress for `name`; a program compiled against cuda.h links the versioned
 * symbol; the emulator exports both.
 */
#define BRAID_CUDA_ENTRIES(X) \
    X(cuInit, cuInit, (unsigned int flags)) \
    X(cuDriverGetVersion, cuDriverGetVersion, (int *version)) \
    X(cuDeviceGet, cuDeviceGet, (CUdevice *dev, int ordinal)) \
    X(cuDeviceGetCount, cuDeviceGetCount, (int *count)) \
    X(cuDeviceGetName, cuDeviceGetName, (char *name, int len, CUdevice dev)) \
    X(cuDeviceGetAttribute, cuDeviceGetAttribute, (int *value, int attrib, CUdevice dev)) \
    X(cuDeviceTotalMem, cuDeviceTotalMem_v2, (size_t *bytes, CUdevice dev)) \
    X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, (CUcontext *ctx, CUdevice dev)) \
    X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, (CUdevice dev)) \
    X(cuCtxSetCurrent, cuCtxSetCurrent, (CUcontext ctx)) \
    X(cuCtxGetCurrent, cuCtxGetCurrent, (CUcontext *ctx)) \
    X(cuCtxGetDevice, cuCtxGetDevice, (CUdevice *dev)) \
    X(cuCtxSynchronize, cuCtxSynchronize, (void)) \
    X(cuMemAlloc, cuMemAlloc_v2, (CUdeviceptr *dptr, size_t bytes)) \
    X(cuMemFree, cuMemFree_v2, (CUdeviceptr dptr)) \
    X(cuMemHostAlloc, cuMemHostAlloc, (void **pp, size_t bytes, unsigned int flags)) \
    X(cuMemFreeHost, cuMemFreeHost, (void *p)) \
    X(cuMemHostRegister, cuMemHostRegister_v2, (void *p, size_t bytes, unsigned int flags)) \
    X(cuMemHostUnregister, cuMemHostUnregister, (void *p)) \
    X(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer_v2, \
      (CUdeviceptr *dptr, void *p, unsigned int flags)) \
    X(cuMemGetAddressRange, cuMemGetAddressRange_v2, \
      (CUdeviceptr *base, size_t *size, CUdeviceptr dptr)) \
    X(cuMemcpy, cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t bytes)) \
    X(cuMemcpyAsync, cuMemcpyAsync, \
      (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)) \
    X(cuMemcpyHtoD, cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t bytes)) \
    X(cuMemcpyDtoH, cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t bytes)) \
    X(cuMemcpyDtoD, cuMemcpyDtoD_v2, (CUdeviceptr dst, CUdeviceptr src, size_t bytes)) \
    X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, \
      (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream)) \
    X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, \
      (void *dst, CUdeviceptr src, size_t bytes, CUstream stream)) \
    X(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, \
      (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)) \
    X(cuMemsetD8, cuMemsetD8_v2, (CUdeviceptr dst, unsigned char v, size_t n)) \
    X(cuMemsetD16, cuMemsetD16_v2, (CUdeviceptr dst, unsigned short v, size_t n)) \
    X(cuMemsetD32, cuMemsetD32_v2, (CUdeviceptr dst, unsigned int v, size_t n)) \
    X(cuMemsetD8Async, cuMemsetD8Async, \
      (CUdeviceptr dst, unsigned char v, size_t n, CUstream stream)) \
    X(cuMemsetD16Async, cuMemsetD16Async, \
      (CUdeviceptr dst, unsigned short v, size_t n, CUstream stream)) \
    X(cuMemsetD32Async, cuMemsetD32Async, \
      (CUdeviceptr dst, unsigned int v, size_t n, CUstream stream)) \
    X(cuStreamCreate, cuStreamCreate, (CUstream *stream, unsigned int flags)) \
    X(cuStreamDestroy, cuStreamDestroy_v2, (CUstream stream)) \
    X(cuStreamSynchronize, cuStreamSynchronize, (CUstream stream)) \
    X(cuStreamQuery, cuStreamQuery, (CUstream stream)) \
    X(cuStreamWaitEvent, cuStreamWaitEvent, (CUstream stream, CUevent ev, unsigned int flags)) \
    X(cuStreamIsCapturing, cuStreamIsCapturing, (CUstream stream, int *status)) \
    X(cuStreamWaitValue32, cuStreamWaitValue32_v2, \
      (CUstream stream, CUdeviceptr addr, uint32_t value, unsigned int flags)) \
    X(cuStreamWriteValue32, cuStreamWriteValue32_v2, \
      (CUstream stream, CUdeviceptr addr, uint32_t value, unsigned int flags)) \
    X(cuStreamBatchMemOp, cuStreamBatchMemOp_v2, \
      (CUstream stream, unsigned int count, CUstreamBatchMemOpParams *params, \
       unsigned int flags)) \
    X(cuDeviceCanAccessPeer, cuDeviceCanAccessPeer, (int *can, CUdevice dev, CUdevice peer)) \
    X(cuCtxEnablePeerAccess, cuCtxEnablePeerAccess, (CUcontext peer, unsigned int flags)) \
    X(cuCtxDisablePeerAccess, cuCtxDisablePeerAccess, (CUcontext peer)) \
    X(cuDeviceGetP2PAttribute, cuDeviceGetP2PAttribute, \
      (int *value, int attrib, CUdevice src, CUdevice dst)) \
    X(cuDeviceGetPCIBusId, cuDeviceGetPCIBusId, (char *bus_id, int len, CUdevice dev)) \
    X(cuEventCreate, cuEventCreate, (CUevent *ev, unsigned int flags)) \
    X(cuEventDestroy, cuEventDestroy_v2, (CUevent ev)) \
    X(cuEventRecord, cuEventRecord, (CUevent ev, CUstream stream)) \
    X(cuEventQuery, cuEventQuery, (CUevent ev)) \
    X(cuEventSynchronize, cuEventSynchronize, (CUevent ev)) \
    X(cuEventElapsedTime, cuEventElapsedTime_v2, (float *ms, CUevent start, CUevent end)) \
    X(cuPointerGetAttribute, cuPointerGetAttribute, (void *data, int attrib, CUdeviceptr ptr)) \
    X(cuPointerGetAttributes, cuPointerGetAttributes, \
      (unsigned int n, int *attribs, void **data, CUdeviceptr ptr)) \
    X(cuIpcGetMemHandle, cuIpcGetMemHandle, (CUipcMemHandle *handle, CUdeviceptr dptr)) \
    X(cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2, \
      (CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags)) \
    X(cuIpcCloseMemHandle, cuIpcCloseMemHandle, (CUdeviceptr dptr)) \
    X(cuModuleLoadData, cuModuleLoadData, (CUmodule *mod, const void *image)) \
    X(cuModuleUnload, cuModuleUnload, (CUmodule mod)) \
    X(cuModuleGetFunction, cuModuleGetFunction, (CUfunction *fn, CUmodule mod, const char *name)) \
    X(cuFuncGetAttribute, cuFuncGetAttribute, (int *pi, int attrib, CUfunction hfunc)) \
    X(cuLaunchKernel, cuLaunchKernel, \
      (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, \
       unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void **params, \
       void **extra)) \
    X(cuGetErrorString, cuGetErrorString, (CUresult err, const char **str)) \
    X(cuGetErrorName, cuGetErrorName, (CUresult err, const char **str))

/* cuGetProcAddress itself is found with dlsym: the _v2 symbol (CUDA 12 and later) takes a
 * fifth argument, where the driver says whether the symbol was found. */
typedef CUresult (*braid_cuGetProcAddress_v2_t)(const char *symbol, void **pfn, int cuda_version,
                                                uint64_t flags, int *symbol_status);
typedef CUresult (*braid_cuGetProcAddress_t)(const char *symbol, void **pfn, int cuda_version,
                                             uint64_t flags);

#endif
