/*
 * Connections of the libfabric provider: listen, connect and accept, made with control
 * messages (CONNECT, ACCEPT, REFUSE) on the process's endpoint; the picture is in ofi.c.
 * Peers' endpoint names are inserted in the address vector once and kept.
 */
#include "transports/net/net.h"

#ifdef HAVE_OFI

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/net/ofi/ofi_int.h"

/* ---- control messages ---- */

static void *ofi_ctrl_recv_desc(void)
{
    return braid_ofi_g.ctrl_mr ? fi_mr_desc(braid_ofi_g.ctrl_mr) : NULL;
}

static ssize_t ofi_ctrl_post_recv(ofi_ctrl_t *slot)
{
    ssize_t rc = fi_trecv(braid_ofi_g.ep, &slot->msg, sizeof(slot->msg), ofi_ctrl_recv_desc(),
                          FI_ADDR_UNSPEC, braid_ofi_g.ctrl_tag, 0, &slot->op);
    slot->posted = rc == 0;
    return rc;
}

braid_status_t braid_ofi_ctrl_start(void)
{
    size_t bytes = OFI_CTRL_NRECV * sizeof(ofi_ctrl_t);
    braid_ofi_g.ctrl_recv = calloc(OFI_CTRL_NRECV, sizeof(ofi_ctrl_t));
    if (braid_ofi_g.ctrl_recv == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net/ofi: no memory for control receives");
    if (braid_ofi_mr_local())
        BRAID_CHECK(braid_ofi_mr_register(braid_ofi_g.ctrl_recv, bytes, &braid_ofi_g.ctrl_mr));
    for (int i = 0; i < OFI_CTRL_NRECV; i++) {
        ssize_t rc;
        braid_ofi_g.ctrl_recv[i].op.kind = OFI_OP_CTRL_RECV;
        rc = ofi_ctrl_post_recv(&braid_ofi_g.ctrl_recv[i]);
        if (rc != 0 && rc != -FI_EAGAIN)
            return braid_ofi_call((int)rc, "fi_trecv(control)");
    }
    return BRAID_OK;
}

static ssize_t ofi_ctrl_post_send(ofi_ctrl_t *cs)
{
    ssize_t rc = fi_tsend(braid_ofi_g.ep, &cs->msg, sizeof(cs->msg),
                          cs->mr ? fi_mr_desc(cs->mr) : NULL, cs->dest, braid_ofi_g.ctrl_tag,
                          &cs->op);
    cs->posted = rc == 0;
    return rc == -FI_EAGAIN ? 0 : rc;   /* not posted yet: the next progress tries again */
}

static void ofi_ctrl_free(ofi_ctrl_t *cs)
{
    for (ofi_ctrl_t **pp = &braid_ofi_g.ctrl_sends; *pp != NULL; pp = &(*pp)->next)
        if (*pp == cs) {
            *pp = cs->next;
            break;
        }
    if (cs->mr != NULL)
        fi_close(&cs->mr->fid);
    free(cs);
}

/* Queue a control message to `dest`; 0 or a negative libfabric error. */
static ssize_t ofi_ctrl_send(fi_addr_t dest, const ofi_ctrl_msg_t *msg)
{
    ofi_ctrl_t *cs = calloc(1, sizeof(*cs));
    ssize_t rc;
    if (cs == NULL)
        return -FI_ENOMEM;
    cs->op.kind = OFI_OP_CTRL_SEND;
    cs->dest = dest;
    cs->msg = *msg;
    if (braid_ofi_mr_local() && braid_ofi_mr_register(&cs->msg, sizeof(cs->msg), &cs->mr) < 0) {
        free(cs);
        return -FI_ENOMEM;
    }
    cs->next = braid_ofi_g.ctrl_sends;
    braid_ofi_g.ctrl_sends = cs;
    rc = ofi_ctrl_post_send(cs);
    if (rc != 0)
        ofi_ctrl_free(cs);
    return rc;
}

static ofi_conn_t *ofi_send_find(uint64_t send_id)
{
    for (ofi_conn_t *c = braid_ofi_g.sends; c != NULL; c = c->next)
        if (c->send_id == send_id)
            return c;
    return NULL;
}

/* A control send completed (err == NULL) or failed: a failed CONNECT fails its comm. */
void braid_ofi_ctrl_send_done(ofi_ctrl_t *cs, const char *err)
{
    ofi_conn_t *c;
    if (err != NULL && cs->msg.type == OFI_CTRL_CONNECT &&
        (c = ofi_send_find(cs->msg.send_id)) != NULL) {
        c->failed = BRAID_ERR_REMOTE;
        snprintf(c->err, sizeof(c->err), "net/ofi: the connection request to the listener "
                 "failed: %s", err);
    } else if (err != NULL) {
        BRAID_INFO(BRAID_SUB_NET, "net/ofi: answering a connection request failed: %s", err);
    }
    ofi_ctrl_free(cs);
}

/* Find a peer's address, inserting it in the AV the first time: 0 or a libfabric error. */
static int ofi_peer_addr(const uint8_t *name, size_t len, fi_addr_t *addr_p)
{
    ofi_peer_t *p;
    int rc;
    for (size_t i = 0; i < braid_ofi_g.npeers; i++)
        if (braid_ofi_g.peers[i].namelen == len &&
            memcmp(braid_ofi_g.peers[i].name, name, len) == 0) {
            *addr_p = braid_ofi_g.peers[i].addr;
            return 0;
        }
    if (braid_ofi_g.npeers == braid_ofi_g.peers_cap) {
        size_t cap = braid_ofi_g.peers_cap ? 2 * braid_ofi_g.peers_cap : 16;
        p = realloc(braid_ofi_g.peers, cap * sizeof(*p));
        if (p == NULL)
            return -FI_ENOMEM;
        braid_ofi_g.peers = p, braid_ofi_g.peers_cap = cap;
    }
    p = &braid_ofi_g.peers[braid_ofi_g.npeers];
    memset(p, 0, sizeof(*p));
    memcpy(p->name, name, len);
    rc = fi_av_insert(braid_ofi_g.av, p->name, 1, &p->addr, 0, NULL);
    if (rc != 1)
        return rc < 0 ? rc : -FI_EADDRNOTAVAIL;
    p->namelen = len;
    braid_ofi_g.npeers++;
    *addr_p = p->addr;
    return 0;
}

static ofi_listen_t *ofi_listen_find(uint64_t id)
{
    for (ofi_listen_t *l = braid_ofi_g.listens; l != NULL; l = l->next)
        if (l->id == id)
            return l;
    return NULL;
}

/* A CONNECT: give the connection its id, queue it for accept, answer at once (the sender
 * may post sends before the receiver accepts). A closed listener refuses. */
static void ofi_ctrl_connect(const ofi_ctrl_msg_t *m)
{
    ofi_ctrl_msg_t ans = { .magic = OFI_CTRL_MAGIC, .type = OFI_CTRL_REFUSE,
                           .send_id = m->send_id };
    ofi_listen_t *l = ofi_listen_find(m->listen_id);
    ofi_pending_t *p = NULL;
    fi_addr_t peer;
    int rc = m->namelen <= OFI_NAME_MAX ? ofi_peer_addr(m->name, m->namelen, &peer)
                                        : -FI_EINVAL;
    if (rc != 0) {
        BRAID_WARN("net/ofi: ignoring a connection request: its sender's address: %s",
                   fi_strerror(-rc));
        return;
    }
    if (l != NULL && (p = calloc(1, sizeof(*p))) != NULL) {
        do
            p->conn_id = ++braid_ofi_g.next_conn & braid_ofi_g.id_mask;
        while (p->conn_id == 0);
        p->peer = peer;
        *l->tail = p;
        l->tail = &p->next;
        ans.type = OFI_CTRL_ACCEPT;
        ans.conn_id = p->conn_id;
    }
    rc = (int)ofi_ctrl_send(peer, &ans);
    if (rc != 0)
        BRAID_WARN("net/ofi: answering a connection request failed: %s", fi_strerror(-rc));
}

static void ofi_ctrl_answer(const ofi_ctrl_msg_t *m)
{
    ofi_conn_t *c = ofi_send_find(m->send_id);
    if (c == NULL)
        return;   /* closed meanwhile */
    if (m->type == OFI_CTRL_ACCEPT && (m->conn_id & braid_ofi_g.id_mask) != 0) {
        c->conn_id = m->conn_id & braid_ofi_g.id_mask;
        return;
    }
    c->failed = BRAID_ERR_REMOTE;
    snprintf(c->err, sizeof(c->err), "net/ofi: the listener refused the connection "
             "(it was closed)");
}

void braid_ofi_ctrl_recv_done(ofi_ctrl_t *slot, size_t len)
{
    const ofi_ctrl_msg_t *m = &slot->msg;
    slot->posted = 0;   /* reposted at the end of this progress */
    if (len < offsetof(ofi_ctrl_msg_t, name) || m->magic != OFI_CTRL_MAGIC)
        BRAID_WARN("net/ofi: ignoring a malformed control message of %zu bytes", len);
    else if (m->type == OFI_CTRL_CONNECT)
        ofi_ctrl_connect(m);
    else if (m->type == OFI_CTRL_ACCEPT || m->type == OFI_CTRL_REFUSE)
        ofi_ctrl_answer(m);
    else
        BRAID_WARN("net/ofi: ignoring a control message of unknown type %u", m->type);
}

/* Post what FI_EAGAIN held back: control receives and control sends. */
void braid_ofi_ctrl_retry(void)
{
    ofi_ctrl_t *cs, *next;
    char err[OFI_ERR_MAX];
    for (int i = 0; i < OFI_CTRL_NRECV; i++) {
        ofi_ctrl_t *slot = &braid_ofi_g.ctrl_recv[i];
        ssize_t rc = slot->posted ? 0 : ofi_ctrl_post_recv(slot);
        if (rc != 0 && rc != -FI_EAGAIN && !braid_ofi_g.ctrl_warned++)
            BRAID_WARN("net/ofi: posting a control receive: %s", fi_strerror((int)-rc));
    }
    for (cs = braid_ofi_g.ctrl_sends; cs != NULL; cs = next) {
        ssize_t rc = 0;
        next = cs->next;
        if (!cs->posted && (rc = ofi_ctrl_post_send(cs)) != 0) {
            snprintf(err, sizeof(err), "fi_tsend: %s", fi_strerror((int)-rc));
            braid_ofi_ctrl_send_done(cs, err);
        }
    }
}

/* ---- listen, connect, accept ---- */

braid_status_t braid_ofi_listen(int dev, void *handle, void **listen_p)
{
    ofi_handle_t h = { .magic = OFI_HANDLE_MAGIC };
    ofi_listen_t *l;
    BRAID_CHECK(braid_ofi_dev_check(dev));
    l = calloc(1, sizeof(*l));
    if (l == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net/ofi: no memory for a listen comm");
    l->tail = &l->head;
    pthread_mutex_lock(&braid_ofi_g.lock);
    l->id = ++braid_ofi_g.next_listen;
    l->next = braid_ofi_g.listens;
    braid_ofi_g.listens = l;
    h.listen_id = l->id;
    h.namelen = (uint32_t)braid_ofi_g.namelen;
    memcpy(h.name, braid_ofi_g.name, braid_ofi_g.namelen);
    pthread_mutex_unlock(&braid_ofi_g.lock);
    memcpy(handle, &h, sizeof(h));
    *listen_p = l;
    return BRAID_OK;
}

static braid_status_t ofi_connect_locked(ofi_conn_t *c, const ofi_handle_t *h)
{
    ofi_ctrl_msg_t m = { .magic = OFI_CTRL_MAGIC, .type = OFI_CTRL_CONNECT,
                         .listen_id = h->listen_id, .namelen = (uint32_t)braid_ofi_g.namelen };
    int rc = ofi_peer_addr(h->name, h->namelen, &c->peer);
    if (rc != 0)
        return braid_err(BRAID_ERR_REMOTE, "net/ofi: connect: fi_av_insert of the listener's "
                         "address: %s", fi_strerror(-rc));
    c->send_id = m.send_id = ++braid_ofi_g.next_send;
    memcpy(m.name, braid_ofi_g.name, braid_ofi_g.namelen);
    rc = (int)ofi_ctrl_send(c->peer, &m);
    if (rc != 0)
        return braid_err(rc == -FI_ENOMEM ? BRAID_ERR_NOMEM : BRAID_ERR_REMOTE,
                         "net/ofi: connect: sending the connection request: %s",
                         fi_strerror(-rc));
    c->next = braid_ofi_g.sends;
    braid_ofi_g.sends = c;
    return BRAID_OK;
}

/* Sends the request and returns: the listener's answer arrives with later progress. */
braid_status_t braid_ofi_connect(int dev, const void *handle, void **send_p)
{
    ofi_handle_t h;
    ofi_conn_t *c;
    braid_status_t st;
    BRAID_CHECK(braid_ofi_dev_check(dev));
    memcpy(&h, handle, sizeof(h));
    if (h.magic != OFI_HANDLE_MAGIC || h.namelen == 0 || h.namelen > OFI_NAME_MAX)
        return braid_err(BRAID_ERR_INVALID, "net/ofi: connect: not an OFI listen handle");
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net/ofi: no memory for a send comm");
    c->is_send = 1;
    pthread_mutex_lock(&braid_ofi_g.lock);
    st = ofi_connect_locked(c, &h);
    pthread_mutex_unlock(&braid_ofi_g.lock);
    if (st < 0) {
        free(c);
        return st;
    }
    *send_p = c;
    return BRAID_OK;
}

braid_status_t braid_ofi_accept(void *listen, void **recv_p)
{
    ofi_listen_t *l = listen;
    ofi_pending_t *p;
    ofi_conn_t *c = NULL;
    braid_status_t st;
    *recv_p = NULL;
    pthread_mutex_lock(&braid_ofi_g.lock);
    st = braid_ofi_progress();
    if (st == BRAID_OK && (p = l->head) != NULL) {
        c = calloc(1, sizeof(*c));
        if (c == NULL) {
            st = braid_err(BRAID_ERR_NOMEM, "net/ofi: no memory for a receive comm");
        } else {
            c->conn_id = p->conn_id;
            c->peer = p->peer;
            if ((l->head = p->next) == NULL)
                l->tail = &l->head;
            free(p);
        }
    }
    pthread_mutex_unlock(&braid_ofi_g.lock);
    *recv_p = c;
    return st;
}

/* Connections that arrived but were never accepted are dropped with the listener. */
void braid_ofi_close_listen(void *listen)
{
    ofi_listen_t *l = listen, *p;
    if (l == NULL)
        return;
    pthread_mutex_lock(&braid_ofi_g.lock);
    for (ofi_listen_t **pp = &braid_ofi_g.listens; (p = *pp) != NULL; pp = &p->next)
        if (p == l) {
            *pp = l->next;
            break;
        }
    pthread_mutex_unlock(&braid_ofi_g.lock);
    while (l->head != NULL) {
        ofi_pending_t *next = l->head->next;
        free(l->head);
        l->head = next;
    }
    free(l);
}

#endif /* HAVE_OFI */
