/*
 * The libfabric provider's fabric: which libfabric provider and interface it uses
 * (FI_PROVIDER, a real fabric, else tcp;ofi_rxm on the sockets' interface), and the
 * process's one endpoint with its fabric, domain, address vector and completion queue.
 */
#include "transports/net/net.h"

#ifdef HAVE_OFI

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/net/ofi/ofi_int.h"

/* ---- choosing the provider ---- */

static int ofi_prov_has(const char *prov, const char *const *names)
{
    char buf[256], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", prov ? prov : "");
    for (char *part = strtok_r(buf, ";", &save); part; part = strtok_r(NULL, ";", &save))
        for (int i = 0; names[i] != NULL; i++)
            if (strcmp(part, names[i]) == 0)
                return 1;
    return 0;
}

/* A real fabric is anything not built on sockets or shared memory. */
static int ofi_prov_is_real(const char *prov)
{
    static const char *const eth[] = { "tcp", "udp", "sockets", "shm", "sm2", "net",
                                       "ofi_rxd", "rxd", NULL };
    return !ofi_prov_has(prov, eth);
}

static int ofi_prov_is_shm(const char *prov)
{
    static const char *const shm[] = { "shm", "sm2", NULL };
    return ofi_prov_has(prov, shm);
}

static const struct sockaddr *ofi_info_ip(const struct fi_info *fi)
{
    const struct sockaddr *sa = fi->src_addr;
    if (sa == NULL || (fi->addr_format != FI_SOCKADDR && fi->addr_format != FI_SOCKADDR_IN &&
                       fi->addr_format != FI_SOCKADDR_IN6))
        return NULL;
    return sa->sa_family == AF_INET || sa->sa_family == AF_INET6 ? sa : NULL;
}

static int ofi_info_on(const struct fi_info *fi, const braid_sockaddr_t *want)
{
    const struct sockaddr *sa = ofi_info_ip(fi);
    if (sa == NULL || sa->sa_family != want->sa.sa_family)
        return 0;
    if (sa->sa_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)sa)->sin_addr, &want->in4.sin_addr,
                      sizeof(want->in4.sin_addr)) == 0;
    return memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, &want->in6.sin6_addr,
                  sizeof(want->in6.sin6_addr)) == 0;
}

/*
 * The info on the chosen interface; failing that, the first real fabric (its devices are
 * not the sockets' interface: NCCL_SOCKET_IFNAME does not choose IB ports either) or the
 * first one without an IP address (shm asked for by FI_PROVIDER).
 */
static struct fi_info *ofi_choose(struct fi_info *list, int real_only, int allow_shm,
                                  const braid_sockaddr_t *want)
{
    struct fi_info *fallback = NULL;
    for (struct fi_info *fi = list; fi != NULL; fi = fi->next) {
        const char *prov = fi->fabric_attr->prov_name;
        int real = ofi_prov_is_real(prov);
        if ((real_only && !real) || (!allow_shm && ofi_prov_is_shm(prov)))
            continue;
        if (ofi_info_on(fi, want))
            return fi;
        if (fallback == NULL && (real || ofi_info_ip(fi) == NULL))
            fallback = fi;
    }
    return fallback;
}

static int ofi_getinfo(const char *prov, struct fi_info **list_p)
{
    struct fi_info *hints = fi_allocinfo();
    int rc;
    *list_p = NULL;
    if (hints == NULL)
        return -FI_ENOMEM;
    hints->caps = FI_TAGGED;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                                  FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
    hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    if (prov != NULL && (hints->fabric_attr->prov_name = strdup(prov)) == NULL) {
        fi_freeinfo(hints);
        return -FI_ENOMEM;
    }
    rc = fi_getinfo(OFI_API_VERSION, NULL, NULL, 0, hints, list_p);
    fi_freeinfo(hints);
    return rc;
}

/*
 * FI_PROVIDER (which libfabric applies itself) set: what it allows, real fabrics first.
 * Unset: a real fabric, else tcp;ofi_rxm. shm only when FI_PROVIDER names it.
 */
