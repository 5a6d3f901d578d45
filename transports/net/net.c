/*
 * The network transport's communicator side: braid_net_setup connects a rank to the ranks of
 * other hosts, braid_net_teardown closes what it opened. The parts live beside this file
 * (transports/net/net_int.h lists them): which provider (net_provider.c), the slot FIFO
 * over a provider's messages (net_fifo.c), the connections and their handshake
 * (net_connect.c) and the health links (net_health.c).
 */
#include <stdlib.h>

#include "base/log.h"
#include "base/proc.h"
#include "transports/net/net_int.h"

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
    st = braid_net_card_fill(comm, &cards[comm->rank]);
    if (braid_bootstrap_allgather(comm->bs, &cards[comm->rank], cards, sizeof(*cards)) !=
        BRAID_OK && st == BRAID_OK)
        st = BRAID_ERR_REMOTE;   /* recorded by the bootstrap */
    BRAID_CHECK_GOTO(st, st, out);
    BRAID_CHECK_GOTO(st, braid_net_cards_agree(comm, cards), out);
    BRAID_CHECK_GOTO(st, braid_net_health_connect_all(comm, cards), out);
    BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net: rank %d: health links to the ranks of "
               "other hosts up; connecting over %s", comm->rank, comm->net->prov->name);
    braid_proc_setup_pause("net");
    BRAID_CHECK_GOTO(st, braid_net_connect_all(comm, cards, &k), out);
    BRAID_CHECK_GOTO(st, braid_net_connected_wait(comm, &k), out);
    BRAID_CHECK_GOTO(st, braid_net_conns_make(comm, &k), out);
    braid_socket_close(comm->net->health_fd);
    comm->net->health_fd = -1;
    braid_net_live_add(comm->net);
    BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net: rank %d connected to the ranks of other "
               "hosts over %s (%s)", comm->rank, comm->net->prov->name,
               comm->net->prov->version());
out:
    if (comm->net->prov != NULL) {
        braid_net_connecting_free(comm->net->prov, &k, n);
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
    braid_net_live_remove(net);
    if (!atomic_exchange(&net->gone, 1))
        braid_net_health_say(net, comm->nranks, state);
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
