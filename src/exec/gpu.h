/*
 * The GPU engine: device calls between the ranks of one host run as work on a stream,
 * queued by the calling thread; no host thread is in their data path (the host engine,
 * src/exec/exec.c, runs everything else: host buffers on the calling thread, and device
 * calls with network peers or bucket plans' views on the proxy thread).
 *
 * A job (a call, or a group's calls of the communicator) whose calls are all on one
 * stream, in a submission of no other communicator's job, runs on that stream, as NCCL
 * runs on its caller's: nothing joins it. Any other (calls on several streams; a group of
 * several communicators, which one thread may drive on one stream) runs on the
 * communicator's own stream, joined to the callers' by an event and a wait on a word:
 *
 *   calling thread (ncclAllReduce, ncclGroupEnd)       the job's stream
 *    [event recorded on each caller's stream  ------>  waits for those events]
 *     for each slice-step, in lower.h's order:         done >= the last job's target (the
 *                                                        first), progress = job started
 *       waits on this rank's own counters  --------->  head >= k + 1 / tail >= k + 1 - nslots
 *       one kernel: slot and/or user buffer in,        copy or reduce a whole slice (a
 *         user buffer and/or the peer's slot out          FIFO slot, MiB)
 *       posts into the peers' counters  ------------>  head = k + 1 / tail = k + 1
 *    [the callers' streams wait on a word  <--------]  done = release = the job's target
 *   the proxy thread watches the job (src/core/proxy.c)
 *
 * The first wait orders a communicator's jobs whatever streams they are on: a FIFO's
 * messages are numbered in the order the calls came.
 * Counters and FIFOs are the p2p transport's (transports/transport.h: braid_dconn_t). The
 * stream also writes a progress mark after each slice-step's waits and after its posts,
 * into pinned host memory, so that a watcher sees where a job stands without asking the
 * device: which step waits for which peer, or that a kernel never ended.
 *
 * Nothing a driver serialises behind its lock runs while the engine's work is in flight,
 * but for the scratch of an algorithm that needs more than the engine keeps (made on the
 * calling thread before anything is queued, as with the host engine's proxy): the
 * engine's stream, events, words and kernels are made with the communicator.
 */
#ifndef BRAID_EXEC_GPU_H
#define BRAID_EXEC_GPU_H

#include <stdint.h>

#include "device/device.h"
#include "exec/exec.h"
#include "transports/transport.h"

typedef struct braid_gpu braid_gpu_t;

#define BRAID_GPU_MAX_STREAMS 16    /* callers' streams in one job */

/* A lowered job: what the caller's streams wait for (braid_gpu_join) and the watcher
 * watches (braid_gpu_where). */
typedef struct braid_gpu_job {
    uint32_t target;                /* done >= target: the job's work has finished */
    uint32_t mark0;                 /* the progress mark its stream writes when it starts */
    void *streams[BRAID_GPU_MAX_STREAMS];   /* that wait for it (none: it runs on the */
    int nstreams;                           /* caller's stream) */
} braid_gpu_job_t;

/* The engine of a communicator's rank, made on this thread, in its current context, for
 * device `ordinal` (kernels loaded, streams, events, pinned words, `scratch` bytes of
 * device scratch). send/recv: the transports' device FIFOs ([nranks]). */
braid_status_t braid_gpu_create(int ordinal, int rank, int nranks, braid_dconn_t **send,
                                braid_dconn_t **recv, size_t scratch, braid_gpu_t **g_p);
/* Free it once its stream is idle (waiting up to wait_s); returns 1 when it left its stream
 * and memory in place instead (work that never ends: the device is stuck). */
int braid_gpu_destroy(braid_gpu_t *g, double wait_s);

/* Queue the ops (device ops of the engine's communicator, built with their slice; a call
 * or one communicator's ops of a group) after the work queued so far on their callers'
 * streams and after the engine's last job: on their stream where they share one and the
 * submission is `alone` (no other communicator's job in it), else on the engine's.
 * Under the communicator's lock. On an error the connections are out of step: the
 * communicator must fail. */
