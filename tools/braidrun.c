/*
 * braidrun: start N ranks of a command on this machine, as torchrun does.
 *
 *     braidrun -n 4 [-k SECONDS] [-b | --no-bind] [--report-bindings] [--] CMD [ARGS...]
 *
 * Each rank is CMD run with RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE (torchrun's
 * names), NCCL_COMM_ID=127.0.0.1:PORT (where rank 0's ncclCommInitRank starts the
 * bootstrap root; every rank's ncclGetUniqueId then returns the same id) and
 * MASTER_ADDR/MASTER_PORT (for torch.distributed's env:// init). NCCL_COMM_ID, MASTER_ADDR
 * and MASTER_PORT already in the environment are kept.
 *
 * The ports: braidrun binds a free loopback port with SO_REUSEADDR and keeps that socket,
 * not listening, until the job ends. The kernel hands the port to nobody else meanwhile,
 * while rank 0, which also sets SO_REUSEADDR, can still listen on it: no window in which
 * another program could take it.
 *
 * Binding: each rank runs on CPUs of its own, as mpirun binds ranks to cores, so that the
 * scheduler cannot put two ranks on one CPU (the one waiting must then hand the CPU to the
 * other: microseconds a turn where a core of its own answers in a fraction of one;
 * docs/PERFORMANCE.md). Each rank gets an equal share of whole cores (its threads, a data
 * loader's workers, keep the share's CPUs), or one CPU where there are fewer cores than
 * ranks. By default braidrun binds when that is safe: 2 ranks or more, no more than the
 * CPUs the job may use (braidrun's own affinity, and its cgroup's CPU quota), braidrun not
 * already bound by a launcher or the user (its affinity is all its cgroup's cpuset, or all
 * the machine's CPUs), and no other braidrun holding those CPUs. -b binds whenever the
 * ranks fit braidrun's CPUs, --no-bind never. --report-bindings says what was chosen, and
 * why.
 *
 * SIGINT, SIGTERM and SIGHUP are forwarded to every rank (each rank is its own process
 * group, so a terminal's Ctrl-C reaches the ranks once, through braidrun). When a rank
 * fails, the others get -k seconds (default 10, or BRAIDRUN_KILL_AFTER) to finish, then
 * SIGTERM, then SIGKILL 5 s later. Exit status: 0 if every rank exited 0, otherwise that of
 * the first rank that failed (128 + signal for a signal); 2 for bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BR_MAX_RANKS 4096
enum { BR_BIND_AUTO = -1, BR_BIND_NO = 0, BR_BIND_YES = 1 };
#define BR_KILL_GRACE_S 5.0   /* SIGTERM to SIGKILL */

typedef struct br_rank {
    pid_t pid;
    int alive;
    int status;        /* wait status once reaped */
    int killed;        /* braidrun sent it SIGTERM/SIGKILL */
} br_rank_t;

typedef struct br_job {
    int n;
    double grace_s;    /* -k: how long the others may run after a rank fails */
    int bind;          /* BR_BIND_*; after br_parse: rank r runs on share[r] only */
    int report;        /* --report-bindings */
    cpu_set_t *share;  /* [n] where bound */
    char **cmd;
    br_rank_t *ranks;
    int alive, first_failed, exit_status;
    double term_at, kill_at;   /* monotonic seconds; 0 = not scheduled */
    int port_fd[2];
    int port[2];
} br_job_t;

static void br_usage(FILE *out)
{
    fprintf(out,
            "usage: braidrun -n N [-k SECONDS] [-b | --no-bind] [--report-bindings] [--]\n"
            "                CMD [ARGS...]\n"
            "  Start N ranks of CMD on this machine, each with RANK, WORLD_SIZE, LOCAL_RANK,\n"
            "  LOCAL_WORLD_SIZE, NCCL_COMM_ID=127.0.0.1:PORT, MASTER_ADDR and MASTER_PORT.\n"
            "  -n N        number of ranks (1 to %d)\n"
            "  -k SECONDS  after a rank fails, wait this long for the others, then stop them\n"
            "              (default 10, or BRAIDRUN_KILL_AFTER)\n"
            "  -b, --bind  bind each rank to CPUs of its own: an equal share of the cores, or\n"
            "              one CPU each where cores are fewer than ranks (N at most the CPUs)\n"
            "  --no-bind   do not bind (default: bind when N is 2 or more, fits the CPUs the\n"
            "              job may use, and nothing bound braidrun already)\n"
            "  --report-bindings  say where each rank runs, or why the ranks are not bound\n"
            "  -h, --help  this help\n"
            "  SIGINT, SIGTERM and SIGHUP are forwarded to all ranks. Exit status: 0 if all\n"
            "  ranks exit 0, else the first failing rank's status (128+signal if killed).\n",
            BR_MAX_RANKS);
}

