/*
 * The flight recorder: each communicator keeps its last BRAID_FLIGHT_RECORDER operations
 * (collectives, sends and receives, group members, device calls and plan buckets) in a
 * ring of fixed-size records, allocated at init, and dumps them (text and JSON lines, to
 * BRAID_FLIGHT_RECORDER_FILE or the log) on a collective timeout, a peer's failure, an
 * abort, SIGUSR1 and a fatal signal. tools/braid-flight merges the dumps of all ranks.
 *
 * Cost: recording takes no lock, no allocation and no clock reading of its own on the path
 * of a call that does not wait. An op's start and end times are taken only once the
 * executor has read the clock for it (it does so lazily: an op that waited or moved many
 * slices); a call that completes at once is recorded without times. Device and plan ops,
 * which wait for the proxy, also get their enqueue time.
 *
 * Concurrency: an op's record is written by the thread that enqueues it (queued) and the
 * thread that runs it (running, progress, end); dumps read records from any thread or a
 * signal handler. Every field is a relaxed atomic; a record being reused for a newer op is
 * recognised by its id (a seqlock), so a dump never shows a half-written record.
 */
#ifndef BRAID_CORE_FLIGHT_H
#define BRAID_CORE_FLIGHT_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/status.h"
#include "base/time.h"
#include "exec/exec.h"

typedef enum {
    BRAID_FLIGHT_QUEUED = 1,    /* built, waiting for its group's end or the proxy */
    BRAID_FLIGHT_RUNNING,       /* in the executor: step k of m, waiting on a peer */
    BRAID_FLIGHT_DONE,
    BRAID_FLIGHT_FAILED,        /* with the status */
} braid_flight_state_t;

#define BRAID_FLIGHT_DEVICE 0x1     /* record flag: a device op, run by the proxy */

/* What a device op waits for besides a peer (waits_on): braid's own kernels of a step on
 * its GPU, or, before it starts, the work queued on the caller's stream before the call. */
#define BRAID_FLIGHT_WAITS_GPU (-2)
#define BRAID_FLIGHT_WAITS_STREAM (-3)

/* One operation. Times are CLOCK_MONOTONIC microseconds, 0 where not taken. */
typedef struct braid_flight_rec {
    _Atomic uint64_t id;        /* 1 + the op's index on its comm; 0 while (re)written */
    _Atomic uint64_t seq;       /* collective number, or send/recv number with that peer */
    _Atomic uint64_t count;
    _Atomic uint32_t call;      /* the message header's kind | dtype << 8 | op << 16 |
                                 * algo << 24 */
    _Atomic int32_t root;       /* root of the call, or the peer of a send/recv; -1: none */
    _Atomic int32_t state;      /* braid_flight_state_t */
    _Atomic int32_t status;     /* braid_status_t of a failed op */
    _Atomic int32_t step, nsteps;
    _Atomic int32_t waits_on;   /* the peer a running op waited for at its last check, or
                                 * BRAID_FLIGHT_WAITS_GPU / _STREAM */
    _Atomic int32_t flags;      /* BRAID_FLIGHT_DEVICE */
    _Atomic uint64_t t_enq, t_start, t_check, t_end;
} braid_flight_rec_t;

typedef struct braid_flight braid_flight_t;

/* The ring of a communicator of `nranks` ranks, or NULL (*f_p) when BRAID_FLIGHT_RECORDER
 * is 0; registers it for the signal handlers, which it installs on first use. */
braid_status_t braid_flight_create(int rank, int nranks, uint64_t nonce, const char *name,
                                   braid_flight_t **f_p);
/* Unregister (waiting for a signal handler that reads it) and free; NULL is fine. */
void braid_flight_destroy(braid_flight_t *f);

/* Record a built op as queued; `timed`: it waits for the proxy, take its enqueue time.
 * The op keeps its record (op->flight_rec, flight_id). */
void braid_flight_queued(braid_flight_t *f, braid_op_t *op, int timed);
/* Take back the newest record (an op of a dropped group, whose sequence number was given
 * back): the next op reuses it. */
void braid_flight_unqueue(braid_flight_t *f, braid_op_t *op);
/* A running op's progress (step, the peer it waits on or BRAID_FLIGHT_WAITS_*, the time):
 * at its checks. The first says so in the log (INFO, COLL) where the op waits on a peer. */
void braid_flight_progress(const braid_op_t *op, int waits_on);

/*
 * Dump every record of f. `why`: what made it dump ("timeout", "peer failure", "abort",
 * "SIGUSR1", ...); `detail`: the error text, or NULL. Async-signal-safe when `in_signal`
 * (text formatted here, written with write(2); without a file, to the log's descriptor
 * instead of through the logger).
 */
void braid_flight_dump(braid_flight_t *f, const char *why, const char *detail, int in_signal);

/* The op's record, while it is still the op's (a ring that wrapped reused it). */
static inline braid_flight_rec_t *braid_flight_rec(const braid_op_t *op)
{
    braid_flight_rec_t *r = op->flight_rec;
    if (r == NULL || atomic_load_explicit(&r->id, memory_order_relaxed) != op->flight_id)
        return NULL;
    return r;
}

static inline uint64_t braid_flight_us(double t)
{
    return t > 0 ? (uint64_t)(t * 1e6) : 0;
}

/* The executor took the op. */
static inline void braid_flight_running(braid_op_t *op)
{
    braid_flight_rec_t *r = braid_flight_rec(op);
    if (r != NULL)
        atomic_store_explicit(&r->state, BRAID_FLIGHT_RUNNING, memory_order_relaxed);
}

/* The op ended with st (st < 0: failed). Its times are taken only where the executor read
 * the clock for it (op->first_clock), or on failure. */
static inline void braid_flight_end(braid_op_t *op, braid_status_t st)
{
    braid_flight_rec_t *r = braid_flight_rec(op);
    if (r == NULL)
        return;
    if (op->first_clock > 0 || st < 0) {
        atomic_store_explicit(&r->t_start, braid_flight_us(op->first_clock),
                              memory_order_relaxed);
        atomic_store_explicit(&r->t_end, braid_flight_us(braid_now()), memory_order_relaxed);
    }
    if (st < 0)
        atomic_store_explicit(&r->status, st, memory_order_relaxed);
    else
        atomic_store_explicit(&r->step, op->sched.nsteps, memory_order_relaxed);
    atomic_store_explicit(&r->state, st < 0 ? BRAID_FLIGHT_FAILED : BRAID_FLIGHT_DONE,
                          memory_order_relaxed);
}

#endif
