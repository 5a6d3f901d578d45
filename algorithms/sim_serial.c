/*
 * The simulator's serial stream mode (sim.h): every rank runs its job's slice-steps one
 * after another in the GPU engine's order (src/exec/lower.h), over FIFOs that hold only
 * each message's length and header.
 *
 *   rank a stream: [s0][s1][s2]...   a slice-step goes when its receive has a message and
 *   rank b stream: [s0][s1]...       its send has a free slot, else it holds back the rest
 *
 * One thread drives the ranks in turn, each as far as it can go; a pass in which none goes
 * while some are not done is a deadlock. The result depends on nothing but the calls.
 */
#include <stdlib.h>
#include <string.h>

#include "algorithms/sim.h"

typedef struct ser_fifo {
    size_t *len;                /* [nslots] the messages' lengths */
    braid_msg_hdr_t *hdr;       /* [nslots] their senders' headers */
    uint64_t head, tail;        /* next to receive, next to send */
} ser_fifo_t;

/* What the order gave one op so far. */
typedef struct ser_given {
    size_t *first;              /* [nsteps + 1] the index of each step's first slice-step */
    unsigned char *seen;        /* [first[nsteps]] the slice-steps given */
    size_t count;
} ser_given_t;

/* One rank's stream: its ops in call order and where its order stands. */
typedef struct ser_rank {
    braid_op_t **ops;
    int *call;                  /* [nops] the index of each op's call */
    int nops;
    void *iter;
    braid_lower_item_t it;      /* the next slice-step, while `have` */
    int have;
} ser_rank_t;

typedef struct ser_world {
    int n, nslots;
    const braid_sim_order_t *order;
    const braid_sim_call_t *calls;
    braid_op_t *ops;            /* [ncalls] */
    ser_given_t *given;         /* [ncalls] */
    int ncalls;
    ser_fifo_t *fifos;          /* [from * n + to] */
    ser_rank_t *ranks;          /* [n] */
    braid_sim_result_t *res;
} ser_world_t;

/* Fail the run for `rank` (-1: several) with `st`; returns 1 for the caller to return. */
static int ser_fail(ser_world_t *w, int rank, braid_status_t st)
{
    w->res->st = st;
    w->res->rank = rank;
    return 1;
}

typedef struct lower_iter {
    braid_lower_t l;
    braid_lower_pos_t pos[];
} lower_iter_t;

static void *lower_iter_begin(braid_op_t *const *ops, int nops)
{
    lower_iter_t *li = malloc(sizeof(*li) + (size_t)nops * sizeof(li->pos[0]));
    if (li != NULL && braid_lower_begin(&li->l, ops, nops, li->pos) < 0) {
        free(li);
        li = NULL;
    }
    return li;
}

static int lower_iter_next(void *iter, braid_lower_item_t *it)
{
    return braid_lower_next(&((lower_iter_t *)iter)->l, it);
}

static void lower_iter_end(void *iter)
{
    braid_lower_end(&((lower_iter_t *)iter)->l);
    free(iter);
}

const braid_sim_order_t braid_sim_order_lower = {
    .name = "lower",
    .begin = lower_iter_begin,
    .next = lower_iter_next,
    .end = lower_iter_end,
};

/* The schedule and headers of one call's op. */
static braid_status_t ser_op_build(const ser_world_t *w, const braid_sim_call_t *c,
                                   braid_op_t *op)
{
    if (c->sched != NULL)
        BRAID_CHECK(braid_sched_copy(c->sched, &op->sched));
    else
        BRAID_CHECK(braid_algo_build(&c->coll, &op->sched, NULL));
    for (int i = 0; i < op->sched.nsteps; i++) {
        const braid_step_t *st = &op->sched.steps[i];
        if (st->pull_peer >= 0 || st->recv_peer >= w->n || st->send_peer >= w->n)
            return braid_err(BRAID_ERR_UNSUPPORTED, "step %d of rank %d's %s %s", i, c->rank,
                             braid_coll_name(c->coll.kind), st->pull_peer >= 0
                                 ? "pulls: the serial path has none"
                                 : "names a peer outside the ranks");
    }
    op->dtype = c->coll.dtype;
    op->hdr = c->hdr;
    op->hdr.kind = (uint8_t)c->coll.kind;     /* what places the op in the order */
    op->expect = c->expect;
    op->rank = c->rank;
    op->nranks = w->n;
    return BRAID_OK;
}

