/*
 * A client of user schedules for test_usched.sh.
 *
 *   usched_run load FILE         mscclLoadAlgo only: prints "loaded NAME handle H", or the
 *                                error text and exits 1 (no communicator: any rank count)
 *   usched_run msccl FILE        under braidrun: load, then mscclRunAlgo an all-reduce of
 *                                int32 sums out of place and in place for several counts
 *                                (multiples of 4), checked exactly; then a count that is
 *                                not a multiple, which must fail naming the schedule
 *   usched_run nccl              under braidrun: ncclAllReduce of the same counts (run
 *                                with BRAID_SCHEDULES and NCCL_ALGO naming a schedule)
 * Exit status 0 when every check passed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "rccl/rccl.h"

static int fails;

static ncclComm_t comm_init(int *rank, int *n)
{
    const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE");
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    if (r == NULL || w == NULL) {
        fprintf(stderr, "usched_run: run under braidrun (RANK, WORLD_SIZE, NCCL_COMM_ID)\n");
        exit(2);
    }
    *rank = atoi(r);
    *n = atoi(w);
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, *n, id, *rank) != ncclSuccess) {
        fprintf(stderr, "usched_run: rank %d: init failed: %s\n", *rank, ncclGetLastError(NULL));
        exit(1);
    }
    return comm;
}

/* One all-reduce of `count` int32 on rank `rank` of `n`, through mscclRunAlgo (h >= 0) or
 * ncclAllReduce; checked against the sum. */
static void one(ncclComm_t comm, int h, int rank, int n, size_t count, int in_place)
{
    int32_t *in = malloc(count * sizeof(*in)), *out = in_place ? in : malloc(count * sizeof(*out));
    for (size_t i = 0; i < count; i++) {
        in[i] = (int32_t)(rank * 1000 + (int)(i % 997));
        if (!in_place)
            out[i] = -1;
    }
    ncclResult_t r = h >= 0 ? mscclRunAlgo(in, NULL, NULL, out, NULL, NULL, count, ncclInt32, -1,
                                           -1, ncclSum, h, comm, NULL)
                            : ncclAllReduce(in, out, count, ncclInt32, ncclSum, comm, NULL);
    size_t bad = 0;
    for (size_t i = 0; r == ncclSuccess && i < count; i++) {
        int32_t want = 0;
        for (int q = 0; q < n; q++)
            want += (int32_t)(q * 1000 + (int)(i % 997));
        bad += out[i] != want;
    }
    if (r != ncclSuccess || bad != 0) {
        printf("FAIL rank %d count %zu %s: %s, %zu wrong\n", rank, count,
               in_place ? "in place" : "out of place",
               r != ncclSuccess ? ncclGetLastError(comm) : "ran", bad);
        fails++;
    } else {
        printf("ok rank %d count %zu %s\n", rank, count, in_place ? "in place" : "out of place");
    }
    free(in);
    if (!in_place)
        free(out);
}

static void counts(ncclComm_t comm, int h, int rank, int n)
{
    static const size_t cs[] = { 4, 28, 4000, 262144, 1048580 };
    for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++)
        for (int ip = 0; ip < 2; ip++)
            one(comm, h, rank, n, cs[i], ip);
}

int main(int argc, char **argv)
{
    int rank, n, h = -1;
    if (argc == 3 && strcmp(argv[1], "load") == 0) {
        if (mscclLoadAlgo(argv[2], &h, 0) != ncclSuccess) {
            printf("%s\n", ncclGetLastError(NULL));
            return 1;
        }
        printf("loaded handle %d\n", h);
        return mscclUnloadAlgo(h) == ncclSuccess && mscclUnloadAlgo(h) != ncclSuccess ? 0 : 1;
    }
    if (argc == 3 && strcmp(argv[1], "msccl") == 0) {
        ncclComm_t comm = comm_init(&rank, &n);
        if (mscclLoadAlgo(argv[2], &h, rank) != ncclSuccess) {
            printf("FAIL rank %d: mscclLoadAlgo: %s\n", rank, ncclGetLastError(NULL));
            return 1;
        }
        counts(comm, h, rank, n);
        int32_t x[6] = { 0 };
        ncclResult_t r = mscclRunAlgo(x, NULL, NULL, x, NULL, NULL, 6, ncclInt32, -1, -1,
                                      ncclSum, h, comm, NULL);
        if (r == ncclInvalidUsage)
            printf("ok rank %d count 6 refused: %s\n", rank, ncclGetLastError(comm));
        else {
            printf("FAIL rank %d count 6: result %d\n", rank, (int)r);
            fails++;
        }
        r = mscclRunAlgo(x, NULL, NULL, x, NULL, NULL, 4, ncclInt32, -1, -1, ncclSum, h + 100,
                         comm, NULL);
        if (r == ncclInvalidArgument)
            printf("ok rank %d bad handle refused: %s\n", rank, ncclGetLastError(comm));
        else {
            printf("FAIL rank %d bad handle: result %d\n", rank, (int)r);
            fails++;
        }
        ncclCommDestroy(comm);
        return fails != 0;
    }
    if (argc == 2 && strcmp(argv[1], "nccl") == 0) {
        ncclComm_t comm = comm_init(&rank, &n);
        counts(comm, -1, rank, n);
        ncclCommDestroy(comm);
        return fails != 0;
    }
    fprintf(stderr, "usage: usched_run load FILE | msccl FILE | nccl\n");
    return 2;
}
