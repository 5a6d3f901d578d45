/*
 * Memory of the emulated driver, and the table that knows every piece of it.
 *
 * Device memory is host memory: one memfd per cuMemAlloc, mapped shared and filled with
 * a garbage pattern (a library that reads what it never wrote sees NaNs and large
 * negative numbers, not zeros). The memfd stays open while the allocation lives, so an
 * IPC handle can name it as (owner pid, fd): the opener maps /proc/<pid>/fd/<fd>.
 * Pinned host memory (cuMemHostAlloc, cuMemHostRegister) is ordinary memory whose device
 * pointer is its host pointer, as with unified addressing.
 *
 * In strict mode the host cannot touch device memory, as on a GPU: its device address is
 * a PROT_NONE reservation (a load or store there is a SIGSEGV), and the bytes live in a
 * second mapping of the memfd, the mirror, that only the emulator uses: copies, memsets,
 * stream memory operations and kernels reach device memory through emu_mem_find and
 * braid_emu_host_addr, which give the mirror address of a device address. (No CPU here
 * has memory protection keys, which would make one mapping do.) Without strict mode the
 * mirror is the device address itself. Pointer attributes, address ranges and IPC handles
 * speak in device addresses.
 *
 * The table (sorted by address, behind one mutex) answers pointer attributes and address
 * ranges (emu_attr.c), the checks copies, memsets, stream memory operations and launches
 * make on device pointers, and the mirror address of each. It knows the device whose
 * memory each allocation is (an IPC handle carries the exporter's), for strict mode's
 * check of peer access (emu_peer.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emu/emu_int.h"

#define EMU_GARBAGE 0xfff1deadu   /* NaN as float and double, large and negative as int */

static struct {
    pthread_mutex_t lock;
    emu_alloc_t *v;                 /* sorted by base; ranges do not overlap */
    size_t n, cap;
} table = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* ---- the table (callers hold table.lock) ------------------------------------------------- */