static braid_status_t ofi_pick_info(const braid_sockaddr_t *want, const char *ifname,
                                    struct fi_info **info_p)
{
    struct fi_info *list = NULL, *tcp = NULL, *pick;
    char *env = NULL, addr[BRAID_SOCKADDR_STRLEN];
    int rc = ofi_getinfo(NULL, &list), rc_tcp = 0;
    int has_env = fi_param_get_str(NULL, "provider", &env) == 0 && env != NULL && env[0];
    int allow_shm = has_env && env[0] != '^' && strstr(env, "shm") != NULL;
    pick = ofi_choose(list, 1, allow_shm, want);
    if (pick == NULL && has_env)
        pick = ofi_choose(list, 0, allow_shm, want);
    if (pick == NULL && !has_env) {
        rc_tcp = ofi_getinfo(OFI_DEFAULT_PROV, &tcp);
        pick = ofi_choose(tcp, 0, 0, want);
    }
    *info_p = pick ? fi_dupinfo(pick) : NULL;
    fi_freeinfo(list);
    fi_freeinfo(tcp);
    if (pick != NULL && *info_p == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net/ofi: fi_dupinfo failed");
    if (pick != NULL)
        return BRAID_OK;
    rc = rc_tcp ? rc_tcp : rc;
    return braid_err(BRAID_ERR_UNSUPPORTED,
                     "net/ofi: no libfabric provider offers tagged FI_EP_RDM endpoints on "
                     "interface %s (%s) with %s%s: %s", ifname,
                     braid_sockaddr_str(want, addr, sizeof(addr)),
                     has_env ? "FI_PROVIDER=" : "a real fabric or ",
                     has_env ? env : OFI_DEFAULT_PROV,
                     rc ? fi_strerror(-rc) : "none has an address on that interface");
}

/* ---- the endpoint ---- */

braid_status_t braid_ofi_call(int rc, const char *what)
{
    if (rc == 0)
        return BRAID_OK;
    return braid_err(BRAID_ERR_UNSUPPORTED, "net/ofi: %s failed with %s on %s: %s", what,
                     braid_ofi_g.info->fabric_attr->prov_name, braid_ofi_g.info->domain_attr->name,
                     fi_strerror(rc < 0 ? -rc : rc));
}

/* Tag layout from the provider's tag width: control bit, connection id, sequence. */
static braid_status_t ofi_tags_setup(void)
{
    uint64_t fmt = braid_ofi_g.info->ep_attr->mem_tag_format;
    int bits = fmt == 0 ? 64 : 64 - __builtin_clzll(fmt);
    if (bits < 33)
        return braid_err(BRAID_ERR_UNSUPPORTED, "net/ofi: %s has %d tag bits; 33 are needed",
                         braid_ofi_g.info->fabric_attr->prov_name, bits);
    braid_ofi_g.seq_bits = (bits - 1) / 2;
    braid_ofi_g.seq_mask = (1ull << braid_ofi_g.seq_bits) - 1;
    braid_ofi_g.id_mask = (1ull << (bits - 1 - braid_ofi_g.seq_bits)) - 1;
    braid_ofi_g.ctrl_tag = 1ull << (bits - 1);
    return BRAID_OK;
}

static braid_status_t ofi_open(void)
{
    struct fi_info *info = braid_ofi_g.info;
    struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
    struct fi_av_attr av_attr = { .type = info->domain_attr->av_type };
    size_t len = sizeof(braid_ofi_g.name);
    int rc;
    if (av_attr.type == FI_AV_UNSPEC)
        av_attr.type = FI_AV_TABLE;
    BRAID_CHECK(braid_ofi_call(fi_fabric(info->fabric_attr, &braid_ofi_g.fabric, NULL),
                               "fi_fabric"));
    BRAID_CHECK(braid_ofi_call(fi_domain(braid_ofi_g.fabric, info, &braid_ofi_g.domain, NULL),
                               "fi_domain"));
    BRAID_CHECK(braid_ofi_call(fi_av_open(braid_ofi_g.domain, &av_attr, &braid_ofi_g.av, NULL),
                               "fi_av_open"));
    BRAID_CHECK(braid_ofi_call(fi_cq_open(braid_ofi_g.domain, &cq_attr, &braid_ofi_g.cq, NULL),
                               "fi_cq_open"));
    BRAID_CHECK(braid_ofi_call(fi_endpoint(braid_ofi_g.domain, info, &braid_ofi_g.ep, NULL),
                               "fi_endpoint"));
    BRAID_CHECK(braid_ofi_call(fi_ep_bind(braid_ofi_g.ep, &braid_ofi_g.av->fid, 0),
                               "fi_ep_bind(av)"));
    BRAID_CHECK(braid_ofi_call(fi_ep_bind(braid_ofi_g.ep, &braid_ofi_g.cq->fid,
                                          FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)"));
    BRAID_CHECK(braid_ofi_call(fi_enable(braid_ofi_g.ep), "fi_enable"));
    rc = fi_getname(&braid_ofi_g.ep->fid, braid_ofi_g.name, &len);
    if (rc == -FI_ETOOSMALL)
        return braid_err(BRAID_ERR_UNSUPPORTED, "net/ofi: the %s endpoint name (%zu bytes) "
                         "does not fit a listen handle (%d bytes)", info->fabric_attr->prov_name,
                         len, OFI_NAME_MAX);
    BRAID_CHECK(braid_ofi_call(rc, "fi_getname"));
    braid_ofi_g.namelen = len;
    return ofi_tags_setup();
}

static void ofi_teardown(void)
{
    if (braid_ofi_g.ctrl_mr != NULL)
        fi_close(&braid_ofi_g.ctrl_mr->fid);
    if (braid_ofi_g.ep != NULL)
        fi_close(&braid_ofi_g.ep->fid);
    if (braid_ofi_g.cq != NULL)
        fi_close(&braid_ofi_g.cq->fid);
    if (braid_ofi_g.av != NULL)
        fi_close(&braid_ofi_g.av->fid);
    if (braid_ofi_g.domain != NULL)
        fi_close(&braid_ofi_g.domain->fid);
    if (braid_ofi_g.fabric != NULL)
        fi_close(&braid_ofi_g.fabric->fid);
    free(braid_ofi_g.ctrl_recv);
    fi_freeinfo(braid_ofi_g.info);
    braid_ofi_g.ctrl_mr = NULL, braid_ofi_g.ep = NULL, braid_ofi_g.cq = NULL;
    braid_ofi_g.av = NULL, braid_ofi_g.domain = NULL, braid_ofi_g.fabric = NULL;
    braid_ofi_g.ctrl_recv = NULL, braid_ofi_g.info = NULL;
}

braid_status_t braid_ofi_setup(void)
{
    braid_sockaddr_t want;
    braid_status_t st;
    /* NCCL_SOCKET_IFNAME naming no interface: recorded there, UNSUPPORTED for net_provider.c */
    if (braid_socket_find_if(NULL, &want, braid_ofi_g.ifname) < 0)
        return BRAID_ERR_UNSUPPORTED;
    BRAID_CHECK(ofi_pick_info(&want, braid_ofi_g.ifname, &braid_ofi_g.info));
    BRAID_CHECK_GOTO(st, ofi_open(), out_teardown);
    BRAID_CHECK_GOTO(st, braid_ofi_ctrl_start(), out_teardown);
    return BRAID_OK;
out_teardown:
    ofi_teardown();
    return st;
}

#endif /* HAVE_OFI */
