/*
 * Logging, NCCL-compatible: NCCL_DEBUG=VERSION|WARN|INFO|ABORT|TRACE (unset: nothing is
 * printed), NCCL_DEBUG_SUBSYS (comma list, ^ to exclude, ALL; default INIT,BOOTSTRAP,ENV),
 * NCCL_DEBUG_FILE (%h host, %p pid; default stdout). Lines look like
 *     host:pid:tid [rank] NCCL INFO message
 * so that tools grepping NCCL logs keep working. The rank is the calling thread's current
 * rank (braid_log_set_rank), or -1 outside a communicator.
 */
#ifndef BRAID_CORE_LOG_H
#define BRAID_CORE_LOG_H

#include <stdint.h>

#include "base/status.h"

/* The braid release; the build defines it (configure's PACKAGE_VERSION). */
#ifndef BRAID_VERSION_STRING
#ifdef PACKAGE_VERSION
#define BRAID_VERSION_STRING PACKAGE_VERSION
#else
#define BRAID_VERSION_STRING "0.1.0"
#endif
#endif
/* The NCCL release whose API and ABI braid offers. */
#define BRAID_NCCL_VERSION_STRING "2.28.9"

typedef enum {
    BRAID_LOG_NONE = 0,
    BRAID_LOG_VERSION = 1,
    BRAID_LOG_WARN = 2,
    BRAID_LOG_INFO = 3,
    BRAID_LOG_ABORT = 4,
    BRAID_LOG_TRACE = 5,
} braid_log_level_t;

/* Subsystems, NCCL's names and bits. */
typedef enum {
    BRAID_SUB_INIT = 0x1,
    BRAID_SUB_COLL = 0x2,
    BRAID_SUB_P2P = 0x4,
    BRAID_SUB_SHM = 0x8,
    BRAID_SUB_NET = 0x10,
    BRAID_SUB_GRAPH = 0x20,
    BRAID_SUB_TUNING = 0x40,
    BRAID_SUB_ENV = 0x80,
    BRAID_SUB_ALLOC = 0x100,
    BRAID_SUB_CALL = 0x200,
    BRAID_SUB_PROXY = 0x400,
    BRAID_SUB_NVLS = 0x800,
    BRAID_SUB_BOOTSTRAP = 0x1000,
    BRAID_SUB_REG = 0x2000,
    BRAID_SUB_PROFILE = 0x4000,
    BRAID_SUB_RAS = 0x8000,
    BRAID_SUB_ALL = ~0,
} braid_log_sub_t;

/*
 * Current level and subsystem mask: set at library load and on first use from the
 * parameters, changed only by braid_log_reset. The macros below read them without a lock.
 */
extern braid_log_level_t braid_log_level_cur;
extern uint64_t braid_log_subsys_cur;

void braid_log_init(void);   /* idempotent; called by braid_log and by init paths */
/* Re-read the environment (braid_param_reload) and apply NCCL_DEBUG* again: reopens
 * NCCL_DEBUG_FILE (ncclResetDebugInit, tests). */
void braid_log_reset(void);
/* Write one line when `level` is enabled (WARN: whatever the subsystem; INFO and TRACE: only
 * for a subsystem in the mask). WARN lines carry file:line when the level is TRACE. */
void braid_log(braid_log_level_t level, uint64_t subsys, const char *file, int line,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Print the "NCCL version ..." line once per process when NCCL_DEBUG >= VERSION. */
void braid_log_version_once(void);
/* The descriptor WARN lines go to, or -1 while they are not shown: for a writer that cannot
 * take the logger's lock (a signal handler), which writes whole lines there itself. */
int braid_log_warn_fd(void);
/* Per-thread rank shown in the line prefix (-1: none). */
void braid_log_set_rank(int rank);

/* NCCL_DEBUG text -> level, case-insensitive ("" -> NONE). BRAID_ERR_INVALID if unknown. */
braid_status_t braid_log_level_parse(const char *text, braid_log_level_t *level_p);
/*
 * NCCL_DEBUG_SUBSYS text -> mask: comma-separated names (case-insensitive, ALL for every
 * one); a leading ^ inverts the whole list (everything but those). Unknown names are
 * skipped, as NCCL does, and make it return BRAID_ERR_INVALID; *mask_p is set either way.
 */
braid_status_t braid_log_subsys_parse(const char *text, uint64_t *mask_p);

#define BRAID_LOG_ENABLED(_lvl, _sub)                                                      \
    (braid_log_level_cur >= (_lvl) && (braid_log_subsys_cur & (uint64_t)(_sub)))

#define BRAID_WARN(...) braid_log(BRAID_LOG_WARN, BRAID_SUB_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define BRAID_INFO(_sub, ...)                                                              \
    do {                                                                                   \
        if (BRAID_LOG_ENABLED(BRAID_LOG_INFO, _sub))                                       \
            braid_log(BRAID_LOG_INFO, (_sub), __FILE__, __LINE__, __VA_ARGS__);            \
    } while (0)
#define BRAID_TRACE(_sub, ...)                                                             \
    do {                                                                                   \
        if (BRAID_LOG_ENABLED(BRAID_LOG_TRACE, _sub))                                      \
            braid_log(BRAID_LOG_TRACE, (_sub), __FILE__, __LINE__, __VA_ARGS__);           \
    } while (0)

#endif
