/*
 * UCX provider: tagged messages (ucp_tag_send_nbx / ucp_tag_recv_nbx) over connections made
 * with UCX's client-server API, so that a listen handle is a socket address (a worker
 * address does not fit in BRAID_NET_HANDLE_MAX bytes).
 *
 * One context and one worker per process, shared by every connection and every thread: the
 * worker runs in serialized mode and every UCP call (progress included) is made holding
 * ucx.lock. UCX calls our callbacks (conn_handler, endpoint errors, request completions)
 * only from inside those calls, so the callbacks run under the lock too.
 *
 * Tag matching is per worker, not per endpoint, so a tag names its connection exactly:
 *
 *    63             32 31              0
 *   [ connection id   | sequence number ]     matched with a full mask
 *
 * The id is unique among the receive sides of this process's worker: when a connection
 * request arrives, the server side takes the next value of a process-wide counter and sends
 * it to the client over the new endpoint's stream (UCP_FEATURE_STREAM: a byte stream belongs
 * to one endpoint, so the client's receive of the id cannot match anything else). connect()
 * posts that stream receive; until it completes the client's isend returns a NULL request
 * ("try again"), so connect() never waits for the peer. Both sides count the messages of a
 * connection, so the k-th isend matches the k-th irecv: posting order is matching order.
 *
 * Requests: our own ucx_req_t, passed to UCX as user_data; the completion callbacks only
 * write into it. A request given up before UCX completed it (an error reported by test, or
 * a close) is cancelled and handed back with ucp_request_free, after which UCX calls no
 * callback for it, so ours is freed at once.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"
#include "base/socket.h"
#include "transports/net/net.h"

#ifdef HAVE_UCX

#include <net/if.h>
#include <ucp/api/ucp.h>

#define UCX_HANDLE_MAGIC 0x58435542u            /* "BUCX" */
#define UCX_CLOSE_TIMEOUT_NS (5 * 1000000000LL) /* flush, then force close: each bounded */
#define UCX_CONNECTING_NS (1000000000LL)        /* a client's socket connects within this */
#define UCX_TAG_FULL_MASK UINT64_MAX

/* What listen writes into the caller's handle: the listener's bound address. */
typedef struct ucx_handle {
    uint32_t magic;
    uint32_t reserved;
    braid_sockaddr_t addr;
} ucx_handle_t;

_Static_assert(sizeof(ucx_handle_t) <= BRAID_NET_HANDLE_MAX, "ucx handle too large");

typedef struct ucx_req ucx_req_t;

typedef struct ucx_comm {
    ucp_ep_h ep;
    int is_send;
    int id_known;             /* send side: the receiver's id has arrived */
    uint32_t id;              /* the connection's id at the receiving worker */
    uint32_t seq;             /* sequence number of the next message posted */
    uint8_t id_wire[8];       /* the id on the stream, little-endian */
    void *hs_req;             /* the id's stream send/recv while it is pending */
    ucs_status_t failed;      /* UCS_OK until the endpoint's error callback */
    int64_t t_failed;         /* braid_time_ns() of that callback */
    ucx_req_t *pending;       /* requests posted and not yet reported by test */
    int64_t t_connect;        /* send side: when connect() started */
    struct ucx_comm *next;    /* the listener's queue, until accepted */
    char peer[BRAID_SOCKADDR_STRLEN];
} ucx_comm_t;

struct ucx_req {
    ucx_comm_t *comm;
    void *ureq;               /* UCX's request; NULL when the post completed at once */
    ucx_req_t *prev, *next;   /* comm->pending */
    ucs_status_t status;
    size_t size;              /* bytes sent / capacity of the receive */
    size_t length;            /* bytes received */
    int is_recv;
    int completed;
};

typedef struct ucx_listen {
    ucp_listener_h listener;
    ucx_comm_t *head, *tail;   /* connections made by ucx_conn_cb, not yet accepted */
    char addr[BRAID_SOCKADDR_STRLEN];
} ucx_listen_t;

