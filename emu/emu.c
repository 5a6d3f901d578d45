/*
 * The emulated driver's engine: cuInit, devices, primary contexts and error strings, which
 * both faces use (emu_cuda.c exports the CUDA driver's names, emu_hip.c the HIP runtime's).
 *
 * BRAID_EMU_DEVICES (default 1, at most EMU_MAX_DEVICES) devices, all alike: "braid
 * emulated GPU", compute capability 8.0, 4 multiprocessors, unified addressing, 16 GiB
 * reported. A thread's current context is its own (as with the real driver); an API that
 * needs one answers CUDA_ERROR_INVALID_CONTEXT where the thread has none, or where the
 * primary context it has is no longer retained. A process forked after cuInit cannot use
 * the driver (CUDA_ERROR_NOT_INITIALIZED), as with the real one.
 *
 * Each device has its PCI bus id 0000:XX:00.0, XX = 0x10 + its ordinal (hexadecimal, in
 * upper case as CUDA may give it), as CU_DEVICE_ATTRIBUTE_PCI_BUS_ID says.
 *
 * cuInit reads the settings once: BRAID_EMU_DEVICES, BRAID_EMU_DELAY_US (emu_stream.c),
 * BRAID_EMU_NO_HOST_REGISTER (emu_mem.c), BRAID_EMU_STALL_LAUNCH and BRAID_EMU_FULL_GRID
 * (emu_module.c: 1 runs every thread of a launch's grid; by default one thread does the
 * launch's work) and BRAID_EMU_STRICT, with, in strict mode, BRAID_EMU_LOCK_WARN_MS
 * (emu_lock.c, which it sets up); a value out of range is said on stderr and the default
 * used.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu/emu_int.h"

#define EMU_DEVICE_NAME "braid emulated GPU"
#define EMU_DEVICE_MEM (16ull << 30)
#define EMU_PCI_BUS0 0x10               /* device d is on PCI bus EMU_PCI_BUS0 + d */

static struct {
    pthread_once_t once;
    int ready;                      /* atomic: cuInit succeeded */
    CUresult init_status;
    int ndev;
    unsigned int delay_us;
    int no_host_register;
    int strict;
    int full_grid;
    uint64_t stall_launch;
    struct CUctx_st *ctx;           /* the primary context of each device */
    pthread_mutex_t lock;           /* retain and release */
} emu = { .once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER };

static BRAID_EMU_TLS CUcontext emu_current;   /* initial-exec: kernels/gpu/emu_abi.h */

void emu_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("braid-emu: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

uint64_t emu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void emu_sleep_us(unsigned int us)
{
    struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* An unsigned decimal environment variable no larger than max; dflt when unset. */
static unsigned long env_count(const char *name, unsigned long dflt, unsigned long max)
{
    const char *v = getenv(name);
    char *end;
    if (v == NULL || *v == '\0')
        return dflt;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno != 0 || *end != '\0' || v[0] == '-' || n > max) {
        emu_warn("%s=%s is not a number from 0 to %lu: using %lu; fix or unset it", name, v,
                 max, dflt);
        return dflt;
    }
    return n;
}

/*
 * A child forked after cuInit has none of the workers, and may have copied a lock held by
 * one: like the real driver, the emulator refuses to work there (NOT_INITIALIZED).
 */
static void emu_after_fork(void)
{
    emu.init_status = CUDA_ERROR_NOT_INITIALIZED;
    __atomic_store_n(&emu.ready, 0, __ATOMIC_RELEASE);
}

static void emu_init_once(void)
{
    emu.ndev = (int)env_count("BRAID_EMU_DEVICES", 1, EMU_MAX_DEVICES);
    emu.delay_us = (unsigned int)env_count("BRAID_EMU_DELAY_US", 0, 10000000);
    emu.no_host_register = env_count("BRAID_EMU_NO_HOST_REGISTER", 0, 1) != 0;
    emu.stall_launch = env_count("BRAID_EMU_STALL_LAUNCH", 0, UINT32_MAX);
    emu.strict = env_count("BRAID_EMU_STRICT", 0, 1) != 0;
    emu.full_grid = env_count("BRAID_EMU_FULL_GRID", 0, 1) != 0;
    if (emu.ndev == 0) {
        emu.init_status = CUDA_ERROR_NO_DEVICE;
        return;
    }
    if (emu.strict) {
        unsigned int warn_ms = (unsigned int)env_count("BRAID_EMU_LOCK_WARN_MS", 2000, 3600000);
        emu.init_status = emu_lock_init(warn_ms, emu.ndev);
        if (emu.init_status != CUDA_SUCCESS)
            return;
    }
    emu.ctx = calloc((size_t)emu.ndev, sizeof(*emu.ctx));
    if (emu.ctx == NULL) {
        emu.init_status = CUDA_ERROR_OUT_OF_MEMORY;
        return;
    }
    for (int d = 0; d < emu.ndev; d++) {
        struct CUctx_st *c = &emu.ctx[d];
        c->magic = EMU_CTX_MAGIC;
        c->dev = d;
        pthread_mutex_init(&c->lock, NULL);
        pthread_cond_init(&c->idle, NULL);
        pthread_cond_init(&c->progress, NULL);
    }
    pthread_atfork(NULL, NULL, emu_after_fork);
    emu.init_status = CUDA_SUCCESS;
    __atomic_store_n(&emu.ready, 1, __ATOMIC_RELEASE);
}

CUresult emu_cuInit(unsigned int flags)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&emu.once, emu_init_once);
    return emu.init_status;
}

