/*
 * flight: the flight recorder dumps what each rank did, on every trigger, and
 * tools/braid-flight names the rank that is behind.
 *
 * Every scenario sets BRAID_FLIGHT_RECORDER_FILE=DIR/flight.%p and reads each rank's file
 * (JSON lines; docs/FLIGHT.md):
 *
 *   timeout  3 ranks, BRAID_TIMEOUT=2. After one all-reduce together, rank 1 stays out of
 *            the second; ranks 0 and 2 fail (timeout, or the other's failure), then rank 1
 *            aborts. Each rank's dump must hold its records (#1 done everywhere, #2 on
 *            ranks 0 and 2 only), and braid-flight must exit 1 naming rank 1 behind on
 *            AllReduce #2 with its count, type and op.
 *   sigusr1  2 ranks. Rank 1 waits in all-reduce #2 for rank 0; once rank 1's log says it
 *            waits (NCCL_DEBUG=INFO, COLL), rank 0 sends it SIGUSR1 and waits for its dump,
 *            which must show #2 running; then rank 0 joins and both must succeed. Rank 0,
 *            never signalled, must have dumped nothing.
 *   sigsegv  2 ranks, three all-reduces, then rank 1 raises SIGSEGV: it must leave a dump
 *            of the three and still die of SIGSEGV.
 *   abort    2 ranks. Rank 1 waits in all-reduce #2; once its log says so, a thread of
 *            rank 1 aborts the communicator: the dump (reason abort) must show #2 running
 *            or failed, and the all-reduce must return an error.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault_util.h"

#define COUNT 1024
#define WAIT_LIMIT_S 30.0

static char dir[256];

/* The whole file, or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t n; buf != NULL && (n = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
        len += n;
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    if (buf != NULL)
        buf[len] = '\0';
    fclose(f);
    return buf;
}

static void rank_file(char *buf, size_t len, const char *what, pid_t pid)
{
    snprintf(buf, len, "%s/%s.%d", dir, what, (int)pid);
}

/* Lines of text that contain every one of the NULL-terminated needles. */
static int lines_with(const char *text, const char *const *needles)
{
    int count = 0;
    for (const char *l = text; l != NULL && *l != '\0';) {
        const char *end = strchr(l, '\n');
        size_t n = end != NULL ? (size_t)(end - l) : strlen(l);
        int all = 1;
        for (int i = 0; needles[i] != NULL && all; i++) {
            const char *hit = strstr(l, needles[i]);
            all = hit != NULL && hit < l + n;
        }
        count += all;
        l = end != NULL ? end + 1 : NULL;
    }
    return count;
}

#define LINES(_text, ...) lines_with((_text), (const char *const[]){ __VA_ARGS__, NULL })

/* Wait until rank r's file `what` contains `needle`. 1 when it does. */
static int wait_for(const char *what, int r, const char *needle)
{
    char path[512];
    double until = ft_now() + WAIT_LIMIT_S;
    rank_file(path, sizeof(path), what, ft_sh->pid[r]);
    while (ft_now() < until) {
        char *text = slurp(path);
        int found = text != NULL && strstr(text, needle) != NULL;
        free(text);
        if (found)
            return 1;
        ft_sleep(0.01);
    }
    ft_fail("%s: %s never said \"%s\" within %.0f s", ft_name, path, needle, WAIT_LIMIT_S);
    return 0;
}

static char *rank_dump(int r)
{
    char path[512];
    rank_file(path, sizeof(path), "flight", ft_sh->pid[r]);
    char *text = slurp(path);
    if (text == NULL)
        ft_fail("rank %d left no flight recorder dump (%s)", r, path);
    return text;
}

static ncclResult_t all_reduce(ncclComm_t comm, float *buf)
{
    return ncclAllReduce(buf, buf, COUNT, ncclFloat32, ncclSum, comm, NULL);
}

/* ---- timeout ------------------------------------------------------------------------ */

static int timeout_rank(int rank, int n)
{
    ncclComm_t comm = ft_comm_init(rank, n);
    float buf[COUNT] = { 0 };
    if (all_reduce(comm, buf) != ncclSuccess)
        ft_fail("rank %d: first all-reduce failed: %s", rank, ncclGetLastError(NULL));
    if (rank == 1) {   /* stays out until the others gave up */
        while (ft_sh->flag[0] == 0 || ft_sh->flag[2] == 0)
            ft_sleep(0.01);
    } else {
        ncclResult_t r = all_reduce(comm, buf);
        if (r != ncclRemoteError)
            ft_fail("rank %d: all-reduce #2 returned %s, expected ncclRemoteError", rank,
                    ncclGetErrorString(r));
        ft_sh->flag[rank] = 1;
        while (ft_sh->flag[1] == 0)
            ft_sleep(0.01);
    }
    ncclCommAbort(comm);
    ft_sh->flag[1] = 1;   /* rank 1 aborted: the others may go */
    return 0;
}

