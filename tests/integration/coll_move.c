/*
 * coll_check: the collectives that move data without reducing it. Each builds, for every
 * local rank, its send and receive buffers (NULL where NCCL does not use one), the values
 * the receive buffer must hold afterwards, and a copy of the input to prove it untouched.
 *
 * Values: element i of rank q's send buffer is cc_value(ANY, q, i), so a block that lands
 * in the wrong place, or comes from the wrong rank, is caught.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_check.h"
#include "rccl/rccl.h"

typedef struct mv_rank {
    cc_buf_t send, recv;
    void *saved;               /* copy of the input region, when out of place */
    size_t saved_bytes;
    const void *sp;
    void *rp;
    double *expect;            /* expected rp[0 .. nexpect) (NaN: not checked) */
    size_t nexpect;
    size_t *v;                 /* AllToAllv: scounts, sdispls, rcounts, rdispls */
} mv_rank_t;

typedef struct mv_prep {
    cc_prep_t base;
    cc_world_t *w;
    cc_kind_t k;
    cc_case_t c;
    uint32_t salt;
    mv_rank_t r[CC_MAX_LOCAL];
} mv_prep_t;

static double val(const mv_prep_t *p, int rank, size_t idx)
{
    return cc_value(p->c.type, CC_VAL_ANY, p->w->nranks, rank, idx, p->salt, 1);
}

/* Values of rank's elements idx0 .. idx0+n-1: one period computed, the rest repeated. */
static void vals(const mv_prep_t *p, int rank, size_t idx0, size_t n, double *out)
{
    size_t first = n < CC_PERIOD ? n : CC_PERIOD;
    for (size_t i = 0; i < first; i++)
        out[i] = val(p, rank, idx0 + i);
    cc_repeat(out, first * sizeof(double), n * sizeof(double));
}

static void fill_from(const mv_prep_t *p, int rank, void *dst, size_t idx0, size_t n)
{
    size_t es = cc_types[p->c.type].size, first = n < CC_PERIOD ? n : CC_PERIOD;
    for (size_t i = 0; i < first; i++)
        cc_encode(p->c.type, val(p, rank, idx0 + i), (char *)dst + i * es);
    cc_repeat(dst, first * es, n * es);
}

/* A buffer whose contents are garbage that must be overwritten (or left alone). */
static void *buf_new(mv_prep_t *p, cc_buf_t *b, size_t elems)
{
    size_t es = cc_types[p->c.type].size;
    cc_buf_alloc(b, elems * es);
    for (size_t i = 0; i < elems * es; i++)
        b->data[i] = (char)(0x5a ^ (int)(i * 13));
    return b->data;
}

static void save_input(mv_rank_t *m, const void *src, size_t bytes)
{
    m->saved = cc_xmalloc(bytes);
    memcpy(m->saved, src, bytes);
    m->saved_bytes = bytes;
}

/* This rank's own sendbuff of c.count elements, filled and saved (it must stay unchanged). */
static void own_input(mv_prep_t *p, int rank, mv_rank_t *m)
{
    m->sp = buf_new(p, &m->send, p->c.count);
    fill_from(p, rank, m->send.data, 0, p->c.count);
    save_input(m, m->sp, p->c.count * cc_types[p->c.type].size);
}

static double *expect_new(mv_rank_t *m, size_t n)
{
    m->nexpect = n;
    m->expect = cc_xmalloc((n ? n : 1) * sizeof(double));
    return m->expect;
}

/* ---- per collective: buffers and expectations -------------------------------------- */

static void setup_bcast(mv_prep_t *p, int rank, mv_rank_t *m)
{
    const cc_case_t *c = &p->c;
    int root = rank == c->root;
    m->rp = buf_new(p, &m->recv, c->count);
    if (root && (c->inplace || p->k == CC_K_BCAST))
        fill_from(p, rank, m->rp, 0, c->count);
    if (p->k == CC_K_BCAST || c->inplace) {
        m->sp = m->rp;
    } else if (root) {
        own_input(p, rank, m);
    } else {
        m->sp = NULL;   /* only the root's sendbuff is read */
    }
    vals(p, c->root, 0, c->count, expect_new(m, c->count));
}

