/*
 * perf_common: the driver shared by the *_perf tools (see perf_common.h).
 *
 * Flow, as in nccl-tests: parse flags; find this process's ranks; every rank (one thread
 * each) makes its communicator with ncclCommInitRank; for each type, op and root (-r -1:
 * every rank): warm up at the largest and smallest size, then for each size time `iters`
 * calls out of place and in place, check one call against the expected data (a rank
 * whose recvbuff the collective must not touch checks that it did not), and let global
 * rank 0 print the row. Ranks agree on times and error counts through their own
 * communicator (sends and receives through rank 0: perf_agree), so threads and processes
 * need no other channel.
 *
 * Device buffers (perf_gpu.h: CUDA's driver or HIP's runtime; with HIP, of rccl-tests'
 * memory type -Y), as in nccl-tests: each rank thread binds its device and issues every
 * call on its own stream (perf_coll_t's run); the data is made and checked on the host, in
 * mirrors of the buffers copied to and from the device. The stream is synchronized
 * before the clock is read, before host and device touch the buffers, and before every
 * call of the driver's own on host memory (perf_agree), so those never overtake queued
 * work. With host buffers the mirrors are the buffers and the stream is NULL.
 *
 * The command line lives in perf_args.c, the data and its check in perf_data.c.
 */
#include "perf_common.h"
#include "perf_args.h"
#include "perf_gpu.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the job: ranks of this process ---- */

#define PERF_LINE 256   /* bytes per rank in the gathered device listing */

typedef struct perf_job perf_job_t;

typedef struct perf_rank {
    perf_job_t *job;
    int rank, thread;
    int device;                   /* GPU ordinal of its buffers; -1 for host buffers */
    void *stream;                 /* its calls' stream; NULL for host buffers, or -y 1 */
    ncclComm_t comm;
    char *send, *recv;            /* the collectives' buffers (device or host memory) */
    char *hsend, *hrecv;          /* their host mirrors: send and recv for host buffers */
    char *expected;
    void *reg[2];
    ncclWindow_t win[2];
    _Atomic int64_t busy_since;   /* -T watchdog: when the current call began, 0 if idle */
    double bw_sum;
    int bw_count, errors, in_row, in_group;
    uint32_t rep;
    char json_row[1024];
    pthread_t tid;
} perf_rank_t;

struct perf_job {
    const perf_coll_t *coll;
    perf_args_t a;
    int nprocs, proc, local_rank, local_size, nranks, reduced;
    int ndev;                     /* GPU devices; 0: host buffers, for the reason in why */
    char why[256];
    size_t buf_bytes;
    ncclUniqueId uid;
    char host[256];
    FILE *json;                   /* -J's file */
    FILE *rccl;                   /* -X's file: JSON lines as -J's, or CSV (rccl_csv) */
    int rccl_csv;
    perf_rank_t *ranks;
    atomic_int done;
};

/* One (type, op, size) as the bench sees it. */
typedef struct perf_case {
    perf_data_t d;
    perf_sizes_t s;
    size_t bytes;          /* printed size: max(send, recv) bytes */
    const char *op_name;
    int keep;              /* this rank's recvbuff must not change (root_only, not root) */
} perf_case_t;

static int64_t perf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A failed call: name it, then end the process (peers see it go and fail too). */
static void perf_die(const perf_rank_t *rk, const char *what, ncclResult_t res)
{
    const char *last = ncclGetLastError(rk->comm), *name = ncclGetErrorString(res);
    int has_last = last != NULL && last[0] != '\0';
    /* NCCL's text ends "(run with NCCL_DEBUG=WARN for details)": not when they follow */
    const char *hint = has_last ? strstr(name, " (run with NCCL_DEBUG") : NULL;
    if (rk->in_row)
        putchar('\n');   /* end the half-printed row */
    fflush(stdout);
    fprintf(stderr, "%s: rank %d: %s failed: %.*s%s%s\n", rk->job->coll->prog, rk->rank, what,
            hint != NULL ? (int)(hint - name) : (int)strlen(name), name, has_last ? ": " : "",
            has_last ? last : "");
    _exit(1);
}

static inline void perf_nccl(const perf_rank_t *rk, const char *what, ncclResult_t res)
{
    if (res != ncclSuccess)
        perf_die(rk, what, res);
}

/* A failed GPU runtime call (perf_gpu said which, and why): end the process. */
static void perf_gpu_check(const perf_rank_t *rk, int st)
{
    if (st == 0)
        return;
    if (rk->in_row)
        putchar('\n');
    fflush(stdout);
    _exit(1);
}

/* -T: mark the rank as inside a call (or out of it); an -m group counts as one call. */
static void perf_busy(perf_rank_t *rk, int on)
{
    if (rk->job->a.timeout > 0 && !rk->in_group)
        atomic_store(&rk->busy_since, on ? perf_now_ns() : 0);
}

/* Device buffers: wait until the rank's queued calls are done (for -T, a call until
 * then); one that failed on the way ends the process, as a failed call does. */
static void perf_sync(perf_rank_t *rk)
{
    ncclResult_t res, async = ncclSuccess;
    if (rk->device < 0)
        return;
    perf_busy(rk, 1);
    perf_gpu_check(rk, perf_gpu_stream_sync(rk->stream));
    perf_busy(rk, 0);
    if (rk->comm == NULL)
        return;
    res = ncclCommGetAsyncError(rk->comm, &async);
    perf_nccl(rk, "a queued call (ncclCommGetAsyncError)", res != ncclSuccess ? res : async);
}

