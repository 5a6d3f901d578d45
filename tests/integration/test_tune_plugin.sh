#!/bin/sh
# shellcheck disable=SC2016   # commands for the ranks' shells are single-quoted on purpose
# Integration test of NCCL_TUNER_PLUGIN with the test suite's tuner plugin
# (tests/plugin/libnccl-tuner-braidtest.so, ncclTunerPlugin_v5, and its v4 build), over 4
# real processes of this machine:
#   - by path and by name: the plugin's init sees the layout, every call reaches its
#     getCollInfo with braid's costs in the RING and TREE rows, the algorithm it picks runs
#     (braid's log says so), and every result is right (#wrong 0);
#   - a plugin that changes nothing, that fails getCollInfo, or that picks an algorithm
#     braid lacks: braid's own choice runs, and the log says why;
#   - errors, on every rank at creation: a missing library, one without a v4/v5 table, a
#     v3 plugin, a failing init, the setting differing between ranks; and a plugin that
#     answers differently on different ranks: the call fails naming both algorithms.
#
#     tests/integration/test_tune_plugin.sh BUILD_DIR     (or BRAID_BUILD_DIR=BUILD_DIR)

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
    { echo "test_tune_plugin.sh: braidrun or all_reduce_perf is not built in $BUILD_DIR" >&2; exit 99; }
PLUGIN_DIR=$BUILD_DIR/tests/plugin/.libs
PLUGIN=$PLUGIN_DIR/libnccl-tuner-braidtest.so
for f in "$PLUGIN" "$PLUGIN_DIR/libnccl-tuner-braidtest4.so"; do
    [ -e "$f" ] || { echo "test_tune_plugin.sh: $f is not built (make check builds it)" >&2; exit 99; }
done
T="timeout 120"
. "$SRC_DIR/tests/integration/checks.sh"
unset NCCL_ALGO NCCL_PROTO NCCL_TUNER_PLUGIN BRAID_TUNER_PLUGIN NCCL_DEBUG BRAID_DEBUG \
    NCCL_DEBUG_SUBSYS BRAID_DEBUG_SUBSYS NCCL_DEBUG_FILE BRAID_DEBUG_FILE
export BRAID_BOOTSTRAP_TIMEOUT=20 BRAID_TIMEOUT=30

# tuned NAME TOOL ENV...: TOOL on 4 ranks, 8 B - 1 MiB, with the tuning log in $TMP/dbg;
# every row #wrong 0
tuned() {
    name=$1 tool=$2
    shift 2
    rm -f "$TMP"/dbg*
    if run "$name" 0 env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING \
        NCCL_DEBUG_FILE="$TMP/dbg.%p" "$@" "$TOOLS_DIR/braidrun" -n 4 \
        "$TOOLS_DIR/${tool}_perf" -b 8 -e 1M -f 32 -n 2 -w 1; then
        cat "$TMP"/dbg.* >"$TMP/dbg"
        rows=$(grep -cE '^ +[0-9]+ ' "$TMP/out")
        bad=$(awk '/^ +[0-9]+ / && ($9 != 0 || ($13 != 0 && $13 != "N/A"))' "$TMP/out" | wc -l)
        if [ "$rows" -ge 4 ] && [ "$bad" -eq 0 ]; then pass "$name"; else fail "$name: $rows rows, $bad wrong"; fi
    else
        : >"$TMP/dbg"
    fi
}

expect_not() {
    if grep -Eq -- "$3" "$2"; then fail "$1: a line matches /$3/"; else pass "$1"; fi
}

tuned "v5 by path, tree" all_reduce NCCL_TUNER_PLUGIN="$PLUGIN" BRAIDTEST_TUNER=tree
expect_in "v5 loaded" "$TMP/dbg" "tuner: loaded the tuner plugin BraidTest \(ncclTunerPlugin_v5\) from $PLUGIN"
expect_in "v5 init sees the layout" "$TMP/dbg" \
    "tuner plugin BraidTest: init: 4 ranks, 1 nodes, 1 domains of 4 to 4 ranks, mode tree"
expect_in "getCollInfo gets braid's ring and tree costs" "$TMP/dbg" \
    "tuner plugin BraidTest: getCollInfo: coll 4, 1048576 bytes, ring [0-9]+\.[0-9]+, tree [0-9]+\.[0-9]+"
expect_in "the plugin's tree runs" "$TMP/dbg" \
    "tuner: AllReduce of 8 bytes: tree, [0-9]+-byte slices, chosen by the tuner plugin BraidTest \(braid's model: [a-z]+\)"

tuned "v4 by name, ring" all_reduce NCCL_TUNER_PLUGIN=braidtest4 LD_LIBRARY_PATH="$PLUGIN_DIR" \
    BRAIDTEST_TUNER=ring
expect_in "v4 loaded by name" "$TMP/dbg" \
    "tuner: loaded the tuner plugin BraidTest4 \(ncclTunerPlugin_v4\) from libnccl-tuner-braidtest4\.so"
expect_in "v4 init" "$TMP/dbg" "tuner plugin BraidTest4: init: 4 ranks, 1 nodes, mode ring"
expect_in "the plugin's ring runs" "$TMP/dbg" \
    "tuner: AllReduce of 1048576 bytes: ring, [0-9]+-byte slices, chosen by the tuner plugin BraidTest4"

tuned "broadcast: NCCL's ring is braid's chain" broadcast NCCL_TUNER_PLUGIN="$PLUGIN" \
    BRAIDTEST_TUNER=ring
