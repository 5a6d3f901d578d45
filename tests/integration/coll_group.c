/*
 * coll_check: point-to-point patterns in groups (all pairs at once with uneven counts, a
 * rank sending to itself, several messages to one peer matched in order) and one nested
 * group mixing many different collectives. With -d every buffer is a cc_buf with a device
 * twin, which the calls take (cc_dp) with the thread's stream.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_check.h"

#define PEER_STRIDE 100000   /* element index base per destination */

/* ---- all pairs ---------------------------------------------------------------------- */

static size_t pair_count(size_t base, int s, int d)
{
    return base == 0 ? 0 : base + (size_t)((s * 3 + d * 5) % 4);
}

typedef struct pairs_rank {
    cc_buf_t *send, *recv;   /* [nranks] */
} pairs_rank_t;

static void pairs_setup(const cc_world_t *w, int type, size_t base, uint32_t salt, int rank,
                        pairs_rank_t *pr)
{
    int n = w->nranks;
    size_t es = cc_types[type].size;
    pr->send = cc_xmalloc((size_t)n * sizeof(cc_buf_t));
    pr->recv = cc_xmalloc((size_t)n * sizeof(cc_buf_t));
    for (int p = 0; p < n; p++) {
        size_t sc = pair_count(base, rank, p), rc = pair_count(base, p, rank);
        cc_buf_alloc(&pr->send[p], sc * es);
        for (size_t i = 0; i < sc; i++)
            cc_encode(type, cc_value(type, CC_VAL_ANY, n, rank, (size_t)p * PEER_STRIDE + i,
                                     salt, 1), pr->send[p].data + i * es);
        cc_buf_alloc(&pr->recv[p], rc * es);
    }
}

static void pairs_check(const cc_world_t *w, const cc_case_t *c, uint32_t salt, int rank,
                        pairs_rank_t *pr)
{
    int n = w->nranks;
    for (int p = 0; p < n; p++) {
        size_t rc = pair_count(c->count, p, rank);
        double *e = cc_xmalloc((rc ? rc : 1) * sizeof(double));
        for (size_t i = 0; i < rc; i++)
            e[i] = cc_value(c->type, CC_VAL_ANY, n, p, (size_t)rank * PEER_STRIDE + i, salt, 1);
        cc_case_t cp = *c;
        cp.root = p;   /* the peer */
        cc_check_values(w, &cp, rank, pr->recv[p].data, e, rc, 0);
        cc_buf_guards_ok(&pr->recv[p], &cp, rank);
        cc_buf_guards_ok(&pr->send[p], &cp, rank);
        free(e);
        cc_buf_free(&pr->send[p]);
        cc_buf_free(&pr->recv[p]);
    }
    free(pr->send);
    free(pr->recv);
}

static void pairs_case(cc_world_t *w, int type, size_t base, uint32_t salt)
{
    cc_case_t c = { "ncclSend/ncclRecv(all pairs)", type, -1, base, -1, 0 };
    pairs_rank_t pr[CC_MAX_LOCAL];
    ncclDataType_t dt = cc_types[type].dt;
    int n = w->nranks;
    for (int l = 0; l < w->nlocal; l++)
        pairs_setup(w, type, base, salt, w->ranks[l], &pr[l]);
    cc_dev_upload();
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++) {
        int r = w->ranks[l];
        for (int k = 0; k < n; k++) {   /* each rank starts with a different peer */
            int p = (r + k) % n, q = (r - k + n) % n;
            CC_NCCL(w, "ncclSend", ncclSend(cc_dp(pr[l].send[p].data), pair_count(base, r, p),
                                            dt, p, w->comms[l], cc_stream()));
            CC_NCCL(w, "ncclRecv", ncclRecv(cc_dp(pr[l].recv[q].data), pair_count(base, q, r),
                                            dt, q, w->comms[l], cc_stream()));
        }
    }
    cc_group_end(w, c.what);
    cc_dev_download();
    for (int l = 0; l < w->nlocal; l++)
        pairs_check(w, &c, salt, w->ranks[l], &pr[l]);
}

/* ---- self, and several messages to one peer ------------------------------------------ */