CUresult emu_check_init(void)
{
    return __atomic_load_n(&emu.ready, __ATOMIC_ACQUIRE) ? CUDA_SUCCESS
                                                         : CUDA_ERROR_NOT_INITIALIZED;
}

int emu_device_count(void)
{
    return emu.ndev;
}

CUcontext emu_device_ctx(CUdevice dev)
{
    return &emu.ctx[dev];
}

unsigned int emu_delay_us(void)
{
    return emu.delay_us;
}

int emu_no_host_register(void)
{
    return emu.no_host_register;
}

int emu_strict(void)
{
    return emu.strict;
}

int emu_full_grid(void)
{
    return emu.full_grid;
}

uint64_t emu_stall_launch(void)
{
    return emu.stall_launch;
}

static int ctx_active(CUcontext c)
{
    return __atomic_load_n(&c->refs, __ATOMIC_ACQUIRE) > 0;
}

CUresult emu_ctx_get(CUcontext *ctx_p)
{
    CUresult st = emu_check_init();
    if (st != CUDA_SUCCESS)
        return st;
    CUcontext c = emu_current;
    if (c == NULL || !ctx_active(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    *ctx_p = c;
    return CUDA_SUCCESS;
}

CUresult emu_device_check(CUdevice dev)
{
    CUresult st = emu_check_init();
    if (st != CUDA_SUCCESS)
        return st;
    return dev >= 0 && dev < emu.ndev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* ---- driver and devices ------------------------------------------------------------------ */

CUresult emu_cuDriverGetVersion(int *version)
{
    if (version == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *version = EMU_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

CUresult emu_cuDeviceGet(CUdevice *dev, int ordinal)
{
    CUresult st = emu_device_check(ordinal);
    if (st == CUDA_SUCCESS && dev == NULL)
        st = CUDA_ERROR_INVALID_VALUE;
    if (st == CUDA_SUCCESS)
        *dev = ordinal;
    return st;
}

CUresult emu_cuDeviceGetCount(int *count)
{
    CUresult st = emu_check_init();
    if (st == CUDA_SUCCESS && count == NULL)
        st = CUDA_ERROR_INVALID_VALUE;
    if (st == CUDA_SUCCESS)
        *count = emu.ndev;
    return st;
}

CUresult emu_cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult st = emu_device_check(dev);
    if (st != CUDA_SUCCESS)
        return st;
    if (name == NULL || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", EMU_DEVICE_NAME);
    return CUDA_SUCCESS;
}

/* The value of a device attribute, or -1 for one the emulator does not know. */
static int device_attribute(int attrib, CUdevice dev)
{
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 0x7fffffff;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 48 * 1024;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 4;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return EMU_PCI_BUS0 + dev;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 8;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: return 1;
    default: return -1;
    }
}

CUresult emu_cuDeviceGetAttribute(int *value, int attrib, CUdevice dev)
{
    CUresult st = emu_device_check(dev);
    if (st != CUDA_SUCCESS)
        return st;
    int v = device_attribute(attrib, dev);
    if (value == NULL || v < 0)
        return CUDA_ERROR_INVALID_VALUE;
    *value = v;
    return CUDA_SUCCESS;
}

/* "0000:10:00.0": domain, bus, device, function, as CU_DEVICE_ATTRIBUTE_PCI_*_ID say. */
CUresult emu_cuDeviceGetPCIBusId(char *bus_id, int len, CUdevice dev)
{
    CUresult st = emu_device_check(dev);
    if (st != CUDA_SUCCESS)
        return st;
    if (bus_id == NULL || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(bus_id, (size_t)len, "%04X:%02X:%02X.0",
             (unsigned int)device_attribute(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev),
             (unsigned int)device_attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev),
             (unsigned int)device_attribute(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev));
    return CUDA_SUCCESS;
}

CUresult emu_cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
    CUresult st = emu_device_check(dev);
    if (st == CUDA_SUCCESS && bytes == NULL)
        st = CUDA_ERROR_INVALID_VALUE;
    if (st == CUDA_SUCCESS)
        *bytes = (size_t)EMU_DEVICE_MEM;
    return st;
}

/* ---- primary contexts -------------------------------------------------------------------- */

CUresult emu_cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    CUresult st = emu_device_check(dev);
    if (st != CUDA_SUCCESS)
        return st;
    if (ctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext c = &emu.ctx[dev];
    pthread_mutex_lock(&emu.lock);
    if (c->null_stream == NULL)
        st = emu_stream_new(c, 0, &c->null_stream);
    if (st == CUDA_SUCCESS)   /* release: whoever sees refs > 0 sees null_stream */
        __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&emu.lock);
    if (st == CUDA_SUCCESS)
        *ctx = c;
    return st;
}

CUresult emu_cuDevicePrimaryCtxRelease(CUdevice dev)
{
    CUresult st = emu_device_check(dev);
    if (st != CUDA_SUCCESS)
        return st;
    CUcontext c = &emu.ctx[dev];
    pthread_mutex_lock(&emu.lock);
    if (c->refs > 0)
        __atomic_sub_fetch(&c->refs, 1, __ATOMIC_RELEASE);
    else
        st = CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_unlock(&emu.lock);
    return st;
}

CUresult emu_cuCtxSetCurrent(CUcontext ctx)
{
    CUresult st = emu_check_init();
    if (st != CUDA_SUCCESS)
        return st;
    if (ctx != NULL && ctx->magic != EMU_CTX_MAGIC)
        return CUDA_ERROR_INVALID_CONTEXT;
    emu_current = ctx;
    return CUDA_SUCCESS;
}

CUresult emu_cuCtxGetCurrent(CUcontext *ctx)
{
    CUresult st = emu_check_init();
    if (st == CUDA_SUCCESS && ctx == NULL)
        st = CUDA_ERROR_INVALID_VALUE;
    if (st == CUDA_SUCCESS)
        *ctx = emu_current;
    return st;
}

CUresult emu_cuCtxGetDevice(CUdevice *dev)
{
    CUcontext c;
    CUresult st = emu_ctx_get(&c);
    if (st == CUDA_SUCCESS && dev == NULL)
        st = CUDA_ERROR_INVALID_VALUE;
    if (st == CUDA_SUCCESS)
        *dev = c->dev;
    return st;
}

CUresult emu_cuCtxSynchronize(void)
{
    CUcontext c;
    CUresult st = emu_ctx_get(&c);
    if (st == CUDA_SUCCESS)
        emu_ctx_sync(c);
    return st;
}

/* ---- error strings ----------------------------------------------------------------------- */

#define EMU_ERR(code, text) { code, #code, text }
static const struct {
    CUresult code;
    const char *name, *text;
} emu_errors[] = {
    EMU_ERR(CUDA_SUCCESS, "no error"),
    EMU_ERR(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    EMU_ERR(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    EMU_ERR(CUDA_ERROR_NOT_INITIALIZED, "driver not initialized: call cuInit first"),
    EMU_ERR(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    EMU_ERR(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device"),
    EMU_ERR(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    EMU_ERR(CUDA_ERROR_INVALID_IMAGE, "not a kernel image for this driver"),
    EMU_ERR(CUDA_ERROR_INVALID_CONTEXT, "invalid or no current context"),
    EMU_ERR(CUDA_ERROR_MAP_FAILED, "mapping failed"),
    EMU_ERR(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image for this device"),
    EMU_ERR(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "peer access is not supported between these "
            "devices"),
    EMU_ERR(CUDA_ERROR_INVALID_PTX, "PTX compilation failed"),
    EMU_ERR(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    EMU_ERR(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    EMU_ERR(CUDA_ERROR_NOT_READY, "work not complete yet"),
    EMU_ERR(CUDA_ERROR_ILLEGAL_ADDRESS, "illegal memory access"),
    EMU_ERR(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled"),
    EMU_ERR(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled"),
    EMU_ERR(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "host memory already registered"),
    EMU_ERR(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "host memory not registered"),
    EMU_ERR(CUDA_ERROR_LAUNCH_FAILED, "kernel launch failed"),
    EMU_ERR(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    EMU_ERR(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    EMU_ERR(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "not allowed while a stream captures"),
    EMU_ERR(CUDA_ERROR_UNKNOWN, "unknown error"),
};

static int error_index(CUresult err)
{
    for (size_t i = 0; i < sizeof(emu_errors) / sizeof(emu_errors[0]); i++)
        if (emu_errors[i].code == err)
            return (int)i;
    return -1;
}

CUresult emu_cuGetErrorString(CUresult err, const char **str)
{
    int i = error_index(err);
    if (str == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *str = i < 0 ? NULL : emu_errors[i].text;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult emu_cuGetErrorName(CUresult err, const char **str)
{
    int i = error_index(err);
    if (str == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *str = i < 0 ? NULL : emu_errors[i].name;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
