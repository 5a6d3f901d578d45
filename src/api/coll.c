/*
 * Collective and point-to-point entry points. Every argument is checked before anything is
 * touched; a bad one gives ncclInvalidArgument (or ncclInvalidUsage) with a last-error text
 * naming it and its value, and leaves buffers and communicator as they were.
 */
#include <stdint.h>
#include <string.h>

#include "algorithms/usched.h"
#include "api/api.h"
#include "api/coll.h"
#include "core/enqueue.h"
#include "device/device.h"
#include "rccl/rccl.h"

/* Which buffers a call needs on this rank: bit 0 send, bit 1 recv. */
#define NEED_SEND 1
#define NEED_RECV 2

typedef struct coll_args {
    const char *what;
    braid_call_t call;
    size_t send_elems;     /* elements read from sendbuf on this rank */
    size_t recv_elems;     /* elements written to recvbuf on this rank */
    int need;              /* NEED_SEND | NEED_RECV on this rank */
    void *stream;          /* the caller's stream */
    int has_root;          /* root (or peer) must be a rank */
} coll_args_t;

braid_status_t braid_api_check_dtype(const char *what, int datatype)
{
    if ((unsigned)datatype >= BRAID_NUM_DTYPES)
        return braid_err(BRAID_ERR_INVALID, "%s: datatype %d is out of range [0, %d)", what,
                         datatype, BRAID_NUM_DTYPES);
    return BRAID_OK;
}

braid_status_t braid_api_check_op(const braid_comm_t *comm, const char *what, int op,
                                  braid_dtype_t datatype, int reduces)
{
    if (op < 0 && reduces)
        return braid_err(BRAID_ERR_INVALID, "%s: op %d is not a reduction operator", what, op);
    if (op <= 4)
        return BRAID_OK;
    int idx = op - 5;
    if (idx >= comm->npremuls || !comm->premuls[idx].in_use)
        return braid_err(BRAID_ERR_INVALID, "%s: op %d is neither a built-in ncclRedOp_t (0-4) "
                         "nor a live ncclRedOpCreatePreMulSum operator of this communicator",
                         what, op);
    if (comm->premuls[idx].dtype != datatype)
        return braid_err(BRAID_ERR_INVALID, "%s: op %d was created for datatype %s but the call "
                         "uses %s", what, op, braid_dtype_name(comm->premuls[idx].dtype),
                         braid_dtype_name(datatype));
    return BRAID_OK;
}

static braid_status_t check_sizes(const braid_comm_t *comm, coll_args_t *a, size_t mult_send,
                                  size_t mult_recv)
{
    size_t es = braid_dtype_size(a->call.dtype), c = a->call.count;
    (void)comm;
    if (c != 0 && (c > SIZE_MAX / es / mult_send || c > SIZE_MAX / es / mult_recv ||
                   c * es * (mult_send > mult_recv ? mult_send : mult_recv) > (size_t)PTRDIFF_MAX))
        return braid_err(BRAID_ERR_INVALID, "%s: count %zu of %s overflows the byte size of the "
                         "buffers (x%zu ranks)", a->what, c, braid_dtype_name(a->call.dtype),
                         mult_send > mult_recv ? mult_send : mult_recv);
    a->send_elems = c * mult_send;
    a->recv_elems = c * mult_recv;
    return BRAID_OK;
}

