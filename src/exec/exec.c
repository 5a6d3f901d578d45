/*
 * The executor: runs a schedule slice by slice over transport slots.
 *
 * Within a stage, slice i of every step runs in step order before slice i+1, so a ring's
 * 2(n-1) steps form a pipeline: while a rank reduces slice i of step t, its neighbour is
 * already sending slice i+1. Each slice is one slot: the receive slot is read in place and
 * the result is written straight into the send slot (one memory pass per hop).
 *
 * Connections are shared by the operations of a communicator, and messages are matched in
 * order, so an operation may use a connection only once every operation issued before it on
 * that connection is finished: each op takes a ticket per connection at start and waits
 * until that ticket is served.
 *
 * Pull steps take no connection: they read a peer's buffer at the address its hello gave
 * (the hello table is filled by ordinary receives of an earlier stage) and never wait
 * (src/exec/exec_pull.c).
 */
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/exec.h"
#include "base/tsan.h"
#include "exec/exec_pull.h"
#include "exec/exec_view.h"
#include "base/log.h"
#include "base/param.h"

void braid_op_clear(braid_op_t *op)
{
    size_t from = offsetof(braid_op_t, bufs), to = offsetof(braid_op_t, tickets_inline);
    memset((char *)op + from, 0, to - from);
}

static int stage_end_of(const braid_sched_t *s, int begin)
{
    int e = begin + 1;
    while (e < s->nsteps && !(s->steps[e].flags & BRAID_STEP_STAGE))
        e++;
    return e;
}

/*
 * A stage that only copies from peers' buffers (and passes messages that fit a slot) is cut
 * into big slices: there is no pipeline to keep full and no partial result to keep in
 * cache, and big copies go faster (fewer system calls, non-temporal stores).
 */
#define EXEC_COPY_SLICE (4 * 1024 * 1024)

static size_t stage_slice_of(const braid_op_t *op)
{
    int pulls = 0;
    for (int i = op->stage_begin; i < op->stage_end; i++) {
        const braid_step_t *st = &op->sched.steps[i];
        int msg = st->recv_peer >= 0 || st->send_peer >= 0;
        if ((st->pull_peer >= 0 && (st->flags & BRAID_STEP_REDUCE)) ||
            (msg && st->bytes > op->slice))
            return op->slice;
        pulls |= st->pull_peer >= 0;
    }
    return pulls && op->slice < EXEC_COPY_SLICE ? EXEC_COPY_SLICE : op->slice;
}

static size_t stage_niter(const braid_op_t *op)
{
    size_t most = 0;
    for (int i = op->stage_begin; i < op->stage_end; i++)
        if (op->sched.steps[i].bytes > most)
            most = op->sched.steps[i].bytes;
    return (most + op->stage_slice - 1) / op->stage_slice;
}

static void stage_enter(braid_op_t *op, int begin)
{
    op->stage_begin = begin;
    op->stage_end = begin < op->sched.nsteps ? stage_end_of(&op->sched, begin) : begin;
    op->step = begin;
    op->iter = 0;
    op->stage_slice = begin < op->sched.nsteps ? stage_slice_of(op) : op->slice;
    op->niter = begin < op->sched.nsteps ? stage_niter(op) : 0;
}

static void tickets_free(braid_op_t *op)
{
    if (op->tickets != op->tickets_inline)
        free(op->tickets);
    op->tickets = NULL;
}

static braid_status_t op_alloc(braid_op_t *op)
{
    BRAID_CHECK(braid_exec_pull_prepare(op));
    if (op->sched.scratch_bytes && op->dev != NULL)
        return braid_device_exec_alloc(op->dev, op->sched.scratch_bytes,
                                       &op->bufs[BRAID_BUF_SCRATCH]);
    if (op->sched.scratch_bytes) {
        op->bufs[BRAID_BUF_SCRATCH] = malloc(op->sched.scratch_bytes);
        if (op->bufs[BRAID_BUF_SCRATCH] == NULL)
            return braid_err(BRAID_ERR_NOMEM, "out of memory allocating %zu bytes of scratch",
                             op->sched.scratch_bytes);
    }
    return BRAID_OK;
}

