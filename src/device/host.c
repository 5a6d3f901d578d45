/*
 * Host-memory checks: is a GPU runtime in the process, and can the CPU read a buffer?
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/param.h"
#include "device/device.h"

/* Runtimes whose device pointers live in our address space but fault on CPU access. */
static const char *const gpu_runtimes[] = {
    "libcuda.so.1", "libcudart.so", "libamdhip64.so", "libamdhip64.so.5", "libamdhip64.so.6",
};

static int gpu_runtime_loaded(void)
{
    for (size_t i = 0; i < sizeof(gpu_runtimes) / sizeof(gpu_runtimes[0]); i++) {
        void *h = dlopen(gpu_runtimes[i], RTLD_LAZY | RTLD_NOLOAD);
        if (h != NULL) {
            dlclose(h);
            return 1;
        }
    }
    return 0;
}

int braid_device_check_wanted(void)
{
    const char *v = braid_param_str(BRAID_P_HOST_PTR_CHECK);
    if (strcmp(v, "1") == 0)
        return 1;
    if (strcmp(v, "0") == 0)
        return 0;
    return gpu_runtime_loaded();
}

braid_status_t braid_device_check_host(const void *p, const char *what, const char *arg)
{
    char byte;
    struct iovec local = { &byte, 1 }, remote = { (void *)p, 1 };
    if (p == NULL || process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 1)
        return BRAID_OK;
    if (errno != EFAULT)
        return BRAID_OK;   /* cannot tell (e.g. the syscall is forbidden): let it through */
    return braid_err(BRAID_ERR_UNSUPPORTED, "%s: %s %p is not host memory the CPU can read "
                     "(GPU device memory?): this braid release runs collectives on host "
                     "memory only", what, arg, p);
}
