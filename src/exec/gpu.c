/*
 * The GPU engine (gpu.h): a job's slice-steps lowered onto its stream (its caller's, or
 * the communicator's).
 *
 * Per slice-step (lower.h's order), its waits, its kernel and its posts:
 *
 *   wait  recv: head >= r + 1        the peer's message r is in this rank's FIFO
 *   wait  send: tail >= s + 1 - K    slot s % K of the peer's FIFO is free (K slots)
 *   write progress = ++mark          (pinned host memory: the watcher reads it)
 *   kernel: braid_k_copy / braid_k_reduce on the slice (none for a token or a drop)
 *   write send: peer's head = s + 1
 *   write recv: peer's tail = r + 1  (fenced: the kernel's reads and writes come first)
 *   write progress = ++mark
 *
 * A step's posts go in one batch of stream memory operations with the next step's waits,
 * so a slice-step costs the driver two calls: a batch and a launch. A job's first batch
 * waits for `done` to reach the last job's target and writes the progress mark that says
 * it started; at its end the stream writes `done` and `release` = the job's target. On
 * the communicator's stream the job is framed by its callers' streams: it waits for an
 * event recorded on each, and they wait for `release`. `done` only the stream writes;
 * `release` also the host, to let the callers' streams go after a failure
 * (braid_gpu_release). A slice-step that waits for nothing (a local copy) has no mark
 * before its kernel.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/proc.h"
#include "base/time.h"
#include "device/device.h"
#include "exec/dev_kernels.h"
#include "exec/dev_slice.h"
#include "exec/gpu.h"
#include "exec/lower.h"
#include "kernels/gpu/kargs.h"

#define GPU_POISON (1u << 30)       /* past every message a wait can name */
/* A slice-step's posts: the receive's tail, the send's record and head, the mark; held
 * for the next batch, with the next step's waits (3) or the job's end (3). */
#define GPU_POSTS (2 + BRAID_DCONN_REC_WORDS + 1)
_Static_assert(GPU_POSTS + 3 <= BRAID_MEM_OPS_MAX, "a batch of posts and waits");

/* What the stream writes and the host reads, in pinned memory: jobs done, the word the
 * callers' streams wait for (the host writes it too, after a failure), the progress mark,
 * and a mismatched message's record then (its step's mark << 32) | 1 (the host clears
 * the last word once it has seen it; the stream waits for that at the job's end). */
typedef struct gpu_words {
    uint32_t done, release, progress, timing;   /* timing: braid_gpu_measure's */
    uint64_t bad[BRAID_MSG_WORDS + 1];
} gpu_words_t;

_Static_assert(BRAID_MSG_WORDS == BRAID_DCONN_REC_WORDS, "a message record, both ways");
_Static_assert(sizeof(braid_msg_hdr_t) == 3 * sizeof(uint64_t), "a record's header words");

/* A caller's stream and the event that joins the engine's stream to it. */
typedef struct gpu_join {
    void *stream, *event;
} gpu_join_t;

struct braid_gpu {
    struct braid_gpu *next;         /* in the process's list of engines (gpus) */
    const braid_device_ops_t *ops;
    int ordinal, rank, nranks;
    void *ctx;                      /* the context it was made in, made current to queue */
    void *stream;                   /* the communicator's */
    void *work;                     /* the stream of the job being queued */
    void *side;                     /* braid_gpu_release's writes */
    void *idle;                     /* recorded by destroy, to wait for the stream */
    braid_dev_kernels_t *k;
    braid_dconn_t **send, **recv;   /* [nranks] */
    gpu_words_t *words;             /* pinned */
    char *words_dev;                /* the same, as the device reaches them */
    uint32_t issued;                /* the last target handed out */
    int released;                   /* braid_gpu_release was called: it failed */
    uint32_t mark;                  /* the last progress mark queued */
    int starting;                   /* the next slice-step is its job's first */
    uint32_t timing;                /* braid_gpu_measure's last value written */
    braid_mem_op_t held[GPU_POSTS]; /* the last slice-step's posts, not queued yet */
    int nheld;
    gpu_join_t joins[BRAID_GPU_MAX_STREAMS];
    int njoins;
    void *scratch;                  /* for every op in turn: the stream runs them in order */
    size_t scratch_bytes;
    void **retired;                 /* smaller scratch made before: freed with the engine */
    int nretired;
};


/* Every engine of the process: freeing device memory waits for the whole device, so one
 * engine frees its memory only while no other has work in flight. */
