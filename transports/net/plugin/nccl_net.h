/*
 * The binary interface of an external NCCL net plugin (libnccl-net-NAME.so), as braid
 * declares it for itself: the library exports one table of functions named
 * ncclNetPlugin_vN, and its layout is fixed per N. braid accepts v8, v9 and v10.
 *
 * Everything here is an ABI fact: member order, types and enum values must stay exactly as
 * NCCL's releases have them (they were checked against NVIDIA/nccl's
 * src/include/plugin/net/net_v8.h .. net_v10.h and ext-net/example/nccl/; the sizes are
 * asserted below for LP64). Only the parts braid calls are described in comments.
 *
 *   v8   sizes of isend/irecv are int
 *   v9   sizes are size_t; properties gain forceFlush, a virtual NIC and transfer limits;
 *        the table gains makeVDevice
 *   v10  init takes a profiler callback, connect a per-connection config, isend and irecv
 *        a profiler handle each
 *
 * Both braid (transports/net/plugin/plugin.c) and the test plugin of the test suite
 * (tests/plugin/net_plugin_test.c) include it; it needs only include/nccl.h and
 * src/core/nccl_ext.h.
 */
#ifndef BRAID_TRANSPORTS_NET_PLUGIN_NCCL_NET_H
#define BRAID_TRANSPORTS_NET_PLUGIN_NCCL_NET_H

#include <stddef.h>
#include <stdint.h>

#include "base/nccl_ext.h"
#include "nccl.h"

/* Bytes of a listen handle, the opaque blob a receiver gives its sender. */
#define NCCL_NET_HANDLE_MAXSIZE 128

/* Kinds of memory a plugin registers (properties' ptrSupport is a mask of them). */
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

/* v10: NCCL's profiler hook for network events (braid passes NULL). */
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *phandle,
                                               int64_t pluginId, void *extData);

/* Device-side offload of a connection (braid never asks for one: it passes NULL). */
typedef enum {
    NCCL_NET_DEVICE_HOST = 0,
    NCCL_NET_DEVICE_UNPACK = 1,
} ncclNetDeviceType;

typedef struct {
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    void *handle;
    size_t size;
    int needsProxyProgress;
} ncclNetDeviceHandle_v8_t;

typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_t;

/* A virtual NIC: up to 4 physical devices merged (v9 and v10 alike). */
#define NCCL_NET_MAX_DEVS_PER_NIC_V9 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V10 4

typedef struct {
    int ndevs;
    int devs[NCCL_NET_MAX_DEVS_PER_NIC_V9];
} ncclNetVDeviceProps_v9_t;

typedef struct {
    int ndevs;
    int devs[NCCL_NET_MAX_DEVS_PER_NIC_V10];
} ncclNetVDeviceProps_v10_t;

/* v10: per-connection settings given to connect (NULL: defaults). */
#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1
typedef struct {
    int trafficClass;
} ncclNetCommConfig_v10_t;

/* ---- device properties ------------------------------------------------------------------ */

typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;             /* NCCL_PTR_* mask: braid needs NCCL_PTR_HOST */
    int regIsGlobal;
    int speed;                  /* Mb/s */
    int port;
    float latency;              /* us */
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;
    int regIsGlobal;
    int forceFlush;
    int speed;
    int port;
    float latency;
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    ncclNetVDeviceProps_v9_t vProps;
    size_t maxP2pBytes;
    size_t maxCollBytes;
} ncclNetProperties_v9_t;

typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;
    int regIsGlobal;
    int forceFlush;
    int speed;
    int port;
    float latency;
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    ncclNetVDeviceProps_v10_t vProps;
    size_t maxP2pBytes;
    size_t maxCollBytes;
} ncclNetProperties_v10_t;

/*
 * ---- the tables --------------------------------------------------------------------------
 *
 * What braid relies on, common to the three versions:
 *   connect and accept never block: a NULL comm back means "not yet, call again"; connect
 *     may write into the handle between calls (it is the caller's copy);
 *   isend and irecv may give a NULL request: "cannot post now, call again";
 *   test reports done and, when `sizes` is not NULL, the bytes moved;
 *   a receive posted for fewer bytes than the message that meets it is an error.
 */

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
                            ncclNetDeviceHandle_v8_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm,
                           ncclNetDeviceHandle_v8_t **recvDevComm);
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
                          void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
                          void **mhandles, void **request);
    ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                           void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *sendComm);
    ncclResult_t (*closeRecv)(void *recvComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v8_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
                            ncclNetDeviceHandle_v9_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm,
                           ncclNetDeviceHandle_v9_t **recvDevComm);
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                          void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                          void **mhandles, void **request);
    ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                           void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *sendComm);
    ncclResult_t (*closeRecv)(void *recvComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v9_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t *config, void *handle,
                            void **sendComm, ncclNetDeviceHandle_v10_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm,
                           ncclNetDeviceHandle_v10_t **recvDevComm);
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                          void *phandle, void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                          void **mhandles, void **phandles, void **request);
    ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                           void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *sendComm);
    ncclResult_t (*closeRecv)(void *recvComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v10_t *props);
} ncclNet_v10_t;

/* Sizes NCCL's own headers give on LP64 targets: a guard against a slip in the above. */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(ncclNetDeviceHandle_v8_t) == 32, "ncclNetDeviceHandle layout");
_Static_assert(sizeof(ncclNetProperties_v8_t) == 64, "ncclNetProperties_v8_t layout");
_Static_assert(offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56,
               "ncclNetProperties_v8_t layout");
_Static_assert(sizeof(ncclNetProperties_v9_t) == 104, "ncclNetProperties_v9_t layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88,
               "ncclNetProperties_v9_t layout");
_Static_assert(sizeof(ncclNetProperties_v10_t) == 104, "ncclNetProperties_v10_t layout");
_Static_assert(sizeof(ncclNet_v8_t) == 19 * sizeof(void *), "ncclNet_v8_t layout");
_Static_assert(offsetof(ncclNet_v8_t, isend) == 10 * sizeof(void *), "ncclNet_v8_t layout");
_Static_assert(offsetof(ncclNet_v8_t, test) == 13 * sizeof(void *), "ncclNet_v8_t layout");
_Static_assert(sizeof(ncclNet_v9_t) == 20 * sizeof(void *), "ncclNet_v9_t layout");
_Static_assert(sizeof(ncclNet_v10_t) == 20 * sizeof(void *), "ncclNet_v10_t layout");
#endif

#endif
