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
#include "transports/shm/cma.h"
#include "transports/shm/shm.h"

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
} shm_conn_t;

typedef struct shm_map {
    void *base;
    size_t len;
} shm_map_t;

struct braid_shm {
    char name[96];
    int unlinked;
    int setup_done;         /* every rank mapped every segment */
    size_t fifo_bytes, seg_bytes;
    uint32_t nslots;
    shm_map_t *maps;        /* [nranks]: maps[rank] is our own segment; NULL bases for
                             * the ranks of other hosts */
    braid_pull_t pull;      /* agreed: how ranks read each other's buffers */
    size_t pull_min;        /* agreed: from this many bytes, algorithms do */
};

_Static_assert(sizeof(shm_slot_hdr_t) == SHM_CL, "slot header is one cache line");
_Static_assert(sizeof(braid_shm_ctrl_t) <= SHM_PAGE, "control block fits its page");

/* Rank r's place among this host's ranks (its FIFO's place in every segment of the host),
 * -1 when it is on another host. */
static int shm_local(const braid_comm_t *comm, int r)
{
    const braid_topo_t *t = &comm->topo;
    return t->host_of[r] == t->host_of[comm->rank] ? t->local_rank[r] : -1;
}

static int shm_nlocal(const braid_comm_t *comm)
{
    return braid_topo_nlocal(&comm->topo, comm->topo.host_of[comm->rank]);
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

static braid_status_t shm_send_slot(braid_conn_t *c, size_t len, void **ptr_p, size_t *cap_p)
{
    shm_conn_t *sc = (shm_conn_t *)c;
    if (sc->mine - sc->theirs >= sc->nslots) {
        sc->theirs = atomic_load_explicit(&sc->fifo->tail, memory_order_acquire);
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
    *len_p = h->len;
    *ptr_p = h->len <= SHM_INLINE ? h->data : sc->data + i * c->slot_size;
    *hdr_p = h->msg;
    return BRAID_OK;
}

static braid_status_t shm_recv_release(braid_conn_t *c)
{
    shm_conn_t *sc = (shm_conn_t *)c;
    sc->mine++;
    atomic_store_explicit(&sc->fifo->tail, sc->mine, memory_order_release);
    return BRAID_OK;
}

static void shm_close(braid_conn_t *c)
{
    free(c);
}

static const braid_transport_ops_t shm_ops = {
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
static void seg_name(char *buf, size_t len, const braid_comm_t *comm, int rank)
{
    snprintf(buf, len, "braid-%016llx-%x-%d", (unsigned long long)comm->nonce,
             (unsigned)comm->peers[0].pid, rank);
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
static void seg_unlink_peers(const braid_comm_t *comm)
{
    char name[96], path[4200];
    if (comm->peers == NULL)
        return;
    for (int r = 0; r < comm->nranks; r++) {
        seg_name(name, sizeof(name), comm, r);
        if (r != comm->rank && shm_local(comm, r) >= 0 &&
            seg_path(path, sizeof(path), name) == BRAID_OK)
            unlink(path);
    }
}

static shm_fifo_t *seg_fifo(const braid_comm_t *comm, int owner, int sender)
{
    const braid_shm_t *shm = comm->shm;
    return (shm_fifo_t *)((char *)shm->maps[owner].base + SHM_PAGE +
                          (size_t)shm_local(comm, sender) * shm->fifo_bytes);
}

static braid_status_t conn_make(braid_comm_t *comm, int owner, int sender, int peer,
                                braid_conn_t **conn_p)
{
    braid_shm_t *shm = comm->shm;
    shm_conn_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return braid_err(BRAID_ERR_NOMEM, "shm: out of memory for a connection");
    c->base.ops = &shm_ops;
    c->base.peer = peer;
    c->base.slot_size = comm->slot_size;
    c->fifo = seg_fifo(comm, owner, sender);
    c->hdrs = (shm_slot_hdr_t *)((char *)c->fifo + sizeof(shm_fifo_t));
    c->data = (char *)c->fifo + fifo_hdr_bytes(shm->nslots);
    c->nslots = shm->nslots;
    *conn_p = &c->base;
    return BRAID_OK;
}

braid_shm_ctrl_t *braid_shm_ctrl(const braid_comm_t *comm, int r)
{
    if (comm->shm == NULL || comm->shm->maps == NULL || comm->shm->maps[r].base == NULL)
        return NULL;
    return (braid_shm_ctrl_t *)comm->shm->maps[r].base;
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

static int shm_same_process(const braid_shm_ctrl_t *a, const braid_shm_ctrl_t *b)
{
    return a->pid == b->pid && a->proc_key == b->proc_key;   /* pids repeat across namespaces */
}

static int shm_one_process(const braid_comm_t *comm)
{
    for (int r = 0; r < comm->nranks; r++)
        if (!shm_same_process(braid_shm_ctrl(comm, r), braid_shm_ctrl(comm, comm->rank)))
            return 0;
    return 1;
}

/* Read every peer's control block through CMA and compare with our mapping of it. */
static void shm_cma_probe(const braid_comm_t *comm, shm_cma_vote_t *v)
{
    const braid_shm_ctrl_t *me = braid_shm_ctrl(comm, comm->rank);
    v->bad_peer = -1;
    for (int r = 0; r < comm->nranks && v->bad_peer < 0; r++) {
        const braid_shm_ctrl_t *c = braid_shm_ctrl(comm, r);
        char got[16];
        if (r == comm->rank || shm_same_process(c, me))
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
static braid_status_t shm_cma_try(braid_comm_t *comm, int req)
{
    int n = comm->nranks, bad = -1;
    shm_cma_vote_t *v = calloc((size_t)n, sizeof(*v));
    if (v == NULL)
        return braid_err(BRAID_ERR_NOMEM, "shm: out of memory for %d votes", n);
    braid_cma_allow_peers();
    braid_status_t st = braid_bootstrap_barrier(comm->bs);
    if (st == BRAID_OK) {
        shm_cma_probe(comm, &v[comm->rank]);
        st = braid_bootstrap_allgather(comm->bs, &v[comm->rank], v, sizeof(*v));
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
        comm->shm->pull = BRAID_PULL_CMA;
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

static braid_status_t shm_pull_agree(braid_comm_t *comm)
{
    int n = comm->nranks, req = -1, off = -1, one = 1;
    if (shm_nlocal(comm) < n) {   /* every rank knows: no pulls across hosts */
        comm->shm->pull = BRAID_PULL_NONE;
        return braid_bootstrap_barrier(comm->bs);   /* still the "all mapped" barrier */
    }
    shm_pull_vote_t *v = calloc((size_t)n, sizeof(*v)), *mine;
    if (v == NULL)
        return braid_err(BRAID_ERR_NOMEM, "shm: out of memory for %d votes", n);
    mine = &v[comm->rank];
    mine->min = (uint64_t)braid_param_int(BRAID_P_SHM_CMA_MIN);
    mine->mode = shm_cma_mode();
    mine->one_process = shm_one_process(comm);
    braid_status_t st = braid_bootstrap_allgather(comm->bs, mine, v, sizeof(*v));
    for (int r = 0; r < n && st == BRAID_OK; r++) {
        req = req < 0 && v[r].mode == 1 ? r : req;
        off = off < 0 && v[r].mode == 0 ? r : off;
        one &= v[r].one_process;
    }
    comm->shm->pull = BRAID_PULL_NONE;
    comm->shm->pull_min = (size_t)v[0].min;
    if (st == BRAID_OK && req >= 0 && off >= 0)
        st = braid_err(BRAID_ERR_INVALID, "shm: BRAID_SHM_CMA=1 on rank %d but 0 on rank %d: "
                       "set the same value on every rank", req, off);
    else if (st == BRAID_OK && off < 0 && one)
        comm->shm->pull = BRAID_PULL_LOAD;
    else if (st == BRAID_OK && (req >= 0 || (SHM_CMA_BY_DEFAULT && off < 0)))
        st = shm_cma_try(comm, req);
    free(v);
    return st;
}

braid_pull_t braid_shm_pull(const braid_comm_t *comm, size_t *min_p)
{
    *min_p = comm->shm != NULL ? comm->shm->pull_min : 0;
    return comm->shm != NULL ? comm->shm->pull : BRAID_PULL_NONE;
}

static braid_status_t shm_create_own(braid_comm_t *comm)
{
    braid_shm_t *shm = comm->shm;
    char name[sizeof(shm->name)];
    seg_name(name, sizeof(name), comm, comm->rank);
    BRAID_CHECK(seg_map(name, shm->seg_bytes, 1, &shm->maps[comm->rank]));
    memcpy(shm->name, name, sizeof(name));  /* ours to remove from now on */
    braid_shm_ctrl_t *ctrl = (braid_shm_ctrl_t *)shm->maps[comm->rank].base;
    ctrl->rank = comm->rank;
    ctrl->pid = (int32_t)getpid();
    ctrl->self_addr = (uint64_t)(uintptr_t)ctrl;
    ctrl->proc_key = braid_cma_proc_key();
    atomic_store(&ctrl->state, BRAID_COMM_INITIALIZING);
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

static braid_status_t shm_peer_gone(braid_comm_t *comm, int r, const char *name)
{
    for (int ms = 0; ms < SHM_GONE_WAIT_MS; ms += 5) {
        struct timespec ts = { 0, 5000000 };
        BRAID_CHECK(braid_bootstrap_check(comm->bs));
        nanosleep(&ts, NULL);
    }
    return braid_err(BRAID_ERR_REMOTE, "shm: the segment %s of rank %d (pid %d) is gone before "
                     "setup ended: a rank whose setup failed removed it", name, r,
                     (int)comm->peers[r].pid);
}

static braid_status_t shm_map_peers(braid_comm_t *comm)
{
    braid_shm_t *shm = comm->shm;
    for (int r = 0; r < comm->nranks; r++) {
        if (r == comm->rank || shm_local(comm, r) < 0)
            continue;
        char name[96];
        seg_name(name, sizeof(name), comm, r);
        braid_status_t st = seg_map(name, shm->seg_bytes, 0, &shm->maps[r]);
        if (st == BRAID_ERR_REMOTE)
            return shm_peer_gone(comm, r, name);
        BRAID_CHECK(st);
        if (((braid_shm_ctrl_t *)shm->maps[r].base)->magic != SHM_CTRL_MAGIC)
            return braid_err(BRAID_ERR_REMOTE, "shm: segment %s of rank %d is not initialised",
                             name, r);
    }
    return BRAID_OK;
}

static braid_status_t shm_make_conns(braid_comm_t *comm)
{
    for (int p = 0; p < comm->nranks; p++) {
        if (shm_local(comm, p) < 0)
            continue;
        /* we send into p's segment, FIFO "from us"; we receive in ours, FIFO "from p" */
        BRAID_CHECK(conn_make(comm, p, comm->rank, p, &comm->send_conns[p]));
        BRAID_CHECK(conn_make(comm, comm->rank, p, p, &comm->recv_conns[p]));
    }
    return BRAID_OK;
}

braid_status_t braid_shm_setup(braid_comm_t *comm)
{
    braid_shm_t *shm = calloc(1, sizeof(*shm));
    if (shm == NULL || (shm->maps = calloc((size_t)comm->nranks, sizeof(shm_map_t))) == NULL) {
        free(shm);
        return braid_err(BRAID_ERR_NOMEM, "shm: out of memory for %d peers", comm->nranks);
    }
    comm->shm = shm;
    shm->nslots = comm->peers[0].nslots;
    shm->fifo_bytes = fifo_hdr_bytes(shm->nslots) + (size_t)shm->nslots * comm->slot_size;
    shm->seg_bytes = SHM_PAGE + (size_t)shm_nlocal(comm) * shm->fifo_bytes;
    BRAID_CHECK(shm_create_own(comm));
    braid_proc_setup_pause("shm");   /* its segment made, the others' not mapped yet */
    BRAID_CHECK(braid_bootstrap_barrier(comm->bs));
    BRAID_CHECK(shm_map_peers(comm));
    BRAID_CHECK(shm_pull_agree(comm));
    /* everyone has mapped everyone (they voted after mapping): the names can go, all of
     * them from every rank, so that a rank killed now leaves nothing behind */
    shm->setup_done = 1;
    seg_unlink(shm);
    seg_unlink_peers(comm);
    BRAID_CHECK(shm_make_conns(comm));
    BRAID_INFO(BRAID_SUB_SHM | BRAID_SUB_INIT,
               "shm: %d ranks, %u slots of %zu bytes per peer, %zu-byte segment; single copy "
               "%s (from %zu bytes)", shm_nlocal(comm), shm->nslots, comm->slot_size,
               shm->seg_bytes, shm->pull == BRAID_PULL_LOAD  ? "by loads"
                               : shm->pull == BRAID_PULL_CMA ? "by process_vm_readv"
                                                             : "off", shm->pull_min);
    return BRAID_OK;
}

void braid_shm_teardown(braid_comm_t *comm, braid_comm_state_t state)
{
    braid_shm_t *shm = comm->shm;
    if (shm == NULL)
        return;
    braid_shm_ctrl_t *mine = braid_shm_ctrl(comm, comm->rank);
    if (mine != NULL)
        atomic_store(&mine->state, (int)state);
    for (int p = 0; p < comm->nranks; p++) {
        if (comm->send_conns != NULL) {
            braid_conn_close(comm->send_conns[p]);
            comm->send_conns[p] = NULL;
        }
        if (comm->recv_conns != NULL) {
            braid_conn_close(comm->recv_conns[p]);
            comm->recv_conns[p] = NULL;
        }
    }
    seg_unlink(shm);
    if (!shm->setup_done)
        seg_unlink_peers(comm);
    for (int r = 0; r < comm->nranks; r++)
        if (shm->maps[r].base != NULL)
            munmap(shm->maps[r].base, shm->maps[r].len);
    free(shm->maps);
    free(shm);
    comm->shm = NULL;
}
