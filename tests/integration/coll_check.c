/*
 * coll_check: every collective on host buffers, checked exactly (see coll_check.h).
 *
 *   coll_check [opts]          one rank per process: RANK, WORLD_SIZE and NCCL_COMM_ID
 *                              from the environment (braidrun sets them)
 *   coll_check -p N [opts]     fork N such processes here (a launcher of its own)
 *   coll_check -t N [opts]     N ranks as threads of this process (ncclCommInitAll), one
 *                              thread driving them all with groups
 *   coll_check -T N [opts]     N threads, one rank each (ncclCommInitRank)
 *
 *   -q           quick: no large counts (sanitizer builds)
 *   -o LIST      only these sections (comma list): reduce random move p2p group split
 *                shrink nonblocking v; and api debug narrow, which run only when named
 *                (run_coll.sh names them in a few runs: the variants gain them nothing;
 *                narrow checks every op of all-reduce on 3+ ranks only under
 *                NCCL_ALGO=allreduce:oneshot, whose order of combination it knows)
 *   -w SECONDS   watchdog (default 300): a run that takes longer fails, naming the phase
 *   -v           print the time of each section
 *   -F           destroy communicators without ncclCommFinalize (isolates finalize bugs)
 *   -d           device buffers, through the CUDA driver (coll_dev.c): every checked
 *                buffer (cc_buf) gets a device twin that the calls take, with a stream
 *   -D           with -d, -p or -T: rank r uses device r % (the driver's device count)
 *   -S N         with -d: each call takes the next of N streams of its thread (the legacy
 *                default stream the last, but with -T), with nothing ordering them but
 *                the library, which must run a communicator's calls in the order they came
 *
 * Exit: 0 all passed, 1 a failure (one line each on stderr), 99 a usage or setup error.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll_check.h"

typedef struct opts {
    int procs, threads_one, threads_each;
    int quick, verbose, watchdog_s;
    const char *only;
} opts_t;

static opts_t opt = { .watchdog_s = 300 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_alarm(int sig)
{
    char msg[256];
    (void)sig;
    int len = snprintf(msg, sizeof(msg), "FAIL coll_check pid %d: watchdog expired after %d s "
                       "in phase '%s' (hang?)\n", (int)getpid(), opt.watchdog_s, cc_phase());
    if (write(2, msg, (size_t)len) < 0)
        _exit(1);
    _exit(1);
}

static void usage_exit(const char *why)
{
    fprintf(stderr, "coll_check: %s\nusage: coll_check [-p N | -t N | -T N] [-q] [-v] "
            "[-o sections] [-w seconds] [-F] [-d [-D] [-S N]]\n", why);
    exit(99);
}

static int section_on(const char *name, int named_only)
{
    if (opt.only == NULL)
        return !named_only;
    size_t len = strlen(name);
    for (const char *p = opt.only; (p = strstr(p, name)) != NULL; p += len)
        if ((p == opt.only || p[-1] == ',') && (p[len] == '\0' || p[len] == ','))
            return 1;
    return 0;
}

typedef struct section {
    const char *name;
    void (*run)(cc_world_t *w);
    int named_only;   /* runs only when -o names it */
} section_t;

static const section_t sections[] = {
    { "reduce", cc_test_reduce, 0 }, { "random", cc_test_random, 0 },
    { "move", cc_test_move, 0 }, { "p2p", cc_test_p2p, 0 },
    { "group", cc_test_mixed_group, 0 }, { "split", cc_test_split, 0 },
    { "shrink", cc_test_shrink, 0 }, { "nonblocking", cc_test_nonblocking, 0 },
    { "v", cc_test_v, 0 },
    { "api", cc_test_api, 1 }, { "debug", cc_test_debug, 1 }, { "narrow", cc_test_narrow, 1 },
};

/* Every name in -o must be a section: a misspelt one would run nothing and pass. */
static void sections_check(void)
{
    for (const char *p = opt.only; p != NULL && *p != '\0';) {
        size_t len = strcspn(p, ","), i = 0;
        while (i < sizeof(sections) / sizeof(sections[0]) &&
               !(strlen(sections[i].name) == len && strncmp(sections[i].name, p, len) == 0))
            i++;
        if (i == sizeof(sections) / sizeof(sections[0]))
            usage_exit("-o names an unknown section");
        p += len + (p[len] == ',');
    }
}

/* Everything on one world, then close its communicators. */
static void run_world(cc_world_t *w)
{
    double t0 = now_s();
    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
        if (!section_on(sections[i].name, sections[i].named_only))
            continue;
        double t = now_s();
        sections[i].run(w);
        if (opt.verbose && w->ranks[0] == 0)
            printf("coll_check %s: %-12s %6.2f s\n", w->mode, sections[i].name, now_s() - t);
    }
    cc_set_phase("ncclCommFinalize/ncclCommDestroy");
    cc_comms_close(w, w->comms, w->nlocal, 0);
    if (w->ranks[0] == 0)
        printf("coll_check %s: %d ranks, %.1f s\n", w->mode, w->nranks, now_s() - t0);
}

static void world_base(cc_world_t *w, int nranks, const char *mode)
{
    memset(w, 0, sizeof(*w));
    w->nranks = nranks;
    w->mode = mode;
    w->quick = opt.quick;
}

/* ---- (a) one rank per process ------------------------------------------------------ */

static int env_int(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? atoi(v) : -1;
}

