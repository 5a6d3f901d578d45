/*
 * User schedules: the checks of a parsed schedule as a whole, at load. Every send must meet
 * its receive (same peers, same size, in order); then every rank's schedule runs in the
 * one-process simulator (algorithms/sim.h) on an int32 sum, and the outputs must be what
 * the collective's definition gives. A deadlock, a transport misuse or a wrong element
 * rejects the file, naming the lines where the ranks stopped. The same run in place
 * decides whether the schedule takes in-place calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/sim.h"
#include "algorithms/usched_int.h"
#include "base/log.h"

braid_status_t braid_usched_sends_match(us_parse_t *p, const us_sched_t *u)
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
                    return braid_usched_fail(p, u->steps[a][i].line, "rank %d sends to rank %d, "
                                             "which has no receive from rank %d left for it",
                                             a, b, a);
                if (!has_s)
                    return braid_usched_fail(p, u->steps[b][j].line, "rank %d receives from rank "
                                             "%d, which has no send to rank %d left for it",
                                             b, a, b);
                const us_step_t *s = &u->steps[a][i], *r = &u->steps[b][j];
                if (s->nchunks != r->nchunks)
                    return braid_usched_fail(p, s->line, "rank %d sends %d chunk%s to rank %d; its "
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
        st = braid_usched_fail(p, 0, "out of memory");
    for (int r = 0; r < n && st == BRAID_OK; r++) {
        /* one allocation: the output, and the input where NCCL puts it in place */
        size_t total = in_place ? (nin > nout ? nin : nout) : nin + nout;
        bufs[r] = malloc(total * es);
        if (bufs[r] == NULL) {
            st = braid_usched_fail(p, 0, "out of memory");
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
        if (braid_usched_rank_build(u, &c, &sch[r]) != BRAID_OK) {
            st = braid_usched_fail(p, 0, "cannot build rank %d's schedule: %s", r,
                                   braid_err_last());
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
        st = braid_usched_fail(p, 0, "%s: %s%s", how, res.msg, where);
    }
    for (int r = 0; r < n && st == BRAID_OK; r++)
        for (size_t i = 0; i < nout; i++) {
            int32_t got = ((const int32_t *)calls[r].recvbuf)[i], want = us_want(u, r, i);
            if (got != want) {
                st = braid_usched_fail(p, 0, "%s: rank %d's output chunk %zu is not what %s gives "
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
braid_status_t braid_usched_sim_prove(us_parse_t *p, us_sched_t *u)
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
