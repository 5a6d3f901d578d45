/*
 * Slices of a bucket plan's operations: the op's SEND and RECV buffers are views of the
 * caller's tensors (src/exec/exec.h), so the first step of the collective reads the tensors
 * themselves and the last writes them, with no packed bucket buffer in between:
 *
 *   first step   tensors --cast to acc, x pre--> sum in acc --cast to wire--> send slot
 *   middle steps recv slot + tensors (as above) --> send slot
 *   last steps   recv slot (wire) --cast, x scale, copy or add--> tensors
 *
 * A slice is computed in blocks of VIEW_BLOCK elements that stay in L1, so the casts cost
 * no pass over memory. A value that is also sent is written to this rank's tensors as
 * sent (rounded to the wire type), so every rank of an all-reduce ends with the same bits;
 * a value that is only stored (the end of a reduce-scatter) is stored at the accumulation
 * type's precision.
 */
#include <string.h>

#include "exec/exec_view.h"
#include "base/log.h"

#define VIEW_BLOCK 2048                     /* elements: 16 KiB of fp64 per block buffer */

/* a[0..n) = the view's elements e.. in type acc, times *pre; padding reads 0. */
static void view_gather(const braid_view_t *v, size_t e, size_t n, braid_dtype_t acc,
                        char *a, const double *pre)
{
    braid_view_iter_t it = braid_view_iter(v, e, n);
    const braid_seg_t *s;
    size_t as = braid_dtype_size(acc), first, k;
    while ((k = braid_view_next(&it, &s, &first)) > 0) {
        char *to = a + (first - e) * as;
        if (s == NULL)
            memset(to, 0, k * as);
        else
            braid_kern_cast(acc, to, s->dtype, braid_seg_at(s, first), k, pre, 0);
    }
}

/* The view's elements e.. = vals[0..n) of type vt, cast, scaled, copied or added. */
static void view_scatter(const braid_view_t *v, size_t e, size_t n, braid_dtype_t vt,
                         const char *vals)
{
    braid_view_iter_t it = braid_view_iter(v, e, n);
    const braid_seg_t *s;
    size_t vs = braid_dtype_size(vt), first, k;
    while ((k = braid_view_next(&it, &s, &first)) > 0)
        if (s != NULL)
            braid_kern_cast(s->dtype, braid_seg_at(s, first), vt, vals + (first - e) * vs, k,
                            v->scaled ? &v->scale : NULL, v->accumulate);
}

/* How many elements from flat element e a block takes: at most VIEW_BLOCK and `left`, and
 * not across an edge of the view's segments (so a block of one segment is read in place). */
static size_t view_run(const braid_view_t *v, size_t e, size_t left)
{
    size_t b = left < VIEW_BLOCK ? left : VIEW_BLOCK, first;
    const braid_seg_t *s;
    if (v == NULL)
        return b;
    braid_view_iter_t it = braid_view_iter(v, e, b);
    return braid_view_next(&it, &s, &first);
}

/* The block's own contribution in type acc: the tensor itself where the block lies in one
 * segment of that type (*pre_p is left for the kernel that reads it), else gathered, cast
 * and pre-multiplied into buf (*pre_p becomes NULL). */
static const char *view_own(const braid_view_t *v, size_t e, size_t b, braid_dtype_t acc,
                            char *buf, const braid_scalar_t **pre_p)
{
    braid_view_iter_t it = braid_view_iter(v, e, b);
    const braid_seg_t *s;
    size_t first;
    if (braid_view_next(&it, &s, &first) == b && s != NULL && s->dtype == acc)
        return braid_seg_at(s, e);
    view_gather(v, e, b, acc, buf, *pre_p != NULL ? &(*pre_p)->f : NULL);
    *pre_p = NULL;
    return buf;
}