static void self_case(cc_world_t *w, int type, size_t count, uint32_t salt)
{
    cc_case_t c = { "ncclSend/ncclRecv(self)", type, -1, count, -1, 0 };
    size_t es = cc_types[type].size;
    cc_buf_t s[CC_MAX_LOCAL], r[CC_MAX_LOCAL];
    double *e = cc_xmalloc((count ? count : 1) * sizeof(double));
    for (int l = 0; l < w->nlocal; l++) {
        cc_buf_alloc(&s[l], count * es);
        cc_buf_alloc(&r[l], count * es);
        cc_fill(type, CC_VAL_ANY, w->nranks, w->ranks[l], salt, 1, s[l].data, count);
    }
    cc_dev_upload();
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++) {
        int rank = w->ranks[l];
        CC_NCCL(w, "ncclRecv(self)", ncclRecv(cc_dp(r[l].data), count, cc_types[type].dt, rank,
                                              w->comms[l], cc_stream()));
        CC_NCCL(w, "ncclSend(self)", ncclSend(cc_dp(s[l].data), count, cc_types[type].dt, rank,
                                              w->comms[l], cc_stream()));
    }
    cc_group_end(w, c.what);
    cc_dev_download();
    for (int l = 0; l < w->nlocal; l++) {
        int rank = w->ranks[l];
        for (size_t i = 0; i < count; i++)
            e[i] = cc_value(type, CC_VAL_ANY, w->nranks, rank, i, salt, 1);
        c.root = rank;
        cc_check_values(w, &c, rank, r[l].data, e, count, 0);
        cc_buf_guards_ok(&r[l], &c, rank);
        cc_buf_free(&s[l]);
        cc_buf_free(&r[l]);
    }
    free(e);
}

/* Three sends of different sizes to rank+1 in one group: received in the order sent. */
static void order_case(cc_world_t *w, uint32_t salt)
{
    static const size_t sizes[3] = { 5, 70000, 9 };
    cc_case_t c = { "ncclSend/ncclRecv(ordered)", ncclInt32, -1, 0, -1, 0 };
    int n = w->nranks;
    cc_buf_t s[CC_MAX_LOCAL][3], r[CC_MAX_LOCAL][3];
    for (int l = 0; l < w->nlocal; l++)
        for (int m = 0; m < 3; m++) {
            cc_buf_alloc(&s[l][m], sizes[m] * 4);
            cc_buf_alloc(&r[l][m], sizes[m] * 4);
            cc_fill(ncclInt32, CC_VAL_ANY, n, w->ranks[l], salt + (uint32_t)m, 1, s[l][m].data,
                    sizes[m]);
        }
    cc_dev_upload();
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++) {
        int rank = w->ranks[l];
        for (int m = 0; m < 3; m++)
            CC_NCCL(w, "ncclSend", ncclSend(cc_dp(s[l][m].data), sizes[m], ncclInt32,
                                            (rank + 1) % n, w->comms[l], cc_stream()));
        for (int m = 0; m < 3; m++)
            CC_NCCL(w, "ncclRecv", ncclRecv(cc_dp(r[l][m].data), sizes[m], ncclInt32,
                                            (rank + n - 1) % n, w->comms[l], cc_stream()));
    }
    cc_group_end(w, c.what);
    cc_dev_download();
    for (int l = 0; l < w->nlocal; l++) {
        int rank = w->ranks[l];
        for (int m = 0; m < 3; m++) {
            double *e = cc_xmalloc(sizes[m] * sizeof(double));
            for (size_t i = 0; i < sizes[m]; i++)
                e[i] = cc_value(ncclInt32, CC_VAL_ANY, n, (rank + n - 1) % n, i,
                                salt + (uint32_t)m, 1);
            c.count = sizes[m];
            cc_check_values(w, &c, rank, r[l][m].data, e, sizes[m], 0);
            cc_buf_guards_ok(&r[l][m], &c, rank);
            free(e);
            cc_buf_free(&s[l][m]);
            cc_buf_free(&r[l][m]);
        }
    }
}

