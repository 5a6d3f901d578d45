/*
 * braid's GPU kernels on a device (dev_kernels.h): the embedded images, tried in the
 * table's order for the backend (CUDA loads its fatbin, the driver picking the cubin or
 * JITting the PTX, or, on braid's emulated driver, the emu image; HIP loads its
 * code-object bundle, else compiles the embedded source with hiprtc), and one slice's
 * kernel launched on a stream.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "device/device.h"
#include "exec/dev_kernels.h"
#include "kernels/gpu/images.h"
#include "kernels/gpu/kargs.h"

#define DEV_MAX 64
#define DEV_BLOCK 256
#define DEV_GRID_MAX 1024

static braid_dev_kernels_t dev_kernels[DEV_MAX];
static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;

static int image_for(const braid_device_ops_t *ops, const braid_gpu_image_t *img)
{
    if (strcmp(ops->name, "cuda") == 0)
        return strcmp(img->kind, "cuda") == 0 || strcmp(img->kind, "emu") == 0;
    return strcmp(ops->name, "hip") == 0 && strcmp(img->kind, "hip") == 0;
}

/* Each kernel, loaded now (module_function forces it): not at a first launch mid-job. */
static braid_status_t kernels_find(const braid_device_ops_t *ops, void *mod,
                                   braid_dev_kernels_t *k)
{
    BRAID_CHECK(ops->module_function(mod, BRAID_KERNEL_REDUCE, &k->reduce));
    BRAID_CHECK(ops->module_function(mod, BRAID_KERNEL_CAST, &k->cast));
    return ops->module_function(mod, BRAID_KERNEL_COPY, &k->copy);
}

/* Load braid's kernels on the bound device: the first embedded image it accepts. */
static braid_status_t kernels_load(const braid_device_ops_t *ops, braid_dev_kernels_t *k)
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

braid_status_t braid_dev_kernels_get(int ordinal, braid_dev_kernels_t **k_p)
{
    const braid_device_ops_t *ops = braid_device();
    if (ordinal < 0 || ordinal >= DEV_MAX)
        return braid_err(BRAID_ERR_INVALID, "device %d is out of range", ordinal);
    braid_status_t st = BRAID_OK;
    pthread_mutex_lock(&dev_lock);
    braid_dev_kernels_t *k = &dev_kernels[ordinal];
    if (k->copy == NULL) {
        st = kernels_load(ops, k);
        if (st == BRAID_OK)
            BRAID_INFO(BRAID_SUB_INIT, "%s device %d: braid's kernels from the %s image",
                       ops->name, ordinal, k->image);
    }
    pthread_mutex_unlock(&dev_lock);
    *k_p = k;
    return st;
}

braid_status_t braid_dev_kernels_launch(void *fn, void *kargs, size_t kargs_bytes,
                                        size_t units, void *stream)
{
    size_t per_block = (size_t)DEV_BLOCK * 4;
    size_t grid = (units + per_block - 1) / per_block;
    grid = grid < 1 ? 1 : grid > DEV_GRID_MAX ? DEV_GRID_MAX : grid;
    return braid_device()->launch(fn, (unsigned)grid, DEV_BLOCK, kargs, kargs_bytes, stream);
}

/* The message check of kargs.h, where s asks for one. */
static void msg_args(const braid_dev_slice_kernel_t *s, braid_kargs_t *a)
{
    if (s->msg == NULL)
        return;
    a->msg = s->msg;
    a->msg_err = s->msg_err;
    memcpy(a->msg_want, s->msg_want, sizeof(a->msg_want));
    a->msg_mark = s->msg_mark;
}

braid_status_t braid_dev_kernels_check(const braid_dev_kernels_t *k,
                                       const braid_dev_slice_kernel_t *s, void *stream)
{
    braid_kargs_t a;
    memset(&a, 0, sizeof(a));
    msg_args(s, &a);
    return braid_dev_kernels_launch(k->copy, &a, sizeof(a), 1, stream);
}

/* The kernel that computes the slice's value from in and src into out[]. Nothing to do
 * when the value is src itself, already in place. */
braid_status_t braid_dev_kernels_slice(const braid_dev_kernels_t *k,
                                       const braid_dev_slice_kernel_t *s, void *stream)
{
    braid_kargs_t a;
    memset(&a, 0, sizeof(a));
    a.out[0] = s->out[0];
    a.out[1] = s->out[1];
    a.dtype = s->dtype;
    a.op = s->op;
    a.postdiv = s->postdiv;
    a.premul_ptr = s->premul_dev;
    msg_args(s, &a);
    if (s->premul != NULL)
        memcpy(&a.premul, s->premul, sizeof(a.premul));
    int pre = s->premul != NULL || s->premul_dev != NULL;
    if (s->in != NULL && s->reduce) {
        a.in[0] = s->in;
        a.in[1] = s->src;
        a.nin = 2;
        a.premul_mask = pre ? 2u : 0u;
    } else {
        a.in[0] = s->in != NULL ? s->in : s->src;
        a.nin = 1;
        a.premul_mask = s->in == NULL && pre ? 1u : 0u;
    }
    a.count = s->count;
    if (a.nin == 1 && a.premul_mask == 0 && s->postdiv <= 1) {
        if (a.in[0] == a.out[0] && a.out[1] == NULL)
            return BRAID_OK;
        a.count = s->bytes;
        return braid_dev_kernels_launch(k->copy, &a, sizeof(a), s->bytes / 16 + 1, stream);
    }
    return braid_dev_kernels_launch(k->reduce, &a, sizeof(a), s->count, stream);
}

void braid_dev_kernels_report(void (*line)(void *arg, const char *text), void *arg)
{
    char buf[512];
    const braid_device_ops_t *ops = braid_device();
    for (int i = 0; i < braid_gpu_nimages; i++) {
        const braid_gpu_image_t *img = &braid_gpu_images[i];
        if (strcmp(img->kind, "emu") == 0)   /* a marker: the kernels are in the emulator */
            snprintf(buf, sizeof(buf), "kernel image emu: the host build, linked into braid's "
                     "emulated GPU runtimes (here a %zu-byte marker that names it)", img->size);
        else
            snprintf(buf, sizeof(buf), "kernel image %s: %s (%zu bytes)", img->kind, img->archs,
                     img->size);
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
        braid_dev_kernels_t *k = NULL;
        if (ops->bind(d) < 0 || ops->describe(d, desc, sizeof(desc)) < 0)
            snprintf(desc, sizeof(desc), "(cannot query: %s)", braid_err_last());
        const char *img = braid_dev_kernels_get(d, &k) == BRAID_OK ? k->image
                                                                   : braid_err_last();
        snprintf(buf, sizeof(buf), "device %d: %s; kernels: %s", d, desc, img);
        line(arg, buf);
    }
}
