/*
 * Parameters: the one table, and the only getenv of the library.
 *
 * Values live in a snapshot: one entry per parameter with its integer value, its text and
 * where it came from. The first snapshot is built on first use (pthread_once) in static
 * storage; braid_param_reload builds a new one under a mutex and publishes it with an atomic
 * pointer swap. Older snapshots are never freed, so a string a caller got from
 * braid_param_str stays valid however many reloads happen (reloads are rare: tests and
 * ncclResetDebugInit).
 *
 * Loading never logs (the logger itself reads DEBUG* from here while it configures). A
 * rejected value is reported by braid_param_int, once per snapshot, when it is first read.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/param.h"

typedef struct param_entry {
    braid_param_t desc;
    int64_t min, max;           /* accepted range of INT and SIZE values */
} param_entry_t;

#define P_STR(_n, _a, _d, _h) { { _n, _a, _d, BRAID_PARAM_STR, _h }, 0, 0 }
#define P_INT(_n, _a, _d, _lo, _hi, _h) { { _n, _a, _d, BRAID_PARAM_INT, _h }, _lo, _hi }
#define P_SIZE(_n, _a, _d, _lo, _hi, _h) { { _n, _a, _d, BRAID_PARAM_SIZE, _h }, _lo, _hi }
#define P_BOOL(_n, _a, _d, _h) { { _n, _a, _d, BRAID_PARAM_BOOL, _h }, 0, 1 }

