/*
 * Fuzz harness: the bootstrap messages (src/core/bootstrap_int.h), through the functions
 * that judge them where they arrive.
 *
 * Input: one byte choosing the message (% 3), then its bytes (laid over zeros where short):
 *   0  a hello, as the root reads it from a rank (bs_hello_t, then the info blob);
 *   1  the root's reply, as a rank reads it (bs_reply_t), then the table's rows (bs_rec_t);
 *   2  a ring frame (bs_frame_t) after a byte giving the ring's size, as a neighbour reads it.
 * Besides not crashing: a hello taken is of this job with its rank in range, a refused one
 * says why; a reply that is not the table is an error; a table taken has its rows in order
 * and its host names terminated; a notice taken names ranks of the ring.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bootstrap_int.h"

#define FUZZ_NONCE 0x0123456789abcdefull
#define FUZZ_ROOT "127.0.0.1:29500"

static void fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz_bootstrap: %s\n", what);
    abort();
}

static void fuzz_hello(const uint8_t *data, size_t size)
{
    char why[BS_TEXT_LEN] = "";
    bs_hello_t h;
    memset(&h, 0, sizeof(h));
    memcpy(&h, data, size < sizeof(h) ? size : sizeof(h));
    if (braid_bootstrap_hello_check(&h, FUZZ_NONCE, FUZZ_ROOT, why, sizeof(why)) != BRAID_OK) {
        if (why[0] == '\0')
            fuzz_fail("a hello was refused without a reason");
        return;
    }
    if (h.magic != BS_PROTO_MAGIC || h.version != BS_PROTO_VERSION || h.nonce != FUZZ_NONCE ||
        h.nranks <= 0 || h.nranks > BS_NRANKS_MAX || h.rec.rank < 0 ||
        h.rec.rank >= h.nranks || h.info_len > BS_INFO_MAX)
        fuzz_fail("a hello out of range was taken");
}

static void fuzz_table(const uint8_t *data, size_t size)
{
    int nranks = (int)(size / sizeof(bs_rec_t));
    bs_rec_t *recs;
    char who[160];
    if (nranks == 0)
        return;
    recs = malloc((size_t)nranks * sizeof(*recs));
    if (recs == NULL)
        abort();
    memcpy(recs, data, (size_t)nranks * sizeof(*recs));
    if (braid_bootstrap_table_check(recs, nranks, FUZZ_ROOT) == BRAID_OK)
        for (int r = 0; r < nranks; r++) {
            if (recs[r].rank != r || strlen(recs[r].host) >= BS_HOST_LEN)
                fuzz_fail("a malformed table was taken");
            braid_bootstrap_rec_str(&recs[r], who, sizeof(who));
        }
    free(recs);
}

static void fuzz_reply(const uint8_t *data, size_t size)
{
    bs_reply_t reply;
    memset(&reply, 0, sizeof(reply));
    memcpy(&reply, data, size < sizeof(reply) ? size : sizeof(reply));
    if (reply.magic != BS_PROTO_MAGIC)
        return;     /* the rank stops at the magic (link_reply_recv) */
    if (reply.status != BRAID_OK) {
        if (braid_bootstrap_reply_error(&reply) >= 0)
            fuzz_fail("a reply that is not the table was not an error");
        return;
    }
    if (size > sizeof(reply))
        fuzz_table(data + sizeof(reply), size - sizeof(reply));
}

static void fuzz_frame(const uint8_t *data, size_t size)
{
    bs_frame_t f;
    int nranks;
    if (size < 1)
        return;
    nranks = data[0] + 1;
    memset(&f, 0, sizeof(f));
    memcpy(&f, data + 1, size - 1 < sizeof(f) ? size - 1 : sizeof(f));
    if (braid_bootstrap_notice_valid(&f, nranks) &&
        (f.rank < 0 || f.rank >= nranks || f.reporter < 0 || f.reporter >= nranks))
        fuzz_fail("a notice naming ranks outside the ring was taken");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0] % 3) {
    case 0:
        fuzz_hello(data + 1, size - 1);
        break;
    case 1:
        fuzz_reply(data + 1, size - 1);
        break;
    default:
        fuzz_frame(data + 1, size - 1);
        break;
    }
    return 0;
}
