#!/bin/sh
# shellcheck disable=SC2016   # commands for the ranks' shells are single-quoted on purpose
# Integration test of the algorithms and the tuner over real processes: every all-reduce,
# all-gather, reduce-scatter, broadcast, reduce and all-to-all algorithm forced through
# NCCL_ALGO on 4 ranks of one host and on 2 "hosts" x 2 ranks (NCCL_HOSTID per rank, the
# Socket provider over loopback), results checked by the *_perf tools (#wrong 0); the
# tuner's own choice with calibration on and off, and its slice size; and the errors: an
# unknown name, NCCL_ALGO or BRAID_SLICE_SIZE differing between ranks, an algorithm that
# cannot run the call, an unknown protocol.
#
#     tests/integration/test_algo.sh BUILD_DIR     (or BRAID_BUILD_DIR=BUILD_DIR)

BUILD_DIR=${1:-${BRAID_BUILD_DIR:-}}
if [ -z "$BUILD_DIR" ]; then
    echo "usage: $0 BUILD_DIR (or set BRAID_BUILD_DIR)" >&2
    exit 1
fi
SRC_DIR=${BRAID_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
for d in "$BUILD_DIR/tools" "$BUILD_DIR"; do
    [ -x "$d/braidrun" ] && [ -x "$d/all_reduce_perf" ] && TOOLS_DIR=$d
done
[ -n "${TOOLS_DIR:-}" ] ||
    { echo "test_algo.sh: braidrun or all_reduce_perf is not built in $BUILD_DIR" >&2; exit 99; }
T="timeout 120"
. "$SRC_DIR/tests/integration/checks.sh"
export BRAID_BOOTSTRAP_TIMEOUT=20 BRAID_TIMEOUT=60

# perf_ok NAME LAYOUT TOOL ENV...: TOOL on 4 ranks (LAYOUT "1x4" or "2x2"), 8 B - 1 MiB;
# every row #wrong 0
perf_ok() {
    name=$1 layout=$2 tool=$3
    shift 3
    hostid='NCCL_HOSTID=one'
    [ "$layout" = 2x2 ] && hostid='NCCL_HOSTID=h$((RANK / 2)) NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo'
    if run "$name" 0 env "$@" "$TOOLS_DIR/braidrun" -n 4 sh -c \
        "$hostid exec $TOOLS_DIR/${tool}_perf -b 8 -e 1M -f 32 -n 2 -w 1"; then
        rows=$(grep -cE '^ +[0-9]+ ' "$TMP/out")
        bad=$(awk '/^ +[0-9]+ / && ($9 != 0 || ($13 != 0 && $13 != "N/A"))' "$TMP/out" | wc -l)
        if [ "$rows" -ge 4 ] && [ "$bad" -eq 0 ]; then pass "$name"; else fail "$name: $rows rows, $bad wrong"; fi
    fi
}

for layout in 1x4 2x2; do
    for a in ring oneshot tree rd rabenseifner hier; do
        [ $a = hier ] && [ $layout = 1x4 ] && continue
        perf_ok "all_reduce $a $layout" $layout all_reduce NCCL_ALGO=allreduce:$a
    done
    for a in ring rd bruck hier; do
        [ $a = hier ] && [ $layout = 1x4 ] && continue
        perf_ok "all_gather $a $layout" $layout all_gather NCCL_ALGO=allgather:$a
    done
    for a in ring rd hier; do
        [ $a = hier ] && [ $layout = 1x4 ] && continue
        perf_ok "reduce_scatter $a $layout" $layout reduce_scatter NCCL_ALGO=reducescatter:$a
    done
    for a in chain binomial; do
        perf_ok "broadcast $a $layout" $layout broadcast NCCL_ALGO=broadcast:$a
        perf_ok "reduce $a $layout" $layout reduce NCCL_ALGO=reduce:$a
    done
    for a in direct bruck; do
        perf_ok "alltoall $a $layout" $layout alltoall NCCL_ALGO=alltoall:$a
    done
    # the log goes to files: a line in the table's stream would break a row
    perf_ok "all_reduce tuner $layout" $layout all_reduce NCCL_DEBUG=INFO \
        NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE="$TMP/dbg.%p"
    cat "$TMP"/dbg.* >"$TMP/dbg" && rm -f "$TMP"/dbg.*
    expect_in "calibration logged ($layout)" "$TMP/dbg" "calibration in [0-9.]+ ms: alpha"
    perf_ok "all_reduce tuner, no calibration $layout" $layout all_reduce BRAID_CALIBRATE=0
done

# Ranks bound to a CPU each are not oversubscribed: they count the CPUs they may run on
# together (2 ranks on CPUs 0 and 1), where 3 ranks on those 2 CPUs are, and the cost model
# then charges 1.5 ranks per CPU.
if [ "$(nproc)" -lt 2 ] || ! command -v taskset >/dev/null; then
    skip "binding ranks needs 2 CPUs and taskset"
else
    for n in 2 3; do
        if run "$n ranks bound to CPUs 0-1" 0 env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT \
                NCCL_DEBUG_FILE="$TMP/dbg.%p" "$TOOLS_DIR/braidrun" -n $n sh -c \
                'exec taskset -c $((RANK % 2)) '"$TOOLS_DIR"'/all_reduce_perf -b 8 -e 8 -n 1 -w 0'; then
            cat "$TMP"/dbg.* >"$TMP/dbg" && rm -f "$TMP"/dbg.*
            want="waiting ranks spin first" share=1
            [ $n = 3 ] && want="oversubscribed, waiting ranks yield" share=1.5
            expect_in "$n bound ranks: $want" "$TMP/dbg" "$n ranks of the communicator on this machine, 2 CPUs for them: $want"
            expect_in "$n bound ranks: the model's ranks per CPU" "$TMP/dbg" \
                "calibration in .* KiB, $share ranks per CPU"
        fi
    done
fi

# The slice size: under the built-in model a 256 KiB chain broadcast on 4 ranks goes in
# 16 KiB slices (braid-info -l 4 says chain/16); a slice larger than a slot is capped.
perf_ok "broadcast, the tuner's slices" 1x4 broadcast NCCL_ALGO=broadcast:chain \
    BRAID_CALIBRATE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING NCCL_DEBUG_FILE="$TMP/dbg.%p"
cat "$TMP"/dbg.* >"$TMP/dbg" && rm -f "$TMP"/dbg.*
expect_in "slice chosen and logged" "$TMP/dbg" \
    "tuner: Broadcast of 262144 bytes: chain, 16384-byte slices"
# each size's broadcast runs several times (warm-up, iterations, in place): its choice is
# logged once per rank
n=$(grep -c "tuner: Broadcast of 262144 bytes" "$TMP/dbg")
if [ "$n" -eq 4 ]; then pass "a choice logged once"; else fail "a choice logged $n times on 4 ranks"; fi
perf_ok "slices larger than a slot" 1x4 all_reduce BRAID_SLICE_SIZE=1M NCCL_DEBUG=WARN
expect_in "slice capped, said" "$TMP/out" \
    "BRAID_SLICE_SIZE=1048576 is more than a slot \(BRAID_SHM_SLOT_SIZE=262144\): slices are 262144 bytes"

# errors: every rank fails at creation (or at the call), with a message saying why
run "unknown algorithm" 1 env NCCL_ALGO=ring,treee "$TOOLS_DIR/braidrun" -n 2 \
    "$TOOLS_DIR/all_reduce_perf" -b 8 -e 8 -n 1 -w 0
expect_in "unknown algorithm named, known listed" "$TMP/err" \
    'NCCL_ALGO="ring,treee": unknown name "treee" \(known: ring, oneshot, .*hier'
run "NCCL_ALGO differs between ranks" 1 "$TOOLS_DIR/braidrun" -n 2 sh -c \
    '[ "$RANK" = 1 ] && export NCCL_ALGO=^tree; exec '"$TOOLS_DIR"'/all_reduce_perf -b 8 -e 8 -n 1 -w 0'
expect_in "mismatch named" "$TMP/err" "NCCL_ALGO/NCCL_PROTO/BRAID_CALIBRATE/BRAID_SLICE_SIZE/NCCL_TUNER_PLUGIN differ between ranks: rank 1"
run "BRAID_SLICE_SIZE differs between ranks" 1 "$TOOLS_DIR/braidrun" -n 2 sh -c \
    '[ "$RANK" = 1 ] && export BRAID_SLICE_SIZE=8K; exec '"$TOOLS_DIR"'/all_reduce_perf -b 8 -e 8 -n 1 -w 0'
expect_in "slice mismatch named" "$TMP/err" "differ between ranks: rank 1.*BRAID_SLICE_SIZE=0"
run "hier on one host" 1 env NCCL_ALGO=allreduce:hier "$TOOLS_DIR/braidrun" -n 2 \
    "$TOOLS_DIR/all_reduce_perf" -b 8 -e 8 -n 1 -w 0
expect_in "no algorithm for the call" "$TMP/err" \
    'NCCL_ALGO="allreduce:hier" allows no algorithm that can run AllReduce of [0-9]+ bytes on this communicator \(2 ranks, 1 host\)'
run "NCCL_PROTO unknown" 1 env NCCL_PROTO=LL,Fast "$TOOLS_DIR/braidrun" -n 2 \
    "$TOOLS_DIR/all_reduce_perf" -b 8 -e 8 -n 1 -w 0
expect_in "protocol named" "$TMP/err" 'NCCL_PROTO="LL,Fast": unknown name "Fast" \(known: LL, LL128, Simple\)'

checks_end
