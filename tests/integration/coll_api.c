/*
 * coll_check: the success paths of the calls the other sections do not make.
 *
 *   api       memalloc  buffers from ncclMemAlloc as a collective's send and receive
 *                       buffers, freed by ncclMemFree; ptr NULL and size 0 as in NCCL
 *             window    ncclCommWindowRegister on ncclMemAlloc'ed memory (symmetric) and on
 *                       malloc'ed memory, collectives on the windows, deregistered; bad
 *                       arguments refused
 *             simulate  ncclGroupSimulateEnd on the even ranks only: it fills estimatedTime
 *                       (more for more bytes) and runs nothing, so buffers stay untouched and
 *                       the next real collective still matches the odd ranks' sequence
 *             revoke    a communicator split from the world is revoked: its collectives and
 *                       finalize fail with ncclInvalidUsage and a last error naming the
 *                       revocation, shrink and destroy work, and the world goes on
 *             scalable  ncclCommInitRankScalable with up to 3 ids made by ranks 0..2 and
 *                       all-gathered (as a launcher would pass them): the communicator works
 *                       and the roots of the ids braid does not use stop (no listener is left
 *                       on their ports); in process mode also with NCCL_COMM_ID's ids (all
 *                       equal), the case where NCCL too uses only the first
 *   debug     NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE changed with setenv take
 *             effect at ncclResetDebugInit and not before (one thread per process does it,
 *             while the others wait in a collective: setenv is not thread-safe)
 *
 * Bad-argument checks read ncclGetLastError, which is per process: only rank 0 makes them,
 * and collectives keep the other threads of a -T run from failing calls meanwhile.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "coll_check.h"
#include "core/bootstrap.h"   /* braid_uid_t: where an id names its root (white box) */

#define LISTEN_WAIT_S 10.0    /* a stopped root's thread closes its socket soon after */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ncclResetDebugInit is deprecated in NCCL's header, yet exported and meant to work. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void reset_debug(void)
{
    ncclResetDebugInit();
}
#pragma GCC diagnostic pop

static void fail_msg(const cc_world_t *w, int rank, const char *what, const char *got,
                     const char *expected)
{
    cc_case_t c = { what, -1, -1, 0, -1, 0 };
    cc_fail(w, &c, rank, 0, got, expected);
}

/* One case: `got` must be `want`; a failure's last error must contain `needle`. */
static void expect_code(const cc_world_t *w, int rank, const char *what, ncclResult_t got,
                        ncclResult_t want, const char *needle, long *cases)
{
    char g[400], e[160];
    (*cases)++;
    if (got != want) {
        snprintf(g, sizeof(g), "%d (%s; last error: %.200s)", (int)got,
                 ncclGetErrorString(got), ncclGetLastError(NULL));
        snprintf(e, sizeof(e), "%d (%s)", (int)want, ncclGetErrorString(want));
        fail_msg(w, rank, what, g, e);
        return;
    }
    if (needle != NULL && strstr(ncclGetLastError(NULL), needle) == NULL) {
        snprintf(g, sizeof(g), "last error \"%.300s\"", ncclGetLastError(NULL));
        snprintf(e, sizeof(e), "a last error naming \"%s\"", needle);
        fail_msg(w, rank, what, g, e);
    }
}

static void expect_true(const cc_world_t *w, int rank, const char *what, int ok,
                        const char *got, const char *expected, long *cases)
{
    (*cases)++;
    if (!ok)
        fail_msg(w, rank, what, got, expected);
}

static int local_of(const cc_world_t *w, int rank)
{
    for (int l = 0; l < w->nlocal; l++)
        if (w->ranks[l] == rank)
            return l;
    return -1;
}

/* ---- a checked int32 sum all-reduce on given buffers --------------------------------- */

static int32_t ival(int rank, size_t i, uint32_t salt)
{
    uint64_t st = ((uint64_t)salt << 32) ^ ((uint64_t)(unsigned)rank << 24) ^ (uint64_t)i;
    return (int32_t)(cc_rng(&st) % 2000001u) - 1000000;   /* 64 ranks' sums fit */
}

