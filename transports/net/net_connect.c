/*
 * Connection setup with the ranks of other hosts: every rank picks its provider and sends
 * its card (provider, version, listen handle, health address) to all; all must agree on
 * one provider (net_hello.c judges the cards and the hellos). Then each rank connects to every remote rank and accepts its connection;
 * the first message on each is a hello (braid version, provider and version, job nonce,
 * ranks), so that a stray connection, or one of another job, is refused, and a mismatch of
 * versions fails with both named. Setup ends when every remote rank has said on its health
 * link that its own connections stand.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/param.h"
#include "transports/net/net_int.h"

/* Pick the provider, listen with it and for health links, and fill this rank's card. A
 * rank without a provider still sends its card (ok = 0), so that every rank fails alike. */
braid_status_t braid_net_card_fill(braid_net_t *net, net_card_t *me)
{
    braid_status_t st = braid_net_provider_pick(net, &net->prov);
    if (st == BRAID_OK)
        st = net->prov->listen(0, me->handle, &net->listen);
    if (st == BRAID_OK)
        st = braid_net_health_listen(net, &me->health);
    if (st != BRAID_OK) {
        snprintf(me->version, sizeof(me->version), "%s", braid_err_last());
        return st;
    }
    me->ok = 1;
    snprintf(me->prov, sizeof(me->prov), "%s", net->prov->name);
    snprintf(me->version, sizeof(me->version), "%s", net->prov->version());
    return BRAID_OK;
}

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

