/*
 * Bucket plans (braid.h's braidPlan*): the gradient and parameter traffic of data-parallel
 * training, one collective per bucket of tensors, launched as the tensors become ready and
 * run on the communicator's proxy while the caller goes on. The collectives read and write
 * the tensors through views (src/exec/exec.h), so casts, scaling, packing and unpacking
 * are part of their first and last steps (src/core/plan.c builds, src/core/plan_run.c
 * runs).
 */
#ifndef BRAID_CORE_PLAN_H
#define BRAID_CORE_PLAN_H

#include "core/comm.h"

typedef enum {
    BRAID_PLAN_DDP = 0,         /* all-reduce of the gradients */
    BRAID_PLAN_FSDP = 1,        /* reduce-scatter of gradients, all-gather of parameters */
    BRAID_PLAN_HSDP = 2,        /* FSDP inside the comm, then all-reduce of the shards across
                                 * the replica comm */
} braid_plan_pattern_t;

typedef struct braid_plan_tensor {
    void *grad, *out, *param;
    size_t count;
    braid_dtype_t dtype;
} braid_plan_tensor_t;

typedef struct braid_plan_spec {
    braid_plan_pattern_t pattern;
    size_t cap, first_cap;      /* wire bytes; cap 0: automatic */
    size_t pad;                 /* elements; >= 1 */
    braid_dtype_t wire, acc, out;
    int op;                     /* ncclRedOp_t value, 0..4 */
    double premul, prediv, postdiv;
    int accumulate;
    braid_comm_t *replica;      /* HSDP */
    int ordinal;                /* the tensors' device; -1: host memory */
} braid_plan_spec_t;

typedef struct braid_plan braid_plan_t;

/* Collective over comm (and spec->replica). Arguments were checked by the caller, except
 * what needs the peers: every rank's tensors and spec must agree. */
braid_status_t braid_plan_create(braid_comm_t *comm, const braid_plan_tensor_t *tensors,
                                 int ntensors, const braid_plan_spec_t *spec,
                                 braid_plan_t **plan_p);
/* BRAID_ERR_USAGE (and nothing freed) while a bucket is in flight. */
braid_status_t braid_plan_destroy(braid_plan_t *plan);

braid_comm_t *braid_plan_comm(const braid_plan_t *plan);
int braid_plan_ordinal(const braid_plan_t *plan);      /* -1: host memory */
int braid_plan_ntensors(const braid_plan_t *plan);
int braid_plan_nbuckets(const braid_plan_t *plan);
void braid_plan_bucket_info(const braid_plan_t *plan, int b, int *ntensors_p,
                            const int **tensors_p, size_t *wire_bytes_p);
braid_status_t braid_plan_shard_count(const braid_plan_t *plan, size_t *count_p);
braid_status_t braid_plan_set_shards(braid_plan_t *plan, void *grad, const void *param);

/* stream: device plans, the stream the tensor's gradient was computed on. */
braid_status_t braid_plan_ready(braid_plan_t *plan, int tensor, void *stream);
braid_status_t braid_plan_flush(braid_plan_t *plan);
braid_status_t braid_plan_gather(braid_plan_t *plan, int bucket, void *stream);
/* The bucket's last collective: *done_p, and its status once done. */
braid_status_t braid_plan_test(braid_plan_t *plan, int bucket, int *done_p);
/* bucket -1: every bucket. */
braid_status_t braid_plan_wait(braid_plan_t *plan, int bucket);
braid_status_t braid_plan_rebuild(braid_plan_t *plan);

#endif