static void op_free_bufs(braid_op_t *op)
{
    if (op->sched.scratch_bytes && op->dev != NULL)
        braid_device_exec_free(op->dev, op->bufs[BRAID_BUF_SCRATCH]);
    else if (op->sched.scratch_bytes)
        free(op->bufs[BRAID_BUF_SCRATCH]);
    op->bufs[BRAID_BUF_SCRATCH] = NULL;
    braid_exec_pull_release(op);
}

braid_status_t braid_op_start(braid_op_t *op)
{
    int n = op->nranks;
    if (op->slice < op->sched.align || op->slice % op->sched.align)
        return braid_err(BRAID_ERR_INTERNAL, "slice of %zu bytes is not a multiple of %zu",
                         op->slice, op->sched.align);
    op->tickets = op->tickets_inline;
    if (2 * n > BRAID_OP_INLINE_TICKETS) {
        op->tickets = malloc(2 * (size_t)n * sizeof(*op->tickets));
        if (op->tickets == NULL)
            return braid_err(BRAID_ERR_NOMEM, "out of memory starting an operation on %d ranks",
                             n);
    }
    braid_status_t st = op_alloc(op);
    if (st < 0) {
        op_free_bufs(op);
        tickets_free(op);
        return st;
    }
    /* One ticket per connection used, taken in call order; UINT64_MAX means unused. */
    for (int p = 0; p < 2 * n; p++)
        op->tickets[p] = UINT64_MAX;
    for (int i = 0; i < op->sched.nsteps; i++) {
        const braid_step_t *st = &op->sched.steps[i];
        if (st->send_peer >= 0 && op->tickets[st->send_peer] == UINT64_MAX)
            op->tickets[st->send_peer] = op->send_conns[st->send_peer]->ticket_next++;
        if (st->recv_peer >= 0 && op->tickets[n + st->recv_peer] == UINT64_MAX)
            op->tickets[n + st->recv_peer] = op->recv_conns[st->recv_peer]->ticket_next++;
    }
    stage_enter(op, 0);
    op->started = 1;
    op->last_progress = -1;
    return BRAID_OK;
}

/* Serve the next ticket on every connection still held, so that the next operation of the
 * communicator on it may start (at completion, not only at finish: a group's later op on
 * the same connection waits for this one while both are driven by braid_exec_run). */
static void op_conns_release(braid_op_t *op)
{
    int n = op->nranks;
    for (int p = 0; p < n; p++) {
        if (op->tickets[p] != UINT64_MAX)
            op->send_conns[p]->ticket_serving = op->tickets[p] + 1;
        if (op->tickets[n + p] != UINT64_MAX)
            op->recv_conns[p]->ticket_serving = op->tickets[n + p] + 1;
        op->tickets[p] = op->tickets[n + p] = UINT64_MAX;
    }
}

/* Every send of the op has left this process (network connections move data only while
 * a thread drives them, and the caller may not call again for a long time). */
static braid_status_t op_conns_flush(braid_op_t *op)
{
    for (int p = 0; p < op->nranks; p++) {
        braid_conn_t *c = op->tickets[p] != UINT64_MAX ? op->send_conns[p] : NULL;
        braid_status_t st = c != NULL && c->ops->flush != NULL ? c->ops->flush(c) : BRAID_OK;
        if (st != BRAID_OK)
            return st;
    }
    return BRAID_OK;
}

void braid_op_finish(braid_op_t *op)
{
    /* After an error the connection is out of step anyway and the communicator is marked
     * broken by the caller. */
    if (op->started)
        op_conns_release(op);
    tickets_free(op);
    op_free_bufs(op);
    braid_sched_free(&op->sched);
    op->started = 0;
}