static const param_entry_t param_table[] = {
    [BRAID_P_DEBUG] = P_STR("DEBUG", "NCCL_DEBUG", "",
        "log level: VERSION, WARN, INFO, ABORT or TRACE (unset: silent)"),
    [BRAID_P_DEBUG_SUBSYS] = P_STR("DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS", "INIT,BOOTSTRAP,ENV",
        "subsystems logged at INFO/TRACE: comma list or ALL; leading ^ excludes"),
    [BRAID_P_DEBUG_FILE] = P_STR("DEBUG_FILE", "NCCL_DEBUG_FILE", "",
        "log file instead of stdout; %h = hostname, %p = pid"),
    [BRAID_P_TIMEOUT] = P_INT("TIMEOUT", NULL, "1800", 0, INT32_MAX,
        "collective timeout in seconds; 0 waits forever"),
    [BRAID_P_BOOTSTRAP_TIMEOUT] = P_INT("BOOTSTRAP_TIMEOUT", NULL, "120", 0, INT32_MAX,
        "seconds to wait for all ranks during communicator setup"),
    [BRAID_P_COMM_ID] = P_STR("COMM_ID", "NCCL_COMM_ID", "",
        "host:port of the bootstrap root, started by rank 0"),
    [BRAID_P_SOCKET_IFNAME] = P_STR("SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "",
        "network interfaces to use (prefix list, ^ excludes, = exact); unset: auto"),
    [BRAID_P_SOCKET_FAMILY] = P_STR("SOCKET_FAMILY", "NCCL_SOCKET_FAMILY", "",
        "address family: AF_INET or AF_INET6; unset: either"),
    [BRAID_P_HOSTID] = P_STR("HOSTID", "NCCL_HOSTID", "",
        "host identity override (ranks with equal ids share a host)"),
    [BRAID_P_SHM_SLOT_SIZE] = P_SIZE("SHM_SLOT_SIZE", NULL, "256K", 1, INT64_C(1) << 30,
        "bytes per shared-memory FIFO slot"),
    [BRAID_P_SHM_NSLOTS] = P_INT("SHM_NSLOTS", NULL, "8", 2, 65536,
        "slots per shared-memory FIFO"),
    [BRAID_P_SHM_DIR] = P_STR("SHM_DIR", NULL, "/dev/shm",
        "directory where shared-memory segments are created"),
    [BRAID_P_SHM_CMA] = P_STR("SHM_CMA", NULL, "auto",
        "single copy (ranks read peers' buffers): auto (between threads of one process), 1 "
        "(between processes too, with process_vm_readv; init fails where it cannot), 0 (never)"),
    [BRAID_P_SHM_CMA_MIN] = P_SIZE("SHM_CMA_MIN", NULL, "256K", 0, INT64_C(1) << 50,
        "bytes from which all-reduce, all-gather and reduce-scatter use single copy "
        "(all-gather and reduce-scatter count all ranks' blocks; rank 0's value is used)"),
    [BRAID_P_STREAM_MIN] = P_SIZE("STREAM_MIN", NULL, "16M", 0, INT64_C(1) << 50,
        "out-of-place calls whose output has at least this many bytes write it with "
        "non-temporal stores, sparing the cache (0: never)"),
    [BRAID_P_CPU_ISA] = P_STR("CPU_ISA", NULL, "auto",
        "host kernel variant: auto, avx512, avx2 or generic"),
    [BRAID_P_HOST_PTR_CHECK] = P_STR("HOST_PTR_CHECK", NULL, "auto",
        "check that buffers are host memory: auto (when a GPU runtime is loaded), 1, 0"),
    [BRAID_P_DEVICE] = P_STR("DEVICE", NULL, "auto",
        "GPU backend: auto (CUDA's driver, else HIP, where one loads and sees a device), "
        "cuda, hip, or host (device buffers are refused)"),
    [BRAID_P_DEVICE_SCRATCH] = P_SIZE("DEVICE_SCRATCH", NULL, "1M", 0, INT64_C(1) << 40,
        "device memory each communicator keeps for the scratch of device calls, made at "
        "init; the tuner picks no algorithm that needs more for a device call (a forced "
        "one gets more on the calling thread)"),
    [BRAID_P_P2P] = P_BOOL("P2P", NULL, "1",
        "device calls between the ranks of one host keep their FIFOs in device memory and "
        "run on the communicator's stream (the GPU engine); 0: through host memory, on the "
        "proxy thread"),
    [BRAID_P_P2P_SLOT_SIZE] = P_SIZE("P2P_SLOT_SIZE", NULL, "2M", 4096, INT64_C(1) << 30,
        "bytes per device FIFO slot: the GPU engine's slice (rank 0's value is used)"),
    [BRAID_P_P2P_NSLOTS] = P_INT("P2P_NSLOTS", NULL, "4", 2, 1024,
        "slots per device FIFO (rank 0's value is used)"),
    [BRAID_P_P2P_MEM] = P_SIZE("P2P_MEM", NULL, "256M", 1 << 20, INT64_C(1) << 40,
        "the most device memory a rank's FIFOs take (one FIFO per local rank, itself "
        "included): slots shrink to fit, down to 64K"),
    [BRAID_P_CHECK_PEERS_MS] = P_INT("CHECK_PEERS_MS", NULL, "100", 1, 3600000,
        "milliseconds between liveness checks of peers while waiting"),
    [BRAID_P_NET] = P_STR("NET", "NCCL_NET", "",
        "network provider between hosts: Socket, OFI, UCX or an NCCL_NET_PLUGIN's name "
        "(case-insensitive); unset: the best that works"),
    [BRAID_P_NET_PLUGIN] = P_STR("NET_PLUGIN", "NCCL_NET_PLUGIN", "",
        "an NCCL net plugin (libnccl-net-NAME.so, or NAME) to use as a provider"),
    [BRAID_P_NET_LOST_S] = P_INT("NET_LOST_S", NULL, "4", 1, 3600,
        "seconds without an answer (TCP keepalive) after which a peer on another host is "
        "reported lost"),
    [BRAID_P_ALGO] = P_STR("ALGO", "NCCL_ALGO", "",
        "algorithms the tuner may pick: a list, ^ excludes, coll:list;coll:list per "
        "collective (braid-info -a lists the names); unset: all"),
    [BRAID_P_PROTO] = P_STR("PROTO", "NCCL_PROTO", "",
        "protocols (LL, LL128, Simple; NCCL_ALGO's syntax): checked, but braid has only its "
        "Simple-like one"),
    [BRAID_P_CALIBRATE] = P_BOOL("CALIBRATE", NULL, "1",
        "measure the links' latency and bandwidth at communicator creation for the tuner "
        "(15-120 ms, cached per layout in the process); 0: the built-in cost model"),
    [BRAID_P_SLICE_SIZE] = P_SIZE("SLICE_SIZE", NULL, "0", 0, INT64_C(1) << 30,
        "bytes per slice of a collective's messages (at most the slot size); 0: the tuner "
        "picks the slot or a half, quarter, ... of it down to 4K per call"),
    [BRAID_P_TUNER_PLUGIN] = P_STR("TUNER_PLUGIN", "NCCL_TUNER_PLUGIN", "",
        "an NCCL tuner plugin (ncclTunerPlugin_v4 or v5) that may override the tuner: NAME "
        "(libnccl-tuner-NAME.so) or a path; none: no plugin"),
    [BRAID_P_SCHEDULES] = P_STR("SCHEDULES", NULL, "",
        "user schedule files (docs/SCHEDULES.md), ':'-separated, loaded at the first "
        "communicator's creation and run where NCCL_ALGO names them"),
    [BRAID_P_SETUP_PAUSE] = P_STR("SETUP_PAUSE", NULL, "",
        "for fault tests: the process stops itself (SIGSTOP) at these steps of its "
        "communicator setup (comma list; shm: its shared-memory segment made, before the "
        "others map it; net: its health links up, before it connects over the provider; "
        "device_lap: the device's timing at init, between its first and second lap of the "
        "ranks' ring, when every rank is past the barrier before them); SIGCONT resumes it"),
    [BRAID_P_FLIGHT_RECORDER] = P_INT("FLIGHT_RECORDER", NULL, "64", 0, 1 << 20,
        "operations each communicator's flight recorder keeps (docs/FLIGHT.md), dumped on "
        "a timeout, a peer's failure, an abort, SIGUSR1 and a fatal signal; 0: off"),
    [BRAID_P_FLIGHT_RECORDER_FILE] = P_STR("FLIGHT_RECORDER_FILE", NULL, "",
        "file the flight recorder's dumps are appended to; %h = hostname, %p = pid; unset: "
        "the log, at WARN level"),
};

