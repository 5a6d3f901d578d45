/*
 * perf_common: the shared driver of braid's nccl-tests-compatible bandwidth tools
 * (all_reduce_perf, all_gather_perf, ...). Written against the public API only
 * (nccl.h), so the tools run unchanged on NVIDIA's NCCL or on braid.
 *
 * A tool describes its collective in one perf_coll_t and calls perf_main(). The driver
 * parses the nccl-tests flags (and rccl-tests'), finds its ranks (threads of this
 * process, -t, times the processes of a launcher: RANK/WORLD_SIZE, OMPI_COMM_WORLD_*,
 * PMI_*, SLURM_*), makes one communicator per rank, sweeps the sizes, times each size out
 * of place and in place, checks the results exactly (or within a per-type tolerance where
 * rounding is unavoidable) and prints nccl-tests' table. Buffers are device memory, with a
 * stream per rank, where CUDA's driver or HIP's runtime loads and has a device
 * (perf_gpu.h), as in nccl-tests and rccl-tests; host memory otherwise, or with
 * --host-buffers.
 *
 * The data helpers below let a tool fill its inputs and compute its expected output: the
 * input element i of rank r is a deterministic value of (type, op, nranks, seed, r, i),
 * chosen so that the reduction over ranks is exact in the type whenever possible.
 */
#ifndef BRAID_TOOLS_PERF_COMMON_H
#define BRAID_TOOLS_PERF_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nccl.h"

/* Operator index of the tools' "mulsum": ncclRedOpCreatePreMulSum per call, as nccl-tests. */
#define PERF_OP_MULSUM ((int)ncclNumOps)
/* The data "op" of collectives that only move data: a wide range of exact values. */
#define PERF_OP_NONE (-1)
#define PERF_NOPS 6      /* sum prod max min avg mulsum */
#define PERF_NTYPES 12   /* every ncclDataType_t */

/* One element type: name as nccl-tests spells it and how it is encoded. */
typedef struct perf_type {
    const char *name;
    ncclDataType_t dt;
    int size;        /* bytes per element */
    int is_float;
    int is_signed;   /* integers only */
    int mant;        /* floats: explicit mantissa bits */
    int exp_bits;    /* floats: exponent bits */
    int no_inf;      /* floats: no infinity, all-ones is NaN only (fp8 e4m3) */
} perf_type_t;

/* What one collective call of a sweep works on: the type, the op and the data recipe. */
typedef struct perf_data {
    const perf_type_t *type;
    int op;          /* ncclRedOp_t value below ncclNumOps, PERF_OP_MULSUM or PERF_OP_NONE */
    int nranks;
    int root;        /* rooted collectives: the root of this call; -1 otherwise */
    uint32_t seed;   /* changes for every check, so stale results never look right */
    /* recipe, set by perf_data_init */
    int kind;        /* PERF_VALS_RANGE or PERF_VALS_POW2 */
    int64_t lo, hi;  /* RANGE: integers lo..hi */
    double tol;      /* floats: largest |got - expected| accepted; 0 means exact */
} perf_data_t;

enum { PERF_VALS_RANGE = 0, PERF_VALS_POW2 = 1 };

/* Element counts of one call for `count` = size / element size (nccl-tests' getCollByteCount).
 * The driver sets elt_size before it calls sizes(); the rest is sizes()'s output. */
typedef struct perf_sizes {
    size_t elt_size;     /* in: bytes per element */
    size_t send_count;   /* elements each rank sends */
    size_t recv_count;   /* elements each rank receives, and checks */
    size_t param_count;  /* the count argument of the call */
    size_t send_inplace_off; /* in place: sendbuff = recvbuff + send_inplace_off * rank */
    size_t recv_inplace_off; /* in place: recvbuff = recvbuff + recv_inplace_off * rank */
} perf_sizes_t;