/* One block of b elements: the wire value into out (if set), the tensors of dst (if a
 * view) from it. Where the wire, accumulation and tensor types agree, the kernels read
 * the slot and the tensor and write the slot directly, as the plain executor does. */
static void view_block(const braid_op_t *op, const braid_step_t *st, char *out, const char *in,
                       size_t esrc, size_t edst, size_t b)
{
    char abuf[VIEW_BLOCK * 8], tbuf[VIEW_BLOCK * 8];
    const braid_view_t *src = op->views[st->src.buf], *dst = op->views[st->dst.buf];
    braid_dtype_t w = op->dtype, acc = op->acc;
    size_t as = braid_dtype_size(acc);
    const char *val = in;                   /* the value, in type vt */
    braid_dtype_t vt = w;

    if (src != NULL) {
        const braid_scalar_t *pre = braid_step_pre(op, st);
        const char *own = view_own(src, esrc, b, acc, abuf, &pre);
        char *res = out != NULL && w == acc ? out : abuf;
        if (in != NULL && (st->flags & BRAID_STEP_REDUCE)) {
            if (w != acc)
                braid_kern_cast(acc, tbuf, w, in, b, NULL, 0);
            braid_kern_reduce(acc, op->redop.kind, res, w == acc ? in : tbuf, own, b, pre);
        } else if (pre != NULL) {
            braid_kern_scale(acc, res, own, b, pre);
        } else if (res == out) {
            memcpy(out, own, b * as);
        } else {
            res = (char *)own;              /* only read from here on */
        }
        if (out != NULL && res != out)
            braid_kern_cast(w, out, acc, res, b, NULL, 0);
        val = res;
        vt = acc;
    } else if (out != NULL) {
        memcpy(out, in, b * braid_dtype_size(w));
    }
    if (dst != NULL)
        view_scatter(dst, edst, b, out != NULL ? w : vt, out != NULL ? out : val);
}

/* The same slice with device tensors: kernels on the op's device (src/exec/dev_slice.c). */
static braid_status_t view_slice_device(const braid_op_t *op, const braid_step_t *st,
                                        char *out, const char *in, size_t esrc, size_t edst,
                                        size_t n)
{
    const braid_scalar_t *pre = braid_step_pre(op, st);
    braid_device_view_slice_t s = {
        .src = op->views[st->src.buf], .dst = op->views[st->dst.buf], .esrc = esrc,
        .edst = edst, .in = in, .out = out, .count = n, .wire = op->dtype, .acc = op->acc,
        .op = op->redop.kind, .reduce = in != NULL && (st->flags & BRAID_STEP_REDUCE),
        .pre = pre != NULL ? &pre->f : NULL,
    };
    braid_device_wait_t w = braid_op_device_wait(op);
    return braid_device_exec_view_slice(op->dev, &s, &w);
}

braid_status_t braid_exec_view_slice(const braid_op_t *op, const braid_step_t *st, char *out,
                                     const char *in, size_t off, size_t len)
{
    size_t ws = braid_dtype_size(op->dtype);
    if ((op->views[st->src.buf] == NULL && st->src.buf != BRAID_BUF_NONE) ||
        (op->views[st->dst.buf] == NULL && st->dst.buf != BRAID_BUF_NONE) ||
        (op->views[st->src.buf] == NULL && in == NULL))
        return braid_err(BRAID_ERR_INTERNAL, "a bucket plan's step mixes views with other "
                         "buffers");
    size_t n = len / ws, esrc = (st->src.off + off) / ws, edst = (st->dst.off + off) / ws;
    if (op->dev != NULL)
        return view_slice_device(op, st, out, in, esrc, edst, n);
    for (size_t o = 0, b; o < n; o += b) {
        b = view_run(op->views[st->src.buf], esrc + o, n - o);
        view_block(op, st, out != NULL ? out + o * ws : NULL, in != NULL ? in + o * ws : NULL,
                   esrc + o, edst + o, b);
    }
    return BRAID_OK;
}