static int hdr_equal(const braid_msg_hdr_t *a, const braid_msg_hdr_t *b)
{
    return a->seq == b->seq && a->count == b->count && a->kind == b->kind &&
           a->dtype == b->dtype && a->op == b->op && a->root == b->root && a->algo == b->algo;
}

static const char *hdr_algo(const braid_msg_hdr_t *h)
{
    return h->algo >= 1 && h->algo <= braid_nalgos ? braid_algos[h->algo - 1]->name : "?";
}

static const char *hdr_op(const braid_msg_hdr_t *h)
{
    static const char *const names[] = { "sum", "prod", "max", "min", "avg", "premulsum" };
    return h->op < sizeof(names) / sizeof(names[0]) ? names[h->op] : NULL;
}

/* "AllReduce #5 (count 1000, float, sum)", "Broadcast #2 (count 8, int32, root 1)" */
static const char *hdr_str(const braid_msg_hdr_t *h, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s #%llu (count %llu, %s",
                     braid_coll_name((braid_coll_kind_t)h->kind), (unsigned long long)h->seq,
                     (unsigned long long)h->count, braid_dtype_name((braid_dtype_t)h->dtype));
    if (n > 0 && (size_t)n < len && hdr_op(h) != NULL)
        n += snprintf(buf + n, len - (size_t)n, ", %s", hdr_op(h));
    if (n > 0 && (size_t)n < len && h->root >= 0)
        n += snprintf(buf + n, len - (size_t)n, ", root %d", (int)h->root);
    if (n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ")");
    return buf;
}

/* A message of call `got` arrived after this rank finished its own call `mine` of that
 * number without it. */
static braid_status_t hdr_mismatch_past(const braid_op_t *op, int peer,
                                        const braid_msg_hdr_t *got, const braid_msg_hdr_t *mine)
{
    char g[160], x[160];
    return braid_err(BRAID_ERR_USAGE,
                     "mismatched calls: rank %d sent data of %s, which rank %d made as %s "
                     "and finished without it%s; every rank must make the same calls in "
                     "the same order with the same arguments", peer,
                     hdr_str(got, g, sizeof(g)), op->rank, hdr_str(mine, x, sizeof(x)),
                     mine->root != got->root ? ": the ranks disagree on the root" : "");
}

/*
 * A message that carries another call than this op's. A mismatch is the caller's misuse
 * (ncclInvalidUsage on the rank that sees it; the others see this rank fail). A message of
 * an earlier collective that this rank also made but did not receive in it (a broadcast
 * whose ranks disagree on the root: each sends, none receives) is told against this rank's
 * own call of that number.
 */
static braid_status_t hdr_mismatch(const braid_op_t *op, int peer, const braid_msg_hdr_t *got)
{
    const braid_msg_hdr_t *e = &op->expect;
    const braid_msg_hdr_t *mine = op->history != NULL && got->seq < e->seq
                                      ? &op->history[got->seq % BRAID_HDR_HISTORY] : NULL;
    braid_msg_hdr_t same = *got, own = *e;
    char g[160], x[160];
    same.algo = e->algo;
    if (got->algo != e->algo && hdr_equal(&same, e))
        return braid_err(BRAID_ERR_USAGE,
                         "mismatched algorithms: rank %d runs %s #%llu with %s while rank %d "
                         "runs it with %s; every rank must choose alike (a tuner plugin must "
                         "answer the same on every rank)", peer,
                         braid_coll_name((braid_coll_kind_t)got->kind),
                         (unsigned long long)got->seq, hdr_algo(got), op->rank, hdr_algo(e));
    if (mine != NULL && mine->seq == got->seq && mine->kind == got->kind)
        return hdr_mismatch_past(op, peer, got, mine);
    own.kind = op->hdr.kind;    /* a receive expects a send: name it as called */
    return braid_err(BRAID_ERR_USAGE,
                     "mismatched calls: rank %d sent %s while rank %d expects %s; every rank "
                     "must make the same calls in the same order with the same arguments",
                     peer, hdr_str(got, g, sizeof(g)), op->rank, hdr_str(&own, x, sizeof(x)));
}