static void setup_allgather(mv_prep_t *p, int rank, mv_rank_t *m)
{
    const cc_case_t *c = &p->c;
    size_t es = cc_types[c->type].size, n = (size_t)p->w->nranks;
    m->rp = buf_new(p, &m->recv, c->count * n);
    if (c->inplace) {
        m->sp = (char *)m->rp + (size_t)rank * c->count * es;
        fill_from(p, rank, (void *)m->sp, 0, c->count);
    } else {
        own_input(p, rank, m);
    }
    double *e = expect_new(m, c->count * n);
    for (size_t q = 0; q < n; q++)
        vals(p, (int)q, 0, c->count, e + q * c->count);
}

/* Block for peer d of rank s's send buffer holds s's elements d*count + i. */
static void setup_alltoall(mv_prep_t *p, int rank, mv_rank_t *m)
{
    const cc_case_t *c = &p->c;
    size_t es = cc_types[c->type].size, n = (size_t)p->w->nranks, tot = c->count * n;
    m->rp = buf_new(p, &m->recv, tot);
    if (c->inplace) {
        m->sp = m->rp;
        fill_from(p, rank, m->rp, 0, tot);
    } else {
        m->sp = buf_new(p, &m->send, tot);
        fill_from(p, rank, m->send.data, 0, tot);
        save_input(m, m->sp, tot * es);
    }
    double *e = expect_new(m, tot);
    for (size_t q = 0; q < n; q++)
        vals(p, (int)q, (size_t)rank * c->count, c->count, e + q * c->count);
}

/* AllToAllv: rank s sends vcount(s, d) elements to d; zero for some pairs. */
static size_t vcount(size_t count, int s, int d)
{
    if (count == 0 || (s + 2 * d) % 5 == 4)
        return 0;
    return count + (size_t)((s * 3 + d * 5) % 4) - (count > 1 ? 1 : 0);
}

/* Send blocks in peer order with a one-element gap; receive blocks in reverse peer order
 * with a two-element gap (checked untouched). In place: one layout, block d at d * B. */
static void setup_alltoallv(mv_prep_t *p, int rank, mv_rank_t *m)
{
    const cc_case_t *c = &p->c;
    int n = p->w->nranks;
    size_t es = cc_types[c->type].size, B = c->count + 4, stot = 0, rtot = 0;
    size_t *sc = m->v = cc_xmalloc(4 * (size_t)n * sizeof(size_t));
    size_t *sd = sc + n, *rc = sd + n, *rd = rc + n;
    for (int d = 0; d < n; d++) {
        sc[d] = vcount(c->count, rank, d);
        rc[d] = vcount(c->count, d, rank);
        sd[d] = c->inplace ? (size_t)d * B : stot;
        stot += sc[d] + 1;
    }
    for (int d = n - 1; d >= 0; d--) {
        rd[d] = c->inplace ? (size_t)d * B : rtot;
        rtot += rc[d] + 2;
    }
    if (c->inplace)
        stot = rtot = B * (size_t)n;
    m->rp = buf_new(p, &m->recv, rtot);
    m->sp = c->inplace ? m->rp : buf_new(p, &m->send, stot);
    for (int d = 0; d < n; d++)   /* rank's element j for d is its index d * B + j */
        fill_from(p, rank, (char *)m->sp + sd[d] * es, (size_t)d * B, sc[d]);
    if (!c->inplace)
        save_input(m, m->sp, stot * es);
    double *e = expect_new(m, rtot);
    for (size_t i = 0; i < rtot; i++)   /* gaps keep their garbage */
        e[i] = cc_decode(c->type, (char *)m->rp + i * es);
    for (int s = 0; s < n; s++)
        for (size_t j = 0; j < rc[s]; j++)
            e[rd[s] + j] = val(p, s, (size_t)rank * B + j);
}

static void setup_gather(mv_prep_t *p, int rank, mv_rank_t *m)
{
    const cc_case_t *c = &p->c;
    size_t es = cc_types[c->type].size, n = (size_t)p->w->nranks;
    int root = rank == c->root;
    if (root)
        m->rp = buf_new(p, &m->recv, c->count * n);
    if (root && c->inplace) {
        m->sp = (char *)m->rp + (size_t)rank * c->count * es;
        fill_from(p, rank, (void *)m->sp, 0, c->count);
    } else {
        own_input(p, rank, m);
    }
    if (!root)
        return;   /* recvbuff stays NULL: NCCL does not use it */
    double *e = expect_new(m, c->count * n);
    for (size_t q = 0; q < n; q++)
        vals(p, (int)q, 0, c->count, e + q * c->count);
}

