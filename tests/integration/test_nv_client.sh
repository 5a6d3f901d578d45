#!/bin/bash
# A program built as NVIDIA's users build one (tests/abi/nv_device_client.c: NVIDIA's cuda.h
# and nccl.h, linked to NVIDIA's libnccl.so.2 and the stub libcuda.so), run on braid's
# libnccl.so.2 and braid's emulated libcuda.so.1: two ranks of one process, an all-reduce
# on device buffers, every element checked.
#
# It needs cuda.h and nccl.h in NVIDIA_NCCL_INCLUDE (default /usr/local/cuda/include), and
# libnccl.so.2 and stubs/libcuda.so in NVIDIA_NCCL_LIBDIR (default /usr/local/cuda/lib):
# where one is missing the test is skipped, naming it. Where they are all there, a client
# that does not build is a failure. The build and the run each have a time limit.
# Exit status as automake reads it: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
build=${BRAID_BUILD_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
src=${BRAID_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
emu=$build/emu/.libs
libdir=${BRAID_LIBDIR:-$build/.libs/braid}
nv_inc=${NVIDIA_NCCL_INCLUDE:-/usr/local/cuda/include}
nv_lib=${NVIDIA_NCCL_LIBDIR:-/usr/local/cuda/lib}
client_src=$src/tests/abi/nv_device_client.c
for f in "$emu/libcuda.so.1" "$libdir/libnccl.so.2" "$client_src"; do
    [ -e "$f" ] || { echo "test_nv_client.sh: $f is not there (build braid)" >&2; exit 99; }
done
missing=
for f in "$nv_inc/cuda.h" "$nv_inc/nccl.h" "$nv_lib/libnccl.so.2" "$nv_lib/stubs/libcuda.so"; do
    [ -e "$f" ] || missing="$missing $f"
done
if [ -n "$missing" ]; then
    echo "SKIP: test_nv_client.sh: NVIDIA's files to build the client are missing:$missing" \
         "(set NVIDIA_NCCL_INCLUDE and NVIDIA_NCCL_LIBDIR to where they are)"
    exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_nv_client.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086   # BRAID_CC may carry flags ("gcc -m32")
timeout -k 10 300 ${BRAID_CC:-cc} -I"$nv_inc" -o "$tmp/nv_device_client" "$client_src" \
    "$nv_lib/libnccl.so.2" -L"$nv_lib/stubs" -lcuda
rc=$?
if [ $rc != 0 ]; then
    [ $rc = 124 ] && rc="$rc: over 300 s"
    echo "FAIL: cannot build tests/abi/nv_device_client.c against $nv_inc and $nv_lib" \
         "(exit $rc)"
    exit 1
fi
echo "== a cuda.h + nccl.h program linked to NVIDIA's libraries, on braid"
timeout -k 10 120 env LD_LIBRARY_PATH="$libdir:$emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    LD_PRELOAD="${BRAID_TEST_PRELOAD:-}" "$tmp/nv_device_client"
rc=$?
if [ $rc = 0 ]; then
    echo "   passed"
    exit 0
fi
[ $rc = 124 ] && rc="$rc: over 120 s"
echo "FAIL: nv_device_client (exit $rc)"
exit 1
