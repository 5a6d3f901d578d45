/*
 * What a waiting rank checks, and what it says when it gives up.
 *
 * While an operation waits, its communicator is checked every BRAID_CHECK_PEERS_MS: a local
 * abort or revoke stops it; a peer that has not finished this collective and has aborted,
 * failed, destroyed its communicator or died (gone, zombie, or its pid reused) makes it fail
 * with ncclRemoteError naming that rank. After BRAID_TIMEOUT seconds without progress the
 * operation fails naming the ranks that have not reached it, on every host: the ranks of
 * this host are read in shared memory, those of other hosts are asked over their health
 * links (transports/transport.h: peer health). A device call that waits for its GPU or
 * its stream is checked the same way (braid_comm_device_wait): an abort stops it, and
 * after BRAID_TIMEOUT it fails saying which never finished.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/comm.h"
#include "core/flight.h"
#include "base/log.h"
#include "base/param.h"

static int op_is_p2p(const braid_op_t *op)
{
    return op->hdr.kind == BRAID_COLL_SEND || op->hdr.kind == BRAID_COLL_RECV;
}

/* The peer the op waits on right now, or -1. */
static int op_waits_on(const braid_op_t *op)
{
    if (op->step >= op->sched.nsteps)
        return -1;
    const braid_step_t *st = &op->sched.steps[op->step];
    return st->recv_peer >= 0 ? st->recv_peer : st->send_peer;
}

/* The call's size: its count in elements of the op's type, as bytes. */
static unsigned long long op_bytes(const braid_op_t *op)
{
    return (unsigned long long)op->hdr.count * braid_dtype_size(op->dtype);
}

/* Has rank r finished this op's collective? Then whatever it does now is its own. */
static int peer_finished(const braid_peer_health_t *h, const braid_op_t *op)
{
    return !op_is_p2p(op) && h->known && h->seq_done >= op->hdr.seq;
}

/*
 * How long a diagnosis waits for remote ranks to say how far they are. A rank inside a
 * call on the communicator answers at its next check (every BRAID_CHECK_PEERS_MS); one
 * that is not does not answer at all.
 */
static double diag_wait_s(void)
{
    return 2.0 + 3e-3 * (double)braid_param_int(BRAID_P_CHECK_PEERS_MS);
}

