/*
 * What the GPU kernels share: the element families (how a datatype loads, combines and
 * stores), the ops, and the grid-stride loops with their 16-byte vector paths.
 *
 * The same source builds four ways: hipcc (AMD, native <hip/hip_runtime.h>), nvcc
 * (compat/cuda/hip/hip_runtime.h maps the few HIP names used here to CUDA), hiprtc (the
 * sources inlined into braid_gpu_hip_source by scripts/embed_gpu.py) and the host C++
 * compiler for the emulated driver (compat/host/hip/hip_runtime.h, see emu_abi.h).
 *
 * Results are bit for bit those of the host kernels (kernels/kernels.h): the conversions
 * are kernels/host/fp.h's own functions, and the float ops reproduce what x86 returns for
 * NaN, which GPUs do not (NVIDIA returns one canonical NaN for every NaN result):
 *     x is NaN                  -> x, unchanged (fp.h's braid_fp_nanf rule)
 *     else y is NaN             -> y, quieted
 *     else the result is NaN    -> the default NaN, 0xffc00000 (fp64: 0xfff8000000000000)
 * Builds must not contract a*b+c into an FMA (-ffp-contract=off, nvcc --fmad=false) and
 * must keep fp32 subnormals (no flush to zero); gpu.am passes those flags.
 *
 * Every pointer is aligned to its element size (kargs.h); when all of a launch's pointers
 * sit at the same offset modulo 16, a few head elements go one by one and the rest in
 * 16-byte vectors, otherwise every element goes one by one.
 */
#ifndef BRAID_KERNELS_GPU_KERN_H
#define BRAID_KERNELS_GPU_KERN_H

#include <hip/hip_runtime.h>

#ifdef __HIPCC_RTC__
/* hiprtc has no C library; its hip_runtime.h (ROCm 5.2) defines the 32- and 64-bit
 * integer types only. Clang's own type macros match whatever a later one defines. */
typedef __INT8_TYPE__ int8_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __INT16_TYPE__ int16_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINTPTR_TYPE__ uintptr_t;
#endif

#include "kernels/gpu/kargs.h"
#include "kernels/host/fp.h"

/* The host build's compat header defines it: each kernel's entry and emu table row. */
#ifndef BRAID_EMU_KERNEL
#define BRAID_EMU_KERNEL(_name)
#endif

#define KDEV __device__ __forceinline__

/* kargs.h's dtype and op: base/dtype.h's numbering (NCCL's), which device code cannot
 * include; emu.cpp checks that the two agree. */
enum {
    KERN_INT8 = 0, KERN_UINT8 = 1, KERN_INT32 = 2, KERN_UINT32 = 3, KERN_INT64 = 4,
    KERN_UINT64 = 5, KERN_FP16 = 6, KERN_FP32 = 7, KERN_FP64 = 8, KERN_BF16 = 9,
    KERN_FP8_E4M3 = 10, KERN_FP8_E5M2 = 11, KERN_NUM_DTYPES = 12
};
enum { KERN_SUM = 0, KERN_PROD = 1, KERN_MAX = 2, KERN_MIN = 3 };

/* ---- 16-byte vectors ---- */

typedef struct alignas(16) kern_q {
    uint32_t w[4];
} kern_q_t;

template <typename S> union kern_vec {
    kern_q_t q;
    S e[16 / sizeof(S)];
};

template <typename S> KDEV void kern_ld16(kern_vec<S> &v, const void *p)
{
#ifdef BRAID_KERN_HOST
    __builtin_memcpy(&v.q, p, 16);   /* the host compiler's aliasing rules */
#else
    v.q = *(const kern_q_t *)p;
#endif
}

template <typename S> KDEV void kern_st16(void *p, const kern_vec<S> &v)
{
#ifdef BRAID_KERN_HOST
    __builtin_memcpy(p, &v.q, 16);
#else
    *(kern_q_t *)p = v.q;
#endif
}

/* ---- float results with x86's NaN (see the top of this file) ---- */

KDEV float kern_nanf(float x, float y, float r)
{
    uint32_t n = braid_fp_sel(y != y, braid_fp_bits(y) | 0x00400000u, 0xffc00000u);
    n = braid_fp_sel(x != x, braid_fp_bits(x), n);
    return braid_fp_from_bits(braid_fp_sel(r != r, n, braid_fp_bits(r)));
}

