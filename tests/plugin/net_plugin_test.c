/*
 * libnccl-net-braidtest.so: a small NCCL net plugin over TCP, for test_net_plugin.sh.
 *
 * It stands for a third party's plugin: it uses nothing of braid but the ABI declarations
 * of transports/net/plugin/nccl_net.h, and exports ncclNetPlugin_v8, _v9 and _v10 (one
 * implementation behind three tables; -DBRAIDTEST_MAX_VERSION=8 or 9 leaves the newer ones
 * out, so that the test can make braid take an older one).
 *
 *   listen   a TCP listener on BRAIDTEST_ADDR (default 127.0.0.1), port 0; the handle is
 *            its address
 *   connect  a non-blocking connect, its socket kept in the handle between calls; the first
 *            call always answers "not yet" (NULL), so callers must call again
 *   accept   NULL until a connection has arrived
 *   isend    one message: an 8-byte length, then the bytes; messages move in order,
 *   irecv    without blocking, whenever a request of the connection is tested
 *   test     done and the size; a message longer than the receive it meets fails the
 *            connection with ncclRemoteError (and a WARN line through NCCL's logger)
 *
 * For the test: BRAIDTEST_LOG=FILE appends "braidtest vN isend A irecv B connect_again C
 * pid P" at process exit (the version whose init was called, and the calls made);
 * BRAIDTEST_FAIL_INIT=1 makes init fail; BRAIDTEST_RECV_CAP=N offers at most N bytes of
 * every receive buffer (to provoke the message-too-long error).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1   /* accept4; the build's config.h defines it too */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transports/net/plugin/nccl_net.h"

#ifndef BRAIDTEST_MAX_VERSION
#define BRAIDTEST_MAX_VERSION 10
#endif

#define BT_EXPORT __attribute__((visibility("default")))
#define BT_MAGIC 0x62746e65u   /* "btne" */

typedef union bt_addr {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
} bt_addr_t;

/* What listen gives the sender; connect uses stage and fd as its scratch between calls. */
typedef struct bt_handle {
    uint32_t magic;
    int32_t stage;              /* 0 not started, 1 connecting, 2 done */
    int32_t fd;
    int32_t pad;
    bt_addr_t addr;
} bt_handle_t;

_Static_assert(sizeof(bt_handle_t) <= NCCL_NET_HANDLE_MAXSIZE, "handle fits");

typedef struct bt_comm bt_comm_t;

typedef struct bt_req {
    bt_comm_t *comm;
    struct bt_req *next;
    char *buf;
    size_t cap;                 /* receive: the buffer's size */
    uint64_t len;               /* the message's length (receive: once read) */
    size_t hdr_off, off;
    int done;
} bt_req_t;

struct bt_comm {
    int fd;
    int is_send;
    ncclResult_t failed;
    bt_req_t *head, *tail;
};

typedef struct bt_listen {
    int fd;
} bt_listen_t;

static ncclDebugLogger_t bt_log;
static int bt_version;          /* of the init that was called */
static atomic_long bt_nisend, bt_nirecv, bt_nagain;

#define BT_WARN(...) bt_log(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__)
#define BT_INFO(...) bt_log(NCCL_LOG_INFO, NCCL_NET | NCCL_INIT, __FILE__, __LINE__, __VA_ARGS__)

/* The counts, for the test to see that the data went through this plugin. */
__attribute__((destructor)) static void bt_report(void)
{
    const char *path = getenv("BRAIDTEST_LOG");
    char line[160];
    if (path == NULL || path[0] == '\0' || bt_version == 0)
        return;
    int n = snprintf(line, sizeof(line), "braidtest v%d isend %ld irecv %ld connect_again %ld "
                     "pid %d\n", bt_version, atomic_load(&bt_nisend), atomic_load(&bt_nirecv),
                     atomic_load(&bt_nagain), (int)getpid());
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (write(fd, line, (size_t)n) != n)
        (void)0;   /* nothing to do about it at exit */
    close(fd);
}

/* ---- init and devices ------------------------------------------------------------------- */

