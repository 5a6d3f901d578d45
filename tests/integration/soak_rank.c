/*
 * soak: one rank. Ranks 0..n/2-1 are host "soak-a" and the others host "soak-b"
 * (NCCL_HOSTID), so that traffic between the halves goes over the net transport (socket
 * provider on loopback) and within a half over shared memory.
 *
 * The run is a series of epochs, one per communicator: the world of the launch, then each
 * shrunk one. An epoch's iterations are drawn from a generator seeded by (seed, epoch):
 * a single collective, a group of several, or now and then a split (its children used,
 * finalized and destroyed). Every SYNC_EVERY iterations the ranks agree, by an all-reduce,
 * on whether the time is up and whether a kill is due; a due kill is planned from the
 * epoch's control generator: iteration (a few ahead), victim (any rank, rank 0 included)
 * and phase (at the start of the iteration, or from a thread once its calls are issued,
 * after a drawn delay). The victim raise(SIGKILL)s itself there. A survivor's call fails:
 * it checks the error (ncclRemoteError or ncclSystemError, naming the victim, within
 * DETECT_LIMIT_S of the kill), aborts a split child in use, calls ncclCommShrink(...,
 * NCCL_SHRINK_ABORT) without the victim, aborts the old communicator and starts the next
 * epoch. Rank 0 of the launch may die: the survivors' shrink reaches their own bootstrap
 * listeners only, not the launch's root.
 *
 * Leak probes: the open file descriptors at each agreement equal the epoch's count after
 * its warm-up (WARM_ITERS; device memory of the emulated driver, one memfd per allocation,
 * may grow by what the library keeps: see DEV_SCRATCH_KEPT), a split's destroy gives back
 * every descriptor it took, and after the last destroy the count is the one before the
 * first init. Resident anonymous memory (the heap: what a leak grows) is sampled at every
 * agreement after the warm-up, and the launcher judges its growth (soak.h: soak_rss_t).
 * Shared memory is left out of it: the pages of the shm FIFOs count as they are first
 * touched, which random sizes do over many iterations, up to the segments' size (the
 * segments themselves are checked in /dev/shm).
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "soak.h"
#include "tests/fault/fault_util.h"

#define SYNC_EVERY 16
#define WARM_ITERS 64
#define SPLIT_ONE_IN 24
#define DEVICE_ONE_IN 4
#define KILL_DELAY_MAX_US 3000
#define DETECT_LIMIT_S 15.0
/* The descriptors of device memory on braid's emulated driver (emu/emu_mem.c),
 * and how many more of them a communicator may come to keep after the warm-up: its device
 * executor keeps up to 16 scratch buffers, made as bigger or more concurrent ones are
 * needed (src/exec/dev_slice.c). The split and final destroys must give back every one. */
#define EMU_DEVICE_MEMFD "memfd:braid-emu-device"
#define DEV_SCRATCH_KEPT 16
#define MAX_SAMPLES 8192        /* of resident memory per epoch: 36 hours at 1 kHz */

char soak_where[96];

/* This epoch's resident-memory samples (iteration, KiB), touched before the first init. */
static struct { long iter, kb; } samples[MAX_SAMPLES];
static int nsamples;

typedef struct rank_state {
    soak_comm_t c;
    int orig[SOAK_MAX_RANKS];   /* launch rank of each rank of c */
    int epoch, kills;
    long iter;                  /* in the epoch */
    uint64_t rng, ctl;
    double kill_at[SOAK_MAX_KILLS];
    soak_kill_t plan;           /* the next kill, once planned */
    soak_stats_t *st;
    int me;                     /* launch rank */
} rank_state_t;

int soak_fd_count(int *dev_p)
{
    DIR *d = opendir("/proc/self/fd");
    int n = -1, dev = 0;   /* -1: the directory's own descriptor */
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[300], target[64];
        if (e->d_name[0] == '.')
            continue;
        n++;
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t len = dev_p != NULL ? readlink(path, target, sizeof(target) - 1) : -1;
        if (len > 0) {
            target[len] = '\0';
            dev += strstr(target, EMU_DEVICE_MEMFD) != NULL;
        }
    }
    closedir(d);
    if (dev_p != NULL)
        *dev_p = dev;
    return n;
}