static pthread_mutex_t gpus_lock = PTHREAD_MUTEX_INITIALIZER;
static braid_gpu_t *gpus;

/* Where the device reaches field `off` of the pinned words. */
static void *word_dev(const braid_gpu_t *g, size_t off)
{
    return g->words_dev + off;
}

#define W_DONE offsetof(gpu_words_t, done)
#define W_RELEASE offsetof(gpu_words_t, release)
#define W_PROGRESS offsetof(gpu_words_t, progress)
#define W_TIMING offsetof(gpu_words_t, timing)
#define W_BAD offsetof(gpu_words_t, bad)
#define W_BAD_MARK (W_BAD + BRAID_MSG_WORDS * sizeof(uint64_t))

static int gpu_in_flight(const braid_gpu_t *g)
{
    return (int32_t)(braid_gpu_done(g) - braid_gpu_issued(g)) < 0;
}

int braid_gpu_busy(const braid_gpu_t *except)
{
    int busy = 0;
    pthread_mutex_lock(&gpus_lock);
    for (const braid_gpu_t *g = gpus; g != NULL && !busy; g = g->next)
        busy = g != except && gpu_in_flight(g);
    pthread_mutex_unlock(&gpus_lock);
    return busy;
}

static void gpu_unlist(braid_gpu_t *g)
{
    pthread_mutex_lock(&gpus_lock);
    for (braid_gpu_t **p = &gpus; *p != NULL; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            break;
        }
    pthread_mutex_unlock(&gpus_lock);
}

int braid_gpu_ordinal(const braid_gpu_t *g)
{
    return g->ordinal;
}

size_t braid_gpu_slice(const braid_gpu_t *g)
{
    return g->send[g->rank]->slot_size;
}

/* ---- making and freeing --------------------------------------------------------------- */

static braid_status_t gpu_words(braid_gpu_t *g)
{
    braid_ptr_info_t info;
    BRAID_CHECK(g->ops->host_alloc(sizeof(gpu_words_t), (void **)&g->words));
    memset(g->words, 0, sizeof(gpu_words_t));
    BRAID_CHECK(g->ops->ptr_info(g->words, &info));
    if (info.kind != BRAID_MEM_PINNED || info.dptr == NULL)
        return braid_err(BRAID_ERR_DEVICE, "%s: pinned memory is not mapped for device %d",
                         g->ops->name, g->ordinal);
    g->words_dev = info.dptr;
    return BRAID_OK;
}

static void gpu_free(braid_gpu_t *g)
{
    const braid_device_ops_t *ops = g->ops;
    gpu_unlist(g);   /* first: braid_gpu_busy reads the words */
    for (int i = 0; i < g->njoins; i++)
        ops->event_destroy(g->joins[i].event);
    if (g->idle != NULL)
        ops->event_destroy(g->idle);
    if (g->side != NULL)
        ops->stream_destroy(g->side);
    if (g->stream != NULL)
        ops->stream_destroy(g->stream);
    if (g->words != NULL)
        ops->host_free(g->words);
    if (g->scratch != NULL)
        ops->mem_free(g->scratch);
    for (int i = 0; i < g->nretired; i++)
        ops->mem_free(g->retired[i]);
    free(g->retired);
    free(g);
}

braid_status_t braid_gpu_create(int ordinal, int rank, int nranks, braid_dconn_t **send,
                                braid_dconn_t **recv, size_t scratch, braid_gpu_t **g_p)
{
    braid_gpu_t *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for the GPU engine");
    *g = (braid_gpu_t){ .ops = braid_device(), .ordinal = ordinal, .rank = rank,
                        .nranks = nranks, .send = send, .recv = recv };
    const braid_device_ops_t *ops = g->ops;
    braid_status_t st;
    BRAID_CHECK_GOTO(st, ops->bind(ordinal), out_free);
    BRAID_CHECK_GOTO(st, ops->ctx_get(&g->ctx), out_free);
    BRAID_CHECK_GOTO(st, braid_dev_kernels_get(ordinal, &g->k), out_free);
    BRAID_CHECK_GOTO(st, ops->stream_create(&g->stream), out_free);
    BRAID_CHECK_GOTO(st, ops->stream_create(&g->side), out_free);
    BRAID_CHECK_GOTO(st, ops->event_create(&g->idle), out_free);
    BRAID_CHECK_GOTO(st, gpu_words(g), out_free);
    if (scratch > 0) {
        BRAID_CHECK_GOTO(st, ops->mem_alloc(scratch, &g->scratch), out_free);
        g->scratch_bytes = scratch;
    }
    pthread_mutex_lock(&gpus_lock);
    g->next = gpus;
    gpus = g;
    pthread_mutex_unlock(&gpus_lock);
    *g_p = g;
    return BRAID_OK;
out_free:
    gpu_free(g);
    return st;
}

