/*
 * late_rank: a rank that is alive but never arrives is reported once the collective timeout
 * expires, with the ranks still missing.
 *
 * BRAID_TIMEOUT=3. After one all-reduce together (every rank past init), rank 1 of 4 waits,
 * alive, instead of calling the second; the others must fail with ncclRemoteError after 3
 * to 10 s, their last error naming rank 1 as missing. Once every other rank has recorded its
 * failure (a flag each), rank 1 makes the call: its peers have failed, so it must fail too,
 * promptly, and every rank can abort.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_util.h"

#define NRANKS 4
#define LATE 1
#define COUNT 100000
#define TIMEOUT_S 3.0
#define REPORT_MIN_S 2.5
#define REPORT_MAX_S 10.0
#define LATE_LIMIT_S 5.0

/* Does the message name rank 1 in a list of missing ranks ("ranks 1 (...)", "rank 1 ")? */
static int names_rank1(const char *msg)
{
    return strstr(msg, "ranks 1 ") != NULL || strstr(msg, "ranks 1,") != NULL ||
           strstr(msg, "rank 1 ") != NULL || strstr(msg, "rank 1,") != NULL;
}

static int waiter(int rank, ncclComm_t comm, float *s, float *d)
{
    double t0 = ft_now();
    ncclResult_t r = ncclAllReduce(s, d, COUNT, ncclFloat32, ncclSum, comm, NULL);
    double waited = ft_now() - t0;
    ft_record(rank, r, waited);
    if (r != ncclRemoteError)
        ft_fail("rank %d: ncclAllReduce returned %d (%s), expected ncclRemoteError; last "
                "error: %s", rank, (int)r, ncclGetErrorString(r), ft_sh->text[rank]);
    if (waited < REPORT_MIN_S || waited > REPORT_MAX_S)
        ft_fail("rank %d: failed after %.1f s, expected %.0f to %.0f s (BRAID_TIMEOUT=%.0f)",
                rank, waited, REPORT_MIN_S, REPORT_MAX_S, TIMEOUT_S);
    if (!names_rank1(ft_sh->text[rank]) || strstr(ft_sh->text[rank], "not reached") == NULL)
        ft_fail("rank %d: last error does not name rank 1 as missing: %s", rank,
                ft_sh->text[rank]);
    printf("late_rank: rank %d failed after %.2f s: %s\n", rank, waited, ft_sh->text[rank]);
    ft_sh->flag[rank] = 1;
    while (ft_sh->flag[LATE] == 0)   /* keep the comm alive until the late rank tried */
        ft_sleep(0.01);
    return 0;
}

static int late(int rank, ncclComm_t comm, float *s, float *d)
{
    for (int r = 0; r < NRANKS; r++)   /* sleep (alive) until the others gave up */
        while (r != LATE && ft_sh->flag[r] == 0)
            ft_sleep(0.01);
    double t0 = ft_now();
    ncclResult_t r = ncclAllReduce(s, d, COUNT, ncclFloat32, ncclSum, comm, NULL);
    double waited = ft_now() - t0;
    ft_record(rank, r, waited);
    if (r == ncclSuccess || waited > LATE_LIMIT_S)
        ft_fail("late rank %d: ncclAllReduce after the others failed returned %d after %.1f s "
                "(expected an error within %.0f s); last error: %s", rank, (int)r, waited,
                LATE_LIMIT_S, ft_sh->text[rank]);
    else
        printf("late_rank: late rank %d got %s after %.2f s: %s\n", rank, ncclGetErrorString(r),
               waited, ft_sh->text[rank]);
    ft_sh->flag[LATE] = 1;
    return 0;
}

static int rank_main(int rank, int n)
{
    ncclComm_t comm = ft_comm_init(rank, n);
    float *s = calloc(COUNT, sizeof(float)), *d = calloc(COUNT, sizeof(float));
    if (s == NULL || d == NULL)
        return 99;
    /* one good collective first: the failure is about the second */
    if (ncclAllReduce(s, d, COUNT, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
        ft_fail("rank %d: first ncclAllReduce failed: %s", rank, ncclGetLastError(NULL));
    int rc = rank == LATE ? late(rank, comm, s, d) : waiter(rank, comm, s, d);
    if (ncclCommAbort(comm) != ncclSuccess)
        ft_fail("rank %d: ncclCommAbort failed: %s", rank, ncclGetLastError(NULL));
    free(s);
    free(d);
    return rc;
}

int main(void)
{
    int status[NRANKS];
    ft_name = "late_rank";
    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("BRAID_TIMEOUT", "3", 1);
    if (ft_launch(NRANKS, rank_main, 50, status) != 0)
        return 99;
    for (int r = 0; r < NRANKS; r++)
        if (!ft_exited(status[r], 0))
            ft_fail("rank %d ended with status 0x%x", r, status[r]);
    ft_shm_leftovers(ft_sh->pid[0], 1);
    printf("late_rank: 1 scenario run (%d ranks, rank %d late), %d failures\n", NRANKS, LATE,
           ft_failures());
    return ft_failures() ? 1 : 0;
}
