/*
 * The watch of a GPU engine job, on its communicator's proxy thread (src/exec/gpu.h): no
 * host thread moves its data, but one sees that it ends, within BRAID_TIMEOUT, and says
 * why when it does not.
 *
 * The watcher reads the job's words in pinned memory: `done` (the job ended) and the
 * progress mark (which slice-step the stream has reached, and whether that step waits for
 * a peer or for its own kernel). While the stream waits for a peer, the peers are checked
 * as the host engine checks them (comm_health.c: a dead, failed or aborted peer fails the
 * call naming it; mismatched calls are named; after BRAID_TIMEOUT without progress the
 * ranks that have not reached the call are named); while it waits for the callers'
 * streams or its own kernel, after BRAID_TIMEOUT the call fails saying so. On any
 * failure, or an abort from another thread, the communicator fails and the engine is
 * released (braid_gpu_release: every wait it queued passes, and the callers' streams
 * go), so nothing braid made wait waits for ever.
 */
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "base/log.h"
#include "base/param.h"
#include "core/comm.h"
#include "core/flight.h"
#include "core/gpu_watch.h"
#include "device/device.h"
#include "exec/lower.h"

#define WATCH_CHECK_S 0.01          /* abort and device waits: checked this often */
#define WATCH_RELEASE_FAST_S 0.02   /* after a failure: the release is repeated every ms
                                     * this long, then every 10 ms */

typedef struct watch {
    braid_comm_t *comm;
    braid_gpu_t *g;
    braid_op_t **ops;
    int n;
    const braid_gpu_job_t *job;
    braid_gpu_pace_t *pace;
    uint32_t progress;              /* the last mark seen */
    double since;                   /* when it last changed */
} watch_t;

static int watch_done(const watch_t *w)
{
    return (int32_t)(braid_gpu_done(w->g) - w->job->target) >= 0;
}

/* The op the stream is in, its step set where it stands (for the health checks, which
 * name the peer of op->step, and the flight recorder). */
static braid_op_t *watch_where(watch_t *w, braid_gpu_where_t *where)
{
    braid_gpu_where(w->g, w->ops, w->n, w->job, where);
    braid_op_t *op = w->ops[where->op >= 0 ? where->op : 0];
    if (where->step >= 0)
        op->step = where->step;
    if (op->first_clock == 0 && where->started)
        op->first_clock = braid_now();
    return op;
}

/* The checks of one pass, when their time has come. */
static braid_status_t watch_check(watch_t *w, double now)
{
    braid_gpu_where_t where;
    braid_op_t *op = watch_where(w, &where);
    double waited = now - w->since, timeout = (double)braid_param_int(BRAID_P_TIMEOUT);
    if (where.kernel) {   /* a kernel that never ends: the device is stuck for good */
        braid_status_t st = braid_comm_device_wait(w->comm, op, BRAID_FLIGHT_WAITS_GPU, waited);
        if (st == BRAID_ERR_TIMEOUT)
            braid_device_set_stuck();
        return st;
    }
    if (!where.started)
        return braid_comm_device_wait(w->comm, op, BRAID_FLIGHT_WAITS_STREAM, waited);
    const braid_exec_hooks_t *h = &braid_comm_exec_hooks;
    int peers = now >= w->pace->next_peers;   /* else only an abort or revoke is looked for */
    if (peers)
        w->pace->next_peers = now + (double)braid_param_int(BRAID_P_CHECK_PEERS_MS) * 1e-3;
    BRAID_CHECK(h->check(w->comm, op, peers));
    if (timeout > 0 && waited > timeout)
        return h->stalled(w->comm, op, waited);
    return BRAID_OK;
}

/* The watcher is in no job's data path (the callers' streams wait on the device, not on
 * it): it sleeps between looks, 50 us at first, doubling to 1.6 ms over a run of jobs
 * (braid_gpu_pace_t), leaving the CPUs to the ranks and the runtime's threads (on a 2-core
 * machine, a watcher that looked every 20 us slowed a 16 MiB all-reduce's kernels by half;
 * one that began at 50 us again for each job of a stream of 8-byte calls woke once a
 * call, on the CPU of the stream that ran them). */
