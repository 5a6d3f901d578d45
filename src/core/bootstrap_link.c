/*
 * Bootstrap connections of one rank: the exchange with the root, and the ring links.
 *
 * A rank's listener is shared by its communicator and every child made from it (split,
 * shrink), possibly from several threads, and ncclCommInitAll runs several ranks of one
 * process at once. So whoever accepts a connection reads its bs_link_hello_t; a connection
 * meant for another communicator goes to the listener's queue, where its owner (polling the
 * listener in short slices) finds it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bootstrap_int.h"
#include "base/log.h"

#define LINK_MAGIC 0x4b4c5242u               /* "BRLK" */
#define LINK_SLICE_NS (20 * 1000000ll)       /* how often a waiter looks at the queue */
#define LINK_HELLO_NS (5 * 1000000000ll)     /* an accepted connection must say who it is */
#define LINK_ROOT_RETRY_NS (50 * 1000000ll)
#define LINK_TELL_NS (1000 * 1000000ll)      /* to take rank-1's link after a failure */
#define LINK_PARENT_NS (50 * 1000000ll)      /* how often a split's wait reads its parent */
#define LINK_ROOT_TRIES 20                   /* closes before a word: not a previous root */

/* ---- listener ---- */

braid_status_t braid_bootstrap_listener_create(braid_sockaddr_t *addr, bs_listener_t **lis_p)
{
    bs_listener_t *lis = calloc(1, sizeof(*lis));
    braid_status_t st;
    if (lis == NULL)
        return braid_err(BRAID_ERR_NOMEM, "bootstrap: no memory for a listener");
    st = braid_socket_listen(addr, 0, &lis->fd);
    if (st < 0) {
        free(lis);
        return st;
    }
    lis->addr = *addr;
    atomic_init(&lis->refs, 1);
    pthread_mutex_init(&lis->lock, NULL);
    *lis_p = lis;
    return BRAID_OK;
}

bs_listener_t *braid_bootstrap_listener_ref(bs_listener_t *lis)
{
    if (lis != NULL)
        atomic_fetch_add(&lis->refs, 1);
    return lis;
}

void braid_bootstrap_listener_unref(bs_listener_t *lis)
{
    if (lis == NULL || atomic_fetch_sub(&lis->refs, 1) != 1)
        return;
    while (lis->pending != NULL) {
        bs_pending_t *p = lis->pending;
        lis->pending = p->next;
        braid_socket_close(p->fd);
        free(p);
    }
    braid_socket_close(lis->fd);
    pthread_mutex_destroy(&lis->lock);
    free(lis);
}

static int link_match(const bs_link_hello_t *a, const bs_link_hello_t *b)
{
    return a->nonce == b->nonce && a->tag == b->tag && a->from == b->from && a->to == b->to;
}

/* The queued connection that matches `want`, or -1. */
static int link_take(bs_listener_t *lis, const bs_link_hello_t *want)
{
    int fd = -1;
    pthread_mutex_lock(&lis->lock);
    for (bs_pending_t **pp = &lis->pending; *pp != NULL; pp = &(*pp)->next) {
        bs_pending_t *p = *pp;
        if (link_match(&p->hello, want)) {
            *pp = p->next;
            fd = p->fd;
            free(p);
            break;
        }
    }
    pthread_mutex_unlock(&lis->lock);
    return fd;
}

static void link_park(bs_listener_t *lis, int fd, const bs_link_hello_t *h)
{
    bs_pending_t *p = malloc(sizeof(*p)), **pp;
    if (p == NULL) {
        BRAID_WARN("bootstrap: no memory to queue a connection from rank %d; dropped", h->from);
        braid_socket_close(fd);
        return;
    }
    BRAID_TRACE(BRAID_SUB_BOOTSTRAP, "bootstrap: queued a connection from rank %d to rank %d "
                "(nonce %016" PRIx64 ") for its communicator", h->from, h->to, h->nonce);
    p->next = NULL;
    p->fd = fd;
    p->hello = *h;
    pthread_mutex_lock(&lis->lock);
    for (pp = &lis->pending; *pp != NULL; pp = &(*pp)->next)
        ;
    *pp = p;
    pthread_mutex_unlock(&lis->lock);
}

