/*
 * The socket provider: plain TCP, always built.
 *
 * One TCP connection per braid connection. A message is an 8-byte length followed by its
 * bytes; requests are queued per connection and moved in order by non-blocking send/recv
 * whenever one of the connection's requests is tested (there is no progress thread). The
 * receiver reads the length first, so a message longer than the receive it meets is an
 * error naming both sizes, before any of its bytes land in the buffer.
 *
 * The interface is the one the bootstrap uses (src/base/socket.h: NCCL_SOCKET_IFNAME,
 * NCCL_SOCKET_FAMILY, else NCCL's automatic order), chosen once per process.
 */
#include <errno.h>
#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/log.h"
#include "base/socket.h"
#include "transports/net/net.h"

#define SOCK_HANDLE_MAGIC 0x62736f636b6e6574ull   /* "bsocknet" */
#define SOCK_CONNECT_TIMEOUT_S 30

typedef struct sock_handle {
    uint64_t magic;
    braid_sockaddr_t addr;
} sock_handle_t;

_Static_assert(sizeof(sock_handle_t) <= BRAID_NET_HANDLE_MAX, "handle fits NCCL's size");

typedef struct sock_comm sock_comm_t;

typedef struct sock_req {
    sock_comm_t *comm;
    struct sock_req *next;
    char *buf;
    size_t cap;             /* send: the message's size; receive: the buffer's */
    uint64_t len;           /* the message's length, once known */
    size_t hdr_off, off;    /* progress through the length word and the bytes */
    int done;
} sock_req_t;

struct sock_comm {
    int fd;
    int is_send;
    braid_status_t failed;  /* the connection broke: every request reports it */
    sock_req_t *head, *tail;    /* requests not yet reported done, in posting order */
};

typedef struct sock_listen {
    int fd;
} sock_listen_t;

static struct {
    pthread_mutex_t lock;
    int ready;
    braid_sockaddr_t addr;
    char ifname[IF_NAMESIZE];
} sock_g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static braid_status_t sock_init(void)
{
    braid_status_t st = BRAID_OK;
    pthread_mutex_lock(&sock_g.lock);
    if (!sock_g.ready) {
        st = braid_socket_find_if(NULL, &sock_g.addr, sock_g.ifname);
        sock_g.ready = st == BRAID_OK;
        if (st == BRAID_OK) {
            char a[BRAID_SOCKADDR_STRLEN];
            BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net socket: interface %s, address %s",
                       sock_g.ifname, braid_sockaddr_str(&sock_g.addr, a, sizeof(a)));
        }
    }
    pthread_mutex_unlock(&sock_g.lock);
    return st;
}

static const char *sock_version(void)
{
    return "braid socket 1";
}

static braid_status_t sock_devices(int *ndev_p)
{
    *ndev_p = 1;
    return BRAID_OK;
}

static braid_status_t sock_get_properties(int dev, braid_net_props_t *props_p)
{
    (void)dev;
    memset(props_p, 0, sizeof(*props_p));
    snprintf(props_p->name, sizeof(props_p->name), "%s", sock_g.ifname);
    return BRAID_OK;
}

static braid_status_t sock_listen(int dev, void *handle, void **listen_p)
{
    sock_handle_t h = { .magic = SOCK_HANDLE_MAGIC, .addr = sock_g.addr };
    sock_listen_t *l = malloc(sizeof(*l));
    (void)dev;
    if (l == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net socket: out of memory for a listener");
    braid_status_t st = braid_socket_listen(&h.addr, 0, &l->fd);
    if (st != BRAID_OK) {
        free(l);
        return st;
    }
    memcpy(handle, &h, sizeof(h));
    *listen_p = l;
    return BRAID_OK;
}

static braid_status_t comm_new(int fd, int is_send, void **comm_p)
{
    sock_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        braid_socket_close(fd);
        return braid_err(BRAID_ERR_NOMEM, "net socket: out of memory for a connection");
    }
    c->fd = fd;
    c->is_send = is_send;
    *comm_p = c;
    return BRAID_OK;
}

static braid_status_t sock_connect(int dev, const void *handle, void **send_p)
{
    sock_handle_t h;
    char a[BRAID_SOCKADDR_STRLEN];
    int fd;
    (void)dev;
    memcpy(&h, handle, sizeof(h));
    if (h.magic != SOCK_HANDLE_MAGIC || !braid_sockaddr_valid(&h.addr))
        return braid_err(BRAID_ERR_INVALID, "net socket: the peer's handle is not a socket "
                         "provider's (is NCCL_NET the same on every rank?)");
    /* no retry when refused: the listener was open before its handle was handed out */
    braid_status_t st = braid_socket_connect(&h.addr, 0,
                                             braid_deadline_after_s(SOCK_CONNECT_TIMEOUT_S), -1,
                                             &fd);
    if (st != BRAID_OK)
        return braid_err(BRAID_ERR_REMOTE, "net socket: cannot connect to %s: %s",
                         braid_sockaddr_str(&h.addr, a, sizeof(a)),
                         st == BRAID_ERR_TIMEOUT ? "timed out" : strerror(errno));
    return comm_new(fd, 1, send_p);
}

static braid_status_t sock_accept(void *listen, void **recv_p)
{
    sock_listen_t *l = listen;
    int fd;
    *recv_p = NULL;
    braid_status_t st = braid_socket_accept(l->fd, &fd);
    if (st == BRAID_INPROGRESS)
        return BRAID_OK;
    if (st != BRAID_OK)
        return braid_err(st, "net socket: accept failed: %s", strerror(errno));
    return comm_new(fd, 0, recv_p);
}

