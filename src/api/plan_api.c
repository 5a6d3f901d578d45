/*
 * braid.h's bucket plans (braidPlan*): argument checks and the mapping of braid.h's types
 * to the core's (src/core/plan.h). Every argument is checked before anything changes.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/coll.h"
#include "braid.h"
#include "core/enqueue.h"
#include "core/plan.h"
#include "device/device.h"

static braid_status_t check_float(const char *what, const char *field, int dt)
{
    if (dt < 0 || dt >= BRAID_NUM_DTYPES || !braid_dtype_is_float((braid_dtype_t)dt))
        return braid_err(BRAID_ERR_INVALID, "%s: %s %d is not a floating-point ncclDataType_t",
                         what, field, dt);
    return BRAID_OK;
}

static braid_status_t check_factor(const char *what, const char *field, double f)
{
    if (!isfinite(f) || f == 0.0)
        return braid_err(BRAID_ERR_INVALID, "%s: %s %g must be finite and nonzero", what,
                         field, f);
    return BRAID_OK;
}

/* The config over its defaults, for callers built against an older, shorter struct. */
static braid_status_t spec_of(braid_comm_t *comm, const braidPlanConfig_t *config,
                              braid_plan_spec_t *sp)
{
    const char *what = "braidPlanCreate";
    braidPlanConfig_t c = BRAID_PLAN_CONFIG_INITIALIZER;
    if (config != NULL) {
        if (config->size < offsetof(braidPlanConfig_t, pattern) + sizeof(c.pattern))
            return braid_err(BRAID_ERR_INVALID, "%s: config->size %zu is too small (set it to "
                             "sizeof(braidPlanConfig_t), %zu)", what, config->size, sizeof(c));
        memcpy(&c, config, config->size < sizeof(c) ? config->size : sizeof(c));
    }
    if ((unsigned)c.pattern > braidPatternHybrid)
        return braid_err(BRAID_ERR_INVALID, "%s: pattern %d is out of range [0, 2]", what,
                         (int)c.pattern);
    BRAID_CHECK(check_float(what, "wireType", c.wireType));
    BRAID_CHECK(check_float(what, "outType", c.outType));
    if (c.accType != ncclFloat32 && c.accType != ncclFloat64)
        return braid_err(BRAID_ERR_INVALID, "%s: accType %d must be ncclFloat32 or "
                         "ncclFloat64", what, (int)c.accType);
    if ((unsigned)c.op > ncclAvg)
        return braid_err(BRAID_ERR_INVALID, "%s: op %d must be ncclSum, ncclProd, ncclMax, "
                         "ncclMin or ncclAvg", what, (int)c.op);
    BRAID_CHECK(check_factor(what, "preMul", c.preMul));
    BRAID_CHECK(check_factor(what, "preDivide", c.preDivide));
    BRAID_CHECK(check_factor(what, "postDivide", c.postDivide));
    if ((unsigned)c.unpack > braidUnpackAccumulate)
        return braid_err(BRAID_ERR_INVALID, "%s: unpack %d is out of range [0, 1]", what,
                         (int)c.unpack);
    if (c.pattern == braidPatternHybrid &&
        (c.replicaComm == NULL || !braid_comm_is_live(c.replicaComm) || c.replicaComm == comm))
        return braid_err(BRAID_ERR_INVALID, "%s: an HSDP plan needs replicaComm, a live "
                         "communicator other than comm (got %p)", what, (void *)c.replicaComm);
    if (c.pattern == braidPatternHybrid && c.unpack == braidUnpackAccumulate)
        return braid_err(BRAID_ERR_INVALID, "%s: an HSDP plan reduces the gradient shard in "
                         "place across the replicas: unpack must be braidUnpackCopy", what);
    *sp = (braid_plan_spec_t){
        .pattern = (braid_plan_pattern_t)c.pattern, .cap = c.bucketBytes,
        .first_cap = c.firstBucketBytes, .pad = c.padMultiple ? c.padMultiple : 1,
        .wire = (braid_dtype_t)c.wireType, .acc = (braid_dtype_t)c.accType,
        .out = (braid_dtype_t)c.outType, .op = (int)c.op, .premul = c.preMul,
        .prediv = c.preDivide, .postdiv = c.postDivide,
        .accumulate = c.unpack == braidUnpackAccumulate,
        .replica = c.pattern == braidPatternHybrid ? c.replicaComm : NULL,
    };
    return BRAID_OK;
}

