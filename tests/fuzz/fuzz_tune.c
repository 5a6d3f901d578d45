/*
 * Fuzz harness: NCCL_ALGO and NCCL_PROTO (braid_tune_algo, braid_tune_proto,
 * algorithms/tune.c): lists, ^ to exclude, "coll:list;coll:list" sections.
 *
 * Input: one byte (even: NCCL_ALGO, odd: NCCL_PROTO), then the setting. Besides not
 * crashing: a rejected setting leaves the tuning as it was; an accepted one leaves every
 * collective at least one algorithm and protocol, and only algorithms that build it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/tune.h"

#define FUZZ_SPEC_MAX 2048

static void check_masks(const braid_tune_t *t, const char *spec)
{
    for (int k = 0; k < BRAID_COLL_NUM; k++) {
        uint32_t claims = 0;
        for (int i = 0; i < braid_nalgos; i++)
            if (braid_algos[i]->colls & (1u << k))
                claims |= 1u << i;
        if ((claims != 0 && t->allow[k] == 0) || (t->allow[k] & ~claims) != 0 ||
            t->proto[k] == 0 || t->proto[k] >= 1u << BRAID_NPROTOS) {
            fprintf(stderr, "fuzz_tune: \"%s\" leaves %s algorithms 0x%x (of 0x%x), "
                    "protocols 0x%x\n", spec, braid_coll_name(k), t->allow[k], claims,
                    t->proto[k]);
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static braid_tune_t t, before;
    char spec[FUZZ_SPEC_MAX + 1];
    braid_status_t st;
    if (size < 1 || size - 1 > FUZZ_SPEC_MAX)
        return 0;
    memcpy(spec, data + 1, size - 1);
    spec[size - 1] = '\0';
    braid_tune_init(&t);
    memcpy(&before, &t, sizeof(t));
    st = data[0] % 2 == 0 ? braid_tune_algo(&t, spec) : braid_tune_proto(&t, spec);
    if (st != BRAID_OK && memcmp(&t, &before, sizeof(t)) != 0) {
        fprintf(stderr, "fuzz_tune: \"%s\" was refused but changed the tuning\n", spec);
        abort();
    }
    if (st == BRAID_OK)
        check_masks(&t, spec);
    return 0;
}
