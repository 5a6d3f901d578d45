/*
 * Which backend is in use: BRAID_DEVICE, else the first of cuda, hip whose runtime loads and
 * sees a device, else host. Chosen once per process, at the first call that needs it.
 * Also what every backend shares: the bounded wait on an event, and whether a device is
 * stuck (work braid queued never finished).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/param.h"
#include "base/time.h"
#include "device/device.h"

static const braid_device_ops_t *const backends[] = { &braid_device_cuda, &braid_device_hip };

static const braid_device_ops_t *dev_ops = &braid_device_host;
static int dev_count;
static pthread_once_t dev_once = PTHREAD_ONCE_INIT;

static int try_backend(const braid_device_ops_t *ops, int forced)
{
    int n = 0;
    braid_status_t st = ops->init(&n);
    if (st < 0 || n == 0) {
        if (forced)
            BRAID_WARN("BRAID_DEVICE=%s: %s; device buffers are refused", ops->name,
                       st < 0 ? braid_err_last() : "the runtime sees no device");
        return 0;
    }
    dev_ops = ops;
    dev_count = n;
    BRAID_INFO(BRAID_SUB_INIT, "device backend %s: %d device%s", ops->name, n, n == 1 ? "" : "s");
    return 1;
}

static void choose(void)
{
    const char *want = braid_param_str(BRAID_P_DEVICE);
    if (strcmp(want, "host") == 0)
        return;
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
        int forced = strcmp(want, backends[i]->name) == 0;
        int automatic = strcmp(want, "auto") == 0 && backends[i]->present();
        if ((forced || automatic) && try_backend(backends[i], forced))
            return;
    }
}

const braid_device_ops_t *braid_device(void)
{
    pthread_once(&dev_once, choose);
    return dev_ops;
}

int braid_device_count(void)
{
    pthread_once(&dev_once, choose);
    return dev_count;
}

void braid_device_map_host(int ordinal, void *p, size_t bytes)
{
    const braid_device_ops_t *ops = braid_device();
    if (ops == &braid_device_host)
        return;
    /* the mapping is portable (every context sees it): a rank numbered past the devices
     * (ncclCommInitAll of more ranks than GPUs) maps it with device 0 */
    if (ordinal < 0 || ordinal >= dev_count)
        ordinal = 0;
    if (ops->bind(ordinal) < 0 || ops->host_register(p, bytes) < 0)
        BRAID_INFO(BRAID_SUB_SHM, "%s: %zu bytes at %p stay unmapped for the device (%s): "
                   "device slices copy them through bounce buffers", ops->name, bytes, p,
                   braid_err_last());
}

void braid_device_unmap_host(void *p)
{
    const braid_device_ops_t *ops = braid_device();
    if (ops != &braid_device_host && !braid_device_stuck())
        ops->host_unregister(p);
}

static _Atomic int dev_stuck;

void braid_device_set_stuck(void)
{
    if (atomic_exchange(&dev_stuck, 1) == 0)
        BRAID_WARN("%s: work braid queued on a device never finished: from now on braid "
                   "frees no device memory and unmaps no host memory for the device in this "
                   "process (the driver would wait for that work first)", braid_device()->name);
}

int braid_device_stuck(void)
{
    return atomic_load(&dev_stuck);
}

int braid_device_current(void)
{
    int ordinal = -1;
    const braid_device_ops_t *ops = braid_device();
    if (ops->current(&ordinal) < 0 || ordinal < 0 || ordinal >= dev_count)
        ordinal = 0;
    return ordinal;
}

/*
 * Polls: a few queries back to back (a short kernel ends within microseconds), then
 * yielding, then sleeping 10 us doubling up to 250 us (many ranks may share 2 cores); the
 * clock is read every 16 queries and w->check asked every WAIT_CHECK_S.
 */
#define WAIT_SPINS 64
#define WAIT_YIELDS 1024
#define WAIT_CHECK_S 0.01

braid_status_t braid_device_event_wait(void *ev, const braid_device_wait_t *w)
{
    const braid_device_ops_t *ops = braid_device();
    double start = 0, next = 0;
    long sleep_ns = 10000;
    for (unsigned i = 0;; i++) {
        braid_status_t st = ops->event_query(ev);
        if (st != BRAID_INPROGRESS)
            return st;
        if (i >= WAIT_YIELDS) {
            struct timespec ts = { 0, sleep_ns };
            nanosleep(&ts, NULL);
            sleep_ns = sleep_ns < 125000 ? 2 * sleep_ns : 250000;
        } else if (i >= WAIT_SPINS) {
            sched_yield();
        }
        if ((i & 15) != 15)
            continue;
        double now = braid_now();
        if (start == 0) {
            start = now;
            next = now + WAIT_CHECK_S;
        } else if (now >= next) {
            next = now + WAIT_CHECK_S;
            st = w->check(w->arg, now - start);
            if (st < 0)
                return st;
        }
    }
}