/* Accept what is there; BRAID_OK with *fd_p once one matches, BRAID_INPROGRESS if none. */
static braid_status_t link_accept_some(bs_listener_t *lis, const bs_link_hello_t *want,
                                       int *fd_p)
{
    braid_status_t st;
    int fd;
    while ((st = braid_socket_accept(lis->fd, &fd)) == BRAID_OK) {
        bs_link_hello_t h;
        st = braid_socket_recv_all(fd, &h, sizeof(h), braid_time_ns() + LINK_HELLO_NS, -1);
        if (st < 0 || h.magic != LINK_MAGIC || h.version != BS_PROTO_VERSION) {
            BRAID_INFO(BRAID_SUB_BOOTSTRAP, "bootstrap: dropped a connection without a valid "
                       "link hello");
            braid_socket_close(fd);
        } else if (link_match(&h, want)) {
            *fd_p = fd;
            return BRAID_OK;
        } else {
            link_park(lis, fd, &h);
        }
    }
    return st;
}

/* Wait for the connection described by `want`. BRAID_INPROGRESS when `watch_fd` (-1: none)
 * becomes readable first. Quiet. */
static braid_status_t link_claim(bs_listener_t *lis, const bs_link_hello_t *want,
                                 int64_t deadline, int abort_fd, int watch_fd, int *fd_p)
{
    for (;;) {
        struct pollfd pfd[2] = { { .fd = lis->fd, .events = POLLIN },
                                 { .fd = watch_fd, .events = POLLIN } };
        braid_status_t st;
        int fd = link_take(lis, want);
        if (fd >= 0) {
            *fd_p = fd;
            return BRAID_OK;
        }
        st = link_accept_some(lis, want, fd_p);
        if (st != BRAID_INPROGRESS)
            return st;
        BRAID_CHECK(braid_socket_wait(pfd, 2, deadline, LINK_SLICE_NS, abort_fd));
        if (pfd[1].revents && !pfd[0].revents)   /* a connection waiting is taken first */
            return BRAID_INPROGRESS;
    }
}

/* ---- errors ---- */

braid_status_t braid_bootstrap_peer_err(const braid_bootstrap_t *bs, braid_status_t st, int peer,
                                        const char *what)
{
    int err = errno;
    char who[160];
    braid_bootstrap_rec_str(&bs->recs[peer], who, sizeof(who));
    switch (st) {
    case BRAID_ERR_ABORTED:
        return braid_err(st, "bootstrap: rank %d of %d was aborted during %s", bs->rank,
                         bs->nranks, what);
    case BRAID_ERR_TIMEOUT:
        return braid_err(st, "bootstrap: %s did not respond within %d s during %s: it is hung, "
                         "or has not reached this step", who, bs->timeout_s, what);
    case BRAID_ERR_REMOTE:
        if (err == EHOSTUNREACH || err == ENETUNREACH) {
            char where[BRAID_SOCKADDR_STRLEN];
            braid_sockaddr_str(&bs->recs[peer].addr, where, sizeof(where));
            return braid_err(st, "bootstrap: rank %d cannot reach %s at %s during %s (%s): "
                             "its address is not reachable from this host (check "
                             "NCCL_SOCKET_IFNAME on its host)", bs->rank, who, where, what,
                             strerror(err));
        }
        return braid_err(st, "bootstrap: %s closed the connection during %s: it has probably "
                         "exited%s%s%s", who, what, err ? " (" : "", err ? strerror(err) : "",
                         err ? ")" : "");
    default:
        return braid_err(st, "bootstrap: rank %d of %d: %s with %s failed: %s", bs->rank,
                         bs->nranks, what, who, strerror(err));
    }
}

