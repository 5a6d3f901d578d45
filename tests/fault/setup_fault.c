/*
 * setup_fault: a peer that dies during communicator setup, or a root address answered by a
 * program that is not braid, ends ncclCommInitRank within seconds with a message that names
 * the cause, never at the bootstrap timeout (set to 60 s here, so that a wait for it cannot
 * pass for a prompt failure).
 *
 * Each death case starts real rank processes (forked; NCCL_COMM_ID on loopback), waits until
 * the victim and the others are in the state the case needs, read from their logs
 * (NCCL_DEBUG=INFO, one file per rank), then kills the victim:
 *
 *   joined     3 ranks, rank 1 held back: rank 2 joined the root (the root's log says so),
 *              then dies; rank 0 must fail naming rank 2
 *   root       3 ranks, rank 2 held back: rank 1 has the root's acknowledgement, then rank 0
 *              (whose process runs the root) dies; rank 1 must fail naming rank 0's process
 *   ring       4 ranks: rank 2 joined the root and is stopped before it takes the table;
 *              rank 3 joins, the root sends the tables; rank 2 dies while the others connect
 *              the bootstrap ring (rank 3 waits for rank 2's connection)
 *   ring-next  4 ranks, rank 3 stopped as rank 2 in ring: rank 0 has its ring link to
 *              rank 1 (its log says so) and waits for rank 3's; rank 1 dies: rank 0 must
 *              fail naming rank 1, watching its link, not at the bootstrap timeout
 *   shm        4 ranks: rank 2 stops itself once its shared-memory segment is made
 *              (BRAID_SETUP_PAUSE=shm), and dies while the others set theirs up
 *
 *   twice      3 ranks, rank 1 started twice: the root fails the job, and every process
 *              (rank 0, whose process runs the root, last) gets the same error and code
 *   reuse      two 2-rank jobs on one NCCL_COMM_ID port, the second at once, while the
 *              first one's connections to that port are in TIME_WAIT: both must succeed
 *
 * The stranger cases start one rank (1 of 2) whose NCCL_COMM_ID is a port of this test,
 * served by a thread that answers like a web server ("HTTP/1.1 400 Bad Request", then
 * close), or takes the connection and says nothing: the first must fail at once quoting
 * what it got, the second within the acknowledgement wait (5 s), saying so.
 *
 * Every case checks the survivors' result (ncclRemoteError), time, message, and that they
 * never finished init. Exit: 0 pass, 1 fail, 99 setup error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault_util.h"

#define PROMPT_S 10.0        /* a survivor must fail within this */
#define STATE_S 60.0         /* a state a case waits for must come within this */
#define ACK_S 5.0            /* the bootstrap's wait for a root's acknowledgement */
#define PATH_LEN 256

static char logdir[] = "/tmp/braid-setup-fault.XXXXXX";
static pid_t pids[FT_MAX_RANKS];
static int ncases;

/* ---- ranks ---- */

/* One rank: join, record (in `slot`) the result and when it came, leave. */
static int rank_main(int slot, int rank, int nranks)
{
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r == ncclSuccess)
        r = ncclCommInitRank(&comm, nranks, id, rank);
    ft_record(slot, r, 0);
    ft_sh->elapsed[slot] = ft_now();   /* when it returned: the launcher's clock is the same */
    ft_sh->flag[slot] = 1;
    if (r == ncclSuccess)
        ncclCommAbort(comm);
    return 0;
}

/* Fork process `slot` (its pid, log and results: usually the rank's number) as rank
 * `rank`; with `pause` (a BRAID_SETUP_PAUSE step) it stops itself there. */
