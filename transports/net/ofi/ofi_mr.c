/*
 * Memory registration for the libfabric provider: needed only where the provider asks for
 * FI_MR_LOCAL; elsewhere every registration is one shared dummy handle.
 */
#include "transports/net/net.h"

#ifdef HAVE_OFI

#include <stdlib.h>

#include "transports/net/ofi/ofi_int.h"

static ofi_mr_t ofi_mr_none;     /* the handle when the provider needs no registration */

int braid_ofi_mr_local(void)
{
    return (braid_ofi_g.info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
}

braid_status_t braid_ofi_mr_register(void *buf, size_t len, struct fid_mr **mr_p)
{
    struct fid_mr *mr = NULL;
    int rc = fi_mr_reg(braid_ofi_g.domain, buf, len, FI_SEND | FI_RECV, 0, braid_ofi_g.mr_key++,
                       0, &mr, NULL);
    if (rc == 0 && (braid_ofi_g.info->domain_attr->mr_mode & FI_MR_ENDPOINT)) {
        rc = fi_mr_bind(mr, &braid_ofi_g.ep->fid, 0);
        if (rc == 0)
            rc = fi_mr_enable(mr);
        if (rc != 0)
            fi_close(&mr->fid);
    }
    if (rc != 0)
        return braid_err(BRAID_ERR_SYSTEM, "net/ofi: fi_mr_reg of %zu bytes at %p: %s", len,
                         buf, fi_strerror(-rc));
    *mr_p = mr;
    return BRAID_OK;
}

braid_status_t braid_ofi_reg_mr(void *comm, void *data, size_t size, void **mh_p)
{
    ofi_mr_t *h;
    braid_status_t st;
    (void)comm;
    if (!braid_ofi_mr_local() || size == 0) {
        *mh_p = &ofi_mr_none;
        return BRAID_OK;
    }
    h = calloc(1, sizeof(*h));
    if (h == NULL)
        return braid_err(BRAID_ERR_NOMEM, "net/ofi: no memory for a registration");
    pthread_mutex_lock(&braid_ofi_g.lock);
    st = braid_ofi_mr_register(data, size, &h->mr);
    pthread_mutex_unlock(&braid_ofi_g.lock);
    if (st < 0) {
        free(h);
        return st;
    }
    h->desc = fi_mr_desc(h->mr);
    *mh_p = h;
    return BRAID_OK;
}

braid_status_t braid_ofi_dereg_mr(void *comm, void *mh)
{
    ofi_mr_t *h = mh;
    int rc;
    (void)comm;
    if (h == NULL || h == &ofi_mr_none)
        return BRAID_OK;
    pthread_mutex_lock(&braid_ofi_g.lock);
    rc = fi_close(&h->mr->fid);
    pthread_mutex_unlock(&braid_ofi_g.lock);
    free(h);
    if (rc != 0)
        return braid_err(BRAID_ERR_SYSTEM, "net/ofi: fi_close of a registration: %s",
                         fi_strerror(-rc));
    return BRAID_OK;
}

#endif /* HAVE_OFI */