static braid_status_t link_root_err(const braid_bootstrap_t *bs, braid_status_t st,
                                    const braid_sockaddr_t *root, int connecting)
{
    int err = errno;
    char where[BRAID_SOCKADDR_STRLEN];
    braid_sockaddr_str(root, where, sizeof(where));
    if (st == BRAID_ERR_ABORTED)
        return braid_err(st, "bootstrap: rank %d of %d was aborted while joining (root %s)",
                         bs->rank, bs->nranks, where);
    if (st == BRAID_ERR_TIMEOUT && connecting)
        return braid_err(st, "bootstrap: rank %d of %d could not reach the root at %s within "
                         "%d s (%s): check that the process that called ncclGetUniqueId (rank "
                         "0 with NCCL_COMM_ID) is running and that this address is reachable "
                         "from here (NCCL_SOCKET_IFNAME)", bs->rank, bs->nranks, where,
                         bs->timeout_s, err ? strerror(err) : "no answer");
    if (st == BRAID_ERR_TIMEOUT)
        return braid_err(st, "bootstrap: rank %d of %d got no table from the root at %s within "
                         "%d s: the root's process is hung", bs->rank, bs->nranks, where,
                         bs->timeout_s + BS_GRACE_S);
    if (st == BRAID_ERR_REMOTE)
        return braid_err(st, "bootstrap: the root at %s closed the connection while rank %d of "
                         "%d was joining: the process that called ncclGetUniqueId (rank 0 with "
                         "NCCL_COMM_ID) has probably exited", where, bs->rank, bs->nranks);
    return braid_err(st, "bootstrap: rank %d of %d: %s the root at %s failed: %s", bs->rank,
                     bs->nranks, connecting ? "connecting to" : "talking to", where,
                     strerror(err));
}

/* ---- root exchange ---- */

static braid_status_t link_hello_send(braid_bootstrap_t *bs, int fd, int64_t deadline)
{
    bs_hello_t h;
    memset(&h, 0, sizeof(h));
    h.magic = BS_PROTO_MAGIC;
    h.version = BS_PROTO_VERSION;
    h.nonce = bs->nonce;
    h.nranks = bs->nranks;
    h.info_len = (uint32_t)bs->info_len;
    h.rec = bs->recs[bs->rank];
    BRAID_CHECK(braid_socket_send_all(fd, &h, sizeof(h), deadline, bs->abort_fd));
    return braid_socket_send_all(fd, bs->infos + (size_t)bs->rank * bs->info_len, bs->info_len,
                                 deadline, bs->abort_fd);
}

braid_status_t braid_bootstrap_table_check(bs_rec_t *recs, int nranks, const char *where)
{
    for (int r = 0; r < nranks; r++) {
        recs[r].host[BS_HOST_LEN - 1] = '\0';
        if (recs[r].rank != r || !braid_sockaddr_valid(&recs[r].addr))
            return braid_err(BRAID_ERR_REMOTE, "bootstrap: the root at %s sent a malformed "
                             "table (row %d)", where, r);
    }
    return BRAID_OK;
}

/* The root's address, and what named it: "10.0.0.1:29500 (NCCL_COMM_ID)". */
static const char *link_root_str(const braid_bootstrap_t *bs, const braid_sockaddr_t *root,
                                 char *buf, size_t len)
{
    char where[BRAID_SOCKADDR_STRLEN];
    snprintf(buf, len, "%s (%s)", braid_sockaddr_str(root, where, sizeof(where)),
             bs->uid.flags & BRAID_UID_ROOT_AT_RANK0 ? "NCCL_COMM_ID" : "the unique id");
    return buf;
}

/* What answered was not a braid root: say what it sent, printable, and fail at once. */
static braid_status_t link_stranger(const braid_bootstrap_t *bs, const braid_sockaddr_t *root,
                                    const void *got, size_t len)
{
    char text[48], where[BRAID_SOCKADDR_STRLEN + 32];
    size_t n = 0;
    for (size_t i = 0; i < len && n + 5 < sizeof(text); i++) {
        unsigned char c = ((const unsigned char *)got)[i];
        n += (size_t)snprintf(text + n, sizeof(text) - n, c >= 0x20 && c < 0x7f && c != '"'
                              ? "%c" : "\\x%02x", c);
    }
    return braid_err(BRAID_ERR_REMOTE, "bootstrap: rank %d of %d: the root address %s is "
                     "answered by a program that is not a braid bootstrap root (it sent \"%s%s\"): "
                     "point NCCL_COMM_ID at a free port of rank 0's host, or pass the unique id "
                     "that ncclGetUniqueId made", bs->rank, bs->nranks,
                     link_root_str(bs, root, where, sizeof(where)), text, n < len ? "..." : "");
}

/*
 * Read one reply of the root's by `deadline` (*off_p: the bytes that came). Quiet:
 * BRAID_INPROGRESS when the connection closed before a byte; BRAID_ERR_INVALID when the
 * first bytes are not the protocol's magic (another program answered); else the socket's
 * status.
 */
