/*
 * Shared-memory transport: segments, FIFOs of slots, and the slot protocol.
 *
 * Segment of rank r (local ranks: those of the communicator on this host, in rank order;
 * the ranks of other hosts are the network transport's):
 *
 *   [ control block | FIFO from local rank 0 | ... | FIFO from local rank m-1 ]
 *
 * FIFO: [ tail (receiver) | K slot headers | K slots of S bytes ]
 *
 * A slot header is one cache line: a stamp, the length, the message header and, for
 * messages of up to SHM_INLINE bytes, the data itself. The sender writes the data and the
 * header, then stores the stamp (the message's index + 1) with release order; the receiver
 * polls the stamp of the next slot with acquire order, reads, and stores tail + 1 with
 * release order. A small message thus costs the receiver one cache-line transfer, and a
 * large one that line plus its data. A slot is free while sent - tail < K; the sender
 * caches tail and re-reads it only when the cached value says "full".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"
#include "base/proc.h"
#include "base/tsan.h"
#include "transports/shm/cma.h"
#include "transports/shm/shm.h"

/* Published by each rank in its own segment; read by its peers. */
typedef struct shm_ctrl {
    uint64_t magic;
    int32_t rank;
    int32_t pid;
    _Atomic int state;              /* braid_comm_state_t */
    _Atomic int status;             /* braid_status_t of a failure, else 0 */
    _Atomic uint64_t seq_started;   /* last collective sequence number started */
    _Atomic uint64_t seq_done;      /* last collective sequence number completed */
    uint64_t self_addr;             /* this block's address in its owner's process */
    uint64_t proc_key;              /* braid_cma_proc_key() of its owner */
    _Alignas(64) _Atomic int32_t cpu;   /* where it last waited (its own line: written
                                         * while waiting, read by waiting peers) */
    _Alignas(64) _Atomic uint32_t call_ver; /* `call`'s version: odd while it is written */
    braid_msg_hdr_t call;                   /* the collective it started last */
} shm_ctrl_t;

#define SHM_CTRL_MAGIC 0x62726169647368ull /* "braidsh" */
#define SHM_PAGE 4096u
#define SHM_CL 64u

typedef struct shm_fifo {
    _Atomic uint64_t tail;
    char pad[SHM_CL - sizeof(uint64_t)];
} shm_fifo_t;

#define SHM_INLINE (SHM_CL - 2 * sizeof(uint64_t) - sizeof(braid_msg_hdr_t))

typedef struct shm_slot_hdr {
    _Atomic uint64_t stamp;     /* index + 1 of the message in the slot; stored last */
    uint64_t len;
    braid_msg_hdr_t msg;
    _Alignas(8) char data[SHM_INLINE];   /* a message of up to SHM_INLINE bytes */
} shm_slot_hdr_t;

typedef struct shm_conn {
    braid_conn_t base;
    shm_fifo_t *fifo;
    shm_slot_hdr_t *hdrs;
    char *data;
    uint32_t nslots;
    uint64_t mine;          /* messages sent (sender) or released (receiver) */
    uint64_t theirs;        /* sender: cached tail */
    char *tsan_fifo;        /* the FIFO in its owner's mapping, where the owner is a thread
                             * of this process and ThreadSanitizer watches: the keys of its
                             * words (src/base/tsan.h); else NULL */
} shm_conn_t;

typedef struct shm_map {
    void *base;
    size_t len;
} shm_map_t;

typedef struct braid_shm {
    braid_transport_ctx_t *ctx;
    char name[96];
    int unlinked;
    int setup_done;         /* every rank mapped every segment */
    size_t fifo_bytes, seg_bytes;
    uint32_t nslots;
    shm_map_t *maps;        /* [nranks]: maps[rank] is our own segment; NULL bases for
                             * the ranks of other hosts */
    uint8_t *pid_visible;   /* [nranks]: a local peer's pid can be watched via /proc (not
                             * from another pid namespace) */
} braid_shm_t;

_Static_assert(sizeof(shm_slot_hdr_t) == SHM_CL, "slot header is one cache line");
_Static_assert(sizeof(shm_ctrl_t) <= SHM_PAGE, "control block fits its page");

