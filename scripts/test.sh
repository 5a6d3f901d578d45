#!/bin/sh
# Build braid and run the whole test suite: the normal build, then the tests again in an
# ASan+UBSan build, then the threaded tests in a ThreadSanitizer build, then the fuzz
# harnesses briefly (FUZZ_SECONDS each, default 8). Ends with the line
# "N passed, N failed, N skipped".
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
"$src/scripts/deps.sh" || exit 1
status=0
run_suite() {   # build dir, configure options... ($only: run only these tests)
    dir=$1
    shift
    # a reused build directory's summary is last run's: a build that fails now must not
    # be counted by it (no summary: the count below is a failure)
    rm -f "$dir/test-suite.log"
    "$src/scripts/build.sh" "$dir" "$@" || return 1
    if [ -n "${only:-}" ]; then
        make -C "$dir" -j"$(nproc)" check TESTS="$only" || return 1
    else
        make -C "$dir" -j"$(nproc)" check || return 1
    fi
}
run_suite "$src/build" || status=1
# HWLOC_COMPONENTS=-pci in the sanitizer builds: where hwloc's PCI plugin is installed
# (libhwloc-plugins, which Open MPI's packages pull in), its PCI names (libpciaccess reading
# pci.ids) take 5 s of every process's init under ASan and 30 s under TSan: the sanitizer
# stage took 42 minutes instead of 17. Without the plugin (scripts/deps.sh installs none)
# the setting changes nothing; the first build's tests keep hwloc's PCI view.
BRAID_TEST_QUICK=1 HWLOC_COMPONENTS=-pci run_suite "$src/build-asan" --enable-sanitizers ||
    status=1
# ThreadSanitizer: only the tests where threads share braid's state (ranks as threads, abort
# from another thread, the proxy thread and the emulated driver's stream workers), without
# the GPU compilers (the first build compiled the kernels). Any report fails its test
# (halt_on_error; tests/tsan.supp holds the suppressions).
only="tests/integration/test_threads.sh tests/fault/abort_thread tests/integration/test_device.sh
      tests/integration/test_plan.sh tests/device/emu_driver tests/unit/test_device_view" \
BRAID_TEST_QUICK=1 HWLOC_COMPONENTS=-pci TSAN_OPTIONS=halt_on_error=1 \
    run_suite "$src/build-tsan" --enable-tsan --without-cuda --without-rocm || status=1
pass=0 fail=0 skip=0
for log in "$src"/build/test-suite.log "$src"/build-asan/test-suite.log \
           "$src"/build-tsan/test-suite.log; do
    [ -f "$log" ] || { fail=$((fail + 1)); continue; }
    p=$(sed -n 's/^# PASS: *//p' "$log"); f=$(sed -n 's/^# FAIL: *//p' "$log")
    x=$(sed -n 's/^# XPASS: *//p' "$log"); e=$(sed -n 's/^# ERROR: *//p' "$log")
    s=$(sed -n 's/^# SKIP: *//p' "$log")
    pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0} + ${x:-0} + ${e:-0})); skip=$((skip + ${s:-0}))
    # automake's summary holds the logs of the failing tests: show them where CI shows output
    if [ "${f:-0}${x:-0}${e:-0}" != 000 ]; then
        echo "---- the failing tests' logs, from $log (last 200 lines):"
        tail -n 200 "$log"
    fi
done
# The fuzz harnesses, briefly (about 90 s with their build): each counts as one test. Every
# harness must have run and passed, and the runner must say so by its status.
fuzz_log=$src/build-fuzz/run.log
mkdir -p "$src/build-fuzz"
"$src/tests/fuzz/run.sh" "${FUZZ_SECONDS:-8}" >"$fuzz_log" 2>&1
fuzz_rc=$?
fuzz_want=$(sed -n 's/^fuzz: \([0-9]*\) harnesses:.*/\1/p' "$fuzz_log")
fuzz_want=${fuzz_want:-1}     # it stopped before it said: at least one is missing
grep '^fuzz: ' "$fuzz_log"
fp=$(grep -c '^fuzz: .* ok$' "$fuzz_log"); ff=$(grep -c '^fuzz: .* FAILED' "$fuzz_log")
if [ "$fp" -ne "$fuzz_want" ] || [ "$fuzz_rc" -ne 0 ]; then
    # a harness that did not run, or a failure only the status tells (the build): one more
    echo "fuzz: $fp of $fuzz_want harnesses passed, the runner exited $fuzz_rc"
    [ "$ff" -eq 0 ] && ff=1
    [ $((fp + ff)) -lt "$fuzz_want" ] && ff=$((fuzz_want - fp))
fi
pass=$((pass + fp)); fail=$((fail + ff))
[ "$ff" -eq 0 ] || tail -n 200 "$fuzz_log"
[ "$fail" -eq 0 ] || status=1
echo "$pass passed, $fail failed, $skip skipped"
exit $status
