/*
 * Device FIFOs between the ranks of one host, for the GPU engine (src/exec/gpu.c).
 *
 * Every rank makes one device allocation at init, its arena, on its own device:
 *
 *   [ head from local rank 0 .. m-1 | tail to local rank 0 .. m-1 |
 *     records of the FIFO from local rank 0 | ... | of the FIFO from local rank m-1 |
 *     FIFO from local rank 0 | ... | FIFO from local rank m-1 ]
 *
 * (a 128-byte line per counter; a 32-byte message record per slot, each FIFO's rounded up
 * to lines; nslots slots of slot_size bytes per FIFO; a rank's own FIFO too, for sends to
 * itself), and maps every other local rank's arena: a plain pointer where the peer is a
 * thread of this process (with peer access where it runs on another device), a CUDA or
 * HIP IPC handle where it is another process, on the same GPU or another that the runtime
 * lets it reach. The connections (transport.h: braid_dconn_t) put each counter with the rank that
 * waits on it.
 *
 * All ranks agree: the FIFOs are used only where every rank of the communicator is on this
 * host, would make them (a GPU backend, BRAID_P2P=1) and made and mapped them all; else
 * none is kept, one INFO line says why, and device calls go through the host slots.
 *
 * Memory per rank: nlocal FIFOs of BRAID_P2P_NSLOTS slots of BRAID_P2P_SLOT_SIZE bytes (rank
 * 0's settings), plus 2 * nlocal * 128 bytes of counters and nlocal * 32 * nslots bytes
 * of records (rounded up to 128); slots shrink (to 64K at least) so that the arena stays
 * within BRAID_P2P_MEM.
 */
#ifndef BRAID_TRANSPORTS_P2P_H
#define BRAID_TRANSPORTS_P2P_H

#include "transports/transport.h"

/* The transport (transports/transports.c): setup fills ctx->dev_send / dev_recv, or leaves
 * them NULL; the health of the host's ranks is the shared-memory transport's. */
extern const braid_transport_t braid_transport_p2p;

#endif
