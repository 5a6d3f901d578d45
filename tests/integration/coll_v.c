/*
 * coll_check section v: braid.h's uneven collectives, braidAllGatherV and
 * braidReduceScatterV, on every mode of coll_check (processes, threads, device buffers).
 *
 * Layouts of the blocks (the same on every rank; counts and displacements in elements):
 *
 *   uneven   counts 0..12 with zeros, blocks in reverse rank order, 2-element gaps
 *   one      only the last rank's block, after a 4-element gap
 *   empty    every count 0: a no-op that touches nothing
 *   packed   count b for rank b (rank 0 empty), in rank order, no gaps
 *   large    (not -q) 20011 + 1001 b elements, every third rank empty, 5-element gaps
 *
 * Types int32 (exact), fp32 and bf16; reduce-scatter with sum, max and avg (values from the
 * families of coll_reduce.c, so every result is exact). In place and out of place; a rank
 * whose own count is 0 passes NULL for its own buffer out of place. Gaps of the all-gather's
 * recvbuff must keep their bytes, inputs out of place must stay unchanged.
 *
 * Bad arguments (NULL arrays, a count that is not the rank's, overlapping blocks, a byte
 * size that overflows, datatype, op, NULL buffers, a NULL communicator, and a bad call in a
 * group) must give ncclInvalidArgument with a last error naming the argument, and leave the
 * receive buffer as it was.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "braid.h"
#include "coll_check.h"

enum { V_UNEVEN, V_ONE, V_EMPTY, V_PACKED, V_LARGE, V_NSHAPES };
static const char *const v_shape_names[V_NSHAPES] = { "uneven", "one", "empty", "packed",
                                                      "large" };

typedef struct v_layout {
    size_t counts[CC_MAX_LOCAL], displs[CC_MAX_LOCAL];
    size_t span;                /* elements of the buffer that holds every block */
} v_layout_t;

static void v_layout_make(int shape, int n, v_layout_t *L)
{
    size_t at = shape == V_ONE ? 4 : 0;
    for (int i = 0; i < n; i++) {
        int b = shape == V_UNEVEN ? n - 1 - i : i;
        size_t c = 0, gap = 0;
        switch (shape) {
        case V_UNEVEN: c = (size_t)((b * 7 + 3) % 5) * 3, gap = 2; break;
        case V_ONE: c = b == n - 1 ? 13 : 0; break;
        case V_PACKED: c = (size_t)b; break;
        case V_LARGE: c = b % 3 == 1 ? 0 : 20011 + 1001 * (size_t)b, gap = 5; break;
        default: break;
        }
        L->counts[b] = c;
        L->displs[b] = at;
        at += c + gap;
    }
    L->span = at;
}

/* ---- one case: buffers, expectations, the call, the checks -------------------------- */

typedef struct v_rank {
    cc_buf_t send, recv;
    const void *sp;
    void *rp;
    void *in_saved;            /* the input out of place (must stay unchanged) */
    size_t in_bytes;
    unsigned char *rp_saved;   /* all-gather: recvbuff before the call (its gaps stay) */
    double *expect;            /* all-gather: span elements; reduce-scatter: own block */
} v_rank_t;

typedef struct v_prep {
    cc_prep_t base;
    cc_world_t *w;
    int gather;
    cc_case_t c;
    char what[64];             /* c.what: the call and the layout */
    uint32_t salt;
    v_layout_t L;
    v_rank_t r[CC_MAX_LOCAL];
} v_prep_t;

static void v_garbage(cc_buf_t *b, size_t bytes)
{
    cc_buf_alloc(b, bytes);
    for (size_t i = 0; i < bytes; i++)
        b->data[i] = (char)(0x5a ^ (int)(i * 13));
}

static double v_ag_value(const v_prep_t *p, int rank, size_t i)
{
    return cc_value(p->c.type, CC_VAL_ANY, p->w->nranks, rank, i, p->salt, 1);
}

