/*
 * Network transport between hosts: providers behind one interface shaped like NCCL's
 * ncclNet_t, and the slot FIFO (transports/transport.h) built on top of them.
 *
 * A provider moves whole messages over one-way connections:
 *
 *   receiver: listen(dev) -> handle (opaque bytes sent to the sender by the bootstrap)
 *   sender:   connect(dev, handle) -> send comm        receiver: accept(listen) -> recv comm
 *   sender:   isend(buf, size) -> request             receiver: irecv(buf, cap) -> request
 *   both:     test(request) until done
 *
 * Messages on one connection arrive in the order they were sent and match the receives in
 * the order they were posted; a message longer than the receive it matches is an error on
 * the receiving side (BRAID_ERR_REMOTE, naming both sizes). Every call is non-blocking:
 * test() is where a provider makes progress (libfabric's manual progress, UCX's worker), and
 * a NULL request from isend/irecv means "cannot post now, try again". Errors are recorded
 * with braid_err() once, by the provider, with the provider's own text (fi_strerror,
 * fi_cq_readerr's prov_errno text, ucs_status_string); a peer that died or became
 * unreachable is BRAID_ERR_REMOTE.
 *
 * Threads: providers are process-wide singletons; their functions may be called from
 * several threads at once on different comms (ranks that are threads of one process), and
 * on one comm (and its requests) from one thread at a time.
 *
 * Providers: transports/net/socket (TCP, always built), transports/net/ofi (libfabric),
 * transports/net/ucx (UCX tag API), and an external NCCL net plugin (NCCL_NET_PLUGIN).
 */
#ifndef BRAID_TRANSPORTS_NET_H
#define BRAID_TRANSPORTS_NET_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "transports/transport.h"

/* Bytes of a listen handle: NCCL_NET_HANDLE_MAXSIZE. */
#define BRAID_NET_HANDLE_MAX 128

typedef struct braid_net_props {
    char name[64];          /* device name: the interface ("eth0"), or provider's domain */
    int speed_mbps;         /* link speed as the provider reports it; 0 unknown */
    float latency_us;       /* 0 unknown */
    int max_comms;          /* connections per device; 0 unlimited */
} braid_net_props_t;

typedef struct braid_net_ops {
    const char *name;       /* "Socket", "OFI", "UCX" or the plugin's; NCCL_NET compares it
                             * case-insensitively */
    /* Probe once per process (idempotent, thread-safe). BRAID_ERR_UNSUPPORTED, recorded with
     * the reason, where the provider cannot run here (library missing from the build, no
     * usable provider/interface, NCCL_SOCKET_IFNAME naming no interface). */
    braid_status_t (*init)(void);
    /* "libfabric 1.17.0 tcp;ofi_rxm", "UCX 1.13.1", "braid socket 1": the text both ends of
     * a connection must agree on (checked by the handshake, net_connect.c). Valid after init. */
    const char *(*version)(void);
    braid_status_t (*devices)(int *ndev_p);
    braid_status_t (*get_properties)(int dev, braid_net_props_t *props_p);

    /* Start listening on dev. `handle` (BRAID_NET_HANDLE_MAX bytes, zeroed by the caller)
     * gets what a sender needs to connect. */
    braid_status_t (*listen)(int dev, void *handle, void **listen_p);
    /* Connect to the listener that wrote `handle`; may block briefly (bounded by the
     * provider, e.g. a TCP connect). A listener that is gone or unreachable: REMOTE. */
    braid_status_t (*connect)(int dev, const void *handle, void **send_p);
    /* A connection that arrived on the listener, or *recv_p = NULL when none has yet.
     * Connections are accepted in any order. */
    braid_status_t (*accept)(void *listen, void **recv_p);

    /* Register memory used with isend/irecv on this comm. Providers that need no
     * registration return a non-NULL dummy handle. */
    braid_status_t (*reg_mr)(void *comm, void *data, size_t size, void **mh_p);
    braid_status_t (*dereg_mr)(void *comm, void *mh);

    braid_status_t (*isend)(void *send, const void *data, size_t size, void *mh, void **req_p);
    braid_status_t (*irecv)(void *recv, void *data, size_t size, void *mh, void **req_p);
    /* *done = 1 once complete (the request is then freed; *size_p = bytes sent/received,
     * size_p may be NULL). An error also frees the request. */
    braid_status_t (*test)(void *req, int *done, size_t *size_p);

    /* Close; requests still pending on the comm are cancelled and freed. */
    void (*close_send)(void *send);
    void (*close_recv)(void *recv);
    void (*close_listen)(void *listen);
} braid_net_ops_t;

extern const braid_net_ops_t braid_net_socket;
extern const braid_net_ops_t braid_net_ofi;       /* BRAID_ERR_UNSUPPORTED at init when built
                                                   * without libfabric */
extern const braid_net_ops_t braid_net_ucx;       /* same, without UCX */
/* Does NCCL_NET_PLUGIN name a plugin (set, and not "none", which asks for none)? */
int braid_net_plugin_named(void);
/* The provider of the NCCL net plugin NCCL_NET_PLUGIN names (transports/net/plugin), loaded
 * once; NULL when none is named, or when it cannot be loaded (the error is recorded). */
const braid_net_ops_t *braid_net_plugin_load(void);

/* ---- the transport (transports/net/net.c) ------------------------------------------- */

/*
 * Setup connects this rank to every rank on another host (host ids from the peer table):
 * it picks the provider (the context's netName, else NCCL_NET, else the plugin if one is
 * named, else the first of UCX, OFI, Socket that works here), agrees on it with every rank,
 * opens the health links, connects with a handshake (braid version, provider name and
 * version, job nonce, ranks) and fills the context's connections for the remote ranks. It
 * reaches no peer when all ranks share a host. Its peer health is the health links
 * (net_health.c).
 */
extern const braid_transport_t braid_transport_net;

#endif
