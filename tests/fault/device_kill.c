/*
 * device_kill: a rank killed with SIGKILL in the middle of a device collective on the GPU
 * engine (transports/p2p, src/exec/gpu.c) must not hang the others' streams.
 *
 * 3 processes on the CUDA driver (braid's emulated one in CI) loop on rounds of three 16
 * MiB float all-reduces of device buffers queued one after the other, each rank on a
 * stream of its own, synchronising it after each round. In the third round rank 1 queues
 * its first call, waits until the others say (a flag in shared memory) that they queued
 * all three, and kills itself: the others' calls wait for it with calls queued behind
 * (whose wait for the caller's stream must not hide that the earlier waits for a peer).
 * The others' streams must be released and ncclCommGetAsyncError say ncclRemoteError,
 * naming rank 1, within 15 s of the kill; then ncclCommAbort must return within 5 s.
 *
 * Exit: 0 pass, 1 fail, 77 no driver, 99 setup error.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_util.h"
#include "tests/common/cudrv.h"

#define NRANKS 3
#define VICTIM 1
#define COUNT (4u << 20)            /* floats: 16 MiB, several FIFO slices per step */
#define KILL_AT_ITER 3
#define CALLS_PER_ROUND 3
#define DETECT_LIMIT_S 15.0
#define ABORT_LIMIT_S 5.0

static cudrv_t cu;

/* Once every other rank has queued the round's calls: a kill in the middle of them. */
static void victim_die(int n)
{
    for (int r = 0; r < n; r++)
        while (r != VICTIM && ft_sh->flag[r] != KILL_AT_ITER)
            ft_sleep(0.001);
    ft_sh->t_event = ft_now();
    raise(SIGKILL);
}

static int survivor_check(int rank, ncclComm_t comm, ncclResult_t r, double released)
{
    double waited = released - ft_sh->t_event;
    ncclResult_t async = ncclSuccess;
    if (r == ncclSuccess && ncclCommGetAsyncError(comm, &async) == ncclSuccess)
        r = async;
    ft_record(rank, r, waited);
    if (r != ncclRemoteError)
        ft_fail("rank %d: got %d (%s), expected ncclRemoteError; last error: %s", rank, (int)r,
                ncclGetErrorString(r), ft_sh->text[rank]);
    if (ft_sh->t_event == 0 || waited > DETECT_LIMIT_S)
        ft_fail("rank %d: its stream was released %.1f s after the kill (limit %.0f s)", rank,
                waited, DETECT_LIMIT_S);
    if (strstr(ft_sh->text[rank], "rank 1") == NULL)
        ft_fail("rank %d: the last error does not name rank 1: %s", rank, ft_sh->text[rank]);
    double t0 = ft_now();
    ncclResult_t ra = ncclCommAbort(comm);
    if (ra != ncclSuccess || ft_now() - t0 > ABORT_LIMIT_S)
        ft_fail("rank %d: ncclCommAbort returned %d after %.1f s", rank, (int)ra, ft_now() - t0);
    printf("device_kill: rank %d's stream was released %.2f s after the kill: %s\n", rank,
           waited, ft_sh->text[rank]);
    return 0;
}

static int kill_rank(int rank, int n)
{
    CUstream s;
    CUdeviceptr in, out;
    cudrv_load(&cu);
    CUDRV(cu.stream_create(&s, CU_STREAM_NON_BLOCKING));
    CUDRV(cu.alloc(&in, COUNT * sizeof(float)));
    CUDRV(cu.alloc(&out, COUNT * sizeof(float)));
    CUDRV(cu.memset32(in, 0x3f800000u, COUNT, s));   /* 1.0f */
    ncclComm_t comm = ft_comm_init(rank, n);
    for (int it = 1; it <= 1000; it++) {
        ncclResult_t async = ncclSuccess;
        ncclResult_t r = ncclSuccess;
        for (int c = 0; c < CALLS_PER_ROUND && r == ncclSuccess; c++) {
            r = ncclAllReduce((void *)(uintptr_t)in, (void *)(uintptr_t)out, COUNT,
                              ncclFloat32, ncclSum, comm, s);
            if (rank == VICTIM && it == KILL_AT_ITER)
                victim_die(n);
        }
        ft_sh->flag[rank] = it;
        CUDRV(cu.stream_sync(s));   /* returns once the call ran, or braid released it */
        double released = ft_now();
        if (r == ncclSuccess)
            ncclCommGetAsyncError(comm, &async);
        if (r != ncclSuccess || async != ncclSuccess)
            return survivor_check(rank, comm, r, released);
    }
    ft_fail("rank %d: 1000 rounds of all-reduces went through although rank 1 was to be "
            "killed", rank);
    return 1;
}

int main(void)
{
    int status[NRANKS];
    ft_name = "device_kill";
    ft_watchdog(120);
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);   /* no cuInit here: a child forked */
    if (lib == NULL) {                               /* after it could not use the driver */
        printf("device_kill: SKIP: no CUDA driver (libcuda.so.1: %s)\n", dlerror());
        return 77;
    }
    dlclose(lib);
    if (ft_shared_map() != 0 || ft_launch(NRANKS, kill_rank, 90, status) != 0)
        return 99;
    if (!ft_killed(status[VICTIM], SIGKILL) || ft_sh->t_event == 0)
        ft_fail("rank 1 ended with status 0x%x, not killed in its third round", status[VICTIM]);
    for (int r = 0; r < NRANKS; r++)
        if (r != VICTIM && !ft_exited(status[r], 0))
            ft_fail("rank %d ended with status 0x%x", r, status[r]);
    printf("device_kill: %s\n", ft_failures() ? "FAILED" : "passed");
    return ft_failures() ? 1 : 0;
}
