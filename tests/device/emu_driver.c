/*
 * The emulated CUDA driver (emu), as a program compiled against NVIDIA's cuda.h
 * sees it: cuda.h renames calls to the versioned symbols (cuMemAlloc -> cuMemAlloc_v2),
 * so linking this program checks that the emulator exports them.
 *
 * Checks: init, devices, attributes, contexts (none current -> INVALID_CONTEXT, in another
 * thread too); fresh allocations hold the garbage pattern, and the host can touch them
 * (not when BRAID_EMU_STRICT=1 is set: the test runs in strict mode too); with
 * BRAID_EMU_DELAY_US set, an async memset then an async copy on one stream are ordered,
 * and cuStreamQuery says NOT_READY (they wait behind a gate the host opens), then
 * SUCCESS; two streams ordered
 * by an event and by WaitValue32 and WriteValue32 on pinned memory, and a wait released
 * by the host; a stream destroyed with work queued still does it; pointer attributes of
 * device, pinned and malloc memory; IPC to a second process (this program again) that
 * writes into our buffer; a child forked after cuInit gets NOT_INITIALIZED;
 * cuGetProcAddress_v2 gives the exported functions; images: only the magic one loads, and
 * braid_k_copy copies, and has attributes (the kernels' host build is linked into the
 * emulator: a failure if it is not);
 * BRAID_EMU_STALL_LAUNCH=2 in a second process, with and without strict mode: its launch
 * 2 never ends, launch 3 on another stream does, and the process exits normally; strict
 * mode (emu_strict.c), in a second process.
 * Prints a line per check; exits 1 on any failure, 77 where there is no cuda.h to build
 * against. Sizes are small: it runs on 2-core CI machines.
 */
#if !__has_include(<cuda.h>)
#include <stdio.h>

int main(void)
{
    puts("emu_driver: NVIDIA's cuda.h was not found (make CUDA_HEADER_DIR=<dir>): skipped");
    return 77;
}
#else

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/gpu/kargs.h"
#include "tests/device/emu_test.h"

#define DELAY_US 2000           /* what each stream operation waits first */
#define STR(x) #x
#define XSTR(x) STR(x)

/* ---- init, devices, contexts ------------------------------------------------------------- */

/* Does the environment ask for strict mode (BRAID_EMU_STRICT=1)? */
static int strict_env(void)
{
    const char *v = getenv("BRAID_EMU_STRICT");
    return v != NULL && strcmp(v, "1") == 0;
}

static void *no_ctx_thread(void *arg)
{
    CUdeviceptr d;
    *(CUresult *)arg = cuMemAlloc(&d, 64);
    return NULL;
}

static int check_init(CUcontext *ctx_p)
{
    int n = 0, v = 0, version = 0;
    char name[64];
    size_t total = 0;
    CUdeviceptr d;
    CUdevice dev;

    CU_ERR(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    CHECK_AFTER(cuDriverGetVersion(&version), version == 13000,
                "cuDriverGetVersion before cuInit: %d", version);
    if (!CU(cuInit(0)))
        return 0;
    CHECK_AFTER(cuDeviceGetCount(&n), n == 2, "BRAID_EMU_DEVICES=2: %d devices", n);
    CU_ERR(cuDeviceGet(&dev, 2), CUDA_ERROR_INVALID_DEVICE);
    CHECK_AFTER(cuDeviceGetName(name, sizeof(name), 1), strcmp(name, "braid emulated GPU") == 0,
                "device name \"%s\"", name);
    CHECK_AFTER(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0), v == 8,
                "compute capability major %d", v);
    CHECK_AFTER(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), v == 4,
                "multiprocessors %d", v);
    CHECK_AFTER(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), v == 32,
                "warp size %d", v);
    CHECK_AFTER(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0), v == 1,
                "unified addressing %d", v);
    CHECK_AFTER(cuDeviceTotalMem(&total, 0), total == (16ull << 30), "total memory %zu", total);
    CU_ERR(cuMemAlloc(&d, 64), CUDA_ERROR_INVALID_CONTEXT);
    if (!CU(cuDevicePrimaryCtxRetain(ctx_p, 0)) || !CU(cuCtxSetCurrent(*ctx_p)))
        return 0;
    CUcontext cur = NULL;
    CHECK_AFTER(cuCtxGetCurrent(&cur), cur == *ctx_p, "current context");
    CHECK_AFTER(cuCtxGetDevice(&dev), dev == 0, "context device %d", dev);
    CUresult other = CUDA_SUCCESS;
    pthread_t t;
    pthread_create(&t, NULL, no_ctx_thread, &other);
    pthread_join(t, NULL);
    check(other == CUDA_ERROR_INVALID_CONTEXT, "another thread has no current context: %s",
          err_name(other));
    return 1;
}

