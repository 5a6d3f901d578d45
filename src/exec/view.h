/*
 * Views: a flat buffer made of the caller's tensors (bucket plans, src/core/plan.c), as the
 * executor (src/exec/exec_view.c) and its device slices (src/exec/dev_slice.c) read and
 * write it. Plain data, on host or device memory alike.
 */
#ifndef BRAID_EXEC_VIEW_H
#define BRAID_EXEC_VIEW_H

#include <stddef.h>

#include "base/dtype.h"

/*
 * A buffer made of the caller's tensors (bucket plans): the schedule sees
 * one flat buffer of the op's datatype (the wire type), whose element e is element
 * e - first of the segment that holds it, in that segment's own type; elements in no
 * segment are padding (read as 0, written nowhere). Reads are cast to the op's
 * accumulation type and pre-multiplied as the op's own input; writes are cast to the
 * segment's type, multiplied by `scale` and added to what is there with `accumulate`.
 */
typedef struct braid_seg {
    char *ptr;
    size_t first, count;        /* flat elements */
    braid_dtype_t dtype;        /* a floating-point type */
} braid_seg_t;

typedef struct braid_view {
    const braid_seg_t *segs;    /* ordered by first, not overlapping */
    int nsegs;
    int accumulate;
    int scaled;                 /* writes are multiplied by scale */
    double scale;
} braid_view_t;

/* The first segment of v that ends after flat element e (v->nsegs if none). */
static inline int braid_view_find(const braid_view_t *v, size_t e)
{
    int lo = 0, hi = v->nsegs;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (v->segs[mid].first + v->segs[mid].count <= e)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*
 * The pieces of flat elements [e, e + n) of a view, in order, each inside one segment or
 * one gap of padding: the walk of every gather and scatter (host and device alike).
 *
 *     braid_view_iter_t it = braid_view_iter(v, e, n);
 *     while ((k = braid_view_next(&it, &seg, &first)) > 0)
 *         ... k elements from flat element `first`, of seg (NULL: padding) ...
 */
typedef struct braid_view_iter {
    const braid_view_t *v;
    int i;                      /* the first segment that ends after e */
    size_t e, end;
} braid_view_iter_t;

static inline braid_view_iter_t braid_view_iter(const braid_view_t *v, size_t e, size_t n)
{
    braid_view_iter_t it = { v, braid_view_find(v, e), e, e + n };
    return it;
}

static inline size_t braid_view_next(braid_view_iter_t *it, const braid_seg_t **seg_p,
                                     size_t *first_p)
{
    const braid_seg_t *s = it->i < it->v->nsegs ? &it->v->segs[it->i] : NULL;
    size_t e = it->e, stop;
    if (e >= it->end)
        return 0;
    if (s == NULL || s->first > e) {            /* padding, up to the next segment */
        stop = s != NULL && s->first < it->end ? s->first : it->end;
        s = NULL;
    } else {
        stop = s->first + s->count < it->end ? s->first + s->count : it->end;
        it->i++;
    }
    *seg_p = s;
    *first_p = e;
    it->e = stop;
    return stop - e;
}

/* The address of flat element e, which segment s holds. */
static inline char *braid_seg_at(const braid_seg_t *s, size_t e)
{
    return s->ptr + (e - s->first) * braid_dtype_size(s->dtype);
}

#endif
