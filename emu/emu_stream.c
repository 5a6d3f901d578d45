/*
 * Streams of the emulated driver: each is one worker thread that runs its queue in order,
 * so work is really asynchronous to the host and to other streams. The NULL stream,
 * CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are one more stream per device (the primary
 * context's), with its own worker.
 *
 * The legacy default stream's implicit synchronisation holds in strict mode only
 * (BRAID_EMU_STRICT=1): an operation queued on the NULL stream first waits for every
 * operation queued before it on the context's blocking streams (created without
 * CU_STREAM_NON_BLOCKING), and one queued on a blocking stream for every operation queued
 * before it on the NULL stream. "Before" is the context's ticket order: each operation
 * takes the next ticket as it is queued, and each stream knows the ticket of its oldest
 * unfinished operation, so a worker waits (on ctx->progress) until no stream it depends on
 * has an unfinished operation older than its own. Without strict mode streams are only
 * ordered by events and stream memory operations, as braid orders them.
 *
 * BRAID_EMU_DELAY_US=N makes every worker sleep N us before each operation, so that a
 * library that reads a buffer before its stream has written it fails its tests.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu/emu_int.h"

#define EMU_NO_TICKET UINT64_MAX /* a stream's oldest unfinished operation when it has none */
#define EMU_NO_WAITER UINT64_MAX /* a stream's wake_at when nobody waits */

/* ---- the operations ---------------------------------------------------------------------- */

emu_op_t *emu_op_new(emu_op_kind_t kind)
{
    emu_op_t *op = calloc(1, sizeof(*op));
    if (op != NULL)
        op->kind = kind;
    return op;
}

static void op_set(emu_op_t *op)
{
    size_t n = op->u.set.n;
    if (op->kind == EMU_OP_SET8) {
        memset(op->u.set.dst, (int)op->u.set.v, n);
    } else if (op->kind == EMU_OP_SET16) {
        uint16_t *d = op->u.set.dst;
        for (size_t i = 0; i < n; i++)
            d[i] = (uint16_t)op->u.set.v;
    } else {
        uint32_t *d = op->u.set.dst;
        for (size_t i = 0; i < n; i++)
            d[i] = op->u.set.v;
    }
}

static void op_run(emu_op_t *op)
{
    switch (op->kind) {
    case EMU_OP_COPY:
        memcpy(op->u.copy.dst, op->u.copy.src, op->u.copy.n);
        break;
    case EMU_OP_SET8:
    case EMU_OP_SET16:
    case EMU_OP_SET32:
        op_set(op);
        break;
    case EMU_OP_LAUNCH:
        emu_launch_run(op->u.launch);
        emu_launch_free(op->u.launch);
        break;
    case EMU_OP_RECORD:
    case EMU_OP_WAIT_EVENT:
        emu_mark_run(op);
        break;
    case EMU_OP_MEMOPS:
        emu_memops_run(op);
        break;
    }
}

/* ---- the worker -------------------------------------------------------------------------- */

/* The next operation, once there is one; NULL once the stream is destroyed and empty. A
 * worker that finds its queue empty yields a while before it sleeps: a library queues its
 * operations one after another, and the next one comes within microseconds, sooner than a
 * sleeping worker wakes (on a core that the ranks share, a wake-up is a context switch). */
