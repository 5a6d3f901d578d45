/*
 * The driver lock of strict mode (BRAID_EMU_STRICT=1): a model of the real driver's
 * internal lock, which makes some calls of different threads wait for each other; and the
 * devices' time slices between processes.
 *
 *   shared     a synchronous copy or memset (cuMemcpy, cuMemcpyDtoH, cuMemsetD8, ...), and
 *              an async copy whose host side is pageable: while they wait for their stream
 *   exclusive  cuMemAlloc, cuMemFree (which waits for the device), cuMemHostAlloc,
 *              cuMemFreeHost, cuMemHostRegister, cuMemHostUnregister, cuIpcOpenMemHandle,
 *              cuIpcCloseMemHandle, cuModuleLoadData, a function's lazy load
 *
 * So a thread in a pageable cuMemcpyDtoHAsync keeps another thread's cuMemAlloc waiting
 * until its stream gets to the copy; if that stream waits for the allocating thread,
 * neither moves: the deadlock XLA met on GPUs, which free-running calls would hide here.
 * Nothing else takes it: stream, event and context calls, stream memory operations,
 * async copies between device and pinned memory, launches of loaded functions.
 *
 * Shared holders never wait for each other, nor for an exclusive request that waits
 * (reader preference): two threads' pageable copies do not deadlock on a real driver.
 * A call that has waited longer than BRAID_EMU_LOCK_WARN_MS (default 2000) says so on
 * stderr, once, naming the holders (a list of the holders' own records, on their stacks),
 * and goes on waiting, as a real driver would hang.
 *
 * Time slices, also strict mode's: a GPU runs the kernels of different processes one at a
 * time, so a kernel that waits for another process's work (a spin on a flag) deadlocks
 * where the emulator's threads would let both run. Each kernel runs holding an exclusive
 * flock(2) on its device's lock file, ${TMPDIR:-/tmp}/braid-emu-<uid>-gpu<ordinal>.lock,
 * opened once per process at cuInit: streams of one process share the open file, so their
 * kernels still overlap (a count keeps the lock while any runs); other processes wait;
 * a killed process lets go. Copies and stream waits are not sliced.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "emu/emu_int.h"

#define EMU_LOCK_MSG_MAX 1024

/* A device's time slices: this process's side. */
typedef struct emu_slice {
    pthread_mutex_t mu;             /* running, and the flock that goes with it */
    int fd;                         /* the device's lock file; -1: not sliced */
    int running;                    /* this process's kernels running on the device */
} emu_slice_t;

static struct {
    emu_slice_t *slices;            /* one per device */
    pthread_mutex_t mu;             /* everything below */
    pthread_cond_t cv;              /* the lock was released; on CLOCK_MONOTONIC */
    int on;                         /* strict mode */
    unsigned int warn_ms;
    int shared;                     /* shared holders */
    int exclusive;                  /* 1 while an exclusive holder has it */
    emu_lock_holder_t *holders;
} lk = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* Open device dev's lock file: its fd, or -1 (the device is then not sliced). */
static int slice_open(CUdevice dev)
{
    char path[PATH_MAX];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof(path), "%s/braid-emu-%u-gpu%d.lock",
             tmp != NULL && *tmp ? tmp : "/tmp", (unsigned int)getuid(), (int)dev);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        emu_warn("strict: cannot open %s (%s): kernels of other processes on device %d may "
                 "overlap with ours", path, strerror(errno), (int)dev);
    return fd;
}

