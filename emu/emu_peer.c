/*
 * Peer access between the emulated devices, and strict mode's check of it.
 *
 * Every device can reach every other, as on one NVLink switch: cuDeviceCanAccessPeer
 * answers 1 for two different devices and 0 for a device and itself (as CUDA does), and
 * cuDeviceGetP2PAttribute answers for a link of the best kind (rank 0, access and native
 * atomics supported). cuCtxEnablePeerAccess(peer, 0) lets the current context reach the
 * memory of peer's device, one way; each context keeps the set of devices it may reach.
 *
 * Strict mode (BRAID_EMU_STRICT=1) holds work to it as a GPU does: a kernel or a stream
 * memory operation queued on a stream of device A that touches device memory of device
 * B != A (cuMemAlloc'd on B, or opened by IPC from a process that allocated it on B) needs
 * A's context to have enabled peer access to B, or the IPC mapping to have been opened
 * with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, which enables it for that mapping, whatever
 * device's stream uses it. Otherwise it is a GPU fault: a line on stderr naming the call,
 * the address, both devices and what was missing, then abort(), as a real GPU kills the
 * context with an illegal-address error. The check is made when the work is queued
 * (emu_mem_reach), where the caller's stack still says who queued it; every device
 * address in a kernel's arguments counts as touched (braid zeroes those it does not use).
 *
 * Not checked: copies and memsets (cuMemcpyAsync, cuMemcpyDtoDAsync, cuMemsetD8Async ...)
 * between devices, which CUDA allows without peer access (the driver stages them), and
 * pinned host memory, which every device reaches. Outside strict mode nothing is checked.
 */
#include <stdio.h>
#include <stdlib.h>

#include "emu/emu_int.h"

static uint64_t peer_bit(CUdevice dev)
{
    return (uint64_t)1 << dev;
}

int emu_peer_enabled(CUdevice dev, CUdevice home)
{
    if (dev == home)
        return 1;
    uint64_t peers = __atomic_load_n(&emu_device_ctx(dev)->peers, __ATOMIC_ACQUIRE);
    return (peers & peer_bit(home)) != 0;
}

void emu_peer_fault(const char *call, CUdeviceptr p, CUdevice dev, const emu_alloc_t *a)
{
    emu_warn("strict: GPU fault: %s on a stream of device %d touches %#llx, device %d's "
             "memory (%s), but device %d's context has not enabled peer access to device %d "
             "(cuCtxEnablePeerAccess)%s: a GPU would stop the context with an illegal "
             "address; aborting", call, (int)dev, (unsigned long long)p, (int)a->home,
             a->kind == EMU_MEM_IPC ? "opened by IPC" : "cuMemAlloc'd there", (int)dev,
             (int)a->home,
             a->kind == EMU_MEM_IPC ? ", nor was the IPC handle opened with "
                                      "CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS" : "");
    abort();
}

/* ---- devices ----------------------------------------------------------------------------- */

CUresult emu_cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer)
{
    CUresult st = emu_device_check(dev);
    if (st == CUDA_SUCCESS)
        st = emu_device_check(peer);
    if (st == CUDA_SUCCESS && can == NULL)
        st = CUDA_ERROR_INVALID_VALUE;
    if (st == CUDA_SUCCESS)
        *can = dev != peer;
    return st;
}

/* The value of a link's attribute, or -1 for one the emulator does not know. */
static int p2p_attribute(int attrib)
{
    switch (attrib) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: return 0;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED: return 1;
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED: return 1;
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED: return 1;
    case CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED: return 0;
    default: return -1;
    }
}

/* A link is between two different devices: INVALID_DEVICE for a device and itself. */
CUresult emu_cuDeviceGetP2PAttribute(int *value, int attrib, CUdevice src, CUdevice dst)
{
    CUresult st = emu_device_check(src);
    if (st == CUDA_SUCCESS)
        st = emu_device_check(dst);
    if (st == CUDA_SUCCESS && src == dst)
        st = CUDA_ERROR_INVALID_DEVICE;
    if (st != CUDA_SUCCESS)
        return st;
    int v = p2p_attribute(attrib);
    if (value == NULL || v < 0)
        return CUDA_ERROR_INVALID_VALUE;
    *value = v;
    return CUDA_SUCCESS;
}

/* ---- contexts ---------------------------------------------------------------------------- */

/* The current context, in *self_p, and peer: a context of the driver, active. */
static CUresult peer_contexts(CUcontext peer, CUcontext *self_p)
{
    CUresult st = emu_ctx_get(self_p);
    if (st != CUDA_SUCCESS)
        return st;
    if (peer == NULL || peer->magic != EMU_CTX_MAGIC ||
        __atomic_load_n(&peer->refs, __ATOMIC_ACQUIRE) <= 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_SUCCESS;
}

/* One way: the current context reaches peer's memory. INVALID_CONTEXT when peer is it. */
CUresult emu_cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
    CUcontext self;
    CUresult st = peer_contexts(peer, &self);
    if (st != CUDA_SUCCESS)
        return st;
    if (peer == self)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t was = __atomic_fetch_or(&self->peers, peer_bit(peer->dev), __ATOMIC_ACQ_REL);
    return was & peer_bit(peer->dev) ? CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED : CUDA_SUCCESS;
}

/* Work already queued was checked when it was queued: it runs as it is. */
CUresult emu_cuCtxDisablePeerAccess(CUcontext peer)
{
    CUcontext self;
    CUresult st = peer_contexts(peer, &self);
    if (st != CUDA_SUCCESS)
        return st;
    uint64_t was = __atomic_fetch_and(&self->peers, ~peer_bit(peer->dev), __ATOMIC_ACQ_REL);
    return was & peer_bit(peer->dev) ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
}
