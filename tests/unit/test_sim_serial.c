/*
 * The GPU engine's order of a job (src/exec/lower.h), checked by the simulator's serial
 * stream mode (algorithms/sim.h): every rank runs its job's slice-steps one after another,
 * and one that cannot go holds back the rest of its stream.
 *
 * Every algorithm the device path can run (coll.device set, coll.pull NONE: two-shot pulls
 * and declines them all) on every collective it builds, 1 to 9 ranks, 2, 3, 4 and 8 slots of
 * 4 KiB, a tiny count and counts of 1, 3 and 40 slices per step, in and out of place, roots
 * 0 and last, on one host and on two halves; then groups: two collectives of different
 * kinds and algorithms, a collective with sends and receives, rings of sends larger than
 * a FIFO, every rank exchanging with every peer, a rank sending to itself.
 *
 * Then what must fail: bad orders (sends lowered whole; collectives round-robin; rounds of a
 * slice of every send then of every receive, which more sends to one peer than a FIFO
 * holds deadlock; an order that leaves out a slice-step), bad jobs (lengths or calls that
 * differ, a message no one receives, a receive no one sends).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algorithms/sim.h"
#include "topo/topo.h"

#define SLOT 4096
#define ELEMS (SLOT / 4)            /* int32 elements per slice */
#define MAXN 9
#define MAXCALLS 256

static const int nslots_all[] = { 2, 3, 4, 8 };
static const int slices_all[] = { 0, 1, 3, 40 };   /* 0: one element */

typedef struct job {
    int n;
    const braid_topo_t *topo;
    braid_sim_call_t calls[MAXCALLS];
    int ncalls;
    uint64_t coll_seq[MAXN], send_seq[MAXN][MAXN], recv_seq[MAXN][MAXN];
    size_t v[MAXN][4][MAXN];    /* all-to-allv: counts and displacements of each rank */
    char desc[512];
} job_t;

static int cases_run, cases_declined;

static void say_runs(const char *what, int before)
{
    printf("test_sim_serial: %s: %d runs\n", what, cases_run - before);
}

static int is_rooted(braid_coll_kind_t k)
{
    return k == BRAID_COLL_BROADCAST || k == BRAID_COLL_REDUCE || k == BRAID_COLL_GATHER ||
           k == BRAID_COLL_SCATTER;
}

static int is_reduction(braid_coll_kind_t k)
{
    return k == BRAID_COLL_ALLREDUCE || k == BRAID_COLL_REDUCE ||
           k == BRAID_COLL_REDUCESCATTER;
}

static void job_init(job_t *j, int n, const braid_topo_t *topo)
{
    memset(j, 0, sizeof(*j));
    j->n = n;
    j->topo = topo;
}

static void job_say(job_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void job_say(job_t *j, const char *fmt, ...)
{
    size_t used = strlen(j->desc);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->desc + used, sizeof(j->desc) - used, fmt, ap);
    va_end(ap);
}

static braid_sim_call_t *job_add(job_t *j, int rank)
{
    assert_true(j->ncalls < MAXCALLS);
    braid_sim_call_t *c = &j->calls[j->ncalls++];
    memset(c, 0, sizeof(*c));
    c->rank = rank;
    c->coll.rank = rank;
    c->coll.nranks = j->n;
    c->coll.dtype = BRAID_INT32;
    c->coll.device = 1;
    c->coll.pull = BRAID_PULL_NONE;
    c->coll.topo = j->topo;
    return c;
}

/* Rank r's all-to-allv arrays: r sends count + (r + 2p) % 3 elements to p. */
static void job_a2av(job_t *j, int r, size_t count, braid_coll_t *c)
{
    size_t so = 0, ro = 0;
    for (int p = 0; p < j->n; p++) {
        j->v[r][0][p] = count + (size_t)((r + 2 * p) % 3);
        j->v[r][1][p] = so;
        j->v[r][2][p] = count + (size_t)((p + 2 * r) % 3);
        j->v[r][3][p] = ro;
        so += j->v[r][0][p];
        ro += j->v[r][2][p];
    }
    c->sendcounts = j->v[r][0];
    c->sdispls = j->v[r][1];
    c->recvcounts = j->v[r][2];
    c->rdispls = j->v[r][3];
}

