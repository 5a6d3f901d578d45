/*
 * The network transport's communicator side: which provider, the connections to the ranks
 * of other hosts, the slot FIFO over a provider's messages, and the health links.
 *
 * Slots. A connection has K slots of NET_HDR + S bytes, registered once. The sender writes a
 * slot, commits it (header: length and the call's message header), and it is sent as one
 * message; slots are sent in order and reused once the provider says the send completed.
 * The receiver keeps its K receives posted, in slot order, so message i lands in slot
 * i mod K; releasing a slot posts its receive again. An operation is complete only once its
 * sends have completed (flush): with manual-progress providers nothing moves while no
 * thread is in a call.
 *
 * Health. Shared memory lets local ranks read each other's state; across hosts each pair of
 * ranks keeps one TCP "health" connection with keepalive (BRAID_NET_LOST_S). Over it a
 * rank says when it fails, aborts, is destroyed or its process exits (with the last
 * collective it completed); a connection that closes without such a word means the process
 * was killed, and one that times out means the host or the link is gone. Waiting ranks look
 * at these in the executor's peer checks (src/core/comm_health.c).
 */
#include <errno.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/comm.h"
#include "base/log.h"
#include "base/param.h"
#include "base/proc.h"
#include "base/socket.h"
#include "transports/net/net.h"

#define NET_HDR 64u
#define NET_HELLO_MAGIC 0x627261696468656cull   /* "braidhel" */
#define NET_HEALTH_MAGIC 0x6268u                 /* "bh" */

/* ---- providers -------------------------------------------------------------------------- */

/* Unnamed, an external plugin the user named, else the first of these that initialises.
 * UCX and libfabric use a real fabric where there is one; over plain Ethernet (two network
 * namespaces, docs/PERFORMANCE.md) UCX's tcp had the lowest times from 8 B to 128 KiB
 * (7 us at 8 B; libfabric's tcp;ofi_rxm 10, sockets 11) and all three were within the
 * noise of each other from 256 KiB up. */
static const braid_net_ops_t *net_builtin[] = { &braid_net_ucx, &braid_net_ofi,
                                                &braid_net_socket };
#define NET_NBUILTIN (sizeof(net_builtin) / sizeof(net_builtin[0]))

static braid_status_t net_init_named(const braid_net_ops_t *p, const char *how)
{
    braid_status_t st = p->init();
    if (st != BRAID_OK)
        return braid_err(st < 0 ? st : BRAID_ERR_INTERNAL, "net: %s provider %s cannot run "
                         "here: %s", how, p->name, braid_err_last());
    return BRAID_OK;
}

/* The provider this rank would use: named (config netName, NCCL_NET) or the first that
 * initialises. */
static braid_status_t net_pick(const braid_comm_t *comm, const braid_net_ops_t **prov_p)
{
    const braid_net_ops_t *plugin = braid_net_plugin_load();
    const char *want = comm->config.net_name[0] ? comm->config.net_name
                                                : braid_param_str(BRAID_P_NET);
    const char *how = comm->config.net_name[0] ? "netName" : "NCCL_NET";
    if (plugin == NULL && braid_net_plugin_named())
        return BRAID_ERR_INVALID;   /* the plugin's error is recorded */
    if (want[0] != '\0') {
        if (plugin != NULL && strcasecmp(want, plugin->name) == 0) {
            *prov_p = plugin;
            return net_init_named(plugin, how);
        }
        for (size_t i = 0; i < NET_NBUILTIN; i++)
            if (strcasecmp(want, net_builtin[i]->name) == 0) {
                *prov_p = net_builtin[i];
                return net_init_named(net_builtin[i], how);
            }
        return braid_err(BRAID_ERR_INVALID, "net: %s=%s names no network provider (known: "
                         "Socket, OFI, UCX%s%s)", how, want, plugin ? ", " : "",
                         plugin ? plugin->name : "");
    }
    if (plugin != NULL) {
        *prov_p = plugin;
        return net_init_named(plugin, "NCCL_NET_PLUGIN's");
    }
    for (size_t i = 0; i < NET_NBUILTIN; i++) {
        if (net_builtin[i]->init() == BRAID_OK) {
            *prov_p = net_builtin[i];
            return BRAID_OK;
        }
        BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net: provider %s not used: %s",
                   net_builtin[i]->name, braid_err_last());
    }
    return braid_err(BRAID_ERR_SYSTEM, "net: no network provider works here (the socket "
                     "provider: %s)", braid_err_last());
}

/* ---- per communicator ------------------------------------------------------------------- */

typedef struct net_health {
    int fd;                     /* -1: a rank of this host */
    int closed;                 /* the connection ended: 1 closed, 2 timed out / broke */
    int said;                   /* the rank told its state */
    int state;                  /* what it said (braid_comm_state_t) */
    int ready;                  /* it said its connections stand (setup) */
    uint64_t seq_done;          /* and the last collective it completed */
    unsigned char in[16];
    size_t in_off;
} net_health_t;

struct braid_net {
    const braid_net_ops_t *prov;
    void *listen;
    int health_fd;              /* health listener, closed after setup */
    net_health_t *health;       /* [nranks] */
    struct net_conn **sends;    /* [nranks]: the connections to remote ranks, NULL for */
    struct net_conn **recvs;    /* local ones (braid_net_drive) */
    int nranks;
    _Atomic uint64_t seq_done;
    _Atomic int gone;           /* the exit hook spoke last: say nothing more */
    braid_net_t *next;          /* every live one, for the exit hook */
};

static pthread_mutex_t net_live_lock = PTHREAD_MUTEX_INITIALIZER;
static braid_net_t *net_live;

typedef struct net_health_msg {
    uint16_t magic;
    uint16_t pad;
    int32_t state;
    uint64_t seq_done;
} net_health_msg_t;

_Static_assert(sizeof(net_health_msg_t) == 16, "health messages are 16 bytes");