void cc_test_p2p(cc_world_t *w)
{
    static const int types[] = { ncclInt8, ncclFloat16, ncclFloat64, ncclFloat8e5m2 };
    static const size_t bases[] = { 0, 1, 7, 1001 };
    uint32_t salt = 40000;
    cc_set_phase("ncclSend/ncclRecv(all pairs)");
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
        for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++)
            pairs_case(w, types[t], bases[b], ++salt);
    if (!w->quick)
        pairs_case(w, ncclFloat32, 300001, ++salt);
    cc_set_phase("ncclSend/ncclRecv(self)");
    for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++)
        self_case(w, ncclUint64, bases[b], ++salt);
    self_case(w, ncclBfloat16, 300001, ++salt);
    cc_set_phase("ncclSend/ncclRecv(ordered)");
    order_case(w, salt += 10);
}

/* ---- one nested group of many collectives, then a burst of them --------------------- */

static void mixed_prepare(cc_world_t *w, const cc_case_t *cases, const cc_kind_t *kinds,
                          int n, uint32_t salt, cc_prep_t **p)
{
    for (int i = 0; i < n; i++) {
        int red = kinds[i] == CC_K_ALLREDUCE || kinds[i] == CC_K_REDUCE ||
                  kinds[i] == CC_K_REDUCESCATTER;
        p[i] = red ? cc_red_prepare(w, kinds[i], &cases[i], salt + (uint32_t)i)
                   : cc_mv_prepare(w, kinds[i], &cases[i], salt + (uint32_t)i);
    }
}

void cc_test_mixed_group(cc_world_t *w)
{
    int n = w->nranks;
    cc_case_t cases[] = {
        { "group:ncclAllReduce", ncclInt32, CC_SUM, 1001, -1, 0 },
        { "group:ncclBroadcast", ncclFloat32, -1, 77, n - 1, 0 },
        { "group:ncclAllGather", ncclBfloat16, -1, 13, -1, 1 },
        { "group:ncclReduceScatter", ncclInt64, CC_MAX, 5, -1, 0 },
        { "group:ncclSend/ncclRecv(ring)", ncclUint8, -1, 999, -1, 0 },
        { "group:ncclAlltoAll", ncclFloat64, -1, 3, -1, 0 },
        { "group:ncclReduce", ncclFloat16, CC_SUM, 11, 0, 0 },
        { "group:ncclGather", ncclUint32, -1, 9, 1 % n, 0 },
        { "group:ncclAllToAllv", ncclInt8, -1, 6, -1, 0 },
        { "group:ncclAllReduce", ncclFloat32, CC_PMS_DEV, 100, -1, 1 },
        { "group:ncclScatter", ncclFloat8e4m3, -1, 4, n / 2, 0 },
    };
    static const cc_kind_t kinds[] = {
        CC_K_ALLREDUCE, CC_K_BROADCAST, CC_K_ALLGATHER, CC_K_REDUCESCATTER, CC_K_RING,
        CC_K_ALLTOALL, CC_K_REDUCE, CC_K_GATHER, CC_K_ALLTOALLV, CC_K_ALLREDUCE, CC_K_SCATTER,
    };
    enum { NC = sizeof(kinds) / sizeof(kinds[0]) };
    cc_prep_t *p[NC];
    cc_set_phase("mixed group");
    mixed_prepare(w, cases, kinds, NC, 60000u, p);
    cc_dev_upload();
    cc_group_start(w);
    for (int l = 0; l < w->nlocal; l++) {
        cc_group_start(w);   /* nested: its end must not run anything yet */
        for (int i = 0; i < NC / 2; i++)
            p[i]->issue(p[i], l);
        cc_group_end(w, "mixed group (inner)");
        for (int i = NC / 2; i < NC; i++)
            p[i]->issue(p[i], l);
    }
    cc_group_end(w, "mixed group");
    cc_dev_download();
    for (int i = 0; i < NC; i++)
        p[i]->finish(p[i]);
    /* the same calls one after another, nothing between them (each rank's call in a group
     * of the thread's ranks, as one thread must): with -S on streams in turn, which only
     * the library orders */
    cc_set_phase("a burst of calls");
    mixed_prepare(w, cases, kinds, NC, 61000u, p);
    cc_dev_upload();
    for (int i = 0; i < NC; i++) {
        if (w->nlocal > 1)
            cc_group_start(w);
        for (int l = 0; l < w->nlocal; l++)
            p[i]->issue(p[i], l);
        if (w->nlocal > 1)
            cc_group_end(w, "a burst of calls");
    }
    cc_dev_download();
    for (int i = 0; i < NC; i++)
        p[i]->finish(p[i]);
}
