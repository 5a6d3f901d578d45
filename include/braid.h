/*
 * braid's own extensions to the NCCL API.
 *
 * Everything here is braid-only: programs that use it must be linked against braid and
 * should check BRAID_VERSION_* at build time. The NCCL API itself comes from nccl.h,
 * which this header includes.
 */
#ifndef BRAID_H
#define BRAID_H

#include "nccl.h"

#define BRAID_VERSION_MAJOR 0
#define BRAID_VERSION_MINOR 1
#define BRAID_VERSION_PATCH 0
#define BRAID_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The version of the braid library actually loaded, as "MAJOR.MINOR.PATCH" (compare with
 * BRAID_VERSION_STRING, the version of this header). Static storage; never NULL.
 * ncclGetVersion, by contrast, reports the NCCL version braid is compatible with.
 */
const char *braidGetVersionString(void);

/* ======================================================================================
 * Uneven collectives (per-rank counts), on host and device buffers like any NCCL call.
 * ====================================================================================== */

/*
 * All-gather with a count per rank: rank p's `sendcount` elements land at
 * recvbuff + displs[p] elements, where sendcount on rank p must equal recvcounts[p] (every
 * rank passes the same recvcounts and displs). In place when
 * sendbuff == recvbuff + displs[rank]. Blocks must not overlap. A count of 0 for a rank is
 * allowed; all counts 0 is a no-op.
 */
