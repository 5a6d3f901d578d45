/*
 * Bootstrap, the ranks' side (see bootstrap.h; the root thread is in bootstrap_root.c).
 *
 * join:  listen on the chosen interface -> hello to the root -> table of every rank's
 *        listener and info -> connect to rank+1's listener, take rank-1's connection.
 * split: the child's members connect straight to each other's listeners (from the parent's
 *        table), tagged with the child's nonce, so a listener serves every communicator of
 *        the rank that made it (bootstrap_link.c dispatches accepted connections).
 *
 * All-gather around the ring, n-1 steps; step t sends block (r - t) to r+1 and receives
 * block (r - t - 1) from r-1, both at once so large blocks cannot deadlock:
 *
 *   step 0   r0 -a-> r1 -b-> r2 -c-> r0        after n-1 steps every rank holds
 *   step 1   r0 -c-> r1 -a-> r2 -b-> r0        every block
 *
 * Each block travels in a frame (bs_frame_t). A rank that sees its predecessor fail sends a
 * FAIL frame naming it instead of data, and every rank forwards it, so all ranks report the
 * rank that died instead of their own neighbour.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/bootstrap_int.h"
#include "core/log.h"
#include "core/param.h"
#include "topo/host.h"

#define BS_FRAME_DATA 0x41544144u  /* "DATA" */
#define BS_FRAME_FAIL 0x4c494146u  /* "FAIL" */
#define BS_FAIL_SEND_NS 1000000000ll

typedef enum { BS_FAIL_CLOSED = 1, BS_FAIL_TIMEOUT = 2, BS_FAIL_ABORTED = 3 } bs_fail_t;

typedef struct bs_frame {
    uint32_t kind;
    uint32_t reason;    /* FAIL: bs_fail_t */
    int32_t rank;       /* FAIL: the rank that failed */
    int32_t reporter;   /* FAIL: the rank that saw it fail */
    uint64_t len;       /* DATA: payload bytes that follow */
} bs_frame_t;

/* One direction of a ring step: a frame header, then its payload. */
typedef struct bs_xfer {
    int fd;
    void *hdr;
    size_t hlen;
    void *data;
    size_t dlen;
    size_t off;         /* over header then payload */
} bs_xfer_t;

/* ---- helpers ---- */

static int bs_timeout_param(void)
{
    int64_t v = braid_param_int(BRAID_P_BOOTSTRAP_TIMEOUT);
    return v <= 0 ? 0 : v > INT_MAX ? INT_MAX : (int)v;
}

