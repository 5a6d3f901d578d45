/*
 * Copies and memsets of the emulated driver. Each is an operation on a stream's queue;
 * the synchronous calls (cuMemcpyHtoD, cuMemsetD8, ...) queue theirs on the default stream
 * and wait for it (in strict mode, legacy-stream synchronisation holds: emu_stream.c). A
 * call that waits for its stream holds strict mode's driver lock shared meanwhile
 * (emu_lock.c).
 *
 * Device pointers are checked against the allocation table: the range must lie in one
 * allocation the driver made, mapped or pinned (INVALID_VALUE otherwise, where a GPU
 * would fault); the operation gets where the emulator reaches it (in strict mode the host
 * cannot touch device memory: emu_mem.c). A host pointer may be any memory; pageable (not
 * pinned) host memory makes an async copy synchronous, as on the real driver (through a
 * staging buffer there). Copies and memsets between devices need no peer access, even in
 * strict mode: CUDA stages copies where the devices cannot reach each other (emu_peer.c).
 */
#include "emu/emu_int.h"

/* A copy's side: host (any memory; pinned or not) or device (memory the driver made). */
typedef enum { EMU_HOST, EMU_DEV } emu_side_t;

/* Is [p, p + n) fine for this side of a copy? *pinned: is it memory the driver knows?
 * *host_p: where the emulator reaches it (emu_mem_find). */
static int side_ok(CUdeviceptr p, size_t n, emu_side_t side, int *pinned, void **host_p)
{
    emu_mem_kind_t kind = emu_mem_find(p, n, host_p);
    *pinned = kind != EMU_MEM_NONE;
    return side == EMU_HOST || kind != EMU_MEM_NONE;
}

/*
 * Queue op on s; with wait, return once it has run, holding the driver lock shared
 * meanwhile, as the real driver does (strict mode: emu_lock.c), under call's name.
 */
static void push(CUstream s, emu_op_t *op, int wait, const char *call)
{
    emu_lock_holder_t h;
    if (wait)
        emu_lock(&h, EMU_LOCK_SHARED, call, EMU_WAITS_STREAM);
    emu_stream_push(s, op, wait);
    if (wait)
        emu_unlock(&h);
}

/* Queue a copy of n bytes on stream; wait for it if sync, or if a host side is pageable.
 * call names it: "cuMemcpyDtoH", "cuMemcpyDtoHAsync (pageable)". */
static CUresult copy(const char *call, CUstream stream, CUdeviceptr dst, emu_side_t dside,
                     CUdeviceptr src, emu_side_t sside, size_t n, int sync)
{
    CUstream s;
    int dpinned, spinned;
    void *dhost, *shost;
    CUresult st = emu_stream_get(stream, &s);
    if (st != CUDA_SUCCESS || n == 0)
        return st;
    if (!side_ok(dst, n, dside, &dpinned, &dhost) || !side_ok(src, n, sside, &spinned, &shost))
        return CUDA_ERROR_INVALID_VALUE;
    emu_op_t *op = emu_op_new(EMU_OP_COPY);
    if (op == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.copy.dst = dhost;
    op->u.copy.src = shost;
    op->u.copy.n = n;
    push(s, op, sync || !dpinned || !spinned, call);
    return CUDA_SUCCESS;
}

#define PTR(p) ((CUdeviceptr)(uintptr_t)(p))

CUresult emu_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes)
{
    return copy("cuMemcpy", NULL, dst, EMU_HOST, src, EMU_HOST, bytes, 1);
}

CUresult emu_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)
{
    return copy("cuMemcpyAsync (pageable)", stream, dst, EMU_HOST, src, EMU_HOST, bytes, 0);
}

CUresult emu_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes)
{
    return copy("cuMemcpyHtoD", NULL, dst, EMU_DEV, PTR(src), EMU_HOST, bytes, 1);
}

CUresult emu_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes)
{
    return copy("cuMemcpyDtoH", NULL, PTR(dst), EMU_HOST, src, EMU_DEV, bytes, 1);
}

CUresult emu_cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t bytes)
{
    return copy("cuMemcpyDtoD", NULL, dst, EMU_DEV, src, EMU_DEV, bytes, 1);
}

CUresult emu_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream)
{
    return copy("cuMemcpyHtoDAsync (pageable)", stream, dst, EMU_DEV, PTR(src), EMU_HOST,
                bytes, 0);
}

CUresult emu_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream stream)
{
    return copy("cuMemcpyDtoHAsync (pageable)", stream, PTR(dst), EMU_HOST, src, EMU_DEV,
                bytes, 0);
}

CUresult emu_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)
{
    return copy("cuMemcpyDtoDAsync", stream, dst, EMU_DEV, src, EMU_DEV, bytes, 0);
}

/* Queue a memset of n elements of width bytes (1, 2, 4): dst device memory, aligned. */
static CUresult set(const char *call, CUstream stream, CUdeviceptr dst, uint32_t v, size_t n,
                    size_t width, int sync)
{
    static const emu_op_kind_t kinds[] = { [1] = EMU_OP_SET8, [2] = EMU_OP_SET16,
                                           [4] = EMU_OP_SET32 };
    CUstream s;
    void *host;
    CUresult st = emu_stream_get(stream, &s);
    if (st != CUDA_SUCCESS || n == 0)
        return st;
    if (dst % width != 0 || n > SIZE_MAX / width ||
        emu_mem_find(dst, n * width, &host) == EMU_MEM_NONE)
        return CUDA_ERROR_INVALID_VALUE;
    emu_op_t *op = emu_op_new(kinds[width]);
    if (op == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.set.dst = host;
    op->u.set.v = v;
    op->u.set.n = n;
    push(s, op, sync, call);
    return CUDA_SUCCESS;
}

CUresult emu_cuMemsetD8(CUdeviceptr dst, unsigned char v, size_t n)
{
    return set("cuMemsetD8", NULL, dst, v, n, 1, 1);
}

CUresult emu_cuMemsetD16(CUdeviceptr dst, unsigned short v, size_t n)
{
    return set("cuMemsetD16", NULL, dst, v, n, 2, 1);
}

CUresult emu_cuMemsetD32(CUdeviceptr dst, unsigned int v, size_t n)
{
    return set("cuMemsetD32", NULL, dst, v, n, 4, 1);
}

CUresult emu_cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream stream)
{
    return set("cuMemsetD8Async", stream, dst, v, n, 1, 0);
}

CUresult emu_cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream stream)
{
    return set("cuMemsetD16Async", stream, dst, v, n, 2, 0);
}

CUresult emu_cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream stream)
{
    return set("cuMemsetD32Async", stream, dst, v, n, 4, 0);
}
