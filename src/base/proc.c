/*
 * Is a peer process of this host still alive? /proc/<pid>/stat gives its state and start
 * time: a zombie (killed but not yet reaped by its parent) counts as dead, and a pid reused
 * by another process is told apart by its start time.
 *
 * And the setup pause (BRAID_SETUP_PAUSE) that lets fault tests hold a rank at a known step.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"
#include "base/proc.h"

int braid_proc_stat(int pid, char *state_p, uint64_t *starttime_p)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) S ..." where comm may hold spaces and parentheses: skip to the last ')' */
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return -1;
    char state = 0;
    unsigned long long start = 0;
    /* after ')': state is field 3, starttime field 22 */
    if (sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
                      "%*d %llu", &state, &start) != 2)
        return -1;
    *state_p = state;
    *starttime_p = start;
    return 0;
}

uint64_t braid_proc_self_starttime(void)
{
    char state;
    uint64_t start = 0;
    if (braid_proc_stat((int)getpid(), &state, &start) != 0)
        return 0;
    return start;
}

braid_proc_liveness_t braid_proc_alive(int pid, uint64_t starttime)
{
    char state;
    uint64_t start;
    if (pid == (int)getpid())
        return BRAID_PROC_ALIVE;
    if (braid_proc_stat(pid, &state, &start) != 0)
        return BRAID_PROC_DEAD;
    if (state == 'Z' || state == 'X' || (starttime != 0 && start != starttime))
        return BRAID_PROC_DEAD;
    return BRAID_PROC_ALIVE;
}

void braid_proc_setup_pause(const char *step)
{
    const char *p = braid_param_str(BRAID_P_SETUP_PAUSE);
    size_t len = strlen(step);
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, step, len) == 0) {
            BRAID_INFO(BRAID_SUB_INIT, "setup paused before its %s step (BRAID_SETUP_PAUSE): "
                       "process %d stops until SIGCONT", step, (int)getpid());
            raise(SIGSTOP);
            return;
        }
        p += n + (p[n] == ',');
    }
}
