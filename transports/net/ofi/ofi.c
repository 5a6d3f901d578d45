/*
 * libfabric ("OFI") network provider: tagged messages on one reliable-datagram endpoint per
 * process, shared by every connection of the process.
 *
 *   receiver                                         sender
 *   listen: id L; handle = {endpoint name, L}  --->  connect: fi_av_insert(name), send CONNECT
 *                                                    {L, its comm id S, its own name}
 *   any progress: CONNECT for L arrives: insert
 *   the sender, give the connection an id C unique
 *   in this process, queue it on L, answer
 *   ACCEPT {S, C}                              --->  any progress: comm S learns C (isend
 *   accept: pop C -> recv comm                       returns "try again" until then)
 *
 * Data: tag = C << seq_bits | n, where n counts the messages of the connection on both
 * sides, and receives are posted for the exact tag: message n matches receive n whatever
 * order the provider delivers in. The receiver, not the sender, picks C because tcp;ofi_rxm
 * has no directed receive: a tag must be unique among all the senders of an endpoint, and
 * only the receiver can promise that.
 * Control: tag = the top tag bit alone; OFI_CTRL_NRECV receives stay posted process-wide
 * and dispatch by the ids inside the message.
 *
 * Progress is manual: every call that waits on the network (accept, isend before ACCEPT, a
 * post that got FI_EAGAIN, test) reads the completion queue, and a completion may belong to
 * any comm of the process. One mutex guards all of it (FI_THREAD_DOMAIN).
 */
#include "transports/net/net.h"

#ifdef HAVE_OFI

#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>   /* fi_param_get_str: libfabric's own FI_PROVIDER */

#include "base/log.h"
#include "base/socket.h"

#define OFI_API_VERSION FI_VERSION(1, 11)
#define OFI_DEFAULT_PROV "tcp;ofi_rxm"   /* plain Ethernet, when no real fabric is found */
#define OFI_NAME_MAX 112                 /* endpoint name bytes that fit in a listen handle */
#define OFI_HANDLE_MAGIC 0x4f464948u     /* "OFIH" */
#define OFI_CTRL_MAGIC 0x4f464943u       /* "OFIC" */
#define OFI_CTRL_NRECV 16
#define OFI_CQ_BATCH 16
#define OFI_CQ_ROUNDS 8                  /* completions read per progress: at most 128 */
#define OFI_DRAIN_NS (100 * 1000000ll)   /* how long a close waits for cancelled requests */
#define OFI_ERR_MAX 256

typedef enum { OFI_OP_SEND, OFI_OP_RECV, OFI_OP_CTRL_SEND, OFI_OP_CTRL_RECV } ofi_op_kind_t;

/* What libfabric hands back as op_context: its scratch space first (FI_CONTEXT and
 * FI_CONTEXT2 modes), then what kind of operation completed. */
typedef struct ofi_op {
    struct fi_context2 ctx;
    ofi_op_kind_t kind;
} ofi_op_t;

typedef enum { OFI_CTRL_CONNECT = 1, OFI_CTRL_ACCEPT, OFI_CTRL_REFUSE } ofi_ctrl_type_t;

typedef struct ofi_ctrl_msg {
    uint32_t magic, type;
    uint64_t listen_id;          /* CONNECT: the listen comm asked for */
    uint64_t send_id;            /* the sender's comm, echoed in the answer */
    uint64_t conn_id;            /* ACCEPT: the connection id the receiver chose */
    uint32_t namelen, pad;
    uint8_t name[OFI_NAME_MAX];  /* CONNECT: the sender's endpoint, to answer it */
} ofi_ctrl_msg_t;

/* A control receive slot, or a control send (malloc'd, freed at its completion). */
typedef struct ofi_ctrl {
    ofi_op_t op;
    struct ofi_ctrl *next;       /* sends: in ofi_g.ctrl_sends */
    struct fid_mr *mr;           /* sends, FI_MR_LOCAL only */
    fi_addr_t dest;
    int posted;                  /* 0: waiting for the next progress to post it */
    ofi_ctrl_msg_t msg;
} ofi_ctrl_t;

typedef struct ofi_handle {
    uint32_t magic, namelen;
    uint64_t listen_id;
    uint8_t name[OFI_NAME_MAX];
} ofi_handle_t;
_Static_assert(sizeof(ofi_handle_t) <= BRAID_NET_HANDLE_MAX, "OFI handle too large");

typedef struct ofi_mr {
    struct fid_mr *mr;
    void *desc;
} ofi_mr_t;

struct ofi_conn;

typedef struct ofi_req {
    ofi_op_t op;
    struct ofi_conn *conn;       /* NULL once a close orphaned it (still in libfabric) */
    struct ofi_req *prev, *next; /* in conn->reqs, or ofi_g.orphans */
    uint64_t conn_id;
    size_t size, len;
    int done;
    braid_status_t status;
    char err[OFI_ERR_MAX];
} ofi_req_t;

/* A send or receive comm: one direction of one connection. */
typedef struct ofi_conn {
    int is_send;
    uint64_t send_id;            /* sender: the id ACCEPT/REFUSE answers name */
    uint64_t conn_id;            /* the data tag's connection id; sender: 0 until ACCEPT */
    fi_addr_t peer;
    uint64_t seq;                /* messages posted so far */
    braid_status_t failed;       /* sender: the request failed or was refused */
    char err[OFI_ERR_MAX];
    ofi_req_t *reqs;
    struct ofi_conn *next;       /* senders: in ofi_g.sends */
} ofi_conn_t;

typedef struct ofi_pending {
    uint64_t conn_id;
    fi_addr_t peer;
    struct ofi_pending *next;
} ofi_pending_t;

typedef struct ofi_listen {
    uint64_t id;
    ofi_pending_t *head, **tail; /* arrived, not accepted yet */
    struct ofi_listen *next;
} ofi_listen_t;

typedef struct ofi_peer {
    uint8_t name[OFI_NAME_MAX];
    size_t namelen;
    fi_addr_t addr;
} ofi_peer_t;

/* The process's endpoint and everything on it; static so that it stays reachable. */
static struct {
    pthread_mutex_t lock;
    int ready;
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    uint8_t name[OFI_NAME_MAX];
    size_t namelen;
    char version[128];
    char ifname[IF_NAMESIZE];
    int seq_bits;
    uint64_t seq_mask, id_mask, ctrl_tag;
    uint64_t mr_key;             /* next requested key, where the provider takes ours */
    ofi_ctrl_t *ctrl_recv;       /* OFI_CTRL_NRECV slots, registered as one region */
    struct fid_mr *ctrl_mr;
    int ctrl_warned;
    ofi_ctrl_t *ctrl_sends;
    ofi_listen_t *listens;
    ofi_conn_t *sends;
    ofi_req_t *orphans;
    ofi_peer_t *peers;
    size_t npeers, peers_cap;
    uint64_t next_listen, next_send, next_conn;
} ofi_g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static ofi_mr_t ofi_mr_none;     /* the handle when the provider needs no registration */

