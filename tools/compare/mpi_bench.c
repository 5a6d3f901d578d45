/*
 * mpi_bench: the comparison bench's MPI side. One collective on float data with op sum,
 * timed and checked the way braid's nccl-tests-compatible tools do it, written against
 * the public MPI API only, so the same source builds with Open MPI's and MPICH's mpicc.
 *
 *     mpirun -np 2 mpi_bench -c allreduce -b 8 -e 64M -f 4      sweep, JSON lines on stdout
 *     mpirun -np 2 mpi_bench -c allreduce --serve               sizes read from stdin
 *
 * Sizes mean what they mean in nccl-tests (and braid's *_perf tools) for the collective:
 * all-reduce, broadcast, reduce and sendrecv move SIZE bytes per rank; all-gather and
 * gather SIZE bytes in all (SIZE/nranks from each rank), reduce-scatter, scatter and
 * all-to-all SIZE bytes in all from each rank; per-rank blocks are rounded down to 16
 * bytes as in nccl-tests, and the size reported is the one actually moved.
 *
 * Per size: fill the inputs, run `warmup` calls, barrier, time `iters` calls; the time of a
 * size is the average per call, the maximum over ranks. Then the inputs are filled again
 * with a new seed, the outputs poisoned, one more call made and every output element
 * compared exactly with the expected value: inputs are small integers (-4..4), so float
 * sums are exact whatever order MPI adds them in. busbw uses nccl-tests' bus factors.
 *
 * --serve (used by braid-compare to interleave libraries): rank 0 reads lines
 * "SIZE ITERS WARMUP" from stdin and answers each with one JSON line; "quit" or end of
 * input ends. Between sizes the other ranks wait in MPI_Ibcast polled with a growing
 * sleep, so an idle bench does not steal the CPU from the library being measured.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#if defined(OPEN_MPI)
#define MB_IMPL "ompi"
#elif defined(MPICH_VERSION)
#define MB_IMPL "mpich"
#else
#define MB_IMPL "mpi"
#endif

typedef enum {
    MB_ALLREDUCE, MB_ALLGATHER, MB_REDUCESCATTER, MB_BCAST, MB_REDUCE, MB_ALLTOALL,
    MB_GATHER, MB_SCATTER, MB_SENDRECV, MB_NCOLLS
} mb_coll_t;

static const char *const mb_coll_names[MB_NCOLLS] = {
    "allreduce", "allgather", "reducescatter", "bcast", "reduce", "alltoall",
    "gather", "scatter", "sendrecv",
};

typedef struct mb_args {
    mb_coll_t coll;
    size_t min_bytes, max_bytes, step_bytes;
    long factor;
    long iters, warmup;
    int root;
    int serve;
} mb_args_t;

/* The element counts of one call (nccl-tests' getCollByteCount for the collective). */
typedef struct mb_sizes {
    size_t send, recv;   /* elements in this rank's send and receive buffers */
    size_t param;        /* the count argument of the call */
    size_t bytes;        /* reported size: max(send, recv) * sizeof(float) */
} mb_sizes_t;

typedef struct mb_ctx {
    const mb_args_t *a;
    int rank, nranks;
    char library[128];
} mb_ctx_t;

/* One size as rank 0 sends it to everybody: bytes, iters, warmup, seed; bytes < 0 ends. */
typedef struct mb_cmd {
    long long v[4];
} mb_cmd_t;

/* ---- data: element i of rank r's input for a seed, a small integer as a float ---- */

static float mb_value(uint32_t seed, int rank, size_t index)
{
    uint32_t h = (uint32_t)index * 0x9E3779B1u + ((uint32_t)rank + 1u) * 0x85EBCA77u +
                 seed * 0xC2B2AE3Du;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    return (float)((int)(h % 9u) - 4);
}

static void mb_fill(float *buf, size_t count, uint32_t seed, int rank, size_t first)
{
    for (size_t i = 0; i < count; i++)
        buf[i] = mb_value(seed, rank, first + i);
}

/* Sum over every rank of input element `index`. */
static float mb_sum(uint32_t seed, int nranks, size_t index)
{
    float s = 0.0f;
    for (int r = 0; r < nranks; r++)
        s += mb_value(seed, r, index);
    return s;
}

/* ---- sizes and bus factors, as nccl-tests defines them ---- */