/* Whether the algorithm takes the call (as rank 0 makes it; every rank decides alike). */
static int algo_takes(const braid_coll_t *c0)
{
    braid_sched_t s;
    braid_sched_init(&s, 4);
    braid_status_t st = c0->force->build(c0, &s);
    braid_sched_free(&s);
    if (st != BRAID_OK && st != BRAID_ERR_UNSUPPORTED)
        fail_msg("%s of %s failed to build: %d", c0->force->name, braid_coll_name(c0->kind),
                 (int)st);
    return st == BRAID_OK;
}

/* Every rank calls the collective, forced to `a`; 0 (nothing added) if `a` declines it. */
static int job_coll(job_t *j, const braid_algo_t *a, braid_coll_kind_t kind, size_t count,
                    int root, int in_place)
{
    int first = j->ncalls;
    for (int r = 0; r < j->n; r++) {
        braid_sim_call_t *c = job_add(j, r);
        c->coll.kind = kind;
        c->coll.root = is_rooted(kind) ? root : -1;
        c->coll.count = count;
        c->coll.in_place = in_place;
        c->coll.force = a;
        if (kind == BRAID_COLL_ALLTOALLV)
            job_a2av(j, r, count, &c->coll);
        c->hdr = (braid_msg_hdr_t){ .seq = ++j->coll_seq[r], .kind = (uint8_t)kind,
                                    .count = kind == BRAID_COLL_ALLTOALLV ? 0 : count,
                                    .dtype = BRAID_INT32, .root = c->coll.root,
                                    .op = is_reduction(kind) ? 0 : 255,
                                    .algo = (uint8_t)(braid_algo_index(a) + 1) };
        c->expect = c->hdr;
        if (r == 0 && !algo_takes(&c->coll)) {
            j->ncalls = first;
            j->coll_seq[0]--;
            return 0;
        }
    }
    job_say(j, "%s %s count %zu root %d%s; ", a->name, braid_coll_name(kind), count, root,
            in_place ? " in place" : "");
    return 1;
}

/* Rank r sends `count` elements to peer (send) or receives them from it; the tuner builds
 * it (direct). */
static void job_p2p(job_t *j, int r, int peer, int send, size_t count)
{
    braid_sim_call_t *c = job_add(j, r);
    c->coll.kind = send ? BRAID_COLL_SEND : BRAID_COLL_RECV;
    c->coll.root = peer;
    c->coll.count = count;
    uint64_t seq = send ? ++j->send_seq[r][peer] : ++j->recv_seq[r][peer];
    c->hdr = (braid_msg_hdr_t){ .seq = seq, .kind = (uint8_t)c->coll.kind, .count = count,
                                .dtype = BRAID_INT32, .root = -1, .op = 255 };
    c->expect = c->hdr;
    c->expect.kind = BRAID_COLL_SEND;   /* a receive matches the peer's send */
}

static int job_run(job_t *j, int nslots, const braid_sim_order_t *order,
                   braid_sim_result_t *res)
{
    braid_sim_cfg_t cfg = { .nslots = nslots, .slot_size = SLOT, .serial = 1, .order = order };
    return braid_sim_run(&cfg, j->n, j->calls, j->ncalls, res);
}

/* `order` (NULL: the engine's) runs the job on every slot count. */
static void expect_ok_in(job_t *j, const braid_sim_order_t *order)
{
    braid_sim_result_t res;
    for (size_t k = 0; k < sizeof(nslots_all) / sizeof(nslots_all[0]); k++) {
        if (job_run(j, nslots_all[k], order, &res) != 0)
            fail_msg("%s order, %d ranks, %d slots: %s: %s", order ? order->name : "engine",
                     j->n, nslots_all[k], j->desc, res.msg);
        cases_run++;
    }
}

static void expect_ok(job_t *j)
{
    expect_ok_in(j, NULL);
}