static void health_say(braid_net_t *net, int nranks, int state)
{
    net_health_msg_t m = { .magic = NET_HEALTH_MAGIC, .state = state,
                           .seq_done = atomic_load(&net->seq_done) };
    for (int r = 0; r < nranks; r++) {
        size_t off = 0;
        if (net->health[r].fd >= 0)
            (void)braid_socket_send_nb(net->health[r].fd, &m, sizeof(m), &off);
    }
}

/* A process that exits with communicators still open tells their remote peers, so that
 * an exit after the last collective is not taken for a crash. */
__attribute__((destructor)) static void net_exit_hook(void)
{
    pthread_mutex_lock(&net_live_lock);
    for (braid_net_t *n = net_live; n != NULL; n = n->next)
        if (!atomic_exchange(&n->gone, 1))
            health_say(n, n->nranks, BRAID_COMM_DESTROYED);
    pthread_mutex_unlock(&net_live_lock);
}

void braid_net_publish_state(braid_comm_t *comm, int state)
{
    if (comm->net != NULL && !atomic_load(&comm->net->gone))
        health_say(comm->net, comm->nranks, state);
}

void braid_net_publish_done(braid_comm_t *comm, uint64_t seq_done)
{
    if (comm->net != NULL)
        atomic_store_explicit(&comm->net->seq_done, seq_done, memory_order_relaxed);
}

/* ---- the slot FIFO over a provider's messages ------------------------------------------ */

typedef struct net_slot_hdr {
    uint64_t len;
    braid_msg_hdr_t msg;
} net_slot_hdr_t;

_Static_assert(sizeof(net_slot_hdr_t) <= NET_HDR, "slot header fits NET_HDR");

typedef struct net_slot {
    char *buf;                  /* NET_HDR + slot_size bytes */
    void *req;                  /* the provider's request in flight on it */
    size_t got;                 /* receiver: bytes of the message it holds */
    int full;                   /* receiver: holds a message not yet released */
} net_slot_t;

typedef struct net_conn net_conn_t;

struct net_conn {
    braid_conn_t base;
    braid_net_t *net;
    const braid_net_ops_t *prov;
    const char *peer_host;
    int is_send;
    void *pcomm;                /* the provider's send or receive comm */
    void *mh;
    char *mem;
    net_slot_t *slots;
    uint32_t nslots;
    /* sender: slots committed, handed to the provider, completed (in order);
     * receiver: receives posted, slots released */
    uint64_t filled, posted, done;
    braid_status_t failed;
};

/* A provider error on this connection: record it once, naming the rank. */
static braid_status_t nc_fail(net_conn_t *c, braid_status_t st)
{
    if (c->failed == BRAID_OK)
        c->failed = braid_err(st == BRAID_ERR_REMOTE ? st : BRAID_ERR_REMOTE,
                              "net %s: the connection %s rank %d (%s) failed: %s",
                              c->prov->name, c->is_send ? "to" : "from", c->base.peer,
                              c->peer_host, braid_err_last());
    return c->failed;
}

static braid_status_t nc_send_progress(net_conn_t *c)
{
    while (c->posted < c->filled) {
        net_slot_t *s = &c->slots[c->posted % c->nslots];
        size_t len = NET_HDR + ((net_slot_hdr_t *)s->buf)->len;
        void *req = NULL;
        braid_status_t st = c->prov->isend(c->pcomm, s->buf, len, c->mh, &req);
        if (st < 0)
            return nc_fail(c, st);
        if (req == NULL)
            break;
        s->req = req;
        c->posted++;
    }
    while (c->done < c->posted) {
        net_slot_t *s = &c->slots[c->done % c->nslots];
        int done = 0;
        braid_status_t st = c->prov->test(s->req, &done, NULL);
        if (st < 0) {
            s->req = NULL;
            return nc_fail(c, st);
        }
        if (!done)
            break;
        s->req = NULL;
        c->done++;
    }
    return BRAID_OK;
}

static braid_status_t nc_send_slot(braid_conn_t *bc, size_t len, void **ptr_p, size_t *cap_p)
{
    net_conn_t *c = (net_conn_t *)bc;
    (void)len;
    if (c->failed != BRAID_OK)
        return c->failed;
    BRAID_CHECK(nc_send_progress(c));
    if (c->filled - c->done >= c->nslots)
        return BRAID_INPROGRESS;
    *ptr_p = c->slots[c->filled % c->nslots].buf + NET_HDR;
    *cap_p = bc->slot_size;
    return BRAID_OK;
}

static braid_status_t nc_send_commit(braid_conn_t *bc, size_t len, const braid_msg_hdr_t *hdr)
{
    net_conn_t *c = (net_conn_t *)bc;
    net_slot_hdr_t *h = (net_slot_hdr_t *)c->slots[c->filled % c->nslots].buf;
    h->len = len;
    h->msg = *hdr;
    c->filled++;
    return nc_send_progress(c);
}

static braid_status_t nc_flush(braid_conn_t *bc)
{
    net_conn_t *c = (net_conn_t *)bc;
    if (!c->is_send)
        return BRAID_OK;
    if (c->failed != BRAID_OK)
        return c->failed;
    BRAID_CHECK(nc_send_progress(c));
    return c->done == c->filled ? BRAID_OK : BRAID_INPROGRESS;
}

/* Keep K receives posted, strictly in slot order (message i must land in slot i mod K). */
static braid_status_t nc_recv_post(net_conn_t *c)
{
    while (c->posted < c->done + c->nslots) {
        net_slot_t *s = &c->slots[c->posted % c->nslots];
        void *req = NULL;
        braid_status_t st = c->prov->irecv(c->pcomm, s->buf, NET_HDR + c->base.slot_size,
                                           c->mh, &req);
        if (st < 0)
            return nc_fail(c, st);
        if (req == NULL)
            break;
        s->req = req;
        c->posted++;
    }
    return BRAID_OK;
}

