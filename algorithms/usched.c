/*
 * User schedules: the file format's parser, the checks at load, the algorithm entry. See
 * usched.h, and docs/SCHEDULES.md for the format.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/model.h"
#include "algorithms/tune.h"
#include "algorithms/usched.h"
#include "base/log.h"
#include "algorithms/sim.h"

#define US_MAX_RANKS 1024
#define US_MAX_CHUNKS 4096
#define US_LINE_MAX 512

typedef struct us_reg {
    uint8_t buf;        /* BRAID_BUF_NONE, SEND ("in"), RECV ("out"), SCRATCH */
    int chunk;          /* first chunk */
} us_reg_t;

typedef struct us_step {
    int recv, send;     /* peers, -1: none */
    uint32_t flags;     /* BRAID_STEP_* */
    us_reg_t src, dst;
    int nchunks;
    int line;
} us_step_t;

typedef struct us_sched {
    braid_algo_t algo;          /* its entry in the algorithm table */
    char name[32];
    char path[256];
    braid_coll_kind_t kind;
    int nranks, chunks, scratch;
    int name_line;
    int in_place;               /* runs in-place calls too (proved at load) */
    int retired;
    uint64_t hash;              /* of the file's text */
    us_step_t **steps;          /* [rank][i] */
    int *nsteps;
} us_sched_t;

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

/* Elements per "unit" of the call that the schedule cuts into chunks: the all-reduce
 * buffer, one rank's block of all-gather and reduce-scatter, one peer's of all-to-all. */
static int us_takes(const us_sched_t *u, const braid_coll_t *c)
{
    if (u->retired || c->kind != u->kind || c->nranks != u->nranks || c->count == 0 ||
        c->count % (size_t)u->chunks != 0)
        return 0;
    if (c->in_place && !u->in_place)
        return 0;
    return 1;
}

static braid_ref_t us_ref(us_reg_t r, size_t chunk_bytes)
{
    return r.buf == BRAID_BUF_NONE ? braid_ref_none()
                                   : braid_ref((braid_buf_t)r.buf, (size_t)r.chunk * chunk_bytes);
}

