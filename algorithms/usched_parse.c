/*
 * User schedules: the parser of the file format (docs/SCHEDULES.md). Each line is checked
 * on its own here (fields, peers, regions inside their buffers, what a step may combine);
 * the checks of the whole schedule are in usched_prove.c.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/usched_int.h"

#define US_LINE_MAX 512

braid_status_t braid_usched_fail(us_parse_t *p, int line, const char *fmt, ...)
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

static const char *us_buf_name(uint8_t buf)
{
    return buf == BRAID_BUF_SEND ? "in" : buf == BRAID_BUF_RECV ? "out" : "scratch";
}

/* "BUF C" or "BUF C..D" at words w[0], w[1]: the region and its chunk count. */
static braid_status_t us_region(us_parse_t *p, const us_sched_t *u, char **w, us_reg_t *r,
                                int *nchunks)
{
    if (w[0] == NULL || w[1] == NULL)
        return braid_usched_fail(p, p->line, "a region is a buffer (in, out, scratch) and a chunk "
                                 "(C or C..D)");
    r->buf = strcmp(w[0], "in") == 0        ? BRAID_BUF_SEND
             : strcmp(w[0], "out") == 0     ? BRAID_BUF_RECV
             : strcmp(w[0], "scratch") == 0 ? BRAID_BUF_SCRATCH
                                            : BRAID_BUF_NONE;
    if (r->buf == BRAID_BUF_NONE)
        return braid_usched_fail(p, p->line, "unknown buffer \"%s\" (in, out, scratch)", w[0]);
    char *dots = strstr(w[1], "..");
    int first, last, max = us_buf_chunks(u, r->buf);
    if (dots != NULL)
        *dots = '\0';
    if (us_int(w[1], 0, US_MAX_CHUNKS * US_MAX_RANKS, &first) != 0 ||
        (dots != NULL && us_int(dots + 2, 0, US_MAX_CHUNKS * US_MAX_RANKS, &last) != 0))
        return braid_usched_fail(p, p->line, "bad chunk \"%s%s%s\" (C or C..D)", w[1],
                                 dots ? ".." : "", dots ? dots + 2 : "");
    if (dots == NULL)
        last = first;
    if (last < first || last >= max)
        return braid_usched_fail(p, p->line, "chunks %d..%d are outside %s, which has %d chunk%s",
                                 first, last, us_buf_name(r->buf), max, max == 1 ? "" : "s");
    r->chunk = first;
    *nchunks = last - first + 1;
    return BRAID_OK;
}

