/*
 * NCCL_TUNER_PLUGIN: an external NCCL tuner plugin overriding braid's choice of algorithm.
 *
 * The setting names the library as NCCL_NET_PLUGIN does (NAME: libnccl-tuner-NAME.so; a
 * path or a file name as given; "none" or empty: no plugin). It is opened once per process
 * and never closed, and its table is the newest braid knows: ncclTunerPlugin_v5, _v4.
 * A library that cannot be opened, or has neither table, fails the communicator's
 * creation with the reason. Each communicator gets its own context from the plugin's init
 * (a failing init fails the creation) and gives it back at destroy.
 *
 * A call. For broadcast, reduce, all-gather, reduce-scatter and all-reduce (the
 * collectives NCCL asks a tuner about), braid ranks its algorithms as it always does, then
 * hands the plugin NCCL's cost table: NCCL's algorithms by protocol, in microseconds,
 * filled from braid's cost model where braid has that algorithm and NCCL_ALGO allows it:
 *
 *     TREE   / Simple    braid's tree (double binary tree)
 *     RING   / Simple    braid's ring (all-reduce, all-gather, reduce-scatter), chain
 *                        (broadcast, reduce: NCCL's "ring" there)
 *
 * and -1 (ignore) everywhere else. When the plugin changes the table, the cheapest entry
 * it leaves is the choice. A plugin that leaves the table as it was, or fails, leaves
 * braid's own choice, which may be one of braid's algorithms NCCL has no row for (rd,
 * hier, oneshot ...). An entry braid cannot run (an algorithm it lacks, or one that
 * declines the call) also leaves braid's choice; that is logged once per collective. The
 * protocol column is not a choice (braid has one protocol), nor is the plugin's nChannels.
 *
 * Every rank must choose alike: the plugin must answer the same on every rank, as NCCL
 * requires too. A rank that runs another algorithm fails the call on its peers with a
 * mismatch naming both algorithms (the message header carries it, src/exec/exec.c).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "algorithms/nccl_tuner.h"
#include "algorithms/tune.h"
#include "base/log.h"
#include "base/plugin.h"

#define TP_ERR_MAX 768

static struct {
    pthread_once_t once;
    char value[256];            /* NCCL_TUNER_PLUGIN as loaded */
    braid_status_t st;
    char err[TP_ERR_MAX];
    int v;                      /* 4 or 5 */
    const ncclTuner_v4_t *v4;
    const ncclTuner_v5_t *v5;
    const char *name;
    char path[256];
} tp_g = { .once = PTHREAD_ONCE_INIT };

static const char *tp_name(void)
{
    return tp_g.name != NULL ? tp_g.name : "?";
}

__attribute__((format(printf, 5, 6)))
static void tp_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                      const char *fmt, ...)
{
    char who[96];
    va_list ap;
    snprintf(who, sizeof(who), "tuner plugin %s", tp_name());
    va_start(ap, fmt);
    braid_plugin_vlog(level, flags, BRAID_SUB_TUNING, file, line, who, fmt, ap);
    va_end(ap);
}