/* recv[l] == send[l]: in place. Counts one case. */
static void ar_on(const cc_world_t *w, void *const *send, void *const *recv, size_t count,
                  uint32_t salt, const char *what, long *cases)
{
    for (int l = 0; l < w->nlocal; l++) {
        int32_t *s = send[l];
        for (size_t i = 0; i < count; i++)
            s[i] = ival(w->ranks[l], i, salt);
        if (recv[l] != send[l])
            memset(recv[l], 0x5a, count * sizeof(int32_t));
    }
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++)
        CC_NCCL(w, what, ncclAllReduce(send[l], recv[l], count, ncclInt32, ncclSum, w->comms[l],
                                       NULL));
    cc_group_end(w, what);
    cc_case_t c = { what, ncclInt32, CC_SUM, count, -1, recv[0] == send[0] };
    double *e = cc_xmalloc((count ? count : 1) * sizeof(double));
    for (size_t i = 0; i < count; i++) {
        int64_t sum = 0;
        for (int r = 0; r < w->nranks; r++)
            sum += ival(r, i, salt);
        e[i] = (double)sum;
    }
    for (int l = 0; l < w->nlocal; l++)
        cc_check_values(w, &c, w->ranks[l], recv[l], e, count, 0);
    free(e);
    (*cases)++;
}

/* The same on buffers of its own (a collective that proves a communicator works). */
static void ar_own(const cc_world_t *w, size_t count, uint32_t salt, const char *what,
                   long *cases)
{
    void *s[CC_MAX_LOCAL], *r[CC_MAX_LOCAL];
    for (int l = 0; l < w->nlocal; l++) {
        s[l] = cc_xmalloc(count * sizeof(int32_t));
        r[l] = cc_xmalloc(count * sizeof(int32_t));
    }
    ar_on(w, s, r, count, salt, what, cases);
    for (int l = 0; l < w->nlocal; l++) {
        free(s[l]);
        free(r[l]);
    }
}

/* Every rank past this point has finished what came before (one element all-reduce). */
static void barrier(const cc_world_t *w, uint32_t salt)
{
    long dummy = 0;
    ar_own(w, 1, salt, "barrier (ncclAllReduce)", &dummy);
}

/* ---- memalloc -------------------------------------------------------------------------- */

static void api_memalloc(cc_world_t *w, long *cases)
{
    const size_t count = 70001;   /* 280 KB: more than one transport slot */
    void *s[CC_MAX_LOCAL], *r[CC_MAX_LOCAL];
    cc_set_phase("ncclMemAlloc");
    for (int l = 0; l < w->nlocal; l++) {
        s[l] = r[l] = NULL;
        CC_NCCL(w, "ncclMemAlloc", ncclMemAlloc(&s[l], count * sizeof(int32_t)));
        CC_NCCL(w, "ncclMemAlloc", ncclMemAlloc(&r[l], count * sizeof(int32_t)));
        expect_true(w, w->ranks[l], "ncclMemAlloc", s[l] != NULL && r[l] != NULL && s[l] != r[l],
                    "NULL or equal pointers", "two distinct buffers", cases);
    }
    ar_on(w, s, r, count, 90001, "ncclAllReduce(ncclMemAlloc buffers)", cases);
    ar_on(w, r, r, count, 90002, "ncclAllReduce(ncclMemAlloc buffer, in place)", cases);
    for (int l = 0; l < w->nlocal; l++) {
        expect_code(w, w->ranks[l], "ncclMemFree", ncclMemFree(s[l]), ncclSuccess, NULL, cases);
        expect_code(w, w->ranks[l], "ncclMemFree", ncclMemFree(r[l]), ncclSuccess, NULL, cases);
    }
    int l0 = local_of(w, 0);
    if (l0 >= 0) {
        void *p = &p;
        expect_code(w, 0, "ncclMemFree(NULL)", ncclMemFree(NULL), ncclSuccess, NULL, cases);
        /* NCCL hands both to cudaMalloc: NULL is cudaErrorInvalidValue, size 0 succeeds */
        expect_code(w, 0, "ncclMemAlloc(ptr NULL)", ncclMemAlloc(NULL, 64),
                    ncclUnhandledCudaError, "ptr is NULL", cases);
        expect_code(w, 0, "ncclMemAlloc(size 0)", ncclMemAlloc(&p, 0), ncclSuccess, NULL, cases);
        expect_true(w, 0, "ncclMemAlloc(size 0)", p == NULL, "*ptr not NULL", "*ptr NULL",
                    cases);
    }
    barrier(w, 90003);
}

/* ---- windows --------------------------------------------------------------------------- */

