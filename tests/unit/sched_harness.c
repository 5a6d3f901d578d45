/*
 * The harness of the schedule tests (test_sched.c, test_sched_faults.c): test cases, their
 * buffers and inputs, the calls handed to the simulator of algorithms/sim.c, and the references the
 * results are compared with (see sched_harness.h).
 *
 * Inputs are chosen so that the exact result is representable and every partial result on
 * the way is too (small integers, powers of two, at most as many non-zero values per element
 * as the datatype counts exactly), so the comparison is bit for bit whatever the order of
 * reduction. Random floats are used only to check that all ranks of an all-reduce agree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algorithms/model.h"
#include "tests/unit/sched_harness.h"
#include "topo/topo.h"

static const char *const op_names[OP_NUM] = { "sum", "prod", "max", "min", "avg", "premulsum" };

const braid_sim_cfg_t sh_cfg_tight = { .nslots = 2, .slot_size = 24 };
const braid_sim_cfg_t sh_cfg_odd = { .nslots = 2, .slot_size = 40 };
const braid_sim_cfg_t sh_cfg_wide = { .nslots = 3, .slot_size = 512, .exec_run = 1 };

int sh_cases_run, sh_cases_declined;

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t sh_hash3(uint64_t a, uint64_t b, uint64_t c)
{
    return mix((a << 48) ^ (c << 40) ^ b);
}

static int is_signed(braid_dtype_t dt)
{
    return dt != BRAID_UINT8 && dt != BRAID_UINT32 && dt != BRAID_UINT64;
}

/* Largest B with every integer in [-B, B] exact in dt (capped: enough for these tests). */
static int64_t exact_bound(braid_dtype_t dt)
{
    switch (dt) {
    case BRAID_INT8: return 127;
    case BRAID_UINT8: return 255;
    case BRAID_FP16: return 2048;
    case BRAID_BF16: return 256;
    case BRAID_FP8_E4M3: return 16;
    case BRAID_FP8_E5M2: return 8;
    default: return 1000;
    }
}

static int pow2(int n)
{
    return (n & (n - 1)) == 0;
}

int sh_avg_exact(braid_dtype_t dt, int n)
{
    return !braid_dtype_is_float(dt) || pow2(n);
}

static double premul_factor(braid_dtype_t dt)
{
    return braid_dtype_is_float(dt) ? 2.0 : 3.0;
}

/* Rank r's ncclPreMulSum scalar: the same on every rank, or rank + 1 (ranks may differ). */
static double premul_of(const tcase_t *tc, int r)
{
    return tc->premul_per_rank ? (double)(r + 1) : premul_factor(tc->dt);
}

/*
 * The value rank r contributes at element i. Sums: |values| of one element add up to at
 * most the exact bound (after the pre-multiplier), so every partial sum is exact. Products:
 * +-1 and 2, with at most log2(bound) twos per element. Max/min: anything in range.
 */
static double gen_value(const tcase_t *tc, int r, size_t i)
{
    int64_t b = exact_bound(tc->dt), n = tc->n;
    uint64_t h = sh_hash3((uint64_t)r, i, (uint64_t)tc->op * 31 + (uint64_t)tc->dt);
    double sign = is_signed(tc->dt) && (h >> 40) & 1 ? -1.0 : 1.0;
    if (tc->op == OP_PROD) {
        int64_t twos = 0;
        while ((int64_t)2 << twos <= b)
            twos++;
        return sign * (((int64_t)((size_t)r * 3 + i) % n) < twos ? 2.0 : 1.0);
    }
    if (tc->op == OP_MAX || tc->op == OP_MIN)
        return is_signed(tc->dt) ? (double)((int64_t)(h % (uint64_t)(2 * b + 1)) - b)
                                 : (double)(h % (uint64_t)(b + 1));
    if (tc->op == OP_PREMULSUM)
        b = (int64_t)((double)b / (tc->premul_per_rank ? (double)n : premul_factor(tc->dt)));
    int64_t m = b / n;
    if (m >= 1)
        return sign * (double)(h % (uint64_t)(m + 1));
    return sign * (((int64_t)((size_t)r + i) % n) < b ? 1.0 : 0.0);
}

