/*
 * Helpers of the fault tests (see fault_util.h).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fault_util.h"

ft_shared_t *ft_sh;
const char *ft_name = "fault";
static atomic_int failures;
static int watchdog_s;

double ft_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ft_sleep(double seconds)
{
    struct timespec ts = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

void ft_fail(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    atomic_fetch_add(&failures, 1);
    fprintf(stderr, "FAIL %s (pid %d): %s\n", ft_name, (int)getpid(), msg);
}

int ft_failures(void)
{
    return atomic_load(&failures);
}

static void on_alarm(int sig)
{
    char msg[160];
    (void)sig;
    int len = snprintf(msg, sizeof(msg), "FAIL %s (pid %d): watchdog: still running after %d s "
                       "(hang)\n", ft_name, (int)getpid(), watchdog_s);
    if (write(2, msg, (size_t)len) < 0)
        _exit(1);
    _exit(1);
}

void ft_watchdog(int seconds)
{
    watchdog_s = seconds;
    signal(SIGALRM, on_alarm);
    alarm((unsigned)seconds);
}

int ft_free_port(void)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

int ft_shared_map(void)
{
    if (ft_sh != NULL) {
        memset(ft_sh, 0, sizeof(*ft_sh));
        return 0;
    }
    void *p = mmap(NULL, sizeof(ft_shared_t), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    ft_sh = p;
    return 0;
}

int ft_proc_stopped(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');   /* the state follows the name, which may hold anything */
    return p != NULL && p[1] == ' ' && p[2] == 'T';
}

static void reap_all(pid_t *pids, int n, int *status_p, double limit_s)
{
    double deadline = ft_now() + limit_s;
    int left = n;
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < n; r++)
                if (pids[r] == p) {
                    status_p[r] = st;
                    pids[r] = 0;
                    left--;
                }
            continue;
        }
        if (ft_now() > deadline) {
            ft_fail("ranks still running after %.0f s: killing them (hang)", limit_s);
            for (int r = 0; r < n; r++)
                if (pids[r] > 0)
                    kill(pids[r], SIGKILL);
            deadline = ft_now() + 1e9;
        }
        ft_sleep(0.005);
    }
}

int ft_launch(int n, int (*fn)(int rank, int nranks), double limit_s, int *status_p)
{
    char buf[64];
    pid_t pids[FT_MAX_RANKS];
    int port = ft_free_port();
    if (n > FT_MAX_RANKS || port < 0 || ft_shared_map() != 0) {
        fprintf(stderr, "%s: cannot set up the launcher\n", ft_name);
        return 99;
    }
    snprintf(buf, sizeof(buf), "127.0.0.1:%d", port);
    setenv("NCCL_COMM_ID", buf, 1);
    snprintf(buf, sizeof(buf), "%d", n);
    setenv("WORLD_SIZE", buf, 1);
    fflush(NULL);
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            perror("fork");
            return 99;
        }
        if (pids[r] == 0) {
            snprintf(buf, sizeof(buf), "%d", r);
            setenv("RANK", buf, 1);
            setenv("LOCAL_RANK", buf, 1);
            ft_sh->pid[r] = getpid();
            atomic_store(&failures, 0);   /* the launcher's count is not this rank's */
            ft_watchdog((int)limit_s);
            int rc = fn(r, n);
            fflush(NULL);
            exit(rc != 0 ? rc : ft_failures() ? 1 : 0);   /* exit: LSan checks the rank */
        }
    }
    reap_all(pids, n, status_p, limit_s + 5);
    return 0;
}

int ft_exited(int status, int code)
{
    return WIFEXITED(status) && WEXITSTATUS(status) == code;
}

int ft_killed(int status, int sig)
{
    return WIFSIGNALED(status) && WTERMSIG(status) == sig;
}

ncclComm_t ft_comm_init(int rank, int nranks)
{
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r == ncclSuccess)
        r = ncclCommInitRank(&comm, nranks, id, rank);
    if (r != ncclSuccess) {
        ft_fail("rank %d: init failed: %s (%s)", rank, ncclGetErrorString(r),
                ncclGetLastError(NULL));
        _exit(1);
    }
    return comm;
}

void ft_record(int rank, ncclResult_t r, double elapsed)
{
    ft_sh->result[rank] = (int)r;
    ft_sh->elapsed[rank] = elapsed;
    snprintf(ft_sh->text[rank], FT_TEXT, "%s", ncclGetLastError(NULL));
}

int ft_shm_leftovers(pid_t pid0, int print)
{
    char tag[32];
    int count = 0;
    DIR *d = opendir("/dev/shm");
    if (d == NULL)
        return 0;
    snprintf(tag, sizeof(tag), "-%x-", (unsigned)pid0);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "braid-", 6) != 0 || strstr(e->d_name, tag) == NULL)
            continue;
        count++;
        if (print)
            ft_fail("segment /dev/shm/%s of this job was left behind", e->d_name);
    }
    closedir(d);
    return count;
}
