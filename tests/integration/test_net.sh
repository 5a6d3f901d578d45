#!/bin/bash
# Multi-host tests on one machine: network namespaces as hosts, joined by veth pairs to a
# bridge that lives in a namespace of its own, addresses in 10.77.0.0/24 only inside them,
# NCCL_HOSTID giving each namespace its own host identity (UCX_TLS=tcp keeps UCX on the
# network). For each provider (Socket, OFI, UCX) it runs coll_check (every collective, type
# and op, in and out of place, exact checks) over several layouts of ranks on hosts; with
# NCCL_NET unset, that every rank picks the default provider; then the fault tests: a
# host's ranks killed mid-collective, and a host's link taken down, must end in
# ncclRemoteError naming the lost ranks on the others, within seconds.
# The namespaces are removed on exit, also when a check fails or the script is killed.
#
# Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2: else it is skipped (77).
# Environment: BRAID_BUILD_DIR (set by make check), BRAID_TEST_QUICK=1 (fewer layouts),
# NET_PROVIDERS (default "Socket OFI UCX").

set -u
build=${BRAID_BUILD_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
check=$build/tests/integration/coll_check
perf=$build/all_reduce_perf
for p in "$check" "$perf"; do
    [ -x "$p" ] || { echo "test_net.sh: $p is not built" >&2; exit 99; }
done
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
    echo "test_net.sh: needs root and iproute2 (ip) for network namespaces: skipped"
    exit 77
fi

. "$(dirname "$0")/../../scripts/netns.sh"
tag=b$$
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_net.XXXXXX") || exit 99
cleanup() {
    netns_remove
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if ! netns_make "$tag" 4 2>"$TMP/ip.err"; then
    echo "test_net.sh: cannot create network namespaces here: $(head -n 1 "$TMP/ip.err"): skipped"
    exit 77
fi

export BRAID_TIMEOUT=60 BRAID_BOOTSTRAP_TIMEOUT=30 BRAID_NET_LOST_S=3 UCX_TLS=tcp
export NCCL_SOCKET_IFNAME==eth0
FAILS=0
fail() {
    echo "FAIL: $1"
    FAILS=$((FAILS + 1))
}

# start_job LAYOUT PROVIDER CMD...: one rank per entry of "ranks per host", in the host's
# namespace; pids in JOB_PIDS, rank r's output in $TMP/r<r>.log.
start_job() {
    local layout=$1 prov=$2
    shift 2
    local n=0 h=0 port=$((20000 + RANDOM % 20000)) r=0
    for k in $layout; do n=$((n + k)); done
    JOB_PIDS=()
    JOB_HOST=()
    for k in $layout; do
        for ((j = 0; j < k; j++)); do
            ip netns exec "$tag-h$h" env RANK=$r WORLD_SIZE=$n NCCL_HOSTID="host$h" \
                NCCL_COMM_ID="10.77.0.10:$port" NCCL_NET="$prov" \
                timeout -s KILL 240 "$@" >"$TMP/r$r.log" 2>&1 &
            JOB_PIDS+=($!)
            JOB_HOST+=($h)
            r=$((r + 1))
        done
        h=$((h + 1))
    done
}

# wait_job: 0 when every rank exited 0; the failed ranks in JOB_FAILED.
wait_job() {
    local r=0 st=0
    JOB_FAILED=()
    for pid in "${JOB_PIDS[@]}"; do
        if ! wait "$pid"; then
            JOB_FAILED+=($r)
            st=1
        fi
        r=$((r + 1))
    done
    return $st
}

show_logs() {
    for f in "$TMP"/r*.log; do
        echo "--- ${f##*/}:"
        tail -n 8 "$f"
    done
}

if [ "${BRAID_TEST_QUICK:-0}" = 1 ]; then
    layouts=("1 1" "2 1" "1 2 1")
else
    layouts=("1 1" "2 2" "3 1" "1 2 1" "1 1 1 1")
fi
providers=${NET_PROVIDERS:-Socket OFI UCX}
t_begin=$SECONDS

for prov in $providers; do
    for layout in "${layouts[@]}"; do
        rm -f "$TMP"/r*.log
        t0=$SECONDS
        start_job "$layout" "$prov" "$check" -q
        if wait_job; then
            echo "ok: $prov, ranks per host $layout: coll_check passed ($((SECONDS - t0)) s)"
        else
            fail "$prov, ranks per host $layout: ranks ${JOB_FAILED[*]} failed"
            show_logs
        fi
    done
done

# NCCL_NET unset: the first provider of UCX, OFI, Socket that is built (the raw tools are
# built exactly when UCX and OFI are), the same on every rank.
want=Socket
[ -x "$build/braid-ofi-raw" ] && want=OFI
[ -x "$build/braid-ucx-raw" ] && want=UCX
rm -f "$TMP"/r*.log
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET start_job "1 1" "" "$perf" -b 1M -e 1M -n 2 -w 1
if ! wait_job; then
    fail "NCCL_NET unset: ranks ${JOB_FAILED[*]} failed"
    show_logs
elif [ "$(grep -l "connected to the ranks of other hosts over $want " "$TMP"/r*.log |
          wc -l)" != 2 ]; then
    fail "NCCL_NET unset: the ranks did not both pick $want"
    show_logs
else
    echo "ok: NCCL_NET unset: both ranks use $want"
fi

# A long all-reduce loop on hosts 0 and 1 (K ranks each); `what` happens to host 1 after
# two seconds; host 0's ranks must all fail with ncclRemoteError within 20 s, and the first
# to notice must name one of host 1's ranks (the others may name that rank's failure, which
# they see first through shared memory).
fault() {
    local prov=$1 what=$2 k=$3
    rm -f "$TMP"/r*.log
    start_job "$k $k" "$prov" "$perf" -b 1M -e 1M -n 1000000 -w 1 -c 0
    sleep 2
    local t0=$SECONDS
    case $what in
    kill) ip netns pids "$tag-h1" | xargs -r kill -9 ;;
    linkdown) ip -n "$tag-h1" link set eth0 down ;;
    esac
    local ok=1 named=0 lost
    lost=$( [ "$k" = 2 ] && echo "[23]" || echo "1")
    for ((r = 0; r < k; r++)); do
        if wait "${JOB_PIDS[$r]}"; then
            fail "$prov, $what: rank $r exited 0"
            ok=0
        elif ! grep -Eq "ncclRemoteError|remote process exited" "$TMP/r$r.log"; then
            fail "$prov, $what: rank $r did not fail with ncclRemoteError"
            ok=0
        fi
        grep -Eq "rank $lost " "$TMP/r$r.log" && named=1
    done
    if [ "$named" = 0 ]; then
        fail "$prov, $what: no rank of host 0 names a rank of host 1"
        ok=0
    fi
    local took=$((SECONDS - t0))
    if [ "$took" -gt 20 ]; then
        fail "$prov, $what: the others took $took s to fail"
        ok=0
    fi
    for pid in "${JOB_PIDS[@]:$k}"; do
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    [ "$what" = linkdown ] && ip -n "$tag-h1" link set eth0 up
    if [ "$ok" = 1 ]; then
        echo "ok: $prov, host 1 $what: host 0 failed in $took s naming: $(cat "$TMP"/r*.log |
              grep -Eo "rank $lost [^;]*" | head -n 1)"
    else
        show_logs
    fi
}

for prov in $providers; do
    fault "$prov" kill 2
    fault "$prov" linkdown 2
done

echo "test_net.sh: $((SECONDS - t_begin)) s"
if [ "$FAILS" -ne 0 ]; then
    echo "$FAILS check(s) failed"
    exit 1
fi
echo "all checks passed"
