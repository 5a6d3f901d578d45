/*
 * Scalar conversions between fp32 and the narrow float formats, and NaN-aware max/min.
 *
 * Everything here is branch-free integer arithmetic plus selects, so that a loop calling
 * these functions vectorises with plain SSE2/AVX2/AVX-512 integer instructions. No result
 * depends on subnormal fp32 arithmetic (the only fp32 subnormal ever added is one whose
 * correct rounding is 0 anyway), so results do not change when a caller has set FTZ/DAZ.
 * Rounding is to nearest, ties to even, and assumes the default rounding mode.
 *
 *   format  bias  largest finite  overflow           NaN in          NaN out (from fp32)
 *   fp16     15   65504           inf                0x7c01..0x7fff  s|0x7e00|top 10 bits
 *   bf16    127   3.39e38         inf                0x7f81..0x7fff  s|0x0040|top 7 bits
 *   e4m3      7   448             saturate to 448    s.1111.111      s|0x7f
 *   e5m2     15   57344           saturate to 57344  s.11111.xx, xx>0 s|0x7e|top 2 bits
 *
 * The NaN encodings follow the hardware: F16C's vcvtps2ph for fp16 (so the scalar and the
 * F16C paths agree bit for bit) and CUDA's satfinite fp8 conversions that NCCL uses, which
 * also turn +-inf into the largest finite value. A NaN read from any format becomes a quiet
 * fp32 NaN carrying the same sign and the top payload bits.
 *
 * braid_fp_<fmt>_code() return the rounded code in a uint32_t: a loop that stores those
 * into a uint32_t array and narrows in a second loop vectorises far better with GCC 12
 * than one that narrows at once (GCC then demotes the selects to 8/16-bit lanes and
 * shuffles).
 */
#ifndef BRAID_KERNELS_HOST_FP_H
#define BRAID_KERNELS_HOST_FP_H

#include <stdint.h>

/*
 * The GPU kernels (the .hip files of kernels/gpu) use these functions too, built by hipcc,
 * nvcc, hiprtc and, for the emulated driver, the host C++ compiler: there they are host
 * and device functions. Bit casts go through a union, which C defines and GCC, Clang and
 * nvcc also define in C++ (hiprtc has no memcpy); GCC folds it into a register move.
 */
#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIPCC_RTC__)
#define BRAID_FP_FN static inline __host__ __device__
#else
#define BRAID_FP_FN static inline
#endif

BRAID_FP_FN uint32_t braid_fp_bits(float f)
{
    union { float f; uint32_t u; } v;
    v.f = f;
    return v.u;
}

BRAID_FP_FN float braid_fp_from_bits(uint32_t u)
{
    union { uint32_t u; float f; } v;
    v.u = u;
    return v.f;
}

BRAID_FP_FN uint64_t braid_fp_bits64(double d)
{
    union { double d; uint64_t u; } v;
    v.d = d;
    return v.u;
}

BRAID_FP_FN double braid_fp_from_bits64(uint64_t u)
{
    union { uint64_t u; double d; } v;
    v.u = u;
    return v.d;
}

/*
 * c ? x : y without a branch: the ternary chains below otherwise get threaded into control
 * flow that GCC's if-conversion gives up on, and the loops stop vectorising.
 */
BRAID_FP_FN uint32_t braid_fp_sel(int c, uint32_t x, uint32_t y)
{
    uint32_t m = 0u - (uint32_t)(c != 0);
    return (x & m) | (y & ~m);
}

/*
 * Round |f| (bits a, below the smallest normal of the target) to a multiple of 2^-k, where
 * magic = 2^(23-k): adding it puts the wanted bits at the bottom of the fp32 mantissa, and the
 * fp32 adder rounds to nearest even. Returns the number of 2^-k steps, which is also the
 * target's subnormal encoding (and the smallest normal's, when it rounds up to it).
 */
BRAID_FP_FN uint32_t braid_fp_sub_round(uint32_t a, float magic)
{
    return braid_fp_bits(braid_fp_from_bits(a) + magic) - braid_fp_bits(magic);
}

/*
 * Round the fp32 bits a (positive, normal in the target) to `mbits` mantissa bits and
 * rebias the exponent by `rebias`; a carry out of the mantissa bumps the exponent, which is
 * what round-to-nearest wants. Values too small for this path are discarded by the caller.
 */
