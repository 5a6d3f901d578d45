/*
 * <hip/hip_runtime.h> for the host build of the kernels, which the emulated driver runs
 * one grid thread at a time (emu_abi.h): the qualifiers vanish, the thread indices are the
 * emulator's thread-locals, and BRAID_EMU_KERNEL(name), written after each kernel, gives it
 * an entry `void (void **params)` and a row of braid_emu_kernels[] (made in emu.cpp).
 *
 * Rows are numbered with __COUNTER__ in the one translation unit that includes every
 * kernel (emu.cpp); the entry unpacks params[i] into the kernel's parameter i, whatever
 * their number and types. The row's params_to_host passes each parameter, once per
 * launch, to braid_emu_param_to_host: an overload for each type that holds device
 * addresses rewrites them to where the host reaches the bytes (emu_abi.h).
 */
#ifndef BRAID_KERNELS_GPU_COMPAT_HOST_HIP_RUNTIME_H
#define BRAID_KERNELS_GPU_COMPAT_HOST_HIP_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include <utility>

#include "kernels/gpu/emu_abi.h"
#include "kernels/gpu/kargs.h"

#define BRAID_KERN_HOST 1

#define __global__
#define __device__
#define __host__
/* left to GCC: forcing every loop of every (type, op) into the kernels triples the compile
 * time for no speed the tests notice */
#define __forceinline__ inline

#define threadIdx braid_emu_threadIdx
#define blockIdx braid_emu_blockIdx
#define blockDim braid_emu_blockDim
#define gridDim braid_emu_gridDim

/* Where the host reaches device address p: itself without the emulator. */
static inline void *braid_emu_to_host(const void *p)
{
    return braid_emu_host_addr != nullptr ? braid_emu_host_addr(p) : const_cast<void *>(p);
}

/* A parameter with no device addresses in it: nothing to rewrite ... */
template <typename P> inline void braid_emu_param_to_host(P &) {}

/* ... braid's kernels take a braid_kargs_t, whose in[], out[], premul_ptr, msg and msg_err
 * are device addresses. */
inline void braid_emu_param_to_host(braid_kargs_t &a)
{
    for (const void *&p : a.in)
        p = braid_emu_to_host(p);
    for (void *&p : a.out)
        p = braid_emu_to_host(p);
    a.premul_ptr = braid_emu_to_host(a.premul_ptr);
    a.msg = static_cast<const uint64_t *>(braid_emu_to_host(a.msg));
    a.msg_err = static_cast<uint64_t *>(braid_emu_to_host(a.msg_err));
}

/* Row I of the table; rows past the last kernel end it (name NULL). */
template <int I> struct braid_emu_row {
    static constexpr braid_emu_kernel_t row = { nullptr, nullptr, nullptr, 0, { 0 } };
};

template <typename K> struct braid_emu_sig;

template <typename... P> struct braid_emu_sig<void(P...)> {
    static_assert(sizeof...(P) <= BRAID_EMU_MAX_PARAMS, "too many kernel parameters");

    template <void (*K)(P...), size_t... I>
    static void call(void **params, std::index_sequence<I...>)
    {
        K(*static_cast<P *>(params[I])...);
    }

    template <void (*K)(P...)> static void entry(void **params)
    {
        call<K>(params, std::index_sequence_for<P...>());
    }

    template <size_t... I> static void to_host(void **params, std::index_sequence<I...>)
    {
        (braid_emu_param_to_host(*static_cast<P *>(params[I])), ...);
    }

    static void params_to_host(void **params)
    {
        to_host(params, std::index_sequence_for<P...>());
    }

    static constexpr braid_emu_kernel_t row(const char *name, void (*fn)(void **))
    {
        return { name, fn, params_to_host, (int)sizeof...(P), { sizeof(P)... } };
    }
};

enum { BRAID_EMU_ROW0 = __COUNTER__ + 1 };

#define BRAID_EMU_KERNEL(_name)                                                            \
    template <> struct braid_emu_row<__COUNTER__ - BRAID_EMU_ROW0> {                       \
        typedef braid_emu_sig<decltype(_name)> sig;                                        \
        static constexpr braid_emu_kernel_t row = sig::row(#_name, sig::entry<_name>);     \
    };

#endif
