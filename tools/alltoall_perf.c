/*
 * alltoall_perf: ncclAlltoAll bandwidth and correctness, with nccl-tests' flags and output
 * (see perf_common.h for the driver and `alltoall_perf -h` for the flags).
 *
 *     alltoall_perf -t 4 -b 8 -e 64M -f 4             4 ranks as threads of one process
 *     braidrun -n 4 alltoall_perf -b 8 -e 64M -f 4    4 processes
 *
 * Size is each rank's send (and receive) buffer: n blocks of size/n bytes (rounded down
 * to 16 bytes, as nccl-tests); block j goes to rank j. In place means sendbuff ==
 * recvbuff, which NCCL does not define for alltoall: it is timed, and its #wrong is N/A,
 * as in nccl-tests. Bus bandwidth: (n-1)/n of each buffer crosses the rank's link, so
 * busbw = algbw * (n-1)/n.
 */
#include "perf_common.h"

static void alltoall_sizes(size_t count, int nranks, perf_sizes_t *s)
{
    size_t block = perf_rank_block(count, nranks, s->elt_size);
    s->send_count = block * (size_t)nranks;
    s->recv_count = block * (size_t)nranks;
    s->param_count = block;
    s->send_inplace_off = 0;
    s->recv_inplace_off = 0;
}

/* Input: n blocks of this rank's values; expected: block `rank` of every rank, in order. */
static void alltoall_fill(const perf_data_t *d, const perf_sizes_t *s, int rank, void *in,
                          void *expected)
{
    size_t block = s->param_count;
    perf_data_fill(d, rank, in, 0, s->send_count);
    for (int r = 0; expected != NULL && r < d->nranks; r++)
        perf_data_fill(d, r, perf_elem(d, expected, (size_t)r * block), (size_t)rank * block,
                       block);
}

static ncclResult_t alltoall_run(const void *send, void *recv, size_t count, ncclDataType_t dt,
                                 ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)op;
    (void)root;
    return ncclAlltoAll(send, recv, count, dt, comm, stream);
}

static const perf_coll_t alltoall_coll = {
    .prog = "alltoall_perf",
    .name = "alltoall",
    .call = "ncclAlltoAll",
    .inplace_na = 1,
    .sizes = alltoall_sizes,
    .bus_factor = perf_bus_factor_nm1,
    .fill = alltoall_fill,
    .run = alltoall_run,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &alltoall_coll);
}