long soak_rss_kb(const char *field)
{
    char line[256];
    long kb = -1;
    size_t len = strlen(field);
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return -1;
    while (kb < 0 && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, field, len) == 0 && line[len] == ':')
            kb = strtol(line + len + 1, NULL, 10);
    fclose(f);
    return kb;
}

/* AddressSanitizer's count of the bytes its allocator holds for the program: in a
 * sanitizer build, the heap as a leak grows it (freed blocks in the quarantine are not in
 * it, where they are in RssAnon); NULL in other builds. */
size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));

int soak_heap_exact(void)
{
    return __sanitizer_get_current_allocated_bytes != NULL;
}

long soak_heap_kb(void)
{
    if (__sanitizer_get_current_allocated_bytes != NULL)
        return (long)(__sanitizer_get_current_allocated_bytes() >> 10);
    return soak_rss_kb("RssAnon");
}

/* Every open descriptor and what it is, for a failure report. */
static void fd_list(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[300], target[256];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t n = e->d_name[0] == '.' ? -1 : readlink(path, target, sizeof(target) - 1);
        if (n >= 0)
            fprintf(stderr, "soak: pid %d fd %s -> %.*s\n", (int)getpid(), e->d_name, (int)n,
                    target);
    }
    closedir(d);
}

static soak_stats_t *fail_st;   /* this rank's, where soak_fail leaves its text */

static const char *where_now(void)
{
    return soak_where[0] ? soak_where : "at its start";
}

void soak_fail(const char *fmt, ...)
{
    char text[SOAK_TEXT];
    int n = snprintf(text, sizeof(text), "%s: ", where_now());
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text + n, sizeof(text) - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL soak: %s\n", text);
    if (fail_st != NULL)
        memcpy(fail_st->failed_how, text, sizeof(text));
    exit(1);
}

/* ft_launch's watchdog (SIGALRM at the launch's limit) ends a rank that hangs: its text
 * says where, as a failure's does (a process about to _exit may format in a handler). */
static void on_watchdog(int sig)
{
    (void)sig;
    char text[SOAK_TEXT];
    int n = snprintf(text, sizeof(text), "%s: watchdog: the launch's time limit passed "
                     "(hang)", where_now());
    if (fail_st != NULL)
        memcpy(fail_st->failed_how, text, sizeof(text));
    if (write(2, "FAIL soak: ", 11) < 0 || write(2, text, (size_t)n) < 0 ||
        write(2, "\n", 1) < 0)
        _exit(1);
    _exit(1);
}

static void die(rank_state_t *rs, const char *fmt, const char *detail)
{
    char what[SOAK_TEXT];
    snprintf(what, sizeof(what), fmt, detail);
    soak_fail("rank %d (launch rank %d): %s", rs->c.rank, rs->me, what);
}

static uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t s = a ^ (b * 0xd1b54a32d192ed03ull);
    return soak_rng(&s);
}

static void epoch_start(rank_state_t *rs)
{
    rs->rng = mix(soak_sh->o.seed, 2 * (uint64_t)rs->epoch + 1);
    rs->ctl = mix(soak_sh->o.seed, 2 * (uint64_t)rs->epoch + 2);
    rs->iter = 0;
    ncclCommUserRank(rs->c.comm, &rs->c.rank);
    ncclCommCount(rs->c.comm, &rs->c.nranks);
    rs->st->fd_base[rs->epoch] = -1;
}

/* ---- leak probes ------------------------------------------------------------------- */