/* Rank r's place among this host's ranks (its FIFO's place in every segment of the host),
 * -1 when it is on another host. */
static int shm_local(const braid_transport_ctx_t *ctx, int r)
{
    const braid_topo_t *t = ctx->topo;
    return t->host_of[r] == t->host_of[ctx->rank] ? t->local_rank[r] : -1;
}

static int shm_nlocal(const braid_transport_ctx_t *ctx)
{
    return braid_topo_nlocal(ctx->topo, ctx->topo->host_of[ctx->rank]);
}

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

static size_t fifo_hdr_bytes(uint32_t nslots)
{
    return align_up(sizeof(shm_fifo_t) + (size_t)nslots * sizeof(shm_slot_hdr_t), SHM_PAGE);
}

/* ---- the slot protocol -------------------------------------------------------------- */

/* ThreadSanitizer's key for the word at p of this connection's FIFO (NULL: none). */
static const void *shm_key(const shm_conn_t *sc, const volatile void *p)
{
    if (sc->tsan_fifo == NULL)
        return NULL;
    return sc->tsan_fifo + ((const volatile char *)p - (const char *)sc->fifo);
}

static braid_status_t shm_send_slot(braid_conn_t *c, size_t len, void **ptr_p, size_t *cap_p)
{
    shm_conn_t *sc = (shm_conn_t *)c;
    if (sc->mine - sc->theirs >= sc->nslots) {
        sc->theirs = atomic_load_explicit(&sc->fifo->tail, memory_order_acquire);
        braid_tsan_acquire(shm_key(sc, &sc->fifo->tail));
        if (sc->mine - sc->theirs >= sc->nslots)
            return BRAID_INPROGRESS;
    }
    uint64_t i = sc->mine % sc->nslots;
    if (len <= SHM_INLINE) {
        *ptr_p = sc->hdrs[i].data;
        *cap_p = SHM_INLINE;
    } else {
        *ptr_p = sc->data + i * c->slot_size;
        *cap_p = c->slot_size;
    }
    return BRAID_OK;
}

static braid_status_t shm_send_commit(braid_conn_t *c, size_t len, const braid_msg_hdr_t *hdr)
{
    shm_conn_t *sc = (shm_conn_t *)c;
    shm_slot_hdr_t *h = &sc->hdrs[sc->mine % sc->nslots];
    h->len = len;
    h->msg = *hdr;
    sc->mine++;
    braid_tsan_release(shm_key(sc, &h->stamp));
    atomic_store_explicit(&h->stamp, sc->mine, memory_order_release);
    return BRAID_OK;
}

static braid_status_t shm_recv_slot(braid_conn_t *c, const void **ptr_p, size_t *len_p,
                                    braid_msg_hdr_t *hdr_p)
{
    shm_conn_t *sc = (shm_conn_t *)c;
    uint64_t i = sc->mine % sc->nslots;
    const shm_slot_hdr_t *h = &sc->hdrs[i];
    if (atomic_load_explicit(&h->stamp, memory_order_acquire) != sc->mine + 1)
        return BRAID_INPROGRESS;
    braid_tsan_acquire(shm_key(sc, &h->stamp));
    *len_p = h->len;
    *ptr_p = h->len <= SHM_INLINE ? h->data : sc->data + i * c->slot_size;
    *hdr_p = h->msg;
    return BRAID_OK;
}

static braid_status_t shm_recv_release(braid_conn_t *c)
{
    shm_conn_t *sc = (shm_conn_t *)c;
    sc->mine++;
    braid_tsan_release(shm_key(sc, &sc->fifo->tail));
    atomic_store_explicit(&sc->fifo->tail, sc->mine, memory_order_release);
    return BRAID_OK;
}

static void shm_close(braid_conn_t *c)
{
    free(c);
}

static const braid_conn_ops_t shm_ops = {
    .name = "shm",
    .send_slot = shm_send_slot,
    .send_commit = shm_send_commit,
    .recv_slot = shm_recv_slot,
    .recv_release = shm_recv_release,
    .close = shm_close,
};

