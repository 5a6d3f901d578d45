/*
 * Fuzz harness: the parameter parsers (src/base/param.c) and NCCL_DEBUG /
 * NCCL_DEBUG_SUBSYS (src/base/log.c).
 *
 * Input: one byte choosing the parser, then the text. Byte % 6: 0 integer, 1 size, 2
 * boolean, 3 log level, 4 subsystem list, 5 a parameter of the table (the next byte picks
 * it: its type and range, as a variable's value is read). Besides not crashing, a value
 * that parses must print and parse back to itself, and sizes are never negative.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"

#define FUZZ_TEXT_MAX 4096

static void check_int_round_trip(int64_t v)
{
    char buf[32];
    int64_t back;
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    if (braid_param_parse_int(buf, &back) != BRAID_OK || back != v) {
        fprintf(stderr, "fuzz_params: %" PRId64 " does not parse back\n", v);
        abort();
    }
}

static void fuzz_table(uint8_t which, const char *text)
{
    braid_param_id_t id = (braid_param_id_t)(which % BRAID_P_COUNT);
    const braid_param_t *d = braid_param_desc(id);
    int64_t v;
    if (braid_param_parse(id, text, &v) != BRAID_OK)
        return;
    if (d->type == BRAID_PARAM_BOOL && v != 0 && v != 1)
        abort();
    if (d->type == BRAID_PARAM_INT || d->type == BRAID_PARAM_SIZE)
        check_int_round_trip(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[FUZZ_TEXT_MAX + 1];
    braid_log_level_t level;
    uint64_t mask;
    int64_t v;
    if (size < 2 || size - 2 > FUZZ_TEXT_MAX)
        return 0;
    memcpy(text, data + 2, size - 2);
    text[size - 2] = '\0';
    switch (data[0] % 6) {
    case 0:
        if (braid_param_parse_int(text, &v) == BRAID_OK)
            check_int_round_trip(v);
        break;
    case 1:
        if (braid_param_parse_size(text, &v) == BRAID_OK) {
            if (v < 0)
                abort();
            check_int_round_trip(v);
        }
        break;
    case 2:
        if (braid_param_parse_bool(text, &v) == BRAID_OK && v != 0 && v != 1)
            abort();
        break;
    case 3:
        (void)braid_log_level_parse(text, &level);
        break;
    case 4:
        (void)braid_log_subsys_parse(text, &mask);
        break;
    default:
        fuzz_table(data[1], text);
        break;
    }
    return 0;
}