static ncclResult_t bt_init_any(ncclDebugLogger_t logger, int version)
{
    const char *fail = getenv("BRAIDTEST_FAIL_INIT");
    bt_log = logger;
    bt_version = version;
    if (fail != NULL && fail[0] != '\0' && strcmp(fail, "0") != 0) {
        BT_WARN("init fails, as BRAIDTEST_FAIL_INIT=%s asks", fail);
        return ncclSystemError;
    }
    BT_INFO("ncclNetPlugin_v%d initialised", version);
    return ncclSuccess;
}

static ncclResult_t bt_init_v8(ncclDebugLogger_t logger)
{
    return bt_init_any(logger, 8);
}

static ncclResult_t bt_init_v9(ncclDebugLogger_t logger)
{
    return bt_init_any(logger, 9);
}

static ncclResult_t bt_init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
    (void)prof;
    return bt_init_any(logger, 10);
}

static ncclResult_t bt_devices(int *ndev)
{
    *ndev = 1;
    return ncclSuccess;
}

#define BT_PROPS_COMMON(_p)                                                                \
    do {                                                                                   \
        memset((_p), 0, sizeof(*(_p)));                                                    \
        (_p)->name = (char *)"braidtest0";                                                 \
        (_p)->ptrSupport = NCCL_PTR_HOST;                                                  \
        (_p)->speed = 10000;                                                               \
        (_p)->latency = 0;                                                                 \
        (_p)->maxComms = 65536;                                                            \
        (_p)->maxRecvs = 1;                                                                \
        (_p)->netDeviceType = NCCL_NET_DEVICE_HOST;                                        \
    } while (0)

static ncclResult_t bt_props_v8(int dev, ncclNetProperties_v8_t *p)
{
    if (dev != 0)
        return ncclInvalidArgument;
    BT_PROPS_COMMON(p);
    return ncclSuccess;
}

static ncclResult_t bt_props_v9(int dev, ncclNetProperties_v9_t *p)
{
    if (dev != 0)
        return ncclInvalidArgument;
    BT_PROPS_COMMON(p);
    p->vProps.ndevs = 1;
    p->maxP2pBytes = p->maxCollBytes = (size_t)1 << 40;
    return ncclSuccess;
}

static ncclResult_t bt_props_v10(int dev, ncclNetProperties_v10_t *p)
{
    if (dev != 0)
        return ncclInvalidArgument;
    BT_PROPS_COMMON(p);
    p->vProps.ndevs = 1;
    p->maxP2pBytes = p->maxCollBytes = (size_t)1 << 40;
    return ncclSuccess;
}

/* ---- connections ------------------------------------------------------------------------ */

static socklen_t bt_addr_len(const bt_addr_t *a)
{
    return a->sa.sa_family == AF_INET6 ? sizeof(a->in6) : sizeof(a->in4);
}

static ncclResult_t bt_addr_get(bt_addr_t *a)
{
    const char *text = getenv("BRAIDTEST_ADDR");
    if (text == NULL || text[0] == '\0')
        text = "127.0.0.1";
    memset(a, 0, sizeof(*a));
    if (inet_pton(AF_INET, text, &a->in4.sin_addr) == 1) {
        a->in4.sin_family = AF_INET;
        return ncclSuccess;
    }
    if (inet_pton(AF_INET6, text, &a->in6.sin6_addr) == 1) {
        a->in6.sin6_family = AF_INET6;
        return ncclSuccess;
    }
    BT_WARN("BRAIDTEST_ADDR=%s is not an IPv4 or IPv6 address", text);
    return ncclInvalidArgument;
}

static ncclResult_t bt_listen(int dev, void *handle, void **listenComm)
{
    bt_handle_t h = { .magic = BT_MAGIC, .fd = -1 };
    socklen_t len = sizeof(h.addr);
    (void)dev;
    if (bt_addr_get(&h.addr) != ncclSuccess)
        return ncclInvalidArgument;
    int fd = socket(h.addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, &h.addr.sa, bt_addr_len(&h.addr)) != 0 || listen(fd, 256) != 0 ||
        getsockname(fd, &h.addr.sa, &len) != 0) {
        BT_WARN("cannot listen: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return ncclSystemError;
    }
    bt_listen_t *l = malloc(sizeof(*l));
    if (l == NULL) {
        close(fd);
        return ncclSystemError;
    }
    l->fd = fd;
    memcpy(handle, &h, sizeof(h));
    *listenComm = l;
    return ncclSuccess;
}

