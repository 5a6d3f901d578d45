/*
 * User schedules: loading (parse, prove, register) and the algorithm-table entry that turns
 * a schedule's chunks into bytes. See usched.h, usched_int.h for the other two parts, and
 * docs/SCHEDULES.md for the format.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/model.h"
#include "algorithms/tune.h"
#include "algorithms/usched_int.h"
#include "base/log.h"

static struct {
    pthread_mutex_t lock;
    us_sched_t *s[BRAID_USCHED_MAX];
    int n;
    pthread_once_t param_once;
    const char *param_list;
    braid_status_t param_st;
    char param_err[1024];
} us_g = { .lock = PTHREAD_MUTEX_INITIALIZER, .param_once = PTHREAD_ONCE_INIT };

/* ---- the algorithm: chunks to bytes ------------------------------------------------------ */

static braid_ref_t us_ref(us_reg_t r, size_t chunk_bytes)
{
    return r.buf == BRAID_BUF_NONE ? braid_ref_none()
                                   : braid_ref((braid_buf_t)r.buf, (size_t)r.chunk * chunk_bytes);
}

braid_status_t braid_usched_rank_build(const us_sched_t *u, const braid_coll_t *c,
                                       braid_sched_t *s)
{
    if (!braid_usched_takes(u, c))
        return BRAID_ERR_UNSUPPORTED;
    size_t cb = c->count / (size_t)u->chunks * braid_dtype_size(c->dtype);
    s->scratch_bytes = (size_t)u->scratch * cb;
    for (int i = 0; i < u->nsteps[c->rank]; i++) {
        const us_step_t *st = &u->steps[c->rank][i];
        if (st->flags & BRAID_STEP_STAGE)
            braid_sched_stage(s);
        BRAID_CHECK(braid_sched_add(s, st->recv, st->send, us_ref(st->src, cb),
                                    us_ref(st->dst, cb), (size_t)st->nchunks * cb,
                                    st->flags & ~BRAID_STEP_STAGE));
    }
    return BRAID_OK;
}

/* The slowest rank's sum of its messages (every rank computes the same). */
static double us_cost(const us_sched_t *u, const braid_coll_t *c, const braid_model_t *m)
{
    if (!braid_usched_takes(u, c))
        return BRAID_COST_NONE;
    double cb = (double)(c->count / (size_t)u->chunks * braid_dtype_size(c->dtype)), worst = 0;
    for (int r = 0; r < u->nranks; r++) {
        double t = 0;
        for (int i = 0; i < u->nsteps[r]; i++) {
            const us_step_t *st = &u->steps[r][i];
            double b = (double)st->nchunks * cb;
            if (st->send >= 0)
                t += braid_model_msg(m, braid_coll_link(c, r, st->send), b) + m->step;
            if (st->flags & BRAID_STEP_REDUCE)
                t += b * m->gamma;
        }
        if (t > worst)
            worst = t;
    }
    return worst;
}

/* The table's build and cost functions take no context: one pair per slot. */
#define US_SLOT(i)                                                                         \
    static braid_status_t us_build_##i(const braid_coll_t *c, braid_sched_t *s)            \
    {                                                                                      \
        return braid_usched_rank_build(us_g.s[i], c, s);                                   \
    }                                                                                      \
    static double us_cost_##i(const braid_coll_t *c, const braid_model_t *m)              \
    {                                                                                      \
        return us_cost(us_g.s[i], c, m);                                                   \
    }
US_SLOT(0) US_SLOT(1) US_SLOT(2) US_SLOT(3) US_SLOT(4) US_SLOT(5) US_SLOT(6) US_SLOT(7)
US_SLOT(8) US_SLOT(9) US_SLOT(10) US_SLOT(11) US_SLOT(12) US_SLOT(13) US_SLOT(14) US_SLOT(15)
#define US_FNS(i) { us_build_##i, us_cost_##i }
static const struct {
    braid_status_t (*build)(const braid_coll_t *, braid_sched_t *);
    double (*cost)(const braid_coll_t *, const braid_model_t *);
} us_fns[BRAID_USCHED_MAX] = {
    US_FNS(0), US_FNS(1), US_FNS(2), US_FNS(3), US_FNS(4), US_FNS(5), US_FNS(6), US_FNS(7),
    US_FNS(8), US_FNS(9), US_FNS(10), US_FNS(11), US_FNS(12), US_FNS(13), US_FNS(14), US_FNS(15),
};

/* ---- loading ----------------------------------------------------------------------------- */

/* The handle of a schedule loaded from `path` with the same text, or -1. Under the lock. */
static int us_loaded(const char *path, uint64_t hash)
{
    for (int i = 0; i < us_g.n; i++)
        if (!us_g.s[i]->retired && us_g.s[i]->hash == hash &&
            strcmp(us_g.s[i]->path, path) == 0)
            return i;
    return -1;
}

/* A proved schedule's slot and its entry in the algorithm table: its handle. Under the lock,
 * with a slot free. */
