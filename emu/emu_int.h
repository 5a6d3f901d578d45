/*
 * The emulated GPU runtimes on host memory: one engine, shared by its files, and two faces:
 *
 *   emu_cuda.c     the CUDA driver's face (libcuda.so.1): the exported names,
 *                  cuGetProcAddress
 *   emu_hip.c      the HIP runtime's face (libamdhip64.so.5, .so.6, .so.7): HIP's names
 *                  over the engine, its code objects, the releases' differences
 *   emu_hiprtc.c   ROCm 5's hiprtc entries: the installed ROCm's hiprtc, called through
 *   emu.c          cuInit, devices, primary contexts, error strings
 *   emu_mem.c      device memory (one memfd each), host memory, IPC, the allocation table
 *   emu_attr.c     pointer attributes and address ranges: what the table says
 *   emu_peer.c     peer access between devices, and strict mode's check of it
 *   emu_stream.c   streams: one worker thread each, running its queue of operations
 *   emu_copy.c     copies and memsets: what the host queues
 *   emu_memop.c    stream memory operations (waits and writes on 32- and 64-bit words, CUDA's
 *                  and HIP's): what the host queues, and how a worker waits (futex) and wakes
 *   emu_event.c    events
 *   emu_module.c   modules and kernel launches (the host build of kernels/gpu)
 *   emu_lock.c     strict mode's driver lock and time slices
 *
 * Every entry point of device/cuda_abi.h is implemented as emu_<name> (hidden); emu_cuda.c
 * exports each under its plain and its versioned name, and emu_hip.c builds HIP's calls on
 * them. The emulator is a separate library: it includes no braid header but cuda_abi.h,
 * hip_abi.h (the HIP face) and the kernels' ABI (kernels/gpu).
 *
 * Strict mode (BRAID_EMU_STRICT=1, read by cuInit) makes the emulator as unforgiving as a
 * real driver where a library's bugs would otherwise go unseen:
 *   - a driver lock, which serialises allocations and frees with the copies that wait for
 *     their streams, as the real driver's does (emu_lock.c);
 *   - the legacy NULL stream synchronises implicitly with blocking streams (emu_stream.c);
 *   - processes that share a device run their kernels one at a time (emu_lock.c);
 *   - functions load lazily, at their first launch, under the driver lock (emu_module.c);
 *   - the host cannot touch device memory: only the emulator's copies, memsets, stream
 *     memory operations and kernels reach it (emu_mem.c);
 *   - a kernel or a stream memory operation of one device that touches another device's
 *     memory needs peer access to it, else the process aborts as a GPU faults (emu_peer.c).
 */
#ifndef BRAID_DEVICE_EMU_INT_H
#define BRAID_DEVICE_EMU_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "device/cuda_abi.h"
#include "kernels/gpu/emu_abi.h"

#define EMU_HIDDEN __attribute__((visibility("hidden")))
#define EMU_API __attribute__((visibility("default")))

/* The implementations, with the signatures the ABI gives (checked where they are defined). */
#define EMU_DECLARE(name, vsym, params) EMU_HIDDEN CUresult emu_##name params;
BRAID_CUDA_ENTRIES(EMU_DECLARE)
#undef EMU_DECLARE

/* Handle checks: a stale or foreign handle gives CUDA_ERROR_INVALID_HANDLE, not a crash. */
#define EMU_CTX_MAGIC 0x62637478u       /* "bctx" */
#define EMU_STREAM_MAGIC 0x62737472u    /* "bstr" */
#define EMU_EVENT_MAGIC 0x62657674u     /* "bevt" */
#define EMU_MODULE_MAGIC 0x626d6f64u    /* "bmod" */
#define EMU_FUNC_MAGIC 0x62666e63u      /* "bfnc" */

#define EMU_DRIVER_VERSION 13000        /* cuDriverGetVersion: CUDA 13.0 */
#define EMU_MAX_DEVICES 64              /* BRAID_EMU_DEVICES: a context's peers are 64 bits */

/* ---- emu.c: driver state, devices, contexts ------------------------------------------- */

/*
 * A device's primary context. It is active while retained (refs > 0); releasing it to
 * zero leaves its streams and memory in place (the real driver frees them), so only the
 * INVALID_CONTEXT answers of an inactive context are emulated.
 */
