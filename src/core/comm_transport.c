/*
 * The communicator and its transports: the context they see, their setup and teardown in
 * the order of braid_transports, and their peer health as one view of every peer.
 * Nothing here names a transport.
 */
#include <stddef.h>

#include "core/comm.h"
#include "device/device.h"

static braid_status_t ctx_allgather(void *bs, const void *mine, void *all, size_t len)
{
    return braid_bootstrap_allgather(bs, mine, all, len);
}

static braid_status_t ctx_barrier(void *bs)
{
    return braid_bootstrap_barrier(bs);
}

static braid_status_t ctx_check(void *bs)
{
    return braid_bootstrap_check(bs);
}

static void ctx_setup_failed(void *bs, int rank, braid_status_t why)
{
    braid_bootstrap_setup_failed(bs, rank, why);
}

static void ctx_fill(braid_comm_t *comm)
{
    comm->tctx = (braid_transport_ctx_t){
        .rank = comm->rank,
        .nranks = comm->nranks,
        .nonce = comm->nonce,
        .topo = &comm->topo,
        .peers = comm->peers,
        .slot_size = comm->slot_size,
        .nslots = comm->peers[0].nslots,
        .net_name = comm->config.net_name,
        .bs = comm->bs,
        .allgather = ctx_allgather,
        .barrier = ctx_barrier,
        .check = ctx_check,
        .setup_failed = ctx_setup_failed,
        .send_conns = comm->send_conns,
        .recv_conns = comm->recv_conns,
        .pull = BRAID_PULL_NONE,
    };
    if (braid_device() != &braid_device_host) {   /* a GPU: its kernels read the slots */
        comm->tctx.device_map = braid_device_map_host;
        comm->tctx.device_unmap = braid_device_unmap_host;
        comm->tctx.device = braid_comm_ordinal(comm);
    }
}

braid_status_t braid_comm_transports_setup(braid_comm_t *comm)
{
    ctx_fill(comm);
    for (int i = 0; braid_transports[i] != NULL; i++)
        BRAID_CHECK(braid_transports[i]->setup(&comm->tctx, &comm->tp[i]));
    return BRAID_OK;
}

/* Last set up, first torn down. */
void braid_comm_transports_teardown(braid_comm_t *comm, braid_comm_state_t state)
{
    int n = 0;
    while (braid_transports[n] != NULL)
        n++;
    for (int i = n - 1; i >= 0; i--)
        if (comm->tp[i] != NULL) {
            braid_transports[i]->teardown(comm->tp[i], state);
            comm->tp[i] = NULL;
        }
}

void braid_comm_publish_state(braid_comm_t *comm, braid_comm_state_t state)
{
    braid_status_t status = (braid_status_t)atomic_load(&comm->async_status);
    for (int i = 0; braid_transports[i] != NULL; i++)
        if (comm->tp[i] != NULL)
            braid_transports[i]->publish_state(comm->tp[i], state, status);
}

void braid_comm_publish(braid_comm_t *comm, uint64_t started, uint64_t done)
{
    for (int i = 0; braid_transports[i] != NULL; i++)
        if (comm->tp[i] != NULL)
            braid_transports[i]->publish_progress(comm->tp[i], started, done);
}

void braid_comm_peer(braid_comm_t *comm, int r, braid_peer_health_t *h)
{
    for (int i = 0; braid_transports[i] != NULL; i++)
        if (comm->tp[i] != NULL && braid_transports[i]->peer(comm->tp[i], r, h))
            return;
    /* before setup, or a rank no transport reaches: nothing is known */
    *h = (braid_peer_health_t){ .state = BRAID_COMM_INITIALIZING };
}

void braid_comm_peer_ask(braid_comm_t *comm, int r)
{
    for (int i = 0; braid_transports[i] != NULL; i++)
        if (comm->tp[i] != NULL)
            braid_transports[i]->ask(comm->tp[i], r);
}

void braid_comm_publish_cpu(braid_comm_t *comm, int cpu)
{
    for (int i = 0; braid_transports[i] != NULL; i++)
        if (comm->tp[i] != NULL && braid_transports[i]->publish_cpu != NULL)
            braid_transports[i]->publish_cpu(comm->tp[i], cpu);
}

void braid_comm_publish_call(braid_comm_t *comm, const braid_msg_hdr_t *hdr)
{
    for (int i = 0; braid_transports[i] != NULL; i++)
        if (comm->tp[i] != NULL && braid_transports[i]->publish_call != NULL)
            braid_transports[i]->publish_call(comm->tp[i], hdr);
}

int braid_comm_peer_call(braid_comm_t *comm, int r, braid_msg_hdr_t *hdr_p)
{
    for (int i = 0; braid_transports[i] != NULL; i++)
        if (comm->tp[i] != NULL && braid_transports[i]->peer_call != NULL &&
            braid_transports[i]->peer_call(comm->tp[i], r, hdr_p))
            return 1;
    return 0;
}

int braid_comm_peer_cpu(braid_comm_t *comm, int r)
{
    for (int i = 0; braid_transports[i] != NULL; i++)
        if (comm->tp[i] != NULL && braid_transports[i]->peer_cpu != NULL) {
            int cpu = braid_transports[i]->peer_cpu(comm->tp[i], r);
            if (cpu >= 0)
                return cpu;
        }
    return -1;
}

void braid_comm_drive(braid_comm_t *comm)
{
    for (int i = 0; braid_transports[i] != NULL; i++)
        if (comm->tp[i] != NULL && braid_transports[i]->drive != NULL)
            braid_transports[i]->drive(comm->tp[i]);
}