static braid_status_t us_build(const us_sched_t *u, const braid_coll_t *c, braid_sched_t *s)
{
    if (!us_takes(u, c))
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
    if (!us_takes(u, c))
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
        return us_build(us_g.s[i], c, s);                                                  \
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

/* ---- parsing ----------------------------------------------------------------------------- */

typedef struct us_parse {
    const char *path;
    int line;
    char *err;
    size_t errlen;
} us_parse_t;

__attribute__((format(printf, 3, 4)))
static braid_status_t us_fail(us_parse_t *p, int line, const char *fmt, ...)
{
    char why[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(p->err, p->errlen, "schedule file %s, line %d: %s", p->path, line, why);
    else
        snprintf(p->err, p->errlen, "schedule file %s: %s", p->path, why);
    return BRAID_ERR_INVALID;
}

static int us_int(const char *w, int lo, int hi, int *v)
{
    char *end;
    errno = 0;
    long x = strtol(w, &end, 10);
    if (errno != 0 || end == w || *end != '\0' || x < lo || x > hi)
        return -1;
    *v = (int)x;
    return 0;
}

static const char *const us_colls[] = { "allreduce", "allgather", "reducescatter", "alltoall" };
static const braid_coll_kind_t us_kinds[] = { BRAID_COLL_ALLREDUCE, BRAID_COLL_ALLGATHER,
                                              BRAID_COLL_REDUCESCATTER, BRAID_COLL_ALLTOALL };

/* Chunks of a buffer for the schedule's collective: in = the send buffer, out = receive. */
static int us_buf_chunks(const us_sched_t *u, uint8_t buf)
{
    int n = u->nranks, c = u->chunks;
    switch (buf) {
    case BRAID_BUF_SEND:
        return u->kind == BRAID_COLL_ALLREDUCE || u->kind == BRAID_COLL_ALLGATHER ? c : n * c;
    case BRAID_BUF_RECV:
        return u->kind == BRAID_COLL_ALLREDUCE || u->kind == BRAID_COLL_REDUCESCATTER ? c
                                                                                     : n * c;
    case BRAID_BUF_SCRATCH:
        return u->scratch;
    default:
        return 0;
    }
}

static const char *us_buf_name(uint8_t buf)
{
    return buf == BRAID_BUF_SEND ? "in" : buf == BRAID_BUF_RECV ? "out" : "scratch";
}

/* "BUF C" or "BUF C..D" at words w[0], w[1]: the region and its chunk count. */
static braid_status_t us_region(us_parse_t *p, const us_sched_t *u, char **w, us_reg_t *r,
                                int *nchunks)
{
    if (w[0] == NULL || w[1] == NULL)
        return us_fail(p, p->line, "a region is a buffer (in, out, scratch) and a chunk "
                       "(C or C..D)");
    r->buf = strcmp(w[0], "in") == 0        ? BRAID_BUF_SEND
             : strcmp(w[0], "out") == 0     ? BRAID_BUF_RECV
             : strcmp(w[0], "scratch") == 0 ? BRAID_BUF_SCRATCH
                                            : BRAID_BUF_NONE;
    if (r->buf == BRAID_BUF_NONE)
        return us_fail(p, p->line, "unknown buffer \"%s\" (in, out, scratch)", w[0]);
    char *dots = strstr(w[1], "..");
    int first, last, max = us_buf_chunks(u, r->buf);
    if (dots != NULL)
        *dots = '\0';
    if (us_int(w[1], 0, US_MAX_CHUNKS * US_MAX_RANKS, &first) != 0 ||
        (dots != NULL && us_int(dots + 2, 0, US_MAX_CHUNKS * US_MAX_RANKS, &last) != 0))
        return us_fail(p, p->line, "bad chunk \"%s%s%s\" (C or C..D)", w[1],
                       dots ? ".." : "", dots ? dots + 2 : "");
    if (dots == NULL)
        last = first;
    if (last < first || last >= max)
        return us_fail(p, p->line, "chunks %d..%d are outside %s, which has %d chunk%s", first,
                       last, us_buf_name(r->buf), max, max == 1 ? "" : "s");
    r->chunk = first;
    *nchunks = last - first + 1;
    return BRAID_OK;
}

static braid_status_t us_peer(us_parse_t *p, const us_sched_t *u, int rank, const char *what,
                              const char *w, int *peer)
{
    if (w == NULL || us_int(w, 0, u->nranks - 1, peer) != 0)
        return us_fail(p, p->line, "%s needs a rank from 0 to %d, got \"%s\"", what,
                       u->nranks - 1, w ? w : "");
    if (*peer == rank)
        return us_fail(p, p->line, "rank %d cannot %s itself", rank, what);
    return BRAID_OK;
}

static braid_status_t us_step_parse(us_parse_t *p, const us_sched_t *u, int rank, char **w,
                                    int nw, us_step_t *st)
{
    int nsrc = 0, ndst = 0, size = 0;
    memset(st, 0, sizeof(*st));
    st->recv = st->send = -1;
    st->line = p->line;
    for (int i = 0; i < nw; i++) {
        const char *k = w[i];
        if (strcmp(k, "recv") == 0 || strcmp(k, "send") == 0) {
            int *peer = k[0] == 'r' ? &st->recv : &st->send;
            if (*peer >= 0)
                return us_fail(p, p->line, "\"%s\" twice in one step", k);
            BRAID_CHECK(us_peer(p, u, rank, k, i + 1 < nw ? w[i + 1] : NULL, peer));
            i++;
        } else if (strcmp(k, "src") == 0 || strcmp(k, "dst") == 0) {
            us_reg_t *r = k[0] == 's' ? &st->src : &st->dst;
            int *n = k[0] == 's' ? &nsrc : &ndst;
            if (r->buf != BRAID_BUF_NONE)
                return us_fail(p, p->line, "\"%s\" twice in one step", k);
            char *two[2] = { i + 1 < nw ? w[i + 1] : NULL, i + 2 < nw ? w[i + 2] : NULL };
            BRAID_CHECK(us_region(p, u, two, r, n));
            i += 2;
        } else if (strcmp(k, "size") == 0) {
            if (i + 1 >= nw || us_int(w[i + 1], 1, US_MAX_CHUNKS * US_MAX_RANKS, &size) != 0)
                return us_fail(p, p->line, "size needs a number of chunks (1 or more)");
            i++;
        } else if (strcmp(k, "reduce") == 0) {
            st->flags |= BRAID_STEP_REDUCE;
        } else if (strcmp(k, "acc") == 0) {
            st->flags |= BRAID_STEP_ACC;
        } else if (strcmp(k, "final") == 0) {
            st->flags |= BRAID_STEP_FINAL;
        } else if (strcmp(k, "stage") == 0) {
            st->flags |= BRAID_STEP_STAGE;
        } else {
            return us_fail(p, p->line, "unknown word \"%s\" in a step (recv P, send P, src "
                           "BUF C[..D], dst BUF C[..D], size N, reduce, acc, final, stage)", k);
        }
    }
    if (nsrc && ndst && nsrc != ndst)
        return us_fail(p, p->line, "src has %d chunks and dst %d: a step moves one size", nsrc,
                       ndst);
    int n = nsrc ? nsrc : ndst;
    if (size && n && size != n)
        return us_fail(p, p->line, "size %d differs from the regions' %d chunks", size, n);
    st->nchunks = n ? n : size ? size : 1;
    if (st->recv < 0 && st->src.buf == BRAID_BUF_NONE)
        return us_fail(p, p->line, "the step reads nothing: it needs recv or src");
    if (st->send < 0 && st->dst.buf == BRAID_BUF_NONE && st->recv < 0)
        return us_fail(p, p->line, "the step goes nowhere: it needs send or dst");
    if (st->dst.buf == BRAID_BUF_SEND)
        return us_fail(p, p->line, "dst in: the input (the caller's send buffer) is "
                       "read-only");
    if ((st->flags & BRAID_STEP_REDUCE) && (st->recv < 0 || st->src.buf == BRAID_BUF_NONE))
        return us_fail(p, p->line, "reduce combines a receive with src: it needs both");
    if (!(st->flags & BRAID_STEP_REDUCE) && st->recv >= 0 && st->src.buf != BRAID_BUF_NONE)
        return us_fail(p, p->line, "a receiving step with src but without reduce would ignore "
                       "src: add reduce, or drop src");
    if ((st->flags & (BRAID_STEP_ACC | BRAID_STEP_FINAL)) && !(st->flags & BRAID_STEP_REDUCE))
        return us_fail(p, p->line, "acc and final apply to a reduce step only");
    if ((st->flags & BRAID_STEP_REDUCE) && u->kind != BRAID_COLL_ALLREDUCE &&
        u->kind != BRAID_COLL_REDUCESCATTER)
        return us_fail(p, p->line, "reduce in a %s schedule, which combines nothing",
                       us_colls[u->kind == BRAID_COLL_ALLGATHER ? 1 : 3]);
    return BRAID_OK;
}

static braid_status_t us_add_step(us_parse_t *p, us_sched_t *u, int rank, const us_step_t *st)
{
    int n = u->nsteps[rank];
    if ((n & (n - 1)) == 0) {
        us_step_t *grown = realloc(u->steps[rank], (size_t)(n ? 2 * n : 4) * sizeof(*grown));
        if (grown == NULL)
            return us_fail(p, p->line, "out of memory");
        u->steps[rank] = grown;
    }
    u->steps[rank][n] = *st;
    u->nsteps[rank] = n + 1;
    return BRAID_OK;
}

static int us_split(char *line, char **w, int max)
{
    int n = 0;
    char *hash = strchr(line, '#');
    if (hash != NULL)
        *hash = '\0';
    for (char *t = strtok(line, " \t\r\n"); t != NULL; t = strtok(NULL, " \t\r\n")) {
        if (n == max)
            return -1;
        w[n++] = t;
    }
    return n;
}

static int us_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= 32 || !isalpha((unsigned char)s[0]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
            return 0;
    return 1;
}

/* The header's fields, one per line, before the first "rank". */
static braid_status_t us_header_line(us_parse_t *p, us_sched_t *u, char **w, int nw)
{
    if (nw != 2)
        return us_fail(p, p->line, "\"%s\" takes one value", w[0]);
    if (strcmp(w[0], "name") == 0) {
        if (!us_name_ok(w[1]))
            return us_fail(p, p->line, "bad name \"%s\" (a letter, then letters, digits, _ "
                           "or -, up to 31)", w[1]);
        snprintf(u->name, sizeof(u->name), "%s", w[1]);
        u->name_line = p->line;
    } else if (strcmp(w[0], "collective") == 0) {
        size_t k = 0;
        while (k < 4 && strcmp(w[1], us_colls[k]) != 0)
            k++;
        if (k == 4)
            return us_fail(p, p->line, "collective \"%s\": version 1 has allreduce, allgather, "
                           "reducescatter, alltoall", w[1]);
        u->kind = us_kinds[k];
    } else if (strcmp(w[0], "ranks") == 0) {
        if (us_int(w[1], 1, US_MAX_RANKS, &u->nranks) != 0)
            return us_fail(p, p->line, "ranks: 1 to %d", US_MAX_RANKS);
    } else if (strcmp(w[0], "chunks") == 0) {
        if (us_int(w[1], 1, US_MAX_CHUNKS, &u->chunks) != 0)
            return us_fail(p, p->line, "chunks: 1 to %d", US_MAX_CHUNKS);
    } else if (strcmp(w[0], "scratch") == 0) {
        if (us_int(w[1], 0, US_MAX_CHUNKS * US_MAX_RANKS, &u->scratch) != 0)
            return us_fail(p, p->line, "scratch: a number of chunks");
    } else {
        return us_fail(p, p->line, "unknown header field \"%s\" (name, collective, ranks, "
                       "chunks, scratch; then rank sections)", w[0]);
    }
    return BRAID_OK;
}

static braid_status_t us_parse_file(us_parse_t *p, FILE *f, us_sched_t *u, uint64_t *hash)
{
    char line[US_LINE_MAX + 2];
    char *w[64];
    int rank = -1, seen_version = 0;
    *hash = 1469598103934665603ull;
    u->kind = BRAID_COLL_NUM;
    while (fgets(line, sizeof(line), f) != NULL) {
        p->line++;
        size_t len = strlen(line);
        if (len > US_LINE_MAX && line[len - 1] != '\n')
            return us_fail(p, p->line, "longer than %d characters", US_LINE_MAX);
        for (size_t i = 0; i < len; i++)
            *hash = (*hash ^ (unsigned char)line[i]) * 1099511628211ull;
        int nw = us_split(line, w, 64);
        if (nw < 0)
            return us_fail(p, p->line, "more than 64 words");
        if (nw == 0)
            continue;
        if (!seen_version) {
            if (strcmp(w[0], "braid-schedule") != 0)
                return us_fail(p, p->line, "not a braid schedule file: the first line must be "
                               "\"braid-schedule 1\"%s", w[0][0] == '<' ? " (MSCCL's XML "
                               "algorithms are not read: see docs/SCHEDULES.md)" : "");
            if (nw != 2 || strcmp(w[1], "1") != 0)
                return us_fail(p, p->line, "format version \"%s\": this braid reads version 1",
                               nw > 1 ? w[1] : "");
            seen_version = 1;
            continue;
        }
        if (strcmp(w[0], "rank") == 0) {
            if (u->nranks == 0 || u->chunks == 0 || u->name[0] == '\0' ||
                u->kind == BRAID_COLL_NUM)
                return us_fail(p, p->line, "the header must give name, collective, ranks and "
                               "chunks before the first rank section");
            if (u->steps == NULL) {
                u->steps = calloc((size_t)u->nranks, sizeof(*u->steps));
                u->nsteps = calloc((size_t)u->nranks, sizeof(*u->nsteps));
                if (u->steps == NULL || u->nsteps == NULL)
                    return us_fail(p, p->line, "out of memory");
            }
            int r;
            if (nw != 2 || us_int(w[1], 0, u->nranks - 1, &r) != 0)
                return us_fail(p, p->line, "rank needs a number from 0 to %d", u->nranks - 1);
            if (r != rank + 1)
                return us_fail(p, p->line, "rank %d: the sections go in order, rank 0 first "
                               "(expected rank %d)", r, rank + 1);
            rank = r;
            continue;
        }
        if (rank < 0) {
            BRAID_CHECK(us_header_line(p, u, w, nw));
            continue;
        }
        us_step_t st;
        BRAID_CHECK(us_step_parse(p, u, rank, w, nw, &st));
        BRAID_CHECK(us_add_step(p, u, rank, &st));
    }
    if (ferror(f))
        return us_fail(p, 0, "read error");
    if (!seen_version)
        return us_fail(p, 0, "empty: the first line must be \"braid-schedule 1\"");
    if (rank != u->nranks - 1)
        return us_fail(p, p->line, "ends after rank %d's section: ranks %d has a section "
                       "each (an empty one for a rank without steps)", rank, u->nranks);
    return BRAID_OK;
}

/* ---- the checks -------------------------------------------------------------------------- */

/* The k-th send from a to b is the k-th receive at b from a, of the same size. */
static braid_status_t us_match(us_parse_t *p, const us_sched_t *u)
{
    int n = u->nranks;
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            int i = 0, j = 0;
            for (;;) {
                while (i < u->nsteps[a] && u->steps[a][i].send != b)
                    i++;
                while (j < u->nsteps[b] && u->steps[b][j].recv != a)
                    j++;
                int has_s = i < u->nsteps[a], has_r = j < u->nsteps[b];
                if (!has_s && !has_r)
                    break;
                if (!has_r)
                    return us_fail(p, u->steps[a][i].line, "rank %d sends to rank %d, which "
                                   "has no receive from rank %d left for it", a, b, a);
                if (!has_s)
                    return us_fail(p, u->steps[b][j].line, "rank %d receives from rank %d, "
                                   "which has no send to rank %d left for it", b, a, b);
                const us_step_t *s = &u->steps[a][i], *r = &u->steps[b][j];
                if (s->nchunks != r->nchunks)
                    return us_fail(p, s->line, "rank %d sends %d chunk%s to rank %d; its "
                                   "receive (line %d) takes %d", a, s->nchunks,
                                   s->nchunks == 1 ? "" : "s", b, r->line, r->nchunks);
                i++;
                j++;
            }
        }
    return BRAID_OK;
}

#define US_K 3          /* elements per chunk in the simulation */

static int32_t us_in(int r, size_t i)
{
    return (int32_t)(r * 7919 + (int)i * 31 + 1);
}

/* What rank r's output element i must be. */
static int32_t us_want(const us_sched_t *u, int r, size_t i)
{
    size_t blk = (size_t)u->chunks * US_K;
    int32_t sum = 0;
    switch (u->kind) {
    case BRAID_COLL_ALLREDUCE:
        for (int q = 0; q < u->nranks; q++)
            sum += us_in(q, i);
        return sum;
    case BRAID_COLL_REDUCESCATTER:
        for (int q = 0; q < u->nranks; q++)
            sum += us_in(q, (size_t)r * blk + i);
        return sum;
    case BRAID_COLL_ALLGATHER:
        return us_in((int)(i / blk), i % blk);
    default:        /* all-to-all: block p of the output is block r of p's input */
        return us_in((int)(i / blk), (size_t)r * blk + i % blk);
    }
}

/* The file's lines of the steps the simulator names ("[rank R ... step S/N"), appended to
 * its message. */
static void us_stuck_lines(const us_sched_t *u, const char *msg, char *out, size_t len)
{
    size_t o = 0;
    for (const char *m = strstr(msg, "[rank "); m != NULL && o < len; m = strstr(m + 1, "[rank ")) {
        int r, i;
        const char *st = strstr(m, " step ");
        if (sscanf(m, "[rank %d", &r) != 1 || st == NULL || sscanf(st, " step %d", &i) != 1 ||
            r < 0 || r >= u->nranks || i < 0 || i >= u->nsteps[r])
            continue;
        o += (size_t)snprintf(out + o, len - o, "%s rank %d at line %d", o ? "," : "; stuck:",
                              r, u->steps[r][i].line);
    }
}

/* Every rank's schedule for an int32 sum in the simulator, FIFOs of two `slot`-byte slots;
 * a failure, a deadlock or a wrong output is an error saying `how` it was run. */
static braid_status_t us_sim_once(us_parse_t *p, const us_sched_t *u, size_t slot, int in_place,
                                  const char *how)
{
    int n = u->nranks;
    size_t blk = (size_t)u->chunks * US_K, es = sizeof(int32_t);
    size_t nin = (size_t)us_buf_chunks(u, BRAID_BUF_SEND) * US_K;
    size_t nout = (size_t)us_buf_chunks(u, BRAID_BUF_RECV) * US_K;
    braid_sim_call_t *calls = calloc((size_t)n, sizeof(*calls));
    braid_sched_t *sch = calloc((size_t)n, sizeof(*sch));
    int32_t **bufs = calloc((size_t)n, sizeof(*bufs));
    braid_status_t st = BRAID_OK;
    if (calls == NULL || sch == NULL || bufs == NULL)
        st = us_fail(p, 0, "out of memory");
    for (int r = 0; r < n && st == BRAID_OK; r++) {
        /* one allocation: the output, and the input where NCCL puts it in place */
        size_t total = in_place ? (nin > nout ? nin : nout) : nin + nout;
        bufs[r] = malloc(total * es);
        if (bufs[r] == NULL) {
            st = us_fail(p, 0, "out of memory");
            break;
        }
        int32_t *out = bufs[r], *in = in_place ? bufs[r] : bufs[r] + nout;
        if (in_place && u->kind == BRAID_COLL_ALLGATHER)
            in = out + (size_t)r * blk;
        for (size_t i = 0; i < nout; i++)
            out[i] = -1;
        for (size_t i = 0; i < nin; i++)
            in[i] = us_in(r, i);
        if (in_place && u->kind == BRAID_COLL_REDUCESCATTER)
            out = in + (size_t)r * blk;
        braid_coll_t c = { .kind = u->kind, .dtype = BRAID_INT32, .rank = r, .nranks = n,
                           .root = -1, .count = blk, .in_place = in_place };
        braid_sched_init(&sch[r], es);
        if (us_build(u, &c, &sch[r]) != BRAID_OK) {
            st = us_fail(p, 0, "cannot build rank %d's schedule: %s", r, braid_err_last());
            break;
        }
        calls[r] = (braid_sim_call_t){ .rank = r, .coll = c, .sched = &sch[r], .sendbuf = in,
                                       .recvbuf = out };
    }
    braid_sim_result_t res;
    braid_sim_cfg_t cfg = { .nslots = 2, .slot_size = slot };
    if (st == BRAID_OK && braid_sim_run(&cfg, n, calls, n, &res) != 0) {
        char where[256] = "";
        us_stuck_lines(u, res.msg, where, sizeof(where));
        st = us_fail(p, 0, "%s: %s%s", how, res.msg, where);
    }
    for (int r = 0; r < n && st == BRAID_OK; r++)
        for (size_t i = 0; i < nout; i++) {
            int32_t got = ((const int32_t *)calls[r].recvbuf)[i], want = us_want(u, r, i);
            if (got != want) {
                st = us_fail(p, 0, "%s: rank %d's output chunk %zu is not what %s gives "
                             "(element %zu is %d, want %d)", how, r, i / US_K,
                             braid_coll_name(u->kind), i, (int)got, (int)want);
                break;
            }
        }
    for (int r = 0; r < n; r++) {
        if (sch != NULL)
            braid_sched_free(&sch[r]);
        if (bufs != NULL)
            free(bufs[r]);
    }
    free(calls);
    free(sch);
    free(bufs);
    return st;
}

/* Out of place with slices that straddle chunks and with whole chunks per slice; then in
 * place, which decides u->in_place. */
static braid_status_t us_prove(us_parse_t *p, us_sched_t *u)
{
    BRAID_CHECK(us_sim_once(p, u, 2 * sizeof(int32_t), 0, "simulated with 8-byte slices"));
    BRAID_CHECK(us_sim_once(p, u, 4096, 0, "simulated with 4 KiB slices"));
    char err[1024];
    us_parse_t q = { .path = p->path, .err = err, .errlen = sizeof(err) };
    u->in_place = 1;                    /* for the check's own builds */
    u->in_place = u->kind != BRAID_COLL_ALLTOALL &&
                  us_sim_once(&q, u, 2 * sizeof(int32_t), 1, "in place") == BRAID_OK &&
                  us_sim_once(&q, u, 4096, 1, "in place") == BRAID_OK;
    if (!u->in_place)
        BRAID_INFO(BRAID_SUB_INIT | BRAID_SUB_TUNING, "schedule %s (%s) declines in-place "
                   "calls: %s", u->name, p->path, u->kind == BRAID_COLL_ALLTOALL ?
                   "all-to-all is out of place only" : err);
    return BRAID_OK;
}

static void us_free(us_sched_t *u)
{
    if (u == NULL)
        return;
    for (int r = 0; u->steps != NULL && r < u->nranks; r++)
        free(u->steps[r]);
    free(u->steps);
    free(u->nsteps);
    free(u);
}

/* ---- loading ----------------------------------------------------------------------------- */

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
    braid_status_t st = u == NULL ? us_fail(&p, 0, "out of memory") : BRAID_OK;
    uint64_t hash = 0;
    pthread_mutex_lock(&us_g.lock);
    if (st == BRAID_OK) {
        snprintf(u->path, sizeof(u->path), "%s", path);
        st = us_parse_file(&p, f, u, &hash);
    }
    fclose(f);
    for (int i = 0; st == BRAID_OK && i < us_g.n; i++)
        if (!us_g.s[i]->retired && us_g.s[i]->hash == hash &&
            strcmp(us_g.s[i]->path, path) == 0) {
            *handle_p = i;
            pthread_mutex_unlock(&us_g.lock);
            us_free(u);
            return BRAID_OK;
        }
    if (st == BRAID_OK && braid_tune_algo_known(u->name))
        st = us_fail(&p, u->name_line, "the name \"%s\" is taken (by one of braid's or "
                     "NCCL's algorithms, or a schedule loaded earlier: a file's new version "
                     "takes a new name)", u->name);
    if (st == BRAID_OK)
        st = us_match(&p, u);
    if (st == BRAID_OK)
        st = us_prove(&p, u);
    if (st == BRAID_OK && (us_g.n >= BRAID_USCHED_MAX || braid_nalgos >= BRAID_ALGOS_MAX))
        st = us_fail(&p, 0, "%d schedules are loaded already, the most a process takes",
                     us_g.n);
    if (st == BRAID_OK) {
        int i = us_g.n;
        u->hash = hash;
        u->algo = (braid_algo_t){ .name = u->name, .colls = 1u << u->kind,
                                  .build = us_fns[i].build, .cost = us_fns[i].cost, .user = u };
        us_g.s[i] = u;
        us_g.n = i + 1;
        braid_algo_register(&u->algo);
        *handle_p = i;
        BRAID_INFO(BRAID_SUB_INIT | BRAID_SUB_TUNING, "schedule %s: %s on %d ranks, %d "
                   "chunks, loaded from %s (proved by the simulator%s)", u->name,
                   braid_coll_name(u->kind), u->nranks, u->chunks, path,
                   u->in_place ? ", in place too" : "");
    }
    pthread_mutex_unlock(&us_g.lock);
    if (st != BRAID_OK) {
        us_free(u);
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

braid_status_t braid_usched_fits(const braid_algo_t *a, const braid_coll_t *c)
{
    const us_sched_t *u = a->user;
    const char *why = NULL;
    char buf[160];
    if (u == NULL || us_takes(u, c))
        return BRAID_OK;
    if (u->retired)
        why = "it was unloaded";
    else if (c->kind != u->kind)
        why = "it is a schedule of another collective";
    else if (c->nranks != u->nranks) {
        snprintf(buf, sizeof(buf), "it is written for %d ranks", u->nranks);
        why = buf;
    } else if (c->count == 0 || c->count % (size_t)u->chunks != 0) {
        snprintf(buf, sizeof(buf), "the count must be a multiple of its %d chunks", u->chunks);
        why = buf;
    } else {
        why = "the simulator at load found it wrong in place: use separate buffers";
    }
    return braid_err(BRAID_ERR_USAGE, "the schedule %s (%s: %s on %d ranks) cannot run %s of "
                     "count %zu on %d ranks%s: %s", u->name, u->path, braid_coll_name(u->kind),
                     u->nranks, braid_coll_name(c->kind), c->count, c->nranks,
                     c->in_place ? " in place" : "", why);
}

uint64_t braid_usched_hash(const braid_algo_t *a)
{
    return a->user != NULL ? ((const us_sched_t *)a->user)->hash : 0;
}