/*
 * ---- other orders: each op in its own order (braid_lower over that op alone), the ops
 * interleaved otherwise than the engine does. Phase 0 gives the collectives (whole, or
 * round-robin), then the sends and receives: round-robin as the engine (phase 1), or in
 * rounds of a send phase (1) then a receive phase (2). ----
 */

enum {
    ORDER_SENDS_WHOLE,      /* each send and receive whole, in call order */
    ORDER_COLLS_RR,         /* collectives round-robin: a slice-step of each per round */
    ORDER_COLLS_RR_ITER,    /* the same by a slice of every step of the stage per round */
    ORDER_SENDS_FIRST,      /* rounds of a slice of every send, then of every receive */
};

typedef struct alt_iter {
    int mode, nops, phase, cur, moved;
    braid_op_t *const *ops;
    braid_lower_t *l;           /* [nops] */
    braid_lower_pos_t *pos;     /* [nops] */
    braid_lower_item_t *peek;   /* [nops] each op's next slice-step, while have[] */
    int *have;
    size_t (*unit)[2];          /* [nops] the peeked slice-step's stage and slice */
} alt_iter_t;

static void alt_fetch(alt_iter_t *b, int i)
{
    b->have[i] = braid_lower_next(&b->l[i], &b->peek[i]);
    b->peek[i].op = i;
    b->unit[i][0] = (size_t)b->pos[i].stage_begin;
    b->unit[i][1] = b->pos[i].iter;
}

static void *alt_begin(int mode, braid_op_t *const *ops, int nops)
{
    alt_iter_t *b = calloc(1, sizeof(*b));
    size_t n = (size_t)nops + 1;
    b->mode = mode;
    b->nops = nops;
    b->ops = ops;
    b->l = calloc(n, sizeof(*b->l));
    b->pos = calloc(n, sizeof(*b->pos));
    b->peek = calloc(n, sizeof(*b->peek));
    b->have = calloc(n, sizeof(*b->have));
    b->unit = calloc(n, sizeof(*b->unit));
    for (int i = 0; i < nops; i++) {
        braid_lower_begin(&b->l[i], &ops[i], 1, &b->pos[i]);
        alt_fetch(b, i);
    }
    return b;
}

static int alt_split(const alt_iter_t *b)
{
    return b->mode == ORDER_SENDS_FIRST;
}

/* A send's peer (>= 0), or -1 - the peer of a receive. */
static int alt_p2p_peer(const braid_op_t *op)
{
    const braid_step_t *st = &op->sched.steps[0];
    return st->send_peer >= 0 ? st->send_peer : -1 - st->recv_peer;
}

/* Whether op i gives slice-steps in this phase. */
static int alt_in_phase(const alt_iter_t *b, int i)
{
    if (!b->have[i] || braid_lower_is_p2p(b->ops[i]) != (b->phase > 0))
        return 0;
    return b->phase == 0 || !alt_split(b) || (alt_p2p_peer(b->ops[i]) >= 0) == (b->phase == 1);
}

/* The op at the cursor, or -1 if it has no slice-step in this phase. */
static int alt_pick(const alt_iter_t *b)
{
    return alt_in_phase(b, b->cur) ? b->cur : -1;
}

/* Whether op i gives its next slice-step too, after one of `unit`. */
static int alt_stay(const alt_iter_t *b, int i, const size_t *unit)
{
    if (!b->have[i] || (b->phase > 0 && b->mode != ORDER_SENDS_WHOLE))
        return 0;
    if (b->mode == ORDER_COLLS_RR)
        return 0;
    if (b->mode == ORDER_COLLS_RR_ITER)
        return b->unit[i][0] == unit[0] && b->unit[i][1] == unit[1];
    return 1;
}

/* The end of a pass over the cursor: the next round, phase, or the end. */
static void alt_pass_end(alt_iter_t *b)
{
    b->cur = 0;
    if (b->phase == 1 && alt_split(b)) {
        b->phase = 2;
        return;
    }
    if (!b->moved)
        b->phase = b->phase == 0 ? 1 : 3;
    else if (b->phase == 2)
        b->phase = 1;
    b->moved = 0;
}