static void v_setup_allgather(v_prep_t *p, int rank, v_rank_t *m)
{
    size_t es = cc_types[p->c.type].size, own = p->L.counts[rank];
    v_garbage(&m->recv, p->L.span * es);
    m->rp = m->recv.data;
    if (p->c.inplace) {
        m->sp = (char *)m->rp + p->L.displs[rank] * es;
    } else if (own > 0) {
        cc_buf_alloc(&m->send, own * es);
        m->sp = m->send.data;
    }   /* else sendbuff NULL: this rank sends nothing */
    for (size_t i = 0; i < own; i++)
        cc_encode(p->c.type, v_ag_value(p, rank, i), (char *)m->sp + i * es);
    if (!p->c.inplace && own > 0) {
        m->in_bytes = own * es;
        m->in_saved = cc_xmalloc(m->in_bytes);
        memcpy(m->in_saved, m->sp, m->in_bytes);
    }
    m->rp_saved = cc_xmalloc(p->L.span * es);
    memcpy(m->rp_saved, m->rp, p->L.span * es);
    m->expect = cc_xmalloc((p->L.span + 1) * sizeof(double));
    for (size_t i = 0; i < p->L.span; i++)
        m->expect[i] = NAN;            /* a gap: its bytes must stay */
    for (int q = 0; q < p->w->nranks; q++)
        for (size_t i = 0; i < p->L.counts[q]; i++)
            m->expect[p->L.displs[q] + i] = v_ag_value(p, q, i);
}

static void v_setup_reducescatter(v_prep_t *p, int rank, v_rank_t *m)
{
    size_t es = cc_types[p->c.type].size, own = p->L.counts[rank], span = p->L.span;
    int n = p->w->nranks;
    v_garbage(&m->send, span * es);
    cc_fill(p->c.type, cc_op_family(p->c.op), n, rank, p->salt, 1, m->send.data, span);
    m->sp = m->send.data;
    if (p->c.inplace) {
        m->rp = m->send.data + p->L.displs[rank] * es;
    } else {
        m->in_bytes = span * es;
        m->in_saved = cc_xmalloc(m->in_bytes);
        memcpy(m->in_saved, m->sp, m->in_bytes);
        if (own > 0) {
            v_garbage(&m->recv, own * es);
            m->rp = m->recv.data;
        }   /* else recvbuff NULL: this rank receives nothing */
    }
    m->expect = cc_xmalloc((own + 1) * sizeof(double));
    for (size_t i = 0; i < own; i++)
        m->expect[i] = cc_red_expect(p->c.type, p->c.op, n, p->salt, p->L.displs[rank] + i);
}

static void v_issue(cc_prep_t *base, int l)
{
    v_prep_t *p = (v_prep_t *)base;
    v_rank_t *m = &p->r[l];
    static const ncclRedOp_t ops[] = { ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg };
    ncclDataType_t dt = cc_types[p->c.type].dt;
    int rank = p->w->ranks[l];
    ncclResult_t r;
    if (p->gather)
        r = braidAllGatherV(cc_dp(m->sp), p->L.counts[rank], cc_dp(m->rp), p->L.counts,
                            p->L.displs, dt, p->w->comms[l], cc_stream());
    else
        r = braidReduceScatterV(cc_dp(m->sp), p->L.counts, p->L.displs, cc_dp(m->rp),
                                p->L.counts[rank], dt, ops[p->c.op], p->w->comms[l],
                                cc_stream());
    if (r != ncclSuccess)
        cc_nccl_fatal(p->w, p->c.what, r, __FILE__, __LINE__);
}

/* All-gather: every block holds its rank's values, every gap its old bytes. */
static void v_check_allgather(const v_prep_t *p, const v_rank_t *m, int rank)
{
    size_t es = cc_types[p->c.type].size;
    const unsigned char *got = m->rp;
    for (size_t i = 0; i < p->L.span; i++) {
        if (!isnan(m->expect[i])) {
            if (cc_check_values(p->w, &p->c, rank, got + i * es, &m->expect[i], 1, i) > 0)
                return;
        } else if (memcmp(got + i * es, m->rp_saved + i * es, es) != 0) {
            cc_fail(p->w, &p->c, rank, i, "a gap written", "a gap untouched");
            return;
        }
    }
}

