/*
 * Host reduction kernels as plain C loops for the compiler to vectorise.
 *
 * This file is compiled once per ISA variant, with BRAID_KERN_SUFFIX naming the variant and
 * the matching -m flags, always with -ffp-contract=off (no FMA contraction, so that every
 * variant computes the same bits); each compilation exports braid_kern_table_<suffix>:
 *     -DBRAID_KERN_SUFFIX=avx512 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mf16c
 *     -DBRAID_KERN_SUFFIX=avx2 -mavx2 -mf16c -mfma
 *     -DBRAID_KERN_SUFFIX=generic
 * Build it with -ftree-loop-vectorize -fvect-cost-model=dynamic (Makefile.am: a later -O2
 * in CFLAGS undoes -O3 but not these): GCC 12's -O2 cost model vectorises none of these loops. dispatch.c checks for exactly these extensions before using a table.
 *
 * Per element, with LOAD widening to the accumulation type A and STORE rounding back:
 *     reduce:  dst = STORE(OP(LOAD(a), LOAD(b)))                       (no premul)
 *              dst = STORE(OP(LOAD(a), LOAD(STORE(LOAD(b) * p))))      (premul p)
 *     scale:   dst = STORE(LOAD(src) * p)
 * The pre-multiplied value is rounded to the datatype before it is combined, so that
 * reduce(a, b, p) == reduce(a, scale(b, p)) bit for bit: an algorithm may pre-scale a
 * rank's contribution in a separate pass or fused into its first reduction.
 *
 * Pointers are not `restrict`: dst may be a or b. GCC's run-time overlap check accepts
 * exact aliasing (distance 0) and takes the vector loop for in-place calls too.
 */
#include <stdint.h>
#include <string.h>

#if defined(__AVX2__) || defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "kernels/host/fp.h"
#include "kernels/host/reduce_impl.h"

#ifndef BRAID_KERN_SUFFIX
#error "compile with -DBRAID_KERN_SUFFIX=avx512, avx2 or generic"
#endif

#define KERN_CAT2(_a, _b) _a##_b
#define KERN_CAT(_a, _b) KERN_CAT2(_a, _b)
#define KERN_STR2(_a) #_a
#define KERN_STR(_a) KERN_STR2(_a)

/*
 * Loops shared by every family. A type `tn` provides tn##_load, tn##_store, tn##_pm (the
 * premul scalar in the accumulation type) and one function per op: tn##_sum, tn##_prod
 * (also the premul multiply), tn##_max, tn##_min.
 */
#define KERN_REDUCE(tn, op, S, A)                                                          \
    static void reduce_##tn##_##op(void *dst_v, const void *a_v, const void *b_v,          \
                                   size_t n, const braid_scalar_t *pm)                     \
    {                                                                                      \
        S *dst = dst_v;                                                                    \
        const S *a = a_v, *b = b_v;                                                        \
        if (pm == NULL) {                                                                  \
            for (size_t i = 0; i < n; i++)                                                 \
                dst[i] = tn##_store(tn##_##op(tn##_load(a[i]), tn##_load(b[i])));          \
            return;                                                                        \
        }                                                                                  \
        A p = tn##_pm(pm);                                                                 \
        for (size_t i = 0; i < n; i++) {                                                   \
            A y = tn##_load(tn##_store(tn##_prod(tn##_load(b[i]), p)));                    \
            dst[i] = tn##_store(tn##_##op(tn##_load(a[i]), y));                            \
        }                                                                                  \
    }

#define KERN_SCALE(tn, S, A)                                                               \
    static void scale_##tn(void *dst_v, const void *src_v, size_t n,                       \
                           const braid_scalar_t *pm)                                       \
    {                                                                                      \
        S *dst = dst_v;                                                                    \
        const S *src = src_v;                                                              \
        A p = tn##_pm(pm);                                                                 \
        for (size_t i = 0; i < n; i++)                                                     \
            dst[i] = tn##_store(tn##_prod(tn##_load(src[i]), p));                          \
    }

