/*
 * How fast the emulated driver runs braid's GPU-resident data path (emu_p2p's second part):
 * round trips of stream memory operations between two threads (each on its device's
 * primary context, the counters in device memory reached by plain pointers) and between
 * two processes (counters opened by IPC), and braid's kernels on 16 MiB.
 *
 * A round trip: side A's stream writes B's counter to i, then waits for its own to reach
 * i (one cuStreamBatchMemOp of two operations); B's waits for its counter to reach i, then
 * writes A's. Rates are printed, never checked: a machine may be slow. What is checked is
 * that every round trip happens (the counters end at the count); a lost one never ends,
 * and the test's alarm fails it.
 */
#if __has_include(<cuda.h>)

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gpu/kargs.h"
#include "tests/device/emu_test.h"

/* The first process's buffer: its counter, the second's ready flag and IPC handle, and
 * where the second's kernel copies to (NBYTES, from NBYTES on). */
#define PP_COUNTER 0
#define PP_READY 16
#define PP_HANDLE 64
#define PP_FILL 0xc1            /* what the second process's kernel copies */

#define BENCH_BYTES (16u << 20)
#define BENCH_REPS 5
#define BENCH_GRID 1024         /* braid's largest launch (src/exec/dev_kernels.c) */
#define BENCH_BLOCK 256
#define DTYPE_FP32 7            /* ncclFloat32 */
#define OP_SUM 0                /* ncclSum */
#define FP32_1 0x3f800000u
#define FP32_2 0x40000000u
#define FP32_3 0x40400000u

/* Queue round i on s: write i to `to`, wait for mine >= i, in that order if write_first. */
static CUresult pp_round(CUstream s, CUdeviceptr mine, CUdeviceptr to, uint32_t i,
                         int write_first)
{
    CUstreamBatchMemOpParams p[2];
    memset(p, 0, sizeof(p));
    CUstreamBatchMemOpParams *w = &p[write_first ? 0 : 1], *x = &p[write_first ? 1 : 0];
    w->writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    w->writeValue.address = to;
    w->writeValue.value = i;
    w->writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    x->waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    x->waitValue.address = mine;
    x->waitValue.value = i;
    x->waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    return cuStreamBatchMemOp(s, 2, p, 0);
}

/* Queue rounds 1..n on s (waiting for each with the host if stepped), and wait for them. */
static int pp_run(CUstream s, CUdeviceptr mine, CUdeviceptr to, int n, int write_first,
                  int stepped)
{
    for (int i = 1; i <= n; i++)
        if (!CU(pp_round(s, mine, to, (uint32_t)i, write_first)) ||
            (stepped && !CU(cuStreamSynchronize(s))))
            return 0;
    return CU(cuStreamSynchronize(s));
}

static void rate_print(const char *what, int rounds, double secs)
{
    printf("rate: %s: %d round trips in %.3f s: %.1f k/s, %.1f us each\n", what, rounds, secs,
           rounds / secs / 1e3, secs / rounds * 1e6);
}

/* ---- two threads ------------------------------------------------------------------------- */

typedef struct pp_side {
    int dev;
    struct pp_side *peer;
    pthread_barrier_t *bar;
    int rounds, write_first;
    CUdeviceptr mine;
    int ready, done;            /* set up; all rounds run */
    uint32_t got;               /* its counter at the end */
    double secs;
} pp_side_t;

static int pp_side_setup(pp_side_t *p, CUstream *s_p)
{
    CUresult r;
    if (!CU(cuCtxSetCurrent(p2p_ctx[p->dev])) || !CU(cuMemAlloc(&p->mine, NBYTES)) ||
        !CU(cuMemsetD8(p->mine, 0, NBYTES)) || !CU(cuStreamCreate(s_p, CU_STREAM_NON_BLOCKING)))
        return 0;
    if (p->peer->dev == p->dev)
        return 1;
    r = cuCtxEnablePeerAccess(p2p_ctx[p->peer->dev], 0);
    return r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED || CU(r);
}