KDEV double kern_nan(double x, double y, double r)
{
    uint64_t n = braid_fp_sel64(y != y, braid_fp_bits64(y) | 0x0008000000000000ull,
                                0xfff8000000000000ull);
    n = braid_fp_sel64(x != x, braid_fp_bits64(x), n);
    return braid_fp_from_bits64(braid_fp_sel64(r != r, n, braid_fp_bits64(r)));
}

/* (float)d as x86 does it: a NaN keeps its sign and top payload bits, quieted. */
KDEV float kern_f64_to_f32(double d)
{
    uint64_t b = braid_fp_bits64(d);
    uint32_t n = ((uint32_t)(b >> 32) & 0x80000000u) | 0x7fc00000u |
                 ((uint32_t)(b >> 29) & 0x003fffffu);
    return d != d ? braid_fp_from_bits(n) : (float)d;
}

/*
 * ---- element families ----
 * S is the stored type, A the one values combine in. load widens, store rounds (to
 * nearest even), premul is the launch's multiplier in A, post the integer division.
 */

/* Integers: wrap-around through the unsigned U; I holds a quotient computed in double. */
template <typename T, typename U, typename I> struct kern_int {
    typedef T S;
    typedef T A;
    static KDEV A load(S x) { return x; }
    static KDEV S store(A x) { return x; }
    static KDEV A premul(const braid_kargs_t &k) { return (A)k.premul.u; }
    static KDEV A sum(A x, A y) { return (A)((U)x + (U)y); }
    static KDEV A prod(A x, A y) { return (A)((U)x * (U)y); }
    static KDEV A max(A x, A y) { return x > y ? x : y; }
    static KDEV A min(A x, A y) { return x < y ? x : y; }
    /* As braid_kern_divide: up to 32 bits in double (exact, see reduce_impl.c), else in
     * integers, the sign apart so that INT64_MIN divides too. */
    static KDEV A post(A x, uint64_t d)
    {
        if (d <= 1)
            return x;
        if constexpr (sizeof(T) < 8) {
            return (T)(I)((double)x / (double)d);
        } else if constexpr ((T)-1 < 0) {
            uint64_t mag = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
            uint64_t q = mag / d;
            return (T)(x < 0 ? 0 - q : q);
        } else {
            return (T)(x / d);
        }
    }
};

/* fp32 arithmetic, for fp32 itself and for the narrow formats. */
struct kern_fops32 {
    typedef float A;
    static KDEV A premul(const braid_kargs_t &k) { return kern_f64_to_f32(k.premul.f); }
    static KDEV A sum(A x, A y) { return kern_nanf(x, y, x + y); }
    static KDEV A prod(A x, A y) { return kern_nanf(x, y, x * y); }
    static KDEV A max(A x, A y) { return braid_fp_maxf(x, y); }
    static KDEV A min(A x, A y) { return braid_fp_minf(x, y); }
    static KDEV A post(A x, uint64_t) { return x; }
};

struct kern_f32 : kern_fops32 {
    typedef float S;
    static KDEV A load(S x) { return x; }
    static KDEV S store(A x) { return x; }
};

struct kern_f64 {
    typedef double S;
    typedef double A;
    static KDEV A load(S x) { return x; }
    static KDEV S store(A x) { return x; }
    static KDEV A premul(const braid_kargs_t &k) { return k.premul.f; }
    static KDEV A sum(A x, A y) { return kern_nan(x, y, x + y); }
    static KDEV A prod(A x, A y) { return kern_nan(x, y, x * y); }
    static KDEV A max(A x, A y) { return braid_fp_max(x, y); }
    static KDEV A min(A x, A y) { return braid_fp_min(x, y); }
    static KDEV A post(A x, uint64_t) { return x; }
};

#define KERN_NARROW(_name, _S, _from, _to)                                                 \
    struct _name : kern_fops32 {                                                           \
        typedef _S S;                                                                      \
        static KDEV A load(S x) { return _from(x); }                                       \
        static KDEV S store(A x) { return _to(x); }                                        \
    }

KERN_NARROW(kern_f16, uint16_t, braid_fp_from_fp16, braid_fp_to_fp16);
KERN_NARROW(kern_bf16, uint16_t, braid_fp_from_bf16, braid_fp_to_bf16);
KERN_NARROW(kern_e4m3, uint8_t, braid_fp_from_e4m3, braid_fp_to_e4m3);
KERN_NARROW(kern_e5m2, uint8_t, braid_fp_from_e5m2, braid_fp_to_e5m2);

