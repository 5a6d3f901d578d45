#!/bin/bash
# Multi-host tests on one machine: network namespaces as hosts, joined by veth pairs to a
# bridge that lives in a namespace of its own, addresses in 10.77.0.0/24 only inside them,
# NCCL_HOSTID giving each namespace its own host identity (UCX_TLS=tcp keeps UCX on the
# network). For each provider (Socket, OFI, UCX) it runs coll_check (every collective, type
# and op, in and out of place, exact checks) over several layouts of ranks on hosts; with
# NCCL_NET unset, that every rank picks the default provider; that a clean run logs no
# warning at NCCL_DEBUG=WARN (ranks that finish first close their connections while the
# others still work); that a rank of the second host that never calls is named by every
# other rank's timeout; then the fault tests: a
# host's ranks killed mid-collective, and a host's link taken down, must end in
# ncclRemoteError naming the lost ranks on the others, within seconds.
# The namespaces are removed on exit, also when a check fails or the script is killed.
#
# Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2: else it is skipped (77).
# Environment: BRAID_BUILD_DIR (set by make check), BRAID_TEST_QUICK=1 (fewer layouts),
# NET_PROVIDERS (default "Socket OFI UCX"), NET_TESTS (default "coll default quiet stray
# unreachable silent fault").

set -u
build=${BRAID_BUILD_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
src=${BRAID_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
check=$build/tests/integration/coll_check
perf=$build/all_reduce_perf
late=$build/tests/fault/late_rank
for p in "$check" "$perf" "$late"; do
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
PASSES=0
HOST_ENV=()
fail() {
    echo "FAIL: $1"
    FAILS=$((FAILS + 1))
}
pass() {
    echo "ok: $*"
    PASSES=$((PASSES + 1))
}

# start_job LAYOUT PROVIDER CMD...: one rank per entry of "ranks per host", in the host's
# namespace (with the environment words of HOST_ENV[host] if set); pids in JOB_PIDS, rank
# r's output in $TMP/r<r>.log.
start_job() {
    local layout=$1 prov=$2
    shift 2
    # below Linux's ephemeral ports (32768 and up), which earlier jobs' connections hold
    local n=0 h=0 port=$((20000 + RANDOM % 12000)) r=0
    for k in $layout; do n=$((n + k)); done
    JOB_PIDS=()
    JOB_HOST=()
    for k in $layout; do
        for ((j = 0; j < k; j++)); do
            # a subshell of its own, so that the notice of a rank the fault tests kill goes
            # to the rank's log, not to ours
            # shellcheck disable=SC2086 # HOST_ENV[h]: extra VAR=value words for host h
            (ip netns exec "$tag-h$h" env RANK=$r WORLD_SIZE=$n NCCL_HOSTID="host$h" \
                ${HOST_ENV[$h]:-} NCCL_COMM_ID="10.77.0.10:$port" NCCL_NET="$prov" \
                timeout -s KILL 240 "$@"; exit) >"$TMP/r$r.log" 2>&1 &
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
    local h pids
    for f in "$TMP"/r*.log; do
        echo "--- ${f##*/}:"
        tail -n 8 "$f"
    done
    # where each host's processes are (a rank that logged nothing: not started, or stuck)
    for ((h = 0; h < 4; h++)); do
        pids=$(ip netns pids "$tag-h$h" 2>/dev/null | tr '\n' ',')
        [ -n "$pids" ] && { echo "--- host $h:"; ps -o pid,stat,wchan:24,etime,args -p "${pids%,}"; }
    done
}

# wait_log R PATTERN: until rank R's log has a line matching PATTERN (grep -E), at most 60 s;
# the state a fault needs is read from the ranks' logs, never assumed after a sleep.
wait_log() {
    local t0=$SECONDS
    until grep -Eq "$2" "$TMP/r$1.log" 2>/dev/null; do
        [ $((SECONDS - t0)) -lt 60 ] || { fail "rank $1 never logged /$2/ in 60 s"; return 1; }
        sleep 0.01
    done
}

# wait_paused H N: until N processes of host H have stopped themselves at their setup pause
# (BRAID_SETUP_PAUSE); their pids in PAUSED.
wait_paused() {
    local t0=$SECONDS pid
    while :; do
        PAUSED=()
        for pid in $(ip netns pids "$tag-h$1"); do
            [ "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1)" = T ] && PAUSED+=($pid)
        done
        [ "${#PAUSED[@]}" -ge "$2" ] && return 0
        [ $((SECONDS - t0)) -lt 60 ] ||
            { fail "host $1: ${#PAUSED[@]} of $2 ranks paused in their setup in 60 s"; return 1; }
        sleep 0.01
    done
}

# kill_job: end every process of the job (a check gave up on it).
kill_job() {
    local h pid
    for ((h = 0; h < 4; h++)); do
        ip netns pids "$tag-h$h" | xargs -r kill -9
    done
    for pid in "${JOB_PIDS[@]}"; do
        wait "$pid" 2>/dev/null
    done
}

# error_line R: the line of rank R's log that says which call failed, and why.
error_line() {
    grep -m1 -E ": rank $1: nccl[A-Za-z]+( \(.*\))? failed: " "$TMP/r$1.log"
}

if [ "${BRAID_TEST_QUICK:-0}" = 1 ]; then
    layouts=("1 1" "2 1" "1 2 1")
else
    layouts=("1 1" "2 2" "3 1" "1 2 1" "1 1 1 1")
fi
providers=${NET_PROVIDERS:-Socket OFI UCX}
want_test() {
    [[ " ${NET_TESTS:-coll default quiet stray unreachable silent fault} " == *" $1 "* ]]
}
t_begin=$SECONDS
echo "test_net.sh: providers: $providers; tests: ${NET_TESTS:-all}; layouts:" \
     "$(printf '[%s] ' "${layouts[@]}")$([ "${BRAID_TEST_QUICK:-0}" = 1 ] &&
     echo "(BRAID_TEST_QUICK=1: the quick set)")"

if want_test coll; then
    for prov in $providers; do
        for layout in "${layouts[@]}"; do
            rm -f "$TMP"/r*.log
            t0=$SECONDS
            start_job "$layout" "$prov" "$check" -q
            if wait_job; then
                pass "$prov, ranks per host $layout: coll_check passed ($((SECONDS - t0)) s)"
            else
                fail "$prov, ranks per host $layout: ranks ${JOB_FAILED[*]} failed"
                show_logs
            fi
        done
    done
fi

# NCCL_NET unset: the first provider of UCX, OFI, Socket that is built (the raw tools are
# built exactly when UCX and OFI are), the same on every rank.
if want_test default; then
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
        pass "NCCL_NET unset: both ranks use $want"
    fi
fi

# A long all-reduce loop on hosts 0 and 1 (K ranks each); once every rank has finished its
# init (its log says so), `what` happens to host 1; host 0's ranks must all fail with
# ncclRemoteError within 20 s, in the all-reduce, and the first to notice must name one of
# host 1's ranks (the others may name that rank's failure, which they see first through
# shared memory).
fault() {
    local prov=$1 what=$2 k=$3 r
    rm -f "$TMP"/r*.log
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT start_job "$k $k" "$prov" "$perf" -b 1M -e 1M \
        -n 1000000 -w 1 -c 0
    for ((r = 0; r < 2 * k; r++)); do
        wait_log $r "init done" || { show_logs; kill_job; return; }
    done
    local t0=$SECONDS
    case $what in
    kill) ip netns pids "$tag-h1" | xargs -r kill -9 ;;
    linkdown) ip -n "$tag-h1" link set eth0 down ;;
    esac
    local ok=1 named=0 lost err
    lost=$( [ "$k" = 2 ] && echo "[23]" || echo "1")
    for ((r = 0; r < k; r++)); do
        wait "${JOB_PIDS[$r]}" && { fail "$prov, $what: rank $r exited 0"; ok=0; }
        err=$(error_line $r)
        # the measured all-reduce, or the tool's own agreement between ranks (sends and
        # receives) that runs between sizes
        if [[ "$err" != *"ncclAllReduce"*" failed: remote process exited"* &&
              "$err" != *"(driver sync) failed: remote process exited"* ]]; then
            fail "$prov, $what: rank $r did not fail its calls with ncclRemoteError: $err"
            ok=0
        fi
        [[ "$err" =~ rank\ $lost\  ]] && named=1
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
        pass "$prov, host 1 $what: host 0 failed in $took s naming: $(cat "$TMP"/r*.log |
              grep -Eo "rank $lost [^;]*" | grep -v NCCL | head -n 1)"
    else
        show_logs
    fi
}

