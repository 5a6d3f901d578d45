#!/bin/bash
# Soak test (issue 21): random collectives on 4 ranks over 2 emulated hosts (NCCL_HOSTID;
# the socket provider between them, shared memory within), a rank killed at a random
# moment, the survivors shrinking the communicator (ncclCommShrink) and going on; every
# result checked, no leak (file descriptors, /dev/shm, resident memory per iteration), no
# hang. tests/integration/soak.c says what is drawn, checked and printed.
#
#     scripts/soak.sh [DURATION] [SOAK_OPTION...]
#
#   DURATION     minutes (default 10), or seconds with an s suffix: 10, 2, 45s
#   SOAK_OPTION  passed to the program: -S SEED (replay a run: the seed is printed first),
#                -k KILLS (0 to 2), -n RANKS (2 to 4), -m MAX_BYTES, -r (report resident
#                memory, do not judge it)
#
# BRAID_BUILD_DIR names the build (default: build/ of this checkout). Where the build has
# braid's emulated CUDA driver (emu/.libs/libcuda.so.1) it goes on
# LD_LIBRARY_PATH and a quarter of the iterations use device buffers (SOAK_DEVICE=0: host
# buffers only). An outer timeout (the duration + 4 minutes) kills the whole job and fails.
# Exit status: 0 when exactly the planned rank(s) died and everything else passed; 1 on any
# failure (a wrong result, an unexpected death or error, a leak, a hang); 99 if it could not
# run.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BRAID_BUILD_DIR:-$src/build}
prog=$build/tests/integration/soak
duration=10
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    duration=$1
    shift
fi
case $duration in
    *s) seconds=${duration%s} ;;
    *) seconds=$((duration * 60)) ;;
esac
if ! [ "$seconds" -gt 0 ] 2>/dev/null; then
    echo "soak.sh: bad duration '$duration' (minutes, or seconds with an s suffix)" >&2
    exit 99
fi
if [ ! -x "$prog" ]; then
    echo "soak.sh: $prog is not built (make -C $build check TESTS= builds it)" >&2
    exit 99
fi
args=(-s "$seconds")
emu=$build/emu/.libs
if [ "${SOAK_DEVICE:-1}" != 0 ] && [ -e "$emu/libcuda.so.1" ]; then
    export LD_LIBRARY_PATH=$emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    args+=(-d)
fi
limit=$((seconds + 240))
echo "soak.sh: $prog ${args[*]} $*, killed after $limit s"
timeout -k 10 "$limit" "$prog" "${args[@]}" "$@"
rc=$?
case $rc in
    0) echo "soak.sh: passed" ;;
    124 | 137) echo "soak.sh: FAIL: still running after $limit s (hang): the job was killed" ;;
    *) echo "soak.sh: FAIL (exit $rc)" ;;
esac
[ "$rc" = 124 ] || [ "$rc" = 137 ] && rc=1
exit "$rc"