static braid_status_t check_args(const braid_comm_t *comm, coll_args_t *a)
{
    const braid_call_t *c = &a->call;
    BRAID_CHECK(braid_api_check_dtype(a->what, (int)c->dtype));
    int reduces = c->kind == BRAID_COLL_ALLREDUCE || c->kind == BRAID_COLL_REDUCE ||
                  c->kind == BRAID_COLL_REDUCESCATTER;
    BRAID_CHECK(braid_api_check_op(comm, a->what, c->op, c->dtype, reduces));
    if (a->has_root && (c->root < 0 || c->root >= comm->nranks))
        return braid_err(BRAID_ERR_INVALID, "%s: %s %d is out of range [0, %d)", a->what,
                         c->kind == BRAID_COLL_SEND || c->kind == BRAID_COLL_RECV ? "peer" : "root",
                         c->root, comm->nranks);
    if (c->count == 0)
        return BRAID_OK;
    if ((a->need & NEED_SEND) && c->sendbuf == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: sendbuff is NULL with count %zu on rank %d",
                         a->what, c->count, comm->rank);
    if ((a->need & NEED_RECV) && c->recvbuf == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: recvbuff is NULL with count %zu on rank %d",
                         a->what, c->count, comm->rank);
    return BRAID_OK;
}

/* Sizes per collective: (send multiple, recv multiple) of count on this rank. */
static braid_status_t check_shape(const braid_comm_t *comm, coll_args_t *a)
{
    size_t n = (size_t)comm->nranks;
    int root = a->call.root == comm->rank;
    switch (a->call.kind) {
    case BRAID_COLL_ALLGATHER:
        return check_sizes(comm, a, 1, n);
    case BRAID_COLL_REDUCESCATTER:
        return check_sizes(comm, a, n, 1);
    case BRAID_COLL_ALLTOALL:
        return check_sizes(comm, a, n, n);
    case BRAID_COLL_GATHER:
        return check_sizes(comm, a, 1, root ? n : 1);
    case BRAID_COLL_SCATTER:
        return check_sizes(comm, a, root ? n : 1, 1);
    default:
        return check_sizes(comm, a, 1, 1);
    }
}

braid_status_t braid_api_check_capture(const char *what, void *stream)
{
    int capturing = 0;
    BRAID_CHECK(braid_device()->stream_capturing(stream, &capturing));
    if (capturing)
        return braid_err(BRAID_ERR_USAGE, "%s: the stream is being captured (CUDA graph): "
                         "braid does not support stream capture; make the call outside the "
                         "capture", what);
    return BRAID_OK;
}

braid_status_t braid_api_buffers_place(braid_comm_t *comm, const char *what, const void *sbuf,
                                       int has_send, const void *rbuf, int has_recv,
                                       void *stream, braid_call_t *call)
{
    const braid_device_ops_t *dev = braid_device();
    if (dev == &braid_device_host) {   /* no GPU backend: the CPU must be able to read */
        if (comm->check_host_ptrs && has_send)
            BRAID_CHECK(braid_device_check_host(sbuf, what, "sendbuff"));
        if (comm->check_host_ptrs && has_recv)
            BRAID_CHECK(braid_device_check_host(rbuf, what, "recvbuff"));
        return BRAID_OK;
    }
    braid_ptr_info_t s = { BRAID_MEM_HOST, -1, NULL }, r = { BRAID_MEM_HOST, -1, NULL };
    if (has_send)
        BRAID_CHECK(dev->ptr_info(sbuf, &s));
    if (has_recv)
        BRAID_CHECK(dev->ptr_info(rbuf, &r));
    int sdev = s.kind == BRAID_MEM_DEVICE || s.kind == BRAID_MEM_MANAGED;
    int rdev = r.kind == BRAID_MEM_DEVICE || r.kind == BRAID_MEM_MANAGED;
    if (!sdev && !rdev)
        return BRAID_OK;
    if ((has_send && s.kind == BRAID_MEM_HOST) || (has_recv && r.kind == BRAID_MEM_HOST))
        return braid_err(BRAID_ERR_INVALID, "%s: %s %p is device memory but %s %p is pageable "
                         "host memory on rank %d: give both as device memory (or pinned "
                         "host memory), or both as host memory", what,
                         sdev ? "sendbuff" : "recvbuff", sdev ? sbuf : rbuf,
                         sdev ? "recvbuff" : "sendbuff", sdev ? rbuf : sbuf, comm->rank);
    if (sdev && rdev && s.ordinal != r.ordinal)
        return braid_err(BRAID_ERR_INVALID, "%s: sendbuff is on device %d and recvbuff on "
                         "device %d: one call uses one device", what, s.ordinal, r.ordinal);
    BRAID_CHECK(braid_api_check_capture(what, stream));
    call->on_device = 1;
    call->ordinal = sdev ? s.ordinal : r.ordinal;
    call->stream = stream;
    return BRAID_OK;
}

