/*
 * The host engine's slices on a device (dev_slice.h): braid's kernels (dev_kernels.h)
 * launched on the stream of the communicator's device executor, which its proxy thread
 * drives.
 *
 * A slice reads a transport slot (host memory) and the call's buffers (device memory) and
 * writes either or both. Shared-memory slots are mapped for the device (the transport maps
 * its segments through braid_device_map_host), so the kernel reads and writes them where
 * they are; a slot that is not mapped (a network provider's buffer, or a mapping the
 * runtime refused) is copied by the host into or out of the executor's pinned staging
 * memory, which the kernels reach. A slice returns once its outputs are written, because
 * the executor commits the slot right after: it records an event after its kernels and
 * waits for it, bounded (braid_device_event_wait).
 *
 * A bucket plan's slice (braid_device_exec_view_slice) reads and writes views, tensors of
 * several types: it gathers the source tensors into a device buffer of the accumulation
 * type (a braid_k_cast per tensor, a memset per gap), reduces the received slot into it,
 * rounds it to the wire type into the send slot and scatters it to the destination
 * tensors (a braid_k_cast each), all ordered on the one stream.
 *
 * What a real driver may serialise behind its own lock (device and pinned allocation,
 * module loads, the first launch of a lazily loaded kernel, synchronous or pageable
 * copies) is done in braid_device_exec_create, on the thread that makes the communicator,
 * and in braid_device_exec_reserve, on a calling thread before its job is queued. The
 * proxy, while device work is in flight, only queues async work on the executor's stream
 * (launches of loaded kernels, copies between device and pinned memory, memsets, event
 * records) and polls events; a caller may sit in a pageable copy that waits for this
 * very proxy, holding that lock.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/time.h"
#include "exec/dev_kernels.h"
#include "exec/dev_slice.h"
#include "exec/gpu.h"
#include "kernels/gpu/kargs.h"

#define DEV_SCALAR_BYTES 64         /* pinned room for a ncclPreMulSum scalar */

/* Scratch buffers are made by a calling thread and kept (freeing device memory waits for
 * the whole device, including a caller's stream that waits for this very proxy). */
#define DEV_SCRATCH_MAX BRAID_DEVICE_SCRATCH_MAX

typedef struct dev_scratch {
    void *p;
    size_t bytes;
    int used;
} dev_scratch_t;

struct braid_device_exec {
    const braid_device_ops_t *ops;
    int ordinal;
    void *stream;
    void *done;                     /* recorded after a slice's work, then waited for */
    int pending;                    /* a wait on `done` has not ended well (dev_pending) */
    braid_dev_kernels_t *k;
    char *pinned;                   /* stage in | stage out | scalar: pinned, device-mapped */
    char *stage_in, *stage_out;     /* slots the device cannot reach go through here */
    char *stage_in_dev, *stage_out_dev;   /* the same, as kernels reach them */
    char *scalar;
    size_t stage_bytes;
    char *acc_a, *acc_b;            /* bucket plans' values in the acc type, acc_bytes each */
    size_t acc_bytes;
    pthread_mutex_t scratch_lock;   /* callers add buffers while the proxy takes them */
    dev_scratch_t scratch[DEV_SCRATCH_MAX];
};

/* Where the kernels reach pinned host memory p (NULL: the runtime did not map it). */
static char *pinned_dev(const braid_device_ops_t *ops, void *p)
{
    braid_ptr_info_t info;
    if (ops->ptr_info(p, &info) < 0 || info.kind != BRAID_MEM_PINNED)
        return NULL;
    return info.dptr;
}