static braid_status_t us_peer(us_parse_t *p, const us_sched_t *u, int rank, const char *what,
                              const char *w, int *peer)
{
    if (w == NULL || us_int(w, 0, u->nranks - 1, peer) != 0)
        return braid_usched_fail(p, p->line, "%s needs a rank from 0 to %d, got \"%s\"", what,
                                 u->nranks - 1, w ? w : "");
    if (*peer == rank)
        return braid_usched_fail(p, p->line, "rank %d cannot %s itself", rank, what);
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
                return braid_usched_fail(p, p->line, "\"%s\" twice in one step", k);
            BRAID_CHECK(us_peer(p, u, rank, k, i + 1 < nw ? w[i + 1] : NULL, peer));
            i++;
        } else if (strcmp(k, "src") == 0 || strcmp(k, "dst") == 0) {
            us_reg_t *r = k[0] == 's' ? &st->src : &st->dst;
            int *n = k[0] == 's' ? &nsrc : &ndst;
            if (r->buf != BRAID_BUF_NONE)
                return braid_usched_fail(p, p->line, "\"%s\" twice in one step", k);
            char *two[2] = { i + 1 < nw ? w[i + 1] : NULL, i + 2 < nw ? w[i + 2] : NULL };
            BRAID_CHECK(us_region(p, u, two, r, n));
            i += 2;
        } else if (strcmp(k, "size") == 0) {
            if (i + 1 >= nw || us_int(w[i + 1], 1, US_MAX_CHUNKS * US_MAX_RANKS, &size) != 0)
                return braid_usched_fail(p, p->line, "size needs a number of chunks (1 or more)");
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
            return braid_usched_fail(p, p->line, "unknown word \"%s\" in a step (recv P, send P, "
                                     "src BUF C[..D], dst BUF C[..D], size N, reduce, acc, final, "
                                     "stage)", k);
        }
    }
    if (nsrc && ndst && nsrc != ndst)
        return braid_usched_fail(p, p->line, "src has %d chunks and dst %d: a step moves one size",
                                 nsrc, ndst);
    int n = nsrc ? nsrc : ndst;
    if (size && n && size != n)
        return braid_usched_fail(p, p->line, "size %d differs from the regions' %d chunks",
                                 size, n);
    st->nchunks = n ? n : size ? size : 1;
    if (st->recv < 0 && st->src.buf == BRAID_BUF_NONE)
        return braid_usched_fail(p, p->line, "the step reads nothing: it needs recv or src");
    if (st->send < 0 && st->dst.buf == BRAID_BUF_NONE && st->recv < 0)
        return braid_usched_fail(p, p->line, "the step goes nowhere: it needs send or dst");
    if (st->dst.buf == BRAID_BUF_SEND)
        return braid_usched_fail(p, p->line, "dst in: the input (the caller's send buffer) is "
                                 "read-only");
    if ((st->flags & BRAID_STEP_REDUCE) && (st->recv < 0 || st->src.buf == BRAID_BUF_NONE))
        return braid_usched_fail(p, p->line, "reduce combines a receive with src: it needs both");
    if (!(st->flags & BRAID_STEP_REDUCE) && st->recv >= 0 && st->src.buf != BRAID_BUF_NONE)
        return braid_usched_fail(p, p->line, "a receiving step with src but without reduce would "
                                 "ignore src: add reduce, or drop src");
    if ((st->flags & (BRAID_STEP_ACC | BRAID_STEP_FINAL)) && !(st->flags & BRAID_STEP_REDUCE))
        return braid_usched_fail(p, p->line, "acc and final apply to a reduce step only");
    if ((st->flags & BRAID_STEP_REDUCE) && u->kind != BRAID_COLL_ALLREDUCE &&
        u->kind != BRAID_COLL_REDUCESCATTER)
        return braid_usched_fail(p, p->line, "reduce in a %s schedule, which combines nothing",
                                 us_colls[u->kind == BRAID_COLL_ALLGATHER ? 1 : 3]);
    return BRAID_OK;
}

