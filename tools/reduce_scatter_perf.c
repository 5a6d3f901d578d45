/*
 * reduce_scatter_perf: ncclReduceScatter bandwidth and correctness, with nccl-tests' flags
 * and output (see perf_common.h for the driver and `reduce_scatter_perf -h` for the flags).
 *
 *     reduce_scatter_perf -t 4 -b 8 -e 64M -f 4 -o all    4 ranks as threads, every op
 *     braidrun -n 4 reduce_scatter_perf -b 8 -e 64M -f 4  4 processes
 *
 * Size is the sent buffer: each rank sends n blocks of size/n bytes (rounded down to 16
 * bytes, as nccl-tests) and receives the reduction of block r. In place, rank r receives
 * into block r of its own input. Bus bandwidth: each rank sends (n-1)/n of the buffer over
 * its link, so busbw = algbw * (n-1)/n.
 */
#include "perf_common.h"

/* Input: n blocks of this rank's values; expected: the reduction of block `rank`. */
static void reduce_scatter_fill(const perf_data_t *d, const perf_sizes_t *s, int rank,
                                void *in, void *expected)
{
    perf_data_fill(d, rank, in, 0, s->send_count);
    if (expected != NULL)
        perf_data_reduce(d, expected, (size_t)rank * s->recv_count, s->recv_count);
}

static ncclResult_t reduce_scatter_run(const void *send, void *recv, size_t count,
                                       ncclDataType_t dt, ncclRedOp_t op, int root,
                                       ncclComm_t comm, cudaStream_t stream)
{
    (void)root;
    return ncclReduceScatter(send, recv, count, dt, op, comm, stream);
}

static const perf_coll_t reduce_scatter_coll = {
    .prog = "reduce_scatter_perf",
    .name = "reduce_scatter",
    .call = "ncclReduceScatter",
    .uses_op = 1,
    .sizes = perf_sizes_scatter,
    .bus_factor = perf_bus_factor_nm1,
    .fill = reduce_scatter_fill,
    .run = reduce_scatter_run,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &reduce_scatter_coll);
}