/* A collective as a tool describes it. */
typedef struct perf_coll {
    const char *prog;    /* "all_reduce_perf" */
    const char *name;    /* "all_reduce": JSON field "collective" */
    const char *call;    /* "ncclAllReduce": named in error messages */
    int uses_op;         /* -o applies (otherwise op column prints "none") */
    int labels_op;       /* -o is swept and printed but not passed (sendrecv, as nccl-tests) */
    int uses_root;       /* -r applies, -r -1 sweeps every root (otherwise root prints -1) */
    int root_only;       /* only the root's recvbuff changes; the others' must not (reduce,
                          * gather): fill() gets expected == NULL on those ranks */
    int inplace_na;      /* the in-place result is not checked: #wrong prints N/A, as
                          * nccl-tests does for alltoall and sendrecv */
    void (*sizes)(size_t count, int nranks, perf_sizes_t *sizes_p);
    /* busbw = algbw * bus_factor(nranks) */
    double (*bus_factor)(int nranks);
    /* Write this rank's input (send_count elements at `in`; rooted collectives whose
     * root alone sends may leave the others' untouched) and, if `expected` is not NULL,
     * the recv_count elements this rank must receive. d->nranks and d->root are set. */
    void (*fill)(const perf_data_t *d, const perf_sizes_t *s, int rank, void *in,
                 void *expected);
    /* One collective call, on host or device buffers (the driver's), on `stream` (the
     * rank's; NULL for host buffers and with -y 1). `op` may be a per-communicator
     * PreMulSum handle. */
    ncclResult_t (*run)(const void *send, void *recv, size_t count, ncclDataType_t dt,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
} perf_coll_t;

/* Parse argv, run the sweep, print; returns the process exit status. */
int perf_main(int argc, char **argv, const perf_coll_t *coll);

/* nccl-tests' per-rank block of the collectives that split a size among ranks:
 * count / nranks elements, rounded down to a multiple of 16 bytes. */
static inline size_t perf_rank_block(size_t count, int nranks, size_t elt_size)
{
    size_t per16 = elt_size > 0 && elt_size < 16 ? 16 / elt_size : 1;
    return nranks > 0 ? count / (size_t)nranks / per16 * per16 : 0;
}

/* Address of element `i` of `buf` in d's type. */
static inline void *perf_elem(const perf_data_t *d, void *buf, size_t i)
{
    return (char *)buf + i * (size_t)d->type->size;
}

/* The size shapes the tools share (nccl-tests' getCollByteCount):
 *   whole:   every rank sends and receives `count` (all-reduce, broadcast, reduce, sendrecv);
 *   gather:  each rank sends a block, the result holds n blocks (all-gather, gather);
 *   scatter: the input holds n blocks, each rank receives one (reduce-scatter, scatter). */
void perf_sizes_whole(size_t count, int nranks, perf_sizes_t *s);
void perf_sizes_gather(size_t count, int nranks, perf_sizes_t *s);
void perf_sizes_scatter(size_t count, int nranks, perf_sizes_t *s);

/* (n-1)/n: the bus factor of all-gather, reduce-scatter, alltoall, gather and scatter. */
double perf_bus_factor_nm1(int nranks);

/* 1: the bus factor of broadcast, reduce and sendrecv. */
double perf_bus_factor_one(int nranks);

/* ---- data helpers for fill() ---- */

/* Input element `index` of `rank`, as a double (exactly a value of the type). */
double perf_data_value(const perf_data_t *d, int rank, size_t index);

/* buf[j] = input element (first + j) of rank, for j < count. */
void perf_data_fill(const perf_data_t *d, int rank, void *buf, size_t first, size_t count);

/* buf[j] = reduction over all ranks of input element (first + j), with the op's
 * semantics (avg: sum / nranks; mulsum: each rank's input times perf_data_scalar). */
void perf_data_reduce(const perf_data_t *d, void *buf, size_t first, size_t count);

/* The premultiplier of `rank` for mulsum (1 or 2). */
double perf_data_scalar(int rank);

/* Number of elements of `got` that differ from `expected` (beyond d->tol for floats). */
size_t perf_data_check(const perf_data_t *d, const void *got, const void *expected,
                       size_t count);

/* Encode/decode one element (exposed for the self-test). */
void perf_type_store(const perf_type_t *t, void *buf, size_t i, double v);
double perf_type_load(const perf_type_t *t, const void *buf, size_t i);

/* Every type, in ncclDataType_t order, and every op name (index = op). */
extern const perf_type_t perf_types[PERF_NTYPES];
extern const char *const perf_op_names[PERF_NOPS];

/* The type called `name` (nccl-tests spelling, or an alias), or NULL. */
const perf_type_t *perf_type_find(const char *name);

/* The op index called `name` ("premulsum" is "mulsum"), or -2. */
int perf_op_find(const char *name);

/* Check the encoders and the check itself (no communicator): exact reductions in any
 * order compare equal, a dropped contribution or a changed element does not. Prints
 * failures to `out`; returns their number. */
int perf_data_selftest(FILE *out);

/* Choose the value recipe and tolerance of d (type, op and nranks set). */
void perf_data_init(perf_data_t *d);

#endif /* BRAID_TOOLS_PERF_COMMON_H */