uint32_t braid_gpu_done(const braid_gpu_t *g)
{
    return __atomic_load_n(&g->words->done, __ATOMIC_ACQUIRE);
}

uint32_t braid_gpu_progress(const braid_gpu_t *g)
{
    return __atomic_load_n(&g->words->progress, __ATOMIC_ACQUIRE);
}

uint32_t braid_gpu_issued(const braid_gpu_t *g)
{
    return __atomic_load_n(&g->issued, __ATOMIC_ACQUIRE);
}

/* Freeing device memory waits for the whole device: only once this engine's stream is
 * idle, its jobs on the callers' streams have ended, and no other engine or executor of
 * the process has work in flight. */
int braid_gpu_destroy(braid_gpu_t *g, double wait_s)
{
    if (g == NULL)
        return 0;
    const braid_device_ops_t *ops = g->ops;
    int idle = 0, others = 1;
    void *saved = NULL;
    if (ops->ctx_get(&saved) < 0)
        saved = g->ctx;
    if (!braid_device_stuck() && ops->ctx_set(g->ctx) == BRAID_OK &&
        ops->event_record(g->idle, g->stream) == BRAID_OK) {
        for (double end = braid_now() + wait_s;;) {
            if (g->released)   /* a peer's late post may block a wait again */
                braid_gpu_release(g);
            braid_status_t st = ops->event_query(g->idle);
            if (st == BRAID_OK && gpu_in_flight(g))   /* a job on a caller's stream */
                st = BRAID_INPROGRESS;
            idle = st == BRAID_OK;
            others = braid_gpu_busy(g) || braid_device_exec_busy();
            if ((st != BRAID_INPROGRESS && !others) || braid_device_stuck() ||
                braid_now() >= end)
                break;
            struct timespec ts = { 0, 1000000 };
            nanosleep(&ts, NULL);
        }
    }
    idle = idle && !others && !braid_device_stuck();
    void *ctx = g->ctx;
    if (idle)
        gpu_free(g);   /* in its own context */
    if (saved != ctx)
        ops->ctx_set(saved);
    if (idle)
        return 0;
    gpu_unlist(g);
    braid_device_set_stuck();
    BRAID_WARN("%s device %d: work braid queued has not finished: the GPU engine of rank %d "
               "leaves its stream and memory in place (freeing them would wait for it)",
               ops->name, g->ordinal, g->rank);
    return 1;
}

/* ---- what the device costs -------------------------------------------------------------- */

#define MEASURE_REPS 4              /* operations queued back to back per timing */
#define MEASURE_TRIES 2             /* timings of each; the fastest counts */
#define MEASURE_BYTES (4u << 20)    /* a copy's, at most: more than a CPU's cache */

enum { MEASURE_EMPTY, MEASURE_BATCH, MEASURE_LAP, MEASURE_COPY, MEASURE_REDUCE,
       MEASURE_KINDS };

/* Before message k of a send connection: the wait for its slot to be free again, into
 * *op; 0 (no wait) before the FIFO has gone round once. Then the value would be below
 * zero: CUDA's waits compare counters as distances and see it passed, HIP's compare plain
 * numbers and would wait for ever. From then on every message waits, after the counter
 * wraps too (CUDA's waits are right there; HIP's are not: README). */
static int slot_wait(braid_dconn_t *sc, uint32_t k, braid_mem_op_t *op)
{
    if (!sc->round && k + 1 <= (uint32_t)sc->nslots)
        return 0;
    sc->round = 1;
    *op = (braid_mem_op_t){ .addr = sc->wait, .value = k + 1 - sc->nslots };
    return 1;
}

/* A lap of the ranks' ring: each rank's stream waits for a message of no bytes from the
 * previous rank and sends one to the next (rank 0 sends first), through the connections'
 * own counters, so that every hand-over crosses between ranks as a collective's do
 * (between processes where the ranks are; the messages count as the connections'). */