static int alt_next(void *iter, braid_lower_item_t *it)
{
    alt_iter_t *b = iter;
    while (b->nops > 0 && b->phase < 3) {
        if (b->cur == b->nops) {
            alt_pass_end(b);
            continue;
        }
        int i = alt_pick(b);
        if (i < 0) {
            b->cur++;
            continue;
        }
        size_t unit[2] = { b->unit[i][0], b->unit[i][1] };
        *it = b->peek[i];
        alt_fetch(b, i);
        b->moved = 1;
        if (!alt_stay(b, i, unit))
            b->cur++;
        return 1;
    }
    return 0;
}

static void alt_end(void *iter)
{
    alt_iter_t *b = iter;
    free(b->l);
    free(b->pos);
    free(b->peek);
    free(b->have);
    free(b->unit);
    free(b);
}

#define ALT_ORDER(_mode, _fn, _name)                                                       \
    static void *_fn##_begin(braid_op_t *const *ops, int nops)                             \
    {                                                                                      \
        return alt_begin(_mode, ops, nops);                                                \
    }                                                                                      \
    static const braid_sim_order_t _fn = { .name = _name, .begin = _fn##_begin,            \
                                           .next = alt_next, .end = alt_end }

ALT_ORDER(ORDER_SENDS_WHOLE, order_sends_whole, "sends-whole");
ALT_ORDER(ORDER_COLLS_RR, order_colls_rr, "collectives-round-robin");
ALT_ORDER(ORDER_COLLS_RR_ITER, order_colls_rr_iter, "collectives-round-robin-by-slice");
ALT_ORDER(ORDER_SENDS_FIRST, order_sends_first, "sends-first-rounds");

/* The engine's order less each rank's last slice-step: the check must see it missing. */
typedef struct drop_iter {
    void *inner;
    braid_lower_item_t next;
    int have;
} drop_iter_t;

static void *drop_begin(braid_op_t *const *ops, int nops)
{
    drop_iter_t *d = calloc(1, sizeof(*d));
    d->inner = braid_sim_order_lower.begin(ops, nops);
    d->have = braid_sim_order_lower.next(d->inner, &d->next);
    return d;
}

static int drop_next(void *iter, braid_lower_item_t *it)
{
    drop_iter_t *d = iter;
    *it = d->next;
    d->have = d->have && braid_sim_order_lower.next(d->inner, &d->next);
    return d->have;
}

static void drop_end(void *iter)
{
    drop_iter_t *d = iter;
    braid_sim_order_lower.end(d->inner);
    free(d);
}

static const braid_sim_order_t order_drop_last = {
    .name = "drop-last", .begin = drop_begin, .next = drop_next, .end = drop_end };

/* ---- the collectives, one per job ---- */

/* A count giving `slices` slices per step (0: one element), a little short of whole. */
static size_t coll_count(braid_coll_kind_t kind, int n, int slices)
{
    if (slices == 0)
        return 1;
    if (kind == BRAID_COLL_ALLREDUCE)
        return (size_t)slices * ELEMS * (size_t)n - 5;
    return (size_t)slices * ELEMS - 5;
}

/* Ranks on two hosts, halves (so that hier runs where the halves are equal). */
static const braid_topo_t *halves(int n, braid_topo_t *t)
{
    uint64_t ids[MAXN];
    for (int r = 0; r < n; r++)
        ids[r] = r < (n + 1) / 2 ? 100 : 101;
    assert_int_equal(braid_topo_build(t, n, ids, NULL), BRAID_OK);
    return t;
}

static int single_cases(const braid_algo_t *a, braid_coll_kind_t kind, int n,
                        const braid_topo_t *topo)
{
    int ran = 0;
    for (size_t si = 0; si < sizeof(slices_all) / sizeof(slices_all[0]); si++)
        for (int ip = 0; ip < 2; ip++)
            for (int root = 0; root < n; root += n - 1) {
                job_t j;
                job_init(&j, n, topo);
                if (job_coll(&j, a, kind, coll_count(kind, n, slices_all[si]), root, ip)) {
                    expect_ok(&j);
                    ran++;
                } else {
                    cases_declined++;
                }
                if (!is_rooted(kind) || n == 1)
                    break;
            }
    return ran;
}

