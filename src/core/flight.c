/*
 * The flight recorder's records, its registry of live rings and its signal handlers
 * (the dump is flight_dump.c).
 *
 * Signal handlers cannot take the communicator registry's lock (the thread they interrupt
 * may hold it), so the rings have a registry of their own: a fixed table of atomic
 * pointers and a count of handlers reading it. A ring leaves the table before it is freed
 * and waits until no handler reads the table; a handler counts itself in before it reads
 * a pointer, so it never reads a ring that is freed under it.
 *
 * Signals: SIGUSR1 dumps every live communicator and the program goes on (the handler is
 * installed where SIGUSR1 had its default action, and chains to the program's own handler
 * where it had one; a SIGUSR1 the program ignores is left alone). SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL and SIGABRT dump every live communicator, then restore the handler that was there
 * before and raise the signal again, so the process dies of it (or the program's own
 * handler runs) as it would have without braid.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/flight_int.h"
#include "base/log.h"
#include "base/param.h"

#define FLIGHT_LIVE_MAX 256

char braid_flight_host[FLIGHT_HOST_MAX] = "unknown";
const char *braid_flight_file = "";

static _Atomic(braid_flight_t *) flight_live[FLIGHT_LIVE_MAX];
static atomic_int flight_readers;           /* signal handlers reading flight_live */
static pthread_once_t flight_once = PTHREAD_ONCE_INIT;

/* ---- signals ------------------------------------------------------------------------- */

static const int flight_fatal[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
#define FLIGHT_NFATAL (sizeof(flight_fatal) / sizeof(flight_fatal[0]))
static struct sigaction flight_old_fatal[FLIGHT_NFATAL];
static struct sigaction flight_old_usr1;
static atomic_int flight_dying;

static void flight_dump_all(const char *why)
{
    atomic_fetch_add(&flight_readers, 1);
    for (int i = 0; i < FLIGHT_LIVE_MAX; i++) {
        braid_flight_t *f = atomic_load(&flight_live[i]);
        if (f != NULL)
            braid_flight_dump(f, why, NULL, 1);
    }
    atomic_fetch_sub(&flight_readers, 1);
}

static void flight_on_usr1(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    flight_dump_all("SIGUSR1");
    errno = saved;
    if (flight_old_usr1.sa_flags & SA_SIGINFO)
        flight_old_usr1.sa_sigaction(sig, si, uc);
    else if (flight_old_usr1.sa_handler != SIG_DFL && flight_old_usr1.sa_handler != SIG_IGN)
        flight_old_usr1.sa_handler(sig);
}

static const char *flight_signame(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    default: return "SIGABRT";
    }
}

static void flight_on_fatal(int sig, siginfo_t *si, void *uc)
{
    (void)si, (void)uc;
    if (atomic_exchange(&flight_dying, 1) == 0)   /* one dump, by the first to fail */
        flight_dump_all(flight_signame(sig));
    for (size_t i = 0; i < FLIGHT_NFATAL; i++)
        if (flight_fatal[i] == sig)
            sigaction(sig, &flight_old_fatal[i], NULL);
    /* blocked until this handler returns: then the previous disposition takes it (a fault
     * of an instruction would also come back when it runs again) */
    raise(sig);
}

static void flight_install(void (*fn)(int, siginfo_t *, void *), int sig,
                           struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, old);
}

static void flight_once_init(void)
{
    if (gethostname(braid_flight_host, sizeof(braid_flight_host) - 1) != 0)
        strcpy(braid_flight_host, "unknown");
    braid_flight_host[strcspn(braid_flight_host, ".")] = '\0';
    braid_flight_file = braid_param_str(BRAID_P_FLIGHT_RECORDER_FILE);
    for (size_t i = 0; i < FLIGHT_NFATAL; i++)
        flight_install(flight_on_fatal, flight_fatal[i], &flight_old_fatal[i]);
    struct sigaction cur;
    if (sigaction(SIGUSR1, NULL, &cur) == 0 && cur.sa_handler != SIG_IGN)
        flight_install(flight_on_usr1, SIGUSR1, &flight_old_usr1);
}

/* ---- rings ---------------------------------------------------------------------------- */