braid_status_t braid_gpu_submit(braid_gpu_t *g, braid_op_t *const *ops, int n, int alone,
                                braid_gpu_job_t *job);
/* The job's callers' streams wait for it (where it runs on the engine's stream). Apart
 * from the submission, so that a group submits every communicator's job before any stream
 * waits (one thread driving several ranks on one stream would otherwise wait for
 * itself). */
braid_status_t braid_gpu_join(braid_gpu_t *g, const braid_gpu_job_t *job);

/* The slice-step a job's stream has reached, as its progress marks say. */
typedef struct braid_gpu_where {
    int started;                    /* 0: the stream has not reached the job (it waits for
                                     * the callers' streams, or earlier work) */
    int op, step;                   /* the slice-step it is at (op: index in the job) */
    int kernel;                     /* 1: its waits passed, its kernel has not ended */
    int peer;                       /* else: the peer whose counter it waits on, or -1 */
    size_t off, len;                /* the slice: bytes [off, off + len) of the step */
} braid_gpu_where_t;

/* Jobs done so far (the stream's word), and the progress mark (both change while the
 * device runs). */
uint32_t braid_gpu_done(const braid_gpu_t *g);
uint32_t braid_gpu_progress(const braid_gpu_t *g);
void braid_gpu_where(const braid_gpu_t *g, braid_op_t *const *ops, int n,
                     const braid_gpu_job_t *job, braid_gpu_where_t *w);
/* A message that did not match its receiver's call (its record, transport.h): 1 with *w
 * the job's slice-step that received it (w->peer: from whom) and the header and length
 * its sender gave it, 0 if the job met none. Such a step's kernel does nothing, and the
 * job holds the callers' streams until braid_gpu_mismatch_seen. */
int braid_gpu_mismatch(const braid_gpu_t *g, braid_op_t *const *ops, int n,
                       const braid_gpu_job_t *job, braid_gpu_where_t *w,
                       braid_msg_hdr_t *got_p, size_t *len_p);
void braid_gpu_mismatch_seen(braid_gpu_t *g);
/* After a failure (an abort, a dead peer, a timeout): let every wait the engine queued
 * pass (this rank's own counters set past every message queued, from a stream of its
 * own), and let the callers' streams go (the word they wait on set to the last target).
 * Results are undefined, as in NCCL. Call again while jobs are still in flight: a peer's
 * late post may lower a counter again. */
void braid_gpu_release(braid_gpu_t *g);
/* Some engine of the process but `except` has work in flight. */
int braid_gpu_busy(const braid_gpu_t *except);
/* Jobs queued so far (the last target). */
uint32_t braid_gpu_issued(const braid_gpu_t *g);
/* The device it runs on. */
int braid_gpu_ordinal(const braid_gpu_t *g);
/*
 * What the engine's device costs, timed on its stream (at init, before any job: the
 * tuner's device model, src/core/calib.c): per kernel launch and per batch of stream
 * memory operations (a write and a wait), queued back to back; per hand-over, a lap of
 * the ranks' ring of messages of no bytes over the connections, divided by the ranks (the
 * lap crosses between them, as a collective's messages do); per byte a slice's kernel
 * copies from this rank's own FIFO into a peer's, and per byte a reduction of two inputs
 * takes beyond a copy's, on `bytes` (half the FIFO, 4 MiB at most). Every rank of the
 * communicator times it at once, each timing after a sync(w->arg) of them all (a
 * barrier), so that ranks sharing a device share its memory's bandwidth as in a
 * collective. Each wait for the stream is bounded by w (a timeout marks the device stuck).
 */
typedef struct braid_gpu_rates {
    double launch_us, batch_us, handover_us;
    double copy_us_per_byte, reduce_us_per_byte;
    size_t bytes;
} braid_gpu_rates_t;

braid_status_t braid_gpu_measure(braid_gpu_t *g, braid_status_t (*sync)(void *arg),
                                 const braid_device_wait_t *w, braid_gpu_rates_t *r);

/* The bytes of every slice it moves (the FIFO slot, alike on every rank): ops' `slice`. */
size_t braid_gpu_slice(const braid_gpu_t *g);

#endif
