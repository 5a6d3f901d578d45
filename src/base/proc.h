/* Liveness of processes on this host, and the setup pause of fault tests (see proc.c). */
#ifndef BRAID_CORE_PROC_H
#define BRAID_CORE_PROC_H

#include <stdint.h>

typedef enum { BRAID_PROC_ALIVE = 0, BRAID_PROC_DEAD = 1 } braid_proc_liveness_t;

/* State letter and start time (clock ticks since boot) of pid; -1 if it cannot be read. */
int braid_proc_stat(int pid, char *state_p, uint64_t *starttime_p);
uint64_t braid_proc_self_starttime(void);
/* Dead: gone, a zombie, or the pid now belongs to a process started at another time. */
braid_proc_liveness_t braid_proc_alive(int pid, uint64_t starttime);

/*
 * A fault test's hold on communicator setup: when BRAID_SETUP_PAUSE lists `step`, log it
 * and stop this process (SIGSTOP) until SIGCONT, so that a test knows, from the process's
 * state, where its setup stands when it injects a fault.
 */
void braid_proc_setup_pause(const char *step);

#endif
