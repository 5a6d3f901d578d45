/*
 * What braid's loaders of external NCCL plugins share (the net plugin,
 * transports/net/plugin/plugin.c, and the tuner plugin, algorithms/tune_plugin.c): the
 * library a setting names, what a plugin's ncclResult_t means, and the logger a plugin gets.
 */
#ifndef BRAID_CORE_PLUGIN_H
#define BRAID_CORE_PLUGIN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "base/nccl_ext.h"
#include "base/status.h"
#include "nccl.h"

/* A setting names a plugin unless it is empty or "none" (any case). */
int braid_plugin_named(const char *value);

/* NCCL's rule for the library: a value with a '/' or ending in ".so" is used as given, any
 * other NAME means libnccl-KIND-NAME.so (found through the loader's search path). 0, or -1
 * when it does not fit in `len`. */
int braid_plugin_path(const char *value, const char *kind, char *path, size_t len);

/* The newest of the tables PREFIX1 .. PREFIX`newest` (ncclNetPlugin_v7 ..) that the library
 * `dl` exports, for a message on a table too old (0: none). */
int braid_plugin_old_version(void *dl, const char *prefix, int newest);

/* What a plugin's result means, for messages ("invalid usage (ncclInvalidUsage)"), and the
 * braid status a failed call becomes. */
const char *braid_plugin_result_str(ncclResult_t r);
braid_status_t braid_plugin_status(ncclResult_t r);

/* A plugin's log line into braid's log as "WHO: message" (WHO: "net plugin NAME"); `flags`
 * are NCCL's subsystem bits, which are braid's, and `dflt` stands in when they are 0. */
__attribute__((format(printf, 7, 0)))
void braid_plugin_vlog(ncclDebugLogLevel level, unsigned long flags, uint64_t dflt,
                       const char *file, int line, const char *who, const char *fmt, va_list ap);

#endif
