/*
 * The health links between the ranks of different hosts.
 *
 * Shared memory lets local ranks read each other's state; across hosts each pair of ranks
 * keeps one TCP "health" connection with keepalive (BRAID_NET_LOST_S). Over it a rank says
 * when it fails, aborts, is destroyed or its process exits (with the last collective it
 * completed); a connection that closes without such a word means the process was killed,
 * and one that times out means the host or the link is gone. Waiting ranks look at these
 * in the executor's peer checks (src/core/comm_health.c).
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

typedef struct net_health_msg {
    uint16_t magic;
    uint16_t pad;
    int32_t state;
    uint64_t seq_done;
} net_health_msg_t;

_Static_assert(sizeof(net_health_msg_t) == 16, "health messages are 16 bytes");

/* ---- telling this rank's state ---------------------------------------------------------- */

void braid_net_health_say(braid_net_t *net, int nranks, int state)
{
    net_health_msg_t m = { .magic = NET_HEALTH_MAGIC, .state = state,
                           .seq_done = atomic_load(&net->seq_done) };
    for (int r = 0; r < nranks; r++) {
        size_t off = 0;
        if (net->health[r].fd >= 0)
            (void)braid_socket_send_nb(net->health[r].fd, &m, sizeof(m), &off);
    }
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

void braid_net_publish_state(braid_comm_t *comm, int state)
{
    if (comm->net != NULL && !atomic_load(&comm->net->gone))
        braid_net_health_say(comm->net, comm->nranks, state);
}

void braid_net_publish_done(braid_comm_t *comm, uint64_t seq_done)
{
    if (comm->net != NULL)
        atomic_store_explicit(&comm->net->seq_done, seq_done, memory_order_relaxed);
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
braid_status_t braid_net_health_connect_all(braid_comm_t *comm, const net_card_t *cards)
{
    braid_net_t *net = comm->net;
    int64_t deadline = braid_deadline_after_s(braid_param_int(BRAID_P_BOOTSTRAP_TIMEOUT));
    int want = 0;
    for (int r = comm->rank + 1; r < comm->nranks; r++) {
        if (!net_remote(comm, r))
            continue;
        net_intro_t in = { NET_HELLO_MAGIC, comm->nonce, comm->rank, r };
        int fd;
        /* its listener was up before its card went out: a refusal means it is gone */
        braid_status_t st = braid_socket_connect(&cards[r].health, 0, deadline, -1, &fd);
        if (st == BRAID_OK) {
            net->health[r].fd = fd;
            st = braid_socket_send_all(fd, &in, sizeof(in), deadline, -1);
        }
        if (st != BRAID_OK && (errno == ECONNREFUSED || errno == ECONNRESET))
            braid_bootstrap_setup_failed(comm->bs, r, BRAID_ERR_REMOTE);
        if (st != BRAID_OK)
            return braid_err(BRAID_ERR_REMOTE, "net: rank %d cannot open its health link to "
                             "rank %d (pid %d on %s): %s", comm->rank, r,
                             (int)comm->peers[r].pid, comm->peers[r].hostname,
                             st == BRAID_ERR_TIMEOUT ? "timed out"
                             : errno == ECONNREFUSED ? "refused: its process is gone"
                                                     : strerror(errno));
    }
    for (int r = 0; r < comm->rank; r++)
        want += net_remote(comm, r);
    while (want > 0) {
        struct pollfd pfd = { .fd = net->health_fd, .events = POLLIN };
        net_intro_t in;
        int fd;
        braid_status_t st = braid_socket_accept(net->health_fd, &fd);
        if (st == BRAID_INPROGRESS) {
            BRAID_CHECK(braid_bootstrap_check(comm->bs));   /* a lower rank died meanwhile? */
            if (braid_socket_wait(&pfd, 1, deadline, SETUP_CHECK_NS, -1) == BRAID_ERR_TIMEOUT)
                return braid_err(BRAID_ERR_TIMEOUT, "net: rank %d: %d lower ranks on other "
                                 "hosts did not open their health links in time", comm->rank,
                                 want);
            continue;
        }
        if (st != BRAID_OK)
            return braid_err(st, "net: accepting a health link failed: %s", strerror(errno));
        st = braid_socket_recv_all(fd, &in, sizeof(in), deadline, -1);
        if (st != BRAID_OK || in.magic != NET_HELLO_MAGIC || in.nonce != comm->nonce ||
            in.to != comm->rank || in.from < 0 || in.from >= comm->rank ||
            !net_remote(comm, in.from) || net->health[in.from].fd >= 0) {
            BRAID_WARN("net: rank %d refused a health link that is not from this job",
                       comm->rank);
            braid_socket_close(fd);
            continue;
        }
        net->health[in.from].fd = fd;
        want--;
    }
    for (int r = 0; r < comm->nranks; r++)
        if (net->health[r].fd >= 0)
            health_tune(net->health[r].fd);
    return BRAID_OK;
}

/* ---- reading the links ------------------------------------------------------------------ */

/* Read what rank r said, and whether its link still stands. */
void braid_net_health_poll(net_health_t *h)
{
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
        if (m.magic == NET_HEALTH_MAGIC && m.state == BRAID_COMM_READY) {
            h->ready = 1;
        } else if (m.magic == NET_HEALTH_MAGIC) {
            h->said = 1;
            h->state = m.state;
            h->seq_done = m.seq_done;
        }
    }
}

const char *braid_net_peer_check(braid_comm_t *comm, int r, uint64_t seq, int p2p,
                                 int *gone_p)
{
    *gone_p = 0;
    if (comm->net == NULL || comm->net->health == NULL || comm->net->health[r].fd < 0)
        return NULL;
    net_health_t *h = &comm->net->health[r];
    braid_net_health_poll(h);
    int finished = h->said && !p2p && h->seq_done >= seq;
    if (finished)
        return NULL;    /* it is done with this collective: what it does next is its own */
    *gone_p = !h->closed ? 0 : h->said ? 2 : 1;
    if (h->closed == 2)
        return "is unreachable (its host or the link to it is down)";
    if (h->said && h->state == BRAID_COMM_DESTROYED)
        return "destroyed its communicator";
    if (h->said && h->state == BRAID_COMM_ABORTED)
        return "aborted its communicator";
    if (h->said && h->state == BRAID_COMM_REVOKED)
        return "revoked its communicator";
    if (h->said && h->state == BRAID_COMM_ERROR)
        return "failed";
    if (h->closed)
        return "exited or was killed";
    return NULL;
}
