/*
 * braid_k_copy (kargs.h): out[0] (and out[1] when not NULL) = in[0], `count` bytes, any
 * alignment; 16-byte vectors when the three pointers share their offset modulo 16.
 */
#include "kernels/gpu/kern.h"

extern "C" __global__ void braid_k_copy(braid_kargs_t k)
{
    if (!kern_msg_differs(k))
        kern_copy_bytes(k.out[0], k.out[1], k.in[0], k.count);
}
BRAID_EMU_KERNEL(braid_k_copy)