/* Process-wide state; static so that the context and worker stay reachable to the end. */
static struct {
    pthread_mutex_t lock;       /* every UCP call */
    pthread_mutex_t init_lock;
    int init_done;
    braid_status_t init_st;
    ucp_context_h context;
    ucp_worker_h worker;
    uint32_t next_id;
    char version[64];
    char ifname[IF_NAMESIZE];
} ucx = { .lock = PTHREAD_MUTEX_INITIALIZER, .init_lock = PTHREAD_MUTEX_INITIALIZER };

static char ucx_dummy_mr;

/* ---- process-wide setup ------------------------------------------------------------- */

static braid_status_t ucx_init_fail(ucs_status_t status, const char *what)
{
    return braid_err(BRAID_ERR_UNSUPPORTED, "net ucx: %s failed: %s", what,
                     ucs_status_string(status));
}

/*
 * Eager sends for every size unless UCX_RNDV_THRESH says otherwise. A rendezvous moves the
 * data only when the sender progresses after the receiver matched it, and braid drives a
 * provider only while it waits on that provider's requests: a rank that waits on shared
 * memory meanwhile stalls its peer's receive (found with 2 ranks on one host and 1 on
 * another). An eager message is in the kernel's socket once the send completes, as with the
 * socket provider. The user's value is kept: only the default "auto" is changed.
 */
static void ucx_config_eager(ucp_config_t *config)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return;
    ucp_config_print(config, f, NULL, UCS_CONFIG_PRINT_CONFIG);
    fclose(f);
    const char *at = text != NULL ? strstr(text, "UCX_RNDV_THRESH=auto\n") : NULL;
    if (at != NULL && (at == text || at[-1] == '\n') &&
        ucp_config_modify(config, "RNDV_THRESH", "inf") == UCS_OK)
        BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net ucx: eager messages of every size "
                   "(UCX_RNDV_THRESH=inf; set UCX_RNDV_THRESH to choose otherwise)");
    free(text);
}

static braid_status_t ucx_context_open(void)
{
    ucp_config_t *config;
    ucs_status_t status = ucp_config_read(NULL, NULL, &config);
    if (status != UCS_OK)
        return ucx_init_fail(status, "ucp_config_read (check the UCX_* variables)");
    ucx_config_eager(config);
    /* STREAM carries only the connection id of each new connection (see the top) */
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME,
        .features = UCP_FEATURE_TAG | UCP_FEATURE_STREAM,
        .name = "braid",
    };
    status = ucp_init(&params, config, &ucx.context);
    ucp_config_release(config);
    if (status != UCS_OK)
        return ucx_init_fail(status, "ucp_init");
    ucp_worker_params_t wparams = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SERIALIZED,   /* serialized by ucx.lock */
    };
    status = ucp_worker_create(ucx.context, &wparams, &ucx.worker);
    if (status != UCS_OK) {
        ucp_cleanup(ucx.context);
        ucx.context = NULL;
        return ucx_init_fail(status, "ucp_worker_create");
    }
    return BRAID_OK;
}

static void ucx_conn_cb(ucp_conn_request_h creq, void *arg);

/* Create a listener on addr (port 0 picks one) and write the bound address back. */
static ucs_status_t ucx_listener_open(braid_sockaddr_t *addr, void *arg, ucp_listener_h *l_p)
{
    ucp_listener_params_t params = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = { .addr = &addr->sa, .addrlen = braid_sockaddr_len(addr) },
        .conn_handler = { .cb = ucx_conn_cb, .arg = arg },
    };
    ucp_listener_attr_t attr = { .field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR };
    ucp_listener_h l;
    ucs_status_t status = ucp_listener_create(ucx.worker, &params, &l);
    if (status != UCS_OK)
        return status;
    status = ucp_listener_query(l, &attr);
    if (status != UCS_OK) {
        ucp_listener_destroy(l);
        return status;
    }
    memcpy(addr, &attr.sockaddr, sizeof(*addr));
    *l_p = l;
    return UCS_OK;
}

