/*
 * An external NCCL net plugin as braid's fourth network provider.
 *
 * NCCL_NET_PLUGIN names the library: a value with a '/' or ending in ".so" is opened as
 * given, any other NAME as libnccl-net-NAME.so (found through the loader's search path).
 * It is opened once per process and never closed (a plugin may keep threads of its own),
 * and its table is taken from the newest symbol braid knows: ncclNetPlugin_v10, _v9, _v8.
 *
 * The adapter maps braid's provider interface (transports/net/net.h) onto the table:
 *
 *   braid                          plugin
 *   init                           init(logger) once, devices, getProperties(0)
 *   connect(handle)                connect(our copy of handle) until it gives a comm
 *   accept                         accept (NULL: none yet, the same in both)
 *   reg_mr / dereg_mr              regMr(NCCL_PTR_HOST) / deregMr
 *   isend / irecv                  isend / irecv with n = 1, tag 0
 *   test                           test (sizes are int in every version)
 *
 * Connecting. A plugin's connect never blocks and may need the receiver to call accept
 * before it completes (a two-way exchange, as IB-style plugins do), while braid calls
 * connect for every peer before it accepts anything. So braid's connect gives back a send
 * comm that may still be connecting: every isend on it first calls the plugin's connect
 * again (and gives no request until it is done), with the handle copy kept in the comm,
 * since plugins use it as scratch between calls. Memory registered meanwhile is registered
 * with the plugin on first use. A connection not made within PLUG_CONNECT_TIMEOUT_S is an
 * error.
 *
 * Every result other than ncclSuccess is recorded once, with the plugin's name, the call
 * and what the result means; the plugin's own log lines go to braid's log (NET).
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/param.h"
#include "base/plugin.h"
#include "base/socket.h"
#include "transports/net/net.h"
#include "transports/net/plugin/nccl_net.h"

#define PLUG_CONNECT_TIMEOUT_S 30
#define PLUG_ERR_MAX 768

_Static_assert(BRAID_NET_HANDLE_MAX == NCCL_NET_HANDLE_MAXSIZE, "handles are NCCL's size");

/* The calls whose signature is the same in v8, v9 and v10. */
typedef struct plug_calls {
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*listen)(int dev, void *handle, void **listen_comm);
    ncclResult_t (*accept)(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_t **dev);
    ncclResult_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mh);
    ncclResult_t (*dereg_mr)(void *comm, void *mh);
    ncclResult_t (*test)(void *req, int *done, int *sizes);
    ncclResult_t (*close_send)(void *comm);
    ncclResult_t (*close_recv)(void *comm);
    ncclResult_t (*close_listen)(void *comm);
} plug_calls_t;

static struct {
    pthread_once_t once;
    /* set once by plug_load_once */
    braid_status_t load_st;
    char load_err[PLUG_ERR_MAX];
    int v;                          /* 8, 9 or 10 */
    const ncclNet_v8_t *v8;
    const ncclNet_v9_t *v9;
    const ncclNet_v10_t *v10;
    plug_calls_t call;
    char path[256];             /* the library as opened */
    char version[96];
    braid_net_ops_t ops;
    /* the plugin's init, once */
    pthread_mutex_t init_lock;
    int init_done;
    braid_status_t init_st;
    char init_err[PLUG_ERR_MAX];
} plug_g = { .once = PTHREAD_ONCE_INIT, .init_lock = PTHREAD_MUTEX_INITIALIZER };

/* A send or receive comm. A send comm's plugin comm is NULL while it is still connecting. */
typedef struct plug_comm {
    void *comm;
    int is_send;
    int dev;
    int64_t deadline;
    unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
} plug_comm_t;

/* A registration; made with the plugin once the comm is connected. */
typedef struct plug_mr {
    void *mh;
    int registered;
    void *data;
    size_t size;
} plug_mr_t;

/* ---- results and log lines -------------------------------------------------------------- */

static const char *plug_name(void)
{
    return plug_g.ops.name != NULL ? plug_g.ops.name : "?";
}