static double br_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A non-negative number of seconds; -1 if `s` is not one. */
static double br_parse_seconds(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    return (errno != 0 || end == s || *end != '\0' || !(v >= 0) || v > 1e6) ? -1 : v;
}

/* The first line of a file, without its newline; -1 if it cannot be read. */
static int br_read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char *got = fgets(buf, (int)len, f);
    fclose(f);
    if (got == NULL)
        return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* A CPU list as the kernel writes it ("0-3,8,10-11") into `set`; -1 if it is not one. */
static int br_cpulist(const char *s, cpu_set_t *set)
{
    CPU_ZERO(set);
    while (*s != '\0') {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s || lo < 0)
            return -1;
        if (*end == '-') {
            s = end + 1;
            hi = strtol(s, &end, 10);
            if (end == s || hi < lo)
                return -1;
        }
        for (long c = lo; c <= hi && c < CPU_SETSIZE; c++)
            CPU_SET((int)c, set);
        s = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0')
            return -1;
    }
    return 0;
}

/* This process's cgroup directory of `controller` under /sys/fs/cgroup: cgroup v1's
 * "N:controller[,...]:/path" or v2's "0::/path"; 0 if found. */
static int br_cgroup_dir(const char *controller, char *dir, size_t len)
{
    char line[512];
    int found = -1;
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f == NULL)
        return -1;
    while (found != 0 && fgets(line, sizeof(line), f) != NULL) {
        char *ctl = strchr(line, ':'), *path = ctl != NULL ? strchr(ctl + 1, ':') : NULL;
        if (path == NULL)
            continue;
        *path++ = '\0';
        path[strcspn(path, "\n")] = '\0';
        ctl++;
        if (ctl[0] == '\0') {   /* v2: used when no v1 hierarchy has the controller */
            if (found != 0)
                found = snprintf(dir, len, "/sys/fs/cgroup%s", path) < (int)len ? 1 : -1;
            continue;
        }
        for (char *tok = strtok(ctl, ","); tok != NULL; tok = strtok(NULL, ","))
            if (strcmp(tok, controller) == 0 &&
                snprintf(dir, len, "/sys/fs/cgroup/%s%s", controller, path) < (int)len)
                found = 0;
    }
    fclose(f);
    return found < 0 ? -1 : 0;
}

/* The CPUs this job may use: its cgroup's cpuset (v1's cpuset.effective_cpus, v2's
 * cpuset.cpus.effective, from the nearest level that has one), else the online CPUs. */
static void br_job_cpuset(cpu_set_t *set)
{
    char dir[512], path[600], list[4096];
    static const char *const files[] = { "cpuset.effective_cpus", "cpuset.cpus.effective" };
    if (br_cgroup_dir("cpuset", dir, sizeof(dir)) == 0)
        for (;;) {
            for (int i = 0; i < 2; i++) {
                snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
                if (br_read_line(path, list, sizeof(list)) == 0 && list[0] != '\0' &&
                    br_cpulist(list, set) == 0)
                    return;
            }
            char *slash = strrchr(dir, '/');
            if (slash == NULL || slash - dir <= (long)strlen("/sys/fs/cgroup"))
                break;
            *slash = '\0';
        }
    if (br_read_line("/sys/devices/system/cpu/online", list, sizeof(list)) != 0 ||
        br_cpulist(list, set) != 0)
        sched_getaffinity(0, sizeof(*set), set);
}

/* The CPU time the job may use, in CPUs: the smallest quota of its cgroup and the levels
 * above (v2's cpu.max "QUOTA PERIOD", v1's cpu.cfs_quota_us / cpu.cfs_period_us), rounded
 * up; 0 when there is none. */