typedef kern_int<int8_t, uint8_t, int32_t> kern_i8;
typedef kern_int<uint8_t, uint8_t, int32_t> kern_u8;
typedef kern_int<int32_t, uint32_t, int32_t> kern_i32;
typedef kern_int<uint32_t, uint32_t, int64_t> kern_u32;
typedef kern_int<int64_t, uint64_t, int64_t> kern_i64;
typedef kern_int<uint64_t, uint64_t, uint64_t> kern_u64;

template <class F, int OP> KDEV typename F::A kern_op(typename F::A x, typename F::A y)
{
    if constexpr (OP == KERN_SUM)
        return F::sum(x, y);
    else if constexpr (OP == KERN_PROD)
        return F::prod(x, y);
    else if constexpr (OP == KERN_MAX)
        return F::max(x, y);
    else
        return F::min(x, y);
}

/* ---- the grid ---- */

KDEV uint64_t kern_gid(void)
{
    return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

KDEV uint64_t kern_nthreads(void)
{
    return (uint64_t)gridDim.x * blockDim.x;
}

/*
 * How many leading elements of `size` bytes go one by one before the rest is 16-byte
 * aligned everywhere: p0's distance to the next 16-byte boundary, or `count` (all of them)
 * when the other pointers are not at p0's offset modulo 16 (`diff`: their bits XOR p0's,
 * ORed together).
 */
KDEV uint64_t kern_head(uintptr_t p0, uintptr_t diff, uint64_t count, unsigned size)
{
    uintptr_t mis = p0 & 15u;
    if ((diff & 15u) != 0 || mis % size != 0)
        return count;
    uint64_t head = ((16u - mis) & 15u) / size;
    return head < count ? head : count;
}

/* The message this launch reads is not the one it expects (kargs.h: msg): the launch does
 * nothing, and its first thread says what it found at msg_err. */
KDEV bool kern_msg_differs(const braid_kargs_t &k)
{
    if (k.msg == nullptr)
        return false;
    const volatile uint64_t *got = k.msg;
    uint64_t w[BRAID_MSG_WORDS];
    bool same = true;
    for (int i = 0; i < BRAID_MSG_WORDS; i++) {
        w[i] = got[i];
        same = same && w[i] == k.msg_want[i];
    }
    if (same)
        return false;
    if (kern_gid() == 0) {   /* the host reads the mark first, then the record */
#ifdef BRAID_KERN_HOST
        /* atomic words: the host may still be reading an earlier launch's record */
        for (int i = 0; i < BRAID_MSG_WORDS; i++)
            __atomic_store_n(&k.msg_err[i], w[i], __ATOMIC_RELAXED);
        __atomic_store_n(&k.msg_err[BRAID_MSG_WORDS], k.msg_mark, __ATOMIC_RELEASE);
#else
        volatile uint64_t *err = k.msg_err;
        for (int i = 0; i < BRAID_MSG_WORDS; i++)
            err[i] = w[i];
        __threadfence_system();
        err[BRAID_MSG_WORDS] = k.msg_mark;
#endif
    }
    return true;
}

/* out0 (and out1) = in, `bytes` bytes. */
KDEV void kern_copy_bytes(void *out0, void *out1, const void *in, uint64_t bytes)
{
    uintptr_t p0 = (uintptr_t)in;
    uintptr_t diff = ((uintptr_t)out0 ^ p0) | (out1 != nullptr ? (uintptr_t)out1 ^ p0 : 0);
    uint64_t gid = kern_gid(), nt = kern_nthreads();
    uint64_t head = kern_head(p0, diff, bytes, 1), nvec = (bytes - head) / 16;
    const uint8_t *src = (const uint8_t *)in;
    uint8_t *d0 = (uint8_t *)out0, *d1 = (uint8_t *)out1;

    for (uint64_t i = gid; i < head; i += nt) {
        d0[i] = src[i];
        if (d1 != nullptr)
            d1[i] = src[i];
    }
    for (uint64_t v = gid; v < nvec; v += nt) {
        kern_vec<uint8_t> x;
        uint64_t i = head + v * 16;
        kern_ld16(x, src + i);
        kern_st16(d0 + i, x);
        if (d1 != nullptr)
            kern_st16(d1 + i, x);
    }
    for (uint64_t i = head + nvec * 16 + gid; i < bytes; i += nt) {
        d0[i] = src[i];
        if (d1 != nullptr)
            d1[i] = src[i];
    }
}

#endif
