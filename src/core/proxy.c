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
 * kernels on the stream of the communicator's device executor (device/device.h). Jobs run
 * in order; a job of a communicator that failed or was aborted is not run, but its word is
 * still written, so no stream waits for ever on a communicator that is gone: the failure
 * is in ncclCommGetAsyncError.
 *
 * Every wait of the proxy on the device is bounded (braid_device_event_wait): an abort
 * stops it within milliseconds, and after BRAID_TIMEOUT it fails the call naming what
 * never finished, the caller's stream before the call or braid's own kernels
 * (braid_comm_device_wait). The driver calls a real driver may serialise behind a lock
 * that a caller's pageable copy holds while its stream waits for this proxy (allocation,
 * pinned memory, module and kernel loads) are all made on the threads that make the
 * communicator or call it, before their job is queued (braid_proxy_prepare, proxy_queue):
 * none runs on the proxy.
 *
 * The words live in pinned host memory that is never freed: a stream may still be reading
 * a word after the communicator that wrote it was destroyed. (With no GPU backend, plain
 * memory: no stream reads it.)
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/param.h"
#include "core/enqueue.h"
#include "core/flight.h"
#include "core/gpu_watch.h"
#include "core/proxy.h"
#include "exec/lower.h"

#define PROXY_WORDS_PER_PAGE 1024

typedef struct proxy_job {
    struct proxy_job *next;
    braid_op_t **ops;               /* heap ops; run (and freed) by braid_ops_run */
    int nops;
    int gpu;                        /* the GPU engine runs it: watched, not run */
    braid_gpu_job_t gjob;
    braid_status_t st;              /* < 0: it failed before it was queued */
    void *events[BRAID_PROXY_MAX_STREAMS];
    int nevents;
    uint32_t target;
    braid_proxy_done_fn done;       /* may be NULL */
    void *done_arg;
} proxy_job_t;

struct braid_proxy {
    braid_comm_t *comm;
    braid_device_exec_t *dx;        /* made with the comm (or by its first device call),
                                     * used by the proxy thread; NULL: none yet */
    pthread_t thread;
    int started;                    /* the thread runs */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    proxy_job_t *head, *tail;
    int stop;
    int sleeping;                   /* the thread waits for a signal (not lingering) */
    braid_gpu_pace_t pace;          /* how the engine's jobs are watched (gpu_watch.h) */
    uint32_t *word;                 /* the last target done */
    uint32_t issued;                /* the last target handed out (callers, under comm lock) */
    uint64_t device_jobs;           /* device jobs queued (callers, under comm lock) */
    void **free_events;             /* recycled events (under lock): room for every one */
    int nfree, nmade, free_cap;     /* made: events created, the most that can be free */
};

#define PROXY_ABORT_WAIT_S 0.2      /* what an abort waits for pending device work */

/* BRAID_TIMEOUT, in seconds; 0 waits for ever. */
static double proxy_timeout(void)
{
    int t = braid_param_int(BRAID_P_TIMEOUT);
    return t > 0 ? (double)t : 1e18;
}

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

/* The wait of a job's first op for the device: `what` it waits for (flight.h). */
typedef struct job_wait {
    braid_comm_t *comm;
    const braid_op_t *op;
    int what;
} job_wait_t;

static braid_status_t job_wait_check(void *arg, double waited)
{
    job_wait_t *jw = arg;
    return braid_comm_device_wait(jw->comm, jw->op, jw->what, waited);
}

/* Wait until the caller's streams reached the call: bounded, an abort ends it. */
static braid_status_t job_wait_events(braid_proxy_t *px, proxy_job_t *job)
{
    job_wait_t jw = { px->comm, job->ops[0], BRAID_FLIGHT_WAITS_STREAM };
    braid_device_wait_t w = { job_wait_check, &jw };
    for (int i = 0; i < job->nevents; i++)
        BRAID_CHECK(braid_device_event_wait(job->events[i], &w));
    return BRAID_OK;
}

