/*
 * Schedules, simulated: every algorithm on 1 to 17 ranks, run by the real executor over the
 * in-memory transport of sim.c, compared with a reference computed here.
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

#include "tests/unit/sim.h"

/* ncclRedOp_t numbering for the first five; PREMULSUM stands for a ncclRedOpCreatePreMulSum
 * handle. */
enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG, OP_PREMULSUM, OP_NUM };
static const char *const op_names[OP_NUM] = { "sum", "prod", "max", "min", "avg", "premulsum" };

enum { ALIAS_NONE, ALIAS_SEND_IN_RECV, ALIAS_RECV_IN_SEND };

#define MAXR 17
#define SENTINEL 0x5c

/* Many slices, FIFOs full all the time; then slices that straddle chunk ends elsewhere. */
static const sim_cfg_t cfg_tight = { .nslots = 2, .slot_size = 24 };
static const sim_cfg_t cfg_odd = { .nslots = 2, .slot_size = 40 };
/* Through braid_exec_run: only after the same call passed the checking loop (a deadlock
 * there would hang instead of failing). */
static const sim_cfg_t cfg_wide = { .nslots = 3, .slot_size = 512, .exec_run = 1 };

typedef struct tcase {
    braid_coll_kind_t kind;
    braid_dtype_t dt;
    int op;
    int n, root, in_place;
    size_t count;
    sim_cfg_t cfg;
    int random;             /* random floats: check that all ranks agree, not the values */
    const braid_algo_t *algo;   /* force this algorithm (NULL: the selector's choice) */
    braid_pull_t pull;      /* how the communicator may pull (from any size) */
    int premul_per_rank;    /* ncclPreMulSum with scalar rank + 1 on each rank */
} tcase_t;

typedef struct rbuf {
    unsigned char *send_alloc, *recv_alloc;
    unsigned char *send, *recv;     /* as the call passes them (NULL allowed) */
    size_t send_bytes, recv_bytes;
    unsigned char *in;              /* copy of the input, kept for the reference */
    int alias;
    braid_sched_t *forced;          /* the forced algorithm's schedule, if any */
} rbuf_t;

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t hash3(uint64_t a, uint64_t b, uint64_t c)
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

static int avg_exact(braid_dtype_t dt, int n)
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
    uint64_t h = hash3((uint64_t)r, i, (uint64_t)tc->op * 31 + (uint64_t)tc->dt);
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

static int is_rooted(braid_coll_kind_t k)
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

static void fill_input(const tcase_t *tc, int r, unsigned char *p, size_t elems)
{
    size_t es = braid_dtype_size(tc->dt);
    for (size_t i = 0; i < elems; i++) {
        if (tc->random) {
            double v = (double)(hash3((uint64_t)r, i, 7) % 4001) / 1000.0 - 2.0;
            val_store(tc->dt, p + i * es, v);
        } else if (is_reduction(tc->kind)) {
            val_store(tc->dt, p + i * es, gen_value(tc, r, i));
        } else {
            uint64_t h = hash3((uint64_t)r, i, 99);
            memcpy(p + i * es, &h, es);
        }
    }
}

static void rbuf_setup(const tcase_t *tc, int r, rbuf_t *rb)
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
    fill_input(tc, r, rb->in, in);
    if (rb->send_bytes)
        memcpy(rb->send, rb->in, rb->send_bytes);
}

static void rbuf_free(rbuf_t *rb)
{
    free(rb->send_alloc);
    free(rb->recv_alloc);
    free(rb->in);
    if (rb->forced != NULL)
        braid_sched_free(rb->forced);
    free(rb->forced);
}

