/*
 * The emulated driver in strict mode (BRAID_EMU_STRICT=1): a second process that
 * emu_driver.c starts with its stderr in a file of the test's folder, where these checks
 * read what the emulator says.
 *
 * Checks: the legacy NULL stream waits for what blocking streams queued before each of its
 * operations, and they for what it queued, even for a stream destroyed meanwhile;
 * non-blocking streams neither wait nor are waited for.
 *
 * Nothing here depends on how fast the machine is: what must not happen is held back by
 * a gate (a stream waiting for a pinned word that the host writes after the check), and a
 * check that something does not happen gives it SETTLE_MS first, so a slow machine can
 * only make a broken emulator pass, never a sound one fail.
 */
#if __has_include(<cuda.h>)

#include <stdio.h>
#include <string.h>

#include "tests/device/emu_test.h"

/* ---- the legacy stream's implicit synchronisation ---------------------------------------- */

/*
 * A blocking stream's memset held back by a gate, then a copy on the NULL stream: the copy
 * waits for the memset, even once the stream is destroyed. Then the other way round: a
 * blocking stream's copy waits for the NULL stream's memset.
 */
static void check_legacy_blocking(unsigned char *pinned, uint32_t *gate, CUdeviceptr d)
{
    CUstream b;
    if (!CU(cuStreamCreate(&b, 0)))
        return;
    gate_close(b, gate);
    CU(cuMemsetD8Async(d, 0x5a, NBYTES, b));
    CU(cuStreamDestroy(b));
    CU(cuMemcpyDtoHAsync(pinned, d, NBYTES, NULL));
    int early = wait_stream_done(NULL, SETTLE_MS);
    gate_open(gate);
    CU(cuStreamSynchronize(NULL));
    check(!early && all_bytes(pinned, NBYTES, 0x5a),
          "the NULL stream waits for a blocking stream's work queued before (stream destroyed)");

    if (!CU(cuStreamCreate(&b, 0)))
        return;
    gate_close(NULL, gate);
    CU(cuMemsetD8Async(d, 0x6b, NBYTES, NULL));
    CU(cuMemcpyDtoHAsync(pinned, d, NBYTES, b));
    early = wait_stream_done(b, SETTLE_MS);
    gate_open(gate);
    CU(cuStreamSynchronize(b));
    check(!early && all_bytes(pinned, NBYTES, 0x6b),
          "a blocking stream waits for the NULL stream's work queued before");
    CU(cuStreamDestroy(b));
}

/* A non-blocking stream held back by a gate does not hold back the NULL stream, nor the
 * other way round. */
static void check_legacy_nonblocking(unsigned char *pinned, uint32_t *gate, CUdeviceptr d)
{
    CUstream n;
    if (!CU(cuStreamCreate(&n, CU_STREAM_NON_BLOCKING)))
        return;
    gate_close(n, gate);
    CU(cuMemsetD8Async(d, 0x61, NBYTES, NULL));
    CU(cuMemcpyDtoHAsync(pinned, d, NBYTES, NULL));
    int done = wait_stream_done(NULL, WAIT_MS);
    check(done && cuStreamQuery(n) == CUDA_ERROR_NOT_READY && all_bytes(pinned, NBYTES, 0x61),
          "the NULL stream does not wait for a non-blocking stream");
    gate_open(gate);
    CU(cuStreamSynchronize(n));

    gate_close(NULL, gate);
    CU(cuMemsetD8Async(d, 0x7c, NBYTES, n));
    CU(cuMemcpyDtoHAsync(pinned, d, NBYTES, n));
    done = wait_stream_done(n, WAIT_MS);
    check(done && cuStreamQuery(NULL) == CUDA_ERROR_NOT_READY && all_bytes(pinned, NBYTES, 0x7c),
          "a non-blocking stream does not wait for the NULL stream");
    gate_open(gate);
    CU(cuStreamSynchronize(NULL));
    CU(cuStreamDestroy(n));
}

int strict_main(const char *argv0, const char *dir)
{
    CUcontext ctx;
    CUdeviceptr d;
    unsigned char *pinned;
    (void)argv0;
    (void)dir;
    if (!CU(cuInit(0)) || !CU(cuDevicePrimaryCtxRetain(&ctx, 0)) || !CU(cuCtxSetCurrent(ctx)) ||
        !CU(cuMemHostAlloc((void **)&pinned, NBYTES + 64, 0)) || !CU(cuMemAlloc(&d, NBYTES)))
        return 1;
    uint32_t *gates = (uint32_t *)(pinned + NBYTES);
    check_legacy_blocking(pinned, &gates[0], d);
    check_legacy_nonblocking(pinned, &gates[0], d);
    CU(cuMemFree(d));
    CU(cuMemFreeHost(pinned));
    printf("emu_driver --strict: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}

#endif