#define KERN_ALL_OPS(tn, S, A)                                                             \
    KERN_REDUCE(tn, sum, S, A)                                                             \
    KERN_REDUCE(tn, prod, S, A)                                                            \
    KERN_REDUCE(tn, max, S, A)                                                             \
    KERN_REDUCE(tn, min, S, A)                                                             \
    KERN_SCALE(tn, S, A)

/*
 * Integers: T itself, wrap-around through the unsigned type U (signed overflow would be
 * undefined). The premul scalar is taken modulo 2^bits, from .u (same bits as .i).
 */
#define KERN_FAMILY_INT(tn, T, U)                                                          \
    static inline T tn##_load(T x) { return x; }                                           \
    static inline T tn##_store(T x) { return x; }                                          \
    static inline T tn##_pm(const braid_scalar_t *pm) { return (T)pm->u; }                 \
    static inline T tn##_sum(T x, T y) { return (T)((U)x + (U)y); }                        \
    static inline T tn##_prod(T x, T y) { return (T)((U)x * (U)y); }                       \
    static inline T tn##_max(T x, T y) { return x > y ? x : y; }                           \
    static inline T tn##_min(T x, T y) { return x < y ? x : y; }                           \
    KERN_ALL_OPS(tn, T, T)

/* fp32 and fp64: native arithmetic; NaN results and max/min as described in fp.h. */
#define KERN_FAMILY_FLOAT(tn, T, NANF, MAXF, MINF)                                         \
    static inline T tn##_load(T x) { return x; }                                           \
    static inline T tn##_store(T x) { return x; }                                          \
    static inline T tn##_pm(const braid_scalar_t *pm) { return (T)pm->f; }                 \
    static inline T tn##_sum(T x, T y) { return NANF(x, x + y); }                       \
    static inline T tn##_prod(T x, T y) { return NANF(x, x * y); }                      \
    static inline T tn##_max(T x, T y) { return MAXF(x, y); }                              \
    static inline T tn##_min(T x, T y) { return MINF(x, y); }                              \
    KERN_ALL_OPS(tn, T, T)

/*
 * fp16, bf16, e4m3 and e5m2 go through fp32 blocks that stay in L1: widen a block of each
 * input, combine with an fp32 loop, round the block back. Each stage is a short loop that
 * GCC vectorises on its own (one fused loop holds more constants than there are registers),
 * and the widening and rounding can use F16C where the variant has it, which gives the same
 * bits as fp.h (the unit test compares every fp16 value with F16C). Every input block is
 * read before its output block is written, so dst may be a or b.
 */
#define KERN_BLK 256

static void kern_blk_sum(float *restrict x, const float *restrict y, size_t m)
{
    for (size_t k = 0; k < m; k++)
        x[k] = braid_fp_nanf(x[k], x[k] + y[k]);
}

static void kern_blk_prod(float *restrict x, const float *restrict y, size_t m)
{
    for (size_t k = 0; k < m; k++)
        x[k] = braid_fp_nanf(x[k], x[k] * y[k]);
}

static void kern_blk_max(float *restrict x, const float *restrict y, size_t m)
{
    for (size_t k = 0; k < m; k++)
        x[k] = braid_fp_maxf(x[k], y[k]);
}

static void kern_blk_min(float *restrict x, const float *restrict y, size_t m)
{
    for (size_t k = 0; k < m; k++)
        x[k] = braid_fp_minf(x[k], y[k]);
}

static void kern_blk_scale(float *x, size_t m, float p)
{
    for (size_t k = 0; k < m; k++)
        x[k] = braid_fp_nanf(x[k], x[k] * p);
}

/* Plain widening and rounding loops over fp.h, for types without a faster path. */
#define KERN_NARROW_CONV(tn, S, FROM, CODE)                                                \
    static void tn##_widen_c(float *restrict out, const S *restrict in, size_t m)          \
    {                                                                                      \
        for (size_t k = 0; k < m; k++)                                                     \
            out[k] = FROM(in[k]);                                                          \
    }                                                                                      \
    static void tn##_round_c(S *restrict out, const float *restrict in, size_t m)          \
    {                                                                                      \
        uint32_t c[KERN_BLK];   /* m <= KERN_BLK; see braid_fp_*_code() for why */          \
        for (size_t k = 0; k < m; k++)                                                     \
            c[k] = CODE(in[k]);                                                            \
        for (size_t k = 0; k < m; k++)                                                     \
            out[k] = (S)c[k];                                                              \
    }

