/*
 * Device collectives that wait on something that never comes, on the CUDA driver (braid's
 * emulated one in CI): every such wait must end, within BRAID_TIMEOUT, in an error that
 * names the call (number, kind, bytes), the rank and what it waited for, with a flight
 * recorder dump that shows it, and with every stream braid made wait released; and
 * ncclCommAbort from another thread must return within a second meanwhile.
 *
 *   late     rank 1 never makes its all-reduce: rank 0's fails naming rank 1
 *   stream   rank 0's stream never reaches the call (a stream wait on a word nobody
 *            writes): rank 0's fails saying it waits for its stream, rank 1's names rank 0
 *   stall    braid's first kernel never ends (BRAID_EMU_STALL_LAUNCH=1): the rank that
 *            launched it fails saying it waits for the GPU
 *   abort    the same stalled kernel, BRAID_TIMEOUT long: ncclCommAbort of each rank, from
 *            a thread of its own, returns within 1 s, and the streams are released
 *   calib    braid's first kernel, the device calibration's at init, never ends: the
 *            communicators' init fails within BRAID_TIMEOUT, saying so
 *
 * The cases but calib make their communicators with BRAID_CALIBRATE=0, so that braid's
 * first kernel is their all-reduce's.
 *
 * Both ranks are communicators of one process (ncclCommInitAll), so each case decides what
 * each rank does. Each case runs in a child process forked before anything touches the
 * driver (a stalled kernel stays stalled until its process exits), with its own
 * BRAID_FLIGHT_RECORDER_FILE directory and its stderr in a file there; the parent bounds
 * every case. A case waits for the state it needs (the emulator's line saying the kernel
 * stalled) before it aborts, never for a time.
 *
 *     device_stall [CASE...]      (default: every case)
 */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "tests/common/cudrv.h"

#define COUNT 4096                  /* floats: 16384 bytes */
#define TIMEOUT_S "2"               /* BRAID_TIMEOUT of the cases that time out */
#define CASE_LIMIT_S 60             /* what the parent allows a case */

static cudrv_t cu;
static char dir[256];               /* the case's flight dumps and stderr */
static int failed;

