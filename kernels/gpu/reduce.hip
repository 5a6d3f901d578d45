/*
 * braid_k_reduce (kargs.h): out = pre0(in0) OP pre1(in1) OP ... OP pre_{nin-1}(in_{nin-1}),
 * left to right, in the accumulation type (fp32 for fp16, bf16 and fp8), then divided by
 * postdiv (integers), rounded once and stored to out[0] and out[1].
 *
 * The datatype and op switch once per launch, at the top; below it one grid-stride loop
 * per (datatype, op), 48 in all, each with a vector body: a thread takes 16 bytes of every
 * input in turn (nin is a loop, not a template parameter) and keeps 16 / sizeof(S)
 * accumulators. nin == 1 with nothing to multiply or divide is a copy of the bits (a
 * widening and rounding would quiet signalling NaNs), as braid_kern_scale(NULL) is.
 */
#include "kernels/gpu/kern.h"

/*
 * Input j: a select chain, not k.in[j], because nvcc copies a by-value parameter that is
 * indexed at run time to local memory (and loads the pointers from there).
 */
KDEV const void *kern_in(const braid_kargs_t &k, int j)
{
    const void *p = k.in[0];
    p = j == 1 ? k.in[1] : p;
    p = j == 2 ? k.in[2] : p;
    p = j == 3 ? k.in[3] : p;
    p = j == 4 ? k.in[4] : p;
    p = j == 5 ? k.in[5] : p;
    p = j == 6 ? k.in[6] : p;
    p = j == 7 ? k.in[7] : p;
    return p;
}

/* pre_j(x): premul * x rounded to the datatype. */
template <class F> KDEV typename F::A kern_pre(typename F::A x, typename F::A p)
{
    return F::load(F::store(F::prod(x, p)));
}

template <class F, int OP>
KDEV void kern_reduce_elem(const braid_kargs_t &k, typename F::A p, uint64_t i)
{
    typedef typename F::S S;
    typedef typename F::A A;
    A v = 0;   /* set by input 0 */
    for (int j = 0; j < k.nin; j++) {
        A y = F::load(((const S *)kern_in(k, j))[i]);
        if ((k.premul_mask >> j) & 1u)
            y = kern_pre<F>(y, p);
        v = j == 0 ? y : kern_op<F, OP>(v, y);
    }
    S s = F::store(F::post(v, k.postdiv));
    ((S *)k.out[0])[i] = s;
    if (k.out[1] != nullptr)
        ((S *)k.out[1])[i] = s;
}

/* Elements i .. i + 16 / sizeof(S) - 1, 16-byte aligned in every buffer. */
template <class F, int OP>
KDEV void kern_reduce_vec(const braid_kargs_t &k, typename F::A p, uint64_t i)
{
    typedef typename F::S S;
    typedef typename F::A A;
    const int n = 16 / sizeof(S);
    kern_vec<S> x;
    A v[n] = {}, y[n];   /* v is set by input 0 */

    for (int j = 0; j < k.nin; j++) {
        kern_ld16(x, (const S *)kern_in(k, j) + i);
        for (int e = 0; e < n; e++)
            y[e] = F::load(x.e[e]);
        if ((k.premul_mask >> j) & 1u)
            for (int e = 0; e < n; e++)
                y[e] = kern_pre<F>(y[e], p);
        for (int e = 0; e < n; e++)
            v[e] = j == 0 ? y[e] : kern_op<F, OP>(v[e], y[e]);
    }
    for (int e = 0; e < n; e++)
        x.e[e] = F::store(F::post(v[e], k.postdiv));
    kern_st16((S *)k.out[0] + i, x);
    if (k.out[1] != nullptr)
        kern_st16((S *)k.out[1] + i, x);
}

#ifdef BRAID_KERN_HOST
/*
 * The host build's common case, a plain sum of two inputs into one or two outputs (a ring's
 * step): flat loops that the host compiler vectorises (3x the general loops' rate on the
 * emulated driver), the same arithmetic element by element.
 */
template <class F, int OP> void kern_reduce_two(const braid_kargs_t &k)
{
    typedef typename F::S S;
    const S *a = (const S *)k.in[0], *b = (const S *)k.in[1];
    S *o0 = (S *)k.out[0], *o1 = (S *)k.out[1];
    uint64_t gid = kern_gid(), nt = kern_nthreads(), count = k.count;
    if (nt == 1 && o1 == nullptr)   /* the emulator's launch of one thread */
        for (uint64_t i = 0; i < count; i++)
            o0[i] = F::store(kern_op<F, OP>(F::load(a[i]), F::load(b[i])));
    else if (nt == 1)
        for (uint64_t i = 0; i < count; i++)
            o0[i] = o1[i] = F::store(kern_op<F, OP>(F::load(a[i]), F::load(b[i])));
    else
        for (uint64_t i = gid; i < count; i += nt) {
            S s = F::store(kern_op<F, OP>(F::load(a[i]), F::load(b[i])));
            o0[i] = s;
            if (o1 != nullptr)
                o1[i] = s;
        }
}
#endif

