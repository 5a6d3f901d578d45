/* Shared by the loaders of external NCCL plugins: see plugin.h. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/plugin.h"

int braid_plugin_named(const char *value)
{
    return value != NULL && value[0] != '\0' && strcasecmp(value, "none") != 0;
}

int braid_plugin_path(const char *value, const char *kind, char *path, size_t len)
{
    size_t n = strlen(value);
    int w;
    if (strchr(value, '/') != NULL || (n >= 3 && strcmp(value + n - 3, ".so") == 0))
        w = snprintf(path, len, "%s", value);
    else
        w = snprintf(path, len, "libnccl-%s-%s.so", kind, value);
    return w >= 0 && (size_t)w < len ? 0 : -1;
}

int braid_plugin_old_version(void *dl, const char *prefix, int newest)
{
    char sym[64];
    for (int v = newest; v >= 1; v--) {
        snprintf(sym, sizeof(sym), "%s%d", prefix, v);
        if (dlsym(dl, sym) != NULL)
            return v;
    }
    return 0;
}

const char *braid_plugin_result_str(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess:
        return "success (ncclSuccess)";
    case ncclUnhandledCudaError:
        return "a CUDA call failed (ncclUnhandledCudaError)";
    case ncclSystemError:
        return "a system call failed (ncclSystemError)";
    case ncclInternalError:
        return "an internal error of the plugin (ncclInternalError)";
    case ncclInvalidArgument:
        return "invalid argument (ncclInvalidArgument)";
    case ncclInvalidUsage:
        return "invalid usage (ncclInvalidUsage)";
    case ncclRemoteError:
        return "the remote side failed or went away (ncclRemoteError)";
    case ncclInProgress:
        return "in progress (ncclInProgress), which a plugin must not return";
    default:
        return "an unknown ncclResult_t";
    }
}

braid_status_t braid_plugin_status(ncclResult_t r)
{
    switch (r) {
    case ncclUnhandledCudaError:
        return BRAID_ERR_DEVICE;
    case ncclSystemError:
        return BRAID_ERR_SYSTEM;
    case ncclInvalidArgument:
        return BRAID_ERR_INVALID;
    case ncclInvalidUsage:
        return BRAID_ERR_USAGE;
    case ncclRemoteError:
        return BRAID_ERR_REMOTE;
    default:
        return BRAID_ERR_INTERNAL;
    }
}

static braid_log_level_t plugin_level(ncclDebugLogLevel level)
{
    switch (level) {
    case NCCL_LOG_VERSION:
        return BRAID_LOG_VERSION;
    case NCCL_LOG_WARN:
        return BRAID_LOG_WARN;
    case NCCL_LOG_INFO:
        return BRAID_LOG_INFO;
    case NCCL_LOG_ABORT:
        return BRAID_LOG_ABORT;
    case NCCL_LOG_TRACE:
        return BRAID_LOG_TRACE;
    default:
        return BRAID_LOG_NONE;
    }
}

void braid_plugin_vlog(ncclDebugLogLevel level, unsigned long flags, uint64_t dflt,
                       const char *file, int line, const char *who, const char *fmt, va_list ap)
{
    braid_log_level_t lvl = plugin_level(level);
    uint64_t sub = flags != 0 ? (uint64_t)flags : dflt;
    char msg[1024];
    if (lvl == BRAID_LOG_NONE || (lvl != BRAID_LOG_WARN && !BRAID_LOG_ENABLED(lvl, sub)))
        return;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    braid_log(lvl, sub, file, line, "%s: %s", who, msg);
}
