/*
 * Fuzz harness: what a rank reads from the ranks of other hosts before it trusts a network
 * connection (transports/net/net_connect.c): the cards every rank sends through the
 * bootstrap (provider, version; braid_net_cards_agree) and the hello that opens each
 * connection (braid_net_hello_judge).
 *
 * A job of 4 ranks on 2 hosts (ranks 0, 1 and 2, 3) over a provider "Socket". Input: one
 * byte (bits 0-1: this rank; bit 2: rank 2's connection is taken already), then a hello
 * (net_hello_t, its length what the message had), then the cards, laid over 4 valid ones.
 * Besides not crashing: a hello taken comes from a rank of the other host not taken yet.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/net/net_int.h"
#include "topo/topo.h"

#define FUZZ_NRANKS 4
#define FUZZ_VERSION "braid socket 1"

static const char *fuzz_version(void)
{
    return FUZZ_VERSION;
}

static braid_net_ops_t fuzz_prov = { .name = "Socket", .version = fuzz_version };
static braid_peer_info_t fuzz_peers[FUZZ_NRANKS];
static braid_topo_t fuzz_topo;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const uint64_t hosts[FUZZ_NRANKS] = { 11, 11, 22, 22 };
    (void)argc;
    (void)argv;
    for (int r = 0; r < FUZZ_NRANKS; r++)
        snprintf(fuzz_peers[r].hostname, sizeof(fuzz_peers[r].hostname), "node%d", r / 2);
    if (braid_topo_build(&fuzz_topo, FUZZ_NRANKS, hosts, NULL) != BRAID_OK)
        abort();
    return 0;
}

static void fuzz_hello(const braid_net_t *net, const uint8_t *data, size_t size, int taken)
{
    void *recv_comms[FUZZ_NRANKS] = { NULL, NULL, taken ? &fuzz_prov : NULL, NULL };
    net_hello_t h;
    size_t got = size < sizeof(h) ? size : sizeof(h);
    int take = 0;
    memset(&h, 0, sizeof(h));
    memcpy(&h, data, got);
    if (braid_net_hello_judge(net, &h, got, recv_comms, &take) != BRAID_OK || !take)
        return;
    if (h.from < 0 || h.from >= FUZZ_NRANKS || h.from / 2 == net->ctx->rank / 2 ||
        recv_comms[h.from] != NULL) {
        fprintf(stderr, "fuzz_net_hello: took a hello from rank %d\n", h.from);
        abort();
    }
}

static void fuzz_cards(const braid_net_t *net, const uint8_t *data, size_t size)
{
    net_card_t *cards = calloc(FUZZ_NRANKS, sizeof(*cards));
    if (cards == NULL)
        abort();
    for (int r = 0; r < FUZZ_NRANKS; r++) {
        cards[r].ok = 1;
        snprintf(cards[r].prov, sizeof(cards[r].prov), "%s", fuzz_prov.name);
        snprintf(cards[r].version, sizeof(cards[r].version), "%s", FUZZ_VERSION);
    }
    memcpy(cards, data, size < FUZZ_NRANKS * sizeof(*cards) ? size
                                                            : FUZZ_NRANKS * sizeof(*cards));
    (void)braid_net_cards_agree(net, cards);
    free(cards);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    braid_transport_ctx_t ctx = { .nranks = FUZZ_NRANKS, .nonce = 0x1234567890abcdefull,
                                  .topo = &fuzz_topo, .peers = fuzz_peers };
    braid_net_t net = { .ctx = &ctx, .prov = &fuzz_prov, .nranks = FUZZ_NRANKS };
    if (size < 1)
        return 0;
    ctx.rank = data[0] & 3;
    data++;
    size--;
    fuzz_hello(&net, data, size, data[-1] & 4);
    if (size > sizeof(net_hello_t))
        fuzz_cards(&net, data + sizeof(net_hello_t), size - sizeof(net_hello_t));
    return 0;
}