/* acc op= in, count elements of dt: the types and ops perf_agree is used with. */
static void perf_host_reduce(void *acc, const void *in, size_t count, ncclDataType_t dt,
                             ncclRedOp_t op)
{
    for (size_t i = 0; i < count; i++) {
        switch (dt) {
        case ncclUint8: ((uint8_t *)acc)[i] += ((const uint8_t *)in)[i]; break;
        case ncclInt32: ((int32_t *)acc)[i] += ((const int32_t *)in)[i]; break;
        case ncclInt64: ((int64_t *)acc)[i] += ((const int64_t *)in)[i]; break;
        default: {          /* ncclFloat64 */
            double *a = (double *)acc + i, b = ((const double *)in)[i];
            *a = op == ncclMin ? (b < *a ? b : *a) : op == ncclMax ? (b > *a ? b : *a) : *a + b;
        }
        }
    }
}

static size_t perf_agree_size(ncclDataType_t dt)
{
    return dt == ncclUint8 ? 1 : dt == ncclInt32 ? 4 : 8;
}

/*
 * The driver's own agreement between ranks, on host memory once the rank's queued calls
 * are done: an all-reduce made of sends and receives through global rank 0 (every rank's
 * part to it, the result back), so that NCCL_ALGO, which may force an algorithm that
 * cannot run these small calls, never touches it.
 */
static void perf_agree(perf_rank_t *rk, void *buf, size_t count, ncclDataType_t dt,
                       ncclRedOp_t op)
{
    int n = rk->job->nranks;
    size_t bytes = count * perf_agree_size(dt);
    perf_sync(rk);
    perf_busy(rk, 1);
    if (rk->rank != 0) {
        perf_nccl(rk, "ncclSend (driver sync)", ncclSend(buf, count, dt, 0, rk->comm, NULL));
        perf_nccl(rk, "ncclRecv (driver sync)", ncclRecv(buf, count, dt, 0, rk->comm, NULL));
        perf_busy(rk, 0);
        return;
    }
    char *parts = malloc(bytes * (size_t)(n > 1 ? n - 1 : 1));
    if (parts == NULL) {
        fprintf(stderr, "%s: no memory for the ranks' agreement\n", rk->job->coll->prog);
        exit(1);
    }
    perf_nccl(rk, "ncclGroupStart (driver sync)", ncclGroupStart());
    for (int p = 1; p < n; p++)
        perf_nccl(rk, "ncclRecv (driver sync)",
                  ncclRecv(parts + (size_t)(p - 1) * bytes, count, dt, p, rk->comm, NULL));
    perf_nccl(rk, "ncclGroupEnd (driver sync)", ncclGroupEnd());
    for (int p = 1; p < n; p++)
        perf_host_reduce(buf, parts + (size_t)(p - 1) * bytes, count, dt, op);
    free(parts);
    perf_nccl(rk, "ncclGroupStart (driver sync)", ncclGroupStart());
    for (int p = 1; p < n; p++)
        perf_nccl(rk, "ncclSend (driver sync)", ncclSend(buf, count, dt, p, rk->comm, NULL));
    perf_nccl(rk, "ncclGroupEnd (driver sync)", ncclGroupEnd());
    perf_busy(rk, 0);
}

static void perf_barrier(perf_rank_t *rk)
{
    int32_t x = 0;
    perf_agree(rk, &x, 1, ncclInt32, ncclSum);
}

/* The time every rank reports, per -a: rank 0's, the mean, the min or the max. */
static double perf_time_agree(perf_rank_t *rk, double t)
{
    int avg = rk->job->a.average;
    if (avg == 0 && rk->rank != 0)
        t = 0;
    perf_agree(rk, &t, 1, ncclFloat64, avg == 2 ? ncclMin : avg == 3 ? ncclMax : ncclSum);
    return avg == 1 ? t / rk->job->nranks : t;
}

/* ---- environment ---- */

/* The launchers' rank and size variables, in the order they are looked for. */
static const char *const perf_world_env[][2] = {
    { "RANK", "WORLD_SIZE" }, { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
    { "PMI_RANK", "PMI_SIZE" }, { "SLURM_PROCID", "SLURM_NTASKS" },
};

/* 1 and *v_p if `name` holds an integer, 0 if unset, -1 (with a message) if malformed. */
static int perf_env_int(const char *prog, const char *name, int *v_p)
{
    const char *s = getenv(name);
    char *end;
    if (s == NULL || s[0] == '\0')
        return 0;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > INT_MAX) {
        fprintf(stderr, "%s: %s=\"%s\" is not a rank number\n", prog, name, s);
        return -1;
    }
    *v_p = (int)v;
    return 1;
}

/* This process's place among the launcher's processes (or the only process). */
static int perf_job_env(perf_job_t *job)
{
    static const char *const local[][2] = {
        { "LOCAL_RANK", "LOCAL_WORLD_SIZE" },
        { "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE" },
        { "MPI_LOCALRANKID", "MPI_LOCALNRANKS" }, { "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE" },
    };
    const char *prog = job->coll->prog;
    job->nprocs = 1;
    for (size_t i = 0; i < 4; i++) {
        int r = perf_env_int(prog, perf_world_env[i][0], &job->proc);
        int n = perf_env_int(prog, perf_world_env[i][1], &job->nprocs);
        if (r < 0 || n < 0)
            return -1;
        if (r == 1 && n == 1) {
            if (job->nprocs >= 1 && job->proc < job->nprocs)
                break;
            fprintf(stderr, "%s: %s=%d is not below %s=%d\n", prog, perf_world_env[i][0],
                    job->proc, perf_world_env[i][1], job->nprocs);
            return -1;
        }
        job->proc = 0;
        job->nprocs = 1;
    }
    job->local_size = job->nprocs;
    for (size_t i = 0; i < 4; i++) {
        if (perf_env_int(prog, local[i][0], &job->local_rank) == 1) {
            if (perf_env_int(prog, local[i][1], &job->local_size) != 1)
                job->local_size = job->nprocs;
            break;
        }
    }
    if (job->local_size < 1)
        job->local_size = 1;
    return 0;
}