static void win_register(cc_world_t *w, void *const *buf, size_t bytes, int flags,
                         ncclWindow_t *win, const char *what, long *cases)
{
    cc_group_start(w);   /* collective in NCCL: one thread registers its ranks in a group */
    for (int l = 0; l < w->nlocal; l++) {
        win[l] = NULL;
        expect_code(w, w->ranks[l], what, ncclCommWindowRegister(w->comms[l], buf[l], bytes,
                                                                  &win[l], flags),
                    ncclSuccess, NULL, cases);
    }
    cc_group_end(w, what);
    for (int l = 0; l < w->nlocal; l++)
        expect_true(w, w->ranks[l], what, win[l] != NULL, "NULL window", "a window", cases);
}

static void win_deregister(cc_world_t *w, ncclWindow_t *win, long *cases)
{
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++)
        expect_code(w, w->ranks[l], "ncclCommWindowDeregister",
                    ncclCommWindowDeregister(w->comms[l], win[l]), ncclSuccess, NULL, cases);
    cc_group_end(w, "ncclCommWindowDeregister");
}

static void win_bad_args(cc_world_t *w, void *sym, void *plain, long *cases)
{
    ncclComm_t c = w->comms[local_of(w, 0)];
    ncclWindow_t win = (ncclWindow_t)&win;
    expect_code(w, 0, "ncclCommWindowRegister(buff NULL)",
                ncclCommWindowRegister(c, NULL, 64, &win, NCCL_WIN_DEFAULT), ncclInvalidArgument,
                "buffer", cases);
    expect_code(w, 0, "ncclCommWindowRegister(size 0)",
                ncclCommWindowRegister(c, plain, 0, &win, NCCL_WIN_DEFAULT), ncclInvalidArgument,
                "of 0 bytes", cases);
    expect_code(w, 0, "ncclCommWindowRegister(win NULL)",
                ncclCommWindowRegister(c, plain, 64, NULL, NCCL_WIN_DEFAULT),
                ncclInvalidArgument, "handle", cases);
    expect_code(w, 0, "ncclCommWindowRegister(symmetric, unaligned)",
                ncclCommWindowRegister(c, (char *)sym + 64, 64, &win, NCCL_WIN_COLL_SYMMETRIC),
                ncclInvalidArgument, "aligned", cases);
    expect_true(w, 0, "ncclCommWindowRegister(bad arguments)", win == (ncclWindow_t)&win,
                "*win written", "*win untouched", cases);
    expect_code(w, 0, "ncclCommWindowDeregister(NULL)", ncclCommWindowDeregister(c, NULL),
                ncclSuccess, NULL, cases);   /* as NCCL 2.28: nothing to deregister */
}

static void api_window(cc_world_t *w, long *cases)
{
    const size_t count = 4099, bytes = count * sizeof(int32_t);
    void *sym[CC_MAX_LOCAL], *plain[CC_MAX_LOCAL], *reg[CC_MAX_LOCAL];
    ncclWindow_t wsym[CC_MAX_LOCAL], wplain[CC_MAX_LOCAL];
    cc_set_phase("ncclCommWindowRegister");
    for (int l = 0; l < w->nlocal; l++) {
        CC_NCCL(w, "ncclMemAlloc", ncclMemAlloc(&sym[l], bytes));
        plain[l] = cc_xmalloc(bytes);
    }
    win_register(w, sym, bytes, NCCL_WIN_COLL_SYMMETRIC, wsym,
                 "ncclCommWindowRegister(ncclMemAlloc, NCCL_WIN_COLL_SYMMETRIC)", cases);
    win_register(w, plain, bytes, NCCL_WIN_DEFAULT, wplain,
                 "ncclCommWindowRegister(malloc, NCCL_WIN_DEFAULT)", cases);
    for (int l = 0; l < w->nlocal; l++)   /* buffer registration of the same memory too */
        expect_code(w, w->ranks[l], "ncclCommRegister",
                    ncclCommRegister(w->comms[l], plain[l], bytes, &reg[l]), ncclSuccess, NULL,
                    cases);
    ar_on(w, sym, plain, count, 91001, "ncclAllReduce(symmetric window -> window)", cases);
    ar_on(w, plain, sym, count, 91002, "ncclAllReduce(window -> symmetric window)", cases);
    ar_on(w, sym, sym, count, 91003, "ncclAllReduce(symmetric window, in place)", cases);
    for (int l = 0; l < w->nlocal; l++)
        expect_code(w, w->ranks[l], "ncclCommDeregister",
                    ncclCommDeregister(w->comms[l], reg[l]), ncclSuccess, NULL, cases);
    win_deregister(w, wsym, cases);
    win_deregister(w, wplain, cases);
    ar_on(w, sym, plain, count, 91004, "ncclAllReduce(after ncclCommWindowDeregister)", cases);
    if (local_of(w, 0) >= 0)
        win_bad_args(w, sym[local_of(w, 0)], plain[local_of(w, 0)], cases);
    for (int l = 0; l < w->nlocal; l++) {
        CC_NCCL(w, "ncclMemFree", ncclMemFree(sym[l]));
        free(plain[l]);
    }
    barrier(w, 91005);
}

