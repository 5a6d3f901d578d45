/*
 * gather_perf: ncclGather bandwidth and correctness, with nccl-tests' flags and output
 * (see perf_common.h for the driver and `gather_perf -h` for the flags).
 *
 *     gather_perf -t 4 -b 8 -e 64M -f 4 -r -1         4 ranks as threads, every root
 *     braidrun -n 4 gather_perf -b 8 -e 64M -f 4      4 processes, root 0
 *
 * Size is the root's receive buffer: each rank sends size/n bytes (rounded down to 16
 * bytes, as nccl-tests) and the root receives the n blocks in rank order; the other
 * ranks' recvbuff must come back untouched, and is checked for it. In place, rank r sends
 * from block r of its recvbuff. Bus bandwidth: the root receives (n-1)/n of the buffer
 * over its link, so busbw = algbw * (n-1)/n.
 */
#include "perf_common.h"

/* Input: this rank's block; expected (root only): every rank's block, in rank order. */
static void gather_fill(const perf_data_t *d, const perf_sizes_t *s, int rank, void *in,
                        void *expected)
{
    perf_data_fill(d, rank, in, 0, s->send_count);
    for (int r = 0; expected != NULL && r < d->nranks; r++)
        perf_data_fill(d, r, perf_elem(d, expected, (size_t)r * s->send_count), 0,
                       s->send_count);
}

static ncclResult_t gather_run(const void *send, void *recv, size_t count, ncclDataType_t dt,
                               ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)op;
    return ncclGather(send, recv, count, dt, root, comm, stream);
}

static const perf_coll_t gather_coll = {
    .prog = "gather_perf",
    .name = "gather",
    .call = "ncclGather",
    .uses_root = 1,
    .root_only = 1,
    .sizes = perf_sizes_gather,
    .bus_factor = perf_bus_factor_nm1,
    .fill = gather_fill,
    .run = gather_run,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &gather_coll);
}