/*
 * Root tokens (src/exec/sched.h) are never waited for. A token step takes its token if it
 * is there, else leaves it owed on the connection; any receive there first takes the
 * tokens owed (one that has not come yet is then waited for: the receive needs the
 * connection anyway). A token owed by an earlier call is checked against this rank's own
 * call of its number, while op->history still holds it. The fence: of two ranks that each
 * send and then look for the other's message, at least one sees it.
 */
static braid_status_t token_check(const braid_op_t *op, int peer, const braid_msg_hdr_t *got,
                                  int own)
{
    const braid_msg_hdr_t *mine = op->history != NULL
                                      ? &op->history[got->seq % BRAID_HDR_HISTORY] : NULL;
    if (own)
        return hdr_equal(got, &op->expect) ? BRAID_OK : hdr_mismatch(op, peer, got);
    if (mine == NULL || mine->seq != got->seq || hdr_equal(got, mine))
        return BRAID_OK;
    return hdr_mismatch_past(op, peer, got, mine);
}

static braid_status_t tokens_take(braid_op_t *op, const braid_step_t *st, braid_conn_t *rc)
{
    int token = (st->flags & BRAID_STEP_TOKEN) != 0;
    if (token) {
        braid_fence_seq_cst();
        rc->tokens_owed++;              /* this step's own, the last to take */
    }
    while (rc->tokens_owed > 0) {
        const void *in;
        size_t len;
        braid_msg_hdr_t hdr;
        braid_status_t s = braid_conn_recv_slot(rc, &in, &len, &hdr);
        if (s == BRAID_INPROGRESS && token)
            return BRAID_OK;            /* owed */
        if (s != BRAID_OK)
            return s;
        BRAID_CHECK(token_check(op, st->recv_peer, &hdr, token && rc->tokens_owed == 1));
        BRAID_CHECK(braid_conn_recv_release(rc));
        rc->tokens_owed--;
    }
    return BRAID_OK;
}

braid_status_t braid_exec_msg_check(const braid_op_t *op, int peer, const braid_msg_hdr_t *hdr,
                                    size_t rlen, size_t len, size_t slice)
{
    if (!hdr_equal(hdr, &op->expect))
        return hdr_mismatch(op, peer, hdr);
    if (rlen != len)
        return braid_err(BRAID_ERR_USAGE,
                         "rank %d sent %zu bytes where rank %d expects %zu (slice %zu of "
                         "%s #%llu): mismatched counts or datatypes", peer, rlen, op->rank,
                         len, slice, braid_coll_name((braid_coll_kind_t)op->expect.kind),
                         (unsigned long long)op->expect.seq);
    return BRAID_OK;
}

braid_status_t braid_exec_call_differs(const braid_op_t *op, int peer,
                                       const braid_msg_hdr_t *theirs)
{
    const braid_msg_hdr_t *e = &op->expect;
    braid_msg_hdr_t same = *theirs;
    char g[160], x[160];
    same.algo = e->algo;
    if (theirs->seq != e->seq || hdr_equal(theirs, e))
        return BRAID_OK;
    if (hdr_equal(&same, e))
        return hdr_mismatch(op, peer, theirs);   /* the algorithms differ: it says so */
    return braid_err(BRAID_ERR_USAGE,
                     "mismatched calls: rank %d is in %s while rank %d is in %s%s; every rank "
                     "must make the same calls in the same order with the same arguments",
                     peer, hdr_str(theirs, g, sizeof(g)), op->rank, hdr_str(e, x, sizeof(x)),
                     theirs->root != e->root ? " (the ranks disagree on the root)" : "");
}

static char *ref_ptr(const braid_op_t *op, braid_ref_t r, size_t off)
{
    return r.buf == BRAID_BUF_NONE ? NULL : (char *)op->bufs[r.buf] + r.off + off;
}

