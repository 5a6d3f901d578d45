/*
 * perf_args: the command line of the *_perf tools (see perf_args.h): nccl-tests' short and
 * long flags, rccl-tests' own, their ranges and cross-checks, the usage text, and
 * --selftest.
 *
 * rccl-tests adds flags of its own: -Y (memory type), -u (CU mask), -s (its older -N), -O,
 * -q, -F, -E, -A, -X and -Z. Two letters mean different things across its releases, and
 * here take what each release's users type, told apart by the value: -y was the memory
 * type (as its README still says) before it became stream_null (as in nccl-tests), so 0 or
 * 1 is stream_null and a memory type's name is -Y; -x was the output file before it became
 * nccl-tests' CTA policy, so a number is the policy and anything else the file (-X).
 * --memory_type is -Y, although some releases send it to -y.
 */
#include "perf_args.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_common.h"
#include "perf_gpu.h"

/* --cta_policy: -x's number, never its file */
#define PERF_OPT_CTA 256

/* nccl-tests' letters, braid's -H, then rccl-tests' */
static const char perf_shortopts[] =
    "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:a:R:J:Hh" "Y:u:s:O:q:F:E:A:X:x:Z:";

static const struct option perf_longopts[] = {
    { "nthreads", required_argument, 0, 't' },   { "ngpus", required_argument, 0, 'g' },
    { "minbytes", required_argument, 0, 'b' },   { "maxbytes", required_argument, 0, 'e' },
    { "stepbytes", required_argument, 0, 'i' },  { "stepfactor", required_argument, 0, 'f' },
    { "iters", required_argument, 0, 'n' },      { "agg_iters", required_argument, 0, 'm' },
    { "warmup_iters", required_argument, 0, 'w' }, { "run_cycles", required_argument, 0, 'N' },
    { "parallel_init", required_argument, 0, 'p' }, { "check", required_argument, 0, 'c' },
    { "op", required_argument, 0, 'o' },         { "datatype", required_argument, 0, 'd' },
    { "root", required_argument, 0, 'r' },       { "blocking", required_argument, 0, 'z' },
    { "stream_null", required_argument, 0, 'y' }, { "timeout", required_argument, 0, 'T' },
    { "cudagraph", required_argument, 0, 'G' },  { "report_cputime", required_argument, 0, 'C' },
    { "average", required_argument, 0, 'a' },    { "local_register", required_argument, 0, 'R' },
    { "output_file", required_argument, 0, 'J' }, { "help", no_argument, 0, 'h' },
    { "host-buffers", no_argument, 0, 'H' },     { "selftest", no_argument, 0, 'S' },
    /* rccl-tests' */
    { "memory_type", required_argument, 0, 'Y' }, { "cumask", required_argument, 0, 'u' },
    { "stress_cycles", required_argument, 0, 's' }, { "out_of_place", required_argument, 0, 'O' },
    { "delay", required_argument, 0, 'q' },      { "delay_inout_place", required_argument, 0, 'q' },
    { "cache_flush", required_argument, 0, 'F' }, { "rotating_tensor", required_argument, 0, 'E' },
    { "output_format", required_argument, 0, 'Z' }, { "hipgraph", required_argument, 0, 'G' },
    { "rccl_output_format", required_argument, 0, 'Z' },
    { "rccl_output_file", required_argument, 0, 'X' },
    { "output_algo_proto_channels", required_argument, 0, 'A' },
    { "cta_policy", required_argument, 0, PERF_OPT_CTA },
    { 0, 0, 0, 0 }
};

/* Who is parsing: the program's name for messages, and whether to print them at all. */
typedef struct perf_cli {
    const char *prog;
    int quiet;
} perf_cli_t;

