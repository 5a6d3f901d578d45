/*
 * Cross-memory attach: the process key, the Yama opt-in, and reads. See cma.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "transports/shm/cma.h"

#ifndef PR_SET_PTRACER
#define PR_SET_PTRACER 0x59616d61
#endif
#ifndef PR_SET_PTRACER_ANY
#define PR_SET_PTRACER_ANY ((unsigned long)-1)
#endif

static pthread_once_t cma_key_once = PTHREAD_ONCE_INIT, cma_allow_once = PTHREAD_ONCE_INIT;
static uint64_t cma_key;

static void cma_key_init(void)
{
    uint64_t key = 0;
    if (getrandom(&key, sizeof(key), GRND_NONBLOCK) != (ssize_t)sizeof(key)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        key = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^
              (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)&cma_key;
    }
    cma_key = key | 1;   /* never 0: a zeroed record names no process */
}

static void cma_allow_init(void)
{
    /* EINVAL: no Yama in this kernel, nothing to allow */
    if (prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0 && errno != EINVAL)
        BRAID_INFO(BRAID_SUB_SHM | BRAID_SUB_INIT, "shm: prctl(PR_SET_PTRACER) failed: %s; "
                   "peers may not be able to read this process's buffers", strerror(errno));
}

uint64_t braid_cma_proc_key(void)
{
    pthread_once(&cma_key_once, cma_key_init);
    return cma_key;
}

void braid_cma_allow_peers(void)
{
    pthread_once(&cma_allow_once, cma_allow_init);
}

int braid_cma_read(int pid, void *dst, uint64_t remote, size_t len)
{
    char *to = dst;
    while (len > 0) {
        struct iovec l = { to, len }, r = { (void *)(uintptr_t)remote, len };
        ssize_t got = process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return errno;
        if (got == 0)
            return EFAULT;      /* nothing readable at `remote` */
        to += got;
        remote += (uint64_t)got;
        len -= (size_t)got;
    }
    return 0;
}