template <class F, int OP> KDEV void kern_reduce_loops(const braid_kargs_t &k)
{
#ifdef BRAID_KERN_HOST
    if (k.nin == 2 && k.premul_mask == 0 && k.postdiv <= 1) {
        kern_reduce_two<F, OP>(k);
        return;
    }
#endif
    typedef typename F::S S;
    const uint64_t n = 16 / sizeof(S);
    typename F::A p = k.premul_ptr != nullptr ? F::load(*(const S *)k.premul_ptr)
                                              : F::premul(k);
    uint64_t gid = kern_gid(), nt = kern_nthreads(), count = k.count;
    uintptr_t p0 = (uintptr_t)k.out[0], diff = 0;

    for (int j = 0; j < k.nin; j++)
        diff |= (uintptr_t)kern_in(k, j) ^ p0;
    if (k.out[1] != nullptr)
        diff |= (uintptr_t)k.out[1] ^ p0;
    uint64_t head = kern_head(p0, diff, count, sizeof(S)), nvec = (count - head) / n;

    for (uint64_t i = gid; i < head; i += nt)
        kern_reduce_elem<F, OP>(k, p, i);
    for (uint64_t v = gid; v < nvec; v += nt)
        kern_reduce_vec<F, OP>(k, p, head + v * n);
    for (uint64_t i = head + nvec * n + gid; i < count; i += nt)
        kern_reduce_elem<F, OP>(k, p, i);
}

template <class F> KDEV void kern_reduce_type(const braid_kargs_t &k)
{
    switch (k.op) {
    case KERN_SUM: kern_reduce_loops<F, KERN_SUM>(k); break;
    case KERN_PROD: kern_reduce_loops<F, KERN_PROD>(k); break;
    case KERN_MAX: kern_reduce_loops<F, KERN_MAX>(k); break;
    case KERN_MIN: kern_reduce_loops<F, KERN_MIN>(k); break;
    default: break;
    }
}

KDEV uint64_t kern_dtype_size(int32_t dt)
{
    switch (dt) {
    case KERN_INT8: case KERN_UINT8: case KERN_FP8_E4M3: case KERN_FP8_E5M2: return 1;
    case KERN_FP16: case KERN_BF16: return 2;
    case KERN_INT32: case KERN_UINT32: case KERN_FP32: return 4;
    case KERN_INT64: case KERN_UINT64: case KERN_FP64: return 8;
    default: return 0;
    }
}

extern "C" __global__ void braid_k_reduce(braid_kargs_t k)
{
    if (k.nin < 1 || k.nin > BRAID_KARGS_MAXIN || k.count == 0 || kern_msg_differs(k))
        return;
    if (k.nin == 1 && (k.premul_mask & 1u) == 0 && (k.postdiv <= 1 || k.dtype >= KERN_FP16)) {
        kern_copy_bytes(k.out[0], k.out[1], k.in[0], k.count * kern_dtype_size(k.dtype));
        return;
    }
    switch (k.dtype) {
    case KERN_INT8: kern_reduce_type<kern_i8>(k); break;
    case KERN_UINT8: kern_reduce_type<kern_u8>(k); break;
    case KERN_INT32: kern_reduce_type<kern_i32>(k); break;
    case KERN_UINT32: kern_reduce_type<kern_u32>(k); break;
    case KERN_INT64: kern_reduce_type<kern_i64>(k); break;
    case KERN_UINT64: kern_reduce_type<kern_u64>(k); break;
    case KERN_FP16: kern_reduce_type<kern_f16>(k); break;
    case KERN_FP32: kern_reduce_type<kern_f32>(k); break;
    case KERN_FP64: kern_reduce_type<kern_f64>(k); break;
    case KERN_BF16: kern_reduce_type<kern_bf16>(k); break;
    case KERN_FP8_E4M3: kern_reduce_type<kern_e4m3>(k); break;
    case KERN_FP8_E5M2: kern_reduce_type<kern_e5m2>(k); break;
    default: break;
    }
}
BRAID_EMU_KERNEL(braid_k_reduce)