static ncclResult_t bt_comm_new(int fd, int is_send, void **comm)
{
    int one = 1;
    bt_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        return ncclSystemError;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->fd = fd;
    c->is_send = is_send;
    *comm = c;
    return ncclSuccess;
}

static ncclResult_t bt_connect_fail(bt_handle_t *h, int err)
{
    BT_WARN("cannot connect: %s", strerror(err));
    close(h->fd);
    h->fd = -1;
    h->stage = 0;
    return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH ||
                   err == ENETUNREACH ? ncclRemoteError : ncclSystemError;
}

/* Start the connect, then see whether it is done; NULL in *sendComm until it is. */
static ncclResult_t bt_connect_any(void *handle, void **sendComm)
{
    bt_handle_t *h = handle;
    *sendComm = NULL;
    if (h->magic != BT_MAGIC) {
        BT_WARN("the handle given to connect is not a BraidTest handle");
        return ncclInvalidArgument;
    }
    if (h->stage == 0) {
        h->fd = socket(h->addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (h->fd < 0)
            return bt_connect_fail(h, errno);
        if (connect(h->fd, &h->addr.sa, bt_addr_len(&h->addr)) != 0 && errno != EINPROGRESS)
            return bt_connect_fail(h, errno);
        h->stage = 1;
        atomic_fetch_add(&bt_nagain, 1);
        return ncclSuccess;     /* always once "not yet": callers must call again */
    }
    struct pollfd p = { .fd = h->fd, .events = POLLOUT };
    int err = 0;
    socklen_t len = sizeof(err);
    if (poll(&p, 1, 0) == 0) {
        atomic_fetch_add(&bt_nagain, 1);
        return ncclSuccess;
    }
    if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err != 0)
        return bt_connect_fail(h, err);
    h->stage = 2;
    return bt_comm_new(h->fd, 1, sendComm);
}

static ncclResult_t bt_connect_v8(int dev, void *handle, void **sendComm,
                                  ncclNetDeviceHandle_v8_t **devComm)
{
    (void)dev;
    (void)devComm;
    return bt_connect_any(handle, sendComm);
}

static ncclResult_t bt_connect_v10(int dev, ncclNetCommConfig_v10_t *config, void *handle,
                                   void **sendComm, ncclNetDeviceHandle_v10_t **devComm)
{
    (void)dev;
    (void)config;
    (void)devComm;
    return bt_connect_any(handle, sendComm);
}

static ncclResult_t bt_accept(void *listenComm, void **recvComm,
                              ncclNetDeviceHandle_v8_t **devComm)
{
    bt_listen_t *l = listenComm;
    (void)devComm;
    *recvComm = NULL;
    int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0)
        return bt_comm_new(fd, 0, recvComm);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
        return ncclSuccess;
    BT_WARN("accept failed: %s", strerror(errno));
    return ncclSystemError;
}

static ncclResult_t bt_close_comm(void *comm)
{
    bt_comm_t *c = comm;
    while (c->head != NULL) {
        bt_req_t *r = c->head;
        c->head = r->next;
        free(r);
    }
    close(c->fd);
    free(c);
    return ncclSuccess;
}

static ncclResult_t bt_close_listen(void *listenComm)
{
    bt_listen_t *l = listenComm;
    close(l->fd);
    free(l);
    return ncclSuccess;
}

/* ---- memory ----------------------------------------------------------------------------- */

static ncclResult_t bt_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
    (void)data;
    (void)size;
    if (type != NCCL_PTR_HOST) {
        BT_WARN("only host memory can be registered (type %d)", type);
        return ncclInvalidArgument;
    }
    *mhandle = comm;
    return ncclSuccess;
}

