/*
 * The one argument every GPU kernel takes (by value), shared by the kernels (the .hip
 * files here), the engines that launch them (src/exec/dev_kernels.c) and the emulated driver
 * that runs their host build (emu/). Plain C, fixed layout.
 *
 * Kernels (names as cuModuleGetFunction / hipModuleGetFunction see them):
 *   braid_k_reduce: for i < count (elements of dtype):
 *         v = pre0(in[0][i]) OP pre1(in[1][i]) OP ... OP pre_{nin-1}(in[nin-1][i])
 *       (left to right), pre_j(x) = premul * x rounded to dtype when bit j of premul_mask is
 *       set, else x (premul: the value of dtype at premul_ptr where that is set); then
 *       v = v / postdiv when postdiv > 1 (integer types only, truncating);
 *       v is stored to out[0] and, when out[1] is not NULL, to out[1].
 *       fp16/bf16/fp8 accumulate in fp32 and round once, at the store (to nearest even);
 *       with nin == 2 that is bit for bit braid_kern_reduce() of kernels/host. nin == 1
 *       is a scale (mask bit 0), a division (postdiv) or a typed copy.
 *   braid_k_copy: out[0] (and out[1] when not NULL) = in[0], `count` bytes, any alignment.
 *   braid_k_cast: for i < count: out[0][i] = (accumulate ? out[0][i] : 0) + s * in[0][i],
 *       in[0] of type dtype_in, out[0] of type dtype, both floating-point; s = premul.f
 *       when bit 0 of premul_mask is set, else 1. Computed in fp32, or fp64 when either type
 *       is fp64, rounded to nearest even: bit for bit braid_kern_cast() of kernels/host.
 *       out[0] may be in[0] when both types have the same size.
 *
 * Launch: any grid and block (1-D); kernels loop grid-stride, so every element is done
 * once whatever the launch size (the emulator runs a launch as one thread, grid and block
 * of 1, or every thread of the grid in turn with BRAID_EMU_FULL_GRID=1).
 */
#ifndef BRAID_KERNELS_GPU_KARGS_H
#define BRAID_KERNELS_GPU_KARGS_H

#include <stdint.h>

#define BRAID_KARGS_MAXIN 8
#define BRAID_MSG_WORDS 4           /* a message record: header (24 bytes), length */

typedef struct braid_kargs {
    const void *in[BRAID_KARGS_MAXIN];
    void *out[2];
    const void *premul_ptr;     /* braid_k_reduce: when set, the multiplier is the dtype
                                 * value there (device memory: a device-resident
                                 * ncclPreMulSum scalar), not premul */
    uint64_t count;
    union {                     /* braid_scalar_t of kernels/kernels.h, same layout */
        double f;
        int64_t i;
        uint64_t u;
    } premul;
    uint64_t postdiv;
    int32_t nin;
    int32_t dtype;              /* braid_dtype_t (NCCL's numbering) */
    int32_t op;                 /* braid_opkind_t: sum, prod, max, min */
    uint32_t premul_mask;
    int32_t dtype_in;           /* braid_k_cast: in[0]'s braid_dtype_t */
    int32_t accumulate;         /* braid_k_cast: add to out[0] */
    /* braid_k_reduce, braid_k_copy: when msg is set, the record there (device memory: the
     * header and length its sender wrote with the message in[0] reads) must equal
     * msg_want; else the launch writes nothing but, from its first thread, that record
     * to msg_err[0..3] and then msg_mark to msg_err[4] (pinned host memory), and returns.
     * A launch of braid_k_copy of no bytes only checks. */
    const uint64_t *msg;
    uint64_t *msg_err;
    uint64_t msg_want[BRAID_MSG_WORDS];
    uint64_t msg_mark;
} braid_kargs_t;

#define BRAID_KERNEL_REDUCE "braid_k_reduce"
#define BRAID_KERNEL_COPY "braid_k_copy"
#define BRAID_KERNEL_CAST "braid_k_cast"

/* The image the emulated driver's cuModuleLoadData accepts (and the real one rejects):
 * this string, NUL included. Its kernels are the host build of kernels/gpu (emu_abi.h). */
#define BRAID_EMU_IMAGE_MAGIC "braid-emu-kernels-1"

#endif