/* ---- ncclGroupSimulateEnd ---------------------------------------------------------------- */

/* Simulate an all-reduce and a broadcast of `count` floats on the even local ranks. */
static float sim_once(cc_world_t *w, float *const *s, float *const *r, size_t count,
                      size_t cap, long *cases)
{
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER, init = NCCL_SIM_INFO_INITIALIZER;
    int rank0 = -1;
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++) {
        if (w->ranks[l] % 2 != 0)
            continue;
        rank0 = rank0 < 0 ? w->ranks[l] : rank0;
        CC_NCCL(w, "ncclAllReduce(simulated)", ncclAllReduce(s[l], r[l], count, ncclFloat32,
                                                             ncclSum, w->comms[l], NULL));
        CC_NCCL(w, "ncclBroadcast(simulated)", ncclBroadcast(s[l], r[l], count, ncclFloat32,
                                                             w->nranks - 1, w->comms[l], NULL));
    }
    expect_code(w, rank0, "ncclGroupSimulateEnd", ncclGroupSimulateEnd(&sim), ncclSuccess, NULL,
                cases);
    expect_true(w, rank0, "ncclGroupSimulateEnd(simInfo header)",
                sim.size == init.size && sim.magic == init.magic && sim.version == init.version,
                "size, magic or version changed", "only estimatedTime written", cases);
    char g[64];
    snprintf(g, sizeof(g), "estimatedTime %g", (double)sim.estimatedTime);
    expect_true(w, rank0, "ncclGroupSimulateEnd(estimatedTime)",
                sim.estimatedTime > 0 || w->nranks == 1, g, "a positive estimate", cases);
    for (int l = 0; l < w->nlocal; l++) {
        if (w->ranks[l] % 2 != 0)
            continue;
        const unsigned char *p = (const unsigned char *)r[l];
        size_t i = 0;
        while (i < cap * sizeof(float) && p[i] == 0x5a)
            i++;
        expect_true(w, w->ranks[l], "ncclGroupSimulateEnd(receive buffer)",
                    i == cap * sizeof(float), "written", "untouched (nothing runs)", cases);
    }
    return sim.estimatedTime;
}

static void api_simulate(cc_world_t *w, long *cases)
{
    const size_t small = 1024, big = (size_t)1 << 18;
    float *s[CC_MAX_LOCAL], *r[CC_MAX_LOCAL];
    cc_set_phase("ncclGroupSimulateEnd");
    for (int l = 0; l < w->nlocal; l++) {
        s[l] = cc_xmalloc(big * sizeof(float));
        r[l] = cc_xmalloc(big * sizeof(float));
        for (size_t i = 0; i < big; i++)
            s[l][i] = (float)(i % 1000);
        memset(r[l], 0x5a, big * sizeof(float));
    }
    if (w->ranks[0] % 2 == 0 || w->nlocal > 1) {   /* the odd ranks simulate nothing */
        float t_small = sim_once(w, s, r, small, big, cases);
        float t_big = sim_once(w, s, r, big, big, cases);
        char g[96];
        snprintf(g, sizeof(g), "%g us for %zu floats, %g us for %zu", (double)t_small, small,
                 (double)t_big, big);
        int even = w->ranks[0] % 2 == 0 ? w->ranks[0] : w->ranks[1];
        expect_true(w, even, "ncclGroupSimulateEnd(larger message)",
                    t_big > t_small || w->nranks == 1, g, "a larger estimate for more bytes",
                    cases);
    }
    /* the odd ranks' sequence numbers never moved: the even ranks' must not have either */
    ar_on(w, (void *const *)s, (void *const *)r, 1001, 92001,
          "ncclAllReduce(after ncclGroupSimulateEnd on the even ranks)", cases);
    for (int l = 0; l < w->nlocal; l++) {
        free(s[l]);
        free(r[l]);
    }
}