/* Has the oldest receive landed? OK once it has, INPROGRESS while not. */
static braid_status_t nc_recv_progress(net_conn_t *c)
{
    net_slot_t *s = &c->slots[c->done % c->nslots];
    int done = 0;
    if (c->failed != BRAID_OK)
        return c->failed;
    if (s->full)
        return BRAID_OK;
    BRAID_CHECK(nc_recv_post(c));
    if (c->posted == c->done)
        return BRAID_INPROGRESS;
    braid_status_t st = c->prov->test(s->req, &done, &s->got);
    if (st < 0) {
        s->req = NULL;
        return nc_fail(c, st);
    }
    if (!done)
        return BRAID_INPROGRESS;
    s->req = NULL;
    s->full = 1;
    return BRAID_OK;
}

static braid_status_t nc_recv_slot(braid_conn_t *bc, const void **ptr_p, size_t *len_p,
                                   braid_msg_hdr_t *hdr_p)
{
    net_conn_t *c = (net_conn_t *)bc;
    net_slot_t *s = &c->slots[c->done % c->nslots];
    braid_status_t st = nc_recv_progress(c);
    if (st != BRAID_OK)
        return st;
    const net_slot_hdr_t *h = (const net_slot_hdr_t *)s->buf;
    if (s->got < NET_HDR || h->len > bc->slot_size || s->got != NET_HDR + h->len) {
        c->failed = braid_err(BRAID_ERR_REMOTE, "net %s: rank %d (%s) sent a malformed "
                              "message (%zu bytes, header says %llu)", c->prov->name,
                              bc->peer, c->peer_host, s->got, (unsigned long long)h->len);
        return c->failed;
    }
    *ptr_p = s->buf + NET_HDR;
    *len_p = (size_t)h->len;
    *hdr_p = h->msg;
    return BRAID_OK;
}

static braid_status_t nc_recv_release(braid_conn_t *bc)
{
    net_conn_t *c = (net_conn_t *)bc;
    c->slots[c->done % c->nslots].full = 0;
    c->done++;
    return nc_recv_post(c);
}

/*
 * A provider moves data only when driven (libfabric's manual progress and rendezvous, the
 * socket provider writing what the kernel takes), and a peer may be waiting for the rest of
 * a message this rank sent before it turned to wait on another connection, maybe a
 * shared-memory one: so while any operation of the comm waits, every send in flight and the
 * oldest receive of every connection are moved. Failures show where they are waited on.
 */
void braid_net_drive(braid_comm_t *comm)
{
    braid_net_t *net = comm->net;
    if (net == NULL)
        return;
    for (int r = 0; r < net->nranks; r++) {
        net_conn_t *s = net->sends[r], *c = net->recvs[r];
        if (s != NULL && s->failed == BRAID_OK && s->done < s->filled)
            (void)nc_send_progress(s);
        if (c != NULL && c->failed == BRAID_OK)
            (void)nc_recv_progress(c);
    }
}

static void nc_close(braid_conn_t *bc)
{
    net_conn_t *c = (net_conn_t *)bc;
    net_conn_t **mine = c->is_send ? c->net->sends : c->net->recvs;
    if (mine[bc->peer] == c)
        mine[bc->peer] = NULL;
    if (c->pcomm != NULL) {
        if (c->mh != NULL)
            c->prov->dereg_mr(c->pcomm, c->mh);
        if (c->is_send)
            c->prov->close_send(c->pcomm);
        else
            c->prov->close_recv(c->pcomm);
    }
    free(c->mem);
    free(c->slots);
    free(c);
}

static const braid_transport_ops_t net_conn_ops = {
    .name = "net",
    .send_slot = nc_send_slot,
    .send_commit = nc_send_commit,
    .recv_slot = nc_recv_slot,
    .recv_release = nc_recv_release,
    .flush = nc_flush,
    .close = nc_close,
};

/* Wrap a provider comm (owned from here on, also on failure) into a connection. */
static braid_status_t nc_make(braid_comm_t *comm, int peer, int is_send, void *pcomm,
                              braid_conn_t **conn_p)
{
    const braid_net_ops_t *prov = comm->net->prov;
    uint32_t nslots = comm->peers[0].nslots;
    size_t stride = NET_HDR + comm->slot_size;
    net_conn_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        is_send ? prov->close_send(pcomm) : prov->close_recv(pcomm);
        return braid_err(BRAID_ERR_NOMEM, "net: out of memory for a connection");
    }
    c->base.ops = &net_conn_ops;
    c->base.peer = peer;
    c->base.slot_size = comm->slot_size;
    c->net = comm->net;
    c->prov = prov;
    c->peer_host = comm->peers[peer].hostname;
    c->is_send = is_send;
    c->pcomm = pcomm;
    c->nslots = nslots;
    c->slots = calloc(nslots, sizeof(*c->slots));
    if (c->slots == NULL || posix_memalign((void **)&c->mem, 4096, stride * nslots) != 0) {
        c->mem = NULL;
        nc_close(&c->base);
        return braid_err(BRAID_ERR_NOMEM, "net: out of memory for %u slots of %zu bytes",
                         nslots, stride);
    }
    for (uint32_t i = 0; i < nslots; i++)
        c->slots[i].buf = c->mem + i * stride;
    braid_status_t st = prov->reg_mr(pcomm, c->mem, stride * nslots, &c->mh);
    if (st == BRAID_OK && !is_send)
        st = nc_recv_post(c);
    if (st != BRAID_OK) {
        nc_close(&c->base);
        return st;
    }
    (is_send ? comm->net->sends : comm->net->recvs)[peer] = c;
    *conn_p = &c->base;
    return BRAID_OK;
}

/* ---- setup: provider agreement, connections, handshake ---------------------------------- */

