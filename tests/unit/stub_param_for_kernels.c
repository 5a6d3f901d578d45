/*
 * Temporary stand-ins so that test_kernels links before src/core/param.c and src/core/log.c
 * exist. Drop this file (and its mention in the build) once they land.
 */
#include <stdarg.h>
#include <stdio.h>

#include "core/log.h"
#include "core/param.h"

braid_log_level_t braid_log_level_cur = BRAID_LOG_WARN;
uint64_t braid_log_subsys_cur = (uint64_t)BRAID_SUB_ALL;

const char *braid_param_str(braid_param_id_t id)
{
    (void)id;
    return "auto";
}

void braid_log(braid_log_level_t level, uint64_t subsys, const char *file, int line,
               const char *fmt, ...)
{
    va_list ap;

    (void)level, (void)subsys, (void)file, (void)line;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
