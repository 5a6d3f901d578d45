/*
 * Calls become operations: the reduction is lowered (ncclAvg on floats is a pre-multiply by
 * 1/n, on integers a sum then a division by n; ncclPreMulSum is a pre-multiply by the
 * operator's scalar), the algorithm builds this rank's schedule, and the operation runs at
 * once or waits for the outermost ncclGroupEnd of the thread.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/enqueue.h"
#include "core/flight.h"
#include "algorithms/algo.h"
#include "base/log.h"

typedef struct group_job {
    pthread_t thread;
    braid_group_job_fn fn;
    void *arg;
    braid_status_t st;
} group_job_t;

typedef struct group_state {
    int depth;
    braid_status_t error;           /* first failure of a call in the group */
    group_job_t **jobs;
    int njobs, job_cap;
    braid_op_t **ops;
    int nops, cap;
    braid_comm_t **inits;
    int ninits, init_cap;
} group_state_t;

static _Thread_local group_state_t group;

static braid_status_t lower_redop(braid_comm_t *comm, const braid_call_t *call,
                                  braid_redop_spec_t *r)
{
    memset(r, 0, sizeof(*r));
    if (call->op < 0)
        return BRAID_OK;
    if (call->op < BRAID_NUM_OPS) {
        r->kind = (braid_opkind_t)call->op;
        return BRAID_OK;
    }
    r->kind = BRAID_OP_SUM;
    if (call->op == 4) {   /* ncclAvg */
        if (braid_dtype_is_float(call->dtype)) {
            r->premul = 1;
            r->scalar.f = 1.0 / comm->nranks;
        } else {
            r->postdiv = (uint64_t)comm->nranks;
        }
        return BRAID_OK;
    }
    const braid_premul_t *pm = &comm->premuls[call->op - 5];
    r->premul = 1;
    if (pm->ptr != NULL && call->on_device)
        r->scalar_dev = pm->ptr;        /* read by the proxy when the call starts */
    else
        r->scalar = pm->ptr != NULL ? braid_scalar_load(call->dtype, pm->ptr) : pm->value;
    return BRAID_OK;
}

static void op_header(braid_comm_t *comm, const braid_call_t *call, const braid_algo_t *algo,
                      braid_op_t *op)
{
    braid_msg_hdr_t *h = &op->hdr;
    h->algo = (uint8_t)(braid_algo_index(algo) + 1);
    h->kind = (uint8_t)call->kind;
    h->dtype = (uint8_t)call->dtype;
    h->op = call->op < 0 ? 255 : (uint8_t)(call->op < 5 ? call->op : 5);
    h->count = call->kind == BRAID_COLL_ALLTOALLV ? 0 : call->count;
    if (call->kind == BRAID_COLL_SEND) {
        h->root = -1;
        h->seq = ++comm->p2p_send_seq[call->root];
    } else if (call->kind == BRAID_COLL_RECV) {
        h->root = -1;
        h->seq = ++comm->p2p_recv_seq[call->root];
    } else {
        h->root = call->kind == BRAID_COLL_BROADCAST || call->kind == BRAID_COLL_REDUCE ||
                          call->kind == BRAID_COLL_GATHER || call->kind == BRAID_COLL_SCATTER
                      ? call->root
                      : -1;
        h->seq = ++comm->coll_seq;
        comm->coll_hist[h->seq % BRAID_HDR_HISTORY] = *h;
    }
    /* also for send/recv: a root token they find owed. Not for an op the proxy runs: the
     * calling thread writes coll_hist meanwhile (ThreadSanitizer, test_plan.sh) */
    op->history = call->on_device ? NULL : comm->coll_hist;
    op->p2p_peer = call->root;
    op->expect = *h;
    if (call->kind == BRAID_COLL_RECV)
        op->expect.kind = BRAID_COLL_SEND;   /* a receive matches the peer's send */
}