static void setup_scatter(mv_prep_t *p, int rank, mv_rank_t *m)
{
    const cc_case_t *c = &p->c;
    size_t es = cc_types[c->type].size, n = (size_t)p->w->nranks;
    int root = rank == c->root;
    if (root) {
        m->sp = buf_new(p, &m->send, c->count * n);
        fill_from(p, rank, m->send.data, 0, c->count * n);
        save_input(m, m->sp, c->count * n * es);
    }
    if (root && c->inplace)
        m->rp = (char *)m->send.data + (size_t)rank * c->count * es;
    else
        m->rp = buf_new(p, &m->recv, c->count);
    vals(p, c->root, (size_t)rank * c->count, c->count, expect_new(m, c->count));
}

/* Ring: send to rank+1, receive from rank-1, in one group. */
static void setup_ring(mv_prep_t *p, int rank, mv_rank_t *m)
{
    const cc_case_t *c = &p->c;
    int n = p->w->nranks;
    own_input(p, rank, m);
    m->rp = buf_new(p, &m->recv, c->count);
    vals(p, (rank + n - 1) % n, 0, c->count, expect_new(m, c->count));
}

/* ---- issue and check ----------------------------------------------------------------- */

static ncclResult_t mv_call(const mv_prep_t *p, const mv_rank_t *m, int rank, ncclComm_t comm)
{
    const cc_case_t *c = &p->c;
    ncclDataType_t dt = cc_types[c->type].dt;
    int n = p->w->nranks;
    ncclResult_t r;
    const void *sp = cc_dp(m->sp);
    void *rp = cc_dp(m->rp), *st = cc_stream();
    switch (p->k) {
    case CC_K_BROADCAST: return ncclBroadcast(sp, rp, c->count, dt, c->root, comm, st);
    case CC_K_BCAST: return ncclBcast(rp, c->count, dt, c->root, comm, st);
    case CC_K_ALLGATHER: return ncclAllGather(sp, rp, c->count, dt, comm, st);
    case CC_K_ALLTOALL: return ncclAlltoAll(sp, rp, c->count, dt, comm, st);
    case CC_K_ALLTOALL_RCCL: return ncclAllToAll(sp, rp, c->count, dt, comm, st);
    case CC_K_ALLTOALLV:
        return ncclAllToAllv(sp, m->v, m->v + n, rp, m->v + 2 * n, m->v + 3 * n, dt,
                             comm, st);
    case CC_K_GATHER: return ncclGather(sp, rp, c->count, dt, c->root, comm, st);
    case CC_K_SCATTER: return ncclScatter(sp, rp, c->count, dt, c->root, comm, st);
    default:
        r = ncclSend(sp, c->count, dt, (rank + 1) % n, comm, st);
        if (r == ncclSuccess)
            r = ncclRecv(rp, c->count, dt, (rank + n - 1) % n, comm, st);
        return r;
    }
}

static void mv_issue(cc_prep_t *base, int l)
{
    mv_prep_t *p = (mv_prep_t *)base;
    ncclResult_t r = mv_call(p, &p->r[l], p->w->ranks[l], p->w->comms[l]);
    if (r != ncclSuccess)
        cc_nccl_fatal(p->w, p->c.what, r, __FILE__, __LINE__);
}

static void mv_finish(cc_prep_t *base)
{
    mv_prep_t *p = (mv_prep_t *)base;
    for (int l = 0; l < p->w->nlocal; l++) {
        mv_rank_t *m = &p->r[l];
        int rank = p->w->ranks[l];
        if (m->expect != NULL)
            cc_check_values(p->w, &p->c, rank, m->rp, m->expect, m->nexpect, 0);
        if (m->saved != NULL)
            cc_check_unchanged(p->w, &p->c, rank, m->sp, m->saved, m->saved_bytes);
        if (m->send.base != NULL)
            cc_buf_guards_ok(&m->send, &p->c, rank);
        if (m->recv.base != NULL)
            cc_buf_guards_ok(&m->recv, &p->c, rank);
        cc_buf_free(&m->send);
        cc_buf_free(&m->recv);
        free(m->saved);
        free(m->expect);
        free(m->v);
    }
    free(p);
}