struct CUctx_st {
    uint32_t magic;
    CUdevice dev;
    int refs;                       /* retains; atomic */
    struct CUstream_st *null_stream; /* NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD */
    pthread_mutex_t lock;           /* everything below, and the streams' tickets */
    pthread_cond_t idle;            /* pending reached 0 */
    pthread_cond_t progress;        /* strict mode: an operation finished */
    uint64_t pending;               /* queued operations not finished, all streams */
    uint64_t tickets;               /* operations ever queued, all streams: their order */
    struct CUstream_st *streams;    /* every live stream, the null stream too */
    uint64_t peers;                 /* bit d: peer access to device d enabled; atomic */
};

EMU_HIDDEN CUresult emu_check_init(void);
/* The calling thread's current context, active; INVALID_CONTEXT if it has none. */
EMU_HIDDEN CUresult emu_ctx_get(CUcontext *ctx_p);
EMU_HIDDEN int emu_device_count(void);
EMU_HIDDEN CUcontext emu_device_ctx(CUdevice dev);
/* BRAID_EMU_DELAY_US, read by cuInit: what each stream sleeps before each operation. */
EMU_HIDDEN unsigned int emu_delay_us(void);
/* BRAID_EMU_NO_HOST_REGISTER=1: cuMemHostRegister answers NOT_SUPPORTED, as drivers do on
 * some systems (tests the callers' way around it). */
EMU_HIDDEN int emu_no_host_register(void);
/* BRAID_EMU_STALL_LAUNCH=N: the N-th kernel launch of the process (1-based, counted by
 * cuLaunchKernel over all streams) never ends, as a hung kernel; 0 (unset): none. */
EMU_HIDDEN uint64_t emu_stall_launch(void);
EMU_HIDDEN void emu_sleep_us(unsigned int us);
/* BRAID_EMU_STRICT=1, read by cuInit: as unforgiving as a real driver (emu_stream.c, ...). */
EMU_HIDDEN int emu_strict(void);
/* BRAID_EMU_FULL_GRID=1, read by cuInit: a launch runs every thread of its grid, not one
 * thread that stands for them all (emu_module.c). */
EMU_HIDDEN int emu_full_grid(void);
/* A device ordinal that cuInit made: CUDA_SUCCESS, or NOT_INITIALIZED, INVALID_DEVICE. */
EMU_HIDDEN CUresult emu_device_check(CUdevice dev);
/* A failed system call, on stderr: the emulator has no log of its own. */
EMU_HIDDEN void emu_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- emu_mem.c: what the allocation table knows about an address ------------------------ */

typedef enum emu_mem_kind {
    EMU_MEM_NONE = 0,       /* not known: pageable host memory, or nothing */
    EMU_MEM_DEVICE,         /* cuMemAlloc */
    EMU_MEM_IPC,            /* cuIpcOpenMemHandle */
    EMU_MEM_HOST_ALLOC,     /* cuMemHostAlloc */
    EMU_MEM_HOST_REG,       /* cuMemHostRegister */
} emu_mem_kind_t;

/* An entry of the allocation table. */
typedef struct emu_alloc {
    uintptr_t base;                 /* the device address */
    uintptr_t mirror;               /* where the host reaches the bytes (DEVICE, IPC) */
    size_t size;
    emu_mem_kind_t kind;
    CUdevice dev;                   /* where allocated, or current when pinned / opened */
    CUdevice home;                  /* DEVICE, IPC: the device whose memory it is (IPC: the
                                     * exporter's); -1 for host memory */
    int lazy_peer;                  /* IPC: opened with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS */
    int fd;                         /* DEVICE: its memfd; -1 otherwise */
    uint64_t ino;                   /* DEVICE, IPC: the memfd's inode, which handles name */
    pid_t owner;                    /* IPC: the exporting process */
    int refs;                       /* IPC: opens not closed yet */
} emu_alloc_t;

/* The kind of the one allocation that holds all of [p, p + n), NONE if none does; and in
 * *host_p, where the emulator reaches p (device memory's mirror in strict mode, else p). */
EMU_HIDDEN emu_mem_kind_t emu_mem_find(CUdeviceptr p, size_t n, void **host_p);
/* The same for work queued on a stream of device dev, by call: in strict mode, another
 * device's memory without peer access to it is a GPU fault (emu_peer_fault). */
