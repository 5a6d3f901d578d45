/*
 * <hip/hip_runtime.h> for nvcc: the kernels use only names that CUDA spells the same way
 * (__global__, __device__, __host__, __forceinline__, threadIdx, blockIdx, blockDim,
 * gridDim, __threadfence_system), so this maps them by including CUDA's runtime header.
 * gpu.am puts this folder first on nvcc's include path.
 */
#ifndef BRAID_KERNELS_GPU_COMPAT_CUDA_HIP_RUNTIME_H
#define BRAID_KERNELS_GPU_COMPAT_CUDA_HIP_RUNTIME_H

#include <cuda_runtime.h>
#include <stdint.h>

#endif