static void val_store(braid_dtype_t dt, void *p, double v)
{
    union { int8_t i8; uint8_t u8; int32_t i32; uint32_t u32; int64_t i64; uint64_t u64;
            uint16_t h; float f; double d; } u;
    switch (dt) {
    case BRAID_INT8: u.i8 = (int8_t)v; break;
    case BRAID_UINT8: u.u8 = (uint8_t)v; break;
    case BRAID_INT32: u.i32 = (int32_t)v; break;
    case BRAID_UINT32: u.u32 = (uint32_t)v; break;
    case BRAID_INT64: u.i64 = (int64_t)v; break;
    case BRAID_UINT64: u.u64 = (uint64_t)v; break;
    case BRAID_FP16: u.h = braid_float_to_fp16((float)v); break;
    case BRAID_BF16: u.h = braid_float_to_bf16((float)v); break;
    case BRAID_FP8_E4M3: u.u8 = braid_float_to_e4m3((float)v); break;
    case BRAID_FP8_E5M2: u.u8 = braid_float_to_e5m2((float)v); break;
    case BRAID_FP32: u.f = (float)v; break;
    default: u.d = v; break;
    }
    memcpy(p, &u, braid_dtype_size(dt));
}

static double val_load(braid_dtype_t dt, const void *p)
{
    braid_scalar_t s = braid_scalar_load(dt, p);
    if (braid_dtype_is_float(dt))
        return s.f;
    return is_signed(dt) ? (double)s.i : (double)s.u;
}

/* The reference reduction of element i over all ranks' inputs. */
static double ref_reduce(const tcase_t *tc, rbuf_t *rb, size_t i)
{
    size_t es = braid_dtype_size(tc->dt);
    double acc = 0;
    for (int r = 0; r < tc->n; r++) {
        double v = val_load(tc->dt, rb[r].in + i * es);
        if (tc->op == OP_PREMULSUM)
            v *= premul_of(tc, r);
        if (tc->op == OP_AVG && braid_dtype_is_float(tc->dt))
            v /= tc->n;
        if (r == 0)
            acc = v;
        else if (tc->op == OP_PROD)
            acc *= v;
        else if (tc->op == OP_MAX)
            acc = v > acc ? v : acc;
        else if (tc->op == OP_MIN)
            acc = v < acc ? v : acc;
        else
            acc += v;
    }
    if (tc->op == OP_AVG && !braid_dtype_is_float(tc->dt))
        acc = (double)((int64_t)acc / (int64_t)tc->n);     /* truncates toward zero */
    return acc;
}

static int is_reduction(braid_coll_kind_t k)
{
    return k == BRAID_COLL_ALLREDUCE || k == BRAID_COLL_REDUCE || k == BRAID_COLL_REDUCESCATTER;
}

int sh_is_rooted(braid_coll_kind_t k)
{
    return k == BRAID_COLL_BROADCAST || k == BRAID_COLL_REDUCE || k == BRAID_COLL_GATHER ||
           k == BRAID_COLL_SCATTER;
}

/* Elements of rank r's input and output, and how they alias in place. */
static void tc_layout(const tcase_t *tc, int r, size_t *in_p, size_t *out_p, int *alias_p,
                      size_t *off_p)
{
    size_t c = tc->count, nc = (size_t)tc->n * c;
    int root = r == tc->root, ip = tc->in_place;
    int s_in_r = ip ? ALIAS_SEND_IN_RECV : ALIAS_NONE;
    int r_in_s = ip ? ALIAS_RECV_IN_SEND : ALIAS_NONE;
    *off_p = 0;
    *alias_p = s_in_r;
    switch (tc->kind) {
    case BRAID_COLL_ALLREDUCE: *in_p = c; *out_p = c; break;
    case BRAID_COLL_BROADCAST: *in_p = root ? c : 0; *out_p = c; break;
    case BRAID_COLL_REDUCE:
        *in_p = c; *out_p = root ? c : 0; *alias_p = root ? s_in_r : ALIAS_NONE; break;
    case BRAID_COLL_ALLGATHER: *in_p = c; *out_p = nc; *off_p = (size_t)r * c; break;
    case BRAID_COLL_REDUCESCATTER:
        *in_p = nc; *out_p = c; *alias_p = r_in_s; *off_p = (size_t)r * c; break;
    case BRAID_COLL_ALLTOALL: *in_p = nc; *out_p = nc; break;
    case BRAID_COLL_GATHER:
        *in_p = c; *out_p = root ? nc : 0; *alias_p = root ? s_in_r : ALIAS_NONE;
        *off_p = (size_t)tc->root * c; break;
    default: /* scatter */
        *in_p = root ? nc : 0; *out_p = c; *alias_p = root ? r_in_s : ALIAS_NONE;
        *off_p = (size_t)tc->root * c; break;
    }
}