/* Produce the slice's value into `out` (a send slot or the destination); `stream`: out is
 * the destination of a call whose outputs are streamed (op->stream_out), so copies into it
 * use non-temporal stores. */
static void slice_compute(const braid_op_t *op, const braid_step_t *st, void *out,
                          const void *in, const char *src, size_t len, int stream)
{
    size_t n = len / op->sched.align;
    const braid_redop_spec_t *r = &op->redop;
    int reduce = (st->flags & BRAID_STEP_REDUCE) != 0;
    const braid_scalar_t *pre = braid_step_pre(op, st);
    void (*copy)(void *, const void *, size_t) = stream ? braid_kern_copy_stream
                                                        : braid_kern_copy;

    if (in != NULL && reduce && src != NULL)
        braid_kern_reduce(op->dtype, r->kind, out, in, src, n, pre);
    else if (in != NULL)
        copy(out, in, len);
    else if (pre != NULL)
        braid_kern_scale(op->dtype, out, src, n, pre);
    else if (out != src)
        copy(out, src, len);
    if ((st->flags & BRAID_STEP_FINAL) && r->postdiv > 1)
        braid_kern_divide(op->dtype, out, out, n, r->postdiv);
}

/* The same computation with device buffers: kernels on the op's device (dst and src are
 * device memory, in and out host memory). */
static braid_status_t slice_device(const braid_op_t *op, const braid_step_t *st, char *out,
                                   char *dst, const char *in, const char *src, size_t len)
{
    const braid_redop_spec_t *r = &op->redop;
    braid_device_slice_t s = {
        .out = out, .dst = dst, .in = in, .src = src, .bytes = len,
        .count = len / op->sched.align, .dtype = op->dtype, .op = r->kind,
        .reduce = (st->flags & BRAID_STEP_REDUCE) && in != NULL && src != NULL,
        .premul = braid_step_pre(op, st),
        .postdiv = (st->flags & BRAID_STEP_FINAL) ? r->postdiv : 0,
    };
    braid_device_wait_t w = braid_op_device_wait(op);
    return braid_device_exec_slice(op->dev, &s, &w);
}

braid_status_t braid_op_gpu_check(void *arg, double waited_s)
{
    const braid_op_t *op = arg;
    if (op->hooks == NULL || op->hooks->gpu_wait == NULL)
        return BRAID_OK;
    return op->hooks->gpu_wait(op->hook_ctx, op, waited_s);
}

/*
 * Produce a slice into the send slot and/or the destination. With both, go block by block:
 * the copy to the destination then reads a block the computation just left in L1, so the
 * second output costs one write instead of a second pass over memory.
 */
#define EXEC_BLOCK (16 * 1024)

static braid_status_t slice_run(const braid_op_t *op, const braid_step_t *st, char *out,
                                char *dst, const char *in, const char *src, size_t len)
{
    if (op->dev != NULL)
        return slice_device(op, st, out, dst, in, src, len);
    if (out == NULL || dst == NULL) {
        slice_compute(op, st, out != NULL ? out : dst, in, src, len,
                      out == NULL && op->stream_out);
        return BRAID_OK;
    }
    for (size_t o = 0; o < len; o += EXEC_BLOCK) {
        size_t b = len - o < EXEC_BLOCK ? len - o : EXEC_BLOCK;
        slice_compute(op, st, out + o, in != NULL ? in + o : NULL, src != NULL ? src + o : NULL,
                      b, 0);
        if (op->stream_out)
            braid_kern_copy_stream(dst + o, out + o, b);
        else
            memcpy(dst + o, out + o, b);
    }
    return BRAID_OK;
}