static void *pp_side_main(void *arg)
{
    pp_side_t *p = arg;
    CUstream s = NULL;
    p->ready = pp_side_setup(p, &s);
    pthread_barrier_wait(p->bar);
    if (p->ready && p->peer->ready) {
        double t0 = now_s();
        p->done = pp_run(s, p->mine, p->peer->mine, p->rounds, p->write_first, 0);
        p->secs = now_s() - t0;
        CU(cuMemcpyDtoH(&p->got, p->mine, sizeof(p->got)));
    }
    pthread_barrier_wait(p->bar);       /* the other writes our counter no more */
    if (p->peer->dev != p->dev)
        cuCtxDisablePeerAccess(p2p_ctx[p->peer->dev]);
    if (s != NULL)
        CU(cuStreamDestroy(s));
    if (p->mine != 0)
        CU(cuMemFree(p->mine));
    return NULL;
}

void rate_threads(int d0, int d1, int rounds)
{
    pthread_barrier_t bar;
    pthread_t t[2];
    pp_side_t side[2] = {
        { .dev = d0, .peer = &side[1], .bar = &bar, .rounds = rounds, .write_first = 1 },
        { .dev = d1, .peer = &side[0], .bar = &bar, .rounds = rounds, .write_first = 0 },
    };
    char what[96];
    pthread_barrier_init(&bar, NULL, 2);
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, pp_side_main, &side[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&bar);
    snprintf(what, sizeof(what), "two threads, devices %d and %d%s", d0, d1,
             d0 != d1 ? " (peer access)" : "");
    check(side[0].done && side[1].done && side[0].got == (uint32_t)rounds &&
          side[1].got == (uint32_t)rounds, "%s: %d round trips of batched stream memory "
          "operations, none lost (counters %u, %u)", what, rounds, side[0].got, side[1].got);
    if (side[0].done)
        rate_print(what, rounds, side[0].secs);
}

/* ---- two processes ----------------------------------------------------------------------- */

/* The second process: "<handle>,<device>,<rounds>". Open the first's buffer, give it our
 * counter's handle, say ready, run every round (all queued at once), then copy PP_FILL
 * into its buffer with a kernel. */
int rate_procs_child(const char *arg)
{
    CUipcMemHandle h, mine_h;
    CUcontext ctx;
    CUdeviceptr buf, mine;
    CUstream s;
    CUmodule m;
    CUfunction f;
    int dev, rounds;
    uint32_t got = 0;
    if (!hex_decode(arg, h.reserved, sizeof(h.reserved)) ||
        sscanf(arg + 2 * sizeof(h.reserved), ",%d,%d", &dev, &rounds) != 2)
        return 2;
    if (!CU(cuInit(0)) || !CU(cuDevicePrimaryCtxRetain(&ctx, dev)) ||
        !CU(cuCtxSetCurrent(ctx)) ||
        !CU(cuIpcOpenMemHandle(&buf, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) ||
        !CU(cuMemAlloc(&mine, 2 * NBYTES)) || !CU(cuMemsetD8(mine, 0, NBYTES)) ||
        !CU(cuMemsetD8(mine + NBYTES, PP_FILL, NBYTES)) ||
        !CU(cuIpcGetMemHandle(&mine_h, mine)) ||
        !CU(cuMemcpyHtoD(buf + PP_HANDLE, &mine_h, sizeof(mine_h))) ||
        !CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) ||
        !CU(cuStreamWriteValue32(s, buf + PP_READY, 1, CU_STREAM_WRITE_VALUE_DEFAULT)))
        return 3;
    pp_run(s, mine, buf + PP_COUNTER, rounds, 0, 0);
    CU(cuMemcpyDtoH(&got, mine, sizeof(got)));
    check(got == (uint32_t)rounds, "second process: its counter is %u", got);
    if (load_copy_kernel(&m, &f)) {
        CU(launch_copy(f, s, buf + NBYTES, mine + NBYTES, NBYTES));
        CU(cuStreamSynchronize(s));
        CU(cuModuleUnload(m));
    }
    CU(cuStreamDestroy(s));
    CU(cuIpcCloseMemHandle(buf));
    CU(cuMemFree(mine));
    return failures != 0;
}