/* The op's slice: the slot, as the engine sets it (src/core/proxy.c), if whole elements. */
static int ser_op_slice(ser_world_t *w, int call, braid_op_t *op, size_t slot_size)
{
    op->slice = slot_size;
    if (slot_size % op->sched.align == 0)
        return 0;
    braid_sim_msg(w->res, "call %d: slots of %zu bytes would cut elements of %zu bytes",
            call, slot_size, op->sched.align);
    return ser_fail(w, op->rank, BRAID_ERR_INVALID);
}

/* The op's table of slice-steps: each step cut into the op's slices. */
static int ser_given_init(const braid_op_t *op, ser_given_t *g)
{
    const braid_sched_t *s = &op->sched;
    g->first = malloc(((size_t)s->nsteps + 1) * sizeof(*g->first));
    if (g->first == NULL)
        return -1;
    g->first[0] = 0;
    for (int i = 0; i < s->nsteps; i++)
        g->first[i + 1] = g->first[i] + (s->steps[i].bytes + op->slice - 1) / op->slice;
    g->seen = calloc(g->first[s->nsteps] + 1, 1);
    return g->seen == NULL ? -1 : 0;
}

/* Build every call's op and give each rank its ops in call order. */
static int ser_ops_build(ser_world_t *w, size_t slot_size)
{
    for (int i = 0; i < w->ncalls; i++) {
        const braid_sim_call_t *c = &w->calls[i];
        braid_op_t *op = &w->ops[i];
        braid_sched_init(&op->sched, 1);
        if (c->rank < 0 || c->rank >= w->n) {
            braid_sim_msg(w->res, "call %d names rank %d of %d", i, c->rank, w->n);
            return ser_fail(w, c->rank, BRAID_ERR_INVALID);
        }
        braid_status_t st = ser_op_build(w, c, op);
        if (st < 0) {
            braid_sim_msg(w->res, "rank %d could not build call %d: %s", c->rank, i,
                    braid_err_last());
            return ser_fail(w, c->rank, st);
        }
        if (ser_op_slice(w, i, op, slot_size) != 0)
            return 1;
        if (ser_given_init(op, &w->given[i]) != 0) {
            braid_sim_msg(w->res, "out of memory building call %d", i);
            return ser_fail(w, c->rank, BRAID_ERR_NOMEM);
        }
        ser_rank_t *rk = &w->ranks[c->rank];
        rk->call[rk->nops] = i;
        rk->ops[rk->nops++] = op;
    }
    return 0;
}

static int ser_alloc(ser_world_t *w)
{
    size_t nn = (size_t)w->n * (size_t)w->n, nc = (size_t)w->ncalls;
    w->ops = calloc(nc ? nc : 1, sizeof(*w->ops));
    w->given = calloc(nc ? nc : 1, sizeof(*w->given));
    w->fifos = calloc(nn, sizeof(*w->fifos));
    w->ranks = calloc((size_t)w->n, sizeof(*w->ranks));
    if (w->ops == NULL || w->given == NULL || w->fifos == NULL || w->ranks == NULL)
        return -1;
    for (size_t i = 0; i < nn; i++) {
        w->fifos[i].len = calloc((size_t)w->nslots, sizeof(size_t));
        w->fifos[i].hdr = calloc((size_t)w->nslots, sizeof(braid_msg_hdr_t));
        if (w->fifos[i].len == NULL || w->fifos[i].hdr == NULL)
            return -1;
    }
    for (int r = 0; r < w->n; r++) {
        ser_rank_t *rk = &w->ranks[r];
        rk->ops = calloc(nc ? nc : 1, sizeof(*rk->ops));
        rk->call = calloc(nc ? nc : 1, sizeof(*rk->call));
        if (rk->ops == NULL || rk->call == NULL)
            return -1;
    }
    return 0;
}

