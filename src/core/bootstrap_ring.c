/*
 * Bootstrap all-gather and barrier around the ring of bootstrap links.
 *
 * n-1 steps; step t sends block (r - t) to r+1 and receives block (r - t - 1) from r-1, both
 * at once so that blocks larger than the socket buffers cannot deadlock:
 *
 *   step 0   r0 -a-> r1 -b-> r2 -c-> r0        after n-1 steps every rank holds
 *   step 1   r0 -c-> r1 -a-> r2 -b-> r0        every block
 *
 * Failures. The forward stream (next_fd) carries DATA frames and FAIL notices; the backward
 * stream (prev_fd, read by rank-1 on its next_fd) carries only FAIL notices. The rank that
 * first sees a neighbour fail sends a notice naming it both ways (not to the failed rank);
 * a rank that receives one passes it on in the direction it travelled and reports the rank
 * it names. Forward notices arrive in the data stream; backward ones are read whenever a
 * step waits, at the start of each call and when a transfer fails (a rank whose step can
 * still complete completes it). So every rank names the rank that died, not a neighbour
 * that only gave up first, and a rank that was not waiting learns it at its next call.
 *
 * During setup, between calls, ranks also wait for other things (shared memory, network
 * connections): braid_bootstrap_check reads both links without blocking, so that a notice,
 * or a neighbour's close, ends those waits too. Before setup ends a neighbour cannot have
 * left in good order (every rank still needs every other), so there a close is a failure.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "core/bootstrap_int.h"
#include "base/log.h"

#define BS_FRAME_DATA 0x41544144u  /* "DATA" */
#define BS_FRAME_FAIL 0x4c494146u  /* "FAIL" */
#define RING_NOTICE_NS 1000000000ll /* at most this long to pass a notice on */

typedef enum {
    BS_FAIL_CLOSED = 1,         /* its connection closed: it died */
    BS_FAIL_TIMEOUT = 2,
    BS_FAIL_ABORTED = 3,
    BS_FAIL_SETUP = 4,          /* its setup failed (its own log says why) */
} bs_fail_t;

/* One direction of a step: a frame header, then its payload. */
typedef struct ring_xfer {
    int fd;
    void *hdr;
    size_t hlen;
    void *data;
    size_t dlen;
    size_t off;                 /* over header then payload */
} ring_xfer_t;

static int ring_next(const braid_bootstrap_t *bs)
{
    return (bs->rank + 1) % bs->nranks;
}

static int ring_prev(const braid_bootstrap_t *bs)
{
    return (bs->rank + bs->nranks - 1) % bs->nranks;
}

static int ring_xfer_done(const ring_xfer_t *x)
{
    return x->off == x->hlen + x->dlen;
}

static braid_status_t ring_xfer_send(ring_xfer_t *x)
{
    size_t o;
    braid_status_t st;
    if (x->off < x->hlen) {
        BRAID_CHECK(braid_socket_send_nb(x->fd, x->hdr, x->hlen, &x->off));
        if (x->off < x->hlen)
            return BRAID_OK;
    }
    o = x->off - x->hlen;
    st = braid_socket_send_nb(x->fd, x->data, x->dlen, &o);
    x->off = x->hlen + o;
    return st;
}

/* Receives the header, and stops there so that the caller checks it before the payload. */
static braid_status_t ring_xfer_recv(ring_xfer_t *x)
{
    size_t o;
    braid_status_t st;
    if (x->off < x->hlen)
        return braid_socket_recv_nb(x->fd, x->hdr, x->hlen, &x->off);
    o = x->off - x->hlen;
    st = braid_socket_recv_nb(x->fd, x->data, x->dlen, &o);
    x->off = x->hlen + o;
    return st;
}

/* ---- failure notices ---- */

/* Best effort: finish the frame rank+1 is receiving from us, then the notice after it. */
static void ring_notice_send(braid_bootstrap_t *bs, ring_xfer_t *sx, int backward,
                             const bs_frame_t *f)
{
    int64_t deadline = braid_time_ns() + RING_NOTICE_NS;
    int fd = backward ? bs->prev_fd : bs->next_fd;
    if (fd < 0 || f->rank == (backward ? ring_prev(bs) : ring_next(bs)))
        return;
    while (!backward && sx != NULL && sx->off != 0 && !ring_xfer_done(sx)) {
        struct pollfd pfd = { .fd = sx->fd, .events = POLLOUT };
        if (ring_xfer_send(sx) < 0 ||
            (!ring_xfer_done(sx) && braid_socket_wait(&pfd, 1, deadline, 0, -1) < 0))
            return;
    }
    (void)braid_socket_send_all(fd, f, sizeof(*f), deadline, -1);
}

