/* The library's clocks and deadlines (time.h). */
#include <time.h>

#include "base/time.h"

double braid_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t braid_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

int64_t braid_deadline_after_s(int64_t seconds)
{
    if (seconds <= 0 || seconds > INT64_MAX / 2000000000ll)
        return BRAID_DEADLINE_NONE;
    return braid_time_ns() + seconds * 1000000000ll;
}