static braid_status_t check_buffers(braid_comm_t *comm, coll_args_t *a)
{
    if (a->call.count == 0)
        return BRAID_OK;
    return braid_api_buffers_place(comm, a->what, a->call.sendbuf, (a->need & NEED_SEND) != 0,
                                   a->call.recvbuf, (a->need & NEED_RECV) != 0, a->stream,
                                   &a->call);
}

static braid_status_t coll_run(braid_comm_t *comm, coll_args_t *a)
{
    BRAID_CHECK(braid_comm_enter(comm, a->what, 1));
    braid_status_t st = check_args(comm, a);
    if (st >= 0)
        st = check_shape(comm, a);
    if (st >= 0)
        st = check_buffers(comm, a);
    if (st >= 0 && a->call.count != 0)
        st = braid_enqueue(comm, &a->call);
    braid_comm_leave(comm);
    return st;
}

/* A call that fails inside a group fails the whole group: ncclGroupEnd reports the error
 * and runs nothing, as in NCCL. */
static ncclResult_t coll(braid_comm_t *comm, coll_args_t *a)
{
    braid_status_t st = coll_run(comm, a);
    if (st < 0)
        braid_group_fail(st);
    return braid_api_result(st);
}

#define CALL(_kind, _s, _r, _n, _dt, _op, _root)                                            \
    { .kind = (_kind), .sendbuf = (_s), .recvbuf = (_r), .count = (_n),                     \
      .dtype = (braid_dtype_t)(_dt), .op = (int)(_op), .root = (_root) }

BRAID_API_TWIN(ncclAllReduce);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    coll_args_t a = { .what = "ncclAllReduce", .need = NEED_SEND | NEED_RECV,
                      .call = CALL(BRAID_COLL_ALLREDUCE, sendbuff, recvbuff, count, datatype, op,
                                   -1) };
    a.stream = stream;
    return coll(comm, &a);
}

BRAID_API_TWIN(ncclBroadcast);
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    int is_root = comm != NULL && braid_comm_is_live(comm) && comm->rank == root;
    coll_args_t a = { .what = "ncclBroadcast", .has_root = 1,
                      .need = NEED_RECV | (is_root ? NEED_SEND : 0),
                      .call = CALL(BRAID_COLL_BROADCAST, sendbuff, recvbuff, count, datatype, -1,
                                   root) };
    a.stream = stream;
    return coll(comm, &a);
}

BRAID_API_TWIN(ncclBcast);
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream)
{
    coll_args_t a = { .what = "ncclBcast", .has_root = 1, .need = NEED_SEND | NEED_RECV,
                      .call = CALL(BRAID_COLL_BROADCAST, buff, buff, count, datatype, -1, root) };
    a.stream = stream;
    return coll(comm, &a);
}

BRAID_API_TWIN(ncclReduce);
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    int is_root = comm != NULL && braid_comm_is_live(comm) && comm->rank == root;
    coll_args_t a = { .what = "ncclReduce", .has_root = 1,
                      .need = NEED_SEND | (is_root ? NEED_RECV : 0),
                      .call = CALL(BRAID_COLL_REDUCE, sendbuff, recvbuff, count, datatype, op,
                                   root) };
    a.stream = stream;
    return coll(comm, &a);
}

BRAID_API_TWIN(ncclAllGather);
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    coll_args_t a = { .what = "ncclAllGather", .need = NEED_SEND | NEED_RECV,
                      .call = CALL(BRAID_COLL_ALLGATHER, sendbuff, recvbuff, sendcount, datatype,
                                   -1, -1) };
    a.stream = stream;
    return coll(comm, &a);
}