/* Start the second process on device cdev; once it is ready, open its counter: 0 if not. */
static pid_t pp_spawn(const char *argv0, const char *errfile, CUdeviceptr buf, CUstream s,
                      int cdev, int rounds, CUdeviceptr *peer_p)
{
    CUipcMemHandle h;
    char arg[2 * sizeof(h.reserved) + 32];
    if (!CU(cuIpcGetMemHandle(&h, buf)))
        return 0;
    hex_encode(h.reserved, sizeof(h.reserved), arg);
    snprintf(arg + 2 * sizeof(h.reserved), 32, ",%d,%d", cdev, rounds);
    pid_t pid = spawn_self(argv0, "--pingpong", arg, errfile, NULL);
    if (!CU(cuStreamWaitValue32(s, buf + PP_READY, 1, CU_STREAM_WAIT_VALUE_GEQ)) ||
        !CU(cuStreamSynchronize(s)) || !CU(cuMemcpyDtoH(&h, buf + PP_HANDLE, sizeof(h))) ||
        !CU(cuIpcOpenMemHandle(peer_p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))) {
        wait_child(pid, errfile);
        return 0;
    }
    return pid;
}

void rate_procs(const char *argv0, const char *dir, int cdev, int rounds, int stepped)
{
    CUdeviceptr buf, peer;
    CUstream s;
    char errfile[PATH_LEN], what[128];
    unsigned char out[NBYTES];
    uint32_t got = 0;
    if (!CU(cuCtxSetCurrent(p2p_ctx[0])) || !CU(cuMemAlloc(&buf, 2 * NBYTES)) ||
        !CU(cuMemsetD8(buf, 0, 2 * NBYTES)) || !CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)))
        return;
    tmpdir_path(errfile, dir, "pingpong.err");
    pid_t pid = pp_spawn(argv0, errfile, buf, s, cdev, rounds, &peer);
    if (pid != 0) {
        double t0 = now_s();
        int done = pp_run(s, buf + PP_COUNTER, peer, rounds, 1, stepped);
        double secs = now_s() - t0;
        CU(cuMemcpyDtoH(&got, buf + PP_COUNTER, sizeof(got)));
        int st = wait_child(pid, errfile);
        CU(cuMemcpyDtoH(out, buf + NBYTES, NBYTES));
        snprintf(what, sizeof(what), "two processes, devices 0 and %d, IPC%s", cdev,
                 stepped ? ", the host waiting for each (the other's waits all queued)" : "");
        check(done && got == (uint32_t)rounds && st == 0 && all_bytes(out, NBYTES, PP_FILL),
              "%s: %d round trips, none lost (counter %u, second process's exit status %d, "
              "its kernel wrote our memory)", what, rounds, got, st);
        if (done)
            rate_print(what, rounds, secs);
        CU(cuIpcCloseMemHandle(peer));
    }
    CU(cuStreamDestroy(s));
    CU(cuMemFree(buf));
}

/* ---- kernels ----------------------------------------------------------------------------- */