/* Device-resident ncclPreMulSum scalars are read when the call starts, as NCCL does: an
 * async copy into the executor's pinned memory, waited for (bounded). */
static braid_status_t job_load_scalars(braid_proxy_t *px, proxy_job_t *job)
{
    for (int i = 0; i < job->nops; i++) {
        braid_op_t *op = job->ops[i];
        char raw[8];
        if (op->redop.scalar_dev == NULL)
            continue;
        job_wait_t jw = { px->comm, op, BRAID_FLIGHT_WAITS_GPU };
        braid_device_wait_t w = { job_wait_check, &jw };
        BRAID_CHECK(braid_device_exec_read(px->dx, raw, op->redop.scalar_dev,
                                           braid_dtype_size(op->dtype), &w));
        op->redop.scalar = braid_scalar_load(op->dtype, raw);
    }
    return BRAID_OK;
}

/* The proxy thread runs device work on the device of its executor: its primary context,
 * retained when the executor was made, only becomes current here. */
static braid_status_t job_bind(braid_proxy_t *px, proxy_job_t *job, int *bound)
{
    int device = 0;
    for (int i = 0; i < job->nops; i++)
        device |= job->ops[i]->on_device;
    if (!device || *bound)
        return BRAID_OK;
    *bound = 1;
    return braid_device()->bind(braid_device_exec_ordinal(px->dx));
}

/* The job's events go back to the free list, its word is written, it is freed. */
static void job_done(braid_proxy_t *px, proxy_job_t *job)
{
    pthread_mutex_lock(&px->lock);
    for (int i = 0; i < job->nevents; i++)
        px->free_events[px->nfree++] = job->events[i];
    pthread_mutex_unlock(&px->lock);
    __atomic_store_n(px->word, job->target, __ATOMIC_RELEASE);
    free(job->ops);
    free(job);
}

/* Device jobs: the driver calls made here are the event polls of job_wait_events and the
 * async work of the executor's slices (src/exec/dev_slice.c), none of which a driver
 * serialises behind its allocation lock. */
static void job_run(braid_proxy_t *px, proxy_job_t *job, int *bound)
{
    braid_status_t st = job->st < 0 ? job->st : proxy_comm_gone(px) ? BRAID_ERR_ABORTED
                                                                    : BRAID_OK;
    if (job->gpu) {
        braid_comm_gpu_watch(px->comm, &px->pace, job->ops, job->nops, &job->gjob, st);
        job_done(px, job);
        return;
    }
    if (st == BRAID_OK)
        st = job_bind(px, job, bound);
    if (st == BRAID_OK)
        st = job_wait_events(px, job);
    if (st == BRAID_OK && px->dx != NULL)
        st = job_load_scalars(px, job);
    for (int i = 0; i < job->nops; i++)
        if (job->ops[i]->on_device)
            job->ops[i]->dev = px->dx;
    st = braid_ops_run(job->ops, job->nops, 1, st);
    if (job->done != NULL)
        job->done(job->done_arg, st);
    job_done(px, job);
}


/*
 * Wait for a job (under px->lock). After a GPU engine job the thread lingers, awake,
 * before it sleeps: engine jobs queued meanwhile are not signalled (px->sleeping is 0), so
 * a stream of small device calls costs no wake-up of this thread per call, only a look
 * every PROXY_LINGER_NS (the watch is in no call's data path).
 */
#define PROXY_LINGER_NS 500000L
#define PROXY_LINGERS 4

static void proxy_wait(braid_proxy_t *px, int lingers)
{
    for (int i = 0; px->head == NULL && !px->stop && i < lingers; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += PROXY_LINGER_NS;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&px->cond, &px->lock, &ts);
    }
    px->sleeping = 1;
    while (px->head == NULL && !px->stop)
        pthread_cond_wait(&px->cond, &px->lock);
    px->sleeping = 0;
}

