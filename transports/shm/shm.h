/*
 * Shared-memory transport between the ranks of one host.
 *
 * Every rank creates one segment (mode 0600, named with the communicator's nonce and its
 * rank) holding a control block that peers read for diagnostics, and one FIFO per sending
 * peer. A sender writes into the FIFO that lives in the receiver's segment, so a hop is one
 * memory pass. Once every local rank has mapped every segment, names are unlinked: nothing
 * is left in /dev/shm after init, even if a process is killed later.
 *
 * Setup also decides whether ranks read each other's buffers directly (single copy,
 * algorithms/twoshot.c), and all ranks agree through the bootstrap so that every rank picks
 * the same algorithms: ranks that are all threads of one process do, with plain loads;
 * ranks in several processes do only with BRAID_SHM_CMA=1, through cross-memory attach
 * (transports/shm/cma.h), after every rank read every other rank's control block that way;
 * BRAID_SHM_CMA=0 turns both off.
 */
#ifndef BRAID_TRANSPORTS_SHM_H
#define BRAID_TRANSPORTS_SHM_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/comm.h"

/* Published by each rank in its own segment; read by its peers. */
struct braid_shm_ctrl {
    uint64_t magic;
    int32_t rank;
    int32_t pid;
    _Atomic int state;              /* braid_comm_state_t */
    _Atomic int status;             /* braid_status_t of a failure, else 0 */
    _Atomic uint64_t seq_started;   /* last collective sequence number started */
    _Atomic uint64_t seq_done;      /* last collective sequence number completed */
    uint64_t self_addr;             /* this block's address in its owner's process */
    uint64_t proc_key;              /* braid_cma_proc_key() of its owner */
};

/* Create, exchange and map the segments of all ranks of comm (all on this host); fills
 * comm->send_conns / recv_conns. Collective over the comm's bootstrap. */
braid_status_t braid_shm_setup(braid_comm_t *comm);
/* Publish `state` in this rank's control block, close the connections, unmap, and remove
 * the name if init did not get that far. Local: peers are not waited for. */
void braid_shm_teardown(braid_comm_t *comm, braid_comm_state_t state);
/* Control block of rank r (this rank's own for r == comm->rank); NULL before setup. */
braid_shm_ctrl_t *braid_shm_ctrl(const braid_comm_t *comm, int r);
/* Agreed at setup: how ranks read each other's buffers, and in *min_p the message size from
 * which the single-copy algorithms are used (rank 0's BRAID_SHM_CMA_MIN). */
braid_pull_t braid_shm_pull(const braid_comm_t *comm, size_t *min_p);

#endif
