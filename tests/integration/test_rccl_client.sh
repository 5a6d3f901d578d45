#!/bin/bash
# A program built as RCCL's users build one (tests/integration/rccl_client.c: ROCm's
# hip_runtime_api.h and <rccl/rccl.h>, linked with -lrccl -lamdhip64, so that it needs
# librccl.so.1 and libamdhip64.so.5), run with braid's lib/braid and the emulated HIP
# runtime (emu/rocm5) first in LD_LIBRARY_PATH, in the emulator's strict mode, on 1, 2 and
# 4 ranks (processes), 4 ranks on 2 devices, and 2 ranks with every stream operation
# delayed: every collective on device buffers, every element checked. braid finds its
# HIP backend by itself (BRAID_DEVICE is not set): the first run, at NCCL_DEBUG=INFO,
# must say "device backend hip".
#
# ROCm's librccl.so is not there to link with: braid's own lib/braid/librccl.so is, with
# ROCm's soname (librccl.so.1, a filter on libbraid.so.0), so the client is linked with
# -L$libdir -lrccl, and must need librccl.so.1 as one linked with ROCm's would.
#
# It needs hip/hip_runtime_api.h in HIP_INCLUDE (default /usr/include: Debian's
# libamdhip64-dev) and libamdhip64.so in HIP_LIBDIR (default: the first of the multiarch
# lib folder, /usr/lib64 and /opt/rocm/lib that has it), and the emulated runtime built
# ($build/emu/rocm5/.libs/libamdhip64.so.5): where one is missing the test is skipped,
# naming it. Where they are all there, a client that does not build is a failure. The
# build and each run have a time limit; the client's own watchdog (-w) fires first and
# names the ranks that did not finish.
# Exit status as automake reads it: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
build=${BRAID_BUILD_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
src=${BRAID_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
libdir=${BRAID_LIBDIR:-$build/.libs/braid}
emu=$build/emu/rocm5/.libs
cc=${BRAID_CC:-cc}
client_src=$src/tests/integration/rccl_client.c
for f in "$libdir/librccl.so.1" "$src/include/rccl/rccl.h" "$client_src"; do
    [ -e "$f" ] || { echo "test_rccl_client.sh: $f is not there (build braid)" >&2; exit 99; }
done

hip_inc=${HIP_INCLUDE:-/usr/include}
hip_libdir=${HIP_LIBDIR:-}
if [ -z "$hip_libdir" ]; then
    # shellcheck disable=SC2086   # BRAID_CC may carry flags ("gcc -m32")
    multiarch=$($cc -print-multiarch 2>/dev/null)
    for d in ${multiarch:+/usr/lib/$multiarch} /usr/lib64 /opt/rocm/lib; do
        [ -e "$d/libamdhip64.so" ] && { hip_libdir=$d; break; }
    done
fi
missing=
[ -e "$hip_inc/hip/hip_runtime_api.h" ] || missing="$missing $hip_inc/hip/hip_runtime_api.h"
[ -n "$hip_libdir" ] && [ -e "$hip_libdir/libamdhip64.so" ] ||
    missing="$missing libamdhip64.so${hip_libdir:+ in $hip_libdir}"
if [ -n "$missing" ]; then
    echo "SKIP: test_rccl_client.sh: ROCm's files to build the client are missing:$missing" \
         "(install libamdhip64-dev, or set HIP_INCLUDE and HIP_LIBDIR)"
    exit 77
fi
if [ ! -e "$emu/libamdhip64.so.5" ]; then
    echo "SKIP: test_rccl_client.sh: the emulated HIP runtime is not built" \
         "($emu/libamdhip64.so.5 is not there)"
    exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_rccl_client.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
# As an RCCL user builds it: -D__HIP_PLATFORM_AMD__ is what hipcc passes.
# shellcheck disable=SC2086
timeout -k 10 300 $cc -std=c11 -Wall -Wextra -Werror -D__HIP_PLATFORM_AMD__ -I"$hip_inc" \
    -I"$src/include" -o "$tmp/rccl_client" "$client_src" -L"$libdir" -lrccl \
    -L"$hip_libdir" -lamdhip64 -lm >"$tmp/build.log" 2>&1
rc=$?
if [ $rc != 0 ]; then
    cat "$tmp/build.log"
    [ $rc = 124 ] && rc="$rc: over 300 s"
    echo "FAIL: cannot build tests/integration/rccl_client.c against $hip_inc and" \
         "$hip_libdir (exit $rc)"
    exit 1
fi
needed=$(readelf -d "$tmp/rccl_client" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
for lib in librccl.so.1 libamdhip64.so.5; do
    case " $needed" in
    *" $lib "*) ;;
    *) echo "FAIL: rccl_client does not need $lib (it needs: $needed)"; exit 1 ;;
    esac
done

export LD_LIBRARY_PATH="$libdir:$emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export BRAID_EMU_STRICT=1
unset BRAID_DEVICE
resolved=$(ldd "$tmp/rccl_client" 2>&1)
for want in "librccl.so.1 => $libdir/librccl.so.1" "libamdhip64.so.5 => $emu/libamdhip64.so.5"; do
    case "$resolved" in
    *"$want "*) ;;
    *) echo "FAIL: the loader does not resolve ${want%% *} to ${want##* } (ldd:)"
       echo "$resolved"
       exit 1 ;;
    esac
done

fail=0
# run_client RANKS [VAR=VALUE...]: the client on RANKS ranks, the variables set for it
run_client() {
    local n=$1 t0=$SECONDS rc
    shift
    echo "== an RCCL program on braid and the emulated HIP runtime: $n rank$([ "$n" = 1 ] ||
        echo s)${1:+, $*}"
    timeout -k 10 120 env "$@" LD_PRELOAD="${BRAID_TEST_PRELOAD:-}" "$tmp/rccl_client" \
        -n "$n" -w 90
    rc=$?
    if [ $rc = 0 ]; then
        echo "   passed in $((SECONDS - t0)) s"
        return 0
    fi
    [ $rc = 124 ] && rc="$rc: over 120 s"
    echo "FAIL: rccl_client -n $n${1:+ with $*} (exit $rc)"
    fail=1
}
# braid must find the HIP runtime the program loaded by itself: it says so at INFO
run_client 1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT >"$tmp/run.log" 2>&1
grep -v ' INFO ' "$tmp/run.log"
grep -E ' INFO (device backend|HIP: )' "$tmp/run.log" | sed 's/^[^ ]* \[[^]]*\] //' | sort -u
if ! grep -q ' INFO device backend hip' "$tmp/run.log"; then
    echo "FAIL: braid did not say \"device backend hip\" at NCCL_DEBUG=INFO"
    fail=1
fi
run_client 2
run_client 4
run_client 4 BRAID_EMU_DEVICES=2   # device rank % 2: two ranks on each
# every queued operation of the emulated streams late: a library that reads an input
# before the stream's copy wrote it, or returns before its result is there, fails the checks
run_client 2 BRAID_EMU_DELAY_US=200
exit $fail