/* "prog: message" on stderr, unless quiet. */
__attribute__((format(printf, 2, 3)))
static void perf_complain(const perf_cli_t *cli, const char *fmt, ...)
{
    va_list ap;
    if (cli->quiet)
        return;
    fprintf(stderr, "%s: ", cli->prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

static void perf_usage(const perf_cli_t *cli, FILE *out)
{
    if (cli->quiet)
        return;
    fprintf(out,
        "usage: %s [options]    (nccl-tests flags, and rccl-tests')\n"
        "  Buffers are device memory, with a stream per rank, where a GPU runtime loads\n"
        "  and has a device, chosen as braid chooses (BRAID_DEVICE=auto: CUDA's driver\n"
        "  libcuda.so.1, else HIP's runtime libamdhip64; cuda or hip: that one; host:\n"
        "  none): a rank takes device (local rank * -t + thread) mod the device count.\n"
        "  Otherwise, or with -H, host memory.\n"
        "  -t,--nthreads N        ranks run as threads of this process (default 1); with a\n"
        "                         launcher (braidrun, torchrun, mpirun, srun) each process\n"
        "                         adds N ranks and NCCL_COMM_ID=host:port must be set\n"
        "  -g,--ngpus N           must be 1: each rank drives one device (or host buffers)\n"
        "  -b,--minbytes SIZE     smallest size, with K/M/G suffix (default 32M)\n"
        "  -e,--maxbytes SIZE     largest size (default 32M)\n"
        "  -i,--stepbytes SIZE    increment when -f is 1 (default 1M)\n"
        "  -f,--stepfactor N      multiply the size by N each step (default 1: use -i)\n"
        "  -n,--iters N           timed iterations per size (default 20)\n"
        "  -m,--agg_iters N       calls aggregated in one ncclGroupStart/End (default 1)\n"
        "  -w,--warmup_iters N    warm-up iterations (default 5)\n"
        "  -N,--run_cycles N      run the sweep N times, 0 = forever (default 1)\n"
        "  -p,--parallel_init 0/1 accepted; every rank always initialises in its own thread\n"
        "  -c,--check N           check N iterations per size, 0 = no check (default 1)\n"
        "  -o,--op OP             sum, prod, max, min, avg, mulsum or all (default sum)\n"
        "  -d,--datatype TYPE     int8 uint8 int32 uint32 int64 uint64 half float double\n"
        "                         bfloat16 f8e4m3 f8e5m2, or all (default float)\n"
        "  -r,--root N            root rank of rooted collectives, -1 = each rank in turn\n"
        "                         (default 0)\n"
        "  -z,--blocking 0/1/2    1: barrier after every call (or -m group); 2 = 0 on host\n"
        "  -y,--stream_null 0/1   1: device calls on the NULL stream, not the rank's own\n"
        "                         (host buffers: no stream either way)\n"
        "  -T,--timeout SECONDS   fail a call that takes longer (default 0: none)\n"
        "  -G,--cudagraph N       must be 0: braid does not support CUDA or HIP graph\n"
        "                         capture (also --hipgraph)\n"
        "  -C,--report_cputime 0/1  label times 'cputime' (host calls: the same value)\n"
        "  -a,--average 0/1/2/3   time reported: rank 0, mean, min, max over ranks (default 1)\n"
        "  -R,--local_register 0/1/2  register buffers: 1 ncclCommRegister, 2 symmetric\n"
        "                         window (default 0)\n"
        "  -J,--output_file FILE  also write each row as one JSON object per line\n"
        "  -H,--host-buffers      host memory even where a GPU is (as without one)\n"
        " rccl-tests' flags:\n"
        "  -Y,--memory_type TYPE  device buffers' memory (default coarse); fine, host and\n"
        "                         managed through HIP's runtime only: coarse hipMalloc (or\n"
        "                         cuMemAlloc), fine hipExtMallocWithFlags (uncached from\n"
        "                         ROCm 5.7), host hipHostMalloc, managed hipMallocManaged;\n"
        "                         -y TYPE is the same (rccl-tests' README spelling)\n"
        "  -u,--cumask D0,D1,D2,D3  accepted and ignored (said on stderr): braid runs its\n"
        "                         kernels on its own streams, not the tool's\n"
        "  -s,--stress_cycles N   run the sweep N times (-N N, N >= 1)\n"
        "  -O,--out_of_place 0/1  1: out of place only, 0: in place only (default both)\n"
        "  -q,--delay USEC        pause between the out-of-place and in-place halves\n"
        "  -F,--cache_flush N     accepted; N > 0 is ignored (said on stderr): the tools\n"
        "                         cannot flush the GPU's instruction cache\n"
        "  -E,--rotating_tensor 0/1  accepted; 1 is ignored (said on stderr): each call\n"
        "                         already moves across the buffer, as in nccl-tests\n"
        "  -A,--output_algo_proto_channels 0/1  accepted; 1 is ignored (said on stderr):\n"
        "                         braid has no RCCL-internal algorithm query\n"
        "  -X,--rccl_output_file FILE  also write the rows there, as -Z says (older\n"
        "                         rccl-tests: -x FILE, --output_file)\n"
        "  -Z,--rccl_output_format F  -X's format: json (default: -J's lines) or csv\n"
        "                         (rccl-tests' columns, a line per half); also\n"
        "                         --output_format\n"
        "  -x,--cta_policy N      accepted and ignored (said on stderr): braid has no CTA\n"
        "                         policy; -x FILE (not a number) is -X FILE\n"
        "  --selftest             check the tool's data encoding and comparison, then exit\n"
        "  -h,--help              this help\n",
        cli->prog);
}

/* An integer in [lo, hi]; returns -1 (after a message) if `arg` is not one. */
static int perf_parse_int(const perf_cli_t *cli, char opt, const char *arg, long lo, long hi,
                          int *out_p)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 0);
    if (errno != 0 || end == arg || *end != '\0' || v < lo || v > hi) {
        perf_complain(cli, "-%c wants an integer from %ld to %ld, not \"%s\"\n", opt, lo, hi,
                      arg);
        return -1;
    }
    *out_p = (int)v;
    return 0;
}