static braid_status_t tp_open(const char *value)
{
    if (braid_plugin_path(value, "tuner", tp_g.path, sizeof(tp_g.path)) != 0) {
        snprintf(tp_g.err, sizeof(tp_g.err), "NCCL_TUNER_PLUGIN=%.64s... is longer than %zu "
                 "characters", value, sizeof(tp_g.path) - 1);
        return BRAID_ERR_INVALID;
    }
    void *dl = dlopen(tp_g.path, RTLD_NOW | RTLD_LOCAL);
    if (dl == NULL) {
        const char *why = dlerror();
        snprintf(tp_g.err, sizeof(tp_g.err), "cannot load the tuner plugin "
                 "NCCL_TUNER_PLUGIN=%s (%s): %s%s", value, tp_g.path,
                 why != NULL ? why : "unknown dlopen error",
                 strchr(tp_g.path, '/') ? "" : " (give its path, or put its directory in "
                 "LD_LIBRARY_PATH; NCCL_TUNER_PLUGIN=none loads none)");
        return BRAID_ERR_INVALID;
    }
    if ((tp_g.v5 = dlsym(dl, "ncclTunerPlugin_v5")) != NULL) {
        tp_g.v = 5;
        tp_g.name = tp_g.v5->name;
    } else if ((tp_g.v4 = dlsym(dl, "ncclTunerPlugin_v4")) != NULL) {
        tp_g.v = 4;
        tp_g.name = tp_g.v4->name;
    } else {
        int old = braid_plugin_old_version(dl, "ncclTunerPlugin_v", 3);
        char had[64] = "";
        if (old != 0)
            snprintf(had, sizeof(had), "; it has ncclTunerPlugin_v%d", old);
        snprintf(tp_g.err, sizeof(tp_g.err), "the tuner plugin %s (NCCL_TUNER_PLUGIN=%s) "
                 "exports neither ncclTunerPlugin_v5 nor ncclTunerPlugin_v4%s: braid accepts "
                 "v4 and v5", tp_g.path, value, had);
        dlclose(dl);
        return BRAID_ERR_INVALID;
    }
    int whole = tp_g.v == 5 ? tp_g.v5->init && tp_g.v5->getCollInfo && tp_g.v5->finalize
                            : tp_g.v4->init && tp_g.v4->getCollInfo && tp_g.v4->destroy;
    if (tp_g.name == NULL || !whole) {
        snprintf(tp_g.err, sizeof(tp_g.err), "the ncclTunerPlugin_v%d table of the tuner "
                 "plugin %s lacks its name, init, getCollInfo or %s", tp_g.v, tp_g.path,
                 tp_g.v == 5 ? "finalize" : "destroy");
        tp_g.name = NULL;
        dlclose(dl);
        return BRAID_ERR_INVALID;
    }
    return BRAID_OK;
}

static void tp_load_once(void)
{
    tp_g.st = tp_open(tp_g.value);
    if (tp_g.st == BRAID_OK)
        BRAID_INFO(BRAID_SUB_INIT | BRAID_SUB_TUNING, "tuner: loaded the tuner plugin %s "
                   "(ncclTunerPlugin_v%d) from %s", tp_g.name, tp_g.v, tp_g.path);
}

braid_status_t braid_tune_plugin_load(braid_tune_t *t, const char *value)
{
    if (!braid_plugin_named(value))
        return BRAID_OK;
    if (strlen(value) >= sizeof(t->plugin_spec))
        return braid_err(BRAID_ERR_INVALID, "NCCL_TUNER_PLUGIN=%.64s... is longer than %zu "
                         "characters", value, sizeof(t->plugin_spec) - 1);
    /* the first communicator's value is the process's: parameters do not change */
    if (tp_g.value[0] == '\0')
        snprintf(tp_g.value, sizeof(tp_g.value), "%s", value);
    pthread_once(&tp_g.once, tp_load_once);
    if (tp_g.st != BRAID_OK)
        return braid_err(tp_g.st, "%s", tp_g.err);
    snprintf(t->plugin_spec, sizeof(t->plugin_spec), "%s", value);
    return BRAID_OK;
}

braid_status_t braid_tune_plugin_init(braid_tune_t *t, uint64_t comm_id, int nranks,
                                      int nhosts, int minlocal, int maxlocal)
{
    if (t->plugin_spec[0] == '\0')
        return BRAID_OK;
    ncclResult_t r;
    void *ctx = NULL;
    if (tp_g.v == 5) {
        ncclNvlDomainInfo_v5_t dom = { .nNvlDomains = nhosts, .minRanksPerNvlDomain = minlocal,
                                       .maxRanksPerNvlDomain = maxlocal };
        ncclTunerConstants_v5_t consts;
        memset(&consts, 0, sizeof(consts));
        r = tp_g.v5->init(&ctx, comm_id, (size_t)nranks, (size_t)nhosts, tp_logger, &dom,
                          &consts);
    } else {
        r = tp_g.v4->init((size_t)nranks, (size_t)nhosts, tp_logger, &ctx);
    }
    if (r != ncclSuccess)
        return braid_err(braid_plugin_status(r), "tuner plugin %s: init failed: %s "
                         "(ncclResult_t %d); NCCL_TUNER_PLUGIN=none runs without it",
                         tp_name(), braid_plugin_result_str(r), (int)r);
    t->plugin_ctx = ctx;
    t->plugin_on = 1;
    return BRAID_OK;
}

void braid_tune_plugin_fini(braid_tune_t *t)
{
    if (!t->plugin_on)
        return;
    t->plugin_on = 0;
    ncclResult_t r = tp_g.v == 5 ? tp_g.v5->finalize(t->plugin_ctx)
                                 : tp_g.v4->destroy(t->plugin_ctx);
    if (r != ncclSuccess)
        BRAID_WARN("tuner plugin %s: %s failed: %s", tp_name(),
                   tp_g.v == 5 ? "finalize" : "destroy", braid_plugin_result_str(r));
}

