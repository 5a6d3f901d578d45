/*
 * Schedules, simulated: every algorithm on 1 to 17 ranks, run by the real executor over the
 * in-memory transport of algorithms/sim.c, compared with a reference computed by sched_harness.c.
 * Here: the selector, every shape, datatype and op, two-shot pulls and all-to-allv; send/recv
 * groups and what must fail are in test_sched_faults.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/sched_harness.h"

/* ---- the collectives, every shape ---- */

/* A prime count spanning many slices. Counts of all-gather, reduce-scatter, all-to-all,
 * gather and scatter are per block, so their buffers are n times larger: a smaller prime
 * (still many slices per block) past a few ranks keeps the run short. */
static size_t big_count(braid_coll_kind_t kind, int n)
{
    int per_block = kind != BRAID_COLL_ALLREDUCE && kind != BRAID_COLL_BROADCAST &&
                    kind != BRAID_COLL_REDUCE;
    return per_block && n > 4 ? 211 : 1009;
}

static int counts_for(braid_coll_kind_t kind, int n, size_t *c)
{
    const size_t v[] = { 0, 1, 2, (size_t)n - 1, (size_t)n + 1, big_count(kind, n) };
    memcpy(c, v, sizeof(v));
    return (int)(sizeof(v) / sizeof(v[0]));
}

/* How a case may pull: not at all, with loads (ranks of one process), or through
 * process_vm_readv (the path between processes). */
enum { PULL_NONE, PULL_LOAD, PULL_CMA };

static void tc_pulls(tcase_t *tc, int pulls)
{
    tc->pull = pulls == PULL_NONE ? BRAID_PULL_NONE
               : pulls == PULL_CMA ? BRAID_PULL_CMA : BRAID_PULL_LOAD;
    tc->cfg.cma = pulls == PULL_CMA;
}

/* 1 to 17 ranks, every count, in and out of place, every root, tight FIFOs; then the
 * prime count through wider slots. */
static void shapes_pulls(braid_coll_kind_t kind, braid_dtype_t dt, const braid_algo_t *algo,
                         int pulls)
{
    for (int n = 1; n <= MAXR; n++) {
        size_t counts[8];
        int nc = counts_for(kind, n, counts);
        for (int ci = 0; ci < nc; ci++)
            for (int ip = 0; ip < 2; ip++)
                for (int root = 0; root < (sh_is_rooted(kind) ? n : 1); root++) {
                    tcase_t tc = { .kind = kind, .dt = dt, .op = OP_SUM, .n = n, .root = root,
                                   .in_place = ip, .count = counts[ci], .cfg = sh_cfg_tight,
                                   .algo = algo };
                    tc_pulls(&tc, pulls);
                    sh_run_case(&tc);
                }
        for (int ip = 0; ip < 2; ip++) {
            tcase_t tc = { .kind = kind, .dt = dt, .op = OP_SUM, .n = n, .root = n - 1,
                           .in_place = ip, .count = big_count(kind, n),
                           .cfg = ip ? sh_cfg_odd : sh_cfg_wide, .algo = algo };
            tc_pulls(&tc, pulls);
            sh_run_case(&tc);
        }
    }
}

static void shapes_algo(braid_coll_kind_t kind, braid_dtype_t dt, const braid_algo_t *algo)
{
    shapes_pulls(kind, dt, algo, PULL_NONE);
}

static void shapes(braid_coll_kind_t kind, braid_dtype_t dt)
{
    shapes_algo(kind, dt, NULL);
}

/* Both all-reduce algorithms on every shape, whatever the selector would pick. */
extern const braid_algo_t braid_algo_ring, braid_algo_oneshot;
static void test_allreduce_algos(void **state)
{
    int before = sh_cases_run;
    (void)state;
    shapes_algo(BRAID_COLL_ALLREDUCE, BRAID_INT32, &braid_algo_ring);
    sh_expect_cases(before, "ring all-reduce");
    before = sh_cases_run;
    shapes_algo(BRAID_COLL_ALLREDUCE, BRAID_FP16, &braid_algo_oneshot);
    sh_expect_cases(before, "one-shot all-reduce");
}