/* Whether this process is a rank other than the first of a launched job (the first pair of
 * perf_world_env that is set; perf_job_env checks them later). Every rank gets the same
 * command line: the others leave the messages about it to the first, and exit alike. */
static int perf_launched_not_first(void)
{
    for (size_t i = 0; i < 4; i++) {
        const char *r = getenv(perf_world_env[i][0]), *n = getenv(perf_world_env[i][1]);
        if (r != NULL && r[0] != '\0' && n != NULL && n[0] != '\0')
            return atoi(r) > 0;
    }
    return 0;
}

/* -Y other than coarse: the GPU runtime must give that memory (the check of host buffers
 * needs none). Returns 0 or an exit status. */
static int perf_job_mem(const perf_job_t *job)
{
    const char *prog = job->coll->prog, *name = perf_mem_names[job->a.mem_type];
    char why[256];
    if (job->a.mem_type == PERF_MEM_COARSE)
        return 0;
    if (job->ndev == 0) {
        if (job->proc == 0)
            fprintf(stderr, "%s: -Y %s: %s memory needs a GPU runtime with a device, and here "
                    "the buffers are host memory (%s); leave out -Y for host buffers\n", prog,
                    name, name, job->why);
        return 2;
    }
    if (perf_gpu_mem_check(job->a.mem_type, why, sizeof(why)) == 0)
        return 0;
    if (job->proc == 0)
        fprintf(stderr, "%s: -Y %s is unsupported here: %s\n", prog, name, why);
    return 2;
}

/* Device or host buffers: the GPU runtime's device count in job->ndev, or 0 and the reason
 * in job->why. Returns 0 or an exit status. */
static int perf_job_buffers(perf_job_t *job)
{
    const char *prog = job->coll->prog;
    job->ndev = 0;
    if (job->a.host_buffers) {
        snprintf(job->why, sizeof(job->why), "--host-buffers");
        return perf_job_mem(job);
    }
    if (perf_gpu_open(prog, &job->ndev, job->why, sizeof(job->why)) != 0) {
        job->ndev = 0;
        return perf_job_mem(job);
    }
    if (job->a.stream_null && job->a.nthreads > job->ndev) {
        fprintf(stderr, "%s: -y 1 with -t %d on %d GPU device%s: the ranks of a device would "
                "share its NULL stream, each waiting there for the others; use -y 0 (a stream "
                "per rank) or --host-buffers\n", prog, job->a.nthreads, job->ndev,
                job->ndev == 1 ? "" : "s");
        return 2;
    }
    return perf_job_mem(job);
}

/* The GPU device of this process's thread `thread`, as nccl-tests assigns them: the
 * host's ranks in turn, wrapping around the devices; -1 for host buffers. */
static int perf_job_device(const perf_job_t *job, int thread)
{
    return job->ndev > 0 ? (job->local_rank * job->a.nthreads + thread) % job->ndev : -1;
}

/* nccl-tests caps maxBytes by device memory; here by host memory: 2 or 3 buffers per
 * rank (with device buffers, the check's mirrors), every rank of this host, and 1 GiB for
 * everything else. */
static void perf_job_memory(perf_job_t *job)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    double phys = (double)pages * (double)psize, rest = 1073741824.0;
    double per = (job->a.check ? 3.0 : 2.0) * job->a.nthreads * job->local_size;
    if (pages <= 0 || psize <= 0 || phys <= 2 * rest)
        return;
    if ((double)job->a.max_bytes * per > phys - rest) {
        job->a.max_bytes = (size_t)((phys - rest) / per);
        job->reduced = 1;
    }
}

/* ---- output (global rank 0 only) ---- */

/* nccl-tests' number format: as many decimals (2, 1, 0) as fit the width. */
static void perf_fmt(char *out, int width, double v)
{
    for (int prec = 2; prec >= 0; prec--)
        if (snprintf(out, (size_t)width + 1, "%*.*f", width, prec, v) <= width)
            return;
    snprintf(out, (size_t)width + 1, "%*.*e", width, width >= 7 ? 1 : 0, v);
}

static void perf_print_devices(perf_rank_t *rk)
{
    perf_job_t *job = rk->job;
    size_t n = (size_t)job->nranks;
    char *lines = calloc(n, PERF_LINE);
    if (lines == NULL) {
        fprintf(stderr, "%s: out of memory for the device listing\n", job->coll->prog);
        _exit(1);
    }
    char *line = lines + (size_t)rk->rank * PERF_LINE, name[64];
    /* every rank writes its own slot; a byte sum over ranks is then a gather */
    if (rk->device >= 0) {
        perf_gpu_name(rk->device, name, sizeof(name));
        snprintf(line, PERF_LINE, "#  Rank %2d Group %2d Pid %6d on %10.64s device %2d [%s] "
                 "%s\n", rk->rank, 0, (int)getpid(), job->host, rk->device, perf_gpu_tag(),
                 name);
    } else {
        snprintf(line, PERF_LINE, "#  Rank %2d Group %2d Pid %6d on %10.64s host memory, no "
                 "device\n", rk->rank, 0, (int)getpid(), job->host);
    }
    perf_agree(rk, lines, n * PERF_LINE, ncclUint8, ncclSum);
    for (size_t i = 0; rk->rank == 0 && i < n; i++)
        printf("%.*s", PERF_LINE, lines + i * PERF_LINE);
    free(lines);
}

/* Whether the sweep times the out-of-place (0) or in-place (1) half: both, or -O's one. */
static int perf_half_on(const perf_args_t *a, int in_place)
{
    return a->out_of_place < 0 || a->out_of_place == !in_place;
}