/* What each rank tells all others. */
typedef struct net_card {
    int32_t ok;                 /* 0: this rank has no provider; `version` says why */
    int32_t pad;
    char prov[32];
    char version[160];
    unsigned char handle[BRAID_NET_HANDLE_MAX];
    braid_sockaddr_t health;
} net_card_t;

/* The first message on every connection. */
typedef struct net_hello {
    uint64_t magic;
    uint64_t nonce;             /* the job (communicator) */
    int32_t from, to;
    char braid[32];             /* braid's version */
    char prov[32];
    char version[160];          /* the provider's version */
} net_hello_t;

static int net_remote(const braid_comm_t *comm, int r)
{
    return braid_topo_link(&comm->topo, comm->rank, r) == BRAID_LINK_NET;
}

static int net_any_remote(const braid_comm_t *comm)
{
    return comm->topo.nhosts > 1;
}

static void net_pause(void)
{
    struct timespec ts = { 0, 50000 };
    nanosleep(&ts, NULL);
}

static braid_status_t health_listen(braid_net_t *net, braid_sockaddr_t *addr_p)
{
    BRAID_CHECK(braid_socket_find_if(NULL, addr_p, NULL));   /* port 0 */
    return braid_socket_listen(addr_p, 0, &net->health_fd);
}

/* Pick the provider, listen with it and for health links, and fill this rank's card. A
 * rank without a provider still sends its card (ok = 0), so that every rank fails alike. */
static braid_status_t net_card_fill(braid_comm_t *comm, net_card_t *me)
{
    braid_net_t *net = comm->net;
    braid_status_t st = net_pick(comm, &net->prov);
    if (st == BRAID_OK)
        st = net->prov->listen(0, me->handle, &net->listen);
    if (st == BRAID_OK)
        st = health_listen(net, &me->health);
    if (st != BRAID_OK) {
        snprintf(me->version, sizeof(me->version), "%s", braid_err_last());
        return st;
    }
    me->ok = 1;
    snprintf(me->prov, sizeof(me->prov), "%s", net->prov->name);
    snprintf(me->version, sizeof(me->version), "%s", net->prov->version());
    return BRAID_OK;
}

/* Every rank must have a provider, and the same one. */
static braid_status_t net_agree(const braid_comm_t *comm, const net_card_t *cards)
{
    const net_card_t *me = &cards[comm->rank];
    for (int r = 0; r < comm->nranks; r++) {
        if (!cards[r].ok)
            return braid_err(BRAID_ERR_REMOTE, "net: rank %d (%s) has no network provider: "
                             "%s", r, comm->peers[r].hostname, cards[r].version);
        if (strcmp(cards[r].prov, me->prov) != 0 || strcmp(cards[r].version, me->version) != 0)
            return braid_err(BRAID_ERR_INVALID, "net: rank %d (%s) uses provider %s (%s) but "
                             "rank %d (%s) uses %s (%s): set NCCL_NET, and the same libraries, "
                             "on every host", r, comm->peers[r].hostname, cards[r].prov,
                             cards[r].version, comm->rank, comm->peers[comm->rank].hostname,
                             me->prov, me->version);
    }
    return BRAID_OK;
}

static void hello_fill(const braid_comm_t *comm, int to, net_hello_t *h)
{
    memset(h, 0, sizeof(*h));
    h->magic = NET_HELLO_MAGIC;
    h->nonce = comm->nonce;
    h->from = comm->rank;
    h->to = to;
    snprintf(h->braid, sizeof(h->braid), "%s", BRAID_VERSION_STRING);
    snprintf(h->prov, sizeof(h->prov), "%s", comm->net->prov->name);
    snprintf(h->version, sizeof(h->version), "%s", comm->net->prov->version());
}

/*
 * Judge a hello that arrived on an accepted connection: 1 = take it, 0 = refuse it (not for
 * this job: close it and go on waiting), or an error (another braid or provider version in
 * this job). `got` is the message's length.
 */
static braid_status_t hello_judge(const braid_comm_t *comm, const net_hello_t *h, size_t got,
                                  void **recv_comms, int *take_p)
{
    net_hello_t mine;
    *take_p = 0;
    if (got != sizeof(*h) || h->magic != NET_HELLO_MAGIC) {
        BRAID_WARN("net: rank %d refused a connection that is not a braid handshake (%zu "
                   "bytes): another program?", comm->rank, got);
        return BRAID_OK;
    }
    if (h->nonce != comm->nonce || h->to != comm->rank || h->from < 0 ||
        h->from >= comm->nranks || !net_remote(comm, h->from)) {
        BRAID_WARN("net: rank %d refused a connection from rank %d of another job or "
                   "communicator (id %016llx, for rank %d; ours is %016llx)", comm->rank,
                   h->from, (unsigned long long)h->nonce, h->to,
                   (unsigned long long)comm->nonce);
        return BRAID_OK;
    }
    hello_fill(comm, h->from, &mine);
    if (strncmp(h->braid, mine.braid, sizeof(h->braid)) != 0 ||
        strncmp(h->prov, mine.prov, sizeof(h->prov)) != 0 ||
        strncmp(h->version, mine.version, sizeof(h->version)) != 0)
        return braid_err(BRAID_ERR_INVALID, "net: rank %d (%s) runs braid %.32s over %.32s "
                         "(%.160s), rank %d runs braid %s over %s (%s): use one braid and one "
                         "provider version on every host", h->from,
                         comm->peers[h->from].hostname, h->braid, h->prov, h->version,
                         comm->rank, mine.braid, mine.prov, mine.version);
    if (recv_comms[h->from] != NULL) {
        BRAID_WARN("net: rank %d refused a second connection from rank %d", comm->rank,
                   h->from);
        return BRAID_OK;
    }
    *take_p = 1;
    return BRAID_OK;
}