/* ---- choosing the provider ---- */

static int ofi_prov_has(const char *prov, const char *const *names)
{
    char buf[256], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", prov ? prov : "");
    for (char *part = strtok_r(buf, ";", &save); part; part = strtok_r(NULL, ";", &save))
        for (int i = 0; names[i] != NULL; i++)
            if (strcmp(part, names[i]) == 0)
                return 1;
    return 0;
}

/* A real fabric is anything not built on sockets or shared memory. */
static int ofi_prov_is_real(const char *prov)
{
    static const char *const eth[] = { "tcp", "udp", "sockets", "shm", "sm2", "net",
                                       "ofi_rxd", "rxd", NULL };
    return !ofi_prov_has(prov, eth);
}

static int ofi_prov_is_shm(const char *prov)
{
    static const char *const shm[] = { "shm", "sm2", NULL };
    return ofi_prov_has(prov, shm);
}

static const struct sockaddr *ofi_info_ip(const struct fi_info *fi)
{
    const struct sockaddr *sa = fi->src_addr;
    if (sa == NULL || (fi->addr_format != FI_SOCKADDR && fi->addr_format != FI_SOCKADDR_IN &&
                       fi->addr_format != FI_SOCKADDR_IN6))
        return NULL;
    return sa->sa_family == AF_INET || sa->sa_family == AF_INET6 ? sa : NULL;
}

static int ofi_info_on(const struct fi_info *fi, const braid_sockaddr_t *want)
{
    const struct sockaddr *sa = ofi_info_ip(fi);
    if (sa == NULL || sa->sa_family != want->sa.sa_family)
        return 0;
    if (sa->sa_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)sa)->sin_addr, &want->in4.sin_addr,
                      sizeof(want->in4.sin_addr)) == 0;
    return memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, &want->in6.sin6_addr,
                  sizeof(want->in6.sin6_addr)) == 0;
}

/*
 * The info on the chosen interface; failing that, the first real fabric (its devices are
 * not the sockets' interface: NCCL_SOCKET_IFNAME does not choose IB ports either) or the
 * first one without an IP address (shm asked for by FI_PROVIDER).
 */
static struct fi_info *ofi_choose(struct fi_info *list, int real_only, int allow_shm,
                                  const braid_sockaddr_t *want)
{
    struct fi_info *fallback = NULL;
    for (struct fi_info *fi = list; fi != NULL; fi = fi->next) {
        const char *prov = fi->fabric_attr->prov_name;
        int real = ofi_prov_is_real(prov);
        if ((real_only && !real) || (!allow_shm && ofi_prov_is_shm(prov)))
            continue;
        if (ofi_info_on(fi, want))
            return fi;
        if (fallback == NULL && (real || ofi_info_ip(fi) == NULL))
            fallback = fi;
    }
    return fallback;
}

static int ofi_getinfo(const char *prov, struct fi_info **list_p)
{
    struct fi_info *hints = fi_allocinfo();
    int rc;
    *list_p = NULL;
    if (hints == NULL)
        return -FI_ENOMEM;
    hints->caps = FI_TAGGED;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                                  FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
    hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    if (prov != NULL && (hints->fabric_attr->prov_name = strdup(prov)) == NULL) {
        fi_freeinfo(hints);
        return -FI_ENOMEM;
    }
    rc = fi_getinfo(OFI_API_VERSION, NULL, NULL, 0, hints, list_p);
    fi_freeinfo(hints);
    return rc;
}

/*
 * FI_PROVIDER (which libfabric applies itself) set: what it allows, real fabrics first.
 * Unset: a real fabric, else tcp;ofi_rxm. shm only when FI_PROVIDER names it.
 */