cc_prep_t *cc_mv_prepare(cc_world_t *w, cc_kind_t k, const cc_case_t *c, uint32_t salt)
{
    mv_prep_t *p = cc_xmalloc(sizeof(*p));
    memset(p, 0, sizeof(*p));
    p->base.issue = mv_issue;
    p->base.finish = mv_finish;
    p->w = w;
    p->k = k;
    p->c = *c;
    p->salt = salt;
    p->base.grouped = k == CC_K_RING || (salt & 1);
    for (int l = 0; l < w->nlocal; l++) {
        mv_rank_t *m = &p->r[l];
        int rank = w->ranks[l];
        switch (k) {
        case CC_K_BROADCAST:
        case CC_K_BCAST: setup_bcast(p, rank, m); break;
        case CC_K_ALLGATHER: setup_allgather(p, rank, m); break;
        case CC_K_ALLTOALL:
        case CC_K_ALLTOALL_RCCL: setup_alltoall(p, rank, m); break;
        case CC_K_ALLTOALLV: setup_alltoallv(p, rank, m); break;
        case CC_K_GATHER: setup_gather(p, rank, m); break;
        case CC_K_SCATTER: setup_scatter(p, rank, m); break;
        default: setup_ring(p, rank, m); break;
        }
    }
    return &p->base;
}

/* ---- the sweep ----------------------------------------------------------------------- */

typedef struct mv_desc {
    cc_kind_t k;
    const char *name;
    int rooted, has_inplace;
} mv_desc_t;

static const mv_desc_t mv_descs[] = {
    { CC_K_BROADCAST, "ncclBroadcast", 1, 1 },
    { CC_K_BCAST, "ncclBcast", 1, 0 },
    { CC_K_ALLGATHER, "ncclAllGather", 0, 1 },
    { CC_K_ALLTOALL, "ncclAlltoAll", 0, 1 },
    { CC_K_ALLTOALL_RCCL, "ncclAllToAll", 0, 1 },
    { CC_K_ALLTOALLV, "ncclAllToAllv", 0, 1 },
    { CC_K_GATHER, "ncclGather", 1, 1 },
    { CC_K_SCATTER, "ncclScatter", 1, 1 },
    { CC_K_RING, "ncclSend/ncclRecv(ring)", 0, 0 },
};

/* Large counts on a few types only; per-rank counts shrink with the rank count. */
static size_t mv_count(const cc_world_t *w, const mv_desc_t *d, size_t count, int type)
{
    if (count != CC_LARGE_COUNT)
        return count;
    if (type != ncclFloat32 && type != ncclInt8)
        return 0;
    int per_rank = d->k == CC_K_ALLGATHER || d->k == CC_K_ALLTOALL ||
                   d->k == CC_K_ALLTOALL_RCCL || d->k == CC_K_ALLTOALLV ||
                   d->k == CC_K_GATHER || d->k == CC_K_SCATTER;
    return per_rank ? count / (size_t)w->nranks : count;
}

void cc_test_move(cc_world_t *w)
{
    size_t counts[8];
    int ncounts = cc_counts(w, counts);
    uint32_t salt = 20000;
    for (size_t di = 0; di < sizeof(mv_descs) / sizeof(mv_descs[0]); di++) {
        const mv_desc_t *d = &mv_descs[di];
        cc_set_phase(d->name);
        for (int type = 0; type < CC_NTYPES; type++)
            for (int ci = 0; ci < ncounts; ci++)
                for (int inplace = 0; inplace <= d->has_inplace; inplace++) {
                    size_t count = mv_count(w, d, counts[ci], type);
                    if (counts[ci] == CC_LARGE_COUNT && (count == 0 || inplace))
                        continue;
                    int r0 = d->rooted ? 0 : -1, r1 = d->rooted ? w->nranks : 0;
                    if (d->rooted && (counts[ci] == CC_LARGE_COUNT || (type % 3) != 0))
                        r0 = (type + ci + inplace) % w->nranks, r1 = r0 + 1;   /* one root */
                    for (int root = r0; root < r1; root++) {
                        cc_case_t c = { d->name, type, -1, count, root, inplace };
                        cc_run(w, cc_mv_prepare(w, d->k, &c, ++salt), d->name);
                    }
                }
    }
}
