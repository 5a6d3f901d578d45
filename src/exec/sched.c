/*
 * Schedule containers: growing arrays of steps, and collective names.
 */
#include <stdlib.h>
#include <string.h>

#include "exec/sched.h"

static const char *const coll_names[BRAID_COLL_NUM] = {
    [BRAID_COLL_ALLREDUCE] = "AllReduce",         [BRAID_COLL_BROADCAST] = "Broadcast",
    [BRAID_COLL_REDUCE] = "Reduce",               [BRAID_COLL_ALLGATHER] = "AllGather",
    [BRAID_COLL_REDUCESCATTER] = "ReduceScatter", [BRAID_COLL_ALLTOALL] = "AllToAll",
    [BRAID_COLL_ALLTOALLV] = "AllToAllv",         [BRAID_COLL_GATHER] = "Gather",
    [BRAID_COLL_SCATTER] = "Scatter",             [BRAID_COLL_SEND] = "Send",
    [BRAID_COLL_RECV] = "Recv",
};

const char *braid_coll_name(braid_coll_kind_t kind)
{
    return (unsigned)kind < BRAID_COLL_NUM ? coll_names[kind] : "invalid";
}

void braid_sched_init(braid_sched_t *s, size_t elem_size)
{
    s->steps = s->inline_steps;
    s->nsteps = 0;
    s->cap = BRAID_SCHED_INLINE;
    s->scratch_bytes = 0;
    s->align = elem_size ? elem_size : 1;
    s->next_flags = 0;
    s->slice = 0;
}

void braid_sched_free(braid_sched_t *s)
{
    if (s->steps != s->inline_steps)
        free(s->steps);
    s->steps = s->inline_steps;
    s->nsteps = 0;
    s->cap = BRAID_SCHED_INLINE;
}

void braid_sched_stage(braid_sched_t *s)
{
    s->next_flags |= BRAID_STEP_STAGE;
}

/* A new step at the end (uninitialised), or NULL when out of memory. */
static braid_step_t *sched_grow(braid_sched_t *s)
{
    if (s->nsteps == s->cap) {
        int cap = 2 * s->cap;
        int on_heap = s->steps != s->inline_steps;
        braid_step_t *steps = realloc(on_heap ? s->steps : NULL, (size_t)cap * sizeof(*steps));
        if (steps == NULL) {
            braid_err(BRAID_ERR_NOMEM, "out of memory growing a schedule to %d steps", cap);
            return NULL;
        }
        if (!on_heap)
            memcpy(steps, s->inline_steps, sizeof(s->inline_steps));
        s->steps = steps;
        s->cap = cap;
    }
    return &s->steps[s->nsteps++];
}

braid_status_t braid_sched_add(braid_sched_t *s, int recv_peer, int send_peer, braid_ref_t src,
                               braid_ref_t dst, size_t bytes, uint32_t flags)
{
    if (bytes == 0)
        return BRAID_OK;
    braid_step_t *st = sched_grow(s);
    if (st == NULL)
        return BRAID_ERR_NOMEM;
    st->recv_peer = recv_peer;
    st->send_peer = send_peer;
    st->pull_peer = -1;
    st->src = src;
    st->dst = dst;
    st->pull = braid_ref_none();
    st->bytes = bytes;
    st->flags = flags | s->next_flags;
    s->next_flags = 0;
    return BRAID_OK;
}

braid_status_t braid_sched_pull(braid_sched_t *s, int peer, braid_ref_t from, braid_ref_t src,
                                braid_ref_t dst, size_t bytes, uint32_t flags)
{
    BRAID_CHECK(braid_sched_add(s, -1, -1, src, dst, bytes, flags));
    if (bytes != 0) {
        s->steps[s->nsteps - 1].pull_peer = peer;
        s->steps[s->nsteps - 1].pull = from;
    }
    return BRAID_OK;
}

braid_status_t braid_sched_token_send(braid_sched_t *s, int peer, size_t call_bytes)
{
    if (call_bytes == 0)
        return BRAID_OK;
    return braid_sched_add(s, -1, peer, braid_ref_none(), braid_ref_none(), BRAID_TOKEN_BYTES,
                           0);
}

braid_status_t braid_sched_token_recv(braid_sched_t *s, int peer, size_t call_bytes)
{
    if (call_bytes == 0)
        return BRAID_OK;
    braid_sched_stage(s);
    return braid_sched_add(s, peer, -1, braid_ref_none(), braid_ref_none(), BRAID_TOKEN_BYTES,
                           BRAID_STEP_TOKEN);
}

braid_status_t braid_sched_copy(const braid_sched_t *from, braid_sched_t *to)
{
    braid_sched_init(to, from->align);
    to->scratch_bytes = from->scratch_bytes;
    for (int i = 0; i < from->nsteps; i++) {
        const braid_step_t *st = &from->steps[i];
        if (st->pull_peer >= 0)
            BRAID_CHECK(braid_sched_pull(to, st->pull_peer, st->pull, st->src, st->dst,
                                         st->bytes, st->flags));
        else
            BRAID_CHECK(braid_sched_add(to, st->recv_peer, st->send_peer, st->src, st->dst,
                                        st->bytes, st->flags));
    }
    return BRAID_OK;
}
