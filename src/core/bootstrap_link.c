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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bootstrap_int.h"
#include "core/log.h"

#define LINK_MAGIC 0x4b4c5242u               /* "BRLK" */
#define LINK_SLICE_NS (20 * 1000000ll)       /* how often a waiter looks at the queue */
#define LINK_HELLO_NS (5 * 1000000000ll)     /* an accepted connection must say who it is */
#define LINK_ROOT_RETRY_NS (50 * 1000000ll)

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

/* Wait for the connection described by `want`. Quiet. */
static braid_status_t link_claim(bs_listener_t *lis, const bs_link_hello_t *want,
                                 int64_t deadline, int abort_fd, int *fd_p)
{
    for (;;) {
        struct pollfd pfd = { .fd = lis->fd, .events = POLLIN };
        braid_status_t st;
        int fd = link_take(lis, want);
        if (fd >= 0) {
            *fd_p = fd;
            return BRAID_OK;
        }
        st = link_accept_some(lis, want, fd_p);
        if (st != BRAID_INPROGRESS)
            return st;
        BRAID_CHECK(braid_socket_wait(&pfd, 1, deadline, LINK_SLICE_NS, abort_fd));
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

static braid_status_t link_table_check(braid_bootstrap_t *bs, const braid_sockaddr_t *root)
{
    char where[BRAID_SOCKADDR_STRLEN];
    for (int r = 0; r < bs->nranks; r++) {
        bs->recs[r].host[BS_HOST_LEN - 1] = '\0';
        if (bs->recs[r].rank != r || !braid_sockaddr_valid(&bs->recs[r].addr))
            return braid_err(BRAID_ERR_REMOTE, "bootstrap: the root at %s sent a malformed "
                             "table (row %d)", braid_sockaddr_str(root, where, sizeof(where)), r);
    }
    return BRAID_OK;
}

/* The root's reply and table. BRAID_INPROGRESS: the connection closed first; try again. */
static braid_status_t link_table_recv(braid_bootstrap_t *bs, int fd, const braid_sockaddr_t *root)
{
    int64_t deadline = bs->timeout_s > 0 ? braid_deadline_after_s(bs->timeout_s + BS_GRACE_S)
                                         : BRAID_DEADLINE_NONE;
    bs_reply_t reply;
    braid_status_t st = braid_socket_recv_all(fd, &reply, sizeof(reply), deadline, bs->abort_fd);
    if (st == BRAID_ERR_REMOTE && (bs->uid.flags & BRAID_UID_ROOT_AT_RANK0))
        return BRAID_INPROGRESS;   /* a previous job's root on this port was closing */
    if (st < 0)
        return link_root_err(bs, st, root, 0);
    if (reply.magic != BS_PROTO_MAGIC)
        return braid_err(BRAID_ERR_REMOTE, "bootstrap: the root sent a malformed reply (magic "
                         "0x%08x): NCCL_COMM_ID names a port of another program?", reply.magic);
    if (reply.status != BRAID_OK) {
        reply.text[BS_TEXT_LEN - 1] = '\0';
        st = reply.status < 0 && reply.status >= BRAID_ERR_DEVICE ? reply.status
                                                                  : BRAID_ERR_REMOTE;
        return braid_err(st, "%s", reply.text);
    }
    st = braid_socket_recv_all(fd, bs->recs, (size_t)bs->nranks * sizeof(*bs->recs), deadline,
                               bs->abort_fd);
    if (st == BRAID_OK)
        st = braid_socket_recv_all(fd, bs->infos, (size_t)bs->nranks * bs->info_len, deadline,
                                   bs->abort_fd);
    if (st < 0)
        return link_root_err(bs, st, root, 0);
    return link_table_check(bs, root);
}

braid_status_t braid_bootstrap_root_exchange(braid_bootstrap_t *bs, const braid_sockaddr_t *root)
{
    int64_t deadline = braid_deadline_after_s(bs->timeout_s);
    for (;;) {
        int fd = -1;
        braid_status_t st = braid_socket_connect(root, 1, deadline, bs->abort_fd, &fd);
        if (st < 0)
            return link_root_err(bs, st, root, 1);
        st = link_hello_send(bs, fd, deadline);
        if (st == BRAID_ERR_REMOTE && (bs->uid.flags & BRAID_UID_ROOT_AT_RANK0))
            st = BRAID_INPROGRESS;
        else if (st < 0)
            st = link_root_err(bs, st, root, 0);
        else
            st = link_table_recv(bs, fd, root);
        braid_socket_close(fd);
        if (st != BRAID_INPROGRESS)
            return st;
        BRAID_INFO(BRAID_SUB_BOOTSTRAP, "bootstrap: rank %d: the root closed the connection "
                   "before answering; connecting again", bs->rank);
        if (braid_time_ns() + LINK_ROOT_RETRY_NS >= deadline)
            return link_root_err(bs, BRAID_ERR_REMOTE, root, 0);
        st = braid_socket_sleep(LINK_ROOT_RETRY_NS, bs->abort_fd);
        if (st < 0)
            return link_root_err(bs, st, root, 0);
    }
}

/* ---- ring ---- */

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
    if (st < 0)
        return braid_bootstrap_peer_err(bs, st, next, "ring setup (connecting to it)");
    st = link_claim(bs->lis, &want, deadline, bs->abort_fd, &bs->prev_fd);
    if (st < 0)
        return braid_bootstrap_peer_err(bs, st, prev, "ring setup (waiting for its connection)");
    return BRAID_OK;
}
