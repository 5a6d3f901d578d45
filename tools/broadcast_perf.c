/*
 * broadcast_perf: ncclBroadcast bandwidth and correctness, with nccl-tests' flags and
 * output (see perf_common.h for the driver and `broadcast_perf -h` for the flags).
 *
 *     broadcast_perf -t 4 -b 8 -e 64M -f 4 -r -1      4 ranks as threads, every root
 *     braidrun -n 4 broadcast_perf -b 8 -e 64M -f 4   4 processes, root 0
 *
 * Size is the buffer the root sends and every rank receives. In place, sendbuff is
 * recvbuff. Bus bandwidth: a pipelined broadcast moves the whole buffer over every link
 * once, so busbw = algbw.
 */
#include "perf_common.h"

/* Input: the root's values (the others send nothing); expected: the root's values. */
static void broadcast_fill(const perf_data_t *d, const perf_sizes_t *s, int rank, void *in,
                           void *expected)
{
    if (rank == d->root)
        perf_data_fill(d, d->root, in, 0, s->send_count);
    if (expected != NULL)
        perf_data_fill(d, d->root, expected, 0, s->recv_count);
}

static ncclResult_t broadcast_run(const void *send, void *recv, size_t count,
                                  ncclDataType_t dt, ncclRedOp_t op, int root, ncclComm_t comm,
                                  cudaStream_t stream)
{
    (void)op;
    return ncclBroadcast(send, recv, count, dt, root, comm, stream);
}

static const perf_coll_t broadcast_coll = {
    .prog = "broadcast_perf",
    .name = "broadcast",
    .call = "ncclBroadcast",
    .uses_root = 1,
    .sizes = perf_sizes_whole,
    .bus_factor = perf_bus_factor_one,
    .fill = broadcast_fill,
    .run = broadcast_run,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &broadcast_coll);
}
