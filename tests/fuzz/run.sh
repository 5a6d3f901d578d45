#!/bin/sh
# Build the libFuzzer harnesses (tests/fuzz/fuzz.mk) and run each: first its regression
# inputs (tests/fuzz/regress/HARNESS/, each a crash found once, replayed as is), then
# SECONDS_EACH seconds of fuzzing from its corpus (tests/fuzz/corpus/HARNESS/; new entries
# go to a temporary directory, the repository is not written). Fails when a harness finds a
# crash, a leak or a timeout; prints "fuzz: HARNESS N runs, cov X, ok" per harness.
#
#   tests/fuzz/run.sh [SECONDS_EACH]        (default 10)
#
# FUZZ_OUT: the build directory (default build-fuzz in the checkout; kept, so a second run
# rebuilds only what changed); FUZZ_HARNESSES: the ones to run (default: all). A crashing
# input is kept in FUZZ_OUT/artifacts/ (tests/fuzz/README says how to replay it).
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-10}
out=${FUZZ_OUT:-$src/build-fuzz}
harnesses=${FUZZ_HARNESSES:-"bootstrap net_hello usched tune params ifname"}
unset NCCL_DEBUG BRAID_DEBUG NCCL_DEBUG_FILE BRAID_DEBUG_FILE

if ! command -v clang >/dev/null 2>&1; then
    echo "fuzz: clang is not installed (scripts/deps.sh installs it)" >&2
    exit 1
fi
if ! make -s -C "$src" -f tests/fuzz/fuzz.mk SRC="$src" OUT="$out" -j"${FUZZ_JOBS:-2}"; then
    echo "fuzz: the fuzz build failed" >&2
    exit 1
fi

set -- $harnesses
echo "fuzz: $# harnesses: $harnesses"   # scripts/test.sh checks that each of them ran
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out/artifacts"
pass=0 fail=0
for h in $harnesses; do
    exe=$out/fuzz_$h
    log=$tmp/$h.log
    regress=$(find "$src/tests/fuzz/regress/$h" -type f 2>/dev/null | sort)
    if [ -n "$regress" ] && ! "$exe" -rss_limit_mb=2048 -timeout=10 $regress >"$log" 2>&1; then
        echo "fuzz: $h FAILED on a regression input (tests/fuzz/regress/$h):"
        tail -n 40 "$log"
        fail=$((fail + 1))
        continue
    fi
    mkdir -p "$tmp/corpus-$h"
    if "$exe" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$out/artifacts/$h-" "$tmp/corpus-$h" "$src/tests/fuzz/corpus/$h" \
        >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        cov=$(sed -n 's/^#[0-9]*[[:space:]]*DONE[[:space:]]*cov: \([0-9]*\).*/\1/p' "$log")
        echo "fuzz: $h ${runs:-?} runs, cov ${cov:-?}, ok"
        pass=$((pass + 1))
    else
        echo "fuzz: $h FAILED (the input is in $out/artifacts/$h-*):"
        tail -n 60 "$log"
        fail=$((fail + 1))
    fi
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