static emu_op_t *stream_pop(CUstream s)
{
    pthread_mutex_lock(&s->lock);
    if (s->head == NULL && !s->stopping) {   /* watched without the lock: the producer's */
        uint64_t queued = s->queued, until = emu_now_ns() + EMU_IDLE_NS;
        pthread_mutex_unlock(&s->lock);
        while (__atomic_load_n(&s->queued, __ATOMIC_RELAXED) == queued &&
               emu_now_ns() < until)
            sched_yield();
        pthread_mutex_lock(&s->lock);
    }
    while (s->head == NULL && !s->stopping)
        pthread_cond_wait(&s->work, &s->lock);
    emu_op_t *op = s->head;
    if (op != NULL) {
        s->head = op->next;
        if (s->head == NULL)
            s->tail = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    return op;
}

static void stream_finished(CUstream s)
{
    CUcontext c = s->ctx;
    pthread_mutex_lock(&c->lock);
    pthread_mutex_lock(&s->lock);
    s->finished++;
    s->oldest = s->head != NULL ? s->head->ticket : EMU_NO_TICKET;
    if (s->finished >= s->wake_at) {    /* not at every operation: waiters would spin */
        s->wake_at = EMU_NO_WAITER;
        pthread_cond_broadcast(&s->done);
    }
    pthread_mutex_unlock(&s->lock);
    if (--c->pending == 0)
        pthread_cond_broadcast(&c->idle);
    if (emu_strict())
        pthread_cond_broadcast(&c->progress);
    pthread_mutex_unlock(&c->lock);
}

/* ---- the legacy stream's implicit synchronisation (strict mode) -------------------------- */

static int blocking(CUstream s)
{
    return s != s->ctx->null_stream && !(s->flags & CU_STREAM_NON_BLOCKING);
}

/* May s's operation of this ticket run? Caller holds ctx->lock. */
static int legacy_clear(CUstream s, uint64_t ticket)
{
    CUcontext c = s->ctx;
    if (blocking(s))
        return c->null_stream->oldest >= ticket;
    if (s != c->null_stream)
        return 1;
    for (CUstream b = c->streams; b != NULL; b = b->next)
        if (blocking(b) && b->oldest < ticket)
            return 0;
    return 1;
}

static void legacy_wait(CUstream s, const emu_op_t *op)
{
    CUcontext c = s->ctx;
    pthread_mutex_lock(&c->lock);
    while (!legacy_clear(s, op->ticket))
        pthread_cond_wait(&c->progress, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

/* ---- streams ----------------------------------------------------------------------------- */

static void stream_link(CUstream s)
{
    CUcontext c = s->ctx;
    pthread_mutex_lock(&c->lock);
    s->next = c->streams;
    if (c->streams != NULL)
        c->streams->prev = s;
    c->streams = s;
    pthread_mutex_unlock(&c->lock);
}

static void stream_unlink(CUstream s)
{
    CUcontext c = s->ctx;
    pthread_mutex_lock(&c->lock);
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        c->streams = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    pthread_mutex_unlock(&c->lock);
}

static void stream_free(CUstream s)
{
    pthread_cond_destroy(&s->done);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static void *stream_worker(void *arg)
{
    CUstream s = arg;
    unsigned int delay = emu_delay_us();
    int strict = emu_strict();
    emu_op_t *op;
    while ((op = stream_pop(s)) != NULL) {
        if (strict)
            legacy_wait(s, op);
        if (delay > 0)
            emu_sleep_us(delay);
        op_run(op);
        free(op);
        stream_finished(s);
    }
    stream_unlink(s);
    stream_free(s);         /* destroyed and empty: nobody else holds it now */
    return NULL;
}

/* A stream of ctx with its worker (detached: a destroyed stream frees itself). */
CUresult emu_stream_new(CUcontext ctx, unsigned int flags, CUstream *s_p)
{
    pthread_attr_t attr;
    pthread_t tid;
    CUstream s = calloc(1, sizeof(*s));
    if (s == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->magic = EMU_STREAM_MAGIC;
    s->ctx = ctx;
    s->flags = flags;
    s->oldest = EMU_NO_TICKET;
    s->wake_at = EMU_NO_WAITER;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->done, NULL);
    stream_link(s);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&tid, &attr, stream_worker, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        emu_warn("cannot start a stream's worker thread: %s", strerror(rc));
        stream_unlink(s);
        stream_free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *s_p = s;
    return CUDA_SUCCESS;
}

CUresult emu_stream_get(CUstream handle, CUstream *s_p)
{
    CUcontext c;
    if (handle == NULL || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
        CUresult st = emu_ctx_get(&c);
        if (st == CUDA_SUCCESS)
            *s_p = c->null_stream;
        return st;
    }
    if (emu_check_init() != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (handle->magic != EMU_STREAM_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    *s_p = handle;
    return CUDA_SUCCESS;
}

/* Wait until the seq-th operation queued on s has finished: the worker wakes the waiters
 * once the earliest of their seqs has (each asks again for its own). */
static void stream_wait(CUstream s, uint64_t seq)
{
    pthread_mutex_lock(&s->lock);
    while (s->finished < seq) {
        if (seq < s->wake_at)
            s->wake_at = seq;
        pthread_cond_wait(&s->done, &s->lock);
    }
    pthread_mutex_unlock(&s->lock);
}

/* Tickets are taken and queues grow under ctx->lock, so each queue is in ticket order. */
void emu_stream_push(CUstream s, emu_op_t *op, int wait)
{
    CUcontext c = s->ctx;
    pthread_mutex_lock(&c->lock);
    c->pending++;
    op->ticket = ++c->tickets;
    pthread_mutex_lock(&s->lock);
    uint64_t seq = __atomic_add_fetch(&s->queued, 1, __ATOMIC_RELAXED);   /* stream_pop */
    if (s->oldest == EMU_NO_TICKET)
        s->oldest = op->ticket;
    if (s->tail != NULL)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&c->lock);
    if (wait)
        stream_wait(s, seq);
}

/* Waits until nothing is pending, so work queued meanwhile by other threads is waited for too. */
void emu_ctx_sync(CUcontext ctx)
{
    pthread_mutex_lock(&ctx->lock);
    while (ctx->pending > 0)
        pthread_cond_wait(&ctx->idle, &ctx->lock);
    pthread_mutex_unlock(&ctx->lock);
}

/* ---- stream API -------------------------------------------------------------------------- */

CUresult emu_cuStreamCreate(CUstream *stream, unsigned int flags)
{
    CUcontext c;
    CUresult st = emu_ctx_get(&c);
    if (st != CUDA_SUCCESS)
        return st;
    if (stream == NULL || (flags & ~(unsigned int)CU_STREAM_NON_BLOCKING) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return emu_stream_new(c, flags, stream);
}

/*
 * Returns at once, as the real driver does: the worker runs what is queued, then ends and
 * frees the stream. cuCtxSynchronize still waits for that work.
 */
CUresult emu_cuStreamDestroy(CUstream stream)
{
    CUstream s;
    CUresult st = emu_stream_get(stream, &s);
    if (st != CUDA_SUCCESS)
        return st;
    if (s == s->ctx->null_stream)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&s->lock);
    s->magic = 0;
    s->stopping = 1;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    return CUDA_SUCCESS;
}

CUresult emu_cuStreamSynchronize(CUstream stream)
{
    CUstream s;
    CUresult st = emu_stream_get(stream, &s);
    if (st != CUDA_SUCCESS)
        return st;
    pthread_mutex_lock(&s->lock);
    uint64_t seq = s->queued;
    pthread_mutex_unlock(&s->lock);
    stream_wait(s, seq);
    return CUDA_SUCCESS;
}

CUresult emu_cuStreamQuery(CUstream stream)
{
    CUstream s;
    CUresult st = emu_stream_get(stream, &s);
    if (st != CUDA_SUCCESS)
        return st;
    pthread_mutex_lock(&s->lock);
    st = s->finished == s->queued ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&s->lock);
    return st;
}

CUresult emu_cuStreamIsCapturing(CUstream stream, int *status)
{
    CUstream s;
    CUresult st = emu_stream_get(stream, &s);
    if (st == CUDA_SUCCESS && status == NULL)
        st = CUDA_ERROR_INVALID_VALUE;
    if (st == CUDA_SUCCESS)
        *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return st;
}