/* The pinned staging memory: stage in, stage out (stage_bytes each), the scalar. */
static braid_status_t exec_pinned(braid_device_exec_t *dx, size_t stage_bytes)
{
    const braid_device_ops_t *ops = dx->ops;
    BRAID_CHECK(ops->host_alloc(2 * stage_bytes + DEV_SCALAR_BYTES, (void **)&dx->pinned));
    char *dev = pinned_dev(ops, dx->pinned);
    if (dev == NULL) {
        ops->host_free(dx->pinned);
        return braid_err(BRAID_ERR_DEVICE, "%s: pinned memory is not mapped for device %d",
                         ops->name, dx->ordinal);
    }
    dx->stage_bytes = stage_bytes;
    dx->stage_in = dx->pinned;
    dx->stage_out = dx->pinned + stage_bytes;
    dx->scalar = dx->pinned + 2 * stage_bytes;
    dx->stage_in_dev = dev;
    dx->stage_out_dev = dev + stage_bytes;
    return BRAID_OK;
}

/* Device memory: the bucket plans' two acc-type buffers (8 bytes per element of a slice
 * of fp32, so a slice of a narrower wire type takes a few rounds), and a first scratch
 * buffer. */
static braid_status_t exec_memory(braid_device_exec_t *dx, size_t slice_bytes,
                                  size_t scratch_bytes)
{
    const braid_device_ops_t *ops = dx->ops;
    size_t acc = 2 * slice_bytes < 4096 ? 4096 : 2 * slice_bytes;
    BRAID_CHECK(ops->mem_alloc(acc, (void **)&dx->acc_a));
    BRAID_CHECK(ops->mem_alloc(acc, (void **)&dx->acc_b));
    dx->acc_bytes = acc;
    if (scratch_bytes > 0) {
        BRAID_CHECK(ops->mem_alloc(scratch_bytes, &dx->scratch[0].p));
        dx->scratch[0].bytes = scratch_bytes;
    }
    return BRAID_OK;
}

/* Frees what is made; the stream's own work must be done (or never have started). */
static void exec_release(braid_device_exec_t *dx)
{
    const braid_device_ops_t *ops = dx->ops;
    if (dx->done != NULL)
        ops->event_destroy(dx->done);
    if (dx->stream != NULL)
        ops->stream_destroy(dx->stream);
    if (dx->pinned != NULL)
        ops->host_free(dx->pinned);
    if (dx->acc_a != NULL)
        ops->mem_free(dx->acc_a);
    if (dx->acc_b != NULL)
        ops->mem_free(dx->acc_b);
    for (int i = 0; i < DEV_SCRATCH_MAX; i++)
        if (dx->scratch[i].p != NULL)
            ops->mem_free(dx->scratch[i].p);
    pthread_mutex_destroy(&dx->scratch_lock);
    free(dx);
}

