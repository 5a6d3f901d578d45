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
 * Then the same 3 processes, with rank 1 killed while the device is timed at init: the
 * GPU engine's laps of the ranks' ring wait on each rank's stream for the rank before it.
 * BRAID_SETUP_PAUSE=device_lap stops rank 1 before its second lap (its first has shown
 * every rank past the barrier before them, so the others go on into the second and wait
 * there for it); a process it forked before its init kills it once it has stopped. The
 * others' ncclCommInitRank must fail with ncclRemoteError within 15 s of the kill, saying
 * that rank 1 died while they timed their device; one of them may instead hear first of
 * the other's end (its failed init's communicator destroyed before this one saw the death;
 * or its released stream lets the lap go on to the next barrier, where its notice waits),
 * but not both.
 *
 *     device_kill [call|calib]    (default: both)
 *
 * Exit: 0 pass, 1 fail, 77 no driver, 99 setup error.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* A process of the victim's, forked before its init: kills it once it has stopped at its
 * BRAID_SETUP_PAUSE step (or leaves when it is gone). */
static void calib_killer(void)
{
    pid_t victim = getpid();
    fflush(NULL);
    if (fork() != 0)
        return;
    for (double end = ft_now() + 60; ft_now() < end && kill(victim, 0) == 0; ft_sleep(0.001))
        if (ft_proc_stopped(victim)) {
            ft_sh->t_event = ft_now();
            kill(victim, SIGKILL);
            break;
        }
    _exit(0);
}

static int calib_rank(int rank, int n)
{
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    setenv("BRAID_CALIBRATE", "1", 1);
    if (rank == VICTIM) {
        setenv("BRAID_SETUP_PAUSE", "device_lap", 1);
        calib_killer();
    }
    cudrv_load(&cu);    /* the runtime loaded, as in a GPU program (braid then finds HIP's) */
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r == ncclSuccess)
        r = ncclCommInitRank(&comm, n, id, rank);
    double waited = ft_now() - ft_sh->t_event;
    ft_record(rank, r, waited);
    if (r == ncclSuccess)
        ncclCommAbort(comm);
    const char *t = ft_sh->text[rank];
    int timing = strstr(t, "times its device at init") != NULL;
    ft_sh->flag[rank] = timing && strstr(t, "rank 1 (pid") != NULL;
    if (rank == VICTIM)
        ft_fail("rank 1 came out of its init (%s): it was to die in it", ncclGetErrorString(r));
    else if (r != ncclRemoteError)
        ft_fail("rank %d: init returned %d (%s), expected ncclRemoteError: %s", rank, (int)r,
                ncclGetErrorString(r), t);
    else if (ft_sh->t_event == 0 || waited > DETECT_LIMIT_S)
        ft_fail("rank %d: init failed %.1f s after the kill (limit %.0f s)", rank, waited,
                DETECT_LIMIT_S);
    else if (!timing && strstr(t, "failed its part of the setup") == NULL)
        ft_fail("rank %d: the error says neither that a rank ended in the device timing nor "
                "that another rank failed: %s", rank, t);
    else
        printf("device_kill: calib: rank %d's init failed %.2f s after the kill: %s\n", rank,
               waited, t);
    return 0;
}

/* Run one case's ranks; rank 1 must have died by SIGKILL (`when`: where), the others
 * exited 0. */
static int run_case(int (*fn)(int, int), const char *when)
{
    int status[NRANKS];
    if (ft_shared_map() != 0 || ft_launch(NRANKS, fn, 90, status) != 0)
        return 99;
    if (!ft_killed(status[VICTIM], SIGKILL) || ft_sh->t_event == 0)
        ft_fail("rank 1 ended with status 0x%x, not killed %s", status[VICTIM], when);
    for (int r = 0; r < NRANKS; r++)
        if (r != VICTIM && !ft_exited(status[r], 0))
            ft_fail("rank %d ended with status 0x%x", r, status[r]);
    return 0;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "all";
    int all = strcmp(which, "all") == 0;
    ft_name = "device_kill";
    ft_watchdog(240);
    if (!all && strcmp(which, "call") != 0 && strcmp(which, "calib") != 0) {
        fprintf(stderr, "usage: device_kill [call|calib]\n");
        return 99;
    }
    const char *rt;
    void *lib = cudrv_open(&rt);   /* no initialising here: a child forked after it */
    if (lib == NULL) {             /* could not use the runtime */
        printf("device_kill: SKIP: no GPU runtime (%s: %s)\n", rt, dlerror());
        return 77;
    }
    dlclose(lib);
    if ((all || strcmp(which, "call") == 0) &&
        run_case(kill_rank, "in its third round") != 0)
        return 99;
    if (all || strcmp(which, "calib") == 0) {
        if (run_case(calib_rank, "in its device timing") != 0)
            return 99;
        if (ft_sh->flag[0] + ft_sh->flag[2] == 0)
            ft_fail("calib: no rank's error says that rank 1 died in the device timing");
    }
    printf("device_kill: %s\n", ft_failures() ? "FAILED" : "passed");
    return ft_failures() ? 1 : 0;
}