/* Can UCX listen here? Catches a UCX without a sockaddr transport (UCX_SOCKADDR_TLS_PRIORITY,
 * UCX_TLS) at init rather than at the first listen. */
static braid_status_t ucx_probe_listener(void)
{
    braid_sockaddr_t addr;
    ucp_listener_h l;
    /* its error is recorded already; the provider cannot run without an interface */
    if (braid_socket_find_if(NULL, &addr, ucx.ifname) < 0)
        return BRAID_ERR_UNSUPPORTED;
    ucs_status_t status = ucx_listener_open(&addr, NULL, &l);
    if (status != UCS_OK)
        return ucx_init_fail(status, "ucp_listener_create (client-server connections)");
    ucp_listener_destroy(l);
    return BRAID_OK;
}

static braid_status_t ucx_init_once(void)
{
    BRAID_CHECK(ucx_context_open());
    pthread_mutex_lock(&ucx.lock);
    braid_status_t st = ucx_probe_listener();
    pthread_mutex_unlock(&ucx.lock);
    if (st < 0) {
        ucp_worker_destroy(ucx.worker);
        ucp_cleanup(ucx.context);
        ucx.worker = NULL;
        ucx.context = NULL;
        return st;
    }
    snprintf(ucx.version, sizeof(ucx.version), "UCX %s", ucp_get_version_string());
    BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net ucx: %s, interface %s", ucx.version,
               ucx.ifname);
    return BRAID_OK;
}

static braid_status_t ucx_init(void)
{
    pthread_mutex_lock(&ucx.init_lock);
    if (!ucx.init_done) {
        ucx.init_st = ucx_init_once();
        ucx.init_done = 1;
    }   /* a failure was recorded once, by the first call */
    braid_status_t st = ucx.init_st;
    pthread_mutex_unlock(&ucx.init_lock);
    return st;
}

static const char *ucx_version(void)
{
    return ucx.version;
}

static braid_status_t ucx_devices(int *ndev_p)
{
    *ndev_p = 1;
    return BRAID_OK;
}

static int ucx_if_speed(const char *ifname)
{
    char path[64 + IF_NAMESIZE];
    int speed = 0;
    snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    if (fscanf(f, "%d", &speed) != 1 || speed < 0)   /* -1 or EINVAL: not reported */
        speed = 0;
    fclose(f);
    return speed;
}

static braid_status_t ucx_get_properties(int dev, braid_net_props_t *props_p)
{
    if (dev != 0)
        return braid_err(BRAID_ERR_INVALID, "net ucx: no device %d (there is one)", dev);
    memset(props_p, 0, sizeof(*props_p));
    snprintf(props_p->name, sizeof(props_p->name), "%s", ucx.ifname);
    props_p->speed_mbps = ucx_if_speed(ucx.ifname);
    return BRAID_OK;
}

/* ---- requests ------------------------------------------------------------------------ */

static void ucx_req_complete(ucx_req_t *r, ucs_status_t status, size_t length)
{
    r->status = status;
    r->length = length;
    r->completed = 1;
}

static void ucx_send_cb(void *request, ucs_status_t status, void *user_data)
{
    (void)request;
    ucx_req_complete(user_data, status, 0);
}

static void ucx_recv_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                        void *user_data)
{
    (void)request;
    ucx_req_complete(user_data, status, info != NULL ? info->length : 0);
}

static ucx_req_t *ucx_req_new(ucx_comm_t *c, size_t size, int is_recv)
{
    ucx_req_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->comm = c;
    r->size = size;
    r->is_recv = is_recv;
    r->next = c->pending;
    if (c->pending != NULL)
        c->pending->prev = r;
    c->pending = r;
    return r;
}

static void ucx_req_unlink(ucx_req_t *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        r->comm->pending = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
}