BRAID_FP_FN uint32_t braid_fp_norm_round(uint32_t a, unsigned mbits, uint32_t rebias)
{
    unsigned drop = 23 - mbits;
    uint32_t half = (1u << (drop - 1)) - 1u;
    return (a + half + ((a >> drop) & 1u) - (rebias << 23)) >> drop;
}

/* ---- fp16 (IEEE binary16) ---- */

BRAID_FP_FN float braid_fp_from_fp16(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t sub = braid_fp_bits((float)em * 0x1p-24f);  /* exact, and normal in fp32 */
    uint32_t norm = (em << 13) + ((127u - 15u) << 23);
    uint32_t special = (em << 13) | 0x7f800000u | braid_fp_sel(em > 0x7c00u, 0x00400000u, 0);
    uint32_t r = braid_fp_sel(em < 0x0400u, sub, norm);
    r = braid_fp_sel(em >= 0x7c00u, special, r);
    return braid_fp_from_bits(r | sign);
}

BRAID_FP_FN uint32_t braid_fp_fp16_code(float f)
{
    uint32_t u = braid_fp_bits(f);
    uint32_t a = u & 0x7fffffffu;
    uint32_t sub = braid_fp_sub_round(a, 0x1p-1f);
    uint32_t norm = braid_fp_norm_round(a, 10, 127u - 15u);
    uint32_t r = braid_fp_sel(a < 0x38800000u, sub, norm);             /* below 2^-14 */
    r = braid_fp_sel(a >= 0x477ff000u, 0x7c00u, r);                    /* >= 65520: inf */
    r = braid_fp_sel(a > 0x7f800000u, 0x7e00u | ((a >> 13) & 0x3ffu), r);
    return r | ((u >> 16) & 0x8000u);
}

BRAID_FP_FN uint16_t braid_fp_to_fp16(float f)
{
    return (uint16_t)braid_fp_fp16_code(f);
}

/* ---- bf16 (the top half of fp32) ---- */

BRAID_FP_FN float braid_fp_from_bf16(uint16_t h)
{
    return braid_fp_from_bits((uint32_t)h << 16);
}

BRAID_FP_FN uint32_t braid_fp_bf16_code(float f)
{
    uint32_t u = braid_fp_bits(f);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;   /* overflow carries into inf */
    return braid_fp_sel((u & 0x7fffffffu) > 0x7f800000u, (u >> 16) | 0x0040u, r);
}

BRAID_FP_FN uint16_t braid_fp_to_bf16(float f)
{
    return (uint16_t)braid_fp_bf16_code(f);
}

/* ---- fp8 e4m3 (OCP: no infinities, S.1111.111 is NaN) ---- */

BRAID_FP_FN float braid_fp_from_e4m3(uint8_t v)
{
    uint32_t sign = (uint32_t)(v & 0x80u) << 24;
    uint32_t em = v & 0x7fu;
    uint32_t sub = braid_fp_bits((float)em * 0x1p-9f);   /* exact, and normal in fp32 */
    uint32_t r = braid_fp_sel(em < 0x08u, sub, (em << 20) + ((127u - 7u) << 23));
    r = braid_fp_sel(em == 0x7fu, 0x7fc00000u, r);
    return braid_fp_from_bits(r | sign);
}

BRAID_FP_FN uint32_t braid_fp_e4m3_code(float f)
{
    uint32_t u = braid_fp_bits(f);
    uint32_t a = u & 0x7fffffffu;
    uint32_t sub = braid_fp_sub_round(a, 0x1p14f);
    uint32_t norm = braid_fp_norm_round(a, 3, 127u - 7u);
    uint32_t r = braid_fp_sel(a < 0x3c800000u, sub, norm);             /* below 2^-6 */
    r = braid_fp_sel(a >= 0x43e00000u, 0x7eu, r);   /* >= 448 (464 ties to 448): saturate */
    r = braid_fp_sel(a > 0x7f800000u, 0x7fu, r);
    return r | ((u >> 24) & 0x80u);
}

BRAID_FP_FN uint8_t braid_fp_to_e4m3(float f)
{
    return (uint8_t)braid_fp_e4m3_code(f);
}

/* ---- fp8 e5m2 (OCP: IEEE-like, with inf) ---- */