/* ---- memory, streams, events ------------------------------------------------------------- */

static void check_alloc_pattern(void)
{
    CUdeviceptr d;
    unsigned char h[NBYTES];
    if (!CU(cuMemAlloc(&d, NBYTES)) || !CU(cuMemcpyDtoH(h, d, NBYTES)))
        return;
    int zeros = 0;
    for (size_t i = 0; i < NBYTES; i++)
        zeros += h[i] == 0;
    check(zeros == 0, "a fresh allocation holds garbage, not zeros (%d zero bytes)", zeros);
    if (strict_env())
        check(host_faults(d, 0) && host_faults(d, 1),
              "in strict mode the host cannot load or store device memory");
    else
        check(!host_faults(d, 0) && !host_faults(d, 1),
              "without strict mode the host can load and store device memory");
    CU(cuMemFree(d));
}

/* memset then copy to pinned memory, queued behind a gate; the copy must see the memset. */
static void check_stream_order(unsigned char *pinned, uint32_t *gate)
{
    CUstream s;
    CUdeviceptr d;
    if (!CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) || !CU(cuMemAlloc(&d, NBYTES)))
        return;
    memset(pinned, 0, NBYTES);
    gate_close(s, gate);
    CU(cuMemsetD8Async(d, 0x3c, NBYTES, s));
    CU(cuMemcpyDtoHAsync(pinned, d, NBYTES, s));
    CU_ERR(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    gate_open(gate);
    CU(cuStreamSynchronize(s));
    CU_ERR(cuStreamQuery(s), CUDA_SUCCESS);
    check(all_bytes(pinned, NBYTES, 0x3c), "async copy after async memset sees the memset");
    int status = -1;
    CHECK_AFTER(cuStreamIsCapturing(s, (CUstreamCaptureStatus *)&status),
                status == CU_STREAM_CAPTURE_STATUS_NONE, "stream is not capturing");
    CU(cuMemFree(d));
    CU(cuStreamDestroy(s));
}

/*
 * a: three memsets, the last one 0x77, then record, all behind a gate; b: wait for the
 * event, copy. Without the wait, b's copy (2 delays in) would run before a's last memset.
 */