ncclResult_t braidAllGatherV(const void *sendbuff, size_t sendcount, void *recvbuff,
                             const size_t recvcounts[], const size_t displs[],
                             ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/*
 * Reduce-scatter with a count per rank: the blocks sendbuff + displs[p] of sendcounts[p]
 * elements are reduced over all ranks and rank p receives block p in recvbuff, where
 * recvcount on rank p must equal sendcounts[p] (every rank passes the same sendcounts and
 * displs). In place when recvbuff == sendbuff + displs[rank].
 */
ncclResult_t braidReduceScatterV(const void *sendbuff, const size_t sendcounts[],
                                 const size_t displs[], void *recvbuff, size_t recvcount,
                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                 cudaStream_t stream);

/* ======================================================================================
 * Bucket plans: gradient and parameter traffic of data-parallel training, fused.
 *
 * A plan is made once, collectively, over the model's tensors. It groups them into buckets
 * and runs one collective per bucket, launched as soon as the bucket's tensors are marked
 * ready. The collective reads the tensors where they are (casting each to the wire type and
 * scaling it as it goes into the first step) and writes the results back where they belong
 * (casting, scaling, copying or accumulating in the last step): no flat bucket buffer is
 * packed before or unpacked after. docs/BUCKETS.md shows DDP and FSDP loops.
 * ====================================================================================== */

typedef struct braidPlan *braidPlan_t;

typedef enum {
    braidPatternAllReduce = 0,  /* DDP: all-reduce of the gradients */
    braidPatternShard = 1,      /* FSDP: reduce-scatter of the gradients into this rank's
                                 * shard; all-gather of the parameters from it */
    braidPatternHybrid = 2      /* HSDP: reduce-scatter inside the shard group (the plan's
                                 * communicator), then all-reduce of the shard across the
                                 * replicas (config.replicaComm) */
} braidPattern_t;

typedef enum {
    braidUnpackCopy = 0,        /* the result replaces the output */
    braidUnpackAccumulate = 1   /* the result is added to the output (gradient
                                 * accumulation into fp32 "main" gradients) */
} braidUnpack_t;

/* One tensor of the model, in the order the framework lists them. */
typedef struct braidTensor {
    void *grad;             /* its gradient: what the reduction reads */
    void *out;              /* DDP: where the reduced gradient goes, of config.outType;
                             * NULL: back into grad, in grad's type */
    void *param;            /* FSDP, HSDP: the unsharded parameter that braidPlanGather
                             * writes; ignored for DDP */
    size_t count;           /* elements */
    ncclDataType_t type;    /* of grad and param: a floating-point type */
} braidTensor_t;

typedef struct braidPlanConfig {
    size_t size;                /* sizeof(braidPlanConfig_t): fields past it are defaults */
    braidPattern_t pattern;
    size_t bucketBytes;         /* most wire bytes per bucket; 0: automatic, the smallest
                                 * size at which the tuner's model predicts 90 % of the
                                 * peak bus bandwidth on this communicator */
    size_t firstBucketBytes;    /* most wire bytes of the first bucket (the last tensors'
                                 * gradients are ready first: a small one starts the
                                 * traffic early, as DDP's 1 MiB); 0: bucketBytes */
    size_t padMultiple;         /* a bucket's elements are padded with zeros to a multiple
                                 * of this (0 or 1: no padding). FSDP, HSDP: a rank's shard
                                 * of a bucket is a whole number of these units, as even as
                                 * can be; where the units do not divide by the ranks,
                                 * shards differ by one unit (the V collectives) */
    ncclDataType_t wireType;    /* what travels: ncclFloat32, ncclBfloat16, ncclFloat16 ... */
    ncclDataType_t accType;     /* what sums are taken in: ncclFloat32 or ncclFloat64 */
    ncclDataType_t outType;     /* DDP: of the out tensors; FSDP, HSDP: of the shards */
    ncclRedOp_t op;             /* ncclSum, ncclAvg, ncclProd, ncclMax or ncclMin */
    double preMul;              /* each rank's contribution is multiplied by preMul and
                                 * divided by preDivide before the reduction (ncclPreMulSum
                                 * semantics), the result divided by postDivide after it;
                                 * 1, 1, 1: none */
    double preDivide;
    double postDivide;
    braidUnpack_t unpack;       /* DDP out tensors and FSDP gradient shards */
    ncclComm_t replicaComm;     /* HSDP: the communicator across replica groups */
} braidPlanConfig_t;

#define BRAID_PLAN_CONFIG_INITIALIZER                                                      \
    { sizeof(braidPlanConfig_t), braidPatternAllReduce, 0, 0, 1, ncclFloat32, ncclFloat32, \
      ncclFloat32, ncclSum, 1.0, 1.0, 1.0, braidUnpackCopy, NULL }

/*
 * Make a plan over `ntensors` tensors; collective over `comm` (and, for HSDP, over
 * config->replicaComm: every rank calls it). Every rank must give the same counts, types
 * and config (addresses may differ): a mismatch fails on every rank, naming the rank and
 * the first tensor that differ. Buckets hold consecutive tensors, filled from the last
 * tensor to the first (backward order: the last layers' gradients are ready first), each
 * up to its cap (one tensor larger than the cap is a bucket of its own). The tensors'
 * memory must stay valid until braidPlanDestroy. Buffers are all host memory or all
 * device memory of one device (ncclInvalidArgument otherwise). Refused with
 * ncclInvalidArgument: out tensors given for some tensors and not others (params alike),
 * braidUnpackAccumulate without out tensors (DDP) or with HSDP. Ranks whose plans differ
 * all get ncclInvalidUsage.
 *
 * The plan's collectives are calls on comm (and replicaComm): other calls on them must be
 * made in the same order on every rank, as always; calls made between iterations, with
 * nothing in flight, are.
 */
ncclResult_t braidPlanCreate(ncclComm_t comm, const braidTensor_t *tensors, int ntensors,
                             const braidPlanConfig_t *config, braidPlan_t *plan);

/* Free the plan. ncclInvalidUsage, and nothing freed, while a bucket is in flight. */
ncclResult_t braidPlanDestroy(braidPlan_t plan);

/* How many buckets the plan has; bucket 0 is launched first. */
ncclResult_t braidPlanBucketCount(braidPlan_t plan, int *nbuckets);

/* Bucket `bucket`: its tensors (indices into the plan's list; static storage of the plan,
 * valid until it is rebuilt or destroyed) and its wire bytes (padding included). Any
 * output may be NULL. */
ncclResult_t braidPlanBucketInfo(braidPlan_t plan, int bucket, int *ntensors,
                                 const int **tensors, size_t *wireBytes);

/* FSDP, HSDP: elements of config->outType in this rank's shard buffers (the gradient shard
 * and the parameter shard have the same layout: every bucket's shard in bucket order).
 * Bucket b's flat elements are its tensors in braidPlanBucketInfo's order, then zeros up
 * to a multiple of padMultiple (u); its U = flat / u units are split in rank order, rank r
 * taking U / nranks units, plus one when r < U % nranks. */
ncclResult_t braidPlanShardCount(braidPlan_t plan, size_t *count);

/* FSDP, HSDP: this rank's shard buffers, set between iterations with nothing in flight
 * (before the first braidPlanReady or braidPlanGather): the reduce-scatter writes
 * gradShard, braidPlanGather reads paramShard (either may be NULL where that direction is
 * unused; a mark or gather that needs it is then ncclInvalidUsage). */
ncclResult_t braidPlanSetShards(braidPlan_t plan, void *gradShard, const void *paramShard);

/*
 * Tensor `tensor`'s gradient is complete (for device buffers: once the work queued on
 * `stream` so far has run; a bucket's tensors are marked on one stream, and its collective
 * starts after what that stream has queued when it is launched; host buffers: stream is
 * not used). Launches every bucket whose tensors are all ready and whose predecessors are
 * launched; the caller goes on while it runs (the launched tensors must not be written
 * until their bucket is done). Marking a tensor twice in one iteration, or one not in the
 * plan, is ncclInvalidArgument and changes nothing. An iteration ends when every bucket
 * has been launched (by marks or braidPlanFlush); its order of marks is kept for
 * braidPlanRebuild.
 */
ncclResult_t braidPlanReady(braidPlan_t plan, int tensor, cudaStream_t stream);

/* Launch every bucket not launched yet in this iteration, ready or not (tensors never
 * marked, like unused parameters, are reduced as they are), and end the iteration. An
 * iteration without marks (its marks already launched every bucket) has nothing to
 * flush. */
ncclResult_t braidPlanFlush(braidPlan_t plan);

/* FSDP, HSDP: all-gather bucket `bucket`'s parameters from every rank's paramShard into
 * the tensors' param buffers (cast from outType through the wire type), asynchronously. */
ncclResult_t braidPlanGather(braidPlan_t plan, int bucket, cudaStream_t stream);

/* The bucket's last launched collective (reduction or gather): *done = 1 once it has
 * finished (also for a bucket not launched yet), with its status returned (a failure is
 * returned by every later test or wait of that bucket too). */
ncclResult_t braidPlanTest(braidPlan_t plan, int bucket, int *done);

/* Wait for the bucket's last launched collective; bucket -1: for every bucket. */
ncclResult_t braidPlanWait(braidPlan_t plan, int bucket);

/*
 * Re-bucket the tensors in the order in which rank 0 marked them ready in the last
 * complete iteration (DDP's bucket rebuild after the first step), with the same caps;
 * collective, with nothing in flight. A plan that has not completed an iteration keeps
 * its buckets. DDP plans only (FSDP, HSDP: ncclInvalidUsage; the shards would move).
 */
ncclResult_t braidPlanRebuild(braidPlan_t plan);

#ifdef __cplusplus
}
#endif

#endif
