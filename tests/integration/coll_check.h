/*
 * coll_check: an integration test of every collective on host buffers, through the public
 * API only. Shared declarations of its files:
 *
 *   coll_check.c   main: modes (processes, -t one thread for all ranks, -T a thread per
 *                  rank), the built-in fork launcher, the watchdog
 *   coll_util.c    datatypes (encode/decode of every NCCL type), test values, buffers with
 *                  guards, failure reports, group helpers
 *   coll_reduce.c  AllReduce, Reduce, ReduceScatter for every type and op; bit-identical
 *                  results of random float all-reduces
 *   coll_move.c    Broadcast, Bcast, AllGather, AlltoAll, AllToAll(v), Gather, Scatter,
 *                  Send/Recv patterns, and a group mixing several collectives
 *   coll_comm.c    split, shrink, nonblocking init, finalize and destroy
 *   coll_api.c     success paths of the rest of the API (sections api and debug, run only
 *                  when named): ncclMemAlloc/ncclMemFree, windows, ncclGroupSimulateEnd,
 *                  ncclCommRevoke, ncclCommInitRankScalable with several ids,
 *                  ncclResetDebugInit
 *   coll_narrow.c  fp16, bf16 and fp8 reductions of random inputs checked byte for byte
 *                  against a reference of its own, conversions included (section narrow,
 *                  run only when named)
 *   coll_v.c       braid.h's braidAllGatherV and braidReduceScatterV: uneven counts with
 *                  zeros and gaps, in and out of place, and their bad arguments (section v)
 *
 * Every rank computes the values of every other rank from (rank, index, salt), so results
 * are checked without extra communication. Values are chosen so that every partial result
 * is exact in the type: checks compare exactly.
 */
#ifndef BRAID_TEST_COLL_CHECK_H
#define BRAID_TEST_COLL_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define CC_MAX_LOCAL 64
#define CC_NTYPES 12

/* The ranks this caller drives: one (processes, -T) or all of them (-t, in groups). */
typedef struct cc_world {
    int nranks;
    int nlocal;
    int ranks[CC_MAX_LOCAL];
    ncclComm_t comms[CC_MAX_LOCAL];
    const char *mode;
    int quick;
    ncclUniqueId nb_id;   /* for the nonblocking-init test: a second job's id */
} cc_world_t;

/* Operators under test: NCCL's five, then PreMulSum with each scalar residence. */
typedef enum {
    CC_SUM, CC_PROD, CC_MAX, CC_MIN, CC_AVG, CC_PMS_HOST, CC_PMS_DEV, CC_NOPS
} cc_op_t;

/* Families of test values: what the result must stay exact under. */
typedef enum {
    CC_VAL_ANY,     /* data movement, max, min: any value exact in the type */
    CC_VAL_SUM,     /* any partial sum of nranks values stays exact */
    CC_VAL_AVG,     /* floats: multiples of nranks (so x/n is exact); ints as SUM */
    CC_VAL_PROD,    /* +-1, +-2, +-1/2 with every partial product in [1/2, 2] */
    CC_VAL_PMS,     /* sums of scalar*x stay exact */
} cc_val_t;

typedef struct cc_type {
    const char *name;
    ncclDataType_t dt;
    size_t size;
    int is_float, is_signed;
    double exact;   /* every integer of [-exact, exact] is exact in the type */
    double eps;     /* unit roundoff (floats) */
} cc_type_t;

extern const cc_type_t cc_types[CC_NTYPES];
extern const char *const cc_op_names[CC_NOPS];

/* What a failure line names. */
typedef struct cc_case {
    const char *what;
    int type;
    int op;          /* cc_op_t, or -1 */
    size_t count;
    int root;        /* -1: none */
    int inplace;
} cc_case_t;

/* ---- datatypes and values (coll_util.c) ---- */

/* Values repeat with this (prime) period in the element index, so that large buffers are
 * filled and checked at the cost of one period; a block misplaced by a multiple of a prime
 * number of elements is not a plausible bug. */
#define CC_PERIOD ((size_t)65521)
void cc_encode(int type, double v, void *dst);
double cc_decode(int type, const void *src);
/* Encode the family's value of (rank, idx) for elements [0, n) of buf. */
double cc_value(int type, cc_val_t fam, int nranks, int rank, size_t idx, uint32_t salt,
                double scalar);
void cc_fill(int type, cc_val_t fam, int nranks, int rank, uint32_t salt, double scalar,
             void *buf, size_t n);
uint64_t cc_hash(const void *buf, size_t bytes);
/* Replicate buf[0, have) until buf[0, total) is filled (bytes). */
void cc_repeat(void *buf, size_t have, size_t total);
uint64_t cc_rng(uint64_t *state);

/* ---- the reductions' reference (coll_reduce.c) ---- */
/* The family of values an op's inputs come from, and its PreMulSum scalar (1 for others). */
cc_val_t cc_op_family(int op);
double cc_op_scalar(int op);
/* The exact result of element idx of a reduction over n ranks' inputs of that family. */
double cc_red_expect(int type, int op, int n, uint32_t salt, size_t idx);

/* ---- buffers with guards (coll_util.c) ---- */
typedef struct cc_buf {
    char *base;      /* allocation: guard | data | guard */
    char *data;
    size_t bytes;
    char *dbase;     /* -d: its device twin (coll_dev.c), of `total` bytes; else NULL */
    size_t total;
} cc_buf_t;

