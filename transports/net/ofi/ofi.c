/*
 * libfabric ("OFI") network provider: tagged messages on one reliable-datagram endpoint per
 * process, shared by every connection of the process.
 *
 *   receiver                                         sender
 *   listen: id L; handle = {endpoint name, L}  --->  connect: fi_av_insert(name), send CONNECT
 *                                                    {L, its comm id S, its own name}
 *   any progress: CONNECT for L arrives: insert
 *   the sender, give the connection an id C unique
 *   in this process, queue it on L, answer
 *   ACCEPT {S, C}                              --->  any progress: comm S learns C (isend
 *   accept: pop C -> recv comm                       returns "try again" until then)
 *
 * Data: tag = C << seq_bits | n, where n counts the messages of the connection on both
 * sides, and receives are posted for the exact tag: message n matches receive n whatever
 * order the provider delivers in. The receiver, not the sender, picks C because tcp;ofi_rxm
 * has no directed receive: a tag must be unique among all the senders of an endpoint, and
 * only the receiver can promise that.
 * Control: tag = the top tag bit alone; OFI_CTRL_NRECV receives stay posted process-wide
 * and dispatch by the ids inside the message.
 *
 * Progress is manual: every call that waits on the network (accept, isend before ACCEPT, a
 * post that got FI_EAGAIN, test) reads the completion queue, and a completion may belong to
 * any comm of the process. One mutex guards all of it (FI_THREAD_DOMAIN).
 */
#include "transports/net/net.h"

#ifdef HAVE_OFI

#include <stdio.h>
#include <string.h>

#include "transports/net/ofi/ofi_int.h"

/* The process's endpoint and everything on it (ofi_int.h). */
ofi_global_t braid_ofi_g = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The version both ends compare: the library's and the provider's name. */
static void ofi_version_set(void)
{
    uint32_t v = fi_version();
    const char *prov = braid_ofi_g.info->fabric_attr->prov_name;
    if (FI_MAJOR(v) == FI_MAJOR_VERSION && FI_MINOR(v) == FI_MINOR_VERSION)
        snprintf(braid_ofi_g.version, sizeof(braid_ofi_g.version), "libfabric %u.%u.%u %s",
                 FI_MAJOR(v), FI_MINOR(v), FI_REVISION_VERSION, prov);
    else
        snprintf(braid_ofi_g.version, sizeof(braid_ofi_g.version), "libfabric %u.%u %s",
                 FI_MAJOR(v), FI_MINOR(v), prov);
}

/* Cached once it succeeds; a failure is probed again on the next call. */
static braid_status_t ofi_init(void)
{
    braid_status_t st = BRAID_OK;
    pthread_mutex_lock(&braid_ofi_g.lock);
    if (!braid_ofi_g.ready) {
        st = braid_ofi_setup();
        if (st == BRAID_OK) {
            ofi_version_set();
            braid_ofi_g.ready = 1;
            BRAID_INFO(BRAID_SUB_NET | BRAID_SUB_INIT, "net/ofi: %s, domain %s, fabric %s, "
                       "interface %s, %s registration", braid_ofi_g.version,
                       braid_ofi_g.info->domain_attr->name, braid_ofi_g.info->fabric_attr->name,
                       braid_ofi_g.ifname, braid_ofi_mr_local() ? "local" : "no");
        }
    }
    pthread_mutex_unlock(&braid_ofi_g.lock);
    return st;
}

static const char *ofi_version(void)
{
    return braid_ofi_g.version;
}

static braid_status_t ofi_devices(int *ndev_p)
{
    *ndev_p = 1;
    return BRAID_OK;
}

braid_status_t braid_ofi_dev_check(int dev)
{
    if (dev != 0)
        return braid_err(BRAID_ERR_INVALID, "net/ofi: device %d does not exist (1 device)",
                         dev);
    return BRAID_OK;
}

static braid_status_t ofi_get_properties(int dev, braid_net_props_t *props_p)
{
    const struct fi_info *info = braid_ofi_g.info;
    BRAID_CHECK(braid_ofi_dev_check(dev));
    memset(props_p, 0, sizeof(*props_p));
    snprintf(props_p->name, sizeof(props_p->name), "%s", info->domain_attr->name);
    if (info->nic != NULL && info->nic->link_attr != NULL)
        props_p->speed_mbps = (int)(info->nic->link_attr->speed / 1000000);
    return BRAID_OK;
}

const braid_net_ops_t braid_net_ofi = {
    .name = "OFI",
    .init = ofi_init,
    .version = ofi_version,
    .devices = ofi_devices,
    .get_properties = ofi_get_properties,
    .listen = braid_ofi_listen,
    .connect = braid_ofi_connect,
    .accept = braid_ofi_accept,
    .reg_mr = braid_ofi_reg_mr,
    .dereg_mr = braid_ofi_dereg_mr,
    .isend = braid_ofi_isend,
    .irecv = braid_ofi_irecv,
    .test = braid_ofi_test,
    .close_send = braid_ofi_close_send,
    .close_recv = braid_ofi_close_recv,
    .close_listen = braid_ofi_close_listen,
};

#endif /* HAVE_OFI (without it, transports/net/net_missing.c stands in) */
