/*
 * Shared-memory transport: segments, FIFOs of slots, and the slot protocol.
 *
 * Segment of rank r:
 *
 *   [ control block | FIFO from rank 0 | FIFO from rank 1 | ... | FIFO from rank n-1 ]
 *
 * FIFO: [ head (sender) | tail (receiver) | K slot headers | K slots of S bytes ]
 *
 * The sender owns `head`, the receiver owns `tail`, each on its own cache line. A slot is
 * free while head - tail < K. The sender writes the data and the slot header, then stores
 * head + 1 with release order; the receiver loads head with acquire order, reads, and
 * stores tail + 1 with release order. Each side caches the other's counter and re-reads it
 * only when the cached value says "full" or "empty".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/param.h"
#include "transports/shm/shm.h"

#define SHM_CTRL_MAGIC 0x62726169647368ull /* "braidsh" */
#define SHM_PAGE 4096u
#define SHM_CL 64u

typedef struct shm_fifo {
    _Atomic uint64_t head;
    char pad0[SHM_CL - sizeof(uint64_t)];
    _Atomic uint64_t tail;
    char pad1[SHM_CL - sizeof(uint64_t)];
} shm_fifo_t;

typedef struct shm_slot_hdr {
    uint64_t len;
    braid_msg_hdr_t msg;
    char pad[SHM_CL - sizeof(uint64_t) - sizeof(braid_msg_hdr_t)];
} shm_slot_hdr_t;

typedef struct shm_conn {
    braid_conn_t base;
    shm_fifo_t *fifo;
    shm_slot_hdr_t *hdrs;
    char *data;
    uint32_t nslots;
    uint64_t mine;          /* sender: head; receiver: tail */
    uint64_t theirs;        /* cached counter of the other side */
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
    shm_map_t *maps;        /* [nranks]: maps[rank] is our own segment */
};

_Static_assert(sizeof(shm_slot_hdr_t) == SHM_CL, "slot header is one cache line");
_Static_assert(sizeof(braid_shm_ctrl_t) <= SHM_PAGE, "control block fits its page");

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

static size_t fifo_hdr_bytes(uint32_t nslots)
{
    return align_up(sizeof(shm_fifo_t) + (size_t)nslots * sizeof(shm_slot_hdr_t), SHM_PAGE);
}

/* ---- the slot protocol -------------------------------------------------------------- */

static braid_status_t shm_send_slot(braid_conn_t *c, void **ptr_p, size_t *cap_p)
{
    shm_conn_t *sc = (shm_conn_t *)c;
    if (sc->mine - sc->theirs >= sc->nslots) {
        sc->theirs = atomic_load_explicit(&sc->fifo->tail, memory_order_acquire);
        if (sc->mine - sc->theirs >= sc->nslots)
            return BRAID_INPROGRESS;
    }
    *ptr_p = sc->data + (sc->mine % sc->nslots) * c->slot_size;
    *cap_p = c->slot_size;
    return BRAID_OK;
}

static braid_status_t shm_send_commit(braid_conn_t *c, size_t len, const braid_msg_hdr_t *hdr)
{
    shm_conn_t *sc = (shm_conn_t *)c;
    shm_slot_hdr_t *h = &sc->hdrs[sc->mine % sc->nslots];
    h->len = len;
    h->msg = *hdr;
    sc->mine++;
    atomic_store_explicit(&sc->fifo->head, sc->mine, memory_order_release);
    return BRAID_OK;
}