/* Byte offset of rank `owner`'s block in the buffer of every rank's blocks: the
 * all-gather's recvbuff, the reduce-scatter's sendbuff, the root's buffer of gather and
 * scatter (vdispls for the V calls). */
static size_t call_own_off(const braid_call_t *c, int owner)
{
    size_t es = braid_dtype_size(c->dtype);
    if (c->vcounts != NULL)
        return c->vdispls[owner] * es;
    return (size_t)owner * c->count * es;
}

static int call_in_place(const braid_comm_t *comm, const braid_call_t *c)
{
    const char *s = c->sendbuf, *r = c->recvbuf;
    if (c->send_view != NULL || c->recv_view != NULL)
        return 0;       /* views: what each step reads and writes is explicit */
    switch (c->kind) {
    case BRAID_COLL_ALLGATHER: return s == r + call_own_off(c, comm->rank);
    case BRAID_COLL_REDUCESCATTER: return r == s + call_own_off(c, comm->rank);
    case BRAID_COLL_GATHER: return s == r + call_own_off(c, c->root);
    case BRAID_COLL_SCATTER: return r == s + call_own_off(c, c->root);
    default: return s == r;
    }
}

/* Bytes of the receive buffer that the call writes on this rank. */
static size_t call_out_bytes(const braid_comm_t *comm, const braid_call_t *c)
{
    size_t es = braid_dtype_size(c->dtype), blk = c->count * es;
    if (c->vcounts != NULL)   /* count is the total: all of it lands here, or our block */
        return c->kind == BRAID_COLL_ALLGATHER ? blk : c->vcounts[comm->rank] * es;
    switch (c->kind) {
    case BRAID_COLL_ALLGATHER:
    case BRAID_COLL_ALLTOALL:
        return blk * (size_t)comm->nranks;
    case BRAID_COLL_GATHER:
        return c->root == comm->rank ? blk * (size_t)comm->nranks : 0;
    case BRAID_COLL_ALLTOALLV:
    case BRAID_COLL_SEND:
        return 0;
    default:
        return blk;
    }
}

static braid_status_t op_build(braid_comm_t *comm, const braid_call_t *call, braid_op_t *op)
{
    braid_coll_t coll = {
        .kind = call->kind, .dtype = call->dtype, .rank = comm->rank, .nranks = comm->nranks,
        .root = call->root, .count = call->count, .in_place = call_in_place(comm, call),
        .sendcounts = call->sendcounts, .sdispls = call->sdispls,
        .recvcounts = call->recvcounts, .rdispls = call->rdispls,
        .vcounts = call->vcounts, .vdispls = call->vdispls,
        .topo = &comm->topo, .tune = &comm->tune, .force = call->algo,
        .device = call->on_device,
    };
    if (call->vcounts != NULL)
        coll.force = &braid_algo_ring;   /* the one builder of per-rank blocks */
    /* pulls read host memory, and a peer's own buffers (not views) */
    coll.pull = call->on_device || call->send_view != NULL ? 0 : comm->tctx.pull;
    coll.pull_min = comm->tctx.pull_min;
    braid_sched_init(&op->sched, braid_dtype_size(call->dtype));
    if (call->redop != NULL)
        op->redop = *call->redop;
    else
        BRAID_CHECK(lower_redop(comm, call, &op->redop));
    const braid_algo_t *algo = NULL;
    BRAID_CHECK(braid_algo_build(&coll, &op->sched, &algo));
    op->bufs[BRAID_BUF_SEND] = (void *)call->sendbuf;
    op->bufs[BRAID_BUF_RECV] = call->recvbuf;
    op->views[BRAID_BUF_SEND] = call->send_view;
    op->views[BRAID_BUF_RECV] = call->recv_view;
    op->acc = call->acc;
    op->dtype = call->dtype;
    op->rank = comm->rank;
    op->nranks = comm->nranks;
    op->send_conns = comm->send_conns;
    op->recv_conns = comm->recv_conns;
    size_t slice = op->sched.slice != 0 && op->sched.slice < comm->slot_size ? op->sched.slice
                                                                             : comm->slot_size;
    op->slice = slice > op->sched.align ? slice / op->sched.align * op->sched.align
                                        : op->sched.align;
    op->hooks = &braid_comm_exec_hooks;
    op->hook_ctx = comm;
    op->oversubscribed = comm->oversubscribed;
    op->stream_out = !coll.in_place && !call->on_device && call->recv_view == NULL &&
                     comm->stream_min > 0 &&
                     call_out_bytes(comm, call) >= comm->stream_min;
    op->on_device = call->on_device;
    op->stream = call->stream;
    op->ordinal = call->ordinal;
    op_header(comm, call, algo, op);
    return BRAID_OK;
}

