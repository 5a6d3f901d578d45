/*
 * Communicator lifecycle after init: split, shrink, finalize, revoke, destroy and abort.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/comm.h"
#include "core/flight.h"
#include "core/proxy.h"
#include "base/log.h"

typedef struct split_entry {
    int32_t color, key;
} split_entry_t;

/* Child tags: the same on all members, distinct per child of one parent (`count`: the
 * parent's count of splits or of shrinks). */
static uint64_t child_tag(uint64_t *count, uint64_t salt)
{
    uint64_t x = (++*count) * 0x9e3779b97f4a7c15ull ^ salt;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 29);
}

/* A split watches its parent while the child's bootstrap is made, where it is made on this
 * thread (a blocking one): a member that died in the parent's all-gather of colors may have
 * left others that finished it waiting for a member that failed it. A shrink's parent has
 * usually failed already. */
static braid_status_t child_make(braid_comm_t *comm, int rank, int nranks, const int *members,
                                 uint64_t tag, int split, const braid_comm_config_t *cfg,
                                 braid_comm_t **newcomm_p)
{
    braid_comm_t *child;
    BRAID_CHECK(braid_comm_alloc(cfg, &child));
    braid_comm_init_args_t a = { .rank = rank, .nranks = nranks, .cudev = comm->cudev,
                                 .parent = comm, .members = members, .tag = tag,
                                 .watch_parent = split && cfg->blocking };
    braid_status_t st = braid_comm_init(child, &a, !cfg->blocking);
    if (st < 0) {
        braid_comm_unregister(child, "split");
        braid_comm_free(child, 0);
        return st;
    }
    *newcomm_p = child;
    return st;
}

braid_status_t braid_comm_split(braid_comm_t *comm, int color, int key,
                                const braid_comm_config_t *cfg, braid_comm_t **newcomm_p)
{
    int n = comm->nranks, m = 0, me = -1;
    split_entry_t mine = { color, key }, *all = malloc((size_t)n * sizeof(*all));
    int *members = malloc((size_t)n * sizeof(int));
    braid_status_t st;
    if (all == NULL || members == NULL) {
        st = braid_err(BRAID_ERR_NOMEM, "split: out of memory for %d ranks", n);
        goto out;
    }
    BRAID_CHECK_GOTO(st, braid_bootstrap_allgather(comm->bs, &mine, all, sizeof(mine)), out);
    uint64_t tag = child_tag(&comm->child_count, (uint64_t)(uint32_t)color);
    *newcomm_p = NULL;
    if (color < 0)
        goto out;   /* NCCL_SPLIT_NOCOLOR: took part, gets no communicator */
    /* members of our color, ordered by (key, parent rank): insertion keeps it simple */
    for (int r = 0; r < n; r++) {
        if (all[r].color != color)
            continue;
        int i = m++;
        while (i > 0 && all[members[i - 1]].key > all[r].key) {
            members[i] = members[i - 1];
            i--;
        }
        members[i] = r;
    }
    for (int i = 0; i < m; i++)
        if (members[i] == comm->rank)
            me = i;
    st = child_make(comm, me, m, members, tag, 1, cfg, newcomm_p);
out:
    free(all);
    free(members);
    return st;
}

braid_status_t braid_comm_shrink(braid_comm_t *comm, const int *exclude, int nexclude,
                                 const braid_comm_config_t *cfg, int abort_first,
                                 braid_comm_t **newcomm_p)
{
    int n = comm->nranks, m = 0, me = -1;
    int *members = malloc((size_t)n * sizeof(int));
    if (members == NULL)
        return braid_err(BRAID_ERR_NOMEM, "shrink: out of memory for %d ranks", n);
    if (abort_first) {
        /* NCCL_SHRINK_ABORT: the parent stops for good, and its peers hear of it */
        atomic_store(&comm->state, BRAID_COMM_ABORTED);
        braid_comm_publish_state(comm, BRAID_COMM_ABORTED);
    }
    for (int r = 0; r < n; r++) {
        int out = 0;
        for (int i = 0; i < nexclude; i++)
            out |= exclude[i] == r;
        if (out)
            continue;
        if (r == comm->rank)
            me = m;
        members[m++] = r;
    }
    uint64_t tag = child_tag(&comm->shrink_count, 0x5348524bull);
    braid_status_t st = child_make(comm, me, m, members, tag, 0, cfg, newcomm_p);
    free(members);
    return st;
}

braid_status_t braid_comm_finalize(braid_comm_t *comm)
{
    /* host calls complete before they return, device calls when the proxy has run them:
     * then only the peers need to be waited for */
    braid_proxy_drain(comm);
    BRAID_CHECK(braid_bootstrap_barrier(comm->bs));
    atomic_store(&comm->state, BRAID_COMM_FINALIZED);
    braid_comm_publish_state(comm, BRAID_COMM_FINALIZED);
    return BRAID_OK;
}

braid_status_t braid_comm_revoke(braid_comm_t *comm)
{
    atomic_store(&comm->state, BRAID_COMM_REVOKED);
    braid_comm_publish_state(comm, BRAID_COMM_REVOKED);
    /* calls in flight on other threads see the state at their next check and leave */
    while (atomic_load(&comm->busy) > 1) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    return BRAID_OK;
}

void braid_comm_set_error(braid_comm_t *comm, braid_status_t st)
{
    int expected = BRAID_OK;
    if (!atomic_compare_exchange_strong(&comm->async_status, &expected, (int)st))
        return;   /* the first failure is the one reported */
    int s = BRAID_COMM_READY;
    atomic_compare_exchange_strong(&comm->state, &s, BRAID_COMM_ERROR);
    braid_comm_publish_state(comm, BRAID_COMM_ERROR);
}

void braid_comm_free(braid_comm_t *comm, int abort)
{
    braid_comm_state_t final = abort ? BRAID_COMM_ABORTED : BRAID_COMM_DESTROYED;
    if (abort) {
        atomic_store(&comm->state, BRAID_COMM_ABORTED);
        braid_comm_publish_state(comm, BRAID_COMM_ABORTED);
        pthread_mutex_lock(&comm->lock);   /* an init thread may be publishing bs */
        if (comm->bs != NULL)
            braid_bootstrap_abort(comm->bs);
        pthread_mutex_unlock(&comm->lock);
    }
    braid_comm_wait_init(comm);
    if (abort)   /* the ops still running show as such */
        braid_flight_dump(comm->flight, "abort", NULL, 0);
    /* callers inside a call on another thread leave at their next check */
    while (atomic_load(&comm->busy) > 0) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    if (braid_proxy_stop(comm, abort))   /* the device still has work: unmapping waits */
        comm->tctx.device_unmap = NULL;
    braid_tune_plugin_fini(&comm->tune);
    braid_comm_transports_teardown(comm, final);
    if (comm->bs != NULL)
        braid_bootstrap_destroy(comm->bs);
    free(comm->peers);
    braid_topo_free(&comm->topo);
    free(comm->send_conns);
    free(comm->recv_conns);
    free(comm->p2p_send_seq);
    free(comm->p2p_recv_seq);
    free(comm->premuls);
    braid_flight_destroy(comm->flight);
    pthread_mutex_destroy(&comm->lock);
    comm->magic = 0;
    free(comm);
}