#define SHAPES_TEST(_name, _kind)                                                          \
    static void test_##_name##_shapes(void **state)                                        \
    {                                                                                      \
        (void)state;                                                                       \
        shapes(_kind, BRAID_INT32);                                                        \
    }
SHAPES_TEST(allreduce, BRAID_COLL_ALLREDUCE)
SHAPES_TEST(allgather, BRAID_COLL_ALLGATHER)
SHAPES_TEST(reducescatter, BRAID_COLL_REDUCESCATTER)
SHAPES_TEST(broadcast, BRAID_COLL_BROADCAST)
SHAPES_TEST(reduce, BRAID_COLL_REDUCE)
SHAPES_TEST(alltoall, BRAID_COLL_ALLTOALL)
SHAPES_TEST(gather, BRAID_COLL_GATHER)
SHAPES_TEST(scatter, BRAID_COLL_SCATTER)

/* ---- every datatype and op ---- */

static const int type_ns[] = { 1, 2, 3, 4, 7, 16, 17 };
#define NUM_TYPE_NS ((int)(sizeof(type_ns) / sizeof(type_ns[0])))

static void reduction_types_pulls(braid_coll_kind_t kind, int pulls)
{
    for (int ni = 0; ni < NUM_TYPE_NS; ni++)
        for (int dt = 0; dt < BRAID_NUM_DTYPES; dt++)
            for (int op = 0; op < OP_NUM; op++) {
                int n = type_ns[ni];
                /* reduce-scatter's count is per rank: its buffers are n times larger */
                const size_t counts[] = { 1, (size_t)n + 1,
                                          kind == BRAID_COLL_REDUCESCATTER ? 41 : 300 };
                if (op == OP_AVG && !sh_avg_exact((braid_dtype_t)dt, n) && dt != BRAID_FP32 &&
                    dt != BRAID_FP64)
                    continue;   /* 1/n is inexact there: no exact reference */
                for (int ci = 0; ci < 3; ci++)
                    for (int ip = 0; ip < 2; ip++) {
                        tcase_t tc = { .kind = kind, .dt = (braid_dtype_t)dt, .op = op, .n = n,
                                       .root = (dt + op + ci) % n, .in_place = ip,
                                       .count = counts[ci],
                                       .cfg = ci & 1 ? sh_cfg_odd : sh_cfg_tight };
                        tc_pulls(&tc, pulls);
                        sh_run_case(&tc);
                    }
            }
}

static void reduction_types(braid_coll_kind_t kind)
{
    reduction_types_pulls(kind, PULL_NONE);
}

#define TYPES_TEST(_name, _kind)                                                           \
    static void test_##_name##_types(void **state)                                         \
    {                                                                                      \
        (void)state;                                                                       \
        reduction_types(_kind);                                                            \
    }
TYPES_TEST(allreduce, BRAID_COLL_ALLREDUCE)
TYPES_TEST(reduce, BRAID_COLL_REDUCE)
TYPES_TEST(reducescatter, BRAID_COLL_REDUCESCATTER)

/* Element sizes 1, 2 and 8 cut slices differently (24 / 40 bytes: 3 or 5 doubles). */
static void test_move_types(void **state)
{
    static const braid_coll_kind_t kinds[] = { BRAID_COLL_BROADCAST, BRAID_COLL_ALLGATHER,
                                               BRAID_COLL_ALLTOALL, BRAID_COLL_GATHER,
                                               BRAID_COLL_SCATTER };
    static const braid_dtype_t dts[] = { BRAID_UINT8, BRAID_BF16, BRAID_FP64, BRAID_FP8_E5M2 };
    (void)state;
    for (int k = 0; k < 5; k++)
        for (int d = 0; d < 4; d++)
            for (int ni = 0; ni < NUM_TYPE_NS; ni++) {
                int n = type_ns[ni];
                const size_t counts[] = { 1, (size_t)n + 1, big_count(kinds[k], n) };
                for (int ci = 0; ci < 3; ci++)
                    for (int ip = 0; ip < 2; ip++) {
                        tcase_t tc = { .kind = kinds[k], .dt = dts[d], .n = n, .root = n / 2,
                                       .in_place = ip, .count = counts[ci],
                                       .cfg = ip ? sh_cfg_odd : sh_cfg_tight };
                        sh_run_case(&tc);
                    }
            }
}

