/*
 * braid's uneven collectives (include/braid.h): braidAllGatherV and braidReduceScatterV.
 *
 * They take the checks of the NCCL collectives (src/api/coll.h) and those of the per-rank
 * counts and displacements, then become a call of the even collective's kind whose count is
 * the total of the counts, with the two arrays (braid_call_t.vcounts, vdispls), which
 * src/core/enqueue.c builds on the ring (algorithms/ring.c) and nothing else. The arrays
 * are read only during the call, also in a group or on device buffers: the schedule keeps
 * the offsets. Every argument is checked before anything is touched.
 *
 *   all-gather      sendbuff [own]  -->  recvbuff  [ blk 0 ]  gap  [ blk 2 ] [ blk 1 ] ...
 *   reduce-scatter  sendbuff [ blk 0 ]  gap  [ blk 2 ] [ blk 1 ] ...  -->  recvbuff [own]
 *
 * Block p holds counts[p] elements at displs[p]; blocks may come in any order, with gaps,
 * and must not overlap (empty blocks are ignored).
 */
#include <stdint.h>
#include <stdlib.h>

#include "api/api.h"
#include "api/coll.h"
#include "braid.h"
#include "core/enqueue.h"

typedef struct v_args {
    const char *what;
    const char *counts_name;    /* "recvcounts" (all-gather) or "sendcounts" */
    const char *own_name;       /* "sendcount" (all-gather) or "recvcount" */
    const char *blocks_name;    /* the buffer of all blocks: "recvbuff" or "sendbuff" */
    size_t own;                 /* this rank's count, as passed */
    braid_call_t call;          /* count: the total, once checked */
} v_args_t;

typedef struct v_block {
    size_t displ, count;
    int rank;
} v_block_t;

/* Each block's byte range fits, this rank's count is its block's; the total into call. */
static braid_status_t v_check_counts(const braid_comm_t *comm, v_args_t *a, size_t es)
{
    const size_t *counts = a->call.vcounts, *displs = a->call.vdispls;
    if (counts == NULL || displs == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: %s is NULL on rank %d", a->what,
                         counts == NULL ? a->counts_name : "displs", comm->rank);
    size_t total = 0;
    for (int p = 0; p < comm->nranks; p++) {
        size_t c = counts[p], d = displs[p];
        if (c > (size_t)PTRDIFF_MAX / es || d > (size_t)PTRDIFF_MAX / es - c)
            return braid_err(BRAID_ERR_INVALID, "%s: %s[%d] = %zu at displs[%d] = %zu "
                             "overflows the byte size of %s (%zu-byte %s)", a->what,
                             a->counts_name, p, c, p, d, a->blocks_name, es,
                             braid_dtype_name(a->call.dtype));
        total += c;   /* below 2^63 each; blocks that do not overlap keep the sum exact */
    }
    if (a->own != counts[comm->rank])
        return braid_err(BRAID_ERR_INVALID, "%s: %s %zu on rank %d differs from %s[%d] = %zu "
                         "(a rank's %s is its entry of %s, which every rank passes alike)",
                         a->what, a->own_name, a->own, comm->rank, a->counts_name, comm->rank,
                         counts[comm->rank], a->own_name, a->counts_name);
    a->call.count = total;
    return BRAID_OK;
}

static int v_block_cmp(const void *x, const void *y)
{
    const v_block_t *a = x, *b = y;
    if (a->displ != b->displ)
        return a->displ < b->displ ? -1 : 1;
    return a->rank - b->rank;
}

static braid_status_t v_overlap_err(const v_args_t *a, const v_block_t *x, const v_block_t *y)
{
    return braid_err(BRAID_ERR_INVALID, "%s: the blocks of rank %d (displs %zu, %zu elements) "
                     "and rank %d (displs %zu, %zu elements) overlap in %s: give each rank's "
                     "block a place of its own", a->what, x->rank, x->displ, x->count, y->rank,
                     y->displ, y->count, a->blocks_name);
}

/* Non-empty blocks sorted by displacement: each ends before the next starts. */
static braid_status_t v_check_sorted(const v_args_t *a, v_block_t *b, int n)
{
    qsort(b, (size_t)n, sizeof(*b), v_block_cmp);
    for (int i = 1; i < n; i++)
        if (b[i].displ < b[i - 1].displ + b[i - 1].count)
            return v_overlap_err(a, &b[i - 1], &b[i]);
    return BRAID_OK;
}

/* No two non-empty blocks overlap: one pass when they come in order of displacement (the
 * usual layout), else a sorted copy. */
