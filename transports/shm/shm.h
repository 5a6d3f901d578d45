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
 *
 * The control block at the head of each segment is the rank's health as its local peers
 * read it: state, failure status, last collective started and finished.
 */
#ifndef BRAID_TRANSPORTS_SHM_H
#define BRAID_TRANSPORTS_SHM_H

#include "transports/transport.h"

/* The transport (transports/transports.c): setup creates, exchanges and maps the segments
 * of the ranks of this host and agrees on single copy (ctx->pull, ctx->pull_min); a peer's
 * health is its control block, and whether its process is alive. */
extern const braid_transport_t braid_transport_shm;

#endif
