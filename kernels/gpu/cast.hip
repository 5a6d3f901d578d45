/*
 * braid_k_cast (kargs.h): out[0] (dtype) = (accumulate ? out[0] : 0) + scale * in[0]
 * (dtype_in), floating-point types only: the gather and scatter of bucket plans on a device
 * (src/device/slice.c), bit for bit braid_kern_cast of kernels/host/cast.c.
 *
 * Values go through fp32, or fp64 where either type is fp64 (a narrow type then rounds
 * twice, fp64 -> fp32 -> itself, as cast.c does). The host reference is plain C
 * arithmetic, so NaNs follow x86's rules, which the selects below reproduce:
 *     an operand that is NaN    -> that NaN, quieted (the first one, x, when both are)
 *     an invalid operation      -> the default NaN, 0xffc00000 (fp64: 0xfff8000000000000)
 * and the conversions between fp32 and fp64 keep a NaN's sign and top payload bits,
 * quieted, as cvtss2sd and cvtsd2ss do. Same type, no scale and no accumulation is a copy
 * of the bits (a signalling NaN stays one), as in cast.c.
 *
 * One element per thread and grid-stride: the element types differ in size, so there is
 * no common 16-byte vector, and consecutive threads touch consecutive elements.
 */
#include "kernels/gpu/kern.h"

KDEV float kern_x86(float x, float y, float r)
{
    uint32_t n = braid_fp_sel(y != y, braid_fp_bits(y) | 0x00400000u, 0xffc00000u);
    n = braid_fp_sel(x != x, braid_fp_bits(x) | 0x00400000u, n);
    return braid_fp_from_bits(braid_fp_sel(r != r, n, braid_fp_bits(r)));
}

KDEV double kern_x86(double x, double y, double r)
{
    uint64_t n = braid_fp_sel64(y != y, braid_fp_bits64(y) | 0x0008000000000000ull,
                                0xfff8000000000000ull);
    n = braid_fp_sel64(x != x, braid_fp_bits64(x) | 0x0008000000000000ull, n);
    return braid_fp_from_bits64(braid_fp_sel64(r != r, n, braid_fp_bits64(r)));
}

/* (double)f as x86 does it: a NaN keeps its sign and payload (shifted up), quieted. */
KDEV double kern_f32_to_f64(float f)
{
    uint32_t b = braid_fp_bits(f);
    uint64_t n = ((uint64_t)(b & 0x80000000u) << 32) | 0x7ff8000000000000ull |
                 ((uint64_t)(b & 0x003fffffu) << 29);
    return f != f ? braid_fp_from_bits64(n) : (double)f;
}

/* The type values go through: fp32, or fp64 (W). */
template <bool W> struct kern_cast_via {
    typedef float T;
};
template <> struct kern_cast_via<true> {
    typedef double T;
};

/* An element of family F as C (float or double), and back (kern.h's families). */
template <class F, typename C> KDEV C kern_widen(typename F::S x)
{
    if constexpr (sizeof(C) == sizeof(typename F::A))
        return F::load(x);
    else
        return kern_f32_to_f64(F::load(x));
}

template <class F, typename C> KDEV typename F::S kern_narrow(C x)
{
    if constexpr (sizeof(C) == sizeof(typename F::A))
        return F::store(x);
    else
        return F::store(kern_f64_to_f32(x));
}

template <class D, class S> KDEV void kern_cast_loop(const braid_kargs_t &k)
{
    typedef typename kern_cast_via<sizeof(typename D::A) == 8 ||
                                   sizeof(typename S::A) == 8>::T C;
    const typename S::S *in = (const typename S::S *)k.in[0];
    typename D::S *out = (typename D::S *)k.out[0];
    C s = sizeof(C) == 8 ? (C)k.premul.f : (C)kern_f64_to_f32(k.premul.f);
    bool scaled = (k.premul_mask & 1u) != 0, acc = k.accumulate != 0;
    uint64_t nt = kern_nthreads(), count = k.count;

    for (uint64_t i = kern_gid(); i < count; i += nt) {
        C v = kern_widen<S, C>(in[i]);
        if (scaled)
            v = kern_x86(v, s, v * s);
        if (acc) {
            C d = kern_widen<D, C>(out[i]);
            v = kern_x86(d, v, d + v);
        }
        out[i] = kern_narrow<D, C>(v);
    }
}

template <class D> KDEV void kern_cast_to(const braid_kargs_t &k)
{
    switch (k.dtype_in) {
    case KERN_FP16: kern_cast_loop<D, kern_f16>(k); break;
    case KERN_FP32: kern_cast_loop<D, kern_f32>(k); break;
    case KERN_FP64: kern_cast_loop<D, kern_f64>(k); break;
    case KERN_BF16: kern_cast_loop<D, kern_bf16>(k); break;
    case KERN_FP8_E4M3: kern_cast_loop<D, kern_e4m3>(k); break;
    case KERN_FP8_E5M2: kern_cast_loop<D, kern_e5m2>(k); break;
    default: break;
    }
}

KDEV uint64_t kern_float_size(int32_t dt)
{
    switch (dt) {
    case KERN_FP8_E4M3: case KERN_FP8_E5M2: return 1;
    case KERN_FP16: case KERN_BF16: return 2;
    case KERN_FP32: return 4;
    case KERN_FP64: return 8;
    default: return 0;
    }
}

extern "C" __global__ void braid_k_cast(braid_kargs_t k)
{
    if (k.count == 0 || kern_float_size(k.dtype) == 0 || kern_float_size(k.dtype_in) == 0)
        return;
    if (k.dtype == k.dtype_in && (k.premul_mask & 1u) == 0 && !k.accumulate) {
        kern_copy_bytes(k.out[0], nullptr, k.in[0], k.count * kern_float_size(k.dtype));
        return;
    }
    switch (k.dtype) {
    case KERN_FP16: kern_cast_to<kern_f16>(k); break;
    case KERN_FP32: kern_cast_to<kern_f32>(k); break;
    case KERN_FP64: kern_cast_to<kern_f64>(k); break;
    case KERN_BF16: kern_cast_to<kern_bf16>(k); break;
    case KERN_FP8_E4M3: kern_cast_to<kern_e4m3>(k); break;
    case KERN_FP8_E5M2: kern_cast_to<kern_e5m2>(k); break;
    default: break;
    }
}
BRAID_EMU_KERNEL(braid_k_cast)
