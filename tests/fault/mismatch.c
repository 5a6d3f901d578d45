/*
 * mismatch: ranks that make different calls get a clear error naming both sides, not a
 * hang. Each case runs on a fresh 2-rank job:
 *
 *   count    rank 0 all-reduces 1000 floats, rank 1 2000
 *   kind     rank 0 calls ncclAllReduce, rank 1 ncclBroadcast (root 0)
 *   dtype    rank 0 all-reduces float, rank 1 int32 (same byte size)
 *   root     ncclBroadcast with root 0 on rank 0 and root 1 on rank 1 (informational:
 *            each rank only sends, nobody receives a header to compare; reported as a NOTE),
 *            followed by a correct all-reduce that must not hang
 *
 * Every rank must get an error within 10 s; at least one rank's last error must say what
 * both sides called (both values of what differs), and every rank's must name the other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_util.h"

#define LIMIT_S 10.0
#define BIG 4096

typedef struct mm_case {
    const char *name;
    const char *word0, *word1;   /* each must appear in the diagnosing rank's text */
    int strict;                  /* 0: report a miss as a NOTE, not a failure */
} mm_case_t;

static const mm_case_t cases[] = {
    { "count", "1000", "2000", 1 },
    { "kind", "AllReduce", "Broadcast", 1 },
    { "dtype", "float", "int32", 1 },
    { "root", "root 0", "root 1", 0 },
};

static int which;

static ncclResult_t mm_call(int rank, ncclComm_t comm, void *s, void *d)
{
    switch (which) {
    case 0: return ncclAllReduce(s, d, rank ? 2000 : 1000, ncclFloat32, ncclSum, comm, NULL);
    case 1:
        return rank ? ncclBroadcast(s, d, 1000, ncclFloat32, 0, comm, NULL)
                    : ncclAllReduce(s, d, 1000, ncclFloat32, ncclSum, comm, NULL);
    case 2:
        return ncclAllReduce(s, d, 1000, rank ? ncclInt32 : ncclFloat32, ncclSum, comm, NULL);
    default: return ncclBroadcast(s, d, 1000, ncclFloat32, rank, comm, NULL);
    }
}

static int rank_main(int rank, int n)
{
    ncclComm_t comm = ft_comm_init(rank, n);
    void *s = calloc(BIG, 8), *d = calloc(BIG, 8);
    double t0 = ft_now();
    ncclResult_t r = mm_call(rank, comm, s, d);
    ft_record(rank, r, ft_now() - t0);
    if (r == ncclSuccess) {   /* undetected: the next call must still not hang */
        ncclResult_t r2 = ncclAllReduce(s, d, 10, ncclFloat32, ncclSum, comm, NULL);
        printf("mismatch: %s: rank %d: a correct all-reduce after it returned %s: %s\n",
               cases[which].name, rank, ncclGetErrorString(r2),
               r2 == ncclSuccess ? "" : ncclGetLastError(NULL));
    }
    ft_sh->flag[rank] = 1;
    while (ft_sh->flag[1 - rank] == 0)   /* abort only once both have their error */
        ft_sleep(0.005);
    ncclCommAbort(comm);
    free(s);
    free(d);
    return 0;
}

static void check_case(const mm_case_t *c, const int *status)
{
    int diagnosed = 0;
    for (int r = 0; r < 2; r++) {
        if (!c->strict && ft_exited(status[r], 0) && ft_sh->result[r] == ncclSuccess) {
            printf("mismatch: NOTE: %s: rank %d: the mismatched call was not detected\n",
                   c->name, r);
            diagnosed = 1;
            continue;
        }
        const char *t = ft_sh->text[r];
        char other[16];
        snprintf(other, sizeof(other), "rank %d", 1 - r);
        if (!ft_exited(status[r], 0))
            ft_fail("%s: rank %d ended with status 0x%x", c->name, r, status[r]);
        else if (ft_sh->result[r] == ncclSuccess)
            ft_fail("%s: rank %d: the mismatched call succeeded", c->name, r);
        else if (ft_sh->elapsed[r] > LIMIT_S)
            ft_fail("%s: rank %d: the error took %.1f s", c->name, r, ft_sh->elapsed[r]);
        else if (strstr(t, other) == NULL)
            ft_fail("%s: rank %d: last error does not name %s: %s", c->name, r, other, t);
        diagnosed |= strstr(t, c->word0) != NULL && strstr(t, c->word1) != NULL;
        printf("mismatch: %s: rank %d got %s after %.2f s: %s\n", c->name, r,
               ncclGetErrorString((ncclResult_t)ft_sh->result[r]), ft_sh->elapsed[r], t);
    }
    if (!diagnosed)
        ft_fail("%s: no rank's error names both sides ('%s' and '%s')", c->name, c->word0,
                c->word1);
}

int main(void)
{
    int status[2];
    ft_name = "mismatch";
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (which = 0; which < (int)(sizeof(cases) / sizeof(cases[0])); which++) {
        if (ft_launch(2, rank_main, 25, status) != 0)
            return 99;
        check_case(&cases[which], status);
        ft_shm_leftovers(ft_sh->pid[0], 1);
    }
    return ft_failures() ? 1 : 0;
}
