/*
 * The emulated driver in strict mode (BRAID_EMU_STRICT=1): a second process that
 * emu_driver.c starts with its stderr in a file of the test's folder, where these checks
 * read what the emulator says.
 *
 * Checks: the legacy NULL stream waits for what blocking streams queued before each of its
 * operations, and they for what it queued, even for a stream destroyed meanwhile;
 * non-blocking streams neither wait nor are waited for. The driver lock: a cuMemAlloc
 * waits while another thread's pageable copy waits for its stream, and the emulator says
 * so (BRAID_EMU_LOCK_WARN_MS is short here); it does not wait for a cuStreamSynchronize;
 * two threads' pageable copies do not wait for each other. Lazy loading: a function's
 * first launch waits for the driver lock; after cuFuncGetAttribute it does not. Time
 * slices: our kernel waits while another process's kernel runs on the device (one that
 * never ends, until that process is killed). Device memory: a host load or store there
 * faults, in this process and in one that opened it by IPC; copies, memsets, stream
 * memory operations and kernels reach it.
 *
 * Nothing here depends on how fast the machine is: what must not happen is held back by
 * a gate (a stream waiting for a pinned word that the host writes after the check), and a
 * check that something does not happen gives it SETTLE_MS first, so a slow machine can
 * only make a broken emulator pass, never a sound one fail.
 */
#if __has_include(<cuda.h>)

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/device/emu_test.h"

/* What the checks share. */
typedef struct strict {
    const char *argv0, *dir;
    char errfile[PATH_LEN];     /* our stderr: what the emulator says */
    CUcontext ctx;
    unsigned char *pinned;      /* NBYTES */
    uint32_t *gate;             /* pinned too */
    unsigned char *pageable;    /* NBYTES of malloc'd memory */
    CUdeviceptr d;              /* NBYTES of device memory */
    CUfunction copy;            /* braid_k_copy, loaded */
} strict_t;

/* A call the checks cannot go on without. */
#define NEED(call) \
    do { \
        if (!CU(call)) \
            give_up(); \
    } while (0)

static void give_up(void)
{
    printf("emu_driver --strict: cannot go on\n");
    exit(1);
}

/* ---- calls on other threads -------------------------------------------------------------- */

/* A driver call on a thread of its own: its arguments, its thread's id and its result. */
typedef struct bg {
    CUresult (*call)(struct bg *b);
    CUcontext ctx;
    CUstream s;
    CUdeviceptr dst, src;
    void *host;
    CUfunction f;
    pthread_t thread;
    int tid;
    int started, done;          /* atomic */
    CUresult result;
} bg_t;

static void *bg_main(void *arg)
{
    bg_t *b = arg;
    CUresult r = cuCtxSetCurrent(b->ctx);
    b->tid = (int)syscall(SYS_gettid);
    __atomic_store_n(&b->started, 1, __ATOMIC_RELEASE);
    b->result = r != CUDA_SUCCESS ? r : b->call(b);
    __atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Start b->call on a thread of its own; return once it is about to call. */
static void bg_start(bg_t *b, CUresult (*call)(bg_t *b))
{
    b->call = call;
    if (pthread_create(&b->thread, NULL, bg_main, b) != 0) {
        perror("emu_driver: pthread_create");
        give_up();
    }
    while (!__atomic_load_n(&b->started, __ATOMIC_ACQUIRE))
        sleep_ms(1);
}

static CUresult bg_join(bg_t *b)
{
    pthread_join(b->thread, NULL);
    return b->result;
}

static int bg_done(const bg_t *b)
{
    return __atomic_load_n(&b->done, __ATOMIC_ACQUIRE);
}

static CUresult call_pageable_copy(bg_t *b)
{
    return cuMemcpyDtoHAsync(b->host, b->src, NBYTES, b->s);
}

static CUresult call_stream_sync(bg_t *b)
{
    return cuStreamSynchronize(b->s);
}

static CUresult call_mem_alloc(bg_t *b)
{
    return cuMemAlloc(&b->dst, NBYTES);
}

static CUresult call_launch(bg_t *b)
{
    return launch_copy(b->f, b->s, b->dst, b->src, NBYTES);
}

/* Wait up to WAIT_MS for thread tid to sleep (state S): in a call, inside its wait. */
static int wait_asleep(int tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
    for (int t = 0; t < WAIT_MS; t += 5) {
        FILE *f = fopen(path, "r");
        size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f != NULL)
            fclose(f);
        buf[n] = '\0';
        const char *end = strrchr(buf, ')');     /* "tid (name) S ..." */
        if (end != NULL && end[1] == ' ' && end[2] == 'S')
            return 1;
        sleep_ms(5);
    }
    return 0;
}