_Static_assert(sizeof(param_table) / sizeof(param_table[0]) == BRAID_P_COUNT,
               "param_table must have one entry per braid_param_id_t");

#define PARAM_VAR_MAX 64

typedef struct param_val {
    int64_t ival;               /* INT, SIZE, BOOL */
    const char *sval;           /* text in effect: a copy of the variable, or the default */
    braid_param_src_t src;
    char bad_var[PARAM_VAR_MAX]; /* variable whose text was rejected ("" if none) */
    const char *bad_text;       /* that text (a copy) */
    atomic_int warned;
} param_val_t;

typedef struct param_snap {
    struct param_snap *prev;    /* older snapshots, kept alive for their strings */
    param_val_t v[BRAID_P_COUNT];
} param_snap_t;

static pthread_once_t param_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t param_mu = PTHREAD_MUTEX_INITIALIZER;
static param_snap_t param_snap0;
static _Atomic(param_snap_t *) param_snap_cur;

static int param_digit(char c, int base)
{
    int d = -1;
    if (c >= '0' && c <= '9')
        d = c - '0';
    else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
    return d < base ? d : -1;
}

/* Digits at *s_p in `base` (at least one); advances *s_p past them. */
static braid_status_t param_parse_digits(const char **s_p, int base, uint64_t *val_p)
{
    const char *s = *s_p;
    uint64_t v = 0;
    int d;
    for (; (d = param_digit(*s, base)) >= 0; s++) {
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            return BRAID_ERR_INVALID;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    if (s == *s_p)
        return BRAID_ERR_INVALID;
    *s_p = s;
    *val_p = v;
    return BRAID_OK;
}

static const char *param_skip_space(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

braid_status_t braid_param_parse_int(const char *text, int64_t *val_p)
{
    if (text == NULL)
        return BRAID_ERR_INVALID;
    const char *s = param_skip_space(text);
    int neg = 0, base = 10;
    uint64_t u;
    if (*s == '+' || *s == '-')
        neg = *s++ == '-';
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    BRAID_CHECK(param_parse_digits(&s, base, &u));
    if (*param_skip_space(s) != '\0')
        return BRAID_ERR_INVALID;
    if (u > (uint64_t)INT64_MAX + (uint64_t)neg)
        return BRAID_ERR_INVALID;
    *val_p = neg ? (int64_t)(0 - u) : (int64_t)u;
    return BRAID_OK;
}

/* "K", "KB", "KiB" (any case) -> its shift; "" or "B" -> 0; else -1. */
static int param_size_shift(const char *s)
{
    static const char units[] = "KMGT";
    const char *u = strchr(units, *s >= 'a' && *s <= 'z' ? *s - 'a' + 'A' : *s);
    int shift = 0;
    if (*s != '\0' && u != NULL) {
        shift = 10 * (int)(u - units + 1);
        s++;
        if (*s == 'i' || *s == 'I') {
            s++;
            if (*s != 'b' && *s != 'B')
                return -1;
        }
    }
    if (*s == 'b' || *s == 'B')
        s++;
    return *param_skip_space(s) == '\0' ? shift : -1;
}

braid_status_t braid_param_parse_size(const char *text, int64_t *val_p)
{
    if (text == NULL)
        return BRAID_ERR_INVALID;
    const char *s = param_skip_space(text);
    uint64_t u;
    if (*s == '+')
        s++;
    BRAID_CHECK(param_parse_digits(&s, 10, &u));
    int shift = param_size_shift(s);
    if (shift < 0 || u > ((uint64_t)INT64_MAX >> shift))
        return BRAID_ERR_INVALID;
    *val_p = (int64_t)(u << shift);
    return BRAID_OK;
}

braid_status_t braid_param_parse_bool(const char *text, int64_t *val_p)
{
    static const char *const yes[] = { "1", "yes", "true", "on" };
    static const char *const no[] = { "0", "no", "false", "off" };
    char word[8];
    if (text == NULL)
        return BRAID_ERR_INVALID;
    const char *s = param_skip_space(text);
    size_t n = strcspn(s, " \t");
    if (n == 0 || n >= sizeof(word) || *param_skip_space(s + n) != '\0')
        return BRAID_ERR_INVALID;
    memcpy(word, s, n);
    word[n] = '\0';
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(word, yes[i]) == 0 || strcasecmp(word, no[i]) == 0) {
            *val_p = strcasecmp(word, yes[i]) == 0;
            return BRAID_OK;
        }
    }
    return BRAID_ERR_INVALID;
}

