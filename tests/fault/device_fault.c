/*
 * Device buffers when things go wrong, on the CUDA driver (braid's emulated one in CI):
 *
 *   abort     rank 0 starts an all-reduce that rank 1 never joins; ncclCommAbort from the
 *             calling thread stops rank 0's proxy, whatever it is doing, and releases the
 *             stream (cuStreamSynchronize returns)
 *   async     rank 1 aborts while rank 0's all-reduce waits for it: rank 0's proxy fails,
 *             ncclCommGetAsyncError says so, and rank 0's stream is released
 *   mixed     a device send buffer with a pageable host receive buffer: ncclInvalidArgument
 *             at the call, and the stream and buffers are untouched
 *   finalize  ncclCommFinalize right after a queued all-reduce: the all-reduce has run
 *             when finalize returns (finalize waits for device work before it tells the
 *             peers): the sum is in the buffer, read at once on a stream that does not wait
 *             for the all-reduce, and the calls' own stream sees it too
 *
 * Every operation of the emulated driver's streams is delayed (BRAID_EMU_DELAY_US, set
 * here before the driver starts), so calls are still queued when the next step comes.
 *
 * Both ranks are communicators of this process (ncclCommInitAll), so each case controls
 * exactly what each rank does. A watchdog fails the test instead of letting it hang.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "tests/common/cudrv.h"

#define COUNT 4096

static cudrv_t cu;

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "device_fault: watchdog: a case hung\n";
    if (write(2, msg, sizeof(msg) - 1) < 0)
        _exit(1);
    _exit(1);
}

static void expect(int ok, const char *what)
{
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok)
        exit(1);
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static void comms_init(ncclComm_t comms[2])
{
    if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) {
        fprintf(stderr, "ncclCommInitAll: %s\n", ncclGetLastError(NULL));
        exit(1);
    }
}

/* Each case: two ranks, a stream and a zeroed device buffer of COUNT floats. */
typedef struct dcase {
    ncclComm_t comms[2];
    CUstream s;
    float *buf;
} dcase_t;

static void case_begin(dcase_t *c)
{
    CUdeviceptr d;
    comms_init(c->comms);
    CUDRV(cu.stream_create(&c->s, CU_STREAM_NON_BLOCKING));
    CUDRV(cu.alloc(&d, COUNT * sizeof(float)));
    CUDRV(cu.memset8(d, 0, COUNT * sizeof(float), NULL));
    CUDRV(cu.stream_sync(NULL));
    c->buf = (float *)(uintptr_t)d;
}

/* Device memory is freed last: cuMemFree waits for the device, streams included. */
static void case_end(dcase_t *c)
{
    CUDRV(cu.stream_destroy(c->s));
    CUDRV(cu.free((CUdeviceptr)(uintptr_t)c->buf));
}

static void case_abort(void)
{
    dcase_t c;
    case_begin(&c);
    expect(ncclAllReduce(c.buf, c.buf, COUNT, ncclFloat, ncclSum, c.comms[0], c.s) ==
               ncclSuccess,
           "abort: the all-reduce is queued and the call returns");
    expect(cu.stream_query(c.s) == CUDA_ERROR_NOT_READY,
           "abort: the stream waits for the all-reduce rank 1 never joins");
    /* The abort must release the stream whatever the proxy is doing (waiting for the
     * stream's event, running the collective, or not started): the pause only makes
     * "running, waiting for rank 1" the likely state, the checks hold in every one. */
    sleep_ms(200);
    expect(ncclCommAbort(c.comms[0]) == ncclSuccess, "abort: ncclCommAbort of rank 0");
    expect(cu.stream_sync(c.s) == CUDA_SUCCESS, "abort: the stream is released");
    expect(ncclCommDestroy(c.comms[1]) == ncclSuccess, "abort: rank 1 is destroyed");
    case_end(&c);
}

static void case_async(void)
{
    dcase_t c;
    case_begin(&c);
    expect(ncclAllReduce(c.buf, c.buf, COUNT, ncclFloat, ncclSum, c.comms[0], c.s) ==
               ncclSuccess,
           "async: the all-reduce is queued");
    expect(ncclCommAbort(c.comms[1]) == ncclSuccess, "async: rank 1 aborts instead of joining");
    expect(cu.stream_sync(c.s) == CUDA_SUCCESS, "async: rank 0's stream is released");
    ncclResult_t r = ncclSuccess;
    expect(ncclCommGetAsyncError(c.comms[0], &r) == ncclSuccess && r != ncclSuccess &&
               r != ncclInProgress,
           "async: ncclCommGetAsyncError reports rank 0's failure");
    printf("      (%s: %s)\n", ncclGetErrorString(r), ncclGetLastError(c.comms[0]));
    expect(ncclCommAbort(c.comms[0]) == ncclSuccess, "async: rank 0 is aborted");
    case_end(&c);
}

