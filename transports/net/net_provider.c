/*
 * Which network provider a communicator uses: the one the config's netName or NCCL_NET
 * names, else the external plugin NCCL_NET_PLUGIN names, else the first built-in provider
 * that initialises here.
 */
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/param.h"
#include "transports/net/net_int.h"

/* Unnamed, an external plugin the user named, else the first of these that initialises.
 * UCX and libfabric use a real fabric where there is one; over plain Ethernet (two network
 * namespaces, docs/PERFORMANCE.md) UCX's tcp had the lowest times from 8 B to 128 KiB
 * (7 us at 8 B; libfabric's tcp;ofi_rxm 10, sockets 11) and all three were within the
 * noise of each other from 256 KiB up. */
static const braid_net_ops_t *net_builtin[] = { &braid_net_ucx, &braid_net_ofi,
                                                &braid_net_socket };
#define NET_NBUILTIN (sizeof(net_builtin) / sizeof(net_builtin[0]))

static braid_status_t net_init_named(const braid_net_ops_t *p, const char *how)
{
    braid_status_t st = p->init();
    if (st != BRAID_OK)
        return braid_err(st < 0 ? st : BRAID_ERR_INTERNAL, "net: %s provider %s cannot run "
                         "here: %s", how, p->name, braid_err_last());
    return BRAID_OK;
}

braid_status_t braid_net_provider_pick(const braid_net_t *net,
                                       const braid_net_ops_t **prov_p)
{
    const braid_net_ops_t *plugin = braid_net_plugin_load();
    const char *want = net->ctx->net_name[0] ? net->ctx->net_name
                                                : braid_param_str(BRAID_P_NET);
    const char *how = net->ctx->net_name[0] ? "netName" : "NCCL_NET";
    if (plugin == NULL && braid_net_plugin_named())
        return BRAID_ERR_INVALID;   /* the plugin's error is recorded */
    if (want[0] != '\0') {
        if (plugin != NULL && strcasecmp(want, plugin->name) == 0) {
            *prov_p = plugin;
            return net_init_named(plugin, how);
        }
        for (size_t i = 0; i < NET_NBUILTIN; i++)
            if (strcasecmp(want, net_builtin[i]->name) == 0) {
                *prov_p = net_builtin[i];
                return net_init_named(net_builtin[i], how);
            }
        return braid_err(BRAID_ERR_INVALID, "net: %s=%s names no network provider (known: "
                         "Socket, OFI, UCX%s%s)", how, want, plugin ? ", " : "",
                         plugin ? plugin->name : "");
    }
    if (plugin != NULL) {
        *prov_p = plugin;
        return net_init_named(plugin, "NCCL_NET_PLUGIN's");
    }
    for (size_t i = 0; i < NET_NBUILTIN; i++) {
        if (net_builtin[i]->init() == BRAID_OK) {
            *prov_p = net_builtin[i];
            return BRAID_OK;
        }
        BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net: provider %s not used: %s",
                   net_builtin[i]->name, braid_err_last());
    }
    return braid_err(BRAID_ERR_SYSTEM, "net: no network provider works here (the socket "
                     "provider: %s)", braid_err_last());
}