/* The file descriptors and resident size at an agreement; the baseline after warm-up. */
static void probe(rank_state_t *rs)
{
    soak_stats_t *st = rs->st;
    int dev, fds = soak_fd_count(&dev), e = rs->epoch;
    char msg[96];
    if (rs->iter + 1 < WARM_ITERS)
        return;
    if (rs->iter + 1 == WARM_ITERS) {
        st->fd_base[e] = fds - dev;
        st->dev_base[e] = st->dev_max[e] = dev;
    }
    st->dev_max[e] = dev > st->dev_max[e] ? dev : st->dev_max[e];
    if (fds - dev != st->fd_base[e] || dev > st->dev_base[e] + DEV_SCRATCH_KEPT) {
        snprintf(msg, sizeof(msg), "%d open (%d of device memory), %d (%d) after the warm-up",
                 fds, dev, st->fd_base[e] + st->dev_base[e], st->dev_base[e]);
        fd_list();
        die(rs, "file descriptors changed: %s", msg);
    }
    if (nsamples == MAX_SAMPLES)
        nsamples--;   /* keep the latest */
    samples[nsamples].iter = rs->iter + 1;
    samples[nsamples++].kb = soak_heap_kb();
}

/* The peak and mean iteration of samples [lo, hi). */
static void third(int lo, int hi, long *peak_p, double *iter_p)
{
    double sum = 0;
    *peak_p = 0;
    for (int i = lo; i < hi; i++) {
        *peak_p = samples[i].kb > *peak_p ? samples[i].kb : *peak_p;
        sum += (double)samples[i].iter;
    }
    *iter_p = sum / (hi - lo);
}

/* The epoch ends (a death noticed, or the run's end): its memory figures. */
static void epoch_end(rank_state_t *rs)
{
    soak_rss_t *m = &rs->st->rss[rs->epoch];
    int t = nsamples / 3;
    m->nsamples = nsamples;
    m->end_iter = rs->iter;
    if (t > 0) {
        third(0, t, &m->first_kb, &m->first_iter);
        third(nsamples - t, nsamples, &m->last_kb, &m->last_iter);
    }
    nsamples = 0;
}

/* ---- the kill ------------------------------------------------------------------------ */

static volatile long cur_iter;

static void die_now(soak_kill_t *k)
{
    k->t_kill = ft_now();
    k->died_in_iter = (int)cur_iter;
    raise(SIGKILL);
}

static void *killer_main(void *arg)
{
    soak_kill_t *k = arg;
    while (!soak_in_call)
        ft_sleep(0.0001);
    double until = ft_now() + k->delay_us * 1e-6;
    while (ft_now() < until)
        ;   /* busy: the calls progress on the main thread meanwhile */
    die_now(k);
    return NULL;
}

/* At the start of iteration rs->iter: is this rank to die in it? The victim alone writes
 * the shared record of the kill. */
static void kill_maybe(rank_state_t *rs)
{
    soak_kill_t *k = &soak_sh->kill[rs->kills];
    cur_iter = rs->iter;
    if (!rs->plan.planned || rs->plan.iter != rs->iter || rs->plan.victim_comm != rs->c.rank)
        return;
    *k = rs->plan;
    k->pid = getpid();
    if (k->phase == 0)
        die_now(k);
    pthread_t t;
    if (pthread_create(&t, NULL, killer_main, k) != 0)
        die(rs, "%s", "cannot start the killer thread");
}

/* A due kill, planned identically on every rank from the control generator, in the next
 * SYNC_EVERY iterations. */
static void kill_plan(rank_state_t *rs)
{
    uint64_t d = soak_rng(&rs->ctl);
    int forced = soak_sh->o.kill_iter[rs->kills];
    rs->plan = (soak_kill_t){
        .planned = 1, .epoch = rs->epoch, .iter = (int)(rs->iter + 1 + (long)(d % SYNC_EVERY)),
        .phase = (int)((d >> 8) & 1), .victim_comm = (int)((d >> 16) % (uint64_t)rs->c.nranks),
        .delay_us = (int)((d >> 32) % KILL_DELAY_MAX_US),
    };
    rs->plan.victim = rs->orig[rs->plan.victim_comm];
    if (forced > rs->iter)   /* -K: a replay (the same draw: victim, phase, delay) */
        rs->plan.iter = forced;
}

/* ---- a death noticed ----------------------------------------------------------------- */

/* The launch rank of the process whose pid the text gives just before `phrase` ("rank R
 * (pid P on HOST) phrase"), or -1. */