/* Every algorithm on every collective it claims; only two-shot (pulls) declines them all. */
static void test_single_calls(void **state)
{
    (void)state;
    int before = cases_run;
    for (int ai = 0; ai < braid_nalgos; ai++) {
        const braid_algo_t *a = braid_algos[ai];
        for (int k = 0; k < BRAID_COLL_SEND; k++) {
            if (!(a->colls & (1u << k)))
                continue;
            int ran = 0;
            for (int n = 1; n <= MAXN; n++) {
                braid_topo_t t;
                ran += single_cases(a, (braid_coll_kind_t)k, n, NULL);
                if (n > 1) {
                    ran += single_cases(a, (braid_coll_kind_t)k, n, halves(n, &t));
                    braid_topo_free(&t);
                }
            }
            if ((ran == 0) != (strcmp(a->name, "twoshot") == 0))
                fail_msg("%s ran %d device cases of %s", a->name, ran,
                         braid_coll_name((braid_coll_kind_t)k));
        }
    }
    say_runs("single calls", before);
}

/* ---- groups ---- */

typedef struct entry {
    const braid_algo_t *algo;
    braid_coll_kind_t kind;
} entry_t;

/* The (algorithm, collective) pairs that run on the device path. */
static int device_entries(entry_t *e, int max)
{
    int k = 0;
    for (int ai = 0; ai < braid_nalgos; ai++)
        for (int c = 0; c < BRAID_COLL_SEND; c++)
            if ((braid_algos[ai]->colls & (1u << c)) &&
                strcmp(braid_algos[ai]->name, "twoshot") != 0 && k < max)
                e[k++] = (entry_t){ braid_algos[ai], (braid_coll_kind_t)c };
    return k;
}

/* Two collectives of different kinds and algorithms, in both orders. */
static void test_two_colls(void **state)
{
    (void)state;
    int before = cases_run;
    entry_t e[64];
    int ne = device_entries(e, 64);
    const int ns[] = { 2, 3, 4, 7, 8 };
    for (int a = 0; a < ne; a++)
        for (int b = 0; b < ne; b++)
            for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
                int n = ns[ni];
                braid_topo_t t;
                const braid_topo_t *topo = n % 2 == 0 ? halves(n, &t) : NULL;
                job_t j;
                job_init(&j, n, topo);
                if (e[a].kind != e[b].kind && e[a].algo != e[b].algo &&
                    job_coll(&j, e[a].algo, e[a].kind, coll_count(e[a].kind, n, 3), 0, 0) &&
                    job_coll(&j, e[b].algo, e[b].kind, coll_count(e[b].kind, n, 2), n - 1, 1))
                    expect_ok(&j);
                if (topo != NULL)
                    braid_topo_free(&t);
            }
    say_runs("two colls", before);
}

/* Every rank sends `count` to r + dist and receives as much from r - dist. */
static void ring_p2p(job_t *j, int dist, int send_first, size_t count)
{
    for (int r = 0; r < j->n; r++)
        for (int k = 0; k < 2; k++) {
            int send = k == 0 ? send_first : !send_first;
            job_p2p(j, r, (r + (send ? dist : j->n - dist)) % j->n, send, count);
        }
    job_say(j, "ring of sends to r+%d of %zu, %s first; ", dist, count,
            send_first ? "sends" : "receives");
}

/* Every rank sends `count` to every peer, itself included, and receives from each:
 * pairwise (peer r + k with r - k, as ncclAllToAll users group them) or naively (peer p
 * in rank order, send then receive). */
static void exchange_p2p(job_t *j, int pairwise, size_t count)
{
    for (int r = 0; r < j->n; r++)
        for (int k = 0; k < j->n; k++) {
            job_p2p(j, r, pairwise ? (r + k) % j->n : k, 1, count);
            job_p2p(j, r, pairwise ? (r - k + j->n) % j->n : k, 0, count);
        }
    job_say(j, "%s exchange of %zu with every peer; ", pairwise ? "pairwise" : "in-order",
            count);
}