static braid_status_t ofi_pick_info(const braid_sockaddr_t *want, const char *ifname,
                                    struct fi_info **info_p)
{
    struct fi_info *list = NULL, *tcp = NULL, *pick;
    char *env = NULL, addr[BRAID_SOCKADDR_STRLEN];
    int rc = ofi_getinfo(NULL, &list), rc_tcp = 0;
    int has_env = fi_param_get_str(NULL, "provider", &env) == 0 && env != NULL && env[0];
    int allow_shm = has_env && env[0] != '^' && strstr(env, "shm") != NULL;
    pick = ofi_choose(list, 1, allow_shm, want);
    if (pick == NULL && has_env)
        pick = ofi_choose(list, 0, allow_shm, want);
    if (pick == NULL && !has_env) {
        rc_tcp = ofi_getinfo(OFI_DEFAULT_PROV, &tcp);
        pick = ofi_choose(tcp, 0, 0, want);
    }
    *info_p = pick ? fi_dupinfo(pick) : NULL;
    fi_freeinfo(list);
    fi_freeinfo(tcp);
    if (pick != NULL && *info_p == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net/ofi: fi_dupinfo failed");
    if (pick != NULL)
        return BRAID_OK;
    rc = rc_tcp ? rc_tcp : rc;
    return braid_err(BRAID_ERR_UNSUPPORTED,
                     "net/ofi: no libfabric provider offers tagged FI_EP_RDM endpoints on "
                     "interface %s (%s) with %s%s: %s", ifname,
                     braid_sockaddr_str(want, addr, sizeof(addr)),
                     has_env ? "FI_PROVIDER=" : "a real fabric or ",
                     has_env ? env : OFI_DEFAULT_PROV,
                     rc ? fi_strerror(-rc) : "none has an address on that interface");
}

/* ---- the endpoint ---- */

static braid_status_t ofi_call(int rc, const char *what)
{
    if (rc == 0)
        return BRAID_OK;
    return braid_err(BRAID_ERR_UNSUPPORTED, "net/ofi: %s failed with %s on %s: %s", what,
                     ofi_g.info->fabric_attr->prov_name, ofi_g.info->domain_attr->name,
                     fi_strerror(rc < 0 ? -rc : rc));
}

static int ofi_mr_local(void)
{
    return (ofi_g.info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
}

static braid_status_t ofi_mr_register(void *buf, size_t len, struct fid_mr **mr_p)
{
    struct fid_mr *mr = NULL;
    int rc = fi_mr_reg(ofi_g.domain, buf, len, FI_SEND | FI_RECV, 0, ofi_g.mr_key++, 0, &mr,
                       NULL);
    if (rc == 0 && (ofi_g.info->domain_attr->mr_mode & FI_MR_ENDPOINT)) {
        rc = fi_mr_bind(mr, &ofi_g.ep->fid, 0);
        if (rc == 0)
            rc = fi_mr_enable(mr);
        if (rc != 0)
            fi_close(&mr->fid);
    }
    if (rc != 0)
        return braid_err(BRAID_ERR_SYSTEM, "net/ofi: fi_mr_reg of %zu bytes at %p: %s", len,
                         buf, fi_strerror(-rc));
    *mr_p = mr;
    return BRAID_OK;
}

/* Tag layout from the provider's tag width: control bit, connection id, sequence. */
static braid_status_t ofi_tags_setup(void)
{
    uint64_t fmt = ofi_g.info->ep_attr->mem_tag_format;
    int bits = fmt == 0 ? 64 : 64 - __builtin_clzll(fmt);
    if (bits < 33)
        return braid_err(BRAID_ERR_UNSUPPORTED, "net/ofi: %s has %d tag bits; 33 are needed",
                         ofi_g.info->fabric_attr->prov_name, bits);
    ofi_g.seq_bits = (bits - 1) / 2;
    ofi_g.seq_mask = (1ull << ofi_g.seq_bits) - 1;
    ofi_g.id_mask = (1ull << (bits - 1 - ofi_g.seq_bits)) - 1;
    ofi_g.ctrl_tag = 1ull << (bits - 1);
    return BRAID_OK;
}

static braid_status_t ofi_open(void)
{
    struct fi_info *info = ofi_g.info;
    struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
    struct fi_av_attr av_attr = { .type = info->domain_attr->av_type };
    size_t len = sizeof(ofi_g.name);
    int rc;
    if (av_attr.type == FI_AV_UNSPEC)
        av_attr.type = FI_AV_TABLE;
    BRAID_CHECK(ofi_call(fi_fabric(info->fabric_attr, &ofi_g.fabric, NULL), "fi_fabric"));
    BRAID_CHECK(ofi_call(fi_domain(ofi_g.fabric, info, &ofi_g.domain, NULL), "fi_domain"));
    BRAID_CHECK(ofi_call(fi_av_open(ofi_g.domain, &av_attr, &ofi_g.av, NULL), "fi_av_open"));
    BRAID_CHECK(ofi_call(fi_cq_open(ofi_g.domain, &cq_attr, &ofi_g.cq, NULL), "fi_cq_open"));
    BRAID_CHECK(ofi_call(fi_endpoint(ofi_g.domain, info, &ofi_g.ep, NULL), "fi_endpoint"));
    BRAID_CHECK(ofi_call(fi_ep_bind(ofi_g.ep, &ofi_g.av->fid, 0), "fi_ep_bind(av)"));
    BRAID_CHECK(ofi_call(fi_ep_bind(ofi_g.ep, &ofi_g.cq->fid, FI_TRANSMIT | FI_RECV),
                         "fi_ep_bind(cq)"));
    BRAID_CHECK(ofi_call(fi_enable(ofi_g.ep), "fi_enable"));
    rc = fi_getname(&ofi_g.ep->fid, ofi_g.name, &len);
    if (rc == -FI_ETOOSMALL)
        return braid_err(BRAID_ERR_UNSUPPORTED, "net/ofi: the %s endpoint name (%zu bytes) "
                         "does not fit a listen handle (%d bytes)", info->fabric_attr->prov_name,
                         len, OFI_NAME_MAX);
    BRAID_CHECK(ofi_call(rc, "fi_getname"));
    ofi_g.namelen = len;
    return ofi_tags_setup();
}

static void ofi_teardown(void)
{
    if (ofi_g.ctrl_mr != NULL)
        fi_close(&ofi_g.ctrl_mr->fid);
    if (ofi_g.ep != NULL)
        fi_close(&ofi_g.ep->fid);
    if (ofi_g.cq != NULL)
        fi_close(&ofi_g.cq->fid);
    if (ofi_g.av != NULL)
        fi_close(&ofi_g.av->fid);
    if (ofi_g.domain != NULL)
        fi_close(&ofi_g.domain->fid);
    if (ofi_g.fabric != NULL)
        fi_close(&ofi_g.fabric->fid);
    free(ofi_g.ctrl_recv);
    fi_freeinfo(ofi_g.info);
    ofi_g.ctrl_mr = NULL, ofi_g.ep = NULL, ofi_g.cq = NULL, ofi_g.av = NULL;
    ofi_g.domain = NULL, ofi_g.fabric = NULL, ofi_g.ctrl_recv = NULL, ofi_g.info = NULL;
}

/* ---- control messages ---- */

static void *ofi_ctrl_recv_desc(void)
{
    return ofi_g.ctrl_mr ? fi_mr_desc(ofi_g.ctrl_mr) : NULL;
}

static ssize_t ofi_ctrl_post_recv(ofi_ctrl_t *slot)
{
    ssize_t rc = fi_trecv(ofi_g.ep, &slot->msg, sizeof(slot->msg), ofi_ctrl_recv_desc(),
                          FI_ADDR_UNSPEC, ofi_g.ctrl_tag, 0, &slot->op);
    slot->posted = rc == 0;
    return rc;
}

static braid_status_t ofi_ctrl_start(void)
{
    size_t bytes = OFI_CTRL_NRECV * sizeof(ofi_ctrl_t);
    ofi_g.ctrl_recv = calloc(OFI_CTRL_NRECV, sizeof(ofi_ctrl_t));
    if (ofi_g.ctrl_recv == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net/ofi: no memory for control receives");
    if (ofi_mr_local())
        BRAID_CHECK(ofi_mr_register(ofi_g.ctrl_recv, bytes, &ofi_g.ctrl_mr));
    for (int i = 0; i < OFI_CTRL_NRECV; i++) {
        ssize_t rc;
        ofi_g.ctrl_recv[i].op.kind = OFI_OP_CTRL_RECV;
        rc = ofi_ctrl_post_recv(&ofi_g.ctrl_recv[i]);
        if (rc != 0 && rc != -FI_EAGAIN)
            return ofi_call((int)rc, "fi_trecv(control)");
    }
    return BRAID_OK;
}

static ssize_t ofi_ctrl_post_send(ofi_ctrl_t *cs)
{
    ssize_t rc = fi_tsend(ofi_g.ep, &cs->msg, sizeof(cs->msg),
                          cs->mr ? fi_mr_desc(cs->mr) : NULL, cs->dest, ofi_g.ctrl_tag, &cs->op);
    cs->posted = rc == 0;
    return rc == -FI_EAGAIN ? 0 : rc;   /* not posted yet: the next progress tries again */
}

static void ofi_ctrl_free(ofi_ctrl_t *cs)
{
    for (ofi_ctrl_t **pp = &ofi_g.ctrl_sends; *pp != NULL; pp = &(*pp)->next)
        if (*pp == cs) {
            *pp = cs->next;
            break;
        }
    if (cs->mr != NULL)
        fi_close(&cs->mr->fid);
    free(cs);
}

/* Queue a control message to `dest`; 0 or a negative libfabric error. */
static ssize_t ofi_ctrl_send(fi_addr_t dest, const ofi_ctrl_msg_t *msg)
{
    ofi_ctrl_t *cs = calloc(1, sizeof(*cs));
    ssize_t rc;
    if (cs == NULL)
        return -FI_ENOMEM;
    cs->op.kind = OFI_OP_CTRL_SEND;
    cs->dest = dest;
    cs->msg = *msg;
    if (ofi_mr_local() && ofi_mr_register(&cs->msg, sizeof(cs->msg), &cs->mr) < 0) {
        free(cs);
        return -FI_ENOMEM;
    }
    cs->next = ofi_g.ctrl_sends;
    ofi_g.ctrl_sends = cs;
    rc = ofi_ctrl_post_send(cs);
    if (rc != 0)
        ofi_ctrl_free(cs);
    return rc;
}

static ofi_conn_t *ofi_send_find(uint64_t send_id)
{
    for (ofi_conn_t *c = ofi_g.sends; c != NULL; c = c->next)
        if (c->send_id == send_id)
            return c;
    return NULL;
}

/* A control send completed (err == NULL) or failed: a failed CONNECT fails its comm. */
static void ofi_ctrl_send_done(ofi_ctrl_t *cs, const char *err)
{
    ofi_conn_t *c;
    if (err != NULL && cs->msg.type == OFI_CTRL_CONNECT &&
        (c = ofi_send_find(cs->msg.send_id)) != NULL) {
        c->failed = BRAID_ERR_REMOTE;
        snprintf(c->err, sizeof(c->err), "net/ofi: the connection request to the listener "
                 "failed: %s", err);
    } else if (err != NULL) {
        BRAID_INFO(BRAID_SUB_NET, "net/ofi: answering a connection request failed: %s", err);
    }
    ofi_ctrl_free(cs);
}

/* Find a peer's address, inserting it in the AV the first time: 0 or a libfabric error. */
static int ofi_peer_addr(const uint8_t *name, size_t len, fi_addr_t *addr_p)
{
    ofi_peer_t *p;
    int rc;
    for (size_t i = 0; i < ofi_g.npeers; i++)
        if (ofi_g.peers[i].namelen == len && memcmp(ofi_g.peers[i].name, name, len) == 0) {
            *addr_p = ofi_g.peers[i].addr;
            return 0;
        }
    if (ofi_g.npeers == ofi_g.peers_cap) {
        size_t cap = ofi_g.peers_cap ? 2 * ofi_g.peers_cap : 16;
        p = realloc(ofi_g.peers, cap * sizeof(*p));
        if (p == NULL)
            return -FI_ENOMEM;
        ofi_g.peers = p, ofi_g.peers_cap = cap;
    }
    p = &ofi_g.peers[ofi_g.npeers];
    memset(p, 0, sizeof(*p));
    memcpy(p->name, name, len);
    rc = fi_av_insert(ofi_g.av, p->name, 1, &p->addr, 0, NULL);
    if (rc != 1)
        return rc < 0 ? rc : -FI_EADDRNOTAVAIL;
    p->namelen = len;
    ofi_g.npeers++;
    *addr_p = p->addr;
    return 0;
}

static ofi_listen_t *ofi_listen_find(uint64_t id)
{
    for (ofi_listen_t *l = ofi_g.listens; l != NULL; l = l->next)
        if (l->id == id)
            return l;
    return NULL;
}

/* A CONNECT: give the connection its id, queue it for accept, answer at once (the sender
 * may post sends before the receiver accepts). A closed listener refuses. */
static void ofi_ctrl_connect(const ofi_ctrl_msg_t *m)
{
    ofi_ctrl_msg_t ans = { .magic = OFI_CTRL_MAGIC, .type = OFI_CTRL_REFUSE,
                           .send_id = m->send_id };
    ofi_listen_t *l = ofi_listen_find(m->listen_id);
    ofi_pending_t *p = NULL;
    fi_addr_t peer;
    int rc = m->namelen <= OFI_NAME_MAX ? ofi_peer_addr(m->name, m->namelen, &peer)
                                        : -FI_EINVAL;
    if (rc != 0) {
        BRAID_WARN("net/ofi: ignoring a connection request: its sender's address: %s",
                   fi_strerror(-rc));
        return;
    }
    if (l != NULL && (p = calloc(1, sizeof(*p))) != NULL) {
        do
            p->conn_id = ++ofi_g.next_conn & ofi_g.id_mask;
        while (p->conn_id == 0);
        p->peer = peer;
        *l->tail = p;
        l->tail = &p->next;
        ans.type = OFI_CTRL_ACCEPT;
        ans.conn_id = p->conn_id;
    }
    rc = (int)ofi_ctrl_send(peer, &ans);
    if (rc != 0)
        BRAID_WARN("net/ofi: answering a connection request failed: %s", fi_strerror(-rc));
}

static void ofi_ctrl_answer(const ofi_ctrl_msg_t *m)
{
    ofi_conn_t *c = ofi_send_find(m->send_id);
    if (c == NULL)
        return;   /* closed meanwhile */
    if (m->type == OFI_CTRL_ACCEPT && (m->conn_id & ofi_g.id_mask) != 0) {
        c->conn_id = m->conn_id & ofi_g.id_mask;
        return;
    }
    c->failed = BRAID_ERR_REMOTE;
    snprintf(c->err, sizeof(c->err), "net/ofi: the listener refused the connection "
             "(it was closed)");
}

static void ofi_ctrl_recv_done(ofi_ctrl_t *slot, size_t len)
{
    const ofi_ctrl_msg_t *m = &slot->msg;
    slot->posted = 0;   /* reposted at the end of this progress */
    if (len < offsetof(ofi_ctrl_msg_t, name) || m->magic != OFI_CTRL_MAGIC)
        BRAID_WARN("net/ofi: ignoring a malformed control message of %zu bytes", len);
    else if (m->type == OFI_CTRL_CONNECT)
        ofi_ctrl_connect(m);
    else if (m->type == OFI_CTRL_ACCEPT || m->type == OFI_CTRL_REFUSE)
        ofi_ctrl_answer(m);
    else
        BRAID_WARN("net/ofi: ignoring a control message of unknown type %u", m->type);
}

/* Post what FI_EAGAIN held back: control receives and control sends. */
static void ofi_ctrl_retry(void)
{
    ofi_ctrl_t *cs, *next;
    char err[OFI_ERR_MAX];
    for (int i = 0; i < OFI_CTRL_NRECV; i++) {
        ssize_t rc = ofi_g.ctrl_recv[i].posted ? 0 : ofi_ctrl_post_recv(&ofi_g.ctrl_recv[i]);
        if (rc != 0 && rc != -FI_EAGAIN && !ofi_g.ctrl_warned++)
            BRAID_WARN("net/ofi: posting a control receive: %s", fi_strerror((int)-rc));
    }
    for (cs = ofi_g.ctrl_sends; cs != NULL; cs = next) {
        ssize_t rc = 0;
        next = cs->next;
        if (!cs->posted && (rc = ofi_ctrl_post_send(cs)) != 0) {
            snprintf(err, sizeof(err), "fi_tsend: %s", fi_strerror((int)-rc));
            ofi_ctrl_send_done(cs, err);
        }
    }
}

/* ---- requests and progress ---- */

static void ofi_list_add(ofi_req_t **head, ofi_req_t *r)
{
    r->prev = NULL;
    r->next = *head;
    if (*head != NULL)
        (*head)->prev = r;
    *head = r;
}

static void ofi_list_del(ofi_req_t **head, ofi_req_t *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        *head = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static void ofi_req_finish(ofi_req_t *req, size_t len)
{
    req->done = 1;
    req->len = req->op.kind == OFI_OP_SEND ? req->size : len;
    if (req->conn == NULL) {   /* orphaned by a close: nobody will test it */
        ofi_list_del(&ofi_g.orphans, req);
        free(req);
    }
}

/*
 * The size of a message that did not fit; 0 when no field says. rxm's rendezvous gives
 * olen; tcp's eager path gives only the remote CQ data, which our sends set to the size
 * (without raising FI_REMOTE_CQ_DATA in the flags: hence the range check instead).
 */
static size_t ofi_trunc_size(const ofi_req_t *req, const struct fi_cq_err_entry *e)
{
    size_t size = e->olen ? req->size + e->olen : 0;
    if (e->len > req->size && e->len > size)
        size = e->len;
    if (size == 0 && ((e->flags & FI_REMOTE_CQ_DATA) ||
                      e->data <= ofi_g.info->ep_attr->max_msg_size))
        size = (size_t)e->data;
    return size > req->size ? size : 0;
}

/* A receive got a longer message (size: its length, 0 when unknown). */
static void ofi_req_truncated(ofi_req_t *req, size_t size)
{
    req->status = BRAID_ERR_REMOTE;
    if (size > req->size)
        snprintf(req->err, sizeof(req->err), "net/ofi: a %zu-byte message arrived for a "
                 "%zu-byte receive on connection %llu (%s)", size, req->size,
                 (unsigned long long)req->conn_id, fi_strerror(FI_ETRUNC));
    else
        snprintf(req->err, sizeof(req->err), "net/ofi: a message larger than the %zu-byte "
                 "receive arrived on connection %llu (%s)", req->size,
                 (unsigned long long)req->conn_id, fi_strerror(FI_ETRUNC));
}

static void ofi_req_fail(ofi_req_t *req, const struct fi_cq_err_entry *e, int err,
                         const char *ptext)
{
    const char *what = req->op.kind == OFI_OP_SEND ? "send" : "receive";
    if (err == FI_ETRUNC && req->op.kind == OFI_OP_RECV) {
        /* tcp's prov_errno is a stale errno here: FI_ETRUNC's own text says it all */
        ofi_req_truncated(req, ofi_trunc_size(req, e));
    } else {
        req->status = err == FI_ENOMEM ? BRAID_ERR_NOMEM
                    : err == FI_ECANCELED ? BRAID_ERR_ABORTED : BRAID_ERR_REMOTE;
        snprintf(req->err, sizeof(req->err), "net/ofi: %s of %zu bytes on connection %llu "
                 "failed: %s (%s)", what, req->size, (unsigned long long)req->conn_id,
                 fi_strerror(err), ptext);
    }
    ofi_req_finish(req, e->len);
}

/* A successful completion; a receive shorter than the size the sender put in the CQ data
 * was truncated all the same (udp;ofi_rxd cuts without an error). */
static void ofi_req_done(ofi_req_t *req, const struct fi_cq_tagged_entry *ent)
{
    size_t sent = (ent->flags & FI_REMOTE_CQ_DATA) ? (size_t)ent->data : 0;
    if (req->op.kind == OFI_OP_RECV && (ent->len > req->size || sent > req->size))
        ofi_req_truncated(req, ent->len > sent ? ent->len : sent);
    ofi_req_finish(req, ent->len);
}

static void ofi_complete(const struct fi_cq_tagged_entry *ent)
{
    ofi_op_t *op = ent->op_context;
    if (op == NULL)
        return;
    if (op->kind == OFI_OP_SEND || op->kind == OFI_OP_RECV)
        ofi_req_done((ofi_req_t *)op, ent);
    else if (op->kind == OFI_OP_CTRL_RECV)
        ofi_ctrl_recv_done((ofi_ctrl_t *)op, ent->len);
    else
        ofi_ctrl_send_done((ofi_ctrl_t *)op, NULL);
}

/* One error completion: kept in its request, recorded when the request is tested. */
static void ofi_cq_error(void)
{
    struct fi_cq_err_entry e = { 0 };
    char pbuf[128] = "", text[OFI_ERR_MAX];
    const char *ptext;
    ofi_op_t *op;
    int err;
    ssize_t rc = fi_cq_readerr(ofi_g.cq, &e, 0);
    if (rc < 0) {
        if (rc != -FI_EAGAIN)
            BRAID_WARN("net/ofi: fi_cq_readerr: %s", fi_strerror((int)-rc));
        return;
    }
    ptext = fi_cq_strerror(ofi_g.cq, e.prov_errno, e.err_data, pbuf, sizeof(pbuf));
    ptext = ptext ? ptext : "";
    err = e.err < 0 ? -e.err : e.err;   /* shm reports it negated */
    op = e.op_context;
    if (op == NULL) {
        BRAID_WARN("net/ofi: completion error for no request: %s (%s)", fi_strerror(err),
                   ptext);
    } else if (op->kind == OFI_OP_SEND || op->kind == OFI_OP_RECV) {
        ofi_req_fail((ofi_req_t *)op, &e, err, ptext);
    } else if (op->kind == OFI_OP_CTRL_RECV) {
        ((ofi_ctrl_t *)op)->posted = 0;
        if (err != FI_ECANCELED)
            BRAID_INFO(BRAID_SUB_NET, "net/ofi: control receive: %s (%s)", fi_strerror(err),
                       ptext);
    } else {
        snprintf(text, sizeof(text), "%s (%s)", fi_strerror(err), ptext);
        ofi_ctrl_send_done((ofi_ctrl_t *)op, text);
    }
}

/* Read the completion queue (manual progress); the lock is held. */
static braid_status_t ofi_progress(void)
{
    struct fi_cq_tagged_entry ent[OFI_CQ_BATCH];
    for (int round = 0; round < OFI_CQ_ROUNDS; round++) {
        ssize_t n = fi_cq_read(ofi_g.cq, ent, OFI_CQ_BATCH);
        if (n == -FI_EAGAIN)
            break;
        if (n == -FI_EAVAIL) {
            ofi_cq_error();
            continue;
        }
        if (n < 0)
            return braid_err(BRAID_ERR_SYSTEM, "net/ofi: fi_cq_read: %s", fi_strerror((int)-n));
        for (ssize_t i = 0; i < n; i++)
            ofi_complete(&ent[i]);
        if (n < OFI_CQ_BATCH)
            break;
    }
    ofi_ctrl_retry();
    return BRAID_OK;
}

/* ---- the provider's entries ---- */

static braid_status_t ofi_setup(void)
{
    braid_sockaddr_t want;
    braid_status_t st;
    /* NCCL_SOCKET_IFNAME naming no interface: recorded there, UNSUPPORTED for net.c */
    if (braid_socket_find_if(NULL, &want, ofi_g.ifname) < 0)
        return BRAID_ERR_UNSUPPORTED;
    BRAID_CHECK(ofi_pick_info(&want, ofi_g.ifname, &ofi_g.info));
    BRAID_CHECK_GOTO(st, ofi_open(), out_teardown);
    BRAID_CHECK_GOTO(st, ofi_ctrl_start(), out_teardown);
    return BRAID_OK;
out_teardown:
    ofi_teardown();
    return st;
}

/* The version both ends compare: the library's and the provider's name. */
static void ofi_version_set(void)
{
    uint32_t v = fi_version();
    const char *prov = ofi_g.info->fabric_attr->prov_name;
    if (FI_MAJOR(v) == FI_MAJOR_VERSION && FI_MINOR(v) == FI_MINOR_VERSION)
        snprintf(ofi_g.version, sizeof(ofi_g.version), "libfabric %u.%u.%u %s", FI_MAJOR(v),
                 FI_MINOR(v), FI_REVISION_VERSION, prov);
    else
        snprintf(ofi_g.version, sizeof(ofi_g.version), "libfabric %u.%u %s", FI_MAJOR(v),
                 FI_MINOR(v), prov);
}

/* Cached once it succeeds; a failure is probed again on the next call. */
static braid_status_t ofi_init(void)
{
    braid_status_t st = BRAID_OK;
    pthread_mutex_lock(&ofi_g.lock);
    if (!ofi_g.ready) {
        st = ofi_setup();
        if (st == BRAID_OK) {
            ofi_version_set();
            ofi_g.ready = 1;
            BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net/ofi: %s, domain %s, fabric %s, "
                       "interface %s, %s registration", ofi_g.version,
                       ofi_g.info->domain_attr->name, ofi_g.info->fabric_attr->name,
                       ofi_g.ifname, ofi_mr_local() ? "local" : "no");
        }
    }
    pthread_mutex_unlock(&ofi_g.lock);
    return st;
}

static const char *ofi_version(void)
{
    return ofi_g.version;
}

static braid_status_t ofi_devices(int *ndev_p)
{
    *ndev_p = 1;
    return BRAID_OK;
}

static braid_status_t ofi_dev_check(int dev)
{
    if (dev != 0)
        return braid_err(BRAID_ERR_INVALID, "net/ofi: device %d does not exist (1 device)",
                         dev);
    return BRAID_OK;
}

static braid_status_t ofi_get_properties(int dev, braid_net_props_t *props_p)
{
    const struct fi_info *info = ofi_g.info;
    BRAID_CHECK(ofi_dev_check(dev));
    memset(props_p, 0, sizeof(*props_p));
    snprintf(props_p->name, sizeof(props_p->name), "%s", info->domain_attr->name);
    if (info->nic != NULL && info->nic->link_attr != NULL)
        props_p->speed_mbps = (int)(info->nic->link_attr->speed / 1000000);
    return BRAID_OK;
}

static braid_status_t ofi_listen(int dev, void *handle, void **listen_p)
{
    ofi_handle_t h = { .magic = OFI_HANDLE_MAGIC };
    ofi_listen_t *l;
    BRAID_CHECK(ofi_dev_check(dev));
    l = calloc(1, sizeof(*l));
    if (l == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net/ofi: no memory for a listen comm");
    l->tail = &l->head;
    pthread_mutex_lock(&ofi_g.lock);
    l->id = ++ofi_g.next_listen;
    l->next = ofi_g.listens;
    ofi_g.listens = l;
    h.listen_id = l->id;
    h.namelen = (uint32_t)ofi_g.namelen;
    memcpy(h.name, ofi_g.name, ofi_g.namelen);
    pthread_mutex_unlock(&ofi_g.lock);
    memcpy(handle, &h, sizeof(h));
    *listen_p = l;
    return BRAID_OK;
}

static braid_status_t ofi_connect_locked(ofi_conn_t *c, const ofi_handle_t *h)
{
    ofi_ctrl_msg_t m = { .magic = OFI_CTRL_MAGIC, .type = OFI_CTRL_CONNECT,
                         .listen_id = h->listen_id, .namelen = (uint32_t)ofi_g.namelen };
    int rc = ofi_peer_addr(h->name, h->namelen, &c->peer);
    if (rc != 0)
        return braid_err(BRAID_ERR_REMOTE, "net/ofi: connect: fi_av_insert of the listener's "
                         "address: %s", fi_strerror(-rc));
    c->send_id = m.send_id = ++ofi_g.next_send;
    memcpy(m.name, ofi_g.name, ofi_g.namelen);
    rc = (int)ofi_ctrl_send(c->peer, &m);
    if (rc != 0)
        return braid_err(rc == -FI_ENOMEM ? BRAID_ERR_NOMEM : BRAID_ERR_REMOTE,
                         "net/ofi: connect: sending the connection request: %s",
                         fi_strerror(-rc));
    c->next = ofi_g.sends;
    ofi_g.sends = c;
    return BRAID_OK;
}

/* Sends the request and returns: the listener's answer arrives with later progress. */
static braid_status_t ofi_connect(int dev, const void *handle, void **send_p)
{
    ofi_handle_t h;
    ofi_conn_t *c;
    braid_status_t st;
    BRAID_CHECK(ofi_dev_check(dev));
    memcpy(&h, handle, sizeof(h));
    if (h.magic != OFI_HANDLE_MAGIC || h.namelen == 0 || h.namelen > OFI_NAME_MAX)
        return braid_err(BRAID_ERR_INVALID, "net/ofi: connect: not an OFI listen handle");
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net/ofi: no memory for a send comm");
    c->is_send = 1;
    pthread_mutex_lock(&ofi_g.lock);
    st = ofi_connect_locked(c, &h);
    pthread_mutex_unlock(&ofi_g.lock);
    if (st < 0) {
        free(c);
        return st;
    }
    *send_p = c;
    return BRAID_OK;
}

static braid_status_t ofi_accept(void *listen, void **recv_p)
{
    ofi_listen_t *l = listen;
    ofi_pending_t *p;
    ofi_conn_t *c = NULL;
    braid_status_t st;
    *recv_p = NULL;
    pthread_mutex_lock(&ofi_g.lock);
    st = ofi_progress();
    if (st == BRAID_OK && (p = l->head) != NULL) {
        c = calloc(1, sizeof(*c));
        if (c == NULL) {
            st = braid_err(BRAID_ERR_NOMEM, "net/ofi: no memory for a receive comm");
        } else {
            c->conn_id = p->conn_id;
            c->peer = p->peer;
            if ((l->head = p->next) == NULL)
                l->tail = &l->head;
            free(p);
        }
    }
    pthread_mutex_unlock(&ofi_g.lock);
    *recv_p = c;
    return st;
}

static braid_status_t ofi_reg_mr(void *comm, void *data, size_t size, void **mh_p)
{
    ofi_mr_t *h;
    braid_status_t st;
    (void)comm;
    if (!ofi_mr_local() || size == 0) {
        *mh_p = &ofi_mr_none;
        return BRAID_OK;
    }
    h = calloc(1, sizeof(*h));
    if (h == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net/ofi: no memory for a registration");
    pthread_mutex_lock(&ofi_g.lock);
    st = ofi_mr_register(data, size, &h->mr);
    pthread_mutex_unlock(&ofi_g.lock);
    if (st < 0) {
        free(h);
        return st;
    }
    h->desc = fi_mr_desc(h->mr);
    *mh_p = h;
    return BRAID_OK;
}

static braid_status_t ofi_dereg_mr(void *comm, void *mh)
{
    ofi_mr_t *h = mh;
    int rc;
    (void)comm;
    if (h == NULL || h == &ofi_mr_none)
        return BRAID_OK;
    pthread_mutex_lock(&ofi_g.lock);
    rc = fi_close(&h->mr->fid);
    pthread_mutex_unlock(&ofi_g.lock);
    free(h);
    if (rc != 0)
        return braid_err(BRAID_ERR_SYSTEM, "net/ofi: fi_close of a registration: %s",
                         fi_strerror(-rc));
    return BRAID_OK;
}

/* Post message number c->seq of the connection; FI_EAGAIN leaves *req_p NULL. */
static braid_status_t ofi_post(ofi_conn_t *c, void *buf, size_t size, void *mh,
                               void **req_p)
{
    uint64_t tag = (c->conn_id << ofi_g.seq_bits) | (c->seq & ofi_g.seq_mask);
    void *desc = mh ? ((ofi_mr_t *)mh)->desc : NULL;
    ofi_req_t *req;
    ssize_t rc;
    if (size > ofi_g.info->ep_attr->max_msg_size)
        return braid_err(BRAID_ERR_INVALID, "net/ofi: a %zu-byte message exceeds %s's "
                         "maximum of %zu bytes", size, ofi_g.info->fabric_attr->prov_name,
                         ofi_g.info->ep_attr->max_msg_size);
    req = calloc(1, sizeof(*req));
    if (req == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net/ofi: no memory for a request");
    req->op.kind = c->is_send ? OFI_OP_SEND : OFI_OP_RECV;
    req->conn = c, req->conn_id = c->conn_id, req->size = size;
    /* the size travels as remote CQ data: tcp's truncation error reports nothing else */
    if (!c->is_send)
        rc = fi_trecv(ofi_g.ep, buf, size, desc, FI_ADDR_UNSPEC, tag, 0, &req->op);
    else if (ofi_g.info->domain_attr->cq_data_size >= sizeof(uint64_t))
        rc = fi_tsenddata(ofi_g.ep, buf, size, desc, size, c->peer, tag, &req->op);
    else
        rc = fi_tsend(ofi_g.ep, buf, size, desc, c->peer, tag, &req->op);
    if (rc != 0) {
        free(req);
        if (rc == -FI_EAGAIN)
            return ofi_progress();
        return braid_err(rc == -FI_ENOMEM ? BRAID_ERR_NOMEM : BRAID_ERR_REMOTE,
                         "net/ofi: %s of %zu bytes on connection %llu: %s",
                         c->is_send ? "fi_tsend" : "fi_trecv", size,
                         (unsigned long long)c->conn_id, fi_strerror((int)-rc));
    }
    c->seq++;
    ofi_list_add(&c->reqs, req);
    *req_p = req;
    return BRAID_OK;
}

static braid_status_t ofi_isend(void *send, const void *data, size_t size, void *mh,
                                void **req_p)
{
    ofi_conn_t *c = send;
    braid_status_t st = BRAID_OK;
    *req_p = NULL;
    pthread_mutex_lock(&ofi_g.lock);
    if (c->conn_id == 0 && c->failed == BRAID_OK)
        st = ofi_progress();   /* the listener's answer may be in */
    if (st == BRAID_OK && c->failed < 0)
        st = braid_err(c->failed, "%s", c->err);
    else if (st == BRAID_OK && c->conn_id != 0)
        st = ofi_post(c, (void *)data, size, mh, req_p);
    pthread_mutex_unlock(&ofi_g.lock);
    return st;
}

static braid_status_t ofi_irecv(void *recv, void *data, size_t size, void *mh, void **req_p)
{
    braid_status_t st;
    *req_p = NULL;
    pthread_mutex_lock(&ofi_g.lock);
    st = ofi_post(recv, data, size, mh, req_p);
    pthread_mutex_unlock(&ofi_g.lock);
    return st;
}

/* Give a request that libfabric still holds to the orphan list: freed at its completion. */
static void ofi_req_orphan(ofi_req_t *req)
{
    ofi_list_del(&req->conn->reqs, req);
    req->conn = NULL;
    ofi_list_add(&ofi_g.orphans, req);
}

static braid_status_t ofi_test(void *request, int *done_p, size_t *size_p)
{
    ofi_req_t *req = request;
    braid_status_t st = BRAID_OK;
    *done_p = 0;
    pthread_mutex_lock(&ofi_g.lock);
    if (!req->done)
        st = ofi_progress();   /* recorded there when it fails */
    if (req->done) {
        if (st == BRAID_OK && req->status < 0) {
            st = braid_err(req->status, "%s", req->err);
        } else if (st == BRAID_OK) {
            *done_p = 1;
            if (size_p != NULL)
                *size_p = req->len;
        }
        ofi_list_del(&req->conn->reqs, req);
        free(req);
    } else if (st < 0) {
        ofi_req_orphan(req);   /* freed for the caller, but libfabric still holds it */
    }
    pthread_mutex_unlock(&ofi_g.lock);
    return st;
}

static int ofi_conn_busy(const ofi_conn_t *c)
{
    for (const ofi_req_t *r = c->reqs; r != NULL; r = r->next)
        if (!r->done)
            return 1;
    return 0;
}

/*
 * Cancel what is pending and give it OFI_DRAIN_NS to complete, unlocking between reads so
 * other comms go on; what libfabric still holds then (a send whose receiver never posted)
 * is orphaned rather than freed under it.
 */
static void ofi_conn_close(ofi_conn_t *c)
{
    int64_t deadline = braid_time_ns() + OFI_DRAIN_NS;
    ofi_req_t *r;
    pthread_mutex_lock(&ofi_g.lock);
    for (ofi_conn_t **pp = &ofi_g.sends; c->is_send && *pp != NULL; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    for (r = c->reqs; r != NULL; r = r->next)
        if (!r->done)
            fi_cancel(&ofi_g.ep->fid, &r->op);
    while (ofi_conn_busy(c) && braid_time_ns() < deadline) {
        pthread_mutex_unlock(&ofi_g.lock);
        sched_yield();
        pthread_mutex_lock(&ofi_g.lock);
        if (ofi_progress() < 0)
            break;
    }
    while ((r = c->reqs) != NULL) {
        if (r->done) {
            ofi_list_del(&c->reqs, r);
            free(r);
        } else {
            ofi_req_orphan(r);
        }
    }
    pthread_mutex_unlock(&ofi_g.lock);
    free(c);
}

static void ofi_close_send(void *send)
{
    if (send != NULL)
        ofi_conn_close(send);
}

static void ofi_close_recv(void *recv)
{
    if (recv != NULL)
        ofi_conn_close(recv);
}

/* Connections that arrived but were never accepted are dropped with the listener. */
static void ofi_close_listen(void *listen)
{
    ofi_listen_t *l = listen, *p;
    if (l == NULL)
        return;
    pthread_mutex_lock(&ofi_g.lock);
    for (ofi_listen_t **pp = &ofi_g.listens; (p = *pp) != NULL; pp = &p->next)
        if (p == l) {
            *pp = l->next;
            break;
        }
    pthread_mutex_unlock(&ofi_g.lock);
    while (l->head != NULL) {
        ofi_pending_t *next = l->head->next;
        free(l->head);
        l->head = next;
    }
    free(l);
}

#else /* !HAVE_OFI: a provider that says why it cannot run */

static braid_status_t ofi_missing(void)
{
    return braid_err(BRAID_ERR_UNSUPPORTED, "net/ofi: braid was built without libfabric: "
                     "apt-get install libfabric-dev and rebuild");
}

static braid_status_t ofi_init(void)
{
    return ofi_missing();
}

static const char *ofi_version(void)
{
    return "libfabric (not built)";
}

static braid_status_t ofi_devices(int *ndev_p)
{
    *ndev_p = 0;
    return ofi_missing();
}

static braid_status_t ofi_get_properties(int dev, braid_net_props_t *props_p)
{
    (void)dev, (void)props_p;
    return ofi_missing();
}

static braid_status_t ofi_listen(int dev, void *handle, void **listen_p)
{
    (void)dev, (void)handle, (void)listen_p;
    return ofi_missing();
}

static braid_status_t ofi_connect(int dev, const void *handle, void **send_p)
{
    (void)dev, (void)handle, (void)send_p;
    return ofi_missing();
}

static braid_status_t ofi_accept(void *listen, void **recv_p)
{
    (void)listen, (void)recv_p;
    return ofi_missing();
}

static braid_status_t ofi_reg_mr(void *comm, void *data, size_t size, void **mh_p)
{
    (void)comm, (void)data, (void)size, (void)mh_p;
    return ofi_missing();
}

static braid_status_t ofi_dereg_mr(void *comm, void *mh)
{
    (void)comm, (void)mh;
    return ofi_missing();
}

static braid_status_t ofi_isend(void *send, const void *data, size_t size, void *mh,
                                void **req_p)
{
    (void)send, (void)data, (void)size, (void)mh, (void)req_p;
    return ofi_missing();
}

static braid_status_t ofi_irecv(void *recv, void *data, size_t size, void *mh, void **req_p)
{
    (void)recv, (void)data, (void)size, (void)mh, (void)req_p;
    return ofi_missing();
}

static braid_status_t ofi_test(void *req, int *done, size_t *size_p)
{
    (void)req, (void)done, (void)size_p;
    return ofi_missing();
}

static void ofi_close_comm(void *comm)
{
    (void)comm;
}

#define ofi_close_send ofi_close_comm
#define ofi_close_recv ofi_close_comm
#define ofi_close_listen ofi_close_comm

#endif /* HAVE_OFI */

const braid_net_ops_t braid_net_ofi = {
    .name = "OFI",
    .init = ofi_init,
    .version = ofi_version,
    .devices = ofi_devices,
    .get_properties = ofi_get_properties,
    .listen = ofi_listen,
    .connect = ofi_connect,
    .accept = ofi_accept,
    .reg_mr = ofi_reg_mr,
    .dereg_mr = ofi_dereg_mr,
    .isend = ofi_isend,
    .irecv = ofi_irecv,
    .test = ofi_test,
    .close_send = ofi_close_send,
    .close_recv = ofi_close_recv,
    .close_listen = ofi_close_listen,
};
