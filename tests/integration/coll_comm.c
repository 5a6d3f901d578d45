/*
 * coll_check: communicators made from communicators and nonblocking ones.
 *
 *   split     color rank % 2, the last rank (of 3 or more) NCCL_SPLIT_NOCOLOR and so
 *             given NULL, key nranks - rank (children order their ranks in reverse);
 *             collectives on each child
 *   shrink    the last rank excluded (it does not call); collectives on the survivors
 *   nonblock  ncclCommInitRankConfig with blocking = 0, polled with ncclCommGetAsyncError
 *             until ncclSuccess; collectives, finalize and destroy on it
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll_check.h"

#define POLL_LIMIT_S 60.0

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Poll until the comm leaves ncclInProgress; it must end in ncclSuccess. */
static void wait_ready(const cc_world_t *w, ncclComm_t comm, const char *what)
{
    double t0 = now_s();
    ncclResult_t st = ncclInProgress;
    while (st == ncclInProgress) {
        CC_NCCL(w, "ncclCommGetAsyncError", ncclCommGetAsyncError(comm, &st));
        if (st == ncclInProgress && now_s() - t0 > POLL_LIMIT_S) {
            fprintf(stderr, "FAIL mode=%s what=%s: still ncclInProgress after %.0f s\n",
                    w->mode, what, POLL_LIMIT_S);
            exit(1);
        }
        if (st == ncclInProgress)
            sched_yield();
    }
    if (st != ncclSuccess)
        cc_nccl_fatal(w, what, st, __FILE__, __LINE__);
}

/* A call on a nonblocking comm may return ncclInProgress: then poll. */
static void nb_result(const cc_world_t *w, ncclResult_t r, ncclComm_t comm, const char *what)
{
    if (r == ncclInProgress && comm != NULL)
        wait_ready(w, comm, what);
    else if (r != ncclSuccess && r != ncclInProgress)
        cc_nccl_fatal(w, what, r, __FILE__, __LINE__);
}

int cc_skip_finalize;

/* ncclCommFinalize on every comm, in one group when there are several (one thread may
 * hold several ranks of one job: each finalize waits for its peers). */
static void finalize_all(const cc_world_t *w, ncclComm_t *comms, int n, int nonblocking)
{
    int grouped = n > 1;
    if (grouped)
        cc_group_start(w);
    for (int i = 0; i < n; i++) {
        ncclResult_t r = ncclCommFinalize(comms[i]);
        if (nonblocking)
            nb_result(w, r, grouped ? NULL : comms[i], "ncclCommFinalize");
        else if (r != ncclSuccess)
            cc_nccl_fatal(w, "ncclCommFinalize", r, __FILE__, __LINE__);
    }
    if (!grouped)
        return;
    ncclResult_t r = ncclGroupEnd();
    if (r != ncclSuccess && !(nonblocking && r == ncclInProgress))
        cc_nccl_fatal(w, "ncclGroupEnd(ncclCommFinalize)", r, __FILE__, __LINE__);
    for (int i = 0; nonblocking && i < n; i++)
        wait_ready(w, comms[i], "ncclCommFinalize");
}

void cc_comms_close(const cc_world_t *w, ncclComm_t *comms, int n, int nonblocking)
{
    if (!cc_skip_finalize)
        finalize_all(w, comms, n, nonblocking);
    for (int i = 0; i < n; i++)
        CC_NCCL(w, "ncclCommDestroy", ncclCommDestroy(comms[i]));
}

static void check_int(const cc_world_t *w, const char *what, int rank, int got, int expected)
{
    if (got == expected)
        return;
    char g[32], e[32];
    snprintf(g, sizeof(g), "%d", got);
    snprintf(e, sizeof(e), "%d", expected);
    cc_case_t c = { what, -1, -1, 0, -1, 0 };
    cc_fail(w, &c, rank, 0, g, e);
}