/* Send-and-receive jobs. */
enum {
    P2P_RING,           /* a ring of sends to r+1, sends first in call order */
    P2P_RING_BOTH,      /* rings to r+1 and to r-1, sends first */
    P2P_SELF,           /* every rank to itself, send first */
    P2P_PAIRWISE,       /* send to r+k and receive from r-k, k = 0..n-1 */
    P2P_IN_ORDER,       /* send to and receive from peer p, p = 0..n-1 */
    P2P_RING_RECV_FIRST,    /* the ring, receives first in call order */
    P2P_SELF_RECV_FIRST,
    P2P_REPEAT,         /* three sends to r+1, then three receives from r-1 */
    P2P_SHAPES
};

/* Counts: one element, 9 slices (more than a FIFO) less a little, 40 slices. */
static const size_t p2p_counts[] = { 1, 9 * ELEMS - 3, 40 * ELEMS };

static void p2p_job(job_t *j, int n, int shape, int ci)
{
    size_t count = p2p_counts[ci];
    job_init(j, n, NULL);
    switch (shape) {
    case P2P_RING_BOTH:
        ring_p2p(j, n - 1, 1, p2p_counts[(ci + 1) % 3]);
        /* fall through */
    case P2P_RING:
        ring_p2p(j, 1, 1, count);
        break;
    case P2P_SELF:
        ring_p2p(j, 0, 1, count);
        break;
    case P2P_PAIRWISE:
    case P2P_IN_ORDER:
        exchange_p2p(j, shape == P2P_PAIRWISE, count);
        break;
    case P2P_RING_RECV_FIRST:
    case P2P_SELF_RECV_FIRST:
        ring_p2p(j, shape == P2P_RING_RECV_FIRST, 0, count);
        break;
    default:
        for (int r = 0; r < n; r++)
            for (int k = 0; k < 6; k++)
                job_p2p(j, r, (r + (k < 3 ? 1 : n - 1)) % n, k < 3, count);
        job_say(j, "three sends of %zu to r+1, then three receives; ", count);
    }
}

/* Sends and receives alone, in every shape: receives grouped before the sends they wait
 * for, more sends to one peer than a FIFO has slots. */
static void test_p2p(void **state)
{
    (void)state;
    int before = cases_run;
    for (int n = 1; n <= MAXN; n++)
        for (int shape = 0; shape < P2P_SHAPES; shape++)
            for (int ci = 0; ci < 3; ci++) {
                job_t j;
                p2p_job(&j, n, shape, ci);
                expect_ok(&j);
            }
    say_runs("p2p", before);
}

/* Rounds of a slice of every send, then of every receive, are not enough: more sends to
 * one peer than a FIFO holds fill it before either rank gets to its receives. */
static void test_bad_sends_first(void **state)
{
    (void)state;
    int failed = 0, runs = 0;
    for (int n = 1; n <= MAXN; n++)
        for (int ci = 1; ci < 3; ci++) {
            job_t j;
            braid_sim_result_t res;
            p2p_job(&j, n, P2P_REPEAT, ci);
            int rc = job_run(&j, 2, &order_sends_first, &res);
            assert_true(rc == 0 || res.deadlock);
            failed += rc != 0;
            runs++;
        }
    printf("test_sim_serial: sends-first rounds: %d of %d jobs of three sends to one peer "
           "deadlock on 2 slots\n", failed, runs);
    assert_int_equal(failed, runs);
}

