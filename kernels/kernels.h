/*
 * Reduction and copy kernels on host memory.
 *
 * Datatypes and ops are base/dtype.h's (NCCL's numbering). Half,
 * bfloat16 and fp8 values are widened to fp32, combined in fp32 and rounded back to nearest
 * even (NaN stays NaN; fp16 and bf16 overflow to inf; fp8 e4m3 and e5m2 saturate to their
 * largest finite value, +-448 and +-57344, as CUDA's fp8 conversions that NCCL uses do).
 * fp32 combines in fp32, fp64 in fp64, integers in their own type with wrap-around. Kernels
 * never contract a*b+c into an FMA and fix which NaN comes out of an operation on two NaNs,
 * so every ISA variant gives bit-identical results.
 *
 * MAX and MIN on floats follow NCCL's GPU kernels (fmaxf/fminf, __hmax/__hmin): a NaN loses
 * against a number and the result is NaN only when both operands are; -0 counts as less than
 * +0. Pointers must be aligned to their element size (any alignment for braid_kern_copy).
 *
 * The variants (avx512, avx2, generic) are the same C source compiled three times; the one
 * used is picked at first call from the CPU's features, or forced by BRAID_CPU_ISA (auto,
 * avx512, avx2, generic; a value the CPU cannot run is reported and ignored).
 */
#ifndef BRAID_KERNELS_H
#define BRAID_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"

/* A scalar in the accumulation domain of a datatype: f for fp16/bf16/fp8/fp32/fp64 (fp32
 * types use (float)f), i for signed integers, u for unsigned integers. */
typedef union braid_scalar {
    double f;
    int64_t i;
    uint64_t u;
} braid_scalar_t;


/*
 * dst[i] = a[i] OP (premul ? premul * b[i] : b[i]) for i < count.
 * `a` is a peer's already-combined partial (never pre-multiplied here), `b` is this rank's
 * own contribution. premul * b[i] is rounded to dt before it is combined, so the result equals
 * braid_kern_scale() of b followed by a plain reduce, bit for bit. dst may alias a or b
 * (exactly, not partially). An invalid dt or op, or count 0, does nothing.
 */
void braid_kern_reduce(braid_dtype_t dt, braid_opkind_t op, void *dst, const void *a,
                       const void *b, size_t count, const braid_scalar_t *premul);

/* dst[i] = premul * src[i] (rounded to dt; fp32 and narrower floats multiply by (float)f,
 * integers wrap). premul NULL copies. dst may alias src. */
void braid_kern_scale(braid_dtype_t dt, void *dst, const void *src, size_t count,
                      const braid_scalar_t *premul);

/* dst[i] = src[i] / divisor, integer types only (ncclAvg on integers: sum, then divide,
 * truncating toward zero). dst may alias src. A divisor of 0 counts as 1; float types are
 * left untouched. */
void braid_kern_divide(braid_dtype_t dt, void *dst, const void *src, size_t count,
                       uint64_t divisor);

/* memcpy (no overlap); copies from 1 MiB up to 64 MiB use non-temporal stores in the
 * avx2/avx512 variants, so the destination is not in this core's cache afterwards. */
void braid_kern_copy(void *dst, const void *src, size_t bytes);

/* memcpy with non-temporal stores at any size (avx2/avx512; memcpy in the generic
 * variant), for outputs that will not be read again soon: they skip the read-for-ownership
 * of the destination lines and leave the cache to the data still in use. */
void braid_kern_copy_stream(void *dst, const void *src, size_t bytes);

/*
 * dst[i] = (accumulate ? dst[i] : 0) + scale * src[i], converted from sdt to ddt, for
 * floating-point types only (kernels/host/cast.c). Computed in fp32, or fp64 where either
 * type is fp64, and rounded to nearest even; scale NULL is 1. Same type, no scale and no
 * accumulation is a copy. dst may alias src only when both types have the same size.
 */
void braid_kern_cast(braid_dtype_t ddt, void *dst, braid_dtype_t sdt, const void *src,
                     size_t count, const double *scale, int accumulate);

/* Scalar conversions, exposed for tests and for ncclRedOpCreatePreMulSum. */
float braid_fp16_to_float(uint16_t h);
uint16_t braid_float_to_fp16(float f);
float braid_bf16_to_float(uint16_t h);
uint16_t braid_float_to_bf16(float f);
float braid_e4m3_to_float(uint8_t v);
uint8_t braid_float_to_e4m3(float f);
float braid_e5m2_to_float(uint8_t v);
uint8_t braid_float_to_e5m2(float f);

/* Read one element of type dt at p as a scalar of its accumulation domain. */
braid_scalar_t braid_scalar_load(braid_dtype_t dt, const void *p);

/* The variant in use: "avx512", "avx2" or "generic"; and selecting one (tests). Returns -1 if
 * the name is unknown or the CPU lacks it. */
const char *braid_kern_isa(void);
int braid_kern_select_isa(const char *name);

#endif