/* Where a plan's buffer is: -1 host memory (pinned included), else its device. */
static braid_status_t buf_ordinal(const void *p, int *ordinal_p)
{
    const braid_device_ops_t *dev = braid_device();
    braid_ptr_info_t info = { BRAID_MEM_HOST, -1, NULL };
    if (p != NULL && dev != &braid_device_host)
        BRAID_CHECK(dev->ptr_info(p, &info));
    *ordinal_p = info.kind == BRAID_MEM_DEVICE || info.kind == BRAID_MEM_MANAGED
                     ? info.ordinal : -1;
    return BRAID_OK;
}

static const char *place_name(int ordinal, char *buf, size_t len)
{
    if (ordinal < 0)
        return "host memory";
    snprintf(buf, len, "device %d", ordinal);
    return buf;
}

/* A plan's buffers are all host memory or all on one device, `ordinal` (the first one's;
 * INT32_MIN: not known yet). */
static braid_status_t check_place(const char *what, int i, const char *field, const void *p,
                                  int *ordinal)
{
    int o;
    char a[32], b[32];
    if (p == NULL)
        return BRAID_OK;
    BRAID_CHECK(buf_ordinal(p, &o));
    if (*ordinal == INT32_MIN)
        *ordinal = o;
    if (o != *ordinal)
        return braid_err(BRAID_ERR_INVALID, "%s: tensor %d's %s %p is in %s while the plan's "
                         "first buffer is in %s: a plan's buffers are all host memory or all "
                         "on one device", what, i, field, p, place_name(o, a, sizeof(a)),
                         place_name(*ordinal, b, sizeof(b)));
    return BRAID_OK;
}