static braid_status_t shm_recv_slot(braid_conn_t *c, const void **ptr_p, size_t *len_p,
                                    braid_msg_hdr_t *hdr_p)
{
    shm_conn_t *sc = (shm_conn_t *)c;
    if (sc->theirs == sc->mine) {
        sc->theirs = atomic_load_explicit(&sc->fifo->head, memory_order_acquire);
        if (sc->theirs == sc->mine)
            return BRAID_INPROGRESS;
    }
    const shm_slot_hdr_t *h = &sc->hdrs[sc->mine % sc->nslots];
    *ptr_p = sc->data + (sc->mine % sc->nslots) * c->slot_size;
    *len_p = h->len;
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

/* Setup failed (a rank died or gave up before all names were unlinked): remove every
 * rank's name, since a dead rank cannot remove its own. */
static void seg_unlink_peers(const braid_comm_t *comm)
{
    char name[96], path[4200];
    if (comm->peers == NULL)
        return;
    for (int r = 0; r < comm->nranks; r++) {
        seg_name(name, sizeof(name), comm, r);
        if (r != comm->rank && seg_path(path, sizeof(path), name) == BRAID_OK)
            unlink(path);
    }
}

static shm_fifo_t *seg_fifo(const braid_shm_t *shm, int owner, int sender)
{
    return (shm_fifo_t *)((char *)shm->maps[owner].base + SHM_PAGE +
                          (size_t)sender * shm->fifo_bytes);
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
    c->fifo = seg_fifo(shm, owner, sender);
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

static braid_status_t shm_check_local(const braid_comm_t *comm)
{
    const braid_peer_info_t *me = &comm->peers[comm->rank];
    for (int r = 0; r < comm->nranks; r++) {
        if (comm->peers[r].host_id != me->host_id)
            return braid_err(BRAID_ERR_UNSUPPORTED,
                             "rank %d is on host %s, this rank %d on host %s: this braid build "
                             "connects ranks of one host only (network transports are not "
                             "available yet)", r, comm->peers[r].hostname, comm->rank,
                             me->hostname);
    }
    return BRAID_OK;
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
    atomic_store(&ctrl->state, BRAID_COMM_INITIALIZING);
    ctrl->magic = SHM_CTRL_MAGIC;  /* peers look after the bootstrap barrier */
    return BRAID_OK;
}

static braid_status_t shm_map_peers(braid_comm_t *comm)
{
    braid_shm_t *shm = comm->shm;
    for (int r = 0; r < comm->nranks; r++) {
        if (r == comm->rank)
            continue;
        char name[96];
        seg_name(name, sizeof(name), comm, r);
        BRAID_CHECK(seg_map(name, shm->seg_bytes, 0, &shm->maps[r]));
        if (((braid_shm_ctrl_t *)shm->maps[r].base)->magic != SHM_CTRL_MAGIC)
            return braid_err(BRAID_ERR_REMOTE, "shm: segment %s of rank %d is not initialised",
                             name, r);
    }
    return BRAID_OK;
}

static braid_status_t shm_make_conns(braid_comm_t *comm)
{
    for (int p = 0; p < comm->nranks; p++) {
        /* we send into p's segment, FIFO "from us"; we receive in ours, FIFO "from p" */
        BRAID_CHECK(conn_make(comm, p, comm->rank, p, &comm->send_conns[p]));
        BRAID_CHECK(conn_make(comm, comm->rank, p, p, &comm->recv_conns[p]));
    }
    return BRAID_OK;
}

braid_status_t braid_shm_setup(braid_comm_t *comm)
{
    braid_shm_t *shm;
    BRAID_CHECK(shm_check_local(comm));
    shm = calloc(1, sizeof(*shm));
    if (shm == NULL || (shm->maps = calloc((size_t)comm->nranks, sizeof(shm_map_t))) == NULL) {
        free(shm);
        return braid_err(BRAID_ERR_NOMEM, "shm: out of memory for %d peers", comm->nranks);
    }
    comm->shm = shm;
    shm->nslots = comm->peers[0].nslots;
    shm->fifo_bytes = fifo_hdr_bytes(shm->nslots) + (size_t)shm->nslots * comm->slot_size;
    shm->seg_bytes = SHM_PAGE + (size_t)comm->nranks * shm->fifo_bytes;
    BRAID_CHECK(shm_create_own(comm));
    BRAID_CHECK(braid_bootstrap_barrier(comm->bs));
    BRAID_CHECK(shm_map_peers(comm));
    /* everyone has mapped everyone: the names can go */
    BRAID_CHECK(braid_bootstrap_barrier(comm->bs));
    shm->setup_done = 1;
    seg_unlink(shm);
    BRAID_CHECK(shm_make_conns(comm));
    BRAID_INFO(BRAID_SUB_SHM | BRAID_SUB_INIT,
               "shm: %d ranks, %u slots of %zu bytes per peer, %zu-byte segment", comm->nranks,
               shm->nslots, comm->slot_size, shm->seg_bytes);
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
