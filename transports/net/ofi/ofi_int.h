/*
 * What the files of the libfabric provider share; included only where HAVE_OFI is defined.
 *
 *   ofi.c         the design (a picture of the connection protocol), init, the ops table
 *   ofi_fabric.c  which libfabric provider, and the process's endpoint
 *   ofi_mr.c      memory registration
 *   ofi_conn.c    control messages; listen, connect, accept
 *   ofi_msg.c     requests and completions (progress); isend, irecv, test, close
 *
 * One mutex, braid_ofi_g.lock, guards the endpoint and all below it: the provider's
 * entries (braid_ofi_listen ... braid_ofi_close_*) take it themselves, and every other
 * function declared here is called with it held.
 */
#ifndef BRAID_TRANSPORTS_NET_OFI_INT_H
#define BRAID_TRANSPORTS_NET_OFI_INT_H

#include <net/if.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>   /* fi_param_get_str: libfabric's own FI_PROVIDER */

#include "base/log.h"
#include "base/socket.h"
#include "transports/net/net.h"

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

/* The process's endpoint and everything on it (one, in ofi.c). */
typedef struct ofi_global {
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
} ofi_global_t;

extern ofi_global_t braid_ofi_g;


/* ---- ofi_fabric.c ---- */

/* Choose the libfabric provider and open the endpoint, with its control receives posted. */
braid_status_t braid_ofi_setup(void);
/* rc of a libfabric call: OK, or UNSUPPORTED recorded naming the call and the provider. */
braid_status_t braid_ofi_call(int rc, const char *what);

/* ---- ofi_mr.c ---- */

/* Does the provider want local buffers registered (FI_MR_LOCAL)? */
int braid_ofi_mr_local(void);
braid_status_t braid_ofi_mr_register(void *buf, size_t len, struct fid_mr **mr_p);
braid_status_t braid_ofi_reg_mr(void *comm, void *data, size_t size, void **mh_p);
braid_status_t braid_ofi_dereg_mr(void *comm, void *mh);

/* ---- ofi_conn.c ---- */

/* Post the process's control receives (setup). */
braid_status_t braid_ofi_ctrl_start(void);
/* Completions of control operations, from the progress loop (err: NULL when it succeeded). */
void braid_ofi_ctrl_recv_done(ofi_ctrl_t *slot, size_t len);
void braid_ofi_ctrl_send_done(ofi_ctrl_t *cs, const char *err);
/* Post the control receives and sends that FI_EAGAIN held back. */
void braid_ofi_ctrl_retry(void);
braid_status_t braid_ofi_listen(int dev, void *handle, void **listen_p);
braid_status_t braid_ofi_connect(int dev, const void *handle, void **send_p);
braid_status_t braid_ofi_accept(void *listen, void **recv_p);
void braid_ofi_close_listen(void *listen);

/* ---- ofi_msg.c ---- */

/* Read the completion queue (manual progress). */
braid_status_t braid_ofi_progress(void);
braid_status_t braid_ofi_isend(void *send, const void *data, size_t size, void *mh,
                               void **req_p);
braid_status_t braid_ofi_irecv(void *recv, void *data, size_t size, void *mh, void **req_p);
braid_status_t braid_ofi_test(void *request, int *done_p, size_t *size_p);
void braid_ofi_close_send(void *send);
void braid_ofi_close_recv(void *recv);

/* ---- ofi.c ---- */

/* Only device 0 exists: INVALID, recorded, for any other. */
braid_status_t braid_ofi_dev_check(int dev);

#endif
