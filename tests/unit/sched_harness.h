/*
 * The harness of the schedule tests (test_sched.c, test_sched_faults.c): a test case is one
 * collective on n simulated ranks; the harness makes every rank's buffers and inputs, its
 * call for braid_sim_run (sim.h), runs it and compares every rank's output with a reference
 * the harness computes, exactly (see sched_harness.c for how the inputs keep it exact).
 */
#ifndef BRAID_TESTS_UNIT_SCHED_HARNESS_H
#define BRAID_TESTS_UNIT_SCHED_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "algorithms/sim.h"

/* ncclRedOp_t numbering for the first five; PREMULSUM stands for a ncclRedOpCreatePreMulSum
 * handle. */
enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG, OP_PREMULSUM, OP_NUM };

enum { ALIAS_NONE, ALIAS_SEND_IN_RECV, ALIAS_RECV_IN_SEND };

#define MAXR 17          /* ranks the shape tests go up to */
#define SH_MAXR 33       /* ranks a case may have (test_algos goes up to it) */
#define SENTINEL 0x5c

/* Many slices, FIFOs full all the time; then slices that straddle chunk ends elsewhere. */
extern const braid_sim_cfg_t sh_cfg_tight;
extern const braid_sim_cfg_t sh_cfg_odd;
/* Through braid_exec_run: only after the same call passed the checking loop (a deadlock
 * there would hang instead of failing). */
extern const braid_sim_cfg_t sh_cfg_wide;

typedef struct tcase {
    braid_coll_kind_t kind;
    braid_dtype_t dt;
    int op;
    int n, root, in_place;
    size_t count;
    braid_sim_cfg_t cfg;
    int random;             /* random floats: check that all ranks agree, not the values */
    const braid_algo_t *algo;   /* force this algorithm (NULL: the selector's choice) */
    braid_pull_t pull;      /* how the communicator may pull (from any size) */
    int premul_per_rank;    /* ncclPreMulSum with scalar rank + 1 on each rank */
    const struct braid_topo *topo;  /* the ranks' layout on hosts (NULL: one host) */
} tcase_t;

typedef struct rbuf {
    unsigned char *send_alloc, *recv_alloc;
    unsigned char *send, *recv;     /* as the call passes them (NULL allowed) */
    size_t send_bytes, recv_bytes;
    unsigned char *in;              /* copy of the input, kept for the reference */
    int alias;
    braid_sched_t *forced;          /* the forced algorithm's schedule, if any */
} rbuf_t;

/* A well-mixed 64-bit hash of three values. */
uint64_t sh_hash3(uint64_t a, uint64_t b, uint64_t c);

/* Whether the collective has a root (broadcast, reduce, gather, scatter). */
int sh_is_rooted(braid_coll_kind_t k);

/* Whether ncclAvg over n ranks is exact in dt (integers, or floats with n a power of two). */
int sh_avg_exact(braid_dtype_t dt, int n);

/* Rank r's input for tc: `elems` elements at p. */
void sh_fill_input(const tcase_t *tc, int r, unsigned char *p, size_t elems);

/* Rank r's buffers for tc, filled with its input (output poisoned); sh_rbuf_free frees them. */
void sh_rbuf_setup(const tcase_t *tc, int r, rbuf_t *rb);
void sh_rbuf_free(rbuf_t *rb);

/* One line naming the case, for failure messages. */
void sh_tc_describe(const tcase_t *tc, char *buf, size_t len);

/* Rank r's call of the case on buffers rb (with tc->algo: its schedule, kept in rb). */
void sh_tc_call(const tcase_t *tc, int r, rbuf_t *rb, braid_sim_call_t *c);

/* Run the case on every rank and check every output; fails the current test with the case's
 * description. A forced algorithm may decline the case only as an algorithm declines a call
 * (src/exec/sched.h): its builder returns BRAID_ERR_UNSUPPORTED and its cost function
 * BRAID_COST_NONE; the case is then counted as declined, not run. Any other failure of the
 * builder, or a decline its cost function does not share, fails the case. */
void sh_run_case(const tcase_t *tc);

/* Cases sh_run_case ran, and cases their forced algorithm declined, since the start. */
extern int sh_cases_run, sh_cases_declined;

/* Fail the current test if no case ran since sh_cases_run was `before` (every case of WHAT
 * declined, or none made). */
void sh_expect_cases(int before, const char *what);

/* Print "PROG: N cases run, M declined by their forced algorithm" and return rc, or 1 (with
 * a FAIL line) when no case ran: a selection that matches nothing must not pass. */
int sh_report(const char *prog, int rc);

#endif