/* Random floats: every rank of an all-reduce ends with the same bits. */
static void test_allreduce_ranks_agree(void **state)
{
    static const braid_dtype_t dts[] = { BRAID_FP16, BRAID_BF16, BRAID_FP32, BRAID_FP64,
                                         BRAID_FP8_E4M3, BRAID_FP8_E5M2 };
    static const int ns[] = { 2, 3, 6, 13, 17 };
    (void)state;
    for (int d = 0; d < 6; d++)
        for (int op = 0; op < OP_NUM; op++)
            for (int ni = 0; ni < 5; ni++) {
                tcase_t tc = { .kind = BRAID_COLL_ALLREDUCE, .dt = dts[d], .op = op, .n = ns[ni],
                               .in_place = (op + ni) & 1, .count = 1009, .cfg = sh_cfg_tight,
                               .random = 1 };
                sh_run_case(&tc);
            }
}

/* ---- two-shot: pulls from the other ranks' buffers ---- */

extern const braid_algo_t braid_algo_twoshot;

/* Every shape of the three two-shot collectives, peers read in place. */
static void test_twoshot_shapes(void **state)
{
    static const braid_coll_kind_t kinds[] = { BRAID_COLL_ALLREDUCE, BRAID_COLL_ALLGATHER,
                                               BRAID_COLL_REDUCESCATTER };
    (void)state;
    for (int k = 0; k < 3; k++) {
        int before = sh_cases_run;
        shapes_pulls(kinds[k], BRAID_INT32, &braid_algo_twoshot, PULL_LOAD);
        sh_expect_cases(before, braid_coll_name(kinds[k]));
    }
}

/* The same through process_vm_readv, and with other element sizes. */
static void test_twoshot_cma(void **state)
{
    static const braid_coll_kind_t kinds[] = { BRAID_COLL_ALLREDUCE, BRAID_COLL_ALLGATHER,
                                               BRAID_COLL_REDUCESCATTER };
    static const braid_dtype_t dts[] = { BRAID_FP64, BRAID_UINT8, BRAID_BF16 };
    (void)state;
    for (int k = 0; k < 3; k++) {
        int before = sh_cases_run;
        shapes_pulls(kinds[k], dts[k], &braid_algo_twoshot, PULL_CMA);
        sh_expect_cases(before, braid_coll_name(kinds[k]));
    }
}

/* Every datatype and op (ncclAvg, ncclPreMulSum: the puller applies the peer's scalar). */
static void test_twoshot_types(void **state)
{
    (void)state;
    reduction_types_pulls(BRAID_COLL_ALLREDUCE, PULL_LOAD);
    reduction_types_pulls(BRAID_COLL_REDUCESCATTER, PULL_CMA);
}

/* Random floats: every rank of a two-shot all-reduce ends with the same bits. */
static void test_twoshot_ranks_agree(void **state)
{
    static const braid_dtype_t dts[] = { BRAID_FP16, BRAID_BF16, BRAID_FP32, BRAID_FP64 };
    static const int ns[] = { 2, 3, 5, 17 };
    int before = sh_cases_run;
    (void)state;
    for (int d = 0; d < 4; d++)
        for (int op = 0; op < OP_NUM; op++)
            for (int ni = 0; ni < 4; ni++) {
                tcase_t tc = { .kind = BRAID_COLL_ALLREDUCE, .dt = dts[d], .op = op,
                               .n = ns[ni], .in_place = (op + ni) & 1, .count = 1009,
                               .cfg = sh_cfg_tight, .random = 1, .algo = &braid_algo_twoshot };
                tc_pulls(&tc, ni & 1 ? PULL_CMA : PULL_LOAD);
                sh_run_case(&tc);
            }
    sh_expect_cases(before, "two-shot, random floats");
}