static void check_event_order(unsigned char *pinned, uint32_t *gate)
{
    CUstream a, b;
    CUevent ev, start;
    CUdeviceptr d;
    float ms = -1;
    if (!CU(cuStreamCreate(&a, 0)) || !CU(cuStreamCreate(&b, 0)) ||
        !CU(cuEventCreate(&ev, 0)) || !CU(cuEventCreate(&start, 0)) ||
        !CU(cuMemAlloc(&d, NBYTES)))
        return;
    gate_close(a, gate);
    CU(cuEventRecord(start, a));
    CU(cuMemsetD8Async(d, 0x11, NBYTES, a));
    CU(cuMemsetD8Async(d, 0x22, NBYTES, a));
    CU(cuMemsetD8Async(d, 0x77, NBYTES, a));
    CU(cuEventRecord(ev, a));
    CU(cuStreamWaitEvent(b, ev, 0));
    CU(cuMemcpyDtoHAsync(pinned, d, NBYTES, b));
    CU_ERR(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    gate_open(gate);
    CU(cuStreamSynchronize(b));
    check(all_bytes(pinned, NBYTES, 0x77), "a stream waiting on an event sees the other's work");
    CU(cuEventSynchronize(ev));
    CHECK_AFTER(cuEventElapsedTime(&ms, start, ev), ms >= 3 * DELAY_US / 1000.0f,
                "elapsed time over 4 delayed operations: %.2f ms", ms);
    CU(cuMemFree(d));
    CU(cuEventDestroy(ev));
    CU(cuEventDestroy(start));
    CU(cuStreamDestroy(a));
    CU(cuStreamDestroy(b));
}

/* b waits on a flag in pinned memory that a writes after its memset. */
static void check_wait_value(unsigned char *pinned, uint32_t *flags)
{
    CUstream a, b;
    CUdeviceptr d, f0, f1;
    if (!CU(cuStreamCreate(&a, 0)) || !CU(cuStreamCreate(&b, 0)) || !CU(cuMemAlloc(&d, NBYTES)))
        return;
    flags[0] = 0;
    flags[1] = 0x10;
    CU(cuMemHostGetDevicePointer(&f0, (void *)&flags[0], 0));
    check(f0 == (CUdeviceptr)(uintptr_t)&flags[0], "pinned memory's device pointer is its own");
    f1 = f0 + sizeof(uint32_t);
    CU(cuStreamWaitValue32(b, f0, 1, CU_STREAM_WAIT_VALUE_GEQ));
    CU(cuMemcpyDtoHAsync(pinned, d, NBYTES, b));
    CU(cuMemsetD8Async(d, 0x5e, NBYTES, a));
    CU(cuMemsetD8Async(d, 0x6f, NBYTES, a));
    CU(cuStreamWriteValue32(a, f0, 1, 0));
    CU(cuStreamSynchronize(b));
    check(all_bytes(pinned, NBYTES, 0x6f), "a stream waiting on a value sees the writer's work");
    CU(cuStreamWaitValue32(b, f1, 0xfffffff0u, CU_STREAM_WAIT_VALUE_GEQ));
    CU(cuStreamSynchronize(b));
    check(1, "GEQ wraps: 0x10 is past 0xfffffff0");
    CU(cuStreamWaitValue32(b, f1, 5, CU_STREAM_WAIT_VALUE_EQ));
    sleep_ms(3 * DELAY_US / 1000);
    CU_ERR(cuStreamQuery(b), CUDA_ERROR_NOT_READY);
    __atomic_store_n(&flags[1], 5, __ATOMIC_RELEASE);   /* as another process would */
    CU(cuStreamSynchronize(b));
    check(1, "a wait for a value the host writes ends");
    CU(cuMemFree(d));
    CU(cuStreamDestroy(a));
    CU(cuStreamDestroy(b));
}

static void check_destroy_busy(unsigned char *pinned)
{
    CUstream s;
    CUdeviceptr d;
    if (!CU(cuStreamCreate(&s, 0)) || !CU(cuMemAlloc(&d, NBYTES)))
        return;
    CU(cuMemsetD32Async(d, 0x42424242u, NBYTES / 4, s));
    CU(cuMemcpyDtoHAsync(pinned, d, NBYTES, s));
    CU(cuStreamDestroy(s));
    CU(cuCtxSynchronize());
    check(all_bytes(pinned, NBYTES, 0x42), "a stream destroyed with work queued does it");
    CU(cuMemFree(d));
}

/* ---- pointer attributes ------------------------------------------------------------------ */

static void check_attributes(unsigned char *pinned)
{
    CUdeviceptr d, base = 0;
    size_t size = 0;
    unsigned int type = 0;
    int ordinal = -1;
    if (!CU(cuMemAlloc(&d, NBYTES)))
        return;
    CUdeviceptr mid = d + 100;
    CHECK_AFTER(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, mid),
                type == CU_MEMORYTYPE_DEVICE, "device memory: type DEVICE (%u)", type);
    CHECK_AFTER(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, mid),
                ordinal == 0, "device memory: ordinal 0 (%d)", ordinal);
    CHECK_AFTER(cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, mid),
                base == d, "device memory: range start");
    CHECK_AFTER(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, mid),
                size == NBYTES, "device memory: range size %zu", size);
    base = 0;
    size = 0;
    CHECK_AFTER(cuMemGetAddressRange(&base, &size, mid), base == d && size == NBYTES,
                "cuMemGetAddressRange of an inner pointer");
    CHECK_AFTER(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                      (CUdeviceptr)(uintptr_t)pinned),
                type == CU_MEMORYTYPE_HOST, "pinned memory: type HOST (%u)", type);

    char *plain = malloc(64);
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)plain;
    CU_ERR(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p),
           CUDA_ERROR_INVALID_VALUE);
    CUpointer_attribute attrs[3] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                     CU_POINTER_ATTRIBUTE_CONTEXT,
                                     CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
    CUcontext actx = (CUcontext)(uintptr_t)1;
    type = 99;
    ordinal = 99;
    void *data[3] = { &type, &actx, &ordinal };
    CHECK_AFTER(cuPointerGetAttributes(3, attrs, data, p),
                type == 0 && actx == NULL && ordinal == 0,
                "malloc memory, plural: success and zeros");
    free(plain);
    CU(cuMemFree(d));
}

/* ---- IPC --------------------------------------------------------------------------------- */

/*
 * The second process: open the handle (twice: one mapping, counted), check that the host
 * can read it without strict mode and cannot with it, and write 0xa7.
 */
