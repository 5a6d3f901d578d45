/*
 * Modules and kernel launches of the emulated driver.
 *
 * The only image it loads is the one that starts with BRAID_EMU_IMAGE_MAGIC (NUL
 * included): its kernels are the host build of kernels/gpu, the table braid_emu_kernels[]
 * (kernels/gpu/emu_abi.h). Any other image (cubin, fatbin, PTX) is CUDA_ERROR_INVALID_IMAGE,
 * so braid falls back through its list of images as it would on a real driver.
 *
 * A launch copies its parameters, then the stream's worker runs the kernel. braid's kernels
 * loop grid-stride, so by default one thread does a launch's work: the kernel runs once,
 * as thread 0 of block 0 of a grid of one block of one thread, far faster than a thread
 * at a time. BRAID_EMU_FULL_GRID=1 runs every (block, thread) of the launch's grid in
 * turn, setting the thread-local indices before each call, for kernels that are not
 * grid-stride. In strict mode a kernel's device addresses of another device's memory need
 * peer access (emu_peer.c): checked as the launch is queued, while its parameters are
 * turned into host addresses. BRAID_EMU_STALL_LAUNCH=N makes the process's N-th launch
 * never end (braid's fault tests).
 * In strict mode each kernel runs in its device's time slice (emu_lock.c), and functions
 * load lazily: cuModuleGetFunction gives a handle, and the first cuLaunchKernel or
 * cuFuncGetAttribute loads it, on the calling thread, under the driver lock (exclusive),
 * as CUDA 12.2 and later may. Without it they count as loaded with their module.
 *
 * The table and the indices are weak here: the emulator builds, links and runs without the
 * kernels' library (every name is then CUDA_ERROR_NOT_FOUND).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/emu_int.h"
#include "kernels/gpu/kargs.h"

extern const braid_emu_kernel_t braid_emu_kernels[] __attribute__((weak));
extern BRAID_EMU_TLS braid_emu_dim3_t braid_emu_threadIdx __attribute__((weak));
extern BRAID_EMU_TLS braid_emu_dim3_t braid_emu_blockIdx __attribute__((weak));
extern BRAID_EMU_TLS braid_emu_dim3_t braid_emu_blockDim __attribute__((weak));
extern BRAID_EMU_TLS braid_emu_dim3_t braid_emu_gridDim __attribute__((weak));

#define EMU_MAX_BLOCK 1024              /* threads per block */
#define EMU_MAX_SHMEM (48 * 1024)
#define EMU_PARAM_ALIGN 16

struct CUfunc_st {
    uint32_t magic;
    int loaded;                     /* atomic; strict mode loads lazily: func_load */
    const braid_emu_kernel_t *k;
};

struct CUmod_st {
    uint32_t magic;
    int nfuncs;
    struct CUfunc_st *funcs;        /* one per kernel of the table */
};

struct emu_launch {
    const braid_emu_kernel_t *k;
    CUdevice dev;
    uint64_t number;                      /* of the process's launches, from 1 */
    braid_emu_dim3_t grid, block;
    void *params[BRAID_EMU_MAX_PARAMS];   /* into data */
    _Alignas(EMU_PARAM_ALIGN) unsigned char data[];
};

static uint64_t launches;               /* cuLaunchKernel calls queued; atomic */

static int kernel_count(void)
{
    int n = 0;
    if (braid_emu_kernels == NULL)
        return 0;
    while (braid_emu_kernels[n].name != NULL)
        n++;
    return n;
}

/* Does the image start with the magic string, NUL included? Reads no further than it. */
static int image_is_ours(const char *image)
{
    const char *magic = BRAID_EMU_IMAGE_MAGIC;
    size_t i = 0;
    while (image[i] == magic[i] && magic[i] != '\0')
        i++;
    return image[i] == '\0' && magic[i] == '\0';
}

static CUresult module_load(CUmodule *mod, const void *image, int eager)
{
    CUcontext c;
    CUresult st = emu_ctx_get(&c);
    if (st != CUDA_SUCCESS)
        return st;
    if (mod == NULL || image == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!image_is_ours(image))
        return CUDA_ERROR_INVALID_IMAGE;
    CUmodule m = calloc(1, sizeof(*m));
    int n = kernel_count();
    if (m == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->funcs = calloc((size_t)n + 1, sizeof(*m->funcs));
    if (m->funcs == NULL) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < n; i++)
        m->funcs[i] = (struct CUfunc_st){ .magic = EMU_FUNC_MAGIC,
                                          .loaded = eager || !emu_strict(),
                                          .k = &braid_emu_kernels[i] };
    m->nfuncs = n;
    m->magic = EMU_MODULE_MAGIC;
    *mod = m;
    return CUDA_SUCCESS;
}