static void v_finish(cc_prep_t *base)
{
    v_prep_t *p = (v_prep_t *)base;
    for (int l = 0; l < p->w->nlocal; l++) {
        v_rank_t *m = &p->r[l];
        int rank = p->w->ranks[l];
        if (p->gather)
            v_check_allgather(p, m, rank);
        else if (p->L.counts[rank] > 0)
            cc_check_values(p->w, &p->c, rank, m->rp, m->expect, p->L.counts[rank],
                            p->L.displs[rank]);
        if (m->in_saved != NULL)
            cc_check_unchanged(p->w, &p->c, rank, m->sp, m->in_saved, m->in_bytes);
        if (m->send.base != NULL)
            cc_buf_guards_ok(&m->send, &p->c, rank);
        if (m->recv.base != NULL)
            cc_buf_guards_ok(&m->recv, &p->c, rank);
        cc_buf_free(&m->send);
        cc_buf_free(&m->recv);
        free(m->in_saved);
        free(m->rp_saved);
        free(m->expect);
    }
    free(p);
}

static void v_case(cc_world_t *w, int gather, int shape, int type, int op, int inplace,
                   uint32_t salt)
{
    v_prep_t *p = cc_xmalloc(sizeof(*p));
    memset(p, 0, sizeof(*p));
    p->base.issue = v_issue;
    p->base.finish = v_finish;
    p->base.grouped = salt & 1;
    p->w = w;
    p->gather = gather;
    p->salt = salt;
    v_layout_make(shape, w->nranks, &p->L);
    size_t total = 0;
    for (int q = 0; q < w->nranks; q++)
        total += p->L.counts[q];
    snprintf(p->what, sizeof(p->what), "%s(%s)",
             gather ? "braidAllGatherV" : "braidReduceScatterV", v_shape_names[shape]);
    p->c = (cc_case_t){ p->what, type, gather ? -1 : op, total, -1, inplace };
    for (int l = 0; l < w->nlocal; l++) {
        if (gather)
            v_setup_allgather(p, w->ranks[l], &p->r[l]);
        else
            v_setup_reducescatter(p, w->ranks[l], &p->r[l]);
    }
    cc_set_phase(p->c.what);
    cc_run(w, &p->base, p->c.what);
}

static int v_type(ncclDataType_t dt)
{
    int t = 0;
    while (t < CC_NTYPES - 1 && cc_types[t].dt != dt)
        t++;
    return t;
}

/* The uneven layouts on int32, fp32 and bf16: all-gather, reduce-scatter with each op (on
 * the large layout fp32 sum and int32 only). Returns the cases run. */
static long v_cases(cc_world_t *w, uint32_t *salt)
{
    static const int ops[] = { CC_SUM, CC_MAX, CC_AVG };
    const int types[] = { v_type(ncclInt32), v_type(ncclFloat32), v_type(ncclBfloat16) };
    long cases = 0;
    for (int shape = 0; shape < V_NSHAPES; shape++) {
        if (shape == V_LARGE && w->quick)
            continue;
        for (int ti = 0; ti < 3; ti++)
            for (int inplace = 0; inplace < 2; inplace++) {
                int large = shape == V_LARGE;
                if (!large || ti != 2) {
                    v_case(w, 1, shape, types[ti], -1, inplace, ++*salt);
                    cases++;
                }
                for (int oi = 0; oi < 3; oi++) {
                    if (large && !(ti == 0 || (ti == 1 && ops[oi] == CC_SUM)))
                        continue;
                    v_case(w, 0, shape, types[ti], ops[oi], inplace, ++*salt);
                    cases++;
                }
            }
    }
    return cases;
}

/* ---- bad arguments ------------------------------------------------------------------- */

#define V_CANARY 0xcd
#define V_BUF 64

typedef struct v_bad {
    const cc_world_t *w;
    int rank;
    long checks;
    int32_t in[V_BUF], out[V_BUF];
} v_bad_t;

static void v_expect_bad(v_bad_t *b, const char *what, ncclResult_t r, const char *names)
{
    cc_case_t c = { what, v_type(ncclInt32), -1, 0, -1, 0 };
    const char *err = ncclGetLastError(NULL);
    /* The last error is the process's: with a thread per rank another rank's call may have
     * set it since, so its text is checked in the other modes only. */
    int own_text = strcmp(b->w->mode, "threads-each") != 0;
    char got[160];
    b->checks++;
    if (r != ncclInvalidArgument) {
        snprintf(got, sizeof(got), "result %d (%s)", (int)r, ncclGetErrorString(r));
        cc_fail(b->w, &c, b->rank, 0, got, "ncclInvalidArgument");
    } else if (own_text && (err == NULL || strstr(err, names) == NULL)) {
        snprintf(got, sizeof(got), "last error '%.120s'", err ? err : "(null)");
        cc_fail(b->w, &c, b->rank, 0, got, names);
    }
    for (size_t i = 0; i < sizeof(b->out); i++)
        if (((unsigned char *)b->out)[i] != V_CANARY) {
            cc_fail(b->w, &c, b->rank, i / 4, "recvbuff written", "recvbuff untouched");
            break;
        }
}

