/*
 * Bootstrap, the ranks' side (see bootstrap.h; the root thread is in bootstrap_root.c).
 *
 * join:  listen on the chosen interface -> hello to the root -> table of every rank's
 *        listener and info -> connect to rank+1's listener, take rank-1's connection.
 * split: the child's members connect straight to each other's listeners (from the parent's
 *        table), tagged with the child's nonce, so a listener serves every communicator of
 *        the rank that made it (bootstrap_link.c; it dispatches accepted connections).
 * The all-gather and barrier around the ring are in bootstrap_ring.c.
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
#include "base/log.h"
#include "base/param.h"
#include "topo/host.h"

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

void braid_bootstrap_uid_release(const braid_uid_t *uid)
{
    if (!(uid->flags & BRAID_UID_ROOT_AT_RANK0))
        braid_bootstrap_root_cancel(uid->nonce);
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
    braid_bootstrap_t *bs = NULL;
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
    braid_bootstrap_t *bs = NULL;
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

void braid_bootstrap_watch_parent(braid_bootstrap_t *bs, braid_bootstrap_t *parent)
{
    bs->parent = parent != NULL && parent->nranks > 1 ? parent : NULL;
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
    bs->parent = NULL;   /* watched only while the ring is made */
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
    braid_bootstrap_t *bs = NULL;
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
    braid_bootstrap_t *bs = NULL;
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