static braid_status_t measure_lap(braid_gpu_t *g)
{
    braid_dconn_t *sc = g->send[(g->rank + 1) % g->nranks];
    braid_dconn_t *rc = g->recv[(g->rank + g->nranks - 1) % g->nranks];
    uint32_t ks = sc->msgs++, kr = rc->msgs++;
    braid_mem_op_t send[2], recv[2] = {
        { .addr = rc->wait, .value = kr + 1 },
        { .addr = rc->post, .value = kr + 1, .kind = BRAID_MEM_WRITE },
    };
    int nsend = slot_wait(sc, ks, &send[0]);
    send[nsend++] = (braid_mem_op_t){ .addr = sc->post, .value = ks + 1,
                                      .kind = BRAID_MEM_WRITE };
    braid_mem_op_t b[4];
    int n = 0;
    for (int first = 0; first < 2; first++) {
        int sending = first == (g->rank == 0 ? 0 : 1);
        memcpy(b + n, sending ? send : recv, (size_t)(sending ? nsend : 2) * sizeof(b[0]));
        n += sending ? nsend : 2;
    }
    return g->ops->stream_mem_ops(g->stream, b, n);
}

/* Queue one operation of the kind: a kernel of no bytes; a batch of a write and a wait;
 * a lap of the ring; a slice's copy or reduction of `bytes` from this rank's FIFO into a
 * peer's. */
static braid_status_t measure_one(braid_gpu_t *g, int kind, const char *in, char *out,
                                  size_t bytes, uint32_t n)
{
    braid_dev_slice_kernel_t k = { .in = in, .src = in + bytes, .out = { out, NULL },
                                   .bytes = bytes, .count = bytes / sizeof(float),
                                   .dtype = BRAID_FP32, .op = BRAID_OP_SUM,
                                   .reduce = kind == MEASURE_REDUCE };
    braid_mem_op_t a[2] = {
        { .addr = word_dev(g, W_TIMING), .value = n, .kind = BRAID_MEM_WRITE },
        { .addr = word_dev(g, W_TIMING), .value = n },
    };
    switch (kind) {
    case MEASURE_EMPTY:
        return braid_dev_kernels_check(g->k, &k, g->stream);
    case MEASURE_BATCH:
        return g->ops->stream_mem_ops(g->stream, a, 2);
    case MEASURE_LAP:
        return measure_lap(g);
    default:
        return braid_dev_kernels_slice(g->k, &k, g->stream);
    }
}

/* Microseconds for `reps` operations of the kind queued back to back, up to the streams'
 * end (the fastest of MEASURE_TRIES). */
static braid_status_t measure_time(braid_gpu_t *g, int kind, int reps, const char *in,
                                   char *out, size_t bytes, const braid_device_wait_t *w,
                                   double *us_p)
{
    *us_p = 1e30;
    for (int t = 0; t < MEASURE_TRIES; t++) {
        if (kind == MEASURE_LAP && reps == 1 && t == 1)   /* a fault test's: every rank */
            braid_proc_setup_pause("device_lap");          /* is past the first lap */
        double t0 = braid_now();
        for (int i = 0; i < reps; i++)
            BRAID_CHECK(measure_one(g, kind, in, out, bytes, ++g->timing));
        BRAID_CHECK(g->ops->event_record(g->idle, g->stream));
        BRAID_CHECK(braid_device_event_wait(g->idle, w));
        double us = (braid_now() - t0) * 1e6;
        *us_p = us < *us_p ? us : *us_p;
    }
    return BRAID_OK;
}