static void tc_describe(const tcase_t *tc, char *buf, size_t len)
{
    snprintf(buf, len, "%s %s %s n=%d count=%zu root=%d %s K=%d S=%zu%s%s%s%s",
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

static void tc_call(const tcase_t *tc, int r, rbuf_t *rb, sim_call_t *c)
{
    memset(c, 0, sizeof(*c));
    c->rank = r;
    c->coll.kind = tc->kind;
    c->coll.dtype = tc->dt;
    c->coll.rank = r;
    c->coll.nranks = tc->n;
    c->coll.root = is_rooted(tc->kind) ? tc->root : -1;
    c->coll.count = tc->count;
    c->coll.in_place = rb->alias != ALIAS_NONE;
    c->coll.pull = tc->pull;
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

/* Does the forced algorithm take this case? (It may decline, e.g. one-shot above its size.) */
static int tc_taken(const tcase_t *tc)
{
    braid_sched_t s;
    braid_coll_t c = { .kind = tc->kind, .dtype = tc->dt, .rank = 0, .nranks = tc->n,
                       .root = tc->root, .count = tc->count, .pull = tc->pull };
    if (tc->algo == NULL)
        return 1;
    braid_sched_init(&s, braid_dtype_size(tc->dt));
    braid_status_t st = tc->algo->build(&c, &s);
    braid_sched_free(&s);
    return st == BRAID_OK;
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
static void check_refs(const char *desc, const sim_call_t *c, const rbuf_t *rb)
{
    braid_sched_t s;
    const rbuf_t *mine = &rb[c->rank];
    int n = c->coll.nranks;
    assert_int_equal(braid_algo_build(&c->coll, &s, NULL), BRAID_OK);
    for (int i = 0; i < s.nsteps; i++) {
        const braid_step_t *st = &s.steps[i];
        const braid_ref_t refs[3] = { st->src, st->dst, st->pull };
        if (st->send_peer >= n || st->recv_peer >= n || st->pull_peer >= n ||
            (st->pull_peer >= 0 && (st->send_peer >= 0 || st->recv_peer >= 0)))
            fail_msg("%s: rank %d step %d names peers %d/%d/%d", desc, c->rank, i,
                     (int)st->send_peer, (int)st->recv_peer, (int)st->pull_peer);
        for (int k = 0; k < 3; k++) {
            const rbuf_t *owner = k == 2 ? &rb[st->pull_peer >= 0 ? st->pull_peer : 0] : mine;
            size_t lim = ref_limit(refs[k], owner, &s, n);
            if (refs[k].buf != BRAID_BUF_NONE && refs[k].off + st->bytes > lim)
                fail_msg("%s: rank %d step %d: buffer %d [%zu, +%zu) outside its %zu bytes",
                         desc, c->rank, i, refs[k].buf, refs[k].off, st->bytes, lim);
        }
    }
    braid_sched_free(&s);
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
    int approx = tc->op == OP_AVG && !avg_exact(tc->dt, tc->n);
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

static void run_case(const tcase_t *tc)
{
    rbuf_t rb[MAXR];
    sim_call_t calls[MAXR];
    sim_result_t res;
    char desc[160];

    if (!tc_taken(tc))
        return;
    tc_describe(tc, desc, sizeof(desc));
    for (int r = 0; r < tc->n; r++) {
        rbuf_setup(tc, r, &rb[r]);
        tc_call(tc, r, &rb[r], &calls[r]);
    }
    for (int r = 0; r < tc->n; r++)
        check_refs(desc, &calls[r], rb);
    if (sim_run(&tc->cfg, tc->n, calls, tc->n, &res) != 0)
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
        rbuf_free(&rb[r]);
}

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
                for (int root = 0; root < (is_rooted(kind) ? n : 1); root++) {
                    tcase_t tc = { .kind = kind, .dt = dt, .op = OP_SUM, .n = n, .root = root,
                                   .in_place = ip, .count = counts[ci], .cfg = cfg_tight,
                                   .algo = algo };
                    tc_pulls(&tc, pulls);
                    run_case(&tc);
                }
        for (int ip = 0; ip < 2; ip++) {
            tcase_t tc = { .kind = kind, .dt = dt, .op = OP_SUM, .n = n, .root = n - 1,
                           .in_place = ip, .count = big_count(kind, n),
                           .cfg = ip ? cfg_odd : cfg_wide, .algo = algo };
            tc_pulls(&tc, pulls);
            run_case(&tc);
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
    (void)state;
    shapes_algo(BRAID_COLL_ALLREDUCE, BRAID_INT32, &braid_algo_ring);
    shapes_algo(BRAID_COLL_ALLREDUCE, BRAID_FP16, &braid_algo_oneshot);
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
                if (op == OP_AVG && !avg_exact((braid_dtype_t)dt, n) && dt != BRAID_FP32 &&
                    dt != BRAID_FP64)
                    continue;   /* 1/n is inexact there: no exact reference */
                for (int ci = 0; ci < 3; ci++)
                    for (int ip = 0; ip < 2; ip++) {
                        tcase_t tc = { .kind = kind, .dt = (braid_dtype_t)dt, .op = op, .n = n,
                                       .root = (dt + op + ci) % n, .in_place = ip,
                                       .count = counts[ci],
                                       .cfg = ci & 1 ? cfg_odd : cfg_tight };
                        tc_pulls(&tc, pulls);
                        run_case(&tc);
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
                                       .cfg = ip ? cfg_odd : cfg_tight };
                        run_case(&tc);
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
                               .in_place = (op + ni) & 1, .count = 1009, .cfg = cfg_tight,
                               .random = 1 };
                run_case(&tc);
            }
}

/* ---- two-shot: pulls from the other ranks' buffers ---- */

extern const braid_algo_t braid_algo_twoshot;

/* Every shape of the three two-shot collectives, peers read in place. */
static void test_twoshot_shapes(void **state)
{
    (void)state;
    shapes_pulls(BRAID_COLL_ALLREDUCE, BRAID_INT32, &braid_algo_twoshot, PULL_LOAD);
    shapes_pulls(BRAID_COLL_ALLGATHER, BRAID_INT32, &braid_algo_twoshot, PULL_LOAD);
    shapes_pulls(BRAID_COLL_REDUCESCATTER, BRAID_INT32, &braid_algo_twoshot, PULL_LOAD);
}

/* The same through process_vm_readv, and with other element sizes. */
static void test_twoshot_cma(void **state)
{
    (void)state;
    shapes_pulls(BRAID_COLL_ALLREDUCE, BRAID_FP64, &braid_algo_twoshot, PULL_CMA);
    shapes_pulls(BRAID_COLL_ALLGATHER, BRAID_UINT8, &braid_algo_twoshot, PULL_CMA);
    shapes_pulls(BRAID_COLL_REDUCESCATTER, BRAID_BF16, &braid_algo_twoshot, PULL_CMA);
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
    (void)state;
    for (int d = 0; d < 4; d++)
        for (int op = 0; op < OP_NUM; op++)
            for (int ni = 0; ni < 4; ni++) {
                tcase_t tc = { .kind = BRAID_COLL_ALLREDUCE, .dt = dts[d], .op = op,
                               .n = ns[ni], .in_place = (op + ni) & 1, .count = 1009,
                               .cfg = cfg_tight, .random = 1, .algo = &braid_algo_twoshot };
                tc_pulls(&tc, ni & 1 ? PULL_CMA : PULL_LOAD);
                run_case(&tc);
            }
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
                                   .cfg = cfg_odd, .premul_per_rank = 1 };
                    tc_pulls(&tc, pulls);
                    run_case(&tc);
                }
}

/* With pulls allowed, the three collectives take two-shot from the agreed size on. */
static void test_twoshot_select(void **state)
{
    static const braid_coll_kind_t kinds[] = { BRAID_COLL_ALLREDUCE, BRAID_COLL_ALLGATHER,
                                               BRAID_COLL_REDUCESCATTER };
    const braid_algo_t *algo;
    braid_sched_t s;
    (void)state;
    for (int k = 0; k < 3; k++) {
        braid_coll_t c = { .kind = kinds[k], .dtype = BRAID_FP32, .rank = 1, .nranks = 4,
                           .count = 1 << 20, .pull = BRAID_PULL_CMA,
                           .pull_min = 4 << 20 };
        size_t bytes = c.count * 4 * (kinds[k] == BRAID_COLL_ALLREDUCE ? 1 : 4);
        assert_int_equal(braid_algo_build(&c, &s, &algo), BRAID_OK);
        assert_string_equal(algo->name, bytes >= c.pull_min ? "twoshot" : "ring");
        braid_sched_free(&s);
        c.pull_min = bytes + 1;
        assert_int_equal(braid_algo_build(&c, &s, &algo), BRAID_OK);
        assert_string_equal(algo->name, "ring");
        braid_sched_free(&s);
        c.pull = BRAID_PULL_LOAD;
        assert_int_equal(braid_algo_build(&c, &s, &algo), BRAID_OK);
        assert_string_equal(algo->name, "ring");
        braid_sched_free(&s);
        c.pull_min = 0;
        assert_int_equal(braid_algo_build(&c, &s, &algo), BRAID_OK);
        assert_string_equal(algo->name, "twoshot");
        braid_sched_free(&s);
        c.pull = BRAID_PULL_NONE;                           /* not agreed: never */
        assert_int_equal(braid_algo_build(&c, &s, &algo), BRAID_OK);
        assert_string_equal(algo->name, "ring");
        braid_sched_free(&s);
        c.pull = BRAID_PULL_LOAD;
        c.nranks = 1;
        c.rank = 0;
        assert_int_equal(braid_algo_build(&c, &s, &algo), BRAID_OK);
        assert_string_not_equal(algo->name, "twoshot");    /* nobody to pull from */
        braid_sched_free(&s);
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
            a->sc[r][p] = (size_t)(hash3((uint64_t)lo, (uint64_t)hi, 5) % 7) * scale;
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
    sim_call_t calls[MAXR];
    sim_result_t res;
    tcase_t tc = { .kind = BRAID_COLL_ALLTOALLV, .dt = dt, .n = n, .in_place = in_place,
                   .cfg = cfg_tight };
    char desc[160];

    tc_describe(&tc, desc, sizeof(desc));
    a2av_layout(n, in_place, scale, &a);
    for (int r = 0; r < n; r++) {
        in[r] = malloc(a.sext[r] * es + 1);
        fill_input(&tc, r, in[r], a.sext[r]);
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
        tc_call(&one, r, &(rbuf_t){ .send = in[r], .recv = out[r], .alias = in_place }, &calls[r]);
        calls[r].coll.sendcounts = a.sc[r];
        calls[r].coll.sdispls = a.sd[r];
        calls[r].coll.recvcounts = a.rc[r];
        calls[r].coll.rdispls = a.rd[r];
    }
    if (sim_run(&tc.cfg, n, calls, n, &res) != 0)
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

/* ---- send / recv ---- */

static void p2p_call(sim_call_t *c, int rank, int n, braid_coll_kind_t kind, int peer,
                     size_t count, uint64_t seq, void *buf)
{
    memset(c, 0, sizeof(*c));
    c->rank = rank;
    c->coll = (braid_coll_t){ .kind = kind, .dtype = BRAID_INT32, .rank = rank, .nranks = n,
                              .root = peer, .count = count };
    if (kind == BRAID_COLL_SEND)
        c->sendbuf = buf;
    else
        c->recvbuf = buf;
    /* Both sides compare what the sender sends: kind Send, no root. */
    c->hdr = (braid_msg_hdr_t){ .seq = seq, .count = count, .kind = (uint8_t)kind,
                                .dtype = BRAID_INT32, .op = 255, .root = -1 };
    c->expect = c->hdr;
    c->expect.kind = BRAID_COLL_SEND;
}

/* A group on every rank: send to r + shift, receive from r - shift (shift 0: to itself). */
static void sendrecv_shift(int n, int shift, size_t count)
{
    int32_t *sbuf[MAXR], *rbuf[MAXR];
    sim_call_t calls[2 * MAXR];
    sim_result_t res;
    for (int r = 0; r < n; r++) {
        sbuf[r] = malloc(count * 4 + 4);
        rbuf[r] = malloc(count * 4 + 4);
        for (size_t i = 0; i < count; i++)
            sbuf[r][i] = (int32_t)(r * 100000 + (int)i);
        /* Half the ranks post the receive first: order across connections is free. */
        int first = r & 1;
        p2p_call(&calls[2 * r + first], r, n, BRAID_COLL_SEND, (r + shift) % n, count, 1, sbuf[r]);
        p2p_call(&calls[2 * r + !first], r, n, BRAID_COLL_RECV, (r - shift + n) % n, count, 1,
                 rbuf[r]);
    }
    if (sim_run(&cfg_tight, n, calls, 2 * n, &res) != 0)
        fail_msg("send/recv n=%d shift=%d count=%zu: %s", n, shift, count, res.msg);
    for (int r = 0; r < n; r++) {
        int from = (r - shift + n) % n;
        for (size_t i = 0; i < count; i++)
            if (rbuf[r][i] != (int32_t)(from * 100000 + (int)i))
                fail_msg("send/recv n=%d shift=%d: rank %d element %zu is %d", n, shift, r, i,
                         rbuf[r][i]);
        free(sbuf[r]);
        free(rbuf[r]);
    }
}

static void test_sendrecv(void **state)
{
    (void)state;
    for (int n = 1; n <= MAXR; n++)
        for (int shift = 0; shift < n; shift++) {
            sendrecv_shift(n, shift, shift == 1 ? 1009 : 7);
            if (shift == 0)
                sendrecv_shift(n, shift, 0);
        }
}

/* Two messages to the same peer in one group arrive in call order. */
static void test_sendrecv_ordered(void **state)
{
    int32_t a[50], b[30], ra[50], rb[30];
    sim_call_t calls[4];
    sim_result_t res;
    (void)state;
    for (int i = 0; i < 50; i++)
        a[i] = i;
    for (int i = 0; i < 30; i++)
        b[i] = 1000 + i;
    p2p_call(&calls[0], 0, 2, BRAID_COLL_SEND, 1, 50, 1, a);
    p2p_call(&calls[1], 0, 2, BRAID_COLL_SEND, 1, 30, 2, b);
    p2p_call(&calls[2], 1, 2, BRAID_COLL_RECV, 0, 50, 1, ra);
    p2p_call(&calls[3], 1, 2, BRAID_COLL_RECV, 0, 30, 2, rb);
    for (int run = 0; run < 2; run++) {
        sim_cfg_t cfg = cfg_tight;
        cfg.exec_run = run;     /* the checking loop, then the library's braid_exec_run */
        memset(ra, 0xff, sizeof(ra));
        memset(rb, 0xff, sizeof(rb));
        if (sim_run(&cfg, 2, calls, 4, &res) != 0)
            fail_msg("two sends in a group: %s", res.msg);
        assert_memory_equal(ra, a, sizeof(a));
        assert_memory_equal(rb, b, sizeof(b));
    }
}

/* ---- what must fail ---- */

static void custom_call(sim_call_t *c, int rank, int n, const braid_sched_t *s, void *buf)
{
    p2p_call(c, rank, n, BRAID_COLL_SEND, 0, 0, 1, buf);
    c->recvbuf = buf;
    c->expect.kind = BRAID_COLL_SEND;
    c->sched = s;
}

/* Two ranks that only receive from each other: reported as a deadlock naming both. */
static void test_deadlock_detected(void **state)
{
    braid_sched_t s[2];
    sim_call_t calls[2];
    sim_result_t res;
    unsigned char buf[2][256];
    (void)state;
    for (int r = 0; r < 2; r++) {
        braid_sched_init(&s[r], 4);
        assert_int_equal(braid_sched_add(&s[r], 1 - r, -1, braid_ref_none(),
                                         braid_ref(BRAID_BUF_RECV, 0), 16, 0), BRAID_OK);
        custom_call(&calls[r], r, 2, &s[r], buf[r]);
    }
    assert_int_not_equal(sim_run(&cfg_tight, 2, calls, 2, &res), 0);
    assert_true(res.deadlock);
    assert_non_null(strstr(res.msg, "rank 0 "));
    assert_non_null(strstr(res.msg, "rank 1 "));
    for (int r = 0; r < 2; r++)
        braid_sched_free(&s[r]);
}

/* Both ranks send, in a stage of its own, before receiving: fine while the message fits
 * the FIFO (2 slots), a deadlock once it needs more slots than that. */
static void head_to_head(size_t slices, int want_deadlock)
{
    braid_sched_t s[2];
    sim_call_t calls[2];
    sim_result_t res;
    unsigned char buf[2][256];
    size_t bytes = slices * cfg_tight.slot_size;
    for (int r = 0; r < 2; r++) {
        memset(buf[r], r, sizeof(buf[r]));
        braid_sched_init(&s[r], 4);
        assert_int_equal(braid_sched_add(&s[r], -1, 1 - r, braid_ref(BRAID_BUF_SEND, 0),
                                         braid_ref_none(), bytes, 0), BRAID_OK);
        braid_sched_stage(&s[r]);
        assert_int_equal(braid_sched_add(&s[r], 1 - r, -1, braid_ref_none(),
                                         braid_ref(BRAID_BUF_RECV, 128), bytes, 0), BRAID_OK);
        custom_call(&calls[r], r, 2, &s[r], buf[r]);
    }
    int rc = sim_run(&cfg_tight, 2, calls, 2, &res);
    assert_int_equal(rc != 0, want_deadlock);
    assert_int_equal(res.deadlock, want_deadlock);
    if (!want_deadlock)
        assert_int_equal(buf[0][128], 1);
    for (int r = 0; r < 2; r++)
        braid_sched_free(&s[r]);
}

static void test_deadlock_head_to_head(void **state)
{
    (void)state;
    head_to_head(2, 0);
    head_to_head(3, 1);
}

static void mismatch(const tcase_t *a, const tcase_t *b)
{
    tcase_t tcs[2] = { *a, *b };
    rbuf_t rb[2];
    sim_call_t calls[2];
    sim_result_t res;
    for (int r = 0; r < 2; r++) {
        rbuf_setup(&tcs[r], r, &rb[r]);
        tc_call(&tcs[r], r, &rb[r], &calls[r]);
    }
    assert_int_not_equal(sim_run(&cfg_tight, 2, calls, 2, &res), 0);
    assert_int_equal(res.st, BRAID_ERR_REMOTE);
    assert_false(res.deadlock);
    for (int r = 0; r < 2; r++)
        rbuf_free(&rb[r]);
}

/* Ranks calling different collectives, or the same with different counts: remote error. */
static void test_mismatch_remote(void **state)
{
    tcase_t ar = { .kind = BRAID_COLL_ALLREDUCE, .dt = BRAID_FP32, .n = 2, .count = 8,
                   .cfg = cfg_tight };
    tcase_t bc = ar, ar10 = ar, ag = ar;
    (void)state;
    bc.kind = BRAID_COLL_BROADCAST;
    ar10.count = 10;
    ag.kind = BRAID_COLL_ALLGATHER;
    mismatch(&ar, &bc);
    mismatch(&ar, &ar10);
    mismatch(&ag, &ar);
}

/* Same headers, different lengths: also a remote error, not a hang. */
static void test_mismatch_length(void **state)
{
    braid_sched_t s[2];
    sim_call_t calls[2];
    sim_result_t res;
    unsigned char buf[2][64] = { { 0 } };
    (void)state;
    for (int r = 0; r < 2; r++) {
        braid_sched_init(&s[r], 4);
        assert_int_equal(braid_sched_add(&s[r], r ? 0 : -1, r ? -1 : 1,
                                         r ? braid_ref_none() : braid_ref(BRAID_BUF_SEND, 0),
                                         r ? braid_ref(BRAID_BUF_RECV, 0) : braid_ref_none(),
                                         r ? 8 : 16, 0), BRAID_OK);
        custom_call(&calls[r], r, 2, &s[r], buf[r]);
    }
    assert_int_not_equal(sim_run(&cfg_tight, 2, calls, 2, &res), 0);
    assert_int_equal(res.st, BRAID_ERR_REMOTE);
    for (int r = 0; r < 2; r++)
        braid_sched_free(&s[r]);
}

/* A pull before the peer's hello arrived is a braid bug, reported as such (not a crash). */
static void test_pull_without_hello(void **state)
{
    braid_sched_t s[2];
    sim_call_t calls[2];
    sim_result_t res;
    unsigned char buf[2][64] = { { 0 } };
    (void)state;
    for (int r = 0; r < 2; r++) {
        braid_sched_init(&s[r], 4);
        assert_int_equal(braid_sched_pull(&s[r], 1 - r, braid_ref(BRAID_BUF_SEND, 0),
                                          braid_ref_none(), braid_ref(BRAID_BUF_RECV, 0), 16, 0),
                         BRAID_OK);
        custom_call(&calls[r], r, 2, &s[r], buf[r]);
    }
    assert_int_not_equal(sim_run(&cfg_tight, 2, calls, 2, &res), 0);
    assert_int_equal(res.st, BRAID_ERR_INTERNAL);
    assert_non_null(strstr(res.msg, "before its hello"));
    for (int r = 0; r < 2; r++)
        braid_sched_free(&s[r]);
}

/* ---- the selector ---- */

static void test_algo_select(void **state)
{
    static const char *const want[BRAID_COLL_NUM] = {
        [BRAID_COLL_ALLREDUCE] = "oneshot", [BRAID_COLL_BROADCAST] = "chain",
        [BRAID_COLL_REDUCE] = "chain", [BRAID_COLL_ALLGATHER] = "ring",
        [BRAID_COLL_REDUCESCATTER] = "ring", [BRAID_COLL_ALLTOALL] = "direct",
        [BRAID_COLL_ALLTOALLV] = "direct", [BRAID_COLL_GATHER] = "direct",
        [BRAID_COLL_SCATTER] = "direct", [BRAID_COLL_SEND] = "direct",
        [BRAID_COLL_RECV] = "direct",
    };
    const size_t cnt[4] = { 3, 3, 3, 3 }, dsp[4] = { 0, 3, 6, 9 };
    braid_sched_t s;
    const braid_algo_t *algo;
    (void)state;
    for (int k = 0; k < BRAID_COLL_NUM; k++) {
        braid_coll_t c = { .kind = (braid_coll_kind_t)k, .dtype = BRAID_FP32, .rank = 1,
                           .nranks = 4, .root = 2, .count = 10, .sendcounts = cnt,
                           .sdispls = dsp, .recvcounts = cnt, .rdispls = dsp };
        assert_int_equal(braid_algo_build(&c, &s, &algo), BRAID_OK);
        assert_string_equal(algo->name, want[k]);
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
        cmocka_unit_test(test_pull_without_hello),
        cmocka_unit_test(test_alltoallv),
        cmocka_unit_test(test_sendrecv),
        cmocka_unit_test(test_sendrecv_ordered),
        cmocka_unit_test(test_deadlock_detected),
        cmocka_unit_test(test_deadlock_head_to_head),
        cmocka_unit_test(test_mismatch_remote),
        cmocka_unit_test(test_mismatch_length),
    };
    return cmocka_run_group_tests_name("sched", tests, NULL, NULL);
}