/* A connection being set up: one hello out or in. */
typedef struct net_pending {
    void *pcomm, *mh, *req;
    int peer;                   /* sends: the rank; receives: -1 until the hello says */
    int is_send;
    net_hello_t hello;
} net_pending_t;

static void pending_drop(const braid_net_ops_t *prov, net_pending_t *p)
{
    if (p->pcomm == NULL)
        return;
    if (p->mh != NULL)
        prov->dereg_mr(p->pcomm, p->mh);
    p->is_send ? prov->close_send(p->pcomm) : prov->close_recv(p->pcomm);
    p->pcomm = NULL;
}

/* Post, then test, the hello of p: 1 in *done_p once it has moved. */
static braid_status_t pending_step(const braid_net_ops_t *prov, net_pending_t *p, int *done_p,
                                   size_t *got_p)
{
    *done_p = 0;
    if (p->mh == NULL)
        BRAID_CHECK(prov->reg_mr(p->pcomm, &p->hello, sizeof(p->hello), &p->mh));
    if (p->req == NULL) {
        BRAID_CHECK(p->is_send ? prov->isend(p->pcomm, &p->hello, sizeof(p->hello), p->mh,
                                             &p->req)
                               : prov->irecv(p->pcomm, &p->hello, sizeof(p->hello), p->mh,
                                             &p->req));
        if (p->req == NULL)
            return BRAID_OK;
    }
    braid_status_t st = prov->test(p->req, done_p, got_p);
    if (st != BRAID_OK || *done_p)
        p->req = NULL;
    if (st == BRAID_OK && *done_p && p->mh != NULL) {
        prov->dereg_mr(p->pcomm, p->mh);
        p->mh = NULL;
    }
    return st;
}

typedef struct net_connecting {
    net_pending_t *sends;       /* [nranks] */
    net_pending_t **recvs;      /* accepted, hello not judged yet; each allocated on its own
                                 * because a receive is posted into its hello */
    int nrecvs, cap_recvs;
    void **send_comms, **recv_comms;   /* [nranks]: done */
    int want, have;             /* connections to finish, finished */
    int dropped;                /* accepted connections that failed before their hello */
    char dropped_why[256];      /* the last one's error */
} net_connecting_t;

static braid_status_t connecting_accept(braid_comm_t *comm, net_connecting_t *k)
{
    const braid_net_ops_t *prov = comm->net->prov;
    void *rc = NULL;
    BRAID_CHECK(prov->accept(comm->net->listen, &rc));
    if (rc == NULL)
        return BRAID_OK;
    net_pending_t *p = calloc(1, sizeof(*p));
    if (p != NULL && k->nrecvs == k->cap_recvs) {
        int cap = k->cap_recvs ? 2 * k->cap_recvs : 8;
        net_pending_t **n = realloc(k->recvs, (size_t)cap * sizeof(*n));
        if (n != NULL) {
            k->recvs = n;
            k->cap_recvs = cap;
        }
    }
    if (p == NULL || k->nrecvs == k->cap_recvs) {
        free(p);
        prov->close_recv(rc);
        return braid_err(BRAID_ERR_NOMEM, "net: out of memory accepting connections");
    }
    p->pcomm = rc;
    p->peer = -1;
    k->recvs[k->nrecvs++] = p;
    return BRAID_OK;
}

/*
 * While setup waits for the ranks of other hosts: has one of them died or failed? Its
 * health link says so; the bootstrap ring says so for ranks whose link is not up yet.
 */
#define SETUP_CHECK_NS (20 * 1000000ll)     /* how often a waiting rank looks */
#define SETUP_GONE_NS (1000 * 1000000ll)    /* for a peer's link to show why it failed */

/* Rank r, if its health link says it is gone or failed: the error naming it. */
static braid_status_t net_setup_peer(braid_comm_t *comm, int r)
{
    int gone;
    const char *why = braid_net_peer_check(comm, r, 0, 1, &gone);
    if (why == NULL)
        return BRAID_OK;
    if (gone == 1)   /* died without a word: tell the ranks that do not watch it */
        braid_bootstrap_setup_failed(comm->bs, r, BRAID_ERR_REMOTE);
    return braid_err(BRAID_ERR_REMOTE, "net %s: rank %d (pid %d on %s) %s while rank %d was "
                     "connecting to the ranks of other hosts", comm->net->prov->name, r,
                     (int)comm->peers[r].pid, comm->peers[r].hostname, why, comm->rank);
}

/* Every SETUP_CHECK_NS at most: the ranks `k` still misses (all when k is NULL). */
static braid_status_t net_setup_check(braid_comm_t *comm, const net_connecting_t *k,
                                      int64_t *next_p)
{
    int64_t now = braid_time_ns();
    if (now < *next_p)
        return BRAID_OK;
    *next_p = now + SETUP_CHECK_NS;
    for (int r = 0; r < comm->nranks; r++)
        if (net_remote(comm, r) &&
            (k == NULL || k->send_comms[r] == NULL || k->recv_comms[r] == NULL))
            BRAID_CHECK(net_setup_peer(comm, r));
    return braid_bootstrap_check(comm->bs);
}

/* The connection to rank r failed (the provider said why): if r died, say that instead. */
static braid_status_t net_setup_conn_failed(braid_comm_t *comm, int r, braid_status_t st)
{
    int64_t end = braid_time_ns() + SETUP_GONE_NS;
    char why[256];
    snprintf(why, sizeof(why), "%s", braid_err_last());
    do {
        struct timespec ts = { 0, 5000000 };
        BRAID_CHECK(net_setup_peer(comm, r));
        nanosleep(&ts, NULL);
    } while (braid_time_ns() < end);
    return braid_err(st, "net %s: rank %d's connection to rank %d (pid %d on %s) failed: %s",
                     comm->net->prov->name, comm->rank, r, (int)comm->peers[r].pid,
                     comm->peers[r].hostname, why);
}