static void ser_free(ser_world_t *w)
{
    for (int r = 0; w->ranks != NULL && r < w->n; r++) {
        ser_rank_t *rk = &w->ranks[r];
        if (rk->iter != NULL)
            w->order->end(rk->iter);
        free(rk->ops);
        free(rk->call);
    }
    for (size_t i = 0; w->fifos != NULL && i < (size_t)w->n * (size_t)w->n; i++) {
        free(w->fifos[i].len);
        free(w->fifos[i].hdr);
    }
    for (int i = 0; w->ops != NULL && i < w->ncalls; i++)
        braid_sched_free(&w->ops[i].sched);
    for (int i = 0; w->given != NULL && i < w->ncalls; i++) {
        free(w->given[i].first);
        free(w->given[i].seen);
    }
    free(w->ops);
    free(w->given);
    free(w->fifos);
    free(w->ranks);
}

/* Whether the item is a whole slice of a step of the rank's job, given for the first time;
 * if so it is marked given. */
static int ser_item_new(ser_world_t *w, const ser_rank_t *rk, const braid_lower_item_t *it)
{
    if (it->op < 0 || it->op >= rk->nops)
        return 0;
    const braid_op_t *op = rk->ops[it->op];
    ser_given_t *g = &w->given[rk->call[it->op]];
    if (it->step < 0 || it->step >= op->sched.nsteps || it->off % op->slice != 0)
        return 0;
    size_t bytes = op->sched.steps[it->step].bytes;
    size_t left = bytes > it->off ? bytes - it->off : 0;
    size_t k = g->first[it->step] + it->off / op->slice;
    if (left == 0 || it->len != (left < op->slice ? left : op->slice) || g->seen[k])
        return 0;
    g->seen[k] = 1;
    g->count++;
    return 1;
}

/* The rank's next slice-step from its order: 0, or 1 (failed) where it is not a new whole
 * slice of a step. */
static int ser_fetch(ser_world_t *w, int r)
{
    ser_rank_t *rk = &w->ranks[r];
    braid_lower_item_t *it = &rk->it;
    rk->have = w->order->next(rk->iter, it);
    if (!rk->have || ser_item_new(w, rk, it))
        return 0;
    braid_sim_msg(w->res, "order %s gave rank %d a slice-step that is not a slice of its job, "
            "or again: op %d step %d bytes [%zu, +%zu)", w->order->name, r, it->op,
            it->step, it->off, it->len);
    return ser_fail(w, r, BRAID_ERR_INTERNAL);
}

/* Once a rank's order is done: it gave each op all of its slice-steps. */
static int ser_check_given(ser_world_t *w, int r)
{
    ser_rank_t *rk = &w->ranks[r];
    for (int i = 0; i < rk->nops; i++) {
        const ser_given_t *g = &w->given[rk->call[i]];
        size_t all = g->first[rk->ops[i]->sched.nsteps];
        if (g->count == all)
            continue;
        braid_sim_msg(w->res, "order %s gave rank %d's op %d (call %d) %zu slice-steps of "
                "%zu", w->order->name, r, i, rk->call[i], g->count, all);
        return ser_fail(w, r, BRAID_ERR_INTERNAL);
    }
    return 0;
}

static int hdr_same(const braid_msg_hdr_t *a, const braid_msg_hdr_t *b)
{
    return a->seq == b->seq && a->count == b->count && a->kind == b->kind &&
           a->dtype == b->dtype && a->op == b->op && a->root == b->root && a->algo == b->algo;
}