/* ncclPreMulSum scalars may differ between ranks: each contribution is scaled by its own
 * rank's, whoever reduces it (ring: the sender; two-shot: the puller, from the hello). */
static void test_premul_per_rank(void **state)
{
    static const braid_coll_kind_t kinds[] = { BRAID_COLL_ALLREDUCE, BRAID_COLL_REDUCESCATTER,
                                               BRAID_COLL_REDUCE };
    static const braid_dtype_t dts[] = { BRAID_INT32, BRAID_FP32, BRAID_FP16, BRAID_UINT8 };
    (void)state;
    for (int k = 0; k < 3; k++)
        for (int d = 0; d < 4; d++)
            for (int n = 1; n <= 6; n++)
                for (int pulls = PULL_NONE; pulls <= PULL_CMA; pulls++) {
                    tcase_t tc = { .kind = kinds[k], .dt = dts[d], .op = OP_PREMULSUM, .n = n,
                                   .root = n - 1, .in_place = (n + d) & 1, .count = 300,
                                   .cfg = sh_cfg_odd, .premul_per_rank = 1 };
                    tc_pulls(&tc, pulls);
                    sh_run_case(&tc);
                }
}

/* Whether the tuner would consider algorithm `name` for the call. */
static int candidate(const braid_coll_t *c, const char *name)
{
    const braid_algo_t *algos[32];
    double costs[32];
    int n = braid_algo_rank(c, algos, costs, NULL, 32);
    for (int i = 0; i < n; i++)
        if (strcmp(algos[i]->name, name) == 0)
            return 1;
    return 0;
}

/* With pulls allowed, the three collectives may take two-shot from the agreed size on,
 * never below it or without pulls. */
static void test_twoshot_select(void **state)
{
    static const braid_coll_kind_t kinds[] = { BRAID_COLL_ALLREDUCE, BRAID_COLL_ALLGATHER,
                                               BRAID_COLL_REDUCESCATTER };
    (void)state;
    for (int k = 0; k < 3; k++) {
        braid_coll_t c = { .kind = kinds[k], .dtype = BRAID_FP32, .rank = 1, .nranks = 4,
                           .count = 1 << 20, .pull = BRAID_PULL_CMA,
                           .pull_min = 4 << 20 };
        size_t bytes = c.count * 4 * (kinds[k] == BRAID_COLL_ALLREDUCE ? 1 : 4);
        assert_int_equal(candidate(&c, "twoshot"), bytes >= c.pull_min);
        c.pull_min = bytes + 1;
        assert_false(candidate(&c, "twoshot"));
        c.pull = BRAID_PULL_LOAD;
        assert_false(candidate(&c, "twoshot"));
        c.pull_min = 0;
        assert_true(candidate(&c, "twoshot"));
        c.pull = BRAID_PULL_NONE;                           /* not agreed: never */
        assert_false(candidate(&c, "twoshot"));
    }
}

/* ---- all-to-allv ---- */

typedef struct a2av {
    size_t sc[MAXR][MAXR], sd[MAXR][MAXR], rc[MAXR][MAXR], rd[MAXR][MAXR];
    size_t sext[MAXR], rext[MAXR];      /* elements each rank's buffers span */
} a2av_t;

/* Uneven counts (zeros included); send blocks in reverse peer order with one-element gaps,
 * receive blocks in order with two-element gaps. Symmetric: counts[r][p] == counts[p][r]
 * and the receive layout is the send layout, as in-place calls need. */
static void a2av_layout(int n, int sym, size_t scale, a2av_t *a)
{
    for (int r = 0; r < n; r++)
        for (int p = 0; p < n; p++) {
            int lo = sym && p < r ? p : r, hi = sym && p < r ? r : p;
            a->sc[r][p] = (size_t)(sh_hash3((uint64_t)lo, (uint64_t)hi, 5) % 7) * scale;
        }
    for (int r = 0; r < n; r++) {
        size_t spos = 0, rpos = 0;
        for (int p = n - 1; p >= 0; p--, spos++) {
            a->sd[r][p] = spos;
            spos += a->sc[r][p];
        }
        for (int p = 0; p < n; p++, rpos += 2) {
            a->rc[r][p] = a->sc[p][r];
            a->rd[r][p] = sym ? a->sd[r][p] : rpos;
            rpos += a->rc[r][p];
        }
        a->sext[r] = spos;
        a->rext[r] = sym ? spos : rpos;
    }
}

