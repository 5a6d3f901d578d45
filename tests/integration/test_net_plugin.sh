#!/bin/sh
# Integration test of external NCCL net plugins (NCCL_NET_PLUGIN), with the test suite's
# own plugin, tests/plugin/libnccl-net-braidtest.so (TCP; exports ncclNetPlugin_v8..v10).
#
#     tests/integration/test_net_plugin.sh [BUILD_DIR]     (or BRAID_BUILD_DIR=BUILD_DIR)
#
# Every job is coll_check -q as 4 ranks on 2 "hosts" of this machine (NCCL_HOSTID hA for
# ranks 0 and 1, hB for 2 and 3), so that ranks 0,1 reach 2,3 through the network provider:
#   - the plugin by path, and by name (libnccl-net-NAME.so through LD_LIBRARY_PATH, with
#     NCCL_NET naming it): every rank passes, and the plugin's own counts (BRAIDTEST_LOG)
#     show that it carried the messages and that braid called connect again when told to;
#   - the same plugin built here without v10, and without v9 and v10 (with the compiler of
#     the build, $BRAID_CC): braid takes the newest table there is;
#   - bad plugins: a missing file, an unknown name, a library without ncclNetPlugin_vN, one
#     with only ncclNetPlugin_v7, a plugin whose init fails, a message longer than the
#     receive posted for it: every rank fails, naming the cause.
# Exit status: 0 all passed, 1 a check failed, 99 coll_check or the plugin is not built.

