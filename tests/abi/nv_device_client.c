/*
 * A CUDA program as its users write it: NVIDIA's cuda.h and nccl.h, linked to NVIDIA's
 * libnccl.so.2 and libcuda.so.1 (-lnccl -lcuda). tests/integration/test_nv_client.sh runs it
 * with LD_LIBRARY_PATH naming braid's libnccl.so.2 and braid's emulated libcuda.so.1.
 *
 * Two ranks of one process (ncclCommInitAll) on device 0: device buffers, an async memset
 * of the input on the stream, an all-reduce of each rank (one group, one stream), an
 * async copy back, a synchronize; every element must be the sum. Prints
 * "nv_device_client: PASS".
 */
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <nccl.h>

#define COUNT (1 << 16)

#define CHECK_CU(_call)                                                                   \
    do {                                                                                  \
        CUresult _r = (_call);                                                            \
        if (_r != CUDA_SUCCESS) {                                                         \
            const char *_s = NULL;                                                        \
            cuGetErrorString(_r, &_s);                                                    \
            printf("nv_device_client: FAIL: %s: %s\n", #_call, _s ? _s : "?");            \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)
#define CHECK_NCCL(_call)                                                                 \
    do {                                                                                  \
        ncclResult_t _r = (_call);                                                        \
        if (_r != ncclSuccess) {                                                          \
            printf("nv_device_client: FAIL: %s: %s (%s)\n", #_call, ncclGetErrorString(_r), \
                   ncclGetLastError(NULL));                                               \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

static float host_out[2][COUNT];

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    CUdeviceptr buf[2];
    ncclComm_t comms[2];
    CHECK_CU(cuInit(0));
    CHECK_CU(cuDeviceGet(&dev, 0));
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK_CU(cuCtxSetCurrent(ctx));
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECK_NCCL(ncclCommInitAll(comms, 2, NULL));
    for (int r = 0; r < 2; r++) {
        float v = (float)(r + 1);
        unsigned int bits;
        memcpy(&bits, &v, sizeof(bits));
        CHECK_CU(cuMemAlloc(&buf[r], COUNT * sizeof(float)));
        CHECK_CU(cuMemsetD32Async(buf[r], bits, COUNT, stream));
    }
    CHECK_NCCL(ncclGroupStart());
    for (int r = 0; r < 2; r++)
        CHECK_NCCL(ncclAllReduce((void *)buf[r], (void *)buf[r], COUNT, ncclFloat, ncclSum,
                                 comms[r], (cudaStream_t)stream));
    CHECK_NCCL(ncclGroupEnd());
    for (int r = 0; r < 2; r++)
        CHECK_CU(cuMemcpyDtoHAsync(host_out[r], buf[r], COUNT * sizeof(float), stream));
    CHECK_CU(cuStreamSynchronize(stream));
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < COUNT; i++)
            if (host_out[r][i] != 3.0f) {
                printf("nv_device_client: FAIL: rank %d element %d is %g, expected 3\n", r, i,
                       host_out[r][i]);
                return 1;
            }
    for (int r = 0; r < 2; r++) {
        CHECK_NCCL(ncclCommDestroy(comms[r]));
        CHECK_CU(cuMemFree(buf[r]));
    }
    CHECK_CU(cuStreamDestroy(stream));
    printf("nv_device_client: PASS\n");
    return 0;
}
