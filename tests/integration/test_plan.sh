#!/bin/sh
# Integration test of bucket plans (braid.h's braidPlan*, docs/BUCKETS.md):
#   - plan_check on 1, 2, 3 and 4 processes: DDP with fp32, bf16 and fp16 wires, avg with
#     factors into accumulating outs, bucket order, flush, rebuild, FSDP with even and
#     uneven shards, HSDP (even rank counts), bad input and plans that differ between ranks;
#   - mlp_demo: a small MLP trained data-parallel on 4 ranks with DDP (fp32 and bf16 wires)
#     and FSDP plans, its weights against a single-process reference;
#   - bucket_perf, briefly: fused and unfused paths agree;
#   - device buffers on braid's emulated CUDA driver, in its strict mode: plan_check -d
#     (every stream operation delayed 200 us in one run, so a plan that reads a tensor
#     before its stream wrote it fails) and mlp_demo --device; then plan_check -d and
#     mlp_demo --device through braid's HIP backend on the emulated HIP runtime.
#
#     tests/integration/test_plan.sh BUILD_DIR     (or BRAID_BUILD_DIR=BUILD_DIR)

BUILD_DIR=${1:-${BRAID_BUILD_DIR:-}}
if [ -z "$BUILD_DIR" ]; then
    echo "usage: $0 BUILD_DIR (or set BRAID_BUILD_DIR)" >&2
    exit 1