/* What a post returned: a request to wait for, or an immediate completion (or error). */
static void ucx_req_posted(ucx_req_t *r, ucs_status_ptr_t ret)
{
    if (UCS_PTR_IS_PTR(ret)) {
        r->ureq = ret;
        return;
    }
    r->status = UCS_PTR_STATUS(ret);
    r->completed = 1;
}

/* Give up a request (under the lock). After ucp_request_free UCX never calls the callback:
 * it releases its own request once the operation ends (the force close ends it). */
static void ucx_req_abandon(ucx_req_t *r)
{
    ucx_req_unlink(r);
    if (r->ureq != NULL) {
        if (!r->completed)
            ucp_request_cancel(ucx.worker, r->ureq);   /* a receive not matched yet */
        ucp_request_free(r->ureq);
    }
    free(r);
}

static braid_status_t ucx_comm_error(const ucx_comm_t *c, ucs_status_t status)
{
    return braid_err(BRAID_ERR_REMOTE, "net ucx: connection %s %s failed: %s",
                     c->is_send ? "to" : "from", c->peer, ucs_status_string(status));
}

/* Report a completed request and free it (under the lock). */
static braid_status_t ucx_req_finish(ucx_req_t *r, int *done, size_t *size_p)
{
    ucx_comm_t *c = r->comm;
    braid_status_t st = BRAID_OK;
    ucx_req_unlink(r);
    if (r->ureq != NULL)
        ucp_request_free(r->ureq);
    if (r->status == UCS_ERR_MESSAGE_TRUNCATED) {
        st = braid_err(BRAID_ERR_REMOTE, "net ucx: a message of %zu bytes from %s is longer "
                       "than its receive of %zu bytes (%s)", r->length, c->peer, r->size,
                       ucs_status_string(r->status));
    } else if (r->status != UCS_OK) {
        st = ucx_comm_error(c, c->failed != UCS_OK ? c->failed : r->status);
    } else {
        *done = 1;
        if (size_p != NULL)
            *size_p = r->is_recv ? r->length : r->size;
    }
    free(r);
    return st;
}

static braid_status_t ucx_test(void *req, int *done, size_t *size_p)
{
    ucx_req_t *r = req;
    braid_status_t st = BRAID_OK;
    *done = 0;
    pthread_mutex_lock(&ucx.lock);
    if (!r->completed)
        ucp_worker_progress(ucx.worker);
    if (r->completed) {
        st = ucx_req_finish(r, done, size_p);
    } else if (r->comm->failed != UCS_OK &&
               braid_time_ns() - r->comm->t_failed >
                   braid_param_int(BRAID_P_NET_LOST_S) * INT64_C(1000000000)) {
        /* A receive is not tied to the endpoint: UCX would wait for ever. But a peer that
         * closes after its last message (it finished first and destroyed its communicator)
         * fails the endpoint as well, and then no call waits for this receive: the failure
         * counts once it is BRAID_NET_LOST_S old. By then the health link has named a peer
         * that is gone to a call that waits on it (transports/net/net_health.c). */
        st = ucx_comm_error(r->comm, r->comm->failed);
        ucx_req_abandon(r);
    }
    pthread_mutex_unlock(&ucx.lock);
    return st;
}

/* ---- connections --------------------------------------------------------------------- */

static void ucx_ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    ucx_comm_t *c = arg;
    (void)ep;
    if (c->failed == UCS_OK) {
        c->failed = status;
        c->t_failed = braid_time_ns();
    }
    BRAID_INFO(BRAID_SUB_NET, "net ucx: connection %s %s: %s", c->is_send ? "to" : "from",
               c->peer, ucs_status_string(status));
}

