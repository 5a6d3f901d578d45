/*
 * braid-info: what this braid is and how it is set up. Prints the version, the build
 * configuration, the host kernel variant in use and every parameter with its value and
 * where that value came from (environment or default).
 *
 *     braid-info        everything
 *     braid-info -c     the parameters only
 */
#include <stdio.h>
#include <unistd.h>

#include "core/log.h"
#include "core/param.h"
#ifndef BRAID_INFO_NO_KERNELS
#include "kernels/kernels.h"
#endif

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
            "usage: %s [-c] [-h]\n"
            "  Print braid's version, build configuration, host kernel variant and\n"
            "  parameters (BRAID_* / NCCL_* environment variables).\n"
            "  -c  print only the parameters\n"
            "  -h  print this help\n",
            prog);
}

static void info_build_print(FILE *out)
{
    fprintf(out, "braid %s (NCCL API %s)\n", BRAID_VERSION_STRING, BRAID_NCCL_VERSION_STRING);
    fprintf(out, "build:\n");
    fprintf(out, "  compiler:  %s\n", BRAID_BUILD_CC);
    fprintf(out, "  cflags:    %s\n", BRAID_BUILD_CFLAGS);
    fprintf(out, "  configure: %s\n", BRAID_BUILD_CONFIG);
#ifndef BRAID_INFO_NO_KERNELS
    fprintf(out, "host kernels: %s\n", braid_kern_isa());
#else
    fprintf(out, "host kernels: (not built in)\n");
#endif
    fprintf(out, "parameters:\n");
}

int main(int argc, char **argv)
{
    int only_params = 0, opt;
    while ((opt = getopt(argc, argv, "ch")) != -1) {
        switch (opt) {
        case 'c':
            only_params = 1;
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
    if (!only_params)
        info_build_print(stdout);
    braid_param_dump(stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}
