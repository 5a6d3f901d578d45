/*
 * Conversions between floating-point types, with a scale and an optional accumulation:
 * the gather and scatter of bucket plans (src/exec/exec_view.c). Compiled once per ISA
 * variant like reduce_impl.c (BRAID_KERN_SUFFIX); dispatch.c's braid_kern_cast calls the
 * variant in use.
 *
 * Values go through fp32, or fp64 where either side is fp64, in blocks that stay in L1:
 * a block is widened into a small array, scaled, added to the widened destination and
 * narrowed back, each loop simple enough to vectorise.
 */
#include <string.h>

#include "kernels/host/fp.h"
#include "kernels/host/reduce_impl.h"

#ifndef BRAID_KERN_SUFFIX
#error "compile with -DBRAID_KERN_SUFFIX=avx512, avx2 or generic"
#endif
#define CAST_CAT2(_a, _b) _a##_b
#define CAST_CAT(_a, _b) CAST_CAT2(_a, _b)

#define CAST_BLOCK 256

static void widen_f(braid_dtype_t dt, float *w, const void *src, size_t n)
{
    switch (dt) {
    case BRAID_FP16:
        for (size_t i = 0; i < n; i++)
            w[i] = braid_fp_from_fp16(((const uint16_t *)src)[i]);
        break;
    case BRAID_BF16:
        for (size_t i = 0; i < n; i++)
            w[i] = braid_fp_from_bf16(((const uint16_t *)src)[i]);
        break;
    case BRAID_FP8_E4M3:
        for (size_t i = 0; i < n; i++)
            w[i] = braid_fp_from_e4m3(((const uint8_t *)src)[i]);
        break;
    case BRAID_FP8_E5M2:
        for (size_t i = 0; i < n; i++)
            w[i] = braid_fp_from_e5m2(((const uint8_t *)src)[i]);
        break;
    default:    /* fp32 */
        memcpy(w, src, n * sizeof(float));
        break;
    }
}

static void narrow_f(braid_dtype_t dt, void *dst, const float *w, size_t n)
{
    switch (dt) {
    case BRAID_FP16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = braid_fp_to_fp16(w[i]);
        break;
    case BRAID_BF16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = braid_fp_to_bf16(w[i]);
        break;
    case BRAID_FP8_E4M3:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = braid_fp_to_e4m3(w[i]);
        break;
    case BRAID_FP8_E5M2:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = braid_fp_to_e5m2(w[i]);
        break;
    default:
        memcpy(dst, w, n * sizeof(float));
        break;
    }
}

/* fp64 on one side: the other side goes through fp32 (narrow types round twice, from fp64
 * to fp32 to themselves, as a framework's two casts would). */
static void widen_d(braid_dtype_t dt, double *w, const void *src, size_t n)
{
    if (dt == BRAID_FP64) {
        memcpy(w, src, n * sizeof(double));
        return;
    }
    float f[CAST_BLOCK];
    widen_f(dt, f, src, n);
    for (size_t i = 0; i < n; i++)
        w[i] = f[i];
}

static void narrow_d(braid_dtype_t dt, void *dst, const double *w, size_t n)
{
    if (dt == BRAID_FP64) {
        memcpy(dst, w, n * sizeof(double));
        return;
    }
    float f[CAST_BLOCK];
    for (size_t i = 0; i < n; i++)
        f[i] = (float)w[i];
    narrow_f(dt, dst, f, n);
}

static void cast_block_f(braid_dtype_t ddt, void *dst, braid_dtype_t sdt, const void *src,
                         size_t n, const double *scale, int accumulate)
{
    float v[CAST_BLOCK], d[CAST_BLOCK];
    widen_f(sdt, v, src, n);
    if (scale != NULL) {
        float s = (float)*scale;
        for (size_t i = 0; i < n; i++)
            v[i] = v[i] * s;
    }
    if (accumulate) {
        widen_f(ddt, d, dst, n);
        for (size_t i = 0; i < n; i++)
            v[i] = d[i] + v[i];
    }
    narrow_f(ddt, dst, v, n);
}

static void cast_block_d(braid_dtype_t ddt, void *dst, braid_dtype_t sdt, const void *src,
                         size_t n, const double *scale, int accumulate)
{
    double v[CAST_BLOCK], d[CAST_BLOCK];
    widen_d(sdt, v, src, n);
    if (scale != NULL)
        for (size_t i = 0; i < n; i++)
            v[i] = v[i] * *scale;
    if (accumulate) {
        widen_d(ddt, d, dst, n);
        for (size_t i = 0; i < n; i++)
            v[i] = d[i] + v[i];
    }
    narrow_d(ddt, dst, v, n);
}

void CAST_CAT(braid_kern_cast_, BRAID_KERN_SUFFIX)(braid_dtype_t ddt, void *dst,
                                                     braid_dtype_t sdt, const void *src,
                                                     size_t count, const double *scale,
                                                     int accumulate)
{
    size_t ds = braid_dtype_size(ddt), ss = braid_dtype_size(sdt);
    int wide = ddt == BRAID_FP64 || sdt == BRAID_FP64;
    for (size_t o = 0; o < count; o += CAST_BLOCK) {
        size_t n = count - o < CAST_BLOCK ? count - o : CAST_BLOCK;
        char *d = (char *)dst + o * ds;
        const char *s = (const char *)src + o * ss;
        if (wide)
            cast_block_d(ddt, d, sdt, s, n, scale, accumulate);
        else
            cast_block_f(ddt, d, sdt, s, n, scale, accumulate);
    }
}