BRAID_API_TWIN(ncclReduceScatter);
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    coll_args_t a = { .what = "ncclReduceScatter", .need = NEED_SEND | NEED_RECV,
                      .call = CALL(BRAID_COLL_REDUCESCATTER, sendbuff, recvbuff, recvcount,
                                   datatype, op, -1) };
    a.stream = stream;
    return coll(comm, &a);
}

BRAID_API_TWIN(ncclAlltoAll);
ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    coll_args_t a = { .what = "ncclAlltoAll", .need = NEED_SEND | NEED_RECV,
                      .call = CALL(BRAID_COLL_ALLTOALL, sendbuff, recvbuff, count, datatype, -1,
                                   -1) };
    a.stream = stream;
    return coll(comm, &a);
}

BRAID_API_TWIN(ncclGather);
ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream)
{
    int is_root = comm != NULL && braid_comm_is_live(comm) && comm->rank == root;
    coll_args_t a = { .what = "ncclGather", .has_root = 1,
                      .need = NEED_SEND | (is_root ? NEED_RECV : 0),
                      .call = CALL(BRAID_COLL_GATHER, sendbuff, recvbuff, count, datatype, -1,
                                   root) };
    a.stream = stream;
    return coll(comm, &a);
}

BRAID_API_TWIN(ncclScatter);
ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    int is_root = comm != NULL && braid_comm_is_live(comm) && comm->rank == root;
    coll_args_t a = { .what = "ncclScatter", .has_root = 1,
                      .need = NEED_RECV | (is_root ? NEED_SEND : 0),
                      .call = CALL(BRAID_COLL_SCATTER, sendbuff, recvbuff, count, datatype, -1,
                                   root) };
    a.stream = stream;
    return coll(comm, &a);
}

BRAID_API_TWIN(ncclSend);
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    coll_args_t a = { .what = "ncclSend", .has_root = 1, .need = NEED_SEND,
                      .call = CALL(BRAID_COLL_SEND, sendbuff, NULL, count, datatype, -1, peer) };
    a.stream = stream;
    return coll(comm, &a);
}

BRAID_API_TWIN(ncclRecv);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    coll_args_t a = { .what = "ncclRecv", .has_root = 1, .need = NEED_RECV,
                      .call = CALL(BRAID_COLL_RECV, NULL, recvbuff, count, datatype, -1, peer) };
    a.stream = stream;
    return coll(comm, &a);
}

/* ---- RCCL's all-to-all spellings ----------------------------------------------------- */

BRAID_API_TWIN(ncclAllToAll);
ncclResult_t ncclAllToAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, hipStream_t stream)
{
    coll_args_t a = { .what = "ncclAllToAll", .need = NEED_SEND | NEED_RECV,
                      .call = CALL(BRAID_COLL_ALLTOALL, sendbuff, recvbuff, count, datatype, -1,
                                   -1) };
    a.stream = stream;
    return coll(comm, &a);
}

/* Checks one side of an all-to-allv: counts and displacements of nranks peers. */
static braid_status_t check_v_side(const braid_comm_t *comm, const char *what, const char *side,
                                   const void *buf, const size_t *counts, const size_t *displs,
                                   size_t es, size_t *total_p)
{
    if (counts == NULL || displs == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: %scounts or %sdispls is NULL", what, side,
                         side);
    size_t total = 0;
    for (int p = 0; p < comm->nranks; p++) {
        size_t c = counts[p], d = displs[p];
        if (c > (size_t)PTRDIFF_MAX / es || d > (size_t)PTRDIFF_MAX / es - c)
            return braid_err(BRAID_ERR_INVALID, "%s: %scounts[%d] = %zu at %sdispls[%d] = %zu "
                             "overflows the buffer's byte size", what, side, p, c, side, p, d);
        total += c;
    }
    if (total > 0 && buf == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: %sbuff is NULL with %zu elements to move", what,
                         side, total);
    *total_p = total;
    return BRAID_OK;
}

