/*
 * Every algorithm of the table (algorithms/algo.c), forced, on every collective it claims,
 * on 1 to 33 simulated ranks laid out on hosts in several ways (one host, even halves,
 * pairs, 4 per host, all but one on one host, interleaved), every count shape, in and out
 * of place, several roots; and the tuner's own choice on the same layouts. Also: an
 * algorithm's cost function declines exactly the calls its builder declines, on every rank.
 *
 * Every algorithm must run cases of every collective it claims (declining them all is a
 * failure), and the program fails when it ran no case.
 *
 * Then braidAllGatherV and braidReduceScatterV (per-rank counts and displacements), which
 * only the ring builds: uneven counts with zeros, blocks in and out of rank order with gaps,
 * in and out of place, on 1 to 33 ranks, against a reference; gaps must stay untouched.
 *
 * BRAID_TEST_ALGO=name runs one algorithm only (a name that matches none fails);
 * BRAID_TEST_MAXN=k stops at k ranks (for working on one algorithm). Both are said when set;
 * `make check` unsets them (Makefile.am), so the suite runs everything.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algorithms/algo.h"
#include "algorithms/model.h"
#include "tests/unit/sched_harness.h"
#include "topo/topo.h"

enum { LAYOUT_ONE, LAYOUT_HALVES, LAYOUT_PAIRS, LAYOUT_QUADS, LAYOUT_ALL_BUT_ONE,
       LAYOUT_INTERLEAVED, LAYOUT_NUM };

/* The host of rank r of n in a layout. */
static uint64_t layout_host(int layout, int r, int n)
{
    switch (layout) {
    case LAYOUT_HALVES: return r < (n + 1) / 2 ? 0 : 1;
    case LAYOUT_PAIRS: return (uint64_t)r / 2;
    case LAYOUT_QUADS: return (uint64_t)r / 4;
    case LAYOUT_ALL_BUT_ONE: return r == n - 1 ? 1 : 0;
    case LAYOUT_INTERLEAVED: return (uint64_t)r % 2;
    default: return 0;
    }
}

/* The layout's table, or NULL for one host without a table (the simulator's default). */
static const braid_topo_t *layout_topo(int layout, int n, braid_topo_t *t)
{
    uint64_t ids[SH_MAXR];
    if (layout == LAYOUT_ONE)
        return NULL;
    for (int r = 0; r < n; r++)
        ids[r] = 100 + layout_host(layout, r, n);
    assert_int_equal(braid_topo_build(t, n, ids, NULL), BRAID_OK);
    return t;
}

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v != NULL && *v ? atoi(v) : def;
}

/* BRAID_TEST_ALGO, or NULL when unset or empty. */
static const char *only_algo(void)
{
    const char *only = getenv("BRAID_TEST_ALGO");
    return only != NULL && *only != '\0' ? only : NULL;
}

static int algo_wanted(const braid_algo_t *a)
{
    return a == NULL || only_algo() == NULL || strcmp(only_algo(), a->name) == 0;
}

/* The cost function and the builder agree, on every rank, on whether the call is taken;
 * every rank takes it or none does. */
static void check_decline(const tcase_t *tc)
{
    int taken = -1;
    for (int r = 0; r < tc->n; r++) {
        braid_coll_t c = { .kind = tc->kind, .dtype = tc->dt, .rank = r, .nranks = tc->n,
                           .root = tc->root, .count = tc->count, .in_place = tc->in_place,
                           .pull = tc->pull, .topo = tc->topo };
        braid_sched_t s;
        braid_sched_init(&s, braid_dtype_size(tc->dt));
        braid_status_t st = tc->algo->build(&c, &s);
        braid_sched_free(&s);
        double cost = tc->algo->cost(&c, &braid_model_default);
        char desc[256];
        sh_tc_describe(tc, desc, sizeof(desc));
        if (st != BRAID_OK && st != BRAID_ERR_UNSUPPORTED)
            fail_msg("%s: %s on rank %d failed: %d", desc, tc->algo->name, r, (int)st);
        if ((st == BRAID_OK) != (cost >= 0))
            fail_msg("%s: %s on rank %d: the builder %s but the cost is %g", desc,
                     tc->algo->name, r, st == BRAID_OK ? "builds" : "declines", cost);
        if (taken >= 0 && taken != (st == BRAID_OK))
            fail_msg("%s: %s builds on some ranks and declines on others", desc,
                     tc->algo->name);
        taken = st == BRAID_OK;
    }
}

