/*
 * mismatch: ranks that make different calls get a clear error naming both sides, not a
 * hang. Each case runs on a fresh 2-rank job:
 *
 *   count    rank 0 all-reduces 1000 floats, rank 1 2000
 *   kind     rank 0 calls ncclAllReduce, rank 1 ncclBroadcast (root 0)
 *   dtype    rank 0 all-reduces float, rank 1 int32 (same byte size)
 *   op       rank 0 all-reduces with sum, rank 1 with max
 *   root     ncclBroadcast with root 0 on rank 0 and root 1 on rank 1: each rank only
 *            sends, so neither sees the other's header in that call; the message arrives
 *            at the next call, a correct all-reduce, which must fail on both ranks
 *
 * In every case a correct all-reduce follows the mismatched call (on a rank whose call
 * succeeded) and must fail too: the communicator is out of step. Every rank must get an
 * error within 10 s of its call; a rank that detects the mismatch returns ncclInvalidUsage
 * and says what both sides called (both values of what differs: "sum" and "max", not op
 * numbers); a rank that only sees the other give up returns ncclRemoteError. At least one
 * rank must detect it, and every rank's error names the other rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fault_util.h"

#define LIMIT_S 10.0
#define BIG 4096

typedef struct mm_case {
    const char *name;
    const char *word0, *word1;   /* each must appear in the detecting rank's text */
    int may_pass;                /* 1: the mismatched call itself may succeed (root) */
} mm_case_t;

static const mm_case_t cases[] = {
    { "count", "count 1000", "count 2000", 0 },
    { "kind", "AllReduce", "Broadcast", 0 },
    { "dtype", "float", "int32", 0 },
    { "op", "sum", "max", 0 },
    { "root", "root 0", "root 1", 1 },
};

/* The correct all-reduce after the mismatched call, on a rank whose call succeeded. */
typedef struct mm_next {
    int ran[2];
    int result[2];
    double elapsed[2];
    char text[2][FT_TEXT];
} mm_next_t;

static mm_next_t *next;
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
    case 3: return ncclAllReduce(s, d, 1000, ncclFloat32, rank ? ncclMax : ncclSum, comm, NULL);
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
    if (r == ncclSuccess) {   /* undetected here: the next call must fail, not hang */
        t0 = ft_now();
        next->result[rank] = ncclAllReduce(s, d, 10, ncclFloat32, ncclSum, comm, NULL);
        next->elapsed[rank] = ft_now() - t0;
        snprintf(next->text[rank], FT_TEXT, "%s", ncclGetLastError(NULL));
        next->ran[rank] = 1;
    }
    ft_sh->flag[rank] = 1;
    while (ft_sh->flag[1 - rank] == 0)   /* abort only once both have their error */
        ft_sleep(0.005);
    ncclCommAbort(comm);
    free(s);
    free(d);
    return 0;
}

/* Rank r's first failed call: its result, time and text (-1: none failed). */
static int first_error(int r, double *elapsed_p, const char **text_p)
{
    int next_ran = next->ran[r];
    *elapsed_p = next_ran ? next->elapsed[r] : ft_sh->elapsed[r];
    *text_p = next_ran ? next->text[r] : ft_sh->text[r];
    return next_ran ? next->result[r] : ft_sh->result[r];
}

static void check_case(const mm_case_t *c, const int *status)
{
    int detected = 0;
    for (int r = 0; r < 2; r++) {
        double took;
        const char *t;
        char other[16];
        int res = first_error(r, &took, &t);
        snprintf(other, sizeof(other), "rank %d", 1 - r);
        if (!ft_exited(status[r], 0)) {
            ft_fail("%s: rank %d ended with status 0x%x", c->name, r, status[r]);
            continue;
        }
        if (next->ran[r] && !c->may_pass)
            ft_fail("%s: rank %d: the mismatched call succeeded", c->name, r);
        if (res == ncclSuccess)
            ft_fail("%s: rank %d: %s succeeded", c->name, r,
                    next->ran[r] ? "the all-reduce after the mismatched call" : "the call");
        else if (res != ncclInvalidUsage && res != ncclRemoteError)
            ft_fail("%s: rank %d: got %s, want ncclInvalidUsage (it saw the mismatch) or "
                    "ncclRemoteError (the other rank gave up): %s", c->name, r,
                    ncclGetErrorString((ncclResult_t)res), t);
        else if (took > LIMIT_S)
            ft_fail("%s: rank %d: the error took %.1f s", c->name, r, took);
        else if (strstr(t, other) == NULL)
            ft_fail("%s: rank %d: last error does not name %s: %s", c->name, r, other, t);
        if (res == ncclInvalidUsage && strstr(t, c->word0) != NULL && strstr(t, c->word1) != NULL)
            detected = 1;
        printf("mismatch: %s: rank %d got %s%s after %.2f s: %s\n", c->name, r,
               ncclGetErrorString((ncclResult_t)res),
               next->ran[r] ? " in the next call" : "", took, t);
    }
    if (!detected)
        ft_fail("%s: no rank returned ncclInvalidUsage naming both sides ('%s' and '%s')",
                c->name, c->word0, c->word1);
}

int main(void)
{
    int status[2], ncases = 0;
    ft_name = "mismatch";
    setvbuf(stdout, NULL, _IOLBF, 0);
    next = mmap(NULL, sizeof(*next), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                0);
    if (next == MAP_FAILED)
        return 99;
    for (which = 0; which < (int)(sizeof(cases) / sizeof(cases[0])); which++) {
        memset(next, 0, sizeof(*next));
        if (ft_launch(2, rank_main, 25, status) != 0)
            return 99;
        check_case(&cases[which], status);
        ft_shm_leftovers(ft_sh->pid[0], 1);
        ncases++;
    }
    printf("mismatch: %d cases, %d failures\n", ncases, ft_failures());
    return ft_failures() || ncases == 0 ? 1 : 0;
}
