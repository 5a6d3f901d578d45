/*
 * Error recording: braid_err logs a WARN line and keeps the text as the process's last error
 * (ncclGetLastError). The text lives in one process-wide buffer under err_mu; readers get a
 * copy in a buffer of their own thread, so a reader never sees a string that another thread
 * is halfway through writing, and the pointer it got stays stable until its next call.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/status.h"

#define ERR_MSG_MAX 1024

static pthread_mutex_t err_mu = PTHREAD_MUTEX_INITIALIZER;
static char err_last[ERR_MSG_MAX];
static _Thread_local char err_last_copy[ERR_MSG_MAX];

braid_status_t braid_err_at(braid_status_t st, const char *file, int line, const char *fmt, ...)
{
    char msg[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&err_mu);
    memcpy(err_last, msg, sizeof(err_last));
    pthread_mutex_unlock(&err_mu);
    braid_log(BRAID_LOG_WARN, (uint64_t)BRAID_SUB_ALL, file, line, "%s", msg);
    return st;
}

const char *braid_err_last(void)
{
    pthread_mutex_lock(&err_mu);
    memcpy(err_last_copy, err_last, sizeof(err_last_copy));
    pthread_mutex_unlock(&err_mu);
    return err_last_copy;
}

const char *braid_status_str(braid_status_t st)
{
    switch (st) {
    case BRAID_OK:
        return "success";
    case BRAID_INPROGRESS:
        return "in progress";
    case BRAID_ERR_INVALID:
        return "invalid argument";
    case BRAID_ERR_USAGE:
        return "invalid usage";
    case BRAID_ERR_UNSUPPORTED:
        return "unsupported";
    case BRAID_ERR_SYSTEM:
        return "system error";
    case BRAID_ERR_NOMEM:
        return "out of memory";
    case BRAID_ERR_INTERNAL:
        return "internal error";
    case BRAID_ERR_REMOTE:
        return "remote error";
    case BRAID_ERR_TIMEOUT:
        return "timeout";
    case BRAID_ERR_ABORTED:
        return "aborted";
    case BRAID_ERR_DEVICE:
        return "device error";
    }
    return "unknown status";
}
