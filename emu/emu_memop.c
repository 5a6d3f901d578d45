/*
 * Stream memory operations of the emulated driver: cuStreamWaitValue32,
 * cuStreamWriteValue32 and cuStreamBatchMemOp (32- and 64-bit waits and writes, memory
 * barriers, flushes of remote writes), and HIP's masked waits (hipStreamWaitValue32 and 64,
 * emu_hip.c): what the host queues, and what a stream's worker does with it.
 *
 * A call's operations become one operation of the stream (EMU_OP_MEMOPS), which its worker
 * runs in their order. Each address must lie in memory the driver knows (device memory,
 * IPC-opened memory, pinned host memory), aligned to its word; a call with one bad
 * operation queues none (INVALID_VALUE). In strict mode an address of another device's
 * memory needs peer access to it (emu_peer.c). Writes are release stores (fenced: what
 * the stream did before is seen first), waits acquire loads, so a barrier or a flush of
 * remote writes has nothing left to do.
 *
 * A wait whose value is not there yet yields the core for at most EMU_SPIN_NS (to whoever
 * is to write it, when that shares this core), then sleeps in futex waits on the word.
 * The futex is shared, not FUTEX_PRIVATE: the word may be mapped by other processes too
 * (an IPC-opened memfd, a shared mapping), and twice in this one (strict mode's mirror),
 * so the kernel must key it by the page, not by the address. Every write of a stream
 * memory operation wakes all the word's waiters. Other stores wake nobody (the host's
 * plain store to a pinned word, a kernel's, a copy's), so each futex wait times out and
 * looks again, EMU_FUTEX_MAX_NS at most after such a store. How soon the first time: a
 * wait on pinned host memory, where the host's plain stores are to be expected, after
 * EMU_FUTEX_MIN_NS, doubling up to EMU_FUTEX_MAX_NS; a wait on device memory, which only
 * the emulator writes (the host cannot in strict mode, nor on a GPU), after
 * EMU_FUTEX_MAX_NS at once: a timer shorter than the scheduler's tick costs a wait that is
 * woken some 15 us more on a VM (measured: a futex ping-pong of two threads, 7 us a round
 * trip without a timer, 22 us with 50 us ones). A 64-bit wait sleeps on the word's first
 * 32 bits, which a 64-bit write wakes.
 */
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "emu/emu_int.h"

#define EMU_SPIN_NS 30000           /* how long a wait yields before it sleeps */
#define EMU_FUTEX_MIN_NS 50000      /* its first sleep on pinned host memory */
#define EMU_FUTEX_MAX_NS 1000000    /* its longest: a store that wakes nobody is seen then */

/* ---- on the worker: waits and writes ---------------------------------------------------- */

static int reached32(uint32_t cur, uint32_t v, unsigned int cond)
{
    switch (cond) {
    case CU_STREAM_WAIT_VALUE_GEQ: return (int32_t)(cur - v) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return cur == v;
    case CU_STREAM_WAIT_VALUE_AND: return (cur & v) != 0;
    default: return ~(cur | v) != 0;     /* CU_STREAM_WAIT_VALUE_NOR */
    }
}

static int reached64(uint64_t cur, uint64_t v, unsigned int cond)
{
    switch (cond) {
    case CU_STREAM_WAIT_VALUE_GEQ: return (int64_t)(cur - v) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return cur == v;
    case CU_STREAM_WAIT_VALUE_AND: return (cur & v) != 0;
    default: return ~(cur | v) != 0;
    }
}

/* HIP's: the word under the mask, compared as a plain number (no wrap-around). */
static int reached_hip(uint64_t cur, uint64_t v, uint64_t mask, unsigned int cond)
{
    cur &= mask;
    switch (cond & ~EMU_WAIT_HIP) {
    case 0: return cur >= v;             /* hipStreamWaitValueGte */
    case 1: return cur == v;             /* Eq */
    case 2: return (cur & v) != 0;       /* And */
    default: return ~(cur | (v & mask)) != 0;    /* Nor */
    }
}

static int memop_reached(const emu_memop_t *m)
{
    int wide = m->kind == EMU_MEMOP_WAIT64;
    uint64_t cur = wide ? __atomic_load_n((uint64_t *)m->addr, __ATOMIC_ACQUIRE)
                        : __atomic_load_n((uint32_t *)m->addr, __ATOMIC_ACQUIRE);
    if (m->cond & EMU_WAIT_HIP)
        return reached_hip(cur, m->v, wide ? m->mask : (uint32_t)m->mask, m->cond);
    return wide ? reached64(cur, m->v, m->cond) : reached32((uint32_t)cur, (uint32_t)m->v, m->cond);
}

