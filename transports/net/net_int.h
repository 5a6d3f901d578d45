/*
 * What the files of the network transport's communicator side share (not for core: its
 * interface is transports/net/net.h).
 *
 *   net.c          the transport: setup and teardown (struct braid_net is below)
 *   net_provider.c which provider a communicator uses
 *   net_missing.c  the stand-ins for providers configure left out
 *   net_fifo.c     the slot FIFO over a provider's messages (braid_net_drive)
 *   net_connect.c  connection setup: cards, agreement, the hello on every connection
 *   net_health.c   the health links: the transport's peer health
 */
#ifndef BRAID_TRANSPORTS_NET_INT_H
#define BRAID_TRANSPORTS_NET_INT_H

#include <stdint.h>
#include <time.h>

#include <stdatomic.h>

#include "base/log.h"
#include "base/socket.h"
#include "transports/net/net.h"

#define NET_HELLO_MAGIC 0x627261696468656cull   /* "braidhel": hellos and health intros */

/* While setup waits for the ranks of other hosts: how often it looks whether one of them
 * died or failed (net_connect.c, net_health.c). */
#define SETUP_CHECK_NS (20 * 1000000ll)

/* ---- per communicator ------------------------------------------------------------------- */

#define NET_HEALTH_MSG 24       /* bytes of a health message (net_health.c) */

typedef struct net_health {
    int fd;                     /* -1: a rank of this host */
    int closed;                 /* the connection ended: 1 closed, 2 timed out / broke */
    int said;                   /* the rank told its state */
    int state;                  /* what it said (braid_comm_state_t) */
    int ready;                  /* it said its connections stand (setup) */
    int fresh;                  /* the progress below came after our last question */
    uint64_t seq_started;       /* the last collective it started, */
    uint64_t seq_done;          /* and completed, as it last told */
    unsigned char in[NET_HEALTH_MSG];
    size_t in_off;
} net_health_t;

typedef struct braid_net {
    braid_transport_ctx_t *ctx;
    const braid_net_ops_t *prov;
    void *listen;
    int health_fd;              /* health listener, closed after setup */
    net_health_t *health;       /* [nranks] */
    struct net_conn **sends;    /* [nranks]: the connections to remote ranks, NULL for */
    struct net_conn **recvs;    /* local ones (braid_net_drive) */
    int nranks;
    _Atomic uint64_t seq_started;   /* this rank's progress, told when asked */
    _Atomic uint64_t seq_done;
    _Atomic int gone;           /* the exit hook spoke last: say nothing more */
    struct braid_net *next;     /* every live one, for the exit hook */
} braid_net_t;

/* ---- setup: what the ranks exchange ----------------------------------------------------- */

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

/* A connection being set up: one hello out or in. */
typedef struct net_pending {
    void *pcomm, *mh, *req;
    int peer;                   /* sends: the rank; receives: -1 until the hello says */
    int is_send;
    net_hello_t hello;
} net_pending_t;

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

static inline int net_remote(const braid_net_t *net, int r)
{
    return braid_topo_link(net->ctx->topo, net->ctx->rank, r) == BRAID_LINK_NET;
}

static inline void net_pause(void)
{
    struct timespec ts = { 0, 50000 };
    nanosleep(&ts, NULL);
}

/* ---- net_provider.c --------------------------------------------------------------------- */

/* The provider this rank would use: named (config netName, NCCL_NET) or the first that
 * initialises. */
braid_status_t braid_net_provider_pick(const braid_net_t *net,
                                       const braid_net_ops_t **prov_p);

/* ---- net_fifo.c ------------------------------------------------------------------------- */

/* Move what every connection has in flight (the transport's drive). */
void braid_net_drive(void *tp);
/* Wrap a provider comm (owned from here on, also on failure) into a connection. */
braid_status_t braid_net_conn_make(braid_net_t *net, int peer, int is_send, void *pcomm,
                                   braid_conn_t **conn_p);

/* ---- net_connect.c ---------------------------------------------------------------------- */

/* Pick the provider, listen with it and for health links, and fill this rank's card. A
 * rank without a provider still sends its card (ok = 0), so that every rank fails alike. */
braid_status_t braid_net_card_fill(braid_net_t *net, net_card_t *me);
/* Every rank must have a provider, and the same one. (net_hello.c) */
braid_status_t braid_net_cards_agree(const braid_net_t *net, net_card_t *cards);
/* The hello this rank sends rank `to`. (net_hello.c, like the two below) */
void braid_net_hello_fill(const braid_net_t *net, int to, net_hello_t *h);
/*
 * Judge a hello that arrived on an accepted connection (`got`: the message's length): 1 in
 * *take_p = take it, 0 = refuse it (not for this job: close it and go on waiting), or an
 * error (another braid or provider version in this job). recv_comms[r]: rank r's taken one.
 */
braid_status_t braid_net_hello_judge(const braid_net_t *net, const net_hello_t *h, size_t got,
                                     void *const *recv_comms, int *take_p);
/* Connect to every remote rank and accept its connection, each with its hello. */
braid_status_t braid_net_connect_all(braid_net_t *net, const net_card_t *cards,
                                     net_connecting_t *k);
/* Say on the health links that this rank's connections stand; wait until all others have. */
braid_status_t braid_net_connected_wait(braid_net_t *net, net_connecting_t *k);
/* Turn the finished provider comms into the comm's send_conns / recv_conns. */
braid_status_t braid_net_conns_make(braid_net_t *net, net_connecting_t *k);
/* Close what `k` still holds and free it. */
void braid_net_connecting_free(const braid_net_ops_t *prov, net_connecting_t *k, int n);

/* ---- net_health.c ----------------------------------------------------------------------- */

/* Listen for health links (net->health_fd) on the interface the sockets use. */
braid_status_t braid_net_health_listen(braid_net_t *net, braid_sockaddr_t *addr_p);
/* Open a health link with every rank of another host (cards[r].health). */
braid_status_t braid_net_health_connect_all(braid_net_t *net, const net_card_t *cards);
/* Tell every remote rank this rank's state, with the last collective it completed. */
void braid_net_health_say(braid_net_t *net, int nranks, int state);
/* Read what rank r said (answering its questions), and whether its link still stands. */
void braid_net_health_poll(braid_net_t *net, int r);
/* Peer health (transports/transport.h: braid_transport_t). */
void braid_net_publish_state(void *tp, braid_comm_state_t state, braid_status_t status);
void braid_net_publish_progress(void *tp, uint64_t started, uint64_t done);
int braid_net_peer(void *tp, int r, braid_peer_health_t *h);
void braid_net_ask(void *tp, int r);
/* The live list, for the exit hook: added once setup is done, removed at teardown. */
void braid_net_live_add(braid_net_t *net);
void braid_net_live_remove(braid_net_t *net);

#endif
