/*
 * Views: a flat buffer made of the caller's tensors (bucket plans, src/core/plan.c), as the
 * executor (src/exec/exec_view.c) and the device executor (src/device/slice.c) read and
 * write it. Plain data, on host or device memory alike.
 */
#ifndef BRAID_DEVICE_VIEW_H
#define BRAID_DEVICE_VIEW_H

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

#endif