static void expect(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void expect(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", ok ? "ok" : "FAIL");
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    failed |= !ok;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* ---- what the case left in its directory ------------------------------------------------ */

/* Does any file of the directory whose name starts with `prefix` contain `text`? */
static int dir_has(const char *prefix, const char *text)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;
    while (d != NULL && !found && (e = readdir(d)) != NULL) {
        char path[512], buf[1 << 16];
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        size_t n;
        while (!found && (n = fread(buf, 1, sizeof(buf) - 1, f)) > 0) {
            buf[n] = '\0';
            found = strstr(buf, text) != NULL;
        }
        fclose(f);
    }
    if (d != NULL)
        closedir(d);
    return found;
}

/* Wait (bounded) until the case's stderr says `text`. */
static int stderr_says(const char *text, int seconds)
{
    for (double end = now_s() + seconds; now_s() < end; sleep_ms(20))
        if (dir_has("stderr", text))
            return 1;
    return 0;
}

/* ---- a case: two ranks, a stream each, a device buffer each ----------------------------- */

typedef struct dcase {
    ncclComm_t comms[2];
    CUstream s[2];
    float *buf[2];
} dcase_t;

static void case_begin(dcase_t *c)
{
    cudrv_load(&cu);
    if (ncclCommInitAll(c->comms, 2, NULL) != ncclSuccess) {
        printf("FAIL: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
        exit(1);
    }
    for (int r = 0; r < 2; r++) {
        CUdeviceptr d;
        CUDRV(cu.stream_create(&c->s[r], CU_STREAM_NON_BLOCKING));
        CUDRV(cu.alloc(&d, COUNT * sizeof(float)));
        CUDRV(cu.memset32(d, 0x3f800000u, COUNT, c->s[r]));    /* 1.0f */
        c->buf[r] = (float *)(uintptr_t)d;
    }
}

static ncclResult_t all_reduce(dcase_t *c, int r)
{
    return ncclAllReduce(c->buf[r], c->buf[r], COUNT, ncclFloat, ncclSum, c->comms[r], c->s[r]);
}

/* Both ranks' all-reduce, one thread driving both. */
static void all_reduce_both(dcase_t *c, const char *what)
{
    expect(ncclGroupStart() == ncclSuccess && all_reduce(c, 0) == ncclSuccess &&
               all_reduce(c, 1) == ncclSuccess && ncclGroupEnd() == ncclSuccess,
           "%s: both ranks' all-reduces are queued", what);
}

/* Rank r's communicator reports a failure within `seconds`. */
static void fails(dcase_t *c, int r, double seconds, const char *what)
{
    ncclResult_t e = ncclSuccess;
    double t0 = now_s();
    while (ncclCommGetAsyncError(c->comms[r], &e) == ncclSuccess && e == ncclSuccess &&
           now_s() - t0 < seconds)
        sleep_ms(10);
    expect(e != ncclSuccess && e != ncclInProgress, "%s: rank %d's ncclCommGetAsyncError "
           "says %s (after %.1f s)", what, r, ncclGetErrorString(e), now_s() - t0);
}

/* Rank r's stream is released within `seconds`, and its comm reports a failure then. */
static void released(dcase_t *c, int r, double seconds, const char *what)
{
    double t0 = now_s();
    while (cu.stream_query(c->s[r]) == CUDA_ERROR_NOT_READY && now_s() - t0 < seconds)
        sleep_ms(10);
    expect(cu.stream_query(c->s[r]) == CUDA_SUCCESS, "%s: rank %d's stream is released "
           "(after %.1f s)", what, r, now_s() - t0);
    ncclResult_t e = ncclSuccess, q = ncclCommGetAsyncError(c->comms[r], &e);
    expect(q == ncclSuccess && e != ncclSuccess && e != ncclInProgress,
           "%s: rank %d's ncclCommGetAsyncError says %s", what, r, ncclGetErrorString(e));
}

/* The ranks are destroyed without a hang (a stalled kernel's process must not free device
 * memory: the driver would wait for the kernel first; braid knows, the case just exits). */
static void case_end(dcase_t *c, const char *what)
{
    for (int r = 0; r < 2; r++)
        expect(ncclCommDestroy(c->comms[r]) == ncclSuccess, "%s: rank %d is destroyed", what, r);
}

static void case_late(void)
{
    dcase_t c;
    case_begin(&c);
    expect(all_reduce(&c, 0) == ncclSuccess, "late: rank 0's all-reduce is queued");
    released(&c, 0, 30, "late");
    expect(strstr(ncclGetLastError(NULL), "AllReduce #1 (count 4096, 16384 bytes)") &&
               strstr(ncclGetLastError(NULL), "ranks 1 "),
           "late: the error names the call and rank 1: %s", ncclGetLastError(NULL));
    expect(dir_has("flight", "waits on 1"), "late: the flight dump shows rank 0 waiting on 1");
    case_end(&c, "late");
}

static void case_stream(void)
{
    dcase_t c;
    uint32_t *word;
    CUdeviceptr dword;
    case_begin(&c);
    CUDRV(cu.host_alloc((void **)&word, sizeof(*word), 0));
    *word = 0;
    CUDRV(cu.host_dptr(&dword, word, 0));
    CUDRV(cu.wait_value(c.s[0], dword, 1, 0 /* GEQ */));     /* never written while it waits */
    all_reduce_both(&c, "stream");
    released(&c, 1, 30, "stream");
    fails(&c, 0, 30, "stream");
    expect(dir_has("flight", "waits for its stream"),
           "stream: the flight dump shows rank 0 waiting for its stream");
    expect(dir_has("flight", "it waits for its stream, whose work queued before the call has "
                   "not finished"), "stream: rank 0's error says it waits for its stream");
    __atomic_store_n(word, 1, __ATOMIC_RELEASE);          /* now it may go on */
    released(&c, 0, 30, "stream");
    case_end(&c, "stream");
}

static void case_stall(void)
{
    dcase_t c;
    case_begin(&c);
    all_reduce_both(&c, "stall");
    released(&c, 0, 30, "stall");
    released(&c, 1, 30, "stall");
    expect(dir_has("flight", "waits on the GPU"),
           "stall: the flight dump shows a rank waiting on the GPU");
    expect(dir_has("flight", "it waits for the GPU: braid's kernels of step"),
           "stall: the error says the rank waits for the GPU");
    case_end(&c, "stall");
}

typedef struct abort_arg {
    ncclComm_t comm;
    ncclResult_t res;
    double took;
} abort_arg_t;

static void *abort_thread(void *p)
{
    abort_arg_t *a = p;
    double t0 = now_s();
    a->res = ncclCommAbort(a->comm);
    a->took = now_s() - t0;
    return NULL;
}

static void case_abort(void)
{
    dcase_t c;
    case_begin(&c);
    all_reduce_both(&c, "abort");
    expect(stderr_says("never ends", 30), "abort: the emulator says braid's kernel stalls");
    for (int r = 0; r < 2; r++) {
        abort_arg_t a = { .comm = c.comms[r] };
        pthread_t t;
        pthread_create(&t, NULL, abort_thread, &a);
        pthread_join(t, NULL);
        expect(a.res == ncclSuccess && a.took < 1.0,
               "abort: ncclCommAbort of rank %d from another thread returned in %.3f s", r,
               a.took);
    }
    for (int r = 0; r < 2; r++) {
        double t0 = now_s();
        while (cu.stream_query(c.s[r]) == CUDA_ERROR_NOT_READY && now_s() - t0 < 10)
            sleep_ms(10);
        expect(cu.stream_query(c.s[r]) == CUDA_SUCCESS, "abort: rank %d's stream is released",
               r);
    }
}

static void case_calib(void)
{
    ncclComm_t comms[2];
    char log[600];
    snprintf(log, sizeof(log), "%s/stderr.log.%%p", dir);  /* each rank's error, read below */
    setenv("NCCL_DEBUG", "WARN", 1);
    setenv("NCCL_DEBUG_FILE", log, 1);
    cudrv_load(&cu);    /* the runtime loaded, as in a GPU program (braid then finds HIP's) */
    double t0 = now_s();
    ncclResult_t res = ncclCommInitAll(comms, 2, NULL);
    double took = now_s() - t0;
    expect(res != ncclSuccess && took < 30, "calib: ncclCommInitAll fails (%s) after %.1f s",
           ncclGetErrorString(res), took);
    expect(stderr_says("the device calibration's work on its GPU engine's stream has not "
                       "finished after 2 s (BRAID_TIMEOUT)", 5),
           "calib: the stalled rank's error says its device calibration never ended");
}

/* ---- the parent: one child per case ----------------------------------------------------- */

static const struct {
    const char *name;
    void (*run)(void);
    const char *timeout, *stall;    /* BRAID_TIMEOUT, BRAID_EMU_STALL_LAUNCH (NULL: unset) */
    const char *calibrate;          /* BRAID_CALIBRATE */
} cases[] = {
    { "late", case_late, TIMEOUT_S, NULL, "0" },
    { "stream", case_stream, TIMEOUT_S, NULL, "0" },
    { "stall", case_stall, TIMEOUT_S, "1", "0" },
    { "abort", case_abort, "60", "1", "0" },
    { "calib", case_calib, TIMEOUT_S, "1", "1" },
};

static void child(int i)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/stderr.txt", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, 2) < 0)
        _exit(99);
    snprintf(path, sizeof(path), "%s/flight.%%p.txt", dir);
    setenv("BRAID_FLIGHT_RECORDER_FILE", path, 1);
    setenv("BRAID_TIMEOUT", cases[i].timeout, 1);
    setenv("BRAID_CALIBRATE", cases[i].calibrate, 1);
    if (cases[i].stall != NULL)
        setenv("BRAID_EMU_STALL_LAUNCH", cases[i].stall, 1);
    cases[i].run();
    fflush(stdout);
    _exit(failed);   /* no exit(): a stalled kernel's device memory is not freed */
}

/* Run case i in a child; 0 if it passed. On failure, its stderr. */
static int run_case(int i, const char *top)
{
    snprintf(dir, sizeof(dir), "%s/%s", top, cases[i].name);
    if (mkdir(dir, 0700) != 0)
        return 1;
    printf("== %s\n", cases[i].name);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        child(i);
    int status = -1;
    double end = now_s() + CASE_LIMIT_S;
    while (waitpid(pid, &status, WNOHANG) == 0 && now_s() < end)
        sleep_ms(50);
    if (now_s() >= end && waitpid(pid, &status, WNOHANG) == 0) {
        printf("FAIL: %s: still running after %d s: killed\n", cases[i].name, CASE_LIMIT_S);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        status = 1;
    }
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
        char cmd[600];
        printf("FAIL: %s (status %d); its stderr:\n", cases[i].name, status);
        fflush(stdout);
        snprintf(cmd, sizeof(cmd), "tail -n 40 %s/stderr.txt", dir);
        if (system(cmd) != 0)
            printf("(no stderr)\n");
    }
    return !ok;
}

int main(int argc, char **argv)
{
    char top[200];
    int nfail = 0, ran = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *rt;
    void *lib = cudrv_open(&rt);   /* a look only: initialising is the children's */
    if (lib == NULL) {
        printf("device_stall: no GPU runtime (%s: %s): skipped\n", rt, dlerror());
        return 77;
    }
    dlclose(lib);
    const char *tmp = getenv("TMPDIR");
    snprintf(top, sizeof(top), "%s/device_stall.XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(top) == NULL) {
        perror("device_stall: mkdtemp");
        return 99;
    }
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int wanted = argc < 2;
        for (int a = 1; a < argc; a++)
            wanted |= strcmp(argv[a], cases[i].name) == 0;
        if (wanted) {
            nfail += run_case((int)i, top);
            ran++;
        }
    }
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
    if (system(cmd) != 0)
        fprintf(stderr, "device_stall: could not remove %s\n", top);
    printf("device_stall: %d cases, %d failed\n", ran, nfail);
    return ran == 0 || nfail > 0;
}