static void run_case(tcase_t *tc)
{
    if (tc->algo != NULL)
        check_decline(tc);
    sh_run_case(tc);
}

/* Pulls from peers' buffers (two-shot) are agreed only among ranks of one host, as
 * transports/shm does: allowed there on every other case (k odd), so that the algorithms
 * that need them run too and the others run both ways. */
static braid_pull_t case_pull(const braid_topo_t *topo, int k)
{
    return topo == NULL && (k & 1) ? BRAID_PULL_LOAD : BRAID_PULL_NONE;
}

/* One algorithm (NULL: the tuner) on one collective, every size and layout. */
static void algo_coll(const braid_algo_t *algo, braid_coll_kind_t kind)
{
    int maxn = env_int("BRAID_TEST_MAXN", SH_MAXR);
    for (int n = 1; n <= maxn && n <= SH_MAXR; n++)
        for (int layout = 0; layout < (n == 1 ? 1 : LAYOUT_NUM); layout++) {
            braid_topo_t t;
            const braid_topo_t *topo = layout_topo(layout, n, &t);
            const size_t counts[] = { 0, 1, (size_t)n + 1, 97 };
            const int roots[] = { 0, n / 2, n - 1 };
            for (int ci = 0; ci < 4; ci++)
                for (int ip = 0; ip < 2; ip++)
                    for (int ri = 0; ri < (sh_is_rooted(kind) ? 3 : 1); ri++) {
                        if (ri > 0 && roots[ri] == roots[ri - 1])
                            continue;
                        tcase_t tc = { .kind = kind, .dt = BRAID_INT32, .op = OP_SUM, .n = n,
                                       .root = roots[ri], .in_place = ip,
                                       .count = counts[ci],
                                       .cfg = ci == 3 && ip ? sh_cfg_odd : sh_cfg_tight,
                                       .algo = algo, .topo = topo,
                                       .pull = case_pull(topo, ci) };
                        run_case(&tc);
                    }
            if (topo != NULL)
                braid_topo_free(&t);
        }
}

static int is_reduction(braid_coll_kind_t k)
{
    return k == BRAID_COLL_ALLREDUCE || k == BRAID_COLL_REDUCE ||
           k == BRAID_COLL_REDUCESCATTER;
}

/* Reductions: every op, a per-rank ncclPreMulSum, and random floats whose results must be
 * bit-identical on every rank. */
static void algo_ops(const braid_algo_t *algo, braid_coll_kind_t kind)
{
    static const int ns[] = { 2, 3, 5, 6, 8, 13, 33 };
    int maxn = env_int("BRAID_TEST_MAXN", SH_MAXR);
    for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]) && ns[ni] <= maxn; ni++)
        for (int layout = 0; layout < LAYOUT_NUM; layout += 3) {
            int n = ns[ni];
            braid_topo_t t;
            const braid_topo_t *topo = layout_topo(layout, n, &t);
            for (int op = 0; op < OP_NUM + 2; op++) {
                tcase_t tc = { .kind = kind, .dt = op == OP_NUM + 1 ? BRAID_FP32 : BRAID_INT32,
                               .op = op < OP_NUM ? op : op == OP_NUM ? OP_PREMULSUM : OP_SUM,
                               .n = n, .root = n - 1, .in_place = op & 1,
                               .count = op == OP_NUM + 1 ? 1009 : 53, .cfg = sh_cfg_odd,
                               .algo = algo, .topo = topo, .pull = case_pull(topo, op),
                               .premul_per_rank = op == OP_NUM,
                               .random = op == OP_NUM + 1 };
                if ((tc.op == OP_AVG && !sh_avg_exact(tc.dt, n)) ||
                    (tc.random && kind != BRAID_COLL_ALLREDUCE))
                    continue;   /* no exact reference; one result to agree on */
                run_case(&tc);
            }
            if (topo != NULL)
                braid_topo_free(&t);
        }
}

