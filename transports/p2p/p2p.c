/*
 * Device FIFOs between the ranks of one host: arenas, their mapping, the connections
 * (p2p.h). Setup takes three exchanges through the bootstrap, every local rank's answer
 * in each, so that all ranks decide alike: the settings (rank 0's win), the arenas (made,
 * with their addresses and IPC handles), and the mappings (every rank reached every other).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"
#include "device/device.h"
#include "transports/p2p/p2p.h"

#define P2P_LINE 128u               /* one counter per line */
#define P2P_SLOT_MIN (64u * 1024u)
#define P2P_WHY 120

/* Exchange 1: what each rank would do. */
typedef struct p2p_offer {
    uint64_t slot_size, mem;
    uint32_t nslots;
    int32_t device;
    int32_t pid;
    uint64_t proc_key;
} p2p_offer_t;

/* Exchange 2: the arena each rank made (ok = 0: none, why says why). */
typedef struct p2p_arena {
    int32_t ok;
    uint64_t addr;                  /* in its own process */
    braid_ipc_handle_t handle;
    char why[P2P_WHY];
} p2p_arena_t;

/* Exchange 3: whether each rank reached every other's arena. */
typedef struct p2p_reach {
    int32_t ok;
    char why[P2P_WHY];
} p2p_reach_t;

typedef struct braid_p2p {
    braid_transport_ctx_t *ctx;
    const braid_device_ops_t *ops;
    int nlocal, me;                 /* local ranks; this rank's place among them */
    int *ranks;                     /* [nlocal]: the communicator rank of each */
    size_t slot_size;
    uint32_t nslots;
    char *arena;                    /* this rank's */
    size_t arena_bytes;
    char **peer;                    /* [nlocal]: each arena as mapped here */
    uint8_t *opened;                /* [nlocal]: mapped through IPC (closed at teardown) */
    braid_dconn_t *conns;           /* [2 * nlocal]: sends, then receives */
    braid_dconn_t **send, **recv;   /* [nranks]: the context's tables */
} braid_p2p_t;

/* One FIFO's message records, in whole lines. */
static size_t recs_bytes(uint32_t nslots)
{
    size_t b = (size_t)nslots * BRAID_DCONN_REC_WORDS * sizeof(uint64_t);
    return (b + P2P_LINE - 1) / P2P_LINE * P2P_LINE;
}

/* Counters and records: what setup zeroes. */
static size_t counters_bytes(int nlocal, uint32_t nslots)
{
    return 2 * (size_t)nlocal * P2P_LINE + (size_t)nlocal * recs_bytes(nslots);
}

static uint32_t *head_of(char *arena, int from)
{
    return (uint32_t *)(arena + (size_t)from * P2P_LINE);
}

static uint32_t *tail_of(char *arena, int nlocal, int to)
{
    return (uint32_t *)(arena + ((size_t)nlocal + (size_t)to) * P2P_LINE);
}

static uint64_t *recs_of(const braid_p2p_t *p, char *arena, int from)
{
    return (uint64_t *)(arena + 2 * (size_t)p->nlocal * P2P_LINE +
                        (size_t)from * recs_bytes(p->nslots));
}

static char *fifo_of(const braid_p2p_t *p, char *arena, int from)
{
    return arena + counters_bytes(p->nlocal, p->nslots) +
           (size_t)from * p->nslots * p->slot_size;
}

/* Every rank on this host (the agreed layout) and every one would make FIFOs. */
static int p2p_wanted(const braid_transport_ctx_t *ctx)
{
    if (ctx->topo->nhosts != 1 || ctx->device_map == NULL)
        return 0;
    for (int r = 0; r < ctx->nranks; r++)
        if (!ctx->peers[r].p2p)
            return 0;
    return 1;
}

