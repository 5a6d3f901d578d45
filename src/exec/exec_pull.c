/*
 * Pull steps: hellos and reads of peers' buffers. See exec_pull.h and src/exec/sched.h.
 *
 * A read fails when the peer is gone or aborted; the communicator's checks (the op's hooks)
 * then name the rank and the reason, as they do for a rank that waits on a FIFO.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/exec_pull.h"
#include "base/log.h"
#include "base/proc.h"
#include "transports/transport.h"

typedef struct exec_hello {
    uint64_t magic;
    uint64_t seq;               /* the collective it belongs to */
    uint64_t proc_key;          /* braid_cma_proc_key() of the sender's process */
    uint64_t addr[2];           /* its SEND and RECV buffers, in its address space */
    braid_scalar_t premul;      /* its pre-multiplier, when has_premul */
    int32_t pid;
    int32_t rank;
    int32_t has_premul;
    int32_t pad;
} exec_hello_t;

_Static_assert(sizeof(exec_hello_t) <= BRAID_HELLO_BYTES, "a hello fits its record");
_Static_assert(BRAID_TOKEN_BYTES <= BRAID_HELLO_BYTES, "a token is the start of a hello");

#define EXEC_HELLO_MAGIC 0x6f6c6c6568646962ull   /* "bidhello" */
#define EXEC_PULL_BLOCK (256 * 1024)             /* bounce buffer: stays in L2 */

static exec_hello_t *hello_at(const braid_op_t *op, int rank)
{
    return (exec_hello_t *)((char *)op->bufs[BRAID_BUF_HELLO] +
                            (size_t)rank * BRAID_HELLO_BYTES);
}

static int ref_bad(braid_ref_t r, size_t bytes, size_t hello_bytes)
{
    return r.buf >= BRAID_BUF_NUM ||
           (r.buf == BRAID_BUF_HELLO && (r.off > hello_bytes || bytes > hello_bytes - r.off));
}

/* What the executor relies on for pulls and hellos: checked once per op. */
static braid_status_t sched_check(const braid_op_t *op, int *hello_p)
{
    size_t hb = (size_t)op->nranks * BRAID_HELLO_BYTES;
    *hello_p = 0;
    for (int i = 0; i < op->sched.nsteps; i++) {
        const braid_step_t *st = &op->sched.steps[i];
        int pull = st->pull_peer >= 0;
        *hello_p |= pull || st->src.buf == BRAID_BUF_HELLO || st->dst.buf == BRAID_BUF_HELLO;
        if (ref_bad(st->src, st->bytes, hb) || ref_bad(st->dst, st->bytes, hb) ||
            (pull && (st->pull_peer >= op->nranks || st->recv_peer >= 0 || st->send_peer >= 0 ||
                      st->dst.buf == BRAID_BUF_NONE ||
                      (st->pull.buf != BRAID_BUF_SEND && st->pull.buf != BRAID_BUF_RECV))))
            return braid_err(BRAID_ERR_INTERNAL, "step %d of the %s schedule of rank %d is "
                             "malformed (pull from %d, buffers %d/%d/%d): a braid bug, please "
                             "report it", i, braid_coll_name((braid_coll_kind_t)op->hdr.kind),
                             op->rank, (int)st->pull_peer, st->src.buf, st->dst.buf,
                             st->pull.buf);
    }
    return BRAID_OK;
}

/* The hello table, with this rank's own record filled in. */
static braid_status_t hello_init(braid_op_t *op)
{
    op->bufs[BRAID_BUF_HELLO] = calloc((size_t)op->nranks, BRAID_HELLO_BYTES);
    if (op->bufs[BRAID_BUF_HELLO] == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for the hello table of %d ranks",
                         op->nranks);
    exec_hello_t *h = hello_at(op, op->rank);
    h->magic = EXEC_HELLO_MAGIC;
    h->seq = op->hdr.seq;
    h->proc_key = braid_cma_proc_key();
    h->addr[0] = (uint64_t)(uintptr_t)op->bufs[BRAID_BUF_SEND];
    h->addr[1] = (uint64_t)(uintptr_t)op->bufs[BRAID_BUF_RECV];
    h->premul = op->redop.scalar;
    h->has_premul = op->redop.premul;
    h->pid = (int32_t)getpid();
    h->rank = op->rank;
    return BRAID_OK;
}

