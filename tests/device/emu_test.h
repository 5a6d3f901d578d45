/*
 * What the parts of the emulated driver's tests share (emu_driver: emu_driver.c,
 * emu_strict.c; emu_p2p: emu_p2p.c, emu_rate.c): checks that print a line each and are
 * counted, gates that hold a stream back until the host opens them, waits that give up
 * after WAIT_MS, and this program run again as a second process, its stderr in a file the
 * test reads (the emulator's messages go there).
 */
#ifndef BRAID_TESTS_DEVICE_EMU_TEST_H
#define BRAID_TESTS_DEVICE_EMU_TEST_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NBYTES 4096
#define WAIT_MS 30000           /* how long a wait for what must happen may take */
#define SETTLE_MS 200           /* how long a check gives what must not happen to happen */

extern int checks, failures;

void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *err_name(CUresult r);

/* A call that must succeed: a FAIL line with the error if it does not. */
#define CU(call) cu_ok((call), #call)
int cu_ok(CUresult r, const char *what);

/* call, then check cond, which may read what it wrote (and so may the message). */
#define CHECK_AFTER(call, cond, ...) \
    do { \
        CUresult r_ = (call); \
        check(r_ == CUDA_SUCCESS && (cond), __VA_ARGS__); \
    } while (0)

/* A call that must fail with want. */
#define CU_ERR(call, want) check((call) == (want), "%s gives %s", #call, #want)

int all_bytes(const unsigned char *p, size_t n, unsigned char v);
void sleep_ms(int ms);
/* A hang is a failure, not a stuck CI job: every process of the test sets this alarm. */
void exit_on_alarm(unsigned int seconds);

/*
 * A gate: s waits for a pinned word until the host opens it, so what is queued behind it
 * is certainly not done before gate_open, however busy the machine.
 */
void gate_close(CUstream s, uint32_t *word);
void gate_open(uint32_t *word);

/* Wait up to ms for *flag (atomic) to be set; is it? */
int wait_flag(const int *flag, int ms);
/* Wait up to ms for cuStreamQuery(s) to give want; does it? */
int wait_stream(CUstream s, CUresult want, int ms);
/* Does the file at path contain text? */
int file_has(const char *path, const char *text);
/* Wait up to WAIT_MS for the file at path to contain text, or for *stop (atomic, when not
 * NULL) to be set first; does it contain text? */
int wait_for_text(const char *path, const char *text, const int *stop);

/*
 * This program again (argv0, not /proc/self/exe: under valgrind that is valgrind), as
 * argv0 mode arg (no arg when NULL), stderr to errfile, with the NAME=VALUE strings of env
 * (NULL-ended) added to its environment. Its pid.
 */
pid_t spawn_self(const char *argv0, const char *mode, const char *arg, const char *errfile,
                 char *const *env);
/* Wait for a child, print its stderr file (indented), and give its exit status: -1 when
 * it did not exit (a signal ended it). */
int wait_child(pid_t pid, const char *errfile);

/* A fresh folder for the test's files, under $TMPDIR or /tmp, in dir: 0 if it cannot be
 * made. tmpdir_remove removes it and the files in it. */
#define DIR_LEN 256
#define PATH_LEN (DIR_LEN + 64)
int tmpdir_make(char dir[DIR_LEN]);
void tmpdir_remove(const char *dir);
/* dir/name in path. */
void tmpdir_path(char path[PATH_LEN], const char *dir, const char *name);

/* n bytes at p as 2n hexadecimal digits, and a NUL, in out; and back: 0 if hex is not. */
void hex_encode(const void *p, size_t n, char *out);
int hex_decode(const char *hex, void *p, size_t n);
/* CLOCK_MONOTONIC, in seconds. */
double now_s(void);

/* Does a load (or a store) of the host at p end a child process with SIGSEGV? */
int host_faults(CUdeviceptr p, int store);

/* IPC to a second process (this program, --ipc-child) that opens the handle, checks what
 * the host can do there (nothing in strict mode) and writes. */
void check_ipc(const char *argv0);

/* braid_k_copy from the emulator's image: 0, saying so, where the kernels are not linked in. */
int load_copy_kernel(CUmodule *m_p, CUfunction *f_p);
/* Launch f (braid_k_copy) on s: n bytes from src to dst. */
CUresult launch_copy(CUfunction f, CUstream s, CUdeviceptr dst, CUdeviceptr src, size_t n);

/* The checks of strict mode (emu_strict.c), in a second process started with
 * BRAID_EMU_STRICT=1, its stderr in dir/strict.err. Its exit status. */
int strict_main(const char *argv0, const char *dir);
/* A third process of strict mode's checks (--hold): its kernel on device 0 never ends. */
int strict_hold_main(void);

/* ---- emu_p2p (emu_p2p.c, emu_rate.c): two devices, peers, stream memory operations ---- */

/* The primary contexts of devices 0 and 1 (emu_p2p.c), both retained. */
extern CUcontext p2p_ctx[2];
/* Round trips of stream memory operations between two threads, on devices d0 and d1
 * (peer access enabled between them when they differ): their rate printed. */
void rate_threads(int d0, int d1, int rounds);
/* The same between this process, on device 0, and a second one on device cdev, through
 * IPC-opened counters; stepped: the host waits for each round trip before the next,
 * while the second process has all its waits queued at once. */
void rate_procs(const char *argv0, const char *dir, int cdev, int rounds, int stepped);
/* The second process of rate_procs (--pingpong). Its exit status. */
int rate_procs_child(const char *arg);
/* braid_k_copy and braid_k_reduce on 16 MiB, and memcpy's speed: printed, under label. */
void rate_kernels(const char *label);

#endif
