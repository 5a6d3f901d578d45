#!/bin/bash
# The checks that need a real GPU, in one run, each step with a time limit: what
# tests/integration/test_device.sh, test_plan.sh and the soak run in CI on braid's emulated
# CUDA driver, here on the system's libcuda.so.1, then the bandwidth tools on device
# buffers and PyTorch's NCCL backend on braid.
#
#     scripts/gpu_check.sh [--emu] [BUILD_DIR [OUT_DIR]]
#
# BUILD_DIR (default build/) is a build with the CUDA kernels (configure found nvcc) and its
# test programs (make check TESTS= builds them without running them); OUT_DIR (default
# BUILD_DIR/gpu-check) gets a log per step. BRAID_GPU_DEPS names a folder of shared
# libraries the build needs that this machine may lack (hwloc, libfabric, UCX, cmocka):
# those the loader does not find are linked into a folder put on LD_LIBRARY_PATH. Each
# step is one line, "ok" or "FAIL", with its time, or "skip" and why; the last line is
# "N passed, N failed".
#
# --emu (or GPU_CHECK_EMU=1) needs no GPU: the steps run on braid's emulated driver
# (BUILD_DIR/emu/.libs first on LD_LIBRARY_PATH; a build without the CUDA
# kernels will do), as far as it goes: PyTorch and NVIDIA's client are skipped, saying so.
#
# Time limits: GPU_CHECK_LIMIT_SCALE (default 1, decimals allowed) multiplies every step's
# limit and the watchdogs of the programs that take one (coll_check -w);
# GPU_CHECK_LIMIT_<step>=SECONDS sets one step's limit alone (GPU_CHECK_LIMIT_coll_check_p2=5),
# its program's watchdog unchanged. GPU_CHECK_ONLY="step ..." runs only the steps named.
# A step over its limit is not just killed. Its processes (it runs in a session of its own:
# the session's processes and their descendants, so the ranks under braidrun or under
# python's torch.distributed.run too) are first asked for a flight-recorder dump: those that
# handle SIGUSR1 (braid's ranks once they have a communicator, docs/FLIGHT.md) get it and write
# OUT_DIR/<step>.flight.<host>.<pid>.txt (every step runs with BRAID_FLIGHT_RECORDER_FILE
# naming that). Then OUT_DIR/<step>.stacks.txt gets the process tree, each thread's name,
# state, wait channel, system call and kernel stack (where readable) from /proc, and each
# thread's user stack from gdb (thread apply all bt), and py-spy dump --native for python
# processes, where those are installed. Then the processes are killed, and the FAIL line
# says where the stacks and dumps are.
#
# GPU_SOAK_SECONDS (default 30) is the soak's length, GPU_PERF_MAX (default 256M, with
# --emu 16M) the bandwidth tools' largest size, BRAID_NV_CLIENT a build of
# tests/abi/nv_device_client.c against NVIDIA's nccl.h and libnccl.so.2 to run on braid.
# Exit: 0 all passed, 1 a failure, 77 no GPU (no nvidia-smi, or it lists none; not with
# --emu), 99 a bad argument or setting (with --emu: the emulated driver is not built).
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
emu_mode=${GPU_CHECK_EMU:-0}
if [ "${1:-}" = --emu ]; then
    emu_mode=1
    shift
fi
build=$(cd "${1:-$src/build}" && pwd) || exit 99
out=${2:-$build/gpu-check}
mkdir -p "$out"
out=$(cd "$out" && pwd)
scale=${GPU_CHECK_LIMIT_SCALE:-1}
if ! awk -v s="$scale" 'BEGIN { exit !(s + 0 > 0) }'; then
    echo "gpu_check.sh: GPU_CHECK_LIMIT_SCALE=$scale is not a positive number"
    exit 99
fi
if [ "$emu_mode" = 1 ]; then
    emu=$build/emu/.libs
    if [ ! -e "$emu/libcuda.so.1" ]; then
        echo "gpu_check.sh: --emu: $emu/libcuda.so.1 is not built"
        exit 99
    fi
    export LD_LIBRARY_PATH=$emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "emulated CUDA driver: $emu/libcuda.so.1 (no GPU is used)"
elif ! command -v nvidia-smi >/dev/null; then
    echo "gpu_check.sh: no GPU here (no nvidia-smi: NVIDIA's driver is not installed)"
    exit 77