/* Send a notice on, forward and/or backward; one owed to a rank-1 not linked yet (ring
 * setup) waits for braid_bootstrap_ring_notice_owed. */
static void ring_notice_pass(braid_bootstrap_t *bs, ring_xfer_t *sx, const bs_frame_t *f,
                             int forward, int backward)
{
    bs->notice = *f;
    bs->notice_owed = backward && bs->prev_fd < 0;
    if (forward)
        ring_notice_send(bs, sx, 0, f);
    if (backward)
        ring_notice_send(bs, sx, 1, f);
}

static void ring_notice_start(braid_bootstrap_t *bs, ring_xfer_t *sx, int failed,
                              bs_fail_t reason)
{
    bs_frame_t f = { .kind = BS_FRAME_FAIL, .reason = reason, .rank = failed,
                     .reporter = bs->rank };
    ring_notice_pass(bs, sx, &f, 1, 1);
}

void braid_bootstrap_ring_notice(braid_bootstrap_t *bs, int rank, braid_status_t why)
{
    bs_fail_t reason = why == BRAID_ERR_ABORTED ? BS_FAIL_ABORTED
                       : rank == bs->rank       ? BS_FAIL_SETUP
                       : why == BRAID_ERR_TIMEOUT ? BS_FAIL_TIMEOUT
                                                  : BS_FAIL_CLOSED;
    ring_notice_start(bs, NULL, rank, reason);
}

void braid_bootstrap_ring_notice_owed(braid_bootstrap_t *bs)
{
    if (bs->notice_owed && bs->prev_fd >= 0) {
        ring_notice_send(bs, NULL, 1, &bs->notice);
        bs->notice_owed = 0;
    }
}

int braid_bootstrap_notice_valid(const bs_frame_t *f, int nranks)
{
    return f->kind == BS_FRAME_FAIL && f->rank >= 0 && f->rank < nranks && f->reporter >= 0 &&
           f->reporter < nranks;
}

/* A notice arrived: check it and pass it on in the direction it travels. */
static braid_status_t ring_notice_relay(braid_bootstrap_t *bs, ring_xfer_t *sx,
                                        const bs_frame_t *f, int backward, const char *what)
{
    if (!braid_bootstrap_notice_valid(f, bs->nranks))
        return braid_err(BRAID_ERR_REMOTE, "bootstrap: rank %d received a malformed frame "
                         "(kind 0x%x) from rank %d during %s", bs->rank, f->kind,
                         backward ? ring_next(bs) : ring_prev(bs), what);
    ring_notice_pass(bs, sx, f, !backward, backward);
    return BRAID_OK;
}

/* What a notice means here: the rank it names failed. */
static braid_status_t ring_notice_error(braid_bootstrap_t *bs, const bs_frame_t *f,
                                        const char *what)
{
    char who[160];
    braid_bootstrap_rec_str(&bs->recs[f->rank], who, sizeof(who));
    if (f->reason == BS_FAIL_TIMEOUT)
        return braid_err(BRAID_ERR_TIMEOUT, "bootstrap: %s did not respond within %d s during "
                         "%s: it is hung, or has not reached this step (seen by rank %d)",
                         who, bs->timeout_s, what, f->reporter);
    if (f->reason == BS_FAIL_ABORTED)
        return braid_err(BRAID_ERR_REMOTE, "bootstrap: %s aborted its communicator during %s",
                         who, what);
    if (f->reason == BS_FAIL_SETUP)
        return braid_err(BRAID_ERR_REMOTE, "bootstrap: %s failed its part of the setup while "
                         "this rank was in %s (its log says why)", who, what);
    return braid_err(BRAID_ERR_REMOTE, "bootstrap: %s closed the connection during %s: it has "
                     "probably exited (seen by rank %d)", who, what, f->reporter);
}

static braid_status_t ring_notice_report(braid_bootstrap_t *bs, ring_xfer_t *sx,
                                         const bs_frame_t *f, int backward, const char *what)
{
    BRAID_CHECK(ring_notice_relay(bs, sx, f, backward, what));
    return ring_notice_error(bs, f, what);
}

/*
 * Read what rank+1 sent backward: nothing yet, its close (it finished and left), its reset
 * (it died with bytes of ours unread: an error), or a notice, complete in bs->back (1 in
 * *notice_p).
 */
