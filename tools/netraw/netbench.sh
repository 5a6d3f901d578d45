#!/bin/bash
# The network speed benchmark of docs/PERFORMANCE.md: two network namespaces on one machine
# ("hosts" joined by veth pairs and a bridge, scripts/netns.sh), one rank in each.
#
#   tools/netraw/netbench.sh [BUILD_DIR]          (root; BUILD_DIR defaults to ./build)
#
# For libfabric and UCX it runs the raw tagged-send tests (braid-ofi-raw, braid-ucx-raw:
# 4 MiB messages, 8 in flight) one way and both ways at once, and their 8-byte ping-pong;
# then all_reduce_perf from 8 B to 64 MiB (x2 steps) over NCCL_NET=Socket, OFI and UCX. Each
# measurement is taken REPS times (default 3) and the best is kept. The summary compares
# the 64 MiB all-reduce's bus bandwidth with the provider's raw figures. UCX_TLS=tcp, so
# that UCX stays on the veth. Environment: REPS, PROVIDERS (default "Socket OFI UCX").

set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-build}" && pwd) || exit 2
reps=${REPS:-3}
providers=${PROVIDERS:-Socket OFI UCX}
[ "$(id -u)" = 0 ] || { echo "netbench.sh: needs root (network namespaces)" >&2; exit 2; }
[ -x "$build/all_reduce_perf" ] || { echo "netbench.sh: $build is not built" >&2; exit 2; }

. "$src/scripts/netns.sh"
tag=nb$$
TMP=$(mktemp -d "${TMPDIR:-/tmp}/netbench.XXXXXX") || exit 2
trap 'netns_remove; rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM
netns_make "$tag" 2 || exit 1
export UCX_TLS=tcp NCCL_SOCKET_IFNAME==eth0
h0=$tag-h0 h1=$tag-h1

best() { sort -g | tail -n 1; }

# raw TOOL ARGS...: the server in h1, the client in h0; the client's report on stdout.
raw() {
    local tool=$build/braid-$1-raw port=$((20000 + RANDOM % 12000))
    shift
    ip netns exec "$h1" timeout 120 "$tool" -p "$port" "$@" >"$TMP/server" 2>&1 &
    local spid=$!
    ip netns exec "$h0" timeout 120 "$tool" -c 10.77.0.11 -p "$port" "$@" 2>"$TMP/client.err"
    wait "$spid"
}

# perf PROVIDER: all_reduce_perf, rank 0 in h0 and rank 1 in h1; rank 0's table on stdout.
perf() {
    local port=$((20000 + RANDOM % 12000)) r
    for r in 1 0; do
        ip netns exec "$tag-h$r" env RANK=$r WORLD_SIZE=2 NCCL_HOSTID="host$r" \
            NCCL_COMM_ID="10.77.0.10:$port" NCCL_NET="$1" \
            timeout 300 "$build/all_reduce_perf" -b 8 -e 64M -f 2 -n 20 -w 5 >"$TMP/perf$r" 2>&1 &
    done
    wait
    cat "$TMP/perf0"
}

declare -A one both lat ar ar8
for t in ofi ucx; do
    [ -x "$build/braid-$t-raw" ] || { echo "($t: braid-$t-raw is not built)"; continue; }
    for ((i = 0; i < reps; i++)); do
        raw "$t" -s 4M -n 200 -l 5000 >"$TMP/one" || { cat "$TMP/client.err"; exit 1; }
        raw "$t" -s 4M -n 200 -l 0 -B >"$TMP/both" || { cat "$TMP/client.err"; exit 1; }
        cat "$TMP/one" "$TMP/both"
        awk '/GB\/s/ { print $(NF - 1) }' "$TMP/one" >>"$TMP/$t.one"
        awk '/GB\/s/ { print $(NF - 1) }' "$TMP/both" >>"$TMP/$t.both"
        awk '/ping-pong/ { print -$(NF - 3) }' "$TMP/one" >>"$TMP/$t.lat"
    done
    one[$t]=$(best <"$TMP/$t.one")
    both[$t]=$(best <"$TMP/$t.both")
    lat[$t]=$(best <"$TMP/$t.lat" | tr -d -)
done

for p in $providers; do
    echo "# all_reduce_perf over NCCL_NET=$p"
    for ((i = 0; i < reps; i++)); do
        perf "$p" | tee "$TMP/p" | grep -v '^#'
        # out-of-place bus bandwidth at 64 MiB; out-of-place time at 8 B (negated: best = max)
        awk '$1 == 67108864 { print $8 }' "$TMP/p" >>"$TMP/$p.ar"
        awk '$1 == 8 { print -$6 }' "$TMP/p" >>"$TMP/$p.ar8"
    done
    ar[$p]=$(best <"$TMP/$p.ar")
    ar8[$p]=$(best <"$TMP/$p.ar8" | tr -d -)
done

echo
echo "# best of $reps; GB/s; raw: 4 MiB tagged sends, 8 in flight; all-reduce: 64 MiB busbw"
pct() { # pct A B: A as a percentage of B, "-" when either is missing
    if [ -n "$1" ] && [ -n "$2" ]; then
        awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", 100 * a / b }'
    else
        echo -
    fi
}
row="%-8s %10s %10s %12s %10s %10s %10s %10s\n"
printf "$row" provider raw-1way raw-2way all-reduce vs-1way vs-2way "raw 8B us" "ar 8B us"
for p in $providers; do
    t=$(echo "$p" | tr 'A-Z' 'a-z')
    o=${one[$t]:-} b=${both[$t]:-} a=${ar[$p]:-}
    printf "$row" "$p" "${o:--}" "${b:--}" "${a:--}" "$(pct "$a" "$o")" "$(pct "$a" "$b")" \
        "${lat[$t]:--}" "${ar8[$p]:--}"
done
