/*
 * late_rank: a rank that is alive but never arrives is reported once the collective timeout
 * expires, with the ranks still missing, on every host.
 *
 * BRAID_TIMEOUT=3. After one all-reduce together (every rank past init), the late rank of 4
 * waits, alive, instead of calling the second; the others must fail with ncclRemoteError
 * after 3 to 10 s, their last error naming the late rank as missing. Once every other rank
 * has recorded its failure (a flag each), the late rank makes the call: its peers have
 * failed, so it must fail too, promptly, and every rank can abort. Two scenarios:
 *
 *   one host:    rank 1 late;
 *   two hosts:   ranks 0,1 on one host and 2,3 on another (NCCL_HOSTID, over loopback),
 *                rank 3 late: ranks 0 and 1 learn that rank 3 has not started by asking
 *                it over the health link, rank 2 reads it in shared memory.
 *
 * `late_rank --rank` runs one rank of the two-host scenario under another launcher
 * (RANK, WORLD_SIZE, NCCL_COMM_ID and NCCL_HOSTID set; tests/integration/test_net.sh runs
 * it in network namespaces): the last rank is late and exits after a while without the
 * second call; the others check their error as above. Exit 0 when its checks passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_util.h"

#define NRANKS 4
#define COUNT 100000
#define TIMEOUT_S 3.0
#define REPORT_MIN_S 2.5
#define REPORT_MAX_S 10.0
#define LATE_LIMIT_S 5.0
#define ALONE_LATE_S 20.0   /* --rank: how long the late rank stays before it exits */

static int late_rank = 1;   /* the rank that does not make the second call */
static int two_hosts;       /* ranks 0,1 on host "a", 2,3 on host "b" */

/* Does the message name rank `r` in a list of missing ranks ("ranks 1 (...)", "rank 1 ",
 * "..., 3 (...)")? */
static int names_rank(const char *msg, int r)
{
    const char *miss = strstr(msg, "have not reached");
    char a[32], b[32], c[32];
    snprintf(a, sizeof(a), "ranks %d ", r);
    snprintf(b, sizeof(b), ", %d (", r);
    snprintf(c, sizeof(c), "rank %d ", r);
    if (miss == NULL)
        return 0;
    return strstr(msg, a) != NULL || strstr(msg, b) != NULL || strstr(msg, c) != NULL;
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
    if (!names_rank(ft_sh->text[rank], late_rank))
        ft_fail("rank %d: last error does not name rank %d as missing: %s", rank, late_rank,
                ft_sh->text[rank]);
    printf("late_rank: rank %d failed after %.2f s: %s\n", rank, waited, ft_sh->text[rank]);
    ft_sh->flag[rank] = 1;
    while (ft_sh->flag[late_rank] == 0)   /* keep the comm alive until the late rank tried */
        ft_sleep(0.01);
    return 0;
}

static int late(int rank, ncclComm_t comm, float *s, float *d)
{
    for (int r = 0; r < NRANKS; r++)   /* sleep (alive) until the others gave up */
        while (r != late_rank && ft_sh->flag[r] == 0)
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
    ft_sh->flag[late_rank] = 1;
    return 0;
}

/* Init, one good all-reduce together (the failure is about the second), then `second`. */
static int rank_run(int rank, int n, int (*second)(int, ncclComm_t, float *, float *))
{
    ncclComm_t comm = ft_comm_init(rank, n);
    float *s = calloc(COUNT, sizeof(float)), *d = calloc(COUNT, sizeof(float));
    if (s == NULL || d == NULL)
        return 99;
    if (ncclAllReduce(s, d, COUNT, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
        ft_fail("rank %d: first ncclAllReduce failed: %s", rank, ncclGetLastError(NULL));
    int rc = second(rank, comm, s, d);
    if (ncclCommAbort(comm) != ncclSuccess)
        ft_fail("rank %d: ncclCommAbort failed: %s", rank, ncclGetLastError(NULL));
    free(s);
    free(d);
    return rc;
}

static int rank_main(int rank, int n)
{
    if (two_hosts) {
        setenv("NCCL_HOSTID", rank < n / 2 ? "late-rank-host-a" : "late-rank-host-b", 1);
        /* UCX, the default provider, would find the "hosts" on one machine and use shared
         * memory between them (whose segments LeakSanitizer reports as UCX's leaks) */
        setenv("UCX_TLS", "tcp", 0);
    }
    return rank_run(rank, n, rank == late_rank ? late : waiter);
}

static void scenario(const char *what, int late, int hosts)
{
    int status[NRANKS];
    late_rank = late;
    two_hosts = hosts;
    if (ft_launch(NRANKS, rank_main, 50, status) != 0) {
        ft_fail("%s: cannot start the ranks", what);
        return;
    }
    for (int r = 0; r < NRANKS; r++)
        if (!ft_exited(status[r], 0))
            ft_fail("%s: rank %d ended with status 0x%x", what, r, status[r]);
    ft_shm_leftovers(ft_sh->pid[0], 1);
}

/* --rank: with no shared page, the late rank only stays long enough for the others to
 * time out and diagnose; they check their own error. */
static int alone_late(int rank, ncclComm_t comm, float *s, float *d)
{
    (void)comm, (void)s, (void)d;
    printf("late_rank: rank %d stays out of the second all-reduce\n", rank);
    ft_sleep(ALONE_LATE_S);
    return 0;
}

static int alone_waiter(int rank, ncclComm_t comm, float *s, float *d)
{
    double t0 = ft_now();
    ncclResult_t r = ncclAllReduce(s, d, COUNT, ncclFloat32, ncclSum, comm, NULL);
    const char *text = ncclGetLastError(NULL);
    if (r != ncclRemoteError)
        ft_fail("rank %d: ncclAllReduce returned %d (%s), expected ncclRemoteError: %s", rank,
                (int)r, ncclGetErrorString(r), text);
    else if (!names_rank(text, late_rank))
        ft_fail("rank %d: its error does not name rank %d as missing: %s", rank, late_rank,
                text);
    else
        printf("late_rank: rank %d failed after %.2f s: %s\n", rank, ft_now() - t0, text);
    return 0;
}

static int alone(void)
{
    const char *rs = getenv("RANK"), *ns = getenv("WORLD_SIZE");
    int rank = rs ? atoi(rs) : -1, n = ns ? atoi(ns) : 0;
    if (rank < 0 || n < 2 || rank >= n) {
        fprintf(stderr, "late_rank --rank: set RANK and WORLD_SIZE\n");
        return 99;
    }
    late_rank = n - 1;
    int rc = rank_run(rank, n, rank == late_rank ? alone_late : alone_waiter);
    return rc != 0 ? rc : ft_failures() ? 1 : 0;
}

int main(int argc, char **argv)
{
    ft_name = "late_rank";
    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("BRAID_TIMEOUT", "3", 1);
    if (argc > 1 && strcmp(argv[1], "--rank") == 0)
        return alone();
    scenario("one host", 1, 0);
    scenario("two hosts", NRANKS - 1, 1);
    printf("late_rank: 2 scenarios run (%d ranks: one host, rank 1 late; two hosts of 2, "
           "rank %d late), %d failures\n", NRANKS, NRANKS - 1, ft_failures());
    return ft_failures() ? 1 : 0;
}
