/*
 * The flight recorder's ring and what its two files share (flight.c: records, registry,
 * signals; flight_dump.c: the dump).
 */
#ifndef BRAID_CORE_FLIGHT_INT_H
#define BRAID_CORE_FLIGHT_INT_H

#include "core/flight.h"

#define FLIGHT_NAME_MAX 128
#define FLIGHT_HOST_MAX 64

struct braid_flight {
    uint32_t n;                     /* records in the ring */
    _Atomic uint64_t head;          /* ops recorded so far; op i is at recs[i % n] */
    _Atomic uint32_t next;          /* head % n, kept by the writer: no division per call */
    _Atomic int dumps;              /* dumps made so far */
    int rank, nranks;
    uint64_t nonce;                 /* the communicator's, alike on every rank */
    char name[FLIGHT_NAME_MAX];     /* ncclConfig_t's commName */
    braid_flight_rec_t recs[];
};

/* This host's name up to the first '.', as the log shows it; set by braid_flight_create. */
extern char braid_flight_host[FLIGHT_HOST_MAX];
/* BRAID_FLIGHT_RECORDER_FILE, read by braid_flight_create ("" when unset). */
extern const char *braid_flight_file;

#endif