BUILD_DIR=${1:-${BRAID_BUILD_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}}
SRC_DIR=${BRAID_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
CHECK=$BUILD_DIR/tests/integration/coll_check
PLUGIN=$BUILD_DIR/tests/plugin/.libs/libnccl-net-braidtest.so
for f in "$CHECK" "$PLUGIN"; do
    if [ ! -e "$f" ]; then
        echo "test_net_plugin.sh: $f is not built (make check builds it)" >&2
        exit 99
    fi
done
# Never hang a CI job: every command gets a wall-clock limit.
T="timeout 120"
. "$SRC_DIR/tests/integration/checks.sh"

PIDS=
cleanup() {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

unset NCCL_NET BRAID_NET NCCL_NET_PLUGIN BRAID_NET_PLUGIN NCCL_DEBUG BRAID_DEBUG \
    NCCL_DEBUG_SUBSYS BRAID_DEBUG_SUBSYS NCCL_DEBUG_FILE BRAID_DEBUG_FILE \
    BRAIDTEST_FAIL_INIT BRAIDTEST_RECV_CAP BRAIDTEST_ADDR
export BRAID_BOOTSTRAP_TIMEOUT=30 BRAIDTEST_LOG="$TMP/braidtest.log"

# job VAR=VALUE...: the 4 ranks with these settings; rank r's output in $TMP/r<r>.log, the
# exit statuses in STATUS (" s0 s1 s2 s3").
job() {
    rand=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
    port=$((20000 + rand % 12000))
    rm -f "$TMP"/r*.log "$BRAIDTEST_LOG"
    PIDS=
    for r in 0 1 2 3; do
        if [ "$r" -lt 2 ]; then h=hA; else h=hB; fi
        env RANK=$r WORLD_SIZE=4 NCCL_HOSTID=$h NCCL_COMM_ID=127.0.0.1:$port "$@" \
            timeout -s KILL 120 "$CHECK" -q -w 100 >"$TMP/r$r.log" 2>&1 &
        PIDS="$PIDS $!"
    done
    STATUS=
    for p in $PIDS; do
        wait "$p"
        STATUS="$STATUS $?"
    done
    PIDS=
}

job_fail() {
    echo "FAIL: $1 (exit statuses:$STATUS)"
    for r in 0 1 2 3; do
        echo "--- rank $r:"
        tail -n 6 "$TMP/r$r.log"
    done
    [ -s "$BRAIDTEST_LOG" ] && { echo "--- BRAIDTEST_LOG:"; cat "$BRAIDTEST_LOG"; }
    FAILS=$((FAILS + 1))
}

# all_pass NAME VERSION: every rank passed, and each one's plugin (table vVERSION) sent and
# received messages, and was asked to connect again after its "not yet".
all_pass() {
    if [ "$STATUS" != " 0 0 0 0" ]; then
        job_fail "$1: not every rank passed"
        return 1
    fi
    pass "$1: coll_check passed on 4 ranks, 2 hosts"
    got=$(awk -v v="v$2" '$1 == "braidtest" && $2 == v && $4 > 0 && $6 > 0 && $8 > 0 { n++ }
                          END { print n + 0 }' "$BRAIDTEST_LOG" 2>/dev/null)
    if [ "$got" = 4 ]; then
        pass "$1: the plugin's ncclNetPlugin_v$2 carried the messages of every rank ($(awk \
             '{ s += $4 } END { print s }' "$BRAIDTEST_LOG") isends)"
    else
        job_fail "$1: BRAIDTEST_LOG has $got of 4 lines \"braidtest v$2 isend >0 irecv >0 connect_again >0\""
    fi
}

# all_fail NAME PATTERN: every rank failed (not killed by its time limit), and the output
# of each names the cause (an extended regex).
all_fail() {
    for s in $STATUS; do
        if [ "$s" = 0 ] || [ "$s" = 124 ] || [ "$s" = 137 ]; then
            job_fail "$1: a rank exited with $s, want a failure of its init"
            return 1
        fi
    done
    for r in 0 1 2 3; do
        if ! grep -Eq -- "$2" "$TMP/r$r.log"; then
            job_fail "$1: rank $r's output does not match /$2/"
            return 1
        fi
    done
    pass "$1: every rank fails: $(grep -Eo -- "$2" "$TMP/r0.log" | head -n 1)"
}

# ---- a working plugin ----

job NCCL_NET_PLUGIN="$PLUGIN"
all_pass "NCCL_NET_PLUGIN=path" 10

PLUGIN_DIR=$(dirname "$PLUGIN")
job NCCL_NET_PLUGIN=braidtest NCCL_NET=BRAIDTEST \
    LD_LIBRARY_PATH="$PLUGIN_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
if all_pass "NCCL_NET_PLUGIN=braidtest (libnccl-net-braidtest.so), NCCL_NET=BRAIDTEST" 10; then
    expect_in "braid says which plugin it loaded" "$TMP/r0.log" \
        "net: loaded the net plugin BraidTest \(ncclNetPlugin_v10\) from libnccl-net-braidtest\.so"
    expect_in "the plugin's log lines reach braid's log" "$TMP/r0.log" \
        "NCCL INFO net plugin BraidTest: ncclNetPlugin_v10 initialised"
    expect_in "the ranks of hA reach hB over the plugin" "$TMP/r0.log" \
        "connected to the ranks of other hosts over BraidTest \(BraidTest plugin v10\)"
fi

# "none" asks for no plugin, as in NCCL: the built-in provider named by NCCL_NET carries it.
job NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET
if [ "$STATUS" != " 0 0 0 0" ]; then
    job_fail "NCCL_NET_PLUGIN=none: not every rank passed"
elif grep -q "loaded the net plugin" "$TMP"/r*.log; then
    job_fail "NCCL_NET_PLUGIN=none: a plugin was loaded"
else
    expect_in "NCCL_NET_PLUGIN=none: no plugin, the socket provider" "$TMP/r0.log" \
        "connected to the ranks of other hosts over Socket"
fi

# ---- older tables: the plugin built without its newer ones ----

# build_plugin OUT CFLAGS...: the test plugin, or a C file in $TMP, as make builds the
# plugin (nccl_net.h includes core/nccl_ext.h from src/, and nccl.h)
build_plugin() {
    out=$1
    shift
    build_cc -std=c11 -shared -fPIC -fvisibility=hidden -I"$SRC_DIR" -I"$SRC_DIR/src" \
        -I"${BRAID_INCLUDE:-$SRC_DIR/include}" -o "$out" "$@"
}
for v in 9 8; do
    if build_plugin "$TMP/libnccl-net-bt$v.so" -DBRAIDTEST_MAX_VERSION=$v \
        "$SRC_DIR/tests/plugin/net_plugin_test.c"; then
        job NCCL_NET_PLUGIN="$TMP/libnccl-net-bt$v.so"
        all_pass "a plugin whose newest table is ncclNetPlugin_v$v" $v
    else
        fail "the test plugin does not build without its newer tables (v$v)"
    fi
done

# ---- bad plugins ----

job NCCL_NET_PLUGIN=/nonexistent.so
all_fail "a missing plugin file" \
    "last error: net: cannot load the net plugin NCCL_NET_PLUGIN=/nonexistent\.so.*/nonexistent\.so"

job NCCL_NET_PLUGIN=nosuchname LD_LIBRARY_PATH="$PLUGIN_DIR"
all_fail "a plugin name that resolves to nothing" \
    "last error: net: cannot load the net plugin NCCL_NET_PLUGIN=nosuchname \(libnccl-net-nosuchname\.so\)"

# braid's own library: a shared object, but no plugin
job NCCL_NET_PLUGIN="$BUILD_DIR/.libs/libbraid.so"
all_fail "a library without ncclNetPlugin_vN" \
    "exports none of ncclNetPlugin_v10, ncclNetPlugin_v9, ncclNetPlugin_v8: braid accepts v8 to v10, v7 and older are not supported"

printf 'void *ncclNetPlugin_v7[32] __attribute__((visibility("default")));\n' >"$TMP/v7.c"
if build_plugin "$TMP/libnccl-net-v7.so" "$TMP/v7.c"; then
    job NCCL_NET_PLUGIN="$TMP/libnccl-net-v7.so"
    all_fail "a v7 plugin" "ncclNetPlugin_v8; it has ncclNetPlugin_v7: braid accepts v8 to v10"
else
    fail "a library with only ncclNetPlugin_v7 does not build"
fi

job NCCL_NET_PLUGIN="$PLUGIN" BRAIDTEST_FAIL_INIT=1 NCCL_DEBUG=WARN
all_fail "a plugin whose init fails" \
    "last error: .*net plugin BraidTest: init failed: a system call failed \(ncclSystemError\)"
expect_in "the plugin's reason reaches braid's log" "$TMP/r0.log" \
    "NCCL WARN net plugin BraidTest: init fails, as BRAIDTEST_FAIL_INIT=1 asks"

# The handshake (a few hundred bytes) meets receives of 16: the receiving plugin fails the
# connection, which braid drops as it would a stray's; the ranks then time out naming the
# ranks they miss and the plugin's error (or fail first because a peer has left).
job NCCL_NET_PLUGIN="$PLUGIN" BRAIDTEST_RECV_CAP=16 NCCL_DEBUG=WARN BRAID_BOOTSTRAP_TIMEOUT=5
all_fail "a message longer than its receive" "last error: .*(BraidTest|remote|rank)"
if grep -Eq "net plugin BraidTest: a message of [0-9]+ bytes is longer than the receive posted for it \(16 bytes\)" "$TMP"/r*.log &&
   grep -Eq "last error: .*net plugin BraidTest: test failed: the remote side failed or went away \(ncclRemoteError\)" "$TMP"/r*.log; then
    pass "a message longer than its receive: the plugin's ncclRemoteError, named, with its log line"
else
    job_fail "a message longer than its receive: no rank names the plugin's ncclRemoteError and its log line"
fi

checks_end
