#!/bin/sh
# Integration test of user schedules (docs/SCHEDULES.md) with usched_run:
#   - tests/integration/schedules/ring4.sched, a ring all-reduce for 4 ranks: through
#     mscclLoadAlgo/mscclRunAlgo on 4 processes, and through BRAID_SCHEDULES and NCCL_ALGO
#     with ncclAllReduce (the tuning log shows it ran), every result exact, in and out of
#     place; a count it cannot cut and an unknown handle are refused;
#   - files that must be rejected at load with the line and the reason: syntax, a peer out
#     of range, a region outside its buffer, a send without its receive, sizes that differ,
#     a deadlock, a wrong result, MSCCL's XML, another version, a taken name.
#
#     tests/integration/test_usched.sh BUILD_DIR     (or BRAID_BUILD_DIR=BUILD_DIR)

BUILD_DIR=${1:-${BRAID_BUILD_DIR:-}}
if [ -z "$BUILD_DIR" ]; then
    echo "usage: $0 BUILD_DIR (or set BRAID_BUILD_DIR)" >&2
    exit 1
fi
SRC_DIR=${BRAID_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
RUN=$BUILD_DIR/tests/integration/usched_run
for d in "$BUILD_DIR/tools" "$BUILD_DIR"; do
    [ -x "$d/braidrun" ] && BRAIDRUN=$d/braidrun
done
[ -x "$RUN" ] && [ -n "${BRAIDRUN:-}" ] || { echo "test_usched.sh: usched_run or braidrun is not built" >&2; exit 99; }
T="timeout 120"
. "$SRC_DIR/tests/integration/checks.sh"
unset NCCL_ALGO BRAID_SCHEDULES NCCL_DEBUG NCCL_DEBUG_SUBSYS NCCL_DEBUG_FILE
export BRAID_BOOTSTRAP_TIMEOUT=20 BRAID_TIMEOUT=30
RING=$SRC_DIR/tests/integration/schedules/ring4.sched

# all_ok NAME: every rank printed ok lines and no FAIL
all_ok() {
    oks=$(grep -c "^ok rank" "$TMP/out")
    if [ "$oks" -ge "$2" ] && ! grep -q "^FAIL" "$TMP/out"; then pass "$1"; else fail "$1: $oks ok lines"; fi
}

if run "mscclRunAlgo, ring4 on 4 ranks" 0 "$BRAIDRUN" -n 4 "$RUN" msccl "$RING"; then
    all_ok "mscclRunAlgo: every count, in and out of place, exact" 48
fi
expect_in "a count it cannot cut refused" "$TMP/out" \
    "ok rank 0 count 6 refused: .*the schedule ring4 \(.*ring4\.sched: AllReduce on 4 ranks\) cannot run AllReduce of count 6 on 4 ranks in place: the count must be a multiple of its 4 chunks"
expect_in "an unknown handle refused" "$TMP/out" "bad handle refused: mscclRunAlgo: handle 10[0-9]: no such schedule"

rm -f "$TMP"/dbg.*
if run "NCCL_ALGO=allreduce:ring4 with BRAID_SCHEDULES" 0 env BRAID_SCHEDULES="$RING" \
    NCCL_ALGO=allreduce:ring4 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING \
    NCCL_DEBUG_FILE="$TMP/dbg.%p" "$BRAIDRUN" -n 4 "$RUN" nccl; then
    all_ok "ncclAllReduce on ring4: every count exact" 40
fi
cat "$TMP"/dbg.* >"$TMP/dbg" 2>/dev/null
expect_in "the load logged" "$TMP/dbg" \
    "schedule ring4: AllReduce on 4 ranks, 4 chunks, loaded from .*ring4\.sched \(proved by the simulator, in place too\)"
expect_in "the tuner ran it" "$TMP/dbg" "tuner: AllReduce of 4194320 bytes: ring4"
run "NCCL_ALGO naming a schedule that is not loaded" 1 env NCCL_ALGO=allreduce:ring4 \
    "$BRAIDRUN" -n 2 "$RUN" nccl
expect_in "unknown name" "$TMP/err" 'NCCL_ALGO="allreduce:ring4": unknown name "ring4"'

# bad FILE_TEXT PATTERN NAME: the file is rejected with a message matching PATTERN
bad() {
    printf '%s\n' "$1" >"$TMP/bad.sched"
    if run "$3" 1 "$RUN" load "$TMP/bad.sched"; then
        expect_in "$3: line and reason" "$TMP/out" "$2"
    fi
}
HDR='braid-schedule 1
name two
collective allreduce
ranks 2
chunks 1'
bad "$HDR
rank 0
  send 1 src in 0 sideways
rank 1
  recv 0 dst out 0" "bad\.sched, line 7: unknown word \"sideways\" in a step" "an unknown word"
bad "$HDR
rank 0
  send 2 src in 0
rank 1" "line 7: send needs a rank from 0 to 1, got \"2\"" "a peer out of range"
bad "$HDR
rank 0
  send 1 src in 1
rank 1" "line 7: chunks 1\.\.1 are outside in, which has 1 chunk" "a region outside its buffer"
bad "$HDR
rank 0
  send 1 src in 0
rank 1" "line 7: rank 0 sends to rank 1, which has no receive from rank 0 left for it" "a send without a receive"
bad "$HDR
chunks 2
rank 0
  send 1 src in 0..1
rank 1
  recv 0 dst out 0" "line 8: rank 0 sends 2 chunks to rank 1; its receive \(line 10\) takes 1" "sizes that differ"
bad "$HDR
rank 0
  recv 1 reduce src in 0 dst out 0
  send 1 src out 0
rank 1
  recv 0 reduce src in 0 dst out 0
  send 0 src out 0" "deadlock: no rank can move.*rank 0 at line 7.*rank 1 at line 10" "a deadlock"
bad "$HDR
rank 0
  send 1 src in 0
  recv 1 dst out 0
rank 1
  recv 0 dst out 0
  send 0 src in 0" "rank 0's output chunk 0 is not what AllReduce gives" "a wrong result"
bad '<algo name="x" nchunksperloop="1" nchannels="1" coll="allreduce">' \
    "line 1: not a braid schedule file: .*MSCCL's XML algorithms are not read" "MSCCL XML"
bad 'braid-schedule 2' 'line 1: format version "2": this braid reads version 1' "another version"
bad "braid-schedule 1
name tree
collective allreduce
ranks 1
chunks 1
rank 0" 'line 2: the name "tree" is taken' "a taken name"
bad "$HDR
rank 0" "ends after rank 0's section" "a missing rank section"
bad "braid-schedule 1
name headeronly" "line 2: no rank sections" "a header alone"
run "a missing file" 1 "$RUN" load "$TMP/nonexistent.sched"
expect_in "a missing file named" "$TMP/out" "schedule file .*nonexistent\.sched: cannot open it: No such file"
run "load, then unload twice" 0 "$RUN" load "$RING"

checks_end