static int br_job_quota(void)
{
    char dir[512], path[600], a[64], b[64];
    int cpus = 0;
    if (br_cgroup_dir("cpu", dir, sizeof(dir)) != 0)
        return 0;
    for (;;) {
        long quota = -1, period = 0;
        snprintf(path, sizeof(path), "%s/cpu.max", dir);
        if (br_read_line(path, a, sizeof(a)) == 0) {
            if (sscanf(a, "%ld %ld", &quota, &period) != 2)
                quota = -1;   /* "max PERIOD": none */
        } else {
            snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", dir);
            char per[600];
            snprintf(per, sizeof(per), "%s/cpu.cfs_period_us", dir);
            if (br_read_line(path, a, sizeof(a)) == 0 && br_read_line(per, b, sizeof(b)) == 0) {
                quota = strtol(a, NULL, 10);
                period = strtol(b, NULL, 10);
            }
        }
        if (quota > 0 && period > 0) {
            int q = (int)((quota + period - 1) / period);
            cpus = cpus == 0 || q < cpus ? q : cpus;
        }
        char *slash = strrchr(dir, '/');
        if (slash == NULL || slash - dir < (long)strlen("/sys/fs/cgroup"))
            break;
        *slash = '\0';
    }
    return cpus;
}

/* The CPUs of `set` core by core, in order of their first CPU: cores[i] holds core i's
 * hardware threads that are in `set`. Returns the number of cores. */
static int br_cores(const cpu_set_t *set, cpu_set_t *cores)
{
    char path[128], sib[256];
    int n = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        cpu_set_t siblings;
        if (!CPU_ISSET(cpu, set))
            continue;
        snprintf(path, sizeof(path),
                 "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu);
        if (br_read_line(path, sib, sizeof(sib)) != 0 || br_cpulist(sib, &siblings) != 0 ||
            !CPU_ISSET(cpu, &siblings)) {
            CPU_ZERO(&siblings);
            CPU_SET(cpu, &siblings);
        }
        CPU_AND(&siblings, &siblings, set);
        int first = 0;
        while (!CPU_ISSET(first, &siblings))
            first++;
        if (first == cpu)   /* the core's first thread in `set`: a core not met before */
            cores[n++] = siblings;
    }
    return n;
}

/* Each rank's share of `avail`: whole cores, as many for each (the cores left over unused),
 * where every rank gets one; else one CPU each, the cores' first threads before their
 * second ones. -1 if the ranks outnumber the CPUs. */
static int br_shares(const cpu_set_t *avail, int n, cpu_set_t *share)
{
    static cpu_set_t cores[CPU_SETSIZE];
    int ncores = br_cores(avail, cores), r = 0;
    if (CPU_COUNT(avail) < n)
        return -1;
    for (int i = 0; i < n; i++)
        CPU_ZERO(&share[i]);
    if (ncores >= n) {
        for (int c = 0, per = ncores / n; c < per * n; c++)
            CPU_OR(&share[c / per], &share[c / per], &cores[c]);
        return 0;
    }
    for (int thread = 0; r < n; thread++)   /* the thread-th CPU of each core, in turn */
        for (int c = 0; c < ncores && r < n; c++)
            for (int cpu = 0, k = 0; cpu < CPU_SETSIZE; cpu++)
                if (CPU_ISSET(cpu, &cores[c]) && k++ == thread) {
                    CPU_SET(cpu, &share[r++]);
                    break;
                }
    return 0;
}

/* `set` as the kernel writes a CPU list ("0-3,8"). */
static void br_cpulist_str(const cpu_set_t *set, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int cpu = 0; cpu < CPU_SETSIZE && at < len; cpu++) {
        if (!CPU_ISSET(cpu, set))
            continue;
        int last = cpu;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
            last++;
        at += (size_t)snprintf(buf + at, len - at, last > cpu ? "%s%d-%d" : "%s%d",
                               at > 0 ? "," : "", cpu, last);
        cpu = last;
    }
}

/* Claim `cpu` for this job's ranks: an abstract Unix socket named for it, which the kernel
 * frees when braidrun ends (the ranks do not inherit it), so that a braidrun binding at
 * the same time does not take it. Returns the socket, -1 if another job holds the CPU, and
 * -2 where no claim can be made (the CPU is taken as free). */
static int br_claim_cpu(int cpu)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    int len = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "braidrun.cpu.%d", cpu);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -2;
    if (bind(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                                                    1 + (size_t)len)) == 0)
        return fd;
    int taken = errno == EADDRINUSE;
    close(fd);
    return taken ? -1 : -2;
}

/* Decide whether the ranks are bound (job->bind becomes 0 or 1) and to which CPUs
 * (job->share); with -b, ranks that do not fit braidrun's CPUs are an error (-1). `why`
 * says why not. */
