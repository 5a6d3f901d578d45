/*
 * Running the executor's slices on a device: braid's kernels (kernels/gpu) loaded once per
 * device, launched on an internal stream of the proxy that runs the schedule.
 *
 * A slice reads a transport slot (host memory) and the call's buffers (device memory) and
 * writes either or both. Shared-memory slots are mapped for the device (the transport maps
 * its segments through braid_device_map_host), so the kernel reads and writes them where
 * they are; a slot that is not mapped (a network provider's buffer, or a mapping the
 * runtime refused) goes through one of two device bounce buffers. The slice returns once
 * its outputs are written, because the executor commits the slot right after.
 *
 * A bucket plan's slice (braid_device_exec_view_slice) reads and writes views, tensors of
 * several types: it gathers the source tensors into a device buffer of the accumulation
 * type (a braid_k_cast per tensor, a memset per gap), reduces the received slot into it,
 * rounds it to the wire type into the send slot and scatters it to the destination
 * tensors (a braid_k_cast each), all ordered on the one stream.
 *
 * Kernel images, tried in the table's order for the backend: CUDA loads its fatbin (the
 * driver picks the cubin or JITs the PTX) or, on braid's emulated driver, the emu image;
 * HIP loads its code-object bundle, else compiles the embedded source with hiprtc.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "device/device.h"
#include "kernels/gpu/images.h"
#include "kernels/gpu/kargs.h"

#define DEV_MAX 64
#define DEV_BLOCK 256
#define DEV_GRID_MAX 1024

typedef struct dev_kernels {
    void *module;               /* loaded once per device, for the process's life */
    void *reduce, *copy, *cast;
    const char *image;          /* which image loaded: "cuda sm_80 ...", "hip (hiprtc)" */
} dev_kernels_t;

/*
 * Device memory is allocated once and kept: freeing it (cuMemFree, hipFree) waits for the
 * whole device, including a caller's stream that waits for this very proxy.
 */
#define DEV_SCRATCH_MAX 16

typedef struct dev_scratch {
    void *p;
    size_t bytes;
    int used;
} dev_scratch_t;

struct braid_device_exec {
    const braid_device_ops_t *ops;
    int ordinal;
    void *stream;
    dev_kernels_t *k;
    char *bounce_in, *bounce_out;   /* device memory, bounce_bytes each */
    size_t bounce_bytes;
    char *acc_a, *acc_b;            /* bucket plans' values in the acc type, acc_bytes each */
    size_t acc_bytes;
    dev_scratch_t scratch[DEV_SCRATCH_MAX];
};

static dev_kernels_t dev_kernels[DEV_MAX];
static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;

static int image_for(const braid_device_ops_t *ops, const braid_gpu_image_t *img)
{
    if (strcmp(ops->name, "cuda") == 0)
        return strcmp(img->kind, "cuda") == 0 || strcmp(img->kind, "emu") == 0;
    return strcmp(ops->name, "hip") == 0 && strcmp(img->kind, "hip") == 0;
}

static braid_status_t kernels_find(const braid_device_ops_t *ops, void *mod, dev_kernels_t *k)
{
    BRAID_CHECK(ops->module_function(mod, BRAID_KERNEL_REDUCE, &k->reduce));
    BRAID_CHECK(ops->module_function(mod, BRAID_KERNEL_CAST, &k->cast));
    return ops->module_function(mod, BRAID_KERNEL_COPY, &k->copy);
}

/* Load braid's kernels on the bound device: the first embedded image it accepts. */
static braid_status_t kernels_load(const braid_device_ops_t *ops, dev_kernels_t *k)
{
    void *mod = NULL;
    for (int i = 0; i < braid_gpu_nimages; i++) {
        const braid_gpu_image_t *img = &braid_gpu_images[i];
        if (!image_for(ops, img))
            continue;
        braid_status_t st = ops->module_load(img->data, img->size, &mod);
        if (st == BRAID_ERR_UNSUPPORTED)
            continue;
        BRAID_CHECK(st);
        k->module = mod;
        k->image = img->kind;
        return kernels_find(ops, mod, k);
    }
    if (ops->compile != NULL && braid_gpu_hip_source[0] != '\0') {
        void *image;
        size_t size;
        BRAID_CHECK(ops->compile(braid_gpu_hip_source, &image, &size));
        braid_status_t st = ops->module_load(image, size, &mod);
        free(image);
        BRAID_CHECK(st);
        k->module = mod;
        k->image = "hip (compiled at run time)";
        return kernels_find(ops, mod, k);
    }
    return braid_err(BRAID_ERR_UNSUPPORTED, "%s: no kernel image embedded in braid runs on "
                     "this device (braid-info lists them; rebuild with --with-gpu-archs "
                     "naming its arch)", ops->name);
}

