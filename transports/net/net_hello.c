/*
 * What a rank reads from the ranks of other hosts before it trusts a network connection
 * (net_connect.c sets the connections up): the cards every rank sends through the
 * bootstrap, and the hello that opens each connection. No I/O here: the fuzz harness
 * tests/fuzz/fuzz_net_hello.c calls these directly.
 */
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "transports/net/net_int.h"

/* Every rank must have a provider, and the same one. The cards are other ranks' bytes:
 * their strings are terminated here before anything reads them. */
braid_status_t braid_net_cards_agree(const braid_net_t *net, net_card_t *cards)
{
    const net_card_t *me = &cards[net->ctx->rank];
    for (int r = 0; r < net->ctx->nranks; r++) {
        cards[r].prov[sizeof(cards[r].prov) - 1] = '\0';
        cards[r].version[sizeof(cards[r].version) - 1] = '\0';
    }
    for (int r = 0; r < net->ctx->nranks; r++) {
        if (!cards[r].ok)
            return braid_err(BRAID_ERR_REMOTE, "net: rank %d (%s) has no network provider: "
                             "%s", r, net->ctx->peers[r].hostname, cards[r].version);
        if (strcmp(cards[r].prov, me->prov) != 0 || strcmp(cards[r].version, me->version) != 0)
            return braid_err(BRAID_ERR_INVALID, "net: rank %d (%s) uses provider %s (%s) but "
                             "rank %d (%s) uses %s (%s): set NCCL_NET, and the same libraries, "
                             "on every host", r, net->ctx->peers[r].hostname, cards[r].prov,
                             cards[r].version, net->ctx->rank,
                             net->ctx->peers[net->ctx->rank].hostname, me->prov, me->version);
    }
    return BRAID_OK;
}

void braid_net_hello_fill(const braid_net_t *net, int to, net_hello_t *h)
{
    memset(h, 0, sizeof(*h));
    h->magic = NET_HELLO_MAGIC;
    h->nonce = net->ctx->nonce;
    h->from = net->ctx->rank;
    h->to = to;
    snprintf(h->braid, sizeof(h->braid), "%s", BRAID_VERSION_STRING);
    snprintf(h->prov, sizeof(h->prov), "%s", net->prov->name);
    snprintf(h->version, sizeof(h->version), "%s", net->prov->version());
}

braid_status_t braid_net_hello_judge(const braid_net_t *net, const net_hello_t *h, size_t got,
                                     void *const *recv_comms, int *take_p)
{
    net_hello_t mine;
    *take_p = 0;
    if (got != sizeof(*h) || h->magic != NET_HELLO_MAGIC) {
        BRAID_WARN("net: rank %d refused a connection that is not a braid handshake (%zu "
                   "bytes): another program?", net->ctx->rank, got);
        return BRAID_OK;
    }
    if (h->nonce != net->ctx->nonce || h->to != net->ctx->rank || h->from < 0 ||
        h->from >= net->ctx->nranks || !net_remote(net, h->from)) {
        BRAID_WARN("net: rank %d refused a connection from rank %d of another job or "
                   "communicator (id %016llx, for rank %d; ours is %016llx)", net->ctx->rank,
                   h->from, (unsigned long long)h->nonce, h->to,
                   (unsigned long long)net->ctx->nonce);
        return BRAID_OK;
    }
    braid_net_hello_fill(net, h->from, &mine);
    if (strncmp(h->braid, mine.braid, sizeof(h->braid)) != 0 ||
        strncmp(h->prov, mine.prov, sizeof(h->prov)) != 0 ||
        strncmp(h->version, mine.version, sizeof(h->version)) != 0)
        return braid_err(BRAID_ERR_INVALID, "net: rank %d (%s) runs braid %.32s over %.32s "
                         "(%.160s), rank %d runs braid %s over %s (%s): use one braid and one "
                         "provider version on every host", h->from,
                         net->ctx->peers[h->from].hostname, h->braid, h->prov, h->version,
                         net->ctx->rank, mine.braid, mine.prov, mine.version);
    if (recv_comms[h->from] != NULL) {
        BRAID_WARN("net: rank %d refused a second connection from rank %d", net->ctx->rank,
                   h->from);
        return BRAID_OK;
    }
    *take_p = 1;
    return BRAID_OK;
}
