/*
 * all_gather_perf: ncclAllGather bandwidth and correctness, with nccl-tests' flags and
 * output (see perf_common.h for the driver and `all_gather_perf -h` for the flags).
 *
 *     all_gather_perf -t 4 -b 8 -e 64M -f 4           4 ranks as threads of one process
 *     braidrun -n 4 all_gather_perf -b 8 -e 64M -f 4  4 processes
 *
 * Size is the received buffer: each rank sends size/n bytes (rounded down to 16 bytes, as
 * nccl-tests) and receives n blocks. In place, rank r sends from block r of its recvbuff.
 * Bus bandwidth: each rank receives (n-1)/n of the buffer over its link, so
 * busbw = algbw * (n-1)/n.
 */
#include "perf_common.h"

/* Input: this rank's block; expected: every rank's block, in rank order. */
static void all_gather_fill(const perf_data_t *d, const perf_sizes_t *s, int rank, void *in,
                            void *expected)
{
    perf_data_fill(d, rank, in, 0, s->send_count);
    for (int r = 0; expected != NULL && r < d->nranks; r++)
        perf_data_fill(d, r, perf_elem(d, expected, (size_t)r * s->send_count), 0,
                       s->send_count);
}

static ncclResult_t all_gather_run(const void *send, void *recv, size_t count,
                                   ncclDataType_t dt, ncclRedOp_t op, int root,
                                   ncclComm_t comm, cudaStream_t stream)
{
    (void)op;
    (void)root;
    return ncclAllGather(send, recv, count, dt, comm, stream);
}

static const perf_coll_t all_gather_coll = {
    .prog = "all_gather_perf",
    .name = "all_gather",
    .call = "ncclAllGather",
    .sizes = perf_sizes_gather,
    .bus_factor = perf_bus_factor_nm1,
    .fill = all_gather_fill,
    .run = all_gather_run,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &all_gather_coll);
}