/* V_BAD(bad, "what", call, "a substring the last error must hold") */
#define V_BAD(_b, _what, _call, _names)                                                    \
    do {                                                                                   \
        memset((_b)->out, V_CANARY, sizeof((_b)->out));                                    \
        v_expect_bad((_b), (_what), (_call), (_names));                                    \
    } while (0)

/* Counts of 1 and displacements 2p: a valid layout of n blocks (n <= CC_MAX_LOCAL). */
static void v_good_layout(int n, size_t *counts, size_t *displs)
{
    for (int p = 0; p < n; p++)
        counts[p] = 1, displs[p] = 2 * (size_t)p;
}

static void v_bad_allgather(v_bad_t *b, ncclComm_t comm)
{
    size_t cnt[CC_MAX_LOCAL], dsp[CC_MAX_LOCAL], big[CC_MAX_LOCAL];
    int n = b->w->nranks, r = b->rank;
    v_good_layout(n, cnt, dsp);
    V_BAD(b, "braidAllGatherV(recvcounts NULL)",
          braidAllGatherV(b->in, 1, b->out, NULL, dsp, ncclInt32, comm, cc_stream()),
          "recvcounts");
    V_BAD(b, "braidAllGatherV(displs NULL)",
          braidAllGatherV(b->in, 1, b->out, cnt, NULL, ncclInt32, comm, cc_stream()),
          "displs");
    V_BAD(b, "braidAllGatherV(sendcount 3, recvcounts[rank] 1)",
          braidAllGatherV(b->in, 3, b->out, cnt, dsp, ncclInt32, comm, cc_stream()),
          "sendcount 3");
    V_BAD(b, "braidAllGatherV(datatype 12)",
          braidAllGatherV(b->in, 1, b->out, cnt, dsp, (ncclDataType_t)12, comm, cc_stream()),
          "datatype 12");
    V_BAD(b, "braidAllGatherV(recvbuff NULL)",
          braidAllGatherV(b->in, 1, NULL, cnt, dsp, ncclInt32, comm, cc_stream()),
          "recvbuff");
    V_BAD(b, "braidAllGatherV(sendbuff NULL)",
          braidAllGatherV(NULL, 1, b->out, cnt, dsp, ncclInt32, comm, cc_stream()),
          "sendbuff");
    V_BAD(b, "braidAllGatherV(comm NULL)",
          braidAllGatherV(b->in, 1, b->out, cnt, dsp, ncclInt32, NULL, cc_stream()), "comm");
    memcpy(big, cnt, sizeof(big));
    big[r] = SIZE_MAX / 2;
    V_BAD(b, "braidAllGatherV(count SIZE_MAX/2)",
          braidAllGatherV(b->in, SIZE_MAX / 2, b->out, big, dsp, ncclInt32, comm, cc_stream()),
          "overflow");
    if (n < 2)
        return;
    cnt[n - 1] = 3;   /* [2(n-1), +3) and the next-to-last [2(n-2), +2): overlap */
    cnt[n - 2] = 3;
    V_BAD(b, "braidAllGatherV(blocks overlap)",
          braidAllGatherV(b->in, cnt[r], b->out, cnt, dsp, ncclInt32, comm, cc_stream()),
          "overlap");
}

