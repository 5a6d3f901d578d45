/*
 * The network transport (transports/transport.h): its setup connects a rank to the ranks
 * of other hosts, its teardown closes what it opened. The parts live beside this file
 * (transports/net/net_int.h lists them): which provider (net_provider.c), the slot FIFO
 * over a provider's messages (net_fifo.c), the connections and their handshake
 * (net_connect.c) and the health links (net_health.c).
 */
#include <stdlib.h>

#include "base/log.h"
#include "base/proc.h"
#include "transports/net/net_int.h"

static braid_status_t net_alloc(braid_transport_ctx_t *ctx, braid_net_t **net_p)
{
    int n = ctx->nranks;
    braid_net_t *net = calloc(1, sizeof(*net));
    if (net == NULL || (net->health = calloc((size_t)n, sizeof(net_health_t))) == NULL ||
        (net->sends = calloc((size_t)n, sizeof(*net->sends))) == NULL ||
        (net->recvs = calloc((size_t)n, sizeof(*net->recvs))) == NULL) {
        if (net != NULL) {
            free(net->health);
            free(net->sends);
        }
        free(net);
        return braid_err(BRAID_ERR_NOMEM, "net: out of memory for %d ranks", n);
    }
    net->ctx = ctx;
    net->health_fd = -1;
    net->nranks = n;
    for (int r = 0; r < n; r++)
        net->health[r].fd = -1;
    *net_p = net;
    return BRAID_OK;
}

static braid_status_t net_setup_body(braid_net_t *net)
{
    int n = net->ctx->nranks, me = net->ctx->rank;
    net_connecting_t k = { 0 };
    net_card_t *cards = calloc((size_t)n, sizeof(*cards));
    braid_status_t st;

    k.sends = calloc((size_t)n, sizeof(*k.sends));
    k.send_comms = calloc((size_t)n, sizeof(void *));
    k.recv_comms = calloc((size_t)n, sizeof(void *));
    if (cards == NULL || k.sends == NULL || k.send_comms == NULL || k.recv_comms == NULL) {
        st = braid_err(BRAID_ERR_NOMEM, "net: out of memory for %d ranks", n);
        goto out;
    }
    st = braid_net_card_fill(net, &cards[me]);
    if (net->ctx->allgather(net->ctx->bs, &cards[me], cards, sizeof(*cards)) != BRAID_OK &&
        st == BRAID_OK)
        st = BRAID_ERR_REMOTE;   /* recorded by the bootstrap */
    BRAID_CHECK_GOTO(st, st, out);
    BRAID_CHECK_GOTO(st, braid_net_cards_agree(net, cards), out);
    BRAID_CHECK_GOTO(st, braid_net_health_connect_all(net, cards), out);
    BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net: rank %d: health links to the ranks of "
               "other hosts up; connecting over %s", me, net->prov->name);
    braid_proc_setup_pause("net");
    BRAID_CHECK_GOTO(st, braid_net_connect_all(net, cards, &k), out);
    BRAID_CHECK_GOTO(st, braid_net_connected_wait(net, &k), out);
    BRAID_CHECK_GOTO(st, braid_net_conns_make(net, &k), out);
    braid_socket_close(net->health_fd);
    net->health_fd = -1;
    braid_net_live_add(net);
    BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net: rank %d connected to the ranks of other "
               "hosts over %s (%s)", me, net->prov->name, net->prov->version());
out:
    if (net->prov != NULL) {
        braid_net_connecting_free(net->prov, &k, n);
    } else {
        free(k.sends);
        free(k.send_comms);
        free(k.recv_comms);
    }
    free(cards);
    return st;
}

/* Reaches the ranks of other hosts: none when all ranks share one. */
static braid_status_t net_setup(braid_transport_ctx_t *ctx, void **tp_p)
{
    braid_net_t *net = NULL;
    if (ctx->topo->nhosts <= 1)
        return BRAID_OK;
    BRAID_CHECK(net_alloc(ctx, &net));
    *tp_p = net;   /* a failed setup is torn down like a finished one */
    return net_setup_body(net);
}

static void net_teardown(void *tp, braid_comm_state_t state)
{
    braid_net_t *net = tp;
    const braid_transport_ctx_t *ctx = net->ctx;
    braid_net_live_remove(net);
    if (!atomic_exchange(&net->gone, 1))
        braid_net_health_say(net, ctx->nranks, (int)state);
    for (int r = 0; r < ctx->nranks; r++) {
        if (!net_remote(net, r))
            continue;
        braid_conn_close(ctx->send_conns[r]);
        ctx->send_conns[r] = NULL;
        braid_conn_close(ctx->recv_conns[r]);
        ctx->recv_conns[r] = NULL;
        braid_socket_close(net->health[r].fd);
    }
    if (net->listen != NULL)
        net->prov->close_listen(net->listen);
    braid_socket_close(net->health_fd);
    free(net->health);
    free(net->sends);
    free(net->recvs);
    free(net);
}

const braid_transport_t braid_transport_net = {
    .name = "net",
    .setup = net_setup,
    .teardown = net_teardown,
    .publish_state = braid_net_publish_state,
    .publish_progress = braid_net_publish_progress,
    .peer = braid_net_peer,
    .ask = braid_net_ask,
    .drive = braid_net_drive,
};
