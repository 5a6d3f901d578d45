# Network namespaces as hosts on one machine, for tests/integration/test_net.sh and
# tools/netraw/netbench.sh (sourced; bash). Needs root and iproute2.
#
#   netns_make TAG N   namespaces TAG-h0 .. TAG-h(N-1), each with eth0 = 10.77.0.(10+i)/24
#                      and lo up, all joined by a bridge that lives in namespace TAG-sw;
#                      returns non-zero (the reason on stderr) if the machine cannot
#   NETNS_HOSTS        the host namespaces made so far
#   netns_remove       kill every process in them, delete them and the bridge's namespace
#                      (call it from an EXIT trap: it is safe after a partial netns_make)

NETNS_HOSTS=()
NETNS_SW=

netns_make() {
    local tag=$1 n=$2
    NETNS_SW=$tag-sw
    ip netns add "$NETNS_SW" || return 1
    ip -n "$NETNS_SW" link add br0 type bridge || return 1
    ip -n "$NETNS_SW" link set br0 up || return 1
    for ((i = 0; i < n; i++)); do
        local ns=$tag-h$i
        ip netns add "$ns" || return 1
        NETNS_HOSTS+=("$ns")
        ip link add "$tag-e$i" netns "$ns" type veth peer name "$tag-s$i" netns "$NETNS_SW" ||
            return 1
        ip -n "$ns" link set "$tag-e$i" name eth0 || return 1
        ip -n "$ns" addr add "10.77.0.$((10 + i))/24" dev eth0 || return 1
        ip -n "$ns" link set eth0 up || return 1
        ip -n "$ns" link set lo up || return 1
        ip -n "$NETNS_SW" link set "$tag-s$i" master br0 up || return 1
    done
}

netns_remove() {
    local ns
    for ns in "${NETNS_HOSTS[@]}" $NETNS_SW; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    NETNS_HOSTS=()
    NETNS_SW=
}