static void case_mixed(void)
{
    dcase_t c;
    case_begin(&c);
    float *host = calloc(COUNT, sizeof(float));
    ncclResult_t r = ncclAllReduce(c.buf, host, COUNT, ncclFloat, ncclSum, c.comms[0], c.s);
    expect(r == ncclInvalidArgument, "mixed: device send with host receive buffer is refused");
    printf("      (%s)\n", ncclGetLastError(c.comms[0]));
    expect(cu.stream_query(c.s) == CUDA_SUCCESS, "mixed: nothing was queued on the stream");
    int zero = 1;
    for (int i = 0; i < COUNT; i++)
        zero &= host[i] == 0.0f;
    expect(zero, "mixed: the host buffer is untouched");
    for (int i = 0; i < 2; i++)
        expect(ncclCommDestroy(c.comms[i]) == ncclSuccess, "mixed: destroy");
    free(host);
    case_end(&c);
}

static int all_equal(const float *v, float want)
{
    int same = 1;
    for (int i = 0; i < COUNT; i++)
        same &= v[i] == want;
    return same;
}

/*
 * The device buffer as it is now, read through a stream of its own that waits for nothing
 * of braid's: a copy on the calls' stream would wait for the all-reduce queued before it,
 * however late that ran. (On the emulated driver this copy is delayed too, but an
 * all-reduce that finalize left behind has more delayed operations still to go: the
 * memsets before it, the event it waits for, its own.)
 */
static void read_apart(float *host, const float *dbuf)
{
    CUstream apart;
    memset(host, 0, COUNT * sizeof(float));
    CUDRV(cu.stream_create(&apart, CU_STREAM_NON_BLOCKING));
    CUDRV(cu.d2h(host, (CUdeviceptr)(uintptr_t)dbuf, COUNT * sizeof(float), apart));
    CUDRV(cu.stream_sync(apart));
    CUDRV(cu.stream_destroy(apart));
}

static void case_finalize(void)
{
    dcase_t c;
    case_begin(&c);
    float *other;
    CUdeviceptr d;
    CUDRV(cu.alloc(&d, COUNT * sizeof(float)));
    other = (float *)(uintptr_t)d;
    CUDRV(cu.memset32(d, 0x40000000u, COUNT, c.s));                       /* 2.0f */
    CUDRV(cu.memset32((CUdeviceptr)(uintptr_t)c.buf, 0x3f800000u, COUNT, c.s)); /* 1.0f */
    expect(ncclGroupStart() == ncclSuccess &&
               ncclAllReduce(c.buf, c.buf, COUNT, ncclFloat, ncclSum, c.comms[0], c.s) ==
                   ncclSuccess &&
               ncclAllReduce(other, other, COUNT, ncclFloat, ncclSum, c.comms[1], c.s) ==
                   ncclSuccess &&
               ncclGroupEnd() == ncclSuccess,
           "finalize: both ranks' all-reduces are queued");
    expect(ncclGroupStart() == ncclSuccess && ncclCommFinalize(c.comms[0]) == ncclSuccess &&
               ncclCommFinalize(c.comms[1]) == ncclSuccess && ncclGroupEnd() == ncclSuccess,
           "finalize: both ranks finalize at once");
    float *host = malloc(COUNT * sizeof(float));
    read_apart(host, c.buf);
    if (!all_equal(host, 3.0f))
        printf("      (element 0 is %g, not 3)\n", host[0]);
    expect(all_equal(host, 3.0f),
           "finalize: the queued all-reduce ran before finalize returned, sum 3 (read on "
           "another stream)");
    CUDRV(cu.d2h(host, (CUdeviceptr)(uintptr_t)c.buf, COUNT * sizeof(float), c.s));
    CUDRV(cu.stream_sync(c.s));
    expect(all_equal(host, 3.0f), "finalize: the calls' stream sees the sum");
    for (int i = 0; i < 2; i++)
        expect(ncclCommDestroy(c.comms[i]) == ncclSuccess, "finalize: destroy");
    free(host);
    CUDRV(cu.free(d));
    case_end(&c);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(120);
    setenv("BRAID_EMU_DELAY_US", "2000", 0);   /* read by the emulated driver's cuInit */
    cudrv_load(&cu);
    const char *only = argc > 1 ? argv[1] : "";
    if (!*only || strstr(only, "abort"))
        case_abort();
    if (!*only || strstr(only, "async"))
        case_async();
    if (!*only || strstr(only, "mixed"))
        case_mixed();
    if (!*only || strstr(only, "finalize"))
        case_finalize();
    printf("device_fault: all cases passed\n");
    return 0;
}
