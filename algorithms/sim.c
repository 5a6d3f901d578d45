/*
 * One-process schedule simulator: in-memory FIFOs behind braid_conn_ops_t, and a
 * round-robin driver over the real executor. See sim.h.
 *
 *   rank a  --send_slot/commit-->  [slot 0][slot 1]..[slot K-1]  --recv_slot/release-->  rank b
 *                                  FIFO (a, b): tail = next to fill, head = next to read
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/sim.h"

typedef struct sim_world sim_world_t;

typedef struct sim_fifo {
    int from, to, nslots;
    size_t slot_size;
    unsigned char *data;            /* nslots * slot_size */
    size_t *len;
    braid_msg_hdr_t *hdr;
    uint64_t head, tail;
    int send_held, recv_held;
} sim_fifo_t;

typedef struct sim_conn {
    braid_conn_t base;              /* first: the executor sees a braid_conn_t */
    sim_fifo_t *fifo;
    int is_send;
    sim_world_t *world;
} sim_conn_t;

struct sim_world {
    int n;
    braid_sim_cfg_t cfg;
    sim_fifo_t **fifos;             /* [from * n + to], made on first use */
    braid_conn_t **send_conns;      /* [rank * n + peer] */
    braid_conn_t **recv_conns;
    char misuse[512];               /* first protocol misuse seen */
};

#define SIM_POISON 0xa5

static braid_status_t sim_misuse(sim_conn_t *c, const char *what)
{
    sim_world_t *w = c->world;
    if (w->misuse[0] == '\0')
        snprintf(w->misuse, sizeof(w->misuse), "transport misuse on fifo %d->%d: %s",
                 c->fifo->from, c->fifo->to, what);
    return braid_err(BRAID_ERR_INTERNAL, "simulated transport: %s", w->misuse);
}

static braid_status_t sim_send_slot(braid_conn_t *bc, size_t len, void **ptr_p, size_t *cap_p)
{
    (void)len;
    sim_conn_t *c = (sim_conn_t *)bc;
    sim_fifo_t *f = c->fifo;
    if (!c->is_send)
        return sim_misuse(c, "send_slot on the receiving end");
    if (f->tail - f->head == (uint64_t)f->nslots)
        return BRAID_INPROGRESS;
    f->send_held = 1;
    *ptr_p = f->data + (f->tail % (uint64_t)f->nslots) * f->slot_size;
    *cap_p = f->slot_size;
    return BRAID_OK;
}

static braid_status_t sim_send_commit(braid_conn_t *bc, size_t len, const braid_msg_hdr_t *hdr)
{
    sim_conn_t *c = (sim_conn_t *)bc;
    sim_fifo_t *f = c->fifo;
    if (!c->is_send)
        return sim_misuse(c, "send_commit on the receiving end");
    if (!f->send_held)
        return sim_misuse(c, "send_commit without a slot from send_slot");
    if (len == 0 || len > f->slot_size)
        return sim_misuse(c, "send_commit of a length that is 0 or over the slot size");
    size_t i = (size_t)(f->tail % (uint64_t)f->nslots);
    f->len[i] = len;
    f->hdr[i] = *hdr;
    f->tail++;
    f->send_held = 0;
    return BRAID_OK;
}

static braid_status_t sim_recv_slot(braid_conn_t *bc, const void **ptr_p, size_t *len_p,
                                    braid_msg_hdr_t *hdr_p)
{
    sim_conn_t *c = (sim_conn_t *)bc;
    sim_fifo_t *f = c->fifo;
    if (c->is_send)
        return sim_misuse(c, "recv_slot on the sending end");
    if (f->head == f->tail)
        return BRAID_INPROGRESS;
    size_t i = (size_t)(f->head % (uint64_t)f->nslots);
    f->recv_held = 1;
    *ptr_p = f->data + i * f->slot_size;
    *len_p = f->len[i];
    *hdr_p = f->hdr[i];
    return BRAID_OK;
}

