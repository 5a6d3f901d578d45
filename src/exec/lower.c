/*
 * The GPU engine's order of a job's slice-steps (lower.h).
 */
#include <stdlib.h>

#include "base/log.h"
#include "exec/lower.h"

int braid_lower_is_p2p(const braid_op_t *op)
{
    return op->hdr.kind == BRAID_COLL_SEND || op->hdr.kind == BRAID_COLL_RECV;
}

static void pos_stage(const braid_op_t *op, braid_lower_pos_t *p, int begin)
{
    const braid_sched_t *s = &op->sched;
    size_t most = 0;
    int end = begin < s->nsteps ? begin + 1 : begin;
    while (end < s->nsteps && !(s->steps[end].flags & BRAID_STEP_STAGE))
        end++;
    for (int i = begin; i < end; i++)
        if (s->steps[i].bytes > most)
            most = s->steps[i].bytes;
    p->stage_begin = begin;
    p->stage_end = end;
    p->step = begin;
    p->iter = 0;
    p->niter = (most + op->slice - 1) / op->slice;
}

/* The op's next slice-step in its own order (exec.c's): 1, or 0 once it has none left. */
static int pos_next(const braid_op_t *op, braid_lower_pos_t *p, int index,
                    braid_lower_item_t *it)
{
    const braid_sched_t *s = &op->sched;
    while (p->stage_begin < s->nsteps) {
        if (p->step == p->stage_end) {
            p->step = p->stage_begin;
            p->iter++;
        }
        if (p->iter >= p->niter) {
            pos_stage(op, p, p->stage_end);
            continue;
        }
        const braid_step_t *st = &s->steps[p->step++];
        size_t off = p->iter * op->slice;
        if (off >= st->bytes)
            continue;
        it->op = index;
        it->step = (int)(st - s->steps);
        it->off = off;
        it->len = st->bytes - off < op->slice ? st->bytes - off : op->slice;
        return 1;
    }
    return 0;
}

braid_status_t braid_lower_begin(braid_lower_t *l, braid_op_t *const *ops, int nops,
                                 braid_lower_pos_t *pos)
{
    int p2p = 0;
    *l = (braid_lower_t){ .ops = ops, .nops = nops, .pos = pos };
    for (int i = 0; i < nops; i++) {
        pos_stage(ops[i], &pos[i], 0);
        p2p += braid_lower_is_p2p(ops[i]);
    }
    if (p2p > 1) {   /* round 0 is "never": rounds count from 1 */
        l->served = calloc(2 * (size_t)ops[0]->nranks, sizeof(*l->served));
        if (l->served == NULL)
            return braid_err(BRAID_ERR_NOMEM, "out of memory ordering a group of %d calls",
                             nops);
    }
    l->round = 1;
    return BRAID_OK;
}

void braid_lower_end(braid_lower_t *l)
{
    free(l->served);
    l->served = NULL;
}

/* Phase 0: the collectives in call order, each whole. */
static int next_coll(braid_lower_t *l, braid_lower_item_t *it)
{
    for (; l->cur < l->nops; l->cur++)
        if (!braid_lower_is_p2p(l->ops[l->cur]) &&
            pos_next(l->ops[l->cur], &l->pos[l->cur], l->cur, it))
            return 1;
    return 0;
}

/* The peer of a send or receive, and whether it is one of `kind`. */
static int p2p_peer(const braid_op_t *op, int kind)
{
    if (op->hdr.kind != kind || op->sched.nsteps == 0)
        return -1;
    const braid_step_t *st = &op->sched.steps[0];
    return kind == BRAID_COLL_SEND ? st->send_peer : st->recv_peer;
}

/* Phases 1 and 2 of a round: the next slice-step of the first send (receive) with one
 * left, to (from) each peer not served yet this round. */
static int next_p2p(braid_lower_t *l, int kind, braid_lower_item_t *it)
{
    uint32_t *served = l->served == NULL ? NULL
                       : l->served + (kind == BRAID_COLL_SEND ? 0 : l->ops[0]->nranks);
    for (; l->cur < l->nops; l->cur++) {
        int peer = p2p_peer(l->ops[l->cur], kind);
        if (peer < 0 || (served != NULL && served[peer] == l->round))
            continue;
        if (pos_next(l->ops[l->cur], &l->pos[l->cur], l->cur, it)) {
            if (served != NULL)
                served[peer] = l->round;
            l->moved = 1;
            l->cur++;
            return 1;
        }
    }
    return 0;
}

int braid_lower_next(braid_lower_t *l, braid_lower_item_t *it)
{
    for (;;) {
        if (l->phase == 0 && next_coll(l, it))
            return 1;
        if (l->phase == 1 && next_p2p(l, BRAID_COLL_SEND, it))
            return 1;
        if (l->phase == 2 && next_p2p(l, BRAID_COLL_RECV, it))
            return 1;
        if (l->phase == 3)
            return 0;
        l->cur = 0;
        if (l->phase < 2) {
            l->phase++;
        } else if (l->moved) {   /* the next round */
            l->phase = 1;
            l->moved = 0;
            l->round++;
        } else {
            l->phase = 3;
        }
    }
}
