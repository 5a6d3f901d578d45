/*
 * The tuner: NCCL_ALGO / NCCL_PROTO parsing (lists, ^, per collective, NCCL's and braid's
 * names, errors that list the known names), the choice under a filter, the slice size, the
 * model's choices (hier's crossing of hosts among them), and the agreement hash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "algorithms/tune.h"
#include "topo/topo.h"

static int algo_index(const char *name)
{
    for (int i = 0; i < braid_nalgos; i++)
        if (strcmp(braid_algos[i]->name, name) == 0)
            return i;
    fail_msg("no algorithm %s", name);
    return -1;
}

static int allowed(const braid_tune_t *t, braid_coll_kind_t k, const char *name)
{
    return (t->allow[k] >> algo_index(name)) & 1u;
}

/* The algorithm the tuner picks for an all-reduce-like call under t. */
static const char *choice(braid_tune_t *t, braid_coll_kind_t kind, int n, size_t count,
                          const braid_topo_t *topo)
{
    braid_coll_t c = { .kind = kind, .dtype = BRAID_FP32, .nranks = n, .count = count,
                       .topo = topo, .tune = t };
    const braid_algo_t *a[1];
    double cost[1];
    return braid_algo_rank(&c, a, cost, NULL, 1) > 0 ? a[0]->name : "-";
}

static void test_algo_lists(void **state)
{
    braid_tune_t t;
    (void)state;
    braid_tune_init(&t);
    assert_int_equal(braid_tune_algo(&t, "Ring,TREE"), BRAID_OK);
    assert_true(allowed(&t, BRAID_COLL_ALLREDUCE, "ring"));
    assert_true(allowed(&t, BRAID_COLL_ALLREDUCE, "tree"));
    assert_false(allowed(&t, BRAID_COLL_ALLREDUCE, "oneshot"));
    /* NCCL's "ring" is chain for broadcast and reduce */
    assert_true(allowed(&t, BRAID_COLL_BROADCAST, "chain"));
    assert_false(allowed(&t, BRAID_COLL_BROADCAST, "binomial"));
    /* a global list leaves alone the collectives it has nothing for */
    assert_true(allowed(&t, BRAID_COLL_ALLTOALL, "direct"));
    assert_true(allowed(&t, BRAID_COLL_ALLTOALL, "bruck"));
    assert_string_equal(t.algo_spec, "Ring,TREE");
    assert_string_equal(choice(&t, BRAID_COLL_ALLREDUCE, 8, 2, NULL), "tree");
    assert_string_equal(choice(&t, BRAID_COLL_ALLREDUCE, 4, 1 << 24, NULL), "ring");

    braid_tune_init(&t);
    assert_int_equal(braid_tune_algo(&t, " ^ oneshot , rd "), BRAID_OK);
    assert_false(allowed(&t, BRAID_COLL_ALLREDUCE, "oneshot"));
    assert_false(allowed(&t, BRAID_COLL_ALLGATHER, "rd"));
    assert_true(allowed(&t, BRAID_COLL_ALLREDUCE, "ring"));
    assert_true(allowed(&t, BRAID_COLL_ALLREDUCE, "hier"));
}

static void test_algo_per_collective(void **state)
{
    braid_tune_t t;
    (void)state;
    braid_tune_init(&t);
    assert_int_equal(braid_tune_algo(&t, "allreduce:tree;AllGather:^bruck,rd;broadcast:binomial"),
                     BRAID_OK);
    assert_true(allowed(&t, BRAID_COLL_ALLREDUCE, "tree"));
    assert_false(allowed(&t, BRAID_COLL_ALLREDUCE, "ring"));
    assert_false(allowed(&t, BRAID_COLL_ALLGATHER, "bruck"));
    assert_false(allowed(&t, BRAID_COLL_ALLGATHER, "rd"));
    assert_true(allowed(&t, BRAID_COLL_ALLGATHER, "ring"));
    assert_true(allowed(&t, BRAID_COLL_REDUCESCATTER, "rd"));      /* untouched */
    assert_string_equal(choice(&t, BRAID_COLL_BROADCAST, 4, 1 << 24, NULL), "binomial");
    assert_string_equal(choice(&t, BRAID_COLL_ALLREDUCE, 4, 1 << 24, NULL), "tree");
    /* later sections win; pairwise is direct's all-to-all */
    assert_int_equal(braid_tune_algo(&t, "allreduce:ring;allreduce:hier;alltoall:pairwise"),
                     BRAID_OK);
    assert_false(allowed(&t, BRAID_COLL_ALLREDUCE, "ring"));
    assert_true(allowed(&t, BRAID_COLL_ALLREDUCE, "hier"));
    assert_string_equal(choice(&t, BRAID_COLL_ALLTOALL, 8, 1, NULL), "direct");
    /* hier on one host declines: nothing left */
    assert_string_equal(choice(&t, BRAID_COLL_ALLREDUCE, 4, 100, NULL), "-");
}