static braid_status_t sim_recv_release(braid_conn_t *bc)
{
    sim_conn_t *c = (sim_conn_t *)bc;
    sim_fifo_t *f = c->fifo;
    if (c->is_send)
        return sim_misuse(c, "recv_release on the sending end");
    if (!f->recv_held)
        return sim_misuse(c, "recv_release without a slot from recv_slot");
    /* Poison what was read, so that a stale read of a released slot shows in the data. */
    size_t i = (size_t)(f->head % (uint64_t)f->nslots);
    memset(f->data + i * f->slot_size, SIM_POISON, f->slot_size);
    f->head++;
    f->recv_held = 0;
    return BRAID_OK;
}

static void sim_close(braid_conn_t *bc)
{
    free(bc);
}

static const braid_conn_ops_t sim_ops = {
    .name = "sim",
    .send_slot = sim_send_slot,
    .send_commit = sim_send_commit,
    .recv_slot = sim_recv_slot,
    .recv_release = sim_recv_release,
    .close = sim_close,
};

static sim_fifo_t *sim_fifo_get(sim_world_t *w, int from, int to)
{
    sim_fifo_t **fp = &w->fifos[from * w->n + to];
    if (*fp != NULL)
        return *fp;
    sim_fifo_t *f = calloc(1, sizeof(*f));
    f->from = from;
    f->to = to;
    f->nslots = w->cfg.nslots;
    f->slot_size = w->cfg.slot_size;
    f->data = malloc((size_t)f->nslots * f->slot_size);
    f->len = calloc((size_t)f->nslots, sizeof(*f->len));
    f->hdr = calloc((size_t)f->nslots, sizeof(*f->hdr));
    memset(f->data, SIM_POISON, (size_t)f->nslots * f->slot_size);
    *fp = f;
    return f;
}

static braid_conn_t *sim_conn_new(sim_world_t *w, int from, int to, int is_send)
{
    sim_conn_t *c = calloc(1, sizeof(*c));
    c->base.ops = &sim_ops;
    c->base.peer = is_send ? to : from;
    c->base.slot_size = w->cfg.slot_size;
    c->fifo = sim_fifo_get(w, from, to);
    c->is_send = is_send;
    c->world = w;
    return &c->base;
}

/* Connect the pairs a schedule uses (rank -> send_peer, recv_peer -> rank). */
static void sim_connect(sim_world_t *w, int rank, const braid_sched_t *s)
{
    int n = w->n;
    for (int i = 0; i < s->nsteps; i++) {
        int sp = s->steps[i].send_peer, rp = s->steps[i].recv_peer;
        if (sp >= 0 && w->send_conns[rank * n + sp] == NULL)
            w->send_conns[rank * n + sp] = sim_conn_new(w, rank, sp, 1);
        if (rp >= 0 && w->recv_conns[rank * n + rp] == NULL)
            w->recv_conns[rank * n + rp] = sim_conn_new(w, rp, rank, 0);
    }
}

static void sim_world_free(sim_world_t *w)
{
    int nn = w->n * w->n;
    for (int i = 0; i < nn; i++) {
        braid_conn_close(w->send_conns[i]);
        braid_conn_close(w->recv_conns[i]);
        if (w->fifos[i] != NULL) {
            free(w->fifos[i]->data);
            free(w->fifos[i]->len);
            free(w->fifos[i]->hdr);
            free(w->fifos[i]);
        }
    }
    free(w->fifos);
    free(w->send_conns);
    free(w->recv_conns);
}

void braid_sim_msg(braid_sim_result_t *res, const char *fmt, ...)
{
    size_t used = strlen(res->msg);
    va_list ap;
    va_start(ap, fmt);
    if (used < sizeof(res->msg))
        vsnprintf(res->msg + used, sizeof(res->msg) - used, fmt, ap);
    va_end(ap);
}