static braid_status_t sock_reg_mr(void *comm, void *data, size_t size, void **mh_p)
{
    (void)data;
    (void)size;
    *mh_p = comm;   /* nothing to register */
    return BRAID_OK;
}

static braid_status_t sock_dereg_mr(void *comm, void *mh)
{
    (void)comm;
    (void)mh;
    return BRAID_OK;
}

static braid_status_t req_post(sock_comm_t *c, void *data, size_t size, void **req_p)
{
    sock_req_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net socket: out of memory for a request");
    r->comm = c;
    r->buf = data;
    r->cap = size;
    r->len = size;
    if (c->tail != NULL)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    *req_p = r;
    return BRAID_OK;
}

static braid_status_t sock_isend(void *send, const void *data, size_t size, void *mh,
                                 void **req_p)
{
    (void)mh;
    return req_post(send, (void *)data, size, req_p);
}

static braid_status_t sock_irecv(void *recv, void *data, size_t size, void *mh, void **req_p)
{
    (void)mh;
    return req_post(recv, data, size, req_p);
}

/* The connection broke: remember the first reason, recorded once. */
static braid_status_t comm_fail(sock_comm_t *c, braid_status_t st, const char *why)
{
    if (c->failed == BRAID_OK)
        c->failed = braid_err(st, "net socket: connection %s: %s",
                              c->is_send ? "to the receiver" : "from the sender", why);
    return c->failed;
}

/* Move one request's length word and bytes as far as the socket allows. */
static braid_status_t req_move(sock_comm_t *c, sock_req_t *r)
{
    braid_status_t st;
    if (r->hdr_off < sizeof(r->len)) {
        st = c->is_send ? braid_socket_send_nb(c->fd, &r->len, sizeof(r->len), &r->hdr_off)
                        : braid_socket_recv_nb(c->fd, &r->len, sizeof(r->len), &r->hdr_off);
        if (st != BRAID_OK || r->hdr_off < sizeof(r->len))
            return st;
        if (!c->is_send && r->len > r->cap) {
            char why[160];
            snprintf(why, sizeof(why), "a message of %llu bytes is longer than the receive "
                     "posted for it (%zu bytes)", (unsigned long long)r->len, r->cap);
            return comm_fail(c, BRAID_ERR_REMOTE, why);
        }
    }
    if (r->off < r->len)
        st = c->is_send ? braid_socket_send_nb(c->fd, r->buf, r->len, &r->off)
                        : braid_socket_recv_nb(c->fd, r->buf, r->len, &r->off);
    else
        st = BRAID_OK;
    if (st == BRAID_OK && r->off == r->len)
        r->done = 1;
    return st;
}

static braid_status_t comm_progress(sock_comm_t *c)
{
    for (sock_req_t *r = c->head; r != NULL && c->failed == BRAID_OK; r = r->next) {
        if (r->done)
            continue;
        braid_status_t st = req_move(c, r);
        /* An orderly close (errno 0) before any byte of the next message: the peer is done
         * with the connection, having destroyed its communicator or exited. No error until
         * a call needs that message, and then the health link says what became of the
         * peer (transports/net/net_health.c), as for the providers that report nothing here. */
        if (st < 0 && !c->is_send && errno == 0 && r->hdr_off == 0)
            break;
        if (st < 0 && c->failed == BRAID_OK)
            comm_fail(c, st, errno ? strerror(errno) : "closed by the peer");
        if (!r->done)
            break;      /* in order: the next one waits for this one */
    }
    return c->failed;
}

static void req_unlink(sock_comm_t *c, sock_req_t *r)
{
    sock_req_t **pp = &c->head, *prev = NULL;
    while (*pp != NULL && *pp != r) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp == NULL)
        return;
    *pp = r->next;
    if (c->tail == r)
        c->tail = prev;
    free(r);
}

static braid_status_t sock_test(void *req, int *done, size_t *size_p)
{
    sock_req_t *r = req;
    sock_comm_t *c = r->comm;
    /* a request that completed stays completed when the connection breaks later (the peer
     * exits once it is done, and our next receive meets the end of the stream) */
    braid_status_t st = r->done ? BRAID_OK : comm_progress(c);
    *done = 0;
    if (st == BRAID_OK && !r->done)
        return BRAID_OK;
    if (size_p != NULL)
        *size_p = (size_t)r->len;
    *done = r->done;
    req_unlink(c, r);
    return *done ? BRAID_OK : st;
}

static void comm_close(void *comm)
{
    sock_comm_t *c = comm;
    if (c == NULL)
        return;
    while (c->head != NULL) {
        sock_req_t *r = c->head;
        c->head = r->next;
        free(r);
    }
    braid_socket_close(c->fd);
    free(c);
}

static void sock_close_listen(void *listen)
{
    sock_listen_t *l = listen;
    if (l == NULL)
        return;
    braid_socket_close(l->fd);
    free(l);
}

const braid_net_ops_t braid_net_socket = {
    .name = "Socket",
    .init = sock_init,
    .version = sock_version,
    .devices = sock_devices,
    .get_properties = sock_get_properties,
    .listen = sock_listen,
    .connect = sock_connect,
    .accept = sock_accept,
    .reg_mr = sock_reg_mr,
    .dereg_mr = sock_dereg_mr,
    .isend = sock_isend,
    .irecv = sock_irecv,
    .test = sock_test,
    .close_send = comm_close,
    .close_recv = comm_close,
    .close_listen = sock_close_listen,
};
