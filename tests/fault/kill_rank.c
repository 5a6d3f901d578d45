/*
 * kill_rank: a rank killed with SIGKILL must not hang the others.
 *
 *   mid-collective  4 ranks loop on a 16 MiB float all-reduce; rank 2 kills itself from a
 *                   helper thread while its main thread is inside the third call. The other
 *                   ranks must get ncclRemoteError (from the call, or ncclCommGetAsyncError)
 *                   within 15 s of the kill, with a last error naming rank 2; then
 *                   ncclCommAbort must return promptly. Run twice: through the FIFOs (ring),
 *                   and with BRAID_SHM_CMA=1, where the survivors read rank 2's buffers with
 *                   process_vm_readv (two-shot) when it dies.
 *   during setup    rank 2 kills itself the moment its shared-memory segment appears in
 *                   /dev/shm (inotify), inside ncclCommInitRank. The others' init must fail
 *                   (not hang), and the dead rank's segment must not be left behind. The
 *                   kill comes from another thread, so on a busy machine rank 2 may get
 *                   through its last exchange first, and then a peer that already has
 *                   everything legitimately completes its init: such an attempt counts as
 *                   "too late" and is retried, like one where rank 2 was never killed.
 *
 * After each scenario no braid-* segment of the job may remain in /dev/shm.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "fault_util.h"

#define NRANKS 4
#define VICTIM 2
#define COUNT (4u << 20)        /* floats: 16 MiB, many pipeline slices */
#define KILL_AT_ITER 3
#define DETECT_LIMIT_S 15.0
#define ABORT_LIMIT_S 5.0

/* ---- mid-collective ------------------------------------------------------------------ */

static void *killer_main(void *arg)
{
    (void)arg;
    while (ft_sh->flag[VICTIM] < KILL_AT_ITER)   /* main thread bumps it before each call */
        ft_sleep(0.001);
    ft_sleep(0.02);                               /* well inside the call */
    ft_sh->t_event = ft_now();
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
    float *s = calloc(COUNT, sizeof(float)), *d = calloc(COUNT, sizeof(float));
    pthread_t killer;
    if (s == NULL || d == NULL)
        return 99;
    if (rank == VICTIM && pthread_create(&killer, NULL, killer_main, NULL) != 0)
        return 99;
    int rc = -1;
    for (int it = 1; it <= 1000 && rc < 0; it++) {
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

/* Watch /dev/shm: kill this process as soon as a segment of rank 2 of this job appears. */
static void *setup_killer_main(void *arg)
{
    int fd = *(int *)arg;
    char tag[48], buf[4096] __attribute__((aligned(8)));
    snprintf(tag, sizeof(tag), "-%x-%d", (unsigned)ft_sh->pid[0], VICTIM);
    for (;;) {
        ssize_t len = read(fd, buf, sizeof(buf));
        for (char *p = buf; len > 0 && p < buf + len;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            size_t tl = strlen(tag), nl = ev->len ? strlen(ev->name) : 0;
            if (nl > tl && strncmp(ev->name, "braid-", 6) == 0 &&
                strcmp(ev->name + nl - tl, tag) == 0) {
                ft_sh->t_event = ft_now();
                raise(SIGKILL);
            }
            p += sizeof(*ev) + ev->len;
        }
    }
    return NULL;
}

static int setup_rank(int rank, int n)
{
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    pthread_t killer;
    static int fd;
    if (rank == VICTIM) {
        while (ft_sh->pid[0] == 0)
            ft_sleep(0.001);
        fd = inotify_init();
        if (fd < 0 || inotify_add_watch(fd, "/dev/shm", IN_CREATE) < 0 ||
            pthread_create(&killer, NULL, setup_killer_main, &fd) != 0)
            return 77;
    }
    if (rank == NRANKS - 1)
        ft_sleep(0.5);   /* the others wait for it with their segments made */
    double t0 = ft_now();
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r == ncclSuccess)
        r = ncclCommInitRank(&comm, n, id, rank);
    ft_record(rank, r, ft_now() - t0);
    if (r == ncclSuccess) {
        ft_sh->flag[rank] = 1;   /* init went through: the kill came too late */
        ncclCommAbort(comm);
    }
    return 0;
}

static int run_setup_scenario(int *status)
{
    if (ft_launch(NRANKS, setup_rank, 45, status) != 0)
        return 99;
    if (ft_exited(status[VICTIM], 77))
        return 77;
    if (!ft_killed(status[VICTIM], SIGKILL))
        return -1;   /* the segment never showed up, or init went through first: retry */
    int late = 0;
    for (int r = 0; r < NRANKS; r++) {
        if (r == VICTIM)
            continue;
        if (!ft_exited(status[r], 0))
            ft_fail("setup: rank %d ended with status 0x%x", r, status[r]);
        else if (ft_sh->flag[r])
            late = 1;
        else
            printf("kill_rank: setup: rank %d init failed after %.2f s: %s\n", r,
                   ft_sh->elapsed[r], ft_sh->text[r]);
    }
    ft_shm_leftovers(ft_sh->pid[0], 1);
    if (late)
        printf("kill_rank: setup: rank 2 died after its last exchange (a peer completed its "
               "init): retrying\n");
    return late ? -1 : 0;
}

int main(void)
{
    int status[NRANKS];
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
        for (int r = 0; r < NRANKS; r++)
            if (r != VICTIM && !ft_exited(status[r], 0))
                ft_fail("mid-collective: rank %d ended with status 0x%x", r, status[r]);
        ft_shm_leftovers(ft_sh->pid[0], 1);
    }
    unsetenv("BRAID_SHM_CMA");

    int rc = -1;
    for (int attempt = 0; attempt < 5 && rc < 0; attempt++)
        rc = run_setup_scenario(status);
    if (rc == 77)
        printf("kill_rank: setup scenario skipped (no inotify on /dev/shm)\n");
    else if (rc < 0)
        ft_fail("setup: could not kill rank 2 inside its ncclCommInitRank in 5 attempts");
    else if (rc == 99)
        return 99;
    return ft_failures() ? 1 : 0;
}
