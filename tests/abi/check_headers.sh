#!/bin/sh
# Compile matrix of braid's public headers: every way a user may combine them with C/C++
# standards and with the CUDA or HIP runtime headers must compile warning-free.
#
# Usage: check_headers.sh [BRAID_INCLUDE_DIR]
#   BRAID_INCLUDE_DIR   braid's include/ (default: $BRAID_INCLUDE, else ../../include next
#                       to this script)
# Environment:
#   CC, CXX        compilers (default $BRAID_CC, the build's, which make check sets, else
#                  cc; and c++)
#   CUDA_INCLUDE   directory with cuda_runtime.h (default /usr/local/cuda/include)
#
# HIP is not installed on most machines, so the HIP cases use a stand-in hip_runtime.h
# that declares what HIP's does for streams (HIP_VERSION, `struct ihipStream_t *`); in C++
# they check that a hipStream_t passes to the NCCL calls with no conversion.
# Exit status: 0 pass, 1 some case failed (its command and errors are printed), 77 skip:
# no C compiler, or the cases this machine cannot build were skipped (no C++ compiler, no
# cuda_runtime.h), after the others passed.

set -u

here=$(cd "$(dirname "$0")" && pwd)
inc=${1:-${BRAID_INCLUDE:-$here/../../include}}
cc=${CC:-${BRAID_CC:-cc}}
cxx=${CXX:-c++}
cuda_inc=${CUDA_INCLUDE:-/usr/local/cuda/include}
warn="-Wall -Wextra -Werror"

command -v "$cc" >/dev/null 2>&1 || { echo "check_headers: SKIP: no C compiler ($cc)"; exit 77; }
have_cxx=0
command -v "$cxx" >/dev/null 2>&1 && have_cxx=1
have_cuda=0
[ -f "$cuda_inc/cuda_runtime.h" ] && have_cuda=1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_headers.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
mkdir -p "$tmp/fakehip/hip"
cat >"$tmp/fakehip/hip/hip_runtime.h" <<'EOF'
#ifndef FAKE_HIP_RUNTIME_H
#define FAKE_HIP_RUNTIME_H
#define HIP_VERSION 60200000
typedef struct ihipStream_t *hipStream_t;
#endif
EOF

failed=0
ncases=0
nskipped=0

# case_ NAME LANG "FLAGS" <<EOF body EOF: compile the body (stdin) as LANG (c or c++) with
# braid's include dir first (before CUDA's, which has NVIDIA's own nccl.h).
case_() {
    name=$1 lang=$2 flags=$3
    cat >"$tmp/t.src"
    if [ "$lang" = c++ ]; then
        comp=$cxx
        if [ "$have_cxx" = 0 ]; then
            echo "check_headers: $name skipped (no C++ compiler $cxx)"
            nskipped=$((nskipped + 1))
            return 0
        fi
    else
        comp=$cc
    fi
    ncases=$((ncases + 1))
    # shellcheck disable=SC2086 # flags are several words
    if "$comp" -x "$lang" -I"$inc" $flags $warn -fsyntax-only "$tmp/t.src" >"$tmp/log" 2>&1; then
        echo "check_headers: $name ok"
    else
        echo "check_headers: FAIL: $name: $comp -x $lang -I$inc $flags $warn"
        head -30 "$tmp/log"
        failed=$((failed + 1))
    fi
}

# A user of the plain API: collectives with NULL streams, RCCL extras, braid's version.
usage='
#ifndef BRAID_NCCL_DEPRECATED
#error this is not braid nccl.h
#endif
static int use(void)
{
    float x = 0;
    cudaStream_t s = 0;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    (void)cfg; (void)sim;
    return ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, NCCL_COMM_NULL, s) == ncclSuccess;
}
int main(void) { return use(); }
'

for std in c99 c11 c17; do
    case_ "nccl.h $std" c "-std=$std -pedantic -Wstrict-prototypes" <<EOF
#include <nccl.h>
$usage
EOF
    case_ "all headers $std" c "-std=$std -pedantic -Wstrict-prototypes" <<EOF