/* Each collective with sends and receives in the same group, before and after it. */
static void test_coll_p2p(void **state)
{
    (void)state;
    int before = cases_run;
    entry_t e[64];
    int ne = device_entries(e, 64);
    for (int a = 0; a < ne; a++)
        for (int n = 1; n <= MAXN; n++) {
            braid_topo_t t;
            const braid_topo_t *topo = n % 2 == 0 ? halves(n, &t) : NULL;
            size_t cc = coll_count(e[a].kind, n, 3);
            job_t j;
            job_init(&j, n, topo);
            if (job_coll(&j, e[a].algo, e[a].kind, cc, n - 1, 0)) {
                ring_p2p(&j, 1, 1, 9 * ELEMS);
                expect_ok(&j);
                job_init(&j, n, topo);
                exchange_p2p(&j, 1, 5 * ELEMS);
                job_coll(&j, e[a].algo, e[a].kind, cc, 0, 1);
                ring_p2p(&j, n - 1, 1, 1);
                expect_ok(&j);
            }
            if (topo != NULL)
                braid_topo_free(&t);
        }
    say_runs("coll p2p", before);
}

/* ---- what must fail ---- */

static void expect_fail(job_t *j, int nslots, const braid_sim_order_t *order, int deadlock,
                        const char *says)
{
    braid_sim_result_t res;
    if (job_run(j, nslots, order, &res) == 0)
        fail_msg("%s order passed where it must fail: %d ranks, %d slots: %s",
                 order ? order->name : "the engine's", j->n, nslots, j->desc);
    if (res.deadlock != deadlock || strstr(res.msg, says) == NULL)
        fail_msg("%d ranks, %d slots: %s: expected %s (\"%s\"), got: %s", j->n, nslots,
                 j->desc, deadlock ? "a deadlock" : "an error", says, res.msg);
}

/* Sends lowered whole before their receives: a ring of sends larger than a FIFO deadlocks
 * (every rank fills the FIFO to r+1 and waits), where the engine's order runs it. */
static void test_bad_sends_whole(void **state)
{
    (void)state;
    int before = cases_run;
    for (int n = 1; n <= MAXN; n++)
        for (size_t k = 0; k < sizeof(nslots_all) / sizeof(nslots_all[0]); k++) {
            job_t j;
            job_init(&j, n, NULL);
            ring_p2p(&j, 1, 1, (size_t)(nslots_all[k] + 1) * ELEMS);
            expect_ok(&j);
            expect_fail(&j, nslots_all[k], &order_sends_whole, 1, "waits for a free slot");
        }
    say_runs("bad sends whole", before);
}

/* Every ordered pair of device entries on 2 to 5 ranks, 2 slots, in `order`: how many jobs
 * deadlock and how many cross messages, with headers (both must be seen). */
static void rr_survey(const braid_sim_order_t *order)
{
    entry_t e[64];
    int ne = device_entries(e, 64), deadlocks = 0, crossed = 0, tried = 0;
    for (int a = 0; a < ne; a++)
        for (int b = 0; b < ne; b++)
            for (int n = 2; n <= 5; n++) {
                job_t j;
                braid_sim_result_t res;
                job_init(&j, n, NULL);
                if (a == b ||
                    !job_coll(&j, e[a].algo, e[a].kind, coll_count(e[a].kind, n, 3), 0, 0) ||
                    !job_coll(&j, e[b].algo, e[b].kind, coll_count(e[b].kind, n, 3), n - 1, 0))
                    continue;
                tried++;
                if (job_run(&j, 2, order, &res) != 0) {
                    deadlocks += res.deadlock;
                    crossed += !res.deadlock;
                }
            }
    printf("test_sim_serial: %s order: %d of %d two-collective jobs deadlock, %d cross "
           "messages\n", order->name, deadlocks, tried, crossed);
    assert_true(deadlocks > 0 && crossed > 0);
}

/* Only lengths are compared: every message carries the same (zero) header. */
static void job_no_headers(job_t *j)
{
    for (int i = 0; i < j->ncalls; i++) {
        memset(&j->calls[i].hdr, 0, sizeof(j->calls[i].hdr));
        memset(&j->calls[i].expect, 0, sizeof(j->calls[i].expect));
    }
}

