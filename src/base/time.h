/* The library's clocks and deadlines. */
#ifndef BRAID_BASE_TIME_H
#define BRAID_BASE_TIME_H

#include <stdint.h>

#define BRAID_DEADLINE_NONE INT64_MAX

/* Monotonic time in seconds. */
double braid_now(void);

/* Monotonic clock in nanoseconds; the deadline `seconds` from now (<= 0: none). */
int64_t braid_time_ns(void);
int64_t braid_deadline_after_s(int64_t seconds);

#endif