/* ---- ncclCommRevoke ---------------------------------------------------------------------- */

static void revoked_calls(cc_world_t *w, ncclComm_t *child, long *cases)
{
    for (int l = 0; l < w->nlocal; l++) {
        int rank = w->ranks[l];
        int32_t x = 1, y = -7;
        expect_code(w, rank, "ncclAllReduce(revoked comm)",
                    ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, child[l], NULL),
                    ncclInvalidUsage, "revoked", cases);
        expect_true(w, rank, "ncclAllReduce(revoked comm)", y == -7, "output written",
                    "output untouched", cases);
        expect_code(w, rank, "ncclCommFinalize(revoked comm)", ncclCommFinalize(child[l]),
                    ncclInvalidUsage, "revoked", cases);
        ncclResult_t as = ncclInProgress;
        double t0 = now_s();
        while (as == ncclInProgress && now_s() - t0 < 10.0) {   /* NCCL: until quiescent */
            expect_code(w, rank, "ncclCommGetAsyncError(revoked comm)",
                        ncclCommGetAsyncError(child[l], &as), ncclSuccess, NULL, cases);
            sched_yield();
        }
        expect_true(w, rank, "ncclCommGetAsyncError(revoked comm)", as == ncclSuccess,
                    ncclGetErrorString(as), "ncclSuccess (quiescent)", cases);
    }
}

/* The survivors shrink the revoked communicator without its last rank. */
static void revoked_shrink(cc_world_t *w, ncclComm_t *child, long *cases)
{
    int excl = w->nranks - 1;
    cc_world_t sub = *w;
    sub.nranks = w->nranks - 1;
    sub.nlocal = 0;
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++) {
        if (w->ranks[l] == excl)
            continue;
        sub.ranks[sub.nlocal] = w->ranks[l];
        expect_code(w, w->ranks[l], "ncclCommShrink(revoked comm)",
                    ncclCommShrink(child[l], &excl, 1, &sub.comms[sub.nlocal], NULL,
                                   NCCL_SHRINK_DEFAULT),
                    ncclSuccess, NULL, cases);
        sub.nlocal++;
    }
    cc_group_end(w, "ncclCommShrink(revoked comm)");
    if (sub.nlocal == 0)
        return;
    ar_own(&sub, 1001, 93002, "ncclAllReduce(shrunk from a revoked comm)", cases);
    cc_comms_close(&sub, sub.comms, sub.nlocal, 0);
}

static void api_revoke(cc_world_t *w, long *cases)
{
    ncclComm_t child[CC_MAX_LOCAL];
    cc_set_phase("ncclCommRevoke");
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++)
        CC_NCCL(w, "ncclCommSplit", ncclCommSplit(w->comms[l], 0, w->ranks[l], &child[l], NULL));
    cc_group_end(w, "ncclCommSplit");
    cc_world_t sub = *w;
    memcpy(sub.comms, child, sizeof(child));
    ar_own(&sub, 1001, 93001, "ncclAllReduce(before ncclCommRevoke)", cases);
    for (int l = 0; l < w->nlocal; l++)
        expect_code(w, w->ranks[l], "ncclCommRevoke", ncclCommRevoke(child[l],
                                                                     NCCL_REVOKE_DEFAULT),
                    ncclSuccess, NULL, cases);
    revoked_calls(w, child, cases);
    ar_own(w, 1001, 93003, "ncclAllReduce(world, after a revoke of its child)", cases);
    if (w->nranks > 1)
        revoked_shrink(w, child, cases);
    for (int l = 0; l < w->nlocal; l++)
        expect_code(w, w->ranks[l], "ncclCommDestroy(revoked comm)", ncclCommDestroy(child[l]),
                    ncclSuccess, NULL, cases);
    ar_own(w, 1001, 93004, "ncclAllReduce(world, after the revoked comm's destroy)", cases);
}

/* ---- ncclCommInitRankScalable ------------------------------------------------------------ */