static void mb_sizes(mb_coll_t c, size_t bytes, int n, mb_sizes_t *s_p)
{
    /* per-rank blocks are rounded down to 16 bytes, as nccl-tests does */
    size_t count = bytes / sizeof(float), base = count / (size_t)n & ~(size_t)3;
    mb_sizes_t s = { .send = count, .recv = count, .param = count };
    switch (c) {
    case MB_ALLGATHER: case MB_GATHER:
        s = (mb_sizes_t){ .send = base, .recv = base * (size_t)n, .param = base };
        break;
    case MB_REDUCESCATTER: case MB_SCATTER:
        s = (mb_sizes_t){ .send = base * (size_t)n, .recv = base, .param = base };
        break;
    case MB_ALLTOALL:
        s = (mb_sizes_t){ .send = base * (size_t)n, .recv = base * (size_t)n, .param = base };
        break;
    default:
        break;
    }
    s.bytes = (s.send > s.recv ? s.send : s.recv) * sizeof(float);
    *s_p = s;
}

static double mb_bus_factor(mb_coll_t c, int n)
{
    switch (c) {
    case MB_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case MB_ALLGATHER: case MB_REDUCESCATTER: case MB_ALLTOALL: case MB_GATHER: case MB_SCATTER:
        return (double)(n - 1) / n;
    default:
        return 1.0;
    }
}

/* ---- one call ---- */