/*
 * Thread a holds the driver lock shared, certainly, until release_shared: its pageable
 * copy (t->d to t->pageable) goes on a blocking stream, which waits for a gate on the NULL
 * stream, so once that stream is NOT_READY the copy is queued, so the lock taken, and it
 * stays so. Is it?
 */
static int hold_shared(const strict_t *t, bg_t *a)
{
    *a = (bg_t){ .ctx = t->ctx, .src = t->d, .host = t->pageable };
    NEED(cuStreamCreate(&a->s, 0));
    gate_close(NULL, t->gate);
    bg_start(a, call_pageable_copy);
    int queued = wait_stream(a->s, CUDA_ERROR_NOT_READY, WAIT_MS);
    check(queued, "a pageable copy waits behind a gate");
    return queued;
}

static void release_shared(const strict_t *t, bg_t *a)
{
    gate_open(t->gate);
    CU(bg_join(a));
    CU(cuStreamDestroy(a->s));
}

/* ---- the legacy stream's implicit synchronisation ---------------------------------------- */

/*
 * A blocking stream's memset held back by a gate, then a copy on the NULL stream: the copy
 * waits for the memset, even once the stream is destroyed. Then the other way round: a
 * blocking stream's copy waits for the NULL stream's memset.
 */
static void check_legacy_blocking(const strict_t *t)
{
    CUstream b;
    NEED(cuStreamCreate(&b, 0));
    gate_close(b, t->gate);
    CU(cuMemsetD8Async(t->d, 0x5a, NBYTES, b));
    CU(cuStreamDestroy(b));
    CU(cuMemcpyDtoHAsync(t->pinned, t->d, NBYTES, NULL));
    int early = wait_stream(NULL, CUDA_SUCCESS, SETTLE_MS);
    gate_open(t->gate);
    CU(cuStreamSynchronize(NULL));
    check(!early && all_bytes(t->pinned, NBYTES, 0x5a),
          "the NULL stream waits for a blocking stream's work queued before (stream destroyed)");

    NEED(cuStreamCreate(&b, 0));
    gate_close(NULL, t->gate);
    CU(cuMemsetD8Async(t->d, 0x6b, NBYTES, NULL));
    CU(cuMemcpyDtoHAsync(t->pinned, t->d, NBYTES, b));
    early = wait_stream(b, CUDA_SUCCESS, SETTLE_MS);
    gate_open(t->gate);
    CU(cuStreamSynchronize(b));
    check(!early && all_bytes(t->pinned, NBYTES, 0x6b),
          "a blocking stream waits for the NULL stream's work queued before");
    CU(cuStreamDestroy(b));
}

/* A non-blocking stream held back by a gate does not hold back the NULL stream, nor the
 * other way round. */
