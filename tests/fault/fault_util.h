/*
 * Helpers of the fault tests: a fork launcher (each rank a process with RANK, WORLD_SIZE,
 * NCCL_COMM_ID set, as braidrun does), a page of memory shared by the ranks and the
 * launcher, a watchdog, checks that print one line per failure, and the /dev/shm scan.
 *
 * A fault test's exit status follows automake: 0 pass, 1 fail, 77 skip, 99 hard error.
 */
#ifndef BRAID_TEST_FAULT_UTIL_H
#define BRAID_TEST_FAULT_UTIL_H

#include <stdint.h>
#include <sys/types.h>

#include "nccl.h"

#define FT_MAX_RANKS 16
#define FT_TEXT 1024

/* A C library function a fault test defines to see the library at work (the library's calls
 * reach the executable's definition first): it must be exported, which the build's
 * -fvisibility=hidden would prevent. */
#define FT_INTERPOSE __attribute__((visibility("default")))

/* Shared by the launcher and every rank (MAP_SHARED before fork). */
typedef struct ft_shared {
    volatile pid_t pid[FT_MAX_RANKS];          /* each rank writes its own */
    volatile double t_event;                   /* CLOCK_MONOTONIC of the injected fault */
    volatile int flag[FT_MAX_RANKS];           /* per-rank progress flags, test-defined */
    volatile int result[FT_MAX_RANKS];         /* ncclResult_t each rank saw */
    volatile double elapsed[FT_MAX_RANKS];     /* seconds each rank waited for it */
    char text[FT_MAX_RANKS][FT_TEXT];          /* each rank's ncclGetLastError */
} ft_shared_t;

extern ft_shared_t *ft_sh;
extern const char *ft_name;   /* test name, for messages */

double ft_now(void);

/* The page every process shares: mapped once, zeroed again on later calls. 0, or -1. */
int ft_shared_map(void);
/* A loopback TCP port free a moment ago, or -1. */
int ft_free_port(void);
/* Has process pid stopped (SIGSTOP, or its own raise at BRAID_SETUP_PAUSE)? */
int ft_proc_stopped(pid_t pid);
void ft_sleep(double seconds);

/* Report a failure (one line) and count it. */
void ft_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int ft_failures(void);

/* Kill this process with a message if it runs longer than `seconds`. */
void ft_watchdog(int seconds);

/*
 * Run fn(rank, nranks) in n forked processes. Each child exits with fn's return value;
 * the launcher waits at most `limit_s` (then SIGKILLs the ranks and fails), stores every
 * rank's wait status in status_p[rank], and returns 0 (or 99 if it could not start them).
 */
int ft_launch(int n, int (*fn)(int rank, int nranks), double limit_s, int *status_p);

/* Is rank r's wait status a normal exit with code `code`? A kill by `sig`? */
int ft_exited(int status, int code);
int ft_killed(int status, int sig);

/* Join the job of the launcher (RANK/WORLD_SIZE/NCCL_COMM_ID): returns the comm or exits. */
ncclComm_t ft_comm_init(int rank, int nranks);

/* Copy ncclGetLastError into the shared page for this rank, with result and elapsed. */
void ft_record(int rank, ncclResult_t r, double elapsed);

/* Segments of job whose rank 0 is pid0 left in /dev/shm: count (names printed). */
int ft_shm_leftovers(pid_t pid0, int print);

#endif
