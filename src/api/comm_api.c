/*
 * Communicator entry points: unique id, init (rank, config, scalable, all), split, shrink,
 * finalize, destroy, abort, revoke, and the queries.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/config.h"
#include "core/enqueue.h"
#include "base/log.h"
#include "base/param.h"
#include "device/device.h"

/* Calls that a group collects fail the whole group when they fail (see coll.c). */
static ncclResult_t grouped_result(braid_status_t st)
{
    if (st < 0)
        braid_group_fail(st);
    return braid_api_result(st);
}

BRAID_API_TWIN(ncclGetUniqueId);
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    braid_uid_t uid;
    if (uniqueId == NULL)
        return braid_api_result(braid_err(BRAID_ERR_INVALID, "ncclGetUniqueId: uniqueId is NULL"));
    braid_status_t st = braid_bootstrap_get_uid(&uid);
    if (st < 0)
        return braid_api_result(st);
    memset(uniqueId, 0, sizeof(*uniqueId));
    memcpy(uniqueId->internal, &uid, sizeof(uid));
    return ncclSuccess;
}

_Static_assert(sizeof(braid_uid_t) <= NCCL_UNIQUE_ID_BYTES, "braid_uid_t fits ncclUniqueId");

/* cudev < 0: the device of the calling thread (its current context's, else 0). */
static braid_status_t init_rank(ncclComm_t *newcomm, int nranks, const ncclUniqueId *id, int rank,
                                int cudev, const ncclConfig_t *config, const char *what)
{
    braid_comm_config_t cfg;
    braid_comm_t *comm;
    braid_comm_init_args_t a;

    if (newcomm == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: newcomm is NULL", what);
    if (nranks < 1)
        return braid_err(BRAID_ERR_INVALID, "%s: nranks is %d: use 1 or more", what, nranks);
    if (rank < 0 || rank >= nranks)
        return braid_err(BRAID_ERR_INVALID, "%s: rank %d is out of range [0, %d)", what, rank,
                         nranks);
    memset(&a, 0, sizeof(a));
    memcpy(&a.uid, id->internal, sizeof(a.uid));
    BRAID_CHECK(braid_bootstrap_check_uid(&a.uid));
    BRAID_CHECK(braid_config_read(config, NULL, &cfg));
    a.rank = rank;
    a.nranks = nranks;
    a.cudev = cudev >= 0 ? cudev : braid_device_current();   /* NCCL: cudaGetDevice() */
    BRAID_CHECK(braid_comm_alloc(&cfg, &comm));
    int grouped = braid_group_depth() > 0;
    braid_status_t st = braid_comm_init(comm, &a, grouped || !cfg.blocking);
    if (st < 0) {
        braid_comm_unregister(comm, what);
        braid_comm_free(comm, 0);
        return st;
    }
    *newcomm = comm;
    if (grouped)
        return braid_group_add_init(comm);
    return st;   /* OK, or INPROGRESS for a nonblocking comm */
}

BRAID_API_TWIN(ncclCommInitRank);
ncclResult_t ncclCommInitRank(ncclComm_t *newcomm, int nranks, ncclUniqueId commId, int rank)
{
    return grouped_result(init_rank(newcomm, nranks, &commId, rank, -1, NULL, "ncclCommInitRank"));
}

BRAID_API_TWIN(ncclCommInitRankConfig);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    return grouped_result(init_rank(comm, nranks, &commId, rank, -1, config,
                                      "ncclCommInitRankConfig"));
}

/*
 * ncclCommInitRankScalable: every rank joins through the first id's root (one root serves
 * thousands of hellos), so the roots of the other ids would wait forever, each a thread and
 * a listening socket, for ranks that never come. The process that made each of them (the
 * one whose ncclGetUniqueId started it; every rank passes the same ids) stops it here; in
 * any other process the call finds no such root and does nothing. Ids made under
 * NCCL_COMM_ID have no root of their own (rank 0 starts the first id's), and an id equal to
 * the first is the first: neither is touched.
 */
static void scalable_stop_unused_roots(const ncclUniqueId *ids, int nId)
{
    braid_uid_t first, uid;
    memcpy(&first, ids[0].internal, sizeof(first));
    for (int i = 1; i < nId; i++) {
        memcpy(&uid, ids[i].internal, sizeof(uid));
        if (uid.nonce != first.nonce)
            braid_bootstrap_uid_release(&uid);
    }
}