static braid_status_t alltoallv(const void *sbuf, const size_t *scounts, const size_t *sdispls,
                                void *rbuf, const size_t *rcounts, const size_t *rdispls,
                                ncclDataType_t dt, braid_comm_t *comm, void *stream)
{
    const char *what = "ncclAllToAllv";
    size_t ns = 0, nr = 0;
    BRAID_CHECK(braid_comm_enter(comm, what, 1));
    braid_status_t st = BRAID_OK;
    st = braid_api_check_dtype(what, (int)dt);
    size_t es = st == BRAID_OK ? braid_dtype_size((braid_dtype_t)dt) : 1;
    if (st == BRAID_OK)
        st = check_v_side(comm, what, "send", sbuf, scounts, sdispls, es, &ns);
    if (st == BRAID_OK)
        st = check_v_side(comm, what, "recv", rbuf, rcounts, rdispls, es, &nr);
    braid_call_t call = { .kind = BRAID_COLL_ALLTOALLV, .sendbuf = sbuf, .recvbuf = rbuf,
                          .count = ns + nr, .dtype = (braid_dtype_t)dt, .op = -1,
                          .root = -1, .sendcounts = scounts, .sdispls = sdispls,
                          .recvcounts = rcounts, .rdispls = rdispls };
    if (st == BRAID_OK)
        st = braid_api_buffers_place(comm, what, sbuf, ns > 0, rbuf, nr > 0, stream, &call);
    if (st == BRAID_OK)
        st = braid_enqueue(comm, &call);
    braid_comm_leave(comm);
    return st;
}

BRAID_API_TWIN(ncclAllToAllv);
ncclResult_t ncclAllToAllv(const void *sendbuff, const size_t sendcounts[], const size_t sdispls[],
                           void *recvbuff, const size_t recvcounts[], const size_t rdispls[],
                           ncclDataType_t datatype, ncclComm_t comm, hipStream_t stream)
{
    braid_status_t st = alltoallv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls,
                                  datatype, comm, stream);
    if (st < 0)
        braid_group_fail(st);
    return braid_api_result(st);
}

/* RCCL's MSCCL: run a schedule of mscclLoadAlgo (src/api/msccl_api.c) as the collective it
 * is written for, with that collective's checks; `count` as that collective takes it. */
BRAID_API_TWIN(mscclRunAlgo);
ncclResult_t mscclRunAlgo(const void *sendBuff, const size_t sendCounts[], const size_t sDisPls[],
                          void *recvBuff, const size_t recvCounts[], const size_t rDisPls[],
                          size_t count, ncclDataType_t dataType, int root, int peer, ncclRedOp_t op,
                          mscclAlgoHandle_t mscclAlgoHandle, ncclComm_t comm, hipStream_t stream)
{
    (void)sendCounts, (void)sDisPls, (void)recvCounts, (void)rDisPls, (void)root, (void)peer;
    const braid_algo_t *algo = braid_usched_algo(mscclAlgoHandle);
    if (algo == NULL) {
        braid_status_t st = braid_err(BRAID_ERR_INVALID, "mscclRunAlgo: handle %d: no such "
                                      "schedule is loaded", (int)mscclAlgoHandle);
        braid_group_fail(st);
        return braid_api_result(st);
    }
    braid_coll_kind_t kind = braid_algo_kind(algo);
    int reduces = kind == BRAID_COLL_ALLREDUCE || kind == BRAID_COLL_REDUCESCATTER;
    coll_args_t a = { .what = "mscclRunAlgo", .need = NEED_SEND | NEED_RECV,
                      .call = CALL(kind, sendBuff, recvBuff, count, dataType,
                                   reduces ? (int)op : -1, -1) };
    a.call.algo = algo;
    a.stream = stream;
    return coll(comm, &a);
}