fi
SRC_DIR=${BRAID_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
CHECK=$BUILD_DIR/tests/integration/plan_check
BRAIDRUN=$BUILD_DIR/braidrun
for p in "$CHECK" "$BRAIDRUN" "$BUILD_DIR/mlp_demo" "$BUILD_DIR/bucket_perf"; do
    [ -x "$p" ] || { echo "test_plan.sh: $p is not built" >&2; exit 99; }
done
T="timeout 240"
. "$SRC_DIR/tests/integration/checks.sh"
unset NCCL_ALGO NCCL_DEBUG NCCL_DEBUG_SUBSYS NCCL_DEBUG_FILE
export BRAID_BOOTSTRAP_TIMEOUT=30 BRAID_TIMEOUT=60

for n in 1 2 3 4; do
    if run "plan_check on $n ranks" 0 "$BRAIDRUN" -n $n "$CHECK"; then
        expect_in "plan_check on $n ranks: every rank passed" "$TMP/out" \
            "^plan_check: rank $((n - 1)) of $n: [0-9]+ passed, 0 failed"
    fi
done

# mlp_demo on 4 ranks: every step's averages within the wire's rounding bound and every
# final weight within its tolerance of the single-process reference (its last line says OK)
for args in "--wire fp32" "--wire bf16" "--wire bf16 --rebuild" "--pattern fsdp" \
    "--pattern fsdp --wire bf16"; do
    # shellcheck disable=SC2086   # $args is several flags
    if run "mlp_demo $args" 0 "$BRAIDRUN" -n 4 "$BUILD_DIR/mlp_demo" $args; then
        expect_in "mlp_demo $args: weights within tolerance" "$TMP/out" \
            '^mlp_demo: (ddp|fsdp) wire=(fp32|bf16) ranks=4 steps=30 buckets=[0-9]+ max\|w-ref\|=[-+.e0-9]+ tol=[-+.e0-9]+ OK$'
    fi
done
run "mlp_demo bad flag" 2 "$BRAIDRUN" -n 2 "$BUILD_DIR/mlp_demo" --wire fp8 &&
    expect_in "mlp_demo bad flag: usage" "$TMP/err" "^usage: mlp_demo"
run "mlp_demo fsdp --rebuild" 2 "$BRAIDRUN" -n 2 "$BUILD_DIR/mlp_demo" --pattern fsdp --rebuild &&
    expect_in "mlp_demo fsdp --rebuild: refused" "$TMP/err" "rebuilds DDP plans only"

# bucket_perf, briefly (4 MiB, one timed iteration): fused and unfused results checked
for n in 2 4; do
    if run "bucket_perf on $n ranks" 0 "$BRAIDRUN" -n $n "$BUILD_DIR/bucket_perf" -s 4M -n 1 -w 0; then
        rows=$(grep -Ec '^  (ddp|fsdp) +(fp32|bf16) .* ok \(' "$TMP/out")
        if [ "$rows" -eq 4 ]; then pass "bucket_perf on $n ranks: 4 configurations ok"
        else fail "bucket_perf on $n ranks: $rows of 4 configurations ok"; fi
    fi
done

# Device buffers, on the emulated CUDA driver in its strict mode (as unforgiving as a real
# driver: test_device.sh)
EMU=$BUILD_DIR/emu/.libs
export BRAID_EMU_STRICT=1
if [ -e "$EMU/libcuda.so.1" ]; then
    for n in 2 4; do
        if run "plan_check -d on $n ranks" 0 env LD_LIBRARY_PATH="$EMU" "$BRAIDRUN" -n $n \
            "$CHECK" -d; then
            expect_in "plan_check -d on $n ranks: every rank passed" "$TMP/out" \
                "^plan_check: rank $((n - 1)) of $n: [0-9]+ passed, 0 failed"
        fi
    done
    if run "plan_check -d ddp, stream operations delayed" 0 env LD_LIBRARY_PATH="$EMU" \
        BRAID_EMU_DELAY_US=200 "$BRAIDRUN" -n 2 "$CHECK" -d ddp; then
        expect_in "plan_check -d delayed: every rank passed" "$TMP/out" \
            "^plan_check: rank 1 of 2: [0-9]+ passed, 0 failed"
    fi
    for args in "--wire bf16" "--pattern fsdp --wire bf16"; do
        # shellcheck disable=SC2086   # $args is several flags
        if run "mlp_demo --device $args" 0 env LD_LIBRARY_PATH="$EMU" "$BRAIDRUN" -n 4 \
            "$BUILD_DIR/mlp_demo" --device $args; then
            expect_in "mlp_demo --device $args: weights within tolerance" "$TMP/out" \
                '^mlp_demo: (ddp|fsdp) wire=bf16 ranks=4 steps=30 buckets=[0-9]+ max\|w-ref\|=[-+.e0-9]+ tol=[-+.e0-9]+ OK$'
        fi
    done
else
    skip "device buffers: $EMU/libcuda.so.1 (the emulated driver) is not built"
fi

# The same through braid's HIP backend, on the emulated HIP runtime (test_device_hip.sh);
# the plans' buffers made with HIP (BRAID_TEST_RUNTIME=hip), mlp_demo's asking for it
HIPEMU=$BUILD_DIR/emu/rocm6/.libs
if [ ! -e "$BUILD_DIR/kernels/gpu/kernels.hipfb" ]; then
    skip "device buffers through HIP: braid was built without hipcc (no HIP code object)"
else
    if run "plan_check -d on 2 ranks, HIP" 0 env LD_LIBRARY_PATH="$HIPEMU" \
        BRAID_TEST_RUNTIME=hip "$BRAIDRUN" -n 2 "$CHECK" -d; then
        expect_in "plan_check -d on 2 ranks, HIP: every rank passed" "$TMP/out" \
            "^plan_check: rank 1 of 2: [0-9]+ passed, 0 failed"
    fi
    if run "mlp_demo --device --pattern fsdp --wire bf16, HIP" 0 env LD_LIBRARY_PATH="$HIPEMU" \
        BRAID_DEVICE=hip "$BRAIDRUN" -n 4 "$BUILD_DIR/mlp_demo" --device --pattern fsdp \
        --wire bf16; then
        expect_in "mlp_demo --device on HIP: weights within tolerance" "$TMP/out" \
            '^mlp_demo: fsdp wire=bf16 ranks=4 steps=30 buckets=[0-9]+ max\|w-ref\|=[-+.e0-9]+ tol=[-+.e0-9]+ OK$'
    fi
fi

checks_end
