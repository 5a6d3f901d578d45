/*
 * soak: random collectives on 4 ranks over 2 emulated hosts for a while, a rank killed at a
 * random moment, the survivors shrinking and going on; every result checked, no leak, no
 * hang (issue 21). scripts/soak.sh runs it for minutes, tests/integration/test_soak.sh for
 * one in `make check`. See soak.h for its files.
 *
 *     soak [-s SECONDS] [-S SEED] [-n RANKS] [-k KILLS] [-K ITER[,ITER]] [-m MAX_BYTES]
 *          [-d] [-r]
 *
 *   -s  how long the ranks issue collectives (default 60)
 *   -S  the seed every rank draws from (default: from the clock; printed, to replay a run)
 *   -n  ranks (2 to 4, default 4): the first half on host soak-a, the rest on soak-b
 *   -k  ranks to kill, one after the other (0 to n-2, default 1)
 *   -K  kill i in iteration ITER of epoch i instead of at a drawn moment of the run: with
 *       -S, replays a run whose kills the report gives (same victim and phase)
 *   -m  the largest buffer of a collective, in bytes (default 4 MiB)
 *   -d  device buffers in a quarter of the iterations (needs libcuda.so.1: NVIDIA's, or
 *       braid's emulated driver on LD_LIBRARY_PATH)
 *   -r  report the heap's growth, do not judge it
 *
 * The launcher forks the ranks (tests/fault/fault_util.c), waits for them (each has a
 * watchdog; the launcher kills them all past its own deadline), then prints what they did
 * and the figures, and judges: the victims killed by SIGKILL and nothing else, every
 * survivor done and its communicators closed, heap growth within RSS_MAX_GROWTH per
 * iteration after each epoch's warm-up, and no /dev/shm segment of the job left.
 * Exit status as automake reads it: 0 pass, 1 fail, 99 hard error.
 */
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "soak.h"
#include "tests/fault/fault_util.h"

/*
 * Resident anonymous memory (RssAnon: the heap and private mappings, where a leak grows)
 * may grow by RSS_MAX_GROWTH per iteration, measured between the first and last thirds of
 * an epoch after its warm-up (soak.h: soak_rss_t), judged where they are RSS_MIN_ITERS
 * iterations apart at least, unless the growth stays under RSS_NOISE_KB in all. The test's
 * buffers are made and touched before the first init, so what grows is the library's: one
 * leaked schedule, op record or message per iteration (hundreds of bytes and up) passes
 * the bound over the thousands of iterations of a run. What does not: the allocator's
 * high-water mark, which rises in steps as rarer large requests come and then stays (seen:
 * +1.3 MiB over the first 1800 iterations of a 3-rank epoch, then +12 KiB over the next
 * 2200; +1.7 MiB over 900 iterations of a 4-rank one), hence the floor; a 1-minute run
 * thus catches leaks from about 4 KiB per iteration, a 10-minute one from 1 KiB. Shared memory (the shm FIFOs' pages, which count
 * as random sizes first touch them) is reported, not judged. In a sanitizer build the heap
 * is measured as its allocator counts it instead (soak_heap_kb), judged the same way.
 */
#define RSS_MAX_GROWTH 1024.0
#define RSS_NOISE_KB 4096
#define RSS_MIN_ITERS 500
/* In a sanitizer build the heap is its allocator's count of the bytes the program holds:
 * no cache of free memory in it (seen: the same count, to the KiB, in both thirds of a
 * 256-iteration epoch), so a floor of 64 KiB and a span of 50 iterations (a 20-second run
 * under the sanitizer makes a few hundred iterations in all). */
#define HEAP_NOISE_KB 64
#define HEAP_MIN_ITERS 50
/* The allocator returns freed blocks of this size and more to the system at once, and trims
 * its heap past RSS_TRIM: its cache of free memory, which the measure would count, stays
 * small (set before the fork, so every rank has it). */
#define RSS_MMAP_THRESHOLD (64 << 10)
#define RSS_TRIM (128 << 10)
#define LAUNCH_MARGIN_S 120   /* past the run: setup, shrinks, timeouts of a bad run */

soak_shared_t *soak_sh;

static void usage(void)
{
    fprintf(stderr, "usage: soak [-s SECONDS] [-S SEED] [-n RANKS (2-4)] [-k KILLS] "
            "[-K ITER[,ITER]] [-m MAX_BYTES] [-d] [-r]\n");
    exit(99);
}

/* -K 120,480: the kills' iterations (each at least 1) */
static void kill_iters(const char *arg, soak_opts_t *o)
{
    char *end;
    for (int i = 0; i < SOAK_MAX_KILLS && *arg != '\0'; i++, arg = end + (*end == ',')) {
        long v = strtol(arg, &end, 10);
        if (end == arg || v < 1 || (*end != ',' && *end != '\0'))
            usage();
        o->kill_iter[i] = (int)v;
    }
}

