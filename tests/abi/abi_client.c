/*
 * ABI client: a program written for NVIDIA's NCCL, built with NVIDIA's nccl.h and linked
 * against NVIDIA's libnccl.so.2, then run with braid's libnccl.so.2 first in
 * LD_LIBRARY_PATH (run_abi_client.sh does all three). If braid's exports, types, enum
 * values, struct layouts and semantics match NCCL's, it passes.
 *
 * All buffers are plain malloc memory and every stream is NULL: braid runs collectives on
 * host memory. (NVIDIA's own library needs GPUs and device buffers, so this client is not
 * expected to pass on it.) One thread drives all ranks of ncclCommInitAll communicators
 * through ncclGroupStart/ncclGroupEnd; ncclCommInitRankConfig runs with one thread per
 * rank. Every result is compared exactly.
 *
 * Output: one line per test, then "abi_client: PASS" and exit 0, or the failed checks,
 * "abi_client: FAIL" and exit 1. A watchdog turns a hang into a failure.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nccl.h>

#define CLIENT_MAX_RANKS 4
#define CLIENT_TIMEOUT_S 120

static int client_failures;

#define CLIENT_CHECK_RES(_call, _want)                                                     \
    client_check_res((_call), (_want), #_call, __LINE__)

/* Compare a result code with the expected one; print the call on mismatch. */
static int client_check_res(ncclResult_t got, ncclResult_t want, const char *call, int line)
{
    if (got == want)
        return 1;
    printf("FAIL line %d: %s returned %d (%s), expected %d\n", line, call, (int)got,
           ncclGetErrorString(got), (int)want);
    client_failures++;
    return 0;
}

/* Count mismatching elements of a double-converted buffer; report the first. */
static int client_check_buf(const char *what, int rank, size_t n, double (*get)(const void *, size_t),
                            const void *buf, double (*want)(size_t, int, int), int nranks)
{
    for (size_t i = 0; i < n; i++) {
        double g = get(buf, i), w = want(i, rank, nranks);
        if (g != w) {
            printf("FAIL %s: nranks %d rank %d element %zu is %g, expected %g\n", what,
                   nranks, rank, i, g, w);
            client_failures++;
            return 0;
        }
    }
    return 1;
}

static double get_f32(const void *b, size_t i) { return ((const float *)b)[i]; }
static double get_i32(const void *b, size_t i) { return ((const int32_t *)b)[i]; }
static double get_f64(const void *b, size_t i) { return ((const double *)b)[i]; }

/* Inputs and expected outputs of each collective, as functions of (element, rank). */
static double ar_in(size_t i, int r) { return (double)(r + 1) + (double)(i % 7); }
static double ar_want(size_t i, int r, int n)
{
    (void)r;
    return (double)n * (n + 1) / 2 + (double)n * (double)(i % 7);
}
static int32_t mx_in(size_t i, int r) { return (int32_t)((i * 31 + (size_t)r * 17) % 101); }
static double mx_want(size_t i, int r, int n)
{
    int32_t m = mx_in(i, 0);
    (void)r;
    for (int q = 1; q < n; q++)
        m = mx_in(i, q) > m ? mx_in(i, q) : m;
    return m;
}
static size_t g_count; /* per-rank element count of the collective being checked */
static double ag_want(size_t i, int r, int n)
{
    (void)r;
    (void)n;
    return (double)(i / g_count) * 100000.0 + (double)(i % g_count);
}
static double bc_want(size_t i, int r, int n)
{
    (void)r;
    (void)n;
    return (double)i * 0.5;
}
static double rs_want(size_t i, int r, int n)
{
    double s = 0;
    for (int q = 0; q < n; q++)
        s += (double)(q + 1) * (double)(((size_t)r * g_count + i) % 13);
    return s;
}

/* One buffer per rank. */
typedef struct {
    void *send[CLIENT_MAX_RANKS];
    void *recv[CLIENT_MAX_RANKS];
} client_bufs_t;

static int client_bufs_alloc(client_bufs_t *b, int n, size_t send_bytes, size_t recv_bytes)
{
    memset(b, 0, sizeof(*b));
    for (int r = 0; r < n; r++) {
        b->send[r] = calloc(1, send_bytes);
        b->recv[r] = calloc(1, recv_bytes);
        if (b->send[r] == NULL || b->recv[r] == NULL) {
            printf("FAIL: out of memory\n");
            client_failures++;
            return 0;
        }
    }
    return 1;
}