static void expect_error(const char *spec, const char *part)
{
    braid_tune_t t, before;
    braid_tune_init(&t);
    before = t;
    assert_int_equal(braid_tune_algo(&t, spec), BRAID_ERR_INVALID);
    if (strstr(braid_err_last(), part) == NULL)
        fail_msg("NCCL_ALGO=\"%s\": \"%s\" lacks \"%s\"", spec, braid_err_last(), part);
    assert_memory_equal(&t, &before, sizeof(t));           /* nothing changed */
}

static void test_algo_errors(void **state)
{
    (void)state;
    expect_error("ring,foo", "unknown name \"foo\" (known: ring, oneshot");
    expect_error("ring,foo", "hier");
    expect_error("ring,,tree", "an empty name");
    expect_error("allreduce:", "an empty name");
    expect_error("allreduxe:ring", "unknown collective \"allreduxe\" (known: AllReduce");
    expect_error("allreduce:bruck", "leaves AllReduce nothing braid has");
    expect_error("allreduce:nvls", "leaves AllReduce nothing braid has");
    expect_error("broadcast:^chain,binomial", "leaves Broadcast nothing");
    /* known NCCL names braid lacks are accepted in a global list */
    braid_tune_t t;
    braid_tune_init(&t);
    assert_int_equal(braid_tune_algo(&t, "NVLS,CollnetDirect,PAT,ring"), BRAID_OK);
    assert_true(allowed(&t, BRAID_COLL_ALLREDUCE, "ring"));
    assert_false(allowed(&t, BRAID_COLL_ALLREDUCE, "tree"));
}

static void test_proto(void **state)
{
    braid_tune_t t;
    (void)state;
    braid_tune_init(&t);
    assert_int_equal(braid_tune_proto(&t, "^LL,ll128"), BRAID_OK);
    assert_int_equal(t.proto[BRAID_COLL_ALLREDUCE], 1u << BRAID_PROTO_SIMPLE);
    assert_int_equal(braid_tune_proto(&t, "allreduce:LL"), BRAID_OK);
    assert_int_equal(t.proto[BRAID_COLL_ALLREDUCE], 1u << BRAID_PROTO_LL);
    assert_int_equal(t.proto[BRAID_COLL_ALLGATHER], 1u << BRAID_PROTO_SIMPLE);
    assert_int_equal(braid_tune_proto(&t, "simple,LL256"), BRAID_ERR_INVALID);
    assert_non_null(strstr(braid_err_last(), "NCCL_PROTO=\"simple,LL256\": unknown name "
                                             "\"LL256\" (known: LL, LL128, Simple)"));
}

/* Ranks with different settings must not agree; the same settings must. */
static void test_hash(void **state)
{
    braid_tune_t a, b;
    (void)state;
    braid_tune_init(&a);
    braid_tune_init(&b);
    assert_true(braid_tune_hash(&a) == braid_tune_hash(&b));
    assert_int_equal(braid_tune_algo(&b, "^tree"), BRAID_OK);
    assert_true(braid_tune_hash(&a) != braid_tune_hash(&b));
    assert_int_equal(braid_tune_algo(&a, "allreduce:^tree;allgather:^tree"), BRAID_OK);
    assert_true(braid_tune_hash(&a) == braid_tune_hash(&b));   /* same masks, other text */
    a.calibrate = !b.calibrate;
    assert_true(braid_tune_hash(&a) != braid_tune_hash(&b));
    a.calibrate = b.calibrate;
    a.slice = 8192;                                             /* BRAID_SLICE_SIZE */
    assert_true(braid_tune_hash(&a) != braid_tune_hash(&b));
}