/* A size such as 8, 1.5K, 64M, 2G (nccl-tests' parsesize). */
static int perf_parse_size(const perf_cli_t *cli, char opt, const char *arg, size_t *out_p)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    double unit = 1;
    switch (*end) {
    case 'k': case 'K': unit = 1024.0; end++; break;
    case 'm': case 'M': unit = 1048576.0; end++; break;
    case 'g': case 'G': unit = 1073741824.0; end++; break;
    default: break;
    }
    if (errno != 0 || end == arg || *end != '\0' || !(v >= 0) || v * unit > 1e18) {
        perf_complain(cli, "-%c wants a size in bytes (suffix K, M or G allowed), not \"%s\"\n",
                      opt, arg);
        return -1;
    }
    *out_p = (size_t)(v * unit);
    return 0;
}

static int perf_parse_name(const perf_cli_t *cli, int c, const char *arg, perf_args_t *a)
{
    if (c == 'o') {
        a->op = strcmp(arg, "all") == 0 ? -1 : perf_op_find(arg);
        if (a->op != -2)
            return 0;
        perf_complain(cli, "unknown op \"%s\" (sum, prod, max, min, avg, mulsum, all)\n", arg);
        return -1;
    }
    const perf_type_t *t = perf_type_find(arg);
    a->type = t != NULL ? (int)(t - perf_types) : -1;
    if (t != NULL || strcmp(arg, "all") == 0)
        return 0;
    perf_complain(cli, "unknown datatype \"%s\" (int8, uint8, int32, uint32, int64, uint64, "
                  "half, float, double, bfloat16, f8e4m3, f8e5m2, all)\n", arg);
    return -1;
}

/* The memory type called `name` (rccl-tests' names), or -1. */
static int perf_mem_find(const char *name)
{
    for (int m = 0; m < PERF_NMEMS; m++)
        if (strcmp(name, perf_mem_names[m]) == 0)
            return m;
    return -1;
}

/* -Y TYPE; -y TYPE or -y 0/1 (see the top of the file). */
static int perf_parse_mem(const perf_cli_t *cli, int c, const char *arg, perf_args_t *a)
{
    int m = perf_mem_find(arg);
    if (m >= 0) {
        a->mem_type = m;
        return 0;
    }
    if (c == 'y') {
        char *end;
        errno = 0;
        long v = strtol(arg, &end, 0);
        if (errno == 0 && end != arg && *end == '\0' && (v == 0 || v == 1)) {
            a->stream_null = (int)v;
            return 0;
        }
    }
    if (c == 'y')
        perf_complain(cli, "-y wants 0 or 1 (stream_null), or a memory type as -Y does "
                      "(coarse, fine, host, managed), not \"%s\"\n", arg);
    else
        perf_complain(cli, "unknown memory type \"%s\" (coarse, fine, host, managed)\n", arg);
    return -1;
}

/* -u: rccl-tests' CU mask, up to 4 comma-separated 32-bit hex words; checked, then ignored. */
static int perf_parse_cumask(const perf_cli_t *cli, const char *arg, perf_args_t *a)
{
    const char *p = arg;
    for (int words = 1;; words++) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 16);
        if (errno != 0 || end == p || *p == '-' || v > 0xffffffffull || words > 4 ||
            (*end != ',' && *end != '\0')) {
            perf_complain(cli, "-u wants up to 4 comma-separated 32-bit hex words (a CU mask, "
                          "as rccl-tests), not \"%s\"\n", arg);
            return -1;
        }
        if (*end == '\0')
            break;
        p = end + 1;
    }
    a->cumask = arg;
    return 0;
}