static braid_status_t connecting_pass(braid_comm_t *comm, net_connecting_t *k)
{
    const braid_net_ops_t *prov = comm->net->prov;
    int done;
    size_t got = 0;
    BRAID_CHECK(connecting_accept(comm, k));
    for (int r = 0; r < comm->nranks; r++) {
        net_pending_t *p = &k->sends[r];
        if (p->pcomm == NULL || k->send_comms[r] != NULL)
            continue;
        braid_status_t st = pending_step(prov, p, &done, &got);
        if (st < 0)
            return net_setup_conn_failed(comm, r, st);
        if (done) {
            k->send_comms[r] = p->pcomm;
            p->pcomm = NULL;
            k->have++;
        }
    }
    for (int i = 0; i < k->nrecvs; i++) {
        net_pending_t *p = k->recvs[i];
        int take = 0;
        braid_status_t st = pending_step(prov, p, &done, &got);
        if (st == BRAID_OK && !done)
            continue;
        if (st == BRAID_OK) {
            BRAID_CHECK(hello_judge(comm, &p->hello, got, k->recv_comms, &take));
        } else {  /* it broke before saying who it is: a port scan or a stray, which must not
                 * fail the job; if it was a peer's, the timeout below tells why */
            snprintf(k->dropped_why, sizeof(k->dropped_why), "%s", braid_err_last());
            k->dropped++;
            BRAID_WARN("net: rank %d dropped a connection that failed before its handshake: "
                       "%s", comm->rank, k->dropped_why);
        }
        if (take) {
            k->recv_comms[p->hello.from] = p->pcomm;
            k->have++;
        } else {
            pending_drop(prov, p);
        }
        free(p);
        k->recvs[i--] = k->recvs[--k->nrecvs];
    }
    return BRAID_OK;
}

/* "2, 5 and 7" of the remote ranks whose connection to or from us is missing. */
static void connecting_missing(const braid_comm_t *comm, const net_connecting_t *k, char *buf,
                               size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int r = 0; r < comm->nranks && used + 16 < len; r++)
        if (net_remote(comm, r) && (k->send_comms[r] == NULL || k->recv_comms[r] == NULL))
            used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? ", " : "", r);
}

static braid_status_t net_connect_all(braid_comm_t *comm, const net_card_t *cards,
                                      net_connecting_t *k)
{
    const braid_net_ops_t *prov = comm->net->prov;
    int64_t deadline = braid_deadline_after_s(braid_param_int(BRAID_P_BOOTSTRAP_TIMEOUT));
    for (int r = 0; r < comm->nranks; r++) {
        if (!net_remote(comm, r))
            continue;
        k->want += 2;
        k->sends[r].peer = r;
        k->sends[r].is_send = 1;
        hello_fill(comm, r, &k->sends[r].hello);
        if (prov->connect(0, cards[r].handle, &k->sends[r].pcomm) != BRAID_OK)
            return net_setup_conn_failed(comm, r, BRAID_ERR_REMOTE);
    }
    int64_t check = 0;
    while (k->have < k->want) {
        BRAID_CHECK(connecting_pass(comm, k));
        BRAID_CHECK(net_setup_check(comm, k, &check));
        if (braid_time_ns() > deadline) {
            char missing[512];
            connecting_missing(comm, k, missing, sizeof(missing));
            char dropped[400] = "";
            if (k->dropped > 0)
                snprintf(dropped, sizeof(dropped), "; %d connections failed before their "
                         "handshake, the last with: %s", k->dropped, k->dropped_why);
            return braid_err(BRAID_ERR_TIMEOUT, "net %s: rank %d could not connect with ranks "
                             "%s within %lld s (BRAID_BOOTSTRAP_TIMEOUT)%s", prov->name,
                             comm->rank, missing,
                             (long long)braid_param_int(BRAID_P_BOOTSTRAP_TIMEOUT), dropped);
        }
        if (k->have < k->want)
            net_pause();
    }
    return BRAID_OK;
}

static void connecting_free(const braid_net_ops_t *prov, net_connecting_t *k, int n)
{
    for (int r = 0; r < n && k->sends != NULL; r++)
        pending_drop(prov, &k->sends[r]);
    for (int i = 0; i < k->nrecvs; i++) {
        pending_drop(prov, k->recvs[i]);
        free(k->recvs[i]);
    }
    for (int r = 0; r < n && k->recv_comms != NULL; r++)
        if (k->recv_comms[r] != NULL)
            prov->close_recv(k->recv_comms[r]);
    for (int r = 0; r < n && k->send_comms != NULL; r++)
        if (k->send_comms[r] != NULL)
            prov->close_send(k->send_comms[r]);
    free(k->sends);
    free(k->recvs);
    free(k->send_comms);
    free(k->recv_comms);
}

/* ---- health links ----------------------------------------------------------------------- */

typedef struct net_intro {
    uint64_t magic;
    uint64_t nonce;
    int32_t from, to;
} net_intro_t;

/* Keepalive so that a lost host or link shows within BRAID_NET_LOST_S seconds, idle or not. */
static void health_tune(int fd)
{
    int lost = (int)braid_param_int(BRAID_P_NET_LOST_S), one = 1;
    int idle = lost > 2 ? lost / 2 : 1, intvl = 1, cnt = lost - idle > 0 ? lost - idle : 1;
    unsigned user_ms = (unsigned)lost * 1000u;
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms));
}

/* Lower ranks connect to higher ones; each says who it is. Connecting never waits for an
 * accept (the kernel's backlog takes it), so every rank connects first, then accepts. */