/* Sleep while *word is cur, ns at most. A wake, another value, a signal: all just return. */
static void futex_wait(uint32_t *word, uint32_t cur, long ns)
{
    struct timespec ts = { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
    syscall(SYS_futex, word, FUTEX_WAIT, cur, &ts, NULL, 0);
}

static void futex_wake(uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void memop_wait(const emu_memop_t *m)
{
    uint32_t *word = m->addr;
    if (memop_reached(m))
        return;
    uint64_t until = emu_now_ns() + EMU_SPIN_NS;
    do {
        sched_yield();
        if (memop_reached(m))
            return;
    } while (emu_now_ns() < until);
    long ns = m->pinned ? EMU_FUTEX_MIN_NS : EMU_FUTEX_MAX_NS;
    for (;;) {
        uint32_t cur = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        if (memop_reached(m))     /* after cur: a write since then makes the sleep return */
            return;
        futex_wait(word, cur, ns);
        ns = ns * 2 > EMU_FUTEX_MAX_NS ? EMU_FUTEX_MAX_NS : ns * 2;
    }
}

void emu_memops_run(const emu_op_t *op)
{
    for (unsigned int i = 0; i < op->u.nmemops; i++) {
        const emu_memop_t *m = &op->memop[i];
        switch (m->kind) {
        case EMU_MEMOP_WAIT32:
        case EMU_MEMOP_WAIT64:
            memop_wait(m);
            break;
        case EMU_MEMOP_WRITE32:
            __atomic_store_n((uint32_t *)m->addr, (uint32_t)m->v, __ATOMIC_RELEASE);
            futex_wake(m->addr);
            break;
        case EMU_MEMOP_WRITE64:
            __atomic_store_n((uint64_t *)m->addr, m->v, __ATOMIC_RELEASE);
            futex_wake(m->addr);
            break;
        case EMU_MEMOP_NOP:
            break;
        }
    }
}

/* ---- what the host queues ---------------------------------------------------------------- */

/* A wait or a write of one word at addr: its flags and address checked, into m. A write's
 * flags are 0: the _v2 API, which the emulator exports, has no
 * CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER. */
static CUresult value_prepare(emu_memop_kind_t kind, CUdeviceptr addr, uint64_t v,
                              unsigned int flags, emu_memop_t *m)
{
    int wait = kind == EMU_MEMOP_WAIT32 || kind == EMU_MEMOP_WAIT64;
    size_t width = kind == EMU_MEMOP_WAIT32 || kind == EMU_MEMOP_WRITE32 ? 4 : 8;
    unsigned int cond = flags & ~(unsigned int)CU_STREAM_WAIT_VALUE_FLUSH;
    void *host;
    if (wait ? cond > CU_STREAM_WAIT_VALUE_NOR : flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    emu_mem_kind_t mem = addr % width == 0 ? emu_mem_find(addr, width, &host) : EMU_MEM_NONE;
    if (mem == EMU_MEM_NONE)
        return CUDA_ERROR_INVALID_VALUE;
    *m = (emu_memop_t){ .kind = kind, .cond = wait ? cond : 0,
                        .pinned = mem == EMU_MEM_HOST_ALLOC || mem == EMU_MEM_HOST_REG,
                        .addr = host, .v = width == 4 ? (uint32_t)v : v };
    return CUDA_SUCCESS;
}

/* One operation of a batch, checked, into m. */
static CUresult memop_prepare(const CUstreamBatchMemOpParams *p, emu_memop_t *m)
{
    const struct CUstreamMemOpWaitValueParams_st *w = &p->waitValue;
    const struct CUstreamMemOpWriteValueParams_st *x = &p->writeValue;
    switch (p->operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        return value_prepare(EMU_MEMOP_WAIT32, w->address, w->value, w->flags, m);
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        return value_prepare(EMU_MEMOP_WRITE32, x->address, x->value, x->flags, m);
    case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        return value_prepare(EMU_MEMOP_WAIT64, w->address, w->value64, w->flags, m);
    case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        return value_prepare(EMU_MEMOP_WRITE64, x->address, x->value64, x->flags, m);
    case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        m->kind = EMU_MEMOP_NOP;
        return p->flushRemoteWrites.flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_STREAM_MEM_OP_BARRIER:
        m->kind = EMU_MEMOP_NOP;
        return p->memoryBarrier.flags == CU_STREAM_MEMORY_BARRIER_TYPE_SYS ||
                       p->memoryBarrier.flags == CU_STREAM_MEMORY_BARRIER_TYPE_GPU
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Strict mode, once all are checked: an address of another device needs peer access. */
static void memops_reach(const CUstreamBatchMemOpParams *params, unsigned int count,
                         CUdevice dev, const char *call)
{
    void *host;
    for (unsigned int i = 0; i < count; i++) {
        CUstreamBatchMemOpType t = params[i].operation;
        if (t == CU_STREAM_MEM_OP_WAIT_VALUE_32 || t == CU_STREAM_MEM_OP_WAIT_VALUE_64)
            emu_mem_reach(params[i].waitValue.address, 1, dev, call, &host);
        else if (t == CU_STREAM_MEM_OP_WRITE_VALUE_32 || t == CU_STREAM_MEM_OP_WRITE_VALUE_64)
            emu_mem_reach(params[i].writeValue.address, 1, dev, call, &host);
    }
}

/* Queue count operations (1 to BRAID_CU_BATCH_MEM_OP_MAX) on stream, as one, under call's
 * name; none if one is bad. flags: the batch's, 0. */
static CUresult memops_queue(CUstream stream, unsigned int count,
                             const CUstreamBatchMemOpParams *params, unsigned int flags,
                             const char *call)
{
    CUstream s;
    CUresult st = emu_stream_get(stream, &s);
    if (st != CUDA_SUCCESS)
        return st;
    if (count == 0 || count > BRAID_CU_BATCH_MEM_OP_MAX || params == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    emu_op_t *op = calloc(1, sizeof(*op) + count * sizeof(emu_memop_t));
    if (op == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (unsigned int i = 0; i < count && st == CUDA_SUCCESS; i++)
        st = memop_prepare(&params[i], &op->memop[i]);
    if (st != CUDA_SUCCESS) {
        free(op);
        return st;
    }
    if (emu_strict())
        memops_reach(params, count, s->ctx->dev, call);
    op->kind = EMU_OP_MEMOPS;
    op->u.nmemops = count;
    emu_stream_push(s, op, 0);
    return CUDA_SUCCESS;
}

/* One HIP wait: checked as memops_queue checks CUDA's, then queued alone. */
CUresult emu_stream_wait_masked(CUstream stream, CUdeviceptr addr, uint64_t value,
                                uint64_t mask, int wide, unsigned int cond, const char *call)
{
    CUstream s;
    void *host;
    CUresult st = emu_stream_get(stream, &s);
    if (st != CUDA_SUCCESS)
        return st;
    emu_memop_kind_t kind = wide ? EMU_MEMOP_WAIT64 : EMU_MEMOP_WAIT32;
    emu_op_t *op = calloc(1, sizeof(*op) + sizeof(emu_memop_t));
    if (op == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    st = cond <= CU_STREAM_WAIT_VALUE_NOR ? value_prepare(kind, addr, value, 0, &op->memop[0])
                                          : CUDA_ERROR_INVALID_VALUE;
    if (st != CUDA_SUCCESS) {
        free(op);
        return st;
    }
    op->memop[0].cond = EMU_WAIT_HIP | cond;
    op->memop[0].mask = mask;
    if (emu_strict())
        emu_mem_reach(addr, 1, s->ctx->dev, call, &host);
    op->kind = EMU_OP_MEMOPS;
    op->u.nmemops = 1;
    emu_stream_push(s, op, 0);
    return CUDA_SUCCESS;
}

CUresult emu_cuStreamBatchMemOp(CUstream stream, unsigned int count,
                                CUstreamBatchMemOpParams *params, unsigned int flags)
{
    return memops_queue(stream, count, params, flags, "cuStreamBatchMemOp");
}

CUresult emu_cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, uint32_t value,
                                 unsigned int flags)
{
    CUstreamBatchMemOpParams p = { .waitValue = { .operation = CU_STREAM_MEM_OP_WAIT_VALUE_32,
                                                  .address = addr, .value = value,
                                                  .flags = flags } };
    return memops_queue(stream, 1, &p, 0, "cuStreamWaitValue32");
}

CUresult emu_cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, uint32_t value,
                                  unsigned int flags)
{
    CUstreamBatchMemOpParams p = { .writeValue = { .operation = CU_STREAM_MEM_OP_WRITE_VALUE_32,
                                                   .address = addr, .value = value,
                                                   .flags = flags } };
    return memops_queue(stream, 1, &p, 0, "cuStreamWriteValue32");
}
