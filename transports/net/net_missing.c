/*
 * Stand-ins for the providers configure left out (--without-ofi / --without-ucx, or their
 * library not found): braid_net_ofi and braid_net_ucx still exist under their names, so that
 * NCCL_NET=OFI finds the provider and fails with why it cannot run and what to install, and
 * the automatic choice (net_provider.c) passes over it, logging that reason.
 *
 * Every entry but version fails as init does, recording the same error (the transport never calls
 * them: it uses a provider only after its init succeeded); devices also reports no device,
 * and closing has nothing to close.
 */
#include "base/status.h"
#include "transports/net/net.h"

/*
 * Define braid_net_<_p>, the stand-in for provider `_name`: `_lib` is the library braid was
 * built without, `_pkg` the package that brings it, and `_prefix` starts the message as the
 * provider's own messages start. The ops take no context, so each stand-in gets its own
 * entries, all written here once.
 */
#define NET_MISSING_PROVIDER(_p, _name, _prefix, _lib, _pkg)                                \
    static braid_status_t _p##_missing(void)                                                \
    {                                                                                       \
        return braid_err(BRAID_ERR_UNSUPPORTED, _prefix ": braid was built without " _lib   \
                         ": apt-get install " _pkg " and rebuild");                         \
    }                                                                                       \
    static const char *_p##_missing_version(void)                                           \
    {                                                                                       \
        return _lib " (not built)";                                                         \
    }                                                                                       \
    static braid_status_t _p##_missing_devices(int *ndev_p)                                 \
    {                                                                                       \
        *ndev_p = 0;                                                                        \
        return _p##_missing();                                                              \
    }                                                                                       \
    static braid_status_t _p##_missing_get_properties(int dev, braid_net_props_t *props_p)  \
    {                                                                                       \
        (void)dev, (void)props_p;                                                           \
        return _p##_missing();                                                              \
    }                                                                                       \
    static braid_status_t _p##_missing_listen(int dev, void *handle, void **listen_p)       \
    {                                                                                       \
        (void)dev, (void)handle, (void)listen_p;                                            \
        return _p##_missing();                                                              \
    }                                                                                       \
    static braid_status_t _p##_missing_connect(int dev, const void *handle, void **send_p)  \
    {                                                                                       \
        (void)dev, (void)handle, (void)send_p;                                              \
        return _p##_missing();                                                              \
    }                                                                                       \
    static braid_status_t _p##_missing_accept(void *listen, void **recv_p)                  \
    {                                                                                       \
        (void)listen, (void)recv_p;                                                         \
        return _p##_missing();                                                              \
    }                                                                                       \
    static braid_status_t _p##_missing_reg_mr(void *comm, void *data, size_t size,          \
                                              void **mh_p)                                  \
    {                                                                                       \
        (void)comm, (void)data, (void)size, (void)mh_p;                                     \
        return _p##_missing();                                                              \
    }                                                                                       \
    static braid_status_t _p##_missing_dereg_mr(void *comm, void *mh)                       \
    {                                                                                       \
        (void)comm, (void)mh;                                                               \
        return _p##_missing();                                                              \
    }                                                                                       \
    static braid_status_t _p##_missing_isend(void *send, const void *data, size_t size,     \
                                             void *mh, void **req_p)                        \
    {                                                                                       \
        (void)send, (void)data, (void)size, (void)mh, (void)req_p;                          \
        return _p##_missing();                                                              \
    }                                                                                       \
    static braid_status_t _p##_missing_irecv(void *recv, void *data, size_t size, void *mh, \
                                             void **req_p)                                  \
    {                                                                                       \
        (void)recv, (void)data, (void)size, (void)mh, (void)req_p;                          \
        return _p##_missing();                                                              \
    }                                                                                       \
    static braid_status_t _p##_missing_test(void *req, int *done, size_t *size_p)           \
    {                                                                                       \
        (void)req, (void)done, (void)size_p;                                                \
        return _p##_missing();                                                              \
    }                                                                                       \
    const braid_net_ops_t braid_net_##_p = {                                                \
        .name = _name,                                                                      \
        .init = _p##_missing,                                                               \
        .version = _p##_missing_version,                                                    \
        .devices = _p##_missing_devices,                                                    \
        .get_properties = _p##_missing_get_properties,                                      \
        .listen = _p##_missing_listen,                                                      \
        .connect = _p##_missing_connect,                                                    \
        .accept = _p##_missing_accept,                                                      \
        .reg_mr = _p##_missing_reg_mr,                                                      \
        .dereg_mr = _p##_missing_dereg_mr,                                                  \
        .isend = _p##_missing_isend,                                                        \
        .irecv = _p##_missing_irecv,                                                        \
        .test = _p##_missing_test,                                                          \
        .close_send = net_missing_close,                                                    \
        .close_recv = net_missing_close,                                                    \
        .close_listen = net_missing_close,                                                  \
    };

#if !defined(HAVE_OFI) || !defined(HAVE_UCX)
static void net_missing_close(void *comm)
{
    (void)comm;
}
#endif

#ifndef HAVE_OFI
NET_MISSING_PROVIDER(ofi, "OFI", "net/ofi", "libfabric", "libfabric-dev")
#endif

#ifndef HAVE_UCX
NET_MISSING_PROVIDER(ucx, "UCX", "net ucx", "UCX", "libucx-dev")
#endif