/* Build the op of one call (schedule, buffers, connections) and start it. */
static braid_status_t sim_op_start(sim_world_t *w, braid_sim_call_t *c, braid_op_t *op)
{
    size_t es = braid_dtype_size(c->coll.dtype);
    memset(op, 0, sizeof(*op));
    if (c->sched != NULL)
        BRAID_CHECK(braid_sched_copy(c->sched, &op->sched));
    else
        BRAID_CHECK(braid_algo_build(&c->coll, &op->sched, NULL));
    sim_connect(w, c->rank, &op->sched);
    op->bufs[BRAID_BUF_SEND] = c->sendbuf;
    op->bufs[BRAID_BUF_RECV] = c->recvbuf;
    op->dtype = c->coll.dtype;
    op->redop = c->redop;
    op->hdr = c->hdr;
    op->expect = c->expect;
    op->rank = c->rank;
    op->nranks = w->n;
    op->send_conns = &w->send_conns[c->rank * w->n];
    op->recv_conns = &w->recv_conns[c->rank * w->n];
    op->slice = w->cfg.slot_size - w->cfg.slot_size % (es ? es : 1);
    op->pull_cma = w->cfg.cma;
    return braid_op_start(op);
}

static void sim_report_stuck(braid_op_t *ops, braid_sim_call_t *calls, int ncalls, braid_sim_result_t *res)
{
    braid_sim_msg(res, "deadlock: no rank can move; stuck:");
    for (int i = 0; i < ncalls; i++) {
        const braid_op_t *op = &ops[i];
        if (op->done)
            continue;
        const braid_step_t *st = &op->sched.steps[op->step];
        braid_sim_msg(res, " [rank %d %s step %d/%d slice %zu: recv from %d, send to %d, "
                "pull from %d]", calls[i].rank, braid_coll_name(calls[i].coll.kind),
                op->step, op->sched.nsteps, op->iter, (int)st->recv_peer,
                (int)st->send_peer, (int)st->pull_peer);
    }
}

/* What a returned call's buffers held: put back when the run ends. */
typedef struct sim_saved {
    unsigned char *send, *recv;
} sim_saved_t;

#define SIM_RETURNED 0x3c

static void sim_returned(const braid_sim_call_t *c, sim_saved_t *sv)
{
    if (c->send_bytes && c->sendbuf != NULL && (sv->send = malloc(c->send_bytes)) != NULL)
        memcpy(sv->send, c->sendbuf, c->send_bytes);
    if (c->recv_bytes && c->recvbuf != NULL && (sv->recv = malloc(c->recv_bytes)) != NULL)
        memcpy(sv->recv, c->recvbuf, c->recv_bytes);
    if (sv->send != NULL)
        memset(c->sendbuf, SIM_RETURNED, c->send_bytes);
    if (sv->recv != NULL)
        memset(c->recvbuf, SIM_RETURNED, c->recv_bytes);
}

/* In place the buffers overlap: the receive side holds the result, so it goes back last. */
static void sim_restore(const braid_sim_call_t *calls, sim_saved_t *saved, int ncalls)
{
    for (int i = 0; i < ncalls; i++) {
        if (saved[i].send != NULL)
            memcpy(calls[i].sendbuf, saved[i].send, calls[i].send_bytes);
        if (saved[i].recv != NULL)
            memcpy(calls[i].recvbuf, saved[i].recv, calls[i].recv_bytes);
        free(saved[i].send);
        free(saved[i].recv);
    }
}

/* Round-robin until every op is done, one fails, or a whole round moves nothing. */
static int sim_drive_loop(sim_world_t *w, braid_op_t *ops, braid_sim_call_t *calls, int ncalls,
                          sim_saved_t *saved, braid_sim_result_t *res)
{
    for (;;) {
        int pending = 0, moved = 0;
        for (int i = 0; i < ncalls; i++) {
            braid_op_t *op = &ops[i];
            if (op->done)
                continue;
            uint64_t before = op->slices_done;
            braid_status_t st = braid_op_progress(op);
            if (st < 0) {
                res->st = st;
                res->rank = calls[i].rank;
                braid_sim_msg(res, "rank %d failed at step %d: %s%s%s", calls[i].rank,
                        op->step, braid_err_last(), w->misuse[0] ? "; " : "", w->misuse);
                return 1;
            }
            if (op->done)
                sim_returned(&calls[i], &saved[i]);
            moved |= op->done || op->slices_done != before;
            pending += !op->done;
        }
        if (!pending)
            return 0;
        if (!moved) {
            res->deadlock = 1;
            res->st = BRAID_ERR_TIMEOUT;
            sim_report_stuck(ops, calls, ncalls, res);
            return 1;
        }
    }
}

