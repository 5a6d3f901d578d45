/*
 * coll_check -d: the same checks on device buffers. Every cc_buf gets a device twin
 * (cuMemAlloc through the CUDA driver: NVIDIA's, or braid's emulated one). Before a case
 * is issued, every buffer of this thread is copied to its twin with an ASYNC copy on the
 * thread's stream, and the calls take the twins and that stream; after them the twins are
 * copied back on the same stream, which is then synchronised, and the host checks run as
 * for host buffers (guards included). So a library that reads a buffer before its stream
 * has written it, or returns before its result is on the stream, fails the checks (run
 * with BRAID_EMU_DELAY_US to make such windows wide on the emulated driver).
 *
 * One stream per thread: with -t the calls of every rank share it, inside one group. With
 * -S N the calls take N streams in turn, the legacy default stream last (but with -T, whose
 * threads would share it: two ranks' calls on one stream wait for each other unless one
 * group holds both): the upload waits on the host for the first, and the download for
 * all, so only the library orders a communicator's calls on different streams (NCCL runs
 * them in the order they came).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "coll_check.h"
#include "tests/common/cudrv.h"

int cc_device;

static cudrv_t cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

#define CC_MAX_BUFS 4096
static __thread cc_buf_t *bufs[CC_MAX_BUFS];
static __thread int nbufs;
static __thread CUstream stream;
int cc_streams = 1, cc_streams_default = 1;
static __thread CUstream more[CC_MAX_STREAMS];   /* -S: [0] stream; NULL last, but with -T */
static __thread unsigned turn;


static void cu_load(void)
{
    cudrv_load(&cu);
}

int cc_spread;

void cc_dev_thread_init(int rank)
{
    if (!cc_device)
        return;
    pthread_once(&cu_once, cu_load);
    CUcontext ctx = cu.ctx;
    if (cc_spread) {
        int n = 1;
        CUdevice dev;
        CUDRV(cu.device_count(&n));
        CUDRV(cu.device_get(&dev, rank % n));
        CUDRV(cu.ctx_retain(&ctx, dev));
    }
    CUDRV(cu.ctx_set(ctx));
    if (stream == NULL)
        CUDRV(cu.stream_create(&stream, CU_STREAM_NON_BLOCKING));
    more[0] = stream;
    for (int i = 1; i < cc_streams - cc_streams_default; i++)
        if (more[i] == NULL)
            CUDRV(cu.stream_create(&more[i], CU_STREAM_NON_BLOCKING));
}

void *cc_stream(void)
{
    return !cc_device ? NULL : cc_streams > 1 ? more[turn++ % (unsigned)cc_streams] : stream;
}

/*
 * Twins are never freed, only kept for the next buffer of this thread: cuMemFree waits for
 * the whole device, so one rank's thread freeing would wait for another rank's collective
 * that waits for the first thread's next call (NCCL's users meet the same rule).
 */
static __thread struct {
    char *p;
    size_t bytes;
} spare[CC_MAX_BUFS];
static __thread int nspare;

static char *twin_take(size_t total)
{
    for (int i = 0; i < nspare; i++)
        if (spare[i].bytes >= total) {
            char *p = spare[i].p;
            spare[i] = spare[--nspare];
            return p;
        }
    CUdeviceptr d;
    CUDRV(cu.alloc(&d, total));
    return (char *)(uintptr_t)d;
}

void cc_dev_register(cc_buf_t *b, size_t total)
{
    b->dbase = NULL;
    if (!cc_device)
        return;
    if (nbufs == CC_MAX_BUFS) {
        fprintf(stderr, "coll_check -d: more than %d live buffers\n", CC_MAX_BUFS);
        exit(99);
    }
    b->dbase = twin_take(total);
    b->total = total;
    bufs[nbufs++] = b;
}

void cc_dev_unregister(cc_buf_t *b)
{
    if (b->dbase == NULL)
        return;
    for (int i = 0; i < nbufs; i++)
        if (bufs[i] == b) {
            bufs[i] = bufs[--nbufs];
            break;
        }
    if (nspare < CC_MAX_BUFS)
        spare[nspare].p = b->dbase, spare[nspare++].bytes = b->total;
    b->dbase = NULL;
}

/* A buffer the calls take is a cc_buf of this thread: any other would give the library host
 * memory, and -d would check the host path while it says it checks the device's. */
void *cc_dp(const void *p)
{
    if (!cc_device || p == NULL)
        return (void *)p;
    const char *c = p;
    for (int i = 0; i < nbufs; i++)
        if (c >= bufs[i]->base && c <= bufs[i]->base + bufs[i]->total)
            return bufs[i]->dbase + (c - bufs[i]->base);
    fprintf(stderr, "coll_check -d: %p is no cc_buf of this thread, so it has no device "
            "twin: allocate it with cc_buf_alloc\n", p);
    exit(99);
}

/*
 * With a thread per rank, every thread makes the twins of a case before any of them issues
 * it: a thread's cuMemAlloc while another thread's pageable download waits for a
 * collective that waits for the first thread's call deadlocks on a real driver (its lock:
 * the download holds it while it waits for its stream), and on the emulated one in strict
 * mode. Every thread uploads once per case.
 */
static pthread_barrier_t cases;
static int case_threads;

void cc_dev_threads(int n)
{
    if (cc_device && n > 1 && pthread_barrier_init(&cases, NULL, (unsigned)n) == 0)
        case_threads = n;
}

void cc_dev_upload(void)
{
    if (case_threads > 1)
        pthread_barrier_wait(&cases);
    for (int i = 0; cc_device && i < nbufs; i++)
        CUDRV(cu.h2d((CUdeviceptr)(uintptr_t)bufs[i]->dbase, bufs[i]->base,
                                       bufs[i]->total, stream));
    if (cc_device && cc_streams > 1)
        CUDRV(cu.stream_sync(stream));
}

void cc_dev_download(void)
{
    for (int i = 1; cc_device && i < cc_streams; i++)
        CUDRV(cu.stream_sync(more[i]));
    for (int i = 0; cc_device && i < nbufs; i++)
        CUDRV(cu.d2h(bufs[i]->base, (CUdeviceptr)(uintptr_t)bufs[i]->dbase,
                                       bufs[i]->total, stream));
    if (cc_device)
        CUDRV(cu.stream_sync(stream));
}