/* The index of the first entry that starts above p. */
static size_t table_upper(uintptr_t p)
{
    size_t lo = 0, hi = table.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (table.v[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The entry that holds all of [p, p + n) (n == 0 counts as 1), or NULL. */
static emu_alloc_t *table_find(uintptr_t p, size_t n)
{
    size_t i = table_upper(p);
    if (i == 0)
        return NULL;
    emu_alloc_t *a = &table.v[i - 1];
    size_t off = p - a->base;
    if (off >= a->size || (n > 0 && n > a->size - off))
        return NULL;
    return a;
}

static bool table_overlaps(uintptr_t p, size_t n)
{
    size_t i = table_upper(p);
    if (i > 0 && table.v[i - 1].base + table.v[i - 1].size > p)
        return true;
    return i < table.n && table.v[i].base < p + n;
}

static CUresult table_add(const emu_alloc_t *a)
{
    if (table.n == table.cap) {
        size_t cap = table.cap ? 2 * table.cap : 64;
        emu_alloc_t *v = realloc(table.v, cap * sizeof(*v));
        if (v == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        table.v = v;
        table.cap = cap;
    }
    size_t i = table_upper(a->base);
    memmove(&table.v[i + 1], &table.v[i], (table.n - i) * sizeof(*a));
    table.v[i] = *a;
    table.n++;
    return CUDA_SUCCESS;
}

static void table_remove(emu_alloc_t *a)
{
    size_t i = (size_t)(a - table.v);
    memmove(&table.v[i], &table.v[i + 1], (table.n - i - 1) * sizeof(*a));
    table.n--;
}

int emu_mem_lookup(CUdeviceptr p, emu_alloc_t *a_p)
{
    pthread_mutex_lock(&table.lock);
    emu_alloc_t *a = table_find((uintptr_t)p, 1);
    if (a != NULL)
        *a_p = *a;
    pthread_mutex_unlock(&table.lock);
    return a != NULL;
}

/* Take the entry that starts at p, of kind, out of the table: true if there was one. */
static bool table_take(CUdeviceptr p, emu_mem_kind_t kind, emu_alloc_t *a_p)
{
    pthread_mutex_lock(&table.lock);
    emu_alloc_t *a = table_find((uintptr_t)p, 1);
    bool found = a != NULL && a->base == (uintptr_t)p && a->kind == kind;
    if (found) {
        *a_p = *a;
        table_remove(a);
    }
    pthread_mutex_unlock(&table.lock);
    return found;
}

/* The entry that holds all of [p, p + n), copied to *a_p: its kind, NONE if none. */
static emu_mem_kind_t mem_find(CUdeviceptr p, size_t n, emu_alloc_t *a_p)
{
    pthread_mutex_lock(&table.lock);
    emu_alloc_t *a = table_find((uintptr_t)p, n);
    *a_p = a != NULL ? *a : (emu_alloc_t){ .kind = EMU_MEM_NONE, .home = -1 };
    pthread_mutex_unlock(&table.lock);
    return a_p->kind;
}

static void *mem_host(CUdeviceptr p, const emu_alloc_t *a)
{
    return (void *)(a->kind != EMU_MEM_NONE ? a->mirror + ((uintptr_t)p - a->base)
                                            : (uintptr_t)p);
}

emu_mem_kind_t emu_mem_find(CUdeviceptr p, size_t n, void **host_p)
{
    emu_alloc_t a;
    emu_mem_kind_t kind = mem_find(p, n, &a);
    *host_p = mem_host(p, &a);
    return kind;
}

emu_mem_kind_t emu_mem_reach(CUdeviceptr p, size_t n, CUdevice dev, const char *call,
                             void **host_p)
{
    emu_alloc_t a;
    emu_mem_kind_t kind = mem_find(p, n, &a);
    if (emu_strict() && a.home >= 0 && !a.lazy_peer && !emu_peer_enabled(dev, a.home))
        emu_peer_fault(call, p, dev, &a);
    *host_p = mem_host(p, &a);
    return kind;
}

/* The launch whose parameters this thread turns into host addresses: call NULL if none. */
static BRAID_EMU_TLS const char *launch_call;
static BRAID_EMU_TLS CUdevice launch_dev;

void emu_mem_launching(const char *call, CUdevice dev)
{
    launch_call = call;
    launch_dev = dev;
}

/* The kernels' translation (kernels/gpu/emu_abi.h), once per launch and address. */
void *braid_emu_host_addr(const void *p)
{
    void *host;
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;
    if (launch_call != NULL)
        emu_mem_reach(d, 1, launch_dev, launch_call, &host);
    else
        emu_mem_find(d, 1, &host);
    return host;
}

static CUresult table_insert(const emu_alloc_t *a)
{
    pthread_mutex_lock(&table.lock);
    CUresult st = table_add(a);
    pthread_mutex_unlock(&table.lock);
    return st;
}

/* Wait for every stream of every device: before memory any of them may use goes away. */
static void sync_all(void)
{
    for (int d = 0; d < emu_device_count(); d++)
        emu_ctx_sync(emu_device_ctx(d));
}

/* ---- device memory ----------------------------------------------------------------------- */

static void garbage_fill(void *p, size_t n)
{
    uint32_t *w = p, g = EMU_GARBAGE;
    size_t i;
    for (i = 0; i < n / sizeof(g); i++)
        w[i] = g;
    memcpy(&w[i], &g, n % sizeof(g));
}

/*
 * Map bytes of memfd fd: the mirror, and the device address, which in strict mode is a
 * PROT_NONE reservation of its own (the host cannot touch it), else the mirror. 0 on
 * success; -1 with errno set.
 */
static int device_map(int fd, size_t bytes, uintptr_t *base_p, uintptr_t *mirror_p)
{
    void *mirror = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mirror == MAP_FAILED)
        return -1;
    void *base = mirror;
    if (emu_strict())
        base = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        int err = errno;
        munmap(mirror, bytes);
        errno = err;
        return -1;
    }
    *base_p = (uintptr_t)base;
    *mirror_p = (uintptr_t)mirror;
    return 0;
}

static void device_unmap(const emu_alloc_t *a)
{
    if (a->base != a->mirror)
        munmap((void *)a->base, a->size);
    munmap((void *)a->mirror, a->size);
}

/* A fresh memfd of bytes, mapped: its fd and inode in a_p. */
static CUresult memfd_map(size_t bytes, emu_alloc_t *a_p)
{
    struct stat sb;
    uintptr_t base, mirror;
    int fd = memfd_create("braid-emu-device", MFD_CLOEXEC);
    if (fd < 0) {
        emu_warn("cuMemAlloc: memfd_create failed: %s (too many open files? raise ulimit -n)",
                 strerror(errno));
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (ftruncate(fd, (off_t)bytes) != 0 || fstat(fd, &sb) != 0 ||
        device_map(fd, bytes, &base, &mirror) != 0)
        goto out_close;
    *a_p = (emu_alloc_t){ .base = base, .mirror = mirror, .size = bytes,
                          .kind = EMU_MEM_DEVICE, .home = -1, .fd = fd,
                          .ino = (uint64_t)sb.st_ino };
    return CUDA_SUCCESS;
out_close:
    emu_warn("cuMemAlloc: cannot map a memfd of %zu bytes: %s", bytes, strerror(errno));
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult mem_alloc(CUdeviceptr *dptr, size_t bytes)
{
    CUcontext c;
    emu_alloc_t a;
    CUresult st = emu_ctx_get(&c);
    if (st != CUDA_SUCCESS)
        return st;
    if (dptr == NULL || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    st = memfd_map(bytes, &a);
    if (st != CUDA_SUCCESS)
        return st;
    a.dev = c->dev;
    a.home = c->dev;
    garbage_fill((void *)a.mirror, bytes);
    st = table_insert(&a);
    if (st != CUDA_SUCCESS) {
        device_unmap(&a);
        close(a.fd);
        return st;
    }
    *dptr = (CUdeviceptr)a.base;
    return CUDA_SUCCESS;
}

CUresult emu_cuMemAlloc(CUdeviceptr *dptr, size_t bytes)
{
    emu_lock_holder_t h;
    emu_lock(&h, EMU_LOCK_EXCLUSIVE, "cuMemAlloc", EMU_WAITS_NOTHING);
    CUresult st = mem_alloc(dptr, bytes);
    emu_unlock(&h);
    return st;
}

/* Like the real driver's, cuMemFree waits for the device's work first. */
static CUresult mem_free(CUdeviceptr dptr)
{
    CUcontext c;
    emu_alloc_t a;
    CUresult st = emu_ctx_get(&c);
    if (st != CUDA_SUCCESS)
        return st;
    if (!table_take(dptr, EMU_MEM_DEVICE, &a))
        return CUDA_ERROR_INVALID_VALUE;
    emu_ctx_sync(emu_device_ctx(a.dev));
    device_unmap(&a);
    close(a.fd);
    return CUDA_SUCCESS;
}

CUresult emu_cuMemFree(CUdeviceptr dptr)
{
    emu_lock_holder_t h;
    emu_lock(&h, EMU_LOCK_EXCLUSIVE, "cuMemFree", EMU_WAITS_DEVICE);
    CUresult st = mem_free(dptr);
    emu_unlock(&h);
    return st;
}

/* ---- pinned host memory ------------------------------------------------------------------ */

static CUresult host_alloc(void **pp, size_t bytes, unsigned int flags)
{
    const unsigned int known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                               CU_MEMHOSTALLOC_WRITECOMBINED;
    CUcontext c;
    CUresult st = emu_ctx_get(&c);
    if (st != CUDA_SUCCESS)
        return st;
    if (pp == NULL || bytes == 0 || (flags & ~known) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        emu_warn("cuMemHostAlloc: cannot map %zu bytes: %s", bytes, strerror(errno));
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    emu_alloc_t a = { .base = (uintptr_t)p, .mirror = (uintptr_t)p, .size = bytes,
                      .kind = EMU_MEM_HOST_ALLOC, .dev = c->dev, .home = -1, .fd = -1 };
    st = table_insert(&a);
    if (st != CUDA_SUCCESS) {
        munmap(p, bytes);
        return st;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult emu_cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags)
{
    emu_lock_holder_t h;
    emu_lock(&h, EMU_LOCK_EXCLUSIVE, "cuMemHostAlloc", EMU_WAITS_NOTHING);
    CUresult st = host_alloc(pp, bytes, flags);
    emu_unlock(&h);
    return st;
}

static CUresult host_free(void *p)
{
    emu_alloc_t a;
    CUresult st = emu_check_init();
    if (st != CUDA_SUCCESS)
        return st;
    if (!table_take((CUdeviceptr)(uintptr_t)p, EMU_MEM_HOST_ALLOC, &a))
        return CUDA_ERROR_INVALID_VALUE;
    sync_all();
    munmap(p, a.size);
    return CUDA_SUCCESS;
}

CUresult emu_cuMemFreeHost(void *p)
{
    emu_lock_holder_t h;
    emu_lock(&h, EMU_LOCK_EXCLUSIVE, "cuMemFreeHost", EMU_WAITS_DEVICE);
    CUresult st = host_free(p);
    emu_unlock(&h);
    return st;
}

static CUresult host_register(void *p, size_t bytes, unsigned int flags)
{
    const unsigned int known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                               CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
    CUcontext c;
    CUresult st = emu_ctx_get(&c);
    if (st != CUDA_SUCCESS)
        return st;
    if (p == NULL || bytes == 0 || (flags & ~known) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (emu_no_host_register())
        return CUDA_ERROR_NOT_SUPPORTED;
    emu_alloc_t a = { .base = (uintptr_t)p, .mirror = (uintptr_t)p, .size = bytes,
                      .kind = EMU_MEM_HOST_REG, .dev = c->dev, .home = -1, .fd = -1 };
    pthread_mutex_lock(&table.lock);
    if (table_overlaps(a.base, bytes))
        st = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    else
        st = table_add(&a);
    pthread_mutex_unlock(&table.lock);
    return st;
}

CUresult emu_cuMemHostRegister(void *p, size_t bytes, unsigned int flags)
{
    emu_lock_holder_t h;
    emu_lock(&h, EMU_LOCK_EXCLUSIVE, "cuMemHostRegister", EMU_WAITS_NOTHING);
    CUresult st = host_register(p, bytes, flags);
    emu_unlock(&h);
    return st;
}

static CUresult host_unregister(void *p)
{
    emu_alloc_t a;
    CUresult st = emu_check_init();
    if (st != CUDA_SUCCESS)
        return st;
    if (!table_take((CUdeviceptr)(uintptr_t)p, EMU_MEM_HOST_REG, &a))
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    sync_all();
    return CUDA_SUCCESS;
}

CUresult emu_cuMemHostUnregister(void *p)
{
    emu_lock_holder_t h;
    emu_lock(&h, EMU_LOCK_EXCLUSIVE, "cuMemHostUnregister", EMU_WAITS_DEVICE);
    CUresult st = host_unregister(p);
    emu_unlock(&h);
    return st;
}

CUresult emu_cuMemHostGetDevicePointer(CUdeviceptr *dptr, void *p, unsigned int flags)
{
    CUcontext c;
    emu_alloc_t a;
    CUresult st = emu_ctx_get(&c);
    if (st != CUDA_SUCCESS)
        return st;
    if (dptr == NULL || flags != 0 || !emu_mem_lookup((CUdeviceptr)(uintptr_t)p, &a) ||
        (a.kind != EMU_MEM_HOST_ALLOC && a.kind != EMU_MEM_HOST_REG))
        return CUDA_ERROR_INVALID_VALUE;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/* ---- IPC --------------------------------------------------------------------------------- */

#define EMU_IPC_MAGIC "brdemu2"   /* 2: with the exporter's device */

/* What a CUipcMemHandle holds: enough for another process to map the same memfd. */
typedef struct emu_ipc_handle {
    char magic[8];
    int32_t pid, fd;                /* the owner, and its memfd: /proc/<pid>/fd/<fd> */
    int32_t dev;                    /* the device the owner allocated it on */
    uint64_t ino, size;             /* the memfd's inode (fd numbers are reused) and size */
    uint64_t offset;                /* of the pointer exported, in the allocation */
} emu_ipc_handle_t;

_Static_assert(sizeof(emu_ipc_handle_t) <= CU_IPC_HANDLE_SIZE, "IPC handle too large");

CUresult emu_cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr)
{
    CUcontext c;
    emu_alloc_t a;
    CUresult st = emu_ctx_get(&c);
    if (st != CUDA_SUCCESS)
        return st;
    if (handle == NULL || !emu_mem_lookup(dptr, &a) || a.kind != EMU_MEM_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    emu_ipc_handle_t h = { .magic = EMU_IPC_MAGIC, .pid = (int32_t)getpid(), .fd = a.fd,
                           .dev = a.home, .ino = a.ino, .size = a.size,
                           .offset = dptr - a.base };
    memset(handle, 0, sizeof(*handle));
    memcpy(handle->reserved, &h, sizeof(h));
    return CUDA_SUCCESS;
}

/* Map the owner's memfd (device_map): INVALID_HANDLE if it is gone (or is another file). */
static CUresult ipc_map(const emu_ipc_handle_t *h, uintptr_t *base_p, uintptr_t *mirror_p)
{
    char path[64];
    struct stat sb;
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)h->pid, (int)h->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult st = CUDA_ERROR_INVALID_HANDLE;
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_ino != h->ino || (uint64_t)sb.st_size != h->size)
        goto out_close;
    st = CUDA_ERROR_MAP_FAILED;
    if (device_map(fd, h->size, base_p, mirror_p) != 0) {
        emu_warn("cuIpcOpenMemHandle: cannot map %s (%llu bytes): %s", path,
                 (unsigned long long)h->size, strerror(errno));
        goto out_close;
    }
    st = CUDA_SUCCESS;
out_close:
    close(fd);
    return st;
}

/* An existing mapping of the same memory: its base, and one more reference; 0 if none.
 * Opened with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS (lazy) once, the mapping stays so. */
static uintptr_t ipc_reuse(const emu_ipc_handle_t *h, int lazy)
{
    uintptr_t base = 0;
    pthread_mutex_lock(&table.lock);
    for (size_t i = 0; i < table.n && base == 0; i++) {
        emu_alloc_t *a = &table.v[i];
        if (a->kind == EMU_MEM_IPC && a->owner == h->pid && a->ino == h->ino) {
            a->refs++;
            a->lazy_peer |= lazy;
            base = a->base;
        }
    }
    pthread_mutex_unlock(&table.lock);
    return base;
}

/* Opening the same memory again gives the same mapping, counted, as the real driver does. */
static CUresult ipc_open(CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags)
{
    CUcontext c;
    emu_ipc_handle_t h;
    uintptr_t mirror;
    CUresult st = emu_ctx_get(&c);
    if (st != CUDA_SUCCESS)
        return st;
    if (dptr == NULL || (flags & ~CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&h, handle.reserved, sizeof(h));
    if (memcmp(h.magic, EMU_IPC_MAGIC, sizeof(h.magic)) != 0 || h.offset >= h.size ||
        h.dev < 0 || h.dev >= EMU_MAX_DEVICES)
        return CUDA_ERROR_INVALID_HANDLE;
    if (h.pid == (int32_t)getpid())      /* the real driver refuses its own process's too */
        return CUDA_ERROR_INVALID_CONTEXT;
    int lazy = (flags & CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != 0;
    uintptr_t base = ipc_reuse(&h, lazy);
    if (base == 0) {
        st = ipc_map(&h, &base, &mirror);
        if (st != CUDA_SUCCESS)
            return st;
        emu_alloc_t a = { .base = base, .mirror = mirror, .size = h.size, .kind = EMU_MEM_IPC,
                          .dev = c->dev, .home = h.dev, .lazy_peer = lazy, .fd = -1,
                          .ino = h.ino, .owner = h.pid, .refs = 1 };
        st = table_insert(&a);
        if (st != CUDA_SUCCESS) {
            device_unmap(&a);
            return st;
        }
    }
    *dptr = (CUdeviceptr)(base + h.offset);
    return CUDA_SUCCESS;
}

CUresult emu_cuIpcOpenMemHandle(CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags)
{
    emu_lock_holder_t h;
    emu_lock(&h, EMU_LOCK_EXCLUSIVE, "cuIpcOpenMemHandle", EMU_WAITS_NOTHING);
    CUresult st = ipc_open(dptr, handle, flags);
    emu_unlock(&h);
    return st;
}

static CUresult ipc_close(CUdeviceptr dptr)
{
    CUcontext c;
    emu_alloc_t gone = { .refs = 1 };
    CUresult st = emu_ctx_get(&c);
    if (st != CUDA_SUCCESS)
        return st;
    pthread_mutex_lock(&table.lock);
    emu_alloc_t *a = table_find((uintptr_t)dptr, 1);
    if (a == NULL || a->kind != EMU_MEM_IPC) {
        st = CUDA_ERROR_INVALID_VALUE;
    } else if (--a->refs == 0) {
        gone = *a;
        table_remove(a);
    }
    pthread_mutex_unlock(&table.lock);
    if (gone.refs == 0) {
        emu_ctx_sync(emu_device_ctx(gone.dev));
        device_unmap(&gone);
    }
    return st;
}

CUresult emu_cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    emu_lock_holder_t h;
    emu_lock(&h, EMU_LOCK_EXCLUSIVE, "cuIpcCloseMemHandle", EMU_WAITS_DEVICE);
    CUresult st = ipc_close(dptr);
    emu_unlock(&h);
    return st;
}