/*
 * Collectives round-robin (a slice-step of each per round, as the engine does sends and
 * receives) would not do, as lower.h says. A ring all-reduce then a tree all-reduce, 3
 * slices per ring step: on 2 ranks the two collectives' messages cross on a connection
 * (rank 0's tree step takes rank 1's ring message); on 4 ranks, lengths alone, they
 * deadlock. Then every pair of the device entries, both ways of round-robin: each kind of
 * failure must be seen, and the engine's order runs them all (test_two_colls).
 */
static void test_bad_colls_rr(void **state)
{
    (void)state;
    const braid_algo_t *tree = NULL;
    for (int ai = 0; ai < braid_nalgos; ai++)
        tree = strcmp(braid_algos[ai]->name, "tree") == 0 ? braid_algos[ai] : tree;
    assert_non_null(tree);
    for (int n = 2; n <= 4; n += 2) {
        job_t j;
        job_init(&j, n, NULL);
        assert_true(job_coll(&j, &braid_algo_ring, BRAID_COLL_ALLREDUCE, 3 * ELEMS * n, 0, 0));
        assert_true(job_coll(&j, tree, BRAID_COLL_ALLREDUCE, 3 * ELEMS * n, 0, 0));
        expect_ok(&j);
        if (n == 2)
            expect_fail(&j, 2, &order_colls_rr, 0, "message 0 from rank 1 to rank 0: 4096 "
                        "bytes of AllReduce seq 1 where rank 0's call 2 (AllReduce seq 2)");
        job_no_headers(&j);
        if (n == 4)
            expect_fail(&j, 2, &order_colls_rr, 1, "deadlock: no rank can go; stuck: [rank 0 "
                        "call 4 (AllReduce, op 1 of 2) step 0/4 slice [8192, +4096): waits "
                        "for a message from 2]");
    }
    rr_survey(&order_colls_rr);
    rr_survey(&order_colls_rr_iter);
}

/* Bad jobs, on the engine's order: a receive of other than what was sent, a message that
 * no one receives, a receive that no one sends, messages of other calls; and an order that
 * leaves out a slice-step. */
static void test_bad_jobs(void **state)
{
    (void)state;
    job_t j;
    job_init(&j, 2, NULL);
    job_p2p(&j, 0, 1, 1, 3 * ELEMS);
    job_p2p(&j, 1, 0, 0, 3 * ELEMS - 1);
    j.calls[1].expect.count = 3 * ELEMS;
    expect_fail(&j, 2, NULL, 0, "expects 4092 bytes");
    job_init(&j, 3, NULL);
    job_p2p(&j, 0, 2, 1, ELEMS);
    expect_fail(&j, 2, NULL, 0, "fifo 0->2 left with 1 unreceived");
    job_init(&j, 3, NULL);
    job_p2p(&j, 2, 1, 0, ELEMS);
    expect_fail(&j, 2, NULL, 1, "rank 2 call 0 (Recv, op 0 of 1) step 0/1 slice [0, +4096): "
                "waits for a message from 1");
    job_init(&j, 2, NULL);          /* both receive first, from each other */
    job_coll(&j, braid_algos[0], BRAID_COLL_ALLREDUCE, 8 * ELEMS, 0, 0);
    j.calls[1].expect.seq = 7;
    expect_fail(&j, 2, NULL, 0, "AllReduce seq 1 where rank 1's call 1 (AllReduce seq 7)");
    job_init(&j, 3, NULL);
    job_coll(&j, &braid_algo_ring, BRAID_COLL_REDUCESCATTER, 5 * ELEMS, 0, 1);
    expect_ok(&j);
    expect_fail(&j, 3, &order_drop_last, 0, "order drop-last gave rank 0's op 0 (call 0) 14 "
                "slice-steps of 15");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_calls),
        cmocka_unit_test(test_two_colls),
        cmocka_unit_test(test_p2p),
        cmocka_unit_test(test_bad_sends_first),
        cmocka_unit_test(test_coll_p2p),
        cmocka_unit_test(test_bad_sends_whole),
        cmocka_unit_test(test_bad_colls_rr),
        cmocka_unit_test(test_bad_jobs),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    printf("test_sim_serial: %d runs passed, %d single cases declined\n", cases_run,
           cases_declined);
    return rc;
}