static int start_proc(int slot, int rank, int nranks, const char *comm_id, const char *pause)
{
    char buf[PATH_LEN];
    fflush(NULL);
    pids[slot] = fork();
    if (pids[slot] < 0) {
        perror("fork");
        return -1;
    }
    if (pids[slot] > 0)
        return 0;
    snprintf(buf, sizeof(buf), "%d", rank);
    setenv("RANK", buf, 1);
    snprintf(buf, sizeof(buf), "%d", nranks);
    setenv("WORLD_SIZE", buf, 1);
    setenv("NCCL_COMM_ID", comm_id, 1);
    snprintf(buf, sizeof(buf), "%s/r%d.log", logdir, slot);
    setenv("NCCL_DEBUG_FILE", buf, 1);
    if (pause != NULL)
        setenv("BRAID_SETUP_PAUSE", pause, 1);
    ft_sh->pid[slot] = getpid();
    ft_watchdog((int)STATE_S + 30);
    exit(rank_main(slot, rank, nranks));
}

static int start_rank(int rank, int nranks, const char *comm_id, const char *pause)
{
    return start_proc(rank, rank, nranks, comm_id, pause);
}

static void reap(int rank, int *status_p)
{
    *status_p = -1;
    if (pids[rank] > 0 && waitpid(pids[rank], status_p, 0) == pids[rank])
        pids[rank] = 0;
}

static void kill_all(void)
{
    for (int r = 0; r < FT_MAX_RANKS; r++)
        if (pids[r] > 0) {
            kill(pids[r], SIGKILL);
            waitpid(pids[r], NULL, 0);
            pids[r] = 0;
        }
}

/* Wait until rank's process has stopped itself (BRAID_SETUP_PAUSE). */
static int wait_stopped(const char *name, int rank)
{
    double deadline = ft_now() + STATE_S;
    for (;;) {
        if (ft_proc_stopped(pids[rank]))
            return 0;
        if (ft_now() > deadline) {
            ft_fail("%s: rank %d never stopped at its setup pause in %.0f s", name, rank,
                    STATE_S);
            return -1;
        }
        ft_sleep(0.005);
    }
}

/* ---- logs ---- */

static int log_has(int rank, const char *needle)
{
    char path[PATH_LEN], line[1024];
    int found = 0;
    snprintf(path, sizeof(path), "%s/r%d.log", logdir, rank);
    FILE *f = fopen(path, "r");
    while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, needle) != NULL;
    if (f != NULL)
        fclose(f);
    return found;
}

/* Wait until rank's log has the line that says the state a case needs. */
static int wait_log(const char *name, int rank, const char *needle)
{
    double deadline = ft_now() + STATE_S;
    while (!log_has(rank, needle)) {
        if (ft_now() > deadline) {
            ft_fail("%s: rank %d's log never said \"%s\" in %.0f s", name, rank, needle,
                    STATE_S);
            return -1;
        }
        ft_sleep(0.005);
    }
    return 0;
}

static void log_clear(int n)
{
    char path[PATH_LEN];
    for (int r = 0; r < n; r++) {
        snprintf(path, sizeof(path), "%s/r%d.log", logdir, r);
        unlink(path);
    }
}

/* ---- checks ---- */

/*
 * Rank r survived the death of `victim`: it failed with ncclRemoteError within PROMPT_S of
 * the kill at t_kill, its message holds `words`, and it never finished its init.
 */
static void check_survivor(const char *name, int r, double t_kill, const char *words)
{
    int status;
    reap(r, &status);
    double took = ft_sh->elapsed[r] - t_kill;
    const char *t = ft_sh->text[r];
    if (!ft_exited(status, 0) || !ft_sh->flag[r])
        ft_fail("%s: rank %d ended with status 0x%x before reporting", name, r, status);
    else if (ft_sh->result[r] != ncclRemoteError)
        ft_fail("%s: rank %d: init returned %s, want ncclRemoteError: %s", name, r,
                ncclGetErrorString((ncclResult_t)ft_sh->result[r]), t);
    else if (took > PROMPT_S)
        ft_fail("%s: rank %d failed %.1f s after the fault (limit %.0f s): %s", name, r, took,
                PROMPT_S, t);
    else if (strstr(t, words) == NULL)
        ft_fail("%s: rank %d: the error does not say \"%s\": %s", name, r, words, t);
    else if (log_has(r, "init done"))
        ft_fail("%s: rank %d finished its init before failing: not a setup fault", name, r);
    else
        printf("setup_fault: %s: rank %d failed %.2f s after the fault: %s\n", name, r, took,
               t);
}