expect_in "chain for the plugin's RING" "$TMP/dbg" \
    "tuner: Broadcast of 1048576 bytes: chain, [0-9]+-byte slices, chosen by the tuner plugin BraidTest"

tuned "a plugin that changes nothing" all_gather NCCL_TUNER_PLUGIN="$PLUGIN" BRAIDTEST_TUNER=keep
expect_in "it is asked" "$TMP/dbg" "tuner plugin BraidTest: getCollInfo: coll 2, "
expect_not "braid's own choice runs" "$TMP/dbg" "chosen by the tuner plugin"

tuned "a plugin whose getCollInfo fails" all_reduce NCCL_TUNER_PLUGIN="$PLUGIN" \
    BRAIDTEST_TUNER=fail
expect_in "the failure logged, braid's choice runs" "$TMP/dbg" \
    "tuner plugin BraidTest: getCollInfo for AllReduce of 8 bytes failed: an internal error of the plugin \(ncclInternalError\); braid's own choice runs"

tuned "a plugin that picks NVLS" all_reduce NCCL_TUNER_PLUGIN="$PLUGIN" BRAIDTEST_TUNER=nvls
expect_in "the choice braid cannot run logged" "$TMP/dbg" \
    "tuner plugin BraidTest chose NVLS/SIMPLE for AllReduce of [0-9]+ bytes: braid has no such algorithm"
expect_not "braid's own choice runs (nvls)" "$TMP/dbg" "chosen by the tuner plugin"

tuned "NCCL_TUNER_PLUGIN=none" all_reduce NCCL_TUNER_PLUGIN=none
expect_not "no plugin loaded" "$TMP/dbg" "loaded the tuner plugin"

# errors: every rank fails, with a message saying why
run "a missing library" 1 env NCCL_TUNER_PLUGIN=/nonexistent.so "$TOOLS_DIR/braidrun" -n 2 \
    "$TOOLS_DIR/all_reduce_perf" -b 8 -e 8 -n 1 -w 0
expect_in "the library and dlopen's reason named" "$TMP/err" \
    "cannot load the tuner plugin NCCL_TUNER_PLUGIN=/nonexistent\.so \(/nonexistent\.so\): .*No such file"
run "a name that resolves to nothing" 1 env NCCL_TUNER_PLUGIN=nosuchname \
    "$TOOLS_DIR/braidrun" -n 2 "$TOOLS_DIR/all_reduce_perf" -b 8 -e 8 -n 1 -w 0
expect_in "the file name tried named" "$TMP/err" \
    "NCCL_TUNER_PLUGIN=nosuchname \(libnccl-tuner-nosuchname\.so\)"
run "a library without a tuner table" 1 env NCCL_TUNER_PLUGIN="$BUILD_DIR/.libs/libbraid.so" \
    "$TOOLS_DIR/braidrun" -n 2 "$TOOLS_DIR/all_reduce_perf" -b 8 -e 8 -n 1 -w 0
expect_in "no table named" "$TMP/err" \
    "exports neither ncclTunerPlugin_v5 nor ncclTunerPlugin_v4: braid accepts v4 and v5"
printf 'void *ncclTunerPlugin_v3[4] __attribute__((visibility("default")));\n' >"$TMP/v3.c"
if build_cc -shared -fPIC -o "$TMP/libnccl-tuner-v3.so" "$TMP/v3.c"; then
    run "a v3 plugin" 1 env NCCL_TUNER_PLUGIN="$TMP/libnccl-tuner-v3.so" \
        "$TOOLS_DIR/braidrun" -n 2 "$TOOLS_DIR/all_reduce_perf" -b 8 -e 8 -n 1 -w 0
    expect_in "v3 named as too old" "$TMP/err" "; it has ncclTunerPlugin_v3: braid accepts v4 and v5"
else
    fail "a library with only ncclTunerPlugin_v3 does not build"
fi
run "a plugin whose init fails" 1 env NCCL_TUNER_PLUGIN="$PLUGIN" BRAIDTEST_TUNER=initfail \
    "$TOOLS_DIR/braidrun" -n 2 "$TOOLS_DIR/all_reduce_perf" -b 8 -e 8 -n 1 -w 0
expect_in "init's failure named" "$TMP/err" \
    "tuner plugin BraidTest: init failed: invalid usage \(ncclInvalidUsage\)"
run "NCCL_TUNER_PLUGIN differs between ranks" 1 "$TOOLS_DIR/braidrun" -n 2 sh -c \
    '[ "$RANK" = 1 ] && export NCCL_TUNER_PLUGIN='"$PLUGIN"'; exec '"$TOOLS_DIR"'/all_reduce_perf -b 8 -e 8 -n 1 -w 0'
expect_in "the difference named" "$TMP/err" "NCCL_TUNER_PLUGIN differ between ranks: rank 1.*NCCL_TUNER_PLUGIN=\"/.*libnccl-tuner-braidtest.so\""
run "a plugin that answers differently per rank" 1 env NCCL_TUNER_PLUGIN="$PLUGIN" \
    BRAIDTEST_TUNER=byrank "$TOOLS_DIR/braidrun" -n 4 "$TOOLS_DIR/all_reduce_perf" -b 8 -e 8 -n 1 -w 0
expect_in "both algorithms named" "$TMP/err" \
    "mismatched algorithms: rank [0-3] runs AllReduce #[0-9]+ with (tree|ring) while rank [0-3] runs it with (tree|ring)"

checks_end