static void client_bufs_free(client_bufs_t *b, int n)
{
    for (int r = 0; r < n; r++) {
        free(b->send[r]);
        free(b->recv[r]);
    }
}

/* Float sum all-reduce, out of place. */
static void client_allreduce_sum(ncclComm_t *comms, int n, size_t count)
{
    client_bufs_t b;
    if (client_bufs_alloc(&b, n, count * sizeof(float), count * sizeof(float))) {
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < count; i++)
                ((float *)b.send[r])[i] = (float)ar_in(i, r);
        CLIENT_CHECK_RES(ncclGroupStart(), ncclSuccess);
        for (int r = 0; r < n; r++)
            CLIENT_CHECK_RES(ncclAllReduce(b.send[r], b.recv[r], count, ncclFloat32, ncclSum,
                                           comms[r], (cudaStream_t)0), ncclSuccess);
        CLIENT_CHECK_RES(ncclGroupEnd(), ncclSuccess);
        for (int r = 0; r < n; r++)
            client_check_buf("allreduce sum float", r, count, get_f32, b.recv[r], ar_want, n);
    }
    client_bufs_free(&b, n);
}

/* Int32 max all-reduce, in place. */
static void client_allreduce_max_inplace(ncclComm_t *comms, int n, size_t count)
{
    client_bufs_t b;
    if (client_bufs_alloc(&b, n, count * sizeof(int32_t), 1)) {
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < count; i++)
                ((int32_t *)b.send[r])[i] = mx_in(i, r);
        CLIENT_CHECK_RES(ncclGroupStart(), ncclSuccess);
        for (int r = 0; r < n; r++)
            CLIENT_CHECK_RES(ncclAllReduce(b.send[r], b.send[r], count, ncclInt32, ncclMax,
                                           comms[r], (cudaStream_t)0), ncclSuccess);
        CLIENT_CHECK_RES(ncclGroupEnd(), ncclSuccess);
        for (int r = 0; r < n; r++)
            client_check_buf("allreduce max int32 in place", r, count, get_i32, b.send[r],
                             mx_want, n);
    }
    client_bufs_free(&b, n);
}

/* Int32 all-gather: rank q contributes q*100000 + i. */
static void client_allgather(ncclComm_t *comms, int n, size_t count)
{
    client_bufs_t b;
    if (client_bufs_alloc(&b, n, count * sizeof(int32_t), n * count * sizeof(int32_t))) {
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < count; i++)
                ((int32_t *)b.send[r])[i] = (int32_t)(r * 100000 + (int)i);
        CLIENT_CHECK_RES(ncclGroupStart(), ncclSuccess);
        for (int r = 0; r < n; r++)
            CLIENT_CHECK_RES(ncclAllGather(b.send[r], b.recv[r], count, ncclInt32, comms[r],
                                           (cudaStream_t)0), ncclSuccess);
        CLIENT_CHECK_RES(ncclGroupEnd(), ncclSuccess);
        g_count = count;
        for (int r = 0; r < n; r++)
            client_check_buf("allgather int32", r, n * count, get_i32, b.recv[r], ag_want, n);
    }
    client_bufs_free(&b, n);
}

/* Double broadcast from the last rank. */
static void client_broadcast(ncclComm_t *comms, int n, size_t count)
{
    client_bufs_t b;
    int root = n - 1;
    if (client_bufs_alloc(&b, n, count * sizeof(double), count * sizeof(double))) {
        for (size_t i = 0; i < count; i++)
            ((double *)b.send[root])[i] = (double)i * 0.5;
        CLIENT_CHECK_RES(ncclGroupStart(), ncclSuccess);
        for (int r = 0; r < n; r++)
            CLIENT_CHECK_RES(ncclBroadcast(b.send[r], b.recv[r], count, ncclFloat64, root,
                                           comms[r], (cudaStream_t)0), ncclSuccess);
        CLIENT_CHECK_RES(ncclGroupEnd(), ncclSuccess);
        for (int r = 0; r < n; r++)
            client_check_buf("broadcast double", r, count, get_f64, b.recv[r], bc_want, n);
    }
    client_bufs_free(&b, n);
}