static braid_status_t ucx_listen(int dev, void *handle, void **listen_p)
{
    ucx_handle_t *h = handle;
    braid_sockaddr_t addr;
    if (dev != 0)
        return braid_err(BRAID_ERR_INVALID, "net ucx: no device %d (there is one)", dev);
    BRAID_CHECK(braid_socket_find_if(NULL, &addr, NULL));   /* port 0 */
    ucx_listen_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net ucx: out of memory for a listener");
    braid_sockaddr_str(&addr, l->addr, sizeof(l->addr));
    pthread_mutex_lock(&ucx.lock);
    ucs_status_t status = ucx_listener_open(&addr, l, &l->listener);
    pthread_mutex_unlock(&ucx.lock);
    if (status != UCS_OK) {
        braid_status_t st = braid_err(BRAID_ERR_SYSTEM, "net ucx: cannot listen on %s: %s",
                                      l->addr, ucs_status_string(status));
        free(l);
        return st;
    }
    braid_sockaddr_str(&addr, l->addr, sizeof(l->addr));
    h->magic = UCX_HANDLE_MAGIC;
    h->addr = addr;
    BRAID_INFO(BRAID_SUB_NET, "net ucx: listening on %s", l->addr);
    *listen_p = l;
    return BRAID_OK;
}

static ucx_comm_t *ucx_comm_new(int is_send, const braid_sockaddr_t *peer)
{
    ucx_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->is_send = is_send;
    c->failed = UCS_OK;
    braid_sockaddr_str(peer, c->peer, sizeof(c->peer));
    return c;
}

static void ucx_id_decode(ucx_comm_t *c)
{
    c->id = 0;
    for (int i = 0; i < 4; i++)
        c->id |= (uint32_t)c->id_wire[i] << (8 * i);
    c->id_known = 1;
}

/* Post the receive of the connection id on the new endpoint's stream (under the lock). */
static void ucx_id_recv_post(ucx_comm_t *c)
{
    size_t length = 0;
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
        .flags = UCP_STREAM_RECV_FLAG_WAITALL,
    };
    ucs_status_ptr_t ret = ucp_stream_recv_nbx(c->ep, c->id_wire, sizeof(c->id_wire),
                                               &length, &param);
    if (UCS_PTR_IS_PTR(ret))
        c->hs_req = ret;
    else if (UCS_PTR_STATUS(ret) != UCS_OK)
        c->failed = UCS_PTR_STATUS(ret);
    else
        ucx_id_decode(c);
}

