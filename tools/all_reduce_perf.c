/*
 * all_reduce_perf: ncclAllReduce bandwidth and correctness, with nccl-tests' flags and
 * output (see perf_common.h for the driver and `all_reduce_perf -h` for the flags).
 *
 *     all_reduce_perf -t 4 -b 8 -e 64M -f 4          4 ranks as threads of one process
 *     braidrun -n 4 all_reduce_perf -b 8 -e 64M -f 4 4 processes
 *
 * Bus bandwidth: a ring all-reduce moves 2(n-1)/n of the buffer through every link, so
 * busbw = algbw * 2(n-1)/n, comparable with the link speed whatever n is.
 */
#include "perf_common.h"

static double all_reduce_bus_factor(int nranks)
{
    return nranks > 0 ? 2.0 * (nranks - 1) / nranks : 0.0;
}

/* Input: this rank's values; expected: the reduction of every rank's values. */
static void all_reduce_fill(const perf_data_t *d, const perf_sizes_t *s, int rank, void *in,
                            void *expected)
{
    perf_data_fill(d, rank, in, 0, s->send_count);
    if (expected != NULL)
        perf_data_reduce(d, expected, 0, s->recv_count);
}

static ncclResult_t all_reduce_run(const void *send, void *recv, size_t count,
                                   ncclDataType_t dt, ncclRedOp_t op, int root,
                                   ncclComm_t comm, cudaStream_t stream)
{
    (void)root;
    return ncclAllReduce(send, recv, count, dt, op, comm, stream);
}

static const perf_coll_t all_reduce_coll = {
    .prog = "all_reduce_perf",
    .name = "all_reduce",
    .call = "ncclAllReduce",
    .uses_op = 1,
    .uses_root = 0,
    .sizes = perf_sizes_whole,
    .bus_factor = all_reduce_bus_factor,
    .fill = all_reduce_fill,
    .run = all_reduce_run,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &all_reduce_coll);
}