static const braid_coll_kind_t tested_colls[] = {
    BRAID_COLL_ALLREDUCE, BRAID_COLL_ALLGATHER, BRAID_COLL_REDUCESCATTER, BRAID_COLL_BROADCAST,
    BRAID_COLL_REDUCE, BRAID_COLL_ALLTOALL, BRAID_COLL_GATHER, BRAID_COLL_SCATTER,
};

/* Every collective the algorithm claims (NULL: the tuner, all of them), each of which must
 * run some case. */
static void algo_all(const braid_algo_t *algo)
{
    char what[96];
    for (size_t k = 0; k < sizeof(tested_colls) / sizeof(tested_colls[0]); k++) {
        braid_coll_kind_t kind = tested_colls[k];
        int before = sh_cases_run;
        if (algo != NULL && !(algo->colls & (1u << kind)))
            continue;
        algo_coll(algo, kind);
        if (is_reduction(kind))
            algo_ops(algo, kind);
        snprintf(what, sizeof(what), "%s on %s", algo != NULL ? algo->name : "the tuner",
                 braid_coll_name(kind));
        sh_expect_cases(before, what);
    }
}

static void test_each_algorithm(void **state)
{
    char names[512];
    int ran = 0, o = 0;
    (void)state;
    for (int i = 0; i < braid_nalgos; i++) {
        if (!algo_wanted(braid_algos[i]))
            continue;
        algo_all(braid_algos[i]);
        ran++;
    }
    for (int i = 0; i < braid_nalgos && o < (int)sizeof(names); i++)
        o += snprintf(names + o, sizeof(names) - (size_t)o, "%s%s", i ? ", " : "",
                      braid_algos[i]->name);
    if (ran == 0)
        fail_msg("BRAID_TEST_ALGO=%s matches no algorithm (they are: %s)", only_algo(), names);
}

static void test_tuner_choice(void **state)
{
    (void)state;
    if (only_algo() == NULL)
        algo_all(NULL);
}

/* ---- AllGatherV and ReduceScatterV on the ring -------------------------------------- */

enum { V_SHAPES = 4 };

/*
 * Block b's count and displacement (elements) in shape k: 0 uneven counts with zeros,
 * blocks in reverse rank order with a 2-element gap; 1 one rank's block only, after a gap;
 * 2 counts b (rank 0 empty), packed in rank order; 3 blocks of several slices, every
 * other rank's empty, in rank order with a 3-element gap. Returns the span of the blocks.
 */
static size_t v_layout(int k, int n, size_t *counts, size_t *displs)
{
    size_t span = 0;
    for (int i = 0; i < n; i++) {
        int b = k == 0 ? n - 1 - i : i;
        switch (k) {
        case 0: counts[b] = (size_t)((b * 7 + 3) % 5); break;
        case 1: counts[b] = b == n / 2 ? 11 : 0; break;
        case 2: counts[b] = (size_t)b; break;
        default: counts[b] = b % 2 ? 0 : 23 + (size_t)b; break;
        }
        span += k == 1 && i == 0 ? 5 : 0;
        displs[b] = span;
        span += counts[b] + (k == 0 ? 2 : k == 3 ? 3 : 0);
    }
    return span;
}

static int32_t v_value(int r, size_t i)
{
    return (int32_t)((r * 131 + (int)(i % 1000) * 17) % 201) - 100;
}

/* One case's buffers on every rank, and the calls. */
typedef struct v_case {
    braid_coll_kind_t kind;
    int n, in_place, op;        /* op: OP_SUM, OP_MAX or OP_AVG (reduce-scatter) */
    size_t counts[SH_MAXR], displs[SH_MAXR], span, total;
    int32_t *all[SH_MAXR];      /* the buffer of every block (span elements) */
    int32_t *own[SH_MAXR];      /* this rank's block, its own or inside all[] in place */
    braid_sim_call_t calls[SH_MAXR];
} v_case_t;