/* Rank 0's settings, slots shrunk so that the arena fits its BRAID_P2P_MEM. */
static void p2p_settle(braid_p2p_t *p, const p2p_offer_t *r0)
{
    size_t fifos = (size_t)p->nlocal * r0->nslots;
    size_t head = counters_bytes(p->nlocal, r0->nslots);
    size_t room = r0->mem > head ? r0->mem - head : 0;
    size_t slot = r0->slot_size / 4096 * 4096;
    if (slot * fifos > room) {
        size_t fit = room / fifos / 4096 * 4096;
        slot = fit > P2P_SLOT_MIN ? fit : P2P_SLOT_MIN;
        if (p->ctx->rank == 0)
            BRAID_INFO(BRAID_SUB_P2P, "p2p: %d FIFOs of %u slots do not fit BRAID_P2P_MEM=%llu "
                       "at BRAID_P2P_SLOT_SIZE=%llu: slots of %zu bytes", p->nlocal,
                       r0->nslots, (unsigned long long)r0->mem,
                       (unsigned long long)r0->slot_size, slot);
    }
    p->slot_size = slot;
    p->nslots = r0->nslots;
    p->arena_bytes = head + fifos * slot;
}

/* This rank's arena on its device, counters zeroed (at init a synchronous wait is fine). */
static braid_status_t arena_make(braid_p2p_t *p, int device, p2p_arena_t *a)
{
    const braid_device_ops_t *ops = p->ops;
    BRAID_CHECK(ops->bind(device));
    BRAID_CHECK(ops->mem_alloc(p->arena_bytes, (void **)&p->arena));
    BRAID_CHECK(ops->memset_async(p->arena, 0, counters_bytes(p->nlocal, p->nslots), NULL));
    BRAID_CHECK(ops->stream_sync(NULL));
    BRAID_CHECK(ops->ipc_get(p->arena, &a->handle));
    a->addr = (uint64_t)(uintptr_t)p->arena;
    a->ok = 1;
    return BRAID_OK;
}

/* Local rank j's arena as this rank reaches it. */
static braid_status_t arena_map(braid_p2p_t *p, const p2p_offer_t *offers,
                                const p2p_arena_t *arenas, int j)
{
    const p2p_offer_t *mine = &offers[p->me], *theirs = &offers[j];
    if (j == p->me) {
        p->peer[j] = p->arena;
        return BRAID_OK;
    }
    if (theirs->pid == mine->pid && theirs->proc_key == mine->proc_key) {
        /* a thread of this process: the same address, reached across devices by peer
         * access where they differ */
        int can = 1;
        if (theirs->device != mine->device) {
            BRAID_CHECK(p->ops->peer_access(mine->device, theirs->device, &can));
            if (!can)
                return braid_err(BRAID_ERR_UNSUPPORTED, "device %d cannot reach device %d",
                                 mine->device, theirs->device);
            BRAID_CHECK(p->ops->peer_enable(theirs->device));
        }
        p->peer[j] = (char *)(uintptr_t)arenas[j].addr;
        return BRAID_OK;
    }
    BRAID_CHECK(p->ops->ipc_open(&arenas[j].handle, (void **)&p->peer[j]));
    p->opened[j] = 1;
    return BRAID_OK;
}

/* The connections to and from local rank j, once every arena is mapped. */
static void conns_fill(braid_p2p_t *p, int j)
{
    int r = p->ranks[j];
    braid_dconn_t *s = &p->conns[j], *v = &p->conns[p->nlocal + j];
    *s = (braid_dconn_t){ .peer = r, .slots = fifo_of(p, p->peer[j], p->me),
                          .wait = tail_of(p->arena, p->nlocal, j),
                          .post = head_of(p->peer[j], p->me),
                          .recs = recs_of(p, p->peer[j], p->me), .nslots = p->nslots,
                          .slot_size = p->slot_size };
    *v = (braid_dconn_t){ .peer = r, .slots = fifo_of(p, p->arena, j),
                          .wait = head_of(p->arena, j),
                          .post = tail_of(p->peer[j], p->nlocal, p->me),
                          .recs = recs_of(p, p->arena, j), .nslots = p->nslots,
                          .slot_size = p->slot_size };
    p->send[r] = s;
    p->recv[r] = v;
}