elif ! nvidia-smi -L >"$out/gpus.txt" 2>&1 || ! grep -q '^GPU ' "$out/gpus.txt"; then
    echo "gpu_check.sh: no GPU here (nvidia-smi -L: $(head -c 200 "$out/gpus.txt"))"
    exit 77
else
    cat "$out/gpus.txt"
fi

if [ -n "${BRAID_GPU_DEPS:-}" ]; then
    have=$(ldconfig -p)
    mkdir -p "$out/lib"
    for f in "$BRAID_GPU_DEPS"/*.so*; do
        grep -q " $(basename "$f") " <<<"$have" || ln -sf "$f" "$out/lib/"
    done
    export LD_LIBRARY_PATH=$out/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export BRAID_TIMEOUT=${BRAID_TIMEOUT:-60} BRAID_BOOTSTRAP_TIMEOUT=${BRAID_BOOTSTRAP_TIMEOUT:-30}

# ---- time limits ----------------------------------------------------------------------

scaled() {   # seconds: times GPU_CHECK_LIMIT_SCALE, rounded up
    awk -v s="$scale" -v n="$1" 'BEGIN { v = n * s; r = int(v); print (r < v ? r + 1 : r) }'
}

step_limit() {   # step, seconds: GPU_CHECK_LIMIT_<step>, or the seconds scaled
    local v="GPU_CHECK_LIMIT_$1"
    if [[ ${!v:-} =~ ^[1-9][0-9]*$ ]]; then
        echo "${!v}"
    else
        [ -n "${!v:-}" ] && echo "gpu_check.sh: $v=${!v} is not a number of seconds" >&2
        scaled "$2"
    fi
}

# ---- a step's processes, and what they were doing ---------------------------------------

# The step's processes, from one look at the process table (a busy machine forks slowly):
# the members of its session (the step runs in its own: braidrun's ranks, each in its own
# process group, are there too) and every process below them.
step_pids() {   # pid of the step, a session leader
    ps -e -o pid=,ppid=,sid= 2>/dev/null | awk -v top="$1" '
        { parent[$1] = $2; if ($3 == top || $1 == top) take[$1] = 1 }
        END {
            do {
                more = 0
                for (p in parent)
                    if (!(p in take) && (parent[p] in take)) { take[p] = 1; more = 1 }
            } while (more)
            for (p in take) print p
        }' | sort -n
}

stat_state() {   # /proc/PID[/task/TID]: its state letter in REPLY (no fork)
    REPLY=
    read -r REPLY 2>/dev/null <"$1/stat" || return 1
    REPLY=${REPLY##*) }
    REPLY=${REPLY%% *}
}

running() {   # pid: alive and not a zombie
    stat_state "/proc/$1" && [ -n "$REPLY" ] && [ "$REPLY" != Z ] && [ "$REPLY" != X ]
}

catches_usr1() {   # pid: its SIGUSR1 has a handler (braid's, once a rank has a communicator)
    local key val
    while read -r key val; do
        [ "$key" = SigCgt: ] && return $((((16#$val >> 9) & 1) == 0))
    done 2>/dev/null <"/proc/$1/status"
    return 1
}

# SIGUSR1 to those that handle it; wait (5 s at most) until each has a dump file.
flight_dumps() {   # step name, pids...
    local name=$1 p asked=() waited=0 missing
    shift
    for p in "$@"; do
        catches_usr1 "$p" && kill -USR1 "$p" 2>/dev/null && asked+=("$p")
    done
    echo "flight dumps asked (SIGUSR1) of: ${asked[*]:-none (no process handles SIGUSR1)}"
    while [ ${#asked[@]} -gt 0 ] && [ $waited -lt 25 ]; do
        missing=0
        for p in "${asked[@]}"; do
            compgen -G "$out/$name.flight.*.$p.txt" >/dev/null || missing=1
        done
        [ $missing = 0 ] && break
        sleep 0.2
        waited=$((waited + 1))
    done
    sleep 0.5   # a dump still being written
    for p in "${asked[@]}"; do
        compgen -G "$out/$name.flight.*.$p.txt" >/dev/null || echo "no dump from $p"
    done
}

proc_threads() {   # pid: each thread's name, state, wait channel, system call, kernel stack
    local p=$1 t comm wchan sc l argv=()
    mapfile -d '' -t argv 2>/dev/null <"/proc/$p/cmdline"
    echo "=== process $p: ${argv[*]:-(gone)}"
    for t in /proc/"$p"/task/*; do
        [ -d "$t" ] || continue
        comm='' wchan='' sc=''
        read -r comm 2>/dev/null <"$t/comm"
        read -r wchan 2>/dev/null <"$t/wchan"
        read -r sc 2>/dev/null <"$t/syscall"
        stat_state "$t"
        echo "--- thread ${t##*/} ($comm): state ${REPLY:-?}, wchan ${wchan:-?}," \
             "syscall ${sc:-?}"
        while read -r l; do
            echo "      $l"
        done 2>/dev/null <"$t/stack"
    done
}