BRAID_FP_FN float braid_fp_from_e5m2(uint8_t v)
{
    uint32_t sign = (uint32_t)(v & 0x80u) << 24;
    uint32_t em = v & 0x7fu;
    uint32_t sub = braid_fp_bits((float)em * 0x1p-16f);  /* exact, and normal in fp32 */
    uint32_t norm = (em << 21) + ((127u - 15u) << 23);
    uint32_t special = (em << 21) | 0x7f800000u | braid_fp_sel(em > 0x7cu, 0x00400000u, 0);
    uint32_t r = braid_fp_sel(em < 0x04u, sub, norm);
    r = braid_fp_sel(em >= 0x7cu, special, r);
    return braid_fp_from_bits(r | sign);
}

BRAID_FP_FN uint32_t braid_fp_e5m2_code(float f)
{
    uint32_t u = braid_fp_bits(f);
    uint32_t a = u & 0x7fffffffu;
    uint32_t sub = braid_fp_sub_round(a, 0x1p7f);
    uint32_t norm = braid_fp_norm_round(a, 2, 127u - 15u);
    uint32_t r = braid_fp_sel(a < 0x38800000u, sub, norm);             /* below 2^-14 */
    r = braid_fp_sel(a >= 0x47600000u, 0x7bu, r);   /* >= 57344: saturate, inf included */
    r = braid_fp_sel(a > 0x7f800000u, 0x7eu | ((a >> 21) & 0x3u), r);
    return r | ((u >> 24) & 0x80u);
}

BRAID_FP_FN uint8_t braid_fp_to_e5m2(float f)
{
    return (uint8_t)braid_fp_e5m2_code(f);
}

/*
 * r = x OP y with a NaN result that does not depend on the instruction. x86 returns the
 * first source operand's NaN when both are NaN, and which operand the compiler puts first
 * differs between ISA variants; returning x whenever x is NaN makes the variants agree
 * (with one NaN operand the hardware returns it, quieted, in either order). A mask, not a
 * ternary: GCC would sink the arithmetic into a branch and stop vectorising.
 */
BRAID_FP_FN float braid_fp_nanf(float x, float r)
{
    return braid_fp_from_bits(braid_fp_sel(x != x, braid_fp_bits(x), braid_fp_bits(r)));
}

BRAID_FP_FN uint64_t braid_fp_sel64(int c, uint64_t x, uint64_t y)
{
    uint64_t m = 0u - (uint64_t)(c != 0);
    return (x & m) | (y & ~m);
}

BRAID_FP_FN double braid_fp_nan(double x, double r)
{
    return braid_fp_from_bits64(braid_fp_sel64(x != x, braid_fp_bits64(x), braid_fp_bits64(r)));
}

/*
 * Max and min on floats with C99 fmax/fmin semantics, as NCCL's GPU kernels have (fmaxf,
 * fminf, and __hmax/__hmin for half, bf16 and fp8, all of which return the other operand
 * when one is NaN): a NaN loses against a number, and the result is NaN only when both are
 * (then it is x). Unlike libm we also order -0 below +0 so that the result never depends on
 * the operand order. Written as selects so that loops vectorise.
 */
BRAID_FP_FN float braid_fp_maxf(float x, float y)
{
    float r = x > y ? x : y;
    r = x == y ? braid_fp_from_bits(braid_fp_bits(x) & braid_fp_bits(y)) : r;
    r = x != x ? y : r;
    return y != y ? x : r;
}

BRAID_FP_FN float braid_fp_minf(float x, float y)
{
    float r = x < y ? x : y;
    r = x == y ? braid_fp_from_bits(braid_fp_bits(x) | braid_fp_bits(y)) : r;
    r = x != x ? y : r;
    return y != y ? x : r;
}

BRAID_FP_FN double braid_fp_max(double x, double y)
{
    double r = x > y ? x : y;
    r = x == y ? braid_fp_from_bits64(braid_fp_bits64(x) & braid_fp_bits64(y)) : r;
    r = x != x ? y : r;
    return y != y ? x : r;
}

BRAID_FP_FN double braid_fp_min(double x, double y)
{
    double r = x < y ? x : y;
    r = x == y ? braid_fp_from_bits64(braid_fp_bits64(x) | braid_fp_bits64(y)) : r;
    r = x != x ? y : r;
    return y != y ? x : r;
}

#endif