braid_status_t braid_exec_pull_prepare(braid_op_t *op)
{
    int hello;
    BRAID_CHECK(sched_check(op, &hello));
    return hello ? hello_init(op) : BRAID_OK;
}

void braid_exec_pull_release(braid_op_t *op)
{
    free(op->bufs[BRAID_BUF_HELLO]);
    op->bufs[BRAID_BUF_HELLO] = NULL;
    op->bounce = NULL;
}

static char *pull_ref_ptr(const braid_op_t *op, braid_ref_t r, size_t off)
{
    return r.buf == BRAID_BUF_NONE ? NULL : (char *)op->bufs[r.buf] + r.off + off;
}

static braid_status_t pull_hello(const braid_op_t *op, int peer, const exec_hello_t **h_p)
{
    const exec_hello_t *h = hello_at(op, peer);
    if (h->magic != EXEC_HELLO_MAGIC || h->seq != op->expect.seq || h->rank != peer)
        return braid_err(BRAID_ERR_INTERNAL, "%s #%llu: rank %d pulls from rank %d before its "
                         "hello arrived (a braid bug, please report it)",
                         braid_coll_name((braid_coll_kind_t)op->hdr.kind),
                         (unsigned long long)op->hdr.seq, op->rank, peer);
    *h_p = h;
    return BRAID_OK;
}

/*
 * A read fails when the peer is gone (ESRCH: its memory is released early in its exit) or
 * aborted (its buffers may be freed): the communicator's own checks say which, and why,
 * better than errno can, so they speak first. A dying process takes a while to show as
 * dead in /proc: wait for that (bounded), so that this rank and the others, which check
 * /proc while they wait, all name the dead rank rather than the ranks that gave up on it.
 */
static braid_status_t pull_failed(const braid_op_t *op, const exec_hello_t *h, int e)
{
    BRAID_INFO(BRAID_SUB_COLL, "rank %d: process_vm_readv from rank %d (pid %d) failed: %s",
               op->rank, h->rank, (int)h->pid, strerror(e));
    for (int i = 0; e == ESRCH && i < 2000 && braid_proc_alive(h->pid, 0) == BRAID_PROC_ALIVE;
         i++) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    if (op->hooks != NULL && op->hooks->check != NULL)
        BRAID_CHECK(op->hooks->check(op->hook_ctx, op, 1));
    return BRAID_OK;
}

static braid_status_t pull_read(const braid_op_t *op, const exec_hello_t *h, void *to,
                                uint64_t from, size_t len)
{
    int e = braid_cma_read(h->pid, to, from, len);
    const char *what = braid_coll_name((braid_coll_kind_t)op->hdr.kind);
    unsigned long long seq = (unsigned long long)op->hdr.seq;
    if (e == 0)
        return BRAID_OK;
    BRAID_CHECK(pull_failed(op, h, e));
    if (e == ESRCH)
        return braid_err(BRAID_ERR_REMOTE, "rank %d (pid %d) exited or was killed while rank %d "
                         "read its buffer in %s #%llu", h->rank, (int)h->pid, op->rank, what,
                         seq);
    return braid_err(e == EFAULT ? BRAID_ERR_REMOTE : BRAID_ERR_SYSTEM,
                     "rank %d cannot read %zu bytes at 0x%llx of rank %d (pid %d) in %s #%llu: "
                     "%s%s", op->rank, len, (unsigned long long)from, h->rank, (int)h->pid, what,
                     seq, strerror(e),
                     e == EFAULT ? " (that rank's buffer is smaller than the call says)"
                                 : "; set BRAID_SHM_CMA=0 to pass messages through shared "
                                   "memory instead");
}

/*
 * The bounce buffer belongs to the thread that drives the op: a thread moves one slice at a
 * time, so all the ops it drives can share one, and it stays mapped (and warm) from one
 * call to the next instead of costing page faults in every call. Freed at thread exit.
 */
static pthread_once_t bounce_once = PTHREAD_ONCE_INIT;
static pthread_key_t bounce_key;
static _Thread_local char *bounce_mine;

static void bounce_key_make(void)
{
    pthread_key_create(&bounce_key, free);
}

