/*
 * braid-info: what this braid is and how it is set up. Prints the version, the build
 * configuration, the host kernel variant in use, this host's topology and every parameter
 * with its value and where that value came from (environment or default).
 *
 *     braid-info             everything
 *     braid-info -c          the parameters only
 *     braid-info -l 3,1      also a layout of ranks on hosts (ranks per host): each rank's
 *                            host and local rank, and the link class between every two
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/param.h"
#include "kernels/kernels.h"
#include "topo/topo.h"

#define INFO_LAYOUT_MAX 64   /* ranks a printed layout may have */

/* Defined by the build. */
#ifndef BRAID_BUILD_CC
#define BRAID_BUILD_CC "unknown"
#endif
#ifndef BRAID_BUILD_CFLAGS
#define BRAID_BUILD_CFLAGS "unknown"
#endif
#ifndef BRAID_BUILD_CONFIG
#define BRAID_BUILD_CONFIG "unknown"
#endif

static void info_usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-c] [-l K,K,...] [-h]\n"
            "  Print braid's version, build configuration, host kernel variant, this host's\n"
            "  topology and parameters (BRAID_* / NCCL_* environment variables).\n"
            "  -c  print only the parameters\n"
            "  -l  also print a layout of ranks on hosts, K ranks on each (at most %d ranks)\n"
            "  -h  print this help\n",
            prog, INFO_LAYOUT_MAX);
}

static void info_build_print(FILE *out)
{
    fprintf(out, "braid %s (NCCL API %s)\n", BRAID_VERSION_STRING, BRAID_NCCL_VERSION_STRING);
    fprintf(out, "build:\n");
    fprintf(out, "  compiler:  %s\n", BRAID_BUILD_CC);
    fprintf(out, "  cflags:    %s\n", BRAID_BUILD_CFLAGS);
    fprintf(out, "  configure: %s\n", BRAID_BUILD_CONFIG);
    fprintf(out, "host kernels: %s\n", braid_kern_isa());
}

/* "  NICs on PCI: 2 (eth0 (PCI ...), ib0)" */
static void info_devs_print(FILE *out, const char *what, int n,
                            const char (*names)[BRAID_HW_NAMELEN])
{
    fprintf(out, "  %s on PCI: %d", what, n);
    for (int i = 0; i < n && i < BRAID_HW_MAXDEV; i++)
        fprintf(out, "%s%s", i ? ", " : " (", names[i]);
    fprintf(out, "%s\n", n > 0 ? ")" : "");
}

static void info_topo_print(FILE *out)
{
    braid_host_hw_t hw;
    fprintf(out, "topology:\n");
    if (braid_host_hw(&hw) != BRAID_OK) {
        fprintf(out, "  (unknown: %s)\n", braid_err_last());
        return;
    }
    fprintf(out, "  this host: %d packages, %d cores, %d PUs, %d NUMA nodes (%s); this "
            "process runs on NUMA node %d\n", hw.npackages, hw.ncores, hw.npus, hw.nnuma,
            hw.source, braid_numa_self());
    info_devs_print(out, "NICs", hw.nnics, hw.nics);
    info_devs_print(out, "GPUs", hw.ngpus, hw.gpus);
}

/* "3,1" -> a host id per rank; 0 with a message when the text is not such a list. */
static int info_layout_parse(const char *text, uint64_t *ids, int *n_p)
{
    const char *p = text;
    int n = 0, host = 0;
    for (;;) {
        char *end;
        long k = strtol(p, &end, 10);
        if (end == p || k < 1 || n + k > INFO_LAYOUT_MAX || (*end != ',' && *end != '\0')) {
            fprintf(stderr, "braid-info: -l \"%s\": give ranks per host, e.g. 3,1 (each at "
                    "least 1, at most %d ranks in all)\n", text, INFO_LAYOUT_MAX);
            return 0;
        }
        for (long j = 0; j < k; j++)
            ids[n++] = (uint64_t)host + 1;
        host++;
        if (*end == '\0')
            break;
        p = end + 1;
    }
    *n_p = n;
    return 1;
}

static int info_layout_print(FILE *out, const char *text)
{
    uint64_t ids[INFO_LAYOUT_MAX];
    braid_topo_t t;
    int n;
    if (!info_layout_parse(text, ids, &n))
        return 0;
    if (braid_topo_build(&t, n, ids, NULL) != BRAID_OK) {
        braid_topo_free(&t);
        return 0;
    }
    fprintf(out, "layout %s: %d ranks on %d hosts%s\n", text, n, t.nhosts,
            braid_topo_uniform(&t) ? "" : " (uneven)");
    for (int h = 0; h < t.nhosts; h++) {
        fprintf(out, "  host %d: ranks", h);
        for (int i = t.host_first[h]; i < t.host_first[h + 1]; i++)
            fprintf(out, " %d", t.host_ranks[i]);
        fprintf(out, "\n");
    }
    fprintf(out, "  link classes (NUMA nodes unknown here: 'host' within a host):\n     ");
    for (int b = 0; b < n; b++)
        fprintf(out, "%5d", b);
    for (int a = 0; a < n; a++) {
        fprintf(out, "\n  %3d", a);
        for (int b = 0; b < n; b++)
            fprintf(out, "%5s", braid_link_name(braid_topo_link(&t, a, b)));
    }
    fprintf(out, "\n");
    braid_topo_free(&t);
    return 1;
}

int main(int argc, char **argv)
{
    int only_params = 0, opt;
    const char *layout = NULL;
    while ((opt = getopt(argc, argv, "cl:h")) != -1) {
        switch (opt) {
        case 'c':
            only_params = 1;
            break;
        case 'l':
            layout = optarg;
            break;
        case 'h':
            info_usage(stdout, argv[0]);
            return 0;
        default:
            info_usage(stderr, argv[0]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument \"%s\"\n", argv[0], argv[optind]);
        info_usage(stderr, argv[0]);
        return 2;
    }
    if (!only_params) {
        info_build_print(stdout);
        info_topo_print(stdout);
        if (layout != NULL && !info_layout_print(stdout, layout))
            return 2;
        fprintf(stdout, "parameters:\n");
    }
    braid_param_dump(stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}
