/*
 * scatter_perf: ncclScatter bandwidth and correctness, with nccl-tests' flags and output
 * (see perf_common.h for the driver and `scatter_perf -h` for the flags).
 *
 *     scatter_perf -t 4 -b 8 -e 64M -f 4 -r -1        4 ranks as threads, every root
 *     braidrun -n 4 scatter_perf -b 8 -e 64M -f 4     4 processes, root 0
 *
 * Size is the root's send buffer: n blocks of size/n bytes (rounded down to 16 bytes, as
 * nccl-tests); rank r receives block r. In place, rank r receives into block r of its
 * recvbuff (the root's sendbuff is its recvbuff). Bus bandwidth: the root sends (n-1)/n of
 * the buffer over its link, so busbw = algbw * (n-1)/n.
 */
#include "perf_common.h"

/* Input: the root's n blocks (the others send nothing); expected: block `rank` of them. */
static void scatter_fill(const perf_data_t *d, const perf_sizes_t *s, int rank, void *in,
                         void *expected)
{
    if (rank == d->root)
        perf_data_fill(d, d->root, in, 0, s->send_count);
    if (expected != NULL)
        perf_data_fill(d, d->root, expected, (size_t)rank * s->recv_count, s->recv_count);
}

static ncclResult_t scatter_run(const void *send, void *recv, size_t count, ncclDataType_t dt,
                                ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)op;
    return ncclScatter(send, recv, count, dt, root, comm, stream);
}

static const perf_coll_t scatter_coll = {
    .prog = "scatter_perf",
    .name = "scatter",
    .call = "ncclScatter",
    .uses_root = 1,
    .sizes = perf_sizes_scatter,
    .bus_factor = perf_bus_factor_nm1,
    .fill = scatter_fill,
    .run = scatter_run,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &scatter_coll);
}