static braid_status_t link_reply_recv(braid_bootstrap_t *bs, int fd, int64_t deadline,
                                      bs_reply_t *reply, size_t *off_p)
{
    const size_t old = offsetof(bs_reply_t, pid);   /* a refusal of a protocol-1 root */
    const uint32_t magic = BS_PROTO_MAGIC;
    size_t off = 0;
    for (;;) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        braid_status_t st = braid_socket_recv_nb(fd, reply, sizeof(*reply), &off);
        *off_p = off;
        if (memcmp(reply, &magic, off < sizeof(magic) ? off : sizeof(magic)) != 0 ||
            (st < 0 && off > 0 && off < sizeof(magic)))
            return BRAID_ERR_INVALID;
        if (st == BRAID_ERR_REMOTE && off == 0)
            return BRAID_INPROGRESS;
        if (st == BRAID_ERR_REMOTE && off >= old && reply->status < 0) {
            memset((char *)reply + off, 0, sizeof(*reply) - off);
            return BRAID_OK;
        }
        if (st < 0 || off == sizeof(*reply))
            return st;
        BRAID_CHECK(braid_socket_wait(&pfd, 1, deadline, 0, bs->abort_fd));
    }
}

braid_status_t braid_bootstrap_reply_error(const bs_reply_t *reply)
{
    char text[BS_TEXT_LEN];
    if (reply->status >= 0)   /* an ack where the table belongs, or no status of ours */
        return braid_err(BRAID_ERR_REMOTE, "bootstrap: the root answered with status %d "
                         "where it sends the table or an error: it runs another braid",
                         (int)reply->status);
    snprintf(text, sizeof(text), "%.*s", BS_TEXT_LEN - 1, reply->text);
    return braid_err(reply->status >= BRAID_ERR_DEVICE ? (braid_status_t)reply->status
                                                      : BRAID_ERR_REMOTE, "%s", text);
}

/*
 * The root's answer to the hello: an ack at once (BRAID_OK), or a refusal. BRAID_INPROGRESS:
 * the connection closed before a byte (a previous job's root on this port closing).
 */
static braid_status_t link_ack_recv(braid_bootstrap_t *bs, int fd, const braid_sockaddr_t *root,
                                    int64_t deadline, bs_reply_t *ack)
{
    int64_t soon = braid_time_ns() + BS_ACK_S * 1000000000ll;
    char where[BRAID_SOCKADDR_STRLEN + 32];
    size_t got;
    braid_status_t st = link_reply_recv(bs, fd, soon < deadline ? soon : deadline, ack, &got);
    if (st == BRAID_ERR_INVALID)
        return link_stranger(bs, root, ack, got);
    if (st == BRAID_ERR_TIMEOUT && soon < deadline)
        return braid_err(BRAID_ERR_REMOTE, "bootstrap: rank %d of %d: the root address %s "
                         "took the connection but did not answer in %d s: another program "
                         "listens there, or the root's process is stopped", bs->rank,
                         bs->nranks, link_root_str(bs, root, where, sizeof(where)), BS_ACK_S);
    if (st != BRAID_OK)
        return st == BRAID_INPROGRESS ? st : link_root_err(bs, st, root, 0);
    if (ack->status < 0)
        return braid_bootstrap_reply_error(ack);
    if (ack->status != BRAID_INPROGRESS)
        return braid_err(BRAID_ERR_REMOTE, "bootstrap: the root at %s answered the hello of "
                         "rank %d with status %d, not an acknowledgement: it runs another braid",
                         link_root_str(bs, root, where, sizeof(where)), bs->rank, ack->status);
    ack->host[BS_HOST_LEN - 1] = '\0';
    return BRAID_OK;
}