/* NCCL lets these buffers be NULL: reduce/gather recvbuff and broadcast/scatter sendbuff
 * off the root. Pass NULL so that any use of them crashes the test. */
static unsigned char *alloc_or_null(size_t bytes, int may_be_null)
{
    if (bytes == 0 && may_be_null)
        return NULL;
    return malloc(bytes ? bytes : 1);
}

void sh_fill_input(const tcase_t *tc, int r, unsigned char *p, size_t elems)
{
    size_t es = braid_dtype_size(tc->dt);
    for (size_t i = 0; i < elems; i++) {
        if (tc->random) {
            double v = (double)(sh_hash3((uint64_t)r, i, 7) % 4001) / 1000.0 - 2.0;
            val_store(tc->dt, p + i * es, v);
        } else if (is_reduction(tc->kind)) {
            val_store(tc->dt, p + i * es, gen_value(tc, r, i));
        } else {
            uint64_t h = sh_hash3((uint64_t)r, i, 99);
            memcpy(p + i * es, &h, es);
        }
    }
}

void sh_rbuf_setup(const tcase_t *tc, int r, rbuf_t *rb)
{
    size_t in, out, off, es = braid_dtype_size(tc->dt);
    memset(rb, 0, sizeof(*rb));
    tc_layout(tc, r, &in, &out, &rb->alias, &off);
    rb->send_bytes = in * es;
    rb->recv_bytes = out * es;
    int send_opt = tc->kind == BRAID_COLL_BROADCAST || tc->kind == BRAID_COLL_SCATTER;
    int recv_opt = tc->kind == BRAID_COLL_REDUCE || tc->kind == BRAID_COLL_GATHER;
    if (rb->alias == ALIAS_SEND_IN_RECV) {
        rb->recv = rb->recv_alloc = malloc(rb->recv_bytes ? rb->recv_bytes : 1);
        rb->send = rb->recv + off * es;
    } else if (rb->alias == ALIAS_RECV_IN_SEND) {
        rb->send = rb->send_alloc = malloc(rb->send_bytes ? rb->send_bytes : 1);
        rb->recv = rb->send + off * es;
    } else {
        rb->send = rb->send_alloc = alloc_or_null(rb->send_bytes, send_opt);
        rb->recv = rb->recv_alloc = alloc_or_null(rb->recv_bytes, recv_opt);
    }
    if (rb->recv != NULL)
        memset(rb->recv, SENTINEL, rb->recv_bytes);
    rb->in = malloc(rb->send_bytes ? rb->send_bytes : 1);
    sh_fill_input(tc, r, rb->in, in);
    if (rb->send_bytes)
        memcpy(rb->send, rb->in, rb->send_bytes);
}

void sh_rbuf_free(rbuf_t *rb)
{
    free(rb->send_alloc);
    free(rb->recv_alloc);
    free(rb->in);
    if (rb->forced != NULL)
        braid_sched_free(rb->forced);
    free(rb->forced);
}