static void options(int argc, char **argv, soak_opts_t *o)
{
    *o = (soak_opts_t){ .seconds = 60, .nranks = 4, .kills = 1, .max_bytes = 4u << 20 };
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    o->seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
    o->seed %= 1000000007u;   /* short enough to type again */
    for (int c; (c = getopt(argc, argv, "s:S:n:k:K:m:dr")) != -1;) {
        switch (c) {
        case 's': o->seconds = atof(optarg); break;
        case 'S': o->seed = strtoull(optarg, NULL, 0); break;
        case 'n': o->nranks = atoi(optarg); break;
        case 'k': o->kills = atoi(optarg); break;
        case 'K': kill_iters(optarg, o); break;
        case 'm': o->max_bytes = strtoull(optarg, NULL, 0); break;
        case 'd': o->device = 1; break;
        case 'r': o->rss_report_only = 1; break;
        default: usage();
        }
    }
    if (optind != argc || o->seconds <= 0 || o->nranks < 2 || o->nranks > SOAK_MAX_RANKS ||
        o->kills < 0 || o->kills > SOAK_MAX_KILLS || o->kills > o->nranks - 2 ||
        o->max_bytes < 64)
        usage();
}

static void setenv_default(const char *name, const char *value)
{
    setenv(name, value, 0);
}

/* ---- the report ---------------------------------------------------------------------- */

static void report_kills(const int *status)
{
    const soak_opts_t *o = &soak_sh->o;
    if (o->kills > 0) {
        printf("soak: replay this run with: soak -S %llu -s %.0f -n %d -k %d -K %d",
               (unsigned long long)o->seed, o->seconds, o->nranks, o->kills,
               soak_sh->kill[0].iter);
        for (int i = 1; i < o->kills; i++)
            printf(",%d", soak_sh->kill[i].iter);
        printf(" -m %zu%s%s\n", o->max_bytes, o->device ? " -d" : "",
               o->rss_report_only ? " -r" : "");
    }
    for (int i = 0; i < o->kills; i++) {
        const soak_kill_t *k = &soak_sh->kill[i];
        if (k->t_kill == 0) {
            ft_fail("kill %d never happened (the run ended first?)", i + 1);
            continue;
        }
        printf("soak: kill %d: launch rank %d (pid %d, rank %d of epoch %d) at %.1f s, "
               "iteration %d, %s; died in iteration %d\n", i + 1, k->victim, (int)k->pid,
               k->victim_comm, k->epoch, k->t_kill - soak_sh->t0, k->iter,
               k->phase == 0 ? "before its calls" : "from a thread after its calls started",
               k->died_in_iter);
        if (k->phase == 1)
            printf("soak:   (%d us after the calls were issued)\n", k->delay_us);
        if (!ft_killed(status[k->victim], SIGKILL))
            ft_fail("launch rank %d was to die by SIGKILL; its status is 0x%x", k->victim,
                    status[k->victim]);
        for (int r = 0; r < o->nranks; r++) {
            const soak_stats_t *st = &soak_sh->st[r];
            if (st->noticed_how[i][0] == '\0')
                continue;
            printf("soak:   rank %d noticed it after %.3f s in its iteration %d, shrank in "
                   "%.3f s: %s\n", r, st->noticed_s[i], st->noticed_iter[i], st->shrink_s[i],
                   st->noticed_how[i]);
        }
    }
}

static int is_victim(int r)
{
    for (int i = 0; i < soak_sh->o.kills; i++)
        if (soak_sh->kill[i].t_kill != 0 && soak_sh->kill[i].victim == r)
            return 1;
    return 0;
}

/* Resident growth of rank r in epoch e: judged where the epoch ran long enough. */
static void report_rss(int r, int e)
{
    const soak_rss_t *m = &soak_sh->st[r].rss[e];
    double span = m->last_iter - m->first_iter;
    if (m->nsamples < 3) {
        printf("soak:   rank %d epoch %d: %ld iterations, too few after the warm-up to "
               "sample memory\n", r, e, m->end_iter);
        return;
    }
    double growth = (double)(m->last_kb - m->first_kb) * 1024.0 / span;
    int exact = soak_heap_exact();
    double min_iters = exact ? HEAP_MIN_ITERS : RSS_MIN_ITERS;
    long floor_kb = exact ? HEAP_NOISE_KB : RSS_NOISE_KB;
    int long_enough = !soak_sh->o.rss_report_only && span >= min_iters;
    int judged = long_enough && m->last_kb - m->first_kb > floor_kb;
    printf("soak:   rank %d epoch %d: %ld iterations; %s peak %ld KiB around iteration "
           "%.0f, %ld KiB around %.0f: %+.0f B/iteration%s", r, e, m->end_iter,
           exact ? "heap (the sanitizer's count)" : "RssAnon", m->first_kb, m->first_iter,
           m->last_kb, m->last_iter, growth,
           soak_sh->o.rss_report_only ? " (not judged: -r)"
           : span < min_iters ? " (too few iterations to judge)" : "");
    if (long_enough && !judged)
        printf(" (under the %ld KiB floor)", floor_kb);
    printf("\n");
    if (judged && growth > RSS_MAX_GROWTH)
        ft_fail("rank %d: its heap grew by %.0f B per iteration in epoch %d (limit %.0f)",
                r, growth, e, RSS_MAX_GROWTH);
}