static void *proxy_main(void *arg)
{
    braid_proxy_t *px = arg;
    int bound = 0, lingers = 0;
    pthread_mutex_lock(&px->lock);
    for (;;) {
        if (px->head == NULL)   /* a run of the engine's jobs ends */
            px->pace.looks = 0;
        proxy_wait(px, lingers);
        proxy_job_t *job = px->head;
        if (job == NULL)
            break;
        px->head = job->next;
        if (px->head == NULL)
            px->tail = NULL;
        lingers = job->gpu ? PROXY_LINGERS : 0;
        pthread_mutex_unlock(&px->lock);
        job_run(px, job, &bound);
        pthread_mutex_lock(&px->lock);
    }
    pthread_mutex_unlock(&px->lock);
    return NULL;
}

/* ---- the caller's side ----------------------------------------------------------------- */

static braid_status_t proxy_new(braid_comm_t *comm, braid_proxy_t **px_p)
{
    braid_proxy_t *px = calloc(1, sizeof(*px));
    if (px == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for a proxy thread");
    px->comm = comm;
    braid_status_t st = word_take(&px->word);
    if (st < 0) {
        free(px);
        return st;
    }
    pthread_mutex_init(&px->lock, NULL);
    pthread_cond_init(&px->cond, NULL);
    *px_p = px;
    return BRAID_OK;
}

/* The device executor, made on the calling thread for device `ordinal` (its kernels
 * loaded, its stream, pinned and device memory, a first scratch buffer). */
static braid_status_t proxy_exec_make(braid_comm_t *comm, braid_proxy_t *px, int ordinal)
{
    size_t scratch = (size_t)braid_param_int(BRAID_P_DEVICE_SCRATCH);
    BRAID_CHECK(braid_device_exec_create(ordinal, comm->slot_size, scratch, &px->dx));
    BRAID_INFO(BRAID_SUB_PROXY, "rank %d runs device calls on device %d", comm->rank, ordinal);
    return BRAID_OK;
}

braid_status_t braid_proxy_prepare(braid_comm_t *comm, int ordinal)
{
    BRAID_CHECK(proxy_new(comm, &comm->proxy));
    braid_status_t st = proxy_exec_make(comm, comm->proxy, ordinal);
    if (st < 0)   /* host calls work; device calls try again and fail with this */
        BRAID_INFO(BRAID_SUB_PROXY, "rank %d: no device executor made at init (%s)",
                   comm->rank, braid_err_last());
    return BRAID_OK;
}

/*
 * The proxy thread may run on every CPU that the communicator's ranks on this machine were
 * given, not only on its rank's: a rank bound to one CPU (braidrun, mpirun --bind-to core)
 * would otherwise run its bucket plans and device work there in turns with its caller and
 * with any other program the scheduler puts on that CPU, while other CPUs of the job wait.
 * (2 ranks bound beside a busy process: a fused DDP plan took 16-18 ms where unbound ranks
 * took 9; docs/PERFORMANCE.md.) A thread whose CPUs already cover those is left alone.
 */
static void proxy_spread(braid_comm_t *comm, pthread_t thread)
{
    cpu_set_t all, mine, both;
    CPU_ZERO(&all);
    for (int c = 0; c < 64 * BRAID_CPU_WORDS && c < CPU_SETSIZE; c++)
        if (comm->kernel_cpu_mask[c / 64] >> (c % 64) & 1)
            CPU_SET(c, &all);
    if (pthread_getaffinity_np(thread, sizeof(mine), &mine) != 0)
        return;
    CPU_OR(&both, &mine, &all);
    if (CPU_EQUAL(&both, &mine))
        return;
    int e = pthread_setaffinity_np(thread, sizeof(both), &both);
    BRAID_INFO(BRAID_SUB_PROXY, "proxy thread on the %d CPUs of this machine's ranks%s%s",
               CPU_COUNT(&both), e != 0 ? ": not moved: " : "", e != 0 ? strerror(e) : "");
}

/* The comm's proxy (made at init where a GPU backend is in use, else at its first job;
 * its thread starts at its first job); ordinal >= 0: a device job, which needs the
 * executor on that device. A communicator's device calls use one device: the first one
 * may still move the executor from the device of init to its buffers'. Under the comm's
 * lock. */
static braid_status_t proxy_get(braid_comm_t *comm, int ordinal, braid_proxy_t **px_p)
{
    if (comm->proxy == NULL)
        BRAID_CHECK(proxy_new(comm, &comm->proxy));
    braid_proxy_t *px = comm->proxy;
    if (!px->started) {
        int e = pthread_create(&px->thread, NULL, proxy_main, px);
        if (e != 0)
            return braid_err(BRAID_ERR_SYSTEM, "cannot start the proxy thread: %s",
                             strerror(e));
        px->started = 1;
        BRAID_INFO(BRAID_SUB_PROXY, "proxy thread started");
        proxy_spread(comm, px->thread);
    }
    *px_p = px;
    if (ordinal < 0 || (px->dx != NULL && braid_device_exec_ordinal(px->dx) == ordinal))
        return BRAID_OK;
    if (px->dx != NULL && px->device_jobs > 0)
        return braid_err(BRAID_ERR_INVALID, "device buffers on device %d, while rank %d's "
                         "communicator runs on device %d: one communicator uses one device",
                         ordinal, comm->rank, braid_device_exec_ordinal(px->dx));
    braid_device_exec_destroy(px->dx, proxy_timeout());   /* nothing ran on it */
    px->dx = NULL;
    return proxy_exec_make(comm, px, ordinal);
}

/* Scratch for the job's device ops, made here (the calling thread) if the executor lacks
 * it: never by the proxy while device work is in flight. (Past the executor's bound, one
 * size more than it keeps is enough for it to refuse the group.) */
static braid_status_t job_reserve(braid_proxy_t *px, braid_op_t **ops, int n)
{
    size_t sizes[BRAID_DEVICE_SCRATCH_MAX + 1];
    int k = 0;
    for (int i = 0; i < n && k <= BRAID_DEVICE_SCRATCH_MAX; i++)
        if (ops[i]->on_device && ops[i]->sched.scratch_bytes > 0)
            sizes[k++] = ops[i]->sched.scratch_bytes;
    return k > 0 ? braid_device_exec_reserve(px->dx, sizes, k) : BRAID_OK;
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

/* A GPU engine job: its ops lowered onto the engine's stream now, under the comm's lock
 * (targets, queue and lowering in one order), published as started; the proxy watches it.
 * On an error the job still goes to the proxy, which fails it in order with the others. */
static braid_status_t job_gpu(braid_comm_t *comm, int ordinal, proxy_job_t *job,
                              braid_proxy_ticket_t *t)
{
    braid_gpu_t *g = comm->gpu;
    braid_status_t st = BRAID_OK;
    job->gpu = 1;
    for (int i = 0; i < job->nops; i++) {
        braid_op_t *op = job->ops[i];
        size_t slot = braid_gpu_slice(g), want = op->sched.slice;   /* the tuner's choice,
                                                                      * on the device model */
        want = want / op->sched.align * op->sched.align;
        op->slice = want != 0 && want < slot ? want : slot;
        if (!braid_lower_is_p2p(op)) {
            braid_comm_publish_call(comm, &op->hdr);
            braid_comm_publish(comm, op->hdr.seq, 0);
        }
    }
    for (int i = 0; i < job->nops && st == BRAID_OK; i++)
        if (!job->ops[i]->on_device)
            st = braid_err(BRAID_ERR_USAGE, "a group of rank %d mixes host and device buffers "
                           "on one communicator, whose device calls run on the GPU engine: "
                           "put them in groups of their own", comm->rank);
    if (st == BRAID_OK && ordinal != braid_gpu_ordinal(g))
        st = braid_err(BRAID_ERR_INVALID, "device buffers on device %d, while rank %d's "
                       "communicator runs on device %d: one communicator uses one device",
                       ordinal, comm->rank, braid_gpu_ordinal(g));
    if (st == BRAID_OK)
        st = braid_gpu_submit(g, job->ops, job->nops, t->alone, &job->gjob);
    if (st < 0) {
        braid_comm_set_error(comm, st);
        job->gjob.nstreams = 0;
        job->st = st;
    }
    t->gpu = 1;
    t->gjob = job->gjob;
    return st;
}

/* Queue a job; `t` (device jobs) gets its streams' events, `done` (may be NULL) is called
 * on the proxy thread after the job ran. Device calls (t set) of a communicator with a
 * GPU engine go to the engine, and the proxy only watches them. */
static braid_status_t proxy_queue(braid_comm_t *comm, int ordinal, braid_op_t **ops, int n,
                                  braid_proxy_done_fn done, void *done_arg,
                                  braid_proxy_ticket_t *t)
{
    braid_proxy_t *px = NULL;
    int gpu = ordinal >= 0 && t != NULL && comm->gpu != NULL;
    braid_status_t st = ordinal >= 0 && !gpu ? braid_device()->bind(ordinal) : BRAID_OK;
    proxy_job_t *job = st == BRAID_OK ? calloc(1, sizeof(*job)) : NULL;
    braid_op_t **copy = job != NULL ? malloc((size_t)n * sizeof(*copy)) : NULL;
    if (st == BRAID_OK && copy == NULL)
        st = braid_err(BRAID_ERR_NOMEM, "out of memory queueing a call for the proxy");
    /* under the comm's lock: the proxy, targets and the queue in the same order */
    pthread_mutex_lock(&comm->lock);
    if (st == BRAID_OK)
        st = proxy_get(comm, gpu ? -1 : ordinal, &px);
    if (st == BRAID_OK && ordinal >= 0 && !gpu)
        st = job_reserve(px, ops, n);
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
    if (gpu) {
        st = job_gpu(comm, ordinal, job, t);
    } else if (ordinal >= 0) {
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
    px->device_jobs += ordinal >= 0 && !gpu;
    if (t != NULL)
        t->target = job->target;
    pthread_mutex_lock(&px->lock);
    if (px->tail != NULL)
        px->tail->next = job;
    else
        px->head = job;
    px->tail = job;
    if (!gpu || px->sleeping)   /* a lingering thread finds the engine's jobs itself */
        pthread_cond_signal(&px->cond);
    pthread_mutex_unlock(&px->lock);
    pthread_mutex_unlock(&comm->lock);
    return st;
}

braid_status_t braid_proxy_submit(braid_comm_t *comm, int ordinal, braid_op_t **ops, int n,
                                  int alone, braid_proxy_ticket_t *t)
{
    t->comm = comm;
    t->alone = alone;
    t->nstreams = 0;
    t->gpu = 0;
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
    if (t->gpu) {
        braid_status_t st = braid_gpu_join(t->comm->gpu, &t->gjob);
        if (st < 0)
            braid_comm_set_error(t->comm, st);
        return st;
    }
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

int braid_proxy_stop(braid_comm_t *comm, int abort)
{
    braid_proxy_t *px = comm->proxy;
    if (px == NULL)
        return 0;
    if (px->started) {
        pthread_mutex_lock(&px->lock);
        px->stop = 1;
        pthread_cond_signal(&px->cond);
        pthread_mutex_unlock(&px->lock);
        pthread_join(px->thread, NULL);
    }
    /* an abort returns within a second, whatever another communicator's kernel does */
    double wait_s = abort ? PROXY_ABORT_WAIT_S : proxy_timeout();
    int left = braid_gpu_destroy(comm->gpu, wait_s);   /* first: it may find the device stuck */
    left |= braid_device_exec_destroy(px->dx, wait_s);
    comm->gpu = NULL;
    for (int i = 0; i < px->nfree; i++)
        braid_device()->event_destroy(px->free_events[i]);
    free(px->free_events);
    pthread_cond_destroy(&px->cond);
    pthread_mutex_destroy(&px->lock);
    free(px);
    comm->proxy = NULL;
    return left;
}