static int op_is_coll(const braid_op_t *op)
{
    return op->hdr.kind != BRAID_COLL_SEND && op->hdr.kind != BRAID_COLL_RECV;
}

braid_status_t braid_ops_run(braid_op_t **ops, int n, int heap, braid_status_t st0)
{
    braid_status_t st = st0;
    for (int i = 0; i < n && st == BRAID_OK; i++) {
        st = braid_op_start(ops[i]);
        if (st == BRAID_OK)
            braid_flight_running(ops[i]);
        if (st == BRAID_OK && op_is_coll(ops[i])) {
            braid_comm_publish_call(ops[i]->hook_ctx, &ops[i]->hdr);
            braid_comm_publish(ops[i]->hook_ctx, ops[i]->hdr.seq, 0);
        }
    }
    if (st == BRAID_OK)
        st = braid_exec_run(ops, n);
    for (int i = 0; i < n; i++) {
        braid_comm_t *comm = ops[i]->hook_ctx;
        if (st == BRAID_OK && op_is_coll(ops[i]))
            braid_comm_publish(comm, 0, ops[i]->hdr.seq);
        if (st < 0 && !ops[i]->done)
            braid_comm_set_error(comm, st);
        braid_flight_end(ops[i], st < 0 && !ops[i]->done ? st : BRAID_OK);
        braid_op_finish(ops[i]);
        braid_comm_leave(comm);
        if (heap)
            free(ops[i]);
    }
    return st;
}

static braid_status_t group_push(void ***arr, int *len, int *cap, void *item)
{
    if (*len == *cap) {
        int c = *cap ? 2 * *cap : 8;
        void **a = realloc(*arr, (size_t)c * sizeof(void *));
        if (a == NULL)
            return braid_err(BRAID_ERR_NOMEM, "out of memory queueing a call in a group");
        *arr = a;
        *cap = c;
    }
    (*arr)[(*len)++] = item;
    return BRAID_OK;
}

/* The op of a call, built in `now` (a host call outside a group runs from the stack) or on
 * the heap (now NULL), recorded (`timed`: it waits for the proxy, take the time), and the
 * comm entered until it has run (an abort waits for it). */
static braid_status_t op_new(braid_comm_t *comm, const braid_call_t *call, braid_op_t *now,
                             int timed, braid_op_t **op_p)
{
    braid_op_t *op = now != NULL ? now : malloc(sizeof(*op));
    if (op == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for a %s call",
                         braid_coll_name(call->kind));
    braid_op_clear(op);
    braid_status_t st = op_build(comm, call, op);
    if (st < 0) {
        braid_sched_free(&op->sched);
        if (op != now)
            free(op);
        return st;
    }
    braid_flight_queued(comm->flight, op, timed);
    atomic_fetch_add(&comm->busy, 1);
    *op_p = op;
    return BRAID_OK;
}