static void a2av_run(int n, int in_place, size_t scale, braid_dtype_t dt)
{
    static a2av_t a;
    size_t es = braid_dtype_size(dt);
    unsigned char *in[MAXR], *out[MAXR], *want[MAXR];
    braid_sim_call_t calls[MAXR];
    braid_sim_result_t res;
    tcase_t tc = { .kind = BRAID_COLL_ALLTOALLV, .dt = dt, .n = n, .in_place = in_place,
                   .cfg = sh_cfg_tight };
    char desc[256];

    sh_tc_describe(&tc, desc, sizeof(desc));
    a2av_layout(n, in_place, scale, &a);
    for (int r = 0; r < n; r++) {
        in[r] = malloc(a.sext[r] * es + 1);
        sh_fill_input(&tc, r, in[r], a.sext[r]);
        out[r] = in_place ? in[r] : malloc(a.rext[r] * es + 1);
        if (!in_place)
            memset(out[r], SENTINEL, a.rext[r] * es);
        want[r] = malloc(a.rext[r] * es + 1);
        memcpy(want[r], out[r], a.rext[r] * es);
    }
    for (int r = 0; r < n; r++)
        for (int p = 0; p < n; p++)
            memcpy(want[r] + a.rd[r][p] * es, in[p] + a.sd[p][r] * es, a.rc[r][p] * es);
    for (int r = 0; r < n; r++) {
        tcase_t one = tc;
        sh_tc_call(&one, r, &(rbuf_t){ .send = in[r], .recv = out[r], .alias = in_place }, &calls[r]);
        calls[r].coll.sendcounts = a.sc[r];
        calls[r].coll.sdispls = a.sd[r];
        calls[r].coll.recvcounts = a.rc[r];
        calls[r].coll.rdispls = a.rd[r];
    }
    if (braid_sim_run(&tc.cfg, n, calls, n, &res) != 0)
        fail_msg("%s scale %zu: %s", desc, scale, res.msg);
    for (int r = 0; r < n; r++) {
        if (memcmp(out[r], want[r], a.rext[r] * es) != 0)
            fail_msg("%s scale %zu: rank %d received the wrong blocks", desc, scale, r);
        if (!in_place)
            free(out[r]);
        free(in[r]);
        free(want[r]);
    }
}

static void test_alltoallv(void **state)
{
    (void)state;
    for (int n = 1; n <= MAXR; n++)
        for (int ip = 0; ip < 2; ip++) {
            a2av_run(n, ip, 1, BRAID_INT32);
            a2av_run(n, ip, 37, n & 1 ? BRAID_UINT8 : BRAID_FP64);
        }
}

/* ---- the selector ---- */

/* Every collective gets the algorithm the tuner ranks first, one that builds it. */
static void test_algo_select(void **state)
{
    const size_t cnt[4] = { 3, 3, 3, 3 }, dsp[4] = { 0, 3, 6, 9 };
    braid_sched_t s;
    const braid_algo_t *algo;
    (void)state;
    for (int k = 0; k < BRAID_COLL_NUM; k++) {
        braid_coll_t c = { .kind = (braid_coll_kind_t)k, .dtype = BRAID_FP32, .rank = 1,
                           .nranks = 4, .root = 2, .count = 10, .sendcounts = cnt,
                           .sdispls = dsp, .recvcounts = cnt, .rdispls = dsp };
        const braid_algo_t *first[1];
        double cost[1];
        assert_int_equal(braid_algo_rank(&c, first, cost, NULL, 1), 1);
        assert_int_equal(braid_algo_build(&c, &s, &algo), BRAID_OK);
        assert_ptr_equal(algo, first[0]);
        assert_true(algo->colls & (1u << k));
        assert_int_equal(s.align, 4);
        assert_true(s.nsteps > 0);
        braid_sched_free(&s);
        c.count = 0;
        c.sendcounts = c.recvcounts = (const size_t[4]){ 0 };
        assert_int_equal(braid_algo_build(&c, &s, NULL), BRAID_OK);
        assert_int_equal(s.nsteps, 0);         /* count 0: nothing to do */
        braid_sched_free(&s);
    }
}

