/*
 * Parameters: one table (param.c), read once from the environment, the only place that
 * calls getenv. Each parameter has a BRAID_<NAME> spelling and, where NCCL/RCCL have one,
 * that spelling too (BRAID_ wins when both are set). braid-info -c prints the table.
 */
#ifndef BRAID_CORE_PARAM_H
#define BRAID_CORE_PARAM_H

#include <stdint.h>
#include <stdio.h>

#include "base/status.h"

typedef enum {
    BRAID_PARAM_INT,    /* integer (decimal or 0x hex) */
    BRAID_PARAM_SIZE,   /* byte size, optional K/M/G/T suffix (powers of 1024; KB, KiB too) */
    BRAID_PARAM_BOOL,   /* 0/1, yes/no, true/false, on/off */
    BRAID_PARAM_STR,    /* free text, validated by its user */
} braid_param_type_t;

/* Every parameter has an id; keep in sync with the table in param.c. */
typedef enum {
    BRAID_P_DEBUG,              /* NCCL_DEBUG */
    BRAID_P_DEBUG_SUBSYS,       /* NCCL_DEBUG_SUBSYS */
    BRAID_P_DEBUG_FILE,         /* NCCL_DEBUG_FILE */
    BRAID_P_TIMEOUT,            /* collective timeout, seconds (0: never) */
    BRAID_P_BOOTSTRAP_TIMEOUT,  /* bootstrap (init) timeout, seconds */
    BRAID_P_COMM_ID,            /* NCCL_COMM_ID host:port of the bootstrap root */
    BRAID_P_SOCKET_IFNAME,      /* NCCL_SOCKET_IFNAME */
    BRAID_P_SOCKET_FAMILY,      /* NCCL_SOCKET_FAMILY (AF_INET / AF_INET6) */
    BRAID_P_HOSTID,             /* NCCL_HOSTID: override the host identity */
    BRAID_P_SHM_SLOT_SIZE,      /* bytes per shared-memory FIFO slot */
    BRAID_P_SHM_NSLOTS,         /* slots per FIFO (>= 2) */
    BRAID_P_SHM_DIR,            /* where segments are created (default /dev/shm) */
    BRAID_P_SHM_CMA,            /* auto/1/0: single copy (threads: loads; processes: CMA) */
    BRAID_P_SHM_CMA_MIN,        /* bytes from which single-copy algorithms are used */
    BRAID_P_STREAM_MIN,         /* output bytes from which outputs are written streaming */
    BRAID_P_CPU_ISA,            /* force the host kernel variant: auto, avx512, avx2, generic */
    BRAID_P_HOST_PTR_CHECK,     /* auto/1/0: reject buffers the CPU cannot read */
    BRAID_P_DEVICE,             /* GPU backend: auto, cuda, hip, host */
    BRAID_P_DEVICE_SCRATCH,     /* device scratch made at init; the tuner's bound for it */
    BRAID_P_P2P,                /* device FIFOs between the local ranks (transports/p2p) */
    BRAID_P_P2P_SLOT_SIZE,      /* bytes per device FIFO slot */
    BRAID_P_P2P_NSLOTS,         /* slots per device FIFO (>= 2) */
    BRAID_P_P2P_MEM,            /* the most device memory one rank's FIFOs take */
    BRAID_P_CHECK_PEERS_MS,     /* how often a waiting rank checks its peers are alive */
    BRAID_P_NET,                /* NCCL_NET: network provider between hosts */
    BRAID_P_NET_PLUGIN,         /* NCCL_NET_PLUGIN: an external libnccl-net*.so */
    BRAID_P_NET_LOST_S,         /* seconds of silence after which a host link is lost */
    BRAID_P_ALGO,               /* NCCL_ALGO: algorithms allowed, per collective */
    BRAID_P_PROTO,              /* NCCL_PROTO: protocols allowed (checked; braid has one) */
    BRAID_P_CALIBRATE,          /* measure the links at communicator creation */
    BRAID_P_SLICE_SIZE,         /* bytes per slice of collectives (0: the tuner's) */
    BRAID_P_TUNER_PLUGIN,       /* NCCL_TUNER_PLUGIN: an NCCL tuner plugin (v4, v5) */
    BRAID_P_SCHEDULES,          /* user schedule files to load (algorithms/usched.c) */
    BRAID_P_SETUP_PAUSE,        /* fault tests: stop the process at these setup steps */
    BRAID_P_FLIGHT_RECORDER,    /* operations each communicator's flight recorder keeps */
    BRAID_P_FLIGHT_RECORDER_FILE,   /* where its dumps go (%h host, %p pid); unset: the log */
    BRAID_P_COUNT
} braid_param_id_t;

typedef enum {
    BRAID_PARAM_SRC_DEFAULT = 0,
    BRAID_PARAM_SRC_BRAID_ENV,  /* BRAID_<NAME> */
    BRAID_PARAM_SRC_NCCL_ENV,   /* NCCL_<NAME> / RCCL_<NAME> */
} braid_param_src_t;

typedef struct braid_param {
    const char *name;           /* without prefix, e.g. "TIMEOUT" */
    const char *alias;          /* full NCCL/RCCL spelling, e.g. "NCCL_DEBUG", or NULL */
    const char *defval;         /* default as text */
    braid_param_type_t type;
    const char *help;
} braid_param_t;

/*
 * Values. Read on first use (thread-safe) and cached; braid_param_reload() re-reads the
 * environment (tests, ncclResetDebugInit). A variable set to "" counts as unset. A malformed
 * or out-of-range value is reported with one WARN naming the variable (on the first
 * braid_param_int of it after each load), and the default is used. Strings returned stay
 * valid for the life of the process, across reloads.
 */
int64_t braid_param_int(braid_param_id_t id);        /* INT, SIZE, BOOL */
const char *braid_param_str(braid_param_id_t id);    /* STR ("" when unset and no default) */
braid_param_src_t braid_param_source(braid_param_id_t id);
const braid_param_t *braid_param_desc(braid_param_id_t id);
void braid_param_reload(void);

/* Parsing, exposed for unit tests. Return BRAID_ERR_INVALID on malformed text. */
braid_status_t braid_param_parse_int(const char *text, int64_t *val_p);
braid_status_t braid_param_parse_size(const char *text, int64_t *val_p);
braid_status_t braid_param_parse_bool(const char *text, int64_t *val_p);
/* `text` as parameter `id` takes it (its type and range; STR: anything, 0), as a variable's
 * value is read. Exposed for the fuzz harness tests/fuzz/fuzz_params.c. */
braid_status_t braid_param_parse(braid_param_id_t id, const char *text, int64_t *val_p);

/* Print every parameter: name, NCCL alias, value, default, source, help. */
void braid_param_dump(FILE *out);

#endif
