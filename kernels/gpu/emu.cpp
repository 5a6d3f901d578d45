/*
 * The host build of the GPU kernels (emu_abi.h): every kernel, its thread-local grid
 * indices and the braid_emu_kernels[] table that the emulated driver looks kernels up in.
 * Built with compat/host first on the include path, so <hip/hip_runtime.h> is that folder's.
 */
#include "kernels/gpu/emu_abi.h"
#include "kernels/gpu/kernels.hip"

#include "base/dtype.h"

#define EMU_SAME(_k, _b) ((int)(_k) == (int)(_b))
static_assert(EMU_SAME(KERN_INT8, BRAID_INT8) && EMU_SAME(KERN_UINT8, BRAID_UINT8) &&
              EMU_SAME(KERN_INT32, BRAID_INT32) && EMU_SAME(KERN_UINT32, BRAID_UINT32) &&
              EMU_SAME(KERN_INT64, BRAID_INT64) && EMU_SAME(KERN_UINT64, BRAID_UINT64) &&
              EMU_SAME(KERN_FP16, BRAID_FP16) && EMU_SAME(KERN_FP32, BRAID_FP32) &&
              EMU_SAME(KERN_FP64, BRAID_FP64) && EMU_SAME(KERN_BF16, BRAID_BF16) &&
              EMU_SAME(KERN_FP8_E4M3, BRAID_FP8_E4M3) &&
              EMU_SAME(KERN_FP8_E5M2, BRAID_FP8_E5M2) &&
              EMU_SAME(KERN_NUM_DTYPES, BRAID_NUM_DTYPES),
              "kern.h's datatypes are base/dtype.h's");
static_assert(EMU_SAME(KERN_SUM, BRAID_OP_SUM) && EMU_SAME(KERN_PROD, BRAID_OP_PROD) &&
              EMU_SAME(KERN_MAX, BRAID_OP_MAX) && EMU_SAME(KERN_MIN, BRAID_OP_MIN),
              "kern.h's ops are base/dtype.h's");

BRAID_EMU_TLS braid_emu_dim3_t braid_emu_threadIdx, braid_emu_blockIdx, braid_emu_blockDim,
    braid_emu_gridDim;

#define EMU_ROW(_i) braid_emu_row<_i>::row
const braid_emu_kernel_t braid_emu_kernels[] = {
    EMU_ROW(0), EMU_ROW(1), EMU_ROW(2), EMU_ROW(3), EMU_ROW(4), EMU_ROW(5), EMU_ROW(6),
    EMU_ROW(7), { nullptr, nullptr, nullptr, 0, { 0 } },
};
static_assert(__COUNTER__ - BRAID_EMU_ROW0 <= 8, "more kernels than braid_emu_kernels[] rows");
