/*
 * The table each compilation of reduce_impl.c exports (one per ISA variant), and which
 * dispatch.c picks from. Private to kernels/host/.
 */
#ifndef BRAID_KERNELS_HOST_REDUCE_IMPL_H
#define BRAID_KERNELS_HOST_REDUCE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

typedef void (*braid_kern_reduce_fn_t)(void *dst, const void *a, const void *b, size_t count,
                                       const braid_scalar_t *premul);
typedef void (*braid_kern_scale_fn_t)(void *dst, const void *src, size_t count,
                                      const braid_scalar_t *premul);
typedef void (*braid_kern_divide_fn_t)(void *dst, const void *src, size_t count,
                                       uint64_t divisor);
typedef void (*braid_kern_copy_fn_t)(void *dst, const void *src, size_t bytes);
typedef void (*braid_kern_cast_fn_t)(braid_dtype_t ddt, void *dst, braid_dtype_t sdt,
                                     const void *src, size_t count, const double *scale,
                                     int accumulate);

typedef struct braid_kern_table {
    const char *name;
    braid_kern_reduce_fn_t reduce[BRAID_NUM_DTYPES][BRAID_NUM_OPS];
    braid_kern_scale_fn_t scale[BRAID_NUM_DTYPES];
    braid_kern_divide_fn_t divide[BRAID_NUM_DTYPES];   /* NULL for float types */
    braid_kern_copy_fn_t copy_large;                   /* streaming; any size, alignment */
    braid_kern_cast_fn_t cast;                         /* kernels/host/cast.c */
} braid_kern_table_t;

extern const braid_kern_table_t braid_kern_table_avx512;
extern const braid_kern_table_t braid_kern_table_avx2;
extern const braid_kern_table_t braid_kern_table_generic;

/* kernels/host/cast.c, compiled with each variant; the tables point at them. */
void braid_kern_cast_avx512(braid_dtype_t ddt, void *dst, braid_dtype_t sdt, const void *src,
                            size_t count, const double *scale, int accumulate);
void braid_kern_cast_avx2(braid_dtype_t ddt, void *dst, braid_dtype_t sdt, const void *src,
                          size_t count, const double *scale, int accumulate);
void braid_kern_cast_generic(braid_dtype_t ddt, void *dst, braid_dtype_t sdt, const void *src,
                             size_t count, const double *scale, int accumulate);

#endif