user_stacks() {   # pids...: gdb's (and py-spy's for python) stacks of each, run side by side
    local p tmp jobs=()
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX") || return
    for p in "$@"; do
        if command -v gdb >/dev/null; then
            timeout 90 gdb -p "$p" -batch -nx -q -ex 'set pagination off' \
                -ex 'thread apply all bt' </dev/null >"$tmp/gdb.$p" 2>&1 &
            jobs+=($!)
        fi
        case $(cat "/proc/$p/comm" 2>/dev/null) in
        python*)
            if command -v py-spy >/dev/null; then
                timeout 90 py-spy dump --native --pid "$p" >"$tmp/py.$p" 2>&1 &
                jobs+=($!)
            fi ;;
        esac
    done
    wait "${jobs[@]}"   # these only: a bare wait would wait for the step too
    for p in "$@"; do
        [ -f "$tmp/gdb.$p" ] && { echo "=== gdb: process $p"; cat "$tmp/gdb.$p"; }
        [ -f "$tmp/py.$p" ] && { echo "=== py-spy: process $p"; cat "$tmp/py.$p"; }
    done
    command -v gdb >/dev/null || echo "(no gdb here: no user stacks)"
    rm -rf "$tmp"
}

# The step ran out of time: what its processes are doing, then kill them all.
step_expired() {   # step name, pid
    local name=$1 pid=$2 pids stacks=$out/$1.stacks.txt i t=$SECONDS took=
    pids=$(step_pids "$pid")
    # shellcheck disable=SC2086   # $pids: one word each
    {
        echo "# $name: over its limit at $(date -Is); its processes:"
        ps -o pid,ppid,pgid,sid,stat,etime,wchan:24,args --forest -p "$(echo $pids | tr ' ' ,)"
        flight_dumps "$name" $pids
        took="flight dumps $((SECONDS - t)) s"
        for i in $pids; do
            proc_threads "$i"
        done
        took+=", /proc $((SECONDS - t)) s"
        user_stacks $pids
        echo "# collected in $((SECONDS - t)) s ($took)"
    } >"$stacks" 2>&1
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    for i in $(seq 50); do
        running "$pid" || break
        sleep 0.1
    done
    # shellcheck disable=SC2046   # anything left, or started since
    kill -KILL $(step_pids "$pid") 2>/dev/null
}

# ---- steps ------------------------------------------------------------------------------

pass=0 fail=0
selected() {   # step: in GPU_CHECK_ONLY, or there is none
    [ -z "${GPU_CHECK_ONLY:-}" ] || [[ " $GPU_CHECK_ONLY " == *" $1 "* ]]
}

step() {   # name, seconds, command...: runs it with a time limit, its output in a log
    local name=$1 limit t0=$SECONDS rc pid where=
    limit=$(step_limit "$1" "$2")
    shift 2
    selected "$name" || return 0
    BRAID_FLIGHT_RECORDER_FILE="$out/$name.flight.%h.%p.txt" \
        setsid "$@" >"$out/$name.log" 2>&1 </dev/null &
    pid=$!
    while running "$pid" && [ $((SECONDS - t0)) -lt "$limit" ]; do
        sleep 0.2
    done
    if running "$pid"; then
        step_expired "$name" "$pid"
        wait "$pid"
        rc="124: over $limit s"
        where="stacks: $out/$name.stacks.txt; flight dumps:"
        where+=" $(compgen -G "$out/$name.flight.*.txt" | wc -l) in $out/$name.flight.*.txt"
        where+=" (tools/braid-flight reads them)"
    else
        wait "$pid"
        rc=$?
    fi
    if [ "$rc" = 0 ]; then
        pass=$((pass + 1))
        echo "ok    $name ($((SECONDS - t0)) s)"
    else
        fail=$((fail + 1))
        echo "FAIL  $name (exit $rc, $((SECONDS - t0)) s): $*"
        [ -n "$where" ] && echo "      $where"
        tail -n 15 "$out/$name.log" | sed 's/^/      /'
    fi
}

