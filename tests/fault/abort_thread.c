/*
 * abort_thread: ncclCommAbort from another thread while a collective is in flight.
 *
 *   processes  2 ranks. Rank 1 never joins the all-reduce (it waits, alive). On rank 0 the
 *              main thread blocks in ncclAllReduce; a second thread calls ncclCommAbort once
 *              the call is seen waiting for rank 1. The all-reduce must return an error
 *              within 3 s of the abort, the abort must return ncclSuccess, nothing may
 *              crash. Then rank 1 calls the all-reduce: its peer aborted, so it must fail
 *              promptly (ncclRemoteError).
 *   threads    the same inside one process: two comms from ncclCommInitAll, only comm 0
 *              calls ncclAllReduce (it waits for comm 1 forever), a thread aborts comm 0;
 *              comm 1 is then aborted too.
 *
 * "Seen waiting": the library's executor, finding nothing to move, backs off with
 * sched_yield and then nanosleep (src/exec/exec.c). This program defines both (the
 * library's calls reach the executable's definitions first): called by the thread inside
 * the all-reduce, they mark the call as waiting, and only then does the abort go out. No
 * sleep decides when.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1   /* syscall; the build's config.h defines it too */
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fault_util.h"

#define COUNT 262144
#define RETURN_LIMIT_S 3.0
#define WAITING_LIMIT_S 30.0

/* The thread inside the all-reduce (0: none), and whether it has waited there. */
static _Atomic pid_t in_call_tid;
static atomic_int call_waited;

static void note_wait(void)
{
    pid_t t = atomic_load(&in_call_tid);
    if (t != 0 && t == (pid_t)syscall(SYS_gettid))
        atomic_store(&call_waited, 1);
}

FT_INTERPOSE int sched_yield(void)
{
    note_wait();
    return (int)syscall(SYS_sched_yield);
}

FT_INTERPOSE int nanosleep(const struct timespec *req, struct timespec *rem)
{
    note_wait();
    return (int)syscall(SYS_clock_nanosleep, CLOCK_REALTIME, 0, req, rem);
}

typedef struct aborter {
    ncclComm_t comm;
    double t_abort;
    int waited;         /* the call was seen waiting before the abort */
    ncclResult_t r;
} aborter_t;

static void *aborter_main(void *arg)
{
    aborter_t *a = arg;
    double end = ft_now() + WAITING_LIMIT_S;
    while (!atomic_load(&call_waited) && ft_now() < end)
        ft_sleep(0.001);
    a->waited = atomic_load(&call_waited);
    a->t_abort = ft_now();
    a->r = ncclCommAbort(a->comm);
    return NULL;
}

/* Block in an all-reduce on comm until another thread aborts it; check how that ends. */
static void blocked_then_aborted(const char *where, ncclComm_t comm)
{
    float *s = calloc(COUNT, sizeof(float)), *d = calloc(COUNT, sizeof(float));
    aborter_t a = { .comm = comm };
    pthread_t tid;
    atomic_store(&call_waited, 0);
    if (s == NULL || d == NULL || pthread_create(&tid, NULL, aborter_main, &a) != 0) {
        ft_fail("%s: cannot set up", where);
        return;
    }
    atomic_store(&in_call_tid, (pid_t)syscall(SYS_gettid));
    ncclResult_t r = ncclAllReduce(s, d, COUNT, ncclFloat32, ncclSum, comm, NULL);
    atomic_store(&in_call_tid, 0);
    double t_ret = ft_now();
    pthread_join(tid, NULL);
    if (!a.waited)
        ft_fail("%s: the all-reduce never waited (no sched_yield or nanosleep from its thread "
                "in %.0f s): the abort could not be aimed at a call in flight", where,
                WAITING_LIMIT_S);
    if (r == ncclSuccess)
        ft_fail("%s: ncclAllReduce succeeded although a rank never joined", where);
    if (a.t_abort == 0 || t_ret < a.t_abort)
        ft_fail("%s: ncclAllReduce returned %d before the abort", where, (int)r);
    else if (t_ret - a.t_abort > RETURN_LIMIT_S)
        ft_fail("%s: ncclAllReduce returned %.1f s after the abort (limit %.0f s)", where,
                t_ret - a.t_abort, RETURN_LIMIT_S);
    if (a.r != ncclSuccess)
        ft_fail("%s: ncclCommAbort from the other thread returned %d: %s", where, (int)a.r,
                ncclGetLastError(NULL));
    printf("abort_thread: %s: ncclAllReduce returned %s %.2f s after the abort: %s\n", where,
           ncclGetErrorString(r), t_ret - a.t_abort, ncclGetLastError(NULL));
    free(s);
    free(d);
}

static int rank_main(int rank, int n)
{
    ncclComm_t comm = ft_comm_init(rank, n);
    if (rank == 0) {
        blocked_then_aborted("processes, rank 0", comm);
        ft_sh->flag[0] = 1;
        return 0;
    }
    while (ft_sh->flag[0] == 0)   /* alive, never joining, until rank 0 is done */
        ft_sleep(0.01);
    ft_sh->flag[1] = 1;
    float *s = calloc(COUNT, sizeof(float)), *d = calloc(COUNT, sizeof(float));
    double t0 = ft_now();
    ncclResult_t r = ncclAllReduce(s, d, COUNT, ncclFloat32, ncclSum, comm, NULL);
    const char *t = ncclGetLastError(NULL);
    if (r != ncclRemoteError || ft_now() - t0 > RETURN_LIMIT_S)
        ft_fail("rank 1: all-reduce with an aborted peer returned %d after %.1f s, expected "
                "ncclRemoteError at once; last error: %s", (int)r, ft_now() - t0, t);
    else if (strstr(t, "rank 0") == NULL || strstr(t, "abort") == NULL)
        ft_fail("rank 1: the error does not say that rank 0 aborted: %s", t);
    else
        printf("abort_thread: rank 1 then got ncclRemoteError: %s\n", t);
    free(s);
    free(d);
    if (ncclCommAbort(comm) != ncclSuccess)
        ft_fail("rank 1: ncclCommAbort failed: %s", ncclGetLastError(NULL));
    return 0;
}

static void threads_case(void)
{
    ncclComm_t comms[2];
    ncclResult_t r = ncclCommInitAll(comms, 2, NULL);
    if (r != ncclSuccess) {
        ft_fail("threads: ncclCommInitAll failed: %s", ncclGetLastError(NULL));
        return;
    }
    blocked_then_aborted("threads, comm 0", comms[0]);
    if (ncclCommAbort(comms[1]) != ncclSuccess)
        ft_fail("threads: ncclCommAbort(comm 1) failed: %s", ncclGetLastError(NULL));
}

int main(void)
{
    int status[2];
    ft_name = "abort_thread";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (ft_launch(2, rank_main, 40, status) != 0)
        return 99;
    for (int r = 0; r < 2; r++)
        if (!ft_exited(status[r], 0))
            ft_fail("processes: rank %d ended with status 0x%x", r, status[r]);
    if (ft_sh->flag[1] == 0)
        ft_fail("processes: rank 1 never got to its all-reduce");
    ft_shm_leftovers(ft_sh->pid[0], 1);
    ft_watchdog(40);
    threads_case();
    ft_shm_leftovers(getpid(), 1);
    printf("abort_thread: 2 scenarios run (processes, threads), %d failures\n", ft_failures());
    return ft_failures() ? 1 : 0;
}