static void v_case_rank(v_case_t *v, int r)
{
    int gather = v->kind == BRAID_COLL_ALLGATHER;
    size_t c = v->counts[r];
    v->all[r] = malloc(v->span * 4 + 4);
    for (size_t i = 0; i < v->span; i++)   /* all-gather: garbage to keep in the gaps */
        v->all[r][i] = gather ? -7777 : v_value(r, i);
    v->own[r] = v->in_place ? v->all[r] + v->displs[r] : malloc(c * 4 + 4);
    for (size_t i = 0; gather && i < c; i++)
        v->own[r][i] = v_value(r, v->displs[r] + i);
    braid_sim_call_t *sc = &v->calls[r];
    memset(sc, 0, sizeof(*sc));
    sc->rank = r;
    sc->coll = (braid_coll_t){ .kind = v->kind, .dtype = BRAID_INT32, .rank = r,
                               .nranks = v->n, .root = -1, .count = v->total,
                               .in_place = v->in_place, .vcounts = v->counts,
                               .vdispls = v->displs, .force = &braid_algo_ring };
    sc->sendbuf = gather ? (void *)v->own[r] : (void *)v->all[r];
    sc->recvbuf = gather ? (void *)v->all[r] : (void *)v->own[r];
    sc->redop.kind = gather ? BRAID_OP_SUM : v->op == OP_MAX ? BRAID_OP_MAX : BRAID_OP_SUM;
    sc->redop.postdiv = !gather && v->op == OP_AVG ? (uint64_t)v->n : 0;
    sc->hdr = (braid_msg_hdr_t){ .seq = 1, .count = v->total, .kind = (uint8_t)v->kind,
                                 .dtype = BRAID_INT32, .op = gather ? 255 : (uint8_t)v->op,
                                 .root = -1 };
    sc->expect = sc->hdr;
}

/* What element i of block b holds after the call. */
static int32_t v_want(const v_case_t *v, int b, size_t i)
{
    if (v->kind == BRAID_COLL_ALLGATHER)
        return v_value(b, v->displs[b] + i);
    int64_t acc = v_value(0, v->displs[b] + i);
    for (int r = 1; r < v->n; r++) {
        int32_t x = v_value(r, v->displs[b] + i);
        acc = v->op == OP_MAX ? (x > acc ? x : acc) : acc + x;
    }
    return (int32_t)(v->op == OP_AVG ? acc / v->n : acc);
}

static void v_check(const v_case_t *v, const char *desc)
{
    for (int r = 0; r < v->n; r++) {
        int gather = v->kind == BRAID_COLL_ALLGATHER;
        for (size_t i = 0; i < v->counts[r] && !gather; i++)
            if (v->own[r][i] != v_want(v, r, i))
                fail_msg("%s: rank %d element %zu is %d, want %d", desc, r, i,
                         (int)v->own[r][i], (int)v_want(v, r, i));
        for (size_t i = 0; i < v->span && gather; i++) {
            int b = 0;
            while (b < v->n && !(i >= v->displs[b] && i < v->displs[b] + v->counts[b]))
                b++;
            int32_t want = b < v->n ? v_want(v, b, i - v->displs[b]) : -7777;
            if (v->all[r][i] != want)
                fail_msg("%s: rank %d recvbuff[%zu] (%s %d) is %d, want %d", desc, r, i,
                         b < v->n ? "block" : "a gap, after block", b < v->n ? b : -1,
                         (int)v->all[r][i], (int)want);
        }
    }
}

/* Every step of every rank stays inside the buffers the call passed. */
static void v_check_refs(const v_case_t *v, const char *desc)
{
    for (int r = 0; r < v->n; r++) {
        braid_sched_t s;
        int gather = v->kind == BRAID_COLL_ALLGATHER;
        size_t all = v->span * 4, own = v->counts[r] * 4;
        size_t lim[BRAID_BUF_NUM] = { 0, gather ? own : all, gather ? all : own };
        assert_int_equal(braid_algo_build(&v->calls[r].coll, &s, NULL), BRAID_OK);
        for (int i = 0; i < s.nsteps; i++) {
            const braid_step_t *st = &s.steps[i];
            if ((st->src.buf && st->src.off + st->bytes > lim[st->src.buf]) ||
                (st->dst.buf && st->dst.off + st->bytes > lim[st->dst.buf]) ||
                st->src.buf > BRAID_BUF_RECV || st->dst.buf > BRAID_BUF_RECV)
                fail_msg("%s: rank %d step %d leaves the call's buffers", desc, r, i);
        }
        braid_sched_free(&s);
    }
}