BRAID_API_TWIN(ncclCommInitRankScalable);
ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config)
{
    const char *what = "ncclCommInitRankScalable";
    if (commIds == NULL)
        return braid_api_result(braid_err(BRAID_ERR_INVALID, "%s: commIds is NULL", what));
    if (nId < 1 || nId > nranks)
        return braid_api_result(braid_err(BRAID_ERR_INVALID, "%s: nId is %d: use 1 to nranks "
                                          "(%d)", what, nId, nranks));
    for (int i = 1; i < nId; i++) {
        braid_uid_t uid;
        memcpy(&uid, commIds[i].internal, sizeof(uid));
        braid_status_t st = braid_bootstrap_check_uid(&uid);
        if (st < 0)
            return braid_api_result(st);
    }
    braid_status_t st = init_rank(newcomm, nranks, &commIds[0], myrank, -1, config, what);
    scalable_stop_unused_roots(commIds, nId);
    return grouped_result(st);
}

static braid_status_t init_all(ncclComm_t *comms, int ndev, const int *devlist)
{
    ncclUniqueId id;
    braid_status_t st = BRAID_OK;
    if (comms == NULL)
        return braid_err(BRAID_ERR_INVALID, "ncclCommInitAll: comms is NULL");
    if (ndev < 1)
        return braid_err(BRAID_ERR_INVALID, "ncclCommInitAll: ndev is %d: use 1 or more", ndev);
    for (int i = 0; devlist != NULL && i < ndev; i++) {
        if (devlist[i] < 0)
            return braid_err(BRAID_ERR_INVALID, "ncclCommInitAll: devlist[%d] is %d", i,
                             devlist[i]);
        for (int j = 0; j < i; j++)
            if (devlist[j] == devlist[i])   /* NCCL: ncclInvalidUsage */
                return braid_err(BRAID_ERR_USAGE, "ncclCommInitAll: device %d is listed "
                                 "twice (devlist[%d] and devlist[%d])", devlist[i], j, i);
    }
    braid_uid_t uid;
    BRAID_CHECK(braid_bootstrap_get_uid(&uid));
    memset(&id, 0, sizeof(id));
    memcpy(id.internal, &uid, sizeof(uid));
    memset(comms, 0, (size_t)ndev * sizeof(*comms));
    braid_group_start();
    for (int i = 0; i < ndev && st >= 0; i++)
        st = init_rank(&comms[i], ndev, &id, i, devlist ? devlist[i] : i, NULL, "ncclCommInitAll");
    braid_status_t se = braid_group_end();
    if (st >= 0)
        st = se;
    if (st < 0) {
        for (int i = 0; i < ndev; i++) {
            if (comms[i] != NULL && braid_comm_unregister(comms[i], "ncclCommInitAll") == BRAID_OK)
                braid_comm_free(comms[i], 1);
            comms[i] = NULL;
        }
    }
    return st;
}

BRAID_API_TWIN(ncclCommInitAll);
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    return braid_api_result(init_all(comm, ndev, devlist));
}

/* ---- split and shrink ---------------------------------------------------------------- */

/*
 * Split, shrink and finalize talk to the peers. Inside a group they run on a thread that
 * the outermost ncclGroupEnd joins, so one thread can drive them for several ranks.
 */
typedef enum { JOB_SPLIT, JOB_SHRINK, JOB_FINALIZE } comm_job_kind_t;

typedef struct comm_job {
    comm_job_kind_t kind;
    braid_comm_t *comm;             /* entered; left when the job is done */
    int color, key;                 /* split */
    int *exclude;                   /* shrink (owned copy) */
    int nexclude, abort_first;
    braid_comm_config_t cfg;
    ncclComm_t *newcomm;
} comm_job_t;

static braid_status_t comm_job_exec(const comm_job_t *j)
{
    switch (j->kind) {
    case JOB_SPLIT:
        return braid_comm_split(j->comm, j->color, j->key, &j->cfg, j->newcomm);
    case JOB_SHRINK:
        return braid_comm_shrink(j->comm, j->exclude, j->nexclude, &j->cfg, j->abort_first,
                                 j->newcomm);
    default:
        return braid_comm_finalize(j->comm);
    }
}

static braid_status_t comm_job_run(void *arg)
{
    comm_job_t *job = arg;
    braid_status_t st = comm_job_exec(job);
    braid_comm_leave(job->comm);
    free(job->exclude);
    free(job);
    return st;
}

/* Run `tmpl` now, or queue a copy of it when the thread is inside a group. */
static braid_status_t comm_job_submit(const comm_job_t *tmpl, const int *exclude)
{
    comm_job_t *job = calloc(1, sizeof(*job));
    if (job != NULL) {
        *job = *tmpl;
        job->exclude = NULL;
        if (tmpl->nexclude > 0)
            job->exclude = malloc((size_t)tmpl->nexclude * sizeof(int));
    }
    if (job == NULL || (tmpl->nexclude > 0 && job->exclude == NULL)) {
        free(job);
        braid_comm_leave(tmpl->comm);
        return braid_err(BRAID_ERR_NOMEM, "out of memory for a communicator call");
    }
    if (tmpl->nexclude > 0)
        memcpy(job->exclude, exclude, (size_t)tmpl->nexclude * sizeof(int));
    if (braid_group_depth() == 0)
        return comm_job_run(job);
    braid_status_t st = braid_group_add_job(comm_job_run, job);
    if (st < 0) {
        braid_comm_leave(job->comm);
        free(job->exclude);
        free(job);
    }
    return st;
}