static braid_status_t v_check_overlap(const braid_comm_t *comm, const v_args_t *a)
{
    const size_t *counts = a->call.vcounts, *displs = a->call.vdispls;
    size_t end = 0;
    int sorted = 1, n = 0;
    for (int p = 0; p < comm->nranks && sorted; p++) {
        if (counts[p] == 0)
            continue;
        sorted = displs[p] >= end;
        end = displs[p] + counts[p];
    }
    if (sorted)
        return BRAID_OK;
    v_block_t *b = malloc((size_t)comm->nranks * sizeof(*b));
    if (b == NULL)
        return braid_err(BRAID_ERR_NOMEM, "%s: out of memory checking the blocks of %d ranks",
                         a->what, comm->nranks);
    for (int p = 0; p < comm->nranks; p++)
        if (counts[p] != 0)
            b[n++] = (v_block_t){ displs[p], counts[p], p };
    braid_status_t st = v_check_sorted(a, b, n);
    free(b);
    return st;
}

/* Buffers that move data are set (NULL is fine where this rank sends or receives nothing),
 * and where they are: host, or device for the proxy. */
static braid_status_t v_check_buffers(braid_comm_t *comm, v_args_t *a, void *stream)
{
    braid_call_t *c = &a->call;
    int gather = c->kind == BRAID_COLL_ALLGATHER;
    size_t nsend = gather ? a->own : c->count, nrecv = gather ? c->count : a->own;
    if (nsend > 0 && c->sendbuf == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: sendbuff is NULL with %zu elements to send "
                         "on rank %d", a->what, nsend, comm->rank);
    if (nrecv > 0 && c->recvbuf == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: recvbuff is NULL with %zu elements to "
                         "receive on rank %d", a->what, nrecv, comm->rank);
    return braid_api_buffers_place(comm, a->what, c->sendbuf, nsend > 0, c->recvbuf,
                                   nrecv > 0, stream, c);
}

static braid_status_t v_checks(braid_comm_t *comm, v_args_t *a, void *stream)
{
    const braid_call_t *c = &a->call;
    BRAID_CHECK(braid_api_check_dtype(a->what, (int)c->dtype));
    BRAID_CHECK(braid_api_check_op(comm, a->what, c->op, c->dtype,
                                   c->kind == BRAID_COLL_REDUCESCATTER));
    BRAID_CHECK(v_check_counts(comm, a, braid_dtype_size(c->dtype)));
    BRAID_CHECK(v_check_overlap(comm, a));
    if (c->count == 0)
        return BRAID_OK;   /* every count 0: nothing to do */
    return v_check_buffers(comm, a, stream);
}

/* A call that fails inside a group fails the whole group, as the NCCL calls do. */
static ncclResult_t v_run(braid_comm_t *comm, v_args_t *a, void *stream)
{
    braid_status_t st = braid_comm_enter(comm, a->what, 1);
    if (st >= 0) {
        st = v_checks(comm, a, stream);
        if (st >= 0 && a->call.count != 0)
            st = braid_enqueue(comm, &a->call);
        braid_comm_leave(comm);
    }
    if (st < 0)
        braid_group_fail(st);
    return braid_api_result(st);
}

BRAID_EXPORT ncclResult_t braidAllGatherV(const void *sendbuff, size_t sendcount, void *recvbuff,
                                          const size_t recvcounts[], const size_t displs[],
                                          ncclDataType_t datatype, ncclComm_t comm,
                                          cudaStream_t stream)
{
    v_args_t a = { .what = "braidAllGatherV", .counts_name = "recvcounts",
                   .own_name = "sendcount", .blocks_name = "recvbuff", .own = sendcount,
                   .call = { .kind = BRAID_COLL_ALLGATHER, .sendbuf = sendbuff,
                             .recvbuf = recvbuff, .dtype = (braid_dtype_t)datatype, .op = -1,
                             .root = -1, .vcounts = recvcounts, .vdispls = displs } };
    return v_run(comm, &a, stream);
}

BRAID_EXPORT ncclResult_t braidReduceScatterV(const void *sendbuff, const size_t sendcounts[],
                                              const size_t displs[], void *recvbuff,
                                              size_t recvcount, ncclDataType_t datatype,
                                              ncclRedOp_t op, ncclComm_t comm,
                                              cudaStream_t stream)
{
    v_args_t a = { .what = "braidReduceScatterV", .counts_name = "sendcounts",
                   .own_name = "recvcount", .blocks_name = "sendbuff", .own = recvcount,
                   .call = { .kind = BRAID_COLL_REDUCESCATTER, .sendbuf = sendbuff,
                             .recvbuf = recvbuff, .dtype = (braid_dtype_t)datatype,
                             .op = (int)op, .root = -1, .vcounts = sendcounts,
                             .vdispls = displs } };
    return v_run(comm, &a, stream);
}