static void v_run(braid_coll_kind_t kind, int n, int shape, int in_place, int op)
{
    v_case_t v = { .kind = kind, .n = n, .in_place = in_place, .op = op };
    braid_sim_result_t res;
    char desc[160];
    v.span = v_layout(shape, n, v.counts, v.displs);
    for (int r = 0; r < n; r++)
        v.total += v.counts[r];
    snprintf(desc, sizeof(desc), "ring %sV n=%d shape %d total %zu %s op %d",
             braid_coll_name(kind), n, shape, v.total, in_place ? "in-place" : "out-of-place",
             op);
    for (int r = 0; r < n; r++)
        v_case_rank(&v, r);
    v_check_refs(&v, desc);
    if (braid_sim_run(&sh_cfg_tight, n, v.calls, n, &res) != 0)
        fail_msg("%s: %s", desc, res.msg);
    v_check(&v, desc);
    for (int r = 0; r < n; r++) {
        if (!in_place)
            free(v.own[r]);
        free(v.all[r]);
    }
    sh_cases_run++;
}

/* A V call reaches no builder but the ring: unforced, algo.c refuses it. */
static void v_unforced(void)
{
    size_t counts[2] = { 1, 2 }, displs[2] = { 0, 1 };
    braid_coll_t c = { .kind = BRAID_COLL_ALLGATHER, .dtype = BRAID_INT32, .rank = 0,
                       .nranks = 2, .root = -1, .count = 3, .vcounts = counts,
                       .vdispls = displs };
    braid_sched_t s;
    assert_int_equal(braid_algo_build(&c, &s, NULL), BRAID_ERR_INTERNAL);
}

/*
 * Ranks that disagree on a rooted call's root (root tokens, src/exec/sched.h): the run must
 * not end clean. On 2 ranks a rank must see the mismatch at the call (BRAID_ERR_USAGE). On
 * more, a rank sees it, or a message of the call is left unreceived (a later call of the
 * communicator fails on it), or every rank is left waiting for data nobody sends: this
 * simulator does not model what ends that at run time (each rank publishes the call it is
 * in, and a waiting rank compares its peers' with its own; tests/fault/mismatch.c checks
 * it on 3 processes), so such a case is counted, not failed.
 * Beliefs: rank r takes root r % 2; root r + 1; root 0 but rank n-1, which takes 1.
 */
static int root_outcomes[3];   /* seen, left unreceived, every rank waiting */

static int root_belief(int pattern, int r, int n)
{
    switch (pattern) {
    case 0: return r % 2;
    case 1: return (r + 1) % n;
    default: return r == n - 1 ? 1 : 0;
    }
}

