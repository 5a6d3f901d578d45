/*
 * Events of the emulated driver. Each record makes a mark, which the stream completes
 * (with the time) when it gets there; the event points at its latest mark, and a wait
 * (cuStreamWaitEvent, cuEventSynchronize) holds the mark that was latest when it was
 * asked for, so recording the event again meanwhile changes nothing for it. Marks are
 * counted, so an event or a stream destroyed with work in flight is no problem. One lock
 * and one condition serve all marks: waits are few. Records and waits are operations like
 * any other, so in strict mode those on the NULL stream synchronise with blocking streams
 * (emu_stream.c); none takes the driver lock.
 */
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "emu/emu_int.h"

typedef struct emu_mark {
    int refs;
    int done;
    struct timespec when;       /* when the stream completed it */
} emu_mark_t;

struct CUevent_st {
    uint32_t magic;
    unsigned int flags;
    emu_mark_t *last;           /* the latest record; NULL before the first */
};

static pthread_mutex_t mark_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mark_cond = PTHREAD_COND_INITIALIZER;

/* Callers hold mark_lock. */
static void mark_unref(emu_mark_t *m)
{
    if (m != NULL && --m->refs == 0)
        free(m);
}

/* On a stream's worker: complete a mark (RECORD), or wait for one (WAIT_EVENT). */
void emu_mark_run(emu_op_t *op)
{
    emu_mark_t *m = op->u.mark;
    pthread_mutex_lock(&mark_lock);
    if (op->kind == EMU_OP_RECORD) {
        clock_gettime(CLOCK_MONOTONIC, &m->when);
        __atomic_store_n(&m->done, 1, __ATOMIC_RELEASE);   /* read unlocked below */
        pthread_cond_broadcast(&mark_cond);
    } else {
        uint64_t until = emu_now_ns() + EMU_IDLE_NS;   /* as stream_pop */
        pthread_mutex_unlock(&mark_lock);
        while (!__atomic_load_n(&m->done, __ATOMIC_ACQUIRE) && emu_now_ns() < until)
            sched_yield();
        pthread_mutex_lock(&mark_lock);
        while (!m->done)
            pthread_cond_wait(&mark_cond, &mark_lock);
    }
    mark_unref(m);
    pthread_mutex_unlock(&mark_lock);
}

/* ---- events ------------------------------------------------------------------------------ */

static CUresult event_check(CUevent ev)
{
    CUresult st = emu_check_init();
    if (st == CUDA_SUCCESS && (ev == NULL || ev->magic != EMU_EVENT_MAGIC))
        st = CUDA_ERROR_INVALID_HANDLE;
    return st;
}

CUresult emu_cuEventCreate(CUevent *ev, unsigned int flags)
{
    const unsigned int known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                               CU_EVENT_INTERPROCESS;
    CUcontext c;
    CUresult st = emu_ctx_get(&c);
    if (st != CUDA_SUCCESS)
        return st;
    if (ev == NULL || (flags & ~known) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUevent e = calloc(1, sizeof(*e));
    if (e == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = EMU_EVENT_MAGIC;
    e->flags = flags;
    *ev = e;
    return CUDA_SUCCESS;
}

/* Marks in flight stay until their streams are done with them. */
CUresult emu_cuEventDestroy(CUevent ev)
{
    CUresult st = event_check(ev);
    if (st != CUDA_SUCCESS)
        return st;
    pthread_mutex_lock(&mark_lock);
    ev->magic = 0;
    mark_unref(ev->last);
    pthread_mutex_unlock(&mark_lock);
    free(ev);
    return CUDA_SUCCESS;
}

CUresult emu_cuEventRecord(CUevent ev, CUstream stream)
{
    CUstream s;
    CUresult st = event_check(ev);
    if (st == CUDA_SUCCESS)
        st = emu_stream_get(stream, &s);
    if (st != CUDA_SUCCESS)
        return st;
    emu_op_t *op = emu_op_new(EMU_OP_RECORD);
    emu_mark_t *m = calloc(1, sizeof(*m));
    if (op == NULL || m == NULL) {
        free(op);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->refs = 2;            /* the event's and the operation's */
    op->u.mark = m;
    pthread_mutex_lock(&mark_lock);
    mark_unref(ev->last);
    ev->last = m;
    pthread_mutex_unlock(&mark_lock);
    emu_stream_push(s, op, 0);
    return CUDA_SUCCESS;
}

/* The stream waits for the event's latest record as of now; none: nothing to wait for. */
CUresult emu_cuStreamWaitEvent(CUstream stream, CUevent ev, unsigned int flags)
{
    CUstream s;
    CUresult st = event_check(ev);
    if (st == CUDA_SUCCESS)
        st = emu_stream_get(stream, &s);
    if (st != CUDA_SUCCESS)
        return st;
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    emu_op_t *op = emu_op_new(EMU_OP_WAIT_EVENT);
    if (op == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&mark_lock);
    op->u.mark = ev->last;
    if (ev->last != NULL)
        ev->last->refs++;
    pthread_mutex_unlock(&mark_lock);
    if (op->u.mark == NULL) {
        free(op);
        return CUDA_SUCCESS;
    }
    emu_stream_push(s, op, 0);
    return CUDA_SUCCESS;
}

CUresult emu_cuEventQuery(CUevent ev)
{
    CUresult st = event_check(ev);
    if (st != CUDA_SUCCESS)
        return st;
    pthread_mutex_lock(&mark_lock);
    st = ev->last == NULL || ev->last->done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&mark_lock);
    return st;
}

CUresult emu_cuEventSynchronize(CUevent ev)
{
    CUresult st = event_check(ev);
    if (st != CUDA_SUCCESS)
        return st;
    pthread_mutex_lock(&mark_lock);
    emu_mark_t *m = ev->last;
    if (m != NULL) {
        m->refs++;          /* the event may be recorded again meanwhile */
        while (!m->done)
            pthread_cond_wait(&mark_cond, &mark_lock);
        mark_unref(m);
    }
    pthread_mutex_unlock(&mark_lock);
    return CUDA_SUCCESS;
}

/* Milliseconds between the completion of the two events' latest records. */
CUresult emu_cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
    CUresult st = event_check(start);
    if (st == CUDA_SUCCESS)
        st = event_check(end);
    if (st != CUDA_SUCCESS)
        return st;
    if (ms == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mark_lock);
    emu_mark_t *a = start->last, *b = end->last;
    if (a == NULL || b == NULL || ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING))
        st = CUDA_ERROR_INVALID_HANDLE;
    else if (!a->done || !b->done)
        st = CUDA_ERROR_NOT_READY;
    else
        *ms = (float)((double)(b->when.tv_sec - a->when.tv_sec) * 1e3 +
                      (double)(b->when.tv_nsec - a->when.tv_nsec) / 1e6);
    pthread_mutex_unlock(&mark_lock);
    return st;
}
