/*
 * Calls on device buffers run on a per-communicator proxy thread, ordered on the caller's
 * stream as in NCCL (DESIGN.md section 4), and so do the buckets of a plan (host buffers:
 * no events, no stream; the plan learns of the end through the job's done callback):
 *
 *   caller: record an event on each stream of the job ------------> proxy: wait for them
 *           queue the job (ops of one comm: a call, or a group's)          run the ops
 *           stream waits until (int32)(word - target) >= 0  <------------  word = target
 *
 * The caller returns at once; work queued on its stream before the call runs before the
 * collective reads its buffers, work queued after waits for the word. The proxy runs the
 * executor as the calling thread would for host buffers, with each slice computed by
 * kernels on its own stream (device/device.h). Jobs run in order; a job of a communicator
 * that failed or was aborted is not run, but its word is still written, so no stream
 * waits for ever on a communicator that is gone: the failure is in ncclCommGetAsyncError.
 *
 * The words live in pinned host memory that is never freed: a stream may still be reading
 * a word after the communicator that wrote it was destroyed. (With no GPU backend, plain
 * memory: no stream reads it.) The proxy's device executor is made at the first device
 * call, on that call's device: a proxy that runs only host jobs never touches a GPU.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "core/enqueue.h"
#include "core/proxy.h"

#define PROXY_WORDS_PER_PAGE 1024

typedef struct proxy_job {
    struct proxy_job *next;
    braid_op_t **ops;               /* heap ops; run (and freed) by braid_ops_run */
    int nops;
    void *events[BRAID_PROXY_MAX_STREAMS];
    int nevents;
    uint32_t target;
    braid_proxy_done_fn done;       /* may be NULL */
    void *done_arg;
} proxy_job_t;

struct braid_proxy {
    braid_comm_t *comm;
    int ordinal;                    /* -1 until the first device call */
    braid_device_exec_t *dx;        /* made by that call's thread, used by the proxy's */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    proxy_job_t *head, *tail;
    int stop;
    uint32_t *word;                 /* the last target done */
    uint32_t issued;                /* the last target handed out (callers, under comm lock) */
    void **free_events;             /* recycled events (under lock): room for every one */
    int nfree, nmade, free_cap;     /* made: events created, the most that can be free */
};

/* ---- completion words ------------------------------------------------------------------ */

static pthread_mutex_t words_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *words_page;
static int words_used = PROXY_WORDS_PER_PAGE;

static braid_status_t word_take(uint32_t **word_p)
{
    braid_status_t st = BRAID_OK;
    pthread_mutex_lock(&words_lock);
    if (words_used == PROXY_WORDS_PER_PAGE) {
        void *p = NULL;
        size_t bytes = PROXY_WORDS_PER_PAGE * sizeof(uint32_t);
        if (braid_device() == &braid_device_host)
            p = malloc(bytes);
        else
            st = braid_device()->host_alloc(bytes, &p);
        if (st == BRAID_OK && p == NULL)
            st = braid_err(BRAID_ERR_NOMEM, "out of memory for the proxy's words");
        if (st == BRAID_OK) {
            memset(p, 0, PROXY_WORDS_PER_PAGE * sizeof(uint32_t));
            words_page = p;
            words_used = 0;
        }
    }
    if (st == BRAID_OK)
        *word_p = &words_page[words_used++];
    pthread_mutex_unlock(&words_lock);
    return st;
}

/* ---- the proxy thread ------------------------------------------------------------------ */

static int proxy_comm_gone(const braid_proxy_t *px)
{
    int s = atomic_load(&px->comm->state);
    return s != BRAID_COMM_READY;
}

/* Wait until the caller's streams reached the call; 0 if the communicator went away. */
static int job_wait_events(braid_proxy_t *px, proxy_job_t *job)
{
    const braid_device_ops_t *ops = braid_device();
    unsigned idle = 0;
    for (int i = 0; i < job->nevents; i++) {
        braid_status_t st;
        while ((st = ops->event_query(job->events[i])) == BRAID_INPROGRESS) {
            if (proxy_comm_gone(px))
                return 0;
            struct timespec ts = { 0, idle < 64 ? 2000 : 200000 };
            idle++;
            nanosleep(&ts, NULL);
        }
        if (st < 0) {
            braid_comm_set_error(px->comm, st);
            return 0;
        }
    }
    return 1;
}