static void root_mismatch_case(const braid_algo_t *algo, braid_coll_kind_t kind, int n,
                               int pattern)
{
    braid_sim_call_t calls[8];
    braid_sim_result_t res;
    float *bufs = calloc((size_t)n * 2 * 4 * (size_t)n, sizeof(float));
    braid_sched_t scheds[8];
    assert_non_null(bufs);
    for (int r = 0; r < n; r++) {
        braid_sim_call_t *c = &calls[r];
        memset(c, 0, sizeof(*c));
        c->rank = r;
        c->coll = (braid_coll_t){ .kind = kind, .dtype = BRAID_FP32, .rank = r,
                                  .nranks = n, .root = root_belief(pattern, r, n), .count = 4 };
        c->sendbuf = bufs + (size_t)r * 2 * 4 * (size_t)n;
        c->recvbuf = (float *)c->sendbuf + 4 * n;
        c->hdr = (braid_msg_hdr_t){ .seq = 1, .count = 4, .kind = (uint8_t)kind,
                                    .dtype = BRAID_FP32, .root = c->coll.root,
                                    .op = kind == BRAID_COLL_REDUCE ? 0 : 255 };
        c->expect = c->hdr;
        braid_sched_init(&scheds[r], sizeof(float));
        assert_int_equal(algo->build(&c->coll, &scheds[r]), BRAID_OK);
        c->sched = &scheds[r];
    }
    int rc = braid_sim_run(&sh_cfg_tight, n, calls, n, &res);
    if (rc == 0 || (!res.deadlock && res.st != BRAID_ERR_USAGE &&
                    strstr(res.msg, "unreceived") == NULL))
        fail_msg("%s %s n=%d beliefs %d: %s", algo->name, braid_coll_name(kind), n, pattern,
                 rc == 0 ? "completed clean" : res.msg);
    if (n == 2 && (res.deadlock || res.st != BRAID_ERR_USAGE))
        fail_msg("%s %s n=2 beliefs %d: not seen at the call: %s", algo->name,
                 braid_coll_name(kind), pattern, res.deadlock ? "every rank waits" : res.msg);
    root_outcomes[res.deadlock ? 2 : res.st == BRAID_ERR_USAGE ? 0 : 1]++;
    if (res.deadlock)
        printf("root mismatch left waiting (the timeout ends it): %s %s n=%d beliefs %d\n",
               algo->name, braid_coll_name(kind), n, pattern);
    for (int r = 0; r < n; r++)
        braid_sched_free(&scheds[r]);
    free(bufs);
    sh_cases_run++;
}

static void test_root_mismatch(void **state)
{
    static const braid_coll_kind_t kinds[] = { BRAID_COLL_BROADCAST, BRAID_COLL_REDUCE,
                                               BRAID_COLL_GATHER, BRAID_COLL_SCATTER };
    int ran = sh_cases_run;
    (void)state;
    for (int a = 0; a < braid_nalgos; a++)
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
            for (int n = 2; n <= 8 && (braid_algos[a]->colls & (1u << kinds[k])); n++)
                for (int pattern = 0; pattern < 3; pattern++)
                    root_mismatch_case(braid_algos[a], kinds[k], n, pattern);
    assert_true(sh_cases_run - ran >= 4 * 7 * 3);   /* chain, binomial, direct: 4 calls */
    printf("root mismatch: %d seen at the call, %d left for a later call, %d waiting\n",
           root_outcomes[0], root_outcomes[1], root_outcomes[2]);
}

static void test_ring_v(void **state)
{
    static const int ops[] = { OP_SUM, OP_MAX, OP_AVG };
    int maxn = env_int("BRAID_TEST_MAXN", SH_MAXR);
    (void)state;
    if (!algo_wanted(&braid_algo_ring))
        return;
    v_unforced();
    for (int n = 1; n <= maxn && n <= SH_MAXR; n++)
        for (int shape = 0; shape < V_SHAPES; shape++)
            for (int ip = 0; ip < 2; ip++) {
                v_run(BRAID_COLL_ALLGATHER, n, shape, ip, OP_SUM);
                v_run(BRAID_COLL_REDUCESCATTER, n, shape, ip, ops[(n + shape + ip) % 3]);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_algorithm),
        cmocka_unit_test(test_tuner_choice),
        cmocka_unit_test(test_ring_v),
        cmocka_unit_test(test_root_mismatch),
    };
    if (only_algo() != NULL)
        printf("test_algos: BRAID_TEST_ALGO=%s: that algorithm only, not the others nor the "
               "tuner's choice\n", only_algo());
    if (env_int("BRAID_TEST_MAXN", SH_MAXR) < SH_MAXR)
        printf("test_algos: BRAID_TEST_MAXN=%d: up to %d ranks, not %d\n",
               env_int("BRAID_TEST_MAXN", SH_MAXR), env_int("BRAID_TEST_MAXN", SH_MAXR),
               SH_MAXR);
    return sh_report("test_algos", cmocka_run_group_tests(tests, NULL, NULL));
}