static int us_register(us_sched_t *u, uint64_t hash)
{
    int i = us_g.n;
    u->hash = hash;
    u->algo = (braid_algo_t){ .name = u->name, .colls = 1u << u->kind,
                              .build = us_fns[i].build, .cost = us_fns[i].cost, .user = u };
    us_g.s[i] = u;
    us_g.n = i + 1;
    braid_algo_register(&u->algo);
    BRAID_INFO(BRAID_SUB_INIT | BRAID_SUB_TUNING, "schedule %s: %s on %d ranks, %d chunks, "
               "loaded from %s (proved by the simulator%s)", u->name, braid_coll_name(u->kind),
               u->nranks, u->chunks, u->path, u->in_place ? ", in place too" : "");
    return i;
}

braid_status_t braid_usched_load(const char *path, int *handle_p)
{
    char err[1024] = "";
    us_parse_t p = { .path = path, .err = err, .errlen = sizeof(err) };
    if (path == NULL || path[0] == '\0')
        return braid_err(BRAID_ERR_INVALID, "a schedule file needs a path");
    if (strlen(path) >= sizeof(((us_sched_t *)0)->path))
        return braid_err(BRAID_ERR_INVALID, "schedule file path longer than %zu characters",
                         sizeof(((us_sched_t *)0)->path) - 1);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return braid_err(BRAID_ERR_INVALID, "schedule file %s: cannot open it: %s", path,
                         strerror(errno));
    us_sched_t *u = calloc(1, sizeof(*u));
    braid_status_t st = u == NULL ? braid_usched_fail(&p, 0, "out of memory") : BRAID_OK;
    uint64_t hash = 0;
    pthread_mutex_lock(&us_g.lock);
    if (st == BRAID_OK) {
        snprintf(u->path, sizeof(u->path), "%s", path);
        st = braid_usched_file_parse(&p, f, u, &hash);
    }
    fclose(f);
    int same = st == BRAID_OK ? us_loaded(path, hash) : -1;
    if (same >= 0) {
        *handle_p = same;
        pthread_mutex_unlock(&us_g.lock);
        braid_usched_sched_free(u);
        return BRAID_OK;
    }
    if (st == BRAID_OK && braid_tune_algo_known(u->name))
        st = braid_usched_fail(&p, u->name_line, "the name \"%s\" is taken (by one of braid's or "
                               "NCCL's algorithms, or a schedule loaded earlier: a file's new "
                               "version takes a new name)", u->name);
    if (st == BRAID_OK)
        st = braid_usched_sends_match(&p, u);
    if (st == BRAID_OK)
        st = braid_usched_sim_prove(&p, u);
    if (st == BRAID_OK && (us_g.n >= BRAID_USCHED_MAX || braid_nalgos >= BRAID_ALGOS_MAX))
        st = braid_usched_fail(&p, 0, "%d schedules are loaded already, the most a process takes",
                               us_g.n);
    if (st == BRAID_OK)
        *handle_p = us_register(u, hash);
    pthread_mutex_unlock(&us_g.lock);
    if (st != BRAID_OK) {
        braid_usched_sched_free(u);
        return braid_err(st, "%s", err);
    }
    return BRAID_OK;
}

static void us_param_once(void)
{
    char *list = strdup(us_g.param_list), *save = NULL;
    if (list == NULL) {
        us_g.param_st = braid_err(BRAID_ERR_NOMEM, "out of memory reading BRAID_SCHEDULES");
        return;
    }
    for (char *t = strtok_r(list, ":", &save); t != NULL; t = strtok_r(NULL, ":", &save)) {
        int h;
        us_g.param_st = braid_usched_load(t, &h);
        if (us_g.param_st != BRAID_OK) {
            snprintf(us_g.param_err, sizeof(us_g.param_err), "BRAID_SCHEDULES: %s",
                     braid_err_last());
            break;
        }
    }
    free(list);
}

braid_status_t braid_usched_load_param(const char *list)
{
    if (list == NULL || list[0] == '\0')
        return BRAID_OK;
    us_g.param_list = list;
    pthread_once(&us_g.param_once, us_param_once);
    if (us_g.param_st != BRAID_OK)
        return braid_err(us_g.param_st, "%s", us_g.param_err);
    return BRAID_OK;
}

const braid_algo_t *braid_usched_algo(int handle)
{
    const braid_algo_t *a = NULL;
    pthread_mutex_lock(&us_g.lock);
    if (handle >= 0 && handle < us_g.n && !us_g.s[handle]->retired)
        a = &us_g.s[handle]->algo;
    pthread_mutex_unlock(&us_g.lock);
    return a;
}

braid_status_t braid_usched_unload(int handle)
{
    braid_status_t st = BRAID_OK;
    pthread_mutex_lock(&us_g.lock);
    if (handle < 0 || handle >= us_g.n || us_g.s[handle]->retired)
        st = braid_err(BRAID_ERR_INVALID, "schedule handle %d: no such schedule is loaded",
                       handle);
    else
        us_g.s[handle]->retired = 1;
    pthread_mutex_unlock(&us_g.lock);
    return st;
}
