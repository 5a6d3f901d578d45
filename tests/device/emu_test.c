/*
 * The emulated driver's test: what its parts share (emu_test.h).
 */
#if __has_include(<cuda.h>)

#include "tests/device/emu_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels/gpu/kargs.h"

#define POLL_MS 5               /* what the waits sleep between two looks */

int checks, failures;

void check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", ok ? "ok" : "FAIL");
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    checks++;
    failures += !ok;
}

const char *err_name(CUresult r)
{
    const char *s = NULL;
    return cuGetErrorName(r, &s) == CUDA_SUCCESS ? s : "(unknown code)";
}

int cu_ok(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS)
        check(0, "%s returned %s", what, err_name(r));
    return r == CUDA_SUCCESS;
}

int all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

static void on_alarm(int sig)
{
    static const char msg[] = "FAIL: timed out (a wait that never ends, a lost round trip?)\n";
    (void)sig;
    if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
        _exit(1);
    _exit(1);
}

void exit_on_alarm(unsigned int seconds)
{
    signal(SIGALRM, on_alarm);
    alarm(seconds);
}

void gate_close(CUstream s, uint32_t *word)
{
    __atomic_store_n(word, 0, __ATOMIC_RELEASE);
    CU(cuStreamWaitValue32(s, (CUdeviceptr)(uintptr_t)word, 1, CU_STREAM_WAIT_VALUE_GEQ));
}

void gate_open(uint32_t *word)
{
    __atomic_store_n(word, 1, __ATOMIC_RELEASE);   /* as another process would */
}

int wait_flag(const int *flag, int ms)
{
    for (int t = 0; !__atomic_load_n(flag, __ATOMIC_ACQUIRE); t += POLL_MS) {
        if (t >= ms)
            return 0;
        sleep_ms(POLL_MS);
    }
    return 1;
}

int wait_stream(CUstream s, CUresult want, int ms)
{
    for (int t = 0; cuStreamQuery(s) != want; t += POLL_MS) {
        if (t >= ms)
            return 0;
        sleep_ms(POLL_MS);
    }
    return 1;
}

/* The files are a few lines of stderr. */
int file_has(const char *path, const char *text)
{
    char buf[16384];
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

int wait_for_text(const char *path, const char *text, const int *stop)
{
    for (int t = 0; !file_has(path, text); t += POLL_MS) {
        if (t >= WAIT_MS || (stop != NULL && __atomic_load_n(stop, __ATOMIC_ACQUIRE)))
            return file_has(path, text);
        sleep_ms(POLL_MS);
    }
    return 1;
}

pid_t spawn_self(const char *argv0, const char *mode, const char *arg, const char *errfile,
                 char *const *env)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || dup2(fd, STDERR_FILENO) < 0)
        _exit(126);
    for (; env != NULL && *env != NULL; env++)
        putenv(*env);
    execlp(argv0, argv0, mode, arg, (char *)NULL);
    _exit(127);
}

int wait_child(pid_t pid, const char *errfile)
{
    char line[512];
    int status = -1;
    waitpid(pid, &status, 0);
    FILE *f = fopen(errfile, "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        printf("    stderr: %s%s", line, strchr(line, '\n') ? "" : "\n");
    if (f != NULL)
        fclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void hex_encode(const void *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", ((const unsigned char *)p)[i]);
}

int hex_decode(const char *hex, void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned int b;
        if (sscanf(hex + 2 * i, "%2x", &b) != 1)
            return 0;
        ((unsigned char *)p)[i] = (unsigned char)b;
    }
    return 1;
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int host_faults(CUdeviceptr p, int store)
{
    static const struct rlimit no_core = { 0, 0 };
    int status = -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        volatile unsigned char *b = (volatile unsigned char *)(uintptr_t)p;
        setrlimit(RLIMIT_CORE, &no_core);
        signal(SIGSEGV, SIG_DFL);
        if (store)
            *b = 1;
        else
            (void)*b;
        _exit(0);
    }
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

int tmpdir_make(char dir[DIR_LEN])
{
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(dir, DIR_LEN, "%s/emu_driver.XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (n < DIR_LEN && mkdtemp(dir) != NULL)
        return 1;
    check(0, "cannot make a folder %s: %s", dir, n < DIR_LEN ? strerror(errno) : "too long");
    return 0;
}

void tmpdir_path(char path[PATH_LEN], const char *dir, const char *name)
{
    snprintf(path, PATH_LEN, "%.*s/%.60s", DIR_LEN, dir, name);
}

void tmpdir_remove(const char *dir)
{
    char path[PATH_LEN];
    struct dirent *e;
    DIR *d = opendir(dir);
    while (d != NULL && (e = readdir(d)) != NULL) {
        tmpdir_path(path, dir, e->d_name);
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlink(path);
    }
    if (d != NULL)
        closedir(d);
    rmdir(dir);
}

int load_copy_kernel(CUmodule *m_p, CUfunction *f_p)
{
    static const char ours[] = BRAID_EMU_IMAGE_MAGIC;
    if (!CU(cuModuleLoadData(m_p, ours)))
        return 0;
    CUresult r = cuModuleGetFunction(f_p, *m_p, BRAID_KERNEL_COPY);
    if (r == CUDA_SUCCESS)
        return 1;
    check(r != CUDA_ERROR_NOT_FOUND, "%s is in the emulator (the kernels' host build is "
          "linked into it)", BRAID_KERNEL_COPY);
    if (r != CUDA_ERROR_NOT_FOUND)
        CU(r);
    CU(cuModuleUnload(*m_p));
    return 0;
}

CUresult launch_copy(CUfunction f, CUstream s, CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    braid_kargs_t args = { .count = n };
    args.in[0] = (const void *)(uintptr_t)src;
    args.out[0] = (void *)(uintptr_t)dst;
    void *params[] = { &args };
    return cuLaunchKernel(f, 2, 1, 1, 64, 1, 1, 0, s, params, NULL);
}

#endif