/* Child rank `crank` of parent rank `prank` must be what it is told. */
static void check_identity(const cc_world_t *w, ncclComm_t child, int prank, int crank,
                           int csize, const char *what)
{
    int count = -1, rank = -1;
    CC_NCCL(w, "ncclCommCount", ncclCommCount(child, &count));
    CC_NCCL(w, "ncclCommUserRank", ncclCommUserRank(child, &rank));
    check_int(w, what, prank, count, csize);
    check_int(w, what, prank, rank, crank);
}

/* The collectives every child runs; members[c] is the parent rank of child rank c. */
static void child_work(cc_world_t *sub, const int *members, const int *prank, uint32_t salt)
{
    int32_t got[CC_MAX_LOCAL][CC_MAX_LOCAL], mine[CC_MAX_LOCAL];
    cc_group_start(sub);
    for (int l = 0; l < sub->nlocal; l++) {
        mine[l] = prank[l];
        CC_NCCL(sub, "child ncclAllGather", ncclAllGather(&mine[l], got[l], 1, ncclInt32,
                                                          sub->comms[l], NULL));
    }
    cc_group_end(sub, "child ncclAllGather");
    for (int l = 0; l < sub->nlocal; l++)
        for (int c = 0; c < sub->nranks; c++)
            check_int(sub, "child rank order (ncclAllGather of parent ranks)", prank[l],
                      got[l][c], members[c]);
    cc_case_t ar = { "child ncclAllReduce", ncclFloat32, CC_SUM, 1001, -1, 0 };
    cc_run(sub, cc_red_prepare(sub, CC_K_ALLREDUCE, &ar, salt), ar.what);
    cc_case_t bc = { "child ncclBroadcast", ncclInt64, -1, 333, sub->nranks - 1, 0 };
    cc_run(sub, cc_mv_prepare(sub, CC_K_BROADCAST, &bc, salt + 1), bc.what);
    cc_case_t rs = { "child ncclReduceScatter", ncclBfloat16, CC_MAX, 77, -1, 1 };
    cc_run(sub, cc_red_prepare(sub, CC_K_REDUCESCATTER, &rs, salt + 2), rs.what);
}

static int split_color(int n, int r)
{
    return n >= 3 && r == n - 1 ? NCCL_SPLIT_NOCOLOR : r % 2;
}

void cc_test_split(cc_world_t *w)
{
    int n = w->nranks;
    ncclComm_t child[CC_MAX_LOCAL];
    cc_set_phase("ncclCommSplit");
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++) {
        child[l] = (ncclComm_t)&child[l];   /* must become NULL for NOCOLOR */
        int r = w->ranks[l];
        CC_NCCL(w, "ncclCommSplit", ncclCommSplit(w->comms[l], split_color(n, r), n - r,
                                                  &child[l], NULL));
    }
    cc_group_end(w, "ncclCommSplit");
    for (int color = 0; color < 2; color++) {
        int members[CC_MAX_LOCAL], m = 0, prank[CC_MAX_LOCAL];
        for (int r = n - 1; r >= 0; r--)   /* key n - r: descending parent rank */
            if (split_color(n, r) == color)
                members[m++] = r;
        cc_world_t sub = *w;
        sub.nranks = m;
        sub.nlocal = 0;
        for (int l = 0; l < w->nlocal; l++) {
            int r = w->ranks[l];
            if (split_color(n, r) != color)
                continue;
            int crank = 0;
            while (members[crank] != r)
                crank++;
            check_identity(w, child[l], r, crank, m, "ncclCommSplit child");
            prank[sub.nlocal] = r;
            sub.ranks[sub.nlocal] = crank;
            sub.comms[sub.nlocal++] = child[l];
        }
        if (sub.nlocal == 0)
            continue;
        child_work(&sub, members, prank, 70000u + (uint32_t)color * 10);
        cc_comms_close(&sub, sub.comms, sub.nlocal, 0);
    }
    for (int l = 0; l < w->nlocal; l++)
        if (split_color(n, w->ranks[l]) == NCCL_SPLIT_NOCOLOR && child[l] != NULL) {
            cc_case_t c = { "ncclCommSplit(NCCL_SPLIT_NOCOLOR)", -1, -1, 0, -1, 0 };
            cc_fail(w, &c, w->ranks[l], 0, "non-NULL comm", "NULL");
        }
}

