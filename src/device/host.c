/*
 * The host backend (no GPU runtime): every pointer is host memory, and nothing a GPU
 * offers is there. Also the check that host-buffer calls make when a GPU runtime is loaded
 * that braid has no backend for: can the CPU read the buffer?
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
    "libamdhip64.so.7",
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
                     "(GPU device memory?), and braid has no GPU backend in use (%s): see "
                     "BRAID_DEVICE and braid-info", what, arg, p, braid_device()->name);
}

static braid_status_t host_none(const char *what)
{
    return braid_err(BRAID_ERR_UNSUPPORTED, "%s: no GPU backend is in use (no CUDA driver or "
                     "HIP runtime with a device was found, or BRAID_DEVICE=host)", what);
}

static int host_present(void)
{
    return 1;
}

static braid_status_t host_init(int *ndev_p)
{
    *ndev_p = 0;
    return BRAID_OK;
}

static braid_status_t host_ptr_info(const void *p, braid_ptr_info_t *info_p)
{
    (void)p;
    info_p->kind = BRAID_MEM_HOST;
    info_p->ordinal = -1;
    info_p->dptr = NULL;
    return BRAID_OK;
}

static braid_status_t host_bind(int ordinal)
{
    (void)ordinal;
    return host_none("binding a device");
}

static braid_status_t host_describe(int ordinal, char *buf, size_t len)
{
    (void)ordinal, (void)buf, (void)len;
    return host_none("describing a device");
}

static braid_status_t host_alloc(size_t bytes, void **p_p)
{
    (void)bytes, (void)p_p;
    return host_none("allocating device memory");
}

static braid_status_t host_free(void *p)
{
    (void)p;
    return host_none("freeing device memory");
}

static braid_status_t host_register(void *p, size_t bytes)
{
    (void)p, (void)bytes;
    return host_none("mapping host memory for a device");
}

static braid_status_t host_copy(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)dst, (void)src, (void)bytes, (void)stream;
    return host_none("a device copy");
}

static braid_status_t host_memset(void *dst, int byte, size_t bytes, void *stream)
{
    (void)dst, (void)byte, (void)bytes, (void)stream;
    return host_none("a device memset");
}

static braid_status_t host_handle_new(void **h_p)
{
    (void)h_p;
    return host_none("creating a stream or event");
}

static braid_status_t host_handle(void *h)
{
    (void)h;
    return host_none("a stream or event");
}

static braid_status_t host_capturing(void *stream, int *yes_p)
{
    (void)stream;
    *yes_p = 0;
    return BRAID_OK;
}

static braid_status_t host_pair(void *a, void *b)
{
    (void)a, (void)b;
    return host_none("a stream operation");
}

static braid_status_t host_word(void *stream, uint32_t *word, uint32_t value)
{
    (void)stream, (void)word, (void)value;
    return host_none("a stream memory operation");
}

static braid_status_t host_mem_ops(void *stream, const braid_mem_op_t *ops, int n)
{
    (void)stream, (void)ops, (void)n;
    return host_none("a stream memory operation");
}

static braid_status_t host_peer_access(int dev, int peer, int *yes_p)
{
    (void)dev, (void)peer;
    *yes_p = 0;
    return BRAID_OK;
}

static braid_status_t host_peer_enable(int peer)
{
    (void)peer;
    return host_none("peer access");
}

/* No device: no context either. */
static braid_status_t host_ctx_get(void **ctx_p)
{
    *ctx_p = NULL;
    return BRAID_OK;
}

static braid_status_t host_ctx_set(void *ctx)
{
    (void)ctx;
    return BRAID_OK;
}

static braid_status_t host_ipc_get(void *p, braid_ipc_handle_t *h_p)
{
    (void)p, (void)h_p;
    return host_none("an IPC handle");
}

static braid_status_t host_ipc_open(const braid_ipc_handle_t *h, void **p_p)
{
    (void)h, (void)p_p;
    return host_none("opening an IPC handle");
}

static braid_status_t host_current(int *ordinal_p)
{
    *ordinal_p = -1;
    return BRAID_OK;
}

static braid_status_t host_module_load(const void *image, size_t size, void **mod_p)
{
    (void)image, (void)size, (void)mod_p;
    return host_none("loading kernels");
}

static braid_status_t host_module_function(void *mod, const char *name, void **fn_p)
{
    (void)mod, (void)name, (void)fn_p;
    return host_none("finding a kernel");
}

static braid_status_t host_launch(void *fn, unsigned grid, unsigned block, void *arg,
                                  size_t arg_bytes, void *stream)
{
    (void)fn, (void)grid, (void)block, (void)arg, (void)arg_bytes, (void)stream;
    return host_none("launching a kernel");
}

const braid_device_ops_t braid_device_host = {
    .name = "host",
    .present = host_present,
    .init = host_init,
    .ptr_info = host_ptr_info,
    .bind = host_bind,
    .current = host_current,
    .ctx_get = host_ctx_get,
    .ctx_set = host_ctx_set,
    .describe = host_describe,
    .mem_alloc = host_alloc,
    .mem_free = host_free,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .host_register = host_register,
    .host_unregister = host_free,
    .copy_async = host_copy,
    .memset_async = host_memset,
    .stream_create = host_handle_new,
    .stream_destroy = host_handle,
    .stream_sync = host_handle,
    .stream_capturing = host_capturing,
    .event_create = host_handle_new,
    .event_destroy = host_handle,
    .event_record = host_pair,
    .event_query = host_handle,
    .stream_wait_event = host_pair,
    .stream_wait_word = host_word,
    .stream_write_word = host_word,
    .stream_mem_ops = host_mem_ops,
    .peer_access = host_peer_access,
    .peer_enable = host_peer_enable,
    .ipc_get = host_ipc_get,
    .ipc_open = host_ipc_open,
    .ipc_close = host_handle,
    .module_load = host_module_load,
    .module_function = host_module_function,
    .launch = host_launch,
    .compile = NULL,
};