/* Float sum reduce-scatter: rank q sends (q+1) * (j % 13) at element j. */
static void client_reducescatter(ncclComm_t *comms, int n, size_t count)
{
    client_bufs_t b;
    if (client_bufs_alloc(&b, n, n * count * sizeof(float), count * sizeof(float))) {
        for (int r = 0; r < n; r++)
            for (size_t j = 0; j < n * count; j++)
                ((float *)b.send[r])[j] = (float)((r + 1) * (int)(j % 13));
        CLIENT_CHECK_RES(ncclGroupStart(), ncclSuccess);
        for (int r = 0; r < n; r++)
            CLIENT_CHECK_RES(ncclReduceScatter(b.send[r], b.recv[r], count, ncclFloat32,
                                               ncclSum, comms[r], (cudaStream_t)0),
                             ncclSuccess);
        CLIENT_CHECK_RES(ncclGroupEnd(), ncclSuccess);
        g_count = count;
        for (int r = 0; r < n; r++)
            client_check_buf("reducescatter sum float", r, count, get_f32, b.recv[r],
                             rs_want, n);
    }
    client_bufs_free(&b, n);
}

/* ncclCommInitAll communicators of n ranks, every collective, then destroy. */
static void client_test_initall(int n)
{
    ncclComm_t comms[CLIENT_MAX_RANKS] = { NULL };
    int before = client_failures;

    if (!CLIENT_CHECK_RES(ncclCommInitAll(comms, n, NULL), ncclSuccess)) {
        printf("abi_client: ncclCommInitAll nranks=%d FAILED\n", n);
        return;
    }
    for (int r = 0; r < n; r++) {
        int count = -1, rank = -1;
        ncclResult_t async = ncclInternalError;
        CLIENT_CHECK_RES(ncclCommCount(comms[r], &count), ncclSuccess);
        CLIENT_CHECK_RES(ncclCommUserRank(comms[r], &rank), ncclSuccess);
        CLIENT_CHECK_RES(ncclCommGetAsyncError(comms[r], &async), ncclSuccess);
        if (count != n || rank != r || async != ncclSuccess) {
            printf("FAIL initall: rank %d reports count %d rank %d async %d\n", r, count,
                   rank, (int)async);
            client_failures++;
        }
    }
    client_allreduce_sum(comms, n, 1031);
    client_allreduce_max_inplace(comms, n, 4099);
    client_allgather(comms, n, 517);
    client_broadcast(comms, n, 1000);
    client_reducescatter(comms, n, 263);
    client_allreduce_sum(comms, n, 0); /* count 0: a successful no-op */
    for (int r = 0; r < n; r++)
        CLIENT_CHECK_RES(ncclCommDestroy(comms[r]), ncclSuccess);
    printf("abi_client: ncclCommInitAll nranks=%d %s\n", n,
           client_failures == before ? "ok" : "FAILED");
}

/* ---- one thread per rank: ncclCommInitRankConfig ------------------------------------ */

typedef struct {
    int rank, nranks;
    ncclUniqueId id;
    int failures;
} client_rank_arg_t;

