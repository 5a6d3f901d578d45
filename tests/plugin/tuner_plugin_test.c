/*
 * An NCCL tuner plugin for the test suite (tests/integration/test_tune_plugin.sh). It
 * exports ncclTunerPlugin_v5, or ncclTunerPlugin_v4 when built with -DBRAIDTEST_TUNER_V4,
 * and does what BRAIDTEST_TUNER says, read at init:
 *
 *   tree, ring     lower that algorithm's Simple entry to 0 where the caller offers it
 *   nvls           ask for NVLS, which braid does not have
 *   keep           change nothing
 *   fail           getCollInfo fails (ncclInternalError)
 *   initfail       init fails (ncclInvalidUsage)
 *   byrank         tree on even RANK, ring on odd (a plugin that answers differently)
 *
 * Through the logger it gets, at INFO (subsystem TUNING): its init arguments, and for
 * every call the collective, the bytes and the RING and TREE Simple entries it was given.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/nccl_tuner.h"

#define EXPORT __attribute__((visibility("default")))

typedef struct bt_ctx {
    char mode[16];
    ncclDebugLogger_t log;
} bt_ctx_t;

static ncclResult_t bt_init_common(size_t nranks, size_t nnodes, ncclDebugLogger_t log,
                                   void **context, const char *extra)
{
    const char *mode = getenv("BRAIDTEST_TUNER");
    if (mode == NULL)
        mode = "keep";
    if (log != NULL)
        log(NCCL_LOG_INFO, NCCL_TUNING, __FILE__, __LINE__,
            "init: %zu ranks, %zu nodes%s, mode %s", nranks, nnodes, extra, mode);
    if (strcmp(mode, "initfail") == 0) {
        if (log != NULL)
            log(NCCL_LOG_WARN, NCCL_TUNING, __FILE__, __LINE__,
                "init fails, as BRAIDTEST_TUNER=initfail asks");
        return ncclInvalidUsage;
    }
    bt_ctx_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return ncclSystemError;
    strncpy(c->mode, mode, sizeof(c->mode) - 1);
    if (strcmp(mode, "byrank") == 0) {
        const char *r = getenv("RANK");
        strcpy(c->mode, r != NULL && atoi(r) % 2 == 1 ? "ring" : "tree");
    }
    c->log = log;
    *context = c;
    return ncclSuccess;
}

static ncclResult_t bt_get_coll_info(void *context, ncclFunc_t coll, size_t bytes,
                                     int num_pipe_ops, float **cost_table, int num_algo,
                                     int num_proto, int reg_buff, int *nchannels)
{
    bt_ctx_t *c = context;
    float *table = (float *)cost_table;     /* [num_algo][num_proto], contiguous */
#define BT_ENTRY(a) table[(a) * num_proto + NCCL_PROTO_SIMPLE]
    (void)num_pipe_ops;
    (void)reg_buff;
    (void)nchannels;
    if (num_algo <= NCCL_ALGO_NVLS || num_proto <= NCCL_PROTO_SIMPLE)
        return ncclInvalidArgument;
    if (c->log != NULL)
        c->log(NCCL_LOG_INFO, NCCL_TUNING, __FILE__, __LINE__,
               "getCollInfo: coll %d, %zu bytes, ring %.3f, tree %.3f", (int)coll, bytes,
               (double)BT_ENTRY(NCCL_ALGO_RING), (double)BT_ENTRY(NCCL_ALGO_TREE));
    if (strcmp(c->mode, "fail") == 0)
        return ncclInternalError;
    int row = strcmp(c->mode, "tree") == 0   ? NCCL_ALGO_TREE
              : strcmp(c->mode, "ring") == 0 ? NCCL_ALGO_RING
              : strcmp(c->mode, "nvls") == 0 ? NCCL_ALGO_NVLS
                                             : -1;
    if (row == NCCL_ALGO_NVLS || (row >= 0 && BT_ENTRY(row) >= 0))
        BT_ENTRY(row) = 0.0f;
    return ncclSuccess;
}

static ncclResult_t bt_fini(void *context)
{
    free(context);
    return ncclSuccess;
}

#ifdef BRAIDTEST_TUNER_V4
static ncclResult_t bt_init_v4(size_t nranks, size_t nnodes, ncclDebugLogger_t log,
                               void **context)
{
    return bt_init_common(nranks, nnodes, log, context, "");
}

EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {
    .name = "BraidTest4",
    .init = bt_init_v4,
    .getCollInfo = bt_get_coll_info,
    .destroy = bt_fini,
};
#else
static ncclResult_t bt_init_v5(void **context, uint64_t comm_id, size_t nranks, size_t nnodes,
                               ncclDebugLogger_t log, ncclNvlDomainInfo_v5_t *dom,
                               ncclTunerConstants_v5_t *constants)
{
    char extra[96];
    (void)comm_id;
    (void)constants;
    snprintf(extra, sizeof(extra), ", %d domains of %d to %d ranks", dom->nNvlDomains,
             dom->minRanksPerNvlDomain, dom->maxRanksPerNvlDomain);
    return bt_init_common(nranks, nnodes, log, context, extra);
}

EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = "BraidTest",
    .init = bt_init_v5,
    .getCollInfo = bt_get_coll_info,
    .finalize = bt_fini,
};
#endif