static ncclResult_t bt_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
                                     uint64_t offset, int fd, void **mhandle)
{
    (void)offset;
    (void)fd;
    return bt_reg_mr(comm, data, size, type, mhandle);
}

static ncclResult_t bt_dereg_mr(void *comm, void *mhandle)
{
    (void)comm;
    (void)mhandle;
    return ncclSuccess;
}

/* ---- messages --------------------------------------------------------------------------- */

static ncclResult_t bt_post(bt_comm_t *c, void *data, size_t size, void **request)
{
    bt_req_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return ncclSystemError;
    r->comm = c;
    r->buf = data;
    r->cap = size;
    r->len = size;
    if (c->tail != NULL)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    *request = r;
    return ncclSuccess;
}

static ncclResult_t bt_isend_any(void *sendComm, void *data, size_t size, void **request)
{
    atomic_fetch_add(&bt_nisend, 1);
    return bt_post(sendComm, data, size, request);
}

static ncclResult_t bt_irecv_any(void *recvComm, int n, void *data, size_t size,
                                 void **request)
{
    const char *cap = getenv("BRAIDTEST_RECV_CAP");
    if (n != 1) {
        BT_WARN("%d grouped receives asked for; maxRecvs is 1", n);
        return ncclInvalidArgument;
    }
    if (cap != NULL && cap[0] != '\0' && strtoull(cap, NULL, 10) < size)
        size = (size_t)strtoull(cap, NULL, 10);
    atomic_fetch_add(&bt_nirecv, 1);
    return bt_post(recvComm, data, size, request);
}

static ncclResult_t bt_isend_v8(void *sendComm, void *data, int size, int tag, void *mhandle,
                                void **request)
{
    (void)tag;
    (void)mhandle;
    return bt_isend_any(sendComm, data, (size_t)size, request);
}

static ncclResult_t bt_isend_v9(void *sendComm, void *data, size_t size, int tag,
                                void *mhandle, void **request)
{
    (void)tag;
    (void)mhandle;
    return bt_isend_any(sendComm, data, size, request);
}

static ncclResult_t bt_isend_v10(void *sendComm, void *data, size_t size, int tag,
                                 void *mhandle, void *phandle, void **request)
{
    (void)tag;
    (void)mhandle;
    (void)phandle;
    return bt_isend_any(sendComm, data, size, request);
}

static ncclResult_t bt_irecv_v8(void *recvComm, int n, void **data, int *sizes, int *tags,
                                void **mhandles, void **request)
{
    (void)tags;
    (void)mhandles;
    return bt_irecv_any(recvComm, n, data[0], sizes[0] < 0 ? 0 : (size_t)sizes[0], request);
}

static ncclResult_t bt_irecv_v9(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                                void **mhandles, void **request)
{
    (void)tags;
    (void)mhandles;
    return bt_irecv_any(recvComm, n, data[0], sizes[0], request);
}

static ncclResult_t bt_irecv_v10(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                                 void **mhandles, void **phandles, void **request)
{
    (void)phandles;
    return bt_irecv_v9(recvComm, n, data, sizes, tags, mhandles, request);
}

/* Host memory needs no flush. */
static ncclResult_t bt_iflush(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                              void **request)
{
    (void)recvComm;
    (void)n;
    (void)data;
    (void)sizes;
    (void)mhandles;
    *request = NULL;
    return ncclSuccess;
}