static int ipc_child(const char *hex)
{
    const char *strict = getenv("BRAID_EMU_STRICT");
    CUipcMemHandle h;
    CUcontext ctx;
    CUdeviceptr d, d2;
    if (!hex_decode(hex, h.reserved, sizeof(h.reserved)))
        return 2;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx) ||
        cuIpcOpenMemHandle(&d, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ||
        cuIpcOpenMemHandle(&d2, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) || d != d2)
        return 3;
    unsigned int type = 0;
    if (cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d) ||
        type != CU_MEMORYTYPE_DEVICE)
        return 4;
    if (host_faults(d, 0) != (strict != NULL && strcmp(strict, "1") == 0))
        return 6;
    if (cuIpcCloseMemHandle(d2) || cuMemsetD8(d, 0xa7, NBYTES) || cuIpcCloseMemHandle(d))
        return 5;
    return 0;
}

/* The second process is this program again, as argv0 (not /proc/self/exe: under valgrind that
 * is valgrind). */
void check_ipc(const char *argv0)
{
    CUdeviceptr d, self;
    CUipcMemHandle h;
    char hex[2 * sizeof(h.reserved) + 1];
    unsigned char out[NBYTES];
    int status = -1;
    if (!CU(cuMemAlloc(&d, NBYTES)) || !CU(cuMemsetD8(d, 0, NBYTES)) ||
        !CU(cuIpcGetMemHandle(&h, d)))
        return;
    CU_ERR(cuIpcOpenMemHandle(&self, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
           CUDA_ERROR_INVALID_CONTEXT);
    hex_encode(h.reserved, sizeof(h.reserved), hex);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execlp(argv0, argv0, "--ipc-child", hex, (char *)NULL);
        _exit(127);
    }
    waitpid(pid, &status, 0);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "second process opened the handle and wrote (exit status %d)",
          WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    CU(cuMemcpyDtoH(out, d, NBYTES));
    check(all_bytes(out, NBYTES, 0xa7), "the owner sees what the second process wrote");
    CU(cuMemFree(d));
}

/* A child forked after cuInit cannot use the driver, as with the real one. */
static void check_fork(void)
{
    int n, status = -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED &&
              cuInit(0) == CUDA_ERROR_NOT_INITIALIZED ? 0 : 1);
    waitpid(pid, &status, 0);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "a child forked after cuInit gets CUDA_ERROR_NOT_INITIALIZED");
}

/* ---- entry points, modules --------------------------------------------------------------- */

static void check_proc_address(void)
{
    static const struct { const char *name; void *fn; } procs[] = {
        { "cuMemAlloc", (void *)cuMemAlloc },                  /* cuMemAlloc_v2 */
        { "cuStreamWaitValue32", (void *)cuStreamWaitValue32 }, /* _v2 */
        { "cuEventDestroy", (void *)cuEventDestroy },          /* _v2 */
        { "cuIpcOpenMemHandle", (void *)cuIpcOpenMemHandle },  /* _v2 */
        { "cuLaunchKernel", (void *)cuLaunchKernel },
        { "cuFuncGetAttribute", (void *)cuFuncGetAttribute },
        { "cuGetProcAddress", (void *)cuGetProcAddress },      /* _v2 */
    };
    CUdriverProcAddressQueryResult qr;
    void *fn;
    for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
        fn = NULL;
        CHECK_AFTER(cuGetProcAddress(procs[i].name, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &qr),
                    qr == CU_GET_PROC_ADDRESS_SUCCESS && fn == procs[i].fn,
                    "cuGetProcAddress_v2(\"%s\") gives the exported function", procs[i].name);
    }
    void *plain = dlsym(RTLD_DEFAULT, "cuMemAlloc");
    check(plain == (void *)cuMemAlloc, "the plain name cuMemAlloc is cuMemAlloc_v2");
    fn = (void *)1;
    CHECK_AFTER(cuGetProcAddress("cuNoSuchCall", &fn, 12000, 0, &qr),
                fn == NULL && qr == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
                "an unknown name: success, NULL and SYMBOL_NOT_FOUND");
}

