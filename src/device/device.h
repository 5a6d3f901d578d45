/*
 * The device seam: GPU runtimes behind one ops table (DESIGN.md section 3).
 *
 * Backends: "cuda" (the CUDA driver, libcuda.so.1, every entry through cuGetProcAddress),
 * "hip" (libamdhip64.so.7/.6/.5, reusing a copy the process already loaded) and "host" (no
 * GPU: every pointer is host memory, nothing else is offered). Runtimes are dlopened at
 * first need; libbraid links neither. braid_device() returns the backend in use: the first
 * of cuda, hip whose runtime loads and sees a device, else host. BRAID_DEVICE=host|cuda|hip
 * forces one (a forced backend that cannot load is an error, reported once).
 *
 * Streams, events and modules are the runtime's own handles (CUstream, hipStream_t, ...),
 * passed as void *. A stream of NULL is the runtime's default stream. Every call made on a
 * thread first binds that thread to the device (braid_device_bind), as the runtimes
 * require a current device or context per thread.
 */
#ifndef BRAID_DEVICE_DEVICE_H
#define BRAID_DEVICE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum {
    BRAID_MEM_HOST = 0,      /* pageable host memory, or memory no runtime knows */
    BRAID_MEM_PINNED,        /* page-locked host memory, mapped for the device */
    BRAID_MEM_MANAGED,       /* managed (unified) memory */
    BRAID_MEM_DEVICE,        /* device memory of device `ordinal` */
} braid_mem_kind_t;

typedef struct braid_ptr_info {
    braid_mem_kind_t kind;
    int ordinal;             /* device of DEVICE/MANAGED memory, else -1 */
    void *dptr;              /* PINNED: where kernels reach it (NULL: not mapped) */
} braid_ptr_info_t;

#define BRAID_IPC_HANDLE_BYTES 64
typedef struct braid_ipc_handle {
    char bytes[BRAID_IPC_HANDLE_BYTES];
} braid_ipc_handle_t;

/*
 * A stream memory operation on a word of device memory (this device's, or a peer's as
 * mapped here: IPC-opened, or another device's with peer access), or of pinned host
 * memory as the device reaches it:
 *   BRAID_MEM_WAIT      until (int32_t)(*addr - value) >= 0 (32 bits)
 *   BRAID_MEM_WAIT_EQ   until *addr == value (32 bits)
 *   BRAID_MEM_WRITE     *addr = value (32 bits), fenced: the stream's earlier work is
 *                       visible before the word changes
 *   BRAID_MEM_WRITE64   the same, 64 bits (addr 8-byte aligned)
 */
enum { BRAID_MEM_WAIT = 0, BRAID_MEM_WAIT_EQ, BRAID_MEM_WRITE, BRAID_MEM_WRITE64 };

typedef struct braid_mem_op {
    void *addr;
    uint64_t value;
    int kind;
} braid_mem_op_t;

#define BRAID_MEM_OPS_MAX 16        /* per stream_mem_ops call */