static void perf_print_table_header(const perf_job_t *job)
{
    const char *t = job->a.cputime ? "cputime" : "time";
    if (job->reduced)
        printf("#\n# Reducing maxBytes to %zu due to memory limitation\n", job->a.max_bytes);
    printf("#\n# %10s  %12s  %8s  %6s  %6s", "", "", "", "", "");
    if (perf_half_on(&job->a, 0))
        printf("  %10s%-23s", "", "out-of-place");
    if (perf_half_on(&job->a, 1))
        printf("  %12s%-21s", "", "in-place");
    printf("\n# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
    for (int h = 0; h < 2; h++)
        if (perf_half_on(&job->a, h))
            printf("  %7s  %6s  %6s  %6s", t, "algbw", "busbw", "#wrong");
    printf("\n# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
    for (int h = 0; h < 2; h++)
        if (perf_half_on(&job->a, h))
            printf("  %7s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
    printf("\n");
}

static void perf_row_begin(perf_rank_t *rk, const perf_case_t *pc)
{
    const perf_coll_t *coll = rk->job->coll;
    if (rk->rank != 0)
        return;
    rk->in_row = 1;
    printf("%12zu  %12zu  %8s  %6s  %6d", pc->bytes, pc->s.param_count, pc->d.type->name,
           pc->op_name, pc->d.root);
    snprintf(rk->json_row, sizeof(rk->json_row),
             "{\"collective\":\"%s\",\"nranks\":%d,\"size\":%zu,\"count\":%zu,\"type\":\"%s\","
             "\"redop\":\"%s\",\"root\":%d", coll->name, rk->job->nranks, pc->bytes,
             pc->s.param_count, pc->d.type->name, pc->op_name, pc->d.root);
}

/* `wrong` < 0: not checked (-c 0, or an in-place result nccl-tests does not define). */
static void perf_row_half(perf_rank_t *rk, const perf_case_t *pc, int in_place, double usec,
                          double algbw, double busbw, long long wrong)
{
    char ts[8], as[7], bs[7], ws[24];
    size_t len = strlen(rk->json_row);
    if (rk->rank != 0)
        return;
    perf_fmt(ts, 7, usec);
    perf_fmt(as, 6, algbw);
    perf_fmt(bs, 6, busbw);
    if (wrong >= 0)
        snprintf(ws, sizeof(ws), "%lld", wrong);
    printf("  %7s  %6s  %6s  %6s", ts, as, bs, wrong >= 0 ? ws : "N/A");
    if (rk->job->rccl_csv)   /* -Z csv: rccl-tests' columns, a line per half */
        fprintf(rk->job->rccl, "%s, %d, %zu, %s, %s, %d, %.3f, %.6f, %.6f, %s\n",
                rk->job->coll->name, rk->job->nranks, pc->bytes, pc->d.type->name,
                pc->op_name, in_place, usec, algbw, busbw, wrong >= 0 ? ws : "N/A");
    snprintf(rk->json_row + len, sizeof(rk->json_row) - len,
             ",\"%s\":{\"%s\":%.3f,\"alg_bw\":%.6f,\"bus_bw\":%.6f,\"nwrong\":%s}",
             in_place ? "in_place" : "out_of_place", rk->job->a.cputime ? "cpu_time" : "time",
             usec, algbw, busbw, wrong >= 0 ? ws : "null");
}

static void perf_row_end(perf_rank_t *rk)
{
    perf_job_t *job = rk->job;
    if (rk->rank != 0)
        return;
    rk->in_row = 0;
    printf("\n");
    if (job->json != NULL) {
        fprintf(job->json, "%s}\n", rk->json_row);
        fflush(job->json);
    }
    if (job->rccl != NULL && !job->rccl_csv)
        fprintf(job->rccl, "%s}\n", rk->json_row);
    if (job->rccl != NULL)
        fflush(job->rccl);
}

/* ---- one size: time it, check it ---- */

static void perf_case_size(perf_rank_t *rk, perf_case_t *pc, size_t bytes)
{
    size_t ws = (size_t)pc->d.type->size;
    pc->s = (perf_sizes_t){ .elt_size = ws };
    rk->job->coll->sizes(bytes / ws, rk->job->nranks, &pc->s);
    pc->bytes = (pc->s.send_count > pc->s.recv_count ? pc->s.send_count : pc->s.recv_count) * ws;
}

/* One call of the case. Offsets move with `iter` across the buffer, as in nccl-tests, so
 * back-to-back calls do not reuse the same cache lines. */
static void perf_start(perf_rank_t *rk, const perf_case_t *pc, int in_place, size_t iter)
{
    const perf_coll_t *coll = rk->job->coll;
    size_t ws = (size_t)pc->d.type->size;
    size_t steps = pc->bytes ? rk->job->buf_bytes / pc->bytes : 1;
    char *recv = rk->recv + pc->bytes * (iter % steps);
    char *send = rk->send + pc->bytes * (iter % steps);
    ncclRedOp_t op = coll->uses_op ? (ncclRedOp_t)pc->d.op : ncclSum;
    if (in_place) {
        send = recv + pc->s.send_inplace_off * (size_t)rk->rank * ws;
        recv = recv + pc->s.recv_inplace_off * (size_t)rk->rank * ws;
    }
    if (coll->uses_op && pc->d.op == PERF_OP_MULSUM) {
        uint64_t scalar = 0;
        perf_type_store(pc->d.type, &scalar, 0, perf_data_scalar(rk->rank));
        perf_nccl(rk, "ncclRedOpCreatePreMulSum", ncclRedOpCreatePreMulSum(&op, &scalar,
                  pc->d.type->dt, ncclScalarHostImmediate, rk->comm));
    }
    perf_busy(rk, 1);
    perf_nccl(rk, coll->call, coll->run(send, recv, pc->s.param_count, pc->d.type->dt, op,
                                        pc->d.root < 0 ? 0 : pc->d.root, rk->comm,
                                        (cudaStream_t)rk->stream));
    perf_busy(rk, 0);
    if (coll->uses_op && pc->d.op == PERF_OP_MULSUM)
        perf_nccl(rk, "ncclRedOpDestroy", ncclRedOpDestroy(op, rk->comm));
}

/* The part of recvbuff (`recv`, or its mirror) this rank checks. */
static char *perf_recv_region(const perf_rank_t *rk, char *recv, const perf_case_t *pc,
                              int in_place)
{
    size_t off = in_place ? pc->s.recv_inplace_off * (size_t)rk->rank : 0;
    return recv + off * (size_t)pc->d.type->size;
}

/* Device buffers: the mirrors' data to the device, once the calls queued before are done
 * with it (out of place, the input; in place, it is inside recvbuff). */
static void perf_push(perf_rank_t *rk, const perf_case_t *pc, int in_place)
{
    if (rk->device < 0)
        return;
    perf_sync(rk);
    perf_gpu_check(rk, perf_gpu_to_device(rk->recv, rk->hrecv, pc->bytes));
    if (!in_place)
        perf_gpu_check(rk, perf_gpu_to_device(rk->send, rk->hsend,
                                              pc->s.send_count * (size_t)pc->d.type->size));
}

/* Device buffers: the region this rank checks back to its mirror, once the call is done. */
static void perf_pull(perf_rank_t *rk, const perf_case_t *pc, int in_place)
{
    if (rk->device < 0)
        return;
    perf_sync(rk);
    perf_gpu_check(rk, perf_gpu_to_host(perf_recv_region(rk, rk->hrecv, pc, in_place),
                                        perf_recv_region(rk, rk->recv, pc, in_place),
                                        pc->s.recv_count * (size_t)pc->d.type->size));
}

/* Fresh input (and, with `expected`, the expected output); the receive side is poisoned
 * with all-ones bytes (NaN for every float type) so an element never written is wrong.
 * A rank whose recvbuff must not change expects it as it is now, input included. */
static void perf_init_data(perf_rank_t *rk, const perf_case_t *pc, int in_place,
                           uint32_t seed, int expected)
{
    perf_data_t d = pc->d;
    size_t ws = (size_t)d.type->size;
    void *in = in_place ? rk->hrecv + pc->s.send_inplace_off * (size_t)rk->rank * ws
                        : rk->hsend;
    d.seed = seed;
    memset(rk->hrecv, 0xff, pc->bytes);
    rk->job->coll->fill(&d, &pc->s, rk->rank, in, expected && !pc->keep ? rk->expected : NULL);
    if (expected && pc->keep)
        memcpy(rk->expected, perf_recv_region(rk, rk->hrecv, pc, in_place),
               pc->s.recv_count * ws);
    perf_push(rk, pc, in_place);
}

/* Elements whose bytes differ: the check of a buffer that must stay as it was. */
static size_t perf_count_changed(const char *got, const char *expected, size_t count,
                                 size_t ws)
{
    size_t changed = 0;
    for (size_t j = 0; j < count; j++)
        changed += memcmp(got + j * ws, expected + j * ws, ws) != 0;
    return changed;
}

static long long perf_check(perf_rank_t *rk, const perf_case_t *pc, int in_place)
{
    long long wrong = 0;
    for (int c = 0; c < rk->job->a.check; c++) {
        const char *got;
        perf_init_data(rk, pc, in_place, ++rk->rep, 1);
        perf_start(rk, pc, in_place, 0);
        perf_pull(rk, pc, in_place);
        got = perf_recv_region(rk, rk->hrecv, pc, in_place);
        wrong = (long long)(pc->keep ? perf_count_changed(got, rk->expected, pc->s.recv_count,
                                                          (size_t)pc->d.type->size)
                                     : perf_data_check(&pc->d, got, rk->expected,
                                                       pc->s.recv_count));
        perf_agree(rk, &wrong, 1, ncclInt64, ncclSum);
        if (wrong != 0)
            break;
    }
    return wrong;
}

static void perf_timed_loop(perf_rank_t *rk, const perf_case_t *pc, int in_place)
{
    const perf_args_t *a = &rk->job->a;
    for (int it = 0; it < a->iters; it++) {
        if (a->agg > 1) {
            perf_busy(rk, 1);
            rk->in_group = 1;
            perf_nccl(rk, "ncclGroupStart", ncclGroupStart());
        }
        for (int k = 0; k < a->agg; k++)
            perf_start(rk, pc, in_place, (size_t)it * (size_t)a->agg + (size_t)k);
        if (a->agg > 1) {
            perf_nccl(rk, "ncclGroupEnd", ncclGroupEnd());
            rk->in_group = 0;
            perf_busy(rk, 0);
        }
        if (a->blocking == 1)   /* after the group: a barrier inside would be queued */
            perf_barrier(rk);
    }
}

static void perf_bench(perf_rank_t *rk, const perf_case_t *pc, int in_place)
{
    const perf_args_t *a = &rk->job->a;
    if (a->check)
        perf_init_data(rk, pc, in_place, 0, 0);
    perf_start(rk, pc, in_place, 0);
    perf_barrier(rk);
    int64_t t0 = perf_now_ns();
    perf_timed_loop(rk, pc, in_place);
    perf_sync(rk);
    double sec = (double)(perf_now_ns() - t0) * 1e-9 / ((double)a->iters * a->agg);
    sec = perf_time_agree(rk, sec);
    double algbw = sec > 0 ? (double)pc->bytes / 1e9 / sec : 0;
    double busbw = algbw * rk->job->coll->bus_factor(rk->job->nranks);
    long long wrong = -1;
    if (a->check && !(in_place && rk->job->coll->inplace_na))
        wrong = perf_check(rk, pc, in_place);
    perf_row_half(rk, pc, in_place, sec * 1e6, algbw, busbw, wrong);
    rk->bw_sum += busbw;
    rk->bw_count++;
    rk->errors += wrong > 0;
}

/* nccl-tests' TimeTest: warm up at both ends, then the sweep, -N times. */
static void perf_time_test(perf_rank_t *rk, const perf_type_t *t, int op, int root)
{
    const perf_args_t *a = &rk->job->a;
    const perf_coll_t *coll = rk->job->coll;
    perf_case_t pc = { .d = { .type = t, .op = coll->uses_op ? op : PERF_OP_NONE,
                              .nranks = rk->job->nranks, .root = root },
                       .op_name = coll->uses_op || coll->labels_op ? perf_op_names[op] : "none",
                       .keep = coll->root_only && rk->rank != root };
    perf_data_init(&pc.d);
    perf_barrier(rk);
    for (int end = 0; end < 2; end++) {
        perf_case_size(rk, &pc, end == 0 ? a->max_bytes : a->min_bytes);
        for (int w = 0; w < a->warmup; w++)
            perf_start(rk, &pc, 0, (size_t)w);
    }
    for (int cyc = 0; a->cycles == 0 || cyc < a->cycles; cyc++) {
        for (size_t size = a->min_bytes, next; size <= a->max_bytes; size = next) {
            perf_case_size(rk, &pc, size);
            perf_row_begin(rk, &pc);
            if (perf_half_on(a, 0))
                perf_bench(rk, &pc, 0);
            if (a->out_of_place < 0 && a->delay_us > 0) {   /* -q */
                struct timespec ts = { a->delay_us / 1000000, a->delay_us % 1000000 * 1000L };
                nanosleep(&ts, NULL);
            }
            if (perf_half_on(a, 1))
                perf_bench(rk, &pc, 1);
            perf_row_end(rk);
            next = a->step_factor > 1 ? (size ? size * a->step_factor : 1) : size + a->step_bytes;
            if (next <= size)
                break;
        }
    }
}

/* ---- ranks ---- */

static char *perf_buf_alloc(const perf_rank_t *rk, size_t bytes)
{
    char *p = aligned_alloc(4096, bytes);
    if (p == NULL) {
        fprintf(stderr, "%s: rank %d: cannot allocate %zu bytes of host memory: lower -e\n",
                rk->job->coll->prog, rk->rank, bytes);
        _exit(1);
    }
    memset(p, 0, bytes);   /* first touch by the rank's own thread */
    return p;
}

static void perf_register(perf_rank_t *rk, int undo)
{
    char *bufs[2] = { rk->send, rk->recv };
    for (int i = 0; i < 2; i++) {
        if (rk->job->a.reg == 1 && !undo)
            perf_nccl(rk, "ncclCommRegister",
                      ncclCommRegister(rk->comm, bufs[i], rk->job->buf_bytes, &rk->reg[i]));
        else if (rk->job->a.reg == 1)
            perf_nccl(rk, "ncclCommDeregister", ncclCommDeregister(rk->comm, rk->reg[i]));
        else if (rk->job->a.reg == 2 && !undo)
            perf_nccl(rk, "ncclCommWindowRegister",
                      ncclCommWindowRegister(rk->comm, bufs[i], rk->job->buf_bytes, &rk->win[i],
                                             NCCL_WIN_COLL_SYMMETRIC));
        else if (rk->job->a.reg == 2)
            perf_nccl(rk, "ncclCommWindowDeregister",
                      ncclCommWindowDeregister(rk->comm, rk->win[i]));
    }
}

/* Every type, then every op, then every root, in nccl-tests' order. */
static void perf_run_tests(perf_rank_t *rk)
{
    const perf_args_t *a = &rk->job->a;
    const perf_coll_t *coll = rk->job->coll;
    int op_lo = a->op < 0 ? 0 : a->op, op_hi = a->op < 0 ? PERF_NOPS - 1 : a->op;
    int t_lo = a->type < 0 ? 0 : a->type, t_hi = a->type < 0 ? PERF_NTYPES - 1 : a->type;
    int r_lo = a->root < 0 ? 0 : a->root, r_hi = a->root < 0 ? rk->job->nranks - 1 : a->root;
    if (!coll->uses_op && !coll->labels_op)
        op_lo = op_hi = ncclSum;
    if (!coll->uses_root)
        r_lo = r_hi = -1;
    for (int t = t_lo; t <= t_hi; t++)
        for (int op = op_lo; op <= op_hi; op++)
            for (int root = r_lo; root <= r_hi; root++)
                perf_time_test(rk, &perf_types[t], op, root);
}

/* The rank's device and stream, its buffers and their host mirrors (needed to check). */
static void perf_rank_buffers(perf_rank_t *rk)
{
    perf_job_t *job = rk->job;
    size_t bytes = job->buf_bytes;
    void *send = NULL, *recv = NULL;
    rk->expected = job->a.check ? perf_buf_alloc(rk, bytes) : NULL;
    if (rk->device < 0) {
        rk->hsend = rk->send = perf_buf_alloc(rk, bytes);
        rk->hrecv = rk->recv = perf_buf_alloc(rk, bytes);
        return;
    }
    perf_gpu_check(rk, perf_gpu_bind(rk->device));
    perf_gpu_check(rk, perf_gpu_stream_create(job->a.stream_null, &rk->stream));
    perf_gpu_check(rk, perf_gpu_alloc_mem(job->a.mem_type, bytes, &send));
    perf_gpu_check(rk, perf_gpu_alloc_mem(job->a.mem_type, bytes, &recv));
    rk->send = send;
    rk->recv = recv;
    rk->hsend = job->a.check ? perf_buf_alloc(rk, bytes) : NULL;
    rk->hrecv = job->a.check ? perf_buf_alloc(rk, bytes) : NULL;
}

static void perf_rank_free(perf_rank_t *rk)
{
    free(rk->expected);
    if (rk->device < 0) {
        free(rk->send);
        free(rk->recv);
        return;
    }
    free(rk->hsend);
    free(rk->hrecv);
    perf_gpu_check(rk, perf_gpu_free_mem(rk->job->a.mem_type, rk->send));
    perf_gpu_check(rk, perf_gpu_free_mem(rk->job->a.mem_type, rk->recv));
    perf_gpu_check(rk, perf_gpu_stream_destroy(rk->stream));
}

static void *perf_rank_main(void *arg)
{
    perf_rank_t *rk = arg;
    perf_job_t *job = rk->job;
    perf_rank_buffers(rk);
    perf_busy(rk, 1);
    perf_nccl(rk, "ncclCommInitRank",
              ncclCommInitRank(&rk->comm, job->nranks, job->uid, rk->rank));
    perf_busy(rk, 0);
    perf_register(rk, 0);
    perf_print_devices(rk);
    if (rk->rank == 0)
        perf_print_table_header(job);
    perf_run_tests(rk);
    perf_sync(rk);
    perf_register(rk, 1);
    perf_nccl(rk, "ncclCommDestroy", ncclCommDestroy(rk->comm));
    rk->comm = NULL;
    perf_rank_free(rk);
    return NULL;
}

/* -T: a call that has not returned after the timeout ends the process with a message. */
static void *perf_watchdog(void *arg)
{
    perf_job_t *job = arg;
    const struct timespec tick = { 0, 100 * 1000 * 1000 };
    while (!atomic_load(&job->done)) {
        nanosleep(&tick, NULL);
        for (int t = 0; t < job->a.nthreads; t++) {
            int64_t since = atomic_load(&job->ranks[t].busy_since);
            if (since == 0 || perf_now_ns() - since < (int64_t)job->a.timeout * 1000000000)
                continue;
            fflush(stdout);
            fprintf(stderr, "%s: %s: Test timeout (%ds): rank %d is still inside a call; "
                    "ending the process\n", job->coll->prog, job->host, job->a.timeout,
                    job->ranks[t].rank);
            _exit(1);
        }
    }
    return NULL;
}

static int perf_job_run(perf_job_t *job)
{
    pthread_t wd;
    int nt = job->a.nthreads;
    for (int t = 0; t < nt; t++)
        job->ranks[t] = (perf_rank_t){ .job = job, .rank = job->proc * nt + t, .thread = t,
                                       .device = perf_job_device(job, t) };
    if (job->a.timeout > 0 && pthread_create(&wd, NULL, perf_watchdog, job) != 0)
        return -1;
    for (int t = 1; t < nt; t++)
        if (pthread_create(&job->ranks[t].tid, NULL, perf_rank_main, &job->ranks[t]) != 0) {
            fprintf(stderr, "%s: cannot start the thread of rank %d\n", job->coll->prog,
                    job->ranks[t].rank);
            _exit(1);
        }
    perf_rank_main(&job->ranks[0]);
    for (int t = 1; t < nt; t++)
        pthread_join(job->ranks[t].tid, NULL);
    atomic_store(&job->done, 1);
    if (job->a.timeout > 0)
        pthread_join(wd, NULL);
    return 0;
}

/* ---- bus factors shared by the tools ---- */

void perf_sizes_whole(size_t count, int nranks, perf_sizes_t *s)
{
    (void)nranks;
    s->send_count = s->recv_count = s->param_count = count;
    s->send_inplace_off = s->recv_inplace_off = 0;
}

void perf_sizes_gather(size_t count, int nranks, perf_sizes_t *s)
{
    size_t block = perf_rank_block(count, nranks, s->elt_size);
    s->send_count = s->param_count = block;
    s->recv_count = block * (size_t)nranks;
    s->send_inplace_off = block;
    s->recv_inplace_off = 0;
}

void perf_sizes_scatter(size_t count, int nranks, perf_sizes_t *s)
{
    size_t block = perf_rank_block(count, nranks, s->elt_size);
    s->send_count = block * (size_t)nranks;
    s->recv_count = s->param_count = block;
    s->send_inplace_off = 0;
    s->recv_inplace_off = block;
}

double perf_bus_factor_nm1(int nranks)
{
    return nranks > 0 ? (double)(nranks - 1) / nranks : 0.0;
}

double perf_bus_factor_one(int nranks)
{
    (void)nranks;
    return 1.0;
}

/* ---- main ---- */

static void perf_print_intro(const perf_job_t *job)
{
    const perf_args_t *a = &job->a;
    int version = 0;
    (void)ncclGetVersion(&version);
    printf("# braid %s, nccl-tests compatible; nccl-headers=%d nccl-library=%d\n",
           job->coll->prog, NCCL_VERSION_CODE, version);
    printf("# Collective test starting: %s\n", job->coll->prog);
    printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
           "iters: %d agg iters: %d validation: %d graph: %d\n", a->nthreads, a->ngpus,
           a->min_bytes, a->max_bytes, a->step_factor > 1 ? a->step_factor : a->step_bytes,
           a->step_factor > 1 ? "factor" : "bytes", a->warmup, a->iters, a->agg, a->check,
           a->graph);
    if (a->blocking == 1)
        printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
    if (job->ndev > 0) {
        char name[64];
        int dev = perf_job_device(job, 0);
        perf_gpu_name(dev, name, sizeof(name));
        if (strcmp(perf_gpu_tag(), "cuda") == 0)
            printf("# buffers: device (CUDA driver, device %d: %s)\n", dev, name);
        else   /* rccl-tests' users see the memory type */
            printf("# buffers: device (%s, device %d: %s; -Y %s: %s)\n", perf_gpu_runtime(),
                   dev, name, perf_mem_names[a->mem_type], perf_gpu_mem_how(a->mem_type));
    } else {
        printf("# buffers: host (%s)\n", job->why);
    }
    printf("#\n# Using devices\n");
}

/* -J's file, and -X's (rccl-tests' CSV header first, with -Z csv). Returns 0 or -1. */
static int perf_job_files(perf_job_t *job)
{
    const char *names[2] = { job->a.json, job->a.rccl_file };
    FILE **files[2] = { &job->json, &job->rccl };
    for (int i = 0; i < 2; i++) {
        if (names[i] != NULL && (*files[i] = fopen(names[i], "w")) == NULL) {
            fprintf(stderr, "%s: cannot write %s: %s\n", job->coll->prog, names[i],
                    strerror(errno));
            return -1;
        }
    }
    job->rccl_csv = job->rccl != NULL && job->a.format != NULL && job->a.format[0] == 'c';
    if (job->rccl_csv)
        fprintf(job->rccl, "collective, gpus, size, type, redop, inplace, time, algbw, busbw, "
                "#wrong\n");
    return 0;
}

/* Everything between the flags and the threads; returns 0 or an exit status. */
static int perf_job_setup(perf_job_t *job)
{
    const char *prog = job->coll->prog, *comm_id = getenv("NCCL_COMM_ID");
    ncclResult_t res;
    int st;
    if (perf_job_env(job) != 0)
        return 2;
    job->nranks = job->nprocs * job->a.nthreads;
    if (job->coll->uses_root && job->a.root >= job->nranks) {   /* -1: every root */
        if (job->proc == 0)
            fprintf(stderr, "%s: -r %d: the root must be below the rank count %d\n", prog,
                    job->a.root, job->nranks);
        return 2;
    }
    if (job->nprocs > 1 && (comm_id == NULL || comm_id[0] == '\0')) {
        fprintf(stderr, "%s: this is process %d of %d (from the launcher's environment), but "
                "NCCL_COMM_ID is not set: set NCCL_COMM_ID=host:port in every process (rank 0 "
                "listens there), or start the job with braidrun\n", prog, job->proc,
                job->nprocs);
        return 2;
    }
    if ((st = perf_job_buffers(job)) != 0)
        return st;
    perf_job_memory(job);
    job->buf_bytes = (job->a.max_bytes + 4095) / 4096 * 4096 + 4096;
    if (gethostname(job->host, sizeof(job->host) - 1) != 0)
        strcpy(job->host, "localhost");
    if (job->proc == 0 && perf_job_files(job) != 0)
        return 1;
    /* with NCCL_COMM_ID every process gets the same id; without, there is one process */
    if ((res = ncclGetUniqueId(&job->uid)) != ncclSuccess) {
        fprintf(stderr, "%s: ncclGetUniqueId failed: %s: %s\n", prog, ncclGetErrorString(res),
                ncclGetLastError(NULL));
        return 1;
    }
    job->ranks = calloc((size_t)job->a.nthreads, sizeof(perf_rank_t));
    return job->ranks == NULL ? 1 : 0;
}

/* nccl-tests' closing lines; NCCL_TESTS_MIN_BW makes a low average a failure. */
static int perf_summary(const perf_job_t *job)
{
    const perf_rank_t *r0 = &job->ranks[0];
    const char *min_s = getenv("NCCL_TESTS_MIN_BW");
    double avg = r0->bw_count ? r0->bw_sum / r0->bw_count : 0, min_bw = min_s ? atof(min_s) : -1;
    int low = min_s != NULL && avg < 0.9 * min_bw;
    if (job->proc == 0) {
        printf("# Out of bounds values : %d %s\n", r0->errors, r0->errors ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g %s\n", avg, min_s == NULL ? "" : low ? "FAILED" : "OK");
        printf("#\n# Collective test concluded: %s\n", job->coll->prog);
    }
    return r0->errors != 0 || low ? 1 : 0;
}

/*
 * SIGINT, SIGTERM and SIGHUP end the tool as by default (status 128 + signal, as braidrun
 * reports it): libraries that libbraid links install their own handlers as they load,
 * before main (libfabric's PSM provider, libinfinipath: exit(1) on SIGINT and SIGTERM;
 * UCX: SIGHUP). One the tool inherited as ignored stays ignored where it still reads so.
 */
static void perf_signals_default(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct sigaction a;
        if (sigaction(sigs[i], NULL, &a) == 0 && !(a.sa_flags & SA_SIGINFO) &&
            a.sa_handler == SIG_IGN)
            continue;
        signal(sigs[i], SIG_DFL);
    }
}

int perf_main(int argc, char **argv, const perf_coll_t *coll)
{
    perf_job_t job = { .coll = coll };
    int status = 0;
    perf_signals_default();
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (perf_args_parse(argc, argv, perf_launched_not_first(), &job.a, &status) != 0)
        return status;
    if ((status = perf_job_setup(&job)) != 0)
        return status;
    if (job.proc == 0)
        perf_print_intro(&job);
    if (perf_job_run(&job) != 0) {
        fprintf(stderr, "%s: cannot start the -T watchdog thread\n", coll->prog);
        return 1;
    }
    status = perf_summary(&job);
    if (job.json != NULL)
        fclose(job.json);
    if (job.rccl != NULL)
        fclose(job.rccl);
    free(job.ranks);
    return status;
}