EMU_HIDDEN emu_mem_kind_t emu_mem_reach(CUdeviceptr p, size_t n, CUdevice dev,
                                        const char *call, void **host_p);
/* A copy of the entry that holds p: 0 if none does. */
EMU_HIDDEN int emu_mem_lookup(CUdeviceptr p, emu_alloc_t *a_p);
/* While a launch's parameters are turned into host addresses (braid_emu_host_addr), by
 * call on a stream of dev: they are reached as emu_mem_reach does; call NULL: no launch. */
EMU_HIDDEN void emu_mem_launching(const char *call, CUdevice dev);

/* ---- emu_peer.c: peer access ------------------------------------------------------------ */

/* May work of device dev touch memory of device home (the same device, or peer access)? */
EMU_HIDDEN int emu_peer_enabled(CUdevice dev, CUdevice home);
/* Strict mode's GPU fault: call, on a stream of dev, touched p, memory a of another device,
 * without peer access. Says so on stderr, and aborts. */
EMU_HIDDEN void emu_peer_fault(const char *call, CUdeviceptr p, CUdevice dev,
                               const emu_alloc_t *a) __attribute__((noreturn));

/* ---- emu_lock.c: the driver lock, time slices (strict mode) ------------------------------- */

typedef enum { EMU_LOCK_SHARED, EMU_LOCK_EXCLUSIVE } emu_lock_mode_t;
/* What a holder waits for while it holds the lock (for the message of a long wait). */
typedef enum { EMU_WAITS_NOTHING, EMU_WAITS_STREAM, EMU_WAITS_DEVICE } emu_waits_t;

/* A call that holds the driver lock: its record, on its stack from emu_lock to emu_unlock. */
typedef struct emu_lock_holder {
    struct emu_lock_holder *next, *prev;   /* the holders */
    const char *call;                      /* "cuMemcpyDtoHAsync (pageable)" */
    emu_waits_t waits;
    emu_lock_mode_t mode;
    pid_t tid;
    struct timespec since;                 /* CLOCK_MONOTONIC */
    int held;                              /* strict mode: it holds the lock */
} emu_lock_holder_t;

/* By cuInit in strict mode only: the lock is taken, and kernels sliced, from then on. */
EMU_HIDDEN CUresult emu_lock_init(unsigned int warn_ms, int ndev);
/* Take the lock for call (nothing outside strict mode); emu_unlock(h) releases it. */
EMU_HIDDEN void emu_lock(emu_lock_holder_t *h, emu_lock_mode_t mode, const char *call,
                         emu_waits_t waits);
EMU_HIDDEN void emu_unlock(emu_lock_holder_t *h);
/* Around each kernel run (on a worker): device dev runs one process's kernels at a time. */
EMU_HIDDEN void emu_slice_enter(CUdevice dev);
EMU_HIDDEN void emu_slice_exit(CUdevice dev);

/* ---- emu_stream.c: streams and the operations they run ---------------------------------- */

/* How long a stream's worker yields, waiting for its next operation or an event's mark,
 * before it sleeps (emu_stream.c's stream_pop), and the clock it measures that by. */
#define EMU_IDLE_NS 30000
EMU_HIDDEN uint64_t emu_now_ns(void);

typedef enum emu_op_kind {
    EMU_OP_COPY,
    EMU_OP_SET8,
    EMU_OP_SET16,
    EMU_OP_SET32,
    EMU_OP_LAUNCH,
    EMU_OP_RECORD,          /* complete an event's mark */
    EMU_OP_WAIT_EVENT,      /* wait for a mark */
    EMU_OP_MEMOPS,          /* stream memory operations, in order (emu_memop.c) */
} emu_op_kind_t;

struct emu_mark;
struct emu_launch;

/* A stream memory operation, as the worker runs it. */
typedef enum emu_memop_kind {
    EMU_MEMOP_WAIT32,
    EMU_MEMOP_WRITE32,
    EMU_MEMOP_WAIT64,
    EMU_MEMOP_WRITE64,
    EMU_MEMOP_NOP,          /* a barrier, a flush of remote writes: nothing to do here */
} emu_memop_kind_t;

/* A wait's condition: CUDA's (CU_STREAM_WAIT_VALUE_GEQ, EQ, AND, NOR), or HIP's, which
 * compare the word under a mask and, for GEQ, as plain numbers (not wrapping): the HIP
 * face's EMU_WAIT_HIP | hipStreamWaitValueGte (0), Eq (1), And (2), Nor (3). */