static int named_before(const char *text, const char *phrase)
{
    const char *at = strstr(text, phrase), *p;
    if (at == NULL)
        return -1;
    for (p = at; p > text && strncmp(p, "(pid ", 5) != 0; p--)
        ;
    int pid = strncmp(p, "(pid ", 5) == 0 ? atoi(p + 5) : 0;
    for (int r = 0; pid > 0 && r < soak_sh->o.nranks; r++)
        if (soak_sh->st[r].pid == pid)
            return r;
    return -1;
}

/*
 * Does the error text name the victim (its rank in the failing communicator, or its pid)?
 * Or, where the call waited on a survivor that noticed death `kill` first and has aborted
 * the communicator for its shrink (a send or receive waits on its peer only), that one:
 * a rank that records noticing it (another name is a wrong one). Its failure is published
 * inside its failing call, before it records it: waited for, DETECT_LIMIT_S at most.
 */
static int names_victim(const char *text, int victim_rank, pid_t pid, int kill)
{
    static const char *const survivor[] = { ") aborted its communicator while",
                                            ") failed while" };
    char a[32], b[32];
    snprintf(a, sizeof(a), "rank %d ", victim_rank);
    snprintf(b, sizeof(b), "pid %d", (int)pid);
    if (strstr(text, a) != NULL || strstr(text, b) != NULL)
        return 1;
    for (size_t i = 0; i < sizeof(survivor) / sizeof(survivor[0]); i++) {
        int r = named_before(text, survivor[i]);
        if (r < 0)
            continue;
        const volatile char *how = soak_sh->st[r].noticed_how[kill];
        double deadline = ft_now() + DETECT_LIMIT_S;
        while (how[0] == '\0' && ft_now() < deadline)
            ft_sleep(0.001);
        return how[0] != '\0';
    }
    return 0;
}

/*
 * A call on `comm` (rs's communicator, or a split child where the victim has rank
 * victim_in) failed with res: the death is expected, or the run fails. Records how long
 * the death took to be noticed, and how.
 */
static void noticed(rank_state_t *rs, ncclComm_t comm, int victim_in, ncclResult_t res)
{
    char text[SOAK_TEXT - 64];
    snprintf(text, sizeof(text), "%s", ncclGetLastError(comm));
    if (!rs->plan.planned || rs->iter < rs->plan.iter - 1)
        die(rs, "a call failed with no rank killed: %s", text);
    soak_kill_t *k = &soak_sh->kill[rs->kills];
    double deadline = ft_now() + DETECT_LIMIT_S;
    while (k->t_kill == 0 && ft_now() < deadline)
        ft_sleep(0.001);   /* the victim wrote it before its raise: ordering only */
    double took = ft_now() - k->t_kill;
    soak_stats_t *st = rs->st;
    st->noticed_s[rs->kills] = took;
    st->noticed_iter[rs->kills] = (int)rs->iter;
    snprintf(st->noticed_how[rs->kills], SOAK_TEXT, "%s: %s", ncclGetErrorString(res), text);
    if (res != ncclRemoteError && res != ncclSystemError)
        die(rs, "the death was reported as %s, not ncclRemoteError or ncclSystemError",
            st->noticed_how[rs->kills]);
    if (k->t_kill == 0 || took > DETECT_LIMIT_S)
        die(rs, "the death took too long to be noticed (limit 15 s): %s",
            st->noticed_how[rs->kills]);
    if (victim_in >= 0 && !names_victim(text, victim_in, k->pid, rs->kills))
        die(rs, "the error does not name the killed rank: %s", st->noticed_how[rs->kills]);
}

/* Shrink rs's communicator without the victim, abort the old one: the next epoch. */
static void shrink(rank_state_t *rs)
{
    epoch_end(rs);
    int excl = rs->plan.victim_comm;
    ncclComm_t next = NULL;
    double t0 = ft_now();
    ncclResult_t r = ncclCommShrink(rs->c.comm, &excl, 1, &next, NULL, NCCL_SHRINK_ABORT);
    rs->st->shrink_s[rs->kills] = ft_now() - t0;
    if (r != ncclSuccess)
        die(rs, "ncclCommShrink failed: %s", ncclGetLastError(rs->c.comm));
    if (ncclCommAbort(rs->c.comm) != ncclSuccess)
        die(rs, "ncclCommAbort of the shrunk communicator failed: %s", ncclGetLastError(NULL));
    for (int i = excl; i + 1 < rs->c.nranks; i++)
        rs->orig[i] = rs->orig[i + 1];
    rs->c.comm = next;
    rs->kills++;
    rs->epoch++;
    rs->plan.planned = 0;
    epoch_start(rs);
}

