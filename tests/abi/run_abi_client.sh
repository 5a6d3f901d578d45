#!/bin/sh
# Build abi_client.c against NVIDIA's nccl.h and libnccl.so.2, then run it on braid.
#
# Usage: run_abi_client.sh [BRAID_LIBDIR]
#   BRAID_LIBDIR   directory holding braid's libnccl.so.2 (-> libbraid.so.0); default
#                  $BRAID_LIBDIR, else .libs/braid (run from the top build directory)
# Environment:
#   CC                   C compiler (default $BRAID_CC, the build's, else cc)
#   NVIDIA_NCCL_INCLUDE  directory of NVIDIA's nccl.h (default /usr/local/cuda/include;
#                        it also needs cuda_runtime.h, which NVIDIA's nccl.h includes)
#   NVIDIA_NCCL_LIBDIR   directory of NVIDIA's libnccl.so.2 (default /usr/local/cuda/lib)
#   BRAID_TEST_PRELOAD   libraries to LD_PRELOAD into the client (the sanitizer runtime when
#                        braid is built with --enable-sanitizers)
#
# Steps: compile and link the client exactly as a user of NVIDIA's NCCL would (-lnccl, no
# rpath), check that it NEEDS libnccl.so.2, check that with LD_LIBRARY_PATH=BRAID_LIBDIR
# the loader resolves libnccl.so.2 to braid's, run it there and require "abi_client: PASS".
# Running the client on NVIDIA's own library needs GPUs and is not part of this test.
# Exit status: 0 pass, 1 fail, 77 skip (NVIDIA header/library or a C compiler missing),
# 99 BRAID_LIBDIR has no libnccl.so.2.

set -u

libdir=${1:-${BRAID_LIBDIR:-.libs/braid}}
cc=${CC:-${BRAID_CC:-cc}}
nv_inc=${NVIDIA_NCCL_INCLUDE:-/usr/local/cuda/include}
nv_lib=${NVIDIA_NCCL_LIBDIR:-/usr/local/cuda/lib}
here=$(cd "$(dirname "$0")" && pwd)
src=$here/abi_client.c

skip() { echo "run_abi_client: SKIP: $*"; exit 77; }
fail() { echo "run_abi_client: FAIL: $*"; exit 1; }

[ -f "$nv_inc/nccl.h" ] || skip "NVIDIA's nccl.h not found in $nv_inc (set NVIDIA_NCCL_INCLUDE)"
[ -e "$nv_lib/libnccl.so.2" ] || skip "NVIDIA's libnccl.so.2 not found in $nv_lib (set NVIDIA_NCCL_LIBDIR)"
command -v "$cc" >/dev/null 2>&1 || skip "no C compiler ($cc; set CC)"
[ -f "$src" ] || { echo "run_abi_client: ERROR: $src not found"; exit 99; }
if [ ! -e "$libdir/libnccl.so.2" ]; then
    echo "run_abi_client: ERROR: $libdir/libnccl.so.2 not found (build braid, or pass its lib/braid dir)"
    exit 99
fi
libdir=$(cd "$libdir" && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/run_abi_client.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
exe=$tmp/abi_client

# libnccl.so is the development link name; link to the .so.2 by path if it is absent.
if [ -e "$nv_lib/libnccl.so" ]; then
    nccl_link="-L$nv_lib -lnccl"
else
    nccl_link="$nv_lib/libnccl.so.2"
fi
# shellcheck disable=SC2086 # nccl_link is two words on purpose
if ! "$cc" -std=gnu11 -O1 -g -Wall -Wextra -Werror -I"$nv_inc" -o "$exe" "$src" \
        $nccl_link -lpthread >"$tmp/build.log" 2>&1; then
    cat "$tmp/build.log"
    fail "could not build abi_client against NVIDIA's header and library"
fi

if command -v readelf >/dev/null 2>&1; then
    readelf -d "$exe" | grep -q 'NEEDED.*\[libnccl\.so\.2\]' ||
        fail "abi_client does not NEED libnccl.so.2: $(readelf -d "$exe" | grep NEEDED)"
fi

LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
if command -v ldd >/dev/null 2>&1; then
    resolved=$(ldd "$exe" | awk '$1 == "libnccl.so.2" { print $3 }')
    case "$resolved" in
    "$libdir"/*) ;;
    *) fail "with LD_LIBRARY_PATH=$libdir, libnccl.so.2 resolves to '$resolved', not braid's" ;;
    esac
fi

# A sanitizer build of braid needs its runtime first in an uninstrumented client.
LD_PRELOAD="${BRAID_TEST_PRELOAD:-}${LD_PRELOAD:+ $LD_PRELOAD}" "$exe" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
[ "$rc" -eq 0 ] || fail "abi_client exited with status $rc"
grep -q '^abi_client: PASS$' "$tmp/out" || fail "abi_client did not print 'abi_client: PASS'"
if grep -q '^FAIL' "$tmp/out"; then
    fail "abi_client reported failed checks"
fi
echo "run_abi_client: PASS: a client built for NVIDIA's NCCL runs on $libdir/libnccl.so.2"
exit 0