/* Unmap the peers' arenas and free this rank's, unless the device is stuck (freeing would
 * wait for work that never ends). */
static void p2p_release(braid_p2p_t *p)
{
    int stuck = braid_device_stuck();
    for (int j = 0; p->peer != NULL && j < p->nlocal; j++)
        if (p->opened[j] && !stuck)
            p->ops->ipc_close(p->peer[j]);
    if (p->arena != NULL && !stuck)
        p->ops->mem_free(p->arena);
    p->ctx->dev_send = p->ctx->dev_recv = NULL;
    free(p->ranks);
    free(p->peer);
    free(p->opened);
    free(p->conns);
    free(p->send);
    free(p->recv);
    free(p);
}

static braid_status_t p2p_alloc(braid_transport_ctx_t *ctx, braid_p2p_t **p_p)
{
    const braid_topo_t *t = ctx->topo;
    braid_p2p_t *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for the device FIFOs' tables");
    p->ctx = ctx;
    p->ops = braid_device();
    p->nlocal = braid_topo_nlocal(t, 0);
    p->me = t->local_rank[ctx->rank];
    p->ranks = calloc((size_t)p->nlocal, sizeof(*p->ranks));
    p->peer = calloc((size_t)p->nlocal, sizeof(*p->peer));
    p->opened = calloc((size_t)p->nlocal, sizeof(*p->opened));
    p->conns = calloc(2 * (size_t)p->nlocal, sizeof(*p->conns));
    p->send = calloc((size_t)ctx->nranks, sizeof(*p->send));
    p->recv = calloc((size_t)ctx->nranks, sizeof(*p->recv));
    *p_p = p;
    if (!p->ranks || !p->peer || !p->opened || !p->conns || !p->send || !p->recv)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for the device FIFOs' tables");
    for (int r = 0; r < ctx->nranks; r++)
        p->ranks[t->local_rank[r]] = r;
    return BRAID_OK;
}

static void why_set(char *why, const char *text)
{
    snprintf(why, P2P_WHY, "%s", text);
}

/* The first rank whose record (of `size` bytes, starting with its int32 ok) says no, with
 * its reason (at why_off); -1 when all said yes. */
static int first_no(const void *recs, size_t size, size_t why_off, int n, const char **why_p)
{
    for (int i = 0; i < n; i++) {
        const char *rec = (const char *)recs + (size_t)i * size;
        if (!*(const int32_t *)rec) {
            *why_p = rec + why_off;
            return i;
        }
    }
    return -1;
}

/* Exchanges 2 and 3: arenas made, then reached. Returns 1 when all ranks have both. */
static braid_status_t p2p_connect(braid_p2p_t *p, const p2p_offer_t *offers, int *ok_p)
{
    braid_transport_ctx_t *ctx = p->ctx;
    p2p_arena_t mine = { 0 }, *arenas = calloc((size_t)ctx->nranks, sizeof(*arenas));
    p2p_reach_t reach = { .ok = 1 }, *reached = calloc((size_t)ctx->nranks, sizeof(*reached));
    braid_status_t st = arenas && reached ? BRAID_OK
                                          : braid_err(BRAID_ERR_NOMEM, "out of memory (p2p)");
    const char *why = NULL;
    if (st == BRAID_OK && arena_make(p, offers[p->me].device, &mine) < 0)
        why_set(mine.why, braid_err_last());
    if (st == BRAID_OK)
        st = ctx->allgather(ctx->bs, &mine, arenas, sizeof(mine));
    int bad = st == BRAID_OK ? first_no(arenas, sizeof(*arenas), offsetof(p2p_arena_t, why),
                                            ctx->nranks, &why) : -1;
    for (int j = 0; st == BRAID_OK && bad < 0 && j < p->nlocal && reach.ok; j++)
        if (arena_map(p, offers, arenas, j) < 0) {
            reach.ok = 0;
            snprintf(reach.why, P2P_WHY, "rank %d cannot map rank %d's: %s", ctx->rank,
                     p->ranks[j], braid_err_last());
        }
    if (st == BRAID_OK && bad < 0)
        st = ctx->allgather(ctx->bs, &reach, reached, sizeof(reach));
    if (st == BRAID_OK && bad < 0 && (bad = first_no(reached, sizeof(*reached),
                                                     offsetof(p2p_reach_t, why), ctx->nranks,
                                                     &why)) < 0) {
        for (int j = 0; j < p->nlocal; j++)
            conns_fill(p, j);
        *ok_p = 1;
    } else if (st == BRAID_OK && ctx->rank == 0) {
        BRAID_INFO(BRAID_SUB_INIT, "p2p: no device FIFOs (rank %d: %s): device calls go "
                   "through host memory on the proxy thread", bad, why);
    }
    free(arenas);
    free(reached);
    return st;
}