static braid_status_t connecting_accept(braid_net_t *net, net_connecting_t *k)
{
    const braid_net_ops_t *prov = net->prov;
    void *rc = NULL;
    BRAID_CHECK(prov->accept(net->listen, &rc));
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
 * health link says so (SETUP_CHECK_NS); the bootstrap ring says so for ranks whose link is
 * not up yet.
 */
#define SETUP_GONE_NS (1000 * 1000000ll)    /* for a peer's link to show why it failed */

/* Rank r, if its health link says it is gone or failed: the error naming it. */
static braid_status_t net_setup_peer(braid_net_t *net, int r)
{
    braid_peer_health_t h;
    braid_net_peer(net, r, &h);
    const char *why = h.gone ? h.why : braid_peer_state_word(h.state);
    if (why == NULL)
        return BRAID_OK;
    if (h.gone == 1)   /* died without a word: tell the ranks that do not watch it */
        net->ctx->setup_failed(net->ctx->bs, r, BRAID_ERR_REMOTE);
    return braid_err(BRAID_ERR_REMOTE, "net %s: rank %d (pid %d on %s) %s while rank %d was "
                     "connecting to the ranks of other hosts", net->prov->name, r,
                     (int)net->ctx->peers[r].pid, net->ctx->peers[r].hostname, why, net->ctx->rank);
}

/* Every SETUP_CHECK_NS at most: the ranks `k` still misses (all when k is NULL). */
static braid_status_t net_setup_check(braid_net_t *net, const net_connecting_t *k,
                                      int64_t *next_p)
{
    int64_t now = braid_time_ns();
    if (now < *next_p)
        return BRAID_OK;
    *next_p = now + SETUP_CHECK_NS;
    for (int r = 0; r < net->ctx->nranks; r++)
        if (net_remote(net, r) &&
            (k == NULL || k->send_comms[r] == NULL || k->recv_comms[r] == NULL))
            BRAID_CHECK(net_setup_peer(net, r));
    return net->ctx->check(net->ctx->bs);
}

/* The connection to rank r failed (the provider said why): if r died, say that instead. */
static braid_status_t net_setup_conn_failed(braid_net_t *net, int r, braid_status_t st)
{
    int64_t end = braid_time_ns() + SETUP_GONE_NS;
    char why[256];
    snprintf(why, sizeof(why), "%s", braid_err_last());
    do {
        struct timespec ts = { 0, 5000000 };
        BRAID_CHECK(net_setup_peer(net, r));
        nanosleep(&ts, NULL);
    } while (braid_time_ns() < end);
    return braid_err(st, "net %s: rank %d's connection to rank %d (pid %d on %s) failed: %s",
                     net->prov->name, net->ctx->rank, r, (int)net->ctx->peers[r].pid,
                     net->ctx->peers[r].hostname, why);
}

static braid_status_t connecting_pass(braid_net_t *net, net_connecting_t *k)
{
    const braid_net_ops_t *prov = net->prov;
    int done;
    size_t got = 0;
    BRAID_CHECK(connecting_accept(net, k));
    for (int r = 0; r < net->ctx->nranks; r++) {
        net_pending_t *p = &k->sends[r];
        if (p->pcomm == NULL || k->send_comms[r] != NULL)
            continue;
        braid_status_t st = pending_step(prov, p, &done, &got);
        if (st < 0)
            return net_setup_conn_failed(net, r, st);
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
            BRAID_CHECK(braid_net_hello_judge(net, &p->hello, got, k->recv_comms, &take));
        } else {  /* it broke before saying who it is: a port scan or a stray, which must not
                 * fail the job; if it was a peer's, the timeout below tells why */
            snprintf(k->dropped_why, sizeof(k->dropped_why), "%s", braid_err_last());
            k->dropped++;
            BRAID_WARN("net: rank %d dropped a connection that failed before its handshake: "
                       "%s", net->ctx->rank, k->dropped_why);
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
static void connecting_missing(const braid_net_t *net, const net_connecting_t *k, char *buf,
                               size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int r = 0; r < net->ctx->nranks && used + 16 < len; r++)
        if (net_remote(net, r) && (k->send_comms[r] == NULL || k->recv_comms[r] == NULL))
            used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? ", " : "", r);
}

braid_status_t braid_net_connect_all(braid_net_t *net, const net_card_t *cards,
                                     net_connecting_t *k)
{
    const braid_net_ops_t *prov = net->prov;
    int64_t deadline = braid_deadline_after_s(braid_param_int(BRAID_P_BOOTSTRAP_TIMEOUT));
    for (int r = 0; r < net->ctx->nranks; r++) {
        if (!net_remote(net, r))
            continue;
        k->want += 2;
        k->sends[r].peer = r;
        k->sends[r].is_send = 1;
        braid_net_hello_fill(net, r, &k->sends[r].hello);
        if (prov->connect(0, cards[r].handle, &k->sends[r].pcomm) != BRAID_OK)
            return net_setup_conn_failed(net, r, BRAID_ERR_REMOTE);
    }
    int64_t check = 0;
    while (k->have < k->want) {
        BRAID_CHECK(connecting_pass(net, k));
        BRAID_CHECK(net_setup_check(net, k, &check));
        if (braid_time_ns() > deadline) {
            char missing[512];
            connecting_missing(net, k, missing, sizeof(missing));
            char dropped[400] = "";
            if (k->dropped > 0)
                snprintf(dropped, sizeof(dropped), "; %d connections failed before their "
                         "handshake, the last with: %s", k->dropped, k->dropped_why);
            return braid_err(BRAID_ERR_TIMEOUT, "net %s: rank %d could not connect with ranks "
                             "%s within %lld s (BRAID_BOOTSTRAP_TIMEOUT)%s", prov->name,
                             net->ctx->rank, missing,
                             (long long)braid_param_int(BRAID_P_BOOTSTRAP_TIMEOUT), dropped);
        }
        if (k->have < k->want)
            net_pause();
    }
    return BRAID_OK;
}

void braid_net_connecting_free(const braid_net_ops_t *prov, net_connecting_t *k, int n)
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

/*
 * Once its own connections stand, a rank says so on its health links and goes on driving the
 * provider until every remote rank has said so too: with manual progress, the hello a rank
 * sent last may still need its own progress to reach the peer.
 */
braid_status_t braid_net_connected_wait(braid_net_t *net, net_connecting_t *k)
{
    int64_t deadline = braid_deadline_after_s(braid_param_int(BRAID_P_BOOTSTRAP_TIMEOUT));
    int64_t check = 0;
    braid_net_health_say(net, net->ctx->nranks, BRAID_COMM_READY);
    for (int r = 0; r < net->ctx->nranks; r++) {
        net_health_t *h = &net->health[r];
        while (h->fd >= 0 && !h->ready) {
            BRAID_CHECK(connecting_pass(net, k));   /* drives the provider; refuses strays */
            braid_net_health_poll(net, r);
            BRAID_CHECK(net_setup_check(net, NULL, &check));   /* its failure, if it said */
            if (!h->ready && braid_time_ns() > deadline)
                return braid_err(BRAID_ERR_TIMEOUT, "net: rank %d (pid %d on %s) did not "
                                 "finish connecting within %lld s (BRAID_BOOTSTRAP_TIMEOUT)", r,
                                 (int)net->ctx->peers[r].pid, net->ctx->peers[r].hostname,
                                 (long long)braid_param_int(BRAID_P_BOOTSTRAP_TIMEOUT));
            if (!h->ready)
                net_pause();
        }
    }
    return BRAID_OK;
}

/* Turn the finished provider comms into the comm's send_conns / recv_conns. */
braid_status_t braid_net_conns_make(braid_net_t *net, net_connecting_t *k)
{
    for (int r = 0; r < net->ctx->nranks; r++) {
        if (!net_remote(net, r))
            continue;
        void *sc = k->send_comms[r], *rc = k->recv_comms[r];
        k->send_comms[r] = k->recv_comms[r] = NULL;
        braid_status_t st = braid_net_conn_make(net, r, 1, sc, &net->ctx->send_conns[r]);
        if (st == BRAID_OK)
            st = braid_net_conn_make(net, r, 0, rc, &net->ctx->recv_conns[r]);
        else
            net->prov->close_recv(rc);
        BRAID_CHECK(st);
    }
    return BRAID_OK;
}