/* Ask every peer how far it is, and wait until all have answered or diag_wait_s passed. */
static void peers_ask(braid_comm_t *comm)
{
    braid_peer_health_t h;
    double until = braid_now() + diag_wait_s();
    for (int r = 0; r < comm->nranks; r++)
        if (r != comm->rank)
            braid_comm_peer_ask(comm, r);
    for (;;) {
        int unknown = 0;
        for (int r = 0; r < comm->nranks; r++) {
            if (r == comm->rank)
                continue;
            braid_comm_peer(comm, r, &h);   /* also answers the peers that ask us */
            unknown += !h.known && !h.gone;
        }
        if (unknown == 0 || braid_now() >= until)
            return;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

/* "2 (last started #11), 5 (pid 7 on b: no answer, ...)" for the ranks, on every host,
 * that have not started collective `seq`. */
static int missing_ranks(braid_comm_t *comm, uint64_t seq, char *buf, size_t len)
{
    size_t used = 0;
    int count = 0;
    buf[0] = '\0';
    peers_ask(comm);
    for (int r = 0; r < comm->nranks && used + 96 < len; r++) {
        braid_peer_health_t h;
        if (r == comm->rank)
            continue;
        braid_comm_peer(comm, r, &h);
        if (h.known && h.seq_started >= seq)
            continue;
        if (h.known)
            used += (size_t)snprintf(buf + used, len - used, "%s%d (last started #%llu)",
                                     count ? ", " : "", r, (unsigned long long)h.seq_started);
        else
            used += (size_t)snprintf(buf + used, len - used, "%s%d (pid %d on %s: no answer, "
                                     "not in a call on this communicator)", count ? ", " : "",
                                     r, (int)comm->peers[r].pid, comm->peers[r].hostname);
        count++;
    }
    return count;
}

/* The word for rank r's failed/aborted/... state, NULL while it is fine or done with us. */
static const char *peer_failed(braid_comm_t *comm, const braid_op_t *op, int r)
{
    braid_peer_health_t h;
    braid_comm_peer(comm, r, &h);
    return peer_finished(&h, op) ? NULL : braid_peer_state_word(h.state);
}

/*
 * Is rank r, which has not finished this op's collective, gone? (its process dead — gone,
 * zombie, or its pid reused — or, on another host, its process or the host or link lost)
 * *why_p says how, and *said_p whether it announced a failure first.
 */
static int peer_dead(braid_comm_t *comm, const braid_op_t *op, int r, const char **why_p,
                     int *said_p)
{
    braid_peer_health_t h;
    braid_comm_peer(comm, r, &h);
    if (!h.gone || peer_finished(&h, op))
        return 0;
    *why_p = h.why;
    *said_p = h.gone == 2;
    return 1;
}

/*
 * Gone ranks are named first, all of them, those that died without a word before those that
 * announced a failure (the others that failed have usually only given up on them).
 * A rank that failed (also one that said so, or that it aborted, before it exited) is
 * reported with the ranks that never reached the collective, since a timeout on one rank
 * is what ends the wait of the others.
 */
static braid_status_t check_peers(braid_comm_t *comm, const braid_op_t *op, int lo, int hi)
{
    const char *what = braid_coll_name((braid_coll_kind_t)op->hdr.kind);
    unsigned long long seq = (unsigned long long)op->hdr.seq;
    char missing[1024];
    char others[256] = "";
    size_t used = 0;
    int first = -1, first_said = 0, count = 0;
    const char *first_why = NULL;
    for (int pass = 0; pass < 2 && first < 0; pass++) {
        for (int r = lo; r < hi; r++) {
            const char *why;
            int said;
            if (r == comm->rank || !peer_dead(comm, op, r, &why, &said) || said != pass)
                continue;
            if (first < 0) {
                first = r;
                first_why = why;
                first_said = said;
            } else if (used + 16 < sizeof(others)) {
                used += (size_t)snprintf(others + used, sizeof(others) - used, "%s%d",
                                         count > 1 ? ", " : "", r);
            }
            count++;
        }
    }
    if (first >= 0) {
        int nmiss = first_said && !op_is_p2p(op) ? missing_ranks(comm, op->hdr.seq, missing,
                                                                 sizeof(missing)) : 0;
        return braid_err(BRAID_ERR_REMOTE, "rank %d (pid %d on %s) %s%s%s%s%s while rank %d "
                         "waits in %s #%llu%s%s%s", first, (int)comm->peers[first].pid,
                         comm->peers[first].hostname, first_why,
                         first_said ? " and exited" : "", count > 1 ? "; so did rank" : "",
                         count > 2 ? "s " : count > 1 ? " " : "", others, comm->rank, what, seq,
                         nmiss ? "; ranks " : "", nmiss ? missing : "",
                         nmiss ? " have not reached it" : "");
    }
    for (int r = lo; r < hi; r++) {
        const char *word = r != comm->rank ? peer_failed(comm, op, r) : NULL;
        if (word == NULL)
            continue;
        int nmiss = op_is_p2p(op) ? 0 : missing_ranks(comm, op->hdr.seq, missing,
                                                      sizeof(missing));
        return braid_err(BRAID_ERR_REMOTE, "rank %d (pid %d on %s) %s while rank %d waits in "
                         "%s #%llu%s%s%s", r, (int)comm->peers[r].pid, comm->peers[r].hostname,
                         word, comm->rank, what, seq, nmiss ? "; ranks " : "",
                         nmiss ? missing : "", nmiss ? " have not reached it" : "");
    }
    return BRAID_OK;
}

/* Ranks whose calls differ may send each other nothing (they disagree on a root): compare
 * the call each peer published for this op's number with the op's own. */
static braid_status_t check_calls(braid_comm_t *comm, const braid_op_t *op)
{
    braid_msg_hdr_t h;
    for (int r = 0; r < comm->nranks; r++)
        if (r != comm->rank && braid_comm_peer_call(comm, r, &h))
            BRAID_CHECK(braid_exec_call_differs(op, r, &h));
    return BRAID_OK;
}

/* An abort or revoke of the op's communicator stops it. */
static braid_status_t comm_stopped(braid_comm_t *comm, const braid_op_t *op)
{
    int s = atomic_load(&comm->state);
    if (s == BRAID_COMM_ABORTED || s == BRAID_COMM_REVOKED)
        return braid_err(BRAID_ERR_ABORTED, "%s #%llu stopped: the communicator (rank %d) was "
                         "%s", braid_coll_name((braid_coll_kind_t)op->hdr.kind),
                         (unsigned long long)op->hdr.seq, comm->rank,
                         s == BRAID_COMM_ABORTED ? "aborted" : "revoked");
    return BRAID_OK;
}

static braid_status_t comm_check(void *ctx, const braid_op_t *op, int blocked)
{
    braid_comm_t *comm = ctx;
    BRAID_CHECK(comm_stopped(comm, op));
    braid_flight_progress(op, op_is_p2p(op) ? op->p2p_peer : op_waits_on(op));
    if (!blocked)
        return BRAID_OK;
    braid_status_t st = BRAID_OK;
    if (op_is_p2p(op)) {
        int peer = op->p2p_peer;
        if (peer >= 0 && peer != comm->rank)
            st = check_peers(comm, op, peer, peer + 1);
    } else {
        st = check_peers(comm, op, 0, comm->nranks);
        if (st == BRAID_OK && (st = check_calls(comm, op)) < 0) {
            braid_flight_dump(comm->flight, "mismatch", braid_err_last(), 0);
            return st;
        }
    }
    if (st < 0)
        braid_flight_dump(comm->flight, "peer failure", braid_err_last(), 0);
    return st;
}

static braid_status_t stalled_err(braid_comm_t *comm, const braid_op_t *op, double waited)
{
    const char *what = braid_coll_name((braid_coll_kind_t)op->hdr.kind);
    unsigned long long seq = (unsigned long long)op->hdr.seq;
    unsigned long long count = (unsigned long long)op->hdr.count, bytes = op_bytes(op);
    int peer = op_waits_on(op);
    char missing[1024];

    if (op_is_p2p(op))
        return braid_err(BRAID_ERR_TIMEOUT, "%s #%llu (count %llu, %llu bytes) with rank %d made "
                         "no progress for %.0f s (BRAID_TIMEOUT): rank %d has not made the "
                         "matching call", what, seq, count, bytes, peer, waited, peer);
    if (missing_ranks(comm, op->hdr.seq, missing, sizeof(missing)) > 0)
        return braid_err(BRAID_ERR_TIMEOUT, "%s #%llu (count %llu, %llu bytes) made no progress "
                         "for %.0f s (BRAID_TIMEOUT) on rank %d: ranks %s have not reached it",
                         what, seq, count, bytes, waited, comm->rank, missing);
    return braid_err(BRAID_ERR_TIMEOUT, "%s #%llu (count %llu, %llu bytes) made no progress "
                     "for %.0f s (BRAID_TIMEOUT) on rank %d: every rank has started it; rank %d "
                     "is waiting for rank %d", what, seq, count, bytes, waited, comm->rank,
                     comm->rank, peer);
}

static braid_status_t comm_stalled(void *ctx, const braid_op_t *op, double waited)
{
    braid_comm_t *comm = ctx;
    braid_flight_progress(op, op_is_p2p(op) ? op->p2p_peer : op_waits_on(op));
    braid_status_t st = stalled_err(comm, op, waited);
    braid_flight_dump(comm->flight, "timeout", braid_err_last(), 0);
    return st;
}

braid_status_t braid_comm_device_wait(braid_comm_t *comm, const braid_op_t *op, int what,
                                      double waited)
{
    BRAID_CHECK(comm_stopped(comm, op));
    braid_flight_progress(op, what);
    double timeout = (double)braid_param_int(BRAID_P_TIMEOUT);
    if (timeout <= 0 || waited < timeout)
        return BRAID_OK;
    const char *coll = braid_coll_name((braid_coll_kind_t)op->hdr.kind);
    unsigned long long seq = (unsigned long long)op->hdr.seq;
    braid_status_t st;
    if (what == BRAID_FLIGHT_WAITS_STREAM)
        st = braid_err(BRAID_ERR_TIMEOUT, "%s #%llu (count %llu, %llu bytes) has not started "
                       "after %.0f s (BRAID_TIMEOUT) on rank %d: it waits for its stream, whose "
                       "work queued before the call has not finished (a kernel or stream "
                       "operation that never ends)", coll, seq,
                       (unsigned long long)op->hdr.count, op_bytes(op), waited, comm->rank);
    else
        st = braid_err(BRAID_ERR_TIMEOUT, "%s #%llu (count %llu, %llu bytes) made no progress "
                       "for %.0f s (BRAID_TIMEOUT) on rank %d: it waits for the GPU: braid's "
                       "kernels of step %d of %d on device %d have not finished (a kernel or "
                       "stream operation that never ends)", coll, seq,
                       (unsigned long long)op->hdr.count, op_bytes(op), waited, comm->rank,
                       op->step, op->sched.nsteps, op->ordinal);
    braid_flight_dump(comm->flight, "timeout", braid_err_last(), 0);
    return st;
}

static braid_status_t comm_gpu_wait(void *ctx, const braid_op_t *op, double waited)
{
    return braid_comm_device_wait(ctx, op, BRAID_FLIGHT_WAITS_GPU, waited);
}

static void comm_drive(void *ctx)
{
    braid_comm_drive(ctx);
}

/* Publish where this rank waits; does the peer it waits on share that CPU? */
static int comm_near(void *ctx, const braid_op_t *op)
{
    int cpu = sched_getcpu(), peer = op_waits_on(op);
    braid_comm_publish_cpu(ctx, cpu);
    return cpu >= 0 && peer >= 0 && braid_comm_peer_cpu(ctx, peer) == cpu;
}

const braid_exec_hooks_t braid_comm_exec_hooks = {
    .check = comm_check,
    .stalled = comm_stalled,
    .drive = comm_drive,
    .near = comm_near,
    .gpu_wait = comm_gpu_wait,
};