static braid_status_t ring_back_read(braid_bootstrap_t *bs, ring_xfer_t *sx, const char *what,
                                     int *notice_p)
{
    braid_status_t st;
    *notice_p = 0;
    if (bs->next_gone)
        return BRAID_OK;
    st = braid_socket_recv_nb(bs->next_fd, &bs->back, sizeof(bs->back), &bs->back_off);
    if (st < 0 && errno == 0) {
        bs->next_gone = 1;   /* if it still owed us a read, our send will say so */
        return BRAID_OK;
    }
    if (st < 0) {
        int err = errno;
        ring_notice_start(bs, sx, ring_next(bs), BS_FAIL_CLOSED);
        errno = err;
        return braid_bootstrap_peer_err(bs, BRAID_ERR_REMOTE, ring_next(bs), what);
    }
    if (bs->back_off < sizeof(bs->back))
        return BRAID_OK;
    bs->back_off = 0;
    *notice_p = 1;
    return BRAID_OK;
}

/* At a call's start and after a failed transfer: a notice from rank+1 is this call's error. */
static braid_status_t ring_back_poll(braid_bootstrap_t *bs, ring_xfer_t *sx, const char *what)
{
    int notice;
    if (bs->back_held) {
        bs->back_held = 0;
        return ring_notice_error(bs, &bs->back, what);
    }
    BRAID_CHECK(ring_back_read(bs, sx, what, &notice));
    return notice ? ring_notice_report(bs, sx, &bs->back, 1, what) : BRAID_OK;
}

/*
 * While a step waits: a notice from rank+1 is passed on at once. One that a rank's setup
 * failed is held, not reported, for BS_HOLD_NS: the step may still complete (that rank
 * may have done its part of this call, then failed a check the others make too, whose
 * error says more than the notice).
 */
static braid_status_t ring_back_hold_notice(braid_bootstrap_t *bs, ring_xfer_t *sx,
                                            const char *what)
{
    BRAID_CHECK(ring_notice_relay(bs, sx, &bs->back, 1, what));
    if (bs->back.reason != BS_FAIL_SETUP)   /* a rank died or gave up: nothing to wait for */
        return ring_notice_error(bs, &bs->back, what);
    bs->back_held = braid_time_ns();
    return BRAID_OK;
}

static braid_status_t ring_back_hold(braid_bootstrap_t *bs, ring_xfer_t *sx, const char *what)
{
    int notice;
    BRAID_CHECK(ring_back_read(bs, sx, what, &notice));
    return notice ? ring_back_hold_notice(bs, sx, what) : BRAID_OK;
}

/* A transfer with a neighbour failed: prefer a notice already there, else start one. */
static braid_status_t ring_step_fail(braid_bootstrap_t *bs, ring_xfer_t *sx, braid_status_t st,
                                     int sending, const char *what)
{
    int peer = sending ? ring_next(bs) : ring_prev(bs), err = errno;
    if (st != BRAID_ERR_ABORTED) {
        braid_status_t back = ring_back_poll(bs, sx, what);
        if (back < 0)
            return back;
    }
    if (st == BRAID_ERR_ABORTED)
        ring_notice_start(bs, sx, bs->rank, BS_FAIL_ABORTED);
    else
        ring_notice_start(bs, sx, peer,
                          st == BRAID_ERR_TIMEOUT ? BS_FAIL_TIMEOUT : BS_FAIL_CLOSED);
    errno = err;
    return braid_bootstrap_peer_err(bs, st, peer, what);
}

/* ---- steps ---- */

/* The received header is complete: data of the right size, or a notice. */
static braid_status_t ring_frame_check(braid_bootstrap_t *bs, ring_xfer_t *sx,
                                       const bs_frame_t *f, size_t len, const char *what)
{
    if (f->kind != BS_FRAME_DATA)
        return ring_notice_report(bs, sx, f, 0, what);
    if (f->len != len)
        return braid_err(BRAID_ERR_USAGE, "bootstrap: rank %d sent %" PRIu64 " bytes per rank "
                         "in %s but rank %d expects %zu: the ranks make different bootstrap "
                         "calls", ring_prev(bs), f->len, what, bs->rank, len);
    return BRAID_OK;
}