static int br_bind_cpus(br_job_t *job, char *why, size_t len)
{
    cpu_set_t mine, allowed, both;
    why[0] = '\0';
    if (job->bind == BR_BIND_NO) {
        snprintf(why, len, "--no-bind");
        return 0;
    }
    if (sched_getaffinity(0, sizeof(mine), &mine) != 0) {
        snprintf(why, len, "cannot read the CPUs braidrun may run on: %s", strerror(errno));
        if (job->bind == BR_BIND_YES) {
            fprintf(stderr, "braidrun: -b: %s\n", why);
            return -1;
        }
        job->bind = 0;
        return 0;
    }
    int ncpu = CPU_COUNT(&mine);
    if (job->bind == BR_BIND_YES && ncpu < job->n) {
        fprintf(stderr, "braidrun: -b binds one rank per CPU, but %d ranks get %d CPUs\n",
                job->n, ncpu);
        return -1;
    }
    if (job->bind == BR_BIND_AUTO) {
        int quota = br_job_quota();
        br_job_cpuset(&allowed);
        CPU_AND(&both, &allowed, &mine);
        if (job->n < 2)
            snprintf(why, len, "one rank");
        else if (ncpu < job->n)
            snprintf(why, len, "%d ranks, %d CPU%s", job->n, ncpu, ncpu == 1 ? "" : "s");
        else if (quota > 0 && quota < job->n)
            snprintf(why, len, "%d ranks, a CPU quota of %d CPU%s (cgroup)", job->n, quota,
                     quota == 1 ? "" : "s");
        else if (CPU_COUNT(&both) < CPU_COUNT(&allowed))
            snprintf(why, len, "braidrun runs on %d of the %d CPUs its job may use: a "
                     "launcher or the user bound it", CPU_COUNT(&both), CPU_COUNT(&allowed));
        if (why[0] != '\0') {
            job->bind = 0;
            return 0;
        }
    }
    job->share = calloc((size_t)job->n, sizeof(cpu_set_t));
    if (job->share == NULL) {
        fprintf(stderr, "braidrun: out of memory for %d ranks' CPUs\n", job->n);
        return -1;
    }
    /* the shares of the CPUs no other braidrun holds; with -b, of all where those are few */
    static int claims[CPU_SETSIZE];
    cpu_set_t free_cpus, used;
    CPU_ZERO(&free_cpus);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &mine) && (claims[cpu] = br_claim_cpu(cpu)) != -1)
            CPU_SET(cpu, &free_cpus);
    int ok = br_shares(&free_cpus, job->n, job->share) == 0;
    if (!ok && job->bind == BR_BIND_AUTO)
        snprintf(why, len, "%d of braidrun's %d CPUs run ranks of another braidrun job",
                 ncpu - CPU_COUNT(&free_cpus), ncpu);
    else if (!ok)
        br_shares(&mine, job->n, job->share);
    CPU_ZERO(&used);
    for (int r = 0; ok && r < job->n; r++)
        CPU_OR(&used, &used, &job->share[r]);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)   /* a claim stays open until braidrun ends */
        if (CPU_ISSET(cpu, &free_cpus) && !CPU_ISSET(cpu, &used) && claims[cpu] >= 0)
            close(claims[cpu]);   /* left to jobs that can use it */
    job->bind = ok || job->bind == BR_BIND_YES;
    return 0;
}