braid_status_t braid_gpu_measure(braid_gpu_t *g, braid_status_t (*sync)(void *arg),
                                 const braid_device_wait_t *w, braid_gpu_rates_t *r)
{
    /* read from this rank's own FIFO (for sends to itself, which nothing writes now),
     * written into the next rank's FIFO from this one (which nothing reads now) */
    int peer = (g->rank + 1) % g->nranks;
    const braid_dconn_t *from = g->recv[g->rank], *to = g->send[peer];
    double t[MEASURE_KINDS][2];
    if (peer == g->rank || from == NULL || to == NULL)
        return braid_err(BRAID_ERR_INTERNAL, "the GPU engine's timing needs a peer");
    size_t bytes = from->slot_size * from->nslots, to_bytes = to->slot_size * to->nslots;
    bytes = bytes / 2 < to_bytes ? bytes / 2 : to_bytes;   /* two inputs in the FIFO */
    bytes = (bytes < MEASURE_BYTES ? bytes : MEASURE_BYTES) / 64 * 64;
    void *saved = NULL;
    BRAID_CHECK(g->ops->ctx_get(&saved));
    if (saved != g->ctx)
        BRAID_CHECK(g->ops->ctx_set(g->ctx));
    /* the source written once (memory never written reads as one zero page, in cache) */
    braid_status_t st = g->ops->memset_async(from->slots, 0, 2 * bytes, g->stream);
    /* a first, untimed run of each kind touches the memory (a first write faults pages
     * in); a barrier before each timing keeps the ranks at the same kind */
    for (int kind = 0; kind < MEASURE_KINDS && st == BRAID_OK; kind++)
        for (int j = -1; j < 2 && st == BRAID_OK; j++)
            if ((st = sync(w->arg)) == BRAID_OK)
                st = measure_time(g, kind, j < 0 ? 1 : MEASURE_REPS << j, from->slots,
                                  to->slots, bytes, w, &t[kind][j < 0 ? 0 : j]);
    if (saved != g->ctx)
        g->ops->ctx_set(saved);
    if (st == BRAID_ERR_TIMEOUT)
        braid_device_set_stuck();
    BRAID_CHECK(st);
    /* each kind's cost per operation: the difference between twice the operations and
     * once, which the streams' start and the host's wait for their end do not enter */
    double per[MEASURE_KINDS];
    for (int kind = 0; kind < MEASURE_KINDS; kind++) {
        per[kind] = (t[kind][1] - t[kind][0]) / MEASURE_REPS;
        per[kind] = per[kind] > 0 ? per[kind] : 0;
    }
    double copy = per[MEASURE_COPY] - per[MEASURE_EMPTY];
    double reduce = per[MEASURE_REDUCE] - per[MEASURE_EMPTY];
    r->launch_us = per[MEASURE_EMPTY];
    r->batch_us = per[MEASURE_BATCH];
    r->handover_us = per[MEASURE_LAP] / g->nranks;
    r->copy_us_per_byte = (copy > 0 ? copy : 0) / (double)bytes;
    r->reduce_us_per_byte = (reduce > copy ? reduce - copy : 0) / (double)bytes;
    r->bytes = bytes;
    return BRAID_OK;
}

/* ---- lowering -------------------------------------------------------------------------- */

/* Scratch for the ops: one buffer serves them all (the stream runs them one after
 * another); a larger one is made here, on the calling thread, before anything is queued. */
static braid_status_t gpu_scratch(braid_gpu_t *g, braid_op_t *const *ops, int n)
{
    size_t want = 0;
    for (int i = 0; i < n; i++)
        if (ops[i]->sched.scratch_bytes > want)
            want = ops[i]->sched.scratch_bytes;
    if (want > g->scratch_bytes) {
        void *p, **r = realloc(g->retired, (size_t)(g->nretired + 1) * sizeof(*r));
        if (r == NULL)
            return braid_err(BRAID_ERR_NOMEM, "out of memory for the GPU engine's scratch");
        g->retired = r;
        BRAID_CHECK(g->ops->mem_alloc(want, &p));
        BRAID_INFO(BRAID_SUB_PROXY, "device %d: a %zu-byte scratch buffer made for a call",
                   g->ordinal, want);
        if (g->scratch != NULL)   /* the stream may still use it: kept, not freed */
            g->retired[g->nretired++] = g->scratch;
        g->scratch = p;
        g->scratch_bytes = want;
    }
    for (int i = 0; i < n; i++)
        ops[i]->bufs[BRAID_BUF_SCRATCH] = ops[i]->sched.scratch_bytes ? g->scratch : NULL;
    return BRAID_OK;
}

/* The engine's stream waits for each caller's stream (one event per stream, kept: a wait
 * holds the record it was queued after). */
static braid_status_t gpu_join_in(braid_gpu_t *g, braid_op_t *const *ops, int n,
                                  braid_gpu_job_t *job)
{
    const braid_device_ops_t *d = g->ops;
    for (int i = 0; i < n; i++) {
        void *s = ops[i]->stream;
        int seen = 0, j;
        for (j = 0; j < job->nstreams; j++)
            seen |= job->streams[j] == s;
        if (seen)
            continue;
        if (job->nstreams == BRAID_GPU_MAX_STREAMS)
            return braid_err(BRAID_ERR_USAGE, "a group uses more than %d streams on one "
                             "communicator", BRAID_GPU_MAX_STREAMS);
        for (j = 0; j < g->njoins && g->joins[j].stream != s; j++)
            ;
        if (j == g->njoins) {   /* a new stream: an event of its own, or the oldest's */
            if (g->njoins < BRAID_GPU_MAX_STREAMS)
                BRAID_CHECK(d->event_create(&g->joins[g->njoins++].event));
            j = j < BRAID_GPU_MAX_STREAMS ? j : 0;
            g->joins[j].stream = s;
        }
        job->streams[job->nstreams++] = s;
        BRAID_CHECK(d->event_record(g->joins[j].event, s));
        BRAID_CHECK(d->stream_wait_event(g->stream, g->joins[j].event));
    }
    return BRAID_OK;
}