static braid_status_t check_tensors(const braidTensor_t *t, int n, braid_plan_spec_t *sp,
                                    braid_plan_tensor_t *out)
{
    const char *what = "braidPlanCreate";
    int ddp = sp->pattern == BRAID_PLAN_DDP, ordinal = INT32_MIN;
    size_t total = 0, es = 8;                   /* the widest type bounds every byte size */
    for (int i = 0; i < n; i++) {
        BRAID_CHECK(check_float(what, "a tensor's type", t[i].type));
        if (t[i].grad == NULL || t[i].count == 0)
            return braid_err(BRAID_ERR_INVALID, "%s: tensor %d has %s", what, i,
                             t[i].grad == NULL ? "a NULL grad" : "count 0");
        if (t[i].count > (size_t)PTRDIFF_MAX / es - total)
            return braid_err(BRAID_ERR_INVALID, "%s: the counts overflow at tensor %d (count "
                             "%zu)", what, i, t[i].count);
        total += t[i].count;
        if (ddp && (t[i].out != NULL) != (t[0].out != NULL))
            return braid_err(BRAID_ERR_INVALID, "%s: tensor %d %s an out buffer and tensor 0 "
                             "%s: give every tensor one, or none", what, i,
                             t[i].out ? "has" : "has no", t[0].out ? "has" : "has not");
        if (!ddp && (t[i].param != NULL) != (t[0].param != NULL))
            return braid_err(BRAID_ERR_INVALID, "%s: tensor %d %s a param buffer and tensor 0 "
                             "%s: give every tensor one, or none", what, i,
                             t[i].param ? "has" : "has no", t[0].param ? "has" : "has not");
        BRAID_CHECK(check_place(what, i, "grad", t[i].grad, &ordinal));
        BRAID_CHECK(check_place(what, i, "out", ddp ? t[i].out : NULL, &ordinal));
        BRAID_CHECK(check_place(what, i, "param", ddp ? NULL : t[i].param, &ordinal));
        out[i] = (braid_plan_tensor_t){ t[i].grad, ddp ? t[i].out : NULL,
                                        ddp ? NULL : t[i].param, t[i].count,
                                        (braid_dtype_t)t[i].type };
    }
    if (ddp && sp->accumulate && t[0].out == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: braidUnpackAccumulate needs out tensors (a "
                         "gradient reduced in place cannot also be added to)", what);
    sp->ordinal = ordinal;
    return BRAID_OK;
}

static braid_status_t plan_create(braid_comm_t *comm, const braidTensor_t *tensors, int n,
                                  const braidPlanConfig_t *config, braid_plan_t **plan_p)
{
    const char *what = "braidPlanCreate";
    braid_plan_spec_t sp;
    if (plan_p == NULL || tensors == NULL || n <= 0)
        return braid_err(BRAID_ERR_INVALID, "%s: %s", what,
                         plan_p == NULL ? "plan is NULL" : tensors == NULL ? "tensors is NULL"
                                                                           : "ntensors <= 0");
    if (braid_group_depth() > 0)
        return braid_err(BRAID_ERR_USAGE, "%s: a plan is made outside ncclGroupStart/End", what);
    BRAID_CHECK(spec_of(comm, config, &sp));
    braid_plan_tensor_t *t = malloc((size_t)n * sizeof(*t));
    if (t == NULL)
        return braid_err(BRAID_ERR_NOMEM, "%s: out of memory for %d tensors", what, n);
    braid_status_t st = check_tensors(tensors, n, &sp, t);
    if (st == BRAID_OK && sp.replica != NULL)
        st = braid_comm_enter(sp.replica, what, 1);
    if (st == BRAID_OK) {
        st = braid_plan_create(comm, t, n, &sp, plan_p);
        if (sp.replica != NULL)
            braid_comm_leave(sp.replica);
    }
    free(t);
    return st;
}

BRAID_EXPORT ncclResult_t braidPlanCreate(ncclComm_t comm, const braidTensor_t *tensors,
                                          int ntensors, const braidPlanConfig_t *config,
                                          braidPlan_t *plan)
{
    braid_status_t st = braid_comm_enter(comm, "braidPlanCreate", 1);
    if (st < 0)
        return braid_api_result(st);
    braid_plan_t *p = NULL;
    st = plan_create(comm, tensors, ntensors, config, &p);
    braid_comm_leave(comm);
    if (st == BRAID_OK)
        *plan = (braidPlan_t)p;
    return braid_api_result(st);
}

/* The plan's communicator entered around fn's work. */
#define PLAN_CALL(_what, _plan, _expr)                                                      \
    do {                                                                                    \
        if ((_plan) == NULL)                                                                \
            return braid_api_result(braid_err(BRAID_ERR_INVALID, "%s: plan is NULL", _what)); \
        braid_plan_t *p_ = (braid_plan_t *)(_plan);                                         \
        braid_status_t st_ = braid_comm_enter(braid_plan_comm(p_), _what, 1);               \
        if (st_ == BRAID_OK) {                                                              \
            st_ = (_expr);                                                                  \
            braid_comm_leave(braid_plan_comm(p_));                                          \
        }                                                                                   \
        return braid_api_result(st_);                                                       \
    } while (0)

BRAID_EXPORT ncclResult_t braidPlanDestroy(braidPlan_t plan)
{
    if (plan == NULL)
        return braid_api_result(braid_err(BRAID_ERR_INVALID, "braidPlanDestroy: plan is NULL"));
    return braid_api_result(braid_plan_destroy((braid_plan_t *)plan));
}

static braid_status_t bucket_count(braid_plan_t *p, int *n)
{
    if (n == NULL)
        return braid_err(BRAID_ERR_INVALID, "braidPlanBucketCount: nbuckets is NULL");
    *n = braid_plan_nbuckets(p);
    return BRAID_OK;
}

BRAID_EXPORT ncclResult_t braidPlanBucketCount(braidPlan_t plan, int *nbuckets)
{
    PLAN_CALL("braidPlanBucketCount", plan, bucket_count(p_, nbuckets));
}

static braid_status_t bucket_info(braid_plan_t *p, int b, int *n, const int **t, size_t *bytes)
{
    if (b < 0 || b >= braid_plan_nbuckets(p))
        return braid_err(BRAID_ERR_INVALID, "braidPlanBucketInfo: bucket %d is not in the plan "
                         "(it has buckets 0 to %d)", b, braid_plan_nbuckets(p) - 1);
    braid_plan_bucket_info(p, b, n, t, bytes);
    return BRAID_OK;
}

BRAID_EXPORT ncclResult_t braidPlanBucketInfo(braidPlan_t plan, int bucket, int *ntensors,
                                              const int **tensors, size_t *wireBytes)
{
    PLAN_CALL("braidPlanBucketInfo", plan, bucket_info(p_, bucket, ntensors, tensors, wireBytes));
}

static braid_status_t shard_count(braid_plan_t *p, size_t *count)
{
    if (count == NULL)
        return braid_err(BRAID_ERR_INVALID, "braidPlanShardCount: count is NULL");
    return braid_plan_shard_count(p, count);
}

BRAID_EXPORT ncclResult_t braidPlanShardCount(braidPlan_t plan, size_t *count)
{
    PLAN_CALL("braidPlanShardCount", plan, shard_count(p_, count));
}

static braid_status_t set_shards(braid_plan_t *p, void *grad, const void *param)
{
    const void *bufs[2] = { grad, param };
    const char *names[2] = { "gradShard", "paramShard" };
    int want = braid_plan_ordinal(p), o;
    char a[32], b[32];
    for (int k = 0; k < 2; k++) {
        if (bufs[k] == NULL)
            continue;
        BRAID_CHECK(buf_ordinal(bufs[k], &o));
        if (o != want)
            return braid_err(BRAID_ERR_INVALID, "braidPlanSetShards: %s %p is in %s while the "
                             "plan's tensors are in %s", names[k], bufs[k],
                             place_name(o, a, sizeof(a)), place_name(want, b, sizeof(b)));
    }
    return braid_plan_set_shards(p, grad, param);
}

BRAID_EXPORT ncclResult_t braidPlanSetShards(braidPlan_t plan, void *gradShard,
                                             const void *paramShard)
{
    PLAN_CALL("braidPlanSetShards", plan, set_shards(p_, gradShard, paramShard));
}

/* Device plans: a capturing stream (CUDA graphs) is refused, as for any device call. */
static braid_status_t check_stream(braid_plan_t *p, const char *what, void *stream)
{
    return braid_plan_ordinal(p) >= 0 ? braid_api_check_capture(what, stream) : BRAID_OK;
}

static braid_status_t plan_ready(braid_plan_t *p, int tensor, void *stream)
{
    BRAID_CHECK(check_stream(p, "braidPlanReady", stream));
    return braid_plan_ready(p, tensor, stream);
}

BRAID_EXPORT ncclResult_t braidPlanReady(braidPlan_t plan, int tensor, cudaStream_t stream)
{
    PLAN_CALL("braidPlanReady", plan, plan_ready(p_, tensor, stream));
}

BRAID_EXPORT ncclResult_t braidPlanFlush(braidPlan_t plan)
{
    PLAN_CALL("braidPlanFlush", plan, braid_plan_flush(p_));
}

static braid_status_t plan_gather(braid_plan_t *p, int bucket, void *stream)
{
    BRAID_CHECK(check_stream(p, "braidPlanGather", stream));
    return braid_plan_gather(p, bucket, stream);
}

BRAID_EXPORT ncclResult_t braidPlanGather(braidPlan_t plan, int bucket, cudaStream_t stream)
{
    PLAN_CALL("braidPlanGather", plan, plan_gather(p_, bucket, stream));
}

static braid_status_t plan_test(braid_plan_t *p, int bucket, int *done)
{
    if (done == NULL)
        return braid_err(BRAID_ERR_INVALID, "braidPlanTest: done is NULL");
    return braid_plan_test(p, bucket, done);
}

BRAID_EXPORT ncclResult_t braidPlanTest(braidPlan_t plan, int bucket, int *done)
{
    PLAN_CALL("braidPlanTest", plan, plan_test(p_, bucket, done));
}

BRAID_EXPORT ncclResult_t braidPlanWait(braidPlan_t plan, int bucket)
{
    PLAN_CALL("braidPlanWait", plan, braid_plan_wait(p_, bucket));
}

BRAID_EXPORT ncclResult_t braidPlanRebuild(braidPlan_t plan)
{
    PLAN_CALL("braidPlanRebuild", plan, braid_plan_rebuild(p_));
}
