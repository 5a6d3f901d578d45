/* ncclConfig_t handling (config.c). */
#ifndef BRAID_API_CONFIG_H
#define BRAID_API_CONFIG_H

#include "nccl.h"
#include "core/comm.h"

/*
 * Read a user config (may be NULL) into braid's options. Fields the caller leaves UNDEF (or
 * that its older struct lacks) come from `inherit` (split/shrink: the parent's), or from
 * the defaults when inherit is NULL. Bad magic, size or values: BRAID_ERR_INVALID.
 */
braid_status_t braid_config_read(const ncclConfig_t *user, const braid_comm_config_t *inherit,
                                 braid_comm_config_t *out);

#endif