static braid_status_t kernels_get(const braid_device_ops_t *ops, int ordinal,
                                  dev_kernels_t **k_p)
{
    if (ordinal < 0 || ordinal >= DEV_MAX)
        return braid_err(BRAID_ERR_INVALID, "device %d is out of range", ordinal);
    braid_status_t st = BRAID_OK;
    pthread_mutex_lock(&dev_lock);
    dev_kernels_t *k = &dev_kernels[ordinal];
    if (k->reduce == NULL)
        st = kernels_load(ops, k);
    pthread_mutex_unlock(&dev_lock);
    *k_p = k;
    return st;
}

braid_status_t braid_device_exec_create(int ordinal, size_t slice_bytes,
                                        braid_device_exec_t **dx_p)
{
    const braid_device_ops_t *ops = braid_device();
    braid_device_exec_t *dx = calloc(1, sizeof(*dx));
    if (dx == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for a device executor");
    dx->ops = ops;
    dx->ordinal = ordinal;
    braid_status_t st;
    BRAID_CHECK_GOTO(st, ops->bind(ordinal), out_free);
    BRAID_CHECK_GOTO(st, kernels_get(ops, ordinal, &dx->k), out_free);
    BRAID_CHECK_GOTO(st, ops->mem_alloc(slice_bytes, (void **)&dx->bounce_in), out_free);
    BRAID_CHECK_GOTO(st, ops->mem_alloc(slice_bytes, (void **)&dx->bounce_out), out_bounce);
    dx->bounce_bytes = slice_bytes;
    BRAID_CHECK_GOTO(st, ops->stream_create(&dx->stream), out_bounces);
    *dx_p = dx;
    return BRAID_OK;
out_bounces:
    ops->mem_free(dx->bounce_out);
out_bounce:
    ops->mem_free(dx->bounce_in);
out_free:
    free(dx);
    return st;
}

void braid_device_exec_destroy(braid_device_exec_t *dx)
{
    if (dx == NULL)
        return;
    dx->ops->stream_sync(dx->stream);
    dx->ops->stream_destroy(dx->stream);
    dx->ops->mem_free(dx->bounce_in);
    dx->ops->mem_free(dx->bounce_out);
    if (dx->acc_a != NULL)
        dx->ops->mem_free(dx->acc_a);
    if (dx->acc_b != NULL)
        dx->ops->mem_free(dx->acc_b);
    for (int i = 0; i < DEV_SCRATCH_MAX; i++)
        if (dx->scratch[i].p != NULL)
            dx->ops->mem_free(dx->scratch[i].p);
    free(dx);
}

braid_status_t braid_device_exec_read(braid_device_exec_t *dx, void *dst, const void *src,
                                      size_t bytes)
{
    BRAID_CHECK(dx->ops->copy_async(dst, src, bytes, dx->stream));
    return dx->ops->stream_sync(dx->stream);
}

/* A kept buffer of at least `bytes`: the smallest free one that fits, else a new one. */
braid_status_t braid_device_exec_alloc(braid_device_exec_t *dx, size_t bytes, void **p_p)
{
    dev_scratch_t *best = NULL, *empty = NULL;
    for (int i = 0; i < DEV_SCRATCH_MAX; i++) {
        dev_scratch_t *sc = &dx->scratch[i];
        if (sc->p == NULL && empty == NULL)
            empty = sc;
        if (sc->p != NULL && !sc->used && sc->bytes >= bytes &&
            (best == NULL || sc->bytes < best->bytes))
            best = sc;
    }
    if (best == NULL && empty == NULL)
        return braid_err(BRAID_ERR_USAGE, "more than %d device scratch buffers in use at "
                         "once (a group of that many collectives on one communicator)",
                         DEV_SCRATCH_MAX);
    if (best == NULL) {
        BRAID_CHECK(dx->ops->mem_alloc(bytes, &empty->p));
        empty->bytes = bytes;
        best = empty;
    }
    best->used = 1;
    *p_p = best->p;
    return BRAID_OK;
}

void braid_device_exec_free(braid_device_exec_t *dx, void *p)
{
    for (int i = 0; i < DEV_SCRATCH_MAX; i++)
        if (dx->scratch[i].p == p && p != NULL)
            dx->scratch[i].used = 0;
}

static braid_status_t launch(braid_device_exec_t *dx, void *fn, braid_kargs_t *a,
                             size_t units)
{
    size_t per_block = (size_t)DEV_BLOCK * 4;
    size_t grid = (units + per_block - 1) / per_block;
    grid = grid < 1 ? 1 : grid > DEV_GRID_MAX ? DEV_GRID_MAX : grid;
    return dx->ops->launch(fn, (unsigned)grid, DEV_BLOCK, a, sizeof(*a), dx->stream);
}

/* The kernel that computes the slice's value from `in` (device copy of the slot, or NULL)
 * and src into a->out[]. Nothing to do when the value is src itself, already in place. */
static braid_status_t slice_kernel(braid_device_exec_t *dx, const braid_device_slice_t *s,
                                   const void *in, braid_kargs_t *a)
{
    a->dtype = s->dtype;
    a->op = s->op;
    a->postdiv = s->postdiv;
    if (s->premul != NULL)
        memcpy(&a->premul, s->premul, sizeof(a->premul));
    if (in != NULL && s->reduce) {
        a->in[0] = in;
        a->in[1] = s->src;
        a->nin = 2;
        a->premul_mask = s->premul != NULL ? 2u : 0u;
    } else {
        a->in[0] = in != NULL ? in : s->src;
        a->nin = 1;
        a->premul_mask = in == NULL && s->premul != NULL ? 1u : 0u;
    }
    a->count = s->count;
    if (a->nin == 1 && a->premul_mask == 0 && s->postdiv <= 1) {
        if (a->in[0] == a->out[0] && a->out[1] == NULL)
            return BRAID_OK;
        a->count = s->bytes;
        return launch(dx, dx->k->copy, a, s->bytes / 16 + 1);
    }
    return launch(dx, dx->k->reduce, a, s->count);
}

/* Where the kernels reach a slot directly: a mapped slot's device address, else NULL. */
static void *slot_mapped(braid_device_exec_t *dx, const void *p)
{
    braid_ptr_info_t info;
    if (p == NULL || dx->ops->ptr_info(p, &info) < 0 || info.kind != BRAID_MEM_PINNED)
        return NULL;
    return info.dptr;
}

braid_status_t braid_device_exec_slice(braid_device_exec_t *dx, const braid_device_slice_t *s)
{
    const braid_device_ops_t *ops = dx->ops;
    const void *in = slot_mapped(dx, s->in);
    void *out = slot_mapped(dx, s->out);
    braid_kargs_t a;
    memset(&a, 0, sizeof(a));
    if (((s->in != NULL && in == NULL) || (s->out != NULL && out == NULL)) &&
        s->bytes > dx->bounce_bytes)
        return braid_err(BRAID_ERR_INTERNAL, "a %zu-byte slice is larger than the %zu-byte "
                         "device bounce buffers", s->bytes, dx->bounce_bytes);
    if (s->in != NULL && in == NULL) {
        BRAID_CHECK(ops->copy_async(dx->bounce_in, s->in, s->bytes, dx->stream));
        in = dx->bounce_in;
    }
    if (s->out != NULL && out == NULL)
        out = dx->bounce_out;
    a.out[0] = s->dst != NULL ? s->dst : out;
    a.out[1] = s->dst != NULL ? out : NULL;
    BRAID_CHECK(slice_kernel(dx, s, in, &a));
    if (out == dx->bounce_out)
        BRAID_CHECK(ops->copy_async(s->out, dx->bounce_out, s->bytes, dx->stream));
    return ops->stream_sync(dx->stream);
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
    return launch(dx, dx->k->cast, &a, n);
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
        if (s == NULL)
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

/* The two acc-type buffers, allocated at the first bucket plan's slice and kept: 8 bytes
 * per element of a slice of fp32, so a slice of a narrower wire type takes a few rounds. */
static braid_status_t view_scratch(braid_device_exec_t *dx)
{
    if (dx->acc_b != NULL)
        return BRAID_OK;
    size_t bytes = 2 * dx->bounce_bytes < 4096 ? 4096 : 2 * dx->bounce_bytes;
    if (dx->acc_a == NULL)
        BRAID_CHECK(dx->ops->mem_alloc(bytes, (void **)&dx->acc_a));
    BRAID_CHECK(dx->ops->mem_alloc(bytes, (void **)&dx->acc_b));
    dx->acc_bytes = bytes;
    return BRAID_OK;
}

/* A slot as the kernels reach it: mapped, or through a bounce buffer (`in`: filled now). */
static braid_status_t view_slot(braid_device_exec_t *dx, const void *slot, size_t bytes,
                                char *bounce, int in, char **dev_p)
{
    char *p = slot_mapped(dx, slot);
    if (p == NULL && bytes > dx->bounce_bytes)
        return braid_err(BRAID_ERR_INTERNAL, "a %zu-byte slice is larger than the %zu-byte "
                         "device bounce buffers", bytes, dx->bounce_bytes);
    if (p == NULL && in)
        BRAID_CHECK(dx->ops->copy_async(bounce, slot, bytes, dx->stream));
    *dev_p = p != NULL ? p : bounce;
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
        BRAID_CHECK(launch(dx, dx->k->reduce, &k, n));
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
                                     const braid_device_view_slice_t *s, size_t bytes)
{
    const braid_device_ops_t *ops = dx->ops;
    char *in = NULL, *out = NULL;
    BRAID_CHECK(view_scratch(dx));
    if (s->in != NULL && s->reduce)
        BRAID_CHECK(view_slot(dx, s->in, bytes, dx->bounce_in, 1, &in));
    if (s->out != NULL)
        BRAID_CHECK(view_slot(dx, s->out, bytes, dx->bounce_out, 0, &out));
    size_t round = dx->acc_bytes / braid_dtype_size((braid_dtype_t)s->acc);
    for (size_t o = 0; o < s->count; o += round)
        BRAID_CHECK(view_chunk(dx, s, in, out, o, s->count - o < round ? s->count - o : round));
    if (out == dx->bounce_out)
        BRAID_CHECK(ops->copy_async(s->out, dx->bounce_out, bytes, dx->stream));
    return BRAID_OK;
}

braid_status_t braid_device_exec_view_slice(braid_device_exec_t *dx,
                                            const braid_device_view_slice_t *s)
{
    size_t ws = braid_dtype_size((braid_dtype_t)s->wire), bytes = s->count * ws;
    if (ws == 0 || braid_dtype_size((braid_dtype_t)s->acc) == 0 ||
        (s->src == NULL && s->in == NULL))
        return braid_err(BRAID_ERR_INTERNAL, "a bucket plan's device slice has no input or "
                         "bad types (wire %d, acc %d)", s->wire, s->acc);
    if (s->count == 0)
        return BRAID_OK;
    if (s->src != NULL) {
        BRAID_CHECK(view_slice_src(dx, s, bytes));
    } else {
        /* the received value passes through: to the send slot as is, to the tensors cast */
        if (s->out != NULL)
            memcpy(s->out, s->in, bytes);
        if (s->dst != NULL) {
            char *in;
            BRAID_CHECK(view_slot(dx, s->in, bytes, dx->bounce_in, 1, &in));
            BRAID_CHECK(view_scatter(dx, s->dst, s->edst, s->count, (braid_dtype_t)s->wire,
                                     in));
        }
    }
    return dx->ops->stream_sync(dx->stream);
}

void braid_device_report(void (*line)(void *arg, const char *text), void *arg)
{
    char buf[512];
    const braid_device_ops_t *ops = braid_device();
    for (int i = 0; i < braid_gpu_nimages; i++) {
        snprintf(buf, sizeof(buf), "kernel image %s: %s (%zu bytes)", braid_gpu_images[i].kind,
                 braid_gpu_images[i].archs, braid_gpu_images[i].size);
        line(arg, buf);
    }
    snprintf(buf, sizeof(buf), "kernel source for run-time compiles: %s",
             braid_gpu_hip_source[0] != '\0' ? "embedded" : "none");
    line(arg, buf);
    snprintf(buf, sizeof(buf), "device backend: %s, %d device%s", ops->name,
             braid_device_count(), braid_device_count() == 1 ? "" : "s");
    line(arg, buf);
    for (int d = 0; d < braid_device_count() && d < DEV_MAX; d++) {
        char desc[256] = "";
        dev_kernels_t *k = NULL;
        if (ops->bind(d) < 0 || ops->describe(d, desc, sizeof(desc)) < 0)
            snprintf(desc, sizeof(desc), "(cannot query: %s)", braid_err_last());
        const char *img = kernels_get(ops, d, &k) == BRAID_OK ? k->image : braid_err_last();
        snprintf(buf, sizeof(buf), "device %d: %s; kernels: %s", d, desc, img);
        line(arg, buf);
    }
}