/* MPI counts are int: sizes past INT_MAX elements are refused before any call. */
static int mb_call(const mb_ctx_t *x, const mb_sizes_t *s, float *send, float *recv)
{
    int n = (int)s->param, root = x->a->root, r = x->rank, p = x->nranks;
    switch (x->a->coll) {
    case MB_ALLREDUCE:
        return MPI_Allreduce(send, recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    case MB_ALLGATHER:
        return MPI_Allgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, MPI_COMM_WORLD);
    case MB_REDUCESCATTER:
        return MPI_Reduce_scatter_block(send, recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    case MB_BCAST:   /* the root sends its input, the others receive into recv */
        return MPI_Bcast(r == root ? send : recv, n, MPI_FLOAT, root, MPI_COMM_WORLD);
    case MB_REDUCE:
        return MPI_Reduce(send, recv, n, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD);
    case MB_ALLTOALL:
        return MPI_Alltoall(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, MPI_COMM_WORLD);
    case MB_GATHER:
        return MPI_Gather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, root, MPI_COMM_WORLD);
    case MB_SCATTER:
        return MPI_Scatter(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, root, MPI_COMM_WORLD);
    default:
        return MPI_Sendrecv(send, n, MPI_FLOAT, (r + 1) % p, 0, recv, n, MPI_FLOAT,
                            (r + p - 1) % p, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
}

/* ---- the check ---- */

/* Expected receive element i of this rank; NAN where this rank receives nothing. */
static float mb_expected(const mb_ctx_t *x, const mb_sizes_t *s, uint32_t seed, size_t i)
{
    int r = x->rank, p = x->nranks, root = x->a->root;
    size_t c = s->param, blk = c ? i / c : 0, off = c ? i % c : 0;
    switch (x->a->coll) {
    case MB_ALLREDUCE:
        return mb_sum(seed, p, i);
    case MB_REDUCE:
        return r == root ? mb_sum(seed, p, i) : NAN;
    case MB_REDUCESCATTER:
        return mb_sum(seed, p, (size_t)r * c + i);
    case MB_BCAST:
        return r == root ? NAN : mb_value(seed, root, i);
    case MB_ALLGATHER:
        return mb_value(seed, (int)blk, off);
    case MB_GATHER:
        return r == root ? mb_value(seed, (int)blk, off) : NAN;
    case MB_SCATTER:
        return mb_value(seed, root, (size_t)r * c + i);
    case MB_ALLTOALL:   /* block j came from rank j: its block number r */
        return mb_value(seed, (int)blk, (size_t)r * c + off);
    default:
        return mb_value(seed, (r + p - 1) % p, i);
    }
}

static long long mb_count_wrong(const mb_ctx_t *x, const mb_sizes_t *s, const float *recv,
                                uint32_t seed)
{
    long long wrong = 0;
    for (size_t i = 0; i < s->recv; i++) {
        float want = mb_expected(x, s, seed, i);
        if (!isnan(want) && recv[i] != want)
            wrong++;
    }
    return wrong;
}

/* ---- one size ---- */

typedef struct mb_result {
    mb_sizes_t s;
    double usec;          /* average per call, max over ranks */
    long long wrong;      /* over all ranks; -1 if a call failed */
} mb_result_t;

static double mb_time_calls(const mb_ctx_t *x, const mb_sizes_t *s, float *send, float *recv,
                            long warmup, long iters, int *err_p)
{
    int err = MPI_SUCCESS;
    for (long k = 0; k < warmup && err == MPI_SUCCESS; k++)
        err = mb_call(x, s, send, recv);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long k = 0; k < iters && err == MPI_SUCCESS; k++)
        err = mb_call(x, s, send, recv);
    double usec = (MPI_Wtime() - t0) * 1e6 / (double)(iters > 0 ? iters : 1);
    *err_p = err;
    return usec;
}

static int mb_run_size(const mb_ctx_t *x, size_t bytes, long iters, long warmup,
                       uint32_t seed, mb_result_t *res_p)
{
    mb_sizes_t s;
    mb_sizes(x->a->coll, bytes, x->nranks, &s);
    /* one spare element keeps zero-size buffers distinct and non-NULL */
    float *send = malloc((s.send + 1) * sizeof(float));
    float *recv = malloc((s.recv + 1) * sizeof(float));
    int err = MPI_SUCCESS, ok = send != NULL && recv != NULL, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!all_ok) {
        free(send);
        free(recv);
        return -1;
    }
    mb_fill(send, s.send, seed, x->rank, 0);
    memset(recv, 0xff, (s.recv + 1) * sizeof(float));   /* NaN */
    double usec = mb_time_calls(x, &s, send, recv, warmup, iters, &err);
    mb_fill(send, s.send, seed + 1, x->rank, 0);
    memset(recv, 0xff, (s.recv + 1) * sizeof(float));
    if (err == MPI_SUCCESS)
        err = mb_call(x, &s, send, recv);
    long long wrong = err == MPI_SUCCESS ? mb_count_wrong(x, &s, recv, seed + 1) : -1;
    free(send);
    free(recv);
    long long total = 0, anyfail = wrong < 0;
    MPI_Reduce(&usec, &res_p->usec, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &anyfail, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    wrong = wrong < 0 ? 0 : wrong;
    MPI_Reduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    res_p->s = s;
    res_p->wrong = anyfail ? -1 : total;
    return 0;
}

static void mb_print(const mb_ctx_t *x, size_t asked, long iters, const mb_result_t *res)
{
    double sec = res->usec * 1e-6;
    double algbw = sec > 0 ? (double)res->s.bytes / sec / 1e9 : 0.0;
    double busbw = algbw * mb_bus_factor(x->a->coll, x->nranks);
    int rooted = x->a->coll == MB_BCAST || x->a->coll == MB_REDUCE ||
                 x->a->coll == MB_GATHER || x->a->coll == MB_SCATTER;
    printf("{\"library\":\"%s\",\"version\":\"%s\",\"collective\":\"%s\",\"nranks\":%d,"
           "\"asked\":%zu,\"size\":%zu,\"count\":%zu,\"type\":\"float\",\"redop\":\"sum\","
           "\"root\":%d,\"iters\":%ld,\"time_us\":%.3f,\"algbw\":%.6f,\"busbw\":%.6f,"
           "\"wrong\":%lld}\n",
           MB_IMPL, x->library, mb_coll_names[x->a->coll], x->nranks, asked, res->s.bytes,
           res->s.param, rooted ? x->a->root : -1, iters, res->usec, algbw, busbw, res->wrong);
    fflush(stdout);
}

/* Run one size on every rank; rank 0 prints its line. Returns -1 if buffers failed. */
static int mb_size(const mb_ctx_t *x, const mb_cmd_t *cmd)
{
    mb_result_t res;
    size_t bytes = (size_t)cmd->v[0];
    mb_sizes_t s;
    mb_sizes(x->a->coll, bytes, x->nranks, &s);
    if (s.param > INT_MAX) {
        if (x->rank == 0)
            fprintf(stderr, "mpi_bench: %zu bytes is past MPI's int counts; use a smaller -e\n",
                    bytes);
        return -1;
    }
    if (mb_run_size(x, bytes, (long)cmd->v[1], (long)cmd->v[2], (uint32_t)cmd->v[3], &res) < 0) {
        if (x->rank == 0)
            fprintf(stderr, "mpi_bench: cannot allocate the buffers of %zu bytes\n", bytes);
        return -1;
    }
    if (x->rank == 0)
        mb_print(x, bytes, (long)cmd->v[1], &res);
    return 0;
}

/* ---- the two modes ---- */

static int mb_sweep(const mb_ctx_t *x)
{
    const mb_args_t *a = x->a;
    uint32_t seed = 1;
    for (size_t b = a->min_bytes; b <= a->max_bytes; seed += 2) {
        mb_cmd_t cmd = { { (long long)b, a->iters, a->warmup, seed } };
        if (mb_size(x, &cmd) < 0)
            return 1;
        size_t next = a->factor > 1 ? b * (size_t)a->factor : b + a->step_bytes;
        if (next <= b)
            break;
        b = next;
    }
    return 0;
}

/* Wait for rank 0's next command without spinning: test, then sleep 50 us growing to 20 ms. */
static void mb_cmd_wait(mb_cmd_t *cmd)
{
    MPI_Request req;
    int done = 0;
    long ns = 50000;
    MPI_Ibcast(cmd->v, 4, MPI_LONG_LONG, 0, MPI_COMM_WORLD, &req);
    for (MPI_Test(&req, &done, MPI_STATUS_IGNORE); !done;
         MPI_Test(&req, &done, MPI_STATUS_IGNORE)) {
        struct timespec ts = { 0, ns };
        nanosleep(&ts, NULL);
        ns = ns < 20000000 ? ns * 2 : ns;
    }
}

/* Rank 0: one line of stdin as a command; "quit" or end of input gives bytes -1. */
static void mb_cmd_read(const mb_args_t *a, uint32_t seed, mb_cmd_t *cmd)
{
    char line[256];
    long long bytes = -1, iters = a->iters, warmup = a->warmup;
    while (fgets(line, sizeof(line), stdin) != NULL) {
        int got = sscanf(line, "%lld %lld %lld", &bytes, &iters, &warmup);
        if (got >= 1 && bytes >= 0 && iters > 0 && warmup >= 0)
            break;
        if (strncmp(line, "quit", 4) == 0) {
            bytes = -1;
            break;
        }
        fprintf(stderr, "mpi_bench: ignoring command '%.*s'; want 'SIZE [ITERS [WARMUP]]'\n",
                (int)strcspn(line, "\n"), line);
        bytes = -1;
    }
    *cmd = (mb_cmd_t){ { bytes, iters, warmup, seed } };
}

static int mb_serve(const mb_ctx_t *x)
{
    for (uint32_t seed = 1;; seed += 2) {
        mb_cmd_t cmd;
        if (x->rank == 0) {
            MPI_Request req;
            mb_cmd_read(x->a, seed, &cmd);
            MPI_Ibcast(cmd.v, 4, MPI_LONG_LONG, 0, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            mb_cmd_wait(&cmd);
        }
        if (cmd.v[0] < 0)
            return 0;
        if (mb_size(x, &cmd) < 0 && x->rank == 0) { /* tell the driver, keep serving */
            printf("{\"library\":\"%s\",\"asked\":%lld,\"error\":\"size refused\"}\n",
                   MB_IMPL, cmd.v[0]);
            fflush(stdout);
        }
    }
}

/* ---- arguments ---- */

static void mb_usage(FILE *out)
{
    fprintf(out,
            "usage: mpirun -np N mpi_bench -c COLL [options]\n"
            "  -c,--coll COLL        allreduce allgather reducescatter bcast reduce alltoall\n"
            "                        gather scatter sendrecv (float, sum)\n"
            "  -b,--minbytes SIZE    smallest size, K/M/G suffixes (default 8)\n"
            "  -e,--maxbytes SIZE    largest size (default 64M)\n"
            "  -f,--stepfactor N     multiply the size by N each step (default 2)\n"
            "  -i,--stepbytes SIZE   add SIZE each step when -f is 1 (default 1M)\n"
            "  -n,--iters N          timed calls per size (default 20)\n"
            "  -w,--warmup_iters N   untimed calls before (default 5)\n"
            "  -r,--root N           root of bcast, reduce, gather, scatter (default 0)\n"
            "  -S,--serve            read 'SIZE [ITERS [WARMUP]]' lines on rank 0's stdin\n"
            "  -h,--help             this help\n"
            "Prints one JSON line per size: time_us (average per call, max over ranks),\n"
            "algbw and busbw in GB/s (nccl-tests' bus factors), wrong (elements, all ranks).\n");
}

/* A size with an optional K/M/G suffix (powers of 1024); 0 on success. */
static int mb_parse_size(const char *s, size_t *v_p)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    if (end == s || errno != 0 || s[0] == '-')
        return -1;
    switch (*end) {
    case 'G': case 'g': shift = 30; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'K': case 'k': shift = 10; end++; break;
    default: break;
    }
    if (*end != '\0' || v > (SIZE_MAX >> shift))
        return -1;
    *v_p = (size_t)(v << shift);
    return 0;
}

static int mb_parse_long(const char *s, long lo, long *v_p)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || v < lo)
        return -1;
    *v_p = v;
    return 0;
}

