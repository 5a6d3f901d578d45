#!/bin/sh
# Integration test of the launcher and the bandwidth tool: braidrun and all_reduce_perf.
#
#     tests/integration/test_tools.sh BUILD_DIR     (or BRAID_BUILD_DIR=BUILD_DIR)
#
# BUILD_DIR holds braidrun and all_reduce_perf (directly or in tools/). Exit status: 0 all
# checks passed, 1 a check failed, 77 (automake SKIP) the tools are not built.

BUILD_DIR=${1:-${BRAID_BUILD_DIR:-}}
if [ -z "$BUILD_DIR" ]; then
    echo "usage: $0 BUILD_DIR (or set BRAID_BUILD_DIR)" >&2
    exit 1
fi

find_tool() {
    for d in "$BUILD_DIR/tools" "$BUILD_DIR"; do
        if [ -x "$d/$1" ]; then
            echo "$d/$1"
            return 0
        fi
    done
    return 1
}

BRAIDRUN=$(find_tool braidrun) || { echo "SKIP: no braidrun in $BUILD_DIR"; exit 77; }
PERF=$(find_tool all_reduce_perf) || { echo "SKIP: no all_reduce_perf in $BUILD_DIR"; exit 77; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_tools.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
FAILS=0
# Never hang a CI job: every command gets a wall-clock limit.
T="timeout 300"

fail() {
    echo "FAIL: $1"
    for f in "$TMP/out" "$TMP/err"; do
        [ -s "$f" ] && { echo "--- $(basename "$f"):"; tail -n 30 "$f"; }
    done
    FAILS=$((FAILS + 1))
}

pass() {
    echo "ok: $1"
}

# run NAME WANT_STATUS CMD...: run CMD, keep stdout/stderr in $TMP/out, $TMP/err
run() {
    name=$1 want=$2
    shift 2
    $T "$@" >"$TMP/out" 2>"$TMP/err"
    got=$?
    if [ "$got" -ne "$want" ]; then
        fail "$name: exit status $got, want $want"
        return 1
    fi
    return 0
}

expect_in() {   # expect_in NAME FILE PATTERN
    if grep -Eq -- "$3" "$2"; then pass "$1"; else fail "$1: no line matches /$3/ in $(basename "$2")"; fi
}

# ---- braidrun ----

run "braidrun -h" 0 "$BRAIDRUN" -h && expect_in "braidrun -h prints usage" "$TMP/out" "^usage: braidrun"
run "braidrun bad flag" 2 "$BRAIDRUN" -x true && expect_in "braidrun bad flag: usage" "$TMP/err" "usage: braidrun"
run "braidrun without -n" 2 "$BRAIDRUN" true && pass "braidrun without -n exits 2"
run "braidrun without a command" 2 "$BRAIDRUN" -n 2 && pass "braidrun without a command exits 2"
run "braidrun -n 0" 2 "$BRAIDRUN" -n 0 true && pass "braidrun -n 0 exits 2"

if run "braidrun environment" 0 "$BRAIDRUN" -n 3 sh -c \
    'echo "env $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $NCCL_COMM_ID"'; then
    n=$(grep -Ec '^env [0-2] 3 [0-2] 3 127\.0\.0\.1:[0-9]+$' "$TMP/out")
    ids=$(sed -n 's/^env .* //p' "$TMP/out" | sort -u | wc -l)
    if [ "$n" -eq 3 ] && [ "$ids" -eq 1 ]; then pass "braidrun sets RANK, WORLD_SIZE, LOCAL_*, one NCCL_COMM_ID"
    else fail "braidrun environment: $n good lines, $ids distinct NCCL_COMM_ID"; fi
fi

# A failing rank: its status becomes braidrun's, it is named, the others are stopped.
if run "braidrun failing rank" 3 "$BRAIDRUN" -n 3 -k 1 sh -c \
    'if [ "$RANK" = 1 ]; then exit 3; fi; sleep 60'; then
    expect_in "braidrun names the failed rank" "$TMP/err" "rank 1 \(pid [0-9]+\) exited with status 3"
    expect_in "braidrun stops the others" "$TMP/err" "rank [02] \(pid [0-9]+\) still running .*SIGTERM"
fi
if run "braidrun killed rank" 137 "$BRAIDRUN" -n 2 -k 0 sh -c \
    'if [ "$RANK" = 0 ]; then kill -9 $$; fi; sleep 60'; then
    expect_in "braidrun names the killed rank" "$TMP/err" "rank 0 \(pid [0-9]+\) killed by signal 9"
fi
run "braidrun SIGTERM after failure" 5 env BRAIDRUN_KILL_AFTER=0 "$BRAIDRUN" -n 2 sh -c \
    'if [ "$RANK" = 1 ]; then exit 5; fi; sleep 60' && pass "BRAIDRUN_KILL_AFTER=0 stops the others at once"

# ---- all_reduce_perf ----

run "all_reduce_perf -h" 0 "$PERF" -h && expect_in "all_reduce_perf -h prints usage" "$TMP/out" "^usage: "
run "all_reduce_perf bad flag" 2 "$PERF" -q && expect_in "all_reduce_perf bad flag: usage" "$TMP/err" "^usage: "
run "all_reduce_perf bad value" 2 "$PERF" -d notatype && expect_in "all_reduce_perf bad value: usage" "$TMP/err" "^usage: "
run "all_reduce_perf -g 2" 2 "$PERF" -g 2 && pass "all_reduce_perf -g 2 exits 2"
run "all_reduce_perf --selftest" 0 "$PERF" --selftest && pass "all_reduce_perf data self-test"
run "multi-process without NCCL_COMM_ID" 2 env RANK=0 WORLD_SIZE=2 NCCL_COMM_ID= "$PERF" -b 8 -e 8 &&
    expect_in "all_reduce_perf asks for NCCL_COMM_ID" "$TMP/err" "NCCL_COMM_ID"

# check_table NAME: the header, 8 rows (8 B .. 1 KiB) with #wrong 0 twice, the footer.
check_table() {
    expect_in "$1: header" "$TMP/out" "^# Collective test starting: all_reduce_perf"
    expect_in "$1: column titles" "$TMP/out" "^#  +size +count +type +redop +root +time +algbw +busbw +#wrong"
    expect_in "$1: footer" "$TMP/out" "^# Avg bus bandwidth +: [0-9.e+-]+"
    expect_in "$1: no wrong values" "$TMP/out" "^# Out of bounds values : 0 OK"
    rows=$(grep -Ec '^ +[0-9]+ +[0-9]+ +float +sum +-1 ' "$TMP/out")
    bad=$(awk '!/^#/ && NF == 13 && ($9 != "0" || $13 != "0")' "$TMP/out" | wc -l)
    if [ "$rows" -eq 8 ] && [ "$bad" -eq 0 ]; then pass "$1: 8 rows, #wrong 0 in each"
    else fail "$1: $rows rows (want 8), $bad with #wrong other than 0"; fi
}

run "all_reduce_perf -t 2" 0 "$PERF" -t 2 -b 8 -e 1K -f 2 -J "$TMP/rows.jsonl" && check_table "all_reduce_perf -t 2"
lines=$(wc -l <"$TMP/rows.jsonl" 2>/dev/null || echo 0)
if [ "$lines" -eq 8 ] && grep -q '"out_of_place":{"time":' "$TMP/rows.jsonl"; then pass "-J writes one JSON object per row"
else fail "-J: $lines lines in the JSON Lines file, want 8"; fi

run "braidrun -n 2 all_reduce_perf" 0 "$BRAIDRUN" -n 2 "$PERF" -b 8 -e 1K -f 2 &&
    check_table "braidrun -n 2 all_reduce_perf"

run "all_reduce_perf every type and op" 0 "$PERF" -t 3 -b 64 -e 64 -d all -o all -n 1 -w 0 &&
    expect_in "every type and op, 3 ranks: no wrong values" "$TMP/out" "^# Out of bounds values : 0 OK"

if [ "$FAILS" -ne 0 ]; then
    echo "$FAILS check(s) failed"
    exit 1
fi
echo "all checks passed"
exit 0
