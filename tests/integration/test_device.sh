#!/bin/bash
# Device buffers on braid's emulated CUDA driver (emu/, built as emu/.libs/libcuda.so.1):
# every collective, type and op through coll_check -d (braid.h's uneven ones too, section
# v) on the GPU engine (device FIFOs, work on the communicators' streams) on 1 to 4
# processes, 4 ranks driven by one thread (one stream for all, in groups), 3 threads with
# a rank each, and ranks spread over 2 and 3 devices (-D, processes and threads); every
# queued operation of the emulated streams delayed (BRAID_EMU_DELAY_US), so a library that
# reads a buffer before its stream wrote it, or returns its result late, fails the checks;
# the host engine on the proxy thread (BRAID_P2P=0: no device FIFOs) the same way on 2
# processes and 4 ranks of one thread; then the failure cases (tests/fault/device_fault.c:
# abort, asynchronous error, mixed buffers, finalize; tests/fault/device_stall.c: a late
# rank, a stream and a kernel that never finish, abort meanwhile, on both engines;
# tests/fault/device_kill.c: a rank killed in the middle of a device all-reduce (also with
# every stream operation delayed), and in the device timing at init;
# tests/fault/mismatch.c -d: ranks whose device calls differ, on both engines). A program
# built against NVIDIA's headers is test_nv_client.sh's.
# Every step runs the emulator in its strict mode (BRAID_EMU_STRICT=1, as unforgiving as a
# real driver: its lock, the legacy stream, time slices, lazy loads, device memory the host
# cannot touch), one coll_check run also without it. The strict runs are the regression
# tests of the first GPU run's hangs: at 94d0b96 every coll_check run deadlocked in them,
# the emulator naming the proxy's cuMemAlloc or lazy kernel load behind the caller's
# pageable cuMemcpyDtoHAsync, whose stream waited for that proxy.
# Each step runs under a time limit (timeout) sized for a busy 2-core machine, about ten
# times what it takes on an idle one; coll_check's own watchdog (-w) fires first and
# names the phase. A step over its limit fails, saying so.
# With BRAID_TEST_RUNTIME=hip (test_device_hip.sh) every step runs through braid's HIP
# backend on the emulated HIP runtime of ROCm 6 (emu/rocm6: the same engine, HIP's face),
# the tests' own buffers and streams made with HIP, and coll_check once more on ROCm 5's
# and 7's (emu/rocm5, emu/rocm7), on other archs, and where no code object serves;
# skipped where braid carries no HIP code object (no hipcc at build time).
# Exit status as automake reads it: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
build=${BRAID_BUILD_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
runtime=${BRAID_TEST_RUNTIME:-cuda}
emu=$build/emu/.libs
rt_lib=$emu/libcuda.so.1
if [ "$runtime" = hip ]; then
    emu=$build/emu/rocm6/.libs
    rt_lib=$emu/libamdhip64.so.6
    if [ ! -e "$build/kernels/gpu/kernels.hipfb" ]; then
        echo "SKIP: test_device.sh (HIP): braid was built without hipcc, so it carries no" \
             "HIP code object for the emulated AMD GPU"
        exit 77
    fi
    export BRAID_TEST_RUNTIME
fi
check=$build/tests/integration/coll_check
fault=$build/tests/fault/device_fault
stall=$build/tests/fault/device_stall
kill=$build/tests/fault/device_kill
mismatch=$build/tests/fault/mismatch
for f in "$rt_lib" "$check" "$fault" "$stall" "$kill" "$mismatch"; do
    [ -e "$f" ] || { echo "test_device.sh: $f is not built" >&2; exit 99; }
done
export LD_LIBRARY_PATH=$emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export BRAID_TIMEOUT=${BRAID_TIMEOUT:-60} BRAID_BOOTSTRAP_TIMEOUT=${BRAID_BOOTSTRAP_TIMEOUT:-30}
export BRAID_EMU_STRICT=1
sections=reduce,move,p2p,group,v
fail=0 failed=
run() {   # description, limit in seconds, then the command (or a function of this script)
    local what=$1 limit=$2 t0=$SECONDS rc
    shift 2
    echo "== $what"
    if declare -F "$1" >/dev/null; then   # timeout runs programs: a function runs in bash
        timeout -k 10 "$limit" bash -c "$(declare -f "$1"); \"\$@\"" "$0" "$@"
    else
        timeout -k 10 "$limit" "$@"
    fi
    rc=$?
    if [ $rc = 0 ]; then
        echo "   passed in $((SECONDS - t0)) s"
        return
    elif [ $rc = 124 ] || { [ $rc = 137 ] && [ $((SECONDS - t0)) -ge "$limit" ]; }; then
        what="FAIL: $what (over $limit s)"
    else
        what="FAIL: $what (exit $rc)"
    fi
    echo "$what"
    failed="$failed
$what"
    fail=1
}
# coll_check's watchdog, and the limit a step of it gets
w=300 limit=360
for n in 1 2 3 4; do
    run "coll_check -d, $n processes" $limit "$check" -d -q -w $w -o "$sections" -p "$n"
done
run "coll_check -d, 4 ranks on one thread" $limit "$check" -d -q -w $w -o "$sections" -t 4
run "coll_check -d, 3 threads" $limit "$check" -d -q -w $w -o "$sections" -T 3
run "coll_check -d, 3 processes on 2 devices" $limit \
    env BRAID_EMU_DEVICES=2 "$check" -d -D -q -w $w -o "$sections" -p 3
run "coll_check -d, 3 threads on 3 devices" $limit \
    env BRAID_EMU_DEVICES=3 "$check" -d -D -q -w $w -o "$sections" -T 3
run "coll_check -d, the host engine (BRAID_P2P=0), 2 processes" $limit \
    env BRAID_P2P=0 "$check" -d -q -w $w -o "$sections" -p 2
run "coll_check -d, the host engine (BRAID_P2P=0), 4 ranks on one thread" $limit \
    env BRAID_P2P=0 "$check" -d -q -w $w -o "$sections" -t 4
run "coll_check -d, 2 processes, the emulator not strict" $limit \
    env BRAID_EMU_STRICT=0 "$check" -d -q -w $w -o "$sections" -p 2
# calls on streams in turn, nothing but braid ordering them: a job on its caller's stream
# (a call alone), on the communicator's (a group's calls on several streams, or the
# ranks of one thread), one after the other
run "coll_check -d, 2 processes, calls on 3 streams in turn (the default one among them)" \
    $limit env BRAID_EMU_DELAY_US=50 "$check" -d -q -w $w -o "$sections" -p 2 -S 3
run "coll_check -d, 4 ranks on one thread, calls on 3 streams in turn" $limit \
    "$check" -d -q -w $w -o "$sections" -t 4 -S 3
run "coll_check -d, 3 threads, calls on 2 streams in turn" $limit \
    "$check" -d -q -w $w -o "$sections" -T 3 -S 2
if [ "$runtime" = hip ]; then
    for r in 5 7; do
        run "coll_check -d, 2 processes, on ROCm $r's runtime (emu/rocm$r)" $limit \
            env LD_LIBRARY_PATH="${LD_LIBRARY_PATH/#$emu/$build/emu/rocm$r/.libs}" \
            "$check" -d -q -w $w -o "$sections" -p 2
    done
    run "coll_check -d, 2 processes on a gfx908 (its code object of braid's bundle)" $limit \
        env BRAID_EMU_HIP_ARCH=gfx908 "$check" -d -q -w $w -o reduce -p 2
    # an arch no embedded code object serves: braid compiles its kernels with hiprtc, where
    # the runtime has one (ROCm 5's emulated runtime calls the installed ROCm's), or init
    # fails saying why
    arch_init() {   # runtime folder, arch, what the log must say
        local out
        out=$(LD_LIBRARY_PATH="${LD_LIBRARY_PATH/#$emu/$build/emu/$1/.libs}" \
              BRAID_EMU_HIP_ARCH=$2 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT \
              "$check" -d -q -w 250 -o reduce -p 1 2>&1)
        grep -q "$3" <<<"$out" || { echo "$out" | tail -20; echo "no \"$3\""; return 1; }
    }
    export build check emu
    run "a gfx942 on ROCm 5's runtime: its comgr cannot build for it, init fails saying so" \
        120 arch_init rocm5 gfx942 "ncclCommInitRank.*comgr.*cannot build code for gfx942"
    run "a gfx1030 on ROCm 6's runtime, which has no hiprtc: init fails saying so" 120 \
        arch_init rocm6 gfx1030 "ncclCommInitRank.*compiling kernels needs hiprtc"
    if [ -n "${BRAID_TEST_QUICK:-}" ]; then
        echo "== skipped (BRAID_TEST_QUICK): a gfx1030 on ROCm 5's runtime, braid's kernels" \
             "compiled by the installed ROCm's hiprtc (a minute under the sanitizers)"
    elif [ -e /usr/lib/x86_64-linux-gnu/libamdhip64.so.5 ] ||
         [ -e /opt/rocm/lib/libamdhip64.so.5 ] || [ -n "${BRAID_EMU_HIPRTC:-}" ]; then
        run "a gfx1030 on ROCm 5's runtime: braid's kernels compiled by hiprtc, then run" 300 \
            arch_init rocm5 gfx1030 "kernels from the hip (compiled at run time) image"
    else
        echo "== skipped: a gfx1030 on ROCm 5's runtime, compiled by hiprtc: no ROCm 5" \
             "installed (Debian's libamdhip64-5, or set BRAID_EMU_HIPRTC)"
    fi
fi
run "coll_check -d, 2 processes, every stream operation delayed 200 us" $limit \
    env BRAID_EMU_DELAY_US=200 "$check" -d -q -w $w -o reduce,move -p 2
run "coll_check -d, 2 processes, the host engine, slots not mapped (bounce buffers)" $limit \
    env BRAID_P2P=0 BRAID_EMU_NO_HOST_REGISTER=1 "$check" -d -q -w $w -o reduce,move -p 2
run "coll_check -d, 2 processes, FIFOs of 2 slots of 4 KiB (many slices)" $limit \
    env BRAID_P2P_SLOT_SIZE=4096 BRAID_P2P_NSLOTS=2 "$check" -d -q -w $w -o "$sections" -p 2
run "coll_check -d, 4 ranks on one thread, delayed" $limit \
    env BRAID_EMU_DELAY_US=200 "$check" -d -q -w $w -o reduce -t 4
# The bandwidth tools: device buffers (a stream per rank, data checked through copies to
# and from the device) where the driver is, and host buffers when --host-buffers asks.
perf_buffers() {   # what the header must say (device or host), the tool, its extra flags
    local want=$1 tool=$2 out
    shift 2
    # the tools load HIP's runtime unasked only where an AMD GPU driver is
    [ "$runtime" = hip ] && export BRAID_DEVICE=hip
    out=$("$build/braidrun" -n 2 "$build/$tool" -b 8 -e 1M -f 4 -c 1 "$@") &&
        grep -q "^# buffers: $want " <<<"$out" || { echo "$out"; return 1; }
}
export build runtime
run "all_reduce_perf, 2 processes, device buffers, checked" 180 \
    perf_buffers device all_reduce_perf
run "all_gather_perf, 2 processes, device buffers, checked" 180 \
    perf_buffers device all_gather_perf
run "all_reduce_perf --host-buffers, 2 processes" 180 \
    perf_buffers host all_reduce_perf --host-buffers
# its own watchdog: 120 s
run "device_fault: abort, async error, mixed buffers, finalize" 180 "$fault"
# each case bounded by the program itself (60 s)
run "device_stall: a late rank, a stream and a kernel that never finish, abort meanwhile, \
a device calibration that never ends" 300 "$stall"
# the host engine times no device: no calib case
run "device_stall on the host engine (BRAID_P2P=0)" 300 env BRAID_P2P=0 "$stall" late stream \
    stall abort
# its own watchdog: 240 s
run "device_kill: a rank killed in the middle of a device all-reduce, and in the device \
timing at init" 300 "$kill"
# the survivors' streams reach braid's work on them long after the failure: the release
# must last until they have passed it (calls on the callers' streams hung without)
run "device_kill, every stream operation delayed 3 ms" 300 env BRAID_EMU_DELAY_US=3000 \
    "$kill" call
# each case bounded by the program itself (25 s)
run "mismatch -d: device calls that differ between ranks" 300 "$mismatch" -d
run "mismatch -d on the host engine (BRAID_P2P=0)" 300 env BRAID_P2P=0 "$mismatch" -d
# the failed steps again, last, where a log's tail shows them
[ $fail = 0 ] || echo "test_device.sh ($runtime):$failed"
exit $fail
