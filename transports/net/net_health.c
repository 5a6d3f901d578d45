/*
 * The health links between the ranks of different hosts: the network transport's peer
 * health (transports/transport.h).
 *
 * Shared memory lets local ranks read each other's state; across hosts each pair of ranks
 * keeps one TCP "health" connection with keepalive (BRAID_NET_LOST_S). Over it a rank says
 * when it fails, aborts, is destroyed or its process exits (with the last collective it
 * started and completed); a connection that closes without such a word means the process
 * was killed, and one that times out means the host or the link is gone. Progress is not
 * sent on every collective: a rank that diagnoses a wait asks (NET_ASK), and a rank answers
 * (NET_TELL) whenever it reads its links, which it does while it waits in a call on the
 * communicator (src/core/comm_health.c). A rank outside any call does not answer.
 */
#include <errno.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"
#include "transports/net/net_int.h"

#define NET_HEALTH_MAGIC 0x6268u                 /* "bh" */

static pthread_mutex_t net_live_lock = PTHREAD_MUTEX_INITIALIZER;
static braid_net_t *net_live;

enum { NET_SAY = 1, NET_ASK = 2, NET_TELL = 3 };

typedef struct net_health_msg {
    uint16_t magic;
    uint8_t kind;               /* NET_SAY: a state; NET_ASK: how far are you? NET_TELL */
    uint8_t pad;
    int32_t state;              /* SAY, TELL: the sender's braid_comm_state_t */
    uint64_t seq_started;       /* SAY, TELL: the last collective it started */
    uint64_t seq_done;          /* SAY, TELL: and completed */
} net_health_msg_t;

_Static_assert(sizeof(net_health_msg_t) == NET_HEALTH_MSG, "health messages are 24 bytes");

/* ---- telling this rank's state ---------------------------------------------------------- */

static void health_send(braid_net_t *net, int r, int kind, int state)
{
    net_health_msg_t m = { .magic = NET_HEALTH_MAGIC, .kind = (uint8_t)kind, .state = state,
                           .seq_started = atomic_load(&net->seq_started),
                           .seq_done = atomic_load(&net->seq_done) };
    size_t off = 0;
    if (net->health[r].fd >= 0)
        (void)braid_socket_send_nb(net->health[r].fd, &m, sizeof(m), &off);
}

void braid_net_health_say(braid_net_t *net, int nranks, int state)
{
    for (int r = 0; r < nranks; r++)
        health_send(net, r, NET_SAY, state);
}

/* A process that exits with communicators still open tells their remote peers, so that
 * an exit after the last collective is not taken for a crash. */
__attribute__((destructor)) static void net_exit_hook(void)
{
    pthread_mutex_lock(&net_live_lock);
    for (braid_net_t *n = net_live; n != NULL; n = n->next)
        if (!atomic_exchange(&n->gone, 1))
            braid_net_health_say(n, n->nranks, BRAID_COMM_DESTROYED);
    pthread_mutex_unlock(&net_live_lock);
}

void braid_net_live_add(braid_net_t *net)
{
    pthread_mutex_lock(&net_live_lock);
    net->next = net_live;
    net_live = net;
    pthread_mutex_unlock(&net_live_lock);
}

void braid_net_live_remove(braid_net_t *net)
{
    pthread_mutex_lock(&net_live_lock);
    for (braid_net_t **pp = &net_live; *pp != NULL; pp = &(*pp)->next)
        if (*pp == net) {
            *pp = net->next;
            break;
        }
    pthread_mutex_unlock(&net_live_lock);
}

/* READY was said when this rank's connections stood (net_connect.c). */
void braid_net_publish_state(void *tp, braid_comm_state_t state, braid_status_t status)
{
    braid_net_t *net = tp;
    (void)status;
    if (state != BRAID_COMM_READY && !atomic_load(&net->gone))
        braid_net_health_say(net, net->ctx->nranks, (int)state);
}

void braid_net_publish_progress(void *tp, uint64_t started, uint64_t done)
{
    braid_net_t *net = tp;
    if (started)
        atomic_store_explicit(&net->seq_started, started, memory_order_relaxed);
    if (done)
        atomic_store_explicit(&net->seq_done, done, memory_order_relaxed);
}

/* ---- opening the links (setup) ---------------------------------------------------------- */

