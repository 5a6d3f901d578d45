/*
 * The GPU module: every kernel in one translation unit, as one image (a CUDA fatbin, a HIP
 * code-object bundle, the emulator's host build, the hiprtc source) holds them all.
 */
#include "kernels/gpu/cast.hip"
#include "kernels/gpu/copy.hip"
#include "kernels/gpu/reduce.hip"