static void expect_internal(braid_coll_t c)
{
    braid_sched_t s;
    assert_int_equal(braid_algo_build(&c, &s, NULL), BRAID_ERR_INTERNAL);
    assert_int_equal(s.nsteps, 0);
}

static void test_algo_impossible(void **state)
{
    const braid_coll_t ok = { .kind = BRAID_COLL_REDUCE, .dtype = BRAID_INT8, .rank = 0,
                              .nranks = 3, .root = 1, .count = 5 };
    braid_coll_t c;
    (void)state;
    c = ok, c.kind = BRAID_COLL_NUM, expect_internal(c);
    c = ok, c.dtype = BRAID_NUM_DTYPES, expect_internal(c);
    c = ok, c.rank = 3, expect_internal(c);
    c = ok, c.nranks = 0, expect_internal(c);
    c = ok, c.root = -1, expect_internal(c);
    c = ok, c.kind = BRAID_COLL_SEND, c.root = 3, expect_internal(c);
    c = ok, c.kind = BRAID_COLL_ALLTOALLV, expect_internal(c);
}

/* The ring all-reduce is 2n-1 fused steps: send, recvReduceSend..., recvReduceCopySend
 * (FINAL), recvCopySend..., recv. */
static void test_ring_allreduce_steps(void **state)
{
    braid_coll_t c = { .kind = BRAID_COLL_ALLREDUCE, .dtype = BRAID_FP32, .rank = 2,
                       .nranks = 5, .count = 100000 };
    braid_sched_t s;
    (void)state;
    assert_int_equal(braid_algo_build(&c, &s, NULL), BRAID_OK);
    assert_int_equal(s.nsteps, 9);
    for (int t = 0; t < 9; t++) {
        const braid_step_t *st = &s.steps[t];
        assert_int_equal(st->recv_peer, t ? 1 : -1);
        assert_int_equal(st->send_peer, t < 8 ? 3 : -1);
        assert_int_equal(st->flags & BRAID_STEP_REDUCE, t < 5 ? BRAID_STEP_REDUCE : 0);
        assert_int_equal(st->flags & BRAID_STEP_FINAL, t == 4 ? BRAID_STEP_FINAL : 0);
        assert_int_equal(st->dst.buf, t >= 4 ? BRAID_BUF_RECV : BRAID_BUF_NONE);
        assert_int_equal(st->bytes, 80000);
    }
    braid_sched_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_algo_select),
        cmocka_unit_test(test_algo_impossible),
        cmocka_unit_test(test_ring_allreduce_steps),
        cmocka_unit_test(test_allreduce_shapes),
        cmocka_unit_test(test_allreduce_algos),
        cmocka_unit_test(test_allgather_shapes),
        cmocka_unit_test(test_reducescatter_shapes),
        cmocka_unit_test(test_broadcast_shapes),
        cmocka_unit_test(test_reduce_shapes),
        cmocka_unit_test(test_alltoall_shapes),
        cmocka_unit_test(test_gather_shapes),
        cmocka_unit_test(test_scatter_shapes),
        cmocka_unit_test(test_allreduce_types),
        cmocka_unit_test(test_reduce_types),
        cmocka_unit_test(test_reducescatter_types),
        cmocka_unit_test(test_move_types),
        cmocka_unit_test(test_allreduce_ranks_agree),
        cmocka_unit_test(test_twoshot_select),
        cmocka_unit_test(test_twoshot_shapes),
        cmocka_unit_test(test_twoshot_cma),
        cmocka_unit_test(test_twoshot_types),
        cmocka_unit_test(test_twoshot_ranks_agree),
        cmocka_unit_test(test_premul_per_rank),
        cmocka_unit_test(test_alltoallv),
    };
    return sh_report("test_sched", cmocka_run_group_tests_name("sched", tests, NULL, NULL));
}
