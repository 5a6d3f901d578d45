#!/bin/sh
# Compare the ABI of braid's public headers with NVIDIA's, using test_layout.c.
#
# Usage: check_layout.sh [BRAID_INCLUDE_DIR]
#   BRAID_INCLUDE_DIR   braid's include/ (default: $BRAID_INCLUDE, else ../../include next
#                       to this script, i.e. the source tree's)
# Environment:
#   CC, CXX               C and C++ compilers (default $BRAID_CC, the build's, which make
#                         check sets, else cc; and c++)
#   NVIDIA_NCCL_INCLUDE   directory of NVIDIA's nccl.h (default /usr/local/cuda/include)
#
# test_layout.c asserts at compile time every size, offset, enum and macro value NCCL
# 2.28.9 fixes, and the exact type of every API function, then prints them as a table.
# This script builds and runs it:
#   1. against braid's nccl.h as C11 (-pedantic -Werror), and as C with nccl_device.h;
#   2. against braid's headers as C++ with nccl_device.h (same table as the C build);
#   3. when NVIDIA's nccl.h is there: against NVIDIA's nccl.h as C, and NVIDIA's full
#      nccl_device.h as C++17, and diffs each table with braid's.
# Exit status: 0 pass, 1 fail (the failing compile or the diff is printed), 77 skip: no C
# compiler, or a part this machine lacks (a C++ compiler, NVIDIA's nccl.h) was skipped after
# the rest passed.

set -u

here=$(cd "$(dirname "$0")" && pwd)
inc=${1:-${BRAID_INCLUDE:-$here/../../include}}
cc=${CC:-${BRAID_CC:-cc}}
cxx=${CXX:-c++}
nv_inc=${NVIDIA_NCCL_INCLUDE:-/usr/local/cuda/include}
src=$here/test_layout.c
warn="-Wall -Wextra -Werror"

command -v "$cc" >/dev/null 2>&1 || { echo "check_layout: SKIP: no C compiler ($cc)"; exit 77; }
if [ ! -f "$inc/nccl.h" ]; then
    echo "check_layout: ERROR: $inc/nccl.h not found"
    exit 99
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_layout.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
failed=0 nbuilt=0 ncompared=0 skipped=

# build_run NAME COMPILER FLAGS...: compile test_layout.c, run it, keep its table in NAME.
build_run() {
    name=$1
    shift
    if ! "$@" -o "$tmp/$name.exe" >"$tmp/$name.log" 2>&1; then
        echo "check_layout: FAIL: $name does not compile:"
        echo "  $*"
        head -40 "$tmp/$name.log"
        failed=1
        return 1
    fi
    if ! "$tmp/$name.exe" >"$tmp/$name.txt"; then
        echo "check_layout: FAIL: $name:"
        grep FAIL "$tmp/$name.txt"
        failed=1
        return 1
    fi
    echo "check_layout: $name ok ($(wc -l <"$tmp/$name.txt") rows)"
    nbuilt=$((nbuilt + 1))
    return 0
}

# same A B: the tables of two builds must be identical.
same() {
    if [ -f "$tmp/$1.txt" ] && [ -f "$tmp/$2.txt" ]; then
        ncompared=$((ncompared + 1))
        if diff -u "$tmp/$1.txt" "$tmp/$2.txt" >"$tmp/diff" 2>&1; then
            echo "check_layout: $1 and $2 agree"
        else
            echo "check_layout: FAIL: $1 and $2 differ:"
            cat "$tmp/diff"
            failed=1
        fi
    fi
}

build_run braid-c "$cc" -std=c11 -pedantic $warn -I"$inc" "$src"
build_run braid-c-dev "$cc" -std=c11 -pedantic $warn -DLAYOUT_WITH_DEVICE -I"$inc" "$src"
have_cxx=0
if command -v "$cxx" >/dev/null 2>&1; then
    have_cxx=1
    build_run braid-cxx-dev "$cxx" -std=c++11 $warn -x c++ -DLAYOUT_WITH_DEVICE -I"$inc" "$src"
    same braid-c-dev braid-cxx-dev
else
    echo "check_layout: no C++ compiler ($cxx): C++ variants skipped"
    skipped="$skipped C++"
fi

if [ -f "$nv_inc/nccl.h" ]; then
    build_run nvidia-c "$cc" -std=c11 $warn -I"$nv_inc" "$src"
    same braid-c nvidia-c
    if [ "$have_cxx" = 1 ] && [ -f "$nv_inc/nccl_device.h" ]; then
        # NVIDIA's nccl_device.h needs C++17 and size_t declared before it.
        build_run nvidia-cxx-dev "$cxx" -std=c++17 $warn -x c++ -DLAYOUT_WITH_DEVICE \
            -include stddef.h -I"$nv_inc" "$src"
        same braid-cxx-dev nvidia-cxx-dev
    fi
else
    echo "check_layout: NVIDIA's nccl.h not found in $nv_inc: compared with the" \
         "asserted values only"
    skipped="$skipped NVIDIA's-nccl.h"
fi

echo "check_layout: $nbuilt tables built and checked, $ncompared comparisons"
if [ "$failed" != 0 ]; then
    echo "check_layout: FAIL"
    exit 1
elif [ "$nbuilt" = 0 ]; then
    echo "check_layout: FAIL: nothing was built"
    exit 1
elif [ -n "$skipped" ]; then
    echo "check_layout: SKIP: not checked here:$skipped"
    exit 77
fi
echo "check_layout: PASS"
exit 0