/* The best of BENCH_REPS launches of f with a, as braid launches its largest: seconds. */
static double best_launch(CUfunction f, CUstream s, braid_kargs_t *a)
{
    void *params[] = { a };
    double best = 1e30;
    for (int r = 0; r < BENCH_REPS; r++) {
        double t0 = now_s();
        if (!CU(cuLaunchKernel(f, BENCH_GRID, 1, 1, BENCH_BLOCK, 1, 1, 0, s, params, NULL)) ||
            !CU(cuStreamSynchronize(s)))
            return 0;
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    return best;
}

/* The best of BENCH_REPS memcpy's of BENCH_BYTES: seconds. */
static double best_memcpy(void)
{
    char *a = malloc(BENCH_BYTES), *b = malloc(BENCH_BYTES);
    double best = 1e30;
    if (a == NULL || b == NULL)
        return 0;
    memset(a, 1, BENCH_BYTES);
    memset(b, 2, BENCH_BYTES);
    for (int r = 0; r < BENCH_REPS; r++) {
        double t0 = now_s();
        memcpy(b, a, BENCH_BYTES);
        __asm__ __volatile__("" : : "r"(b) : "memory");
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    free(a);
    free(b);
    return best;
}

/* Does device memory p hold the 32-bit word v first and last? */
static int ends_are(CUdeviceptr p, uint32_t v)
{
    uint32_t w[2] = { 0, 0 };
    CU(cuMemcpyDtoH(&w[0], p, 4));
    CU(cuMemcpyDtoH(&w[1], p + BENCH_BYTES - 4, 4));
    return w[0] == v && w[1] == v;
}

static void bench_run(CUfunction copy, CUfunction reduce, CUstream s, const CUdeviceptr d[3],
                      const char *label)
{
    braid_kargs_t a;
    memset(&a, 0, sizeof(a));
    a.in[0] = (const void *)(uintptr_t)d[0];
    a.out[0] = (void *)(uintptr_t)d[2];
    a.count = BENCH_BYTES;
    double tc = best_launch(copy, s, &a);
    int copied = ends_are(d[2], FP32_1);
    a.in[1] = (const void *)(uintptr_t)d[1];
    a.count = BENCH_BYTES / 4;
    a.nin = 2;
    a.dtype = DTYPE_FP32;
    a.op = OP_SUM;
    double tr = best_launch(reduce, s, &a);
    int summed = ends_are(d[2], FP32_3);
    double tm = best_memcpy();
    check(tc > 0 && tr > 0 && copied && summed, "kernels (%s): braid_k_copy copied and "
          "braid_k_reduce summed 16 MiB", label);
    if (tc > 0 && tr > 0 && tm > 0)
        printf("rate: kernels (%s, grid %d x %d): braid_k_copy 16 MiB %.2f GB/s, "
               "braid_k_reduce fp32 sum of 2 inputs 16 MiB %.2f GB/s; memcpy of 16 MiB on "
               "this machine %.2f GB/s (bytes written per second)\n", label, BENCH_GRID,
               BENCH_BLOCK, BENCH_BYTES / tc / 1e9, BENCH_BYTES / tr / 1e9,
               BENCH_BYTES / tm / 1e9);
}

void rate_kernels(const char *label)
{
    CUmodule m;
    CUfunction copy, reduce;
    CUdeviceptr d[3] = { 0, 0, 0 };
    CUstream s;
    if (!CU(cuCtxSetCurrent(p2p_ctx[0])) || !load_copy_kernel(&m, &copy))
        return;
    if (CU(cuModuleGetFunction(&reduce, m, BRAID_KERNEL_REDUCE)) &&
        CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))) {
        int ok = 1;
        for (int i = 0; i < 3 && ok; i++)
            ok = CU(cuMemAlloc(&d[i], BENCH_BYTES));
        if (ok && CU(cuMemsetD32(d[0], FP32_1, BENCH_BYTES / 4)) &&
            CU(cuMemsetD32(d[1], FP32_2, BENCH_BYTES / 4)) &&
            CU(cuMemsetD32(d[2], 0, BENCH_BYTES / 4)))
            bench_run(copy, reduce, s, d, label);
        for (int i = 0; i < 3; i++)
            if (d[i] != 0)
                CU(cuMemFree(d[i]));
        CU(cuStreamDestroy(s));
    }
    CU(cuModuleUnload(m));
}

#endif