skip() {   # name, why
    selected "$1" && echo "skip  $1: $2"
}

run=$build/braidrun
check=$build/tests/integration/coll_check
sections=reduce,move,p2p,group,v

# first what says most if the run is cut short: correctness on 2 processes, bandwidth, torch
step info 30 "$build/braid-info"
grep -E '^ *(kernel image|device)' "$out/info.log" 2>/dev/null | head -n 12
step device_view 60 env BRAID_TEST_DRIVER=system "$build/tests/unit/test_device_view"
step coll_check_p2 120 "$check" -d -q -w "$(scaled 110)" -o $sections -p 2
perf_max=${GPU_PERF_MAX:-256M}
[ "$emu_mode" = 1 ] && perf_max=${GPU_PERF_MAX:-16M}   # host memory, 2 cores: ~40 ms at 16M
perf() {   # ranks, collective
    step "$2_perf_$1" 90 "$run" -n "$1" "$build/$2_perf" -b 8 -e "$perf_max" -f 8 -n 20 -w 5 \
        -c 1
}
perf 2 all_reduce
grep -hE '^ +[0-9]+ ' "$out"/all_reduce_perf_2.log 2>/dev/null
torch_nccl() {   # ranks: PyTorch's NCCL backend; its wheel's RPATH beats LD_LIBRARY_PATH
    step "torch_nccl_$1" 150 env LD_PRELOAD="$build/.libs/braid/libnccl.so.2" \
        python3 -m torch.distributed.run --standalone --nproc_per_node="$1" \
        "$src/tests/integration/torch_nccl.py"
    grep -h '^torch_nccl: ' "$out/torch_nccl_$1.log" 2>/dev/null | grep -v ' passed, ' |
        head -n 8
}
has_torch=0
if [ "$emu_mode" = 1 ]; then
    torch_skip="--emu: PyTorch's CUDA needs a real GPU"
elif python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    has_torch=1
else
    torch_skip="python3 has no torch with CUDA"
fi
if [ $has_torch = 1 ]; then torch_nccl 2; else skip torch_nccl_2 "$torch_skip"; fi

step device_fault 60 "$build/tests/fault/device_fault"
for n in 1 4; do
    step "coll_check_p$n" 120 "$check" -d -q -w "$(scaled 110)" -o $sections -p $n
done
step coll_check_t4 100 "$check" -d -q -w "$(scaled 90)" -o $sections -t 4
step coll_check_T3 100 "$check" -d -q -w "$(scaled 90)" -o $sections -T 3
# calls on 3 streams in turn (the default one among them): only braid orders them
step coll_check_p2_S3 100 "$check" -d -q -w "$(scaled 90)" -o $sections -p 2 -S 3
for n in 2 4; do
    step "plan_check_$n" 60 "$run" -n $n "$build/tests/integration/plan_check" -d
done
step mlp_demo_ddp 60 "$run" -n 4 "$build/mlp_demo" --device --wire bf16
step mlp_demo_fsdp 60 "$run" -n 4 "$build/mlp_demo" --device --pattern fsdp --wire bf16
soak_s=${GPU_SOAK_SECONDS:-30}
step soak $((soak_s + 60)) "$build/tests/integration/soak" -s "$soak_s" -d
perf 2 all_gather
perf 2 reduce_scatter
perf 4 all_reduce
# a program built against NVIDIA's headers and libraries (tests/abi/nv_device_client.c)
if [ "$emu_mode" = 1 ]; then
    skip nv_device_client "--emu (make check's test_nv_client.sh runs it on the emulated driver)"
elif [ -x "${BRAID_NV_CLIENT:-}" ]; then
    step nv_device_client 60 env LD_LIBRARY_PATH="$build/.libs/braid:${LD_LIBRARY_PATH:-}" \
        "$BRAID_NV_CLIENT"
else
    skip nv_device_client "BRAID_NV_CLIENT names no build of tests/abi/nv_device_client.c"
fi
if [ $has_torch = 1 ]; then torch_nccl 4; else skip torch_nccl_4 "$torch_skip"; fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
