/*
 * braid internal status codes and the error-reporting helpers every module uses.
 *
 * One status type for the whole library; src/api/ maps it to ncclResult_t in one place.
 * The function that first sees an error records it once with braid_err() (which logs a
 * WARN line and keeps the text for ncclGetLastError); callers only propagate the status.
 */
#ifndef BRAID_CORE_STATUS_H
#define BRAID_CORE_STATUS_H

typedef enum {
    BRAID_OK = 0,
    BRAID_INPROGRESS = 1,        /* not done yet: call again (slots full/empty, async init) */
    BRAID_ERR_INVALID = -1,      /* bad argument                  -> ncclInvalidArgument */
    BRAID_ERR_USAGE = -2,        /* API misuse, unsupported usage -> ncclInvalidUsage */
    BRAID_ERR_UNSUPPORTED = -3,  /* feature not offered           -> ncclInvalidUsage */
    BRAID_ERR_SYSTEM = -4,       /* syscall / OS failure          -> ncclSystemError */
    BRAID_ERR_NOMEM = -5,        /* allocation failed             -> ncclSystemError */
    BRAID_ERR_INTERNAL = -6,     /* a braid bug                   -> ncclInternalError */
    BRAID_ERR_REMOTE = -7,       /* a peer died, aborted or sent something wrong -> ncclRemoteError */
    BRAID_ERR_TIMEOUT = -8,      /* peers did not arrive in time  -> ncclRemoteError */
    BRAID_ERR_ABORTED = -9,      /* this communicator was aborted/revoked locally -> ncclInvalidUsage */
    BRAID_ERR_DEVICE = -10,      /* GPU runtime failure           -> ncclUnhandledCudaError */
} braid_status_t;

#define BRAID_CHECK(_call)                                                                 \
    do {                                                                                   \
        braid_status_t _st = (_call);                                                      \
        if (_st < 0)                                                                       \
            return _st;                                                                    \
    } while (0)

#define BRAID_CHECK_GOTO(_st, _call, _label)                                               \
    do {                                                                                   \
        (_st) = (_call);                                                                   \
        if ((_st) < 0)                                                                     \
            goto _label;                                                                   \
    } while (0)

/*
 * Record an error: formats the message, logs it at WARN level (with the file and line at
 * TRACE) and stores it as the process's last error (ncclGetLastError). Returns `st` so that
 * a caller can write `return braid_err(BRAID_ERR_INVALID, "count %zu overflows", n);`.
 */
braid_status_t braid_err_at(braid_status_t st, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define braid_err(_st, ...) braid_err_at((_st), __FILE__, __LINE__, __VA_ARGS__)

/* The last error text of the process ("" when there is none). Never NULL. */
const char *braid_err_last(void);

/* Human-readable name of a status ("invalid argument", ...). */
const char *braid_status_str(braid_status_t st);

#endif