static void watch_pause(unsigned looks)
{
    unsigned shift = looks / 2;
    struct timespec ts = { 0, 50000L << (shift < 5 ? shift : 5) };   /* 50 us .. 1.6 ms */
    nanosleep(&ts, NULL);
}

/* A message that did not match the call that received it: named as the host engine names
 * it, both sides. Unless a peer failed: a failed rank's released stream runs on, and may
 * have sent it (the failure, as on the host engine, is what the others report). */
static braid_status_t watch_mismatch(watch_t *w)
{
    braid_gpu_where_t where;
    braid_msg_hdr_t got;
    size_t got_len;
    if (!braid_gpu_mismatch(w->g, w->ops, w->n, w->job, &where, &got, &got_len))
        return BRAID_OK;
    braid_op_t *op = w->ops[where.op];
    op->step = where.step;
    braid_status_t st = braid_comm_exec_hooks.check(w->comm, op, 1);
    if (st == BRAID_OK)
        st = braid_exec_msg_check(op, where.peer, &got, got_len, where.len,
                                  where.off / op->slice);
    if (st == BRAID_OK)   /* a record that differs from its own call's in nothing shown */
        st = braid_err(BRAID_ERR_INTERNAL, "rank %d: a message from rank %d failed its check "
                       "though it matches the call", w->comm->rank, where.peer);
    braid_flight_dump(w->comm->flight, "mismatch", braid_err_last(), 0);
    return st;
}

static braid_status_t watch_run(watch_t *w)
{
    w->since = braid_now();
    w->progress = braid_gpu_progress(w->g);
    while (!watch_done(w)) {
        uint32_t p = braid_gpu_progress(w->g);
        double now = braid_now();
        if (p != w->progress) {
            w->progress = p;
            w->since = now;
        }
        if (now >= w->pace->next_check) {
            w->pace->next_check = now + WATCH_CHECK_S;
            BRAID_CHECK(watch_mismatch(w));
            BRAID_CHECK(watch_check(w, now));
        }
        watch_pause(w->pace->looks);
        w->pace->looks += w->pace->looks < 16;
    }
    return watch_mismatch(w);   /* its kernel wrote the mark before the job's end */
}

/* After a failure: release the engine until the job has passed on the device. Once is not
 * enough: a released peer's late post may block a wait again, and a kernel that reads a
 * message a dead or released peer never wrote marks a mismatch, which holds the job's end;
 * and the job may be on its caller's stream, which nothing else lets go. Up to
 * BRAID_TIMEOUT (an abort takes over sooner: the engine's destroy repeats it as it waits,
 * a second at most), so a job its stream never reaches (the caller's work before it never
 * ends) does not hold the proxy for ever. */
static void watch_release(watch_t *w)
{
    double t0 = braid_now(), limit = (double)braid_param_int(BRAID_P_TIMEOUT);
    for (;;) {
        braid_gpu_release(w->g);
        double t = braid_now() - t0;
        if (watch_done(w) || atomic_load(&w->comm->state) == BRAID_COMM_ABORTED ||
            (limit > 0 && t > limit))
            return;
        struct timespec ts = { 0, t < WATCH_RELEASE_FAST_S ? 1000000 : 10000000 };
        nanosleep(&ts, NULL);
    }
}

braid_status_t braid_comm_gpu_watch(braid_comm_t *comm, braid_gpu_pace_t *pace,
                                    braid_op_t **ops, int n, const braid_gpu_job_t *job,
                                    braid_status_t st)
{
    watch_t w = { .comm = comm, .g = comm->gpu, .ops = ops, .n = n, .job = job,
                  .pace = pace };
    for (int i = 0; i < n; i++)
        braid_flight_running(ops[i]);
    if (st == BRAID_OK)
        st = watch_run(&w);
    if (st < 0) {
        braid_comm_set_error(comm, st);
        watch_release(&w);
    }
    for (int i = 0; i < n; i++) {
        braid_op_t *op = ops[i];
        if (st == BRAID_OK && !braid_lower_is_p2p(op))
            braid_comm_publish(comm, 0, op->hdr.seq);
        braid_flight_end(op, st);
        op->bufs[BRAID_BUF_SCRATCH] = NULL;     /* the engine's */
        braid_op_finish(op);
        braid_comm_leave(comm);
        free(op);
    }
    return st;
}