/* "net plugin NAME: CALL failed: MEANING (ncclResult_t N)" into buf; the braid status. */
static braid_status_t plug_fail_text(const char *call, ncclResult_t r, char *buf, size_t len)
{
    snprintf(buf, len, "net plugin %s: %s failed: %s (ncclResult_t %d)", plug_name(), call,
             braid_plugin_result_str(r), (int)r);
    return braid_plugin_status(r);
}

static braid_status_t plug_fail(const char *call, ncclResult_t r)
{
    char msg[PLUG_ERR_MAX];
    braid_status_t st = plug_fail_text(call, r, msg, sizeof(msg));
    return braid_err(st, "%s", msg);
}

/* The logger the plugin gets: its subsystem bits are NCCL's, which are braid's too. */
__attribute__((format(printf, 5, 6)))
static void plug_logger(ncclDebugLogLevel level, unsigned long flags, const char *file,
                        int line, const char *fmt, ...)
{
    char who[96];
    va_list ap;
    snprintf(who, sizeof(who), "net plugin %s", plug_name());
    va_start(ap, fmt);
    braid_plugin_vlog(level, flags, BRAID_SUB_NET, file, line, who, fmt, ap);
    va_end(ap);
}

/* v10 plugins get a profiler callback; braid has no profiler, so events go nowhere. */
static ncclResult_t plug_profiler(void **ehandle, int type, void *phandle, int64_t plugin_id,
                                  void *ext)
{
    (void)type;
    (void)phandle;
    (void)plugin_id;
    (void)ext;
    if (ehandle != NULL)
        *ehandle = NULL;
    return ncclSuccess;
}

/* ---- init, devices, properties ---------------------------------------------------------- */

/* The properties braid uses, from whichever version's struct. */
typedef struct plug_props {
    const char *name;
    int ptr_support, speed, max_comms;
    float latency;
} plug_props_t;

#define PLUG_PROPS_FROM(_p, _out)                                                          \
    do {                                                                                   \
        (_out)->name = (_p).name;                                                          \
        (_out)->ptr_support = (_p).ptrSupport;                                             \
        (_out)->speed = (_p).speed;                                                        \
        (_out)->max_comms = (_p).maxComms;                                                 \
        (_out)->latency = (_p).latency;                                                    \
    } while (0)

static ncclResult_t plug_props(int dev, plug_props_t *props_p)
{
    ncclResult_t r;
    if (plug_g.v == 8) {
        ncclNetProperties_v8_t p = { 0 };
        if ((r = plug_g.v8->getProperties(dev, &p)) == ncclSuccess)
            PLUG_PROPS_FROM(p, props_p);
    } else if (plug_g.v == 9) {
        ncclNetProperties_v9_t p = { 0 };
        if ((r = plug_g.v9->getProperties(dev, &p)) == ncclSuccess)
            PLUG_PROPS_FROM(p, props_p);
    } else {
        ncclNetProperties_v10_t p = { 0 };
        if ((r = plug_g.v10->getProperties(dev, &p)) == ncclSuccess)
            PLUG_PROPS_FROM(p, props_p);
    }
    return r;
}

/* The plugin's init, then a look at device 0 (the one braid uses): the reason in err. */
static braid_status_t plug_init_once(char *err, size_t len)
{
    ncclResult_t r;
    plug_props_t p = { 0 };
    int ndev = 0;
    if (plug_g.v == 8)
        r = plug_g.v8->init(plug_logger);
    else if (plug_g.v == 9)
        r = plug_g.v9->init(plug_logger);
    else
        r = plug_g.v10->init(plug_logger, plug_profiler);
    if (r != ncclSuccess)
        return plug_fail_text("init", r, err, len);
    if ((r = plug_g.call.devices(&ndev)) != ncclSuccess)
        return plug_fail_text("devices", r, err, len);
    if (ndev < 1) {
        snprintf(err, len, "net plugin %s found no network device", plug_name());
        return BRAID_ERR_UNSUPPORTED;
    }
    if ((r = plug_props(0, &p)) != ncclSuccess)
        return plug_fail_text("getProperties", r, err, len);
    if (!(p.ptr_support & NCCL_PTR_HOST)) {
        snprintf(err, len, "net plugin %s cannot move host memory (ptrSupport 0x%x lacks "
                 "NCCL_PTR_HOST), which braid's network transport needs", plug_name(),
                 (unsigned)p.ptr_support);
        return BRAID_ERR_UNSUPPORTED;
    }
    BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net plugin %s (ncclNetPlugin_v%d, %s): %d "
               "devices, device 0 is %s, %d Mb/s", plug_name(), plug_g.v, plug_g.path, ndev,
               p.name != NULL ? p.name : "unnamed", p.speed);
    return BRAID_OK;
}

