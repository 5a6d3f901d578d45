/*
 * braidrun: start N ranks of a command on this machine, as torchrun does.
 *
 *     braidrun -n 4 [-k SECONDS] [-b] [--] CMD [ARGS...]
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
 * -b binds rank r to the r-th CPU braidrun may run on, as mpirun binds ranks to cores when
 * they fit: the scheduler then cannot put two ranks on one CPU while another program runs
 * on the other (docs/PERFORMANCE.md: latency under load).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BR_MAX_RANKS 4096
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
    int bind;          /* -b: rank r runs on CPU cpus[r] only */
    int cpus[BR_MAX_RANKS];
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
            "usage: braidrun -n N [-k SECONDS] [-b] [--] CMD [ARGS...]\n"
            "  Start N ranks of CMD on this machine, each with RANK, WORLD_SIZE, LOCAL_RANK,\n"
            "  LOCAL_WORLD_SIZE, NCCL_COMM_ID=127.0.0.1:PORT, MASTER_ADDR and MASTER_PORT.\n"
            "  -n N        number of ranks (1 to %d)\n"
            "  -k SECONDS  after a rank fails, wait this long for the others, then stop them\n"
            "              (default 10, or BRAIDRUN_KILL_AFTER)\n"
            "  -b          bind rank r to the r-th CPU braidrun may run on (N at most that)\n"
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

/* -b: the CPUs of braidrun's own affinity mask, one per rank, in order. */
static int br_bind_cpus(br_job_t *job)
{
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        fprintf(stderr, "braidrun: -b: cannot read the CPUs it may run on: %s\n",
                strerror(errno));
        return -1;
    }
    for (int cpu = 0; cpu < CPU_SETSIZE && n < job->n; cpu++)
        if (CPU_ISSET(cpu, &set))
            job->cpus[n++] = cpu;
    if (n < job->n) {
        fprintf(stderr, "braidrun: -b binds one rank per CPU, but %d ranks get %d CPUs\n",
                job->n, CPU_COUNT(&set));
        return -1;
    }
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
    static const struct option longopts[] = { { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
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
            job->bind = 1;
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
    if (job->bind && br_bind_cpus(job) != 0)
        goto bad;
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
    if (job->bind) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(job->cpus[rank], &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0)
            fprintf(stderr, "braidrun: rank %d: cannot bind to CPU %d: %s\n", rank,
                    job->cpus[rank], strerror(errno));
    }
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
    br_job_t job = { .first_failed = -1, .port_fd = { -1, -1 } };
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
    return job.exit_status;
}