static int perf_parse_format(const perf_cli_t *cli, const char *arg, perf_args_t *a)
{
    if (strcmp(arg, "csv") == 0 || strcmp(arg, "json") == 0) {
        a->format = arg;
        return 0;
    }
    perf_complain(cli, "-Z wants csv or json, not \"%s\"\n", arg);
    return -1;
}

/* -x N: nccl-tests' CTA policy (0, 1, 2); -x FILE: older rccl-tests' output file (-X). */
static int perf_parse_x(const perf_cli_t *cli, const char *arg, perf_args_t *a)
{
    if (arg[0] == '\0' || strspn(arg, "0123456789") != strlen(arg)) {
        a->rccl_file = arg;
        return 0;
    }
    return perf_parse_int(cli, 'x', arg, 0, 2, &a->cta_policy);
}

/* rccl-tests' flags (see the top of the file). */
static int perf_parse_rccl(const perf_cli_t *cli, int c, const char *arg, perf_args_t *a)
{
    switch (c) {
    case 'Y': return perf_parse_mem(cli, c, arg, a);
    case 'u': return perf_parse_cumask(cli, arg, a);
    case 's': return perf_parse_int(cli, 's', arg, 1, INT_MAX, &a->cycles);
    case 'O': return perf_parse_int(cli, 'O', arg, 0, 1, &a->out_of_place);
    case 'q': return perf_parse_int(cli, 'q', arg, 0, INT_MAX, &a->delay_us);
    case 'F': return perf_parse_int(cli, 'F', arg, 0, INT_MAX, &a->cache_flush);
    case 'E': return perf_parse_int(cli, 'E', arg, 0, 1, &a->rotating);
    case 'A': return perf_parse_int(cli, 'A', arg, 0, 1, &a->algo_info);
    case 'X': a->rccl_file = arg; return 0;
    case 'x': return perf_parse_x(cli, arg, a);
    case PERF_OPT_CTA: return perf_parse_int(cli, 'x', arg, 0, 2, &a->cta_policy);
    case 'Z': return perf_parse_format(cli, arg, a);
    default: return -1;
    }
}

static int perf_parse_opt(const perf_cli_t *cli, int c, const char *arg, perf_args_t *a)
{
    switch (c) {
    case 't': return perf_parse_int(cli, 't', arg, 1, 1024, &a->nthreads);
    case 'g': return perf_parse_int(cli, 'g', arg, 1, 1024, &a->ngpus);
    case 'b': return perf_parse_size(cli, 'b', arg, &a->min_bytes);
    case 'e': return perf_parse_size(cli, 'e', arg, &a->max_bytes);
    case 'i': return perf_parse_size(cli, 'i', arg, &a->step_bytes);
    case 'f': {
        int f = 0, st = perf_parse_int(cli, 'f', arg, 0, 1 << 20, &f);
        a->step_factor = (size_t)f;
        return st;
    }
    case 'n': return perf_parse_int(cli, 'n', arg, 1, INT_MAX, &a->iters);
    case 'm': return perf_parse_int(cli, 'm', arg, 1, 1 << 20, &a->agg);
    case 'w': return perf_parse_int(cli, 'w', arg, 0, INT_MAX, &a->warmup);
    case 'N': return perf_parse_int(cli, 'N', arg, 0, INT_MAX, &a->cycles);
    case 'p': return perf_parse_int(cli, 'p', arg, 0, 1, &a->parallel_init);
    case 'c': return perf_parse_int(cli, 'c', arg, 0, INT_MAX, &a->check);
    case 'o': case 'd': return perf_parse_name(cli, c, arg, a);
    case 'r': return perf_parse_int(cli, 'r', arg, -1, INT_MAX, &a->root);
    case 'z': return perf_parse_int(cli, 'z', arg, 0, 2, &a->blocking);
    case 'y': return perf_parse_mem(cli, c, arg, a);
    case 'T': return perf_parse_int(cli, 'T', arg, 0, INT_MAX, &a->timeout);
    case 'G': return perf_parse_int(cli, 'G', arg, 0, INT_MAX, &a->graph);
    case 'C': return perf_parse_int(cli, 'C', arg, 0, 1, &a->cputime);
    case 'a': return perf_parse_int(cli, 'a', arg, 0, 3, &a->average);
    case 'R': return perf_parse_int(cli, 'R', arg, 0, 2, &a->reg);
    case 'J': a->json = arg; return 0;
    case 'H': a->host_buffers = 1; return 0;
    default: return perf_parse_rccl(cli, c, arg, a);
    }
}