static int mb_parse_coll(const char *s, mb_coll_t *c_p)
{
    for (int c = 0; c < MB_NCOLLS; c++) {
        if (strcmp(s, mb_coll_names[c]) == 0) {
            *c_p = (mb_coll_t)c;
            return 0;
        }
    }
    return -1;
}

static int mb_parse_opt(int opt, const char *arg, mb_args_t *a)
{
    long root = 0;
    switch (opt) {
    case 'c': return mb_parse_coll(arg, &a->coll);
    case 'b': return mb_parse_size(arg, &a->min_bytes);
    case 'e': return mb_parse_size(arg, &a->max_bytes);
    case 'i': return mb_parse_size(arg, &a->step_bytes);
    case 'f': return mb_parse_long(arg, 1, &a->factor);
    case 'n': return mb_parse_long(arg, 1, &a->iters);
    case 'w': return mb_parse_long(arg, 0, &a->warmup);
    case 'r':
        if (mb_parse_long(arg, 0, &root) < 0 || root > INT_MAX)
            return -1;
        a->root = (int)root;
        return 0;
    case 'S': a->serve = 1; return 0;
    default: return -1;
    }
}

/* 0: parsed; 1: help printed; 2: bad usage (message printed). */
static int mb_parse_args(int argc, char **argv, mb_args_t *a)
{
    static const struct option longs[] = {
        { "coll", required_argument, NULL, 'c' }, { "minbytes", required_argument, NULL, 'b' },
        { "maxbytes", required_argument, NULL, 'e' },
        { "stepfactor", required_argument, NULL, 'f' },
        { "stepbytes", required_argument, NULL, 'i' }, { "iters", required_argument, NULL, 'n' },
        { "warmup_iters", required_argument, NULL, 'w' },
        { "root", required_argument, NULL, 'r' }, { "serve", no_argument, NULL, 'S' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    int opt, have_coll = 0;
    *a = (mb_args_t){ .coll = MB_ALLREDUCE, .min_bytes = 8, .max_bytes = 64 << 20,
                      .step_bytes = 1 << 20, .factor = 2, .iters = 20, .warmup = 5 };
    while ((opt = getopt_long(argc, argv, "c:b:e:f:i:n:w:r:Sh", longs, NULL)) != -1) {
        if (opt == 'h')
            return 1;
        have_coll |= opt == 'c';
        if (opt == '?' || mb_parse_opt(opt, optarg, a) < 0) {
            if (opt != '?')
                fprintf(stderr, "mpi_bench: bad value '%s' for -%c\n", optarg, opt);
            return 2;
        }
    }
    if (optind != argc || !have_coll || a->min_bytes > a->max_bytes ||
        (a->factor == 1 && a->step_bytes == 0)) {
        fprintf(stderr, "mpi_bench: %s\n", !have_coll ? "-c COLL is required"
                : optind != argc ? "unexpected argument" : "bad size range");
        return 2;
    }
    return 0;
}

static void mb_library(char *buf, size_t len)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    size_t o = 0;
    MPI_Get_library_version(v, &n);
    v[n < (int)sizeof(v) ? n : (int)sizeof(v) - 1] = '\0';
    v[strcspn(v, "\n,\"\\")] = '\0';   /* first line, nothing that needs JSON escapes */
    for (const char *p = v; *p != '\0' && o + 1 < len; p++) {
        int space = (unsigned char)*p <= ' ';   /* tabs and blanks: one space */
        if (!space || (o > 0 && buf[o - 1] != ' '))
            buf[o++] = space ? ' ' : *p;
    }
    buf[o] = '\0';
}

int main(int argc, char **argv)
{
    mb_args_t a;
    mb_ctx_t x = { .a = &a };
    int st = mb_parse_args(argc, argv, &a);
    if (st != 0) {
        mb_usage(st == 1 ? stdout : stderr);
        return st == 1 ? 0 : 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &x.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &x.nranks);
    mb_library(x.library, sizeof(x.library));
    if (a.root >= x.nranks) {
        if (x.rank == 0)
            fprintf(stderr, "mpi_bench: root %d is not a rank of %d\n", a.root, x.nranks);
        MPI_Finalize();
        return 2;
    }
    st = a.serve ? mb_serve(&x) : mb_sweep(&x);
    MPI_Finalize();
    return st;
}
