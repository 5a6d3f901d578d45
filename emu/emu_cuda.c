/*
 * The emulated CUDA driver's face: libcuda.so.1's names, and cuGetProcAddress.
 *
 * Every entry of BRAID_CUDA_ENTRIES is exported under its plain name (cuMemAlloc) and its
 * versioned symbol (cuMemAlloc_v2, which a program compiled against NVIDIA's cuda.h links),
 * both lists made from the X-macro, so they cannot drift from it; and cuGetProcAddress
 * (4 arguments) and cuGetProcAddress_v2 (5) give the implementation for a plain name.
 * The implementations (emu_<name>) live in the other files, and a C alias must name a
 * function of its own file; so each plain name is an indirect function (GNU ifunc) whose
 * resolver returns the implementation, and the versioned symbol is an assembler alias of
 * the plain name, made only where the two names differ (.ifnc): a symbol cannot be defined
 * twice. Either name, dlsym and cuGetProcAddress all give the same address.
 */
#include <string.h>

#include "emu/emu_int.h"

/* ---- the exported names ------------------------------------------------------------------ */

/* Resolvers run while the dynamic linker relocates us, before any sanitizer is set up. */
#define EMU_RESOLVER \
    __attribute__((no_sanitize_address, no_sanitize_thread, no_sanitize_undefined, \
                   no_instrument_function)) static

#define EMU_EXPORT(name, vsym, params) \
    EMU_RESOLVER __typeof__(emu_##name) *emu_resolve_##name(void) { return emu_##name; } \
    EMU_API CUresult name params __attribute__((ifunc("emu_resolve_" #name))); \
    __asm__(".ifnc " #name "," #vsym "\n\t" \
            ".globl " #vsym "\n\t" \
            ".type " #vsym ", %gnu_indirect_function\n\t" \
            ".set " #vsym ", " #name "\n" \
            ".endif");
BRAID_CUDA_ENTRIES(EMU_EXPORT)
#undef EMU_EXPORT

/* ---- cuGetProcAddress -------------------------------------------------------------------- */

#define EMU_GET_PROC_V2_VERSION 12000   /* cuGetProcAddress_v2 first came with CUDA 12.0 */

EMU_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version,
                                  uint64_t flags);
EMU_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
                                     uint64_t flags, int *symbol_status);

#define EMU_PROC(name, vsym, params) { #name, (void *)emu_##name },
static const struct {
    const char *name;
    void *fn;
} emu_procs[] = {
    BRAID_CUDA_ENTRIES(EMU_PROC)
};
#undef EMU_PROC

/*
 * The function for a plain name: NULL when there is none. Every name has one version here
 * (the newest), whatever cuda_version asks for; there are no per-thread-stream variants,
 * so CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM gives the legacy ones, as documented.
 */
static void *proc_find(const char *symbol, int cuda_version)
{
    if (strcmp(symbol, "cuGetProcAddress") == 0)
        return cuda_version >= EMU_GET_PROC_V2_VERSION ? (void *)cuGetProcAddress_v2
                                                      : (void *)cuGetProcAddress;
    for (size_t i = 0; i < sizeof(emu_procs) / sizeof(emu_procs[0]); i++)
        if (strcmp(symbol, emu_procs[i].name) == 0)
            return emu_procs[i].fn;
    return NULL;
}

static CUresult proc_args_check(const char *symbol, void **pfn, int cuda_version,
                                uint64_t flags)
{
    const uint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                           CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    if (symbol == NULL || pfn == NULL || (flags & ~known) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* a version newer than the driver's is refused, as the real driver does */
    return cuda_version > EMU_DRIVER_VERSION ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* Not found: CUDA_SUCCESS with *pfn NULL and symbol_status NOT_FOUND, as documented. */
EMU_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
                                     uint64_t flags, int *symbol_status)
{
    CUresult st = proc_args_check(symbol, pfn, cuda_version, flags);
    if (st != CUDA_SUCCESS)
        return st;
    *pfn = proc_find(symbol, cuda_version);
    if (symbol_status != NULL)
        *symbol_status = *pfn != NULL ? CU_GET_PROC_ADDRESS_SUCCESS
                                      : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
}

/* The CUDA 11 form: no status, and not found is CUDA_ERROR_NOT_FOUND, as it was then. */
EMU_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version,
                                  uint64_t flags)
{
    CUresult st = proc_args_check(symbol, pfn, cuda_version, flags);
    if (st != CUDA_SUCCESS)
        return st;
    *pfn = proc_find(symbol, cuda_version);
    return *pfn != NULL ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