typedef struct braid_device_ops {
    const char *name;                                   /* "cuda", "hip", "host" */
    /* Worth loading when not asked for by name (BRAID_DEVICE=auto): the process has the
     * runtime already, or the machine has the vendor's GPU driver. */
    int (*present)(void);
    /* Load the runtime and count its devices (0 is not an error here). */
    braid_status_t (*init)(int *ndev_p);
    braid_status_t (*ptr_info)(const void *p, braid_ptr_info_t *info_p);
    braid_status_t (*bind)(int ordinal);                /* this thread uses that device */
    /* The device this thread uses now (its current context's; CUDA's runtime and PyTorch
     * set it), or -1 when it has none yet. */
    braid_status_t (*current)(int *ordinal_p);
    /* The thread's current context as a handle (NULL: none), and making one current: a
     * communicator queues its work in the context it was made in, whatever the calling
     * thread's is (one thread may drive ranks on several devices). */
    braid_status_t (*ctx_get)(void **ctx_p);
    braid_status_t (*ctx_set)(void *ctx);
    braid_status_t (*describe)(int ordinal, char *buf, size_t len);   /* name, arch */
    braid_status_t (*mem_alloc)(size_t bytes, void **p_p);
    braid_status_t (*mem_free)(void *p);
    braid_status_t (*host_alloc)(size_t bytes, void **p_p);   /* pinned, device-mapped */
    braid_status_t (*host_free)(void *p);
    /* Pin and map existing host memory (a transport's slots) for the device, and undo. */
    braid_status_t (*host_register)(void *p, size_t bytes);
    braid_status_t (*host_unregister)(void *p);
    braid_status_t (*copy_async)(void *dst, const void *src, size_t bytes, void *stream);
    braid_status_t (*memset_async)(void *dst, int byte, size_t bytes, void *stream);
    braid_status_t (*stream_create)(void **stream_p);
    braid_status_t (*stream_destroy)(void *stream);
    braid_status_t (*stream_sync)(void *stream);
    braid_status_t (*stream_capturing)(void *stream, int *yes_p);
    braid_status_t (*event_create)(void **ev_p);
    braid_status_t (*event_destroy)(void *ev);
    braid_status_t (*event_record)(void *ev, void *stream);
    braid_status_t (*event_query)(void *ev);            /* OK: done; INPROGRESS: not yet */
    braid_status_t (*stream_wait_event)(void *stream, void *ev);
    /* The stream waits until (int32_t)(*word - value) >= 0; `word` is in host_alloc memory. */
    braid_status_t (*stream_wait_word)(void *stream, uint32_t *word, uint32_t value);
    braid_status_t (*stream_write_word)(void *stream, uint32_t *word, uint32_t value);
    /* Queue n (at most BRAID_MEM_OPS_MAX) waits and writes on device words, in order. */
    braid_status_t (*stream_mem_ops)(void *stream, const braid_mem_op_t *ops, int n);
    /* May device dev's kernels and stream operations reach device peer's memory, once the
     * bound device enabled it (peer_enable; enabling twice is no error)? */
    braid_status_t (*peer_access)(int dev, int peer, int *yes_p);
    braid_status_t (*peer_enable)(int peer);
    braid_status_t (*ipc_get)(void *p, braid_ipc_handle_t *h_p);
    braid_status_t (*ipc_open)(const braid_ipc_handle_t *h, void **p_p);
    braid_status_t (*ipc_close)(void *p);
    /* Load braid's kernels for the bound device (device/kernels.c picks the image). */
    braid_status_t (*module_load)(const void *image, size_t size, void **mod_p);
    /* A kernel of a loaded module, loaded now: a driver that loads kernels lazily (CUDA
     * from 12.2) would otherwise load it at its first launch, under a lock that a
     * caller's pageable copy may hold while its stream waits for that very launch. */
    braid_status_t (*module_function)(void *mod, const char *name, void **fn_p);
    braid_status_t (*launch)(void *fn, unsigned grid, unsigned block, void *arg,
                             size_t arg_bytes, void *stream);
    /* Compile kernel source at run time for the bound device (hiprtc); NULL where the
     * runtime has no such path (CUDA JITs the PTX embedded in its image instead). */
    braid_status_t (*compile)(const char *source, void **image_p, size_t *size_p);
} braid_device_ops_t;

extern const braid_device_ops_t braid_device_host;
extern const braid_device_ops_t braid_device_cuda;
extern const braid_device_ops_t braid_device_hip;

/* The backend in use (initialised on first call; never NULL: host when no GPU). */
const braid_device_ops_t *braid_device(void);
/* Devices the backend sees (0 for host). */
int braid_device_count(void);

/* Memory the device's kernels should reach directly (shared-memory slots): registered with
 * the GPU backend in use, if any; where that fails, slices copy through bounce buffers
 * instead (said at INFO). Unmap before the memory goes. */
void braid_device_map_host(int ordinal, void *p, size_t bytes);
void braid_device_unmap_host(void *p);
/* Work braid queued on a device never finished (a kernel that hangs): from then on, no
 * device memory is freed and no host memory unmapped for the device in this process, as
 * the driver would wait for that work first (and so would a caller's abort). */
void braid_device_set_stuck(void);
int braid_device_stuck(void);


/*
 * Host-buffer calls on a machine where a runtime is loaded but braid has no backend for
 * it (or BRAID_DEVICE=host): whether calls check that buffers are CPU-readable
 * (BRAID_HOST_PTR_CHECK=1, or =auto and a GPU runtime is loaded), and that check.
 */
int braid_device_check_wanted(void);
braid_status_t braid_device_check_host(const void *p, const char *what, const char *arg);

/*
 * Waiting for the device, bounded: the wait polls (spin, yield, then sleeps up to 1 ms) and
 * every few milliseconds asks check(arg, seconds waited so far): a status < 0 from it ends
 * the wait with that status (the communicator was aborted, or BRAID_TIMEOUT passed: the
 * check says what was waited for). No wait on the device blocks inside the driver.
 */
typedef struct braid_device_wait {
    braid_status_t (*check)(void *arg, double waited_s);
    void *arg;
} braid_device_wait_t;

/* The device the calling thread uses (its current context's), else 0, as CUDA's runtime
 * defaults to device 0. */
int braid_device_current(void);
/* Wait until event ev (recorded on some stream) has completed. */
braid_status_t braid_device_event_wait(void *ev, const braid_device_wait_t *w);

#endif