CUresult emu_cuModuleLoadData(CUmodule *mod, const void *image)
{
    emu_lock_holder_t h;
    emu_lock(&h, EMU_LOCK_EXCLUSIVE, "cuModuleLoadData", EMU_WAITS_NOTHING);
    CUresult st = module_load(mod, image, 0);
    emu_unlock(&h);
    return st;
}

CUresult emu_module_load_whole(CUmodule *mod, const void *image, const char *call)
{
    emu_lock_holder_t h;
    emu_lock(&h, EMU_LOCK_EXCLUSIVE, call, EMU_WAITS_NOTHING);
    CUresult st = module_load(mod, image, 1);
    emu_unlock(&h);
    return st;
}

/* Launches already queued keep running: they hold the kernel, not the module. */
CUresult emu_cuModuleUnload(CUmodule mod)
{
    CUresult st = emu_check_init();
    if (st != CUDA_SUCCESS)
        return st;
    if (mod == NULL || mod->magic != EMU_MODULE_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    for (int i = 0; i < mod->nfuncs; i++)
        mod->funcs[i].magic = 0;
    mod->magic = 0;
    free(mod->funcs);
    free(mod);
    return CUDA_SUCCESS;
}

CUresult emu_cuModuleGetFunction(CUfunction *fn, CUmodule mod, const char *name)
{
    CUresult st = emu_check_init();
    if (st != CUDA_SUCCESS)
        return st;
    if (mod == NULL || mod->magic != EMU_MODULE_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    if (fn == NULL || name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < mod->nfuncs; i++) {
        if (strcmp(mod->funcs[i].k->name, name) == 0) {
            *fn = &mod->funcs[i];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}

/*
 * Load f, if it is not yet: strict mode does it lazily, as CUDA 12.2 and later may, on the
 * thread that first launches f or asks for its attributes, under the driver lock (call
 * names it there). The load itself is nothing: the kernels are linked in.
 */
static void func_load(CUfunction f, const char *call)
{
    emu_lock_holder_t h;
    if (__atomic_load_n(&f->loaded, __ATOMIC_ACQUIRE))
        return;
    emu_lock(&h, EMU_LOCK_EXCLUSIVE, call, EMU_WAITS_NOTHING);
    __atomic_store_n(&f->loaded, 1, __ATOMIC_RELEASE);
    emu_unlock(&h);
}

/* A function attribute's value, or -1 for one the emulator does not know. */
static int func_attribute(int attrib)
{
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return EMU_MAX_BLOCK;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: return 0;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: return 0;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: return 0;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: return 32;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: return 80;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: return 80;
    default: return -1;
    }
}

/* Loads f too, the way NVIDIA documents to force a lazy load. */
CUresult emu_cuFuncGetAttribute(int *pi, int attrib, CUfunction f)
{
    CUresult st = emu_check_init();
    if (st != CUDA_SUCCESS)
        return st;
    if (f == NULL || f->magic != EMU_FUNC_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    int v = func_attribute(attrib);
    if (pi == NULL || v < 0)
        return CUDA_ERROR_INVALID_VALUE;
    func_load(f, "cuFuncGetAttribute (load)");
    *pi = v;
    return CUDA_SUCCESS;
}

/* ---- launches ---------------------------------------------------------------------------- */

static size_t param_offset(size_t off)
{
    return (off + EMU_PARAM_ALIGN - 1) & ~(size_t)(EMU_PARAM_ALIGN - 1);
}

/* A launch of k on a stream of dev with copies of its parameters, taken now, their device
 * addresses turned to where the emulator reaches them now, while they are known
 * (emu_abi.h), and in strict mode checked for peer access. */
static struct emu_launch *launch_new(const braid_emu_kernel_t *k, void **params, CUdevice dev)
{
    size_t size = 0;
    for (int i = 0; i < k->nparams; i++)
        size = param_offset(size) + k->param_sizes[i];
    struct emu_launch *l = calloc(1, sizeof(*l) + size);
    if (l == NULL)
        return NULL;
    l->k = k;
    size = 0;
    for (int i = 0; i < k->nparams; i++) {
        size = param_offset(size);
        l->params[i] = l->data + size;
        memcpy(l->params[i], params[i], k->param_sizes[i]);
        size += k->param_sizes[i];
    }
    emu_mem_launching("cuLaunchKernel", dev);
    k->params_to_host(l->params);
    emu_mem_launching(NULL, 0);
    l->dev = dev;
    return l;
}

/* Parameter i's alignment in a packed buffer: the largest power of two that divides its
 * size, 16 at most (the alignment of the types kernels take). */
static size_t packed_align(size_t size)
{
    size_t a = 1;
    while (a < 16 && size % (a * 2) == 0)
        a *= 2;
    return a;
}

CUresult emu_launch_unpack(CUfunction f, void *buf, size_t size, void **params)
{
    size_t off = 0;
    if (f == NULL || f->magic != EMU_FUNC_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    if (buf == NULL && size > 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < f->k->nparams; i++) {
        size_t a = packed_align(f->k->param_sizes[i]);
        off = (off + a - 1) / a * a;
        params[i] = (unsigned char *)buf + off;
        off += f->k->param_sizes[i];
    }
    return off == size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static int dims_ok(unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                   unsigned int by, unsigned int bz)
{
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
        return 0;
    if (gx > 0x7fffffffu || gy > 65535 || gz > 65535 || bz > 64)
        return 0;
    return bx <= EMU_MAX_BLOCK && by <= EMU_MAX_BLOCK &&
           (uint64_t)bx * by * bz <= EMU_MAX_BLOCK;
}

CUresult emu_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                            unsigned int bx, unsigned int by, unsigned int bz,
                            unsigned int shmem, CUstream stream, void **params, void **extra)
{
    CUstream s;
    CUresult st = emu_stream_get(stream, &s);
    if (st != CUDA_SUCCESS)
        return st;
    if (f == NULL || f->magic != EMU_FUNC_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    if (extra != NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!dims_ok(gx, gy, gz, bx, by, bz) || shmem > EMU_MAX_SHMEM ||
        f->k->nparams > BRAID_EMU_MAX_PARAMS || (f->k->nparams > 0 && params == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    func_load(f, "cuLaunchKernel (lazy load)");
    emu_op_t *op = emu_op_new(EMU_OP_LAUNCH);
    struct emu_launch *l = launch_new(f->k, params, s->ctx->dev);
    if (op == NULL || l == NULL) {
        free(op);
        free(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    l->grid = (braid_emu_dim3_t){ gx, gy, gz };
    l->block = (braid_emu_dim3_t){ bx, by, bz };
    l->number = __atomic_add_fetch(&launches, 1, __ATOMIC_RELAXED);
    op->u.launch = l;
    emu_stream_push(s, op, 0);
    return CUDA_SUCCESS;
}

static void run_block(const struct emu_launch *l)
{
    for (unsigned int z = 0; z < l->block.z; z++)
        for (unsigned int y = 0; y < l->block.y; y++)
            for (unsigned int x = 0; x < l->block.x; x++) {
                braid_emu_threadIdx = (braid_emu_dim3_t){ x, y, z };
                l->k->fn((void **)l->params);
            }
}

/*
 * BRAID_EMU_STALL_LAUNCH's launch, on its worker: blocks for ever, as a hung kernel, so
 * its stream never gets past it. exit() does not wait for workers, so the process still
 * ends normally.
 */
static __attribute__((noreturn)) void launch_stall(const struct emu_launch *l)
{
    emu_warn("BRAID_EMU_STALL_LAUNCH=%llu: launch %llu (%s) never ends",
             (unsigned long long)l->number, (unsigned long long)l->number, l->k->name);
    for (;;)
        pause();
}

/* Every thread of every block, one after the other (BRAID_EMU_FULL_GRID=1). */
static void run_grid(const struct emu_launch *l)
{
    braid_emu_gridDim = l->grid;
    braid_emu_blockDim = l->block;
    for (unsigned int z = 0; z < l->grid.z; z++)
        for (unsigned int y = 0; y < l->grid.y; y++)
            for (unsigned int x = 0; x < l->grid.x; x++) {
                braid_emu_blockIdx = (braid_emu_dim3_t){ x, y, z };
                run_block(l);
            }
}

/* One thread that stands for the grid: a grid-stride kernel does all its work there. */
static void run_one(const struct emu_launch *l)
{
    static const braid_emu_dim3_t one = { 1, 1, 1 }, zero = { 0, 0, 0 };
    braid_emu_gridDim = one;
    braid_emu_blockDim = one;
    braid_emu_blockIdx = zero;
    braid_emu_threadIdx = zero;
    l->k->fn((void **)l->params);
}

/* On the stream's worker. */
void emu_launch_run(struct emu_launch *l)
{
    emu_slice_enter(l->dev);
    if (l->number == emu_stall_launch())
        launch_stall(l);
    if (emu_full_grid())
        run_grid(l);
    else
        run_one(l);
    emu_slice_exit(l->dev);
}

void emu_launch_free(struct emu_launch *l)
{
    free(l);
}