static void report_rank(int r, int status)
{
    const soak_stats_t *st = &soak_sh->st[r];
    if (is_victim(r))
        printf("soak: rank %d (killed): %ld iterations before its death\n", r, st->iters);
    else if (!ft_exited(status, 0) || !st->done)
        ft_fail("rank %d ended with status 0x%x (done %d)%s%s", r, status, st->done,
                st->failed_how[0] ? ": " : "", st->failed_how);
    if (is_victim(r))
        return;
    printf("soak: rank %d: %ld iterations, %ld agreements, %ld collectives (%ld groups, %ld "
           "iterations on device buffers), %ld splits, %.1f MiB in buffers\n", r, st->iters,
           st->syncs, st->ops, st->groups, st->dev_iters, st->splits, st->bytes / 1048576.0);
    printf("soak:   rank %d by kind:", r);
    for (int k = 0; k < SK_NKINDS; k++)
        printf(" %s %ld", soak_kind_names[k], st->by_kind[k]);
    printf("\nsoak:   rank %d fds: %d before init, after warm-up", r, st->fd_start);
    for (int e = 0; e <= soak_sh->o.kills; e++)
        printf(" %d + %d..%d device (epoch %d)", st->fd_base[e], st->dev_base[e],
               st->dev_max[e], e);
    printf(", %d after the last destroy; %s %ld KiB before init, %ld KiB at the end "
           "(RssShmem %ld KiB)\n", st->fd_end, soak_heap_exact() ? "heap" : "RssAnon",
           st->rss_start_kb, st->rss_end_kb, st->shmem_end_kb);
    for (int e = 0; e <= soak_sh->o.kills; e++)
        report_rss(r, e);
}

static void report(const int *status)
{
    const soak_opts_t *o = &soak_sh->o;
    report_kills(status);
    for (int r = 0; r < o->nranks; r++)
        report_rank(r, status[r]);
    int left = 0;
    for (int r = 0; r < o->nranks; r++)
        left += ft_shm_leftovers(ft_sh->pid[r], 1);
    printf("soak: /dev/shm: %d segment(s) of the job left\n", left);
}

int main(int argc, char **argv)
{
    int status[SOAK_MAX_RANKS];
    ft_name = "soak";
    setvbuf(stdout, NULL, _IOLBF, 0);
    soak_sh = mmap(NULL, sizeof(*soak_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    if (soak_sh == MAP_FAILED)
        return 99;
    options(argc, argv, &soak_sh->o);
    const soak_opts_t *o = &soak_sh->o;
    /* between the hosts: the socket provider on loopback; a hang ends as an error */
    setenv_default("NCCL_NET", "Socket");
    setenv_default("NCCL_SOCKET_IFNAME", "lo");
    setenv_default("BRAID_TIMEOUT", "60");
    setenv_default("BRAID_BOOTSTRAP_TIMEOUT", "30");
    printf("soak: seed %llu, %d ranks on 2 hosts (ranks 0-%d soak-a, %d-%d soak-b), %.0f s, "
           "%d kill(s), buffers up to %zu bytes, %s buffers\n", (unsigned long long)o->seed,
           o->nranks, o->nranks / 2 - 1, o->nranks / 2, o->nranks - 1, o->seconds, o->kills,
           o->max_bytes, o->device ? "host and device" : "host");
    mallopt(M_MMAP_THRESHOLD, RSS_MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, RSS_TRIM);
    soak_sh->t0 = ft_now();
    if (ft_launch(o->nranks, soak_rank_main, o->seconds + LAUNCH_MARGIN_S, status) != 0)
        return 99;
    printf("soak: ranks done after %.1f s\n", ft_now() - soak_sh->t0);
    report(status);
    printf("soak: %s (%d failure(s))\n", ft_failures() ? "FAIL" : "PASS", ft_failures());
    return ft_failures() ? 1 : 0;
}