/* The slice size the tuner picks for the call, and its algorithm's name. */
static size_t slice_choice(braid_tune_t *t, braid_coll_kind_t kind, int n, size_t count,
                           const char **name_p)
{
    braid_coll_t c = { .kind = kind, .dtype = BRAID_FP32, .nranks = n, .count = count,
                       .tune = t };
    const braid_algo_t *a[1];
    double cost[1];
    size_t slice[1];
    assert_int_equal(braid_algo_rank(&c, a, cost, slice, 1), 1);
    *name_p = a[0]->name;
    return slice[0];
}

/*
 * The slice size: a chain broadcast of 2 MiB on 4 ranks under the default model (256 KiB
 * slot, 5 GB/s, 0.25 us per slice) costs 2 slices of fill against a hand-over per slice:
 * 256K 106 us, 128K 56, 64K 34, 32K 29, 16K 38, so 32 KiB. Hand-overs that cost more keep the
 * slot; a ring gains nothing from smaller slices; a message within one slice keeps the
 * slot; BRAID_SLICE_SIZE overrides; the schedule carries the choice, also when the tuner
 * remembers it.
 */
static void test_slice_choice(void **state)
{
    braid_tune_t t;
    const char *name;
    (void)state;
    braid_tune_init(&t);
    assert_int_equal(braid_tune_algo(&t, "broadcast:chain"), BRAID_OK);
    assert_int_equal(slice_choice(&t, BRAID_COLL_BROADCAST, 4, 1 << 19, &name), 32768);
    assert_string_equal(name, "chain");
    assert_int_equal(slice_choice(&t, BRAID_COLL_BROADCAST, 4, 256, &name), 262144);

    braid_coll_t c = { .kind = BRAID_COLL_BROADCAST, .dtype = BRAID_FP32, .nranks = 4,
                       .count = 1 << 19, .tune = &t };
    braid_sched_t s;
    for (int i = 0; i < 2; i++) {       /* the second call takes the remembered choice */
        assert_int_equal(braid_algo_build(&c, &s, NULL), BRAID_OK);
        assert_int_equal(s.slice, 32768);
        braid_sched_free(&s);
    }

    t.model.slice_cost[BRAID_LINK_NUMA] = 100;
    assert_int_equal(slice_choice(&t, BRAID_COLL_BROADCAST, 4, 1 << 19, &name), 262144);
    braid_tune_init(&t);
    assert_int_equal(slice_choice(&t, BRAID_COLL_ALLREDUCE, 4, 1 << 22, &name), 262144);
    assert_string_equal(name, "ring");
    t.slice = 8192;
    assert_int_equal(slice_choice(&t, BRAID_COLL_ALLREDUCE, 4, 1 << 22, &name), 8192);
    assert_int_equal(slice_choice(&t, BRAID_COLL_BROADCAST, 4, 1 << 19, &name), 8192);
}

/* The model decides by link class: with a slow network hier takes the large all-reduce of
 * 2 hosts x 2 ranks; a 1-rank call costs a local copy. */
static void test_model_choice(void **state)
{
    braid_tune_t t;
    braid_topo_t topo;
    const uint64_t ids[4] = { 7, 7, 9, 9 };
    (void)state;
    braid_tune_init(&t);
    assert_int_equal(braid_topo_build(&topo, 4, ids, NULL), BRAID_OK);
    t.model.beta[BRAID_LINK_NET] = 1.0 / 60;        /* 60 MB/s between hosts */
    assert_int_equal(braid_tune_algo(&t, "allreduce:ring,hier,oneshot"), BRAID_OK);
    assert_string_equal(choice(&t, BRAID_COLL_ALLREDUCE, 4, 1 << 24, &topo), "hier");
    /* one-shot: one hop inside a host; between hosts it pays alpha per message */
    assert_string_equal(choice(&t, BRAID_COLL_ALLREDUCE, 4, 2, NULL), "oneshot");
    assert_string_equal(choice(&t, BRAID_COLL_ALLREDUCE, 4, 2, &topo), "hier");
    assert_string_equal(choice(&t, BRAID_COLL_ALLREDUCE, 1, 2, NULL), "ring");
    braid_topo_free(&topo);
}