static braid_status_t enter_for_child(braid_comm_t *comm, const char *what)
{
    BRAID_CHECK(braid_comm_enter(comm, what, 0));
    int s = atomic_load(&comm->state);
    if (s == BRAID_COMM_INITIALIZING || s == BRAID_COMM_FINALIZED || s == BRAID_COMM_ABORTED) {
        braid_comm_leave(comm);
        return braid_err(BRAID_ERR_USAGE, "%s: the communicator (rank %d) is %s", what,
                         comm->rank, s == BRAID_COMM_INITIALIZING ? "still initializing"
                         : s == BRAID_COMM_FINALIZED ? "finalized" : "aborted");
    }
    return BRAID_OK;
}

static braid_status_t split(braid_comm_t *comm, int color, int key, ncclComm_t *newcomm,
                            const ncclConfig_t *config)
{
    const char *what = "ncclCommSplit";
    comm_job_t job = { .kind = JOB_SPLIT, .comm = comm, .color = color, .key = key,
                       .newcomm = newcomm };
    if (newcomm == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: newcomm is NULL", what);
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
        return braid_err(BRAID_ERR_INVALID, "%s: color %d is negative: use a color >= 0 or "
                         "NCCL_SPLIT_NOCOLOR", what, color);
    BRAID_CHECK(enter_for_child(comm, what));
    braid_status_t st = braid_config_read(config, &comm->config, &job.cfg);
    if (st < 0) {
        braid_comm_leave(comm);
        return st;
    }
    return comm_job_submit(&job, NULL);
}

BRAID_API_TWIN(ncclCommSplit);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
    return grouped_result(split(comm, color, key, newcomm, config));
}

static braid_status_t shrink_check(const braid_comm_t *comm, const int *excl, int nexcl)
{
    const char *what = "ncclCommShrink";
    if (nexcl >= comm->nranks)
        return braid_err(BRAID_ERR_INVALID, "%s: excludeRanksCount %d leaves none of the %d "
                         "ranks", what, nexcl, comm->nranks);
    for (int i = 0; i < nexcl; i++) {
        if (excl[i] < 0 || excl[i] >= comm->nranks)
            return braid_err(BRAID_ERR_INVALID, "%s: excludeRanksList[%d] = %d is out of range "
                             "[0, %d)", what, i, excl[i], comm->nranks);
        if (excl[i] == comm->rank)   /* NCCL: ncclInvalidArgument */
            return braid_err(BRAID_ERR_INVALID, "%s: rank %d is in excludeRanksList: excluded "
                             "ranks must not call ncclCommShrink", what, comm->rank);
        for (int j = 0; j < i; j++)
            if (excl[j] == excl[i])
                return braid_err(BRAID_ERR_INVALID, "%s: rank %d is listed twice in "
                                 "excludeRanksList", what, excl[i]);
    }
    return BRAID_OK;
}

static braid_status_t shrink(braid_comm_t *comm, const int *excl, int nexcl, ncclComm_t *newcomm,
                             const ncclConfig_t *config, int flags)
{
    const char *what = "ncclCommShrink";
    comm_job_t job = { .kind = JOB_SHRINK, .comm = comm, .nexclude = nexcl,
                       .abort_first = flags == NCCL_SHRINK_ABORT, .newcomm = newcomm };
    if (newcomm == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: newcomm is NULL", what);
    if (flags != NCCL_SHRINK_DEFAULT && flags != NCCL_SHRINK_ABORT)
        return braid_err(BRAID_ERR_INVALID, "%s: shrinkFlags is %d: use NCCL_SHRINK_DEFAULT or "
                         "NCCL_SHRINK_ABORT", what, flags);
    if (nexcl <= 0 || excl == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: excludeRanksList %p with excludeRanksCount %d: "
                         "name at least one rank to exclude", what, (const void *)excl, nexcl);
    BRAID_CHECK(enter_for_child(comm, what));
    braid_status_t st = braid_config_read(config, &comm->config, &job.cfg);
    if (st >= 0)
        st = shrink_check(comm, excl, nexcl);
    if (st < 0) {
        braid_comm_leave(comm);
        return st;
    }
    return comm_job_submit(&job, excl);
}

BRAID_API_TWIN(ncclCommShrink);
ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    return grouped_result(shrink(comm, excludeRanksList, excludeRanksCount, newcomm, config,
                                   shrinkFlags));
}