static void check_legacy_nonblocking(const strict_t *t)
{
    CUstream n;
    NEED(cuStreamCreate(&n, CU_STREAM_NON_BLOCKING));
    gate_close(n, t->gate);
    CU(cuMemsetD8Async(t->d, 0x61, NBYTES, NULL));
    CU(cuMemcpyDtoHAsync(t->pinned, t->d, NBYTES, NULL));
    int done = wait_stream(NULL, CUDA_SUCCESS, WAIT_MS);
    check(done && cuStreamQuery(n) == CUDA_ERROR_NOT_READY &&
          all_bytes(t->pinned, NBYTES, 0x61),
          "the NULL stream does not wait for a non-blocking stream");
    gate_open(t->gate);
    CU(cuStreamSynchronize(n));

    gate_close(NULL, t->gate);
    CU(cuMemsetD8Async(t->d, 0x7c, NBYTES, n));
    CU(cuMemcpyDtoHAsync(t->pinned, t->d, NBYTES, n));
    done = wait_stream(n, CUDA_SUCCESS, WAIT_MS);
    check(done && cuStreamQuery(NULL) == CUDA_ERROR_NOT_READY &&
          all_bytes(t->pinned, NBYTES, 0x7c),
          "a non-blocking stream does not wait for the NULL stream");
    gate_open(t->gate);
    CU(cuStreamSynchronize(NULL));
    CU(cuStreamDestroy(n));
}

/* ---- the driver lock --------------------------------------------------------------------- */

/*
 * While thread a's pageable copy waits for its stream, thread b's cuMemAlloc waits for
 * the driver lock: it has not returned when the emulator says it waited too long, naming
 * both; it returns once the gate opens, and a's copy has copied.
 */
static void check_lock_alloc(const strict_t *t)
{
    bg_t a, b = { .ctx = t->ctx };
    char waiter[128], holder[128];
    CU(cuMemsetD8(t->d, 0x4e, NBYTES));
    int held = hold_shared(t, &a);
    bg_start(&b, call_mem_alloc);
    snprintf(waiter, sizeof(waiter), "strict: cuMemAlloc on thread %d has waited", b.tid);
    snprintf(holder, sizeof(holder), "held by cuMemcpyDtoHAsync (pageable) on thread %d (for",
             a.tid);
    int said = held && wait_for_text(t->errfile, waiter, &b.done);
    check(said && file_has(t->errfile, holder) && !bg_done(&b),
          "cuMemAlloc waits for the driver lock while another thread's pageable copy waits "
          "for its stream, and the emulator says so");
    release_shared(t, &a);
    check(all_bytes(t->pageable, NBYTES, 0x4e), "the pageable copy copied");
    if (CU(bg_join(&b)))
        CU(cuMemFree(b.dst));
}

/* The same with a in cuStreamSynchronize, which does not take the lock: b goes on. */
static void check_lock_sync(const strict_t *t)
{
    bg_t a = { .ctx = t->ctx }, b = { .ctx = t->ctx };
    NEED(cuStreamCreate(&a.s, CU_STREAM_NON_BLOCKING));
    gate_close(a.s, t->gate);
    bg_start(&a, call_stream_sync);
    int asleep = wait_asleep(a.tid);
    bg_start(&b, call_mem_alloc);
    int returned = wait_flag(&b.done, WAIT_MS);
    check(asleep && returned && !bg_done(&a),
          "cuMemAlloc does not wait for another thread in cuStreamSynchronize");
    gate_open(t->gate);
    CU(bg_join(&a));
    if (CU(bg_join(&b)))
        CU(cuMemFree(b.dst));
    CU(cuStreamDestroy(a.s));
}

/* Two threads' pageable copies: the second returns while the first still waits. */
static void check_lock_shared(const strict_t *t)
{
    bg_t a, c = { .ctx = t->ctx, .src = t->d, .host = malloc(NBYTES) };
    int held = hold_shared(t, &a);
    NEED(cuStreamCreate(&c.s, CU_STREAM_NON_BLOCKING));
    bg_start(&c, call_pageable_copy);
    int returned = wait_flag(&c.done, WAIT_MS);
    check(held && returned && !bg_done(&a),
          "two threads' pageable copies do not wait for each other");
    release_shared(t, &a);
    CU(bg_join(&c));
    CU(cuStreamDestroy(c.s));
    free(c.host);
}