braid_status_t braid_device_exec_create(int ordinal, size_t slice_bytes, size_t scratch_bytes,
                                        braid_device_exec_t **dx_p)
{
    const braid_device_ops_t *ops = braid_device();
    braid_device_exec_t *dx = calloc(1, sizeof(*dx));
    if (dx == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for a device executor");
    dx->ops = ops;
    dx->ordinal = ordinal;
    pthread_mutex_init(&dx->scratch_lock, NULL);
    braid_status_t st;
    BRAID_CHECK_GOTO(st, ops->bind(ordinal), out_release);
    BRAID_CHECK_GOTO(st, braid_dev_kernels_get(ordinal, &dx->k), out_release);
    BRAID_CHECK_GOTO(st, ops->stream_create(&dx->stream), out_release);
    BRAID_CHECK_GOTO(st, ops->event_create(&dx->done), out_release);
    BRAID_CHECK_GOTO(st, exec_pinned(dx, slice_bytes), out_release);
    BRAID_CHECK_GOTO(st, exec_memory(dx, slice_bytes, scratch_bytes), out_release);
    *dx_p = dx;
    return BRAID_OK;
out_release:
    exec_release(dx);
    return st;
}

int braid_device_exec_ordinal(const braid_device_exec_t *dx)
{
    return dx->ordinal;
}

/* Executors whose last wait has not ended well: their work may still be queued or
 * running, and freeing device memory would wait for it. */
static _Atomic int dev_pending;

static void exec_pending(braid_device_exec_t *dx, int on)
{
    if (dx->pending != on)
        atomic_fetch_add(&dev_pending, on ? 1 : -1);
    dx->pending = on;
}

int braid_device_exec_busy(void)
{
    return atomic_load(&dev_pending) > 0;
}

/* Device work of the process not finished: the executors' and the GPU engines'. */
static int exec_others_busy(void)
{
    return atomic_load(&dev_pending) > 0 || braid_gpu_busy(NULL);
}

int braid_device_exec_destroy(braid_device_exec_t *dx, double wait_s)
{
    if (dx == NULL)
        return 0;
    /* this executor's and the others' work ends at once, or at their timeout (after which
     * the device is stuck), or the abort that left it is followed by its destroy */
    for (double end = braid_now() + wait_s;;) {
        if (dx->pending && dx->ops->event_query(dx->done) != BRAID_INPROGRESS)
            exec_pending(dx, 0);
        if (braid_device_stuck() || !exec_others_busy() || braid_now() >= end)
            break;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    if (dx->pending)   /* its own work never finished */
        braid_device_set_stuck();
    if (braid_device_stuck() || exec_others_busy()) {
        BRAID_WARN("%s device %d: work braid queued has not finished: a device executor's "
                   "stream and memory are left in place (freeing them would wait for it)",
                   dx->ops->name, dx->ordinal);
        pthread_mutex_destroy(&dx->scratch_lock);
        free(dx);
        return 1;
    }
    exec_release(dx);
    return 0;
}

/* The work queued on the executor's stream so far has finished (or w gave up on it: after
 * a timeout, the device is stuck). An event record and its queries take no driver lock. */
static braid_status_t exec_wait(braid_device_exec_t *dx, const braid_device_wait_t *w)
{
    exec_pending(dx, 1);
    BRAID_CHECK(dx->ops->event_record(dx->done, dx->stream));
    braid_status_t st = braid_device_event_wait(dx->done, w);
    if (st == BRAID_OK)
        exec_pending(dx, 0);
    else if (st == BRAID_ERR_TIMEOUT)
        braid_device_set_stuck();
    return st;
}

braid_status_t braid_device_exec_read(braid_device_exec_t *dx, void *dst, const void *src,
                                      size_t bytes, const braid_device_wait_t *w)
{
    if (bytes > DEV_SCALAR_BYTES)
        return braid_err(BRAID_ERR_INTERNAL, "a %zu-byte device read (at most %d)", bytes,
                         DEV_SCALAR_BYTES);
    BRAID_CHECK(dx->ops->copy_async(dx->scalar, src, bytes, dx->stream));   /* to pinned */
    BRAID_CHECK(exec_wait(dx, w));
    memcpy(dst, dx->scalar, bytes);
    return BRAID_OK;
}

/* ---- scratch ---------------------------------------------------------------------------- */

/* The sizes, largest first (n is a group's ops on one communicator: a few). */
static void sizes_sort(size_t *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] > v[j - 1]; j--) {
            size_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
}

/* Which of sizes[] (largest first) no kept buffer covers, each buffer covering one: into
 * lack[], their number returned. Under scratch_lock. */
static int scratch_lacking(braid_device_exec_t *dx, const size_t *sizes, int n, size_t *lack)
{
    int taken[DEV_SCRATCH_MAX] = { 0 }, nlack = 0;
    for (int i = 0; i < n; i++) {
        int best = -1;
        for (int j = 0; j < DEV_SCRATCH_MAX; j++)
            if (dx->scratch[j].p != NULL && !taken[j] && dx->scratch[j].bytes >= sizes[i] &&
                (best < 0 || dx->scratch[j].bytes < dx->scratch[best].bytes))
                best = j;
        if (best >= 0)
            taken[best] = 1;
        else
            lack[nlack++] = sizes[i];
    }
    return nlack;
}

static braid_status_t scratch_add(braid_device_exec_t *dx, void *p, size_t bytes)
{
    braid_status_t st = BRAID_ERR_USAGE;
    pthread_mutex_lock(&dx->scratch_lock);
    for (int j = 0; j < DEV_SCRATCH_MAX && st < 0; j++)
        if (dx->scratch[j].p == NULL) {
            dx->scratch[j] = (dev_scratch_t){ .p = p, .bytes = bytes };
            st = BRAID_OK;
        }
    pthread_mutex_unlock(&dx->scratch_lock);
    if (st < 0)
        return braid_err(st, "more than %d device scratch buffers (a group of that many "
                         "collectives with scratch on one communicator)", DEV_SCRATCH_MAX);
    return BRAID_OK;
}

braid_status_t braid_device_exec_reserve(braid_device_exec_t *dx, const size_t *sizes, int n)
{
    size_t want[DEV_SCRATCH_MAX], lack[DEV_SCRATCH_MAX];
    if (n > DEV_SCRATCH_MAX)
        return braid_err(BRAID_ERR_USAGE, "a group of %d collectives with scratch on one "
                         "communicator (at most %d)", n, DEV_SCRATCH_MAX);
    memcpy(want, sizes, (size_t)n * sizeof(*want));
    sizes_sort(want, n);
    pthread_mutex_lock(&dx->scratch_lock);
    int nlack = scratch_lacking(dx, want, n, lack);
    pthread_mutex_unlock(&dx->scratch_lock);
    for (int i = 0; i < nlack; i++) {
        void *p;
        BRAID_CHECK(dx->ops->bind(dx->ordinal));
        BRAID_CHECK(dx->ops->mem_alloc(lack[i], &p));
        BRAID_INFO(BRAID_SUB_PROXY, "device %d: a %zu-byte scratch buffer made for a call",
                   dx->ordinal, lack[i]);
        braid_status_t st = scratch_add(dx, p, lack[i]);
        if (st < 0) {
            dx->ops->mem_free(p);
            return st;
        }
    }
    return BRAID_OK;
}

/* A reserved buffer of at least `bytes`: the smallest free one that fits. */
braid_status_t braid_device_exec_alloc(braid_device_exec_t *dx, size_t bytes, void **p_p)
{
    dev_scratch_t *best = NULL;
    pthread_mutex_lock(&dx->scratch_lock);
    for (int i = 0; i < DEV_SCRATCH_MAX; i++) {
        dev_scratch_t *sc = &dx->scratch[i];
        if (sc->p != NULL && !sc->used && sc->bytes >= bytes &&
            (best == NULL || sc->bytes < best->bytes))
            best = sc;
    }
    if (best != NULL) {
        best->used = 1;
        *p_p = best->p;
    }
    pthread_mutex_unlock(&dx->scratch_lock);
    if (best == NULL)
        return braid_err(BRAID_ERR_INTERNAL, "no device scratch buffer of %zu bytes was "
                         "reserved for the call", bytes);
    return BRAID_OK;
}

void braid_device_exec_free(braid_device_exec_t *dx, void *p)
{
    pthread_mutex_lock(&dx->scratch_lock);
    for (int i = 0; i < DEV_SCRATCH_MAX; i++)
        if (dx->scratch[i].p == p && p != NULL)
            dx->scratch[i].used = 0;
    pthread_mutex_unlock(&dx->scratch_lock);
}

/* Where the kernels reach a slot directly: a mapped slot's device address, else NULL.
 * (A pointer query: answered from the driver's tables, never behind its lock.) */
static char *slot_mapped(braid_device_exec_t *dx, const void *p)
{
    braid_ptr_info_t info;
    if (p == NULL || dx->ops->ptr_info(p, &info) < 0 || info.kind != BRAID_MEM_PINNED)
        return NULL;
    return info.dptr;
}

/* A slot as the kernels reach it: mapped, or through staging (`in`: copied there now). */
static braid_status_t slot_dev(braid_device_exec_t *dx, const void *slot, size_t bytes,
                               int in, char **dev_p)
{
    char *p = slot_mapped(dx, slot);
    if (p == NULL && bytes > dx->stage_bytes)
        return braid_err(BRAID_ERR_INTERNAL, "a %zu-byte slice is larger than the %zu-byte "
                         "device staging buffers", bytes, dx->stage_bytes);
    if (p == NULL && in)
        memcpy(dx->stage_in, slot, bytes);
    *dev_p = p != NULL ? p : in ? dx->stage_in_dev : dx->stage_out_dev;
    return BRAID_OK;
}

/* After the wait: an output slot written through staging gets its bytes. */
static void slot_out_done(braid_device_exec_t *dx, void *slot, const char *dev, size_t bytes)
{
    if (slot != NULL && dev == dx->stage_out_dev)
        memcpy(slot, dx->stage_out, bytes);
}

braid_status_t braid_device_exec_slice(braid_device_exec_t *dx, const braid_device_slice_t *s,
                                       const braid_device_wait_t *w)
{
    char *in = NULL, *out = NULL;
    if (s->in != NULL)
        BRAID_CHECK(slot_dev(dx, s->in, s->bytes, 1, &in));
    if (s->out != NULL)
        BRAID_CHECK(slot_dev(dx, s->out, s->bytes, 0, &out));
    braid_dev_slice_kernel_t k = {
        .in = in, .src = s->src, .out = { s->dst != NULL ? s->dst : out,
                                          s->dst != NULL ? out : NULL },
        .bytes = s->bytes, .count = s->count, .dtype = s->dtype, .op = s->op,
        .reduce = s->reduce, .premul = s->premul, .postdiv = s->postdiv,
    };
    BRAID_CHECK(braid_dev_kernels_slice(dx->k, &k, dx->stream));
    BRAID_CHECK(exec_wait(dx, w));
    slot_out_done(dx, s->out, out, s->bytes);
    return BRAID_OK;
}

/* ---- bucket plans: slices that read and write views (src/exec/exec_view.c's twin) ---- */

/* dst[0..n) (ddt) = (accumulate ? dst : 0) + *scale * src[0..n) (sdt): braid_kern_cast. */
static braid_status_t view_cast(braid_device_exec_t *dx, braid_dtype_t ddt, void *dst,
                                braid_dtype_t sdt, const void *src, size_t n,
                                const double *scale, int accumulate)
{
    braid_kargs_t a;
    if (n == 0 || (ddt == sdt && scale == NULL && !accumulate && dst == src))
        return BRAID_OK;
    memset(&a, 0, sizeof(a));
    a.in[0] = src;
    a.out[0] = dst;
    a.count = n;
    a.dtype = ddt;
    a.dtype_in = sdt;
    a.accumulate = accumulate;
    if (scale != NULL) {
        a.premul.f = *scale;
        a.premul_mask = 1u;
    }
    return braid_dev_kernels_launch(dx->k->cast, &a, sizeof(a), n, dx->stream);
}

/* a[0..n) = the view's elements e.. in type acc, times *pre; padding reads 0. */
static braid_status_t view_gather(braid_device_exec_t *dx, const braid_view_t *v, size_t e,
                                  size_t n, braid_dtype_t acc, char *a, const double *pre)
{
    braid_view_iter_t it = braid_view_iter(v, e, n);
    const braid_seg_t *s;
    size_t as = braid_dtype_size(acc), first, k;
    while ((k = braid_view_next(&it, &s, &first)) > 0) {
        char *to = a + (first - e) * as;
        if (s == NULL)   /* an async memset of device memory: queued, as a launch */
            BRAID_CHECK(dx->ops->memset_async(to, 0, k * as, dx->stream));
        else
            BRAID_CHECK(view_cast(dx, acc, to, s->dtype, braid_seg_at(s, first), k, pre, 0));
    }
    return BRAID_OK;
}

/* The view's elements e.. = vals[0..n) of type vt, cast, scaled, copied or added. */
static braid_status_t view_scatter(braid_device_exec_t *dx, const braid_view_t *v, size_t e,
                                   size_t n, braid_dtype_t vt, const char *vals)
{
    braid_view_iter_t it = braid_view_iter(v, e, n);
    const braid_seg_t *s;
    size_t vs = braid_dtype_size(vt), first, k;
    while ((k = braid_view_next(&it, &s, &first)) > 0)
        if (s != NULL)
            BRAID_CHECK(view_cast(dx, s->dtype, braid_seg_at(s, first), vt,
                                  vals + (first - e) * vs, k, v->scaled ? &v->scale : NULL,
                                  v->accumulate));
    return BRAID_OK;
}

/* Elements o..o+n of a slice with a source view: gather, reduce, send, scatter. `in` and
 * `out` are the slots' device addresses (NULL: none). */
static braid_status_t view_chunk(braid_device_exec_t *dx, const braid_device_view_slice_t *s,
                                 const char *in, char *out, size_t o, size_t n)
{
    braid_dtype_t w = (braid_dtype_t)s->wire, acc = (braid_dtype_t)s->acc;
    size_t ws = braid_dtype_size(w);
    char *a = dx->acc_a;
    BRAID_CHECK(view_gather(dx, s->src, s->esrc + o, n, acc, a, s->pre));
    if (in != NULL) {
        braid_kargs_t k;
        memset(&k, 0, sizeof(k));
        k.in[0] = in + o * ws;
        if (w != acc) {
            BRAID_CHECK(view_cast(dx, acc, dx->acc_b, w, in + o * ws, n, NULL, 0));
            k.in[0] = dx->acc_b;
        }
        k.in[1] = a;                /* in OP gathered, as braid_kern_reduce(in, a) */
        k.out[0] = a;
        k.count = n;
        k.nin = 2;
        k.dtype = acc;
        k.op = s->op;
        BRAID_CHECK(braid_dev_kernels_launch(dx->k->reduce, &k, sizeof(k), n,
                                             dx->stream));
    }
    if (out != NULL)
        BRAID_CHECK(view_cast(dx, w, out + o * ws, acc, a, n, NULL, 0));
    if (s->dst == NULL)
        return BRAID_OK;
    return out != NULL ? view_scatter(dx, s->dst, s->edst + o, n, w, out + o * ws)
                       : view_scatter(dx, s->dst, s->edst + o, n, acc, a);
}

/* With a source view: in rounds of what the acc buffers hold. */
static braid_status_t view_slice_src(braid_device_exec_t *dx,
                                     const braid_device_view_slice_t *s, size_t bytes,
                                     char **out_p)
{
    char *in = NULL;
    if (s->in != NULL && s->reduce)
        BRAID_CHECK(slot_dev(dx, s->in, bytes, 1, &in));
    if (s->out != NULL)
        BRAID_CHECK(slot_dev(dx, s->out, bytes, 0, out_p));
    size_t round = dx->acc_bytes / braid_dtype_size((braid_dtype_t)s->acc);
    for (size_t o = 0; o < s->count; o += round)
        BRAID_CHECK(view_chunk(dx, s, in, *out_p, o,
                               s->count - o < round ? s->count - o : round));
    return BRAID_OK;
}

braid_status_t braid_device_exec_view_slice(braid_device_exec_t *dx,
                                            const braid_device_view_slice_t *s,
                                            const braid_device_wait_t *w)
{
    size_t ws = braid_dtype_size((braid_dtype_t)s->wire), bytes = s->count * ws;
    char *out = NULL;
    if (ws == 0 || braid_dtype_size((braid_dtype_t)s->acc) == 0 ||
        (s->src == NULL && s->in == NULL))
        return braid_err(BRAID_ERR_INTERNAL, "a bucket plan's device slice has no input or "
                         "bad types (wire %d, acc %d)", s->wire, s->acc);
    if (s->count == 0)
        return BRAID_OK;
    if (s->src != NULL) {
        BRAID_CHECK(view_slice_src(dx, s, bytes, &out));
    } else {
        /* the received value passes through: to the send slot as is, to the tensors cast */
        if (s->out != NULL)
            memcpy(s->out, s->in, bytes);
        if (s->dst != NULL) {
            char *in;
            BRAID_CHECK(slot_dev(dx, s->in, bytes, 1, &in));
            BRAID_CHECK(view_scatter(dx, s->dst, s->edst, s->count, (braid_dtype_t)s->wire,
                                     in));
        }
    }
    BRAID_CHECK(exec_wait(dx, w));
    slot_out_done(dx, s->out, out, bytes);
    return BRAID_OK;
}