/* hier's all-reduce on rank 0 of a layout: the steps of its schedule and its cost. */
static int hier_steps(braid_tune_t *t, int n, size_t count, const braid_topo_t *topo,
                      double *cost)
{
    const braid_algo_t *hier = braid_algos[algo_index("hier")];
    braid_coll_t c = { .kind = BRAID_COLL_ALLREDUCE, .dtype = BRAID_FP32, .nranks = n,
                       .count = count, .topo = topo, .tune = t };
    braid_sched_t s;
    braid_sched_init(&s, sizeof(float));
    assert_int_equal(hier->build(&c, &s), BRAID_OK);
    int steps = s.nsteps;
    braid_sched_free(&s);
    *cost = hier->cost(&c, &t->model);
    return steps;
}

/* hier crosses hosts by recursive doubling where they are a power of two and the model
 * finds it cheaper, else by a ring, and its schedule and its cost agree. 1 rank per host,
 * 1 ms between hosts, 48 bytes: 4 hosts cross in 2 steps (and the copy into recvbuff: 4
 * steps in all; a ring would take 6 crossings, 9 steps), 3 hosts in the ring's 4 (7
 * steps). 64 MiB on 4 hosts at the built-in figures: the doubling moves the whole buffer
 * twice, the ring 1.5 times, and the ring is taken. */
static void test_hier_crossing(void **state)
{
    braid_tune_t t;
    braid_topo_t four, three;
    const uint64_t ids[4] = { 1, 2, 3, 4 };
    double cost;
    (void)state;
    braid_tune_init(&t);
    assert_int_equal(braid_topo_build(&four, 4, ids, NULL), BRAID_OK);
    assert_int_equal(braid_topo_build(&three, 3, ids, NULL), BRAID_OK);
    t.model.alpha[BRAID_LINK_NET] = 1000;
    assert_int_equal(hier_steps(&t, 4, 12, &four, &cost), 4);
    assert_true(cost > 2000 && cost < 2010);
    assert_int_equal(hier_steps(&t, 3, 12, &three, &cost), 7);
    assert_true(cost > 4000 && cost < 4010);
    braid_tune_init(&t);
    assert_int_equal(hier_steps(&t, 4, 1 << 24, &four, &cost), 9);
    braid_topo_free(&four);
    braid_topo_free(&three);
}

/* Where ranks outnumber CPUs they take turns moving bytes between hosts: a byte there
 * costs the larger of the NIC share and the ranks per CPU, times a lone pair's. With the
 * network as fast as shared memory, the ring takes a 4 MiB all-reduce on 2 hosts x 2 ranks
 * (by hand: ring 1819 us, hier 3057), and with 3 ranks per CPU hier does (its crossing
 * already shares the NIC by 2: ring 4334 us, hier 3476). */
static void test_cpu_share(void **state)
{
    braid_tune_t t;
    braid_topo_t topo;
    const uint64_t ids[4] = { 7, 7, 9, 9 };
    braid_model_t *m = &t.model;
    (void)state;
    braid_tune_init(&t);
    assert_int_equal(braid_topo_build(&topo, 4, ids, NULL), BRAID_OK);
    m->beta[BRAID_LINK_NET] = m->beta[BRAID_LINK_NUMA];
    assert_int_equal(braid_tune_algo(&t, "allreduce:ring,hier"), BRAID_OK);
    assert_string_equal(choice(&t, BRAID_COLL_ALLREDUCE, 4, 1 << 20, &topo), "ring");
    m->cpu_share = 3;
    assert_true(braid_model_beta(m, BRAID_LINK_NET, 1) == 3 * m->beta[BRAID_LINK_NET]);
    assert_true(braid_model_beta(m, BRAID_LINK_NET, 4) == 4 * m->beta[BRAID_LINK_NET]);
    assert_true(braid_model_beta(m, BRAID_LINK_NUMA, 1) == m->beta[BRAID_LINK_NUMA]);
    assert_string_equal(choice(&t, BRAID_COLL_ALLREDUCE, 4, 1 << 20, &topo), "hier");
    braid_topo_free(&topo);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_algo_lists),
        cmocka_unit_test(test_algo_per_collective),
        cmocka_unit_test(test_algo_errors),
        cmocka_unit_test(test_proto),
        cmocka_unit_test(test_hash),
        cmocka_unit_test(test_model_choice),
        cmocka_unit_test(test_slice_choice),
        cmocka_unit_test(test_cpu_share),
        cmocka_unit_test(test_hier_crossing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