/* Once per process; a failure is recorded again for every caller (each comm's setup). */
static braid_status_t plug_init(void)
{
    pthread_mutex_lock(&plug_g.init_lock);
    if (!plug_g.init_done) {
        plug_g.init_st = plug_init_once(plug_g.init_err, sizeof(plug_g.init_err));
        plug_g.init_done = 1;
    }
    braid_status_t st = plug_g.init_st;
    pthread_mutex_unlock(&plug_g.init_lock);
    if (st != BRAID_OK)
        return braid_err(st, "%s", plug_g.init_err);
    return BRAID_OK;
}

static const char *plug_version(void)
{
    return plug_g.version;
}

static braid_status_t plug_devices(int *ndev_p)
{
    ncclResult_t r = plug_g.call.devices(ndev_p);
    return r == ncclSuccess ? BRAID_OK : plug_fail("devices", r);
}

static braid_status_t plug_get_properties(int dev, braid_net_props_t *props_p)
{
    plug_props_t p = { 0 };
    ncclResult_t r = plug_props(dev, &p);
    if (r != ncclSuccess)
        return plug_fail("getProperties", r);
    memset(props_p, 0, sizeof(*props_p));
    snprintf(props_p->name, sizeof(props_p->name), "%s", p.name != NULL ? p.name : "");
    props_p->speed_mbps = p.speed;
    props_p->latency_us = p.latency;
    props_p->max_comms = p.max_comms;
    return BRAID_OK;
}

/* ---- connections ------------------------------------------------------------------------ */

static braid_status_t plug_listen(int dev, void *handle, void **listen_p)
{
    void *l = NULL;
    ncclResult_t r = plug_g.call.listen(dev, handle, &l);
    if (r != ncclSuccess)
        return plug_fail("listen", r);
    *listen_p = l;
    return BRAID_OK;
}

/* One more call of the plugin's connect for c, unless it is connected already. */
static braid_status_t plug_connect_step(plug_comm_t *c)
{
    void *sc = NULL;
    ncclResult_t r;
    if (c->comm != NULL)
        return BRAID_OK;
    if (plug_g.v == 8)
        r = plug_g.v8->connect(c->dev, c->handle, &sc, NULL);
    else if (plug_g.v == 9)
        r = plug_g.v9->connect(c->dev, c->handle, &sc, NULL);
    else
        r = plug_g.v10->connect(c->dev, NULL, c->handle, &sc, NULL);
    if (r != ncclSuccess)
        return plug_fail("connect", r);
    c->comm = sc;
    if (sc == NULL && braid_time_ns() > c->deadline)
        return braid_err(BRAID_ERR_REMOTE, "net plugin %s: connect did not complete within "
                         "%d s (is the receiving rank still there?)", plug_name(),
                         PLUG_CONNECT_TIMEOUT_S);
    return BRAID_OK;
}

/* A send comm, connected or still connecting (see the top of the file). */
static braid_status_t plug_connect(int dev, const void *handle, void **send_p)
{
    plug_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net plugin %s: out of memory for a connection",
                         plug_name());
    c->is_send = 1;
    c->dev = dev;
    c->deadline = braid_deadline_after_s(PLUG_CONNECT_TIMEOUT_S);
    memcpy(c->handle, handle, sizeof(c->handle));
    braid_status_t st = plug_connect_step(c);
    if (st != BRAID_OK) {
        free(c);
        return st;
    }
    *send_p = c;
    return BRAID_OK;
}