/* The checking loop, with returned calls' buffers poisoned until the end. */
static int sim_drive(sim_world_t *w, braid_op_t *ops, braid_sim_call_t *calls, int ncalls,
                     braid_sim_result_t *res)
{
    sim_saved_t *saved = calloc((size_t)ncalls, sizeof(*saved));
    int rc = sim_drive_loop(w, ops, calls, ncalls, saved, res);
    sim_restore(calls, saved, ncalls);
    free(saved);
    return rc;
}
/* The library's own loop (src/exec/exec.c), as a group of one process would run. */
static int sim_exec_run(braid_op_t *ops, int ncalls, braid_sim_result_t *res)
{
    braid_op_t **list = malloc(((size_t)ncalls + 1) * sizeof(*list));
    for (int i = 0; i < ncalls; i++)
        list[i] = &ops[i];
    res->st = braid_exec_run(list, ncalls);
    free(list);
    if (res->st != BRAID_OK)
        braid_sim_msg(res, "braid_exec_run failed: %s", braid_err_last());
    return res->st != BRAID_OK;
}

/* The root tokens owed on fifo f (src/exec/exec.c): its first messages, if they all came. */
static uint64_t sim_tokens_owed(sim_world_t *w, const sim_fifo_t *f)
{
    const braid_conn_t *rc = w->recv_conns[f->to * w->n + f->from];
    uint64_t owed = rc != NULL ? rc->tokens_owed : 0;
    if (owed > f->tail - f->head)
        return 0;
    for (uint64_t m = f->head; m < f->head + owed; m++)
        if (f->len[m % (uint64_t)f->nslots] != BRAID_TOKEN_BYTES)
            return 0;
    return owed;
}

/* After a clean run every FIFO must be empty but for owed root tokens, and no slot held. */
static int sim_check_drained(sim_world_t *w, braid_sim_result_t *res)
{
    int bad = 0;
    for (int i = 0; i < w->n * w->n; i++) {
        sim_fifo_t *f = w->fifos[i];
        if (f == NULL ||
            (f->tail - f->head == sim_tokens_owed(w, f) && !f->send_held && !f->recv_held))
            continue;
        braid_sim_msg(res, "fifo %d->%d left with %llu unreceived messages%s%s; ", f->from,
                f->to, (unsigned long long)(f->tail - f->head),
                f->send_held ? ", a send slot held" : "",
                f->recv_held ? ", a receive slot held" : "");
        bad = 1;
    }
    if (bad)
        res->st = BRAID_ERR_INTERNAL;
    return bad;
}

int braid_sim_run(const braid_sim_cfg_t *cfg, int nranks, braid_sim_call_t *calls, int ncalls, braid_sim_result_t *res)
{
    if (cfg->serial)
        return braid_sim_serial_run(cfg, nranks, calls, ncalls, res);
    sim_world_t w = { .n = nranks, .cfg = *cfg };
    size_t nn = (size_t)nranks * (size_t)nranks;
    braid_op_t *ops = calloc((size_t)ncalls ? (size_t)ncalls : 1, sizeof(*ops));
    int rc = 1, started = 0;

    memset(res, 0, sizeof(*res));
    res->rank = -1;
    w.fifos = calloc(nn, sizeof(*w.fifos));
    w.send_conns = calloc(nn, sizeof(*w.send_conns));
    w.recv_conns = calloc(nn, sizeof(*w.recv_conns));
    for (; started < ncalls; started++) {
        braid_status_t st = sim_op_start(&w, &calls[started], &ops[started]);
        if (st < 0) {
            res->st = st;
            res->rank = calls[started].rank;
            braid_sim_msg(res, "rank %d could not start: %s", calls[started].rank,
                    braid_err_last());
            braid_sched_free(&ops[started].sched);
            goto out;
        }
    }
    rc = cfg->exec_run ? sim_exec_run(ops, ncalls, res) : sim_drive(&w, ops, calls, ncalls, res);
    if (rc == 0)
        rc = sim_check_drained(&w, res);
out:
    for (int i = 0; i < started; i++)
        braid_op_finish(&ops[i]);
    sim_world_free(&w);
    free(ops);
    return rc;
}