static int tp_func(braid_coll_kind_t kind)
{
    switch (kind) {
    case BRAID_COLL_BROADCAST: return ncclFuncBroadcast;
    case BRAID_COLL_REDUCE: return ncclFuncReduce;
    case BRAID_COLL_ALLGATHER: return ncclFuncAllGather;
    case BRAID_COLL_REDUCESCATTER: return ncclFuncReduceScatter;
    case BRAID_COLL_ALLREDUCE: return ncclFuncAllReduce;
    default: return -1;
    }
}

/* NCCL's row for one of braid's algorithms (by its NCCL name where it has one), or -1. */
static int tp_row(const braid_algo_t *a)
{
    const char *name = a->nccl != NULL ? a->nccl : a->name;
    if (strcmp(name, "tree") == 0)
        return NCCL_ALGO_TREE;
    if (strcmp(name, "ring") == 0)
        return NCCL_ALGO_RING;
    return -1;
}

static const char *const tp_algo_names[NCCL_NUM_ALGORITHMS] = {
    "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"
};
static const char *const tp_proto_names[NCCL_NUM_PROTOCOLS] = { "LL", "LL128", "SIMPLE" };

int braid_tune_plugin_pick(const braid_coll_t *coll, const braid_algo_t **order,
                           const double *costs, int *cuts, int n)
{
    braid_tune_t *t = coll->tune;
    int func = tp_func(coll->kind);
    if (t == NULL || !t->plugin_on || func < 0 || n == 0)
        return 0;
    float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS], given[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
    int at[NCCL_NUM_ALGORITHMS];        /* index in order[] of the algorithm of each row */
    for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++) {
        at[a] = -1;
        for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
            table[a][p] = NCCL_ALGO_PROTO_IGNORE;
    }
    for (int i = 0; i < n; i++) {
        int a = tp_row(order[i]);
        if (a >= 0 && at[a] < 0) {
            at[a] = i;
            table[a][NCCL_PROTO_SIMPLE] = (float)costs[i];
        }
    }
    memcpy(given, table, sizeof(table));
    int nchannels = 0;
    size_t bytes = braid_coll_bytes(coll);
    ncclResult_t r = tp_g.v == 5
        ? tp_g.v5->getCollInfo(t->plugin_ctx, (ncclFunc_t)func, bytes, 1, (float **)table,
                               NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nchannels)
        : tp_g.v4->getCollInfo(t->plugin_ctx, (ncclFunc_t)func, bytes, 1, (float **)table,
                               NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nchannels);
    if (r != ncclSuccess) {
        BRAID_INFO(BRAID_SUB_TUNING, "tuner plugin %s: getCollInfo for %s of %zu bytes "
                   "failed: %s; braid's own choice runs", tp_name(),
                   braid_coll_name(coll->kind), bytes, braid_plugin_result_str(r));
        return 0;
    }
    if (memcmp(given, table, sizeof(table)) == 0)
        return 0;
    int ba = -1, bp = -1;
    for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
        for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
            if (table[a][p] >= 0 && (ba < 0 || table[a][p] < table[ba][bp])) {
                ba = a;
                bp = p;
            }
    if (ba < 0)
        return 0;
    if (at[ba] < 0) {
        uint32_t bit = 1u << coll->kind;
        if (!(atomic_fetch_or(&t->plugin_warned, bit) & bit))
            BRAID_INFO(BRAID_SUB_TUNING, "tuner plugin %s chose %s/%s for %s of %zu bytes: "
                       "braid has no such algorithm that runs the call here (its TREE is tree, "
                       "its RING ring or chain); braid's own choice runs (logged once per "
                       "collective)", tp_name(), tp_algo_names[ba], tp_proto_names[bp],
                       braid_coll_name(coll->kind), bytes);
        return 0;
    }
    const braid_algo_t *chosen = order[at[ba]];
    int chosen_cuts = cuts[at[ba]];
    memmove(order + 1, order, (size_t)at[ba] * sizeof(order[0]));
    memmove(cuts + 1, cuts, (size_t)at[ba] * sizeof(cuts[0]));
    order[0] = chosen;
    cuts[0] = chosen_cuts;
    return 1;
}

const char *braid_tune_plugin_name(void)
{
    return tp_name();
}