static braid_status_t plug_accept(void *listen, void **recv_p)
{
    void *rc = NULL;
    ncclResult_t r = plug_g.call.accept(listen, &rc, NULL);
    *recv_p = NULL;
    if (r != ncclSuccess)
        return plug_fail("accept", r);
    if (rc == NULL)
        return BRAID_OK;
    plug_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        (void)plug_g.call.close_recv(rc);
        return braid_err(BRAID_ERR_NOMEM, "net plugin %s: out of memory for a connection",
                         plug_name());
    }
    c->comm = rc;
    *recv_p = c;
    return BRAID_OK;
}

static void plug_close_comm(void *comm)
{
    plug_comm_t *c = comm;
    if (c == NULL)
        return;
    if (c->comm != NULL) {
        ncclResult_t r = c->is_send ? plug_g.call.close_send(c->comm)
                                    : plug_g.call.close_recv(c->comm);
        if (r != ncclSuccess)
            BRAID_WARN("net plugin %s: %s failed: %s", plug_name(),
                       c->is_send ? "closeSend" : "closeRecv", braid_plugin_result_str(r));
    }
    free(c);
}

static void plug_close_listen(void *listen)
{
    if (listen == NULL)
        return;
    ncclResult_t r = plug_g.call.close_listen(listen);
    if (r != ncclSuccess)
        BRAID_WARN("net plugin %s: closeListen failed: %s", plug_name(),
                   braid_plugin_result_str(r));
}

/* ---- memory and messages ---------------------------------------------------------------- */

static braid_status_t plug_register(plug_comm_t *c, plug_mr_t *m)
{
    ncclResult_t r = plug_g.call.reg_mr(c->comm, m->data, m->size, NCCL_PTR_HOST, &m->mh);
    if (r != ncclSuccess)
        return plug_fail("regMr", r);
    m->registered = 1;
    return BRAID_OK;
}

static braid_status_t plug_reg_mr(void *comm, void *data, size_t size, void **mh_p)
{
    plug_comm_t *c = comm;
    plug_mr_t *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net plugin %s: out of memory for a registration",
                         plug_name());
    m->data = data;
    m->size = size;
    if (c->comm != NULL) {
        braid_status_t st = plug_register(c, m);
        if (st != BRAID_OK) {
            free(m);
            return st;
        }
    }
    *mh_p = m;
    return BRAID_OK;
}

static braid_status_t plug_dereg_mr(void *comm, void *mh)
{
    plug_comm_t *c = comm;
    plug_mr_t *m = mh;
    ncclResult_t r = ncclSuccess;
    if (m == NULL)
        return BRAID_OK;
    if (m->registered)
        r = plug_g.call.dereg_mr(c->comm, m->mh);
    free(m);
    return r == ncclSuccess ? BRAID_OK : plug_fail("deregMr", r);
}

/* Before posting on c: finish connecting, and register m with the plugin once it has. */
static braid_status_t plug_ready(plug_comm_t *c, plug_mr_t *m)
{
    BRAID_CHECK(plug_connect_step(c));
    if (c->comm == NULL || m == NULL || m->registered)
        return BRAID_OK;
    return plug_register(c, m);
}

static braid_status_t plug_isend(void *send, const void *data, size_t size, void *mh,
                                 void **req_p)
{
    plug_comm_t *c = send;
    plug_mr_t *m = mh;
    void *req = NULL, *pmh;
    ncclResult_t r;
    *req_p = NULL;
    BRAID_CHECK(plug_ready(c, m));
    if (c->comm == NULL)
        return BRAID_OK;    /* still connecting: try again */
    pmh = m != NULL ? m->mh : NULL;
    if (plug_g.v == 8) {
        if (size > INT_MAX)
            return braid_err(BRAID_ERR_INVALID, "net plugin %s: a message of %zu bytes is "
                             "more than ncclNetPlugin_v8 can send (INT_MAX bytes); a v9 or "
                             "newer plugin can", plug_name(), size);
        r = plug_g.v8->isend(c->comm, (void *)data, (int)size, 0, pmh, &req);
    } else if (plug_g.v == 9) {
        r = plug_g.v9->isend(c->comm, (void *)data, size, 0, pmh, &req);
    } else {
        r = plug_g.v10->isend(c->comm, (void *)data, size, 0, pmh, NULL, &req);
    }
    if (r != ncclSuccess)
        return plug_fail("isend", r);
    *req_p = req;
    return BRAID_OK;
}

