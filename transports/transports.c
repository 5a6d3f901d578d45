/*
 * The built-in transports, in setup order. Adding one is a new folder under transports/
 * and one line here (docs/CONTRIBUTING.md). The shared-memory transport comes first: it
 * reaches every rank of this host (and says their health), p2p then gives them device
 * FIFOs for the GPU engine, the network transport reaches the ranks of other hosts.
 */
#include <stddef.h>

#include "transports/net/net.h"
#include "transports/p2p/p2p.h"
#include "transports/shm/shm.h"

const braid_transport_t *const braid_transports[] = {
    &braid_transport_shm,
    &braid_transport_p2p,
    &braid_transport_net,
    NULL,
};

_Static_assert(sizeof(braid_transports) / sizeof(braid_transports[0]) <= BRAID_TRANSPORTS_MAX + 1,
               "raise BRAID_TRANSPORTS_MAX");