/* After the ack: the table, or the job's failure. A close means the root's process died. */
static braid_status_t link_table_recv(braid_bootstrap_t *bs, int fd, const braid_sockaddr_t *root,
                                      const bs_reply_t *ack)
{
    int64_t deadline = bs->timeout_s > 0 ? braid_deadline_after_s(bs->timeout_s + BS_GRACE_S)
                                         : BRAID_DEADLINE_NONE;
    char where[BRAID_SOCKADDR_STRLEN + 32];
    bs_reply_t reply;
    size_t got;
    braid_status_t st = link_reply_recv(bs, fd, deadline, &reply, &got);
    if (st == BRAID_ERR_INVALID)
        return link_stranger(bs, root, &reply, got);
    if (st == BRAID_INPROGRESS || st == BRAID_ERR_REMOTE)
        return braid_err(BRAID_ERR_REMOTE, "bootstrap: the root at %s (host %s, pid %u%s) "
                         "closed the connection while rank %d of %d waited for the others to "
                         "join: that process has exited or was killed",
                         link_root_str(bs, root, where, sizeof(where)), ack->host, ack->pid,
                         bs->uid.flags & BRAID_UID_ROOT_AT_RANK0 ? ": rank 0" : "", bs->rank,
                         bs->nranks);
    if (st < 0)
        return link_root_err(bs, st, root, 0);
    if (reply.status != BRAID_OK)
        return braid_bootstrap_reply_error(&reply);
    st = braid_socket_recv_all(fd, bs->recs, (size_t)bs->nranks * sizeof(*bs->recs), deadline,
                               bs->abort_fd);
    if (st == BRAID_OK)
        st = braid_socket_recv_all(fd, bs->infos, (size_t)bs->nranks * bs->info_len, deadline,
                                   bs->abort_fd);
    if (st < 0)
        return link_root_err(bs, st, root, 0);
    return braid_bootstrap_table_check(bs->recs, bs->nranks,
                                       braid_sockaddr_str(root, where, sizeof(where)));
}

/* One try: connect, hello, ack, table. BRAID_INPROGRESS: closed before answering. */
static braid_status_t link_root_try(braid_bootstrap_t *bs, const braid_sockaddr_t *root,
                                    int64_t deadline)
{
    bs_reply_t ack;
    int fd = -1;
    braid_status_t st = braid_socket_connect(root, 1, deadline, bs->abort_fd, &fd);
    if (st < 0)
        return link_root_err(bs, st, root, 1);
    st = link_hello_send(bs, fd, deadline);
    if (st == BRAID_ERR_REMOTE)   /* closed under us: read what it said, if anything */
        st = BRAID_OK;
    else if (st < 0)
        st = link_root_err(bs, st, root, 0);
    if (st == BRAID_OK)
        st = link_ack_recv(bs, fd, root, deadline, &ack);
    if (st == BRAID_OK) {
        BRAID_INFO(BRAID_SUB_BOOTSTRAP, "bootstrap: rank %d of %d joined the root (host %s, "
                   "pid %u); waiting for the table", bs->rank, bs->nranks, ack.host, ack.pid);
        st = link_table_recv(bs, fd, root, &ack);
    }
    braid_socket_close(fd);
    return st;
}

braid_status_t braid_bootstrap_root_exchange(braid_bootstrap_t *bs, const braid_sockaddr_t *root)
{
    int64_t deadline = braid_deadline_after_s(bs->timeout_s);
    char where[BRAID_SOCKADDR_STRLEN + 32];
    for (int tries = 1;; tries++) {
        braid_status_t st = link_root_try(bs, root, deadline);
        if (st != BRAID_INPROGRESS)
            return st;
        if (!(bs->uid.flags & BRAID_UID_ROOT_AT_RANK0))
            return link_root_err(bs, BRAID_ERR_REMOTE, root, 0);
        if (tries == LINK_ROOT_TRIES)
            return braid_err(BRAID_ERR_REMOTE, "bootstrap: rank %d of %d: the root address %s "
                             "took %d connections and closed each without a word: another "
                             "program listens there", bs->rank, bs->nranks,
                             link_root_str(bs, root, where, sizeof(where)), tries);
        BRAID_INFO(BRAID_SUB_BOOTSTRAP, "bootstrap: rank %d: the root closed the connection "
                   "before answering (a previous job's root closing?); connecting again",
                   bs->rank);
        if (braid_time_ns() + LINK_ROOT_RETRY_NS >= deadline)
            return link_root_err(bs, BRAID_ERR_REMOTE, root, 0);
        st = braid_socket_sleep(LINK_ROOT_RETRY_NS, bs->abort_fd);
        if (st < 0)
            return link_root_err(bs, st, root, 0);
    }
}

/* ---- ring ---- */

#define RING_SETUP "ring setup"

/*
 * Take rank-1's connection, meanwhile reading what rank+1 says: its close (it died: it
 * cannot be done with us yet), a notice that a rank died, or one that a rank's setup
 * failed, held while rank-1's connection may still come (that rank may have failed a
 * check that this rank makes too after ring setup, whose error says more). A held notice
 * is reported at the next bootstrap call or check.
 */