/* A fresh case: logs, results, a port for the job. */
static int case_begin(const char *name, char *comm_id, size_t len)
{
    int port = ft_free_port();
    memset(ft_sh, 0, sizeof(*ft_sh));
    log_clear(FT_MAX_RANKS);
    ncases++;
    printf("setup_fault: case %s\n", name);
    if (port < 0)
        return -1;
    snprintf(comm_id, len, "127.0.0.1:%d", port);
    return 0;
}

/* Kill the victim; the moment is what the survivors' time counts from. */
static double kill_victim(int victim)
{
    int status;
    double t = ft_now();
    kill(pids[victim], SIGKILL);
    reap(victim, &status);
    return t;
}

/* ---- death cases ---- */

static int case_joined(void)
{
    char id[64];
    if (case_begin("joined", id, sizeof(id)) != 0 || start_rank(0, 3, id, NULL) != 0 ||
        start_rank(2, 3, id, NULL) != 0)
        return 99;
    if (wait_log("joined", 0, "joined (2 of 3)") == 0)   /* ranks 0 and 2 */
        check_survivor("joined", 0, kill_victim(2), "rank 2 ");
    kill_all();
    return 0;
}

static int case_root(void)
{
    char id[64];
    if (case_begin("root", id, sizeof(id)) != 0 || start_rank(0, 3, id, NULL) != 0 ||
        start_rank(1, 3, id, NULL) != 0)
        return 99;
    if (wait_log("root", 1, "rank 1 of 3 joined the root") == 0)
        check_survivor("root", 1, kill_victim(0), "rank 0");
    kill_all();
    return 0;
}

static int case_ring(void)
{
    char id[64];
    if (case_begin("ring", id, sizeof(id)) != 0)
        return 99;
    for (int r = 0; r < 3; r++)
        if (start_rank(r, 4, id, NULL) != 0)
            return 99;
    if (wait_log("ring", 2, "rank 2 of 4 joined the root") == 0) {
        kill(pids[2], SIGSTOP);   /* it cannot take its table: the others connect the ring */
        if (start_rank(3, 4, id, NULL) != 0)
            return 99;
        if (wait_log("ring", 0, "table sent") == 0) {
            double t = kill_victim(2);
            for (int r = 0; r < 4; r++)
                if (r != 2)
                    check_survivor("ring", r, t, "rank 2 ");
        }
    }
    kill_all();
    return 0;
}

/* ring-next: rank 0 has its link to rank 1 and waits for rank 3's (stopped before it took
 * its table); rank 1 dies: rank 0 sees its link close and fails at once, naming rank 1. */
static int case_ring_next(void)
{
    char id[64];
    if (case_begin("ring-next", id, sizeof(id)) != 0)
        return 99;
    for (int r = 0; r < 4; r += 1 + (r == 1))
        if (start_rank(r, 4, id, NULL) != 0)
            return 99;
    if (wait_log("ring-next", 3, "rank 3 of 4 joined the root") == 0) {
        kill(pids[3], SIGSTOP);   /* it cannot take its table, nor connect to rank 0 */
        if (start_rank(2, 4, id, NULL) == 0 &&
            wait_log("ring-next", 0, "ring link to rank 1 up") == 0) {
            double t = kill_victim(1);
            check_survivor("ring-next", 0, t, "rank 1 ");
        }
    }
    kill_all();
    return 0;
}

static int case_shm(void)
{
    char id[64];
    if (case_begin("shm", id, sizeof(id)) != 0)
        return 99;
    for (int r = 0; r < 4; r++)
        if (start_rank(r, 4, id, r == 2 ? "shm" : NULL) != 0)
            return 99;
    if (wait_stopped("shm", 2) == 0) {   /* the others wait for it in their shm setup */
        double t = kill_victim(2);
        for (int r = 0; r < 4; r++)
            if (r != 2)
                check_survivor("shm", r, t, "rank 2 ");
    }
    kill_all();
    return 0;
}