/* The TCP port the id's root listens on (0: none of its own, under NCCL_COMM_ID). */
static unsigned id_root_port(const ncclUniqueId *id)
{
    braid_uid_t uid;
    struct sockaddr_in6 sa;   /* sin6_port is where sockaddr_in keeps sin_port too */
    memcpy(&uid, id->internal, sizeof(uid));
    if (uid.flags & BRAID_UID_ROOT_AT_RANK0)
        return 0;
    memcpy(&sa, uid.addr, sizeof(uid.addr) < sizeof(sa) ? sizeof(uid.addr) : sizeof(sa));
    return ntohs(sa.sin6_port);
}

/* 1 if a TCP socket of this network namespace listens on `port`, -1 if /proc says nothing. */
static int port_listening(unsigned port)
{
    static const char *const files[] = { "/proc/net/tcp", "/proc/net/tcp6" };
    int found = 0, readable = 0;
    for (int f = 0; f < 2; f++) {
        FILE *fp = fopen(files[f], "r");
        char line[512], local[160];
        unsigned state;
        if (fp == NULL)
            continue;
        readable = 1;
        while (fgets(line, sizeof(line), fp) != NULL) {
            if (sscanf(line, " %*d: %159s %*s %x", local, &state) != 2)
                continue;   /* the header */
            const char *colon = strrchr(local, ':');
            if (colon != NULL && strtoul(colon + 1, NULL, 16) == port && state == 0x0a)
                found = 1;
        }
        fclose(fp);
    }
    return readable ? found : -1;
}

/*
 * The ids: rank k < nid makes id k (in process mode, with NCCL_COMM_ID out of the way when
 * `own_roots`: ids with roots of their own, as a job without NCCL_COMM_ID gets), and an
 * all-gather gives every rank all of them, as a launcher would.
 */
static void scal_ids(cc_world_t *w, int nid, int own_roots, ncclUniqueId *ids, long *cases)
{
    ncclUniqueId *mine = calloc((size_t)w->nlocal, sizeof(*mine));
    ncclUniqueId *all = calloc((size_t)w->nlocal * (size_t)w->nranks, sizeof(*all));
    char *comm_id = NULL;
    if (mine == NULL || all == NULL)
        cc_nccl_fatal(w, "calloc of unique ids", ncclSystemError, __FILE__, __LINE__);
    if (own_roots && getenv("NCCL_COMM_ID") != NULL) {   /* process mode: one thread */
        comm_id = strdup(getenv("NCCL_COMM_ID"));
        unsetenv("NCCL_COMM_ID");
        reset_debug();
    }
    for (int l = 0; l < w->nlocal; l++) {
        if (w->ranks[l] >= nid)
            continue;
        CC_NCCL(w, "ncclGetUniqueId", ncclGetUniqueId(&mine[l]));
        unsigned port = id_root_port(&mine[l]);
        if (own_roots) {   /* the check below can see a live root */
            char g[64];
            snprintf(g, sizeof(g), "port %u: listening=%d", port, port_listening(port));
            expect_true(w, w->ranks[l], "ncclGetUniqueId(root listening)",
                        port != 0 && port_listening(port) == 1, g, "a listening root", cases);
        }
    }
    if (comm_id != NULL) {
        setenv("NCCL_COMM_ID", comm_id, 1);
        reset_debug();
        free(comm_id);
    }
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++)
        CC_NCCL(w, "ncclAllGather(ids)", ncclAllGather(&mine[l], all + (size_t)l * w->nranks,
                                                       sizeof(ncclUniqueId), ncclUint8,
                                                       w->comms[l], NULL));
    cc_group_end(w, "ncclAllGather(ids)");
    memcpy(ids, all, (size_t)nid * sizeof(*ids));
    free(mine);
    free(all);
}

/* The roots of the ids this process made are gone: the first's once every rank joined,
 * the others' (never used) at the latest when the communicator was made. */
static void scal_roots_gone(const cc_world_t *w, const ncclUniqueId *ids, int nid, long *cases)
{
    for (int k = 0; k < nid; k++) {
        unsigned port = id_root_port(&ids[k]);
        if (local_of(w, k) < 0 || port == 0)
            continue;
        double t0 = now_s();
        while (port_listening(port) == 1 && now_s() - t0 < LISTEN_WAIT_S) {
            struct timespec ts = { 0, 5000000 };
            nanosleep(&ts, NULL);
        }
        char g[96];
        snprintf(g, sizeof(g), "the root of id %d still listens on port %u after %.0f s", k,
                 port, LISTEN_WAIT_S);
        expect_true(w, k, "ncclCommInitRankScalable(roots of the ids)",
                    port_listening(port) == 0, g, "no listener left", cases);
    }
}