# Host 1's ranks die while the job sets up its network connections: each stops itself as
# it is about to connect over the provider (BRAID_SETUP_PAUSE=net), when its health links
# are up, so that no rank can finish its init; then they are killed. Host 0's ranks must
# fail their init with ncclRemoteError within 10 s, naming a rank of host 1, instead of
# waiting for BRAID_BOOTSTRAP_TIMEOUT (30 s here).
setup_kill() {
    local prov=$1 ok=1 named=0 r err
    rm -f "$TMP"/r*.log
    HOST_ENV=("" "BRAID_SETUP_PAUSE=net")
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET start_job "2 2" "$prov" "$perf" -b 8 -e 8 -n 2 -w 1
    HOST_ENV=()
    wait_paused 1 2 || { show_logs; kill_job; return; }
    local t0=$SECONDS
    kill -9 "${PAUSED[@]}"
    for r in 0 1; do
        wait "${JOB_PIDS[$r]}" && { fail "$prov, setup kill: rank $r exited 0"; ok=0; }
        err=$(error_line $r)
        if [[ "$err" != *"ncclCommInitRank failed: remote process exited"* ]]; then
            fail "$prov, setup kill: rank $r did not fail its init with ncclRemoteError: $err"
            ok=0
        fi
        [[ "$err" =~ rank\ [23]\  ]] && named=1
    done
    [ "$named" = 1 ] ||
        { fail "$prov, setup kill: no rank of host 0 names a rank of host 1"; ok=0; }
    local took=$((SECONDS - t0))
    [ "$took" -le 10 ] || { fail "$prov, setup kill: host 0 took $took s to fail"; ok=0; }
    wait "${JOB_PIDS[2]}" "${JOB_PIDS[3]}" 2>/dev/null
    if [ "$ok" = 1 ]; then
        pass "$prov, host 1 killed during network setup: host 0 failed in $took s:" \
             "$(error_line 0 | sed 's/.*failed: //')"
    else
        show_logs
    fi
}