void sh_tc_describe(const tcase_t *tc, char *buf, size_t len)
{
    int o = snprintf(buf, len, "%s%s", tc->algo ? tc->algo->name : "tuner", tc->topo ? ", hosts" : "");
    for (int h = 0; tc->topo != NULL && h < tc->topo->nhosts && o < (int)len; h++)
        o += snprintf(buf + o, len - (size_t)o, "%c%d", h ? '+' : ' ',
                      braid_topo_nlocal(tc->topo, h));
    if (o >= (int)len)
        return;
    buf += o;
    len -= (size_t)o;
    snprintf(buf, len, ": %s %s %s n=%d count=%zu root=%d %s K=%d S=%zu%s%s%s%s",
             braid_coll_name(tc->kind), braid_dtype_name(tc->dt),
             is_reduction(tc->kind) ? op_names[tc->op] : "-", tc->n, tc->count, tc->root,
             tc->in_place ? "in-place" : "out-of-place", tc->cfg.nslots, tc->cfg.slot_size,
             tc->random ? " random" : "", tc->pull ? " pulls" : "",
             tc->cfg.cma ? " (process_vm_readv)" : "", tc->premul_per_rank ? " premul/rank" : "");
}

/* How the API layer lowers the op (ncclAvg, ncclPreMulSum), mirrored. */
static void tc_redop(const tcase_t *tc, int r, braid_redop_spec_t *rs)
{
    memset(rs, 0, sizeof(*rs));
    rs->kind = tc->op <= OP_MIN ? (braid_opkind_t)tc->op : BRAID_OP_SUM;
    if (tc->op == OP_PREMULSUM) {
        rs->premul = 1;
        if (braid_dtype_is_float(tc->dt))
            rs->scalar.f = premul_of(tc, r);
        else
            rs->scalar.i = (int64_t)premul_of(tc, r);
    } else if (tc->op == OP_AVG && braid_dtype_is_float(tc->dt)) {
        rs->premul = 1;
        rs->scalar.f = 1.0 / tc->n;
    } else if (tc->op == OP_AVG) {
        rs->postdiv = (uint64_t)tc->n;
    }
}

void sh_tc_call(const tcase_t *tc, int r, rbuf_t *rb, braid_sim_call_t *c)
{
    memset(c, 0, sizeof(*c));
    c->rank = r;
    c->coll.kind = tc->kind;
    c->coll.dtype = tc->dt;
    c->coll.rank = r;
    c->coll.nranks = tc->n;
    c->coll.root = sh_is_rooted(tc->kind) ? tc->root : -1;
    c->coll.count = tc->count;
    c->coll.in_place = rb->alias != ALIAS_NONE;
    c->coll.pull = tc->pull;
    c->coll.topo = tc->topo;
    c->sendbuf = rb->send;
    c->recvbuf = rb->recv;
    c->send_bytes = rb->send ? rb->send_bytes : 0;
    c->recv_bytes = rb->recv ? rb->recv_bytes : 0;
    if (is_reduction(tc->kind))
        tc_redop(tc, r, &c->redop);
    c->hdr.seq = 1;
    c->hdr.count = tc->count;
    c->hdr.kind = (uint8_t)tc->kind;
    c->hdr.dtype = (uint8_t)tc->dt;
    c->hdr.op = is_reduction(tc->kind) ? (uint8_t)tc->op : 255;
    c->hdr.root = c->coll.root;
    c->expect = c->hdr;
    if (tc->algo != NULL) {
        rb->forced = malloc(sizeof(*rb->forced));
        assert_non_null(rb->forced);
        braid_sched_init(rb->forced, braid_dtype_size(tc->dt));
        assert_int_equal(tc->algo->build(&c->coll, rb->forced), BRAID_OK);
        c->sched = rb->forced;
    }
}

/*
 * Does the forced algorithm decline this case? Only as algorithms decline (sched.h): the
 * builder says BRAID_ERR_UNSUPPORTED and the cost function BRAID_COST_NONE, for the call as
 * rank 0 makes it (the other ranks' builds must then succeed: sh_tc_call). A builder that
 * fails otherwise, or declines what its cost function takes, fails the case.
 */