#define KERN_REDUCE_NARROW(tn, op, S)                                                      \
    static void reduce_##tn##_##op(void *dst_v, const void *a_v, const void *b_v,          \
                                   size_t n, const braid_scalar_t *pm)                     \
    {                                                                                      \
        S *dst = dst_v, tmp[KERN_BLK];                                                     \
        const S *a = a_v, *b = b_v;                                                        \
        float x[KERN_BLK], y[KERN_BLK];                                                    \
        for (size_t i = 0; i < n; i += KERN_BLK) {                                         \
            size_t m = n - i < KERN_BLK ? n - i : KERN_BLK;                                \
            tn##_widen(x, a + i, m);                                                       \
            tn##_widen(y, b + i, m);                                                       \
            if (pm != NULL) {   /* premultiplied value rounded to S */                     \
                kern_blk_scale(y, m, (float)pm->f);                                        \
                tn##_round(tmp, y, m);                                                     \
                tn##_widen(y, tmp, m);                                                     \
            }                                                                              \
            kern_blk_##op(x, y, m);                                                        \
            tn##_round(dst + i, x, m);                                                     \
        }                                                                                  \
    }

#define KERN_FAMILY_NARROW(tn, S)                                                          \
    KERN_REDUCE_NARROW(tn, sum, S)                                                         \
    KERN_REDUCE_NARROW(tn, prod, S)                                                        \
    KERN_REDUCE_NARROW(tn, max, S)                                                         \
    KERN_REDUCE_NARROW(tn, min, S)                                                         \
    static void scale_##tn(void *dst_v, const void *src_v, size_t n,                       \
                           const braid_scalar_t *pm)                                       \
    {                                                                                      \
        S *dst = dst_v;                                                                    \
        const S *src = src_v;                                                              \
        float x[KERN_BLK];                                                                 \
        for (size_t i = 0; i < n; i += KERN_BLK) {                                         \
            size_t m = n - i < KERN_BLK ? n - i : KERN_BLK;                                \
            tn##_widen(x, src + i, m);                                                     \
            kern_blk_scale(x, m, (float)pm->f);                                            \
            tn##_round(dst + i, x, m);                                                     \
        }                                                                                  \
    }

KERN_NARROW_CONV(f16, uint16_t, braid_fp_from_fp16, braid_fp_fp16_code)
KERN_NARROW_CONV(bf16, uint16_t, braid_fp_from_bf16, braid_fp_bf16_code)
KERN_NARROW_CONV(e4m3, uint8_t, braid_fp_from_e4m3, braid_fp_e4m3_code)
KERN_NARROW_CONV(e5m2, uint8_t, braid_fp_from_e5m2, braid_fp_e5m2_code)

#if defined(__F16C__)
/* fp16 <-> fp32 with F16C: 8 (16 with AVX-512) at a time, the tail through fp.h. */
static void f16_widen(float *restrict out, const uint16_t *restrict in, size_t m)
{
    size_t k = 0;
#if defined(__AVX512F__)
    for (; k + 16 <= m; k += 16)
        _mm512_storeu_ps(out + k, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(in + k))));
#endif
    for (; k + 8 <= m; k += 8)
        _mm256_storeu_ps(out + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + k))));
    f16_widen_c(out + k, in + k, m - k);
}