braid_status_t braid_enqueue(braid_comm_t *comm, const braid_call_t *call)
{
    braid_op_t now, *op;
    int heap = group.depth > 0 || call->on_device;
    BRAID_CHECK(op_new(comm, call, heap ? NULL : &now, call->on_device, &op));
    if (!heap) {
        braid_proxy_drain(comm);    /* the proxy's queued work (plans) comes first */
        return braid_ops_run(&op, 1, 0, BRAID_OK);
    }
    if (group.depth == 0) {
        braid_proxy_ticket_t t;
        braid_status_t st = braid_proxy_submit(comm, call->ordinal, &op, 1, 1, &t);
        return st < 0 ? st : braid_proxy_join(&t);
    }
    braid_status_t st = group_push((void ***)&group.ops, &group.nops, &group.cap, op);
    if (st < 0) {
        braid_comm_leave(comm);
        braid_sched_free(&op->sched);
        free(op);
    }
    return st;
}

braid_status_t braid_enqueue_post(braid_comm_t *comm, const braid_call_t *call,
                                  braid_proxy_done_fn done, void *arg)
{
    braid_op_t *op;
    BRAID_CHECK(op_new(comm, call, NULL, 1, &op));
    op->history = NULL;     /* run by the proxy: see op_header */
    return braid_proxy_post(comm, call->on_device ? call->ordinal : -1, &op, 1, done, arg);
}

int braid_group_depth(void)
{
    return group.depth;
}

void braid_group_fail(braid_status_t st)
{
    if (group.depth > 0 && group.error == BRAID_OK)
        group.error = st;
}

/* Give back the sequence numbers an op took, so the next call matches the peers again. */
static void op_unissue(braid_op_t *op)
{
    braid_comm_t *comm = op->hook_ctx;
    if (op->hdr.kind == BRAID_COLL_SEND)
        comm->p2p_send_seq[op->p2p_peer]--;
    else if (op->hdr.kind == BRAID_COLL_RECV)
        comm->p2p_recv_seq[op->p2p_peer]--;
    else
        comm->coll_seq--;
}

/* Drop the queued ops, newest first. */
static void group_drop_ops(void)
{
    for (int i = group.nops - 1; i >= 0; i--) {
        braid_op_t *op = group.ops[i];
        op_unissue(op);
        braid_flight_unqueue(((braid_comm_t *)op->hook_ctx)->flight, op);
        braid_sched_free(&op->sched);
        braid_comm_leave(op->hook_ctx);
        free(op);
    }
    group.nops = 0;
}

void braid_group_start(void)
{
    group.depth++;
}

braid_status_t braid_group_add_init(braid_comm_t *comm)
{
    return group_push((void ***)&group.inits, &group.ninits, &group.init_cap, comm);
}

static void *job_main(void *arg)
{
    group_job_t *job = arg;
    job->st = job->fn(job->arg);
    return NULL;
}