static braid_status_t pull_bounce(braid_op_t *op)
{
    if (bounce_mine == NULL) {
        pthread_once(&bounce_once, bounce_key_make);
        bounce_mine = aligned_alloc(4096, EXEC_PULL_BLOCK);
        if (bounce_mine == NULL)
            return braid_err(BRAID_ERR_NOMEM, "out of memory for a %d-byte pull buffer",
                             EXEC_PULL_BLOCK);
        pthread_setspecific(bounce_key, bounce_mine);
    }
    op->bounce = bounce_mine;
    return BRAID_OK;
}

/* Own contribution's pre-multiplier in a pull step (NULL: none). */
static const braid_scalar_t *pull_pre_own(const braid_op_t *op, const braid_step_t *st,
                                          const char *src)
{
    int own = (st->flags & BRAID_STEP_REDUCE) && !(st->flags & BRAID_STEP_ACC) && src != NULL;
    return own && op->redop.premul ? &op->redop.scalar : NULL;
}

/* dst = pulled (times the peer's pre_p) combined with pre(src); `p` is readable here. When
 * both sides need a pre-multiply, the pulled block is scaled into the bounce first. */
static void pull_combine(braid_op_t *op, const braid_step_t *st, char *dst, const char *p,
                         const char *src, size_t len, const braid_scalar_t *pre_p)
{
    size_t n = len / op->sched.align;
    const braid_redop_spec_t *r = &op->redop;
    const braid_scalar_t *pre_s = pull_pre_own(op, st, src);
    int reduce = (st->flags & BRAID_STEP_REDUCE) && src != NULL;

    if (pre_s != NULL && pre_p != NULL) {
        braid_kern_scale(op->dtype, op->bounce, p, n, pre_p);
        p = op->bounce;
        pre_p = NULL;
    }
    if (reduce && pre_s != NULL)
        braid_kern_reduce(op->dtype, r->kind, dst, p, src, n, pre_s);
    else if (reduce)
        braid_kern_reduce(op->dtype, r->kind, dst, src, p, n, pre_p);
    else if (pre_p != NULL)
        braid_kern_scale(op->dtype, dst, p, n, pre_p);
    else if (dst != p)
        braid_kern_copy(dst, p, len);
    if ((st->flags & BRAID_STEP_FINAL) && r->postdiv > 1)
        braid_kern_divide(op->dtype, dst, dst, n, r->postdiv);
}

/*
 * One slice of a pull step. A peer in this process is read in place. Another process is
 * read with cross-memory attach: a plain copy straight into dst, anything that computes
 * block by block through the bounce buffer, so the pulled block is still in cache when it
 * is combined.
 */
braid_status_t braid_exec_pull_slice(braid_op_t *op, const braid_step_t *st, size_t off,
                                     size_t len)
{
    const exec_hello_t *h = NULL, *me = hello_at(op, op->rank);
    BRAID_CHECK(pull_hello(op, st->pull_peer, &h));
    const braid_scalar_t *pre_p =
        (st->flags & BRAID_STEP_PULL_PRE) && h->has_premul ? &h->premul : NULL;
    uint64_t from = h->addr[st->pull.buf == BRAID_BUF_RECV] + st->pull.off + off;
    char *dst = pull_ref_ptr(op, st->dst, off);
    const char *src = pull_ref_ptr(op, st->src, off);
    int direct = !op->pull_cma && h->pid == me->pid && h->proc_key == me->proc_key;
    int plain = pre_p == NULL && !((st->flags & BRAID_STEP_REDUCE) && src != NULL);
    size_t block = len;

    if ((!direct && !plain) || (pre_p != NULL && pull_pre_own(op, st, src) != NULL)) {
        BRAID_CHECK(pull_bounce(op));
        block = EXEC_PULL_BLOCK;
    }
    for (size_t o = 0; o < len; o += block) {
        size_t b = len - o < block ? len - o : block;
        const char *p = (const char *)(uintptr_t)(from + o);
        if (!direct) {
            char *to = plain ? dst + o : op->bounce;
            BRAID_CHECK(pull_read(op, h, to, from + o, b));
            p = to;
        }
        pull_combine(op, st, dst + o, p, src != NULL ? src + o : NULL, b, pre_p);
    }
    return BRAID_OK;
}
