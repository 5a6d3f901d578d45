/*
 * The host build of the GPU kernels, as the emulated driver (emu/) runs them.
 *
 * Each kernel of kernels/gpu (the .hip files), compiled for the host, becomes an entry
 * `void fn(void **params)` that runs ONE thread of the grid: the one named by the
 * thread-local indices below, which the emulator sets before each call. The emulator runs
 * a launch on the stream's worker thread as one thread of a grid of one block of one
 * (braid's kernels loop grid-stride, so it does all the work), or with BRAID_EMU_FULL_GRID=1
 * every (block, thread) of the launch in turn; so kernels must not use __syncthreads or
 * shared memory (braid's kernels do not).
 * params[i] points at a copy of parameter i, of param_sizes[i] bytes.
 *
 * Device addresses are not always where the host reaches the bytes: in the emulator's
 * strict mode the host cannot touch device memory (a load or store faults, as on a GPU),
 * and reaches it through a second mapping. So before the first thread runs, the emulator
 * calls the kernel's params_to_host once per launch, on its copies of the parameters; it
 * rewrites the device addresses inside them with braid_emu_host_addr (compat/host's
 * hip_runtime.h knows which: braid_kargs_t's in[], out[], premul_ptr, msg and msg_err).
 */
#ifndef BRAID_KERNELS_GPU_EMU_ABI_H
#define BRAID_KERNELS_GPU_EMU_ABI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct braid_emu_dim3 {
    unsigned int x, y, z;
} braid_emu_dim3_t;

/*
 * The emulator's thread-locals (these, and its current context) are initial-exec, in each
 * thread's static TLS block, though the emulator is loaded with dlopen. Dynamic TLS comes
 * from malloc at a thread's first access, through __tls_get_addr, and GCC 12's sanitizer
 * runtime, intercepting it, takes a block that starts 16 bytes into a page for one behind
 * glibc 2.19's header: it reads the block's range from the 16 bytes before it, which hold
 * the allocator's chunk header. LeakSanitizer's check at exit scans that range for every
 * live thread that touched the block, and its tracer dies of SIGSEGV. Every declaration
 * needs the attribute: one without it makes its accesses dynamic again.
 */
#define BRAID_EMU_TLS __thread __attribute__((tls_model("initial-exec")))

/* Defined by the kernels' host build; set by the emulator. */
extern BRAID_EMU_TLS braid_emu_dim3_t braid_emu_threadIdx, braid_emu_blockIdx,
    braid_emu_blockDim, braid_emu_gridDim;

#define BRAID_EMU_MAX_PARAMS 4

typedef struct braid_emu_kernel {
    const char *name;                           /* as cuModuleGetFunction asks for it */
    void (*fn)(void **params);
    void (*params_to_host)(void **params);      /* once per launch, before fn */
    int nparams;
    size_t param_sizes[BRAID_EMU_MAX_PARAMS];
} braid_emu_kernel_t;

/* Every kernel, ended by an entry whose name is NULL. */
extern const braid_emu_kernel_t braid_emu_kernels[];

/*
 * Defined by the emulator: where the host reaches device address p (its second mapping,
 * in strict mode); any other pointer unchanged. Weak: the kernels' host build also runs
 * without the emulator (tests/unit/test_gpu_kernels), where every address is the host's.
 */
void *braid_emu_host_addr(const void *p) __attribute__((weak));

#ifdef __cplusplus
}
#endif

#endif