CUresult emu_lock_init(unsigned int warn_ms, int ndev)
{
    pthread_condattr_t attr;
    lk.slices = calloc((size_t)ndev, sizeof(*lk.slices));
    if (lk.slices == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (int d = 0; d < ndev; d++) {
        pthread_mutex_init(&lk.slices[d].mu, NULL);
        lk.slices[d].fd = slice_open(d);
    }
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&lk.cv, &attr);
    pthread_condattr_destroy(&attr);
    lk.warn_ms = warn_ms;
    lk.on = 1;
    return CUDA_SUCCESS;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

/* "cuMemcpyDtoH on thread 12 (for 2.1 s), which waits for its stream; ..." */
static void holders_describe(char *buf, size_t n)
{
    static const char *const waits[] = {
        [EMU_WAITS_NOTHING] = "", [EMU_WAITS_STREAM] = ", which waits for its stream",
        [EMU_WAITS_DEVICE] = ", which waits for the device",
    };
    size_t len = 0;
    buf[0] = '\0';
    for (const emu_lock_holder_t *h = lk.holders; h != NULL && len < n; h = h->next)
        len += (size_t)snprintf(buf + len, n - len, "%s%s on thread %d (for %.1f s)%s",
                                h == lk.holders ? "" : "; ", h->call, (int)h->tid,
                                seconds_since(&h->since), waits[h->waits]);
}

/* Caller holds lk.mu. */
static void lock_warn(const emu_lock_holder_t *h, const struct timespec *start)
{
    static const char *const what[] = {
        [EMU_WAITS_NOTHING] = "that call", [EMU_WAITS_STREAM] = "that stream",
        [EMU_WAITS_DEVICE] = "the device",
    };
    char holders[EMU_LOCK_MSG_MAX];
    holders_describe(holders, sizeof(holders));
    int one = lk.holders != NULL && lk.holders->next == NULL;
    emu_warn("strict: %s on thread %d has waited %.1f s for the driver lock, held by %s: a "
             "real driver serialises these calls; they deadlock if %s waits for this thread",
             h->call, (int)h->tid, seconds_since(start), holders,
             one ? what[lk.holders->waits] : "what they wait for");
}

static int lock_busy(emu_lock_mode_t mode)
{
    return lk.exclusive || (mode == EMU_LOCK_EXCLUSIVE && lk.shared > 0);
}

/* Wait until h may take the lock (caller holds lk.mu); past warn_ms, say so, once. */
static void lock_wait(const emu_lock_holder_t *h)
{
    struct timespec start, deadline;
    int warned = 0;
    clock_gettime(CLOCK_MONOTONIC, &start);
    deadline.tv_sec = start.tv_sec + lk.warn_ms / 1000;
    deadline.tv_nsec = start.tv_nsec + (long)(lk.warn_ms % 1000) * 1000000;
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000;
    }
    while (lock_busy(h->mode)) {
        if (warned) {
            pthread_cond_wait(&lk.cv, &lk.mu);
        } else if (pthread_cond_timedwait(&lk.cv, &lk.mu, &deadline) == ETIMEDOUT &&
                   lock_busy(h->mode)) {
            lock_warn(h, &start);
            warned = 1;
        }
    }
}

void emu_lock(emu_lock_holder_t *h, emu_lock_mode_t mode, const char *call, emu_waits_t waits)
{
    *h = (emu_lock_holder_t){ .call = call, .waits = waits, .mode = mode };
    if (!lk.on)
        return;
    h->tid = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&lk.mu);
    lock_wait(h);
    if (mode == EMU_LOCK_EXCLUSIVE)
        lk.exclusive = 1;
    else
        lk.shared++;
    clock_gettime(CLOCK_MONOTONIC, &h->since);
    h->next = lk.holders;
    if (lk.holders != NULL)
        lk.holders->prev = h;
    lk.holders = h;
    h->held = 1;
    pthread_mutex_unlock(&lk.mu);
}

void emu_unlock(emu_lock_holder_t *h)
{
    if (!h->held)
        return;
    pthread_mutex_lock(&lk.mu);
    if (h->prev != NULL)
        h->prev->next = h->next;
    else
        lk.holders = h->next;
    if (h->next != NULL)
        h->next->prev = h->prev;
    if (h->mode == EMU_LOCK_EXCLUSIVE)
        lk.exclusive = 0;
    else
        lk.shared--;
    pthread_cond_broadcast(&lk.cv);
    pthread_mutex_unlock(&lk.mu);
    h->held = 0;
}

/* ---- time slices ------------------------------------------------------------------------- */

/* flock(fd, op), again if a signal interrupts it; a failure is said, and ignored. */
static void slice_flock(int fd, int op)
{
    while (flock(fd, op) != 0) {
        if (errno != EINTR) {
            emu_warn("strict: flock of a device's lock file failed: %s", strerror(errno));
            return;
        }
    }
}

void emu_slice_enter(CUdevice dev)
{
    if (!lk.on || lk.slices[dev].fd < 0)
        return;
    emu_slice_t *sl = &lk.slices[dev];
    pthread_mutex_lock(&sl->mu);        /* our other kernels wait here while we wait */
    if (sl->running++ == 0)
        slice_flock(sl->fd, LOCK_EX);
    pthread_mutex_unlock(&sl->mu);
}

void emu_slice_exit(CUdevice dev)
{
    if (!lk.on || lk.slices[dev].fd < 0)
        return;
    emu_slice_t *sl = &lk.slices[dev];
    pthread_mutex_lock(&sl->mu);
    if (--sl->running == 0)
        slice_flock(sl->fd, LOCK_UN);
    pthread_mutex_unlock(&sl->mu);
}