/* Rank 1 joins twice: the root fails the job, and all three processes get its one error. */
static int case_twice(void)
{
    char id[64];
    int status;
    if (case_begin("twice", id, sizeof(id)) != 0 || start_rank(0, 3, id, NULL) != 0 ||
        start_rank(1, 3, id, NULL) != 0)
        return 99;
    if (wait_log("twice", 0, "joined (2 of 3)") == 0 && start_proc(2, 1, 3, id, NULL) == 0) {
        for (int p = 0; p < 3; p++) {
            reap(p, &status);
            if (!ft_exited(status, 0) || !ft_sh->flag[p])
                ft_fail("twice: process %d ended with status 0x%x before reporting", p, status);
            else if (ft_sh->result[p] != ncclInvalidArgument ||
                     strstr(ft_sh->text[p], "rank 1 joined twice") == NULL)
                ft_fail("twice: process %d got %s, want ncclInvalidArgument saying rank 1 "
                        "joined twice: %s", p,
                        ncclGetErrorString((ncclResult_t)ft_sh->result[p]), ft_sh->text[p]);
            else if (strcmp(ft_sh->text[p], ft_sh->text[0]) != 0)
                ft_fail("twice: process %d's error is not rank 0's: %s", p, ft_sh->text[p]);
        }
        printf("setup_fault: twice: all 3 processes: %s: %s\n",
               ncclGetErrorString((ncclResult_t)ft_sh->result[0]), ft_sh->text[0]);
    }
    kill_all();
    return 0;
}

/* ---- a port used again at once ---- */

/* TCP sockets in TIME_WAIT whose local port is `port` (/proc/net/tcp: state 06). */
static int time_wait_on(int port)
{
    char line[512];
    unsigned lport, state;
    int n = 0;
    FILE *f = fopen("/proc/net/tcp", "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, " %*d: %*8x:%x %*8x:%*x %x", &lport, &state) == 2 &&
            (int)lport == port && state == 0x06)
            n++;
    fclose(f);
    return n;
}

/*
 * reuse: a job on a fixed NCCL_COMM_ID port, then at once a second job on it. The first
 * job's connections to the root's port are left in TIME_WAIT, so the second root must
 * listen with SO_REUSEADDR, as NCCL users expect when they run jobs back to back. Which
 * end of a connection closes first, and so holds the TIME_WAIT, is the ranks' timing: the
 * first job runs again (up to 10 times) until a TIME_WAIT is on the root's port.
 */
static int reuse_job(const char *id, int port, const char *which)
{
    int status;
    memset(ft_sh, 0, sizeof(*ft_sh));
    if (start_rank(0, 2, id, NULL) != 0 || start_rank(1, 2, id, NULL) != 0)
        return 99;
    for (int r = 0; r < 2; r++) {
        reap(r, &status);
        if (!ft_exited(status, 0) || !ft_sh->flag[r] || ft_sh->result[r] != ncclSuccess)
            ft_fail("reuse: %s job on port %d: rank %d ended with status 0x%x, %s: %s", which,
                    port, r, status, ncclGetErrorString((ncclResult_t)ft_sh->result[r]),
                    ft_sh->text[r]);
    }
    return 0;
}

static int case_reuse(void)
{
    char id[64];
    int port, waits = 0;
    if (case_begin("reuse", id, sizeof(id)) != 0)
        return 99;
    port = atoi(strchr(id, ':') + 1);
    for (int tries = 0; tries < 10 && waits == 0 && !ft_failures(); tries++) {
        if (reuse_job(id, port, "a first") != 0)
            return 99;
        waits = time_wait_on(port);
    }
    if (waits > 0 && reuse_job(id, port, "the second") != 0)
        return 99;
    if (waits == 0)
        ft_fail("reuse: 10 first jobs left no connection to port %d in TIME_WAIT: the case "
                "tests nothing", port);
    printf("setup_fault: reuse: two jobs on port %d, the second with %d connections of the "
           "first in TIME_WAIT\n", port, waits);
    return 0;
}

/* ---- stranger cases ---- */

typedef struct stranger {
    int lfd;
    int silent;              /* 1: take the connection and say nothing */
    volatile int stop;
    double t_accept;         /* when it took the rank's first connection: the fault */
} stranger_t;

