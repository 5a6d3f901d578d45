/*
 * reduce_perf: ncclReduce bandwidth and correctness, with nccl-tests' flags and output
 * (see perf_common.h for the driver and `reduce_perf -h` for the flags).
 *
 *     reduce_perf -t 4 -b 8 -e 64M -f 4 -o all -r -1  4 ranks as threads, every op and root
 *     braidrun -n 4 reduce_perf -b 8 -e 64M -f 4      4 processes, root 0
 *
 * Size is the buffer every rank sends and the root receives; the other ranks' recvbuff
 * must come back untouched, and is checked for it, as in nccl-tests. In place, sendbuff is
 * recvbuff. Bus bandwidth: a pipelined reduce moves the whole buffer over every link once,
 * so busbw = algbw.
 */
#include "perf_common.h"

/* Input: this rank's values; expected (root only): the reduction over every rank. */
static void reduce_fill(const perf_data_t *d, const perf_sizes_t *s, int rank, void *in,
                        void *expected)
{
    perf_data_fill(d, rank, in, 0, s->send_count);
    if (expected != NULL)
        perf_data_reduce(d, expected, 0, s->recv_count);
}

static ncclResult_t reduce_run(const void *send, void *recv, size_t count, ncclDataType_t dt,
                               ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    return ncclReduce(send, recv, count, dt, op, root, comm, stream);
}

static const perf_coll_t reduce_coll = {
    .prog = "reduce_perf",
    .name = "reduce",
    .call = "ncclReduce",
    .uses_op = 1,
    .uses_root = 1,
    .root_only = 1,
    .sizes = perf_sizes_whole,
    .bus_factor = perf_bus_factor_one,
    .fill = reduce_fill,
    .run = reduce_run,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &reduce_coll);
}
