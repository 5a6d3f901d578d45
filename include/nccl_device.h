/*
 * braid: host entry points of NCCL 2.28.9's device API.
 *
 * NVIDIA's libnccl.so.2 exports a handful of C functions that prepare the device API
 * (ncclDevComm, teams, barriers and LL all-to-all used from inside CUDA kernels).
 * braid does NOT offer the device API: it has no device-side communicator. The functions
 * are exported only so that programs linked against NVIDIA's library still load:
 *
 *   - the ones returning ncclResult_t record an error (ncclGetLastError) and return
 *     ncclInvalidUsage without touching their outputs;
 *   - the team getters return BRAID_NCCL_TEAM_NONE = { nRanks 0, rank -1, stride 0 },
 *     which no real team equals (every real team has at least one rank);
 *   - the int-returning ones return -1.
 *
 * Use the host collectives of nccl.h instead. The declarations follow NVIDIA's
 * nccl_device/core.h, lsa_barrier.h, gin_barrier.h and ll_a2a.h (C view only: the C++
 * and __device__ parts have no meaning without the device API). ncclDevComm is left
 * incomplete here since braid can never fill one in.
 */
#ifndef BRAID_NCCL_DEVICE_H
#define BRAID_NCCL_DEVICE_H

#include "nccl.h"

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Device communicator made by ncclDevCommCreate (never, in braid). */
struct ncclDevComm;
typedef struct ncclDevComm ncclDevComm_t;

/* A team: nRanks ranks of the world communicator, this rank being `rank`, world ranks
 * `stride` apart. */
struct ncclTeam {
    int nRanks, rank, stride;
};
typedef struct ncclTeam ncclTeam_t;

/* What braid's team getters return: no rank at all. Test with team.nRanks == 0. */
#define BRAID_NCCL_TEAM_NONE_INIT { 0, -1, 0 }

typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;

/* Multicast handle of a team. */
struct ncclMultimemHandle {
    void *mcBasePtr;
};
typedef struct ncclMultimemHandle ncclMultimemHandle_t;

/* Barrier among the ranks of a team that share memory (LSA: load/store accessible). */
struct ncclLsaBarrierHandle {
    ncclDevResourceHandle_t bufHandle;
    int nBarriers;
};
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;

/* Barrier through the GPU-initiated network (GIN). */
struct ncclGinBarrierHandle {
    ncclGinSignal_t signal0;
    ncclDevResourceHandle_t bufHandle;
};
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;

/* Low-latency all-to-all buffers. */
struct ncclLLA2AHandle {
    ncclDevResourceHandle_t bufHandle;
    uint32_t nSlots;
};
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclTeamRequirements ncclTeamRequirements_t;

/* What a device communicator must provide (input of ncclDevCommCreate). */
struct ncclDevCommRequirements {
    ncclDevResourceRequirements_t *resourceRequirementsList;
    ncclTeamRequirements_t *teamRequirementsList;
    bool lsaMultimem;
    int barrierCount;
    int lsaBarrierCount;
    int railGinBarrierCount;
    int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
    bool ginForceEnable;
    int ginContextCount;
    int ginSignalCount;
    int ginCounterCount;
};

/* One resource (buffer, signals, counters) in a linked list of requirements. */
struct ncclDevResourceRequirements {
    ncclDevResourceRequirements_t *next;
    size_t bufferSize, bufferAlign;
    ncclDevResourceHandle_t *outBufferHandle;
    int ginSignalCount;
    int ginCounterCount;
    ncclGinSignal_t *outGinSignalStart;
    ncclGinCounter_t *outGinCounterStart;
};

/* One team a device communicator must know, in a linked list. */
struct ncclTeamRequirements {
    ncclTeamRequirements_t *next;
    ncclTeam_t team;
    bool multimem;
    ncclMultimemHandle_t *outMultimemHandle;
};

/* Create a device communicator for comm. braid: ncclInvalidUsage. */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs,
                               ncclDevComm_t *outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs,
                                ncclDevComm_t *outDevComm);

/* Destroy a device communicator. braid: ncclInvalidUsage. */
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm);

/* The team of all ranks of comm. braid: BRAID_NCCL_TEAM_NONE_INIT. */
ncclTeam_t ncclTeamWorld(ncclComm_t comm);
ncclTeam_t pncclTeamWorld(ncclComm_t comm);

/* The team of ranks sharing memory with this one. braid: BRAID_NCCL_TEAM_NONE_INIT. */
ncclTeam_t ncclTeamLsa(ncclComm_t comm);
ncclTeam_t pncclTeamLsa(ncclComm_t comm);

/* The team of same-position ranks across LSA teams. braid: BRAID_NCCL_TEAM_NONE_INIT. */
ncclTeam_t ncclTeamRail(ncclComm_t comm);
ncclTeam_t pncclTeamRail(ncclComm_t comm);

/* World rank of rank `rank` of `team`. braid: -1. */
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);

/* LSA-team rank of rank `rank` of `team`. braid: -1. */
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/* Ask for nBarriers LSA barriers over team. braid: ncclInvalidUsage. */
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                             ncclLsaBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq);
ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                              ncclLsaBarrierHandle_t *outHandle,
                                              ncclDevResourceRequirements_t *outReq);

/* Ask for nBarriers GIN barriers over team. braid: ncclInvalidUsage. */
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq);
ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                              ncclGinBarrierHandle_t *outHandle,
                                              ncclDevResourceRequirements_t *outReq);

/* Ask for LL all-to-all buffers of nBlocks blocks of nSlots slots. braid: ncclInvalidUsage. */
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,
                                        ncclDevResourceRequirements_t *outReq);
ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,
                                         ncclDevResourceRequirements_t *outReq);

/* Slots needed for maxElts elements of maxEltSize bytes. braid: -1. */
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
int pncclLLA2ACalcSlots(int maxElts, int maxEltSize);

#ifdef __cplusplus
}
#endif

#endif