static void check_launch_copy(CUfunction f)
{
    CUdeviceptr src, dst;
    unsigned char out[NBYTES];
    if (!CU(cuMemAlloc(&src, NBYTES)) || !CU(cuMemAlloc(&dst, NBYTES)))
        return;
    CU(cuMemsetD8(src, 0x9b, NBYTES));
    CU(launch_copy(f, NULL, dst, src, NBYTES));
    braid_kargs_t args = { .count = NBYTES };
    void *params[] = { &args };
    CU_ERR(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, params),
           CUDA_ERROR_NOT_SUPPORTED);
    CU(cuMemcpyDtoH(out, dst, NBYTES));
    check(all_bytes(out, NBYTES, 0x9b), "braid_k_copy copied %d bytes", NBYTES);
    CU(cuMemFree(src));
    CU(cuMemFree(dst));
}

static void check_func_attributes(CUfunction f)
{
    int v = 0;
    CHECK_AFTER(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f), v == 1024,
                "cuFuncGetAttribute: %d threads per block", v);
    CHECK_AFTER(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f), v > 0,
                "cuFuncGetAttribute: %d registers", v);
    CU_ERR(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX, f), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, NULL), CUDA_ERROR_INVALID_HANDLE);
}

static void check_modules(void)
{
    static const char elf[] = "\x7f" "ELF\x02\x01\x01";
    static const char ptx[] = ".version 8.0\n.target sm_80\n";
    static const char ours[] = BRAID_EMU_IMAGE_MAGIC "\0rest of the image";
    CUmodule m;
    CUfunction f;
    CU_ERR(cuModuleLoadData(&m, elf), CUDA_ERROR_INVALID_IMAGE);
    CU_ERR(cuModuleLoadData(&m, ptx), CUDA_ERROR_INVALID_IMAGE);
    CU_ERR(cuModuleLoadData(&m, "braid-emu"), CUDA_ERROR_INVALID_IMAGE);
    if (!CU(cuModuleLoadData(&m, ours)))
        return;
    check(1, "the magic image loads");
    CU_ERR(cuModuleGetFunction(&f, m, "braid_k_no_such_kernel"), CUDA_ERROR_NOT_FOUND);
    CUresult r = cuModuleGetFunction(&f, m, BRAID_KERNEL_COPY);
    check(r != CUDA_ERROR_NOT_FOUND, "%s is in the emulator (the kernels' host build is "
          "linked into it)", BRAID_KERNEL_COPY);
    if (r != CUDA_ERROR_NOT_FOUND && CU(r))
        check_launch_copy(f);
    if (r == CUDA_SUCCESS)
        check_func_attributes(f);
    CU(cuModuleUnload(m));
}

/* ---- BRAID_EMU_STALL_LAUNCH ------------------------------------------------------------- */

#define STALL_LINE "braid-emu: BRAID_EMU_STALL_LAUNCH=2: launch 2 (braid_k_copy) never ends\n"

/*
 * The second process, with BRAID_EMU_STALL_LAUNCH=2: launch 1 ends; launch 2 never does
 * (once the emulator has said so, its stream and an event after it are NOT_READY); launch
 * 3, on another stream, still runs (in strict mode too: the time slice is the process's);
 * then the process ends normally, its worker still stuck. Its exit status: its failures.
 */
static int stall_child(const char *errfile)
{
    CUcontext ctx;
    CUmodule m;
    CUfunction f;
    CUstream s[3];
    CUevent ev;
    CUdeviceptr src, dst[3];
    unsigned char out[NBYTES];
    if (!CU(cuInit(0)) || !CU(cuDevicePrimaryCtxRetain(&ctx, 0)) || !CU(cuCtxSetCurrent(ctx)) ||
        !CU(cuEventCreate(&ev, 0)) || !CU(cuMemAlloc(&src, NBYTES)) || !load_copy_kernel(&m, &f))
        return failures;
    for (int i = 0; i < 3; i++)
        if (!CU(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING)) || !CU(cuMemAlloc(&dst[i], NBYTES)))
            return failures;
    CU(cuMemsetD8(src, 0x2d, NBYTES));
    CU(launch_copy(f, s[0], dst[0], src, NBYTES));
    CU(cuStreamSynchronize(s[0]));
    CU(launch_copy(f, s[1], dst[1], src, NBYTES));
    CU(cuEventRecord(ev, s[1]));
    int said = wait_for_text(errfile, STALL_LINE, NULL);
    check(said && cuStreamQuery(s[1]) == CUDA_ERROR_NOT_READY &&
          cuEventQuery(ev) == CUDA_ERROR_NOT_READY,
          "launch 2 never ends: the emulator says so, its stream and event stay NOT_READY");
    CU(launch_copy(f, s[2], dst[2], src, NBYTES));
    CU(cuStreamSynchronize(s[2]));
    CU(cuMemcpyDtoH(out, dst[2], NBYTES));
    check(all_bytes(out, NBYTES, 0x2d), "launch 3, on another stream, runs");
    CU(cuMemcpyDtoH(out, dst[0], NBYTES));
    check(all_bytes(out, NBYTES, 0x2d), "launch 1 ran");
    for (int i = 0; i < 3; i++)
        CU(cuStreamDestroy(s[i]));
    CU(cuEventDestroy(ev));
    CU(cuModuleUnload(m));
    return failures;        /* device memory stays: cuMemFree would wait for launch 2 */
}