static braid_status_t ring_claim_prev(braid_bootstrap_t *bs, const bs_link_hello_t *want,
                                      int64_t deadline)
{
    for (;;) {
        int64_t until = bs->back_held && bs->back_held + BS_HOLD_NS < deadline
                            ? bs->back_held + BS_HOLD_NS : deadline;
        if (bs->parent != NULL && braid_time_ns() + LINK_PARENT_NS < until)
            until = braid_time_ns() + LINK_PARENT_NS;
        braid_status_t st = link_claim(bs->lis, want, until, bs->abort_fd,
                                       bs->back_held ? -1 : bs->next_fd, &bs->prev_fd);
        if (st == BRAID_OK)
            return st;
        if (st == BRAID_INPROGRESS) {
            BRAID_CHECK(braid_bootstrap_ring_hold(bs, RING_SETUP));
        } else if (st == BRAID_ERR_TIMEOUT && until < deadline) {
            if (bs->back_held && braid_time_ns() >= bs->back_held + BS_HOLD_NS)
                return braid_bootstrap_ring_watch(bs, RING_SETUP);   /* the held notice */
            st = braid_bootstrap_parent_notice(bs, "the split that makes this communicator");
            if (st < 0) {   /* this rank gives up: its ring hears it as its setup's failure */
                braid_bootstrap_ring_notice(bs, bs->rank, st);
                return st;
            }
        } else {
            return braid_bootstrap_peer_err(bs, st, want->from, RING_SETUP " (waiting for "
                                            "its connection)");
        }
    }
}

/*
 * After a failure in ring setup, rank-1 may still be waiting for this rank: take its
 * connection if it comes soon, to pass it the notice (the ranks before it then learn the
 * rank that failed instead of waiting, or blaming this one).
 */
static void ring_tell_prev(braid_bootstrap_t *bs, const bs_link_hello_t *want)
{
    if (bs->notice.rank == want->from)
        return;   /* rank-1 is the one that failed */
    if (bs->prev_fd < 0 &&
        link_claim(bs->lis, want, braid_time_ns() + LINK_TELL_NS, -1, -1, &bs->prev_fd) < 0)
        return;
    braid_bootstrap_ring_notice_owed(bs);
}

braid_status_t braid_bootstrap_ring_connect(braid_bootstrap_t *bs)
{
    int n = bs->nranks, next = (bs->rank + 1) % n, prev = (bs->rank + n - 1) % n;
    int64_t deadline = braid_deadline_after_s(bs->timeout_s);
    bs_link_hello_t h = { LINK_MAGIC, BS_PROTO_VERSION, bs->nonce, bs->tag, bs->rank, next };
    bs_link_hello_t want = { LINK_MAGIC, BS_PROTO_VERSION, bs->nonce, bs->tag, prev, bs->rank };
    braid_status_t st;

    st = braid_socket_connect(&bs->recs[next].addr, 0, deadline, bs->abort_fd, &bs->next_fd);
    if (st == BRAID_OK)
        st = braid_socket_send_all(bs->next_fd, &h, sizeof(h), deadline, bs->abort_fd);
    if (st < 0) {
        braid_status_t err = braid_bootstrap_peer_err(bs, st, next, RING_SETUP " (connecting "
                                                      "to it)");
        braid_bootstrap_ring_notice(bs, st == BRAID_ERR_ABORTED ? bs->rank : next, st);
        if (st != BRAID_ERR_ABORTED)   /* an abort does not wait */
            ring_tell_prev(bs, &want);
        return err;
    }
    BRAID_INFO(BRAID_SUB_BOOTSTRAP, "bootstrap: rank %d of %d: ring link to rank %d up, "
               "waiting for rank %d's", bs->rank, n, next, prev);
    st = ring_claim_prev(bs, &want, deadline);
    if (st < 0 && bs->notice.kind == 0)   /* a timeout or abort: no notice went yet */
        braid_bootstrap_ring_notice(bs, st == BRAID_ERR_ABORTED ? bs->rank : prev, st);
    /* (after the parent's failure, rank-1 is the member that failed there: a member
     * connects to its next before it waits, and rank-1's link has not come) */
    if (st < 0 && st != BRAID_ERR_ABORTED && !(bs->parent != NULL && bs->parent->failed < 0))
        ring_tell_prev(bs, &want);
    return st;
}
