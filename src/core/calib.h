/*
 * The tuner's calibration at communicator creation: round trips and exchanges measure the
 * latency and bandwidth of the communicator's link classes (inside a host, between hosts),
 * a timed reduction its combine rate, and hwloc the L2 cache per rank; rank 0's figures become
 * every rank's cost model, so that all choose alike. Cached per layout in the process: a
 * communicator with the same hosts, ranks per host, provider and slot size reuses the
 * figures without measuring. A communicator that runs device calls on the GPU engine also
 * times its device for them (the tuner's device model, algorithms/model.h).
 * BRAID_CALIBRATE=0 keeps the default models (algorithms/model.c).
 */
#ifndef BRAID_CORE_CALIB_H
#define BRAID_CORE_CALIB_H

#include "core/comm.h"

/* Collective over the communicator's ranks; run at init, after the transports are up. */
braid_status_t braid_calibrate(braid_comm_t *comm);

#endif