static void scal_case(cc_world_t *w, int own_roots, uint32_t salt, long *cases)
{
    int nid = w->nranks < 3 ? w->nranks : 3;
    ncclUniqueId ids[3];
    cc_world_t sub = *w;
    scal_ids(w, nid, own_roots, ids, cases);
    int same = 1;
    for (int k = 1; k < nid; k++)
        same &= memcmp(&ids[k], &ids[0], sizeof(ids[0])) == 0;
    /* NCCL_COMM_ID: every ncclGetUniqueId gives the same id; otherwise each its own */
    expect_true(w, w->ranks[0], "ncclGetUniqueId(ids for ncclCommInitRankScalable)",
                nid == 1 || same == !own_roots, same ? "equal ids" : "distinct ids",
                own_roots ? "distinct ids" : "equal ids (NCCL_COMM_ID)", cases);
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++)
        CC_NCCL(w, "ncclCommInitRankScalable",
                ncclCommInitRankScalable(&sub.comms[l], w->nranks, w->ranks[l], nid, ids, NULL));
    cc_group_end(w, "ncclCommInitRankScalable");
    ar_own(&sub, 1001, salt, "ncclAllReduce(ncclCommInitRankScalable comm)", cases);
    cc_comms_close(&sub, sub.comms, sub.nlocal, 0);
    if (own_roots)
        scal_roots_gone(w, ids, nid, cases);
}

static void api_scalable(cc_world_t *w, long *cases)
{
    cc_set_phase("ncclCommInitRankScalable");
    if (strcmp(w->mode, "proc") == 0 && getenv("NCCL_COMM_ID") != NULL)
        scal_case(w, 0, 94001, cases);
    scal_case(w, strcmp(w->mode, "proc") == 0 || getenv("NCCL_COMM_ID") == NULL, 94002, cases);
    barrier(w, 94003);
}

/* ---- ncclResetDebugInit ----------------------------------------------------------------- */

static const char *const dbg_vars[] = { "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE",
                                        "BRAID_DEBUG", "BRAID_DEBUG_SUBSYS", "BRAID_DEBUG_FILE" };
#define DBG_NVARS 6
#define DBG_NFILES 4

typedef struct dbg_state {
    char *saved[DBG_NVARS];
    char path[DBG_NFILES][256];
    char pattern[256];   /* of the last file: NCCL_DEBUG_FILE's %p */
} dbg_state_t;

/* Keep the caller's settings; BRAID_DEBUG* would win over NCCL_DEBUG*: out of the way. */
static void dbg_save(dbg_state_t *d)
{
    for (int i = 0; i < DBG_NVARS; i++) {
        const char *v = getenv(dbg_vars[i]);
        d->saved[i] = v != NULL ? strdup(v) : NULL;
        if (i >= 3)
            unsetenv(dbg_vars[i]);
    }
}

static void dbg_restore(dbg_state_t *d)
{
    for (int i = 0; i < DBG_NVARS; i++) {
        if (d->saved[i] != NULL)
            setenv(dbg_vars[i], d->saved[i], 1);
        else
            unsetenv(dbg_vars[i]);
        free(d->saved[i]);
    }
}

static void dbg_set(const char *level, const char *subsys, const char *file)
{
    setenv("NCCL_DEBUG", level, 1);
    setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
    setenv("NCCL_DEBUG_FILE", file, 1);
}

/* Logs at INFO under INIT ("... init done"): a communicator of one rank, made and destroyed. */
static void dbg_trigger(const cc_world_t *w)
{
    ncclUniqueId id;
    ncclComm_t c;
    CC_NCCL(w, "ncclGetUniqueId", ncclGetUniqueId(&id));
    CC_NCCL(w, "ncclCommInitRank(1 rank)", ncclCommInitRank(&c, 1, id, 0));
    CC_NCCL(w, "ncclCommDestroy(1 rank)", ncclCommDestroy(c));
}

