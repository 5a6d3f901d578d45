/*
 * Bootstrap internals shared by bootstrap.c (the ranks) and bootstrap_root.c (the root
 * thread): the messages between a rank and the root.
 *
 *   rank -> root   bs_hello_t, then info_len bytes of the rank's info blob
 *   root -> rank   at once, a bs_reply_t: BRAID_INPROGRESS (joined: the rank now knows it
 *                  talks to a braid root, and that a close from here on means the root's
 *                  process died) or an error (refused);
 *                  once every rank has joined, a bs_reply_t; when its status is BRAID_OK the
 *                  table follows: nranks bs_rec_t (rank order), then nranks info blobs
 *
 * Both ends run the same build on machines of one byte order, so fields are native.
 */
#ifndef BRAID_CORE_BOOTSTRAP_INT_H
#define BRAID_CORE_BOOTSTRAP_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/bootstrap.h"
#include "base/socket.h"

#define BS_PROTO_MAGIC 0x53425242u   /* "BRBS" */
#define BS_PROTO_VERSION 2u
#define BS_HOST_LEN 64
#define BS_TEXT_LEN 384
#define BS_INFO_MAX (1u << 20)       /* per-rank info blob limit */
#define BS_NRANKS_MAX (1 << 22)
#define BS_GRACE_S 3                 /* ranks wait this much longer than the root */
#define BS_ACK_S 5                   /* a root answers a hello within this (it only reads it) */

/* What a rank says about itself: one row of the table. */
typedef struct bs_rec {
    uint64_t host_id;
    braid_sockaddr_t addr;           /* where its listener is */
    int32_t rank;
    uint32_t pid;
    char host[BS_HOST_LEN];
} bs_rec_t;

typedef struct bs_hello {
    uint32_t magic;
    uint32_t version;
    uint64_t nonce;
    int32_t nranks;
    uint32_t info_len;
    bs_rec_t rec;
} bs_hello_t;

typedef struct bs_reply {
    uint32_t magic;
    int32_t status;                  /* braid_status_t; BRAID_OK: the table follows */
    char text[BS_TEXT_LEN];          /* what went wrong, for the rank to report */
    uint32_t pid;                    /* the root's process (after text: a refusal stays */
    char host[BS_HOST_LEN];          /* readable by a rank of protocol 1) */
} bs_reply_t;

/* First message on a ring link: who connects to whom, for which communicator. */
typedef struct bs_link_hello {
    uint32_t magic;
    uint32_t version;
    uint64_t nonce;                  /* the communicator's (children: derived) */
    uint64_t tag;                    /* 0, or the child's split tag */
    int32_t from;
    int32_t to;
} bs_link_hello_t;

/* An accepted connection whose communicator has not claimed it yet. */
typedef struct bs_pending {
    struct bs_pending *next;
    int fd;
    bs_link_hello_t hello;
} bs_pending_t;

/*
 * The listener a rank opens at init; its children (split, shrink) share it, possibly from
 * other threads, so it is reference counted and its queue of unclaimed connections locked.
 */
typedef struct bs_listener {
    int fd;
    braid_sockaddr_t addr;
    atomic_int refs;
    pthread_mutex_t lock;
    bs_pending_t *pending;
} bs_listener_t;

/* Ring traffic: DATA frames (header + payload) forward, FAIL notices either way. */
typedef struct bs_frame {
    uint32_t kind;                   /* BS_FRAME_DATA or BS_FRAME_FAIL */
    uint32_t reason;                 /* FAIL: bs_fail_t */
    int32_t rank;                    /* FAIL: the rank that failed */
    int32_t reporter;                /* FAIL: the rank that saw it fail */
    uint64_t len;                    /* DATA: payload bytes that follow */
} bs_frame_t;

struct braid_bootstrap {
    int rank, nranks;
    uint64_t nonce, tag;
    braid_uid_t uid;                 /* the job's id (children: the parent's) */
    int is_child;
    int joined;
    bs_listener_t *lis;              /* NULL for a 1-rank bootstrap */
    int next_fd, prev_fd;            /* ring links to rank+1 and from rank-1 */
    int abort_fd;                    /* eventfd, readable once aborted */
    atomic_int aborted;
    braid_status_t failed;           /* sticky: the ring is broken */
    int next_gone;                   /* rank+1 closed its end (after taking our data) */
    bs_frame_t back;                 /* a notice being read from rank+1 */
    size_t back_off;
    int64_t back_held;               /* when a notice from rank+1 came, complete in `back`,
                                      * passed on but not reported yet (0: none): a step
                                      * that can still complete completes first */
    bs_frame_t notice;               /* the failure notice this rank started or passed on */
    int notice_owed;                 /* ... still to send to rank-1 once its link stands */
    braid_bootstrap_t *parent;       /* a blocking split's parent while the child's ring is
                                      * made: a failure notice on its ring ends the wait
                                      * (braid_bootstrap_watch_parent) */
    int timeout_s;                   /* 0: no limit */
    size_t info_len;
    bs_rec_t *recs;                  /* nranks rows */
    uint8_t *infos;                  /* nranks * info_len */
};

