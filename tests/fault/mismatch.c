/*
 * mismatch: ranks that make different calls get a clear error naming both sides, not a
 * hang. Each case runs on a fresh 2-rank job (3 ranks where the name ends in -3):
 *
 *   count    rank 0 all-reduces 1000 floats, rank 1 2000
 *   kind     rank 0 calls ncclAllReduce, rank 1 ncclBroadcast (root 0)
 *   dtype    rank 0 all-reduces float, rank 1 int32 (same byte size)
 *   op       rank 0 all-reduces with sum, rank 1 with max
 *   root     ncclBroadcast with root 0 on rank 0 and root 1 on rank 1: each believes it
 *            is the root, so neither receives the other's data (root tokens: sched.h)
 *   root-other  ncclBroadcast with root 1 on rank 0 and root 0 on rank 1: each waits for
 *            the other's data
 *   reduce-root, reduce-other, gather-root, scatter-root   the same with ncclReduce,
 *            ncclGather and ncclScatter
 *   group-order  rank 0 groups an all-reduce and a broadcast, rank 1 the broadcast first
 *   group-count  rank 0 groups two all-reduces, rank 1 one, then calls ncclBroadcast:
 *            grouping does not change how calls match (by their number), so the call
 *            that differs is rank 1's broadcast, which meets rank 0's second all-reduce
 *   send-less, send-more  rank 0 sends 100 floats to rank 1, which receives 200 from it;
 *            and 200 against 100 (NCCL wants equal counts; braid reports both)
 *   reduce-next-3, broadcast-next-3  3 ranks, each takes the next rank as the root; and
 *   broadcast-own-3  each takes itself: ranks may wait for data no rank sends them, and
 *            only comparing the calls the others published (core/comm_health.c) finds it
 *            (any rank's call may succeed here; its next call must fail)
 *
 * Every rank's mismatched call must fail, except a sender of a send/recv case (a send
 * does not wait for its receiver) and one of the two ranks where both finish their part
 * without waiting for the other (root, reduce-other, scatter-root): a rank looks for the
 * other's root token without waiting for it, after sending its own data, so at least one
 * of them sees the other's message. A correct all-reduce follows a call that succeeded
 * and must fail: the communicator is out of step. Every rank must get an error within
 * 10 s of its call; a rank that detects the mismatch returns ncclInvalidUsage
 * and says what both sides called (both values of what differs: "sum" and "max", not op
 * numbers); a rank that only sees the other give up returns ncclRemoteError. At least one
 * rank must detect it, and every rank's error names the other rank.
 *
 * With -d the same on device buffers of the CUDA driver (braid's emulated one in CI), on
 * the GPU engine: a call returns at once and its result is the communicator's
 * asynchronous error once its stream went past it (cuStreamSynchronize returns: braid
 * releases a stream whose call failed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fault_util.h"
#include "tests/common/cudrv.h"

#define LIMIT_S 10.0
#define BIG 4096

typedef struct mm_case {
    const char *name;
    const char *word0, *word1;   /* each must appear in the detecting rank's text */
    int may_pass;                /* ranks (bit r) whose mismatched call may succeed; -1:
                                  * either rank's, not both (a root token not yet there) */
    int nranks;                  /* 0: 2 */
} mm_case_t;

static const mm_case_t cases[] = {
    { "count", "count 1000", "count 2000", 0, 0 },
    { "kind", "AllReduce", "Broadcast", 0, 0 },
    { "dtype", "float", "int32", 0, 0 },
    { "op", "sum", "max", 0, 0 },
    { "root", "root 0", "root 1", -1, 0 },
    { "root-other", "root 0", "root 1", 0, 0 },
    { "reduce-root", "root 0", "root 1", 0, 0 },
    { "reduce-other", "root 0", "root 1", -1, 0 },
    { "gather-root", "root 0", "root 1", 0, 0 },
    { "scatter-root", "root 0", "root 1", -1, 0 },
    { "group-order", "AllReduce", "Broadcast", 0, 0 },
    { "group-count", "AllReduce", "Broadcast", 0, 0 },
    { "send-less", "count 100,", "count 200,", 1, 0 },
    { "send-more", "count 200,", "count 100,", 1, 0 },
    { "reduce-next-3", "mismatched calls", "root", 7, 3 },
    { "broadcast-own-3", "mismatched calls", "root", 7, 3 },
    { "broadcast-next-3", "mismatched calls", "root", 7, 3 },
};