#define EMU_WAIT_HIP 0x100u

typedef struct emu_memop {
    emu_memop_kind_t kind;
    unsigned int cond;      /* a wait's: above */
    uint64_t mask;          /* a HIP wait's */
    int pinned;             /* the word is pinned host memory, not device memory */
    void *addr;             /* where the emulator reaches the word */
    uint64_t v;
} emu_memop_t;

typedef struct emu_op {
    struct emu_op *next;
    emu_op_kind_t kind;
    uint64_t ticket;                /* of the context's operations, in the order queued */
    union {
        struct { void *dst; const void *src; size_t n; } copy;
        struct { void *dst; uint32_t v; size_t n; } set;       /* n elements */
        unsigned int nmemops;   /* EMU_OP_MEMOPS: memop[0 .. nmemops) */
        struct emu_mark *mark;
        struct emu_launch *launch;
    } u;
    emu_memop_t memop[];    /* EMU_OP_MEMOPS: allocated with it (emu_memop.c) */
} emu_op_t;

struct CUstream_st {
    uint32_t magic;
    CUcontext ctx;
    unsigned int flags;             /* cuStreamCreate's: CU_STREAM_NON_BLOCKING or not */
    struct CUstream_st *next, *prev; /* in ctx->streams (ctx->lock) */
    uint64_t oldest;                /* the ticket of its oldest unfinished operation (ctx->lock) */
    pthread_mutex_t lock;           /* everything below */
    pthread_cond_t work;            /* the worker waits here for operations */
    pthread_cond_t done;            /* synchronize waits here */
    emu_op_t *head, *tail;
    uint64_t queued, finished;      /* operations ever queued and finished, in order */
    uint64_t wake_at;               /* wake the waiters once finished reaches it */
    int stopping;                   /* destroyed: the worker ends once the queue is empty */
};

/* The stream a handle names: NULL, LEGACY and PER_THREAD give the current context's. */
EMU_HIDDEN CUresult emu_stream_get(CUstream handle, CUstream *s_p);
EMU_HIDDEN emu_op_t *emu_op_new(emu_op_kind_t kind);
/* Queue op on s; with wait, return once it has run. */
EMU_HIDDEN void emu_stream_push(CUstream s, emu_op_t *op, int wait);
EMU_HIDDEN CUresult emu_stream_new(CUcontext ctx, unsigned int flags, CUstream *s_p);
/* Wait until every operation queued in ctx has finished. */
EMU_HIDDEN void emu_ctx_sync(CUcontext ctx);

/* ---- emu_memop.c: what a stream's worker does for stream memory operations -------------- */

EMU_HIDDEN void emu_memops_run(const emu_op_t *op);     /* EMU_OP_MEMOPS */
/* HIP's hipStreamWaitValue32 and 64 (wide): until (*addr & mask) meets value by cond
 * (hipStreamWaitValueGte, Eq, And, Nor); call names it in strict mode's faults. */
EMU_HIDDEN CUresult emu_stream_wait_masked(CUstream stream, CUdeviceptr addr, uint64_t value,
                                           uint64_t mask, int wide, unsigned int cond,
                                           const char *call);

/* ---- emu_event.c: what a stream's worker does for events -------------------------------- */

EMU_HIDDEN void emu_mark_run(emu_op_t *op);     /* EMU_OP_RECORD, EMU_OP_WAIT_EVENT */

/* ---- emu_module.c: kernel launches, run on a stream's worker ---------------------------- */

EMU_HIDDEN void emu_launch_run(struct emu_launch *l);
/* cuModuleLoadData's load, every function loaded with the module even in strict mode (as
 * HIP loads a code object whole), under call's name. */
EMU_HIDDEN CUresult emu_module_load_whole(CUmodule *mod, const void *image, const char *call);
/* A launch's parameters packed in one buffer of size bytes (what `extra` passes): each at
 * its size's alignment, params[i] into buf (BRAID_EMU_MAX_PARAMS of them at most);
 * INVALID_VALUE where size is not what f's parameters take. */
EMU_HIDDEN CUresult emu_launch_unpack(CUfunction f, void *buf, size_t size, void **params);
EMU_HIDDEN void emu_launch_free(struct emu_launch *l);

#endif