#include <braid.h>
#include <rccl/rccl.h>
#include <nccl_device.h>
#include <nccl.h>
$usage
static int use2(void) { hipStream_t h = 0; ncclTeam_t t = ncclTeamWorld(NULL);
    return t.nRanks + (ncclAllToAll(0, 0, 0, ncclInt8, NULL, h) == ncclSuccess) + (braidGetVersionString() != 0); }
EOF
done
for std in c++11 c++17; do
    case_ "all headers $std" c++ "-std=$std -pedantic" <<EOF
#include <braid.h>
#include <rccl/rccl.h>
#include <nccl_device.h>
$usage
EOF
done

if [ "$have_cuda" = 1 ]; then
    cu="-I$cuda_inc"
    for lang in c c++; do
        case_ "cuda_runtime.h then nccl.h ($lang)" $lang "$cu" <<EOF
#include <cuda_runtime.h>
#include <nccl.h>
#include <rccl/rccl.h>
$usage
static int use2(void) { return cudaStreamSynchronize((cudaStream_t)0) == cudaSuccess; }
EOF
        case_ "nccl.h then cuda_runtime.h ($lang)" $lang "$cu" <<EOF
#include <nccl.h>
#include <rccl/rccl.h>
#include <cuda_runtime.h>
$usage
static int use2(void) { cudaStream_t s; cudaStreamCreate(&s); return ncclBcast(0, 0, ncclInt8, 0, NULL, s); }
EOF
        case_ "BRAID_USE_CUDA_HEADERS ($lang)" $lang "$cu -DBRAID_USE_CUDA_HEADERS" <<EOF
#include <nccl.h>
#ifndef CUDART_VERSION
#error cuda_runtime.h was not included
#endif
$usage
static int use2(void) { return cudaStreamSynchronize((cudaStream_t)0) == cudaSuccess; }
EOF
    done
    case_ "BRAID_USE_CUDA_HEADERS gives __half (c++)" c++ "$cu -DBRAID_USE_CUDA_HEADERS" <<EOF
#include <nccl.h>
static __half h;
static __nv_bfloat16 b;
int main(void) { (void)h; (void)b; return 0; }
EOF
else
    echo "check_headers: no cuda_runtime.h in $cuda_inc: CUDA cases skipped"
    nskipped=$((nskipped + 1))
fi

hip="-I$tmp/fakehip"
# C++ rejects any conversion between different stream pointer types: exact check.
hipuse='
static int usehip(void)
{
    hipStream_t h = 0;
    float x = 0;
    return ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, NULL, h) +
           ncclAllToAll(&x, &x, 1, ncclFloat, NULL, h);
}
int main(void) { return usehip(); }
'
for lang in c c++; do
    case_ "hip_runtime.h then rccl.h ($lang)" $lang "$hip" <<EOF
#include <hip/hip_runtime.h>
#include <rccl/rccl.h>
$hipuse
EOF
    case_ "hipcc flags, hip_runtime.h after ($lang)" $lang "$hip -D__HIP_PLATFORM_AMD__=1" <<EOF
#include <rccl/rccl.h>
#include <hip/hip_runtime.h>
$hipuse
EOF
    case_ "BRAID_USE_HIP_HEADERS ($lang)" $lang "$hip -DBRAID_USE_HIP_HEADERS" <<EOF
#include <nccl.h>
#include <rccl/rccl.h>
#ifndef HIP_VERSION
#error hip_runtime.h was not included
#endif
$hipuse
EOF
    case_ "cudaStream_t macro of a HIP porting layer ($lang)" $lang "$hip" <<EOF
#include <hip/hip_runtime.h>
#define cudaStream_t hipStream_t
#include <rccl/rccl.h>
$hipuse
EOF
done

echo "check_headers: $ncases cases compiled, $failed failed, $nskipped skipped"
if [ "$failed" != 0 ]; then
    echo "check_headers: FAIL"
    exit 1
elif [ "$ncases" = 0 ]; then
    echo "check_headers: FAIL: no case ran"
    exit 1
elif [ "$nskipped" != 0 ]; then
    echo "check_headers: SKIP: the cases above were skipped; the others passed"
    exit 77
fi
echo "check_headers: PASS ($ncases cases)"
exit 0
