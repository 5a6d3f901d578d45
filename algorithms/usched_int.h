/*
 * User schedules, inside: the parsed form of a schedule file and what its three parts share.
 *
 *   usched_parse.c   the file's text into a us_sched_t, each step checked on its own line
 *   usched_prove.c   the checks of the whole: sends matched with receives, then every
 *                    rank's schedule run in the simulator (algorithms/sim.h)
 *   usched.c         loading (parse, prove, register) and the algorithm-table entry
 *   usched_take.c    which calls a loaded schedule takes, and its hash
 *
 * An error at load is written into the load's us_parse_t (braid_usched_fail), naming the
 * file and the line, and reported once by braid_usched_load.
 */
#ifndef BRAID_ALGORITHMS_USCHED_INT_H
#define BRAID_ALGORITHMS_USCHED_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "algorithms/usched.h"

#define US_MAX_RANKS 1024
#define US_MAX_CHUNKS 4096

typedef struct us_reg {
    uint8_t buf;        /* BRAID_BUF_NONE, SEND ("in"), RECV ("out"), SCRATCH */
    int chunk;          /* first chunk */
} us_reg_t;

typedef struct us_step {
    int recv, send;     /* peers, -1: none */
    uint32_t flags;     /* BRAID_STEP_* */
    us_reg_t src, dst;
    int nchunks;
    int line;
} us_step_t;

typedef struct us_sched {
    braid_algo_t algo;          /* its entry in the algorithm table */
    char name[32];
    char path[256];
    braid_coll_kind_t kind;
    int nranks, chunks, scratch;
    int name_line;
    int in_place;               /* runs in-place calls too (proved at load) */
    int retired;
    uint64_t hash;              /* of the file's text */
    us_step_t **steps;          /* [rank][i] */
    int *nsteps;
} us_sched_t;

/* One load's context: the file, the line being read, and where its error goes. */
typedef struct us_parse {
    const char *path;
    int line;
    char *err;
    size_t errlen;
} us_parse_t;

/* Chunks of a buffer for the schedule's collective: in = the send buffer, out = receive. */
static inline int us_buf_chunks(const us_sched_t *u, uint8_t buf)
{
    int n = u->nranks, c = u->chunks;
    switch (buf) {
    case BRAID_BUF_SEND:
        return u->kind == BRAID_COLL_ALLREDUCE || u->kind == BRAID_COLL_ALLGATHER ? c : n * c;
    case BRAID_BUF_RECV:
        return u->kind == BRAID_COLL_ALLREDUCE || u->kind == BRAID_COLL_REDUCESCATTER ? c
                                                                                     : n * c;
    case BRAID_BUF_SCRATCH:
        return u->scratch;
    default:
        return 0;
    }
}

/* Write the load's error ("schedule file PATH, line N: ...", no line where `line` is 0)
 * into p->err; BRAID_ERR_INVALID. */
__attribute__((format(printf, 3, 4)))
braid_status_t braid_usched_fail(us_parse_t *p, int line, const char *fmt, ...);

/* Parse the file open at `f` into `u` (zeroed, its path set); *hash_p: a hash of its text.
 * On error `u` may hold steps already read: the caller frees it. (usched_parse.c) */
braid_status_t braid_usched_file_parse(us_parse_t *p, FILE *f, us_sched_t *u, uint64_t *hash_p);

/* Free a schedule (NULL is fine), its steps too. (usched_parse.c) */
void braid_usched_sched_free(us_sched_t *u);

/* The k-th send from a to b is the k-th receive at b from a, of the same size. */
braid_status_t braid_usched_sends_match(us_parse_t *p, const us_sched_t *u);

/* Run every rank's schedule in the simulator and check the outputs; sets u->in_place to
 * whether it also runs in place. (usched_prove.c) */
braid_status_t braid_usched_sim_prove(us_parse_t *p, us_sched_t *u);

/* Whether the schedule takes the call: its collective and ranks, a count its chunks divide,
 * in place only where proved so. (usched_take.c) */
int braid_usched_takes(const us_sched_t *u, const braid_coll_t *c);

/* Rank c->rank's schedule of the call, or BRAID_ERR_UNSUPPORTED where the schedule does
 * not take the call. (usched.c) */
braid_status_t braid_usched_rank_build(const us_sched_t *u, const braid_coll_t *c,
                                       braid_sched_t *s);

#endif
