/*
 * soak: random collectives for minutes on 4 ranks over 2 emulated hosts, one rank killed on
 * the way, the survivors shrinking the communicator and going on (issue 21). Every result is
 * checked, and every rank watches its file descriptors and resident memory. Files:
 *
 *   soak.c       main: options, the fork launcher (tests/fault/fault_util.c), the report
 *   soak_rank.c  one rank: epochs of iterations, the kill, ncclCommShrink, leak probes
 *   soak_coll.c  the collectives of one iteration: drawn from the seed, issued on host or
 *                device buffers, checked against an exact reference
 *
 * Every rank draws the same sequence from the seed (one generator per epoch: after a shrink
 * the survivors start the next epoch's sequence wherever each of them noticed the death).
 */
#ifndef BRAID_TEST_SOAK_H
#define BRAID_TEST_SOAK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nccl.h"

#define SOAK_MAX_RANKS 4
#define SOAK_MAX_KILLS 2
#define SOAK_TEXT 512

typedef enum {
    SK_ALLREDUCE, SK_ALLGATHER, SK_REDUCESCATTER, SK_BROADCAST, SK_REDUCE, SK_ALLTOALL,
    SK_RING, SK_NKINDS
} soak_kind_t;

extern const char *const soak_kind_names[SK_NKINDS];

typedef struct soak_opts {
    double seconds;      /* how long the ranks issue collectives */
    uint64_t seed;
    int nranks, kills;
    int device;          /* device buffers (emulated or real CUDA driver) in some iterations */
    size_t max_bytes;    /* the largest buffer of one collective */
    int rss_report_only; /* report resident memory, do not judge it (sanitizer builds) */
    int kill_iter[SOAK_MAX_KILLS];   /* -K: kill i in this iteration of epoch i (0: by time) */
} soak_opts_t;

/* One kill, as the victim and the survivors saw it. */
typedef struct soak_kill {
    int planned;         /* the iteration is chosen (the ranks agreed on it) */
    int epoch, iter, phase;
    int delay_us;        /* phase 1: from the calls' issue to the kill */
    int victim;          /* rank in the world communicator of the launch */
    int victim_comm;     /* its rank in the communicator it died in */
    pid_t pid;
    volatile double t_kill;             /* CLOCK_MONOTONIC just before raise(SIGKILL) */
    volatile int died_in_iter;          /* the iteration its main thread was in */
} soak_kill_t;

/*
 * The heap over an epoch after its warm-up, sampled at every agreement (soak_heap_kb:
 * resident anonymous memory, or in a sanitizer build the bytes its allocator holds for the
 * program, since its quarantine keeps freed memory resident on purpose):
 * the peak of the first third of the samples and that of the last third, and the mean
 * iteration of each third. A leak of L bytes per iteration raises the second peak by L per
 * iteration between the thirds; the allocator's cached free memory, which comes and goes by
 * megabytes, moves both peaks alike.
 */
typedef struct soak_rss {
    int nsamples;
    long first_kb, last_kb;        /* the peaks */
    double first_iter, last_iter;  /* the thirds' mean iterations */
    long end_iter;
} soak_rss_t;

/* What each rank did and measured; written by the rank, read by the launcher at the end. */
typedef struct soak_stats {
    long iters, syncs, splits, groups, dev_iters, ops;
    long by_kind[SK_NKINDS];
    double bytes;                        /* bytes of every buffer handed to a call */
    int fd_start, fd_end;                /* every descriptor: before init, after the end */
    int fd_base[SOAK_MAX_KILLS + 1];     /* per epoch after warm-up: all but device memory */
    int dev_base[SOAK_MAX_KILLS + 1], dev_max[SOAK_MAX_KILLS + 1];   /* device memory */
    long rss_start_kb, rss_end_kb, shmem_end_kb;   /* soak_heap_kb, then shared resident */
    soak_rss_t rss[SOAK_MAX_KILLS + 1];            /* per epoch */
    double noticed_s[SOAK_MAX_KILLS], shrink_s[SOAK_MAX_KILLS];
    int noticed_iter[SOAK_MAX_KILLS];
    char noticed_how[SOAK_MAX_KILLS][SOAK_TEXT];
    char failed_how[SOAK_TEXT];          /* why it failed (soak_fail), repeated in the report */
    int done;                            /* finished and closed its communicator */
    int pid;                             /* the rank's process */
} soak_stats_t;

typedef struct soak_shared {
    soak_opts_t o;
    double t0;
    soak_kill_t kill[SOAK_MAX_KILLS];
    soak_stats_t st[SOAK_MAX_RANKS];
} soak_shared_t;

extern soak_shared_t *soak_sh;

/* ---- soak_rank.c ---- */
int soak_rank_main(int rank, int nranks);
/* Open file descriptors of this process (and, in *dev_p if not NULL, how many of them are
 * device memory of braid's emulated CUDA driver); a field of /proc/self/status in KiB
 * ("RssAnon", "RssShmem"), -1 if unknown. */
int soak_fd_count(int *dev_p);
long soak_rss_kb(const char *field);
long soak_heap_kb(void);
int soak_heap_exact(void);   /* 1: soak_heap_kb is the sanitizer's count, else RssAnon */

/* ---- soak_coll.c ---- */
uint64_t soak_rng(uint64_t *state);

/* A communicator as one iteration's collectives see it. */
typedef struct soak_comm {
    ncclComm_t comm;
    int rank, nranks;
} soak_comm_t;

/* Where the rank is ("epoch 1 iteration 52"), for failure messages. */
extern char soak_where[96];
/* Fail this rank: the text goes to stderr and to its soak_stats_t.failed_how (the launcher
 * repeats it where a log's tail shows it), and the process exits with status 1. */
void soak_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Set before the calls of an iteration are issued: the victim's killer thread waits for it. */
extern volatile int soak_in_call;

/* Buffers for the largest iteration (and their device twins when o->device). 0 or -1. */
int soak_coll_setup(const soak_opts_t *o);
/*
 * One iteration on c: a single collective or a group of several, drawn from *rng (the same
 * number of draws on every rank whatever c is), on device buffers when `device`. A result
 * that differs from the reference ends the process (exit 1) with a message; an error of a
 * call (or the communicator's asynchronous error) is returned, with nothing checked.
 */
ncclResult_t soak_coll_iter(const soak_comm_t *c, uint64_t *rng, int device, soak_stats_t *st);
/* An all-reduce (max) of nv int32 values on host buffers, for the ranks' agreements. */
ncclResult_t soak_coll_agree(const soak_comm_t *c, int32_t *v, int nv);

#endif