braid_status_t braid_group_add_job(braid_group_job_fn fn, void *arg)
{
    group_job_t *job = calloc(1, sizeof(*job));
    if (job == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory queueing a call in a group");
    job->fn = fn;
    job->arg = arg;
    braid_status_t st = group_push((void ***)&group.jobs, &group.njobs, &group.job_cap, job);
    if (st < 0) {
        free(job);
        return st;
    }
    int e = pthread_create(&job->thread, NULL, job_main, job);
    if (e != 0) {
        group.njobs--;
        free(job);
        return braid_err(BRAID_ERR_SYSTEM, "cannot start a thread for a grouped call: %s",
                         strerror(e));
    }
    return BRAID_OK;
}

static braid_status_t group_wait_jobs(void)
{
    braid_status_t st = BRAID_OK;
    for (int i = 0; i < group.njobs; i++) {
        pthread_join(group.jobs[i]->thread, NULL);
        if (group.jobs[i]->st < 0 && st >= 0)
            st = group.jobs[i]->st;
        free(group.jobs[i]);
    }
    group.njobs = 0;
    return st;
}

static braid_status_t group_wait_inits(void)
{
    braid_status_t st = BRAID_OK;
    for (int i = 0; i < group.ninits; i++) {
        braid_comm_t *comm = group.inits[i];
        if (!comm->config.blocking) {
            if (st == BRAID_OK)
                st = BRAID_INPROGRESS;   /* it finishes on its own thread */
            continue;
        }
        braid_status_t s = braid_comm_wait_init(comm);
        if (s < 0 && st >= 0)
            st = s;
    }
    group.ninits = 0;
    return st;
}

/* The group's arrays are thread-local: free them between groups, so a thread that exits
 * leaves nothing behind. */
static void group_release(void)
{
    free(group.ops);
    free(group.jobs);
    free(group.inits);
    group = (group_state_t){ 0 };
}

/*
 * A group's ops: those of a communicator with a device call among them go to its proxy,
 * as one job per communicator (in call order); the rest run here, together, once the
 * proxies have theirs (a rank's proxy and its host calls progress side by side).
 */
static braid_status_t group_run(braid_op_t **ops, int n)
{
    braid_status_t st = BRAID_OK;
    int nhost = 0, njobs = 0;
    braid_op_t **mine = malloc((size_t)n * sizeof(*mine));
    braid_proxy_ticket_t *tickets = malloc((size_t)n * sizeof(*tickets));
    if (mine == NULL || tickets == NULL) {
        free(mine);
        free(tickets);
        group_drop_ops();
        return braid_err(BRAID_ERR_NOMEM, "out of memory running a group");
    }
    braid_comm_t *dev = NULL;   /* alone (proxy.h): one communicator has device ops */
    int alone = 1;
    for (int i = 0; i < n; i++)
        if (ops[i] != NULL && ops[i]->on_device) {
            alone &= dev == NULL || ops[i]->hook_ctx == dev;
            dev = ops[i]->hook_ctx;
        }
    for (int i = 0; i < n; i++) {
        braid_comm_t *comm = ops[i] != NULL ? ops[i]->hook_ctx : NULL;
        int device = 0, ordinal = 0, k = 0;
        for (int j = i; comm != NULL && j < n; j++)
            if (ops[j] != NULL && ops[j]->hook_ctx == comm && ops[j]->on_device) {
                device = 1;
                ordinal = ops[j]->ordinal;
            }
        if (comm == NULL || !device) {
            if (comm != NULL)
                ops[nhost++] = ops[i];
            continue;
        }
        for (int j = i; j < n; j++)
            if (ops[j] != NULL && ops[j]->hook_ctx == comm) {
                mine[k++] = ops[j];
                ops[j] = NULL;
            }
        braid_status_t s = braid_proxy_submit(comm, ordinal, mine, k, alone, &tickets[njobs++]);
        if (s < 0 && st == BRAID_OK)
            st = s;
    }
    for (int t = 0; t < njobs; t++) {
        braid_status_t s = braid_proxy_join(&tickets[t]);
        if (s < 0 && st == BRAID_OK)
            st = s;
    }
    free(mine);
    free(tickets);
    for (int i = 0; i < nhost; i++)
        braid_proxy_drain(ops[i]->hook_ctx);
    braid_status_t sh = nhost > 0 ? braid_ops_run(ops, nhost, 1, BRAID_OK) : BRAID_OK;
    return st < 0 ? st : sh;
}

braid_status_t braid_group_end(void)
{
    if (--group.depth > 0)
        return BRAID_OK;
    braid_status_t st = group.error;
    if (st < 0)
        group_drop_ops();
    else if (group.nops > 0)
        st = group_run(group.ops, group.nops);
    braid_status_t sj = group_wait_jobs();
    braid_status_t si = group_wait_inits();
    group_release();
    if (st < 0)
        return st;
    return sj < 0 ? sj : si;
}

braid_status_t braid_group_simulate_end(double *seconds_p)
{
    /* A plain cost model for now: 5 us per step and 5 GB/s per byte moved. */
    double t = 0;
    for (int i = 0; i < group.nops; i++) {
        const braid_op_t *op = group.ops[i];
        for (int s = 0; s < op->sched.nsteps; s++)
            t += 5e-6 + (double)op->sched.steps[s].bytes / 5e9;
    }
    group_drop_ops();
    *seconds_p = t;
    return braid_group_end();   /* runs nothing left; joins grouped inits and splits */
}
