#!/bin/bash
# Device buffers on braid's emulated CUDA driver (src/device/emu, built as
# src/device/emu/.libs/libcuda.so.1): every collective, type and op through coll_check -d
# (braid.h's uneven ones too, section v) on 1 to 4 processes, 4 ranks driven by one thread
# (one stream for all, in groups) and 3 threads with a rank each; every queued operation of
# the emulated streams delayed (BRAID_EMU_DELAY_US), so a library that reads a buffer
# before its stream wrote it, or returns its result late, fails the checks; then the
# failure cases (tests/fault/device_fault.c: abort, asynchronous error, mixed buffers,
# finalize). A program built against NVIDIA's headers is test_nv_client.sh's.
# Exit status as automake reads it: 0 pass, 1 fail, 99 hard error.
set -u
build=${BRAID_BUILD_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
emu=$build/src/device/emu/.libs
check=$build/tests/integration/coll_check
fault=$build/tests/fault/device_fault
stall=$build/tests/fault/device_stall
for f in "$emu/libcuda.so.1" "$check" "$fault" "$stall"; do
    [ -e "$f" ] || { echo "test_device.sh: $f is not built" >&2; exit 99; }
done
export LD_LIBRARY_PATH=$emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export BRAID_TIMEOUT=${BRAID_TIMEOUT:-60} BRAID_BOOTSTRAP_TIMEOUT=${BRAID_BOOTSTRAP_TIMEOUT:-30}
sections=reduce,move,p2p,group,v
fail=0
run() {   # description, then the command
    local what=$1
    shift
    echo "== $what"
    local t0=$SECONDS
    if "$@"; then
        echo "   passed in $((SECONDS - t0)) s"
    else
        echo "FAIL: $what (exit $?)"
        fail=1
    fi
}
for n in 1 2 3 4; do
    run "coll_check -d, $n processes" "$check" -d -q -w 300 -o "$sections" -p "$n"
done
run "coll_check -d, 4 ranks on one thread" "$check" -d -q -w 300 -o "$sections" -t 4
run "coll_check -d, 3 threads" "$check" -d -q -w 300 -o "$sections" -T 3
run "coll_check -d, 2 processes, every stream operation delayed 200 us" \
    env BRAID_EMU_DELAY_US=200 "$check" -d -q -w 300 -o reduce,move -p 2
run "coll_check -d, 2 processes, slots not mapped for the device (bounce buffers)" \
    env BRAID_EMU_NO_HOST_REGISTER=1 "$check" -d -q -w 300 -o reduce,move -p 2
run "coll_check -d, 4 ranks on one thread, delayed" \
    env BRAID_EMU_DELAY_US=200 "$check" -d -q -w 300 -o reduce -t 4
# The bandwidth tools: device buffers (a stream per rank, data checked through copies to
# and from the device) where the driver is, and host buffers when --host-buffers asks.
perf_buffers() {   # what the header must say (device or host), the tool, its extra flags
    local want=$1 tool=$2 out
    shift 2
    out=$("$build/braidrun" -n 2 "$build/$tool" -b 8 -e 1M -f 4 -c 1 "$@") &&
        grep -q "^# buffers: $want " <<<"$out" || { echo "$out"; return 1; }
}
run "all_reduce_perf, 2 processes, device buffers, checked" perf_buffers device all_reduce_perf
run "all_gather_perf, 2 processes, device buffers, checked" perf_buffers device all_gather_perf
run "all_reduce_perf --host-buffers, 2 processes" perf_buffers host all_reduce_perf --host-buffers
run "device_fault: abort, async error, mixed buffers, finalize" "$fault"
run "device_stall: a late rank, a stream and a kernel that never finish, abort meanwhile" \
    "$stall"

exit $fail