/* Move slice `iter` of one step: INPROGRESS if a slot is not ready yet. */
static braid_status_t step_slice(braid_op_t *op, const braid_step_t *st)
{
    size_t off = op->iter * op->stage_slice;
    if (off >= st->bytes)
        return BRAID_OK;
    size_t len = st->bytes - off < op->stage_slice ? st->bytes - off : op->stage_slice;
    braid_conn_t *rc = NULL, *sc = NULL;
    const void *in = NULL;
    void *out = NULL;
    int n = op->nranks;

    if (st->pull_peer >= 0)
        return braid_exec_pull_slice(op, st, off, len);

    if (st->recv_peer >= 0) {
        rc = op->recv_conns[st->recv_peer];
        if (rc->ticket_serving != op->tickets[n + st->recv_peer])
            return BRAID_INPROGRESS;
        if (rc->tokens_owed > 0 || (st->flags & BRAID_STEP_TOKEN)) {
            braid_status_t s = tokens_take(op, st, rc);
            if (s != BRAID_OK || (st->flags & BRAID_STEP_TOKEN))
                return s;
        }
        size_t rlen;
        braid_msg_hdr_t hdr;
        braid_status_t s = braid_conn_recv_slot(rc, &in, &rlen, &hdr);
        if (s != BRAID_OK)
            return s;
        BRAID_CHECK(braid_exec_msg_check(op, st->recv_peer, &hdr, rlen, len, op->iter));
    }
    if (st->send_peer >= 0) {
        sc = op->send_conns[st->send_peer];
        if (sc->ticket_serving != op->tickets[st->send_peer])
            return BRAID_INPROGRESS;
        size_t cap;
        braid_status_t s = braid_conn_send_slot(sc, len, &out, &cap);
        if (s != BRAID_OK)
            return s;
        if (cap < len)
            return braid_err(BRAID_ERR_INTERNAL, "slot of %zu bytes to rank %d is smaller "
                             "than the %zu-byte slice", cap, st->send_peer, len);
    }
    if (braid_exec_view_step(op, st))
        BRAID_CHECK(braid_exec_view_slice(op, st, out, in, off, len));
    else if (out != NULL && in == NULL && st->src.buf == BRAID_BUF_NONE)
        memset(out, 0, len);                                    /* a token sent */
    else if (out != NULL || st->dst.buf != BRAID_BUF_NONE)   /* else a token: dropped */
        BRAID_CHECK(slice_run(op, st, out, ref_ptr(op, st->dst, off), in,
                              ref_ptr(op, st->src, off), len));
    if (sc != NULL)
        BRAID_CHECK(braid_conn_send_commit(sc, len, &op->hdr));
    if (rc != NULL)
        BRAID_CHECK(braid_conn_recv_release(rc));
    return BRAID_OK;
}

braid_status_t braid_op_progress(braid_op_t *op)
{
    while (op->stage_begin < op->sched.nsteps) {
        if (op->step == op->stage_end) {
            op->step = op->stage_begin;
            op->iter++;
        }
        if (op->iter >= op->niter) {
            stage_enter(op, op->stage_end);
            continue;
        }
        braid_status_t st = step_slice(op, &op->sched.steps[op->step]);
        if (st != BRAID_OK)
            return st;
        op->step++;
        op->slices_done++;
    }
    if (!op->done) {
        braid_status_t st = op_conns_flush(op);
        if (st != BRAID_OK)
            return st;
        op_conns_release(op);
    }
    op->done = 1;
    return BRAID_OK;
}

/*
 * Waiting: spin a little, then yield the core, then sleep, so that ranks may outnumber cores
 * without starving the one that holds the data. When they do (`oversub`), spinning only
 * delays that rank, so waiting starts with yielding. When they do not, a yield helps only
 * a peer that shares this core (`near`: the scheduler put both ranks on one CPU), and then
 * at once: spinning only delays the peer. To any other program a yield hands the core for
 * a whole time slice, milliseconds in which the peer's answer waits, so a rank whose peer
 * is elsewhere keeps spinning until it sleeps. (2 ranks beside one busy process: an 8-byte
 * all-reduce took 13-18 us with both rules off, docs/PERFORMANCE.md.)
 */