/* A call failed: notice the death (victim_in: the victim's rank in `comm`, -1 if it is not
 * a member), abort `child` if one is in use, shrink. */
static int failed(rank_state_t *rs, ncclComm_t comm, int victim_in, ncclComm_t child,
                  ncclResult_t r)
{
    noticed(rs, comm, victim_in, r);
    if (child != NULL && ncclCommAbort(child) != ncclSuccess)
        die(rs, "ncclCommAbort of a split child failed: %s", ncclGetLastError(NULL));
    shrink(rs);
    return 1;
}

/* ---- iterations ---------------------------------------------------------------------- */

/* The victim's rank in the child of its color, ordered by (key, parent rank); -1 if it is
 * not in the child of color `mine`. */
static int child_rank_of(const int *color, const int *key, int n, int v, int mine)
{
    if (color[v] != mine || mine == NCCL_SPLIT_NOCOLOR)
        return -1;
    int pos = 0;
    for (int r = 0; r < n; r++)
        pos += color[r] == mine && (key[r] < key[v] || (key[r] == key[v] && r < v));
    return pos;
}

/*
 * A split: colors by parity, by host, or drawn (NOCOLOR among them), keys drawn; each
 * child runs 1 to 3 iterations of its own generator, is finalized and destroyed, and gives
 * back every file descriptor it took.
 */
static int split_iter(rank_state_t *rs, int device)
{
    uint64_t e = soak_rng(&rs->rng), crng = soak_rng(&rs->rng);
    int n = rs->c.nranks, me = rs->c.rank, color[SOAK_MAX_RANKS], key[SOAK_MAX_RANKS];
    for (int r = 0; r < n; r++) {
        int bits = (int)((e >> (8 + 2 * r)) & 3);
        color[r] = e % 3 == 0 ? r % 2 : e % 3 == 1 ? rs->orig[r] >= soak_sh->o.nranks / 2
                 : bits == 3 ? NCCL_SPLIT_NOCOLOR : bits & 1;
        key[r] = (int)((e >> (24 + 8 * r)) & 0xff);
    }
    int fds = soak_fd_count(NULL), nit = 1 + (int)((e >> 62) % 3);
    ncclComm_t child = NULL;
    soak_in_call = 1;
    ncclResult_t r = ncclCommSplit(rs->c.comm, color[me], key[me], &child, NULL);
    soak_in_call = 0;
    if (r != ncclSuccess)
        return failed(rs, rs->c.comm, rs->plan.victim_comm, NULL, r);
    rs->st->splits++;
    if (child == NULL)
        return 0;
    soak_comm_t cc = { .comm = child };
    ncclCommUserRank(child, &cc.rank);
    ncclCommCount(child, &cc.nranks);
    for (int i = 0; i < nit && r == ncclSuccess; i++)
        r = soak_coll_iter(&cc, &crng, device, rs->st);
    if (r == ncclSuccess)
        r = ncclCommFinalize(child);
    if (r != ncclSuccess)
        return failed(rs, child, rs->plan.planned ? child_rank_of(color, key, n,
                      rs->plan.victim_comm, color[me]) : -1, child, r);
    if (ncclCommDestroy(child) != ncclSuccess)
        die(rs, "ncclCommDestroy of a split child failed: %s", ncclGetLastError(NULL));
    int now = soak_fd_count(NULL);
    if (now != fds) {
        char msg[64];
        snprintf(msg, sizeof(msg), "%d before the split, %d after", fds, now);
        fd_list();
        die(rs, "a split child's destroy left file descriptors open: %s", msg);
    }
    return 0;
}