/* Device-resident ncclPreMulSum scalars are read when the call starts, as NCCL does. */
static braid_status_t job_load_scalars(braid_device_exec_t *dx, proxy_job_t *job)
{
    for (int i = 0; i < job->nops; i++) {
        braid_op_t *op = job->ops[i];
        char raw[8];
        if (op->redop.scalar_dev == NULL)
            continue;
        BRAID_CHECK(braid_device_exec_read(dx, raw, op->redop.scalar_dev,
                                           braid_dtype_size(op->dtype)));
        op->redop.scalar = braid_scalar_load(op->dtype, raw);
    }
    return BRAID_OK;
}

/* The proxy thread runs device work on the device its executor was made for. */
static braid_status_t job_bind(braid_proxy_t *px, proxy_job_t *job, int *bound)
{
    int device = 0;
    for (int i = 0; i < job->nops; i++)
        device |= job->ops[i]->on_device;
    if (!device || *bound)
        return BRAID_OK;
    *bound = 1;
    return braid_device()->bind(px->ordinal);
}

static void job_run(braid_proxy_t *px, proxy_job_t *job, int *bound)
{
    braid_status_t st = job_wait_events(px, job) ? BRAID_OK : BRAID_ERR_ABORTED;
    if (st == BRAID_OK)
        st = job_bind(px, job, bound);
    if (st == BRAID_OK && px->dx != NULL)
        st = job_load_scalars(px->dx, job);
    for (int i = 0; i < job->nops; i++)
        if (job->ops[i]->on_device)
            job->ops[i]->dev = px->dx;
    st = braid_ops_run(job->ops, job->nops, 1, st);
    if (job->done != NULL)
        job->done(job->done_arg, st);
    pthread_mutex_lock(&px->lock);
    for (int i = 0; i < job->nevents; i++)
        px->free_events[px->nfree++] = job->events[i];
    pthread_mutex_unlock(&px->lock);
    __atomic_store_n(px->word, job->target, __ATOMIC_RELEASE);
    free(job->ops);
    free(job);
}

static void *proxy_main(void *arg)
{
    braid_proxy_t *px = arg;
    int bound = 0;
    pthread_mutex_lock(&px->lock);
    for (;;) {
        while (px->head == NULL && !px->stop)
            pthread_cond_wait(&px->cond, &px->lock);
        proxy_job_t *job = px->head;
        if (job == NULL)
            break;
        px->head = job->next;
        if (px->head == NULL)
            px->tail = NULL;
        pthread_mutex_unlock(&px->lock);
        job_run(px, job, &bound);
        pthread_mutex_lock(&px->lock);
    }
    pthread_mutex_unlock(&px->lock);
    return NULL;
}

/* ---- the caller's side ----------------------------------------------------------------- */