/*
 * Decoding what a peer sent, without I/O (the fuzz harness tests/fuzz/fuzz_bootstrap.c
 * calls these).
 *
 * The root: BRAID_OK when a hello of this job (`nonce`) is well formed, else
 * BRAID_ERR_INVALID with the refusal for the rank in `why` (`where`: the root's address).
 */
braid_status_t braid_bootstrap_hello_check(const bs_hello_t *h, uint64_t nonce,
                                           const char *where, char *why, size_t len);
/* A rank: the error a reply that is not the table or the ack stands for (a refusal or the
 * job's failure: its text, with its status), recorded. Always an error. */
braid_status_t braid_bootstrap_reply_error(const bs_reply_t *reply);
/* A rank: the table from the root at `where` (its host names terminated here). */
braid_status_t braid_bootstrap_table_check(bs_rec_t *recs, int nranks, const char *where);
/* A ring neighbour: 1 when `f` is a failure notice naming ranks of the ring. */
int braid_bootstrap_notice_valid(const bs_frame_t *f, int nranks);

/* bootstrap_link.c */
braid_status_t braid_bootstrap_listener_create(braid_sockaddr_t *addr, bs_listener_t **lis_p);
bs_listener_t *braid_bootstrap_listener_ref(bs_listener_t *lis);
void braid_bootstrap_listener_unref(bs_listener_t *lis);   /* NULL is fine */
/* Send our hello (bs->recs[rank], our info) to the root and receive the table. */
braid_status_t braid_bootstrap_root_exchange(braid_bootstrap_t *bs, const braid_sockaddr_t *root);
/* Connect to rank+1, and take rank-1's connection from the listener. */
braid_status_t braid_bootstrap_ring_connect(braid_bootstrap_t *bs);
/* Record a quiet socket status `st` (errno: its cause) of an exchange with `peer`. */
braid_status_t braid_bootstrap_peer_err(const braid_bootstrap_t *bs, braid_status_t st, int peer,
                                        const char *what);

/* bootstrap_ring.c */

/*
 * Between ring operations during setup: a failure notice from either neighbour, or a
 * neighbour's close (which before setup ends can only mean it died or failed). BRAID_OK
 * when neither; else the error, recorded, after passing the notice on.
 */
braid_status_t braid_bootstrap_ring_watch(braid_bootstrap_t *bs, const char *what);
/*
 * During setup, while a wait that may still complete goes on (ring setup): read what
 * rank+1 sent. Its close is an error (it cannot be done with us yet); a notice is passed
 * on and held (bs->back_held), for braid_bootstrap_ring_watch to report once the wait has
 * held it RING_HOLD_NS or after the wait.
 */
#define BS_HOLD_NS 1000000000ll         /* a wait holds a notice this long before failing */
braid_status_t braid_bootstrap_ring_hold(braid_bootstrap_t *bs, const char *what);
/* Start a notice that `rank` failed (BRAID_ERR_ABORTED: it aborted; `rank` == this rank
 * with another status: its setup failed), both ways around the ring. */
void braid_bootstrap_ring_notice(braid_bootstrap_t *bs, int rank, braid_status_t why);
/* Send rank-1 the notice it is still owed (its link was made after the notice). */
void braid_bootstrap_ring_notice_owed(braid_bootstrap_t *bs);
/* A failure notice that reached this rank on the watched parent's ring (bs->parent), passed
 * on there and recorded as the parent's failure; BRAID_OK when none (data and closes are
 * left to the parent's next call). */
braid_status_t braid_bootstrap_parent_notice(braid_bootstrap_t *bs, const char *what);

/* bootstrap_root.c */

/*
 * Start a root thread serving one job: listen on addr (its port may be 0; addr gets the
 * bound one), wait for the ranks that carry `nonce`, send them the table, exit. A detached
 * thread; the job's ranks report any failure.
 */
braid_status_t braid_bootstrap_root_start(braid_sockaddr_t *addr, int reuse_addr, uint64_t nonce,
                                          int timeout_s);

/* Stop, quietly, a root of this process that serves `nonce` (a 1-rank job needs none). */
void braid_bootstrap_root_cancel(uint64_t nonce);

/* "rank 3 (host node7, pid 1234)" */
const char *braid_bootstrap_rec_str(const bs_rec_t *rec, char *buf, size_t len);

#endif
