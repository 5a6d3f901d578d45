/*
 * What every kind of external NCCL plugin (net, tuner) shares in NCCL's binary interface:
 * the logger NCCL hands a plugin at init, its log levels and subsystem bits. ABI facts,
 * values as NCCL's releases have them; braid's own subsystem bits (base/log.h) are the same.
 *
 * Included by braid's plugin loaders and by the test suite's plugins; needs only
 * include/nccl.h.
 */
#ifndef BRAID_CORE_NCCL_EXT_H
#define BRAID_CORE_NCCL_EXT_H

/* Log levels and subsystem bits a plugin passes to the logger NCCL gives it at init. */
typedef enum {
    NCCL_LOG_NONE = 0,
    NCCL_LOG_VERSION = 1,
    NCCL_LOG_WARN = 2,
    NCCL_LOG_INFO = 3,
    NCCL_LOG_ABORT = 4,
    NCCL_LOG_TRACE = 5,
} ncclDebugLogLevel;

typedef enum {
    NCCL_INIT = 0x1,
    NCCL_COLL = 0x2,
    NCCL_P2P = 0x4,
    NCCL_SHM = 0x8,
    NCCL_NET = 0x10,
    NCCL_GRAPH = 0x20,
    NCCL_TUNING = 0x40,
    NCCL_ENV = 0x80,
    NCCL_ALLOC = 0x100,
    NCCL_CALL = 0x200,
    NCCL_PROXY = 0x400,
    NCCL_NVLS = 0x800,
    NCCL_BOOTSTRAP = 0x1000,
    NCCL_REG = 0x2000,
    NCCL_ALL = ~0,
} ncclDebugLogSubSys;

/* printf-like; `flags` is a mask of ncclDebugLogSubSys. */
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags,
                                  const char *file, int line, const char *fmt, ...);

#endif