/* One iteration: 1 when the communicator changed (a death noticed, shrunk). */
static int iteration(rank_state_t *rs)
{
    snprintf(soak_where, sizeof(soak_where), "seed %llu epoch %d iteration %ld",
             (unsigned long long)soak_sh->o.seed, rs->epoch, rs->iter);
    kill_maybe(rs);
    uint64_t d = soak_rng(&rs->rng);
    int device = soak_sh->o.device && (d >> 8) % DEVICE_ONE_IN == 0;
    if (d % SPLIT_ONE_IN == 0)
        return split_iter(rs, device);
    ncclResult_t r = soak_coll_iter(&rs->c, &rs->rng, device, rs->st);
    return r == ncclSuccess ? 0 : failed(rs, rs->c.comm, rs->plan.victim_comm, NULL, r);
}

/*
 * Every SYNC_EVERY iterations: agree on stopping (time is up and no kill is pending) and
 * on a due kill. 1 when the communicator changed.
 */
static int agree(rank_state_t *rs, int *stop_p)
{
    double now = ft_now() - soak_sh->t0;
    int k = rs->kills, forced = k < soak_sh->o.kills ? soak_sh->o.kill_iter[k] : 0;
    int32_t v[2] = { now >= soak_sh->o.seconds && !rs->plan.planned,
                     k < soak_sh->o.kills && !rs->plan.planned &&
                     (forced ? rs->iter + SYNC_EVERY >= forced : now >= rs->kill_at[k]) };
    rs->st->syncs++;
    soak_in_call = 1;
    ncclResult_t r = soak_coll_agree(&rs->c, v, 2);
    soak_in_call = 0;
    if (r != ncclSuccess)
        return failed(rs, rs->c.comm, rs->plan.victim_comm, NULL, r);
    if (v[1] && !v[0])
        kill_plan(rs);
    *stop_p = v[0];
    probe(rs);
    return 0;
}

int soak_rank_main(int rank, int nranks)
{
    rank_state_t rs = { .me = rank, .st = &soak_sh->st[rank] };
    soak_stats_t *st = rs.st;
    st->pid = (int)getpid();
    int k = soak_sh->o.kills;
    fail_st = st;
    signal(SIGALRM, on_watchdog);   /* the alarm ft_launch set stays */
    setenv("NCCL_HOSTID", rank < nranks / 2 ? "soak-a" : "soak-b", 1);
    if (soak_coll_setup(&soak_sh->o) != 0)
        die(&rs, "%s", "out of memory for the buffers");
    memset(samples, 0xa5, sizeof(samples));
    st->fd_start = soak_fd_count(NULL);
    st->rss_start_kb = soak_heap_kb();
    rs.c.comm = ft_comm_init(rank, nranks);
    for (int r = 0; r < nranks; r++)
        rs.orig[r] = r;
    uint64_t kc = mix(soak_sh->o.seed, 0);
    for (int i = 0; i < k; i++)   /* kill i in a window of 30% of the run around (i+.5)/(k+1) */
        rs.kill_at[i] = soak_sh->o.seconds * ((i + 0.5) / (k + 1) - 0.15 +
                                              0.3 * (double)(soak_rng(&kc) % 1000) / 1000);
    epoch_start(&rs);
    for (int stop = 0; !stop;) {
        if (iteration(&rs))
            continue;   /* a new epoch */
        if ((rs.iter + 1) % SYNC_EVERY == 0 && agree(&rs, &stop))
            continue;
        rs.iter++;
        st->iters++;
    }
    epoch_end(&rs);
    st->rss_end_kb = soak_heap_kb();
    st->shmem_end_kb = soak_rss_kb("RssShmem");
    if (ncclCommFinalize(rs.c.comm) != ncclSuccess || ncclCommDestroy(rs.c.comm) != ncclSuccess)
        die(&rs, "closing the last communicator failed: %s", ncclGetLastError(NULL));
    st->fd_end = soak_fd_count(NULL);
    if (st->fd_end != st->fd_start) {
        char msg[64];
        snprintf(msg, sizeof(msg), "%d before the first init, %d now", st->fd_start, st->fd_end);
        fd_list();
        die(&rs, "file descriptors left open after the last destroy: %s", msg);
    }
    st->done = 1;
    return 0;
}
