/*
 * A bucket plan's state, shared by src/core/plan.c (building) and plan_run.c (running).
 */
#ifndef BRAID_CORE_PLAN_INT_H
#define BRAID_CORE_PLAN_INT_H

#include "core/plan.h"

typedef struct plan_bucket {
    struct braid_plan *plan;
    int *tensors, ntensors;         /* indices into the plan's tensors, in flat order */
    size_t flat;                    /* wire elements, padding included */
    braid_seg_t *grads, *outs, *params;   /* per tensor, by flat offset (outs: DDP with out
                                           * tensors; params: FSDP, HSDP) */
    braid_seg_t gshard, pshard;     /* FSDP, HSDP: this rank's shards */
    braid_view_t rd_send, rd_recv;  /* the reduction: all-reduce or reduce-scatter */
    braid_view_t ag_send, ag_recv;  /* FSDP, HSDP: the all-gather of the parameters */
    braid_view_t ar_view;           /* HSDP: the shard across replicas, read and written */
    size_t *vcounts, *vdispls;      /* FSDP, HSDP: every rank's shard, flat elements */
    int even;                       /* all shards the same size: plain collectives */
    size_t shard_off;               /* this rank's shard in the shard buffers */
    int pending;                    /* tensors not marked ready in this iteration */
    void *stream;                   /* device plans: the stream its tensors were marked on
                                     * in this iteration */
    int has_stream;
    int inflight;                   /* collectives launched, not finished (plan lock) */
    int waiters;                    /* threads in braidPlanWait for this bucket */
    braid_status_t status;          /* the first failure of its collectives (plan lock) */
} plan_bucket_t;

struct braid_plan {
    braid_comm_t *comm;
    braid_plan_spec_t spec;         /* cap resolved */
    braid_plan_tensor_t *tensors;
    int ntensors;
    plan_bucket_t *buckets;
    int nbuckets;
    int *bucket_of;                 /* tensor -> bucket */
    braid_redop_spec_t redop;       /* the reduction, lowered */
    braid_redop_spec_t ar_redop;    /* HSDP: across the replicas */
    void *gshard;
    const void *pshard;
    size_t shard_count;
    /* readiness (plan lock) */
    char *marked;                   /* per tensor, this iteration */
    int *order, norder;             /* this iteration's marks */
    int *last_order, last_norder;   /* the last complete iteration's; norder -1: none */
    int next;                       /* the next bucket to launch */
    pthread_mutex_t lock;
    pthread_cond_t cond;            /* what a waiter waits for finished */
    int inflight;
    int waiters_all;                /* threads in braidPlanWait(-1) */
};

/* Group the tensors into buckets in `order` (every tensor once) and lay out their views
 * and shards. */
braid_status_t braid_plan_bucketize(braid_plan_t *plan, const int *order);

#endif
