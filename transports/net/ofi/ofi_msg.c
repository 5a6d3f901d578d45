/*
 * Messages of the libfabric provider: isend and irecv post tagged operations (tag =
 * connection id and message number, see ofi.c), test reads the completion queue (manual
 * progress) and a close cancels what is pending, orphaning what libfabric still holds.
 */
#include "transports/net/net.h"

#ifdef HAVE_OFI

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "transports/net/ofi/ofi_int.h"

/* ---- requests and progress ---- */

static void ofi_list_add(ofi_req_t **head, ofi_req_t *r)
{
    r->prev = NULL;
    r->next = *head;
    if (*head != NULL)
        (*head)->prev = r;
    *head = r;
}

static void ofi_list_del(ofi_req_t **head, ofi_req_t *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        *head = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static void ofi_req_finish(ofi_req_t *req, size_t len)
{
    req->done = 1;
    req->len = req->op.kind == OFI_OP_SEND ? req->size : len;
    if (req->conn == NULL) {   /* orphaned by a close: nobody will test it */
        ofi_list_del(&braid_ofi_g.orphans, req);
        free(req);
    }
}

/*
 * The size of a message that did not fit; 0 when no field says. rxm's rendezvous gives
 * olen; tcp's eager path gives only the remote CQ data, which our sends set to the size
 * (without raising FI_REMOTE_CQ_DATA in the flags: hence the range check instead).
 */
static size_t ofi_trunc_size(const ofi_req_t *req, const struct fi_cq_err_entry *e)
{
    size_t size = e->olen ? req->size + e->olen : 0;
    if (e->len > req->size && e->len > size)
        size = e->len;
    if (size == 0 && ((e->flags & FI_REMOTE_CQ_DATA) ||
                      e->data <= braid_ofi_g.info->ep_attr->max_msg_size))
        size = (size_t)e->data;
    return size > req->size ? size : 0;
}

/* A receive got a longer message (size: its length, 0 when unknown). */
static void ofi_req_truncated(ofi_req_t *req, size_t size)
{
    req->status = BRAID_ERR_REMOTE;
    if (size > req->size)
        snprintf(req->err, sizeof(req->err), "net/ofi: a %zu-byte message arrived for a "
                 "%zu-byte receive on connection %llu (%s)", size, req->size,
                 (unsigned long long)req->conn_id, fi_strerror(FI_ETRUNC));
    else
        snprintf(req->err, sizeof(req->err), "net/ofi: a message larger than the %zu-byte "
                 "receive arrived on connection %llu (%s)", req->size,
                 (unsigned long long)req->conn_id, fi_strerror(FI_ETRUNC));
}

static void ofi_req_fail(ofi_req_t *req, const struct fi_cq_err_entry *e, int err,
                         const char *ptext)
{
    const char *what = req->op.kind == OFI_OP_SEND ? "send" : "receive";
    if (err == FI_ETRUNC && req->op.kind == OFI_OP_RECV) {
        /* tcp's prov_errno is a stale errno here: FI_ETRUNC's own text says it all */
        ofi_req_truncated(req, ofi_trunc_size(req, e));
    } else {
        req->status = err == FI_ENOMEM ? BRAID_ERR_NOMEM
                    : err == FI_ECANCELED ? BRAID_ERR_ABORTED : BRAID_ERR_REMOTE;
        snprintf(req->err, sizeof(req->err), "net/ofi: %s of %zu bytes on connection %llu "
                 "failed: %s (%s)", what, req->size, (unsigned long long)req->conn_id,
                 fi_strerror(err), ptext);
    }
    ofi_req_finish(req, e->len);
}

/* A successful completion; a receive shorter than the size the sender put in the CQ data
 * was truncated all the same (udp;ofi_rxd cuts without an error). */
static void ofi_req_done(ofi_req_t *req, const struct fi_cq_tagged_entry *ent)
{
    size_t sent = (ent->flags & FI_REMOTE_CQ_DATA) ? (size_t)ent->data : 0;
    if (req->op.kind == OFI_OP_RECV && (ent->len > req->size || sent > req->size))
        ofi_req_truncated(req, ent->len > sent ? ent->len : sent);
    ofi_req_finish(req, ent->len);
}

static void ofi_complete(const struct fi_cq_tagged_entry *ent)
{
    ofi_op_t *op = ent->op_context;
    if (op == NULL)
        return;
    if (op->kind == OFI_OP_SEND || op->kind == OFI_OP_RECV)
        ofi_req_done((ofi_req_t *)op, ent);
    else if (op->kind == OFI_OP_CTRL_RECV)
        braid_ofi_ctrl_recv_done((ofi_ctrl_t *)op, ent->len);
    else
        braid_ofi_ctrl_send_done((ofi_ctrl_t *)op, NULL);
}

/* One error completion: kept in its request, recorded when the request is tested. */
static void ofi_cq_error(void)
{
    struct fi_cq_err_entry e = { 0 };
    char pbuf[128] = "", text[OFI_ERR_MAX];
    const char *ptext;
    ofi_op_t *op;
    int err;
    ssize_t rc = fi_cq_readerr(braid_ofi_g.cq, &e, 0);
    if (rc < 0) {
        if (rc != -FI_EAGAIN)
            BRAID_WARN("net/ofi: fi_cq_readerr: %s", fi_strerror((int)-rc));
        return;
    }
    ptext = fi_cq_strerror(braid_ofi_g.cq, e.prov_errno, e.err_data, pbuf, sizeof(pbuf));
    ptext = ptext ? ptext : "";
    err = e.err < 0 ? -e.err : e.err;   /* shm reports it negated */
    op = e.op_context;
    if (op == NULL) {
        BRAID_WARN("net/ofi: completion error for no request: %s (%s)", fi_strerror(err),
                   ptext);
    } else if (op->kind == OFI_OP_SEND || op->kind == OFI_OP_RECV) {
        ofi_req_fail((ofi_req_t *)op, &e, err, ptext);
    } else if (op->kind == OFI_OP_CTRL_RECV) {
        ((ofi_ctrl_t *)op)->posted = 0;
        if (err != FI_ECANCELED)
            BRAID_INFO(BRAID_SUB_NET, "net/ofi: control receive: %s (%s)", fi_strerror(err),
                       ptext);
    } else {
        snprintf(text, sizeof(text), "%s (%s)", fi_strerror(err), ptext);
        braid_ofi_ctrl_send_done((ofi_ctrl_t *)op, text);
    }
}

/* Read the completion queue (manual progress); the lock is held. */
braid_status_t braid_ofi_progress(void)
{
    struct fi_cq_tagged_entry ent[OFI_CQ_BATCH];
    for (int round = 0; round < OFI_CQ_ROUNDS; round++) {
        ssize_t n = fi_cq_read(braid_ofi_g.cq, ent, OFI_CQ_BATCH);
        if (n == -FI_EAGAIN)
            break;
        if (n == -FI_EAVAIL) {
            ofi_cq_error();
            continue;
        }
        if (n < 0)
            return braid_err(BRAID_ERR_SYSTEM, "net/ofi: fi_cq_read: %s", fi_strerror((int)-n));
        for (ssize_t i = 0; i < n; i++)
            ofi_complete(&ent[i]);
        if (n < OFI_CQ_BATCH)
            break;
    }
    braid_ofi_ctrl_retry();
    return BRAID_OK;
}

/* ---- posting, testing and closing ---- */

/* Post message number c->seq of the connection; FI_EAGAIN leaves *req_p NULL. */
static braid_status_t ofi_post(ofi_conn_t *c, void *buf, size_t size, void *mh,
                               void **req_p)
{
    uint64_t tag = (c->conn_id << braid_ofi_g.seq_bits) | (c->seq & braid_ofi_g.seq_mask);
    void *desc = mh ? ((ofi_mr_t *)mh)->desc : NULL;
    ofi_req_t *req;
    ssize_t rc;
    if (size > braid_ofi_g.info->ep_attr->max_msg_size)
        return braid_err(BRAID_ERR_INVALID, "net/ofi: a %zu-byte message exceeds %s's "
                         "maximum of %zu bytes", size, braid_ofi_g.info->fabric_attr->prov_name,
                         braid_ofi_g.info->ep_attr->max_msg_size);
    req = calloc(1, sizeof(*req));
    if (req == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net/ofi: no memory for a request");
    req->op.kind = c->is_send ? OFI_OP_SEND : OFI_OP_RECV;
    req->conn = c, req->conn_id = c->conn_id, req->size = size;
    /* the size travels as remote CQ data: tcp's truncation error reports nothing else */
    if (!c->is_send)
        rc = fi_trecv(braid_ofi_g.ep, buf, size, desc, FI_ADDR_UNSPEC, tag, 0, &req->op);
    else if (braid_ofi_g.info->domain_attr->cq_data_size >= sizeof(uint64_t))
        rc = fi_tsenddata(braid_ofi_g.ep, buf, size, desc, size, c->peer, tag, &req->op);
    else
        rc = fi_tsend(braid_ofi_g.ep, buf, size, desc, c->peer, tag, &req->op);
    if (rc != 0) {
        free(req);
        if (rc == -FI_EAGAIN)
            return braid_ofi_progress();
        return braid_err(rc == -FI_ENOMEM ? BRAID_ERR_NOMEM : BRAID_ERR_REMOTE,
                         "net/ofi: %s of %zu bytes on connection %llu: %s",
                         c->is_send ? "fi_tsend" : "fi_trecv", size,
                         (unsigned long long)c->conn_id, fi_strerror((int)-rc));
    }
    c->seq++;
    ofi_list_add(&c->reqs, req);
    *req_p = req;
    return BRAID_OK;
}

braid_status_t braid_ofi_isend(void *send, const void *data, size_t size, void *mh,
                                void **req_p)
{
    ofi_conn_t *c = send;
    braid_status_t st = BRAID_OK;
    *req_p = NULL;
    pthread_mutex_lock(&braid_ofi_g.lock);
    if (c->conn_id == 0 && c->failed == BRAID_OK)
        st = braid_ofi_progress();   /* the listener's answer may be in */
    if (st == BRAID_OK && c->failed < 0)
        st = braid_err(c->failed, "%s", c->err);
    else if (st == BRAID_OK && c->conn_id != 0)
        st = ofi_post(c, (void *)data, size, mh, req_p);
    pthread_mutex_unlock(&braid_ofi_g.lock);
    return st;
}

braid_status_t braid_ofi_irecv(void *recv, void *data, size_t size, void *mh, void **req_p)
{
    braid_status_t st;
    *req_p = NULL;
    pthread_mutex_lock(&braid_ofi_g.lock);
    st = ofi_post(recv, data, size, mh, req_p);
    pthread_mutex_unlock(&braid_ofi_g.lock);
    return st;
}

/* Give a request that libfabric still holds to the orphan list: freed at its completion. */
static void ofi_req_orphan(ofi_req_t *req)
{
    ofi_list_del(&req->conn->reqs, req);
    req->conn = NULL;
    ofi_list_add(&braid_ofi_g.orphans, req);
}

braid_status_t braid_ofi_test(void *request, int *done_p, size_t *size_p)
{
    ofi_req_t *req = request;
    braid_status_t st = BRAID_OK;
    *done_p = 0;
    pthread_mutex_lock(&braid_ofi_g.lock);
    if (!req->done)
        st = braid_ofi_progress();   /* recorded there when it fails */
    if (req->done) {
        if (st == BRAID_OK && req->status < 0) {
            st = braid_err(req->status, "%s", req->err);
        } else if (st == BRAID_OK) {
            *done_p = 1;
            if (size_p != NULL)
                *size_p = req->len;
        }
        ofi_list_del(&req->conn->reqs, req);
        free(req);
    } else if (st < 0) {
        ofi_req_orphan(req);   /* freed for the caller, but libfabric still holds it */
    }
    pthread_mutex_unlock(&braid_ofi_g.lock);
    return st;
}

static int ofi_conn_busy(const ofi_conn_t *c)
{
    for (const ofi_req_t *r = c->reqs; r != NULL; r = r->next)
        if (!r->done)
            return 1;
    return 0;
}

/*
 * Cancel what is pending and give it OFI_DRAIN_NS to complete, unlocking between reads so
 * other comms go on; what libfabric still holds then (a send whose receiver never posted)
 * is orphaned rather than freed under it.
 */
static void ofi_conn_close(ofi_conn_t *c)
{
    int64_t deadline = braid_time_ns() + OFI_DRAIN_NS;
    ofi_req_t *r;
    pthread_mutex_lock(&braid_ofi_g.lock);
    for (ofi_conn_t **pp = &braid_ofi_g.sends; c->is_send && *pp != NULL; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    for (r = c->reqs; r != NULL; r = r->next)
        if (!r->done)
            fi_cancel(&braid_ofi_g.ep->fid, &r->op);
    while (ofi_conn_busy(c) && braid_time_ns() < deadline) {
        pthread_mutex_unlock(&braid_ofi_g.lock);
        sched_yield();
        pthread_mutex_lock(&braid_ofi_g.lock);
        if (braid_ofi_progress() < 0)
            break;
    }
    while ((r = c->reqs) != NULL) {
        if (r->done) {
            ofi_list_del(&c->reqs, r);
            free(r);
        } else {
            ofi_req_orphan(r);
        }
    }
    pthread_mutex_unlock(&braid_ofi_g.lock);
    free(c);
}

void braid_ofi_close_send(void *send)
{
    if (send != NULL)
        ofi_conn_close(send);
}

void braid_ofi_close_recv(void *recv)
{
    if (recv != NULL)
        ofi_conn_close(recv);
}

#endif /* HAVE_OFI */