static braid_status_t proxy_start(braid_comm_t *comm, braid_proxy_t **px_p)
{
    braid_proxy_t *px = calloc(1, sizeof(*px));
    if (px == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for a proxy thread");
    px->comm = comm;
    px->ordinal = -1;
    pthread_mutex_init(&px->lock, NULL);
    pthread_cond_init(&px->cond, NULL);
    braid_status_t st = word_take(&px->word);
    int e = st == BRAID_OK ? pthread_create(&px->thread, NULL, proxy_main, px) : 0;
    if (e != 0)
        st = braid_err(BRAID_ERR_SYSTEM, "cannot start the proxy thread: %s", strerror(e));
    if (st < 0) {
        pthread_cond_destroy(&px->cond);
        pthread_mutex_destroy(&px->lock);
        free(px);
        return st;
    }
    BRAID_INFO(BRAID_SUB_PROXY, "proxy thread started");
    *px_p = px;
    return BRAID_OK;
}

/* The comm's proxy (started at its first job); ordinal >= 0: a device job, whose device
 * the proxy's executor is made for at the first one. Under the comm's lock. */
static braid_status_t proxy_get(braid_comm_t *comm, int ordinal, braid_proxy_t **px_p)
{
    if (comm->proxy == NULL)
        BRAID_CHECK(proxy_start(comm, &comm->proxy));
    braid_proxy_t *px = comm->proxy;
    *px_p = px;
    if (ordinal < 0 || px->ordinal == ordinal)
        return BRAID_OK;
    if (px->ordinal >= 0)
        return braid_err(BRAID_ERR_INVALID, "device buffers on device %d, while rank %d's "
                         "communicator runs on device %d: one communicator uses one device",
                         ordinal, comm->rank, px->ordinal);
    BRAID_CHECK(braid_device_exec_create(ordinal, comm->slot_size, &px->dx));
    BRAID_INFO(BRAID_SUB_PROXY, "proxy runs device calls on device %d", ordinal);
    px->ordinal = ordinal;
    return BRAID_OK;
}

/* An event for a caller's stream: a recycled one, or a new one with room kept for it in
 * the free list (so the proxy can always give it back). */
static braid_status_t event_get(braid_proxy_t *px, void **ev_p)
{
    braid_status_t st = BRAID_OK;
    pthread_mutex_lock(&px->lock);
    if (px->nfree > 0) {
        *ev_p = px->free_events[--px->nfree];
        pthread_mutex_unlock(&px->lock);
        return BRAID_OK;
    }
    if (px->nmade == px->free_cap) {
        int cap = px->free_cap ? 2 * px->free_cap : 8;
        void **a = realloc(px->free_events, (size_t)cap * sizeof(void *));
        if (a == NULL)
            st = braid_err(BRAID_ERR_NOMEM, "out of memory queueing a call for the proxy");
        else
            px->free_events = a, px->free_cap = cap;
    }
    pthread_mutex_unlock(&px->lock);
    BRAID_CHECK(st);
    BRAID_CHECK(braid_device()->event_create(ev_p));
    pthread_mutex_lock(&px->lock);
    px->nmade++;
    pthread_mutex_unlock(&px->lock);
    return BRAID_OK;
}

/* The distinct streams of the job's ops, each with an event recorded on it now. */
static braid_status_t job_events(braid_proxy_t *px, proxy_job_t *job, void **streams,
                                 int *nstreams_p)
{
    const braid_device_ops_t *ops = braid_device();
    int n = 0;
    for (int i = 0; i < job->nops; i++) {
        void *s = job->ops[i]->stream;
        int seen = 0;
        for (int j = 0; j < n; j++)
            seen |= streams[j] == s;
        if (seen)
            continue;
        if (n == BRAID_PROXY_MAX_STREAMS)
            return braid_err(BRAID_ERR_USAGE, "a group uses more than %d streams on one "
                             "communicator", BRAID_PROXY_MAX_STREAMS);
        streams[n++] = s;
    }
    for (int j = 0; j < n; j++) {
        BRAID_CHECK(event_get(px, &job->events[j]));
        job->nevents = j + 1;
        BRAID_CHECK(ops->event_record(job->events[j], streams[j]));
    }
    *nstreams_p = n;
    return BRAID_OK;
}

/* Queue a job; `t` (device jobs) gets its streams' events, `done` (may be NULL) is called
 * on the proxy thread after the job ran. */
static braid_status_t proxy_queue(braid_comm_t *comm, int ordinal, braid_op_t **ops, int n,
                                  braid_proxy_done_fn done, void *done_arg,
                                  braid_proxy_ticket_t *t)
{
    braid_proxy_t *px = NULL;
    braid_status_t st = ordinal >= 0 ? braid_device()->bind(ordinal) : BRAID_OK;
    proxy_job_t *job = st == BRAID_OK ? calloc(1, sizeof(*job)) : NULL;
    braid_op_t **copy = job != NULL ? malloc((size_t)n * sizeof(*copy)) : NULL;
    if (st == BRAID_OK && copy == NULL)
        st = braid_err(BRAID_ERR_NOMEM, "out of memory queueing a call for the proxy");
    /* under the comm's lock: the proxy, targets and the queue in the same order */
    pthread_mutex_lock(&comm->lock);
    if (st == BRAID_OK)
        st = proxy_get(comm, ordinal, &px);
    if (st < 0) {   /* no proxy to give them to: they fail here */
        pthread_mutex_unlock(&comm->lock);
        free(copy);
        free(job);
        braid_ops_run(ops, n, 1, st);
        return st;
    }
    memcpy(copy, ops, (size_t)n * sizeof(*copy));
    job->ops = copy;
    job->nops = n;
    job->done = done;
    job->done_arg = done_arg;
    void *streams[BRAID_PROXY_MAX_STREAMS];
    int nstreams = 0;
    if (ordinal >= 0) {
        st = job_events(px, job, t != NULL ? t->streams : streams,
                        t != NULL ? &t->nstreams : &nstreams);
        /* on an error the job still goes to the proxy, which fails it in order with the
         * others and writes its word */
        if (st < 0) {
            braid_comm_set_error(comm, st);
            if (t != NULL)
                t->nstreams = 0;
        }
    }
    job->target = ++px->issued;
    if (t != NULL)
        t->target = job->target;
    pthread_mutex_lock(&px->lock);
    if (px->tail != NULL)
        px->tail->next = job;
    else
        px->head = job;
    px->tail = job;
    pthread_cond_signal(&px->cond);
    pthread_mutex_unlock(&px->lock);
    pthread_mutex_unlock(&comm->lock);
    return st;
}

braid_status_t braid_proxy_submit(braid_comm_t *comm, int ordinal, braid_op_t **ops, int n,
                                  braid_proxy_ticket_t *t)
{
    t->comm = comm;
    t->nstreams = 0;
    return proxy_queue(comm, ordinal, ops, n, NULL, NULL, t);
}

braid_status_t braid_proxy_post(braid_comm_t *comm, int ordinal, braid_op_t **ops, int n,
                                braid_proxy_done_fn done, void *arg)
{
    return proxy_queue(comm, ordinal, ops, n, done, arg, NULL);
}

braid_status_t braid_proxy_join(const braid_proxy_ticket_t *t)
{
    braid_proxy_t *px = t->comm->proxy;
    for (int j = 0; j < t->nstreams; j++) {
        braid_status_t st = braid_device()->stream_wait_word(t->streams[j], px->word,
                                                            t->target);
        if (st < 0) {
            braid_comm_set_error(t->comm, st);
            return st;
        }
    }
    return BRAID_OK;
}

void braid_proxy_drain(braid_comm_t *comm)
{
    braid_proxy_t *px = comm->proxy;
    if (px == NULL)
        return;
    pthread_mutex_lock(&comm->lock);
    uint32_t target = px->issued;
    pthread_mutex_unlock(&comm->lock);
    while ((int32_t)(__atomic_load_n(px->word, __ATOMIC_ACQUIRE) - target) < 0) {
        struct timespec ts = { 0, 200000 };
        nanosleep(&ts, NULL);
    }
}

void braid_proxy_stop(braid_comm_t *comm)
{
    braid_proxy_t *px = comm->proxy;
    if (px == NULL)
        return;
    pthread_mutex_lock(&px->lock);
    px->stop = 1;
    pthread_cond_signal(&px->cond);
    pthread_mutex_unlock(&px->lock);
    pthread_join(px->thread, NULL);
    if (px->dx != NULL)
        braid_device_exec_destroy(px->dx);
    for (int i = 0; i < px->nfree; i++)
        braid_device()->event_destroy(px->free_events[i]);
    free(px->free_events);
    pthread_cond_destroy(&px->cond);
    pthread_mutex_destroy(&px->lock);
    free(px);
    comm->proxy = NULL;
}
