/*
 * The emulated CUDA driver with two devices (BRAID_EMU_DEVICES=2), as braid's GPU-resident
 * data path uses it: peer access, batched stream memory operations, several devices in
 * one process and across processes. Compiled against NVIDIA's cuda.h, as emu_driver is.
 *
 * Checks: cuDeviceCanAccessPeer, cuDeviceGetP2PAttribute, cuDeviceGetPCIBusId (consistent
 * with the bus id attribute), cuCtxEnablePeerAccess and cuCtxDisablePeerAccess with their
 * errors; cuStreamBatchMemOp's argument checks (a batch with one bad operation queues
 * none), every operation and condition, 32- and 64-bit, a batch of 256, a wait that the
 * host's plain store releases (no wake: the wait times out and looks again); two threads
 * bound to devices 0 and 1: their memory, kernels (on their own memory and, with peer
 * access, on the other's), events and copies across devices, pointer attributes; round
 * trips of stream memory operations between two threads and between two processes on
 * different devices, a kernel of one process writing the other's memory, and thousands of
 * waits queued on one stream released one by one by another process (emu_rate.c, which
 * prints the rates); strict mode (second processes with BRAID_EMU_STRICT=1): the same
 * devices check passes, and a stream memory operation or a kernel that touches another
 * device's memory without peer access aborts the process, saying what was missing; the
 * speed of braid's kernels with one thread per launch and with the full grid.
 * Runs in strict mode as it is when BRAID_EMU_STRICT=1 is set. Prints a line per check;
 * exits 1 on any failure, 77 where there is no cuda.h to build against.
 */
#if !__has_include(<cuda.h>)
#include <stdio.h>

int main(void)
{
    puts("emu_p2p: NVIDIA's cuda.h was not found (make CUDA_HEADER_DIR=<dir>): skipped");
    return 77;
}
#else

#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "kernels/gpu/kargs.h"
#include "tests/device/emu_test.h"

#define ROUNDS 10000            /* round trips of each ping-pong */
#define STEPPED_ROUNDS 4096     /* of the one the host steps */
#define RELEASE_MS 20           /* how long a wait the host releases waits first */
#define PTR(p) ((CUdeviceptr)(uintptr_t)(p))

CUcontext p2p_ctx[2];

static int strict_env(void)
{
    const char *v = getenv("BRAID_EMU_STRICT");
    return v != NULL && strcmp(v, "1") == 0;
}

/* ---- peer access ------------------------------------------------------------------------- */

static void check_peer_devices(void)
{
    int can = -1, v = -1, bus = -1;
    char id[32], want[32];
    CHECK_AFTER(cuDeviceCanAccessPeer(&can, 0, 1), can == 1, "device 0 can access device 1");
    CHECK_AFTER(cuDeviceCanAccessPeer(&can, 1, 1), can == 0,
                "a device is not its own peer: cuDeviceCanAccessPeer(1, 1) gives %d", can);
    CU_ERR(cuDeviceCanAccessPeer(&can, 0, 2), CUDA_ERROR_INVALID_DEVICE);
    CU_ERR(cuDeviceCanAccessPeer(NULL, 0, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_AFTER(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 1),
                v == 1, "P2P access supported: %d", v);
    CHECK_AFTER(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, 1,
                                        0), v == 1, "P2P native atomics: %d", v);
    CHECK_AFTER(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, 0, 1),
                v == 0, "P2P performance rank: %d", v);
    CU_ERR(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 1, 1),
           CUDA_ERROR_INVALID_DEVICE);
    CU_ERR(cuDeviceGetP2PAttribute(&v, (CUdevice_P2PAttribute)99, 0, 1),
           CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuDeviceGetP2PAttribute(NULL, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 1),
           CUDA_ERROR_INVALID_VALUE);
    for (int d = 0; d < 2; d++) {
        id[0] = '\0';
        CU(cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d));
        snprintf(want, sizeof(want), "0000:%02X:00.0", (unsigned int)bus);
        CHECK_AFTER(cuDeviceGetPCIBusId(id, sizeof(id), d), strcmp(id, want) == 0,
                    "device %d's PCI bus id \"%s\" has its bus attribute %d", d, id, bus);
    }
    CU_ERR(cuDeviceGetPCIBusId(id, sizeof(id), 2), CUDA_ERROR_INVALID_DEVICE);
    CU_ERR(cuDeviceGetPCIBusId(NULL, 13, 0), CUDA_ERROR_INVALID_VALUE);
}