/* Lines of this process at INFO level with `needle` in `path`; -1: no such file. */
static long dbg_lines(const char *path, const char *needle)
{
    FILE *fp = fopen(path, "r");
    char line[2048], pid[32];
    long n = 0;
    if (fp == NULL)
        return -1;
    snprintf(pid, sizeof(pid), ":%d:", (int)getpid());
    while (fgets(line, sizeof(line), fp) != NULL)
        if (strstr(line, pid) != NULL && strstr(line, " NCCL INFO ") != NULL &&
            strstr(line, needle) != NULL)
            n++;
    fclose(fp);
    return n;
}

static void dbg_expect(const cc_world_t *w, const char *what, long got, int ok,
                       const char *expected, long *cases)
{
    char g[64];
    snprintf(g, sizeof(g), got < 0 ? "no log file" : "%ld matching lines", got);
    expect_true(w, w->ranks[0], what, ok, g, expected, cases);
}

static void dbg_phases(const cc_world_t *w, dbg_state_t *d, long *cases)
{
    const char *done = "init done";
    dbg_set("INFO", "INIT", d->path[0]);   /* read only by ncclResetDebugInit */
    dbg_trigger(w);
    long a = dbg_lines(d->path[0], done);
    dbg_expect(w, "NCCL_DEBUG*=INFO before ncclResetDebugInit", a, a == -1,
               "no log file yet", cases);
    reset_debug();
    dbg_trigger(w);
    a = dbg_lines(d->path[0], done);
    dbg_expect(w, "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE", a, a >= 1,
               "INIT lines in NCCL_DEBUG_FILE", cases);
    dbg_set("INFO", "TUNING", d->path[1]);
    reset_debug();
    dbg_trigger(w);
    long b = dbg_lines(d->path[1], done), a2 = dbg_lines(d->path[0], done);
    dbg_expect(w, "NCCL_DEBUG_SUBSYS=TUNING", b, b == 0, "a log file without INIT lines",
               cases);
    dbg_expect(w, "NCCL_DEBUG_FILE changed", a2, a2 == a, "the old file left alone", cases);
    dbg_set("WARN", "INIT", d->path[2]);
    reset_debug();
    dbg_trigger(w);
    long c = dbg_lines(d->path[2], "");
    dbg_expect(w, "NCCL_DEBUG=WARN", c, c == 0, "a log file without INFO lines", cases);
    dbg_set("INFO", "ALL", d->pattern);
    reset_debug();
    dbg_trigger(w);
    long e = dbg_lines(d->path[3], done);
    dbg_expect(w, "NCCL_DEBUG_FILE with %p, NCCL_DEBUG_SUBSYS=ALL", e, e >= 1,
               "INIT lines in the file named with the pid", cases);
    dbg_restore(d);
    reset_debug();
    dbg_trigger(w);
    long e2 = dbg_lines(d->path[3], done);
    dbg_expect(w, "NCCL_DEBUG* restored", e2, e2 == e, "no more lines in the file", cases);
}

static void debug_run(const cc_world_t *w, long *cases)
{
    dbg_state_t d;
    const char *tmp = getenv("TMPDIR");
    tmp = tmp != NULL && *tmp != '\0' ? tmp : "/tmp";
    for (int i = 0; i < DBG_NFILES; i++) {
        snprintf(d.path[i], sizeof(d.path[i]), "%s/coll_check-debug-%d-%d.log", tmp,
                 (int)getpid(), i);
        unlink(d.path[i]);
    }
    snprintf(d.pattern, sizeof(d.pattern), "%s/coll_check-debug-%%p-%d.log", tmp,
             DBG_NFILES - 1);
    dbg_save(&d);
    dbg_phases(w, &d, cases);
    for (int i = 0; i < DBG_NFILES; i++)
        unlink(d.path[i]);
}

/* One thread per process changes the environment (setenv is not thread-safe): in a -T run
 * rank 0's, while the other threads wait in the barrier, inside the library. */
void cc_test_debug(cc_world_t *w)
{
    long cases = 0;
    cc_set_phase("ncclResetDebugInit");
    int runs = strcmp(w->mode, "threads-each") != 0 || w->ranks[0] == 0;
    if (runs)
        debug_run(w, &cases);
    barrier(w, 95001);
    if (runs)
        cc_section_done(w, "debug", cases);
}

void cc_test_api(cc_world_t *w)
{
    long cases = 0;
    api_memalloc(w, &cases);
    api_window(w, &cases);
    api_simulate(w, &cases);
    api_revoke(w, &cases);
    api_scalable(w, &cases);
    cc_section_done(w, "api", cases);
}
