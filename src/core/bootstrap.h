/*
 * Bootstrap: how the ranks of a communicator find each other over TCP (DESIGN.md section 4).
 *
 * ncclGetUniqueId starts a root thread with a listening socket (or NCCL_COMM_ID=host:port
 * names where rank 0 will start it) and writes into the 128-byte id a magic, a version, the
 * root's address and a random job nonce. Every rank connects to the root and sends
 * (nonce, rank, nranks, its own listen address, an info blob); the root checks them (same
 * nonce, same nranks, no rank twice), then sends everyone the table of listen addresses and
 * blobs. Each rank then connects to its ring neighbours' listeners; all-gathers and barriers
 * during setup run around that ring. Every wait is bounded by BRAID_BOOTSTRAP_TIMEOUT and an
 * error names the ranks that were missing.
 *
 * A child communicator (split, shrink) reuses the process's listener and the parent's table
 * of addresses: its members connect straight to each other, tagged with the child's id, so
 * excluded (possibly dead) ranks of the parent are never contacted.
 */
#ifndef BRAID_CORE_BOOTSTRAP_H
#define BRAID_CORE_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define BRAID_UID_MAGIC 0x44495242u /* "BRID" */
#define BRAID_UID_VERSION 1u

/* The content of an ncclUniqueId (128 bytes; the rest is zero). */
typedef struct braid_uid {
    uint32_t magic;
    uint32_t version;
    uint64_t nonce;           /* random per job (per ncclGetUniqueId call) */
    uint8_t addr[28];         /* struct sockaddr_in or sockaddr_in6 of the root */
    uint32_t flags;           /* BRAID_UID_ROOT_AT_RANK0: rank 0 starts the root (NCCL_COMM_ID) */
} braid_uid_t;

#define BRAID_UID_ROOT_AT_RANK0 0x1u

typedef struct braid_bootstrap braid_bootstrap_t;

/*
 * Fill a fresh id. Starts the root thread (random nonce) unless NCCL_COMM_ID is set; then the
 * id names that address with BRAID_UID_ROOT_AT_RANK0 and a nonce derived from the address,
 * so that ranks which each call ncclGetUniqueId get the same id (as NCCL allows).
 */
braid_status_t braid_bootstrap_get_uid(braid_uid_t *uid);

/* Check an id received from the user: magic, version, address family. */
braid_status_t braid_bootstrap_check_uid(const braid_uid_t *uid);

/* An id no rank will join (ncclCommInitRankScalable's ids past the first): stop its root
 * if this process started it. Nothing for an id made under NCCL_COMM_ID (no root of its
 * own) or in another process. */
void braid_bootstrap_uid_release(const braid_uid_t *uid);

/*
 * Join the job named by uid as `rank` of `nranks`. `info` (info_len bytes, the same length on
 * every rank) is gathered: braid_bootstrap_info(bs, r) returns rank r's blob afterwards.
 * Blocks until every rank has joined or the bootstrap timeout expires.
 */
braid_status_t braid_bootstrap_init(const braid_uid_t *uid, int rank, int nranks,
                                    const void *info, size_t info_len, braid_bootstrap_t **bs_p);

/*
 * The same in two steps, for callers that may abort a pending join from another thread:
 * create checks the arguments and returns at once a handle that braid_bootstrap_abort and
 * braid_bootstrap_destroy accept; join blocks like braid_bootstrap_init (on failure the
 * handle stays valid and must still be destroyed).
 */
braid_status_t braid_bootstrap_create(const braid_uid_t *uid, int rank, int nranks,
                                      const void *info, size_t info_len,
                                      braid_bootstrap_t **bs_p);
braid_status_t braid_bootstrap_join(braid_bootstrap_t *bs);

/*
 * Make the bootstrap of a child communicator: `nranks` members, this process being `rank`,
 * members[i] = parent rank of child rank i. `tag` must be the same on all members and unique
 * among the children of this parent (e.g. a hash of split counter and color). The child's
 * info blobs are the parent's blobs of its members. Only the parent's table and listener
 * are used, so the parent may have failed or been aborted (shrink after a fault), and either
 * may be destroyed first.
 */
braid_status_t braid_bootstrap_split(braid_bootstrap_t *parent, int rank, int nranks,
                                     const int *members, uint64_t tag,
                                     braid_bootstrap_t **bs_p);

/* braid_bootstrap_split in two steps, as create + join above. */
braid_status_t braid_bootstrap_split_create(braid_bootstrap_t *parent, int rank, int nranks,
                                            const int *members, uint64_t tag,
                                            braid_bootstrap_t **bs_p);
/*
 * Between split_create and join: the join also ends when a failure notice comes on the
 * parent's ring. A member that failed the parent's exchange before the split (a rank died
 * in it: some ranks finished it, others did not) never joins the child, and the members
 * that wait for it learn why instead of waiting for the timeout. For a split whose parent
 * stays in this thread's hands until the join returns; not for a shrink, whose parent may
 * have failed already.
 */
void braid_bootstrap_watch_parent(braid_bootstrap_t *bs, braid_bootstrap_t *parent);

/*
 * All-gather `len` bytes from each rank into out (nranks * len bytes, rank order; `mine` may
 * be out + rank * len). After a failure every later call returns the same error.
 */
braid_status_t braid_bootstrap_allgather(braid_bootstrap_t *bs, const void *mine, void *out,
                                         size_t len);
braid_status_t braid_bootstrap_barrier(braid_bootstrap_t *bs);

int braid_bootstrap_rank(const braid_bootstrap_t *bs);
int braid_bootstrap_nranks(const braid_bootstrap_t *bs);
uint64_t braid_bootstrap_nonce(const braid_bootstrap_t *bs);   /* children get derived ones */
const void *braid_bootstrap_info(const braid_bootstrap_t *bs, int rank);
/* Rank's host id (braid_host_id() of its process), and "rank 3 (host h, pid 42)". */
uint64_t braid_bootstrap_host_id(const braid_bootstrap_t *bs, int rank);
const char *braid_bootstrap_peer_str(const braid_bootstrap_t *bs, int rank, char *buf,
                                     size_t len);

/*
 * During communicator setup, between bootstrap calls: BRAID_OK, or the failure of a peer
 * that another rank announced or that this rank's ring links show (a close: the peer died
 * or failed), recorded. Never blocks: setup steps that wait for peers outside the bootstrap
 * (network connections) call it as they wait, so that a dead peer ends the wait at once.
 */
braid_status_t braid_bootstrap_check(braid_bootstrap_t *bs);

/*
 * Setup failed outside the bootstrap: tell the other ranks, through the ring, that `rank`
 * failed (this rank, or a peer this rank found dead, `why` its status), so that they stop
 * waiting and name it. Nothing when the bootstrap itself failed (it has told them).
 */
void braid_bootstrap_setup_failed(braid_bootstrap_t *bs, int rank, braid_status_t why);

/* Wake and fail any bootstrap operation in progress (abort from another thread). */
void braid_bootstrap_abort(braid_bootstrap_t *bs);
void braid_bootstrap_destroy(braid_bootstrap_t *bs);

#endif