static braid_status_t health_connect_all(braid_comm_t *comm, const net_card_t *cards)
{
    braid_net_t *net = comm->net;
    int64_t deadline = braid_deadline_after_s(braid_param_int(BRAID_P_BOOTSTRAP_TIMEOUT));
    int want = 0;
    for (int r = comm->rank + 1; r < comm->nranks; r++) {
        if (!net_remote(comm, r))
            continue;
        net_intro_t in = { NET_HELLO_MAGIC, comm->nonce, comm->rank, r };
        int fd;
        /* its listener was up before its card went out: a refusal means it is gone */
        braid_status_t st = braid_socket_connect(&cards[r].health, 0, deadline, -1, &fd);
        if (st == BRAID_OK) {
            net->health[r].fd = fd;
            st = braid_socket_send_all(fd, &in, sizeof(in), deadline, -1);
        }
        if (st != BRAID_OK && (errno == ECONNREFUSED || errno == ECONNRESET))
            braid_bootstrap_setup_failed(comm->bs, r, BRAID_ERR_REMOTE);
        if (st != BRAID_OK)
            return braid_err(BRAID_ERR_REMOTE, "net: rank %d cannot open its health link to "
                             "rank %d (pid %d on %s): %s", comm->rank, r,
                             (int)comm->peers[r].pid, comm->peers[r].hostname,
                             st == BRAID_ERR_TIMEOUT ? "timed out"
                             : errno == ECONNREFUSED ? "refused: its process is gone"
                                                     : strerror(errno));
    }
    for (int r = 0; r < comm->rank; r++)
        want += net_remote(comm, r);
    while (want > 0) {
        struct pollfd pfd = { .fd = net->health_fd, .events = POLLIN };
        net_intro_t in;
        int fd;
        braid_status_t st = braid_socket_accept(net->health_fd, &fd);
        if (st == BRAID_INPROGRESS) {
            BRAID_CHECK(braid_bootstrap_check(comm->bs));   /* a lower rank died meanwhile? */
            if (braid_socket_wait(&pfd, 1, deadline, SETUP_CHECK_NS, -1) == BRAID_ERR_TIMEOUT)
                return braid_err(BRAID_ERR_TIMEOUT, "net: rank %d: %d lower ranks on other "
                                 "hosts did not open their health links in time", comm->rank,
                                 want);
            continue;
        }
        if (st != BRAID_OK)
            return braid_err(st, "net: accepting a health link failed: %s", strerror(errno));
        st = braid_socket_recv_all(fd, &in, sizeof(in), deadline, -1);
        if (st != BRAID_OK || in.magic != NET_HELLO_MAGIC || in.nonce != comm->nonce ||
            in.to != comm->rank || in.from < 0 || in.from >= comm->rank ||
            !net_remote(comm, in.from) || net->health[in.from].fd >= 0) {
            BRAID_WARN("net: rank %d refused a health link that is not from this job",
                       comm->rank);
            braid_socket_close(fd);
            continue;
        }
        net->health[in.from].fd = fd;
        want--;
    }
    for (int r = 0; r < comm->nranks; r++)
        if (net->health[r].fd >= 0)
            health_tune(net->health[r].fd);
    return BRAID_OK;
}

/* Read what rank r said, and whether its link still stands. */
static void health_poll(net_health_t *h)
{
    while (h->fd >= 0 && !h->closed) {
        braid_status_t st = braid_socket_recv_nb(h->fd, h->in, sizeof(h->in), &h->in_off);
        if (st != BRAID_OK) {
            /* closed or reset by the peer's kernel: the process is gone; no answer: the
             * host or the link is */
            h->closed = errno == ETIMEDOUT || errno == EHOSTUNREACH || errno == ENETUNREACH
                            ? 2 : 1;
            return;
        }
        if (h->in_off < sizeof(h->in))
            return;
        net_health_msg_t m;
        memcpy(&m, h->in, sizeof(m));
        h->in_off = 0;
        if (m.magic == NET_HEALTH_MAGIC && m.state == BRAID_COMM_READY) {
            h->ready = 1;
        } else if (m.magic == NET_HEALTH_MAGIC) {
            h->said = 1;
            h->state = m.state;
            h->seq_done = m.seq_done;
        }
    }
}

const char *braid_net_peer_check(braid_comm_t *comm, int r, uint64_t seq, int p2p,
                                 int *gone_p)
{
    *gone_p = 0;
    if (comm->net == NULL || comm->net->health == NULL || comm->net->health[r].fd < 0)
        return NULL;
    net_health_t *h = &comm->net->health[r];
    health_poll(h);
    int finished = h->said && !p2p && h->seq_done >= seq;
    if (finished)
        return NULL;    /* it is done with this collective: what it does next is its own */
    *gone_p = !h->closed ? 0 : h->said ? 2 : 1;
    if (h->closed == 2)
        return "is unreachable (its host or the link to it is down)";
    if (h->said && h->state == BRAID_COMM_DESTROYED)
        return "destroyed its communicator";
    if (h->said && h->state == BRAID_COMM_ABORTED)
        return "aborted its communicator";
    if (h->said && h->state == BRAID_COMM_REVOKED)
        return "revoked its communicator";
    if (h->said && h->state == BRAID_COMM_ERROR)
        return "failed";
    if (h->closed)
        return "exited or was killed";
    return NULL;
}

/* ---- setup and teardown ----------------------------------------------------------------- */

/*
 * Once its own connections stand, a rank says so on its health links and goes on driving the
 * provider until every remote rank has said so too: with manual progress, the hello a rank
 * sent last may still need its own progress to reach the peer.
 */
static braid_status_t net_connected_wait(braid_comm_t *comm, net_connecting_t *k)
{
    braid_net_t *net = comm->net;
    int64_t deadline = braid_deadline_after_s(braid_param_int(BRAID_P_BOOTSTRAP_TIMEOUT));
    int64_t check = 0;
    health_say(net, comm->nranks, BRAID_COMM_READY);
    for (int r = 0; r < comm->nranks; r++) {
        net_health_t *h = &net->health[r];
        while (h->fd >= 0 && !h->ready) {
            BRAID_CHECK(connecting_pass(comm, k));   /* drives the provider; refuses strays */
            health_poll(h);
            BRAID_CHECK(net_setup_check(comm, NULL, &check));   /* its failure, if it said */
            if (!h->ready && braid_time_ns() > deadline)
                return braid_err(BRAID_ERR_TIMEOUT, "net: rank %d (pid %d on %s) did not "
                                 "finish connecting within %lld s (BRAID_BOOTSTRAP_TIMEOUT)", r,
                                 (int)comm->peers[r].pid, comm->peers[r].hostname,
                                 (long long)braid_param_int(BRAID_P_BOOTSTRAP_TIMEOUT));
            if (!h->ready)
                net_pause();
        }
    }
    return BRAID_OK;
}