/* Parse `text` as the entry's type and check its range. */
static braid_status_t param_parse(const param_entry_t *e, const char *text, int64_t *val_p)
{
    int64_t v = 0;
    switch (e->desc.type) {
    case BRAID_PARAM_INT:
        BRAID_CHECK(braid_param_parse_int(text, &v));
        break;
    case BRAID_PARAM_SIZE:
        BRAID_CHECK(braid_param_parse_size(text, &v));
        break;
    case BRAID_PARAM_BOOL:
        BRAID_CHECK(braid_param_parse_bool(text, &v));
        break;
    case BRAID_PARAM_STR:
        break;
    }
    if ((e->desc.type == BRAID_PARAM_INT || e->desc.type == BRAID_PARAM_SIZE) &&
        (v < e->min || v > e->max))
        return BRAID_ERR_INVALID;
    *val_p = v;
    return BRAID_OK;
}

braid_status_t braid_param_parse(braid_param_id_t id, const char *text, int64_t *val_p)
{
    if ((int)id < 0 || id >= BRAID_P_COUNT)
        return BRAID_ERR_INVALID;
    return param_parse(&param_table[id], text, val_p);
}

/* getenv, with "" counted as unset. */
static const char *param_env(const char *var)
{
    const char *text = getenv(var);
    return text != NULL && *text != '\0' ? text : NULL;
}