/* One ring step: send `sbuf` to rank+1 while receiving rank-1's block into rbuf. */
static braid_status_t ring_step(braid_bootstrap_t *bs, const void *sbuf, void *rbuf, size_t len,
                                int64_t deadline, const char *what)
{
    bs_frame_t shdr = { .kind = BS_FRAME_DATA, .rank = bs->rank, .len = len }, rhdr;
    ring_xfer_t sx = { bs->next_fd, &shdr, sizeof(shdr), (void *)sbuf, len, 0 };
    ring_xfer_t rx = { bs->prev_fd, &rhdr, sizeof(rhdr), rbuf, len, 0 };
    int checked = 0;
    for (;;) {
        struct pollfd pfd[3];
        braid_status_t st = ring_xfer_send(&sx);
        if (st < 0)
            return ring_step_fail(bs, &sx, st, 1, what);
        st = ring_xfer_recv(&rx);
        if (st < 0)
            return ring_step_fail(bs, &sx, st, 0, what);
        if (!checked && rx.off == rx.hlen) {
            BRAID_CHECK(ring_frame_check(bs, &sx, &rhdr, len, what));
            checked = 1;
            continue;
        }
        if (ring_xfer_done(&sx) && ring_xfer_done(&rx))
            return BRAID_OK;
        if (bs->back_held && braid_time_ns() - bs->back_held >= BS_HOLD_NS)
            return ring_back_poll(bs, &sx, what);
        pfd[0] = (struct pollfd){ .fd = ring_xfer_done(&sx) ? -1 : sx.fd, .events = POLLOUT };
        pfd[1] = (struct pollfd){ .fd = ring_xfer_done(&rx) ? -1 : rx.fd, .events = POLLIN };
        /* a notice rank+1 passes back while we wait for rank-1 (it sends nothing else) */
        pfd[2] = (struct pollfd){ .fd = bs->next_gone || bs->back_held ? -1 : bs->next_fd,
                                  .events = POLLIN };
        st = braid_socket_wait(pfd, 3, deadline, bs->back_held ? BS_HOLD_NS / 10 : 0,
                               bs->abort_fd);
        if (st < 0)   /* a timeout while only sending means rank+1 stopped reading */
            return ring_step_fail(bs, &sx, st, st == BRAID_ERR_TIMEOUT && pfd[1].fd < 0, what);
        if (pfd[2].revents)
            BRAID_CHECK(ring_back_hold(bs, &sx, what));
    }
}

/* ---- between operations, during setup ---- */

/* rank+1 closed (`err`: why) or rank-1 did: it died or failed. */
static braid_status_t ring_watch_closed(braid_bootstrap_t *bs, int peer, int err,
                                        const char *what)
{
    ring_notice_start(bs, NULL, peer, BS_FAIL_CLOSED);
    errno = err;
    return braid_bootstrap_peer_err(bs, BRAID_ERR_REMOTE, peer, what);
}

braid_status_t braid_bootstrap_ring_hold(braid_bootstrap_t *bs, const char *what)
{
    int notice;
    braid_status_t st = ring_back_read(bs, NULL, what, &notice);
    if (st == BRAID_OK && bs->next_gone)   /* even in good order: it cannot be done yet */
        st = ring_watch_closed(bs, ring_next(bs), 0, what);
    else if (st == BRAID_OK && notice)
        st = ring_back_hold_notice(bs, NULL, what);
    if (st < 0)
        bs->failed = st;
    return st;
}