static int tc_declined(const tcase_t *tc, const char *desc)
{
    braid_sched_t s;
    size_t in, out, off;
    int alias;
    if (tc->algo == NULL)
        return 0;
    tc_layout(tc, 0, &in, &out, &alias, &off);
    braid_coll_t c = { .kind = tc->kind, .dtype = tc->dt, .rank = 0, .nranks = tc->n,
                       .root = sh_is_rooted(tc->kind) ? tc->root : -1, .count = tc->count,
                       .in_place = alias != ALIAS_NONE, .pull = tc->pull, .topo = tc->topo };
    braid_sched_init(&s, braid_dtype_size(tc->dt));
    braid_status_t st = tc->algo->build(&c, &s);
    braid_sched_free(&s);
    if (st == BRAID_OK)
        return 0;
    if (st != BRAID_ERR_UNSUPPORTED)
        fail_msg("%s: the builder of %s failed with status %d, not a decline (last error: %s)",
                 desc, tc->algo->name, (int)st, braid_err_last());
    double cost = tc->algo->cost(&c, &braid_model_default);
    if (cost >= 0)
        fail_msg("%s: the builder of %s declines the call, but its cost function takes it "
                 "(%g us): they must decline alike", desc, tc->algo->name, cost);
    return 1;
}

/* Bytes a reference may span: in rank rb's buffers (a pull names the peer's). */
static size_t ref_limit(braid_ref_t ref, const rbuf_t *rb, const braid_sched_t *s, int n)
{
    switch (ref.buf) {
    case BRAID_BUF_SEND: return rb->send ? rb->send_bytes : 0;
    case BRAID_BUF_RECV: return rb->recv ? rb->recv_bytes : 0;
    case BRAID_BUF_HELLO: return (size_t)n * BRAID_HELLO_BYTES;
    default: return s->scratch_bytes;
    }
}

/* Every region a schedule names lies inside the buffer the call passed (a pulled region
 * inside the peer's), every peer exists. `rb` is every rank's. */
static void check_refs(const char *desc, const braid_sim_call_t *c, const rbuf_t *rb)
{
    braid_sched_t built;
    const braid_sched_t *s = c->sched;          /* the forced algorithm's, or the tuner's */
    const rbuf_t *mine = &rb[c->rank];
    int n = c->coll.nranks;
    if (s == NULL) {
        assert_int_equal(braid_algo_build(&c->coll, &built, NULL), BRAID_OK);
        s = &built;
    }
    for (int i = 0; i < s->nsteps; i++) {
        const braid_step_t *st = &s->steps[i];
        const braid_ref_t refs[3] = { st->src, st->dst, st->pull };
        if (st->send_peer >= n || st->recv_peer >= n || st->pull_peer >= n ||
            (st->pull_peer >= 0 && (st->send_peer >= 0 || st->recv_peer >= 0)))
            fail_msg("%s: rank %d step %d names peers %d/%d/%d", desc, c->rank, i,
                     (int)st->send_peer, (int)st->recv_peer, (int)st->pull_peer);
        for (int k = 0; k < 3; k++) {
            const rbuf_t *owner = k == 2 ? &rb[st->pull_peer >= 0 ? st->pull_peer : 0] : mine;
            size_t lim = ref_limit(refs[k], owner, s, n);
            if (refs[k].buf != BRAID_BUF_NONE && refs[k].off + st->bytes > lim)
                fail_msg("%s: rank %d step %d: buffer %d [%zu, +%zu) outside its %zu bytes",
                         desc, c->rank, i, refs[k].buf, refs[k].off, st->bytes, lim);
        }
    }
    if (s == &built)
        braid_sched_free(&built);
}

/* What rank r's output must hold (data movement), into `want`. */
static void ref_move(const tcase_t *tc, rbuf_t *rb, int r, unsigned char *want)
{
    size_t b = tc->count * braid_dtype_size(tc->dt);
    if (tc->kind == BRAID_COLL_BROADCAST)
        memcpy(want, rb[tc->root].in, b);
    else if (tc->kind == BRAID_COLL_SCATTER)
        memcpy(want, rb[tc->root].in + (size_t)r * b, b);
    else if (tc->kind == BRAID_COLL_ALLTOALL)
        for (int p = 0; p < tc->n; p++)
            memcpy(want + (size_t)p * b, rb[p].in + (size_t)r * b, b);
    else                                                        /* (all)gather */
        for (int p = 0; p < tc->n; p++)
            memcpy(want + (size_t)p * b, rb[p].in, b);
}

