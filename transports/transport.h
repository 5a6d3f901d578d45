/*
 * Transports move bytes between two ranks through a FIFO of slots (NCCL's connector idea).
 *
 * The sender asks for a free slot, writes into it (a copy, or a reduction's output written
 * straight into it), and commits it with a length and a message header; the receiver waits
 * for a full slot, consumes it (reduces it into its buffer or forwards it) and releases it.
 * Both calls return BRAID_INPROGRESS instead of blocking: the executor decides how to wait.
 * A slot stays the same between calls until it is committed/released, so asking again is
 * free. Every slot carries a header (who sent it, for which call) so that a receiver can
 * detect mismatched calls.
 */
#ifndef BRAID_TRANSPORTS_TRANSPORT_H
#define BRAID_TRANSPORTS_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* What a message is part of: compared by the receiver with its own call. */
typedef struct braid_msg_hdr {
    uint64_t seq;       /* collective sequence number, or send/recv sequence per peer pair */
    uint64_t count;     /* the call's count */
    uint8_t kind;       /* braid_coll_kind_t */
    uint8_t dtype;
    uint8_t op;         /* ncclRedOp_t as called (255: none) */
    uint8_t algo;       /* the algorithm: its index in braid_algos + 1 */
    int32_t root;       /* -1 when the call has none */
} braid_msg_hdr_t;

typedef struct braid_conn braid_conn_t;

typedef struct braid_transport_ops {
    const char *name;
    /* A free slot to write `len` bytes into: its address and capacity (a transport may
     * hand out a smaller place for a small len). INPROGRESS if none is free. */
    braid_status_t (*send_slot)(braid_conn_t *c, size_t len, void **ptr_p, size_t *cap_p);
    /* Hand the slot got from send_slot to the peer, holding `len` bytes. */
    braid_status_t (*send_commit)(braid_conn_t *c, size_t len, const braid_msg_hdr_t *hdr);
    /* The oldest full slot: data, length, header. INPROGRESS if none has arrived. */
    braid_status_t (*recv_slot)(braid_conn_t *c, const void **ptr_p, size_t *len_p,
                                braid_msg_hdr_t *hdr_p);
    /* Give the slot got from recv_slot back to the sender. */
    braid_status_t (*recv_release)(braid_conn_t *c);
    /* INPROGRESS until every committed slot has left this process (a network provider
     * moves data only while it is driven); NULL where a commit is delivery. */
    braid_status_t (*flush)(braid_conn_t *c);
    void (*close)(braid_conn_t *c);
} braid_transport_ops_t;

/* The common head of every transport's connection object. */
struct braid_conn {
    const braid_transport_ops_t *ops;
    int peer;                   /* the rank at the other end */
    size_t slot_size;           /* capacity of every slot */
    /* Order of use among the operations of one communicator: an operation may touch this
     * connection only while its ticket is being served (see src/exec/exec.c). */
    uint64_t ticket_next, ticket_serving;
};

static inline braid_status_t braid_conn_send_slot(braid_conn_t *c, size_t len, void **p,
                                                  size_t *cap)
{
    return c->ops->send_slot(c, len, p, cap);
}
static inline braid_status_t braid_conn_send_commit(braid_conn_t *c, size_t len,
                                                    const braid_msg_hdr_t *hdr)
{
    return c->ops->send_commit(c, len, hdr);
}
static inline braid_status_t braid_conn_recv_slot(braid_conn_t *c, const void **p, size_t *len,
                                                  braid_msg_hdr_t *hdr)
{
    return c->ops->recv_slot(c, p, len, hdr);
}
static inline braid_status_t braid_conn_recv_release(braid_conn_t *c)
{
    return c->ops->recv_release(c);
}
static inline void braid_conn_close(braid_conn_t *c)
{
    if (c != NULL)
        c->ops->close(c);
}

#endif