static void param_val_default(const param_entry_t *e, param_val_t *pv)
{
    int64_t v = 0;
    if (param_parse(e, e->desc.defval, &v) != BRAID_OK)
        v = 0;  /* a table bug; tests/unit/test_param.c checks every default parses */
    pv->ival = v;
    pv->sval = e->desc.defval;
    pv->src = BRAID_PARAM_SRC_DEFAULT;
}

/* Fill one entry from the environment: BRAID_<NAME>, else the alias, else the default. */
static void param_val_load(braid_param_id_t id, param_val_t *pv)
{
    const param_entry_t *e = &param_table[id];
    char var[PARAM_VAR_MAX];
    int64_t v;
    snprintf(var, sizeof(var), "BRAID_%s", e->desc.name);
    braid_param_src_t src = BRAID_PARAM_SRC_BRAID_ENV;
    const char *text = param_env(var);
    if (text == NULL && e->desc.alias != NULL) {
        snprintf(var, sizeof(var), "%s", e->desc.alias);
        src = BRAID_PARAM_SRC_NCCL_ENV;
        text = param_env(var);
    }
    param_val_default(e, pv);
    if (text == NULL)
        return;
    char *copy = strdup(text);
    if (copy == NULL)
        return;  /* out of memory this early: the default will do */
    if (param_parse(e, copy, &v) != BRAID_OK) {
        snprintf(pv->bad_var, sizeof(pv->bad_var), "%s", var);
        pv->bad_text = copy;
        return;
    }
    pv->ival = v;
    pv->sval = copy;
    pv->src = src;
}

static void param_snap_fill(param_snap_t *snap)
{
    for (int id = 0; id < BRAID_P_COUNT; id++)
        param_val_load((braid_param_id_t)id, &snap->v[id]);
}

static void param_load_first(void)
{
    param_snap_fill(&param_snap0);
    atomic_store(&param_snap_cur, &param_snap0);
}

static param_snap_t *param_snap_get(void)
{
    pthread_once(&param_once, param_load_first);
    return atomic_load(&param_snap_cur);
}

void braid_param_reload(void)
{
    pthread_once(&param_once, param_load_first);
    param_snap_t *snap = calloc(1, sizeof(*snap));
    if (snap == NULL) {
        BRAID_WARN("cannot allocate %zu bytes to reload the parameters; keeping the old values",
                   sizeof(*snap));
        return;
    }
    pthread_mutex_lock(&param_mu);
    param_snap_fill(snap);
    snap->prev = atomic_load(&param_snap_cur);
    atomic_store(&param_snap_cur, snap);
    pthread_mutex_unlock(&param_mu);
}

/* The WARN for a rejected value, once per snapshot. */
static void param_warn_once(braid_param_id_t id, param_val_t *pv)
{
    const param_entry_t *e = &param_table[id];
    if (pv->bad_text == NULL || atomic_exchange(&pv->warned, 1) != 0)
        return;
    switch (e->desc.type) {
    case BRAID_PARAM_BOOL:
        BRAID_WARN("%s=\"%s\" is not a boolean (use 0/1, yes/no, true/false or on/off); "
                   "using the default %s", pv->bad_var, pv->bad_text, e->desc.defval);
        break;
    case BRAID_PARAM_SIZE:
        BRAID_WARN("%s=\"%s\" is not a byte size in [%" PRId64 ", %" PRId64 "] (e.g. 64K, "
                   "4M, 1G); using the default %s", pv->bad_var, pv->bad_text, e->min, e->max,
                   e->desc.defval);
        break;
    default:
        BRAID_WARN("%s=\"%s\" is not an integer in [%" PRId64 ", %" PRId64 "]; using the "
                   "default %s", pv->bad_var, pv->bad_text, e->min, e->max, e->desc.defval);
        break;
    }
}