braid_status_t braid_flight_create(int rank, int nranks, uint64_t nonce, const char *name,
                                   braid_flight_t **f_p)
{
    int64_t n = braid_param_int(BRAID_P_FLIGHT_RECORDER);
    *f_p = NULL;
    if (n <= 0)
        return BRAID_OK;
    braid_flight_t *f = calloc(1, sizeof(*f) + (size_t)n * sizeof(braid_flight_rec_t));
    if (f == NULL)
        return braid_err(BRAID_ERR_NOMEM, "out of memory for a flight recorder of %lld "
                         "operations (BRAID_FLIGHT_RECORDER); use fewer, or 0", (long long)n);
    f->n = (uint32_t)n;
    f->rank = rank;
    f->nranks = nranks;
    f->nonce = nonce;
    strncpy(f->name, name, sizeof(f->name) - 1);
    pthread_once(&flight_once, flight_once_init);
    int i = 0;
    for (braid_flight_t *none = NULL; i < FLIGHT_LIVE_MAX; i++, none = NULL)
        if (atomic_compare_exchange_strong(&flight_live[i], &none, f))
            break;
    if (i == FLIGHT_LIVE_MAX)
        BRAID_INFO(BRAID_SUB_INIT, "%d communicators have a flight recorder: a signal dumps "
                   "those, not this one (rank %d)", FLIGHT_LIVE_MAX, rank);
    *f_p = f;
    return BRAID_OK;
}

void braid_flight_destroy(braid_flight_t *f)
{
    if (f == NULL)
        return;
    for (int i = 0; i < FLIGHT_LIVE_MAX; i++) {
        braid_flight_t *mine = f;
        if (atomic_compare_exchange_strong(&flight_live[i], &mine, NULL))
            break;
    }
    while (atomic_load(&flight_readers) > 0)   /* a handler may still be reading it */
        sched_yield();
    free(f);
}

#define ST(_f, _v) atomic_store_explicit(&r->_f, (_v), memory_order_relaxed)

void braid_flight_queued(braid_flight_t *f, braid_op_t *op, int timed)
{
    if (f == NULL)
        return;
    /* ops of a comm are enqueued by one thread at a time (as its sequence numbers are) */
    uint64_t i = atomic_load_explicit(&f->head, memory_order_relaxed);
    uint32_t slot = atomic_load_explicit(&f->next, memory_order_relaxed);
    braid_flight_rec_t *r = &f->recs[slot];
    const braid_msg_hdr_t *h = &op->hdr;
    ST(id, 0);
    atomic_thread_fence(memory_order_release);   /* a reader that sees a new field sees 0 */
    ST(seq, h->seq);
    ST(count, h->count);
    ST(call, (uint32_t)h->kind | (uint32_t)h->dtype << 8 | (uint32_t)h->op << 16 |
                 (uint32_t)h->algo << 24);
    ST(root, h->kind == BRAID_COLL_SEND || h->kind == BRAID_COLL_RECV ? op->p2p_peer : h->root);
    ST(state, BRAID_FLIGHT_QUEUED);
    ST(status, 0);
    ST(step, 0);
    ST(nsteps, op->sched.nsteps);
    ST(waits_on, -1);
    ST(flags, op->on_device ? BRAID_FLIGHT_DEVICE : 0);
    ST(t_enq, timed ? braid_flight_us(braid_now()) : 0);
    ST(t_start, 0);
    ST(t_check, 0);
    ST(t_end, 0);
    atomic_store_explicit(&r->id, i + 1, memory_order_release);
    atomic_store_explicit(&f->next, slot + 1 == f->n ? 0 : slot + 1, memory_order_relaxed);
    atomic_store_explicit(&f->head, i + 1, memory_order_release);
    op->flight_rec = r;
    op->flight_id = i + 1;
}

void braid_flight_unqueue(braid_flight_t *f, braid_op_t *op)
{
    if (f == NULL || braid_flight_rec(op) == NULL ||
        atomic_load_explicit(&f->head, memory_order_relaxed) != op->flight_id)
        return;
    uint32_t slot = atomic_load_explicit(&f->next, memory_order_relaxed);
    atomic_store_explicit(&op->flight_rec->id, 0, memory_order_relaxed);
    atomic_store_explicit(&f->next, slot == 0 ? f->n - 1 : slot - 1, memory_order_relaxed);
    atomic_store_explicit(&f->head, op->flight_id - 1, memory_order_release);
    op->flight_rec = NULL;
}

void braid_flight_progress(const braid_op_t *op, int waits_on)
{
    braid_flight_rec_t *r = braid_flight_rec(op);
    if (r == NULL)
        return;
    if (atomic_load_explicit(&r->t_check, memory_order_relaxed) == 0 && waits_on >= 0)
        BRAID_INFO(BRAID_SUB_COLL, "%s #%llu waits on rank %d (step %d of %d)",
                   braid_coll_name((braid_coll_kind_t)op->hdr.kind),
                   (unsigned long long)op->hdr.seq, waits_on, op->step, op->sched.nsteps);
    ST(step, op->step);
    ST(waits_on, waits_on);
    ST(t_start, braid_flight_us(op->first_clock));
    ST(t_check, braid_flight_us(braid_now()));
}
