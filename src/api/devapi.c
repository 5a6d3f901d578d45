/*
 * Host entry points of NCCL's device API (include/nccl_device.h).
 *
 * braid has no device-side communicator, so these exist only to keep programs linked
 * against NVIDIA's libnccl.so.2 loadable. Each call records why it failed and returns a
 * value the caller can detect, without touching any output:
 *   ncclResult_t  -> ncclInvalidUsage
 *   ncclTeam_t    -> { nRanks 0, rank -1, stride 0 } (BRAID_NCCL_TEAM_NONE_INIT)
 *   int           -> -1
 */
#include "nccl_device.h"

#include "api/api.h"

static braid_status_t devapi_unsupported(const char *fn)
{
    return braid_err(BRAID_ERR_UNSUPPORTED,
                     "%s: braid does not offer the NCCL device API (ncclDevComm*, ncclTeam*, "
                     "ncclLsaBarrier*, ncclGinBarrier*, ncclLLA2A*); use the host collectives",
                     fn);
}

static ncclResult_t devapi_fail_result(const char *fn)
{
    return braid_api_result(devapi_unsupported(fn));
}

static ncclTeam_t devapi_fail_team(const char *fn)
{
    ncclTeam_t none = BRAID_NCCL_TEAM_NONE_INIT;

    devapi_unsupported(fn);
    return none;
}

static int devapi_fail_int(const char *fn)
{
    devapi_unsupported(fn);
    return -1;
}

BRAID_API_TWIN(ncclDevCommCreate);
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs,
                               ncclDevComm_t *outDevComm)
{
    (void)comm;
    (void)reqs;
    (void)outDevComm;
    return devapi_fail_result(__func__);
}

BRAID_API_TWIN(ncclDevCommDestroy);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm)
{
    (void)comm;
    (void)devComm;
    return devapi_fail_result(__func__);
}

BRAID_API_TWIN(ncclTeamWorld);
ncclTeam_t ncclTeamWorld(ncclComm_t comm)
{
    (void)comm;
    return devapi_fail_team(__func__);
}

BRAID_API_TWIN(ncclTeamLsa);
ncclTeam_t ncclTeamLsa(ncclComm_t comm)
{
    (void)comm;
    return devapi_fail_team(__func__);
}

BRAID_API_TWIN(ncclTeamRail);
ncclTeam_t ncclTeamRail(ncclComm_t comm)
{
    (void)comm;
    return devapi_fail_team(__func__);
}

BRAID_API_TWIN(ncclTeamRankToWorld);
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank)
{
    (void)comm;
    (void)team;
    (void)rank;
    return devapi_fail_int(__func__);
}

BRAID_API_TWIN(ncclTeamRankToLsa);
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank)
{
    (void)comm;
    (void)team;
    (void)rank;
    return devapi_fail_int(__func__);
}

BRAID_API_TWIN(ncclLsaBarrierCreateRequirement);
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                             ncclLsaBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq)
{
    (void)team;
    (void)nBarriers;
    (void)outHandle;
    (void)outReq;
    return devapi_fail_result(__func__);
}

BRAID_API_TWIN(ncclGinBarrierCreateRequirement);
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq)
{
    (void)comm;
    (void)team;
    (void)nBarriers;
    (void)outHandle;
    (void)outReq;
    return devapi_fail_result(__func__);
}

BRAID_API_TWIN(ncclLLA2ACreateRequirement);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,
                                        ncclDevResourceRequirements_t *outReq)
{
    (void)nBlocks;
    (void)nSlots;
    (void)outHandle;
    (void)outReq;
    return devapi_fail_result(__func__);
}

BRAID_API_TWIN(ncclLLA2ACalcSlots);
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize)
{
    (void)maxElts;
    (void)maxEltSize;
    return devapi_fail_int(__func__);
}