static char *ref_ptr(const braid_op_t *op, braid_ref_t r, size_t off)
{
    return r.buf == BRAID_BUF_NONE ? NULL : (char *)op->bufs[r.buf] + r.off + off;
}

/* A message's record: its call's header and its length (the sender writes its own call's,
 * the receiver's kernel expects its own's). A FIFO's records start at 0: no record, as
 * a header's kind and count make it, is all zeros. */
static void msg_record(const braid_msg_hdr_t *h, size_t len, uint64_t rec[BRAID_MSG_WORDS])
{
    memcpy(rec, h, sizeof(*h));
    rec[3] = len;
}

static braid_mem_op_t mark_op(braid_gpu_t *g)
{
    return (braid_mem_op_t){ .addr = word_dev(g, W_PROGRESS), .value = ++g->mark,
                             .kind = BRAID_MEM_WRITE };
}

/* Queue the posts held back and `more` (n of them) in one batch. */
static braid_status_t gpu_flush(braid_gpu_t *g, const braid_mem_op_t *more, int n)
{
    braid_mem_op_t b[BRAID_MEM_OPS_MAX];
    int nb = g->nheld;
    memcpy(b, g->held, (size_t)nb * sizeof(*b));
    if (n > 0)
        memcpy(b + nb, more, (size_t)n * sizeof(*b));
    g->nheld = 0;
    return nb + n > 0 ? g->ops->stream_mem_ops(g->work, b, nb + n) : BRAID_OK;
}

/* One slice-step: its waits (after the last step's posts, in one batch), its kernel; its
 * own posts are held for the next batch. */
static braid_status_t gpu_item(braid_gpu_t *g, braid_op_t *op, const braid_step_t *st,
                               size_t off, size_t len)
{
    braid_dconn_t *rc = st->recv_peer >= 0 ? g->recv[st->recv_peer] : NULL;
    braid_dconn_t *sc = st->send_peer >= 0 ? g->send[st->send_peer] : NULL;
    braid_mem_op_t pre[4], post[GPU_POSTS];
    int npre = 0, npost = 0;
    const char *in = NULL;
    char *out = NULL;
    const uint64_t *rec = NULL;
    uint64_t want[BRAID_MSG_WORDS], sent[BRAID_MSG_WORDS];
    if (g->starting) {   /* the job's first: the mark that it started (no posts held) */
        pre[npre++] = mark_op(g);
        g->starting = 0;
    }
    if (rc != NULL) {
        uint32_t k = rc->msgs++;
        in = rc->slots + (size_t)(k % rc->nslots) * rc->slot_size;
        rec = rc->recs + (size_t)(k % rc->nslots) * BRAID_MSG_WORDS;
        msg_record(&op->expect, len, want);
        pre[npre++] = (braid_mem_op_t){ .addr = rc->wait, .value = k + 1 };
        post[npost++] = (braid_mem_op_t){ .addr = rc->post, .value = k + 1,
                                          .kind = BRAID_MEM_WRITE };
    }
    if (sc != NULL) {
        uint32_t k = sc->msgs++;
        out = sc->slots + (size_t)(k % sc->nslots) * sc->slot_size;
        npre += slot_wait(sc, k, &pre[npre]);
        uint64_t *to = sc->recs + (size_t)(k % sc->nslots) * BRAID_MSG_WORDS;
        msg_record(&op->hdr, len, sent);
        for (int i = 0; i < BRAID_MSG_WORDS; i++)
            post[npost++] = (braid_mem_op_t){ .addr = &to[i], .value = sent[i],
                                              .kind = BRAID_MEM_WRITE64 };
        post[npost++] = (braid_mem_op_t){ .addr = sc->post, .value = k + 1,
                                          .kind = BRAID_MEM_WRITE };
    }
    if (rc != NULL || sc != NULL)   /* its waits passed (where_at counts it, waits or none) */
        pre[npre++] = mark_op(g);
    BRAID_CHECK(gpu_flush(g, pre, npre));
    char *dst = ref_ptr(op, st->dst, off);
    const char *src = ref_ptr(op, st->src, off);
    braid_dev_slice_kernel_t check = { .msg = rec, .msg_err = word_dev(g, W_BAD),
                                       .msg_want = want,
                                       .msg_mark = (uint64_t)g->mark << 32 | 1 };
    if (!(out != NULL && (in != NULL || src != NULL)) && dst == NULL) {   /* a token */
        if (rec != NULL)
            BRAID_CHECK(braid_dev_kernels_check(g->k, &check, g->work));
    } else {
        braid_dev_slice_kernel_t k = {
            .in = in, .src = src, .out = { dst != NULL ? dst : out, dst != NULL ? out : NULL },
            .bytes = len, .count = len / op->sched.align, .dtype = op->dtype,
            .op = op->redop.kind,
            .reduce = (st->flags & BRAID_STEP_REDUCE) && in != NULL && src != NULL,
            .premul = op->redop.scalar_dev == NULL ? braid_step_pre(op, st) : NULL,
            .premul_dev = braid_step_pre(op, st) != NULL ? op->redop.scalar_dev : NULL,
            .postdiv = (st->flags & BRAID_STEP_FINAL) ? op->redop.postdiv : 0,
            .msg = check.msg, .msg_err = check.msg_err, .msg_want = check.msg_want,
            .msg_mark = check.msg_mark,
        };
        BRAID_CHECK(braid_dev_kernels_slice(g->k, &k, g->work));
    }
    post[npost++] = mark_op(g);
    memcpy(g->held, post, (size_t)npost * sizeof(*post));
    g->nheld = npost;
    return BRAID_OK;
}