static braid_status_t net_make_conns(braid_comm_t *comm, net_connecting_t *k)
{
    for (int r = 0; r < comm->nranks; r++) {
        if (!net_remote(comm, r))
            continue;
        void *sc = k->send_comms[r], *rc = k->recv_comms[r];
        k->send_comms[r] = k->recv_comms[r] = NULL;
        braid_status_t st = nc_make(comm, r, 1, sc, &comm->send_conns[r]);
        if (st == BRAID_OK)
            st = nc_make(comm, r, 0, rc, &comm->recv_conns[r]);
        else
            comm->net->prov->close_recv(rc);
        BRAID_CHECK(st);
    }
    return BRAID_OK;
}

static braid_status_t net_alloc(braid_comm_t *comm)
{
    braid_net_t *net = calloc(1, sizeof(*net));
    if (net == NULL || (net->health = calloc((size_t)comm->nranks, sizeof(net_health_t))) == NULL ||
        (net->sends = calloc((size_t)comm->nranks, sizeof(*net->sends))) == NULL ||
        (net->recvs = calloc((size_t)comm->nranks, sizeof(*net->recvs))) == NULL) {
        if (net != NULL) {
            free(net->health);
            free(net->sends);
        }
        free(net);
        return braid_err(BRAID_ERR_NOMEM, "net: out of memory for %d ranks", comm->nranks);
    }
    net->health_fd = -1;
    net->nranks = comm->nranks;
    for (int r = 0; r < comm->nranks; r++)
        net->health[r].fd = -1;
    comm->net = net;
    return BRAID_OK;
}

braid_status_t braid_net_setup(braid_comm_t *comm)
{
    int n = comm->nranks;
    net_connecting_t k = { 0 };
    net_card_t *cards = NULL;
    braid_status_t st;

    if (!net_any_remote(comm))
        return BRAID_OK;
    BRAID_CHECK(net_alloc(comm));
    cards = calloc((size_t)n, sizeof(*cards));
    k.sends = calloc((size_t)n, sizeof(*k.sends));
    k.send_comms = calloc((size_t)n, sizeof(void *));
    k.recv_comms = calloc((size_t)n, sizeof(void *));
    if (cards == NULL || k.sends == NULL || k.send_comms == NULL || k.recv_comms == NULL) {
        st = braid_err(BRAID_ERR_NOMEM, "net: out of memory for %d ranks", n);
        goto out;
    }
    st = net_card_fill(comm, &cards[comm->rank]);
    if (braid_bootstrap_allgather(comm->bs, &cards[comm->rank], cards, sizeof(*cards)) !=
        BRAID_OK && st == BRAID_OK)
        st = BRAID_ERR_REMOTE;   /* recorded by the bootstrap */
    BRAID_CHECK_GOTO(st, st, out);
    BRAID_CHECK_GOTO(st, net_agree(comm, cards), out);
    BRAID_CHECK_GOTO(st, health_connect_all(comm, cards), out);
    BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net: rank %d: health links to the ranks of "
               "other hosts up; connecting over %s", comm->rank, comm->net->prov->name);
    braid_proc_setup_pause("net");
    BRAID_CHECK_GOTO(st, net_connect_all(comm, cards, &k), out);
    BRAID_CHECK_GOTO(st, net_connected_wait(comm, &k), out);
    BRAID_CHECK_GOTO(st, net_make_conns(comm, &k), out);
    braid_socket_close(comm->net->health_fd);
    comm->net->health_fd = -1;
    pthread_mutex_lock(&net_live_lock);
    comm->net->next = net_live;
    net_live = comm->net;
    pthread_mutex_unlock(&net_live_lock);
    BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net: rank %d connected to the ranks of other "
               "hosts over %s (%s)", comm->rank, comm->net->prov->name,
               comm->net->prov->version());
out:
    if (comm->net->prov != NULL) {
        connecting_free(comm->net->prov, &k, n);
    } else {
        free(k.sends);
        free(k.send_comms);
        free(k.recv_comms);
    }
    free(cards);
    return st;
}

void braid_net_teardown(braid_comm_t *comm, int state)
{
    braid_net_t *net = comm->net;
    if (net == NULL)
        return;
    pthread_mutex_lock(&net_live_lock);
    for (braid_net_t **pp = &net_live; *pp != NULL; pp = &(*pp)->next)
        if (*pp == net) {
            *pp = net->next;
            break;
        }
    pthread_mutex_unlock(&net_live_lock);
    if (!atomic_exchange(&net->gone, 1))
        health_say(net, comm->nranks, state);
    for (int r = 0; r < comm->nranks; r++) {
        if (!net_remote(comm, r))
            continue;
        if (comm->send_conns != NULL) {
            braid_conn_close(comm->send_conns[r]);
            comm->send_conns[r] = NULL;
        }
        if (comm->recv_conns != NULL) {
            braid_conn_close(comm->recv_conns[r]);
            comm->recv_conns[r] = NULL;
        }
        braid_socket_close(net->health[r].fd);
    }
    if (net->listen != NULL)
        net->prov->close_listen(net->listen);
    braid_socket_close(net->health_fd);
    free(net->health);
    free(net->sends);
    free(net->recvs);
    free(net);
    comm->net = NULL;
}
