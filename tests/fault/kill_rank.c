/*
 * kill_rank: a rank killed with SIGKILL must not hang the others.
 *
 *   mid-collective  4 ranks loop on a 16 MiB float all-reduce; rank 2 kills itself from a
 *                   helper thread once every rank has finished two calls (all past init and
 *                   exchanging) and rank 2's output of the third shows the call at work (its
 *                   receive buffer, set to a sentinel before the call, has results in it).
 *                   The other ranks must get ncclRemoteError (from the call, or
 *                   ncclCommGetAsyncError) within 15 s of the kill, with a last error naming
 *                   rank 2; then ncclCommAbort must return promptly. Run twice: through the
 *                   FIFOs (ring), and with BRAID_SHM_CMA=1, where the survivors read rank 2's
 *                   buffers with process_vm_readv (two-shot) when it dies.
 *   during setup    rank 2 stops itself inside ncclCommInitRank once its shared-memory
 *                   segment is made (BRAID_SETUP_PAUSE=shm), and a watcher process it forked
 *                   first kills it there. The others' init must fail (not hang), and the
 *                   dead rank's segment must not be left behind.
 *
 * After each scenario no braid-* segment of the job may remain in /dev/shm. Each waits for
 * the state it needs (flags in the shared page, the victim's own buffer, its stopped
 * state), never for time to pass.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_util.h"

#define NRANKS 4
#define VICTIM 2
#define COUNT (4u << 20)        /* floats: 16 MiB, many pipeline slices */
#define KILL_AT_ITER 3
#define SETUP_REPORT_S 5.0      /* a setup peer's death is seen within this */
#define DETECT_LIMIT_S 15.0
#define ABORT_LIMIT_S 5.0

/* ---- mid-collective ------------------------------------------------------------------ */

#define SENTINEL 0xffffffffu    /* a NaN: the sum of zeros never writes it */
#define PROBE_STRIDE 4096u      /* elements between the probes of the victim's output */

static uint32_t *victim_out;    /* rank 2's receive buffer */

/* Has some of the output of the call in flight been written? */
static int output_started(void)
{
    for (size_t i = 0; i < COUNT; i += PROBE_STRIDE)
        if (__atomic_load_n(&victim_out[i], __ATOMIC_RELAXED) != SENTINEL)
            return 1;
    return 0;
}

static void *killer_main(void *arg)
{
    (void)arg;
    /* every rank has finished KILL_AT_ITER - 1 calls with the others (the main thread bumps
     * its flag before each call, after setting its output to the sentinel) ... */
    for (int r = 0; r < NRANKS; r++)
        while (ft_sh->flag[r] < KILL_AT_ITER)
            ft_sleep(0.0005);
    /* ... and rank 2's call KILL_AT_ITER is writing results */
    while (!output_started())
        ft_sleep(0.0002);
    ft_sh->t_event = ft_now();
    ft_sh->result[VICTIM] = ft_sh->flag[VICTIM];   /* the call it died in, for the log */
    raise(SIGKILL);
    return NULL;
}

static int survivor_check(int rank, ncclComm_t comm, ncclResult_t r)
{
    double waited = ft_now() - ft_sh->t_event;
    ncclResult_t async = ncclSuccess;
    ft_record(rank, r, waited);
    if (r == ncclSuccess && ncclCommGetAsyncError(comm, &async) == ncclSuccess)
        r = async;
    if (r != ncclRemoteError)
        ft_fail("rank %d: got %d (%s), expected ncclRemoteError; last error: %s", rank, (int)r,
                ncclGetErrorString(r), ft_sh->text[rank]);
    if (ft_sh->t_event == 0 || waited > DETECT_LIMIT_S)
        ft_fail("rank %d: the failure took %.1f s to be reported (limit %.0f s)", rank, waited,
                DETECT_LIMIT_S);
    if (strstr(ft_sh->text[rank], "rank 2") == NULL)
        ft_fail("rank %d: last error does not name rank 2: %s", rank, ft_sh->text[rank]);
    /* abort only once every survivor has its error: an abort is news to the others */
    ft_sh->flag[rank] = -1;
    for (int r = 0; r < NRANKS; r++)
        while (r != VICTIM && ft_sh->flag[r] != -1 && ft_now() - ft_sh->t_event < 30)
            ft_sleep(0.001);
    double t0 = ft_now();
    ncclResult_t ra = ncclCommAbort(comm);
    if (ra != ncclSuccess || ft_now() - t0 > ABORT_LIMIT_S)
        ft_fail("rank %d: ncclCommAbort returned %d after %.1f s", rank, (int)ra, ft_now() - t0);
    printf("kill_rank: rank %d saw ncclRemoteError %.2f s after the kill: %s\n", rank, waited,
           ft_sh->text[rank]);
    return 0;
}