static braid_status_t ucx_connect(int dev, const void *handle, void **send_p)
{
    const ucx_handle_t *h = handle;
    if (dev != 0 || h->magic != UCX_HANDLE_MAGIC || !braid_sockaddr_valid(&h->addr))
        return braid_err(BRAID_ERR_INVALID, "net ucx: connect to a handle that is not a UCX "
                         "listener's (device %d)", dev);
    ucx_comm_t *c = ucx_comm_new(1, &h->addr);
    if (c == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net ucx: out of memory for a connection");
    ucp_ep_params_t params = {
        .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .sockaddr = { .addr = &h->addr.sa, .addrlen = braid_sockaddr_len(&h->addr) },
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = { .cb = ucx_ep_err_cb, .arg = c },
    };
    c->t_connect = braid_time_ns();
    pthread_mutex_lock(&ucx.lock);
    ucs_status_t status = ucp_ep_create(ucx.worker, &params, &c->ep);
    if (status == UCS_OK)
        ucx_id_recv_post(c);
    pthread_mutex_unlock(&ucx.lock);
    if (status != UCS_OK) {
        braid_status_t st = braid_err(BRAID_ERR_REMOTE, "net ucx: cannot connect to %s: %s",
                                      c->peer, ucs_status_string(status));
        free(c);
        return st;
    }
    BRAID_INFO(BRAID_SUB_NET, "net ucx: connecting to %s", c->peer);
    *send_p = c;
    return BRAID_OK;
}

/* Create the server side of a connection request and send it its id (under the lock). */
static ucs_status_t ucx_accept_one(ucp_conn_request_h creq, ucx_comm_t *c)
{
    ucp_ep_params_t params = {
        .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .conn_request = creq,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = { .cb = ucx_ep_err_cb, .arg = c },
    };
    ucs_status_t status = ucp_ep_create(ucx.worker, &params, &c->ep);
    if (status != UCS_OK)
        return status;
    if (++ucx.next_id == 0)   /* 2^32 connections later: 0 stays unused */
        ++ucx.next_id;
    c->id = ucx.next_id;
    for (int i = 0; i < 8; i++)
        c->id_wire[i] = (uint8_t)((uint64_t)c->id >> (8 * i));
    ucp_request_param_t param = { .op_attr_mask = 0 };
    ucs_status_ptr_t ret = ucp_stream_send_nbx(c->ep, c->id_wire, sizeof(c->id_wire), &param);
    if (UCS_PTR_IS_PTR(ret))
        c->hs_req = ret;
    else if (UCS_PTR_STATUS(ret) != UCS_OK)
        c->failed = UCS_PTR_STATUS(ret);
    return UCS_OK;
}

static braid_sockaddr_t ucx_connreq_addr(ucp_conn_request_h creq)
{
    braid_sockaddr_t addr = { .sa.sa_family = AF_UNSPEC };
    ucp_conn_request_attr_t attr = { .field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR };
    if (ucp_conn_request_query(creq, &attr) == UCS_OK)
        memcpy(&addr, &attr.client_address, sizeof(addr));
    return addr;
}

/*
 * A connection request arrived (from progress, under the lock). It is answered here rather
 * than in accept(): the connection is then made, and the client learns its id, whenever
 * this process progresses, so a client can always finish connecting before it closes (see
 * ucx_wait_connected) even when the listener's owner never calls accept.
 */
static void ucx_conn_cb(ucp_conn_request_h creq, void *arg)
{
    ucx_listen_t *l = arg;
    if (l == NULL)   /* the init probe's listener: gone before anyone could know its port */
        return;
    braid_sockaddr_t peer = ucx_connreq_addr(creq);
    ucx_comm_t *c = ucx_comm_new(0, &peer);
    ucs_status_t status = c != NULL ? ucx_accept_one(creq, c) : UCS_ERR_NO_MEMORY;
    if (c == NULL)
        ucp_listener_reject(l->listener, creq);
    if (status != UCS_OK) {   /* that client sees the failure on its side */
        BRAID_INFO(BRAID_SUB_NET, "net ucx: cannot accept a connection on %s: %s", l->addr,
                   ucs_status_string(status));
        free(c);
        return;
    }
    if (l->tail != NULL)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
}

static braid_status_t ucx_accept(void *listen, void **recv_p)
{
    ucx_listen_t *l = listen;
    pthread_mutex_lock(&ucx.lock);
    ucp_worker_progress(ucx.worker);
    ucx_comm_t *c = l->head;
    if (c != NULL) {
        l->head = c->next;
        if (l->head == NULL)
            l->tail = NULL;
        c->next = NULL;
    }
    pthread_mutex_unlock(&ucx.lock);
    if (c != NULL)
        BRAID_INFO(BRAID_SUB_NET, "net ucx: accepted %s on %s as connection %u", c->peer,
                   l->addr, c->id);
    *recv_p = c;
    return BRAID_OK;
}

/* ---- data ---------------------------------------------------------------------------- */

static braid_status_t ucx_reg_mr(void *comm, void *data, size_t size, void **mh_p)
{
    (void)comm, (void)data, (void)size;
    *mh_p = &ucx_dummy_mr;   /* host memory: UCX registers what it needs itself */
    return BRAID_OK;
}

static braid_status_t ucx_dereg_mr(void *comm, void *mh)
{
    (void)comm, (void)mh;
    return BRAID_OK;
}

/* Has the receiver's id arrived? (send side, under the lock) */
static int ucx_id_ready(ucx_comm_t *c)
{
    size_t length = 0;
    if (c->id_known || c->hs_req == NULL)
        return c->id_known;
    ucp_worker_progress(ucx.worker);
    ucs_status_t status = ucp_stream_recv_request_test(c->hs_req, &length);
    if (status == UCS_INPROGRESS)
        return 0;
    ucp_request_free(c->hs_req);
    c->hs_req = NULL;
    if (status != UCS_OK) {
        if (c->failed == UCS_OK)
            c->failed = status;
        return 0;
    }
    ucx_id_decode(c);
    return 1;
}

static uint64_t ucx_tag(ucx_comm_t *c)
{
    return (uint64_t)c->id << 32 | c->seq++;
}

static braid_status_t ucx_isend(void *send, const void *data, size_t size, void *mh,
                                void **req_p)
{
    ucx_comm_t *c = send;
    (void)mh;
    pthread_mutex_lock(&ucx.lock);
    int ready = ucx_id_ready(c);
    ucs_status_t failed = c->failed;
    ucx_req_t *r = ready && failed == UCS_OK ? ucx_req_new(c, size, 0) : NULL;
    if (r != NULL) {
        ucp_request_param_t param = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
            .cb.send = ucx_send_cb,
            .user_data = r,
        };
        ucx_req_posted(r, ucp_tag_send_nbx(c->ep, data, size, ucx_tag(c), &param));
    }
    pthread_mutex_unlock(&ucx.lock);
    if (failed != UCS_OK)
        return ucx_comm_error(c, failed);
    if (ready && r == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net ucx: out of memory for a send request");
    *req_p = r;   /* NULL until the receiver's id arrived: try again */
    return BRAID_OK;
}

static braid_status_t ucx_irecv(void *recv, void *data, size_t size, void *mh, void **req_p)
{
    ucx_comm_t *c = recv;
    (void)mh;
    pthread_mutex_lock(&ucx.lock);
    if (c->hs_req != NULL && ucp_request_check_status(c->hs_req) != UCS_INPROGRESS) {
        ucp_request_free(c->hs_req);   /* the id's send is done */
        c->hs_req = NULL;
    }
    ucx_req_t *r = ucx_req_new(c, size, 1);
    if (r != NULL) {
        /* Posted even on a failed connection: its message may have arrived before the
         * failure; test() reports the failure if it did not. NO_IMM_CMPL: UCX 1.13 leaves
         * recv_info unset on an immediate completion (openucx/ucx#9425, fixed in 1.16), so
         * the length always comes through the callback. */
        ucp_request_param_t param = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                            UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
            .cb.recv = ucx_recv_cb,
            .user_data = r,
        };
        ucs_status_ptr_t ret = ucp_tag_recv_nbx(ucx.worker, data, size, ucx_tag(c),
                                                UCX_TAG_FULL_MASK, &param);
        ucx_req_posted(r, ret);
    }
    pthread_mutex_unlock(&ucx.lock);
    if (r == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net ucx: out of memory for a receive request");
    *req_p = r;
    return BRAID_OK;
}

/* ---- closing ------------------------------------------------------------------------- */

/* Let UCX finish what a close scheduled: part of an endpoint's release runs from progress. */
static void ucx_progress_idle(void)
{
    pthread_mutex_lock(&ucx.lock);
    for (int i = 0; i < 16 && ucp_worker_progress(ucx.worker) != 0; i++)
        continue;
    pthread_mutex_unlock(&ucx.lock);
}

/* Progress until `ureq` (a flush or close) completes or the time is up, then free it. */
static void ucx_wait_free(ucs_status_ptr_t ureq)
{
    int64_t deadline = braid_time_ns() + UCX_CLOSE_TIMEOUT_NS;
    int busy = UCS_PTR_IS_PTR(ureq);
    while (busy) {
        pthread_mutex_lock(&ucx.lock);
        ucp_worker_progress(ucx.worker);
        busy = ucp_request_check_status(ureq) == UCS_INPROGRESS;
        if (!busy || braid_time_ns() > deadline) {
            ucp_request_free(ureq);   /* still busy: UCX releases it when it completes */
            busy = 0;
        }
        pthread_mutex_unlock(&ucx.lock);
    }
}

/*
 * Let a young send side's socket finish connecting (or fail) before it is closed: UCX 1.13's
 * TCP connection manager fails an assertion (tcp_sockcm_ep.c:416) when an endpoint is
 * closed while its socket is still connecting. The id's arrival proves the connection is
 * made; without it (a peer that does not progress), UCX_CONNECTING_NS after connect() is
 * taken as enough for the socket, so closing many connections waits that long once at most.
 */
static void ucx_wait_connected(ucx_comm_t *c)
{
    int64_t deadline = c->t_connect + UCX_CONNECTING_NS;
    for (int ready = 0; !ready && braid_time_ns() < deadline;) {
        pthread_mutex_lock(&ucx.lock);
        ready = ucx_id_ready(c) || c->failed != UCS_OK;
        pthread_mutex_unlock(&ucx.lock);
    }
}

/*
 * Close a comm: cancel what is pending, flush the sends of a healthy send side (a completed
 * send may still sit in UCX's buffers; the force close would drop it), then force-close the
 * endpoint, which needs nothing from a peer that may be dead.
 */
static void ucx_comm_close(ucx_comm_t *c)
{
    ucp_request_param_t flush = { .op_attr_mask = 0 };
    ucp_request_param_t force = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                  .flags = UCP_EP_CLOSE_FLAG_FORCE };
    if (c == NULL)
        return;
    if (c->is_send)
        ucx_wait_connected(c);
    pthread_mutex_lock(&ucx.lock);
    while (c->pending != NULL)
        ucx_req_abandon(c->pending);
    int do_flush = c->is_send && c->id_known && c->failed == UCS_OK;
    ucs_status_ptr_t ret = do_flush ? ucp_ep_flush_nbx(c->ep, &flush) : NULL;
    pthread_mutex_unlock(&ucx.lock);
    ucx_wait_free(ret);
    pthread_mutex_lock(&ucx.lock);
    ret = ucp_ep_close_nbx(c->ep, &force);   /* no error callback after this */
    if (c->hs_req != NULL)
        ucp_request_free(c->hs_req);
    pthread_mutex_unlock(&ucx.lock);
    ucx_wait_free(ret);
    ucx_progress_idle();
    free(c);
}