# le N BYTES / pad STRING BYTES: a little-endian integer, a zero-padded string (for hello_bin)
le() {
    local i
    for ((i = 0; i < $2; i++)); do
        printf "\\x$(printf %02x $((($1 >> (8 * i)) & 255)))"
    done
}
pad() {
    printf %s "$1"
    head -c $(($2 - ${#1})) /dev/zero
}

# hello_bin NONCE BRAID_VERSION: a braid handshake from rank 1 to rank 0 as the Socket
# provider frames it: an 8-byte length, then net_hello_t (transports/net/net_int.h, 248 bytes:
# magic, job nonce, from, to, braid's version, the provider's name and version).
hello_bin() {
    le 248 8
    le 0x627261696468656c 8
    le "$1" 8
    le 1 4
    le 0 4
    pad "$2" 32
    pad Socket 32
    pad "forged by test_net.sh" 160
}

# spray KIND: from host 3, connect once to every port host 0 listens on now; KIND junk:
# connect and close, an HTTP request, 400 zero bytes; job: a braid handshake with another
# job's nonce; version: this job's nonce, another braid's version.
spray() {
    local kind=$1 nonce p
    if [ "$kind" != junk ]; then
        nonce=$(grep -Eom1 "rank 0 of 2 joined \(nonce [0-9a-f]+" "$TMP/r0.log" |
                grep -Eo "[0-9a-f]+$")
        case $kind in
        job) hello_bin $((16#$nonce ^ 1)) 0.0.0-forged >"$TMP/hello.bin" ;;
        version) hello_bin $((16#$nonce)) 0.0.0-forged >"$TMP/hello.bin" ;;
        esac
    fi
    SPRAYED=0
    for p in $(ip netns exec "$tag-h0" ss -Hltn | awk '{ sub(/.*:/, "", $4); print $4 }'); do
        SPRAYED=$((SPRAYED + 1))
        if [ "$kind" = junk ]; then
            ip netns exec "$tag-h3" bash -c "exec 3<>/dev/tcp/10.77.0.10/$p" 2>/dev/null
            ip netns exec "$tag-h3" bash -c "exec 3<>/dev/tcp/10.77.0.10/$p &&
                printf 'GET / HTTP/1.0\r\n\r\n' >&3 && sleep 0.1" 2>/dev/null
            ip netns exec "$tag-h3" bash -c "exec 3<>/dev/tcp/10.77.0.10/$p &&
                head -c 400 /dev/zero >&3 && sleep 0.1" 2>/dev/null
        else
            ip netns exec "$tag-h3" bash -c "exec 3<>/dev/tcp/10.77.0.10/$p &&
                cat '$TMP/hello.bin' >&3 && sleep 0.1" 2>/dev/null
        fi
    done
}

# Strays: a process on host 3 that is not of this job connects to every port host 0 listens
# on while host 0's rank is known to be setting up its connections: rank 1 (host 1) stops
# itself as it is about to connect over the provider (BRAID_SETUP_PAUSE=net), so rank 0,
# whose health links are up (its log says so), waits for it, accepting connections. Then
# the spray; with Socket, whose refusals rank 0 logs, rank 0's log must say what it refused
# before rank 1 goes on. KIND junk and job must leave the job working (over OFI libfabric
# takes the junk itself); KIND version must fail both ranks within 20 s, rank 0 naming the
# other version, rank 1 naming rank 0. Not over UCX: UCX 1.13 aborts the process on bytes
# that are not its own (README, known limits).
stray() {
    local prov=$1 kind=$2 ok=1 want= want2=
    rm -f "$TMP"/r*.log
    case $kind in
    junk) want="refused a connection that is not a braid handshake"
          want2="dropped a connection that failed before its handshake" ;;
    job) want="refused a connection from rank 1 of another job" ;;
    version) want="rank 1 \(.*\) runs braid 0.0.0-forged over Socket" ;;
    esac
    HOST_ENV=("" "BRAID_SETUP_PAUSE=net")
    # libfabric's tcp;ofi_rxm keeps state for the junk it takes and never frees it: that
    # leak, in host 0's rank only, is suppressed here (tests/lsan_ofi_junk.supp), where
    # the sanitizer build would report it
    [ "$prov $kind" = "OFI junk" ] && [ -n "${LSAN_OPTIONS:-}" ] &&
        HOST_ENV[0]="LSAN_OPTIONS=$LSAN_OPTIONS:suppressions=$src/tests/lsan_ofi_junk.supp"
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,NET start_job "1 1" "$prov" \
        "$perf" -b 8 -e 8 -n 5 -w 1
    HOST_ENV=()
    if ! wait_paused 1 1 || ! wait_log 0 "health links to the ranks of other hosts up"; then
        show_logs
        kill_job
        return
    fi
    spray "$kind"
    if [ "$prov" = Socket ]; then
        wait_log 0 "$want" || ok=0
        [ -z "$want2" ] || wait_log 0 "$want2" || ok=0
    fi
    local t0=$SECONDS
    kill -CONT "${PAUSED[@]}"
    wait_job
    if [ "$kind" = version ]; then
        [ "${#JOB_FAILED[@]}" = 2 ] || { fail "$prov, stray version: a rank succeeded"; ok=0; }
        error_line 1 | grep -Eq "failed: .*rank 0 " ||
            { fail "$prov, stray version: rank 1's error does not name rank 0"; ok=0; }
        [ $((SECONDS - t0)) -le 20 ] ||
            { fail "$prov, stray version: took $((SECONDS - t0)) s to fail"; ok=0; }
    elif [ "${#JOB_FAILED[@]}" != 0 ]; then
        fail "$prov, stray $kind: ranks ${JOB_FAILED[*]} failed"
        ok=0
    fi
    if [ "$ok" = 1 ]; then
        pass "$prov, stray $kind on $SPRAYED ports of host 0 during its setup: handled"
    else
        show_logs
    fi
}

# A clean run says nothing at NCCL_DEBUG=WARN: the ranks that finish the last collective
# first close their connections while the others still drive theirs.
if want_test quiet; then
    for prov in $providers; do
        rm -f "$TMP"/r*.log
        NCCL_DEBUG=WARN start_job "2 2" "$prov" "$perf" -b 8 -e 64K -f 8 -n 20 -w 2
        if ! wait_job; then
            fail "$prov, clean run: ranks ${JOB_FAILED[*]} failed"
            show_logs
        elif grep -q "NCCL WARN" "$TMP"/r*.log; then
            fail "$prov, clean run: warnings: $(grep -h "NCCL WARN" "$TMP"/r*.log | head -n 2)"
        else
            pass "$prov, a clean run on 2 hosts x 2 logs no warning"
        fi
    done
fi

if want_test stray; then
    for prov in $providers; do
        case $prov in Socket | OFI) stray "$prov" junk ;; esac
    done
    if [[ " $providers " == *" Socket "* ]]; then
        stray Socket job
        stray Socket version
    fi
fi

# A rank whose address cannot be reached: NCCL_SOCKET_IFNAME puts host 0's rank on a link
# that leads nowhere (10.77.0.200 on a veth pair inside host 0, whose ARP answers only on
# the link that has the address). Host 1's rank must fail at once naming rank 0 as
# unreachable, and rank 0 within BRAID_BOOTSTRAP_TIMEOUT naming rank 1.
unreachable() {
    local h0=$tag-h0 ok=1
    rm -f "$TMP"/r*.log
    if ! { ip -n "$h0" link add x0 type veth peer name x1 &&
           ip -n "$h0" addr add 10.77.0.200/32 dev x0 && ip -n "$h0" link set x0 up &&
           ip -n "$h0" link set x1 up &&
           ip netns exec "$h0" sysctl -qw net.ipv4.conf.all.arp_ignore=1; } 2>"$TMP/ip.err"; then
        fail "unreachable: cannot make the dead-end link: $(head -n 1 "$TMP/ip.err")"
        return
    fi
    local t0=$SECONDS
    HOST_ENV=("NCCL_SOCKET_IFNAME==x0")
    BRAID_BOOTSTRAP_TIMEOUT=10 start_job "1 1" Socket "$perf" -b 8 -e 8 -n 2 -w 1
    HOST_ENV=()
    wait_job
    local took=$((SECONDS - t0))
    ip -n "$h0" link del x0
    ip netns exec "$h0" sysctl -qw net.ipv4.conf.all.arp_ignore=0
    if [ "${#JOB_FAILED[@]}" != 2 ]; then
        fail "unreachable: ranks ${JOB_FAILED[*]} failed, not both"
        ok=0
    fi
    if ! grep -q "failed: .*cannot reach rank 0 .* at 10.77.0.200:" "$TMP/r1.log"; then
        fail "unreachable: rank 1 does not say that it cannot reach rank 0 at its address"
        ok=0
    fi
    if ! grep -q "failed: .*rank 1 " "$TMP/r0.log"; then
        fail "unreachable: rank 0's error does not name rank 1"
        ok=0
    fi
    if [ "$took" -gt 20 ]; then
        fail "unreachable: the ranks took $took s to fail"
        ok=0
    fi
    if [ "$ok" = 1 ]; then
        pass "an unreachable rank: both failed within $took s: $(grep -o "cannot reach rank 0 .* at [0-9.:]*" \
              "$TMP/r1.log" | head -n 1)"
    else
        show_logs
    fi
}

want_test unreachable && unreachable

# A rank that never calls: 2 hosts of 2 ranks; after one all-reduce together, rank 3 (host 1)
# stays out of the second (late_rank --rank, BRAID_TIMEOUT=3). Ranks 0, 1 and 2 must fail
# with ncclRemoteError naming rank 3 as not having reached it: rank 2 reads that in shared
# memory, ranks 0 and 1 ask the ranks of host 1 over the health links. Rank 3 is ended once
# the others have exited.
silent() {
    local prov=$1 r ok=1
    rm -f "$TMP"/r*.log
    start_job "2 2" "$prov" "$late" --rank
    local t0=$SECONDS
    for r in 0 1 2; do
        if ! wait "${JOB_PIDS[$r]}"; then
            fail "$prov, silent rank 3: rank $r: $(grep -m1 -E 'late_rank|failed' "$TMP/r$r.log")"
            ok=0
        fi
    done
    local took=$((SECONDS - t0))
    kill_job
    if [ "$ok" = 1 ]; then
        pass "$prov, rank 3 never calls: ranks 0-2 named it ($took s): $(grep -m1 -o \
              'ranks 3 (.*' "$TMP/r0.log")"
    else
        show_logs
    fi
}

if want_test silent; then
    for prov in $providers; do
        silent "$prov"
    done
fi

if want_test fault; then
    for prov in $providers; do
        setup_kill "$prov"
        fault "$prov" kill 2
        fault "$prov" linkdown 2
    done
fi

echo "test_net.sh: $((SECONDS - t_begin)) s, $PASSES checks passed, $FAILS failed"
if [ "$FAILS" -ne 0 ] || [ "$PASSES" -eq 0 ]; then
    exit 1
fi
echo "all checks passed"
