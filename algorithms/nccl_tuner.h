/*
 * The binary interface of an external NCCL tuner plugin (libnccl-tuner-NAME.so), as braid
 * declares it for itself: the library exports one table named ncclTunerPlugin_vN, its
 * layout fixed per N. braid accepts v4 and v5 (NCCL 2.28 also knows v2 and v3).
 *
 * ABI facts only: member order, types and enum values as NCCL's releases have them
 * (checked against NVIDIA/nccl's src/include/plugin/tuner/tuner_v4.h and tuner_v5.h and
 * the names in libnccl.so.2 of NCCL 2.28.9).
 *
 *   v4   init(nRanks, nNodes, logger, &context); getCollInfo; destroy(context)
 *   v5   init(&context, commId, nRanks, nNodes, logger, NVLink domains, constants);
 *        getCollInfo as v4; finalize(context)
 *
 * getCollInfo's collCostTable is declared float ** but points at one contiguous
 * float[numAlgo][numProto] array of predicted times in microseconds; an entry of -1
 * (NCCL_ALGO_PROTO_IGNORE) is a combination the caller will not run. The plugin lowers
 * (typically zeroes) the entry it wants, and the caller takes the cheapest entry.
 *
 * Included by braid (algorithms/tune_plugin.c) and by the test suite's tuner plugin
 * (tests/plugin/tuner_plugin_test.c); needs only include/nccl.h and src/core/nccl_ext.h.
 */
#ifndef BRAID_ALGORITHMS_NCCL_TUNER_H
#define BRAID_ALGORITHMS_NCCL_TUNER_H

#include <stddef.h>
#include <stdint.h>

#include "base/nccl_ext.h"
#include "nccl.h"

/* The collectives a tuner is asked about (the first five; the rest never reach it). */
typedef enum {
    ncclFuncBroadcast = 0,
    ncclFuncReduce = 1,
    ncclFuncAllGather = 2,
    ncclFuncReduceScatter = 3,
    ncclFuncAllReduce = 4,
    ncclFuncSendRecv = 5,
    ncclFuncSend = 6,
    ncclFuncRecv = 7,
    ncclNumFuncs = 8,
} ncclFunc_t;

/* Rows and columns of the cost table. */
#define NCCL_NUM_ALGORITHMS 7
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6

#define NCCL_NUM_PROTOCOLS 3
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2

#define NCCL_ALGO_PROTO_IGNORE (-1.0f)

typedef struct {
    const char *name;
    ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                         void **context);
    ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes,
                                int numPipeOps, float **collCostTable, int numAlgo, int numProto,
                                int regBuff, int *nChannels);
    ncclResult_t (*destroy)(void *context);
} ncclTuner_v4_t;

/* v5: what NCCL tells the tuner about NVLink domains (braid: one domain per host). */
typedef struct {
    int nNvlDomains;
    int minRanksPerNvlDomain;
    int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

#define NCCL_NUM_ALGORITHMS_V5 7
#define NCCL_NUM_PROTOCOLS_V5 3
#define NCCL_NUM_HW_LINKS_V5 3
#define NCCL_NUM_COMPCAPS_V5 4
#define NCCL_NUM_TUNING_SCALES_V5 3

/* v5: NCCL's own tuning constants, which a plugin may read and change at init (braid's
 * model has none of them: it passes zeros and ignores changes). */
typedef struct {
    double baseLatencies[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
    double hwLatencies[NCCL_NUM_HW_LINKS_V5][NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
    double llMaxBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
    double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
    double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
    double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
    double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v5_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, uint64_t commId, size_t nRanks, size_t nNodes,
                         ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t *nvlDomainInfo,
                         ncclTunerConstants_v5_t *constants);
    ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes,
                                int numPipeOps, float **collCostTable, int numAlgo, int numProto,
                                int regBuff, int *nChannels);
    ncclResult_t (*finalize)(void *context);
} ncclTuner_v5_t;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(ncclTuner_v4_t) == 32, "ncclTuner_v4_t is four pointers");
_Static_assert(sizeof(ncclTuner_v5_t) == 32, "ncclTuner_v5_t is four pointers");
_Static_assert(sizeof(ncclTunerConstants_v5_t) == (21 + 63 + 5 * 12) * 8,
               "ncclTunerConstants_v5_t is NCCL's size");
#endif

#endif