/* ---- end of life --------------------------------------------------------------------- */

static braid_status_t finalize(braid_comm_t *comm)
{
    if (comm == NULL)
        return BRAID_OK;   /* as NCCL: finalizing NULL is a no-op */
    comm_job_t job = { .kind = JOB_FINALIZE, .comm = comm };
    BRAID_CHECK(braid_comm_enter(comm, "ncclCommFinalize", 0));
    int s = atomic_load(&comm->state);
    braid_comm_leave(comm);
    if (s == BRAID_COMM_FINALIZED)   /* NCCL: ncclInvalidArgument, not the state's usage error */
        return braid_err(BRAID_ERR_INVALID, "ncclCommFinalize: the communicator (rank %d) is "
                         "already finalized: destroy it", comm->rank);
    BRAID_CHECK(braid_comm_enter(comm, "ncclCommFinalize", 1));
    return comm_job_submit(&job, NULL);
}

BRAID_API_TWIN(ncclCommFinalize);
ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    return grouped_result(finalize(comm));
}

BRAID_API_TWIN(ncclCommDestroy);
ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (comm == NULL)
        return ncclSuccess;   /* as NCCL: destroying NULL is a no-op */
    braid_status_t st = braid_comm_unregister(comm, "ncclCommDestroy");
    if (st < 0)
        return braid_api_result(st);
    braid_comm_free(comm, 0);
    return ncclSuccess;
}

BRAID_API_TWIN(ncclCommAbort);
ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (comm == NULL)
        return ncclSuccess;
    braid_status_t st = braid_comm_unregister(comm, "ncclCommAbort");
    if (st < 0)
        return braid_api_result(st);
    braid_comm_free(comm, 1);
    return ncclSuccess;
}

static braid_status_t revoke(braid_comm_t *comm, int flags)
{
    if (comm == NULL)
        return BRAID_OK;   /* as NCCL: revoking NULL is a no-op */
    if (flags != NCCL_REVOKE_DEFAULT)
        return braid_err(BRAID_ERR_INVALID, "ncclCommRevoke: revokeFlags is %d: must be "
                         "NCCL_REVOKE_DEFAULT (0)", flags);
    BRAID_CHECK(braid_comm_enter(comm, "ncclCommRevoke", 0));
    braid_status_t st = braid_comm_revoke(comm);
    braid_comm_leave(comm);
    return st;
}

BRAID_API_TWIN(ncclCommRevoke);
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    return braid_api_result(revoke(comm, revokeFlags));
}

/* ---- queries ------------------------------------------------------------------------- */

static braid_status_t query(braid_comm_t *comm, const void *out, const char *what,
                            const char *arg)
{
    if (out == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: %s is NULL", what, arg);
    BRAID_CHECK(braid_comm_enter(comm, what, 0));
    braid_comm_leave(comm);
    return BRAID_OK;
}

BRAID_API_TWIN(ncclCommGetAsyncError);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    braid_status_t st = query(comm, asyncError, "ncclCommGetAsyncError", "asyncError");
    if (st < 0)
        return braid_api_result(st);
    *asyncError = braid_api_result(atomic_load(&comm->async_status));
    return ncclSuccess;
}

BRAID_API_TWIN(ncclCommCount);
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    braid_status_t st = query(comm, count, "ncclCommCount", "count");
    if (st == BRAID_OK)
        *count = comm->nranks;
    return braid_api_result(st);
}

BRAID_API_TWIN(ncclCommUserRank);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    braid_status_t st = query(comm, rank, "ncclCommUserRank", "rank");
    if (st == BRAID_OK)
        *rank = comm->rank;
    return braid_api_result(st);
}

BRAID_API_TWIN(ncclCommCuDevice);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    braid_status_t st = query(comm, device, "ncclCommCuDevice", "device");
    if (st == BRAID_OK)
        *device = comm->cudev;
    return braid_api_result(st);
}

BRAID_API_TWIN(ncclGetLastError);
const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;   /* as NCCL: the last error of the process */
    return braid_err_last();
}

BRAID_API_TWIN(ncclResetDebugInit);
void ncclResetDebugInit(void)
{
    braid_param_reload();
    braid_log_reset();
}

/* Exported by libnccl.so.2 too, strong and without a twin (NCCL's internal reset). */
BRAID_EXPORT void ncclResetDebugInitInternal(void);
BRAID_EXPORT void ncclResetDebugInitInternal(void)
{
    braid_param_reload();
    braid_log_reset();
}
