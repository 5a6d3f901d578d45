/*
 * The slot FIFO (transports/transport.h) over a provider's messages.
 *
 * A connection has K slots of NET_HDR + S bytes, registered once. The sender writes a slot,
 * commits it (header: length and the call's message header), and it is sent as one
 * message; slots are sent in order and reused once the provider says the send completed.
 * The receiver keeps its K receives posted, in slot order, so message i lands in slot
 * i mod K; releasing a slot posts its receive again. An operation is complete only once its
 * sends have completed (flush): with manual-progress providers nothing moves while no
 * thread is in a call.
 */
#include <stdlib.h>

#include "base/log.h"
#include "transports/net/net_int.h"

#define NET_HDR 64u

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
void braid_net_drive(void *tp)
{
    braid_net_t *net = tp;
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

static const braid_conn_ops_t net_conn_ops = {
    .name = "net",
    .send_slot = nc_send_slot,
    .send_commit = nc_send_commit,
    .recv_slot = nc_recv_slot,
    .recv_release = nc_recv_release,
    .flush = nc_flush,
    .close = nc_close,
};

braid_status_t braid_net_conn_make(braid_net_t *net, int peer, int is_send, void *pcomm,
                                   braid_conn_t **conn_p)
{
    const braid_net_ops_t *prov = net->prov;
    uint32_t nslots = net->ctx->peers[0].nslots;
    size_t stride = NET_HDR + net->ctx->slot_size;
    net_conn_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        is_send ? prov->close_send(pcomm) : prov->close_recv(pcomm);
        return braid_err(BRAID_ERR_NOMEM, "net: out of memory for a connection");
    }
    c->base.ops = &net_conn_ops;
    c->base.peer = peer;
    c->base.slot_size = net->ctx->slot_size;
    c->net = net;
    c->prov = prov;
    c->peer_host = net->ctx->peers[peer].hostname;
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
    (is_send ? net->sends : net->recvs)[peer] = c;
    *conn_p = &c->base;
    return BRAID_OK;
}
