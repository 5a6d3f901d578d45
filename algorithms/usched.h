/*
 * User schedules: an algorithm read from a text file (docs/SCHEDULES.md has the format),
 * proved by the simulator at load, then one more entry of the algorithm table that
 * NCCL_ALGO names and mscclRunAlgo runs.
 *
 * Loading parses the file, checks every step (peers, regions inside their buffers, sizes),
 * matches every send with its receive, then runs every rank's schedule in the one-process
 * simulator (algorithms/sim.h) over two-slot FIFOs and small slices: a deadlock, a transport
 * misuse or a wrong result (an integer sum checked against the collective's definition)
 * rejects the file, with the line and the reason. The same check in place decides whether
 * the schedule also runs in-place calls (else it declines them).
 *
 * A loaded schedule stays for the life of the process (its index is its bit in NCCL_ALGO's
 * masks); unloading only retires it. At most BRAID_USCHED_MAX per process.
 */
#ifndef BRAID_ALGORITHMS_USCHED_H
#define BRAID_ALGORITHMS_USCHED_H

#include <stdint.h>

#include "exec/sched.h"

#define BRAID_USCHED_MAX 16

/* Load the schedule file at `path` and add it to the algorithm table; its handle (0 ..
 * BRAID_USCHED_MAX - 1) in *handle_p. A file already loaded (same path and content) gives
 * its handle again. On error nothing is added and the message names the file, the line and
 * the reason. */
braid_status_t braid_usched_load(const char *path, int *handle_p);

/* BRAID_SCHEDULES: a ':'-separated list of files, loaded once per process (the first
 * communicator's creation); the first error is returned again to every later caller. */
braid_status_t braid_usched_load_param(const char *list);

/* The algorithm of a loaded schedule, or NULL (an unknown or retired handle). */
const braid_algo_t *braid_usched_algo(int handle);

/* Why the schedule behind `a` does not take the call (an error naming the schedule, the
 * call and the reason); BRAID_OK when it does. */
braid_status_t braid_usched_fits(const braid_algo_t *a, const braid_coll_t *c);

/* Retire a schedule: calls that name it fail from now on. */
braid_status_t braid_usched_unload(int handle);

/* A hash of the schedule behind `a` (0 for braid's own algorithms), for the ranks to
 * compare at init. */
uint64_t braid_usched_hash(const braid_algo_t *a);

#endif
