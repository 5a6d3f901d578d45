/*
 * braid-info: what this braid is and how it is set up. Prints the version, the build
 * configuration, the host kernel variant in use, this host's topology and every parameter
 * with its value and where that value came from (environment or default).
 *
 *     braid-info             everything
 *     braid-info -c          the parameters only
 *     braid-info -l 3,1      also a layout of ranks on hosts (ranks per host): each rank's
 *                            host and local rank, the link class between every two, and
 *                            the algorithm the tuner picks per collective and size there
 *     braid-info -a          the algorithms, what they build, and NCCL_ALGO's names
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/sched.h"
#include "algorithms/tune.h"
#include "base/log.h"
#include "base/param.h"
#include "device/device.h"
#include "exec/dev_kernels.h"
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
            "usage: %s [-c] [-a] [-l K,K,...] [-h]\n"
            "  Print braid's version, build configuration, host kernel variant, GPU kernel\n"
            "  images and devices, this host's topology and parameters (BRAID_* / NCCL_*\n"
            "  environment variables).\n"
            "  -c  print only the parameters\n"
            "  -l  also print a layout of ranks on hosts, K ranks on each (at most %d ranks),\n"
            "      and the algorithm the tuner picks there per collective and size\n"
            "  -a  print the algorithms and the collectives each builds\n"
            "  -h, --help  print this help\n",
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

static void info_gpu_line(void *arg, const char *text)
{
    fprintf((FILE *)arg, "  %s\n", text);
}

/* The GPU kernel images embedded in this build, the device backend and its devices. */
static void info_gpu_print(FILE *out)
{
    fprintf(out, "gpu:\n");
    braid_dev_kernels_report(info_gpu_line, out);
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
    fprintf(out, "  this host: %d packages, %d cores, %d PUs, %d NUMA nodes, L2 %zu KiB per "
            "core (%s); this process runs on NUMA node %d\n", hw.npackages, hw.ncores,
            hw.npus, hw.nnuma, hw.l2 >> 10, hw.source, braid_numa_self());
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

/* The collectives the tuner chooses for, and the sizes (bytes of the message, as
 * nccl-tests counts them: all-gather's output, reduce-scatter's input) of the table. */
static const braid_coll_kind_t info_colls[] = {
    BRAID_COLL_ALLREDUCE, BRAID_COLL_ALLGATHER, BRAID_COLL_REDUCESCATTER,
    BRAID_COLL_BROADCAST, BRAID_COLL_REDUCE, BRAID_COLL_ALLTOALL,
};
#define INFO_NCOLLS ((int)(sizeof(info_colls) / sizeof(info_colls[0])))

static void info_choice_print(FILE *out, const braid_topo_t *t, braid_tune_t *tune)
{
    fprintf(out, "  the tuner's choice (float32, processes without single copy; NCCL_ALGO "
            "\"%s\"; /N: N KiB slices where not the %.0f KiB slot):\n  %10s", tune->algo_spec,
            tune->model.slice / 1024, "bytes");
    for (int k = 0; k < INFO_NCOLLS; k++)
        fprintf(out, " %16s", braid_coll_name(info_colls[k]));
    for (size_t bytes = 8; bytes <= ((size_t)256 << 20); bytes *= 8) {
        fprintf(out, "\n  %10zu", bytes);
        for (int k = 0; k < INFO_NCOLLS; k++) {
            braid_coll_t c = { .kind = info_colls[k], .dtype = BRAID_FP32, .nranks = t->nranks,
                               .count = bytes / 4, .topo = t, .tune = tune };
            const braid_algo_t *a[1];
            double cost[1];
            size_t slice[1];
            char cell[32] = "-";
            if (c.kind == BRAID_COLL_ALLGATHER || c.kind == BRAID_COLL_REDUCESCATTER ||
                c.kind == BRAID_COLL_ALLTOALL)
                c.count = bytes / 4 / (size_t)t->nranks;
            int n = braid_algo_rank(&c, a, cost, slice, 1);
            if (n > 0 && (double)slice[0] < tune->model.slice)
                snprintf(cell, sizeof(cell), "%s/%zu", a[0]->name, slice[0] / 1024);
            else if (n > 0)
                snprintf(cell, sizeof(cell), "%s", a[0]->name);
            fprintf(out, " %16s", cell);
        }
    }
    fprintf(out, "\n");
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
    braid_tune_t tune;
    braid_tune_init(&tune);
    braid_status_t st = braid_tune_algo(&tune, braid_param_str(BRAID_P_ALGO));
    if (st == BRAID_OK)
        info_choice_print(out, &t, &tune);
    else
        fprintf(stderr, "braid-info: %s\n", braid_err_last());
    braid_topo_free(&t);
    return st == BRAID_OK;
}

static void info_algos_print(FILE *out)
{
    fprintf(out, "algorithms (NCCL_ALGO names; NCCL's \"ring\" also names chain, \"pairwise\" "
            "direct's all-to-all):\n");
    for (int i = 0; i < braid_nalgos; i++) {
        fprintf(out, "  %-13s", braid_algos[i]->name);
        for (int k = 0; k < BRAID_COLL_NUM; k++)
            if (braid_algos[i]->colls & (1u << k))
                fprintf(out, " %s", braid_coll_name(k));
        fprintf(out, "\n");
    }
}

/* Settings that are not braid's parameters: read by braidrun and by the emulated GPU
 * runtimes (emu/), each from its own environment. */
static const struct {
    const char *name, *reader, *what;
} info_other[] = {
    { "BRAIDRUN_KILL_AFTER", "braidrun", "seconds braidrun waits for the other ranks after "
      "one fails before it stops them (default 10; -k)" },
    { "BRAID_EMU_DEVICES", "emulator", "devices it has (default 1, at most 64)" },
    { "BRAID_EMU_STRICT", "emulator", "1: as unforgiving as a real driver (README)" },
    { "BRAID_EMU_LOCK_WARN_MS", "emulator", "strict mode: a wait for its driver lock longer "
      "than this is said on stderr (default 2000)" },
    { "BRAID_EMU_DELAY_US", "emulator", "every stream operation waits this long first" },
    { "BRAID_EMU_NO_HOST_REGISTER", "emulator", "1: host memory cannot be mapped for the "
      "device" },
    { "BRAID_EMU_STALL_LAUNCH", "emulator", "the process's N-th kernel launch never ends" },
    { "BRAID_EMU_FULL_GRID", "emulator", "1: a launch runs every thread of its grid" },
    { "BRAID_EMU_HIP_ARCH", "emulator", "the emulated AMD GPU's gcnArchName (default "
      "gfx90a:sramecc+:xnack-)" },
    { "BRAID_EMU_HIPRTC", "emulator", "ROCm 5's face: the library whose hiprtc it compiles "
      "with (default: the installed ROCm's)" },
};

static void info_other_print(FILE *out)
{
    fprintf(out, "settings read by braidrun and the emulated GPU runtimes (not braid's):\n");
    for (size_t i = 0; i < sizeof(info_other) / sizeof(info_other[0]); i++) {
        const char *v = getenv(info_other[i].name);
        fprintf(out, "%-27s %-9s %-19s %s\n", info_other[i].name, info_other[i].reader,
                v != NULL ? v : "(unset)", info_other[i].what);
    }
}

int main(int argc, char **argv)
{
    int only_params = 0, algos = 0, opt;
    const char *layout = NULL;
    static const struct option longopts[] = { { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    while ((opt = getopt_long(argc, argv, "cal:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            only_params = 1;
            break;
        case 'a':
            algos = 1;
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
    if (algos) {
        info_algos_print(stdout);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (!only_params) {
        info_build_print(stdout);
        info_gpu_print(stdout);
        info_topo_print(stdout);
        if (layout != NULL && !info_layout_print(stdout, layout))
            return 2;
        fprintf(stdout, "parameters:\n");
    }
    braid_param_dump(stdout);
    info_other_print(stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}