static braid_status_t us_add_step(us_parse_t *p, us_sched_t *u, int rank, const us_step_t *st)
{
    int n = u->nsteps[rank];
    if ((n & (n - 1)) == 0) {
        us_step_t *grown = realloc(u->steps[rank], (size_t)(n ? 2 * n : 4) * sizeof(*grown));
        if (grown == NULL)
            return braid_usched_fail(p, p->line, "out of memory");
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
        return braid_usched_fail(p, p->line, "\"%s\" takes one value", w[0]);
    if (strcmp(w[0], "name") == 0) {
        if (!us_name_ok(w[1]))
            return braid_usched_fail(p, p->line, "bad name \"%s\" (a letter, then letters, digits, "
                                     "_ or -, up to 31)", w[1]);
        snprintf(u->name, sizeof(u->name), "%s", w[1]);
        u->name_line = p->line;
    } else if (strcmp(w[0], "collective") == 0) {
        size_t k = 0;
        while (k < 4 && strcmp(w[1], us_colls[k]) != 0)
            k++;
        if (k == 4)
            return braid_usched_fail(p, p->line, "collective \"%s\": version 1 has allreduce, "
                                     "allgather, reducescatter, alltoall", w[1]);
        u->kind = us_kinds[k];
    } else if (strcmp(w[0], "ranks") == 0) {
        if (us_int(w[1], 1, US_MAX_RANKS, &u->nranks) != 0)
            return braid_usched_fail(p, p->line, "ranks: 1 to %d", US_MAX_RANKS);
    } else if (strcmp(w[0], "chunks") == 0) {
        if (us_int(w[1], 1, US_MAX_CHUNKS, &u->chunks) != 0)
            return braid_usched_fail(p, p->line, "chunks: 1 to %d", US_MAX_CHUNKS);
    } else if (strcmp(w[0], "scratch") == 0) {
        if (us_int(w[1], 0, US_MAX_CHUNKS * US_MAX_RANKS, &u->scratch) != 0)
            return braid_usched_fail(p, p->line, "scratch: a number of chunks");
    } else {
        return braid_usched_fail(p, p->line, "unknown header field \"%s\" (name, collective, "
                                 "ranks, chunks, scratch; then rank sections)", w[0]);
    }
    return BRAID_OK;
}

void braid_usched_sched_free(us_sched_t *u)
{
    if (u == NULL)
        return;
    for (int r = 0; u->steps != NULL && r < u->nranks; r++)
        free(u->steps[r]);
    free(u->steps);
    free(u->nsteps);
    free(u);
}

braid_status_t braid_usched_file_parse(us_parse_t *p, FILE *f, us_sched_t *u, uint64_t *hash_p)
{
    char line[US_LINE_MAX + 2];
    char *w[64];
    int rank = -1, seen_version = 0;
    *hash_p = 1469598103934665603ull;
    u->kind = BRAID_COLL_NUM;
    while (fgets(line, sizeof(line), f) != NULL) {
        p->line++;
        size_t len = strlen(line);
        if (len > US_LINE_MAX && line[len - 1] != '\n')
            return braid_usched_fail(p, p->line, "longer than %d characters", US_LINE_MAX);
        for (size_t i = 0; i < len; i++)
            *hash_p = (*hash_p ^ (unsigned char)line[i]) * 1099511628211ull;
        int nw = us_split(line, w, 64);
        if (nw < 0)
            return braid_usched_fail(p, p->line, "more than 64 words");
        if (nw == 0)
            continue;
        if (!seen_version) {
            if (strcmp(w[0], "braid-schedule") != 0)
                return braid_usched_fail(p, p->line, "not a braid schedule file: the first line "
                                         "must be \"braid-schedule 1\"%s", w[0][0] == '<' ?
                                         " (MSCCL's XML algorithms are not read: see "
                                         "docs/SCHEDULES.md)" : "");
            if (nw != 2 || strcmp(w[1], "1") != 0)
                return braid_usched_fail(p, p->line, "format version \"%s\": this braid reads "
                                         "version 1", nw > 1 ? w[1] : "");
            seen_version = 1;
            continue;
        }
        if (strcmp(w[0], "rank") == 0) {
            if (u->nranks == 0 || u->chunks == 0 || u->name[0] == '\0' ||
                u->kind == BRAID_COLL_NUM)
                return braid_usched_fail(p, p->line, "the header must give name, collective, ranks "
                                         "and chunks before the first rank section");
            if (u->steps == NULL) {
                u->steps = calloc((size_t)u->nranks, sizeof(*u->steps));
                u->nsteps = calloc((size_t)u->nranks, sizeof(*u->nsteps));
                if (u->steps == NULL || u->nsteps == NULL)
                    return braid_usched_fail(p, p->line, "out of memory");
            }
            int r;
            if (nw != 2 || us_int(w[1], 0, u->nranks - 1, &r) != 0)
                return braid_usched_fail(p, p->line, "rank needs a number from 0 to %d",
                                         u->nranks - 1);
            if (r != rank + 1)
                return braid_usched_fail(p, p->line, "rank %d: the sections go in order, rank 0 "
                                         "first (expected rank %d)", r, rank + 1);
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
        return braid_usched_fail(p, 0, "read error");
    if (!seen_version)
        return braid_usched_fail(p, 0, "empty: the first line must be \"braid-schedule 1\"");
    if (rank < 0)
        return braid_usched_fail(p, p->line, "no rank sections: the header gives name, "
                                 "collective, ranks and chunks, then each rank has a section");
    if (rank != u->nranks - 1)
        return braid_usched_fail(p, p->line, "ends after rank %d's section: ranks %d has a section "
                                 "each (an empty one for a rank without steps)", rank, u->nranks);
    return BRAID_OK;
}