static void ucx_close_send(void *send)
{
    ucx_comm_close(send);
}

static void ucx_close_recv(void *recv)
{
    ucx_comm_close(recv);
}

static void ucx_close_listen(void *listen)
{
    ucx_listen_t *l = listen;
    if (l == NULL)
        return;
    pthread_mutex_lock(&ucx.lock);
    ucp_listener_destroy(l->listener);   /* no ucx_conn_cb after this */
    ucx_comm_t *c = l->head;
    pthread_mutex_unlock(&ucx.lock);
    while (c != NULL) {   /* connections nobody accepted */
        ucx_comm_t *next = c->next;
        ucx_comm_close(c);
        c = next;
    }
    free(l);
}

const braid_net_ops_t braid_net_ucx = {
    .name = "UCX",
    .init = ucx_init,
    .version = ucx_version,
    .devices = ucx_devices,
    .get_properties = ucx_get_properties,
    .listen = ucx_listen,
    .connect = ucx_connect,
    .accept = ucx_accept,
    .reg_mr = ucx_reg_mr,
    .dereg_mr = ucx_dereg_mr,
    .isend = ucx_isend,
    .irecv = ucx_irecv,
    .test = ucx_test,
    .close_send = ucx_close_send,
    .close_recv = ucx_close_recv,
    .close_listen = ucx_close_listen,
};

#endif /* HAVE_UCX (without it, transports/net/net_missing.c stands in) */
