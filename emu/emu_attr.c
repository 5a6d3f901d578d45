/*
 * What the emulated driver says about an address: pointer attributes
 * (cuPointerGetAttribute, cuPointerGetAttributes) and cuMemGetAddressRange, from the
 * allocation table (emu_mem.c). They speak in device addresses, never of the mirror that
 * strict mode reaches device memory through.
 */
#include <stdbool.h>

#include "emu/emu_int.h"

/* ---- address ranges ---------------------------------------------------------------------- */

CUresult emu_cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr dptr)
{
    CUcontext c;
    emu_alloc_t a;
    CUresult st = emu_ctx_get(&c);
    if (st != CUDA_SUCCESS)
        return st;
    if (!emu_mem_lookup(dptr, &a) || (a.kind != EMU_MEM_DEVICE && a.kind != EMU_MEM_IPC))
        return CUDA_ERROR_NOT_FOUND;
    if (base != NULL)
        *base = (CUdeviceptr)a.base;
    if (size != NULL)
        *size = a.size;
    return CUDA_SUCCESS;
}

/* ---- pointer attributes ------------------------------------------------------------------ */

/*
 * Write attribute attrib of ptr, in the allocation a (kind NONE: memory the driver does
 * not know, whose attributes are zeros), to data, in the type the driver uses for it:
 * CUcontext, unsigned int (memory type, is-managed), CUdeviceptr, void *, int (ordinal),
 * size_t, bool (mapped). INVALID_VALUE for an attribute the emulator does not know, and
 * for a host pointer of device memory, which the host cannot address on a real GPU.
 */
static CUresult attr_write(int attrib, const emu_alloc_t *a, CUdeviceptr ptr, void *data)
{
    bool known = a->kind != EMU_MEM_NONE;
    bool device = a->kind == EMU_MEM_DEVICE || a->kind == EMU_MEM_IPC;
    switch (attrib) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = known ? emu_device_ctx(a->dev) : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = !known ? 0 : device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = known ? ptr : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *(void **)data = known && !device ? (void *)(uintptr_t)ptr : NULL;
        return known && device ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = known ? a->dev : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)a->base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = a->size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(bool *)data = known;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult emu_cuPointerGetAttribute(void *data, int attrib, CUdeviceptr ptr)
{
    emu_alloc_t a;
    CUresult st = emu_check_init();
    if (st != CUDA_SUCCESS)
        return st;
    if (data == NULL || !emu_mem_lookup(ptr, &a))
        return CUDA_ERROR_INVALID_VALUE;
    return attr_write(attrib, &a, ptr, data);
}

/* Unlike the singular call, memory the driver does not know is no error: all zeros. */
CUresult emu_cuPointerGetAttributes(unsigned int n, int *attribs, void **data, CUdeviceptr ptr)
{
    emu_alloc_t a = { .kind = EMU_MEM_NONE };
    CUresult st = emu_check_init();
    if (st != CUDA_SUCCESS)
        return st;
    if (n > 0 && (attribs == NULL || data == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    if (!emu_mem_lookup(ptr, &a))
        a = (emu_alloc_t){ .kind = EMU_MEM_NONE };
    for (unsigned int i = 0; i < n; i++) {
        if (data[i] == NULL)
            return CUDA_ERROR_INVALID_VALUE;
        st = attr_write(attribs[i], &a, ptr, data[i]);
        if (st != CUDA_SUCCESS && attribs[i] != CU_POINTER_ATTRIBUTE_HOST_POINTER)
            return st;
    }
    return CUDA_SUCCESS;
}
