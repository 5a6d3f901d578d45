#!/bin/bash
# The checks that need a real GPU, in one run, each step with a time limit: what
# tests/integration/test_device.sh, test_plan.sh and the soak run in CI on braid's emulated
# CUDA driver, here on the system's libcuda.so.1, then the bandwidth tools on device
# buffers and PyTorch's NCCL backend on braid.
#
#     scripts/gpu_check.sh [BUILD_DIR [OUT_DIR]]
#
# BUILD_DIR (default build/) is a build with the CUDA kernels (configure found nvcc) and its
# test programs (make check TESTS= builds them without running them); OUT_DIR (default
# BUILD_DIR/gpu-check) gets a log per step. BRAID_GPU_DEPS names a folder of shared
# libraries the build needs that this machine may lack (hwloc, libfabric, UCX, cmocka):
# those the loader does not find are linked into a folder put on LD_LIBRARY_PATH. Each
# step is one line, "ok" or "FAIL", with its time; the last line is "N passed, N failed".
# GPU_SOAK_SECONDS (default 30) is the soak's length, GPU_PERF_MAX (default 256M) the
# bandwidth tools' largest size, BRAID_NV_CLIENT a build of tests/abi/nv_device_client.c
# against NVIDIA's nccl.h and libnccl.so.2 to run on braid.
# Exit: 0 all passed, 1 a failure, 77 no GPU (no nvidia-smi, or it lists none).
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd) || exit 99
out=${2:-$build/gpu-check}
mkdir -p "$out"
if ! nvidia-smi -L >"$out/gpus.txt" 2>&1 || ! grep -q '^GPU ' "$out/gpus.txt"; then
    echo "gpu_check.sh: no GPU here (nvidia-smi -L: $(head -c 200 "$out/gpus.txt"))"
    exit 77
fi
cat "$out/gpus.txt"

if [ -n "${BRAID_GPU_DEPS:-}" ]; then
    have=$(ldconfig -p)
    mkdir -p "$out/lib"
    for f in "$BRAID_GPU_DEPS"/*.so*; do
        grep -q " $(basename "$f") " <<<"$have" || ln -sf "$f" "$out/lib/"
    done
    export LD_LIBRARY_PATH=$out/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export BRAID_TIMEOUT=${BRAID_TIMEOUT:-60} BRAID_BOOTSTRAP_TIMEOUT=${BRAID_BOOTSTRAP_TIMEOUT:-30}
pass=0 fail=0
step() {   # name, seconds, command...: runs it with a time limit, its output in a log
    local name=$1 limit=$2 t0=$SECONDS rc
    shift 2
    timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    if [ $rc = 0 ]; then
        pass=$((pass + 1))
        echo "ok    $name ($((SECONDS - t0)) s)"
    else
        fail=$((fail + 1))
        [ $rc = 124 ] && rc="$rc: over $limit s"
        echo "FAIL  $name (exit $rc, $((SECONDS - t0)) s): $*"
        tail -n 15 "$out/$name.log" | sed 's/^/      /'
    fi
}
run=$build/braidrun
check=$build/tests/integration/coll_check
sections=reduce,move,p2p,group,v

# first what says most if the run is cut short: correctness on 2 processes, bandwidth, torch
step info 30 "$build/braid-info"
grep -E '^ *(kernel image|device)' "$out/info.log" | head -n 12
step device_view 60 env BRAID_TEST_DRIVER=system "$build/tests/unit/test_device_view"
step coll_check_p2 120 "$check" -d -q -w 110 -o $sections -p 2
perf() {   # ranks, collective
    step "$2_perf_$1" 90 "$run" -n "$1" "$build/$2_perf" -b 8 -e "${GPU_PERF_MAX:-256M}" -f 8 \
        -n 20 -w 5 -c 1
}
perf 2 all_reduce
grep -hE '^ +[0-9]+ ' "$out"/all_reduce_perf_2.log
torch_nccl() {   # ranks: PyTorch's NCCL backend; its wheel's RPATH beats LD_LIBRARY_PATH
    step "torch_nccl_$1" 150 env LD_PRELOAD="$build/.libs/braid/libnccl.so.2" \
        python3 -m torch.distributed.run --standalone --nproc_per_node="$1" \
        "$src/tests/integration/torch_nccl.py"
    grep -h '^torch_nccl: ' "$out/torch_nccl_$1.log" | grep -v ' passed, ' | head -n 8
}
has_torch=0
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && has_torch=1
[ $has_torch = 1 ] && torch_nccl 2

step device_fault 60 "$build/tests/fault/device_fault"
for n in 1 4; do
    step "coll_check_p$n" 120 "$check" -d -q -w 110 -o $sections -p $n
done
step coll_check_t4 100 "$check" -d -q -w 90 -o $sections -t 4
step coll_check_T3 100 "$check" -d -q -w 90 -o $sections -T 3
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
if [ -x "${BRAID_NV_CLIENT:-}" ]; then
    step nv_device_client 60 env LD_LIBRARY_PATH="$build/.libs/braid:${LD_LIBRARY_PATH:-}" \
        "$BRAID_NV_CLIENT"
fi
if [ $has_torch = 1 ]; then
    torch_nccl 4
else
    echo "skip  torch_nccl: python3 has no torch with CUDA"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