static braid_status_t gpu_lower(braid_gpu_t *g, braid_op_t *const *ops, int n)
{
    braid_lower_pos_t pos_inline[8], *pos = pos_inline;
    braid_lower_t l;
    braid_lower_item_t it;
    if (n > 8 && (pos = malloc((size_t)n * sizeof(*pos))) == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory lowering a group of %d calls", n);
    braid_status_t st = braid_lower_begin(&l, ops, n, pos);
    while (st == BRAID_OK && braid_lower_next(&l, &it))
        st = gpu_item(g, ops[it.op], &ops[it.op]->sched.steps[it.step], it.off, it.len);
    braid_lower_end(&l);
    if (pos != pos_inline)
        free(pos);
    return st;
}

static int gpu_one_stream(braid_op_t *const *ops, int n)
{
    for (int i = 1; i < n; i++)
        if (ops[i]->stream != ops[0]->stream)
            return 0;
    return 1;
}

braid_status_t braid_gpu_submit(braid_gpu_t *g, braid_op_t *const *ops, int n, int alone,
                                braid_gpu_job_t *job)
{
    void *saved = NULL;
    const braid_device_ops_t *d = g->ops;
    BRAID_CHECK(d->ctx_get(&saved));
    if (saved != g->ctx)
        BRAID_CHECK(d->ctx_set(g->ctx));
    /* its first batch waits for the last job's end: nothing else orders jobs on different
     * streams (a wait that has passed where they share one) */
    g->held[0] = (braid_mem_op_t){ .addr = word_dev(g, W_DONE), .value = g->issued };
    g->nheld = 1;
    braid_status_t st = gpu_scratch(g, ops, n);
    job->nstreams = 0;
    g->work = alone && gpu_one_stream(ops, n) ? ops[0]->stream : g->stream;
    if (st == BRAID_OK && g->work == g->stream)
        st = gpu_join_in(g, ops, n, job);
    job->mark0 = g->mark + 1;   /* its first slice-step's batch writes it */
    g->starting = 1;
    if (st == BRAID_OK)
        st = gpu_lower(g, ops, n);
    g->starting = 0;
    if (st == BRAID_OK) {
        job->target = g->issued + 1;
        __atomic_store_n(&g->issued, job->target, __ATOMIC_RELEASE);
        /* a mismatched message holds the callers' streams until the watcher has seen it
         * and failed the communicator (it clears the mark: the low word, little-endian) */
        braid_mem_op_t end[3] = {
            { .addr = word_dev(g, W_BAD_MARK), .value = 0, .kind = BRAID_MEM_WAIT_EQ },
            { .addr = word_dev(g, W_DONE), .value = job->target, .kind = BRAID_MEM_WRITE },
            { .addr = word_dev(g, W_RELEASE), .value = job->target, .kind = BRAID_MEM_WRITE },
        };
        st = gpu_flush(g, end, 3);
    }
    if (saved != g->ctx)
        d->ctx_set(saved);
    return st;
}

braid_status_t braid_gpu_join(braid_gpu_t *g, const braid_gpu_job_t *job)
{
    for (int i = 0; i < job->nstreams; i++)
        BRAID_CHECK(g->ops->stream_wait_word(job->streams[i], &g->words->release,
                                             job->target));
    return BRAID_OK;
}

/* ---- where a job stands, and the release after a failure ------------------------------- */

/* The slice-step of the job at progress mark `progress`. */
static void where_at(braid_op_t *const *ops, int n, const braid_gpu_job_t *job,
                     uint32_t progress, braid_gpu_where_t *w)
{
    int32_t past = (int32_t)(progress - job->mark0);
    *w = (braid_gpu_where_t){ .started = past >= 0, .op = -1, .step = -1, .peer = -1 };
    if (past < 0)
        return;
    braid_lower_pos_t pos_inline[8], *pos = n > 8 ? malloc((size_t)n * sizeof(*pos))
                                                  : pos_inline;
    braid_lower_t l;
    braid_lower_item_t it;
    if (pos == NULL)
        return;
    /* the marks after the start: a slice-step's waits passed (where it has waits), then
     * its kernel and posts done */
    int32_t mark = 0;
    if (braid_lower_begin(&l, ops, n, pos) == BRAID_OK)
        while (braid_lower_next(&l, &it)) {
            const braid_step_t *st = &ops[it.op]->sched.steps[it.step];
            int peer = st->recv_peer >= 0 ? st->recv_peer : st->send_peer;
            if (peer >= 0 && past == mark++)
                w->peer = peer;
            if (w->peer >= 0 || past == mark++) {
                w->op = it.op;
                w->step = it.step;
                w->off = it.off;
                w->len = it.len;
                w->kernel = w->peer < 0;
                break;
            }
        }
    braid_lower_end(&l);
    if (pos != pos_inline)
        free(pos);
}

void braid_gpu_where(const braid_gpu_t *g, braid_op_t *const *ops, int n,
                     const braid_gpu_job_t *job, braid_gpu_where_t *w)
{
    where_at(ops, n, job, braid_gpu_progress(g), w);
}

int braid_gpu_mismatch(const braid_gpu_t *g, braid_op_t *const *ops, int n,
                       const braid_gpu_job_t *job, braid_gpu_where_t *w,
                       braid_msg_hdr_t *got_p, size_t *len_p)
{
    uint64_t mark = __atomic_load_n(&g->words->bad[BRAID_MSG_WORDS], __ATOMIC_ACQUIRE);
    if (mark == 0)
        return 0;
    where_at(ops, n, job, (uint32_t)(mark >> 32), w);
    if (w->op < 0)
        return 0;
    w->peer = ops[w->op]->sched.steps[w->step].recv_peer;   /* its kernel's mark */
    uint64_t rec[BRAID_MSG_WORDS];   /* word by word: a later launch may be writing its own */
    for (int i = 0; i < BRAID_MSG_WORDS; i++)
        rec[i] = __atomic_load_n(&g->words->bad[i], __ATOMIC_RELAXED);
    memcpy(got_p, rec, sizeof(*got_p));
    *len_p = (size_t)rec[3];
    return 1;
}

void braid_gpu_mismatch_seen(braid_gpu_t *g)
{
    __atomic_store_n(&g->words->bad[BRAID_MSG_WORDS], 0, __ATOMIC_RELEASE);
}

void braid_gpu_release(braid_gpu_t *g)
{
    braid_mem_op_t ops[BRAID_MEM_OPS_MAX];
    int n = 0;
    void *saved = NULL;
    if (g->ops->ctx_get(&saved) < 0 || (saved != g->ctx && g->ops->ctx_set(g->ctx) < 0))
        return;
    for (int r = 0; r < g->nranks; r++) {
        braid_dconn_t *c[2] = { g->send[r], g->recv[r] };
        for (int i = 0; i < 2; i++) {
            if (c[i] == NULL)
                continue;
            ops[n++] = (braid_mem_op_t){ .addr = c[i]->wait, .value = c[i]->msgs + GPU_POISON,
                                         .kind = BRAID_MEM_WRITE };
            if (n == BRAID_MEM_OPS_MAX) {
                g->ops->stream_mem_ops(g->side, ops, n);
                n = 0;
            }
        }
    }
    if (n > 0)
        g->ops->stream_mem_ops(g->side, ops, n);
    __atomic_store_n(&g->words->release, g->issued, __ATOMIC_RELEASE);
    braid_gpu_mismatch_seen(g);   /* a job's end waits for that too */
    g->released = 1;
    if (saved != g->ctx)
        g->ops->ctx_set(saved);
}
