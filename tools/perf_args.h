/*
 * perf_args: the command line of the *_perf tools, nccl-tests' flags and rccl-tests' own
 * (perf_args.c); private to the driver, perf_common.c.
 */
#ifndef BRAID_TOOLS_PERF_ARGS_H
#define BRAID_TOOLS_PERF_ARGS_H

#include <stddef.h>

typedef struct perf_args {
    int nthreads, ngpus, iters, warmup, agg, cycles, parallel_init, check;
    int op;       /* op index, or -1 for all */
    int type;     /* index into perf_types, or -1 for all */
    int root, blocking, stream_null, timeout, graph, cputime, average, reg;
    int host_buffers;   /* -H: host buffers even where a GPU is */
    size_t min_bytes, max_bytes, step_bytes, step_factor;
    const char *json;   /* -J: the rows as JSON lines */
    /* rccl-tests' flags */
    int mem_type;       /* -Y: PERF_MEM_* (perf_gpu.h) */
    int out_of_place;   /* -O: 1 out of place only, 0 in place only, -1 both (default) */
    int delay_us;       /* -q: microseconds between the out-of-place and in-place halves */
    const char *rccl_file;   /* -X FILE (-x FILE before rccl-tests took -x for -x N) */
    const char *format; /* -Z: "csv" (rccl-tests' columns) or "json" (-J's lines) */
    /* accepted, ignored (said so on stderr) */
    int cache_flush, rotating, algo_info, cta_policy;   /* -F, -E, -A, -x N (-1: unset) */
    const char *cumask; /* -u */
} perf_args_t;

/* Parse argv into *a (defaults as nccl-tests'); -h prints the usage, --selftest runs
 * perf_data_selftest. Returns 0 to run, or 1 with the exit status in *exit_p (0 after -h
 * or a passed self-test, 1 after a failed one, 2 after a bad flag). `quiet` leaves out the
 * usage, the messages about bad flags (the status is the same) and the one line each flag
 * accepted but ignored gets: every rank of a launched job gets the same command line, and
 * one of them says what is wrong with it. */
int perf_args_parse(int argc, char **argv, int quiet, perf_args_t *a, int *exit_p);

#endif /* BRAID_TOOLS_PERF_ARGS_H */