/* Flags that parse but braid's tools do not take, and cross-flag checks. */
static int perf_args_check(const perf_cli_t *cli, const perf_args_t *a)
{
    if (a->ngpus != 1)
        perf_complain(cli, "-g %d: each rank drives one device (or one set of host buffers), "
                      "so -g must be 1; use -t N for N ranks in this process, or a launcher "
                      "(braidrun -n N)\n", a->ngpus);
    else if (a->graph != 0)
        perf_complain(cli, "-G %d: braid does not support CUDA or HIP graph capture; use -G 0\n",
                      a->graph);
    else if (a->min_bytes > a->max_bytes)
        perf_complain(cli, "invalid sizes for 'minbytes' and 'maxbytes': %zu > %zu\n",
                      a->min_bytes, a->max_bytes);
    else if (a->step_factor <= 1 && a->step_bytes == 0)
        perf_complain(cli, "-i 0 with -f %zu would never reach -e: give -i > 0 or -f > 1\n",
                      a->step_factor);
    else
        return 0;
    return -1;
}

/* rccl-tests' flags that braid's tools take but cannot honour: one line each, so that a
 * run that goes on is never taken for one that honoured them. */
static void perf_args_ignored(const perf_cli_t *cli, const perf_args_t *a)
{
    if (a->cumask != NULL)
        perf_complain(cli, "-u %s: ignored: braid runs a collective's kernels on streams of "
                      "its own, which the rank's stream only waits for, so a CU mask there "
                      "would not confine them\n", a->cumask);
    if (a->cache_flush > 0)
        perf_complain(cli, "-F %d: ignored: the tools cannot flush the GPU's instruction "
                      "cache (that takes an AMD kernel); times are with warm caches\n",
                      a->cache_flush);
    if (a->rotating)
        perf_complain(cli, "-E 1: ignored: the buffers do not grow by rccl-tests' 192 MiB to "
                      "rotate through; each timed call moves to the next slice of the buffer "
                      "instead, as in nccl-tests\n");
    if (a->algo_info)
        perf_complain(cli, "-A 1: ignored: braid has no RCCL-internal query of each call's "
                      "algorithm, protocol and channels (NCCL_DEBUG=INFO says what it picks)\n");
    if (a->cta_policy >= 0)
        perf_complain(cli, "-x %d: ignored: braid has no CTA policy to set\n", a->cta_policy);
    if (a->format != NULL && a->rccl_file == NULL)
        perf_complain(cli, "-Z %s: ignored: no file to write it to (-X FILE)\n", a->format);
}

int perf_args_parse(int argc, char **argv, int quiet, perf_args_t *a, int *exit_p)
{
    const perf_cli_t cli = { .prog = argv[0], .quiet = quiet };
    int c;
    *a = (perf_args_t){ .nthreads = 1, .ngpus = 1, .iters = 20, .warmup = 5, .agg = 1,
                        .cycles = 1, .check = 1, .op = ncclSum, .type = 7, .average = 1,
                        .min_bytes = 32u << 20, .max_bytes = 32u << 20,
                        .step_bytes = 1u << 20, .step_factor = 1, .out_of_place = -1,
                        .cta_policy = -1 };
    opterr = 0;
    while ((c = getopt_long(argc, argv, perf_shortopts, perf_longopts, NULL)) != -1) {
        if (c == 'h') {
            perf_usage(&cli, stdout);
            *exit_p = 0;
            return 1;
        }
        if (c == 'S') {   /* --selftest: the data encoding and check, no communicator */
            int fails = perf_data_selftest(stdout);
            printf("%s: data self-test %s\n", cli.prog, fails == 0 ? "passed" : "FAILED");
            *exit_p = fails == 0 ? 0 : 1;
            return 1;
        }
        if (c == '?' || c == ':') {
            if (optopt != 0)
                perf_complain(&cli, "invalid option or missing value: -%c\n", optopt);
            else
                perf_complain(&cli, "invalid option: %s\n", argv[optind - 1]);
        }
        if (c == '?' || c == ':' || perf_parse_opt(&cli, c, optarg, a) != 0) {
            perf_usage(&cli, stderr);
            *exit_p = 2;
            return 1;
        }
    }
    if (optind < argc)
        perf_complain(&cli, "unexpected argument \"%s\"\n", argv[optind]);
    if (optind < argc || perf_args_check(&cli, a) != 0) {
        perf_usage(&cli, stderr);
        *exit_p = 2;
        return 1;
    }
    perf_args_ignored(&cli, a);
    return 0;
}