static void *no_ctx_enable(void *arg)
{
    *(CUresult *)arg = cuCtxEnablePeerAccess(p2p_ctx[1], 0);
    return NULL;
}

/* From device 0's context (current). */
static void check_peer_enable(void)
{
    CUresult other = CUDA_SUCCESS;
    pthread_t t;
    CU_ERR(cuCtxEnablePeerAccess(p2p_ctx[1], 1), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuCtxEnablePeerAccess(p2p_ctx[0], 0), CUDA_ERROR_INVALID_CONTEXT);
    CU_ERR(cuCtxEnablePeerAccess(NULL, 0), CUDA_ERROR_INVALID_CONTEXT);
    CU_ERR(cuCtxDisablePeerAccess(p2p_ctx[1]), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    CU(cuCtxEnablePeerAccess(p2p_ctx[1], 0));
    CU_ERR(cuCtxEnablePeerAccess(p2p_ctx[1], 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    CU(cuCtxDisablePeerAccess(p2p_ctx[1]));
    CU_ERR(cuCtxDisablePeerAccess(p2p_ctx[1]), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    pthread_create(&t, NULL, no_ctx_enable, &other);
    pthread_join(t, NULL);
    check(other == CUDA_ERROR_INVALID_CONTEXT, "cuCtxEnablePeerAccess with no current "
          "context: %s", err_name(other));
}

/* ---- cuStreamBatchMemOp ------------------------------------------------------------------ */

static void op_write32(CUstreamBatchMemOpParams *p, CUdeviceptr a, uint32_t v)
{
    memset(p, 0, sizeof(*p));
    p->writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    p->writeValue.address = a;
    p->writeValue.value = v;
}

static void op_wait32(CUstreamBatchMemOpParams *p, CUdeviceptr a, uint32_t v, unsigned int cond)
{
    memset(p, 0, sizeof(*p));
    p->waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    p->waitValue.address = a;
    p->waitValue.value = v;
    p->waitValue.flags = cond;
}

static void op_write64(CUstreamBatchMemOpParams *p, CUdeviceptr a, uint64_t v)
{
    op_write32(p, a, 0);
    p->writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    p->writeValue.value64 = v;
}

static void op_wait64(CUstreamBatchMemOpParams *p, CUdeviceptr a, uint64_t v, unsigned int cond)
{
    op_wait32(p, a, 0, cond);
    p->waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
    p->waitValue.value64 = v;
}

/* A batch of a good write of w[0] and a bad second operation: INVALID_VALUE, and the
 * write not queued. */
static void bad_second(CUstream s, uint32_t *w, const CUstreamBatchMemOpParams *bad,
                       const char *what)
{
    CUstreamBatchMemOpParams p[2];
    w[0] = 1;
    op_write32(&p[0], PTR(&w[0]), 5);
    p[1] = *bad;
    CUresult r = cuStreamBatchMemOp(s, 2, p, 0);
    CU(cuStreamSynchronize(s));
    check(r == CUDA_ERROR_INVALID_VALUE && w[0] == 1, "a batch with %s gives %s and queues "
          "nothing", what, err_name(r));
}

/* w: pinned, 16 words at least. */
static void check_batch_args(CUstream s, uint32_t *w)
{
    static CUstreamBatchMemOpParams many[257];
    static uint64_t not_a_stream[8];
    CUstreamBatchMemOpParams p;
    CUdeviceptr a = PTR(&w[0]);
    char *plain = malloc(64);
    for (int i = 0; i < 257; i++)
        op_write32(&many[i], a, 1);
    CU_ERR(cuStreamBatchMemOp(s, 0, many, 0), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuStreamBatchMemOp(s, 257, many, 0), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuStreamBatchMemOp(s, 1, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuStreamBatchMemOp(s, 1, many, 1), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuStreamBatchMemOp((CUstream)not_a_stream, 1, many, 0), CUDA_ERROR_INVALID_HANDLE);
    CU_ERR(cuStreamWriteValue32(s, a, 1, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER),
           CUDA_ERROR_INVALID_VALUE);
    op_write32(&p, a, 0);
    p.operation = (CUstreamBatchMemOpType)7;
    bad_second(s, w, &p, "an unknown operation");
    op_wait32(&p, a, 0, 4);
    bad_second(s, w, &p, "a wait of an unknown condition");
    op_write32(&p, a, 0);
    p.writeValue.flags = CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER;
    bad_second(s, w, &p, "a write without its fence (not in the _v2 API)");
    op_write32(&p, a + 2, 0);
    bad_second(s, w, &p, "a misaligned 32-bit write");
    op_wait64(&p, a + 4, 0, CU_STREAM_WAIT_VALUE_GEQ);
    bad_second(s, w, &p, "a 64-bit wait on a 4-byte boundary");
    op_write32(&p, PTR(plain), 0);
    bad_second(s, w, &p, "a write to memory the driver does not know");
    memset(&p, 0, sizeof(p));
    p.memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
    p.memoryBarrier.flags = 2;
    bad_second(s, w, &p, "a barrier of an unknown scope");
    p.flushRemoteWrites.operation = CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
    p.flushRemoteWrites.flags = 1;
    bad_second(s, w, &p, "a flush with flags");
    free(plain);
}

/* Every operation and condition, in one batch on pinned words; then 256 writes to device
 * memory. */
static void check_batch_run(CUstream s, uint32_t *w)
{
    CUstreamBatchMemOpParams p[11], many[256];
    uint64_t *q = (uint64_t *)&w[4];
    CUdeviceptr a = PTR(&w[0]), b = PTR(q), d;
    uint32_t out[256];
    w[0] = 0;
    *q = 0xfffffffffffffff0ull;
    op_write32(&p[0], a, 7);
    op_wait32(&p[1], a, 7, CU_STREAM_WAIT_VALUE_GEQ);
    op_wait32(&p[2], a, 7, CU_STREAM_WAIT_VALUE_EQ);
    op_wait32(&p[3], a, 4, CU_STREAM_WAIT_VALUE_AND);
    op_wait32(&p[4], a, 0, CU_STREAM_WAIT_VALUE_NOR);
    op_wait64(&p[5], b, 0xfffffffffffffff0ull, CU_STREAM_WAIT_VALUE_GEQ);
    op_write64(&p[6], b, 0x100000002ull);
    op_wait64(&p[7], b, 0xfffffffffffffff8ull,
              CU_STREAM_WAIT_VALUE_GEQ | CU_STREAM_WAIT_VALUE_FLUSH);
    op_wait64(&p[8], b, 0x100000002ull, CU_STREAM_WAIT_VALUE_EQ);
    memset(&p[9], 0, 2 * sizeof(p[0]));
    p[9].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
    p[9].memoryBarrier.flags = CU_STREAM_MEMORY_BARRIER_TYPE_GPU;
    p[10].flushRemoteWrites.operation = CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
    CU(cuStreamBatchMemOp(s, 11, p, 0));
    CU(cuStreamSynchronize(s));
    check(w[0] == 7 && *q == 0x100000002ull, "a batch of 32- and 64-bit writes and waits of "
          "every condition (64-bit GEQ wraps), a barrier and a flush runs in order");
    if (!CU(cuMemAlloc(&d, sizeof(out))))
        return;
    for (int i = 0; i < 256; i++)
        op_write32(&many[i], d + 4 * (CUdeviceptr)i, 1000u + (uint32_t)i);
    CU(cuStreamBatchMemOp(s, 256, many, 0));
    CU(cuStreamSynchronize(s));
    CU(cuMemcpyDtoH(out, d, sizeof(out)));
    int right = 1;
    for (int i = 0; i < 256; i++)
        right &= out[i] == 1000u + (uint32_t)i;
    check(right, "a batch of 256 writes to device memory");
    CU(cuMemFree(d));
}

/* A wait that no stream's write releases, only the host's plain store: it still ends. */
static void check_host_release(CUstream s, uint32_t *w)
{
    w[8] = 0;
    CU(cuStreamWaitValue32(s, PTR(&w[8]), 1, CU_STREAM_WAIT_VALUE_GEQ));
    sleep_ms(RELEASE_MS);
    CU_ERR(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    double t0 = now_s();
    __atomic_store_n(&w[8], 1, __ATOMIC_RELEASE);
    CU(cuStreamSynchronize(s));
    double us = (now_s() - t0) * 1e6;
    check(1, "a wait released by the host's plain store (no wake) ends");
    printf("rate: a wait %d ms old saw the host's plain store after %.0f us\n", RELEASE_MS, us);
}

/* ---- two devices, a thread each ---------------------------------------------------------- */

#define DEV_FILL(d) (0x30 + (d))      /* what device d's own memory holds */

/* A thread bound to device dev's primary context: its memory (src filled, dst), its
 * stream, and what it saw. */
typedef struct dev_side {
    int dev;
    struct dev_side *other;
    pthread_barrier_t *bar;
    CUfunction copy;
    CUdeviceptr src, dst, peer_dst;   /* peer_dst: a copy of the other's src, by a kernel */
    CUstream s;
    CUevent ev;
    int ready, ordinal_ok;
} dev_side_t;

static int dev_setup(dev_side_t *t)
{
    int ordinal = -1;
    CUcontext c = NULL;
    if (!CU(cuCtxSetCurrent(p2p_ctx[t->dev])) || !CU(cuMemAlloc(&t->src, NBYTES)) ||
        !CU(cuMemAlloc(&t->dst, NBYTES)) || !CU(cuMemAlloc(&t->peer_dst, NBYTES)) ||
        !CU(cuStreamCreate(&t->s, CU_STREAM_NON_BLOCKING)) || !CU(cuEventCreate(&t->ev, 0)) ||
        !CU(cuMemsetD8(t->src, DEV_FILL(t->dev), NBYTES)))
        return 0;
    t->ordinal_ok = cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                          t->src) == CUDA_SUCCESS && ordinal == t->dev &&
                    cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, t->src) ==
                        CUDA_SUCCESS && c == p2p_ctx[t->dev];
    return CU(launch_copy(t->copy, t->s, t->dst, t->src, NBYTES)) &&
           CU(cuCtxEnablePeerAccess(p2p_ctx[t->other->dev], 0));
}

/* Own copy, then (once both are set up) a kernel that reads the other device's memory,
 * after an event of the other's stream; then peer access off again. */
static void *dev_side_main(void *arg)
{
    dev_side_t *t = arg;
    t->ready = dev_setup(t);
    if (t->ready)
        CU(cuEventRecord(t->ev, t->s));
    pthread_barrier_wait(t->bar);
    if (t->ready && t->other->ready) {
        CU(cuStreamWaitEvent(t->s, t->other->ev, 0));
        CU(launch_copy(t->copy, t->s, t->peer_dst, t->other->src, NBYTES));
        CU(cuStreamSynchronize(t->s));
    }
    pthread_barrier_wait(t->bar);
    if (t->ready)
        CU(cuCtxDisablePeerAccess(p2p_ctx[t->other->dev]));
    return NULL;
}

static int dev_holds(CUdeviceptr p, int fill)
{
    unsigned char out[NBYTES];
    return CU(cuMemcpyDtoH(out, p, NBYTES)) && all_bytes(out, NBYTES, (unsigned char)fill);
}

static void dev_free(dev_side_t *t)
{
    CU(cuStreamDestroy(t->s));
    CU(cuEventDestroy(t->ev));
    CU(cuMemFree(t->src));
    CU(cuMemFree(t->dst));
    CU(cuMemFree(t->peer_dst));
}

/* Then, from device 0's context: a copy of device 1's memory into device 0's, on device
 * 0's stream, without peer access (CUDA allows it: strict mode too). */
static void check_devices(void)
{
    pthread_barrier_t bar;
    pthread_t th[2];
    CUmodule m;
    CUfunction f;
    dev_side_t t[2] = { { .dev = 0, .other = &t[1], .bar = &bar },
                        { .dev = 1, .other = &t[0], .bar = &bar } };
    if (!load_copy_kernel(&m, &f))
        return;
    t[0].copy = t[1].copy = f;
    pthread_barrier_init(&bar, NULL, 2);
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, dev_side_main, &t[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    CU(cuCtxSetCurrent(p2p_ctx[0]));
    if (!t[0].ready || !t[1].ready) {
        check(0, "two threads on devices 0 and 1 set up");
        return;
    }
    check(t[0].ordinal_ok && t[1].ordinal_ok,
          "each device's memory has its device's ordinal and context");
    check(dev_holds(t[0].dst, DEV_FILL(0)) && dev_holds(t[1].dst, DEV_FILL(1)),
          "two threads on devices 0 and 1: each one's kernel copies its device's memory");
    check(dev_holds(t[0].peer_dst, DEV_FILL(1)) && dev_holds(t[1].peer_dst, DEV_FILL(0)),
          "with peer access, each one's kernel reads the other device's memory, after the "
          "other stream's event");
    CU(cuMemsetD8(t[0].dst, 0, NBYTES));
    CU(cuMemcpyDtoDAsync(t[0].dst, t[1].src, NBYTES, NULL));
    CU(cuStreamSynchronize(NULL));
    check(dev_holds(t[0].dst, DEV_FILL(1)), "a copy from device 1 to device 0 on device 0's "
          "stream, without peer access");
    for (int i = 0; i < 2; i++)
        dev_free(&t[i]);
    CU(cuModuleUnload(m));
}

/* ---- strict mode: peer memory without peer access is a GPU fault ----------------------- */

#define FAULT_LINE "braid-emu: strict: GPU fault: %s on a stream of device 0 touches 0x"

/* A second process, strict: device 1's memory (or, for "ipc:<handle>", the first
 * process's on device 1, opened without CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) touched by
 * work on device 0's stream. Must not return. */
static int fault_child(const char *what)
{
    static const struct rlimit no_core = { 0, 0 };
    CUipcMemHandle h;
    CUdeviceptr d1, d0;
    CUstream s;
    CUmodule m;
    CUfunction f;
    setrlimit(RLIMIT_CORE, &no_core);
    if (!CU(cuInit(0)) || !CU(cuDevicePrimaryCtxRetain(&p2p_ctx[0], 0)) ||
        !CU(cuDevicePrimaryCtxRetain(&p2p_ctx[1], 1)) || !CU(cuCtxSetCurrent(p2p_ctx[1])) ||
        !CU(cuMemAlloc(&d1, NBYTES)) || !CU(cuCtxSetCurrent(p2p_ctx[0])) ||
        !CU(cuMemAlloc(&d0, NBYTES)) || !CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)))
        return 2;
    if (strncmp(what, "ipc:", 4) == 0) {
        if (!hex_decode(what + 4, h.reserved, sizeof(h.reserved)) ||
            !CU(cuIpcOpenMemHandle(&d1, h, 0)))
            return 2;
        CUstreamBatchMemOpParams p;
        op_wait32(&p, d1, 0, CU_STREAM_WAIT_VALUE_GEQ);
        CU(cuStreamBatchMemOp(s, 1, &p, 0));
    } else if (strcmp(what, "write") == 0) {
        CU(cuMemcpyDtoD(d0, d1, NBYTES));       /* a copy is fine */
        CU(cuStreamWriteValue32(s, d1, 1, 0));
    } else if (strcmp(what, "disabled") == 0) {
        CU(cuCtxEnablePeerAccess(p2p_ctx[1], 0));
        CU(cuStreamWriteValue32(s, d1, 1, 0));  /* fine while enabled */
        CU(cuCtxDisablePeerAccess(p2p_ctx[1]));
        CU(cuStreamWaitValue32(s, d1, 1, CU_STREAM_WAIT_VALUE_EQ));
    } else if (load_copy_kernel(&m, &f)) {
        CU(launch_copy(f, s, d0, d1, NBYTES));
    }
    cuStreamSynchronize(s);
    printf("emu_p2p --fault %.8s: the process did not abort\n", what);
    return 3;
}

/* Run fault_child(what) in strict mode: it must die, the emulator saying call faulted. */
static void check_fault(const char *argv0, const char *dir, const char *what, const char *call,
                        const char *label)
{
    static char strict_env[] = "BRAID_EMU_STRICT=1";
    static char tmpdir_env[DIR_LEN + 8];
    char *env[] = { strict_env, tmpdir_env, NULL };
    char errfile[PATH_LEN], line[128];
    snprintf(tmpdir_env, sizeof(tmpdir_env), "TMPDIR=%s", dir);
    tmpdir_path(errfile, dir, "fault.err");
    snprintf(line, sizeof(line), FAULT_LINE, call);
    int st = wait_child(spawn_self(argv0, "--fault", what, errfile, env), errfile);
    check(st == -1 && file_has(errfile, line) && file_has(errfile, "device 1's memory"),
          "strict: %s on device 0 of device 1's memory %s: the process aborts, and the "
          "emulator says why", call, label);
}

static void check_faults(const char *argv0, const char *dir)
{
    CUipcMemHandle h;
    CUdeviceptr d1;
    char what[2 * sizeof(h.reserved) + 8] = "ipc:";
    check_fault(argv0, dir, "write", "cuStreamWriteValue32", "without peer access");
    check_fault(argv0, dir, "disabled", "cuStreamWaitValue32", "once peer access is disabled");
    check_fault(argv0, dir, "launch", "cuLaunchKernel", "without peer access");
    if (!CU(cuCtxSetCurrent(p2p_ctx[1])) || !CU(cuMemAlloc(&d1, NBYTES)) ||
        !CU(cuIpcGetMemHandle(&h, d1)) || !CU(cuCtxSetCurrent(p2p_ctx[0])))
        return;
    hex_encode(h.reserved, sizeof(h.reserved), what + 4);
    check_fault(argv0, dir, what, "cuStreamBatchMemOp", "opened by IPC without "
                "CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS");
    CU(cuMemFree(d1));
}

/* This program again, as mode, with BRAID_EMU_STRICT=1 (strict) or BRAID_EMU_FULL_GRID=1. */
static void check_again(const char *argv0, const char *dir, const char *mode, int strict)
{
    static char strict_env[] = "BRAID_EMU_STRICT=1";
    static char grid_env[] = "BRAID_EMU_FULL_GRID=1";
    static char tmpdir_env[DIR_LEN + 8];
    char *env[] = { strict ? strict_env : grid_env, tmpdir_env, NULL };
    char errfile[PATH_LEN];
    snprintf(tmpdir_env, sizeof(tmpdir_env), "TMPDIR=%s", dir);
    tmpdir_path(errfile, dir, "again.err");
    int st = wait_child(spawn_self(argv0, mode, NULL, errfile, env), errfile);
    check(st == 0, "%s, in a second process with %s (exit status %d)", mode, env[0], st);
}

/* ---- main -------------------------------------------------------------------------------- */

static int setup(void)
{
    int n = 0;
    return CU(cuInit(0)) && CU(cuDeviceGetCount(&n)) && n == 2 &&
           CU(cuDevicePrimaryCtxRetain(&p2p_ctx[0], 0)) &&
           CU(cuDevicePrimaryCtxRetain(&p2p_ctx[1], 1)) && CU(cuCtxSetCurrent(p2p_ctx[0]));
}

/* Another mode of this program (a second process): its exit status, or -1 if none. */
static int other_mode(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--pingpong") == 0)
        return rate_procs_child(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--fault") == 0)
        return fault_child(argv[2]);
    if (argc == 2 && strcmp(argv[1], "--devices") == 0) {
        if (setup())
            check_devices();
        return failures != 0;
    }
    if (argc == 2 && strcmp(argv[1], "--kernels") == 0) {
        if (setup())
            rate_kernels("BRAID_EMU_FULL_GRID=1: every thread of the grid");
        return failures != 0;
    }
    return -1;
}

static void check_rates(const char *argv0, const char *dir)
{
    rate_threads(0, 0, ROUNDS);
    rate_threads(0, 1, ROUNDS);
    rate_procs(argv0, dir, 0, ROUNDS, 0);
    rate_procs(argv0, dir, 1, ROUNDS, 0);
    rate_procs(argv0, dir, 1, STEPPED_ROUNDS, 1);
}

int main(int argc, char **argv)
{
    char dir[DIR_LEN];
    uint32_t *w;
    CUstream s;
    exit_on_alarm(240);
    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("BRAID_EMU_DEVICES", "2", 1);
    int st = other_mode(argc, argv);
    if (st >= 0)
        return st;
    if (!setup() || !CU(cuMemHostAlloc((void **)&w, 4096, 0)) ||
        !CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) || !tmpdir_make(dir)) {
        printf("emu_p2p: cannot go on\n");
        return 1;
    }
    check_peer_devices();
    check_peer_enable();
    check_batch_args(s, w);
    check_batch_run(s, w);
    check_host_release(s, w);
    check_devices();
    check_rates(argv[0], dir);
    if (!strict_env())
        check_again(argv[0], dir, "--devices", 1);
    check_faults(argv[0], dir);
    rate_kernels(strict_env() ? "strict, one thread per launch" : "one thread per launch");
    check_again(argv[0], dir, "--kernels", 0);
    tmpdir_remove(dir);
    CU(cuStreamDestroy(s));
    CU(cuMemFreeHost(w));
    printf("emu_p2p: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
#endif