/* Move buf[*off, len) without blocking: 0 (maybe partly done), -1 broken (errno; 0 closed). */
static int bt_move(bt_comm_t *c, void *buf, size_t len, size_t *off)
{
    while (*off < len) {
        ssize_t n = c->is_send
            ? send(c->fd, (char *)buf + *off, len - *off, MSG_NOSIGNAL | MSG_DONTWAIT)
            : recv(c->fd, (char *)buf + *off, len - *off, MSG_DONTWAIT);
        if (n > 0) {
            *off += (size_t)n;
            continue;
        }
        if (n == 0) {
            errno = 0;
            return -1;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        if (errno != EINTR)
            return -1;
    }
    return 0;
}

/* One request's length word and bytes, as far as the socket allows. */
static void bt_req_move(bt_comm_t *c, bt_req_t *r)
{
    if (r->hdr_off < sizeof(r->len)) {
        if (bt_move(c, &r->len, sizeof(r->len), &r->hdr_off) != 0)
            goto broken;
        if (r->hdr_off < sizeof(r->len))
            return;
        if (!c->is_send && r->len > r->cap) {
            BT_WARN("a message of %llu bytes is longer than the receive posted "
                    "for it (%zu bytes)", (unsigned long long)r->len, r->cap);
            c->failed = ncclRemoteError;
            return;
        }
    }
    if (bt_move(c, r->buf, (size_t)r->len, &r->off) != 0)
        goto broken;
    r->done = r->off == r->len;
    return;
broken:
    BT_WARN("connection %s: %s", c->is_send ? "to the receiver" : "from the sender",
            errno != 0 ? strerror(errno) : "closed by the peer");
    c->failed = ncclRemoteError;
}

static void bt_progress(bt_comm_t *c)
{
    for (bt_req_t *r = c->head; r != NULL && c->failed == ncclSuccess; r = r->next) {
        if (!r->done)
            bt_req_move(c, r);
        if (!r->done)
            return;     /* in order: the next one waits */
    }
}

static void bt_unlink(bt_comm_t *c, bt_req_t *r)
{
    bt_req_t **pp = &c->head, *prev = NULL;
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

static ncclResult_t bt_test(void *request, int *done, int *sizes)
{
    bt_req_t *r = request;
    bt_comm_t *c = r->comm;
    bt_progress(c);
    *done = 0;
    if (r->done) {
        *done = 1;
        if (sizes != NULL)
            sizes[0] = (int)r->len;
        bt_unlink(c, r);
        return ncclSuccess;
    }
    if (c->failed != ncclSuccess) {
        bt_unlink(c, r);
        return c->failed;
    }
    return ncclSuccess;
}

/* ---- the tables ------------------------------------------------------------------------- */

BT_EXPORT ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "BraidTest",
    .init = bt_init_v8,
    .devices = bt_devices,
    .getProperties = bt_props_v8,
    .listen = bt_listen,
    .connect = bt_connect_v8,
    .accept = bt_accept,
    .regMr = bt_reg_mr,
    .regMrDmaBuf = bt_reg_mr_dmabuf,
    .deregMr = bt_dereg_mr,
    .isend = bt_isend_v8,
    .irecv = bt_irecv_v8,
    .iflush = bt_iflush,
    .test = bt_test,
    .closeSend = bt_close_comm,
    .closeRecv = bt_close_comm,
    .closeListen = bt_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
};

#if BRAIDTEST_MAX_VERSION >= 9
BT_EXPORT ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = "BraidTest",
    .init = bt_init_v9,
    .devices = bt_devices,
    .getProperties = bt_props_v9,
    .listen = bt_listen,
    .connect = bt_connect_v8,
    .accept = bt_accept,
    .regMr = bt_reg_mr,
    .regMrDmaBuf = bt_reg_mr_dmabuf,
    .deregMr = bt_dereg_mr,
    .isend = bt_isend_v9,
    .irecv = bt_irecv_v9,
    .iflush = bt_iflush,
    .test = bt_test,
    .closeSend = bt_close_comm,
    .closeRecv = bt_close_comm,
    .closeListen = bt_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};
#endif

#if BRAIDTEST_MAX_VERSION >= 10
BT_EXPORT ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = "BraidTest",
    .init = bt_init_v10,
    .devices = bt_devices,
    .getProperties = bt_props_v10,
    .listen = bt_listen,
    .connect = bt_connect_v10,
    .accept = bt_accept,
    .regMr = bt_reg_mr,
    .regMrDmaBuf = bt_reg_mr_dmabuf,
    .deregMr = bt_dereg_mr,
    .isend = bt_isend_v10,
    .irecv = bt_irecv_v10,
    .iflush = bt_iflush,
    .test = bt_test,
    .closeSend = bt_close_comm,
    .closeRecv = bt_close_comm,
    .closeListen = bt_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};
#endif