static void timeout_check_tool(void)
{
    char cmd[1024], out[8192];
    const char *src = getenv("BRAID_SRC_DIR");
    snprintf(cmd, sizeof(cmd), "python3 %s/tools/braid-flight %s 2>&1", src ? src : ".", dir);
    FILE *p = popen(cmd, "r");
    size_t len = p != NULL ? fread(out, 1, sizeof(out) - 1, p) : 0;
    out[len] = '\0';
    int status = p != NULL ? pclose(p) : -1;
    printf("%s\n", out);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 1)
        ft_fail("timeout: braid-flight exited with status 0x%x, expected 1 (a rank behind)",
                status);
    char want[128];
    snprintf(want, sizeof(want), "behind: rank 1 has not started AllReduce #2 (count %d, "
             "float32, sum)", COUNT);
    if (strstr(out, want) == NULL)
        ft_fail("timeout: braid-flight does not say \"%s\"", want);
    if (strstr(out, "behind: rank 0") != NULL || strstr(out, "behind: rank 2") != NULL)
        ft_fail("timeout: braid-flight names rank 0 or 2 behind");
}

static void scenario_timeout(void)
{
    int status[3];
    setenv("BRAID_TIMEOUT", "2", 1);
    if (ft_launch(3, timeout_rank, 50, status) != 0) {
        ft_fail("timeout: cannot start the ranks");
        return;
    }
    unsetenv("BRAID_TIMEOUT");
    for (int r = 0; r < 3; r++) {
        char *text = rank_dump(r);
        if (!ft_exited(status[r], 0))
            ft_fail("timeout: rank %d ended with status 0x%x", r, status[r]);
        if (text == NULL)
            continue;
        if (LINES(text, "\"type\":\"op\"", "\"coll\":\"AllReduce\",\"seq\":1,",
                  "\"state\":\"done\"") == 0)
            ft_fail("timeout: rank %d's dump lacks AllReduce #1 done", r);
        int second = LINES(text, "\"type\":\"op\"", "\"coll\":\"AllReduce\",\"seq\":2,");
        int waiting = LINES(text, "\"coll\":\"AllReduce\",\"seq\":2,", "\"state\":\"running\"");
        int failed = LINES(text, "\"type\":\"comm\"", "\"reason\":\"timeout\"") +
                     LINES(text, "\"type\":\"comm\"", "\"reason\":\"peer failure\"");
        if (r == 1 && (second != 0 || LINES(text, "\"reason\":\"abort\"") == 0))
            ft_fail("timeout: rank 1's dump should hold an abort and no AllReduce #2");
        if (r != 1 && (waiting == 0 || failed == 0))
            ft_fail("timeout: rank %d's dump should say timeout or peer failure with "
                    "AllReduce #2 running", r);
        free(text);
    }
    timeout_check_tool();
}

/* ---- SIGUSR1 ------------------------------------------------------------------------ */

static int sigusr1_rank(int rank, int n)
{
    ncclComm_t comm = ft_comm_init(rank, n);
    float buf[COUNT] = { 0 };
    if (all_reduce(comm, buf) != ncclSuccess)
        ft_fail("rank %d: first all-reduce failed: %s", rank, ncclGetLastError(NULL));
    if (rank == 0 && wait_for("log", 1, "AllReduce #2 waits on rank 0")) {
        kill(ft_sh->pid[1], SIGUSR1);
        if (wait_for("flight", 1, "\"reason\":\"SIGUSR1\"")) {
            char *text = rank_dump(1);
            if (text != NULL && LINES(text, "\"coll\":\"AllReduce\",\"seq\":2,",
                                      "\"state\":\"running\"", "\"waits_on\":0") == 0)
                ft_fail("sigusr1: rank 1's dump lacks AllReduce #2 running, waiting on 0");
            free(text);
        }
    }
    ncclResult_t r = all_reduce(comm, buf);
    if (r != ncclSuccess)
        ft_fail("sigusr1: rank %d: all-reduce #2 returned %s: %s", rank,
                ncclGetErrorString(r), ncclGetLastError(NULL));
    ncclCommDestroy(comm);
    return 0;
}

/* Two ranks of fn, logging COLL at INFO to DIR/log.PID (the line a waiting rank writes is
 * what the test waits for); each must exit 0. */
static int launch_logged(const char *what, int (*fn)(int, int))
{
    int status[2];
    char log[512];
    snprintf(log, sizeof(log), "%s/log.%%p", dir);
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "COLL", 1);
    setenv("NCCL_DEBUG_FILE", log, 1);
    int rc = ft_launch(2, fn, 50, status);
    unsetenv("NCCL_DEBUG");
    unsetenv("NCCL_DEBUG_SUBSYS");
    unsetenv("NCCL_DEBUG_FILE");
    if (rc != 0) {
        ft_fail("%s: cannot start the ranks", what);
        return -1;
    }
    for (int r = 0; r < 2; r++)
        if (!ft_exited(status[r], 0))
            ft_fail("%s: rank %d ended with status 0x%x", what, r, status[r]);
    return 0;
}

static void scenario_sigusr1(void)
{
    char path[512];
    if (launch_logged("sigusr1", sigusr1_rank) != 0)
        return;
    rank_file(path, sizeof(path), "flight", ft_sh->pid[0]);
    if (access(path, F_OK) == 0)
        ft_fail("sigusr1: rank 0 dumped (%s) though nothing asked it to", path);
}