/* Returns 0, or the exit status (0 after -h, 2 after bad usage). */
static int br_parse(int argc, char **argv, br_job_t *job, int *exit_p)
{
    const char *env_k = getenv("BRAIDRUN_KILL_AFTER");
    int c;
    char *end;
    job->grace_s = 10;
    if (env_k != NULL && env_k[0] != '\0' && (job->grace_s = br_parse_seconds(env_k)) < 0) {
        fprintf(stderr, "braidrun: BRAIDRUN_KILL_AFTER=\"%s\" is not a number of seconds\n",
                env_k);
        return *exit_p = 2;
    }
    static const struct option longopts[] = {
        { "help", no_argument, 0, 'h' },
        { "bind", no_argument, 0, 'b' },
        { "no-bind", no_argument, 0, 'B' },
        { "report-bindings", no_argument, 0, 'R' },
        { 0, 0, 0, 0 }
    };
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+n:k:bh", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            errno = 0;
            long n = strtol(optarg, &end, 10);
            if (errno != 0 || end == optarg || *end != '\0' || n < 1 || n > BR_MAX_RANKS) {
                fprintf(stderr, "braidrun: -n wants a rank count from 1 to %d, not \"%s\"\n",
                        BR_MAX_RANKS, optarg);
                goto bad;
            }
            job->n = (int)n;
            break;
        case 'k':
            if ((job->grace_s = br_parse_seconds(optarg)) < 0) {
                fprintf(stderr, "braidrun: -k wants a number of seconds, not \"%s\"\n", optarg);
                goto bad;
            }
            break;
        case 'b':
            job->bind = BR_BIND_YES;
            break;
        case 'B':
            job->bind = BR_BIND_NO;
            break;
        case 'R':
            job->report = 1;
            break;
        case 'h':
            br_usage(stdout);
            *exit_p = 0;
            return 1;
        default:
            if (optopt != 0)
                fprintf(stderr, "braidrun: invalid option or missing value: -%c\n", optopt);
            else
                fprintf(stderr, "braidrun: invalid option: %s\n", argv[optind - 1]);
            goto bad;
        }
    }
    if (job->n == 0 || optind >= argc) {
        fprintf(stderr, "braidrun: %s\n", job->n == 0 ? "give the rank count with -n N"
                                                       : "give the command to run");
        goto bad;
    }
    job->cmd = argv + optind;
    char why[160];
    if (br_bind_cpus(job, why, sizeof(why)) != 0)
        goto bad;
    if (job->report && !job->bind)
        fprintf(stderr, "braidrun: ranks not bound: %s\n", why);
    for (int r = 0; job->report && job->bind && r < job->n; r++) {
        char list[256];
        br_cpulist_str(&job->share[r], list, sizeof(list));
        fprintf(stderr, "braidrun: rank %d bound to CPU%s %s\n", r,
                CPU_COUNT(&job->share[r]) > 1 ? "s" : "", list);
    }
    return 0;
bad:
    br_usage(stderr);
    *exit_p = 2;
    return 1;
}

/* Bind a free loopback port and keep it (see the top of the file). Retries a few times:
 * an ephemeral range under pressure may fail a bind now and then. */
static int br_port_reserve(int *fd_p, int *port_p)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(a);
        int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            break;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
            bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
            getsockname(fd, (struct sockaddr *)&a, &len) == 0) {
            *fd_p = fd;
            *port_p = ntohs(a.sin_port);
            return 0;
        }
        close(fd);
        usleep(10000);
    }
    fprintf(stderr, "braidrun: cannot reserve a loopback TCP port: %s\n", strerror(errno));
    return -1;
}

/* Set and not empty: the user's own value, which braidrun keeps. */
static int br_env_given(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0';
}

static void br_setenv_int(const char *name, int v)
{
    char buf[16];
    snprintf(buf, sizeof(buf), "%d", v);
    setenv(name, buf, 1);
}

/* In the child: its own process group, gone with braidrun, then the command. */
static void br_child(const br_job_t *job, int rank, pid_t parent, const sigset_t *mask)
{
    char addr[64];
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    sigprocmask(SIG_SETMASK, mask, NULL);
    if (job->bind && sched_setaffinity(0, sizeof(cpu_set_t), &job->share[rank]) != 0)
        fprintf(stderr, "braidrun: rank %d: cannot bind to its CPUs: %s\n", rank,
                strerror(errno));
    br_setenv_int("RANK", rank);
    br_setenv_int("WORLD_SIZE", job->n);
    br_setenv_int("LOCAL_RANK", rank);
    br_setenv_int("LOCAL_WORLD_SIZE", job->n);
    if (job->port_fd[0] >= 0) {
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", job->port[0]);
        setenv("NCCL_COMM_ID", addr, 1);
    }
    if (job->port_fd[1] >= 0) {
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        br_setenv_int("MASTER_PORT", job->port[1]);
    }
    execvp(job->cmd[0], job->cmd);
    fprintf(stderr, "braidrun: rank %d: cannot run %s: %s\n", rank, job->cmd[0],
            strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
}

static int br_start(br_job_t *job, const sigset_t *old_mask)
{
    pid_t parent = getpid();
    for (int r = 0; r < job->n; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "braidrun: cannot start rank %d: %s\n", r, strerror(errno));
            return -1;
        }
        if (pid == 0)
            br_child(job, r, parent, old_mask);
        setpgid(pid, pid);   /* also here: no window before the child's own call */
        job->ranks[r] = (br_rank_t){ .pid = pid, .alive = 1 };
        job->alive++;
    }
    return 0;
}