braid_status_t braid_net_health_listen(braid_net_t *net, braid_sockaddr_t *addr_p)
{
    BRAID_CHECK(braid_socket_find_if(NULL, addr_p, NULL));   /* port 0 */
    return braid_socket_listen(addr_p, 0, &net->health_fd);
}

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
braid_status_t braid_net_health_connect_all(braid_net_t *net, const net_card_t *cards)
{
    int64_t deadline = braid_deadline_after_s(braid_param_int(BRAID_P_BOOTSTRAP_TIMEOUT));
    int want = 0;
    for (int r = net->ctx->rank + 1; r < net->ctx->nranks; r++) {
        if (!net_remote(net, r))
            continue;
        net_intro_t in = { NET_HELLO_MAGIC, net->ctx->nonce, net->ctx->rank, r };
        int fd;
        /* its listener was up before its card went out: a refusal means it is gone */
        braid_status_t st = braid_socket_connect(&cards[r].health, 0, deadline, -1, &fd);
        if (st == BRAID_OK) {
            net->health[r].fd = fd;
            st = braid_socket_send_all(fd, &in, sizeof(in), deadline, -1);
        }
        if (st != BRAID_OK && (errno == ECONNREFUSED || errno == ECONNRESET))
            net->ctx->setup_failed(net->ctx->bs, r, BRAID_ERR_REMOTE);
        if (st != BRAID_OK)
            return braid_err(BRAID_ERR_REMOTE, "net: rank %d cannot open its health link to "
                             "rank %d (pid %d on %s): %s", net->ctx->rank, r,
                             (int)net->ctx->peers[r].pid, net->ctx->peers[r].hostname,
                             st == BRAID_ERR_TIMEOUT ? "timed out"
                             : errno == ECONNREFUSED ? "refused: its process is gone"
                                                     : strerror(errno));
    }
    for (int r = 0; r < net->ctx->rank; r++)
        want += net_remote(net, r);
    while (want > 0) {
        struct pollfd pfd = { .fd = net->health_fd, .events = POLLIN };
        net_intro_t in;
        int fd;
        braid_status_t st = braid_socket_accept(net->health_fd, &fd);
        if (st == BRAID_INPROGRESS) {
            BRAID_CHECK(net->ctx->check(net->ctx->bs));   /* a lower rank died meanwhile? */
            if (braid_socket_wait(&pfd, 1, deadline, SETUP_CHECK_NS, -1) == BRAID_ERR_TIMEOUT)
                return braid_err(BRAID_ERR_TIMEOUT, "net: rank %d: %d lower ranks on other "
                                 "hosts did not open their health links in time", net->ctx->rank,
                                 want);
            continue;
        }
        if (st != BRAID_OK)
            return braid_err(st, "net: accepting a health link failed: %s", strerror(errno));
        st = braid_socket_recv_all(fd, &in, sizeof(in), deadline, -1);
        if (st != BRAID_OK || in.magic != NET_HELLO_MAGIC || in.nonce != net->ctx->nonce ||
            in.to != net->ctx->rank || in.from < 0 || in.from >= net->ctx->rank ||
            !net_remote(net, in.from) || net->health[in.from].fd >= 0) {
            BRAID_WARN("net: rank %d refused a health link that is not from this job",
                       net->ctx->rank);
            braid_socket_close(fd);
            continue;
        }
        net->health[in.from].fd = fd;
        want--;
    }
    for (int r = 0; r < net->ctx->nranks; r++)
        if (net->health[r].fd >= 0)
            health_tune(net->health[r].fd);
    return BRAID_OK;
}

/* ---- reading the links ------------------------------------------------------------------ */

static void health_take(braid_net_t *net, int r, const net_health_msg_t *m)
{
    net_health_t *h = &net->health[r];
    if (m->magic != NET_HEALTH_MAGIC)
        return;
    if (m->kind == NET_ASK) {
        health_send(net, r, NET_TELL, BRAID_COMM_READY);
        return;
    }
    h->seq_started = m->seq_started;
    h->seq_done = m->seq_done;
    h->fresh = 1;
    if (m->kind == NET_SAY && m->state == BRAID_COMM_READY) {
        h->ready = 1;
    } else if (m->kind == NET_SAY) {
        h->said = 1;
        h->state = m->state;
    }
}

void braid_net_health_poll(braid_net_t *net, int r)
{
    net_health_t *h = &net->health[r];
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
        health_take(net, r, &m);
    }
}

int braid_net_peer(void *tp, int r, braid_peer_health_t *ph)
{
    braid_net_t *net = tp;
    if (net->health == NULL || net->health[r].fd < 0)
        return 0;
    net_health_t *h = &net->health[r];
    braid_net_health_poll(net, r);
    const char *word = h->said ? braid_peer_state_word(h->state) : NULL;
    ph->state = h->said ? h->state : BRAID_COMM_READY;
    ph->known = h->fresh;
    ph->seq_started = h->seq_started;
    ph->seq_done = h->seq_done;
    ph->gone = !h->closed ? 0 : h->said ? 2 : 1;
    ph->why = h->closed == 2 ? "is unreachable (its host or the link to it is down)"
              : word != NULL ? word : "exited or was killed";
    return 1;
}

/* A rank that said its final state has no more progress to tell. */
void braid_net_ask(void *tp, int r)
{
    braid_net_t *net = tp;
    net_health_t *h = &net->health[r];
    if (h->fd < 0 || h->said || h->closed)
        return;
    h->fresh = 0;
    health_send(net, r, NET_ASK, BRAID_COMM_READY);
}