/* What rank-1 sent: a notice is taken; data of its next call ahead of ours is left. */
static braid_status_t ring_watch_prev(braid_bootstrap_t *bs, const char *what)
{
    bs_frame_t f;
    ssize_t n = recv(bs->prev_fd, &f, sizeof(f), MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return BRAID_OK;
    if (n <= 0)
        return ring_watch_closed(bs, ring_prev(bs), n == 0 ? 0 : errno, what);
    if ((size_t)n < sizeof(f) || f.kind != BS_FRAME_FAIL)
        return BRAID_OK;
    if (recv(bs->prev_fd, &f, sizeof(f), MSG_DONTWAIT) != (ssize_t)sizeof(f))
        return ring_watch_closed(bs, ring_prev(bs), errno, what);
    return ring_notice_report(bs, NULL, &f, 0, what);
}

/* A whole failure notice waiting on fd, taken into *f; 0 (nothing taken) for anything else:
 * nothing yet, data of a later call, a close. */
static int ring_take_notice(int fd, bs_frame_t *f)
{
    if (fd < 0 || recv(fd, f, sizeof(*f), MSG_PEEK | MSG_DONTWAIT) != (ssize_t)sizeof(*f) ||
        f->kind != BS_FRAME_FAIL)
        return 0;
    return recv(fd, f, sizeof(*f), MSG_DONTWAIT) == (ssize_t)sizeof(*f);
}

braid_status_t braid_bootstrap_parent_notice(braid_bootstrap_t *bs, const char *what)
{
    braid_bootstrap_t *p = bs->parent;
    bs_frame_t f;
    int backward;
    if (p == NULL)
        return BRAID_OK;
    if (p->failed < 0)
        return p->failed;
    if (p->back_off == 0 && !p->next_gone && ring_take_notice(p->next_fd, &f))
        backward = 1;
    else if (ring_take_notice(p->prev_fd, &f))
        backward = 0;
    else
        return BRAID_OK;
    return p->failed = ring_notice_report(p, NULL, &f, backward, what);
}

braid_status_t braid_bootstrap_ring_watch(braid_bootstrap_t *bs, const char *what)
{
    braid_status_t st = BRAID_OK;
    if (bs->failed < 0)
        return bs->failed;
    if (bs->back_held) {
        st = ring_back_poll(bs, NULL, what);
    } else if (bs->next_fd >= 0 && !bs->next_gone) {
        st = braid_socket_recv_nb(bs->next_fd, &bs->back, sizeof(bs->back), &bs->back_off);
        if (st < 0)   /* even an orderly close: it cannot be done with us yet */
            st = ring_watch_closed(bs, ring_next(bs), errno, what);
        else if (bs->back_off == sizeof(bs->back)) {
            bs->back_off = 0;
            st = ring_notice_report(bs, NULL, &bs->back, 1, what);
        }
    }
    if (st == BRAID_OK && bs->prev_fd >= 0)
        st = ring_watch_prev(bs, what);
    if (st < 0)
        bs->failed = st;
    return st;
}

braid_status_t braid_bootstrap_check(braid_bootstrap_t *bs)
{
    if (bs == NULL || bs->nranks == 1 || !bs->joined)
        return BRAID_OK;
    if (bs->failed == BRAID_OK && atomic_load(&bs->aborted)) {
        ring_notice_start(bs, NULL, bs->rank, BS_FAIL_ABORTED);
        return bs->failed = braid_err(BRAID_ERR_ABORTED, "bootstrap: rank %d of %d was aborted "
                                      "during communicator setup", bs->rank, bs->nranks);
    }
    return braid_bootstrap_ring_watch(bs, "communicator setup");
}

void braid_bootstrap_setup_failed(braid_bootstrap_t *bs, int rank, braid_status_t why)
{
    if (bs == NULL || bs->nranks == 1 || !bs->joined || bs->failed < 0 ||
        bs->notice.kind == BS_FRAME_FAIL)
        return;   /* the bootstrap's own failure: its notice went already */
    braid_bootstrap_ring_notice(bs, rank, why);
}

static braid_status_t ring_usable(braid_bootstrap_t *bs, const char *what)
{
    if (bs == NULL || !bs->joined)
        return braid_err(BRAID_ERR_USAGE, "bootstrap %s before the bootstrap joined", what);
    if (bs->failed < 0)
        return bs->failed;
    if (atomic_load(&bs->aborted))
        return bs->failed = braid_err(BRAID_ERR_ABORTED, "bootstrap: rank %d of %d was aborted "
                                      "before %s", bs->rank, bs->nranks, what);
    return BRAID_OK;
}

static braid_status_t ring_allgather(braid_bootstrap_t *bs, const void *mine, void *out,
                                     size_t len, const char *what)
{
    int n, r;
    int64_t deadline;
    braid_status_t st;
    BRAID_CHECK(ring_usable(bs, what));
    n = bs->nranks;
    r = bs->rank;
    if (len > 0 && (char *)out + (size_t)r * len != mine)
        memmove((char *)out + (size_t)r * len, mine, len);
    if (n == 1)
        return BRAID_OK;
    deadline = braid_deadline_after_s(bs->timeout_s);
    st = ring_back_poll(bs, NULL, what);       /* a failure noticed since the last call */
    for (int t = 0; st == BRAID_OK && t < n - 1; t++) {
        int sblk = (r - t + n) % n, rblk = (r - t - 1 + n) % n;
        st = ring_step(bs, len ? (char *)out + (size_t)sblk * len : NULL,
                       len ? (char *)out + (size_t)rblk * len : NULL, len, deadline, what);
    }
    if (st < 0)
        bs->failed = st;
    return st;
}

braid_status_t braid_bootstrap_allgather(braid_bootstrap_t *bs, const void *mine, void *out,
                                         size_t len)
{
    if (len > 0 && (mine == NULL || out == NULL))
        return braid_err(BRAID_ERR_INVALID, "bootstrap allgather of %zu bytes with a NULL "
                         "buffer", len);
    return ring_allgather(bs, mine, out, len, "allgather");
}

/* Zero-byte all-gather: the n-1 ring steps alone order every rank after every other. */
braid_status_t braid_bootstrap_barrier(braid_bootstrap_t *bs)
{
    return ring_allgather(bs, NULL, NULL, 0, "barrier");
}