static void v_bad_reducescatter(v_bad_t *b, ncclComm_t comm)
{
    size_t cnt[CC_MAX_LOCAL], dsp[CC_MAX_LOCAL], rev[CC_MAX_LOCAL];
    int n = b->w->nranks;
    v_good_layout(n, cnt, dsp);
    V_BAD(b, "braidReduceScatterV(sendcounts NULL)",
          braidReduceScatterV(b->in, NULL, dsp, b->out, 1, ncclInt32, ncclSum, comm,
                              cc_stream()), "sendcounts");
    V_BAD(b, "braidReduceScatterV(recvcount 0, sendcounts[rank] 1)",
          braidReduceScatterV(b->in, cnt, dsp, b->out, 0, ncclInt32, ncclSum, comm,
                              cc_stream()), "recvcount 0");
    V_BAD(b, "braidReduceScatterV(op 77)",
          braidReduceScatterV(b->in, cnt, dsp, b->out, 1, ncclInt32, (ncclRedOp_t)77, comm,
                              cc_stream()), "op 77");
    V_BAD(b, "braidReduceScatterV(op -1)",
          braidReduceScatterV(b->in, cnt, dsp, b->out, 1, ncclInt32, (ncclRedOp_t)-1, comm,
                              cc_stream()), "op -1");
    V_BAD(b, "braidReduceScatterV(sendbuff NULL)",
          braidReduceScatterV(NULL, cnt, dsp, b->out, 1, ncclInt32, ncclSum, comm,
                              cc_stream()), "sendbuff");
    dsp[n - 1] = SIZE_MAX / 4;
    V_BAD(b, "braidReduceScatterV(displs SIZE_MAX/4 of int32)",
          braidReduceScatterV(b->in, cnt, dsp, b->out, 1, ncclInt32, ncclSum, comm,
                              cc_stream()), "overflow");
    if (n < 2)
        return;
    for (int p = 0; p < n; p++)   /* blocks in reverse order, two of them at one place */
        rev[p] = 2 * (size_t)(n - 1 - p);
    rev[0] = rev[1];
    V_BAD(b, "braidReduceScatterV(blocks overlap, out of order)",
          braidReduceScatterV(b->in, cnt, rev, b->out, 1, ncclInt32, ncclMax, comm,
                              cc_stream()), "overlap");
}

/* A bad call inside a group fails the group's end too, and runs nothing. */
static void v_bad_group(v_bad_t *b, ncclComm_t comm)
{
    size_t cnt[CC_MAX_LOCAL], dsp[CC_MAX_LOCAL];
    v_good_layout(b->w->nranks, cnt, dsp);
    memset(b->out, V_CANARY, sizeof(b->out));
    CC_NCCL(b->w, "ncclGroupStart", ncclGroupStart());
    ncclResult_t r = braidAllGatherV(b->in, 2, b->out, cnt, dsp, ncclInt32, comm, cc_stream());
    ncclResult_t re = ncclGroupEnd();
    v_expect_bad(b, "braidAllGatherV(sendcount 2) in a group", r, "sendcount 2");
    v_expect_bad(b, "ncclGroupEnd after a bad braidAllGatherV", re, "sendcount 2");
}

/* Every count 0: success and nothing touched, even with NULL buffers. */
static void v_noop(v_bad_t *b, ncclComm_t comm)
{
    size_t zero[CC_MAX_LOCAL] = { 0 }, dsp[CC_MAX_LOCAL] = { 0 };
    cc_case_t c = { "braidAllGatherV/braidReduceScatterV(counts 0, NULL buffers)",
                    v_type(ncclInt32), -1, 0, -1, 0 };
    ncclResult_t r1 = braidAllGatherV(NULL, 0, NULL, zero, dsp, ncclInt32, comm, cc_stream());
    ncclResult_t r2 = braidReduceScatterV(NULL, zero, dsp, NULL, 0, ncclFloat32, ncclAvg, comm,
                                          cc_stream());
    b->checks++;
    if (r1 != ncclSuccess || r2 != ncclSuccess)
        cc_fail(b->w, &c, b->rank, 0, ncclGetLastError(NULL), "ncclSuccess");
}

static long v_bad_args(cc_world_t *w)
{
    long checks = 0;
    for (int l = 0; l < w->nlocal; l++) {
        v_bad_t *b = cc_xmalloc(sizeof(*b));
        memset(b, 0, sizeof(*b));
        b->w = w;
        b->rank = w->ranks[l];
        cc_set_phase("braidAllGatherV/braidReduceScatterV bad arguments");
        v_bad_allgather(b, w->comms[l]);
        v_bad_reducescatter(b, w->comms[l]);
        v_bad_group(b, w->comms[l]);
        v_noop(b, w->comms[l]);
        checks += b->checks;
        free(b);
    }
    return checks;
}

void cc_test_v(cc_world_t *w)
{
    uint32_t salt = 90000;
    long checks = v_bad_args(w);
    long cases = v_cases(w, &salt);
    if (w->ranks[0] == 0)
        printf("coll_check %s: v: %ld bad-argument checks\n", w->mode, checks);
    cc_section_done(w, "v", cases);
}