/* ---- lazy loading ------------------------------------------------------------------------ */

/*
 * Thread b launches a fresh braid_k_copy while thread a holds the driver lock shared: its
 * first launch loads it, so waits for the lock, and the emulator says so; after
 * cuFuncGetAttribute (forced), which loads it, the launch returns at once. Either way the
 * kernel copies.
 */
static void check_lazy_load(const strict_t *t, int forced)
{
    bg_t a, b = { .ctx = t->ctx, .src = t->d };
    unsigned char out[NBYTES];
    char waiter[128];
    CUmodule m;
    int v = 0;
    if (!load_copy_kernel(&m, &b.f))
        return;
    NEED(cuMemAlloc(&b.dst, NBYTES));
    NEED(cuStreamCreate(&b.s, CU_STREAM_NON_BLOCKING));
    CU(cuMemsetD8(t->d, 0x1f, NBYTES));
    if (forced)
        CHECK_AFTER(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, b.f),
                    v == 1024, "cuFuncGetAttribute: %d threads per block", v);
    int held = hold_shared(t, &a);
    bg_start(&b, call_launch);
    snprintf(waiter, sizeof(waiter), "strict: cuLaunchKernel (lazy load) on thread %d has "
             "waited", b.tid);
    if (forced)
        check(held && wait_flag(&b.done, WAIT_MS) && !bg_done(&a),
              "a launch after cuFuncGetAttribute does not wait for the driver lock");
    else
        check(held && wait_for_text(t->errfile, waiter, &b.done) && !bg_done(&b),
              "a function's first launch loads it: it waits for the driver lock, and the "
              "emulator says so");
    release_shared(t, &a);
    CU(bg_join(&b));
    CU(cuStreamSynchronize(b.s));
    CU(cuMemcpyDtoH(out, b.dst, NBYTES));
    check(all_bytes(out, NBYTES, 0x1f), "the lazily loaded kernel copied");
    CU(cuStreamDestroy(b.s));
    CU(cuMemFree(b.dst));
    CU(cuModuleUnload(m));
}

/* ---- device memory the host cannot touch ------------------------------------------------ */

/*
 * A host load or store at a device address faults (in a child); copies, memsets and stream
 * memory operations reach the memory, kernels too (check_lazy_load), and the driver still
 * answers in device addresses. Then IPC: the opening process cannot touch the memory
 * either, and its memset reaches it.
 */