static void backoff(unsigned idle, int oversub, int near)
{
    if (idle < (oversub ? 0u : near ? 8u : 256u) || (idle < 8192 && !oversub && !near)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } else if (idle < 8192) {
        sched_yield();
    } else {
        unsigned shift = (idle - 8192) / 64;
        long ns = 20000L << (shift < 5 ? shift : 5);   /* 20 us .. 640 us */
        struct timespec ts = { 0, ns };
        nanosleep(&ts, NULL);
    }
}

/* Does a peer that a waiting op waits on share this rank's CPU? */
static int exec_near(braid_op_t **ops, int nops)
{
    for (int i = 0; i < nops; i++)
        if (!ops[i]->done && ops[i]->hooks != NULL && ops[i]->hooks->near != NULL &&
            ops[i]->hooks->near(ops[i]->hook_ctx, ops[i]))
            return 1;
    return 0;
}

static braid_status_t exec_checks(braid_op_t **ops, int nops, double now, double timeout,
                                  int blocked)
{
    for (int i = 0; i < nops; i++) {
        braid_op_t *op = ops[i];
        if (op->done || op->hooks == NULL)
            continue;
        if (op->hooks->check != NULL)
            BRAID_CHECK(op->hooks->check(op->hook_ctx, op, blocked));
        if (blocked && timeout > 0 && now - op->last_progress > timeout)
            return op->hooks->stalled(op->hook_ctx, op, now - op->last_progress);
    }
    return BRAID_OK;
}

braid_status_t braid_exec_run(braid_op_t **ops, int nops)
{
    double timeout = (double)braid_param_int(BRAID_P_TIMEOUT);
    double check_every = (double)braid_param_int(BRAID_P_CHECK_PEERS_MS) * 1e-3;
    double next_check = 0;          /* set at the first reading of the clock */
    unsigned idle = 0, moves = 0;
    int oversub = 0, near = 0;

    for (int i = 0; i < nops; i++)
        oversub |= ops[i]->oversubscribed;
    for (;;) {
        int pending = 0, moved = 0;
        for (int i = 0; i < nops; i++) {
            braid_op_t *op = ops[i];
            if (op->done)
                continue;
            uint64_t before = op->slices_done;
            braid_status_t st = braid_op_progress(op);
            if (st < 0)
                return st;
            if (op->slices_done != before) {
                moved = 1;
                op->last_progress = -1;   /* stamped below */
            }
            pending += !op->done;
        }
        if (!pending)
            return BRAID_OK;
        if (moved) {
            idle = 0;
        } else {
            /* Drive is per communicator: a group's ops of one comm sit together, drive once. */
            void *driven = NULL;
            for (int i = 0; i < nops; i++)
                if (!ops[i]->done && ops[i]->hooks != NULL && ops[i]->hooks->drive != NULL &&
                    ops[i]->hook_ctx != driven) {
                    ops[i]->hooks->drive(ops[i]->hook_ctx);
                    driven = ops[i]->hook_ctx;
                }
            if (!oversub && (idle & 63) == 7)
                near = exec_near(ops, nops);
            backoff(idle++, oversub, near);
        }
        /* The clock is read every 64 moves or 16 idle passes, not on every pass: a small
         * call would spend a fifth of its time in clock_gettime. Moves are at most one
         * slice each, so checks still come at least every few tens of milliseconds. */
        if (moved ? (++moves & 63) == 0 : (idle & 15) == 0 || idle > 8192) {
            double now = braid_now();
            for (int i = 0; i < nops; i++) {
                if (ops[i]->last_progress < 0)
                    ops[i]->last_progress = now;
                if (ops[i]->first_clock == 0 && !ops[i]->done)
                    ops[i]->first_clock = now;
            }
            if (next_check == 0)
                next_check = now + check_every;
            if (now >= next_check) {
                next_check = now + check_every;
                BRAID_CHECK(exec_checks(ops, nops, now, timeout, !moved));
            }
        }
    }
}