static void *stranger_main(void *arg)
{
    static const char answer[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                                 "Connection: close\r\n\r\n";
    stranger_t *s = arg;
    int held[16], nheld = 0;
    while (!s->stop) {
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        if (s->t_accept == 0)
            s->t_accept = ft_now();
        if (s->silent && nheld < 16) {
            held[nheld++] = fd;
            continue;
        }
        char buf[512];
        struct timeval tv = { 1, 0 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void)!recv(fd, buf, sizeof(buf), 0);   /* a web server reads the request line */
        (void)!send(fd, answer, sizeof(answer) - 1, MSG_NOSIGNAL);
        close(fd);
    }
    while (nheld > 0)
        close(held[--nheld]);
    return NULL;
}

static int case_stranger(int silent)
{
    const char *name = silent ? "silent stranger" : "web server";
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(a);
    stranger_t s = { .silent = silent };
    pthread_t tid;
    char id[64];
    int status;
    if (case_begin(name, id, sizeof(id)) != 0)
        return 99;
    s.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = { 0, 100000 };   /* accept wakes to see stop */
    if (s.lfd < 0 || setsockopt(s.lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
        bind(s.lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(s.lfd, 16) != 0 ||
        getsockname(s.lfd, (struct sockaddr *)&a, &len) != 0) {
        perror("setup_fault: stranger");
        return 99;
    }
    snprintf(id, sizeof(id), "127.0.0.1:%d", ntohs(a.sin_port));
    /* the rank first, then the thread: a child forked beside a running thread may find a
     * lock (the allocator's, a sanitizer's) held for ever; the backlog holds its connection */
    if (start_rank(1, 2, id, NULL) != 0)
        return 99;
    if (pthread_create(&tid, NULL, stranger_main, &s) != 0) {
        perror("setup_fault: stranger thread");
        kill_all();
        return 99;
    }
    reap(1, &status);
    s.stop = 1;
    pthread_join(tid, NULL);
    close(s.lfd);
    double took = ft_sh->elapsed[1] - s.t_accept;   /* not the rank's start: a sanitizer's
                                                     * on a busy machine takes seconds */
    const char *t = ft_sh->text[1], *want = silent ? "did not answer in 5 s"
                                                   : "it sent \"HTTP/1.1 400 Bad Request";
    double limit = silent ? ACK_S + 3 : 2;
    if (!ft_exited(status, 0) || !ft_sh->flag[1])
        ft_fail("%s: the rank ended with status 0x%x before reporting", name, status);
    else if (s.t_accept == 0)
        ft_fail("%s: the rank never connected to the stranger: %s", name, t);
    else if (ft_sh->result[1] != ncclRemoteError)
        ft_fail("%s: init returned %s, want ncclRemoteError: %s", name,
                ncclGetErrorString((ncclResult_t)ft_sh->result[1]), t);
    else if (strstr(t, want) == NULL || strstr(t, "not") == NULL)
        ft_fail("%s: the error does not say \"%s\": %s", name, want, t);
    else if (took > limit)
        ft_fail("%s: the rank took %.1f s to fail (limit %.0f s)", name, took, limit);
    else
        printf("setup_fault: %s: the rank failed in %.2f s: %s\n", name, took, t);
    return 0;
}

int main(void)
{
    int (*cases[])(void) = { case_joined, case_root, case_ring, case_ring_next, case_shm,
                             case_twice, case_reuse };
    ft_name = "setup_fault";
    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("BRAID_BOOTSTRAP_TIMEOUT", "60", 1);
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT,BOOTSTRAP", 1);
    if (ft_shared_map() != 0 || mkdtemp(logdir) == NULL) {
        perror("setup_fault");
        return 99;
    }
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (cases[i]() != 0) {
            kill_all();
            return 99;
        }
    if (case_stranger(0) != 0 || case_stranger(1) != 0)
        return 99;
    log_clear(FT_MAX_RANKS);
    rmdir(logdir);
    printf("setup_fault: %d cases, %d failures\n", ncases, ft_failures());
    if (ncases == 0)
        return 1;
    return ft_failures() ? 1 : 0;
}
