/*
 * Fuzz harness: the NCCL_SOCKET_IFNAME syntax (braid_socket_if_match, src/base/socket.c):
 * comma-separated prefixes, a leading ^ excludes, a following = makes names exact.
 *
 * Input: the specification, then optionally a NUL and an interface name (else a few
 * typical names are tried). Besides not crashing: "^S" selects exactly what S leaves out,
 * and "=S" (exact names) selects nothing that S (prefixes) leaves out.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/socket.h"

#define FUZZ_SPEC_MAX 1024

static void check_one(const char *spec, const char *ifname)
{
    char other[FUZZ_SPEC_MAX + 2];
    int got = braid_socket_if_match(spec, ifname);
    if (spec[0] == '^')
        return;
    snprintf(other, sizeof(other), "^%s", spec);
    if (braid_socket_if_match(other, ifname) != !got) {
        fprintf(stderr, "fuzz_ifname: \"%s\" and \"%s\" agree on \"%s\"\n", spec, other, ifname);
        abort();
    }
    if (spec[0] == '=')
        return;
    snprintf(other, sizeof(other), "=%s", spec);
    if (braid_socket_if_match(other, ifname) && !got) {
        fprintf(stderr, "fuzz_ifname: \"%s\" selects \"%s\" but \"%s\" does not\n", other,
                ifname, spec);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const typical[] = { "lo", "eth0", "eth10", "ib0", "enp1s0f1", "docker0",
                                           "" };
    char buf[FUZZ_SPEC_MAX + 1];
    if (size > FUZZ_SPEC_MAX)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    size_t n = strlen(buf);
    if (n < size) {
        check_one(buf, buf + n + 1);
        return 0;
    }
    for (size_t i = 0; i < sizeof(typical) / sizeof(typical[0]); i++)
        check_one(buf, typical[i]);
    return 0;
}