static int run_process(void)
{
    cc_world_t w;
    ncclUniqueId id;
    int rank = env_int("RANK"), n = env_int("WORLD_SIZE");
    if (rank < 0 || n < 1 || rank >= n || getenv("NCCL_COMM_ID") == NULL)
        usage_exit("process mode needs RANK, WORLD_SIZE and NCCL_COMM_ID (or use -p/-t/-T)");
    world_base(&w, n, "proc");
    w.nlocal = 1;
    w.ranks[0] = rank;
    cc_set_phase("ncclCommInitRank");
    cc_dev_thread_init(rank);
    CC_NCCL(&w, "ncclGetUniqueId", ncclGetUniqueId(&id));
    CC_NCCL(&w, "ncclCommInitRank", ncclCommInitRank(&w.comms[0], n, id, rank));
    CC_NCCL(&w, "ncclGetUniqueId", ncclGetUniqueId(&w.nb_id));   /* same root address */
    run_world(&w);
    return cc_failures() ? 1 : 0;
}

/* A free TCP port on the loopback for NCCL_COMM_ID. */
static int free_port(void)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("coll_check: cannot find a free port");
        exit(99);
    }
    close(fd);
    return ntohs(a.sin_port);
}

static int launch(int n)
{
    char port[64], num[16];
    pid_t *pids = cc_xmalloc((size_t)n * sizeof(pid_t));
    snprintf(port, sizeof(port), "127.0.0.1:%d", free_port());
    setenv("NCCL_COMM_ID", port, 1);
    snprintf(num, sizeof(num), "%d", n);
    setenv("WORLD_SIZE", num, 1);
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            perror("coll_check: fork");
            exit(99);
        }
        if (pids[r] == 0) {
            snprintf(num, sizeof(num), "%d", r);
            setenv("RANK", num, 1);
            setenv("LOCAL_RANK", num, 1);
            alarm((unsigned)opt.watchdog_s);
            exit(run_process());
        }
    }
    int rc = 0;
    for (int r = 0; r < n; r++) {
        int status;
        waitpid(pids[r], &status, 0);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (code != 0) {
            fprintf(stderr, "coll_check: rank %d (pid %d) exited with %d\n", r, (int)pids[r],
                    code);
            rc = rc ? rc : (code == 99 ? 99 : 1);
        }
    }
    free(pids);
    return rc;
}

/* ---- (b) one thread drives all ranks ---------------------------------------------- */

static int run_threads_one(int n)
{
    cc_world_t w;
    world_base(&w, n, "threads-one");
    w.nlocal = n;
    for (int r = 0; r < n; r++)
        w.ranks[r] = r;
    cc_set_phase("ncclCommInitAll");
    cc_dev_thread_init(0);
    CC_NCCL(&w, "ncclCommInitAll", ncclCommInitAll(w.comms, n, NULL));
    CC_NCCL(&w, "ncclGetUniqueId", ncclGetUniqueId(&w.nb_id));
    run_world(&w);
    return cc_failures() ? 1 : 0;
}

/* ---- (c) a thread per rank --------------------------------------------------------- */

typedef struct thread_arg {
    pthread_t tid;
    int rank, n;
    ncclUniqueId id, nb_id;
} thread_arg_t;

static void *rank_thread(void *p)
{
    thread_arg_t *a = p;
    cc_world_t w;
    world_base(&w, a->n, "threads-each");
    w.nlocal = 1;
    w.ranks[0] = a->rank;
    w.nb_id = a->nb_id;
    cc_dev_thread_init(a->rank);
    CC_NCCL(&w, "ncclCommInitRank", ncclCommInitRank(&w.comms[0], a->n, a->id, a->rank));
    run_world(&w);
    return NULL;
}

static int run_threads_each(int n)
{
    thread_arg_t *a = cc_xmalloc((size_t)n * sizeof(*a));
    ncclUniqueId id, nb_id;
    cc_set_phase("ncclCommInitRank");
    CC_NCCL(NULL, "ncclGetUniqueId", ncclGetUniqueId(&id));
    CC_NCCL(NULL, "ncclGetUniqueId", ncclGetUniqueId(&nb_id));
    cc_dev_threads(n);
    for (int r = 0; r < n; r++) {
        a[r] = (thread_arg_t){ .rank = r, .n = n, .id = id, .nb_id = nb_id };
        if (pthread_create(&a[r].tid, NULL, rank_thread, &a[r]) != 0)
            usage_exit("cannot create a thread");
    }
    for (int r = 0; r < n; r++)
        pthread_join(a[r].tid, NULL);
    free(a);
    return cc_failures() ? 1 : 0;
}

int main(int argc, char **argv)
{
    int c;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while ((c = getopt(argc, argv, "p:t:T:qvo:w:FdDS:")) != -1) {
        switch (c) {
        case 'p': opt.procs = atoi(optarg); break;
        case 't': opt.threads_one = atoi(optarg); break;
        case 'T': opt.threads_each = atoi(optarg); break;
        case 'q': opt.quick = 1; break;
        case 'v': opt.verbose = 1; break;
        case 'o': opt.only = optarg; break;
        case 'w': opt.watchdog_s = atoi(optarg); break;
        case 'F': cc_skip_finalize = 1; break;
        case 'd': cc_device = 1; break;
        case 'D': cc_spread = 1; break;
        case 'S': cc_streams = atoi(optarg); break;
        default: usage_exit("unknown option");
        }
    }
    int n = opt.procs ? opt.procs : opt.threads_one ? opt.threads_one : opt.threads_each;
    if (n < 0 || n > CC_MAX_LOCAL)
        usage_exit("rank count out of range");
    if (cc_streams < 1 || cc_streams > CC_MAX_STREAMS)
        usage_exit("stream count out of range");
    cc_streams_default = !opt.threads_each;
    sections_check();
    signal(SIGALRM, on_alarm);
    if (opt.procs)
        return launch(opt.procs);
    alarm((unsigned)opt.watchdog_s);
    if (opt.threads_one)
        return run_threads_one(opt.threads_one);
    if (opt.threads_each)
        return run_threads_each(opt.threads_each);
    return run_process();
}