static void check_device_memory(const strict_t *t)
{
    unsigned char out[NBYTES];
    CUdeviceptr base = 0, p = 0;
    size_t size = 0;
    uint32_t v = 0;
    CUstream s;
    check(host_faults(t->d + 100, 0) && host_faults(t->d, 1),
          "a host load or store at a device address faults");
    CU(cuMemsetD8(t->d, 0x2e, NBYTES));
    CU(cuMemcpyDtoH(out, t->d, NBYTES));
    check(all_bytes(out, NBYTES, 0x2e), "a memset and a copy reach device memory");
    NEED(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU(cuStreamWriteValue32(s, t->d + 8, 0x600dcafe, 0));
    CU(cuStreamWaitValue32(s, t->d + 8, 0x600dcafe, CU_STREAM_WAIT_VALUE_EQ));
    int done = wait_stream(s, CUDA_SUCCESS, WAIT_MS);
    CU(cuMemcpyDtoH(&v, t->d + 8, sizeof(v)));
    check(done && v == 0x600dcafe, "stream memory operations reach device memory");
    CU(cuStreamDestroy(s));
    CHECK_AFTER(cuMemGetAddressRange(&base, &size, t->d + 100), base == t->d && size == NBYTES,
                "cuMemGetAddressRange answers in device addresses");
    CHECK_AFTER(cuPointerGetAttribute(&p, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, t->d + 100),
                p == t->d + 100, "cuPointerGetAttribute answers in device addresses");
    t->pinned[0] = 0x11;
    check(!host_faults((CUdeviceptr)(uintptr_t)t->pinned, 0),
          "the host still reaches pinned memory");
    check_ipc(t->argv0);
}

/* ---- time slices between processes ------------------------------------------------------- */

#define HOLD_LINE "braid-emu: BRAID_EMU_STALL_LAUNCH=1: launch 1 (braid_k_copy) never ends\n"

/* The third process (--hold): its one kernel never ends, so it holds device 0 until killed. */
int strict_hold_main(void)
{
    CUcontext ctx;
    CUmodule m;
    CUfunction f;
    CUdeviceptr d;
    if (!CU(cuInit(0)) || !CU(cuDevicePrimaryCtxRetain(&ctx, 0)) || !CU(cuCtxSetCurrent(ctx)) ||
        !CU(cuMemAlloc(&d, NBYTES)) || !load_copy_kernel(&m, &f) ||
        !CU(launch_copy(f, NULL, d, d, NBYTES)))
        return 1;
    for (;;)
        pause();
}

/*
 * A third process (this program, --hold, BRAID_EMU_STALL_LAUNCH=1) runs a kernel that
 * never ends on device 0: once it has said so, our kernel there does not run until that
 * process is killed.
 */
static void check_time_slice(const strict_t *t)
{
    static char stall_env[] = "BRAID_EMU_STALL_LAUNCH=1";
    char *env[] = { stall_env, NULL };
    char errfile[PATH_LEN];
    unsigned char out[NBYTES];
    CUstream n;
    CUdeviceptr src;
    NEED(cuStreamCreate(&n, CU_STREAM_NON_BLOCKING));
    NEED(cuMemAlloc(&src, NBYTES));
    CU(cuMemsetD8(src, 0x3a, NBYTES));
    tmpdir_path(errfile, t->dir, "hold.err");
    pid_t pid = spawn_self(t->argv0, "--hold", NULL, errfile, env);
    int held = wait_for_text(errfile, HOLD_LINE, NULL);
    CU(launch_copy(t->copy, n, t->d, src, NBYTES));
    int early = wait_stream(n, CUDA_SUCCESS, SETTLE_MS);
    kill(pid, SIGKILL);
    wait_child(pid, errfile);
    CU(cuStreamSynchronize(n));
    CU(cuMemcpyDtoH(out, t->d, NBYTES));
    check(held && !early && all_bytes(out, NBYTES, 0x3a),
          "our kernel waits while another process's kernel runs on the device, and runs once "
          "that process is killed");
    CU(cuMemFree(src));
    CU(cuStreamDestroy(n));
}

int strict_main(const char *argv0, const char *dir)
{
    strict_t t = { .argv0 = argv0, .dir = dir };
    CUmodule m;
    tmpdir_path(t.errfile, dir, "strict.err");
    NEED(cuInit(0));
    NEED(cuDevicePrimaryCtxRetain(&t.ctx, 0));
    NEED(cuCtxSetCurrent(t.ctx));
    NEED(cuMemHostAlloc((void **)&t.pinned, NBYTES + 64, 0));
    NEED(cuMemAlloc(&t.d, NBYTES));
    t.gate = (uint32_t *)(t.pinned + NBYTES);
    t.pageable = malloc(NBYTES);
    check_legacy_blocking(&t);
    check_legacy_nonblocking(&t);
    check_lock_alloc(&t);
    check_lock_sync(&t);
    check_lock_shared(&t);
    check_device_memory(&t);
    if (load_copy_kernel(&m, &t.copy)) {
        check_lazy_load(&t, 0);
        check_lazy_load(&t, 1);
        check_time_slice(&t);
        CU(cuModuleUnload(m));
    }
    CU(cuMemFree(t.d));
    CU(cuMemFreeHost(t.pinned));
    free(t.pageable);
    printf("emu_driver --strict: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}

#endif