/* Its emulator's lock files go to dir (TMPDIR), out of the way of other tests. */
static void check_stall(const char *argv0, const char *dir, int strict)
{
    static char stall_env[] = "BRAID_EMU_STALL_LAUNCH=2";
    static char strict_env[] = "BRAID_EMU_STRICT=1";
    static char tmpdir_env[DIR_LEN + 8];
    char *env[] = { stall_env, tmpdir_env, strict ? strict_env : NULL, NULL };
    char errfile[PATH_LEN];
    snprintf(tmpdir_env, sizeof(tmpdir_env), "TMPDIR=%s", dir);
    tmpdir_path(errfile, dir, "stall.err");
    int st = wait_child(spawn_self(argv0, "--stall", errfile, errfile, env), errfile);
    check(st == 0, "BRAID_EMU_STALL_LAUNCH=2%s: a process whose launch 2 never ends exits "
          "normally (exit status %d)", strict ? ", strict mode" : "", st);
}

/* ---- strict mode (emu_strict.c) ---------------------------------------------------------- */

/* Its emulator's lock files go to dir too (TMPDIR), out of the way of other tests. */
static void check_strict(const char *argv0, const char *dir)
{
    static char strict_env[] = "BRAID_EMU_STRICT=1";
    static char warn_env[] = "BRAID_EMU_LOCK_WARN_MS=200";
    static char tmpdir_env[DIR_LEN + 8];
    char *env[] = { strict_env, warn_env, tmpdir_env, NULL };
    char errfile[PATH_LEN];
    snprintf(tmpdir_env, sizeof(tmpdir_env), "TMPDIR=%s", dir);
    tmpdir_path(errfile, dir, "strict.err");
    int st = wait_child(spawn_self(argv0, "--strict", dir, errfile, env), errfile);
    check(st == 0, "strict mode's checks, in a second process (exit status %d)", st);
}

static void check_errors(void)
{
    const char *s = NULL;
    CHECK_AFTER(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s),
                strcmp(s, "CUDA_ERROR_INVALID_VALUE") == 0, "error name %s", s);
    CHECK_AFTER(cuGetErrorString(CUDA_ERROR_NOT_READY, &s), s != NULL, "error string \"%s\"",
                s ? s : "");
    CU_ERR(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
}

int main(int argc, char **argv)
{
    CUcontext ctx;
    unsigned char *pinned;
    char dir[DIR_LEN];
    exit_on_alarm(120);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && strcmp(argv[1], "--ipc-child") == 0)
        return ipc_child(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--stall") == 0)
        return stall_child(argv[2]) != 0;
    if (argc == 3 && strcmp(argv[1], "--strict") == 0)
        return strict_main(argv[0], argv[2]);
    if (argc == 2 && strcmp(argv[1], "--hold") == 0)
        return strict_hold_main();
    setenv("BRAID_EMU_DELAY_US", XSTR(DELAY_US), 1);
    setenv("BRAID_EMU_DEVICES", "2", 1);
    if (!check_init(&ctx) || !CU(cuMemHostAlloc((void **)&pinned, NBYTES + 64, 0))) {
        printf("emu_driver: cannot go on\n");
        return 1;
    }
    check_alloc_pattern();
    uint32_t *words = (uint32_t *)(pinned + NBYTES);    /* [0], [1]: flags; [2]: a gate */
    check_stream_order(pinned, &words[2]);
    check_event_order(pinned, &words[2]);
    check_wait_value(pinned, words);
    check_destroy_busy(pinned);
    check_attributes(pinned);
    check_ipc(argv[0]);
    check_fork();
    check_proc_address();
    check_modules();
    if (tmpdir_make(dir)) {
        check_stall(argv[0], dir, 0);
        check_stall(argv[0], dir, 1);
        check_strict(argv[0], dir);
        tmpdir_remove(dir);
    }
    check_errors();
    CU(cuMemFreeHost(pinned));
    CU(cuDevicePrimaryCtxRelease(0));
    printf("emu_driver: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
#endif