void cc_test_shrink(cc_world_t *w)
{
    int n = w->nranks, excl = n - 1;
    if (n < 2)
        return;
    cc_set_phase("ncclCommShrink");
    cc_world_t sub = *w;
    int members[CC_MAX_LOCAL], prank[CC_MAX_LOCAL];
    sub.nranks = n - 1;
    sub.nlocal = 0;
    for (int r = 0; r < n - 1; r++)
        members[r] = r;
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++) {
        if (w->ranks[l] == excl)
            continue;   /* the excluded rank does not call */
        prank[sub.nlocal] = w->ranks[l];
        sub.ranks[sub.nlocal] = w->ranks[l];
        CC_NCCL(w, "ncclCommShrink", ncclCommShrink(w->comms[l], &excl, 1,
                                                    &sub.comms[sub.nlocal], NULL,
                                                    NCCL_SHRINK_DEFAULT));
        sub.nlocal++;
    }
    cc_group_end(w, "ncclCommShrink");
    if (sub.nlocal == 0)
        return;
    for (int l = 0; l < sub.nlocal; l++)
        check_identity(w, sub.comms[l], prank[l], sub.ranks[l], n - 1, "ncclCommShrink child");
    child_work(&sub, members, prank, 80000u);
    cc_comms_close(&sub, sub.comms, sub.nlocal, 0);
}

void cc_test_nonblocking(cc_world_t *w)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cc_world_t nb = *w;
    cc_set_phase("nonblocking ncclCommInitRankConfig");
    cfg.blocking = 0;
    for (int l = 0; l < w->nlocal; l++) {
        nb.comms[l] = NULL;
        ncclResult_t r = ncclCommInitRankConfig(&nb.comms[l], w->nranks, w->nb_id,
                                                w->ranks[l], &cfg);
        if (r != ncclSuccess && r != ncclInProgress)
            cc_nccl_fatal(w, "ncclCommInitRankConfig(blocking=0)", r, __FILE__, __LINE__);
        if (nb.comms[l] == NULL) {
            fprintf(stderr, "FAIL mode=%s what=ncclCommInitRankConfig(blocking=0): no comm "
                    "handle returned (rank %d)\n", w->mode, w->ranks[l]);
            exit(1);
        }
    }
    for (int l = 0; l < w->nlocal; l++)
        wait_ready(w, nb.comms[l], "ncclCommInitRankConfig(blocking=0)");
    for (int l = 0; l < w->nlocal; l++)
        check_identity(w, nb.comms[l], w->ranks[l], w->ranks[l], w->nranks, "nonblocking comm");
    /* a collective: may return ncclInProgress, then completes through the async error */
    int32_t in[CC_MAX_LOCAL], out[CC_MAX_LOCAL];
    ncclGroupStart();
    for (int l = 0; l < w->nlocal; l++) {
        in[l] = w->ranks[l] + 1;
        nb_result(w, ncclAllReduce(&in[l], &out[l], 1, ncclInt32, ncclSum, nb.comms[l], NULL),
                  NULL, "ncclAllReduce(nonblocking comm)");
    }
    nb_result(w, ncclGroupEnd(), NULL, "ncclGroupEnd(nonblocking comm)");
    for (int l = 0; l < w->nlocal; l++) {
        wait_ready(w, nb.comms[l], "ncclAllReduce(nonblocking comm)");
        check_int(w, "ncclAllReduce(nonblocking comm)", w->ranks[l], out[l],
                  w->nranks * (w->nranks + 1) / 2);
    }
    cc_comms_close(&nb, nb.comms, nb.nlocal, 1);
}