static int mid_rank(int rank, int n)
{
    ncclComm_t comm = ft_comm_init(rank, n);
    float *s = calloc(COUNT, sizeof(float));
    uint32_t *d = calloc(COUNT, sizeof(uint32_t));
    pthread_t killer;
    if (s == NULL || d == NULL)
        return 99;
    victim_out = d;
    if (rank == VICTIM && pthread_create(&killer, NULL, killer_main, NULL) != 0)
        return 99;
    int rc = -1;
    for (int it = 1; it <= 1000 && rc < 0; it++) {
        if (rank == VICTIM && it == KILL_AT_ITER)
            memset(d, 0xff, COUNT * sizeof(uint32_t));     /* SENTINEL everywhere */
        ft_sh->flag[rank] = it;
        ncclResult_t r = ncclAllReduce(s, d, COUNT, ncclFloat32, ncclSum, comm, NULL);
        if (r != ncclSuccess ||   /* or calls keep succeeding long after the kill: a bug */
            (rank != VICTIM && ft_sh->t_event != 0 && ft_now() - ft_sh->t_event > DETECT_LIMIT_S))
            rc = survivor_check(rank, comm, r);
    }
    if (rc < 0) {
        ft_fail("rank %d: 1000 all-reduces went through although rank 2 was to be killed", rank);
        rc = 1;
    }
    free(s);
    free(d);
    return rc;
}

/* ---- during setup -------------------------------------------------------------------- */

/*
 * Rank 2 stops itself once its shared-memory segment is made (BRAID_SETUP_PAUSE=shm), so
 * that the others wait for it in their setup; a watcher it forked first kills it there.
 */
static void setup_watcher(pid_t victim)
{
    double deadline = ft_now() + 30;
    while (ft_now() < deadline) {
        if (ft_proc_stopped(victim)) {
            ft_sh->t_event = ft_now();
            kill(victim, SIGKILL);
            break;
        }
        ft_sleep(0.001);
    }
    _exit(0);
}

static int setup_rank(int rank, int n)
{
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    double t0 = ft_now();
    if (rank == VICTIM) {
        pid_t me = getpid();
        setenv("BRAID_SETUP_PAUSE", "shm", 1);
        if (fork() == 0)
            setup_watcher(me);
    }
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r == ncclSuccess)
        r = ncclCommInitRank(&comm, n, id, rank);
    ft_record(rank, r, ft_now() - t0);
    ft_sh->elapsed[rank] = ft_now();   /* when it failed: the clock is the launcher's too */
    if (r == ncclSuccess) {
        ft_fail("setup: rank %d's init went through although rank %d died inside its own",
                rank, VICTIM);
        ncclCommAbort(comm);
    }
    return 0;
}

static void run_setup_scenario(void)
{
    int status[NRANKS];
    if (ft_launch(NRANKS, setup_rank, 45, status) != 0) {
        ft_fail("setup: cannot start the ranks");
        return;
    }
    if (!ft_killed(status[VICTIM], SIGKILL) || ft_sh->t_event == 0)
        ft_fail("setup: rank 2 ended with status 0x%x: it never stopped at its setup pause "
                "(not killed inside ncclCommInitRank)", status[VICTIM]);
    for (int r = 0; r < NRANKS; r++) {
        if (r == VICTIM)
            continue;
        double took = ft_sh->elapsed[r] - ft_sh->t_event;
        if (!ft_exited(status[r], 0))
            ft_fail("setup: rank %d ended with status 0x%x", r, status[r]);
        else if (ft_sh->result[r] != ncclRemoteError || strstr(ft_sh->text[r], "rank 2 ") == NULL)
            ft_fail("setup: rank %d's init returned %s, want ncclRemoteError naming rank 2: %s",
                    r, ncclGetErrorString((ncclResult_t)ft_sh->result[r]), ft_sh->text[r]);
        else if (took > SETUP_REPORT_S)
            ft_fail("setup: rank %d failed %.1f s after rank 2 died (limit %.0f s)", r, took,
                    SETUP_REPORT_S);
        else
            printf("kill_rank: setup: rank %d's init failed %.2f s after the kill: %s\n", r,
                   took, ft_sh->text[r]);
    }
    ft_shm_leftovers(ft_sh->pid[0], 1);
}

int main(void)
{
    int status[NRANKS], scenarios = 0;
    ft_name = "kill_rank";
    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("BRAID_BOOTSTRAP_TIMEOUT", "10", 1);
    static const char *const cma[] = { "0", "1" };
    for (int i = 0; i < 2; i++) {
        printf("kill_rank: mid-collective, BRAID_SHM_CMA=%s\n", cma[i]);
        setenv("BRAID_SHM_CMA", cma[i], 1);
        if (ft_launch(NRANKS, mid_rank, 50, status) != 0)
            return 99;
        if (!ft_killed(status[VICTIM], SIGKILL))
            ft_fail("mid-collective: rank 2 ended with status 0x%x, not SIGKILL",
                    status[VICTIM]);
        else
            printf("kill_rank: rank 2 killed itself inside its all-reduce #%d\n",
                   ft_sh->result[VICTIM]);
        for (int r = 0; r < NRANKS; r++)
            if (r != VICTIM && !ft_exited(status[r], 0))
                ft_fail("mid-collective: rank %d ended with status 0x%x", r, status[r]);
        ft_shm_leftovers(ft_sh->pid[0], 1);
        scenarios++;
    }
    unsetenv("BRAID_SHM_CMA");

    printf("kill_rank: during setup\n");
    setenv("BRAID_BOOTSTRAP_TIMEOUT", "60", 1);   /* a wait for it cannot pass as prompt */
    run_setup_scenario();
    scenarios++;
    printf("kill_rank: %d scenarios run, %d failures\n", scenarios, ft_failures());
    return ft_failures() ? 1 : 0;
}
