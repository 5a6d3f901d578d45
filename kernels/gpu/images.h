/*
 * The GPU kernels as libbraid carries them: one image per kind that this build made, and
 * the HIP source for a run-time compile. The table is generated (scripts/embed_gpu.py makes
 * kernels/gpu/images.c in the build tree from what nvcc and hipcc built).
 *
 *   kind "cuda": a fatbin (cubins for each sm_XX in archs, PTX for each compute_XX), for
 *                cuModuleLoadData
 *   kind "hip":  a clang offload bundle of code objects, one per gfx arch, for
 *                hipModuleLoadData
 *   kind "emu":  always there; data is BRAID_EMU_IMAGE_MAGIC (kargs.h) with its NUL, which
 *                the emulated driver's cuModuleLoadData accepts and a real one rejects
 *
 * Every image holds every kernel of kargs.h, under the names given there.
 */
#ifndef BRAID_KERNELS_GPU_IMAGES_H
#define BRAID_KERNELS_GPU_IMAGES_H

#include <stddef.h>

typedef struct braid_gpu_image {
    const char *kind;    /* "cuda" (fatbin: cubins + PTX), "hip" (code-object bundle), "emu" */
    const char *archs;   /* space-separated: "sm_80 sm_90 compute_90", "gfx908 gfx90a", "host" */
    const void *data;
    size_t size;
} braid_gpu_image_t;

/* The images, braid_gpu_nimages of them; the "emu" image is always there. */
extern const braid_gpu_image_t braid_gpu_images[];
extern const int braid_gpu_nimages;

/* Self-contained HIP source of every kernel (headers inlined) for hiprtc; "" if not
 * embedded. Compile it with -std=c++17 -ffp-contract=off -fno-gpu-flush-denormals-to-zero
 * (bit-identical results need all three, see kern.h). */
extern const char braid_gpu_hip_source[];

#endif