static void f16_round(uint16_t *restrict out, const float *restrict in, size_t m)
{
    size_t k = 0;
#if defined(__AVX512F__)
    for (; k + 16 <= m; k += 16)
        _mm256_storeu_si256((__m256i *)(out + k),
                            _mm512_cvtps_ph(_mm512_loadu_ps(in + k), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; k + 8 <= m; k += 8)
        _mm_storeu_si128((__m128i *)(out + k),
                         _mm256_cvtps_ph(_mm256_loadu_ps(in + k), _MM_FROUND_TO_NEAREST_INT));
    f16_round_c(out + k, in + k, m - k);
}

/* e5m2 is the top byte of an fp16, so it widens exactly through F16C too. */
static void e5m2_widen(float *restrict out, const uint8_t *restrict in, size_t m)
{
    size_t k = 0;
    for (; k + 8 <= m; k += 8) {
        __m128i h = _mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(in + k))), 8);
        _mm256_storeu_ps(out + k, _mm256_cvtph_ps(h));
    }
    e5m2_widen_c(out + k, in + k, m - k);
}
#else
#define f16_widen f16_widen_c
#define f16_round f16_round_c
#define e5m2_widen e5m2_widen_c
#endif
#define bf16_widen bf16_widen_c
#define bf16_round bf16_round_c
#define e4m3_widen e4m3_widen_c
#define e4m3_round e4m3_round_c
#define e5m2_round e5m2_round_c

KERN_FAMILY_INT(i8, int8_t, uint8_t)
KERN_FAMILY_INT(u8, uint8_t, uint8_t)
KERN_FAMILY_INT(i32, int32_t, uint32_t)
KERN_FAMILY_INT(u32, uint32_t, uint32_t)
KERN_FAMILY_INT(i64, int64_t, uint64_t)
KERN_FAMILY_INT(u64, uint64_t, uint64_t)
KERN_FAMILY_FLOAT(f32, float, braid_fp_nanf, braid_fp_maxf, braid_fp_minf)
KERN_FAMILY_FLOAT(f64, double, braid_fp_nan, braid_fp_max, braid_fp_min)
KERN_FAMILY_NARROW(f16, uint16_t)
KERN_FAMILY_NARROW(bf16, uint16_t)
KERN_FAMILY_NARROW(e4m3, uint8_t)
KERN_FAMILY_NARROW(e5m2, uint8_t)

/*
 * Integer division, truncating toward zero; a divisor of 0 is taken as 1 (the caller
 * divides by a rank count, and a kernel must not trap). Up to 32 bits the quotient is
 * computed in double, which is exact: with |x| < 2^32 a non-integer quotient lies at least
 * 1/(d(k+1)) >= 2^-33 (relative) from the nearest integers, far above double's 2^-53
 * rounding, and the conversion back truncates (through a type I that holds the quotient).
 * 64-bit types divide in integers.
 */
#define KERN_DIVIDE_NARROWINT(tn, T, I)                                                    \
    static void divide_##tn(void *dst_v, const void *src_v, size_t n, uint64_t d)          \
    {                                                                                      \
        T *dst = dst_v;                                                                    \
        const T *src = src_v;                                                              \
        double dd = (double)(d ? d : 1);                                                   \
        for (size_t i = 0; i < n; i++)                                                     \
            dst[i] = (T)(I)((double)src[i] / dd);                                          \
    }

KERN_DIVIDE_NARROWINT(i8, int8_t, int32_t)
KERN_DIVIDE_NARROWINT(u8, uint8_t, int32_t)
KERN_DIVIDE_NARROWINT(i32, int32_t, int32_t)
KERN_DIVIDE_NARROWINT(u32, uint32_t, int64_t)

static void divide_u64(void *dst_v, const void *src_v, size_t n, uint64_t d)
{
    uint64_t *dst = dst_v;
    const uint64_t *src = src_v;
    d = d ? d : 1;
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i] / d;
}

static void divide_i64(void *dst_v, const void *src_v, size_t n, uint64_t d)
{
    int64_t *dst = dst_v;
    const int64_t *src = src_v;
    d = d ? d : 1;
    for (size_t i = 0; i < n; i++) {
        /* |x| as unsigned (INT64_MIN included), divide, put the sign back */
        uint64_t mag = src[i] < 0 ? 0 - (uint64_t)src[i] : (uint64_t)src[i];
        uint64_t q = mag / d;
        dst[i] = (int64_t)(src[i] < 0 ? 0 - q : q);
    }
}

/*
 * Large copies: non-temporal stores (the destination is not read back soon by this core,
 * and streaming it spares the cache), with ordinary copies for the unaligned head and the
 * tail. The generic variant leaves it to memcpy.
 */