static uint64_t bs_mix(uint64_t a, uint64_t b)
{
    uint64_t x = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static braid_status_t bs_random64(uint64_t *val_p)
{
    size_t got = 0;
    while (got < sizeof(*val_p)) {
        ssize_t n = getrandom((char *)val_p + got, sizeof(*val_p) - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return braid_err(BRAID_ERR_SYSTEM, "getrandom failed: %s", strerror(errno));
        got += (size_t)n;
    }
    return BRAID_OK;
}

static void bs_uid_addr(const braid_uid_t *uid, braid_sockaddr_t *addr_p)
{
    memset(addr_p, 0, sizeof(*addr_p));
    memcpy(addr_p, uid->addr, sizeof(uid->addr) < sizeof(*addr_p) ? sizeof(uid->addr)
                                                                  : sizeof(*addr_p));
}

/* ---- ids ---- */

braid_status_t braid_bootstrap_check_uid(const braid_uid_t *uid)
{
    braid_sockaddr_t addr;
    if (uid == NULL)
        return braid_err(BRAID_ERR_INVALID, "unique id is NULL");
    if (uid->magic != BRAID_UID_MAGIC)
        return braid_err(BRAID_ERR_INVALID, "unique id has magic 0x%08x, not 0x%08x: it was not "
                         "made by this library's ncclGetUniqueId, or was damaged in transfer",
                         uid->magic, BRAID_UID_MAGIC);
    if (uid->version != BRAID_UID_VERSION)
        return braid_err(BRAID_ERR_INVALID, "unique id has version %u, this library reads %u: "
                         "all ranks must run the same braid", uid->version, BRAID_UID_VERSION);
    if ((uid->flags & ~BRAID_UID_ROOT_AT_RANK0) != 0)
        return braid_err(BRAID_ERR_INVALID, "unique id has unknown flags 0x%x", uid->flags);
    bs_uid_addr(uid, &addr);
    if (!braid_sockaddr_valid(&addr))
        return braid_err(BRAID_ERR_INVALID, "unique id names no valid root address (family "
                         "%d): it was damaged in transfer", addr.sa.sa_family);
    return BRAID_OK;
}

braid_status_t braid_bootstrap_get_uid(braid_uid_t *uid)
{
    const char *comm_id = braid_param_str(BRAID_P_COMM_ID);
    braid_sockaddr_t addr;
    char ifname[IF_NAMESIZE], where[BRAID_SOCKADDR_STRLEN];

    if (uid == NULL)
        return braid_err(BRAID_ERR_INVALID, "unique id pointer is NULL");
    memset(uid, 0, sizeof(*uid));
    uid->magic = BRAID_UID_MAGIC;
    uid->version = BRAID_UID_VERSION;
    if (comm_id != NULL && comm_id[0] != '\0') {
        /* Rank 0 starts the root there. The nonce depends only on the address, so ranks
         * that each call ncclGetUniqueId (as NCCL allows with NCCL_COMM_ID) agree. */
        BRAID_CHECK(braid_socket_parse_addr(comm_id, &addr));
        uid->flags = BRAID_UID_ROOT_AT_RANK0;
        uid->nonce = braid_host_fnv1a(BRAID_FNV1A_INIT, &addr, braid_sockaddr_len(&addr));
    } else {
        BRAID_CHECK(bs_random64(&uid->nonce));
        BRAID_CHECK(braid_socket_find_if(NULL, &addr, ifname));
        BRAID_CHECK(braid_bootstrap_root_start(&addr, 0, uid->nonce, bs_timeout_param()));
        BRAID_INFO(BRAID_SUB_BOOTSTRAP | BRAID_SUB_INIT, "bootstrap: unique id root on %s (%s)",
                   braid_sockaddr_str(&addr, where, sizeof(where)), ifname);
    }
    memcpy(uid->addr, &addr, braid_sockaddr_len(&addr));
    return BRAID_OK;
}

/* ---- object ---- */

static braid_status_t bs_alloc(int rank, int nranks, size_t info_len, braid_bootstrap_t **bs_p)
{
    braid_bootstrap_t *bs = calloc(1, sizeof(*bs));
    if (bs == NULL)
        return braid_err(BRAID_ERR_NOMEM, "bootstrap: no memory");
    bs->rank = rank;
    bs->nranks = nranks;
    bs->info_len = info_len;
    bs->next_fd = bs->prev_fd = -1;
    bs->timeout_s = bs_timeout_param();
    bs->recs = calloc((size_t)nranks, sizeof(*bs->recs));
    bs->infos = calloc((size_t)nranks * info_len + 1, 1);
    bs->abort_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (bs->recs == NULL || bs->infos == NULL || bs->abort_fd < 0) {
        braid_status_t st = bs->abort_fd < 0
            ? braid_err(BRAID_ERR_SYSTEM, "bootstrap: eventfd failed: %s", strerror(errno))
            : braid_err(BRAID_ERR_NOMEM, "bootstrap: no memory for %d ranks", nranks);
        braid_bootstrap_destroy(bs);
        return st;
    }
    *bs_p = bs;
    return BRAID_OK;
}

braid_status_t braid_bootstrap_create(const braid_uid_t *uid, int rank, int nranks,
                                      const void *info, size_t info_len,
                                      braid_bootstrap_t **bs_p)
{
    braid_bootstrap_t *bs;
    bs_rec_t *me;
    BRAID_CHECK(braid_bootstrap_check_uid(uid));
    if (nranks < 1 || nranks > BS_NRANKS_MAX || rank < 0 || rank >= nranks)
        return braid_err(BRAID_ERR_INVALID, "bootstrap: rank %d of nranks %d is out of range "
                         "(nranks 1..%d, rank 0..nranks-1)", rank, nranks, BS_NRANKS_MAX);
    if (info_len > BS_INFO_MAX || (info_len > 0 && info == NULL))
        return braid_err(BRAID_ERR_INVALID, "bootstrap: info of %zu bytes at %p (limit %u)",
                         info_len, info, BS_INFO_MAX);
    BRAID_CHECK(bs_alloc(rank, nranks, info_len, &bs));
    bs->uid = *uid;
    bs->nonce = uid->nonce;
    if (info_len > 0)
        memcpy(bs->infos + (size_t)rank * info_len, info, info_len);
    me = &bs->recs[rank];
    me->rank = rank;
    me->pid = (uint32_t)getpid();
    me->host_id = braid_host_id();
    snprintf(me->host, sizeof(me->host), "%s", braid_host_name());
    *bs_p = bs;
    return BRAID_OK;
}

static int bs_members_ok(const braid_bootstrap_t *parent, int rank, int nranks,
                         const int *members)
{
    unsigned char *seen = calloc((size_t)parent->nranks, 1);
    int ok = seen != NULL && members[rank] == parent->rank;
    for (int i = 0; ok && i < nranks; i++) {
        ok = members[i] >= 0 && members[i] < parent->nranks && !seen[members[i]];
        if (ok)
            seen[members[i]] = 1;
    }
    free(seen);
    return ok;
}

braid_status_t braid_bootstrap_split_create(braid_bootstrap_t *parent, int rank, int nranks,
                                            const int *members, uint64_t tag,
                                            braid_bootstrap_t **bs_p)
{
    braid_bootstrap_t *bs;
    if (parent == NULL || !parent->joined)
        return braid_err(BRAID_ERR_USAGE, "bootstrap split: the parent has not joined");
    if (nranks < 1 || nranks > parent->nranks || rank < 0 || rank >= nranks || members == NULL)
        return braid_err(BRAID_ERR_INVALID, "bootstrap split: rank %d of %d out of a parent of "
                         "%d ranks", rank, nranks, parent->nranks);
    if (!bs_members_ok(parent, rank, nranks, members))
        return braid_err(BRAID_ERR_INVALID, "bootstrap split: members must be distinct parent "
                         "ranks in 0..%d and members[%d] must be this rank (%d)",
                         parent->nranks - 1, rank, parent->rank);
    BRAID_CHECK(bs_alloc(rank, nranks, parent->info_len, &bs));
    bs->uid = parent->uid;
    bs->is_child = 1;
    bs->tag = tag;
    bs->nonce = bs_mix(parent->nonce, tag);
    for (int i = 0; i < nranks; i++) {
        bs->recs[i] = parent->recs[members[i]];
        bs->recs[i].rank = i;
        memcpy(bs->infos + (size_t)i * bs->info_len,
               parent->infos + (size_t)members[i] * bs->info_len, bs->info_len);
    }
    if (nranks > 1)
        bs->lis = braid_bootstrap_listener_ref(parent->lis);
    *bs_p = bs;
    return BRAID_OK;
}

void braid_bootstrap_abort(braid_bootstrap_t *bs)
{
    uint64_t one = 1;
    if (bs == NULL)
        return;
    atomic_store(&bs->aborted, 1);
    if (write(bs->abort_fd, &one, sizeof(one)) < 0)
        BRAID_INFO(BRAID_SUB_BOOTSTRAP, "bootstrap: abort write failed: %s", strerror(errno));
}

void braid_bootstrap_destroy(braid_bootstrap_t *bs)
{
    if (bs == NULL)
        return;
    braid_socket_close(bs->next_fd);
    braid_socket_close(bs->prev_fd);
    braid_socket_close(bs->abort_fd);
    braid_bootstrap_listener_unref(bs->lis);
    free(bs->recs);
    free(bs->infos);
    free(bs);
}

/* ---- joining ---- */

/* Listen where this rank will be reached, then trade records with the root. */
static braid_status_t bs_join_root(braid_bootstrap_t *bs)
{
    braid_sockaddr_t root, addr;
    char ifname[IF_NAMESIZE], where[BRAID_SOCKADDR_STRLEN];
    bs_uid_addr(&bs->uid, &root);
    if (bs->nranks == 1) {
        if (!(bs->uid.flags & BRAID_UID_ROOT_AT_RANK0))
            braid_bootstrap_root_cancel(bs->nonce);
        return BRAID_OK;
    }
    if ((bs->uid.flags & BRAID_UID_ROOT_AT_RANK0) && bs->rank == 0) {
        addr = root;
        BRAID_CHECK(braid_bootstrap_root_start(&addr, 1, bs->nonce, bs->timeout_s));
    }
    BRAID_CHECK(braid_socket_find_if(&root, &addr, ifname));
    BRAID_CHECK(braid_bootstrap_listener_create(&addr, &bs->lis));
    bs->recs[bs->rank].addr = bs->lis->addr;
    BRAID_INFO(BRAID_SUB_BOOTSTRAP | BRAID_SUB_INIT, "bootstrap: rank %d of %d listens on %s "
               "(%s)", bs->rank, bs->nranks,
               braid_sockaddr_str(&bs->lis->addr, where, sizeof(where)), ifname);
    return braid_bootstrap_root_exchange(bs, &root);
}

braid_status_t braid_bootstrap_join(braid_bootstrap_t *bs)
{
    braid_status_t st = BRAID_OK;
    if (bs->joined)
        return braid_err(BRAID_ERR_USAGE, "bootstrap: rank %d has already joined", bs->rank);
    if (!bs->is_child)
        st = bs_join_root(bs);
    if (st == BRAID_OK && bs->nranks > 1)
        st = braid_bootstrap_ring_connect(bs);
    if (st < 0) {
        bs->failed = st;
        return st;
    }
    bs->joined = 1;
    BRAID_INFO(BRAID_SUB_BOOTSTRAP, "bootstrap: rank %d of %d joined (nonce %016" PRIx64 ")",
               bs->rank, bs->nranks, bs->nonce);
    return BRAID_OK;
}

braid_status_t braid_bootstrap_init(const braid_uid_t *uid, int rank, int nranks,
                                    const void *info, size_t info_len, braid_bootstrap_t **bs_p)
{
    braid_bootstrap_t *bs;
    braid_status_t st;
    BRAID_CHECK(braid_bootstrap_create(uid, rank, nranks, info, info_len, &bs));
    st = braid_bootstrap_join(bs);
    if (st < 0) {
        braid_bootstrap_destroy(bs);
        return st;
    }
    *bs_p = bs;
    return BRAID_OK;
}

braid_status_t braid_bootstrap_split(braid_bootstrap_t *parent, int rank, int nranks,
                                     const int *members, uint64_t tag,
                                     braid_bootstrap_t **bs_p)
{
    braid_bootstrap_t *bs;
    braid_status_t st;
    BRAID_CHECK(braid_bootstrap_split_create(parent, rank, nranks, members, tag, &bs));
    st = braid_bootstrap_join(bs);
    if (st < 0) {
        braid_bootstrap_destroy(bs);
        return st;
    }
    *bs_p = bs;
    return BRAID_OK;
}

/* ---- all-gather ---- */

static braid_status_t bs_xfer_send(bs_xfer_t *x)
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
static braid_status_t bs_xfer_recv(bs_xfer_t *x)
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

/* Tell rank+1 that `failed` failed, if no frame of ours is half sent. */
static void bs_fail_forward(braid_bootstrap_t *bs, const bs_xfer_t *sx, int failed,
                            bs_fail_t reason, int reporter)
{
    bs_frame_t f = { .kind = BS_FRAME_FAIL, .reason = reason, .rank = failed,
                     .reporter = reporter };
    if (bs->next_fd < 0 || failed == (bs->rank + 1) % bs->nranks ||
        (sx->off != 0 && sx->off != sx->hlen + sx->dlen))
        return;
    (void)braid_socket_send_all(bs->next_fd, &f, sizeof(f), braid_time_ns() + BS_FAIL_SEND_NS,
                                -1);
}

/* A FAIL frame came around the ring: pass it on and report the rank it names. */
static braid_status_t bs_fail_report(braid_bootstrap_t *bs, const bs_xfer_t *sx,
                                     const bs_frame_t *f, const char *what)
{
    char who[160];
    if (f->rank < 0 || f->rank >= bs->nranks || f->reporter < 0 || f->reporter >= bs->nranks)
        return braid_err(BRAID_ERR_REMOTE, "bootstrap: rank %d received a malformed failure "
                         "notice during %s", bs->rank, what);
    bs_fail_forward(bs, sx, f->rank, (bs_fail_t)f->reason, f->reporter);
    braid_bootstrap_rec_str(&bs->recs[f->rank], who, sizeof(who));
    if (f->reason == BS_FAIL_TIMEOUT)
        return braid_err(BRAID_ERR_TIMEOUT, "bootstrap: %s did not respond within %d s during "
                         "%s: it is hung, or has not reached this step (seen by rank %d)",
                         who, bs->timeout_s, what, f->reporter);
    if (f->reason == BS_FAIL_ABORTED)
        return braid_err(BRAID_ERR_REMOTE, "bootstrap: %s aborted its communicator during %s",
                         who, what);
    return braid_err(BRAID_ERR_REMOTE, "bootstrap: %s closed the connection during %s: it has "
                     "probably exited (seen by rank %d)", who, what, f->reporter);
}

/* The received header is complete: data of the right size, or a failure notice. */
static braid_status_t bs_frame_check(braid_bootstrap_t *bs, const bs_xfer_t *sx,
                                     const bs_frame_t *f, size_t len, const char *what)
{
    int prev = (bs->rank + bs->nranks - 1) % bs->nranks;
    if (f->kind == BS_FRAME_FAIL)
        return bs_fail_report(bs, sx, f, what);
    if (f->kind != BS_FRAME_DATA)
        return braid_err(BRAID_ERR_REMOTE, "bootstrap: rank %d sent a malformed frame (kind "
                         "0x%x) during %s", prev, f->kind, what);
    if (f->len != len)
        return braid_err(BRAID_ERR_USAGE, "bootstrap: rank %d sent %" PRIu64 " bytes per rank "
                         "in %s but rank %d expects %zu: the ranks make different bootstrap "
                         "calls", prev, f->len, what, bs->rank, len);
    return BRAID_OK;
}

/* A transfer with a neighbour failed: notify rank+1 and record the error. */
static braid_status_t bs_step_fail(braid_bootstrap_t *bs, const bs_xfer_t *sx,
                                   braid_status_t st, int sending, const char *what)
{
    int n = bs->nranks, peer = sending ? (bs->rank + 1) % n : (bs->rank + n - 1) % n;
    int err = errno;
    if (st == BRAID_ERR_ABORTED)
        bs_fail_forward(bs, sx, bs->rank, BS_FAIL_ABORTED, bs->rank);
    else if (!sending)
        bs_fail_forward(bs, sx, peer,
                        st == BRAID_ERR_TIMEOUT ? BS_FAIL_TIMEOUT : BS_FAIL_CLOSED, bs->rank);
    errno = err;
    return braid_bootstrap_peer_err(bs, st, peer, what);
}

/* One ring step: send `sbuf` to rank+1 while receiving rank-1's block into rbuf. */
static braid_status_t bs_step(braid_bootstrap_t *bs, const void *sbuf, void *rbuf, size_t len,
                              int64_t deadline, const char *what)
{
    bs_frame_t shdr = { .kind = BS_FRAME_DATA, .rank = bs->rank, .len = len }, rhdr;
    bs_xfer_t sx = { bs->next_fd, &shdr, sizeof(shdr), (void *)sbuf, len, 0 };
    bs_xfer_t rx = { bs->prev_fd, &rhdr, sizeof(rhdr), rbuf, len, 0 };
    int checked = 0;
    for (;;) {
        struct pollfd pfd[2] = { { .fd = -1 }, { .fd = -1 } };
        braid_status_t st = bs_xfer_send(&sx);
        if (st < 0)
            return bs_step_fail(bs, &sx, st, 1, what);
        st = bs_xfer_recv(&rx);
        if (st < 0)
            return bs_step_fail(bs, &sx, st, 0, what);
        if (!checked && rx.off == rx.hlen) {
            BRAID_CHECK(bs_frame_check(bs, &sx, &rhdr, len, what));
            checked = 1;
            continue;
        }
        if (sx.off == sx.hlen + sx.dlen && rx.off == rx.hlen + rx.dlen)
            return BRAID_OK;
        if (sx.off < sx.hlen + sx.dlen)
            pfd[0] = (struct pollfd){ .fd = sx.fd, .events = POLLOUT };
        if (rx.off < rx.hlen + rx.dlen)
            pfd[1] = (struct pollfd){ .fd = rx.fd, .events = POLLIN };
        st = braid_socket_wait(pfd, 2, deadline, 0, bs->abort_fd);
        if (st < 0)
            return bs_step_fail(bs, &sx, st, st == BRAID_ERR_TIMEOUT && pfd[1].fd < 0, what);
    }
}

static braid_status_t bs_usable(braid_bootstrap_t *bs, const char *what)
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

static braid_status_t bs_allgather(braid_bootstrap_t *bs, const void *mine, void *out,
                                   size_t len, const char *what)
{
    int n = bs->nranks, r = bs->rank;
    int64_t deadline;
    BRAID_CHECK(bs_usable(bs, what));
    if (len > 0 && (char *)out + (size_t)r * len != mine)
        memmove((char *)out + (size_t)r * len, mine, len);
    deadline = braid_deadline_after_s(bs->timeout_s);
    for (int t = 0; t < n - 1; t++) {
        int sblk = (r - t + n) % n, rblk = (r - t - 1 + n) % n;
        braid_status_t st = bs_step(bs, len ? (char *)out + (size_t)sblk * len : NULL,
                                    len ? (char *)out + (size_t)rblk * len : NULL, len,
                                    deadline, what);
        if (st < 0) {
            bs->failed = st;
            return st;
        }
    }
    return BRAID_OK;
}

braid_status_t braid_bootstrap_allgather(braid_bootstrap_t *bs, const void *mine, void *out,
                                         size_t len)
{
    if (len > 0 && (mine == NULL || out == NULL))
        return braid_err(BRAID_ERR_INVALID, "bootstrap allgather of %zu bytes with a NULL "
                         "buffer", len);
    return bs_allgather(bs, mine, out, len, "allgather");
}

/* Zero-byte all-gather: the n-1 ring steps alone order every rank after every other. */
braid_status_t braid_bootstrap_barrier(braid_bootstrap_t *bs)
{
    return bs_allgather(bs, NULL, NULL, 0, "barrier");
}

/* ---- accessors ---- */

int braid_bootstrap_rank(const braid_bootstrap_t *bs)
{
    return bs->rank;
}

int braid_bootstrap_nranks(const braid_bootstrap_t *bs)
{
    return bs->nranks;
}

uint64_t braid_bootstrap_nonce(const braid_bootstrap_t *bs)
{
    return bs->nonce;
}

const void *braid_bootstrap_info(const braid_bootstrap_t *bs, int rank)
{
    if (rank < 0 || rank >= bs->nranks)
        return NULL;
    return bs->infos + (size_t)rank * bs->info_len;
}

uint64_t braid_bootstrap_host_id(const braid_bootstrap_t *bs, int rank)
{
    return rank >= 0 && rank < bs->nranks ? bs->recs[rank].host_id : 0;
}

const char *braid_bootstrap_peer_str(const braid_bootstrap_t *bs, int rank, char *buf,
                                     size_t len)
{
    if (rank < 0 || rank >= bs->nranks) {
        snprintf(buf, len, "rank %d (out of range)", rank);
        return buf;
    }
    return braid_bootstrap_rec_str(&bs->recs[rank], buf, len);
}
