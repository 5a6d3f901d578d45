/*
 * Fuzz harness: the user-schedule (MSCCL-style) file parser (braid_usched_file_parse,
 * algorithms/usched_parse.c; docs/SCHEDULES.md), as braid_usched_load runs it on a file.
 * (The proof that follows a parse, usched_prove.c, runs the simulator and the executor:
 * not here, to keep the fuzz build small.)
 *
 * Input: the file's text. Besides not crashing: a schedule that parses has the header's
 * fields in range and a section per rank, each step a peer other than its rank.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/usched_int.h"

static void check_parsed(const us_sched_t *u)
{
    if (u->nranks < 1 || u->nranks > US_MAX_RANKS || u->chunks < 1 ||
        u->chunks > US_MAX_CHUNKS || u->name[0] == '\0' || u->steps == NULL)
        abort();
    for (int r = 0; r < u->nranks; r++)
        for (int i = 0; i < u->nsteps[r]; i++) {
            const us_step_t *st = &u->steps[r][i];
            if (st->send == r || st->recv == r || st->send >= u->nranks ||
                st->recv >= u->nranks || st->nchunks < 1)
                abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024] = "";
    us_parse_t p = { .path = "fuzz.sched", .err = err, .errlen = sizeof(err) };
    us_sched_t *u;
    uint64_t hash;
    FILE *f;
    if (size == 0)
        return 0;   /* fmemopen refuses an empty buffer */
    f = fmemopen((void *)data, size, "r");
    u = calloc(1, sizeof(*u));
    if (f == NULL || u == NULL)
        abort();
    snprintf(u->path, sizeof(u->path), "%s", p.path);
    if (braid_usched_file_parse(&p, f, u, &hash) == BRAID_OK)
        check_parsed(u);
    else if (err[0] == '\0')
        abort();    /* a refused file must say why */
    fclose(f);
    braid_usched_sched_free(u);
    return 0;
}