/* The received message is not the one this slice-step expects: say whose is which. */
static int ser_mismatch(ser_world_t *w, int r, int from, size_t got, const braid_msg_hdr_t *h)
{
    const ser_rank_t *rk = &w->ranks[r];
    const braid_op_t *op = rk->ops[rk->it.op];
    braid_sim_msg(w->res, "message %llu from rank %d to rank %d: %zu bytes of %s seq %llu "
            "where rank %d's call %d (%s seq %llu) step %d slice [%zu, +%zu) expects %zu "
            "bytes",
            (unsigned long long)w->fifos[from * w->n + r].head, from, r, got,
            braid_coll_name((braid_coll_kind_t)h->kind), (unsigned long long)h->seq, r,
            rk->call[rk->it.op], braid_coll_name(w->calls[rk->call[rk->it.op]].coll.kind),
            (unsigned long long)op->expect.seq, rk->it.step, rk->it.off, rk->it.len,
            rk->it.len);
    return ser_fail(w, r, BRAID_ERR_INTERNAL);
}

/* Run rank r's next slice-step if it can go: 1 if it went, 0 if it waits, -1 on an error. */
static int ser_go(ser_world_t *w, int r)
{
    ser_rank_t *rk = &w->ranks[r];
    const braid_op_t *op = rk->ops[rk->it.op];
    const braid_step_t *st = &op->sched.steps[rk->it.step];
    ser_fifo_t *in = st->recv_peer >= 0 ? &w->fifos[st->recv_peer * w->n + r] : NULL;
    ser_fifo_t *out = st->send_peer >= 0 ? &w->fifos[r * w->n + st->send_peer] : NULL;
    if ((in != NULL && in->head == in->tail) ||
        (out != NULL && out->tail - out->head == (uint64_t)w->nslots))
        return 0;
    if (in != NULL) {
        size_t i = (size_t)(in->head % (uint64_t)w->nslots);
        if (in->len[i] != rk->it.len || !hdr_same(&in->hdr[i], &op->expect))
            return -ser_mismatch(w, r, st->recv_peer, in->len[i], &in->hdr[i]);
        in->head++;
    }
    if (out != NULL) {
        size_t i = (size_t)(out->tail % (uint64_t)w->nslots);
        out->len[i] = rk->it.len;
        out->hdr[i] = w->calls[rk->call[rk->it.op]].hdr;
        out->tail++;
    }
    return 1;
}

/* Rank r's stream as far as it goes: 1 if it moved, 0 if not, -1 on an error. */
static int ser_rank_run(ser_world_t *w, int r)
{
    ser_rank_t *rk = &w->ranks[r];
    int moved = 0;
    while (rk->have) {
        int rc = ser_go(w, r);
        if (rc <= 0)
            return rc < 0 ? -1 : moved;
        moved = 1;
        if (ser_fetch(w, r) != 0)
            return -1;
        if (!rk->have && ser_check_given(w, r) != 0)
            return -1;
    }
    return moved;
}

/* Every stuck rank: its call, step, slice and what it waits for. */
static void ser_report_stuck(ser_world_t *w)
{
    braid_sim_msg(w->res, "deadlock: no rank can go; stuck:");
    for (int r = 0; r < w->n; r++) {
        const ser_rank_t *rk = &w->ranks[r];
        if (!rk->have)
            continue;
        const braid_op_t *op = rk->ops[rk->it.op];
        const braid_step_t *st = &op->sched.steps[rk->it.step];
        const ser_fifo_t *in = st->recv_peer >= 0 ? &w->fifos[st->recv_peer * w->n + r] : NULL;
        const ser_fifo_t *out = st->send_peer >= 0 ? &w->fifos[r * w->n + st->send_peer] : NULL;
        int in_wait = in != NULL && in->head == in->tail;
        int out_wait = out != NULL && out->tail - out->head == (uint64_t)w->nslots;
        int call = rk->call[rk->it.op];
        braid_sim_msg(w->res, " [rank %d call %d (%s, op %d of %d) step %d/%d slice "
                "[%zu, +%zu):", r, call, braid_coll_name(w->calls[call].coll.kind),
                rk->it.op, rk->nops, rk->it.step, op->sched.nsteps, rk->it.off, rk->it.len);
        if (in_wait)
            braid_sim_msg(w->res, " waits for a message from %d", (int)st->recv_peer);
        if (out_wait)
            braid_sim_msg(w->res, "%s waits for a free slot to %d", in_wait ? " and" : "",
                    (int)st->send_peer);
        braid_sim_msg(w->res, "]");
    }
}