/* The reduced vector, all elements (reduce-scatter: every rank's block), into `want`. */
static unsigned char *ref_reduced(const tcase_t *tc, rbuf_t *rb)
{
    size_t es = braid_dtype_size(tc->dt), elems = rb[0].send_bytes / es;
    unsigned char *want = malloc(elems * es + 1);
    for (size_t i = 0; i < elems; i++)
        val_store(tc->dt, want + i * es, ref_reduce(tc, rb, i));
    return want;
}

static void check_output(const tcase_t *tc, const char *desc, rbuf_t *rb, int r,
                         const unsigned char *reduced)
{
    size_t es = braid_dtype_size(tc->dt), bytes = rb[r].recv_bytes;
    unsigned char *moved = NULL;
    const unsigned char *want = reduced;
    int approx = tc->op == OP_AVG && !sh_avg_exact(tc->dt, tc->n);
    if (reduced == NULL) {
        want = moved = malloc(bytes + 1);
        ref_move(tc, rb, r, moved);
    } else if (tc->kind == BRAID_COLL_REDUCESCATTER) {
        want += (size_t)r * bytes;
    }
    for (size_t i = 0; i < bytes / es; i++) {
        const unsigned char *got = rb[r].recv + i * es;
        if (approx) {
            double g = val_load(tc->dt, got), w = val_load(tc->dt, want + i * es);
            double tol = (tc->dt == BRAID_FP64 ? 1e-12 : 1e-5) * (w < 0 ? 1 - w : 1 + w);
            if (g - w > tol || w - g > tol)
                fail_msg("%s: rank %d element %zu is %.17g, want %.17g", desc, r, i, g, w);
        } else if (memcmp(got, want + i * es, es) != 0) {
            fail_msg("%s: rank %d element %zu is %g, want %g", desc, r, i,
                     val_load(tc->dt, got), val_load(tc->dt, want + i * es));
        }
    }
    free(moved);
}

/* Every rank's output is bit-identical to rank 0's (random inputs). */
static void check_agree(const char *desc, rbuf_t *rb, int n)
{
    for (int r = 1; r < n; r++)
        if (memcmp(rb[r].recv, rb[0].recv, rb[0].recv_bytes) != 0)
            fail_msg("%s: rank %d's result differs from rank 0's", desc, r);
}

void sh_run_case(const tcase_t *tc)
{
    rbuf_t rb[SH_MAXR];
    braid_sim_call_t calls[SH_MAXR];
    braid_sim_result_t res;
    char desc[256];

    sh_tc_describe(tc, desc, sizeof(desc));
    if (tc_declined(tc, desc)) {
        sh_cases_declined++;
        return;
    }
    sh_cases_run++;
    for (int r = 0; r < tc->n; r++) {
        sh_rbuf_setup(tc, r, &rb[r]);
        sh_tc_call(tc, r, &rb[r], &calls[r]);
    }
    for (int r = 0; r < tc->n; r++)
        check_refs(desc, &calls[r], rb);
    if (braid_sim_run(&tc->cfg, tc->n, calls, tc->n, &res) != 0)
        fail_msg("%s: %s", desc, res.msg);
    if (tc->random) {
        check_agree(desc, rb, tc->n);
    } else {
        unsigned char *reduced = is_reduction(tc->kind) ? ref_reduced(tc, rb) : NULL;
        for (int r = 0; r < tc->n; r++)
            if (rb[r].recv != NULL)
                check_output(tc, desc, rb, r, reduced);
        free(reduced);
    }
    for (int r = 0; r < tc->n; r++)
        sh_rbuf_free(&rb[r]);
}

void sh_expect_cases(int before, const char *what)
{
    if (sh_cases_run == before)
        fail_msg("%s: no case ran (%d declined by their forced algorithm)", what,
                 sh_cases_declined);
}

int sh_report(const char *prog, int rc)
{
    printf("%s: %d cases run, %d declined by their forced algorithm\n", prog, sh_cases_run,
           sh_cases_declined);
    if (sh_cases_run == 0) {
        printf("FAIL %s: no case ran\n", prog);
        return 1;
    }
    return rc;
}