/* One receive (n = 1, tag 0). A v8 plugin takes an int size: a larger buffer is offered as
 * INT_MAX bytes, since no v8 sender can send more. */
static braid_status_t plug_irecv(void *recv, void *data, size_t size, void *mh, void **req_p)
{
    plug_comm_t *c = recv;
    plug_mr_t *m = mh;
    void *req = NULL, *buf = data, *ph = NULL, *pmh;
    int tag = 0;
    ncclResult_t r;
    *req_p = NULL;
    BRAID_CHECK(plug_ready(c, m));
    pmh = m != NULL ? m->mh : NULL;
    if (plug_g.v == 8) {
        int isize = size > INT_MAX ? INT_MAX : (int)size;
        r = plug_g.v8->irecv(c->comm, 1, &buf, &isize, &tag, &pmh, &req);
    } else if (plug_g.v == 9) {
        r = plug_g.v9->irecv(c->comm, 1, &buf, &size, &tag, &pmh, &req);
    } else {
        r = plug_g.v10->irecv(c->comm, 1, &buf, &size, &tag, &pmh, &ph, &req);
    }
    if (r != ncclSuccess)
        return plug_fail("irecv", r);
    *req_p = req;
    return BRAID_OK;
}

/* test reports sizes as int in every version: enough for braid's messages (one slot each,
 * far below 2 GiB). */
static braid_status_t plug_test(void *req, int *done, size_t *size_p)
{
    int size = 0;
    *done = 0;
    ncclResult_t r = plug_g.call.test(req, done, &size);
    if (r != ncclSuccess) {
        *done = 0;
        return plug_fail("test", r);
    }
    if (*done && size_p != NULL)
        *size_p = size > 0 ? (size_t)size : 0;
    return BRAID_OK;
}

static const braid_net_ops_t plug_ops = {
    .name = NULL,   /* the plugin's, set at load */
    .init = plug_init,
    .version = plug_version,
    .devices = plug_devices,
    .get_properties = plug_get_properties,
    .listen = plug_listen,
    .connect = plug_connect,
    .accept = plug_accept,
    .reg_mr = plug_reg_mr,
    .dereg_mr = plug_dereg_mr,
    .isend = plug_isend,
    .irecv = plug_irecv,
    .test = plug_test,
    .close_send = plug_close_comm,
    .close_recv = plug_close_comm,
    .close_listen = plug_close_listen,
};

/* ---- loading ---------------------------------------------------------------------------- */

#define PLUG_CALLS_OF(_t)                                                                  \
    ((plug_calls_t){ .devices = (_t)->devices, .listen = (_t)->listen,                     \
                     .accept = (_t)->accept, .reg_mr = (_t)->regMr,                        \
                     .dereg_mr = (_t)->deregMr, .test = (_t)->test,                        \
                     .close_send = (_t)->closeSend, .close_recv = (_t)->closeRecv,         \
                     .close_listen = (_t)->closeListen })

/* Take the newest table the library exports; 0 when it has none braid accepts. */
static int plug_find_table(void *dl)
{
    if ((plug_g.v10 = dlsym(dl, "ncclNetPlugin_v10")) != NULL) {
        plug_g.call = PLUG_CALLS_OF(plug_g.v10);
        plug_g.ops.name = plug_g.v10->name;
        return plug_g.v = 10;
    }
    if ((plug_g.v9 = dlsym(dl, "ncclNetPlugin_v9")) != NULL) {
        plug_g.call = PLUG_CALLS_OF(plug_g.v9);
        plug_g.ops.name = plug_g.v9->name;
        return plug_g.v = 9;
    }
    if ((plug_g.v8 = dlsym(dl, "ncclNetPlugin_v8")) != NULL) {
        plug_g.call = PLUG_CALLS_OF(plug_g.v8);
        plug_g.ops.name = plug_g.v8->name;
        return plug_g.v = 8;
    }
    return 0;
}