/* ---- SIGSEGV ------------------------------------------------------------------------ */

static int sigsegv_rank(int rank, int n)
{
    if (rank == 1) {
        struct rlimit none = { 0, 0 };
        setrlimit(RLIMIT_CORE, &none);
        signal(SIGSEGV, SIG_DFL);   /* what braid finds and must restore (not ASan's) */
    }
    ncclComm_t comm = ft_comm_init(rank, n);
    float buf[COUNT] = { 0 };
    for (int i = 0; i < 3; i++)
        if (all_reduce(comm, buf) != ncclSuccess)
            ft_fail("rank %d: all-reduce #%d failed: %s", rank, i + 1, ncclGetLastError(NULL));
    if (rank == 1) {
        ft_sh->flag[1] = 1;
        fflush(NULL);
        raise(SIGSEGV);
        ft_fail("rank 1 lived on after SIGSEGV");
        return 1;
    }
    while (ft_sh->flag[1] == 0)
        ft_sleep(0.01);
    ncclCommAbort(comm);
    return 0;
}

static void scenario_sigsegv(void)
{
    int status[2];
    if (ft_launch(2, sigsegv_rank, 50, status) != 0) {
        ft_fail("sigsegv: cannot start the ranks");
        return;
    }
    if (!ft_exited(status[0], 0))
        ft_fail("sigsegv: rank 0 ended with status 0x%x", status[0]);
    if (!ft_killed(status[1], SIGSEGV))
        ft_fail("sigsegv: rank 1 ended with status 0x%x, expected death by SIGSEGV",
                status[1]);
    char *text = rank_dump(1);
    if (text != NULL && (LINES(text, "\"type\":\"comm\"", "\"reason\":\"SIGSEGV\"") != 1 ||
                         LINES(text, "\"coll\":\"AllReduce\"", "\"state\":\"done\"") != 3))
        ft_fail("sigsegv: rank 1's dump should be one SIGSEGV dump of 3 all-reduces done");
    free(text);
}

/* ---- abort -------------------------------------------------------------------------- */

static void *abort_thread(void *arg)
{
    if (wait_for("log", 1, "AllReduce #2 waits on rank 0"))
        ncclCommAbort(arg);
    return NULL;
}

static int abort_rank(int rank, int n)
{
    ncclComm_t comm = ft_comm_init(rank, n);
    float buf[COUNT] = { 0 };
    pthread_t t;
    if (all_reduce(comm, buf) != ncclSuccess)
        ft_fail("rank %d: first all-reduce failed: %s", rank, ncclGetLastError(NULL));
    if (rank == 0) {
        while (ft_sh->flag[1] == 0)
            ft_sleep(0.01);
        ncclCommAbort(comm);
        return 0;
    }
    if (pthread_create(&t, NULL, abort_thread, comm) != 0)
        return 99;
    ncclResult_t r = all_reduce(comm, buf);
    pthread_join(t, NULL);
    if (r == ncclSuccess)
        ft_fail("abort: rank 1's all-reduce #2 succeeded after an abort");
    ft_sh->flag[1] = 1;
    return 0;
}

static void scenario_abort(void)
{
    if (launch_logged("abort", abort_rank) != 0)
        return;
    char *text = rank_dump(1);
    if (text != NULL &&
        (LINES(text, "\"type\":\"comm\"", "\"reason\":\"abort\"") != 1 ||
         LINES(text, "\"coll\":\"AllReduce\",\"seq\":2,", "\"state\":\"running\"") +
                 LINES(text, "\"coll\":\"AllReduce\",\"seq\":2,", "\"state\":\"failed\"") != 1))
        ft_fail("abort: rank 1's dump should be one abort dump with AllReduce #2 running "
                "or failed");
    free(text);
}

/* ---- main --------------------------------------------------------------------------- */

static void run(const char *name, void (*fn)(void))
{
    char file[512];
    snprintf(dir, sizeof(dir), "/tmp/braid-flight-%d-%s", (int)getpid(), name);
    if (mkdir(dir, 0700) != 0) {
        ft_fail("%s: cannot make %s", name, dir);
        return;
    }
    snprintf(file, sizeof(file), "%s/flight.%%p", dir);
    setenv("BRAID_FLIGHT_RECORDER_FILE", file, 1);
    int before = ft_failures();
    fn();
    printf("flight: %s: %s\n", name, ft_failures() == before ? "ok" : "FAILED");
    if (ft_failures() == before) {   /* kept for a look when it failed */
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0)
            printf("flight: could not remove %s\n", dir);
    }
}

int main(void)
{
    ft_name = "flight";
    setvbuf(stdout, NULL, _IOLBF, 0);
    run("timeout", scenario_timeout);
    run("sigusr1", scenario_sigusr1);
    run("sigsegv", scenario_sigsegv);
    run("abort", scenario_abort);
    printf("flight: 4 scenarios, %d failures\n", ft_failures());
    return ft_failures() ? 1 : 0;
}