/* The correct all-reduce after the mismatched call, on a rank whose call succeeded. */
#define MM_MAXN 3

typedef struct mm_next {
    int ran[MM_MAXN];
    int result[MM_MAXN];
    double elapsed[MM_MAXN];
    char text[MM_MAXN][FT_TEXT];
} mm_next_t;

static mm_next_t *next;
static int which, nranks;
static int device;                  /* -d: device buffers, on the calls' stream */
static cudrv_t cu;
static CUstream stream;

/* A group of two calls; `swap`: in the other order. */
static ncclResult_t mm_group(int swap, ncclComm_t comm, void *s, void *d)
{
    ncclGroupStart();
    if (swap)
        ncclBroadcast(s, d, 1000, ncclFloat32, 0, comm, stream);
    ncclAllReduce(s, d, 1000, ncclFloat32, ncclSum, comm, stream);
    if (!swap)
        ncclBroadcast(s, d, 1000, ncclFloat32, 0, comm, stream);
    return ncclGroupEnd();
}

/* Rank 0 groups two all-reduces; rank 1 one, then broadcasts. */
static ncclResult_t mm_group_count(int rank, ncclComm_t comm, void *s, void *d)
{
    ncclResult_t r;
    ncclGroupStart();
    ncclAllReduce(s, d, 1000, ncclFloat32, ncclSum, comm, stream);
    if (rank == 0)
        ncclAllReduce(s, d, 1000, ncclFloat32, ncclSum, comm, stream);
    r = ncclGroupEnd();
    if (r == ncclSuccess && rank == 1)
        r = ncclBroadcast(s, d, 1000, ncclFloat32, 0, comm, stream);
    return r;
}

/* Rank 0 sends `c0` floats to rank 1, which receives `c1` from it. */
static ncclResult_t mm_p2p(int rank, ncclComm_t comm, void *s, void *d, size_t c0, size_t c1)
{
    return rank ? ncclRecv(d, c1, ncclFloat32, 0, comm, stream)
                : ncclSend(s, c0, ncclFloat32, 1, comm, stream);
}

static ncclResult_t mm_call(int rank, ncclComm_t comm, void *s, void *d)
{
    switch (which) {
    case 0: return ncclAllReduce(s, d, rank ? 2000 : 1000, ncclFloat32, ncclSum, comm, stream);
    case 1:
        return rank ? ncclBroadcast(s, d, 1000, ncclFloat32, 0, comm, stream)
                    : ncclAllReduce(s, d, 1000, ncclFloat32, ncclSum, comm, stream);
    case 2:
        return ncclAllReduce(s, d, 1000, rank ? ncclInt32 : ncclFloat32, ncclSum, comm, stream);
    case 3: return ncclAllReduce(s, d, 1000, ncclFloat32, rank ? ncclMax : ncclSum, comm, stream);
    case 4: return ncclBroadcast(s, d, 1000, ncclFloat32, rank, comm, stream);
    case 5: return ncclBroadcast(s, d, 1000, ncclFloat32, 1 - rank, comm, stream);
    case 6: return ncclReduce(s, d, 1000, ncclFloat32, ncclSum, rank, comm, stream);
    case 7: return ncclReduce(s, d, 1000, ncclFloat32, ncclSum, 1 - rank, comm, stream);
    case 8: return ncclGather(s, d, 1000, ncclFloat32, rank, comm, stream);
    case 9: return ncclScatter(s, d, 1000, ncclFloat32, rank, comm, stream);
    case 10: return mm_group(rank, comm, s, d);
    case 11: return mm_group_count(rank, comm, s, d);
    case 12: return mm_p2p(rank, comm, s, d, 100, 200);
    case 13: return mm_p2p(rank, comm, s, d, 200, 100);
    case 14: return ncclReduce(s, d, 1000, ncclFloat32, ncclSum, (rank + 1) % 3, comm, stream);
    case 15: return ncclBroadcast(s, d, 1000, ncclFloat32, rank, comm, stream);
    default: return ncclBroadcast(s, d, 1000, ncclFloat32, (rank + 1) % 3, comm, stream);
    }
}