/* Drive the streams until all are done, one fails, or a pass moves none. */
static int ser_drive(ser_world_t *w)
{
    for (;;) {
        int pending = 0, moved = 0;
        for (int r = 0; r < w->n; r++) {
            int rc = ser_rank_run(w, r);
            if (rc < 0)
                return 1;
            moved |= rc;
            pending += w->ranks[r].have;
        }
        if (!pending)
            return 0;
        if (!moved) {
            w->res->deadlock = 1;
            ser_report_stuck(w);
            return ser_fail(w, -1, BRAID_ERR_TIMEOUT);
        }
    }
}

/* After the streams are done every message sent must have been received. */
static int ser_check_drained(ser_world_t *w)
{
    int bad = 0;
    for (int i = 0; i < w->n * w->n; i++) {
        const ser_fifo_t *f = &w->fifos[i];
        if (f->head == f->tail)
            continue;
        braid_sim_msg(w->res, "fifo %d->%d left with %llu unreceived messages; ", i / w->n,
                i % w->n, (unsigned long long)(f->tail - f->head));
        bad = 1;
    }
    return bad ? ser_fail(w, -1, BRAID_ERR_INTERNAL) : 0;
}

/* Start every rank's order and fetch its first slice-step. */
static int ser_begin(ser_world_t *w)
{
    for (int r = 0; r < w->n; r++) {
        ser_rank_t *rk = &w->ranks[r];
        rk->iter = w->order->begin(rk->ops, rk->nops);
        if (rk->iter == NULL) {
            braid_sim_msg(w->res, "out of memory starting rank %d's order", r);
            return ser_fail(w, r, BRAID_ERR_NOMEM);
        }
        if (ser_fetch(w, r) != 0 || (!rk->have && ser_check_given(w, r) != 0))
            return 1;
    }
    return 0;
}

int braid_sim_serial_run(const braid_sim_cfg_t *cfg, int nranks, const braid_sim_call_t *calls,
                         int ncalls, braid_sim_result_t *res)
{
    ser_world_t w = { .n = nranks, .nslots = cfg->nslots, .calls = calls, .ncalls = ncalls,
                      .order = cfg->order != NULL ? cfg->order : &braid_sim_order_lower,
                      .res = res };
    int rc = 1;
    memset(res, 0, sizeof(*res));
    res->rank = -1;
    if (nranks < 1 || cfg->nslots < 1 || cfg->slot_size == 0) {
        braid_sim_msg(res, "serial run of %d ranks, %d slots of %zu bytes: nothing to run "
                "on", nranks, cfg->nslots, cfg->slot_size);
        res->st = BRAID_ERR_INVALID;
        return 1;
    }
    if (ser_alloc(&w) != 0) {
        braid_sim_msg(res, "out of memory setting up %d ranks", nranks);
        res->st = BRAID_ERR_NOMEM;
    } else if (ser_ops_build(&w, cfg->slot_size) == 0 && ser_begin(&w) == 0 &&
               ser_drive(&w) == 0) {
        rc = ser_check_drained(&w);
    }
    ser_free(&w);
    return rc;
}