static braid_status_t p2p_setup(braid_transport_ctx_t *ctx, void **tp_p)
{
    braid_p2p_t *p = NULL;
    int ok = 0;
    *tp_p = NULL;
    if (!p2p_wanted(ctx))
        return BRAID_OK;
    braid_status_t st = p2p_alloc(ctx, &p);
    p2p_offer_t me = { .slot_size = (uint64_t)braid_param_int(BRAID_P_P2P_SLOT_SIZE),
                       .mem = (uint64_t)braid_param_int(BRAID_P_P2P_MEM),
                       .nslots = (uint32_t)braid_param_int(BRAID_P_P2P_NSLOTS),
                       .device = ctx->device, .pid = (int32_t)getpid(),
                       .proc_key = braid_cma_proc_key() };
    p2p_offer_t *offers = st == BRAID_OK ? calloc((size_t)ctx->nranks, sizeof(*offers)) : NULL;
    if (st == BRAID_OK && offers == NULL)
        st = braid_err(BRAID_ERR_NOMEM, "out of memory for the device FIFOs' tables");
    if (st == BRAID_OK)
        st = ctx->allgather(ctx->bs, &me, offers, sizeof(me));
    if (st == BRAID_OK) {   /* one host: local rank j is communicator rank j */
        p2p_settle(p, &offers[0]);
        st = p2p_connect(p, offers, &ok);
    }
    free(offers);
    if (st == BRAID_OK && ok) {
        ctx->dev_send = p->send;
        ctx->dev_recv = p->recv;
        *tp_p = p;
        BRAID_INFO(BRAID_SUB_P2P, "p2p: device FIFOs to %d local ranks, %u slots of %zu bytes "
                   "(%zu bytes on device %d)", p->nlocal, p->nslots, p->slot_size,
                   p->arena_bytes, ctx->device);
        return BRAID_OK;
    }
    if (p != NULL)
        p2p_release(p);
    return st;
}

static void p2p_teardown(void *tp, braid_comm_state_t state)
{
    (void)state;   /* the shared-memory transport says the state to the host's ranks */
    p2p_release(tp);
}

/* The health of the host's ranks is the shared-memory transport's: nothing to add. */
static void p2p_publish_state(void *tp, braid_comm_state_t state, braid_status_t status)
{
    (void)tp, (void)state, (void)status;
}

static void p2p_publish_progress(void *tp, uint64_t started, uint64_t done)
{
    (void)tp, (void)started, (void)done;
}

static int p2p_peer(void *tp, int r, braid_peer_health_t *h)
{
    (void)tp, (void)r, (void)h;
    return 0;
}

static void p2p_ask(void *tp, int r)
{
    (void)tp, (void)r;
}

const braid_transport_t braid_transport_p2p = {
    .name = "p2p", .setup = p2p_setup, .teardown = p2p_teardown,
    .publish_state = p2p_publish_state, .publish_progress = p2p_publish_progress,
    .peer = p2p_peer, .ask = p2p_ask, .drive = NULL,
};