static int param_id_ok(braid_param_id_t id)
{
    return (int)id >= 0 && id < BRAID_P_COUNT;
}

int64_t braid_param_int(braid_param_id_t id)
{
    if (!param_id_ok(id))
        return 0;
    param_val_t *pv = &param_snap_get()->v[id];
    param_warn_once(id, pv);
    return pv->ival;
}

const char *braid_param_str(braid_param_id_t id)
{
    return param_id_ok(id) ? param_snap_get()->v[id].sval : "";
}

braid_param_src_t braid_param_source(braid_param_id_t id)
{
    return param_id_ok(id) ? param_snap_get()->v[id].src : BRAID_PARAM_SRC_DEFAULT;
}

const braid_param_t *braid_param_desc(braid_param_id_t id)
{
    return param_id_ok(id) ? &param_table[id].desc : NULL;
}

/* The cells of one dump row. */
typedef struct param_row {
    char name[PARAM_VAR_MAX];
    const char *alias, *value, *defval, *help, *source;
    char rejected[PARAM_VAR_MAX + 80];  /* source text when a value was rejected */
} param_row_t;

static const char *param_show(const char *text)
{
    return *text != '\0' ? text : "\"\"";
}

static void param_row_make(const param_snap_t *snap, braid_param_id_t id, param_row_t *row)
{
    const param_entry_t *e = &param_table[id];
    const param_val_t *pv = &snap->v[id];
    snprintf(row->name, sizeof(row->name), "BRAID_%s", e->desc.name);
    row->alias = e->desc.alias != NULL ? e->desc.alias : "-";
    row->value = param_show(pv->sval);
    row->defval = param_show(e->desc.defval);
    row->help = e->desc.help;
    row->source = "default";
    if (pv->src == BRAID_PARAM_SRC_BRAID_ENV)
        row->source = row->name;
    else if (pv->src == BRAID_PARAM_SRC_NCCL_ENV)
        row->source = e->desc.alias;
    else if (pv->bad_text != NULL) {
        snprintf(row->rejected, sizeof(row->rejected), "default (%s=\"%.40s\" rejected)",
                 pv->bad_var, pv->bad_text);
        row->source = row->rejected;
    }
}

static int param_width(int w, const char *cell)
{
    int n = (int)strlen(cell);
    return n > w ? n : w;
}

void braid_param_dump(FILE *out)
{
    const param_snap_t *snap = param_snap_get();
    param_row_t rows[BRAID_P_COUNT];
    int w[5] = { 4, 5, 5, 7, 6 };  /* the header words */
    for (int id = 0; id < BRAID_P_COUNT; id++) {
        param_row_t *r = &rows[id];
        param_row_make(snap, (braid_param_id_t)id, r);
        w[0] = param_width(w[0], r->name);
        w[1] = param_width(w[1], r->alias);
        w[2] = param_width(w[2], r->value);
        w[3] = param_width(w[3], r->defval);
        w[4] = param_width(w[4], r->source);
    }
    fprintf(out, "%-*s  %-*s  %-*s  %-*s  %-*s  %s\n", w[0], "NAME", w[1], "ALIAS", w[2],
            "VALUE", w[3], "DEFAULT", w[4], "SOURCE", "DESCRIPTION");
    for (int id = 0; id < BRAID_P_COUNT; id++) {
        const param_row_t *r = &rows[id];
        fprintf(out, "%-*s  %-*s  %-*s  %-*s  %-*s  %s\n", w[0], r->name, w[1], r->alias, w[2],
                r->value, w[3], r->defval, w[4], r->source, r->help);
    }
}