/* A buffer of BIG doubles' bytes, zeroed: host memory, or device memory with -d. */
static void *buf_new(void)
{
    CUdeviceptr p;
    if (!device)
        return calloc(BIG, 8);
    CUDRV(cu.alloc(&p, BIG * 8));
    CUDRV(cu.memset8(p, 0, BIG * 8, stream));
    return (void *)(uintptr_t)p;
}

/* A call's result: with -d, once its stream went past it, the communicator's error. */
static ncclResult_t call_result(ncclComm_t comm, ncclResult_t r)
{
    ncclResult_t async = ncclSuccess;
    if (!device || r != ncclSuccess)
        return r;
    CUDRV(cu.stream_sync(stream));
    ncclCommGetAsyncError(comm, &async);
    return async;
}

static int rank_main(int rank, int n)
{
    if (device) {
        cudrv_load(&cu);
        CUDRV(cu.stream_create(&stream, CU_STREAM_NON_BLOCKING));
    }
    ncclComm_t comm = ft_comm_init(rank, n);
    void *s = buf_new(), *d = buf_new();
    double t0 = ft_now();
    ncclResult_t r = call_result(comm, mm_call(rank, comm, s, d));
    ft_record(rank, r, ft_now() - t0);
    if (r == ncclSuccess) {   /* undetected here: the next call must fail, not hang */
        t0 = ft_now();
        next->result[rank] = call_result(comm, ncclAllReduce(s, d, 10, ncclFloat32, ncclSum,
                                                             comm, stream));
        next->elapsed[rank] = ft_now() - t0;
        snprintf(next->text[rank], FT_TEXT, "%s", ncclGetLastError(NULL));
        next->ran[rank] = 1;
    }
    ft_sh->flag[rank] = 1;
    for (int r = 0; r < n; r++)   /* abort only once every rank has its error */
        while (ft_sh->flag[r] == 0)
            ft_sleep(0.005);
    ncclCommAbort(comm);
    if (!device) {   /* device memory goes with the process (a free waits for the device) */
        free(s);
        free(d);
    }
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
    if (c->may_pass < 0 && next->ran[0] && next->ran[1])
        ft_fail("%s: the mismatched call succeeded on both ranks", c->name);
    for (int r = 0; r < nranks; r++) {
        double took;
        const char *t;
        char other[24] = "another rank";
        int res = first_error(r, &took, &t);
        for (int o = 0; o < nranks; o++) {   /* the first other rank it names */
            char name[24];
            snprintf(name, sizeof(name), "rank %d", o);
            if (o != r && strstr(t, name) != NULL) {
                snprintf(other, sizeof(other), "%s", name);
                break;
            }
        }
        if (!ft_exited(status[r], 0)) {
            ft_fail("%s: rank %d ended with status 0x%x", c->name, r, status[r]);
            continue;
        }
        if (next->ran[r] && c->may_pass >= 0 && !(c->may_pass & (1 << r)))
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

int main(int argc, char **argv)
{
    int status[MM_MAXN], ncases = 0;
    ft_name = "mismatch";
    device = argc > 1 && strcmp(argv[1], "-d") == 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    next = mmap(NULL, sizeof(*next), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                0);
    if (next == MAP_FAILED)
        return 99;
    for (which = 0; which < (int)(sizeof(cases) / sizeof(cases[0])); which++) {
        memset(next, 0, sizeof(*next));
        nranks = cases[which].nranks ? cases[which].nranks : 2;
        if (ft_launch(nranks, rank_main, 25, status) != 0)
            return 99;
        check_case(&cases[which], status);
        ft_shm_leftovers(ft_sh->pid[0], 1);
        ncases++;
    }
    printf("mismatch: %d cases, %d failures\n", ncases, ft_failures());
    return ft_failures() || ncases == 0 ? 1 : 0;
}