#if defined(__AVX512F__)
#define KERN_NT_VEC 64
typedef __m512i kern_vec_t;
#define KERN_LOADU(_p) _mm512_loadu_si512((const void *)(_p))
#define KERN_STREAM(_p, _v) _mm512_stream_si512((void *)(_p), (_v))
#elif defined(__AVX2__)
#define KERN_NT_VEC 32
typedef __m256i kern_vec_t;
#define KERN_LOADU(_p) _mm256_loadu_si256((const __m256i *)(_p))
#define KERN_STREAM(_p, _v) _mm256_stream_si256((__m256i *)(_p), (_v))
#endif

static void kern_copy_large(void *dst_v, const void *src_v, size_t bytes)
{
#ifdef KERN_NT_VEC
    unsigned char *dst = dst_v;
    const unsigned char *src = src_v;
    size_t head = (size_t)(-(uintptr_t)dst & (KERN_NT_VEC - 1));
    if (head > bytes)
        head = bytes;
    memcpy(dst, src, head);
    dst += head, src += head, bytes -= head;
    for (; bytes >= 4 * KERN_NT_VEC; dst += 4 * KERN_NT_VEC, src += 4 * KERN_NT_VEC,
                                     bytes -= 4 * KERN_NT_VEC) {
        kern_vec_t v0 = KERN_LOADU(src), v1 = KERN_LOADU(src + KERN_NT_VEC);
        kern_vec_t v2 = KERN_LOADU(src + 2 * KERN_NT_VEC), v3 = KERN_LOADU(src + 3 * KERN_NT_VEC);
        KERN_STREAM(dst, v0);
        KERN_STREAM(dst + KERN_NT_VEC, v1);
        KERN_STREAM(dst + 2 * KERN_NT_VEC, v2);
        KERN_STREAM(dst + 3 * KERN_NT_VEC, v3);
    }
    _mm_sfence();   /* order the streamed stores before whatever publishes the data */
    memcpy(dst, src, bytes);
#else
    memcpy(dst_v, src_v, bytes);
#endif
}

#define KERN_ROW(tn) { reduce_##tn##_sum, reduce_##tn##_prod, reduce_##tn##_max, reduce_##tn##_min }

const braid_kern_table_t KERN_CAT(braid_kern_table_, BRAID_KERN_SUFFIX) = {
    .name = KERN_STR(BRAID_KERN_SUFFIX),
    .reduce = {
        [BRAID_INT8] = KERN_ROW(i8),     [BRAID_UINT8] = KERN_ROW(u8),
        [BRAID_INT32] = KERN_ROW(i32),   [BRAID_UINT32] = KERN_ROW(u32),
        [BRAID_INT64] = KERN_ROW(i64),   [BRAID_UINT64] = KERN_ROW(u64),
        [BRAID_FP16] = KERN_ROW(f16),    [BRAID_FP32] = KERN_ROW(f32),
        [BRAID_FP64] = KERN_ROW(f64),    [BRAID_BF16] = KERN_ROW(bf16),
        [BRAID_FP8_E4M3] = KERN_ROW(e4m3), [BRAID_FP8_E5M2] = KERN_ROW(e5m2),
    },
    .scale = {
        [BRAID_INT8] = scale_i8,     [BRAID_UINT8] = scale_u8,
        [BRAID_INT32] = scale_i32,   [BRAID_UINT32] = scale_u32,
        [BRAID_INT64] = scale_i64,   [BRAID_UINT64] = scale_u64,
        [BRAID_FP16] = scale_f16,    [BRAID_FP32] = scale_f32,
        [BRAID_FP64] = scale_f64,    [BRAID_BF16] = scale_bf16,
        [BRAID_FP8_E4M3] = scale_e4m3, [BRAID_FP8_E5M2] = scale_e5m2,
    },
    .divide = {
        [BRAID_INT8] = divide_i8,    [BRAID_UINT8] = divide_u8,
        [BRAID_INT32] = divide_i32,  [BRAID_UINT32] = divide_u32,
        [BRAID_INT64] = divide_i64,  [BRAID_UINT64] = divide_u64,
    },
    .copy_large = kern_copy_large,
    .cast = KERN_CAT(braid_kern_cast_, BRAID_KERN_SUFFIX),
};