static void br_signal_all(br_job_t *job, int sig, const char *why)
{
    for (int r = 0; r < job->n; r++) {
        if (!job->ranks[r].alive)
            continue;
        if (why != NULL) {
            fprintf(stderr, "braidrun: rank %d (pid %d) %s: sending %s\n", r,
                    (int)job->ranks[r].pid, why, sig == SIGKILL ? "SIGKILL" : "SIGTERM");
            job->ranks[r].killed = 1;
        }
        if (kill(-job->ranks[r].pid, sig) != 0)
            kill(job->ranks[r].pid, sig);
    }
}

/* A rank ended: say so if it failed; the first failure sets the status and the clock. */
static void br_reaped(br_job_t *job, int r, int status)
{
    br_rank_t *rk = &job->ranks[r];
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    rk->alive = 0;
    rk->status = status;
    job->alive--;
    if (code == 0)
        return;
    if (WIFEXITED(status))
        fprintf(stderr, "braidrun: rank %d (pid %d) exited with status %d\n", r, (int)rk->pid,
                code);
    else
        fprintf(stderr, "braidrun: rank %d (pid %d) killed by signal %d (%s)%s\n", r,
                (int)rk->pid, WTERMSIG(status), strsignal(WTERMSIG(status)),
                rk->killed ? ", sent by braidrun" : "");
    if (job->first_failed < 0) {
        job->first_failed = r;
        job->exit_status = code;
        if (job->alive > 0 && job->term_at == 0)
            job->term_at = br_now() + job->grace_s;
    }
}

static void br_reap(br_job_t *job)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        for (int r = 0; r < job->n; r++)
            if (job->ranks[r].alive && job->ranks[r].pid == pid)
                br_reaped(job, r, status);
}

/* Deadlines: after the grace period SIGTERM, BR_KILL_GRACE_S later SIGKILL. */
static void br_deadlines(br_job_t *job)
{
    char why[96];
    double now = br_now();
    if (job->term_at != 0 && now >= job->term_at) {
        snprintf(why, sizeof(why), "still running %g s after rank %d failed", job->grace_s,
                 job->first_failed);
        br_signal_all(job, SIGTERM, why);
        job->term_at = 0;
        job->kill_at = now + BR_KILL_GRACE_S;
    } else if (job->kill_at != 0 && now >= job->kill_at) {
        br_signal_all(job, SIGKILL, "still running after SIGTERM");
        job->kill_at = 0;
    }
}

static void br_wait(br_job_t *job, const sigset_t *set)
{
    while (job->alive > 0) {
        double next = job->term_at != 0 ? job->term_at : job->kill_at;
        double wait_s = next != 0 ? next - br_now() : 1.0;
        wait_s = wait_s < 0 ? 0 : wait_s > 1.0 ? 1.0 : wait_s;
        struct timespec ts = { (time_t)wait_s, (long)((wait_s - (time_t)wait_s) * 1e9) };
        int sig = sigtimedwait(set, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            fprintf(stderr, "braidrun: got %s, forwarding it to %d running rank%s\n",
                    sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP",
                    job->alive, job->alive == 1 ? "" : "s");
            br_signal_all(job, sig, NULL);
            if (job->kill_at == 0 && job->term_at == 0)
                job->kill_at = br_now() + job->grace_s + BR_KILL_GRACE_S;
        }
        br_reap(job);
        br_deadlines(job);
    }
}

int main(int argc, char **argv)
{
    br_job_t job = { .first_failed = -1, .port_fd = { -1, -1 }, .bind = BR_BIND_AUTO };
    sigset_t set, old;
    int status = 0;
    if (br_parse(argc, argv, &job, &status) != 0)
        return status;
    job.ranks = calloc((size_t)job.n, sizeof(br_rank_t));
    if (job.ranks == NULL)
        return 1;
    if ((!br_env_given("NCCL_COMM_ID") && br_port_reserve(&job.port_fd[0], &job.port[0]) != 0) ||
        (!br_env_given("MASTER_PORT") && !br_env_given("MASTER_ADDR") &&
         br_port_reserve(&job.port_fd[1], &job.port[1]) != 0))
        return 1;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &old);
    if (br_start(&job, &old) != 0) {
        br_signal_all(&job, SIGKILL, "is not needed: the job could not start");
        job.exit_status = 1;
    }
    br_wait(&job, &set);
    for (int i = 0; i < 2; i++)
        if (job.port_fd[i] >= 0)
            close(job.port_fd[i]);
    free(job.ranks);
    free(job.share);
    return job.exit_status;
}