void cc_buf_alloc(cc_buf_t *b, size_t bytes);
void cc_buf_free(cc_buf_t *b);
/* Check both guards are intact; report a failure naming `c` and `rank` otherwise. */
int cc_buf_guards_ok(const cc_buf_t *b, const cc_case_t *c, int rank);

/* ---- device buffers (coll_dev.c, -d) ---- */
extern int cc_device;
/* -D: ranks spread over the devices, rank r on device r % count (processes and threads
 * each; -t's one thread keeps every rank on device 0). */
extern int cc_spread;
/* -S: the streams a thread's calls take in turn (1: its one stream), the last of them the
 * legacy default stream where cc_streams_default (not with -T). */
#define CC_MAX_STREAMS 8
extern int cc_streams, cc_streams_default;
/* Each thread that issues calls, for `rank`: its device's primary context (device 0, or
 * rank % count with -D) and this thread's stream. */
void cc_dev_thread_init(int rank);
/* The stream the next call takes (NULL without -d). */
void *cc_stream(void);
/* The device twin of a pointer into a live cc_buf (p itself without -d, or elsewhere). */
void *cc_dp(const void *p);
void cc_dev_register(cc_buf_t *b, size_t total);
void cc_dev_unregister(cc_buf_t *b);
/* -T: n threads, one per rank, each uploading once per case (they meet there). */
void cc_dev_threads(int n);
/* Copy every live buffer of this thread to its twin / back (async on the stream, then a
 * synchronize). */
void cc_dev_upload(void);
void cc_dev_download(void);

/* ---- checks and reports (coll_util.c) ---- */
void cc_fail(const cc_world_t *w, const cc_case_t *c, int rank, size_t idx, const char *got,
             const char *expected);
/* Compare n elements of buf with expected values; reports up to a few mismatches.
 * Returns the number of mismatches. */
size_t cc_check_values(const cc_world_t *w, const cc_case_t *c, int rank, const void *buf,
                       const double *expect, size_t n, size_t idx0);
/* Compare n bytes with a saved copy (input left untouched). */
int cc_check_unchanged(const cc_world_t *w, const cc_case_t *c, int rank, const void *buf,
                       const void *saved, size_t bytes);
void cc_nccl_fatal(const cc_world_t *w, const char *what, ncclResult_t r, const char *file,
                   int line);
long cc_failures(void);
void cc_set_phase(const char *phase);
const char *cc_phase(void);
void *cc_xmalloc(size_t bytes);

#define CC_NCCL(_w, _what, _call)                                                         \
    do {                                                                                  \
        ncclResult_t _r = (_call);                                                        \
        if (_r != ncclSuccess)                                                            \
            cc_nccl_fatal((_w), (_what), _r, __FILE__, __LINE__);                         \
    } while (0)

/* ncclGroupStart / ncclGroupEnd, failing the test on an error. */
void cc_group_start(const cc_world_t *w);
void cc_group_end(const cc_world_t *w, const char *what);

/* ---- prepared calls: set up every local rank, issue (inside a group), then check ---- */
typedef enum {
    CC_K_ALLREDUCE, CC_K_REDUCE, CC_K_REDUCESCATTER,
    CC_K_BROADCAST, CC_K_BCAST, CC_K_ALLGATHER, CC_K_ALLTOALL, CC_K_ALLTOALL_RCCL,
    CC_K_ALLTOALLV, CC_K_GATHER, CC_K_SCATTER, CC_K_RING
} cc_kind_t;

typedef struct cc_prep cc_prep_t;
struct cc_prep {
    int grouped;                              /* in a group even with one local rank */
    void (*issue)(cc_prep_t *p, int local);   /* make local rank's call */
    void (*finish)(cc_prep_t *p);             /* check every local rank, free */
};

cc_prep_t *cc_red_prepare(cc_world_t *w, cc_kind_t k, const cc_case_t *c, uint32_t salt);
cc_prep_t *cc_mv_prepare(cc_world_t *w, cc_kind_t k, const cc_case_t *c, uint32_t salt);
/* Issue for every local rank (in one group if several, or p->grouped), then finish. */
void cc_run(cc_world_t *w, cc_prep_t *p, const char *what);

/* ---- the tests ---- */
void cc_test_reduce(cc_world_t *w);
void cc_test_random(cc_world_t *w);
void cc_test_move(cc_world_t *w);
void cc_test_p2p(cc_world_t *w);
void cc_test_mixed_group(cc_world_t *w);
void cc_test_split(cc_world_t *w);
void cc_test_shrink(cc_world_t *w);
void cc_test_nonblocking(cc_world_t *w);
void cc_test_api(cc_world_t *w);
void cc_test_debug(cc_world_t *w);
void cc_test_narrow(cc_world_t *w);
void cc_test_v(cc_world_t *w);
/* A section's last word: rank 0 prints how many cases it ran; a rank that ran none fails. */
void cc_section_done(const cc_world_t *w, const char *section, long cases);
/* ncclCommFinalize (grouped when one thread holds several) then ncclCommDestroy. */
void cc_comms_close(const cc_world_t *w, ncclComm_t *comms, int n, int nonblocking);
extern int cc_skip_finalize;   /* -F: destroy without finalize (to isolate a finalize bug) */

/* Counts to try: 0, 1, 7, 1001 and (unless quick) a large one. */
int cc_counts(const cc_world_t *w, size_t *counts);
#define CC_LARGE_COUNT ((size_t)1500007)

#endif