#define RANK_CHECK(_a, _call, _want)                                                       \
    do {                                                                                   \
        ncclResult_t _got = (_call);                                                       \
        if (_got != (_want)) {                                                             \
            printf("FAIL rank %d line %d: %s returned %d (%s)\n", (_a)->rank, __LINE__,    \
                   #_call, (int)_got, ncclGetErrorString(_got));                           \
            (_a)->failures++;                                                              \
            goto out;                                                                      \
        }                                                                                  \
    } while (0)

static void *client_rank_main(void *p)
{
    client_rank_arg_t *a = p;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclComm_t comm = NULL;
    ncclResult_t async = ncclInternalError;
    const size_t count = 257;
    int32_t buf[257];

    cfg.blocking = 1;
    cfg.commName = "abi_client";
    RANK_CHECK(a, ncclCommInitRankConfig(&comm, a->nranks, a->id, a->rank, &cfg), ncclSuccess);
    for (size_t i = 0; i < count; i++)
        buf[i] = (int32_t)(i + 1) * (a->rank + 1);
    RANK_CHECK(a, ncclAllReduce(buf, buf, count, ncclInt32, ncclSum, comm, (cudaStream_t)0),
               ncclSuccess);
    for (size_t i = 0; i < count; i++) {
        int32_t want = (int32_t)(i + 1) * (a->nranks * (a->nranks + 1) / 2);
        if (buf[i] != want) {
            printf("FAIL rank %d: config allreduce element %zu is %d, expected %d\n", a->rank,
                   i, (int)buf[i], (int)want);
            a->failures++;
            break;
        }
    }
    RANK_CHECK(a, ncclCommGetAsyncError(comm, &async), ncclSuccess);
    if (async != ncclSuccess) {
        printf("FAIL rank %d: async error %d after allreduce\n", a->rank, (int)async);
        a->failures++;
    }
    RANK_CHECK(a, ncclCommFinalize(comm), ncclSuccess);
out:
    if (comm != NULL && ncclCommDestroy(comm) != ncclSuccess) {
        printf("FAIL rank %d: ncclCommDestroy\n", a->rank);
        a->failures++;
    }
    return NULL;
}

static void client_test_config(int n)
{
    pthread_t th[CLIENT_MAX_RANKS];
    client_rank_arg_t args[CLIENT_MAX_RANKS];
    ncclUniqueId id;
    int before = client_failures;

    memset(&id, 0, sizeof(id));
    if (!CLIENT_CHECK_RES(ncclGetUniqueId(&id), ncclSuccess))
        return;
    for (int r = 0; r < n; r++) {
        args[r] = (client_rank_arg_t){ .rank = r, .nranks = n, .id = id, .failures = 0 };
        if (pthread_create(&th[r], NULL, client_rank_main, &args[r]) != 0) {
            printf("FAIL: pthread_create\n");
            exit(1);
        }
    }
    for (int r = 0; r < n; r++) {
        pthread_join(th[r], NULL);
        client_failures += args[r].failures;
    }
    printf("abi_client: ncclCommInitRankConfig nranks=%d %s\n", n,
           client_failures == before ? "ok" : "FAILED");
}

/* ---- calls without a communicator --------------------------------------------------- */

static void client_test_misc(void)
{
    static const char *const want[] = {
        "no error",
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        "unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "internal error - please report this issue to the NCCL developers",
        "invalid argument (run with NCCL_DEBUG=WARN for details)",
        "invalid usage (run with NCCL_DEBUG=WARN for details)",
        "remote process exited or there was a network error",
        "NCCL operation in progress",
        "unknown result code",
    };
    int version = 0, before = client_failures;
    float x = 1.0f;

    CLIENT_CHECK_RES(ncclGetVersion(&version), ncclSuccess);
    if (version != 22809 || version != NCCL_VERSION_CODE) {
        printf("FAIL: ncclGetVersion gave %d, expected 22809\n", version);
        client_failures++;
    }
    CLIENT_CHECK_RES(ncclGetVersion(NULL), ncclInvalidArgument);
    for (int i = 0; i <= (int)ncclNumResults; i++) {
        const char *s = ncclGetErrorString((ncclResult_t)i);
        if (s == NULL || strcmp(s, want[i]) != 0) {
            printf("FAIL: ncclGetErrorString(%d) is \"%s\", expected \"%s\"\n", i,
                   s ? s : "(null)", want[i]);
            client_failures++;
        }
    }
    if (strcmp(ncclGetErrorString((ncclResult_t)99), want[ncclNumResults]) != 0) {
        printf("FAIL: ncclGetErrorString(99) is not \"%s\"\n", want[ncclNumResults]);
        client_failures++;
    }
    CLIENT_CHECK_RES(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, NULL, (cudaStream_t)0),
                     ncclInvalidArgument);
    if (ncclGetLastError(NULL) == NULL) {
        printf("FAIL: ncclGetLastError(NULL) returned NULL\n");
        client_failures++;
    }
    printf("abi_client: version, error strings, argument checks %s\n",
           client_failures == before ? "ok" : "FAILED");
}

static void client_on_alarm(int sig)
{
    static const char msg[] = "abi_client: FAIL: timed out (a call hung)\n";
    (void)sig;
    (void)!write(1, msg, sizeof(msg) - 1);
    _exit(1);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, client_on_alarm);
    alarm(CLIENT_TIMEOUT_S);

    client_test_misc();
    for (int n = 2; n <= CLIENT_MAX_RANKS; n++)
        client_test_initall(n);
    for (int n = 2; n <= CLIENT_MAX_RANKS; n++)
        client_test_config(n);

    if (client_failures != 0) {
        printf("abi_client: FAIL (%d failed checks)\n", client_failures);
        return 1;
    }
    printf("abi_client: PASS\n");
    return 0;
}
