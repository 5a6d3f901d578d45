/*
 * The GPU engine's order of a job's slice-steps (lower.h).
 */
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

void braid_lower_begin(braid_lower_t *l, braid_op_t *const *ops, int nops,
                       braid_lower_pos_t *pos)
{
    l->ops = ops;
    l->nops = nops;
    l->phase = 0;
    l->cur = 0;
    l->moved = 0;
    l->pos = pos;
    for (int i = 0; i < nops; i++)
        pos_stage(ops[i], &pos[i], 0);
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

/* Phase 1: one slice-step of each send and receive per round, until a round gives none. */
static int next_p2p(braid_lower_t *l, braid_lower_item_t *it)
{
    for (;;) {
        if (l->cur == l->nops) {
            if (!l->moved)
                return 0;
            l->cur = 0;
            l->moved = 0;
        }
        int i = l->cur++;
        if (braid_lower_is_p2p(l->ops[i]) && pos_next(l->ops[i], &l->pos[i], i, it)) {
            l->moved = 1;
            return 1;
        }
    }
}

int braid_lower_next(braid_lower_t *l, braid_lower_item_t *it)
{
    if (l->phase == 0) {
        if (next_coll(l, it))
            return 1;
        l->phase = 1;
        l->cur = 0;
        l->moved = 0;
    }
    if (l->phase == 1) {
        if (next_p2p(l, it))
            return 1;
        l->phase = 2;
    }
    return 0;
}
