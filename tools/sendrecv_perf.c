/*
 * sendrecv_perf: ncclSend/ncclRecv bandwidth and correctness, with nccl-tests' flags and
 * output (see perf_common.h for the driver and `sendrecv_perf -h` for the flags).
 *
 *     sendrecv_perf -t 2 -b 8 -e 64M -f 4             2 ranks as threads of one process
 *     braidrun -n 4 sendrecv_perf -b 8 -e 64M -f 4    4 processes
 *
 * In one group, rank r sends size bytes to r+1 and receives size bytes from r-1 (a ring
 * shift). As in nccl-tests, -o is swept and printed though no op applies, and the
 * in-place case (sendbuff == recvbuff, which NCCL does not define) is timed with #wrong
 * N/A. Bus bandwidth: each link carries the buffer once, so busbw = algbw.
 */
#include "perf_common.h"

/* Input: this rank's values; expected: the values of rank r-1. */
static void sendrecv_fill(const perf_data_t *d, const perf_sizes_t *s, int rank, void *in,
                          void *expected)
{
    perf_data_fill(d, rank, in, 0, s->send_count);
    if (expected != NULL)
        perf_data_fill(d, (rank + d->nranks - 1) % d->nranks, expected, 0, s->recv_count);
}

static ncclResult_t sendrecv_run(const void *send, void *recv, size_t count, ncclDataType_t dt,
                                 ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    int rank, n;
    ncclResult_t res;
    (void)op;
    (void)root;
    if ((res = ncclCommUserRank(comm, &rank)) != ncclSuccess ||
        (res = ncclCommCount(comm, &n)) != ncclSuccess || (res = ncclGroupStart()) != ncclSuccess)
        return res;
    if ((res = ncclSend(send, count, dt, (rank + 1) % n, comm, stream)) == ncclSuccess)
        res = ncclRecv(recv, count, dt, (rank + n - 1) % n, comm, stream);
    ncclResult_t end = ncclGroupEnd();
    return res != ncclSuccess ? res : end;
}

static const perf_coll_t sendrecv_coll = {
    .prog = "sendrecv_perf",
    .name = "sendrecv",
    .call = "ncclSend/ncclRecv",
    .labels_op = 1,
    .inplace_na = 1,
    .sizes = perf_sizes_whole,
    .bus_factor = perf_bus_factor_one,
    .fill = sendrecv_fill,
    .run = sendrecv_run,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &sendrecv_coll);
}