/* The first of the functions braid calls that the table lacks, or NULL. */
#define PLUG_MISSING_OF(_t)                                                                \
    (!(_t)->init ? "init" : !(_t)->getProperties ? "getProperties"                         \
     : !(_t)->connect ? "connect" : !(_t)->isend ? "isend" : !(_t)->irecv ? "irecv" : NULL)

static const char *plug_missing_call(void)
{
    const plug_calls_t *k = &plug_g.call;
    const char *m = plug_g.v == 8 ? PLUG_MISSING_OF(plug_g.v8)
                    : plug_g.v == 9 ? PLUG_MISSING_OF(plug_g.v9) : PLUG_MISSING_OF(plug_g.v10);
    if (m != NULL)
        return m;
    if (!k->devices || !k->listen || !k->accept || !k->reg_mr || !k->dereg_mr || !k->test)
        return "one of devices, listen, accept, regMr, deregMr and test";
    if (!k->close_send || !k->close_recv || !k->close_listen)
        return "one of closeSend, closeRecv and closeListen";
    return NULL;
}

/* Open the library and take its table; on failure, the reason in plug_g.load_err. */
static braid_status_t plug_open(const char *value)
{
    char *err = plug_g.load_err;
    size_t len = sizeof(plug_g.load_err);
    if (braid_plugin_path(value, "net", plug_g.path, sizeof(plug_g.path)) != 0) {
        snprintf(err, len, "net: NCCL_NET_PLUGIN=%.64s... is longer than %zu characters",
                 value, sizeof(plug_g.path) - 1);
        return BRAID_ERR_INVALID;
    }
    void *dl = dlopen(plug_g.path, RTLD_NOW | RTLD_LOCAL);
    if (dl == NULL) {
        const char *why = dlerror();
        snprintf(err, len, "net: cannot load the net plugin NCCL_NET_PLUGIN=%s (%s): %s%s",
                 value, plug_g.path, why != NULL ? why : "unknown dlopen error",
                 strchr(plug_g.path, '/') ? "" : " (give its path, or put its directory "
                 "in LD_LIBRARY_PATH)");
        return BRAID_ERR_INVALID;
    }
    if (plug_find_table(dl) == 0) {
        int old = braid_plugin_old_version(dl, "ncclNetPlugin_v", 7);
        char had[64] = "";
        if (old != 0)
            snprintf(had, sizeof(had), "; it has ncclNetPlugin_v%d", old);
        snprintf(err, len, "net: the net plugin %s (NCCL_NET_PLUGIN=%s) exports none of "
                 "ncclNetPlugin_v10, ncclNetPlugin_v9, ncclNetPlugin_v8%s: braid accepts "
                 "v8 to v10, v7 and older are not supported", plug_g.path, value, had);
        dlclose(dl);
        return BRAID_ERR_INVALID;
    }
    const char *missing = plug_g.ops.name == NULL ? "name" : plug_missing_call();
    if (missing != NULL) {
        snprintf(err, len, "net: the ncclNetPlugin_v%d table of the net plugin %s lacks %s",
                 plug_g.v, plug_g.path, missing);
        plug_g.ops.name = NULL;
        dlclose(dl);
        return BRAID_ERR_INVALID;
    }
    return BRAID_OK;
}

static void plug_load_once(void)
{
    const char *value = braid_param_str(BRAID_P_NET_PLUGIN);
    plug_g.ops = plug_ops;
    plug_g.load_st = plug_open(value);
    if (plug_g.load_st != BRAID_OK)
        return;
    snprintf(plug_g.version, sizeof(plug_g.version), "%s plugin v%d", plug_g.ops.name,
             plug_g.v);
    BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net: loaded the net plugin %s "
               "(ncclNetPlugin_v%d) from %s", plug_g.ops.name, plug_g.v, plug_g.path);
}

int braid_net_plugin_named(void)
{
    return braid_plugin_named(braid_param_str(BRAID_P_NET_PLUGIN));
}

const braid_net_ops_t *braid_net_plugin_load(void)
{
    if (!braid_net_plugin_named())
        return NULL;
    pthread_once(&plug_g.once, plug_load_once);
    if (plug_g.load_st != BRAID_OK) {
        braid_err(plug_g.load_st, "%s", plug_g.load_err);
        return NULL;
    }
    return &plug_g.ops;
}
