/*
 * Reading an ncclConfig_t as NCCL does: the caller's struct may be older (smaller `size`)
 * or newer (larger) than ours; we copy min(size, ours) bytes over a default-filled struct,
 * check the magic, and validate the fields braid uses.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/config.h"

#define CONFIG_MAGIC 0xcafebeefu

static void config_defaults(braid_comm_config_t *out)
{
    memset(out, 0, sizeof(*out));
    out->blocking = 1;
}

static braid_status_t check_flag(const char *name, int v)
{
    if (v != NCCL_CONFIG_UNDEF_INT && v != 0 && v != 1)
        return braid_err(BRAID_ERR_INVALID, "config->%s is %d: use 0 or 1", name, v);
    return BRAID_OK;
}

static braid_status_t config_validate(const ncclConfig_t *c)
{
    BRAID_CHECK(check_flag("blocking", c->blocking));
    BRAID_CHECK(check_flag("splitShare", c->splitShare));
    BRAID_CHECK(check_flag("collnetEnable", c->collnetEnable));
    BRAID_CHECK(check_flag("shrinkShare", c->shrinkShare));
    BRAID_CHECK(check_flag("nvlinkCentricSched", c->nvlinkCentricSched));
    if (c->cgaClusterSize != NCCL_CONFIG_UNDEF_INT && c->cgaClusterSize < 0)
        return braid_err(BRAID_ERR_INVALID, "config->cgaClusterSize is %d: use 0 or more",
                         c->cgaClusterSize);
    if (c->minCTAs != NCCL_CONFIG_UNDEF_INT && c->minCTAs <= 0)
        return braid_err(BRAID_ERR_INVALID, "config->minCTAs is %d: use 1 or more", c->minCTAs);
    if (c->maxCTAs != NCCL_CONFIG_UNDEF_INT && c->maxCTAs <= 0)
        return braid_err(BRAID_ERR_INVALID, "config->maxCTAs is %d: use 1 or more", c->maxCTAs);
    if (c->minCTAs != NCCL_CONFIG_UNDEF_INT && c->maxCTAs != NCCL_CONFIG_UNDEF_INT &&
        c->minCTAs > c->maxCTAs)
        return braid_err(BRAID_ERR_INVALID, "config->minCTAs (%d) is above config->maxCTAs (%d)",
                         c->minCTAs, c->maxCTAs);
    if (c->CTAPolicy != NCCL_CONFIG_UNDEF_INT && (c->CTAPolicy & ~0x3))
        return braid_err(BRAID_ERR_INVALID, "config->CTAPolicy is %d: use NCCL_CTA_POLICY_* "
                         "flags", c->CTAPolicy);
    if (c->trafficClass != NCCL_CONFIG_UNDEF_INT && c->trafficClass < 0)
        return braid_err(BRAID_ERR_INVALID, "config->trafficClass is %d: use 0 or more",
                         c->trafficClass);
    return BRAID_OK;
}

braid_status_t braid_config_read(const ncclConfig_t *user, const braid_comm_config_t *inherit,
                                 braid_comm_config_t *out)
{
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    braid_comm_config_t cfg;

    if (inherit != NULL)
        cfg = *inherit;
    else
        config_defaults(&cfg);
    if (user == NULL) {
        *out = cfg;
        return BRAID_OK;
    }
    if (user->magic != CONFIG_MAGIC)
        return braid_err(BRAID_ERR_INVALID, "config->magic is 0x%x, not 0x%x: initialise the "
                         "config with NCCL_CONFIG_INITIALIZER", user->magic, CONFIG_MAGIC);
    if (user->size < offsetof(ncclConfig_t, blocking) + sizeof(int))
        return braid_err(BRAID_ERR_INVALID, "config->size is %zu: too small for any NCCL "
                         "config (initialise it with NCCL_CONFIG_INITIALIZER)", user->size);
    /* fields the caller's version does not have keep their UNDEF defaults */
    memcpy(&c, user, user->size < sizeof(c) ? user->size : sizeof(c));
    BRAID_CHECK(config_validate(&c));
    if (c.blocking != NCCL_CONFIG_UNDEF_INT)
        cfg.blocking = c.blocking;
    if (c.splitShare != NCCL_CONFIG_UNDEF_INT)
        cfg.split_share = c.splitShare;
    if (c.shrinkShare != NCCL_CONFIG_UNDEF_INT)
        cfg.shrink_share = c.shrinkShare;
    if (c.netName != NULL)
        snprintf(cfg.net_name, sizeof(cfg.net_name), "%s", c.netName);
    if (c.commName != NULL)
        snprintf(cfg.comm_name, sizeof(cfg.comm_name), "%s", c.commName);
    *out = cfg;
    return BRAID_OK;
}