/* ---- segments ----------------------------------------------------------------------- */

/* The nonce names the job (and child); rank 0's pid tells apart two runs of a job whose
 * nonce is fixed by NCCL_COMM_ID, in case a crashed run left a name behind. */
static void seg_name(char *buf, size_t len, const braid_transport_ctx_t *ctx, int rank)
{
    snprintf(buf, len, "braid-%016llx-%x-%d", (unsigned long long)ctx->nonce,
             (unsigned)ctx->peers[0].pid, rank);
}

static braid_status_t seg_path(char *buf, size_t len, const char *name)
{
    const char *dir = braid_param_str(BRAID_P_SHM_DIR);
    if ((size_t)snprintf(buf, len, "%s/%s", dir[0] ? dir : "/dev/shm", name) >= len)
        return braid_err(BRAID_ERR_INVALID, "shared-memory directory '%s' is too long", dir);
    return BRAID_OK;
}

static braid_status_t seg_map(const char *name, size_t len, int create, shm_map_t *map)
{
    char path[4200];
    BRAID_CHECK(seg_path(path, sizeof(path), name));
    int fd = open(path, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
    if (fd < 0 && !create && errno == ENOENT)
        return BRAID_ERR_REMOTE;   /* quiet: the caller knows whose it was */
    if (fd < 0)
        return braid_err(BRAID_ERR_SYSTEM, "shm: cannot %s segment %s: %s",
                         create ? "create" : "open", path, strerror(errno));
    if (create && ftruncate(fd, (off_t)len) != 0) {
        int e = errno;
        close(fd);
        unlink(path);
        return braid_err(BRAID_ERR_SYSTEM, "shm: cannot size segment %s to %zu bytes: %s "
                         "(is %s full? set BRAID_SHM_SLOT_SIZE lower)", path, len, strerror(e),
                         braid_param_str(BRAID_P_SHM_DIR));
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        if (create)
            unlink(path);
        return braid_err(BRAID_ERR_SYSTEM, "shm: cannot map segment %s (%zu bytes): %s", path,
                         len, strerror(e));
    }
    map->base = p;
    map->len = len;
    return BRAID_OK;
}

static void seg_unlink(braid_shm_t *shm)
{
    char path[4200];
    if (shm->unlinked || shm->name[0] == '\0' ||
        seg_path(path, sizeof(path), shm->name) != BRAID_OK)
        return;
    if (unlink(path) != 0 && errno != ENOENT)
        BRAID_WARN("shm: cannot remove segment %s: %s", path, strerror(errno));
    shm->unlinked = 1;
}

/* Remove every other rank's name: once all have mapped all (a rank may die before it
 * removes its own), and when setup failed (a dead rank cannot remove its own). Removing a
 * name that is already gone is harmless. */
static void seg_unlink_peers(const braid_transport_ctx_t *ctx)
{
    char name[96], path[4200];
    for (int r = 0; r < ctx->nranks; r++) {
        seg_name(name, sizeof(name), ctx, r);
        if (r != ctx->rank && shm_local(ctx, r) >= 0 &&
            seg_path(path, sizeof(path), name) == BRAID_OK)
            unlink(path);
    }
}

static shm_fifo_t *seg_fifo(const braid_shm_t *shm, int owner, int sender)
{
    return (shm_fifo_t *)((char *)shm->maps[owner].base + SHM_PAGE +
                          (size_t)shm_local(shm->ctx, sender) * shm->fifo_bytes);
}

static braid_status_t conn_make(braid_shm_t *shm, int owner, int sender, int peer,
                                braid_conn_t **conn_p)
{
    shm_conn_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return braid_err(BRAID_ERR_NOMEM, "shm: out of memory for a connection");
    c->base.ops = &shm_ops;
    c->base.peer = peer;
    c->base.slot_size = shm->ctx->slot_size;
    c->fifo = seg_fifo(shm, owner, sender);
    c->hdrs = (shm_slot_hdr_t *)((char *)c->fifo + sizeof(shm_fifo_t));
    c->data = (char *)c->fifo + fifo_hdr_bytes(shm->nslots);
    c->nslots = shm->nslots;
    *conn_p = &c->base;
    return BRAID_OK;
}

/* Control block of rank r (this rank's own for r == ctx->rank); NULL for other hosts. */
static shm_ctrl_t *shm_ctrl(const braid_shm_t *shm, int r)
{
    return (shm_ctrl_t *)shm->maps[r].base;
}

/* ---- single copy: may ranks read each other's buffers? ------------------------------ */

/* BRAID_SHM_CMA: -1 auto, 0 never, 1 between processes too. */
static int shm_cma_mode(void)
{
    const char *v = braid_param_str(BRAID_P_SHM_CMA);
    int64_t b;
    if (strcmp(v, "auto") == 0 || v[0] == '\0')
        return -1;
    if (braid_param_parse_bool(v, &b) == BRAID_OK)
        return (int)b;
    BRAID_WARN("BRAID_SHM_CMA='%s' is not auto, 1 or 0: using auto", v);
    return -1;
}

typedef struct shm_pull_vote {
    uint64_t min;           /* this rank's BRAID_SHM_CMA_MIN */
    int32_t mode;           /* its shm_cma_mode() */
    int32_t one_process;    /* every rank is a thread of its process */
} shm_pull_vote_t;

typedef struct shm_cma_vote {
    int32_t bad_peer;       /* first peer this rank could not read, or -1 */
    int32_t err;            /* errno of that read (0: it read something else) */
} shm_cma_vote_t;

static int shm_same_process(const shm_ctrl_t *a, const shm_ctrl_t *b)
{
    return a->pid == b->pid && a->proc_key == b->proc_key;   /* pids repeat across namespaces */
}

static int shm_one_process(const braid_shm_t *shm)
{
    for (int r = 0; r < shm->ctx->nranks; r++)
        if (!shm_same_process(shm_ctrl(shm, r), shm_ctrl(shm, shm->ctx->rank)))
            return 0;
    return 1;
}

/* Read every peer's control block through CMA and compare with our mapping of it. */
static void shm_cma_probe(const braid_shm_t *shm, shm_cma_vote_t *v)
{
    const shm_ctrl_t *me = shm_ctrl(shm, shm->ctx->rank);
    v->bad_peer = -1;
    for (int r = 0; r < shm->ctx->nranks && v->bad_peer < 0; r++) {
        const shm_ctrl_t *c = shm_ctrl(shm, r);
        char got[16];
        if (r == shm->ctx->rank || shm_same_process(c, me))
            continue;
        v->err = braid_cma_read(c->pid, got, c->self_addr, sizeof(got));
        if (v->err != 0 || memcmp(got, c, sizeof(got)) != 0)
            v->bad_peer = r;
    }
}

/*
 * Single copy between processes: every process lets its peers read it, then every rank tries
 * to read every other, and all agree. Where one cannot (containers, seccomp, Yama, another
 * user), messages go through the FIFOs; if rank `req` asked for single copy (>= 0), init
 * fails instead, naming the ranks.
 */
static braid_status_t shm_cma_try(braid_shm_t *shm, int req)
{
    braid_transport_ctx_t *ctx = shm->ctx;
    int n = ctx->nranks, bad = -1;
    shm_cma_vote_t *v = calloc((size_t)n, sizeof(*v));
    if (v == NULL)
        return braid_err(BRAID_ERR_NOMEM, "shm: out of memory for %d votes", n);
    braid_cma_allow_peers();
    braid_status_t st = ctx->barrier(ctx->bs);
    if (st == BRAID_OK) {
        shm_cma_probe(shm, &v[ctx->rank]);
        st = ctx->allgather(ctx->bs, &v[ctx->rank], v, sizeof(*v));
    }
    for (int r = 0; r < n && st == BRAID_OK && bad < 0; r++)
        bad = v[r].bad_peer >= 0 ? r : -1;
    const char *why = bad < 0 ? "" : v[bad].err ? strerror(v[bad].err)
                                                : "it read something else: another pid namespace?";
    if (st == BRAID_OK && bad >= 0 && req >= 0)
        st = braid_err(BRAID_ERR_UNSUPPORTED, "shm: BRAID_SHM_CMA=1 on rank %d, but rank %d "
                       "cannot read the memory of rank %d with process_vm_readv (%s): unset "
                       "BRAID_SHM_CMA to pass messages through shared memory", req, bad,
                       v[bad].bad_peer, why);
    else if (st == BRAID_OK && bad >= 0)
        BRAID_INFO(BRAID_SUB_SHM | BRAID_SUB_INIT, "shm: rank %d cannot read rank %d with "
                   "process_vm_readv (%s): messages go through shared memory", bad,
                   v[bad].bad_peer, why);
    else if (st == BRAID_OK)
        ctx->pull = BRAID_PULL_CMA;
    free(v);
    return st;
}

/*
 * Every rank votes; all agree on the outcome (the vote is also the barrier after which every
 * rank has mapped every segment). Ranks that are threads of one process read each other's
 * buffers with plain loads, which saves a copy. Between processes a pull is a copy by the
 * kernel (rep movsb, page by page): measured on a 2-core VM it is no faster than a FIFO
 * slot, whose traffic stays in cache, and slower in place, so by default it is used only
 * when asked for (BRAID_SHM_CMA=1); SHM_CMA_BY_DEFAULT makes auto try it too, falling back
 * to the FIFOs where the kernel refuses.
 */
#define SHM_CMA_BY_DEFAULT 0

static braid_status_t shm_pull_agree(braid_shm_t *shm)
{
    braid_transport_ctx_t *ctx = shm->ctx;
    int n = ctx->nranks, req = -1, off = -1, one = 1;
    if (shm_nlocal(ctx) < n) {   /* every rank knows: no pulls across hosts */
        ctx->pull = BRAID_PULL_NONE;
        return ctx->barrier(ctx->bs);   /* still the "all mapped" barrier */
    }
    shm_pull_vote_t *v = calloc((size_t)n, sizeof(*v)), *mine;
    if (v == NULL)
        return braid_err(BRAID_ERR_NOMEM, "shm: out of memory for %d votes", n);
    mine = &v[ctx->rank];
    mine->min = (uint64_t)braid_param_int(BRAID_P_SHM_CMA_MIN);
    mine->mode = shm_cma_mode();
    mine->one_process = shm_one_process(shm);
    braid_status_t st = ctx->allgather(ctx->bs, mine, v, sizeof(*v));
    for (int r = 0; r < n && st == BRAID_OK; r++) {
        req = req < 0 && v[r].mode == 1 ? r : req;
        off = off < 0 && v[r].mode == 0 ? r : off;
        one &= v[r].one_process;
    }
    ctx->pull = BRAID_PULL_NONE;
    ctx->pull_min = (size_t)v[0].min;
    if (st == BRAID_OK && req >= 0 && off >= 0)
        st = braid_err(BRAID_ERR_INVALID, "shm: BRAID_SHM_CMA=1 on rank %d but 0 on rank %d: "
                       "set the same value on every rank", req, off);
    else if (st == BRAID_OK && off < 0 && one)
        ctx->pull = BRAID_PULL_LOAD;
    else if (st == BRAID_OK && (req >= 0 || (SHM_CMA_BY_DEFAULT && off < 0)))
        st = shm_cma_try(shm, req);
    free(v);
    return st;
}

/* A segment mapped for a GPU's kernels too, where one is in use (the slots of device
 * calls are read and written by kernels). */
static void seg_device_map(const braid_transport_ctx_t *ctx, const shm_map_t *map)
{
    if (ctx->device_map != NULL)
        ctx->device_map(ctx->device, map->base, map->len);
}

static braid_status_t shm_create_own(braid_shm_t *shm)
{
    int me = shm->ctx->rank;
    char name[sizeof(shm->name)];
    seg_name(name, sizeof(name), shm->ctx, me);
    BRAID_CHECK(seg_map(name, shm->seg_bytes, 1, &shm->maps[me]));
    seg_device_map(shm->ctx, &shm->maps[me]);
    memcpy(shm->name, name, sizeof(name));  /* ours to remove from now on */
    shm_ctrl_t *ctrl = shm_ctrl(shm, me);
    ctrl->rank = me;
    ctrl->pid = (int32_t)getpid();
    ctrl->self_addr = (uint64_t)(uintptr_t)ctrl;
    ctrl->proc_key = braid_cma_proc_key();
    atomic_store(&ctrl->state, BRAID_COMM_INITIALIZING);
    atomic_store(&ctrl->cpu, -1);
    ctrl->magic = SHM_CTRL_MAGIC;  /* peers look after the bootstrap barrier */
    return BRAID_OK;
}

/*
 * Rank r's segment is gone before setup ended. Names go only after every rank has mapped
 * every segment, or when a rank's setup fails (it removes them all, since a dead rank
 * cannot remove its own): so a rank failed, and the notice of it is on its way through
 * the bootstrap. Wait for it a little, to name the rank that failed.
 */
#define SHM_GONE_WAIT_MS 2000

static braid_status_t shm_peer_gone(const braid_transport_ctx_t *ctx, int r, const char *name)
{
    for (int ms = 0; ms < SHM_GONE_WAIT_MS; ms += 5) {
        struct timespec ts = { 0, 5000000 };
        BRAID_CHECK(ctx->check(ctx->bs));
        nanosleep(&ts, NULL);
    }
    return braid_err(BRAID_ERR_REMOTE, "shm: the segment %s of rank %d (pid %d) is gone before "
                     "setup ended: a rank whose setup failed removed it", name, r,
                     (int)ctx->peers[r].pid);
}

static braid_status_t shm_map_peers(braid_shm_t *shm)
{
    const braid_transport_ctx_t *ctx = shm->ctx;
    for (int r = 0; r < ctx->nranks; r++) {
        if (r == ctx->rank || shm_local(ctx, r) < 0)
            continue;
        char name[96];
        seg_name(name, sizeof(name), ctx, r);
        braid_status_t st = seg_map(name, shm->seg_bytes, 0, &shm->maps[r]);
        if (st == BRAID_ERR_REMOTE)
            return shm_peer_gone(ctx, r, name);
        BRAID_CHECK(st);
        seg_device_map(ctx, &shm->maps[r]);
        /* a peer in another pid namespace cannot be watched through /proc */
        shm->pid_visible[r] = braid_proc_alive(ctx->peers[r].pid, ctx->peers[r].starttime) ==
                              BRAID_PROC_ALIVE;
        if (shm_ctrl(shm, r)->magic != SHM_CTRL_MAGIC)
            return braid_err(BRAID_ERR_REMOTE, "shm: segment %s of rank %d is not initialised",
                             name, r);
    }
    return BRAID_OK;
}

/* Where the owner of the FIFO is a thread of this process, its mapping of the FIFO names
 * the FIFO's words for ThreadSanitizer on both sides (ours of it is another address). */
static void conn_tsan_keys(const braid_shm_t *shm, int owner, braid_conn_t *conn)
{
    shm_conn_t *c = (shm_conn_t *)conn;
    const shm_ctrl_t *oc = shm_ctrl(shm, owner);
    if (BRAID_TSAN && shm_same_process(oc, shm_ctrl(shm, shm->ctx->rank)))
        c->tsan_fifo = (char *)(uintptr_t)oc->self_addr + ((char *)c->fifo - (char *)oc);
}

static braid_status_t shm_make_conns(braid_shm_t *shm)
{
    braid_transport_ctx_t *ctx = shm->ctx;
    for (int p = 0; p < ctx->nranks; p++) {
        if (shm_local(ctx, p) < 0)
            continue;
        /* we send into p's segment, FIFO "from us"; we receive in ours, FIFO "from p" */
        BRAID_CHECK(conn_make(shm, p, ctx->rank, p, &ctx->send_conns[p]));
        conn_tsan_keys(shm, p, ctx->send_conns[p]);
        BRAID_CHECK(conn_make(shm, ctx->rank, p, p, &ctx->recv_conns[p]));
        conn_tsan_keys(shm, ctx->rank, ctx->recv_conns[p]);
    }
    return BRAID_OK;
}

static void shm_free(braid_shm_t *shm)
{
    const braid_transport_ctx_t *ctx = shm->ctx;
    for (int p = 0; p < ctx->nranks; p++) {
        if (shm_local(ctx, p) < 0)
            continue;
        braid_conn_close(ctx->send_conns[p]);
        ctx->send_conns[p] = NULL;
        braid_conn_close(ctx->recv_conns[p]);
        ctx->recv_conns[p] = NULL;
    }
    seg_unlink(shm);
    if (!shm->setup_done)
        seg_unlink_peers(ctx);
    for (int r = 0; r < ctx->nranks; r++) {
        if (shm->maps[r].base == NULL)
            continue;
        if (ctx->device_unmap != NULL)
            ctx->device_unmap(shm->maps[r].base);
        munmap(shm->maps[r].base, shm->maps[r].len);
    }
    free(shm->maps);
    free(shm->pid_visible);
    free(shm);
}

static braid_status_t shm_setup_body(braid_shm_t *shm)
{
    braid_transport_ctx_t *ctx = shm->ctx;
    shm->nslots = ctx->nslots;
    shm->fifo_bytes = fifo_hdr_bytes(shm->nslots) + (size_t)shm->nslots * ctx->slot_size;
    shm->seg_bytes = SHM_PAGE + (size_t)shm_nlocal(ctx) * shm->fifo_bytes;
    BRAID_CHECK(shm_create_own(shm));
    braid_proc_setup_pause("shm");   /* its segment made, the others' not mapped yet */
    BRAID_CHECK(ctx->barrier(ctx->bs));
    BRAID_CHECK(shm_map_peers(shm));
    BRAID_CHECK(shm_pull_agree(shm));
    /* everyone has mapped everyone (they voted after mapping): the names can go, all of
     * them from every rank, so that a rank killed now leaves nothing behind */
    shm->setup_done = 1;
    seg_unlink(shm);
    seg_unlink_peers(ctx);
    BRAID_CHECK(shm_make_conns(shm));
    BRAID_INFO(BRAID_SUB_SHM | BRAID_SUB_INIT,
               "shm: %d ranks, %u slots of %zu bytes per peer, %zu-byte segment; single copy "
               "%s (from %zu bytes)", shm_nlocal(ctx), shm->nslots, ctx->slot_size,
               shm->seg_bytes, ctx->pull == BRAID_PULL_LOAD  ? "by loads"
                               : ctx->pull == BRAID_PULL_CMA ? "by process_vm_readv"
                                                             : "off", ctx->pull_min);
    return BRAID_OK;
}

static braid_status_t shm_setup(braid_transport_ctx_t *ctx, void **tp_p)
{
    braid_shm_t *shm = calloc(1, sizeof(*shm));
    shm_map_t *maps = calloc((size_t)ctx->nranks, sizeof(*maps));
    uint8_t *pid_visible = calloc((size_t)ctx->nranks, 1);
    if (shm == NULL || maps == NULL || pid_visible == NULL) {
        free(shm);
        free(maps);
        free(pid_visible);
        return braid_err(BRAID_ERR_NOMEM, "shm: out of memory for %d peers", ctx->nranks);
    }
    shm->maps = maps;
    shm->pid_visible = pid_visible;
    shm->ctx = ctx;
    /* published at once: a failed setup is torn down like a finished one, names removed */
    *tp_p = shm;
    return shm_setup_body(shm);
}

static void shm_teardown(void *tp, braid_comm_state_t state)
{
    braid_shm_t *shm = tp;
    shm_ctrl_t *mine = shm_ctrl(shm, shm->ctx->rank);
    if (mine != NULL)
        atomic_store(&mine->state, (int)state);
    shm_free(shm);
}

/* ---- peer health: the control blocks ---------------------------------------------------- */

static void shm_publish_state(void *tp, braid_comm_state_t state, braid_status_t status)
{
    braid_shm_t *shm = tp;
    shm_ctrl_t *mine = shm_ctrl(shm, shm->ctx->rank);
    if (mine == NULL)
        return;
    if (state == BRAID_COMM_ERROR)
        atomic_store(&mine->status, (int)status);
    atomic_store(&mine->state, (int)state);
}

static void shm_publish_progress(void *tp, uint64_t started, uint64_t done)
{
    braid_shm_t *shm = tp;
    shm_ctrl_t *mine = shm_ctrl(shm, shm->ctx->rank);
    if (mine == NULL)
        return;
    if (started)
        atomic_store_explicit(&mine->seq_started, started, memory_order_release);
    if (done)
        atomic_store_explicit(&mine->seq_done, done, memory_order_release);
}

static int shm_peer(void *tp, int r, braid_peer_health_t *h)
{
    braid_shm_t *shm = tp;
    const braid_transport_ctx_t *ctx = shm->ctx;
    shm_ctrl_t *ctrl = shm_ctrl(shm, r);
    if (ctrl == NULL)
        return 0;
    h->state = atomic_load(&ctrl->state);
    h->known = 1;
    h->seq_started = atomic_load_explicit(&ctrl->seq_started, memory_order_acquire);
    h->seq_done = atomic_load_explicit(&ctrl->seq_done, memory_order_acquire);
    h->gone = 0;
    h->why = NULL;
    if (r != ctx->rank && shm->pid_visible[r] &&
        braid_proc_alive(ctx->peers[r].pid, ctx->peers[r].starttime) == BRAID_PROC_DEAD) {
        const char *word = braid_peer_state_word(h->state);   /* say why, if it said */
        h->gone = word != NULL ? 2 : 1;
        h->why = word != NULL ? word : "exited or was killed";
    }
    return 1;
}

static void shm_publish_cpu(void *tp, int cpu)
{
    braid_shm_t *shm = tp;
    shm_ctrl_t *mine = shm_ctrl(shm, shm->ctx->rank);
    if (mine != NULL && atomic_load_explicit(&mine->cpu, memory_order_relaxed) != cpu)
        atomic_store_explicit(&mine->cpu, cpu, memory_order_relaxed);
}

/* A seqlock: the owner bumps call_ver to odd, writes, bumps it to even; a reader takes a
 * copy only between two equal even readings. */
static void shm_publish_call(void *tp, const braid_msg_hdr_t *hdr)
{
    braid_shm_t *shm = tp;
    shm_ctrl_t *mine = shm_ctrl(shm, shm->ctx->rank);
    if (mine == NULL)
        return;
    uint32_t v = atomic_load_explicit(&mine->call_ver, memory_order_relaxed);
    atomic_store_explicit(&mine->call_ver, v + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    mine->call = *hdr;
    atomic_store_explicit(&mine->call_ver, v + 2, memory_order_release);
}

static int shm_peer_call(void *tp, int r, braid_msg_hdr_t *hdr_p)
{
    shm_ctrl_t *ctrl = shm_ctrl(tp, r);
    if (ctrl == NULL)
        return 0;
    uint32_t v = atomic_load_explicit(&ctrl->call_ver, memory_order_acquire);
    if (v == 0 || (v & 1))
        return 0;
    *hdr_p = ctrl->call;
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&ctrl->call_ver, memory_order_relaxed) == v;
}

static int shm_peer_cpu(void *tp, int r)
{
    shm_ctrl_t *ctrl = shm_ctrl(tp, r);
    return ctrl != NULL ? atomic_load_explicit(&ctrl->cpu, memory_order_relaxed) : -1;
}

/* A local peer's progress is always in its control block: nothing to ask. */
static void shm_ask(void *tp, int r)
{
    (void)tp;
    (void)r;
}

const braid_transport_t braid_transport_shm = {
    .name = "shm",
    .setup = shm_setup,
    .teardown = shm_teardown,
    .publish_state = shm_publish_state,
    .publish_progress = shm_publish_progress,
    .peer = shm_peer,
    .ask = shm_ask,
    .drive = NULL,          /* a commit is delivery */
    .publish_cpu = shm_publish_cpu,
    .peer_cpu = shm_peer_cpu,
    .publish_call = shm_publish_call,
    .peer_call = shm_peer_call,
};
